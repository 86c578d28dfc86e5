/*
 * Shared helpers of the namespace replication tests (t_changes.c,
 * t_group.c): every row of a member's meta.db as one hash, and seeded
 * random namespace operations.  Everything is static: each test binary is
 * one .c file.
 *
 *   ORCH_TEST_SEED=<n>  the seed test_seed() returns
 */
#ifndef ORCH_TESTS_UNIT_NS_FX_H
#define ORCH_TESTS_UNIT_NS_FX_H

#include <errno.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "meta/meta.h"

static const struct orch_cred ROOT = { .uid = 0, .gid = 0 };

/* --- What a member holds, every row of every table, as one hash ------------ */

static uint64_t ns_fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

/* Read through a second connection, as another process would see it. */
static int __attribute__((unused)) ns_hash(const char *dir, uint64_t *out, uint64_t *rows)
{
	static const char *const tables[] = { "super", "inode", "dirent", "xattr",
					      "intent", "applied", "orphan",
					      "reply" };
	char path[128], sql[96];
	sqlite3 *db;
	int rc;

	*out = 0xcbf29ce484222325ULL;
	*rows = 0;
	snprintf(path, sizeof(path), "%s/meta.db", dir);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		sqlite3_close(db);
		return -EIO;
	}
	for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++) {
		sqlite3_stmt *st;

		snprintf(sql, sizeof(sql), "SELECT * FROM %s ORDER BY 1, 2", tables[t]);
		rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
		if (rc != SQLITE_OK) {
			sqlite3_close(db);
			return -EIO;
		}
		*out = ns_fnv(*out, tables[t], strlen(tables[t]));
		while (sqlite3_step(st) == SQLITE_ROW) {
			(*rows)++;
			for (int c = 0; c < sqlite3_column_count(st); c++) {
				const void *v = sqlite3_column_blob(st, c);
				int n = sqlite3_column_bytes(st, c);
				int type = sqlite3_column_type(st, c);

				*out = ns_fnv(*out, &type, sizeof(type));
				*out = ns_fnv(*out, v ? v : "", (size_t)n);
			}
		}
		sqlite3_finalize(st);
	}
	sqlite3_close(db);
	return 0;
}

/* --- Seeded random operations, recorded on one member ------------------------ */

struct model {
	uint64_t dirs[64];
	unsigned int ndirs;
	uint64_t index; /* last log index given out */
	unsigned int seed;
	unsigned int ok, failed;
};

static unsigned int __attribute__((unused)) rnd(struct model *mo, unsigned int n)
{
	return (unsigned int)(rand_r(&mo->seed) % n);
}

/* One random operation through @m (inside a capture).  Its errors are results. */
static void __attribute__((unused)) random_op(struct orch_meta *m, struct model *mo)
{
	uint64_t dir = mo->dirs[rnd(mo, mo->ndirs)], other = mo->dirs[rnd(mo, mo->ndirs)];
	struct orch_layout lay = { .strip_size = 65536, .stripe_count = 1, .first_server = 0 };
	char name[16], name2[16];
	struct orch_attr out, in;
	struct orch_dirent de;
	uint64_t a = 0, b = 0, c = 0;
	uint32_t t = 0;
	bool x, y;
	int error = 0;

	snprintf(name, sizeof(name), "n%u", rnd(mo, 24));
	snprintf(name2, sizeof(name2), "n%u", rnd(mo, 24));
	switch (rnd(mo, 10)) {
	case 0:
	case 1:
		error = orch_meta_create(m, &ROOT, dir, name, strlen(name), S_IFREG | 0644, 0,
					 NULL, &lay, true, &out, &x);
		break;
	case 2:
		error = orch_meta_create(m, &ROOT, dir, name, strlen(name), S_IFDIR | 0755, 0,
					 NULL, NULL, true, &out, &x);
		if (!error && mo->ndirs < 64)
			mo->dirs[mo->ndirs++] = out.handle;
		break;
	case 3:
		error = orch_meta_create(m, &ROOT, dir, name, strlen(name), S_IFLNK | 0777, 0,
					 "target", NULL, true, &out, &x);
		break;
	case 4:
		error = orch_meta_unlink(m, dir, name, strlen(name), &x, &y);
		break;
	case 5:
		error = orch_meta_rename(m, &ROOT, dir, name, strlen(name), other, name2,
					 strlen(name2), 0, &a, &b, &t, &c);
		break;
	case 6:
		error = orch_meta_lookup(m, &ROOT, dir, name, strlen(name), &de);
		if (!error && !de.has_attr)
			error = -EREMOTE;
		if (!error) {
			memset(&in, 0, sizeof(in));
			in.mode = 0600 | (de.attr.mode & S_IFMT);
			in.mtime_ns = 1000000000LL * rnd(mo, 1000);
			error = orch_meta_inode_setattr(m, &ROOT, de.handle,
							ORCH_SET_MODE | ORCH_SET_MTIME,
							&in, &out, &(uint64_t){ 0 });
		}
		break;
	case 7:
		error = orch_meta_xattr_set(m, &ROOT, dir, "user.k", name, strlen(name), 0);
		break;
	case 8:
		error = orch_meta_intent_insert(m, 1, name, strlen(name), &a);
		break;
	default:
		error = orch_meta_applied_put(m, 1, rnd(mo, 50), rnd(mo, 3));
		break;
	}
	if (error)
		mo->failed++;
	else
		mo->ok++;
}

static unsigned int __attribute__((unused)) test_seed(void)
{
	const char *s = getenv("ORCH_TEST_SEED");
	unsigned int seed = s ? (unsigned int)strtoul(s, NULL, 0)
			      : (unsigned int)time(NULL) ^ (unsigned int)getpid();

	fprintf(stderr, "seed %u (ORCH_TEST_SEED)\n", seed);
	return seed;
}

#endif
