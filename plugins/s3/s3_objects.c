/* What is at an s3 path: listings, HEAD, and the probe every operation
 * starts with (a path's bucket and key are the engine's objstore_path). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3_internal.h"

void s3_list_request(s3_list_call* c, const char* bucket, const char* prefix, const char* delimiter,
                     int max_keys, const char* token) {
  int n = 0;
  s3_request_init(&c->req, NULL, "GET", bucket, NULL);
  snprintf(c->max, sizeof c->max, "%d", max_keys);
  c->params[n++] = (s3_param){"list-type", "2"};
  c->params[n++] = (s3_param){"prefix", prefix};
  c->params[n++] = (s3_param){"max-keys", c->max};
  if (delimiter != NULL) c->params[n++] = (s3_param){"delimiter", delimiter};
  if (token != NULL) c->params[n++] = (s3_param){"continuation-token", token};
  /* Keys come back percent-encoded: a key with a control character would
   * otherwise make the XML, and so the whole page, unreadable. */
  c->params[n++] = (s3_param){"encoding-type", "url"};
  c->req.params = c->params;
  c->req.num_params = n;
}

/* The types a browser or a data tool most needs right, by extension. */
static const char* const content_types[][2] = {
    {"avro", "application/avro"},     {"bz2", "application/x-bzip2"},
    {"css", "text/css"},              {"csv", "text/csv"},
    {"gif", "image/gif"},             {"gz", "application/gzip"},
    {"htm", "text/html"},             {"html", "text/html"},
    {"ico", "image/vnd.microsoft.icon"}, {"jpeg", "image/jpeg"},
    {"jpg", "image/jpeg"},            {"js", "text/javascript"},
    {"json", "application/json"},     {"jsonl", "application/jsonl"},
    {"md", "text/markdown"},          {"mp3", "audio/mpeg"},
    {"mp4", "video/mp4"},             {"ndjson", "application/x-ndjson"},
    {"orc", "application/vnd.apache.orc"}, {"parquet", "application/vnd.apache.parquet"},
    {"pdf", "application/pdf"},       {"png", "image/png"},
    {"svg", "image/svg+xml"},         {"tar", "application/x-tar"},
    {"tsv", "text/tab-separated-values"}, {"txt", "text/plain"},
    {"wasm", "application/wasm"},     {"webp", "image/webp"},
    {"xml", "application/xml"},       {"yaml", "application/yaml"},
    {"yml", "application/yaml"},      {"zip", "application/zip"},
    {"zst", "application/zstd"},
};

const char* s3_content_type(const s3_config* cfg, const s3_attributes* attributes,
                            const char* key) {
  const char* slash = strrchr(key, '/');
  const char* dot = strrchr(slash != NULL ? slash + 1 : key, '.');
  size_t i;
  if (attributes != NULL && attributes->content_type != NULL) return attributes->content_type;
  if (strcmp(cfg->content_type, "auto") != 0)
    return *cfg->content_type != '\0' ? cfg->content_type : "application/octet-stream";
  if (dot != NULL && dot[1] != '\0')
    for (i = 0; i < sizeof content_types / sizeof content_types[0]; ++i)
      if (strcasecmp(dot + 1, content_types[i][0]) == 0) return content_types[i][1];
  return "application/octet-stream";
}

/* ---- attributes ----------------------------------------------------------- */

/* A metadata name S3 keeps as given: lowercase letters, digits, '-', '_'
 * and '.' (S3 lowercases names; others would not come back as sent). */
static int good_name(const char* s) {
  size_t n = strlen(s), i;
  if (n == 0 || n > 128) return 0;
  for (i = 0; i < n; ++i)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
          s[i] == '_' || s[i] == '.'))
      return 0;
  return 1;
}

/* A header value: printable ASCII, so nothing can end the header early. */
static int good_value(const char* s) {
  for (; *s != '\0'; ++s)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) return 0;
  return 1;
}

/* value as a signature canonicalizes a header's: without surrounding
 * spaces, runs of spaces as one; the same text is sent and signed. */
static int push_canonical(plugin_strlist* list, const char* value) {
  size_t n = 0;
  char* out = malloc(strlen(value) + 1);
  int rc;
  if (out == NULL) return -1;
  while (*value == ' ') ++value;
  for (; *value != '\0'; ++value)
    if (*value != ' ' || (value[1] != ' ' && value[1] != '\0')) out[n++] = *value;
  rc = plugin_strlist_push(list, out, n);
  free(out);
  return rc;
}

static int bad_attribute(TF_Status* status, const char* what, const char* name) {
  char msg[400];
  snprintf(msg, sizeof msg, "s3: attribute '%.200s': %s", name, what);
  TF_SetStatus(status, TF_INVALID_ARGUMENT, msg);
  return -1;
}

int s3_attributes_set(s3_attributes* a, const char* const* names, const char* const* values,
                      int num, TF_Status* status) {
  int i, j;
  for (i = 0; i < num; ++i) {
    if (!good_name(names[i]))
      return bad_attribute(status, "a name is 1 to 128 lowercase letters, digits, '-', '_' or '.'",
                           names[i]);
    if (!good_value(values[i]))
      return bad_attribute(
          status, "a value is printable ASCII (no control character, no byte above 0x7e)", names[i]);
    for (j = 0; j < i; ++j)
      if (strcmp(names[i], names[j]) == 0) return bad_attribute(status, "given twice", names[i]);
  }
  for (i = 0; i < num; ++i) {
    int at;
    if (strcmp(names[i], "content-type") == 0) {
      free(a->content_type);
      a->content_type = strdup(values[i]);
      if (a->content_type == NULL) goto oom;
      continue;
    }
    if (plugin_strlist_push(&a->names, names[i], strlen(names[i])) != 0 ||
        push_canonical(&a->values, values[i]) != 0)
      goto oom;
    /* Sorted by name, as the signature lists headers. */
    for (at = a->names.count - 1; at > 0 && strcmp(a->names.items[at - 1], a->names.items[at]) > 0;
         --at) {
      char* n = a->names.items[at];
      char* v = a->values.items[at];
      a->names.items[at] = a->names.items[at - 1];
      a->values.items[at] = a->values.items[at - 1];
      a->names.items[at - 1] = n;
      a->values.items[at - 1] = v;
    }
  }
  return 0;
oom:
  plugin_set_oom(status);
  return -1;
}

int s3_simple_request(s3_fs* fs, const s3_config* cfg, const char* method,
                      const char* bucket, const char* key, s3_response* resp,
                      TF_Status* status) {
  s3_request req;
  s3_response ignored;
  int rc;
  s3_request_init(&req, &ignored, method, bucket, key);
  rc = s3_execute(fs, cfg, &req, resp != NULL ? resp : &ignored, status);
  objstore_response_free(&ignored);
  return rc;
}

int s3_check_object(const objstore_path* p, const char* what, TF_Status* status) {
  char msg[400];
  if (*p->key != '\0') return 0;
  snprintf(msg, sizeof msg, "%s s3://%s: a bucket is a directory", what, p->bucket);
  TF_SetStatus(status, TF_FAILED_PRECONDITION, msg);
  return -1;
}
