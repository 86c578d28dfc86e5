/*
 * Field fuzzing of the store's records, invariant I29 of docs/SPEC-store.md:
 * in a populated store (writes, punches, truncates, deletes, shared
 * blocks, a quarantined block, a pending work item), for every record type
 * and each of its fields, one record is mutated (zero, all ones, MSB, LSB
 * and middle bit flipped, +1, -1, random), once keeping its stale CRC and
 * once with the CRC recomputed (the interesting case: only the invariants
 * can tell).  The store is reopened and checked (data included): the
 * checker must report at least one finding, or the open must refuse the
 * store; nothing may crash.  Then the rebuild that covers the table (if
 * any) must fix the store or refuse cleanly.  store.db is restored from a
 * pristine copy between mutations.
 *
 * Mutations that are legitimately undetectable are listed in exempt[] with
 * the reason; mutations that leave the value unchanged, or that would
 * collide with another record's key, are counted and printed, never
 * silently passed.
 *
 * ORCH_TEST_SEED=<n> replays one run (the seed is printed on failure);
 * ORCH_TEST_VERBOSE=1 prints every mutation.
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/util.h"
#include "store/repair.h"
#include "store/store.h"
#include "store/store_i.h"
#include "unit/store_fx.h"
#include "unit/test.h"

#define F_SIZE (4u << 20)       /* 1024 blocks, 16 AGs of 64 */
#define F_AG 64u
#define F_MAXEXT 8u

static char D[FX_DIR_MAX];
static uint64_t seed;

static void fx_teardown(void)
{
	fx_rmdir(D, false);
}

__attribute__((constructor)) static void fx_at_exit(void)
{
	atexit(fx_teardown);
}

/* --- store.db behind the store's back --------------------------------------- */

static int copy_file(const char *from, const char *to)
{
	char buf[65536];
	int in = open(from, O_RDONLY), out;
	ssize_t n;

	if (in < 0)
		return -errno;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (out < 0) {
		close(in);
		return -errno;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			n = -1;
	close(in);
	close(out);
	return n < 0 ? -EIO : 0;
}

/* store.db back to the pristine copy (no WAL: it was checkpointed). */
static int restore(void)
{
	char a[128], b[128];

	snprintf(b, sizeof(b), "%s/%s-wal", D, STORE_DB_NAME);
	unlink(b);
	snprintf(b, sizeof(b), "%s/%s-shm", D, STORE_DB_NAME);
	unlink(b);
	snprintf(a, sizeof(a), "%s/pristine.db", D);
	snprintf(b, sizeof(b), "%s/%s", D, STORE_DB_NAME);
	return copy_file(a, b);
}

/* --- The populated store -------------------------------------------------------- */

static unsigned char *pattern(size_t len)
{
	unsigned char *p = malloc(len);

	for (size_t i = 0; p && i < len; i++)
		p[i] = (unsigned char)(i * 131 + (i >> 12));
	return p;
}

/*
 * Objects with extents of every length up to maxext, a punch, a truncate,
 * a delete; blocks shared by a clone (or by hand when clones are not
 * there); a quarantined free block; a pending truncate work item.
 */
static int populate(void)
{
	struct orch_store_geom g = { .size = F_SIZE, .ag_blocks = F_AG,
				     .maxext = F_MAXEXT };
	unsigned char *b = pattern(256 * 1024);
	struct orch_store *st = NULL;
	sqlite3 *db = NULL;
	int rc;

	if (!b || fx_mkdir(D, sizeof(D), "t_store_fuzzrec")) {
		free(b);
		return -ENOMEM;
	}
	rc = fx_mkstore(D, &g, &st);
	for (uint64_t h = 1; h <= 6 && !rc; h++)
		rc = orch_store_write(st, h, 0, b, (size_t)(h * 23456));
	if (!rc)
		rc = orch_store_punch(st, 2, 4096, 8192);
	if (!rc)
		rc = orch_store_truncate(st, 3, 30000);
	if (!rc)
		rc = orch_store_delete(st, 4);
	if (!rc)
		rc = orch_store_write(st, 0x8000000000000009ull, 8192, b, 5000);
	if (!rc) {
		rc = orch_store_clone(st, 6, 0, 7, 0, 8 * 4096);
		if (rc == -EINVAL)
			rc = 1;         /* by hand below */
	}
	if (rc >= 0) {
		int q = orch_store_quarantine(st, F_SIZE / 4096 - 5, 1);

		if (q && q != -EINVAL)
			rc = q;
	}
	orch_store_close(st);
	free(b);
	if (rc < 0)
		return rc;
	db = db_open(D, false);
	if (!db)
		return -EIO;
	if (rc == 1)    /* object 5 shares its first extent's first block with 7 */
		rc = db_exec(db,
			"INSERT INTO obj SELECT (SELECT v FROM smeta WHERE k = 'next_nid'),"
			" 7 - 9223372036854775808, 4096, 1, 1, 1, 0;"
			"INSERT INTO bmap SELECT (SELECT v FROM smeta WHERE k = 'next_nid'),"
			" 0, ag, agbno, 1, 0, 0 FROM bmap WHERE nid = 5 AND off = 0;"
			"INSERT INTO rmap SELECT ag, agbno, (SELECT v FROM smeta WHERE"
			" k = 'next_nid'), 0, 1, 0, 0 FROM bmap WHERE nid = 5 AND off = 0;"
			"INSERT INTO refc SELECT ag, agbno, 1, 2, 0 FROM bmap WHERE nid = 5"
			" AND off = 0;"
			"UPDATE obj SET flags = 1 WHERE nid = 5;"
			"UPDATE agstat SET nrmap = nrmap + 1, nrefc = nrefc + 1 WHERE ag ="
			" (SELECT ag FROM bmap WHERE nid = 5 AND off = 0);"
			"UPDATE smeta SET v = v + 1 WHERE k = 'next_nid';", true);
	/* A truncate in progress of object 1 to its own size: nothing left to free. */
	if (!rc)
		rc = db_exec(db,
			"INSERT INTO work SELECT (SELECT v FROM smeta WHERE k = 'next_work'),"
			" 1, nid, size, 0, size, 0 FROM obj WHERE nid = 1;"
			"UPDATE smeta SET v = v + 1 WHERE k = 'next_work';", true);
	if (!rc)
		rc = db_recrc(db, TBL(AGSTAT) | TBL(OBJ) | TBL(BMAP) | TBL(RMAP) |
				  TBL(REFC) | TBL(WORK) | TBL(SMETA));
	if (!rc)
		rc = db_exec(db, "PRAGMA wal_checkpoint(TRUNCATE);", true);
	sqlite3_close(db);
	if (!rc) {
		char a[128], p[128];

		snprintf(a, sizeof(a), "%s/%s", D, STORE_DB_NAME);
		snprintf(p, sizeof(p), "%s/pristine.db", D);
		rc = copy_file(a, p);
	}
	return rc;
}

/* --- Fields and mutations ---------------------------------------------------------- */

struct field {
	const char *table;
	enum orch_rec_tbl tbl;
	const char *col;
	const char *pick;       /* WHERE clause choosing the one record */
	const char *crc;        /* the crc expression over the new values */
	enum orch_store_rebuild fix;    /* the rebuild that covers it, or 0 */
};


/* One record per table: a data extent of 2+ blocks, its rmap twin, ... */
#define P_BMAP "(nid, off) = (SELECT nid, off FROM bmap WHERE len >= 2 AND nid = 2" \
	       " ORDER BY off LIMIT 1)"
#define P_RMAP "(ag, agbno, owner, off) = (SELECT ag, agbno, owner, off FROM rmap" \
	       " WHERE owner = 3 AND len >= 2 ORDER BY off LIMIT 1)"
#define P_FSB "(ag, agbno) = (SELECT ag, agbno FROM fsb ORDER BY ag, agbno LIMIT 1)"
#define P_FSC "(ag, len, agbno) = (SELECT ag, len, agbno FROM fsc ORDER BY ag DESC LIMIT 1)"
#define P_REFC "(ag, agbno) = (SELECT ag, agbno FROM refc LIMIT 1)"
#define P_CSUM "(ag, grp) = (SELECT ag, grp FROM csum ORDER BY ag, grp LIMIT 1)"
#define P_BAD "(ag, agbno) = (SELECT ag, agbno FROM bad LIMIT 1)"

#define FLD(t, T, c, p, crc, fix) { t, T, c, p, crc, fix }

static const struct field fields[] = {
	FLD("smeta", ORCH_REC_SMETA, "v", "k = 'next_nid'", CRC_SMETA, 0),
	FLD("smeta", ORCH_REC_SMETA, "v", "k = 'next_work'", CRC_SMETA, 0),
	FLD("smeta", ORCH_REC_SMETA, "v", "k = 'ag_blocks'", CRC_SMETA, 0),
	FLD("smeta", ORCH_REC_SMETA, "v", "k = 'maxext'", CRC_SMETA, 0),
	FLD("smeta", ORCH_REC_SMETA, "v", "k = 'uuid_lo'", CRC_SMETA, 0),
	FLD("agstat", ORCH_REC_AGSTAT, "ag", "ag = 3", CRC_AGSTAT, ORCH_STORE_REBUILD_FREESPACE),
	FLD("agstat", ORCH_REC_AGSTAT, "blocks", "ag = 3", CRC_AGSTAT, ORCH_STORE_REBUILD_FREESPACE),
	FLD("agstat", ORCH_REC_AGSTAT, "freeblks", "ag = 3", CRC_AGSTAT, ORCH_STORE_REBUILD_FREESPACE),
	FLD("agstat", ORCH_REC_AGSTAT, "longest", "ag = 3", CRC_AGSTAT, ORCH_STORE_REBUILD_FREESPACE),
	FLD("agstat", ORCH_REC_AGSTAT, "nfree", "ag = 3", CRC_AGSTAT, ORCH_STORE_REBUILD_FREESPACE),
	FLD("agstat", ORCH_REC_AGSTAT, "nrmap", "ag = 3", CRC_AGSTAT, ORCH_STORE_REBUILD_FREESPACE),
	FLD("agstat", ORCH_REC_AGSTAT, "nrefc", "ag = 3", CRC_AGSTAT, ORCH_STORE_REBUILD_FREESPACE),
	FLD("obj", ORCH_REC_OBJ, "nid", "nid = 2", CRC_OBJ, 0),
	FLD("obj", ORCH_REC_OBJ, "handle", "nid = 2", CRC_OBJ, 0),
	FLD("obj", ORCH_REC_OBJ, "size", "nid = 2", CRC_OBJ, 0),
	FLD("obj", ORCH_REC_OBJ, "flags", "nid = 2", CRC_OBJ, 0),
	FLD("obj", ORCH_REC_OBJ, "nextents", "nid = 2", CRC_OBJ, ORCH_STORE_REBUILD_BMAP),
	FLD("obj", ORCH_REC_OBJ, "nblocks", "nid = 2", CRC_OBJ, ORCH_STORE_REBUILD_BMAP),
	FLD("bmap", ORCH_REC_BMAP, "nid", P_BMAP, CRC_BMAP, ORCH_STORE_REBUILD_BMAP),
	FLD("bmap", ORCH_REC_BMAP, "off", P_BMAP, CRC_BMAP, ORCH_STORE_REBUILD_BMAP),
	FLD("bmap", ORCH_REC_BMAP, "ag", P_BMAP, CRC_BMAP, ORCH_STORE_REBUILD_BMAP),
	FLD("bmap", ORCH_REC_BMAP, "agbno", P_BMAP, CRC_BMAP, ORCH_STORE_REBUILD_BMAP),
	FLD("bmap", ORCH_REC_BMAP, "len", P_BMAP, CRC_BMAP, ORCH_STORE_REBUILD_BMAP),
	FLD("bmap", ORCH_REC_BMAP, "flags", P_BMAP, CRC_BMAP, ORCH_STORE_REBUILD_BMAP),
	FLD("rmap", ORCH_REC_RMAP, "ag", P_RMAP, CRC_RMAP, ORCH_STORE_REBUILD_RMAP),
	FLD("rmap", ORCH_REC_RMAP, "agbno", P_RMAP, CRC_RMAP, ORCH_STORE_REBUILD_RMAP),
	FLD("rmap", ORCH_REC_RMAP, "owner", P_RMAP, CRC_RMAP, ORCH_STORE_REBUILD_RMAP),
	FLD("rmap", ORCH_REC_RMAP, "off", P_RMAP, CRC_RMAP, ORCH_STORE_REBUILD_RMAP),
	FLD("rmap", ORCH_REC_RMAP, "len", P_RMAP, CRC_RMAP, ORCH_STORE_REBUILD_RMAP),
	FLD("rmap", ORCH_REC_RMAP, "flags", P_RMAP, CRC_RMAP, ORCH_STORE_REBUILD_RMAP),
	FLD("fsb", ORCH_REC_FSB, "ag", P_FSB, CRC_FSB, ORCH_STORE_REBUILD_FREESPACE),
	FLD("fsb", ORCH_REC_FSB, "agbno", P_FSB, CRC_FSB, ORCH_STORE_REBUILD_FREESPACE),
	FLD("fsb", ORCH_REC_FSB, "len", P_FSB, CRC_FSB, ORCH_STORE_REBUILD_FREESPACE),
	FLD("fsc", ORCH_REC_FSC, "ag", P_FSC, CRC_FSC, ORCH_STORE_REBUILD_FREESPACE),
	FLD("fsc", ORCH_REC_FSC, "len", P_FSC, CRC_FSC, ORCH_STORE_REBUILD_FREESPACE),
	FLD("fsc", ORCH_REC_FSC, "agbno", P_FSC, CRC_FSC, ORCH_STORE_REBUILD_FREESPACE),
	FLD("refc", ORCH_REC_REFC, "ag", P_REFC, CRC_REFC, ORCH_STORE_REBUILD_REFCOUNT),
	FLD("refc", ORCH_REC_REFC, "agbno", P_REFC, CRC_REFC, ORCH_STORE_REBUILD_REFCOUNT),
	FLD("refc", ORCH_REC_REFC, "len", P_REFC, CRC_REFC, ORCH_STORE_REBUILD_REFCOUNT),
	FLD("refc", ORCH_REC_REFC, "refcount", P_REFC, CRC_REFC, ORCH_STORE_REBUILD_REFCOUNT),
	FLD("csum", ORCH_REC_CSUM, "ag", P_CSUM, CRC_CSUM, 0),
	FLD("csum", ORCH_REC_CSUM, "grp", P_CSUM, CRC_CSUM, 0),
	FLD("csum", ORCH_REC_CSUM, "valid", P_CSUM, CRC_CSUM, 0),
	FLD("csum", ORCH_REC_CSUM, "sums", P_CSUM, CRC_CSUM, 0),
	FLD("bad", ORCH_REC_BAD, "ag", P_BAD, CRC_BAD, 0),
	FLD("bad", ORCH_REC_BAD, "agbno", P_BAD, CRC_BAD, 0),
	FLD("bad", ORCH_REC_BAD, "len", P_BAD, CRC_BAD, 0),
	FLD("bad", ORCH_REC_BAD, "first_seen", P_BAD, CRC_BAD, 0),
	FLD("bad", ORCH_REC_BAD, "source", P_BAD, CRC_BAD, 0),
	FLD("work", ORCH_REC_WORK, "seq", "1", CRC_WORK, 0),
	FLD("work", ORCH_REC_WORK, "type", "1", CRC_WORK, 0),
	FLD("work", ORCH_REC_WORK, "nid", "1", CRC_WORK, 0),
	FLD("work", ORCH_REC_WORK, "a", "1", CRC_WORK, 0),
	FLD("work", ORCH_REC_WORK, "b", "1", CRC_WORK, 0),
	FLD("work", ORCH_REC_WORK, "progress", "1", CRC_WORK, 0),
};

enum mut { M_ZERO, M_ONES, M_MSB, M_LSB, M_MID, M_PLUS, M_MINUS, M_RANDOM, M_NR };
static const char *const mut_name[M_NR] = {
	"zero", "ones", "msb", "lsb", "mid", "+1", "-1", "random",
};

/* The picked field's value before and after the last mutation. */
static int64_t g_old, g_new;

enum cond {
	C_ANY,          /* whatever the new value */
	C_GROWS,        /* the new value is larger */
	C_SAME_BLOCK,   /* a size in the same last block, or larger */
	C_REFLINK,      /* obj.flags became REFLINK alone */
};

/*
 * Mutations no checker can see, and why.  Each applies only when the store
 * checked clean after it; @recrc_only: a stale CRC is always a finding.
 */
struct exempt {
	const char *table, *col, *pick;  /* pick: NULL any record */
	enum cond cond;
	bool recrc_only;
	const char *why;
};

static const struct exempt exempt[] = {
	{ "bad", "first_seen", NULL, C_ANY, true,
	  "a timestamp: any value is a time the block could have been found bad" },
	{ "obj", "handle", NULL, C_ANY, true,
	  "another handle names the object otherwise: only the namespace knows" },
	{ "obj", "size", NULL, C_SAME_BLOCK, true,
	  "a larger size (a hole at the end) or one in the same last block is legal" },
	{ "obj", "flags", NULL, C_REFLINK, true,
	  "REFLINK only says the object may share blocks" },
	{ "smeta", "v", "k = 'next_nid'", C_GROWS, true,
	  "numbers are never reused: a larger next_nid is a legal gap" },
	{ "smeta", "v", "k = 'next_work'", C_ANY, true,
	  "numbers are never reused: a larger next_work is a legal gap; a smaller "
	  "one shows only while an item with a larger number exists, and open "
	  "completes the pending item before the checker looks" },
	{ "work", NULL, NULL, C_ANY, true,
	  "open resumes a well-formed work item and completes it; the result is "
	  "consistent (a damaged one stays and is reported)" },
};

static bool cond_met(enum cond c)
{
	switch (c) {
	case C_ANY:
		return true;
	case C_GROWS:
		return g_new > g_old;
	case C_SAME_BLOCK:
		return g_new > g_old || (g_new > 0 && (g_new + 4095) / 4096 ==
					 (g_old + 4095) / 4096);
	case C_REFLINK:
		return g_new == ORCH_REC_OBJ_REFLINK;
	}
	return false;
}

static const char *exempt_why(const struct field *f, bool recrc)
{
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(exempt); i++) {
		const struct exempt *e = &exempt[i];

		if (!strcmp(e->table, f->table) && (!e->col || !strcmp(e->col, f->col)) &&
		    (!e->pick || !strcmp(e->pick, f->pick)) &&
		    (recrc || !e->recrc_only) && cond_met(e->cond))
			return e->why;
	}
	return NULL;
}

/* SQL for the new value of integer column @col under mutation @m. */
static void mut_expr(enum mut m, const char *col, char *out, size_t size)
{
	switch (m) {
	case M_ZERO: snprintf(out, size, "0"); break;
	case M_ONES: snprintf(out, size, "-1"); break;
	case M_MSB: snprintf(out, size, "(%s | -9223372036854775808) - (%s & -9223372036854775808)",
			     col, col); break;
	case M_LSB: snprintf(out, size, "(%s | 1) - (%s & 1)", col, col); break;
	case M_MID: snprintf(out, size, "(%s | 4294967296) - (%s & 4294967296)", col, col); break;
	case M_PLUS: snprintf(out, size, "%s + 1", col); break;
	case M_MINUS: snprintf(out, size, "%s - 1", col); break;
	default: snprintf(out, size, "%" PRId64, (int64_t)rng()); break;
	}
}

struct outcome {
	int tried, found, refused_open, unchanged, collide, exempted;
	int repair_fixed, repair_refused, missed, repair_bad;
};

static long count_findings(struct orch_store *st)
{
	return orch_store_check(st, true, NULL, NULL);
}

/*
 * csum.sums: byte 0 of the checksum of the row's first valid block (the
 * blob is 64 little-endian crc32c values).  0, 1 (unchanged) or -errno.
 */
static int mutate_sums(sqlite3 *db, const struct field *f, enum mut m, bool recrc)
{
	unsigned char sums[4 * ORCH_REC_CSUM_GROUP], old, v[M_NR];
	sqlite3_stmt *s;
	char sql[256];
	uint64_t valid;
	int bit, rc;

	snprintf(sql, sizeof(sql), "SELECT sums, valid FROM csum WHERE %s", f->pick);
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		return -EIO;
	if (sqlite3_step(s) != SQLITE_ROW ||
	    sqlite3_column_bytes(s, 0) != (int)sizeof(sums)) {
		sqlite3_finalize(s);
		return -ENOENT;
	}
	memcpy(sums, sqlite3_column_blob(s, 0), sizeof(sums));
	valid = (uint64_t)sqlite3_column_int64(s, 1);
	sqlite3_finalize(s);
	bit = valid ? __builtin_ctzll(valid) : 0;
	old = sums[4 * bit];
	v[M_ZERO] = 0, v[M_ONES] = 255, v[M_MSB] = old ^ 128, v[M_LSB] = old ^ 1;
	v[M_MID] = old ^ 16, v[M_PLUS] = (unsigned char)(old + 1);
	v[M_MINUS] = (unsigned char)(old - 1), v[M_RANDOM] = (unsigned char)rng();
	if (v[m] == old)
		return 1;
	g_old = old, g_new = v[m];
	sums[4 * bit] = v[m];
	snprintf(sql, sizeof(sql), "UPDATE csum SET sums = ?1 WHERE %s", f->pick);
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_blob(s, 1, sums, sizeof(sums), SQLITE_STATIC);
	rc = sqlite3_step(s) == SQLITE_DONE ? 0 : -EIO;
	sqlite3_finalize(s);
	if (!rc && recrc) {
		snprintf(sql, sizeof(sql), "UPDATE csum SET crc = " CRC_CSUM " WHERE %s",
			 f->pick);
		rc = db_exec(db, sql, true);
	}
	return rc;
}

/* 1 if mutation @expr leaves the picked record's @f->col as it is. */
static int mutate_is_noop(sqlite3 *db, const struct field *f, const char *expr)
{
	char sql[2048];
	sqlite3_stmt *s;
	int same = -ENOENT;

	snprintf(sql, sizeof(sql), "SELECT (%s) = %s, %s, %s FROM %s WHERE %s", expr,
		 f->col, f->col, expr, f->table, f->pick);
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		return -EIO;
	if (sqlite3_step(s) == SQLITE_ROW) {
		same = sqlite3_column_int(s, 0);
		g_old = sqlite3_column_int64(s, 1);
		g_new = sqlite3_column_int64(s, 2);
	}
	sqlite3_finalize(s);
	return same;
}

/* Applies mutation @m to field @f; 0, 1 (value unchanged), -EEXIST, -errno. */
static int mutate(const struct field *f, enum mut m, bool recrc)
{
	char expr[256], sql[1536];
	sqlite3 *db = db_open(D, false);
	int rc;

	if (!db)
		return -EIO;
	if (!strcmp(f->col, "sums")) {
		rc = mutate_sums(db, f, m, recrc);
		sqlite3_close(db);
		return rc;
	}
	mut_expr(m, f->col, expr, sizeof(expr));
	rc = mutate_is_noop(db, f, expr);
	if (rc) {
		sqlite3_close(db);
		return rc;
	}
	/*
	 * The pick may name the changed column, so the crc update finds the
	 * record by its old crc (unique in practice; the row is known to be
	 * the only one changed because the table's key order is unchanged).
	 */
	snprintf(sql, sizeof(sql),
		 "CREATE TEMP TABLE old AS SELECT crc FROM %s WHERE %s;"
		 "UPDATE %s SET %s = %s WHERE %s;",
		 f->table, f->pick, f->table, f->col, expr, f->pick);
	if (recrc) {
		size_t used = strlen(sql);

		snprintf(sql + used, sizeof(sql) - used,
			 "UPDATE %s SET crc = %s WHERE crc = (SELECT crc FROM old);",
			 f->table, f->crc);
	}
	rc = db_exec(db, sql, true);
	sqlite3_close(db);
	return rc;
}

static void on_log(void *arg, const char *msg)
{
	(void)arg;
	if (getenv("ORCH_TEST_VERBOSE"))
		fprintf(stderr, "    repair: %s\n", msg);
}

/* Runs the rebuild covering @f: fixed, or refused; false otherwise. */
static bool repair_ok(const struct field *f, struct outcome *o)
{
	struct orch_store_repair_opts opts = { .check_data = true, .log = on_log };
	struct orch_store_repair_result res;
	int rc = orch_store_repair(D, f->fix, &opts, &res);

	if (rc == -EUCLEAN) {
		o->repair_refused++;
		return true;
	}
	if (rc == 0 && res.checked && res.findings == 0) {
		o->repair_fixed++;
		return true;
	}
	fprintf(stderr, "  repair %s: %s, findings %ld\n",
		orch_store_rebuild_name(f->fix), strerror(-rc), res.findings);
	return false;
}

/* One mutation: detected (or exempt, or no-op); false on a miss. */
static bool one(const struct field *f, enum mut m, bool recrc, struct outcome *o)
{
	struct orch_store *st = NULL;
	const char *why;
	long n;
	int rc = restore();

	if (!rc)
		rc = mutate(f, m, recrc);
	if (rc == 1) {
		o->unchanged++;
		return true;
	}
	if (rc == -EEXIST) {
		o->collide++;
		return true;
	}
	if (rc) {
		fprintf(stderr, "%s.%s %s: cannot mutate: %s\n", f->table, f->col,
			mut_name[m], strerror(-rc));
		return false;
	}
	o->tried++;
	why = exempt_why(f, recrc);
	rc = orch_store_open(D, &st);
	if (rc) {
		/* A refusal to open is a finding too (the geometry is checked). */
		o->refused_open++;
		return true;
	}
	n = count_findings(st);
	orch_store_close(st);
	if (getenv("ORCH_TEST_VERBOSE"))
		fprintf(stderr, "  %s.%s %s %s: %ld findings\n", f->table, f->col,
			mut_name[m], recrc ? "recrc" : "stale crc", n);
	if (n == 0 && why) {
		o->exempted++;
		return true;
	}
	if (n <= 0) {
		fprintf(stderr, "MISS: %s.%s (%s) %s, %s: %ld findings\n", f->table,
			f->col, f->pick, mut_name[m], recrc ? "crc recomputed" :
			"crc kept", n);
		o->missed++;
		return false;
	}
	o->found++;
	/* The bmap rebuild sets obj counters, but never re-seals a damaged
	 * obj record (its size and handle cannot be rebuilt): not covered. */
	if (f->fix && (recrc || strcmp(f->table, "obj")) && !repair_ok(f, o)) {
		fprintf(stderr, "REPAIR: %s.%s %s %s\n", f->table, f->col, mut_name[m],
			recrc ? "recrc" : "stale crc");
		o->repair_bad++;
		return false;
	}
	return true;
}

ORCH_TEST(fuzz_every_field)
{
	struct outcome o = { 0 };
	struct orch_store *st;
	bool ok = true;

	seed = rng_seed(0);
	/* Every open of a damaged store complains; the summary says enough. */
	if (!getenv("ORCH_TEST_VERBOSE"))
		orch_log_level = (enum orch_log_level)(ORCH_LOG_ERR - 1);
	ORCH_CHECK_OK(populate());
	/* The pristine store is clean, or every finding below means nothing. */
	ORCH_CHECK_OK(orch_store_open(D, &st));
	{
		long n = orch_store_check(st, true, NULL, NULL);

		orch_store_close(st);
		ORCH_CHECK(n == 0);
	}
	/*
	 * Under valgrind every mutation costs some 50 times more: each field
	 * still gets two of its mutations there (the full set runs in the
	 * normal and ASan builds).
	 */
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(fields); i++)
		for (int m = 0; m < M_NR; m++)
			for (int r = 0; r < 2; r++)
				if (!fx_slow_env() || ((size_t)m + i) % (M_NR / 2) == 0)
					ok &= one(&fields[i], (enum mut)m, r, &o);
	fprintf(stderr, "fuzzrec: %d mutations: %d found, %d refused at open, %d exempt;"
		" %d no-ops (value unchanged), %d key collisions; repair: %d fixed, %d"
		" refused\n", o.tried, o.found, o.refused_open, o.exempted, o.unchanged,
		o.collide, o.repair_fixed, o.repair_refused);
	if (!ok)
		fprintf(stderr, "seed %" PRIu64 "\n", seed);
	ORCH_CHECK(ok && o.missed == 0 && o.repair_bad == 0);
	ORCH_CHECK(o.found > 100);
	fx_teardown();
}

ORCH_TEST_MAIN()
