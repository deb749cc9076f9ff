/*
 * The log lines plugins write (TF_Log, TF_VLog, imported as AF_Log and
 * AF_VLog). Until the core asks for them they go to stderr, filtered by
 * ASYNCFS_LOG_LEVEL (a TF_LogLevel, default TF_WARNING) and ASYNCFS_VLOG
 * (default 0). Once the core calls ASYNCFS_LogToQueue, they go into a
 * bounded queue instead, which a thread of the core drains into Python's
 * logging (ASYNCFS_NextLogLine, asyncfs/_native/logs.py): a plugin's
 * thread (the object-store engine's, say) only formats and queues, never
 * waits for Python. A full queue drops lines and says how many.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "asyncfs/filesystem_interface.h"
#include "runtime_core.h"
#include "runtime_export.h"

#define QUEUE 256
#define LINE 1024

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ready = PTHREAD_COND_INITIALIZER;
static int queued_on;                 /* ASYNCFS_LogToQueue's */
static int least_level = TF_WARNING;  /* below: not even formatted */
static int most_verbose;              /* TF_VLog up to this */
static struct {
  int level; /* a TF_LogLevel, or -1 for TF_VLog */
  char text[LINE];
} lines[QUEUE];
static int head, count;
static unsigned long dropped;
static pthread_once_t forks_once = PTHREAD_ONCE_INIT;

static int env_int(const char* name, int fallback) {
  const char* v = getenv(name);
  return (v != NULL && v[0] != '\0') ? atoi(v) : fallback;
}

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_in_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_in_child(void) { /* the drainer is the parent's: the child's core starts its own */
  pthread_mutex_init(&lock, NULL);
  pthread_cond_init(&ready, NULL);
  head = count = 0;
  dropped = 0;
}
static void install_fork_handlers(void) { pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); }

RUNTIME_EXPORT void ASYNCFS_LogToQueue(int on, int least, int verbose) {
  pthread_once(&forks_once, install_fork_handlers);
  pthread_mutex_lock(&lock);
  queued_on = on;
  least_level = least;
  most_verbose = verbose;
  pthread_cond_broadcast(&ready);
  pthread_mutex_unlock(&lock);
}

RUNTIME_EXPORT int ASYNCFS_NextLogLine(char* out, size_t cap, int* level, int timeout_ms) {
  struct timespec until;
  int got = 0;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += timeout_ms / 1000;
  until.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
  if (until.tv_nsec >= 1000000000L) {
    until.tv_sec += 1;
    until.tv_nsec -= 1000000000L;
  }
  pthread_mutex_lock(&lock);
  while (count == 0 && dropped == 0 && queued_on) {
    if (pthread_cond_timedwait(&ready, &lock, &until) != 0) break;
  }
  if (dropped > 0) {
    snprintf(out, cap, "asyncfs: %lu log lines dropped (the queue was full)", dropped);
    *level = TF_WARNING;
    dropped = 0;
    got = 1;
  } else if (count > 0) {
    snprintf(out, cap, "%s", lines[head].text);
    *level = lines[head].level;
    head = (head + 1) % QUEUE;
    --count;
    got = 1;
  }
  pthread_mutex_unlock(&lock);
  return got;
}

static void emit(int level, const char* tag, const char* fmt, va_list ap) {
  char text[LINE];
  vsnprintf(text, sizeof text, fmt, ap);
  pthread_mutex_lock(&lock);
  if (queued_on) {
    if (count == QUEUE) {
      ++dropped;
    } else {
      int at = (head + count++) % QUEUE;
      lines[at].level = level;
      memcpy(lines[at].text, text, sizeof text);
    }
    pthread_cond_signal(&ready);
    pthread_mutex_unlock(&lock);
    return;
  }
  pthread_mutex_unlock(&lock);
  fprintf(stderr, "asyncfs plugin %s: %s\n", tag, text);
}

/* Whether a line of level is wanted: the queue's threshold, else the
 * environment's (read once). */
static int wanted(int level) {
  static int from_env = -1;
  int on, least;
  pthread_mutex_lock(&lock);
  on = queued_on;
  least = least_level;
  pthread_mutex_unlock(&lock);
  if (on) return level >= least;
  if (from_env < 0) from_env = env_int("ASYNCFS_LOG_LEVEL", TF_WARNING);
  return level >= from_env;
}

RUNTIME_EXPORT void AF_Log(TF_LogLevel level, const char* fmt, ...) {
  static const char* const tags[] = {"info", "warning", "error", "fatal"};
  va_list ap;
  if (level == TF_FATAL || wanted((int)level)) {
    va_start(ap, fmt);
    emit((int)level, tags[(level >= TF_INFO && level <= TF_FATAL) ? level : TF_ERROR], fmt, ap);
    va_end(ap);
  }
  if (level == TF_FATAL) abort();
}

RUNTIME_EXPORT void AF_VLog(int level, const char* fmt, ...) {
  va_list ap;
  int on, verbose;
  pthread_mutex_lock(&lock);
  on = queued_on;
  verbose = most_verbose;
  pthread_mutex_unlock(&lock);
  if (level > (on ? verbose : env_int("ASYNCFS_VLOG", 0))) return;
  va_start(ap, fmt);
  emit(-1, "vlog", fmt, ap);
  va_end(ap);
}
