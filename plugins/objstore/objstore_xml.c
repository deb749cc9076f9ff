/* The XML documents stores answer with (S3's and Azure's listings and
 * errors), read by expat: one small driver collects each element's text
 * and hands (element, parent, text) to a handler. And XML text written
 * into request bodies. */
#define _GNU_SOURCE /* memmem */

#include "objstore_xml.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
  size_t i = 0;
  const char *amp = xml, *stop = xml + len;
  while ((amp = memchr(amp, '&', (size_t)(stop - amp))) != NULL)
    if (++amp < stop && *amp == '#') return 1;
  while (i < len) { /* in blocks with no exit inside, which compilers vectorize */
    size_t end = len - i > 256 ? i + 256 : len;
    int found = 0;
    for (; i < end; ++i) {
      unsigned char c = (unsigned char)xml[i];
      found |= (c < 0x20) & (c != '\t') & (c != '\n') & (c != '\r'); /* control(c), without branches */
    }
    if (found) return 1;
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

int objstore_xml_parse(const char* xml, size_t len,
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

char* objstore_xml_find(const char* xml, size_t len, const char* name) {
  find_ctx c = {name, NULL};
  if (len == 0 || xml[0] != '<') return NULL;
  objstore_xml_parse(xml, len, on_find, &c);
  return c.found;
}

char* objstore_xml_peek(const char* xml, size_t len, const char* name) {
  char open[64], close[64];
  plugin_buf alone = {NULL, 0, 0};
  const char *start, *end;
  char* text = NULL;
  int n = snprintf(open, sizeof open, "<%s>", name);
  if (n <= 0 || (size_t)n + 1 >= sizeof close) return NULL; /* (the names asked for are short) */
  snprintf(close, sizeof close, "</%s>", name);
  if ((start = memmem(xml, len, open, (size_t)n)) == NULL) return NULL;
  start += n;
  end = memmem(start, len - (size_t)(start - xml), close, (size_t)n + 1);
  if (end == NULL || end == start) return NULL;
  /* the element alone, parsed as the whole document would parse it */
  if (plugin_buf_append(&alone, "<t>", 3) == 0 && plugin_buf_append(&alone, start, (size_t)(end - start)) == 0 &&
      plugin_buf_append(&alone, "</t>", 4) == 0)
    text = objstore_xml_find(alone.data, alone.len, "t");
  plugin_buf_free(&alone);
  return text;
}

int objstore_xml_can_carry(const char* s) {
  for (; *s; ++s)
    if ((unsigned char)*s < 0x20 && *s != '\t' && *s != '\n' && *s != '\r') return 0;
  return 1;
}

void objstore_xml_escape_into(plugin_buf* b, const char* s) {
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
