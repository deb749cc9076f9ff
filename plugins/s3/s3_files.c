/* Files on S3.
 *
 * Reading is the engine's (objstore_fs.c, OBJSTORE_READER_OPS) on the s3
 * store's requests for an object (s3_object_request): the open is one GET
 * of at most read_ahead bytes, later reads are ranged GETs pinned with
 * If-Match to the ETag the open saw.
 *
 * Writing is the engine's too (objstore_upload.c), on S3's requests: a
 * file that closes within one part is one PUT; a larger one becomes a
 * multipart upload whose parts go up while the caller keeps appending,
 * and close completes it. A file dropped without close, or failed, aborts
 * its upload. Appending rewrites the object: whole parts of the old
 * object are copied server-side, the rest is read back.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

typedef struct s3_writer {
  objstore_upload upload; /* first: the engine's writer */
  s3_fs* fs;
  s3_config* cfg; /* the upload's config */
  objstore_path path;
  s3_attributes attributes; /* the object is created with */
  char* upload_id;          /* once the file outgrew one part */
  char** etags;             /* per part, set as each arrives */
  int etags_cap;
} s3_writer;

static int64_t part_size(objstore_upload* u, int number) {
  return s3_upload_part_size(((s3_writer*)u)->cfg->part_size, number);
}

/* Room for the ETags of parts up to number. */
static int reserve_etags(s3_writer* w, int number, TF_Status* status) {
  int cap = w->etags_cap > 0 ? w->etags_cap : 64;
  char** e;
  if (number <= w->etags_cap) return 0;
  while (cap < number) cap *= 2;
  if (cap > S3_MAX_PARTS) cap = S3_MAX_PARTS;
  e = realloc(w->etags, (size_t)cap * sizeof *e);
  if (e == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  memset(e + w->etags_cap, 0, (size_t)(cap - w->etags_cap) * sizeof *e);
  w->etags = e;
  w->etags_cap = cap;
  return 0;
}

static int create_upload(objstore_upload* u, TF_Status* status) {
  s3_writer* w = (s3_writer*)u;
  w->upload_id = s3_create_multipart(w->fs, w->cfg, &w->path, &w->attributes, status);
  return w->upload_id != NULL ? 0 : -1;
}

static int part_request(objstore_upload* u, objstore_part* p, TF_Status* status) {
  s3_writer* w = (s3_writer*)u;
  if (reserve_etags(w, p->number, status) != 0) return -1;
  return s3_part_exchange(w->fs, &w->path, w->upload_id, p->number, p->data, p->len, &p->x, status);
}

/* A part that arrived: its ETag, for the completion. */
static void part_sent(objstore_upload* u, objstore_part* p) {
  s3_writer* w = (s3_writer*)u;
  if (TF_GetCode(p->status) != TF_OK) return;
  w->etags[p->number - 1] = strdup(p->resp.etag);
  if (w->etags[p->number - 1] == NULL) plugin_set_oom(p->status);
}

static int complete(objstore_upload* u, TF_Status* status) {
  s3_writer* w = (s3_writer*)u;
  return s3_complete_multipart(w->fs, w->cfg, &w->path, w->upload_id, w->etags, u->parts, status);
}

static void abort_upload(objstore_upload* u) {
  s3_writer* w = (s3_writer*)u;
  s3_abort_multipart(w->fs, w->cfg, &w->path, w->upload_id, NULL);
}

/* One PUT, with the object's Content-Type and metadata. */
static int put_object(objstore_upload* u, const char* data, size_t len, TF_Status* status) {
  s3_writer* w = (s3_writer*)u;
  s3_request req;
  s3_response resp;
  int rc;
  s3_request_init(&req, &resp, "PUT", w->path.bucket, w->path.key);
  req.content_type = s3_content_type(w->cfg, &w->attributes, w->path.key);
  req.attributes = &w->attributes;
  req.body = data;
  req.body_len = len;
  rc = s3_execute(w->fs, w->cfg, &req, &resp, status);
  objstore_response_free(&resp);
  return rc;
}

static void release(objstore_upload* u) {
  s3_writer* w = (s3_writer*)u;
  int i;
  for (i = 0; i < w->etags_cap; ++i) free(w->etags[i]);
  free(w->etags);
  free(w->upload_id);
  objstore_path_free(&w->path);
  objstore_attributes_free(&w->attributes);
}

static const objstore_upload_hooks s3_upload = {
    .bucket_word = "a bucket",
    .max_parts = S3_MAX_PARTS,
    .too_many_parts = "s3: an object of more than 10000 parts, past S3's limit (5 TiB at the "
                      "part sizes used); raise part_size",
    .part_size = part_size,
    .begin = create_upload,
    .part_request = part_request,
    .part_sent = part_sent,
    .commit = complete,
    .abandon = abort_upload,
    .put = put_object,
    .release = release,
};

static s3_writer* writer_new(const TF_Filesystem* filesystem, const char* path, const char* what,
                             TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  objstore_path p = {NULL, NULL};
  s3_writer* w;
  if (objstore_path_parse("s3", path, &p, status) != 0 || s3_check_object(&p, what, status) != 0) {
    objstore_path_free(&p);
    return NULL;
  }
  w = (s3_writer*)objstore_upload_new(sizeof *w, &s3_upload, &fs->store, path, what, status);
  if (w == NULL) {
    objstore_path_free(&p);
    return NULL;
  }
  w->fs = fs;
  w->cfg = w->upload.config;
  w->path = p;
  w->upload.concurrency = (int)w->cfg->concurrency;
  return w;
}

/* ---- many whole objects written at once ------------------------------------------- */

/* One PUT per object up to part_size, all in flight at once; bigger ones
 * as writable files (multipart uploads), one after another. */
void s3_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  objstore_write_objects(fs->store.engine, &cfg->transport, filesystem, paths, n, datas, lengths, statuses,
                         (size_t)cfg->part_size, s3_new_writable_file);
  s3_config_release(fs, cfg);
}

/* An object store has no directories to require: the new object's prefix
 * is its parent, and a write costs no lookup first (docs/s3.md). */
void s3_new_writable_file(const TF_Filesystem* filesystem, const char* path,
                          TF_WritableFile* file, TF_Status* status) {
  file->plugin_file = writer_new(filesystem, path, "create", status);
}

void s3_new_writable_file_with_attributes(const TF_Filesystem* filesystem, const char* path,
                                          const char* const* names, const char* const* values,
                                          int num_attributes, TF_WritableFile* file,
                                          TF_Status* status) {
  s3_writer* w = writer_new(filesystem, path, "create", status);
  file->plugin_file = NULL;
  if (w == NULL) return;
  if (s3_attributes_set(&w->attributes, names, values, num_attributes, status) != 0) {
    objstore_upload_free(&w->upload);
    return;
  }
  file->plugin_file = w;
  TF_SetStatus(status, TF_OK, "");
}

/* The old object's whole parts are copied server-side into the new
 * upload; the tail (less than a part, since only an upload's last part
 * may be small) is read back through the file. 1, or -1 with status set;
 * 0 for an object within one part (all of it read back). */
static int keep_by_copy(objstore_upload* u, objstore_reader* old, TF_WritableFile* file, TF_Status* status) {
  s3_writer* w = (s3_writer*)u;
  int64_t size = objstore_reader_size(old);
  int64_t copy_part = s3_copy_part_size(w->cfg->part_size, size);
  int64_t whole = size / copy_part, tail = size - whole * copy_part;
  char* rest;
  if (whole == 0) return 0;
  if (reserve_etags(w, (int)whole, status) != 0 || objstore_upload_begin(u, status) != 0 ||
      s3_copy_parts(w->fs, w->cfg, &w->path, whole * copy_part, copy_part, &w->path, w->upload_id, w->etags,
                    status) != 0)
    return -1;
  objstore_upload_skip(u, (int)whole, whole * copy_part);
  if (tail == 0) return 1;
  if ((rest = malloc((size_t)tail)) == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  if (objstore_reader_read(old, (uint64_t)(whole * copy_part), (size_t)tail, rest, status) == tail)
    objstore_upload_ops.append(file, rest, (size_t)tail, status);
  else if (TF_GetCode(status) == TF_OK)
    TF_SetStatus(status, TF_DATA_LOSS, "s3: the object appended to got shorter while it was read");
  free(rest);
  return TF_GetCode(status) == TF_OK ? 1 : -1;
}

void s3_new_appendable_file(const TF_Filesystem* filesystem, const char* path,
                            TF_WritableFile* file, TF_Status* status) {
  s3_writer* w = writer_new(filesystem, path, "append", status);
  file->plugin_file = NULL;
  if (w != NULL) objstore_upload_append(filesystem, &w->upload, keep_by_copy, file, status);
}
