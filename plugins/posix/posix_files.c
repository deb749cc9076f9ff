/*
 * The posix plugin's files: readers (pread in slices, read onward for a
 * pipe, reads from the page cache only for at hand), writers (write(2),
 * fsync on close when sync_on_close is set), mmap-backed memory regions,
 * and the opens that make them, at hand too (plugins/common/at_hand.h).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "at_hand.h"
#include "plugin_common.h"
#include "plugin_fs.h"
#include "posix_internal.h"

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
    plugin_set_oom(status);
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

void posix_new_random_access_file(const TF_Filesystem* filesystem,
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
int64_t posix_new_random_access_file_if_ready(const TF_Filesystem* filesystem,
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
    plugin_set_oom(status);
    return;
  }
  w->fd = fd;
  w->sync_on_close = plugin_config_int(
      &plugin_fs_of(filesystem)->config, offsetof(posix_settings, sync_on_close));
  w->position = (flags & O_APPEND) ? (int64_t)lseek(fd, 0, SEEK_END) : 0;
  file->plugin_file = w;
  plugin_set_ok(status);
}

void posix_new_writable_file(const TF_Filesystem* filesystem,
                                 const char* path, TF_WritableFile* file,
                                 TF_Status* status) {
  posix_open_writer(filesystem, path, O_TRUNC, 0666, file, status);
}

void posix_new_appendable_file(const TF_Filesystem* filesystem,
                                   const char* path, TF_WritableFile* file,
                                   TF_Status* status) {
  posix_open_writer(filesystem, path, O_APPEND, 0666, file, status);
}

void posix_new_read_only_memory_region_from_file(
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
    plugin_set_oom(status);
    return;
  }
  r->address = address;
  r->length = (uint64_t)st.st_size;
  region->plugin_memory_region = r;
  plugin_set_ok(status);
}

const TF_RandomAccessFileOps posix_reader_ops = {
    .cleanup = reader_cleanup,
    .read = reader_read,
    .read_if_ready = reader_read_if_ready};

const TF_WritableFileOps posix_writer_ops = {
    .cleanup = writer_cleanup,
    .append = writer_append,
    .tell = writer_tell,
    .flush = writer_flush,
    .sync = writer_sync,
    .close = writer_close};

const TF_ReadOnlyMemoryRegionOps posix_region_ops = {
    .cleanup = region_cleanup, .data = region_data, .length = region_length};
