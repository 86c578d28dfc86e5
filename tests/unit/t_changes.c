/*
 * The namespace as a replica group's state machine (src/meta/changes.c),
 * against real meta.db files: a leader records seeded random operations as
 * changesets and keeps nothing of them; three members (the leader one of
 * them) apply the changesets and end with identical tables; replays are
 * skipped; a member that diverged, or an entry that touches another table,
 * changes nothing; snapshots restore a new member and refuse damaged or
 * foreign images; handles stay unique when another member takes over.
 */
#define SQLITE_ENABLE_SESSION 1
#define SQLITE_ENABLE_PREUPDATE_HOOK 1

#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h" /* ORCH_ECORRUPT */
#include "meta/meta.h"
#include "unit/ns_fx.h"
#include "unit/test.h"

#define MEMBERS 3

struct member {
	char dir[64];
	struct orch_meta *m;
};

static struct member G[MEMBERS + 1]; /* the last one: a member added later */

static struct orch_meta_ident ident(const char *cluster)
{
	struct orch_meta_ident id = { .server_index = 0, .nservers = 2, .strip_size = 65536 };

	snprintf(id.cluster_id, sizeof(id.cluster_id), "%s", cluster);
	return id;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

static void member_close(struct member *g)
{
	orch_meta_close(g->m);
	g->m = NULL;
	if (g->dir[0])
		nftw(g->dir, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	g->dir[0] = '\0';
}

static void group_close(void)
{
	for (int i = 0; i <= MEMBERS; i++)
		member_close(&G[i]);
}

static int member_make(struct member *g, const char *cluster)
{
	struct orch_meta_ident id = ident(cluster);
	char err[256];
	int error;

	snprintf(g->dir, sizeof(g->dir), "/tmp/t_changes.XXXXXX");
	if (!mkdtemp(g->dir))
		return -errno;
	error = orch_meta_mkfs(g->dir, &id);
	if (!error)
		error = orch_meta_open(g->dir, &id, &g->m, err, sizeof(err));
	if (error)
		fprintf(stderr, "member in %s: %s\n", g->dir, err);
	return error;
}

/*
 * Members of a group start from one state: each makes its own database and
 * installs the first member's image, as a member that joins late would.
 */
static int group_make(void)
{
	static bool registered;
	void *img;
	size_t len;
	int error;

	if (!registered) {
		atexit(group_close);
		registered = true;
	}
	group_close();
	for (int i = 0; i < MEMBERS; i++) {
		error = member_make(&G[i], "group");
		if (error)
			return error;
	}
	error = orch_meta_snapshot(G[0].m, &img, &len);
	if (error)
		return error;
	for (int i = 1; i < MEMBERS && !error; i++)
		error = orch_meta_restore(G[i].m, img, len);
	free(img);
	return error;
}

static int member_hash(const struct member *g, uint64_t *out, uint64_t *rows)
{
	return ns_hash(g->dir, out, rows);
}

/* Records @nops operations on @lead as one entry; every open member applies it. */
static int entry_round(struct member *lead, struct model *mo, unsigned int nops,
		       uint64_t *changes_len)
{
	uint64_t before, after, rows;
	void *chg;
	size_t len;
	int error;

	error = member_hash(lead, &before, &rows);
	if (error)
		return error;
	error = orch_meta_capture_begin(lead->m);
	if (error)
		return error;
	for (unsigned int i = 0; i < nops; i++)
		random_op(lead->m, mo);
	error = orch_meta_capture_end(lead->m, &chg, &len);
	if (error)
		return error;
	/* The leader kept nothing: the change exists only once decided. */
	error = member_hash(lead, &after, &rows);
	if (!error && after != before)
		error = -EINVAL;
	mo->index++;
	for (int i = 0; i < MEMBERS && !error; i++)
		if (G[i].m)
			error = orch_meta_changes_apply(G[i].m, mo->index, chg, len);
	*changes_len += len;
	orch_meta_changes_free(chg);
	return error;
}

static int group_same(void)
{
	uint64_t h0 = 0, r0 = 0;

	for (int i = 0; i < MEMBERS; i++) {
		uint64_t h, r, idx;
		int error = member_hash(&G[i], &h, &r);

		if (error)
			return error;
		if (orch_meta_applied_index(G[i].m, &idx) != 0)
			return -EIO;
		if (i == 0) {
			h0 = h;
			r0 = r;
		} else if (h != h0 || r != r0) {
			fprintf(stderr, "member %d: %" PRIu64 " rows hash %016" PRIx64
				", member 0: %" PRIu64 " rows hash %016" PRIx64 "\n",
				i, r, h, r0, h0);
			return -EINVAL;
		}
	}
	return 0;
}

/* The changes of creating file @name in the root, recorded on @m. */
static int record_create(struct orch_meta *m, const char *name, void **chg, size_t *len)
{
	struct orch_layout lay = { .strip_size = 65536, .stripe_count = 1 };
	struct orch_attr out;
	bool existed;
	int error = orch_meta_capture_begin(m);

	if (error)
		return error;
	error = orch_meta_create(m, &ROOT, 1, name, strlen(name), S_IFREG | 0644, 0, NULL, &lay,
				 true, &out, &existed);
	if (error) {
		orch_meta_capture_cancel(m);
		return error;
	}
	return orch_meta_capture_end(m, chg, len);
}

/* --- Cases ----------------------------------------------------------------------- */

ORCH_TEST(members_applying_recorded_changes_end_identical)
{
	struct model mo = { .dirs = { 1 }, .ndirs = 1, .seed = test_seed() };
	uint64_t bytes = 0, idx, h, rows;

	ORCH_CHECK_OK(group_make());
	ORCH_CHECK_OK(group_same());
	/* Single operations, then batches in which each sees the ones before. */
	for (int e = 0; e < 300; e++)
		ORCH_CHECK_OK(entry_round(&G[0], &mo, e < 200 ? 1 : 1 + rnd(&mo, 8), &bytes));
	ORCH_CHECK_OK(group_same());
	ORCH_CHECK(mo.ok > 200 && mo.failed > 20); /* both kinds happened */
	ORCH_CHECK_OK(orch_meta_applied_index(G[1].m, &idx));
	ORCH_CHECK(idx == 300);
	ORCH_CHECK_OK(member_hash(&G[0], &h, &rows));
	ORCH_CHECK(rows > 100);
	fprintf(stderr, "  %u operations (%u failed), %" PRIu64 " rows, %" PRIu64
		" bytes of changes in 300 entries\n", mo.ok + mo.failed, mo.failed, rows, bytes);
	/* Another member takes over and goes on where the first stopped. */
	for (int e = 0; e < 50; e++)
		ORCH_CHECK_OK(entry_round(&G[2], &mo, 2, &bytes));
	ORCH_CHECK_OK(group_same());
	group_close();
}

ORCH_TEST(replays_are_skipped_and_the_index_survives_reopen)
{
	struct model mo = { .dirs = { 1 }, .ndirs = 1, .seed = 7 };
	struct orch_meta_ident id = ident("group");
	uint64_t bytes = 0, before, after, rows, idx;
	char err[256];
	void *chg;
	size_t len;

	ORCH_CHECK_OK(group_make());
	ORCH_CHECK_OK(orch_meta_applied_index(G[0].m, &idx));
	ORCH_CHECK(idx == 0);
	ORCH_CHECK_OK(record_create(G[0].m, "f", &chg, &len));
	ORCH_CHECK(chg && len > 0);
	ORCH_CHECK_OK(orch_meta_changes_apply(G[0].m, 5, chg, len));
	ORCH_CHECK_OK(member_hash(&G[0], &before, &rows));
	/* Once more at the same index, and at an older one: nothing happens. */
	ORCH_CHECK_RC(orch_meta_changes_apply(G[0].m, 5, chg, len), 1);
	ORCH_CHECK_RC(orch_meta_changes_apply(G[0].m, 3, chg, len), 1);
	orch_meta_changes_free(chg);
	ORCH_CHECK_OK(member_hash(&G[0], &after, &rows));
	ORCH_CHECK(before == after);
	orch_meta_close(G[0].m);
	G[0].m = NULL;
	ORCH_CHECK_OK(orch_meta_open(G[0].dir, &id, &G[0].m, err, sizeof(err)));
	ORCH_CHECK_OK(orch_meta_applied_index(G[0].m, &idx));
	ORCH_CHECK(idx == 5);
	/* An entry with no change (a failed operation) still moves the index. */
	ORCH_CHECK_OK(orch_meta_changes_apply(G[0].m, 6, NULL, 0));
	ORCH_CHECK_OK(orch_meta_applied_index(G[0].m, &idx));
	ORCH_CHECK(idx == 6);
	ORCH_CHECK_RC(orch_meta_changes_apply(G[0].m, 0, NULL, 0), -EINVAL);
	(void)mo, (void)bytes;
	group_close();
}

ORCH_TEST(a_member_that_diverged_applies_nothing)
{
	struct orch_attr in = { .mode = 0700 }, out;
	uint64_t before, after, rows, idx;
	void *chg;
	size_t len;

	ORCH_CHECK_OK(group_make());
	/* Member 1 changes the root behind the group's back. */
	ORCH_CHECK_OK(orch_meta_inode_setattr(G[1].m, &ROOT, 1, ORCH_SET_MODE, &in, &out,
					      &(uint64_t){ 0 }));
	ORCH_CHECK_OK(member_hash(&G[1], &before, &rows));
	ORCH_CHECK_OK(orch_meta_capture_begin(G[0].m));
	in.mode = 0711;
	ORCH_CHECK_OK(orch_meta_inode_setattr(G[0].m, &ROOT, 1, ORCH_SET_MODE, &in, &out,
					      &(uint64_t){ 0 }));
	ORCH_CHECK_OK(orch_meta_create(G[0].m, &ROOT, 1, "d", 1, S_IFDIR | 0755, 0, NULL, NULL,
				       true, &out, &(bool){ false }));
	ORCH_CHECK_OK(orch_meta_capture_end(G[0].m, &chg, &len));
	ORCH_CHECK_OK(orch_meta_changes_apply(G[0].m, 1, chg, len));
	ORCH_CHECK_OK(orch_meta_changes_apply(G[2].m, 1, chg, len));
	ORCH_CHECK_RC(orch_meta_changes_apply(G[1].m, 1, chg, len), -EBADMSG);
	orch_meta_changes_free(chg);
	ORCH_CHECK_OK(member_hash(&G[1], &after, &rows));
	ORCH_CHECK(before == after); /* not even the new directory */
	ORCH_CHECK_OK(orch_meta_applied_index(G[1].m, &idx));
	ORCH_CHECK(idx == 0);
	ORCH_CHECK_RC(orch_meta_lookup(G[1].m, &ROOT, 1, "d", 1, &(struct orch_dirent){ 0 }),
		      -ENOENT);
	group_close();
}

/*
 * Operations written with transactions of their own, as the server's
 * handlers are: a directory @arg made in a transaction that commits,
 * aborts, or is left open.
 */
enum txn_end { TXN_COMMIT, TXN_ABORT, TXN_LEFT_OPEN };

static int mkdir_in_txn(struct orch_meta *m, const char *name, enum txn_end end)
{
	struct orch_attr out;
	int error = orch_meta_begin(m);

	if (error)
		return error;
	error = orch_meta_create(m, &ROOT, 1, name, strlen(name), S_IFDIR | 0755, 0, NULL, NULL,
				 true, &out, &(bool){ false });
	if (end == TXN_LEFT_OPEN)
		return error;
	if (error || end == TXN_ABORT) {
		orch_meta_abort(m);
		return error; /* 0: succeeded, having changed nothing */
	}
	return orch_meta_commit(m);
}

static int op_mkdir_committed(void *arg, struct orch_meta *m)
{
	return mkdir_in_txn(m, arg, TXN_COMMIT);
}

static int op_mkdir_aborted(void *arg, struct orch_meta *m)
{
	return mkdir_in_txn(m, arg, TXN_ABORT);
}

static int op_mkdir_left_open(void *arg, struct orch_meta *m)
{
	return mkdir_in_txn(m, arg, TXN_LEFT_OPEN);
}

ORCH_TEST(transactions_inside_a_capture_are_savepoints)
{
	struct orch_dirent de;
	void *chg;
	size_t len;

	ORCH_CHECK_OK(group_make());
	ORCH_CHECK_OK(orch_meta_capture_begin(G[0].m));
	ORCH_CHECK_OK(orch_meta_capture_step(G[0].m, op_mkdir_committed, "kept"));
	ORCH_CHECK_OK(orch_meta_capture_step(G[0].m, op_mkdir_aborted, "aborted"));
	ORCH_CHECK_RC(orch_meta_capture_step(G[0].m, op_mkdir_left_open, "open"), -EINVAL);
	/* The capture goes on: the next operation sees the first one's directory. */
	ORCH_CHECK_RC(orch_meta_capture_step(G[0].m, op_mkdir_committed, "kept"), -EEXIST);
	ORCH_CHECK_OK(orch_meta_capture_step(G[0].m, op_mkdir_committed, "second"));
	ORCH_CHECK_OK(orch_meta_capture_end(G[0].m, &chg, &len));
	for (int i = 0; i < MEMBERS; i++) {
		ORCH_CHECK_OK(orch_meta_changes_apply(G[i].m, 1, chg, len));
		ORCH_CHECK_OK(orch_meta_lookup(G[i].m, &ROOT, 1, "kept", 4, &de));
		ORCH_CHECK_OK(orch_meta_lookup(G[i].m, &ROOT, 1, "second", 6, &de));
		ORCH_CHECK_RC(orch_meta_lookup(G[i].m, &ROOT, 1, "aborted", 7, &de), -ENOENT);
		ORCH_CHECK_RC(orch_meta_lookup(G[i].m, &ROOT, 1, "open", 4, &de), -ENOENT);
	}
	orch_meta_changes_free(chg);
	ORCH_CHECK_OK(group_same());
	/* Outside a capture, transactions are transactions again. */
	ORCH_CHECK_OK(op_mkdir_committed("after", G[0].m));
	ORCH_CHECK_OK(orch_meta_lookup(G[0].m, &ROOT, 1, "after", 5, &de));
	group_close();
}

/* A changeset from another database, touching a table named @table. */
static int foreign_changes(const char *table, void **out, int *outlen)
{
	char sql[160];
	sqlite3_session *s = NULL;
	sqlite3 *db;
	int rc;

	rc = sqlite3_open(":memory:", &db);
	snprintf(sql, sizeof(sql), "CREATE TABLE %s (handle INTEGER PRIMARY KEY, mode INTEGER)",
		 table);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3session_create(db, "main", &s);
	if (rc == SQLITE_OK)
		rc = sqlite3session_attach(s, NULL);
	snprintf(sql, sizeof(sql), "INSERT INTO %s VALUES (77, 1)", table);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3session_changeset(s, outlen, out);
	if (s)
		sqlite3session_delete(s);
	sqlite3_close(db);
	return rc == SQLITE_OK ? 0 : -EIO;
}

ORCH_TEST(an_entry_touching_another_table_or_damaged_applies_nothing)
{
	uint64_t before, after, rows, idx;
	void *chg, *good;
	size_t goodlen;
	int len;

	ORCH_CHECK_OK(group_make());
	ORCH_CHECK_OK(member_hash(&G[0], &before, &rows));
	ORCH_CHECK_OK(foreign_changes("evil", &chg, &len));
	ORCH_CHECK_RC(orch_meta_changes_apply(G[0].m, 1, chg, (size_t)len), -EBADMSG);
	sqlite3_free(chg);
	/* The right table name, with the wrong columns. */
	ORCH_CHECK_OK(foreign_changes("inode", &chg, &len));
	ORCH_CHECK_RC(orch_meta_changes_apply(G[0].m, 1, chg, (size_t)len), -EBADMSG);
	sqlite3_free(chg);
	/* A real changeset, cut short and with flipped bytes. */
	ORCH_CHECK_OK(record_create(G[0].m, "f", &good, &goodlen));
	ORCH_CHECK(goodlen > 16);
	ORCH_CHECK(orch_meta_changes_apply(G[0].m, 1, good, goodlen / 2) == -EBADMSG);
	((unsigned char *)good)[1] ^= 0x5a; /* the table's column count */
	ORCH_CHECK(orch_meta_changes_apply(G[0].m, 1, good, goodlen) == -EBADMSG);
	orch_meta_changes_free(good);
	ORCH_CHECK_OK(member_hash(&G[0], &after, &rows));
	ORCH_CHECK(before == after);
	ORCH_CHECK_OK(orch_meta_applied_index(G[0].m, &idx));
	ORCH_CHECK(idx == 0);
	group_close();
}

ORCH_TEST(a_snapshot_rebuilds_a_new_member_and_damaged_or_foreign_ones_are_refused)
{
	struct model mo = { .dirs = { 1 }, .ndirs = 1, .seed = 11 };
	struct orch_meta_ident id = ident("group");
	uint64_t bytes = 0, h0, h3, r0, r3, idx, before;
	struct member *late = &G[MEMBERS];
	char err[256];
	void *img;
	size_t len;

	ORCH_CHECK_OK(group_make());
	for (int e = 0; e < 60; e++)
		ORCH_CHECK_OK(entry_round(&G[0], &mo, 3, &bytes));
	ORCH_CHECK_OK(orch_meta_snapshot(G[0].m, &img, &len));
	ORCH_CHECK_OK(member_make(late, "group"));
	ORCH_CHECK_OK(member_hash(late, &before, &r3));
	/* Damaged: the header's magic, then the image cut short. */
	((unsigned char *)img)[0] ^= 0xff;
	ORCH_CHECK_RC(orch_meta_restore(late->m, img, len), -ORCH_ECORRUPT);
	((unsigned char *)img)[0] ^= 0xff;
	ORCH_CHECK(orch_meta_restore(late->m, img, len / 2) < 0);
	ORCH_CHECK(orch_meta_restore(late->m, img, 100) < 0);
	ORCH_CHECK_OK(member_hash(late, &h3, &r3));
	ORCH_CHECK(h3 == before);
	/* Sound: the new member holds what the others hold, index included. */
	ORCH_CHECK_OK(orch_meta_restore(late->m, img, len));
	free(img);
	ORCH_CHECK_OK(member_hash(&G[0], &h0, &r0));
	ORCH_CHECK_OK(member_hash(late, &h3, &r3));
	ORCH_CHECK(h0 == h3 && r0 == r3);
	ORCH_CHECK_OK(orch_meta_applied_index(late->m, &idx));
	ORCH_CHECK(idx == 60);
	/* It keeps WAL mode and reopens as itself. */
	orch_meta_close(late->m);
	late->m = NULL;
	ORCH_CHECK_OK(orch_meta_open(late->dir, &id, &late->m, err, sizeof(err)));
	ORCH_CHECK_OK(orch_meta_applied_index(late->m, &idx));
	ORCH_CHECK(idx == 60);
	/* Another cluster's namespace is refused. */
	member_close(late);
	ORCH_CHECK_OK(member_make(late, "other"));
	ORCH_CHECK_OK(orch_meta_snapshot(late->m, &img, &len));
	ORCH_CHECK_RC(orch_meta_restore(G[1].m, img, len), -EXDEV);
	free(img);
	group_close();
}

ORCH_TEST(a_new_leader_never_hands_out_a_handle_again)
{
	struct orch_layout lay = { .strip_size = 65536, .stripe_count = 1 };
	uint64_t seen[40], idx = 0;
	unsigned int n = 0;

	ORCH_CHECK_OK(group_make());
	for (int round = 0; round < 4; round++) {
		/* Leaders 0, 1, 0, 2: each creates ten files in one entry. */
		struct orch_meta *lead = G[round == 3 ? 2 : round % 2].m;
		void *chg;
		size_t len;

		ORCH_CHECK_OK(orch_meta_capture_begin(lead));
		for (int i = 0; i < 10; i++) {
			char name[32];
			struct orch_attr out;

			snprintf(name, sizeof(name), "r%df%d", round, i);
			ORCH_CHECK_OK(orch_meta_create(lead, &ROOT, 1, name, strlen(name),
						       S_IFREG | 0644, 0, NULL, &lay, true, &out,
						       &(bool){ false }));
			for (unsigned int j = 0; j < n; j++)
				ORCH_CHECK(seen[j] != out.handle);
			seen[n++] = out.handle;
		}
		ORCH_CHECK_OK(orch_meta_capture_end(lead, &chg, &len));
		idx++;
		for (int i = 0; i < MEMBERS; i++)
			ORCH_CHECK_OK(orch_meta_changes_apply(G[i].m, idx, chg, len));
		orch_meta_changes_free(chg);
	}
	ORCH_CHECK_OK(group_same());
	group_close();
}

ORCH_TEST(a_leader_whose_entry_was_lost_forgets_its_reservation)
{
	struct orch_layout lay = { .strip_size = 65536, .stripe_count = 1 };
	struct orch_attr a_lost, b_out, b2_out, a_out;
	void *chg;
	size_t len;

	ORCH_CHECK_OK(group_make());
	/* Member 0 leads, reserves a batch of handles; its entry is lost. */
	ORCH_CHECK_OK(orch_meta_capture_begin(G[0].m));
	ORCH_CHECK_OK(orch_meta_create(G[0].m, &ROOT, 1, "lost", 4, S_IFREG | 0644, 0, NULL,
				       &lay, true, &a_lost, &(bool){ false }));
	ORCH_CHECK_OK(orch_meta_capture_end(G[0].m, &chg, &len));
	orch_meta_changes_free(chg);
	/* Member 1 leads next: it reserves the same batch from the stored row. */
	ORCH_CHECK_OK(orch_meta_capture_begin(G[1].m));
	ORCH_CHECK_OK(orch_meta_create(G[1].m, &ROOT, 1, "b", 1, S_IFREG | 0644, 0, NULL, &lay,
				       true, &b_out, &(bool){ false }));
	ORCH_CHECK_OK(orch_meta_create(G[1].m, &ROOT, 1, "b2", 2, S_IFREG | 0644, 0, NULL, &lay,
				       true, &b2_out, &(bool){ false }));
	ORCH_CHECK_OK(orch_meta_capture_end(G[1].m, &chg, &len));
	for (int i = 0; i < MEMBERS; i++)
		ORCH_CHECK_OK(orch_meta_changes_apply(G[i].m, 1, chg, len));
	orch_meta_changes_free(chg);
	ORCH_CHECK(b_out.handle == a_lost.handle); /* the same first value: same stored row */
	/* Member 0 leads again, after forgetting (as the group does at a new term). */
	orch_meta_forget_reservations(G[0].m);
	ORCH_CHECK_OK(orch_meta_capture_begin(G[0].m));
	ORCH_CHECK_OK(orch_meta_create(G[0].m, &ROOT, 1, "a", 1, S_IFREG | 0644, 0, NULL, &lay,
				       true, &a_out, &(bool){ false }));
	ORCH_CHECK_OK(orch_meta_capture_end(G[0].m, &chg, &len));
	ORCH_CHECK(a_out.handle != b_out.handle && a_out.handle != b2_out.handle);
	for (int i = 0; i < MEMBERS; i++)
		ORCH_CHECK_OK(orch_meta_changes_apply(G[i].m, 2, chg, len));
	orch_meta_changes_free(chg);
	ORCH_CHECK_OK(group_same());
	group_close();
}

ORCH_TEST_MAIN()
