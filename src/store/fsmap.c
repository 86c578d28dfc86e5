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
 * Values read from store.db are not trusted: a record that fails
 * verification (rec.c) is skipped and ends are clipped to the AG and the
 * range, so a damaged record can make the map wrong (the scrub says where)
 * but never make it loop or overflow.
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

/* The wire's page records speak of this store's blocks and owners. */
_Static_assert(ORCH_STORE_BLOCK == ORCH_DATA_BLOCK, "store and wire blocks differ");
_Static_assert(ORCH_STORE_MAX_SIZE == ORCH_DATA_OBJECT_MAX, "store and wire sizes differ");
_Static_assert(ORCH_STORE_OWN_FS == ORCH_FSMAP_OWN_FS &&
	       ORCH_STORE_OWN_DEFECTIVE == ORCH_FSMAP_OWN_DEFECTIVE, "owners differ");

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
	struct orch_rec_sq *q;
	uint64_t start, end;            /* the range, global blocks */
	struct orch_fsmap_cursor *cur;
	size_t left;                    /* records still wanted in this page */
	orch_fsmap_fn fn;
	void *arg;
};

/* A row of either stream as a record (unclipped); false if unusable. */
static bool fsmap_row(struct fsmap_walk *w, uint32_t ag, sqlite3_stmt *s,
		      bool is_rmap, struct orch_fsmap_rec *r)
{
	uint32_t aglen = store_ag_len(w->st, ag);
	struct orch_rmap_irec rm;
	struct orch_fsb_irec f;
	uint32_t agbno, len;

	if (is_rmap ? orch_rec_rmap_from_disk(NULL, s, 0, &rm) :
		      orch_rec_fsb_from_disk(NULL, s, 0, &f))
		return false;
	agbno = is_rmap ? rm.agbno : f.agbno;
	len = is_rmap ? rm.len : f.len;
	if (agbno >= aglen)
		return false;
	memset(r, 0, sizeof(*r));
	r->start = store_gblock(w->st, ag, agbno);
	r->len = ORCH_MIN(len, aglen - agbno);
	if (!is_rmap) {
		r->owner = ORCH_STORE_OWN_FREE;
		return true;
	}
	r->owner = rm.owner;
	r->fileoff = rm.off;
	r->flags = rm.flags;
	if (r->owner > 0 && sqlite3_column_type(s, 7) != SQLITE_NULL)
		r->handle = orch_rec_unkey_u64(sqlite3_column_int64(s, 7));
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
static bool fsmap_next(struct fsmap_walk *w, uint32_t ag, bool is_rmap,
		       struct orch_fsmap_rec *r, int *err)
{
	enum orch_rec_stmt id = is_rmap ? ORCH_REC_RMAP_OWNERS : ORCH_REC_FSB_RANGE;
	int rc;

	while ((rc = orch_rec_step(w->q, id)) == 1)
		if (fsmap_row(w, ag, w->q->q_stmt[id], is_rmap, r))
			return true;
	if (rc < 0)
		*err = rc;
	return false;
}

/* First block of AG @ag where either stream may begin to matter. */
static int fsmap_ag_from(struct fsmap_walk *w, uint32_t ag, int64_t lo,
			 int64_t *rfrom, int64_t *ffrom)
{
	struct orch_fsb_irec f;
	sqlite3_stmt *s;
	int64_t c = -1;
	int rc;

	if (w->cur->valid && (w->cur->start >> w->st->st_ag_shift) == ag)
		c = (int64_t)(w->cur->start & (w->st->st_ag_blocks - 1));
	*rfrom = ORCH_MAX(ORCH_MAX(lo - (int64_t)w->st->st_maxext + 1, 0), c);
	*ffrom = lo;
	rc = orch_rec_stmt(w->q, ORCH_REC_FSB_LE, &s);
	if (rc)
		return rc;
	sqlite3_bind_int64(s, 1, ag);
	sqlite3_bind_int64(s, 2, lo);
	rc = orch_rec_step(w->q, ORCH_REC_FSB_LE);
	if (rc < 0)
		return rc;
	if (rc) {
		/* A damaged record: the walk starts at @lo (it is skipped anyway). */
		if (!orch_rec_fsb_from_disk(NULL, s, 0, &f))
			*ffrom = f.agbno;
		orch_rec_reset(w->q, ORCH_REC_FSB_LE);
	}
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
	sqlite3_stmt *rmap, *fsb;
	int64_t rfrom, ffrom;
	bool have_r, have_f;
	int error = 0, done = 0;

	error = fsmap_ag_from(w, ag, lo, &rfrom, &ffrom);
	if (!error)
		error = orch_rec_stmt(w->q, ORCH_REC_RMAP_OWNERS, &rmap);
	if (!error)
		error = orch_rec_stmt(w->q, ORCH_REC_FSB_RANGE, &fsb);
	if (error)
		return error;
	sqlite3_bind_int64(rmap, 1, ag);
	sqlite3_bind_int64(rmap, 2, rfrom);
	sqlite3_bind_int64(rmap, 3, hi);
	/*
	 * A page resumes after the cursor's record in the index itself: a
	 * block shared by many owners is not rescanned from its first owner
	 * by every page.
	 */
	if (w->cur->valid && (w->cur->start >> st->st_ag_shift) == ag) {
		sqlite3_bind_int64(rmap, 4, (int64_t)(w->cur->start & (st->st_ag_blocks - 1)));
		sqlite3_bind_int64(rmap, 5, w->cur->owner);
		sqlite3_bind_int64(rmap, 6, (int64_t)w->cur->off);
	} else {
		sqlite3_bind_int64(rmap, 4, -1);
		sqlite3_bind_int64(rmap, 5, INT64_MIN);
		sqlite3_bind_int64(rmap, 6, INT64_MIN);
	}
	sqlite3_bind_int64(fsb, 1, ag);
	sqlite3_bind_int64(fsb, 2, ffrom);
	sqlite3_bind_int64(fsb, 3, hi);
	have_r = fsmap_next(w, ag, true, &rr, &error);
	have_f = !error && fsmap_next(w, ag, false, &fr, &error);
	while (!error && !done && (have_r || have_f)) {
		bool take_r = have_r && (!have_f ||
			fsmap_key_cmp(rr.start, rr.owner, rr.fileoff, fr.start,
				      fr.owner, 0) < 0);

		if (take_r) {
			done = fsmap_emit(w, &rr);
			have_r = done == 0 && fsmap_next(w, ag, true, &rr, &error);
		} else {
			done = fsmap_emit(w, &fr);
			have_f = done == 0 && fsmap_next(w, ag, false, &fr, &error);
		}
		if (done < 0)
			error = done;
	}
	sqlite3_reset(rmap);
	sqlite3_reset(fsb);
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
	error = orch_snap_get(st, &c);
	if (error)
		return error;
	w.q = &c->c_sq;
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
	orch_snap_put(st, c);
	return error;
}

/* --- Objects ---------------------------------------------------------------------- */

int orch_store_handles(struct orch_store *st, uint64_t *after, size_t max,
		       orch_store_handle_fn fn, void *arg, bool *eof)
{
	struct orch_obj_irec o;
	struct store_conn *c;
	sqlite3_stmt *s;
	size_t n = 0;
	int error, rc = 0;

	*eof = true;
	error = orch_snap_get(st, &c);
	if (error)
		return error;
	error = orch_rec_stmt(&c->c_sq, ORCH_REC_OBJ_LIVE_AFTER, &s);
	if (error)
		goto out;
	sqlite3_bind_int64(s, 1, orch_rec_key_u64(*after));
	sqlite3_bind_int64(s, 2, (int64_t)max);
	while (!error && (rc = orch_rec_step(&c->c_sq, ORCH_REC_OBJ_LIVE_AFTER)) == 1) {
		/* The handle orders the walk: a record failing verification
		 * still names its handle (the scrub reports the record). */
		(void)orch_rec_obj_from_disk(s, 0, &o);
		*after = o.handle;
		n++;
		error = fn(arg, o.handle);
	}
	if (rc == 1)
		orch_rec_reset(&c->c_sq, ORCH_REC_OBJ_LIVE_AFTER);
	if (!error && rc < 0)
		error = rc;
	if (!error && n == max)
		*eof = false;
out:
	orch_snap_put(st, c);
	return error;
}

bool orch_store_has_object(struct orch_store *st, uint64_t h)
{
	struct store_conn *c;
	sqlite3_stmt *s;
	bool found = true;  /* on doubt, say it exists: callers report absence */

	if (orch_snap_get(st, &c))
		return true;
	if (!orch_rec_stmt(&c->c_sq, ORCH_REC_OBJ_LIVE_BY_HANDLE, &s)) {
		sqlite3_bind_int64(s, 1, orch_rec_key_u64(h));
		found = orch_rec_step(&c->c_sq, ORCH_REC_OBJ_LIVE_BY_HANDLE) != 0;
		orch_rec_reset(&c->c_sq, ORCH_REC_OBJ_LIVE_BY_HANDLE);
	}
	orch_snap_put(st, c);
	return found;
}

/* --- The data scan -------------------------------------------------------------- */

struct scan {
	struct orch_store *st;
	struct orch_rec_sq *q;        /* the batch's snapshot's; NULL between */
	uint8_t *buf;
	orch_store_bad_block_fn bad;
	void *arg;
	/* Resume key: rmap records after (ag, agbno, owner, off). */
	uint32_t ag;
	int64_t agbno, owner, off;
	uint64_t verified;        /* blocks below this (in the AG) were read */
	uint64_t blocks;          /* read so far */
	/* The csum row last read (valid 0 if none or damaged). */
	int64_t c_grp;
	struct orch_csum_irec c_rec;
};

/* Loads the csum row of group @grp of the scan's AG. */
static int scan_csum(struct scan *sc, int64_t grp)
{
	int rc;

	if (sc->c_grp == grp)
		return 0;
	sc->c_grp = grp;
	/* A damaged row vouches for nothing (the checker reports it). */
	rc = orch_rec_csum_get(sc->q, sc->ag, grp, &sc->c_rec);
	return rc < 0 ? rc : 0;
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
			if (!(sc->c_rec.valid & (1ull << bit)))
				continue;  /* no checksum: the checker's I16 */
			want = sc->c_rec.sums[bit];
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
	struct orch_rmap_irec r;
	uint64_t bytes = 0;
	sqlite3_stmt *q;
	int rc = 0, error, nrec = 0;

	error = orch_rec_stmt(sc->q, ORCH_REC_RMAP_AFTER, &q);
	if (error)
		return error;
	sqlite3_bind_int64(q, 1, sc->ag);
	sqlite3_bind_int64(q, 2, sc->agbno);
	sqlite3_bind_int64(q, 3, sc->owner);
	sqlite3_bind_int64(q, 4, sc->off);
	sc->c_grp = -1;
	while (!error && nrec < SCAN_BATCH_RECS && bytes < SCAN_BATCH_BYTES &&
	       (rc = orch_rec_step(sc->q, ORCH_REC_RMAP_AFTER)) == 1) {
		orch_failaddr_t fa = orch_rec_rmap_from_disk(NULL, q, 0, &r);
		uint64_t s, e;

		/* The resume key is the row's own, damaged or not. */
		sc->agbno = sqlite3_column_int64(q, 1);
		sc->owner = sqlite3_column_int64(q, 2);
		sc->off = sqlite3_column_int64(q, 3);
		nrec++;
		if (fa || r.owner <= 0 || (r.flags & ORCH_REC_EXT_UNWRITTEN) || r.agbno >= aglen)
			continue;
		s = ORCH_MAX((uint64_t)r.agbno, sc->verified);
		e = ORCH_MIN((uint64_t)r.agbno + r.len, (uint64_t)aglen);
		if (s >= e)
			continue;
		error = scan_range(sc, (uint32_t)s, (uint32_t)e);
		sc->verified = e;
		bytes += (e - s) * ORCH_STORE_BLOCK;
	}
	if (!error && nrec < SCAN_BATCH_RECS && bytes < SCAN_BATCH_BYTES)
		error = rc < 0 ? rc : 1;
	sqlite3_reset(q);
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
	int error = orch_snap_get(sc->st, c);

	if (!error)
		sc->q = &(*c)->c_sq;
	return error;
}

static void scan_close(struct scan *sc, struct store_conn *c)
{
	sc->q = NULL;
	orch_snap_put(sc->st, c);
}

long orch_store_scan_data(struct orch_store *st, uint64_t rate_bytes,
			  orch_store_bad_block_fn bad, void *arg,
			  const atomic_bool *stop)
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

			if (stop && atomic_load(stop)) {
				error = -ECANCELED;
				break;
			}
			error = scan_open(&sc, &c);
			if (!error)
				error = scan_batch(&sc);
			if (sc.q)
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
