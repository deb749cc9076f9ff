/* The bulk ops' common part: one request per path, all sent at once
 * (s3_execute_many), each path's outcome in the caller's status for it. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

int s3_batch_start(s3_batch* b, const TF_Filesystem* filesystem, int n, TF_Status** statuses) {
  int i;
  memset(b, 0, sizeof *b);
  b->fs = s3_fs_of(filesystem);
  b->cfg = s3_config_acquire(b->fs);
  b->statuses = statuses;
  if (n <= 0) return 0;
  b->paths = calloc((size_t)n, sizeof *b->paths);
  b->reqs = calloc((size_t)n, sizeof *b->reqs);
  b->resps = calloc((size_t)n, sizeof *b->resps);
  b->sent_statuses = calloc((size_t)n, sizeof *b->sent_statuses);
  b->path_of = calloc((size_t)n, sizeof *b->path_of);
  b->aside = calloc((size_t)n, sizeof *b->aside);
  if (b->paths == NULL || b->reqs == NULL || b->resps == NULL || b->sent_statuses == NULL ||
      b->path_of == NULL || b->aside == NULL) {
    for (i = 0; i < n; ++i) TF_SetStatus(statuses[i], TF_RESOURCE_EXHAUSTED, "s3: out of memory");
    s3_batch_end(b);
    return -1;
  }
  b->n = n;
  return 0;
}

int s3_batch_parse(s3_batch* b, int i, const char* path) {
  if (s3_path_parse(path, &b->paths[i], b->statuses[i]) == 0) return 0;
  b->paths[i].bucket = b->paths[i].key = NULL;
  return -1;
}

s3_request* s3_batch_add(s3_batch* b, int i, const char* method) {
  int m = b->num_sent++;
  s3_request_init(&b->reqs[m], &b->resps[m], method, b->paths[i].bucket, b->paths[i].key);
  b->sent_statuses[m] = b->statuses[i];
  b->path_of[m] = i;
  return &b->reqs[m];
}

void s3_batch_aside(s3_batch* b, int i) { b->aside[b->num_aside++] = i; }

typedef struct aside_job {
  const s3_batch* b;
  void (*fn)(void* ctx, int i);
  void* ctx;
} aside_job;

static void settle_one(void* arg, int k) {
  aside_job* job = arg;
  job->fn(job->ctx, job->b->aside[k]);
}

void s3_batch_settle_aside(const s3_batch* b, void (*fn)(void* ctx, int i), void* ctx) {
  aside_job job = {b, fn, ctx};
  s3_parallel(b->num_aside, (int)b->cfg->concurrency, settle_one, &job);
}

void s3_batch_run(s3_batch* b) {
  s3_execute_many(b->fs, b->cfg, b->num_sent, b->reqs, b->resps, b->sent_statuses);
}

void s3_batch_end(s3_batch* b) {
  int i;
  for (i = 0; i < b->num_sent; ++i) objstore_response_free(&b->resps[i]);
  if (b->paths != NULL)
    for (i = 0; i < b->n; ++i) s3_path_free(&b->paths[i]);
  free(b->paths);
  free(b->reqs);
  free(b->resps);
  free(b->sent_statuses);
  free(b->path_of);
  free(b->aside);
  s3_config_release(b->fs, b->cfg);
  memset(b, 0, sizeof *b);
}
