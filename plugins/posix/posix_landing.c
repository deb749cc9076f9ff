/*
 * Where the posix plugin's writes and copies land: an atomic write or a
 * copy goes to a temporary sibling that is renamed over its target, so a
 * failed one never leaves a half-written file under the target's name.
 *
 * - The target is found as open(2) would find it, through the links it
 *   names (landing_path), and refused where open(2) would refuse to follow
 *   one: a link in a sticky, world-writable folder (/tmp) that neither the
 *   writer nor the folder's owner owns (the kernel's protected_symlinks
 *   rule, applied whatever the sysctl says), so another user's link never
 *   leads a write to the writer's own files.
 * - A temporary sibling has an unguessable name, is created new (O_EXCL,
 *   never through a link) and is its owner's alone until it lands.
 * - It lands with the target's permissions (and group, where the process
 *   may): a rewritten 0600 key stays 0600, a script keeps +x. A new file
 *   gets what open(2) gives (0666 less the umask); a copy gets its
 *   source's permission bits, as shutil.copy does.
 * - A tree copy recreates links and FIFOs (copy_entry), as cp -R does.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "plugin_common.h"
#include "plugin_fs.h"
#include "posix_internal.h"

/* ---- files only ------------------------------------------------------------ */

int posix_check_file_pair(const char* src, const char* dst, TF_Status* status) {
  struct stat st;
  if (stat(dst, &st) != 0) {
    if (errno != ENOENT) {
      TF_SetStatusFromIOError(status, errno, dst);
      return -1;
    }
  } else if (S_ISDIR(st.st_mode)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "target path is a directory");
    return -1;
  }
  if (stat(src, &st) != 0) {
    TF_SetStatusFromIOError(status, errno, src);
    return -1;
  }
  if (S_ISDIR(st.st_mode)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "source path is a directory");
    return -1;
  }
  return 0;
}

/* ---- following links as open(2) would ---------------------------------------- */

/* Linux follows at most this many symbolic links in one lookup. */
#define LANDING_HOPS 40

/* Whether the kernel's protected_symlinks rule forbids following the link
 * at path (whose lstat is link): it lies in a sticky, world-writable folder
 * and is owned by neither the follower nor the folder's owner. */
static int protected_link(const char* path, const struct stat* link) {
  char folder[PATH_MAX];
  const char* slash = strrchr(path, '/');
  struct stat st;
  if (link->st_uid == geteuid()) return 0;
  if (slash == NULL) {
    snprintf(folder, sizeof folder, ".");
  } else if (slash == path) {
    snprintf(folder, sizeof folder, "/");
  } else if ((size_t)(slash - path) < sizeof folder) {
    snprintf(folder, sizeof folder, "%.*s", (int)(slash - path), path);
  } else {
    return 1; /* cannot look: refuse */
  }
  if (stat(folder, &st) != 0) return 1;
  return (st.st_mode & S_ISVTX) && (st.st_mode & S_IWOTH) && link->st_uid != st.st_uid;
}

/* The end of the chain of symbolic links that path names, read link by
 * link (the file there need not exist), allocated with
 * plugin_memory_allocate; *hops is how many links were followed, and
 * *opened whether one was /proc's, which names an open file rather than a
 * path (/dev/stdout leads to /proc/self/fd/1). NULL with status set on a
 * loop of links, a link open(2) would not follow (PERMISSION_DENIED), or
 * without memory. */
static char* follow_links(const char* path, int* hops, int* opened, TF_Status* status) {
  char* at = plugin_strdup(path);
  char link[PATH_MAX];
  *opened = 0;
  for (*hops = 0; at != NULL && *hops <= LANDING_HOPS; ++*hops) {
    struct stat st;
    ssize_t n;
    char* next;
    if (lstat(at, &st) != 0 || !S_ISLNK(st.st_mode)) {
      plugin_set_ok(status);
      return at;
    }
    if (protected_link(at, &st)) {
      char message[PATH_MAX + 200];
      snprintf(message, sizeof message,
               "%s is another user's symbolic link in a sticky folder that anyone may write: "
               "not followed, as open() would not follow it",
               at);
      plugin_memory_free(at);
      TF_SetStatus(status, TF_PERMISSION_DENIED, message);
      return NULL;
    }
    if (strncmp(at, "/proc/", 6) == 0) *opened = 1;
    n = readlink(at, link, sizeof link);
    if (n < 0 || (size_t)n >= sizeof link) {
      plugin_memory_free(at);
      TF_SetStatusFromIOError(status, n < 0 ? errno : ENAMETOOLONG, path);
      return NULL;
    }
    if (link[0] == '/') { /* from the root; otherwise from the link's folder */
      next = plugin_memory_allocate((size_t)n + 1);
      if (next != NULL) memcpy(next, link, (size_t)n);
    } else {
      const char* slash = strrchr(at, '/');
      size_t folder = slash != NULL ? (size_t)(slash - at) + 1 : 0;
      next = plugin_memory_allocate(folder + (size_t)n + 1);
      if (next != NULL) {
        memcpy(next, at, folder);
        memcpy(next + folder, link, (size_t)n);
      }
      n += (ssize_t)folder;
    }
    if (next != NULL) next[n] = '\0';
    plugin_memory_free(at);
    at = next;
  }
  if (at == NULL) {
    plugin_set_oom(status);
    return NULL;
  }
  plugin_memory_free(at);
  TF_SetStatusFromIOError(status, ELOOP, path);
  return NULL;
}

/* Where a write of path that is staged beside its target and renamed over
 * it must land, to write what open(path, O_WRONLY | O_CREAT) writes: the
 * file path leads to through its symbolic links (follow_links), allocated
 * with plugin_memory_allocate. NULL with status OK when the write must go
 * in place: path leads to a device, a FIFO or a socket, which a rename
 * would replace, or to a file open in some process, through /proc (the
 * file a shell sent standard output to: written in place, as by that
 * shell, not replaced under it), or through links that do not read as a
 * path to it. NULL with status set on a loop of links, a link open(2)
 * would not follow, or without memory. Anything else wrong with the path
 * (a missing folder, no permission) is left for the write to report, as
 * open() would. */
static char* landing_of(const char* path, TF_Status* status) {
  struct stat target, landed;
  int exists = stat(path, &target) == 0, hops, opened;
  char* at;
  if (exists && !S_ISREG(target.st_mode) && !S_ISDIR(target.st_mode)) {
    plugin_set_ok(status);
    return NULL;
  }
  at = follow_links(path, &hops, &opened, status);
  if (at != NULL && opened) {
    plugin_memory_free(at);
    return NULL;
  }
  if (at != NULL && exists && hops > 0 &&
      (stat(at, &landed) != 0 || landed.st_dev != target.st_dev || landed.st_ino != target.st_ino)) {
    plugin_memory_free(at);
    return NULL;
  }
  return at;
}

char* posix_landing_path(const TF_Filesystem* filesystem, const char* path, TF_Status* status) {
  (void)filesystem;
  return landing_of(path, status);
}

/* ---- permissions ------------------------------------------------------------- */

mode_t posix_umask(void) {
  /* /proc (Linux 4.7+) tells without changing it; elsewhere the umask(2)
   * round trip, which another thread's file creation could meet */
  FILE* status = fopen("/proc/self/status", "re");
  char line[256];
  mode_t mask = (mode_t)-1;
  if (status != NULL) {
    while (fgets(line, sizeof line, status) != NULL) {
      if (strncmp(line, "Umask:", 6) == 0) {
        mask = (mode_t)strtoul(line + 6, NULL, 8);
        break;
      }
    }
    fclose(status);
  }
  if (mask == (mode_t)-1) {
    mask = umask(022);
    umask(mask);
  }
  return mask;
}

/* Gives the open file fd the permission bits of like (a file's stat), and
 * with group its owner and group too where the process may, or a new file's bits
 * where like is NULL. The set-id bits are never carried: a write by anyone
 * but root clears them, as the kernel's own does. 0, or -1 with errno set. */
static int take_permissions(int fd, const struct stat* like, int group) {
  if (like == NULL) return fchmod(fd, 0666 & ~posix_umask()); /* as open(2) would make it */
  if (group && fchown(fd, like->st_uid, like->st_gid) != 0 &&
      (errno != EPERM || (fchown(fd, (uid_t)-1, like->st_gid) != 0 && errno != EPERM)))
    return -1;
  return fchmod(fd, like->st_mode & 0777);
}

/* ---- temporary siblings ---------------------------------------------------------- */

/* Creates a new, private sibling of landing named
 * "<landing>.~asyncfs-copy.<random>" (its name hashed where that would
 * pass NAME_MAX) into tmp: an fd, or -1 with errno set. */
static int create_sibling(const char* landing, char* tmp, size_t cap) {
  const char* slash = strrchr(landing, '/');
  size_t dir_len = slash != NULL ? (size_t)(slash - landing) + 1 : 0;
  int attempt;
  for (attempt = 0; attempt < 8; ++attempt) {
    char random[17];
    int written, fd;
    if (plugin_random_hex(random, sizeof random) != 0) return -1;
    if (strlen(landing + dir_len) + 32 > NAME_MAX) /* keep the sibling's name legal */
      written = snprintf(tmp, cap, "%.*s.~asyncfs-copy.%016llx.%s", (int)dir_len, landing,
                         (unsigned long long)plugin_hash(landing + dir_len, strlen(landing + dir_len)),
                         random);
    else
      written = snprintf(tmp, cap, "%s.~asyncfs-copy.%s", landing, random);
    if (written < 0 || (size_t)written >= cap) {
      errno = ENAMETOOLONG;
      return -1;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  return -1;
}

void posix_new_temporary_file(const TF_Filesystem* filesystem, const char* path,
                              TF_WritableFile* file, TF_Status* status) {
  posix_open_writer(filesystem, path, O_EXCL | O_NOFOLLOW, 0600, file, status);
}

void posix_replace_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                        TF_Status* status) {
  struct stat source, target;
  int fd, has_target;
  if (posix_check_staged_path(filesystem, src, status) != 0) return;
  if (posix_check_staged_path(filesystem, dst, status) != 0) return;
  fd = open(src, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0 || fstat(fd, &source) != 0) {
    TF_SetStatusFromIOError(status, errno, src);
    if (fd >= 0) close(fd);
    return;
  }
  if (!S_ISREG(source.st_mode)) {
    close(fd);
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "source path is not a regular file");
    return;
  }
  has_target = stat(dst, &target) == 0;
  if (!has_target && errno != ENOENT) {
    TF_SetStatusFromIOError(status, errno, dst);
    close(fd);
    return;
  }
  if (has_target && S_ISDIR(target.st_mode)) {
    TF_SetStatus(status, TF_FAILED_PRECONDITION, "target path is a directory");
    close(fd);
    return;
  }
  if (take_permissions(fd, has_target && S_ISREG(target.st_mode) ? &target : NULL, 1) != 0) {
    TF_SetStatusFromIOError(status, errno, src);
    close(fd);
    return;
  }
  close(fd);
  if (rename(src, dst) != 0) {
    TF_SetStatusFromIOError(status, errno, dst);
    return;
  }
  plugin_set_ok(status);
}

/* ---- copies ------------------------------------------------------------------------ */

/* Copies every byte of in to out: copy_file_range, then sendfile, then a
 * plain read/write loop, each tried when the previous is not supported. */
static int copy_fd(int in, int out, off_t size) {
  char buf[1 << 16];
  off_t done = 0;
  while (done < size) {
    ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)(size - done), 0);
    if (n > 0) {
      done += n;
      continue;
    }
    if (n == 0) return 0; /* the source shrank */
    if (errno == EINTR) continue;
    if (errno != EXDEV && errno != ENOSYS && errno != EOPNOTSUPP &&
        errno != EINVAL)
      return -1;
    break;
  }
  while (done < size) {
    ssize_t n = sendfile(out, in, NULL, (size_t)(size - done));
    if (n > 0) {
      done += n;
      continue;
    }
    if (n == 0) return 0;
    if (errno == EINTR) continue;
    if (errno != EINVAL && errno != ENOSYS) return -1;
    break;
  }
  for (;;) {
    ssize_t n = read(in, buf, sizeof buf);
    ssize_t put = 0;
    if (n == 0) return 0;
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    while (put < n) {
      ssize_t w = write(out, buf + put, (size_t)(n - put));
      if (w < 0) {
        if (errno == EINTR) continue;
        return -1;
      }
      put += w;
    }
  }
}

/* Copies in (size bytes) into dst, opened in place: a device or a FIFO,
 * which a staged copy's rename would replace. Closes in. */
static void copy_in_place(int in, int64_t size, const char* dst, TF_Status* status) {
  int out = open(dst, O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (out < 0 || copy_fd(in, out, size) != 0) {
    TF_SetStatusFromIOError(status, errno, dst);
    if (out >= 0) close(out);
    close(in);
    return;
  }
  close(in);
  if (close(out) != 0) {
    TF_SetStatusFromIOError(status, errno, dst);
    return;
  }
  plugin_set_ok(status);
}

void posix_copy_file(const TF_Filesystem* filesystem, const char* src, const char* dst,
                     TF_Status* status) {
  char tmp[PATH_MAX + 64];
  struct stat st;
  char* landing;
  int in, out;
  if (posix_check_staged_path(filesystem, dst, status) != 0) return;
  if (posix_check_file_pair(src, dst, status) != 0) return;
  landing = landing_of(dst, status); /* through dst's links, as a write of dst */
  if (landing == NULL && TF_GetCode(status) != TF_OK) return;
  in = posix_open_regular(src, &st, status);
  if (in < 0) {
    plugin_memory_free(landing);
    return;
  }
  if (landing == NULL) {
    copy_in_place(in, st.st_size, dst, status);
    return;
  }
  out = create_sibling(landing, tmp, sizeof tmp);
  if (out < 0) {
    TF_SetStatusFromIOError(status, errno, dst);
  } else if (copy_fd(in, out, st.st_size) != 0 || take_permissions(out, &st, 0) != 0) {
    TF_SetStatusFromIOError(status, errno, dst);
    close(out);
    unlink(tmp);
  } else if (close(out) != 0 || rename(tmp, landing) != 0) {
    TF_SetStatusFromIOError(status, errno, dst);
    unlink(tmp);
  } else {
    plugin_set_ok(status);
  }
  close(in);
  plugin_memory_free(landing);
}

void posix_copy_entry(const TF_Filesystem* filesystem, const char* src, const char* dst,
                      TF_Status* status) {
  struct stat st;
  char target[PATH_MAX];
  ssize_t n;
  if (posix_check_staged_path(filesystem, dst, status) != 0) return;
  if (lstat(src, &st) != 0) {
    TF_SetStatusFromIOError(status, errno, src);
    return;
  }
  if (S_ISLNK(st.st_mode)) {
    n = readlink(src, target, sizeof target);
    if (n < 0 || (size_t)n >= sizeof target) {
      TF_SetStatusFromIOError(status, n < 0 ? errno : ENAMETOOLONG, src);
      return;
    }
    target[n] = '\0';
    if (symlink(target, dst) != 0) {
      TF_SetStatusFromIOError(status, errno, dst);
      return;
    }
  } else if (S_ISFIFO(st.st_mode)) {
    if (mkfifo(dst, st.st_mode & 0777) != 0) {
      TF_SetStatusFromIOError(status, errno, dst);
      return;
    }
  } else {
    TF_SetStatus(status, TF_FAILED_PRECONDITION,
                 S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)
                     ? "copy_entry copies links and FIFOs: copy a file or a folder by its content"
                     : "a socket or a device is not copied");
    return;
  }
  plugin_set_ok(status);
}
