/* One S3 request: signed (s3_sign.c), sent with libcurl
 * on a pooled handle whose connection stays open, retried with capped
 * exponential backoff and full jitter on 5xx, throttling and dropped
 * connections, and turned into a TF_Code with a message that names the
 * object and, for refusals, the access key id (never the secret). */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
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

void s3_response_free(s3_response* r) {
  plugin_buf_free(&r->body);
  s3_attributes_free(&r->attributes);
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

static uint64_t now_ms(void);

/* Closes the idle handles that have waited longer than the timeout (the
 * oldest are first). Called with the lock held. */
static void reap_idle(s3_fs* fs, const s3_config* cfg, uint64_t now) {
  int expired = 0, i;
  while (expired < fs->idle_count &&
         now - fs->idle[expired].since_ms > (uint64_t)cfg->idle_timeout_ms)
    ++expired;
  for (i = 0; i < expired; ++i) curl_easy_cleanup(fs->idle[i].handle);
  if (expired > 0) {
    memmove(fs->idle, fs->idle + expired, (size_t)(fs->idle_count - expired) * sizeof *fs->idle);
    fs->idle_count -= expired;
    fs->live -= expired;
    pthread_cond_broadcast(&fs->freed);
  }
}

/* The most recently used idle handle (its connection is the likeliest
 * to be alive), or a new one; waits while max_connections are out. */
static CURL* take_handle(s3_fs* fs, const s3_config* cfg) {
  CURL* h = NULL;
  int fresh = 0;
  pthread_mutex_lock(&fs->lock);
  reap_idle(fs, cfg, now_ms());
  while (fs->idle_count == 0 && fs->live >= cfg->max_connections)
    pthread_cond_wait(&fs->freed, &fs->lock);
  if (fs->idle_count > 0) {
    h = fs->idle[--fs->idle_count].handle;
  } else {
    fs->live++;
    fresh = 1;
  }
  pthread_mutex_unlock(&fs->lock);
  if (fresh) {
    h = curl_easy_init();
    if (h == NULL) {
      pthread_mutex_lock(&fs->lock);
      fs->live--;
      pthread_cond_signal(&fs->freed);
      pthread_mutex_unlock(&fs->lock);
    }
  } else {
    curl_easy_reset(h); /* keeps the connection and DNS caches */
  }
  return h;
}

/* Back to the pool, or closed: an unhealthy handle, or one that would
 * leave more idle than the pool may hold. */
static void give_handle(s3_fs* fs, const s3_config* cfg, CURL* h, int healthy) {
  if (h == NULL) return;
  pthread_mutex_lock(&fs->lock);
  if (healthy && fs->idle_count == fs->idle_capacity) {
    int cap = fs->idle_capacity ? fs->idle_capacity * 2 : 16;
    s3_idle* p = realloc(fs->idle, (size_t)cap * sizeof *p);
    if (p != NULL) {
      fs->idle = p;
      fs->idle_capacity = cap;
    }
  }
  if (healthy && fs->idle_count < fs->idle_capacity && fs->live <= cfg->max_connections) {
    fs->idle[fs->idle_count].handle = h;
    fs->idle[fs->idle_count].since_ms = now_ms();
    fs->idle_count++;
    h = NULL;
  } else {
    fs->live--;
  }
  pthread_cond_signal(&fs->freed);
  pthread_mutex_unlock(&fs->lock);
  if (h != NULL) curl_easy_cleanup(h);
}

/* Every filesystem's pool, so that fork can hand the child empty ones. */
static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static s3_fs* pools = NULL;

/* Around fork: no pool is mid-change while the process is copied. */
static void before_fork(void) {
  s3_fs* fs;
  pthread_mutex_lock(&pools_lock);
  for (fs = pools; fs != NULL; fs = fs->next_pool) pthread_mutex_lock(&fs->lock);
}

static void after_fork_in_parent(void) {
  s3_fs* fs;
  for (fs = pools; fs != NULL; fs = fs->next_pool) pthread_mutex_unlock(&fs->lock);
  pthread_mutex_unlock(&pools_lock);
}

/* The child forgets its inherited connections without closing them:
 * closing could send bytes (a TLS close) on the parent's connections. Their
 * descriptors stay open in the child, at most max_connections of them. The
 * handles other threads were using belong to threads the child has not. */
static void after_fork_in_child(void) {
  s3_fs* fs;
  for (fs = pools; fs != NULL; fs = fs->next_pool) {
    fs->idle_count = 0;
    fs->live = 0;
    pthread_mutex_unlock(&fs->lock);
  }
  pthread_mutex_unlock(&pools_lock);
}

static void register_fork_handlers(void) {
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

void s3_pool_init(s3_fs* fs) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_fork_handlers);
  pthread_mutex_init(&fs->lock, NULL);
  pthread_cond_init(&fs->freed, NULL);
  pthread_mutex_lock(&pools_lock);
  fs->next_pool = pools;
  pools = fs;
  pthread_mutex_unlock(&pools_lock);
}

void s3_pool_destroy(s3_fs* fs) {
  s3_fs** at;
  pthread_mutex_lock(&pools_lock);
  for (at = &pools; *at != NULL; at = &(*at)->next_pool) {
    if (*at == fs) {
      *at = fs->next_pool;
      break;
    }
  }
  pthread_mutex_unlock(&pools_lock);
  s3_close_idle(fs);
  free(fs->idle);
  pthread_cond_destroy(&fs->freed);
  pthread_mutex_destroy(&fs->lock);
}

void s3_close_idle(s3_fs* fs) {
  int i;
  pthread_mutex_lock(&fs->lock);
  for (i = 0; i < fs->idle_count; ++i) curl_easy_cleanup(fs->idle[i].handle);
  fs->live -= fs->idle_count;
  fs->idle_count = 0;
  pthread_cond_broadcast(&fs->freed);
  pthread_mutex_unlock(&fs->lock);
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
  if (t->req->max_body > 0 && t->resp->http / 100 == 2 &&
      t->resp->body.len + len > t->req->max_body) {
    t->overflow = 1;
    return 0;
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

/* An x-amz-meta-* or Content-Type header into the response's attributes
 * (names lowercased, values whole). */
static void collect_attribute(s3_response* resp, const char* line, size_t name_len,
                              const char* value, size_t vlen) {
  static const char meta[] = "x-amz-meta-";
  if (name_len > sizeof meta - 1 && strncasecmp(line, meta, sizeof meta - 1) == 0) {
    char name[160];
    size_t i, n = name_len - (sizeof meta - 1);
    if (n >= sizeof name) return;
    for (i = 0; i < n; ++i) name[i] = (char)tolower((unsigned char)line[sizeof meta - 1 + i]);
    name[n] = '\0';
    if (plugin_strlist_push(&resp->attributes.names, name, n) == 0 &&
        plugin_strlist_push(&resp->attributes.values, value, vlen) != 0) /* keep them paired */
      plugin_memory_free(resp->attributes.names.items[--resp->attributes.names.count]);
  } else if (name_len == 12 && strncasecmp(line, "content-type", 12) == 0) {
    free(resp->attributes.content_type);
    resp->attributes.content_type = strndup(value, vlen);
  }
}

static size_t on_header(char* line, size_t size, size_t n, void* arg) {
  transfer* t = arg;
  size_t len = size * n;
  char value[256];
  const char* colon = memchr(line, ':', len);
  size_t vlen, name_len;
  if (strncmp(line, "HTTP/", 5) == 0) {
    /* A new response (after 100 Continue, or a redirect) starts afresh. */
    long code = 0;
    const char* sp = memchr(line, ' ', len);
    if (sp != NULL) code = strtol(sp + 1, NULL, 10);
    t->resp->http = code;
    return len;
  }
  if (colon == NULL) return len;
  name_len = (size_t)(colon - line);
  colon++;
  while (colon < line + len && (*colon == ' ' || *colon == '\t')) colon++;
  vlen = (size_t)(line + len - colon);
  while (vlen > 0 && (colon[vlen - 1] == '\r' || colon[vlen - 1] == '\n'))
    vlen--;
  if (t->req->want_attributes) collect_attribute(t->resp, line, name_len, colon, vlen);
  if (vlen >= sizeof value) vlen = sizeof value - 1;
  memcpy(value, colon, vlen);
  value[vlen] = '\0';
  if (header_is(line, len, "content-length")) {
    t->resp->length = strtoll(value, NULL, 10);
    if (t->req->max_body > 0 && t->resp->http / 100 == 2 &&
        t->resp->length > (int64_t)t->req->max_body) {
      t->overflow = 1; /* stop before the body: the caller asks another way */
      return 0;
    }
  } else if (header_is(line, len, "content-range")) {
    const char* slash = strrchr(value, '/');
    if (slash != NULL && slash[1] != '*') t->resp->total = strtoll(slash + 1, NULL, 10);
  } else if (header_is(line, len, "last-modified")) {
    time_t when = curl_getdate(value, NULL);
    if (when > 0) t->resp->mtime_nsec = (int64_t)when * 1000000000;
  } else if (header_is(line, len, "etag")) {
    snprintf(t->resp->etag, sizeof t->resp->etag, "%.95s", value);
  } else if (header_is(line, len, "x-amz-bucket-region")) {
    snprintf(t->resp->region, sizeof t->resp->region, "%.63s", value);
  }
  return len;
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
  /* Not RequestTimeTooSkewed: the next try is signed by the same clock. */
  return strcmp(code, "SlowDown") == 0 || strcmp(code, "RequestTimeout") == 0 ||
         strcmp(code, "InternalError") == 0;
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

static void set_error(const s3_config* cfg, const s3_credentials* creds,
                      const s3_request* req, const s3_response* resp, CURLcode curl_code,
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
  } else if (resp->http == 301 || strcmp(resp->error_code, "PermanentRedirect") == 0) {
    snprintf(msg, sizeof msg,
             "%s: the bucket is in region '%s', not '%s': set the region option "
             "(AWS_REGION) to it (HTTP %ld PermanentRedirect)",
             what, *resp->region ? resp->region : "(not named)", cfg->region, resp->http);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
  } else if (strcmp(resp->error_code, "RequestTimeTooSkewed") == 0) {
    snprintf(msg, sizeof msg,
             "%s: this machine's clock is more than 15 minutes off the server's "
             "(HTTP %ld RequestTimeTooSkewed): set the clock (NTP)",
             what, resp->http);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
  } else if (resp->http == 401 || resp->http == 403) {
    char who[300];
    if (creds == NULL)
      snprintf(who, sizeof who, "an unsigned (anonymous) request");
    else if (strcmp(creds->source, "settings") == 0)
      snprintf(who, sizeof who, "access key id '%s'", creds->access_key);
    else
      snprintf(who, sizeof who, "access key id '%s' from %s", creds->access_key, creds->source);
    snprintf(msg, sizeof msg, "%s: access denied for %s (HTTP %ld %s)%s%s%s", what, who,
             resp->http, *resp->error_code ? resp->error_code : "Forbidden",
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
  s3_attributes_free(&resp->attributes);
  resp->http = 0;
  resp->body.len = 0;
  if (resp->body.data != NULL) resp->body.data[0] = '\0';
  resp->out_len = 0;
  resp->length = -1;
  resp->total = -1;
  resp->mtime_nsec = 0;
  resp->etag[0] = '\0';
  resp->region[0] = '\0';
  resp->error_code[0] = '\0';
  resp->too_long = 0;
}

void s3_tls_options(const s3_config* cfg, void* curl_handle) {
  CURL* h = curl_handle;
  if (*cfg->ca_bundle != '\0') curl_easy_setopt(h, CURLOPT_CAINFO, cfg->ca_bundle);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, cfg->verify_tls ? 1L : 0L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, cfg->verify_tls ? 2L : 0L);
}

/* An endpoint curl would guess a scheme for ("127.0.0.1:8000" as http,
 * silently) is refused instead. */
static int check_endpoint(const s3_config* cfg, TF_Status* status) {
  char msg[700];
  if (*cfg->endpoint == '\0' || strncmp(cfg->endpoint, "http://", 7) == 0 ||
      strncmp(cfg->endpoint, "https://", 8) == 0)
    return 0;
  snprintf(msg, sizeof msg,
           "s3: the endpoint '%.500s' does not start with http:// or https:// "
           "(AWS_ENDPOINT_URL, or the option endpoint)",
           cfg->endpoint);
  TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
  return -1;
}

int s3_execute(s3_fs* fs, const s3_config* cfg, const s3_request* req,
               s3_response* resp, TF_Status* status) {
  uint64_t started = now_ms();
  unsigned seed = jitter_seed();
  int attempt;
  if (fs->setup_error[0] != '\0') {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, fs->setup_error);
    return -1;
  }
  if (check_endpoint(cfg, status) != 0) return -1;
  for (attempt = 1;; ++attempt) {
    s3_signed sr = {NULL, NULL};
    transfer t = {req, resp, 0, 0};
    char detail[CURL_ERROR_SIZE] = "";
    s3_credentials borrowed;
    const s3_credentials* creds;
    CURLcode rc;
    CURL* h;
    reset_response(resp);
    /* Per attempt: a retry after a long backoff may need refreshed keys. */
    if (s3_credentials_acquire(fs, cfg, &borrowed, &creds, status) != 0) return -1;
    if (s3_sign(cfg, creds, req, time(NULL), &sr) != 0) {
      s3_credentials_release(creds);
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "s3: out of memory signing a request");
      return -1;
    }
    h = take_handle(fs, cfg);
    if (h == NULL) {
      s3_credentials_release(creds);
      s3_signed_free(&sr);
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "s3: no curl handle");
      return -1;
    }
    curl_easy_setopt(h, CURLOPT_URL, sr.url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, sr.headers);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_MAXCONNECTS, 1L); /* one connection per handle */
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
    s3_tls_options(cfg, h);
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
      /* More body than the caller's buffer or max_body: not retryable. */
      rc = CURLE_WRITE_ERROR;
      resp->too_long = req->max_body > 0;
      snprintf(detail, sizeof detail, "the answer was longer than asked for");
    }
    give_handle(fs, cfg, h, rc == CURLE_OK);
    s3_signed_free(&sr);

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
      s3_credentials_release(creds);
      TF_SetStatus(status, TF_OK, "");
      return 0;
    }
    if (attempt < cfg->max_attempts && retryable(resp->http, resp->error_code, rc)) {
      uint64_t ceiling = (uint64_t)cfg->retry_base_ms << (attempt - 1 < 10 ? attempt - 1 : 10);
      uint64_t delay;
      if (ceiling > 5000) ceiling = 5000;
      delay = (uint64_t)(rand_r(&seed) % (ceiling + 1)); /* full jitter */
      if (now_ms() + delay - started <= (uint64_t)cfg->retry_budget_ms) {
        s3_credentials_release(creds);
        sleep_ms(delay);
        continue;
      }
    }
    set_error(cfg, creds, req, resp, rc, detail, attempt, status);
    s3_credentials_release(creds);
    return -1;
  }
}
