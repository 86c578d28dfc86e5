/*
 * Shared helpers of the extent-store unit tests (t_store*.c): the seeded
 * xorshift generator, the temporary store fixture, and store.db reached
 * with SQLite behind the store's back (record CRCs recomputed in SQL).
 * Everything is static inline: each test binary is one .c file.
 *
 *   ORCH_TEST_SEED=<n>  the seed rng_seed() and env_seed() return
 *   ORCH_TEST_KEEP=1    fx_rmdir(dir, true) keeps the directory
 */
#ifndef ORCH_TESTS_UNIT_STORE_FX_H
#define ORCH_TESTS_UNIT_STORE_FX_H

#include <errno.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "store/store.h"
#include "store/store_i.h"

/* --- Random numbers ------------------------------------------------------- */

static uint64_t rng_state __attribute__((unused));

/* xorshift64: the next value of rng_state (which must not be 0). */
static inline uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static inline uint64_t rng_below(uint64_t n)
{
	return n ? rng() % n : 0;
}

/* ORCH_TEST_SEED, or @dflt when it is not set. */
static inline uint64_t env_seed(uint64_t dflt)
{
	const char *e = getenv("ORCH_TEST_SEED");

	return e ? strtoull(e, NULL, 0) : dflt;
}

/*
 * Seeds rng_state from ORCH_TEST_SEED (default: the time), then draws
 * @warm values; returns the seed, for the test to print.
 */
static inline uint64_t rng_seed(int warm)
{
	uint64_t seed = env_seed((uint64_t)time(NULL));

	rng_state = seed * 2654435761u + 1;
	for (int i = 0; i < warm; i++)
		rng();
	return seed;
}

/* --- Fixture: a store in a temporary directory --------------------------- */

#define FX_DIR_MAX 64

/* Makes /tmp/<name>.XXXXXX in @dir; -errno (and @dir "") on failure. */
static inline int fx_mkdir(char *dir, size_t size, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, size, "%s/%s.XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(dir)) {
		dir[0] = 0;
		return -errno;
	}
	return 0;
}

/* mkfs with @g in @dir, then open it into *@st. */
static inline int fx_mkstore(const char *dir, const struct orch_store_geom *g,
			     struct orch_store **st)
{
	int rc = orch_store_mkfs(dir, g, false);

	if (!rc)
		rc = orch_store_open(dir, st);
	return rc;
}

static inline void fx_close(struct orch_store **st)
{
	orch_store_close(*st);
	*st = NULL;
}

static inline int fx_reopen(const char *dir, struct orch_store **st)
{
	fx_close(st);
	return orch_store_open(dir, st);
}

static inline int fx_rm_one(const char *path, const struct stat *sb, int flag,
			    struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

/*
 * Removes @dir and all below it (nothing if @dir is ""), or with @may_keep
 * and ORCH_TEST_KEEP set, says it is kept; @dir is "" after.
 */
static inline void fx_rmdir(char *dir, bool may_keep)
{
	if (!dir[0])
		return;
	if (may_keep && getenv("ORCH_TEST_KEEP"))
		fprintf(stderr, "kept %s\n", dir);
	else
		nftw(dir, fx_rm_one, 16, FTW_DEPTH | FTW_PHYS);
	dir[0] = 0;
}

/* --- store.db behind the store's back ------------------------------------ */

/* The crc expression of each table's records (its fields, then the blob). */
#define CRC_AGSTAT "rec_crc(1, ag, blocks, freeblks, longest, nfree, nrmap, nrefc)"
#define CRC_OBJ "rec_crc(2, nid, handle, size, flags, nextents, nblocks)"
#define CRC_BMAP "rec_crc(3, nid, off, ag, agbno, len, flags)"
#define CRC_RMAP "rec_crc(4, ag, agbno, owner, off, len, flags)"
#define CRC_FSB "rec_crc(5, ag, agbno, len)"
#define CRC_FSC "rec_crc(6, ag, len, agbno)"
#define CRC_REFC "rec_crc(7, ag, agbno, len, refcount)"
#define CRC_CSUM "rec_crc(8, ag, grp, valid, sums)"
#define CRC_BAD "rec_crc(9, ag, agbno, len, first_seen, source)"
#define CRC_WORK "rec_crc(10, seq, type, nid, a, b, progress)"
#define CRC_SMETA "rec_crc(11, v, k)"

/* rec_crc(table, field..., [blob or text]): orch_rec_crc in SQL. */
static inline void fx_sql_rec_crc(sqlite3_context *ctx, int argc,
				  sqlite3_value **argv)
{
	int64_t f[8];
	int n = 0;
	const void *blob = NULL;
	size_t bloblen = 0;

	for (int i = 1; i < argc; i++) {
		int t = sqlite3_value_type(argv[i]);

		if (t == SQLITE_BLOB || t == SQLITE_TEXT) {
			blob = t == SQLITE_BLOB ? sqlite3_value_blob(argv[i]) :
			       (const void *)sqlite3_value_text(argv[i]);
			bloblen = (size_t)sqlite3_value_bytes(argv[i]);
		} else if (n < 8) {
			f[n++] = sqlite3_value_int64(argv[i]);
		}
	}
	sqlite3_result_int64(ctx, orch_rec_crc(
		(enum orch_rec_tbl)sqlite3_value_int(argv[0]), f, n, blob, bloblen));
}

/*
 * Opens @dir's store.db (the store closed), with a busy timeout and the
 * rec_crc() SQL function; NULL (said on stderr) on failure.
 */
static inline sqlite3 *db_open(const char *dir, bool readonly)
{
	char path[128];
	sqlite3 *db = NULL;

	snprintf(path, sizeof(path), "%s/%s", dir, STORE_DB_NAME);
	if (sqlite3_open_v2(path, &db, readonly ? SQLITE_OPEN_READONLY :
			    SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		fprintf(stderr, "open %s: %s\n", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return NULL;
	}
	sqlite3_busy_timeout(db, 5000);
	sqlite3_create_function(db, "rec_crc", -1, SQLITE_UTF8, NULL,
				fx_sql_rec_crc, NULL, NULL);
	return db;
}

/* Opens @dir's store.db read-only (the store may be open). */
static inline sqlite3 *db_ro(const char *dir)
{
	char uri[160];
	sqlite3 *db = NULL;

	snprintf(uri, sizeof(uri), "file:%s/%s?mode=ro", dir, STORE_DB_NAME);
	if (sqlite3_open_v2(uri, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, NULL) !=
	    SQLITE_OK) {
		fprintf(stderr, "open %s: %s\n", uri, db ? sqlite3_errmsg(db) : "?");
		sqlite3_close(db);
		return NULL;
	}
	return db;
}

/*
 * Runs @sql: 0, or -EIO (said on stderr).  With @dup_ok a constraint
 * failure (a key collision) is -EEXIST, and not said.
 */
static inline int db_exec(sqlite3 *db, const char *sql, bool dup_ok)
{
	char *msg = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
	bool dup = dup_ok && (rc & 0xff) == SQLITE_CONSTRAINT;

	if (rc != SQLITE_OK && !dup)
		fprintf(stderr, "sql '%s': %s\n", sql, msg ? msg : "?");
	sqlite3_free(msg);
	return rc == SQLITE_OK ? 0 : dup ? -EEXIST : -EIO;
}

#define TBL(t) (1u << ORCH_REC_##t)
#define TBL_ALL (TBL(AGSTAT) | TBL(OBJ) | TBL(BMAP) | TBL(RMAP) | TBL(FSB) | \
		 TBL(FSC) | TBL(REFC) | TBL(CSUM) | TBL(BAD) | TBL(WORK) |   \
		 TBL(SMETA))

/*
 * Recomputes the crc of every record of the tables in @tables (a mask of
 * TBL()), in table order, so that only the invariants are broken.
 */
static inline int db_recrc(sqlite3 *db, unsigned tables)
{
	static const struct {
		enum orch_rec_tbl tbl;
		const char *name, *crc;
	} t[] = {
		{ ORCH_REC_AGSTAT, "agstat", CRC_AGSTAT },
		{ ORCH_REC_OBJ, "obj", CRC_OBJ },
		{ ORCH_REC_BMAP, "bmap", CRC_BMAP },
		{ ORCH_REC_RMAP, "rmap", CRC_RMAP },
		{ ORCH_REC_FSB, "fsb", CRC_FSB },
		{ ORCH_REC_FSC, "fsc", CRC_FSC },
		{ ORCH_REC_REFC, "refc", CRC_REFC },
		{ ORCH_REC_CSUM, "csum", CRC_CSUM },
		{ ORCH_REC_BAD, "bad", CRC_BAD },
		{ ORCH_REC_WORK, "work", CRC_WORK },
		{ ORCH_REC_SMETA, "smeta", CRC_SMETA },
	};
	char sql[1024];
	size_t len = 0;

	sql[0] = 0;
	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (!(tables & (1u << t[i].tbl)))
			continue;
		len += (size_t)snprintf(sql + len, sizeof(sql) - len,
					"UPDATE %s SET crc = %s;", t[i].name,
					t[i].crc);
		if (len >= sizeof(sql))
			return -ENAMETOOLONG;
	}
	return db_exec(db, sql, false);
}

/*
 * Quarantine by hand: SQL_FREE2 picks the first free extent of 2+ blocks
 * in the last AG (temp table f); SQL_RETIRE_BLOCKS retires its first block
 * (OWN_DEFECTIVE rmap, out of fsb/fsc, AG counters); SQL_RETIRE is both
 * with the block's bad record.
 */
#define SQL_FREE2 "CREATE TEMP TABLE f AS SELECT ag, agbno, len FROM fsb" \
		  " WHERE len >= 2 ORDER BY ag DESC, agbno LIMIT 1;"
#define SQL_RETIRE_BLOCKS \
	"INSERT INTO rmap SELECT ag, agbno, -2, 0, 1, 0, 0 FROM f;" \
	"DELETE FROM fsb WHERE (ag, agbno) = (SELECT ag, agbno FROM f);" \
	"DELETE FROM fsc WHERE (ag, len, agbno) = (SELECT ag, len, agbno FROM f);" \
	"INSERT INTO fsb SELECT ag, agbno + 1, len - 1, 0 FROM f;" \
	"INSERT INTO fsc SELECT ag, len - 1, agbno + 1, 0 FROM f;" \
	"UPDATE agstat SET freeblks = freeblks - 1, nrmap = nrmap + 1," \
	" longest = (SELECT max(len) FROM fsb WHERE fsb.ag = agstat.ag)" \
	" WHERE ag = (SELECT ag FROM f);"
#define SQL_RETIRE SQL_FREE2 \
	"INSERT INTO bad SELECT ag, agbno, 1, 1700000000, 1, 0 FROM f;" \
	SQL_RETIRE_BLOCKS

/* One integer from @sql, or @dflt (a failed @sql is said on stderr). */
static inline int64_t db_int(sqlite3 *db, const char *sql, int64_t dflt)
{
	sqlite3_stmt *s;
	int64_t v = dflt;

	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		fprintf(stderr, "sql '%s': %s\n", sql, sqlite3_errmsg(db));
		return dflt;
	}
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* Under valgrind (check-valgrind) everything is some 50 times slower. */
static inline bool fx_slow_env(void)
{
	const char *p = getenv("LD_PRELOAD");

	return p && strstr(p, "vgpreload");
}

#endif
