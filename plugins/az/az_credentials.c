/* The credentials of az requests. az_authorize (az_store.c) takes, for
 * the container's account, in this order:
 *
 *   1. a connection string (the option, else AZURE_STORAGE_CONNECTION_STRING;
 *      it wins over the options, as in adlfs and the Azure CLI):
 *      AccountName/AccountKey, SharedAccessSignature, BlobEndpoint, or
 *      UseDevelopmentStorage=true (Azurite's well-known account)
 *   2. the account_key option (AZURE_STORAGE_KEY, AZURE_STORAGE_ACCOUNT_KEY):
 *      Shared Key signing
 *   3. the sas_token option (AZURE_STORAGE_SAS_TOKEN): the SAS on every URL
 *   4. anonymous=1: nothing (public containers)
 *   5. an Entra ID bearer token (az_bearer, here): the token option as it
 *      is; else a client secret (AZURE_TENANT_ID, AZURE_CLIENT_ID,
 *      AZURE_CLIENT_SECRET); else workload identity (AZURE_FEDERATED_TOKEN_FILE
 *      with the tenant and client ids); else managed identity, the
 *      instance metadata service, whose probe gives up after PROBE_MS so
 *      that code off Azure does not wait.
 *
 * Entra tokens are kept per filesystem and fetched again before they
 * expire (objstore_token.h); nothing found is UNAUTHENTICATED, naming
 * what was tried. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "az_internal.h"

#define PROBE_MS 500
#define SCOPE "https://storage.azure.com/.default"
#define RESOURCE "https://storage.azure.com"
#define AUTHORITY "https://login.microsoftonline.com"
#define IMDS "http://169.254.169.254/metadata/identity/oauth2/token"

void az_credentials_init(az_fs* fs) { objstore_token_cache_init(&fs->entra, "az"); }

void az_credentials_destroy(az_fs* fs) { objstore_token_cache_destroy(&fs->entra); }

/* ---- connection strings ---------------------------------------------------------------- */

void az_parse_connection_string(const char* text, az_account* out) {
  char protocol[16] = "https", suffix[128] = "core.windows.net", proxy[256] = "";
  int development = 0;
  const char* p = text;
  while (*p) {
    size_t n = strcspn(p, ";");
    const char* eq = memchr(p, '=', n);
    if (eq != NULL) {
      size_t name = (size_t)(eq - p), len = n - name - 1;
      const char* value = eq + 1;
#define TAKE(field) snprintf(field, sizeof field, "%.*s", (int)len, value)
      if (name == 11 && strncasecmp(p, "AccountName", 11) == 0) TAKE(out->name);
      else if (name == 10 && strncasecmp(p, "AccountKey", 10) == 0) TAKE(out->key);
      else if (name == 21 && strncasecmp(p, "SharedAccessSignature", 21) == 0) TAKE(out->sas);
      else if (name == 12 && strncasecmp(p, "BlobEndpoint", 12) == 0) TAKE(out->endpoint);
      else if (name == 24 && strncasecmp(p, "DefaultEndpointsProtocol", 24) == 0) TAKE(protocol);
      else if (name == 14 && strncasecmp(p, "EndpointSuffix", 14) == 0) TAKE(suffix);
      else if (name == 26 && strncasecmp(p, "DevelopmentStorageProxyUri", 26) == 0) TAKE(proxy);
      else if (name == 21 && strncasecmp(p, "UseDevelopmentStorage", 21) == 0)
        development = len == 4 && strncasecmp(value, "true", 4) == 0;
#undef TAKE
    }
    p += n;
    if (*p == ';') ++p;
  }
  if (development) {
    snprintf(out->name, sizeof out->name, "%s", AZ_DEV_ACCOUNT);
    snprintf(out->key, sizeof out->key, "%s", AZ_DEV_KEY);
    snprintf(out->endpoint, sizeof out->endpoint, "%s/%s", *proxy ? proxy : "http://127.0.0.1:10000",
             AZ_DEV_ACCOUNT);
  } else if (!*out->endpoint && *out->name) {
    snprintf(out->endpoint, sizeof out->endpoint, "%s://%s.blob.%s", protocol, out->name, suffix);
  }
  if (out->sas[0] == '?') memmove(out->sas, out->sas + 1, strlen(out->sas));
}

/* ---- Entra ID tokens -------------------------------------------------------------------- */

typedef struct asking {
  az_fs* fs;
  const az_config* cfg;
  objstore_token_fetch source; /* from_tenant or from_metadata */
} asking;

static int form_pair(plugin_buf* b, const char* name, const char* value) {
  return (b->len > 0 && plugin_buf_append(b, "&", 1) != 0) || plugin_buf_append(b, name, strlen(name)) != 0 ||
                 plugin_buf_append(b, "=", 1) != 0 || objstore_form_value(b, value) != 0
             ? -1
             : 0;
}

/* A client secret, or workload identity's federated token, exchanged at
 * the tenant's token endpoint (client credentials grant). */
static int from_tenant(void* arg, objstore_token* out, TF_Status* status) {
  asking* a = arg;
  const az_config* cfg = a->cfg;
  const char* authority = *cfg->authority_host ? cfg->authority_host : AUTHORITY;
  char url[700];
  char* assertion = NULL;
  plugin_buf form = {0};
  int rc = -1;
  size_t n = strlen(authority);
  while (n > 0 && authority[n - 1] == '/') --n;
  snprintf(url, sizeof url, "%.*s/%s/oauth2/v2.0/token", (int)n, authority, cfg->tenant_id);
  if (*cfg->client_secret) {
    snprintf(out->source, sizeof out->source, "Entra ID client secret (client %.60s, tenant %.60s)",
             cfg->client_id, cfg->tenant_id);
  } else {
    snprintf(out->source, sizeof out->source, "workload identity (%.200s)", cfg->federated_token_file);
    assertion = plugin_read_text(cfg->federated_token_file, 1 << 16);
    if (assertion == NULL) {
      char msg[600];
      snprintf(msg, sizeof msg, "az: cannot read the federated token file %s (AZURE_FEDERATED_TOKEN_FILE)",
               cfg->federated_token_file);
      TF_SetStatus(status, TF_UNAUTHENTICATED, msg);
      return -1;
    }
    assertion[strcspn(assertion, "\r\n")] = '\0';
  }
  if (form_pair(&form, "grant_type", "client_credentials") != 0 ||
      form_pair(&form, "client_id", cfg->client_id) != 0 || form_pair(&form, "scope", SCOPE) != 0 ||
      (assertion == NULL && form_pair(&form, "client_secret", cfg->client_secret) != 0) ||
      (assertion != NULL &&
       (form_pair(&form, "client_assertion_type",
                  "urn:ietf:params:oauth:client-assertion-type:jwt-bearer") != 0 ||
        form_pair(&form, "client_assertion", assertion) != 0)) ||
      plugin_buf_append(&form, "", 1) != 0) {
    plugin_set_oom(status);
  } else {
    struct curl_slist* headers = curl_slist_append(NULL, "Content-Type: application/x-www-form-urlencoded");
    rc = objstore_token_ask(a->fs->store.engine, &cfg->transport, url, form.data, headers, 0, out, status);
    curl_slist_free_all(headers);
  }
  if (form.data != NULL) memset(form.data, 0, form.len);
  plugin_buf_free(&form);
  if (assertion != NULL) memset(assertion, 0, strlen(assertion));
  free(assertion);
  return rc;
}

/* Managed identity: the instance metadata service (or the msi_endpoint
 * option's), probed briefly. */
static int from_metadata(void* arg, objstore_token* out, TF_Status* status) {
  asking* a = arg;
  const az_config* cfg = a->cfg;
  const char* endpoint = *cfg->msi_endpoint ? cfg->msi_endpoint : IMDS;
  objstore_settings probe = cfg->transport;
  plugin_buf url = {0};
  struct curl_slist* headers = curl_slist_append(NULL, "Metadata: true");
  int rc = -1;
  snprintf(out->source, sizeof out->source, "managed identity (%.200s)", endpoint);
  probe.connect_timeout_ms = PROBE_MS;
  probe.max_attempts = 2;
  if (plugin_buf_append(&url, endpoint, strlen(endpoint)) == 0 &&
      plugin_buf_append(&url, "?api-version=2019-08-01&resource=", 33) == 0 &&
      objstore_form_value(&url, RESOURCE) == 0 &&
      (!*cfg->client_id || (plugin_buf_append(&url, "&client_id=", 11) == 0 &&
                            objstore_form_value(&url, cfg->client_id) == 0)) &&
      plugin_buf_append(&url, "", 1) == 0)
    rc = objstore_token_ask(a->fs->store.engine, &probe, url.data, NULL, headers, 1, out, status);
  else
    plugin_set_oom(status);
  curl_slist_free_all(headers);
  plugin_buf_free(&url);
  return rc;
}

/* The source's token, or UNAUTHENTICATED naming every source tried
 * (kept so by the cache, for doctor and for the calls within its wait). */
static int from_chain(void* arg, objstore_token* out, TF_Status* status) {
  asking* a = arg;
  char msg[1400];
  if (a->source(arg, out, status) == 0) return 0;
  snprintf(msg, sizeof msg,
           "az: no credentials: tried a connection string (connection_string, "
           "AZURE_STORAGE_CONNECTION_STRING), an account key (account_key, AZURE_STORAGE_KEY), a "
           "SAS (sas_token, AZURE_STORAGE_SAS_TOKEN), the token option, %s (%.500s); for a public "
           "container set anonymous=1",
           a->source == from_tenant ? "Entra ID (AZURE_TENANT_ID, AZURE_CLIENT_ID, AZURE_CLIENT_SECRET or "
                                      "AZURE_FEDERATED_TOKEN_FILE)"
                                    : "and managed identity, as no client secret or federated token is set",
           TF_Message(status));
  TF_SetStatus(status, TF_UNAUTHENTICATED, msg);
  return -1;
}

int az_bearer(az_fs* fs, const az_config* cfg, char* out, size_t cap, TF_Status* status) {
  asking a = {fs, cfg, from_metadata};
  char key[700];
  *out = '\0';
  if (*cfg->token) {
    snprintf(out, cap, "%s", cfg->token);
    return 0;
  }
  if (*cfg->tenant_id && *cfg->client_id && (*cfg->client_secret || *cfg->federated_token_file)) {
    snprintf(key, sizeof key, "tenant %s %s %s", cfg->tenant_id, cfg->client_id,
             *cfg->client_secret ? "secret" : cfg->federated_token_file);
    a.source = from_tenant;
  } else {
    snprintf(key, sizeof key, "metadata %s %s", cfg->msi_endpoint, cfg->client_id);
  }
  return objstore_token_get(&fs->entra, key, from_chain, &a, out, cap, status);
}

void az_credential_source(objstore_fs* store, const void* config, char* out, size_t cap) {
  az_fs* fs = (az_fs*)store;
  const az_config* cfg = config;
  az_account acct;
  const char* via = *cfg->connection_string ? "the connection string" : "the options";
  az_account_of(cfg, &acct);
  if (*acct.key) {
    snprintf(out, cap, "Shared Key of account %s (%s)", acct.name, via);
  } else if (*acct.sas) {
    snprintf(out, cap, "a SAS token for account %s (%s)", acct.name, via);
  } else if (cfg->anonymous) {
    snprintf(out, cap, "anonymous (the anonymous option)");
  } else if (*cfg->token) {
    snprintf(out, cap, "the token option");
  } else {
    char token[8192];
    TF_Status* ignored = TF_NewStatus();
    az_bearer(fs, cfg, token, sizeof token, ignored); /* asks the chain, when it has not been */
    memset(token, 0, sizeof token);
    TF_DeleteStatus(ignored);
    objstore_token_describe(&fs->entra, out, cap);
  }
}
