/*
 * Transactions of the posix plugin: a directory (the root) is replaced as a
 * whole, atomically.
 *
 * Starting one takes the root's locks (below), removes what a crashed
 * transaction on the same root left behind, and makes a staging directory
 * beside the root (".<name>.asyncfs-txn.<pid>.<n>") holding the root's current tree as
 * hard links. decode_transaction_token gives the staging path: the core
 * stages every change there through ordinary ops, never writing into a
 * linked file in place (it writes a new file and renames it over the old),
 * so the committed tree is never touched. end_transaction swaps staging and
 * root with renameat2(RENAME_EXCHANGE), one atomic step, then deletes the
 * old tree; abort_transaction deletes the staging tree.
 *
 * A crash at any point leaves the root either as it was or as committed,
 * plus at most one staging directory, which the next transaction on that
 * root deletes. Where the filesystem lacks RENAME_EXCHANGE the commit is two
 * renames (root to "<staging>.old", staging to root); a crash between them
 * leaves no root, and recovery then finishes the commit.
 *
 * Locks keep overlapping roots apart across processes, nested ones too: a
 * transaction on /a/b/c holds a shared flock for each ancestor (/a, /a/b)
 * and an exclusive one for the root itself, each on a file named by a hash
 * of the canonical path in one host-wide folder ($ASYNCFS_LOCK_DIR, else
 * /tmp/asyncfs-locks). A transaction on /a (exclusive on /a) and one on
 * /a/b/c (shared on /a) therefore exclude each other, siblings do not, and
 * no lock file ever sits inside a tree that a transaction commits. Every
 * lock is tried without waiting; a refusal is ABORTED and the core retries.
 *
 * Staged writes never follow a symlink out of the root: a mutating op on a
 * path inside a staging tree is refused (INVALID_ARGUMENT) when a component
 * between the staging directory and the path's last name is a symlink
 * (posix_check_staged_path).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_common.h"
#include "plugin_fs.h"
#include "posix_internal.h"

/* A transaction's plugin_txn.state: the locks it holds. */
typedef struct posix_locks {
  int* fds; /* the ancestors' shared locks, then the root's exclusive one */
  int count;
} posix_locks;

/* ---- paths ----------------------------------------------------------------- */

/* parent and name of path, which has no trailing '/' (it is cleaned) */
static void split_path(const char* path, char* parent, size_t cap,
                       const char** name) {
  const char* slash = strrchr(path, '/');
  if (slash == NULL) {
    snprintf(parent, cap, ".");
    *name = path;
  } else if (slash == path) {
    snprintf(parent, cap, "/");
    *name = path + 1;
  } else {
    snprintf(parent, cap, "%.*s", (int)(slash - path), path);
    *name = slash + 1;
  }
}

/* ---- file trees ---------------------------------------------------------------- */

static int remove_entry(const char* path, const struct stat* st, int flag,
                        struct FTW* ftw) {
  (void)st;
  (void)ftw;
  if (flag == FTW_DP) return rmdir(path) == 0 || errno == ENOENT ? 0 : -1;
  return unlink(path) == 0 || errno == ENOENT ? 0 : -1;
}

static int remove_tree(const char* path) {
  struct stat st;
  if (lstat(path, &st) != 0) return errno == ENOENT ? 0 : -1;
  return nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int copy_file_contents(const char* src, const char* dst, mode_t mode) {
  char buf[1 << 16];
  int in = open(src, O_RDONLY | O_CLOEXEC), out;
  ssize_t n;
  if (in < 0) return -1;
  out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 07777);
  if (out < 0) {
    close(in);
    return -1;
  }
  while ((n = read(in, buf, sizeof buf)) > 0) {
    ssize_t done = 0;
    while (done < n) {
      ssize_t w = write(out, buf + done, (size_t)(n - done));
      if (w < 0) {
        close(in);
        close(out);
        return -1;
      }
      done += w;
    }
  }
  close(in);
  return close(out) == 0 && n == 0 ? 0 : -1;
}

/* Mirrors the tree at src into the new directory dst: directories made,
 * files hard-linked (copied where linking is refused), symlinks recreated. */
static int mirror_tree(const char* src, const char* dst) {
  DIR* dir = opendir(src);
  struct dirent* entry;
  int rc = 0;
  if (dir == NULL) return -1;
  while (rc == 0 && (entry = readdir(dir)) != NULL) {
    char from[4096], to[4096];
    struct stat st;
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
      continue;
    if ((size_t)snprintf(from, sizeof from, "%s/%s", src, entry->d_name) >=
            sizeof from ||
        (size_t)snprintf(to, sizeof to, "%s/%s", dst, entry->d_name) >=
            sizeof to) {
      errno = ENAMETOOLONG;
      rc = -1;
    } else if (lstat(from, &st) != 0) {
      rc = -1;
    } else if (S_ISDIR(st.st_mode)) {
      rc = mkdir(to, st.st_mode & 07777) != 0 ? -1 : mirror_tree(from, to);
    } else if (S_ISLNK(st.st_mode)) {
      char target[4096];
      ssize_t n = readlink(from, target, sizeof target - 1);
      if (n < 0) {
        rc = -1;
      } else {
        target[n] = '\0';
        rc = symlink(target, to);
      }
    } else if (link(from, to) != 0) {
      rc = copy_file_contents(from, to, st.st_mode);
    }
  }
  closedir(dir);
  return rc;
}

/* The stem of the staging names of a root called name: the name itself, or
 * "~" and its hash when the staging name would pass NAME_MAX. */
static void staging_stem(const char* name, char* stem, size_t cap) {
  if (strlen(name) + 48 > NAME_MAX)
    snprintf(stem, cap, "~%016llx",
             (unsigned long long)plugin_hash(name, strlen(name)));
  else
    snprintf(stem, cap, "%s", name);
}

/* Removes what crashed transactions on name (in parent) left behind, and
 * finishes a commit interrupted between its two renames. Call with the
 * root's lock held. */
static void recover(const char* parent, const char* name, const char* root) {
  char prefix[1024], stem[NAME_MAX + 1], path[4096];
  size_t plen;
  DIR* dir;
  struct dirent* entry;
  struct stat st;
  staging_stem(name, stem, sizeof stem);
  snprintf(prefix, sizeof prefix, ".%s.asyncfs-txn.", stem);
  plen = strlen(prefix);
  dir = opendir(parent);
  if (dir == NULL) return;
  if (lstat(root, &st) != 0 && errno == ENOENT) {
    /* no root: a two-rename commit stopped half-way if "<staging>.old" exists */
    while ((entry = readdir(dir)) != NULL) {
      size_t n = strlen(entry->d_name);
      if (strncmp(entry->d_name, prefix, plen) == 0 && n > 4 &&
          strcmp(entry->d_name + n - 4, ".old") == 0) {
        if ((size_t)snprintf(path, sizeof path, "%s/%.*s", parent,
                             (int)(n - 4), entry->d_name) < sizeof path &&
            rename(path, root) == 0)
          break;
      }
    }
    rewinddir(dir);
  }
  while ((entry = readdir(dir)) != NULL) {
    if (strncmp(entry->d_name, prefix, plen) != 0) continue;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", parent, entry->d_name) <
        sizeof path)
      remove_tree(path);
  }
  closedir(dir);
}

#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1) /* linux/fs.h, for C libraries without it */
#endif

int posix_rename2(const char* from, const char* to, unsigned flags) {
#ifdef SYS_renameat2
  return (int)syscall(SYS_renameat2, AT_FDCWD, from, AT_FDCWD, to, flags);
#else
  (void)from;
  (void)to;
  (void)flags;
  errno = ENOSYS;
  return -1;
#endif
}

static int exchange(const char* a, const char* b) {
  return posix_rename2(a, b, RENAME_EXCHANGE);
}

/* ---- cross-process locks ------------------------------------------------------ */

static const char* lock_folder(void) {
  const char* dir = getenv("ASYNCFS_LOCK_DIR");
  return dir != NULL && dir[0] != '\0' ? dir : "/tmp/asyncfs-locks";
}

/* Opens the lock file of path[0..n) and flocks it (shared or exclusive)
 * without waiting. Returns the fd, -1 with errno set (EWOULDBLOCK: held). */
static int lock_path(const char* path, size_t n, int exclusive) {
  char file[4096];
  const char* dir = lock_folder();
  int fd;
  if (mkdir(dir, 01777) == 0) chmod(dir, 01777); /* shared by every user */
  snprintf(file, sizeof file, "%s/%016llx.lock", dir,
           (unsigned long long)plugin_hash(path, n));
  fd = open(file, O_RDONLY | O_CREAT | O_CLOEXEC, 0666);
  if (fd < 0) return -1;
  if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

static void unlock_all(posix_locks* locks) {
  int i;
  for (i = 0; i < locks->count; ++i) close(locks->fds[i]);
  free(locks->fds);
  locks->fds = NULL;
  locks->count = 0;
}

/* Takes the locks of canonical (an absolute path without symlinks): shared
 * on each ancestor below "/", exclusive on canonical itself. */
static int lock_root(posix_locks* locks, const char* canonical,
                     const char* root, TF_Status* status) {
  size_t n = strlen(canonical), i;
  char msg[4200];
  locks->fds = malloc((n + 1) * sizeof(int));
  if (locks->fds == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  for (i = 1; i <= n; ++i) {
    int fd;
    if (i < n && canonical[i] != '/') continue;
    fd = lock_path(canonical, i, i == n);
    if (fd < 0) {
      int e = errno;
      unlock_all(locks);
      if (e == EWOULDBLOCK) {
        snprintf(msg, sizeof msg,
                 "%s overlaps the root of a transaction in progress%s", root,
                 i == n ? "" : " (an enclosing folder's)");
        TF_SetStatus(status, TF_ABORTED, msg);
      } else {
        TF_SetStatusFromIOError(status, e, lock_folder());
      }
      return -1;
    }
    locks->fds[locks->count++] = fd;
  }
  return 0;
}

/* realpath of root's parent, then root's name: the path the locks are
 * named after, whichever way the root was spelled. */
static char* canonical_root(const char* parent, const char* name) {
  char* real = realpath(parent, NULL);
  char* out;
  if (real == NULL) return NULL;
  out = malloc(strlen(real) + strlen(name) + 2);
  if (out != NULL)
    sprintf(out, "%s%s%s", real, strcmp(real, "/") == 0 ? "" : "/", name);
  free(real);
  return out;
}

/* ---- staged writes stay inside the root ------------------------------------------ */

int posix_check_staged_path(const TF_Filesystem* filesystem, const char* path,
                            TF_Status* status) {
  size_t base = plugin_txn_staging_prefix(&plugin_fs_of(filesystem)->txns, path);
  char* copy;
  int rc = 0;
  if (base == 0) return 0;
  copy = strdup(path);
  if (copy == NULL) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  {
    /* every component after the staging directory but the last */
    char* slash = copy + base;
    while (rc == 0 && (slash = strchr(slash + 1, '/')) != NULL) {
      struct stat st;
      *slash = '\0';
      if (lstat(copy, &st) == 0 && S_ISLNK(st.st_mode)) {
        char msg[4300];
        snprintf(msg, sizeof msg,
                 "%s is a symlink inside a transaction root: a staged change "
                 "through it would reach outside the root",
                 copy + base + 1);
        TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
        rc = -1;
      }
      *slash = '/';
    }
  }
  free(copy);
  return rc;
}

/* ---- the hooks ---------------------------------------------------------------- */

static void release(plugin_txn* txn) {
  posix_locks* locks = txn->state;
  unlock_all(locks); /* releases the flocks */
  free(locks);
  txn->state = NULL;
}

/* Locks txn's root, recovers what a crash left, stages the tree. */
static int begin(const TF_Filesystem* filesystem, plugin_txn* txn,
                 TF_Status* status) {
  const char* root = txn->root;
  char parent[4096];
  const char* name;
  struct stat st;
  (void)filesystem;
  split_path(root, parent, sizeof parent, &name);
  if (posix_make_dirs(parent, status) != 0) return -1;
  txn->state = calloc(1, sizeof(posix_locks));
  if (txn->state == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  {
    char* canonical = canonical_root(parent, name);
    int rc;
    if (canonical == NULL) {
      TF_SetStatusFromIOError(status, errno, parent);
      return -1;
    }
    rc = lock_root(txn->state, canonical, root, status);
    free(canonical);
    if (rc != 0) return -1;
  }
  recover(parent, name, root);
  if (lstat(root, &st) == 0 && !S_ISDIR(st.st_mode)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 "a transaction root must be a directory, not a file");
    return -1;
  }
  txn->staging = malloc(strlen(parent) + strlen(name) + 64);
  if (txn->staging == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  {
    char stem[NAME_MAX + 1];
    staging_stem(name, stem, sizeof stem);
    sprintf(txn->staging, "%s/.%s.asyncfs-txn.%ld.%lu", parent, stem,
            (long)getpid(), txn->serial);
  }
  if (mkdir(txn->staging, 0777) != 0 ||
      (lstat(root, &st) == 0 && mirror_tree(root, txn->staging) != 0)) {
    TF_SetStatusFromIOError(status, errno, txn->staging);
    remove_tree(txn->staging);
    return -1;
  }
  return 0;
}

/* Swaps staging and root (commit), then deletes what staging holds: the
 * old tree after a commit, the staged one after an abort. */
static int finish(const TF_Filesystem* filesystem, plugin_txn* txn,
                  int commit, TF_Status* status) {
  struct stat st;
  int rc = 0;
  (void)filesystem;
  if (commit) {
    if (lstat(txn->root, &st) != 0) {
      rc = rename(txn->staging, txn->root);
    } else if (exchange(txn->staging, txn->root) != 0) {
      char old[4200];
      snprintf(old, sizeof old, "%s.old", txn->staging);
      rc = (errno == ENOSYS || errno == EINVAL)
               ? (rename(txn->root, old) != 0 ? -1
                  : rename(txn->staging, txn->root) != 0
                      ? -1
                      : rename(old, txn->staging))
               : -1;
    }
    if (rc != 0) TF_SetStatusFromIOError(status, errno, txn->root);
  }
  if (rc == 0) remove_tree(txn->staging);
  return rc;
}

const plugin_txn_hooks posix_transaction_hooks = {begin, finish, release,
                                                  NULL};
