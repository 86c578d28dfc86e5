/*
 * Shared blocks: the refcount index, on the writer thread.
 *
 * A block mapped by one owner has no refc record; one mapped by n >= 2
 * owners lies in a refc record of count n.  Records are disjoint, and a run
 * of blocks with one count is one record per maxext-aligned cell of the AG
 * it spans (I12).  Every change goes through refc_adjust(): it loads
 * the records touching the range (a bounded window, because none is longer
 * than maxext), recomputes the counts block run by block run, and writes the
 * window back in canonical form.  A run whose count drops to zero is freed;
 * one dropping to one loses its record.  That is XFS's refcount update
 * without the deferred-operation log: our whole update is one SQLite
 * transaction (docs/DESIGN.md, "The extent store: a reverse map").
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/util.h"
#include "store/writer_i.h"

struct refc_run {
	uint32_t start, end;
	int64_t count;
};

struct refc_vec {
	struct refc_run *v;
	size_t n, cap;
};

/* Appends a run; with @merge, extends the last one instead when it can. */
static int run_push(struct refc_vec *rv, uint32_t start, uint32_t end, int64_t count,
		    bool merge)
{
	struct refc_run *last = rv->n ? &rv->v[rv->n - 1] : NULL;

	if (start >= end)
		return 0;
	if (merge && last && last->end == start && last->count == count) {
		last->end = end;
		return 0;
	}
	if (rv->n == rv->cap) {
		size_t cap = rv->cap ? rv->cap * 2 : 16;
		struct refc_run *p = realloc(rv->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		rv->v = p;
		rv->cap = cap;
	}
	rv->v[rv->n++] = (struct refc_run){ start, end, count };
	return 0;
}

/* The records of AG @ag overlapping or touching [start, end), in order. */
static int refc_window(struct store_writer *w, uint32_t ag, uint32_t start, uint32_t end,
		       struct refc_vec *old)
{
	int64_t lo = (int64_t)start - w->w_st->st_maxext;
	sqlite3_stmt *s = orch_writer_bind(w, ORCH_REC_REFC_WIN, W_ARGS(ag, lo, end));
	struct orch_refc_irec r;
	int rc, error = 0;

	while ((rc = orch_rec_step(&w->w_sq, ORCH_REC_REFC_WIN)) == 1) {
		int64_t b, l, c;

		/* Checked here as the writer needs it, not by the verifier's failure. */
		(void)orch_rec_refc_from_disk(NULL, s, 0, &r);
		b = r.agbno;
		l = r.len;
		c = (int64_t)r.refcount;

		if (b + l < start)
			continue;
		if (l < 1 || b + l > w->w_st->st_ag_blocks || c < 2 ||
		    (old->n && old->v[old->n - 1].end > b)) {
			error = -ORCH_ECORRUPT;   /* never guess at counts */
			break;
		}
		error = run_push(old, (uint32_t)b, (uint32_t)(b + l), c, false);
		if (error)
			break;
	}
	if (!error && rc < 0)
		error = rc;
	sqlite3_reset(s);
	return error;
}

/*
 * The counts of the window after adding @delta over [start, end): blocks
 * of the range without a record count 1; outside the range nothing
 * changes.  Equal neighbours come out merged.
 */
static int refc_recount(const struct refc_vec *old, uint32_t start, uint32_t end, int delta,
			struct refc_vec *out)
{
	uint32_t pos = old->n ? ORCH_MIN(start, old->v[0].start) : start;
	uint32_t hi = old->n ? ORCH_MAX(end, old->v[old->n - 1].end) : end;
	size_t i = 0;
	int error = 0;

	while (!error && pos < hi) {
		const struct refc_run *r = i < old->n ? &old->v[i] : NULL;
		bool in_rec = r && r->start <= pos;
		bool in_range = pos >= start && pos < end;
		uint32_t next = in_rec ? r->end : (r ? r->start : hi);
		int64_t count = in_rec ? r->count : 1;

		/* Cut at the range's edges too. */
		if (pos < start)
			next = ORCH_MIN(next, start);
		else if (pos < end)
			next = ORCH_MIN(next, end);
		if (in_range)
			count += delta;
		error = run_push(out, pos, next, count, true);
		pos = next;
		if (r && pos >= r->end)
			i++;
	}
	return error;
}

/*
 * Replaces the window's records with @runs' counts >= 2, cut at multiples
 * of maxext: the one canonical form (I12), and a local one, so that the
 * records next to the window never need to change.
 */
static int refc_rewrite(struct store_writer *w, uint32_t ag, const struct refc_vec *old,
			const struct refc_vec *runs)
{
	struct w_agdelta *d = orch_alloc_agd(w, ag);
	int error = 0;

	if (!d)
		return -ENOMEM;
	for (size_t i = 0; !error && i < old->n; i++) {
		error = orch_writer_exec(w, ORCH_REC_REFC_DEL, W_ARGS(ag, old->v[i].start));
		d->nrefc--;
	}
	for (size_t i = 0; !error && i < runs->n; i++) {
		const struct refc_run *r = &runs->v[i];

		if (r->count < 2)
			continue;
		for (uint32_t b = r->start; !error && b < r->end;) {
			uint32_t m = w->w_st->st_maxext, l = ORCH_MIN(r->end - b, m - b % m);
			struct orch_refc_irec rec = { ag, b, l, (uint64_t)r->count };

			orch_rec_refc_bind(orch_writer_stmt(w, ORCH_REC_REFC_INS), &rec);
			error = orch_rec_exec(&w->w_sq, ORCH_REC_REFC_INS);
			d->nrefc++;
			b += l;
		}
	}
	return error;
}

/*
 * Adds @delta (+1 or -1) to the owner count of AG blocks [agbno, agbno +
 * len); with -1, blocks left without owners are freed.
 */
static int refc_adjust(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len,
		       int delta)
{
	struct refc_vec old = { 0 }, runs = { 0 };
	int error = refc_window(w, ag, agbno, agbno + len, &old);

	if (!error)
		error = refc_recount(&old, agbno, agbno + len, delta, &runs);
	if (!error)
		error = refc_rewrite(w, ag, &old, &runs);
	for (size_t i = 0; !error && i < runs.n; i++)
		if (runs.v[i].count == 0)
			error = orch_alloc_free(w, ag, runs.v[i].start,
						runs.v[i].end - runs.v[i].start);
	free(old.v);
	free(runs.v);
	return error;
}

int orch_refc_release(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	/* Nothing was ever shared: the blocks have one owner, the caller. */
	if (!w->w_nrefc)
		return orch_alloc_free(w, ag, agbno, len);
	return refc_adjust(w, ag, agbno, len, -1);
}

int orch_refc_share(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	/* Set before any record exists; only reopening lowers it (see writer_i.h). */
	w->w_nrefc++;
	return refc_adjust(w, ag, agbno, len, +1);
}
