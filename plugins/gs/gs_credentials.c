/* The bearer token of gs requests, from the first source that gives one,
 * in the order TensorFlow's GCS filesystem and google-auth look:
 *
 *   1. anonymous=1: none at all (public buckets)
 *   2. the token option: sent as it is
 *   3. GOOGLE_AUTH_TOKEN_FOR_TESTING (TensorFlow's): sent as it is
 *   4. an emulator (an http:// endpoint, as STORAGE_EMULATOR_HOST names
 *      one): none
 *   5. a credentials file: the credentials_file option, else
 *      GOOGLE_APPLICATION_CREDENTIALS, else gcloud's application-default
 *      file ($CLOUDSDK_CONFIG or ~/.config/gcloud); a service account
 *      signs a JWT (RS256, OpenSSL) for the token endpoint, an
 *      authorized_user sends its refresh token there
 *   6. the GCE metadata server (GCE_METADATA_HOST, else
 *      metadata.google.internal), unless NO_GCE_CHECK=true; its probe
 *      gives up after PROBE_MS so that a laptop does not wait
 *
 * Tokens from 5 and 6 are kept per filesystem and fetched again
 * before they expire (objstore_token.h). Nothing found is UNAUTHENTICATED, naming
 * what was tried. Requests to token services go through the engine, with
 * its retry policy. */
#define _POSIX_C_SOURCE 200809L

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "gs_internal.h"
#include "objstore_formats.h"

#define PROBE_MS 500     /* the metadata server's connect limit, off GCE */
#define MAX_DOCUMENT (1 << 20)
#define SCOPE "https://www.googleapis.com/auth/cloud-platform"
#define GOOGLE_TOKEN_URI "https://oauth2.googleapis.com/token"

void gs_credentials_init(gs_fs* fs) { objstore_token_cache_init(&fs->token, "gs"); }

void gs_credentials_destroy(gs_fs* fs) { objstore_token_cache_destroy(&fs->token); }

/* ---- documents ----------------------------------------------------------------------- */

static char* json_member(const char* doc, const char* key) {
  return doc != NULL ? objstore_json_get(doc, strlen(doc), key) : NULL;
}

/* base64url without padding, as JWTs carry it. */
static int base64url(plugin_buf* out, const unsigned char* data, size_t n) {
  static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  size_t i;
  for (i = 0; i < n; i += 3) {
    unsigned v = (unsigned)data[i] << 16 | (i + 1 < n ? (unsigned)data[i + 1] << 8 : 0) |
                 (i + 2 < n ? data[i + 2] : 0);
    char quad[4] = {abc[v >> 18 & 63], abc[v >> 12 & 63], abc[v >> 6 & 63], abc[v & 63]};
    if (plugin_buf_append(out, quad, n - i >= 3 ? 4 : n - i + 1) != 0) return -1;
  }
  return 0;
}

/* ---- asking a token service ------------------------------------------------------------ */

/* The signed JWT a service account exchanges for a token. */
static int signed_jwt(const char* doc, const char* email, const char* audience, plugin_buf* jwt,
                      TF_Status* status) {
  char* pem = json_member(doc, "private_key");
  char* key_id = json_member(doc, "private_key_id");
  char header[300], claims[1200];
  time_t now = time(NULL);
  BIO* bio = NULL;
  EVP_PKEY* key = NULL;
  EVP_MD_CTX* ctx = NULL;
  unsigned char* signature = NULL;
  size_t signature_len = 0;
  int rc = -1;
  if (pem == NULL) {
    TF_SetStatus(status, TF_UNAUTHENTICATED, "gs: the service account file has no private_key");
    goto done;
  }
  snprintf(header, sizeof header, "{\"alg\":\"RS256\",\"typ\":\"JWT\"%s%s%s}", key_id ? ",\"kid\":\"" : "",
           key_id ? key_id : "", key_id ? "\"" : "");
  snprintf(claims, sizeof claims,
           "{\"iss\":\"%s\",\"scope\":\"" SCOPE "\",\"aud\":\"%s\",\"iat\":%lld,\"exp\":%lld}", email,
           audience, (long long)now, (long long)now + 3600);
  if (base64url(jwt, (const unsigned char*)header, strlen(header)) != 0 || plugin_buf_append(jwt, ".", 1) != 0 ||
      base64url(jwt, (const unsigned char*)claims, strlen(claims)) != 0)
    goto oom;
  if ((bio = BIO_new_mem_buf(pem, -1)) == NULL || (key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL)) == NULL) {
    TF_SetStatus(status, TF_UNAUTHENTICATED, "gs: the service account's private_key is not a PEM private key");
    goto done;
  }
  if ((ctx = EVP_MD_CTX_new()) == NULL || EVP_DigestSignInit(ctx, NULL, EVP_sha256(), NULL, key) != 1 ||
      EVP_DigestSign(ctx, NULL, &signature_len, (const unsigned char*)jwt->data, jwt->len) != 1 ||
      (signature = malloc(signature_len)) == NULL ||
      EVP_DigestSign(ctx, signature, &signature_len, (const unsigned char*)jwt->data, jwt->len) != 1) {
    TF_SetStatus(status, TF_UNAUTHENTICATED, "gs: the service account's key could not sign (RS256)");
    goto done;
  }
  if (plugin_buf_append(jwt, ".", 1) != 0 || base64url(jwt, signature, signature_len) != 0) goto oom;
  rc = 0;
  goto done;
oom:
  plugin_set_oom(status);
done:
  free(signature);
  EVP_MD_CTX_free(ctx);
  EVP_PKEY_free(key);
  BIO_free(bio);
  if (pem != NULL) memset(pem, 0, strlen(pem));
  free(pem);
  free(key_id);
  return rc;
}

/* A token from the credentials file at path: 0, or -1 with status set. */
static int from_file(gs_fs* fs, const gs_config* cfg, const char* path, objstore_token* out, TF_Status* status) {
  char* doc = plugin_read_text(path, MAX_DOCUMENT);
  char* type = json_member(doc, "type");
  char* token_uri = json_member(doc, "token_uri");
  const char* uri = token_uri != NULL && *token_uri ? token_uri : GOOGLE_TOKEN_URI;
  plugin_buf form = {0};
  struct curl_slist* headers = curl_slist_append(NULL, "Content-Type: application/x-www-form-urlencoded");
  int rc = -1;
  char msg[700];
  if (doc == NULL) {
    snprintf(msg, sizeof msg, "gs: the credentials file %s cannot be read", path);
    TF_SetStatus(status, TF_UNAUTHENTICATED, msg);
  } else if (type != NULL && strcmp(type, "service_account") == 0) {
    char* email = json_member(doc, "client_email");
    plugin_buf jwt = {0};
    snprintf(out->source, sizeof out->source, "service account %s (%s)", email ? email : "?", path);
    if (email != NULL && signed_jwt(doc, email, uri, &jwt, status) == 0 &&
        plugin_buf_append(&form, "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=", 75) == 0 &&
        plugin_buf_append(&form, jwt.data, jwt.len) == 0)
      rc = objstore_token_ask(fs->store.engine, &cfg->transport, uri, form.data, headers, 0, out, status);
    else if (email == NULL)
      TF_SetStatus(status, TF_UNAUTHENTICATED, "gs: the service account file has no client_email");
    free(email);
    plugin_buf_free(&jwt);
  } else if (type != NULL && strcmp(type, "authorized_user") == 0) {
    char* id = json_member(doc, "client_id");
    char* secret = json_member(doc, "client_secret");
    char* refresh = json_member(doc, "refresh_token");
    snprintf(out->source, sizeof out->source, "authorized_user refresh token (%s)", path);
    if (id == NULL || secret == NULL || refresh == NULL) {
      TF_SetStatus(status, TF_UNAUTHENTICATED,
                   "gs: the authorized_user file lacks client_id, client_secret or refresh_token");
    } else if (plugin_buf_append(&form, "grant_type=refresh_token&client_id=", 35) == 0 && objstore_form_value(&form, id) == 0 &&
               plugin_buf_append(&form, "&client_secret=", 15) == 0 && objstore_form_value(&form, secret) == 0 &&
               plugin_buf_append(&form, "&refresh_token=", 15) == 0 && objstore_form_value(&form, refresh) == 0) {
      rc = objstore_token_ask(fs->store.engine, &cfg->transport, uri, form.data, headers, 0, out, status);
    }
    free(id);
    if (secret != NULL) memset(secret, 0, strlen(secret));
    if (refresh != NULL) memset(refresh, 0, strlen(refresh));
    free(secret);
    free(refresh);
  } else {
    snprintf(msg, sizeof msg,
             "gs: the credentials file %s is of type '%s'; service_account and authorized_user are "
             "read",
             path, type != NULL ? type : "(none)");
    TF_SetStatus(status, TF_UNAUTHENTICATED, msg);
  }
  if (form.data != NULL) memset(form.data, 0, form.len);
  plugin_buf_free(&form);
  curl_slist_free_all(headers);
  if (doc != NULL) memset(doc, 0, strlen(doc));
  free(doc);
  free(type);
  free(token_uri);
  return rc;
}

/* The credentials file to read: the option, GOOGLE_APPLICATION_CREDENTIALS,
 * or gcloud's application-default file when it exists; "" when none. */
static void credentials_file(const gs_config* cfg, char* out, size_t cap) {
  const char* env = getenv("GOOGLE_APPLICATION_CREDENTIALS");
  const char* folder = getenv("CLOUDSDK_CONFIG");
  const char* home = getenv("HOME");
  FILE* f;
  *out = '\0';
  if (*cfg->credentials_file) {
    snprintf(out, cap, "%s", cfg->credentials_file);
    return;
  }
  if (env != NULL && *env) {
    snprintf(out, cap, "%s", env);
    return;
  }
  if (folder != NULL && *folder) snprintf(out, cap, "%s/application_default_credentials.json", folder);
  else if (home != NULL && *home) snprintf(out, cap, "%s/.config/gcloud/application_default_credentials.json", home);
  if (*out && (f = fopen(out, "rb")) != NULL) fclose(f);
  else *out = '\0';
}

static int from_metadata(gs_fs* fs, const gs_config* cfg, objstore_token* out, TF_Status* status) {
  const char* host = getenv("GCE_METADATA_HOST");
  objstore_settings probe = cfg->transport;
  struct curl_slist* headers = curl_slist_append(NULL, "Metadata-Flavor: Google");
  char url[400];
  int rc;
  if (host == NULL || *host == '\0') host = "metadata.google.internal";
  snprintf(url, sizeof url, "http://%s/computeMetadata/v1/instance/service-accounts/default/token", host);
  snprintf(out->source, sizeof out->source, "the metadata server at %s", host);
  probe.connect_timeout_ms = PROBE_MS;
  probe.max_attempts = 2;
  rc = objstore_token_ask(fs->store.engine, &probe, url, NULL, headers, 1, out, status);
  curl_slist_free_all(headers);
  return rc;
}

/* Sources 5 and 6 (the token cache keeps what this gives). */
typedef struct asking {
  gs_fs* fs;
  const gs_config* cfg;
  const char* file;
} asking;

static int fetch(void* arg, objstore_token* out, TF_Status* status) {
  asking* a = arg;
  const char* no_gce = getenv("NO_GCE_CHECK");
  char tried[1100];
  int rc;
  if (*a->file) {
    rc = from_file(a->fs, a->cfg, a->file, out, status);
  } else if (no_gce != NULL && strcasecmp(no_gce, "true") == 0) {
    rc = -1;
    snprintf(tried, sizeof tried,
             "gs: no credentials: tried anonymous, the token option, GOOGLE_AUTH_TOKEN_FOR_TESTING, "
             "an emulator endpoint, the credentials_file option, GOOGLE_APPLICATION_CREDENTIALS and "
             "gcloud's application-default file (none set or found); the metadata server is skipped "
             "(NO_GCE_CHECK=true)");
    TF_SetStatus(status, TF_UNAUTHENTICATED, tried);
  } else if ((rc = from_metadata(a->fs, a->cfg, out, status)) != 0) {
    snprintf(tried, sizeof tried,
             "gs: no credentials: tried anonymous, the token option, GOOGLE_AUTH_TOKEN_FOR_TESTING, "
             "an emulator endpoint, the credentials_file option, GOOGLE_APPLICATION_CREDENTIALS, "
             "gcloud's application-default file (none set or found) and the metadata server (%.400s)",
             TF_Message(status));
    TF_SetStatus(status, TF_UNAUTHENTICATED, tried);
  }
  return rc;
}

int gs_bearer(gs_fs* fs, const gs_config* cfg, char* out, size_t cap, TF_Status* status) {
  const char* testing = getenv("GOOGLE_AUTH_TOKEN_FOR_TESTING");
  char file[1024];
  asking a = {fs, cfg, file};
  *out = '\0';
  if (cfg->anonymous) return 0;
  if (*cfg->token) {
    snprintf(out, cap, "%s", cfg->token);
    return 0;
  }
  if (testing != NULL && *testing) {
    snprintf(out, cap, "%s", testing);
    return 0;
  }
  if (gs_emulator_endpoint(cfg)) return 0;
  credentials_file(cfg, file, sizeof file);
  return objstore_token_get(&fs->token, file, fetch, &a, out, cap, status);
}

void gs_credential_source(objstore_fs* store, const void* config, char* out, size_t cap) {
  gs_fs* fs = (gs_fs*)store;
  const gs_config* cfg = config;
  const char* testing = getenv("GOOGLE_AUTH_TOKEN_FOR_TESTING");
  char token[4096];
  TF_Status* ignored = TF_NewStatus();
  gs_bearer(fs, cfg, token, sizeof token, ignored); /* asks the chain, when it has not been */
  memset(token, 0, sizeof token);
  TF_DeleteStatus(ignored);
  if (cfg->anonymous) snprintf(out, cap, "anonymous (the anonymous option)");
  else if (*cfg->token) snprintf(out, cap, "the token option");
  else if (testing != NULL && *testing) snprintf(out, cap, "GOOGLE_AUTH_TOKEN_FOR_TESTING");
  else if (gs_emulator_endpoint(cfg)) snprintf(out, cap, "none: the endpoint is an emulator's (http://)");
  else objstore_token_describe(&fs->token, out, cap);
}
