/* Objects read through the engine, whatever the store: the store says how
 * to ask for an object (object_request), the engine does the rest.
 *
 * The open is one GET of at most read_ahead bytes, which both proves the
 * object exists and answers small objects whole. It is a plain GET when it
 * can be (a ranged one costs a server more: Ceph's gateway answered 1823
 * plain against 1354 ranged GETs/s of 4 KiB objects), stopped at its
 * headers when the object is bigger; after such an object, opens ask for a
 * range instead for a window of opens that doubles with each miss (64 up
 * to 4096) and starts again at 64 once a plain GET fits. Later reads are
 * ranged GETs straight into the caller's buffer, pinned with If-Match to
 * the ETag the open saw, split into part_size ranges all in flight at once.
 * A server that ignores Range (200 and the whole object) still gives the
 * right bytes: the engine skips to the range and stops after it. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objstore_internal.h"

struct objstore_reader {
  objstore_engine* engine;
  objstore_settings settings; /* a copy: its ca_bundle the reader's own */
  char* path;
  int64_t size;
  int64_t part_size;
  char etag[96];
  char* head; /* the object's first head_len bytes */
  size_t head_len;
  /* Read-ahead: a read that starts where the last one ended, with no
   * other read under way, is sequential;
   * each such read fetches `window` bytes at least, which doubles up to
   * MOST_AHEAD, and keeps what it fetched beyond the read in `ahead`. */
  pthread_mutex_t lock; /* guards what follows: reads may come from many threads */
  int reading;          /* reads under way: one alongside others is never sequential */
  int64_t last_end;
  int64_t window;
  char* ahead;
  int64_t ahead_at;
  int64_t ahead_len;
};

/* The most a sequential read fetches at once. */
#define MOST_AHEAD ((int64_t)8 << 20)

void objstore_reader_free(objstore_reader* r) {
  if (r == NULL) return;
  free(r->path);
  free(r->settings.ca_bundle);
  free(r->head);
  free(r->ahead);
  pthread_mutex_destroy(&r->lock);
  free(r);
}

int64_t objstore_reader_size(const objstore_reader* r) { return r->size; }

const char* objstore_reader_version(const objstore_reader* r) { return r->etag; }

/* Whether this open should try a plain GET (see the top of this file). */
static int try_plain_get(objstore_opens* o) {
  uint64_t n = __atomic_add_fetch(&o->opens, 1, __ATOMIC_RELAXED);
  return n >= __atomic_load_n(&o->ranged_until, __ATOMIC_RELAXED);
}

static void plain_get_fitted(objstore_opens* o, int fitted) {
  uint64_t window = __atomic_load_n(&o->ranged_window, __ATOMIC_RELAXED);
  if (fitted) {
    if (window != 64) __atomic_store_n(&o->ranged_window, 64, __ATOMIC_RELAXED);
    return;
  }
  window = window < 64 ? 64 : window >= 4096 ? 4096 : window * 2;
  __atomic_store_n(&o->ranged_window, window, __ATOMIC_RELAXED);
  __atomic_store_n(&o->ranged_until, __atomic_load_n(&o->opens, __ATOMIC_RELAXED) + window,
                   __ATOMIC_RELAXED);
}

/* One request for the object at path, made by the store and run; what
 * the store made for it stays until release (x->store_request: NULL when
 * it made nothing). */
static int run_object_request(objstore_engine* e, const objstore_settings* s, objstore_exchange* x,
                              const char* path, const char* range, const char* if_match,
                              TF_Status* status) {
  const objstore_store* store = objstore_engine_store(e);
  if (store->object_request(objstore_engine_store_ctx(e), path, range, if_match, x, status) != 0) {
    x->store_request = NULL;
    return -1;
  }
  return objstore_run(e, s, x, status);
}

static void release(objstore_engine* e, objstore_exchange* x) {
  if (x->store_request != NULL)
    objstore_engine_store(e)->release_request(objstore_engine_store_ctx(e), x);
  x->store_request = NULL;
}

/* A 404 for path: what the store says is there instead; 1 when an
 * object is there after all. */
static int explain_missing(objstore_engine* e, const char* path, const char* what,
                           const objstore_exchange* x, TF_Status* status) {
  const objstore_store* store = objstore_engine_store(e);
  if (x->resp->http != 404 || store->explain_missing == NULL) return 0;
  return store->explain_missing(objstore_engine_store_ctx(e), path, what, x, status);
}

objstore_reader* objstore_reader_open(objstore_engine* e, const objstore_settings* settings,
                                      const char* path, int64_t read_ahead, int64_t part_size,
                                      const char* what, TF_Status* status) {
  objstore_reader* r = calloc(1, sizeof *r);
  objstore_exchange x;
  objstore_response resp;
  char range[48];
  int plain;
  if (r == NULL || (r->path = strdup(path)) == NULL) {
    free(r);
    plugin_set_oom(status);
    return NULL;
  }
  r->engine = e;
  pthread_mutex_init(&r->lock, NULL);
  r->window = read_ahead > 0 ? read_ahead : 64 * 1024;
  r->settings = *settings; /* the caller's snapshot may go before the reader */
  r->settings.ca_bundle = strdup(settings->ca_bundle != NULL ? settings->ca_bundle : "");
  if (r->settings.ca_bundle == NULL) {
    objstore_reader_free(r);
    plugin_set_oom(status);
    return NULL;
  }
  r->part_size = part_size > 0 ? part_size : 8 << 20;
  snprintf(range, sizeof range, "bytes=0-%lld", (long long)read_ahead - 1);
  plain = read_ahead > 0 && try_plain_get(objstore_engine_opens(e));
  objstore_exchange_init(&x, &resp, read_ahead > 0 ? "GET" : "HEAD", NULL);
  if (plain) x.max_body = (size_t)read_ahead;
  run_object_request(e, settings, &x, path, read_ahead > 0 && !plain ? range : NULL, NULL, status);
  if (plain) {
    plain_get_fitted(objstore_engine_opens(e), !resp.too_long);
    if (resp.too_long) { /* bigger than read_ahead: its head, ranged */
      release(e, &x);
      objstore_response_free(&resp);
      objstore_exchange_init(&x, &resp, "GET", NULL);
      run_object_request(e, settings, &x, path, range, NULL, status);
    }
  }
  if (TF_GetCode(status) == TF_OK) {
    r->size = resp.total >= 0 ? resp.total : resp.length >= 0 ? resp.length : (int64_t)resp.body.len;
    if (strcmp(x.method, "GET") == 0) {
      r->head = resp.body.data; /* taken over */
      r->head_len = resp.body.len;
      resp.body.data = NULL;
    }
    snprintf(r->etag, sizeof r->etag, "%s", resp.etag);
  } else if (resp.http == 416) {
    r->size = 0; /* an empty object has no byte 0 to range over */
    snprintf(r->etag, sizeof r->etag, "%s", resp.etag);
    TF_SetStatus(status, TF_OK, "");
  } else if (x.store_request != NULL && explain_missing(e, path, what, &x, status) == 1) {
    /* Created between the GET and the store's look: open again. */
    release(e, &x);
    objstore_response_free(&resp);
    objstore_reader_free(r);
    return objstore_reader_open(e, settings, path, read_ahead, part_size, what, status);
  }
  release(e, &x);
  objstore_response_free(&resp);
  if (TF_GetCode(status) != TF_OK) {
    objstore_reader_free(r);
    return NULL;
  }
  return r;
}

/* A ranged GET answered with fewer bytes than asked: -1 with status set. */
static int check_length(const objstore_reader* r, const objstore_response* resp, int64_t offset,
                        int64_t n, TF_Status* status) {
  const objstore_store* store = objstore_engine_store(r->engine);
  char name[700], msg[1000];
  if ((int64_t)resp->out_len == n) return 0;
  store->name_object(objstore_engine_store_ctx(r->engine), r->path, name, sizeof name);
  snprintf(msg, sizeof msg, "read %s: %lld bytes at %lld, expected %lld", name,
           (long long)resp->out_len, (long long)offset, (long long)n);
  TF_SetStatus(status, TF_DATA_LOSS, msg);
  return -1;
}

/* The ETag reads are pinned to: a strong one (a weak one, "W/...", may
 * not be compared by If-Match), else none. */
static const char* pin(const objstore_reader* r) {
  return *r->etag != '\0' && strncmp(r->etag, "W/", 2) != 0 ? r->etag : NULL;
}

/* Reads [offset, offset + n) of the object, n > 0, all within its size:
 * one ranged GET per part_size, all in flight at once (as far as
 * max_connections allows), each straight into its share of out. */
static int read_span(objstore_reader* r, int64_t offset, int64_t n, char* out, TF_Status* status) {
  objstore_engine* e = r->engine;
  const objstore_store* store = objstore_engine_store(e);
  void* ctx = objstore_engine_store_ctx(e);
  const int64_t chunk = r->part_size;
  int chunks = (int)((n + chunk - 1) / chunk), made = 0, i, rc = 0;
  objstore_exchange* xs = calloc((size_t)chunks, sizeof *xs);
  objstore_response* resps = calloc((size_t)chunks, sizeof *resps);
  TF_Status** statuses = calloc((size_t)chunks, sizeof *statuses);
  if (xs == NULL || resps == NULL || statuses == NULL) {
    plugin_set_oom(status);
    rc = -1;
    goto done;
  }
  for (i = 0; i < chunks; ++i) {
    if ((statuses[i] = TF_NewStatus()) == NULL) break;
  }
  for (made = 0; made < chunks && rc == 0; ++made) {
    int64_t start = (int64_t)made * chunk, len = n - start < chunk ? n - start : chunk;
    char range[64];
    snprintf(range, sizeof range, "bytes=%lld-%lld", (long long)(offset + start),
             (long long)(offset + start + len - 1));
    objstore_exchange_init(&xs[made], &resps[made], "GET", NULL);
    if (store->object_request(ctx, r->path, range, pin(r), &xs[made], status) != 0) {
      rc = -1;
      break;
    }
    xs[made].out = out + start;
    xs[made].out_cap = (size_t)len;
    xs[made].expect = (size_t)len;
    xs[made].range_first = offset + start;
  }
  if (rc == 0) {
    objstore_run_many(e, &r->settings, made, xs, statuses);
    for (i = 0; i < made && rc == 0; ++i) {
      int64_t start = (int64_t)i * chunk, len = n - start < chunk ? n - start : chunk;
      if (TF_GetCode(statuses[i]) != TF_OK) {
        TF_SetStatus(status, TF_GetCode(statuses[i]), TF_Message(statuses[i]));
        rc = -1;
      } else {
        rc = check_length(r, &resps[i], offset + start, len, status);
      }
    }
  }
  for (i = 0; i < made; ++i) store->release_request(ctx, &xs[i]);
done:
  for (i = 0; i < chunks; ++i) {
    if (resps != NULL) objstore_response_free(&resps[i]);
    if (statuses != NULL && statuses[i] != NULL) TF_DeleteStatus(statuses[i]);
  }
  free(xs);
  free(resps);
  free(statuses);
  return rc;
}

/* The part of [offset, offset + n) that src, holding [src_at, src_at +
 * src_len), has from offset on, copied into out; how many bytes. */
static int64_t copy_from(const char* src, int64_t src_at, int64_t src_len, int64_t offset, int64_t n,
                         char* out) {
  int64_t k;
  if (src == NULL || offset < src_at || offset >= src_at + src_len) return 0;
  k = src_at + src_len - offset < n ? src_at + src_len - offset : n;
  memcpy(out, src + (offset - src_at), (size_t)k);
  return k;
}

/* [offset, offset + n) through the block cache: the blocks it has are
 * copied, the runs of those it lacks fetched (one ranged GET each, split
 * at part_size), kept, and copied; `extra` more blocks after the read are
 * fetched with it when they are not kept (read-ahead). */
static int read_blocks(objstore_reader* r, int64_t offset, int64_t n, int64_t extra, char* out,
                       TF_Status* status) {
  objstore_cache* cache = objstore_engine_cache(r->engine);
  const char* etag = pin(r);
  int64_t bs = r->settings.block_size, first = offset / bs, last = (offset + n - 1) / bs;
  int64_t final = (r->size - 1) / bs, b, run_first = -1;
  size_t budget = (size_t)r->settings.block_cache_bytes;
  if (last + extra > final) extra = final - last;
  for (b = first; b <= last + extra + 1; ++b) {
    int hit = 0;
    if (b <= last + extra) {
      int64_t bstart = b * bs, ps = offset > bstart ? offset : bstart;
      int64_t pe = offset + n < bstart + bs ? offset + n : bstart + bs;
      char probe;
      if (b <= last)
        hit = (int64_t)objstore_cache_get_block(cache, r->path, etag, b, (size_t)(ps - bstart),
                                                out + (ps - offset), (size_t)(pe - ps)) == pe - ps;
      else
        hit = objstore_cache_get_block(cache, r->path, etag, b, 0, &probe, 1) == 1;
      if (!hit && run_first < 0) run_first = b;
    }
    if ((hit || b > last + extra) && run_first >= 0) { /* the run [run_first, b) is missing */
      int64_t start = run_first * bs, end = b * bs < r->size ? b * bs : r->size, k;
      char* buf = malloc((size_t)(end - start));
      if (buf == NULL) {
        plugin_set_oom(status);
        return -1;
      }
      if (read_span(r, start, end - start, buf, status) != 0) {
        free(buf);
        return -1;
      }
      if (start < offset + n) { /* not only blocks read ahead: its part of the read */
        int64_t from = offset > start ? offset : start;
        copy_from(buf, start, end - start, from, offset + n - from, out + (from - offset));
      }
      for (k = run_first; k < b; ++k) {
        int64_t ks = k * bs, ke = ks + bs < end ? ks + bs : end;
        objstore_cache_put_block(cache, budget, r->path, etag, k, buf + (ks - start), (size_t)(ke - ks));
      }
      free(buf);
      run_first = -1;
    }
  }
  return 0;
}

int64_t objstore_reader_read(objstore_reader* r, uint64_t offset, size_t n, char* buffer,
                             TF_Status* status) {
  int64_t want, copied = 0, at, rest, window;
  int sequential, rc = 0;
  if ((int64_t)offset >= r->size) {
    TF_SetStatus(status, n == 0 ? TF_OK : TF_OUT_OF_RANGE, n == 0 ? "" : "read past the end of the object");
    return 0;
  }
  want = r->size - (int64_t)offset < (int64_t)n ? r->size - (int64_t)offset : (int64_t)n;
  copied = copy_from(r->head, 0, (int64_t)r->head_len, (int64_t)offset, want, buffer);
  pthread_mutex_lock(&r->lock);
  sequential = (int64_t)offset == r->last_end && r->reading == 0;
  r->reading++;
  r->window = sequential ? (r->window * 2 < MOST_AHEAD ? r->window * 2 : MOST_AHEAD) : r->window;
  window = r->window;
  r->last_end = (int64_t)offset + want;
  if (copied < want)
    copied += copy_from(r->ahead, r->ahead_at, r->ahead_len, (int64_t)offset + copied, want - copied,
                        buffer + copied);
  pthread_mutex_unlock(&r->lock);
  at = (int64_t)offset + copied;
  rest = want - copied;
  if (rest > 0 && r->settings.block_cache_bytes > 0 && pin(r) != NULL &&
      rest <= r->settings.block_cache_bytes / 4) {
    /* through the cache, a sequential read fetching its window's blocks */
    int64_t extra = sequential ? (window - rest) / r->settings.block_size : 0;
    rc = read_blocks(r, at, rest, extra > 0 ? extra : 0, buffer + copied, status);
  } else if (rest > 0 && sequential && rest < window) {
    /* read ahead: the window from here, the rest kept for the next reads */
    int64_t len = r->size - at < window ? r->size - at : window;
    char* got = malloc((size_t)len);
    if (got == NULL) {
      plugin_set_oom(status);
      rc = -1;
    } else if ((rc = read_span(r, at, len, got, status)) == 0) {
      memcpy(buffer + copied, got, (size_t)rest);
      pthread_mutex_lock(&r->lock);
      free(r->ahead);
      r->ahead = got;
      r->ahead_at = at;
      r->ahead_len = len;
      pthread_mutex_unlock(&r->lock);
      got = NULL;
    }
    free(got);
  } else if (rest > 0) {
    rc = read_span(r, at, rest, buffer + copied, status);
  }
  pthread_mutex_lock(&r->lock);
  r->reading--;
  pthread_mutex_unlock(&r->lock);
  if (rc != 0) return -1;
  if (want < (int64_t)n) TF_SetStatus(status, TF_OUT_OF_RANGE, "read past the end of the object");
  else TF_SetStatus(status, TF_OK, "");
  return want;
}

static int64_t file_read(const TF_RandomAccessFile* file, uint64_t offset, size_t n, char* buffer,
                         TF_Status* status) {
  return objstore_reader_read(file->plugin_file, offset, n, buffer, status);
}

static void file_cleanup(TF_RandomAccessFile* file) {
  objstore_reader_free(file->plugin_file);
  file->plugin_file = NULL;
}

const TF_RandomAccessFileOps objstore_file_ops = {.cleanup = file_cleanup, .read = file_read};

/* ---- memory regions: the object downloaded ---------------------------------------------- */

typedef struct region {
  char* data;
  uint64_t length;
} region;

void objstore_map(objstore_reader* r, TF_ReadOnlyMemoryRegion* out, TF_Status* status) {
  const objstore_store* store = objstore_engine_store(r->engine);
  region* m = calloc(1, sizeof *m);
  out->plugin_memory_region = NULL;
  if (r->size == 0) {
    char name[700], msg[800];
    store->name_object(objstore_engine_store_ctx(r->engine), r->path, name, sizeof name);
    snprintf(msg, sizeof msg, "map %s: an empty file has no region", name);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
  } else if (m == NULL || (m->data = malloc((size_t)r->size)) == NULL) {
    plugin_set_oom(status);
  } else if (objstore_reader_read(r, 0, (size_t)r->size, m->data, status) == r->size) {
    m->length = (uint64_t)r->size;
    out->plugin_memory_region = m;
    m = NULL;
  }
  if (m != NULL) free(m->data);
  free(m);
  objstore_reader_free(r);
}

static void region_cleanup(TF_ReadOnlyMemoryRegion* r) {
  region* m = r->plugin_memory_region;
  if (m != NULL) free(m->data);
  free(m);
}

static const void* region_data(const TF_ReadOnlyMemoryRegion* r) {
  return ((region*)r->plugin_memory_region)->data;
}

static uint64_t region_length(const TF_ReadOnlyMemoryRegion* r) {
  return ((region*)r->plugin_memory_region)->length;
}

const TF_ReadOnlyMemoryRegionOps objstore_region_ops = {region_cleanup, region_data, region_length};

/* ---- many whole objects at once ------------------------------------------------------- */

void objstore_read_objects(objstore_engine* e, const objstore_settings* settings,
                           const char* const* paths, int n, char* const* buffers,
                           const size_t* caps, int64_t* sizes, TF_Status** statuses) {
  const objstore_store* store = objstore_engine_store(e);
  void* ctx = objstore_engine_store_ctx(e);
  objstore_exchange* xs = calloc((size_t)(n > 0 ? n : 1), sizeof *xs);
  objstore_response* resps = calloc((size_t)(n > 0 ? n : 1), sizeof *resps);
  TF_Status** sent = calloc((size_t)(n > 0 ? n : 1), sizeof *sent);
  int* path_of = calloc((size_t)(n > 0 ? n : 1), sizeof *path_of);
  int i, k, count = 0;
  if (xs == NULL || resps == NULL || sent == NULL || path_of == NULL) {
    for (i = 0; i < n; ++i) plugin_set_oom(statuses[i]);
    goto done;
  }
  for (i = 0; i < n; ++i) {
    objstore_exchange* x = &xs[count];
    sizes[i] = 0;
    objstore_exchange_init(x, &resps[count], "GET", NULL);
    if (store->object_request(ctx, paths[i], NULL, NULL, x, statuses[i]) != 0) continue;
    x->out = buffers[i];
    x->out_cap = caps[i];
    x->max_body = caps[i] > 0 ? caps[i] : 1; /* 0 would mean no limit */
    sent[count] = statuses[i];
    path_of[count++] = i;
  }
  objstore_run_many(e, settings, count, xs, sent);
  for (k = 0; k < count; ++k) {
    const objstore_response* resp = &resps[k];
    i = path_of[k];
    if (TF_GetCode(statuses[i]) == TF_OK) {
      sizes[i] = (int64_t)resp->out_len;
    } else if (resp->too_long) { /* read another way */
      TF_SetStatus(statuses[i], TF_OK, "");
      sizes[i] = resp->length > (int64_t)caps[i] ? resp->length : (int64_t)caps[i] + 1;
    } else if (explain_missing(e, paths[i], "open", &xs[k], statuses[i]) == 1) {
      sizes[i] = (int64_t)caps[i] + 1; /* created since: read another way */
    }
    store->release_request(ctx, &xs[k]);
  }
done:
  for (k = 0; k < count; ++k) objstore_response_free(&resps[k]);
  free(xs);
  free(resps);
  free(sent);
  free(path_of);
}
