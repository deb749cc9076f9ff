/*
 * How a store's upload of unknown length is cut into parts that grow, so
 * that the store's most parts reach its largest object from a small first
 * part. Pure arithmetic (libc only), compiled on its own by the tests
 * (tests/stores/test_s3_parts.py, tests/stores/test_az.py).
 */
#ifndef ASYNCFS_OBJSTORE_PARTS_H_
#define ASYNCFS_OBJSTORE_PARTS_H_

#include <stdint.h>

/* The size of part `number` (1-based): first for the first per_size
 * parts, doubling every per_size parts after, at most most. */
static inline int64_t objstore_growing_part_size(int64_t first, int number, int per_size, int64_t most) {
  int64_t size = first;
  int doublings = (number - 1) / per_size;
  while (doublings-- > 0 && size < most) size *= 2;
  return size < most ? size : most;
}

#endif /* ASYNCFS_OBJSTORE_PARTS_H_ */
