/* Wire codec primitives.  See wire.h. */
#include "proto/wire.h"

#include <errno.h>
#include <string.h>

void orch_frame_hdr_decode(const uint8_t *p, struct orch_frame_hdr *h)
{
	h->length = orch_get_u32(p);
	h->type = (uint16_t)(p[4] | p[5] << 8);
	h->version = p[6];
	h->flags = p[7];
	h->reqid = orch_get_u64(p + 8);
}

void orch_frame_hdr_encode(uint8_t *p, const struct orch_frame_hdr *h)
{
	orch_put_u32(p, h->length);
	p[4] = (uint8_t)h->type;
	p[5] = (uint8_t)(h->type >> 8);
	p[6] = h->version;
	p[7] = h->flags;
	orch_put_u64(p + 8, h->reqid);
}

/* Returns a pointer to @n readable bytes, or NULL with the sticky error set. */
static const uint8_t *rd_take(struct orch_rd *rd, size_t n)
{
	const uint8_t *p = rd->p;

	if (rd->err || orch_rd_left(rd) < n) {
		rd->err = -EPROTO;
		return NULL;
	}
	rd->p += n;
	return p;
}

uint8_t orch_rd_u8(struct orch_rd *rd)
{
	const uint8_t *p = rd_take(rd, 1);

	return p ? p[0] : 0;
}

uint16_t orch_rd_u16(struct orch_rd *rd)
{
	const uint8_t *p = rd_take(rd, 2);

	return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

uint32_t orch_rd_u32(struct orch_rd *rd)
{
	const uint8_t *p = rd_take(rd, 4);

	return p ? orch_get_u32(p) : 0;
}

uint64_t orch_rd_u64(struct orch_rd *rd)
{
	const uint8_t *p = rd_take(rd, 8);

	return p ? orch_get_u64(p) : 0;
}

void orch_rd_bytes(struct orch_rd *rd, void *out, size_t n)
{
	const uint8_t *p = rd_take(rd, n);

	if (p)
		memcpy(out, p, n);
	else
		memset(out, 0, n);
}

static void rd_str(struct orch_rd *rd, struct orch_str *out, uint32_t len, uint32_t max)
{
	const uint8_t *p;

	out->s = NULL;
	out->len = 0;
	if (len > max) {
		rd->err = -EPROTO;
		return;
	}
	p = rd_take(rd, len);
	if (p) {
		out->s = (const char *)p;
		out->len = len;
	}
}

void orch_rd_str8(struct orch_rd *rd, struct orch_str *out, uint32_t max)
{
	rd_str(rd, out, orch_rd_u8(rd), max);
}

void orch_rd_str16(struct orch_rd *rd, struct orch_str *out, uint32_t max)
{
	rd_str(rd, out, orch_rd_u16(rd), max);
}

void orch_rd_str32(struct orch_rd *rd, struct orch_str *out, uint32_t max)
{
	rd_str(rd, out, orch_rd_u32(rd), max);
}

int orch_rd_done(const struct orch_rd *rd, unsigned int ver)
{
	if (rd->err)
		return rd->err;
	if (orch_rd_left(rd) && ver <= ORCH_PROTO_VERSION)
		return -EPROTO;
	return 0;
}

void orch_wr_u8(struct orch_buf *b, uint8_t v)
{
	orch_buf_append(b, &v, 1);
}

void orch_wr_u16(struct orch_buf *b, uint16_t v)
{
	uint8_t p[2] = { (uint8_t)v, (uint8_t)(v >> 8) };

	orch_buf_append(b, p, 2);
}

void orch_wr_u32(struct orch_buf *b, uint32_t v)
{
	uint8_t p[4];

	orch_put_u32(p, v);
	orch_buf_append(b, p, 4);
}

void orch_wr_u64(struct orch_buf *b, uint64_t v)
{
	uint8_t p[8];

	orch_put_u64(p, v);
	orch_buf_append(b, p, 8);
}

void orch_wr_bytes(struct orch_buf *b, const void *p, size_t n)
{
	orch_buf_append(b, p, n);
}

void orch_wr_str8(struct orch_buf *b, const void *p, uint32_t n)
{
	if (n > UINT8_MAX) {
		b->b_err = -EMSGSIZE;
		return;
	}
	orch_wr_u8(b, (uint8_t)n);
	orch_buf_append(b, p, n);
}

void orch_wr_str16(struct orch_buf *b, const void *p, uint32_t n)
{
	if (n > UINT16_MAX) {
		b->b_err = -EMSGSIZE;
		return;
	}
	orch_wr_u16(b, (uint16_t)n);
	orch_buf_append(b, p, n);
}

void orch_wr_str32(struct orch_buf *b, const void *p, uint32_t n)
{
	orch_wr_u32(b, n);
	orch_buf_append(b, p, n);
}
