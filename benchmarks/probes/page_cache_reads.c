/* How much of reading a small file from the page cache is system calls?
 * Reads n files (DIR/file00000.bin ...) whole, three ways, and prints the
 * microseconds per file of each, five rounds:
 *   plain4  open + fstat + pread + close (what the posix plugin does)
 *   plain3  open + pread + close
 *   uring   io_uring: openat into a fixed-file slot, read, close, linked,
 *           BATCH files per submit
 * Build and run (Debian: apt-get install liburing-dev):
 *   gcc -std=c99 -O2 -Wall -Wextra -o /tmp/page_cache_reads \
 *       benchmarks/probes/page_cache_reads.c -luring
 *   /tmp/page_cache_reads DIR 2000 64
 * Results on 2026-11-23 are in docs/benchmarks.md (io_uring saved nothing). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { CAP = 8192 };

static int n, batch;
static char** paths;
static char* buf;
static long total;
static struct io_uring ring;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void read_plain(int with_fstat) {
  total = 0;
  for (int i = 0; i < n; i++) {
    struct stat st;
    int fd = open(paths[i], O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (with_fstat) fstat(fd, &st);
    ssize_t got = pread(fd, buf + (size_t)i * CAP, CAP, 0);
    close(fd);
    if (got > 0) total += got;
  }
}

static void read_uring(void) {
  total = 0;
  for (int s = 0; s < n; s += batch) {
    int m = n - s < batch ? n - s : batch;
    for (int j = 0; j < m; j++) {
      int i = s + j;
      struct io_uring_sqe* q = io_uring_get_sqe(&ring);
      io_uring_prep_openat_direct(q, AT_FDCWD, paths[i], O_RDONLY, 0, (unsigned)j);
      q->flags |= IOSQE_IO_LINK;
      q->user_data = 0;
      q = io_uring_get_sqe(&ring);
      io_uring_prep_read(q, j, buf + (size_t)i * CAP, CAP, 0);
      q->flags |= IOSQE_FIXED_FILE | IOSQE_IO_LINK;
      q->user_data = (unsigned long long)i + 1;
      q = io_uring_get_sqe(&ring);
      io_uring_prep_close_direct(q, (unsigned)j);
      q->user_data = 0;
    }
    io_uring_submit_and_wait(&ring, (unsigned)(3 * m));
    struct io_uring_cqe* c;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, c) {
      if (c->user_data != 0 && c->res > 0) total += c->res;
      seen++;
    }
    io_uring_cq_advance(&ring, seen);
  }
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s DIR FILES BATCH\n", argv[0]);
    return 2;
  }
  n = atoi(argv[2]);
  batch = atoi(argv[3]);
  paths = malloc((size_t)n * sizeof *paths);
  buf = malloc((size_t)n * CAP);
  if (paths == NULL || buf == NULL || n < 1 || batch < 1) return 2;
  for (int i = 0; i < n; i++) {
    paths[i] = malloc(4096);
    snprintf(paths[i], 4096, "%s/file%05d.bin", argv[1], i);
  }
  struct io_uring_params p;
  memset(&p, 0, sizeof p);
  p.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN;
  int rc = io_uring_queue_init_params((unsigned)(4 * batch), &ring, &p);
  if (rc == 0) rc = io_uring_register_files_sparse(&ring, (unsigned)batch);
  if (rc < 0) {
    fprintf(stderr, "io_uring: %s\n", strerror(-rc));
    return 1;
  }
  for (int round = 0; round < 5; round++) {
    double t = now();
    read_plain(1);
    double plain4 = now() - t;
    t = now();
    read_plain(0);
    double plain3 = now() - t;
    t = now();
    read_uring();
    double uring = now() - t;
    printf("plain4 %.2f us  plain3 %.2f us  uring (batch %d) %.2f us  (%ld bytes)\n",
           plain4 / n * 1e6, plain3 / n * 1e6, batch, uring / n * 1e6, total);
  }
  return 0;
}
