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

/* the filesystems whose getattr reads the inode in memory, by their
 * superblock's magic (linux/magic.h) and by their type's name */
static int local_magic(unsigned long magic) {
  switch (magic) {
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

static int local_type(const char* type, size_t len) {
  static const char* const local[] = {"ext2", "ext3", "ext4", "xfs", "btrfs",
                                      "f2fs", "tmpfs", "ramfs", "overlay"};
  size_t i;
  for (i = 0; i < sizeof local / sizeof local[0]; ++i)
    if (strlen(local[i]) == len && memcmp(local[i], type, len) == 0) return 1;
  return 0;
}

int at_hand_local(int fd) {
  struct statfs fs;
  return fstatfs(fd, &fs) == 0 && local_magic((unsigned long)fs.f_type);
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
 * Every look at hand asks both, and never the filesystem itself: one
 * statx(2) with AT_STATX_DONT_SYNC (a network filesystem answers from its
 * cache, not from its server) gives the stat and the mount's id, and the
 * mount's type comes from what the kernel keeps of its mounts. Not from
 * fstatfs(2): NFS sends that to its server (FSSTAT) and FUSE to its daemon
 * (STATFS), each time, and one that does not answer would hold the event
 * loop's thread.
 *   - Linux 6.8 on: the mount's unique id (STATX_MNT_ID_UNIQUE), never
 *     reused while the system runs, and statmount(2)'s sb_magic for it,
 *     asked once per mount;
 *   - before, or where statmount is refused (a seccomp filter; or
 *     ASYNCFS_AT_HAND_MOUNTINFO set, to test this way): the mount's id
 *     (STATX_MNT_ID, Linux 5.8), which a later mount may reuse, and its type
 *     in /proc/self/mountinfo; what was read is forgotten whenever the mount
 *     table changed (poll(2) on the file says so: POLLPRI).
 * A kernel that gives neither (at hand needs 5.12's RESOLVE_CACHED anyway)
 * has nothing at hand. */

#if defined(SYS_statx)
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#ifndef SYS_statmount
#define SYS_statmount 457 /* Linux 6.8, the same number on every architecture */
#endif

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

#define AT_HAND_STATX_BASIC 0x7ffU       /* STATX_BASIC_STATS */
#define AT_HAND_STATX_MNT_ID 0x1000U     /* Linux 5.8 */
#define AT_HAND_STATX_MNT_UNIQUE 0x4000U /* Linux 6.8 */
#define AT_HAND_DONT_SYNC 0x4000         /* AT_STATX_DONT_SYNC */

enum { MOUNTS_KNOWN = 32 };
/* mounts by unique id: the id shifted left once, the low bit set when the
 * mount is local; 0 is empty (no mount has id 0) */
static uint64_t unique_known[MOUNTS_KNOWN];
static unsigned unique_next;
static int statmount_refused; /* once refused, the ids that mountinfo knows */
/* mounts by reusable id, from mountinfo: the table's generation (bits 33
 * up), the id (bits 1-32), local (bit 0); an entry of an older generation
 * is stale: the mount table changed since */
static uint64_t ids_known[MOUNTS_KNOWN];
static unsigned ids_next;
static uint64_t ids_generation = 1;
static int mountinfo_fd = -1; /* /proc/self/mountinfo, polled for changes */
static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void remember(uint64_t* table, unsigned* next, uint64_t entry) {
  unsigned i = __atomic_fetch_add(next, 1, __ATOMIC_RELAXED) % MOUNTS_KNOWN;
  __atomic_store_n(&table[i], entry, __ATOMIC_RELAXED);
}

/* A forked child may outlive its parent, whose /proc/<pid>/mountinfo the
 * descriptor reads: the child opens its own. */
static void forget_mountinfo_in_child(void) {
  int fd = mountinfo_fd;
  mountinfo_fd = -1;
  if (fd >= 0) close(fd);
  ++ids_generation;
}

static void add_fork_handler(void) { pthread_atfork(NULL, NULL, forget_mountinfo_in_child); }

static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static void read_settings(void) {
  const char* mountinfo = getenv("ASYNCFS_AT_HAND_MOUNTINFO");
  if (mountinfo != NULL && *mountinfo != '\0') statmount_refused = 1;
}

/* Whether the mount whose unique id is id is local: 1 or 0, or -1 when
 * statmount could not say: refused (a kernel or a seccomp filter without
 * it: from then on, mountinfo says) or failed this once (the mount gone). */
static int unique_local(uint64_t id) {
  struct { /* struct mnt_id_req, linux/mount.h: its first published size */
    uint32_t size, spare;
    uint64_t mnt_id, param;
  } req = {24, 0, id, 1 /* STATMOUNT_SB_BASIC */};
  uint64_t sm[128]; /* struct statmount: mask at [1], sb_magic at [3] */
  unsigned i;
  int local;
  for (i = 0; i < MOUNTS_KNOWN; ++i) {
    uint64_t entry = __atomic_load_n(&unique_known[i], __ATOMIC_RELAXED);
    if (entry >> 1 == id) return (int)(entry & 1);
  }
  if (syscall(SYS_statmount, &req, sm, sizeof sm, 0) != 0) {
    if (errno == ENOSYS || errno == EPERM) __atomic_store_n(&statmount_refused, 1, __ATOMIC_RELAXED);
    return -1;
  }
  if (!(sm[1] & 1)) return -1;
  local = local_magic((unsigned long)sm[3]);
  remember(unique_known, &unique_next, id << 1 | (uint64_t)local);
  return local;
}

/* The type of mount id in /proc/self/mountinfo, read whole now: 1 local,
 * 0 not, -1 not found or not readable. A line: "ID PARENT MAJ:MIN ROOT
 * POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER-OPTIONS". */
static int mountinfo_local(uint64_t id) {
  size_t cap = 1 << 16, len = 0;
  char* text = malloc(cap + 1);
  char* line;
  int fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC), found = -1;
  ssize_t got = 0;
  while (fd >= 0 && text != NULL && (got = read(fd, text + len, cap - len)) > 0) {
    len += (size_t)got;
    if (len == cap) {
      char* more = cap < (64u << 20) ? realloc(text, 2 * cap + 1) : NULL;
      if (more == NULL) break;
      text = more;
      cap *= 2;
    }
  }
  if (fd >= 0) close(fd);
  if (text == NULL || got != 0) {
    free(text);
    return -1;
  }
  text[len] = '\0';
  for (line = text; line < text + len && found < 0;) {
    char* end = strchr(line, '\n');
    char* sep;
    if (end == NULL) end = text + len;
    *end = '\0';
    if (strtoull(line, NULL, 10) == id && (sep = strstr(line, " - ")) != NULL)
      found = local_type(sep + 3, strcspn(sep + 3, " "));
    line = end + 1;
  }
  free(text);
  return found;
}

/* Whether the mount whose reusable id is id is local: 1 or 0, or -1 when
 * mountinfo could not say. */
static int id_local(uint64_t id) {
  struct pollfd changed;
  uint64_t generation;
  unsigned i;
  int fd = __atomic_load_n(&mountinfo_fd, __ATOMIC_ACQUIRE), local;
  if (fd < 0) {
    int expected = -1;
    pthread_once(&fork_handler_once, add_fork_handler);
    fd = open("/proc/self/mountinfo", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (!__atomic_compare_exchange_n(&mountinfo_fd, &expected, fd, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
      close(fd); /* another thread's came first */
      fd = expected;
    }
  }
  changed.fd = fd;
  changed.events = POLLPRI;
  if (poll(&changed, 1, 0) > 0 && (changed.revents & (POLLPRI | POLLERR)))
    __atomic_add_fetch(&ids_generation, 1, __ATOMIC_ACQ_REL);
  generation = __atomic_load_n(&ids_generation, __ATOMIC_ACQUIRE) & ((1ULL << 31) - 1);
  for (i = 0; i < MOUNTS_KNOWN; ++i) {
    uint64_t entry = __atomic_load_n(&ids_known[i], __ATOMIC_RELAXED);
    if (entry >> 33 == generation && (entry >> 1 & 0xFFFFFFFFULL) == id) return (int)(entry & 1);
  }
  local = mountinfo_local(id);
  if (local >= 0) remember(ids_known, &ids_next, generation << 33 | id << 1 | (uint64_t)local);
  return local;
}

static struct timespec from_statx_time(struct at_hand_statx_time t) {
  struct timespec out;
  out.tv_sec = (time_t)t.tv_sec;
  out.tv_nsec = (long)t.tv_nsec;
  return out;
}

/* fd's stat into st (NULL: not wanted) and whether its mount is local:
 * 0, or -1 when that could not be told without asking the filesystem. */
static int look(int fd, struct stat* st, int* local) {
  struct at_hand_statx x;
  int by_unique;
  pthread_once(&settings_once, read_settings);
  by_unique = !__atomic_load_n(&statmount_refused, __ATOMIC_RELAXED);
  unsigned wanted = AT_HAND_STATX_BASIC | (by_unique ? AT_HAND_STATX_MNT_UNIQUE : AT_HAND_STATX_MNT_ID);
  if (syscall(SYS_statx, fd, "", AT_EMPTY_PATH | AT_HAND_DONT_SYNC, wanted, &x) != 0 ||
      (x.mask & AT_HAND_STATX_BASIC) != AT_HAND_STATX_BASIC || x.mnt_id == 0)
    return -1;
  if (x.mask & AT_HAND_STATX_MNT_UNIQUE) {
    *local = unique_local(x.mnt_id);
    if (*local < 0 && __atomic_load_n(&statmount_refused, __ATOMIC_RELAXED))
      return look(fd, st, local); /* by mountinfo from now on */
  } else if (x.mask & AT_HAND_STATX_MNT_ID) {
    *local = id_local(x.mnt_id);
  } else {
    return -1;
  }
  if (*local < 0) return -1;
  if (st == NULL) return 0;
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
  return 0;
}
#else
static int look(int fd, struct stat* st, int* local) {
  (void)fd;
  (void)st;
  (void)local;
  return -1;
}
#endif

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
