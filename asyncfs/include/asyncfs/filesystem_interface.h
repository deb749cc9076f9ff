/*
 * asyncfs filesystem plugin interface.
 *
 * Binary-compatible with TensorFlow 2.x's modular filesystem plugin interface
 * (tensorflow/c/experimental/filesystem/filesystem_interface.h): the same
 * struct names, field order and function signatures, so a plugin built
 * against this header loads into TensorFlow and a TensorFlow plugin loads
 * into asyncfs. Unlike TensorFlow's header it compiles as plain C99 as well
 * as C++ and depends on nothing but the C standard library.
 *
 * asyncfs extensions (ABI-safe, see docs/plugin-abi.md):
 *   - TF_FilesystemOps gains `abort_transaction` after its 33rd entry,
 *     `rename_dir` and `get_children_stats` after that; plugins built against an older header have
 *     a smaller table and the core treats the missing tail as "not
 *     offered".
 *   - An optional exported symbol, ASYNCFS_GetPluginMetadata, describes the
 *     plugin (name, version, author, bug-report URL, core ABI range).
 *
 * Ownership, in short: the core allocates every handle struct and owns it;
 * the plugin owns the pointer inside. Arrays and strings handed to the core
 * are allocated with the plugin's plugin_memory_allocate and released by the
 * core with plugin_memory_free.
 *
 * The region between the CDEF markers is also read by asyncfs's cffi binding
 * as its declarations, so it holds only plain declarations and integer
 * #defines: no other preprocessor lines, no macros in declarations.
 */
#ifndef ASYNCFS_FILESYSTEM_INTERFACE_H_
#define ASYNCFS_FILESYSTEM_INTERFACE_H_

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define ASYNCFS_PLUGIN_EXPORT __declspec(dllexport)
#else
#define ASYNCFS_PLUGIN_EXPORT __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ASYNCFS-CDEF-BEGIN */

/* ---- Status: opaque, implemented by the core's status runtime ---------- */

typedef struct TF_Status TF_Status;

typedef enum TF_Code {
  TF_OK = 0,
  TF_CANCELLED = 1,
  TF_UNKNOWN = 2,
  TF_INVALID_ARGUMENT = 3,
  TF_DEADLINE_EXCEEDED = 4,
  TF_NOT_FOUND = 5,
  TF_ALREADY_EXISTS = 6,
  TF_PERMISSION_DENIED = 7,
  TF_UNAUTHENTICATED = 16,
  TF_RESOURCE_EXHAUSTED = 8,
  TF_FAILED_PRECONDITION = 9,
  TF_ABORTED = 10,
  TF_OUT_OF_RANGE = 11,
  TF_UNIMPLEMENTED = 12,
  TF_INTERNAL = 13,
  TF_UNAVAILABLE = 14,
  TF_DATA_LOSS = 15
} TF_Code;

TF_Status* TF_NewStatus(void);
void TF_DeleteStatus(TF_Status* s);
/* Records code and a copy of msg (msg is ignored when code is TF_OK). */
void TF_SetStatus(TF_Status* s, TF_Code code, const char* msg);
/* Maps errno as TensorFlow does and records "context; strerror(errno)". */
void TF_SetStatusFromIOError(TF_Status* s, int error_code, const char* context);
TF_Code TF_GetCode(const TF_Status* s);
/* Valid until the next change to s; never NULL. */
const char* TF_Message(const TF_Status* s);

/* ---- The few environment helpers real plugins import ------------------- */

typedef struct TF_Thread TF_Thread;

typedef struct TF_ThreadOptions {
  size_t stack_size;
  size_t guard_size;
  int numa_node;
} TF_ThreadOptions;

typedef enum TF_LogLevel {
  TF_INFO = 0,
  TF_WARNING = 1,
  TF_ERROR = 2,
  TF_FATAL = 3
} TF_LogLevel;

uint64_t TF_NowNanos(void);
uint64_t TF_NowMicros(void);
uint64_t TF_NowSeconds(void);
void TF_DefaultThreadOptions(TF_ThreadOptions* options);
TF_Thread* TF_StartThread(const TF_ThreadOptions* options,
                          const char* thread_name, void (*work_func)(void*),
                          void* param);
void TF_JoinThread(TF_Thread* thread);
/* A fresh path in the temporary directory; release with free(). */
char* TF_GetTempFileName(const char* extension);
void TF_Log(TF_LogLevel level, const char* fmt, ...);
void TF_VLog(int level, const char* fmt, ...);

/* ---- Handles: the core allocates the struct, the plugin owns the inside  */

typedef struct TF_RandomAccessFile {
  void* plugin_file;
} TF_RandomAccessFile;

typedef struct TF_WritableFile {
  void* plugin_file;
} TF_WritableFile;

typedef struct TF_ReadOnlyMemoryRegion {
  void* plugin_memory_region;
} TF_ReadOnlyMemoryRegion;

typedef struct TF_Filesystem {
  void* plugin_filesystem;
} TF_Filesystem;

typedef struct TF_TransactionToken {
  void* token;
  TF_Filesystem* owner;
} TF_TransactionToken;

typedef struct TF_FileStatistics {
  int64_t length;
  int64_t mtime_nsec;
  bool is_directory;
} TF_FileStatistics;

/* ---- Configuration options --------------------------------------------- */

typedef union TF_Filesystem_Option_Value_Union {
  int64_t int_val;
  double real_val;
  struct {
    char* buf;
    int buf_length;
  } buffer_val;
} TF_Filesystem_Option_Value_Union;

typedef struct TF_Filesystem_Option_Value {
  int type_tag; /* a TF_Filesystem_Option_Type */
  int num_values;
  TF_Filesystem_Option_Value_Union* values;
} TF_Filesystem_Option_Value;

typedef enum TF_Filesystem_Option_Type {
  TF_Filesystem_Option_Type_Int = 0,
  TF_Filesystem_Option_Type_Real,
  TF_Filesystem_Option_Type_Buffer,
  TF_Filesystem_Num_Option_Types
} TF_Filesystem_Option_Type;

typedef struct TF_Filesystem_Option {
  char* name;
  char* description;
  int per_file; /* 0 on the filesystem, 1 per file */
  TF_Filesystem_Option_Value* value;
} TF_Filesystem_Option;

/* ---- Operation tables: order is ABI; append only ----------------------- */

typedef struct TF_RandomAccessFileOps {
  void (*cleanup)(TF_RandomAccessFile* file);
  /* OK only when exactly n bytes were read; a short read at end of file sets
   * TF_OUT_OF_RANGE and still returns the count read; errors return -1. */
  int64_t (*read)(const TF_RandomAccessFile* file, uint64_t offset, size_t n,
                  char* buffer, TF_Status* status);
  /* asyncfs extension (API 1), optional: read as read does, but only from
   * what the store holds at hand (the page cache, memory), never waiting on
   * a device or a network; it may run on an event loop's thread. When the
   * bytes are not all at hand, or waiting would be needed for anything
   * (a lock another thread holds), it sets TF_UNAVAILABLE and returns -1,
   * and the caller reads with read, where waiting is fine. */
  int64_t (*read_if_ready)(const TF_RandomAccessFile* file, uint64_t offset,
                           size_t n, char* buffer, TF_Status* status);
} TF_RandomAccessFileOps;

typedef struct TF_WritableFileOps {
  void (*cleanup)(TF_WritableFile* file);
  void (*append)(const TF_WritableFile* file, const char* buffer, size_t n,
                 TF_Status* status);
  int64_t (*tell)(const TF_WritableFile* file, TF_Status* status);
  void (*flush)(const TF_WritableFile* file, TF_Status* status);
  void (*sync)(const TF_WritableFile* file, TF_Status* status);
  /* Called at most once; must not call cleanup. */
  void (*close)(const TF_WritableFile* file, TF_Status* status);
} TF_WritableFileOps;

typedef struct TF_ReadOnlyMemoryRegionOps {
  void (*cleanup)(TF_ReadOnlyMemoryRegion* region);
  const void* (*data)(const TF_ReadOnlyMemoryRegion* region);
  uint64_t (*length)(const TF_ReadOnlyMemoryRegion* region);
} TF_ReadOnlyMemoryRegionOps;

typedef struct TF_FilesystemOps {
  /* 1-2: required */
  void (*init)(TF_Filesystem* filesystem, TF_Status* status);
  void (*cleanup)(TF_Filesystem* filesystem);
  /* 3-6: constructors; each needs its file table */
  void (*new_random_access_file)(const TF_Filesystem* filesystem,
                                 const char* path, TF_RandomAccessFile* file,
                                 TF_Status* status);
  void (*new_writable_file)(const TF_Filesystem* filesystem, const char* path,
                            TF_WritableFile* file, TF_Status* status);
  void (*new_appendable_file)(const TF_Filesystem* filesystem,
                              const char* path, TF_WritableFile* file,
                              TF_Status* status);
  void (*new_read_only_memory_region_from_file)(
      const TF_Filesystem* filesystem, const char* path,
      TF_ReadOnlyMemoryRegion* region, TF_Status* status);
  /* 7-13: namespace changes */
  void (*create_dir)(const TF_Filesystem* filesystem, const char* path,
                     TF_Status* status);
  void (*recursively_create_dir)(const TF_Filesystem* filesystem,
                                 const char* path, TF_Status* status);
  void (*delete_file)(const TF_Filesystem* filesystem, const char* path,
                      TF_Status* status);
  void (*delete_dir)(const TF_Filesystem* filesystem, const char* path,
                     TF_Status* status);
  void (*delete_recursively)(const TF_Filesystem* filesystem,
                             const char* path, uint64_t* undeleted_files,
                             uint64_t* undeleted_dirs, TF_Status* status);
  void (*rename_file)(const TF_Filesystem* filesystem, const char* src,
                      const char* dst, TF_Status* status);
  void (*copy_file)(const TF_Filesystem* filesystem, const char* src,
                    const char* dst, TF_Status* status);
  /* 14-22: queries */
  void (*path_exists)(const TF_Filesystem* filesystem, const char* path,
                      TF_Status* status);
  /* statuses may be NULL; otherwise it holds num_files statuses */
  bool (*paths_exist)(const TF_Filesystem* filesystem, char** paths,
                      int num_files, TF_Status** statuses);
  void (*stat)(const TF_Filesystem* filesystem, const char* path,
               TF_FileStatistics* stats, TF_Status* status);
  bool (*is_directory)(const TF_Filesystem* filesystem, const char* path,
                       TF_Status* status);
  int64_t (*get_file_size)(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status);
  /* never NULL; allocated with plugin_memory_allocate */
  char* (*translate_name)(const TF_Filesystem* filesystem, const char* uri);
  int (*get_children)(const TF_Filesystem* filesystem, const char* path,
                      char*** entries, TF_Status* status);
  int (*get_matching_paths)(const TF_Filesystem* filesystem, const char* glob,
                            char*** entries, TF_Status* status);
  void (*flush_caches)(const TF_Filesystem* filesystem);
  /* 23-28: transactions */
  int (*start_transaction)(const TF_Filesystem* filesystem,
                           TF_TransactionToken** token, TF_Status* status);
  int (*end_transaction)(const TF_Filesystem* filesystem,
                         TF_TransactionToken* token, TF_Status* status);
  int (*add_to_transaction)(const TF_Filesystem* filesystem, const char* path,
                            TF_TransactionToken* token, TF_Status* status);
  int (*get_transaction_for_path)(const TF_Filesystem* filesystem,
                                  const char* path,
                                  TF_TransactionToken** token,
                                  TF_Status* status);
  int (*get_or_start_transaction_for_path)(const TF_Filesystem* filesystem,
                                           const char* path,
                                           TF_TransactionToken** token,
                                           TF_Status* status);
  char* (*decode_transaction_token)(const TF_Filesystem* filesystem,
                                    const TF_TransactionToken* token);
  /* 29-33: configuration. Options returned by the get ops are allocated
   * deep (array, names, descriptions, values, buffers) with
   * plugin_memory_allocate; the core frees each part. get_..._keys is called
   * with keys == NULL to learn *num_keys, then with an array of *num_keys
   * slots, which the plugin fills with allocated names, setting *num_keys to
   * the number written. */
  void (*get_filesystem_configuration)(const TF_Filesystem* filesystem,
                                       TF_Filesystem_Option** options,
                                       int* num_options, TF_Status* status);
  void (*set_filesystem_configuration)(const TF_Filesystem* filesystem,
                                       const TF_Filesystem_Option* options,
                                       int num_options, TF_Status* status);
  void (*get_filesystem_configuration_option)(const TF_Filesystem* filesystem,
                                              const char* key,
                                              TF_Filesystem_Option** option,
                                              TF_Status* status);
  void (*set_filesystem_configuration_option)(
      const TF_Filesystem* filesystem, const TF_Filesystem_Option* option,
      TF_Status* status);
  void (*get_filesystem_configuration_keys)(const TF_Filesystem* filesystem,
                                            char** keys, int* num_keys,
                                            TF_Status* status);
  /* 34: asyncfs extension (filesystem ops API 1). Discards every change
   * staged under the token and releases it; end_transaction commits. */
  int (*abort_transaction)(const TF_Filesystem* filesystem,
                           TF_TransactionToken* token, TF_Status* status);
  /* 35: asyncfs extension (filesystem ops API 2). Renames the directory src
   * to dst in one atomic step. dst must not exist (ALREADY_EXISTS) and its
   * parent must (NOT_FOUND); src must be a directory (FAILED_PRECONDITION
   * for anything else, NOT_FOUND when missing) that is not dst or above it
   * (INVALID_ARGUMENT). A plugin that cannot do it atomically leaves it
   * NULL: the core then copies the tree and deletes the source. */
  void (*rename_dir)(const TF_Filesystem* filesystem, const char* src,
                     const char* dst, TF_Status* status);
  /* 36: asyncfs extension (filesystem ops API 3). get_children with each
   * child's statistics, in one call: *entries as get_children, and *stats
   * one plugin_memory_allocate block of as many TF_FileStatistics (NULL
   * when there are none), stats[i] describing entries[i] as `stat` would.
   * A child that disappears during the listing is left out. Returns the
   * count, or -1 with status set as get_children would. */
  int (*get_children_stats)(const TF_Filesystem* filesystem, const char* path,
                            char*** entries, TF_FileStatistics** stats,
                            TF_Status* status);
  /* 37: asyncfs extension (filesystem ops API 4). The writes at or below
   * path that were started and never finished nor discarded, such as an
   * object store's multipart uploads whose writer died: they hold storage
   * and never become files. *paths: each one's target relative to path
   * ("" for path itself, "a/b" below it), *ids: what names each write for
   * abort_incomplete_write, both as get_children's entries; *started_nsec:
   * one plugin_memory_allocate block of as many start times (NULL when
   * there are none). Returns the count, or -1 with status set. */
  int (*get_incomplete_writes)(const TF_Filesystem* filesystem, const char* path,
                               char*** paths, char*** ids, int64_t** started_nsec,
                               TF_Status* status);
  /* 38: asyncfs extension (filesystem ops API 4). Discards the incomplete
   * write `id` whose target is path, freeing what it held; NOT_FOUND when
   * no such write is left. */
  void (*abort_incomplete_write)(const TF_Filesystem* filesystem, const char* path,
                                 const char* id, TF_Status* status);
  /* 39: asyncfs extension (filesystem ops API 4). new_writable_file, and
   * the file is created with num_attributes name/value attributes: on an
   * object store, user metadata ("x-amz-meta-<name>"), and "content-type"
   * its Content-Type. A plugin refuses names or values it cannot keep as
   * given (INVALID_ARGUMENT), before anything is written. */
  void (*new_writable_file_with_attributes)(const TF_Filesystem* filesystem, const char* path,
                                            const char* const* names, const char* const* values,
                                            int num_attributes, TF_WritableFile* file,
                                            TF_Status* status);
  /* 40: asyncfs extension (filesystem ops API 4). The attributes of the
   * file at path, *names and *values as get_children's entries, in pairs.
   * Returns the count, or -1 with status set (NOT_FOUND, FAILED_PRECONDITION
   * for a directory). */
  int (*get_file_attributes)(const TF_Filesystem* filesystem, const char* path, char*** names,
                             char*** values, TF_Status* status);
  /* 41: asyncfs extension (filesystem ops API 5). Reads the n whole files
   * at paths[i] into buffers[i], at most caps[i] bytes each, as many at
   * once as suits the plugin (an object store: concurrent requests from
   * the calling thread). sizes[i] is file i's size; when it is more than
   * caps[i], buffers[i] holds nothing useful and the caller reads that
   * file another way. statuses[i] is file i's outcome, as opening it with
   * new_random_access_file and reading it would set it (NOT_FOUND,
   * FAILED_PRECONDITION for a directory, ...); sizes[i] is then 0. */
  void (*read_files)(const TF_Filesystem* filesystem, const char* const* paths, int n,
                     char* const* buffers, const size_t* caps, int64_t* sizes,
                     TF_Status** statuses);
  /* 42: asyncfs extension (filesystem ops API 5). stat of the n paths, as
   * many at once as suits the plugin: stats[i] and statuses[i] as stat
   * would set them for paths[i]. */
  void (*stat_files)(const TF_Filesystem* filesystem, const char* const* paths, int n,
                     TF_FileStatistics* stats, TF_Status** statuses);
  /* 43: asyncfs extension (filesystem ops API 5). Creates or replaces each
   * of the n files paths[i] with the lengths[i] bytes at datas[i], as many
   * at once as suits the plugin; statuses[i] as new_writable_file, append
   * and close would set it for that file. For plugins whose files appear
   * only whole (ASYNCFS_PLUGIN_ATOMIC_WRITES): a failed write leaves the
   * old file, or none. */
  void (*write_files)(const TF_Filesystem* filesystem, const char* const* paths, int n,
                      const char* const* datas, const size_t* lengths, TF_Status** statuses);
  /* 44: asyncfs extension (filesystem ops API 6). Where a write of path
   * that goes to a temporary sibling and is renamed over its target (an
   * atomic write, a copy) must land to write what new_writable_file(path)
   * would write: through the symbolic links that path names, to the file
   * they lead to, which need not exist yet. Returns it, allocated with
   * plugin_memory_allocate (path itself where it names no link). NULL with
   * status OK when such a write cannot be staged and renamed and must go in
   * place: path is a device, a FIFO or a socket, which a rename would
   * replace. NULL with status set on an error (a loop of links). */
  char* (*landing_path)(const TF_Filesystem* filesystem, const char* path, TF_Status* status);
  /* 45: asyncfs extension (filesystem ops API 7). new_random_access_file,
   * made only from what the plugin holds at hand (cached directory
   * entries, memory), never waiting on a device, a network or a lock
   * another thread holds, so that it may run on an event loop's thread.
   * Returns the file's size at the open, as get_file_size gives it, with
   * file set and status OK; or -1 with status set as
   * new_random_access_file would set it (NOT_FOUND, ...) when that answer
   * was at hand; or -1 with TF_UNAVAILABLE when anything was not at hand,
   * or the plugin leaves the file to new_random_access_file (a pipe or a
   * device, whose size says nothing of its length): the caller then opens
   * it with new_random_access_file, where waiting is fine. */
  int64_t (*new_random_access_file_if_ready)(const TF_Filesystem* filesystem, const char* path,
                                             TF_RandomAccessFile* file, TF_Status* status);
  /* 46: asyncfs extension (filesystem ops API 8). get_children_stats, and
   * what each entry is itself, its links not followed: *kinds one
   * plugin_memory_allocate block of as many ASYNCFS_ENTRY_* values (NULL
   * when there are none). The core's walks enter only directories, so a
   * link to a folder (a loop, or a way out of the tree) is never walked
   * through, and its tree copies recreate links and FIFOs (copy_entry). A
   * plugin without links or special files may leave it NULL. */
  int (*get_children_kinds)(const TF_Filesystem* filesystem, const char* path, char*** entries,
                            TF_FileStatistics** stats, int** kinds, TF_Status* status);
  /* 47: asyncfs extension (filesystem ops API 8). Makes dst what the entry
   * src itself is, where it is not a regular file or a directory, as
   * `cp -R` does: a symbolic link with src's target text, a FIFO with its
   * mode. ALREADY_EXISTS when dst exists; FAILED_PRECONDITION for a regular
   * file or a directory (copy_file and create_dir copy those) and for a
   * kind the plugin cannot make. */
  void (*copy_entry)(const TF_Filesystem* filesystem, const char* src, const char* dst,
                     TF_Status* status);
  /* 48: asyncfs extension (filesystem ops API 8). new_writable_file for the
   * temporary sibling of an atomic write, which replace_file then lands:
   * created new (ALREADY_EXISTS if path exists, never through a link at
   * path), and readable by its owner only until it lands. */
  void (*new_temporary_file)(const TF_Filesystem* filesystem, const char* path,
                             TF_WritableFile* file, TF_Status* status);
  /* 49: asyncfs extension (filesystem ops API 8). rename_file as the last
   * step of an atomic write (src a file made by new_temporary_file): src
   * takes dst's permissions, and its group where the process may, when
   * dst is a file; otherwise the mode a new file gets (0666 less the
   * umask). A write so replaces a file's content, never its access. */
  void (*replace_file)(const TF_Filesystem* filesystem, const char* src, const char* dst,
                       TF_Status* status);
  /* 50: asyncfs extension (filesystem ops API 9). stat, made only from
   * what the plugin holds at hand (cached directory entries, memory), never
   * waiting on a device, a network or a lock another thread holds, so that
   * it may run on an event loop's thread. Sets stats and status OK; or the
   * status stat would set (NOT_FOUND, ...) when that answer was at hand; or
   * TF_UNAVAILABLE when anything was not at hand: the caller then calls
   * stat, where waiting is fine. */
  void (*stat_if_ready)(const TF_Filesystem* filesystem, const char* path, TF_FileStatistics* stats,
                        TF_Status* status);
} TF_FilesystemOps;

/* What get_children_kinds says an entry is. */
#define ASYNCFS_ENTRY_FILE 0      /* a regular file */
#define ASYNCFS_ENTRY_DIRECTORY 1 /* a directory (not a link to one) */
#define ASYNCFS_ENTRY_LINK 2      /* a symbolic link, to anything or nothing */
#define ASYNCFS_ENTRY_OTHER 3     /* a FIFO, a socket, a device */

/* ---- Versions ----------------------------------------------------------- */
/* ABI bumps on an incompatible change to a table's layout; API bumps when
 * entries are appended. The core refuses a table whose ABI differs from its
 * own and warns (then loads) when only the API differs. */

#define TF_FILESYSTEM_OPS_API 9
#define TF_FILESYSTEM_OPS_ABI 0
#define TF_RANDOM_ACCESS_FILE_OPS_API 1
#define TF_RANDOM_ACCESS_FILE_OPS_ABI 0
#define TF_WRITABLE_FILE_OPS_API 0
#define TF_WRITABLE_FILE_OPS_ABI 0
#define TF_READ_ONLY_MEMORY_REGION_OPS_API 0
#define TF_READ_ONLY_MEMORY_REGION_OPS_ABI 0

/* The version of the asyncfs core as a whole (tables and status runtime),
 * checked against the range a plugin declares in its metadata. */
#define ASYNCFS_CORE_ABI_VERSION 1

/* ---- Registration ------------------------------------------------------- */

typedef struct TF_FilesystemPluginOps {
  char* scheme;
  int filesystem_ops_abi;
  int filesystem_ops_api;
  size_t filesystem_ops_size;
  TF_FilesystemOps* filesystem_ops;
  int random_access_file_ops_abi;
  int random_access_file_ops_api;
  size_t random_access_file_ops_size;
  TF_RandomAccessFileOps* random_access_file_ops;
  int writable_file_ops_abi;
  int writable_file_ops_api;
  size_t writable_file_ops_size;
  TF_WritableFileOps* writable_file_ops;
  int read_only_memory_region_ops_abi;
  int read_only_memory_region_ops_api;
  size_t read_only_memory_region_ops_size;
  TF_ReadOnlyMemoryRegionOps* read_only_memory_region_ops;
} TF_FilesystemPluginOps;

typedef struct TF_FilesystemPluginInfo {
  size_t num_schemes;
  TF_FilesystemPluginOps* ops;
  void* (*plugin_memory_allocate)(size_t size);
  void (*plugin_memory_free)(void* ptr);
} TF_FilesystemPluginInfo;

/* Every plugin exports this. The core zeroes *plugin_info before the call. */
void TF_InitPlugin(TF_FilesystemPluginInfo* plugin_info);

/* ---- asyncfs extension: plugin metadata (optional export) -------------- */

typedef struct ASYNCFS_PluginMetadata {
  size_t struct_size; /* sizeof(ASYNCFS_PluginMetadata) as the plugin saw it */
  const char* name;
  const char* version;
  const char* author;
  const char* bug_report_url;
  int min_core_abi; /* inclusive range of ASYNCFS_CORE_ABI_VERSION */
  int max_core_abi;
  /* Appended later; the core reads it only when struct_size covers it. */
  uint32_t flags; /* ASYNCFS_PLUGIN_* bits */
} ASYNCFS_PluginMetadata;

/* A writable file's content appears under its name only when close
 * succeeds (object stores): the core then writes in place instead of
 * through a temporary file and a rename. */
#define ASYNCFS_PLUGIN_ATOMIC_WRITES 1
/* Its calls wait on a network: the core runs them on a pool with many
 * threads, apart from the few that serve local filesystems. It is a client
 * of a store elsewhere: each Env inits a TF_Filesystem of its own (and
 * cleans it up after the files opened on it), so all its state is per
 * TF_Filesystem. */
#define ASYNCFS_PLUGIN_NETWORK 2

/* Returns a pointer to static storage the core reads but never frees. */
const ASYNCFS_PluginMetadata* ASYNCFS_GetPluginMetadata(void);

/* ASYNCFS-CDEF-END */

#define TF_FILESYSTEM_OPS_SIZE sizeof(TF_FilesystemOps)
#define TF_RANDOM_ACCESS_FILE_OPS_SIZE sizeof(TF_RandomAccessFileOps)
#define TF_WRITABLE_FILE_OPS_SIZE sizeof(TF_WritableFileOps)
#define TF_READ_ONLY_MEMORY_REGION_OPS_SIZE sizeof(TF_ReadOnlyMemoryRegionOps)

/* Records the versions this plugin was compiled against; call it for every
 * scheme in TF_InitPlugin. */
static inline void TF_SetFilesystemVersionMetadata(
    TF_FilesystemPluginOps* ops) {
  ops->filesystem_ops_abi = TF_FILESYSTEM_OPS_ABI;
  ops->filesystem_ops_api = TF_FILESYSTEM_OPS_API;
  ops->filesystem_ops_size = TF_FILESYSTEM_OPS_SIZE;
  ops->random_access_file_ops_abi = TF_RANDOM_ACCESS_FILE_OPS_ABI;
  ops->random_access_file_ops_api = TF_RANDOM_ACCESS_FILE_OPS_API;
  ops->random_access_file_ops_size = TF_RANDOM_ACCESS_FILE_OPS_SIZE;
  ops->writable_file_ops_abi = TF_WRITABLE_FILE_OPS_ABI;
  ops->writable_file_ops_api = TF_WRITABLE_FILE_OPS_API;
  ops->writable_file_ops_size = TF_WRITABLE_FILE_OPS_SIZE;
  ops->read_only_memory_region_ops_abi = TF_READ_ONLY_MEMORY_REGION_OPS_ABI;
  ops->read_only_memory_region_ops_api = TF_READ_ONLY_MEMORY_REGION_OPS_API;
  ops->read_only_memory_region_ops_size = TF_READ_ONLY_MEMORY_REGION_OPS_SIZE;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* ASYNCFS_FILESYSTEM_INTERFACE_H_ */
