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
