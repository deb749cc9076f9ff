/* Files on Azure Blob Storage.
 *
 * Reading is the engine's (objstore_fs.c, OBJSTORE_READER_OPS), on the
 * store's requests (az_object_request): one GET of at most read_ahead
 * bytes at the open, then ranged GETs pinned with If-Match to the ETag it
 * saw.
 *
 * Writing is the engine's too (objstore_upload.c), on Azure's requests: a
 * file within upload_threshold bytes is one Put Blob; a larger one goes
 * up as blocks (Put Block) while it is written, and close commits the
 * list (Put Block List). Block ids are one length for the whole blob, as
 * the service requires: a random prefix of the writer's and the block's
 * number. The blocks of a file that failed or was dropped are never
 * committed, and the service deletes them after a week. Appending
 * rewrites the blob: the old bytes are read back first.
 */
#define _POSIX_C_SOURCE 200809L

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "az_internal.h"

/* ---- writing ------------------------------------------------------------------------- */

typedef struct az_writer {
  objstore_upload upload; /* first: the engine's writer */
  az_fs* fs;
  az_config* cfg; /* the upload's config */
  char id_prefix[17];
} az_writer;

/* Block number's id, base64 of 32 bytes (44 characters, every block alike). */
static void block_id(const az_writer* w, int number, char out[48]) {
  char raw[33];
  snprintf(raw, sizeof raw, "%s%016d", w->id_prefix, number);
  EVP_EncodeBlock((unsigned char*)out, (const unsigned char*)raw, 32);
}

/* The first block holds what one Put Blob would (upload_threshold, when
 * set); the rest grow from block_size (az_blocks.h). */
static int64_t block_size(objstore_upload* u, int number) {
  const az_writer* w = (const az_writer*)u;
  if (number == 1 && w->cfg->upload_threshold > 0) return w->cfg->upload_threshold;
  return az_block_size(w->cfg->block_size, number);
}

/* Put Block: the part as block p->number. */
static int block_request(objstore_upload* u, objstore_part* p, TF_Status* status) {
  az_writer* w = (az_writer*)u;
  char id[48];
  az_call* c = az_call_bind(w->fs, "PUT", u->bucket, u->key, &p->x, status);
  block_id(w, p->number, id);
  if (c == NULL || az_param(c, "blockid", id) != 0 || az_param(c, "comp", "block") != 0) return -1;
  p->x.body = p->data;
  p->x.body_len = p->len;
  return 0;
}

/* Put Block List: the blocks, in order, become the blob. */
static int commit(objstore_upload* u, TF_Status* status) {
  static const char head[] = "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>";
  az_writer* w = (az_writer*)u;
  objstore_exchange x;
  objstore_response resp;
  az_call* c;
  int i, rc = -1;
  if (az_object_call(w->fs, "PUT", u->bucket, u->key, &x, &resp, &c, status) == 0) {
    int bad = az_param(c, "comp", "blocklist") != 0 ||
              plugin_buf_append(&c->base.body, head, sizeof head - 1) != 0;
    for (i = 1; i <= u->parts && !bad; ++i) {
      char id[48];
      block_id(w, i, id);
      bad = plugin_buf_append(&c->base.body, "<Latest>", 8) != 0 ||
            plugin_buf_append(&c->base.body, id, strlen(id)) != 0 ||
            plugin_buf_append(&c->base.body, "</Latest>", 9) != 0;
    }
    if (bad || plugin_buf_append(&c->base.body, "</BlockList>", 12) != 0) {
      plugin_set_oom(status);
    } else {
      x.body = c->base.body.data;
      x.body_len = c->base.body.len;
      rc = objstore_run(w->fs->store.engine, &c->cfg->transport, &x, status);
    }
  }
  az_release_request(w->fs, &x);
  objstore_response_free(&resp);
  return rc;
}

static const objstore_upload_hooks az_upload = {
    .bucket_word = "a container",
    .max_parts = AZ_MAX_BLOCKS,
    .too_many_parts = "az: a blob of more than 50,000 blocks, past Azure's limit; raise block_size",
    .part_size = block_size,
    .part_request = block_request,
    .commit = commit,
};

static az_writer* writer_new(const TF_Filesystem* filesystem, const char* path, const char* what,
                             TF_Status* status) {
  az_fs* fs = filesystem->plugin_filesystem;
  az_writer* w = (az_writer*)objstore_upload_new(sizeof *w, &az_upload, &fs->store, path, what, status);
  if (w == NULL) return NULL;
  w->fs = fs;
  w->cfg = w->upload.config;
  if (plugin_random_hex(w->id_prefix, sizeof w->id_prefix) != 0) {
    objstore_upload_free(&w->upload);
    TF_SetStatus(status, TF_INTERNAL, "az: no random bytes for block ids");
    return NULL;
  }
  return w;
}

void az_new_writable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                          TF_Status* status) {
  file->plugin_file = writer_new(filesystem, path, "write", status);
}

void az_new_appendable_file(const TF_Filesystem* filesystem, const char* path,
                            TF_WritableFile* file, TF_Status* status) {
  az_writer* w = writer_new(filesystem, path, "append", status);
  file->plugin_file = NULL;
  if (w != NULL) objstore_upload_append(filesystem, &w->upload, NULL, file, status);
}

/* Each blob up to upload_threshold in one Put Blob, all in flight at once;
 * larger ones as writable files (blocks in flight), one after another. */
void az_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses) {
  az_fs* fs = filesystem->plugin_filesystem;
  az_config* cfg = az_config_acquire(fs);
  objstore_write_objects(fs->store.engine, &cfg->transport, filesystem, paths, n, datas, lengths, statuses,
                         (size_t)cfg->upload_threshold, az_new_writable_file);
  az_config_release(fs, cfg);
}
