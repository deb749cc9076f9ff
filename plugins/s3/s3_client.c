/* One S3 request: signed with SigV4 (OpenSSL's libcrypto), sent with libcurl
 * on a pooled handle whose connection stays open, retried with capped
 * exponential backoff and full jitter on 5xx, throttling and dropped
 * connections, and turned into a TF_Code with a message that names the
 * object and, for refusals, the access key id (never the secret). */
#define _POSIX_C_SOURCE 200809L

#include <curl/curl.h>
#include <errno.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "s3_internal.h"

/* ---- small helpers --------------------------------------------------------- */

void s3_request_init(s3_request* req, s3_response* resp, const char* method,
                     const char* bucket, const char* key) {
  memset(req, 0, sizeof *req);
  memset(resp, 0, sizeof *resp);
  req->method = method;
  req->bucket = bucket;
  req->key = key;
}

void s3_response_free(s3_response* r) { plugin_buf_free(&r->body); }

char* s3_uri_encode(const char* s, size_t len, int keep_slash) {
  static const char hex[] = "0123456789ABCDEF";
  char* out = malloc(len * 3 + 1);
  size_t i, n = 0;
  if (out == NULL) return NULL;
  for (i = 0; i < len; ++i) {
    unsigned char c = (unsigned char)s[i];
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
        (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.' ||
        c == '~' || (c == '/' && keep_slash)) {
      out[n++] = (char)c;
    } else {
      out[n++] = '%';
      out[n++] = hex[c >> 4];
      out[n++] = hex[c & 15];
    }
  }
  out[n] = '\0';
  return out;
}

static void hex_encode(const unsigned char* in, size_t n, char* out) {
  static const char hex[] = "0123456789abcdef";
  size_t i;
  for (i = 0; i < n; ++i) {
    out[2 * i] = hex[in[i] >> 4];
    out[2 * i + 1] = hex[in[i] & 15];
  }
  out[2 * n] = '\0';
}

static void sha256_hex(const char* data, size_t n, char out[65]) {
  unsigned char md[32];
  unsigned int len = 0;
  EVP_Digest(data, n, md, &len, EVP_sha256(), NULL);
  hex_encode(md, 32, out);
}

void s3_md5_base64(const char* data, size_t len, char out[32]) {
  unsigned char md[16];
  unsigned int n = 0;
  EVP_Digest(data, len, md, &n, EVP_md5(), NULL);
  EVP_EncodeBlock((unsigned char*)out, md, 16);
}

static void hmac(const void* key, size_t key_len, const char* msg,
                 unsigned char out[32]) {
  unsigned int len = 32;
  HMAC(EVP_sha256(), key, (int)key_len, (const unsigned char*)msg,
       strlen(msg), out, &len);
}

/* ---- parallel helper -------------------------------------------------------- */

typedef struct parallel_job {
  void (*fn)(void* ctx, int i);
  void* ctx;
  int n;
  int next;
} parallel_job;

static void* parallel_worker(void* arg) {
  parallel_job* job = arg;
  int i;
  while ((i = __atomic_fetch_add(&job->next, 1, __ATOMIC_RELAXED)) < job->n)
    job->fn(job->ctx, i);
  return NULL;
}

void s3_parallel(int n, int concurrency, void (*fn)(void* ctx, int i),
                 void* ctx) {
  parallel_job job = {fn, ctx, n, 0};
  pthread_t threads[256];
  int started = 0, t;
  int want = concurrency < n ? concurrency : n;
  if (want > 256) want = 256;
  /* The calling thread is one of the workers. */
  for (t = 1; t < want; ++t)
    if (pthread_create(&threads[started], NULL, parallel_worker, &job) == 0)
      ++started;
  parallel_worker(&job);
  for (t = 0; t < started; ++t) pthread_join(threads[t], NULL);
}

void s3_first_error_init(s3_first_error* e) {
  pthread_mutex_init(&e->lock, NULL);
  e->status = TF_NewStatus();
}

void s3_first_error_destroy(s3_first_error* e) {
  pthread_mutex_destroy(&e->lock);
  TF_DeleteStatus(e->status);
}

void s3_first_error_record(s3_first_error* e, const TF_Status* failure) {
  if (TF_GetCode(failure) == TF_OK) return;
  pthread_mutex_lock(&e->lock);
  if (TF_GetCode(e->status) == TF_OK)
    TF_SetStatus(e->status, TF_GetCode(failure), TF_Message(failure));
  pthread_mutex_unlock(&e->lock);
}

int s3_first_error_failed(s3_first_error* e) {
  int failed;
  pthread_mutex_lock(&e->lock);
  failed = TF_GetCode(e->status) != TF_OK;
  pthread_mutex_unlock(&e->lock);
  return failed;
}

int s3_first_error_take(s3_first_error* e, TF_Status* status) {
  TF_Code code;
  pthread_mutex_lock(&e->lock);
  code = TF_GetCode(e->status);
  TF_SetStatus(status, code, TF_Message(e->status));
  pthread_mutex_unlock(&e->lock);
  return code == TF_OK ? 0 : -1;
}

/* ---- the handle pool -------------------------------------------------------- */

static CURL* take_handle(s3_fs* fs) {
  CURL* h = NULL;
  pthread_mutex_lock(&fs->lock);
  if (fs->idle_count > 0) h = fs->idle[--fs->idle_count];
  pthread_mutex_unlock(&fs->lock);
  if (h == NULL) h = curl_easy_init();
  else curl_easy_reset(h); /* keeps the connection and DNS caches */
  return h;
}

static void give_handle(s3_fs* fs, CURL* h, int healthy) {
  if (h == NULL) return;
  if (healthy) {
    pthread_mutex_lock(&fs->lock);
    if (fs->idle_count == fs->idle_capacity) {
      int cap = fs->idle_capacity ? fs->idle_capacity * 2 : 16;
      void** p = realloc(fs->idle, (size_t)cap * sizeof *p);
      if (p != NULL) {
        fs->idle = p;
        fs->idle_capacity = cap;
      }
    }
    if (fs->idle_count < fs->idle_capacity) {
      fs->idle[fs->idle_count++] = h;
      h = NULL;
    }
    pthread_mutex_unlock(&fs->lock);
  }
  if (h != NULL) curl_easy_cleanup(h);
}

/* ---- transfer callbacks ------------------------------------------------------ */

typedef struct transfer {
  const s3_request* req;
  s3_response* resp;
  size_t sent;
  int overflow;
} transfer;

static size_t on_body(char* data, size_t size, size_t n, void* arg) {
  transfer* t = arg;
  size_t len = size * n;
  if (t->req->out != NULL && t->resp->http / 100 == 2) {
    if (t->resp->out_len + len > t->req->out_cap) {
      t->overflow = 1;
      return 0;
    }
    memcpy(t->req->out + t->resp->out_len, data, len);
    t->resp->out_len += len;
    return len;
  }
  return plugin_buf_append(&t->resp->body, data, len) == 0 ? len : 0;
}

static size_t on_upload(char* buffer, size_t size, size_t n, void* arg) {
  transfer* t = arg;
  size_t left = t->req->body_len - t->sent;
  size_t len = size * n < left ? size * n : left;
  if (len > 0) memcpy(buffer, t->req->body + t->sent, len);
  t->sent += len;
  return len;
}

static int header_is(const char* line, size_t len, const char* name) {
  size_t n = strlen(name);
  return len > n && strncasecmp(line, name, n) == 0 && line[n] == ':';
}

static size_t on_header(char* line, size_t size, size_t n, void* arg) {
  transfer* t = arg;
  size_t len = size * n;
  char value[256];
  const char* colon = memchr(line, ':', len);
  size_t vlen;
  if (strncmp(line, "HTTP/", 5) == 0) {
    /* A new response (after 100 Continue, or a redirect) starts afresh. */
    long code = 0;
    const char* sp = memchr(line, ' ', len);
    if (sp != NULL) code = strtol(sp + 1, NULL, 10);
    t->resp->http = code;
    return len;
  }
  if (colon == NULL) return len;
  colon++;
  while (colon < line + len && (*colon == ' ' || *colon == '\t')) colon++;
  vlen = (size_t)(line + len - colon);
  while (vlen > 0 && (colon[vlen - 1] == '\r' || colon[vlen - 1] == '\n'))
    vlen--;
  if (vlen >= sizeof value) vlen = sizeof value - 1;
  memcpy(value, colon, vlen);
  value[vlen] = '\0';
  if (header_is(line, len, "content-length")) {
    t->resp->length = strtoll(value, NULL, 10);
  } else if (header_is(line, len, "content-range")) {
    const char* slash = strrchr(value, '/');
    if (slash != NULL && slash[1] != '*') t->resp->total = strtoll(slash + 1, NULL, 10);
  } else if (header_is(line, len, "last-modified")) {
    time_t when = curl_getdate(value, NULL);
    if (when > 0) t->resp->mtime_nsec = (int64_t)when * 1000000000;
  } else if (header_is(line, len, "etag")) {
    snprintf(t->resp->etag, sizeof t->resp->etag, "%.95s", value);
  }
  return len;
}

/* ---- signing ----------------------------------------------------------------- */

typedef struct signed_request {
  char* url;
  struct curl_slist* headers;
} signed_request;

static int cmp_params(const void* a, const void* b) {
  return strcmp(((const s3_param*)a)->name, ((const s3_param*)b)->name);
}

/* The canonical query: names sorted, names and values URI-encoded. */
static int canonical_query(const s3_request* req, plugin_buf* out) {
  s3_param sorted[16];
  int i, n = req->num_params < 16 ? req->num_params : 16;
  memcpy(sorted, req->params, (size_t)n * sizeof *sorted);
  qsort(sorted, (size_t)n, sizeof *sorted, cmp_params);
  for (i = 0; i < n; ++i) {
    const char* v = sorted[i].value != NULL ? sorted[i].value : "";
    char* name = s3_uri_encode(sorted[i].name, strlen(sorted[i].name), 0);
    char* value = s3_uri_encode(v, strlen(v), 0);
    int bad = name == NULL || value == NULL ||
              (i > 0 && plugin_buf_append(out, "&", 1) != 0) ||
              plugin_buf_append(out, name, strlen(name)) != 0 ||
              plugin_buf_append(out, "=", 1) != 0 ||
              plugin_buf_append(out, value, strlen(value)) != 0;
    free(name);
    free(value);
    if (bad) return -1;
  }
  if (out->data == NULL) return plugin_buf_append(out, "", 0);
  return 0;
}

static int add_header(struct curl_slist** list, const char* name,
                      const char* value) {
  char line[2048];
  struct curl_slist* next;
  /* "Name:" with nothing after it removes a header curl would add. */
  snprintf(line, sizeof line, *value ? "%s: %s" : "%s:", name, value);
  next = curl_slist_append(*list, line);
  if (next == NULL) return -1;
  *list = next;
  return 0;
}

/* Builds the URL and the signed headers of req (AWS Signature Version 4). */
static int sign(const s3_config* cfg, const s3_request* req,
                signed_request* out) {
  char amz_date[17], date[9], payload_hash[65], request_hash[65];
  char host[512], scheme[16];
  unsigned char k1[32], k2[32], k3[32], k4[32], sig[32];
  char sig_hex[65], key_material[512];
  const char* endpoint = cfg->endpoint;
  const char* hostpart;
  const char* key = req->key != NULL ? req->key : "";
  char* path_enc = NULL;
  char* copy_enc = NULL;
  plugin_buf query = {0}, canon = {0}, uri = {0}, sts = {0}, auth = {0};
  struct tm tm;
  time_t now = time(NULL);
  int ok = -1;
  char signed_names[128];

  gmtime_r(&now, &tm);
  strftime(amz_date, sizeof amz_date, "%Y%m%dT%H%M%SZ", &tm);
  memcpy(date, amz_date, 8);
  date[8] = '\0';

  /* Endpoint: scheme and host[:port]. */
  if (*endpoint == '\0') {
    snprintf(scheme, sizeof scheme, "https");
    if (req->bucket != NULL && !cfg->path_style)
      snprintf(host, sizeof host, "%s.s3.%s.amazonaws.com", req->bucket, cfg->region);
    else
      snprintf(host, sizeof host, "s3.%s.amazonaws.com", cfg->region);
  } else {
    const char* sep = strstr(endpoint, "://");
    size_t len;
    snprintf(scheme, sizeof scheme, "%.*s", sep ? (int)(sep - endpoint) : 4,
             sep ? endpoint : "http");
    hostpart = sep ? sep + 3 : endpoint;
    len = strcspn(hostpart, "/");
    if (req->bucket != NULL && !cfg->path_style)
      snprintf(host, sizeof host, "%s.%.*s", req->bucket, (int)len, hostpart);
    else
      snprintf(host, sizeof host, "%.*s", (int)len, hostpart);
  }

  /* Canonical URI: S3 encodes the key once, keeping "/". */
  path_enc = s3_uri_encode(key, strlen(key), 1);
  if (path_enc == NULL) goto done;
  if (plugin_buf_append(&uri, "/", 1) != 0) goto done;
  if (req->bucket != NULL && cfg->path_style) {
    if (plugin_buf_append(&uri, req->bucket, strlen(req->bucket)) != 0) goto done;
    if (*key != '\0' && plugin_buf_append(&uri, "/", 1) != 0) goto done;
  }
  if (plugin_buf_append(&uri, path_enc, strlen(path_enc)) != 0) goto done;
  if (canonical_query(req, &query) != 0) goto done;

  if (cfg->sign_payload || req->body_len == 0)
    sha256_hex(req->body != NULL ? req->body : "", req->body_len, payload_hash);
  else
    snprintf(payload_hash, sizeof payload_hash, "UNSIGNED-PAYLOAD");

  if (req->copy_source != NULL) {
    copy_enc = s3_uri_encode(req->copy_source, strlen(req->copy_source), 1);
    if (copy_enc == NULL) goto done;
  }

  /* Canonical request; headers in sorted order. */
  {
    char line[1024];
    snprintf(line, sizeof line, "%s\n", req->method);
    if (plugin_buf_append(&canon, line, strlen(line)) != 0 ||
        plugin_buf_append(&canon, uri.data, uri.len) != 0 ||
        plugin_buf_append(&canon, "\n", 1) != 0 ||
        plugin_buf_append(&canon, query.data, query.len) != 0)
      goto done;
    snprintf(line, sizeof line, "\nhost:%s\nx-amz-content-sha256:%s\n", host,
             payload_hash);
    if (plugin_buf_append(&canon, line, strlen(line)) != 0) goto done;
    if (copy_enc != NULL) {
      if (plugin_buf_append(&canon, "x-amz-copy-source:/", 19) != 0 ||
          plugin_buf_append(&canon, copy_enc, strlen(copy_enc)) != 0 ||
          plugin_buf_append(&canon, "\n", 1) != 0)
        goto done;
      if (req->copy_range != NULL) {
        snprintf(line, sizeof line, "x-amz-copy-source-range:%s\n", req->copy_range);
        if (plugin_buf_append(&canon, line, strlen(line)) != 0) goto done;
      }
    }
    snprintf(line, sizeof line, "x-amz-date:%s\n", amz_date);
    if (plugin_buf_append(&canon, line, strlen(line)) != 0) goto done;
    if (*cfg->session_token != '\0') {
      if (plugin_buf_append(&canon, "x-amz-security-token:", 21) != 0 ||
          plugin_buf_append(&canon, cfg->session_token, strlen(cfg->session_token)) != 0 ||
          plugin_buf_append(&canon, "\n", 1) != 0)
        goto done;
    }
    snprintf(signed_names, sizeof signed_names, "host;x-amz-content-sha256%s%s;x-amz-date%s",
             copy_enc != NULL ? ";x-amz-copy-source" : "",
             copy_enc != NULL && req->copy_range != NULL ? ";x-amz-copy-source-range" : "",
             *cfg->session_token != '\0' ? ";x-amz-security-token" : "");
    snprintf(line, sizeof line, "\n%s\n%s", signed_names, payload_hash);
    if (plugin_buf_append(&canon, line, strlen(line)) != 0) goto done;
  }
  sha256_hex(canon.data, canon.len, request_hash);

  {
    char line[512];
    snprintf(line, sizeof line, "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s",
             amz_date, date, cfg->region, request_hash);
    if (plugin_buf_append(&sts, line, strlen(line)) != 0) goto done;
  }
  snprintf(key_material, sizeof key_material, "AWS4%s", cfg->secret_key);
  hmac(key_material, strlen(key_material), date, k1);
  memset(key_material, 0, sizeof key_material);
  hmac(k1, 32, cfg->region, k2);
  hmac(k2, 32, "s3", k3);
  hmac(k3, 32, "aws4_request", k4);
  hmac(k4, 32, sts.data, sig);
  hex_encode(sig, 32, sig_hex);

  {
    char line[1024];
    snprintf(line, sizeof line,
             "AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/aws4_request, "
             "SignedHeaders=%s, Signature=%s",
             cfg->access_key, date, cfg->region, signed_names, sig_hex);
    if (plugin_buf_append(&auth, line, strlen(line)) != 0) goto done;
  }

  out->headers = NULL;
  if (add_header(&out->headers, "Authorization", auth.data) != 0 ||
      add_header(&out->headers, "x-amz-content-sha256", payload_hash) != 0 ||
      add_header(&out->headers, "x-amz-date", amz_date) != 0 ||
      add_header(&out->headers, "Expect", "") != 0)
    goto done;
  if (*cfg->session_token != '\0' &&
      add_header(&out->headers, "x-amz-security-token", cfg->session_token) != 0)
    goto done;
  if (copy_enc != NULL) {
    char source[1100];
    snprintf(source, sizeof source, "/%s", copy_enc);
    if (add_header(&out->headers, "x-amz-copy-source", source) != 0) goto done;
    if (req->copy_range != NULL &&
        add_header(&out->headers, "x-amz-copy-source-range", req->copy_range) != 0)
      goto done;
  }
  if (req->range != NULL && add_header(&out->headers, "Range", req->range) != 0)
    goto done;
  if (req->if_match != NULL && add_header(&out->headers, "If-Match", req->if_match) != 0)
    goto done;
  if (req->content_md5 != NULL &&
      add_header(&out->headers, "Content-MD5", req->content_md5) != 0)
    goto done;
  if (req->body != NULL && add_header(&out->headers, "Content-Type", "application/octet-stream") != 0)
    goto done;

  {
    plugin_buf url = {0};
    if (plugin_buf_append(&url, scheme, strlen(scheme)) != 0 ||
        plugin_buf_append(&url, "://", 3) != 0 ||
        plugin_buf_append(&url, host, strlen(host)) != 0 ||
        plugin_buf_append(&url, uri.data, uri.len) != 0 ||
        (query.len > 0 && (plugin_buf_append(&url, "?", 1) != 0 ||
                           plugin_buf_append(&url, query.data, query.len) != 0))) {
      plugin_buf_free(&url);
      goto done;
    }
    out->url = url.data;
  }
  ok = 0;
done:
  if (ok != 0 && out->headers != NULL) {
    curl_slist_free_all(out->headers);
    out->headers = NULL;
  }
  free(path_enc);
  free(copy_enc);
  plugin_buf_free(&query);
  plugin_buf_free(&canon);
  plugin_buf_free(&uri);
  plugin_buf_free(&sts);
  plugin_buf_free(&auth);
  return ok;
}

/* ---- errors ------------------------------------------------------------------ */

static int retryable(long http, const char* code, CURLcode curl_code) {
  if (curl_code != CURLE_OK) {
    switch (curl_code) {
      case CURLE_COULDNT_CONNECT:
      case CURLE_SEND_ERROR:
      case CURLE_RECV_ERROR:
      case CURLE_GOT_NOTHING:
      case CURLE_PARTIAL_FILE:
      case CURLE_OPERATION_TIMEDOUT:
      case CURLE_COULDNT_RESOLVE_HOST:
      case CURLE_SSL_CONNECT_ERROR:
      case CURLE_WEIRD_SERVER_REPLY:
        return 1;
      default:
        return 0;
    }
  }
  if (http >= 500 || http == 429) return 1;
  return strcmp(code, "SlowDown") == 0 || strcmp(code, "RequestTimeout") == 0 ||
         strcmp(code, "InternalError") == 0 ||
         strcmp(code, "RequestTimeTooSkewed") == 0;
}

static TF_Code code_for(long http, const char* code) {
  if (strcmp(code, "BucketAlreadyOwnedByYou") == 0 ||
      strcmp(code, "BucketAlreadyExists") == 0)
    return TF_ALREADY_EXISTS;
  if (strcmp(code, "BucketNotEmpty") == 0) return TF_FAILED_PRECONDITION;
  switch (http) {
    case 400: return TF_INVALID_ARGUMENT;
    case 401:
    case 403: return TF_PERMISSION_DENIED;
    case 404: return TF_NOT_FOUND;
    case 409:
    case 412: return TF_FAILED_PRECONDITION;
    case 416: return TF_OUT_OF_RANGE;
    case 429:
    case 500:
    case 502:
    case 503:
    case 504: return TF_UNAVAILABLE;
    default: return TF_UNKNOWN;
  }
}

static void describe(const s3_request* req, char* out, size_t cap) {
  if (req->bucket == NULL)
    snprintf(out, cap, "%s s3://", req->method);
  else
    snprintf(out, cap, "%s s3://%s/%s", req->method, req->bucket,
             req->key != NULL ? req->key : "");
}

static void set_error(const s3_config* cfg, const s3_request* req,
                      const s3_response* resp, CURLcode curl_code,
                      const char* curl_detail, int attempts, TF_Status* status) {
  char what[600], msg[1400], tries[48] = "";
  char* message = resp->body.data != NULL
                      ? s3_xml_find(resp->body.data, resp->body.len, "Message")
                      : NULL;
  describe(req, what, sizeof what);
  if (message != NULL && *message == '\0') {
    free(message);
    message = NULL;
  }
  if (attempts > 1) snprintf(tries, sizeof tries, " (after %d attempts)", attempts);
  if (curl_code != CURLE_OK) {
    snprintf(msg, sizeof msg, "%s: %s: %s%s", what, curl_easy_strerror(curl_code),
             curl_detail, tries);
    TF_SetStatus(status,
                 curl_code == CURLE_OPERATION_TIMEDOUT ? TF_DEADLINE_EXCEEDED
                                                        : TF_UNAVAILABLE,
                 msg);
  } else if (resp->http == 401 || resp->http == 403) {
    snprintf(msg, sizeof msg,
             "%s: access denied for access key id '%s' (HTTP %ld %s)%s%s%s", what,
             *cfg->access_key ? cfg->access_key : "(none)", resp->http,
             *resp->error_code ? resp->error_code : "Forbidden",
             message ? ": " : "", message ? message : "", tries);
    TF_SetStatus(status, TF_PERMISSION_DENIED, msg);
  } else {
    const char* code = *resp->error_code ? resp->error_code : "";
    if (!*code && resp->http == 404) code = "NotFound";
    snprintf(msg, sizeof msg, "%s: %s%sHTTP %ld%s%s%s", what, code, *code ? " (" : "",
             resp->http, *code ? ")" : "", message ? ": " : "", message ? message : "");
    if (*tries) snprintf(msg + strlen(msg), sizeof msg - strlen(msg), "%s", tries);
    TF_SetStatus(status, code_for(resp->http, resp->error_code), msg);
  }
  free(message);
}

/* ---- execute ------------------------------------------------------------------ */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(uint64_t ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static unsigned jitter_seed(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned)ts.tv_nsec ^ (unsigned)(uintptr_t)&ts;
}

static void reset_response(s3_response* resp) {
  resp->http = 0;
  resp->body.len = 0;
  if (resp->body.data != NULL) resp->body.data[0] = '\0';
  resp->out_len = 0;
  resp->length = -1;
  resp->total = -1;
  resp->mtime_nsec = 0;
  resp->etag[0] = '\0';
  resp->error_code[0] = '\0';
}

int s3_execute(s3_fs* fs, const s3_config* cfg, const s3_request* req,
               s3_response* resp, TF_Status* status) {
  uint64_t started = now_ms();
  unsigned seed = jitter_seed();
  int attempt;
  for (attempt = 1;; ++attempt) {
    signed_request sr = {NULL, NULL};
    transfer t = {req, resp, 0, 0};
    char detail[CURL_ERROR_SIZE] = "";
    CURLcode rc;
    CURL* h;
    reset_response(resp);
    if (sign(cfg, req, &sr) != 0) {
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "s3: out of memory signing a request");
      return -1;
    }
    h = take_handle(fs);
    if (h == NULL) {
      free(sr.url);
      curl_slist_free_all(sr.headers);
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "s3: no curl handle");
      return -1;
    }
    curl_easy_setopt(h, CURLOPT_URL, sr.url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, sr.headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->connect_timeout_ms);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME,
                     (long)((cfg->read_timeout_ms + 999) / 1000));
    curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(h, CURLOPT_BUFFERSIZE, 256L * 1024);
    curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024);
    if (strcmp(req->method, "HEAD") == 0) {
      curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    } else if (strcmp(req->method, "PUT") == 0) {
      curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
      curl_easy_setopt(h, CURLOPT_READFUNCTION, on_upload);
      curl_easy_setopt(h, CURLOPT_READDATA, &t);
      curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
    } else if (strcmp(req->method, "POST") == 0) {
      curl_easy_setopt(h, CURLOPT_POST, 1L);
      curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body != NULL ? req->body : "");
      curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    } else if (strcmp(req->method, "GET") != 0) {
      curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
    }
    rc = curl_easy_perform(h);
    if (rc == CURLE_OK) {
      long http = 0;
      curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
      resp->http = http;
    } else if (t.overflow) {
      /* More body than the caller's buffer: not retryable. */
      rc = CURLE_WRITE_ERROR;
      snprintf(detail, sizeof detail, "the answer was longer than asked for");
    }
    give_handle(fs, h, rc == CURLE_OK);
    free(sr.url);
    curl_slist_free_all(sr.headers);

    /* Error answers carry an <Error> document; so do some 200s
     * (CompleteMultipartUpload, the copies). An object's own bytes are
     * never read as one. */
    if (rc == CURLE_OK && resp->body.len > 0 &&
        (resp->http / 100 != 2 || strcmp(req->method, "POST") == 0 ||
         req->copy_source != NULL)) {
      char* code = s3_xml_find(resp->body.data, resp->body.len, "Code");
      if (code != NULL && (resp->http / 100 != 2 ||
                           strstr(resp->body.data, "<Error>") != NULL)) {
        snprintf(resp->error_code, sizeof resp->error_code, "%s", code);
        if (resp->http / 100 == 2) resp->http = 500;
      }
      free(code);
    }
    if (rc == CURLE_OK && resp->http / 100 == 2) {
      TF_SetStatus(status, TF_OK, "");
      return 0;
    }
    if (attempt < cfg->max_attempts && retryable(resp->http, resp->error_code, rc)) {
      uint64_t ceiling = (uint64_t)cfg->retry_base_ms << (attempt - 1 < 10 ? attempt - 1 : 10);
      uint64_t delay;
      if (ceiling > 5000) ceiling = 5000;
      delay = (uint64_t)(rand_r(&seed) % (ceiling + 1)); /* full jitter */
      if (now_ms() + delay - started <= (uint64_t)cfg->retry_budget_ms) {
        sleep_ms(delay);
        continue;
      }
    }
    set_error(cfg, req, resp, rc, detail, attempt, status);
    return -1;
  }
}
