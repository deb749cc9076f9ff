/* A store's request, the part every store's has (objstore.h, "a store's
 * request"): its settings snapshot, its name in messages, its URL,
 * headers and body, made and freed once for every store. */
#define _POSIX_C_SOURCE 200809L

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objstore.h"

void* objstore_call_new(size_t size, objstore_fs* fs, const char* method, const char* bucket, const char* key,
                        objstore_exchange* x, TF_Status* status) {
  objstore_call* c = calloc(1, size);
  size_t n = strlen(method) + strlen(fs->scheme) + strlen(bucket) + (key != NULL ? strlen(key) : 0) + 8;
  if (c != NULL) {
    c->fs = fs;
    c->config = plugin_config_acquire(&fs->base.config);
    x->store_request = c;
    x->method = method;
    if ((c->what = malloc(n)) != NULL) {
      snprintf(c->what, n, "%s %s://%s%s%s", method, fs->scheme, bucket, key != NULL && *key ? "/" : "",
               key != NULL ? key : "");
      return c;
    }
  }
  plugin_set_oom(status);
  return NULL;
}

void objstore_call_free(objstore_exchange* x) {
  objstore_call* c = (objstore_call*)x->store_request;
  if (c == NULL) return;
  plugin_config_release(&c->fs->base.config, c->config);
  plugin_buf_free(&c->url);
  plugin_buf_free(&c->body);
  curl_slist_free_all(c->headers);
  curl_slist_free_all(c->sent);
  free(c->what);
  free(c);
  x->store_request = NULL;
}
