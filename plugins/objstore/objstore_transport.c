/* The engine's thread: every request of every filesystem of this plugin
 * runs on one curl multi handle, driven by curl's socket and timer
 * callbacks (curl_multi_socket_action), so curl touches only the
 * transfers whose socket is ready, and a process holds one such thread
 * however many filesystems (Envs, fsspec filesystems with options of their
 * own) it makes.
 *
 * Callers hand exchanges over through a queue and wait on their group;
 * the thread starts at most max_connections transfers of a filesystem at
 * once (the rest wait in that filesystem's own queue, so no timeout of
 * curl's counts the wait), closes every connection once it has been idle
 * for idle_timeout_ms, and then leaves: the next request starts it again.
 * It holds retries on a timer of its own until they are due. Connections
 * are shared only where curl finds one made with the same settings (host,
 * TLS, proxy). A forked child forgets the parent's thread and connections
 * without touching them (closing could send bytes on the parent's
 * connections) and starts afresh on its first request. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "objstore_internal.h"
#include "objstore_watch.h"

/* The runtime's record of the tries of the requests a traced call makes
 * (plugins/runtime/requests.c): weak, since inside TensorFlow there is no
 * runtime, and then nothing is recorded. */
uint64_t ASYNCFS_RequestsCollector(void);
void ASYNCFS_RecordRequest(uint64_t id, const char* method, const char* url, long status, int error,
                           int attempt, int64_t start_ns, int64_t end_ns);
#pragma weak ASYNCFS_RequestsCollector
#pragma weak ASYNCFS_RecordRequest

/* Callers waiting for some exchanges: the last one done wakes them. */
struct objstore_group {
  pthread_mutex_t lock;
  pthread_cond_t done;
  int pending;
};

/* The sockets curl wants watched, beside the thread's wake-up pipe (a
 * set while the thread runs), and when curl wants its timer called. */
typedef struct watched {
  objstore_watch set;
  int64_t timer_due_ms; /* on the objstore_now_ms clock; -1: none */
} watched;

typedef struct fifo {
  objstore_exchange* head;
  objstore_exchange* tail;
} fifo;

/* One filesystem's: its store, its caches, and (the thread's alone) its
 * requests waiting for room under its max_connections. */
struct objstore_engine {
  const objstore_store* store;
  void* store_ctx;
  struct objstore_engine* next_engine; /* every engine, for fork */
  objstore_opens opens; /* the readers' (objstore_reader.c) */
  objstore_cache* cache; /* blocks and stats (objstore_cache.c) */
  int64_t traffic[OBJSTORE_TRAFFIC_COUNT]; /* written by the thread, read by anyone (atomically) */
  /* the thread's alone */
  fifo waiting;
  int in_flight;
  long limit;            /* max_connections of its latest settings */
  int is_ready;          /* in the thread's ready list */
  struct objstore_engine* next_ready;
};

/* The process's one thread and multi handle (per plugin library). */
typedef struct transport {
  fifo queue;            /* handed over, not yet taken by the thread */
  uint64_t close_asked;  /* flush_caches's asks, counted */
  uint64_t close_done;   /* the asks the thread answered */
  int running;           /* the thread exists (in this process) */
  pthread_t thread;
  int wake[2];           /* a byte in wake[1] wakes the thread */
  /* the thread's alone */
  CURLM* multi;          /* NULL while no connection is open */
  long kept;             /* the idle connections its cache keeps: the largest limit it served */
  objstore_try* free_tries;
  objstore_engine* ready; /* engines with requests waiting */
  objstore_exchange* retries; /* sorted by due_ms */
  int in_flight;
  int64_t idle_timeout_ms; /* of the latest settings */
  uint64_t idle_since_ms;
  watched watch;
} transport;

static transport T;
static pthread_mutex_t T_lock = PTHREAD_MUTEX_INITIALIZER; /* guards what callers touch of T: the queue, the flags */
static pthread_cond_t T_closed = PTHREAD_COND_INITIALIZER; /* close_done moved, or the thread left */

static void fifo_push(fifo* q, objstore_exchange* x) {
  x->next = NULL;
  if (q->tail != NULL) q->tail->next = x;
  else q->head = x;
  q->tail = x;
}

static objstore_exchange* fifo_pop(fifo* q) {
  objstore_exchange* x = q->head;
  if (x != NULL) {
    q->head = x->next;
    if (q->head == NULL) q->tail = NULL;
  }
  return x;
}

/* ---- fork --------------------------------------------------------------------------------- */

static pthread_mutex_t engines_lock = PTHREAD_MUTEX_INITIALIZER;
static objstore_engine* engines = NULL;

static void before_fork(void) {
  pthread_mutex_lock(&engines_lock);
  pthread_mutex_lock(&T_lock);
}

static void after_fork_in_parent(void) {
  pthread_mutex_unlock(&T_lock);
  pthread_mutex_unlock(&engines_lock);
}

/* The thread is the parent's; so are its multi handle, its connections
 * and the requests of the parent's other threads: forgotten, not freed. */
static void after_fork_in_child(void) {
  objstore_engine* e;
  if (T.running) {
    close(T.wake[0]);
    close(T.wake[1]);
    objstore_watch_forget(&T.watch.set);
  }
  T.running = 0;
  T.close_asked = T.close_done = 0;
  T.queue.head = T.queue.tail = NULL;
  T.multi = NULL;
  T.free_tries = NULL;
  T.ready = NULL;
  T.retries = NULL;
  T.in_flight = 0;
  T.watch.timer_due_ms = -1;
  pthread_cond_init(&T_closed, NULL);
  for (e = engines; e != NULL; e = e->next_engine) {
    e->waiting.head = e->waiting.tail = NULL;
    e->in_flight = 0;
    e->is_ready = 0;
    e->next_ready = NULL;
  }
  pthread_mutex_unlock(&T_lock);
  pthread_mutex_unlock(&engines_lock);
}

/* Once per process (per plugin library): curl's global state, and the
 * fork handlers. */
static void process_setup(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

/* ---- curl's callbacks ------------------------------------------------------------------- */

static int on_socket(CURL* easy, curl_socket_t s, int what, void* arg, void* socketp) {
  watched* w = arg;
  (void)easy;
  (void)socketp;
  return objstore_watch_set(&w->set, s, what); /* -1: curl fails the transfer */
}

static int on_timer(CURLM* multi, long timeout_ms, void* arg) {
  watched* w = arg;
  (void)multi;
  w->timer_due_ms = timeout_ms < 0 ? -1 : (int64_t)(objstore_now_ms() + (uint64_t)timeout_ms);
  return 0;
}

/* ---- the thread -------------------------------------------------------------------------- */

static int open_multi(void) {
  T.multi = curl_multi_init();
  if (T.multi == NULL) return -1;
  T.watch.timer_due_ms = -1;
  curl_multi_setopt(T.multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(T.multi, CURLMOPT_SOCKETDATA, &T.watch);
  curl_multi_setopt(T.multi, CURLMOPT_TIMERFUNCTION, on_timer);
  curl_multi_setopt(T.multi, CURLMOPT_TIMERDATA, &T.watch);
  return 0;
}

/* Closes every connection: the multi handle goes, and with it its cache. */
static void close_connections(void) {
  if (T.multi == NULL) return;
  curl_multi_cleanup(T.multi); /* may still tell on_socket to forget sockets */
  objstore_watch_clear(&T.watch.set);
  T.multi = NULL;
  T.kept = 0;
  T.watch.timer_due_ms = -1;
}

static void complete(objstore_exchange* x, int outcome) {
  objstore_group* g = x->group;
  x->outcome = outcome;
  x->try_ = NULL;
  pthread_mutex_lock(&g->lock);
  if (--g->pending == 0) pthread_cond_signal(&g->done);
  pthread_mutex_unlock(&g->lock);
  /* x and its group may be gone from here on: their caller woke */
}

static void fail_start(objstore_exchange* x, const char* why) {
  x->transport_error = CURLE_OUT_OF_MEMORY;
  snprintf(x->detail, sizeof x->detail, "%s", why);
  complete(x, -1);
}

/* A try of x on a free curl handle. */
static void start(objstore_exchange* x) {
  objstore_engine* e = x->engine;
  objstore_try* t = T.free_tries;
  if (T.multi == NULL && open_multi() != 0) {
    fail_start(x, "no curl multi handle");
    return;
  }
  /* curl keeps four idle connections per transfer under way: as a burst
   * of requests ends, all but the last few would close, and the next
   * burst would open them again (556 connections for 6000 GETs, 64 in
   * flight, on Ceph); an idle connection goes after idle_timeout_ms */
  if (e->limit > T.kept) {
    T.kept = e->limit;
    curl_multi_setopt(T.multi, CURLMOPT_MAXCONNECTS, T.kept);
  }
  if (t != NULL) {
    T.free_tries = t->next;
  } else {
    t = calloc(1, sizeof *t);
    if (t == NULL || (t->easy = curl_easy_init()) == NULL) {
      free(t);
      fail_start(x, "no curl handle");
      return;
    }
  }
  t->store = e->store;
  x->try_ = t;
  objstore_try_bind(t, x);
  if (curl_multi_add_handle(T.multi, t->easy) != CURLM_OK) {
    t->next = T.free_tries;
    T.free_tries = t;
    fail_start(x, "curl refused a request");
    return;
  }
  e->in_flight++;
  T.in_flight++;
}

/* x waits in its filesystem's queue for room under its max_connections. */
static void wait_for_room(objstore_exchange* x) {
  objstore_engine* e = x->engine;
  fifo_push(&e->waiting, x);
  if (!e->is_ready) {
    e->is_ready = 1;
    e->next_ready = T.ready;
    T.ready = e;
  }
}

static void insert_retry(objstore_exchange* x) {
  objstore_exchange** at = &T.retries;
  while (*at != NULL && (*at)->due_ms <= x->due_ms) at = &(*at)->next;
  x->next = *at;
  *at = x;
}

/* The transfers curl finished: done, failed, or held for a retry. */
/* A try of a traced request, for the runtime: its method, URL, answer and
 * wall-clock span (curl's total time before now). */
static void record_try(const objstore_exchange* x, CURL* easy) {
  struct timespec now;
  curl_off_t took_us = 0;
  int64_t end_ns;
  curl_easy_getinfo(easy, CURLINFO_TOTAL_TIME_T, &took_us);
  clock_gettime(CLOCK_REALTIME, &now);
  end_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
  ASYNCFS_RecordRequest(x->trace, x->method, x->url, x->transport_error == 0 ? x->resp->http : 0,
                        x->transport_error, x->attempts, end_ns - (int64_t)took_us * 1000, end_ns);
}

/* A try of e's ended with outcome (objstore_try_finish's): counted. */
static void count_try(objstore_engine* e, CURL* easy, int outcome) {
  long connects = 0;
  curl_off_t sent = 0, received = 0;
  curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &connects);
  curl_easy_getinfo(easy, CURLINFO_SIZE_UPLOAD_T, &sent);
  curl_easy_getinfo(easy, CURLINFO_SIZE_DOWNLOAD_T, &received);
  __atomic_fetch_add(&e->traffic[OBJSTORE_REQUESTS], 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&e->traffic[OBJSTORE_RETRIES], outcome == 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&e->traffic[OBJSTORE_FAILURES], outcome == -1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&e->traffic[OBJSTORE_CONNECTIONS], (int64_t)connects, __ATOMIC_RELAXED);
  __atomic_fetch_add(&e->traffic[OBJSTORE_BYTES_SENT], (int64_t)sent, __ATOMIC_RELAXED);
  __atomic_fetch_add(&e->traffic[OBJSTORE_BYTES_RECEIVED], (int64_t)received, __ATOMIC_RELAXED);
}

void objstore_engine_traffic(const objstore_engine* engine, int64_t out[OBJSTORE_TRAFFIC_COUNT]) {
  int i;
  for (i = 0; i < OBJSTORE_TRAFFIC_COUNT; ++i) out[i] = __atomic_load_n(&engine->traffic[i], __ATOMIC_RELAXED);
}

static void harvest(void) {
  CURLMsg* msg;
  int left;
  while ((msg = curl_multi_info_read(T.multi, &left)) != NULL) {
    objstore_try* t = NULL;
    objstore_exchange* x;
    CURLcode rc;
    int outcome;
    if (msg->msg != CURLMSG_DONE) continue;
    rc = msg->data.result;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char**)&t);
    x = t->x;
    outcome = objstore_try_finish(x->engine->store_ctx, t, rc);
    count_try(x->engine, t->easy, outcome);
    if (x->trace != 0 && ASYNCFS_RecordRequest != NULL) record_try(x, t->easy);
    curl_multi_remove_handle(T.multi, t->easy);
    t->x = NULL;
    t->next = T.free_tries;
    T.free_tries = t;
    x->engine->in_flight--;
    T.in_flight--;
    T.idle_since_ms = objstore_now_ms();
    if (outcome == 1 && x->authorized_until_ms != 0 && x->due_ms > x->authorized_until_ms)
      complete(x, 2); /* its caller authorizes it afresh */
    else if (outcome == 1)
      insert_retry(x);
    else
      complete(x, outcome); /* done, failed, or redirected */
  }
}

/* Starts what may start: due retries first, then the waiting, while each
 * filesystem has fewer than its max_connections transfers running. */
static void start_ready(uint64_t now) {
  objstore_engine** at;
  while (T.retries != NULL && T.retries->due_ms <= now) {
    objstore_exchange* x = T.retries;
    T.retries = x->next;
    if (x->engine->in_flight < x->engine->limit) start(x);
    else wait_for_room(x);
  }
  for (at = &T.ready; *at != NULL;) {
    objstore_engine* e = *at;
    while (e->waiting.head != NULL && e->in_flight < e->limit) start(fifo_pop(&e->waiting));
    if (e->waiting.head == NULL) { /* off the list */
      *at = e->next_ready;
      e->is_ready = 0;
      e->next_ready = NULL;
    } else {
      at = &e->next_ready;
    }
  }
}

/* Whether a waiting request could start now. */
static int room_for_waiting(void) {
  const objstore_engine* e;
  for (e = T.ready; e != NULL; e = e->next_ready)
    if (e->in_flight < e->limit) return 1;
  return 0;
}

static void run_timer(void) {
  int still;
  if (T.multi != NULL && T.watch.timer_due_ms >= 0 && (uint64_t)T.watch.timer_due_ms <= objstore_now_ms()) {
    T.watch.timer_due_ms = -1;
    curl_multi_socket_action(T.multi, CURL_SOCKET_TIMEOUT, 0, &still);
  }
}

/* How long the thread may sleep: until curl's timer, the first retry, or
 * the moment idle connections are to be closed; -1: until woken. */
static int sleep_ms(uint64_t now) {
  int64_t due = -1;
  if (T.watch.timer_due_ms >= 0) due = T.watch.timer_due_ms;
  if (T.retries != NULL && (due < 0 || (int64_t)T.retries->due_ms < due)) due = (int64_t)T.retries->due_ms;
  if (T.multi != NULL && T.in_flight == 0 && T.retries == NULL) {
    int64_t close_at = (int64_t)(T.idle_since_ms + (uint64_t)T.idle_timeout_ms);
    if (due < 0 || close_at < due) due = close_at;
  }
  if (due < 0) return -1;
  if ((uint64_t)due <= now) return 0;
  return due - (int64_t)now > 60000 ? 60000 : (int)(due - (int64_t)now);
}

/* Sleeps until a socket is ready, a timer is due or a caller wakes it;
 * hands curl the ready sockets. */
static void wait_and_dispatch(void) {
  objstore_ready ready[64];
  int i, n, still;
  n = objstore_watch_wait(&T.watch.set, sleep_ms(objstore_now_ms()), ready, 64);
  for (i = 0; i < n; ++i) {
    if (ready[i].mask == 0) objstore_watch_set(&T.watch.set, ready[i].fd, CURL_POLL_REMOVE);
    else if (T.multi != NULL) curl_multi_socket_action(T.multi, ready[i].fd, ready[i].mask, &still);
  }
}

/* Nothing under way, queued, held for a retry, or connected. */
static int idle(void) { return T.in_flight == 0 && T.ready == NULL && T.retries == NULL; }

/* Leaves when idle with no connection and nothing handed over: the
 * thread goes (the next request starts another). 1 when it left. */
static int leave_if_idle(void) {
  if (!idle() || T.multi != NULL) return 0;
  pthread_mutex_lock(&T_lock);
  if (T.queue.head != NULL || T.close_asked != T.close_done) {
    pthread_mutex_unlock(&T_lock);
    return 0;
  }
  objstore_watch_close(&T.watch.set);
  close(T.wake[0]);
  close(T.wake[1]);
  T.running = 0;
  pthread_detach(pthread_self());
  pthread_cond_broadcast(&T_closed);
  pthread_mutex_unlock(&T_lock);
  return 1;
}

static void* engine_thread(void* arg) {
  (void)arg;
  for (;;) {
    objstore_exchange* x;
    fifo taken;
    uint64_t now;
    uint64_t close_idle;
    pthread_mutex_lock(&T_lock);
    taken = T.queue;
    T.queue.head = T.queue.tail = NULL;
    close_idle = T.close_asked;
    pthread_mutex_unlock(&T_lock);
    for (x = taken.head; x != NULL; x = x->next) { /* each filesystem's latest settings rule */
      x->engine->limit = (long)(x->settings->max_connections > 0 ? x->settings->max_connections : 1);
      T.idle_timeout_ms = x->settings->idle_timeout_ms;
    }
    now = objstore_now_ms();
    /* Idle long enough (by the latest settings), or told to: every
     * connection closes, before the new requests open their own. */
    if (idle() && (close_idle != T.close_done ||
                   (T.multi != NULL && now - T.idle_since_ms >= (uint64_t)T.idle_timeout_ms)))
      close_connections();
    if (close_idle != T.close_done) { /* answered, closed or not (requests were under way) */
      pthread_mutex_lock(&T_lock);
      T.close_done = close_idle;
      pthread_cond_broadcast(&T_closed);
      pthread_mutex_unlock(&T_lock);
    }
    while ((x = fifo_pop(&taken)) != NULL) wait_for_room(x);
    start_ready(now);
    run_timer(); /* a transfer just added starts on curl's timer */
    if (T.multi != NULL) harvest();
    now = objstore_now_ms();
    if (!idle()) T.idle_since_ms = now;
    if (room_for_waiting() || (T.retries != NULL && T.retries->due_ms <= now)) continue;
    if (leave_if_idle()) break;
    wait_and_dispatch();
    run_timer();
  }
  return NULL;
}

/* ---- the callers' side ------------------------------------------------------------------ */

const objstore_store* objstore_engine_store(const objstore_engine* e) { return e->store; }
void* objstore_engine_store_ctx(const objstore_engine* e) { return e->store_ctx; }
objstore_opens* objstore_engine_opens(objstore_engine* e) { return &e->opens; }
objstore_cache* objstore_engine_cache(objstore_engine* e) { return e->cache; }

objstore_engine* objstore_engine_new(const objstore_store* store, void* store_ctx) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  objstore_engine* e = calloc(1, sizeof *e);
  if (e == NULL) return NULL;
  e->cache = objstore_cache_new();
  if (e->cache == NULL) {
    free(e);
    return NULL;
  }
  pthread_once(&once, process_setup);
  e->store = store;
  e->store_ctx = store_ctx;
  e->limit = 1;
  pthread_mutex_lock(&engines_lock);
  e->next_engine = engines;
  engines = e;
  pthread_mutex_unlock(&engines_lock);
  return e;
}

static void wake(void) {
  char byte = 1;
  ssize_t rc;
  do rc = write(T.wake[1], &byte, 1);
  while (rc < 0 && errno == EINTR); /* EAGAIN: the pipe is full, the thread will wake */
}

/* Starts the thread if this process has none. Called with T_lock held;
 * 0, or -1 when it cannot. */
static int ensure_thread(void) {
  if (T.running) return 0;
  T.watch.timer_due_ms = -1;
  if (pipe(T.wake) != 0) return -1;
  fcntl(T.wake[0], F_SETFL, O_NONBLOCK);
  fcntl(T.wake[1], F_SETFL, O_NONBLOCK);
  fcntl(T.wake[0], F_SETFD, FD_CLOEXEC);
  fcntl(T.wake[1], F_SETFD, FD_CLOEXEC);
  T.idle_since_ms = objstore_now_ms();
  if (objstore_watch_open(&T.watch.set, T.wake[0]) != 0) {
    close(T.wake[0]);
    close(T.wake[1]);
    return -1;
  }
  if (pthread_create(&T.thread, NULL, engine_thread, NULL) != 0) {
    objstore_watch_close(&T.watch.set);
    close(T.wake[0]);
    close(T.wake[1]);
    return -1;
  }
  T.running = 1;
  return 0;
}

/* Every call of the filesystem has returned: none of its requests is
 * with the thread, which shares its connections with the others. */
void objstore_engine_free(objstore_engine* e) {
  objstore_engine** at;
  if (e == NULL) return;
  pthread_mutex_lock(&engines_lock);
  for (at = &engines; *at != NULL; at = &(*at)->next_engine) {
    if (*at == e) {
      *at = e->next_engine;
      break;
    }
  }
  pthread_mutex_unlock(&engines_lock);
  objstore_cache_free(e->cache);
  free(e);
}

/* flush_caches: the filesystem's caches, and the idle connections (all
 * of the thread's: closed when this returns, unless requests of other
 * filesystems are under way). */
void objstore_engine_close_idle(objstore_engine* e) {
  objstore_cache_clear(e->cache);
  pthread_mutex_lock(&T_lock);
  if (T.running) {
    uint64_t ask = ++T.close_asked;
    wake();
    while (T.running && T.close_done < ask) pthread_cond_wait(&T_closed, &T_lock);
  }
  pthread_mutex_unlock(&T_lock);
}

static void group_init(objstore_group* g, int pending) {
  pthread_mutex_init(&g->lock, NULL);
  pthread_cond_init(&g->done, NULL);
  g->pending = pending;
}

static void group_destroy(objstore_group* g) {
  pthread_cond_destroy(&g->done);
  pthread_mutex_destroy(&g->lock);
}

/* Hands the n exchanges to the thread, each to tell g when it is done (or
 * is to be authorized again, or redirected); g counts them. 0, or -1 when
 * the thread cannot start (nothing handed over). */
static int hand_over(objstore_engine* e, objstore_exchange* const* xs, int n, objstore_group* g) {
  int i, was_empty;
  uint64_t trace = ASYNCFS_RequestsCollector != NULL ? ASYNCFS_RequestsCollector() : 0; /* (the caller's thread) */
  pthread_mutex_lock(&T_lock);
  if (ensure_thread() != 0) {
    pthread_mutex_unlock(&T_lock);
    return -1;
  }
  was_empty = T.queue.head == NULL;
  pthread_mutex_lock(&g->lock);
  g->pending += n;
  pthread_mutex_unlock(&g->lock);
  for (i = 0; i < n; ++i) {
    xs[i]->group = g;
    xs[i]->engine = e;
    xs[i]->trace = trace;
    fifo_push(&T.queue, xs[i]);
  }
  if (was_empty) wake();
  pthread_mutex_unlock(&T_lock);
  return 0;
}

/* Until every exchange handed over with g is done. */
static void wait_for(objstore_group* g) {
  pthread_mutex_lock(&g->lock);
  while (g->pending > 0) pthread_cond_wait(&g->done, &g->lock);
  pthread_mutex_unlock(&g->lock);
}

static unsigned jitter_seed(const void* x) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (unsigned)ts.tv_nsec ^ (unsigned)(uintptr_t)x;
}

/* Authorizes x for its next try: 0, or -1 with status set. */
static int authorize(objstore_engine* e, objstore_exchange* x, TF_Status* status) {
  if (x->raw) return 0;
  return e->store->authorize(e->store_ctx, x, status);
}

static void unauthorize(objstore_engine* e, objstore_exchange* x) {
  if (x->raw) return;
  if (e->store->unauthorize != NULL) e->store->unauthorize(e->store_ctx, x);
  x->url = NULL;
  x->headers = NULL;
}

/* The first try of x, authorized: 0, or -1 with status set. */
static int prepare(objstore_engine* e, const objstore_settings* settings, objstore_exchange* x,
                   TF_Status* status) {
  x->settings = settings;
  x->started_ms = objstore_now_ms();
  x->seed = jitter_seed(x);
  return authorize(e, x, status);
}

/* After x came back: 1 when it is to go again (authorized afresh: a retry
 * past its authorization's life, or a redirect), else 0 with status set to
 * its outcome. */
static int settle(objstore_engine* e, objstore_exchange* x, TF_Status* status) {
  int follow = 0;
  if (x->outcome == 0)
    TF_SetStatus(status, TF_OK, "");
  else if (x->outcome == -1)
    objstore_set_failure(e->store, e->store_ctx, x, status);
  else if (x->outcome == 3)
    follow = objstore_follow(x, status) == 0;
  unauthorize(e, x);
  if ((x->outcome == 2 || follow) && authorize(e, x, status) == 0) return 1;
  if (x->outcome == 2 && TF_GetCode(status) == TF_OK)
    TF_SetStatus(status, TF_INTERNAL, "a request could not be authorized again");
  return 0;
}

static void no_thread(TF_Status* status) {
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "the object-store engine's thread could not start");
}

int objstore_run_many(objstore_engine* e, const objstore_settings* settings, int n,
                      objstore_exchange* xs, TF_Status** statuses) {
  objstore_exchange** batch;
  int i, count, failed = 0;
  if (n <= 0) return 0;
  batch = malloc((size_t)n * sizeof *batch);
  if (batch == NULL) {
    for (i = 0; i < n; ++i) plugin_set_oom(statuses[i]);
    return -1;
  }
  for (count = i = 0; i < n; ++i) {
    if (prepare(e, settings, &xs[i], statuses[i]) != 0) failed = 1;
    else batch[count++] = &xs[i];
  }
  while (count > 0) {
    objstore_group g;
    int again = 0;
    group_init(&g, 0);
    if (hand_over(e, batch, count, &g) != 0) {
      for (i = 0; i < count; ++i) {
        unauthorize(e, batch[i]);
        no_thread(statuses[batch[i] - xs]);
      }
      group_destroy(&g);
      failed = 1;
      break;
    }
    wait_for(&g);
    group_destroy(&g);
    for (i = 0; i < count; ++i) {
      if (settle(e, batch[i], statuses[batch[i] - xs]) == 1) batch[again++] = batch[i];
      else failed |= batch[i]->outcome != 0;
    }
    count = again;
  }
  free(batch);
  return failed ? -1 : 0;
}

/* ---- without waiting ------------------------------------------------------------------- */

int objstore_start(objstore_engine* e, const objstore_settings* settings, objstore_exchange* x,
                   TF_Status* status) {
  x->own_group = malloc(sizeof *x->own_group);
  if (x->own_group == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  group_init(x->own_group, 0);
  if (prepare(e, settings, x, status) != 0) goto fail;
  if (hand_over(e, &x, 1, x->own_group) != 0) {
    unauthorize(e, x);
    no_thread(status);
    goto fail;
  }
  return 0;
fail:
  group_destroy(x->own_group);
  free(x->own_group);
  x->own_group = NULL;
  return -1;
}

int objstore_finish(objstore_engine* e, objstore_exchange* x, TF_Status* status) {
  int rc;
  if (x->own_group == NULL) return -1; /* objstore_start failed: status said why */
  for (;;) {
    wait_for(x->own_group);
    if (settle(e, x, status) == 0) break;
    if (hand_over(e, &x, 1, x->own_group) != 0) {
      unauthorize(e, x);
      no_thread(status);
      break;
    }
  }
  rc = x->outcome == 0 && TF_GetCode(status) == TF_OK ? 0 : -1;
  group_destroy(x->own_group);
  free(x->own_group);
  x->own_group = NULL;
  return rc;
}

int objstore_run(objstore_engine* e, const objstore_settings* settings, objstore_exchange* x,
                 TF_Status* status) {
  return objstore_run_many(e, settings, 1, x, &status);
}

int objstore_fetch(objstore_engine* e, const objstore_settings* settings, objstore_exchange* x,
                   TF_Status* status) {
  x->raw = 1;
  objstore_run(e, settings, x, status);
  if (x->transport_error == CURLE_OK && x->resp->http > 0 && x->resp->http < 500 &&
      x->resp->http != 408 && x->resp->http != 429) {
    TF_SetStatus(status, TF_OK, "");
    return 0;
  }
  return -1;
}
