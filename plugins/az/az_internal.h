/*
 * The az plugin's internals: Azure Blob Storage (az://, abfs://, abfss://)
 * on the object-store engine (plugins/objstore), through the Blob REST API.
 *   az.c        settings, lifecycle, the filesystem ops, registration
 *   az_store.c  the store's hooks: where a container lives, URLs, Shared
 *               Key signing, SAS and bearer tokens, errors, and the request
 *               shapes of the engine's readers and namespace
 *   az_files.c  the upload hooks of the engine's writable files: one Put
 *               Blob, or Put Block and a block list
 *   az_credentials.c  connection strings, and Entra ID tokens (a client
 *               secret, workload identity, managed identity)
 *
 * A path is the plugin's "/container/blob". The container part is either
 * a container of the configured account ("az://container/blob") or
 * "container@account.dfs.core.windows.net" ("abfs://" URLs name the
 * account); az_locate resolves it to an endpoint, an account and a
 * container.
 */
#ifndef ASYNCFS_AZ_INTERNAL_H_
#define ASYNCFS_AZ_INTERNAL_H_

#include <curl/curl.h>
#include <stdint.h>

#include "asyncfs/filesystem_interface.h"
#include "az_blocks.h"
#include "objstore.h"
#include "objstore_token.h"
#include "plugin_common.h"
#include "plugin_fs.h"

/* The REST API version requests name (x-ms-version): blocks up to 4000 MiB,
 * and one Azurite 3.35 accepts. */
#define AZ_API_VERSION "2021-08-06"
#define AZ_DEV_ACCOUNT "devstoreaccount1"
#define AZ_DEV_KEY \
  "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="

typedef struct az_config {
  plugin_settings base;
  char* account;           /* "": from the connection string or the environment */
  char* account_key;       /* base64 Shared Key (write-only) */
  char* sas_token;         /* a SAS query string (write-only) */
  char* connection_string; /* AccountName=...;AccountKey=...;BlobEndpoint=... (write-only) */
  char* endpoint;          /* the blob endpoint: "": https://ACCOUNT.blob.core.windows.net */
  char* token;             /* an Entra ID bearer token, sent as it is (write-only) */
  char* tenant_id;         /* Entra ID: with client_id and client_secret, or a token file */
  char* client_id;
  char* client_secret;     /* write-only */
  char* federated_token_file; /* workload identity */
  char* authority_host;    /* "": https://login.microsoftonline.com */
  char* msi_endpoint;      /* managed identity: "": the instance metadata service */
  objstore_settings transport;
  int64_t anonymous;        /* 1: no credentials at all (public containers) */
  int64_t upload_threshold; /* a file up to this size is one Put Blob */
  int64_t block_size;       /* a larger one goes in blocks of this size (growing) */
  int64_t read_ahead;       /* bytes fetched when a file is opened */
  int64_t part_size;        /* a large read goes as ranged GETs of this size */
} az_config;

typedef struct az_fs {
  objstore_fs store; /* settings, engine, namespace: the engine's ops find them */
  objstore_token_cache entra; /* an Entra ID token (az_credentials.c) */
} az_fs;

static inline az_config* az_config_acquire(az_fs* fs) {
  return (az_config*)plugin_config_acquire(&fs->store.base.config);
}

static inline void az_config_release(az_fs* fs, az_config* cfg) {
  plugin_config_release(&fs->store.base.config, cfg);
}

extern const objstore_store az_store;
extern const objstore_tree_hooks az_tree_hooks;

/* What a container part of a path resolves to. */
typedef struct az_target {
  char account[64];
  char container[64];
  char endpoint[512]; /* "https://acct.blob.core.windows.net", or an emulator's with /account */
  char key[128];      /* the account's Shared Key, "" when none is known */
  char sas[1024];     /* the account's SAS query (no "?"), "" when none */
} az_target;

/* The settings' credentials, with a connection string's folded in (it
 * wins, as in adlfs and the Azure CLI). */
typedef struct az_account {
  char name[64];
  char key[128];
  char sas[1024];
  char endpoint[512];
} az_account;

/* The account the settings name (options, then a connection string). */
void az_account_of(const az_config* cfg, az_account* out);

/* Resolves bucket (a path's first segment) to its target: 0, or -1 with
 * status INVALID_ARGUMENT naming what is wrong. */
int az_locate(const az_config* cfg, const char* bucket, az_target* out, TF_Status* status);

/* A request of the az store: the engine's request (its URL is what
 * authorize builds), and where it goes. Every exchange of the store
 * carries one at x->store_request. */
typedef struct az_call {
  objstore_call base;
  az_fs* fs;         /* base's, typed */
  az_config* cfg;    /* base's settings, typed */
  az_target target;
  plugin_buf path;   /* the URL's path, encoded: "/container/blob" after the endpoint's */
  plugin_buf query;  /* "a=b&c=d", unencoded names, encoded values, sorted as signed */
} az_call;

/* A call for method on bucket/key (key NULL: the container; bucket "":
 * the account), bound to x; NULL with status set. */
az_call* az_call_bind(az_fs* fs, const char* method, const char* bucket, const char* key,
                      objstore_exchange* x, TF_Status* status);
/* Adds a query parameter (value encoded here); 0, or -1 (no memory).
 * Parameters must be added in the order Shared Key sorts them. */
int az_param(az_call* c, const char* name, const char* value);
int az_header(az_call* c, const char* name, const char* value);
void az_release_request(void* store, objstore_exchange* x);
/* Put Blob of data as the object at path ("/container/blob"), the
 * store's put_request: 0, or -1 with status set. */
int az_put_request(void* store, const char* path, const char* data, size_t len, objstore_exchange* x,
                   TF_Status* status);
/* A fresh exchange and call on a writer's object, for az_files.c. */
int az_object_call(az_fs* fs, const char* method, const char* bucket, const char* key,
                   objstore_exchange* x, objstore_response* resp, az_call** out, TF_Status* status);

/* The Authorization for c's request: the Shared Key signature, or a
 * bearer token, or nothing (a SAS, anonymous); az_credentials.c. */
int az_bearer(az_fs* fs, const az_config* cfg, char* out, size_t cap, TF_Status* status);
void az_credentials_init(az_fs* fs);
void az_credentials_destroy(az_fs* fs);
void az_credential_source(objstore_fs* store, const void* config, char* out, size_t cap);
/* Parses a connection string into out (only what it names). */
void az_parse_connection_string(const char* text, az_account* out);

/* Files (az_files.c). */
void az_new_writable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                          TF_Status* status);
void az_new_appendable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                            TF_Status* status);
void az_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses);

#endif /* ASYNCFS_AZ_INTERNAL_H_ */
