/*
 * Offline repair: rebuilds one index of a stopped store from the others
 * (contract in repair.h, design and rules in docs/SPEC-store.md,
 * "Repair").
 *
 * The store is not opened with orch_store_open, which would start the
 * writer and resume work items on indexes we are about to distrust: we
 * take the store lock ourselves, open store.db with the store's helpers,
 * read the geometry (smeta checked against the superblock) and do the
 * rebuild in one transaction on that connection.  Every rebuilt table is
 * computed in memory from CRC-checked source rows, compared row by row with
 * what is there (the difference is logged), then written whole.  The table
 * rows are held as int64 arrays in column order; since every table's key is
 * its leading columns, sorting the arrays sorts by key.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/util.h"
#include "store/repair.h"
#include "store/store_i.h"

/* Lines of one kind (dropped, added, other) logged per run. */
#define RP_LOG_MAX 20
/* Blocks per read when a rebuilt extent is verified. */
#define RP_READ_RUN 256u
/* Most columns of a rebuilt table (agstat: 7), plus the crc. */
#define RP_MAXCOL 8

/* --- Tables as rows of integers ------------------------------------------ */

/*
 * A table, its statements (store_ondisk.h) and, for the log, its columns.
 * @ins and @clear are 0 (BEGIN) for tables never rebuilt.
 */
struct rp_tab {
	const char *name;
	enum orch_rec_tbl tbl;
	int ncol;               /* columns before crc */
	const char *cols;       /* in table (and key) order */
	enum orch_rec_stmt all, ins, clear;
};

static const struct rp_tab rp_bmap = { "bmap", ORCH_REC_BMAP, 6,
	"nid, off, ag, agbno, len, flags", ORCH_REC_BMAP_ALL, ORCH_REC_BMAP_INS,
	ORCH_REC_BMAP_CLEAR };
static const struct rp_tab rp_rmap = { "rmap", ORCH_REC_RMAP, 6,
	"ag, agbno, owner, off, len, flags", ORCH_REC_RMAP_ALL, ORCH_REC_RMAP_INS,
	ORCH_REC_RMAP_CLEAR };
static const struct rp_tab rp_fsb = { "fsb", ORCH_REC_FSB, 3,
	"ag, agbno, len", ORCH_REC_FSB_ALL, ORCH_REC_FSB_INS, ORCH_REC_FSB_CLEAR };
static const struct rp_tab rp_fsc = { "fsc", ORCH_REC_FSC, 3,
	"ag, len, agbno", ORCH_REC_FSC_ALL, ORCH_REC_FSC_INS, ORCH_REC_FSC_CLEAR };
static const struct rp_tab rp_refc = { "refc", ORCH_REC_REFC, 4,
	"ag, agbno, len, refcount", ORCH_REC_REFC_ALL, ORCH_REC_REFC_INS,
	ORCH_REC_REFC_CLEAR };
static const struct rp_tab rp_agstat = { "agstat", ORCH_REC_AGSTAT, 7,
	"ag, blocks, freeblks, longest, nfree, nrmap, nrefc", ORCH_REC_AG_ALL,
	ORCH_REC_AG_INS, ORCH_REC_AG_CLEAR };
static const struct rp_tab rp_bad = { "bad", ORCH_REC_BAD, 5,
	"ag, agbno, len, first_seen, source", ORCH_REC_BAD_ALL, 0, 0 };
static const struct rp_tab rp_obj = { "obj", ORCH_REC_OBJ, 6,
	"nid, handle, size, flags, nextents, nblocks", ORCH_REC_OBJ_ALL, 0, 0 };

/* One row: f[0..ncol-1] the columns, f[ncol] the crc. */
struct rp_row {
	int64_t f[RP_MAXCOL];
};

struct rp_vec {
	struct rp_row *v;
	size_t n, cap;
};

struct rp {
	struct orch_store *st;  /* geometry, dir and blocks fd only */
	sqlite3 *db;
	struct orch_rec_sq q;   /* its statements */
	const struct orch_store_repair_opts *o;
	struct orch_store_repair_result *res;
	unsigned nlog[3];       /* lines logged: dropped, added, other */
};

enum { LOG_DROP, LOG_ADD, LOG_OTHER };

static void rp_log(struct rp *rp, int kind, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void rp_log(struct rp *rp, int kind, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!rp->o->log || rp->nlog[kind]++ > RP_LOG_MAX)
		return;
	if (rp->nlog[kind] > RP_LOG_MAX) {
		rp->o->log(rp->o->arg, kind == LOG_DROP ? "more records dropped" :
			   kind == LOG_ADD ? "more records added" :
			   "more messages suppressed");
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	rp->o->log(rp->o->arg, msg);
}

static struct rp_row *rp_push(struct rp_vec *vec)
{
	if (vec->n == vec->cap) {
		size_t cap = vec->cap ? vec->cap * 2 : 256;
		struct rp_row *p = realloc(vec->v, cap * sizeof(*p));

		if (!p)
			return NULL;
		vec->v = p;
		vec->cap = cap;
	}
	memset(&vec->v[vec->n], 0, sizeof(vec->v[0]));
	return &vec->v[vec->n++];
}

static void rp_vec_free(struct rp_vec *vec)
{
	free(vec->v);
	vec->v = NULL;
	vec->n = vec->cap = 0;
}

/* Appends a row of @tab made of @f, with its crc. */
static int rp_add(struct rp_vec *vec, const struct rp_tab *tab,
		  const int64_t *f)
{
	struct rp_row *r = rp_push(vec);

	if (!r)
		return -ENOMEM;
	memcpy(r->f, f, (size_t)tab->ncol * sizeof(int64_t));
	orch_rec_seal(tab->tbl, r->f);
	return 0;
}

static bool rp_crc_ok(const struct rp_tab *tab, const struct rp_row *r)
{
	uint32_t crc;

	return orch_rec_crc_ok(tab->tbl, r->f, NULL, 0, &crc);
}

/* Lexicographic over all columns and the crc (qsort needs one width). */
static int rp_cmp_all(const void *x, const void *y)
{
	const struct rp_row *a = x, *b = y;

	for (int i = 0; i < RP_MAXCOL; i++)
		if (a->f[i] != b->f[i])
			return a->f[i] < b->f[i] ? -1 : 1;
	return 0;
}

/* Every row of @tab that statement @id selects (@tab's all: every one), in key order. */
static int rp_load(struct rp *rp, const struct rp_tab *tab, enum orch_rec_stmt id,
		   struct rp_vec *out)
{
	sqlite3_stmt *s;
	int rc = orch_rec_stmt(&rp->q, id, &s);

	out->n = 0;
	if (rc)
		return rc;
	while ((rc = orch_rec_step(&rp->q, id)) == 1) {
		struct rp_row *r = rp_push(out);

		if (!r) {
			orch_rec_reset(&rp->q, id);
			return -ENOMEM;
		}
		orch_rec_read(tab->tbl, s, 0, r->f);
	}
	return rc;
}

static void rp_row_str(const struct rp_tab *tab, const struct rp_row *r,
		       char *buf, size_t size)
{
	size_t used = 0;

	buf[0] = 0;
	for (int i = 0; i < tab->ncol && used < size; i++) {
		int n = snprintf(buf + used, size - used, "%s%" PRId64,
				 i ? " " : "", r->f[i]);

		if (n < 0)
			return;
		used += (size_t)n;
	}
}

/*
 * Compares the rows there (@old) with the rebuilt ones (@new), both sorted
 * by rp_cmp_all; counts and logs the difference.
 */
static void rp_diff(struct rp *rp, const struct rp_tab *tab,
		    const struct rp_vec *old, const struct rp_vec *new)
{
	size_t i = 0, j = 0;
	char row[160];

	while (i < old->n || j < new->n) {
		int d = i == old->n ? 1 : j == new->n ? -1 :
			rp_cmp_all(&old->v[i], &new->v[j]);

		if (d < 0) {
			rp_row_str(tab, &old->v[i], row, sizeof(row));
			rp_log(rp, LOG_DROP, "%s: dropped (%s)%s: %s", tab->name,
			       tab->cols, rp_crc_ok(tab, &old->v[i]) ? "" :
			       " with a bad crc", row);
			rp->res->dropped++;
			i++;
		} else if (d > 0) {
			rp_row_str(tab, &new->v[j], row, sizeof(row));
			rp_log(rp, LOG_ADD, "%s: added (%s): %s", tab->name,
			       tab->cols, row);
			rp->res->added++;
			j++;
		} else {
			i++, j++;
		}
	}
}

/* Replaces every row of @tab with @rows. */
static int rp_replace(struct rp *rp, const struct rp_tab *tab,
		      const struct rp_vec *rows)
{
	sqlite3_stmt *s;
	int rc = orch_rec_stmt(&rp->q, tab->clear, &s);

	if (!rc)
		rc = orch_rec_exec(&rp->q, tab->clear);
	if (!rc)
		rc = orch_rec_stmt(&rp->q, tab->ins, &s);
	if (rc)
		return rc;
	/* Stepped here: a key collision is the rebuild's finding, not an error. */
	rc = SQLITE_OK;
	for (size_t k = 0; k < rows->n && rc == SQLITE_OK; k++) {
		for (int i = 0; i <= tab->ncol; i++)
			sqlite3_bind_int64(s, i + 1, rows->v[k].f[i]);
		rc = sqlite3_step(s);
		sqlite3_reset(s);
		rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
	}
	if ((rc & 0xff) == SQLITE_CONSTRAINT) {
		rp_log(rp, LOG_OTHER, "%s: the rebuilt records collide "
		       "(overlapping sources?)", tab->name);
		return -ORCH_ECORRUPT;
	}
	return rc == SQLITE_OK ? 0 : orch_rec_sql_err(rp->db, rc, "repair insert");
}

/* Sorts @new, diffs it against the table and writes it. */
static int rp_install(struct rp *rp, const struct rp_tab *tab,
		      struct rp_vec *new, bool count)
{
	struct rp_vec old = { 0 };
	int error;

	if (new->n)
		qsort(new->v, new->n, sizeof(new->v[0]), rp_cmp_all);
	error = rp_load(rp, tab, tab->all, &old);
	if (error)
		return error;
	if (old.n)
		qsort(old.v, old.n, sizeof(old.v[0]), rp_cmp_all);
	if (count) {
		rp->res->before += old.n;
		rp->res->after += new->n;
		rp_diff(rp, tab, &old, new);
	}
	rp_vec_free(&old);
	return rp_replace(rp, tab, new);
}

/* --- Source checks ---------------------------------------------------------- */

/* [agbno, agbno + len) lies inside AG @ag, len 1..@cap (0: no cap). */
static bool rp_in_ag(const struct rp *rp, int64_t ag, int64_t agbno,
		     int64_t len, int64_t cap)
{
	int64_t alen;

	if (ag < 0 || ag >= (int64_t)rp->st->st_ag_count)
		return false;
	alen = store_ag_len(rp->st, (uint32_t)ag);
	return agbno >= 0 && agbno < alen && len >= 1 && len <= alen - agbno &&
	       (!cap || len <= cap);
}

/* One integer from statement @id with ?1 = @ag. */
static int rp_int(struct rp *rp, enum orch_rec_stmt id, int64_t ag, int64_t *out)
{
	sqlite3_stmt *s;
	int rc = orch_rec_stmt(&rp->q, id, &s);

	*out = 0;
	if (rc)
		return rc;
	if (sqlite3_bind_parameter_count(s) >= 1)
		sqlite3_bind_int64(s, 1, ag);
	rc = orch_rec_step(&rp->q, id);
	if (rc == 1) {
		*out = sqlite3_column_int64(s, 0);
		orch_rec_reset(&rp->q, id);
	}
	return rc < 0 ? rc : rc ? 0 : -EIO;
}

/*
 * Every extent map record has its reverse-map record (I8): a missing one
 * looks like free space, or a count too low, to a rebuild from rmap, which
 * would then hand out (or later free) blocks a file still maps.
 */
static int rp_rmap_covers_bmap(struct rp *rp)
{
	int64_t missing = 0;
	int error = rp_int(rp, ORCH_REC_BMAP_NO_RMAP_COUNT, 0, &missing);

	if (!error && missing) {
		rp_log(rp, LOG_OTHER, "refused: %" PRId64 " extent map records have no reverse-map "
		       "record; rebuild rmap first", missing);
		error = -ORCH_ECORRUPT;
	}
	return error;
}

/*
 * rmap rows as the source of free space and refcounts: every row must have
 * a good crc and a sane extent, and cover the extent maps, else the rebuild
 * refuses.
 */
static int rp_rmap_source(struct rp *rp, struct rp_vec *rm)
{
	char row[160];
	int error = rp_rmap_covers_bmap(rp);

	if (!error)
		error = rp_load(rp, &rp_rmap, rp_rmap.all, rm);

	if (error)
		return error;
	for (size_t k = 0; k < rm->n; k++) {
		const struct rp_row *r = &rm->v[k];
		const char *why = NULL;

		if (!rp_crc_ok(&rp_rmap, r))
			why = "fails its crc";
		else if (!rp_in_ag(rp, r->f[0], r->f[1], r->f[4],
				   rp->st->st_maxext))
			why = "is out of range";
		if (!why)
			continue;
		rp_row_str(&rp_rmap, r, row, sizeof(row));
		rp_log(rp, LOG_OTHER, "refused: rmap record (%s) %s: %s; "
		       "rebuild rmap first", rp_rmap.cols, why, row);
		error = -ORCH_ECORRUPT;
	}
	return error;
}

/* --- agstat -------------------------------------------------------------------- */

/* Recomputes every AG's counters from the tables as they are now. */
static int rp_agstat_rebuild(struct rp *rp)
{
	static const enum orch_rec_stmt q[] = {
		ORCH_REC_FSB_SUM_OF_AG, ORCH_REC_FSB_MAX_OF_AG, ORCH_REC_FSB_COUNT_OF_AG,
		ORCH_REC_RMAP_COUNT_OF_AG, ORCH_REC_REFC_COUNT_OF_AG,
	};
	struct rp_vec new = { 0 };
	int error = 0;

	for (uint32_t ag = 0; ag < rp->st->st_ag_count && !error; ag++) {
		int64_t f[7] = { ag, store_ag_len(rp->st, ag) };

		for (size_t i = 0; i < ORCH_ARRAY_SIZE(q) && !error; i++)
			error = rp_int(rp, q[i], ag, &f[2 + i]);
		if (!error)
			error = rp_add(&new, &rp_agstat, f);
	}
	if (!error)
		error = rp_install(rp, &rp_agstat, &new, false);
	rp->res->agstat = !error;
	rp_vec_free(&new);
	return error;
}

/* --- rmap from bmap ----------------------------------------------------------- */

/* Emits [a, b) of AG @ag as records of @owner, cut at maxext. */
static int rp_add_special(struct rp *rp, struct rp_vec *out, int64_t ag,
			  int64_t a, int64_t b, int64_t owner)
{
	int error = 0;

	while (a < b && !error) {
		int64_t n = ORCH_MIN(b - a, (int64_t)rp->st->st_maxext);
		int64_t f[6] = { ag, a, owner, 0, n, 0 };

		error = rp_add(out, &rp_rmap, f);
		a += n;
	}
	return error;
}

/* First data row of @d (sorted, data only) at or after (ag, agbno). */
static size_t rp_lower(const struct rp_vec *d, int64_t ag, int64_t agbno)
{
	size_t lo = 0, hi = d->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const int64_t *f = d->v[mid].f;

		if (f[0] < ag || (f[0] == ag && f[1] < agbno))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * OWN_DEFECTIVE records for the blocks of each bad record that no data
 * extent maps (a bad block still mapped stays with its data owners).
 */
static int rp_defective(struct rp *rp, const struct rp_vec *data,
			struct rp_vec *out)
{
	const struct rp_tab *bad = &rp_bad;
	struct rp_vec b = { 0 };
	int64_t maxext = rp->st->st_maxext;
	int error = rp_load(rp, bad, bad->all, &b);
	char row[160];

	for (size_t k = 0; k < b.n && !error; k++) {
		const int64_t *f = b.v[k].f;
		int64_t pos = f[1], end = f[1] + f[2];
		bool overlap = k > 0 && b.v[k - 1].f[0] == f[0] &&
			       b.v[k - 1].f[1] + b.v[k - 1].f[2] > f[1];

		if (!rp_crc_ok(bad, &b.v[k]) || !rp_in_ag(rp, f[0], f[1], f[2], 0) ||
		    overlap) {
			rp_row_str(bad, &b.v[k], row, sizeof(row));
			rp_log(rp, LOG_OTHER, "refused: bad record (%s) fails its "
			       "crc, is out of range or overlaps: %s", bad->cols, row);
			error = -ORCH_ECORRUPT;
			break;
		}
		for (size_t i = rp_lower(data, f[0], ORCH_MAX(f[1] - maxext, 0));
		     i < data->n && data->v[i].f[0] == f[0] &&
		     data->v[i].f[1] < end && !error; i++) {
			const int64_t *d = data->v[i].f;

			if (d[1] + d[4] <= pos)
				continue;
			if (d[1] > pos)
				error = rp_add_special(rp, out, f[0], pos, d[1],
						       ORCH_STORE_OWN_DEFECTIVE);
			pos = ORCH_MAX(pos, d[1] + d[4]);
		}
		if (!error && pos < end)
			error = rp_add_special(rp, out, f[0], pos, end,
					       ORCH_STORE_OWN_DEFECTIVE);
	}
	rp_vec_free(&b);
	return error;
}

static int rp_rebuild_rmap(struct rp *rp)
{
	struct rp_vec bm = { 0 }, new = { 0 }, def = { 0 };
	char row[160];
	int error = rp_load(rp, &rp_bmap, rp_bmap.all, &bm);

	rp->res->table = "rmap";
	for (size_t k = 0; k < bm.n && !error; k++) {
		const int64_t *f = bm.v[k].f;   /* nid, off, ag, agbno, len, flags */
		int64_t r[6] = { f[2], f[3], f[0], f[1], f[4], f[5] };

		if (!rp_crc_ok(&rp_bmap, &bm.v[k]) || f[0] < 1 || f[1] < 0 ||
		    !rp_in_ag(rp, f[2], f[3], f[4], rp->st->st_maxext)) {
			rp_row_str(&rp_bmap, &bm.v[k], row, sizeof(row));
			rp_log(rp, LOG_OTHER, "refused: bmap record (%s) fails its "
			       "crc or is out of range: %s; rebuild bmap first",
			       rp_bmap.cols, row);
			error = -ORCH_ECORRUPT;
			continue;
		}
		error = rp_add(&new, &rp_rmap, r);
	}
	if (!error) {
		int64_t fs[6] = { 0, 0, ORCH_STORE_OWN_FS, 0, 1, 0 };

		if (new.n)
			qsort(new.v, new.n, sizeof(new.v[0]), rp_cmp_all);
		error = rp_defective(rp, &new, &def);
		for (size_t k = 0; k < def.n && !error; k++)
			error = rp_push(&new) ? 0 : -ENOMEM;
		if (!error && def.n)
			memcpy(&new.v[new.n - def.n], def.v, def.n * sizeof(def.v[0]));
		if (!error)
			error = rp_add(&new, &rp_rmap, fs);
	}
	if (!error)
		error = rp_install(rp, &rp_rmap, &new, true);
	if (!error)
		error = rp_agstat_rebuild(rp);
	rp_vec_free(&bm);
	rp_vec_free(&new);
	rp_vec_free(&def);
	return error;
}

/* --- Free space from rmap --------------------------------------------------- */

static int rp_add_free(struct rp_vec *fsb, struct rp_vec *fsc, int64_t ag,
		       int64_t a, int64_t b)
{
	int64_t f[3] = { ag, a, b - a }, c[3] = { ag, b - a, a };
	int error = rp_add(fsb, &rp_fsb, f);

	return error ? error : rp_add(fsc, &rp_fsc, c);
}

static int rp_rebuild_free(struct rp *rp)
{
	struct rp_vec rm = { 0 }, fsb = { 0 }, fsc = { 0 };
	size_t k = 0;
	int error = rp_rmap_source(rp, &rm);

	rp->res->table = "fsb+fsc";
	/* The complement of the union of rmap extents, AG by AG: maximal. */
	for (uint32_t ag = 0; ag < rp->st->st_ag_count && !error; ag++) {
		int64_t pos = 0, alen = store_ag_len(rp->st, ag);

		for (; k < rm.n && rm.v[k].f[0] == ag && !error; k++) {
			if (rm.v[k].f[1] > pos)
				error = rp_add_free(&fsb, &fsc, ag, pos, rm.v[k].f[1]);
			pos = ORCH_MAX(pos, rm.v[k].f[1] + rm.v[k].f[4]);
		}
		if (!error && pos < alen)
			error = rp_add_free(&fsb, &fsc, ag, pos, alen);
	}
	if (!error)
		error = rp_install(rp, &rp_fsb, &fsb, true);
	if (!error)
		error = rp_install(rp, &rp_fsc, &fsc, true);
	if (!error)
		error = rp_agstat_rebuild(rp);
	rp_vec_free(&rm);
	rp_vec_free(&fsb);
	rp_vec_free(&fsc);
	return error;
}

/* --- Refcounts from rmap ---------------------------------------------------- */

struct rp_ev {
	int64_t pos, delta;
};

static int rp_ev_cmp(const void *x, const void *y)
{
	const struct rp_ev *a = x, *b = y;

	return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/*
 * Emits the refcount run [a, b) of @count, cut at the multiples of maxext
 * (AG blocks) and nowhere else: the canonical form (SPEC-store.md, I12).
 */
static int rp_add_refc(struct rp *rp, struct rp_vec *out, int64_t ag,
		       int64_t a, int64_t b, int64_t count)
{
	int64_t maxext = rp->st->st_maxext;
	int error = 0;

	while (a < b && !error) {
		int64_t n = ORCH_MIN(b, (a / maxext + 1) * maxext) - a;
		int64_t f[4] = { ag, a, n, count };

		error = rp_add(out, &rp_refc, f);
		a += n;
	}
	return error;
}

/*
 * One AG's data-owner rmap records rm[k0, k1) swept in block order: where
 * two or more cover a block, that is its refcount; runs of equal counts
 * become one record (then cut at the multiples of maxext).
 */
static int rp_refc_ag(struct rp *rp, const struct rp_vec *rm, size_t k0,
		      size_t k1, struct rp_vec *out)
{
	struct rp_ev *ev = malloc(2 * (k1 - k0 + 1) * sizeof(*ev));
	int64_t count = 0, run_a = 0, run_count = 0, ag;
	size_t n = 0;
	int error = 0;

	if (!ev)
		return -ENOMEM;
	ag = k0 < k1 ? rm->v[k0].f[0] : 0;
	for (size_t k = k0; k < k1; k++) {
		if (rm->v[k].f[2] <= 0)
			continue;
		ev[n++] = (struct rp_ev){ rm->v[k].f[1], 1 };
		ev[n++] = (struct rp_ev){ rm->v[k].f[1] + rm->v[k].f[4], -1 };
	}
	qsort(ev, n, sizeof(*ev), rp_ev_cmp);
	for (size_t i = 0; i < n && !error;) {
		int64_t pos = ev[i].pos;

		while (i < n && ev[i].pos == pos)
			count += ev[i++].delta;
		/* A run ends where the count changes. */
		if (count != run_count) {
			if (run_count >= 2)
				error = rp_add_refc(rp, out, ag, run_a, pos,
						    run_count);
			run_a = pos;
			run_count = count;
		}
	}
	free(ev);
	return error;
}

static int rp_rebuild_refc(struct rp *rp)
{
	struct rp_vec rm = { 0 }, new = { 0 };
	int error = rp_rmap_source(rp, &rm);
	size_t k = 0;

	rp->res->table = "refc";
	while (k < rm.n && !error) {
		size_t k1 = k;

		while (k1 < rm.n && rm.v[k1].f[0] == rm.v[k].f[0])
			k1++;
		error = rp_refc_ag(rp, &rm, k, k1, &new);
		k = k1;
	}
	if (!error)
		error = rp_install(rp, &rp_refc, &new, true);
	if (!error)
		error = rp_agstat_rebuild(rp);
	rp_vec_free(&rm);
	rp_vec_free(&new);
	return error;
}

/* --- bmap from rmap ------------------------------------------------------------- */

/* The csum row being consulted while rebuilt extents are verified. */
struct rp_sums {
	struct orch_rec_sq *q;  /* the repair's statements */
	int64_t grp;            /* cached row: cs.ag, grp; -1: none */
	struct orch_csum_irec cs;   /* valid 0: no row, or a damaged one */
};

static int rp_sums_load(struct rp_sums *cs, uint32_t ag, int64_t grp)
{
	int rc;

	if (cs->grp == grp && cs->cs.ag == ag)
		return 0;
	cs->grp = grp;
	rc = orch_rec_csum_get(cs->q, ag, grp, &cs->cs);
	return rc < 0 ? rc : 0;
}

/*
 * Reads the blocks of rebuilt extent @f (nid, off, ag, agbno, len, flags)
 * and compares each with its checksum: the rmap says where the object's
 * data is; the data says whether that is believable.
 */
static int rp_verify(struct rp *rp, struct rp_sums *cs, const int64_t *f,
		     uint64_t h, uint8_t *buf)
{
	for (int64_t b = 0; b < f[4]; b += RP_READ_RUN) {
		uint32_t n = (uint32_t)ORCH_MIN(f[4] - b, (int64_t)RP_READ_RUN);
		uint64_t g = store_gblock(rp->st, (uint32_t)f[2], (uint32_t)(f[3] + b));
		int error = orch_bdev_read(rp->st, g, n, buf);

		if (error)
			return error;
		for (uint32_t j = 0; j < n; j++) {
			int64_t blk = f[3] + b + j;
			uint32_t bit = (uint32_t)(blk % ORCH_REC_CSUM_GROUP);
			uint32_t want, got;

			error = rp_sums_load(cs, (uint32_t)f[2], blk / ORCH_REC_CSUM_GROUP);
			if (error)
				return error;
			if (!(cs->cs.valid & (1ull << bit)))
				continue;       /* nothing to compare with */
			want = cs->cs.sums[bit];
			got = orch_crc32c(0, buf + (size_t)j * ORCH_STORE_BLOCK,
					  ORCH_STORE_BLOCK);
			if (got == want)
				continue;
			rp->res->csum_bad++;
			rp_log(rp, LOG_OTHER, "checksum mismatch: object %#" PRIx64
			       " (nid %" PRId64 ") byte offset %" PRId64
			       ": physical block %" PRIu64 " crc32c %08" PRIx32
			       ", csum %08" PRIx32, h, f[0],
			       (f[1] + b + j) * (int64_t)ORCH_STORE_BLOCK,
			       g + j, got, want);
		}
	}
	return 0;
}

/* Data-owner rmap rows as bmap rows, sorted by (nid, off); bad ones skipped. */
static int rp_bmap_source(struct rp *rp, struct rp_vec *out)
{
	struct rp_vec rm = { 0 };
	char row[160];
	int error = rp_load(rp, &rp_rmap, ORCH_REC_RMAP_DATA_ALL, &rm);

	for (size_t k = 0; k < rm.n && !error; k++) {
		const int64_t *r = rm.v[k].f;   /* ag, agbno, owner, off, len, flags */
		int64_t f[6] = { r[2], r[3], r[0], r[1], r[4], r[5] };

		if (!rp_crc_ok(&rp_rmap, &rm.v[k]) || r[3] < 0 ||
		    !rp_in_ag(rp, r[0], r[1], r[4], rp->st->st_maxext)) {
			rp_row_str(&rp_rmap, &rm.v[k], row, sizeof(row));
			rp_log(rp, LOG_OTHER, "skipped: rmap record (%s) fails its "
			       "crc or is out of range, left in place: %s",
			       rp_rmap.cols, row);
			rp->res->skipped++;
			continue;
		}
		error = rp_add(out, &rp_bmap, f);
	}
	rp_vec_free(&rm);
	if (!error && out->n)
		qsort(out->v, out->n, sizeof(out->v[0]), rp_cmp_all);
	return error;
}

/* Sets obj @o's nextents and nblocks (its crc is known good). */
static int rp_obj_set(struct rp *rp, const int64_t *o, int64_t n, int64_t sum)
{
	int64_t f[8] = { o[0], o[1], o[2], o[3], n, sum };
	sqlite3_stmt *u;
	int rc;

	if (o[4] == n && o[5] == sum)
		return 0;
	rp_log(rp, LOG_OTHER, "obj nid %" PRId64 ": nextents %" PRId64 " -> %"
	       PRId64 ", nblocks %" PRId64 " -> %" PRId64, o[0], o[4], n,
	       o[5], sum);
	orch_rec_seal(ORCH_REC_OBJ, f);
	rc = orch_rec_stmt(&rp->q, ORCH_REC_OBJ_UPD, &u);
	if (rc)
		return rc;
	for (int i = 0; i < 7; i++)
		sqlite3_bind_int64(u, i + 1, f[i]);
	rc = orch_rec_exec(&rp->q, ORCH_REC_OBJ_UPD);
	if (rc)
		return rc;
	rp->res->objects++;
	return 0;
}

/*
 * Walks the rebuilt extents (@src, by nid) along the objects: keeps those
 * of existing objects that do not overlap an earlier one, verifies them,
 * and sets the objects' counters.  What is not kept stays in rmap only.
 */
static int rp_bmap_objects(struct rp *rp, const struct rp_vec *src,
			   struct rp_vec *out)
{
	const struct rp_tab *obj = &rp_obj;
	struct rp_sums cs = { .grp = -1, .q = &rp->q };
	struct rp_vec objs = { 0 };
	uint8_t *buf = malloc((size_t)RP_READ_RUN * ORCH_STORE_BLOCK);
	size_t k = 0;
	int error = buf ? rp_load(rp, obj, obj->all, &objs) : -ENOMEM;

	for (size_t i = 0; i <= objs.n && !error; i++) {
		int64_t nid = i < objs.n ? objs.v[i].f[0] : INT64_MAX;
		int64_t n = 0, sum = 0, end = 0;
		uint64_t h = i < objs.n ? orch_rec_unkey_u64(objs.v[i].f[1]) : 0;

		for (; k < src->n && src->v[k].f[0] < nid; k++) {
			rp_log(rp, LOG_OTHER, "skipped: rmap extent of nid %" PRId64
			       " off %" PRId64 ": no such object, left in place",
			       src->v[k].f[0], src->v[k].f[1]);
			rp->res->skipped++;
		}
		for (; k < src->n && src->v[k].f[0] == nid && !error; k++) {
			const int64_t *f = src->v[k].f;

			if (f[1] < end) {
				rp_log(rp, LOG_OTHER, "skipped: rmap extent of nid %"
				       PRId64 " off %" PRId64 " overlaps the one "
				       "before, left in place", nid, f[1]);
				rp->res->skipped++;
				continue;
			}
			end = f[1] + f[4];
			n++, sum += f[4];
			if (!(f[5] & ORCH_REC_EXT_UNWRITTEN))
				error = rp_verify(rp, &cs, f, h, buf);
			if (!error && !rp_push(out))
				error = -ENOMEM;
			if (!error)
				out->v[out->n - 1] = src->v[k];
		}
		if (error || i == objs.n)
			break;
		if (!rp_crc_ok(obj, &objs.v[i]))
			rp_log(rp, LOG_OTHER, "obj nid %" PRId64 " fails its crc: "
			       "its counters are left alone", nid);
		else
			error = rp_obj_set(rp, objs.v[i].f, n, sum);
	}
	rp_vec_free(&objs);
	free(buf);
	return error;
}

static int rp_rebuild_bmap(struct rp *rp)
{
	struct rp_vec src = { 0 }, new = { 0 };
	int error = rp_bmap_source(rp, &src);

	rp->res->table = "bmap";
	if (!error)
		error = rp_bmap_objects(rp, &src, &new);
	if (!error)
		error = rp_install(rp, &rp_bmap, &new, true);
	rp_vec_free(&src);
	rp_vec_free(&new);
	return error;
}

/* --- Opening the store without its writer --------------------------------- */

/* smeta value @k, its crc checked. */
static int rp_smeta(struct rp *rp, const char *k, int64_t *v)
{
	struct orch_smeta_irec m;
	orch_failaddr_t fa = NULL;
	sqlite3_stmt *s;
	int rc = orch_rec_stmt(&rp->q, ORCH_REC_SMETA_GET, &s);

	if (rc)
		return rc;
	sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
	rc = orch_rec_step(&rp->q, ORCH_REC_SMETA_GET);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		fa = orch_rec_smeta_from_disk(s, 0, &m);
		orch_rec_reset(&rp->q, ORCH_REC_SMETA_GET);
	}
	if (rc == 0 || fa) {
		rp_log(rp, LOG_OTHER, "refused: smeta '%s' is missing or fails "
		       "its crc", k);
		return -ORCH_ECORRUPT;
	}
	*v = m.v;
	return 0;
}

/* The geometry: smeta, agreeing with the superblock. */
static int rp_geometry(struct rp *rp)
{
	struct orch_store *st = rp->st;
	uint8_t *blk = malloc(ORCH_STORE_BLOCK);
	struct store_sb sb;
	int64_t agb = 0, agc = 0, maxext = 0, blocks = 0;
	int error = blk ? 0 : -ENOMEM;

	if (!error)
		error = rp_smeta(rp, "ag_blocks", &agb);
	if (!error)
		error = rp_smeta(rp, "ag_count", &agc);
	if (!error)
		error = rp_smeta(rp, "maxext", &maxext);
	if (!error)
		error = rp_smeta(rp, "blocks", &blocks);
	if (!error)
		error = orch_bdev_read(st, 0, 1, blk);
	if (!error)
		error = orch_store_sb_decode(blk, &sb);
	free(blk);
	if (error == -ENOENT || error == -EPROTONOSUPPORT)
		error = -ORCH_ECORRUPT;
	if (error)
		return error;
	if (sb.ag_blocks != (uint64_t)agb || sb.maxext != (uint64_t)maxext ||
	    sb.blocks != (uint64_t)blocks ||
	    (uint64_t)agc != (sb.blocks + sb.ag_blocks - 1) / sb.ag_blocks) {
		rp_log(rp, LOG_OTHER, "refused: smeta and the superblock disagree "
		       "on the geometry");
		return -ORCH_ECORRUPT;
	}
	st->st_ag_blocks = sb.ag_blocks;
	st->st_ag_shift = (uint32_t)__builtin_ctz(sb.ag_blocks);
	st->st_ag_count = (uint32_t)agc;
	st->st_maxext = sb.maxext;
	st->st_blocks = sb.blocks;
	return 0;
}

static void rp_close(struct rp *rp)
{
	if (!rp->st)
		return;
	orch_rec_sq_fini(&rp->q);
	sqlite3_close(rp->db);
	if (rp->st->st_blocks_fd >= 0)
		close(rp->st->st_blocks_fd);
	if (rp->st->st_lock_fd >= 0)
		close(rp->st->st_lock_fd);
	free(rp->st->st_dir);
	free(rp->st);
	rp->st = NULL;
}

static int rp_open(struct rp *rp, const char *dir)
{
	char path[4096];
	int error;

	snprintf(path, sizeof(path), "%s/%s", dir, STORE_DB_NAME);
	if (access(path, F_OK) < 0)
		return -errno;
	rp->st = calloc(1, sizeof(*rp->st));
	if (!rp->st)
		return -ENOMEM;
	rp->st->st_blocks_fd = rp->st->st_lock_fd = -1;
	rp->st->st_dir = strdup(dir);
	if (!rp->st->st_dir) {
		error = -ENOMEM;
		goto out_close;
	}
	error = orch_store_lock(dir, &rp->st->st_lock_fd);
	if (error)
		goto out_close;
	snprintf(path, sizeof(path), "%s/%s", dir, STORE_BLOCKS_NAME);
	rp->st->st_blocks_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (rp->st->st_blocks_fd < 0) {
		error = -errno;
		goto out_close;
	}
	error = orch_store_db_open(rp->st, false, &rp->db);
	orch_rec_sq_init(&rp->q, rp->db);
	/* A repair must outlive a power cut once it returns: commit with a
	 * WAL sync instead of the store's NORMAL. */
	if (!error && sqlite3_exec(rp->db, "PRAGMA synchronous=FULL", NULL, NULL,
				   NULL) != SQLITE_OK)
		error = -EIO;
	if (!error)
		error = rp_geometry(rp);
	if (!error)
		return 0;
out_close:
	rp_close(rp);
	return error;
}

/* --- Entry point ---------------------------------------------------------------- */

int orch_store_rebuild_parse(const char *name, enum orch_store_rebuild *out)
{
	for (int w = ORCH_STORE_REBUILD_BMAP; w <= ORCH_STORE_REBUILD_REFCOUNT; w++)
		if (!strcmp(name, orch_store_rebuild_name(w))) {
			*out = w;
			return 0;
		}
	return -EINVAL;
}

const char *orch_store_rebuild_name(enum orch_store_rebuild what)
{
	switch (what) {
	case ORCH_STORE_REBUILD_BMAP:
		return "bmap";
	case ORCH_STORE_REBUILD_RMAP:
		return "rmap";
	case ORCH_STORE_REBUILD_FREESPACE:
		return "freespace";
	case ORCH_STORE_REBUILD_REFCOUNT:
		return "refcount";
	}
	return "?";
}

/* The rebuild in one transaction; committed (and checkpointed) or rolled back. */
static int rp_run(struct rp *rp, enum orch_store_rebuild what)
{
	sqlite3_stmt *s;
	int error, rc;

	error = orch_rec_stmt(&rp->q, ORCH_REC_BEGIN_IMMEDIATE, &s);
	if (!error)
		error = orch_rec_exec(&rp->q, ORCH_REC_BEGIN_IMMEDIATE);
	if (error)
		return error;
	switch (what) {
	case ORCH_STORE_REBUILD_BMAP:
		error = rp_rebuild_bmap(rp);
		break;
	case ORCH_STORE_REBUILD_RMAP:
		error = rp_rebuild_rmap(rp);
		break;
	case ORCH_STORE_REBUILD_FREESPACE:
		error = rp_rebuild_free(rp);
		break;
	default:
		error = rp_rebuild_refc(rp);
		break;
	}
	if (!error && !rp->o->dry_run) {
		error = orch_rec_stmt(&rp->q, ORCH_REC_COMMIT, &s);
		if (!error)
			error = orch_rec_exec(&rp->q, ORCH_REC_COMMIT);
		if (!error)
			goto committed;
	}
	if (!sqlite3_get_autocommit(rp->db) && !orch_rec_stmt(&rp->q, ORCH_REC_ROLLBACK, &s))
		orch_rec_exec(&rp->q, ORCH_REC_ROLLBACK);
	return error;
committed:
	/* Into store.db (synced, FULL) so no WAL replay is needed later. */
	rc = sqlite3_exec(rp->db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
	return rc == SQLITE_OK ? 0 : orch_rec_sql_err(rp->db, rc, "repair checkpoint");
}

int orch_store_repair(const char *data_dir, enum orch_store_rebuild what,
		      const struct orch_store_repair_opts *opts,
		      struct orch_store_repair_result *res)
{
	static const struct orch_store_repair_opts dflt;
	struct orch_store_repair_result dummy;
	struct rp rp = { .o = opts ? opts : &dflt, .res = res ? res : &dummy };
	struct orch_store *st;
	int error;

	memset(rp.res, 0, sizeof(*rp.res));
	rp.res->table = "";
	if (what < ORCH_STORE_REBUILD_BMAP || what > ORCH_STORE_REBUILD_REFCOUNT)
		return -EINVAL;
	error = rp_open(&rp, data_dir);
	if (error)
		return error;
	error = rp_run(&rp, what);
	rp_close(&rp);          /* releases the lock for the re-check's open */
	if (error || rp.o->dry_run)
		return error;
	error = orch_store_open(data_dir, &st);
	if (error) {
		rp.res->findings = error;
	} else {
		rp.res->findings = orch_store_check(st, rp.o->check_data,
						    rp.o->finding, rp.o->arg);
		orch_store_close(st);
	}
	rp.res->checked = true;
	return 0;
}
