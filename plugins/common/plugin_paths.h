/*
 * The path and name rules, pure functions of their arguments: no status, no
 * plugin memory. The runtime compiles them in as well as every plugin, and
 * the Python core calls the runtime's copies (ASYNCFS_CleanPath,
 * ASYNCFS_GenericTranslateName), so there is one source of truth for them.
 * Results that are strings come from malloc.
 */
#ifndef ASYNCFS_PLUGIN_PATHS_H_
#define ASYNCFS_PLUGIN_PATHS_H_

#include <stddef.h>
#include <stdint.h>

/* TensorFlow's CleanPath: collapses "//", "." and "..", drops a trailing
 * "/", and turns an empty result into ".". */
char* plugin_clean_path(const char* path);

/* How plugin_translate_name reads a URI. */
enum plugin_names {
  PLUGIN_NAMES_PATH = 0,      /* the path part, cleaned (file://, bare paths) */
  PLUGIN_NAMES_HOST_TREE = 1, /* the host is the first folder (mem://a/b -> /a/b) */
  /* The host is the first segment and never changes: an object store's
   * bucket. "//" and "." collapse, but ".." is a name like any other, as
   * a key may hold it and a store has no parent folders to climb to:
   * s3://b/x/../y is the key "x/../y" in bucket b, never bucket y. */
  PLUGIN_NAMES_KEYS = 2
};

/* TensorFlow's generic TranslateName: "" stays "", otherwise the path part
 * of scheme://host/path, cleaned, with "/" for an empty path; with
 * PLUGIN_NAMES_HOST_TREE or PLUGIN_NAMES_KEYS the host is its first
 * segment, for stores whose namespace starts at the host. */
char* plugin_translate_name(const char* uri, int names);

/* The length of uri's "scheme://" prefix, 0 for a bare path. */
size_t plugin_scheme_prefix_len(const char* uri);

/* Whether two cleaned paths overlap (equal, or one inside the other), and
 * whether path is root or inside it. */
int plugin_paths_overlap(const char* a, const char* b);
int plugin_path_within(const char* path, const char* root);

/* Splits the next component off a glob pattern (leading "/"s skipped):
 * 1 with the component copied NUL-terminated into comp, its length in
 * *len and *rest pointing past it and its "/"s ("" after the last one); 0
 * when the pattern is used up; -1 when the component needs cap bytes or
 * more. */
int plugin_glob_split(const char* pattern, char* comp, size_t cap, size_t* len,
                      const char** rest);

/* True when the glob component holds a metacharacter. */
int plugin_has_glob_meta(const char* s, size_t len);

/* 64-bit FNV-1a of s[0..n): short, stable names derived from paths (lock
 * files, temporary siblings of long names). Not for security. */
uint64_t plugin_hash(const char* s, size_t n);

#endif /* ASYNCFS_PLUGIN_PATHS_H_ */
