/*
 * The asyncfs status runtime: TF_Status and the few helpers plugins import.
 *
 * Each TF_X a plugin imports is exported here as AF_X, a name TensorFlow
 * never uses: the loader opens this library with RTLD_GLOBAL before any
 * plugin and loads each plugin from a private copy whose TF_X imports are
 * renamed AF_X (asyncfs/_plugin_copy.py). So a plugin links against nothing
 * but libc, binds to this runtime even beside TensorFlow, and TensorFlow's
 * own libraries never bind to it (docs/plugin-abi.md, "Beside TensorFlow").
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "asyncfs/runtime_core.h"
#include "at_hand.h"
#include "plugin_paths.h"

#define RUNTIME_EXPORT __attribute__((visibility("default")))

RUNTIME_EXPORT TF_Status* AF_NewStatus(void) {
  return calloc(1, sizeof(TF_Status));
}

RUNTIME_EXPORT void AF_DeleteStatus(TF_Status* s) {
  if (s == NULL) return;
  free(s->message);
  free(s);
}

RUNTIME_EXPORT void AF_SetStatus(TF_Status* s, TF_Code code, const char* msg) {
  char* copy = NULL;
  if (code != TF_OK && msg != NULL && msg[0] != '\0') copy = strdup(msg);
  free(s->message);
  s->code = code;
  s->message = copy;
}

RUNTIME_EXPORT TF_Code AF_GetCode(const TF_Status* s) { return s->code; }

RUNTIME_EXPORT const char* AF_Message(const TF_Status* s) {
  return s->message != NULL ? s->message : "";
}

/* The mapping TensorFlow's platform/error.cc uses. */
static TF_Code code_from_errno(int e) {
  switch (e) {
    case 0:
      return TF_OK;
    case EINVAL: case ENAMETOOLONG: case E2BIG: case EDESTADDRREQ: case EDOM:
    case EFAULT: case EILSEQ: case ENOPROTOOPT: case ENOSTR: case ENOTSOCK:
    case ENOTTY: case EPROTOTYPE: case ESPIPE:
      return TF_INVALID_ARGUMENT;
    case ETIMEDOUT: case ETIME:
      return TF_DEADLINE_EXCEEDED;
    case ENODEV: case ENOENT: case ENXIO: case ESRCH:
      return TF_NOT_FOUND;
    case EEXIST: case EADDRNOTAVAIL: case EALREADY:
      return TF_ALREADY_EXISTS;
    case EPERM: case EACCES: case EROFS:
      return TF_PERMISSION_DENIED;
    case ENOTEMPTY: case EISDIR: case ENOTDIR: case EADDRINUSE: case EBADF:
    case EBUSY: case ECHILD: case EISCONN: case ENOTBLK: case ENOTCONN:
    case EPIPE: case ESHUTDOWN: case ETXTBSY:
      return TF_FAILED_PRECONDITION;
    case ENOSPC: case EDQUOT: case EMFILE: case EMLINK: case ENFILE:
    case ENOBUFS: case ENODATA: case ENOMEM: case ENOSR: case EUSERS:
      return TF_RESOURCE_EXHAUSTED;
    case EFBIG: case EOVERFLOW: case ERANGE:
      return TF_OUT_OF_RANGE;
    case ENOSYS: case ENOTSUP: case EAFNOSUPPORT: case EPFNOSUPPORT:
    case EPROTONOSUPPORT: case ESOCKTNOSUPPORT: case EXDEV:
      return TF_UNIMPLEMENTED;
    case EAGAIN: case ECONNREFUSED: case ECONNABORTED: case ECONNRESET:
    case EINTR: case EHOSTDOWN: case EHOSTUNREACH: case ENETDOWN:
    case ENETRESET: case ENETUNREACH: case ENOLCK: case ENOLINK:
#if ENONET != ENOLINK
    case ENONET:
#endif
      return TF_UNAVAILABLE;
    case EDEADLK: case ESTALE:
      return TF_ABORTED;
    case ECANCELED:
      return TF_CANCELLED;
    default:
      return TF_UNKNOWN;
  }
}

RUNTIME_EXPORT void AF_SetStatusFromIOError(TF_Status* s, int error_code,
                                            const char* context) {
  char buf[1024];
  char err[256];
  const char* text = strerror_r(error_code, err, sizeof err);
  if (context != NULL && context[0] != '\0')
    snprintf(buf, sizeof buf, "%s; %s", context, text);
  else
    snprintf(buf, sizeof buf, "%s", text);
  AF_SetStatus(s, code_from_errno(error_code), buf);
}

/* ---- environment helpers ---------------------------------------------- */

static uint64_t now_nanos(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t monotonic_nanos(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

RUNTIME_EXPORT uint64_t AF_NowNanos(void) { return now_nanos(); }
RUNTIME_EXPORT uint64_t AF_NowMicros(void) { return now_nanos() / 1000u; }
RUNTIME_EXPORT uint64_t AF_NowSeconds(void) { return now_nanos() / 1000000000u; }

RUNTIME_EXPORT void AF_DefaultThreadOptions(TF_ThreadOptions* options) {
  options->stack_size = 0;
  options->guard_size = 0;
  options->numa_node = -1;
}

struct TF_Thread {
  pthread_t thread;
  void (*work)(void*);
  void* param;
};

static void* thread_main(void* arg) {
  TF_Thread* t = arg;
  t->work(t->param);
  return NULL;
}

RUNTIME_EXPORT TF_Thread* AF_StartThread(const TF_ThreadOptions* options,
                                         const char* thread_name,
                                         void (*work_func)(void*),
                                         void* param) {
  pthread_attr_t attr;
  TF_Thread* t = malloc(sizeof *t);
  if (t == NULL) return NULL;
  t->work = work_func;
  t->param = param;
  pthread_attr_init(&attr);
  if (options != NULL && options->stack_size != 0)
    pthread_attr_setstacksize(&attr, options->stack_size);
  if (options != NULL && options->guard_size != 0)
    pthread_attr_setguardsize(&attr, options->guard_size);
  if (pthread_create(&t->thread, &attr, thread_main, t) != 0) {
    pthread_attr_destroy(&attr);
    free(t);
    return NULL;
  }
  pthread_attr_destroy(&attr);
  if (thread_name != NULL) {
    char name[16];
    snprintf(name, sizeof name, "%s", thread_name);
    pthread_setname_np(t->thread, name);
  }
  return t;
}

RUNTIME_EXPORT void AF_JoinThread(TF_Thread* thread) {
  if (thread == NULL) return;
  pthread_join(thread->thread, NULL);
  free(thread);
}

RUNTIME_EXPORT char* AF_GetTempFileName(const char* extension) {
  static unsigned long counter;
  const char* dir = getenv("TMPDIR");
  char buf[4096];
  unsigned long n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
  if (dir == NULL || dir[0] == '\0') dir = "/tmp";
  snprintf(buf, sizeof buf, "%s/tmp_file_asyncfs_%ld_%llu_%lu%s%s", dir,
           (long)getpid(), (unsigned long long)now_nanos(), n,
           (extension != NULL && extension[0] != '\0') ? "." : "",
           extension != NULL ? extension : "");
  return strdup(buf);
}

/* Log lines go to stderr. ASYNCFS_LOG_LEVEL (TF_LogLevel, default
 * TF_WARNING) filters TF_Log; ASYNCFS_VLOG (default 0) enables TF_VLog up to
 * that verbosity. */
static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return (v != NULL && v[0] != '\0') ? atoi(v) : fallback;
}

static void vlog_line(const char* tag, const char* fmt, va_list ap) {
  char buf[2048];
  vsnprintf(buf, sizeof buf, fmt, ap);
  fprintf(stderr, "asyncfs plugin %s: %s\n", tag, buf);
}

RUNTIME_EXPORT void AF_Log(TF_LogLevel level, const char* fmt, ...) {
  static const char* const tags[] = {"info", "warning", "error", "fatal"};
  va_list ap;
  if ((int)level < env_int("ASYNCFS_LOG_LEVEL", TF_WARNING)) return;
  va_start(ap, fmt);
  vlog_line(tags[(level >= TF_INFO && level <= TF_FATAL) ? level : TF_ERROR],
            fmt, ap);
  va_end(ap);
  if (level == TF_FATAL) abort();
}

RUNTIME_EXPORT void AF_VLog(int level, const char* fmt, ...) {
  va_list ap;
  if (level > env_int("ASYNCFS_VLOG", 0)) return;
  va_start(ap, fmt);
  vlog_line("vlog", fmt, ap);
  va_end(ap);
}

/* ---- core-only batch helpers (asyncfs/runtime_core.h) ------------------- */

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

RUNTIME_EXPORT int ASYNCFS_PathsExist(const TF_FilesystemOps* ops,
                                      const TF_Filesystem* fs,
                                      void (*plugin_free)(void*),
                                      const char* uris, int n,
                                      TF_Status** statuses) {
  char** paths;
  const char* uri = uris;
  int i;
  if (ops->paths_exist == NULL && ops->path_exists == NULL) return -1;
  paths = calloc(n > 0 ? (size_t)n : 1, sizeof(char*));
  if (paths == NULL) return -1;
  for (i = 0; i < n; ++i, uri += strlen(uri) + 1) {
    paths[i] = translate(ops, fs, plugin_free, uri);
    if (paths[i] == NULL) {
      while (i > 0) free(paths[--i]);
      free(paths);
      return -1;
    }
  }
  if (ops->paths_exist != NULL) {
    ops->paths_exist(fs, paths, n, statuses);
  } else {
    for (i = 0; i < n; ++i) ops->path_exists(fs, paths[i], statuses[i]);
  }
  for (i = 0; i < n; ++i) free(paths[i]);
  free(paths);
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

/* ---- TFRecord framing (asyncfs/runtime_core.h) --------------------------- */

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;
static int crc32c_in_hardware;

static void crc32c_init(void) {
  uint32_t i, j, k;
  for (i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (j = 0; j < 8; ++j) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    crc32c_table[0][i] = crc;
  }
  for (i = 0; i < 256; ++i)
    for (k = 1; k < 8; ++k)
      crc32c_table[k][i] = (crc32c_table[k - 1][i] >> 8) ^
                           crc32c_table[0][crc32c_table[k - 1][i] & 0xFFu];
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  crc32c_in_hardware = __builtin_cpu_supports("sse4.2");
#endif
  /* the tables every CPU has, chosen by hand (the tests run both paths) */
  if (getenv("ASYNCFS_CRC32C_TABLES") != NULL) crc32c_in_hardware = 0;
}

static uint32_t load32(const unsigned char* p) {
  return (uint32_t)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24);
}

/* CRC-32C of n bytes, slicing by 8 (any CPU). */
static uint32_t crc32c_tables(const unsigned char* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (; n >= 8; p += 8, n -= 8) {
    uint32_t lo = crc ^ load32(p);
    uint32_t hi = load32(p + 4);
    crc = crc32c_table[7][lo & 0xFFu] ^ crc32c_table[6][(lo >> 8) & 0xFFu] ^
          crc32c_table[5][(lo >> 16) & 0xFFu] ^ crc32c_table[4][lo >> 24] ^
          crc32c_table[3][hi & 0xFFu] ^ crc32c_table[2][(hi >> 8) & 0xFFu] ^
          crc32c_table[1][(hi >> 16) & 0xFFu] ^ crc32c_table[0][hi >> 24];
  }
  for (; n > 0; ++p, --n) crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p) & 0xFFu];
  return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
/* CRC-32C of n bytes with SSE4.2's crc32 instruction (what google-crc32c
 * uses on this CPU). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(const unsigned char* p, size_t n) {
  uint64_t crc = 0xFFFFFFFFu;
  uint32_t tail;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    memcpy(&word, p, 8);
    crc = _mm_crc32_u64(crc, word);
  }
  tail = (uint32_t)crc;
  for (; n > 0; ++p, --n) tail = _mm_crc32_u8(tail, *p);
  return ~tail;
}
#endif

static uint32_t crc32c(const unsigned char* p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (crc32c_in_hardware) return crc32c_sse42(p, n);
#endif
  return crc32c_tables(p, n);
}

static uint32_t masked_crc32c(const unsigned char* p, size_t n) {
  uint32_t crc = crc32c(p, n);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

RUNTIME_EXPORT int64_t ASYNCFS_FindRecordHeader(const char* buf, size_t n) {
  const unsigned char* p = (const unsigned char*)buf;
  size_t i;
  pthread_once(&crc32c_once, crc32c_init);
  for (i = 0; i + 12 <= n; ++i)
    if (masked_crc32c(p + i, 8) == load32(p + i + 8)) return (int64_t)i;
  return -1;
}

RUNTIME_EXPORT int64_t ASYNCFS_ParseRecords(const char* buf, size_t n, int verify, int64_t* spans,
                                            int64_t max, int64_t* stop) {
  const unsigned char* p = (const unsigned char*)buf;
  size_t at = 0;
  int64_t count = 0;
  pthread_once(&crc32c_once, crc32c_init);
  stop[1] = ASYNCFS_RECORDS_MORE;
  stop[2] = 0;
  while (count < max && n - at >= 12) {
    uint64_t length = (uint64_t)load32(p + at) | (uint64_t)load32(p + at + 4) << 32;
    if (verify && masked_crc32c(p + at, 8) != load32(p + at + 8)) {
      stop[1] = ASYNCFS_RECORDS_BAD_LENGTH;
      break;
    }
    if (length > n - at - 12 || n - at - 12 - length < 4) break; /* not whole here yet */
    if (verify && masked_crc32c(p + at + 12, (size_t)length) != load32(p + at + 12 + length)) {
      stop[1] = ASYNCFS_RECORDS_BAD_DATA;
      stop[2] = (int64_t)(16 + length);
      break;
    }
    spans[2 * count] = (int64_t)(at + 12);
    spans[2 * count + 1] = (int64_t)length;
    ++count;
    at += 16 + (size_t)length;
  }
  stop[0] = (int64_t)at;
  return count;
}
