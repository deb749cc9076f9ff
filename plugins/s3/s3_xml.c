/* The XML that S3 answers with, read by expat: listings (ListObjectsV2 and
 * ListBuckets), single values (UploadId, an error's Code and Message) and
 * DeleteObjects' per-key errors. One small driver collects each element's
 * text and hands (element, parent, text) to a handler. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_internal.h"

typedef struct xml_driver {
  char names[8][48]; /* the open elements, innermost last (deeper: "") */
  int depth;
  plugin_buf text;
  void (*on_element)(void* ctx, const char* name, const char* parent,
                     const char* text);
  void* ctx;
  int failed;
} xml_driver;

static void on_start(void* arg, const XML_Char* name, const XML_Char** attrs) {
  xml_driver* d = arg;
  (void)attrs;
  if (d->depth < 8) {
    strncpy(d->names[d->depth], name, sizeof d->names[0] - 1);
    d->names[d->depth][sizeof d->names[0] - 1] = '\0';
  }
  d->depth++;
  d->text.len = 0;
  if (d->text.data != NULL) d->text.data[0] = '\0';
}

static void on_end(void* arg, const XML_Char* name) {
  xml_driver* d = arg;
  const char* parent = d->depth >= 2 && d->depth - 2 < 8 ? d->names[d->depth - 2] : "";
  d->on_element(d->ctx, name, parent, d->text.data != NULL ? d->text.data : "");
  d->text.len = 0;
  if (d->text.data != NULL) d->text.data[0] = '\0';
  d->depth--;
}

static void on_text(void* arg, const XML_Char* s, int len) {
  xml_driver* d = arg;
  if (plugin_buf_append(&d->text, s, (size_t)len) != 0) d->failed = 1;
}

static int xml_parse(const char* xml, size_t len,
                     void (*on_element)(void*, const char*, const char*, const char*),
                     void* ctx) {
  xml_driver d;
  XML_Parser p = XML_ParserCreate("UTF-8");
  int ok;
  if (p == NULL) return -1;
  memset(&d, 0, sizeof d);
  d.on_element = on_element;
  d.ctx = ctx;
  XML_SetUserData(p, &d);
  XML_SetElementHandler(p, on_start, on_end);
  XML_SetCharacterDataHandler(p, on_text);
  ok = XML_Parse(p, xml, (int)len, 1) == XML_STATUS_OK && !d.failed;
  XML_ParserFree(p);
  plugin_buf_free(&d.text);
  return ok ? 0 : -1;
}

/* ---- listings ------------------------------------------------------------- */

typedef struct listing_ctx {
  s3_listing* l;
  int failed;
} listing_ctx;

static int64_t parse_time(const char* iso) {
  /* 2026-11-21T10:15:52.070Z */
  struct tm tm;
  int ms = 0;
  memset(&tm, 0, sizeof tm);
  if (sscanf(iso, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
             &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms) < 6)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return (int64_t)timegm(&tm) * 1000000000 + (int64_t)ms * 1000000;
}

static void on_listing(void* arg, const char* name, const char* parent,
                       const char* text) {
  listing_ctx* c = arg;
  s3_listing* l = c->l;
  if ((strcmp(name, "Key") == 0 && strcmp(parent, "Contents") == 0) ||
      (strcmp(name, "Name") == 0 && strcmp(parent, "Bucket") == 0)) {
    if (plugin_strlist_push(&l->keys, text, strlen(text)) != 0) c->failed = 1;
    if (l->keys.count > l->sizes_cap) {
      int cap = l->sizes_cap ? l->sizes_cap * 2 : 1024;
      int64_t* s = realloc(l->sizes, (size_t)cap * sizeof *s);
      int64_t* m = s != NULL ? realloc(l->mtimes, (size_t)cap * sizeof *m) : NULL;
      if (s != NULL) l->sizes = s;
      if (m == NULL) {
        c->failed = 1;
        return;
      }
      l->mtimes = m;
      l->sizes_cap = cap;
    }
    l->sizes[l->keys.count - 1] = 0;
    l->mtimes[l->keys.count - 1] = 0;
  } else if (strcmp(name, "Size") == 0 && strcmp(parent, "Contents") == 0) {
    if (l->keys.count > 0) l->sizes[l->keys.count - 1] = strtoll(text, NULL, 10);
  } else if ((strcmp(name, "LastModified") == 0 && strcmp(parent, "Contents") == 0) ||
             (strcmp(name, "CreationDate") == 0 && strcmp(parent, "Bucket") == 0)) {
    if (l->keys.count > 0) l->mtimes[l->keys.count - 1] = parse_time(text);
  } else if (strcmp(name, "Prefix") == 0 && strcmp(parent, "CommonPrefixes") == 0) {
    if (plugin_strlist_push(&l->prefixes, text, strlen(text)) != 0) c->failed = 1;
  } else if (strcmp(name, "IsTruncated") == 0) {
    l->truncated = strcmp(text, "true") == 0;
  } else if (strcmp(name, "NextContinuationToken") == 0) {
    free(l->next_token);
    l->next_token = strdup(text);
    if (l->next_token == NULL) c->failed = 1;
  }
}

int s3_parse_listing(const char* xml, size_t len, s3_listing* l) {
  listing_ctx c = {l, 0};
  l->truncated = 0;
  free(l->next_token);
  l->next_token = NULL;
  return xml_parse(xml, len, on_listing, &c) == 0 && !c.failed ? 0 : -1;
}

void s3_listing_free(s3_listing* l) {
  plugin_strlist_free(&l->keys);
  plugin_strlist_free(&l->prefixes);
  free(l->sizes);
  free(l->mtimes);
  free(l->next_token);
  memset(l, 0, sizeof *l);
}

/* ---- single values ----------------------------------------------------------- */

typedef struct find_ctx {
  const char* name;
  char* found;
} find_ctx;

static void on_find(void* arg, const char* name, const char* parent,
                    const char* text) {
  find_ctx* c = arg;
  (void)parent;
  if (c->found == NULL && strcmp(name, c->name) == 0) c->found = strdup(text);
}

char* s3_xml_find(const char* xml, size_t len, const char* name) {
  find_ctx c = {name, NULL};
  if (len == 0 || xml[0] != '<') return NULL;
  xml_parse(xml, len, on_find, &c);
  return c.found;
}

/* ---- DeleteObjects' errors ------------------------------------------------ */

typedef struct delete_ctx {
  int errors;
  char* key;
  size_t key_cap;
  char* code;
  size_t code_cap;
} delete_ctx;

static void on_delete(void* arg, const char* name, const char* parent,
                      const char* text) {
  delete_ctx* c = arg;
  if (strcmp(parent, "Error") != 0 && strcmp(name, "Error") != 0) return;
  if (strcmp(name, "Error") == 0) {
    c->errors++;
  } else if (c->errors == 0 && strcmp(name, "Key") == 0) {
    snprintf(c->key, c->key_cap, "%s", text);
  } else if (c->errors == 0 && strcmp(name, "Code") == 0) {
    snprintf(c->code, c->code_cap, "%s", text);
  }
}

int s3_parse_delete_errors(const char* xml, size_t len, char* key,
                           size_t key_cap, char* code, size_t code_cap) {
  delete_ctx c = {0, key, key_cap, code, code_cap};
  key[0] = code[0] = '\0';
  if (xml_parse(xml, len, on_delete, &c) != 0) return -1;
  return c.errors;
}

void s3_xml_escape_into(plugin_buf* b, const char* s) {
  for (; *s; ++s) {
    switch (*s) {
      case '&': plugin_buf_append(b, "&amp;", 5); break;
      case '<': plugin_buf_append(b, "&lt;", 4); break;
      case '>': plugin_buf_append(b, "&gt;", 4); break;
      case '"': plugin_buf_append(b, "&quot;", 6); break;
      case '\'': plugin_buf_append(b, "&apos;", 6); break;
      default: plugin_buf_append(b, s, 1);
    }
  }
}
