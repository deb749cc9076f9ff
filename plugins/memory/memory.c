/*
 * The memory plugin: mem://, a hierarchical filesystem held in process memory.
 *
 * One reader-writer lock guards the tree: queries and reads share it,
 * namespace changes and appends take it alone. Each directory keeps its
 * children in an open-addressing hash table. File contents are reference
 * counted and copy-on-write, so a memory region is the content itself (zero
 * copy) and stays valid while the file is rewritten, and copy_file shares the
 * bytes until one side changes.
 *
 * The host of a URI is the first path segment (mem://a/b is /a/b).
 * Configuration: latency_us, a delay slept before every request, for
 * benchmarks that model a remote store (opening a file for reading is not
 * a request: an object store's client makes none until the first read).
 *
 * Transactions: starting one on a directory makes a copy-on-write copy of
 * its tree under /.asyncfs-txn/<n> (nodes copied, contents shared), where
 * the core stages changes through ordinary ops; committing swaps the staged
 * tree in for the root under the write lock, one atomic step for every
 * reader; aborting drops it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_common.h"

static plugin_option mem_option_items[] = {
    {"latency_us",
     "microseconds slept before every request, as a remote store would take: "
     "every operation but opening a file for reading, which like an object "
     "store's client makes no request until the first read",
     0, 10 * 1000 * 1000, 0},
};
static plugin_options mem_options = {mem_option_items, 1};

static void inject_latency(void) {
  int64_t us = plugin_option_get(&mem_option_items[0]);
  struct timespec ts;
  if (us <= 0) return;
  ts.tv_sec = (time_t)(us / 1000000);
  ts.tv_nsec = (long)(us % 1000000) * 1000;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static int64_t now_nsec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void set_ok(TF_Status* status) { TF_SetStatus(status, TF_OK, ""); }
static void set_oom(TF_Status* status) {
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
}

/* ---- content ------------------------------------------------------------- */

typedef struct blob {
  size_t refs; /* atomic */
  size_t len;
  size_t cap;
  char* data;
} blob;

static void blob_ref(blob* b) {
  if (b != NULL) __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
}

static void blob_unref(blob* b) {
  if (b == NULL) return;
  if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    free(b->data);
    free(b);
  }
}

/* ---- nodes --------------------------------------------------------------- */

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

static node* node_new(const char* name, size_t len, int is_dir) {
  node* n = calloc(1, sizeof *n);
  if (n == NULL) return NULL;
  n->name = malloc(len + 1);
  if (n->name == NULL) {
    free(n);
    return NULL;
  }
  memcpy(n->name, name, len);
  n->name[len] = '\0';
  n->name_len = len;
  n->is_dir = is_dir;
  n->mtime = now_nsec();
  n->refs = 1;
  return n;
}

static void node_ref(node* n) { __atomic_add_fetch(&n->refs, 1, __ATOMIC_RELAXED); }

static void node_unref(node* n) {
  if (__atomic_sub_fetch(&n->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  blob_unref(n->content);
  free(n->children.slots);
  free(n->name);
  free(n);
}

/* Drops the tree's reference to n and to everything below it. */
static void node_release_tree(node* n) {
  size_t i;
  if (n->is_dir) {
    for (i = 0; i < n->children.capacity; ++i) {
      node* c = n->children.slots[i];
      if (c != NULL && c != TOMBSTONE) node_release_tree(c);
    }
    free(n->children.slots);
    memset(&n->children, 0, sizeof n->children);
  }
  node_unref(n);
}

static size_t hash_name(const char* s, size_t len) {
  size_t h = 1469598103934665603u;
  size_t i;
  for (i = 0; i < len; ++i) h = (h ^ (unsigned char)s[i]) * 1099511628211u;
  return h;
}

/* Slot holding name, or the capacity when absent. */
static size_t dirmap_find(const dirmap* m, const char* name, size_t len) {
  size_t mask, i;
  if (m->capacity == 0) return 0;
  mask = m->capacity - 1;
  for (i = hash_name(name, len) & mask;; i = (i + 1) & mask) {
    node* n = m->slots[i];
    if (n == NULL) return m->capacity;
    if (n != TOMBSTONE && n->name_len == len && memcmp(n->name, name, len) == 0)
      return i;
  }
}

static node* dirmap_get(const dirmap* m, const char* name, size_t len) {
  size_t i = dirmap_find(m, name, len);
  return i < m->capacity ? m->slots[i] : NULL;
}

static void dirmap_place(dirmap* m, node* n) {
  size_t mask = m->capacity - 1;
  size_t i = hash_name(n->name, n->name_len) & mask;
  while (m->slots[i] != NULL && m->slots[i] != TOMBSTONE) i = (i + 1) & mask;
  if (m->slots[i] == TOMBSTONE) --m->tombstones;
  m->slots[i] = n;
  ++m->count;
}

/* Inserts n, which must not be present. */
static int dirmap_insert(dirmap* m, node* n) {
  if ((m->count + m->tombstones + 1) * 4 > m->capacity * 3) {
    size_t capacity = m->capacity ? m->capacity : 8;
    size_t i;
    dirmap grown;
    while ((m->count + 1) * 2 > capacity) capacity *= 2;
    grown.slots = calloc(capacity, sizeof(node*));
    if (grown.slots == NULL) return -1;
    grown.capacity = capacity;
    grown.count = 0;
    grown.tombstones = 0;
    for (i = 0; i < m->capacity; ++i)
      if (m->slots[i] != NULL && m->slots[i] != TOMBSTONE)
        dirmap_place(&grown, m->slots[i]);
    free(m->slots);
    *m = grown;
  }
  dirmap_place(m, n);
  return 0;
}

static node* dirmap_remove(dirmap* m, const char* name, size_t len) {
  size_t i = dirmap_find(m, name, len);
  node* n;
  if (i >= m->capacity) return NULL;
  n = m->slots[i];
  m->slots[i] = TOMBSTONE;
  --m->count;
  ++m->tombstones;
  return n;
}

/* ---- the filesystem and path resolution ---------------------------------- */

typedef struct mem_txn mem_txn;

typedef struct memfs {
  pthread_rwlock_t lock;
  node* root;
  mem_txn* txns; /* guarded by lock (write side) */
  unsigned long txn_counter;
} memfs;

static void txn_free_all(memfs* fs);

static memfs* fs_of(const TF_Filesystem* filesystem) {
  return filesystem->plugin_filesystem;
}

/* The outcome of resolving a path: the directory holding its last
 * component and the node there (NULL when absent). The root resolves to
 * parent NULL, target root. */
typedef struct resolved {
  node* parent;
  node* target;
  const char* name;
  size_t name_len;
} resolved;

static const char* next_component(const char* p, size_t* len) {
  for (;;) {
    const char* start;
    while (*p == '/') ++p;
    start = p;
    while (*p != '\0' && *p != '/') ++p;
    *len = (size_t)(p - start);
    if (*len == 0) return NULL;
    if (!(*len == 1 && start[0] == '.')) return start;
  }
}

/* A missing directory on the way is NOT_FOUND; a file on the way is
 * FAILED_PRECONDITION, as ENOENT and ENOTDIR are on posix. */
static int resolve(memfs* fs, const char* path, resolved* r,
                   TF_Status* status) {
  node* dir = fs->root;
  const char* p = path;
  size_t len;
  const char* comp = next_component(p, &len);
  r->parent = NULL;
  r->target = fs->root;
  r->name = "";
  r->name_len = 0;
  while (comp != NULL) {
    const char* after = comp + len;
    const char* next;
    size_t next_len;
    node* child;
    if (len == 2 && comp[0] == '.' && comp[1] == '.') {
      /* cleaned paths keep ".." only at the start: it stays at the root */
      comp = next_component(after, &len);
      continue;
    }
    child = dirmap_get(&dir->children, comp, len);
    next = next_component(after, &next_len);
    if (next == NULL) {
      r->parent = dir;
      r->target = child;
      r->name = comp;
      r->name_len = len;
      return 0;
    }
    if (child == NULL) {
      TF_SetStatus(status, TF_NOT_FOUND, "a parent directory does not exist");
      return -1;
    }
    if (!child->is_dir) {
      TF_SetStatus(status, TF_FAILED_PRECONDITION,
                   "a parent path component is a file");
      return -1;
    }
    dir = child;
    comp = next;
    len = next_len;
  }
  return 0;
}

static void set_not_found(TF_Status* status, const char* path) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s; no such file or directory", path);
  TF_SetStatus(status, TF_NOT_FOUND, msg);
}

/* Resolves path to an existing node, with NOT_FOUND when it is absent. */
static node* find_existing(memfs* fs, const char* path, TF_Status* status) {
  resolved r;
  if (resolve(fs, path, &r, status) != 0) return NULL;
  if (r.target == NULL) set_not_found(status, path);
  return r.target;
}

/* ---- random access files ------------------------------------------------- */

typedef struct mem_handle {
  memfs* fs;
  node* node;
} mem_handle;

static void handle_free(mem_handle* h) {
  if (h == NULL) return;
  node_unref(h->node);
  free(h);
}

static void reader_cleanup(TF_RandomAccessFile* file) {
  handle_free(file->plugin_file);
  file->plugin_file = NULL;
}

static int64_t reader_read(const TF_RandomAccessFile* file, uint64_t offset,
                           size_t n, char* buffer, TF_Status* status) {
  const mem_handle* h = file->plugin_file;
  size_t len, count = 0;
  inject_latency();
  pthread_rwlock_rdlock(&h->fs->lock);
  len = h->node->content != NULL ? h->node->content->len : 0;
  if (offset < len) {
    count = len - (size_t)offset;
    if (count > n) count = n;
    memcpy(buffer, h->node->content->data + offset, count);
  }
  pthread_rwlock_unlock(&h->fs->lock);
  if (count < n) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "read past the end of the file");
  } else {
    set_ok(status);
  }
  return (int64_t)count;
}

/* ---- writable files ------------------------------------------------------ */

typedef struct mem_writer {
  mem_handle h;
  int closed;
} mem_writer;

static void writer_cleanup(TF_WritableFile* file) {
  mem_writer* w = file->plugin_file;
  if (w == NULL) return;
  node_unref(w->h.node);
  free(w);
  file->plugin_file = NULL;
}

/* Makes n's content writable by this node alone with room for extra more
 * bytes; call with the write lock held. */
static int reserve_content(node* n, size_t extra) {
  blob* b = n->content;
  size_t need = (b != NULL ? b->len : 0) + extra;
  if (b == NULL || b->refs > 1 || b->cap < need) {
    size_t cap = b != NULL && b->cap > 64 ? b->cap : 64;
    while (cap < need) cap *= 2;
    if (b != NULL && b->refs == 1) {
      char* data = realloc(b->data, cap);
      if (data == NULL) return -1;
      b->data = data;
      b->cap = cap;
    } else {
      blob* copy = malloc(sizeof *copy);
      if (copy == NULL) return -1;
      copy->data = malloc(cap);
      if (copy->data == NULL) {
        free(copy);
        return -1;
      }
      copy->refs = 1;
      copy->cap = cap;
      copy->len = b != NULL ? b->len : 0;
      if (copy->len > 0) memcpy(copy->data, b->data, copy->len);
      blob_unref(b);
      n->content = copy;
    }
  }
  return 0;
}

static void writer_append(const TF_WritableFile* file, const char* buffer,
                          size_t n, TF_Status* status) {
  mem_writer* w = file->plugin_file;
  node* target = w->h.node;
  inject_latency();
  if (w->closed) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is closed");
    return;
  }
  pthread_rwlock_wrlock(&w->h.fs->lock);
  if (reserve_content(target, n) != 0) {
    pthread_rwlock_unlock(&w->h.fs->lock);
    set_oom(status);
    return;
  }
  memcpy(target->content->data + target->content->len, buffer, n);
  target->content->len += n;
  target->mtime = now_nsec();
  pthread_rwlock_unlock(&w->h.fs->lock);
  set_ok(status);
}

static int64_t writer_tell(const TF_WritableFile* file, TF_Status* status) {
  const mem_writer* w = file->plugin_file;
  int64_t len;
  if (w->closed) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is closed");
    return -1;
  }
  pthread_rwlock_rdlock(&w->h.fs->lock);
  len = w->h.node->content != NULL ? (int64_t)w->h.node->content->len : 0;
  pthread_rwlock_unlock(&w->h.fs->lock);
  set_ok(status);
  return len;
}

static void writer_flush(const TF_WritableFile* file, TF_Status* status) {
  const mem_writer* w = file->plugin_file;
  if (w->closed) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is closed");
    return;
  }
  set_ok(status);
}

static void writer_close(const TF_WritableFile* file, TF_Status* status) {
  mem_writer* w = file->plugin_file;
  inject_latency();
  if (w->closed) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is already closed");
    return;
  }
  w->closed = 1;
  set_ok(status);
}

/* ---- memory regions ------------------------------------------------------ */

static void region_cleanup(TF_ReadOnlyMemoryRegion* region) {
  blob_unref(region->plugin_memory_region);
  region->plugin_memory_region = NULL;
}

static const void* region_data(const TF_ReadOnlyMemoryRegion* region) {
  return ((const blob*)region->plugin_memory_region)->data;
}

static uint64_t region_length(const TF_ReadOnlyMemoryRegion* region) {
  /* A region's blob never changes: writers copy a shared blob first. The
   * length is read from the blob as it was when the region was made. */
  return ((const blob*)region->plugin_memory_region)->len;
}

/* ---- filesystem ops ------------------------------------------------------ */

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  memfs* fs = calloc(1, sizeof *fs);
  if (fs == NULL) {
    set_oom(status);
    return;
  }
  fs->root = node_new("", 0, 1);
  if (fs->root == NULL || pthread_rwlock_init(&fs->lock, NULL) != 0) {
    free(fs->root);
    free(fs);
    set_oom(status);
    return;
  }
  filesystem->plugin_filesystem = fs;
  set_ok(status);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  memfs* fs = fs_of(filesystem);
  if (fs == NULL) return;
  txn_free_all(fs);
  node_release_tree(fs->root);
  pthread_rwlock_destroy(&fs->lock);
  free(fs);
  filesystem->plugin_filesystem = NULL;
}

/* Finds an existing regular file, with FAILED_PRECONDITION for a directory,
 * and takes a handle reference to it. Call with a lock held. */
static node* open_file_node(memfs* fs, const char* path, TF_Status* status) {
  node* n = find_existing(fs, path, status);
  if (n == NULL) return NULL;
  if (n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
    return NULL;
  }
  node_ref(n);
  return n;
}

static void fs_new_random_access_file(const TF_Filesystem* filesystem,
                                      const char* path,
                                      TF_RandomAccessFile* file,
                                      TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  mem_handle* h = malloc(sizeof *h);
  node* n;
  if (h == NULL) {
    set_oom(status);
    return;
  }
  pthread_rwlock_rdlock(&fs->lock);
  n = open_file_node(fs, path, status);
  pthread_rwlock_unlock(&fs->lock);
  if (n == NULL) {
    free(h);
    return;
  }
  h->fs = fs;
  h->node = n;
  file->plugin_file = h;
  set_ok(status);
}

/* Creates (or, for truncate, empties) the file at path and returns it with
 * a handle reference. Call with the write lock held. */
static node* create_file_node(memfs* fs, const char* path, int truncate,
                              TF_Status* status) {
  resolved r;
  node* n;
  if (resolve(fs, path, &r, status) != 0) return NULL;
  if (r.parent == NULL || (r.target != NULL && r.target->is_dir)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
    return NULL;
  }
  n = r.target;
  if (n == NULL) {
    n = node_new(r.name, r.name_len, 0);
    if (n == NULL || dirmap_insert(&r.parent->children, n) != 0) {
      if (n != NULL) node_unref(n);
      set_oom(status);
      return NULL;
    }
    r.parent->mtime = n->mtime;
  } else if (truncate) {
    blob_unref(n->content);
    n->content = NULL;
    n->mtime = now_nsec();
  }
  node_ref(n);
  return n;
}

static void open_writer(const TF_Filesystem* filesystem, const char* path,
                        int truncate, TF_WritableFile* file,
                        TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  mem_writer* w = calloc(1, sizeof *w);
  node* n;
  inject_latency();
  if (w == NULL) {
    set_oom(status);
    return;
  }
  pthread_rwlock_wrlock(&fs->lock);
  n = create_file_node(fs, path, truncate, status);
  pthread_rwlock_unlock(&fs->lock);
  if (n == NULL) {
    free(w);
    return;
  }
  w->h.fs = fs;
  w->h.node = n;
  file->plugin_file = w;
  set_ok(status);
}

static void fs_new_writable_file(const TF_Filesystem* filesystem,
                                 const char* path, TF_WritableFile* file,
                                 TF_Status* status) {
  open_writer(filesystem, path, 1, file, status);
}

static void fs_new_appendable_file(const TF_Filesystem* filesystem,
                                   const char* path, TF_WritableFile* file,
                                   TF_Status* status) {
  open_writer(filesystem, path, 0, file, status);
}

static void fs_new_read_only_memory_region_from_file(
    const TF_Filesystem* filesystem, const char* path,
    TF_ReadOnlyMemoryRegion* region, TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  node* n;
  blob* b = NULL;
  inject_latency();
  pthread_rwlock_rdlock(&fs->lock);
  n = find_existing(fs, path, status);
  if (n != NULL && n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
  } else if (n != NULL && (n->content == NULL || n->content->len == 0)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "file is empty");
  } else if (n != NULL) {
    b = n->content;
    blob_ref(b); /* shared from now on: writers copy before changing it */
  }
  pthread_rwlock_unlock(&fs->lock);
  if (b == NULL) return;
  region->plugin_memory_region = b;
  set_ok(status);
}

static void fs_create_dir(const TF_Filesystem* filesystem, const char* path,
                          TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  resolved r;
  node* n;
  inject_latency();
  pthread_rwlock_wrlock(&fs->lock);
  if (resolve(fs, path, &r, status) != 0) goto done;
  if (r.target != NULL) {
    TF_SetStatus(status, TF_ALREADY_EXISTS, "path already exists");
    goto done;
  }
  n = node_new(r.name, r.name_len, 1);
  if (n == NULL || dirmap_insert(&r.parent->children, n) != 0) {
    if (n != NULL) node_unref(n);
    set_oom(status);
    goto done;
  }
  r.parent->mtime = n->mtime;
  set_ok(status);
done:
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_recursively_create_dir(const TF_Filesystem* filesystem,
                                      const char* path, TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  node* dir;
  const char* comp;
  size_t len;
  inject_latency();
  pthread_rwlock_wrlock(&fs->lock);
  dir = fs->root;
  for (comp = next_component(path, &len); comp != NULL;
       comp = next_component(comp + len, &len)) {
    node* child;
    if (len == 2 && comp[0] == '.' && comp[1] == '.') continue;
    child = dirmap_get(&dir->children, comp, len);
    if (child == NULL) {
      child = node_new(comp, len, 1);
      if (child == NULL || dirmap_insert(&dir->children, child) != 0) {
        if (child != NULL) node_unref(child);
        set_oom(status);
        goto done;
      }
      dir->mtime = child->mtime;
    } else if (!child->is_dir) {
      TF_SetStatus(status, TF_FAILED_PRECONDITION,
                   "a path component is a file");
      goto done;
    }
    dir = child;
  }
  set_ok(status);
done:
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_delete_file(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  resolved r;
  inject_latency();
  pthread_rwlock_wrlock(&fs->lock);
  if (resolve(fs, path, &r, status) != 0) goto done;
  if (r.target == NULL) {
    set_not_found(status, path);
  } else if (r.target->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
  } else {
    dirmap_remove(&r.parent->children, r.name, r.name_len);
    r.parent->mtime = now_nsec();
    node_release_tree(r.target);
    set_ok(status);
  }
done:
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_delete_dir(const TF_Filesystem* filesystem, const char* path,
                          TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  resolved r;
  inject_latency();
  pthread_rwlock_wrlock(&fs->lock);
  if (resolve(fs, path, &r, status) != 0) goto done;
  if (r.target == NULL) {
    set_not_found(status, path);
  } else if (!r.target->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is not a directory");
  } else if (r.target->children.count > 0) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "directory is not empty");
  } else if (r.parent == NULL) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "cannot delete the root");
  } else {
    dirmap_remove(&r.parent->children, r.name, r.name_len);
    r.parent->mtime = now_nsec();
    node_release_tree(r.target);
    set_ok(status);
  }
done:
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_delete_recursively(const TF_Filesystem* filesystem,
                                  const char* path, uint64_t* undeleted_files,
                                  uint64_t* undeleted_dirs,
                                  TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  resolved r;
  inject_latency();
  *undeleted_files = 0;
  *undeleted_dirs = 0;
  pthread_rwlock_wrlock(&fs->lock);
  if (resolve(fs, path, &r, status) != 0) {
    *undeleted_dirs = 1;
  } else if (r.target == NULL) {
    *undeleted_dirs = 1;
    set_not_found(status, path);
  } else if (r.parent == NULL) {
    /* the root stays; everything below it goes */
    node* root = r.target;
    size_t i;
    for (i = 0; i < root->children.capacity; ++i) {
      node* c = root->children.slots[i];
      if (c != NULL && c != TOMBSTONE) node_release_tree(c);
    }
    free(root->children.slots);
    memset(&root->children, 0, sizeof root->children);
    set_ok(status);
  } else {
    dirmap_remove(&r.parent->children, r.name, r.name_len);
    r.parent->mtime = now_nsec();
    node_release_tree(r.target);
    set_ok(status);
  }
  pthread_rwlock_unlock(&fs->lock);
}

/* Shared checks of rename and copy: both sides are files (or the target is
 * absent) and the target's directory exists. Call with the write lock. */
static int resolve_file_pair(memfs* fs, const char* src, const char* dst,
                             resolved* s, resolved* d, TF_Status* status) {
  if (resolve(fs, dst, d, status) != 0) return -1;
  if (d->parent == NULL || (d->target != NULL && d->target->is_dir)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "target path is a directory");
    return -1;
  }
  if (resolve(fs, src, s, status) != 0) return -1;
  if (s->target == NULL) {
    set_not_found(status, src);
    return -1;
  }
  if (s->target->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "source path is a directory");
    return -1;
  }
  return 0;
}

/* Puts n in dir under its name, replacing what was there. */
static int link_replacing(node* dir, node* n) {
  node* old = dirmap_remove(&dir->children, n->name, n->name_len);
  if (old != NULL) node_release_tree(old);
  dir->mtime = now_nsec();
  return dirmap_insert(&dir->children, n);
}

static int rename_node(node* n, const char* name, size_t len) {
  char* copy = malloc(len + 1);
  if (copy == NULL) return -1;
  memcpy(copy, name, len);
  copy[len] = '\0';
  free(n->name);
  n->name = copy;
  n->name_len = len;
  return 0;
}

static void fs_rename_file(const TF_Filesystem* filesystem, const char* src,
                           const char* dst, TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  resolved s, d;
  node* n;
  inject_latency();
  pthread_rwlock_wrlock(&fs->lock);
  if (resolve_file_pair(fs, src, dst, &s, &d, status) != 0) goto done;
  n = s.target;
  if (n == d.target) {
    set_ok(status);
    goto done;
  }
  dirmap_remove(&s.parent->children, s.name, s.name_len);
  s.parent->mtime = now_nsec();
  if (rename_node(n, d.name, d.name_len) != 0 ||
      link_replacing(d.parent, n) != 0) {
    /* put it back where it was; the slot it left is still free */
    dirmap_insert(&s.parent->children, n);
    set_oom(status);
    goto done;
  }
  set_ok(status);
done:
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_copy_file(const TF_Filesystem* filesystem, const char* src,
                         const char* dst, TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  resolved s, d;
  node* n;
  inject_latency();
  pthread_rwlock_wrlock(&fs->lock);
  if (resolve_file_pair(fs, src, dst, &s, &d, status) != 0) goto done;
  if (s.target == d.target) {
    set_ok(status);
    goto done;
  }
  n = node_new(d.name, d.name_len, 0);
  if (n == NULL) {
    set_oom(status);
    goto done;
  }
  n->content = s.target->content; /* shared until either side changes */
  blob_ref(n->content);
  if (link_replacing(d.parent, n) != 0) {
    node_unref(n);
    set_oom(status);
    goto done;
  }
  set_ok(status);
done:
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_path_exists(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  inject_latency();
  pthread_rwlock_rdlock(&fs->lock);
  if (find_existing(fs, path, status) != NULL) set_ok(status);
  pthread_rwlock_unlock(&fs->lock);
}

static bool fs_paths_exist(const TF_Filesystem* filesystem, char** paths,
                           int num_files, TF_Status** statuses) {
  memfs* fs = fs_of(filesystem);
  TF_Status* scratch = NULL;
  bool all = true;
  int i;
  inject_latency(); /* one round trip for the whole batch */
  if (statuses == NULL) scratch = TF_NewStatus();
  pthread_rwlock_rdlock(&fs->lock);
  for (i = 0; i < num_files; ++i) {
    TF_Status* st = statuses != NULL ? statuses[i] : scratch;
    if (find_existing(fs, paths[i], st) != NULL) {
      set_ok(st);
      continue;
    }
    all = false;
    if (statuses == NULL) break;
  }
  pthread_rwlock_unlock(&fs->lock);
  TF_DeleteStatus(scratch);
  return all;
}

static void fs_stat(const TF_Filesystem* filesystem, const char* path,
                    TF_FileStatistics* stats, TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  node* n;
  inject_latency();
  pthread_rwlock_rdlock(&fs->lock);
  n = find_existing(fs, path, status);
  if (n != NULL) {
    stats->length = (!n->is_dir && n->content != NULL)
                        ? (int64_t)n->content->len
                        : 0;
    stats->mtime_nsec = n->mtime;
    stats->is_directory = n->is_dir != 0;
    set_ok(status);
  }
  pthread_rwlock_unlock(&fs->lock);
}

static bool fs_is_directory(const TF_Filesystem* filesystem, const char* path,
                            TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  node* n;
  bool result = false;
  inject_latency();
  pthread_rwlock_rdlock(&fs->lock);
  n = find_existing(fs, path, status);
  if (n != NULL && !n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is not a directory");
  } else if (n != NULL) {
    result = true;
    set_ok(status);
  }
  pthread_rwlock_unlock(&fs->lock);
  return result;
}

static int64_t fs_get_file_size(const TF_Filesystem* filesystem,
                                const char* path, TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  node* n;
  int64_t size = -1;
  inject_latency();
  pthread_rwlock_rdlock(&fs->lock);
  n = find_existing(fs, path, status);
  if (n != NULL && n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
  } else if (n != NULL) {
    size = n->content != NULL ? (int64_t)n->content->len : 0;
    set_ok(status);
  }
  pthread_rwlock_unlock(&fs->lock);
  return size;
}

static char* fs_translate_name(const TF_Filesystem* filesystem,
                               const char* uri) {
  (void)filesystem;
  return plugin_translate_name(uri, 1);
}

static int fs_get_children(const TF_Filesystem* filesystem, const char* path,
                           char*** entries, TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  plugin_strlist list = {NULL, 0, 0};
  node* n;
  size_t i;
  inject_latency();
  *entries = NULL;
  pthread_rwlock_rdlock(&fs->lock);
  n = find_existing(fs, path, status);
  if (n != NULL && !n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is not a directory");
    n = NULL;
  }
  for (i = 0; n != NULL && i < n->children.capacity; ++i) {
    node* c = n->children.slots[i];
    if (c == NULL || c == TOMBSTONE) continue;
    if (plugin_strlist_push(&list, c->name, c->name_len) != 0) {
      pthread_rwlock_unlock(&fs->lock);
      plugin_strlist_free(&list);
      set_oom(status);
      return -1;
    }
  }
  pthread_rwlock_unlock(&fs->lock);
  if (n == NULL) return -1;
  set_ok(status);
  return plugin_strlist_release(&list, entries);
}

/* ---- glob ---------------------------------------------------------------- */

typedef struct mem_glob {
  plugin_strlist* out;
  char path[4096];
  int failed;
} mem_glob;

static void glob_walk(mem_glob* g, node* dir, size_t len, const char* pattern) {
  const char* end;
  size_t comp_len;
  int last;
  char comp[1024];
  size_t i;
  while (*pattern == '/') ++pattern;
  if (*pattern == '\0') {
    if (plugin_strlist_push(g->out, g->path, len) != 0) g->failed = 1;
    return;
  }
  end = strchr(pattern, '/');
  if (end == NULL) end = pattern + strlen(pattern);
  comp_len = (size_t)(end - pattern);
  while (*end == '/') ++end;
  last = (*end == '\0');
  if (comp_len >= sizeof comp) return;
  memcpy(comp, pattern, comp_len);
  comp[comp_len] = '\0';
  if (!plugin_has_glob_meta(comp, comp_len)) {
    node* child = dirmap_get(&dir->children, comp, comp_len);
    size_t n = len;
    if (child == NULL || (!last && !child->is_dir)) return;
    if (n + comp_len + 2 >= sizeof g->path) return;
    if (n > 0 && g->path[n - 1] != '/') g->path[n++] = '/';
    memcpy(g->path + n, comp, comp_len + 1);
    n += comp_len;
    if (last) {
      if (plugin_strlist_push(g->out, g->path, n) != 0) g->failed = 1;
    } else {
      glob_walk(g, child, n, end);
    }
    g->path[len] = '\0';
    return;
  }
  for (i = 0; i < dir->children.capacity && !g->failed; ++i) {
    node* child = dir->children.slots[i];
    size_t n = len;
    if (child == NULL || child == TOMBSTONE) continue;
    if (!last && !child->is_dir) continue;
    if (fnmatch(comp, child->name, FNM_PATHNAME) != 0) continue;
    if (n + child->name_len + 2 >= sizeof g->path) continue;
    if (n > 0 && g->path[n - 1] != '/') g->path[n++] = '/';
    memcpy(g->path + n, child->name, child->name_len + 1);
    n += child->name_len;
    if (last) {
      if (plugin_strlist_push(g->out, g->path, n) != 0) g->failed = 1;
    } else {
      glob_walk(g, child, n, end);
    }
    g->path[len] = '\0';
  }
}

/* As in TensorFlow, the pattern arrives untranslated and the matches go
 * back as URIs: "mem://" + path. */
static int fs_get_matching_paths(const TF_Filesystem* filesystem,
                                 const char* uri_pattern, char*** entries,
                                 TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  plugin_strlist list = {NULL, 0, 0};
  size_t prefix = plugin_scheme_prefix_len(uri_pattern);
  char* pattern = plugin_translate_name(uri_pattern, 1);
  mem_glob* g = malloc(sizeof *g);
  int failed;
  inject_latency();
  *entries = NULL;
  if (g == NULL || pattern == NULL) {
    free(g);
    plugin_memory_free(pattern);
    set_oom(status);
    return -1;
  }
  g->out = &list;
  g->failed = 0;
  g->path[0] = '/';
  g->path[1] = '\0';
  pthread_rwlock_rdlock(&fs->lock);
  glob_walk(g, fs->root, 1, pattern);
  pthread_rwlock_unlock(&fs->lock);
  failed = g->failed;
  free(g);
  plugin_memory_free(pattern);
  if (failed || plugin_strlist_prefix(&list, uri_pattern, prefix) != 0) {
    plugin_strlist_free(&list);
    set_oom(status);
    return -1;
  }
  plugin_strlist_sort(&list);
  set_ok(status);
  return plugin_strlist_release(&list, entries);
}

/* ---- transactions ---------------------------------------------------------- */

#define TXN_DIR ".asyncfs-txn"

struct mem_txn {
  char* root;    /* NULL until rooted */
  char* staging; /* "/.asyncfs-txn/<n>" */
  TF_TransactionToken* token;
  mem_txn* next;
};

/* A copy of the tree at src named name: nodes copied, contents shared. */
static node* copy_tree(const node* src, const char* name, size_t len) {
  node* n = node_new(name, len, src->is_dir);
  size_t i;
  if (n == NULL) return NULL;
  n->mtime = src->mtime;
  if (!src->is_dir) {
    n->content = src->content;
    blob_ref(n->content);
    return n;
  }
  for (i = 0; i < src->children.capacity; ++i) {
    node* c = src->children.slots[i];
    node* copy;
    if (c == NULL || c == TOMBSTONE) continue;
    copy = copy_tree(c, c->name, c->name_len);
    if (copy == NULL || dirmap_insert(&n->children, copy) != 0) {
      if (copy != NULL) node_release_tree(copy);
      node_release_tree(n);
      return NULL;
    }
  }
  return n;
}

/* The directory node at path, made (with its parents) when missing; NULL
 * with status set when a file is in the way. Call with the write lock. */
static node* make_dirs(memfs* fs, const char* path, TF_Status* status) {
  node* dir = fs->root;
  const char* comp;
  size_t len;
  for (comp = next_component(path, &len); comp != NULL;
       comp = next_component(comp + len, &len)) {
    node* child = dirmap_get(&dir->children, comp, len);
    if (child == NULL) {
      child = node_new(comp, len, 1);
      if (child == NULL || dirmap_insert(&dir->children, child) != 0) {
        if (child != NULL) node_unref(child);
        set_oom(status);
        return NULL;
      }
    } else if (!child->is_dir) {
      TF_SetStatus(status, TF_FAILED_PRECONDITION,
                   "a path component is a file");
      return NULL;
    }
    dir = child;
  }
  return dir;
}

static void txn_free(mem_txn* txn) {
  free(txn->root);
  free(txn->staging);
  plugin_memory_free(txn->token);
  free(txn);
}

static void txn_free_all(memfs* fs) {
  while (fs->txns != NULL) {
    mem_txn* txn = fs->txns;
    fs->txns = txn->next;
    txn_free(txn);
  }
}

static mem_txn* txn_new(const TF_Filesystem* filesystem) {
  mem_txn* txn = calloc(1, sizeof *txn);
  if (txn == NULL) return NULL;
  txn->token = plugin_memory_allocate(sizeof(TF_TransactionToken));
  if (txn->token == NULL) {
    free(txn);
    return NULL;
  }
  txn->token->token = txn;
  txn->token->owner = (TF_Filesystem*)filesystem;
  return txn;
}

/* Roots txn at root and stages a copy of its tree. Write lock held. */
static int txn_begin(memfs* fs, mem_txn* txn, const char* root,
                     TF_Status* status) {
  char msg[600], name[32];
  mem_txn* other;
  resolved r;
  node *area, *staged;
  if (next_component(root, &(size_t){0}) == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "a transaction root must be a directory below /");
    return -1;
  }
  for (other = fs->txns; other != NULL; other = other->next) {
    if (other != txn && other->root != NULL && plugin_paths_overlap(other->root, root)) {
      snprintf(msg, sizeof msg,
               "conflicts with a transaction in progress on %s", other->root);
      TF_SetStatus(status, TF_ABORTED, msg);
      return -1;
    }
  }
  if (resolve(fs, root, &r, status) != 0) {
    if (TF_GetCode(status) != TF_NOT_FOUND) return -1;
    r.target = NULL; /* parents missing: made at commit */
  } else if (r.target != NULL && !r.target->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 "a transaction root must be a directory, not a file");
    return -1;
  }
  area = make_dirs(fs, "/" TXN_DIR, status);
  if (area == NULL) return -1;
  snprintf(name, sizeof name, "%lu", ++fs->txn_counter);
  staged = r.target != NULL ? copy_tree(r.target, name, strlen(name))
                            : node_new(name, strlen(name), 1);
  if (staged == NULL || dirmap_insert(&area->children, staged) != 0) {
    if (staged != NULL) node_release_tree(staged);
    set_oom(status);
    return -1;
  }
  txn->root = strdup(root);
  txn->staging = malloc(sizeof("/" TXN_DIR "/") + strlen(name));
  if (txn->root == NULL || txn->staging == NULL) {
    set_oom(status);
    return -1;
  }
  sprintf(txn->staging, "/" TXN_DIR "/%s", name);
  return 0;
}

/* Takes the staged tree out of /.asyncfs-txn (dropping the area when it is
 * empty) and returns it. Write lock held. */
static node* txn_take_staged(memfs* fs, mem_txn* txn) {
  node* area = dirmap_get(&fs->root->children, TXN_DIR, strlen(TXN_DIR));
  const char* name = strrchr(txn->staging, '/') + 1;
  node* staged;
  if (area == NULL) return NULL;
  staged = dirmap_remove(&area->children, name, strlen(name));
  if (area->children.count == 0) {
    dirmap_remove(&fs->root->children, TXN_DIR, strlen(TXN_DIR));
    node_release_tree(area);
  }
  return staged;
}

static void txn_unlink(memfs* fs, mem_txn* txn) {
  mem_txn** at;
  for (at = &fs->txns; *at != NULL; at = &(*at)->next) {
    if (*at == txn) {
      *at = txn->next;
      return;
    }
  }
}

static int fs_start_transaction(const TF_Filesystem* filesystem,
                                TF_TransactionToken** token,
                                TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  mem_txn* txn = txn_new(filesystem);
  if (txn == NULL) {
    set_oom(status);
    return -1;
  }
  pthread_rwlock_wrlock(&fs->lock);
  txn->next = fs->txns;
  fs->txns = txn;
  pthread_rwlock_unlock(&fs->lock);
  *token = txn->token;
  set_ok(status);
  return 0;
}

static int fs_add_to_transaction(const TF_Filesystem* filesystem,
                                 const char* path, TF_TransactionToken* token,
                                 TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  mem_txn* txn = token != NULL ? token->token : NULL;
  int rc = 0;
  pthread_rwlock_wrlock(&fs->lock);
  if (txn == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "not a transaction token");
    rc = -1;
  } else if (txn->root == NULL) {
    rc = txn_begin(fs, txn, path, status);
  } else if (!plugin_path_within(path, txn->root)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "the path is outside the transaction's root");
    rc = -1;
  }
  pthread_rwlock_unlock(&fs->lock);
  if (rc == 0) set_ok(status);
  return rc;
}

static int fs_get_transaction_for_path(const TF_Filesystem* filesystem,
                                       const char* path,
                                       TF_TransactionToken** token,
                                       TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  mem_txn* txn;
  *token = NULL;
  pthread_rwlock_rdlock(&fs->lock);
  for (txn = fs->txns; txn != NULL; txn = txn->next)
    if (txn->root != NULL && plugin_path_within(path, txn->root)) *token = txn->token;
  pthread_rwlock_unlock(&fs->lock);
  if (*token == NULL) {
    TF_SetStatus(status, TF_NOT_FOUND, "no transaction covers the path");
    return -1;
  }
  set_ok(status);
  return 0;
}

static int fs_get_or_start_transaction_for_path(const TF_Filesystem* filesystem,
                                                const char* path,
                                                TF_TransactionToken** token,
                                                TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  mem_txn* txn;
  inject_latency();
  *token = NULL;
  pthread_rwlock_wrlock(&fs->lock);
  for (txn = fs->txns; txn != NULL; txn = txn->next) {
    if (txn->root != NULL && strcmp(txn->root, path) == 0) {
      *token = txn->token;
      pthread_rwlock_unlock(&fs->lock);
      set_ok(status);
      return 0;
    }
  }
  txn = txn_new(filesystem);
  if (txn == NULL || txn_begin(fs, txn, path, status) != 0) {
    if (txn == NULL) set_oom(status);
    if (txn != NULL && txn->staging != NULL) {
      node* staged = txn_take_staged(fs, txn);
      if (staged != NULL) node_release_tree(staged);
    }
    pthread_rwlock_unlock(&fs->lock);
    if (txn != NULL) txn_free(txn);
    return -1;
  }
  txn->next = fs->txns;
  fs->txns = txn;
  pthread_rwlock_unlock(&fs->lock);
  *token = txn->token;
  set_ok(status);
  return 0;
}

static char* fs_decode_transaction_token(const TF_Filesystem* filesystem,
                                         const TF_TransactionToken* token) {
  const mem_txn* txn = token != NULL ? token->token : NULL;
  (void)filesystem;
  return plugin_strdup(txn != NULL && txn->staging != NULL ? txn->staging
                                                           : "");
}

static int txn_finish(const TF_Filesystem* filesystem,
                      TF_TransactionToken* token, int commit,
                      TF_Status* status) {
  memfs* fs = fs_of(filesystem);
  mem_txn* txn = token != NULL ? token->token : NULL;
  int rc = 0;
  inject_latency();
  if (txn == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "not a transaction token");
    return -1;
  }
  pthread_rwlock_wrlock(&fs->lock);
  txn_unlink(fs, txn);
  if (txn->root != NULL) {
    node* staged = txn_take_staged(fs, txn);
    if (commit && staged != NULL) {
      /* swap the staged tree in for the root: atomic for every reader */
      char* parent_path = strdup(txn->root);
      char* slash = parent_path != NULL ? strrchr(parent_path, '/') : NULL;
      node* parent;
      const char* name = strrchr(txn->root, '/');
      name = name != NULL ? name + 1 : txn->root;
      if (slash != NULL) *slash = '\0';
      parent = parent_path != NULL ? make_dirs(fs, parent_path, status) : NULL;
      if (parent == NULL || rename_node(staged, name, strlen(name)) != 0 ||
          link_replacing(parent, staged) != 0) {
        if (parent_path == NULL || TF_GetCode(status) == TF_OK) set_oom(status);
        node_release_tree(staged);
        rc = -1;
      }
      free(parent_path);
    } else if (staged != NULL) {
      node_release_tree(staged);
    }
  }
  pthread_rwlock_unlock(&fs->lock);
  txn_free(txn);
  if (rc == 0) set_ok(status);
  return rc;
}

static int fs_end_transaction(const TF_Filesystem* filesystem,
                              TF_TransactionToken* token, TF_Status* status) {
  return txn_finish(filesystem, token, 1, status);
}

static int fs_abort_transaction(const TF_Filesystem* filesystem,
                                TF_TransactionToken* token,
                                TF_Status* status) {
  return txn_finish(filesystem, token, 0, status);
}

/* ---- configuration ------------------------------------------------------- */

static void fs_get_configuration(const TF_Filesystem* filesystem,
                                 TF_Filesystem_Option** options,
                                 int* num_options, TF_Status* status) {
  (void)filesystem;
  plugin_options_get_all(&mem_options, options, num_options, status);
}

static void fs_set_configuration(const TF_Filesystem* filesystem,
                                 const TF_Filesystem_Option* options,
                                 int num_options, TF_Status* status) {
  (void)filesystem;
  plugin_options_set_all(&mem_options, options, num_options, status);
}

static void fs_get_configuration_option(const TF_Filesystem* filesystem,
                                        const char* key,
                                        TF_Filesystem_Option** option,
                                        TF_Status* status) {
  (void)filesystem;
  plugin_options_get_one(&mem_options, key, option, status);
}

static void fs_set_configuration_option(const TF_Filesystem* filesystem,
                                        const TF_Filesystem_Option* option,
                                        TF_Status* status) {
  (void)filesystem;
  plugin_options_set_one(&mem_options, option, status);
}

static void fs_get_configuration_keys(const TF_Filesystem* filesystem,
                                      char** keys, int* num_keys,
                                      TF_Status* status) {
  (void)filesystem;
  plugin_options_keys(&mem_options, keys, num_keys, status);
}

/* ---- registration -------------------------------------------------------- */

ASYNCFS_PLUGIN_EXPORT void TF_InitPlugin(TF_FilesystemPluginInfo* info) {
  TF_FilesystemPluginOps* ops;
  TF_FilesystemOps* fs = plugin_memory_allocate(TF_FILESYSTEM_OPS_SIZE);
  TF_RandomAccessFileOps* reader =
      plugin_memory_allocate(TF_RANDOM_ACCESS_FILE_OPS_SIZE);
  TF_WritableFileOps* writer =
      plugin_memory_allocate(TF_WRITABLE_FILE_OPS_SIZE);
  TF_ReadOnlyMemoryRegionOps* region =
      plugin_memory_allocate(TF_READ_ONLY_MEMORY_REGION_OPS_SIZE);

  info->plugin_memory_allocate = plugin_memory_allocate;
  info->plugin_memory_free = plugin_memory_free;
  info->num_schemes = 1;
  info->ops = ops = plugin_memory_allocate(sizeof(TF_FilesystemPluginOps));
  TF_SetFilesystemVersionMetadata(ops);
  ops->scheme = plugin_strdup("mem");

  reader->cleanup = reader_cleanup;
  reader->read = reader_read;
  ops->random_access_file_ops = reader;

  writer->cleanup = writer_cleanup;
  writer->append = writer_append;
  writer->tell = writer_tell;
  writer->flush = writer_flush;
  writer->sync = writer_flush; /* memory is as durable as it gets */
  writer->close = writer_close;
  ops->writable_file_ops = writer;

  region->cleanup = region_cleanup;
  region->data = region_data;
  region->length = region_length;
  ops->read_only_memory_region_ops = region;

  fs->init = fs_init;
  fs->cleanup = fs_cleanup;
  fs->new_random_access_file = fs_new_random_access_file;
  fs->new_writable_file = fs_new_writable_file;
  fs->new_appendable_file = fs_new_appendable_file;
  fs->new_read_only_memory_region_from_file =
      fs_new_read_only_memory_region_from_file;
  fs->create_dir = fs_create_dir;
  fs->recursively_create_dir = fs_recursively_create_dir;
  fs->delete_file = fs_delete_file;
  fs->delete_dir = fs_delete_dir;
  fs->delete_recursively = fs_delete_recursively;
  fs->rename_file = fs_rename_file;
  fs->copy_file = fs_copy_file;
  fs->path_exists = fs_path_exists;
  fs->paths_exist = fs_paths_exist;
  fs->stat = fs_stat;
  fs->is_directory = fs_is_directory;
  fs->get_file_size = fs_get_file_size;
  fs->translate_name = fs_translate_name;
  fs->get_children = fs_get_children;
  fs->get_matching_paths = fs_get_matching_paths;
  fs->get_filesystem_configuration = fs_get_configuration;
  fs->set_filesystem_configuration = fs_set_configuration;
  fs->get_filesystem_configuration_option = fs_get_configuration_option;
  fs->set_filesystem_configuration_option = fs_set_configuration_option;
  fs->get_filesystem_configuration_keys = fs_get_configuration_keys;
  fs->start_transaction = fs_start_transaction;
  fs->end_transaction = fs_end_transaction;
  fs->add_to_transaction = fs_add_to_transaction;
  fs->get_transaction_for_path = fs_get_transaction_for_path;
  fs->get_or_start_transaction_for_path = fs_get_or_start_transaction_for_path;
  fs->decode_transaction_token = fs_decode_transaction_token;
  fs->abort_transaction = fs_abort_transaction;
  ops->filesystem_ops = fs;
}

static const ASYNCFS_PluginMetadata mem_metadata = {
    sizeof(ASYNCFS_PluginMetadata),
    "memory",
    "1.0.0",
    "the asyncfs authors",
    "https://github.com/asyncfs/asyncfs/issues",
    ASYNCFS_CORE_ABI_VERSION,
    ASYNCFS_CORE_ABI_VERSION,
    0};

ASYNCFS_PLUGIN_EXPORT const ASYNCFS_PluginMetadata* ASYNCFS_GetPluginMetadata(
    void) {
  return &mem_metadata;
}
