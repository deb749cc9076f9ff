/* The az store's hooks on the engine: where a container lives, Blob REST
 * URLs, Shared Key signing (or a SAS, or a bearer token), Azure's error
 * documents, and the request shapes the engine's readers and namespace
 * ask for.
 *
 *   stat      HEAD   /C/B                         (Content-Length, Last-Modified, ETag)
 *   read      GET    /C/B                         Range, If-Match
 *   list      GET    /C?restype=container&comp=list&prefix&delimiter&marker&maxresults
 *   create    PUT    /C/B  If-None-Match: *       (409 or 412: there already)
 *   delete    DELETE /C/B
 *   copy      PUT    /C/B2 x-ms-copy-source       (polled while pending)
 *   containers GET /?comp=list, PUT|HEAD|DELETE /C?restype=container
 */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "az_internal.h"
#include "objstore_xml.h"

/* ---- where a container lives ----------------------------------------------------------- */

static void copy_text(char* out, size_t cap, const char* s, size_t n) {
  if (n >= cap) n = cap - 1;
  memcpy(out, s, n);
  out[n] = '\0';
}

/* The account an endpoint names: its last path segment on an emulator
 * ("http://127.0.0.1:10000/devstoreaccount1"), else its host's first label. */
static void account_of_endpoint(const char* endpoint, char* out, size_t cap) {
  const char* host = strstr(endpoint, "://");
  const char* slash;
  size_t n;
  *out = '\0';
  if (host == NULL) return;
  host += 3;
  slash = strchr(host, '/');
  if (slash != NULL && slash[1] != '\0') {
    const char* seg = slash + 1;
    n = strcspn(seg, "/");
    copy_text(out, cap, seg, n);
    return;
  }
  n = strcspn(host, ".:/");
  copy_text(out, cap, host, n);
}

void az_account_of(const az_config* cfg, az_account* out) {
  memset(out, 0, sizeof *out);
  if (*cfg->connection_string) {
    az_parse_connection_string(cfg->connection_string, out);
  } else {
    snprintf(out->name, sizeof out->name, "%s", cfg->account);
    snprintf(out->key, sizeof out->key, "%s", cfg->account_key);
    snprintf(out->sas, sizeof out->sas, "%s", cfg->sas_token + (*cfg->sas_token == '?'));
    snprintf(out->endpoint, sizeof out->endpoint, "%s", cfg->endpoint);
  }
  if (!*out->name && *out->endpoint) account_of_endpoint(out->endpoint, out->name, sizeof out->name);
  if (*out->name && !*out->endpoint)
    snprintf(out->endpoint, sizeof out->endpoint, "https://%s.blob.core.windows.net", out->name);
  while (*out->endpoint && out->endpoint[strlen(out->endpoint) - 1] == '/')
    out->endpoint[strlen(out->endpoint) - 1] = '\0';
}

int az_locate(const az_config* cfg, const char* bucket, az_target* out, TF_Status* status) {
  az_account acct;
  const char* at = strchr(bucket, '@');
  char msg[700];
  az_account_of(cfg, &acct);
  memset(out, 0, sizeof *out);
  if (at != NULL) { /* container@account.dfs.core.windows.net (abfs), or .blob. */
    const char* host = at + 1;
    size_t label = strcspn(host, ".");
    const char* suffix = strstr(host, ".dfs.");
    if (suffix == NULL) suffix = strstr(host, ".blob.");
    if (label == 0 || label >= sizeof out->account || (size_t)(at - bucket) >= sizeof out->container) {
      snprintf(msg, sizeof msg, "az: '%s' is not container@account.dfs.core.windows.net", bucket);
      TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
      return -1;
    }
    copy_text(out->container, sizeof out->container, bucket, (size_t)(at - bucket));
    copy_text(out->account, sizeof out->account, host, label);
    if (strcmp(out->account, acct.name) == 0) {
      snprintf(out->endpoint, sizeof out->endpoint, "%s", acct.endpoint);
    } else {
      const char* domain = suffix != NULL ? strchr(suffix + 1, '.') + 1 : "core.windows.net";
      snprintf(out->endpoint, sizeof out->endpoint, "https://%s.blob.%s", out->account, domain);
    }
  } else {
    if (strlen(bucket) >= sizeof out->container) {
      snprintf(msg, sizeof msg, "az: '%.100s...' is longer than a container name can be (63)", bucket);
      TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
      return -1;
    }
    if (!*acct.name) {
      snprintf(msg, sizeof msg,
               "az://%s: no storage account is named: set the account option (or "
               "AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT, a connection string), or write "
               "abfs://%s@ACCOUNT.dfs.core.windows.net/",
               bucket, *bucket ? bucket : "container");
      TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
      return -1;
    }
    snprintf(out->container, sizeof out->container, "%s", bucket);
    snprintf(out->account, sizeof out->account, "%s", acct.name);
    snprintf(out->endpoint, sizeof out->endpoint, "%s", acct.endpoint);
  }
  if (strcmp(out->account, acct.name) == 0) { /* the settings' credentials are this account's */
    snprintf(out->key, sizeof out->key, "%s", acct.key);
    snprintf(out->sas, sizeof out->sas, "%s", acct.sas);
  }
  return 0;
}

/* ---- calls -------------------------------------------------------------------------- */

static int text(plugin_buf* b, const char* s) { return plugin_buf_append(b, s, strlen(s)); }

int az_param(az_call* c, const char* name, const char* value) {
  if (c->query.len > 0 && text(&c->query, "&") != 0) return -1;
  if (text(&c->query, name) != 0 || text(&c->query, "=") != 0) return -1;
  return objstore_url_encode(&c->query, value, 0);
}

int az_header(az_call* c, const char* name, const char* value) {
  return objstore_add_header(&c->base.headers, name, value);
}

az_call* az_call_bind(az_fs* fs, const char* method, const char* bucket, const char* key,
                      objstore_exchange* x, TF_Status* status) {
  az_call* c = objstore_call_new(sizeof *c, &fs->store, method, bucket, key, x, status);
  if (c == NULL) return NULL;
  c->fs = fs;
  c->cfg = c->base.config;
  if (az_locate(c->cfg, bucket, &c->target, status) != 0) return NULL;
  if ((*c->target.container && (text(&c->path, "/") != 0 || objstore_url_encode(&c->path, c->target.container, 0) != 0)) ||
      (key != NULL && *key && (text(&c->path, "/") != 0 || objstore_url_encode(&c->path, key, 1) != 0)) ||
      (c->path.len == 0 && text(&c->path, "/") != 0)) {
    plugin_set_oom(status);
    return NULL;
  }
  return c;
}

void az_release_request(void* store, objstore_exchange* x) {
  az_call* c = (az_call*)x->store_request;
  (void)store;
  if (c == NULL) return;
  plugin_buf_free(&c->path);
  plugin_buf_free(&c->query);
  objstore_call_free(x);
}

int az_object_call(az_fs* fs, const char* method, const char* bucket, const char* key,
                   objstore_exchange* x, objstore_response* resp, az_call** out, TF_Status* status) {
  objstore_exchange_init(x, resp, method, NULL);
  *out = az_call_bind(fs, method, bucket, key, x, status);
  return *out != NULL ? 0 : -1;
}

/* ---- Shared Key --------------------------------------------------------------------- */

/* The value of header name among c's headers, or "". */
static const char* header_value(const az_call* c, const char* name) {
  size_t n = strlen(name);
  const struct curl_slist* item;
  for (item = c->base.headers; item != NULL; item = item->next)
    if (strncasecmp(item->data, name, n) == 0 && item->data[n] == ':')
      return item->data + n + 1 + (item->data[n + 1] == ' ');
  return "";
}

/* Header lines by name (what precedes the colon), as Shared Key sorts them. */
static int by_name(const void* a, const void* b) {
  const char* x = *(const char* const*)a;
  const char* y = *(const char* const*)b;
  for (; *x == *y && *x != ':'; ++x, ++y) {
  }
  return (*x == ':' ? 0 : (unsigned char)*x) - (*y == ':' ? 0 : (unsigned char)*y);
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The string Shared Key signs (learn.microsoft.com, "Authorize with
 * Shared Key", version 2009-09-19 and later): the verb, eleven standard
 * headers, the x-ms- headers sorted, then /account/path and the query
 * parameters, sorted, decoded. */
static int string_to_sign(const az_call* c, const objstore_exchange* x, const char* endpoint_path,
                          plugin_buf* s) {
  static const char* const standard[] = {"Content-Encoding", "Content-Language", NULL, "Content-MD5",
                                         "Content-Type", "Date", "If-Modified-Since", "If-Match",
                                         "If-None-Match", "If-Unmodified-Since", "Range"};
  char length[24] = "";
  const char* ms[32];
  int n = 0, i;
  const struct curl_slist* item;
  size_t at;
  if (text(s, x->method) != 0 || text(s, "\n") != 0) return -1;
  if (x->body_len > 0) snprintf(length, sizeof length, "%zu", x->body_len);
  for (i = 0; i < 11; ++i)
    if (text(s, standard[i] != NULL ? header_value(c, standard[i]) : length) != 0 || text(s, "\n") != 0)
      return -1;
  for (item = c->base.sent; item != NULL && n < 32; item = item->next)
    if (strncasecmp(item->data, "x-ms-", 5) == 0) ms[n++] = item->data;
  qsort(ms, (size_t)n, sizeof *ms, by_name); /* names are lowercase already */
  for (i = 0; i < n; ++i) {
    const char* colon = strchr(ms[i], ':');
    const char* value = colon + 1 + (colon[1] == ' ');
    if (plugin_buf_append(s, ms[i], (size_t)(colon - ms[i])) != 0 || text(s, ":") != 0 ||
        text(s, value) != 0 || text(s, "\n") != 0)
      return -1;
  }
  if (text(s, "/") != 0 || text(s, c->target.account) != 0 || text(s, endpoint_path) != 0 ||
      plugin_buf_append(s, c->path.data, c->path.len) != 0)
    return -1;
  /* the parameters, as added (sorted by name), values decoded */
  for (at = 0; at < c->query.len;) {
    size_t end = at;
    while (end < c->query.len && c->query.data[end] != '&') ++end;
    if (text(s, "\n") != 0) return -1;
    for (; at < end; ++at) {
      char ch = c->query.data[at];
      int hi, lo;
      if (ch == '=') ch = ':';
      else if (ch == '%' && at + 2 < end && (hi = hex_digit(c->query.data[at + 1])) >= 0 &&
               (lo = hex_digit(c->query.data[at + 2])) >= 0) {
        ch = (char)(hi * 16 + lo);
        at += 2;
      }
      if (plugin_buf_append(s, &ch, 1) != 0) return -1;
    }
    at = end + 1;
  }
  return 0;
}

static int shared_key(const az_call* c, const objstore_exchange* x, const char* endpoint_path,
                      char* out, size_t cap) {
  unsigned char key[128], mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  unsigned char signature[100];
  plugin_buf s = {0};
  int key_len, rc = -1;
  size_t n = strlen(c->target.key);
  if (n < 4 || n > 4 * sizeof key / 3 || n % 4 != 0) return -1;
  key_len = EVP_DecodeBlock(key, (const unsigned char*)c->target.key, (int)n);
  if (key_len <= 0 || string_to_sign(c, x, endpoint_path, &s) != 0) goto done;
  key_len -= (c->target.key[n - 1] == '=') + (c->target.key[n - 2] == '='); /* the padding's zeros */
  if (HMAC(EVP_sha256(), key, key_len, (const unsigned char*)s.data, s.len, mac, &mac_len) == NULL) goto done;
  EVP_EncodeBlock(signature, mac, (int)mac_len);
  snprintf(out, cap, "Authorization: SharedKey %s:%s", c->target.account, (const char*)signature);
  rc = 0;
done:
  plugin_buf_free(&s);
  memset(key, 0, sizeof key);
  return rc;
}

/* ---- the hooks ---------------------------------------------------------------------- */

static int sent_line(az_call* c, const char* line) {
  struct curl_slist* grown = curl_slist_append(c->base.sent, line);
  if (grown == NULL) return -1;
  c->base.sent = grown;
  return 0;
}

static int az_authorize(void* store, objstore_exchange* x, TF_Status* status) {
  az_call* c = (az_call*)x->store_request;
  const char* endpoint = c->target.endpoint;
  const char* host = strstr(endpoint, "://");
  const char* endpoint_path = host != NULL && strchr(host + 3, '/') != NULL ? strchr(host + 3, '/') : "";
  char date[64], line[8300];
  struct curl_slist* item;
  time_t now = time(NULL);
  struct tm tm;
  (void)store;
  curl_slist_free_all(c->base.sent);
  c->base.sent = NULL;
  c->base.url.len = 0;
  gmtime_r(&now, &tm);
  strftime(date, sizeof date, "x-ms-date: %a, %d %b %Y %H:%M:%S GMT", &tm);
  if (sent_line(c, date) != 0 || sent_line(c, "x-ms-version: " AZ_API_VERSION) != 0) goto oom;
  for (item = c->base.headers; item != NULL; item = item->next)
    if (sent_line(c, item->data) != 0) goto oom;
  if (*c->target.key) {
    if (shared_key(c, x, endpoint_path, line, sizeof line) != 0) {
      TF_SetStatus(status, TF_INVALID_ARGUMENT, "az: the account key is not base64 (the account_key option)");
      return -1;
    }
    if (sent_line(c, line) != 0) goto oom;
  } else if (!*c->target.sas && !c->cfg->anonymous) {
    char token[8192];
    if (az_bearer(c->fs, c->cfg, token, sizeof token, status) != 0) return -1;
    snprintf(line, sizeof line, "Authorization: Bearer %s", token);
    memset(token, 0, sizeof token);
    if (sent_line(c, line) != 0) goto oom;
  }
  if (text(&c->base.url, endpoint) != 0 || plugin_buf_append(&c->base.url, c->path.data, c->path.len) != 0 ||
      (c->query.len > 0 && (text(&c->base.url, "?") != 0 || plugin_buf_append(&c->base.url, c->query.data, c->query.len) != 0)) ||
      (*c->target.sas && !*c->target.key &&
       (text(&c->base.url, c->query.len > 0 ? "&" : "?") != 0 || text(&c->base.url, c->target.sas) != 0)) ||
      plugin_buf_append(&c->base.url, "", 1) != 0)
    goto oom;
  x->url = c->base.url.data;
  x->headers = c->base.sent;
  x->authorized_until_ms = objstore_now_ms() + 5 * 60 * 1000; /* x-ms-date stays valid 15 min */
  return 0;
oom:
  plugin_set_oom(status);
  return -1;
}

/* Azure's error document <Error><Code>..</Code><Message>..</Message>;
 * its code goes into error_code. */
static void az_read_answer(void* store, objstore_exchange* x) {
  objstore_response* resp = x->resp;
  char* code;
  (void)store;
  if (resp->http / 100 == 2 || resp->body.len == 0) return;
  code = objstore_xml_find(resp->body.data, resp->body.len, "Code");
  if (code != NULL) snprintf(resp->error_code, sizeof resp->error_code, "%s", code);
  free(code);
}

static void az_describe(void* store, const objstore_exchange* x, char* out, size_t cap) {
  const az_call* c = x->store_request;
  (void)store;
  snprintf(out, cap, "%s", c != NULL ? c->base.what : x->method);
}

static void az_set_error(void* store, const objstore_exchange* x, TF_Status* status) {
  char what[700], msg[1100], tries[48] = "";
  long http = x->resp->http;
  const char* code = x->resp->error_code;
  TF_Code tf = objstore_code_for_http(http);
  az_describe(store, x, what, sizeof what);
  if (x->attempts > 1) snprintf(tries, sizeof tries, " (after %d attempts)", x->attempts);
  if (http == 403 && strcmp(code, "AuthenticationFailed") == 0) tf = TF_UNAUTHENTICATED;
  if (http == 412)
    snprintf(msg, sizeof msg, "%s: the blob changed, or a precondition failed (HTTP 412)", what);
  else if (http == 403 && *code)
    snprintf(msg, sizeof msg, "%s: HTTP 403, %s: check the account key, SAS or token%s", what, code, tries);
  else if (*code)
    snprintf(msg, sizeof msg, "%s: HTTP %ld, %s%s", what, http, code, tries);
  else
    snprintf(msg, sizeof msg, "%s: HTTP %ld%s", what, http, tries);
  TF_SetStatus(status, tf, msg);
}

/* A call for method on the blob at path ("/container/blob"); what: the
 * caller's verb, in the error when path names a container. */
static az_call* bind_blob(void* store, const char* method, const char* path, const char* what,
                          objstore_exchange* x, TF_Status* status) {
  char *copy, *bucket, *key;
  az_call* c;
  if (objstore_object_of("az", "container", what, path, &copy, &bucket, &key, status) != 0) return NULL;
  c = az_call_bind(store, method, bucket, key, x, status);
  free(copy);
  return c;
}

static int az_object_request(void* store, const char* path, const char* range,
                             const char* if_match, objstore_exchange* x, TF_Status* status) {
  az_call* c = bind_blob(store, x->method, path, "open", x, status);
  if (c == NULL) return -1;
  if ((range != NULL && az_header(c, "Range", range) != 0) ||
      (if_match != NULL && *if_match && az_header(c, "If-Match", if_match) != 0)) {
    plugin_set_oom(status);
    return -1;
  }
  return 0;
}

int az_put_request(void* store, const char* path, const char* data, size_t len, objstore_exchange* x,
                   TF_Status* status) {
  az_call* c = bind_blob(store, "PUT", path, "write", x, status);
  if (c == NULL) return -1;
  if (az_header(c, "x-ms-blob-type", "BlockBlob") != 0) {
    plugin_set_oom(status);
    return -1;
  }
  x->body = len > 0 ? data : "";
  x->body_len = len;
  return 0;
}

static int az_explain_missing(void* store, const char* path, const char* what,
                              const objstore_exchange* x, TF_Status* status) {
  (void)x;
  return objstore_fs_explain_missing(&((az_fs*)store)->store, path, what, status);
}

static void az_name_object(void* store, const char* path, char* out, size_t cap) {
  (void)store;
  snprintf(out, cap, "az:/%s", path);
}

const objstore_store az_store = {
    OBJSTORE_STORE_VERSION, sizeof(objstore_store), "az", "x-ms-meta-", "x-ms-copy-status",
    az_authorize,           NULL,                   az_read_answer,
    NULL,                   az_set_error,           az_describe,
    az_object_request,      az_release_request,     az_explain_missing,
    az_name_object,         "x-ms-error-code",      az_put_request};

/* ---- the namespace's requests ----------------------------------------------------------- */

static int tree_request(void* store, const void* config, objstore_tree_request kind,
                        const char* bucket, const char* key, objstore_exchange* x,
                        TF_Status* status) {
  static const char* const methods[] = {"HEAD", "DELETE", "PUT"};
  az_call* c = az_call_bind(store, methods[kind], bucket, *key ? key : NULL, x, status);
  int failed;
  (void)config;
  if (c == NULL) return -1;
  if (*key == '\0')
    failed = az_param(c, "restype", "container") != 0;
  else
    failed = kind == OBJSTORE_CREATE && (az_header(c, "If-None-Match", "*") != 0 ||
                                         az_header(c, "x-ms-blob-type", "BlockBlob") != 0);
  if (failed) {
    plugin_set_oom(status);
    return -1;
  }
  if (kind == OBJSTORE_CREATE) {
    x->body = "";
    x->body_len = 0;
  }
  return 0;
}

static void stat_answer(void* store, const objstore_exchange* x, int64_t* size, int64_t* mtime) {
  (void)store;
  *size = x->resp->length > 0 ? x->resp->length : 0;
  *mtime = x->resp->mtime_nsec;
}

static int list_request(void* store, const void* config, const char* bucket, const char* prefix,
                        const char* delimiter, int max, const char* token, objstore_exchange* x,
                        TF_Status* status) {
  az_call* c = az_call_bind(store, "GET", bucket, NULL, x, status);
  char number[24];
  int failed;
  (void)config;
  if (c == NULL) return -1;
  snprintf(number, sizeof number, "%d", max);
  /* in the order Shared Key sorts them */
  failed = az_param(c, "comp", "list") != 0 ||
           (delimiter != NULL && *bucket && az_param(c, "delimiter", delimiter) != 0) ||
           (token != NULL && az_param(c, "marker", token) != 0) ||
           az_param(c, "maxresults", number) != 0 ||
           (*prefix && az_param(c, "prefix", prefix) != 0) ||
           (*bucket && az_param(c, "restype", "container") != 0);
  if (failed) {
    plugin_set_oom(status);
    return -1;
  }
  return 0;
}

typedef struct listing_ctx {
  objstore_listing* l;
  char* name; /* the <Blob> or <Container> being read */
  int64_t size, mtime;
  int failed;
} listing_ctx;

static void on_listing(void* arg, const char* name, const char* parent, const char* value) {
  listing_ctx* c = arg;
  if (strcmp(name, "Name") == 0 && (strcmp(parent, "Blob") == 0 || strcmp(parent, "Container") == 0)) {
    free(c->name);
    c->name = strdup(value);
    c->size = c->mtime = 0;
    if (c->name == NULL) c->failed = 1;
  } else if (strcmp(name, "Content-Length") == 0 && strcmp(parent, "Properties") == 0) {
    c->size = strtoll(value, NULL, 10);
  } else if (strcmp(name, "Last-Modified") == 0 && strcmp(parent, "Properties") == 0) {
    time_t when = curl_getdate(value, NULL);
    c->mtime = when > 0 ? (int64_t)when * 1000000000 : 0;
  } else if ((strcmp(name, "Blob") == 0 || strcmp(name, "Container") == 0) && c->name != NULL) {
    if (objstore_listing_push(c->l, c->name, strlen(c->name), c->size, c->mtime) != 0) c->failed = 1;
    free(c->name);
    c->name = NULL;
  } else if (strcmp(name, "Name") == 0 && strcmp(parent, "BlobPrefix") == 0) {
    if (plugin_strlist_push(&c->l->prefixes, value, strlen(value)) != 0) c->failed = 1;
  } else if (strcmp(name, "NextMarker") == 0 && *value) {
    free(c->l->next_token);
    c->l->next_token = strdup(value);
    if (c->l->next_token == NULL) c->failed = 1;
  }
}

static int list_answer(void* store, const objstore_exchange* x, objstore_listing* l,
                       TF_Status* status) {
  listing_ctx c = {l, NULL, 0, 0, 0};
  int rc;
  (void)store;
  rc = objstore_xml_parse(x->resp->body.data, x->resp->body.len, on_listing, &c);
  free(c.name);
  if (rc != 0 || c.failed) {
    TF_SetStatus(status, TF_DATA_LOSS, "az: a listing page that is not Azure's XML");
    return -1;
  }
  return 0;
}

/* Copy Blob: the source's URL in x-ms-copy-source (with the SAS, if
 * requests carry one); a copy still pending is polled (Get Blob
 * Properties) until it succeeds or fails. */
static int copy(void* store, const void* config, const char* src_bucket, const char* src_key,
                int64_t size, const char* dst_bucket, const char* dst_key, TF_Status* status) {
  az_fs* fs = store;
  objstore_exchange x;
  objstore_response resp;
  az_call *src = NULL, *c;
  plugin_buf source = {0};
  int rc = -1, polls;
  long wait_ms = 50;
  (void)config;
  (void)size;
  objstore_exchange_init(&x, &resp, "HEAD", NULL);
  src = az_call_bind(fs, "HEAD", src_bucket, src_key, &x, status); /* only to build the URL */
  if (src == NULL || text(&source, src->target.endpoint) != 0 ||
      plugin_buf_append(&source, src->path.data, src->path.len) != 0 ||
      (*src->target.sas && (text(&source, "?") != 0 || text(&source, src->target.sas) != 0)) ||
      plugin_buf_append(&source, "", 1) != 0) {
    if (src != NULL) plugin_set_oom(status);
    az_release_request(fs, &x);
    plugin_buf_free(&source);
    return -1;
  }
  az_release_request(fs, &x);
  if (az_object_call(fs, "PUT", dst_bucket, dst_key, &x, &resp, &c, status) == 0) {
    if (az_header(c, "x-ms-copy-source", source.data) != 0) {
      plugin_set_oom(status);
    } else {
      x.body = "";
      x.body_len = 0;
      rc = objstore_run(fs->store.engine, &c->cfg->transport, &x, status);
    }
  }
  az_release_request(fs, &x);
  for (polls = 0; rc == 0 && strcmp(resp.captured, "pending") == 0 && polls < 100000; ++polls) {
    struct timespec pause = {wait_ms / 1000, (wait_ms % 1000) * 1000000L};
    nanosleep(&pause, NULL);
    if (wait_ms < 2000) wait_ms *= 2;
    objstore_response_free(&resp);
    if (az_object_call(fs, "HEAD", dst_bucket, dst_key, &x, &resp, &c, status) == 0)
      rc = objstore_run(fs->store.engine, &c->cfg->transport, &x, status);
    else
      rc = -1;
    az_release_request(fs, &x);
  }
  if (rc == 0 && *resp.captured && strcmp(resp.captured, "success") != 0) {
    char msg[700];
    snprintf(msg, sizeof msg, "copy az://%s/%s to az://%s/%s: the copy ended %s", src_bucket, src_key,
             dst_bucket, dst_key, resp.captured);
    TF_SetStatus(status, TF_ABORTED, msg);
    rc = -1;
  }
  objstore_response_free(&resp);
  plugin_buf_free(&source);
  return rc;
}

/* A page's NextMarker, without reading its blobs. */
static char* list_token(void* store, const objstore_exchange* x) {
  (void)store;
  return objstore_xml_peek(x->resp->body.data, x->resp->body.len, "NextMarker");
}

const objstore_tree_hooks az_tree_hooks = {tree_request, stat_answer, list_request, list_answer,
                                           copy,         NULL,        5000,         list_token};
