/*
 * The sockets the engine's thread sleeps on (objstore_transport.c): its
 * wake-up pipe and the sockets curl's socket callback names, and the
 * ready ones handed back after a wait.
 *
 * On Linux the set is an epoll instance, whose wait costs what is ready,
 * not what is open: poll() over 64 kept-alive connections walked all 64 on
 * every wake-up, a fifth of the thread's CPU per small GET on Ceph.
 * Elsewhere it is poll()'s array.
 */
#ifndef ASYNCFS_OBJSTORE_WATCH_H_
#define ASYNCFS_OBJSTORE_WATCH_H_

#include <stdint.h>

#if defined(__linux__)
#define OBJSTORE_WATCH_EPOLL 1
#else
#include <poll.h>
#endif

typedef struct objstore_watch {
#if defined(OBJSTORE_WATCH_EPOLL)
  int epoll; /* -1: none */
#else
  struct pollfd* fds; /* fds[0]: the wake-up pipe */
  int count;
  int cap;
#endif
  int wake; /* the wake-up pipe's reading end */
} objstore_watch;

/* What a wait found ready on a socket: CURL_CSELECT_IN, _OUT, _ERR bits;
 * 0 for a socket to forget (closed without curl saying so). */
typedef struct objstore_ready {
  int fd;
  int mask;
} objstore_ready;

/* An empty set watching wake (readable: a caller wants the thread); 0, or
 * -1 when the system refuses one. */
int objstore_watch_open(objstore_watch* w, int wake);
/* Frees the set (the sockets in it stay open: they are curl's). */
void objstore_watch_close(objstore_watch* w);
/* A forked child's copy of its parent's set: let go of without touching
 * what the parent shares (an epoll instance is one for both). */
void objstore_watch_forget(objstore_watch* w);
/* Every socket forgotten, the wake-up pipe kept: the multi handle that
 * named them is gone (an epoll set lost them as they closed). */
void objstore_watch_clear(objstore_watch* w);
/* curl's socket callback's work: s watched for what (CURL_POLL_IN, _OUT,
 * _INOUT), or no longer (CURL_POLL_REMOVE). 0, or -1 (curl fails the
 * transfer). */
int objstore_watch_set(objstore_watch* w, int s, int what);
/* Sleeps at most timeout_ms (-1: until something is ready or a caller
 * wakes it: the wake-up pipe is drained); fills ready with up to cap
 * sockets and returns their count (the rest are ready again at the next
 * wait). */
int objstore_watch_wait(objstore_watch* w, int timeout_ms, objstore_ready* ready, int cap);

#endif /* ASYNCFS_OBJSTORE_WATCH_H_ */
