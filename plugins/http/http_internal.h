/*
 * The http plugin's internals: http:// and https://, read-only, on the
 * object-store engine (plugins/objstore).
 *   http.c        the store's hooks, the filesystem ops and registration
 *   http_index.c  the links of an HTML index page, for listings
 *
 * A path is the plugin's "/host[:port]/rest"; its URL is
 * scheme://host[:port]/rest with the bytes a URL cannot carry
 * percent-encoded ("%" itself is kept: a name given already encoded stays
 * so).
 */
#ifndef ASYNCFS_HTTP_INTERNAL_H_
#define ASYNCFS_HTTP_INTERNAL_H_

#include <stdint.h>

#include "asyncfs/filesystem_interface.h"
#include "objstore.h"
#include "plugin_common.h"
#include "plugin_fs.h"

typedef struct http_config {
  plugin_settings base;
  char* bearer_token; /* sent as "Authorization: Bearer ...", to the URL's own origin only */
  char* headers;      /* "Name: value" lines sent with every request to the URL's origin */
  objstore_settings transport; /* the engine's: timeouts, retries, connections, TLS */
  int64_t read_ahead;
  int64_t part_size;
  int64_t max_redirects;
} http_config;

/* A filesystem of the http store: the engine's state (objstore_fs: its
 * settings, engine and scheme, "http" or "https"), without the
 * namespace's hooks: stat and listings are the plugin's own. */
typedef objstore_fs http_fs;

/* The links of an HTML index page at dir_url (ending in "/") that name
 * its children: same origin, one level below, no query; each name
 * percent-decoded, a folder's without its "/". Pushed into listing;
 * 0, or -1 when out of memory. */
int http_index_children(const char* html, size_t len, const char* dir_url, plugin_listing* listing);

#endif /* ASYNCFS_HTTP_INTERNAL_H_ */
