/*
 * The store's record layer (store_ondisk.h, rec.c): every table's record
 * goes through bind, the table's INSERT and SELECT and from_disk unchanged;
 * then each check of each verifier fails on a row damaged to fail it (a
 * stale CRC, or a field out of range with its CRC recomputed in SQL, so
 * that the range check is the one that fails), and the statement table
 * prepares.  An in-memory database with the store's schema; the geometry
 * is a fake store's: 4 AGs of 64 blocks, the last one 32, maxext 16.
 */
#include <errno.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_ondisk.h"
#include "unit/store_fx.h"
#include "unit/test.h"

static struct orch_store geo = {
	.st_ag_blocks = 64, .st_ag_shift = 6, .st_ag_count = 4, .st_maxext = 16,
	.st_blocks = 224,
};

static sqlite3 *mem_db(struct orch_rec_sq *q)
{
	sqlite3 *db = NULL;

	if (sqlite3_open(":memory:", &db) != SQLITE_OK ||
	    sqlite3_exec(db, ORCH_REC_SCHEMA, NULL, NULL, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_create_function(db, "rec_crc", -1, SQLITE_UTF8, NULL, fx_sql_rec_crc,
				NULL, NULL);
	orch_rec_sq_init(q, db);
	return db;
}

static void mem_close(sqlite3 *db, struct orch_rec_sq *q)
{
	orch_rec_sq_fini(q);
	sqlite3_close(db);
}

ORCH_TEST(every_statement_prepares)
{
	struct orch_rec_sq q;
	sqlite3 *db = mem_db(&q);
	sqlite3_stmt *s;

	ORCH_CHECK(db);
	for (int i = 0; i < ORCH_REC_NSTMT; i++) {
		int error = orch_rec_stmt(&q, (enum orch_rec_stmt)i, &s);

		if (error)
			fprintf(stderr, "statement %s: %s\n",
				orch_rec_stmt_name((enum orch_rec_stmt)i), sqlite3_errmsg(db));
		ORCH_CHECK(!error && s);
	}
	ORCH_CHECK(!strcmp(orch_rec_stmt_name(ORCH_REC_BMAP_LE), "BMAP_LE"));
	ORCH_CHECK(!strcmp(orch_rec_tbl_name(ORCH_REC_CSUM), "csum"));
	mem_close(db, &q);
}

/*
 * One damage per row: @sql changes the table's only record, made by the
 * round trip's values; the decoder must then fail.  "crc = crc + 1" is a
 * stale CRC; the others recompute it so that a range check fails.
 */
struct damage {
	enum orch_rec_tbl t;
	const char *sql;
};

#define FIX(tbl, set, crc) "UPDATE " tbl " SET " set "; UPDATE " tbl " SET crc = " crc

static const struct damage damages[] = {
	{ ORCH_REC_SMETA, "UPDATE smeta SET crc = crc + 1" },
	{ ORCH_REC_SMETA, "UPDATE smeta SET v = 'x'" },
	{ ORCH_REC_SMETA, FIX("smeta", "k = 'a_key_much_too_long'", CRC_SMETA) },
	{ ORCH_REC_AGSTAT, "UPDATE agstat SET crc = crc + 1" },
	{ ORCH_REC_AGSTAT, FIX("agstat", "ag = 4", CRC_AGSTAT) },
	{ ORCH_REC_AGSTAT, FIX("agstat", "blocks = 64", CRC_AGSTAT) },
	{ ORCH_REC_AGSTAT, FIX("agstat", "longest = 21", CRC_AGSTAT) },
	{ ORCH_REC_AGSTAT, FIX("agstat", "nrmap = -1", CRC_AGSTAT) },
	{ ORCH_REC_AGSTAT, FIX("agstat", "ag = -1", CRC_AGSTAT) },
	{ ORCH_REC_OBJ, "UPDATE obj SET crc = crc + 1" },
	{ ORCH_REC_OBJ, "UPDATE obj SET size = 'big'" },
	{ ORCH_REC_OBJ, FIX("obj", "size = -1", CRC_OBJ) },
	{ ORCH_REC_OBJ, FIX("obj", "size = 1 << 51", CRC_OBJ) },
	{ ORCH_REC_OBJ, FIX("obj", "flags = 4", CRC_OBJ) },
	{ ORCH_REC_OBJ, FIX("obj", "nid = 0", CRC_OBJ) },
	{ ORCH_REC_OBJ, FIX("obj", "nextents = 10", CRC_OBJ) },
	{ ORCH_REC_BMAP, "UPDATE bmap SET crc = crc + 1" },
	{ ORCH_REC_BMAP, "UPDATE bmap SET agbno = 33" },   /* moved onto another extent */
	{ ORCH_REC_BMAP, FIX("bmap", "len = 0", CRC_BMAP) },
	{ ORCH_REC_BMAP, FIX("bmap", "len = 17", CRC_BMAP) },
	{ ORCH_REC_BMAP, FIX("bmap", "agbno = 50", CRC_BMAP) },
	{ ORCH_REC_BMAP, FIX("bmap", "ag = 4", CRC_BMAP) },
	{ ORCH_REC_BMAP, FIX("bmap", "ag = 3, agbno = 20", CRC_BMAP) },  /* past the short AG */
	{ ORCH_REC_BMAP, FIX("bmap", "agbno = 1 << 32", CRC_BMAP) },
	{ ORCH_REC_BMAP, FIX("bmap", "flags = 2", CRC_BMAP) },
	{ ORCH_REC_BMAP, FIX("bmap", "off = -5", CRC_BMAP) },
	{ ORCH_REC_BMAP, FIX("bmap", "off = 1 << 40", CRC_BMAP) },
	{ ORCH_REC_BMAP, FIX("bmap", "nid = 0", CRC_BMAP) },
	{ ORCH_REC_RMAP, "UPDATE rmap SET crc = crc + 1" },
	{ ORCH_REC_RMAP, FIX("rmap", "owner = 0", CRC_RMAP) },
	{ ORCH_REC_RMAP, FIX("rmap", "owner = -3", CRC_RMAP) },
	{ ORCH_REC_RMAP, FIX("rmap", "owner = -1", CRC_RMAP) },   /* special owner with off */
	{ ORCH_REC_RMAP, FIX("rmap", "len = 0", CRC_RMAP) },
	{ ORCH_REC_RMAP, FIX("rmap", "flags = 8", CRC_RMAP) },
	{ ORCH_REC_FSB, "UPDATE fsb SET crc = crc + 1" },
	{ ORCH_REC_FSB, FIX("fsb", "len = 62", CRC_FSB) },
	{ ORCH_REC_FSB, FIX("fsb", "ag = 9", CRC_FSB) },
	{ ORCH_REC_FSC, "UPDATE fsc SET crc = crc + 1" },
	{ ORCH_REC_FSC, FIX("fsc", "len = 0", CRC_FSC) },
	{ ORCH_REC_REFC, "UPDATE refc SET crc = crc + 1" },
	{ ORCH_REC_REFC, FIX("refc", "refcount = 1", CRC_REFC) },
	{ ORCH_REC_REFC, FIX("refc", "len = 17", CRC_REFC) },
	{ ORCH_REC_CSUM, "UPDATE csum SET crc = crc + 1" },
	{ ORCH_REC_CSUM, "UPDATE csum SET sums = zeroblob(256)" },
	{ ORCH_REC_CSUM, FIX("csum", "sums = zeroblob(255)", CRC_CSUM) },
	{ ORCH_REC_CSUM, FIX("csum", "valid = 0", CRC_CSUM) },
	{ ORCH_REC_CSUM, FIX("csum", "grp = 1", CRC_CSUM) },     /* past the short AG */
	{ ORCH_REC_CSUM, FIX("csum", "ag = 4", CRC_CSUM) },
	{ ORCH_REC_BAD, "UPDATE bad SET crc = crc + 1" },
	{ ORCH_REC_BAD, FIX("bad", "len = 0", CRC_BAD) },
	{ ORCH_REC_BAD, FIX("bad", "source = -1", CRC_BAD) },
	{ ORCH_REC_WORK, "UPDATE work SET crc = crc + 1" },
	{ ORCH_REC_WORK, FIX("work", "type = 0", CRC_WORK) },
	{ ORCH_REC_WORK, FIX("work", "type = 4", CRC_WORK) },
};

union irec {
	struct orch_smeta_irec sm;
	struct orch_agstat_irec ag;
	struct orch_obj_irec ob;
	struct orch_bmap_irec bm;
	struct orch_rmap_irec rm;
	struct orch_fsb_irec fb;
	struct orch_refc_irec rc;
	struct orch_csum_irec cs;
	struct orch_bad_irec bd;
	struct orch_work_irec wk;
};

/*
 * A valid record of table @t, every field away from its default.  Fields
 * are set one by one where the struct has padding, which stays zero for
 * the memcmp of the round trip.
 */
static void sample(enum orch_rec_tbl t, union irec *u)
{
	memset(u, 0, sizeof(*u));
	switch (t) {
	case ORCH_REC_SMETA: u->sm = (struct orch_smeta_irec){ .k = "next_nid", .v = 42 }; break;
	case ORCH_REC_AGSTAT: u->ag = (struct orch_agstat_irec){ 3, 32, 20, 12, 2, 5, 1 }; break;
	case ORCH_REC_OBJ:
		u->ob.nid = 7;
		u->ob.handle = 0xfedcba9876543210ull;
		u->ob.size = 123456;
		u->ob.flags = ORCH_REC_OBJ_REFLINK;
		u->ob.nextents = 2;
		u->ob.nblocks = 9;
		break;
	case ORCH_REC_BMAP: u->bm = (struct orch_bmap_irec){ 7, 100, 2, 10, 16, 0 }; break;
	case ORCH_REC_RMAP: u->rm = (struct orch_rmap_irec){ 2, 10, 7, 100, 16, 0 }; break;
	case ORCH_REC_FSB:
	case ORCH_REC_FSC: u->fb = (struct orch_fsb_irec){ 1, 3, 61 }; break;
	case ORCH_REC_REFC:
		u->rc.agbno = 5;
		u->rc.len = 4;
		u->rc.refcount = 3;
		break;
	case ORCH_REC_CSUM:
		u->cs.ag = 3;
		u->cs.valid = 0x8000000000000001ull;
		for (uint32_t i = 0; i < ORCH_REC_CSUM_GROUP; i++)
			u->cs.sums[i] = 0x01020304u * (i + 1);
		break;
	case ORCH_REC_BAD:
		u->bd.ag = 1;
		u->bd.agbno = 8;
		u->bd.len = 2;
		u->bd.first_seen = 1700000000;
		u->bd.source = 1;
		break;
	case ORCH_REC_WORK:
		u->wk.seq = 4;
		u->wk.type = 3;
		u->wk.nid = 7;
		u->wk.a = -1;
		u->wk.b = 2;
		u->wk.progress = 9;
		break;
	}
}

/* Inserts @u as a record of table @t, with the store's own statement. */
static int put_one(struct orch_rec_sq *q, enum orch_rec_tbl t, const union irec *u)
{
	switch (t) {
	case ORCH_REC_SMETA: return ORCH_REC_PUT(q, ORCH_REC_SMETA_INS, orch_rec_smeta_bind, &u->sm);
	case ORCH_REC_AGSTAT: return ORCH_REC_PUT(q, ORCH_REC_AG_PUT, orch_rec_agstat_bind, &u->ag);
	case ORCH_REC_OBJ: return ORCH_REC_PUT(q, ORCH_REC_OBJ_PUT, orch_rec_obj_bind, &u->ob);
	case ORCH_REC_BMAP: return ORCH_REC_PUT(q, ORCH_REC_BMAP_INS, orch_rec_bmap_bind, &u->bm);
	case ORCH_REC_RMAP: return ORCH_REC_PUT(q, ORCH_REC_RMAP_INS, orch_rec_rmap_bind, &u->rm);
	case ORCH_REC_FSB: return ORCH_REC_PUT(q, ORCH_REC_FSB_INS, orch_rec_fsb_bind, &u->fb);
	case ORCH_REC_FSC: return ORCH_REC_PUT(q, ORCH_REC_FSC_INS, orch_rec_fsc_bind, &u->fb);
	case ORCH_REC_REFC: return ORCH_REC_PUT(q, ORCH_REC_REFC_INS, orch_rec_refc_bind, &u->rc);
	case ORCH_REC_CSUM: return ORCH_REC_PUT(q, ORCH_REC_CSUM_PUT, orch_rec_csum_bind, &u->cs);
	case ORCH_REC_BAD: return ORCH_REC_PUT(q, ORCH_REC_BAD_INS, orch_rec_bad_bind, &u->bd);
	case ORCH_REC_WORK: return ORCH_REC_PUT(q, ORCH_REC_WORK_PUT, orch_rec_work_bind, &u->wk);
	}
	return -EINVAL;
}

/* The table's only record, decoded into @u: NULL or the failing check. */
static orch_failaddr_t get_one(sqlite3 *db, enum orch_rec_tbl t, const struct orch_store *st,
			       union irec *u)
{
	static const char *const cols[] = {
		[ORCH_REC_SMETA] = ORCH_REC_SMETA_COLS, [ORCH_REC_AGSTAT] = ORCH_REC_AGSTAT_COLS,
		[ORCH_REC_OBJ] = ORCH_REC_OBJ_COLS, [ORCH_REC_BMAP] = ORCH_REC_BMAP_COLS,
		[ORCH_REC_RMAP] = ORCH_REC_RMAP_COLS, [ORCH_REC_FSB] = ORCH_REC_FSB_COLS,
		[ORCH_REC_FSC] = ORCH_REC_FSC_COLS, [ORCH_REC_REFC] = ORCH_REC_REFC_COLS,
		[ORCH_REC_CSUM] = ORCH_REC_CSUM_COLS, [ORCH_REC_BAD] = ORCH_REC_BAD_COLS,
		[ORCH_REC_WORK] = ORCH_REC_WORK_COLS,
	};
	orch_failaddr_t fa = "no row";
	char sql[160];
	sqlite3_stmt *s;

	memset(u, 0, sizeof(*u));
	snprintf(sql, sizeof(sql), "SELECT %s FROM %s", cols[t], orch_rec_tbl_name(t));
	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
		return "prepare";
	if (sqlite3_step(s) == SQLITE_ROW) {
		switch (t) {
		case ORCH_REC_SMETA: fa = orch_rec_smeta_from_disk(s, 0, &u->sm); break;
		case ORCH_REC_AGSTAT: fa = orch_rec_agstat_from_disk(st, s, 0, &u->ag); break;
		case ORCH_REC_OBJ: fa = orch_rec_obj_from_disk(s, 0, &u->ob); break;
		case ORCH_REC_BMAP: fa = orch_rec_bmap_from_disk(st, s, 0, &u->bm); break;
		case ORCH_REC_RMAP: fa = orch_rec_rmap_from_disk(st, s, 0, &u->rm); break;
		case ORCH_REC_FSB: fa = orch_rec_fsb_from_disk(st, s, 0, &u->fb); break;
		case ORCH_REC_FSC: fa = orch_rec_fsc_from_disk(st, s, 0, &u->fb); break;
		case ORCH_REC_REFC: fa = orch_rec_refc_from_disk(st, s, 0, &u->rc); break;
		case ORCH_REC_CSUM: fa = orch_rec_csum_from_disk(st, s, 0, &u->cs); break;
		case ORCH_REC_BAD: fa = orch_rec_bad_from_disk(st, s, 0, &u->bd); break;
		case ORCH_REC_WORK: fa = orch_rec_work_from_disk(s, 0, &u->wk); break;
		}
	}
	sqlite3_finalize(s);
	return fa;
}

/* The CRC of each table's records in SQL (the tests' twin of orch_rec_crc). */
static const char *const crc_sql[] = {
	[ORCH_REC_SMETA] = CRC_SMETA, [ORCH_REC_AGSTAT] = CRC_AGSTAT, [ORCH_REC_OBJ] = CRC_OBJ,
	[ORCH_REC_BMAP] = CRC_BMAP, [ORCH_REC_RMAP] = CRC_RMAP, [ORCH_REC_FSB] = CRC_FSB,
	[ORCH_REC_FSC] = CRC_FSC, [ORCH_REC_REFC] = CRC_REFC, [ORCH_REC_CSUM] = CRC_CSUM,
	[ORCH_REC_BAD] = CRC_BAD, [ORCH_REC_WORK] = CRC_WORK,
};

/*
 * Every table: bind, the store's INSERT, a whole-row SELECT and from_disk
 * give back the record unchanged, and the CRC stored is the one the SQL
 * twin computes.
 */
ORCH_TEST(round_trip)
{
	for (int t = ORCH_REC_AGSTAT; t <= ORCH_REC_SMETA; t++) {
		struct orch_rec_sq q;
		sqlite3 *db = mem_db(&q);
		union irec in, out;
		sqlite3_stmt *s;
		char sql[160];

		ORCH_CHECK(db);
		sample((enum orch_rec_tbl)t, &in);
		ORCH_CHECK_OK(put_one(&q, (enum orch_rec_tbl)t, &in));
		ORCH_CHECK(!get_one(db, (enum orch_rec_tbl)t, &geo, &out));
		ORCH_CHECK(!memcmp(&in, &out, sizeof(in)));
		snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s WHERE crc = %s",
			 orch_rec_tbl_name((enum orch_rec_tbl)t), crc_sql[t]);
		ORCH_CHECK(sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK);
		ORCH_CHECK(sqlite3_step(s) == SQLITE_ROW && sqlite3_column_int64(s, 0) == 1);
		sqlite3_finalize(s);
		mem_close(db, &q);
	}
}

ORCH_TEST(every_verifier_fails)
{
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(damages); i++) {
		const struct damage *d = &damages[i];
		struct orch_rec_sq q;
		sqlite3 *db = mem_db(&q);
		union irec u;
		orch_failaddr_t fa;

		ORCH_CHECK(db);
		sample(d->t, &u);
		ORCH_CHECK_OK(put_one(&q, d->t, &u));
		fa = get_one(db, d->t, &geo, &u);
		if (fa)
			fprintf(stderr, "intact %s record fails: %s\n", orch_rec_tbl_name(d->t), fa);
		ORCH_CHECK(!fa);
		ORCH_CHECK(sqlite3_exec(db, d->sql, NULL, NULL, NULL) == SQLITE_OK);
		fa = get_one(db, d->t, &geo, &u);
		if (!fa || !strcmp(fa, "no row"))
			fprintf(stderr, "damage not caught: %s\n", d->sql);
		ORCH_CHECK(fa && strcmp(fa, "no row") && strstr(fa, "rec.c:"));
		mem_close(db, &q);
	}
}

/* Without a geometry only the form is checked: an extent past a (fake)
 * AG's end then passes, a zero length never does. */
ORCH_TEST(no_geometry)
{
	struct orch_rec_sq q;
	sqlite3 *db = mem_db(&q);
	union irec u;

	ORCH_CHECK(db);
	sample(ORCH_REC_BMAP, &u);
	ORCH_CHECK_OK(put_one(&q, ORCH_REC_BMAP, &u));
	ORCH_CHECK(sqlite3_exec(db, FIX("bmap", "ag = 4", CRC_BMAP), NULL, NULL, NULL) == 0);
	ORCH_CHECK(get_one(db, ORCH_REC_BMAP, &geo, &u));
	ORCH_CHECK(!get_one(db, ORCH_REC_BMAP, NULL, &u));
	ORCH_CHECK(sqlite3_exec(db, FIX("bmap", "len = 0", CRC_BMAP), NULL, NULL, NULL) == 0);
	ORCH_CHECK(get_one(db, ORCH_REC_BMAP, NULL, &u));
	mem_close(db, &q);
}

ORCH_TEST(le_helpers)
{
	uint8_t b[8];

	orch_put_le32(b, 0x11223344u);
	ORCH_CHECK(b[0] == 0x44 && b[3] == 0x11 && orch_get_le32(b) == 0x11223344u);
	orch_put_le64(b, 0x0102030405060708ull);
	ORCH_CHECK(b[0] == 8 && b[7] == 1 && orch_get_le64(b) == 0x0102030405060708ull);
	ORCH_CHECK(orch_rec_unkey_u64(orch_rec_key_u64(~0ull)) == ~0ull);
	ORCH_CHECK(orch_rec_key_u64(0) < orch_rec_key_u64(1ull << 63));
}

ORCH_TEST_MAIN()
