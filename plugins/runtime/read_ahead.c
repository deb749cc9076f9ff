/*
 * Reads ahead on native threads (asyncfs/runtime_core.h, "Read-ahead").
 *
 * A stream's reader asks for its next blocks before it needs them. Handed to
 * a Python worker, such a read starts, and ends, only when that worker gets
 * the interpreter's lock, which a reader busy splitting lines or checking
 * records holds for milliseconds at a time: the read then starts when the
 * reader stops to wait for it. The threads here need no interpreter: the
 * plugin's read runs while the reader computes, and the reader takes the
 * bytes once they are in.
 *
 * No one ever waits on these threads alone: a read that no thread has taken
 * yet is made by whoever waits for it (ASYNCFS_FinishRead), so a thread stuck
 * in a plugin that hangs holds up its own read and nothing queued behind it,
 * and a forked child, which has none of these threads, still gets every read.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asyncfs/filesystem_interface.h"
#include "runtime_core.h"
#include "runtime_export.h"

/* At most this many threads; more reads than that wait in the queue (two
 * keep a reader's blocks coming while another thread's read is slow). */
#define READERS 2
/* A thread with nothing to do for this long ends. */
#define IDLE_SECONDS 5
/* Buffers kept for the next reads (a fresh large malloc is a fresh mapping,
 * whose pages fault in one by one as the read fills them), and the largest
 * one kept. */
#define SPARES 4
#define SPARE_MAX ((size_t)16 << 20)

enum { QUEUED, RUNNING, DONE };

struct ASYNCFS_ReadAhead {
  ASYNCFS_ReadAhead* prev; /* every read not freed yet, in start order */
  ASYNCFS_ReadAhead* next;
  ASYNCFS_ReadFunction read;
  const TF_RandomAccessFile* file;
  uint64_t offset;
  size_t n;
  char* buffer;
  size_t capacity;
  int64_t count;
  TF_Status status;
  int state;   /* under lock; set to DONE with release order (ASYNCFS_ReadIsDone) */
  int dropped; /* its owner let go while it ran: the thread frees it */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t queued = PTHREAD_COND_INITIALIZER;   /* a read was queued */
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER; /* a read is done */
static ASYNCFS_ReadAhead* first;
static ASYNCFS_ReadAhead* last;
static int live; /* reads not freed yet (read without the lock by ASYNCFS_WaitReadsOf) */
static int threads;
static int idle;
static pthread_once_t fork_handlers = PTHREAD_ONCE_INIT;
static struct {
  char* buffer;
  size_t capacity;
} spares[SPARES];

/* ---- buffers (under lock) ------------------------------------------------ */

static char* take_buffer(size_t n, size_t* capacity) {
  int i;
  for (i = 0; i < SPARES; ++i) {
    if (spares[i].buffer != NULL && spares[i].capacity >= n && spares[i].capacity / 2 <= n) {
      char* buffer = spares[i].buffer;
      *capacity = spares[i].capacity;
      spares[i].buffer = NULL;
      return buffer;
    }
  }
  *capacity = n;
  return malloc(n > 0 ? n : 1);
}

static void give_buffer(char* buffer, size_t capacity) {
  int i;
  if (capacity <= SPARE_MAX) {
    for (i = 0; i < SPARES; ++i) {
      if (spares[i].buffer == NULL) {
        spares[i].buffer = buffer;
        spares[i].capacity = capacity;
        return;
      }
    }
  }
  free(buffer);
}

/* ---- the list (under lock) ----------------------------------------------- */

static void unlink_and_free(ASYNCFS_ReadAhead* r) {
  if (r->prev != NULL) r->prev->next = r->next;
  else first = r->next;
  if (r->next != NULL) r->next->prev = r->prev;
  else last = r->prev;
  __atomic_store_n(&live, live - 1, __ATOMIC_RELEASE);
  give_buffer(r->buffer, r->capacity);
  free(r->status.message);
  free(r);
}

static ASYNCFS_ReadAhead* next_queued(void) {
  ASYNCFS_ReadAhead* r;
  for (r = first; r != NULL; r = r->next)
    if (r->state == QUEUED) return r;
  return NULL;
}

/* Runs r, which the caller marked RUNNING, without the lock; returns with it. */
static void run(ASYNCFS_ReadAhead* r) {
  pthread_mutex_unlock(&lock);
  r->count = r->read(r->file, r->offset, r->n, r->buffer, &r->status);
  pthread_mutex_lock(&lock);
  __atomic_store_n(&r->state, DONE, __ATOMIC_RELEASE);
  pthread_cond_broadcast(&finished);
  if (r->dropped) unlink_and_free(r);
}

/* ---- threads and fork ---------------------------------------------------- */

static void* reader_main(void* arg) {
  (void)arg;
  pthread_mutex_lock(&lock);
  for (;;) {
    ASYNCFS_ReadAhead* r = next_queued();
    if (r != NULL) {
      r->state = RUNNING;
      run(r);
      continue;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += IDLE_SECONDS;
    ++idle;
    int waited = pthread_cond_timedwait(&queued, &lock, &until);
    --idle;
    if (waited == ETIMEDOUT && next_queued() == NULL) break;
  }
  --threads;
  pthread_mutex_unlock(&lock);
  return NULL;
}

static void before_fork(void) { pthread_mutex_lock(&lock); }

static void after_fork_in_parent(void) { pthread_mutex_unlock(&lock); }

/* The child has none of the threads: the reads they were making are queued
 * again (its waiters make them, into the child's own copies of the buffers;
 * the descriptors are the child's too), those nobody wants are freed. */
static void after_fork_in_child(void) {
  ASYNCFS_ReadAhead* r = first;
  pthread_mutex_unlock(&lock);
  pthread_cond_init(&queued, NULL);
  pthread_cond_init(&finished, NULL);
  threads = idle = 0;
  while (r != NULL) {
    ASYNCFS_ReadAhead* next = r->next;
    if (r->state == RUNNING) {
      if (r->dropped) unlink_and_free(r);
      else r->state = QUEUED;
    }
    r = next;
  }
}

static void install_fork_handlers(void) {
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

/* Under lock: wake an idle thread, or start one if there is room. */
static void wake_a_reader(void) {
  if (idle > 0) {
    pthread_cond_signal(&queued);
    return;
  }
  if (threads >= READERS) return;
  pthread_attr_t attr;
  pthread_t thread;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&thread, &attr, reader_main, NULL) == 0) {
    ++threads;
    pthread_setname_np(thread, "asyncfs-ahead");
  }
  pthread_attr_destroy(&attr);
}

/* ---- the API ------------------------------------------------------------- */

RUNTIME_EXPORT ASYNCFS_ReadAhead* ASYNCFS_StartRead(ASYNCFS_ReadFunction read, const TF_RandomAccessFile* file,
                                                   uint64_t offset, size_t n) {
  ASYNCFS_ReadAhead* r;
  if (read == NULL) return NULL;
  pthread_once(&fork_handlers, install_fork_handlers);
  r = calloc(1, sizeof *r);
  if (r == NULL) return NULL;
  r->read = read;
  r->file = file;
  r->offset = offset;
  r->n = n;
  pthread_mutex_lock(&lock);
  r->buffer = take_buffer(n, &r->capacity);
  if (r->buffer == NULL) {
    pthread_mutex_unlock(&lock);
    free(r);
    return NULL;
  }
  r->state = QUEUED;
  r->prev = last;
  if (last != NULL) last->next = r;
  else first = r;
  last = r;
  __atomic_store_n(&live, live + 1, __ATOMIC_RELEASE);
  wake_a_reader();
  pthread_mutex_unlock(&lock);
  return r;
}

RUNTIME_EXPORT int ASYNCFS_ReadIsDone(const ASYNCFS_ReadAhead* r) {
  return __atomic_load_n(&r->state, __ATOMIC_ACQUIRE) == DONE;
}

RUNTIME_EXPORT int64_t ASYNCFS_FinishRead(ASYNCFS_ReadAhead* r, TF_Status* status, const char** data) {
  pthread_mutex_lock(&lock);
  if (r->state == QUEUED) {
    r->state = RUNNING;
    run(r);
  }
  while (r->state != DONE) pthread_cond_wait(&finished, &lock);
  pthread_mutex_unlock(&lock);
  AF_SetStatus(status, r->status.code, r->status.message);
  *data = r->buffer;
  return r->count;
}

RUNTIME_EXPORT void ASYNCFS_DropRead(ASYNCFS_ReadAhead* r) {
  if (r == NULL) return;
  pthread_mutex_lock(&lock);
  if (r->state == RUNNING) r->dropped = 1;
  else unlink_and_free(r);
  pthread_mutex_unlock(&lock);
}

RUNTIME_EXPORT void ASYNCFS_WaitReadsOf(const TF_RandomAccessFile* file) {
  if (__atomic_load_n(&live, __ATOMIC_ACQUIRE) == 0) return; /* the usual case: no read ahead anywhere */
  pthread_mutex_lock(&lock);
  for (;;) {
    ASYNCFS_ReadAhead* r;
    int running = 0;
    for (r = first; r != NULL; r = r->next) {
      if (r->file != file) continue;
      if (r->state == QUEUED) { /* it never runs: its owner learns why, if it asks */
        r->count = -1;
        AF_SetStatus(&r->status, TF_FAILED_PRECONDITION, "the file was closed before this read-ahead ran");
        __atomic_store_n(&r->state, DONE, __ATOMIC_RELEASE);
      } else if (r->state == RUNNING) {
        running = 1;
      }
    }
    if (!running) break;
    pthread_cond_wait(&finished, &lock);
  }
  pthread_mutex_unlock(&lock);
}
