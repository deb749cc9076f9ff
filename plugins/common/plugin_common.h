/*
 * Helpers shared by the built-in plugins, compiled into each of them (a
 * plugin still links against nothing but libc and the status runtime).
 */
#ifndef ASYNCFS_PLUGIN_COMMON_H_
#define ASYNCFS_PLUGIN_COMMON_H_

#include <stddef.h>
#include <stdint.h>

#include "asyncfs/filesystem_interface.h"

/* Every block handed to the core comes from these (malloc and free). */
void* plugin_memory_allocate(size_t size);
void plugin_memory_free(void* ptr);
char* plugin_strdup(const char* s);

/* TensorFlow's CleanPath: collapses "//", "." and "..", drops a trailing
 * "/", and turns an empty result into ".". Returns a malloc'd string. */
char* plugin_clean_path(const char* path);

/* TensorFlow's generic TranslateName: "" stays "", otherwise the path part
 * of scheme://host/path, cleaned, with "/" for an empty path. When
 * host_is_segment is set, the host becomes the first path segment
 * (mem://a/b -> /a/b), for stores whose namespace starts at the host. */
char* plugin_translate_name(const char* uri, int host_is_segment);

/* The length of uri's "scheme://" prefix, 0 for a bare path. */
size_t plugin_scheme_prefix_len(const char* uri);

/* Whether two cleaned paths overlap (equal, or one inside the other), and
 * whether path is root or inside it. */
int plugin_paths_overlap(const char* a, const char* b);
int plugin_path_within(const char* path, const char* root);

/* A growable array of malloc'd strings, returned to the core as char**. */
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

/* 64-bit FNV-1a of s[0..n): short, stable names derived from paths (lock
 * files, temporary siblings of long names). Not for security. */
uint64_t plugin_hash(const char* s, size_t n);

/* True when the glob component holds a metacharacter. */
int plugin_has_glob_meta(const char* s, size_t len);

/* Integer configuration options exposed through the ABI's five
 * configuration ops. Values are read and written atomically. */
typedef struct plugin_option {
  const char* name;
  const char* description;
  int64_t min_value;
  int64_t max_value;
  int64_t value;
} plugin_option;

typedef struct plugin_options {
  plugin_option* items;
  int count;
} plugin_options;

int64_t plugin_option_get(const plugin_option* option);
void plugin_options_get_all(const plugin_options* options,
                            TF_Filesystem_Option** out, int* num,
                            TF_Status* status);
void plugin_options_set_all(plugin_options* options,
                            const TF_Filesystem_Option* in, int num,
                            TF_Status* status);
void plugin_options_get_one(const plugin_options* options, const char* key,
                            TF_Filesystem_Option** out, TF_Status* status);
void plugin_options_set_one(plugin_options* options,
                            const TF_Filesystem_Option* in,
                            TF_Status* status);
void plugin_options_keys(const plugin_options* options, char** keys,
                         int* num_keys, TF_Status* status);

#endif /* ASYNCFS_PLUGIN_COMMON_H_ */
