/* Files on S3.
 *
 * Reading is the engine's (objstore_fs.c, OBJSTORE_READER_OPS) on the s3
 * store's requests for an object (s3_object_request): the open is one GET
 * of at most read_ahead bytes, later reads are ranged GETs pinned with
 * If-Match to the ETag the open saw.
 *
 * Writing: bytes collect in a part-sized buffer. A file that closes within
 * one part is one PUT; a larger one becomes a multipart upload whose parts
 * go up in the background, a few at a time, while the caller keeps
 * appending. Nothing is visible under the name until close succeeds; a file
 * dropped without close aborts its upload. Appending rewrites the object:
 * whole parts of the old object are copied server-side, the rest is
 * downloaded into the first part.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

/* ---- writing ------------------------------------------------------------------- */

/* Parts uploading at once: at most MAX_BUFFERS_IN_FLIGHT of them in the
 * writer's own buffers (its memory bound), more when they are sent straight
 * from the caller's bytes (ship_borrowed), which cost no memory. */
#define MAX_PARTS_IN_FLIGHT 12
#define MAX_BUFFERS_IN_FLIGHT 4

typedef struct s3_writer s3_writer;

/* A part on its way: its request, in flight on the filesystem's engine
 * (objstore_start) until the writer waits for it (objstore_finish). */
typedef struct part_upload {
  s3_writer* w;
  int number; /* 1-based */
  const char* data;
  size_t len;
  char* buffer; /* the writer's buffer holding data; NULL: the caller's bytes */
  size_t cap;   /* buffer's capacity */
  char number_text[16];
  s3_param params[2];
  s3_request req;
  s3_call call;
  objstore_exchange x;
  s3_response resp;
  TF_Status* status; /* objstore_start's, then objstore_finish's */
} part_upload;

struct s3_writer {
  s3_fs* fs;
  s3_config* cfg;
  s3_path path;
  char* buf; /* the part being filled */
  size_t len;
  size_t cap; /* buf's capacity: the size of the part being filled */
  int64_t written;
  char* upload_id; /* once the file outgrew one part */
  int parts;       /* parts started */
  char** etags;    /* per part, set as each finishes */
  int etags_cap;
  part_upload* inflight[MAX_PARTS_IN_FLIGHT];
  int inflight_count;
  /* Part buffers come back here for reuse: a file's memory stays at most
   * (MAX_BUFFERS_IN_FLIGHT + 1) parts, whichever threads append to it. */
  char* spare[MAX_BUFFERS_IN_FLIGHT];
  int spare_count;
  size_t spare_cap; /* every spare's capacity */
  int closed;
  objstore_failure error; /* of the parts uploading in the background */
  s3_attributes attributes; /* the object is created with */
};

/* Sends part u, without waiting: its outcome is taken by part_done. */
static void part_start(part_upload* u) {
  s3_writer* w = u->w;
  u->status = TF_NewStatus();
  s3_part_request(&w->path, w->upload_id, u->number, u->data, u->len, NULL, NULL, u->number_text,
                  u->params, &u->req, &u->resp);
  objstore_exchange_init(&u->x, &u->resp, "PUT", NULL);
  s3_exchange_bind(w->cfg, &u->req, &u->call, &u->x);
  objstore_start(w->fs->store.engine, &w->cfg->transport, &u->x, u->status);
}

/* Waits for part u and keeps its ETag, or its failure. */
static void part_done(part_upload* u) {
  s3_writer* w = u->w;
  if (objstore_finish(w->fs->store.engine, &u->x, u->status) == 0) {
    w->etags[u->number - 1] = strdup(u->resp.etag);
    if (w->etags[u->number - 1] == NULL) TF_SetStatus(u->status, TF_RESOURCE_EXHAUSTED, "out of memory");
  }
  objstore_failure_record(&w->error, u->status);
  objstore_response_free(&u->resp);
  TF_DeleteStatus(u->status);
}

/* A part's buffer, done with: kept for reuse, or freed. */
static void give_back(s3_writer* w, part_upload* u) {
  if (u->buffer == NULL) return;
  if (w->spare_count < MAX_BUFFERS_IN_FLIGHT && u->cap == w->spare_cap)
    w->spare[w->spare_count++] = u->buffer;
  else
    free(u->buffer);
}

static void join_oldest(s3_writer* w) {
  part_upload* u = w->inflight[0];
  part_done(u);
  give_back(w, u);
  free(u);
  memmove(w->inflight, w->inflight + 1, (size_t)(--w->inflight_count) * sizeof *w->inflight);
}

static void join_all(s3_writer* w) {
  while (w->inflight_count > 0) join_oldest(w);
}

static int ensure_upload(s3_writer* w, TF_Status* status) {
  if (w->upload_id != NULL) return 0;
  w->upload_id = s3_create_multipart(w->fs, w->cfg, &w->path, &w->attributes, status);
  return w->upload_id != NULL ? 0 : -1;
}

static int reserve_part(s3_writer* w, TF_Status* status) {
  int cap = w->etags_cap ? w->etags_cap * 2 : 64;
  char** e;
  if (w->parts < w->etags_cap) return 0;
  if (w->parts >= S3_MAX_PARTS) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED,
                 "s3: an object of more than 10000 parts, past S3's limit (5 TiB at the "
                 "part sizes used); raise part_size");
    return -1;
  }
  if (cap > S3_MAX_PARTS) cap = S3_MAX_PARTS;
  e = realloc(w->etags, (size_t)cap * sizeof *e);
  if (e == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  memset(e + w->etags_cap, 0, (size_t)(cap - w->etags_cap) * sizeof *e);
  w->etags = e;
  w->etags_cap = cap;
  return 0;
}

/* A buffer for part `number`, whose size grows with the part count
 * (s3_parts.h): a spare one when it has that size. */
static char* part_buffer(s3_writer* w, int number, size_t* cap) {
  size_t want = (size_t)s3_upload_part_size(w->cfg->part_size, number);
  if (want != w->spare_cap) {
    while (w->spare_count > 0) free(w->spare[--w->spare_count]);
    w->spare_cap = want;
  }
  *cap = want;
  return w->spare_count > 0 ? w->spare[--w->spare_count] : malloc(want);
}

/* Waits for the oldest parts until fewer than most (and than the
 * concurrency option) are in flight. */
static void wait_for_parts(s3_writer* w, int most) {
  if (most > w->cfg->concurrency) most = (int)w->cfg->concurrency;
  while (w->inflight_count > 0 && w->inflight_count >= most) join_oldest(w);
}

/* Sends data as part w->parts + 1 on the engine, without waiting for it.
 * buffer is the writer's buffer holding data, which comes back as a
 * spare; NULL means data is the caller's, which must stay valid until the
 * part is joined. */
static int start_part(s3_writer* w, const char* data, size_t len, char* buffer, size_t cap,
                      TF_Status* status) {
  part_upload* u;
  if (ensure_upload(w, status) != 0 || reserve_part(w, status) != 0) goto fail;
  wait_for_parts(w, buffer != NULL ? MAX_BUFFERS_IN_FLIGHT : MAX_PARTS_IN_FLIGHT);
  if (objstore_failure_take(&w->error, status) != 0) goto fail;
  u = malloc(sizeof *u);
  if (u == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  *u = (part_upload){.w = w, .number = ++w->parts, .data = data, .len = len,
                     .buffer = buffer, .cap = cap};
  part_start(u);
  w->inflight[w->inflight_count++] = u;
  return 0;
fail:
  if (buffer != NULL) free(buffer);
  return -1;
}

/* Sends the filled buffer as the next part, and starts the one after. */
static int ship_part(s3_writer* w, TF_Status* status) {
  char* full = w->buf;
  size_t len = w->len, cap = w->cap;
  wait_for_parts(w, MAX_BUFFERS_IN_FLIGHT); /* first, so that a finished part's buffer is reused */
  w->buf = part_buffer(w, w->parts + 2, &w->cap);
  w->len = 0;
  if (w->buf == NULL) {
    w->buf = full;
    w->len = len;
    w->cap = cap;
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  return start_part(w, full, len, full, cap, status);
}

/* Whole parts of a long append go up straight from the caller's bytes,
 * without a copy, and are waited for before the append returns; the rest
 * (at least one byte, so that the file's last part is sent at close) is
 * buffered as usual. Returns the bytes sent, or -1. */
static int64_t ship_borrowed(s3_writer* w, const char* data, size_t n, TF_Status* status) {
  size_t sent = 0;
  while (n - sent > w->cap) {
    size_t part = w->cap;
    if (start_part(w, data + sent, part, NULL, 0, status) != 0) break;
    sent += part;
    /* The part after may be bigger (s3_parts.h): fit the empty buffer. */
    if ((size_t)s3_upload_part_size(w->cfg->part_size, w->parts + 1) != w->cap) {
      free(w->buf);
      w->buf = part_buffer(w, w->parts + 1, &w->cap);
      if (w->buf == NULL) {
        w->cap = 0;
        TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
    }
  }
  join_all(w); /* none may still read the caller's bytes */
  if (TF_GetCode(status) != TF_OK) return -1;
  return objstore_failure_take(&w->error, status) == 0 ? (int64_t)sent : -1;
}

static void writer_append(const TF_WritableFile* file, const char* data, size_t n,
                          TF_Status* status) {
  s3_writer* w = file->plugin_file;
  if (w->closed) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "append to a closed s3 file");
    return;
  }
  if (objstore_failure_take(&w->error, status) != 0) return; /* failed before: stays failed */
  while (n > 0) {
    size_t take;
    /* A full part waits for more data before it ships, so that a file of
     * exactly one part stays a single PUT. */
    if (w->len == w->cap && ship_part(w, status) != 0) break;
    if (w->len == 0 && n > w->cap) {
      int64_t sent = ship_borrowed(w, data, n, status);
      if (sent < 0) break;
      w->written += sent;
      data += sent;
      n -= (size_t)sent;
      continue;
    }
    take = w->cap - w->len < n ? w->cap - w->len : n;
    memcpy(w->buf + w->len, data, take);
    w->len += take;
    w->written += (int64_t)take;
    data += take;
    n -= take;
  }
  if (n == 0)
    TF_SetStatus(status, TF_OK, "");
  else /* the file failed: its close reports this, and writes nothing */
    objstore_failure_record(&w->error, status);
}

static int64_t writer_tell(const TF_WritableFile* file, TF_Status* status) {
  s3_writer* w = file->plugin_file;
  TF_SetStatus(status, TF_OK, "");
  return w->written;
}

/* An object appears only whole, at close: flush and sync keep buffering. */
static void writer_flush(const TF_WritableFile* file, TF_Status* status) {
  objstore_failure_take(&((s3_writer*)file->plugin_file)->error, status);
}

/* The engine's caches forget what a write changed (path "/bucket/key"). */
static void forget_written(s3_fs* fs, const s3_path* p) {
  size_t n = strlen(p->bucket) + strlen(p->key) + 3;
  char* path = malloc(n);
  if (path == NULL) { /* forgetting everything is right too */
    objstore_forget_below(fs->store.engine, "/");
    return;
  }
  snprintf(path, n, "/%s/%s", p->bucket, p->key);
  objstore_forget(fs->store.engine, path);
  free(path);
}

static void writer_finish(s3_writer* w, TF_Status* status);

static void writer_close(const TF_WritableFile* file, TF_Status* status) {
  s3_writer* w = file->plugin_file;
  writer_finish(w, status);
  forget_written(w->fs, &w->path);
}

static void writer_finish(s3_writer* w, TF_Status* status) {
  w->closed = 1;
  if (w->upload_id == NULL) {
    s3_request req;
    s3_response resp;
    if (objstore_failure_take(&w->error, status) != 0) return;
    s3_request_init(&req, &resp, "PUT", w->path.bucket, w->path.key);
    req.content_type = s3_content_type(w->cfg, &w->attributes, w->path.key);
    req.attributes = &w->attributes;
    req.body = w->buf;
    req.body_len = w->len;
    s3_execute(w->fs, w->cfg, &req, &resp, status);
    objstore_response_free(&resp);
    return;
  }
  if (w->len > 0 && ship_part(w, status) != 0) {
    join_all(w);
    s3_abort_multipart(w->fs, w->cfg, &w->path, w->upload_id, NULL);
    return;
  }
  join_all(w);
  if (objstore_failure_take(&w->error, status) == 0)
    s3_complete_multipart(w->fs, w->cfg, &w->path, w->upload_id, w->etags, w->parts,
                          status);
  if (TF_GetCode(status) != TF_OK) s3_abort_multipart(w->fs, w->cfg, &w->path, w->upload_id, NULL);
  free(w->upload_id);
  w->upload_id = NULL;
}

static void writer_free(s3_writer* w) {
  int i;
  if (w == NULL) return;
  join_all(w);
  /* Dropped without close: the upload goes, nothing appears. */
  if (w->upload_id != NULL) s3_abort_multipart(w->fs, w->cfg, &w->path, w->upload_id, NULL);
  for (i = 0; i < w->parts && w->etags != NULL; ++i) free(w->etags[i]);
  free(w->etags);
  free(w->upload_id);
  free(w->buf);
  while (w->spare_count > 0) free(w->spare[--w->spare_count]);
  s3_path_free(&w->path);
  s3_config_release(w->fs, w->cfg);
  objstore_failure_destroy(&w->error);
  objstore_attributes_free(&w->attributes);
  free(w);
}

static void writer_cleanup(TF_WritableFile* file) {
  writer_free(file->plugin_file);
  file->plugin_file = NULL;
}

static s3_writer* writer_new(const TF_Filesystem* filesystem, const char* path,
                             const char* what, TF_Status* status) {
  s3_writer* w = calloc(1, sizeof *w);
  if (w == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  w->fs = s3_fs_of(filesystem);
  w->cfg = s3_config_acquire(w->fs);
  objstore_failure_init(&w->error);
  if (s3_path_parse(path, &w->path, status) == 0 && s3_check_object(&w->path, what, status) == 0) {
    w->buf = part_buffer(w, 1, &w->cap);
    if (w->buf != NULL) return w;
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
  }
  writer_free(w);
  return NULL;
}

/* ---- many whole objects written at once ------------------------------------------- */

/* One PUT per object up to part_size, all in flight at once; bigger ones
 * as writable files (multipart uploads), one after another. */
void s3_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  objstore_write_objects(fs->store.engine, &cfg->transport, filesystem, paths, n, datas, lengths, statuses,
                         (size_t)cfg->part_size, s3_new_writable_file, &s3_writable_file_ops);
  s3_config_release(fs, cfg);
}

/* An object store has no directories to require: the new object's prefix
 * is its parent, and a write costs no lookup first (docs/s3.md). */
void s3_new_writable_file(const TF_Filesystem* filesystem, const char* path,
                          TF_WritableFile* file, TF_Status* status) {
  s3_writer* w = writer_new(filesystem, path, "create", status);
  file->plugin_file = w;
  if (w != NULL) TF_SetStatus(status, TF_OK, "");
}

void s3_new_writable_file_with_attributes(const TF_Filesystem* filesystem, const char* path,
                                          const char* const* names, const char* const* values,
                                          int num_attributes, TF_WritableFile* file,
                                          TF_Status* status) {
  s3_writer* w = writer_new(filesystem, path, "create", status);
  file->plugin_file = NULL;
  if (w == NULL) return;
  if (s3_attributes_set(&w->attributes, names, values, num_attributes, status) != 0) {
    writer_free(w);
    return;
  }
  file->plugin_file = w;
  TF_SetStatus(status, TF_OK, "");
}

void s3_new_appendable_file(const TF_Filesystem* filesystem, const char* path,
                            TF_WritableFile* file, TF_Status* status) {
  s3_writer* w = writer_new(filesystem, path, "append", status);
  objstore_reader* r;
  int64_t copy_part, whole, tail, size;
  file->plugin_file = NULL;
  if (w == NULL) return;
  r = objstore_fs_open_reader(filesystem, path, "append", status);
  if (r == NULL) {
    if (TF_GetCode(status) == TF_NOT_FOUND) {
      /* A new file; unless the parent is a file, which the open reported. */
      file->plugin_file = w;
      TF_SetStatus(status, TF_OK, "");
    } else {
      writer_free(w);
    }
    return;
  }
  size = objstore_reader_size(r);
  /* Whole parts of the old object are copied server-side; the tail (less
   * than a part) is read into the buffer, since only the last part of an
   * upload may be small. */
  copy_part = s3_copy_part_size(w->cfg->part_size, size);
  whole = size / copy_part;
  tail = size - whole * copy_part;
  if (whole > 0) {
    w->parts = (int)whole;
    while (w->etags_cap < w->parts)
      if (reserve_part(w, status) != 0) goto fail;
    if (ensure_upload(w, status) != 0 ||
        s3_copy_parts(w->fs, w->cfg, &w->path, whole * copy_part, copy_part, &w->path,
                      w->upload_id, w->etags, status) != 0)
      goto fail;
    free(w->buf); /* the next part's size follows the part count */
    w->buf = part_buffer(w, w->parts + 1, &w->cap);
  }
  if (tail > 0) {
    if ((size_t)tail > w->cap) { /* the tail of a large copy part: one part of its own */
      free(w->buf);
      w->cap = (size_t)tail;
      w->buf = malloc(w->cap);
    }
    if (w->buf == NULL) {
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
      goto fail;
    }
    if (objstore_reader_read(r, (uint64_t)(whole * copy_part), (size_t)tail, w->buf, status) != tail)
      goto fail;
    w->len = (size_t)tail;
  }
  if (w->buf == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  w->written = size;
  objstore_reader_free(r);
  file->plugin_file = w;
  TF_SetStatus(status, TF_OK, "");
  return;
fail:
  objstore_reader_free(r);
  writer_free(w);
}

const TF_WritableFileOps s3_writable_file_ops = {writer_cleanup, writer_append, writer_tell,
                                                 writer_flush,   writer_flush,  writer_close};
