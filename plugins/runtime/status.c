/*
 * The status runtime plugins link: TF_Status and the few helpers plugins
 * import (time, threads, temporary names; logging is log.c's).
 *
 * Each TF_X a plugin imports is exported here as AF_X, a name TensorFlow
 * never uses: the loader opens this library with RTLD_GLOBAL before any
 * plugin and loads each plugin from a private copy whose TF_X imports are
 * renamed AF_X (asyncfs/_plugins/copies.py). So a plugin links against
 * nothing but libc, binds to this runtime even beside TensorFlow, and
 * TensorFlow's own libraries never bind to it (docs/plugin-abi.md, "Beside
 * TensorFlow").
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
