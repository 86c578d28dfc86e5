/*
 * The block-checksum page decoder (CL2SV_BLOCKSUMS replies, store/sums.h)
 * on arbitrary bytes: never crashes, never returns more records than
 * asked, accepts only strictly increasing blocks inside the largest
 * object, and an accepted page re-encodes to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/pages.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct orch_blocksum recs[FUZZ_MAX];
	struct orch_buf b;
	size_t n = 0;

	if (orch_blocksums_decode(data, size, recs, FUZZ_MAX, &n)) {
		if (n != 0)
			abort();
		return 0;
	}
	if (n > FUZZ_MAX)
		abort();
	orch_buf_init(&b, FUZZ_MAX * ORCH_BLOCKSUMS_REC_BYTES);
	for (size_t i = 0; i < n; i++) {
		if ((i > 0 && recs[i].block <= recs[i - 1].block) ||
		    recs[i].block >= ORCH_DATA_OBJECT_MAX / ORCH_DATA_BLOCK)
			abort();
		orch_blocksums_encode(&b, &recs[i]);
	}
	if (b.b_err || b.b_len != size || (size && memcmp(b.b_data, data, size)))
		abort();
	orch_buf_fini(&b);
	return 0;
}
