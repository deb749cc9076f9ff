#define _POSIX_C_SOURCE 200809L
#include "plugin_paths.h"

#include <stdlib.h>
#include <string.h>

/* CleanPath; with dots_are_names, ".." is kept as a name. */
static char* clean(const char* path, int dots_are_names) {
  size_t n = strlen(path);
  char* out = malloc(n + 2);
  const char* src = path;
  char* dst = out;
  char* limit; /* ".." never backtracks past this point */
  int absolute = (*src == '/');
  if (out == NULL) return NULL;
  if (absolute) {
    *dst++ = *src++;
    while (*src == '/') ++src;
  }
  limit = dst;
  while (*src != '\0') {
    const char* part = src;
    size_t len;
    while (*src != '\0' && *src != '/') ++src;
    len = (size_t)(src - part);
    while (*src == '/') ++src;
    if (len == 0 || (len == 1 && part[0] == '.')) continue;
    if (len == 2 && part[0] == '.' && part[1] == '.' && !dots_are_names) {
      if (dst > limit) {
        /* drop the previous component and its separator */
        --dst;
        while (dst > limit && dst[-1] != '/') --dst;
        if (dst > limit) --dst; /* the '/' before it */
        continue;
      }
      if (absolute) continue; /* "/.." is "/" */
      /* a relative path keeps leading ".." and cannot backtrack over it */
      if (dst != out) *dst++ = '/';
      *dst++ = '.';
      *dst++ = '.';
      limit = dst;
      continue;
    }
    if (dst != out && dst[-1] != '/') *dst++ = '/';
    memcpy(dst, part, len);
    dst += len;
  }
  if (dst == out) *dst++ = '.';
  *dst = '\0';
  return out;
}

char* plugin_clean_path(const char* path) { return clean(path, 0); }

/* scheme is [a-zA-Z][a-zA-Z0-9+.-]* (RFC 3986) followed by "://", as the
 * core's asyncfs/_uri.py has it; anything else is all path. */
static const char* after_scheme(const char* uri) {
  const char* p = uri;
  if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z'))) return NULL;
  while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
         (*p >= '0' && *p <= '9') || *p == '.' || *p == '+' || *p == '-')
    ++p;
  return strncmp(p, "://", 3) == 0 ? p + 3 : NULL;
}

size_t plugin_scheme_prefix_len(const char* uri) {
  const char* rest = after_scheme(uri);
  return rest != NULL ? (size_t)(rest - uri) : 0;
}

char* plugin_translate_name(const char* uri, int names) {
  int host_is_segment = names != PLUGIN_NAMES_PATH;
  const char* rest;
  char* path;
  char* cleaned;
  if (uri[0] == '\0') return strdup("");
  rest = after_scheme(uri);
  if (rest == NULL) {
    path = strdup(uri);
  } else if (host_is_segment) {
    size_t n = strlen(rest);
    path = malloc(n + 2);
    if (path != NULL) {
      path[0] = '/';
      memcpy(path + 1, rest, n + 1);
    }
  } else {
    const char* slash = strchr(rest, '/');
    path = strdup(slash != NULL ? slash : "");
  }
  if (path == NULL) return NULL;
  if (path[0] == '\0') {
    free(path);
    return strdup("/");
  }
  cleaned = clean(path, names == PLUGIN_NAMES_KEYS);
  free(path);
  return cleaned;
}

int plugin_paths_overlap(const char* a, const char* b) {
  size_t la = strlen(a), lb = strlen(b);
  size_t n = la < lb ? la : lb;
  if (strncmp(a, b, n) != 0) return 0;
  return la == lb || (la < lb ? b[la] : a[lb]) == '/';
}

int plugin_path_within(const char* path, const char* root) {
  size_t n = strlen(root);
  return strncmp(path, root, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

int plugin_glob_split(const char* pattern, char* comp, size_t cap, size_t* len,
                      const char** rest) {
  const char* end;
  while (*pattern == '/') ++pattern;
  if (*pattern == '\0') return 0;
  end = strchr(pattern, '/');
  if (end == NULL) end = pattern + strlen(pattern);
  *len = (size_t)(end - pattern);
  if (*len >= cap) return -1;
  memcpy(comp, pattern, *len);
  comp[*len] = '\0';
  while (*end == '/') ++end;
  *rest = end;
  return 1;
}

int plugin_has_glob_meta(const char* s, size_t len) {
  size_t i;
  for (i = 0; i < len; ++i)
    if (s[i] == '*' || s[i] == '?' || s[i] == '[' || s[i] == '\\') return 1;
  return 0;
}

uint64_t plugin_hash(const char* s, size_t n) {
  uint64_t h = 14695981039346656037ull;
  size_t i;
  for (i = 0; i < n; ++i) {
    h ^= (unsigned char)s[i];
    h *= 1099511628211ull;
  }
  return h;
}
