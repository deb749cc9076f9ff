/* Opening a local path from what the kernel holds in memory (at_hand.h). */
#define _GNU_SOURCE
#include "at_hand.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
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

int at_hand_open(const char* path, int flags, struct stat* st) {
  struct stat looked, seen;
  int fd, ok;
  /* First O_PATH, which opens nothing: a FIFO so opened counts as no
   * reader. Any open of a FIFO to read, even O_NONBLOCK and closed at
   * once, lets a writer waiting in its own open go on, and the bytes it
   * writes are then lost with the pipe. */
  fd = open_cached(path, O_PATH);
  if (fd < 0) return fd;
  if (flags & O_PATH) { /* to stat: st may be NULL, the caller fstat's fd */
    if (at_hand_local(fd) && (st == NULL || fstat(fd, st) == 0)) return fd;
    close(fd);
    return -EAGAIN;
  }
  ok = at_hand_local(fd) && fstat(fd, &looked) == 0 && S_ISREG(looked.st_mode);
  close(fd);
  if (!ok) return -EAGAIN;
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
