/* One S3 request: signed (s3_sign.c), sent with libcurl
 * on a pooled handle whose connection stays open, retried with capped
 * exponential backoff and full jitter on 5xx, throttling and dropped
 * connections, and turned into a TF_Code with a message that names the
 * object and, for refusals, the access key id (never the secret). */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
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
struct s3_bulk;
static struct s3_bulk* unlink_idle_bulks(s3_fs* fs, const s3_config* cfg, uint64_t now,
                                         int every);
static void free_bulks(struct s3_bulk* b);

/* Closes the count oldest idle handles (the idle are kept oldest first).
 * Called with the lock held. */
static void close_oldest_idle(s3_fs* fs, int count) {
  int i;
  if (count <= 0) return;
  for (i = 0; i < count; ++i) curl_easy_cleanup(fs->idle[i].handle);
  memmove(fs->idle, fs->idle + count, (size_t)(fs->idle_count - count) * sizeof *fs->idle);
  fs->idle_count -= count;
  fs->live -= count;
  pthread_cond_broadcast(&fs->freed);
}

/* What has idled longer than the timeout, single handles and bulks alike,
 * whichever kind of call comes next: closes those handles (the oldest are
 * first) and unlinks those bulks, returned to free after unlocking. Called
 * with the lock held. */
static struct s3_bulk* reap_idle(s3_fs* fs, const s3_config* cfg, uint64_t now) {
  int expired = 0;
  while (expired < fs->idle_count &&
         now - fs->idle[expired].since_ms > (uint64_t)cfg->idle_timeout_ms)
    ++expired;
  close_oldest_idle(fs, expired);
  return unlink_idle_bulks(fs, cfg, now, 0);
}

/* The most recently used idle handle (its connection is the likeliest
 * to be alive), or a new one; waits while max_connections are out. */
static CURL* take_handle(s3_fs* fs, const s3_config* cfg) {
  CURL* h = NULL;
  struct s3_bulk* expired;
  int fresh = 0;
  pthread_mutex_lock(&fs->lock);
  expired = reap_idle(fs, cfg, now_ms());
  while (fs->idle_count == 0 && fs->live >= cfg->max_connections) {
    if (fs->bulk_idle != NULL) /* idle bulks make room */
      free_bulks(unlink_idle_bulks(fs, cfg, 0, 1));
    else
      pthread_cond_wait(&fs->freed, &fs->lock);
  }
  if (fs->idle_count > 0) {
    h = fs->idle[--fs->idle_count].handle;
  } else {
    fs->live++;
    fresh = 1;
  }
  pthread_mutex_unlock(&fs->lock);
  free_bulks(expired);
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
    fs->bulk_idle = NULL;
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
  struct s3_bulk* bulks;
  pthread_mutex_lock(&fs->lock);
  close_oldest_idle(fs, fs->idle_count);
  bulks = unlink_idle_bulks(fs, NULL, 0, 1);
  pthread_cond_broadcast(&fs->freed);
  pthread_mutex_unlock(&fs->lock);
  free_bulks(bulks);
}

/* ---- transfer callbacks ------------------------------------------------------ */

typedef struct transfer {
  const s3_request* req;
  s3_response* resp;
  size_t sent;
  int overflow;
  int error_cut; /* an error answer was cut at ERROR_BODY_MOST: read as far as kept */
} transfer;

/* What an answer may hold in memory, whatever the server sends: an error
 * document is read for its Code and Message, which come first; the answer
 * of a listing, a multipart call or a copy is a page of at most a
 * thousand keys of at most 1024 bytes each, URL-encoded. A server that
 * sends more is cut off, not followed into gigabytes. */
#define ERROR_BODY_MOST ((size_t)64 * 1024)
#define ANSWER_MOST ((size_t)16 * 1024 * 1024)

/* The most bytes a 2xx answer to req may bring: its buffer, its max_body,
 * its range's length, else ANSWER_MOST. */
static size_t answer_most(const s3_request* req) {
  long long first, last;
  if (req->max_body > 0) return req->max_body;
  if (req->range != NULL && sscanf(req->range, "bytes=%lld-%lld", &first, &last) == 2 && last >= first)
    return (size_t)(last - first + 1);
  return ANSWER_MOST;
}

static size_t on_body(char* data, size_t size, size_t n, void* arg) {
  transfer* t = arg;
  size_t len = size * n;
  if (t->resp->http / 100 != 2) { /* an error document: its start is all that is read */
    size_t room = ERROR_BODY_MOST - t->resp->body.len;
    if (len > room) {
      if (room > 0 && plugin_buf_append(&t->resp->body, data, room) != 0) return 0;
      t->error_cut = 1;
      return 0;
    }
    return plugin_buf_append(&t->resp->body, data, len) == 0 ? len : 0;
  }
  if (t->req->out != NULL) {
    if (t->resp->out_len + len > t->req->out_cap) {
      t->overflow = 1;
      return 0;
    }
    memcpy(t->req->out + t->resp->out_len, data, len);
    t->resp->out_len += len;
    return len;
  }
  if (t->resp->body.len + len > answer_most(t->req)) {
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

/* One request's tries: what a try holds while curl runs it, and what
 * decides whether another follows. s3_execute runs one request on a pooled
 * handle; s3_execute_many runs many on one thread (curl multi). */
typedef struct attempt {
  const s3_request* req;
  s3_response* resp;
  transfer t;
  s3_signed sr;
  s3_credentials borrowed;
  const s3_credentials* creds;
  char detail[CURL_ERROR_SIZE];
  int number;          /* of the try under way; 1 for the first */
  uint64_t started_ms; /* when the first try started */
  uint64_t delay_ms;   /* before the next try (attempt_finish's 1) */
  unsigned seed;
} attempt;

static void attempt_init(attempt* a, const s3_request* req, s3_response* resp) {
  memset(a, 0, sizeof *a);
  a->req = req;
  a->resp = resp;
  a->started_ms = now_ms();
  a->seed = jitter_seed();
}

/* Whether requests can be sent at all: 0, or -1 with status set. */
static int check_setup(s3_fs* fs, const s3_config* cfg, TF_Status* status) {
  if (fs->setup_error[0] != '\0') {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, fs->setup_error);
    return -1;
  }
  return check_endpoint(cfg, status);
}

/* The next try of a: a fresh response, keys (refreshed when due: a retry
 * after a long backoff may need new ones), the signature. 0, or -1 with
 * status set and nothing held. */
static int attempt_prepare(s3_fs* fs, const s3_config* cfg, attempt* a, TF_Status* status) {
  a->number++;
  a->t = (transfer){a->req, a->resp, 0, 0, 0};
  a->detail[0] = '\0';
  reset_response(a->resp);
  if (s3_credentials_acquire(fs, cfg, &a->borrowed, &a->creds, status) != 0) return -1;
  if (s3_sign(cfg, a->creds, a->req, time(NULL), &a->sr) != 0) {
    s3_credentials_release(a->creds);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "s3: out of memory signing a request");
    return -1;
  }
  return 0;
}

/* What attempt_prepare took, released when no try follows it. */
static void attempt_drop(attempt* a) {
  s3_signed_free(&a->sr);
  s3_credentials_release(a->creds);
}

/* curl allocates its receive buffer, and its upload buffer, for each transfer
 * and frees them when it ends: a large one costs a fresh mapping (or a
 * consolidation of the heap) per request. So only a body that may be large
 * gets large buffers; a small object's GET, a HEAD, a small PUT and the
 * answers of the rest fit curl's defaults (16 and 64 KiB). */
#define SMALL_BODY ((size_t)64 * 1024)
#define LARGE_BUFFER (256L * 1024)

static long receive_buffer(const s3_request* req) {
  size_t expected;
  if (strcmp(req->method, "GET") != 0) return CURL_MAX_WRITE_SIZE;
  expected = req->out != NULL ? req->out_cap : req->max_body;
  if (expected == 0 || expected > SMALL_BODY) return LARGE_BUFFER; /* 0: no bound */
  return CURL_MAX_WRITE_SIZE;
}

/* The prepared try on h: curl's options. */
static void attempt_bind(const s3_config* cfg, attempt* a, CURL* h) {
  const s3_request* req = a->req;
  curl_easy_setopt(h, CURLOPT_URL, a->sr.url);
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L); /* a key's "/../" is a key's, as signed */
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, a->sr.headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_MAXCONNECTS, 1L); /* one connection per handle */
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, a->detail);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &a->t);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, &a->t);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)cfg->connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)((cfg->read_timeout_ms + 999) / 1000));
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  s3_tls_options(cfg, h);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, receive_buffer(req));
  if (req->body_len > SMALL_BODY) curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024);
  if (strcmp(req->method, "HEAD") == 0) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (strcmp(req->method, "PUT") == 0) {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_upload);
    curl_easy_setopt(h, CURLOPT_READDATA, &a->t);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)req->body_len);
  } else if (strcmp(req->method, "POST") == 0) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body != NULL ? req->body : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
  } else if (strcmp(req->method, "GET") != 0) {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method);
  }
}

/* After curl ran a try on h and said rc: 0 when the request succeeded
 * (status OK), -1 when it failed for good (status set), 1 when another try
 * is due after a->delay_ms. *healthy says whether h's connection may be
 * kept. What attempt_start took is released. */
static int attempt_finish(const s3_config* cfg, attempt* a, CURL* h, CURLcode rc,
                          int* healthy, TF_Status* status) {
  const s3_request* req = a->req;
  s3_response* resp = a->resp;
  *healthy = rc == CURLE_OK;
  if (rc != CURLE_OK && a->t.error_cut) {
    rc = CURLE_OK; /* an error answer cut short: what was kept says which (its connection is closed) */
  }
  if (rc == CURLE_OK) {
    long http = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &http);
    resp->http = http;
  } else if (a->t.overflow) {
    /* More body than the caller's buffer, max_body or the answer's bound:
     * not retryable. */
    rc = CURLE_WRITE_ERROR;
    resp->too_long = req->max_body > 0;
    snprintf(a->detail, sizeof a->detail, "the answer was longer than asked for");
  }
  s3_signed_free(&a->sr);

  /* Error answers carry an <Error> document; so do some 200s
   * (CompleteMultipartUpload, the copies). An object's own bytes are
   * never read as one. */
  if (rc == CURLE_OK && resp->body.len > 0 &&
      (resp->http / 100 != 2 || strcmp(req->method, "POST") == 0 || req->copy_source != NULL)) {
    char* code = s3_xml_find(resp->body.data, resp->body.len, "Code");
    if (code != NULL && (resp->http / 100 != 2 || strstr(resp->body.data, "<Error>") != NULL)) {
      snprintf(resp->error_code, sizeof resp->error_code, "%s", code);
      if (resp->http / 100 == 2) resp->http = 500;
    }
    free(code);
  }
  if (rc == CURLE_OK && resp->http / 100 == 2) {
    s3_credentials_release(a->creds);
    TF_SetStatus(status, TF_OK, "");
    return 0;
  }
  if (a->number < cfg->max_attempts && retryable(resp->http, resp->error_code, rc)) {
    int doublings = a->number - 1 < 10 ? a->number - 1 : 10;
    uint64_t ceiling = (uint64_t)cfg->retry_base_ms << doublings;
    if (ceiling > 5000) ceiling = 5000;
    a->delay_ms = (uint64_t)(rand_r(&a->seed) % (ceiling + 1)); /* full jitter */
    if (now_ms() + a->delay_ms - a->started_ms <= (uint64_t)cfg->retry_budget_ms) {
      s3_credentials_release(a->creds);
      return 1;
    }
  }
  set_error(cfg, a->creds, req, resp, rc, a->detail, a->number, status);
  s3_credentials_release(a->creds);
  return -1;
}

int s3_execute(s3_fs* fs, const s3_config* cfg, const s3_request* req,
               s3_response* resp, TF_Status* status) {
  attempt a;
  if (check_setup(fs, cfg, status) != 0) return -1;
  attempt_init(&a, req, resp);
  for (;;) {
    int outcome, healthy;
    CURL* h;
    if (attempt_prepare(fs, cfg, &a, status) != 0) return -1;
    h = take_handle(fs, cfg);
    if (h == NULL) {
      attempt_drop(&a);
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "s3: no curl handle");
      return -1;
    }
    attempt_bind(cfg, &a, h);
    outcome = attempt_finish(cfg, &a, h, curl_easy_perform(h), &healthy, status);
    give_handle(fs, cfg, h, healthy);
    if (outcome != 1) return outcome;
    sleep_ms(a.delay_ms);
  }
}

/* ---- many requests on one thread ------------------------------------------- */

/* The sockets curl wants watched for a bulk's transfers and when it wants
 * to be called back (its socket and timer callbacks). Driven so, by
 * curl_multi_socket_action, curl handles only the transfers whose socket is
 * ready; curl_multi_perform, which the bulk called before, checked every
 * running transfer's socket with a poll of its own whenever any was ready
 * (8.5 such system calls per 4 KiB GET, at 16 requests per bulk). */
typedef struct watched {
  struct pollfd* fds;
  int count;
  int cap;
  int64_t timer_due_ms; /* on the now_ms clock; -1: no timer */
} watched;

/* A curl multi handle and its easy handles, with the connections the multi
 * keeps open between bulk calls. Its `connections` count in fs->live while
 * it exists, in use or idle. */
typedef struct s3_bulk {
  CURLM* multi;
  CURL** easy;
  int connections;
  watched watch;
  uint64_t since_ms; /* idle since */
  struct s3_bulk* next;
} s3_bulk;

static int on_socket(CURL* easy, curl_socket_t s, int what, void* arg, void* socketp) {
  watched* w = arg;
  int i;
  (void)easy;
  (void)socketp;
  for (i = 0; i < w->count && w->fds[i].fd != s; ++i) {
  }
  if (what == CURL_POLL_REMOVE) {
    if (i < w->count) w->fds[i] = w->fds[--w->count];
    return 0;
  }
  if (i == w->count) {
    if (w->count == w->cap) {
      int cap = w->cap > 0 ? 2 * w->cap : 16;
      struct pollfd* fds = realloc(w->fds, (size_t)cap * sizeof *fds);
      if (fds == NULL) return -1; /* curl fails the transfer */
      w->fds = fds;
      w->cap = cap;
    }
    w->fds[w->count++].fd = s;
  }
  w->fds[i].events = (short)(((what & CURL_POLL_IN) ? POLLIN : 0) | ((what & CURL_POLL_OUT) ? POLLOUT : 0));
  w->fds[i].revents = 0;
  return 0;
}

static int on_timer(CURLM* multi, long timeout_ms, void* arg) {
  watched* w = arg;
  (void)multi;
  w->timer_due_ms = timeout_ms < 0 ? -1 : (int64_t)(now_ms() + (uint64_t)timeout_ms);
  return 0;
}

static CURLM* bulk_multi(watched* w) {
  CURLM* multi = curl_multi_init();
  if (multi == NULL) return NULL;
  w->timer_due_ms = -1;
  curl_multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(multi, CURLMOPT_SOCKETDATA, w);
  curl_multi_setopt(multi, CURLMOPT_TIMERFUNCTION, on_timer);
  curl_multi_setopt(multi, CURLMOPT_TIMERDATA, w);
  return multi;
}

/* What curl asked to be called back for by now. */
static void bulk_run_timer(s3_bulk* b) {
  int still;
  if (b->watch.timer_due_ms >= 0 && (uint64_t)b->watch.timer_due_ms <= now_ms()) {
    b->watch.timer_due_ms = -1;
    curl_multi_socket_action(b->multi, CURL_SOCKET_TIMEOUT, 0, &still);
  }
}

/* Waits at most wait_ms (less when curl's timer is due sooner) for the
 * watched sockets, and hands curl those that are ready, then its timer. */
static void bulk_wait(s3_bulk* b, long wait_ms) {
  watched* w = &b->watch;
  struct pollfd* got;
  int i, k, ready, still;
  if (w->timer_due_ms >= 0) {
    uint64_t now = now_ms();
    long until = (uint64_t)w->timer_due_ms > now ? (long)((uint64_t)w->timer_due_ms - now) : 0;
    if (until < wait_ms) wait_ms = until;
  }
  ready = poll(w->fds, (nfds_t)w->count, (int)wait_ms);
  if (ready > 0) {
    /* copied first: curl's socket callback changes the watched set */
    got = malloc((size_t)ready * sizeof *got);
    if (got == NULL) return; /* the next wait finds them ready again */
    for (i = k = 0; i < w->count && k < ready; ++i)
      if (w->fds[i].revents != 0) got[k++] = w->fds[i];
    for (i = 0; i < k; ++i) {
      short r = got[i].revents;
      int mask;
      if (r & POLLNVAL) { /* closed without curl saying so: no longer watched */
        on_socket(NULL, got[i].fd, CURL_POLL_REMOVE, w, NULL);
        continue;
      }
      mask = ((r & (POLLIN | POLLHUP)) ? CURL_CSELECT_IN : 0) | ((r & POLLOUT) ? CURL_CSELECT_OUT : 0) |
             ((r & POLLERR) ? CURL_CSELECT_ERR : 0);
      curl_multi_socket_action(b->multi, got[i].fd, mask, &still);
    }
    free(got);
  }
  bulk_run_timer(b);
}

static void bulk_free(s3_bulk* b) {
  int i;
  for (i = 0; i < b->connections; ++i)
    if (b->easy[i] != NULL) curl_easy_cleanup(b->easy[i]);
  curl_multi_cleanup(b->multi); /* may still tell on_socket to forget a socket */
  free(b->easy);
  free(b->watch.fds);
  free(b);
}

/* Closes the idle bulks that waited longer than the timeout, or all of
 * them (every = 1). Called with the lock held; returns them to free after
 * unlocking. */
static s3_bulk* unlink_idle_bulks(s3_fs* fs, const s3_config* cfg, uint64_t now,
                                  int every) {
  s3_bulk *closed = NULL, **at = &fs->bulk_idle;
  while (*at != NULL) {
    s3_bulk* b = *at;
    if (every || now - b->since_ms > (uint64_t)cfg->idle_timeout_ms) { /* cfg: unless every */
      *at = b->next;
      fs->live -= b->connections;
      b->next = closed;
      closed = b;
    } else {
      at = &b->next;
    }
  }
  if (closed != NULL) pthread_cond_broadcast(&fs->freed);
  return closed;
}

static void free_bulks(struct s3_bulk* b) {
  while (b != NULL) {
    s3_bulk* next = b->next;
    bulk_free(b);
    b = next;
  }
}

/* Room for `want` more connections, as far as max_connections allows:
 * idle single handles are closed to make it. Returns how many may be
 * opened. Called with the lock held. */
static int make_room(s3_fs* fs, const s3_config* cfg, int want) {
  int excess = fs->live + want - (int)cfg->max_connections, room;
  close_oldest_idle(fs, excess < fs->idle_count ? excess : fs->idle_count);
  room = (int)cfg->max_connections - fs->live;
  return room < want ? (room > 0 ? room : 0) : want;
}

/* An idle bulk, grown towards `want` requests at once, or a new one; when
 * there is none and every connection is in use, waits for one. */
static s3_bulk* take_bulk(s3_fs* fs, const s3_config* cfg, int want) {
  s3_bulk *b = NULL, *expired;
  int grow = 0, i;
  pthread_mutex_lock(&fs->lock);
  expired = reap_idle(fs, cfg, now_ms());
  for (;;) {
    if (fs->bulk_idle != NULL) {
      b = fs->bulk_idle;
      fs->bulk_idle = b->next;
      if (want > b->connections) grow = make_room(fs, cfg, want - b->connections);
      break;
    }
    grow = make_room(fs, cfg, want);
    if (grow > 0) break;
    pthread_cond_wait(&fs->freed, &fs->lock);
  }
  fs->live += grow;
  pthread_mutex_unlock(&fs->lock);
  free_bulks(expired);
  if (b == NULL) {
    b = calloc(1, sizeof *b);
    if (b == NULL || (b->multi = bulk_multi(&b->watch)) == NULL) goto fail;
  }
  if (grow > 0) {
    CURL** easy = realloc(b->easy, (size_t)(b->connections + grow) * sizeof *easy);
    if (easy == NULL) goto fail;
    b->easy = easy;
    for (i = 0; i < grow; ++i) b->easy[b->connections + i] = NULL; /* made when used */
    b->connections += grow;
    grow = 0;
  }
  curl_multi_setopt(b->multi, CURLMOPT_MAXCONNECTS, (long)b->connections);
  curl_multi_setopt(b->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, (long)b->connections);
  return b;
fail:
  pthread_mutex_lock(&fs->lock);
  fs->live -= grow + (b != NULL ? b->connections : 0);
  pthread_cond_broadcast(&fs->freed);
  pthread_mutex_unlock(&fs->lock);
  if (b != NULL) {
    if (b->multi != NULL) bulk_free(b);
    else free(b);
  }
  return NULL;
}

static void give_bulk(s3_fs* fs, s3_bulk* b) {
  pthread_mutex_lock(&fs->lock);
  b->since_ms = now_ms();
  b->next = fs->bulk_idle;
  fs->bulk_idle = b;
  pthread_cond_broadcast(&fs->freed);
  pthread_mutex_unlock(&fs->lock);
}

/* A request of a bulk call: its tries, and when the next may start. */
typedef struct bulk_item {
  attempt a;
  uint64_t due_ms; /* retries: not before */
  int waiting;     /* a retry is due at due_ms */
} bulk_item;

/* The next request to start: a retry that is due (the earliest), else the
 * next not yet started; -1 when none is ready. *wait_ms is how long until
 * the earliest retry that is not yet due (untouched when none). */
static int next_ready(bulk_item* items, int n, int* next_new, uint64_t now, long* wait_ms) {
  int i, best = -1;
  for (i = 0; i < n; ++i) {
    if (!items[i].waiting) continue;
    if (items[i].due_ms <= now) {
      if (best < 0 || items[i].due_ms < items[best].due_ms) best = i;
    } else if ((long)(items[i].due_ms - now) < *wait_ms) {
      *wait_ms = (long)(items[i].due_ms - now);
    }
  }
  if (best >= 0) {
    items[best].waiting = 0;
    return best;
  }
  return *next_new < n ? (*next_new)++ : -1;
}

int s3_execute_many(s3_fs* fs, const s3_config* cfg, int n, const s3_request* reqs,
                    s3_response* resps, TF_Status** statuses) {
  bulk_item* items;
  int* running; /* per easy handle: the item it runs, or -1 */
  s3_bulk* b;
  int i, next_new = 0, finished = 0, failed = 0;
  if (n <= 0) return 0;
  if (check_setup(fs, cfg, statuses[0]) != 0) {
    for (i = 1; i < n; ++i) TF_SetStatus(statuses[i], TF_GetCode(statuses[0]), TF_Message(statuses[0]));
    return -1;
  }
  items = calloc((size_t)n, sizeof *items);
  b = take_bulk(fs, cfg, n < 256 ? n : 256);
  running = b != NULL ? malloc((size_t)b->connections * sizeof *running) : NULL;
  if (items == NULL || running == NULL) {
    for (i = 0; i < n; ++i) TF_SetStatus(statuses[i], TF_RESOURCE_EXHAUSTED, "s3: out of memory");
    free(items);
    free(running);
    if (b != NULL) give_bulk(fs, b);
    return -1;
  }
  for (i = 0; i < n; ++i) attempt_init(&items[i].a, &reqs[i], &resps[i]);
  for (i = 0; i < b->connections; ++i) running[i] = -1;
  while (finished < n) {
    CURLMsg* msg;
    int left, slot;
    long wait_ms = 1000;
    uint64_t now = now_ms();
    for (slot = 0; slot < b->connections; ++slot) {
      int k;
      if (running[slot] >= 0) continue;
      k = next_ready(items, n, &next_new, now, &wait_ms);
      if (k < 0) break;
      if (b->easy[slot] == NULL) b->easy[slot] = curl_easy_init();
      else curl_easy_reset(b->easy[slot]);
      if (b->easy[slot] == NULL) {
        TF_SetStatus(statuses[k], TF_RESOURCE_EXHAUSTED, "s3: no curl handle");
      } else if (attempt_prepare(fs, cfg, &items[k].a, statuses[k]) == 0) {
        attempt_bind(cfg, &items[k].a, b->easy[slot]);
        if (curl_multi_add_handle(b->multi, b->easy[slot]) == CURLM_OK) {
          running[slot] = k;
          continue;
        }
        attempt_drop(&items[k].a);
        TF_SetStatus(statuses[k], TF_INTERNAL, "s3: curl refused a request");
      }
      finished++;
      failed = 1;
      --slot; /* the slot is still free */
    }
    bulk_run_timer(b); /* a request just added starts on curl's timer */
    while ((msg = curl_multi_info_read(b->multi, &left)) != NULL) {
      int outcome, healthy, k = -1;
      if (msg->msg != CURLMSG_DONE) continue;
      for (slot = 0; slot < b->connections; ++slot)
        if (running[slot] >= 0 && b->easy[slot] == msg->easy_handle) break;
      if (slot == b->connections) continue;
      k = running[slot];
      running[slot] = -1;
      outcome = attempt_finish(cfg, &items[k].a, msg->easy_handle, msg->data.result, &healthy,
                               statuses[k]);
      curl_multi_remove_handle(b->multi, b->easy[slot]);
      if (outcome == 1) {
        items[k].waiting = 1;
        items[k].due_ms = now_ms() + items[k].a.delay_ms;
      } else {
        finished++;
        failed |= outcome != 0;
      }
    }
    if (finished == n) break;
    for (slot = 0; slot < b->connections && running[slot] >= 0; ++slot) {
    }
    if (slot < b->connections && next_new < n) continue; /* room, and requests not yet sent */
    bulk_wait(b, wait_ms);
  }
  give_bulk(fs, b);
  free(items);
  free(running);
  return failed ? -1 : 0;
}
