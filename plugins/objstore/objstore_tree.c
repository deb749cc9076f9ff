/* Directories over a flat store (objstore.h, "a namespace of buckets and
 * keys"): what stat, listing, glob, create, delete and rename mean on
 * keys, written once for every store; the store gives request shapes. */
#define _POSIX_C_SOURCE 200809L

#include <fnmatch.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objstore.h"
#include "objstore_internal.h"
#include "plugin_paths.h"

enum { MISSING = 0, FILE_KIND = 1, DIR_KIND = 2 };

/* Requests of a bulk delete in flight at once (each holds a response). */
#define DELETE_ROUND 512

/* ---- listings ---------------------------------------------------------------------- */

int objstore_listing_push(objstore_listing* l, const char* key, size_t n, int64_t size,
                          int64_t mtime_nsec) {
  if (l->keys.count == l->cap) {
    int cap = l->cap ? l->cap * 2 : 64;
    int64_t* sizes = realloc(l->sizes, (size_t)cap * sizeof *sizes);
    int64_t* mtimes;
    if (sizes == NULL) return -1;
    l->sizes = sizes;
    mtimes = realloc(l->mtimes, (size_t)cap * sizeof *mtimes);
    if (mtimes == NULL) return -1;
    l->mtimes = mtimes;
    l->cap = cap;
  }
  if (plugin_strlist_push(&l->keys, key, n) != 0) return -1;
  l->sizes[l->keys.count - 1] = size;
  l->mtimes[l->keys.count - 1] = mtime_nsec;
  return 0;
}

void objstore_listing_free(objstore_listing* l) {
  plugin_strlist_free(&l->keys);
  plugin_strlist_free(&l->prefixes);
  free(l->sizes);
  free(l->mtimes);
  free(l->next_token);
  memset(l, 0, sizeof *l);
}

/* ---- paths and messages ------------------------------------------------------------- */

int objstore_path_parse(const char* scheme, const char* path, objstore_path* out,
                        TF_Status* status) {
  const char* p = path;
  const char* slash;
  while (*p == '/') ++p;
  slash = strchr(p, '/');
  if ((slash != NULL ? (size_t)(slash - p) : strlen(p)) - 1 < 2) { /* 1 or 2 characters */
    char msg[300];
    snprintf(msg, sizeof msg, "%s://%.*s: bucket names have at least 3 characters", scheme,
             (int)(slash != NULL ? slash - p : (long)strlen(p)), p);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
    out->bucket = out->key = NULL;
    return -1;
  }
  out->bucket = slash != NULL ? strndup(p, (size_t)(slash - p)) : strdup(p);
  out->key = strdup(slash != NULL ? slash + 1 : "");
  if (out->bucket == NULL || out->key == NULL) {
    free(out->bucket);
    free(out->key);
    out->bucket = out->key = NULL;
    plugin_set_oom(status);
    return -1;
  }
  return 0;
}

void objstore_path_free(objstore_path* p) {
  free(p->bucket);
  free(p->key);
  p->bucket = p->key = NULL;
}

/* "what scheme://bucket/key: " followed by the formatted rest. */
static void fail(const objstore_tree* t, TF_Status* status, TF_Code code, const char* what,
                 const objstore_path* p, const char* fmt, ...) {
  char rest[400], msg[1400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rest, sizeof rest, fmt, ap);
  va_end(ap);
  snprintf(msg, sizeof msg, "%s %s://%s%s%s: %s", what, t->scheme, p->bucket, *p->key ? "/" : "",
           p->key, rest);
  TF_SetStatus(status, code, msg);
}

static char* with_slash(const char* key) {
  size_t n = strlen(key);
  char* out = malloc(n + 2);
  if (out == NULL) return NULL;
  memcpy(out, key, n);
  out[n] = '/';
  out[n + 1] = '\0';
  return out;
}

/* ---- requests ------------------------------------------------------------------------ */

static void* store_of(const objstore_tree* t) { return objstore_engine_store_ctx(t->engine); }

static void release(const objstore_tree* t, objstore_exchange* x) {
  if (x->store_request != NULL) objstore_engine_store(t->engine)->release_request(store_of(t), x);
}

/* One request of kind; resp keeps the answer (the caller frees it). 0 on
 * 2xx, else -1 with status set (resp->http says how it was answered). */
static int simple(const objstore_tree* t, objstore_tree_request kind, const char* bucket,
                  const char* key, objstore_response* resp, int64_t* size, int64_t* mtime,
                  TF_Status* status) {
  objstore_exchange x;
  int rc;
  objstore_exchange_init(&x, resp, NULL, NULL);
  if (t->hooks->request(store_of(t), t->config, kind, bucket, key, &x, status) != 0) return -1;
  rc = objstore_run(t->engine, t->settings, &x, status);
  if (rc == 0 && size != NULL) t->hooks->stat_answer(store_of(t), &x, size, mtime);
  release(t, &x);
  return rc;
}

static int request(const objstore_tree* t, objstore_tree_request kind, const char* bucket,
                   const char* key, TF_Status* status) {
  objstore_response resp;
  int rc = simple(t, kind, bucket, key, &resp, NULL, NULL, status);
  objstore_response_free(&resp);
  return rc;
}

/* An empty object at key if none is there; ALREADY_EXISTS when the
 * server says one is (412, or 409 from stores that answer a failed
 * create so). */
static int create(const objstore_tree* t, const objstore_path* p, const char* key,
                  TF_Status* status) {
  objstore_response resp;
  int rc = simple(t, OBJSTORE_CREATE, p->bucket, key, &resp, NULL, NULL, status);
  if (rc != 0 && (resp.http == 412 || resp.http == 409))
    fail(t, status, TF_ALREADY_EXISTS, "create", p, "already exists (another writer created it first)");
  objstore_response_free(&resp);
  return rc;
}

/* A listing page's request, handed to the engine (objstore_start). */
typedef struct page_call {
  objstore_exchange x;
  objstore_response resp;
  char* token; /* the token it was asked with (NULL: the first page) */
} page_call;

/* Asks for the page after token (taken: freed with the page): 0, or -1
 * with status set and the page freed. Every page started is waited for
 * (objstore_finish) and freed (page_free, page_drop). */
static int page_start(const objstore_tree* t, const char* bucket, const char* prefix,
                      const char* delimiter, int max, char* token, page_call* p, TF_Status* status) {
  objstore_exchange_init(&p->x, &p->resp, NULL, NULL);
  p->token = token;
  if (t->hooks->list_request(store_of(t), t->config, bucket, prefix, delimiter, max, token, &p->x,
                             status) == 0) {
    if (objstore_start(t->engine, t->settings, &p->x, status) == 0) return 0;
    objstore_finish(t->engine, &p->x, status); /* (once for every start, whatever it returned) */
  }
  release(t, &p->x);
  objstore_response_free(&p->resp);
  free(p->token);
  return -1;
}

static void page_free(const objstore_tree* t, page_call* p) {
  release(t, &p->x);
  objstore_response_free(&p->resp);
  free(p->token);
}

/* Appends what a page, answered (objstore_finish), holds to l, its next
 * token in l->next_token (NULL after the last page): 0, or -1 with status
 * set. A page that names itself as the next one fails (it would be
 * listed for ever). */
static int page_read(const objstore_tree* t, const page_call* p, objstore_listing* l,
                     TF_Status* status) {
  free(l->next_token);
  l->next_token = NULL;
  if (t->hooks->list_answer(store_of(t), &p->x, l, status) != 0) return -1;
  if (l->next_token != NULL && p->token != NULL && strcmp(l->next_token, p->token) == 0) {
    TF_SetStatus(status, TF_DATA_LOSS,
                 "a listing page names as its next page the page it is: the store would be "
                 "listed for ever");
    return -1;
  }
  return 0;
}

/* A started page no longer wanted: waited for, and freed. */
static void page_drop(const objstore_tree* t, page_call* p) {
  TF_Status* ignored = TF_NewStatus();
  objstore_finish(t->engine, &p->x, ignored);
  TF_DeleteStatus(ignored);
  page_free(t, p);
}

static int list_page(const objstore_tree* t, const char* bucket, const char* prefix,
                     const char* delimiter, int max, const char* token, objstore_listing* l,
                     TF_Status* status) {
  page_call p;
  char* own = token != NULL ? strdup(token) : NULL;
  int rc;
  if (token != NULL && own == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  if (page_start(t, bucket, prefix, delimiter, max, own, &p, status) != 0) return -1;
  rc = objstore_finish(t->engine, &p.x, status);
  if (rc == 0) rc = page_read(t, &p, l, status);
  page_free(t, &p);
  return rc;
}

/* Whether the page after p was asked for (into next) before p is read:
 * when the store finds p's next token without reading it (list_token).
 * A guess that fails to start is only a page asked for later. */
static int ask_ahead(const objstore_tree* t, const char* bucket, const char* prefix,
                     const char* delimiter, int max, const page_call* p, page_call* next) {
  char* guess = t->hooks->list_token(store_of(t), &p->x);
  TF_Status* aside;
  int asked;
  if (guess == NULL) return 0;
  if (p->token != NULL && strcmp(guess, p->token) == 0) { /* (page_read refuses it) */
    free(guess);
    return 0;
  }
  aside = TF_NewStatus();
  asked = page_start(t, bucket, prefix, delimiter, max, guess, next, aside) == 0;
  TF_DeleteStatus(aside);
  return asked;
}

/* Every key (and common prefix, with a delimiter) under prefix, all pages.
 * Where the store can say a page's next token before the page is read,
 * the next page is asked for first, so that the server makes it while
 * this thread reads this one; if reading names another token (or none),
 * that request is dropped. */
static int list_all(const objstore_tree* t, const char* bucket, const char* prefix,
                    const char* delimiter, objstore_listing* l, TF_Status* status) {
  int max = t->hooks->page_size > 0 ? t->hooks->page_size : 1000;
  page_call pages[2];
  page_call *p = &pages[0], *next = &pages[1], *swap;
  if (page_start(t, bucket, prefix, delimiter, max, NULL, p, status) != 0) return -1;
  for (;;) {
    int asked = 0, rc = objstore_finish(t->engine, &p->x, status);
    if (rc == 0 && t->hooks->list_token != NULL)
      asked = ask_ahead(t, bucket, prefix, delimiter, max, p, next);
    if (rc == 0) rc = page_read(t, p, l, status);
    page_free(t, p);
    if (asked && (rc != 0 || l->next_token == NULL || strcmp(l->next_token, next->token) != 0)) {
      page_drop(t, next); /* a wrong guess */
      asked = 0;
    }
    if (rc != 0) return -1;
    if (l->next_token == NULL) return 0;
    if (!asked) {
      char* token = strdup(l->next_token);
      if (token == NULL) {
        plugin_set_oom(status);
        return -1;
      }
      if (page_start(t, bucket, prefix, delimiter, max, token, next, status) != 0) return -1;
    }
    swap = p;
    p = next;
    next = swap;
  }
}

/* What is at p: MISSING, FILE_KIND or DIR_KIND (status OK), or -1 with
 * status set. A directory made by create_dir has its marker's mtime (the
 * marker sorts first under its prefix); one made by the keys below it, 0. */
static int probe(const objstore_tree* t, const objstore_path* p, int64_t* size, int64_t* mtime,
                 TF_Status* status) {
  objstore_response resp;
  objstore_listing l;
  char* prefix;
  int rc;
  *size = 0;
  *mtime = 0;
  if (*p->bucket == '\0') {
    TF_SetStatus(status, TF_OK, "");
    return DIR_KIND; /* the root: the buckets */
  }
  rc = simple(t, OBJSTORE_STAT, p->bucket, p->key, &resp, *p->key ? size : NULL, mtime, status);
  objstore_response_free(&resp);
  if (rc == 0) return *p->key ? FILE_KIND : DIR_KIND;
  if (resp.http != 404) return -1;
  TF_SetStatus(status, TF_OK, "");
  if (*p->key == '\0') return MISSING;
  if ((prefix = with_slash(p->key)) == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  memset(&l, 0, sizeof l);
  rc = list_page(t, p->bucket, prefix, "/", 1, NULL, &l, status);
  if (rc == 0) {
    rc = l.keys.count + l.prefixes.count > 0 ? DIR_KIND : MISSING;
    if (l.keys.count > 0 && strcmp(l.keys.items[0], prefix) == 0) *mtime = l.mtimes[0];
  } else if (TF_GetCode(status) == TF_NOT_FOUND) { /* no such bucket */
    TF_SetStatus(status, TF_OK, "");
    rc = MISSING;
  }
  objstore_listing_free(&l);
  free(prefix);
  return rc;
}

/* The status of a path found missing: NOT_FOUND, or FAILED_PRECONDITION
 * when its parent is a file ("file/x": a store would hold both keys, but
 * a file has no children). */
static void set_missing(const objstore_tree* t, const objstore_path* p, const char* what,
                        TF_Status* status) {
  char* slash = strrchr(p->key, '/');
  if (slash != NULL) {
    objstore_response resp;
    TF_Status* ignored = TF_NewStatus();
    int parent_is_file;
    *slash = '\0';
    parent_is_file = simple(t, OBJSTORE_STAT, p->bucket, p->key, &resp, NULL, NULL, ignored) == 0;
    objstore_response_free(&resp);
    TF_DeleteStatus(ignored);
    if (parent_is_file) {
      char parent[1100];
      snprintf(parent, sizeof parent, "%s://%s/%s is a file, not a directory", t->scheme,
               p->bucket, p->key);
      *slash = '/';
      fail(t, status, TF_FAILED_PRECONDITION, what, p, "%s", parent);
      return;
    }
    *slash = '/';
  }
  fail(t, status, TF_NOT_FOUND, what, p, "no such file or directory");
}

/* ---- queries ----------------------------------------------------------------------- */

void objstore_tree_stat(const objstore_tree* t, const char* path, TF_FileStatistics* stats,
                        TF_Status* status) {
  objstore_path p;
  int64_t size, mtime;
  int kind;
  if (objstore_stat_cached(t->engine, t->settings, path, stats)) {
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  if (objstore_path_parse(t->scheme, path, &p, status) != 0) return;
  kind = probe(t, &p, &size, &mtime, status);
  if (kind == MISSING) set_missing(t, &p, "stat", status);
  if (kind > 0) {
    stats->length = kind == FILE_KIND ? size : 0;
    stats->mtime_nsec = mtime;
    stats->is_directory = kind == DIR_KIND;
    objstore_stat_remember(t->engine, t->settings, path, stats);
  }
  objstore_path_free(&p);
}

/* ---- many stats at once ------------------------------------------------------------- */

/* n requests, made by make(ctx, j, x, status) into xs, all in flight at
 * once; statuses[j] each one's outcome. 0, or -1 when out of memory. */
typedef int (*make_fn)(const objstore_tree* t, void* ctx, int j, objstore_exchange* x, TF_Status* status);

typedef struct round {
  int n;
  objstore_exchange* xs;
  objstore_response* resps;
  TF_Status** statuses;
} round;

static int round_run(const objstore_tree* t, round* r, int n, make_fn make, void* ctx) {
  int j, made;
  memset(r, 0, sizeof *r);
  r->n = n;
  if (n == 0) return 0;
  r->xs = calloc((size_t)n, sizeof *r->xs);
  r->resps = calloc((size_t)n, sizeof *r->resps);
  r->statuses = calloc((size_t)n, sizeof *r->statuses);
  if (r->xs == NULL || r->resps == NULL || r->statuses == NULL) return -1;
  for (j = 0; j < n; ++j)
    if ((r->statuses[j] = TF_NewStatus()) == NULL) return -1;
  for (made = 0; made < n; ++made) {
    objstore_exchange_init(&r->xs[made], &r->resps[made], NULL, NULL);
    if (make(t, ctx, made, &r->xs[made], r->statuses[made]) != 0) break;
  }
  if (made < n) {
    for (j = 0; j < made; ++j) release(t, &r->xs[j]);
    return -1;
  }
  objstore_run_many(t->engine, t->settings, n, r->xs, r->statuses);
  return 0;
}

static void round_free(const objstore_tree* t, round* r) {
  int j;
  for (j = 0; j < r->n; ++j) {
    if (r->xs != NULL && r->xs[j].store_request != NULL) release(t, &r->xs[j]);
    if (r->resps != NULL) objstore_response_free(&r->resps[j]);
    if (r->statuses != NULL && r->statuses[j] != NULL) TF_DeleteStatus(r->statuses[j]);
  }
  free(r->xs);
  free(r->resps);
  free(r->statuses);
  memset(r, 0, sizeof *r);
}

typedef struct stat_batch {
  objstore_path* paths;
  int* which;      /* the paths of the round, by index into paths */
  char** prefixes; /* round 2's, by the index into which */
  char* settled;   /* by path */
} stat_batch;

static int make_stat(const objstore_tree* t, void* ctx, int j, objstore_exchange* x, TF_Status* status) {
  stat_batch* b = ctx;
  const objstore_path* p = &b->paths[b->which[j]];
  return t->hooks->request(store_of(t), t->config, OBJSTORE_STAT, p->bucket, p->key, x, status);
}

static int make_list(const objstore_tree* t, void* ctx, int j, objstore_exchange* x, TF_Status* status) {
  stat_batch* b = ctx;
  const objstore_path* p = &b->paths[b->which[j]];
  if ((b->prefixes[j] = with_slash(p->key)) == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  return t->hooks->list_request(store_of(t), t->config, p->bucket, b->prefixes[j], "/", 1, NULL, x, status);
}

static int make_parent_stat(const objstore_tree* t, void* ctx, int j, objstore_exchange* x, TF_Status* status) {
  stat_batch* b = ctx;
  const objstore_path* p = &b->paths[b->which[j]];
  char* slash = strrchr(p->key, '/');
  int rc;
  *slash = '\0';
  rc = t->hooks->request(store_of(t), t->config, OBJSTORE_STAT, p->bucket, p->key, x, status);
  *slash = '/';
  return rc;
}

/* Path i's stat is settled: status and stats final. */
static void settle(stat_batch* b, int i) { b->settled[i] = 1; }

void objstore_tree_stat_files(const objstore_tree* t, const char* const* paths, int n,
                              TF_FileStatistics* stats, TF_Status** statuses) {
  const size_t size = (size_t)(n > 0 ? n : 1);
  stat_batch b = {calloc(size, sizeof *b.paths), calloc(size, sizeof *b.which),
                  calloc(size, sizeof *b.prefixes), calloc(size, 1)};
  round r;
  int i, j, k, m;
  memset(&r, 0, sizeof r);
  if (b.paths == NULL || b.which == NULL || b.prefixes == NULL || b.settled == NULL) goto one_by_one;
  /* 1. A STAT of every object not known already, all at once. */
  for (i = 0, k = 0; i < n; ++i) {
    memset(&stats[i], 0, sizeof stats[i]);
    TF_SetStatus(statuses[i], TF_OK, "");
    if (objstore_stat_cached(t->engine, t->settings, paths[i], &stats[i]) ||
        objstore_path_parse(t->scheme, paths[i], &b.paths[i], statuses[i]) != 0) {
      settle(&b, i);
    } else if (*b.paths[i].key == '\0') { /* a bucket, or the root */
      objstore_tree_stat(t, paths[i], &stats[i], statuses[i]);
      settle(&b, i);
    } else {
      b.which[k++] = i;
    }
  }
  if (round_run(t, &r, k, make_stat, &b) != 0) goto one_by_one;
  for (j = 0, m = 0; j < k; ++j) {
    i = b.which[j];
    if (TF_GetCode(r.statuses[j]) == TF_OK) {
      t->hooks->stat_answer(store_of(t), &r.xs[j], &stats[i].length, &stats[i].mtime_nsec);
      objstore_stat_remember(t->engine, t->settings, paths[i], &stats[i]);
      settle(&b, i);
    } else if (r.resps[j].http == 404) {
      b.which[m++] = i; /* 2. below */
    } else {
      TF_SetStatus(statuses[i], TF_GetCode(r.statuses[j]), TF_Message(r.statuses[j]));
      settle(&b, i);
    }
  }
  round_free(t, &r);
  /* 2. What no STAT found: a directory when a one-key listing under
   * key + "/" finds anything. */
  if (round_run(t, &r, m, make_list, &b) != 0) goto one_by_one;
  for (j = 0, k = 0; j < m; ++j) {
    objstore_listing l;
    i = b.which[j];
    memset(&l, 0, sizeof l);
    if (TF_GetCode(r.statuses[j]) == TF_OK &&
        t->hooks->list_answer(store_of(t), &r.xs[j], &l, r.statuses[j]) == 0) {
      if (l.keys.count + l.prefixes.count > 0) {
        stats[i].is_directory = true;
        if (l.keys.count > 0 && strcmp(l.keys.items[0], b.prefixes[j]) == 0) stats[i].mtime_nsec = l.mtimes[0];
        objstore_stat_remember(t->engine, t->settings, paths[i], &stats[i]);
        settle(&b, i);
      } else {
        b.which[k++] = i; /* 3. below */
      }
    } else if (TF_GetCode(r.statuses[j]) == TF_NOT_FOUND) { /* no such bucket */
      b.which[k++] = i;
    } else {
      TF_SetStatus(statuses[i], TF_GetCode(r.statuses[j]), TF_Message(r.statuses[j]));
      settle(&b, i);
    }
    objstore_listing_free(&l);
  }
  round_free(t, &r);
  /* 3. Missing: worded as stat words it, after one STAT of the parent of
   * each nested one (a file has no children). */
  for (j = 0, m = 0; j < k; ++j) {
    i = b.which[j];
    if (strchr(b.paths[i].key, '/') != NULL) {
      b.which[m++] = i;
    } else {
      fail(t, statuses[i], TF_NOT_FOUND, "stat", &b.paths[i], "no such file or directory");
      settle(&b, i);
    }
  }
  if (round_run(t, &r, m, make_parent_stat, &b) != 0) goto one_by_one;
  for (j = 0; j < m; ++j) {
    objstore_path* p = &b.paths[b.which[j]];
    if (TF_GetCode(r.statuses[j]) == TF_OK) {
      char* slash = strrchr(p->key, '/');
      char parent[1100];
      *slash = '\0';
      snprintf(parent, sizeof parent, "%s://%s/%s is a file, not a directory", t->scheme, p->bucket, p->key);
      *slash = '/';
      fail(t, statuses[b.which[j]], TF_FAILED_PRECONDITION, "stat", p, "%s", parent);
    } else {
      fail(t, statuses[b.which[j]], TF_NOT_FOUND, "stat", p, "no such file or directory");
    }
    settle(&b, b.which[j]);
  }
one_by_one: /* what a round could not take (out of memory), one at a time */
  round_free(t, &r);
  for (i = 0; i < n; ++i)
    if (b.settled == NULL || !b.settled[i]) objstore_tree_stat(t, paths[i], &stats[i], statuses[i]);
  for (i = 0; b.paths != NULL && i < n; ++i) objstore_path_free(&b.paths[i]);
  for (i = 0; b.prefixes != NULL && i < n; ++i) free(b.prefixes[i]);
  free(b.paths);
  free(b.which);
  free(b.prefixes);
  free(b.settled);
}

bool objstore_tree_paths_exist(const objstore_tree* t, char** paths, int n, TF_Status** statuses) {
  const size_t size = n > 0 ? (size_t)n : 1;
  TF_FileStatistics* stats = calloc(size, sizeof *stats);
  TF_Status** own = statuses != NULL ? statuses : calloc(size, sizeof *own);
  bool all = stats != NULL && own != NULL;
  int i;
  for (i = 0; all && statuses == NULL && i < n; ++i)
    if ((own[i] = TF_NewStatus()) == NULL) all = false;
  if (all) {
    objstore_tree_stat_files(t, (const char* const*)paths, n, stats, own);
    for (i = 0; i < n; ++i)
      if (TF_GetCode(own[i]) != TF_OK) all = false;
  } else if (statuses != NULL) {
    for (i = 0; i < n; ++i) plugin_set_oom(statuses[i]);
  }
  if (statuses == NULL && own != NULL) {
    for (i = 0; i < n; ++i)
      if (own[i] != NULL) TF_DeleteStatus(own[i]);
    free(own);
  }
  free(stats);
  return all;
}

/* Whether a listed name can be addressed by a path: not "" or ".", which
 * path cleaning folds away. Keys with such segments, written by other
 * clients, are left out of listings and globs. */
static int addressable_name(const char* name, size_t n) {
  return n > 0 && !(n == 1 && name[0] == '.');
}

static int addressable_key(const char* key) {
  for (;;) {
    size_t n = strcspn(key, "/");
    if (!addressable_name(key, n)) return 0;
    if (key[n] == '\0') return 1;
    key += n + 1;
  }
}

int objstore_tree_list(const objstore_tree* t, const char* path, plugin_listing* out,
                       TF_Status* status) {
  objstore_path p = {NULL, NULL};
  objstore_listing l;
  char* prefix = NULL;
  size_t plen;
  int i, result = -1, marker = 0;
  TF_FileStatistics st;
  memset(&l, 0, sizeof l);
  if (objstore_path_parse(t->scheme, path, &p, status) != 0) return -1;
  if (*p.bucket == '\0') {
    if (list_all(t, "", "", NULL, &l, status) != 0) goto done;
    for (i = 0; i < l.keys.count; ++i) {
      st.length = 0;
      st.mtime_nsec = l.mtimes[i];
      st.is_directory = true;
      if (plugin_listing_push(out, l.keys.items[i], strlen(l.keys.items[i]), &st) != 0) goto oom;
    }
    result = 0;
    goto done;
  }
  prefix = *p.key != '\0' ? with_slash(p.key) : strdup("");
  if (prefix == NULL) goto oom;
  plen = strlen(prefix);
  if (list_all(t, p.bucket, prefix, "/", &l, status) != 0) goto done;
  for (i = 0; i < l.keys.count; ++i) {
    const char* name = l.keys.items[i] + plen;
    if (*name == '\0') {
      marker = 1; /* the directory's own marker */
      continue;
    }
    if (!addressable_name(name, strlen(name))) continue;
    st.length = l.sizes[i];
    st.mtime_nsec = l.mtimes[i];
    st.is_directory = false;
    if (plugin_listing_push(out, name, strlen(name), &st) != 0) goto oom;
  }
  for (i = 0; i < l.prefixes.count; ++i) {
    const char* name = l.prefixes.items[i] + plen;
    size_t n = strlen(name);
    if (n > 0 && name[n - 1] == '/') --n;
    st.length = 0;
    st.mtime_nsec = 0;
    st.is_directory = true;
    if (addressable_name(name, n) && plugin_listing_push(out, name, n, &st) != 0) goto oom;
  }
  if (out->names.count == 0 && !marker) {
    /* Nothing under the prefix: a bucket, a file, or nothing at all. */
    int64_t size, mtime;
    int kind = probe(t, &p, &size, &mtime, status);
    if (kind == MISSING) set_missing(t, &p, "list", status);
    if (kind == FILE_KIND) fail(t, status, TF_FAILED_PRECONDITION, "list", &p, "a file, not a directory");
    if (kind != DIR_KIND) goto done;
  }
  TF_SetStatus(status, TF_OK, "");
  result = 0;
  goto done;
oom:
  plugin_set_oom(status);
done:
  objstore_listing_free(&l);
  free(prefix);
  objstore_path_free(&p);
  return result;
}

/* ---- glob: one listing of the longest literal prefix -------------------------------- */

/* The length of key's first `components` components ("a/b/c", 2: 3), or
 * 0 when it has fewer (a trailing "/", a marker, ends in an empty one). */
static size_t leading_components(const char* key, int components) {
  size_t i = 0;
  int seen = 1;
  if (*key == '\0') return 0;
  for (; key[i] != '\0'; ++i) {
    if (key[i] == '/') {
      if (seen == components) return i;
      ++seen;
    }
  }
  return seen == components && key[i - 1] != '/' ? i : 0;
}

static int count_components(const char* s) {
  int n = *s != '\0';
  for (; *s; ++s)
    if (*s == '/' && s[1] != '\0') ++n;
  return n;
}

/* The keys of bucket (and their ancestors) at the pattern's depth that
 * match it, as "bucket/key", appended to out. */
static int glob_bucket(const objstore_tree* t, const char* bucket, const char* key_pattern,
                       plugin_strlist* out, TF_Status* status) {
  objstore_listing l;
  size_t literal = strcspn(key_pattern, "*?[\\");
  int components = count_components(key_pattern);
  char* prefix = strndup(key_pattern, literal);
  plugin_buf full = {0};
  char* last = NULL;
  int i, rc = -1;
  memset(&l, 0, sizeof l);
  if (prefix == NULL) goto oom;
  if (list_all(t, bucket, prefix, NULL, &l, status) != 0) {
    if (TF_GetCode(status) == TF_NOT_FOUND) rc = 0; /* a missing bucket matches nothing */
    goto done;
  }
  for (i = 0; i < l.keys.count; ++i) {
    /* The key, or its ancestor at the pattern's depth (a directory). */
    size_t n = leading_components(l.keys.items[i], components);
    if (n == 0) continue;
    full.len = 0;
    if (plugin_buf_append(&full, bucket, strlen(bucket)) != 0 || plugin_buf_append(&full, "/", 1) != 0 ||
        plugin_buf_append(&full, l.keys.items[i], n) != 0)
      goto oom;
    {
      const char* candidate = full.data + strlen(bucket) + 1;
      if (!addressable_key(candidate)) continue;
      if (last != NULL && strcmp(last, full.data) == 0) continue;
      if (fnmatch(key_pattern, candidate, FNM_PATHNAME) != 0) continue;
    }
    free(last);
    if ((last = strdup(full.data)) == NULL || plugin_strlist_push(out, full.data, full.len) != 0)
      goto oom;
  }
  rc = 0;
  goto done;
oom:
  plugin_set_oom(status);
done:
  plugin_buf_free(&full);
  free(last);
  free(prefix);
  objstore_listing_free(&l);
  return rc;
}

int objstore_tree_glob(const objstore_tree* t, const char* uri_pattern, char*** entries,
                       TF_Status* status) {
  plugin_strlist out = {NULL, 0, 0};
  size_t scheme_len = plugin_scheme_prefix_len(uri_pattern);
  char* pattern = plugin_translate_name(uri_pattern, PLUGIN_NAMES_KEYS);
  objstore_path p = {NULL, NULL};
  objstore_listing buckets;
  int i, count = -1;
  memset(&buckets, 0, sizeof buckets);
  *entries = NULL;
  if (pattern == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  if (objstore_path_parse(t->scheme, pattern, &p, status) != 0) goto done;
  if (*p.key == '\0' || plugin_has_glob_meta(p.bucket, strlen(p.bucket))) {
    /* The pattern's bucket is matched against the bucket list. */
    if (*p.bucket != '\0' && list_all(t, "", "", NULL, &buckets, status) != 0) goto done;
    for (i = 0; i < buckets.keys.count; ++i) {
      const char* name = buckets.keys.items[i];
      if (fnmatch(p.bucket, name, FNM_PATHNAME) != 0) continue;
      if (*p.key == '\0' ? plugin_strlist_push(&out, name, strlen(name)) != 0
                         : glob_bucket(t, name, p.key, &out, status) != 0) {
        if (*p.key == '\0') plugin_set_oom(status);
        goto done;
      }
    }
  } else if (glob_bucket(t, p.bucket, p.key, &out, status) != 0) {
    goto done;
  }
  /* Matches go back as the pattern was given: gs://bucket/key or /bucket/key. */
  if (plugin_strlist_prefix(&out, scheme_len > 0 ? uri_pattern : "/", scheme_len > 0 ? scheme_len : 1) != 0) {
    plugin_set_oom(status);
    goto done;
  }
  plugin_strlist_sort(&out);
  count = plugin_strlist_release(&out, entries);
  TF_SetStatus(status, TF_OK, "");
done:
  plugin_strlist_free(&out);
  objstore_listing_free(&buckets);
  objstore_path_free(&p);
  plugin_memory_free(pattern);
  return count;
}

/* ---- namespace changes ---------------------------------------------------------------- */

void objstore_tree_create_dir(const objstore_tree* t, const char* path, TF_Status* status) {
  objstore_path p, parent;
  int64_t size, mtime;
  int kind;
  char* slash;
  char* marker;
  if (objstore_path_parse(t->scheme, path, &p, status) != 0) return;
  kind = probe(t, &p, &size, &mtime, status);
  if (kind < 0) goto done;
  if (kind != MISSING) {
    fail(t, status, TF_ALREADY_EXISTS, "create_dir", &p, "already exists");
    goto done;
  }
  if (*p.key == '\0') { /* a bucket */
    create(t, &p, "", status);
    goto done;
  }
  /* The parent must be a directory (or the bucket). */
  slash = strrchr(p.key, '/');
  parent.bucket = p.bucket;
  parent.key = slash != NULL ? p.key : "";
  if (slash != NULL) *slash = '\0';
  kind = probe(t, &parent, &size, &mtime, status);
  if (slash != NULL) *slash = '/';
  if (kind == MISSING) {
    fail(t, status, TF_NOT_FOUND, "create_dir", &p, "the parent does not exist");
  } else if (kind == FILE_KIND) {
    fail(t, status, TF_FAILED_PRECONDITION, "create_dir", &p, "the parent is a file");
  } else if (kind == DIR_KIND) {
    /* Conditional, so that create_dir is "create if absent" on the
     * server: what the generic transactions' lock relies on. */
    if ((marker = with_slash(p.key)) == NULL) plugin_set_oom(status);
    else create(t, &p, marker, status);
    free(marker);
  }
done:
  objstore_forget(t->engine, path);
  objstore_path_free(&p);
}

void objstore_tree_recursively_create_dir(const objstore_tree* t, const char* path,
                                          TF_Status* status) {
  objstore_path p;
  char* marker = NULL;
  size_t i, n;
  int64_t size, mtime;
  if (objstore_path_parse(t->scheme, path, &p, status) != 0) return;
  if (*p.bucket == '\0') {
    TF_SetStatus(status, TF_OK, "");
    goto done;
  }
  {
    /* The bucket first. */
    objstore_path bucket = {p.bucket, ""};
    int kind = probe(t, &bucket, &size, &mtime, status);
    if (kind < 0) goto done;
    if (kind == MISSING && create(t, &bucket, "", status) != 0 && TF_GetCode(status) != TF_ALREADY_EXISTS)
      goto done;
  }
  /* No component may be a file; then a marker for each, so that every
   * level outlives the removal of its children. */
  n = strlen(p.key);
  for (i = 1; i <= n; ++i) {
    objstore_response resp;
    char saved;
    int rc;
    if (i < n && p.key[i] != '/') continue;
    saved = p.key[i];
    p.key[i] = '\0';
    rc = simple(t, OBJSTORE_STAT, p.bucket, p.key, &resp, NULL, NULL, status);
    p.key[i] = saved;
    objstore_response_free(&resp);
    if (rc == 0) {
      fail(t, status, TF_FAILED_PRECONDITION, "recursively_create_dir", &p,
           "a file is in the way, not a directory");
      goto done;
    }
    if (resp.http != 404) goto done;
  }
  if ((marker = malloc(n + 2)) == NULL) {
    plugin_set_oom(status);
    goto done;
  }
  for (i = 1; i <= n; ++i) {
    if (i < n && p.key[i] != '/') continue;
    memcpy(marker, p.key, i);
    marker[i] = '/';
    marker[i + 1] = '\0';
    if (create(t, &p, marker, status) != 0 && TF_GetCode(status) != TF_ALREADY_EXISTS) goto done;
  }
  TF_SetStatus(status, TF_OK, "");
done:
  objstore_forget(t->engine, path);
  free(marker);
  objstore_path_free(&p);
}

void objstore_tree_delete_file(const objstore_tree* t, const char* path, TF_Status* status) {
  objstore_path p;
  int64_t size, mtime;
  int kind;
  if (objstore_path_parse(t->scheme, path, &p, status) != 0) return;
  kind = probe(t, &p, &size, &mtime, status);
  if (kind == MISSING) set_missing(t, &p, "delete_file", status);
  else if (kind == DIR_KIND) fail(t, status, TF_FAILED_PRECONDITION, "delete_file", &p, "a directory");
  else if (kind == FILE_KIND) request(t, OBJSTORE_DELETE, p.bucket, p.key, status);
  objstore_forget(t->engine, path);
  objstore_path_free(&p);
}

void objstore_tree_delete_dir(const objstore_tree* t, const char* path, TF_Status* status) {
  objstore_path p;
  objstore_listing l;
  char* prefix = NULL;
  int64_t size, mtime;
  memset(&l, 0, sizeof l);
  if (objstore_path_parse(t->scheme, path, &p, status) != 0) return;
  if (*p.key == '\0') {
    if (*p.bucket == '\0') fail(t, status, TF_FAILED_PRECONDITION, "delete_dir", &p, "the root stays");
    else request(t, OBJSTORE_DELETE, p.bucket, "", status);
    goto done;
  }
  if ((prefix = with_slash(p.key)) == NULL) {
    plugin_set_oom(status);
    goto done;
  }
  if (list_page(t, p.bucket, prefix, "/", 2, NULL, &l, status) != 0) goto done;
  if (l.keys.count + l.prefixes.count == 0) {
    int kind = probe(t, &p, &size, &mtime, status);
    if (kind == FILE_KIND) fail(t, status, TF_FAILED_PRECONDITION, "delete_dir", &p, "a file");
    else if (kind == MISSING) set_missing(t, &p, "delete_dir", status);
  } else if (l.keys.count + l.prefixes.count > 1 || l.prefixes.count > 0 ||
             strcmp(l.keys.items[0], prefix) != 0) {
    fail(t, status, TF_FAILED_PRECONDITION, "delete_dir", &p, "not empty");
  } else {
    request(t, OBJSTORE_DELETE, p.bucket, prefix, status);
  }
done:
  objstore_forget(t->engine, path);
  free(prefix);
  objstore_listing_free(&l);
  objstore_path_free(&p);
}

/* Deletes the count keys of bucket, a round of DELETE_ROUND requests in
 * flight at a time from this thread; a key already gone counts as
 * deleted. The number not deleted; the first failure in status. (A store
 * that deletes many keys in one request has hooks->delete_keys.) */
static int delete_keys(const objstore_tree* t, const char* bucket, char** keys, int count,
                       TF_Status* status) {
  objstore_exchange* xs = calloc(DELETE_ROUND, sizeof *xs);
  objstore_response* resps = calloc(DELETE_ROUND, sizeof *resps);
  TF_Status** statuses = calloc(DELETE_ROUND, sizeof *statuses);
  int first, i, failed = 0, recorded = 0;
  if (xs == NULL || resps == NULL || statuses == NULL) {
    plugin_set_oom(status);
    failed = count;
    goto done;
  }
  for (i = 0; i < DELETE_ROUND; ++i)
    if ((statuses[i] = TF_NewStatus()) == NULL) {
      plugin_set_oom(status);
      failed = count;
      goto done;
    }
  for (first = 0; first < count; first += DELETE_ROUND) {
    int m = count - first < DELETE_ROUND ? count - first : DELETE_ROUND, made = 0;
    for (i = 0; i < m; ++i, ++made) {
      objstore_exchange_init(&xs[i], &resps[i], NULL, NULL);
      if (t->hooks->request(store_of(t), t->config, OBJSTORE_DELETE, bucket, keys[first + i], &xs[i],
                            statuses[i]) != 0)
        break;
    }
    if (made == m) objstore_run_many(t->engine, t->settings, m, xs, statuses);
    for (i = 0; i < m; ++i) {
      int gone = i < made && (TF_GetCode(statuses[i]) == TF_OK || resps[i].http == 404);
      if (i >= made) plugin_set_oom(statuses[i]);
      if (!gone) {
        ++failed;
        if (!recorded++) TF_SetStatus(status, TF_GetCode(statuses[i]), TF_Message(statuses[i]));
      }
      if (i < made) release(t, &xs[i]);
      objstore_response_free(&resps[i]);
    }
  }
done:
  for (i = 0; statuses != NULL && i < DELETE_ROUND; ++i)
    if (statuses[i] != NULL) TF_DeleteStatus(statuses[i]);
  free(statuses);
  free(resps);
  free(xs);
  return failed;
}

void objstore_tree_delete_recursively(const objstore_tree* t, const char* path,
                                      uint64_t* undeleted_files, uint64_t* undeleted_dirs,
                                      TF_Status* status) {
  objstore_path p;
  objstore_listing l;
  char* prefix = NULL;
  int64_t size, mtime;
  int kind, failed;
  memset(&l, 0, sizeof l);
  *undeleted_files = 0;
  *undeleted_dirs = 0;
  if (objstore_path_parse(t->scheme, path, &p, status) != 0) return;
  kind = probe(t, &p, &size, &mtime, status);
  if (kind < 0) goto done;
  if (kind == MISSING) {
    *undeleted_dirs = 1;
    set_missing(t, &p, "delete_recursively", status);
    goto done;
  }
  if (kind == FILE_KIND) {
    if (request(t, OBJSTORE_DELETE, p.bucket, p.key, status) != 0) *undeleted_files = 1;
    goto done;
  }
  if (*p.bucket == '\0') {
    fail(t, status, TF_FAILED_PRECONDITION, "delete_recursively", &p, "will not delete every bucket");
    goto done;
  }
  prefix = *p.key != '\0' ? with_slash(p.key) : strdup("");
  if (prefix == NULL || list_all(t, p.bucket, prefix, NULL, &l, status) != 0) {
    if (prefix == NULL) plugin_set_oom(status);
    *undeleted_dirs = 1;
    goto done;
  }
  TF_SetStatus(status, TF_OK, "");
  failed = t->hooks->delete_keys != NULL
               ? t->hooks->delete_keys(store_of(t), t->config, p.bucket, l.keys.items, l.keys.count, status)
               : delete_keys(t, p.bucket, l.keys.items, l.keys.count, status);
  *undeleted_files = (uint64_t)failed;
  if (failed > 0) {
    *undeleted_dirs = 1;
    goto done;
  }
  if (*p.key == '\0' && request(t, OBJSTORE_DELETE, p.bucket, "", status) != 0) *undeleted_dirs = 1;
done:
  objstore_forget_below(t->engine, path);
  free(prefix);
  objstore_listing_free(&l);
  objstore_path_free(&p);
}

/* ---- copies and renames ------------------------------------------------------------ */

void objstore_tree_transfer(const objstore_tree* t, const char* src_path, const char* dst_path,
                            int remove_source, TF_Status* status) {
  const char* what = remove_source ? "rename" : "copy";
  objstore_path src = {NULL, NULL}, dst = {NULL, NULL};
  int64_t size, ignored_size, ignored_mtime, mtime;
  int kind;
  if (objstore_path_parse(t->scheme, src_path, &src, status) != 0 ||
      objstore_path_parse(t->scheme, dst_path, &dst, status) != 0)
    goto done;
  kind = probe(t, &src, &size, &mtime, status);
  if (kind < 0) goto done;
  if (kind == MISSING) {
    set_missing(t, &src, what, status);
    goto done;
  }
  if (kind == DIR_KIND) {
    fail(t, status, TF_FAILED_PRECONDITION, what, &src, "is a directory (only files %s)",
         remove_source ? "are renamed" : "are copied");
    goto done;
  }
  kind = probe(t, &dst, &ignored_size, &ignored_mtime, status);
  if (kind < 0) goto done;
  if (kind == DIR_KIND) {
    fail(t, status, TF_FAILED_PRECONDITION, "copy to", &dst, "a directory");
    goto done;
  }
  if (kind == MISSING) {
    /* Unlike a plain write, a copy already pays for lookups: the target's
     * parent must be a directory, as on a local filesystem. */
    char* slash = strrchr(dst.key, '/');
    objstore_path parent = {dst.bucket, slash != NULL ? dst.key : ""};
    int parent_kind;
    if (slash != NULL) *slash = '\0';
    parent_kind = probe(t, &parent, &ignored_size, &ignored_mtime, status);
    if (slash != NULL) *slash = '/';
    if (parent_kind < 0) goto done;
    if (parent_kind == FILE_KIND) {
      fail(t, status, TF_FAILED_PRECONDITION, "copy to", &dst, "the parent is a file");
      goto done;
    }
    if (parent_kind == MISSING) {
      fail(t, status, TF_NOT_FOUND, "copy to", &dst, "the parent does not exist");
      goto done;
    }
  }
  if (strcmp(src.bucket, dst.bucket) == 0 && strcmp(src.key, dst.key) == 0) {
    TF_SetStatus(status, TF_OK, "");
    goto done;
  }
  if (t->hooks->copy(store_of(t), t->config, src.bucket, src.key, size, dst.bucket, dst.key, status) != 0)
    goto done;
  if (remove_source) request(t, OBJSTORE_DELETE, src.bucket, src.key, status);
  else TF_SetStatus(status, TF_OK, "");
done:
  objstore_forget_below(t->engine, dst_path);
  if (remove_source) objstore_forget_below(t->engine, src_path);
  objstore_path_free(&src);
  objstore_path_free(&dst);
}
