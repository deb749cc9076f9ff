/*
 * Fork safety for a plugin's own locks.
 *
 * fork() copies every lock as it is at that instant: one that a plugin call
 * on another thread holds stays held forever in the child, whose next call
 * on that filesystem hangs. Each lock registered here is taken before a fork
 * (once the calls holding it leave their short critical sections) and
 * released after it, in the parent and in the child, so the child starts
 * with every lock free and every structure consistent.
 *
 * The levels are the order in which the plugins nest their locks: a thread
 * holding a lock of one level only ever waits for locks of a later level,
 * and the fork takes them in that order too.
 */
#ifndef ASYNCFS_PLUGIN_FORK_H_
#define ASYNCFS_PLUGIN_FORK_H_

#include <pthread.h>

typedef enum plugin_lock_level {
  PLUGIN_LOCK_TRANSACTIONS = 0, /* plugin_txn_table: held around hooks */
  PLUGIN_LOCK_DATA = 1,         /* a plugin's own state (the memory tree) */
  PLUGIN_LOCK_SETTINGS = 2      /* plugin_config: a leaf */
} plugin_lock_level;

/* 0, or -1 when out of memory (the lock then works, unguarded). */
int plugin_fork_guard_mutex(pthread_mutex_t* lock, plugin_lock_level level);
int plugin_fork_guard_rwlock(pthread_rwlock_t* lock, plugin_lock_level level);
/* Before the lock is destroyed. */
void plugin_fork_unguard(const void* lock);

#endif /* ASYNCFS_PLUGIN_FORK_H_ */
