/* Writable files on an object store (objstore.h, "writable files"): the
 * buffer, the parts in flight and the close, once for every store; a
 * store gives only its requests (objstore_upload_hooks). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objstore_internal.h"

static const char* scheme_of(const objstore_upload* u) { return objstore_engine_store(u->engine)->name; }

/* ---- parts --------------------------------------------------------------------------- */

/* A part's buffer, done with: kept for reuse when it has the size parts
 * have now, or freed. */
static void give_back(objstore_upload* u, char* buffer, size_t room) {
  if (buffer == NULL) return;
  if (room == u->spare_cap && u->spare_count < OBJSTORE_UPLOAD_BUFFERS)
    u->spare[u->spare_count++] = buffer;
  else
    free(buffer);
}

/* Waits for the oldest part: its outcome (after the store's part_sent)
 * becomes the writer's failure, if it failed. */
static void join_oldest(objstore_upload* u) {
  objstore_part* p = u->inflight[0];
  const objstore_store* store = objstore_engine_store(u->engine);
  objstore_finish(u->engine, &p->x, p->status);
  if (u->hooks->part_sent != NULL) u->hooks->part_sent(u, p);
  objstore_failure_record(&u->error, p->status);
  store->release_request(objstore_engine_store_ctx(u->engine), &p->x);
  objstore_response_free(&p->resp);
  TF_DeleteStatus(p->status);
  give_back(u, p->buffer, p->room);
  free(p);
  memmove(u->inflight, u->inflight + 1, (size_t)(--u->inflight_count) * sizeof *u->inflight);
}

static void join_all(objstore_upload* u) {
  while (u->inflight_count > 0) join_oldest(u);
}

/* Waits for the oldest parts until fewer than most (and than the
 * writer's concurrency) are in flight. */
static void wait_for_parts(objstore_upload* u, int most) {
  if (most > u->concurrency) most = u->concurrency;
  while (u->inflight_count > 0 && u->inflight_count >= most) join_oldest(u);
}

int objstore_upload_begin(objstore_upload* u, TF_Status* status) {
  if (u->begun || u->parts > 0) return 0;
  if (u->hooks->begin != NULL && u->hooks->begin(u, status) != 0) return -1;
  u->begun = 1;
  return 0;
}

void objstore_upload_skip(objstore_upload* u, int parts, int64_t bytes) {
  u->parts += parts;
  u->written += bytes;
  u->cap = 0; /* the next part's size follows the count */
}

/* Sends data (len bytes) as part u->parts + 1 without waiting for it.
 * buffer is the writer's buffer holding data, which comes back for reuse;
 * NULL means data is the caller's, which must stay valid until the part
 * is joined. total: the upload's bytes when this is its last part, else
 * -1. 0, or -1 with status set (buffer freed). */
static int start_part(objstore_upload* u, const char* data, size_t len, char* buffer, size_t room,
                      int64_t total, TF_Status* status) {
  objstore_part* p;
  if (objstore_upload_begin(u, status) != 0) goto fail;
  if (u->parts >= u->hooks->max_parts) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, u->hooks->too_many_parts);
    goto fail;
  }
  wait_for_parts(u, buffer != NULL ? OBJSTORE_UPLOAD_BUFFERS : OBJSTORE_UPLOAD_MOST_IN_FLIGHT);
  if (objstore_failure_take(&u->error, status) != 0) goto fail;
  p = calloc(1, sizeof *p);
  if (p == NULL || (p->status = TF_NewStatus()) == NULL) {
    free(p);
    plugin_set_oom(status);
    goto fail;
  }
  p->number = u->parts + 1;
  p->offset = u->sent;
  p->data = len > 0 ? data : "";
  p->len = len;
  p->total = total;
  p->buffer = buffer;
  p->room = room;
  objstore_exchange_init(&p->x, &p->resp, "PUT", NULL);
  if (u->hooks->part_request(u, p, status) != 0) {
    if (TF_GetCode(status) == TF_OK) plugin_set_oom(status);
    if (p->x.store_request != NULL)
      objstore_engine_store(u->engine)->release_request(objstore_engine_store_ctx(u->engine), &p->x);
    TF_DeleteStatus(p->status);
    free(p);
    goto fail;
  }
  objstore_start(u->engine, u->settings, &p->x, p->status);
  u->inflight[u->inflight_count++] = p;
  u->parts += 1;
  u->sent += (int64_t)len;
  return 0;
fail:
  free(buffer);
  return -1;
}

/* The part being filled, sent; the next one starts empty. */
static int ship_part(objstore_upload* u, int64_t total, TF_Status* status) {
  char* full = u->buf;
  size_t len = u->len, room = u->room;
  u->buf = NULL;
  u->len = u->room = 0;
  if (start_part(u, full, len, full, room, total, status) != 0) return -1;
  u->cap = 0; /* the next part's size follows the count */
  return 0;
}

/* Room for need bytes in the part being filled: a spare buffer of the
 * part's size, or a buffer that doubles up to it (a small file never
 * holds a whole part's memory). */
static int make_room(objstore_upload* u, size_t need, TF_Status* status) {
  size_t room;
  char* grown;
  if (need <= u->room) return 0;
  if (u->room == 0 && u->spare_count > 0 && u->spare_cap == u->cap) {
    u->buf = u->spare[--u->spare_count];
    u->room = u->cap;
    return 0;
  }
  room = u->room > 0 ? u->room : 64 * 1024;
  while (room < need) room *= 2;
  if (room > u->cap) room = u->cap;
  grown = realloc(u->buf, room);
  if (grown == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  u->buf = grown;
  u->room = room;
  return 0;
}

/* The size of the part being filled, once the part count says it. */
static void size_next_part(objstore_upload* u) {
  if (u->cap != 0) return;
  u->cap = (size_t)u->hooks->part_size(u, u->parts + 1);
  if (u->cap != u->spare_cap) { /* the parts grew: spares of the old size go */
    while (u->spare_count > 0) free(u->spare[--u->spare_count]);
    u->spare_cap = u->cap;
  }
}

/* Whole parts of a long append go up straight from the caller's bytes,
 * without a copy, and are waited for before the append returns; the rest
 * (at least one byte, so that the file's last part is sent at close) is
 * buffered as usual. The bytes sent, or -1 with status set. */
static int64_t ship_borrowed(objstore_upload* u, const char* data, size_t n, TF_Status* status) {
  size_t sent = 0;
  while (n - sent > u->cap) {
    size_t part = u->cap;
    if (start_part(u, data + sent, part, NULL, 0, -1, status) != 0) break;
    sent += part;
    u->cap = 0;
    size_next_part(u);
  }
  join_all(u); /* none may still read the caller's bytes */
  if (TF_GetCode(status) != TF_OK) return -1;
  return objstore_failure_take(&u->error, status) == 0 ? (int64_t)sent : -1;
}

/* ---- the file's ops ------------------------------------------------------------------ */

static void upload_append(const TF_WritableFile* file, const char* data, size_t n, TF_Status* status) {
  objstore_upload* u = file->plugin_file;
  if (objstore_failure_take(&u->error, status) != 0) return; /* failed or closed before */
  while (n > 0) {
    size_t take;
    size_next_part(u);
    /* A full part waits for more bytes before it goes, so that a file of
     * exactly one part stays one put. */
    if (u->len == u->cap) {
      if (ship_part(u, -1, status) != 0) break;
      continue;
    }
    if (u->len == 0 && n > u->cap) {
      int64_t sent = ship_borrowed(u, data, n, status);
      if (sent < 0) break;
      u->written += sent;
      data += sent;
      n -= (size_t)sent;
      continue;
    }
    take = u->cap - u->len < n ? u->cap - u->len : n;
    if (make_room(u, u->len + take, status) != 0) break;
    memcpy(u->buf + u->len, data, take);
    u->len += take;
    u->written += (int64_t)take;
    data += take;
    n -= take;
  }
  if (n == 0)
    TF_SetStatus(status, TF_OK, "");
  else /* the file failed: its close reports this, and writes nothing */
    objstore_failure_record(&u->error, status);
}

static int64_t upload_tell(const TF_WritableFile* file, TF_Status* status) {
  objstore_upload* u = file->plugin_file;
  TF_SetStatus(status, TF_OK, "");
  return u->written;
}

/* An object appears only whole, at close: flush and sync keep buffering. */
static void upload_flush(const TF_WritableFile* file, TF_Status* status) {
  objstore_failure_take(&((objstore_upload*)file->plugin_file)->error, status);
}

/* The whole file in one request: the hooks' put, or the store's. */
static int put_whole(objstore_upload* u, TF_Status* status) {
  const objstore_store* store = objstore_engine_store(u->engine);
  void* ctx = objstore_engine_store_ctx(u->engine);
  objstore_exchange x;
  objstore_response resp;
  int rc = -1;
  const char* data = u->len > 0 ? u->buf : "";
  if (u->hooks->put != NULL) return u->hooks->put(u, data, u->len, status);
  objstore_exchange_init(&x, &resp, "PUT", NULL);
  if (store->put_request(ctx, u->path, data, u->len, &x, status) == 0)
    rc = objstore_run(u->engine, u->settings, &x, status);
  if (x.store_request != NULL) store->release_request(ctx, &x);
  objstore_response_free(&resp);
  return rc;
}

/* Writes the object: 0, or -1 with status set (the upload abandoned). */
static int finish(objstore_upload* u, TF_Status* status) {
  if (objstore_failure_take(&u->error, status) != 0) goto failed;
  if (u->parts == 0) {
    if (put_whole(u, status) != 0) goto failed;
  } else {
    if (u->len > 0 && ship_part(u, u->sent + (int64_t)u->len, status) != 0) goto failed;
    join_all(u);
    if (objstore_failure_take(&u->error, status) != 0) goto failed;
    if (u->hooks->commit != NULL && u->hooks->commit(u, status) != 0) goto failed;
    u->begun = 0; /* committed */
  }
  if (u->hooks->written != NULL && u->hooks->written(u, status) != 0) return -1;
  return 0;
failed:
  join_all(u);
  if (u->begun && u->hooks->abandon != NULL) u->hooks->abandon(u);
  u->begun = 0;
  return -1;
}

static void upload_close(const TF_WritableFile* file, TF_Status* status) {
  objstore_upload* u = file->plugin_file;
  char msg[64];
  if (finish(u, status) != 0) {
    objstore_failure_record(&u->error, status);
  } else {
    snprintf(msg, sizeof msg, "%s: the file is closed", scheme_of(u));
    objstore_failure_set(&u->error, TF_FAILED_PRECONDITION, msg);
  }
  objstore_forget(u->engine, u->path);
}

void objstore_upload_free(objstore_upload* u) {
  if (u == NULL) return;
  join_all(u);
  /* Dropped without close: the upload goes, nothing appears. */
  if (u->begun && u->hooks->abandon != NULL) u->hooks->abandon(u);
  free(u->buf);
  while (u->spare_count > 0) free(u->spare[--u->spare_count]);
  if (u->hooks->release != NULL) u->hooks->release(u);
  plugin_config_release(&u->fs->base.config, u->config);
  free(u->path);
  free(u->bucket);
  if (u->error.status != NULL) objstore_failure_destroy(&u->error);
  free(u);
}

static void upload_cleanup(TF_WritableFile* file) {
  objstore_upload_free(file->plugin_file);
  file->plugin_file = NULL;
}

const TF_WritableFileOps objstore_upload_ops = {upload_cleanup, upload_append, upload_tell,
                                                upload_flush,   upload_flush,  upload_close};

/* ---- making one ---------------------------------------------------------------------- */

objstore_upload* objstore_upload_new(size_t size, const objstore_upload_hooks* hooks, objstore_fs* fs,
                                     const char* path, const char* what, TF_Status* status) {
  objstore_upload* u = calloc(1, size);
  char* slash;
  if (u == NULL) {
    plugin_set_oom(status);
    return NULL;
  }
  u->hooks = hooks;
  u->fs = fs;
  u->engine = fs->engine;
  u->config = plugin_config_acquire(&fs->base.config);
  u->settings = (const objstore_settings*)((const char*)u->config + fs->transport_offset);
  u->concurrency = OBJSTORE_UPLOAD_BUFFERS; /* a store may allow more (s3: its concurrency option) */
  objstore_failure_init(&u->error);
  u->path = strdup(path);
  u->bucket = strdup(path + strspn(path, "/"));
  if (u->error.status == NULL || u->path == NULL || u->bucket == NULL) {
    plugin_set_oom(status);
    goto fail;
  }
  slash = strchr(u->bucket, '/');
  if (slash == NULL || slash[1] == '\0') {
    char msg[600];
    snprintf(msg, sizeof msg, "%s %s:/%s: %s is a directory, not a file", what, scheme_of(u), path,
             hooks->bucket_word);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    goto fail;
  }
  *slash = '\0';
  u->key = slash + 1;
  TF_SetStatus(status, TF_OK, "");
  return u;
fail:
  plugin_config_release(&fs->base.config, u->config);
  free(u->path);
  free(u->bucket);
  if (u->error.status != NULL) objstore_failure_destroy(&u->error);
  free(u);
  return NULL;
}

void objstore_upload_append(const TF_Filesystem* filesystem, objstore_upload* u,
                            int (*keep)(objstore_upload* u, objstore_reader* old, TF_WritableFile* file,
                                        TF_Status* status),
                            TF_WritableFile* file, TF_Status* status) {
  objstore_reader* r = objstore_fs_open_reader(filesystem, u->path, "append", status);
  int kept;
  file->plugin_file = u;
  if (r == NULL) {
    if (TF_GetCode(status) == TF_NOT_FOUND) { /* a new file */
      TF_SetStatus(status, TF_OK, "");
      return;
    }
    objstore_upload_free(u);
    file->plugin_file = NULL;
    return;
  }
  kept = keep != NULL ? keep(u, r, file, status) : 0;
  if (kept < 0 || (kept == 0 && objstore_fs_read_back(r, &objstore_upload_ops, file, status) != 0)) {
    objstore_upload_free(u);
    file->plugin_file = NULL;
  }
  objstore_reader_free(r);
}
