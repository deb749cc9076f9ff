/*
 * The object-store engine: what every remote store plugin (s3, and the
 * stores to come) sends its HTTP requests through. It knows HTTP, curl,
 * connections, retries and timeouts; it knows no store. A store hands it a
 * table of hooks (objstore_store): how to authorize a request, how to read
 * an error answer, how to name a request in a message.
 *
 *   objstore_transport.c  one thread per process driving one curl multi
 *                         handle for every filesystem: the queues, each
 *                         filesystem's connection bound, idle connections
 *                         (then the thread leaves), retries on a timer, fork
 *   objstore_watch.c      the sockets that thread sleeps on (epoll on Linux)
 *   objstore_exchange.c   one request's curl options, its answer's
 *                         headers and body, the retry policy, the errors
 *   objstore_reader.c     objects read: opens pinned to a version, ranged
 *                         GETs in flight at once, many whole objects
 *   objstore_cache.c      the block and stat caches
 *   objstore_tree.c       directories over a flat namespace, on a store's
 *                         request shapes (objstore_tree_hooks)
 *   objstore_fs.c         a store's filesystem ops on that namespace
 *   objstore_call.c       the part of a request every store's has
 *   objstore_upload.c     writable files on a store's upload hooks
 *   objstore_writes.c     many objects written at once; a writer's first
 *                         failure
 *   objstore_token.c      tokens that expire (objstore_token.h)
 *   objstore_xml.c, objstore_formats.c  XML, JSON and time answers
 *
 * A plugin call that needs one request waits for it (objstore_run); a bulk
 * call puts all its requests in flight at once from its one thread
 * (objstore_run_many). No worker thread ever sleeps for a backoff: a retry
 * waits on the engine thread's timer.
 */
#ifndef ASYNCFS_OBJSTORE_H_
#define ASYNCFS_OBJSTORE_H_

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h> /* offsetof, for OBJSTORE_OPTIONS */
#include <stdint.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_common.h"
#include "plugin_config.h"
#include "plugin_fs.h"

/* The version of objstore_store a store fills in; a table of an older
 * version is read up to its own size (hooks added later are then NULL). */
#define OBJSTORE_STORE_VERSION 1

/* What the engine needs of a store's settings: a member of the store's
 * settings struct (OBJSTORE_OPTIONS lists its options), read from the
 * snapshot a call holds (it outlives the call's requests). */
typedef struct objstore_settings {
  int64_t connect_timeout_ms; /* TCP and TLS set-up */
  int64_t read_timeout_ms;    /* no byte moving for this long fails */
  int64_t max_attempts;       /* per request, the first included */
  int64_t retry_budget_ms;    /* no retry starts after this long */
  int64_t retry_base_ms;      /* first backoff; doubles (capped), full jitter */
  int64_t max_connections;    /* open at once, in use or idle */
  int64_t idle_timeout_ms;    /* an idle connection is closed after this */
  int64_t verify_tls;         /* 0: accept any certificate (test servers) */
  char* ca_bundle;            /* PEM file of trusted CAs; "" : the system's */
  int64_t stat_cache_ms;      /* a stat is answered from memory this long; 0: never */
  int64_t block_cache_bytes;  /* blocks of objects read, kept; 0: none */
  int64_t block_size;         /* the cache's block */
} objstore_settings;

/* The rows of a store's option table (plugin_config.h) for the
 * objstore_settings at member of its settings struct type. */
#define OBJSTORE_OPTIONS(type, member)                                                          \
  {"ca_bundle", "PEM file of the CAs to trust instead of the system's", PLUGIN_OPTION_TEXT,    \
   offsetof(type, member.ca_bundle), 0, 0, 0},                                                  \
  {"verify_tls", "0: accept any TLS certificate (test servers only)", PLUGIN_OPTION_INT,        \
   offsetof(type, member.verify_tls), 0, 1, 0},                                                 \
  {"connect_timeout_ms", "connection set-up limit", PLUGIN_OPTION_INT,                          \
   offsetof(type, member.connect_timeout_ms), 1, 600000, 0},                                    \
  {"read_timeout_ms", "a transfer with no byte moving for this long fails and is retried",     \
   PLUGIN_OPTION_INT, offsetof(type, member.read_timeout_ms), 1000, 3600000, 0},                \
  {"max_attempts", "tries per request, the first included", PLUGIN_OPTION_INT,                  \
   offsetof(type, member.max_attempts), 1, 100, 0},                                             \
  {"retry_budget_ms", "no retry starts this long after a request's first try",                 \
   PLUGIN_OPTION_INT, offsetof(type, member.retry_budget_ms), 0, 3600000, 0},                   \
  {"retry_base_ms", "first retry's backoff ceiling; doubles, full jitter", PLUGIN_OPTION_INT,   \
   offsetof(type, member.retry_base_ms), 1, 60000, 0},                                          \
  {"max_connections",                                                                           \
   "connections open at once, in use or idle, and requests in flight; more wait in the queue",  \
   PLUGIN_OPTION_INT, offsetof(type, member.max_connections), 1, 4096, 0},                      \
  {"idle_timeout_ms", "an idle connection is closed after this long", PLUGIN_OPTION_INT,        \
   offsetof(type, member.idle_timeout_ms), 0, 3600000, 0},                                      \
  {"stat_cache_ms",                                                                             \
   "a stat is answered from memory for this long (0: never); the filesystem's own writes "      \
   "and deletes forget it at once",                                                             \
   PLUGIN_OPTION_INT, offsetof(type, member.stat_cache_ms), 0, 3600000, 0},                     \
  {"block_cache_bytes",                                                                         \
   "bytes of objects read kept in memory, by block, least recently used dropped first "        \
   "(0: none)",                                                                                 \
   PLUGIN_OPTION_INT, offsetof(type, member.block_cache_bytes), 0, (int64_t)1 << 40, 0},       \
  {"block_size", "the block cache's block", PLUGIN_OPTION_INT,                                  \
   offsetof(type, member.block_size), 4096, (int64_t)1 << 30, 0}

/* The engine's defaults: 5 s to connect, 30 s without a byte, 10 tries
 * within 20 s from 100 ms backoff, 128 connections idle for 30 s at most,
 * certificates checked against the system's CAs, no caches (1 MiB blocks
 * when one is asked for). */
#define OBJSTORE_DEFAULT_SETTINGS {5000, 30000, 10, 20000, 100, 128, 30000, 1, "", 0, 0, 1 << 20}

/* An object's attributes as HTTP carries them: user metadata (headers
 * under the store's meta_prefix) and the Content-Type. */
typedef struct objstore_attributes {
  plugin_strlist names;  /* lowercase, without the prefix, sorted when sent */
  plugin_strlist values; /* one per name */
  char* content_type;    /* NULL: none named */
} objstore_attributes;

void objstore_attributes_free(objstore_attributes* a);

typedef struct objstore_response {
  long http;                /* 0: no answer */
  plugin_buf body;          /* the body, unless the request gave out */
  size_t out_len;           /* bytes written to out */
  int64_t length;           /* Content-Length, -1 when absent */
  int64_t total;            /* object size from Content-Range, -1 when absent */
  int64_t mtime_nsec;       /* Last-Modified */
  int64_t retry_after_ms;   /* Retry-After, -1 when absent */
  int64_t range_end;        /* the last byte a Range answer header names (a resumable
                             * upload's "bytes=0-K"), -1 when absent */
  char etag[96];
  char captured[64];        /* the store's capture_header, "" when absent */
  char* location;           /* Location, NULL when absent */
  /* Where the last redirect pointed (absolute): authorize sends the next
   * try there, with credentials only if the origin is the store's own
   * (objstore_same_origin); NULL before any redirect. */
  char* redirected_to;
  char error_code[64];      /* the store's name for the error (read_answer), or "" */
  int too_long;             /* longer than max_body: stopped */
  objstore_attributes attributes; /* with want_attributes */
} objstore_response;

void objstore_response_free(objstore_response* r);

/* One HTTP request and its tries. The caller sets the request part; the
 * store's authorize sets url and headers; the rest is the engine's. */
typedef struct objstore_exchange {
  /* the request */
  const char* method;
  const char* body; /* body_len bytes, sent with PUT and POST */
  size_t body_len;
  char* out;        /* when set, a 2xx body goes here, at most out_cap bytes */
  size_t out_cap;
  size_t max_body;  /* when set, a longer 2xx answer stops (resp->too_long) */
  size_t expect;    /* when set, the most a 2xx body may bring (a range's length) */
  int64_t range_first; /* the first byte a range asked for; -1: no range. A server
                        * that ignores Range (200, the whole object) has that
                        * many bytes skipped, then expect (or out_cap) kept. */
  int want_attributes;  /* collect the answer's metadata headers */
  int direct;           /* never through a proxy (link-local services) */
  int64_t timeout_ms;   /* whole tries longer than this fail; 0: none */
  int64_t max_attempts; /* 0: the settings' */
  int max_redirects;    /* 3xx with a Location followed this many times; 0: none */
  const void* store_request; /* the store's own description, for its hooks */
  objstore_response* resp;
  int redirects; /* followed so far (resp->redirected_to: where to) */
  /* authorize's, or the caller's when the engine has no store to ask */
  char* url;
  struct curl_slist* headers;
  uint64_t authorized_until_ms; /* a try after this is authorized afresh; 0: never stale */
  /* the engine's */
  struct objstore_try* try_; /* while a try is under way */
  struct objstore_exchange* next;
  struct objstore_group* group;
  struct objstore_group* own_group; /* objstore_start's */
  struct objstore_engine* engine;   /* whose request it is */
  const objstore_settings* settings;
  int raw;             /* objstore_fetch's: no store hook is asked */
  int attempts;        /* tries made */
  int outcome;         /* 0 done, -1 failed, 2 to authorize again, 3 redirected */
  int transport_error; /* curl's code of the last try, 0: it was answered */
  char detail[256];    /* curl's words on it */
  uint64_t started_ms; /* the first try */
  uint64_t due_ms;     /* a retry: not before */
  unsigned seed;
  uint64_t trace; /* its tries are recorded under this id for the core's traces; 0: not */
} objstore_exchange;

/* The hooks of a store. authorize and set_error run on the calling
 * thread (authorize may block to fetch credentials); read_answer and
 * retryable run on the engine's thread and must not block. */
typedef struct objstore_store {
  int version;     /* OBJSTORE_STORE_VERSION */
  size_t size;     /* sizeof(objstore_store) as the store was built */
  const char* name;            /* "s3": the scheme, in messages */
  const char* meta_prefix;     /* "x-amz-meta-": user metadata headers */
  const char* capture_header;  /* one more header the store wants, or NULL */
  /* Sets x->url and x->headers (and x->authorized_until_ms) for the next
   * try; 0, or -1 with status set and nothing held. */
  int (*authorize)(void* store, objstore_exchange* x, TF_Status* status);
  /* Frees what authorize set. */
  void (*unauthorize)(void* store, objstore_exchange* x);
  /* After an answer: the store's error name into resp->error_code (from
   * an error document; a 2xx carrying one is turned into a 500). */
  void (*read_answer)(void* store, objstore_exchange* x);
  /* Whether an answer the engine would not retry is worth another try
   * (a store's throttling error code on a 400, say). */
  int (*retryable)(void* store, const objstore_exchange* x);
  /* The status of an answered request that failed for good. */
  void (*set_error)(void* store, const objstore_exchange* x, TF_Status* status);
  /* "GET s3://bucket/key": the request, in messages. */
  void (*describe)(void* store, const objstore_exchange* x, char* out, size_t cap);
  /* ---- objects, for the engine's readers (objstore_reader.c) ---- */
  /* Makes x (initialized, method set) a request for the object at path
   * (the plugin's path), of the bytes range names ("bytes=0-99") when
   * given, pinned to if_match when given. What it allocates,
   * release_request frees. 0, or -1 with status set (path names no object:
   * a bucket, a directory). */
  int (*object_request)(void* store, const char* path, const char* range, const char* if_match,
                        objstore_exchange* x, TF_Status* status);
  void (*release_request)(void* store, objstore_exchange* x);
  /* A read of path was answered 404 (x): sets status to what is there
   * instead (a directory, nothing), and returns 0; or returns 1 (status
   * OK) when an object is there after all (created since). NULL: the
   * answer's own status stands. */
  int (*explain_missing)(void* store, const char* path, const char* what,
                         const objstore_exchange* x, TF_Status* status);
  /* "s3://bucket/key": the object at path, in messages. */
  void (*name_object)(void* store, const char* path, char* out, size_t cap);
  /* A header that names an error answer's kind (Azure's x-ms-error-code,
   * which a HEAD carries without a body), read into resp->error_code;
   * NULL: none. (Read only when the table's size reaches it.) */
  const char* error_header;
  /* Makes x (initialized) the upload of data (len bytes) as the object at
   * path in one request (a Put Blob, a multipart upload); what it
   * allocates, release_request frees. 0, or -1 with status set. NULL: no
   * objstore_write_objects. (Read only when the table's size reaches it.) */
  int (*put_request)(void* store, const char* path, const char* data, size_t len, objstore_exchange* x,
                     TF_Status* status);
} objstore_store;

typedef struct objstore_engine objstore_engine;

/* An engine for one filesystem of store; its thread starts on the first
 * request. NULL when out of memory. */
objstore_engine* objstore_engine_new(const objstore_store* store, void* store_ctx);
/* Stops the thread and closes every connection; no request may be under way. */
void objstore_engine_free(objstore_engine* engine);
/* Closes the idle connections (flush_caches). */
void objstore_engine_close_idle(objstore_engine* engine);

/* What an engine's requests did since it was made, counted on its thread
 * as each try ends: tries sent, tries retried, requests failed for good
 * (after their retries), connections opened, and the bytes sent and
 * received. Read with objstore_engine_traffic, from any thread (the
 * option "traffic" of a store, in this order). */
enum {
  OBJSTORE_REQUESTS,
  OBJSTORE_RETRIES,
  OBJSTORE_FAILURES,
  OBJSTORE_CONNECTIONS,
  OBJSTORE_BYTES_SENT,
  OBJSTORE_BYTES_RECEIVED,
  OBJSTORE_TRAFFIC_COUNT
};
void objstore_engine_traffic(const objstore_engine* engine, int64_t out[OBJSTORE_TRAFFIC_COUNT]);
/* The option "traffic" (those counts, read-only) when key names it: 1,
 * with option and status set; else 0. For a store's get-option op. */
int objstore_get_traffic_option(const objstore_engine* engine, const char* key, TF_Filesystem_Option** option,
                                TF_Status* status);

/* Zeroes x and resp, and names resp and the method (no range). */
void objstore_exchange_init(objstore_exchange* x, objstore_response* resp, const char* method,
                            const void* store_request);

/* Runs x with retries and waits. 0 on a 2xx answer; otherwise -1 with
 * status set (the store's set_error for answers, the engine's words for a
 * request that got none); resp then says what the server said. */
int objstore_run(objstore_engine* engine, const objstore_settings* settings,
                 objstore_exchange* x, TF_Status* status);
/* Runs the n exchanges xs[i] as objstore_run would, all in flight at once
 * as far as max_connections allows; statuses[i] is each one's outcome.
 * 0 when every one succeeded, else -1. */
int objstore_run_many(objstore_engine* engine, const objstore_settings* settings, int n,
                      objstore_exchange* xs, TF_Status** statuses);
/* x handed to the engine without waiting: 0, or -1 with status set
 * (nothing in flight). What x points to must stay until objstore_finish. */
int objstore_start(objstore_engine* engine, const objstore_settings* settings, objstore_exchange* x,
                   TF_Status* status);
/* Waits for x, started: its outcome as objstore_run gives it. Called once
 * for every objstore_start, whatever it returned. */
int objstore_finish(objstore_engine* engine, objstore_exchange* x, TF_Status* status);

/* A request the caller authorized itself (x->url, x->headers): a
 * credential or metadata service. Same transport, same retry policy; 0
 * when it was answered at all (resp->http says how), -1 with status set
 * when it was not. */
int objstore_fetch(objstore_engine* engine, const objstore_settings* settings,
                   objstore_exchange* x, TF_Status* status);

/* ---- reading objects (objstore_reader.c) ---- */

/* An object open for reading: its size and ETag as the open saw them,
 * and its first bytes. Reads after the open are ranged GETs pinned to
 * that ETag, so an object replaced mid-read fails (412) instead of
 * mixing two versions; a big read is split into part_size ranges, all in
 * flight at once. */
typedef struct objstore_reader objstore_reader;

/* Opens path: one GET of at most read_ahead bytes (plain, or ranged after
 * objects too big for a plain one), or a HEAD when read_ahead is 0.
 * settings is copied. NULL with status set when there is no object. */
objstore_reader* objstore_reader_open(objstore_engine* engine, const objstore_settings* settings,
                                      const char* path, int64_t read_ahead, int64_t part_size,
                                      const char* what, TF_Status* status);
int64_t objstore_reader_size(const objstore_reader* r);
/* The version the open saw, which later reads are pinned to (the ETag, or
 * what the store's read_answer put there: gs's generation); "" if none. */
const char* objstore_reader_version(const objstore_reader* r);
/* The TF_RandomAccessFile read: up to n bytes at offset into buffer. */
int64_t objstore_reader_read(objstore_reader* r, uint64_t offset, size_t n, char* buffer,
                             TF_Status* status);
void objstore_reader_free(objstore_reader* r);

/* The ops of a TF_RandomAccessFile whose plugin_file is an objstore_reader. */
extern const TF_RandomAccessFileOps objstore_file_ops;

/* The new_read_only_memory_region_from_file op's work on an opened
 * reader, which it frees: the whole object in memory (an empty one has no
 * region: INVALID_ARGUMENT); its regions' ops are objstore_region_ops. */
void objstore_map(objstore_reader* r, TF_ReadOnlyMemoryRegion* region, TF_Status* status);
extern const TF_ReadOnlyMemoryRegionOps objstore_region_ops;

/* The read_files op: n whole objects, one plain GET each, all in flight
 * at once, each body straight into buffers[i] (caps[i] bytes); sizes[i]
 * is the object's size (bigger than caps[i]: read it another way). */
void objstore_read_objects(objstore_engine* engine, const objstore_settings* settings,
                           const char* const* paths, int n, char* const* buffers,
                           const size_t* caps, int64_t* sizes, TF_Status** statuses);

/* ---- a writer's first failure (objstore_writes.c) ---- */

/* The first failure of a writable file, whose parts may fail on other
 * threads: every later call reports it. Thread-safe, sticky once set. */
typedef struct objstore_failure {
  pthread_mutex_t lock;
  TF_Status* status; /* TF_OK until a failure */
} objstore_failure;

void objstore_failure_init(objstore_failure* f);
void objstore_failure_destroy(objstore_failure* f);
/* Keeps failure unless one is kept already; an OK status is ignored. */
void objstore_failure_record(objstore_failure* f, const TF_Status* failure);
void objstore_failure_set(objstore_failure* f, TF_Code code, const char* message);
/* Copies the failure (or OK) into status; -1 when there was one. */
int objstore_failure_take(objstore_failure* f, TF_Status* status);

/* ---- writable files (objstore_upload.c) ---- */

/* A writable file on a store that cannot append to an object: the
 * engine's for every store (TF_WritableFileOps objstore_upload_ops), on
 * the store's upload hooks.
 *
 * Bytes collect in a part-sized buffer. A file that closes within its
 * first part is one request (the hooks' put). A larger one becomes an
 * upload: begin, then parts started as they fill and sent while the caller
 * keeps appending, at most concurrency at once (in order, one at a time,
 * when the store wants them so), then commit at close. Memory stays within
 * OBJSTORE_UPLOAD_BUFFERS + 1 parts: a long append's whole parts go from
 * the caller's bytes without a copy, and are waited for before the append
 * returns. Nothing is visible under the name until close succeeds; a file
 * that failed, or was dropped without close, abandons its upload. A
 * failure is sticky: every later call reports it. */
#define OBJSTORE_UPLOAD_BUFFERS 4
#define OBJSTORE_UPLOAD_MOST_IN_FLIGHT 12

typedef struct objstore_upload objstore_upload;

/* A part of an upload, from its start until the writer waits for it. */
typedef struct objstore_part {
  int number;          /* 1-based */
  int64_t offset;      /* of its first byte among the bytes the upload sends */
  const char* data;    /* valid until part_sent has returned */
  size_t len;
  int64_t total;       /* when it is the last part (at close): the bytes the upload sends; else -1 */
  objstore_exchange x; /* its request (part_request), initialized as a PUT */
  objstore_response resp;
  TF_Status* status;   /* its outcome */
  /* the engine's */
  char* buffer; /* the writer's buffer holding data; NULL: the caller's bytes */
  size_t room;  /* buffer's size */
} objstore_part;

typedef struct objstore_upload_hooks {
  /* "a bucket": what a path without a key names, in messages. */
  const char* bucket_word;
  /* The most parts an object may have, and what to say past it. */
  int max_parts;
  const char* too_many_parts;
  /* The size of part number (1-based); a file within part 1 is one put. */
  int64_t (*part_size)(objstore_upload* u, int number);
  /* Before the first part: an upload to send parts to (S3's
   * CreateMultipartUpload, a GCS session). NULL: none is needed. 0, or -1
   * with status set. */
  int (*begin)(objstore_upload* u, TF_Status* status);
  /* Makes p->x the request of part p (the store's release_request frees
   * what it holds); 0, or -1 with status set. */
  int (*part_request)(objstore_upload* u, objstore_part* p, TF_Status* status);
  /* After p's request ended with p->status, before its request is
   * released: keeps what commit needs (S3's ETag), or recovers (a GCS
   * session's resume, which sets p->status). NULL: the outcome stands. */
  void (*part_sent)(objstore_upload* u, objstore_part* p);
  /* After every part arrived: they become the object. NULL: the last
   * part made it. 0, or -1 with status set. */
  int (*commit)(objstore_upload* u, TF_Status* status);
  /* A begun upload that will not commit: S3 aborts it, GCS cancels it.
   * NULL: nothing to do. */
  void (*abandon)(objstore_upload* u);
  /* The whole file in one request. NULL: the store's put_request. 0, or
   * -1 with status set. */
  int (*put)(objstore_upload* u, const char* data, size_t len, TF_Status* status);
  /* After the object was written: one more step (a GCS append's
   * compose). NULL: none. 0, or -1 with status set. */
  int (*written)(objstore_upload* u, TF_Status* status);
  /* Frees the store's part of the writer (not u itself). NULL: it holds
   * nothing. */
  void (*release)(objstore_upload* u);
} objstore_upload_hooks;

/* The start of a store's writer, which holds its own state after it. */
struct objstore_upload {
  const objstore_upload_hooks* hooks;
  struct objstore_fs* fs;
  void* config; /* the store's settings as the file was opened (a snapshot it holds) */
  const objstore_settings* settings; /* the engine's part of them */
  objstore_engine* engine;
  char* path;    /* "/bucket/key", the plugin's */
  char* bucket;  /* into a copy of path */
  char* key;
  int concurrency; /* parts in flight at most; 1: one at a time, in order */
  int64_t written; /* the file's bytes so far (tell) */
  int64_t sent;    /* bytes handed to parts */
  int parts;       /* parts started or skipped */
  int begun;       /* an upload was begun and neither committed nor abandoned */
  /* the engine's */
  char* buf; /* the part being filled */
  size_t len, room, cap; /* its bytes, its buffer's size, the part's size */
  objstore_part* inflight[OBJSTORE_UPLOAD_MOST_IN_FLIGHT];
  int inflight_count;
  char* spare[OBJSTORE_UPLOAD_BUFFERS]; /* buffers of spare_cap bytes, for reuse */
  int spare_count;
  size_t spare_cap;
  objstore_failure error;
};

/* A writer of size bytes (a store's struct that starts with an
 * objstore_upload) for path on fs, with a snapshot of fs's settings
 * (config) held until it is freed; what ("write", "append") names the call
 * in messages. NULL with status set. */
objstore_upload* objstore_upload_new(size_t size, const objstore_upload_hooks* hooks, struct objstore_fs* fs,
                                     const char* path, const char* what, TF_Status* status);
/* Begins the upload now, if it was not (an append copying old parts). */
int objstore_upload_begin(objstore_upload* u, TF_Status* status);
/* The upload starts with parts (bytes in all) already in place. */
void objstore_upload_skip(objstore_upload* u, int parts, int64_t bytes);
/* Waits for the parts in flight; abandons an upload that did not commit;
 * frees u. */
void objstore_upload_free(objstore_upload* u);
/* new_appendable_file's work for u, made for file: the object's bytes
 * come first. keep may keep them its own way (S3 copies parts, GCS
 * composes): 1 when it did, 0 to have them read back through the file,
 * -1 with status set. A missing object is a new file. file->plugin_file
 * is u, or NULL (u freed) with status set. */
void objstore_upload_append(const TF_Filesystem* filesystem, objstore_upload* u,
                            int (*keep)(objstore_upload* u, objstore_reader* old, TF_WritableFile* file,
                                        TF_Status* status),
                            TF_WritableFile* file, TF_Status* status);

/* The ops of a TF_WritableFile whose plugin_file is an objstore_upload. */
extern const TF_WritableFileOps objstore_upload_ops;

/* ---- writing many whole objects at once (objstore_writes.c) ---- */

/* The write_files op: each object of at most single_max bytes in one
 * request (the store's put_request), all in flight at once; larger ones
 * one after another through the plugin's writable files (new_writable,
 * which makes an objstore_upload: blocks or chunks in flight).
 * statuses[i] is each one's outcome; the stat cache forgets every path. */
void objstore_write_objects(objstore_engine* engine, const objstore_settings* settings,
                            const TF_Filesystem* filesystem, const char* const* paths, int n,
                            const char* const* datas, const size_t* lengths, TF_Status** statuses,
                            size_t single_max,
                            void (*new_writable)(const TF_Filesystem*, const char*, TF_WritableFile*,
                                                 TF_Status*));

/* ---- a namespace of buckets and keys (objstore_tree.c) ---- */

/* A plugin's path "/bucket/some/key" as its bucket and key ("" for the
 * bucket itself), each allocated: 0; or -1 with status set (out of memory,
 * or INVALID_ARGUMENT naming scheme://bucket for a bucket name of 1 or 2
 * characters). Paths reach a plugin cleaned, with no empty segment. */
typedef struct objstore_path {
  char* bucket;
  char* key;
} objstore_path;

int objstore_path_parse(const char* scheme, const char* path, objstore_path* out,
                        TF_Status* status);
void objstore_path_free(objstore_path* p);

/* Directories over a flat store, as every object store's users expect
 * them: a path is /bucket/key; a key's prefix up to a "/" is its
 * directory, which exists while some key lies under it or an empty
 * marker object "dir/" holds it (create_dir writes one, only if absent,
 * so that the server decides which of two creators wins: the
 * transactions' lock). The store gives request shapes and answer
 * readers (objstore_tree_hooks); the rules live here once. */

/* A listing page: objects (with sizes and times) and common prefixes;
 * of the root, the buckets (as keys). */
typedef struct objstore_listing {
  plugin_strlist keys;
  plugin_strlist prefixes; /* with the delimiter */
  int64_t* sizes;          /* one per key */
  int64_t* mtimes;         /* nanoseconds, one per key */
  int cap;
  char* next_token;        /* the next page's, NULL after the last */
} objstore_listing;

int objstore_listing_push(objstore_listing* l, const char* key, size_t n, int64_t size,
                          int64_t mtime_nsec);
void objstore_listing_free(objstore_listing* l);

typedef enum objstore_tree_request {
  OBJSTORE_STAT,   /* what is at key; key "": whether the bucket is there */
  OBJSTORE_DELETE, /* remove key; key "": the (empty) bucket */
  OBJSTORE_CREATE  /* an empty object at key, only if none is there (a
                    * precondition the server checks); key "": the bucket */
} objstore_tree_request;

typedef struct objstore_tree_hooks {
  /* Makes x (initialized, no method) the request of kind for bucket/key,
   * with config, the call's settings snapshot; the store's
   * release_request frees what it holds. 0, or -1 with status set. */
  int (*request)(void* store, const void* config, objstore_tree_request kind, const char* bucket,
                 const char* key, objstore_exchange* x, TF_Status* status);
  /* An OBJSTORE_STAT of an object answered 2xx: its size and mtime. */
  void (*stat_answer)(void* store, const objstore_exchange* x, int64_t* size,
                      int64_t* mtime_nsec);
  /* The request for a listing page of bucket ("": of the buckets) under
   * prefix; delimiter "/" or NULL (everything below); at most max
   * entries; after token (NULL: the first page). */
  int (*list_request)(void* store, const void* config, const char* bucket, const char* prefix,
                      const char* delimiter, int max, const char* token, objstore_exchange* x,
                      TF_Status* status);
  /* A listing page's answer appended to l: 0, or -1 with status set. */
  int (*list_answer)(void* store, const objstore_exchange* x, objstore_listing* l,
                     TF_Status* status);
  /* The object src_bucket/src_key (size bytes) copied to dst, replacing
   * what is there, on the server: 0, or -1 with status set. */
  int (*copy)(void* store, const void* config, const char* src_bucket, const char* src_key,
              int64_t size, const char* dst_bucket, const char* dst_key, TF_Status* status);
  /* Optional: the count keys of bucket deleted in the store's bulk
   * request (S3's DeleteObjects); the number not deleted, the first
   * failure in status. NULL: one DELETE per key, all in flight. */
  int (*delete_keys)(void* store, const void* config, const char* bucket, char** keys, int count,
                     TF_Status* status);
  /* The most entries a listing page may hold (S3 and GCS: 1000; Azure:
   * 5000); 0: 1000. */
  int page_size;
  /* Optional: a listing page's next token, found without reading the
   * page (malloc'd; NULL when there is none or it is not found so). The
   * next page is then asked for while this one is read; list_answer's
   * token decides, and a request for another is dropped. */
  char* (*list_token)(void* store, const objstore_exchange* x);
} objstore_tree_hooks;

/* One call's view of a store's namespace. */
typedef struct objstore_tree {
  const objstore_tree_hooks* hooks;
  objstore_engine* engine;
  const void* config;                /* the call's settings snapshot */
  const objstore_settings* settings; /* its engine settings */
  const char* scheme;                /* "gs", in messages */
} objstore_tree;

/* The TF_FilesystemOps of the namespace, on the plugin's paths. */
void objstore_tree_stat(const objstore_tree* t, const char* path, TF_FileStatistics* stats,
                        TF_Status* status);
/* The stat_files op: a STAT of every path in flight at once; of those
 * not found, a one-key listing each, at once; of those still not found,
 * a STAT of each one's parent, at once (so the error says what stat's
 * says). */
void objstore_tree_stat_files(const objstore_tree* t, const char* const* paths, int n,
                              TF_FileStatistics* stats, TF_Status** statuses);
/* The paths_exist op, on stat_files: whether all exist (statuses may be
 * NULL; out of memory without them, none is said to). */
bool objstore_tree_paths_exist(const objstore_tree* t, char** paths, int n, TF_Status** statuses);
/* get_children's work (PLUGIN_DEFINE_LISTING): 0, or -1 with status set. */
int objstore_tree_list(const objstore_tree* t, const char* path, plugin_listing* out,
                       TF_Status* status);
/* get_matching_paths: one listing of the pattern's literal prefix. */
int objstore_tree_glob(const objstore_tree* t, const char* uri_pattern, char*** entries,
                       TF_Status* status);
void objstore_tree_create_dir(const objstore_tree* t, const char* path, TF_Status* status);
void objstore_tree_recursively_create_dir(const objstore_tree* t, const char* path,
                                          TF_Status* status);
void objstore_tree_delete_file(const objstore_tree* t, const char* path, TF_Status* status);
void objstore_tree_delete_dir(const objstore_tree* t, const char* path, TF_Status* status);
/* Every object below path deleted, all in flight at once (in rounds as
 * max_connections allows). */
void objstore_tree_delete_recursively(const objstore_tree* t, const char* path,
                                      uint64_t* undeleted_files, uint64_t* undeleted_dirs,
                                      TF_Status* status);
/* rename (remove_source) or copy of a file: a server-side copy. */
void objstore_tree_transfer(const objstore_tree* t, const char* src, const char* dst,
                            int remove_source, TF_Status* status);

/* ---- a store's filesystem on the namespace (objstore_fs.c) ---- */

/* What the state of a store's filesystem starts with: its settings (a
 * struct holding objstore_settings at transport_offset), its engine, and
 * its namespace's request shapes. The namespace's TF_FilesystemOps
 * (OBJSTORE_NAMESPACE_OPS) then need nothing of the store's own. */
typedef struct objstore_fs {
  plugin_fs base;
  objstore_engine* engine;
  const objstore_tree_hooks* hooks;
  const char* scheme;
  size_t transport_offset;
  /* The int64_t options a file opened for reading takes: the bytes its
   * open fetches, and the ranged GETs a large read is cut into. */
  size_t read_ahead_offset;
  size_t part_size_offset;
  /* Where requests' credentials come from, in words, asking the store's
   * chain when it has not been (config: a settings snapshot); NULL: the
   * store does not say. Read as the option credential_source. */
  void (*credential_source)(struct objstore_fs* fs, const void* config, char* out, size_t cap);
} objstore_fs;

/* ---- a store's request (objstore_call.c) ---- */

/* What every request of a store built on the engine holds for the
 * store's hooks, at the start of the store's own request struct (which
 * x->store_request points to): a snapshot of the settings, held for the
 * request; its name in messages ("GET gs://bucket/key"); its URL, as the
 * store builds it; its own headers, and those sent with the try under way
 * (signed); its owned body. */
typedef struct objstore_call {
  objstore_fs* fs;
  void* config;
  char* what;
  plugin_buf url;
  struct curl_slist* headers;
  struct curl_slist* sent;
  plugin_buf body;
} objstore_call;

/* A zeroed request of size bytes (a store's struct starting with an
 * objstore_call) for method on bucket/key (key NULL or "": the bucket),
 * bound to x (x->store_request and x->method); objstore_call_free frees
 * it. NULL with status set (x->store_request may still hold it: free
 * it). */
void* objstore_call_new(size_t size, objstore_fs* fs, const char* method, const char* bucket, const char* key,
                        objstore_exchange* x, TF_Status* status);
/* Frees the request at x->store_request (the store frees its own parts
 * first) and forgets it. */
void objstore_call_free(objstore_exchange* x);

/* What a store's filesystem is made of, beside its settings: the fields
 * of objstore_fs that name the store's own parts. */
typedef struct objstore_fs_spec {
  const objstore_store* store; /* its name is the scheme */
  const objstore_tree_hooks* hooks;
  size_t transport_offset;
  size_t read_ahead_offset;
  size_t part_size_offset;
  void (*credential_source)(objstore_fs* fs, const void* config, char* out, size_t cap);
} objstore_fs_spec;

/* init's work for a store: the filesystem's state (size bytes, starting
 * with an objstore_fs) with settings from defaults (plugin_fs_create) and
 * its engine. The state, or NULL with status set. */
void* objstore_fs_create(TF_Filesystem* filesystem, size_t size, const plugin_schema* schema,
                         const void* defaults, const objstore_fs_spec* spec, TF_Status* status);

/* The namespace as the current settings see it: t, and the settings
 * snapshot it holds (objstore_fs_end releases it). */
void objstore_fs_begin(objstore_fs* fs, objstore_tree* t);
void objstore_fs_end(objstore_fs* fs, objstore_tree* t);

void objstore_fs_stat(const TF_Filesystem* filesystem, const char* path, TF_FileStatistics* stats,
                      TF_Status* status);
void objstore_fs_path_exists(const TF_Filesystem* filesystem, const char* path, TF_Status* status);
bool objstore_fs_paths_exist(const TF_Filesystem* filesystem, char** paths, int n,
                             TF_Status** statuses);
void objstore_fs_stat_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                            TF_FileStatistics* stats, TF_Status** statuses);
bool objstore_fs_is_directory(const TF_Filesystem* filesystem, const char* path, TF_Status* status);
int64_t objstore_fs_get_file_size(const TF_Filesystem* filesystem, const char* path,
                                  TF_Status* status);
char* objstore_fs_translate_name(const TF_Filesystem* filesystem, const char* uri);
int objstore_fs_get_children(const TF_Filesystem* filesystem, const char* path, char*** entries,
                             TF_Status* status);
int objstore_fs_get_children_stats(const TF_Filesystem* filesystem, const char* path,
                                   char*** entries, TF_FileStatistics** stats, TF_Status* status);
int objstore_fs_get_children_kinds(const TF_Filesystem* filesystem, const char* path,
                                   char*** entries, TF_FileStatistics** stats, int** kinds,
                                   TF_Status* status);
int objstore_fs_get_matching_paths(const TF_Filesystem* filesystem, const char* pattern,
                                   char*** entries, TF_Status* status);
void objstore_fs_create_dir(const TF_Filesystem* filesystem, const char* path, TF_Status* status);
void objstore_fs_recursively_create_dir(const TF_Filesystem* filesystem, const char* path,
                                        TF_Status* status);
void objstore_fs_delete_file(const TF_Filesystem* filesystem, const char* path, TF_Status* status);
void objstore_fs_delete_dir(const TF_Filesystem* filesystem, const char* path, TF_Status* status);
void objstore_fs_delete_recursively(const TF_Filesystem* filesystem, const char* path,
                                    uint64_t* undeleted_files, uint64_t* undeleted_dirs,
                                    TF_Status* status);
void objstore_fs_rename_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                             TF_Status* status);
void objstore_fs_copy_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                           TF_Status* status);
/* A store's explain_missing hook's work: what stat finds at path instead
 * (a directory: FAILED_PRECONDITION; nothing: stat's NOT_FOUND), or 1
 * when an object is there after all. */
int objstore_fs_explain_missing(objstore_fs* fs, const char* path, const char* what,
                                TF_Status* status);
/* The only cache kept by default: the engine's open connections, closed. */
void objstore_fs_flush_caches(const TF_Filesystem* filesystem);

/* The configuration ops of a store: its options, and two more to read,
 * credential_source (objstore_fs's hook) and traffic (its engine's
 * counts: objstore_engine_traffic). */
void objstore_fs_get_option(const TF_Filesystem* filesystem, const char* key,
                            TF_Filesystem_Option** option, TF_Status* status);
#define OBJSTORE_CONFIGURATION_OPS                                          \
  .get_filesystem_configuration = plugin_get_configuration,                \
  .set_filesystem_configuration = plugin_set_configuration,                \
  .get_filesystem_configuration_option = objstore_fs_get_option,           \
  .set_filesystem_configuration_option = plugin_set_configuration_option, \
  .get_filesystem_configuration_keys = plugin_get_configuration_keys

/* Reading, on the engine's readers (objstore_reader.c) with the current
 * settings: an object opened (what: "open", "map", "append", in
 * messages), the random-access and memory-region constructors, and
 * read_files (objstore_read_objects). */
objstore_reader* objstore_fs_open_reader(const TF_Filesystem* filesystem, const char* path, const char* what,
                                         TF_Status* status);
void objstore_fs_new_random_access_file(const TF_Filesystem* filesystem, const char* path,
                                        TF_RandomAccessFile* file, TF_Status* status);
void objstore_fs_new_read_only_memory_region_from_file(const TF_Filesystem* filesystem, const char* path,
                                                       TF_ReadOnlyMemoryRegion* region, TF_Status* status);
void objstore_fs_read_files(const TF_Filesystem* filesystem, const char* const* paths, int n,
                            char* const* buffers, const size_t* caps, int64_t* sizes, TF_Status** statuses);
/* What an append to an object of a store that cannot append in place
 * starts with: the old bytes of r, a piece at a time, through the new
 * file's append (ops); 0, or -1 with status set. */
int objstore_fs_read_back(objstore_reader* r, const TF_WritableFileOps* ops, const TF_WritableFile* file,
                          TF_Status* status);

#define OBJSTORE_READER_OPS                                                                     \
  .new_random_access_file = objstore_fs_new_random_access_file,                                 \
  .new_read_only_memory_region_from_file = objstore_fs_new_read_only_memory_region_from_file,   \
  .read_files = objstore_fs_read_files

/* The TF_FilesystemOps entries of the namespace, for a store's table. */
#define OBJSTORE_NAMESPACE_OPS                                                                  \
  PLUGIN_NAMESPACE_OPS(objstore_fs_), PLUGIN_QUERY_OPS(objstore_fs_),                         \
      .stat_files = objstore_fs_stat_files, .flush_caches = objstore_fs_flush_caches

/* ---- caches (objstore_cache.c) ---- */

/* What a write, delete, rename or copy of path through the filesystem
 * calls: cached stats and blocks of path (and, _below, of everything under
 * it) are forgotten. */
void objstore_forget(objstore_engine* engine, const char* path);
void objstore_forget_below(objstore_engine* engine, const char* path);
/* A stat of path from the cache (settings' stat_cache_ms): 1 with stats
 * set, or 0. */
int objstore_stat_cached(objstore_engine* engine, const objstore_settings* settings, const char* path,
                         TF_FileStatistics* stats);
void objstore_stat_remember(objstore_engine* engine, const objstore_settings* settings,
                            const char* path, const TF_FileStatistics* stats);

/* The status code an HTTP answer maps to, whatever the store. */
TF_Code objstore_code_for_http(long http);

/* The settings' certificate checks on a curl handle. */
void objstore_tls_options(const objstore_settings* settings, void* curl_handle);

/* s percent-encoded onto b: RFC 3986's unreserved characters kept, and
 * "/" too when keep_slash (an object name's separators in a URL path).
 * 0, or -1 when out of memory. */
int objstore_url_encode(plugin_buf* b, const char* s, int keep_slash);
/* "Name: value" appended to *headers; 0, or -1 when out of memory. */
int objstore_add_header(struct curl_slist** headers, const char* name, const char* value);
/* The object at path ("/bucket/key", the plugins' object path): a copy
 * of path in *copy (free it), split into *bucket and *key, which point
 * into it. 0; or -1 with status set: out of memory, or FAILED_PRECONDITION
 * when path names no object ("<what> <scheme>:/<path>: a <holder> is a
 * directory, not a file", holder being the store's word for a bucket). */
int objstore_object_of(const char* scheme, const char* holder, const char* what, const char* path,
                       char** copy, char** bucket, char** key, TF_Status* status);

/* Whether two absolute URLs have one origin (scheme, host and port). */
int objstore_same_origin(const char* a, const char* b);

/* Monotonic milliseconds. */
uint64_t objstore_now_ms(void);

#endif /* ASYNCFS_OBJSTORE_H_ */
