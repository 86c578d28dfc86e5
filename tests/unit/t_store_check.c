/*
 * The store's invariant checker and owners query (src/store/check.c): a
 * store written through the public API checks clean; then each of a list of
 * targeted corruptions, made on store.db with SQLite behind the store's
 * back (with or without recomputing the record CRCs), must be reported
 * under its rule, and garbage values must not crash the checker.  I17: a
 * flipped byte in the blocks file is found by the data check only.  I27:
 * the owners query equals a brute-force scan of the rmap table for random
 * ranges, on a store with extents of every length up to maxext.  The block
 * checksum listing (store/sums.c) against the bytes written, page by page.
 *
 * ORCH_TEST_VERBOSE=1 prints every finding; ORCH_TEST_SEED=<n> replays one
 * random run.
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

#include "store/store.h"
#include "common/crc32c.h"
#include "common/util.h"
#include "store/store_i.h"
#include "store/sums.h"
#include "unit/store_fx.h"
#include "unit/test.h"

/* --- Fixture ----------------------------------------------------------------- */

static char D[FX_DIR_MAX];
static struct orch_store *S;

static void fx_teardown(void)
{
	fx_close(&S);
	fx_rmdir(D, false);
}

/* A failed check returns early: the last store goes at exit. */
__attribute__((constructor)) static void fx_at_exit(void)
{
	atexit(fx_teardown);
}

static int fx_setup(uint64_t size, uint32_t ag_blocks, uint32_t maxext)
{
	struct orch_store_geom g = { .size = size, .ag_blocks = ag_blocks,
				     .maxext = maxext };
	int rc;

	fx_teardown();
	rc = fx_mkdir(D, sizeof(D), "t_store_check");
	return rc ? rc : fx_mkstore(D, &g, &S);
}

/* --- Findings ---------------------------------------------------------------- */

#define NRULES 19
#define KEEP 40

struct found {
	long n[NRULES];
	int kept;
	char text[KEEP][256];
};

static int rule_index(const char *rule)
{
	int i;

	if (!strcmp(rule, "crc"))
		return 0;
	if (rule[0] == 'I' && (i = atoi(rule + 1)) >= 1 && i < NRULES)
		return i;
	return -1;
}

static void on_finding(void *arg, const struct orch_store_finding *f)
{
	struct found *fd = arg;
	int i = rule_index(f->rule);

	if (i >= 0)
		fd->n[i]++;
	else
		fprintf(stderr, "unknown rule '%s'\n", f->rule);
	if (fd->kept < KEEP)
		snprintf(fd->text[fd->kept++], sizeof(fd->text[0]),
			 "%s %s ag=%" PRId64 " block=%" PRId64 " h=%#" PRIx64
			 ": %s", f->rule, f->structure, f->ag, f->block,
			 f->handle, f->detail);
	if (getenv("ORCH_TEST_VERBOSE"))
		fprintf(stderr, "  finding: %s %s ag=%" PRId64 " block=%" PRId64
			" h=%#" PRIx64 ": %s\n", f->rule, f->structure, f->ag,
			f->block, f->handle, f->detail);
}

static void found_dump(const char *what, const struct found *fd)
{
	fprintf(stderr, "%s: findings:\n", what);
	for (int i = 0; i < fd->kept; i++)
		fprintf(stderr, "  %s\n", fd->text[i]);
}

static long check(bool data, struct found *fd)
{
	memset(fd, 0, sizeof(*fd));
	return orch_store_check(S, data, on_finding, fd);
}

/* --- A small populated store -------------------------------------------------- */

#define H_SIGNED 0x8000000000000007ull  /* a handle with the top bit set */

static unsigned char *pattern(size_t len, unsigned seed)
{
	unsigned char *p = malloc(len);

	for (size_t i = 0; p && i < len; i++)
		p[i] = (unsigned char)(i * 131 + seed * 7 + (i >> 12));
	return p;
}

static int populate(void)
{
	unsigned char *b = pattern(256 * 1024, 1);
	int rc = 0;

	if (!b)
		return -ENOMEM;
	if (!rc)
		rc = orch_store_write(S, 1, 0, b, 100000);
	if (!rc)
		rc = orch_store_write(S, 2, 1 << 20, b + 7, 10000);
	if (!rc)
		rc = orch_store_write(S, 2, 0, b + 9, 5000);
	if (!rc)
		rc = orch_store_write(S, 3, 0, b + 3, 200000);
	if (!rc)
		rc = orch_store_punch(S, 3, 50000, 70000);
	if (!rc)
		rc = orch_store_write(S, 4, 0, b + 5, 80000);
	if (!rc)
		rc = orch_store_truncate(S, 4, 30000);
	if (!rc)
		rc = orch_store_write(S, 5, 0, b, 40000);
	if (!rc)
		rc = orch_store_delete(S, 5);
	for (int i = 0; i < 3 && !rc; i++)
		rc = orch_store_write(S, H_SIGNED, (uint64_t)i * 4096,
				      b + 4096 * i, 4096);
	if (!rc)
		rc = orch_store_truncate(S, 7, 100000);
	if (!rc)
		rc = orch_store_write(S, 8, 0, b, 1);
	if (!rc)
		rc = orch_store_write(S, 1, 8192, b + 11, 3000);
	free(b);
	return rc;
}

#define SMALL_SIZE (4u << 20)   /* 1024 blocks */
#define SMALL_AG 64u
#define SMALL_MAXEXT 16u

ORCH_TEST(check_clean)
{
	struct found fd;
	long n;

	ORCH_CHECK_OK(fx_setup(SMALL_SIZE, SMALL_AG, SMALL_MAXEXT));
	n = check(true, &fd);
	if (n != 0)
		found_dump("empty store", &fd);
	ORCH_CHECK(n == 0);
	ORCH_CHECK_OK(populate());
	n = check(true, &fd);
	if (n != 0)
		found_dump("populated store", &fd);
	ORCH_CHECK(n == 0);
	ORCH_CHECK(orch_store_check(S, false, NULL, NULL) == 0);
	ORCH_CHECK_OK(fx_reopen(D, &S));
	n = check(true, &fd);
	if (n != 0)
		found_dump("reopened store", &fd);
	ORCH_CHECK(n == 0);
	fx_teardown();
}

/* --- Targeted corruptions ------------------------------------------------------ */

struct corruption {
	const char *name;
	const char *sql;        /* run on store.db with the store closed */
	bool recrc;             /* then recompute every record's crc */
	const char *want[4];    /* rules that must be reported; "clean":
				   a legal state, no finding at all */
};

/* The first data extent of at least 2 blocks, in bmap order. */
#define BM2 "(SELECT nid, off, ag, agbno, len FROM bmap WHERE len >= 2" \
	    " ORDER BY nid, off LIMIT 1)"
#define RM1 "(SELECT ag, agbno, owner, off FROM rmap WHERE owner > 0" \
	    " ORDER BY ag, agbno LIMIT 1)"

/*
 * Quarantine by hand (SQL_RETIRE, store_fx.h): the first block of a free
 * extent of >= 2 blocks in the last AG retired (bad record, OWN_DEFECTIVE,
 * out of fsb/fsc, counters).  RETIRE_NOBAD is the same without the bad record.
 */
#define RETIRE_NOBAD SQL_FREE2 SQL_RETIRE_BLOCKS

static const struct corruption corruptions[] = {
	/* I18 (quarantine): the two legal states of a bad block ... */
	{ "bad block retired", SQL_RETIRE, true, { "clean" } },
	{ "bad block still mapped",
	  "INSERT INTO bad SELECT ag, agbno, len, 1700000000, 1, 0 FROM " BM2,
	  true, { "clean" } },
	/* ... and the illegal ones. */
	{ "bad block of unknown source",
	  "INSERT INTO bad SELECT ag, agbno, len, 1700000000, 7, 0 FROM " BM2,
	  true, { "I18" } },
	{ "OWN_DEFECTIVE without bad record", RETIRE_NOBAD, true, { "I18" } },
	{ "bad block half retired, half free",
	  SQL_FREE2 "INSERT INTO bad SELECT ag, agbno, 2, 1700000000, 1, 0 FROM f;"
	  SQL_RETIRE_BLOCKS, true, { "I18" } },
	{ "bad block retired and mapped",
	  "INSERT INTO bad SELECT ag, agbno, 1, 1700000000, 1, 0 FROM " BM2 ";"
	  "INSERT INTO rmap SELECT ag, agbno, -2, 0, 1, 0, 0 FROM " BM2,
	  true, { "I18", "I14" } },
	{ "bad block of OWN_FS",
	  "INSERT INTO bad VALUES (0, 0, 1, 1700000000, 1, 0)",
	  true, { "I18" } },
	{ "bad records overlap",
	  "INSERT INTO bad SELECT ag, agbno, len, 1700000000, 1, 0 FROM " BM2 ";"
	  "INSERT INTO bad SELECT ag, agbno + 1, 1, 1700000000, 1, 0 FROM " BM2,
	  true, { "I18" } },
	{ "fsb delete",
	  "DELETE FROM fsb WHERE (ag, agbno) = (SELECT ag, agbno FROM fsb"
	  " ORDER BY ag DESC, agbno LIMIT 1)",
	  false, { "I1", "I2", "I3" } },
	{ "fsc delete",
	  "DELETE FROM fsc WHERE (ag, len, agbno) = (SELECT ag, len, agbno"
	  " FROM fsc LIMIT 1)",
	  false, { "I2" } },
	{ "rmap len, crc not updated",
	  "UPDATE rmap SET len = len + 1 WHERE (ag, agbno, owner, off) = " RM1,
	  false, { "crc" } },
	{ "rmap len shortened",
	  "UPDATE rmap SET len = len - 1 WHERE (ag, agbno, owner, off) ="
	  " (SELECT ag, agbno, nid, off FROM " BM2 ")",
	  true, { "I8", "I9", "I1", "I16" } },
	{ "bmap overlap",
	  "INSERT INTO bmap SELECT nid, off + 1, ag, agbno + 1, 1, 0, 0 FROM " BM2,
	  true, { "I7", "I8" } },
	{ "obj nblocks",
	  "UPDATE obj SET nblocks = nblocks + 1 WHERE nid = (SELECT min(nid) FROM obj)",
	  true, { "I7" } },
	{ "obj size shrunk",
	  "UPDATE obj SET size = 1 WHERE nid = (SELECT nid FROM " BM2 ")",
	  true, { "I7" } },
	{ "agstat freeblks",
	  "UPDATE agstat SET freeblks = freeblks + 1 WHERE ag = 1",
	  true, { "I3" } },
	{ "agstat missing",
	  "DELETE FROM agstat WHERE ag = 2",
	  false, { "I3" } },
	{ "csum bit",
	  "UPDATE csum SET valid = (valid | 1) - (valid & 1) WHERE (ag, grp) ="
	  " (SELECT ag, grp FROM csum LIMIT 1)",
	  true, { "I16" } },
	{ "csum sums, crc not updated",
	  "UPDATE csum SET sums = zeroblob(256) WHERE (ag, grp) ="
	  " (SELECT ag, grp FROM csum LIMIT 1)",
	  false, { "crc" } },
	{ "csum sums short",
	  "UPDATE csum SET sums = x'0102' WHERE (ag, grp) ="
	  " (SELECT ag, grp FROM csum LIMIT 1)",
	  true, { "I4" } },
	{ "next_nid low",
	  "UPDATE smeta SET v = 1 WHERE k = 'next_nid'",
	  true, { "I10" } },
	{ "smeta crc",
	  "INSERT INTO smeta VALUES ('extra', 5, 0)",
	  false, { "crc" } },
	{ "refc count 2",
	  "INSERT INTO refc SELECT ag, agbno, 1, 2, 0 FROM " BM2,
	  true, { "I11" } },
	{ "refc count 1",
	  "INSERT INTO refc SELECT ag, agbno, 1, 1, 0 FROM " BM2,
	  true, { "I12", "I11" } },
	{ "bad without rmap",
	  "INSERT INTO bad SELECT ag, agbno, 1, 0, 0, 0 FROM fsb"
	  " ORDER BY ag DESC LIMIT 1",
	  true, { "I18" } },
	{ "OWN_DEFECTIVE on data",
	  "INSERT INTO rmap SELECT ag, agbno, -2, 0, 1, 0, 0 FROM " BM2,
	  true, { "I14", "I18" } },
	{ "shared without REFLINK",
	  "INSERT INTO rmap SELECT ag, agbno, (SELECT max(nid) FROM obj), 999, 1, 0, 0"
	  " FROM " BM2,
	  true, { "I13", "I11", "I9" } },
	{ "special owner off",
	  "UPDATE rmap SET off = 3 WHERE owner = -1",
	  true, { "I5" } },
	{ "OWN_FS lost",
	  "DELETE FROM rmap WHERE owner = -1",
	  true, { "I6", "I1" } },
	{ "OWN_FS elsewhere",
	  "INSERT INTO rmap SELECT ag, agbno, -1, 0, 1, 0, 0 FROM fsb"
	  " ORDER BY ag DESC LIMIT 1",
	  true, { "I6", "I1" } },
	{ "unknown owner",
	  "INSERT INTO rmap SELECT ag, agbno, -7, 0, 1, 0, 0 FROM fsb"
	  " ORDER BY ag DESC LIMIT 1",
	  true, { "I15", "I1" } },
	{ "bmap deleted",
	  "DELETE FROM bmap WHERE (nid, off) = (SELECT nid, off FROM " BM2 ")",
	  true, { "I9", "I7" } },
	{ "rmap deleted",
	  "DELETE FROM rmap WHERE (ag, agbno, owner, off) = " RM1,
	  true, { "I8", "I1" } },
	{ "obj unknown flags",
	  "UPDATE obj SET flags = 4 WHERE nid = (SELECT min(nid) FROM obj)",
	  true, { "I7" } },
	{ "obj DYING without work item",
	  "UPDATE obj SET flags = 2 WHERE nid = (SELECT min(nid) FROM obj)",
	  true, { "I7" } },
	{ "work item of unknown type",
	  "INSERT INTO work SELECT 1, 9, 1, 0, 0, 0, 0;"
	  "UPDATE smeta SET v = 2 WHERE k = 'next_work'",
	  true, { "I4" } },
	{ "work item past next_work",
	  "INSERT INTO work SELECT 5, 9, 1, 0, 0, 0, 0",
	  true, { "I10", "I4" } },
	{ "fsb outside every AG",
	  "INSERT INTO fsb VALUES (999, 0, 1, 0)",
	  true, { "I4" } },
	{ "garbage lengths",
	  "UPDATE rmap SET len = -5 WHERE (ag, agbno, owner, off) = " RM1 ";"
	  "UPDATE bmap SET len = 1 << 40 WHERE (nid, off) ="
	  " (SELECT nid, off FROM " BM2 ");"
	  "UPDATE fsb SET len = 9223372036854775807 WHERE (ag, agbno) ="
	  " (SELECT ag, agbno FROM fsb LIMIT 1);"
	  "UPDATE fsb SET agbno = -3 WHERE (ag, agbno) ="
	  " (SELECT ag, agbno FROM fsb ORDER BY ag DESC LIMIT 1);"
	  "INSERT INTO rmap VALUES (3, 9223372036854775807, 5, -9223372036854775808,"
	  " -9223372036854775808, -1, 0);"
	  "INSERT INTO refc VALUES (4, 1, 9223372036854775807, 9223372036854775807, 0);"
	  "INSERT INTO csum VALUES (5, -1, -1, x'', 0);"
	  "INSERT INTO csum VALUES (5, 9223372036854775807, -1, 'text', 0);"
	  "INSERT INTO bad VALUES (6, -1, -1, 0, 0, 0);"
	  "UPDATE obj SET size = -1, nextents = -1, nblocks = 1 << 62"
	  " WHERE nid = (SELECT max(nid) FROM obj);"
	  "UPDATE agstat SET longest = -9223372036854775808, blocks = 'x' WHERE ag = 0;",
	  true, { "I4", "I1", "I7" } },
	{ "garbage, crc not updated",
	  "UPDATE rmap SET len = 4294967296 + len, flags = 255;"
	  "UPDATE bmap SET agbno = agbno + 4294967296;"
	  "UPDATE csum SET sums = randomblob(300);",
	  false, { "crc", "I4" } },
};

static bool want_met(const struct corruption *c, const struct found *fd,
		     long n)
{
	if (n < 1)
		return false;
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(c->want) && c->want[i]; i++) {
		int r = rule_index(c->want[i]);

		if (r < 0 || fd->n[r] == 0) {
			fprintf(stderr, "corruption '%s': no %s finding\n",
				c->name, c->want[i]);
			return false;
		}
	}
	return true;
}

static void run_corruption(const struct corruption *c, bool *ok)
{
	struct found fd;
	sqlite3 *db;
	long n, total;
	int rc;

	*ok = false;
	if (fx_setup(SMALL_SIZE, SMALL_AG, SMALL_MAXEXT) || populate()) {
		fprintf(stderr, "corruption '%s': setup failed\n", c->name);
		return;
	}
	fx_close(&S);
	db = db_open(D, false);
	if (!db)
		return;
	rc = db_exec(db, c->sql, false);
	if (!rc && c->recrc)
		rc = db_recrc(db, TBL_ALL);
	sqlite3_close(db);
	if (rc)
		return;
	rc = orch_store_open(D, &S);
	if (rc) {
		fprintf(stderr, "corruption '%s': open: %s\n", c->name,
			strerror(-rc));
		return;
	}
	n = check(true, &fd);
	total = orch_store_check(S, false, NULL, NULL);
	if (n < 0) {
		fprintf(stderr, "corruption '%s': check: %s\n", c->name,
			strerror((int)-n));
		return;
	}
	if (c->want[0] && !strcmp(c->want[0], "clean")) {
		if (n != 0 || total != 0)
			found_dump(c->name, &fd);
		*ok = n == 0 && total == 0;
		return;
	}
	if (!want_met(c, &fd, n) || total < 1) {
		found_dump(c->name, &fd);
		return;
	}
	if (getenv("ORCH_TEST_VERBOSE"))
		found_dump(c->name, &fd);
	*ok = true;
}

ORCH_TEST(check_corruptions)
{
	int failed = 0;

	for (size_t i = 0; i < ORCH_ARRAY_SIZE(corruptions); i++) {
		bool ok;

		run_corruption(&corruptions[i], &ok);
		if (!ok)
			failed++;
	}
	fx_teardown();
	ORCH_CHECK(failed == 0);
}

/* I17: a flipped data byte is found by the data check, and only by it. */
ORCH_TEST(check_data_flip)
{
	struct found fd;
	sqlite3 *db;
	int64_t ag, agbno, nid, off;
	uint64_t handle, g;
	char path[128];
	unsigned char byte;
	int fd_blocks;
	long n;

	ORCH_CHECK_OK(fx_setup(SMALL_SIZE, SMALL_AG, SMALL_MAXEXT));
	ORCH_CHECK_OK(populate());
	fx_close(&S);
	db = db_open(D, true);
	ORCH_CHECK(db);
	nid = db_int(db, "SELECT nid FROM " BM2, -1);
	off = db_int(db, "SELECT off FROM " BM2, -1);
	ag = db_int(db, "SELECT ag FROM " BM2, -1);
	agbno = db_int(db, "SELECT agbno FROM " BM2, -1);
	{
		char sql[128];

		snprintf(sql, sizeof(sql), "SELECT handle FROM obj WHERE nid = %"
			 PRId64, nid);
		handle = orch_rec_unkey_u64(db_int(db, sql, 0));
	}
	sqlite3_close(db);
	ORCH_CHECK(nid > 0 && ag >= 0 && agbno >= 0);
	/* The second block of that extent. */
	g = (uint64_t)ag * SMALL_AG + (uint64_t)agbno + 1;
	snprintf(path, sizeof(path), "%s/%s", D, STORE_BLOCKS_NAME);
	fd_blocks = open(path, O_RDWR);
	ORCH_CHECK(fd_blocks >= 0);
	ORCH_CHECK(pread(fd_blocks, &byte, 1, (off_t)(g * 4096 + 100)) == 1);
	byte ^= 0x5a;
	ORCH_CHECK(pwrite(fd_blocks, &byte, 1, (off_t)(g * 4096 + 100)) == 1);
	close(fd_blocks);

	ORCH_CHECK_OK(orch_store_open(D, &S));
	n = check(false, &fd);
	if (n != 0)
		found_dump("data flip, no data check", &fd);
	ORCH_CHECK(n == 0);
	n = check(true, &fd);
	if (n != 1 || fd.n[17] != 1)
		found_dump("data flip", &fd);
	ORCH_CHECK(n == 1 && fd.n[17] == 1);
	ORCH_CHECK(fd.kept == 1);
	/* The finding names the object, its byte offset and the block. */
	{
		char want[64];

		snprintf(want, sizeof(want), "h=%#" PRIx64 ":", handle);
		ORCH_CHECK(strstr(fd.text[0], want));
		snprintf(want, sizeof(want), "byte offset %" PRIu64,
			 ((uint64_t)off + 1) * 4096);
		ORCH_CHECK(strstr(fd.text[0], want));
		snprintf(want, sizeof(want), "physical block %" PRIu64, g);
		ORCH_CHECK(strstr(fd.text[0], want));
	}
	fx_teardown();
}

/* The report cap: a flood is counted in full but reported at most 100 times. */
static void count_cb(void *arg, const struct orch_store_finding *f)
{
	(void)f;
	(*(long *)arg)++;
}

ORCH_TEST(check_flood_capped)
{
	sqlite3 *db;
	long n, reported = 0;

	ORCH_CHECK_OK(fx_setup(SMALL_SIZE, SMALL_AG, SMALL_MAXEXT));
	ORCH_CHECK_OK(populate());
	fx_close(&S);
	db = db_open(D, false);
	ORCH_CHECK(db);
	/* 300 objects past next_nid with a wrong crc: 300 I10 and 300 crc. */
	ORCH_CHECK(db_exec(db, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL"
			       " SELECT x + 1 FROM c WHERE x < 300)"
			       " INSERT INTO obj SELECT 100000 + x, x, 0, 0, 0, 0,"
			       " 0 FROM c", false) == 0);
	sqlite3_close(db);
	ORCH_CHECK_OK(orch_store_open(D, &S));
	n = orch_store_check(S, false, count_cb, &reported);
	ORCH_CHECK(n == 600);
	ORCH_CHECK(reported == 200);
	ORCH_CHECK(orch_store_check(S, true, NULL, NULL) == 600);
	fx_teardown();
}

/* --- I27: the owners query against a brute-force scan ------------------------ */

#define BIG_SIZE (16u << 20)    /* 4096 blocks */
#define BIG_AG 256u
#define BIG_MAXEXT 64u

struct rrow {
	uint32_t ag, agbno, len, flags;
	int64_t owner;
	uint64_t handle, off;
};

struct rows {
	struct rrow *v;
	size_t n, cap;
	bool overflow;
	int stop_after;         /* owners callback: stop with 7 after this many */
};

static int rows_push(struct rows *r, const struct rrow *x)
{
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 256;
		struct rrow *p = realloc(r->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		r->v = p;
		r->cap = cap;
	}
	r->v[r->n++] = *x;
	return 0;
}

static int owners_cb(void *arg, const struct orch_store_rmap *m)
{
	struct rows *r = arg;
	struct rrow x = { .ag = m->ag, .agbno = m->agbno, .len = m->len,
			  .flags = m->flags, .owner = m->owner,
			  .handle = m->handle, .off = m->fileoff };

	if (rows_push(r, &x))
		return -ENOMEM;
	if (r->stop_after && (int)r->n == r->stop_after)
		return 7;
	return 0;
}

static int load_rmap(struct rows *all)
{
	sqlite3 *db = db_open(D, true);
	sqlite3_stmt *s;
	int rc;

	if (!db)
		return -EIO;
	rc = sqlite3_prepare_v2(db,
		"SELECT r.ag, r.agbno, r.len, r.flags, r.owner, o.handle, r.off"
		" FROM rmap r LEFT JOIN obj o ON o.nid = r.owner"
		" ORDER BY r.ag, r.agbno, r.owner, r.off", -1, &s, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_close(db);
		return -EIO;
	}
	all->n = 0;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		struct rrow x = {
			.ag = (uint32_t)sqlite3_column_int64(s, 0),
			.agbno = (uint32_t)sqlite3_column_int64(s, 1),
			.len = (uint32_t)sqlite3_column_int64(s, 2),
			.flags = (uint32_t)sqlite3_column_int64(s, 3),
			.owner = sqlite3_column_int64(s, 4),
			.off = (uint64_t)sqlite3_column_int64(s, 6),
		};

		if (x.owner > 0)
			x.handle = orch_rec_unkey_u64(sqlite3_column_int64(s, 5));
		if (rows_push(all, &x))
			break;
	}
	sqlite3_finalize(s);
	sqlite3_close(db);
	return rc == SQLITE_DONE ? 0 : -EIO;
}

static bool rrow_eq(const struct rrow *a, const struct rrow *b)
{
	return a->ag == b->ag && a->agbno == b->agbno && a->len == b->len &&
	       a->flags == b->flags && a->owner == b->owner &&
	       a->handle == b->handle && a->off == b->off;
}

/* Compares orch_store_owners(start, end) with the filtered full scan. */
static bool owners_match(const struct rows *all, uint64_t start, uint64_t end)
{
	struct rows got = { 0 };
	size_t k = 0;
	bool ok = true;
	int rc;

	if (start >= end)       /* the filter below would take [s, s) */
		return orch_store_owners(S, start, end, owners_cb, &got) == 0 &&
		       got.n == 0;
	rc = orch_store_owners(S, start, end, owners_cb, &got);
	if (rc) {
		fprintf(stderr, "owners [%" PRIu64 ", %" PRIu64 "): %s\n", start,
			end, strerror(-rc));
		free(got.v);
		return false;
	}
	for (size_t i = 0; i < all->n && ok; i++) {
		const struct rrow *x = &all->v[i];
		uint64_t g = (uint64_t)x->ag * BIG_AG + x->agbno;

		if (!(g < end && g + x->len > start))
			continue;
		if (k >= got.n || !rrow_eq(x, &got.v[k])) {
			fprintf(stderr, "owners [%" PRIu64 ", %" PRIu64
				"): record %zu: want ag %u agbno %u len %u owner %"
				PRId64 ", got %s\n", start, end, k, x->ag,
				x->agbno, x->len, x->owner,
				k < got.n ? "another" : "nothing");
			ok = false;
		}
		k++;
	}
	if (ok && k != got.n) {
		fprintf(stderr, "owners [%" PRIu64 ", %" PRIu64 "): %zu records,"
			" want %zu\n", start, end, got.n, k);
		ok = false;
	}
	free(got.v);
	return ok;
}

/*
 * Random writes (long sequential runs and short ones), punches, truncates
 * and deletes on objects 1..@nobj below byte @span.
 */
static int churn(int nops, unsigned nobj, uint64_t span)
{
	unsigned char *b = pattern(1 << 20, 3);
	int rc = 0;

	if (!b)
		return -ENOMEM;
	for (int i = 0; i < nops && !rc; i++) {
		uint64_t h = 1 + rng_below(nobj);
		uint64_t off = rng_below(span);
		unsigned op = (unsigned)rng_below(100);

		if (op < 30) {          /* long sequential run */
			uint64_t len = 4096 * (1 + rng_below(3 * BIG_MAXEXT));

			for (uint64_t o = 0; o < len && !rc; o += 65536)
				rc = orch_store_write(S, h, (off & ~4095ull) + o,
						      b + rng_below(4096),
						      len - o < 65536 ? len - o : 65536);
		} else if (op < 65) {   /* short, unaligned */
			rc = orch_store_write(S, h, off, b + rng_below(4096),
					      1 + rng_below(20000));
		} else if (op < 85) {
			rc = orch_store_punch(S, h, off, 1 + rng_below(300000));
		} else if (op < 93) {
			rc = orch_store_truncate(S, h, rng_below(span + span / 2));
		} else {
			rc = orch_store_delete(S, h);
		}
		if (rc == -ENOSPC) {    /* full: make room */
			rc = orch_store_delete(S, h);
		}
	}
	free(b);
	return rc;
}

ORCH_TEST(owners_bruteforce)
{
	struct rows all = { 0 }, some = { .stop_after = 3 };
	struct found fd;
	uint64_t total;
	long n;
	int bad = 0;

	fprintf(stderr, "seed %" PRIu64 "\n", rng_seed(8));
	ORCH_CHECK_OK(fx_setup(BIG_SIZE, BIG_AG, BIG_MAXEXT));
	{
		/* Long single writes: extents of maxext, some across AGs. */
		unsigned char *b = pattern(1 << 20, 5);

		ORCH_CHECK(b);
		for (uint64_t h = 100; h < 104; h++)
			ORCH_CHECK_OK(orch_store_write(S, h, rng_below(64) * 4096,
						       b, 1 << 20));
		free(b);
	}
	ORCH_CHECK_OK(churn(600, 12, 768 << 10));
	n = check(true, &fd);
	if (n != 0)
		found_dump("after churn", &fd);
	ORCH_CHECK(n == 0);
	ORCH_CHECK_OK(load_rmap(&all));
	ORCH_CHECK(all.n > 10);
	{
		size_t longest = 0, shortest = 0;

		for (size_t i = 0; i < all.n; i++) {
			longest += all.v[i].len == BIG_MAXEXT;
			shortest += all.v[i].len < 4;
		}
		if (getenv("ORCH_TEST_VERBOSE"))
			fprintf(stderr, "%zu rmap records, %zu of maxext, %zu"
				" shorter than 4\n", all.n, longest, shortest);
		/* Extents of maxext that end inside the queries, and short ones. */
		ORCH_CHECK(longest > 0 && shortest > 0);
	}
	{
		struct orch_store_info info;

		orch_store_info(S, &info);
		ORCH_CHECK(info.ag_blocks == BIG_AG && info.maxext == BIG_MAXEXT);
		total = info.blocks;
	}
	/* Whole store, each AG, edges, and random ranges. */
	if (!owners_match(&all, 0, total) || !owners_match(&all, 0, 1) ||
	    !owners_match(&all, total - 1, total) ||
	    !owners_match(&all, 5, 5) || !owners_match(&all, 0, UINT64_MAX))
		bad++;
	for (uint64_t ag = 0; ag * BIG_AG < total; ag++)
		if (!owners_match(&all, ag * BIG_AG, (ag + 1) * BIG_AG) ||
		    !owners_match(&all, ag * BIG_AG + BIG_AG - 1,
				  ag * BIG_AG + BIG_AG + 1))
			bad++;
	/* Ranges starting inside every record, and right after its end. */
	for (size_t i = 0; i < all.n && bad < 5; i++) {
		uint64_t g = (uint64_t)all.v[i].ag * BIG_AG + all.v[i].agbno;

		if (!owners_match(&all, g + all.v[i].len - 1, g + all.v[i].len) ||
		    !owners_match(&all, g + all.v[i].len, g + all.v[i].len + 1 +
				  rng_below(BIG_MAXEXT)))
			bad++;
	}
	for (int i = 0; i < 2000 && bad < 5; i++) {
		uint64_t s = rng_below(total);
		uint64_t len = rng_below(4) == 0 ? rng_below(3 * BIG_AG) :
			       1 + rng_below(BIG_MAXEXT);

		if (!owners_match(&all, s, s + len))
			bad++;
	}
	ORCH_CHECK(bad == 0);
	/* The callback's non-zero value stops the query and is returned. */
	ORCH_CHECK(orch_store_owners(S, 0, total, owners_cb, &some) == 7);
	ORCH_CHECK(some.n == 3);
	free(some.v);
	free(all.v);
	fx_teardown();
}

/* A long random history stays clean, data included, across a reopen. */
ORCH_TEST(check_clean_after_churn)
{
	struct found fd;
	long n;

	fprintf(stderr, "seed %" PRIu64 "\n", rng_seed(8));
	ORCH_CHECK_OK(fx_setup(SMALL_SIZE, SMALL_AG, SMALL_MAXEXT));
	for (int round = 0; round < 4; round++) {
		ORCH_CHECK_OK(churn(150, 24, 2 << 20));
		n = check(true, &fd);
		if (n != 0)
			found_dump("churn", &fd);
		ORCH_CHECK(n == 0);
		ORCH_CHECK_OK(fx_reopen(D, &S));
	}
	fx_teardown();
}

/* --- Block checksums ------------------------------------------------------- */

/* Every page of object @h from block @from, @max records per page, into @out. */
static size_t sums_all(uint64_t h, uint64_t from, size_t max, struct orch_blocksum *out,
		       size_t cap)
{
	size_t total = 0;
	bool eof = false;

	while (!eof) {
		size_t n = 0;
		uint64_t next;

		if (orch_store_block_sums(S, h, from, out + total, ORCH_MIN(max, cap - total), &n,
					  &next, &eof))
			return SIZE_MAX;
		total += n;
		if (!eof && (next <= from || total == cap))
			return SIZE_MAX;   /* must advance; must not overflow @out */
		from = next;
	}
	return total;
}

/* Field by field: the struct has padding that memcmp would read. */
static bool sums_equal(const struct orch_blocksum *a, const struct orch_blocksum *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (a[i].block != b[i].block || a[i].gblock != b[i].gblock || a[i].crc != b[i].crc)
			return false;
	return true;
}

/*
 * Written blocks only (holes, punched and truncated ones skipped), each with
 * the crc32c of its bytes; a clone's blocks have the source's physical
 * blocks; pages of every size and a start inside an extent give the same.
 */
ORCH_TEST(block_sums_listing)
{
	enum { NB = 40 };
	unsigned char *b = pattern(NB * 4096, 5);
	struct orch_blocksum all[NB + 8], part[NB + 8], cl[NB + 8];
	size_t n, m;

	ORCH_CHECK(b != NULL);
	ORCH_CHECK(fx_setup(SMALL_SIZE, SMALL_AG, SMALL_MAXEXT) == 0);
	ORCH_CHECK(orch_store_write(S, 10, 0, b, NB * 4096) == 0);
	ORCH_CHECK(orch_store_punch(S, 10, 5 * 4096, 3 * 4096) == 0);   /* blocks 5..7 */
	ORCH_CHECK(orch_store_write(S, 10, 50 * 4096, b, 100) == 0);     /* a partial block */
	ORCH_CHECK(orch_store_clone(S, 10, 16 * 4096, 11, 0, 8 * 4096) == 0);

	n = sums_all(10, 0, 1000, all, NB + 8);
	ORCH_CHECK(n == NB - 3 + 1);
	for (size_t i = 0, k = 0; k < NB + 1; k++) {
		uint64_t blk = k < NB ? k : 50;
		unsigned char z[4096] = { 0 };

		if (blk >= 5 && blk < 8)
			continue;
		ORCH_CHECK(all[i].block == blk);
		if (blk == 50) {
			memcpy(z, b, 100);
			ORCH_CHECK(all[i].crc == orch_crc32c(0, z, 4096));
		} else {
			ORCH_CHECK(all[i].crc == orch_crc32c(0, b + blk * 4096, 4096));
		}
		i++;
	}
	for (size_t max = 1; max <= 17; max += 4) {
		m = sums_all(10, 0, max, part, NB + 8);
		ORCH_CHECK(m == n && sums_equal(part, all, n));
	}
	/* From block 20 (inside an extent: maxext is 16). */
	m = sums_all(10, 20, 3, part, NB + 8);
	ORCH_CHECK(m == n - 17 && sums_equal(part, all + 17, m));
	/* The clone: blocks 0..7 of object 11 are object 10's blocks 16..23. */
	m = sums_all(11, 0, 5, cl, NB + 8);
	ORCH_CHECK(m == 8);
	for (size_t i = 0; i < m; i++)
		ORCH_CHECK(cl[i].block == i && cl[i].gblock == all[13 + i].gblock &&
			   cl[i].crc == all[13 + i].crc);
	ORCH_CHECK(sums_all(12, 0, 5, cl, NB + 8) == 0);   /* no such object */
	ORCH_CHECK(orch_store_truncate(S, 10, 2 * 4096) == 0);
	ORCH_CHECK(sums_all(10, 0, 5, cl, NB + 8) == 2);
	free(b);
}

ORCH_TEST_MAIN()
