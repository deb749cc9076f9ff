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
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory_internal.h"
#include "plugin_fork.h"

static const plugin_option mem_options[] = {
    {"latency_us",
     "microseconds slept before every request, as a remote store would take: "
     "every operation but opening a file for reading, which like an object "
     "store's client makes no request until the first read",
     PLUGIN_OPTION_INT, offsetof(mem_settings, latency_us), 0,
     10 * 1000 * 1000, 0},
};
static const plugin_schema mem_schema = {"mem", mem_options, 1,
                                         sizeof(mem_settings)};

/* ---- filesystem ops ------------------------------------------------------ */

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  static const mem_settings defaults = {{0}, 0};
  memfs* fs = plugin_fs_create(filesystem, sizeof *fs, &mem_schema, &defaults,
                               &mem_transaction_hooks, status);
  if (fs == NULL) return;
  fs->root = mem_node_new("", 0, 1);
  if (fs->root == NULL || pthread_rwlock_init(&fs->lock, NULL) != 0 ||
      plugin_fork_guard_rwlock(&fs->lock, PLUGIN_LOCK_DATA) != 0) {
    free(fs->root);
    plugin_fs_free(filesystem);
    plugin_set_oom(status);
  }
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  memfs* fs = mem_fs_of(filesystem);
  if (fs == NULL) return;
  mem_node_release_tree(fs->root);
  plugin_fork_unguard(&fs->lock);
  pthread_rwlock_destroy(&fs->lock);
  plugin_fs_free(filesystem);
}

static void fs_create_dir(const TF_Filesystem* filesystem, const char* path,
                          TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  resolved r;
  node* n;
  mem_inject_latency(fs);
  pthread_rwlock_wrlock(&fs->lock);
  if (mem_resolve(fs, path, &r, status) != 0) goto done;
  if (r.target != NULL) {
    TF_SetStatus(status, TF_ALREADY_EXISTS, "path already exists");
    goto done;
  }
  n = mem_node_new(r.name, r.name_len, 1);
  if (n == NULL || mem_dirmap_insert(&r.parent->children, n) != 0) {
    if (n != NULL) mem_node_unref(n);
    plugin_set_oom(status);
    goto done;
  }
  r.parent->mtime = n->mtime;
  plugin_set_ok(status);
done:
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_recursively_create_dir(const TF_Filesystem* filesystem,
                                      const char* path, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  node* dir;
  const char* comp;
  size_t len;
  mem_inject_latency(fs);
  pthread_rwlock_wrlock(&fs->lock);
  dir = fs->root;
  for (comp = mem_next_component(path, &len); comp != NULL;
       comp = mem_next_component(comp + len, &len)) {
    node* child;
    if (len == 2 && comp[0] == '.' && comp[1] == '.') continue;
    child = mem_dirmap_get(&dir->children, comp, len);
    if (child == NULL) {
      child = mem_node_new(comp, len, 1);
      if (child == NULL || mem_dirmap_insert(&dir->children, child) != 0) {
        if (child != NULL) mem_node_unref(child);
        plugin_set_oom(status);
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
  plugin_set_ok(status);
done:
  pthread_rwlock_unlock(&fs->lock);
}

/* Takes r's target out of its directory and frees it. Write lock held. */
static void unlink_target(const resolved* r) {
  mem_dirmap_remove(&r->parent->children, r->name, r->name_len);
  r->parent->mtime = mem_now_nsec();
  mem_node_release_tree(r->target);
}

/* delete_file (dir = 0) and delete_dir (dir = 1): the node must be of that
 * kind, and a directory empty and not the root. */
static void delete_node(const TF_Filesystem* filesystem, const char* path,
                        int dir, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  resolved r;
  mem_inject_latency(fs);
  pthread_rwlock_wrlock(&fs->lock);
  if (mem_resolve(fs, path, &r, status) != 0) goto done;
  if (r.target == NULL) {
    mem_set_not_found(status, path);
  } else if (r.target->is_dir != dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 dir ? "path is not a directory" : "path is a directory");
  } else if (dir && r.target->children.count > 0) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "directory is not empty");
  } else if (r.parent == NULL) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "cannot delete the root");
  } else {
    unlink_target(&r);
    plugin_set_ok(status);
  }
done:
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_delete_file(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  delete_node(filesystem, path, 0, status);
}

static void fs_delete_dir(const TF_Filesystem* filesystem, const char* path,
                          TF_Status* status) {
  delete_node(filesystem, path, 1, status);
}

static void fs_delete_recursively(const TF_Filesystem* filesystem,
                                  const char* path, uint64_t* undeleted_files,
                                  uint64_t* undeleted_dirs,
                                  TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  resolved r;
  mem_inject_latency(fs);
  *undeleted_files = 0;
  *undeleted_dirs = 0;
  pthread_rwlock_wrlock(&fs->lock);
  if (mem_resolve(fs, path, &r, status) != 0) {
    *undeleted_dirs = 1;
  } else if (r.target == NULL) {
    *undeleted_dirs = 1;
    mem_set_not_found(status, path);
  } else if (r.parent == NULL) {
    /* the root stays; everything below it goes */
    node* root = r.target;
    size_t i;
    for (i = 0; i < root->children.capacity; ++i) {
      node* c = root->children.slots[i];
      if (c != NULL && c != TOMBSTONE) mem_node_release_tree(c);
    }
    free(root->children.slots);
    memset(&root->children, 0, sizeof root->children);
    plugin_set_ok(status);
  } else {
    unlink_target(&r);
    plugin_set_ok(status);
  }
  pthread_rwlock_unlock(&fs->lock);
}

/* Shared checks of rename and copy: both sides are files (or the target is
 * absent) and the target's directory exists. Call with the write lock. */
static int resolve_file_pair(memfs* fs, const char* src, const char* dst,
                             resolved* s, resolved* d, TF_Status* status) {
  if (mem_resolve(fs, dst, d, status) != 0) return -1;
  if (d->parent == NULL || (d->target != NULL && d->target->is_dir)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "target path is a directory");
    return -1;
  }
  if (mem_resolve(fs, src, s, status) != 0) return -1;
  if (s->target == NULL) {
    mem_set_not_found(status, src);
    return -1;
  }
  if (s->target->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "source path is a directory");
    return -1;
  }
  return 0;
}
/* Moves s's node to d, renamed; on failure puts it back. */
static int move_node(const resolved* s, const resolved* d) {
  node* n = s->target;
  mem_dirmap_remove(&s->parent->children, s->name, s->name_len);
  s->parent->mtime = mem_now_nsec();
  if (mem_rename_node(n, d->name, d->name_len) != 0 ||
      mem_link_replacing(d->parent, n) != 0) {
    /* the slot it left is still free */
    mem_dirmap_insert(&s->parent->children, n);
    return -1;
  }
  return 0;
}

/* Links a new node at d sharing s's content until either side changes. */
static int copy_node(const resolved* s, const resolved* d) {
  node* n = mem_node_new(d->name, d->name_len, 0);
  if (n == NULL) return -1;
  n->content = s->target->content;
  mem_blob_ref(n->content);
  if (mem_link_replacing(d->parent, n) != 0) {
    mem_node_unref(n);
    return -1;
  }
  return 0;
}

/* rename_file (move = 1) and copy_file. */
static void transfer_file(const TF_Filesystem* filesystem, const char* src,
                          const char* dst, int move, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  resolved s, d;
  mem_inject_latency(fs);
  pthread_rwlock_wrlock(&fs->lock);
  if (resolve_file_pair(fs, src, dst, &s, &d, status) != 0) goto done;
  if (s.target != d.target && (move ? move_node(&s, &d) : copy_node(&s, &d)) != 0)
    plugin_set_oom(status);
  else
    plugin_set_ok(status);
done:
  pthread_rwlock_unlock(&fs->lock);
}

PLUGIN_DEFINE_RENAME_AND_COPY(transfer_file)

/* One step under the write lock: every reader sees the tree before or after. */
static void fs_rename_dir(const TF_Filesystem* filesystem, const char* src,
                          const char* dst, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  resolved s, d;
  mem_inject_latency(fs);
  pthread_rwlock_wrlock(&fs->lock);
  if (mem_resolve(fs, src, &s, status) != 0) goto done;
  if (s.target == NULL) {
    mem_set_not_found(status, src);
  } else if (!s.target->is_dir || s.parent == NULL) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 s.parent == NULL ? "cannot rename the root"
                                  : "source path is not a directory");
  } else if (plugin_path_within(dst, src)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "cannot move a directory into itself");
  } else if (mem_resolve(fs, dst, &d, status) != 0) {
    /* status set: a parent of dst is missing or a file */
  } else if (d.parent == NULL || d.target != NULL) {
    TF_SetStatus(status, TF_ALREADY_EXISTS, "target path exists");
  } else if (move_node(&s, &d) != 0) {
    plugin_set_oom(status);
  } else {
    plugin_set_ok(status);
  }
done:
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_path_exists(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  mem_inject_latency(fs);
  pthread_rwlock_rdlock(&fs->lock);
  if (mem_find_existing(fs, path, status) != NULL) plugin_set_ok(status);
  pthread_rwlock_unlock(&fs->lock);
}

static bool fs_paths_exist(const TF_Filesystem* filesystem, char** paths,
                           int num_files, TF_Status** statuses) {
  memfs* fs = mem_fs_of(filesystem);
  TF_Status* scratch = NULL;
  bool all = true;
  int i;
  mem_inject_latency(fs); /* one round trip for the whole batch */
  if (statuses == NULL) scratch = TF_NewStatus();
  pthread_rwlock_rdlock(&fs->lock);
  for (i = 0; i < num_files; ++i) {
    TF_Status* st = statuses != NULL ? statuses[i] : scratch;
    if (mem_find_existing(fs, paths[i], st) != NULL) {
      plugin_set_ok(st);
      continue;
    }
    all = false;
    if (statuses == NULL) break;
  }
  pthread_rwlock_unlock(&fs->lock);
  TF_DeleteStatus(scratch);
  return all;
}

static void node_stats(const node* n, TF_FileStatistics* stats) {
  stats->length =
      (!n->is_dir && n->content != NULL) ? (int64_t)n->content->len : 0;
  stats->mtime_nsec = n->mtime;
  stats->is_directory = n->is_dir != 0;
}

/* stat, with the read lock held; releases it. */
static void stat_and_unlock(memfs* fs, const char* path, TF_FileStatistics* stats,
                            TF_Status* status) {
  node* n = mem_find_existing(fs, path, status);
  if (n != NULL) {
    node_stats(n, stats);
    plugin_set_ok(status);
  }
  pthread_rwlock_unlock(&fs->lock);
}

static void fs_stat(const TF_Filesystem* filesystem, const char* path,
                    TF_FileStatistics* stats, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  mem_inject_latency(fs);
  pthread_rwlock_rdlock(&fs->lock);
  stat_and_unlock(fs, path, stats, status);
}

/* stat, unless it would wait (mem_rdlock_if_ready). */
static void fs_stat_if_ready(const TF_Filesystem* filesystem, const char* path,
                             TF_FileStatistics* stats, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  if (mem_rdlock_if_ready(fs) != 0) {
    TF_SetStatus(status, TF_UNAVAILABLE, "not ready without waiting");
    return;
  }
  stat_and_unlock(fs, path, stats, status);
}

static bool fs_is_directory(const TF_Filesystem* filesystem, const char* path,
                            TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  node* n;
  bool result = false;
  mem_inject_latency(fs);
  pthread_rwlock_rdlock(&fs->lock);
  n = mem_find_existing(fs, path, status);
  if (n != NULL && !n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is not a directory");
  } else if (n != NULL) {
    result = true;
    plugin_set_ok(status);
  }
  pthread_rwlock_unlock(&fs->lock);
  return result;
}

static int64_t fs_get_file_size(const TF_Filesystem* filesystem,
                                const char* path, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  node* n;
  int64_t size = -1;
  mem_inject_latency(fs);
  pthread_rwlock_rdlock(&fs->lock);
  n = mem_find_existing(fs, path, status);
  if (n != NULL && n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
  } else if (n != NULL) {
    size = n->content != NULL ? (int64_t)n->content->len : 0;
    plugin_set_ok(status);
  }
  pthread_rwlock_unlock(&fs->lock);
  return size;
}

static char* fs_translate_name(const TF_Filesystem* filesystem,
                               const char* uri) {
  (void)filesystem;
  return plugin_translate_name(uri, PLUGIN_NAMES_HOST_TREE);
}

static int mem_list(const TF_Filesystem* filesystem, const char* path,
                    plugin_listing* out, TF_Status* status) {
  memfs* fs = mem_fs_of(filesystem);
  node* n;
  size_t i;
  int failed = 0;
  mem_inject_latency(fs);
  pthread_rwlock_rdlock(&fs->lock);
  n = mem_find_existing(fs, path, status);
  if (n != NULL && !n->is_dir) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is not a directory");
    n = NULL;
  }
  for (i = 0; n != NULL && !failed && i < n->children.capacity; ++i) {
    node* c = n->children.slots[i];
    TF_FileStatistics st;
    if (c == NULL || c == TOMBSTONE) continue;
    node_stats(c, &st);
    failed = plugin_listing_push(out, c->name, c->name_len, &st) != 0;
  }
  pthread_rwlock_unlock(&fs->lock);
  if (n == NULL) return -1;
  if (failed) {
    plugin_set_oom(status);
    return -1;
  }
  plugin_set_ok(status);
  return 0;
}

PLUGIN_DEFINE_LISTING(mem_list)

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
  int split = plugin_glob_split(pattern, comp, sizeof comp, &comp_len, &end);
  if (split == 0 && plugin_strlist_push(g->out, g->path, len) != 0) g->failed = 1;
  if (split <= 0) return;
  last = (*end == '\0');
  if (!plugin_has_glob_meta(comp, comp_len)) {
    node* child = mem_dirmap_get(&dir->children, comp, comp_len);
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
  memfs* fs = mem_fs_of(filesystem);
  plugin_strlist list = {NULL, 0, 0};
  size_t prefix = plugin_scheme_prefix_len(uri_pattern);
  char* pattern = plugin_translate_name(uri_pattern, PLUGIN_NAMES_HOST_TREE);
  mem_glob* g = malloc(sizeof *g);
  int failed;
  mem_inject_latency(fs);
  *entries = NULL;
  if (g == NULL || pattern == NULL) {
    free(g);
    plugin_memory_free(pattern);
    plugin_set_oom(status);
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
    plugin_set_oom(status);
    return -1;
  }
  plugin_strlist_sort(&list);
  plugin_set_ok(status);
  return plugin_strlist_release(&list, entries);
}

/* ---- registration -------------------------------------------------------- */

static const TF_FilesystemOps mem_filesystem_ops = {
    PLUGIN_FILESYSTEM_OPS(mem_, fs_),
    PLUGIN_TRANSACTION_OPS,
    PLUGIN_CONFIGURATION_OPS,
    .rename_dir = fs_rename_dir,
    .new_random_access_file_if_ready = mem_new_random_access_file_if_ready,
    .stat_if_ready = fs_stat_if_ready};

static const plugin_scheme mem_schemes[] = {
    {"mem", &mem_filesystem_ops, &mem_reader_ops, &mem_writer_ops,
     &mem_region_ops}};

PLUGIN_DEFINE(mem_schemes, "memory", "1.0.0", 0)

