/*
 * Helpers shared by the built-in plugins, compiled into each of them (a
 * plugin still links against nothing but libc and the status runtime, so
 * TensorFlow loads it too). The backbone a plugin is built on:
 *   plugin_paths.h     path and name rules (shared with the runtime)
 *   plugin_common.h    plugin memory, string lists, status shorthands
 *   plugin_config.h    settings and the ABI's five configuration ops
 *   plugin_txn.h       transaction tokens and the ABI's seven transaction ops
 *   plugin_state.h     the state every filesystem starts with (both of the above)
 *   plugin_fs.h        creating a filesystem's state, and registration
 *   plugin_fork.h      locks a fork must not copy held
 */
#ifndef ASYNCFS_PLUGIN_COMMON_H_
#define ASYNCFS_PLUGIN_COMMON_H_

#include <stddef.h>
#include <stdint.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_paths.h"

/* A line to the host's log: inside asyncfs, the runtime's (Python's
 * logging, asyncfs.<name> for a line "name: ..."); inside TensorFlow, its
 * TF_Log where the build exports one. Some TensorFlow builds do not (2.21's
 * does not), and a plugin must load there all the same: TF_Log is a weak
 * import, and where nothing provides it the line is not written. */
#pragma weak TF_Log
#define PLUGIN_LOG(...)                      \
  do {                                       \
    if (TF_Log != NULL) TF_Log(__VA_ARGS__); \
  } while (0)

/* Every block handed to the core comes from these (calloc and free). */
void* plugin_memory_allocate(size_t size);
void plugin_memory_free(void* ptr);
char* plugin_strdup(const char* s);

void plugin_set_ok(TF_Status* status);
/* RESOURCE_EXHAUSTED, "out of memory". */
void plugin_set_oom(TF_Status* status);

/* A growable array of plugin-allocated strings, returned to the core as
 * char**. */
typedef struct plugin_strlist {
  char** items;
  int count;
  int capacity;
} plugin_strlist;

int plugin_strlist_push(plugin_strlist* list, const char* s, size_t len);
void plugin_strlist_sort(plugin_strlist* list);
/* Puts prefix[0..len) in front of every item. */
int plugin_strlist_prefix(plugin_strlist* list, const char* prefix, size_t len);
void plugin_strlist_free(plugin_strlist* list);
/* Hands items to the core (NULL when empty) and returns the count. */
int plugin_strlist_release(plugin_strlist* list, char*** entries);

/* A directory listing under construction: the children's names and, when
 * the core asked for them (get_children_stats, get_children_kinds), each
 * one's statistics and kind. A plugin writes one listing function over it
 * and serves get_children, get_children_stats and get_children_kinds from
 * it (PLUGIN_DEFINE_LISTING in plugin_fs.h). */
typedef struct plugin_listing {
  plugin_strlist names;
  TF_FileStatistics* stats; /* parallel to names; unused unless with_stats */
  int* kinds;               /* ASYNCFS_ENTRY_*, parallel to stats */
  int stats_capacity;
  int with_stats; /* stats and kinds are kept */
} plugin_listing;

/* Appends a child; st is read only when the listing has stats (it may be
 * NULL otherwise), and the child's kind follows from it (a file or a
 * directory). Returns -1 when out of memory. */
int plugin_listing_push(plugin_listing* listing, const char* name, size_t len,
                        const TF_FileStatistics* st);
/* plugin_listing_push of a child whose kind (ASYNCFS_ENTRY_*) the plugin
 * knows apart from its statistics: a link, a FIFO. */
int plugin_listing_push_kind(plugin_listing* listing, const char* name, size_t len,
                             const TF_FileStatistics* st, int kind);
/* Frees the entries (with_stats stays, so a listing can be refilled). */
void plugin_listing_free(plugin_listing* listing);
/* Hands names (and stats and kinds, when those are not NULL) to the core,
 * as plugin-allocated arrays (NULL when empty), and returns the count; -1
 * with everything freed when out of memory. */
int plugin_listing_release(plugin_listing* listing, char*** entries,
                           TF_FileStatistics** stats, int** kinds);

/* cap - 1 random hex digits and a NUL into out, from the kernel's random
 * source (a name another user cannot guess): 0, or -1 with errno set. */
int plugin_random_hex(char* out, size_t cap);

/* A growable byte buffer, NUL-terminated after len bytes (for text). */
typedef struct plugin_buf {
  char* data;
  size_t len;
  size_t cap;
} plugin_buf;

/* 0, or -1 when out of memory (b keeps what it had). */
int plugin_buf_append(plugin_buf* b, const char* data, size_t n);
void plugin_buf_free(plugin_buf* b);

/* The text of the file at path (a credentials or config file), at most
 * about max bytes, malloc'd; NULL when it cannot be read. */
char* plugin_read_text(const char* path, size_t max);

#endif /* ASYNCFS_PLUGIN_COMMON_H_ */
