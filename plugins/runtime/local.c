/*
 * System calls on local paths and descriptors for the aiofiles drop-in
 * (runtime_core.h, asyncfs/_native/local.py): stats and opens of many
 * paths, reads and closes of many descriptors, each in one call; and the
 * stats and opens made from what the kernel holds at hand
 * (plugins/common/at_hand.h), which never wait.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "runtime_core.h"
#include "runtime_export.h"
#include "at_hand.h"

/* ---- local paths, for the aiofiles drop-in ---------------------------- */

#ifdef __APPLE__
#define STAT_TIME(st, which) ((st).st_##which##timespec)
#else
#define STAT_TIME(st, which) ((st).st_##which##tim)
#endif

/* what ASYNCFS_STAT_FIELDS lists, of st */
static void stat_fields(const struct stat* st, int64_t* out) {
  out[0] = (int64_t)st->st_mode;
  out[1] = (int64_t)(uint64_t)st->st_ino;
  out[2] = (int64_t)(uint64_t)st->st_dev;
  out[3] = (int64_t)st->st_nlink;
  out[4] = (int64_t)st->st_uid;
  out[5] = (int64_t)st->st_gid;
  out[6] = (int64_t)st->st_size;
  out[7] = (int64_t)STAT_TIME(*st, a).tv_sec;
  out[8] = (int64_t)STAT_TIME(*st, a).tv_nsec;
  out[9] = (int64_t)STAT_TIME(*st, m).tv_sec;
  out[10] = (int64_t)STAT_TIME(*st, m).tv_nsec;
  out[11] = (int64_t)STAT_TIME(*st, c).tv_sec;
  out[12] = (int64_t)STAT_TIME(*st, c).tv_nsec;
  out[13] = (int64_t)st->st_blksize;
  out[14] = (int64_t)st->st_blocks;
  out[15] = (int64_t)(uint64_t)st->st_rdev;
}

RUNTIME_EXPORT int ASYNCFS_StatPaths(const char* paths, int n, int64_t* fields, int* errors) {
  const char* path = paths;
  int i, failed = 0;
  for (i = 0; i < n; ++i, path += strlen(path) + 1) {
    struct stat st;
    if (stat(path, &st) != 0) {
      errors[i] = errno;
      ++failed;
      continue;
    }
    errors[i] = 0;
    stat_fields(&st, fields + (size_t)i * ASYNCFS_STAT_FIELDS);
  }
  return failed;
}

/* ---- the same, from what the kernel holds in memory (common/at_hand.h) --- */

RUNTIME_EXPORT int ASYNCFS_PathIfReady(const char* path) {
  return at_hand_open(path, O_PATH, NULL);
}

RUNTIME_EXPORT int ASYNCFS_OpenIfReady(const char* path, int64_t* fields) {
  struct stat st;
  int fd = at_hand_open(path, O_RDONLY, &st);
  if (fd >= 0) stat_fields(&st, fields);
  return fd;
}

RUNTIME_EXPORT int ASYNCFS_OpenPaths(const char* paths, int n, int* fds, int64_t* fields, int* errors) {
  const char* path = paths;
  int i, failed = 0;
  for (i = 0; i < n; ++i, path += strlen(path) + 1) {
    struct stat st;
    int fd = -1;
    fds[i] = -1;
    errors[i] = 0;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode)) {
      do fd = open(path, O_RDONLY | O_CLOEXEC);
      while (fd < 0 && errno == EINTR);
      if (fd < 0) errors[i] = errno;
      else if (fstat(fd, &st) != 0) errors[i] = errno;
    }
    if (fd >= 0 && errors[i] == 0 && S_ISREG(st.st_mode)) {
      fds[i] = fd;
      stat_fields(&st, fields + (size_t)i * ASYNCFS_STAT_FIELDS);
      continue;
    }
    if (fd >= 0) close(fd); /* it failed, or it is no longer a regular file: the caller opens it by itself */
    ++failed;
  }
  return failed;
}

RUNTIME_EXPORT int ASYNCFS_ReadFds(const int* fds, int n, char* buffer, const int64_t* starts, const int64_t* caps,
                                   int64_t* counts, int* ends, int* errors) {
  int i, failed = 0;
  for (i = 0; i < n; ++i) {
    char* at = buffer + starts[i];
    int64_t got = 0;
    ssize_t r = 1;
    errors[i] = 0;
    while (got < caps[i]) {
      r = read(fds[i], at + got, (size_t)(caps[i] - got));
      if (r > 0) got += r;
      else if (r == 0) break;
      else if (errno != EINTR) {
        errors[i] = errno;
        ++failed;
        break;
      }
    }
    counts[i] = got;
    ends[i] = r == 0;
  }
  return failed;
}

RUNTIME_EXPORT void ASYNCFS_CloseFds(const int* fds, int n) {
  int i;
  for (i = 0; i < n; ++i) close(fds[i]);
}

