/*
 * The fsmap page decoder (AD2SV_FSMAP replies, store/fsmap.h) on arbitrary
 * bytes: never crashes, never returns more records than asked, and every
 * record it accepts lies inside the store it describes.  An accepted page
 * re-encodes to the same bytes.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/pages.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_MAX 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct orch_fsmap_rec recs[FUZZ_MAX];
	struct orch_fsmap_geom g;
	struct orch_buf b;
	size_t n = 0;

	if (orch_fsmap_decode(data, size, &g, recs, FUZZ_MAX, &n)) {
		if (n != 0)
			abort();
		return 0;
	}
	if (n > FUZZ_MAX)
		abort();
	orch_buf_init(&b, ORCH_FSMAP_HDR_BYTES + FUZZ_MAX * ORCH_FSMAP_REC_BYTES);
	orch_fsmap_encode_geom(&b, &g);
	for (size_t i = 0; i < n; i++) {
		if (recs[i].len == 0 || recs[i].start + recs[i].len > g.blocks ||
		    recs[i].start + recs[i].len < recs[i].start)
			abort();
		orch_fsmap_encode_rec(&b, &recs[i]);
	}
	if (b.b_err || b.b_len != size || memcmp(b.b_data, data, size))
		abort();
	orch_buf_fini(&b);
	return 0;
}
