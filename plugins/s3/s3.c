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

/* ---- paths -------------------------------------------------------------------- */

int s3_path_parse(const char* path, s3_path* out, TF_Status* status) {
  const char* p = path;
  const char* slash;
  char msg[300];
  out->bucket = out->key = NULL;
  while (*p == '/') ++p;
  slash = strchr(p, '/');
  if (slash == NULL) slash = p + strlen(p);
  out->bucket = strndup(p, (size_t)(slash - p));
  while (*slash == '/') ++slash;
  out->key = strdup(slash);
  if (out->bucket == NULL || out->key == NULL) {
    s3_path_free(out);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  if (*out->bucket != '\0' && strlen(out->bucket) < 3) {
    snprintf(msg, sizeof msg,
             "s3://%s: bucket names have 3 to 63 characters", out->bucket);
    s3_path_free(out);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
    return -1;
  }
  return 0;
}

void s3_path_free(s3_path* p) {
  free(p->bucket);
  free(p->key);
  p->bucket = p->key = NULL;
}

static char* key_with_slash(const char* key) {
  size_t n = strlen(key);
  char* out = malloc(n + 2);
  if (out == NULL) return NULL;
  memcpy(out, key, n);
  out[n] = '/';
  out[n + 1] = '\0';
  return out;
}

/* ---- lookups ---------------------------------------------------------------------- */

/* Lists one page under prefix. */
static int list_page(s3_fs* fs, const s3_config* cfg, const char* bucket,
                     const char* prefix, const char* delimiter, int max_keys,
                     const char* token, s3_listing* l, TF_Status* status) {
  char max[16];
  s3_param params[5];
  int n = 0, rc;
  s3_request req;
  s3_response resp;
  memset(&req, 0, sizeof req);
  memset(&resp, 0, sizeof resp);
  snprintf(max, sizeof max, "%d", max_keys);
  params[n++] = (s3_param){"list-type", "2"};
  params[n++] = (s3_param){"prefix", prefix};
  params[n++] = (s3_param){"max-keys", max};
  if (delimiter != NULL) params[n++] = (s3_param){"delimiter", delimiter};
  if (token != NULL) params[n++] = (s3_param){"continuation-token", token};
  req.method = "GET";
  req.bucket = bucket;
  req.params = params;
  req.num_params = n;
  rc = s3_execute(fs, cfg, &req, &resp, status);
  if (rc == 0 && s3_parse_listing(resp.body.data, resp.body.len, l) != 0) {
    TF_SetStatus(status, TF_INTERNAL, "s3: could not parse a listing");
    rc = -1;
  }
  s3_response_free(&resp);
  return rc;
}

/* Whether anything lies under key + "/" (a marker or a descendant). */
static int is_prefix(s3_fs* fs, const s3_config* cfg, const s3_path* p,
                     TF_Status* status) {
  s3_listing l;
  char* prefix = key_with_slash(p->key);
  int found;
  memset(&l, 0, sizeof l);
  if (prefix == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  found = list_page(fs, cfg, p->bucket, prefix, "/", 1, NULL, &l, status);
  if (found == 0) found = l.keys.count + l.prefixes.count > 0;
  s3_listing_free(&l);
  free(prefix);
  return found;
}

/* A request with no parameters and no body: HEAD, DELETE, an empty PUT
 * (a directory marker, CreateBucket). resp may be NULL when only the
 * outcome matters. */
static int simple_request(s3_fs* fs, const s3_config* cfg, const char* method,
                          const char* bucket, const char* key,
                          s3_response* resp, TF_Status* status) {
  s3_request req;
  s3_response ignored;
  int rc;
  memset(&req, 0, sizeof req);
  memset(&ignored, 0, sizeof ignored);
  req.method = method;
  req.bucket = bucket;
  req.key = key;
  rc = s3_execute(fs, cfg, &req, resp != NULL ? resp : &ignored, status);
  s3_response_free(&ignored);
  return rc;
}

static int head(s3_fs* fs, const s3_config* cfg, const char* bucket,
                const char* key, s3_response* resp, TF_Status* status) {
  return simple_request(fs, cfg, "HEAD", bucket, key, resp, status);
}

int s3_probe(s3_fs* fs, const s3_config* cfg, const s3_path* p, int64_t* size,
             int64_t* mtime_nsec, TF_Status* status) {
  s3_response resp;
  int rc;
  memset(&resp, 0, sizeof resp);
  *size = 0;
  *mtime_nsec = 0;
  if (*p->bucket == '\0') {
    TF_SetStatus(status, TF_OK, "");
    return S3_DIR; /* the root: the account's buckets */
  }
  if (*p->key == '\0') {
    rc = head(fs, cfg, p->bucket, NULL, &resp, status);
    s3_response_free(&resp);
    if (rc == 0) return S3_DIR;
    if (resp.http == 404) {
      TF_SetStatus(status, TF_OK, "");
      return S3_MISSING;
    }
    return -1;
  }
  rc = head(fs, cfg, p->bucket, p->key, &resp, status);
  s3_response_free(&resp);
  if (rc == 0) {
    *size = resp.length;
    *mtime_nsec = resp.mtime_nsec;
    return S3_FILE;
  }
  if (resp.http != 404) return -1;
  rc = is_prefix(fs, cfg, p, status);
  if (rc < 0) {
    /* A missing bucket answers the listing with NoSuchBucket. */
    if (TF_GetCode(status) == TF_NOT_FOUND) {
      TF_SetStatus(status, TF_OK, "");
      return S3_MISSING;
    }
    return -1;
  }
  TF_SetStatus(status, TF_OK, "");
  return rc ? S3_DIR : S3_MISSING;
}

void s3_set_missing(s3_fs* fs, const s3_config* cfg, const s3_path* p,
                    const char* what, TF_Status* status) {
  char msg[1200];
  char* slash = strrchr(p->key, '/');
  if (slash != NULL) {
    /* "file/x": S3 would hold both keys, but a file has no children. */
    s3_response resp;
    TF_Status* ignored = TF_NewStatus();
    int rc;
    *slash = '\0';
    memset(&resp, 0, sizeof resp);
    rc = head(fs, cfg, p->bucket, p->key, &resp, ignored);
    s3_response_free(&resp);
    TF_DeleteStatus(ignored);
    if (rc == 0) {
      snprintf(msg, sizeof msg, "%s s3://%s/%s/%s: s3://%s/%s is a file, not a directory",
               what, p->bucket, p->key, slash + 1, p->bucket, p->key);
      *slash = '/';
      TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
      return;
    }
    *slash = '/';
  }
  snprintf(msg, sizeof msg, "%s s3://%s/%s: no such file or directory", what,
           p->bucket, p->key);
  TF_SetStatus(status, TF_NOT_FOUND, msg);
}

/* The kind at path, or -1 with status set; parses into p. */
static int probe_path(s3_fs* fs, const s3_config* cfg, const char* path,
                      s3_path* p, int64_t* size, int64_t* mtime,
                      TF_Status* status) {
  if (s3_path_parse(path, p, status) != 0) return -1;
  return s3_probe(fs, cfg, p, size, mtime, status);
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
  s3_config defaults;
  s3_fs* fs;
  static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
  pthread_once(&curl_once, init_curl);
  fs = calloc(1, sizeof *fs);
  if (fs == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  s3_config_from_environment(&defaults);
  if (plugin_fs_init(&fs->base, &s3_schema, &defaults, NULL, status) != 0) {
    free(fs);
    return;
  }
  pthread_mutex_init(&fs->lock, NULL);
  filesystem->plugin_filesystem = fs;
  plugin_set_ok(status);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  s3_fs* fs = s3_fs_of(filesystem);
  int i;
  if (fs == NULL) return;
  for (i = 0; i < fs->idle_count; ++i) curl_easy_cleanup(fs->idle[i]);
  free(fs->idle);
  plugin_fs_destroy(&fs->base);
  pthread_mutex_destroy(&fs->lock);
  free(fs);
  filesystem->plugin_filesystem = NULL;
}

/* ---- queries ------------------------------------------------------------------------- */

static void fs_stat(const TF_Filesystem* filesystem, const char* path,
                    TF_FileStatistics* stats, TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  s3_path p;
  int64_t size, mtime;
  int kind = probe_path(fs, cfg, path, &p, &size, &mtime, status);
  if (kind == S3_MISSING) s3_set_missing(fs, cfg, &p, "stat", status);
  if (kind > 0) {
    stats->length = kind == S3_FILE ? size : 0;
    stats->mtime_nsec = mtime;
    stats->is_directory = kind == S3_DIR;
  }
  if (kind >= 0) s3_path_free(&p);
  s3_config_release(fs, cfg);
}

static void fs_path_exists(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  TF_FileStatistics stats;
  fs_stat(filesystem, path, &stats, status);
}

typedef struct exists_job {
  const TF_Filesystem* filesystem;
  char** paths;
  TF_Status** statuses;
  int missing;
} exists_job;

static void exists_one(void* arg, int i) {
  exists_job* job = arg;
  TF_Status* own = job->statuses != NULL ? job->statuses[i] : TF_NewStatus();
  fs_path_exists(job->filesystem, job->paths[i], own);
  if (TF_GetCode(own) != TF_OK) __atomic_store_n(&job->missing, 1, __ATOMIC_RELAXED);
  if (job->statuses == NULL) TF_DeleteStatus(own);
}

static bool fs_paths_exist(const TF_Filesystem* filesystem, char** paths,
                           int num_files, TF_Status** statuses) {
  exists_job job = {filesystem, paths, statuses, 0};
  int concurrency = (int)plugin_config_int(&s3_fs_of(filesystem)->base.config,
                                           offsetof(s3_config, concurrency));
  s3_parallel(num_files, concurrency, exists_one, &job);
  return !job.missing;
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
  return plugin_translate_name(uri, 1);
}

/* Every key (and common prefix, with a delimiter) under prefix, all pages. */
static int list_all(s3_fs* fs, const s3_config* cfg, const char* bucket,
                    const char* prefix, const char* delimiter, s3_listing* l,
                    TF_Status* status) {
  char* token = NULL;
  do {
    if (list_page(fs, cfg, bucket, prefix, delimiter, 1000, token, l, status) != 0) {
      free(token);
      return -1;
    }
    free(token);
    token = l->truncated && l->next_token != NULL ? strdup(l->next_token) : NULL;
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
  s3_response_free(&resp);
  return rc;
}

static int fs_get_children(const TF_Filesystem* filesystem, const char* path,
                           char*** entries, TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  plugin_strlist out = {NULL, 0, 0};
  s3_listing l;
  s3_path p;
  char* prefix = NULL;
  size_t plen;
  int i, count = -1, marker = 0;
  memset(&l, 0, sizeof l);
  *entries = NULL;
  if (s3_path_parse(path, &p, status) != 0) goto done_cfg;
  if (*p.bucket == '\0') {
    if (list_buckets(fs, cfg, &l, status) != 0) goto done;
    for (i = 0; i < l.keys.count; ++i)
      if (plugin_strlist_push(&out, l.keys.items[i], strlen(l.keys.items[i])) != 0) goto oom;
    count = plugin_strlist_release(&out, entries);
    goto done;
  }
  prefix = *p.key != '\0' ? key_with_slash(p.key) : strdup("");
  if (prefix == NULL) goto oom;
  plen = strlen(prefix);
  if (list_all(fs, cfg, p.bucket, prefix, "/", &l, status) != 0) goto done;
  for (i = 0; i < l.keys.count; ++i) {
    const char* name = l.keys.items[i] + plen;
    if (*name == '\0') {
      marker = 1; /* the directory's own marker */
      continue;
    }
    if (plugin_strlist_push(&out, name, strlen(name)) != 0) goto oom;
  }
  for (i = 0; i < l.prefixes.count; ++i) {
    const char* name = l.prefixes.items[i] + plen;
    size_t n = strlen(name);
    if (n > 0 && name[n - 1] == '/') --n;
    if (n > 0 && plugin_strlist_push(&out, name, n) != 0) goto oom;
  }
  if (out.count == 0 && !marker) {
    /* Nothing under the prefix: a bucket, a file, or nothing at all. */
    int64_t size, mtime;
    int kind = s3_probe(fs, cfg, &p, &size, &mtime, status);
    if (kind == S3_MISSING) s3_set_missing(fs, cfg, &p, "list", status);
    if (kind == S3_FILE)
      set_status(status, TF_FAILED_PRECONDITION, "list s3://%s/%s: a file, not a directory", &p);
    if (kind != S3_DIR) goto done;
  }
  count = plugin_strlist_release(&out, entries);
  TF_SetStatus(status, TF_OK, "");
  goto done;
oom:
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
done:
  plugin_strlist_free(&out);
  s3_listing_free(&l);
  free(prefix);
  s3_path_free(&p);
done_cfg:
  s3_config_release(fs, cfg);
  return count;
}

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
  char* pattern = plugin_translate_name(uri_pattern, 1);
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
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  s3_path p;
  int64_t size, mtime;
  int kind = probe_path(fs, cfg, path, &p, &size, &mtime, status);
  if (kind < 0) goto done_cfg;
  if (kind != S3_MISSING) {
    set_status(status, TF_ALREADY_EXISTS, "create_dir s3://%s/%s: already exists", &p);
  } else if (*p.key == '\0') {
    simple_request(fs, cfg, "PUT", p.bucket, NULL, NULL, status); /* CreateBucket */
  } else {
    /* The parent must be a directory (or the bucket). */
    char* slash = strrchr(p.key, '/');
    s3_path parent = {p.bucket, p.key};
    int parent_kind;
    char* marker;
    if (slash != NULL) *slash = '\0';
    else parent.key = "";
    parent_kind = s3_probe(fs, cfg, &parent, &size, &mtime, status);
    if (slash != NULL) *slash = '/';
    if (parent_kind == S3_MISSING) {
      set_status(status, TF_NOT_FOUND, "create_dir s3://%s/%s: the parent does not exist", &p);
    } else if (parent_kind == S3_FILE) {
      set_status(status, TF_FAILED_PRECONDITION, "create_dir s3://%s/%s: the parent is a file", &p);
    } else if (parent_kind == S3_DIR) {
      marker = key_with_slash(p.key);
      if (marker == NULL) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
      else simple_request(fs, cfg, "PUT", p.bucket, marker, NULL, status);
      free(marker);
    }
  }
  s3_path_free(&p);
done_cfg:
  s3_config_release(fs, cfg);
}

static void fs_recursively_create_dir(const TF_Filesystem* filesystem,
                                      const char* path, TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  s3_path p;
  int64_t size, mtime;
  char* key;
  size_t i, n;
  int kind;
  if (s3_path_parse(path, &p, status) != 0) goto done_cfg;
  if (*p.bucket == '\0') {
    TF_SetStatus(status, TF_OK, "");
    goto done;
  }
  {
    /* The bucket first. */
    s3_path bucket = {p.bucket, ""};
    kind = s3_probe(fs, cfg, &bucket, &size, &mtime, status);
    if (kind < 0) goto done;
    if (kind == S3_MISSING && simple_request(fs, cfg, "PUT", p.bucket, NULL, NULL, status) != 0 &&
        TF_GetCode(status) != TF_ALREADY_EXISTS)
      goto done;
  }
  /* No component may be a file; then a marker for each, so that every level
   * outlives the removal of its children. */
  key = p.key;
  n = strlen(key);
  for (i = 1; i <= n; ++i) {
    if (i < n && key[i] != '/') continue;
    {
      char saved = key[i];
      s3_response resp;
      int rc;
      key[i] = '\0';
      memset(&resp, 0, sizeof resp);
      rc = head(fs, cfg, p.bucket, key, &resp, status);
      s3_response_free(&resp);
      if (rc == 0) {
        set_status(status, TF_FAILED_PRECONDITION,
                   "recursively_create_dir s3://%s/%s: a file is in the way", &p);
        key[i] = saved;
        goto done;
      }
      key[i] = saved;
      if (resp.http != 404) goto done;
    }
  }
  for (i = 1; i <= n; ++i) {
    if (i < n && key[i] != '/') continue;
    {
      char saved = key[i];
      int rc;
      key[i] = '/';
      {
        char keep = key[i + 1];
        key[i + 1] = '\0';
        rc = simple_request(fs, cfg, "PUT", p.bucket, key, NULL, status);
        key[i + 1] = keep;
      }
      key[i] = saved;
      if (rc != 0) goto done;
    }
  }
  TF_SetStatus(status, TF_OK, "");
done:
  s3_path_free(&p);
done_cfg:
  s3_config_release(fs, cfg);
}

static void fs_delete_file(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  s3_path p;
  int64_t size, mtime;
  int kind = probe_path(fs, cfg, path, &p, &size, &mtime, status);
  if (kind < 0) goto done_cfg;
  if (kind == S3_MISSING) s3_set_missing(fs, cfg, &p, "delete_file", status);
  else if (kind == S3_DIR)
    set_status(status, TF_FAILED_PRECONDITION, "delete_file s3://%s/%s: a directory", &p);
  else simple_request(fs, cfg, "DELETE", p.bucket, p.key, NULL, status);
  s3_path_free(&p);
done_cfg:
  s3_config_release(fs, cfg);
}

static void fs_delete_dir(const TF_Filesystem* filesystem, const char* path,
                          TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  s3_path p;
  s3_listing l;
  char* prefix = NULL;
  memset(&l, 0, sizeof l);
  if (s3_path_parse(path, &p, status) != 0) goto done_cfg;
  if (*p.key == '\0') {
    if (*p.bucket == '\0')
      TF_SetStatus(status, TF_FAILED_PRECONDITION, "delete_dir s3://: the root stays");
    else
      simple_request(fs, cfg, "DELETE", p.bucket, NULL, NULL, status); /* DeleteBucket */
    goto done;
  }
  prefix = key_with_slash(p.key);
  if (prefix == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    goto done;
  }
  if (list_page(fs, cfg, p.bucket, prefix, "/", 2, NULL, &l, status) != 0) goto done;
  if (l.keys.count + l.prefixes.count == 0) {
    int64_t size, mtime;
    int kind = s3_probe(fs, cfg, &p, &size, &mtime, status);
    if (kind == S3_FILE)
      set_status(status, TF_FAILED_PRECONDITION, "delete_dir s3://%s/%s: a file", &p);
    else if (kind == S3_MISSING)
      s3_set_missing(fs, cfg, &p, "delete_dir", status);
  } else if (l.keys.count + l.prefixes.count > 1 || l.prefixes.count > 0 ||
             strcmp(l.keys.items[0], prefix) != 0) {
    set_status(status, TF_FAILED_PRECONDITION, "delete_dir s3://%s/%s: not empty", &p);
  } else {
    simple_request(fs, cfg, "DELETE", p.bucket, prefix, NULL, status);
  }
done:
  free(prefix);
  s3_listing_free(&l);
  s3_path_free(&p);
done_cfg:
  s3_config_release(fs, cfg);
}

/* DeleteObjects, 1000 keys per request, batches in parallel. */
typedef struct delete_job {
  s3_fs* fs;
  const s3_config* cfg;
  const char* bucket;
  char** keys;
  int count;
  int failed_keys;
  s3_first_error error;
} delete_job;

static void xml_escape_into(s3_buf* b, const char* s) {
  for (; *s; ++s) {
    switch (*s) {
      case '&': s3_buf_append(b, "&amp;", 5); break;
      case '<': s3_buf_append(b, "&lt;", 4); break;
      case '>': s3_buf_append(b, "&gt;", 4); break;
      case '"': s3_buf_append(b, "&quot;", 6); break;
      case '\'': s3_buf_append(b, "&apos;", 6); break;
      default: s3_buf_append(b, s, 1);
    }
  }
}

static void delete_batch(void* arg, int batch) {
  delete_job* job = arg;
  int first = batch * 1000, last = first + 1000, i, errors;
  s3_buf body = {0};
  char md5[32], key[256], code[64];
  s3_param params[1] = {{"delete", NULL}};
  s3_request req;
  s3_response resp;
  TF_Status* status = TF_NewStatus();
  if (last > job->count) last = job->count;
  s3_buf_append(&body, "<Delete><Quiet>true</Quiet>", 27);
  for (i = first; i < last; ++i) {
    s3_buf_append(&body, "<Object><Key>", 13);
    xml_escape_into(&body, job->keys[i]);
    s3_buf_append(&body, "</Key></Object>", 15);
  }
  s3_buf_append(&body, "</Delete>", 9);
  s3_md5_base64(body.data, body.len, md5);
  memset(&req, 0, sizeof req);
  memset(&resp, 0, sizeof resp);
  req.method = "POST";
  req.bucket = job->bucket;
  req.params = params;
  req.num_params = 1;
  req.body = body.data;
  req.body_len = body.len;
  req.content_md5 = md5;
  errors = last - first;
  if (s3_execute(job->fs, job->cfg, &req, &resp, status) == 0) {
    errors = s3_parse_delete_errors(resp.body.data, resp.body.len, key, sizeof key,
                                    code, sizeof code);
    if (errors > 0) {
      char msg[400];
      snprintf(msg, sizeof msg, "delete s3://%s/%s: %s", job->bucket, key, code);
      TF_SetStatus(status, TF_UNKNOWN, msg);
    } else if (errors < 0) {
      /* Unreadable answer: count the batch as not deleted, and say so. */
      TF_SetStatus(status, TF_INTERNAL, "s3: could not parse a DeleteObjects answer");
    }
  }
  if (errors != 0) {
    __atomic_add_fetch(&job->failed_keys, errors > 0 ? errors : last - first, __ATOMIC_RELAXED);
    s3_first_error_record(&job->error, status);
  }
  s3_response_free(&resp);
  s3_buf_free(&body);
  TF_DeleteStatus(status);
}

static void fs_delete_recursively(const TF_Filesystem* filesystem,
                                  const char* path, uint64_t* undeleted_files,
                                  uint64_t* undeleted_dirs, TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  s3_path p;
  s3_listing l;
  char* prefix = NULL;
  int64_t size, mtime;
  int kind;
  memset(&l, 0, sizeof l);
  *undeleted_files = 0;
  *undeleted_dirs = 0;
  kind = probe_path(fs, cfg, path, &p, &size, &mtime, status);
  if (kind < 0) goto done_cfg;
  if (kind == S3_MISSING) {
    *undeleted_dirs = 1;
    s3_set_missing(fs, cfg, &p, "delete_recursively", status);
    goto done;
  }
  if (kind == S3_FILE) {
    if (simple_request(fs, cfg, "DELETE", p.bucket, p.key, NULL, status) != 0) *undeleted_files = 1;
    goto done;
  }
  if (*p.bucket == '\0') {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 "delete_recursively s3://: will not delete every bucket");
    goto done;
  }
  prefix = *p.key != '\0' ? key_with_slash(p.key) : strdup("");
  if (prefix == NULL || list_all(fs, cfg, p.bucket, prefix, NULL, &l, status) != 0) {
    if (prefix == NULL) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    *undeleted_dirs = 1;
    goto done;
  }
  {
    delete_job job;
    job.fs = fs;
    job.cfg = cfg;
    job.bucket = p.bucket;
    job.keys = l.keys.items;
    job.count = l.keys.count;
    job.failed_keys = 0;
    s3_first_error_init(&job.error);
    s3_parallel((job.count + 999) / 1000, (int)cfg->concurrency, delete_batch, &job);
    s3_first_error_take(&job.error, status);
    s3_first_error_destroy(&job.error);
    *undeleted_files = (uint64_t)job.failed_keys;
    if (job.failed_keys > 0) {
      *undeleted_dirs = 1;
      goto done;
    }
  }
  if (*p.key == '\0' && simple_request(fs, cfg, "DELETE", p.bucket, NULL, NULL, status) != 0) {
    *undeleted_dirs = 1;
    goto done;
  }
  TF_SetStatus(status, TF_OK, "");
done:
  free(prefix);
  s3_listing_free(&l);
  s3_path_free(&p);
done_cfg:
  s3_config_release(fs, cfg);
}

/* ---- copies ------------------------------------------------------------------------------ */

char* s3_create_multipart(s3_fs* fs, const s3_config* cfg, const s3_path* dst,
                          TF_Status* status) {
  s3_param params[1] = {{"uploads", NULL}};
  s3_request req;
  s3_response resp;
  char* upload_id = NULL;
  memset(&req, 0, sizeof req);
  memset(&resp, 0, sizeof resp);
  req.method = "POST";
  req.bucket = dst->bucket;
  req.key = dst->key;
  req.params = params;
  req.num_params = 1;
  if (s3_execute(fs, cfg, &req, &resp, status) == 0) {
    upload_id = s3_xml_find(resp.body.data, resp.body.len, "UploadId");
    if (upload_id == NULL)
      TF_SetStatus(status, TF_INTERNAL, "s3: CreateMultipartUpload gave no UploadId");
  }
  s3_response_free(&resp);
  return upload_id;
}

int s3_upload_part(s3_fs* fs, const s3_config* cfg, const s3_path* dst,
                   const char* upload_id, int part_number, const char* data,
                   size_t len, const char* copy_source, const char* copy_range,
                   char* etag_out, size_t etag_cap, TF_Status* status) {
  char number[16];
  s3_param params[2];
  s3_request req;
  s3_response resp;
  int rc;
  snprintf(number, sizeof number, "%d", part_number);
  params[0] = (s3_param){"partNumber", number};
  params[1] = (s3_param){"uploadId", upload_id};
  memset(&req, 0, sizeof req);
  memset(&resp, 0, sizeof resp);
  req.method = "PUT";
  req.bucket = dst->bucket;
  req.key = dst->key;
  req.params = params;
  req.num_params = 2;
  req.body = copy_source != NULL ? "" : data;
  req.body_len = copy_source != NULL ? 0 : len;
  req.copy_source = copy_source;
  req.copy_range = copy_range;
  rc = s3_execute(fs, cfg, &req, &resp, status);
  if (rc == 0) {
    char* etag = copy_source != NULL ? s3_xml_find(resp.body.data, resp.body.len, "ETag") : NULL;
    snprintf(etag_out, etag_cap, "%s", etag != NULL ? etag : resp.etag);
    free(etag);
  }
  s3_response_free(&resp);
  return rc;
}

int s3_complete_multipart(s3_fs* fs, const s3_config* cfg, const s3_path* dst,
                          const char* upload_id, char** etags, int parts,
                          TF_Status* status) {
  s3_param params[1] = {{"uploadId", upload_id}};
  s3_buf body = {0};
  s3_request req;
  s3_response resp;
  int i, rc;
  s3_buf_append(&body, "<CompleteMultipartUpload>", 25);
  for (i = 0; i < parts; ++i) {
    char part[256];
    snprintf(part, sizeof part, "<Part><PartNumber>%d</PartNumber><ETag>", i + 1);
    s3_buf_append(&body, part, strlen(part));
    xml_escape_into(&body, etags[i]);
    s3_buf_append(&body, "</ETag></Part>", 14);
  }
  if (s3_buf_append(&body, "</CompleteMultipartUpload>", 26) != 0) {
    s3_buf_free(&body);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  memset(&req, 0, sizeof req);
  memset(&resp, 0, sizeof resp);
  req.method = "POST";
  req.bucket = dst->bucket;
  req.key = dst->key;
  req.params = params;
  req.num_params = 1;
  req.body = body.data;
  req.body_len = body.len;
  rc = s3_execute(fs, cfg, &req, &resp, status);
  s3_response_free(&resp);
  s3_buf_free(&body);
  return rc;
}

void s3_abort_multipart(s3_fs* fs, const s3_config* cfg, const s3_path* dst,
                        const char* upload_id) {
  s3_param params[1] = {{"uploadId", upload_id}};
  s3_request req;
  s3_response resp;
  TF_Status* ignored = TF_NewStatus();
  memset(&req, 0, sizeof req);
  memset(&resp, 0, sizeof resp);
  req.method = "DELETE";
  req.bucket = dst->bucket;
  req.key = dst->key;
  req.params = params;
  req.num_params = 1;
  s3_execute(fs, cfg, &req, &resp, ignored);
  s3_response_free(&resp);
  TF_DeleteStatus(ignored);
}

/* "bucket/key", as x-amz-copy-source names an object. */
static char* copy_source(const s3_path* src, TF_Status* status) {
  size_t n = strlen(src->bucket) + strlen(src->key) + 2;
  char* source = malloc(n);
  if (source == NULL) TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
  else snprintf(source, n, "%s/%s", src->bucket, src->key);
  return source;
}

typedef struct copy_job {
  s3_fs* fs;
  const s3_config* cfg;
  const s3_path* dst;
  const char* upload_id;
  const char* source;
  int64_t length;
  char** etags;
  s3_first_error error;
} copy_job;

static void copy_part(void* arg, int i) {
  copy_job* job = arg;
  int64_t first = (int64_t)i * job->cfg->part_size;
  int64_t last = first + job->cfg->part_size - 1;
  char range[64], etag[96];
  TF_Status* status = TF_NewStatus();
  if (last >= job->length) last = job->length - 1;
  snprintf(range, sizeof range, "bytes=%lld-%lld", (long long)first, (long long)last);
  if (!s3_first_error_failed(&job->error) &&
      s3_upload_part(job->fs, job->cfg, job->dst, job->upload_id, i + 1, NULL, 0,
                     job->source, range, etag, sizeof etag, status) == 0 &&
      (job->etags[i] = strdup(etag)) == NULL)
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
  s3_first_error_record(&job->error, status);
  TF_DeleteStatus(status);
}

int s3_copy_parts(s3_fs* fs, const s3_config* cfg, const s3_path* src, int64_t length,
                  const s3_path* dst, const char* upload_id, char** etags,
                  TF_Status* status) {
  copy_job job;
  int rc;
  job.fs = fs;
  job.cfg = cfg;
  job.dst = dst;
  job.upload_id = upload_id;
  job.length = length;
  job.etags = etags;
  job.source = copy_source(src, status);
  if (job.source == NULL) return -1;
  s3_first_error_init(&job.error);
  s3_parallel((int)((length + cfg->part_size - 1) / cfg->part_size), (int)cfg->concurrency,
              copy_part, &job);
  rc = s3_first_error_take(&job.error, status);
  s3_first_error_destroy(&job.error);
  free((char*)job.source);
  return rc;
}

int s3_copy_object(s3_fs* fs, const s3_config* cfg, const s3_path* src,
                   int64_t size, const s3_path* dst, TF_Status* status) {
  int parts = (int)((size + cfg->part_size - 1) / cfg->part_size), i, rc = -1;
  char** etags;
  char* upload_id;
  if (size <= cfg->part_size) {
    s3_request req;
    s3_response resp;
    char* source = copy_source(src, status);
    if (source == NULL) return -1;
    memset(&req, 0, sizeof req);
    memset(&resp, 0, sizeof resp);
    req.method = "PUT";
    req.bucket = dst->bucket;
    req.key = dst->key;
    req.body = "";
    req.copy_source = source;
    rc = s3_execute(fs, cfg, &req, &resp, status);
    s3_response_free(&resp);
    free(source);
    return rc;
  }
  etags = calloc((size_t)parts, sizeof *etags);
  if (etags == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  upload_id = s3_create_multipart(fs, cfg, dst, status);
  if (upload_id != NULL) {
    if (s3_copy_parts(fs, cfg, src, size, dst, upload_id, etags, status) == 0)
      rc = s3_complete_multipart(fs, cfg, dst, upload_id, etags, parts, status);
    if (rc != 0) s3_abort_multipart(fs, cfg, dst, upload_id);
    free(upload_id);
  }
  for (i = 0; i < parts; ++i) free(etags[i]);
  free(etags);
  return rc;
}

/* Both rename and copy: the source must be a file, the target not a
 * directory. */
static void copy_or_rename(const TF_Filesystem* filesystem, const char* src_path,
                           const char* dst_path, int remove_source,
                           TF_Status* status) {
  const char* what = remove_source ? "rename" : "copy";
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  s3_path src, dst = {NULL, NULL};
  int64_t size, mtime, ignored_size;
  int kind = probe_path(fs, cfg, src_path, &src, &size, &mtime, status);
  char msg[600];
  if (kind < 0) goto done_cfg;
  if (kind == S3_MISSING) {
    s3_set_missing(fs, cfg, &src, what, status);
    goto done;
  }
  if (kind == S3_DIR) {
    snprintf(msg, sizeof msg, "%s s3://%s/%s: a directory (only files %s)", what,
             src.bucket, src.key, remove_source ? "are renamed" : "are copied");
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    goto done;
  }
  kind = probe_path(fs, cfg, dst_path, &dst, &ignored_size, &mtime, status);
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
    parent_kind = s3_probe(fs, cfg, &parent, &ignored_size, &mtime, status);
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
  if (strcmp(src.bucket, dst.bucket) == 0 && strcmp(src.key, dst.key) == 0) {
    TF_SetStatus(status, TF_OK, "");
    goto done;
  }
  if (s3_copy_object(fs, cfg, &src, size, &dst, status) != 0) goto done;
  if (remove_source) simple_request(fs, cfg, "DELETE", src.bucket, src.key, NULL, status);
  else TF_SetStatus(status, TF_OK, "");
done:
  s3_path_free(&src);
  s3_path_free(&dst);
done_cfg:
  s3_config_release(fs, cfg);
}

static void fs_rename_file(const TF_Filesystem* filesystem, const char* src,
                           const char* dst, TF_Status* status) {
  copy_or_rename(filesystem, src, dst, 1, status);
}

static void fs_copy_file(const TF_Filesystem* filesystem, const char* src,
                         const char* dst, TF_Status* status) {
  copy_or_rename(filesystem, src, dst, 0, status);
}

/* ---- registration ------------------------------------------------------------------------ */

static const TF_FilesystemOps s3_filesystem_ops = {
    .init = fs_init,
    .cleanup = fs_cleanup,
    .new_random_access_file = s3_new_random_access_file,
    .new_writable_file = s3_new_writable_file,
    .new_appendable_file = s3_new_appendable_file,
    .new_read_only_memory_region_from_file = s3_new_memory_region,
    .create_dir = fs_create_dir,
    .recursively_create_dir = fs_recursively_create_dir,
    .delete_file = fs_delete_file,
    .delete_dir = fs_delete_dir,
    .delete_recursively = fs_delete_recursively,
    .rename_file = fs_rename_file,
    .copy_file = fs_copy_file,
    .path_exists = fs_path_exists,
    .paths_exist = fs_paths_exist,
    .stat = fs_stat,
    .is_directory = fs_is_directory,
    .get_file_size = fs_get_file_size,
    .translate_name = fs_translate_name,
    .get_children = fs_get_children,
    .get_matching_paths = fs_get_matching_paths,
    PLUGIN_CONFIGURATION_OPS};

static const plugin_scheme s3_schemes[] = {
    {"s3", &s3_filesystem_ops, &s3_random_access_file_ops,
     &s3_writable_file_ops, &s3_memory_region_ops}};

PLUGIN_DEFINE(s3_schemes, "s3", "0.1.0",
              ASYNCFS_PLUGIN_ATOMIC_WRITES | ASYNCFS_PLUGIN_NETWORK)
