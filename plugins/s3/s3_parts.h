/*
 * How objects are cut into parts, within S3's limits: at most 10000 parts
 * of 5 MiB to 5 GiB (the last may be smaller), objects up to 5 TiB. Pure
 * arithmetic, tested on its own (tests/test_s3_parts.py).
 */
#ifndef ASYNCFS_S3_PARTS_H_
#define ASYNCFS_S3_PARTS_H_

#include <stdint.h>

#include "objstore_parts.h"

#define S3_MAX_PARTS 10000
#define S3_MIN_PART ((int64_t)5 << 20)
#define S3_MAX_PART ((int64_t)5 << 30)
#define S3_MAX_OBJECT ((int64_t)5 << 40)
/* A written stream's parts double in size every this many parts. */
#define S3_PARTS_PER_SIZE 900

/* The size of part `number` (1-based) of a stream whose length is not
 * known in advance: part_size for the first 900 parts, doubling every 900
 * after, at most 5 GiB. From any part_size S3 allows, 10000 such parts hold
 * more than 5 TiB (from 5 MiB: 9000 parts double up to 2.5 GiB, 4.4 TiB in
 * all, and the last 1000 at 5 GiB add 4.9 TiB). */
static inline int64_t s3_upload_part_size(int64_t part_size, int number) {
  return objstore_growing_part_size(part_size, number, S3_PARTS_PER_SIZE, S3_MAX_PART);
}

/* The part size for copying an object of `size` bytes server-side: at
 * least part_size, and large enough (in whole MiB) that at most 10000
 * parts cover it. */
static inline int64_t s3_copy_part_size(int64_t part_size, int64_t size) {
  const int64_t mib = (int64_t)1 << 20;
  int64_t least = (size + S3_MAX_PARTS - 1) / S3_MAX_PARTS;
  least = (least + mib - 1) / mib * mib;
  if (least < part_size) least = part_size;
  return least < S3_MAX_PART ? least : S3_MAX_PART;
}

#endif /* ASYNCFS_S3_PARTS_H_ */
