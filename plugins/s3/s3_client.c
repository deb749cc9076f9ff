/* The s3 store on the object-store engine (plugins/objstore): a request
 * signed (s3_sign.c) for each try, S3's error documents read for their
 * <Code>, its throttling codes retried, and a failure turned into a
 * TF_Code with a message that names the object and, for refusals, the
 * access key id (never the secret). The engine sends, pools connections
 * and retries. */
#define _POSIX_C_SOURCE 200809L

#include <curl/curl.h>
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
  if (resp != NULL) memset(resp, 0, sizeof *resp);
  req->method = method;
  req->bucket = bucket;
  req->key = key;
}

/* ---- errors ------------------------------------------------------------------ */

/* S3's names for "try again" that may come with a 400 or a 200. Not
 * RequestTimeTooSkewed: the next try is signed by the same clock. */
static int s3_retryable_code(const char* code) {
  return strcmp(code, "SlowDown") == 0 || strcmp(code, "RequestTimeout") == 0 ||
         strcmp(code, "InternalError") == 0;
}

static TF_Code code_for(long http, const char* code) {
  if (strcmp(code, "BucketAlreadyOwnedByYou") == 0 ||
      strcmp(code, "BucketAlreadyExists") == 0)
    return TF_ALREADY_EXISTS;
  if (strcmp(code, "BucketNotEmpty") == 0) return TF_FAILED_PRECONDITION;
  if (http == 401) return TF_PERMISSION_DENIED; /* S3 says 403 for either */
  return objstore_code_for_http(http);
}

static void describe(const s3_request* req, char* out, size_t cap) {
  if (req->bucket == NULL)
    snprintf(out, cap, "%s s3://", req->method);
  else
    snprintf(out, cap, "%s s3://%s/%s", req->method, req->bucket,
             req->key != NULL ? req->key : "");
}

/* An answered request that failed for good, in S3's words. */
static void set_error(const s3_config* cfg, const s3_credentials* creds,
                      const s3_request* req, const s3_response* resp, int attempts,
                      TF_Status* status) {
  char what[600], msg[1400], tries[48] = "";
  char* message = resp->body.data != NULL
                      ? objstore_xml_find(resp->body.data, resp->body.len, "Message")
                      : NULL;
  describe(req, what, sizeof what);
  if (message != NULL && *message == '\0') {
    free(message);
    message = NULL;
  }
  if (attempts > 1) snprintf(tries, sizeof tries, " (after %d attempts)", attempts);
  if (resp->http == 301 || strcmp(resp->error_code, "PermanentRedirect") == 0) {
    snprintf(msg, sizeof msg,
             "%s: the bucket is in region '%s', not '%s': set the region option "
             "(AWS_REGION) to it (HTTP %ld PermanentRedirect)",
             what, *resp->captured ? resp->captured : "(not named)", cfg->region, resp->http);
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


/* ---- the store's hooks ----------------------------------------------------------- */

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

/* Whether requests can be sent at all: 0, or -1 with status set. */
static int check_setup(s3_fs* fs, const s3_config* cfg, TF_Status* status) {
  if (fs->setup_error[0] != '\0') {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, fs->setup_error);
    return -1;
  }
  return check_endpoint(cfg, status);
}

/* A signature is good for 15 minutes (the server's allowance for clock
 * skew); a retry later than 5 minutes after it is signed afresh. */
#define SIGNATURE_LIFE_MS ((uint64_t)5 * 60 * 1000)

static int s3_authorize(void* store, objstore_exchange* x, TF_Status* status) {
  s3_fs* fs = store;
  s3_call* call = (s3_call*)x->store_request;
  uint64_t until = objstore_now_ms() + SIGNATURE_LIFE_MS;
  time_t now = time(NULL);
  if (check_setup(fs, call->cfg, status) != 0) return -1;
  if (s3_credentials_acquire(fs, call->cfg, &call->borrowed, &call->creds, status) != 0) return -1;
  if (s3_sign(call->cfg, call->creds, call->req, now, &call->sr) != 0) {
    s3_credentials_release(call->creds);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "s3: out of memory signing a request");
    return -1;
  }
  /* Keys that expire sooner: a retry after then gets fresh ones. */
  if (call->creds != NULL && call->creds->expires > 0) {
    int64_t left_ms = ((int64_t)call->creds->expires - (int64_t)now) * 1000;
    if (left_ms < 0) left_ms = 0;
    if ((uint64_t)left_ms < SIGNATURE_LIFE_MS) until = objstore_now_ms() + (uint64_t)left_ms;
  }
  x->url = call->sr.url;
  x->headers = call->sr.headers;
  x->authorized_until_ms = until;
  return 0;
}

static void s3_unauthorize(void* store, objstore_exchange* x) {
  s3_call* call = (s3_call*)x->store_request;
  (void)store;
  s3_signed_free(&call->sr);
  s3_credentials_release(call->creds);
  call->creds = NULL;
}

/* Error answers carry an <Error> document; so do some 200s
 * (CompleteMultipartUpload, the copies). An object's own bytes are never
 * read as one. */
static void s3_read_answer(void* store, objstore_exchange* x) {
  const s3_call* call = x->store_request;
  s3_response* resp = x->resp;
  char* code;
  (void)store;
  if (resp->body.len == 0 ||
      (resp->http / 100 == 2 && strcmp(x->method, "POST") != 0 && call->req->copy_source == NULL))
    return;
  code = objstore_xml_find(resp->body.data, resp->body.len, "Code");
  if (code != NULL && (resp->http / 100 != 2 || strstr(resp->body.data, "<Error>") != NULL)) {
    snprintf(resp->error_code, sizeof resp->error_code, "%s", code);
    if (resp->http / 100 == 2) resp->http = 500;
  }
  free(code);
}

static int s3_retryable(void* store, const objstore_exchange* x) {
  (void)store;
  return s3_retryable_code(x->resp->error_code);
}

static void s3_set_error(void* store, const objstore_exchange* x, TF_Status* status) {
  const s3_call* call = x->store_request;
  (void)store;
  set_error(call->cfg, call->creds, call->req, x->resp, x->attempts, status);
}

static void s3_describe(void* store, const objstore_exchange* x, char* out, size_t cap) {
  const s3_call* call = x->store_request;
  (void)store;
  describe(call->req, out, cap);
}

const objstore_store s3_store = {
    OBJSTORE_STORE_VERSION, sizeof(objstore_store), "s3", "x-amz-meta-", "x-amz-bucket-region",
    s3_authorize,      s3_unauthorize,     s3_read_answer,     s3_retryable,  s3_set_error,
    s3_describe,       s3_object_request,  s3_release_request, s3_explain_missing,
    s3_name_object,    NULL,               s3_put_request};

/* ---- requests --------------------------------------------------------------------- */

void s3_exchange_bind(const s3_config* cfg, const s3_request* req, s3_call* call,
                      objstore_exchange* x) {
  long long first, last;
  memset(call, 0, sizeof *call);
  call->req = req;
  call->cfg = cfg;
  x->store_request = call;
  x->body = req->body;
  x->body_len = req->body_len;
  x->want_attributes = req->want_attributes;
  if (req->out != NULL) {
    x->out = req->out;
    x->out_cap = req->out_cap;
  }
  if (req->max_body > 0) x->max_body = req->max_body;
  if (req->range != NULL && sscanf(req->range, "bytes=%lld-%lld", &first, &last) == 2 &&
      last >= first) {
    x->range_first = first;
    x->expect = (size_t)(last - first + 1);
  }
}

static void exchange_for(const s3_config* cfg, const s3_request* req, s3_response* resp,
                         s3_call* call, objstore_exchange* x) {
  objstore_exchange_init(x, resp, req->method, NULL);
  s3_exchange_bind(cfg, req, call, x);
}

int s3_execute(s3_fs* fs, const s3_config* cfg, const s3_request* req,
               s3_response* resp, TF_Status* status) {
  objstore_exchange x;
  s3_call call;
  exchange_for(cfg, req, resp, &call, &x);
  return objstore_run(fs->store.engine, &cfg->transport, &x, status);
}

int s3_execute_many(s3_fs* fs, const s3_config* cfg, int n, const s3_request* reqs,
                    s3_response* resps, TF_Status** statuses) {
  objstore_exchange* xs;
  s3_call* calls;
  int i, rc;
  if (n <= 0) return 0;
  xs = malloc((size_t)n * sizeof *xs);
  calls = malloc((size_t)n * sizeof *calls);
  if (xs == NULL || calls == NULL) {
    for (i = 0; i < n; ++i) plugin_set_oom(statuses[i]);
    free(xs);
    free(calls);
    return -1;
  }
  for (i = 0; i < n; ++i) exchange_for(cfg, &reqs[i], &resps[i], &calls[i], &xs[i]);
  rc = objstore_run_many(fs->store.engine, &cfg->transport, n, xs, statuses);
  free(xs);
  free(calls);
  return rc;
}
