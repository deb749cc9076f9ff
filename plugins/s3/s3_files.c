/* Files on S3.
 *
 * Reading: the open is one GET of at most read_ahead bytes (plain, or
 * ranged after big objects: see try_plain_get), which both proves the
 * object exists and answers small files whole; later reads
 * are ranged GETs straight into the caller's buffer (large ones split into
 * parallel ranges), each pinned with If-Match to the ETag seen at the open,
 * so a file replaced mid-read fails instead of mixing two versions.
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

/* ---- reading ----------------------------------------------------------------- */

typedef struct s3_reader {
  s3_fs* fs;
  s3_config* cfg;
  s3_path path;
  int64_t size;
  char etag[96];
  char* head; /* the object's first head_len bytes */
  size_t head_len;
} s3_reader;

static void reader_free(s3_reader* r) {
  if (r == NULL) return;
  s3_config_release(r->fs, r->cfg);
  s3_path_free(&r->path);
  free(r->head);
  free(r);
}

/* Whether this open should try a plain GET. A ranged GET costs Ceph's
 * gateway about a quarter more than a plain one (measured: 1354 against
 * 1823 GETs/s of 4 KiB objects), but a plain GET of a big object has to be
 * stopped, which costs its connection. So after an object too big for one,
 * opens use ranged GETs for a window that doubles with each miss (64 opens
 * up to 4096) and starts again at 64 once a plain GET fits. */
static int try_plain_get(s3_fs* fs) {
  uint64_t n = __atomic_add_fetch(&fs->opens, 1, __ATOMIC_RELAXED);
  return n >= __atomic_load_n(&fs->ranged_until, __ATOMIC_RELAXED);
}

static void plain_get_fitted(s3_fs* fs, int fitted) {
  uint64_t window = __atomic_load_n(&fs->ranged_window, __ATOMIC_RELAXED);
  if (fitted) {
    if (window != 64) __atomic_store_n(&fs->ranged_window, 64, __ATOMIC_RELAXED);
    return;
  }
  window = window < 64 ? 64 : window >= 4096 ? 4096 : window * 2;
  __atomic_store_n(&fs->ranged_window, window, __ATOMIC_RELAXED);
  __atomic_store_n(&fs->ranged_until, __atomic_load_n(&fs->opens, __ATOMIC_RELAXED) + window,
                   __ATOMIC_RELAXED);
}

/* A GET's 404 for an object (not for its bucket). */
static int not_found(const s3_response* resp) {
  return resp->http == 404 && strcmp(resp->error_code, "NoSuchBucket") != 0;
}

/* Why a GET of p found no object: status says it (a directory, or
 * missing), or S3_FILE with status OK when one was created since. */
static int explain_not_found(s3_fs* fs, const s3_config* cfg, const s3_path* p,
                             const char* what, TF_Status* status) {
  int64_t size, mtime;
  int kind = s3_probe(fs, cfg, p, &size, &mtime, status);
  if (kind == S3_DIR) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%s s3://%s/%s: a directory", what, p->bucket, p->key);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
  } else if (kind == S3_MISSING) {
    s3_set_missing(fs, cfg, p, what, status);
  }
  return kind;
}

/* A bucket is a directory, not a file to read: 0 when p names an object,
 * else -1 with status set. */
static int check_object(const s3_path* p, const char* what, TF_Status* status) {
  char msg[400];
  if (*p->key != '\0') return 0;
  snprintf(msg, sizeof msg, "%s s3://%s: a bucket is a directory", what, p->bucket);
  TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
  return -1;
}

/* Opens path for reading, or sets status (NOT_FOUND, or FAILED_PRECONDITION
 * for a directory or a file's child) and returns NULL. */
static s3_reader* reader_open(const TF_Filesystem* filesystem, const char* path,
                              const char* what, TF_Status* status) {
  s3_reader* r = calloc(1, sizeof *r);
  char range[48];
  s3_request req;
  s3_response resp;
  if (r == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return NULL;
  }
  r->fs = s3_fs_of(filesystem);
  r->cfg = s3_config_acquire(r->fs);
  if (s3_path_parse(path, &r->path, status) != 0) {
    r->path.bucket = r->path.key = NULL;
    reader_free(r);
    return NULL;
  }
  if (check_object(&r->path, what, status) != 0) {
    reader_free(r);
    return NULL;
  }
  s3_request_init(&req, &resp, r->cfg->read_ahead > 0 ? "GET" : "HEAD", r->path.bucket, r->path.key);
  snprintf(range, sizeof range, "bytes=0-%lld", (long long)r->cfg->read_ahead - 1);
  req.range = range;
  if (r->cfg->read_ahead > 0 && try_plain_get(r->fs)) {
    req.range = NULL;
    req.max_body = (size_t)r->cfg->read_ahead;
  }
  s3_execute(r->fs, r->cfg, &req, &resp, status);
  if (req.max_body > 0) {
    plain_get_fitted(r->fs, !resp.too_long);
    if (resp.too_long) { /* bigger than read_ahead: its head, ranged */
      s3_response_free(&resp);
      s3_request_init(&req, &resp, "GET", r->path.bucket, r->path.key);
      req.range = range;
      s3_execute(r->fs, r->cfg, &req, &resp, status);
    }
  }
  if (TF_GetCode(status) == TF_OK) {
    r->size = resp.total >= 0 ? resp.total
              : resp.length >= 0 ? resp.length
                                 : (int64_t)resp.body.len;
    r->head = resp.body.data; /* taken over */
    r->head_len = resp.body.len;
    resp.body.data = NULL;
    snprintf(r->etag, sizeof r->etag, "%s", resp.etag);
  } else if (resp.http == 416) {
    r->size = 0; /* an empty object has no byte 0 to range over */
    snprintf(r->etag, sizeof r->etag, "%s", resp.etag);
    TF_SetStatus(status, TF_OK, "");
  } else if (not_found(&resp) && explain_not_found(r->fs, r->cfg, &r->path, what, status) == S3_FILE) {
    /* Created between the GET and the probe: retry the open. */
    s3_response_free(&resp);
    reader_free(r);
    return reader_open(filesystem, path, what, status);
  }
  s3_response_free(&resp);
  if (TF_GetCode(status) != TF_OK) {
    reader_free(r);
    return NULL;
  }
  return r;
}

typedef struct range_job {
  s3_reader* r;
  char* out;
  int64_t offset; /* object offset of out[0] */
  int64_t length;
  int64_t chunk;
  s3_first_error error;
} range_job;

/* One ranged GET of [offset, offset + n) into out. */
static int get_range(s3_reader* r, int64_t offset, int64_t n, char* out,
                     TF_Status* status) {
  char range[64];
  s3_request req;
  s3_response resp;
  int rc;
  memset(&req, 0, sizeof req);
  memset(&resp, 0, sizeof resp);
  snprintf(range, sizeof range, "bytes=%lld-%lld", (long long)offset,
           (long long)(offset + n - 1));
  req.method = "GET";
  req.bucket = r->path.bucket;
  req.key = r->path.key;
  req.range = range;
  req.if_match = *r->etag ? r->etag : NULL;
  req.out = out;
  req.out_cap = (size_t)n;
  rc = s3_execute(r->fs, r->cfg, &req, &resp, status);
  if (rc == 0 && (int64_t)resp.out_len != n) {
    char msg[1200];
    snprintf(msg, sizeof msg, "read s3://%s/%s: %lld bytes at %lld, expected %lld",
             r->path.bucket, r->path.key, (long long)resp.out_len,
             (long long)offset, (long long)n);
    TF_SetStatus(status, TF_DATA_LOSS, msg);
    rc = -1;
  }
  s3_response_free(&resp);
  return rc;
}

static void range_chunk(void* arg, int i) {
  range_job* job = arg;
  int64_t start = (int64_t)i * job->chunk;
  int64_t n = job->length - start < job->chunk ? job->length - start : job->chunk;
  TF_Status* status = TF_NewStatus();
  if (!s3_first_error_failed(&job->error) &&
      get_range(job->r, job->offset + start, n, job->out + start, status) != 0)
    s3_first_error_record(&job->error, status);
  TF_DeleteStatus(status);
}

/* Reads [offset, offset + n) of the object, n > 0, all within its size. */
static int read_span(s3_reader* r, int64_t offset, int64_t n, char* out,
                     TF_Status* status) {
  const int64_t chunk = r->cfg->part_size;
  range_job job;
  int chunks = (int)((n + chunk - 1) / chunk), rc;
  if (chunks < 2 || r->cfg->concurrency < 2)
    return get_range(r, offset, n, out, status);
  job.r = r;
  job.out = out;
  job.offset = offset;
  job.length = n;
  job.chunk = chunk;
  s3_first_error_init(&job.error);
  s3_parallel(chunks, (int)r->cfg->concurrency, range_chunk, &job);
  rc = s3_first_error_take(&job.error, status);
  s3_first_error_destroy(&job.error);
  return rc;
}

static int64_t reader_read(const TF_RandomAccessFile* file, uint64_t offset,
                           size_t n, char* buffer, TF_Status* status) {
  s3_reader* r = file->plugin_file;
  int64_t want, copied = 0;
  if ((int64_t)offset >= r->size) {
    TF_SetStatus(status, n == 0 ? TF_OK : TF_OUT_OF_RANGE,
                 n == 0 ? "" : "read past the end of the object");
    return 0;
  }
  want = r->size - (int64_t)offset < (int64_t)n ? r->size - (int64_t)offset : (int64_t)n;
  if (offset < r->head_len) {
    copied = (int64_t)(r->head_len - offset) < want ? (int64_t)(r->head_len - offset) : want;
    memcpy(buffer, r->head + offset, (size_t)copied);
  }
  if (copied < want &&
      read_span(r, (int64_t)offset + copied, want - copied, buffer + copied, status) != 0)
    return -1;
  if (want < (int64_t)n) TF_SetStatus(status, TF_OUT_OF_RANGE, "read past the end of the object");
  else TF_SetStatus(status, TF_OK, "");
  return want;
}

static void reader_cleanup(TF_RandomAccessFile* file) {
  reader_free(file->plugin_file);
  file->plugin_file = NULL;
}

void s3_new_random_access_file(const TF_Filesystem* filesystem,
                               const char* path, TF_RandomAccessFile* file,
                               TF_Status* status) {
  file->plugin_file = reader_open(filesystem, path, "open", status);
}

const TF_RandomAccessFileOps s3_random_access_file_ops = {.cleanup = reader_cleanup, .read = reader_read};

/* ---- many whole objects at once ---------------------------------------------- */

/* One plain GET per object, all in flight together (s3_execute_many), each
 * body straight into its buffer; an object bigger than its buffer stops at
 * the headers and reports its size. */
void s3_read_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                   char* const* buffers, const size_t* caps, int64_t* sizes,
                   TF_Status** statuses) {
  s3_batch b;
  int i, k;
  if (s3_batch_start(&b, filesystem, n, statuses) != 0) return;
  for (i = 0; i < n; ++i) {
    s3_request* req;
    sizes[i] = 0;
    if (s3_batch_parse(&b, i, paths[i]) != 0 || check_object(&b.paths[i], "open", statuses[i]) != 0)
      continue;
    req = s3_batch_add(&b, i, "GET");
    req->out = buffers[i];
    req->out_cap = caps[i];
    req->max_body = caps[i] > 0 ? caps[i] : 1; /* 0 would mean no limit */
  }
  s3_batch_run(&b);
  for (k = 0; k < b.num_sent; ++k) {
    const s3_response* resp = &b.resps[k];
    i = b.path_of[k];
    if (TF_GetCode(statuses[i]) == TF_OK) {
      sizes[i] = (int64_t)resp->out_len;
    } else if (resp->too_long) { /* read another way */
      TF_SetStatus(statuses[i], TF_OK, "");
      sizes[i] = resp->length > (int64_t)caps[i] ? resp->length : (int64_t)caps[i] + 1;
    } else if (not_found(resp) &&
               explain_not_found(b.fs, b.cfg, &b.paths[i], "open", statuses[i]) == S3_FILE) {
      sizes[i] = (int64_t)caps[i] + 1; /* created since: read another way */
    }
  }
  s3_batch_end(&b);
}

/* ---- memory regions: the object downloaded --------------------------------- */

typedef struct s3_region {
  char* data;
  uint64_t length;
} s3_region;

void s3_new_read_only_memory_region_from_file(const TF_Filesystem* filesystem, const char* path,
                          TF_ReadOnlyMemoryRegion* region, TF_Status* status) {
  s3_reader* r = reader_open(filesystem, path, "map", status);
  s3_region* m;
  TF_RandomAccessFile file;
  region->plugin_memory_region = NULL;
  if (r == NULL) return;
  if (r->size == 0) {
    char msg[1200];
    snprintf(msg, sizeof msg, "map s3://%s/%s: an empty file has no region",
             r->path.bucket, r->path.key);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
    reader_free(r);
    return;
  }
  m = malloc(sizeof *m);
  if (m != NULL) m->data = malloc((size_t)r->size);
  if (m == NULL || m->data == NULL) {
    free(m);
    reader_free(r);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  m->length = (uint64_t)r->size;
  file.plugin_file = r;
  if (reader_read(&file, 0, (size_t)r->size, m->data, status) != r->size) {
    free(m->data);
    free(m);
  } else {
    region->plugin_memory_region = m;
  }
  reader_free(r);
}

static void region_cleanup(TF_ReadOnlyMemoryRegion* region) {
  s3_region* m = region->plugin_memory_region;
  if (m != NULL) free(m->data);
  free(m);
}

static const void* region_data(const TF_ReadOnlyMemoryRegion* region) {
  return ((s3_region*)region->plugin_memory_region)->data;
}

static uint64_t region_length(const TF_ReadOnlyMemoryRegion* region) {
  return ((s3_region*)region->plugin_memory_region)->length;
}

const TF_ReadOnlyMemoryRegionOps s3_memory_region_ops = {region_cleanup, region_data,
                                                         region_length};

/* ---- writing ------------------------------------------------------------------- */

/* Parts uploading at once: at most MAX_BUFFERS_IN_FLIGHT of them in the
 * writer's own buffers (its memory bound), more when they are sent straight
 * from the caller's bytes (ship_borrowed), which cost no memory. */
#define MAX_PARTS_IN_FLIGHT 12
#define MAX_BUFFERS_IN_FLIGHT 4

typedef struct s3_writer s3_writer;

typedef struct part_upload {
  s3_writer* w;
  int number; /* 1-based */
  const char* data;
  size_t len;
  char* buffer; /* the writer's buffer holding data; NULL: the caller's bytes */
  size_t cap;   /* buffer's capacity */
  pthread_t thread;
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
  s3_first_error error; /* of the parts uploading in the background */
  s3_attributes attributes; /* the object is created with */
};

static void* part_thread(void* arg) {
  part_upload* u = arg;
  s3_writer* w = u->w;
  char etag[96];
  TF_Status* status = TF_NewStatus();
  if (s3_upload_part(w->fs, w->cfg, &w->path, w->upload_id, u->number, u->data, u->len,
                     NULL, NULL, etag, sizeof etag, status) == 0) {
    w->etags[u->number - 1] = strdup(etag);
    if (w->etags[u->number - 1] == NULL) {
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
      s3_first_error_record(&w->error, status);
    }
  } else {
    s3_first_error_record(&w->error, status);
  }
  TF_DeleteStatus(status);
  return NULL;
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
  pthread_join(u->thread, NULL);
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

/* Sends data as part w->parts + 1, in the background (in this thread when
 * no thread can start). buffer is the writer's buffer holding data, which
 * comes back as a spare; NULL means data is the caller's, which must stay
 * valid until the part is joined. */
static int start_part(s3_writer* w, const char* data, size_t len, char* buffer, size_t cap,
                      TF_Status* status) {
  part_upload* u;
  if (ensure_upload(w, status) != 0 || reserve_part(w, status) != 0) goto fail;
  wait_for_parts(w, buffer != NULL ? MAX_BUFFERS_IN_FLIGHT : MAX_PARTS_IN_FLIGHT);
  if (s3_first_error_take(&w->error, status) != 0) goto fail;
  u = malloc(sizeof *u);
  if (u == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  *u = (part_upload){.w = w, .number = ++w->parts, .data = data, .len = len,
                     .buffer = buffer, .cap = cap};
  if (pthread_create(&u->thread, NULL, part_thread, u) != 0) {
    part_thread(u);
    give_back(w, u);
    free(u);
    return s3_first_error_take(&w->error, status);
  }
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
  return s3_first_error_take(&w->error, status) == 0 ? (int64_t)sent : -1;
}

static void writer_append(const TF_WritableFile* file, const char* data, size_t n,
                          TF_Status* status) {
  s3_writer* w = file->plugin_file;
  if (w->closed) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "append to a closed s3 file");
    return;
  }
  if (s3_first_error_take(&w->error, status) != 0) return; /* failed before: stays failed */
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
    s3_first_error_record(&w->error, status);
}

static int64_t writer_tell(const TF_WritableFile* file, TF_Status* status) {
  s3_writer* w = file->plugin_file;
  TF_SetStatus(status, TF_OK, "");
  return w->written;
}

/* An object appears only whole, at close: flush and sync keep buffering. */
static void writer_flush(const TF_WritableFile* file, TF_Status* status) {
  s3_first_error_take(&((s3_writer*)file->plugin_file)->error, status);
}

static void writer_close(const TF_WritableFile* file, TF_Status* status) {
  s3_writer* w = file->plugin_file;
  w->closed = 1;
  if (w->upload_id == NULL) {
    s3_request req;
    s3_response resp;
    if (s3_first_error_take(&w->error, status) != 0) return;
    s3_request_init(&req, &resp, "PUT", w->path.bucket, w->path.key);
    req.content_type = s3_content_type(w->cfg, &w->attributes, w->path.key);
    req.attributes = &w->attributes;
    req.body = w->buf;
    req.body_len = w->len;
    s3_execute(w->fs, w->cfg, &req, &resp, status);
    s3_response_free(&resp);
    return;
  }
  if (w->len > 0 && ship_part(w, status) != 0) {
    join_all(w);
    s3_abort_multipart(w->fs, w->cfg, &w->path, w->upload_id, NULL);
    return;
  }
  join_all(w);
  if (s3_first_error_take(&w->error, status) == 0)
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
  s3_first_error_destroy(&w->error);
  s3_attributes_free(&w->attributes);
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
  s3_first_error_init(&w->error);
  if (s3_path_parse(path, &w->path, status) == 0 && check_object(&w->path, what, status) == 0) {
    w->buf = part_buffer(w, 1, &w->cap);
    if (w->buf != NULL) return w;
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
  }
  writer_free(w);
  return NULL;
}

/* ---- many whole objects written at once ------------------------------------------- */

typedef struct write_job {
  const TF_Filesystem* filesystem;
  const char* const* paths;
  const char* const* datas;
  const size_t* lengths;
  TF_Status** statuses;
} write_job;

/* Object i through a writable file: a multipart upload when it is big. */
static void write_alone(void* arg, int i) {
  write_job* job = arg;
  TF_WritableFile file = {NULL};
  s3_new_writable_file(job->filesystem, job->paths[i], &file, job->statuses[i]);
  if (file.plugin_file == NULL) return;
  writer_append(&file, job->datas[i], job->lengths[i], job->statuses[i]);
  if (TF_GetCode(job->statuses[i]) == TF_OK) writer_close(&file, job->statuses[i]);
  writer_cleanup(&file); /* aborts an upload that did not complete */
}

/* One PUT per object up to part_size, all in flight at once
 * (s3_execute_many); bigger ones go as writable files, `concurrency` at a
 * time. */
void s3_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses) {
  s3_batch b;
  s3_attributes none;
  write_job alone = {filesystem, paths, datas, lengths, statuses};
  int i;
  memset(&none, 0, sizeof none);
  if (s3_batch_start(&b, filesystem, n, statuses) != 0) return;
  for (i = 0; i < n; ++i) {
    s3_request* req;
    if ((int64_t)lengths[i] > b.cfg->part_size) {
      s3_batch_aside(&b, i);
      continue;
    }
    if (s3_batch_parse(&b, i, paths[i]) != 0 || check_object(&b.paths[i], "create", statuses[i]) != 0)
      continue;
    req = s3_batch_add(&b, i, "PUT");
    req->content_type = s3_content_type(b.cfg, &none, b.paths[i].key);
    req->attributes = &none;
    req->body = datas[i];
    req->body_len = lengths[i];
  }
  s3_batch_run(&b);
  s3_batch_settle_aside(&b, write_alone, &alone);
  s3_batch_end(&b);
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
  s3_reader* r;
  int64_t copy_part, whole, tail;
  file->plugin_file = NULL;
  if (w == NULL) return;
  r = reader_open(filesystem, path, "append", status);
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
  /* Whole parts of the old object are copied server-side; the tail (less
   * than a part) is read into the buffer, since only the last part of an
   * upload may be small. */
  copy_part = s3_copy_part_size(w->cfg->part_size, r->size);
  whole = r->size / copy_part;
  tail = r->size - whole * copy_part;
  if (whole > 0) {
    w->parts = (int)whole;
    while (w->etags_cap < w->parts)
      if (reserve_part(w, status) != 0) goto fail;
    if (ensure_upload(w, status) != 0 ||
        s3_copy_parts(w->fs, w->cfg, &r->path, whole * copy_part, copy_part, &w->path,
                      w->upload_id, w->etags, status) != 0)
      goto fail;
    free(w->buf); /* the next part's size follows the part count */
    w->buf = part_buffer(w, w->parts + 1, &w->cap);
  }
  if (tail > 0) {
    TF_RandomAccessFile f = {r};
    if ((size_t)tail > w->cap) { /* the tail of a large copy part: one part of its own */
      free(w->buf);
      w->cap = (size_t)tail;
      w->buf = malloc(w->cap);
    }
    if (w->buf == NULL) {
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
      goto fail;
    }
    if (reader_read(&f, (uint64_t)(whole * copy_part), (size_t)tail, w->buf, status) != tail)
      goto fail;
    w->len = (size_t)tail;
  }
  if (w->buf == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    goto fail;
  }
  w->written = r->size;
  reader_free(r);
  file->plugin_file = w;
  TF_SetStatus(status, TF_OK, "");
  return;
fail:
  reader_free(r);
  writer_free(w);
}

const TF_WritableFileOps s3_writable_file_ops = {writer_cleanup, writer_append, writer_tell,
                                                 writer_flush,   writer_flush,  writer_close};
