/*
 * Opening a local path only when the kernel can do it from what it holds
 * in memory, so that the call never waits and may run on an event loop's
 * thread.
 *
 * openat2(2)'s RESOLVE_CACHED (Linux 5.12) walks a path only through the
 * directory entries the kernel has cached and refuses with EAGAIN where a
 * step would read a disk or ask a server: io_uring opens files on the
 * submitting thread so, and only there. A file is taken only on a
 * filesystem whose attributes are read from the inode in memory: a network
 * filesystem may ask its server, so NFS, CIFS, FUSE and any type not
 * listed in at_hand.c are never at hand. Nor is such a filesystem asked
 * anything on the way: its type is read from what the kernel keeps of its
 * mounts (statmount(2), or /proc/self/mountinfo), never by fstatfs(2), and
 * its stat is asked with AT_STATX_DONT_SYNC.
 */
#ifndef ASYNCFS_AT_HAND_H_
#define ASYNCFS_AT_HAND_H_

#include <sys/stat.h>

/* Open path (relative paths from the working directory) with flags, which
 * are O_PATH (to stat it) or O_RDONLY (to read a regular file), both with
 * close-on-exec, and fstat(2) it into st (with O_PATH, st may be NULL: the
 * caller fstat's the descriptor itself). The path is opened O_PATH first,
 * and opened to read only when that found a regular file: an open of a FIFO
 * to read, even closed at once, would let a writer waiting in its own open
 * go on and lose its bytes, and a device's open may do something. Returns:
 *   - the descriptor, when everything was at hand (with O_RDONLY, only a
 *     regular file is taken);
 *   - -errno, when the walk through cached entries gave the answer that
 *     open(2) and stat(2) give (ENOENT, ENOTDIR, EACCES, ELOOP,
 *     ENAMETOOLONG);
 *   - -EAGAIN when the answer is not at hand (a step not cached, a network
 *     filesystem, not a regular file, a kernel without openat2, anything
 *     else): make the ordinary call, on a thread that may wait.
 * Always -EAGAIN off Linux. */
int at_hand_open(const char* path, int flags, struct stat* st);

/* Whether fd (O_PATH will do) lies on a local filesystem listed in
 * at_hand.c: one whose attributes are read from the inode in memory, and
 * whose regular files' reads come back short only at the end of the file
 * (NFS, FUSE and the others may answer part of what was asked). It asks
 * fstatfs(2), which NFS sends to its server and FUSE to its daemon: only
 * on a thread that may wait (at_hand_open never asks it). 0 off Linux. */
int at_hand_local(int fd);

#endif /* ASYNCFS_AT_HAND_H_ */
