/*
 * The core's composite calls (runtime_core.h): one logical step of the
 * Python core, one transition into C. Arrays of statuses, the path rules
 * over a plugin's translate_name, a file opened and read (whole, at hand,
 * or in runs of many files), existence checks of many paths, string
 * packing, and reads of an untrusted plugin's answers that cannot crash.
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
#include "plugin_paths.h"

/* ---- core-only batch helpers (asyncfs/runtime_core.h) ------------------- */

static uint64_t monotonic_nanos(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

RUNTIME_EXPORT TF_Status** ASYNCFS_NewStatusArray(int n) {
  TF_Status** statuses = calloc(n > 0 ? (size_t)n : 1, sizeof(TF_Status*));
  TF_Status* block = calloc(n > 0 ? (size_t)n : 1, sizeof(TF_Status));
  int i;
  if (statuses == NULL || block == NULL) {
    free(statuses);
    free(block);
    return NULL;
  }
  /* one block holds every status; statuses[0] owns it */
  for (i = 0; i < n; ++i) statuses[i] = &block[i];
  if (n <= 0) statuses[0] = block;
  return statuses;
}

RUNTIME_EXPORT void ASYNCFS_DeleteStatusArray(TF_Status** statuses, int n) {
  int i;
  if (statuses == NULL) return;
  for (i = 0; i < n; ++i) free(statuses[i]->message);
  free(statuses[0]);
  free(statuses);
}

RUNTIME_EXPORT void ASYNCFS_StatusArrayCodes(TF_Status* const* statuses, int n,
                                             int* codes) {
  int i;
  for (i = 0; i < n; ++i) codes[i] = (int)statuses[i]->code;
}

/* ---- composite calls (asyncfs/runtime_core.h) ---------------------------- */

RUNTIME_EXPORT void ASYNCFS_Free(void* ptr) { free(ptr); }

/* Copies result into out (NUL-terminated) and frees it with release;
 * returns its length, -1 when result is NULL or needs more than cap. */
static int give(char* result, void (*release)(void*), char* out, size_t cap) {
  size_t n;
  if (result == NULL) return -1;
  n = strlen(result);
  if (n >= cap) {
    release(result);
    return -1;
  }
  memcpy(out, result, n + 1);
  release(result);
  return (int)n;
}

RUNTIME_EXPORT int ASYNCFS_CleanPath(const char* path, char* out, size_t cap) {
  return give(plugin_clean_path(path), free, out, cap);
}

RUNTIME_EXPORT int ASYNCFS_GenericTranslateName(const char* uri, char* out,
                                                size_t cap) {
  return give(plugin_translate_name(uri, PLUGIN_NAMES_PATH), free, out, cap);
}

RUNTIME_EXPORT int ASYNCFS_TranslateName(const TF_FilesystemOps* ops,
                                         const TF_Filesystem* fs,
                                         void (*plugin_free)(void*),
                                         const char* uri, char* out,
                                         size_t cap) {
  char* translated;
  if (ops->translate_name == NULL) return -2;
  translated = ops->translate_name(fs, uri);
  if (translated == NULL) return -2;
  return give(translated, plugin_free, out, cap);
}

/* The plugin's name for uri (TensorFlow's generic rule when it has no
 * translate_name), allocated with malloc. */
static char* translate(const TF_FilesystemOps* ops, const TF_Filesystem* fs,
                       void (*plugin_free)(void*), const char* uri) {
  char* translated =
      ops->translate_name != NULL ? ops->translate_name(fs, uri) : NULL;
  char* copy;
  if (translated == NULL) return plugin_translate_name(uri, PLUGIN_NAMES_PATH);
  copy = strdup(translated);
  plugin_free(translated);
  return copy;
}

/* Whether a read of up to cap bytes from a file's start, which answered
 * count, reached the file's end (a short count, or TF_OUT_OF_RANGE, which
 * is then cleared): the count is the whole file. */
static int read_whole(TF_Status* status, int64_t count, size_t cap) {
  if (status->code != TF_OUT_OF_RANGE && (status->code != TF_OK || count >= (int64_t)cap))
    return 0;
  AF_SetStatus(status, TF_OK, "");
  return 1;
}

RUNTIME_EXPORT int64_t ASYNCFS_OpenForRead(const TF_FilesystemOps* ops,
                                           const TF_RandomAccessFileOps* file_ops,
                                           const TF_Filesystem* fs,
                                           void (*plugin_free)(void*),
                                           const char* uri,
                                           TF_RandomAccessFile* file,
                                           char* head, size_t cap,
                                           int64_t* size, TF_Status* status) {
  int64_t count;
  char* path;
  if (ops->new_random_access_file == NULL || file_ops->read == NULL) {
    AF_SetStatus(status, TF_UNIMPLEMENTED,
                 "the plugin does not offer new_random_access_file and read");
    return -1;
  }
  path = translate(ops, fs, plugin_free, uri);
  if (path == NULL) {
    AF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  ops->new_random_access_file(fs, path, file, status);
  if (status->code != TF_OK) {
    free(path);
    return -1;
  }
  /* Most files fit the head: one read, and no size asked for. */
  count = file_ops->read(file, 0, cap, head, status);
  if (read_whole(status, count, cap)) {
    *size = count;
  } else if (status->code == TF_OK && ops->get_file_size != NULL) {
    *size = ops->get_file_size(fs, path, status);
  } else if (status->code == TF_OK && ops->stat != NULL) {
    TF_FileStatistics stats;
    ops->stat(fs, path, &stats, status);
    *size = stats.length;
  } else if (status->code == TF_OK) {
    AF_SetStatus(status, TF_UNIMPLEMENTED,
                 "the plugin offers neither get_file_size nor stat");
  }
  free(path);
  if (status->code != TF_OK || count < (int64_t)cap) {
    file_ops->cleanup(file);
    return status->code == TF_OK ? count : -1;
  }
  return count;
}

RUNTIME_EXPORT int64_t ASYNCFS_ReadIfReady(const TF_FilesystemOps* ops,
                                           const TF_RandomAccessFileOps* file_ops,
                                           const TF_Filesystem* fs,
                                           void (*plugin_free)(void*),
                                           const char* uri, char* out,
                                           size_t cap, TF_Status* status) {
  TF_RandomAccessFile file = {NULL};
  int64_t size, count;
  char* path;
  if (ops->new_random_access_file_if_ready == NULL || file_ops->read_if_ready == NULL) {
    AF_SetStatus(status, TF_UNAVAILABLE, "the plugin reads nothing at hand");
    return -1;
  }
  path = translate(ops, fs, plugin_free, uri);
  if (path == NULL) {
    AF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return -1;
  }
  size = ops->new_random_access_file_if_ready(fs, path, &file, status);
  free(path);
  if (status->code != TF_OK) return -1; /* not at hand, or an answer that was */
  if (size < 0 || size >= (int64_t)cap) {
    file_ops->cleanup(&file);
    AF_SetStatus(status, TF_UNAVAILABLE, "bigger than a read at hand");
    return -1;
  }
  /* Asked for all of cap: a file that grew past it since its size was
   * taken reads cap bytes, and is left to the worker too. */
  count = file_ops->read_if_ready(&file, 0, cap, out, status);
  file_ops->cleanup(&file);
  if (read_whole(status, count, cap)) return count;
  if (status->code == TF_OK) AF_SetStatus(status, TF_UNAVAILABLE, "grew past a read at hand");
  return -1;
}

RUNTIME_EXPORT void ASYNCFS_StatIfReady(const TF_FilesystemOps* ops, const TF_Filesystem* fs,
                                        void (*plugin_free)(void*), const char* uri,
                                        TF_FileStatistics* stats, TF_Status* status) {
  char* path;
  if (ops->stat_if_ready == NULL) {
    AF_SetStatus(status, TF_UNAVAILABLE, "the plugin stats nothing at hand");
    return;
  }
  path = translate(ops, fs, plugin_free, uri);
  if (path == NULL) {
    AF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  ops->stat_if_ready(fs, path, stats, status);
  free(path);
}

RUNTIME_EXPORT int64_t ASYNCFS_ReadAndClose(const TF_RandomAccessFileOps* file_ops,
                                            TF_RandomAccessFile* file,
                                            uint64_t offset, size_t n,
                                            char* buffer, TF_Status* status) {
  int64_t count = 0;
  if (n > 0 && file_ops->read != NULL) {
    count = file_ops->read(file, offset, n, buffer, status);
    if (status->code == TF_OUT_OF_RANGE) AF_SetStatus(status, TF_OK, "");
  } else if (n > 0) {
    AF_SetStatus(status, TF_UNIMPLEMENTED, "the plugin does not offer read");
  }
  file_ops->cleanup(file);
  return count;
}

/* A run of the files one read_files call of the plugin is handed: at most
 * RUN_MOST, each into an equal share of what is left, no share smaller
 * than twice the largest file read so far, nor than SHARE_LEAST. */
#define RUN_MOST 256
#define SHARE_LEAST 4096

/* ASYNCFS_ReadFiles through the plugin's read_files (op 41): the files in
 * runs, each run's files then moved down to lie one after another. The
 * first file is a run alone (nothing is known of the sizes yet), and so is
 * a file that did not fit its share: it is read again into all that is
 * left (the files after it in that run, again in the next run). */
static int read_in_runs(const TF_FilesystemOps* ops, const TF_Filesystem* fs,
                        void (*plugin_free)(void*), const char* uris, int n, char* out,
                        size_t cap, int64_t* sizes, TF_Status** statuses) {
  const char* uri = uris;
  char* paths[RUN_MOST];
  char* buffers[RUN_MOST];
  size_t caps[RUN_MOST];
  int64_t got[RUN_MOST];
  size_t at = 0, largest = 0;
  int i = 0, alone = 1;
  while (i < n) {
    size_t room = cap - at, least = largest * 2 > SHARE_LEAST ? largest * 2 : SHARE_LEAST;
    size_t fit = alone ? 1 : room / least;
    int k = fit < 1 ? 1 : fit < RUN_MOST ? (int)fit : RUN_MOST;
    size_t share;
    int j, translated = 0;
    const char* next = uri;
    if (k > n - i) k = n - i;
    share = room / (size_t)k;
    for (j = 0; j < k; ++j, next += strlen(next) + 1) {
      paths[j] = translate(ops, fs, plugin_free, next);
      if (paths[j] == NULL) break;
      buffers[j] = out + at + (size_t)j * share;
      caps[j] = share;
      ++translated;
    }
    if (translated == 0) { /* not even one name: this file fails, the rest go on */
      AF_SetStatus(statuses[i], TF_RESOURCE_EXHAUSTED, "out of memory");
      sizes[i++] = 0;
      uri += strlen(uri) + 1;
      continue;
    }
    k = translated;
    ops->read_files(fs, (const char* const*)paths, k, buffers, caps, got, statuses + i);
    for (j = 0; j < k; ++j) free(paths[j]);
    alone = 0;
    for (j = 0; j < k; ++j, uri += strlen(uri) + 1, ++i) {
      if (statuses[i]->code != TF_OK) {
        sizes[i] = 0;
        continue;
      }
      if (got[j] < 0) {
        AF_SetStatus(statuses[i], TF_DATA_LOSS, "the plugin's read_files answered a negative size");
        sizes[i] = 0;
        continue;
      }
      if ((uint64_t)got[j] > largest) largest = (size_t)got[j];
      if ((uint64_t)got[j] > share) break; /* did not fit its share */
      memmove(out + at, buffers[j], (size_t)got[j]);
      sizes[i] = got[j];
      at += (size_t)got[j];
    }
    if (j == k) continue;
    if (k == 1) { /* all that was left was its share: the caller reads it */
      sizes[i] = -1;
      return i;
    }
    alone = 1;
  }
  return n;
}

RUNTIME_EXPORT int ASYNCFS_ReadFiles(const TF_FilesystemOps* ops,
                                     const TF_RandomAccessFileOps* file_ops,
                                     const TF_Filesystem* fs,
                                     void (*plugin_free)(void*),
                                     const char* uris, int n, char* out,
                                     size_t cap, int64_t* sizes,
                                     TF_Status** statuses,
                                     uint64_t* elapsed_ns) {
  const char* uri = uris;
  uint64_t started = monotonic_nanos();
  size_t at = 0;
  int i;
  if (ops->read_files != NULL) {
    i = read_in_runs(ops, fs, plugin_free, uris, n, out, cap, sizes, statuses);
    *elapsed_ns = monotonic_nanos() - started;
    return i;
  }
  for (i = 0; i < n; ++i, uri += strlen(uri) + 1) {
    TF_RandomAccessFile file = {NULL};
    TF_Status* status = statuses[i];
    size_t room = cap - at;
    int64_t size = 0;
    int64_t count = ASYNCFS_OpenForRead(ops, file_ops, fs, plugin_free, uri,
                                        &file, out + at, room, &size, status);
    sizes[i] = 0; /* stays 0 if the file fails */
    if (status->code != TF_OK) continue;
    if (count >= 0 && count < (int64_t)room) { /* whole, and closed */
      sizes[i] = count;
      at += (size_t)count;
      continue;
    }
    if (count == (int64_t)room && size == count) { /* fits exactly */
      file_ops->cleanup(&file);
      sizes[i] = count;
      at += (size_t)count;
      continue;
    }
    if (count == (int64_t)room) { /* does not fit: the caller reads it */
      file_ops->cleanup(&file);
      sizes[i] = -1;
      break;
    }
    if (count > (int64_t)room) file_ops->cleanup(&file); /* still open */
    AF_SetStatus(status, TF_DATA_LOSS,
                 "the plugin's read answered a count it was not asked for");
  }
  *elapsed_ns = monotonic_nanos() - started;
  return i;
}

RUNTIME_EXPORT char** ASYNCFS_TranslateNames(const TF_FilesystemOps* ops,
                                             const TF_Filesystem* fs,
                                             void (*plugin_free)(void*),
                                             const char* uris, int n) {
  char** paths = calloc(n > 0 ? (size_t)n : 1, sizeof(char*));
  const char* uri = uris;
  int i;
  if (paths == NULL) return NULL;
  for (i = 0; i < n; ++i, uri += strlen(uri) + 1) {
    paths[i] = translate(ops, fs, plugin_free, uri);
    if (paths[i] == NULL) {
      ASYNCFS_FreeNames(paths, i);
      return NULL;
    }
  }
  return paths;
}

RUNTIME_EXPORT void ASYNCFS_FreeNames(char** paths, int n) {
  int i;
  if (paths == NULL) return;
  for (i = 0; i < n; ++i) free(paths[i]);
  free(paths);
}

RUNTIME_EXPORT int ASYNCFS_PathsExist(const TF_FilesystemOps* ops,
                                      const TF_Filesystem* fs,
                                      void (*plugin_free)(void*),
                                      const char* uris, int n,
                                      TF_Status** statuses) {
  char** paths;
  int i;
  if (ops->paths_exist == NULL && ops->path_exists == NULL) return -1;
  paths = ASYNCFS_TranslateNames(ops, fs, plugin_free, uris, n);
  if (paths == NULL) return -1;
  if (ops->paths_exist != NULL) {
    ops->paths_exist(fs, paths, n, statuses);
  } else {
    for (i = 0; i < n; ++i) ops->path_exists(fs, paths[i], statuses[i]);
  }
  ASYNCFS_FreeNames(paths, n);
  return 0;
}

RUNTIME_EXPORT char* ASYNCFS_PackStrings(char** items, int count,
                                         void (*plugin_free)(void*),
                                         size_t* total) {
  size_t size = 0, at = 0;
  char* packed;
  int i;
  for (i = 0; i < count; ++i) size += strlen(items[i]) + 1;
  packed = malloc(size ? size : 1);
  for (i = 0; i < count; ++i) {
    size_t n = strlen(items[i]) + 1;
    if (packed != NULL) memcpy(packed + at, items[i], n);
    at += n;
    plugin_free(items[i]);
  }
  if (items != NULL) plugin_free(items);
  *total = packed != NULL ? size : 0;
  return packed;
}

/* ---- reading an untrusted plugin's answers (asyncfs/runtime_core.h) ------ */

RUNTIME_EXPORT int ASYNCFS_Readable(const void* p, size_t n) {
  char sink[4096];
  uintptr_t at = (uintptr_t)p;
  if (p == NULL) return n == 0;
  while (n > 0) {
    size_t chunk = n < sizeof sink ? n : sizeof sink;
    struct iovec local = {sink, chunk};
    struct iovec remote = {(void*)at, chunk};
    ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    if (got < 0) return errno == EFAULT ? 0 : 1; /* ENOSYS, EPERM: can't tell */
    if (got == 0) return 0;
    at += (size_t)got;
    n -= (size_t)got;
  }
  return 1;
}

RUNTIME_EXPORT int64_t ASYNCFS_SafeStrnlen(const char* s, size_t max) {
  size_t done = 0;
  if (s == NULL) return -1;
  while (done < max) {
    /* never ask past the end of the page: the next one may be unmapped */
    size_t to_page_end = 4096 - ((uintptr_t)(s + done) & 4095u);
    size_t chunk = max - done < to_page_end ? max - done : to_page_end;
    const char* nul;
    if (!ASYNCFS_Readable(s + done, chunk)) return -1;
    nul = memchr(s + done, '\0', chunk);
    if (nul != NULL) return (int64_t)(nul - s);
    done += chunk;
  }
  return (int64_t)max;
}

