/* gs://: Google Cloud Storage on the object-store engine.
 *
 * The namespace (stat, listings, glob, directories, deletes, renames) is
 * the engine's (objstore_tree.c), on the JSON API's request shapes
 * (gs_store.c); reads are the engine's readers, pinned to the generation
 * the open saw; writes are gs_files.c's. Settings come from the options
 * (plugin_config), over STORAGE_EMULATOR_HOST and
 * GOOGLE_CLOUD_PROJECT read when a filesystem is made. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_internal.h"
#include "plugin_paths.h"

#define KiB ((int64_t)1 << 10)
#define MiB ((int64_t)1 << 20)

/* ---- settings ------------------------------------------------------------------------ */

static const plugin_option gs_options[] = {
    {"endpoint", "the JSON API's base URL (\"\": STORAGE_EMULATOR_HOST, else Google's)",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, endpoint), 0, 0, 0},
    {"token", "an OAuth bearer token, sent as it is (never refreshed); write-only",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, token), 0, 0, 1},
    {"project", "the project buckets are listed and made in (GOOGLE_CLOUD_PROJECT)",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, project), 0, 0, 0},
    {"credentials_file",
     "a service account or authorized_user JSON file (\"\": GOOGLE_APPLICATION_CREDENTIALS, "
     "then gcloud's application-default file)",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, credentials_file), 0, 0, 0},
    {"location", "where a bucket that create_dir makes is kept (\"\": the service's default)",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, location), 0, 0, 0},
    OBJSTORE_OPTIONS(gs_config, transport),
    {"anonymous", "1: requests carry no credentials (public buckets)", PLUGIN_OPTION_INT,
     offsetof(gs_config, anonymous), 0, 1, 0},
    {"upload_threshold", "a file up to this size is uploaded in one request; above, in chunks",
     PLUGIN_OPTION_INT, offsetof(gs_config, upload_threshold), 0, 5120 * MiB, 0},
    {"chunk_size", "a resumable upload's chunk (rounded down to a multiple of 256 KiB)",
     PLUGIN_OPTION_INT, offsetof(gs_config, chunk_size), 256 * KiB, 1024 * MiB, 0},
    {"read_ahead", "bytes fetched with the open of a file for reading", PLUGIN_OPTION_INT,
     offsetof(gs_config, read_ahead), 0, 64 * MiB, 0},
    {"part_size", "a large read goes as ranged GETs of this size, all in flight at once",
     PLUGIN_OPTION_INT, offsetof(gs_config, part_size), 64 * KiB, 1024 * MiB, 0},
};

static const plugin_schema gs_schema = {"gs", gs_options,
                                        (int)(sizeof gs_options / sizeof gs_options[0]),
                                        sizeof(gs_config)};

static gs_fs* fs_of(const TF_Filesystem* filesystem) { return filesystem->plugin_filesystem; }

/* ---- lifecycle ------------------------------------------------------------------------- */

static void init_curl(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

static const char* env_or(const char* name, const char* otherwise) {
  const char* value = getenv(name);
  return value != NULL && *value != '\0' ? value : otherwise;
}

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
  gs_config defaults = {{0}, "", "", "", "", "", OBJSTORE_DEFAULT_SETTINGS, 0, 16 * MiB, 16 * MiB,
                        64 * KiB, 8 * MiB};
  gs_fs* fs;
  pthread_once(&curl_once, init_curl);
  defaults.endpoint = (char*)env_or("STORAGE_EMULATOR_HOST", "");
  defaults.project = (char*)env_or("GOOGLE_CLOUD_PROJECT", env_or("GCLOUD_PROJECT", ""));
  fs = plugin_fs_create(filesystem, sizeof *fs, &gs_schema, &defaults, NULL, status);
  if (fs == NULL) return;
  fs->engine = objstore_engine_new(&gs_store, fs);
  if (fs->engine == NULL) {
    plugin_fs_free(filesystem);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "gs: out of memory");
    return;
  }
  gs_credentials_init(fs);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  gs_fs* fs = fs_of(filesystem);
  if (fs == NULL) return;
  objstore_engine_free(fs->engine);
  gs_credentials_destroy(fs);
  plugin_fs_free(filesystem);
}

/* The only cache kept by default is the engine's open connections. */
static void fs_flush_caches(const TF_Filesystem* filesystem) {
  objstore_engine_close_idle(fs_of(filesystem)->engine);
}

/* ---- the namespace: the engine's, on this call's settings ------------------------------- */

/* Declares t, the namespace as this call's settings see it, around body. */
#define WITH_TREE(filesystem, body)            \
  do {                                         \
    gs_fs* fs_ = fs_of(filesystem);            \
    gs_config* cfg_ = gs_config_acquire(fs_);  \
    objstore_tree t = gs_tree(fs_, cfg_);      \
    body;                                      \
    gs_config_release(fs_, cfg_);              \
  } while (0)

static void fs_stat(const TF_Filesystem* filesystem, const char* path, TF_FileStatistics* stats,
                    TF_Status* status) {
  WITH_TREE(filesystem, objstore_tree_stat(&t, path, stats, status));
}

static void fs_path_exists(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  TF_FileStatistics stats;
  fs_stat(filesystem, path, &stats, status);
}

static bool fs_paths_exist(const TF_Filesystem* filesystem, char** paths, int n,
                           TF_Status** statuses) {
  bool all = false;
  WITH_TREE(filesystem, all = objstore_tree_paths_exist(&t, paths, n, statuses));
  return all;
}

static void fs_stat_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                          TF_FileStatistics* stats, TF_Status** statuses) {
  WITH_TREE(filesystem, objstore_tree_stat_files(&t, paths, n, stats, statuses));
}

static bool fs_is_directory(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  TF_FileStatistics stats;
  fs_stat(filesystem, path, &stats, status);
  if (TF_GetCode(status) != TF_OK) return false;
  if (!stats.is_directory) {
    char msg[1100];
    snprintf(msg, sizeof msg, "gs:/%s is a file, not a directory", path);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    return false;
  }
  return true;
}

static int64_t fs_get_file_size(const TF_Filesystem* filesystem, const char* path,
                                TF_Status* status) {
  TF_FileStatistics stats;
  fs_stat(filesystem, path, &stats, status);
  if (TF_GetCode(status) != TF_OK) return -1;
  if (stats.is_directory) {
    char msg[1100];
    snprintf(msg, sizeof msg, "gs:/%s is a directory", path);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    return -1;
  }
  return stats.length;
}

static char* fs_translate_name(const TF_Filesystem* filesystem, const char* uri) {
  (void)filesystem;
  return plugin_translate_name(uri, PLUGIN_NAMES_KEYS);
}

static int gs_list(const TF_Filesystem* filesystem, const char* path, plugin_listing* out,
                   TF_Status* status) {
  int rc = -1;
  WITH_TREE(filesystem, rc = objstore_tree_list(&t, path, out, status));
  return rc;
}

PLUGIN_DEFINE_LISTING(gs_list)

static int fs_get_matching_paths(const TF_Filesystem* filesystem, const char* pattern,
                                 char*** entries, TF_Status* status) {
  int count = -1;
  WITH_TREE(filesystem, count = objstore_tree_glob(&t, pattern, entries, status));
  return count;
}

static void fs_create_dir(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  WITH_TREE(filesystem, objstore_tree_create_dir(&t, path, status));
}

static void fs_recursively_create_dir(const TF_Filesystem* filesystem, const char* path,
                                      TF_Status* status) {
  WITH_TREE(filesystem, objstore_tree_recursively_create_dir(&t, path, status));
}

static void fs_delete_file(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  WITH_TREE(filesystem, objstore_tree_delete_file(&t, path, status));
}

static void fs_delete_dir(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  WITH_TREE(filesystem, objstore_tree_delete_dir(&t, path, status));
}

static void fs_delete_recursively(const TF_Filesystem* filesystem, const char* path,
                                  uint64_t* undeleted_files, uint64_t* undeleted_dirs,
                                  TF_Status* status) {
  WITH_TREE(filesystem,
            objstore_tree_delete_recursively(&t, path, undeleted_files, undeleted_dirs, status));
}

static void transfer(const TF_Filesystem* filesystem, const char* src, const char* dst,
                     int remove_source, TF_Status* status) {
  WITH_TREE(filesystem, objstore_tree_transfer(&t, src, dst, remove_source, status));
}

PLUGIN_DEFINE_RENAME_AND_COPY(transfer)

/* ---- registration ------------------------------------------------------------------------ */

static const TF_FilesystemOps gs_filesystem_ops = {
    PLUGIN_FILESYSTEM_OPS(gs_, fs_), .flush_caches = fs_flush_caches, .read_files = gs_read_files,
    .stat_files = fs_stat_files, PLUGIN_CONFIGURATION_OPS};

static const plugin_scheme gs_schemes[] = {
    {"gs", &gs_filesystem_ops, &objstore_file_ops, &gs_writable_file_ops, &objstore_region_ops}};

PLUGIN_DEFINE(gs_schemes, "gs", "0.1.0", ASYNCFS_PLUGIN_ATOMIC_WRITES | ASYNCFS_PLUGIN_NETWORK)
