/* The children of a folder served as an HTML index page (nginx's
 * autoindex, Apache's, Python's http.server): the href of every link,
 * resolved against the folder's URL and kept when it names something one
 * level below it on the same origin. Best effort, as fsspec's: a page that
 * is not such an index gives whatever links it has below the folder. */
#define _POSIX_C_SOURCE 200809L

#include <ctype.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http_internal.h"

/* The value of the attribute starting at s (after "href="), HTML entities
 * decoded, malloc'd; *end past it. */
static char* attribute_value(const char* s, const char* limit, const char** end) {
  char quote = 0, *out, *o;
  const char* v = s;
  while (v < limit && isspace((unsigned char)*v)) ++v;
  if (v < limit && (*v == '"' || *v == '\'')) quote = *v++;
  s = v;
  while (v < limit && (quote ? *v != quote : !isspace((unsigned char)*v) && *v != '>')) ++v;
  *end = v;
  out = o = malloc((size_t)(v - s) + 1);
  if (out == NULL) return NULL;
  while (s < v) {
    static const struct {
      const char* name;
      char c;
    } entities[] = {{"&amp;", '&'}, {"&quot;", '"'}, {"&#39;", '\''}, {"&#x27;", '\''},
                    {"&lt;", '<'},  {"&gt;", '>'}};
    size_t i, n = sizeof entities / sizeof entities[0];
    for (i = 0; i < n; ++i) {
      size_t len = strlen(entities[i].name);
      if ((size_t)(v - s) >= len && strncmp(s, entities[i].name, len) == 0) {
        *o++ = entities[i].c;
        s += len;
        break;
      }
    }
    if (i == n) *o++ = *s++;
  }
  *o = '\0';
  return out;
}

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = (char)tolower((unsigned char)c);
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* s[0..len) percent-decoded in place; its new length. */
static size_t percent_decode(char* s, size_t len) {
  size_t i, o = 0;
  for (i = 0; i < len; ++i) {
    if (s[i] == '%' && i + 2 < len && hex(s[i + 1]) >= 0 && hex(s[i + 2]) >= 0) {
      s[o++] = (char)(hex(s[i + 1]) * 16 + hex(s[i + 2]));
      i += 2;
    } else {
      s[o++] = s[i];
    }
  }
  return o;
}

/* Whether listing already holds name. */
static int listed(const plugin_listing* listing, const char* name, size_t len) {
  int i;
  for (i = 0; i < listing->names.count; ++i)
    if (strlen(listing->names.items[i]) == len && memcmp(listing->names.items[i], name, len) == 0)
      return 1;
  return 0;
}

/* The child href names below dir (a resolved, absolute URL), if any. */
static int push_child(const char* href, CURLU* base, const char* dir_path, plugin_listing* listing) {
  CURLU* u = curl_url_dup(base);
  char *path = NULL, *query = NULL, *scheme = NULL, *host = NULL, *dir_scheme = NULL, *dir_host = NULL;
  char *port = NULL, *dir_port = NULL;
  int rc = 0;
  size_t dlen = strlen(dir_path), len;
  if (u == NULL) return -1;
  if (curl_url_set(u, CURLUPART_URL, href, 0) != CURLUE_OK) goto done;
  curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
  curl_url_get(u, CURLUPART_HOST, &host, 0);
  curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
  curl_url_get(base, CURLUPART_SCHEME, &dir_scheme, 0);
  curl_url_get(base, CURLUPART_HOST, &dir_host, 0);
  curl_url_get(base, CURLUPART_PORT, &dir_port, CURLU_DEFAULT_PORT);
  curl_url_get(u, CURLUPART_PATH, &path, 0);
  if (curl_url_get(u, CURLUPART_QUERY, &query, 0) == CURLUE_OK && query != NULL) goto done;
  if (scheme == NULL || host == NULL || port == NULL || path == NULL || dir_scheme == NULL ||
      dir_host == NULL || dir_port == NULL || strcasecmp(scheme, dir_scheme) != 0 ||
      strcasecmp(host, dir_host) != 0 || strcmp(port, dir_port) != 0)
    goto done;
  if (strncmp(path, dir_path, dlen) != 0) goto done;
  len = strlen(path + dlen);
  if (len > 0 && path[dlen + len - 1] == '/') --len; /* a folder */
  if (len == 0 || memchr(path + dlen, '/', len) != NULL) goto done; /* itself, or deeper */
  len = percent_decode(path + dlen, len);
  if (len == 0 || memchr(path + dlen, '/', len) != NULL ||
      (len <= 2 && strncmp(path + dlen, "..", len) == 0))
    goto done;
  if (!listed(listing, path + dlen, len)) rc = plugin_listing_push(listing, path + dlen, len, NULL);
done:
  curl_free(path);
  curl_free(query);
  curl_free(scheme);
  curl_free(host);
  curl_free(port);
  curl_free(dir_scheme);
  curl_free(dir_host);
  curl_free(dir_port);
  curl_url_cleanup(u);
  return rc;
}

int http_index_children(const char* html, size_t len, const char* dir_url, plugin_listing* listing) {
  CURLU* base = curl_url();
  char* dir_path = NULL;
  const char *p = html, *limit = html + len;
  int rc = 0;
  if (base == NULL || curl_url_set(base, CURLUPART_URL, dir_url, 0) != CURLUE_OK ||
      curl_url_get(base, CURLUPART_PATH, &dir_path, 0) != CURLUE_OK) {
    curl_url_cleanup(base);
    return -1;
  }
  while (rc == 0 && p + 5 < limit) {
    const char* end;
    char* href;
    if (strncasecmp(p, "href=", 5) != 0) {
      ++p;
      continue;
    }
    href = attribute_value(p + 5, limit, &end);
    if (href == NULL) {
      rc = -1;
      break;
    }
    if (*href != '\0' && *href != '#') rc = push_child(href, base, dir_path, listing);
    free(href);
    p = end;
  }
  curl_free(dir_path);
  curl_url_cleanup(base);
  return rc;
}
