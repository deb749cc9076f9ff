/* A store's filesystem ops on the namespace (objstore.h, "a store's
 * filesystem on the namespace"): each takes the current settings, makes
 * the namespace's view of them, and hands the call to objstore_tree.c. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objstore.h"
#include "plugin_paths.h"

static objstore_fs* fs_of(const TF_Filesystem* filesystem) { return filesystem->plugin_filesystem; }

void* objstore_fs_create(TF_Filesystem* filesystem, size_t size, const plugin_schema* schema,
                         const void* defaults, const objstore_fs_spec* spec, TF_Status* status) {
  objstore_fs* fs = plugin_fs_create(filesystem, size, schema, defaults, NULL, status);
  if (fs == NULL) return NULL;
  fs->hooks = spec->hooks;
  fs->scheme = spec->store->name;
  fs->transport_offset = spec->transport_offset;
  fs->read_ahead_offset = spec->read_ahead_offset;
  fs->part_size_offset = spec->part_size_offset;
  fs->credential_source = spec->credential_source;
  fs->engine = objstore_engine_new(spec->store, fs);
  if (fs->engine == NULL) {
    plugin_fs_free(filesystem);
    plugin_set_oom(status);
    return NULL;
  }
  return fs;
}

void objstore_fs_begin(objstore_fs* fs, objstore_tree* t) {
  char* config = plugin_config_acquire(&fs->base.config);
  t->hooks = fs->hooks;
  t->engine = fs->engine;
  t->config = config;
  t->settings = (const objstore_settings*)(config + fs->transport_offset);
  t->scheme = fs->scheme;
}

void objstore_fs_end(objstore_fs* fs, objstore_tree* t) {
  plugin_config_release(&fs->base.config, (void*)t->config);
}

/* body, with t the namespace as the current settings see it. */
#define WITH_TREE(body)                  \
  do {                                   \
    objstore_tree t;                     \
    objstore_fs_begin(fs_of(filesystem), &t); \
    body;                                \
    objstore_fs_end(fs_of(filesystem), &t); \
  } while (0)

void objstore_fs_stat(const TF_Filesystem* filesystem, const char* path, TF_FileStatistics* stats,
                      TF_Status* status) {
  WITH_TREE(objstore_tree_stat(&t, path, stats, status));
}

void objstore_fs_path_exists(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  TF_FileStatistics stats;
  objstore_fs_stat(filesystem, path, &stats, status);
}

bool objstore_fs_paths_exist(const TF_Filesystem* filesystem, char** paths, int n,
                             TF_Status** statuses) {
  bool all = false;
  WITH_TREE(all = objstore_tree_paths_exist(&t, paths, n, statuses));
  return all;
}

void objstore_fs_stat_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                            TF_FileStatistics* stats, TF_Status** statuses) {
  WITH_TREE(objstore_tree_stat_files(&t, paths, n, stats, statuses));
}

bool objstore_fs_is_directory(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  TF_FileStatistics stats;
  objstore_fs_stat(filesystem, path, &stats, status);
  if (TF_GetCode(status) != TF_OK) return false;
  if (!stats.is_directory) {
    char msg[1100];
    snprintf(msg, sizeof msg, "%s:/%s is a file, not a directory", fs_of(filesystem)->scheme, path);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    return false;
  }
  return true;
}

int64_t objstore_fs_get_file_size(const TF_Filesystem* filesystem, const char* path,
                                  TF_Status* status) {
  TF_FileStatistics stats;
  objstore_fs_stat(filesystem, path, &stats, status);
  if (TF_GetCode(status) != TF_OK) return -1;
  if (stats.is_directory) {
    char msg[1100];
    snprintf(msg, sizeof msg, "%s:/%s is a directory", fs_of(filesystem)->scheme, path);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    return -1;
  }
  return stats.length;
}

char* objstore_fs_translate_name(const TF_Filesystem* filesystem, const char* uri) {
  (void)filesystem;
  return plugin_translate_name(uri, PLUGIN_NAMES_KEYS);
}

static int list(const TF_Filesystem* filesystem, const char* path, plugin_listing* out,
                TF_Status* status) {
  int rc = -1;
  WITH_TREE(rc = objstore_tree_list(&t, path, out, status));
  return rc;
}

int objstore_fs_get_children(const TF_Filesystem* filesystem, const char* path, char*** entries,
                             TF_Status* status) {
  return plugin_run_listing(list, filesystem, path, entries, NULL, NULL, status);
}

int objstore_fs_get_children_stats(const TF_Filesystem* filesystem, const char* path,
                                   char*** entries, TF_FileStatistics** stats, TF_Status* status) {
  return plugin_run_listing(list, filesystem, path, entries, stats, NULL, status);
}

int objstore_fs_get_children_kinds(const TF_Filesystem* filesystem, const char* path,
                                   char*** entries, TF_FileStatistics** stats, int** kinds,
                                   TF_Status* status) {
  return plugin_run_listing(list, filesystem, path, entries, stats, kinds, status);
}

int objstore_fs_get_matching_paths(const TF_Filesystem* filesystem, const char* pattern,
                                   char*** entries, TF_Status* status) {
  int count = -1;
  WITH_TREE(count = objstore_tree_glob(&t, pattern, entries, status));
  return count;
}

void objstore_fs_create_dir(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  WITH_TREE(objstore_tree_create_dir(&t, path, status));
}

void objstore_fs_recursively_create_dir(const TF_Filesystem* filesystem, const char* path,
                                        TF_Status* status) {
  WITH_TREE(objstore_tree_recursively_create_dir(&t, path, status));
}

void objstore_fs_delete_file(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  WITH_TREE(objstore_tree_delete_file(&t, path, status));
}

void objstore_fs_delete_dir(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  WITH_TREE(objstore_tree_delete_dir(&t, path, status));
}

void objstore_fs_delete_recursively(const TF_Filesystem* filesystem, const char* path,
                                    uint64_t* undeleted_files, uint64_t* undeleted_dirs,
                                    TF_Status* status) {
  WITH_TREE(objstore_tree_delete_recursively(&t, path, undeleted_files, undeleted_dirs, status));
}

void objstore_fs_rename_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                             TF_Status* status) {
  WITH_TREE(objstore_tree_transfer(&t, src, dst, 1, status));
}

void objstore_fs_copy_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                           TF_Status* status) {
  WITH_TREE(objstore_tree_transfer(&t, src, dst, 0, status));
}

void objstore_fs_flush_caches(const TF_Filesystem* filesystem) {
  objstore_engine_close_idle(fs_of(filesystem)->engine);
}

int objstore_fs_explain_missing(objstore_fs* fs, const char* path, const char* what,
                                TF_Status* status) {
  objstore_tree t;
  TF_FileStatistics stats;
  int there;
  objstore_fs_begin(fs, &t);
  objstore_tree_stat(&t, path, &stats, status);
  there = TF_GetCode(status) == TF_OK;
  if (there && stats.is_directory) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%s %s:/%s: a directory", what, fs->scheme, path);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
    there = 0;
  }
  objstore_fs_end(fs, &t);
  return there;
}

int objstore_get_traffic_option(const objstore_engine* engine, const char* key, TF_Filesystem_Option** option,
                                TF_Status* status) {
  int64_t traffic[OBJSTORE_TRAFFIC_COUNT];
  if (strcmp(key, "traffic") != 0) return 0;
  objstore_engine_traffic(engine, traffic);
  plugin_report_ints(option, key,
                     "requests sent, retried, failed; connections opened; bytes sent, received (read-only)",
                     traffic, OBJSTORE_TRAFFIC_COUNT, status);
  return 1;
}

void objstore_fs_get_option(const TF_Filesystem* filesystem, const char* key,
                            TF_Filesystem_Option** option, TF_Status* status) {
  objstore_fs* fs = fs_of(filesystem);
  void* config;
  char source[700];
  if (objstore_get_traffic_option(fs->engine, key, option, status)) return;
  if (strcmp(key, "credential_source") != 0 || fs->credential_source == NULL) {
    plugin_get_configuration_option(filesystem, key, option, status);
    return;
  }
  config = plugin_config_acquire(&fs->base.config);
  fs->credential_source(fs, config, source, sizeof source);
  plugin_config_release(&fs->base.config, config);
  plugin_report_text(option, key, "where requests' credentials come from (read-only)", source, status);
}

/* ---- reading ------------------------------------------------------------------------- */

objstore_reader* objstore_fs_open_reader(const TF_Filesystem* filesystem, const char* path, const char* what,
                                         TF_Status* status) {
  objstore_fs* fs = fs_of(filesystem);
  char* config = plugin_config_acquire(&fs->base.config);
  objstore_reader* r = objstore_reader_open(
      fs->engine, (const objstore_settings*)(config + fs->transport_offset), path,
      *(const int64_t*)(config + fs->read_ahead_offset), *(const int64_t*)(config + fs->part_size_offset), what,
      status);
  plugin_config_release(&fs->base.config, config);
  return r;
}

void objstore_fs_new_random_access_file(const TF_Filesystem* filesystem, const char* path,
                                        TF_RandomAccessFile* file, TF_Status* status) {
  file->plugin_file = objstore_fs_open_reader(filesystem, path, "open", status);
}

void objstore_fs_new_read_only_memory_region_from_file(const TF_Filesystem* filesystem, const char* path,
                                                       TF_ReadOnlyMemoryRegion* region, TF_Status* status) {
  objstore_reader* r = objstore_fs_open_reader(filesystem, path, "map", status);
  region->plugin_memory_region = NULL;
  if (r != NULL) objstore_map(r, region, status);
}

void objstore_fs_read_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                            char* const* buffers, const size_t* caps, int64_t* sizes, TF_Status** statuses) {
  objstore_tree t;
  objstore_fs_begin(fs_of(filesystem), &t);
  objstore_read_objects(t.engine, t.settings, paths, n, buffers, caps, sizes, statuses);
  objstore_fs_end(fs_of(filesystem), &t);
}

int objstore_fs_read_back(objstore_reader* r, const TF_WritableFileOps* ops, const TF_WritableFile* file,
                          TF_Status* status) {
  const int64_t piece_cap = 8 << 20;
  int64_t size = objstore_reader_size(r), at;
  for (at = 0; at < size && TF_GetCode(status) == TF_OK;) {
    size_t want = (size_t)(size - at < piece_cap ? size - at : piece_cap);
    char* piece = malloc(want);
    int64_t got = piece != NULL ? objstore_reader_read(r, (uint64_t)at, want, piece, status) : -1;
    if (piece == NULL) plugin_set_oom(status);
    else if (got == (int64_t)want) ops->append(file, piece, want, status);
    else if (TF_GetCode(status) == TF_OK) TF_SetStatus(status, TF_DATA_LOSS, "the object shrank while it was read back");
    free(piece);
    at += (int64_t)want;
  }
  return TF_GetCode(status) == TF_OK ? 0 : -1;
}
