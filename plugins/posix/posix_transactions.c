/*
 * Transactions of the posix plugin: a directory (the root) is replaced as a
 * whole, atomically.
 *
 * Starting one takes the root's locks (below), removes what a crashed
 * transaction of this user's on the same root left behind, and makes a
 * private staging directory beside the root (".<name>.asyncfs-txn.<random>",
 * 0700) holding the root's current tree as hard links, noting every inode
 * the root held. decode_transaction_token gives the staging path: the core
 * stages every change there through ordinary ops, never writing into a
 * linked file in place (it writes a new file and renames it over the old),
 * so the committed tree is never touched. end_transaction gives the staging
 * directory the root's permissions and group, brings in what other writers
 * made in the root meanwhile (files the transaction did not write: an inode
 * the root did not hold at the start), swaps staging and root with
 * renameat2(RENAME_EXCHANGE), one atomic step, brings in any straggler,
 * then deletes the old tree; abort_transaction deletes the staging tree.
 *
 * A crash at any point leaves the root either as it was or as committed,
 * plus at most one staging directory, which the next transaction on that
 * root deletes. Where the filesystem lacks RENAME_EXCHANGE the commit is two
 * renames (root to "<staging>.old", staging to root); a crash between them
 * leaves no root, and recovery then finishes the commit. Recovery touches
 * only this user's leftovers: never a folder another user put there.
 *
 * Locks keep overlapping roots apart across this user's processes, nested
 * ones too: a transaction on /a/b/c holds a shared flock for each ancestor
 * (/a, /a/b) and an exclusive one for the root itself, each on a file named
 * by a hash of the canonical path in the user's lock folder
 * ($ASYNCFS_LOCK_DIR, else /tmp/asyncfs-locks-<uid>, made 0700 and checked
 * for owner and mode before each use, so no other user can take, block or
 * redirect a lock). A transaction on /a (exclusive on /a) and one on /a/b/c
 * (shared on /a) therefore exclude each other, siblings do not, and no lock
 * file ever sits inside a tree that a transaction commits. Every lock is
 * tried without waiting; a refusal is ABORTED and the core retries.
 * Transactions of two users on one root are not kept apart (each commit
 * brings in the other's new files); a shared ASYNCFS_LOCK_DIR (a sticky
 * folder, as /tmp) keeps them apart for users who trust each other.
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
#include <sys/sysmacros.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_common.h"
#include "plugin_fs.h"
#include "posix_internal.h"

/* A transaction's plugin_txn.state: the locks it holds, and what the
 * root held when it began (every entry's device and inode, sorted), so
 * that its commit can tell what other writers made in the root meanwhile. */
typedef struct posix_locks {
  int* fds; /* the ancestors' shared locks, then the root's exclusive one */
  int count;
  struct posix_inode* began; /* the root's entries at begin */
  size_t began_count, began_cap;
} posix_locks;

/* Which file an entry is: its device and inode, and where the filesystem
 * keeps one (statx), its birth time, so that an inode freed and reused
 * during the transaction is not taken for the file it was. */
typedef struct posix_inode {
  dev_t dev;
  ino_t ino;
  int64_t born_sec;
  uint32_t born_nsec;
} posix_inode;

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

/* ---- what the root held when the transaction began ------------------------------ */

/* lstat(path) into st, and which file it is into id: 0, or -1 with errno. */
static int entry_stat(const char* path, struct stat* st, posix_inode* id) {
#ifdef STATX_BTIME
  struct statx x;
  if (statx(AT_FDCWD, path, AT_SYMLINK_NOFOLLOW, STATX_BASIC_STATS | STATX_BTIME, &x) == 0) {
    memset(st, 0, sizeof *st);
    st->st_dev = makedev(x.stx_dev_major, x.stx_dev_minor);
    st->st_ino = (ino_t)x.stx_ino;
    st->st_mode = x.stx_mode;
    st->st_uid = x.stx_uid;
    st->st_gid = x.stx_gid;
    st->st_nlink = x.stx_nlink;
    st->st_size = (off_t)x.stx_size;
    id->dev = st->st_dev;
    id->ino = st->st_ino;
    id->born_sec = (x.stx_mask & STATX_BTIME) ? x.stx_btime.tv_sec : 0;
    id->born_nsec = (x.stx_mask & STATX_BTIME) ? x.stx_btime.tv_nsec : 0;
    return 0;
  }
  if (errno != ENOSYS) return -1;
#endif
  if (lstat(path, st) != 0) return -1;
  memset(id, 0, sizeof *id);
  id->dev = st->st_dev;
  id->ino = st->st_ino;
  return 0;
}

static int note_inode(posix_locks* seen, const posix_inode* id) {
  if (seen->began_count == seen->began_cap) {
    size_t cap = seen->began_cap ? seen->began_cap * 2 : 256;
    posix_inode* grown = realloc(seen->began, cap * sizeof *grown);
    if (grown == NULL) return -1;
    seen->began = grown;
    seen->began_cap = cap;
  }
  seen->began[seen->began_count++] = *id;
  return 0;
}

static int by_inode(const void* a, const void* b) {
  const posix_inode* x = a;
  const posix_inode* y = b;
  if (x->dev != y->dev) return x->dev < y->dev ? -1 : 1;
  if (x->ino != y->ino) return x->ino < y->ino ? -1 : 1;
  if (x->born_sec != y->born_sec) return x->born_sec < y->born_sec ? -1 : 1;
  return x->born_nsec < y->born_nsec ? -1 : x->born_nsec > y->born_nsec;
}

/* Whether the root held the file id names when the transaction began. */
static int held_at_begin(const posix_locks* seen, const posix_inode* id) {
  return seen->began_count > 0 &&
         bsearch(id, seen->began, seen->began_count, sizeof *id, by_inode) != NULL;
}

/* Mirrors the tree at src into the new directory dst: directories made,
 * files hard-linked (copied where linking is refused), symlinks recreated;
 * every entry of src noted in seen. */
static int mirror_tree(const char* src, const char* dst, posix_locks* seen) {
  DIR* dir = opendir(src);
  struct dirent* entry;
  int rc = 0;
  if (dir == NULL) return -1;
  while (rc == 0 && (entry = readdir(dir)) != NULL) {
    char from[4096], to[4096];
    struct stat st;
    posix_inode id;
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
      continue;
    if ((size_t)snprintf(from, sizeof from, "%s/%s", src, entry->d_name) >=
            sizeof from ||
        (size_t)snprintf(to, sizeof to, "%s/%s", dst, entry->d_name) >=
            sizeof to) {
      errno = ENAMETOOLONG;
      rc = -1;
    } else if (entry_stat(from, &st, &id) != 0 || note_inode(seen, &id) != 0) {
      rc = -1;
    } else if (S_ISDIR(st.st_mode)) {
      rc = mkdir(to, st.st_mode & 07777) != 0 ? -1 : mirror_tree(from, to, seen);
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

/* Brings into the tree at to what other writers made in the tree at from
 * while the transaction was open (entries the root did not hold when it
 * began), where the transaction left that path alone: a new file, or a
 * file the transaction never rewrote that another writer replaced. What
 * the transaction wrote or removed stands. Before the commit's swap (link
 * = 1) files are linked into the staging tree, so the root loses nothing
 * until the swap; after it (link = 0) the stragglers left in the old tree
 * are renamed into the new root. Best effort: an entry that cannot be
 * brought is left in the old tree, which the commit deletes. */
static void carry_over(const char* from, const char* to, const posix_locks* seen, int link_files) {
  DIR* dir = opendir(from);
  struct dirent* entry;
  if (dir == NULL) return;
  while ((entry = readdir(dir)) != NULL) {
    char a[PATH_MAX], b[PATH_MAX];
    struct stat st, there;
    posix_inode id, there_id;
    int has;
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    if ((size_t)snprintf(a, sizeof a, "%s/%s", from, entry->d_name) >= sizeof a ||
        (size_t)snprintf(b, sizeof b, "%s/%s", to, entry->d_name) >= sizeof b ||
        entry_stat(a, &st, &id) != 0)
      continue;
    has = entry_stat(b, &there, &there_id) == 0;
    if (S_ISDIR(st.st_mode)) {
      if (has && S_ISDIR(there.st_mode)) {
        carry_over(a, b, seen, link_files); /* a folder on both sides: what is new inside it */
      } else if (!has && !held_at_begin(seen, &id)) { /* a new folder (one the root held was removed) */
        if (!link_files)
          rename(a, b);
        else if (mkdir(b, st.st_mode & 07777) == 0)
          carry_over(a, b, seen, link_files);
      }
      continue;
    }
    if (held_at_begin(seen, &id)) continue; /* the transaction's view of it stands */
    if (has && (S_ISDIR(there.st_mode) || !held_at_begin(seen, &there_id)))
      continue; /* the transaction wrote that path too: its write wins */
    if (!link_files) {
      rename(a, b);
    } else {
      if (has) unlink(b); /* staging: nobody reads it until the swap */
      if (link(a, b) != 0) rename(a, b);
    }
  }
  closedir(dir);
}

/* Whether the entry at path is this process's user's: what a crashed
 * transaction of ours left, not something another user put there. */
static int ours(const char* path, int want_dir) {
  struct stat st;
  return lstat(path, &st) == 0 && st.st_uid == geteuid() && (!want_dir || S_ISDIR(st.st_mode));
}

/* Removes what crashed transactions on name (in parent) left behind, and
 * finishes a commit interrupted between its two renames. Call with the
 * root's lock held. Only this user's leftovers are touched: another
 * user's transaction on the same root may be running (locks are per user),
 * and a folder another user planted is never renamed into the root. */
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
            ours(path, 1) && rename(path, root) == 0)
          break;
      }
    }
    rewinddir(dir);
  }
  while ((entry = readdir(dir)) != NULL) {
    if (strncmp(entry->d_name, prefix, plen) != 0) continue;
    if ((size_t)snprintf(path, sizeof path, "%s/%s", parent, entry->d_name) <
            sizeof path &&
        ours(path, 0))
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

/* The folder of this user's lock files: $ASYNCFS_LOCK_DIR, else
 * /tmp/asyncfs-locks-<uid>, made 0700 if missing, into folder. Opened
 * (never through a link) and checked before use: a directory of this
 * user's that no one else may write, or, for $ASYNCFS_LOCK_DIR, a sticky
 * one shared on purpose (*shared set). Returns its fd, or -1 with status
 * naming the folder and what is wrong with it. */
static int open_lock_folder(char* folder, size_t cap, int* shared, TF_Status* status) {
  const char* chosen = getenv("ASYNCFS_LOCK_DIR");
  char message[PATH_MAX + 300];
  const char* wrong = NULL;
  struct stat st;
  int fd;
  if (chosen != NULL && chosen[0] != '\0')
    snprintf(folder, cap, "%s", chosen);
  else
    snprintf(folder, cap, "/tmp/asyncfs-locks-%lu", (unsigned long)geteuid());
  if (mkdir(folder, 0700) != 0 && errno != EEXIST) {
    TF_SetStatusFromIOError(status, errno, folder);
    return -1;
  }
  fd = open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &st) != 0) {
    wrong = errno == ELOOP || errno == ENOTDIR ? "it is not a folder (a link, or a file)" : strerror(errno);
  } else if (st.st_mode & S_ISVTX && st.st_mode & (S_IWGRP | S_IWOTH) && chosen != NULL && chosen[0] != '\0') {
    *shared = 1; /* like /tmp: each user's lock files are theirs */
  } else if (st.st_uid != geteuid()) {
    wrong = "it belongs to another user, who could take or block every lock in it";
  } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    wrong = "others may write in it, and could take or block every lock in it";
  } else {
    *shared = 0;
  }
  if (wrong == NULL) return fd;
  if (fd >= 0) close(fd);
  snprintf(message, sizeof message,
           "the transaction lock folder %s cannot be used: %s (set ASYNCFS_LOCK_DIR to a folder of "
           "yours that only you may write)",
           folder, wrong);
  TF_SetStatus(status, TF_PERMISSION_DENIED, message);
  return -1;
}

/* Opens the lock file of path[0..n) and flocks it (shared or exclusive)
 * without waiting: the fd, or -1 with status set (ABORTED when another
 * transaction holds it). The file is opened without following a link and
 * without waiting on a FIFO, and must be a regular file. */
static int lock_path(const char* path, size_t n, int exclusive, TF_Status* status) {
  char folder[PATH_MAX], name[64];
  int shared = 0, dir, fd, e;
  struct stat st;
  dir = open_lock_folder(folder, sizeof folder, &shared, status);
  if (dir < 0) return -1;
  snprintf(name, sizeof name, "%016llx.lock", (unsigned long long)plugin_hash(path, n));
  fd = openat(dir, name, O_RDONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, shared ? 0644 : 0600);
  if (fd < 0 && errno == EACCES) /* another user's, where protected_regular forbids O_CREAT */
    fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  e = errno;
  close(dir);
  if (fd < 0) {
    TF_SetStatusFromIOError(status, e, folder);
    return -1;
  }
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    char message[PATH_MAX + 200];
    close(fd);
    snprintf(message, sizeof message, "the lock file %s/%s is not a regular file", folder, name);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, message);
    return -1;
  }
  if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) != 0) {
    e = errno;
    close(fd);
    if (e == EWOULDBLOCK)
      TF_SetStatus(status, TF_ABORTED, "");
    else
      TF_SetStatusFromIOError(status, e, folder);
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
    plugin_set_oom(status);
    return -1;
  }
  for (i = 1; i <= n; ++i) {
    int fd;
    if (i < n && canonical[i] != '/') continue;
    fd = lock_path(canonical, i, i == n, status);
    if (fd < 0) {
      unlock_all(locks);
      if (TF_GetCode(status) == TF_ABORTED) {
        snprintf(msg, sizeof msg,
                 "%s overlaps the root of a transaction in progress%s", root,
                 i == n ? "" : " (an enclosing folder's)");
        TF_SetStatus(status, TF_ABORTED, msg);
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
    plugin_set_oom(status);
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
  free(locks->began);
  free(locks);
  txn->state = NULL;
}

/* Makes txn's staging folder beside the root, ".<name>.asyncfs-txn.<random>":
 * a name no other user can guess and take first, made new and private
 * (0700) until the commit gives it the root's permissions. */
static int make_staging(plugin_txn* txn, const char* parent, const char* name, TF_Status* status) {
  char stem[NAME_MAX + 1];
  int attempt;
  staging_stem(name, stem, sizeof stem);
  txn->staging = malloc(strlen(parent) + strlen(stem) + 64);
  if (txn->staging == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  for (attempt = 0; attempt < 8; ++attempt) {
    char random[17];
    if (plugin_random_hex(random, sizeof random) != 0) break;
    sprintf(txn->staging, "%s/.%s.asyncfs-txn.%s", parent, stem, random);
    if (mkdir(txn->staging, 0700) == 0) return 0;
    if (errno != EEXIST) break;
  }
  TF_SetStatusFromIOError(status, errno, txn->staging);
  free(txn->staging);
  txn->staging = NULL;
  return -1;
}

/* Locks txn's root, recovers what a crash left, stages the tree. */
static int begin(const TF_Filesystem* filesystem, plugin_txn* txn,
                 TF_Status* status) {
  const char* root = txn->root;
  char parent[4096];
  const char* name;
  struct stat st;
  posix_inode root_id;
  posix_locks* locks;
  (void)filesystem;
  split_path(root, parent, sizeof parent, &name);
  if (posix_make_dirs(parent, status) != 0) return -1;
  txn->state = locks = calloc(1, sizeof(posix_locks));
  if (locks == NULL) {
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
    rc = lock_root(locks, canonical, root, status);
    free(canonical);
    if (rc != 0) return -1;
  }
  recover(parent, name, root);
  if (lstat(root, &st) == 0 && !S_ISDIR(st.st_mode)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 "a transaction root must be a directory, not a file");
    return -1;
  }
  if (make_staging(txn, parent, name, status) != 0) return -1;
  if (entry_stat(root, &st, &root_id) == 0 &&
      (note_inode(locks, &root_id) != 0 || mirror_tree(root, txn->staging, locks) != 0)) {
    TF_SetStatusFromIOError(status, errno, txn->staging);
    remove_tree(txn->staging);
    return -1;
  }
  qsort(locks->began, locks->began_count, sizeof *locks->began, by_inode);
  return 0;
}

/* Gives the staging folder the root's permissions, and its owner and group
 * where the process may (a new folder's, when there is no root): the swap
 * replaces the root's contents, never who may reach them. */
static int take_root_permissions(const plugin_txn* txn) {
  struct stat st;
  if (lstat(txn->root, &st) != 0) return chmod(txn->staging, 0777 & ~posix_umask());
  if (chown(txn->staging, st.st_uid, st.st_gid) != 0 &&
      (errno != EPERM || (chown(txn->staging, (uid_t)-1, st.st_gid) != 0 && errno != EPERM)))
    return -1;
  return chmod(txn->staging, st.st_mode & 07777);
}

/* Swaps staging and root (commit), then deletes what staging holds: the
 * old tree after a commit, the staged one after an abort. What other
 * writers made in the root while the transaction was open is carried into
 * the new tree (carry_over), before the swap and, for stragglers, after. */
static int finish(const TF_Filesystem* filesystem, plugin_txn* txn,
                  int commit, TF_Status* status) {
  struct stat st;
  int rc = 0;
  const posix_locks* seen = txn->state;
  (void)filesystem;
  if (commit) {
    int had_root = lstat(txn->root, &st) == 0;
    if (had_root) carry_over(txn->root, txn->staging, seen, 1);
    if (take_root_permissions(txn) != 0) {
      rc = -1;
    } else if (!had_root) {
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
    else if (had_root) carry_over(txn->staging, txn->root, seen, 0);
  }
  if (rc == 0) remove_tree(txn->staging);
  return rc;
}

const plugin_txn_hooks posix_transaction_hooks = {begin, finish, release,
                                                  NULL};
