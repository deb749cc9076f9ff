/* The memory plugin's tree: reference-counted contents, nodes, directories
 * as open-addressing hash tables, and path resolution. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "memory_internal.h"

static void sleep_us(int64_t us) {
  struct timespec ts;
  if (us <= 0) return;
  ts.tv_sec = (time_t)(us / 1000000);
  ts.tv_nsec = (long)(us % 1000000) * 1000;
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int64_t mem_now_nsec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- content ------------------------------------------------------------- */

void mem_blob_ref(blob* b) {
  if (b != NULL) __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
}

void mem_blob_unref(blob* b) {
  if (b == NULL) return;
  if (__atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0) {
    free(b->data);
    free(b);
  }
}

/* ---- nodes --------------------------------------------------------------- */

node* mem_node_new(const char* name, size_t len, int is_dir) {
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
  n->mtime = mem_now_nsec();
  n->refs = 1;
  return n;
}

void mem_node_ref(node* n) { __atomic_add_fetch(&n->refs, 1, __ATOMIC_RELAXED); }

void mem_node_unref(node* n) {
  if (__atomic_sub_fetch(&n->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  mem_blob_unref(n->content);
  free(n->children.slots);
  free(n->name);
  free(n);
}

/* Drops the tree's reference to n and to everything below it. */
void mem_node_release_tree(node* n) {
  size_t i;
  if (n->is_dir) {
    for (i = 0; i < n->children.capacity; ++i) {
      node* c = n->children.slots[i];
      if (c != NULL && c != TOMBSTONE) mem_node_release_tree(c);
    }
    free(n->children.slots);
    memset(&n->children, 0, sizeof n->children);
  }
  mem_node_unref(n);
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

node* mem_dirmap_get(const dirmap* m, const char* name, size_t len) {
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
int mem_dirmap_insert(dirmap* m, node* n) {
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

node* mem_dirmap_remove(dirmap* m, const char* name, size_t len) {
  size_t i = dirmap_find(m, name, len);
  node* n;
  if (i >= m->capacity) return NULL;
  n = m->slots[i];
  m->slots[i] = TOMBSTONE;
  --m->count;
  ++m->tombstones;
  return n;
}

static int64_t latency_us(memfs* fs) {
  return plugin_config_int(&fs->base.config, offsetof(mem_settings, latency_us));
}

void mem_inject_latency(memfs* fs) {
  sleep_us(latency_us(fs));
}

int mem_rdlock_if_ready(memfs* fs) {
  if (latency_us(fs) > 0) return -1; /* a store made slow has nothing at hand */
  return pthread_rwlock_tryrdlock(&fs->lock) == 0 ? 0 : -1;
}

const char* mem_next_component(const char* p, size_t* len) {
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
int mem_resolve(memfs* fs, const char* path, resolved* r, TF_Status* status) {
  node* dir = fs->root;
  const char* p = path;
  size_t len;
  const char* comp = mem_next_component(p, &len);
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
      comp = mem_next_component(after, &len);
      continue;
    }
    child = mem_dirmap_get(&dir->children, comp, len);
    next = mem_next_component(after, &next_len);
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

void mem_set_not_found(TF_Status* status, const char* path) {
  char msg[512];
  snprintf(msg, sizeof msg, "%s; no such file or directory", path);
  TF_SetStatus(status, TF_NOT_FOUND, msg);
}

/* Resolves path to an existing node, with NOT_FOUND when it is absent. */
node* mem_find_existing(memfs* fs, const char* path, TF_Status* status) {
  resolved r;
  if (mem_resolve(fs, path, &r, status) != 0) return NULL;
  if (r.target == NULL) mem_set_not_found(status, path);
  return r.target;
}

/* A copy of the tree at src named name: nodes copied, contents shared. */
node* mem_copy_tree(const node* src, const char* name, size_t len) {
  node* n = mem_node_new(name, len, src->is_dir);
  size_t i;
  if (n == NULL) return NULL;
  n->mtime = src->mtime;
  if (!src->is_dir) {
    n->content = src->content;
    mem_blob_ref(n->content);
    return n;
  }
  for (i = 0; i < src->children.capacity; ++i) {
    node* c = src->children.slots[i];
    node* copy;
    if (c == NULL || c == TOMBSTONE) continue;
    copy = mem_copy_tree(c, c->name, c->name_len);
    if (copy == NULL || mem_dirmap_insert(&n->children, copy) != 0) {
      if (copy != NULL) mem_node_release_tree(copy);
      mem_node_release_tree(n);
      return NULL;
    }
  }
  return n;
}

/* The directory node at path, made (with its parents) when missing; NULL
 * with status set when a file is in the way. Call with the write lock. */
node* mem_make_dirs(memfs* fs, const char* path, TF_Status* status) {
  node* dir = fs->root;
  const char* comp;
  size_t len;
  for (comp = mem_next_component(path, &len); comp != NULL;
       comp = mem_next_component(comp + len, &len)) {
    node* child = mem_dirmap_get(&dir->children, comp, len);
    if (child == NULL) {
      child = mem_node_new(comp, len, 1);
      if (child == NULL || mem_dirmap_insert(&dir->children, child) != 0) {
        if (child != NULL) mem_node_unref(child);
        plugin_set_oom(status);
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

/* Puts n in dir under its name, replacing what was there. */
int mem_link_replacing(node* dir, node* n) {
  node* old = mem_dirmap_remove(&dir->children, n->name, n->name_len);
  if (old != NULL) mem_node_release_tree(old);
  dir->mtime = mem_now_nsec();
  return mem_dirmap_insert(&dir->children, n);
}

int mem_rename_node(node* n, const char* name, size_t len) {
  char* copy = malloc(len + 1);
  if (copy == NULL) return -1;
  memcpy(copy, name, len);
  copy[len] = '\0';
  free(n->name);
  n->name = copy;
  n->name_len = len;
  return 0;
}

