#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* getentropy */
#include "plugin_common.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__APPLE__)
#include <sys/random.h>
#endif

void* plugin_memory_allocate(size_t size) { return calloc(1, size ? size : 1); }
void plugin_memory_free(void* ptr) { free(ptr); }

char* plugin_strdup(const char* s) {
  size_t n = strlen(s) + 1;
  char* copy = plugin_memory_allocate(n);
  if (copy != NULL) memcpy(copy, s, n);
  return copy;
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

int plugin_listing_push_kind(plugin_listing* listing, const char* name, size_t len,
                             const TF_FileStatistics* st, int kind) {
  if (listing->with_stats && listing->names.count == listing->stats_capacity) {
    int capacity = listing->stats_capacity ? listing->stats_capacity * 2 : 16;
    TF_FileStatistics* stats =
        realloc(listing->stats, (size_t)capacity * sizeof *stats);
    int* kinds;
    if (stats == NULL) return -1;
    listing->stats = stats;
    kinds = realloc(listing->kinds, (size_t)capacity * sizeof *kinds);
    if (kinds == NULL) return -1;
    listing->kinds = kinds;
    listing->stats_capacity = capacity;
  }
  if (plugin_strlist_push(&listing->names, name, len) != 0) return -1;
  if (listing->with_stats) {
    listing->stats[listing->names.count - 1] = *st;
    listing->kinds[listing->names.count - 1] = kind;
  }
  return 0;
}

int plugin_listing_push(plugin_listing* listing, const char* name, size_t len,
                        const TF_FileStatistics* st) {
  int kind = st != NULL && st->is_directory ? ASYNCFS_ENTRY_DIRECTORY : ASYNCFS_ENTRY_FILE;
  return plugin_listing_push_kind(listing, name, len, st, kind);
}

void plugin_listing_free(plugin_listing* listing) {
  plugin_strlist_free(&listing->names);
  free(listing->stats);
  free(listing->kinds);
  listing->stats = NULL;
  listing->kinds = NULL;
  listing->stats_capacity = 0;
}

/* A plugin-allocated copy of n items of size bytes at from (NULL for none);
 * 0, or -1 when out of memory. */
static int hand_over(const void* from, int n, size_t size, void** to) {
  *to = NULL;
  if (n <= 0) return 0;
  *to = plugin_memory_allocate((size_t)n * size);
  if (*to == NULL) return -1;
  memcpy(*to, from, (size_t)n * size);
  return 0;
}

int plugin_listing_release(plugin_listing* listing, char*** entries,
                           TF_FileStatistics** stats, int** kinds) {
  int count = listing->names.count;
  void* out_stats = NULL;
  void* out_kinds = NULL;
  *entries = NULL;
  if ((stats != NULL && hand_over(listing->stats, count, sizeof **stats, &out_stats) != 0) ||
      (kinds != NULL && hand_over(listing->kinds, count, sizeof **kinds, &out_kinds) != 0)) {
    plugin_memory_free(out_stats);
    plugin_listing_free(listing);
    return -1;
  }
  count = plugin_strlist_release(&listing->names, entries);
  if (count < 0) {
    plugin_memory_free(out_stats);
    plugin_memory_free(out_kinds);
    out_stats = out_kinds = NULL;
  }
  if (stats != NULL) *stats = out_stats;
  if (kinds != NULL) *kinds = out_kinds;
  plugin_listing_free(listing);
  return count;
}

void plugin_set_ok(TF_Status* status) { TF_SetStatus(status, TF_OK, ""); }

void plugin_set_oom(TF_Status* status) { TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory"); }

int plugin_buf_append(plugin_buf* b, const char* data, size_t n) {
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    char* p;
    while (cap < b->len + n + 1) cap *= 2;
    p = realloc(b->data, cap);
    if (p == NULL) return -1;
    b->data = p;
    b->cap = cap;
  }
  memcpy(b->data + b->len, data, n);
  b->len += n;
  b->data[b->len] = '\0';
  return 0;
}

void plugin_buf_free(plugin_buf* b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

int plugin_random_hex(char* out, size_t cap) {
  static const char digits[] = "0123456789abcdef";
  unsigned char bytes[64];
  size_t i;
  if (cap == 0 || cap / 2 + 1 > sizeof bytes) {
    errno = EINVAL;
    return -1;
  }
  if (getentropy(bytes, cap / 2 + 1) != 0) return -1;
  for (i = 0; i + 1 < cap; ++i) out[i] = digits[(bytes[i / 2] >> (i % 2 ? 0 : 4)) & 15];
  out[cap - 1] = '\0';
  return 0;
}

char* plugin_read_text(const char* path, size_t max) {
  FILE* f = fopen(path, "rb");
  plugin_buf b = {0};
  char chunk[4096];
  size_t n;
  if (f == NULL) return NULL;
  while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < max)
    if (plugin_buf_append(&b, chunk, n) != 0) break;
  fclose(f);
  if (b.data == NULL) plugin_buf_append(&b, "", 0);
  return b.data;
}
