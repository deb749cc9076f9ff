/* The gs store's hooks on the engine: JSON API URLs, the bearer token,
 * GCS's error documents, and the request shapes the engine's readers and
 * namespace ask for.
 *
 *   stat      GET  /storage/v1/b/B/o/K            (size, updated, generation)
 *   read      GET  /storage/v1/b/B/o/K?alt=media  Range, ifGenerationMatch
 *   list      GET  /storage/v1/b/B/o?prefix&delimiter&maxResults&pageToken
 *   create    POST /upload/storage/v1/b/B/o?uploadType=multipart&ifGenerationMatch=0
 *   delete    DELETE /storage/v1/b/B/o/K
 *   copy      POST /storage/v1/b/B/o/K/rewriteTo/b/B2/o/K2, until done
 *   buckets   GET|POST /storage/v1/b?project=P, GET|DELETE /storage/v1/b/B
 *
 * Reads pin the object's generation (x-goog-generation), not its ETag:
 * the generation is what GCS's preconditions name. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gs_internal.h"
#include "objstore_formats.h"

#define GOOGLE_ENDPOINT "https://storage.googleapis.com"
#define BOUNDARY "asyncfs-gs-8d1f0c3a5e7b"

/* ---- calls -------------------------------------------------------------------------- */

int gs_url_text(gs_call* c, const char* s) { return plugin_buf_append(&c->base.url, s, strlen(s)); }

int gs_url_encoded(gs_call* c, const char* s) { return objstore_url_encode(&c->base.url, s, 0); }

int gs_header(gs_call* c, const char* name, const char* value) {
  return objstore_add_header(&c->base.headers, name, value);
}

/* The endpoint requests go to: the setting, else STORAGE_EMULATOR_HOST
 * (with http:// when it names only a host, as the Google clients read
 * it), else Google's. */
static int append_endpoint(gs_call* c) {
  const char* endpoint = c->cfg->endpoint;
  size_t n;
  if (*endpoint == '\0') endpoint = GOOGLE_ENDPOINT;
  if (strstr(endpoint, "://") == NULL && gs_url_text(c, "http://") != 0) return -1;
  n = strlen(endpoint);
  while (n > 0 && endpoint[n - 1] == '/') --n;
  return plugin_buf_append(&c->base.url, endpoint, n);
}

gs_call* gs_call_bind(gs_fs* fs, const char* method, const char* bucket, const char* key,
                      objstore_exchange* x, TF_Status* status) {
  gs_call* c = objstore_call_new(sizeof *c, &fs->store, method, bucket, key, x, status);
  if (c == NULL) return NULL;
  c->fs = fs;
  c->cfg = c->base.config;
  if (append_endpoint(c) != 0) {
    plugin_set_oom(status);
    return NULL;
  }
  return c;
}

void gs_release_request(void* store, objstore_exchange* x) {
  (void)store;
  objstore_call_free(x);
}

/* "/storage/v1/b/B" (+ "/o/K" with a key) on the call's URL. */
static int object_url(gs_call* c, const char* prefix, const char* bucket, const char* key) {
  if (gs_url_text(c, prefix) != 0 || gs_url_text(c, "/b/") != 0 || gs_url_encoded(c, bucket) != 0)
    return -1;
  if (key == NULL) return 0;
  return gs_url_text(c, "/o/") != 0 || gs_url_encoded(c, key) != 0 ? -1 : 0;
}

static gs_call* bind_object(gs_fs* fs, const char* method, const char* bucket, const char* key,
                            objstore_exchange* x, TF_Status* status) {
  gs_call* c = gs_call_bind(fs, method, bucket, key, x, status);
  if (c == NULL) return NULL;
  if (object_url(c, "/storage/v1", bucket, key) != 0) {
    plugin_set_oom(status);
    return NULL;
  }
  return c;
}

/* ---- the hooks ---------------------------------------------------------------------- */

int gs_emulator_endpoint(const gs_config* cfg) {
  return *cfg->endpoint != '\0' &&
         (strncmp(cfg->endpoint, "http://", 7) == 0 || strstr(cfg->endpoint, "://") == NULL);
}

static int gs_authorize(void* store, objstore_exchange* x, TF_Status* status) {
  gs_call* c = (gs_call*)x->store_request;
  char token[4096];
  struct curl_slist* item;
  (void)store;
  curl_slist_free_all(c->base.sent);
  c->base.sent = NULL;
  if (gs_bearer(c->fs, c->cfg, token, sizeof token, status) != 0) return -1;
  for (item = c->base.headers; item != NULL; item = item->next) {
    struct curl_slist* grown = curl_slist_append(c->base.sent, item->data);
    if (grown == NULL) goto oom;
    c->base.sent = grown;
  }
  if (*token) {
    char line[4200];
    struct curl_slist* grown;
    snprintf(line, sizeof line, "Authorization: Bearer %s", token);
    if ((grown = curl_slist_append(c->base.sent, line)) == NULL) goto oom;
    c->base.sent = grown;
  }
  x->url = c->base.url.data;
  x->headers = c->base.sent;
  return 0;
oom:
  plugin_set_oom(status);
  return -1;
}

/* GCS's error document: {"error": {"code", "message", "errors": [{"reason"}]}};
 * its message goes into error_code. A 308 answering a resumable chunk is
 * a step, not a redirect: the call notes it and the answer counts as 2xx.
 * The generation stands in for the ETag, as the pin of later reads. */
static void gs_read_answer(void* store, objstore_exchange* x) {
  gs_call* c = (gs_call*)x->store_request;
  objstore_response* resp = x->resp;
  const char* error;
  size_t n;
  (void)store;
  if (*resp->captured) snprintf(resp->etag, sizeof resp->etag, "%s", resp->captured);
  if (resp->http == 308 && resp->location == NULL && strcmp(x->method, "PUT") == 0) {
    c->incomplete = 1;
    resp->http = 200;
    return;
  }
  if (resp->http / 100 == 2 || resp->body.len == 0) return;
  if (objstore_json_member(resp->body.data, resp->body.len, "error", &error, &n) == 1) {
    char* message = objstore_json_get(error, n, "message");
    if (message != NULL) snprintf(resp->error_code, sizeof resp->error_code, "%s", message);
    free(message);
  }
}

static void gs_describe(void* store, const objstore_exchange* x, char* out, size_t cap) {
  const gs_call* c = x->store_request;
  (void)store;
  snprintf(out, cap, "%s", c != NULL ? c->base.what : x->method);
}

static void gs_set_error(void* store, const objstore_exchange* x, TF_Status* status) {
  char what[700], msg[1100], tries[48] = "";
  long http = x->resp->http;
  gs_describe(store, x, what, sizeof what);
  if (x->attempts > 1) snprintf(tries, sizeof tries, " (after %d attempts)", x->attempts);
  if (http == 412)
    snprintf(msg, sizeof msg, "%s: the object changed, or a precondition failed (HTTP 412)", what);
  else if (*x->resp->error_code)
    snprintf(msg, sizeof msg, "%s: HTTP %ld, %s%s", what, http, x->resp->error_code, tries);
  else
    snprintf(msg, sizeof msg, "%s: HTTP %ld%s", what, http, tries);
  TF_SetStatus(status, objstore_code_for_http(http), msg);
}

static int gs_object_request(void* store, const char* path, const char* range,
                             const char* if_match, objstore_exchange* x, TF_Status* status) {
  char *copy, *bucket, *key;
  gs_call* c;
  int failed;
  if (objstore_object_of("gs", "bucket", "open", path, &copy, &bucket, &key, status) != 0) return -1;
  c = bind_object(store, x->method, bucket, key, x, status);
  free(copy);
  if (c == NULL) return -1;
  failed = gs_url_text(c, "?alt=media") != 0 || (range != NULL && gs_header(c, "Range", range) != 0) ||
           (if_match != NULL &&
            (gs_url_text(c, "&ifGenerationMatch=") != 0 || gs_url_encoded(c, if_match) != 0));
  if (failed) {
    plugin_set_oom(status);
    return -1;
  }
  return 0;
}

/* The store's put_request: one multipart upload of data as path. */
static int gs_put_request(void* store, const char* path, const char* data, size_t len,
                          objstore_exchange* x, TF_Status* status) {
  char *copy, *bucket, *key;
  int rc;
  if (objstore_object_of("gs", "bucket", "write", path, &copy, &bucket, &key, status) != 0) return -1;
  rc = gs_upload_request(store, bucket, key, data, len, 0, x, status);
  free(copy);
  return rc;
}

/* A read answered 404: what is there instead, as stat sees it. */
static int gs_explain_missing(void* store, const char* path, const char* what,
                              const objstore_exchange* x, TF_Status* status) {
  (void)x;
  return objstore_fs_explain_missing(&((gs_fs*)store)->store, path, what, status);
}

static void gs_name_object(void* store, const char* path, char* out, size_t cap) {
  (void)store;
  snprintf(out, cap, "gs:/%s", path);
}

const objstore_store gs_store = {
    OBJSTORE_STORE_VERSION, sizeof(objstore_store), "gs", "x-goog-meta-", "x-goog-generation",
    gs_authorize,           NULL,                   gs_read_answer,
    NULL,                   gs_set_error,           gs_describe,
    gs_object_request,      gs_release_request,     gs_explain_missing,
    gs_name_object,         NULL,                   gs_put_request};

/* ---- the namespace's requests ----------------------------------------------------------- */

int gs_json_string(plugin_buf* b, const char* s) {
  static const char hex[] = "0123456789abcdef";
  if (plugin_buf_append(b, "\"", 1) != 0) return -1;
  for (; *s != '\0'; ++s) {
    unsigned char ch = (unsigned char)*s;
    if (ch == '"' || ch == '\\') {
      char esc[2] = {'\\', (char)ch};
      if (plugin_buf_append(b, esc, 2) != 0) return -1;
    } else if (ch < 0x20) {
      char esc[6] = {'\\', 'u', '0', '0', hex[ch >> 4], hex[ch & 15]};
      if (plugin_buf_append(b, esc, 6) != 0) return -1;
    } else if (plugin_buf_append(b, s, 1) != 0) {
      return -1;
    }
  }
  return plugin_buf_append(b, "\"", 1);
}

int gs_upload_request(gs_fs* fs, const char* bucket, const char* key, const char* data,
                      size_t len, int if_absent, objstore_exchange* x, TF_Status* status) {
  static const char part[] = "--" BOUNDARY "\r\nContent-Type: application/json; charset=UTF-8\r\n\r\n";
  static const char media[] = "\r\n--" BOUNDARY "\r\nContent-Type: application/octet-stream\r\n\r\n";
  static const char end[] = "\r\n--" BOUNDARY "--\r\n";
  gs_call* c = gs_call_bind(fs, "POST", bucket, key, x, status);
  if (c == NULL) return -1;
  if (object_url(c, "/upload/storage/v1", bucket, NULL) != 0 ||
      gs_url_text(c, "/o?uploadType=multipart") != 0 ||
      (if_absent && gs_url_text(c, "&ifGenerationMatch=0") != 0) ||
      gs_header(c, "Content-Type", "multipart/related; boundary=" BOUNDARY) != 0 ||
      plugin_buf_append(&c->base.body, part, sizeof part - 1) != 0 ||
      plugin_buf_append(&c->base.body, "{\"name\":", 8) != 0 || gs_json_string(&c->base.body, key) != 0 ||
      plugin_buf_append(&c->base.body, "}", 1) != 0 ||
      plugin_buf_append(&c->base.body, media, sizeof media - 1) != 0 ||
      (len > 0 && plugin_buf_append(&c->base.body, data, len) != 0) ||
      plugin_buf_append(&c->base.body, end, sizeof end - 1) != 0) {
    plugin_set_oom(status);
    return -1;
  }
  /* the upload is named by the object, not by the URL */
  x->body = c->base.body.data;
  x->body_len = c->base.body.len;
  return 0;
}

static int tree_request(void* store, const void* config, objstore_tree_request kind,
                        const char* bucket, const char* key, objstore_exchange* x,
                        TF_Status* status) {
  gs_fs* fs = store;
  gs_call* c;
  (void)config;
  if (kind == OBJSTORE_CREATE && *key != '\0')
    return gs_upload_request(fs, bucket, key, NULL, 0, 1, x, status);
  if (kind == OBJSTORE_CREATE) { /* a bucket, in the project */
    c = gs_call_bind(fs, "POST", bucket, NULL, x, status);
    if (c == NULL) return -1;
    if (gs_url_text(c, "/storage/v1/b?project=") != 0 || gs_url_encoded(c, c->cfg->project) != 0 ||
        gs_header(c, "Content-Type", "application/json") != 0 ||
        plugin_buf_append(&c->base.body, "{\"name\":", 8) != 0 || gs_json_string(&c->base.body, bucket) != 0 ||
        (*c->cfg->location && (plugin_buf_append(&c->base.body, ",\"location\":", 12) != 0 ||
                               gs_json_string(&c->base.body, c->cfg->location) != 0)) ||
        plugin_buf_append(&c->base.body, "}", 1) != 0) {
      plugin_set_oom(status);
      return -1;
    }
    x->body = c->base.body.data;
    x->body_len = c->base.body.len;
    return 0;
  }
  c = bind_object(fs, kind == OBJSTORE_STAT ? "GET" : "DELETE", bucket, *key ? key : NULL, x, status);
  if (c != NULL && kind == OBJSTORE_STAT && *key && gs_url_text(c, "?fields=size,updated") != 0) {
    plugin_set_oom(status);
    return -1;
  }
  return c == NULL ? -1 : 0;
}

/* An object resource's size and update time (to the second, in
 * nanoseconds), read in one pass: 0, or -1 when it is not one. */
static int object_fields(const char* object, size_t n, char** name, int64_t* size, int64_t* mtime) {
  static const char* const keys[] = {"name", "size", "updated"};
  const char* starts[3];
  size_t lens[3];
  char *size_text, *updated;
  int64_t ns;
  if (objstore_json_members(object, n, keys, 3, starts, lens) != 0) return -1;
  size_text = objstore_json_value(starts[1], lens[1]);
  updated = objstore_json_value(starts[2], lens[2]);
  *size = size_text != NULL ? strtoll(size_text, NULL, 10) : 0;
  *mtime = updated != NULL && objstore_parse_time_ns(updated, &ns) == 0 && ns > 0 ? ns : 0; /* its fraction too */
  free(size_text);
  free(updated);
  if (name != NULL && (*name = objstore_json_value(starts[0], lens[0])) == NULL) return -1;
  return 0;
}

static void stat_answer(void* store, const objstore_exchange* x, int64_t* size, int64_t* mtime) {
  (void)store;
  if (object_fields(x->resp->body.data, x->resp->body.len, NULL, size, mtime) != 0) *size = *mtime = 0;
}

static int list_request(void* store, const void* config, const char* bucket, const char* prefix,
                        const char* delimiter, int max, const char* token, objstore_exchange* x,
                        TF_Status* status) {
  gs_fs* fs = store;
  gs_call* c = gs_call_bind(fs, "GET", *bucket ? bucket : "", prefix, x, status);
  char number[24];
  int failed;
  (void)config;
  if (c == NULL) return -1;
  snprintf(number, sizeof number, "%d", max);
  if (*bucket == '\0')
    failed = gs_url_text(c, "/storage/v1/b?project=") != 0 || gs_url_encoded(c, c->cfg->project) != 0;
  else
    failed = object_url(c, "/storage/v1", bucket, NULL) != 0 || gs_url_text(c, "/o?prefix=") != 0 ||
             gs_url_encoded(c, prefix) != 0 ||
             (delimiter != NULL && (gs_url_text(c, "&delimiter=") != 0 || gs_url_encoded(c, delimiter) != 0)) ||
             gs_url_text(c, "&fields=items(name,size,updated),prefixes,nextPageToken") != 0;
  failed = failed || gs_url_text(c, "&maxResults=") != 0 || gs_url_text(c, number) != 0 ||
           (token != NULL && (gs_url_text(c, "&pageToken=") != 0 || gs_url_encoded(c, token) != 0));
  if (failed) {
    plugin_set_oom(status);
    return -1;
  }
  return 0;
}

/* items[] (objects or buckets: name, size, updated), prefixes[] and
 * nextPageToken of a listing page, each element read in one pass. */
static int list_answer(void* store, const objstore_exchange* x, objstore_listing* l,
                       TF_Status* status) {
  static const char* const keys[] = {"items", "prefixes", "nextPageToken"};
  const plugin_buf* body = &x->resp->body;
  const char* starts[3];
  const char* element;
  size_t lens[3], n, pos;
  int rc;
  (void)store;
  if (objstore_json_members(body->data, body->len, keys, 3, starts, lens) != 0) goto bad;
  for (pos = 0; starts[0] != NULL && (rc = objstore_json_next(starts[0], lens[0], &pos, &element, &n)) != 0;) {
    char* name;
    int64_t size, mtime;
    if (rc < 0 || object_fields(element, n, &name, &size, &mtime) != 0) goto bad;
    rc = objstore_listing_push(l, name, strlen(name), size, mtime);
    free(name);
    if (rc != 0) goto oom;
  }
  for (pos = 0; starts[1] != NULL && (rc = objstore_json_next(starts[1], lens[1], &pos, &element, &n)) != 0;) {
    char* prefix;
    if (rc < 0 || (prefix = objstore_json_string(element, n)) == NULL) goto bad;
    rc = plugin_strlist_push(&l->prefixes, prefix, strlen(prefix));
    free(prefix);
    if (rc != 0) goto oom;
  }
  l->next_token = objstore_json_value(starts[2], lens[2]);
  if (l->next_token != NULL && *l->next_token == '\0') {
    free(l->next_token);
    l->next_token = NULL;
  }
  return 0;
bad:
  TF_SetStatus(status, TF_DATA_LOSS, "gs: a listing page that is not GCS's JSON");
  return -1;
oom:
  plugin_set_oom(status);
  return -1;
}

/* rewriteTo, repeated with the rewriteToken until "done": a large copy
 * (or one across locations) takes several calls. */
static int copy(void* store, const void* config, const char* src_bucket, const char* src_key,
                int64_t size, const char* dst_bucket, const char* dst_key, TF_Status* status) {
  gs_fs* fs = store;
  char* token = NULL;
  int rc = -1, rounds;
  (void)config;
  (void)size;
  for (rounds = 0; rounds < 10000; ++rounds) {
    objstore_exchange x;
    objstore_response resp;
    gs_call* c;
    char* done;
    objstore_exchange_init(&x, &resp, "POST", NULL);
    c = bind_object(fs, "POST", src_bucket, src_key, &x, status);
    if (c == NULL || gs_url_text(c, "/rewriteTo") != 0 || object_url(c, "", dst_bucket, dst_key) != 0 ||
        (token != NULL && (gs_url_text(c, "?rewriteToken=") != 0 || gs_url_encoded(c, token) != 0)) ||
        gs_header(c, "Content-Type", "application/json") != 0) {
      if (c != NULL) plugin_set_oom(status);
      gs_release_request(fs, &x);
      objstore_response_free(&resp);
      break;
    }
    x.body = "{}";
    x.body_len = 2;
    rc = objstore_run(fs->store.engine, &c->cfg->transport, &x, status);
    gs_release_request(fs, &x);
    free(token);
    token = NULL;
    if (rc == 0) {
      done = objstore_json_get(resp.body.data, resp.body.len, "done");
      token = objstore_json_get(resp.body.data, resp.body.len, "rewriteToken");
      rc = done != NULL && strcmp(done, "true") == 0 ? 0 : token != NULL ? 1 : -1;
      free(done);
      if (rc < 0) TF_SetStatus(status, TF_DATA_LOSS, "gs: a rewrite answer with neither done nor a token");
    }
    objstore_response_free(&resp);
    if (rc <= 0) break;
  }
  free(token);
  return rc == 0 ? 0 : -1;
}

/* A page's nextPageToken, without reading its items. */
static char* list_token(void* store, const objstore_exchange* x) {
  char* token = objstore_json_get(x->resp->body.data, x->resp->body.len, "nextPageToken");
  (void)store;
  if (token != NULL && *token == '\0') {
    free(token);
    token = NULL;
  }
  return token;
}

const objstore_tree_hooks gs_tree_hooks = {tree_request, stat_answer, list_request, list_answer,
                                           copy,         NULL,        1000,         list_token};
