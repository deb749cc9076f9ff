// tfdemo:// — a minimal plugin built the way TensorFlow's ecosystem builds
// them: against TensorFlow's own (C++-only) header, linked to
// libtensorflow_framework.so.2 for TF_SetStatus. It serves tfdemo:///path
// from the local /path with the core ops only.
//
// tests/test_plugin_copy.py compiles it with TensorFlow's include folder and
// runs the conformance suite on it through asyncfs.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensorflow/c/experimental/filesystem/filesystem_interface.h"

namespace {

void* allocate(size_t size) { return calloc(1, size); }
void release(void* ptr) { free(ptr); }

void from_errno(TF_Status* status, const char* path) {
  TF_Code code = TF_UNKNOWN;
  switch (errno) {
    case ENOENT: code = TF_NOT_FOUND; break;
    case EEXIST: code = TF_ALREADY_EXISTS; break;
    case EACCES: case EPERM: code = TF_PERMISSION_DENIED; break;
    case ENOTDIR: case EISDIR: case ENOTEMPTY: code = TF_FAILED_PRECONDITION; break;
    default: break;
  }
  TF_SetStatus(status, code, path);
}

void ok(TF_Status* status) { TF_SetStatus(status, TF_OK, ""); }

int64_t file_read(const TF_RandomAccessFile* file, uint64_t offset, size_t n, char* buffer,
                  TF_Status* status) {
  int fd = static_cast<int>(reinterpret_cast<intptr_t>(file->plugin_file));
  size_t done = 0;
  while (done < n) {
    ssize_t got = pread(fd, buffer + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      from_errno(status, "read");
      return -1;
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  if (done < n) {
    TF_SetStatus(status, TF_OUT_OF_RANGE, "read past the end of the file");
  } else {
    ok(status);
  }
  return static_cast<int64_t>(done);
}

void file_cleanup(TF_RandomAccessFile* file) {
  close(static_cast<int>(reinterpret_cast<intptr_t>(file->plugin_file)));
}

int writer_fd(const TF_WritableFile* file) {
  return static_cast<int>(reinterpret_cast<intptr_t>(file->plugin_file));
}

void writer_append(const TF_WritableFile* file, const char* data, size_t n, TF_Status* status) {
  while (n > 0) {
    ssize_t put = write(writer_fd(file), data, n);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) {
      from_errno(status, "append");
      return;
    }
    data += put;
    n -= static_cast<size_t>(put);
  }
  ok(status);
}

int64_t writer_tell(const TF_WritableFile* file, TF_Status* status) {
  off_t at = lseek(writer_fd(file), 0, SEEK_CUR);
  if (at < 0) from_errno(status, "tell"); else ok(status);
  return at;
}

void writer_close(const TF_WritableFile* file, TF_Status* status) {
  if (close(writer_fd(file)) != 0) from_errno(status, "close"); else ok(status);
}

void writer_cleanup(TF_WritableFile* file) { (void)file; }

void fs_init(TF_Filesystem* fs, TF_Status* status) {
  fs->plugin_filesystem = nullptr;
  ok(status);
}

void fs_cleanup(TF_Filesystem* fs) { (void)fs; }

void fs_open_read(const TF_Filesystem*, const char* path, TF_RandomAccessFile* file,
                  TF_Status* status) {
  struct stat st;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return from_errno(status, path);
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    return TF_SetStatus(status, TF_FAILED_PRECONDITION, "is a directory");
  }
  file->plugin_file = reinterpret_cast<void*>(static_cast<intptr_t>(fd));
  ok(status);
}

void fs_open_write(const TF_Filesystem*, const char* path, TF_WritableFile* file,
                   TF_Status* status) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) return from_errno(status, path);
  file->plugin_file = reinterpret_cast<void*>(static_cast<intptr_t>(fd));
  ok(status);
}

void fs_create_dir(const TF_Filesystem*, const char* path, TF_Status* status) {
  if (mkdir(path, 0777) != 0) from_errno(status, path); else ok(status);
}

void fs_delete_file(const TF_Filesystem*, const char* path, TF_Status* status) {
  struct stat st;
  if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
    return TF_SetStatus(status, TF_FAILED_PRECONDITION, "is a directory");
  if (unlink(path) != 0) from_errno(status, path); else ok(status);
}

void fs_delete_dir(const TF_Filesystem*, const char* path, TF_Status* status) {
  if (rmdir(path) != 0) from_errno(status, path); else ok(status);
}

void fs_path_exists(const TF_Filesystem*, const char* path, TF_Status* status) {
  struct stat st;
  if (stat(path, &st) != 0) from_errno(status, path); else ok(status);
}

void fs_stat(const TF_Filesystem*, const char* path, TF_FileStatistics* stats, TF_Status* status) {
  struct stat st;
  if (stat(path, &st) != 0) return from_errno(status, path);
  stats->length = S_ISDIR(st.st_mode) ? 0 : st.st_size;
  stats->mtime_nsec = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  stats->is_directory = S_ISDIR(st.st_mode);
  ok(status);
}

int fs_get_children(const TF_Filesystem*, const char* path, char*** entries, TF_Status* status) {
  DIR* dir = opendir(path);
  if (dir == nullptr) {
    from_errno(status, path);
    return -1;
  }
  int count = 0, capacity = 16;
  char** names = static_cast<char**>(allocate(capacity * sizeof(char*)));
  while (struct dirent* entry = readdir(dir)) {
    if (strcmp(entry->d_name, ".") == 0 || strcmp(entry->d_name, "..") == 0) continue;
    if (count == capacity) {
      capacity *= 2;
      names = static_cast<char**>(realloc(names, capacity * sizeof(char*)));
    }
    names[count++] = strdup(entry->d_name);
  }
  closedir(dir);
  *entries = names;
  ok(status);
  return count;
}

template <typename T>
T* table() {
  return static_cast<T*>(allocate(sizeof(T)));
}

}  // namespace

TF_CAPI_EXPORT extern void TF_InitPlugin(TF_FilesystemPluginInfo* info) {
  auto* ops = table<TF_FilesystemPluginOps>();
  auto* fs = table<TF_FilesystemOps>();
  auto* reader = table<TF_RandomAccessFileOps>();
  auto* writer = table<TF_WritableFileOps>();
  info->plugin_memory_allocate = allocate;
  info->plugin_memory_free = release;
  info->num_schemes = 1;
  info->ops = ops;
  TF_SetFilesystemVersionMetadata(ops);
  ops->scheme = strdup("tfdemo");
  reader->cleanup = file_cleanup;
  reader->read = file_read;
  writer->cleanup = writer_cleanup;
  writer->append = writer_append;
  writer->tell = writer_tell;
  writer->close = writer_close;
  ops->random_access_file_ops = reader;
  ops->writable_file_ops = writer;
  fs->init = fs_init;
  fs->cleanup = fs_cleanup;
  fs->new_random_access_file = fs_open_read;
  fs->new_writable_file = fs_open_write;
  fs->create_dir = fs_create_dir;
  fs->delete_file = fs_delete_file;
  fs->delete_dir = fs_delete_dir;
  fs->path_exists = fs_path_exists;
  fs->stat = fs_stat;
  fs->get_children = fs_get_children;
  ops->filesystem_ops = fs;
}
