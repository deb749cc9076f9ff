/* A filesystem's two caches (one pair per engine, so per Env for a
 * network store), both off unless their option is set:
 *
 * - blocks of objects read (block_cache_bytes, block_size): keyed by the
 *   object's path, its ETag as its open saw it and the block's number, so
 *   a block of an object replaced since is never served (its next open
 *   sees another ETag); least recently used blocks go first;
 * - what stat found (stat_cache_ms): an entry is answered for that long.
 *
 * A write, delete, rename or copy through the same filesystem forgets the
 * paths it touched (objstore_cache_forget, _forget_below) at once; a change
 * made by anyone else shows in a cached stat after stat_cache_ms at most.
 * Absence is never cached: a file that appears is seen at once. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "objstore_internal.h"

/* Entries at most, stats and blocks together. */
#define MOST_ENTRIES ((size_t)1 << 18)

typedef struct entry {
  char* path;      /* the key: path, and for a block its ETag and number */
  char* etag;      /* NULL for a stat */
  int64_t block;   /* -1 for a stat */
  char* data;      /* a block's bytes */
  size_t len;
  TF_FileStatistics stats; /* a stat's */
  uint64_t expires_ms;     /* a stat's */
  uint64_t hash;
  struct entry* next_in_bucket;
  struct entry* newer; /* the LRU list of blocks, oldest at the head */
  struct entry* older;
} entry;

struct objstore_cache {
  pthread_mutex_t lock;
  entry** buckets;
  size_t nbuckets;
  size_t count;
  size_t block_bytes; /* held in blocks */
  entry* oldest;
  entry* newest;
};

static uint64_t hash_of(const char* path, const char* etag, int64_t block) {
  uint64_t h = 1469598103934665603ULL;
  const char* p;
  for (p = path; *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  if (etag != NULL)
    for (p = etag; *p; ++p) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
  return (h ^ (uint64_t)block) * 1099511628211ULL;
}

objstore_cache* objstore_cache_new(void) {
  objstore_cache* c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
  c->nbuckets = 256;
  c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
  if (c->buckets == NULL) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  return c;
}

static void entry_free(entry* e) {
  free(e->path);
  free(e->etag);
  free(e->data);
  free(e);
}

static void lru_unlink(objstore_cache* c, entry* e) {
  if (e->block < 0) return;
  if (e->older != NULL) e->older->newer = e->newer;
  else c->oldest = e->newer;
  if (e->newer != NULL) e->newer->older = e->older;
  else c->newest = e->older;
  e->newer = e->older = NULL;
}

static void lru_push(objstore_cache* c, entry* e) {
  if (e->block < 0) return;
  e->older = c->newest;
  e->newer = NULL;
  if (c->newest != NULL) c->newest->newer = e;
  else c->oldest = e;
  c->newest = e;
}

/* Unlinks e from its bucket and the LRU list and frees it. */
static void remove_entry(objstore_cache* c, entry* e) {
  entry** at = &c->buckets[e->hash % c->nbuckets];
  while (*at != e) at = &(*at)->next_in_bucket;
  *at = e->next_in_bucket;
  lru_unlink(c, e);
  if (e->block >= 0) c->block_bytes -= e->len;
  c->count--;
  entry_free(e);
}

static entry* find(objstore_cache* c, const char* path, const char* etag, int64_t block) {
  uint64_t h = hash_of(path, etag, block);
  entry* e;
  for (e = c->buckets[h % c->nbuckets]; e != NULL; e = e->next_in_bucket)
    if (e->hash == h && e->block == block && strcmp(e->path, path) == 0 &&
        (etag == NULL ? e->etag == NULL : e->etag != NULL && strcmp(e->etag, etag) == 0))
      return e;
  return NULL;
}

static void grow(objstore_cache* c) {
  size_t i, n = c->nbuckets * 2;
  entry** buckets = calloc(n, sizeof *buckets);
  if (buckets == NULL) return; /* longer chains, still right */
  for (i = 0; i < c->nbuckets; ++i) {
    entry* e = c->buckets[i];
    while (e != NULL) {
      entry* next = e->next_in_bucket;
      e->next_in_bucket = buckets[e->hash % n];
      buckets[e->hash % n] = e;
      e = next;
    }
  }
  free(c->buckets);
  c->buckets = buckets;
  c->nbuckets = n;
}

static entry* insert(objstore_cache* c, const char* path, const char* etag, int64_t block) {
  entry* e = calloc(1, sizeof *e);
  if (e == NULL || (e->path = strdup(path)) == NULL ||
      (etag != NULL && (e->etag = strdup(etag)) == NULL)) {
    if (e != NULL) entry_free(e);
    return NULL;
  }
  e->block = block;
  e->hash = hash_of(path, etag, block);
  if (c->count >= c->nbuckets) grow(c);
  e->next_in_bucket = c->buckets[e->hash % c->nbuckets];
  c->buckets[e->hash % c->nbuckets] = e;
  c->count++;
  return e;
}

void objstore_cache_free(objstore_cache* c) {
  size_t i;
  if (c == NULL) return;
  for (i = 0; i < c->nbuckets; ++i) {
    entry* e = c->buckets[i];
    while (e != NULL) {
      entry* next = e->next_in_bucket;
      entry_free(e);
      e = next;
    }
  }
  free(c->buckets);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* ---- blocks ------------------------------------------------------------------------------ */

size_t objstore_cache_get_block(objstore_cache* c, const char* path, const char* etag, int64_t block,
                                size_t offset, char* out, size_t n) {
  entry* e;
  size_t copied = 0;
  pthread_mutex_lock(&c->lock);
  e = find(c, path, etag, block);
  if (e != NULL && offset < e->len) {
    copied = e->len - offset < n ? e->len - offset : n;
    memcpy(out, e->data + offset, copied);
    lru_unlink(c, e);
    lru_push(c, e);
  }
  pthread_mutex_unlock(&c->lock);
  return copied;
}

void objstore_cache_put_block(objstore_cache* c, size_t budget, const char* path, const char* etag,
                              int64_t block, const char* data, size_t len) {
  entry* e;
  char* copy;
  if (len == 0 || len > budget) return;
  copy = malloc(len);
  if (copy == NULL) return;
  memcpy(copy, data, len);
  pthread_mutex_lock(&c->lock);
  e = find(c, path, etag, block);
  if (e != NULL) remove_entry(c, e); /* the newer bytes stand */
  while (c->oldest != NULL && c->block_bytes + len > budget) remove_entry(c, c->oldest);
  e = insert(c, path, etag, block);
  if (e != NULL) {
    e->data = copy;
    e->len = len;
    c->block_bytes += len;
    lru_push(c, e);
    copy = NULL;
  }
  pthread_mutex_unlock(&c->lock);
  free(copy);
}

/* ---- stats ------------------------------------------------------------------------------- */

int objstore_cache_get_stat(objstore_cache* c, const char* path, TF_FileStatistics* stats) {
  entry* e;
  int found = 0;
  pthread_mutex_lock(&c->lock);
  e = find(c, path, NULL, -1);
  if (e != NULL && e->expires_ms > objstore_now_ms()) {
    *stats = e->stats;
    found = 1;
  } else if (e != NULL) {
    remove_entry(c, e);
  }
  pthread_mutex_unlock(&c->lock);
  return found;
}

void objstore_cache_put_stat(objstore_cache* c, int64_t ttl_ms, const char* path,
                             const TF_FileStatistics* stats) {
  entry* e;
  if (ttl_ms <= 0) return;
  pthread_mutex_lock(&c->lock);
  if (c->count >= MOST_ENTRIES) { /* a walk over millions: the oldest stats are not kept */
    pthread_mutex_unlock(&c->lock);
    return;
  }
  e = find(c, path, NULL, -1);
  if (e == NULL) e = insert(c, path, NULL, -1);
  if (e != NULL) {
    e->stats = *stats;
    e->expires_ms = objstore_now_ms() + (uint64_t)ttl_ms;
  }
  pthread_mutex_unlock(&c->lock);
}

/* ---- forgetting ------------------------------------------------------------------------- */

/* Whether path is prefix itself or below it ("a/b" below "a"). */
static int at_or_below(const char* path, const char* prefix, int below) {
  size_t n = strlen(prefix);
  if (strncmp(path, prefix, n) != 0) return 0;
  if (path[n] == '\0') return 1;
  return below && (path[n] == '/' || (n > 0 && prefix[n - 1] == '/'));
}

static void forget(objstore_cache* c, const char* path, int below) {
  size_t i;
  if (c == NULL) return;
  pthread_mutex_lock(&c->lock);
  for (i = 0; i < c->nbuckets; ++i) {
    entry* e = c->buckets[i];
    while (e != NULL) {
      entry* next = e->next_in_bucket;
      if (at_or_below(e->path, path, below)) remove_entry(c, e);
      e = next;
    }
  }
  pthread_mutex_unlock(&c->lock);
}

void objstore_cache_forget(objstore_cache* c, const char* path) { forget(c, path, 0); }

void objstore_cache_forget_below(objstore_cache* c, const char* path) { forget(c, path, 1); }

void objstore_cache_clear(objstore_cache* c) { forget(c, "", 1); }

/* ---- the engine's face for stores ------------------------------------------------------- */

void objstore_forget(objstore_engine* engine, const char* path) {
  objstore_cache_forget(objstore_engine_cache(engine), path);
}

void objstore_forget_below(objstore_engine* engine, const char* path) {
  objstore_cache_forget_below(objstore_engine_cache(engine), path);
}

int objstore_stat_cached(objstore_engine* engine, const objstore_settings* settings, const char* path,
                         TF_FileStatistics* stats) {
  return settings->stat_cache_ms > 0 &&
         objstore_cache_get_stat(objstore_engine_cache(engine), path, stats);
}

void objstore_stat_remember(objstore_engine* engine, const objstore_settings* settings,
                            const char* path, const TF_FileStatistics* stats) {
  objstore_cache_put_stat(objstore_engine_cache(engine), settings->stat_cache_ms, path, stats);
}
