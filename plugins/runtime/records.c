/*
 * TFRecord framing (runtime_core.h, asyncfs/_native/records.py): whole
 * records found in a buffer with both masked CRC-32C checksums checked (in
 * hardware where the CPU has SSE4.2, by tables elsewhere), and the search
 * for the next valid header after damage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "asyncfs/filesystem_interface.h"
#include "runtime_core.h"
#include "runtime_export.h"

/* ---- TFRecord framing (asyncfs/runtime_core.h) --------------------------- */

static uint32_t crc32c_table[8][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;
static int crc32c_in_hardware;

static void crc32c_init(void) {
  uint32_t i, j, k;
  for (i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (j = 0; j < 8; ++j) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    crc32c_table[0][i] = crc;
  }
  for (i = 0; i < 256; ++i)
    for (k = 1; k < 8; ++k)
      crc32c_table[k][i] = (crc32c_table[k - 1][i] >> 8) ^
                           crc32c_table[0][crc32c_table[k - 1][i] & 0xFFu];
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  crc32c_in_hardware = __builtin_cpu_supports("sse4.2");
#endif
  /* the tables every CPU has, chosen by hand (the tests run both paths) */
  if (getenv("ASYNCFS_CRC32C_TABLES") != NULL) crc32c_in_hardware = 0;
}

static uint32_t load32(const unsigned char* p) {
  return (uint32_t)(p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24);
}

/* CRC-32C of n bytes, slicing by 8 (any CPU). */
static uint32_t crc32c_tables(const unsigned char* p, size_t n) {
  uint32_t crc = 0xFFFFFFFFu;
  for (; n >= 8; p += 8, n -= 8) {
    uint32_t lo = crc ^ load32(p);
    uint32_t hi = load32(p + 4);
    crc = crc32c_table[7][lo & 0xFFu] ^ crc32c_table[6][(lo >> 8) & 0xFFu] ^
          crc32c_table[5][(lo >> 16) & 0xFFu] ^ crc32c_table[4][lo >> 24] ^
          crc32c_table[3][hi & 0xFFu] ^ crc32c_table[2][(hi >> 8) & 0xFFu] ^
          crc32c_table[1][(hi >> 16) & 0xFFu] ^ crc32c_table[0][hi >> 24];
  }
  for (; n > 0; ++p, --n) crc = (crc >> 8) ^ crc32c_table[0][(crc ^ *p) & 0xFFu];
  return ~crc;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
/* CRC-32C of n bytes with SSE4.2's crc32 instruction (what google-crc32c
 * uses on this CPU). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(const unsigned char* p, size_t n) {
  uint64_t crc = 0xFFFFFFFFu;
  uint32_t tail;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t word;
    memcpy(&word, p, 8);
    crc = _mm_crc32_u64(crc, word);
  }
  tail = (uint32_t)crc;
  for (; n > 0; ++p, --n) tail = _mm_crc32_u8(tail, *p);
  return ~tail;
}
#endif

static uint32_t crc32c(const unsigned char* p, size_t n) {
#if defined(__x86_64__) && defined(__GNUC__)
  if (crc32c_in_hardware) return crc32c_sse42(p, n);
#endif
  return crc32c_tables(p, n);
}

static uint32_t masked_crc32c(const unsigned char* p, size_t n) {
  uint32_t crc = crc32c(p, n);
  return ((crc >> 15) | (crc << 17)) + 0xA282EAD8u;
}

RUNTIME_EXPORT int64_t ASYNCFS_FindRecordHeader(const char* buf, size_t n) {
  const unsigned char* p = (const unsigned char*)buf;
  size_t i;
  pthread_once(&crc32c_once, crc32c_init);
  for (i = 0; i + 12 <= n; ++i)
    if (masked_crc32c(p + i, 8) == load32(p + i + 8)) return (int64_t)i;
  return -1;
}

RUNTIME_EXPORT int64_t ASYNCFS_ParseRecords(const char* buf, size_t n, int verify, int64_t* spans,
                                            int64_t max, int64_t* stop) {
  const unsigned char* p = (const unsigned char*)buf;
  size_t at = 0;
  int64_t count = 0;
  pthread_once(&crc32c_once, crc32c_init);
  stop[1] = ASYNCFS_RECORDS_MORE;
  stop[2] = 0;
  while (count < max && n - at >= 12) {
    uint64_t length = (uint64_t)load32(p + at) | (uint64_t)load32(p + at + 4) << 32;
    if (verify && masked_crc32c(p + at, 8) != load32(p + at + 8)) {
      stop[1] = ASYNCFS_RECORDS_BAD_LENGTH;
      break;
    }
    if (length > n - at - 12 || n - at - 12 - length < 4) break; /* not whole here yet */
    if (verify && masked_crc32c(p + at + 12, (size_t)length) != load32(p + at + 12 + length)) {
      stop[1] = ASYNCFS_RECORDS_BAD_DATA;
      stop[2] = (int64_t)(16 + length);
      break;
    }
    spans[2 * count] = (int64_t)(at + 12);
    spans[2 * count + 1] = (int64_t)length;
    ++count;
    at += 16 + (size_t)length;
  }
  stop[0] = (int64_t)at;
  return count;
}
