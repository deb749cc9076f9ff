/* The engine's thread: every request of a filesystem runs on its one curl
 * multi handle, driven by curl's socket and timer callbacks
 * (curl_multi_socket_action), so curl touches only the transfers whose
 * socket is ready.
 *
 * Callers hand exchanges over through a queue and wait on their group;
 * the thread starts at most max_connections transfers at once (the rest
 * wait in its own queue, so no timeout of curl's counts the wait), keeps
 * at most max_connections connections open, closes them all once it has
 * been idle for idle_timeout_ms, and holds retries on a timer of its own
 * until they are due. A forked child forgets the parent's thread and
 * connections without touching them (closing could send bytes on the
 * parent's connections) and starts afresh on its first request. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "objstore_internal.h"

/* Callers waiting for some exchanges: the last one done wakes them. */
struct objstore_group {
  pthread_mutex_t lock;
  pthread_cond_t done;
  int pending;
};

/* The sockets curl wants watched, after the engine's wake-up pipe at
 * fds[0], and when curl wants its timer called. */
typedef struct watched {
  struct pollfd* fds;
  int count;
  int cap;
  int64_t timer_due_ms; /* on the objstore_now_ms clock; -1: none */
} watched;

typedef struct fifo {
  objstore_exchange* head;
  objstore_exchange* tail;
} fifo;

struct objstore_engine {
  const objstore_store* store;
  void* store_ctx;
  pthread_mutex_t lock; /* guards what callers touch: the queue, the flags */
  fifo queue;           /* handed over, not yet taken by the thread */
  uint64_t close_asked; /* flush_caches's asks, counted */
  uint64_t close_done;  /* the asks the thread answered */
  pthread_cond_t closed; /* close_done moved */
  int stop;
  int running;          /* the thread exists (in this process) */
  pthread_t thread;
  int wake[2];          /* a byte in wake[1] wakes the thread */
  struct objstore_engine* next_engine; /* every engine, for fork */
  objstore_opens opens; /* the readers' (objstore_reader.c) */
  objstore_cache* cache; /* blocks and stats (objstore_cache.c) */
  /* the thread's alone */
  CURLM* multi;         /* NULL while no connection is open */
  objstore_try* free_tries;
  fifo waiting;         /* taken, waiting for room under max_connections */
  objstore_exchange* retries; /* sorted by due_ms */
  int in_flight;
  long limit;           /* max_connections of the latest settings */
  long multi_limit;     /* the one the multi handle was told */
  int64_t idle_timeout_ms;
  uint64_t idle_since_ms;
  watched watch;
};

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
  objstore_engine* e;
  pthread_mutex_lock(&engines_lock);
  for (e = engines; e != NULL; e = e->next_engine) pthread_mutex_lock(&e->lock);
}

static void after_fork_in_parent(void) {
  objstore_engine* e;
  for (e = engines; e != NULL; e = e->next_engine) pthread_mutex_unlock(&e->lock);
  pthread_mutex_unlock(&engines_lock);
}

/* The thread is the parent's; so are its multi handle, its connections
 * and the requests of the parent's other threads: forgotten, not freed. */
static void after_fork_in_child(void) {
  objstore_engine* e;
  for (e = engines; e != NULL; e = e->next_engine) {
    if (e->running) {
      close(e->wake[0]);
      close(e->wake[1]);
    }
    e->running = 0;
    e->stop = 0;
    e->close_asked = e->close_done = 0;
    e->queue.head = e->queue.tail = NULL;
    e->multi = NULL;
    e->free_tries = NULL;
    e->waiting.head = e->waiting.tail = NULL;
    e->retries = NULL;
    e->in_flight = 0;
    memset(&e->watch, 0, sizeof e->watch);
    pthread_mutex_unlock(&e->lock);
  }
  pthread_mutex_unlock(&engines_lock);
}

static void register_fork_handlers(void) {
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

/* ---- curl's callbacks ------------------------------------------------------------------- */

static int on_socket(CURL* easy, curl_socket_t s, int what, void* arg, void* socketp) {
  watched* w = arg;
  int i;
  (void)easy;
  (void)socketp;
  for (i = 1; i < w->count && w->fds[i].fd != s; ++i) {
  }
  if (what == CURL_POLL_REMOVE) {
    if (i < w->count) w->fds[i] = w->fds[--w->count];
    return 0;
  }
  if (i == w->count) {
    if (w->count == w->cap) {
      int cap = 2 * w->cap;
      struct pollfd* fds = realloc(w->fds, (size_t)cap * sizeof *fds);
      if (fds == NULL) return -1; /* curl fails the transfer */
      w->fds = fds;
      w->cap = cap;
    }
    w->fds[w->count++].fd = s;
  }
  w->fds[i].events = (short)(((what & CURL_POLL_IN) ? POLLIN : 0) | ((what & CURL_POLL_OUT) ? POLLOUT : 0));
  w->fds[i].revents = 0;
  return 0;
}

static int on_timer(CURLM* multi, long timeout_ms, void* arg) {
  watched* w = arg;
  (void)multi;
  w->timer_due_ms = timeout_ms < 0 ? -1 : (int64_t)(objstore_now_ms() + (uint64_t)timeout_ms);
  return 0;
}

/* ---- the thread -------------------------------------------------------------------------- */

static int open_multi(objstore_engine* e) {
  e->multi = curl_multi_init();
  if (e->multi == NULL) return -1;
  e->watch.timer_due_ms = -1;
  curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
  curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, &e->watch);
  curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, on_timer);
  curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, &e->watch);
  curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, e->limit);
  curl_multi_setopt(e->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, e->limit);
  e->multi_limit = e->limit;
  return 0;
}

/* Closes every connection: the multi handle goes, and with it its cache. */
static void close_connections(objstore_engine* e) {
  if (e->multi == NULL) return;
  curl_multi_cleanup(e->multi); /* may still tell on_socket to forget sockets */
  e->multi = NULL;
  e->watch.count = 1;
  e->watch.timer_due_ms = -1;
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
static void start(objstore_engine* e, objstore_exchange* x) {
  objstore_try* t = e->free_tries;
  if (e->multi == NULL && open_multi(e) != 0) {
    fail_start(x, "no curl multi handle");
    return;
  }
  if (t != NULL) {
    e->free_tries = t->next;
  } else {
    t = calloc(1, sizeof *t);
    if (t == NULL || (t->easy = curl_easy_init()) == NULL) {
      free(t);
      fail_start(x, "no curl handle");
      return;
    }
    t->store = e->store;
  }
  x->try_ = t;
  objstore_try_bind(t, x);
  if (curl_multi_add_handle(e->multi, t->easy) != CURLM_OK) {
    t->next = e->free_tries;
    e->free_tries = t;
    fail_start(x, "curl refused a request");
    return;
  }
  e->in_flight++;
}

static void insert_retry(objstore_engine* e, objstore_exchange* x) {
  objstore_exchange** at = &e->retries;
  while (*at != NULL && (*at)->due_ms <= x->due_ms) at = &(*at)->next;
  x->next = *at;
  *at = x;
}

/* The transfers curl finished: done, failed, or held for a retry. */
static void harvest(objstore_engine* e) {
  CURLMsg* msg;
  int left;
  while ((msg = curl_multi_info_read(e->multi, &left)) != NULL) {
    objstore_try* t = NULL;
    objstore_exchange* x;
    CURLcode rc;
    int outcome;
    if (msg->msg != CURLMSG_DONE) continue;
    rc = msg->data.result;
    curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char**)&t);
    x = t->x;
    outcome = objstore_try_finish(e->store_ctx, t, rc);
    curl_multi_remove_handle(e->multi, t->easy);
    t->x = NULL;
    t->next = e->free_tries;
    e->free_tries = t;
    e->in_flight--;
    e->idle_since_ms = objstore_now_ms();
    if (outcome == 1 && x->authorized_until_ms != 0 && x->due_ms > x->authorized_until_ms)
      complete(x, 2); /* its caller authorizes it afresh */
    else if (outcome == 1)
      insert_retry(e, x);
    else
      complete(x, outcome); /* done, failed, or redirected */
  }
}

/* Starts what may start: due retries first, then the waiting, while
 * fewer than max_connections transfers run. */
static void start_ready(objstore_engine* e, uint64_t now) {
  while (e->retries != NULL && e->retries->due_ms <= now && e->in_flight < e->limit) {
    objstore_exchange* x = e->retries;
    e->retries = x->next;
    start(e, x);
  }
  while (e->waiting.head != NULL && e->in_flight < e->limit) start(e, fifo_pop(&e->waiting));
}

static void run_timer(objstore_engine* e) {
  int still;
  if (e->multi != NULL && e->watch.timer_due_ms >= 0 &&
      (uint64_t)e->watch.timer_due_ms <= objstore_now_ms()) {
    e->watch.timer_due_ms = -1;
    curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &still);
  }
}

/* How long the thread may sleep: until curl's timer, the first retry, or
 * the moment idle connections are to be closed; -1: until woken. */
static int sleep_ms(const objstore_engine* e, uint64_t now) {
  int64_t due = -1;
  if (e->watch.timer_due_ms >= 0) due = e->watch.timer_due_ms;
  if (e->retries != NULL && (due < 0 || (int64_t)e->retries->due_ms < due))
    due = (int64_t)e->retries->due_ms;
  if (e->multi != NULL && e->in_flight == 0 && e->retries == NULL) {
    int64_t close_at = (int64_t)(e->idle_since_ms + (uint64_t)e->idle_timeout_ms);
    if (due < 0 || close_at < due) due = close_at;
  }
  if (due < 0) return -1;
  if ((uint64_t)due <= now) return 0;
  return due - (int64_t)now > 60000 ? 60000 : (int)(due - (int64_t)now);
}

/* Sleeps until a socket is ready, a timer is due or a caller wakes it;
 * hands curl the ready sockets. */
static void wait_and_dispatch(objstore_engine* e) {
  watched* w = &e->watch;
  struct pollfd got[64];
  int i, k, ready, still;
  ready = poll(w->fds, (nfds_t)w->count, sleep_ms(e, objstore_now_ms()));
  if (ready <= 0) return;
  if (w->fds[0].revents != 0) {
    char drain[64];
    while (read(e->wake[0], drain, sizeof drain) > 0) {
    }
  }
  /* Copied first: curl's socket callback changes the set. The ready ones
   * beyond 64 are still ready at the next poll. */
  for (i = 1, k = 0; i < w->count && k < 64; ++i)
    if (w->fds[i].revents != 0) got[k++] = w->fds[i];
  for (i = 0; i < k; ++i) {
    short r = got[i].revents;
    int mask;
    if (r & POLLNVAL) { /* closed without curl saying so */
      on_socket(NULL, got[i].fd, CURL_POLL_REMOVE, w, NULL);
      continue;
    }
    mask = ((r & (POLLIN | POLLHUP)) ? CURL_CSELECT_IN : 0) | ((r & POLLOUT) ? CURL_CSELECT_OUT : 0) |
           ((r & POLLERR) ? CURL_CSELECT_ERR : 0);
    if (e->multi != NULL) curl_multi_socket_action(e->multi, got[i].fd, mask, &still);
  }
}

static void* engine_thread(void* arg) {
  objstore_engine* e = arg;
  for (;;) {
    objstore_exchange* x;
    fifo taken;
    uint64_t now;
    uint64_t close_idle;
    pthread_mutex_lock(&e->lock);
    if (e->stop) {
      pthread_mutex_unlock(&e->lock);
      break;
    }
    taken = e->queue;
    e->queue.head = e->queue.tail = NULL;
    close_idle = e->close_asked;
    pthread_mutex_unlock(&e->lock);
    if (taken.tail != NULL) { /* the latest settings rule */
      const objstore_settings* s = taken.tail->settings;
      e->limit = (long)(s->max_connections > 0 ? s->max_connections : 1);
      e->idle_timeout_ms = s->idle_timeout_ms;
    }
    now = objstore_now_ms();
    if (e->multi != NULL && e->limit != e->multi_limit) {
      curl_multi_setopt(e->multi, CURLMOPT_MAXCONNECTS, e->limit);
      curl_multi_setopt(e->multi, CURLMOPT_MAX_TOTAL_CONNECTIONS, e->limit);
      e->multi_limit = e->limit;
    }
    /* Idle long enough (by the latest settings), or told to: every
     * connection closes, before the new requests open their own. */
    if (e->in_flight == 0 && e->waiting.head == NULL && e->retries == NULL &&
        (close_idle != e->close_done ||
         (e->multi != NULL && now - e->idle_since_ms >= (uint64_t)e->idle_timeout_ms)))
      close_connections(e);
    if (close_idle != e->close_done) { /* answered, closed or not (requests were under way) */
      pthread_mutex_lock(&e->lock);
      e->close_done = close_idle;
      pthread_cond_broadcast(&e->closed);
      pthread_mutex_unlock(&e->lock);
    }
    while ((x = fifo_pop(&taken)) != NULL) fifo_push(&e->waiting, x);
    start_ready(e, now);
    run_timer(e); /* a transfer just added starts on curl's timer */
    if (e->multi != NULL) harvest(e);
    now = objstore_now_ms();
    if (e->in_flight > 0 || e->waiting.head != NULL || e->retries != NULL) e->idle_since_ms = now;
    if ((e->waiting.head != NULL && e->in_flight < e->limit) ||
        (e->retries != NULL && e->retries->due_ms <= now))
      continue;
    wait_and_dispatch(e);
    run_timer(e);
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
  e->watch.fds = malloc(16 * sizeof *e->watch.fds);
  e->cache = objstore_cache_new();
  if (e->watch.fds == NULL || e->cache == NULL) {
    free(e->watch.fds);
    objstore_cache_free(e->cache);
    free(e);
    return NULL;
  }
  pthread_once(&once, register_fork_handlers);
  e->watch.cap = 16;
  e->watch.count = 1;
  e->watch.timer_due_ms = -1;
  e->store = store;
  e->store_ctx = store_ctx;
  e->limit = 1;
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->closed, NULL);
  pthread_mutex_lock(&engines_lock);
  e->next_engine = engines;
  engines = e;
  pthread_mutex_unlock(&engines_lock);
  return e;
}

static void wake(objstore_engine* e) {
  char byte = 1;
  ssize_t rc;
  do rc = write(e->wake[1], &byte, 1);
  while (rc < 0 && errno == EINTR); /* EAGAIN: the pipe is full, the thread will wake */
}

/* Starts the thread if this process has none. Called with the lock held;
 * 0, or -1 when it cannot. */
static int ensure_thread(objstore_engine* e) {
  if (e->running) return 0;
  if (e->watch.fds == NULL) { /* a forked child's */
    e->watch.fds = malloc(16 * sizeof *e->watch.fds);
    if (e->watch.fds == NULL) return -1;
    e->watch.cap = 16;
    e->watch.count = 1;
    e->watch.timer_due_ms = -1;
  }
  if (pipe(e->wake) != 0) return -1;
  fcntl(e->wake[0], F_SETFL, O_NONBLOCK);
  fcntl(e->wake[1], F_SETFL, O_NONBLOCK);
  fcntl(e->wake[0], F_SETFD, FD_CLOEXEC);
  fcntl(e->wake[1], F_SETFD, FD_CLOEXEC);
  e->watch.fds[0].fd = e->wake[0];
  e->watch.fds[0].events = POLLIN;
  if (pthread_create(&e->thread, NULL, engine_thread, e) != 0) {
    close(e->wake[0]);
    close(e->wake[1]);
    return -1;
  }
  e->running = 1;
  return 0;
}

void objstore_engine_free(objstore_engine* e) {
  objstore_engine** at;
  objstore_try* t;
  if (e == NULL) return;
  pthread_mutex_lock(&engines_lock);
  for (at = &engines; *at != NULL; at = &(*at)->next_engine) {
    if (*at == e) {
      *at = e->next_engine;
      break;
    }
  }
  pthread_mutex_unlock(&engines_lock);
  pthread_mutex_lock(&e->lock);
  e->stop = 1;
  if (e->running) wake(e);
  pthread_mutex_unlock(&e->lock);
  if (e->running) {
    pthread_join(e->thread, NULL);
    close(e->wake[0]);
    close(e->wake[1]);
  }
  close_connections(e);
  while ((t = e->free_tries) != NULL) {
    e->free_tries = t->next;
    curl_easy_cleanup(t->easy);
    free(t);
  }
  free(e->watch.fds);
  objstore_cache_free(e->cache);
  pthread_cond_destroy(&e->closed);
  pthread_mutex_destroy(&e->lock);
  free(e);
}

void objstore_engine_close_idle(objstore_engine* e) {
  objstore_cache_clear(e->cache); /* flush_caches: the caches too */
  pthread_mutex_lock(&e->lock);
  if (e->running) { /* the thread closes them; waited for, so that they are closed on return */
    uint64_t ask = ++e->close_asked;
    wake(e);
    while (e->running && e->close_done < ask) pthread_cond_wait(&e->closed, &e->lock);
  }
  pthread_mutex_unlock(&e->lock);
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
  pthread_mutex_lock(&e->lock);
  if (ensure_thread(e) != 0) {
    pthread_mutex_unlock(&e->lock);
    return -1;
  }
  was_empty = e->queue.head == NULL;
  pthread_mutex_lock(&g->lock);
  g->pending += n;
  pthread_mutex_unlock(&g->lock);
  for (i = 0; i < n; ++i) {
    xs[i]->group = g;
    fifo_push(&e->queue, xs[i]);
  }
  if (was_empty) wake(e);
  pthread_mutex_unlock(&e->lock);
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
  x->authorization = NULL;
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
    for (i = 0; i < n; ++i) TF_SetStatus(statuses[i], TF_RESOURCE_EXHAUSTED, "out of memory");
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
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
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
