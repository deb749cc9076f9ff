/* One request's tries: curl's options for a try, the answer's headers
 * and body as they arrive, the retry policy (408, 429, 5xx and dropped
 * connections, with capped exponential backoff, full jitter, Retry-After
 * and a total budget), and the words of a failure. */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "objstore_internal.h"

void objstore_attributes_free(objstore_attributes* a) {
  plugin_strlist_free(&a->names);
  plugin_strlist_free(&a->values);
  free(a->content_type);
  a->content_type = NULL;
}

void objstore_response_free(objstore_response* r) {
  plugin_buf_free(&r->body);
  free(r->location);
  r->location = NULL;
  free(r->redirected_to);
  r->redirected_to = NULL;
  objstore_attributes_free(&r->attributes);
}

void objstore_exchange_init(objstore_exchange* x, objstore_response* resp, const char* method,
                            const void* store_request) {
  memset(x, 0, sizeof *x);
  memset(resp, 0, sizeof *resp);
  x->method = method;
  x->resp = resp;
  x->store_request = store_request;
  x->range_first = -1;
}

uint64_t objstore_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

TF_Code objstore_code_for_http(long http) {
  switch (http) {
    case 400: return TF_INVALID_ARGUMENT;
    case 401: return TF_UNAUTHENTICATED;
    case 403: return TF_PERMISSION_DENIED;
    case 404:
    case 410: return TF_NOT_FOUND;
    case 409:
    case 412: return TF_FAILED_PRECONDITION;
    case 416: return TF_OUT_OF_RANGE;
    case 408:
    case 429:
    case 500:
    case 502:
    case 503:
    case 504: return TF_UNAVAILABLE;
    case 501: return TF_UNIMPLEMENTED;
    default: return TF_UNKNOWN;
  }
}

void objstore_tls_options(const objstore_settings* settings, void* curl_handle) {
  CURL* h = curl_handle;
  if (settings->ca_bundle != NULL && *settings->ca_bundle != '\0')
    curl_easy_setopt(h, CURLOPT_CAINFO, settings->ca_bundle);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, settings->verify_tls ? 1L : 0L);
  curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, settings->verify_tls ? 2L : 0L);
}

/* ---- the answer, as it arrives -------------------------------------------------- */

/* What an answer may hold in memory, whatever the server sends: an error
 * document is read for its code and message, which come first; any other
 * answer the engine keeps (a listing page, a multipart call's) is bounded
 * too. A server that sends more is cut off, not followed into gigabytes. */
#define ERROR_BODY_MOST ((size_t)64 * 1024)
#define ANSWER_MOST ((size_t)16 * 1024 * 1024)

static size_t answer_most(const objstore_exchange* x) {
  if (x->max_body > 0) return x->max_body;
  if (x->expect > 0) return x->expect;
  return ANSWER_MOST;
}

static size_t on_body(char* data, size_t size, size_t n, void* arg) {
  objstore_try* t = arg;
  objstore_exchange* x = t->x;
  objstore_response* resp = x->resp;
  size_t len = size * n;
  if (resp->http / 100 != 2) { /* an error document: its start is all that is read */
    size_t room = ERROR_BODY_MOST - resp->body.len;
    if (len > room) {
      if (room > 0 && plugin_buf_append(&resp->body, data, room) != 0) return 0;
      t->error_cut = 1;
      return 0;
    }
    return plugin_buf_append(&resp->body, data, len) == 0 ? len : 0;
  }
  if (resp->http == 200 && x->range_first >= 0) { /* Range ignored: the whole object */
    size_t skip = t->skipped < (uint64_t)x->range_first ? (size_t)((uint64_t)x->range_first - t->skipped) : 0;
    size_t want = x->out != NULL ? x->out_cap : answer_most(x);
    size_t have = x->out != NULL ? resp->out_len : resp->body.len, take;
    if (skip > len) skip = len;
    t->skipped += skip;
    take = len - skip < want - have ? len - skip : want - have;
    if (take > 0) {
      if (x->out != NULL) {
        memcpy(x->out + resp->out_len, data + skip, take);
        resp->out_len += take;
      } else if (plugin_buf_append(&resp->body, data + skip, take) != 0) {
        return 0;
      }
    }
    if (have + take < want) return len;
    t->satisfied = 1; /* all that was asked for: the rest is not read */
    return 0;
  }
  if (x->out != NULL) {
    if (resp->out_len + len > x->out_cap) {
      t->overflow = 1;
      return 0;
    }
    memcpy(x->out + resp->out_len, data, len);
    resp->out_len += len;
    return len;
  }
  if (resp->body.len + len > answer_most(x)) {
    t->overflow = 1;
    return 0;
  }
  return plugin_buf_append(&resp->body, data, len) == 0 ? len : 0;
}

static size_t on_upload(char* buffer, size_t size, size_t n, void* arg) {
  objstore_try* t = arg;
  size_t left = t->x->body_len - t->sent;
  size_t len = size * n < left ? size * n : left;
  if (len > 0) memcpy(buffer, t->x->body + t->sent, len);
  t->sent += len;
  return len;
}

static int header_is(const char* line, size_t name_len, const char* name) {
  return strlen(name) == name_len && strncasecmp(line, name, name_len) == 0;
}

/* A metadata header (under the store's prefix) or Content-Type into the
 * response's attributes: names lowercased, values whole. */
static void collect_attribute(const char* prefix, objstore_response* resp, const char* line,
                              size_t name_len, const char* value, size_t vlen) {
  size_t plen = prefix != NULL ? strlen(prefix) : 0;
  if (plen > 0 && name_len > plen && strncasecmp(line, prefix, plen) == 0) {
    char name[160];
    size_t i, n = name_len - plen;
    if (n >= sizeof name) return;
    for (i = 0; i < n; ++i) name[i] = (char)tolower((unsigned char)line[plen + i]);
    name[n] = '\0';
    if (plugin_strlist_push(&resp->attributes.names, name, n) == 0 &&
        plugin_strlist_push(&resp->attributes.values, value, vlen) != 0) /* keep them paired */
      plugin_memory_free(resp->attributes.names.items[--resp->attributes.names.count]);
  } else if (header_is(line, name_len, "content-type")) {
    free(resp->attributes.content_type);
    resp->attributes.content_type = strndup(value, vlen);
  }
}

/* Retry-After: delay-seconds or an HTTP date. */
static int64_t retry_after_ms(const char* value) {
  char* end;
  long long seconds = strtoll(value, &end, 10);
  if (end != value && *end == '\0') return seconds < 0 ? 0 : seconds * 1000;
  {
    time_t when = curl_getdate(value, NULL), now = time(NULL);
    if (when <= 0) return -1;
    return when > now ? (int64_t)(when - now) * 1000 : 0;
  }
}

static size_t on_header(char* line, size_t size, size_t n, void* arg) {
  objstore_try* t = arg;
  objstore_exchange* x = t->x;
  objstore_response* resp = x->resp;
  const objstore_store* store = t->store;
  size_t len = size * n, vlen, name_len;
  char value[256];
  const char* colon = memchr(line, ':', len);
  if (len >= 5 && strncmp(line, "HTTP/", 5) == 0) {
    /* A new response (after 100 Continue) starts afresh. */
    const char* sp = memchr(line, ' ', len);
    resp->http = sp != NULL ? strtol(sp + 1, NULL, 10) : 0;
    return len;
  }
  if (colon == NULL) return len;
  name_len = (size_t)(colon - line);
  colon++;
  while (colon < line + len && (*colon == ' ' || *colon == '\t')) colon++;
  vlen = (size_t)(line + len - colon);
  while (vlen > 0 && (colon[vlen - 1] == '\r' || colon[vlen - 1] == '\n')) vlen--;
  if (x->want_attributes) collect_attribute(store->meta_prefix, resp, line, name_len, colon, vlen);
  if (vlen >= sizeof value) vlen = sizeof value - 1;
  memcpy(value, colon, vlen);
  value[vlen] = '\0';
  if (header_is(line, name_len, "content-length")) {
    resp->length = strtoll(value, NULL, 10);
    if (x->max_body > 0 && resp->http / 100 == 2 && resp->length > (int64_t)x->max_body) {
      t->overflow = 1; /* stop before the body: the caller asks another way */
      return 0;
    }
  } else if (header_is(line, name_len, "content-range")) {
    const char* slash = strrchr(value, '/');
    if (slash != NULL && slash[1] != '*') resp->total = strtoll(slash + 1, NULL, 10);
  } else if (header_is(line, name_len, "last-modified")) {
    time_t when = curl_getdate(value, NULL);
    if (when > 0) resp->mtime_nsec = (int64_t)when * 1000000000;
  } else if (header_is(line, name_len, "etag")) {
    snprintf(resp->etag, sizeof resp->etag, "%.95s", value);
  } else if (header_is(line, name_len, "location") && x->max_redirects > 0) {
    free(resp->location);
    resp->location = strndup(colon, vlen); /* whole: a URL may be long */
  } else if (header_is(line, name_len, "range")) { /* "bytes=0-K": what a resumable upload holds */
    const char* dash = strchr(value, '-');
    resp->range_end = dash != NULL ? strtoll(dash + 1, NULL, 10) : -1;
  } else if (header_is(line, name_len, "retry-after")) {
    resp->retry_after_ms = retry_after_ms(value);
  } else if (store->capture_header != NULL &&
             header_is(line, name_len, store->capture_header)) {
    snprintf(resp->captured, sizeof resp->captured, "%.63s", value);
  } else if (store->size > offsetof(objstore_store, error_header) && store->error_header != NULL &&
             header_is(line, name_len, store->error_header)) {
    snprintf(resp->error_code, sizeof resp->error_code, "%.63s", value);
  }
  return len;
}

/* ---- a try ---------------------------------------------------------------------------- */

static void reset_response(objstore_response* resp) {
  objstore_attributes_free(&resp->attributes);
  resp->http = 0;
  resp->body.len = 0;
  if (resp->body.data != NULL) resp->body.data[0] = '\0';
  resp->out_len = 0;
  resp->length = -1;
  resp->total = -1;
  resp->mtime_nsec = 0;
  resp->retry_after_ms = -1;
  resp->range_end = -1;
  resp->etag[0] = '\0';
  resp->captured[0] = '\0';
  free(resp->location);
  resp->location = NULL;
  resp->error_code[0] = '\0';
  resp->too_long = 0;
}

/* curl allocates its receive buffer, and its upload buffer, for each
 * transfer and frees them when it ends: a large one costs a fresh mapping
 * (or a consolidation of the heap) per request. So only a body that may be
 * large gets large buffers; a small object's GET, a HEAD, a small PUT and
 * the answers of the rest fit curl's defaults (16 and 64 KiB). */
#define SMALL_BODY ((size_t)64 * 1024)
#define LARGE_BUFFER (256L * 1024)

static long receive_buffer(const objstore_exchange* x) {
  size_t expected;
  if (strcmp(x->method, "GET") != 0) return CURL_MAX_WRITE_SIZE;
  expected = x->out != NULL ? x->out_cap : x->expect > 0 ? x->expect : x->max_body;
  if (expected == 0 || expected > SMALL_BODY) return LARGE_BUFFER; /* 0: no bound */
  return CURL_MAX_WRITE_SIZE;
}

void objstore_try_bind(objstore_try* t, objstore_exchange* x) {
  CURL* h = t->easy;
  const objstore_settings* s = x->settings;
  t->x = x;
  t->sent = 0;
  t->overflow = 0;
  t->error_cut = 0;
  t->satisfied = 0;
  t->skipped = 0;
  t->detail[0] = '\0';
  x->attempts++;
  reset_response(x->resp);
  curl_easy_reset(h); /* keeps nothing of the last transfer; the multi keeps the connections */
  curl_easy_setopt(h, CURLOPT_PRIVATE, t);
  curl_easy_setopt(h, CURLOPT_URL, x->url);
  curl_easy_setopt(h, CURLOPT_PATH_AS_IS, 1L); /* a key's "/../" is a key's, as authorized */
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, x->headers);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, t->detail);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, t);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, t);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)s->connect_timeout_ms);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)((s->read_timeout_ms + 999) / 1000));
  /* An idle connection older than this is not reused but closed. */
  curl_easy_setopt(h, CURLOPT_MAXAGE_CONN, (long)((s->idle_timeout_ms + 999) / 1000));
  curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
  if (x->timeout_ms > 0) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)x->timeout_ms);
  /* Proxies: curl reads HTTPS_PROXY, https_proxy, http_proxy and NO_PROXY
   * itself; a link-local service is never reached through one. */
  if (x->direct) curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  objstore_tls_options(s, h);
  curl_easy_setopt(h, CURLOPT_BUFFERSIZE, receive_buffer(x));
  if (x->body_len > SMALL_BODY) curl_easy_setopt(h, CURLOPT_UPLOAD_BUFFERSIZE, 1024L * 1024);
  if (strcmp(x->method, "HEAD") == 0) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (strcmp(x->method, "PUT") == 0) {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, on_upload);
    curl_easy_setopt(h, CURLOPT_READDATA, t);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->body_len);
  } else if (strcmp(x->method, "POST") == 0) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, x->body != NULL ? x->body : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->body_len);
  } else if (strcmp(x->method, "GET") != 0) {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, x->method);
  }
}

/* ---- the retry policy ------------------------------------------------------------------ */

static int transport_retryable(CURLcode rc) {
  switch (rc) {
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

static int http_retryable(long http) { return http == 408 || http == 429 || http >= 500; }

/* "az: GET az://c/b: HTTP 503; try 2 of 10 in 87 ms", to the plugin's log
 * (Python's logging, under asyncfs.<store>): what was retried, why, and
 * when. A credential service's request is named by its host alone (a
 * query may carry a secret). */
static void log_retry(const objstore_store* store, void* store_ctx, const objstore_exchange* x, CURLcode rc,
                      int64_t most, uint64_t delay) {
  char what[400], why[300];
  if (!x->raw && store->describe != NULL) {
    store->describe(store_ctx, x, what, sizeof what);
  } else {
    const char* host = x->url != NULL ? strstr(x->url, "://") : NULL;
    snprintf(what, sizeof what, "%s %.*s", x->method, host != NULL ? (int)strcspn(host + 3, "/?") : 0,
             host != NULL ? host + 3 : "");
  }
  if (rc == CURLE_OK) {
    snprintf(why, sizeof why, "HTTP %ld%s%s", x->resp->http, *x->resp->error_code ? " " : "",
             x->resp->error_code);
  } else {
    snprintf(why, sizeof why, "%s", *x->detail ? x->detail : curl_easy_strerror(rc));
  }
  PLUGIN_LOG(TF_INFO, "%s: %s: %s; try %d of %lld in %llu ms", store->name, what, why, x->attempts + 1,
         (long long)most, (unsigned long long)delay);
}

/* The longest backoff between two tries, whatever the doubling says. */
#define BACKOFF_CEILING_MS 5000

/* Full jitter: a delay drawn from [0, base * 2^(tries-1)], capped, and at
 * least what the server's Retry-After asks. */
static uint64_t backoff_ms(objstore_exchange* x) {
  int doublings = x->attempts - 1 < 10 ? x->attempts - 1 : 10;
  uint64_t ceiling = (uint64_t)x->settings->retry_base_ms << doublings, delay;
  if (ceiling > BACKOFF_CEILING_MS) ceiling = BACKOFF_CEILING_MS;
  delay = (uint64_t)(rand_r(&x->seed) % (ceiling + 1));
  if (x->resp->retry_after_ms > 0 && (uint64_t)x->resp->retry_after_ms > delay)
    delay = (uint64_t)x->resp->retry_after_ms;
  return delay;
}

int objstore_try_finish(void* store_ctx, objstore_try* t, CURLcode rc) {
  objstore_exchange* x = t->x;
  const objstore_store* store = t->store;
  objstore_response* resp = x->resp;
  int64_t most = x->max_attempts > 0 ? x->max_attempts : x->settings->max_attempts;
  int retry;
  if (rc != CURLE_OK && t->error_cut) rc = CURLE_OK; /* what was kept of the error says which */
  if (rc != CURLE_OK && t->satisfied) rc = CURLE_OK; /* a range cut from a whole answer */
  if (rc == CURLE_OK) {
    long http = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &http);
    resp->http = http;
    if (http == 200 && x->range_first >= 0 && resp->length >= 0) resp->total = resp->length;
  } else if (t->overflow) {
    /* More body than the caller's buffer or bound: no retry changes that. */
    rc = CURLE_WRITE_ERROR;
    resp->too_long = x->max_body > 0;
    snprintf(t->detail, sizeof t->detail, "the answer was longer than asked for");
  }
  x->transport_error = (int)rc;
  snprintf(x->detail, sizeof x->detail, "%s", t->detail);
  if (rc == CURLE_OK && !x->raw && store->read_answer != NULL) store->read_answer(store_ctx, x);
  if (rc == CURLE_OK && resp->http / 100 == 2) return 0;
  if (rc == CURLE_OK && x->max_redirects > 0 && resp->location != NULL &&
      (resp->http == 301 || resp->http == 302 || resp->http == 303 || resp->http == 307 ||
       resp->http == 308))
    return 3; /* its caller follows it */
  if (x->raw && rc == CURLE_OK && !http_retryable(resp->http)) return 0; /* answered: the caller reads it */
  retry = rc != CURLE_OK ? transport_retryable(rc) : http_retryable(resp->http);
  if (!retry && rc == CURLE_OK && !x->raw && store->retryable != NULL)
    retry = store->retryable(store_ctx, x);
  if (retry && x->attempts < most) {
    uint64_t now = objstore_now_ms(), delay = backoff_ms(x);
    if (now + delay - x->started_ms <= (uint64_t)x->settings->retry_budget_ms) {
      x->due_ms = now + delay;
      log_retry(store, store_ctx, x, rc, most, delay);
      return 1;
    }
  }
  return -1;
}

/* ---- redirects ----------------------------------------------------------------------- */

int objstore_url_encode(plugin_buf* b, const char* s, int keep_slash) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s != '\0'; ++s) {
    unsigned char ch = (unsigned char)*s;
    if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
        ch == '.' || ch == '_' || ch == '~' || (ch == '/' && keep_slash)) {
      if (plugin_buf_append(b, s, 1) != 0) return -1;
    } else {
      char esc[3] = {'%', hex[ch >> 4], hex[ch & 15]};
      if (plugin_buf_append(b, esc, 3) != 0) return -1;
    }
  }
  return 0;
}

int objstore_add_header(struct curl_slist** headers, const char* name, const char* value) {
  size_t n = strlen(name) + strlen(value) + 3;
  char* line = malloc(n);
  struct curl_slist* grown;
  if (line == NULL) return -1;
  snprintf(line, n, "%s: %s", name, value);
  grown = curl_slist_append(*headers, line);
  free(line);
  if (grown == NULL) return -1;
  *headers = grown;
  return 0;
}

int objstore_object_of(const char* scheme, const char* holder, const char* what, const char* path,
                       char** copy, char** bucket, char** key, TF_Status* status) {
  char msg[600];
  char *p, *slash;
  if ((*copy = strdup(path)) == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  p = *copy;
  while (*p == '/') ++p;
  slash = strchr(p, '/');
  if (slash != NULL && slash[1] != '\0') {
    *slash = '\0';
    *bucket = p;
    *key = slash + 1;
    return 0;
  }
  snprintf(msg, sizeof msg, "%s %s:/%s: a %s is a directory, not a file", what, scheme, path, holder);
  TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
  free(*copy);
  *copy = NULL;
  return -1;
}

int objstore_same_origin(const char* a, const char* b) {
  static const CURLUPart parts[] = {CURLUPART_SCHEME, CURLUPART_HOST, CURLUPART_PORT};
  CURLU* ua = curl_url();
  CURLU* ub = curl_url();
  int same = ua != NULL && ub != NULL && curl_url_set(ua, CURLUPART_URL, a, 0) == CURLUE_OK &&
             curl_url_set(ub, CURLUPART_URL, b, 0) == CURLUE_OK;
  size_t i;
  for (i = 0; same && i < sizeof parts / sizeof parts[0]; ++i) {
    char *pa = NULL, *pb = NULL;
    curl_url_get(ua, parts[i], &pa, CURLU_DEFAULT_PORT);
    curl_url_get(ub, parts[i], &pb, CURLU_DEFAULT_PORT);
    same = pa != NULL && pb != NULL && strcasecmp(pa, pb) == 0;
    curl_free(pa);
    curl_free(pb);
  }
  curl_url_cleanup(ua);
  curl_url_cleanup(ub);
  return same;
}

int objstore_follow(objstore_exchange* x, TF_Status* status) {
  CURLU* u = curl_url();
  char* next = NULL;
  char msg[700];
  const char* from = x->resp->redirected_to != NULL ? x->resp->redirected_to : x->url;
  if (++x->redirects > x->max_redirects) {
    snprintf(msg, sizeof msg, "%s %.300s: more than %d redirects (a loop?)", x->method, from,
             x->max_redirects);
    TF_SetStatus(status, TF_UNAVAILABLE, msg);
    curl_url_cleanup(u);
    return -1;
  }
  /* The Location, resolved against the URL that answered with it. */
  if (u == NULL || curl_url_set(u, CURLUPART_URL, from, 0) != CURLUE_OK ||
      curl_url_set(u, CURLUPART_URL, x->resp->location, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_URL, &next, 0) != CURLUE_OK ||
      (strncmp(next, "http://", 7) != 0 && strncmp(next, "https://", 8) != 0)) {
    snprintf(msg, sizeof msg, "%s %.300s: a redirect to '%.200s', which is not an http(s) URL",
             x->method, from, x->resp->location);
    TF_SetStatus(status, TF_UNAVAILABLE, msg);
    curl_free(next);
    curl_url_cleanup(u);
    return -1;
  }
  free(x->resp->redirected_to);
  x->resp->redirected_to = strdup(next);
  curl_free(next);
  curl_url_cleanup(u);
  if (x->resp->redirected_to == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  if (x->resp->http == 303) x->method = strcmp(x->method, "HEAD") == 0 ? "HEAD" : "GET";
  return 0;
}

/* ---- failures --------------------------------------------------------------------------- */

static void describe(const objstore_store* store, void* store_ctx, const objstore_exchange* x,
                     char* out, size_t cap) {
  if (!x->raw && store->describe != NULL)
    store->describe(store_ctx, x, out, cap);
  else
    snprintf(out, cap, "%s %s", x->method, x->url != NULL ? x->url : "");
}

void objstore_set_failure(const objstore_store* store, void* store_ctx,
                          const objstore_exchange* x, TF_Status* status) {
  char what[600], msg[1200], tries[48] = "";
  if (x->transport_error == CURLE_OK && !x->raw && store->set_error != NULL) {
    store->set_error(store_ctx, x, status);
    return;
  }
  describe(store, store_ctx, x, what, sizeof what);
  if (x->attempts > 1) snprintf(tries, sizeof tries, " (after %d attempts)", x->attempts);
  if (x->transport_error != CURLE_OK) {
    CURLcode rc = (CURLcode)x->transport_error;
    snprintf(msg, sizeof msg, "%s: %s%s%s%s", what, curl_easy_strerror(rc), *x->detail ? ": " : "",
             x->detail, tries);
    TF_SetStatus(status, rc == CURLE_OPERATION_TIMEDOUT ? TF_DEADLINE_EXCEEDED : TF_UNAVAILABLE,
                 msg);
  } else {
    snprintf(msg, sizeof msg, "%s: HTTP %ld%s", what, x->resp->http, tries);
    TF_SetStatus(status, objstore_code_for_http(x->resp->http), msg);
  }
}
