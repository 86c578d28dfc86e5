/*
 * The store's superblock decoder on arbitrary blocks: never crashes, and a
 * superblock it accepts has a geometry the store can use.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "store/store_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t blk[ORCH_STORE_BLOCK];
	struct store_sb sb;
	uint32_t crc;

	memset(blk, 0, sizeof(blk));
	memcpy(blk, data, size < sizeof(blk) ? size : sizeof(blk));
	/* Half the inputs get a valid magic and CRC, so the fields are reached. */
	if (size && (data[0] & 1)) {
		memcpy(blk, "ORCHSTOR", 8);
		crc = orch_crc32c(0, blk, 48);
		for (int i = 0; i < 4; i++)
			blk[48 + i] = (uint8_t)(crc >> (8 * i));
	}
	if (orch_store_sb_decode(blk, &sb) == 0) {
		if (sb.block_size != ORCH_STORE_BLOCK || !sb.ag_blocks ||
		    (sb.ag_blocks & (sb.ag_blocks - 1)) || sb.maxext < 1 ||
		    sb.maxext > sb.ag_blocks || sb.blocks < 64)
			abort();
	}
	return 0;
}
