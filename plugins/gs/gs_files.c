/* Files on GCS.
 *
 * Reading is the engine's (objstore_fs.c, OBJSTORE_READER_OPS), on the
 * store's media requests (gs_object_request): one GET of at most
 * read_ahead bytes at the open, ranged GETs pinned with ifGenerationMatch
 * to the generation it saw.
 *
 * Writing: bytes collect in memory. A file that closes within
 * upload_threshold bytes is one multipart upload. A larger one opens a
 * resumable session and sends chunk_size chunks (multiples of 256 KiB, as
 * GCS requires) as they fill, so memory stays within about a chunk;
 * close sends the rest with the total. A chunk that fails is resumed from
 * what the session says it holds (a status query, an empty PUT whose
 * Content-Range names only the total, answered
 * 308 with Range "bytes=0-K"). Nothing is visible under the name until
 * close succeeds; a file dropped without close cancels its session.
 * Appending rewrites the object: the old bytes are read back first, as
 * TensorFlow's GCS filesystem does.
 */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gs_internal.h"

#define QUANTUM ((int64_t)256 << 10) /* GCS's chunk unit */

/* ---- writing ------------------------------------------------------------------------- */

typedef struct gs_writer {
  gs_fs* fs;
  gs_config* cfg;
  char* path;    /* "/bucket/key" */
  char* bucket;  /* into a copy of path */
  char* key;
  plugin_buf buf; /* bytes not yet sent */
  size_t chunk;   /* the session's chunk: a multiple of QUANTUM */
  int64_t sent;   /* bytes the session holds */
  char* session;  /* the resumable session's URL, once there is one */
  objstore_failure error; /* a failed send or commit: every later call reports it */
  /* An append by compose: the new bytes go to key (a temporary object),
   * then target becomes [target at generation, key]; base is its size. */
  char* target;
  char generation[64];
  int64_t base;
} gs_writer;

/* A request to the session's own URL; its answer in resp. */
static gs_call* session_call(gs_writer* w, objstore_exchange* x, objstore_response* resp,
                             TF_Status* status) {
  gs_call* c;
  objstore_exchange_init(x, resp, "PUT", NULL);
  c = gs_call_bind(w->fs, "PUT", w->bucket, w->key, x, status);
  if (c == NULL) return NULL;
  c->url.len = 0;
  if (gs_url_text(c, w->session) != 0) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "gs: out of memory");
    return NULL;
  }
  return c;
}

static int open_session(gs_writer* w, TF_Status* status) {
  objstore_exchange x;
  objstore_response resp;
  gs_call* c;
  int rc = -1;
  objstore_exchange_init(&x, &resp, "POST", NULL);
  c = gs_call_bind(w->fs, "POST", w->bucket, w->key, &x, status);
  if (c == NULL) goto done;
  if (gs_url_text(c, "/upload/storage/v1/b/") != 0 || gs_url_encoded(c, w->bucket) != 0 ||
      gs_url_text(c, "/o?uploadType=resumable") != 0 ||
      gs_header(c, "Content-Type", "application/json") != 0 ||
      plugin_buf_append(&c->body, "{\"name\":", 8) != 0 || gs_json_string(&c->body, w->key) != 0 ||
      plugin_buf_append(&c->body, "}", 1) != 0) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "gs: out of memory");
    goto done;
  }
  x.body = c->body.data;
  x.body_len = c->body.len;
  x.max_redirects = 1; /* to keep the Location (a 200 is not followed) */
  if (objstore_run(w->fs->store.engine, &w->cfg->transport, &x, status) != 0) goto done;
  if (resp.location == NULL) {
    TF_SetStatus(status, TF_DATA_LOSS, "gs: a resumable upload was opened without a Location");
    goto done;
  }
  if ((w->session = strdup(resp.location)) == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "gs: out of memory");
    goto done;
  }
  rc = 0;
done:
  gs_release_request(w->fs, &x);
  objstore_response_free(&resp);
  return rc;
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
  objstore_tree t;
  TF_FileStatistics stats;
  TF_Status* status = TF_NewStatus();
  int64_t size = -1;
  objstore_fs_begin(&w->fs->store, &t);
  objstore_forget(t.engine, w->path);
  objstore_tree_stat(&t, w->path, &stats, status);
  if (TF_GetCode(status) == TF_OK && !stats.is_directory) size = stats.length;
  objstore_fs_end(&w->fs->store, &t);
  TF_DeleteStatus(status);
  return size;
}

/* Sends buf[0, n) at w->sent, the last bytes of the object when total >=
 * 0; a failed try is resumed from what the session holds, within the
 * settings' attempts. 0 with w->sent advanced, or -1 with status set. */
static int send_chunk(gs_writer* w, size_t n, int64_t total, TF_Status* status) {
  int64_t attempts = w->cfg->transport.max_attempts, tries;
  size_t from = 0; /* of buf, already held by the session */
  for (tries = 0; tries < attempts; ++tries) {
    objstore_exchange x;
    objstore_response resp;
    gs_call* c = session_call(w, &x, &resp, status);
    char range[96];
    int rc = -1, done = 0, unanswered = 0;
    int64_t first = w->sent + (int64_t)from, held;
    if (n > from)
      snprintf(range, sizeof range, "bytes %lld-%lld/", (long long)first,
               (long long)(w->sent + (int64_t)n - 1));
    else
      snprintf(range, sizeof range, "bytes */");
    if (total >= 0) snprintf(range + strlen(range), sizeof range - strlen(range), "%lld", (long long)total);
    else snprintf(range + strlen(range), sizeof range - strlen(range), "*");
    if (c != NULL && gs_header(c, "Content-Range", range) == 0) {
      x.body = w->buf.data + from;
      x.body_len = n - from;
      x.max_attempts = 1; /* a retry resumes from what the session holds */
      rc = objstore_run(w->fs->store.engine, &w->cfg->transport, &x, status);
      done = rc == 0 && (total >= 0 ? !c->incomplete : c->incomplete);
      unanswered = x.transport_error != 0; /* no whole answer: what arrived is unknown */
    }
    gs_release_request(w->fs, &x);
    objstore_response_free(&resp);
    if (done) {
      w->sent += (int64_t)n;
      return 0;
    }
    if (rc == 0) {
      TF_SetStatus(status, TF_DATA_LOSS,
                   total >= 0 ? "gs: the resumable upload wants more bytes than the file has"
                              : "gs: the resumable upload ended before the file did");
      return -1;
    }
    if (!unanswered && objstore_code_for_http(resp.http) != TF_UNAVAILABLE) return -1;
    /* What arrived stays: ask, then send the rest. */
    if (session_status(w, total, &held, status) != 0) return -1;
    if (held == -2 && total >= 0 && object_size(w) == total) held = -1; /* it completed */
    if (held == -1) { /* the last chunk arrived after all */
      w->sent += (int64_t)n;
      return 0;
    }
    if (held == -2) {
      TF_SetStatus(status, TF_UNAVAILABLE,
                   "gs: the resumable upload's session is gone (HTTP 404) before the file was whole; "
                   "write the file again");
      return -1;
    }
    if (held < w->sent || held > w->sent + (int64_t)n) {
      TF_SetStatus(status, TF_DATA_LOSS, "gs: the resumable session holds bytes this file never sent");
      return -1;
    }
    from = (size_t)(held - w->sent);
  }
  return -1;
}

/* Sends the whole chunks that buf holds beyond the first one, so that a
 * close always has bytes left to send with the total. */
static int ship_chunks(gs_writer* w, TF_Status* status) {
  size_t shipped = 0;
  if (w->session == NULL && open_session(w, status) != 0) return -1;
  while (w->buf.len - shipped > w->chunk) {
    plugin_buf whole = w->buf;
    int rc;
    w->buf.data = whole.data + shipped;
    w->buf.len = w->chunk;
    rc = send_chunk(w, w->chunk, -1, status);
    w->buf = whole;
    if (rc != 0) return -1;
    shipped += w->chunk;
  }
  memmove(w->buf.data, w->buf.data + shipped, w->buf.len - shipped);
  w->buf.len -= shipped;
  return 0;
}

static void writer_append(const TF_WritableFile* file, const char* data, size_t n,
                          TF_Status* status) {
  gs_writer* w = file->plugin_file;
  if (objstore_failure_take(&w->error, status) != 0) return;
  if (plugin_buf_append(&w->buf, data, n) != 0) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "gs: out of memory");
    objstore_failure_record(&w->error, status);
    return;
  }
  if (w->sent + (int64_t)w->buf.len > w->cfg->upload_threshold && w->buf.len > w->chunk &&
      ship_chunks(w, status) != 0) {
    objstore_failure_record(&w->error, status);
    return;
  }
  TF_SetStatus(status, TF_OK, "");
}

static int64_t writer_tell(const TF_WritableFile* file, TF_Status* status) {
  gs_writer* w = file->plugin_file;
  TF_SetStatus(status, TF_OK, "");
  return w->base + w->sent + (int64_t)w->buf.len;
}

/* An object appears only whole, at close: flush and sync keep buffering. */
static void writer_flush(const TF_WritableFile* file, TF_Status* status) {
  gs_writer* w = file->plugin_file;
  if (objstore_failure_take(&w->error, status) == 0) TF_SetStatus(status, TF_OK, "");
}

static void cancel_session(gs_writer* w) {
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
  free(w->session);
  w->session = NULL;
}

/* An object request of the writer's bucket: method on /storage/v1/b/B/o/key
 * + rest. */
static int object_request(gs_writer* w, const char* method, const char* key, const char* rest,
                          objstore_exchange* x, objstore_response* resp, TF_Status* status) {
  gs_call* c;
  objstore_exchange_init(x, resp, method, NULL);
  c = gs_call_bind(w->fs, method, w->bucket, key, x, status);
  if (c == NULL) return -1;
  if (gs_url_text(c, "/storage/v1/b/") != 0 || gs_url_encoded(c, w->bucket) != 0 ||
      gs_url_text(c, "/o/") != 0 || gs_url_encoded(c, key) != 0 || gs_url_text(c, rest) != 0) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "gs: out of memory");
    return -1;
  }
  return 0;
}

static int text(plugin_buf* b, const char* s) { return plugin_buf_append(b, s, strlen(s)); }

/* target = [target at the generation the append saw, the temporary
 * object]; then the temporary object goes, whatever happened. */
static int compose(gs_writer* w, TF_Status* status) {
  objstore_exchange x;
  objstore_response resp;
  plugin_buf body = {0};
  int rc = -1;
  TF_Status* ignored = TF_NewStatus();
  if (text(&body, "{\"sourceObjects\":[{\"name\":") != 0 || gs_json_string(&body, w->target) != 0 ||
      text(&body, ",\"objectPrecondition\":{\"ifGenerationMatch\":") != 0 ||
      text(&body, w->generation) != 0 || text(&body, "}},{\"name\":") != 0 ||
      gs_json_string(&body, w->key) != 0 || text(&body, "}],\"destination\":{}}") != 0) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "gs: out of memory");
  } else if (object_request(w, "POST", w->target, "/compose", &x, &resp, status) == 0 &&
             gs_header((gs_call*)x.store_request, "Content-Type", "application/json") == 0) {
    x.body = body.data;
    x.body_len = body.len;
    rc = objstore_run(w->fs->store.engine, &w->cfg->transport, &x, status);
    if (rc != 0 && resp.http == 412) {
      char msg[700];
      snprintf(msg, sizeof msg, "append gs:/%s: the object changed since it was opened for append", w->path);
      TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    }
  }
  gs_release_request(w->fs, &x);
  objstore_response_free(&resp);
  plugin_buf_free(&body);
  if (object_request(w, "DELETE", w->key, "", &x, &resp, ignored) == 0)
    objstore_run(w->fs->store.engine, &w->cfg->transport, &x, ignored);
  gs_release_request(w->fs, &x);
  objstore_response_free(&resp);
  TF_DeleteStatus(ignored);
  return rc;
}

static void writer_close(const TF_WritableFile* file, TF_Status* status) {
  gs_writer* w = file->plugin_file;
  if (objstore_failure_take(&w->error, status) != 0) goto done;
  if (w->target != NULL && w->sent + (int64_t)w->buf.len == 0) { /* nothing appended */
    objstore_failure_set(&w->error, TF_FAILED_PRECONDITION, "gs: the file is closed");
    TF_SetStatus(status, TF_OK, "");
    goto done;
  }
  if (w->session != NULL) {
    if (send_chunk(w, w->buf.len, w->sent + (int64_t)w->buf.len, status) == 0) {
      free(w->session);
      w->session = NULL;
    }
  } else {
    objstore_exchange x;
    objstore_response resp;
    objstore_exchange_init(&x, &resp, "POST", NULL);
    if (gs_upload_request(w->fs, w->bucket, w->key, w->buf.data, w->buf.len, 0, &x, status) == 0)
      objstore_run(w->fs->store.engine, &w->cfg->transport, &x, status);
    gs_release_request(w->fs, &x);
    objstore_response_free(&resp);
  }
  if (w->target != NULL && TF_GetCode(status) == TF_OK) compose(w, status);
  if (TF_GetCode(status) != TF_OK) objstore_failure_record(&w->error, status);
  else objstore_failure_set(&w->error, TF_FAILED_PRECONDITION, "gs: the file is closed");
done:
  objstore_forget(w->fs->store.engine, w->path);
}

static void writer_free(gs_writer* w) {
  if (w == NULL) return;
  if (w->session != NULL) cancel_session(w); /* dropped without close: nothing appears */
  plugin_buf_free(&w->buf);
  free(w->path);
  if (w->target != NULL) free(w->key); /* the temporary object's own */
  free(w->bucket);
  gs_config_release(w->fs, w->cfg);
  if (w->error.status != NULL) objstore_failure_destroy(&w->error);
  free(w);
}

static void writer_cleanup(TF_WritableFile* file) {
  writer_free(file->plugin_file);
  file->plugin_file = NULL;
}

static gs_writer* writer_new(const TF_Filesystem* filesystem, const char* path, const char* what,
                             TF_Status* status) {
  gs_writer* w = calloc(1, sizeof *w);
  char* slash;
  if (w == NULL) goto oom;
  w->fs = filesystem->plugin_filesystem;
  w->cfg = gs_config_acquire(w->fs);
  objstore_failure_init(&w->error);
  w->path = strdup(path);
  w->bucket = strdup(path + strspn(path, "/"));
  if (w->error.status == NULL || w->path == NULL || w->bucket == NULL) goto oom;
  slash = strchr(w->bucket, '/');
  if (slash == NULL || slash[1] == '\0') {
    char msg[600];
    snprintf(msg, sizeof msg, "%s gs:/%s: a bucket is a directory, not a file", what, path);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    writer_free(w);
    return NULL;
  }
  *slash = '\0';
  w->key = slash + 1;
  w->chunk = (size_t)(w->cfg->chunk_size / QUANTUM * QUANTUM);
  TF_SetStatus(status, TF_OK, "");
  return w;
oom:
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "gs: out of memory");
  writer_free(w);
  return NULL;
}

void gs_new_writable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                          TF_Status* status) {
  file->plugin_file = writer_new(filesystem, path, "write", status);
}

/* An append to an object of size bytes at generation: the new bytes go
 * to a temporary object beside it (in ".tmpcompose/", as TensorFlow's GCS
 * filesystem names them), composed onto it at close. 0, or -1 with status
 * set. */
static int compose_mode(gs_writer* w, int64_t size, const char* generation, TF_Status* status) {
  char hex[17];
  const char* slash = strrchr(w->key, '/');
  size_t dir = slash != NULL ? (size_t)(slash - w->key) + 1 : 0, n = strlen(w->key) + 40;
  char* tmp = malloc(n);
  if (tmp == NULL || plugin_random_hex(hex, sizeof hex) != 0) {
    free(tmp);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "gs: out of memory");
    return -1;
  }
  snprintf(tmp, n, "%.*s.tmpcompose/%s.%s", (int)dir, w->key, w->key + dir, hex);
  w->target = w->key;
  w->key = tmp;
  w->base = size;
  snprintf(w->generation, sizeof w->generation, "%s", generation);
  return 0;
}

void gs_new_appendable_file(const TF_Filesystem* filesystem, const char* path,
                            TF_WritableFile* file, TF_Status* status) {
  gs_writer* w = writer_new(filesystem, path, "append", status);
  objstore_reader* r;
  int64_t size;
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
  size = objstore_reader_size(r);
  file->plugin_file = w;
  if (size >= w->cfg->upload_threshold && *objstore_reader_version(r) != '\0' &&
      compose_mode(w, size, objstore_reader_version(r), status) == 0) {
    objstore_reader_free(r);
    return;
  }
  if (objstore_fs_read_back(r, &gs_writable_file_ops, file, status) != 0) { /* the old bytes first */
    writer_free(w);
    file->plugin_file = NULL;
  }
  objstore_reader_free(r);
}

const TF_WritableFileOps gs_writable_file_ops = {writer_cleanup, writer_append, writer_tell,
                                                 writer_flush,   writer_flush,  writer_close};

/* Each object up to upload_threshold in one multipart upload, all in
 * flight at once; larger ones as writable files (resumable sessions), one
 * after another. */
void gs_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses) {
  gs_fs* fs = filesystem->plugin_filesystem;
  gs_config* cfg = gs_config_acquire(fs);
  objstore_write_objects(fs->store.engine, &cfg->transport, filesystem, paths, n, datas, lengths, statuses,
                         (size_t)cfg->upload_threshold, gs_new_writable_file, &gs_writable_file_ops);
  gs_config_release(fs, cfg);
}
