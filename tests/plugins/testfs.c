/*
 * A tiny valid plugin that the loader tests compile with one defect at a
 * time (-DBREAK_...), plus the variants that must still load.
 */
#ifdef GATED
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#endif
#include <stdlib.h>
#include <string.h>

#include <asyncfs/filesystem_interface.h>

#ifdef SCHEME_FROM_HELPER
/* from a library bundled beside the plugin and found through $ORIGIN */
const char* helper_scheme(void);
#define SCHEME helper_scheme()
#endif
#ifndef SCHEME
#define SCHEME "testfs"
#endif

static void* allocate(size_t size) { return calloc(1, size ? size : 1); }
static void release(void* ptr) { free(ptr); }

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
#ifdef CONFIGURED
  filesystem->plugin_filesystem = allocate(sizeof(int64_t)); /* "answer" */
#else
  filesystem->plugin_filesystem = NULL;
#endif
#ifdef TEMP_FILE_NAME
  /* as TensorFlow's GCS plugin does: the name is the caller's to free() */
  free(TF_GetTempFileName(""));
#endif
#ifdef BREAK_FAILING_INIT
  TF_SetStatus(status, TF_UNAVAILABLE, "backing service is down");
#else
  TF_SetStatus(status, TF_OK, "");
#endif
}

static void fs_cleanup(TF_Filesystem* filesystem) {
  release(filesystem->plugin_filesystem);
}

/* CONFIGURED: one int option, "answer", kept per filesystem (each init has
 * its own); "/answer/N" exists when it is N. */
#ifdef CONFIGURED
static void fs_configuration_keys(const TF_Filesystem* filesystem, char** keys,
                                  int* num_keys, TF_Status* status) {
  (void)filesystem;
  if (keys != NULL && *num_keys >= 1) {
    keys[0] = allocate(sizeof "answer");
    memcpy(keys[0], "answer", sizeof "answer");
  }
  *num_keys = 1;
  TF_SetStatus(status, TF_OK, "");
}

static void fs_set_option(const TF_Filesystem* filesystem,
                          const TF_Filesystem_Option* option,
                          TF_Status* status) {
  if (strcmp(option->name, "answer") != 0)
    TF_SetStatus(status, TF_NOT_FOUND, "the only option is answer");
  else if (option->value->type_tag != TF_Filesystem_Option_Type_Int ||
           option->value->num_values != 1)
    TF_SetStatus(status, TF_INVALID_ARGUMENT, "answer is one int");
  else {
    *(int64_t*)filesystem->plugin_filesystem = option->value->values[0].int_val;
    TF_SetStatus(status, TF_OK, "");
  }
}
#endif

static void fs_path_exists(const TF_Filesystem* filesystem, const char* path,
                           TF_Status* status) {
  (void)filesystem;
#ifdef CONFIGURED
  if (strncmp(path, "/answer/", 8) == 0) {
    if (atoll(path + 8) == *(const int64_t*)filesystem->plugin_filesystem)
      TF_SetStatus(status, TF_OK, "");
    else
      TF_SetStatus(status, TF_NOT_FOUND, "not the answer");
    return;
  }
#endif
  if (strcmp(path, "/here") == 0) TF_SetStatus(status, TF_OK, "");
  else if (strcmp(path, "/denied") == 0)
    TF_SetStatus(status, TF_PERMISSION_DENIED, "the credential is refused");
  else TF_SetStatus(status, TF_NOT_FOUND, "nothing but /here exists");
}

#ifdef OLDER_HEADER
static int fs_abort(const TF_Filesystem* filesystem, TF_TransactionToken* token,
                    TF_Status* status) {
  (void)filesystem;
  (void)token;
  TF_SetStatus(status, TF_OK, "");
  return 0;
}
#endif

static void reader_cleanup(TF_RandomAccessFile* file) { (void)file; }

/* LIAR: a plugin that answers OK with nonsense, for the core to catch. */
#ifdef LIAR
static int64_t reader_read(const TF_RandomAccessFile* file, uint64_t offset,
                           size_t n, char* buffer, TF_Status* status) {
  (void)file;
  (void)offset;
  memset(buffer, 'x', n);
  TF_SetStatus(status, TF_OK, "");
  return LIAR; /* a negative count, or more than was asked */
}

static int64_t fs_get_file_size(const TF_Filesystem* filesystem,
                                const char* path, TF_Status* status) {
  (void)filesystem;
  (void)path;
  TF_SetStatus(status, TF_OK, "");
  return -42;
}

static void fs_stat(const TF_Filesystem* filesystem, const char* path,
                    TF_FileStatistics* stats, TF_Status* status) {
  (void)filesystem;
  (void)path;
  stats->length = -7;
  stats->mtime_nsec = 0;
  stats->is_directory = false;
  TF_SetStatus(status, TF_OK, "");
}
#endif
/* GATED: reads of n bytes of 'g' (files have no end) that say on a line of
 * $TESTFS_ENTERED that they started, and, at offset 0, wait while the file
 * $TESTFS_GATE exists: a plugin whose read hangs until the test lets go. */
#ifdef GATED
static int64_t reader_read(const TF_RandomAccessFile* file, uint64_t offset,
                           size_t n, char* buffer, TF_Status* status) {
  const char* gate = getenv("TESTFS_GATE");
  const char* entered = getenv("TESTFS_ENTERED");
  struct timespec tick = {0, 1000000};
  (void)file;
  if (entered != NULL) {
    FILE* log = fopen(entered, "a");
    if (log != NULL) {
      fprintf(log, "%llu\n", (unsigned long long)offset);
      fclose(log);
    }
  }
  while (offset == 0 && gate != NULL && access(gate, F_OK) == 0)
    nanosleep(&tick, NULL);
  memset(buffer, 'g', n);
  TF_SetStatus(status, TF_OK, "");
  return (int64_t)n;
}
#endif

#ifdef OLDER_HEADER
/* Past the table size an OLDER_HEADER plugin reports: never called. */
static int64_t reader_read_never(const TF_RandomAccessFile* file,
                                 uint64_t offset, size_t n, char* buffer,
                                 TF_Status* status) {
  (void)file, (void)offset, (void)n, (void)buffer, (void)status;
  abort();
}
#endif

static void region_cleanup(TF_ReadOnlyMemoryRegion* region) { (void)region; }
static const void* region_data(const TF_ReadOnlyMemoryRegion* region) {
  (void)region;
  return "";
}
static uint64_t region_length(const TF_ReadOnlyMemoryRegion* region) {
  (void)region;
  return 0;
}
static void fs_new_random_access_file(const TF_Filesystem* filesystem,
                                      const char* path,
                                      TF_RandomAccessFile* file,
                                      TF_Status* status) {
  (void)filesystem;
  (void)path;
  (void)file;
#if defined(LIAR) || defined(GATED)
  TF_SetStatus(status, TF_OK, "");
#else
  TF_SetStatus(status, TF_UNIMPLEMENTED, "test plugin");
#endif
}

static char* copy_string(const char* s) {
  char* out = allocate(strlen(s) + 1);
  strcpy(out, s);
  return out;
}

#ifndef BREAK_NO_ENTRY_POINT
ASYNCFS_PLUGIN_EXPORT void TF_InitPlugin(TF_FilesystemPluginInfo* info) {
  TF_FilesystemPluginOps* ops = allocate(sizeof *ops);
  TF_FilesystemOps* fs = allocate(TF_FILESYSTEM_OPS_SIZE);
  TF_RandomAccessFileOps* reader = allocate(TF_RANDOM_ACCESS_FILE_OPS_SIZE);
  TF_ReadOnlyMemoryRegionOps* region =
      allocate(TF_READ_ONLY_MEMORY_REGION_OPS_SIZE);

#ifndef BREAK_NO_ALLOCATOR
  info->plugin_memory_allocate = allocate;
#endif
  info->plugin_memory_free = release;
#if defined(BREAK_NUM_SCHEMES)
  info->num_schemes = (size_t)BREAK_NUM_SCHEMES; /* 0, past the array, or -1 */
#else
  info->num_schemes = 1;
#endif
#ifndef BREAK_NULL_OPS
  info->ops = ops;
#endif
  TF_SetFilesystemVersionMetadata(ops);
#if defined(BREAK_UNREADABLE_SCHEME)
  ops->scheme = (char*)16; /* a pointer into the unmapped first page */
#elif !defined(BREAK_NULL_SCHEME)
  ops->scheme = copy_string(SCHEME);
#endif
#ifdef BREAK_WRONG_ABI
  ops->filesystem_ops_abi = TF_FILESYSTEM_OPS_ABI + 7;
#endif
#ifdef OTHER_API
  ops->random_access_file_ops_api = TF_RANDOM_ACCESS_FILE_OPS_API + 1;
#endif
#ifdef OLDER_HEADER
  /* built against a header without the appended abort_transaction entry,
   * nor read_if_ready */
  ops->filesystem_ops_size = offsetof(TF_FilesystemOps, abort_transaction);
  ops->random_access_file_ops_size =
      offsetof(TF_RandomAccessFileOps, read_if_ready);
  /* memory past the size it reported: the core must not copy it */
  fs->abort_transaction = fs_abort;
  reader->read_if_ready = reader_read_never;
#endif

#ifndef BREAK_MISSING_INIT
  fs->init = fs_init;
#endif
  fs->cleanup = fs_cleanup;
  fs->path_exists = fs_path_exists;
#ifdef CONFIGURED
  fs->get_filesystem_configuration_keys = fs_configuration_keys;
  fs->set_filesystem_configuration_option = fs_set_option;
#endif
  ops->filesystem_ops = fs;

#ifndef BREAK_MISSING_FILE_CLEANUP
  reader->cleanup = reader_cleanup;
#endif
#ifndef BREAK_CONSTRUCTOR_WITHOUT_TABLE
  ops->random_access_file_ops = reader;
#else
  free(reader);
#endif
  fs->new_random_access_file = fs_new_random_access_file;
#ifdef LIAR
  reader->read = reader_read;
  fs->get_file_size = fs_get_file_size;
  fs->stat = fs_stat;
#endif
#ifdef GATED
  reader->read = reader_read;
#endif

  region->cleanup = region_cleanup;
#ifndef BREAK_REGION_WITHOUT_DATA
  region->data = region_data;
#endif
  region->length = region_length;
  ops->read_only_memory_region_ops = region;
}
#endif

#if defined(METADATA_MIN) && defined(METADATA_MAX)
static const ASYNCFS_PluginMetadata metadata = {
    sizeof(ASYNCFS_PluginMetadata), "testfs", "9.9.9", "tests",
    "https://example.invalid/testfs", METADATA_MIN, METADATA_MAX, 0};

ASYNCFS_PLUGIN_EXPORT const ASYNCFS_PluginMetadata* ASYNCFS_GetPluginMetadata(
    void) {
  return &metadata;
}
#endif
