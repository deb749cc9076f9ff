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
  int shifted; /* the input went through shift_controls */
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

/* XML 1.0 has no control characters, yet gateways send them, raw or as
 * character references (Ceph's continuation token is the next key, as
 * "&#x07;"), and expat refuses both. Before parsing, each becomes the
 * private-use character U+E000 + its value, which expat passes through;
 * element text turns them back into the bytes meant. */
#define SHIFT_LEAD '\xEE'
#define SHIFT_MID '\x80'

static int control(unsigned long c) { return c < 0x20 && c != '\t' && c != '\n' && c != '\r'; }

/* The control character a reference at xml[0] ("&#x07;", "&#7;") names,
 * and its length; -1 for anything else. */
static int control_reference(const char* xml, size_t len, size_t* ref_len) {
  size_t i = 2;
  int hex;
  unsigned long value = 0;
  if (len < 4 || xml[0] != '&' || xml[1] != '#') return -1;
  hex = xml[2] == 'x' || xml[2] == 'X';
  if (hex) ++i;
  for (; i < len && i < 12 && xml[i] != ';'; ++i) {
    int digit = xml[i] >= '0' && xml[i] <= '9' ? xml[i] - '0'
                : hex && xml[i] >= 'a' && xml[i] <= 'f' ? xml[i] - 'a' + 10
                : hex && xml[i] >= 'A' && xml[i] <= 'F' ? xml[i] - 'A' + 10
                : -1;
    if (digit < 0) return -1;
    value = value * (hex ? 16 : 10) + (unsigned long)digit;
  }
  if (i >= len || xml[i] != ';' || !control(value)) return -1;
  *ref_len = i + 1;
  return (int)value;
}

static char* shift_controls(const char* xml, size_t len, size_t* out_len) {
  size_t i, n = 0, ref_len;
  char* out = malloc(len * 3 + 1); /* a raw control byte grows to three */
  if (out == NULL) return NULL;
  for (i = 0; i < len; ++i) {
    unsigned char c = (unsigned char)xml[i];
    int value = c == '&' ? control_reference(xml + i, len - i, &ref_len) : -1;
    if (value >= 0) i += ref_len - 1;
    else if (control(c)) value = c;
    if (value >= 0) {
      out[n++] = SHIFT_LEAD;
      out[n++] = SHIFT_MID;
      out[n++] = (char)(0x80 | value);
    } else {
      out[n++] = (char)c;
    }
  }
  *out_len = n;
  return out;
}

/* Whether xml holds anything shift_controls would change: a control byte,
 * or a character reference (checked closely only when shifting). Most
 * answers hold neither and are parsed as they came, with no copy. */
static int needs_shift(const char* xml, size_t len) {
  size_t i;
  for (i = 0; i < len; ++i) {
    unsigned char c = (unsigned char)xml[i];
    if (control(c) || (c == '&' && i + 1 < len && xml[i + 1] == '#')) return 1;
  }
  return 0;
}

static void on_text(void* arg, const XML_Char* s, int len) {
  xml_driver* d = arg;
  int i, start = 0;
  for (i = 0; d->shifted && i + 2 < len; ++i) {
    if (s[i] == SHIFT_LEAD && s[i + 1] == SHIFT_MID && ((unsigned char)s[i + 2] & 0xE0) == 0x80) {
      char c = (char)((unsigned char)s[i + 2] & 0x1F);
      if (plugin_buf_append(&d->text, s + start, (size_t)(i - start)) != 0 ||
          plugin_buf_append(&d->text, &c, 1) != 0)
        d->failed = 1;
      i += 2;
      start = i + 1;
    }
  }
  if (plugin_buf_append(&d->text, s + start, (size_t)(len - start)) != 0) d->failed = 1;
}

static int xml_parse(const char* xml, size_t len,
                     void (*on_element)(void*, const char*, const char*, const char*),
                     void* ctx) {
  xml_driver d;
  XML_Parser p;
  char* shifted = NULL;
  int ok;
  if (needs_shift(xml, len)) {
    shifted = shift_controls(xml, len, &len);
    if (shifted == NULL) return -1;
    xml = shifted;
  }
  p = XML_ParserCreate("UTF-8");
  if (p == NULL) {
    free(shifted);
    return -1;
  }
  memset(&d, 0, sizeof d);
  d.on_element = on_element;
  d.ctx = ctx;
  d.shifted = shifted != NULL;
  XML_SetUserData(p, &d);
  XML_SetElementHandler(p, on_start, on_end);
  XML_SetCharacterDataHandler(p, on_text);
  ok = XML_Parse(p, xml, (int)len, 1) == XML_STATUS_OK && !d.failed;
  XML_ParserFree(p);
  free(shifted);
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
  char* out = malloc(len + 1);
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
  free(out);
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
  int in_upload = strcmp(parent, "Upload") == 0;
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

int s3_parse_listing(const char* xml, size_t len, s3_listing* l) {
  listing_ctx c = {l, 0};
  l->truncated = 0;
  free(l->next_token);
  l->next_token = NULL;
  free(l->next_upload_id);
  l->next_upload_id = NULL;
  return xml_parse(xml, len, on_listing, &c) == 0 && !c.failed ? 0 : -1;
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

int s3_xml_can_carry(const char* s) {
  for (; *s; ++s)
    if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r') return 0;
  return 1;
}

void s3_xml_escape_into(plugin_buf* b, const char* s) {
  for (; *s; ++s) {
    switch (*s) {
      case '&': plugin_buf_append(b, "&amp;", 5); break;
      case '<': plugin_buf_append(b, "&lt;", 4); break;
      case '>': plugin_buf_append(b, "&gt;", 4); break;
      case '"': plugin_buf_append(b, "&quot;", 6); break;
      case '\'': plugin_buf_append(b, "&apos;", 6); break;
      /* A parser would turn a raw \r into \n: as character references,
       * whitespace comes through as it is. */
      case '\t': plugin_buf_append(b, "&#9;", 4); break;
      case '\n': plugin_buf_append(b, "&#10;", 5); break;
      case '\r': plugin_buf_append(b, "&#13;", 5); break;
      default: plugin_buf_append(b, s, 1);
    }
  }
}
