/* az://, abfs://, abfss://: Azure Blob Storage on the object-store engine.
 *
 * The namespace (stat, listings, glob, directories, deletes, renames) and
 * its ops are the engine's (objstore_tree.c, objstore_fs.c), on the Blob
 * REST API's request shapes (az_store.c); reads are the engine's readers,
 * pinned to the ETag the open saw; writes are az_files.c's. Settings come
 * from the options (plugin_config), over the environment variables the
 * Azure CLI, adlfs and azure-identity read, taken when a filesystem is
 * made. */
#define _POSIX_C_SOURCE 200809L

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "az_internal.h"

#define MiB ((int64_t)1 << 20)

/* ---- settings ------------------------------------------------------------------------ */

#define TEXT(name, field, secret, help) \
  {name, help, PLUGIN_OPTION_TEXT, offsetof(az_config, field), 0, 0, secret}

static const plugin_option az_options[] = {
    TEXT("account", account, 0,
         "the storage account of az:// URLs (AZURE_STORAGE_ACCOUNT_NAME, AZURE_STORAGE_ACCOUNT)"),
    TEXT("account_key", account_key, 1, "the account's key, for Shared Key signing (AZURE_STORAGE_KEY); write-only"),
    TEXT("sas_token", sas_token, 1, "a SAS token, put on every URL (AZURE_STORAGE_SAS_TOKEN); write-only"),
    TEXT("connection_string", connection_string, 1,
         "an Azure Storage connection string; wins over the options (AZURE_STORAGE_CONNECTION_STRING); "
         "write-only"),
    TEXT("endpoint", endpoint, 0,
         "the blob endpoint (\"\": https://ACCOUNT.blob.core.windows.net; Azurite: "
         "http://127.0.0.1:10000/devstoreaccount1)"),
    TEXT("token", token, 1, "an Entra ID bearer token, sent as it is (never refreshed); write-only"),
    TEXT("tenant_id", tenant_id, 0, "Entra ID tenant, for a client secret or workload identity (AZURE_TENANT_ID)"),
    TEXT("client_id", client_id, 0, "Entra ID application, or a user-assigned managed identity (AZURE_CLIENT_ID)"),
    TEXT("client_secret", client_secret, 1, "the application's secret (AZURE_CLIENT_SECRET); write-only"),
    TEXT("federated_token_file", federated_token_file, 0,
         "workload identity's token file (AZURE_FEDERATED_TOKEN_FILE)"),
    TEXT("authority_host", authority_host, 0,
         "Entra ID's token service (AZURE_AUTHORITY_HOST; \"\": https://login.microsoftonline.com)"),
    TEXT("msi_endpoint", msi_endpoint, 0,
         "managed identity's token endpoint (\"\": the instance metadata service)"),
    OBJSTORE_OPTIONS(az_config, transport),
    {"anonymous", "1: requests carry no credentials (public containers)", PLUGIN_OPTION_INT,
     offsetof(az_config, anonymous), 0, 1, 0},
    {"upload_threshold", "a file up to this size is one Put Blob; above, blocks in flight",
     PLUGIN_OPTION_INT, offsetof(az_config, upload_threshold), 0, 5000 * MiB, 0},
    {"block_size", "a large file's first blocks (they double every 500 blocks, up to 4000 MiB)",
     PLUGIN_OPTION_INT, offsetof(az_config, block_size), 1 * MiB, 4000 * MiB, 0},
    {"read_ahead", "bytes fetched with the open of a file for reading", PLUGIN_OPTION_INT,
     offsetof(az_config, read_ahead), 0, 64 * MiB, 0},
    {"part_size", "a large read goes as ranged GETs of this size, all in flight at once",
     PLUGIN_OPTION_INT, offsetof(az_config, part_size), 64 * 1024, 1024 * MiB, 0},
};

static const plugin_schema az_schema = {"az", az_options,
                                        (int)(sizeof az_options / sizeof az_options[0]),
                                        sizeof(az_config)};

/* ---- lifecycle ------------------------------------------------------------------------- */

static char* env_or(const char* name, const char* otherwise) {
  const char* value = getenv(name);
  return (char*)(value != NULL && *value != '\0' ? value : otherwise);
}

static const objstore_fs_spec az_spec = {&az_store,
                                         &az_tree_hooks,
                                         offsetof(az_config, transport),
                                         offsetof(az_config, read_ahead),
                                         offsetof(az_config, part_size),
                                         az_credential_source};

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  az_config defaults = {{0}, "", "", "", "", "", "", "", "", "", "", "", "", OBJSTORE_DEFAULT_SETTINGS,
                        0, 32 * MiB, 8 * MiB, 64 * 1024, 8 * MiB};
  az_fs* fs;
  defaults.account = env_or("AZURE_STORAGE_ACCOUNT_NAME", env_or("AZURE_STORAGE_ACCOUNT", ""));
  defaults.account_key = env_or("AZURE_STORAGE_KEY", env_or("AZURE_STORAGE_ACCOUNT_KEY", ""));
  defaults.sas_token = env_or("AZURE_STORAGE_SAS_TOKEN", "");
  defaults.connection_string = env_or("AZURE_STORAGE_CONNECTION_STRING", "");
  defaults.tenant_id = env_or("AZURE_TENANT_ID", "");
  defaults.client_id = env_or("AZURE_CLIENT_ID", "");
  defaults.client_secret = env_or("AZURE_CLIENT_SECRET", "");
  defaults.federated_token_file = env_or("AZURE_FEDERATED_TOKEN_FILE", "");
  defaults.authority_host = env_or("AZURE_AUTHORITY_HOST", "");
  fs = objstore_fs_create(filesystem, sizeof *fs, &az_schema, &defaults, &az_spec, status);
  if (fs != NULL) az_credentials_init(fs);
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  az_fs* fs = filesystem->plugin_filesystem;
  if (fs == NULL) return;
  objstore_engine_free(fs->store.engine);
  az_credentials_destroy(fs);
  plugin_fs_free(filesystem);
}

/* ---- registration ------------------------------------------------------------------------ */

static const TF_FilesystemOps az_filesystem_ops = {
    .init = fs_init, .cleanup = fs_cleanup, OBJSTORE_READER_OPS, .new_writable_file = az_new_writable_file,
    .new_appendable_file = az_new_appendable_file, .write_files = az_write_files, OBJSTORE_NAMESPACE_OPS,
    OBJSTORE_CONFIGURATION_OPS};

static const plugin_scheme az_schemes[] = {
    {"az", &az_filesystem_ops, &objstore_file_ops, &objstore_upload_ops, &objstore_region_ops},
    {"abfs", &az_filesystem_ops, &objstore_file_ops, &objstore_upload_ops, &objstore_region_ops},
    {"abfss", &az_filesystem_ops, &objstore_file_ops, &objstore_upload_ops, &objstore_region_ops}};

PLUGIN_DEFINE(az_schemes, "az", "0.1.0", ASYNCFS_PLUGIN_ATOMIC_WRITES | ASYNCFS_PLUGIN_NETWORK)
