/*
 * The gs plugin's internals: Google Cloud Storage (gs://) on the
 * object-store engine (plugins/objstore), through GCS's JSON API.
 *   gs.c        settings, lifecycle, the filesystem ops, registration
 *   gs_store.c  the store's hooks: URLs, authorization, errors, and the
 *               request shapes of the engine's readers and namespace
 *   gs_files.c  the upload hooks of the engine's writable files: one
 *               multipart upload, or a resumable session in chunks; compose
 *   gs_credentials.c  the bearer token: options, the environment,
 *               credentials files, the metadata server
 *
 * A path is the plugin's "/bucket/key"; a key goes into a URL
 * percent-encoded whole ("/" too), as the JSON API names objects.
 */
#ifndef ASYNCFS_GS_INTERNAL_H_
#define ASYNCFS_GS_INTERNAL_H_

#include <curl/curl.h>
#include <pthread.h>
#include <stdint.h>

#include "asyncfs/filesystem_interface.h"
#include "objstore.h"
#include "objstore_token.h"
#include "plugin_common.h"
#include "plugin_fs.h"

typedef struct gs_config {
  plugin_settings base;
  char* endpoint;  /* "http://127.0.0.1:4443"; "" : STORAGE_EMULATOR_HOST, else Google's */
  char* token;     /* a bearer token, sent as it is (never refreshed) */
  char* project;   /* the project buckets are listed and made in */
  char* credentials_file; /* a service account or authorized_user JSON file */
  char* location;  /* where a bucket create_dir makes is kept; "" : the service's default */
  objstore_settings transport; /* the engine's: timeouts, retries, connections, TLS */
  int64_t anonymous;        /* 1: no Authorization at all (public buckets, emulators) */
  int64_t upload_threshold; /* a file up to this size is one upload; above, a resumable one */
  int64_t chunk_size;       /* a resumable upload's chunk: a multiple of 256 KiB */
  int64_t read_ahead;       /* bytes fetched when a file is opened */
  int64_t part_size;        /* a large read goes as ranged GETs of this size */
} gs_config;

typedef struct gs_fs {
  objstore_fs store; /* settings, engine, namespace: the engine's ops find them */
  /* The token a credentials file or the metadata server gave
   * (gs_credentials.c), for the file it came from ("": the metadata server). */
  objstore_token_cache token;
} gs_fs;

static inline gs_config* gs_config_acquire(gs_fs* fs) {
  return (gs_config*)plugin_config_acquire(&fs->store.base.config);
}

static inline void gs_config_release(gs_fs* fs, gs_config* cfg) {
  plugin_config_release(&fs->store.base.config, cfg);
}

/* The store's hooks, and its namespace's request shapes. */
extern const objstore_store gs_store;
extern const objstore_tree_hooks gs_tree_hooks;

/* A request of the gs store: the engine's request (its URL: the
 * endpoint, the path, the query), and the store's. Every exchange of the
 * store carries one at x->store_request; gs_release_request frees it. */
typedef struct gs_call {
  objstore_call base;
  gs_fs* fs;       /* base's, typed */
  gs_config* cfg;  /* base's settings, typed */
  int incomplete;  /* a resumable chunk answered 308: more is expected */
} gs_call;

/* A call for method on url_path (from "/storage/v1/..." or
 * "/upload/storage/v1/..."), bound to x; 0, or -1 with status set. */
gs_call* gs_call_bind(gs_fs* fs, const char* method, const char* bucket, const char* key,
                      objstore_exchange* x, TF_Status* status);
/* Appends s to the call's URL, percent-encoded (nothing but RFC 3986's
 * unreserved characters kept), and raw text; 0, or -1 when out of memory. */
int gs_url_encoded(gs_call* c, const char* s);
int gs_url_text(gs_call* c, const char* s);
/* Adds a header line "Name: value"; 0, or -1 when out of memory. */
int gs_header(gs_call* c, const char* name, const char* value);
void gs_release_request(void* store, objstore_exchange* x);

/* The object key's JSON string (quotes and escapes) appended to b. */
int gs_json_string(plugin_buf* b, const char* s);
/* An upload of data (len bytes) as the object bucket/key in one request:
 * a multipart upload (metadata, then the bytes), with
 * ifGenerationMatch=0 when if_absent (the server decides whether an
 * object is there). */
int gs_upload_request(gs_fs* fs, const char* bucket, const char* key, const char* data,
                      size_t len, int if_absent, objstore_exchange* x, TF_Status* status);

/* Credentials (gs_credentials.c). */
void gs_credentials_init(gs_fs* fs);
void gs_credentials_destroy(gs_fs* fs);
/* The bearer token a request of cfg carries into out ("" : none): 0, or
 * -1 with status UNAUTHENTICATED naming what was tried. */
int gs_bearer(gs_fs* fs, const gs_config* cfg, char* out, size_t cap, TF_Status* status);
/* Where the token comes from, in words (for doctor): the chain is asked
 * first when it has not been. */
void gs_credential_source(objstore_fs* store, const void* config, char* out, size_t cap);
/* Whether requests go to an emulator: an endpoint over plain http://
 * (STORAGE_EMULATOR_HOST names one so, with or without the scheme).
 * Google's endpoints are all https://; a token is never sent in the
 * clear, and an emulator needs none. */
int gs_emulator_endpoint(const gs_config* cfg);

/* Files (gs_files.c). */
void gs_new_writable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                          TF_Status* status);
void gs_new_appendable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                            TF_Status* status);
void gs_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses);

#endif /* ASYNCFS_GS_INTERNAL_H_ */
