/*
 * The handshake's step function (net/auth.h) on arbitrary frames, in either
 * role.  It decodes what it is given, so whatever arrives (any type, flags,
 * reqid, length or payload, in any order, after the end) it must return one
 * of its documented results, answer only with HELLO or AUTH that encode,
 * end for good once it returned anything but ORCH_AUTH_MORE, and finish
 * only if the peer proved the key over our nonce.
 *
 * Input: byte 0 = role (bit 0: acceptor) and, for a connector, whether it
 * asks for leases (bit 1); then frames as on the wire (16-byte header,
 * payload of the header's length; a frame cut short ends the input).
 * Key and nonces are fixed (those of t_auth.c), so the seeds, made by
 * tests/tools/gen-auth-corpus.c, carry exchanges that succeed.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net/auth.h"
#include "proto/msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fuzz_check(bool ok)
{
	if (!ok)
		abort();
}

/* The result and the message to send must be among those auth.h allows. */
static void fuzz_check_step(const struct orch_auth *a, int rc, const struct orch_msg *out)
{
	struct orch_buf b;

	fuzz_check(rc <= ORCH_AUTH_MORE);
	fuzz_check(rc != -EACCES || a->a_role == ORCH_AUTH_CONNECTOR);
	fuzz_check(out->type == 0 || out->type == ORCH_AN2AN_HELLO || out->type == ORCH_AN2AN_AUTH);
	fuzz_check(rc != ORCH_AUTH_MORE || out->type != 0);
	/* An error ends it where it was, or is a step after the end. */
	if (rc < 0)
		fuzz_check(a->a_state == ORCH_AUTH_DONE ? a->a_error == 0 : a->a_error != 0);
	if (rc == 0)
		fuzz_check(a->a_state == ORCH_AUTH_DONE && a->a_error == 0);
	if (!out->type)
		return;
	orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_AUTH_MAXFRAME);
	fuzz_check(orch_msg_encode(&b, out) == 0);
	orch_buf_fini(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t key[ORCH_KEY_LEN], nonce[ORCH_NONCE_LEN], mac[ORCH_MAC_LEN];
	struct orch_msg out, last;
	struct orch_auth a;
	bool acceptor, over = false;
	size_t off = 1;
	int rc = ORCH_AUTH_MORE;

	if (size < 1)
		return 0;
	acceptor = data[0] & 1;
	memset(key, 0x5a, sizeof(key));
	memset(nonce, acceptor ? 0x22 : 0x11, sizeof(nonce));
	orch_auth_init(&a, acceptor ? ORCH_AUTH_ACCEPTOR : ORCH_AUTH_CONNECTOR, key, nonce,
		       ORCH_ORIGIN_CLIENT, acceptor ? ORCH_FEAT_LEASES | (uint64_t)1000 << 32
						   : (data[0] & 2 ? ORCH_FEAT_LEASES : 0));
	if (!acceptor) {
		rc = orch_auth_step(&a, NULL, NULL, &out);
		fuzz_check(rc == ORCH_AUTH_MORE && out.type == ORCH_AN2AN_HELLO);
	}
	memset(&last, 0, sizeof(last));
	while (size - off >= ORCH_FRAME_HDR) {
		struct orch_frame_hdr h;
		const uint8_t *payload = data + off + ORCH_FRAME_HDR;

		orch_frame_hdr_decode(data + off, &h);
		if (h.length > size - off - ORCH_FRAME_HDR)
			break;
		off += ORCH_FRAME_HDR + h.length;
		rc = orch_auth_step(&a, &h, payload, &out);
		fuzz_check_step(&a, rc, &out);
		if (over) {
			/* Over for good. */
			fuzz_check(rc == -EPROTO && out.type == 0);
			continue;
		}
		over = rc != ORCH_AUTH_MORE;
		fuzz_check(rc >= 0 || a.a_error == rc);
		/*
		 * The AUTH that finished an acceptor, or the HELLO' that got
		 * a connector's AUTH, proved the key over our nonce.
		 */
		if ((rc == 0 && acceptor) ||
		    (!acceptor && rc == ORCH_AUTH_MORE && out.type == ORCH_AN2AN_AUTH)) {
			fuzz_check(orch_msg_decode(&h, payload, &last) == 0);
			if (acceptor)
				orch_auth_mac(key, false, nonce, a.a_peer_nonce, mac);
			else
				orch_auth_mac(key, true, nonce, a.a_peer_nonce, mac);
			fuzz_check(memcmp(mac, last.mac, sizeof(mac)) == 0);
			fuzz_check(a.a_version == ORCH_PROTO_VERSION);
		}
	}
	return 0;
}
