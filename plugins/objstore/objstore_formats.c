/* JSON documents and ISO 8601 times, read with libc only (see
 * objstore_formats.h). */
#define _POSIX_C_SOURCE 200809L /* strndup */
#include "objstore_formats.h"

#include <ctype.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- JSON ------------------------------------------------------------------ */

typedef struct json_span {
  const char* start;
  size_t len;
} json_span;

typedef struct json_text {
  const char* s;
  size_t i, n;
} json_text;

/* A decoded string being built: malloc'd, grown by doubling. */
typedef struct json_out {
  char* data;
  size_t len, cap;
  int nul; /* the string held \u0000, which a C string cannot */
} json_out;

static int out_put(json_out* o, const char* bytes, size_t n) {
  if (o == NULL) return 0;
  if (o->len + n + 1 > o->cap) {
    size_t cap = o->cap ? o->cap : 32;
    char* grown;
    while (o->len + n + 1 > cap) cap *= 2;
    grown = realloc(o->data, cap);
    if (grown == NULL) return -1;
    o->data = grown;
    o->cap = cap;
  }
  memcpy(o->data + o->len, bytes, n);
  o->len += n;
  o->data[o->len] = '\0';
  return 0;
}

static void json_blank(json_text* t) {
  while (t->i < t->n && (t->s[t->i] == ' ' || t->s[t->i] == '\t' ||
                         t->s[t->i] == '\n' || t->s[t->i] == '\r'))
    ++t->i;
}

static int hex4(json_text* t, unsigned* out) {
  unsigned v = 0;
  int k;
  if (t->n - t->i < 4) return -1;
  for (k = 0; k < 4; ++k) {
    char c = t->s[t->i++];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

static int put_utf8(json_out* o, unsigned cp) {
  char b[4];
  size_t n;
  if (cp < 0x80) {
    b[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    b[0] = (char)(0xC0 | (cp >> 6));
    b[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    b[0] = (char)(0xE0 | (cp >> 12));
    b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    b[0] = (char)(0xF0 | (cp >> 18));
    b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    b[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  return out_put(o, b, n);
}

/* A string at t (its opening quote), decoded into o when o is set. */
static int json_string(json_text* t, json_out* o) {
  if (t->i >= t->n || t->s[t->i] != '"') return -1;
  ++t->i;
  while (t->i < t->n) {
    unsigned char c = (unsigned char)t->s[t->i++];
    unsigned cp, low;
    if (c == '"') return out_put(o, "", 0);
    if (c < 0x20) return -1;
    if (c != '\\') {
      if (out_put(o, (const char*)&c, 1) != 0) return -1;
      continue;
    }
    if (t->i >= t->n) return -1;
    c = (unsigned char)t->s[t->i++];
    switch (c) {
      case '"': case '\\': case '/': cp = c; break;
      case 'b': cp = '\b'; break;
      case 'f': cp = '\f'; break;
      case 'n': cp = '\n'; break;
      case 'r': cp = '\r'; break;
      case 't': cp = '\t'; break;
      case 'u':
        if (hex4(t, &cp) != 0) return -1;
        if (cp == 0) {
          if (o != NULL) o->nul = 1;
          continue;
        }
        if (cp >= 0xD800 && cp < 0xDC00) { /* a surrogate pair */
          if (t->n - t->i < 6 || t->s[t->i] != '\\' || t->s[t->i + 1] != 'u') return -1;
          t->i += 2;
          if (hex4(t, &low) != 0 || low < 0xDC00 || low > 0xDFFF) return -1;
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp < 0xE000) {
          return -1;
        }
        break;
      default: return -1;
    }
    if (put_utf8(o, cp) != 0) return -1;
  }
  return -1;
}

static int digits(json_text* t) {
  size_t start = t->i;
  while (t->i < t->n && isdigit((unsigned char)t->s[t->i])) ++t->i;
  return t->i > start ? 0 : -1;
}

static int json_number(json_text* t) {
  if (t->i < t->n && t->s[t->i] == '-') ++t->i;
  if (t->i < t->n && t->s[t->i] == '0') {
    ++t->i;
  } else if (digits(t) != 0) {
    return -1;
  }
  if (t->i < t->n && t->s[t->i] == '.') {
    ++t->i;
    if (digits(t) != 0) return -1;
  }
  if (t->i < t->n && (t->s[t->i] == 'e' || t->s[t->i] == 'E')) {
    ++t->i;
    if (t->i < t->n && (t->s[t->i] == '+' || t->s[t->i] == '-')) ++t->i;
    if (digits(t) != 0) return -1;
  }
  return 0;
}

static int json_word(json_text* t, const char* word) {
  size_t n = strlen(word);
  if (t->n - t->i < n || memcmp(t->s + t->i, word, n) != 0) return -1;
  t->i += n;
  return 0;
}

/* Any value at t; kind receives its first character. */
static int json_value(json_text* t, int depth, char* kind);

/* The members a caller wants of the top-level object: their names, and
 * where each one's value text goes (start NULL: absent; the last of
 * several with one name wins, as in Python's json). */
typedef struct json_want {
  const char* const* keys;
  int n;
  json_span* spans;
} json_want;

/* An object or array: members (key: value) or elements, comma-separated;
 * want (for the top-level object) collects the members it names. */
static int json_container(json_text* t, int depth, const json_want* want) {
  char close = t->s[t->i] == '{' ? '}' : ']';
  int first = 1;
  ++t->i;
  for (;;) {
    json_out name = {NULL, 0, 0, 0};
    size_t start;
    char kind;
    int matched = -1, k;
    json_blank(t);
    if (t->i < t->n && t->s[t->i] == close && first) break;
    if (close == '}') {
      if (json_string(t, want != NULL ? &name : NULL) != 0) {
        free(name.data);
        return -1;
      }
      for (k = 0; want != NULL && name.data != NULL && !name.nul && k < want->n; ++k)
        if (strcmp(name.data, want->keys[k]) == 0) matched = k;
      free(name.data);
      json_blank(t);
      if (t->i >= t->n || t->s[t->i++] != ':') return -1;
      json_blank(t);
    }
    start = t->i;
    if (json_value(t, depth + 1, &kind) != 0) return -1;
    if (matched >= 0) {
      want->spans[matched].start = t->s + start;
      want->spans[matched].len = t->i - start;
    }
    first = 0;
    json_blank(t);
    if (t->i < t->n && t->s[t->i] == ',') {
      ++t->i;
      continue;
    }
    if (t->i < t->n && t->s[t->i] == close) break;
    return -1;
  }
  ++t->i;
  return 0;
}

static int json_value(json_text* t, int depth, char* kind) {
  char c;
  if (depth > 64 || t->i >= t->n) return -1;
  c = t->s[t->i];
  *kind = c;
  switch (c) {
    case '{':
    case '[': return json_container(t, depth, NULL);
    case '"': return json_string(t, NULL);
    case 't': return json_word(t, "true");
    case 'f': return json_word(t, "false");
    case 'n': return json_word(t, "null");
    default: return json_number(t);
  }
}

int objstore_json_members(const char* json, size_t len, const char* const* keys, int n,
                          const char** starts, size_t* lens) {
  json_span spans[16];
  json_want want = {keys, n, spans};
  json_text t = {json, 0, len};
  int k;
  if (n > 16) return -1;
  memset(spans, 0, sizeof spans);
  json_blank(&t);
  if (t.i >= t.n || json[t.i] != '{' || json_container(&t, 0, &want) != 0) return -1;
  json_blank(&t);
  if (t.i != t.n) return -1;
  for (k = 0; k < n; ++k) {
    starts[k] = spans[k].start;
    lens[k] = spans[k].len;
  }
  return 0;
}

char* objstore_json_value(const char* value, size_t len) {
  if (value == NULL || len == 0 || value[0] == '{' || value[0] == '[' || value[0] == 'n') return NULL;
  return value[0] == '"' ? objstore_json_string(value, len) : strndup(value, len);
}

char* objstore_json_get(const char* json, size_t len, const char* key) {
  const char* start;
  size_t n;
  if (objstore_json_members(json, len, &key, 1, &start, &n) != 0) return NULL;
  return objstore_json_value(start, n);
}

int objstore_json_member(const char* json, size_t len, const char* key, const char** start,
                         size_t* n) {
  if (objstore_json_members(json, len, &key, 1, start, n) != 0) return -1;
  return *start != NULL;
}

int objstore_json_next(const char* array, size_t len, size_t* pos, const char** start,
                       size_t* n) {
  json_text t = {array, *pos, len};
  char kind;
  json_blank(&t);
  if (t.i == 0) { /* the opening bracket */
    if (t.i >= t.n || array[t.i] != '[') return -1;
    ++t.i;
    json_blank(&t);
    if (t.i < t.n && array[t.i] == ']') return 0;
  } else if (t.i < t.n && array[t.i] == ',') {
    ++t.i;
    json_blank(&t);
  } else {
    return t.i < t.n && array[t.i] == ']' ? 0 : -1;
  }
  *start = array + t.i;
  if (json_value(&t, 1, &kind) != 0) return -1;
  *n = (size_t)(array + t.i - *start);
  *pos = t.i;
  return 1;
}

char* objstore_json_string(const char* value, size_t len) {
  json_text t = {value, 0, len};
  json_out out = {NULL, 0, 0, 0};
  if (json_string(&t, &out) != 0 || out.nul || t.i != len) {
    free(out.data);
    return NULL;
  }
  return out.data;
}

/* ---- times ----------------------------------------------------------------- */

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, int m, int d) {
  int64_t era, yoe, doy, doe;
  y -= m <= 2;
  era = (y >= 0 ? y : y - 399) / 400;
  yoe = y - era * 400;
  doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

/* n digits at *s as a number, advancing *s; -1 when not digits. */
static int fixed(const char** s, int n) {
  int v = 0;
  while (n-- > 0) {
    if (!isdigit((unsigned char)**s)) return -1;
    v = v * 10 + (*(*s)++ - '0');
  }
  return v;
}

/* iso as whole Unix seconds and the nanoseconds of its fraction (digits
 * past the ninth cut): 0, or -1 when malformed. */
static int parse_iso(const char* iso, int64_t* seconds, int64_t* nanos) {
  const char* s = iso;
  int y, mo, d, h, mi, sec, off = 0, digits = 0;
  int64_t fraction = 0;
  y = fixed(&s, 4);
  if (y < 0 || *s++ != '-' || (mo = fixed(&s, 2)) < 1 || mo > 12 || *s++ != '-' ||
      (d = fixed(&s, 2)) < 1 || d > 31 || (*s != 'T' && *s != 't' && *s != ' '))
    return -1;
  ++s;
  if ((h = fixed(&s, 2)) < 0 || h > 23 || *s++ != ':' || (mi = fixed(&s, 2)) < 0 ||
      mi > 59 || *s++ != ':' || (sec = fixed(&s, 2)) < 0 || sec > 60)
    return -1;
  if (*s == '.') {
    ++s;
    if (!isdigit((unsigned char)*s)) return -1;
    for (; isdigit((unsigned char)*s); ++s, ++digits)
      if (digits < 9) fraction = fraction * 10 + (*s - '0');
    for (; digits < 9; ++digits) fraction *= 10;
  }
  if (*s == 'Z' || *s == 'z') {
    ++s;
  } else if (*s == '+' || *s == '-') {
    int sign = *s++ == '-' ? -1 : 1, oh, om;
    if ((oh = fixed(&s, 2)) < 0 || oh > 23) return -1;
    if (*s == ':') ++s;
    if ((om = fixed(&s, 2)) < 0 || om > 59) return -1;
    off = sign * (oh * 3600 + om * 60);
  }
  if (*s != '\0') return -1;
  *seconds = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off;
  *nanos = fraction;
  return 0;
}

int64_t objstore_parse_time(const char* iso) {
  int64_t seconds, nanos;
  return parse_iso(iso, &seconds, &nanos) == 0 ? seconds : -1;
}

int objstore_parse_time_ns(const char* iso, int64_t* ns) {
  int64_t seconds, nanos;
  if (parse_iso(iso, &seconds, &nanos) != 0 || seconds >= INT64_MAX / 1000000000 ||
      seconds <= INT64_MIN / 1000000000)
    return -1;
  *ns = seconds * 1000000000 + nanos;
  return 0;
}
