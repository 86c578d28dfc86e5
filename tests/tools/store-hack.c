/*
 * store-hack: damages a stopped server's store.db on purpose, for the
 * repair and record-damage tests (tests/py/test_repair.py,
 * tests/py/test_store_corrupt.py).  Not an operator tool.
 *
 *   store-hack DATA_DIR drop-bmap HANDLE   delete object HANDLE's extent map
 *                                          (its bmap records; obj and rmap stay)
 *   store-hack DATA_DIR drop-table TABLE   delete every record of TABLE
 *                                          (bmap, rmap, fsb, fsc, refc, agstat)
 *   store-hack DATA_DIR move-bmap HANDLE TARGET stale|crc
 *                                          point the first extent (bmap record)
 *                                          of object HANDLE at the blocks of
 *                                          TARGET's first extent, keeping its
 *                                          old CRC (stale) or giving it a
 *                                          matching one (crc: only the rmap
 *                                          then disagrees)
 *
 * HANDLE is decimal or 0x-hex.  Takes the store lock, so it refuses (exit 4)
 * while a server has the store open.  Prints the number of records deleted.
 * Exit 0, 1 (failure), 2 (usage), 4 (store in use).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "store/store_i.h"

static int usage(void)
{
	fputs("usage: store-hack DATA_DIR drop-bmap HANDLE\n"
	      "       store-hack DATA_DIR drop-table bmap|rmap|fsb|fsc|refc|agstat\n"
	      "       store-hack DATA_DIR move-bmap HANDLE TARGET stale|crc\n",
	      stderr);
	return 2;
}

/* The statement emptying table @t, or ORCH_REC_NSTMT if it may not be dropped. */
static enum orch_rec_stmt table_clear(const char *t)
{
	static const struct {
		const char *name;
		enum orch_rec_stmt clear;
	} ok[] = {
		{ "bmap", ORCH_REC_BMAP_CLEAR }, { "rmap", ORCH_REC_RMAP_CLEAR },
		{ "fsb", ORCH_REC_FSB_CLEAR }, { "fsc", ORCH_REC_FSC_CLEAR },
		{ "refc", ORCH_REC_REFC_CLEAR }, { "agstat", ORCH_REC_AG_CLEAR },
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(t, ok[i].name))
			return ok[i].clear;
	return ORCH_REC_NSTMT;
}

/* Runs statement @id with ?1 = @arg (if @bind); the rows it changed, or -1. */
static long run(struct orch_rec_sq *q, enum orch_rec_stmt id, bool bind, int64_t arg)
{
	sqlite3_stmt *s;

	if (orch_rec_stmt(q, id, &s))
		return -1;
	if (bind)
		sqlite3_bind_int64(s, 1, arg);
	if (orch_rec_exec(q, id)) {
		fprintf(stderr, "store-hack: %s: %s\n", orch_rec_stmt_name(id),
			sqlite3_errmsg(q->q_db));
		return -1;
	}
	return sqlite3_changes(q->q_db);
}

static bool parse_handle(const char *s, uint64_t *h)
{
	char *end;

	*h = strtoull(s, &end, 0);
	return *s && !*end;
}

/* The nid of object @h, or 0 (said on stderr). */
static int64_t object_nid(struct orch_rec_sq *q, uint64_t h)
{
	struct orch_obj_irec o;
	sqlite3_stmt *s;

	if (orch_rec_stmt(q, ORCH_REC_OBJ_BY_HANDLE, &s))
		return 0;
	sqlite3_bind_int64(s, 1, orch_rec_key_u64(h));
	if (orch_rec_step(q, ORCH_REC_OBJ_BY_HANDLE) != 1) {
		fprintf(stderr, "store-hack: no object %#" PRIx64 "\n", h);
		return 0;
	}
	orch_rec_obj_from_disk(s, 0, &o);
	orch_rec_reset(q, ORCH_REC_OBJ_BY_HANDLE);
	return o.nid;
}

/* The first extent of object @h (through the record layer), and its crc. */
static int first_extent(struct orch_rec_sq *q, uint64_t h, struct orch_bmap_irec *e,
			int64_t *crc)
{
	int64_t nid = object_nid(q, h);
	sqlite3_stmt *s;
	int rc;

	if (!nid || orch_rec_stmt(q, ORCH_REC_BMAP_FROM, &s))
		return -1;
	sqlite3_bind_int64(s, 1, nid);
	sqlite3_bind_int64(s, 2, 0);
	rc = orch_rec_step(q, ORCH_REC_BMAP_FROM);
	if (rc != 1) {
		fprintf(stderr, "store-hack: object %#" PRIx64 " has no extent\n", h);
		return -1;
	}
	orch_rec_bmap_from_disk(NULL, s, 0, e);
	*crc = sqlite3_column_int64(s, 6);
	orch_rec_reset(q, ORCH_REC_BMAP_FROM);
	return 0;
}

/* move-bmap: see the head of the file.  Records changed, or -1. */
static long move_bmap(struct orch_rec_sq *q, uint64_t h, uint64_t target, bool stale)
{
	struct orch_bmap_irec e, t;
	int64_t crc, tcrc;
	sqlite3_stmt *s;

	if (first_extent(q, h, &e, &crc) || first_extent(q, target, &t, &tcrc) ||
	    orch_rec_stmt(q, ORCH_REC_BMAP_PUT, &s))
		return -1;
	e.ag = t.ag;
	e.agbno = t.agbno;
	orch_rec_bmap_bind(s, &e);
	if (stale)
		sqlite3_bind_int64(s, 7, crc);
	return orch_rec_exec(q, ORCH_REC_BMAP_PUT) ? -1 : sqlite3_changes(q->q_db);
}

int main(int argc, char **argv)
{
	char path[4096];
	struct orch_rec_sq q;
	sqlite3 *db = NULL;
	long n;
	int fd;

	if (argc != 4 && !(argc == 6 && !strcmp(argv[2], "move-bmap")))
		return usage();
	snprintf(path, sizeof(path), "%s/%s", argv[1], STORE_LOCK_NAME);
	fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0) {
		fprintf(stderr, "store-hack: cannot lock '%s': %s\n", path,
			fd < 0 || errno != EWOULDBLOCK ? strerror(errno) :
			"the store is in use (is the server running?)");
		return fd < 0 ? 1 : 4;
	}
	snprintf(path, sizeof(path), "%s/%s", argv[1], STORE_DB_NAME);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		fprintf(stderr, "store-hack: cannot open '%s'\n", path);
		return 1;
	}
	sqlite3_exec(db, "PRAGMA synchronous=FULL", NULL, NULL, NULL);
	orch_rec_sq_init(&q, db);
	if (!strcmp(argv[2], "drop-bmap")) {
		uint64_t h;
		int64_t nid;

		if (!parse_handle(argv[3], &h))
			return usage();
		nid = object_nid(&q, h);
		n = nid ? run(&q, ORCH_REC_BMAP_DEL_OBJ, true, nid) : 0;
	} else if (!strcmp(argv[2], "move-bmap")) {
		uint64_t h, target;

		if (!parse_handle(argv[3], &h) || !parse_handle(argv[4], &target) ||
		    (strcmp(argv[5], "stale") && strcmp(argv[5], "crc")))
			return usage();
		n = move_bmap(&q, h, target, !strcmp(argv[5], "stale"));
	} else if (!strcmp(argv[2], "drop-table") && table_clear(argv[3]) != ORCH_REC_NSTMT) {
		n = run(&q, table_clear(argv[3]), false, 0);
	} else {
		orch_rec_sq_fini(&q);
		sqlite3_close(db);
		return usage();
	}
	orch_rec_sq_fini(&q);
	if (n >= 0 && sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL,
				   NULL, NULL) != SQLITE_OK)
		n = -1;
	sqlite3_close(db);
	close(fd);
	if (n < 0)
		return 1;
	printf("%ld\n", n);
	return 0;
}
