/*
 * How the az plugin cuts a large blob into blocks, within Azure's limits:
 * at most 50,000 committed blocks of at most 4000 MiB (API 2019-12-12 and
 * later), 190.7 TiB in all. Pure arithmetic, compiled on its own by the
 * tests (tests/stores/test_az.py).
 */
#ifndef ASYNCFS_AZ_BLOCKS_H_
#define ASYNCFS_AZ_BLOCKS_H_

#include <stdint.h>

#include "objstore_parts.h"

#define AZ_MAX_BLOCKS 50000
#define AZ_MAX_BLOCK ((int64_t)4000 << 20)
#define AZ_BLOCKS_PER_SIZE 500

/* The size of block `number` (1-based) of a file whose length is not
 * known in advance: block_size for the first 500 blocks, doubling every
 * 500 after, at most 4000 MiB. From the default 8 MiB, 50,000 such blocks
 * hold more than 175 TiB of the service's 190.7 TiB. */
static inline int64_t az_block_size(int64_t block_size, int number) {
  return objstore_growing_part_size(block_size, number, AZ_BLOCKS_PER_SIZE, AZ_MAX_BLOCK);
}

#endif /* ASYNCFS_AZ_BLOCKS_H_ */
