/* Files on Azure Blob Storage.
 *
 * Reading is the engine's (objstore_fs.c, OBJSTORE_READER_OPS), on the
 * store's requests (az_object_request): one GET of at most read_ahead
 * bytes at the open, then ranged GETs pinned with If-Match to the ETag it
 * saw.
 *
 * Writing: bytes collect in memory. A file that closes within
 * upload_threshold bytes is one Put Blob. A larger one goes up as blocks
 * (Put Block) as they fill, at most MAX_IN_FLIGHT at once, so memory stays
 * within the threshold and MAX_IN_FLIGHT + 1 blocks; close sends the last
 * block and commits the list (Put Block List). Block ids are one length
 * for the whole blob, as the service requires: a random prefix of the
 * writer's and the block's number. Nothing is visible under the name until
 * close commits; the blocks of a file that failed or was dropped are never
 * committed, and the service deletes them after a week. Appending rewrites
 * the blob: the old bytes are read back first.
 */
#define _POSIX_C_SOURCE 200809L

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "az_internal.h"

#define MAX_IN_FLIGHT 4

/* ---- writing ------------------------------------------------------------------------- */

/* A block on its way (objstore_start) until the writer waits for it. */
typedef struct block_upload {
  objstore_exchange x;
  objstore_response resp;
  TF_Status* status;
  char* data; /* the block's own copy */
} block_upload;

typedef struct az_writer {
  az_fs* fs;
  az_config* cfg;
  char* path;   /* "/container/blob" */
  char* bucket; /* into a copy of path */
  char* key;
  plugin_buf buf;  /* bytes not yet sent */
  int blocks;      /* blocks started */
  int64_t sent;    /* their bytes */
  char id_prefix[17];
  block_upload* inflight[MAX_IN_FLIGHT];
  int inflight_count;
  objstore_failure error; /* a failed send or commit: every later call reports it */
} az_writer;

/* Block number's id, base64 of 32 bytes (44 characters, every block alike). */
static void block_id(const az_writer* w, int number, char out[48]) {
  char raw[33];
  snprintf(raw, sizeof raw, "%s%016d", w->id_prefix, number);
  EVP_EncodeBlock((unsigned char*)out, (const unsigned char*)raw, 32);
}

static void join_oldest(az_writer* w) {
  block_upload* u = w->inflight[0];
  objstore_finish(w->fs->store.engine, &u->x, u->status);
  objstore_failure_record(&w->error, u->status);
  az_release_request(w->fs, &u->x);
  objstore_response_free(&u->resp);
  TF_DeleteStatus(u->status);
  free(u->data);
  free(u);
  memmove(w->inflight, w->inflight + 1, (size_t)(--w->inflight_count) * sizeof *w->inflight);
}

static void join_all(az_writer* w) {
  while (w->inflight_count > 0) join_oldest(w);
}

/* Starts buf[0, n) as the next block, without waiting for it. */
static int start_block(az_writer* w, size_t n, TF_Status* status) {
  block_upload* u;
  az_call* c;
  char id[48];
  if (w->blocks >= AZ_MAX_BLOCKS) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED,
                 "az: a blob of more than 50,000 blocks, past Azure's limit; raise block_size");
    return -1;
  }
  while (w->inflight_count >= MAX_IN_FLIGHT) join_oldest(w);
  if (objstore_failure_take(&w->error, status) != 0) return -1;
  u = calloc(1, sizeof *u);
  if (u == NULL || (u->data = malloc(n > 0 ? n : 1)) == NULL || (u->status = TF_NewStatus()) == NULL) {
    if (u != NULL) free(u->data);
    free(u);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "az: out of memory");
    return -1;
  }
  memcpy(u->data, w->buf.data, n);
  block_id(w, ++w->blocks, id);
  if (az_object_call(w->fs, "PUT", w->bucket, w->key, &u->x, &u->resp, &c, status) != 0 ||
      az_param(c, "blockid", id) != 0 || az_param(c, "comp", "block") != 0) {
    if (TF_GetCode(status) == TF_OK) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "az: out of memory");
    az_release_request(w->fs, &u->x);
    TF_DeleteStatus(u->status);
    free(u->data);
    free(u);
    return -1;
  }
  u->x.body = u->data;
  u->x.body_len = n;
  objstore_start(w->fs->store.engine, &c->cfg->transport, &u->x, u->status);
  w->inflight[w->inflight_count++] = u;
  w->sent += (int64_t)n;
  memmove(w->buf.data, w->buf.data + n, w->buf.len - n);
  w->buf.len -= n;
  return 0;
}

/* Starts every whole block buf holds. */
static int ship_blocks(az_writer* w, TF_Status* status) {
  size_t size;
  while (w->buf.len >= (size = (size_t)az_block_size(w->cfg->block_size, w->blocks + 1)))
    if (start_block(w, size, status) != 0) return -1;
  return 0;
}

static void writer_append(const TF_WritableFile* file, const char* data, size_t n,
                          TF_Status* status) {
  az_writer* w = file->plugin_file;
  if (objstore_failure_take(&w->error, status) != 0) return;
  if (plugin_buf_append(&w->buf, data, n) != 0) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "az: out of memory");
    objstore_failure_record(&w->error, status);
    return;
  }
  if ((w->blocks > 0 || (int64_t)w->buf.len > w->cfg->upload_threshold) && ship_blocks(w, status) != 0) {
    objstore_failure_record(&w->error, status);
    return;
  }
  TF_SetStatus(status, TF_OK, "");
}

static int64_t writer_tell(const TF_WritableFile* file, TF_Status* status) {
  az_writer* w = file->plugin_file;
  TF_SetStatus(status, TF_OK, "");
  return w->sent + (int64_t)w->buf.len;
}

/* A blob appears only whole, at close: flush and sync keep buffering. */
static void writer_flush(const TF_WritableFile* file, TF_Status* status) {
  az_writer* w = file->plugin_file;
  if (objstore_failure_take(&w->error, status) == 0) TF_SetStatus(status, TF_OK, "");
}

/* Put Block List: the blocks, in order, become the blob. */
static int commit(az_writer* w, TF_Status* status) {
  static const char head[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
  objstore_exchange x;
  objstore_response resp;
  az_call* c;
  int i, rc = -1;
  if (az_object_call(w->fs, "PUT", w->bucket, w->key, &x, &resp, &c, status) == 0) {
    int bad = az_param(c, "comp", "blocklist") != 0 ||
              plugin_buf_append(&c->body, head, sizeof head - 1) != 0;
    for (i = 1; i <= w->blocks && !bad; ++i) {
      char id[48];
      block_id(w, i, id);
      bad = plugin_buf_append(&c->body, "<Latest>", 8) != 0 ||
            plugin_buf_append(&c->body, id, strlen(id)) != 0 ||
            plugin_buf_append(&c->body, "</Latest>", 9) != 0;
    }
    if (bad || plugin_buf_append(&c->body, "</BlockList>", 12) != 0) {
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "az: out of memory");
    } else {
      x.body = c->body.data;
      x.body_len = c->body.len;
      rc = objstore_run(w->fs->store.engine, &c->cfg->transport, &x, status);
    }
  }
  az_release_request(w->fs, &x);
  objstore_response_free(&resp);
  return rc;
}

/* Put Blob: the whole file in one request. */
static int put_blob(az_writer* w, TF_Status* status) {
  objstore_exchange x;
  objstore_response resp;
  int rc = -1;
  objstore_exchange_init(&x, &resp, "PUT", NULL);
  if (az_put_request(w->fs, w->path, w->buf.data, w->buf.len, &x, status) == 0)
    rc = objstore_run(w->fs->store.engine, &w->cfg->transport, &x, status);
  az_release_request(w->fs, &x);
  objstore_response_free(&resp);
  return rc;
}

static void writer_close(const TF_WritableFile* file, TF_Status* status) {
  az_writer* w = file->plugin_file;
  if (objstore_failure_take(&w->error, status) != 0) goto done;
  TF_SetStatus(status, TF_OK, "");
  if (w->blocks == 0) {
    put_blob(w, status);
  } else if ((w->buf.len == 0 || start_block(w, w->buf.len, status) == 0)) {
    join_all(w);
    if (objstore_failure_take(&w->error, status) == 0) commit(w, status);
  }
  join_all(w);
  if (TF_GetCode(status) != TF_OK) objstore_failure_record(&w->error, status);
  else objstore_failure_set(&w->error, TF_FAILED_PRECONDITION, "az: the file is closed");
done:
  objstore_forget(w->fs->store.engine, w->path);
}

static void writer_free(az_writer* w) {
  if (w == NULL) return;
  join_all(w); /* dropped without close: the blocks are never committed */
  plugin_buf_free(&w->buf);
  free(w->path);
  free(w->bucket);
  az_config_release(w->fs, w->cfg);
  if (w->error.status != NULL) objstore_failure_destroy(&w->error);
  free(w);
}

static void writer_cleanup(TF_WritableFile* file) {
  writer_free(file->plugin_file);
  file->plugin_file = NULL;
}

static az_writer* writer_new(const TF_Filesystem* filesystem, const char* path, const char* what,
                             TF_Status* status) {
  az_writer* w = calloc(1, sizeof *w);
  char* slash;
  if (w == NULL) goto oom;
  w->fs = filesystem->plugin_filesystem;
  w->cfg = az_config_acquire(w->fs);
  objstore_failure_init(&w->error);
  w->path = strdup(path);
  w->bucket = strdup(path + strspn(path, "/"));
  if (w->error.status == NULL || w->path == NULL || w->bucket == NULL ||
      plugin_random_hex(w->id_prefix, sizeof w->id_prefix) != 0)
    goto oom;
  slash = strchr(w->bucket, '/');
  if (slash == NULL || slash[1] == '\0') {
    char msg[600];
    snprintf(msg, sizeof msg, "%s az:/%s: a container is a directory, not a file", what, path);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    writer_free(w);
    return NULL;
  }
  *slash = '\0';
  w->key = slash + 1;
  TF_SetStatus(status, TF_OK, "");
  return w;
oom:
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "az: out of memory");
  writer_free(w);
  return NULL;
}

void az_new_writable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                          TF_Status* status) {
  file->plugin_file = writer_new(filesystem, path, "write", status);
}

void az_new_appendable_file(const TF_Filesystem* filesystem, const char* path,
                            TF_WritableFile* file, TF_Status* status) {
  az_writer* w = writer_new(filesystem, path, "append", status);
  objstore_reader* r;
  file->plugin_file = NULL;
  if (w == NULL) return;
  r = objstore_fs_open_reader(filesystem, path, "append", status);
  if (r == NULL) {
    if (TF_GetCode(status) == TF_NOT_FOUND) { /* a new file */
      file->plugin_file = w;
      TF_SetStatus(status, TF_OK, "");
    } else {
      writer_free(w);
    }
    return;
  }
  file->plugin_file = w;
  if (objstore_fs_read_back(r, &az_writable_file_ops, file, status) != 0) { /* the old bytes first */
    writer_free(w);
    file->plugin_file = NULL;
  }
  objstore_reader_free(r);
}

const TF_WritableFileOps az_writable_file_ops = {writer_cleanup, writer_append, writer_tell,
                                                 writer_flush,   writer_flush,  writer_close};

/* Each blob up to upload_threshold in one Put Blob, all in flight at once;
 * larger ones as writable files (blocks in flight), one after another. */
void az_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses) {
  az_fs* fs = filesystem->plugin_filesystem;
  az_config* cfg = az_config_acquire(fs);
  objstore_write_objects(fs->store.engine, &cfg->transport, filesystem, paths, n, datas, lengths, statuses,
                         (size_t)cfg->upload_threshold, az_new_writable_file, &az_writable_file_ops);
  az_config_release(fs, cfg);
}
