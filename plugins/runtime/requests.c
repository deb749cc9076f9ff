/*
 * The HTTP requests of a plugin call, for the core's traces: the core says
 * that the calling thread's requests are wanted (ASYNCFS_CollectRequests,
 * an id per call), the object-store engine asks for that id as it takes a
 * request (on the calling thread: ASYNCFS_RequestsCollector) and records
 * each try as it ends (on its own thread: ASYNCFS_RecordRequest), and the
 * core takes them when the call returns (ASYNCFS_TakeRequests) to make a
 * span of each. Tries wait in a ring of 1024, the oldest dropped first: a
 * try nobody takes costs nothing but its slot.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime_core.h"
#include "runtime_export.h"

#define KEPT 1024

static __thread uint64_t collecting; /* the calling thread's id; 0: none */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  uint64_t id; /* 0: taken, or never used */
  ASYNCFS_Request request;
} ring[KEPT];
static int next_slot; /* where the next try goes (the oldest is overwritten) */
static pthread_once_t forks_once = PTHREAD_ONCE_INIT;

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_in_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_in_child(void) { /* the parent's tries are the parent's */
  pthread_mutex_init(&lock, NULL);
  memset(ring, 0, sizeof ring);
  next_slot = 0;
}
static void install_fork_handlers(void) { pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child); }

RUNTIME_EXPORT uint64_t ASYNCFS_CollectRequests(uint64_t id) {
  uint64_t before = collecting;
  pthread_once(&forks_once, install_fork_handlers);
  collecting = id;
  return before;
}

RUNTIME_EXPORT uint64_t ASYNCFS_RequestsCollector(void) { return collecting; }

RUNTIME_EXPORT void ASYNCFS_RecordRequest(uint64_t id, const char* method, const char* url, long status,
                                          int error, int attempt, int64_t start_ns, int64_t end_ns) {
  ASYNCFS_Request* r;
  size_t path;
  if (id == 0) return;
  path = url != NULL ? strcspn(url, "?#") : 0;
  pthread_mutex_lock(&lock);
  ring[next_slot].id = id;
  r = &ring[next_slot].request;
  next_slot = (next_slot + 1) % KEPT;
  snprintf(r->method, sizeof r->method, "%s", method != NULL ? method : "");
  snprintf(r->url, sizeof r->url, "%.*s", (int)(path < sizeof r->url ? path : sizeof r->url - 1),
           url != NULL ? url : "");
  r->status = status;
  r->error = error;
  r->attempt = attempt;
  r->start_ns = start_ns;
  r->end_ns = end_ns;
  pthread_mutex_unlock(&lock);
}

RUNTIME_EXPORT int ASYNCFS_TakeRequests(uint64_t id, ASYNCFS_Request* out, int cap) {
  int i, n = 0;
  if (id == 0) return 0;
  pthread_mutex_lock(&lock);
  for (i = 0; i < KEPT && n < cap; ++i) {
    int slot = (next_slot + i) % KEPT; /* oldest first */
    if (ring[slot].id != id) continue;
    out[n++] = ring[slot].request;
    ring[slot].id = 0;
  }
  pthread_mutex_unlock(&lock);
  return n;
}
