/* Opening a local path from what the kernel holds in memory (at_hand.h). */
#define _GNU_SOURCE
#include "at_hand.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#if defined(__linux__)
#include <sys/syscall.h>
#include <sys/vfs.h>

#ifndef SYS_openat2
#define SYS_openat2 437 /* the same number on every architecture */
#endif
#define AT_HAND_RESOLVE_CACHED 0x20 /* RESOLVE_CACHED, linux/openat2.h */

struct at_hand_how { /* struct open_how, linux/openat2.h */
  uint64_t flags;
  uint64_t mode;
  uint64_t resolve;
};

/* the filesystems whose getattr reads the inode in memory (linux/magic.h) */
int at_hand_local(int fd) {
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0) return 0;
  switch ((unsigned long)fs.f_type) {
    case 0xEF53UL:     /* ext2, ext3, ext4 */
    case 0x58465342UL: /* xfs */
    case 0x9123683EUL: /* btrfs */
    case 0xF2F52010UL: /* f2fs */
    case 0x01021994UL: /* tmpfs */
    case 0x858458F6UL: /* ramfs */
    case 0x794C7630UL: /* overlayfs, over such local layers (a container's root) */
      return 1;
    default:
      return 0;
  }
}

static int openat2_missing; /* ENOSYS once: before Linux 5.6 */

/* openat2 through cached directory entries only: the descriptor, or
 * -errno as at_hand_open answers. */
static int open_cached(const char* path, uint64_t flags) {
  struct at_hand_how how = {flags | O_CLOEXEC, 0, AT_HAND_RESOLVE_CACHED};
  int fd;
  if (__atomic_load_n(&openat2_missing, __ATOMIC_RELAXED)) return -EAGAIN;
  fd = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
  if (fd >= 0) return fd;
  switch (errno) {
    case ENOENT: case ENOTDIR: case EACCES: case ELOOP: case ENAMETOOLONG:
      return -errno; /* the walk's own answer, as open(2) and stat(2) give it */
    case ENOSYS: /* no openat2 (or a seccomp filter that says so) */
      __atomic_store_n(&openat2_missing, 1, __ATOMIC_RELAXED);
      return -EAGAIN;
    default: /* EAGAIN (not cached), EPERM (an older seccomp filter), EINTR,
              * EMFILE, ...: the ordinary call says */
      return -EAGAIN;
  }
}

/* ---- looking at a descriptor: its stat and whether its mount is local ----
 *
 * Every look at hand asks both. Since Linux 6.8 one statx(2) answers them:
 * with the stat, the mount's unique id (STATX_MNT_ID_UNIQUE), never reused
 * while the system runs, so a mount found local (or not) once is that for
 * good, and fstatfs is asked once per mount, not once per path. Elsewhere
 * (older kernels, headers without statx) fstat and fstatfs each time. */

#if defined(SYS_statx)
#include <sys/sysmacros.h>

struct at_hand_statx_time { /* struct statx_timestamp, linux/stat.h */
  int64_t tv_sec;
  uint32_t tv_nsec;
  int32_t reserved;
};

struct at_hand_statx { /* struct statx, linux/stat.h: a stable layout */
  uint32_t mask, blksize;
  uint64_t attributes;
  uint32_t nlink, uid, gid;
  uint16_t mode, spare0;
  uint64_t ino, size, blocks, attributes_mask;
  struct at_hand_statx_time atime, btime, ctime, mtime;
  uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
  uint64_t mnt_id;
  uint64_t spare[14];
};

#define AT_HAND_STATX_BASIC 0x7ffU      /* STATX_BASIC_STATS */
#define AT_HAND_STATX_MNT_UNIQUE 0x4000U /* STATX_MNT_ID_UNIQUE, Linux 6.8 */

enum { MOUNTS_KNOWN = 32 };
/* each entry: a unique mount id, shifted left once, its low bit set when
 * the mount is local; 0 is empty (no mount has id 0) */
static uint64_t mounts_known[MOUNTS_KNOWN];
static unsigned mounts_next;
static int statx_unique_missing; /* a kernel before 6.8 said so once */

/* Whether the mount of fd, whose unique id is mnt_id, is local: from the
 * table, else asked (at_hand_local) and remembered. */
static int local_mount(int fd, uint64_t mnt_id) {
  unsigned i;
  int local;
  for (i = 0; i < MOUNTS_KNOWN; ++i) {
    uint64_t entry = __atomic_load_n(&mounts_known[i], __ATOMIC_RELAXED);
    if (entry >> 1 == mnt_id) return (int)(entry & 1);
  }
  local = at_hand_local(fd);
  i = __atomic_fetch_add(&mounts_next, 1, __ATOMIC_RELAXED) % MOUNTS_KNOWN;
  __atomic_store_n(&mounts_known[i], mnt_id << 1 | (uint64_t)local, __ATOMIC_RELAXED);
  return local;
}

static struct timespec from_statx_time(struct at_hand_statx_time t) {
  struct timespec out;
  out.tv_sec = (time_t)t.tv_sec;
  out.tv_nsec = (long)t.tv_nsec;
  return out;
}

/* 1 when one statx answered both (st filled, *local set), 0 when it could
 * not (the caller asks fstat and fstatfs). */
static int look_once(int fd, struct stat* st, int* local) {
  struct at_hand_statx x;
  unsigned wanted = AT_HAND_STATX_BASIC | AT_HAND_STATX_MNT_UNIQUE;
  if (__atomic_load_n(&statx_unique_missing, __ATOMIC_RELAXED)) return 0;
  if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH, wanted, &x) != 0) return 0;
  if ((x.mask & wanted) != wanted || x.mnt_id == 0) {
    if (!(x.mask & AT_HAND_STATX_MNT_UNIQUE))
      __atomic_store_n(&statx_unique_missing, 1, __ATOMIC_RELAXED);
    return 0;
  }
  memset(st, 0, sizeof *st);
  st->st_dev = makedev(x.dev_major, x.dev_minor);
  st->st_ino = (ino_t)x.ino;
  st->st_mode = (mode_t)x.mode;
  st->st_nlink = (nlink_t)x.nlink;
  st->st_uid = (uid_t)x.uid;
  st->st_gid = (gid_t)x.gid;
  st->st_rdev = makedev(x.rdev_major, x.rdev_minor);
  st->st_size = (off_t)x.size;
  st->st_blksize = (blksize_t)x.blksize;
  st->st_blocks = (blkcnt_t)x.blocks;
  st->st_atim = from_statx_time(x.atime);
  st->st_mtim = from_statx_time(x.mtime);
  st->st_ctim = from_statx_time(x.ctime);
  *local = local_mount(fd, x.mnt_id);
  return 1;
}
#else
static int look_once(int fd, struct stat* st, int* local) {
  (void)fd;
  (void)st;
  (void)local;
  return 0;
}
#endif

/* fd's stat into st (NULL: not wanted) and whether its filesystem is
 * local (at_hand_local): 0, or -1 when the stat failed. */
static int look(int fd, struct stat* st, int* local) {
  struct stat unwanted;
  if (look_once(fd, st != NULL ? st : &unwanted, local)) return 0;
  *local = at_hand_local(fd);
  return st != NULL ? fstat(fd, st) : 0;
}

int at_hand_open(const char* path, int flags, struct stat* st) {
  struct stat looked, seen;
  int fd, local;
  /* First O_PATH, which opens nothing: a FIFO so opened counts as no
   * reader. Any open of a FIFO to read, even O_NONBLOCK and closed at
   * once, lets a writer waiting in its own open go on, and the bytes it
   * writes are then lost with the pipe. */
  fd = open_cached(path, O_PATH);
  if (fd < 0) return fd;
  if (flags & O_PATH) { /* to stat: st may be NULL, the caller fstat's fd */
    if (look(fd, st, &local) == 0 && local) return fd;
    close(fd);
    return -EAGAIN;
  }
  if (look(fd, &looked, &local) != 0 || !local || !S_ISREG(looked.st_mode)) {
    close(fd);
    return -EAGAIN;
  }
  close(fd);
  /* To read: a regular file only, opened again by its path, now cached;
   * with O_NONBLOCK, as io_uring opens, so that a file under another's
   * lease refuses, and a FIFO put there meanwhile opens without waiting
   * (and is refused: not the file looked at). */
  fd = open_cached(path, (uint64_t)flags | O_NONBLOCK);
  if (fd < 0) return fd == -ENOENT ? -EAGAIN : fd; /* gone meanwhile: the ordinary call says */
  if (fstat(fd, &seen) != 0 || seen.st_ino != looked.st_ino || seen.st_dev != looked.st_dev ||
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    close(fd);
    return -EAGAIN;
  }
  if (st != NULL) *st = seen;
  return fd;
}
#else
int at_hand_local(int fd) {
  (void)fd;
  return 0;
}

int at_hand_open(const char* path, int flags, struct stat* st) {
  (void)path;
  (void)flags;
  (void)st;
  return -EAGAIN;
}
#endif
