/* The machine's own cost of the calls behind asyncfs's small-file rows, in
 * C: the floor that no library on this machine goes below. benchmarks/
 * limits.py builds it with the machine's C compiler and prints what it
 * measures beside each row.
 *
 *   limits MODE THREADS ROUNDS < paths      (one path per line)
 *
 * prints the best of ROUNDS rounds in microseconds per path, the paths
 * shared out in equal runs among THREADS threads (wall time over all of
 * them: THREADS = the machine's cores gives its all-cores limit):
 *   read    open + fstat + pread of up to 64 KiB + close, what the posix
 *           plugin does for each file read whole
 *   exists  access(F_OK), what files_exist asks of each path
 *   stat    stat(2)
 *   glob    glob(3) of the one pattern given; per path matched
 *
 * Build: cc -std=c99 -O2 -Wall -Wextra -pthread -o limits limits.c */
#define _GNU_SOURCE
#include <fcntl.h>
#include <glob.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { CAP = 64 * 1024 };

typedef struct {
  char** paths;
  int n;
  int mode;
  long found; /* what the calls found: a check that they ran */
} run;

enum { READ, EXISTS, STAT, GLOB };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void* work(void* arg) {
  run* r = arg;
  char* buf = malloc(CAP);
  struct stat st;
  r->found = 0;
  for (int i = 0; i < r->n && buf != NULL; i++) {
    const char* path = r->paths[i];
    if (r->mode == READ) {
      int fd = open(path, O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      if (fstat(fd, &st) == 0) {
        ssize_t got = pread(fd, buf, CAP, 0);
        if (got > 0) r->found += got;
      }
      close(fd);
    } else if (r->mode == EXISTS) {
      r->found += access(path, F_OK) == 0;
    } else if (r->mode == STAT) {
      r->found += stat(path, &st) == 0;
    } else {
      glob_t matched;
      if (glob(path, 0, NULL, &matched) == 0) r->found += (long)matched.gl_pathc;
      globfree(&matched);
    }
  }
  free(buf);
  return NULL;
}

/* One round: the paths shared out among threads; the wall time. */
static double round_of(char** paths, int n, int mode, int threads, long* found) {
  pthread_t ids[256];
  run runs[256];
  double start = now();
  int per = (n + threads - 1) / threads;
  for (int t = 0; t < threads; t++) {
    int first = t * per < n ? t * per : n;
    int last = first + per < n ? first + per : n;
    runs[t] = (run){paths + first, last - first, mode, 0};
    if (pthread_create(&ids[t], NULL, work, &runs[t]) != 0) return -1.0;
  }
  *found = 0;
  for (int t = 0; t < threads; t++) {
    pthread_join(ids[t], NULL);
    *found += runs[t].found;
  }
  return now() - start;
}

int main(int argc, char** argv) {
  static const char* modes[] = {"read", "exists", "stat", "glob"};
  int mode = -1, threads = argc == 4 ? atoi(argv[2]) : 0, rounds = argc == 4 ? atoi(argv[3]) : 0;
  for (int m = 0; m < 4 && argc == 4; m++)
    if (strcmp(argv[1], modes[m]) == 0) mode = m;
  if (mode < 0 || threads < 1 || threads > 256 || rounds < 1) {
    fprintf(stderr, "usage: %s read|exists|stat|glob THREADS(1-256) ROUNDS < paths\n", argv[0]);
    return 2;
  }
  int n = 0, cap = 1024;
  char** paths = malloc((size_t)cap * sizeof *paths);
  char* line = NULL;
  size_t size = 0;
  ssize_t got;
  while (paths != NULL && (got = getline(&line, &size, stdin)) > 0) {
    if (line[got - 1] == '\n') line[got - 1] = '\0';
    if (n == cap) {
      char** more = realloc(paths, (size_t)(cap *= 2) * sizeof *paths);
      if (more == NULL) return 1;
      paths = more;
    }
    if ((paths[n++] = strdup(line)) == NULL) return 1;
  }
  free(line);
  if (paths == NULL || n == 0) {
    fprintf(stderr, "no paths on stdin\n");
    return 2;
  }
  if (mode == GLOB) threads = 1; /* one pattern: one call */
  double best = 0.0;
  long found = 0;
  for (int r = 0; r < rounds; r++) {
    double took = round_of(paths, n, mode, threads, &found);
    if (took < 0) return 1;
    if (r == 0 || took < best) best = took;
  }
  /* per path: per pattern's match for glob */
  long per = mode == GLOB ? (found > 0 ? found : 1) : n;
  printf("%.4f %ld\n", best / (double)per * 1e6, found);
  return 0;
}
