/* What the engine's two files share: a try (one curl handle and what a
 * request's transfer on it holds) and the steps of a try. */
#ifndef ASYNCFS_OBJSTORE_INTERNAL_H_
#define ASYNCFS_OBJSTORE_INTERNAL_H_

#include <curl/curl.h>

#include "objstore.h"

typedef struct objstore_group objstore_group;

/* A curl handle of the engine and the transfer it runs. */
typedef struct objstore_try {
  CURL* easy;
  objstore_exchange* x;
  const objstore_store* store;
  size_t sent;   /* of the body */
  int overflow;  /* more answer than asked for: stopped */
  int error_cut; /* an error answer was cut at its bound: read as far as kept */
  int satisfied; /* a range taken from a whole answer: stopped, not failed */
  uint64_t skipped; /* of such an answer, before the range */
  char detail[CURL_ERROR_SIZE];
  struct objstore_try* next; /* the engine's free list */
} objstore_try;

/* How recent opens of an engine went: whether the next one tries a plain
 * GET (objstore_reader.c). */
typedef struct objstore_opens {
  uint64_t opens;
  uint64_t ranged_until; /* opens before this one ask for a range */
  uint64_t ranged_window;
} objstore_opens;

/* A filesystem's caches of blocks and stats (objstore_cache.c). */
typedef struct objstore_cache objstore_cache;
objstore_cache* objstore_cache_new(void);
void objstore_cache_free(objstore_cache* cache);
/* Copies up to n bytes of the cached block from offset into out; how many
 * (0: not cached). */
size_t objstore_cache_get_block(objstore_cache* cache, const char* path, const char* etag,
                                int64_t block, size_t offset, char* out, size_t n);
/* Keeps a copy of a block, within budget bytes of blocks (the least
 * recently used go first). */
void objstore_cache_put_block(objstore_cache* cache, size_t budget, const char* path,
                              const char* etag, int64_t block, const char* data, size_t len);
int objstore_cache_get_stat(objstore_cache* cache, const char* path, TF_FileStatistics* stats);
void objstore_cache_put_stat(objstore_cache* cache, int64_t ttl_ms, const char* path,
                             const TF_FileStatistics* stats);
void objstore_cache_forget(objstore_cache* cache, const char* path);
void objstore_cache_forget_below(objstore_cache* cache, const char* path);
void objstore_cache_clear(objstore_cache* cache);
objstore_cache* objstore_engine_cache(objstore_engine* engine);

const objstore_store* objstore_engine_store(const objstore_engine* engine);
void* objstore_engine_store_ctx(const objstore_engine* engine);
objstore_opens* objstore_engine_opens(objstore_engine* engine);

/* A fresh response for the next try, and curl's options for it on t. */
void objstore_try_bind(objstore_try* t, objstore_exchange* x);

/* After curl ran a try and said rc (on the engine's thread): 0 when it
 * succeeded, -1 when it failed for good, 1 when another try is due at
 * x->due_ms, 3 when it was redirected (x->max_redirects). */
int objstore_try_finish(void* store_ctx, objstore_try* t, CURLcode rc);

/* Points x at the Location its answer gave (a redirect): 0, or -1 with
 * status set (too many, or not an http(s) URL). */
int objstore_follow(objstore_exchange* x, TF_Status* status);

/* The status of x, which failed for good (on the caller's thread). */
void objstore_set_failure(const objstore_store* store, void* store_ctx,
                          const objstore_exchange* x, TF_Status* status);

#endif /* ASYNCFS_OBJSTORE_INTERNAL_H_ */
