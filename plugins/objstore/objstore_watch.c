/* The sockets the engine's thread sleeps on (see objstore_watch.h): an
 * epoll set on Linux, poll()'s array elsewhere. */
#define _POSIX_C_SOURCE 200809L

#include "objstore_watch.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(OBJSTORE_WATCH_EPOLL)
#include <sys/epoll.h>
#endif

static void drain(int fd) {
  char bytes[64];
  while (read(fd, bytes, sizeof bytes) > 0) {
  }
}

#if defined(OBJSTORE_WATCH_EPOLL)

int objstore_watch_open(objstore_watch* w, int wake) {
  struct epoll_event ev = {0};
  w->wake = wake;
  w->epoll = epoll_create1(EPOLL_CLOEXEC);
  if (w->epoll < 0) return -1;
  ev.events = EPOLLIN;
  ev.data.fd = wake;
  if (epoll_ctl(w->epoll, EPOLL_CTL_ADD, wake, &ev) != 0) {
    objstore_watch_close(w);
    return -1;
  }
  return 0;
}

void objstore_watch_close(objstore_watch* w) {
  if (w->epoll >= 0) close(w->epoll);
  w->epoll = -1;
}

void objstore_watch_forget(objstore_watch* w) {
  objstore_watch_close(w); /* the child's descriptor only: the parent's set is untouched */
}

void objstore_watch_clear(objstore_watch* w) { (void)w; /* a closed socket leaves the set by itself */ }

int objstore_watch_set(objstore_watch* w, int s, int what) {
  struct epoll_event ev = {0};
  if (what == CURL_POLL_REMOVE) {
    epoll_ctl(w->epoll, EPOLL_CTL_DEL, s, &ev); /* a socket closed first has left the set already */
    return 0;
  }
  ev.events = ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u);
  ev.data.fd = s;
  if (epoll_ctl(w->epoll, EPOLL_CTL_MOD, s, &ev) == 0) return 0;
  return errno == ENOENT && epoll_ctl(w->epoll, EPOLL_CTL_ADD, s, &ev) == 0 ? 0 : -1;
}

int objstore_watch_wait(objstore_watch* w, int timeout_ms, objstore_ready* ready, int cap) {
  struct epoll_event events[64];
  int i, n, k = 0;
  n = epoll_wait(w->epoll, events, cap < 64 ? cap : 64, timeout_ms);
  for (i = 0; i < n; ++i) {
    uint32_t e = events[i].events;
    if (events[i].data.fd == w->wake) {
      drain(w->wake);
      continue;
    }
    ready[k].fd = events[i].data.fd;
    ready[k++].mask = ((e & (EPOLLIN | EPOLLHUP)) ? CURL_CSELECT_IN : 0) | ((e & EPOLLOUT) ? CURL_CSELECT_OUT : 0) |
                      ((e & EPOLLERR) ? CURL_CSELECT_ERR : 0);
  }
  return k;
}

#else /* poll() */

int objstore_watch_open(objstore_watch* w, int wake) {
  w->wake = wake;
  if (w->fds == NULL) { /* the first set, or a forked child's */
    w->fds = malloc(16 * sizeof *w->fds);
    if (w->fds == NULL) return -1;
    w->cap = 16;
  }
  w->fds[0].fd = wake;
  w->fds[0].events = POLLIN;
  w->count = 1;
  return 0;
}

void objstore_watch_close(objstore_watch* w) { w->count = 0; /* the array is kept for the next set */ }

void objstore_watch_forget(objstore_watch* w) {
  w->fds = NULL; /* the parent's allocation: left as it is */
  w->count = w->cap = 0;
}

void objstore_watch_clear(objstore_watch* w) { w->count = 1; }

int objstore_watch_set(objstore_watch* w, int s, int what) {
  int i;
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
      if (fds == NULL) return -1;
      w->fds = fds;
      w->cap = cap;
    }
    w->fds[w->count++].fd = s;
  }
  w->fds[i].events = (short)(((what & CURL_POLL_IN) ? POLLIN : 0) | ((what & CURL_POLL_OUT) ? POLLOUT : 0));
  w->fds[i].revents = 0;
  return 0;
}

int objstore_watch_wait(objstore_watch* w, int timeout_ms, objstore_ready* ready, int cap) {
  int i, k = 0;
  if (poll(w->fds, (nfds_t)w->count, timeout_ms) <= 0) return 0;
  if (w->fds[0].revents != 0) {
    drain(w->wake);
  }
  /* copied out: curl's socket callback changes the array */
  for (i = 1; i < w->count && k < cap; ++i) {
    short r = w->fds[i].revents;
    if (r == 0) continue;
    ready[k].fd = w->fds[i].fd;
    ready[k++].mask = (r & POLLNVAL) ? 0 /* closed without curl saying so */
                      : ((r & (POLLIN | POLLHUP)) ? CURL_CSELECT_IN : 0) | ((r & POLLOUT) ? CURL_CSELECT_OUT : 0) |
                            ((r & POLLERR) ? CURL_CSELECT_ERR : 0);
  }
  return k;
}

#endif
