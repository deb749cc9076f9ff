/* AWS's shared config and credentials files, read with libc only (see
 * s3_formats.h); JSON and times are the engine's (objstore_formats.c). */
#define _POSIX_C_SOURCE 200809L /* strndup */
#include "s3_formats.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* ---- INI ------------------------------------------------------------------- */

static int blank(char c) { return c == ' ' || c == '\t'; }

/* [s, e) without surrounding blanks. */
static void trim(const char** s, const char** e) {
  while (*s < *e && isspace((unsigned char)**s)) ++*s;
  while (*e > *s && isspace((unsigned char)(*e)[-1])) --*e;
}

/* Whether [s, e) names section, comparing runs of blanks as one space
 * ("profile  dev" is "profile dev"). */
static int same_section(const char* s, const char* e, const char* section) {
  trim(&s, &e);
  while (s < e && *section != '\0') {
    if (blank(*s)) {
      if (*section != ' ') return 0;
      while (s < e && blank(*s)) ++s;
      ++section;
      continue;
    }
    if (*s++ != *section++) return 0;
  }
  return s == e && *section == '\0';
}

static int same_key(const char* s, const char* e, const char* key, size_t key_len,
                    int fold) {
  size_t i;
  if ((size_t)(e - s) != key_len) return 0;
  for (i = 0; i < key_len; ++i) {
    char a = s[i], b = key[i];
    if (fold) {
      a = (char)tolower((unsigned char)a);
      b = (char)tolower((unsigned char)b);
    }
    if (a != b) return 0;
  }
  return 1;
}

char* s3_ini_get(const char* text, const char* section, const char* key,
                 int* section_found) {
  const char* dot = strchr(key, '.');
  size_t top_len = dot != NULL ? (size_t)(dot - key) : strlen(key);
  const char* line = text;
  int in_section = 0, have_option = 0, in_nested = 0, found = 0;
  char* value = NULL;
  while (*line != '\0') {
    const char* end = strchr(line, '\n');
    const char* next = end != NULL ? end + 1 : line + strlen(line);
    const char *s = line, *e = end != NULL ? end : next;
    int indented = blank(*s);
    line = next;
    trim(&s, &e);
    if (s == e || *s == '#' || *s == ';') continue;
    if (!indented && *s == '[') {
      const char* close = e;
      while (close > s && close[-1] != ']') --close;
      if (close == s) continue; /* not a header */
      in_section = same_section(s + 1, close - 1, section);
      found |= in_section;
      have_option = in_nested = 0;
      continue;
    }
    if (indented && have_option) {
      /* A continuation line: inside a nested block, "name = value". */
      const char* eq = memchr(s, '=', (size_t)(e - s));
      const char *ns = s, *ne = eq, *vs = eq + 1, *ve = e;
      if (!in_section || !in_nested || dot == NULL || eq == NULL) continue;
      trim(&ns, &ne);
      trim(&vs, &ve);
      if (same_key(ns, ne, dot + 1, strlen(dot + 1), 0)) {
        free(value);
        value = strndup(vs, (size_t)(ve - vs));
      }
      continue;
    }
    {
      const char *sep = s, *ns = s, *ne, *vs, *ve = e;
      while (sep < e && *sep != '=' && *sep != ':') ++sep;
      if (sep == e) continue; /* neither an option nor a header */
      ne = sep;
      vs = sep + 1;
      trim(&ns, &ne);
      trim(&vs, &ve);
      have_option = 1;
      in_nested = vs == ve && same_key(ns, ne, key, top_len, 1);
      if (in_section && dot == NULL && same_key(ns, ne, key, top_len, 1)) {
        free(value);
        value = strndup(vs, (size_t)(ve - vs));
      }
    }
  }
  if (section_found != NULL) *section_found = found;
  return value;
}
