/* Many whole files in one call (read_files, op 41): what dataset prefetch
 * hands the plugin, a group of small files at a time.
 *
 * Each file costs the fewest system calls that still answer exactly:
 * openat(2) from the descriptor of the directory it shares with the file
 * before it (the kernel walks one name, not the whole path), one pread(2),
 * and close(2). No fstat(2) unless the file filled its buffer: on a local
 * filesystem a regular file's read comes back short only at its end
 * (at_hand_local), and elsewhere a second read says where the end is. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "at_hand.h"
#include "plugin_common.h"
#include "posix_internal.h"

#ifndef PIPEFS_MAGIC
#define PIPEFS_MAGIC 0x50495045 /* linux/magic.h */
#endif

/* fd, which has no offsets, read onward into buffer: *size as read_whole
 * sets it. A pipe's other end is held by whoever named it (/dev/fd/N), so
 * the caller can read it another way from the start; a FIFO or a socket
 * just opened may hold bytes no one else will see again, so they are read
 * here, and one that holds more than cap fails (FAILED_PRECONDITION): its
 * bytes are gone and can be read neither here nor another way. */
static void read_onward(int fd, const char* path, char* buffer, size_t cap, int64_t* size,
                        TF_Status* status) {
  struct statfs fs;
  size_t got = 0;
  char more;
  ssize_t r = 0;
  if (fstatfs(fd, &fs) == 0 && (unsigned long)fs.f_type == PIPEFS_MAGIC) {
    *size = (int64_t)cap + 1;
    return;
  }
  while (got < cap && ((r = read(fd, buffer + got, cap - got)) > 0 || (r < 0 && errno == EINTR)))
    if (r > 0) got += (size_t)r;
  if (r >= 0 && got == cap)
    while ((r = read(fd, &more, 1)) < 0 && errno == EINTR) continue;
  if (r < 0) {
    TF_SetStatusFromIOError(status, errno, path);
  } else if (r > 0) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "holds more than the %zu bytes a bulk read had for it: read it on its own", cap);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
  } else {
    *size = (int64_t)got;
  }
}

/* The file name at dir (a directory's descriptor, or AT_FDCWD with the
 * whole path) read into buffer, at most cap bytes; *size as read_files
 * sets it (more than cap: the caller reads the file another way). path
 * names the file in errors. */
static void read_whole(int dir, const char* name, const char* path, int short_is_end, char* buffer,
                       size_t cap, int64_t* size, TF_Status* status) {
  size_t got = 0;
  int fd;
  *size = 0;
  do fd = openat(dir, name, O_RDONLY | O_CLOEXEC); /* a FIFO waits for a writer, as open() does */
  while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    TF_SetStatusFromIOError(status, errno, path);
    return;
  }
  plugin_set_ok(status);
  for (;;) {
    ssize_t r;
    if (got == cap) { /* full: the file's size says whether that was all of it */
      struct stat st;
      if (fstat(fd, &st) != 0) TF_SetStatusFromIOError(status, errno, path);
      else if (S_ISREG(st.st_mode) && st.st_size == (off_t)cap) *size = (int64_t)cap;
      else *size = st.st_size > (off_t)cap ? (int64_t)st.st_size : (int64_t)cap + 1;
      break;
    }
    r = pread(fd, buffer + got, cap - got, (off_t)got);
    if (r > 0) {
      got += (size_t)r;
      if (got < cap && short_is_end) {
        *size = (int64_t)got;
        break;
      }
    } else if (r == 0) {
      *size = (int64_t)got;
      break;
    } else if (errno == EISDIR) {
      TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
      break;
    } else if (errno == ESPIPE && got == 0) {
      read_onward(fd, path, buffer, cap, size, status);
      break;
    } else if (errno != EINTR) {
      TF_SetStatusFromIOError(status, errno, path);
      break;
    }
  }
  close(fd);
}

/* Whether path lies in the directory that dir (its first dir_len bytes)
 * names, directly. */
static int directly_in(const char* path, const char* dir, size_t dir_len) {
  return strncmp(path, dir, dir_len) == 0 && path[dir_len] == '/' && path[dir_len + 1] != '\0' &&
         strchr(path + dir_len + 1, '/') == NULL;
}

void posix_read_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                      char* const* buffers, const size_t* caps, int64_t* sizes,
                      TF_Status** statuses) {
  int i, dir = -1, local = 0;
  const char* dir_name = NULL; /* dir's path: the first dir_len bytes of a path before */
  size_t dir_len = 0;
  (void)filesystem;
  for (i = 0; i < n; ++i) {
    const char* path = paths[i];
    const char* slash = strrchr(path, '/');
    size_t len = slash != NULL ? (size_t)(slash - path) : 0;
    if (dir >= 0 && !directly_in(path, dir_name, dir_len)) {
      close(dir);
      dir = -1;
    }
    /* a directory's descriptor pays from its second file on */
    if (dir < 0 && len > 0 && len < PATH_MAX && slash[1] != '\0' && i + 1 < n &&
        directly_in(paths[i + 1], path, len)) {
      char name[PATH_MAX];
      memcpy(name, path, len);
      name[len] = '\0';
      dir = open(name, O_PATH | O_DIRECTORY | O_CLOEXEC);
      dir_name = path;
      dir_len = len;
      local = dir >= 0 && at_hand_local(dir);
    }
    if (dir >= 0)
      read_whole(dir, slash + 1, path, local, buffers[i], caps[i], &sizes[i], statuses[i]);
    else
      read_whole(AT_FDCWD, path, path, 0, buffers[i], caps[i], &sizes[i], statuses[i]);
  }
  if (dir >= 0) close(dir);
}
