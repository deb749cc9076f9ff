/* Fork safety for a plugin's own locks: see plugin_fork.h. */
#define _POSIX_C_SOURCE 200809L
#include "plugin_fork.h"

#include <stdlib.h>

typedef struct guarded {
  void* lock;
  int is_rwlock;
  plugin_lock_level level;
  struct guarded* next;
} guarded;

/* Every guarded lock of this plugin, in level order. */
static pthread_mutex_t guards_lock = PTHREAD_MUTEX_INITIALIZER;
static guarded* guards;

static void before_fork(void) {
  guarded* g;
  pthread_mutex_lock(&guards_lock);
  for (g = guards; g != NULL; g = g->next) {
    if (g->is_rwlock) pthread_rwlock_wrlock(g->lock);
    else pthread_mutex_lock(g->lock);
  }
}

static void after_fork_in_parent(void) {
  guarded* g;
  for (g = guards; g != NULL; g = g->next) {
    if (g->is_rwlock) pthread_rwlock_unlock(g->lock);
    else pthread_mutex_unlock(g->lock);
  }
  pthread_mutex_unlock(&guards_lock);
}

/* The child's one thread holds every lock, under a thread id that is not
 * the one that took them (glibc's rwlock unlock compares it): each starts
 * afresh instead. No other thread exists to be waiting on one. */
static void after_fork_in_child(void) {
  guarded* g;
  for (g = guards; g != NULL; g = g->next) {
    if (g->is_rwlock) pthread_rwlock_init(g->lock, NULL);
    else pthread_mutex_init(g->lock, NULL);
  }
  pthread_mutex_init(&guards_lock, NULL);
}

static void install(void) {
  pthread_atfork(before_fork, after_fork_in_parent, after_fork_in_child);
}

static int guard(void* lock, int is_rwlock, plugin_lock_level level) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  guarded* g = malloc(sizeof *g);
  guarded** at;
  if (g == NULL) return -1;
  pthread_once(&once, install);
  g->lock = lock;
  g->is_rwlock = is_rwlock;
  g->level = level;
  pthread_mutex_lock(&guards_lock);
  for (at = &guards; *at != NULL && (*at)->level <= level; at = &(*at)->next) {
  }
  g->next = *at;
  *at = g;
  pthread_mutex_unlock(&guards_lock);
  return 0;
}

int plugin_fork_guard_mutex(pthread_mutex_t* lock, plugin_lock_level level) {
  return guard(lock, 0, level);
}

int plugin_fork_guard_rwlock(pthread_rwlock_t* lock, plugin_lock_level level) {
  return guard(lock, 1, level);
}

void plugin_fork_unguard(const void* lock) {
  guarded** at;
  pthread_mutex_lock(&guards_lock);
  for (at = &guards; *at != NULL; at = &(*at)->next) {
    if ((*at)->lock == lock) {
      guarded* gone = *at;
      *at = gone->next;
      free(gone);
      break;
    }
  }
  pthread_mutex_unlock(&guards_lock);
}
