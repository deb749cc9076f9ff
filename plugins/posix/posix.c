/*
 * The posix plugin: file:// and bare paths on the local filesystem. This
 * file holds its namespace (folders, deletions, renames, queries, listings
 * with each entry's kind, a glob that reads each directory once) and its
 * registration; its files are in posix_files.c, where writes and copies
 * land in posix_landing.c, bulk reads in posix_bulk.c, and transactions in
 * posix_transactions.c.
 *
 * Semantics follow TensorFlow's posix plugin (errno mapping through
 * TF_SetStatusFromIOError); beyond it: batch exists in one call, a native
 * glob, atomic writes and copies that keep permissions, and transactions.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "at_hand.h"
#include "plugin_common.h"
#include "plugin_fs.h"
#include "posix_internal.h"

static const plugin_option posix_options[] = {
    {"sync_on_close",
     "1: fsync a writable file before closing it (durable, slower)",
     PLUGIN_OPTION_INT, offsetof(posix_settings, sync_on_close), 0, 1, 0},
};
static const plugin_schema posix_schema = {"posix", posix_options, 1,
                                           sizeof(posix_settings)};

/* ---- filesystem ---------------------------------------------------------- */

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  static const posix_settings defaults = {{0}, 0};
  plugin_fs_create(filesystem, sizeof(plugin_fs), &posix_schema, &defaults,
                   &posix_transaction_hooks, status);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  plugin_fs_free(filesystem);
}

static void fs_create_dir(const TF_Filesystem* filesystem, const char* path,
                          TF_Status* status) {
  (void)filesystem;
  if (posix_check_staged_path(filesystem, path, status) != 0) return;
  if (mkdir(path, 0777) != 0) {
    TF_SetStatusFromIOError(status, errno, path);
    return;
  }
  plugin_set_ok(status);
}

int posix_make_dirs(const char* path, TF_Status* status) {
  char* buf = strdup(path);
  char* p;
  struct stat st;
  if (buf == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  /* Create each prefix in turn; an existing prefix must be a directory. */
  for (p = buf + 1;; ++p) {
    if (*p == '/' || *p == '\0') {
      char saved = *p;
      *p = '\0';
      if (mkdir(buf, 0777) != 0) {
        int e = errno;
        if (e != EEXIST) {
          TF_SetStatusFromIOError(status, e, buf);
          free(buf);
          return -1;
        }
        if (stat(buf, &st) != 0) {
          TF_SetStatusFromIOError(status, errno, buf);
          free(buf);
          return -1;
        }
        if (!S_ISDIR(st.st_mode)) {
          TF_SetStatus(status, TF_FAILED_PRECONDITION,
                       "a path component is a file");
          free(buf);
          return -1;
        }
      }
      *p = saved;
      if (saved == '\0') break;
    }
  }
  free(buf);
  plugin_set_ok(status);
  return 0;
}

static void fs_recursively_create_dir(const TF_Filesystem* filesystem,
                                      const char* path, TF_Status* status) {
  (void)filesystem;
  if (posix_check_staged_path(filesystem, path, status) != 0) return;
  posix_make_dirs(path, status);
}

/* A one-call change of path (unlink, rmdir), refused through a symlink
 * inside a transaction's staging tree. */
static void change(const TF_Filesystem* filesystem, const char* path,
                   int (*call)(const char*), TF_Status* status) {
  if (posix_check_staged_path(filesystem, path, status) != 0) return;
  if (call(path) != 0) {
    TF_SetStatusFromIOError(status, errno, path);
    return;
  }
  plugin_set_ok(status);
}

static void fs_delete_file(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  change(filesystem, path, unlink, status);
}

static void fs_delete_dir(const TF_Filesystem* filesystem, const char* path,
                          TF_Status* status) {
  change(filesystem, path, rmdir, status);
}

/* Deletes everything below the open directory dirfd, post-order, counting
 * what could not be deleted; the first error is kept in status. */
static void remove_tree_at(int dirfd, uint64_t* files, uint64_t* dirs,
                           TF_Status* status) {
  DIR* dir = fdopendir(dirfd);
  struct dirent* entry;
  if (dir == NULL) {
    close(dirfd);
    return;
  }
  while ((entry = readdir(dir)) != NULL) {
    const char* name = entry->d_name;
    int is_dir;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (entry->d_type == DT_UNKNOWN) {
      struct stat st;
      is_dir = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISDIR(st.st_mode);
    } else {
      is_dir = entry->d_type == DT_DIR;
    }
    if (is_dir) {
      int child = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC |
                                          O_NOFOLLOW);
      if (child >= 0) remove_tree_at(child, files, dirs, status);
      if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0) {
        ++*dirs;
        if (TF_GetCode(status) == TF_OK)
          TF_SetStatusFromIOError(status, errno, name);
      }
    } else if (unlinkat(dirfd, name, 0) != 0) {
      ++*files;
      if (TF_GetCode(status) == TF_OK)
        TF_SetStatusFromIOError(status, errno, name);
    }
  }
  closedir(dir);
}

static void fs_delete_recursively(const TF_Filesystem* filesystem,
                                  const char* path, uint64_t* undeleted_files,
                                  uint64_t* undeleted_dirs,
                                  TF_Status* status) {
  struct stat st;
  int fd;
  (void)filesystem;
  *undeleted_files = 0;
  *undeleted_dirs = 0;
  if (posix_check_staged_path(filesystem, path, status) != 0) return;
  if (lstat(path, &st) != 0) {
    *undeleted_dirs = 1;
    TF_SetStatusFromIOError(status, errno, path);
    return;
  }
  plugin_set_ok(status);
  if (!S_ISDIR(st.st_mode)) {
    if (unlink(path) != 0) {
      *undeleted_files = 1;
      TF_SetStatusFromIOError(status, errno, path);
    }
    return;
  }
  fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) remove_tree_at(fd, undeleted_files, undeleted_dirs, status);
  if (rmdir(path) != 0) {
    ++*undeleted_dirs;
    if (TF_GetCode(status) == TF_OK)
      TF_SetStatusFromIOError(status, errno, path);
  }
}

static void fs_rename_file(const TF_Filesystem* filesystem, const char* src,
                           const char* dst, TF_Status* status) {
  (void)filesystem;
  if (posix_check_staged_path(filesystem, src, status) != 0) return;
  if (posix_check_staged_path(filesystem, dst, status) != 0) return;
  if (posix_check_file_pair(src, dst, status) != 0) return;
  if (rename(src, dst) != 0) {
    TF_SetStatusFromIOError(status, errno, dst);
    return;
  }
  plugin_set_ok(status);
}

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0) /* linux/fs.h, for C libraries without it */
#endif

/* rename(2) of a directory, refusing to replace anything: renameat2's
 * RENAME_NOREPLACE where the kernel and filesystem have it (atomic), else
 * a check then rename(2) (which would replace only an empty directory). */
static void fs_rename_dir(const TF_Filesystem* filesystem, const char* src,
                          const char* dst, TF_Status* status) {
  struct stat st;
  if (posix_check_staged_path(filesystem, src, status) != 0) return;
  if (posix_check_staged_path(filesystem, dst, status) != 0) return;
  if (stat(src, &st) != 0) {
    TF_SetStatusFromIOError(status, errno, src);
    return;
  }
  if (!S_ISDIR(st.st_mode)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "source path is not a directory");
    return;
  }
  if (plugin_path_within(dst, src)) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "cannot move a directory into itself");
    return;
  }
  if (posix_rename2(src, dst, RENAME_NOREPLACE) != 0) {
    if (errno != ENOSYS && errno != EINVAL) {
      TF_SetStatusFromIOError(status, errno, dst);
      return;
    }
    if (lstat(dst, &st) == 0) {
      TF_SetStatus(status, TF_ALREADY_EXISTS, "target path exists");
      return;
    }
    if (rename(src, dst) != 0) {
      TF_SetStatusFromIOError(status, errno, dst);
      return;
    }
  }
  plugin_set_ok(status);
}

/* Copies land by rename, beside the file dst leads to (posix_landing.c). */
static void fs_copy_file(const TF_Filesystem* filesystem, const char* src,
                         const char* dst, TF_Status* status) {
  posix_copy_file(filesystem, src, dst, status);
}

static void fs_path_exists(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  (void)filesystem;
  if (access(path, F_OK) != 0) {
    TF_SetStatusFromIOError(status, errno, path);
    return;
  }
  plugin_set_ok(status);
}

static bool fs_paths_exist(const TF_Filesystem* filesystem, char** paths,
                           int num_files, TF_Status** statuses) {
  bool all = true;
  int i;
  (void)filesystem;
  for (i = 0; i < num_files; ++i) {
    if (access(paths[i], F_OK) == 0) {
      if (statuses != NULL) plugin_set_ok(statuses[i]);
      continue;
    }
    all = false;
    if (statuses == NULL) break;
    TF_SetStatusFromIOError(statuses[i], errno, paths[i]);
  }
  return all;
}

/* stat(2), or -1 with status set. */
static int stat_path(const char* path, struct stat* st, TF_Status* status) {
  if (stat(path, st) == 0) return 0;
  TF_SetStatusFromIOError(status, errno, path);
  return -1;
}

static void stats_from(const struct stat* st, TF_FileStatistics* stats) {
  stats->length = S_ISDIR(st->st_mode) ? 0 : (int64_t)st->st_size;
  stats->mtime_nsec =
      (int64_t)st->st_mtim.tv_sec * 1000000000 + (int64_t)st->st_mtim.tv_nsec;
  stats->is_directory = S_ISDIR(st->st_mode);
}

static void fs_stat(const TF_Filesystem* filesystem, const char* path,
                    TF_FileStatistics* stats, TF_Status* status) {
  struct stat st;
  (void)filesystem;
  if (stat_path(path, &st, status) != 0) return;
  stats_from(&st, stats);
  plugin_set_ok(status);
}

/* stat through cached directory entries only, on a filesystem that
 * answers fstat from memory (common/at_hand.h): the O_PATH descriptor is
 * stat'ed as the path would be (its links followed) and closed. */
static void fs_stat_if_ready(const TF_Filesystem* filesystem, const char* path,
                             TF_FileStatistics* stats, TF_Status* status) {
  struct stat st;
  int fd = at_hand_open(path, O_PATH, &st);
  (void)filesystem;
  if (fd == -EAGAIN) {
    TF_SetStatus(status, TF_UNAVAILABLE, "not at hand");
    return;
  }
  if (fd < 0) {
    TF_SetStatusFromIOError(status, -fd, path);
    return;
  }
  close(fd);
  stats_from(&st, stats);
  plugin_set_ok(status);
}

/* stat of each of n paths, one after another on the calling thread: one
 * call into the plugin for many paths (Env.stat_files). */
static void fs_stat_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                          TF_FileStatistics* stats, TF_Status** statuses) {
  int i;
  for (i = 0; i < n; ++i) fs_stat(filesystem, paths[i], &stats[i], statuses[i]);
}

static bool fs_is_directory(const TF_Filesystem* filesystem, const char* path,
                            TF_Status* status) {
  struct stat st;
  (void)filesystem;
  if (stat_path(path, &st, status) != 0) return false;
  if (!S_ISDIR(st.st_mode)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is not a directory");
    return false;
  }
  plugin_set_ok(status);
  return true;
}

static int64_t fs_get_file_size(const TF_Filesystem* filesystem,
                                const char* path, TF_Status* status) {
  struct stat st;
  (void)filesystem;
  if (stat_path(path, &st, status) != 0) return -1;
  if (S_ISDIR(st.st_mode)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
    return -1;
  }
  plugin_set_ok(status);
  return (int64_t)st.st_size;
}

static char* fs_translate_name(const TF_Filesystem* filesystem,
                               const char* uri) {
  (void)filesystem;
  return plugin_translate_name(uri, PLUGIN_NAMES_PATH);
}

/* The names in the directory at path, into list. Sets *same to whether
 * path still names the directory that was read: a transaction's commit
 * swaps a new tree in for the root and then empties the old one, so a
 * listing that began on the old one may be cut short. */
/* A child's statistics as `stat` gives them (links followed; a dangling
 * link describes itself). 1 when the child is gone, -1 on an error. */
static int child_stats(DIR* dir, const char* name, TF_FileStatistics* stats,
                       TF_Status* status) {
  struct stat st;
  if (fstatat(dirfd(dir), name, &st, 0) != 0 &&
      fstatat(dirfd(dir), name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return 1;
    TF_SetStatusFromIOError(status, errno, name);
    return -1;
  }
  stats_from(&st, stats);
  return 0;
}

/* What the entry is itself (ASYNCFS_ENTRY_*), its link not followed: from
 * the directory entry's type, or an lstat where the filesystem keeps none. */
static int entry_kind(DIR* dir, const struct dirent* entry) {
  struct stat st;
  switch (entry->d_type) {
    case DT_REG:
      return ASYNCFS_ENTRY_FILE;
    case DT_DIR:
      return ASYNCFS_ENTRY_DIRECTORY;
    case DT_LNK:
      return ASYNCFS_ENTRY_LINK;
    case DT_UNKNOWN:
      if (fstatat(dirfd(dir), entry->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) return ASYNCFS_ENTRY_FILE;
      return S_ISREG(st.st_mode)   ? ASYNCFS_ENTRY_FILE
             : S_ISDIR(st.st_mode) ? ASYNCFS_ENTRY_DIRECTORY
             : S_ISLNK(st.st_mode) ? ASYNCFS_ENTRY_LINK
                                   : ASYNCFS_ENTRY_OTHER;
    default:
      return ASYNCFS_ENTRY_OTHER;
  }
}

static int read_listing(const char* path, plugin_listing* out, int* same,
                        TF_Status* status) {
  struct dirent* entry;
  struct stat read_st, now_st;
  DIR* dir = opendir(path);
  if (dir == NULL) {
    TF_SetStatusFromIOError(status, errno, path);
    return -1;
  }
  while ((entry = readdir(dir)) != NULL) {
    const char* name = entry->d_name;
    TF_FileStatistics st;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    if (out->with_stats) {
      int gone = child_stats(dir, name, &st, status);
      if (gone < 0) {
        closedir(dir);
        return -1;
      }
      if (gone) continue;
    }
    if (plugin_listing_push_kind(out, name, strlen(name), &st,
                                 out->with_stats ? entry_kind(dir, entry) : 0) != 0) {
      closedir(dir);
      plugin_set_oom(status);
      return -1;
    }
  }
  *same = fstat(dirfd(dir), &read_st) == 0 && stat(path, &now_st) == 0 &&
          read_st.st_ino == now_st.st_ino && read_st.st_dev == now_st.st_dev;
  closedir(dir);
  return 0;
}

static int posix_list(const TF_Filesystem* filesystem, const char* path,
                      plugin_listing* out, TF_Status* status) {
  int attempt, same = 0;
  (void)filesystem;
  /* A listing that raced a commit is read again from the tree now in
   * place, so a reader sees one whole generation of a transaction root. */
  for (attempt = 0; attempt < 8 && !same; ++attempt) {
    plugin_listing_free(out); /* keeps with_stats */
    if (read_listing(path, out, &same, status) != 0) return -1;
  }
  plugin_set_ok(status);
  return 0;
}

PLUGIN_DEFINE_LISTING(posix_list)

/* ---- glob: one readdir per directory that a wildcard component reaches -- */

typedef struct glob_state {
  plugin_strlist* out;
  char path[4096];
  int failed; /* out of memory */
} glob_state;

static int path_exists_nofollow(const char* path) {
  struct stat st;
  return lstat(path, &st) == 0;
}

/* path[0..len) is an existing directory (or "" for the current one);
 * pattern holds the components still to match. */
static void glob_walk(glob_state* g, size_t len, const char* pattern) {
  char comp[1024];
  const char* end;
  size_t comp_len;
  int last;
  int split = plugin_glob_split(pattern, comp, sizeof comp, &comp_len, &end);
  if (split == 0 && plugin_strlist_push(g->out, g->path, len) != 0) g->failed = 1;
  if (split <= 0 || len + comp_len + 2 >= sizeof g->path) return;
  last = (*end == '\0');
  if (!plugin_has_glob_meta(comp, comp_len)) {
    size_t n = len;
    if (n > 0 && g->path[n - 1] != '/') g->path[n++] = '/';
    memcpy(g->path + n, comp, comp_len);
    n += comp_len;
    g->path[n] = '\0';
    if (last) {
      if (path_exists_nofollow(g->path) &&
          plugin_strlist_push(g->out, g->path, n) != 0)
        g->failed = 1;
    } else {
      glob_walk(g, n, end);
    }
    g->path[len] = '\0';
    return;
  } else {
    DIR* dir;
    struct dirent* entry;
    dir = opendir(len == 0 ? "." : g->path);
    if (dir == NULL) return;
    while (!g->failed && (entry = readdir(dir)) != NULL) {
      const char* name = entry->d_name;
      size_t n = len, name_len;
      if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
      if (fnmatch(comp, name, FNM_PATHNAME) != 0) continue;
      if (!last && entry->d_type != DT_DIR && entry->d_type != DT_UNKNOWN &&
          entry->d_type != DT_LNK)
        continue;
      name_len = strlen(name);
      if (n + name_len + 2 >= sizeof g->path) continue;
      if (n > 0 && g->path[n - 1] != '/') g->path[n++] = '/';
      memcpy(g->path + n, name, name_len + 1);
      n += name_len;
      if (last) {
        if (plugin_strlist_push(g->out, g->path, n) != 0) g->failed = 1;
      } else {
        glob_walk(g, n, end);
      }
      g->path[len] = '\0';
    }
    closedir(dir);
  }
}

/* As in TensorFlow, the pattern arrives untranslated (a URI or a bare
 * path) and the matches go back shaped like it: "file://" + path for a
 * file:// pattern. */
static int fs_get_matching_paths(const TF_Filesystem* filesystem,
                                 const char* uri_pattern, char*** entries,
                                 TF_Status* status) {
  plugin_strlist list = {NULL, 0, 0};
  size_t prefix = plugin_scheme_prefix_len(uri_pattern);
  char* pattern = plugin_translate_name(uri_pattern, PLUGIN_NAMES_PATH);
  glob_state* g = malloc(sizeof *g);
  int failed;
  (void)filesystem;
  *entries = NULL;
  if (g == NULL || pattern == NULL) {
    free(g);
    plugin_memory_free(pattern);
    plugin_set_oom(status);
    return -1;
  }
  g->out = &list;
  g->failed = 0;
  if (pattern[0] == '/') {
    g->path[0] = '/';
    g->path[1] = '\0';
    glob_walk(g, 1, pattern);
  } else {
    g->path[0] = '\0';
    glob_walk(g, 0, pattern);
  }
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

static const TF_FilesystemOps posix_filesystem_ops = {
    PLUGIN_FILESYSTEM_OPS(posix_, fs_),
    PLUGIN_TRANSACTION_OPS,
    PLUGIN_CONFIGURATION_OPS,
    .rename_dir = fs_rename_dir,
    .landing_path = posix_landing_path,
    .copy_entry = posix_copy_entry,
    .new_temporary_file = posix_new_temporary_file,
    .replace_file = posix_replace_file,
    .read_files = posix_read_files,
    .stat_files = fs_stat_files,
    .stat_if_ready = fs_stat_if_ready,
    .new_random_access_file_if_ready = posix_new_random_access_file_if_ready};

static const plugin_scheme posix_schemes[] = {
    {"", &posix_filesystem_ops, &posix_reader_ops, &posix_writer_ops,
     &posix_region_ops},
    {"file", &posix_filesystem_ops, &posix_reader_ops, &posix_writer_ops,
     &posix_region_ops},
};

PLUGIN_DEFINE(posix_schemes, "posix", "1.0.0", 0)
