/*
 * An object's block checksums, page by page.  See sums.h.
 *
 * One page walks the object's extent map from the extent covering @from
 * (one descending lookup, as the read path does) and reads the checksum
 * group of each block from the csum table, one row per 64 blocks.  Values
 * read from store.db are verified (rec.c): a record that fails, or an
 * extent out of order, is skipped, so a damaged record can hide blocks from
 * a scan (the scrub reports it) but never make the listing loop, read past
 * a buffer or list another object's blocks.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "proto/wire.h"
#include "store/store_i.h"
#include "store/sums.h"

struct sums_walk {
	struct orch_rec_sq *q;
	/* The csum row last read (ag, grp; valid 0 if none or damaged). */
	struct orch_csum_irec cs;
	int64_t grp;
};

/* Loads the csum row of group @grp of AG @ag, unless it is loaded. */
static int sums_group(struct sums_walk *w, uint32_t ag, int64_t grp)
{
	int rc;

	if (w->grp == grp && w->cs.ag == ag)
		return 0;
	w->grp = grp;
	rc = orch_rec_csum_get(w->q, ag, grp, &w->cs);
	return rc < 0 ? rc : 0;
}

static int64_t sums_nid(struct orch_rec_sq *q, uint64_t h, int *error)
{
	struct orch_obj_irec o;
	sqlite3_stmt *s;
	int64_t nid = 0;
	int rc = orch_rec_stmt(q, ORCH_REC_OBJ_LIVE_BY_HANDLE, &s);

	if (!rc) {
		sqlite3_bind_int64(s, 1, orch_rec_key_u64(h));
		rc = orch_rec_step(q, ORCH_REC_OBJ_LIVE_BY_HANDLE);
	}
	if (rc == 1) {
		if (!orch_rec_obj_from_disk(s, 0, &o))
			nid = o.nid;
		orch_rec_reset(q, ORCH_REC_OBJ_LIVE_BY_HANDLE);
	}
	if (rc < 0)
		*error = rc;
	return nid;
}

int orch_store_block_sums(struct orch_store *st, uint64_t h, uint64_t from,
			  struct orch_blocksum *out, size_t max, size_t *n,
			  uint64_t *next, bool *eof)
{
	struct sums_walk w = { .grp = -1 };
	struct orch_bmap_irec e;
	struct store_conn *c;
	sqlite3_stmt *bmap;
	uint64_t prev_end = 0;
	int64_t nid;
	int error = 0, rc = 0;

	*n = 0;
	*next = from;
	*eof = true;
	if (max == 0)
		return 0;
	error = orch_snap_get(st, &c);
	if (error)
		return error;
	w.q = &c->c_sq;
	nid = sums_nid(w.q, h, &error);
	if (error || !nid)
		goto out;
	error = orch_rec_stmt(w.q, ORCH_REC_BMAP_WALK, &bmap);
	if (error)
		goto out;
	sqlite3_bind_int64(bmap, 1, nid);
	sqlite3_bind_int64(bmap, 2, (int64_t)ORCH_MIN(from, (uint64_t)INT64_MAX));
	while (!error && (rc = orch_rec_step(w.q, ORCH_REC_BMAP_WALK)) == 1) {
		uint64_t off, ag, agbno, len;

		if (orch_rec_bmap_from_disk(st, bmap, 0, &e) || e.off < prev_end)
			continue;   /* damaged or out of order: the scrub reports it */
		off = e.off;
		ag = e.ag;
		agbno = e.agbno;
		len = e.len;
		prev_end = off + len;
		if (e.flags & ORCH_REC_EXT_UNWRITTEN)
			continue;
		for (uint64_t b = ORCH_MAX(off, from); b < off + len; b++) {
			uint64_t a = agbno + (b - off);
			uint32_t bit = (uint32_t)(a % ORCH_REC_CSUM_GROUP);

			if (*n == max) {
				*next = b;
				*eof = false;
				goto out;
			}
			error = sums_group(&w, (uint32_t)ag, (int64_t)(a / ORCH_REC_CSUM_GROUP));
			if (error)
				break;
			if (!(w.cs.valid >> bit & 1))
				continue;
			out[*n].block = b;
			out[*n].gblock = store_gblock(st, (uint32_t)ag, (uint32_t)a);
			out[*n].crc = w.cs.sums[bit];
			(*n)++;
		}
	}
	if (!error && rc < 0)
		error = rc;
	*next = prev_end > from ? prev_end : from;
out:
	if (rc == 1)   /* left early with a row */
		orch_rec_reset(w.q, ORCH_REC_BMAP_WALK);
	orch_snap_put(st, c);
	return error;
}

