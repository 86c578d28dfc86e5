/* The page codecs of AD2SV_FSMAP and CL2SV_BLOCKSUMS (pages.h). */
#include "proto/pages.h"

#include <errno.h>

#include "proto/wire.h"

/* --- AD2SV_FSMAP ----------------------------------------------------------------- */

void orch_fsmap_encode_geom(struct orch_buf *b, const struct orch_fsmap_geom *g)
{
	orch_wr_u32(b, g->ag_blocks);
	orch_wr_u32(b, g->ag_count);
	orch_wr_u32(b, g->maxext);
	orch_wr_u64(b, g->blocks);
}

void orch_fsmap_encode_rec(struct orch_buf *b, const struct orch_fsmap_rec *r)
{
	orch_wr_u64(b, r->start);
	orch_wr_u64(b, r->len);
	orch_wr_u64(b, (uint64_t)r->owner);
	orch_wr_u64(b, r->handle);
	orch_wr_u64(b, r->fileoff);
	orch_wr_u32(b, r->flags);
}

int orch_fsmap_decode(const void *p, size_t len, struct orch_fsmap_geom *g,
		      struct orch_fsmap_rec *out, size_t max, size_t *n)
{
	struct orch_rd rd;
	size_t count;

	*n = 0;
	if (len < ORCH_FSMAP_HDR_BYTES ||
	    (len - ORCH_FSMAP_HDR_BYTES) % ORCH_FSMAP_REC_BYTES)
		return -EPROTO;
	count = (len - ORCH_FSMAP_HDR_BYTES) / ORCH_FSMAP_REC_BYTES;
	if (count > max)
		return -EPROTO;
	orch_rd_init(&rd, p, len);
	g->ag_blocks = orch_rd_u32(&rd);
	g->ag_count = orch_rd_u32(&rd);
	g->maxext = orch_rd_u32(&rd);
	g->blocks = orch_rd_u64(&rd);
	/* A power of two, or AG arithmetic on the client would be nonsense. */
	if (g->ag_blocks == 0 || (g->ag_blocks & (g->ag_blocks - 1)))
		return -EPROTO;
	for (size_t i = 0; i < count; i++) {
		struct orch_fsmap_rec *r = &out[i];

		r->start = orch_rd_u64(&rd);
		r->len = orch_rd_u64(&rd);
		r->owner = (int64_t)orch_rd_u64(&rd);
		r->handle = orch_rd_u64(&rd);
		r->fileoff = orch_rd_u64(&rd);
		r->flags = orch_rd_u32(&rd);
		if (r->len == 0 || r->start > g->blocks || r->len > g->blocks - r->start)
			return -EPROTO;
	}
	if (rd.err || orch_rd_left(&rd))
		return -EPROTO;
	*n = count;
	return 0;
}

/* --- CL2SV_BLOCKSUMS ------------------------------------------------------------- */

void orch_blocksums_encode(struct orch_buf *b, const struct orch_blocksum *r)
{
	orch_wr_u64(b, r->block);
	orch_wr_u64(b, r->gblock);
	orch_wr_u32(b, r->crc);
}

int orch_blocksums_decode(const void *p, size_t len, struct orch_blocksum *out,
			  size_t max, size_t *n)
{
	struct orch_rd rd;
	size_t count;

	*n = 0;
	if (len % ORCH_BLOCKSUMS_REC_BYTES)
		return -EPROTO;
	count = len / ORCH_BLOCKSUMS_REC_BYTES;
	if (count > max)
		return -EPROTO;
	orch_rd_init(&rd, p, len);
	for (size_t i = 0; i < count; i++) {
		out[i].block = orch_rd_u64(&rd);
		out[i].gblock = orch_rd_u64(&rd);
		out[i].crc = orch_rd_u32(&rd);
		if (i > 0 && out[i].block <= out[i - 1].block)
			return -EPROTO;
		if (out[i].block >= ORCH_DATA_OBJECT_MAX / ORCH_DATA_BLOCK)
			return -EPROTO;
	}
	if (rd.err || orch_rd_left(&rd))
		return -EPROTO;
	*n = count;
	return 0;
}
