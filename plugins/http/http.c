/* http:// and https://, read-only, on the object-store engine.
 *
 * stat is a HEAD (size, Last-Modified, ETag); a path whose redirects end
 * at a URL with a trailing "/" is a folder (nginx and http.server answer a
 * folder's name without it so). Reads are the engine's: one GET at the
 * open, ranged GETs pinned to a strong ETag after it, a server that
 * ignores Range read by skipping to the range. Redirects are followed up
 * to max_redirects; the bearer token and the configured headers go to the
 * URL's own origin only, never to another host a redirect names. A
 * folder's children come from its HTML index page (http_index.c). Every
 * write answers UNIMPLEMENTED, naming the scheme. */
#define _POSIX_C_SOURCE 200809L

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http_internal.h"

#define MiB ((int64_t)1 << 20)

/* ---- settings ----------------------------------------------------------------------- */

static const plugin_option http_options[] = {
    {"bearer_token", "sent as Authorization: Bearer <token> to the URL's own host; write-only",
     PLUGIN_OPTION_TEXT, offsetof(http_config, bearer_token), 0, 0, 1},
    {"headers", "\"Name: value\" lines sent with every request to the URL's own host",
     PLUGIN_OPTION_TEXT, offsetof(http_config, headers), 0, 0, 0},
    OBJSTORE_OPTIONS(http_config, transport),
    {"read_ahead", "bytes fetched with the open of a file for reading", PLUGIN_OPTION_INT,
     offsetof(http_config, read_ahead), 0, 64 * MiB, 0},
    {"part_size", "a large read goes as ranged GETs of this size, all in flight at once",
     PLUGIN_OPTION_INT, offsetof(http_config, part_size), 64 * 1024, 1024 * MiB, 0},
    {"max_redirects", "redirects followed per request", PLUGIN_OPTION_INT,
     offsetof(http_config, max_redirects), 0, 50, 0},
};

static const plugin_schema http_schema = {"http", http_options,
                                          (int)(sizeof http_options / sizeof http_options[0]),
                                          sizeof(http_config)};

static const http_config http_defaults = {
    {0}, "", "", OBJSTORE_DEFAULT_SETTINGS, 64 * 1024, 8 * MiB, 10};

static http_fs* fs_of(const TF_Filesystem* filesystem) { return filesystem->plugin_filesystem; }

/* ---- URLs ---------------------------------------------------------------------------- */

/* scheme://host/rest for the path "/host/rest" (with a trailing "/" when
 * folder), the bytes a URL cannot carry percent-encoded, onto the empty
 * b; 0, or -1 when out of memory. */
static int url_of(plugin_buf* b, const char* scheme, const char* path, int folder) {
  static const char keep[] = "-._~!$&'()*+,;=:@/%";
  const char* p = path;
  char esc[4];
  while (*p == '/') ++p;
  if (plugin_buf_append(b, scheme, strlen(scheme)) != 0 || plugin_buf_append(b, "://", 3) != 0) return -1;
  for (; *p != '\0'; ++p) {
    unsigned char c = (unsigned char)*p;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
        (c != '\0' && strchr(keep, c) != NULL)) {
      if (plugin_buf_append(b, p, 1) != 0) return -1;
    } else {
      snprintf(esc, sizeof esc, "%%%02X", c);
      if (plugin_buf_append(b, esc, 3) != 0) return -1;
    }
  }
  /* the host's root, or a folder: a trailing "/" */
  if ((folder || strchr(b->data + strlen(scheme) + 3, '/') == NULL) && b->data[b->len - 1] != '/')
    return plugin_buf_append(b, "/", 1);
  return 0;
}

/* ---- the store's hooks --------------------------------------------------------------- */

/* A request of the http store: the engine's (the URL, headers, the
 * settings snapshot as cfg), the range asked for and the ETag it is
 * pinned to. */
typedef struct http_call {
  objstore_call base;
  const http_config* cfg;
  char range[64];
  char if_match[96];
} http_call;

/* A request for x (its method set) of path, a folder's URL when folder,
 * bound to x, with max_redirects from the settings; NULL with status set
 * and nothing left bound when out of memory. */
static http_call* call_bind(http_fs* fs, const char* path, int folder, objstore_exchange* x,
                            TF_Status* status) {
  http_call* c = objstore_call_new(sizeof *c, fs, x->method, path + strspn(path, "/"), NULL, x, status);
  if (c != NULL && url_of(&c->base.url, fs->scheme, path, folder) != 0) {
    plugin_set_oom(status);
    c = NULL;
  }
  if (c == NULL) {
    objstore_call_free(x);
    return NULL;
  }
  c->cfg = c->base.config;
  x->max_redirects = (int)c->cfg->max_redirects;
  return c;
}

static const char* url(const http_call* c) { return c->base.url.data; }

static struct curl_slist* add_header(struct curl_slist* list, const char* name, const char* value,
                                     int* failed) {
  char line[1200];
  struct curl_slist* grown;
  snprintf(line, sizeof line, "%s: %s", name, value);
  grown = curl_slist_append(list, line);
  if (grown == NULL) *failed = 1;
  return grown != NULL ? grown : list;
}

/* The headers of a try to url: the bytes as stored (identity), the range
 * and its pin, and the credentials only where they belong. */
static int http_authorize(void* store, objstore_exchange* x, TF_Status* status) {
  http_call* c = (http_call*)x->store_request;
  const char* to = x->resp->redirected_to != NULL ? x->resp->redirected_to : url(c);
  struct curl_slist** headers = &c->base.sent;
  int failed = 0;
  (void)store;
  curl_slist_free_all(*headers);
  *headers = add_header(NULL, "Accept-Encoding", "identity", &failed);
  if (*c->range) *headers = add_header(*headers, "Range", c->range, &failed);
  if (*c->if_match) *headers = add_header(*headers, "If-Match", c->if_match, &failed);
  if (to == url(c) || objstore_same_origin(to, url(c))) {
    const char* line = c->cfg->headers;
    if (*c->cfg->bearer_token) {
      char bearer[1100];
      snprintf(bearer, sizeof bearer, "Bearer %s", c->cfg->bearer_token);
      *headers = add_header(*headers, "Authorization", bearer, &failed);
    }
    while (*line != '\0') { /* one header per line */
      const char* end = strchr(line, '\n');
      size_t n = end != NULL ? (size_t)(end - line) : strlen(line);
      if (n > 0 && n < 1100 && memchr(line, ':', n) != NULL) {
        char one[1100];
        struct curl_slist* grown;
        memcpy(one, line, n);
        one[n] = '\0';
        if (one[n - 1] == '\r') one[n - 1] = '\0';
        grown = curl_slist_append(*headers, one);
        if (grown == NULL) failed = 1;
        else *headers = grown;
      }
      line += n + (end != NULL);
    }
  }
  if (failed) {
    plugin_set_oom(status);
    return -1;
  }
  x->url = (char*)to;
  x->headers = *headers;
  return 0;
}

/* Whether the path asked for a folder (its URL ends in "/"). */
static int asks_folder(const http_call* c) { return url(c)[c->base.url.len - 1] == '/'; }

/* Whether the answer came from a folder's URL after redirects. */
static int answered_by_folder(const objstore_exchange* x) {
  const char* to = x->resp->redirected_to;
  return to != NULL && *to != '\0' && to[strlen(to) - 1] == '/';
}

/* A GET of a file that redirects to a folder would read its index page:
 * failed instead. */
static void http_read_answer(void* store, objstore_exchange* x) {
  const http_call* c = x->store_request;
  (void)store;
  if (x->resp->http / 100 == 2 && strcmp(x->method, "GET") == 0 && !asks_folder(c) &&
      answered_by_folder(x)) {
    x->resp->http = 409;
    snprintf(x->resp->error_code, sizeof x->resp->error_code, "a directory");
  }
}

static void http_describe(void* store, const objstore_exchange* x, char* out, size_t cap) {
  const http_call* c = x->store_request;
  (void)store;
  snprintf(out, cap, "%s %s", x->method, url(c));
}

static void http_set_error(void* store, const objstore_exchange* x, TF_Status* status) {
  char what[700], msg[1000], tries[48] = "";
  long http = x->resp->http;
  TF_Code code = objstore_code_for_http(http);
  http_describe(store, x, what, sizeof what);
  if (x->attempts > 1) snprintf(tries, sizeof tries, " (after %d attempts)", x->attempts);
  if (*x->resp->error_code) {
    snprintf(msg, sizeof msg, "%s: %s", what, x->resp->error_code);
    code = TF_FAILED_PRECONDITION;
  } else if (http == 412) {
    snprintf(msg, sizeof msg, "%s: the file changed since it was opened (HTTP 412)", what);
  } else if (http == 416) {
    snprintf(msg, sizeof msg, "%s: the range is past the end of the file (HTTP 416)", what);
  } else if ((http == 301 || http == 302 || http == 303 || http == 307 || http == 308) &&
             x->resp->location == NULL) {
    snprintf(msg, sizeof msg, "%s: HTTP %ld, a redirect without a Location", what, http);
    code = TF_UNAVAILABLE;
  } else {
    snprintf(msg, sizeof msg, "%s: HTTP %ld%s", what, http, tries);
  }
  TF_SetStatus(status, code, msg);
}

static int http_object_request(void* store, const char* path, const char* range,
                               const char* if_match, objstore_exchange* x, TF_Status* status) {
  http_call* c = call_bind(store, path, 0, x, status);
  if (c == NULL) return -1;
  if (range != NULL) snprintf(c->range, sizeof c->range, "%s", range);
  if (if_match != NULL) snprintf(c->if_match, sizeof c->if_match, "%s", if_match);
  return 0;
}

static void http_release_request(void* store, objstore_exchange* x) {
  (void)store;
  objstore_call_free(x);
}

static void http_name_object(void* store, const char* path, char* out, size_t cap) {
  const http_fs* fs = store;
  snprintf(out, cap, "%s:/%s", fs->scheme, path);
}

static int http_explain_missing(void* store, const char* path, const char* what,
                                const objstore_exchange* x, TF_Status* status);

static const objstore_store http_store = {
    OBJSTORE_STORE_VERSION, sizeof(objstore_store), "http", NULL, NULL,
    http_authorize,         NULL,                   http_read_answer,
    NULL,                   http_set_error,         http_describe,
    http_object_request,    http_release_request,   http_explain_missing,
    http_name_object,       NULL,                   NULL};

/* ---- lifecycle ------------------------------------------------------------------------ */

/* Reads are the engine's readers; the namespace is this file's own. */
static const objstore_fs_spec http_spec = {&http_store,
                                           NULL,
                                           offsetof(http_config, transport),
                                           offsetof(http_config, read_ahead),
                                           offsetof(http_config, part_size),
                                           NULL};

static void fs_init(TF_Filesystem* filesystem, const char* scheme, TF_Status* status) {
  http_fs* fs = objstore_fs_create(filesystem, sizeof *fs, &http_schema, &http_defaults, &http_spec, status);
  if (fs != NULL) fs->scheme = scheme; /* "https" too: in URLs and messages */
}

static void fs_init_http(TF_Filesystem* filesystem, TF_Status* status) {
  fs_init(filesystem, "http", status);
}

static void fs_init_https(TF_Filesystem* filesystem, TF_Status* status) {
  fs_init(filesystem, "https", status);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  http_fs* fs = fs_of(filesystem);
  if (fs == NULL) return;
  objstore_engine_free(fs->engine);
  plugin_fs_free(filesystem);
}

/* ---- queries -------------------------------------------------------------------------- */

/* The host alone ("/host"): its root, a folder. */
static int is_host_root(const char* path) {
  const char* p = path;
  while (*p == '/') ++p;
  return strchr(p, '/') == NULL;
}

static void explain_missing(http_fs* fs, const char* path, const char* what, TF_Status* status);

/* HEAD path (redirects followed): 0 with stats set, or -1 with status. A
 * server that refuses HEAD (405, 501) is asked for byte 0 instead. */
static int head(http_fs* fs, const char* path, TF_FileStatistics* stats, TF_Status* status) {
  objstore_exchange x;
  objstore_response resp;
  int rc;
  http_call* c;
  objstore_exchange_init(&x, &resp, "HEAD", NULL);
  if ((c = call_bind(fs, path, is_host_root(path), &x, status)) == NULL) return -1;
  rc = objstore_run(fs->engine, &c->cfg->transport, &x, status);
  if (rc != 0 && (resp.http == 405 || resp.http == 501)) {
    objstore_response_free(&resp);
    objstore_exchange_init(&x, &resp, "GET", c);
    snprintf(c->range, sizeof c->range, "bytes=0-0");
    x.max_redirects = (int)c->cfg->max_redirects;
    x.range_first = 0;
    x.expect = 1;
    rc = objstore_run(fs->engine, &c->cfg->transport, &x, status);
    if (rc == 0 && resp.total < 0) resp.total = resp.length;
  }
  if (rc != 0 && resp.http == 404) explain_missing(fs, path, "stat", status);
  if (rc == 0) {
    stats->is_directory = asks_folder(c) || answered_by_folder(&x);
    stats->length = stats->is_directory ? 0
                    : resp.total >= 0   ? resp.total
                    : resp.length >= 0  ? resp.length
                                        : 0;
    stats->mtime_nsec = resp.mtime_nsec;
  }
  objstore_response_free(&resp);
  objstore_call_free(&x);
  return rc;
}

/* What a 404 for path means: a file's child (FAILED_PRECONDITION, as a
 * local filesystem says it), or nothing there (NOT_FOUND). */
static void explain_missing(http_fs* fs, const char* path, const char* what, TF_Status* status) {
  char msg[1200], *parent = strdup(path), *slash;
  TF_FileStatistics stats;
  TF_Status* ignored = TF_NewStatus();
  const char* host_end = path;
  while (*host_end == '/') ++host_end;
  host_end = strchr(host_end, '/');
  slash = parent != NULL ? strrchr(parent, '/') : NULL;
  if (slash != NULL && host_end != NULL && slash - parent > host_end - path) {
    *slash = '\0';
    if (head(fs, parent, &stats, ignored) == 0 && !stats.is_directory) {
      snprintf(msg, sizeof msg, "%s %s:/%s: %s:/%s is a file, not a directory", what, fs->scheme,
               path, fs->scheme, parent);
      TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
      free(parent);
      TF_DeleteStatus(ignored);
      return;
    }
  }
  snprintf(msg, sizeof msg, "%s %s:/%s: no such file or directory", what, fs->scheme, path);
  TF_SetStatus(status, TF_NOT_FOUND, msg);
  free(parent);
  TF_DeleteStatus(ignored);
}

static int http_explain_missing(void* store, const char* path, const char* what,
                                const objstore_exchange* x, TF_Status* status) {
  (void)x;
  explain_missing(store, path, what, status);
  return 0;
}

static void fs_stat(const TF_Filesystem* filesystem, const char* path, TF_FileStatistics* stats,
                    TF_Status* status) {
  http_fs* fs = fs_of(filesystem);
  objstore_tree t; /* the settings snapshot */
  objstore_fs_begin(fs, &t);
  if (objstore_stat_cached(fs->engine, t.settings, path, stats)) {
    TF_SetStatus(status, TF_OK, "");
  } else if (head(fs, path, stats, status) == 0) {
    objstore_stat_remember(fs->engine, t.settings, path, stats);
  }
  objstore_fs_end(fs, &t);
}

static void fs_path_exists(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  TF_FileStatistics stats;
  head(fs_of(filesystem), path, &stats, status);
}

static bool fs_is_directory(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  TF_FileStatistics stats;
  char msg[700];
  if (head(fs_of(filesystem), path, &stats, status) != 0) return false;
  if (stats.is_directory) return true;
  snprintf(msg, sizeof msg, "%s:/%s is a file, not a folder", fs_of(filesystem)->scheme, path);
  TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
  return false;
}

/* A folder's children, from its index page. */
static int list_folder(const TF_Filesystem* filesystem, const char* path, plugin_listing* listing,
                       TF_Status* status) {
  http_fs* fs = fs_of(filesystem);
  objstore_exchange x;
  objstore_response resp;
  http_call* c;
  int rc;
  objstore_exchange_init(&x, &resp, "GET", NULL);
  if ((c = call_bind(fs, path, 1, &x, status)) == NULL) return -1;
  rc = objstore_run(fs->engine, &c->cfg->transport, &x, status);
  if (rc != 0 && resp.http == 404) {
    TF_FileStatistics stats;
    TF_Status* probe = TF_NewStatus();
    if (head(fs, path, &stats, probe) == 0 && !stats.is_directory) { /* a file, not a folder */
      char msg[1200];
      snprintf(msg, sizeof msg, "list %s:/%s: a file, not a directory", fs->scheme, path);
      TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    } else if (TF_GetCode(probe) != TF_OK) {
      TF_SetStatus(status, TF_GetCode(probe), TF_Message(probe)); /* missing, or a file's child */
    }
    TF_DeleteStatus(probe);
  }
  if (rc == 0 &&
      http_index_children(resp.body.data != NULL ? resp.body.data : "", resp.body.len,
                          resp.redirected_to != NULL ? resp.redirected_to : url(c), listing) != 0) {
    plugin_set_oom(status);
    rc = -1;
  }
  objstore_response_free(&resp);
  objstore_call_free(&x);
  return rc;
}

static int fs_get_children(const TF_Filesystem* filesystem, const char* path, char*** entries,
                           TF_Status* status) {
  plugin_listing listing;
  int count;
  memset(&listing, 0, sizeof listing);
  *entries = NULL;
  if (list_folder(filesystem, path, &listing, status) != 0) {
    plugin_listing_free(&listing);
    return -1;
  }
  count = plugin_listing_release(&listing, entries, NULL, NULL);
  if (count < 0) plugin_set_oom(status);
  return count;
}

static char* fs_translate_name(const TF_Filesystem* filesystem, const char* uri) {
  (void)filesystem;
  return plugin_translate_name(uri, PLUGIN_NAMES_HOST_TREE);
}

/* ---- writes: none --------------------------------------------------------------------- */

static void read_only(const TF_Filesystem* filesystem, const char* what, const char* path,
                      TF_Status* status) {
  char msg[800];
  const char* scheme = fs_of(filesystem)->scheme;
  snprintf(msg, sizeof msg, "%s %s:/%s: %s:// is read-only (the http plugin writes nothing)", what,
           scheme, path, scheme);
  TF_SetStatus(status, TF_UNIMPLEMENTED, msg);
}

static void fs_new_writable_file(const TF_Filesystem* filesystem, const char* path,
                                 TF_WritableFile* file, TF_Status* status) {
  file->plugin_file = NULL;
  read_only(filesystem, "write", path, status);
}

static void fs_new_appendable_file(const TF_Filesystem* filesystem, const char* path,
                                   TF_WritableFile* file, TF_Status* status) {
  file->plugin_file = NULL;
  read_only(filesystem, "append", path, status);
}

static void fs_create_dir(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  read_only(filesystem, "mkdir", path, status);
}

static void fs_delete_file(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  read_only(filesystem, "delete", path, status);
}

static void fs_delete_dir(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  read_only(filesystem, "rmdir", path, status);
}

static void fs_rename_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                           TF_Status* status) {
  (void)dst;
  read_only(filesystem, "rename", src, status);
}

static void fs_copy_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                         TF_Status* status) {
  (void)src;
  read_only(filesystem, "copy to", dst, status);
}

static void writer_cleanup(TF_WritableFile* file) { (void)file; }

/* ---- registration ----------------------------------------------------------------------- */

#define HTTP_FILESYSTEM_OPS(init_fn)                                                  \
  {                                                                                   \
    .init = init_fn, .cleanup = fs_cleanup, OBJSTORE_READER_OPS,                      \
    .new_writable_file = fs_new_writable_file,                                        \
    .new_appendable_file = fs_new_appendable_file,                                    \
    .create_dir = fs_create_dir, .delete_file = fs_delete_file,                       \
    .delete_dir = fs_delete_dir, .rename_file = fs_rename_file,                       \
    .copy_file = fs_copy_file, .path_exists = fs_path_exists, .stat = fs_stat,        \
    .is_directory = fs_is_directory, .translate_name = fs_translate_name,             \
    .get_children = fs_get_children, .flush_caches = objstore_fs_flush_caches,        \
    OBJSTORE_CONFIGURATION_OPS                                                        \
  }

static const TF_FilesystemOps http_filesystem_ops = HTTP_FILESYSTEM_OPS(fs_init_http);
static const TF_FilesystemOps https_filesystem_ops = HTTP_FILESYSTEM_OPS(fs_init_https);
static const TF_WritableFileOps http_writer_ops = {.cleanup = writer_cleanup};

static const plugin_scheme http_schemes[] = {
    {"http", &http_filesystem_ops, &objstore_file_ops, &http_writer_ops, &objstore_region_ops},
    {"https", &https_filesystem_ops, &objstore_file_ops, &http_writer_ops, &objstore_region_ops}};

PLUGIN_DEFINE(http_schemes, "http", "0.1.0", ASYNCFS_PLUGIN_NETWORK)
