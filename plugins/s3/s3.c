/*
 * The s3 plugin: s3://bucket/key on any S3-compatible object store.
 *
 * Paths translate to "/bucket/key". Directories, listings, globs,
 * deletes and renames are the engine's namespace (objstore_tree.c: a
 * prefix is a directory, create_dir writes a "dir/" marker only if none
 * is there) on S3's request shapes (s3_tree.c). Buckets are the top-level
 * directories. What an object store cannot promise, and how the plugin
 * behaves instead, is in docs/s3.md.
 */
#define _POSIX_C_SOURCE 200809L

#include <curl/curl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3_internal.h"

/* ---- filesystem lifecycle -------------------------------------------------------- */

static const objstore_fs_spec s3_spec = {&s3_store,
                                         &s3_tree_hooks,
                                         offsetof(s3_config, transport),
                                         offsetof(s3_config, read_ahead),
                                         offsetof(s3_config, part_size),
                                         s3_credential_source};

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  s3_defaults defaults;
  s3_fs* fs;
  s3_defaults_load(&defaults);
  fs = objstore_fs_create(filesystem, sizeof *fs, &s3_schema, &defaults.config, &s3_spec, status);
  if (fs != NULL) snprintf(fs->setup_error, sizeof fs->setup_error, "%s", defaults.error);
  s3_defaults_free(&defaults);
  if (fs != NULL) s3_credentials_init(fs);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  s3_fs* fs = s3_fs_of(filesystem);
  if (fs == NULL) return;
  objstore_engine_free(fs->store.engine);
  s3_credentials_destroy(fs);
  plugin_fs_free(filesystem);
}

/* ---- attributes ------------------------------------------------------------------------- */

int s3_get_file_attributes(const TF_Filesystem* filesystem, const char* path, char*** names,
                           char*** values, TF_Status* status) {
  s3_fs* fs = s3_fs_of(filesystem);
  s3_config* cfg = s3_config_acquire(fs);
  objstore_path p = {NULL, NULL};
  s3_request req;
  s3_response resp;
  plugin_strlist out_names = {NULL, 0, 0}, out_values = {NULL, 0, 0};
  int i, count = -1;
  *names = *values = NULL;
  memset(&resp, 0, sizeof resp);
  if (objstore_path_parse("s3", path, &p, status) != 0 ||
      s3_check_object(&p, "attributes of", status) != 0)
    goto done;
  s3_request_init(&req, &resp, "HEAD", p.bucket, p.key);
  req.want_attributes = 1;
  if (s3_execute(fs, cfg, &req, &resp, status) != 0) {
    if (resp.http == 404) { /* what is there instead, as stat says it */
      TF_FileStatistics stats;
      char msg[1200];
      objstore_fs_stat(filesystem, path, &stats, status);
      snprintf(msg, sizeof msg, "attributes of s3://%s/%s: %s", p.bucket, p.key,
               stats.is_directory ? "is a directory" : "the object changed; ask again");
      if (TF_GetCode(status) == TF_OK)
        TF_SetStatus(status, stats.is_directory ? TF_FAILED_PRECONDITION : TF_ABORTED, msg);
    }
  } else {
    const s3_attributes* a = &resp.attributes;
    const char* type = a->content_type != NULL ? a->content_type : "application/octet-stream";
    int bad = plugin_strlist_push(&out_names, "content-type", 12) != 0 ||
              plugin_strlist_push(&out_values, type, strlen(type)) != 0;
    for (i = 0; !bad && i < a->names.count; ++i)
      bad = plugin_strlist_push(&out_names, a->names.items[i], strlen(a->names.items[i])) != 0 ||
            plugin_strlist_push(&out_values, a->values.items[i], strlen(a->values.items[i])) != 0;
    if (bad) {
      plugin_set_oom(status);
    } else {
      count = plugin_strlist_release(&out_names, names);
      plugin_strlist_release(&out_values, values);
    }
  }
done:
  plugin_strlist_free(&out_names);
  plugin_strlist_free(&out_values);
  objstore_response_free(&resp);
  objstore_path_free(&p);
  s3_config_release(fs, cfg);
  return count;
}

/* ---- registration ------------------------------------------------------------------------ */

static const TF_FilesystemOps s3_filesystem_ops = {
    .init = fs_init,
    .cleanup = fs_cleanup,
    OBJSTORE_READER_OPS,
    .new_writable_file = s3_new_writable_file,
    .new_appendable_file = s3_new_appendable_file,
    OBJSTORE_NAMESPACE_OPS,
    .get_incomplete_writes = s3_get_incomplete_writes,
    .new_writable_file_with_attributes = s3_new_writable_file_with_attributes,
    .get_file_attributes = s3_get_file_attributes,
    .abort_incomplete_write = s3_abort_incomplete_write,
    .write_files = s3_write_files,
    OBJSTORE_CONFIGURATION_OPS};

static const plugin_scheme s3_schemes[] = {
    {"s3", &s3_filesystem_ops, &objstore_file_ops,
     &objstore_upload_ops, &objstore_region_ops}};

PLUGIN_DEFINE(s3_schemes, "s3", "0.1.0",
              ASYNCFS_PLUGIN_ATOMIC_WRITES | ASYNCFS_PLUGIN_NETWORK)
