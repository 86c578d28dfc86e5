/*
 * store-hack: damages a stopped server's store.db on purpose, for the
 * repair tests (tests/py/test_repair.py).  Not an operator tool.
 *
 *   store-hack DATA_DIR drop-bmap HANDLE   delete object HANDLE's extent map
 *                                          (its bmap records; obj and rmap stay)
 *   store-hack DATA_DIR drop-table TABLE   delete every record of TABLE
 *                                          (bmap, rmap, fsb, fsc, refc, agstat)
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
	      "       store-hack DATA_DIR drop-table bmap|rmap|fsb|fsc|refc|agstat\n",
	      stderr);
	return 2;
}

static bool table_ok(const char *t)
{
	static const char *const ok[] = { "bmap", "rmap", "fsb", "fsc", "refc",
					   "agstat" };

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strcmp(t, ok[i]))
			return true;
	return false;
}

/* Runs @sql with ?1 = @arg (if @bind); the number of rows it changed, or -1. */
static long run(sqlite3 *db, const char *sql, bool bind, int64_t arg)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK) {
		fprintf(stderr, "store-hack: %s: %s\n", sql, sqlite3_errmsg(db));
		return -1;
	}
	if (bind)
		sqlite3_bind_int64(s, 1, arg);
	rc = sqlite3_step(s);
	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		fprintf(stderr, "store-hack: %s: %s\n", sql, sqlite3_errmsg(db));
		return -1;
	}
	return sqlite3_changes(db);
}

int main(int argc, char **argv)
{
	char path[4096], sql[128];
	sqlite3 *db = NULL;
	long n;
	int fd;

	if (argc != 4)
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
	if (!strcmp(argv[2], "drop-bmap")) {
		char *end;
		uint64_t h = strtoull(argv[3], &end, 0);

		if (*end || !*argv[3])
			return usage();
		n = run(db, "DELETE FROM bmap WHERE nid = (SELECT nid FROM obj"
			" WHERE handle = ?1)", true, orch_rec_key_u64(h));
	} else if (!strcmp(argv[2], "drop-table") && table_ok(argv[3])) {
		snprintf(sql, sizeof(sql), "DELETE FROM %s", argv[3]);
		n = run(db, sql, false, 0);
	} else {
		sqlite3_close(db);
		return usage();
	}
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
