#define _POSIX_C_SOURCE 200809L
#include "plugin_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void* plugin_memory_allocate(size_t size) { return calloc(1, size ? size : 1); }
void plugin_memory_free(void* ptr) { free(ptr); }

char* plugin_strdup(const char* s) {
  size_t n = strlen(s) + 1;
  char* copy = plugin_memory_allocate(n);
  if (copy != NULL) memcpy(copy, s, n);
  return copy;
}

char* plugin_clean_path(const char* path) {
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
    if (len == 2 && part[0] == '.' && part[1] == '.') {
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

char* plugin_translate_name(const char* uri, int host_is_segment) {
  const char* rest;
  char* path;
  char* cleaned;
  char* result;
  if (uri[0] == '\0') return plugin_strdup("");
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
    return plugin_strdup("/");
  }
  cleaned = plugin_clean_path(path);
  free(path);
  if (cleaned == NULL) return NULL;
  result = plugin_strdup(cleaned);
  free(cleaned);
  return result;
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

int plugin_strlist_push(plugin_strlist* list, const char* s, size_t len) {
  char* copy;
  if (list->count == list->capacity) {
    int capacity = list->capacity ? list->capacity * 2 : 16;
    char** items = realloc(list->items, (size_t)capacity * sizeof(char*));
    if (items == NULL) return -1;
    list->items = items;
    list->capacity = capacity;
  }
  copy = plugin_memory_allocate(len + 1);
  if (copy == NULL) return -1;
  memcpy(copy, s, len);
  copy[len] = '\0';
  list->items[list->count++] = copy;
  return 0;
}

static int compare_strings(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

void plugin_strlist_sort(plugin_strlist* list) {
  if (list->count > 1)
    qsort(list->items, (size_t)list->count, sizeof(char*), compare_strings);
}

int plugin_strlist_prefix(plugin_strlist* list, const char* prefix, size_t len) {
  int i;
  for (i = 0; i < list->count; ++i) {
    size_t n = strlen(list->items[i]);
    char* joined = plugin_memory_allocate(len + n + 1);
    if (joined == NULL) return -1;
    memcpy(joined, prefix, len);
    memcpy(joined + len, list->items[i], n + 1);
    plugin_memory_free(list->items[i]);
    list->items[i] = joined;
  }
  return 0;
}

void plugin_strlist_free(plugin_strlist* list) {
  int i;
  for (i = 0; i < list->count; ++i) plugin_memory_free(list->items[i]);
  free(list->items);
  memset(list, 0, sizeof *list);
}

int plugin_strlist_release(plugin_strlist* list, char*** entries) {
  int count = list->count;
  char** out = NULL;
  if (count > 0) {
    out = plugin_memory_allocate((size_t)count * sizeof(char*));
    if (out == NULL) {
      plugin_strlist_free(list);
      *entries = NULL;
      return -1;
    }
    memcpy(out, list->items, (size_t)count * sizeof(char*));
  }
  free(list->items);
  memset(list, 0, sizeof *list);
  *entries = out;
  return count;
}

int plugin_has_glob_meta(const char* s, size_t len) {
  size_t i;
  for (i = 0; i < len; ++i)
    if (s[i] == '*' || s[i] == '?' || s[i] == '[' || s[i] == '\\') return 1;
  return 0;
}

/* ---- configuration options --------------------------------------------- */

int64_t plugin_option_get(const plugin_option* option) {
  return __atomic_load_n(&option->value, __ATOMIC_RELAXED);
}

static plugin_option* find_option(const plugin_options* options,
                                  const char* key) {
  int i;
  for (i = 0; i < options->count; ++i)
    if (strcmp(options->items[i].name, key) == 0) return &options->items[i];
  return NULL;
}

static int fill_option(const plugin_option* src, TF_Filesystem_Option* dst) {
  dst->name = plugin_strdup(src->name);
  dst->description = plugin_strdup(src->description);
  dst->per_file = 0;
  dst->value = plugin_memory_allocate(sizeof(TF_Filesystem_Option_Value));
  if (dst->name == NULL || dst->description == NULL || dst->value == NULL)
    return -1;
  dst->value->type_tag = TF_Filesystem_Option_Type_Int;
  dst->value->num_values = 1;
  dst->value->values =
      plugin_memory_allocate(sizeof(TF_Filesystem_Option_Value_Union));
  if (dst->value->values == NULL) return -1;
  dst->value->values[0].int_val = plugin_option_get(src);
  return 0;
}

void plugin_options_get_all(const plugin_options* options,
                            TF_Filesystem_Option** out, int* num,
                            TF_Status* status) {
  int i;
  *out = plugin_memory_allocate((size_t)options->count *
                                sizeof(TF_Filesystem_Option));
  *num = options->count;
  for (i = 0; i < options->count; ++i) {
    if (*out == NULL || fill_option(&options->items[i], &(*out)[i]) != 0) {
      TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
      return;
    }
  }
  TF_SetStatus(status, TF_OK, "");
}

void plugin_options_set_one(plugin_options* options,
                            const TF_Filesystem_Option* in,
                            TF_Status* status) {
  char msg[256];
  plugin_option* option;
  int64_t v;
  if (in == NULL || in->name == NULL) {
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "option without a name");
    return;
  }
  option = find_option(options, in->name);
  if (option == NULL) {
    snprintf(msg, sizeof msg, "no configuration option named '%s'", in->name);
    TF_SetStatus(status, TF_NOT_FOUND, msg);
    return;
  }
  if (in->value == NULL || in->value->num_values != 1 ||
      in->value->type_tag != TF_Filesystem_Option_Type_Int ||
      in->value->values == NULL) {
    snprintf(msg, sizeof msg, "option '%s' takes exactly one integer",
             in->name);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
    return;
  }
  v = in->value->values[0].int_val;
  if (v < option->min_value || v > option->max_value) {
    snprintf(msg, sizeof msg, "option '%s' must be in [%lld, %lld], got %lld",
             in->name, (long long)option->min_value,
             (long long)option->max_value, (long long)v);
    TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
    return;
  }
  __atomic_store_n(&option->value, v, __ATOMIC_RELAXED);
  TF_SetStatus(status, TF_OK, "");
}

void plugin_options_set_all(plugin_options* options,
                            const TF_Filesystem_Option* in, int num,
                            TF_Status* status) {
  int i;
  for (i = 0; i < num; ++i) {
    plugin_options_set_one(options, &in[i], status);
    if (TF_GetCode(status) != TF_OK) return;
  }
  TF_SetStatus(status, TF_OK, "");
}

void plugin_options_get_one(const plugin_options* options, const char* key,
                            TF_Filesystem_Option** out, TF_Status* status) {
  char msg[256];
  const plugin_option* option = find_option(options, key);
  *out = NULL;
  if (option == NULL) {
    snprintf(msg, sizeof msg, "no configuration option named '%s'", key);
    TF_SetStatus(status, TF_NOT_FOUND, msg);
    return;
  }
  *out = plugin_memory_allocate(sizeof(TF_Filesystem_Option));
  if (*out == NULL || fill_option(option, *out) != 0) {
    TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
    return;
  }
  TF_SetStatus(status, TF_OK, "");
}

void plugin_options_keys(const plugin_options* options, char** keys,
                         int* num_keys, TF_Status* status) {
  int i;
  if (keys == NULL) {
    *num_keys = options->count;
    TF_SetStatus(status, TF_OK, "");
    return;
  }
  for (i = 0; i < options->count && i < *num_keys; ++i)
    keys[i] = plugin_strdup(options->items[i].name);
  *num_keys = i;
  TF_SetStatus(status, TF_OK, "");
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
