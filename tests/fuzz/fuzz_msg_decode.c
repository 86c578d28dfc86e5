/*
 * The message decoder on arbitrary bytes.  Input: 3 bytes choose the type
 * (index into the message table, or a raw type) and the flags; the rest is
 * the payload.  Oracle: whatever decodes must re-encode, and the re-encoding
 * must decode to the same bytes again (round trip).  The handle check the
 * server runs after decoding (orch_msg_check_handles) runs on every
 * decoded message too, for a server count taken from the input: it must
 * stay inside the data it reads and name a handle of a missing server.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint16_t types[128];
	size_t ntypes = orch_msg_types(types, 128);
	struct orch_frame_hdr h;
	struct orch_msg m, m2;
	struct orch_buf b, b2;
	unsigned int nservers;
	uint64_t bad = 0;

	if (size < 3)
		return 0;
	h.type = data[0] < 0xf0 ? types[data[0] % ntypes] : (uint16_t)(data[0] << 8 | data[1]);
	h.flags = data[2] & (ORCH_FRAME_REPLY | ORCH_FRAME_PUSH | ORCH_FRAME_SEQ);
	h.version = (data[2] & 0x80) ? 2 : ORCH_PROTO_VERSION;
	h.reqid = 7;
	h.length = (uint32_t)(size - 3);
	if (orch_msg_decode(&h, data + 3, &m))
		return 0;
	/* 1 .. 65536 servers: the boundary cases are 1 and 65536 (every handle passes). */
	nservers = (unsigned int)data[1] * 257 + 1;
	if (orch_msg_check_handles(&m, nservers, &bad) != 0 && orch_handle_server(bad) < nservers)
		abort();
	orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	orch_buf_init(&b2, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	if (orch_msg_encode(&b, &m) == 0) {
		struct orch_frame_hdr h2;

		orch_frame_hdr_decode(b.b_data, &h2);
		if (orch_msg_decode(&h2, b.b_data + ORCH_FRAME_HDR, &m2) != 0)
			abort();
		if (orch_msg_encode(&b2, &m2) != 0 || b.b_len != b2.b_len ||
		    memcmp(b.b_data, b2.b_data, b.b_len) != 0)
			abort();
		orch_msg_fini(&m2);
	}
	orch_buf_fini(&b);
	orch_buf_fini(&b2);
	orch_msg_fini(&m);
	return 0;
}
