/*
 * The physical map of the store (fsmap), the objects' handles, and the
 * throttled data scan of an online scrub.  See fsmap.h.
 *
 * The map merges two sorted streams of one AG at a time: the reverse map
 * (ag, agbno, owner, off) and the free space by block (ag, agbno), which
 * sorts as owner ORCH_STORE_OWN_FREE.  A record of either can begin before
 * the range asked for: an rmap record at most maxext - 1 blocks before (no
 * record is longer), a free extent anywhere before, so the free extent
 * covering the range's first block is found with one descending lookup.
 * Pages resume after the key of the last record returned, so a listing
 * never repeats or skips a record that stayed put, however long it is.
 *
 * Values read from store.db are not trusted: lengths below 1 are skipped
 * and ends are clipped to the AG and the range, so a damaged record can
 * make the map wrong (the scrub says where) but never make it loop or
 * overflow.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc32c.h"
#include "common/util.h"
#include "proto/wire.h"
#include "store/fsmap.h"
#include "store/store_i.h"

/* rmap records per snapshot of the data scan, and bytes per read. */
#define SCAN_BATCH_RECS 64
#define SCAN_BATCH_BYTES (4u << 20)
#define SCAN_RUN 256u

/* --- Keys ----------------------------------------------------------------- */

/* -1, 0, 1 as (s1, o1, f1) sorts before, as, after (s2, o2, f2). */
static int fsmap_key_cmp(uint64_t s1, int64_t o1, uint64_t f1, uint64_t s2,
			 int64_t o2, uint64_t f2)
{
	if (s1 != s2)
		return s1 < s2 ? -1 : 1;
	if (o1 != o2)
		return o1 < o2 ? -1 : 1;
	if (f1 != f2)
		return f1 < f2 ? -1 : 1;
	return 0;
}

static bool fsmap_after_cursor(const struct orch_fsmap_cursor *cur,
			       const struct orch_fsmap_rec *r)
{
	return !cur->valid || fsmap_key_cmp(r->start, r->owner, r->fileoff,
					    cur->start, cur->owner, cur->off) > 0;
}

/* --- The map of one AG ------------------------------------------------------ */

struct fsmap_walk {
	struct orch_store *st;
	sqlite3 *db;
	sqlite3_stmt *rmap, *fsb, *fsb_le;
	uint64_t start, end;            /* the range, global blocks */
	struct orch_fsmap_cursor *cur;
	size_t left;                    /* records still wanted in this page */
	orch_fsmap_fn fn;
	void *arg;
};

static const char fsmap_sql_rmap[] =
	"SELECT r.agbno, r.owner, r.off, r.len, r.flags, o.handle"
	" FROM rmap r LEFT JOIN obj o ON r.owner > 0 AND o.nid = r.owner"
	" WHERE r.ag = ?1 AND r.agbno >= ?2 AND r.agbno < ?3"
	" AND (r.agbno, r.owner, r.off) > (?4, ?5, ?6)"
	" ORDER BY r.ag, r.agbno, r.owner, r.off";
static const char fsmap_sql_fsb[] =
	"SELECT agbno, len FROM fsb WHERE ag = ?1 AND agbno >= ?2 AND agbno < ?3"
	" ORDER BY ag, agbno";
static const char fsmap_sql_fsb_le[] =
	"SELECT agbno FROM fsb WHERE ag = ?1 AND agbno <= ?2"
	" ORDER BY ag DESC, agbno DESC LIMIT 1";

/* A row of either stream as a record (unclipped); false if unusable. */
static bool fsmap_row(struct fsmap_walk *w, uint32_t ag, sqlite3_stmt *s,
		      bool is_rmap, struct orch_fsmap_rec *r)
{
	int64_t agbno = sqlite3_column_int64(s, 0);
	int64_t len = sqlite3_column_int64(s, is_rmap ? 3 : 1);
	uint32_t aglen = store_ag_len(w->st, ag);

	if (agbno < 0 || agbno >= aglen || len < 1)
		return false;
	memset(r, 0, sizeof(*r));
	r->start = store_gblock(w->st, ag, (uint32_t)agbno);
	r->len = (uint64_t)ORCH_MIN(len, (int64_t)aglen - agbno);
	if (!is_rmap) {
		r->owner = ORCH_STORE_OWN_FREE;
		return true;
	}
	r->owner = sqlite3_column_int64(s, 1);
	r->fileoff = (uint64_t)sqlite3_column_int64(s, 2);
	r->flags = (uint32_t)sqlite3_column_int64(s, 4);
	if (r->owner > 0 && sqlite3_column_type(s, 5) != SQLITE_NULL)
		r->handle = orch_rec_unkey_u64(sqlite3_column_int64(s, 5));
	return true;
}

/* Clips @r to the range and passes it on; 1 when the page is full. */
static int fsmap_emit(struct fsmap_walk *w, const struct orch_fsmap_rec *r)
{
	struct orch_fsmap_rec c = *r;
	uint64_t end = r->start + r->len;
	int error;

	if (end <= w->start || r->start >= w->end || !fsmap_after_cursor(w->cur, r))
		return 0;
	if (c.start < w->start) {
		if (c.owner > 0)
			c.fileoff += w->start - c.start;
		c.start = w->start;
	}
	c.len = ORCH_MIN(end, w->end) - c.start;
	error = w->fn(w->arg, &c);
	if (error)
		return error;
	w->cur->valid = true;
	w->cur->start = r->start;
	w->cur->owner = r->owner;
	w->cur->off = r->fileoff;
	return --w->left == 0 ? 1 : 0;
}

/* Steps @s to its next usable row; false at the end (*@err on failure). */
static bool fsmap_next(struct fsmap_walk *w, uint32_t ag, sqlite3_stmt *s,
		       bool is_rmap, struct orch_fsmap_rec *r, int *err)
{
	int rc;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		if (fsmap_row(w, ag, s, is_rmap, r))
			return true;
	if (rc != SQLITE_DONE)
		*err = orch_rec_sql_err(w->db, rc, "fsmap step");
	return false;
}

/* First block of AG @ag where either stream may begin to matter. */
static int fsmap_ag_from(struct fsmap_walk *w, uint32_t ag, int64_t lo,
			 int64_t *rfrom, int64_t *ffrom)
{
	int64_t c = -1;
	int rc;

	if (w->cur->valid && (w->cur->start >> w->st->st_ag_shift) == ag)
		c = (int64_t)(w->cur->start & (w->st->st_ag_blocks - 1));
	*rfrom = ORCH_MAX(ORCH_MAX(lo - (int64_t)w->st->st_maxext + 1, 0), c);
	*ffrom = lo;
	sqlite3_bind_int64(w->fsb_le, 1, ag);
	sqlite3_bind_int64(w->fsb_le, 2, lo);
	rc = sqlite3_step(w->fsb_le);
	if (rc == SQLITE_ROW)
		*ffrom = sqlite3_column_int64(w->fsb_le, 0);
	sqlite3_reset(w->fsb_le);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return orch_rec_sql_err(w->db, rc, "fsmap free lookup");
	*ffrom = ORCH_MAX(*ffrom, c);
	return 0;
}

/* Merges the two streams of AG @ag.  0, 1 (page full) or -errno. */
static int fsmap_ag(struct fsmap_walk *w, uint32_t ag)
{
	struct orch_store *st = w->st;
	uint64_t ag0 = (uint64_t)ag << st->st_ag_shift;
	int64_t lo = w->start > ag0 ? (int64_t)(w->start - ag0) : 0;
	int64_t hi = (int64_t)ORCH_MIN(w->end - ag0, (uint64_t)store_ag_len(st, ag));
	struct orch_fsmap_rec rr, fr;
	int64_t rfrom, ffrom;
	bool have_r, have_f;
	int error = 0, done = 0;

	error = fsmap_ag_from(w, ag, lo, &rfrom, &ffrom);
	if (error)
		return error;
	sqlite3_bind_int64(w->rmap, 1, ag);
	sqlite3_bind_int64(w->rmap, 2, rfrom);
	sqlite3_bind_int64(w->rmap, 3, hi);
	/*
	 * A page resumes after the cursor's record in the index itself: a
	 * block shared by many owners is not rescanned from its first owner
	 * by every page.
	 */
	if (w->cur->valid && (w->cur->start >> st->st_ag_shift) == ag) {
		sqlite3_bind_int64(w->rmap, 4, (int64_t)(w->cur->start & (st->st_ag_blocks - 1)));
		sqlite3_bind_int64(w->rmap, 5, w->cur->owner);
		sqlite3_bind_int64(w->rmap, 6, (int64_t)w->cur->off);
	} else {
		sqlite3_bind_int64(w->rmap, 4, -1);
		sqlite3_bind_int64(w->rmap, 5, INT64_MIN);
		sqlite3_bind_int64(w->rmap, 6, INT64_MIN);
	}
	sqlite3_bind_int64(w->fsb, 1, ag);
	sqlite3_bind_int64(w->fsb, 2, ffrom);
	sqlite3_bind_int64(w->fsb, 3, hi);
	have_r = fsmap_next(w, ag, w->rmap, true, &rr, &error);
	have_f = !error && fsmap_next(w, ag, w->fsb, false, &fr, &error);
	while (!error && !done && (have_r || have_f)) {
		bool take_r = have_r && (!have_f ||
			fsmap_key_cmp(rr.start, rr.owner, rr.fileoff, fr.start,
				      fr.owner, 0) < 0);

		if (take_r) {
			done = fsmap_emit(w, &rr);
			have_r = done == 0 && fsmap_next(w, ag, w->rmap, true, &rr, &error);
		} else {
			done = fsmap_emit(w, &fr);
			have_f = done == 0 && fsmap_next(w, ag, w->fsb, false, &fr, &error);
		}
		if (done < 0)
			error = done;
	}
	sqlite3_reset(w->rmap);
	sqlite3_reset(w->fsb);
	return error ? error : done;
}

int orch_store_fsmap(struct orch_store *st, uint64_t start, uint64_t end,
		     struct orch_fsmap_cursor *cur, size_t max,
		     orch_fsmap_fn fn, void *arg, bool *eof)
{
	struct fsmap_walk w = { .st = st, .start = start, .end = end, .cur = cur,
				.left = max, .fn = fn, .arg = arg };
	struct store_conn *c;
	uint32_t ag;
	int error, done = 0;

	*eof = true;
	if (w.end > st->st_blocks)
		w.end = st->st_blocks;
	if (w.start >= w.end || max == 0)
		return 0;
	error = store_snap_get(st, &c);
	if (error)
		return error;
	w.db = c->c_db;
	if (sqlite3_prepare_v2(w.db, fsmap_sql_rmap, -1, &w.rmap, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(w.db, fsmap_sql_fsb, -1, &w.fsb, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(w.db, fsmap_sql_fsb_le, -1, &w.fsb_le, NULL) != SQLITE_OK) {
		error = orch_rec_sql_err(w.db, sqlite3_errcode(w.db), "fsmap prepare");
		goto out;
	}
	ag = (uint32_t)(w.start >> st->st_ag_shift);
	if (cur->valid && cur->start >= w.start)
		ag = (uint32_t)(cur->start >> st->st_ag_shift);
	for (; ag < st->st_ag_count && ((uint64_t)ag << st->st_ag_shift) < w.end; ag++) {
		done = fsmap_ag(&w, ag);
		if (done)
			break;
	}
	if (done < 0)
		error = done;
	else if (done == 1)
		*eof = false;
out:
	sqlite3_finalize(w.rmap);
	sqlite3_finalize(w.fsb);
	sqlite3_finalize(w.fsb_le);
	store_snap_put(st, c);
	return error;
}

/* --- The wire form of a page ---------------------------------------------------- */

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

/* --- Objects ---------------------------------------------------------------------- */

int orch_store_handles(struct orch_store *st, uint64_t *after, size_t max,
		       orch_store_handle_fn fn, void *arg, bool *eof)
{
	struct store_conn *c;
	sqlite3_stmt *s = NULL;
	size_t n = 0;
	int error, rc;

	*eof = true;
	error = store_snap_get(st, &c);
	if (error)
		return error;
	rc = sqlite3_prepare_v2(c->c_db,
		"SELECT handle FROM obj WHERE handle > ?1 AND (flags & ?2) = 0"
		" ORDER BY handle LIMIT ?3", -1, &s, NULL);
	if (rc != SQLITE_OK) {
		error = orch_rec_sql_err(c->c_db, rc, "handles prepare");
		goto out;
	}
	sqlite3_bind_int64(s, 1, orch_rec_key_u64(*after));
	sqlite3_bind_int64(s, 2, ORCH_REC_OBJ_DYING);
	sqlite3_bind_int64(s, 3, (int64_t)max);
	while (!error && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		uint64_t h = orch_rec_unkey_u64(sqlite3_column_int64(s, 0));

		*after = h;
		n++;
		error = fn(arg, h);
	}
	if (!error && rc != SQLITE_DONE)
		error = orch_rec_sql_err(c->c_db, rc, "handles step");
	if (!error && n == max)
		*eof = false;
out:
	sqlite3_finalize(s);
	store_snap_put(st, c);
	return error;
}

bool orch_store_has_object(struct orch_store *st, uint64_t h)
{
	struct store_conn *c;
	sqlite3_stmt *s = NULL;
	bool found = true;  /* on doubt, say it exists: callers report absence */

	if (store_snap_get(st, &c))
		return true;
	if (sqlite3_prepare_v2(c->c_db, "SELECT 1 FROM obj WHERE handle = ?1"
			       " AND (flags & ?2) = 0", -1, &s, NULL) == SQLITE_OK) {
		sqlite3_bind_int64(s, 1, orch_rec_key_u64(h));
		sqlite3_bind_int64(s, 2, ORCH_REC_OBJ_DYING);
		int rc = sqlite3_step(s);

		found = rc != SQLITE_DONE;
	}
	sqlite3_finalize(s);
	store_snap_put(st, c);
	return found;
}

/* --- The data scan -------------------------------------------------------------- */

struct scan {
	struct orch_store *st;
	sqlite3 *db;
	sqlite3_stmt *rmap, *csum;
	uint8_t *buf;
	orch_store_bad_block_fn bad;
	void *arg;
	/* Resume key: rmap records after (ag, agbno, owner, off). */
	uint32_t ag;
	int64_t agbno, owner, off;
	uint64_t verified;        /* blocks below this (in the AG) were read */
	uint64_t blocks;          /* read so far */
	/* The csum row last read. */
	int64_t c_grp;
	bool c_have;
	uint64_t c_valid;
	uint8_t c_sums[ORCH_REC_CSUM_GROUP * 4];
};

/* Loads the csum row of group @grp of the scan's AG. */
static int scan_csum(struct scan *sc, int64_t grp)
{
	int rc;

	if (sc->c_grp == grp)
		return 0;
	sc->c_grp = grp;
	sc->c_have = false;
	sqlite3_bind_int64(sc->csum, 1, sc->ag);
	sqlite3_bind_int64(sc->csum, 2, grp);
	rc = sqlite3_step(sc->csum);
	if (rc == SQLITE_ROW && sqlite3_column_bytes(sc->csum, 1) == sizeof(sc->c_sums)) {
		sc->c_valid = (uint64_t)sqlite3_column_int64(sc->csum, 0);
		memcpy(sc->c_sums, sqlite3_column_blob(sc->csum, 1), sizeof(sc->c_sums));
		sc->c_have = true;
	}
	sqlite3_reset(sc->csum);
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		return orch_rec_sql_err(sc->db, rc, "scan csum");
	return 0;
}

/* Reads AG blocks [@b, @e) and checks each against its checksum. */
static int scan_range(struct scan *sc, uint32_t b, uint32_t e)
{
	char why[96];
	int error;

	while (b < e) {
		uint32_t n = ORCH_MIN(e - b, SCAN_RUN);
		uint64_t g = store_gblock(sc->st, sc->ag, b);

		error = orch_bdev_read(sc->st, g, n, sc->buf);
		sc->blocks += n;
		for (uint32_t j = 0; j < n; j++) {
			uint32_t blk = b + j, bit = blk % ORCH_REC_CSUM_GROUP;
			uint32_t want, got;

			if (error) {
				snprintf(why, sizeof(why), "read failed: %s", strerror(-error));
				sc->bad(sc->arg, g + j, why);
				continue;
			}
			error = scan_csum(sc, blk / ORCH_REC_CSUM_GROUP);
			if (error)
				return error;
			if (!sc->c_have || !(sc->c_valid & (1ull << bit)))
				continue;  /* no checksum: the checker's I16 */
			want = orch_get_u32(sc->c_sums + 4 * bit);
			got = orch_crc32c(0, sc->buf + (size_t)j * ORCH_STORE_BLOCK,
					  ORCH_STORE_BLOCK);
			if (got != want) {
				snprintf(why, sizeof(why), "crc32c %08x, checksum %08x", got, want);
				sc->bad(sc->arg, g + j, why);
			}
		}
		error = 0;
		b += n;
	}
	return 0;
}

/*
 * One batch on its own snapshot: the next rmap records of the AG, each
 * written data extent read once (blocks shared by several owners are read
 * for the first).  Returns 1 when the AG is done, 0 to go on, or -errno.
 */
static int scan_batch(struct scan *sc)
{
	uint32_t aglen = store_ag_len(sc->st, sc->ag);
	uint64_t bytes = 0;
	int rc = SQLITE_DONE, error = 0, nrec = 0;

	sqlite3_bind_int64(sc->rmap, 1, sc->ag);
	sqlite3_bind_int64(sc->rmap, 2, sc->agbno);
	sqlite3_bind_int64(sc->rmap, 3, sc->owner);
	sqlite3_bind_int64(sc->rmap, 4, sc->off);
	sc->c_grp = -1;
	while (!error && nrec < SCAN_BATCH_RECS && bytes < SCAN_BATCH_BYTES &&
	       (rc = sqlite3_step(sc->rmap)) == SQLITE_ROW) {
		int64_t agbno = sqlite3_column_int64(sc->rmap, 0);
		int64_t len = sqlite3_column_int64(sc->rmap, 3);
		int64_t flags = sqlite3_column_int64(sc->rmap, 4);
		uint64_t s, e;

		sc->agbno = agbno;
		sc->owner = sqlite3_column_int64(sc->rmap, 1);
		sc->off = sqlite3_column_int64(sc->rmap, 2);
		nrec++;
		if (sc->owner <= 0 || (flags & ORCH_REC_EXT_UNWRITTEN) || len < 1 ||
		    agbno < 0 || agbno >= aglen)
			continue;
		s = ORCH_MAX((uint64_t)agbno, sc->verified);
		e = ORCH_MIN((uint64_t)agbno + (uint64_t)len, (uint64_t)aglen);
		if (s >= e)
			continue;
		error = scan_range(sc, (uint32_t)s, (uint32_t)e);
		sc->verified = e;
		bytes += (e - s) * ORCH_STORE_BLOCK;
	}
	if (!error && nrec < SCAN_BATCH_RECS && bytes < SCAN_BATCH_BYTES) {
		if (rc != SQLITE_DONE)
			error = orch_rec_sql_err(sc->db, rc, "scan rmap");
		else
			error = 1;
	}
	sqlite3_reset(sc->rmap);
	return error;
}

/* Sleeps until @bytes at @rate bytes/s since @t0 are due. */
static void scan_throttle(const struct timespec *t0, uint64_t bytes, uint64_t rate)
{
	struct timespec due = *t0;
	uint64_t ns;

	if (!rate)
		return;
	ns = bytes / rate * 1000000000ull + bytes % rate * 1000000000ull / rate;
	due.tv_sec += (time_t)(ns / 1000000000ull);
	due.tv_nsec += (long)(ns % 1000000000ull);
	if (due.tv_nsec >= 1000000000L) {
		due.tv_sec++;
		due.tv_nsec -= 1000000000L;
	}
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR)
		;
}

static int scan_open(struct scan *sc, struct store_conn **c)
{
	int error = store_snap_get(sc->st, c);

	if (error)
		return error;
	sc->db = (*c)->c_db;
	if (sqlite3_prepare_v2(sc->db,
		"SELECT agbno, owner, off, len, flags FROM rmap WHERE ag = ?1"
		" AND (agbno, owner, off) > (?2, ?3, ?4)"
		" ORDER BY ag, agbno, owner, off", -1, &sc->rmap, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(sc->db,
		"SELECT valid, sums FROM csum WHERE ag = ?1 AND grp = ?2",
		-1, &sc->csum, NULL) != SQLITE_OK) {
		error = orch_rec_sql_err(sc->db, sqlite3_errcode(sc->db), "scan prepare");
		sqlite3_finalize(sc->rmap);
		sqlite3_finalize(sc->csum);
		sc->rmap = sc->csum = NULL;
		store_snap_put(sc->st, *c);
		return error;
	}
	return 0;
}

static void scan_close(struct scan *sc, struct store_conn *c)
{
	sqlite3_finalize(sc->rmap);
	sqlite3_finalize(sc->csum);
	sc->rmap = sc->csum = NULL;
	store_snap_put(sc->st, c);
}

long orch_store_scan_data(struct orch_store *st, uint64_t rate_bytes,
			  orch_store_bad_block_fn bad, void *arg,
			  const volatile bool *stop)
{
	struct scan sc = { .st = st, .bad = bad, .arg = arg };
	struct timespec t0;
	int error = 0;

	sc.buf = malloc((size_t)SCAN_RUN * ORCH_STORE_BLOCK);
	if (!sc.buf)
		return -ENOMEM;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (sc.ag = 0; sc.ag < st->st_ag_count && !error; sc.ag++) {
		sc.agbno = -1, sc.owner = INT64_MIN, sc.off = INT64_MIN;
		sc.verified = 0;
		for (;;) {
			struct store_conn *c;

			if (stop && *stop) {
				error = -ECANCELED;
				break;
			}
			error = scan_open(&sc, &c);
			if (!error)
				error = scan_batch(&sc);
			if (sc.rmap)
				scan_close(&sc, c);
			/* Outside the snapshot: a sleeping scan holds no blocks. */
			scan_throttle(&t0, sc.blocks * ORCH_STORE_BLOCK, rate_bytes);
			if (error)
				break;
		}
		if (error == 1)
			error = 0;
	}
	free(sc.buf);
	return error ? error : (long)sc.blocks;
}
