/* gs://: Google Cloud Storage on the object-store engine.
 *
 * The namespace (stat, listings, glob, directories, deletes, renames) and
 * its ops are the engine's (objstore_tree.c, objstore_fs.c), on the JSON
 * API's request shapes (gs_store.c); reads are the engine's readers,
 * pinned to the generation the open saw; writes are gs_files.c's. Settings come from the options
 * (plugin_config), over STORAGE_EMULATOR_HOST and
 * GOOGLE_CLOUD_PROJECT read when a filesystem is made. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "gs_internal.h"

#define KiB ((int64_t)1 << 10)
#define MiB ((int64_t)1 << 20)

/* ---- settings ------------------------------------------------------------------------ */

static const plugin_option gs_options[] = {
    {"endpoint", "the JSON API's base URL (\"\": STORAGE_EMULATOR_HOST, else Google's)",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, endpoint), 0, 0, 0},
    {"token", "an OAuth bearer token, sent as it is (never refreshed); write-only",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, token), 0, 0, 1},
    {"project", "the project buckets are listed and made in (GOOGLE_CLOUD_PROJECT)",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, project), 0, 0, 0},
    {"credentials_file",
     "a service account or authorized_user JSON file (\"\": GOOGLE_APPLICATION_CREDENTIALS, "
     "then gcloud's application-default file)",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, credentials_file), 0, 0, 0},
    {"location", "where a bucket that create_dir makes is kept (\"\": the service's default)",
     PLUGIN_OPTION_TEXT, offsetof(gs_config, location), 0, 0, 0},
    OBJSTORE_OPTIONS(gs_config, transport),
    {"anonymous", "1: requests carry no credentials (public buckets)", PLUGIN_OPTION_INT,
     offsetof(gs_config, anonymous), 0, 1, 0},
    {"upload_threshold", "a file up to this size is uploaded in one request; above, in chunks",
     PLUGIN_OPTION_INT, offsetof(gs_config, upload_threshold), 0, 5120 * MiB, 0},
    {"chunk_size", "a resumable upload's chunk (rounded down to a multiple of 256 KiB)",
     PLUGIN_OPTION_INT, offsetof(gs_config, chunk_size), 256 * KiB, 1024 * MiB, 0},
    {"read_ahead", "bytes fetched with the open of a file for reading", PLUGIN_OPTION_INT,
     offsetof(gs_config, read_ahead), 0, 64 * MiB, 0},
    {"part_size", "a large read goes as ranged GETs of this size, all in flight at once",
     PLUGIN_OPTION_INT, offsetof(gs_config, part_size), 64 * KiB, 1024 * MiB, 0},
};

static const plugin_schema gs_schema = {"gs", gs_options,
                                        (int)(sizeof gs_options / sizeof gs_options[0]),
                                        sizeof(gs_config)};

/* ---- lifecycle ------------------------------------------------------------------------- */

static const char* env_or(const char* name, const char* otherwise) {
  const char* value = getenv(name);
  return value != NULL && *value != '\0' ? value : otherwise;
}

static const objstore_fs_spec gs_spec = {&gs_store,
                                         &gs_tree_hooks,
                                         offsetof(gs_config, transport),
                                         offsetof(gs_config, read_ahead),
                                         offsetof(gs_config, part_size),
                                         gs_credential_source};

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  gs_config defaults = {{0}, "", "", "", "", "", OBJSTORE_DEFAULT_SETTINGS, 0, 32 * MiB, 64 * MiB,
                        64 * KiB, 8 * MiB};
  gs_fs* fs;
  defaults.endpoint = (char*)env_or("STORAGE_EMULATOR_HOST", "");
  defaults.project = (char*)env_or("GOOGLE_CLOUD_PROJECT", env_or("GCLOUD_PROJECT", ""));
  fs = objstore_fs_create(filesystem, sizeof *fs, &gs_schema, &defaults, &gs_spec, status);
  if (fs != NULL) gs_credentials_init(fs);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  gs_fs* fs = filesystem->plugin_filesystem;
  if (fs == NULL) return;
  objstore_engine_free(fs->store.engine);
  gs_credentials_destroy(fs);
  plugin_fs_free(filesystem);
}

/* ---- registration ------------------------------------------------------------------------ */

static const TF_FilesystemOps gs_filesystem_ops = {
    .init = fs_init, .cleanup = fs_cleanup, OBJSTORE_READER_OPS, .new_writable_file = gs_new_writable_file,
    .new_appendable_file = gs_new_appendable_file, .write_files = gs_write_files, OBJSTORE_NAMESPACE_OPS,
    OBJSTORE_CONFIGURATION_OPS};

static const plugin_scheme gs_schemes[] = {
    {"gs", &gs_filesystem_ops, &objstore_file_ops, &objstore_upload_ops, &objstore_region_ops}};

PLUGIN_DEFINE(gs_schemes, "gs", "0.1.0", ASYNCFS_PLUGIN_ATOMIC_WRITES | ASYNCFS_PLUGIN_NETWORK)
