/* The s3 store's requests for the engine: an object's for its readers
 * (s3_object_request) and the namespace's (stat, delete, create-if-absent,
 * listing pages, server-side copies, DeleteObjects batches), each an
 * s3_request signed as every other (s3_client.c). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

/* A request of the s3 store made for the engine, with what it points to;
 * the engine frees it with s3_release_request. */
typedef struct object_call {
  s3_call call; /* first: the store's hooks find it at x->store_request */
  s3_request req;
  objstore_path path; /* owned copies */
  s3_config* cfg;
  s3_fs* fs;
  char range[64];
  char if_match[96];
  s3_list_call list; /* a listing page's parameters */
  char* prefix;
  char* token;
  int buckets; /* a ListBuckets */
  char number[16]; /* an UploadPart's parameters */
  s3_param params[2];
} object_call;

static void object_call_free(object_call* c) {
  objstore_path_free(&c->path);
  free(c->prefix);
  free(c->token);
  s3_config_release(c->fs, c->cfg);
  free(c);
}

static object_call* call_new(s3_fs* fs, const char* bucket, const char* key, TF_Status* status) {
  object_call* c = calloc(1, sizeof *c);
  if (c == NULL) goto oom;
  c->fs = fs;
  c->cfg = s3_config_acquire(fs);
  c->path.bucket = strdup(bucket);
  c->path.key = strdup(key);
  if (c->path.bucket == NULL || c->path.key == NULL) {
    object_call_free(c);
    goto oom;
  }
  return c;
oom:
  plugin_set_oom(status);
  return NULL;
}

/* x carries req of c, signed with c's settings. */
static void bind(object_call* c, const s3_request* req, objstore_exchange* x) {
  x->method = req->method;
  s3_exchange_bind(c->cfg, req, &c->call, x);
}

void s3_release_request(void* store, objstore_exchange* x) {
  (void)store;
  if (x->store_request == NULL) return;
  object_call_free((object_call*)x->store_request);
  x->store_request = NULL;
}

/* ---- the engine's readers ------------------------------------------------------------ */

int s3_object_request(void* store, const char* path, const char* range, const char* if_match,
                      objstore_exchange* x, TF_Status* status) {
  objstore_path p = {NULL, NULL};
  object_call* c;
  if (objstore_path_parse("s3", path, &p, status) != 0 ||
      s3_check_object(&p, strcmp(x->method, "HEAD") == 0 ? "stat" : "open", status) != 0) {
    objstore_path_free(&p);
    return -1;
  }
  c = call_new(store, p.bucket, p.key, status);
  objstore_path_free(&p);
  if (c == NULL) return -1;
  s3_request_init(&c->req, NULL, x->method, c->path.bucket, c->path.key);
  if (range != NULL) {
    snprintf(c->range, sizeof c->range, "%s", range);
    c->req.range = c->range;
  }
  if (if_match != NULL) {
    snprintf(c->if_match, sizeof c->if_match, "%s", if_match);
    c->req.if_match = c->if_match;
  }
  bind(c, &c->req, x);
  return 0;
}

/* ---- the engine's bulk writes ----------------------------------------------------------- */

/* One PUT of data as the object at path (objstore_write_objects). */
int s3_put_request(void* store, const char* path, const char* data, size_t len, objstore_exchange* x,
                   TF_Status* status) {
  static const s3_attributes none;
  objstore_path p = {NULL, NULL};
  object_call* c;
  if (objstore_path_parse("s3", path, &p, status) != 0 ||
      s3_check_object(&p, "create", status) != 0) {
    objstore_path_free(&p);
    return -1;
  }
  c = call_new(store, p.bucket, p.key, status);
  objstore_path_free(&p);
  if (c == NULL) return -1;
  s3_request_init(&c->req, NULL, "PUT", c->path.bucket, c->path.key);
  c->req.content_type = s3_content_type(c->cfg, &none, c->path.key);
  c->req.attributes = &none;
  c->req.body = len > 0 ? data : "";
  c->req.body_len = len;
  bind(c, &c->req, x);
  return 0;
}

/* UploadPart: data as part number of upload_id (the writer's, which
 * outlives the request) of the object at dst. */
int s3_part_exchange(s3_fs* fs, const objstore_path* dst, const char* upload_id, int number,
                     const char* data, size_t len, objstore_exchange* x, TF_Status* status) {
  object_call* c = call_new(fs, dst->bucket, dst->key, status);
  if (c == NULL) return -1;
  s3_part_request(&c->path, upload_id, number, data, len, NULL, NULL, c->number, c->params, &c->req, NULL);
  bind(c, &c->req, x);
  return 0;
}

int s3_explain_missing(void* store, const char* path, const char* what, const objstore_exchange* x,
                       TF_Status* status) {
  if (strcmp(x->resp->error_code, "NoSuchBucket") == 0) return 0; /* said as it is */
  return objstore_fs_explain_missing(&((s3_fs*)store)->store, path, what, status);
}

void s3_name_object(void* store, const char* path, char* out, size_t cap) {
  (void)store;
  snprintf(out, cap, "s3:/%s", path); /* path is "/bucket/key" */
}

/* ---- the namespace ------------------------------------------------------------------- */

static int tree_request(void* store, const void* config, objstore_tree_request kind,
                        const char* bucket, const char* key, objstore_exchange* x,
                        TF_Status* status) {
  static const char* const methods[] = {"HEAD", "DELETE", "PUT"};
  object_call* c = call_new(store, bucket, key, status);
  (void)config;
  if (c == NULL) return -1;
  s3_request_init(&c->req, NULL, methods[kind], c->path.bucket, *key ? c->path.key : NULL);
  /* create-if-absent: the server decides (412; 409 when another
   * conditional write of the key is under way) */
  if (kind == OBJSTORE_CREATE && *key) c->req.if_none_match = "*";
  bind(c, &c->req, x);
  return 0;
}

static void stat_answer(void* store, const objstore_exchange* x, int64_t* size, int64_t* mtime) {
  (void)store;
  *size = x->resp->length;
  *mtime = x->resp->mtime_nsec;
}

static int list_request(void* store, const void* config, const char* bucket, const char* prefix,
                        const char* delimiter, int max, const char* token, objstore_exchange* x,
                        TF_Status* status) {
  object_call* c = call_new(store, bucket, "", status);
  (void)config;
  if (c == NULL) return -1;
  if (*bucket == '\0') { /* ListBuckets */
    c->buckets = 1;
    s3_request_init(&c->req, NULL, "GET", NULL, NULL);
    bind(c, &c->req, x);
    return 0;
  }
  c->prefix = strdup(prefix);
  c->token = token != NULL ? strdup(token) : NULL;
  if (c->prefix == NULL || (token != NULL && c->token == NULL)) {
    object_call_free(c);
    plugin_set_oom(status);
    return -1;
  }
  s3_list_request(&c->list, c->path.bucket, c->prefix, delimiter, max, c->token);
  bind(c, &c->list.req, x);
  return 0;
}

static int list_answer(void* store, const objstore_exchange* x, objstore_listing* l,
                       TF_Status* status) {
  const object_call* c = x->store_request;
  s3_listing page;
  int i, rc = 0;
  (void)store;
  memset(&page, 0, sizeof page);
  page.url_encoded = !c->buckets;
  if (s3_parse_listing(x->resp->body.data, x->resp->body.len, &page) != 0) {
    TF_SetStatus(status, TF_INTERNAL, "s3: could not parse a listing");
    rc = -1;
  }
  for (i = 0; rc == 0 && i < page.keys.count; ++i)
    rc = objstore_listing_push(l, page.keys.items[i], strlen(page.keys.items[i]), page.sizes[i],
                               page.mtimes[i]);
  for (i = 0; rc == 0 && i < page.prefixes.count; ++i)
    rc = plugin_strlist_push(&l->prefixes, page.prefixes.items[i], strlen(page.prefixes.items[i]));
  if (rc == 0 && page.truncated && page.next_token != NULL && (l->next_token = strdup(page.next_token)) == NULL)
    rc = -1;
  if (rc != 0 && TF_GetCode(status) == TF_OK) plugin_set_oom(status);
  s3_listing_free(&page);
  return rc;
}

static char* list_token(void* store, const objstore_exchange* x) {
  const object_call* c = x->store_request;
  (void)store;
  return c->buckets ? NULL : s3_listing_next_token(x->resp->body.data, x->resp->body.len);
}

static int copy(void* store, const void* config, const char* src_bucket, const char* src_key,
                int64_t size, const char* dst_bucket, const char* dst_key, TF_Status* status) {
  objstore_path src = {(char*)src_bucket, (char*)src_key};
  objstore_path dst = {(char*)dst_bucket, (char*)dst_key};
  return s3_copy_object(store, config, &src, size, &dst, status);
}

/* DeleteObjects, 1000 keys per request, every batch in flight at once
 * from this thread (as far as max_connections allows). */
typedef struct delete_batch {
  plugin_buf body;
  char md5[32];
  int in_body;
  s3_param params[1];
} delete_batch;

/* The keys of batch i that XML can carry go in its body; the others are
 * deleted one by one now (a control character). Returns those that failed. */
static int prepare_batch(s3_fs* fs, const s3_config* cfg, const char* bucket, char** keys, int count,
                         delete_batch* b, objstore_failure* error) {
  int i, failed = 0;
  TF_Status* status = TF_NewStatus();
  b->params[0] = (s3_param){"delete", NULL};
  plugin_buf_append(&b->body, "<Delete><Quiet>true</Quiet>", 27);
  for (i = 0; i < count; ++i) {
    if (!objstore_xml_can_carry(keys[i])) {
      if (s3_simple_request(fs, cfg, "DELETE", bucket, keys[i], NULL, status) != 0) {
        ++failed;
        objstore_failure_record(error, status);
      }
      continue;
    }
    ++b->in_body;
    plugin_buf_append(&b->body, "<Object><Key>", 13);
    objstore_xml_escape_into(&b->body, keys[i]);
    plugin_buf_append(&b->body, "</Key></Object>", 15);
  }
  plugin_buf_append(&b->body, "</Delete>", 9);
  s3_md5_base64(b->body.data, b->body.len, b->md5);
  TF_DeleteStatus(status);
  return failed;
}

/* The keys a batch's answer says were not deleted (all of them when it
 * failed or cannot be read), its failure recorded. */
static int settle_batch(const char* bucket, const delete_batch* b, int sent, const s3_response* resp,
                        TF_Status* status, objstore_failure* error) {
  int errors = b->in_body;
  char key[256], code[64];
  if (sent) {
    errors = s3_parse_delete_errors(resp->body.data, resp->body.len, key, sizeof key, code, sizeof code);
    if (errors > 0) {
      char msg[400];
      snprintf(msg, sizeof msg, "delete s3://%s/%s: %s", bucket, key, code);
      TF_SetStatus(status, TF_UNKNOWN, msg);
    } else if (errors < 0) { /* an unreadable answer: the batch counts as not deleted */
      TF_SetStatus(status, TF_INTERNAL, "s3: could not parse a DeleteObjects answer");
      errors = b->in_body;
    }
  }
  if (errors != 0) objstore_failure_record(error, status);
  return errors;
}

/* Deletes the count keys of bucket; the number not deleted (the first
 * failure in error). */
static int delete_batches(s3_fs* fs, const s3_config* cfg, const char* bucket, char** keys,
                          int count, objstore_failure* error) {
  int n = (count + 999) / 1000, i, m = 0, failed = 0;
  delete_batch* batches = calloc((size_t)(n > 0 ? n : 1), sizeof *batches);
  s3_request* reqs = calloc((size_t)(n > 0 ? n : 1), sizeof *reqs);
  s3_response* resps = calloc((size_t)(n > 0 ? n : 1), sizeof *resps);
  TF_Status** statuses = calloc((size_t)(n > 0 ? n : 1), sizeof *statuses);
  int* sent = calloc((size_t)(n > 0 ? n : 1), sizeof *sent);
  if (batches == NULL || reqs == NULL || resps == NULL || statuses == NULL || sent == NULL) {
    objstore_failure_set(error, TF_RESOURCE_EXHAUSTED, "out of memory");
    failed = count;
    goto done;
  }
  for (i = 0; i < n; ++i) {
    int first = i * 1000, len = count - first < 1000 ? count - first : 1000;
    failed += prepare_batch(fs, cfg, bucket, keys + first, len, &batches[i], error);
    statuses[i] = TF_NewStatus();
    if (batches[i].in_body == 0) continue;
    sent[i] = 1;
    s3_request_init(&reqs[m], &resps[m], "POST", bucket, NULL);
    reqs[m].params = batches[i].params;
    reqs[m].num_params = 1;
    reqs[m].body = batches[i].body.data;
    reqs[m].body_len = batches[i].body.len;
    reqs[m].content_md5 = batches[i].md5;
    ++m;
  }
  {
    /* the statuses of the batches sent, in the order of reqs */
    TF_Status** sent_statuses = calloc((size_t)(m > 0 ? m : 1), sizeof *sent_statuses);
    int k = 0, ran = sent_statuses != NULL;
    if (ran) {
      for (i = 0; i < n; ++i)
        if (sent[i]) sent_statuses[k++] = statuses[i];
      s3_execute_many(fs, cfg, m, reqs, resps, sent_statuses);
      free(sent_statuses);
    }
    for (i = 0, k = 0; i < n; ++i) {
      if (!sent[i]) continue;
      if (!ran) plugin_set_oom(statuses[i]);
      failed += settle_batch(bucket, &batches[i], ran && TF_GetCode(statuses[i]) == TF_OK, &resps[k],
                             statuses[i], error);
      ++k;
    }
  }
done:
  for (i = 0; i < n; ++i) {
    if (batches != NULL) plugin_buf_free(&batches[i].body);
    if (resps != NULL && i < m) objstore_response_free(&resps[i]);
    if (statuses != NULL && statuses[i] != NULL) TF_DeleteStatus(statuses[i]);
  }
  free(sent);
  free(statuses);
  free(resps);
  free(reqs);
  free(batches);
  return failed;
}


static int delete_keys(void* store, const void* config, const char* bucket, char** keys, int count,
                       TF_Status* status) {
  objstore_failure error;
  int failed;
  objstore_failure_init(&error);
  failed = delete_batches(store, config, bucket, keys, count, &error);
  objstore_failure_take(&error, status);
  objstore_failure_destroy(&error);
  return failed;
}

const objstore_tree_hooks s3_tree_hooks = {tree_request, stat_answer, list_request, list_answer,
                                           copy,         delete_keys, 1000,         list_token};
