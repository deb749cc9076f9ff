/*
 * The s3 plugin's internals, shared by its files:
 *   s3_config.c  settings (environment, the shared config file's profile,
 *                ABI configuration ops)
 *   s3_credentials.c  where credentials come from: settings, profiles,
 *                credential_process, STS, container and instance metadata
 *   s3_formats.c the shared config files' INI, libc only (s3_formats.h)
 *   s3_client.c  the s3 store on the object-store engine: requests
 *                authorized (signed), S3's error documents and codes
 *   s3_sign.c    AWS Signature Version 4: URL, canonical request, signature
 *   s3_xml.c     the few XML documents S3 answers with (expat)
 *   s3_objects.c listings, HEAD: what is at a path
 *   s3_tree.c    the requests the engine's readers, namespace and bulk
 *                writes ask the store for (objstore_tree_hooks)
 *   s3_multipart.c  multipart uploads and server-side copies
 *   s3_files.c   the upload hooks of the engine's writable files: one
 *                PUT, or a multipart upload; appends that copy parts
 *   s3.c         the filesystem ops and the plugin's registration
 */
#ifndef ASYNCFS_S3_INTERNAL_H_
#define ASYNCFS_S3_INTERNAL_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_common.h"
#include "objstore.h"
#include "objstore_xml.h"
#include "plugin_fs.h"
#include "s3_parts.h"

/* ---- settings ------------------------------------------------------------ */

/* An immutable snapshot of the settings; requests hold a reference, so a
 * configuration change never races a request in flight. */
typedef struct s3_config {
  plugin_settings base;
  char* endpoint; /* "http://127.0.0.1:8000"; "" for AWS's own */
  char* region;
  char* access_key;
  char* secret_key;
  char* session_token;
  char* profile;              /* "" : AWS_PROFILE's, or "default" */
  char* content_type;         /* "auto": from the key's extension */
  objstore_settings transport; /* the engine's: timeouts, retries, connections, TLS */
  int64_t anonymous;          /* 1: requests are not signed */
  int64_t path_style;         /* 1 path-style, 0 virtual-hosted */
  int64_t part_size;          /* multipart upload and copy part size */
  int64_t concurrency;        /* requests in flight for one op */
  int64_t read_ahead;         /* bytes fetched when a file is opened */
  int64_t sign_payload;       /* SHA-256 of bodies vs UNSIGNED-PAYLOAD; -1: over http:// */
  int64_t credential_timeout_ms; /* a credential_process running longer is killed */
} s3_config;

/* A filesystem: its settings, and the object-store engine all its
 * requests go through (its connections, its thread). */
typedef struct s3_fs {
  objstore_fs store; /* settings (s3_config snapshots), engine, namespace */
  /* Credentials a source gave (s3_credentials.c), for credentials_profile;
   * the last asking's failure (or OK), and when that was. */
  pthread_mutex_t credentials_lock;
  struct s3_credentials* credentials;
  char* credentials_profile;
  TF_Status* credentials_failure;
  uint64_t credentials_asked_ms;
  char setup_error[300]; /* s3_defaults.error: every request fails with it */
} s3_fs;

extern const plugin_schema s3_schema;

/* The defaults of a new filesystem: the environment's settings, then the
 * shared config file's profile for what the environment leaves unset. */
typedef struct s3_defaults {
  s3_config config; /* strings point into the environment or owned */
  char* owned[8];
  int num_owned;
  char* config_file; /* its text, read once when a setting is looked up */
  int config_file_read;
  char error[300]; /* the first environment value that is not one: "" if none */
} s3_defaults;
void s3_defaults_load(s3_defaults* defaults);
void s3_defaults_free(s3_defaults* defaults);

/* ---- credentials (s3_credentials.c) -------------------------------------- */

/* Keys to sign with. Ones a source gave are counted references, shared by
 * the requests that sign with them; refs 0 marks keys borrowed from the
 * settings for one request. */
typedef struct s3_credentials {
  int refs;
  char* access_key;
  char* secret_key;
  char* session_token; /* "" when none */
  int64_t expires;     /* Unix seconds; 0: never */
  char source[192];    /* where they came from, for messages */
} s3_credentials;

void s3_credentials_init(s3_fs* fs);
void s3_credentials_destroy(s3_fs* fs);
/* The credentials a request of cfg signs with: *out NULL for anonymous
 * requests, borrowed (filled in) when the settings name keys, else the
 * credential chain's, fetched or refreshed as needed. 0, or -1 with status
 * set (TF_UNAUTHENTICATED when no source has any). */
int s3_credentials_acquire(s3_fs* fs, const s3_config* cfg, s3_credentials* borrowed,
                           const s3_credentials** out, TF_Status* status);
void s3_credentials_release(const s3_credentials* credentials);
/* objstore_fs's credential_source: the source the chain chose, in words. */
void s3_credential_source(objstore_fs* store, const void* config, char* out, size_t cap);
/* "default" unless the settings name a profile. */
const char* s3_profile_name(const s3_config* cfg);
/* The shared config file's text (AWS_CONFIG_FILE, ~/.aws/config), malloc'd,
 * or NULL when there is none; and key of profile's section in such a text
 * ("[profile x]", or "[default]"), malloc'd, or NULL. */
char* s3_config_file_text(void);
char* s3_config_file_get(const char* text, const char* profile, const char* key);

static inline s3_config* s3_config_acquire(s3_fs* fs) {
  return (s3_config*)plugin_config_acquire(&fs->store.base.config);
}

static inline void s3_config_release(s3_fs* fs, s3_config* config) {
  plugin_config_release(&fs->store.base.config, config);
}

/* ---- requests ------------------------------------------------------------ */

/* An object's attributes as S3 carries them: user metadata (the headers
 * "x-amz-meta-<name>") and the Content-Type (NULL: the settings' choice). */
typedef objstore_attributes s3_attributes;

/* Checks and copies num name/value pairs ("content-type" sets the type);
 * 0, or -1 with status set to INVALID_ARGUMENT naming what is wrong. */
int s3_attributes_set(s3_attributes* a, const char* const* names, const char* const* values,
                      int num, TF_Status* status);

typedef struct s3_param {
  const char* name;
  const char* value; /* raw; NULL for a bare "?uploads" */
} s3_param;

typedef struct s3_request {
  const char* method;
  const char* bucket; /* NULL: the service (ListBuckets) */
  const char* key;    /* NULL or "": the bucket itself */
  const s3_param* params;
  int num_params;
  const char* range;        /* "bytes=0-99" */
  const char* copy_source;  /* "bucket/key", raw */
  const char* copy_range;   /* "bytes=0-99" of the copy source */
  const char* if_match;     /* an ETag the object must still have */
  const char* if_none_match; /* "*": create only if no object has the key */
  const char* content_md5;  /* base64, for DeleteObjects */
  const char* content_type; /* an object's PUT or CreateMultipartUpload */
  const s3_attributes* attributes; /* user metadata sent with it (signed) */
  int want_attributes;      /* collect the answer's metadata headers */
  const char* body;         /* request body, body_len bytes */
  size_t body_len;
  char* out;                /* when set, the response body goes here */
  size_t out_cap;
  size_t max_body;          /* when set, a longer answer stops (resp->too_long) */
} s3_request;

/* The answer: the engine's, with x-amz-bucket-region (a redirect names
 * it) in captured. */
typedef objstore_response s3_response;

/* Zeroes req and resp (when not NULL) and sets what every request names. */
void s3_request_init(s3_request* req, s3_response* resp, const char* method,
                     const char* bucket, const char* key);
void s3_response_free(s3_response* r);

/* The s3 store's hooks, for the filesystem's engine. */
extern const objstore_store s3_store;
/* Runs req with retries. Returns 0 on a 2xx answer; otherwise sets status to
 * the mapped code with a message naming the object (never a secret) and
 * returns -1; resp->http and resp->error_code then tell what S3 said (http
 * 0: no answer). Through the filesystem's engine: its thread, its
 * connections, its retry policy. */
int s3_execute(s3_fs* fs, const s3_config* cfg, const s3_request* req,
               s3_response* resp, TF_Status* status);
/* Runs the n requests reqs[i] as s3_execute would, all at once (as far as
 * max_connections allows); statuses[i] and resps[i] are each one's
 * outcome. Returns 0 when every one succeeded, else -1. */
int s3_execute_many(s3_fs* fs, const s3_config* cfg, int n, const s3_request* reqs,
                    s3_response* resps, TF_Status** statuses);

/* ---- signing (s3_sign.c) ------------------------------------------------ */

/* s URI-encoded (objstore_url_encode) into a string of its own (free it);
 * NULL when out of memory. */
char* s3_uri_encode(const char* s, int keep_slash);
void s3_md5_base64(const char* data, size_t len, char out[32]);

/* A request ready to send: its URL and its headers, signed. */
typedef struct s3_signed {
  char* url;
  struct curl_slist* headers;
} s3_signed;

/* Signs req as of now with credentials (AWS Signature Version 4), or
 * leaves it unsigned when they are NULL; -1 when out of memory. */
int s3_sign(const s3_config* cfg, const s3_credentials* credentials, const s3_request* req,
            time_t now, s3_signed* out);
void s3_signed_free(s3_signed* s);

/* What an exchange of the s3 store carries for its hooks: the request,
 * the settings it is signed by, and what signing took. */
typedef struct s3_call {
  const s3_request* req;
  const s3_config* cfg;
  s3_credentials borrowed;
  const s3_credentials* creds;
  s3_signed sr;
} s3_call;

/* Makes x (initialized by the engine) carry req, signed by cfg, through
 * call. */
void s3_exchange_bind(const s3_config* cfg, const s3_request* req, s3_call* call,
                      objstore_exchange* x);

/* ---- XML ----------------------------------------------------------------- */

typedef struct s3_listing {
  plugin_strlist keys;     /* object keys, in order */
  plugin_strlist prefixes; /* common prefixes (with the delimiter) */
  int64_t* sizes;          /* one per key */
  int64_t* mtimes;
  int sizes_cap;
  int truncated;
  char* next_token;        /* ListObjectsV2; NextKeyMarker for uploads */
  int url_encoded; /* keys and prefixes came with encoding-type=url */
  plugin_strlist upload_ids; /* ListMultipartUploads: one per key */
  char* next_upload_id;
} s3_listing;

void s3_listing_free(s3_listing* l);
/* Parses a ListObjectsV2, ListBuckets or ListMultipartUploads answer
 * (keys, their upload ids and Initiated times), appending to l. */
int s3_parse_listing(const char* xml, size_t len, s3_listing* l);
/* A ListObjectsV2 page's NextContinuationToken, found without parsing the
 * page (malloc'd); NULL when the page is the last or has none. */
char* s3_listing_next_token(const char* xml, size_t len);
/* DeleteObjects: the count of <Error> entries, the first one's key and code
 * copied into key/code. */
int s3_parse_delete_errors(const char* xml, size_t len, char* key,
                           size_t key_cap, char* code, size_t code_cap);

/* ---- objects ------------------------------------------------------------- */

/* A ListObjectsV2 page's request and what it points into. */
typedef struct s3_list_call {
  s3_request req;
  s3_param params[6];
  char max[16];
} s3_list_call;
/* The request for one ListObjectsV2 page of bucket under prefix (delimiter
 * may be NULL), at most max_keys keys, from token (NULL: the first page);
 * prefix and token are the caller's, kept until it has run. */
void s3_list_request(s3_list_call* c, const char* bucket, const char* prefix, const char* delimiter,
                     int max_keys, const char* token);
/* A request with no parameters and no body: HEAD, DELETE, an empty PUT
 * (a directory marker, CreateBucket). resp may be NULL when only the
 * outcome matters. */
int s3_simple_request(s3_fs* fs, const s3_config* cfg, const char* method,
                      const char* bucket, const char* key, s3_response* resp,
                      TF_Status* status);
/* The Content-Type a new object at key is written with: the attributes'
 * (may be NULL), else the settings' choice. */
const char* s3_content_type(const s3_config* cfg, const s3_attributes* attributes,
                            const char* key);

/* A bucket is a directory, not a file: 0 when p names an object, else -1
 * with status set (what: "open", "create"). */
int s3_check_object(const objstore_path* p, const char* what, TF_Status* status);

/* Copies bytes [0, length) of src into the parts of upload_id from number
 * 1 on, part_size each (the last one shorter), in parallel, server-side;
 * etags[i] receives part i + 1's ETag. */
int s3_copy_parts(s3_fs* fs, const s3_config* cfg, const objstore_path* src,
                  int64_t length, int64_t part_size, const objstore_path* dst,
                  const char* upload_id, char** etags, TF_Status* status);

/* Server-side copy, multipart above the part size; parts in parallel. */
int s3_copy_object(s3_fs* fs, const s3_config* cfg, const objstore_path* src,
                   int64_t size, const objstore_path* dst, TF_Status* status);

/* The request of part_number of upload_id (number and params are its
 * storage): UploadPart from data, or UploadPartCopy from copy_range of
 * copy_source. */
void s3_part_request(const objstore_path* dst, const char* upload_id, int part_number,
                     const char* data, size_t len, const char* copy_source, const char* copy_range,
                     char number[16], s3_param params[2], s3_request* req, s3_response* resp);
/* attributes may be NULL (the settings' Content-Type, no metadata). */
char* s3_create_multipart(s3_fs* fs, const s3_config* cfg, const objstore_path* dst,
                          const s3_attributes* attributes, TF_Status* status);
int s3_complete_multipart(s3_fs* fs, const s3_config* cfg, const objstore_path* dst,
                          const char* upload_id, char** etags, int parts,
                          TF_Status* status);
/* status may be NULL: a clean-up whose outcome nobody waits for. */
void s3_abort_multipart(s3_fs* fs, const s3_config* cfg, const objstore_path* dst,
                        const char* upload_id, TF_Status* status);

/* The get_incomplete_writes and abort_incomplete_write ops: multipart
 * uploads never completed nor aborted (a writer that died), listed and
 * aborted. */
int s3_get_incomplete_writes(const TF_Filesystem* filesystem, const char* path,
                             char*** paths, char*** ids, int64_t** started_nsec,
                             TF_Status* status);
void s3_abort_incomplete_write(const TF_Filesystem* filesystem, const char* path,
                               const char* id, TF_Status* status);

/* The new_writable_file_with_attributes and get_file_attributes ops. */
void s3_new_writable_file_with_attributes(const TF_Filesystem* filesystem, const char* path,
                                          const char* const* names, const char* const* values,
                                          int num_attributes, TF_WritableFile* file,
                                          TF_Status* status);
int s3_get_file_attributes(const TF_Filesystem* filesystem, const char* path, char*** names,
                           char*** values, TF_Status* status);

/* The s3 store's requests for the engine's readers and its namespace
 * (s3_tree.c). */
extern const objstore_tree_hooks s3_tree_hooks;
int s3_object_request(void* store, const char* path, const char* range, const char* if_match,
                      objstore_exchange* x, TF_Status* status);
void s3_release_request(void* store, objstore_exchange* x);
int s3_put_request(void* store, const char* path, const char* data, size_t len, objstore_exchange* x,
                   TF_Status* status);
/* UploadPart of data as part number of upload_id (which must outlive the
 * request) of the object at dst, as an exchange for the engine's writer. */
int s3_part_exchange(s3_fs* fs, const objstore_path* dst, const char* upload_id, int number,
                     const char* data, size_t len, objstore_exchange* x, TF_Status* status);
int s3_explain_missing(void* store, const char* path, const char* what, const objstore_exchange* x,
                       TF_Status* status);
void s3_name_object(void* store, const char* path, char* out, size_t cap);

/* The write_files op: whole objects, all PUTs in flight at once. */
void s3_write_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                    const char* const* datas, const size_t* lengths, TF_Status** statuses);


void s3_new_writable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                          TF_Status* status);
void s3_new_appendable_file(const TF_Filesystem* filesystem, const char* path, TF_WritableFile* file,
                            TF_Status* status);

static inline s3_fs* s3_fs_of(const TF_Filesystem* filesystem) {
  return (s3_fs*)filesystem->plugin_filesystem;
}

#endif /* ASYNCFS_S3_INTERNAL_H_ */
