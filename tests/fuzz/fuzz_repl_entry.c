/*
 * A replicated log entry's frame (src/repl/entry.c) on arbitrary bytes, as
 * a member reads them from its log or a peer: the decoder never reads past
 * the input, what it returns lies within it, and a frame it accepts is
 * exactly what encoding those bytes again gives.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "repl/entry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *frame = malloc(size ? size : 1);  /* exactly @size: ASan sees an overread */
	const void *bytes;
	size_t len, framed;

	if (!frame)
		return 0;
	memcpy(frame, data, size);
	if (orch_repl_entry_decode(frame, size, &bytes, &len) == 0) {
		const uint8_t *b = bytes;
		uint8_t *again;

		if (b < frame || len > size || (size_t)(b - frame) > size - len)
			abort();
		framed = orch_repl_entry_size(len);
		if (!framed)
			abort();
		again = malloc(framed);
		if (!again)
			abort();
		orch_repl_entry_encode(again, bytes, len);
		/* The header and the bytes agree; the padding is the writer's. */
		if (memcmp(again, frame, 8 + len) != 0)
			abort();
		free(again);
	}
	free(frame);
	return 0;
}
