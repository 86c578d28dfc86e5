/*
 * Inspection of the extent store: the owners query (XFS's overlapped rmap
 * query) and the invariant checker (docs/SPEC-store.md, "Invariants").
 * Both run on one read snapshot while the store keeps working, with
 * statements of their own on the snapshot's connection.
 *
 * The checker never trusts a value it reads: every field is range-checked
 * before it is used as a block number, a length or an array index, and no
 * allocation is sized by a stored value, only by the rows actually read.
 * It works in three passes:
 *
 *  1. Objects: obj and bmap in key order, merged by nid.  Per object the
 *     extents must be sorted, disjoint, inside the size and counted right
 *     (I7), well formed (I4), below next_nid (I10) and mirrored by an rmap
 *     record (I8, one point lookup per extent).
 *
 *  2. AGs, one at a time (the sweep and the data check: check_sweep.c): the AG's rmap, fsb, fsc, refc, csum and bad
 *     records are loaded in key order (memory proportional to the records,
 *     never to the blocks).  Each record is checked on its own (crc, I4, I5,
 *     I6, I9, I10, I15); then the interval records become start/end events,
 *     and one sweep over the sorted events walks the AG as elementary
 *     segments with constant coverage: how many free extents, rmap records
 *     (data, written, special, OWN_FS, OWN_DEFECTIVE), refc records and bad
 *     records cover it.  Each segment is judged once (I1, I6, I11-I14, I16,
 *     I18), the csum rows are consumed by a cursor as the segments pass
 *     their groups.  The set equality fsb = fsc is a merge of sorted lists,
 *     the counters (I3) are sums over the loaded records.  With
 *     @data, the blocks of every written data extent are read in runs of up
 *     to 256 and compared with their checksums (I17).
 *
 *  3. Records outside every AG (any AG-keyed table).
 *
 * The work table is read first: an object whose truncate or delete is a
 * work item in progress may still map blocks past its new size.
 *
 * Reports of one rule are capped (CHK_REPORT_MAX per run); the return value
 * still counts every finding.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/util.h"
#include "store/check_i.h"

/* Reports of one rule passed to the callback per check run. */
#define CHK_REPORT_MAX 100

/* --- The owners query ------------------------------------------------------- */

/*
 * The records are decoded through the record layer but not refused when
 * they fail verification: a scrub asks who owns a bad block, and a record
 * with a bad CRC still says who probably does (the checker reports it).
 */
int orch_store_owners(struct orch_store *st, uint64_t start, uint64_t end,
		      orch_store_rmap_fn fn, void *arg)
{
	struct orch_rmap_irec rm;
	struct store_conn *c;
	sqlite3_stmt *s;
	uint64_t mask = st->st_ag_blocks - 1;
	uint32_t ag, ag_last;
	int error, rc = 0;

	if (end > st->st_blocks)
		end = st->st_blocks;
	if (start >= end)
		return 0;
	error = orch_snap_get(st, &c);
	if (error)
		return error;
	ag_last = (uint32_t)((end - 1) >> st->st_ag_shift);
	for (ag = (uint32_t)(start >> st->st_ag_shift);
	     ag <= ag_last && ag < st->st_ag_count && !error; ag++) {
		uint64_t ag0 = (uint64_t)ag << st->st_ag_shift;
		int64_t lo = start > ag0 ? (int64_t)(start & mask) : 0;
		int64_t hi = ag == ag_last ? (int64_t)((end - 1) & mask) + 1 :
			     (int64_t)store_ag_len(st, ag);
		int64_t from = lo - (int64_t)st->st_maxext + 1;

		error = orch_rec_stmt(&c->c_sq, ORCH_REC_RMAP_OWNERS, &s);
		if (error)
			break;
		sqlite3_bind_int64(s, 1, ag);
		sqlite3_bind_int64(s, 2, from > 0 ? from : 0);
		sqlite3_bind_int64(s, 3, hi);
		sqlite3_bind_int64(s, 4, -1);
		sqlite3_bind_int64(s, 5, INT64_MIN);
		sqlite3_bind_int64(s, 6, INT64_MIN);
		while ((rc = orch_rec_step(&c->c_sq, ORCH_REC_RMAP_OWNERS)) == 1) {
			struct orch_store_rmap r;

			(void)orch_rec_rmap_from_disk(NULL, s, 0, &rm);
			/* Overlaps [lo, hi): starts below hi, ends past lo. */
			if (rm.len < 1 || (int64_t)rm.len <= lo - (int64_t)rm.agbno)
				continue;
			memset(&r, 0, sizeof(r));
			r.ag = ag;
			r.agbno = rm.agbno;
			r.len = rm.len;
			r.owner = rm.owner;
			r.fileoff = rm.off;
			r.flags = rm.flags;
			if (r.owner > 0 && sqlite3_column_type(s, 7) != SQLITE_NULL)
				r.handle = orch_rec_unkey_u64(sqlite3_column_int64(s, 7));
			error = fn(arg, &r);
			if (error)
				break;
		}
		if (rc == 1)
			orch_rec_reset(&c->c_sq, ORCH_REC_RMAP_OWNERS);
		if (!error && rc < 0)
			error = rc;
	}
	orch_snap_put(st, c);
	return error;
}

/* --- Checker state ---------------------------------------------------------- */

/* Rules: 0 = crc, n = In. */
static const char *const chk_rule_name[CHK_NRULES] = {
	"crc", "I1", "I2", "I3", "I4", "I5", "I6", "I7", "I8", "I9", "I10",
	"I11", "I12", "I13", "I14", "I15", "I16", "I17", "I18",
};

void orch_check_report(struct chk *ck, int rule, const char *structure,
		       int64_t ag, int64_t block, uint64_t handle,
		       const char *fmt, ...)
{
	struct orch_store_finding f;
	va_list ap;

	ck->found++;
	if (!ck->fn || ck->reported[rule] >= CHK_REPORT_MAX)
		return;
	ck->reported[rule]++;
	f.rule = chk_rule_name[rule];
	f.structure = structure;
	f.ag = ag;
	f.block = block;
	f.handle = handle;
	va_start(ap, fmt);
	vsnprintf(f.detail, sizeof(f.detail), fmt, ap);
	va_end(ap);
	ck->fn(ck->arg, &f);
}

/* Appends a zeroed element to @vec; NULL when out of memory. */
static void *chk_vec_push(struct chk_vec *vec, size_t size)
{
	char *p;

	if (vec->n == vec->cap) {
		size_t cap = vec->cap ? vec->cap * 2 : 64;

		if (cap > SIZE_MAX / size)
			return NULL;
		p = realloc(vec->v, cap * size);
		if (!p)
			return NULL;
		vec->v = p;
		vec->cap = cap;
	}
	p = (char *)vec->v + vec->n++ * size;
	memset(p, 0, size);
	return p;
}

static void chk_vec_free(struct chk_vec *vec)
{
	free(vec->v);
	vec->v = NULL;
	vec->n = vec->cap = 0;
}

/*
 * Checks the crc of record @f (orch_rec_read: fields, then crc); @what
 * names the table.
 */
static bool chk_crc(struct chk *ck, enum orch_rec_tbl t, const char *what,
		    const int64_t *f, const void *blob, size_t bloblen,
		    int64_t ag, int64_t block, uint64_t handle)
{
	uint32_t crc;

	if (orch_rec_crc_ok(t, f, blob, bloblen, &crc))
		return true;
	orch_check_report(ck, 0, what, ag, block, handle,
		   "record crc %#" PRIx64 " != computed %#" PRIx32,
		   (uint64_t)f[orch_rec_nfields(t)], crc);
	return false;
}

/* Statement @id, bound by the caller: 0 or -errno. */
static int chk_stmt(struct chk *ck, enum orch_rec_stmt id, sqlite3_stmt **s)
{
	return orch_rec_stmt(ck->q, id, s);
}

/*
 * The object @nid: whether it exists, its handle and flags.  One entry
 * cache: rmap records of one owner tend to come together.
 */
int orch_check_obj_lookup(struct chk *ck, int64_t nid)
{
	int64_t f[8];
	sqlite3_stmt *s;
	int rc;

	if (ck->o_cached && ck->o_nid == nid)
		return 0;
	ck->o_cached = false;
	rc = chk_stmt(ck, ORCH_REC_OBJ_BY_NID, &s);
	if (rc)
		return rc;
	sqlite3_bind_int64(s, 1, nid);
	rc = orch_rec_step(ck->q, ORCH_REC_OBJ_BY_NID);
	if (rc < 0)
		return rc;
	ck->o_exists = rc == 1;
	ck->o_handle = 0;
	ck->o_flags = 0;
	if (ck->o_exists) {
		orch_rec_read(ORCH_REC_OBJ, s, 0, f);
		ck->o_handle = orch_rec_unkey_u64(f[1]);
		ck->o_flags = f[3];
		orch_rec_reset(ck->q, ORCH_REC_OBJ_BY_NID);
	}
	ck->o_nid = nid;
	ck->o_cached = true;
	return 0;
}

/* --- smeta ------------------------------------------------------------------ */

/* Every smeta record's crc, and next_nid for I10. */
static int chk_smeta(struct chk *ck)
{
	sqlite3_stmt *s;
	bool have = false;
	int rc;

	ck->next_nid = INT64_MAX;
	ck->next_work = INT64_MAX;
	rc = chk_stmt(ck, ORCH_REC_SMETA_ALL, &s);
	if (rc)
		return rc;
	while ((rc = orch_rec_step(ck->q, ORCH_REC_SMETA_ALL)) == 1) {
		const unsigned char *k = sqlite3_column_text(s, 0);
		int bytes = sqlite3_column_bytes(s, 0);
		int64_t f[2], v;

		orch_rec_read(ORCH_REC_SMETA, s, 0, f);
		v = f[0];
		if (!chk_crc(ck, ORCH_REC_SMETA, "smeta", f, k,
			     k && bytes > 0 ? (size_t)bytes : 0, -1, -1, 0))
			continue;
		if (k && !strcmp((const char *)k, "next_nid")) {
			ck->next_nid = v;
			have = true;
		}
		if (k && !strcmp((const char *)k, "next_work"))
			ck->next_work = v;
	}
	if (rc < 0)
		return rc;
	if (!have)
		orch_check_report(ck, 10, "smeta", -1, -1, 0,
			   "smeta has no valid next_nid");
	else if (ck->next_nid < 1)
		orch_check_report(ck, 10, "smeta", -1, -1, 0,
			   "smeta next_nid %" PRId64 " below 1", ck->next_nid);
	return 0;
}

/* --- Work items ----------------------------------------------------------- */

/* A pending truncate, punch or delete: its object may be half done. */
struct chk_wrec {
	int64_t nid, type, a;
};

/*
 * One work item's fields (@f: seq, type, nid, a, b, progress): an item the
 * writer would leave alone at open as damaged (writer.c work_resume) is
 * never finished, so it is a finding.
 */
static void chk_work_item(struct chk *ck, const int64_t *f)
{
	const char *why = NULL;

	if (f[0] < 1 || f[0] >= ck->next_work)
		orch_check_report(ck, 10, "work", -1, -1, 0, "work item %" PRId64
			   " not in [1, next_work %" PRId64 ")", f[0], ck->next_work);
	if (f[1] < STORE_WORK_TRUNCATE || f[1] > STORE_WORK_DELETE)
		why = "unknown type";
	else if (f[3] < 0 || (uint64_t)f[3] > ORCH_STORE_MAX_SIZE)
		why = "a out of range";
	else if (f[1] == STORE_WORK_PUNCH && (f[4] < f[3] || f[4] < 0))
		why = "punch ends before it starts";
	else if (f[5] < f[3])
		why = "progress below a";
	if (why)
		orch_check_report(ck, 4, "work", -1, -1, 0, "work item %" PRId64
			   " (type %" PRId64 ", nid %" PRId64 ") damaged: %s",
			   f[0], f[1], f[2], why);
}

/* Checks the work table and keeps its items, by nid, for pass 1. */
static int chk_work_load(struct chk *ck)
{
	sqlite3_stmt *s;
	int rc, error;

	error = chk_stmt(ck, ORCH_REC_WORK_BY_NID, &s);
	if (error)
		return error;
	while ((rc = orch_rec_step(ck->q, ORCH_REC_WORK_BY_NID)) == 1) {
		struct chk_wrec *k;
		int64_t f[8];

		orch_rec_read(ORCH_REC_WORK, s, 0, f);
		chk_crc(ck, ORCH_REC_WORK, "work", f, NULL, 0, -1, -1, 0);
		if (f[2] < 1 || f[2] >= ck->next_nid)
			orch_check_report(ck, 10, "work", -1, -1, 0,
				   "work item %" PRId64 ": nid %" PRId64
				   " not below next_nid %" PRId64, f[0], f[2],
				   ck->next_nid);
		chk_work_item(ck, f);
		k = chk_vec_push(&ck->work, sizeof(*k));
		if (!k) {
			error = -ENOMEM;
			break;
		}
		k->nid = f[2], k->type = f[1], k->a = f[3];
	}
	if (rc == 1)
		orch_rec_reset(ck->q, ORCH_REC_WORK_BY_NID);
	if (!error && rc < 0)
		error = rc;
	return error;
}

/*
 * True if a pending truncate or delete of object @nid has still to free
 * its extent [@off, @off + @len): the size was set in the item's first
 * transaction, the extents past it go chunk by chunk.
 */
static bool chk_work_pending(const struct chk *ck, int64_t nid, int64_t off,
			     int64_t len)
{
	const struct chk_wrec *k = ck->work.v;
	size_t lo = 0, hi = ck->work.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (k[mid].nid < nid)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < ck->work.n && k[lo].nid == nid; lo++)
		if ((k[lo].type == STORE_WORK_TRUNCATE ||
		     k[lo].type == STORE_WORK_DELETE) &&
		    len > 0 && len <= INT64_MAX - off && off + len > k[lo].a)
			return true;
	return false;
}

/* True if a work item of @type is pending for object @nid. */
static bool chk_work_has(const struct chk *ck, int64_t nid, int64_t type)
{
	const struct chk_wrec *k = ck->work.v;

	for (size_t i = 0; i < ck->work.n; i++)
		if (k[i].nid == nid && k[i].type == type)
			return true;
	return false;
}

/* --- Pass 1: objects and their extent maps ------------------------------- */

struct chk_obj {
	int64_t nid, handle, size, flags, nextents, nblocks;
	uint64_t h;
	/* Recomputed from the bmap. */
	uint64_t n, sum;
	int64_t prev_end;       /* end of the previous extent, in blocks */
};

/* Checks one bmap row (@o NULL: its object does not exist). */
static int chk_bmap_row(struct chk *ck, sqlite3_stmt *s, struct chk_obj *o)
{
	const struct orch_store *st = ck->st;
	int64_t f[8], rf[8];
	int64_t nid, off, ag, agbno, len, flags;
	uint64_t h = o ? o->h : 0;
	sqlite3_stmt *q;
	int rc;

	orch_rec_read(ORCH_REC_BMAP, s, 0, f);
	nid = f[0], off = f[1], ag = f[2], agbno = f[3], len = f[4], flags = f[5];
	chk_crc(ck, ORCH_REC_BMAP, "bmap", f, NULL, 0, ag, agbno, h);

	if (!o)
		orch_check_report(ck, 7, "bmap", ag, agbno, 0,
			   "bmap record nid %" PRId64 " off %" PRId64
			   " of no object", nid, off);

	/* I4: a sane extent. */
	if (len < 1 || len > (int64_t)st->st_maxext)
		orch_check_report(ck, 4, "bmap", ag, agbno, h,
			   "nid %" PRId64 " off %" PRId64 ": length %" PRId64
			   " not in 1..%" PRIu32, nid, off, len, st->st_maxext);
	if (ag < 0 || ag >= (int64_t)st->st_ag_count)
		orch_check_report(ck, 4, "bmap", ag, agbno, h,
			   "nid %" PRId64 " off %" PRId64 ": AG %" PRId64
			   " does not exist", nid, off, ag);
	else if (agbno < 0 || agbno >= (int64_t)store_ag_len(st, (uint32_t)ag) ||
		 (len > 0 && len > (int64_t)store_ag_len(st, (uint32_t)ag) - agbno))
		orch_check_report(ck, 4, "bmap", ag, agbno, h,
			   "nid %" PRId64 " off %" PRId64 ": blocks %" PRId64
			   "+%" PRId64 " outside AG of %" PRIu32, nid, off,
			   agbno, len, store_ag_len(st, (uint32_t)ag));

	/* I7: sorted, disjoint, inside the size; counted. */
	if (o) {
		int64_t size_blocks = (o->size + ORCH_STORE_BLOCK - 1) /
				      ORCH_STORE_BLOCK;

		o->n++;
		o->sum += (uint64_t)len;
		if (off < 0) {
			orch_check_report(ck, 7, "bmap", ag, agbno, h,
				   "nid %" PRId64 ": extent at negative offset %"
				   PRId64, nid, off);
		} else {
			if (off < o->prev_end)
				orch_check_report(ck, 7, "bmap", ag, agbno, h,
					   "nid %" PRId64 ": extent at %" PRId64
					   " overlaps the one before (ends %"
					   PRId64 ")", nid, off, o->prev_end);
			if (o->size >= 0 &&
			    (off >= size_blocks ||
			     (len > 0 && len > size_blocks - off)) &&
			    !chk_work_pending(ck, nid, off, len))
				orch_check_report(ck, 7, "bmap", ag, agbno, h,
					   "nid %" PRId64 ": extent %" PRId64
					   "+%" PRId64 " past the size %" PRId64
					   " (%" PRId64 " blocks)", nid, off,
					   len, o->size, size_blocks);
			if (len > 0 && off + len > o->prev_end &&
			    len <= INT64_MAX - off)
				o->prev_end = off + len;
		}
	}

	/* I8: the matching rmap record. */
	rc = chk_stmt(ck, ORCH_REC_RMAP_GET, &q);
	if (rc)
		return rc;
	sqlite3_bind_int64(q, 1, ag);
	sqlite3_bind_int64(q, 2, agbno);
	sqlite3_bind_int64(q, 3, nid);
	sqlite3_bind_int64(q, 4, off);
	rc = orch_rec_step(ck->q, ORCH_REC_RMAP_GET);
	if (rc == 0) {
		orch_check_report(ck, 8, "bmap", ag, agbno, h,
			   "nid %" PRId64 " off %" PRId64 " len %" PRId64
			   ": no rmap record", nid, off, len);
	} else if (rc == 1) {
		int64_t rlen, rflags;

		orch_rec_read(ORCH_REC_RMAP, q, 0, rf);
		orch_rec_reset(ck->q, ORCH_REC_RMAP_GET);
		rlen = rf[4];
		rflags = rf[5];
		if (rlen != len || rflags != flags)
			orch_check_report(ck, 8, "bmap", ag, agbno, h,
				   "nid %" PRId64 " off %" PRId64 ": bmap len %"
				   PRId64 " flags %#" PRIx64 ", rmap len %"
				   PRId64 " flags %#" PRIx64, nid, off, len,
				   (uint64_t)flags, rlen, (uint64_t)rflags);
	}
	return rc < 0 ? rc : 0;
}

static void chk_obj_start(struct chk *ck, sqlite3_stmt *s, struct chk_obj *o)
{
	int64_t f[8];

	orch_rec_read(ORCH_REC_OBJ, s, 0, f);
	memset(o, 0, sizeof(*o));
	o->nid = f[0], o->handle = f[1], o->size = f[2], o->flags = f[3];
	o->nextents = f[4], o->nblocks = f[5];
	o->h = orch_rec_unkey_u64(o->handle);
	chk_crc(ck, ORCH_REC_OBJ, "obj", f, NULL, 0, -1, -1, o->h);
	if (o->nid < 1 || o->nid >= ck->next_nid)
		orch_check_report(ck, 10, "obj", -1, -1, o->h,
			   "nid %" PRId64 " not in [1, next_nid %" PRId64 ")",
			   o->nid, ck->next_nid);
	if (o->flags & ~(int64_t)(ORCH_REC_OBJ_REFLINK | ORCH_REC_OBJ_DYING))
		orch_check_report(ck, 7, "obj", -1, -1, o->h,
			   "nid %" PRId64 ": unknown flags %#" PRIx64, o->nid,
			   (uint64_t)o->flags);
	else if ((o->flags & ORCH_REC_OBJ_DYING) && !chk_work_has(ck, o->nid,
							 STORE_WORK_DELETE))
		orch_check_report(ck, 7, "obj", -1, -1, o->h,
			   "nid %" PRId64 ": DYING without a delete work item",
			   o->nid);
	if (o->size < 0 || (uint64_t)o->size > ORCH_STORE_MAX_SIZE) {
		orch_check_report(ck, 7, "obj", -1, -1, o->h,
			   "nid %" PRId64 ": size %" PRId64 " out of range",
			   o->nid, o->size);
		o->size = -1;   /* no extent-past-size checks */
	}
}

static void chk_obj_end(struct chk *ck, struct chk_obj *o)
{
	if ((uint64_t)o->nextents != o->n)
		orch_check_report(ck, 7, "obj", -1, -1, o->h,
			   "nid %" PRId64 ": nextents %" PRId64 ", %" PRIu64
			   " bmap records", o->nid, o->nextents, o->n);
	if ((uint64_t)o->nblocks != o->sum)
		orch_check_report(ck, 7, "obj", -1, -1, o->h,
			   "nid %" PRId64 ": nblocks %" PRId64 ", extents sum to %"
			   PRIu64, o->nid, o->nblocks, o->sum);
}

static int chk_objects(struct chk *ck)
{
	sqlite3_stmt *so, *sb;
	struct chk_obj o;
	int rc, rb, error;

	error = chk_stmt(ck, ORCH_REC_OBJ_ALL, &so);
	if (!error)
		error = chk_stmt(ck, ORCH_REC_BMAP_ALL, &sb);
	if (error)
		return error;
	rb = orch_rec_step(ck->q, ORCH_REC_BMAP_ALL);
	while ((rc = orch_rec_step(ck->q, ORCH_REC_OBJ_ALL)) == 1) {
		chk_obj_start(ck, so, &o);
		/* bmap records of missing objects before this one */
		while (rb == 1 && sqlite3_column_int64(sb, 0) < o.nid) {
			error = chk_bmap_row(ck, sb, NULL);
			if (error)
				goto out;
			rb = orch_rec_step(ck->q, ORCH_REC_BMAP_ALL);
		}
		while (rb == 1 && sqlite3_column_int64(sb, 0) == o.nid) {
			error = chk_bmap_row(ck, sb, &o);
			if (error)
				goto out;
			rb = orch_rec_step(ck->q, ORCH_REC_BMAP_ALL);
		}
		chk_obj_end(ck, &o);
	}
	if (rc < 0) {
		error = rc;
		goto out;
	}
	while (rb == 1) {
		error = chk_bmap_row(ck, sb, NULL);
		if (error)
			goto out;
		rb = orch_rec_step(ck->q, ORCH_REC_BMAP_ALL);
	}
	if (rb < 0)
		error = rb;
out:
	orch_rec_reset(ck->q, ORCH_REC_OBJ_ALL);
	orch_rec_reset(ck->q, ORCH_REC_BMAP_ALL);
	return error;
}

/* --- Pass 2: one AG --------------------------------------------------------- */

/*
 * Clips [agbno, agbno + len) to the AG into @start/@end and reports I4;
 * false if nothing of it can be swept.
 */
static bool chk_clip(struct chk *ck, struct chk_ag *a, const char *what,
		     int64_t agbno, int64_t len, bool capped, uint32_t *start,
		     uint32_t *end, uint64_t h)
{
	const struct orch_store *st = ck->st;

	*start = *end = 0;
	if (len < 1) {
		orch_check_report(ck, 4, what, a->ag, agbno, h,
			   "length %" PRId64 " below 1", len);
		return false;
	}
	if (agbno < 0 || agbno >= (int64_t)a->len) {
		orch_check_report(ck, 4, what, a->ag, agbno, h,
			   "starts outside the AG of %" PRIu32 " blocks", a->len);
		return false;
	}
	if (capped && len > (int64_t)st->st_maxext)
		orch_check_report(ck, 4, what, a->ag, agbno, h,
			   "length %" PRId64 " above maxext %" PRIu32, len,
			   st->st_maxext);
	*start = (uint32_t)agbno;
	if (len > (int64_t)a->len - agbno) {
		orch_check_report(ck, 4, what, a->ag, agbno, h,
			   "length %" PRId64 " crosses the AG end %" PRIu32,
			   len, a->len);
		*end = a->len;
	} else {
		*end = (uint32_t)(agbno + len);
	}
	return true;
}

int orch_check_ev_add(struct chk_ag *a, uint32_t start, uint32_t end,
		      enum chk_ev_kind kind, size_t idx)
{
	struct chk_ev *e;

	e = chk_vec_push(&a->ev, sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e = (struct chk_ev){ .pos = start, .kind = kind, .delta = 1,
			      .idx = (uint32_t)idx };
	e = chk_vec_push(&a->ev, sizeof(*e));
	if (!e)
		return -ENOMEM;
	*e = (struct chk_ev){ .pos = end, .kind = kind, .delta = -1,
			      .idx = (uint32_t)idx };
	return 0;
}

/* I9: a data-owner rmap record must have the same bmap record. */
static int chk_rmap_to_bmap(struct chk *ck, struct chk_ag *a,
			    const struct chk_rrec *r, uint64_t h)
{
	sqlite3_stmt *q;
	int64_t f[8];
	int rc;

	rc = chk_stmt(ck, ORCH_REC_BMAP_GET, &q);
	if (rc)
		return rc;
	sqlite3_bind_int64(q, 1, r->owner);
	sqlite3_bind_int64(q, 2, r->off);
	rc = orch_rec_step(ck->q, ORCH_REC_BMAP_GET);
	if (rc == 0) {
		orch_check_report(ck, 9, "rmap", a->ag, r->agbno, h,
			   "owner %" PRId64 " off %" PRId64 " len %" PRId64
			   ": no bmap record", r->owner, r->off, r->len);
	} else if (rc == 1) {
		int64_t bag, bagbno, blen, bflags;

		orch_rec_read(ORCH_REC_BMAP, q, 0, f);
		orch_rec_reset(ck->q, ORCH_REC_BMAP_GET);
		bag = f[2], bagbno = f[3], blen = f[4], bflags = f[5];
		if (bag != a->ag || bagbno != r->agbno || blen != r->len ||
		    bflags != r->flags)
			orch_check_report(ck, 9, "rmap", a->ag, r->agbno, h,
				   "owner %" PRId64 " off %" PRId64 ": rmap %"
				   PRId64 "+%" PRId64 " flags %#" PRIx64
				   ", bmap AG %" PRId64 " %" PRId64 "+%" PRId64
				   " flags %#" PRIx64, r->owner, r->off,
				   r->agbno, r->len, (uint64_t)r->flags, bag,
				   bagbno, blen, (uint64_t)bflags);
	}
	return rc < 0 ? rc : 0;
}

static int chk_ag_rmap(struct chk *ck, struct chk_ag *a)
{
	sqlite3_stmt *s;
	int rc, error;

	error = chk_stmt(ck, ORCH_REC_RMAP_OF_AG, &s);
	if (error)
		return error;
	sqlite3_bind_int64(s, 1, a->ag);
	while ((rc = orch_rec_step(ck->q, ORCH_REC_RMAP_OF_AG)) == 1) {
		int64_t f[8];
		struct chk_rrec *r;
		uint64_t h = 0;

		r = chk_vec_push(&a->rmap, sizeof(*r));
		if (!r || a->rmap.n > UINT32_MAX) {
			error = -ENOMEM;
			break;
		}
		orch_rec_read(ORCH_REC_RMAP, s, 0, f);
		/* key order (ag, agbno, owner, off), then len, flags */
		r->agbno = f[1], r->owner = f[2], r->off = f[3];
		r->len = f[4], r->flags = f[5];
		if (r->owner > 0) {
			error = orch_check_obj_lookup(ck, r->owner);
			if (error)
				break;
			h = ck->o_exists ? ck->o_handle : 0;
		}
		chk_crc(ck, ORCH_REC_RMAP, "rmap", f, NULL, 0, a->ag, r->agbno, h);
		chk_clip(ck, a, "rmap", r->agbno, r->len, true, &r->start,
			 &r->end, h);

		if (r->owner == 0 || r->owner < ORCH_STORE_OWN_DEFECTIVE)
			orch_check_report(ck, 15, "rmap", a->ag, r->agbno, 0,
				   "unknown owner %" PRId64, r->owner);
		if (r->owner < 0 && (r->off != 0 || r->flags != 0))
			orch_check_report(ck, 5, "rmap", a->ag, r->agbno, 0,
				   "owner %" PRId64 " with off %" PRId64
				   " flags %#" PRIx64, r->owner, r->off,
				   (uint64_t)r->flags);
		if (r->owner == ORCH_STORE_OWN_FS &&
		    (a->ag != 0 || r->agbno != 0 || r->len != 1))
			orch_check_report(ck, 6, "rmap", a->ag, r->agbno, 0,
				   "OWN_FS owns %" PRId64 "+%" PRId64
				   ", not block 0 of AG 0", r->agbno, r->len);
		if (r->owner <= 0)
			continue;
		if (r->owner >= ck->next_nid)
			orch_check_report(ck, 10, "rmap", a->ag, r->agbno, h,
				   "owner %" PRId64 " not below next_nid %"
				   PRId64, r->owner, ck->next_nid);

		/* I9: the object and its bmap record. */
		if (!ck->o_exists)
			orch_check_report(ck, 9, "rmap", a->ag, r->agbno, 0,
				   "owner %" PRId64 " off %" PRId64
				   ": no such object", r->owner, r->off);
		error = chk_rmap_to_bmap(ck, a, r, h);
		if (error)
			break;
	}
	if (!error && rc < 0)
		error = rc;
	sqlite3_reset(s);
	return error;
}

/* fsb and bad: (agbno, len, ...) in agbno order; @bad: the bad table. */
static int chk_ag_extents(struct chk *ck, struct chk_ag *a, bool bad)
{
	enum orch_rec_stmt id = bad ? ORCH_REC_BAD_OF_AG : ORCH_REC_FSB_OF_AG;
	enum orch_rec_tbl t = bad ? ORCH_REC_BAD : ORCH_REC_FSB;
	struct chk_vec *vec = bad ? &a->bad : &a->fsb;
	const char *what = bad ? "bad" : "fsb";
	sqlite3_stmt *s;
	int rc, error;

	error = chk_stmt(ck, id, &s);
	if (error)
		return error;
	sqlite3_bind_int64(s, 1, a->ag);
	while ((rc = orch_rec_step(ck->q, id)) == 1) {
		struct chk_frec *r = chk_vec_push(vec, sizeof(*r));
		int64_t f[8];

		if (!r || vec->n > UINT32_MAX) {
			error = -ENOMEM;
			break;
		}
		orch_rec_read(t, s, 0, f);
		r->agbno = f[1];
		r->len = f[2];
		chk_crc(ck, t, what, f, NULL, 0, a->ag, r->agbno, 0);
		chk_clip(ck, a, what, r->agbno, r->len, false, &r->start,
			 &r->end, 0);
		if (bad && f[4] != STORE_BAD_REPORTED)
			orch_check_report(ck, 18, "bad", a->ag, r->agbno, 0,
				   "bad blocks %" PRId64 "+%" PRId64
				   ": unknown source %" PRId64, r->agbno, r->len,
				   f[4]);
	}
	if (!error && rc < 0)
		error = rc;
	sqlite3_reset(s);
	return error;
}

/* fsc, sorted by (agbno, len) for the comparison with fsb. */
static int chk_ag_fsc(struct chk *ck, struct chk_ag *a)
{
	sqlite3_stmt *s;
	int rc, error;

	error = chk_stmt(ck, ORCH_REC_FSC_OF_AG, &s);
	if (error)
		return error;
	sqlite3_bind_int64(s, 1, a->ag);
	while ((rc = orch_rec_step(ck->q, ORCH_REC_FSC_OF_AG)) == 1) {
		struct chk_frec *r = chk_vec_push(&a->fsc, sizeof(*r));
		int64_t f[8];

		if (!r) {
			error = -ENOMEM;
			break;
		}
		orch_rec_read(ORCH_REC_FSC, s, 0, f);
		r->len = f[1];
		r->agbno = f[2];
		chk_crc(ck, ORCH_REC_FSC, "fsc", f, NULL, 0, a->ag, r->agbno, 0);
	}
	if (!error && rc < 0)
		error = rc;
	sqlite3_reset(s);
	return error;
}

static int chk_ag_refc(struct chk *ck, struct chk_ag *a)
{
	struct chk_crec *prev = NULL;
	sqlite3_stmt *s;
	int rc, error;

	error = chk_stmt(ck, ORCH_REC_REFC_OF_AG, &s);
	if (error)
		return error;
	sqlite3_bind_int64(s, 1, a->ag);
	while ((rc = orch_rec_step(ck->q, ORCH_REC_REFC_OF_AG)) == 1) {
		struct chk_crec *r = chk_vec_push(&a->refc, sizeof(*r));
		int64_t f[8];

		if (!r || a->refc.n > UINT32_MAX) {
			error = -ENOMEM;
			break;
		}
		prev = a->refc.n > 1 ? r - 1 : NULL;
		orch_rec_read(ORCH_REC_REFC, s, 0, f);
		r->agbno = f[1], r->len = f[2], r->count = f[3];
		chk_crc(ck, ORCH_REC_REFC, "refc", f, NULL, 0, a->ag, r->agbno, 0);
		chk_clip(ck, a, "refc", r->agbno, r->len, true, &r->start,
			 &r->end, 0);
		if (r->count < 2)
			orch_check_report(ck, 12, "refc", a->ag, r->agbno, 0,
				   "refcount %" PRId64 " below 2", r->count);
		/*
		 * Canonical: runs of one count are cut at multiples of maxext
		 * (AG blocks) and nowhere else, so an update only rewrites the
		 * records it touches (refc.c).
		 */
		if (r->len > 0 && r->agbno >= 0 && r->len <= INT64_MAX - r->agbno &&
		    r->agbno / ck->st->st_maxext !=
				  (r->agbno + r->len - 1) / ck->st->st_maxext)
			orch_check_report(ck, 12, "refc", a->ag, r->agbno, 0,
				   "record crosses a multiple of maxext (%" PRIu32 ")",
				   ck->st->st_maxext);
		if (prev && prev->end > prev->start && r->end > r->start &&
		    prev->end == r->start && prev->count == r->count &&
		    r->start % ck->st->st_maxext != 0)
			orch_check_report(ck, 12, "refc", a->ag, r->agbno, 0,
				   "adjacent records with refcount %" PRId64
				   " not merged", r->count);
	}
	if (!error && rc < 0)
		error = rc;
	sqlite3_reset(s);
	return error;
}

static int chk_ag_csum(struct chk *ck, struct chk_ag *a)
{
	int64_t ngrp = ((int64_t)a->len + ORCH_REC_CSUM_GROUP - 1) /
		       ORCH_REC_CSUM_GROUP;
	sqlite3_stmt *s;
	int rc, error;

	error = chk_stmt(ck, ORCH_REC_CSUM_OF_AG, &s);
	if (error)
		return error;
	sqlite3_bind_int64(s, 1, a->ag);
	while ((rc = orch_rec_step(ck->q, ORCH_REC_CSUM_OF_AG)) == 1) {
		struct chk_srec *r;
		int64_t f[8];
		const void *blob;
		int bytes;
		uint64_t tail;
		bool crc_ok;

		orch_rec_read(ORCH_REC_CSUM, s, 0, f);
		blob = sqlite3_column_blob(s, 3);
		bytes = sqlite3_column_bytes(s, 3);
		crc_ok = chk_crc(ck, ORCH_REC_CSUM, "csum", f, blob,
			blob && bytes > 0 ? (size_t)bytes : 0, a->ag,
			f[1] >= 0 && f[1] < ngrp ? f[1] * ORCH_REC_CSUM_GROUP : -1,
			0);
		if (f[1] < 0 || f[1] >= ngrp) {
			orch_check_report(ck, 4, "csum", a->ag, -1, 0,
				   "group %" PRId64 " outside the AG's %" PRId64,
				   f[1], ngrp);
			continue;
		}
		r = chk_vec_push(&a->csum, sizeof(*r));
		if (!r) {
			error = -ENOMEM;
			break;
		}
		r->grp = f[1];
		r->valid = (uint64_t)f[2];
		if (bytes == CHK_SUMS_BYTES && blob) {
			/* A damaged row is no reference for the data check. */
			memcpy(r->sums, blob, CHK_SUMS_BYTES);
			r->sums_ok = crc_ok;
		} else {
			orch_check_report(ck, 4, "csum", a->ag, r->grp * ORCH_REC_CSUM_GROUP,
				   0, "group %" PRId64 ": sums is %d bytes, not %u",
				   r->grp, bytes, CHK_SUMS_BYTES);
		}
		if (!r->valid)
			orch_check_report(ck, 16, "csum", a->ag,
				   r->grp * ORCH_REC_CSUM_GROUP, 0,
				   "group %" PRId64 " has no valid bit but was kept",
				   r->grp);
		/* Bits past the AG's end (its last group may be partial). */
		tail = (uint64_t)a->len - (uint64_t)r->grp * ORCH_REC_CSUM_GROUP;
		if (tail < 64 && (r->valid >> tail))
			orch_check_report(ck, 16, "csum", a->ag,
				   r->grp * ORCH_REC_CSUM_GROUP, 0,
				   "group %" PRId64 " has valid bits past the AG end",
				   r->grp);
	}
	if (!error && rc < 0)
		error = rc;
	sqlite3_reset(s);
	return error;
}

/* I3: the AG's counters against the records just loaded. */
static int chk_ag_stat(struct chk *ck, struct chk_ag *a)
{
	const struct chk_frec *fs = a->fsb.v;
	uint64_t sum = 0, longest = 0;
	sqlite3_stmt *s;
	int64_t f[8];
	int rc;

	for (size_t i = 0; i < a->fsb.n; i++) {
		sum += (uint64_t)fs[i].len;
		if (fs[i].len > 0 && (uint64_t)fs[i].len > longest)
			longest = (uint64_t)fs[i].len;
	}
	rc = chk_stmt(ck, ORCH_REC_AG_GET, &s);
	if (rc)
		return rc;
	sqlite3_bind_int64(s, 1, a->ag);
	rc = orch_rec_step(ck->q, ORCH_REC_AG_GET);
	if (rc == 0) {
		orch_check_report(ck, 3, "agstat", a->ag, -1, 0, "no agstat record");
	} else if (rc == 1) {
		orch_rec_read(ORCH_REC_AGSTAT, s, 0, f);
		orch_rec_reset(ck->q, ORCH_REC_AG_GET);
		chk_crc(ck, ORCH_REC_AGSTAT, "agstat", f, NULL, 0, a->ag, -1, 0);
		if (f[1] != (int64_t)a->len)
			orch_check_report(ck, 3, "agstat", a->ag, -1, 0,
				   "blocks %" PRId64 ", the AG has %" PRIu32,
				   f[1], a->len);
		if ((uint64_t)f[2] != sum)
			orch_check_report(ck, 3, "agstat", a->ag, -1, 0,
				   "freeblks %" PRId64 ", free extents sum to %"
				   PRIu64, f[2], sum);
		if ((uint64_t)f[3] != longest)
			orch_check_report(ck, 3, "agstat", a->ag, -1, 0,
				   "longest %" PRId64 ", longest free extent %"
				   PRIu64, f[3], longest);
		if ((uint64_t)f[4] != a->fsb.n)
			orch_check_report(ck, 3, "agstat", a->ag, -1, 0,
				   "nfree %" PRId64 ", %zu fsb records", f[4],
				   a->fsb.n);
		if ((uint64_t)f[5] != a->rmap.n)
			orch_check_report(ck, 3, "agstat", a->ag, -1, 0,
				   "nrmap %" PRId64 ", %zu rmap records", f[5],
				   a->rmap.n);
		if ((uint64_t)f[6] != a->refc.n)
			orch_check_report(ck, 3, "agstat", a->ag, -1, 0,
				   "nrefc %" PRId64 ", %zu refc records", f[6],
				   a->refc.n);
	}
	return rc < 0 ? rc : 0;
}

static int chk_frec_cmp(const struct chk_frec *x, const struct chk_frec *y)
{
	if (x->agbno != y->agbno)
		return x->agbno < y->agbno ? -1 : 1;
	if (x->len != y->len)
		return x->len < y->len ? -1 : 1;
	return 0;
}

/* I2: fsb and fsc hold the same extents; no two fsb extents adjacent. */
static void chk_ag_free_sets(struct chk *ck, struct chk_ag *a)
{
	const struct chk_frec *b = a->fsb.v, *c = a->fsc.v;
	size_t i = 0, j = 0;

	for (i = 1; i < a->fsb.n; i++)
		if (b[i - 1].end > b[i - 1].start && b[i].end > b[i].start &&
		    b[i - 1].end == b[i].start)
			orch_check_report(ck, 2, "fsb", a->ag, b[i].agbno, 0,
				   "free extents %" PRId64 "+%" PRId64 " and %"
				   PRId64 "+%" PRId64 " are adjacent",
				   b[i - 1].agbno, b[i - 1].len, b[i].agbno,
				   b[i].len);
	i = 0;
	while (i < a->fsb.n || j < a->fsc.n) {
		int d = i == a->fsb.n ? 1 : j == a->fsc.n ? -1 :
			chk_frec_cmp(&b[i], &c[j]);

		if (d < 0) {
			orch_check_report(ck, 2, "fsb", a->ag, b[i].agbno, 0,
				   "free extent %" PRId64 "+%" PRId64
				   " missing from fsc", b[i].agbno, b[i].len);
			i++;
		} else if (d > 0) {
			orch_check_report(ck, 2, "fsc", a->ag, c[j].agbno, 0,
				   "fsc extent %" PRId64 "+%" PRId64
				   " not in fsb", c[j].agbno, c[j].len);
			j++;
		} else {
			i++, j++;
		}
	}
}

static void chk_ag_reset(struct chk_ag *a)
{
	a->rmap.n = a->fsb.n = a->fsc.n = a->refc.n = 0;
	a->csum.n = a->bad.n = a->ev.n = 0;
}

static void chk_ag_fini(struct chk_ag *a)
{
	chk_vec_free(&a->rmap);
	chk_vec_free(&a->fsb);
	chk_vec_free(&a->fsc);
	chk_vec_free(&a->refc);
	chk_vec_free(&a->csum);
	chk_vec_free(&a->bad);
	chk_vec_free(&a->ev);
	free(a->act);
	free(a->apos);
}

static int chk_ag(struct chk *ck, struct chk_ag *a, uint32_t ag)
{
	int error;

	chk_ag_reset(a);
	a->ag = ag;
	a->len = store_ag_len(ck->st, ag);
	error = chk_ag_rmap(ck, a);
	if (!error)
		error = chk_ag_extents(ck, a, false);
	if (!error)
		error = chk_ag_fsc(ck, a);
	if (!error)
		error = chk_ag_refc(ck, a);
	if (!error)
		error = chk_ag_csum(ck, a);
	if (!error)
		error = chk_ag_extents(ck, a, true);
	if (!error)
		error = chk_ag_stat(ck, a);
	if (error)
		return error;
	chk_ag_free_sets(ck, a);
	error = orch_check_sweep(ck, a);
	if (!error && ck->data)
		error = orch_check_data(ck, a);
	return error;
}

/* --- Pass 3: records outside every AG ------------------------------------ */

static int chk_outside(struct chk *ck)
{
	static const struct {
		const char *name;
		enum orch_rec_stmt id;
	} tables[] = {
		{ "agstat", ORCH_REC_AGSTAT_OUTSIDE }, { "rmap", ORCH_REC_RMAP_OUTSIDE },
		{ "fsb", ORCH_REC_FSB_OUTSIDE }, { "fsc", ORCH_REC_FSC_OUTSIDE },
		{ "refc", ORCH_REC_REFC_OUTSIDE }, { "csum", ORCH_REC_CSUM_OUTSIDE },
		{ "bad", ORCH_REC_BAD_OUTSIDE },
	};
	int error = 0;

	for (size_t t = 0; t < ORCH_ARRAY_SIZE(tables) && !error; t++) {
		sqlite3_stmt *s;
		int rc;

		error = chk_stmt(ck, tables[t].id, &s);
		if (error)
			break;
		sqlite3_bind_int64(s, 1, ck->st->st_ag_count);
		while ((rc = orch_rec_step(ck->q, tables[t].id)) == 1)
			orch_check_report(ck, 4, tables[t].name, sqlite3_column_int64(s, 0),
				   -1, 0, "%" PRId64 " records in AG %" PRId64
				   " of %" PRIu32, (int64_t)sqlite3_column_int64(s, 1),
				   (int64_t)sqlite3_column_int64(s, 0),
				   ck->st->st_ag_count);
		if (rc < 0)
			error = rc;
	}
	return error;
}

/* --- Entry point -------------------------------------------------------------- */

long orch_store_check(struct orch_store *st, bool data,
		      orch_store_finding_fn fn, void *arg)
{
	struct chk ck = { .st = st, .fn = fn, .arg = arg, .data = data };
	struct chk_ag a;
	struct store_conn *c;
	int error;

	memset(&a, 0, sizeof(a));
	if (data) {
		ck.buf = malloc((size_t)CHK_READ_RUN * ORCH_STORE_BLOCK);
		if (!ck.buf)
			return -ENOMEM;
	}
	error = orch_snap_get(st, &c);
	if (error) {
		free(ck.buf);
		return error;
	}
	ck.q = &c->c_sq;
	error = chk_smeta(&ck);
	if (!error)
		error = chk_work_load(&ck);
	if (!error)
		error = chk_objects(&ck);
	for (uint32_t ag = 0; !error && ag < st->st_ag_count; ag++)
		error = chk_ag(&ck, &a, ag);
	if (!error)
		error = chk_outside(&ck);
	orch_snap_put(st, c);
	chk_ag_fini(&a);
	chk_vec_free(&ck.work);
	free(ck.buf);
	return error ? error : ck.found;
}
