/*
 * What the memory plugin's files share:
 *   memory_tree.c          contents, nodes, directories, path resolution
 *   memory_files.c         random-access files, writable files, regions
 *   memory.c               the namespace operations and the registration
 *   memory_transactions.c  staging, committing and dropping a tree
 */
#ifndef ASYNCFS_MEMORY_INTERNAL_H_
#define ASYNCFS_MEMORY_INTERNAL_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_common.h"
#include "plugin_fs.h"

typedef struct mem_settings {
  plugin_settings base;
  int64_t latency_us;
} mem_settings;

/* ---- contents and nodes -------------------------------------------------- */

typedef struct blob {
  size_t refs; /* atomic */
  size_t len;
  size_t cap;
  char* data;
} blob;

typedef struct node node;

typedef struct dirmap {
  node** slots;
  size_t capacity; /* 0 or a power of two */
  size_t count;
  size_t tombstones;
} dirmap;

#define TOMBSTONE ((node*)1)

struct node {
  size_t refs; /* atomic: one for the tree, one per open handle */
  char* name;
  size_t name_len;
  int is_dir;
  int64_t mtime;
  blob* content; /* files: NULL when empty */
  dirmap children; /* directories */
};

/* The outcome of resolving a path: the directory holding its last
 * component and the node there (NULL when absent). The root resolves to
 * parent NULL, target root. */
typedef struct resolved {
  node* parent;
  node* target;
  const char* name;
  size_t name_len;
} resolved;

typedef struct memfs {
  plugin_fs base;
  pthread_rwlock_t lock; /* guards the tree */
  node* root;
} memfs;

static inline memfs* mem_fs_of(const TF_Filesystem* filesystem) {
  return (memfs*)filesystem->plugin_filesystem;
}

#define TXN_DIR ".asyncfs-txn"

int64_t mem_now_nsec(void);
/* Sleeps the configured latency_us, as a remote store's round trip. */
void mem_inject_latency(memfs* fs);
/* Takes the store's read lock, unless that would wait: for the latency the
 * store was configured to fake, or for a writer that holds the lock.
 * Returns 0 with the lock held, -1 without (what is at hand is nothing). */
int mem_rdlock_if_ready(memfs* fs);

void mem_blob_ref(blob* b);
void mem_blob_unref(blob* b);
node* mem_node_new(const char* name, size_t len, int is_dir);
void mem_node_ref(node* n);
void mem_node_unref(node* n);
void mem_node_release_tree(node* n);
node* mem_dirmap_get(const dirmap* m, const char* name, size_t len);
int mem_dirmap_insert(dirmap* m, node* n);
node* mem_dirmap_remove(dirmap* m, const char* name, size_t len);

/* The next path component at or after p (skipping "/" and "."), its length
 * in *len; NULL at the end. */
const char* mem_next_component(const char* p, size_t* len);
/* A missing directory on the way is NOT_FOUND; a file on the way is
 * FAILED_PRECONDITION, as ENOENT and ENOTDIR are on posix. */
int mem_resolve(memfs* fs, const char* path, resolved* r, TF_Status* status);
void mem_set_not_found(TF_Status* status, const char* path);
/* Resolves path to an existing node, with NOT_FOUND when it is absent. */
node* mem_find_existing(memfs* fs, const char* path, TF_Status* status);
/* The directory node at path, made (with its parents) when missing; NULL
 * with status set when a file is in the way. Call with the write lock. */
node* mem_make_dirs(memfs* fs, const char* path, TF_Status* status);
/* A copy of the tree at src named name: nodes copied, contents shared. */
node* mem_copy_tree(const node* src, const char* name, size_t len);
/* Puts n in dir under its name, replacing what was there. */
int mem_link_replacing(node* dir, node* n);
int mem_rename_node(node* n, const char* name, size_t len);

/* ---- files (memory_files.c) ---------------------------------------------- */

extern const TF_RandomAccessFileOps mem_reader_ops;
extern const TF_WritableFileOps mem_writer_ops;
extern const TF_ReadOnlyMemoryRegionOps mem_region_ops;

PLUGIN_DECLARE_FILE_CONSTRUCTORS(mem_);
int64_t mem_new_random_access_file_if_ready(const TF_Filesystem* filesystem, const char* path,
                                            TF_RandomAccessFile* file, TF_Status* status);

/* ---- transactions (memory_transactions.c) -------------------------------- */

extern const plugin_txn_hooks mem_transaction_hooks;

#endif /* ASYNCFS_MEMORY_INTERNAL_H_ */
