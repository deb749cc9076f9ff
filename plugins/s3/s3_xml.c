/* The XML that S3 answers with: listings (ListObjectsV2 and ListBuckets)
 * and DeleteObjects' per-key errors, read through the engine's XML driver
 * (objstore_xml.c). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objstore_formats.h"
#include "s3_internal.h"

/* ---- listings ------------------------------------------------------------- */

typedef struct listing_ctx {
  s3_listing* l;
  int failed;
} listing_ctx;

/* An ISO 8601 time ("2026-11-21T10:15:52.070Z") in Unix nanoseconds; 0
 * when it is not one. */
static int64_t parse_time(const char* iso) {
  int64_t ns;
  return objstore_parse_time_ns(iso, &ns) == 0 ? ns : 0;
}

static int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Decodes a name S3 sent with encoding-type=url ("%XX", and "+" for a
 * space, as boto3 reads it) onto the end of list. */
static int push_decoded(plugin_strlist* list, const char* text) {
  size_t i, n = 0, len = strlen(text);
  char near[512] = ""; /* most names: no allocation of their own */
  char* out = len < sizeof near ? near : malloc(len + 1);
  int rc;
  if (out == NULL) return -1;
  for (i = 0; i < len; ++i) {
    int hi, lo;
    if (text[i] == '%' && i + 2 < len && (hi = hex_digit(text[i + 1])) >= 0 &&
        (lo = hex_digit(text[i + 2])) >= 0) {
      out[n++] = (char)(hi * 16 + lo);
      i += 2;
    } else {
      out[n++] = text[i] == '+' ? ' ' : text[i];
    }
  }
  rc = plugin_strlist_push(list, out, n);
  if (out != near) free(out);
  return rc;
}

static int push_name(s3_listing* l, plugin_strlist* list, const char* text) {
  return l->url_encoded ? push_decoded(list, text) : plugin_strlist_push(list, text, strlen(text));
}

/* Appends a key (decoded when the listing is) with a size and time of 0. */
static int push_key(s3_listing* l, const char* text, int as_is) {
  if ((as_is ? plugin_strlist_push(&l->keys, text, strlen(text)) : push_name(l, &l->keys, text)) != 0)
    return -1;
  if (l->keys.count > l->sizes_cap) {
    int cap = l->sizes_cap ? l->sizes_cap * 2 : 1024;
    int64_t* s = realloc(l->sizes, (size_t)cap * sizeof *s);
    int64_t* m = s != NULL ? realloc(l->mtimes, (size_t)cap * sizeof *m) : NULL;
    if (s != NULL) l->sizes = s;
    if (m == NULL) return -1;
    l->mtimes = m;
    l->sizes_cap = cap;
  }
  l->sizes[l->keys.count - 1] = 0;
  l->mtimes[l->keys.count - 1] = 0;
  return 0;
}

/* Replaces *slot with text (decoded when the listing is). */
static int set_marker(s3_listing* l, char** slot, const char* text) {
  plugin_strlist one = {NULL, 0, 0};
  free(*slot);
  *slot = NULL;
  if (push_name(l, &one, text) != 0) return -1;
  *slot = strdup(one.items[0]);
  plugin_strlist_free(&one);
  return *slot != NULL ? 0 : -1;
}

static void on_listing(void* arg, const char* name, const char* parent,
                       const char* text) {
  listing_ctx* c = arg;
  s3_listing* l = c->l;
  int in_upload;
  if (name[0] == '\0' || strchr("CIKLNPSU", name[0]) == NULL) return; /* ETag, Owner, Type, ...: not read */
  in_upload = strcmp(parent, "Upload") == 0;
  if ((strcmp(name, "Key") == 0 && (strcmp(parent, "Contents") == 0 || in_upload)) ||
      (strcmp(name, "Name") == 0 && strcmp(parent, "Bucket") == 0)) {
    /* ListBuckets: names as they are */
    if (push_key(l, text, strcmp(parent, "Bucket") == 0) != 0) c->failed = 1;
  } else if (strcmp(name, "UploadId") == 0 && in_upload) {
    if (plugin_strlist_push(&l->upload_ids, text, strlen(text)) != 0) c->failed = 1;
  } else if (strcmp(name, "Size") == 0 && strcmp(parent, "Contents") == 0) {
    if (l->keys.count > 0) l->sizes[l->keys.count - 1] = strtoll(text, NULL, 10);
  } else if ((strcmp(name, "LastModified") == 0 && strcmp(parent, "Contents") == 0) ||
             (strcmp(name, "CreationDate") == 0 && strcmp(parent, "Bucket") == 0) ||
             (strcmp(name, "Initiated") == 0 && in_upload)) {
    if (l->keys.count > 0) l->mtimes[l->keys.count - 1] = parse_time(text);
  } else if (strcmp(name, "Prefix") == 0 && strcmp(parent, "CommonPrefixes") == 0) {
    if (push_name(l, &l->prefixes, text) != 0) c->failed = 1;
  } else if (strcmp(name, "IsTruncated") == 0) {
    l->truncated = strcmp(text, "true") == 0;
  } else if (strcmp(name, "NextContinuationToken") == 0) {
    free(l->next_token);
    l->next_token = strdup(text);
    if (l->next_token == NULL) c->failed = 1;
  } else if (strcmp(name, "NextKeyMarker") == 0) {
    if (set_marker(l, &l->next_token, text) != 0) c->failed = 1;
  } else if (strcmp(name, "NextUploadIdMarker") == 0) {
    free(l->next_upload_id);
    l->next_upload_id = strdup(text);
    if (l->next_upload_id == NULL) c->failed = 1;
  }
}

char* s3_listing_next_token(const char* xml, size_t len) {
  char* truncated = objstore_xml_peek(xml, len, "IsTruncated");
  int more = truncated != NULL && strcmp(truncated, "true") == 0;
  free(truncated);
  return more ? objstore_xml_peek(xml, len, "NextContinuationToken") : NULL;
}

int s3_parse_listing(const char* xml, size_t len, s3_listing* l) {
  listing_ctx c = {l, 0};
  l->truncated = 0;
  free(l->next_token);
  l->next_token = NULL;
  free(l->next_upload_id);
  l->next_upload_id = NULL;
  return objstore_xml_parse(xml, len, on_listing, &c) == 0 && !c.failed ? 0 : -1;
}

void s3_listing_free(s3_listing* l) {
  plugin_strlist_free(&l->keys);
  plugin_strlist_free(&l->prefixes);
  plugin_strlist_free(&l->upload_ids);
  free(l->next_upload_id);
  free(l->sizes);
  free(l->mtimes);
  free(l->next_token);
  memset(l, 0, sizeof *l);
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
  if (objstore_xml_parse(xml, len, on_delete, &c) != 0) return -1;
  return c.errors;
}
