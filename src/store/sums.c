/*
 * An object's block checksums, page by page.  See sums.h.
 *
 * One page walks the object's extent map from the extent covering @from
 * (one descending lookup, as the read path does) and reads the checksum
 * group of each block from the csum table, one row per 64 blocks.  Values
 * read from store.db are not trusted: an extent outside its AG or out of
 * order is skipped, so a damaged record can hide blocks from a scan (the
 * scrub reports it) but never make the listing loop or read past a buffer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "proto/wire.h"
#include "store/store_i.h"
#include "store/sums.h"

static const char sums_sql_obj[] =
	"SELECT nid FROM obj WHERE handle = ?1 AND (flags & ?2) = 0";
/* The extent covering @from, if any, then every later one. */
static const char sums_sql_bmap[] =
	"SELECT off, ag, agbno, len, flags FROM bmap WHERE nid = ?1 AND off >= "
	"(SELECT COALESCE(MAX(off), 0) FROM bmap WHERE nid = ?1 AND off <= ?2) ORDER BY off";
static const char sums_sql_csum[] = "SELECT valid, sums FROM csum WHERE ag = ?1 AND grp = ?2";

struct sums_walk {
	struct orch_store *st;
	sqlite3 *db;
	sqlite3_stmt *csum;
	/* The csum row last read. */
	uint32_t ag;
	int64_t grp;
	bool have;
	uint64_t valid;
	uint8_t sums[ORCH_REC_CSUM_GROUP * 4];
};

/* Loads the csum row of group @grp of AG @ag, unless it is loaded. */
static int sums_group(struct sums_walk *w, uint32_t ag, int64_t grp)
{
	int rc;

	if (w->grp == grp && w->ag == ag)
		return 0;
	w->ag = ag;
	w->grp = grp;
	w->have = false;
	sqlite3_bind_int64(w->csum, 1, ag);
	sqlite3_bind_int64(w->csum, 2, grp);
	rc = sqlite3_step(w->csum);
	if (rc == SQLITE_ROW && sqlite3_column_bytes(w->csum, 1) == (int)sizeof(w->sums)) {
		w->valid = (uint64_t)sqlite3_column_int64(w->csum, 0);
		memcpy(w->sums, sqlite3_column_blob(w->csum, 1), sizeof(w->sums));
		w->have = true;
	}
	sqlite3_reset(w->csum);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return orch_rec_sql_err(w->db, rc, "block sums csum");
	return 0;
}

static int64_t sums_nid(struct sums_walk *w, uint64_t h, int *error)
{
	sqlite3_stmt *s = NULL;
	int64_t nid = 0;
	int rc = sqlite3_prepare_v2(w->db, sums_sql_obj, -1, &s, NULL);

	if (rc == SQLITE_OK) {
		sqlite3_bind_int64(s, 1, orch_rec_key_u64(h));
		sqlite3_bind_int64(s, 2, ORCH_REC_OBJ_DYING);
		rc = sqlite3_step(s);
		if (rc == SQLITE_ROW)
			nid = sqlite3_column_int64(s, 0);
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		*error = orch_rec_sql_err(w->db, rc, "block sums obj");
	sqlite3_finalize(s);
	return nid;
}

int orch_store_block_sums(struct orch_store *st, uint64_t h, uint64_t from,
			  struct orch_blocksum *out, size_t max, size_t *n,
			  uint64_t *next, bool *eof)
{
	struct sums_walk w = { .st = st, .grp = -1 };
	struct store_conn *c;
	sqlite3_stmt *bmap = NULL;
	uint64_t prev_end = 0;
	int64_t nid;
	int error = 0, rc = SQLITE_DONE;

	*n = 0;
	*next = from;
	*eof = true;
	if (max == 0)
		return 0;
	error = store_snap_get(st, &c);
	if (error)
		return error;
	w.db = c->c_db;
	nid = sums_nid(&w, h, &error);
	if (error || !nid)
		goto out;
	if (sqlite3_prepare_v2(w.db, sums_sql_bmap, -1, &bmap, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(w.db, sums_sql_csum, -1, &w.csum, NULL) != SQLITE_OK) {
		error = orch_rec_sql_err(w.db, sqlite3_errcode(w.db), "block sums prepare");
		goto out;
	}
	sqlite3_bind_int64(bmap, 1, nid);
	sqlite3_bind_int64(bmap, 2, (int64_t)ORCH_MIN(from, (uint64_t)INT64_MAX));
	while (!error && (rc = sqlite3_step(bmap)) == SQLITE_ROW) {
		uint64_t off = (uint64_t)sqlite3_column_int64(bmap, 0);
		uint64_t ag = (uint64_t)sqlite3_column_int64(bmap, 1);
		uint64_t agbno = (uint64_t)sqlite3_column_int64(bmap, 2);
		uint64_t len = (uint64_t)sqlite3_column_int64(bmap, 3);
		uint64_t flags = (uint64_t)sqlite3_column_int64(bmap, 4);

		if (len == 0 || len > st->st_maxext || ag >= st->st_ag_count ||
		    agbno >= store_ag_len(st, (uint32_t)ag) ||
		    len > store_ag_len(st, (uint32_t)ag) - agbno || off > UINT64_MAX - len ||
		    off < prev_end)
			continue;   /* damaged or out of order: the scrub reports it */
		prev_end = off + len;
		if (flags & ORCH_REC_EXT_UNWRITTEN)
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
			if (!w.have || !(w.valid >> bit & 1))
				continue;
			out[*n].block = b;
			out[*n].gblock = store_gblock(st, (uint32_t)ag, (uint32_t)a);
			out[*n].crc = orch_get_u32(w.sums + 4 * bit);
			(*n)++;
		}
	}
	if (!error && rc != SQLITE_ROW && rc != SQLITE_DONE)
		error = orch_rec_sql_err(w.db, rc, "block sums bmap");
	*next = prev_end > from ? prev_end : from;
out:
	sqlite3_finalize(bmap);
	sqlite3_finalize(w.csum);
	store_snap_put(st, c);
	return error;
}

/* --- The wire form of a page ---------------------------------------------------- */

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
		if (out[i].block >= ORCH_STORE_MAX_SIZE / ORCH_STORE_BLOCK)
			return -EPROTO;
	}
	if (rd.err || orch_rd_left(&rd))
		return -EPROTO;
	*n = count;
	return 0;
}
