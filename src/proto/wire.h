/*
 * The wire codec's primitives: little-endian integers through a bounds-checked
 * read cursor whose error is sticky (check once at the end), and a writer on a
 * bounded orch_buf.  Never cast structs onto frames.  No I/O; any thread.
 *
 * Frame (docs/SPEC-wire.md):
 *
 *   0       4     6    7     8                16
 *   +-------+-----+----+-----+----------------+-------------
 *   |length |type |ver |flags|     reqid      | payload ...
 *   +-------+-----+----+-----+----------------+-------------
 *   length = payload bytes (not counting the 16-byte header)
 */
#ifndef ORCH_PROTO_WIRE_H
#define ORCH_PROTO_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define ORCH_FRAME_HDR 16
#define ORCH_PROTO_VERSION 1

/* Frame flags. */
#define ORCH_FRAME_REPLY 0x01 /* answers the request with the same reqid */
#define ORCH_FRAME_PUSH 0x02  /* server-initiated, no reply expected */
/*
 * A push on a connection with ORCH_FEAT_ACKS caused by the request whose
 * reqid it carries (its own change); a push without it carries its
 * sequence number in reqid (SPEC-wire.md, "Leases").
 */
#define ORCH_FRAME_OWN 0x04
/*
 * A request that goes exactly once (SPEC-wire.md, "Exactly once"): its
 * payload starts with client:u64 seq:u64 done_below:u64.
 */
#define ORCH_FRAME_SEQ 0x08

/*
 * HELLO features.  The connector asks for some; the acceptor's HELLO reply
 * names those it grants (docs/SPEC-wire.md, "Leases").
 */
#define ORCH_FEAT_LEASES (1ull << 0) /* cache under leases; take SV2CL_* pushes */
#define ORCH_FEAT_ACKS (1ull << 1)   /* with LEASES: pushes are numbered and acknowledged */
#define ORCH_FEAT_MIRROR_SUMS (1ull << 2) /* a group's data stream: SV2SV_MIRROR_SUMS answered */
/* With LEASES: a WRITERS reply leases the attributes it carries, as GETATTR's. */
#define ORCH_FEAT_WRITERS_ATTR (1ull << 3)
#define ORCH_FEAT_BITS 0xffffffffull /* the rest: the acceptor's parameters */
/* In the acceptor's reply: its lease term (lease_ms), when it grants leases. */
/* AN2AN_PING's reply reuses the features word for the server's state. */
#define ORCH_PING_STORE_FAILED (1ull << 0) /* the store failed: read-only (ADMIN.md) */
/*
 * A member of a replica group that does not serve (it does not lead):
 * bits 8..15 name the place of the member that leads, 0xff none known.
 */
#define ORCH_PING_FOLLOWER (1ull << 1)
#define ORCH_PING_LEADER(f) ((uint32_t)(((f) >> 8) & 0xff))
#define ORCH_FEAT_LEASE_MS(f) ((uint32_t)((f) >> 32))

/*
 * Largest payload accepted, per direction; checked before any allocation.
 * Client to server carries at most one WRITE of ORCH_IO_MAX plus headers.
 */
#define ORCH_MAXFRAME ((1u << 20) + 64 * 1024)

struct orch_frame_hdr {
	uint32_t length;
	uint16_t type;
	uint8_t version;
	uint8_t flags;
	uint64_t reqid;
};

/* Reads a header from 16 bytes. */
void orch_frame_hdr_decode(const uint8_t *p, struct orch_frame_hdr *h);
void orch_frame_hdr_encode(uint8_t *p, const struct orch_frame_hdr *h);

/* A borrowed byte string: valid as long as the buffer it points into. */
struct orch_str {
	const char *s;
	uint32_t len;
};

struct orch_rd {
	const uint8_t *p;
	const uint8_t *end;
	int err; /* 0, or -EPROTO once anything went past the end or a limit */
};

static inline void orch_rd_init(struct orch_rd *rd, const void *p, size_t len)
{
	rd->p = p;
	rd->end = rd->p + len;
	rd->err = 0;
}

static inline size_t orch_rd_left(const struct orch_rd *rd)
{
	return (size_t)(rd->end - rd->p);
}

uint8_t orch_rd_u8(struct orch_rd *rd);
uint16_t orch_rd_u16(struct orch_rd *rd);
uint32_t orch_rd_u32(struct orch_rd *rd);
uint64_t orch_rd_u64(struct orch_rd *rd);
/* Copies @n bytes into @out (zeroes it on error). */
void orch_rd_bytes(struct orch_rd *rd, void *out, size_t n);
/* A string with an 8-, 16- or 32-bit length prefix, at most @max bytes. */
void orch_rd_str8(struct orch_rd *rd, struct orch_str *out, uint32_t max);
void orch_rd_str16(struct orch_rd *rd, struct orch_str *out, uint32_t max);
void orch_rd_str32(struct orch_rd *rd, struct orch_str *out, uint32_t max);
/*
 * 0 if the cursor never failed and nothing is left over; trailing bytes are
 * allowed only from a newer protocol version (@ver > ours), for fields
 * appended later.  Otherwise -EPROTO.
 */
int orch_rd_done(const struct orch_rd *rd, unsigned int ver);

/* Writers append to @b; errors are sticky in b->b_err. */
void orch_wr_u8(struct orch_buf *b, uint8_t v);
void orch_wr_u16(struct orch_buf *b, uint16_t v);
void orch_wr_u32(struct orch_buf *b, uint32_t v);
void orch_wr_u64(struct orch_buf *b, uint64_t v);
void orch_wr_bytes(struct orch_buf *b, const void *p, size_t n);
void orch_wr_str8(struct orch_buf *b, const void *p, uint32_t n);
void orch_wr_str16(struct orch_buf *b, const void *p, uint32_t n);
void orch_wr_str32(struct orch_buf *b, const void *p, uint32_t n);

/* Little-endian stores and loads for fixed layouts. */
static inline void orch_put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t orch_get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline void orch_put_u64(uint8_t *p, uint64_t v)
{
	orch_put_u32(p, (uint32_t)v);
	orch_put_u32(p + 4, (uint32_t)(v >> 32));
}

static inline uint64_t orch_get_u64(const uint8_t *p)
{
	return (uint64_t)orch_get_u32(p) | (uint64_t)orch_get_u32(p + 4) << 32;
}

#endif
