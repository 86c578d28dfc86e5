/*
 * The checker's sweep of one AG (pass 2 of orch_store_check, check.c): the
 * AG's interval records, loaded by check.c, become start and end events;
 * one pass over the sorted events walks the AG as elementary segments of
 * constant coverage, and each segment is judged once (I1, I6, I11-I14, I16,
 * I18).  Then, with @data, every written data extent's blocks are read and
 * compared with their checksums (I17).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/util.h"
#include "store/check_i.h"

/* --- The sweep -------------------------------------------------------------- */

static int chk_ev_cmp(const void *x, const void *y)
{
	const struct chk_ev *p = x, *q = y;

	return p->pos < q->pos ? -1 : p->pos > q->pos;
}

static int chk_act_add(struct chk_ag *a, uint32_t idx)
{
	if (a->nact == a->act_cap) {
		size_t cap = a->act_cap ? a->act_cap * 2 : 16;
		uint32_t *p = realloc(a->act, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		a->act = p;
		a->act_cap = cap;
	}
	a->apos[idx] = (uint32_t)a->nact;
	a->act[a->nact++] = idx;
	return 0;
}

static void chk_act_del(struct chk_ag *a, uint32_t idx)
{
	uint32_t slot = a->apos[idx];

	a->act[slot] = a->act[--a->nact];
	a->apos[a->act[slot]] = slot;
}

static int chk_ev_apply(struct chk_ag *a, const struct chk_ev *e)
{
	struct chk_cnt *n = &a->cnt;

	switch (e->kind) {
	case EV_RMAP: {
		const struct chk_rrec *r = (const struct chk_rrec *)a->rmap.v +
					   e->idx;

		n->nrmap += e->delta;
		if (r->owner > 0) {
			n->ndata += e->delta;
			if (!(r->flags & ORCH_REC_EXT_UNWRITTEN))
				n->nwritten += e->delta;
		} else {
			n->nspecial += e->delta;
			if (r->owner == ORCH_STORE_OWN_FS)
				n->nfs += e->delta;
			else if (r->owner == ORCH_STORE_OWN_DEFECTIVE)
				n->ndefective += e->delta;
		}
		if (e->delta > 0)
			return chk_act_add(a, e->idx);
		chk_act_del(a, e->idx);
		return 0;
	}
	case EV_FSB:
		n->nfree += e->delta;
		return 0;
	case EV_REFC: {
		const struct chk_crec *r = (const struct chk_crec *)a->refc.v +
					   e->idx;

		n->nrefc += e->delta;
		/* Counts are checked per record; keep the sum bounded. */
		n->refcount += e->delta * (r->count > 0 && r->count < INT32_MAX ?
					   r->count : 0);
		return 0;
	}
	case EV_BAD:
		n->nbad += e->delta;
		return 0;
	}
	return 0;
}

static const char *const chk_i1_what[] = {
	NULL,
	"in more than one free extent",
	"both free and owned",
	"neither free nor owned",
};

/* Reports the I1 run in progress if @kind does not continue it. */
static void chk_i1_run(struct chk *ck, struct chk_ag *a, int kind,
		       uint32_t start, uint32_t end)
{
	if (a->run_kind && (kind != a->run_kind || start != a->run_b)) {
		orch_check_report(ck, 1, a->run_kind == 3 ? "rmap" : "fsb", a->ag,
			   a->run_a, 0, "blocks %" PRIu32 "..%" PRIu32 " %s",
			   a->run_a, a->run_b - 1, chk_i1_what[a->run_kind]);
		a->run_kind = 0;
	}
	if (!kind)
		return;
	if (!a->run_kind) {
		a->run_kind = kind;
		a->run_a = start;
	}
	a->run_b = end;
}

/* I16 over segment [@start, @end): valid bits set iff @written. */
static void chk_seg_csum(struct chk *ck, struct chk_ag *a, uint32_t start,
			 uint32_t end, bool written)
{
	const struct chk_srec *cs = a->csum.v;
	int64_t g0 = start / ORCH_REC_CSUM_GROUP, g1 = (end - 1) / ORCH_REC_CSUM_GROUP;
	int64_t expect = g0, first = -1;
	uint64_t nbad = 0;
	size_t k;

	while (a->ccur < a->csum.n && cs[a->ccur].grp < g0)
		a->ccur++;
	for (k = a->ccur; k < a->csum.n && cs[k].grp <= g1; k++) {
		int64_t base = cs[k].grp * ORCH_REC_CSUM_GROUP;
		uint32_t lo, hi;
		uint64_t mask, bad;

		if (written && cs[k].grp > expect) {
			int64_t from = ORCH_MAX((int64_t)start,
						expect * ORCH_REC_CSUM_GROUP);

			nbad += (uint64_t)(base - from);
			if (first < 0)
				first = from;
		}
		expect = cs[k].grp + 1;
		lo = (uint32_t)(ORCH_MAX((int64_t)start, base) - base);
		hi = (uint32_t)(ORCH_MIN((int64_t)end, base + ORCH_REC_CSUM_GROUP) -
				base);
		mask = (hi == 64 ? ~0ull : (1ull << hi) - 1) & ~((1ull << lo) - 1);
		bad = mask & (written ? ~cs[k].valid : cs[k].valid);
		if (bad) {
			nbad += (uint64_t)__builtin_popcountll(bad);
			if (first < 0)
				first = base + __builtin_ctzll(bad);
		}
	}
	if (written && expect <= g1) {
		int64_t from = ORCH_MAX((int64_t)start, expect * ORCH_REC_CSUM_GROUP);

		nbad += (uint64_t)((int64_t)end - from);
		if (first < 0)
			first = from;
	}
	if (nbad)
		orch_check_report(ck, 16, "csum", a->ag, first, 0,
			   written ? "%" PRIu64 " blocks of a written extent in %"
				     PRIu32 "..%" PRIu32 " have no checksum" :
				     "%" PRIu64 " blocks of %" PRIu32 "..%" PRIu32
				     " have a checksum but no written extent",
			   nbad, start, end - 1);
}

/*
 * I18 over one segment.  A quarantined block keeps the data owners that
 * still map it and is retired (OWN_DEFECTIVE) when the last one lets go:
 * so a bad block is owned by OWN_DEFECTIVE alone or by data owners alone,
 * never free, never OWN_FS; and OWN_DEFECTIVE owns only bad blocks.
 */
static void chk_seg_bad(struct chk *ck, struct chk_ag *a, uint32_t start,
			uint32_t end)
{
	const struct chk_cnt *n = &a->cnt;
	const char *why = NULL;

	if (!n->nbad) {
		if (n->ndefective > 0)
			orch_check_report(ck, 18, "rmap", a->ag, start, 0,
				   "OWN_DEFECTIVE blocks %" PRIu32 "..%" PRIu32
				   " have no bad record", start, end - 1);
		return;
	}
	if (n->nbad > 1)
		why = "are in more than one bad record";
	else if (n->nfree > 0)
		why = "are free";
	else if (n->nfs > 0)
		why = "are owned by OWN_FS";
	else if (n->ndefective > 0 && n->ndata > 0)
		why = "are both retired (OWN_DEFECTIVE) and mapped by data";
	else if (n->ndefective == 0 && n->ndata == 0)
		why = "are neither retired (OWN_DEFECTIVE) nor mapped by data";
	if (why)
		orch_check_report(ck, 18, n->nfree > 0 ? "fsb" : "bad", a->ag, start, 0,
			   "bad blocks %" PRIu32 "..%" PRIu32 " %s", start,
			   end - 1, why);
}

/* Owners covering the segment, for a finding: "5, 9, -1". */
static void chk_owner_list(struct chk_ag *a, char *buf, size_t size)
{
	const struct chk_rrec *r = a->rmap.v;
	size_t used = 0;

	buf[0] = 0;
	for (size_t i = 0; i < a->nact && i < CHK_NAME_OWNERS; i++) {
		int n = snprintf(buf + used, size - used, "%s%" PRId64,
				 i ? ", " : "", r[a->act[i]].owner);

		if (n < 0 || (size_t)n >= size - used)
			return;
		used += (size_t)n;
	}
	if (a->nact > CHK_NAME_OWNERS && used + 5 < size)
		snprintf(buf + used, size - used, ", ...");
}

/* Judges one segment of constant coverage. */
static int chk_segment(struct chk *ck, struct chk_ag *a, uint32_t start,
		       uint32_t end)
{
	const struct chk_cnt *n = &a->cnt;
	const struct chk_rrec *r = a->rmap.v;
	char owners[64];
	int kind = 0, error;

	if (n->nfree > 1)
		kind = 1;
	else if (n->nfree == 1 && n->nrmap > 0)
		kind = 2;
	else if (n->nfree == 0 && n->nrmap == 0)
		kind = 3;
	chk_i1_run(ck, a, kind, start, end);

	if (a->ag == 0 && start == 0 && (n->nfs != 1 || n->nrmap != 1))
		orch_check_report(ck, 6, "rmap", 0, 0, 0,
			   "block 0 has %" PRId64 " OWN_FS and %" PRId64
			   " other owners", n->nfs, n->nrmap - n->nfs);

	if (n->nrefc > 1)
		orch_check_report(ck, 12, "refc", a->ag, start, 0,
			   "blocks %" PRIu32 "..%" PRIu32 " in %" PRId64
			   " refc records", start, end - 1, n->nrefc);
	else if (n->ndata >= 2 && (n->nrefc != 1 || n->refcount != n->ndata))
		orch_check_report(ck, 11, "refc", a->ag, start, 0,
			   "blocks %" PRIu32 "..%" PRIu32 " have %" PRId64
			   " data owners, refcount %" PRId64, start, end - 1,
			   n->ndata, n->nrefc ? n->refcount : 0);
	else if (n->ndata < 2 && n->nrefc)
		orch_check_report(ck, 11, "refc", a->ag, start, 0,
			   "blocks %" PRIu32 "..%" PRIu32 " have %" PRId64
			   " data owners but a refc record", start, end - 1,
			   n->ndata);

	if (n->nspecial > 0 && n->nrmap > 1) {
		chk_owner_list(a, owners, sizeof(owners));
		orch_check_report(ck, 14, "rmap", a->ag, start, 0,
			   "blocks %" PRIu32 "..%" PRIu32
			   " of a special owner shared: owners %s", start,
			   end - 1, owners);
	}
	if (n->ndata >= 2) {
		for (size_t i = 0; i < a->nact; i++) {
			const struct chk_rrec *ri = &r[a->act[i]];

			bool seen = false;

			if (ri->owner <= 0)
				continue;
			/* One finding per owner, even if it maps a block twice. */
			for (size_t j = 0; j < i && j < CHK_NAME_OWNERS * 4; j++)
				seen |= r[a->act[j]].owner == ri->owner;
			if (seen)
				continue;
			error = orch_check_obj_lookup(ck, ri->owner);
			if (error)
				return error;
			if (ck->o_exists && !(ck->o_flags & ORCH_REC_OBJ_REFLINK))
				orch_check_report(ck, 13, "rmap", a->ag, start,
					   ck->o_handle,
					   "object nid %" PRId64 " without "
					   "REFLINK shares blocks %" PRIu32
					   "..%" PRIu32 " (%" PRId64 " owners)",
					   ri->owner, start, end - 1, n->ndata);
		}
	}
	chk_seg_bad(ck, a, start, end);
	chk_seg_csum(ck, a, start, end, n->nwritten > 0);
	return 0;
}

int orch_check_sweep(struct chk *ck, struct chk_ag *a)
{
	const struct chk_rrec *rr = a->rmap.v;
	const struct chk_frec *fs = a->fsb.v, *bd = a->bad.v;
	const struct chk_crec *rc = a->refc.v;
	const struct chk_ev *ev;
	uint32_t pos = 0, next;
	size_t k = 0;
	int error = 0;

	a->ev.n = 0;
	for (size_t i = 0; i < a->rmap.n && !error; i++)
		if (rr[i].end > rr[i].start)
			error = orch_check_ev_add(a, rr[i].start, rr[i].end, EV_RMAP, i);
	for (size_t i = 0; i < a->fsb.n && !error; i++)
		if (fs[i].end > fs[i].start)
			error = orch_check_ev_add(a, fs[i].start, fs[i].end, EV_FSB, i);
	for (size_t i = 0; i < a->refc.n && !error; i++)
		if (rc[i].end > rc[i].start)
			error = orch_check_ev_add(a, rc[i].start, rc[i].end, EV_REFC, i);
	for (size_t i = 0; i < a->bad.n && !error; i++)
		if (bd[i].end > bd[i].start)
			error = orch_check_ev_add(a, bd[i].start, bd[i].end, EV_BAD, i);
	if (error)
		return error;
	free(a->apos);
	a->apos = malloc((a->rmap.n ? a->rmap.n : 1) * sizeof(*a->apos));
	if (!a->apos)
		return -ENOMEM;
	if (a->ev.n)
		qsort(a->ev.v, a->ev.n, sizeof(struct chk_ev), chk_ev_cmp);
	ev = a->ev.v;
	memset(&a->cnt, 0, sizeof(a->cnt));
	a->nact = 0;
	a->ccur = 0;
	a->run_kind = 0;
	while (pos < a->len) {
		while (k < a->ev.n && ev[k].pos == pos) {
			error = chk_ev_apply(a, &ev[k++]);
			if (error)
				return error;
		}
		next = k < a->ev.n && ev[k].pos < a->len ? ev[k].pos : a->len;
		error = chk_segment(ck, a, pos, next);
		if (error)
			return error;
		pos = next;
	}
	chk_i1_run(ck, a, 0, a->len, a->len);
	return 0;
}

/* --- I17: the data ----------------------------------------------------------- */

static const struct chk_srec *chk_csum_find(const struct chk_ag *a, int64_t grp)
{
	const struct chk_srec *cs = a->csum.v;
	size_t lo = 0, hi = a->csum.n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cs[mid].grp < grp)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < a->csum.n && cs[lo].grp == grp ? &cs[lo] : NULL;
}

int orch_check_data(struct chk *ck, struct chk_ag *a)
{
	const struct chk_rrec *rr = a->rmap.v;
	struct orch_store *st = ck->st;
	int error;

	for (size_t i = 0; i < a->rmap.n; i++) {
		const struct chk_rrec *r = &rr[i];
		uint64_t h;

		if (r->owner <= 0 || (r->flags & ORCH_REC_EXT_UNWRITTEN) ||
		    r->end <= r->start)
			continue;
		error = orch_check_obj_lookup(ck, r->owner);
		if (error)
			return error;
		h = ck->o_exists ? ck->o_handle : 0;
		for (uint32_t b = r->start; b < r->end; b += CHK_READ_RUN) {
			uint32_t n = ORCH_MIN(r->end - b, CHK_READ_RUN);
			uint64_t g = store_gblock(st, a->ag, b);

			error = orch_bdev_read(st, g, n, ck->buf);
			if (error) {
				orch_check_report(ck, 17, "data", a->ag, b, h,
					   "read of blocks %" PRIu64 "+%" PRIu32
					   " failed: %s", g, n, strerror(-error));
				continue;
			}
			for (uint32_t j = 0; j < n; j++) {
				uint32_t blk = b + j;
				const struct chk_srec *cs;
				uint32_t bit = blk % ORCH_REC_CSUM_GROUP;
				uint32_t want, got;

				cs = chk_csum_find(a, blk / ORCH_REC_CSUM_GROUP);
				if (!cs || !cs->sums_ok ||
				    !(cs->valid & (1ull << bit)))
					continue;  /* I16 said so */
				want = orch_get_le32(cs->sums + 4 * bit);
				got = orch_crc32c(0, ck->buf +
						  (size_t)j * ORCH_STORE_BLOCK,
						  ORCH_STORE_BLOCK);
				if (got != want)
					orch_check_report(ck, 17, "data", a->ag, blk, h,
						   "object nid %" PRId64
						   " byte offset %" PRIu64
						   ": physical block %" PRIu64
						   " crc32c %08" PRIx32
						   ", csum %08" PRIx32,
						   r->owner,
						   ((uint64_t)r->off + blk -
						    r->start) * ORCH_STORE_BLOCK,
						   g + j, got, want);
			}
		}
	}
	return 0;
}
