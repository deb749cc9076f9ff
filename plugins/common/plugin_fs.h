/*
 * What every built-in filesystem is built on: its state begins with a
 * plugin_fs (settings and the transaction table, which the generated
 * configuration and transaction ops find there), and the plugin registers
 * static const tables of its operations with one line, PLUGIN_DEFINE.
 *
 *   typedef struct my_fs { plugin_fs base; ...the plugin's own... } my_fs;
 *
 *   static const TF_FilesystemOps my_ops = {
 *       PLUGIN_FILESYSTEM_OPS(my_, my_), PLUGIN_CONFIGURATION_OPS};
 *   static const plugin_scheme my_schemes[] = {
 *       {"my", &my_ops, &my_reader_ops, &my_writer_ops, &my_region_ops}};
 *   PLUGIN_DEFINE(my_schemes, "my", "1.0.0", 0)
 */
#ifndef ASYNCFS_PLUGIN_FS_H_
#define ASYNCFS_PLUGIN_FS_H_

#include <string.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_common.h"
#include "plugin_state.h"

/* init's common part: allocates size zeroed bytes (a struct starting with
 * plugin_fs) as filesystem's state, with settings from defaults (a
 * settings struct of schema) and a transaction table (hooks NULL: no
 * transactions). Returns the state with status OK, or NULL with status
 * set. */
void* plugin_fs_create(TF_Filesystem* filesystem, size_t size,
                       const plugin_schema* schema, const void* defaults,
                       const plugin_txn_hooks* hooks, TF_Status* status);
/* cleanup's common part: frees what plugin_fs_create made (the plugin
 * frees its own parts first). */
void plugin_fs_free(TF_Filesystem* filesystem);

/* Designated initializers naming a plugin's operations after one prefix
 * (PLUGIN_NAMESPACE_OPS(fs_) sets .create_dir = fs_create_dir, ...). */
#define PLUGIN_FILE_CONSTRUCTORS(p)                      \
  .new_random_access_file = p##new_random_access_file, \
  .new_writable_file = p##new_writable_file,           \
  .new_appendable_file = p##new_appendable_file,       \
  .new_read_only_memory_region_from_file =             \
      p##new_read_only_memory_region_from_file
#define PLUGIN_NAMESPACE_OPS(p)                          \
  .create_dir = p##create_dir,                         \
  .recursively_create_dir = p##recursively_create_dir, \
  .delete_file = p##delete_file,                       \
  .delete_dir = p##delete_dir,                         \
  .delete_recursively = p##delete_recursively,         \
  .rename_file = p##rename_file, .copy_file = p##copy_file
#define PLUGIN_QUERY_OPS(p)                                                 \
  .path_exists = p##path_exists, .paths_exist = p##paths_exist,           \
  .stat = p##stat, .is_directory = p##is_directory,                       \
  .get_file_size = p##get_file_size, .translate_name = p##translate_name, \
  .get_children = p##get_children,                                        \
  .get_children_stats = p##get_children_stats,                            \
  .get_children_kinds = p##get_children_kinds,                            \
  .get_matching_paths = p##get_matching_paths

/* Declares the four file constructors named after prefix, for plugins
 * that define them in a file of their own. */
#define PLUGIN_DECLARE_FILE_CONSTRUCTORS(p)                                    \
  void p##new_random_access_file(const TF_Filesystem* filesystem,             \
                                 const char* path, TF_RandomAccessFile* file, \
                                 TF_Status* status);                          \
  void p##new_writable_file(const TF_Filesystem* filesystem, const char* path, \
                            TF_WritableFile* file, TF_Status* status);        \
  void p##new_appendable_file(const TF_Filesystem* filesystem,                \
                              const char* path, TF_WritableFile* file,        \
                              TF_Status* status);                             \
  void p##new_read_only_memory_region_from_file(                              \
      const TF_Filesystem* filesystem, const char* path,                      \
      TF_ReadOnlyMemoryRegion* region, TF_Status* status)

/* Lifecycle, constructors, namespace changes and queries: the ops every
 * plugin offers, with its constructors named after files_prefix and the
 * rest after prefix. */
#define PLUGIN_FILESYSTEM_OPS(files_prefix, prefix)                  \
  .init = prefix##init, .cleanup = prefix##cleanup,                \
  PLUGIN_FILE_CONSTRUCTORS(files_prefix), PLUGIN_NAMESPACE_OPS(prefix), \
  PLUGIN_QUERY_OPS(prefix)

/* Defines fs_rename_file and fs_copy_file over one function that does
 * both, transfer(filesystem, src, dst, remove_source, status): a plugin
 * whose rename is a copy that then removes its source (memory, s3). */
#define PLUGIN_DEFINE_RENAME_AND_COPY(transfer)                             \
  static void fs_rename_file(const TF_Filesystem* filesystem,              \
                             const char* src, const char* dst,             \
                             TF_Status* status) {                          \
    transfer(filesystem, src, dst, 1, status);                             \
  }                                                                         \
  static void fs_copy_file(const TF_Filesystem* filesystem, const char* src, \
                           const char* dst, TF_Status* status) {           \
    transfer(filesystem, src, dst, 0, status);                             \
  }

/* A plugin's listing of a directory: list(filesystem, path, listing,
 * status) returns 0 with status OK or -1 with status set. */
typedef int (*plugin_list_fn)(const TF_Filesystem* filesystem, const char* path,
                              plugin_listing* listing, TF_Status* status);

/* The get_children ops' common work over list: names (and stats and
 * kinds, when not NULL) handed to the core; the count, or -1 with status
 * set. */
int plugin_run_listing(plugin_list_fn list, const TF_Filesystem* filesystem, const char* path,
                       char*** entries, TF_FileStatistics** stats, int** kinds,
                       TF_Status* status);

/* Defines fs_get_children, fs_get_children_stats and fs_get_children_kinds
 * over one function that lists a directory (a plugin_list_fn). */
#define PLUGIN_DEFINE_LISTING(list)                                           \
  static int fs_get_children(const TF_Filesystem* filesystem,                \
                             const char* path, char*** entries,              \
                             TF_Status* status) {                            \
    return plugin_run_listing(list, filesystem, path, entries, NULL, NULL, status); \
  }                                                                          \
  static int fs_get_children_stats(const TF_Filesystem* filesystem,          \
                                   const char* path, char*** entries,        \
                                   TF_FileStatistics** stats,                \
                                   TF_Status* status) {                      \
    return plugin_run_listing(list, filesystem, path, entries, stats, NULL, status); \
  }                                                                          \
  static int fs_get_children_kinds(const TF_Filesystem* filesystem,          \
                                   const char* path, char*** entries,        \
                                   TF_FileStatistics** stats, int** kinds,   \
                                   TF_Status* status) {                      \
    return plugin_run_listing(list, filesystem, path, entries, stats, kinds, status); \
  }

/* One scheme a plugin serves, and its operation tables. */
typedef struct plugin_scheme {
  const char* scheme;
  const TF_FilesystemOps* filesystem_ops;
  const TF_RandomAccessFileOps* random_access_file_ops;
  const TF_WritableFileOps* writable_file_ops;
  const TF_ReadOnlyMemoryRegionOps* read_only_memory_region_ops;
} plugin_scheme;

/* TF_InitPlugin's work: hands the core plugin-allocated copies of each
 * scheme's tables, as TensorFlow's loader requires (it frees them). */
void plugin_register(TF_FilesystemPluginInfo* info,
                     const plugin_scheme* schemes, int count);

/* Defines the plugin's two exports: TF_InitPlugin, registering schemes (a
 * static array), and ASYNCFS_GetPluginMetadata. */
#define PLUGIN_DEFINE(schemes, name, version, flags)                        \
  ASYNCFS_PLUGIN_EXPORT void TF_InitPlugin(TF_FilesystemPluginInfo* info) { \
    plugin_register(info, schemes,                                          \
                    (int)(sizeof(schemes) / sizeof((schemes)[0])));         \
  }                                                                         \
  static const ASYNCFS_PluginMetadata plugin_metadata = {                   \
      sizeof(ASYNCFS_PluginMetadata),                                       \
      name,                                                                 \
      version,                                                              \
      "the asyncfs authors",                                                \
      "https://github.com/asyncfs/asyncfs/issues",                          \
      ASYNCFS_CORE_ABI_VERSION,                                             \
      ASYNCFS_CORE_ABI_VERSION,                                             \
      flags};                                                               \
  ASYNCFS_PLUGIN_EXPORT const ASYNCFS_PluginMetadata*                       \
  ASYNCFS_GetPluginMetadata(void) {                                         \
    return &plugin_metadata;                                                \
  }

#endif /* ASYNCFS_PLUGIN_FS_H_ */
