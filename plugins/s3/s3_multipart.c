/* Multipart uploads and server-side copies (whole objects, or in parts of
 * part_size in parallel); the writable files of s3_files.c call back into
 * these. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

char* s3_create_multipart(s3_fs* fs, const s3_config* cfg, const objstore_path* dst,
                          const s3_attributes* attributes, TF_Status* status) {
  s3_param params[1] = {{"uploads", NULL}};
  s3_request req;
  s3_response resp;
  char* upload_id = NULL;
  s3_request_init(&req, &resp, "POST", dst->bucket, dst->key);
  req.params = params;
  req.num_params = 1;
  req.content_type = s3_content_type(cfg, attributes, dst->key);
  req.attributes = attributes;
  if (s3_execute(fs, cfg, &req, &resp, status) == 0) {
    upload_id = objstore_xml_find(resp.body.data, resp.body.len, "UploadId");
    if (upload_id == NULL)
      TF_SetStatus(status, TF_INTERNAL, "s3: CreateMultipartUpload gave no UploadId");
  }
  objstore_response_free(&resp);
  return upload_id;
}

void s3_part_request(const objstore_path* dst, const char* upload_id, int part_number,
                     const char* data, size_t len, const char* copy_source, const char* copy_range,
                     char number[16], s3_param params[2], s3_request* req, s3_response* resp) {
  snprintf(number, 16, "%d", part_number);
  params[0] = (s3_param){"partNumber", number};
  params[1] = (s3_param){"uploadId", upload_id};
  s3_request_init(req, resp, "PUT", dst->bucket, dst->key);
  req->params = params;
  req->num_params = 2;
  req->body = copy_source != NULL ? "" : data;
  req->body_len = copy_source != NULL ? 0 : len;
  req->copy_source = copy_source;
  req->copy_range = copy_range;
}

int s3_complete_multipart(s3_fs* fs, const s3_config* cfg, const objstore_path* dst,
                          const char* upload_id, char** etags, int parts,
                          TF_Status* status) {
  s3_param params[1] = {{"uploadId", upload_id}};
  plugin_buf body = {0};
  s3_request req;
  s3_response resp;
  int i, rc;
  plugin_buf_append(&body, "<CompleteMultipartUpload>", 25);
  for (i = 0; i < parts; ++i) {
    char part[256];
    snprintf(part, sizeof part, "<Part><PartNumber>%d</PartNumber><ETag>", i + 1);
    plugin_buf_append(&body, part, strlen(part));
    objstore_xml_escape_into(&body, etags[i]);
    plugin_buf_append(&body, "</ETag></Part>", 14);
  }
  if (plugin_buf_append(&body, "</CompleteMultipartUpload>", 26) != 0) {
    plugin_buf_free(&body);
    plugin_set_oom(status);
    return -1;
  }
  s3_request_init(&req, &resp, "POST", dst->bucket, dst->key);
  req.params = params;
  req.num_params = 1;
  req.body = body.data;
  req.body_len = body.len;
  rc = s3_execute(fs, cfg, &req, &resp, status);
  objstore_response_free(&resp);
  plugin_buf_free(&body);
  return rc;
}

void s3_abort_multipart(s3_fs* fs, const s3_config* cfg, const objstore_path* dst,
                        const char* upload_id, TF_Status* status) {
  s3_param params[1] = {{"uploadId", upload_id}};
  s3_request req;
  s3_response resp;
  TF_Status* ignored = status == NULL ? TF_NewStatus() : NULL;
  s3_request_init(&req, &resp, "DELETE", dst->bucket, dst->key);
  req.params = params;
  req.num_params = 1;
  s3_execute(fs, cfg, &req, &resp, status != NULL ? status : ignored);
  objstore_response_free(&resp);
  if (ignored != NULL) TF_DeleteStatus(ignored);
}

/* "bucket/key", as x-amz-copy-source names an object. */
static char* copy_source(const objstore_path* src, TF_Status* status) {
  size_t n = strlen(src->bucket) + strlen(src->key) + 2;
  char* source = malloc(n);
  if (source == NULL) plugin_set_oom(status);
  else snprintf(source, n, "%s/%s", src->bucket, src->key);
  return source;
}

/* One part copy's request and what it points into. */
typedef struct part_copy {
  char number[16];
  char range[64];
  s3_param params[2];
} part_copy;

/* Every part copy (UploadPartCopy) in flight at once from this thread, as
 * far as max_connections allows; etags[i] the ETag of part i + 1. */
int s3_copy_parts(s3_fs* fs, const s3_config* cfg, const objstore_path* src, int64_t length,
                  int64_t part_size, const objstore_path* dst, const char* upload_id,
                  char** etags, TF_Status* status) {
  int n = (int)((length + part_size - 1) / part_size), i, rc = -1;
  char* source = copy_source(src, status);
  part_copy* parts = calloc((size_t)n, sizeof *parts);
  s3_request* reqs = calloc((size_t)n, sizeof *reqs);
  s3_response* resps = calloc((size_t)n, sizeof *resps);
  TF_Status** statuses = calloc((size_t)n, sizeof *statuses);
  if (source == NULL) goto done;
  if (parts == NULL || reqs == NULL || resps == NULL || statuses == NULL) {
    plugin_set_oom(status);
    goto done;
  }
  for (i = 0; i < n; ++i) {
    int64_t first = (int64_t)i * part_size, last = first + part_size - 1;
    if (last >= length) last = length - 1;
    snprintf(parts[i].range, sizeof parts[i].range, "bytes=%lld-%lld", (long long)first, (long long)last);
    s3_part_request(dst, upload_id, i + 1, NULL, 0, source, parts[i].range, parts[i].number, parts[i].params,
                    &reqs[i], &resps[i]);
    statuses[i] = TF_NewStatus();
  }
  if (s3_execute_many(fs, cfg, n, reqs, resps, statuses) != 0) {
    for (i = 0; i < n && TF_GetCode(statuses[i]) == TF_OK; ++i) {
    }
    TF_SetStatus(status, TF_GetCode(statuses[i]), TF_Message(statuses[i]));
    goto done;
  }
  for (i = 0; i < n; ++i) {
    char* etag = objstore_xml_find(resps[i].body.data, resps[i].body.len, "ETag");
    etags[i] = strdup(etag != NULL ? etag : resps[i].etag);
    free(etag);
    if (etags[i] == NULL) {
      plugin_set_oom(status);
      goto done;
    }
  }
  TF_SetStatus(status, TF_OK, "");
  rc = 0;
done:
  for (i = 0; i < n && statuses != NULL; ++i) {
    if (resps != NULL) objstore_response_free(&resps[i]);
    if (statuses[i] != NULL) TF_DeleteStatus(statuses[i]);
  }
  free(statuses);
  free(resps);
  free(reqs);
  free(parts);
  free(source);
  return rc;
}

int s3_copy_object(s3_fs* fs, const s3_config* cfg, const objstore_path* src,
                   int64_t size, const objstore_path* dst, TF_Status* status) {
  int64_t part_size = s3_copy_part_size(cfg->part_size, size);
  int parts = (int)((size + part_size - 1) / part_size), i, rc = -1;
  char** etags;
  char* upload_id;
  if (size <= cfg->part_size) {
    s3_request req;
    s3_response resp;
    char* source = copy_source(src, status);
    if (source == NULL) return -1;
    s3_request_init(&req, &resp, "PUT", dst->bucket, dst->key);
    req.body = "";
    req.copy_source = source;
    rc = s3_execute(fs, cfg, &req, &resp, status);
    objstore_response_free(&resp);
    free(source);
    return rc;
  }
  etags = calloc((size_t)parts, sizeof *etags);
  if (etags == NULL) {
    plugin_set_oom(status);
    return -1;
  }
  upload_id = s3_create_multipart(fs, cfg, dst, NULL, status);
  if (upload_id != NULL) {
    if (s3_copy_parts(fs, cfg, src, size, part_size, dst, upload_id, etags, status) == 0)
      rc = s3_complete_multipart(fs, cfg, dst, upload_id, etags, parts, status);
    if (rc != 0) s3_abort_multipart(fs, cfg, dst, upload_id, NULL);
    free(upload_id);
  }
  for (i = 0; i < parts; ++i) free(etags[i]);
  free(etags);
  return rc;
}

/* Both rename and copy: the source must be a file, the target not a
 * directory. */

/* ---- incomplete uploads ------------------------------------------------------ */

/* Whether key is the key of p or lies below it. */
static int under(const char* key, const objstore_path* p) {
  size_t n = strlen(p->key);
  return n == 0 || (strncmp(key, p->key, n) == 0 && (key[n] == '\0' || key[n] == '/'));
}

/* Every page of ListMultipartUploads for p's key as a prefix. */
static int list_uploads(s3_fs* fs, const s3_config* cfg, const objstore_path* p, s3_listing* l,
                        TF_Status* status) {
  char* key_marker = NULL;
  char* id_marker = NULL;
  int rc;
  do {
    s3_param params[5];
    int n = 0;
    s3_request req;
    s3_response resp;
    params[n++] = (s3_param){"uploads", NULL};
    params[n++] = (s3_param){"prefix", p->key};
    params[n++] = (s3_param){"encoding-type", "url"};
    if (key_marker != NULL) params[n++] = (s3_param){"key-marker", key_marker};
    if (id_marker != NULL) params[n++] = (s3_param){"upload-id-marker", id_marker};
    s3_request_init(&req, &resp, "GET", p->bucket, NULL);
    req.params = params;
    req.num_params = n;
    l->url_encoded = 1;
    rc = s3_execute(fs, cfg, &req, &resp, status);
    if (rc == 0 && s3_parse_listing(resp.body.data, resp.body.len, l) != 0) {
      TF_SetStatus(status, TF_INTERNAL, "s3: could not parse a ListMultipartUploads answer");
      rc = -1;
    }
    objstore_response_free(&resp);
    if (rc == 0 && l->truncated && key_marker != NULL && l->next_token != NULL &&
        strcmp(key_marker, l->next_token) == 0 &&
        strcmp(id_marker, l->next_upload_id != NULL ? l->next_upload_id : "") == 0) {
      TF_SetStatus(status, TF_DATA_LOSS,
                   "s3: a ListMultipartUploads page names itself as the next: the store would be listed for ever");
      rc = -1;
    }
    free(key_marker);
    free(id_marker);
    key_marker = id_marker = NULL;
    if (rc == 0 && l->truncated) {
      if (l->next_token == NULL || l->upload_ids.count != l->keys.count) {
        TF_SetStatus(status, TF_INTERNAL, "s3: a truncated ListMultipartUploads without markers");
        rc = -1;
      } else {
        key_marker = strdup(l->next_token);
        id_marker = strdup(l->next_upload_id != NULL ? l->next_upload_id : "");
      }
    }
  } while (rc == 0 && l->truncated);
  return rc;
}

int s3_get_incomplete_writes(const TF_Filesystem* filesystem, const char* path,
                             char*** paths, char*** ids, int64_t** started_nsec,
                             TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  objstore_path p = {NULL, NULL};
  s3_listing l;
  plugin_strlist names = {NULL, 0, 0}, found_ids = {NULL, 0, 0};
  int64_t* times = NULL;
  int i, count = -1;
  memset(&l, 0, sizeof l);
  *paths = *ids = NULL;
  *started_nsec = NULL;
  if (objstore_path_parse("s3", path, &p, status) != 0) goto done;
  if (*p.bucket == '\0') {
    TF_SetStatus(status, TF_INVALID_ARGUMENT,
                 "s3: incomplete writes are listed per bucket: name one (s3://bucket/...)");
    goto done;
  }
  if (list_uploads(fs, cfg, &p, &l, status) != 0) goto done;
  if (l.upload_ids.count != l.keys.count) {
    TF_SetStatus(status, TF_INTERNAL, "s3: an upload without an UploadId in a listing");
    goto done;
  }
  times = plugin_memory_allocate((size_t)(l.keys.count > 0 ? l.keys.count : 1) * sizeof *times);
  if (times == NULL) goto oom;
  for (i = 0; i < l.keys.count; ++i) {
    const char* key = l.keys.items[i];
    size_t skip = strlen(p.key);
    if (!under(key, &p)) continue;
    /* Relative to path: "" for path itself, "a/b" below it. */
    if (skip > 0) skip += key[skip] == '/';
    if (plugin_strlist_push(&names, key + skip, strlen(key + skip)) != 0 ||
        plugin_strlist_push(&found_ids, l.upload_ids.items[i], strlen(l.upload_ids.items[i])) != 0)
      goto oom;
    times[names.count - 1] = l.mtimes[i];
  }
  count = plugin_strlist_release(&names, paths);
  plugin_strlist_release(&found_ids, ids);
  if (count > 0) {
    *started_nsec = times;
    times = NULL;
  }
  TF_SetStatus(status, TF_OK, "");
  goto done;
oom:
  plugin_set_oom(status);
done:
  plugin_memory_free(times);
  plugin_strlist_free(&names);
  plugin_strlist_free(&found_ids);
  s3_listing_free(&l);
  objstore_path_free(&p);
  s3_config_release(fs, cfg);
  return count;
}

void s3_abort_incomplete_write(const TF_Filesystem* filesystem, const char* path,
                               const char* id, TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  objstore_path p = {NULL, NULL};
  if (objstore_path_parse("s3", path, &p, status) == 0) {
    if (*p.bucket == '\0' || *p.key == '\0')
      TF_SetStatus(status, TF_INVALID_ARGUMENT, "s3: an incomplete write is of an object: name its key");
    else
      s3_abort_multipart(fs, cfg, &p, id, status);
  }
  objstore_path_free(&p);
  s3_config_release(fs, cfg);
}
