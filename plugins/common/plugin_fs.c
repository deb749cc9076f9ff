/* The base of every built-in filesystem, and registration (plugin_fs.h). */
#include "plugin_fs.h"

#include <stdlib.h>
#include <string.h>

#include "plugin_common.h"

void* plugin_fs_create(TF_Filesystem* filesystem, size_t size,
                       const plugin_schema* schema, const void* defaults,
                       const plugin_txn_hooks* hooks, TF_Status* status) {
  plugin_fs* fs = calloc(1, size);
  if (fs == NULL) {
    plugin_set_oom(status);
    return NULL;
  }
  if (plugin_config_init(&fs->config, schema, defaults, status) != 0) {
    free(fs);
    return NULL;
  }
  if (plugin_txn_table_init(&fs->txns, hooks) != 0) {
    plugin_config_destroy(&fs->config);
    free(fs);
    plugin_set_oom(status);
    return NULL;
  }
  filesystem->plugin_filesystem = fs;
  plugin_set_ok(status);
  return fs;
}

void plugin_fs_free(TF_Filesystem* filesystem) {
  plugin_fs* fs = plugin_fs_of(filesystem);
  if (fs == NULL) return;
  plugin_txn_table_destroy(&fs->txns);
  plugin_config_destroy(&fs->config);
  free(fs);
  filesystem->plugin_filesystem = NULL;
}

int plugin_run_listing(plugin_list_fn list, const TF_Filesystem* filesystem, const char* path,
                       char*** entries, TF_FileStatistics** stats, int** kinds,
                       TF_Status* status) {
  plugin_listing listing;
  int count;
  memset(&listing, 0, sizeof listing);
  listing.with_stats = stats != NULL;
  *entries = NULL;
  if (stats != NULL) *stats = NULL;
  if (kinds != NULL) *kinds = NULL;
  if (list(filesystem, path, &listing, status) != 0) {
    plugin_listing_free(&listing);
    return -1;
  }
  count = plugin_listing_release(&listing, entries, stats, kinds);
  if (count < 0) plugin_set_oom(status);
  return count;
}

/* A plugin-allocated copy of size bytes of table. */
static void* copy_table(const void* table, size_t size) {
  void* copy = plugin_memory_allocate(size);
  if (copy != NULL) memcpy(copy, table, size);
  return copy;
}

static int provide(TF_FilesystemPluginOps* ops, const plugin_scheme* s) {
  TF_SetFilesystemVersionMetadata(ops);
  ops->scheme = plugin_strdup(s->scheme);
  ops->filesystem_ops = copy_table(s->filesystem_ops, sizeof *s->filesystem_ops);
  ops->random_access_file_ops =
      copy_table(s->random_access_file_ops, sizeof *s->random_access_file_ops);
  ops->writable_file_ops =
      copy_table(s->writable_file_ops, sizeof *s->writable_file_ops);
  ops->read_only_memory_region_ops = copy_table(
      s->read_only_memory_region_ops, sizeof *s->read_only_memory_region_ops);
  return ops->scheme != NULL && ops->filesystem_ops != NULL &&
                 ops->random_access_file_ops != NULL &&
                 ops->writable_file_ops != NULL &&
                 ops->read_only_memory_region_ops != NULL
             ? 0
             : -1;
}

void plugin_register(TF_FilesystemPluginInfo* info,
                     const plugin_scheme* schemes, int count) {
  int i;
  info->plugin_memory_allocate = plugin_memory_allocate;
  info->plugin_memory_free = plugin_memory_free;
  info->ops = plugin_memory_allocate((size_t)count * sizeof *info->ops);
  info->num_schemes = info->ops != NULL ? (size_t)count : 0;
  for (i = 0; info->ops != NULL && i < count; ++i) {
    if (provide(&info->ops[i], &schemes[i]) != 0) {
      info->num_schemes = 0; /* out of memory: the core refuses the plugin */
      return;
    }
  }
}
