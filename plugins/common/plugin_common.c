#define _POSIX_C_SOURCE 200809L
#include "plugin_common.h"

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

int plugin_listing_push(plugin_listing* listing, const char* name, size_t len,
                        const TF_FileStatistics* st) {
  if (listing->with_stats && listing->names.count == listing->stats_capacity) {
    int capacity = listing->stats_capacity ? listing->stats_capacity * 2 : 16;
    TF_FileStatistics* stats =
        realloc(listing->stats, (size_t)capacity * sizeof *stats);
    if (stats == NULL) return -1;
    listing->stats = stats;
    listing->stats_capacity = capacity;
  }
  if (plugin_strlist_push(&listing->names, name, len) != 0) return -1;
  if (listing->with_stats) listing->stats[listing->names.count - 1] = *st;
  return 0;
}

void plugin_listing_free(plugin_listing* listing) {
  plugin_strlist_free(&listing->names);
  free(listing->stats);
  listing->stats = NULL;
  listing->stats_capacity = 0;
}

int plugin_listing_release(plugin_listing* listing, char*** entries,
                           TF_FileStatistics** stats) {
  int count = listing->names.count;
  TF_FileStatistics* out = NULL;
  *entries = NULL;
  if (stats != NULL) {
    *stats = NULL;
    if (count > 0) {
      out = plugin_memory_allocate((size_t)count * sizeof *out);
      if (out == NULL) {
        plugin_listing_free(listing);
        return -1;
      }
      memcpy(out, listing->stats, (size_t)count * sizeof *out);
    }
  }
  count = plugin_strlist_release(&listing->names, entries);
  if (count < 0) {
    plugin_memory_free(out);
    out = NULL;
  }
  if (stats != NULL) *stats = out;
  plugin_listing_free(listing);
  return count;
}

void plugin_set_ok(TF_Status* status) { TF_SetStatus(status, TF_OK, ""); }

void plugin_set_oom(TF_Status* status) {
  TF_SetStatus(status, TF_RESOURCE_EXHAUSTED, "out of memory");
}

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
