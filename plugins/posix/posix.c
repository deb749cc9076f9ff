/*
 * The posix plugin: file:// and bare paths on the local filesystem.
 *
 * Semantics follow TensorFlow's posix plugin (errno mapping through
 * TF_SetStatusFromIOError); beyond it: batch exists in one call, a native
 * glob that reads each directory once, mmap-backed memory regions, and copy
 * through copy_file_range (sendfile, then read/write as fallbacks) into a
 * temporary sibling renamed over the target, so a failed copy never leaves a
 * half-written target.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "at_hand.h"
#include "plugin_common.h"
#include "plugin_fs.h"
#include "posix_internal.h"

typedef struct posix_settings {
  plugin_settings base;
  int64_t sync_on_close;
} posix_settings;

static const plugin_option posix_options[] = {
    {"sync_on_close",
     "1: fsync a writable file before closing it (durable, slower)",
     PLUGIN_OPTION_INT, offsetof(posix_settings, sync_on_close), 0, 1, 0},
};
static const plugin_schema posix_schema = {"posix", posix_options, 1,
                                           sizeof(posix_settings)};

/* ---- random access files ------------------------------------------------ */

typedef struct posix_reader {
  int fd;
  int64_t size_at_open; /* a regular file's size when opened; -1 otherwise */
  /* A pipe or a terminal (/dev/stdin, a shell's <(...)) cannot be read at
   * an offset: it is read onward, each read from where the one before it
   * ended (position), one at a time. */
  pthread_mutex_t onward;
  int64_t position;
} posix_reader;

static void reader_cleanup(TF_RandomAccessFile* file) {
  posix_reader* r = file->plugin_file;
  if (r == NULL) return;
  close(r->fd);
  if (r->size_at_open < 0) pthread_mutex_destroy(&r->onward);
  free(r);
  file->plugin_file = NULL;
}

/* A read of n bytes at offset of a file that has no offsets (pread said
 * ESPIPE): read(2) until n bytes or the end, if offset is where the reads
 * before it ended; FAILED_PRECONDITION for any other offset, which such a
 * file cannot give (OUT_OF_RANGE would read as its end). */
static int64_t read_onward(posix_reader* r, uint64_t offset, size_t n,
                           char* buffer, TF_Status* status) {
  size_t done = 0;
  pthread_mutex_lock(&r->onward);
  if ((int64_t)offset != r->position) {
    char message[160];
    snprintf(message, sizeof message,
             "a pipe or a terminal is read onward only: asked for byte %llu, "
             "next is byte %lld",
             (unsigned long long)offset, (long long)r->position);
    pthread_mutex_unlock(&r->onward);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, message);
    return -1;
  }
  while (done < n) {
    ssize_t got = read(r->fd, buffer + done, n - done);
    if (got > 0) {
      done += (size_t)got;
    } else if (got == 0) {
      break;
    } else if (errno != EINTR) {
      r->position += (int64_t)done;
      pthread_mutex_unlock(&r->onward);
      TF_SetStatusFromIOError(status, errno, "read");
      return -1;
    }
  }
  r->position += (int64_t)done;
  pthread_mutex_unlock(&r->onward);
  if (done < n) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "read past the end of the file");
  } else {
    plugin_set_ok(status);
  }
  return (int64_t)done;
}

/* Large reads go in slices: a kernel copy of many megabytes cannot be
 * preempted on most kernels, so one huge pread would keep a core from the
 * event loop's thread for milliseconds. */
#define READ_SLICE ((size_t)256 << 10)

/* preadv2's RWF_NOWAIT (glibc 2.26+); 0 elsewhere: nothing is at hand. */
#if defined(RWF_NOWAIT) && defined(__GLIBC__)
#define NOWAIT RWF_NOWAIT
#else
#define NOWAIT 0
#endif

/* The reads' shared loop: n bytes at offset, in slices, or all up to the
 * end (TF_OUT_OF_RANGE, with the count). flags are preadv2's (RWF_NOWAIT:
 * from the page cache only); 0 is a plain pread. A failure returns -1 with
 * errno set and status untouched: the caller says what it means. */
static int64_t read_at(const posix_reader* r, uint64_t offset, size_t n,
                       char* buffer, int flags, TF_Status* status) {
  size_t done = 0;
  while (done < n) {
    size_t want = n - done < READ_SLICE ? n - done : READ_SLICE;
    ssize_t got;
#if NOWAIT
    struct iovec part = {buffer + done, want};
    got = flags != 0 ? preadv2(r->fd, &part, 1, (off_t)(offset + done), flags)
                     : pread(r->fd, buffer + done, want, (off_t)(offset + done));
#else
    (void)flags;
    got = pread(r->fd, buffer + done, want, (off_t)(offset + done));
#endif
    if (got > 0) {
      done += (size_t)got;
      /* A short read that ends where the file ended when it was opened is
       * the end: asking again would only be answered 0 (one syscall of the
       * five a small whole-file read costs). Anywhere else, ask again. */
      if ((size_t)got < want && (int64_t)(offset + done) == r->size_at_open) {
        TF_SetStatus(status, TF_OUT_OF_RANGE, "read past the end of the file");
        return (int64_t)done;
      }
    } else if (got == 0) {
      TF_SetStatus(status, TF_OUT_OF_RANGE, "read past the end of the file");
      return (int64_t)done;
    } else if (errno != EINTR) {
      return -1;
    }
  }
  plugin_set_ok(status);
  return (int64_t)done;
}

static int64_t reader_read(const TF_RandomAccessFile* file, uint64_t offset,
                           size_t n, char* buffer, TF_Status* status) {
  posix_reader* r = file->plugin_file;
  int64_t count = read_at(r, offset, n, buffer, 0, status);
  if (count >= 0) return count;
  if (errno == ESPIPE && r->size_at_open < 0)
    return read_onward(r, offset, n, buffer, status);
  TF_SetStatusFromIOError(status, errno, "pread");
  return -1;
}

/* read from the page cache only: RWF_NOWAIT makes preadv2 answer EAGAIN
 * where the device would be waited for. All n bytes, or all up to the end;
 * a part is UNAVAILABLE, as is anything else that goes wrong (the caller's
 * read then says what), and a pipe, which is read onward under a lock. */
static int64_t reader_read_if_ready(const TF_RandomAccessFile* file,
                                    uint64_t offset, size_t n, char* buffer,
                                    TF_Status* status) {
  const posix_reader* r = file->plugin_file;
  if (NOWAIT != 0 && r->size_at_open >= 0) {
    int64_t count = read_at(r, offset, n, buffer, NOWAIT, status);
    if (count >= 0) return count;
  }
  TF_SetStatus(status, TF_UNAVAILABLE, "not in the page cache");
  return -1;
}

/* ---- writable files ------------------------------------------------------ */

typedef struct posix_writer {
  int fd;
  int64_t position;
  int64_t sync_on_close; /* the setting when the file was opened */
} posix_writer;

static void writer_cleanup(TF_WritableFile* file) {
  posix_writer* w = file->plugin_file;
  if (w == NULL) return;
  if (w->fd >= 0) close(w->fd);
  free(w);
  file->plugin_file = NULL;
}

static void writer_append(const TF_WritableFile* file, const char* buffer,
                          size_t n, TF_Status* status) {
  posix_writer* w = file->plugin_file;
  size_t done = 0;
  if (w->fd < 0) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is closed");
    return;
  }
  while (done < n) {
    ssize_t put = write(w->fd, buffer + done, n - done);
    if (put >= 0) {
      done += (size_t)put;
    } else if (errno != EINTR) {
      w->position += (int64_t)done;
      TF_SetStatusFromIOError(status, errno, "write");
      return;
    }
  }
  w->position += (int64_t)n;
  plugin_set_ok(status);
}

static int64_t writer_tell(const TF_WritableFile* file, TF_Status* status) {
  const posix_writer* w = file->plugin_file;
  if (w->fd < 0) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is closed");
    return -1;
  }
  plugin_set_ok(status);
  return w->position;
}

static void writer_flush(const TF_WritableFile* file, TF_Status* status) {
  (void)file; /* no user-space buffer: every append is a write(2) */
  plugin_set_ok(status);
}

static void writer_sync(const TF_WritableFile* file, TF_Status* status) {
  const posix_writer* w = file->plugin_file;
  if (fdatasync(w->fd) != 0) {
    TF_SetStatusFromIOError(status, errno, "fdatasync");
    return;
  }
  plugin_set_ok(status);
}

static void writer_close(const TF_WritableFile* file, TF_Status* status) {
  posix_writer* w = file->plugin_file;
  int fd = w->fd;
  if (fd < 0) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "file is already closed");
    return;
  }
  w->fd = -1;
  if (w->sync_on_close && fsync(fd) != 0) {
    int e = errno;
    close(fd);
    TF_SetStatusFromIOError(status, e, "fsync");
    return;
  }
  if (close(fd) != 0) {
    TF_SetStatusFromIOError(status, errno, "close");
    return;
  }
  plugin_set_ok(status);
}

/* ---- memory regions ------------------------------------------------------ */

typedef struct posix_region {
  void* address;
  uint64_t length;
} posix_region;

static void region_cleanup(TF_ReadOnlyMemoryRegion* region) {
  posix_region* r = region->plugin_memory_region;
  if (r == NULL) return;
  munmap(r->address, (size_t)r->length);
  free(r);
  region->plugin_memory_region = NULL;
}

static const void* region_data(const TF_ReadOnlyMemoryRegion* region) {
  return ((const posix_region*)region->plugin_memory_region)->address;
}

static uint64_t region_length(const TF_ReadOnlyMemoryRegion* region) {
  return ((const posix_region*)region->plugin_memory_region)->length;
}

/* ---- filesystem ---------------------------------------------------------- */

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  static const posix_settings defaults = {{0}, 0};
  plugin_fs_create(filesystem, sizeof(plugin_fs), &posix_schema, &defaults,
                   &posix_transaction_hooks, status);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  plugin_fs_free(filesystem);
}

int posix_open_regular(const char* path, struct stat* st, TF_Status* status) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    TF_SetStatusFromIOError(status, errno, path);
    return -1;
  }
  if (fstat(fd, st) != 0) {
    TF_SetStatusFromIOError(status, errno, path);
    close(fd);
    return -1;
  }
  if (S_ISDIR(st->st_mode)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
    close(fd);
    return -1;
  }
  return fd;
}

/* The reader of fd, which the reader owns from here on (closed on failure). */
static int make_reader(int fd, const struct stat* st, TF_RandomAccessFile* file,
                       TF_Status* status) {
  posix_reader* r = malloc(sizeof *r);
  if (r == NULL) {
    close(fd);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  r->fd = fd;
  r->size_at_open = S_ISREG(st->st_mode) ? (int64_t)st->st_size : -1;
  r->position = 0;
  if (r->size_at_open < 0) pthread_mutex_init(&r->onward, NULL); /* only these may be read onward */
  file->plugin_file = r;
  plugin_set_ok(status);
  return 0;
}

static void fs_new_random_access_file(const TF_Filesystem* filesystem,
                                      const char* path,
                                      TF_RandomAccessFile* file,
                                      TF_Status* status) {
  struct stat st;
  int fd;
  (void)filesystem;
  fd = posix_open_regular(path, &st, status);
  if (fd >= 0) make_reader(fd, &st, file, status);
}

/* A regular file opened through cached directory entries only, on a
 * filesystem that answers fstat from memory (common/at_hand.h). */
static int64_t fs_new_random_access_file_if_ready(const TF_Filesystem* filesystem,
                                                  const char* path,
                                                  TF_RandomAccessFile* file,
                                                  TF_Status* status) {
  struct stat st;
  int fd = at_hand_open(path, O_RDONLY, &st);
  (void)filesystem;
  if (fd == -EAGAIN) {
    TF_SetStatus(status, TF_UNAVAILABLE, "not at hand");
    return -1;
  }
  if (fd < 0) {
    TF_SetStatusFromIOError(status, -fd, path);
    return -1;
  }
  if (make_reader(fd, &st, file, status) != 0) return -1;
  return (int64_t)st.st_size;
}

void posix_open_writer(const TF_Filesystem* filesystem, const char* path, int flags,
                       mode_t mode, TF_WritableFile* file, TF_Status* status) {
  posix_writer* w;
  int fd;
  if (posix_check_staged_path(filesystem, path, status) != 0) return;
  fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | flags, mode);
  if (fd < 0) {
    TF_SetStatusFromIOError(status, errno, path);
    return;
  }
  w = malloc(sizeof *w);
  if (w == NULL) {
    close(fd);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  w->fd = fd;
  w->sync_on_close = plugin_config_int(
      &plugin_fs_of(filesystem)->config, offsetof(posix_settings, sync_on_close));
  w->position = (flags & O_APPEND) ? (int64_t)lseek(fd, 0, SEEK_END) : 0;
  file->plugin_file = w;
  plugin_set_ok(status);
}

static void fs_new_writable_file(const TF_Filesystem* filesystem,
                                 const char* path, TF_WritableFile* file,
                                 TF_Status* status) {
  posix_open_writer(filesystem, path, O_TRUNC, 0666, file, status);
}

static void fs_new_appendable_file(const TF_Filesystem* filesystem,
                                   const char* path, TF_WritableFile* file,
                                   TF_Status* status) {
  posix_open_writer(filesystem, path, O_APPEND, 0666, file, status);
}

static void fs_new_read_only_memory_region_from_file(
    const TF_Filesystem* filesystem, const char* path,
    TF_ReadOnlyMemoryRegion* region, TF_Status* status) {
  struct stat st;
  posix_region* r;
  void* address;
  int fd;
  (void)filesystem;
  fd = posix_open_regular(path, &st, status);
  if (fd < 0) return;
  if (st.st_size == 0) {
    close(fd);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "file is empty");
    return;
  }
  address = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (address == MAP_FAILED) {
    TF_SetStatusFromIOError(status, errno, path);
    return;
  }
  r = malloc(sizeof *r);
  if (r == NULL) {
    munmap(address, (size_t)st.st_size);
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  r->address = address;
  r->length = (uint64_t)st.st_size;
  region->plugin_memory_region = r;
  plugin_set_ok(status);
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
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
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
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
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
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  plugin_strlist_sort(&list);
  plugin_set_ok(status);
  return plugin_strlist_release(&list, entries);
}

/* ---- registration -------------------------------------------------------- */

static const TF_RandomAccessFileOps posix_reader_ops = {
    .cleanup = reader_cleanup,
    .read = reader_read,
    .read_if_ready = reader_read_if_ready};

static const TF_WritableFileOps posix_writer_ops = {
    .cleanup = writer_cleanup,
    .append = writer_append,
    .tell = writer_tell,
    .flush = writer_flush,
    .sync = writer_sync,
    .close = writer_close};

static const TF_ReadOnlyMemoryRegionOps posix_region_ops = {
    .cleanup = region_cleanup, .data = region_data, .length = region_length};

static const TF_FilesystemOps posix_filesystem_ops = {
    PLUGIN_FILESYSTEM_OPS(fs_, fs_),
    PLUGIN_TRANSACTION_OPS,
    PLUGIN_CONFIGURATION_OPS,
    .rename_dir = fs_rename_dir,
    .landing_path = posix_landing_path,
    .copy_entry = posix_copy_entry,
    .new_temporary_file = posix_new_temporary_file,
    .replace_file = posix_replace_file,
    .read_files = posix_read_files,
    .new_random_access_file_if_ready = fs_new_random_access_file_if_ready};

static const plugin_scheme posix_schemes[] = {
    {"", &posix_filesystem_ops, &posix_reader_ops, &posix_writer_ops,
     &posix_region_ops},
    {"file", &posix_filesystem_ops, &posix_reader_ops, &posix_writer_ops,
     &posix_region_ops},
};

PLUGIN_DEFINE(posix_schemes, "posix", "1.0.0", 0)
