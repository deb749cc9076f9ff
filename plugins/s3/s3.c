/*
 * The s3 plugin: s3://bucket/key on any S3-compatible object store.
 *
 * Paths translate to "/bucket/key". A directory is a prefix: "a/b" is a
 * directory when some key starts with "a/b/" (create_dir writes an empty
 * marker object "a/b/" so that empty directories exist). Buckets are the
 * top-level directories. What an object store cannot promise, and how the
 * plugin behaves instead, is in docs/s3.md.
 */
#define _POSIX_C_SOURCE 200809L

#include <curl/curl.h>
#include <fnmatch.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

/* One filesystem operation's context: the filesystem, the settings it
 * runs with from start to end, the parsed path and (after op_probe) what
 * is there. */
typedef struct s3_op {
  s3_fs* fs;
  s3_config* cfg;
  s3_path p;
  int64_t size; /* files: their size and mtime */
  int64_t mtime;
} s3_op;

/* Starts op and parses path into op->p; 0, or -1 with status set. */
static int op_parse(s3_op* op, const TF_Filesystem* filesystem,
                    const char* path, TF_Status* status) {
  op->fs = s3_fs_of(filesystem);
  op->cfg = s3_config_acquire(op->fs);
  op->p.bucket = op->p.key = NULL;
  return s3_path_parse(path, &op->p, status);
}

/* op_parse, then what is at the path: an s3_kind, or -1 with status set. */
static int op_probe(s3_op* op, const TF_Filesystem* filesystem,
                    const char* path, TF_Status* status) {
  if (op_parse(op, filesystem, path, status) != 0) return -1;
  return s3_probe(op->fs, op->cfg, &op->p, &op->size, &op->mtime, status);
}

static void op_end(s3_op* op) {
  s3_path_free(&op->p);
  s3_config_release(op->fs, op->cfg);
}

static void set_status(TF_Status* status, TF_Code code, const char* fmt,
                       const s3_path* p) {
  char msg[1200];
  snprintf(msg, sizeof msg, fmt, p->bucket, p->key);
  TF_SetStatus(status, code, msg);
}

/* ---- filesystem lifecycle -------------------------------------------------------- */

static void init_curl(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  s3_defaults defaults;
  s3_fs* fs;
  static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
  pthread_once(&curl_once, init_curl);
  s3_defaults_load(&defaults);
  fs = plugin_fs_create(filesystem, sizeof *fs, &s3_schema, &defaults.config, NULL,
                        status);
  if (fs != NULL) snprintf(fs->setup_error, sizeof fs->setup_error, "%s", defaults.error);
  s3_defaults_free(&defaults);
  if (fs == NULL) return;
  fs->engine = objstore_engine_new(&s3_store, fs);
  if (fs->engine == NULL) {
    plugin_fs_free(filesystem);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "s3: out of memory");
    return;
  }
  s3_credentials_init(fs);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  s3_fs* fs = s3_fs_of(filesystem);
  if (fs == NULL) return;
  objstore_engine_free(fs->engine);
  s3_credentials_destroy(fs);
  plugin_fs_free(filesystem);
}

/* The only cache is the engine's open connections: close the idle ones. */
static void fs_flush_caches(const TF_Filesystem* filesystem) {
  objstore_engine_close_idle(s3_fs_of(filesystem)->engine);
}

/* ---- queries ------------------------------------------------------------------------- */

static void fs_stat(const TF_Filesystem* filesystem, const char* path,
                    TF_FileStatistics* stats, TF_Status* status) {
  s3_op op;
  int kind;
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  int cached = objstore_stat_cached(fs->engine, &cfg->transport, path, stats);
  s3_config_release(fs, cfg);
  if (cached) {
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  kind = op_probe(&op, filesystem, path, status);
  if (kind == S3_MISSING) s3_set_missing(op.fs, op.cfg, &op.p, "stat", status);
  if (kind > 0) {
    stats->length = kind == S3_FILE ? op.size : 0;
    stats->mtime_nsec = op.mtime;
    stats->is_directory = kind == S3_DIR;
    objstore_stat_remember(op.fs->engine, &op.cfg->transport, path, stats);
  }
  if (kind >= 0) s3_path_free(&op.p);
  s3_config_release(op.fs, op.cfg);
}

int s3_get_file_attributes(const TF_Filesystem* filesystem, const char* path, char*** names,
                           char*** values, TF_Status* status) {
  s3_op op;
  s3_request req;
  s3_response resp;
  plugin_strlist out_names = {NULL, 0, 0}, out_values = {NULL, 0, 0};
  int i, count = -1;
  *names = *values = NULL;
  if (op_parse(&op, filesystem, path, status) != 0) {
    s3_config_release(op.fs, op.cfg);
    return -1;
  }
  s3_request_init(&req, &resp, "HEAD", op.p.bucket, op.p.key);
  req.want_attributes = 1;
  if (*op.p.key == '\0') {
    set_status(status, TF_FAILED_PRECONDITION, "attributes of s3://%s%s: a bucket is a directory",
               &op.p);
  } else if (s3_execute(op.fs, op.cfg, &req, &resp, status) != 0) {
    if (resp.http == 404) {
      int kind = s3_probe(op.fs, op.cfg, &op.p, &op.size, &op.mtime, status);
      if (kind == S3_DIR)
        set_status(status, TF_FAILED_PRECONDITION, "attributes of s3://%s/%s: is a directory",
                   &op.p);
      else if (kind == S3_MISSING)
        s3_set_missing(op.fs, op.cfg, &op.p, "attributes of", status);
      else if (kind == S3_FILE) /* written between the two requests */
        set_status(status, TF_ABORTED, "attributes of s3://%s/%s: the object changed; ask again",
                   &op.p);
    }
  } else {
    const s3_attributes* a = &resp.attributes;
    const char* type = a->content_type != NULL ? a->content_type : "application/octet-stream";
    int bad = plugin_strlist_push(&out_names, "content-type", 12) != 0 ||
              plugin_strlist_push(&out_values, type, strlen(type)) != 0;
    for (i = 0; !bad && i < a->names.count; ++i)
      bad = plugin_strlist_push(&out_names, a->names.items[i], strlen(a->names.items[i])) != 0 ||
            plugin_strlist_push(&out_values, a->values.items[i], strlen(a->values.items[i])) != 0;
    if (bad) {
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      count = plugin_strlist_release(&out_names, names);
      plugin_strlist_release(&out_values, values);
    }
  }
  plugin_strlist_free(&out_names);
  plugin_strlist_free(&out_values);
  objstore_response_free(&resp);
  op_end(&op);
  return count;
}

typedef struct stat_job {
  const TF_Filesystem* filesystem;
  const char* const* paths;
  TF_FileStatistics* stats;
  TF_Status** statuses;
} stat_job;

static void stat_one(void* arg, int i) {
  stat_job* job = arg;
  fs_stat(job->filesystem, job->paths[i], &job->stats[i], job->statuses[i]);
}

/* Paths whose HEAD found no object: a directory when a key starts with
 * key + "/" (one one-key listing each), else missing, worded as stat words
 * it (one HEAD of the parent of each nested one: a file?). Each round's
 * requests all in flight at once; 0, or -1 when out of memory. */
static int settle_absent(s3_batch* b, const int* absent, int k, TF_FileStatistics* stats, TF_Status** statuses) {
  s3_list_call* lists = calloc((size_t)k, sizeof *lists);
  char** prefixes = calloc((size_t)k, sizeof *prefixes);
  s3_request* reqs = calloc((size_t)k, sizeof *reqs);
  s3_response* resps = calloc((size_t)k, sizeof *resps);
  TF_Status** st = calloc((size_t)k, sizeof *st);
  int* missing = calloc((size_t)k, sizeof *missing);
  /* the second round: a HEAD of each nested missing path's parent */
  char** parents = calloc((size_t)k, sizeof *parents);
  s3_request* heads = calloc((size_t)k, sizeof *heads);
  s3_response* head_resps = calloc((size_t)k, sizeof *head_resps);
  TF_Status** head_st = calloc((size_t)k, sizeof *head_st);
  int j, m = 0, q = 0, rc = -1;
  if (lists == NULL || prefixes == NULL || reqs == NULL || resps == NULL || st == NULL || missing == NULL ||
      parents == NULL || heads == NULL || head_resps == NULL || head_st == NULL)
    goto done;
  for (j = 0; j < k; ++j) {
    const s3_path* p = &b->paths[absent[j]];
    if ((prefixes[j] = s3_key_with_slash(p->key)) == NULL) goto done;
    s3_list_request(&lists[j], p->bucket, prefixes[j], "/", 1, NULL);
    reqs[j] = lists[j].req;
    st[j] = statuses[absent[j]];
  }
  s3_execute_many(b->fs, b->cfg, k, reqs, resps, st);
  for (j = 0; j < k; ++j) {
    int i = absent[j];
    lists[j].resp = resps[j];
    if (TF_GetCode(st[j]) == TF_OK) {
      s3_listing l;
      int64_t mtime = 0;
      memset(&l, 0, sizeof l);
      if (s3_list_answer(&lists[j], &l, st[j]) == 0) {
        if (s3_prefix_found(&l, prefixes[j], &mtime)) {
          stats[i].is_directory = 1;
          stats[i].mtime_nsec = mtime;
        } else {
          missing[m++] = i;
        }
      }
      s3_listing_free(&l);
    } else if (TF_GetCode(st[j]) == TF_NOT_FOUND) { /* NoSuchBucket */
      missing[m++] = i;
    }
  }
  for (j = 0; j < m; ++j) {
    const s3_path* p = &b->paths[missing[j]];
    const char* slash = strrchr(p->key, '/');
    if (slash == NULL) continue; /* its parent is the bucket */
    if ((parents[j] = strndup(p->key, (size_t)(slash - p->key))) == NULL) goto done;
    head_st[q] = TF_NewStatus();
    s3_request_init(&heads[q], &head_resps[q], "HEAD", p->bucket, parents[j]);
    ++q;
  }
  s3_execute_many(b->fs, b->cfg, q, heads, head_resps, head_st);
  for (j = 0, q = 0; j < m; ++j) { /* the HEADs went in the order of the nested ones */
    int parent_is_file = 0;
    if (parents[j] != NULL) parent_is_file = TF_GetCode(head_st[q++]) == TF_OK;
    s3_missing_status(&b->paths[missing[j]], "stat", parent_is_file, statuses[missing[j]]);
  }
  rc = 0;
done:
  for (j = 0; j < k; ++j) {
    if (resps != NULL) objstore_response_free(&resps[j]);
    if (head_resps != NULL) objstore_response_free(&head_resps[j]);
    if (prefixes != NULL) free(prefixes[j]);
    if (parents != NULL) free(parents[j]);
    if (head_st != NULL && head_st[j] != NULL) TF_DeleteStatus(head_st[j]);
  }
  free(lists);
  free(prefixes);
  free(reqs);
  free(resps);
  free(st);
  free(missing);
  free(parents);
  free(heads);
  free(head_resps);
  free(head_st);
  return rc;
}

/* The stat_files op: one HEAD per object, all in flight at once
 * (s3_execute_many); the objects a HEAD did not find are settled in two
 * more such rounds (settle_absent); a bucket or the root by stat. */
static void fs_stat_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                          TF_FileStatistics* stats, TF_Status** statuses) {
  s3_batch b;
  stat_job settle = {filesystem, paths, stats, statuses};
  int i, k, num_absent = 0;
  int* absent;
  if (s3_batch_start(&b, filesystem, n, statuses) != 0) return;
  for (i = 0; i < n; ++i) {
    memset(&stats[i], 0, sizeof stats[i]);
    if (s3_batch_parse(&b, i, paths[i]) != 0) continue;
    if (*b.paths[i].key == '\0')
      s3_batch_aside(&b, i);
    else
      s3_batch_add(&b, i, "HEAD");
  }
  s3_batch_run(&b);
  absent = malloc((size_t)(n > 0 ? n : 1) * sizeof *absent);
  for (k = 0; k < b.num_sent; ++k) {
    i = b.path_of[k];
    if (TF_GetCode(statuses[i]) == TF_OK) {
      stats[i].length = b.resps[k].length;
      stats[i].mtime_nsec = b.resps[k].mtime_nsec;
    } else if (b.resps[k].http == 404) {
      if (absent != NULL) absent[num_absent++] = i;
      else s3_batch_aside(&b, i);
    }
  }
  if (num_absent > 0 && settle_absent(&b, absent, num_absent, stats, statuses) != 0)
    for (k = 0; k < num_absent; ++k) s3_batch_aside(&b, absent[k]); /* out of memory: one by one */
  free(absent);
  s3_batch_settle_aside(&b, stat_one, &settle);
  s3_batch_end(&b);
}

static void fs_path_exists(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  TF_FileStatistics stats;
  fs_stat(filesystem, path, &stats, status);
}

/* One HEAD per path, all in flight from this thread, settled as stat
 * settles them (fs_stat_files). Out of memory, without statuses to say
 * so, no path is said to exist. */
static bool fs_paths_exist(const TF_Filesystem* filesystem, char** paths,
                           int num_files, TF_Status** statuses) {
  const size_t n = num_files > 0 ? (size_t)num_files : 1;
  TF_FileStatistics* stats = calloc(n, sizeof *stats);
  TF_Status** own = statuses != NULL ? statuses : calloc(n, sizeof *own);
  bool all = stats != NULL && own != NULL;
  int i;
  for (i = 0; all && statuses == NULL && i < num_files; ++i)
    if ((own[i] = TF_NewStatus()) == NULL) all = false;
  if (all) {
    fs_stat_files(filesystem, (const char* const*)paths, num_files, stats, own);
    for (i = 0; i < num_files; ++i)
      if (TF_GetCode(own[i]) != TF_OK) all = false;
  } else if (statuses != NULL) {
    for (i = 0; i < num_files; ++i) TF_SetStatus(statuses[i], TF_RESOURCE_EXHAUSTED, "s3: out of memory");
  }
  if (statuses == NULL && own != NULL) {
    for (i = 0; i < num_files; ++i)
      if (own[i] != NULL) TF_DeleteStatus(own[i]);
    free(own);
  }
  free(stats);
  return all;
}

static bool fs_is_directory(const TF_Filesystem* filesystem, const char* path,
                            TF_Status* status) {
  TF_FileStatistics stats;
  char msg[1100];
  fs_stat(filesystem, path, &stats, status);
  if (TF_GetCode(status) != TF_OK) return false;
  if (!stats.is_directory) {
    snprintf(msg, sizeof msg, "s3:%s is a file, not a directory", path);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    return false;
  }
  return true;
}

static int64_t fs_get_file_size(const TF_Filesystem* filesystem,
                                const char* path, TF_Status* status) {
  TF_FileStatistics stats;
  char msg[1100];
  fs_stat(filesystem, path, &stats, status);
  if (TF_GetCode(status) != TF_OK) return -1;
  if (stats.is_directory) {
    snprintf(msg, sizeof msg, "s3:%s is a directory", path);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    return -1;
  }
  return stats.length;
}

static char* fs_translate_name(const TF_Filesystem* filesystem, const char* uri) {
  (void)filesystem;
  return plugin_translate_name(uri, PLUGIN_NAMES_KEYS);
}

/* Every key (and common prefix, with a delimiter) under prefix, all pages. */
static int list_all(s3_fs* fs, const s3_config* cfg, const char* bucket,
                    const char* prefix, const char* delimiter, s3_listing* l,
                    TF_Status* status) {
  char* token = NULL;
  do {
    char* next;
    if (s3_list_page(fs, cfg, bucket, prefix, delimiter, 1000, token, l, status) != 0) {
      free(token);
      return -1;
    }
    next = l->truncated && l->next_token != NULL ? strdup(l->next_token) : NULL;
    if (next != NULL && token != NULL && strcmp(next, token) == 0) {
      /* as boto3's paginator: a store that hands back the token it was
       * given would be paged for ever */
      TF_SetStatus(status, TF_DATA_LOSS,
                   "s3: a listing page is truncated and names as its next page the page it is: "
                   "the store would be listed for ever");
      free(next);
      free(token);
      return -1;
    }
    free(token);
    token = next;
  } while (token != NULL);
  return 0;
}

static int list_buckets(s3_fs* fs, const s3_config* cfg, s3_listing* l,
                        TF_Status* status) {
  s3_request req;
  s3_response resp;
  int rc;
  memset(&req, 0, sizeof req);
  memset(&resp, 0, sizeof resp);
  req.method = "GET";
  rc = s3_execute(fs, cfg, &req, &resp, status);
  if (rc == 0 && s3_parse_listing(resp.body.data, resp.body.len, l) != 0) {
    TF_SetStatus(status, TF_INTERNAL, "s3: could not parse the bucket list");
    rc = -1;
  }
  objstore_response_free(&resp);
  return rc;
}

/* Whether a listed name can be addressed by a path: not "" or ".", which
 * path cleaning folds away (".." is a name like any other in a key). Keys
 * with such segments, written by other clients, are left out of listings
 * and globs (docs/s3.md). */
static int addressable_name(const char* name, size_t n) {
  return n > 0 && !(n == 1 && name[0] == '.');
}

/* The same for every segment of a key ("a//b" and "a/" have an empty one). */
static int addressable_key(const char* key) {
  for (;;) {
    size_t n = strcspn(key, "/");
    if (!addressable_name(key, n)) return 0;
    if (key[n] == '\0') return 1;
    key += n + 1;
  }
}

static int s3_list(const TF_Filesystem* filesystem, const char* path,
                   plugin_listing* out, TF_Status* status) {
  s3_op op;
  s3_listing l;
  char* prefix = NULL;
  size_t plen;
  int i, result = -1, marker = 0;
  TF_FileStatistics st;
  memset(&l, 0, sizeof l);
  if (op_parse(&op, filesystem, path, status) != 0) goto done;
  if (*op.p.bucket == '\0') {
    if (list_buckets(op.fs, op.cfg, &l, status) != 0) goto done;
    for (i = 0; i < l.keys.count; ++i) {
      st.length = 0;
      st.mtime_nsec = l.mtimes[i];
      st.is_directory = true;
      if (plugin_listing_push(out, l.keys.items[i], strlen(l.keys.items[i]), &st) != 0) goto oom;
    }
    result = 0;
    goto done;
  }
  prefix = *op.p.key != '\0' ? s3_key_with_slash(op.p.key) : strdup("");
  if (prefix == NULL) goto oom;
  plen = strlen(prefix);
  if (list_all(op.fs, op.cfg, op.p.bucket, prefix, "/", &l, status) != 0) goto done;
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
    int kind = s3_probe(op.fs, op.cfg, &op.p, &size, &mtime, status);
    if (kind == S3_MISSING) s3_set_missing(op.fs, op.cfg, &op.p, "list", status);
    if (kind == S3_FILE)
      set_status(status, TF_FAILED_PRECONDITION, "list s3://%s/%s: a file, not a directory", &op.p);
    if (kind != S3_DIR) goto done;
  }
  TF_SetStatus(status, TF_OK, "");
  result = 0;
  goto done;
oom:
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
done:
  s3_listing_free(&l);
  free(prefix);
  op_end(&op);
  return result;
}

PLUGIN_DEFINE_LISTING(s3_list)

/* ---- glob: one listing of the longest literal prefix ------------------------------ */

/* The first `components` components of key ("a/b/c", 2 -> "a/b"), or NULL
 * when key has fewer. */
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
  /* A trailing "/" (a directory marker) ends in an empty component. */
  return seen == components && key[i - 1] != '/' ? i : 0;
}

static int count_components(const char* s) {
  int n = *s != '\0';
  for (; *s; ++s)
    if (*s == '/' && s[1] != '\0') ++n;
  return n;
}

static int glob_bucket(s3_fs* fs, const s3_config* cfg, const char* bucket,
                       const char* key_pattern, plugin_strlist* out,
                       TF_Status* status) {
  s3_listing l;
  size_t literal = strcspn(key_pattern, "*?[\\");
  int components = count_components(key_pattern);
  char* prefix = strndup(key_pattern, literal);
  char* candidate = NULL;
  char* last = NULL;
  int i, rc = -1;
  memset(&l, 0, sizeof l);
  if (prefix == NULL) goto oom;
  if (list_all(fs, cfg, bucket, prefix, NULL, &l, status) != 0) {
    /* A missing bucket matches nothing. */
    if (TF_GetCode(status) == TF_NOT_FOUND) rc = 0;
    goto done;
  }
  candidate = malloc(4096);
  if (candidate == NULL) goto oom;
  for (i = 0; i < l.keys.count; ++i) {
    /* The key, or its ancestor at the pattern's depth (a directory). */
    size_t n = leading_components(l.keys.items[i], components);
    size_t blen = strlen(bucket);
    if (n == 0 || n + blen + 3 > 4096) continue;
    memcpy(candidate, l.keys.items[i], n);
    candidate[n] = '\0';
    if (!addressable_key(candidate)) continue;
    if (last != NULL && strcmp(last, candidate) == 0) continue;
    if (fnmatch(key_pattern, candidate, FNM_PATHNAME) != 0) continue;
    free(last);
    last = strdup(candidate);
    if (last == NULL) goto oom;
    {
      char* full = malloc(blen + n + 3);
      if (full == NULL) goto oom;
      snprintf(full, blen + n + 3, "%s/%s", bucket, candidate);
      if (plugin_strlist_push(out, full, strlen(full)) != 0) {
        free(full);
        goto oom;
      }
      free(full);
    }
  }
  rc = 0;
  goto done;
oom:
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
done:
  free(candidate);
  free(last);
  free(prefix);
  s3_listing_free(&l);
  return rc;
}

static int fs_get_matching_paths(const TF_Filesystem* filesystem,
                                 const char* uri_pattern, char*** entries,
                                 TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  plugin_strlist out = {NULL, 0, 0};
  size_t scheme_len = plugin_scheme_prefix_len(uri_pattern);
  char* pattern = plugin_translate_name(uri_pattern, PLUGIN_NAMES_KEYS);
  s3_path p = {NULL, NULL};
  int i, count = -1;
  *entries = NULL;
  if (pattern == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  if (s3_path_parse(pattern, &p, status) != 0) goto done;
  if (*p.key == '\0') {
    /* The pattern names buckets: match them against the bucket list. */
    s3_listing l;
    memset(&l, 0, sizeof l);
    if (*p.bucket != '\0' && list_buckets(fs, cfg, &l, status) == 0) {
      for (i = 0; i < l.keys.count; ++i) {
        char full[300];
        if (fnmatch(p.bucket, l.keys.items[i], FNM_PATHNAME) != 0) continue;
        snprintf(full, sizeof full, "%s", l.keys.items[i]);
        plugin_strlist_push(&out, full, strlen(full));
      }
    }
    s3_listing_free(&l);
    if (*p.bucket != '\0' && TF_GetCode(status) != TF_OK) goto done;
  } else if (plugin_has_glob_meta(p.bucket, strlen(p.bucket))) {
    s3_listing l;
    memset(&l, 0, sizeof l);
    if (list_buckets(fs, cfg, &l, status) != 0) {
      s3_listing_free(&l);
      goto done;
    }
    for (i = 0; i < l.keys.count; ++i) {
      if (fnmatch(p.bucket, l.keys.items[i], FNM_PATHNAME) != 0) continue;
      if (glob_bucket(fs, cfg, l.keys.items[i], p.key, &out, status) != 0) {
        s3_listing_free(&l);
        goto done;
      }
    }
    s3_listing_free(&l);
  } else if (glob_bucket(fs, cfg, p.bucket, p.key, &out, status) != 0) {
    goto done;
  }
  /* Matches go back as the pattern was given: s3://bucket/key or
   * /bucket/key. */
  if (plugin_strlist_prefix(&out, scheme_len > 0 ? uri_pattern : "/",
                            scheme_len > 0 ? scheme_len : 1) != 0) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  plugin_strlist_sort(&out);
  count = plugin_strlist_release(&out, entries);
  TF_SetStatus(status, TF_OK, "");
done:
  plugin_strlist_free(&out);
  s3_path_free(&p);
  plugin_memory_free(pattern);
  s3_config_release(fs, cfg);
  return count;
}

/* ---- namespace changes ---------------------------------------------------------------- */

static void fs_create_dir(const TF_Filesystem* filesystem, const char* path,
                          TF_Status* status) {
  s3_op op;
  int kind = op_probe(&op, filesystem, path, status);
  if (kind < 0) goto done;
  if (kind != S3_MISSING) {
    set_status(status, TF_ALREADY_EXISTS, "create_dir s3://%s/%s: already exists", &op.p);
  } else if (*op.p.key == '\0') {
    s3_simple_request(op.fs, op.cfg, "PUT", op.p.bucket, NULL, NULL, status); /* CreateBucket */
  } else {
    /* The parent must be a directory (or the bucket). */
    char* slash = strrchr(op.p.key, '/');
    s3_path parent = {op.p.bucket, op.p.key};
    int parent_kind;
    char* marker;
    if (slash != NULL) *slash = '\0';
    else parent.key = "";
    parent_kind = s3_probe(op.fs, op.cfg, &parent, &op.size, &op.mtime, status);
    if (slash != NULL) *slash = '/';
    if (parent_kind == S3_MISSING) {
      set_status(status, TF_NOT_FOUND, "create_dir s3://%s/%s: the parent does not exist", &op.p);
    } else if (parent_kind == S3_FILE) {
      set_status(status, TF_FAILED_PRECONDITION, "create_dir s3://%s/%s: the parent is a file", &op.p);
    } else if (parent_kind == S3_DIR) {
      marker = s3_key_with_slash(op.p.key);
      /* Conditional, so that create_dir is "create if absent" on the
       * server: what the generic transactions' lock relies on. */
      if (marker == NULL) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
      else s3_put_if_absent(op.fs, op.cfg, op.p.bucket, marker, status);
      free(marker);
    }
  }
done:
  objstore_forget(s3_fs_of(filesystem)->engine, path);
  op_end(&op);
}

static void fs_recursively_create_dir(const TF_Filesystem* filesystem,
                                      const char* path, TF_Status* status) {
  s3_op op;
  char* key;
  char* marker = NULL;
  size_t i, n;
  int kind;
  if (op_parse(&op, filesystem, path, status) != 0) goto done;
  if (*op.p.bucket == '\0') {
    TF_SetStatus(status, TF_OK, "");
    goto done;
  }
  {
    /* The bucket first. */
    s3_path bucket = {op.p.bucket, ""};
    kind = s3_probe(op.fs, op.cfg, &bucket, &op.size, &op.mtime, status);
    if (kind < 0) goto done;
    if (kind == S3_MISSING && s3_simple_request(op.fs, op.cfg, "PUT", op.p.bucket, NULL, NULL, status) != 0 &&
        TF_GetCode(status) != TF_ALREADY_EXISTS)
      goto done;
  }
  /* No component may be a file; then a marker for each, so that every level
   * outlives the removal of its children. */
  key = op.p.key;
  n = strlen(key);
  for (i = 1; i <= n; ++i) {
    if (i < n && key[i] != '/') continue;
    {
      char saved = key[i];
      s3_response resp;
      int rc;
      key[i] = '\0';
      memset(&resp, 0, sizeof resp);
      rc = s3_simple_request(op.fs, op.cfg, "HEAD", op.p.bucket, key, &resp, status);
      objstore_response_free(&resp);
      if (rc == 0) {
        set_status(status, TF_FAILED_PRECONDITION,
                   "recursively_create_dir s3://%s/%s: a file is in the way, not a directory", &op.p);
        key[i] = saved;
        goto done;
      }
      key[i] = saved;
      if (resp.http != 404) goto done;
    }
  }
  /* Each marker is "key[0..i)/": written into a buffer of its own, since
   * the marker of the whole key is one byte longer than the key. */
  marker = malloc(n + 2);
  if (marker == NULL) {
    plugin_set_oom(status);
    goto done;
  }
  for (i = 1; i <= n; ++i) {
    if (i < n && key[i] != '/') continue;
    memcpy(marker, key, i);
    marker[i] = '/';
    marker[i + 1] = '\0';
    if (s3_simple_request(op.fs, op.cfg, "PUT", op.p.bucket, marker, NULL, status) != 0) goto done;
  }
  TF_SetStatus(status, TF_OK, "");
done:
  objstore_forget(s3_fs_of(filesystem)->engine, path);
  free(marker);
  op_end(&op);
}

static void fs_delete_file(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  s3_op op;
  int kind = op_probe(&op, filesystem, path, status);
  if (kind < 0) goto done;
  if (kind == S3_MISSING) s3_set_missing(op.fs, op.cfg, &op.p, "delete_file", status);
  else if (kind == S3_DIR)
    set_status(status, TF_FAILED_PRECONDITION, "delete_file s3://%s/%s: a directory", &op.p);
  else s3_simple_request(op.fs, op.cfg, "DELETE", op.p.bucket, op.p.key, NULL, status);
done:
  objstore_forget(s3_fs_of(filesystem)->engine, path);
  op_end(&op);
}

static void fs_delete_dir(const TF_Filesystem* filesystem, const char* path,
                          TF_Status* status) {
  s3_op op;
  s3_listing l;
  char* prefix = NULL;
  memset(&l, 0, sizeof l);
  if (op_parse(&op, filesystem, path, status) != 0) goto done;
  if (*op.p.key == '\0') {
    if (*op.p.bucket == '\0')
      TF_SetStatus(status, TF_FAILED_PRECONDITION, "delete_dir s3://: the root stays");
    else
      s3_simple_request(op.fs, op.cfg, "DELETE", op.p.bucket, NULL, NULL, status); /* DeleteBucket */
    goto done;
  }
  prefix = s3_key_with_slash(op.p.key);
  if (prefix == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  if (s3_list_page(op.fs, op.cfg, op.p.bucket, prefix, "/", 2, NULL, &l, status) != 0) goto done;
  if (l.keys.count + l.prefixes.count == 0) {
    int kind = s3_probe(op.fs, op.cfg, &op.p, &op.size, &op.mtime, status);
    if (kind == S3_FILE)
      set_status(status, TF_FAILED_PRECONDITION, "delete_dir s3://%s/%s: a file", &op.p);
    else if (kind == S3_MISSING)
      s3_set_missing(op.fs, op.cfg, &op.p, "delete_dir", status);
  } else if (l.keys.count + l.prefixes.count > 1 || l.prefixes.count > 0 ||
             strcmp(l.keys.items[0], prefix) != 0) {
    set_status(status, TF_FAILED_PRECONDITION, "delete_dir s3://%s/%s: not empty", &op.p);
  } else {
    s3_simple_request(op.fs, op.cfg, "DELETE", op.p.bucket, prefix, NULL, status);
  }
done:
  objstore_forget(s3_fs_of(filesystem)->engine, path);
  free(prefix);
  s3_listing_free(&l);
  op_end(&op);
}

/* DeleteObjects, 1000 keys per request, every batch in flight at once
 * from this thread (as far as max_connections allows). */
typedef struct delete_batch {
  plugin_buf body;
  char md5[32];
  int in_body;
  s3_param params[1];
} delete_batch;

/* The keys of batch i that XML can carry go in its body; the others are
 * deleted one by one now (a control character). Returns those that failed. */
static int prepare_batch(s3_fs* fs, const s3_config* cfg, const char* bucket, char** keys, int count,
                         delete_batch* b, s3_first_error* error) {
  int i, failed = 0;
  TF_Status* status = TF_NewStatus();
  b->params[0] = (s3_param){"delete", NULL};
  plugin_buf_append(&b->body, "<Delete><Quiet>true</Quiet>", 27);
  for (i = 0; i < count; ++i) {
    if (!s3_xml_can_carry(keys[i])) {
      if (s3_simple_request(fs, cfg, "DELETE", bucket, keys[i], NULL, status) != 0) {
        ++failed;
        s3_first_error_record(error, status);
      }
      continue;
    }
    ++b->in_body;
    plugin_buf_append(&b->body, "<Object><Key>", 13);
    s3_xml_escape_into(&b->body, keys[i]);
    plugin_buf_append(&b->body, "</Key></Object>", 15);
  }
  plugin_buf_append(&b->body, "</Delete>", 9);
  s3_md5_base64(b->body.data, b->body.len, b->md5);
  TF_DeleteStatus(status);
  return failed;
}

/* The keys a batch's answer says were not deleted (all of them when it
 * failed or cannot be read), its failure recorded. */
static int settle_batch(const char* bucket, const delete_batch* b, int sent, const s3_response* resp,
                        TF_Status* status, s3_first_error* error) {
  int errors = b->in_body;
  char key[256], code[64];
  if (sent) {
    errors = s3_parse_delete_errors(resp->body.data, resp->body.len, key, sizeof key, code, sizeof code);
    if (errors > 0) {
      char msg[400];
      snprintf(msg, sizeof msg, "delete s3://%s/%s: %s", bucket, key, code);
      TF_SetStatus(status, TF_UNKNOWN, msg);
    } else if (errors < 0) { /* an unreadable answer: the batch counts as not deleted */
      TF_SetStatus(status, TF_INTERNAL, "s3: could not parse a DeleteObjects answer");
      errors = b->in_body;
    }
  }
  if (errors != 0) s3_first_error_record(error, status);
  return errors;
}

/* Deletes the count keys of bucket; the number not deleted (the first
 * failure in error). */
static int delete_keys(s3_fs* fs, const s3_config* cfg, const char* bucket, char** keys, int count,
                       s3_first_error* error) {
  int n = (count + 999) / 1000, i, m = 0, failed = 0;
  delete_batch* batches = calloc((size_t)(n > 0 ? n : 1), sizeof *batches);
  s3_request* reqs = calloc((size_t)(n > 0 ? n : 1), sizeof *reqs);
  s3_response* resps = calloc((size_t)(n > 0 ? n : 1), sizeof *resps);
  TF_Status** statuses = calloc((size_t)(n > 0 ? n : 1), sizeof *statuses);
  int* sent = calloc((size_t)(n > 0 ? n : 1), sizeof *sent);
  if (batches == NULL || reqs == NULL || resps == NULL || statuses == NULL || sent == NULL) {
    TF_Status* oom = TF_NewStatus();
    TF_SetStatus(oom, TF_RESOURCE_EXHAUSTED, "out of memory");
    s3_first_error_record(error, oom);
    TF_DeleteStatus(oom);
    failed = count;
    goto done;
  }
  for (i = 0; i < n; ++i) {
    int first = i * 1000, len = count - first < 1000 ? count - first : 1000;
    failed += prepare_batch(fs, cfg, bucket, keys + first, len, &batches[i], error);
    statuses[i] = TF_NewStatus();
    if (batches[i].in_body == 0) continue;
    sent[i] = 1;
    s3_request_init(&reqs[m], &resps[m], "POST", bucket, NULL);
    reqs[m].params = batches[i].params;
    reqs[m].num_params = 1;
    reqs[m].body = batches[i].body.data;
    reqs[m].body_len = batches[i].body.len;
    reqs[m].content_md5 = batches[i].md5;
    ++m;
  }
  {
    /* the statuses of the batches sent, in the order of reqs */
    TF_Status** sent_statuses = calloc((size_t)(m > 0 ? m : 1), sizeof *sent_statuses);
    int k = 0, ran = sent_statuses != NULL;
    if (ran) {
      for (i = 0; i < n; ++i)
        if (sent[i]) sent_statuses[k++] = statuses[i];
      s3_execute_many(fs, cfg, m, reqs, resps, sent_statuses);
      free(sent_statuses);
    }
    for (i = 0, k = 0; i < n; ++i) {
      if (!sent[i]) continue;
      if (!ran) TF_SetStatus(statuses[i], TF_RESOURCE_EXHAUSTED, "out of memory");
      failed += settle_batch(bucket, &batches[i], ran && TF_GetCode(statuses[i]) == TF_OK, &resps[k],
                             statuses[i], error);
      ++k;
    }
  }
done:
  for (i = 0; i < n; ++i) {
    if (batches != NULL) plugin_buf_free(&batches[i].body);
    if (resps != NULL && i < m) objstore_response_free(&resps[i]);
    if (statuses != NULL && statuses[i] != NULL) TF_DeleteStatus(statuses[i]);
  }
  free(sent);
  free(statuses);
  free(resps);
  free(reqs);
  free(batches);
  return failed;
}

static void fs_delete_recursively(const TF_Filesystem* filesystem,
                                  const char* path, uint64_t* undeleted_files,
                                  uint64_t* undeleted_dirs, TF_Status* status) {
  s3_op op;
  s3_listing l;
  char* prefix = NULL;
  int kind;
  memset(&l, 0, sizeof l);
  *undeleted_files = 0;
  *undeleted_dirs = 0;
  kind = op_probe(&op, filesystem, path, status);
  if (kind < 0) goto done;
  if (kind == S3_MISSING) {
    *undeleted_dirs = 1;
    s3_set_missing(op.fs, op.cfg, &op.p, "delete_recursively", status);
    goto done;
  }
  if (kind == S3_FILE) {
    if (s3_simple_request(op.fs, op.cfg, "DELETE", op.p.bucket, op.p.key, NULL, status) != 0) *undeleted_files = 1;
    goto done;
  }
  if (*op.p.bucket == '\0') {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 "delete_recursively s3://: will not delete every bucket");
    goto done;
  }
  prefix = *op.p.key != '\0' ? s3_key_with_slash(op.p.key) : strdup("");
  if (prefix == NULL || list_all(op.fs, op.cfg, op.p.bucket, prefix, NULL, &l, status) != 0) {
    if (prefix == NULL) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    *undeleted_dirs = 1;
    goto done;
  }
  {
    s3_first_error error;
    int failed;
    s3_first_error_init(&error);
    failed = delete_keys(op.fs, op.cfg, op.p.bucket, l.keys.items, l.keys.count, &error);
    s3_first_error_take(&error, status);
    s3_first_error_destroy(&error);
    *undeleted_files = (uint64_t)failed;
    if (failed > 0) {
      *undeleted_dirs = 1;
      goto done;
    }
  }
  if (*op.p.key == '\0' && s3_simple_request(op.fs, op.cfg, "DELETE", op.p.bucket, NULL, NULL, status) != 0) {
    *undeleted_dirs = 1;
    goto done;
  }
  TF_SetStatus(status, TF_OK, "");
done:
  objstore_forget_below(s3_fs_of(filesystem)->engine, path);
  free(prefix);
  s3_listing_free(&l);
  op_end(&op);
}

/* ---- copies and renames ------------------------------------------------------------ */

static void copy_or_rename(const TF_Filesystem* filesystem, const char* src_path,
                           const char* dst_path, int remove_source,
                           TF_Status* status) {
  const char* what = remove_source ? "rename" : "copy";
  s3_op src;
  s3_path dst = {NULL, NULL};
  int64_t ignored_size, ignored_mtime;
  int kind = op_probe(&src, filesystem, src_path, status);
  char msg[600];
  if (kind < 0) goto done;
  if (kind == S3_MISSING) {
    s3_set_missing(src.fs, src.cfg, &src.p, what, status);
    goto done;
  }
  if (kind == S3_DIR) {
    snprintf(msg, sizeof msg, "%s s3://%s/%s: is a directory (only files %s)", what,
             src.p.bucket, src.p.key, remove_source ? "are renamed" : "are copied");
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    goto done;
  }
  if (s3_path_parse(dst_path, &dst, status) != 0) goto done;
  kind = s3_probe(src.fs, src.cfg, &dst, &ignored_size, &ignored_mtime, status);
  if (kind < 0) goto done;
  if (kind == S3_DIR) {
    set_status(status, TF_FAILED_PRECONDITION, "copy to s3://%s/%s: a directory", &dst);
    goto done;
  }
  if (kind == S3_MISSING) {
    /* Unlike a plain write, a copy already pays for lookups: the target's
     * parent must be a directory, as on a local filesystem. */
    char* slash = strrchr(dst.key, '/');
    s3_path parent = {dst.bucket, slash != NULL ? dst.key : ""};
    int parent_kind;
    if (slash != NULL) *slash = '\0';
    parent_kind = s3_probe(src.fs, src.cfg, &parent, &ignored_size, &ignored_mtime, status);
    if (slash != NULL) *slash = '/';
    if (parent_kind < 0) goto done;
    if (parent_kind != S3_DIR) {
      set_status(status, parent_kind == S3_FILE ? TF_FAILED_PRECONDITION : TF_NOT_FOUND,
                 parent_kind == S3_FILE ? "copy to s3://%s/%s: the parent is a file"
                                        : "copy to s3://%s/%s: the parent does not exist",
                 &dst);
      goto done;
    }
  }
  if (strcmp(src.p.bucket, dst.bucket) == 0 && strcmp(src.p.key, dst.key) == 0) {
    TF_SetStatus(status, TF_OK, "");
    goto done;
  }
  if (s3_copy_object(src.fs, src.cfg, &src.p, src.size, &dst, status) != 0) goto done;
  if (remove_source)
    s3_simple_request(src.fs, src.cfg, "DELETE", src.p.bucket, src.p.key, NULL, status);
  else
    TF_SetStatus(status, TF_OK, "");
done:
  objstore_forget_below(s3_fs_of(filesystem)->engine, dst_path); /* its caches: what changed */
  if (remove_source) objstore_forget_below(s3_fs_of(filesystem)->engine, src_path);
  s3_path_free(&dst);
  op_end(&src);
}

PLUGIN_DEFINE_RENAME_AND_COPY(copy_or_rename)

/* ---- registration ------------------------------------------------------------------------ */

static const TF_FilesystemOps s3_filesystem_ops = {
    PLUGIN_FILESYSTEM_OPS(s3_, fs_),
    .flush_caches = fs_flush_caches,
    .get_incomplete_writes = s3_get_incomplete_writes,
    .new_writable_file_with_attributes = s3_new_writable_file_with_attributes,
    .get_file_attributes = s3_get_file_attributes,
    .abort_incomplete_write = s3_abort_incomplete_write,
    .read_files = s3_read_files,
    .stat_files = fs_stat_files,
    .write_files = s3_write_files,
    PLUGIN_CONFIGURATION_OPS};

static const plugin_scheme s3_schemes[] = {
    {"s3", &s3_filesystem_ops, &objstore_file_ops,
     &s3_writable_file_ops, &objstore_region_ops}};

PLUGIN_DEFINE(s3_schemes, "s3", "0.1.0",
              ASYNCFS_PLUGIN_ATOMIC_WRITES | ASYNCFS_PLUGIN_NETWORK)
