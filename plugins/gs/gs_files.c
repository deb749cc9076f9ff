/* Files on GCS.
 *
 * Reading is the engine's (objstore_fs.c, OBJSTORE_READER_OPS), on the
 * store's media requests (gs_object_request): one GET of at most
 * read_ahead bytes at the open, ranged GETs pinned with ifGenerationMatch
 * to the generation it saw.
 *
 * Writing is the engine's too (objstore_upload.c), on GCS's requests: a
 * file within upload_threshold bytes is one multipart upload. A larger
 * one opens a resumable session and sends chunk_size chunks (multiples of
 * 256 KiB, as GCS requires) one after another while it is written; the
 * last carries the total. A chunk that fails is resumed from what the
 * session says it holds (a status query, an empty PUT whose Content-Range
 * names only the total, answered 308 with Range "bytes=0-K"). A file
 * dropped without close cancels its session. Appending rewrites the
 * object: the old bytes are read back first, as TensorFlow's GCS
 * filesystem does; from upload_threshold up, the new bytes go to a
 * temporary object that compose puts after the old ones.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gs_internal.h"

#define QUANTUM ((int64_t)256 << 10) /* GCS's chunk unit */

/* ---- writing ------------------------------------------------------------------------- */

typedef struct gs_writer {
  objstore_upload upload; /* first: the engine's writer */
  gs_fs* fs;
  gs_config* cfg; /* the upload's config */
  char* session; /* the resumable session's URL, once there is one */
  /* An append by compose: the new bytes go to a temporary object
   * (temp_path, "/bucket/key"), then the object becomes [the object at
   * generation, the temporary one]; base is its size. */
  char* temp_path;
  char generation[64];
  int64_t base;
} gs_writer;

/* The key the writer's bytes go to: the file's, or a compose's temporary one. */
static const char* sent_key(const gs_writer* w) {
  const objstore_upload* u = &w->upload;
  return w->temp_path != NULL ? w->temp_path + strlen(u->bucket) + 2 : u->key;
}

/* A request to the session's own URL; its answer in resp. */
static gs_call* session_call(gs_writer* w, objstore_exchange* x, objstore_response* resp,
                             TF_Status* status) {
  gs_call* c;
  objstore_exchange_init(x, resp, "PUT", NULL);
  c = gs_call_bind(w->fs, "PUT", w->upload.bucket, sent_key(w), x, status);
  if (c == NULL) return NULL;
  c->base.url.len = 0;
  if (gs_url_text(c, w->session) != 0) {
    plugin_set_oom(status);
    return NULL;
  }
  return c;
}

/* The upload's begin: a resumable session. */
static int open_session(objstore_upload* u, TF_Status* status) {
  gs_writer* w = (gs_writer*)u;
  objstore_exchange x;
  objstore_response resp;
  gs_call* c;
  int rc = -1;
  objstore_exchange_init(&x, &resp, "POST", NULL);
  c = gs_call_bind(w->fs, "POST", u->bucket, sent_key(w), &x, status);
  if (c == NULL) goto done;
  if (gs_url_text(c, "/upload/storage/v1/b/") != 0 || gs_url_encoded(c, u->bucket) != 0 ||
      gs_url_text(c, "/o?uploadType=resumable") != 0 ||
      gs_header(c, "Content-Type", "application/json") != 0 ||
      plugin_buf_append(&c->base.body, "{\"name\":", 8) != 0 || gs_json_string(&c->base.body, sent_key(w)) != 0 ||
      plugin_buf_append(&c->base.body, "}", 1) != 0) {
    plugin_set_oom(status);
    goto done;
  }
  x.body = c->base.body.data;
  x.body_len = c->base.body.len;
  x.max_redirects = 1; /* to keep the Location (a 200 is not followed) */
  if (objstore_run(w->fs->store.engine, &w->cfg->transport, &x, status) != 0) goto done;
  if (resp.location == NULL) {
    TF_SetStatus(status, TF_DATA_LOSS, "gs: a resumable upload was opened without a Location");
    goto done;
  }
  if ((w->session = strdup(resp.location)) == NULL) {
    plugin_set_oom(status);
    goto done;
  }
  rc = 0;
done:
  gs_release_request(w->fs, &x);
  objstore_response_free(&resp);
  return rc;
}

/* The upload's abandon: the session is cancelled. */
static void cancel_session(objstore_upload* u) {
  gs_writer* w = (gs_writer*)u;
  objstore_exchange x;
  objstore_response resp;
  TF_Status* ignored = TF_NewStatus();
  gs_call* c = session_call(w, &x, &resp, ignored);
  if (c != NULL) {
    x.method = "DELETE";
    x.max_attempts = 1;
    objstore_run(w->fs->store.engine, &w->cfg->transport, &x, ignored);
  }
  gs_release_request(w->fs, &x);
  objstore_response_free(&resp);
  TF_DeleteStatus(ignored);
}

/* What the session holds, as its status query says: 0 with *held set
 * (-1: the upload is complete; -2: the session is gone, a 404, as after
 * it completed on some servers or expired), or -1 with status set. */
static int session_status(gs_writer* w, int64_t total, int64_t* held, TF_Status* status) {
  objstore_exchange x;
  objstore_response resp;
  gs_call* c = session_call(w, &x, &resp, status);
  char range[64];
  int rc = -1;
  if (total >= 0) snprintf(range, sizeof range, "bytes */%lld", (long long)total);
  else snprintf(range, sizeof range, "bytes */*");
  if (c != NULL && gs_header(c, "Content-Range", range) == 0) {
    x.body = "";
    x.body_len = 0;
    rc = objstore_run(w->fs->store.engine, &w->cfg->transport, &x, status);
    if (rc == 0) *held = c->incomplete ? resp.range_end + 1 : -1;
    if (rc != 0 && resp.http == 404) {
      *held = -2;
      rc = 0;
      TF_SetStatus(status, TF_OK, "");
    }
  }
  gs_release_request(w->fs, &x);
  objstore_response_free(&resp);
  return rc;
}

/* The size of the object the writer writes, as stored now; -1 when
 * there is none (or it cannot be asked). */
static int64_t object_size(gs_writer* w) {
  const char* path = w->temp_path != NULL ? w->temp_path : w->upload.path;
  objstore_tree t;
  TF_FileStatistics stats;
  TF_Status* status = TF_NewStatus();
  int64_t size = -1;
  objstore_fs_begin(&w->fs->store, &t);
  objstore_forget(t.engine, path);
  objstore_tree_stat(&t, path, &stats, status);
  if (TF_GetCode(status) == TF_OK && !stats.is_directory) size = stats.length;
  objstore_fs_end(&w->fs->store, &t);
  TF_DeleteStatus(status);
  return size;
}

/* x (initialized, answer in its resp) made one try of part p's bytes
 * from `from` on, with the total when it is the last. */
static int chunk_request(gs_writer* w, const objstore_part* p, size_t from, objstore_exchange* x,
                         TF_Status* status) {
  char range[96];
  gs_call* c = session_call(w, x, x->resp, status);
  int64_t first = p->offset + (int64_t)from;
  if (c == NULL) return -1;
  if (p->len > from)
    snprintf(range, sizeof range, "bytes %lld-%lld/", (long long)first,
             (long long)(p->offset + (int64_t)p->len - 1));
  else
    snprintf(range, sizeof range, "bytes */");
  if (p->total >= 0) snprintf(range + strlen(range), sizeof range - strlen(range), "%lld", (long long)p->total);
  else snprintf(range + strlen(range), sizeof range - strlen(range), "*");
  if (gs_header(c, "Content-Range", range) != 0) {
    plugin_set_oom(status);
    return -1;
  }
  x->body = p->data + from;
  x->body_len = p->len - from;
  x->max_attempts = 1; /* a retry resumes from what the session holds */
  return 0;
}

static int chunk_part_request(objstore_upload* u, objstore_part* p, TF_Status* status) {
  return chunk_request((gs_writer*)u, p, 0, &p->x, status);
}

/* How a try of p (x, its outcome in status) went: 1 the chunk arrived as
 * it should; -1 it may have arrived in part, to resume; 0 it failed for
 * good (status set). */
static int chunk_outcome(const objstore_part* p, const objstore_exchange* x, TF_Status* status) {
  const gs_call* c = x->store_request;
  if (TF_GetCode(status) == TF_OK) {
    if (p->total >= 0 ? !c->incomplete : c->incomplete) return 1;
    TF_SetStatus(status, TF_DATA_LOSS,
                 p->total >= 0 ? "gs: the resumable upload wants more bytes than the file has"
                               : "gs: the resumable upload ended before the file did");
    return 0;
  }
  if (x->transport_error != 0) return -1; /* no whole answer: what arrived is unknown */
  return objstore_code_for_http(x->resp->http) == TF_UNAVAILABLE ? -1 : 0;
}

/* A chunk's try failed on the way: what arrived stays. Asks the session
 * what it holds and sends the rest, within the settings' attempts. */
static void chunk_sent(objstore_upload* u, objstore_part* p) {
  gs_writer* w = (gs_writer*)u;
  int64_t tries, held;
  int outcome = chunk_outcome(p, &p->x, p->status);
  for (tries = 1; outcome == -1 && tries < w->cfg->transport.max_attempts; ++tries) {
    objstore_exchange x;
    objstore_response resp;
    if (session_status(w, p->total, &held, p->status) != 0) return;
    if (held == -2 && p->total >= 0 && object_size(w) == p->total) held = -1; /* it completed */
    if (held == -1) { /* the last chunk arrived after all */
      TF_SetStatus(p->status, TF_OK, "");
      return;
    }
    if (held == -2) {
      TF_SetStatus(p->status, TF_UNAVAILABLE,
                   "gs: the resumable upload's session is gone (HTTP 404) before the file was whole; "
                   "write the file again");
      return;
    }
    if (held < p->offset || held > p->offset + (int64_t)p->len) {
      TF_SetStatus(p->status, TF_DATA_LOSS, "gs: the resumable session holds bytes this file never sent");
      return;
    }
    objstore_exchange_init(&x, &resp, "PUT", NULL);
    if (chunk_request(w, p, (size_t)(held - p->offset), &x, p->status) == 0) {
      objstore_run(w->fs->store.engine, &w->cfg->transport, &x, p->status);
      outcome = chunk_outcome(p, &x, p->status);
    } else {
      outcome = 0;
    }
    gs_release_request(w->fs, &x);
    objstore_response_free(&resp);
  }
}

/* A file within the first chunk: one multipart upload (none for an
 * append that added nothing). */
static int put_object(objstore_upload* u, const char* data, size_t len, TF_Status* status) {
  gs_writer* w = (gs_writer*)u;
  objstore_exchange x;
  objstore_response resp;
  int rc = -1;
  if (w->temp_path != NULL && len == 0) return 0;
  objstore_exchange_init(&x, &resp, "POST", NULL);
  if (gs_upload_request(w->fs, u->bucket, sent_key(w), data, len, 0, &x, status) == 0)
    rc = objstore_run(w->fs->store.engine, &w->cfg->transport, &x, status);
  gs_release_request(w->fs, &x);
  objstore_response_free(&resp);
  return rc;
}

/* An object request of the writer's bucket: method on /storage/v1/b/B/o/key
 * + rest. */
static int object_request(gs_writer* w, const char* method, const char* key, const char* rest,
                          objstore_exchange* x, objstore_response* resp, TF_Status* status) {
  gs_call* c;
  objstore_exchange_init(x, resp, method, NULL);
  c = gs_call_bind(w->fs, method, w->upload.bucket, key, x, status);
  if (c == NULL) return -1;
  if (gs_url_text(c, "/storage/v1/b/") != 0 || gs_url_encoded(c, w->upload.bucket) != 0 ||
      gs_url_text(c, "/o/") != 0 || gs_url_encoded(c, key) != 0 || gs_url_text(c, rest) != 0) {
    plugin_set_oom(status);
    return -1;
  }
  return 0;
}

static int text(plugin_buf* b, const char* s) { return plugin_buf_append(b, s, strlen(s)); }

/* After an append's bytes are written: the object = [itself at the
 * generation the append saw, the temporary object]; then the temporary
 * object goes, whatever happened. */
static int compose(objstore_upload* u, TF_Status* status) {
  gs_writer* w = (gs_writer*)u;
  objstore_exchange x;
  objstore_response resp;
  plugin_buf body = {0};
  int rc = -1;
  TF_Status* ignored;
  if (w->temp_path == NULL || u->written == w->base) return 0; /* no append, or nothing appended */
  ignored = TF_NewStatus();
  if (text(&body, "{\"sourceObjects\":[{\"name\":") != 0 || gs_json_string(&body, u->key) != 0 ||
      text(&body, ",\"objectPrecondition\":{\"ifGenerationMatch\":") != 0 ||
      text(&body, w->generation) != 0 || text(&body, "}},{\"name\":") != 0 ||
      gs_json_string(&body, sent_key(w)) != 0 || text(&body, "}],\"destination\":{}}") != 0) {
    plugin_set_oom(status);
  } else if (object_request(w, "POST", u->key, "/compose", &x, &resp, status) == 0 &&
             gs_header((gs_call*)x.store_request, "Content-Type", "application/json") == 0) {
    x.body = body.data;
    x.body_len = body.len;
    rc = objstore_run(w->fs->store.engine, &w->cfg->transport, &x, status);
    if (rc != 0 && resp.http == 412) {
      char msg[700];
      snprintf(msg, sizeof msg, "append gs:/%s: the object changed since it was opened for append", u->path);
      TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    }
  }
  gs_release_request(w->fs, &x);
  objstore_response_free(&resp);
  plugin_buf_free(&body);
  if (object_request(w, "DELETE", sent_key(w), "", &x, &resp, ignored) == 0)
    objstore_run(w->fs->store.engine, &w->cfg->transport, &x, ignored);
  gs_release_request(w->fs, &x);
  objstore_response_free(&resp);
  TF_DeleteStatus(ignored);
  return rc;
}

/* The first chunk holds what one upload would (upload_threshold, when
 * set), the rest chunk_size; each rounded down to a multiple of 256 KiB. */
static int64_t chunk_size(objstore_upload* u, int number) {
  const gs_writer* w = (const gs_writer*)u;
  int64_t size = number == 1 && w->cfg->upload_threshold > 0 ? w->cfg->upload_threshold : w->cfg->chunk_size;
  return size > QUANTUM ? size / QUANTUM * QUANTUM : QUANTUM;
}

static void release(objstore_upload* u) {
  gs_writer* w = (gs_writer*)u;
  free(w->session);
  free(w->temp_path);
}

static const objstore_upload_hooks gs_upload = {
    .bucket_word = "a bucket",
    .max_parts = 1 << 30, /* a session's chunks are not counted */
    .too_many_parts = "gs: too many chunks",
    .part_size = chunk_size,
    .begin = open_session,
    .part_request = chunk_part_request,
    .part_sent = chunk_sent,
    .abandon = cancel_session,
    .put = put_object,
    .written = compose,
    .release = release,
};

static gs_writer* writer_new(const TF_Filesystem* filesystem, const char* path, const char* what,
                             TF_Status* status) {
  gs_fs* fs = filesystem->plugin_filesystem;
  gs_writer* w = (gs_writer*)objstore_upload_new(sizeof *w, &gs_upload, &fs->store, path, what, status);
  if (w == NULL) return NULL;
  w->fs = fs;
  w->cfg = w->upload.config;
  w->upload.concurrency = 1; /* a session takes its chunks in order */
  return w;
}

void gs_new_writable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                          TF_Status* status) {
  file->plugin_file = writer_new(filesystem, path, "write", status);
}

/* An append to an object from upload_threshold up, whose generation is
 * known: the new bytes go to a temporary object beside it (in
 * ".tmpcompose/", as TensorFlow's GCS filesystem names them), composed
 * onto it at close. 1, 0 (read the old bytes back instead), or -1 with
 * status set. */
static int keep_by_compose(objstore_upload* u, objstore_reader* old, TF_WritableFile* file,
                           TF_Status* status) {
  gs_writer* w = (gs_writer*)u;
  int64_t size = objstore_reader_size(old);
  const char* generation = objstore_reader_version(old);
  const char* slash = strrchr(u->path, '/');
  size_t dir = (size_t)(slash - u->path) + 1, n = strlen(u->path) + 40;
  char hex[17];
  (void)file;
  if (size < w->cfg->upload_threshold || *generation == '\0') return 0;
  if ((w->temp_path = malloc(n)) == NULL || plugin_random_hex(hex, sizeof hex) != 0) {
    plugin_set_oom(status);
    return -1;
  }
  snprintf(w->temp_path, n, "%.*s.tmpcompose/%s.%s", (int)dir, u->path, u->path + dir, hex);
  snprintf(w->generation, sizeof w->generation, "%s", generation);
  w->base = size;
  objstore_upload_skip(u, 0, size);
  return 1;
}

void gs_new_appendable_file(const TF_Filesystem* filesystem, const char* path,
                            TF_WritableFile* file, TF_Status* status) {
  gs_writer* w = writer_new(filesystem, path, "append", status);
  file->plugin_file = NULL;
  if (w != NULL) objstore_upload_append(filesystem, &w->upload, keep_by_compose, file, status);
}

/* Each object up to upload_threshold in one multipart upload, all in
 * flight at once; larger ones as writable files (resumable sessions), one
 * after another. */
void gs_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses) {
  gs_fs* fs = filesystem->plugin_filesystem;
  gs_config* cfg = gs_config_acquire(fs);
  objstore_write_objects(fs->store.engine, &cfg->transport, filesystem, paths, n, datas, lengths, statuses,
                         (size_t)cfg->upload_threshold, gs_new_writable_file);
  gs_config_release(fs, cfg);
}
