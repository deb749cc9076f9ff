/* The memory plugin's files: readers, writers and memory regions. A region
 * is the content itself (zero copy), valid while the file is rewritten. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "memory_internal.h"

/* ---- random access files ------------------------------------------------- */

typedef struct mem_handle {
  memfs* fs;
  node* node;
} mem_handle;

static void handle_free(mem_handle* h) {
  if (h == NULL) return;
  mem_node_unref(h->node);
  free(h);
}

static void reader_cleanup(TF_RandomAccessFile* file) {
  handle_free(file->plugin_file);
  file->plugin_file = NULL;
}

/* The read under the store's read lock, which the caller holds. */
static int64_t read_locked(const mem_handle* h, uint64_t offset, size_t n,
                           char* buffer, TF_Status* status) {
  size_t len, count = 0;
  len = h->node->content != NULL ? h->node->content->len : 0;
  if (offset < len) {
    count = len - (size_t)offset;
    if (count > n) count = n;
    memcpy(buffer, h->node->content->data + offset, count);
  }
  if (count < n) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "read past the end of the file");
  } else {
    plugin_set_ok(status);
  }
  return (int64_t)count;
}

static int64_t reader_read(const TF_RandomAccessFile* file, uint64_t offset,
                           size_t n, char* buffer, TF_Status* status) {
  const mem_handle* h = file->plugin_file;
  int64_t count;
  mem_inject_latency(h->fs);
  pthread_rwlock_rdlock(&h->fs->lock);
  count = read_locked(h, offset, n, buffer, status);
  pthread_rwlock_unlock(&h->fs->lock);
  return count;
}

/* read, unless it would wait (mem_rdlock_if_ready). */
static int64_t reader_read_if_ready(const TF_RandomAccessFile* file,
                                    uint64_t offset, size_t n, char* buffer,
                                    TF_Status* status) {
  const mem_handle* h = file->plugin_file;
  int64_t count;
  if (mem_rdlock_if_ready(h->fs) != 0) {
    TF_SetStatus(status, TF_UNAVAILABLE, "not ready without waiting");
    return -1;
  }
  count = read_locked(h, offset, n, buffer, status);
  pthread_rwlock_unlock(&h->fs->lock);
  return count;
}

/* ---- writable files ------------------------------------------------------ */

typedef struct mem_writer {
  mem_handle h;
  int closed;
} mem_writer;

static void writer_cleanup(TF_WritableFile* file) {
  mem_writer* w = file->plugin_file;
  if (w == NULL) return;
  mem_node_unref(w->h.node);
  free(w);
  file->plugin_file = NULL;
}

/* Makes n's content writable by this node alone with room for extra more
 * bytes and the zero byte kept after the content (TensorFlow's own tests
 * read a region's data as a C string); call with the write lock held. */
static int reserve_content(node* n, size_t extra) {
  blob* b = n->content;
  size_t need = (b != NULL ? b->len : 0) + extra + 1;
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
      mem_blob_unref(b);
      n->content = copy;
    }
  }
  return 0;
}

static void writer_append(const TF_WritableFile* file, const char* buffer,
                          size_t n, TF_Status* status) {
  mem_writer* w = file->plugin_file;
  node* target = w->h.node;
  mem_inject_latency(w->h.fs);
  if (w->closed) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is closed");
    return;
  }
  pthread_rwlock_wrlock(&w->h.fs->lock);
  if (reserve_content(target, n) != 0) {
    pthread_rwlock_unlock(&w->h.fs->lock);
    plugin_set_oom(status);
    return;
  }
  memcpy(target->content->data + target->content->len, buffer, n);
  target->content->len += n;
  target->content->data[target->content->len] = '\0';
  target->mtime = mem_now_nsec();
  pthread_rwlock_unlock(&w->h.fs->lock);
  plugin_set_ok(status);
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
  plugin_set_ok(status);
  return len;
}

static void writer_flush(const TF_WritableFile* file, TF_Status* status) {
  const mem_writer* w = file->plugin_file;
  if (w->closed) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is closed");
    return;
  }
  plugin_set_ok(status);
}

static void writer_close(const TF_WritableFile* file, TF_Status* status) {
  mem_writer* w = file->plugin_file;
  mem_inject_latency(w->h.fs);
  if (w->closed) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is already closed");
    return;
  }
  w->closed = 1;
  plugin_set_ok(status);
}

/* ---- memory regions ------------------------------------------------------ */

static void region_cleanup(TF_ReadOnlyMemoryRegion* region) {
  mem_blob_unref(region->plugin_memory_region);
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

/* Finds an existing regular file, with FAILED_PRECONDITION for a directory,
 * and takes a handle reference to it. Call with a lock held. */
static node* open_file_node(memfs* fs, const char* path, TF_Status* status) {
  node* n = mem_find_existing(fs, path, status);
  if (n == NULL) return NULL;
  if (n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
    return NULL;
  }
  mem_node_ref(n);
  return n;
}

/* file's handle on n, which open_file_node referenced: 0, or -1 with n
 * released and status set. */
static int attach_reader(memfs* fs, node* n, TF_RandomAccessFile* file, TF_Status* status) {
  mem_handle* h = malloc(sizeof *h);
  if (h == NULL) {
    mem_node_unref(n);
    plugin_set_oom(status);
    return -1;
  }
  h->fs = fs;
  h->node = n;
  file->plugin_file = h;
  plugin_set_ok(status);
  return 0;
}

void mem_new_random_access_file(const TF_Filesystem* filesystem,
                                      const char* path,
                                      TF_RandomAccessFile* file,
                                      TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  node* n;
  pthread_rwlock_rdlock(&fs->lock);
  n = open_file_node(fs, path, status);
  pthread_rwlock_unlock(&fs->lock);
  if (n != NULL) attach_reader(fs, n, file, status);
}

/* new_random_access_file, unless it would wait (mem_rdlock_if_ready). */
int64_t mem_new_random_access_file_if_ready(const TF_Filesystem* filesystem,
                                            const char* path,
                                            TF_RandomAccessFile* file,
                                            TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  node* n;
  int64_t size;
  if (mem_rdlock_if_ready(fs) != 0) {
    TF_SetStatus(status, TF_UNAVAILABLE, "not ready without waiting");
    return -1;
  }
  n = open_file_node(fs, path, status);
  size = n != NULL && n->content != NULL ? (int64_t)n->content->len : 0;
  pthread_rwlock_unlock(&fs->lock);
  if (n == NULL || attach_reader(fs, n, file, status) != 0) return -1;
  return size;
}

/* Creates (or, for truncate, empties) the file at path and returns it with
 * a handle reference. Call with the write lock held. */
static node* create_file_node(memfs* fs, const char* path, int truncate,
                              TF_Status* status) {
  resolved r;
  node* n;
  if (mem_resolve(fs, path, &r, status) != 0) return NULL;
  if (r.parent == NULL || (r.target != NULL && r.target->is_dir)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
    return NULL;
  }
  n = r.target;
  if (n == NULL) {
    n = mem_node_new(r.name, r.name_len, 0);
    if (n == NULL || mem_dirmap_insert(&r.parent->children, n) != 0) {
      if (n != NULL) mem_node_unref(n);
      plugin_set_oom(status);
      return NULL;
    }
    r.parent->mtime = n->mtime;
  } else if (truncate) {
    mem_blob_unref(n->content);
    n->content = NULL;
    n->mtime = mem_now_nsec();
  }
  mem_node_ref(n);
  return n;
}

static void open_writer(const TF_Filesystem* filesystem, const char* path,
                        int truncate, TF_WritableFile* file,
                        TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  mem_writer* w = calloc(1, sizeof *w);
  node* n;
  mem_inject_latency(fs);
  if (w == NULL) {
    plugin_set_oom(status);
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
  plugin_set_ok(status);
}

void mem_new_writable_file(const TF_Filesystem* filesystem,
                                 const char* path, TF_WritableFile* file,
                                 TF_Status* status) {
  open_writer(filesystem, path, 1, file, status);
}

void mem_new_appendable_file(const TF_Filesystem* filesystem,
                                   const char* path, TF_WritableFile* file,
                                   TF_Status* status) {
  open_writer(filesystem, path, 0, file, status);
}

void mem_new_read_only_memory_region_from_file(
    const TF_Filesystem* filesystem, const char* path,
    TF_ReadOnlyMemoryRegion* region, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  node* n;
  blob* b = NULL;
  mem_inject_latency(fs);
  pthread_rwlock_rdlock(&fs->lock);
  n = mem_find_existing(fs, path, status);
  if (n != NULL && n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
  } else if (n != NULL && (n->content == NULL || n->content->len == 0)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "file is empty");
  } else if (n != NULL) {
    b = n->content;
    mem_blob_ref(b); /* shared from now on: writers copy before changing it */
  }
  pthread_rwlock_unlock(&fs->lock);
  if (b == NULL) return;
  region->plugin_memory_region = b;
  plugin_set_ok(status);
}

/* ---- tables ----------------------------------------------------------------- */

const TF_RandomAccessFileOps mem_reader_ops = {
    .cleanup = reader_cleanup,
    .read = reader_read,
    .read_if_ready = reader_read_if_ready};

const TF_WritableFileOps mem_writer_ops = {
    .cleanup = writer_cleanup,
    .append = writer_append,
    .tell = writer_tell,
    .flush = writer_flush,
    .sync = writer_flush, /* memory is as durable as it gets */
    .close = writer_close};

const TF_ReadOnlyMemoryRegionOps mem_region_ops = {
    .cleanup = region_cleanup, .data = region_data, .length = region_length};
