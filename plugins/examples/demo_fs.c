/*
 * demo:// — a small third-party asyncfs plugin.
 *
 * It serves demo:///some/path from the local /some/path and offers only the
 * core ops; asyncfs supplies the rest generically (glob, recursive create
 * and delete, rename, copy, batch exists, size, is-directory, name
 * translation). It links against nothing but libc: TF_SetStatus and friends
 * come from the asyncfs runtime at load time.
 *
 * Build (see README.md beside this file):
 *   cc -std=c99 -Wall -Wextra -shared -fPIC \
 *      -I"$(python -c 'import asyncfs; print(asyncfs.get_include())')" \
 *      demo_fs.c -o libdemo_fs.so
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <asyncfs/filesystem_interface.h>

static void* demo_allocate(size_t size) { return calloc(1, size ? size : 1); }
static void demo_free(void* ptr) { free(ptr); }

static void ok(TF_Status* status) { TF_SetStatus(status, TF_OK, ""); }

/* ---- files: the plugin keeps an int fd behind each handle ---------------- */

static int* new_fd(int fd) {
  int* p = demo_allocate(sizeof *p);
  *p = fd;
  return p;
}

static void reader_cleanup(TF_RandomAccessFile* file) {
  close(*(int*)file->plugin_file);
  demo_free(file->plugin_file);
}

static int64_t reader_read(const TF_RandomAccessFile* file, uint64_t offset,
                           size_t n, char* buffer, TF_Status* status) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = pread(*(int*)file->plugin_file, buffer + done, n - done,
                        (off_t)(offset + done));
    if (got < 0) {
      TF_SetStatusFromIOError(status, errno, "pread");
      return -1;
    }
    if (got == 0) {
      TF_SetStatus(status, TF_OUT_OF_RANGE, "end of file");
      return (int64_t)done;
    }
    done += (size_t)got;
  }
  ok(status);
  return (int64_t)done;
}

static void writer_cleanup(TF_WritableFile* file) {
  int* fd = file->plugin_file;
  if (*fd >= 0) close(*fd);
  demo_free(fd);
}

static void writer_append(const TF_WritableFile* file, const char* buffer,
                          size_t n, TF_Status* status) {
  size_t done = 0;
  while (done < n) {
    ssize_t put = write(*(int*)file->plugin_file, buffer + done, n - done);
    if (put < 0) {
      TF_SetStatusFromIOError(status, errno, "write");
      return;
    }
    done += (size_t)put;
  }
  ok(status);
}

static int64_t writer_tell(const TF_WritableFile* file, TF_Status* status) {
  off_t position = lseek(*(int*)file->plugin_file, 0, SEEK_CUR);
  if (position < 0) TF_SetStatusFromIOError(status, errno, "lseek");
  else ok(status);
  return (int64_t)position;
}

static void writer_close(const TF_WritableFile* file, TF_Status* status) {
  int* fd = file->plugin_file;
  int rc = close(*fd);
  *fd = -1;
  if (rc != 0) TF_SetStatusFromIOError(status, errno, "close");
  else ok(status);
}

/* ---- filesystem ---------------------------------------------------------- */

static void fs_init(TF_Filesystem* filesystem, TF_Status* status) {
  filesystem->plugin_filesystem = NULL;
  ok(status);
}

static void fs_cleanup(TF_Filesystem* filesystem) { (void)filesystem; }

static void fs_new_random_access_file(const TF_Filesystem* filesystem,
                                      const char* path,
                                      TF_RandomAccessFile* file,
                                      TF_Status* status) {
  struct stat st;
  int fd = open(path, O_RDONLY);
  (void)filesystem;
  if (fd < 0 || fstat(fd, &st) != 0) {
    TF_SetStatusFromIOError(status, errno, path);
    if (fd >= 0) close(fd);
    return;
  }
  if (S_ISDIR(st.st_mode)) {
    close(fd);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "path is a directory");
    return;
  }
  file->plugin_file = new_fd(fd);
  ok(status);
}

static void fs_new_writable_file(const TF_Filesystem* filesystem,
                                 const char* path, TF_WritableFile* file,
                                 TF_Status* status) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0666);
  (void)filesystem;
  if (fd < 0) {
    TF_SetStatusFromIOError(status, errno, path);
    return;
  }
  file->plugin_file = new_fd(fd);
  ok(status);
}

#define PATH_OP(name, call)                                            \
  static void name(const TF_Filesystem* filesystem, const char* path, \
                   TF_Status* status) {                               \
    (void)filesystem;                                                 \
    if ((call) != 0) TF_SetStatusFromIOError(status, errno, path);    \
    else ok(status);                                                  \
  }

PATH_OP(fs_create_dir, mkdir(path, 0777))
PATH_OP(fs_delete_file, unlink(path))
PATH_OP(fs_delete_dir, rmdir(path))
PATH_OP(fs_path_exists, access(path, F_OK))

static void fs_stat(const TF_Filesystem* filesystem, const char* path,
                    TF_FileStatistics* stats, TF_Status* status) {
  struct stat st;
  (void)filesystem;
  if (stat(path, &st) != 0) {
    TF_SetStatusFromIOError(status, errno, path);
    return;
  }
  stats->length = S_ISDIR(st.st_mode) ? 0 : (int64_t)st.st_size;
  stats->mtime_nsec = (int64_t)st.st_mtime * 1000000000;
  stats->is_directory = S_ISDIR(st.st_mode);
  ok(status);
}

static int fs_get_children(const TF_Filesystem* filesystem, const char* path,
                           char*** entries, TF_Status* status) {
  DIR* dir = opendir(path);
  struct dirent* entry;
  int count = 0, capacity = 16;
  (void)filesystem;
  if (dir == NULL) {
    TF_SetStatusFromIOError(status, errno, path);
    return -1;
  }
  *entries = demo_allocate((size_t)capacity * sizeof(char*));
  while ((entry = readdir(dir)) != NULL) {
    size_t len = strlen(entry->d_name);
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0)
      continue;
    if (count == capacity) {
      char** grown = demo_allocate((size_t)capacity * 2 * sizeof(char*));
      memcpy(grown, *entries, (size_t)capacity * sizeof(char*));
      demo_free(*entries);
      *entries = grown;
      capacity *= 2;
    }
    (*entries)[count] = demo_allocate(len + 1);
    memcpy((*entries)[count++], entry->d_name, len + 1);
  }
  closedir(dir);
  ok(status);
  return count;
}

/* ---- registration -------------------------------------------------------- */

ASYNCFS_PLUGIN_EXPORT void TF_InitPlugin(TF_FilesystemPluginInfo* info) {
  TF_FilesystemPluginOps* ops = demo_allocate(sizeof *ops);
  TF_FilesystemOps* fs = demo_allocate(TF_FILESYSTEM_OPS_SIZE);
  TF_RandomAccessFileOps* reader = demo_allocate(TF_RANDOM_ACCESS_FILE_OPS_SIZE);
  TF_WritableFileOps* writer = demo_allocate(TF_WRITABLE_FILE_OPS_SIZE);
  const char scheme[] = "demo";

  info->plugin_memory_allocate = demo_allocate;
  info->plugin_memory_free = demo_free;
  info->num_schemes = 1;
  info->ops = ops;

  TF_SetFilesystemVersionMetadata(ops);
  ops->scheme = demo_allocate(sizeof scheme);
  memcpy(ops->scheme, scheme, sizeof scheme);

  reader->cleanup = reader_cleanup;
  reader->read = reader_read;
  writer->cleanup = writer_cleanup;
  writer->append = writer_append;
  writer->tell = writer_tell;
  writer->close = writer_close;
  ops->random_access_file_ops = reader;
  ops->writable_file_ops = writer;

  fs->init = fs_init;
  fs->cleanup = fs_cleanup;
  fs->new_random_access_file = fs_new_random_access_file;
  fs->new_writable_file = fs_new_writable_file;
  fs->create_dir = fs_create_dir;
  fs->delete_file = fs_delete_file;
  fs->delete_dir = fs_delete_dir;
  fs->path_exists = fs_path_exists;
  fs->stat = fs_stat;
  fs->get_children = fs_get_children;
  ops->filesystem_ops = fs;
}

static const ASYNCFS_PluginMetadata demo_metadata = {
    sizeof(ASYNCFS_PluginMetadata), "demo", "0.1.0", "an example author",
    "https://example.invalid/demo-fs/issues", 1, ASYNCFS_CORE_ABI_VERSION, 0};

ASYNCFS_PLUGIN_EXPORT const ASYNCFS_PluginMetadata* ASYNCFS_GetPluginMetadata(
    void) {
  return &demo_metadata;
}
