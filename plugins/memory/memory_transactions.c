/* The memory plugin's transactions: starting one on a directory makes a
 * copy-on-write copy of its tree under /.asyncfs-txn/<n> (nodes copied,
 * contents shared), where the core stages changes through ordinary ops;
 * committing swaps the staged tree in for the root under the write lock,
 * one atomic step for every reader; aborting drops it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_internal.h"

/* The staged tree's name in /.asyncfs-txn. */
static const char* staged_name(const plugin_txn* txn) {
  return strrchr(txn->staging, '/') + 1;
}

/* Takes the staged tree out of /.asyncfs-txn (dropping the area when it is
 * empty) and returns it. Write lock held. */
static node* take_staged(memfs* fs, const plugin_txn* txn) {
  node* area = mem_dirmap_get(&fs->root->children, TXN_DIR, strlen(TXN_DIR));
  const char* name = staged_name(txn);
  node* staged;
  if (area == NULL) return NULL;
  staged = mem_dirmap_remove(&area->children, name, strlen(name));
  if (area->children.count == 0) {
    mem_dirmap_remove(&fs->root->children, TXN_DIR, strlen(TXN_DIR));
    mem_node_release_tree(area);
  }
  return staged;
}

/* Stages a copy of the root's tree under /.asyncfs-txn/<serial>. */
static int txn_begin(const TF_Filesystem* filesystem, plugin_txn* txn,
                     TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  char name[32];
  resolved r;
  node *area, *staged;
  int rc = -1;
  snprintf(name, sizeof name, "%lu", txn->serial);
  txn->staging = malloc(sizeof("/" TXN_DIR "/") + strlen(name));
  if (txn->staging == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  sprintf(txn->staging, "/" TXN_DIR "/%s", name);
  pthread_rwlock_wrlock(&fs->lock);
  if (mem_resolve(fs, txn->root, &r, status) != 0) {
    if (TF_GetCode(status) != TF_NOT_FOUND) goto done;
    r.target = NULL; /* parents missing: made at commit */
  } else if (r.target != NULL && !r.target->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 "a transaction root must be a directory, not a file");
    goto done;
  }
  area = mem_make_dirs(fs, "/" TXN_DIR, status);
  if (area == NULL) goto done;
  staged = r.target != NULL ? mem_copy_tree(r.target, name, strlen(name))
                            : mem_node_new(name, strlen(name), 1);
  if (staged == NULL || mem_dirmap_insert(&area->children, staged) != 0) {
    if (staged != NULL) mem_node_release_tree(staged);
    plugin_set_oom(status);
    goto done;
  }
  rc = 0;
done:
  pthread_rwlock_unlock(&fs->lock);
  return rc;
}

/* Swaps the staged tree in for the root (commit: atomic for every reader)
 * or drops it. */
static int txn_finish(const TF_Filesystem* filesystem, plugin_txn* txn,
                      int commit, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  node* staged;
  int rc = 0;
  pthread_rwlock_wrlock(&fs->lock);
  staged = take_staged(fs, txn);
  if (commit && staged != NULL) {
    char* parent_path = strdup(txn->root);
    char* slash = parent_path != NULL ? strrchr(parent_path, '/') : NULL;
    node* parent;
    const char* name = strrchr(txn->root, '/');
    name = name != NULL ? name + 1 : txn->root;
    if (slash != NULL) *slash = '\0';
    parent = parent_path != NULL ? mem_make_dirs(fs, parent_path, status) : NULL;
    if (parent == NULL || mem_rename_node(staged, name, strlen(name)) != 0 ||
        mem_link_replacing(parent, staged) != 0) {
      if (parent_path == NULL || TF_GetCode(status) == TF_OK) plugin_set_oom(status);
      mem_node_release_tree(staged);
      rc = -1;
    }
    free(parent_path);
  } else if (staged != NULL) {
    mem_node_release_tree(staged);
  }
  pthread_rwlock_unlock(&fs->lock);
  return rc;
}

static void txn_request(const TF_Filesystem* filesystem) {
  mem_inject_latency(mem_fs_of(filesystem));
}

const plugin_txn_hooks mem_transaction_hooks = {
    txn_begin, txn_finish, NULL, txn_request};

