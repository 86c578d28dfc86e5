/*
 * The handshake's step function (net/auth.h) without a transport: a
 * connector and an acceptor talk to each other in memory, each message
 * encoded and decoded as it would be on the wire.  Nonces are fixed, so an
 * exchange is the same bytes every time: the golden test pins them (the
 * MACs computed apart, with Python's hmac, from SPEC-wire.md).
 *
 * Checked: both sides agree and grant what they should; a wrong key on
 * either side, a replayed or reflected message, a duplicate, a message out
 * of order or in the wrong direction, a reply to another reqid and a
 * malformed payload all end the handshake, with the refusal the peer is
 * owed; versions are negotiated from both ranges.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"
#include "net/auth.h"
#include "proto/msg.h"
#include "unit/test.h"

#define OFFER (ORCH_FEAT_LEASES | (uint64_t)1000 << 32) /* an acceptor with lease_ms 1000 */
#define ORIGIN 3

static uint8_t key[ORCH_KEY_LEN], other_key[ORCH_KEY_LEN];
static uint8_t nc[ORCH_NONCE_LEN], ns[ORCH_NONCE_LEN], ns2[ORCH_NONCE_LEN], nc2[ORCH_NONCE_LEN];

__attribute__((constructor)) static void fill(void)
{
	memset(key, 0x5a, sizeof(key));
	memset(other_key, 0x11, sizeof(other_key));
	memset(nc, 0x11, sizeof(nc));
	memset(ns, 0x22, sizeof(ns));
	memset(nc2, 0x33, sizeof(nc2));
	memset(ns2, 0x44, sizeof(ns2));
}

/* A message as the peer reads it: its bytes and their header. */
struct frame {
	uint8_t bytes[ORCH_AUTH_MAXFRAME];
	size_t len;
	struct orch_frame_hdr h;
};

static int frame_of(const struct orch_msg *m, struct frame *f)
{
	struct orch_buf b;
	int error;

	orch_buf_init(&b, sizeof(f->bytes));
	error = orch_msg_encode(&b, m);
	if (!error) {
		memcpy(f->bytes, b.b_data, b.b_len);
		f->len = b.b_len;
		orch_frame_hdr_decode(f->bytes, &f->h);
	}
	orch_buf_fini(&b);
	return error;
}

/* Sets the frame's length field (and header) after its bytes were changed. */
static void frame_resize(struct frame *f, size_t len)
{
	f->len = len;
	orch_put_u32(f->bytes, (uint32_t)(len - ORCH_FRAME_HDR));
	orch_frame_hdr_decode(f->bytes, &f->h);
}

static int step(struct orch_auth *a, const struct frame *in, struct orch_msg *out)
{
	return orch_auth_step(a, in ? &in->h : NULL, in ? in->bytes + ORCH_FRAME_HDR : NULL, out);
}

static bool is_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static int from_hex(const char *hex, uint8_t *out, size_t max)
{
	size_t n = strlen(hex) / 2;

	if (n > max)
		return -1;
	for (size_t i = 0; i < n; i++) {
		unsigned int v;

		if (sscanf(hex + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return (int)n;
}

/* Both sides of one exchange, the frames they sent and their last results. */
struct exchange {
	struct orch_auth c, s;
	struct frame hello, hello_r, auth, auth_r;
	int crc, src;
};

/* @ckey at the connector, which asks for @ask; @skey at the acceptor. */
static void exchange_init(struct exchange *x, const uint8_t *ckey, const uint8_t *skey,
			  uint64_t ask)
{
	memset(x, 0, sizeof(*x));
	orch_auth_init(&x->c, ORCH_AUTH_CONNECTOR, ckey, nc, ORIGIN, ask);
	orch_auth_init(&x->s, ORCH_AUTH_ACCEPTOR, skey, ns, 0, OFFER);
}

/*
 * Runs @x until a side stops (requests numbered 41 and 42), keeping the
 * frames sent.  0, or -1 if a side sent what it should not have.
 */
static int exchange_run(struct exchange *x)
{
	struct orch_msg out;

	x->crc = step(&x->c, NULL, &out);
	orch_auth_set_reqid(&x->c, &out, 41);
	if (x->crc != ORCH_AUTH_MORE || frame_of(&out, &x->hello))
		return -1;
	x->src = step(&x->s, &x->hello, &out);
	if (!out.type || frame_of(&out, &x->hello_r))
		return -1;
	if (x->src != ORCH_AUTH_MORE)
		return 0;
	x->crc = step(&x->c, &x->hello_r, &out);
	orch_auth_set_reqid(&x->c, &out, 42);
	if (!out.type || frame_of(&out, &x->auth))
		return x->crc < 0 && !out.type ? 0 : -1;
	x->src = step(&x->s, &x->auth, &out);
	if (!out.type || frame_of(&out, &x->auth_r))
		return -1;
	if (x->crc != ORCH_AUTH_MORE)
		return 0;
	x->crc = step(&x->c, &x->auth_r, &out);
	return out.type ? -1 : 0;
}

/* A successful exchange to take frames from: 0 if both sides are done. */
static int exchange_good(struct exchange *x)
{
	exchange_init(x, key, key, 0);
	return exchange_run(x) == 0 && x->crc == 0 && x->src == 0 ? 0 : -1;
}

/* An acceptor waiting for HELLO, with @nonce. */
static void acceptor_init(struct orch_auth *s, const uint8_t *nonce)
{
	orch_auth_init(s, ORCH_AUTH_ACCEPTOR, key, nonce, 0, OFFER);
}

/* A connector that sent HELLO with @nonce, numbered @reqid: ORCH_AUTH_MORE. */
static int connector_sent_hello(struct orch_auth *c, const uint8_t *nonce, uint64_t reqid)
{
	struct orch_msg out;
	int rc;

	orch_auth_init(c, ORCH_AUTH_CONNECTOR, key, nonce, ORIGIN, 0);
	rc = step(c, NULL, &out);
	orch_auth_set_reqid(c, &out, reqid);
	return rc;
}

/* --- The exchange --------------------------------------------------------------- */

ORCH_TEST(connector_and_acceptor_agree)
{
	struct orch_auth c, s;
	struct frame hello, hello_r, auth, auth_r;
	struct orch_msg out;
	uint8_t mac[ORCH_MAC_LEN];

	orch_auth_init(&c, ORCH_AUTH_CONNECTOR, key, nc, ORIGIN, ORCH_FEAT_LEASES);
	acceptor_init(&s, ns);
	ORCH_CHECK(orch_auth_want(&c) == 0 && orch_auth_want(&s) == ORCH_AN2AN_HELLO);

	ORCH_CHECK_RC(step(&c, NULL, &out), ORCH_AUTH_MORE);
	ORCH_CHECK(out.type == ORCH_AN2AN_HELLO && out.flags == 0 && out.reqid == 0);
	ORCH_CHECK(out.vmin == ORCH_PROTO_VERSION && out.vmax == ORCH_PROTO_VERSION);
	ORCH_CHECK(out.origin == ORIGIN && out.features == ORCH_FEAT_LEASES);
	ORCH_CHECK(memcmp(out.nonce, nc, sizeof(nc)) == 0);
	orch_auth_set_reqid(&c, &out, 41);
	ORCH_CHECK(out.reqid == 41 && orch_auth_want(&c) == ORCH_AN2AN_HELLO);
	ORCH_CHECK_OK(frame_of(&out, &hello));

	ORCH_CHECK_RC(step(&s, &hello, &out), ORCH_AUTH_MORE);
	ORCH_CHECK(out.type == ORCH_AN2AN_HELLO && out.flags == ORCH_FRAME_REPLY);
	ORCH_CHECK(out.reqid == 41 && out.status == 0);
	ORCH_CHECK(out.vmin == ORCH_PROTO_VERSION && out.vmax == ORCH_PROTO_VERSION);
	ORCH_CHECK(out.features == OFFER);
	ORCH_CHECK(memcmp(out.nonce, ns, sizeof(ns)) == 0);
	orch_auth_mac(key, true, nc, ns, mac);
	ORCH_CHECK(memcmp(out.mac, mac, sizeof(mac)) == 0);
	ORCH_CHECK(s.a_peer_origin == ORIGIN && orch_auth_want(&s) == ORCH_AN2AN_AUTH);
	ORCH_CHECK_OK(frame_of(&out, &hello_r));

	ORCH_CHECK_RC(step(&c, &hello_r, &out), ORCH_AUTH_MORE);
	ORCH_CHECK(out.type == ORCH_AN2AN_AUTH && out.flags == 0 && out.reqid == 0);
	orch_auth_mac(key, false, ns, nc, mac);
	ORCH_CHECK(memcmp(out.mac, mac, sizeof(mac)) == 0);
	orch_auth_set_reqid(&c, &out, 42);
	ORCH_CHECK_OK(frame_of(&out, &auth));

	ORCH_CHECK_RC(step(&s, &auth, &out), 0);
	ORCH_CHECK(out.type == ORCH_AN2AN_AUTH && out.flags == ORCH_FRAME_REPLY);
	ORCH_CHECK(out.reqid == 42 && out.status == 0);
	ORCH_CHECK_OK(frame_of(&out, &auth_r));

	ORCH_CHECK_RC(step(&c, &auth_r, &out), 0);
	ORCH_CHECK(out.type == 0);
	ORCH_CHECK(c.a_state == ORCH_AUTH_DONE && s.a_state == ORCH_AUTH_DONE);
	ORCH_CHECK(c.a_error == 0 && s.a_error == 0);
	ORCH_CHECK(c.a_version == ORCH_PROTO_VERSION && s.a_version == ORCH_PROTO_VERSION);
	ORCH_CHECK(c.a_features == ORCH_FEAT_LEASES && c.a_peer_features == OFFER);
	ORCH_CHECK(s.a_features == OFFER);
	ORCH_CHECK(orch_auth_want(&c) == 0 && orch_auth_want(&s) == 0);
}

/* The four frames, byte for byte: the handshake's wire format is pinned. */
ORCH_TEST(exchange_bytes_are_pinned)
{
	static const char *const golden[] = {
		/* HELLO reqid 41: vmin 1 vmax 1 features LEASES, Nc, origin 3 */
		"2e000000010001002900000000000000010101000000000000001111111111111111"
		"11111111111111111111111111111111111111111111111103000000",
		/* HELLO' reqid 41: OK, version 1, features LEASES|1000<<32, Ns, MACa */
		"4e00000001000101290000000000000000000000010101000000e803000022222222"
		"2222222222222222222222222222222222222222222222222222222254"
		"3a91d0f29ad02007edb8d72df9a60bd534bcb6eb61266680a1f18b492e9610",
		/* AUTH reqid 42: MACc */
		"20000000020001002a00000000000000d2f7d58cde64b6074a3ad68735837b87"
		"df89b442f9092445cbd53e00c3cf222d",
		/* AUTH' reqid 42: OK */
		"04000000020001012a0000000000000000000000",
	};
	struct exchange x;
	const struct frame *f[] = { &x.hello, &x.hello_r, &x.auth, &x.auth_r };
	uint8_t want[ORCH_AUTH_MAXFRAME];

	exchange_init(&x, key, key, ORCH_FEAT_LEASES);
	ORCH_CHECK(exchange_run(&x) == 0);
	ORCH_CHECK(x.crc == 0 && x.src == 0);
	for (size_t i = 0; i < 4; i++) {
		int n = from_hex(golden[i], want, sizeof(want));

		ORCH_CHECK(n > 0);
		if ((size_t)n != f[i]->len || memcmp(want, f[i]->bytes, f[i]->len) != 0) {
			fprintf(stderr, "frame %zu differs from the golden bytes\n", i);
			ORCH_CHECK(0);
		}
	}
}

/* --- Wrong keys --------------------------------------------------------------- */

ORCH_TEST(wrong_key_is_rejected_on_both_sides)
{
	struct exchange x;
	struct orch_msg m;

	/* The connector finds MACa wrong and tells the acceptor with a zero MAC. */
	exchange_init(&x, other_key, key, 0);
	ORCH_CHECK(exchange_run(&x) == 0);
	ORCH_CHECK_RC(x.crc, -EKEYREJECTED);
	ORCH_CHECK(x.c.a_state == ORCH_AUTH_WAIT_HELLO && x.c.a_error == -EKEYREJECTED);
	ORCH_CHECK(x.auth.h.type == ORCH_AN2AN_AUTH && x.auth.h.flags == 0 && x.auth.h.reqid == 42);
	ORCH_CHECK_OK(orch_msg_decode(&x.auth.h, x.auth.bytes + ORCH_FRAME_HDR, &m));
	ORCH_CHECK(is_zero(m.mac, sizeof(m.mac)));
	/* ... which the acceptor refuses as any wrong MAC. */
	ORCH_CHECK_RC(x.src, -EKEYREJECTED);
	ORCH_CHECK(x.s.a_state == ORCH_AUTH_WAIT_AUTH);
	ORCH_CHECK_OK(orch_msg_decode(&x.auth_r.h, x.auth_r.bytes + ORCH_FRAME_HDR, &m));
	ORCH_CHECK(m.type == ORCH_AN2AN_AUTH && (m.flags & ORCH_FRAME_REPLY));
	ORCH_CHECK(m.reqid == 42 && m.status == -EACCES);

	/* The same with the keys the other way round. */
	exchange_init(&x, key, other_key, 0);
	ORCH_CHECK(exchange_run(&x) == 0);
	ORCH_CHECK_RC(x.crc, -EKEYREJECTED);
	ORCH_CHECK_RC(x.src, -EKEYREJECTED);
}

/* MACa was right, MACc is not: no key mismatch for the connector, a refusal. */
ORCH_TEST(refused_proof_after_a_good_one_is_eacces)
{
	struct exchange x;
	struct orch_msg out;
	struct frame auth_r;

	exchange_init(&x, key, key, 0);
	x.crc = step(&x.c, NULL, &out);
	ORCH_CHECK_OK(frame_of(&out, &x.hello));
	ORCH_CHECK_RC(step(&x.s, &x.hello, &out), ORCH_AUTH_MORE);
	ORCH_CHECK_OK(frame_of(&out, &x.hello_r));
	ORCH_CHECK_RC(step(&x.c, &x.hello_r, &out), ORCH_AUTH_MORE);
	ORCH_CHECK_OK(frame_of(&out, &x.auth));
	x.auth.bytes[ORCH_FRAME_HDR + 7] ^= 1; /* a bit of MACc flipped on the way */
	ORCH_CHECK_RC(step(&x.s, &x.auth, &out), -EKEYREJECTED);
	ORCH_CHECK(out.type == ORCH_AN2AN_AUTH && out.status == -EACCES);
	ORCH_CHECK_OK(frame_of(&out, &auth_r));
	ORCH_CHECK_RC(step(&x.c, &auth_r, &out), -EACCES);
	ORCH_CHECK(out.type == 0 && x.c.a_state == ORCH_AUTH_WAIT_AUTH);
}

/* --- Replays, reflections, duplicates, order ----------------------------------------- */

ORCH_TEST(replayed_messages_fail_against_fresh_nonces)
{
	struct exchange old;
	struct orch_auth c, s;
	struct orch_msg out;

	ORCH_CHECK(exchange_good(&old) == 0);

	/* An eavesdropper replays the connector's side to a new acceptor. */
	acceptor_init(&s, ns2);
	ORCH_CHECK_RC(step(&s, &old.hello, &out), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&s, &old.auth, &out), -EKEYREJECTED);
	ORCH_CHECK(out.status == -EACCES && s.a_state == ORCH_AUTH_WAIT_AUTH);

	/* ... or the acceptor's side to a new connector (same reqid, new nonce). */
	ORCH_CHECK_RC(connector_sent_hello(&c, nc2, 41), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&c, &old.hello_r, &out), -EKEYREJECTED);
	ORCH_CHECK(out.type == ORCH_AN2AN_AUTH && is_zero(out.mac, sizeof(out.mac)));
}

ORCH_TEST(reflected_messages_are_refused)
{
	struct exchange x;
	struct orch_auth c, s;
	struct orch_msg out, m;
	struct frame f;

	ORCH_CHECK(exchange_good(&x) == 0);

	/* Its own HELLO back to the connector: not an answer. */
	orch_auth_init(&c, ORCH_AUTH_CONNECTOR, key, nc, ORIGIN, 0);
	ORCH_CHECK_RC(step(&c, NULL, &out), ORCH_AUTH_MORE);
	ORCH_CHECK_OK(frame_of(&out, &f));
	ORCH_CHECK_RC(step(&c, &f, &out), -EPROTO);
	ORCH_CHECK(out.type == 0);

	/* Its own HELLO' back to the acceptor: a reply, not a request. */
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, &x.hello, &out), ORCH_AUTH_MORE);
	ORCH_CHECK_OK(frame_of(&out, &f));
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, &f, &out), -EPROTO);

	/* MACa sent back as MACc: the labels differ, so it does not verify. */
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, &x.hello, &out), ORCH_AUTH_MORE);
	ORCH_CHECK_OK(orch_msg_decode(&x.hello_r.h, x.hello_r.bytes + ORCH_FRAME_HDR, &m));
	orch_msg_init(&out, ORCH_AN2AN_AUTH);
	memcpy(out.mac, m.mac, sizeof(out.mac));
	ORCH_CHECK_OK(frame_of(&out, &f));
	ORCH_CHECK_RC(step(&s, &f, &out), -EKEYREJECTED);
}

ORCH_TEST(duplicates_and_late_messages_end_it)
{
	struct exchange x;
	struct orch_auth c, s;
	struct orch_msg out;

	ORCH_CHECK(exchange_good(&x) == 0);

	/* HELLO twice: the second is refused, and so is everything after it. */
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, &x.hello, &out), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&s, &x.hello, &out), -EPROTO);
	ORCH_CHECK(out.type == 0 && s.a_state == ORCH_AUTH_WAIT_AUTH && s.a_error == -EPROTO);
	ORCH_CHECK_RC(step(&s, &x.auth, &out), -EPROTO);
	ORCH_CHECK(orch_auth_want(&s) == ORCH_AN2AN_AUTH); /* where it stopped */

	/* HELLO' twice at the connector. */
	ORCH_CHECK_RC(connector_sent_hello(&c, nc, 41), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&c, &x.hello_r, &out), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&c, &x.hello_r, &out), -EPROTO);

	/* Anything after the end. */
	ORCH_CHECK_RC(step(&x.c, &x.auth_r, &out), -EPROTO);
	ORCH_CHECK_RC(step(&x.s, &x.auth, &out), -EPROTO);
	ORCH_CHECK_RC(step(&x.s, &x.hello, &out), -EPROTO);
	ORCH_CHECK(x.c.a_state == ORCH_AUTH_DONE && x.s.a_state == ORCH_AUTH_DONE);
	ORCH_CHECK(out.type == 0);
}

ORCH_TEST(messages_out_of_order_are_refused)
{
	struct exchange x;
	struct orch_auth c, s;
	struct orch_msg out;

	ORCH_CHECK(exchange_good(&x) == 0);

	/* AUTH before HELLO. */
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, &x.auth, &out), -EPROTO);
	ORCH_CHECK(out.type == 0 && s.a_state == ORCH_AUTH_WAIT_HELLO);
	/* An acceptor has nothing to say first. */
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, NULL, &out), -EPROTO);

	/* A frame before the connector's HELLO, and HELLO twice. */
	orch_auth_init(&c, ORCH_AUTH_CONNECTOR, key, nc, ORIGIN, 0);
	ORCH_CHECK_RC(step(&c, &x.hello_r, &out), -EPROTO);
	ORCH_CHECK(c.a_state == ORCH_AUTH_START);
	orch_auth_init(&c, ORCH_AUTH_CONNECTOR, key, nc, ORIGIN, 0);
	ORCH_CHECK_RC(step(&c, NULL, &out), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&c, NULL, &out), -EPROTO);

	/* AUTH' before HELLO'. */
	ORCH_CHECK_RC(connector_sent_hello(&c, nc, 42), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&c, &x.auth_r, &out), -EPROTO);
}

ORCH_TEST(replies_must_answer_our_request)
{
	struct exchange x;
	struct orch_auth c;
	struct orch_msg out;
	struct frame f;

	ORCH_CHECK(exchange_good(&x) == 0);

	/* HELLO' to reqid 41 while ours is 40. */
	ORCH_CHECK_RC(connector_sent_hello(&c, nc, 40), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&c, &x.hello_r, &out), -EPROTO);

	/* HELLO' without the REPLY flag. */
	f = x.hello_r;
	f.bytes[7] = 0;
	orch_frame_hdr_decode(f.bytes, &f.h);
	ORCH_CHECK_RC(connector_sent_hello(&c, nc, 41), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&c, &f, &out), -EPROTO);

	/* Without renumbering, requests and their answers carry reqid 0 (net/conn.c). */
	exchange_init(&x, key, key, 0);
	ORCH_CHECK_RC(step(&x.c, NULL, &out), ORCH_AUTH_MORE);
	ORCH_CHECK(out.reqid == 0);
	ORCH_CHECK_OK(frame_of(&out, &x.hello));
	ORCH_CHECK_RC(step(&x.s, &x.hello, &out), ORCH_AUTH_MORE);
	ORCH_CHECK(out.reqid == 0);
	ORCH_CHECK_OK(frame_of(&out, &x.hello_r));
	ORCH_CHECK_RC(step(&x.c, &x.hello_r, &out), ORCH_AUTH_MORE);
	ORCH_CHECK(out.reqid == 0);
}

/* --- Versions, features, malformed payloads ------------------------------------------ */

ORCH_TEST(versions_are_negotiated_from_both_ranges)
{
	static const struct {
		uint8_t vmin, vmax;
		int rc;
	} cases[] = {
		{ 1, 1, ORCH_AUTH_MORE },  { 0, 1, ORCH_AUTH_MORE },  { 1, 9, ORCH_AUTH_MORE },
		{ 0, 255, ORCH_AUTH_MORE }, { 2, 3, -EPROTONOSUPPORT }, { 0, 0, -EPROTONOSUPPORT },
		{ 1, 0, -EPROTONOSUPPORT }, { 2, 1, -EPROTONOSUPPORT },
	};

	for (size_t i = 0; i < ORCH_ARRAY_SIZE(cases); i++) {
		struct orch_auth s;
		struct orch_msg m, out;
		struct frame f;

		orch_msg_init(&m, ORCH_AN2AN_HELLO);
		m.reqid = 7;
		m.vmin = cases[i].vmin;
		m.vmax = cases[i].vmax;
		memcpy(m.nonce, nc, sizeof(nc));
		ORCH_CHECK_OK(frame_of(&m, &f));
		acceptor_init(&s, ns);
		ORCH_CHECK_RC(step(&s, &f, &out), cases[i].rc);
		ORCH_CHECK(s.a_peer_vmin == cases[i].vmin && s.a_peer_vmax == cases[i].vmax);
		ORCH_CHECK(out.type == ORCH_AN2AN_HELLO && out.reqid == 7);
		if (cases[i].rc == ORCH_AUTH_MORE) {
			ORCH_CHECK(out.status == 0 && out.vmin == ORCH_PROTO_VERSION);
			ORCH_CHECK(out.vmax == ORCH_PROTO_VERSION);
			ORCH_CHECK(s.a_version == ORCH_PROTO_VERSION);
		} else {
			/* Refused with a status: the peer learns why. */
			ORCH_CHECK(out.status == -EPROTONOSUPPORT && s.a_version == 0);
			ORCH_CHECK_OK(frame_of(&out, &f));
			ORCH_CHECK(f.h.length == 4);
		}
	}
}

ORCH_TEST(connector_refuses_a_version_it_does_not_speak)
{
	struct exchange x;
	struct orch_auth c;
	struct orch_msg m, out;
	struct frame f;

	ORCH_CHECK(exchange_good(&x) == 0);

	/* An acceptor that chose version 2. */
	ORCH_CHECK_OK(orch_msg_decode(&x.hello_r.h, x.hello_r.bytes + ORCH_FRAME_HDR, &m));
	m.vmin = m.vmax = 2;
	ORCH_CHECK_OK(frame_of(&m, &f));
	ORCH_CHECK_RC(connector_sent_hello(&c, nc, 41), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&c, &f, &out), -EPROTONOSUPPORT);
	ORCH_CHECK(out.type == 0 && c.a_version == 2);

	/* An acceptor that refused our versions. */
	orch_msg_init(&m, ORCH_AN2AN_HELLO);
	m.flags = ORCH_FRAME_REPLY;
	m.reqid = 41;
	m.status = -EPROTONOSUPPORT;
	ORCH_CHECK_OK(frame_of(&m, &f));
	ORCH_CHECK_RC(connector_sent_hello(&c, nc, 41), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&c, &f, &out), -EPROTONOSUPPORT);
	ORCH_CHECK(out.type == 0 && c.a_version == 0 && c.a_state == ORCH_AUTH_WAIT_HELLO);
}

ORCH_TEST(features_granted_are_those_asked_and_offered)
{
	static const struct {
		uint64_t ask, offer, granted, connector_has;
	} cases[] = {
		{ 0, OFFER, (uint64_t)1000 << 32, 0 },
		{ ORCH_FEAT_LEASES, OFFER, OFFER, ORCH_FEAT_LEASES },
		{ ORCH_FEAT_LEASES | 1u << 5, OFFER, OFFER, ORCH_FEAT_LEASES },
		{ ORCH_FEAT_LEASES, 0, 0, 0 }, /* a server with lease_ms 0 */
		{ ORCH_FEAT_LEASES | (uint64_t)7 << 32, 0, 0, 0 }, /* asked parameters mean nothing */
	};

	for (size_t i = 0; i < ORCH_ARRAY_SIZE(cases); i++) {
		struct exchange x;

		exchange_init(&x, key, key, cases[i].ask);
		x.s.a_offer = cases[i].offer;
		ORCH_CHECK(exchange_run(&x) == 0 && x.crc == 0 && x.src == 0);
		ORCH_CHECK(x.s.a_features == cases[i].granted);
		ORCH_CHECK(x.c.a_peer_features == cases[i].granted);
		ORCH_CHECK(x.c.a_features == cases[i].connector_has);
	}
}

ORCH_TEST(malformed_payloads_are_refused)
{
	struct exchange x;
	struct orch_auth s;
	struct orch_msg out;
	struct frame f;

	ORCH_CHECK(exchange_good(&x) == 0);

	/* A HELLO one byte short. */
	f = x.hello;
	frame_resize(&f, f.len - 1);
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, &f, &out), -EPROTO);
	ORCH_CHECK(out.type == 0);

	/* A byte too many: refused from our version, taken from a newer one. */
	f = x.hello;
	f.bytes[f.len] = 0xee;
	frame_resize(&f, f.len + 1);
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, &f, &out), -EPROTO);
	f.bytes[6] = ORCH_PROTO_VERSION + 1;
	orch_frame_hdr_decode(f.bytes, &f.h);
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, &f, &out), ORCH_AUTH_MORE);

	/* Another message in its place (a request after authentication). */
	orch_msg_init(&out, ORCH_CL2SV_GETATTR);
	ORCH_CHECK_OK(frame_of(&out, &f));
	acceptor_init(&s, ns);
	ORCH_CHECK_RC(step(&s, &f, &out), -EPROTO);

	/* An AUTH' that does not decode. */
	f = x.auth_r;
	frame_resize(&f, f.len - 2);
	ORCH_CHECK_RC(connector_sent_hello(&x.c, nc, 41), ORCH_AUTH_MORE);
	ORCH_CHECK_RC(step(&x.c, &x.hello_r, &out), ORCH_AUTH_MORE);
	orch_auth_set_reqid(&x.c, &out, 42);
	ORCH_CHECK_RC(step(&x.c, &f, &out), -EPROTO);
}

ORCH_TEST_MAIN()
