/*
 * The state every built-in filesystem begins with: its settings and its
 * table of transactions, behind TF_Filesystem's plugin_filesystem. The
 * generated configuration ops (plugin_config.c) and transaction ops
 * (plugin_txn.c) find their part here; creating and registering a
 * filesystem is plugin_fs.h's.
 */
#ifndef ASYNCFS_PLUGIN_STATE_H_
#define ASYNCFS_PLUGIN_STATE_H_

#include "asyncfs/filesystem_interface.h"
#include "plugin_config.h"
#include "plugin_txn.h"

typedef struct plugin_fs {
  plugin_config config;
  plugin_txn_table txns;
} plugin_fs;

static inline plugin_fs* plugin_fs_of(const TF_Filesystem* filesystem) {
  return (plugin_fs*)filesystem->plugin_filesystem;
}

#endif /* ASYNCFS_PLUGIN_STATE_H_ */
