/*
 * Bearer tokens from OAuth token services (a cloud's token endpoint, a
 * metadata server), for any store: one request through the engine, and
 * a per-filesystem cache that fetches again before a token expires and
 * remembers a failure for a while, so that a chain that found nothing is
 * not asked again by every request.
 */
#ifndef ASYNCFS_OBJSTORE_TOKEN_H_
#define ASYNCFS_OBJSTORE_TOKEN_H_

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>

#include "objstore.h"

/* A token with less life than this is fetched again. */
#define OBJSTORE_TOKEN_REFRESH_S 240
/* A fetch that failed is not tried again for this long. */
#define OBJSTORE_TOKEN_RETRY_AFTER_MS 30000

typedef struct objstore_token {
  char* value;      /* malloc'd */
  int64_t expires;  /* Unix seconds */
  char source[300]; /* where it came from, in words (doctor) */
} objstore_token;

/* The token of one filesystem, for the chain choice named by key (a
 * credentials file's path, say: another key fetches afresh). */
typedef struct objstore_token_cache {
  pthread_mutex_t lock;
  const char* store; /* "az": the store's name, in its log lines */
  char* key;
  objstore_token token;
  TF_Status* failure; /* the last fetch's, OK after a success */
  uint64_t asked_ms;
} objstore_token_cache;

/* A cache of store's (its name, static, in log lines: each fetch says
 * where the token came from, or why none came, to the plugin's log). */
void objstore_token_cache_init(objstore_token_cache* c, const char* store);
void objstore_token_cache_destroy(objstore_token_cache* c);

/* Fills out (source set first, for messages) with a fresh token: 0, or
 * -1 with status set. */
typedef int (*objstore_token_fetch)(void* ctx, objstore_token* out, TF_Status* status);

/* The cached token for key into out (at most cap bytes), fetched when
 * there is none, it is about to expire, or key changed: 0, or -1 with
 * status set (the last failure, within OBJSTORE_TOKEN_RETRY_AFTER_MS of it). */
int objstore_token_get(objstore_token_cache* c, const char* key, objstore_token_fetch fetch,
                       void* ctx, char* out, size_t cap, TF_Status* status);

/* Where the cached token came from, or "none found: " and why. */
void objstore_token_describe(objstore_token_cache* c, char* out, size_t cap);

/* POSTs form (a GET when NULL) to url with headers, through the engine,
 * and takes the token from the answer ({"access_token", "expires_in"}).
 * direct: never through a proxy (link-local metadata services). 0, or -1
 * with status UNAUTHENTICATED naming out->source. */
int objstore_token_ask(objstore_engine* engine, const objstore_settings* settings, const char* url,
                       const char* form, struct curl_slist* headers, int direct,
                       objstore_token* out, TF_Status* status);

/* s as an application/x-www-form-urlencoded value (RFC 3986's
 * unreserved characters kept) appended to out: 0, or -1 (no memory). */
int objstore_form_value(plugin_buf* out, const char* s);

#endif /* ASYNCFS_OBJSTORE_TOKEN_H_ */
