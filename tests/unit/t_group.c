/*
 * The namespace of a replica group (src/group): three members on
 * 127.0.0.1 in this process, on one orch_ev loop, each with its own
 * meta.db and log.  Seeded random namespace operations are submitted to the
 * leader, batched into entries, and every member's tables end identical;
 * a closed leader is replaced and catches up on return; a member made anew
 * with its own mkfs is rebuilt by snapshot; a member changed behind the
 * group's back stops serving while the others go on.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/time.h"
#include "group/group.h"
#include "net/ev.h"
#include "unit/ns_fx.h"
#include "unit/ev_fx.h"
#include "unit/test.h"

#define N 3
#define WAIT_MS 30000

struct member {
	char dir[96];
	char logdir[128];
	struct orch_meta *meta;
	struct orch_group *g;
	struct orch_repl_cfg cfg;
};

struct cluster {
	struct orch_ev *ev;
	char root[64];
	struct member m[N];
	struct model mo;
	unsigned int done_ok, done_failed, done_lost, want_done;
	int last_err;
};

static struct orch_meta_ident ident(void)
{
	struct orch_meta_ident id = { .server_index = 0, .nservers = 1, .strip_size = 65536 };

	snprintf(id.cluster_id, sizeof(id.cluster_id), "group");
	return id;
}

/* A member's namespace: its own mkfs, then (@from) another member's image. */
static int member_meta(struct member *mb, struct orch_meta *from)
{
	struct orch_meta_ident id = ident();
	char err[256];
	void *img;
	size_t len;
	int error;

	if (mkdir(mb->dir, 0700) != 0 && errno != EEXIST)
		return -errno;
	error = orch_meta_mkfs(mb->dir, &id);
	if (!error)
		error = orch_meta_open(mb->dir, &id, &mb->meta, err, sizeof(err));
	if (error || !from)
		return error;
	error = orch_meta_snapshot(from, &img, &len);
	if (error)
		return error;
	error = orch_meta_restore(mb->meta, img, len);
	free(img);
	return error;
}

static int member_start(struct cluster *c, int i)
{
	return orch_group_open(c->ev, c->m[i].meta, &c->m[i].cfg, &c->m[i].g);
}

static void member_stop(struct cluster *c, int i)
{
	orch_group_close(c->m[i].g);
	c->m[i].g = NULL;
	orch_meta_close(c->m[i].meta);
	c->m[i].meta = NULL;
}

static int cluster_init(struct cluster *c, unsigned int snapshot_every)
{
	int error;

	memset(c, 0, sizeof(*c));
	c->mo.dirs[0] = 1;
	c->mo.ndirs = 1;
	c->mo.seed = test_seed();
	snprintf(c->root, sizeof(c->root), "/tmp/t_group.XXXXXX");
	if (!mkdtemp(c->root))
		return -errno;
	error = orch_ev_create(&c->ev);
	if (error)
		return error;
	for (int i = 0; i < N; i++) {
		struct member *mb = &c->m[i];
		struct orch_repl_cfg *cfg = &mb->cfg;
		uint16_t port = fx_free_port();

		if (!port)
			return -EADDRNOTAVAIL;
		snprintf(mb->dir, sizeof(mb->dir), "%s/m%d", c->root, i + 1);
		snprintf(mb->logdir, sizeof(mb->logdir), "%s/m%d/log", c->root, i + 1);
		cfg->id = (uint64_t)i + 1;
		cfg->dir = mb->logdir;
		cfg->bootstrap = true;
		cfg->election_ms = 1000; /* slow enough for valgrind and TSan */
		cfg->heartbeat_ms = 50;
		cfg->snapshot_every = snapshot_every;
		cfg->snapshot_keep = snapshot_every / 4;
		cfg->snapshot_timeout_ms = 3000;
		for (int j = 0; j < N; j++) {
			c->m[j].cfg.members[i].id = (uint64_t)i + 1;
			snprintf(c->m[j].cfg.members[i].addr, ORCH_REPL_ADDR_MAX, "127.0.0.1:%u",
				 port);
			c->m[j].cfg.nmembers = N;
		}
	}
	/* Members start from one database: the first one's. */
	for (int i = 0; i < N; i++) {
		error = member_meta(&c->m[i], i ? c->m[0].meta : NULL);
		if (error)
			return error;
	}
	for (int i = 0; i < N; i++) {
		error = member_start(c, i);
		if (error)
			return error;
	}
	return 0;
}

static void cluster_fini(struct cluster *c)
{
	char cmd[96];

	for (int i = 0; i < N; i++)
		member_stop(c, i);
	orch_ev_destroy(c->ev);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", c->root);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", c->root);
}

/* --- Running the loop until something holds ---------------------------------- */

static void cluster_print(struct cluster *c)
{
	for (int i = 0; i < N; i++) {
		struct orch_repl_status st;
		struct orch_group_stats gs;
		uint64_t idx = 0;

		if (!c->m[i].g) {
			fprintf(stderr, "  member %d: closed\n", i + 1);
			continue;
		}
		orch_repl_status(orch_group_repl(c->m[i].g), &st);
		orch_group_stats(c->m[i].g, &gs);
		orch_meta_applied_index(c->m[i].meta, &idx);
		fprintf(stderr, "  member %d: %s term %llu commit %llu applied %llu, namespace"
			" at %llu%s\n", i + 1, orch_repl_role_name(st.role),
			(unsigned long long)st.term, (unsigned long long)st.commit_index,
			(unsigned long long)st.applied_index, (unsigned long long)idx,
			gs.diverged ? " (diverged)" : "");
	}
	fprintf(stderr, "  ops: %u done, %u failed, %u lost (last %d)\n", c->done_ok,
		c->done_failed, c->done_lost, c->last_err);
}

struct until {
	struct cluster *c;
	bool (*cond)(struct cluster *c);
};

static bool until_cond(void *arg)
{
	struct until *u = arg;

	return u->cond(u->c);
}

static bool run_until(struct cluster *c, bool (*cond)(struct cluster *c))
{
	struct until u = { c, cond };
	bool met = fx_run_until(c->ev, until_cond, &u, WAIT_MS);

	if (!met)
		cluster_print(c);
	return met;
}

static int leader(struct cluster *c)
{
	int who = -1;

	for (int i = 0; i < N; i++) {
		struct orch_repl_status st;

		if (!c->m[i].g)
			continue;
		orch_repl_status(orch_group_repl(c->m[i].g), &st);
		if (st.role == ORCH_REPL_LEADER) {
			if (who >= 0)
				return -1;
			who = i;
		}
	}
	return who;
}

static bool has_leader(struct cluster *c)
{
	return leader(c) >= 0;
}

static bool all_done(struct cluster *c)
{
	return c->done_ok + c->done_failed + c->done_lost >= c->want_done;
}

/* Every open, healthy member's namespace is at the leader's index. */
static bool all_caught_up(struct cluster *c)
{
	int l = leader(c);
	uint64_t want, idx;

	if (l < 0 || orch_meta_applied_index(c->m[l].meta, &want))
		return false;
	for (int i = 0; i < N; i++) {
		struct orch_group_stats gs;

		if (!c->m[i].g)
			continue;
		orch_group_stats(c->m[i].g, &gs);
		if (gs.diverged)
			continue;
		if (orch_meta_applied_index(c->m[i].meta, &idx) || idx != want)
			return false;
	}
	return true;
}

/* The namespaces of the open members that did not diverge are identical. */
static int cluster_same(struct cluster *c, int skip)
{
	uint64_t h0 = 0, r0 = 0;
	int first = -1;

	for (int i = 0; i < N; i++) {
		uint64_t h, r;
		int error;

		if (i == skip || !c->m[i].g)
			continue;
		error = ns_hash(c->m[i].dir, &h, &r);
		if (error)
			return error;
		if (first < 0) {
			first = i;
			h0 = h;
			r0 = r;
		} else if (h != h0 || r != r0) {
			fprintf(stderr, "member %d: %llu rows hash %016llx; member %d: %llu rows"
				" hash %016llx\n", i + 1, (unsigned long long)r,
				(unsigned long long)h, first + 1, (unsigned long long)r0,
				(unsigned long long)h0);
			return -EINVAL;
		}
	}
	return 0;
}

/* --- Operations ----------------------------------------------------------------- */

static int op_random(void *arg, struct orch_meta *m)
{
	struct cluster *c = arg;
	unsigned int failed = c->mo.failed;

	random_op(m, &c->mo);
	return c->mo.failed != failed ? -EINVAL : 0;
}

static void op_done(void *arg, int result)
{
	struct cluster *c = arg;

	if (result == 0)
		c->done_ok++;
	else if (result == ORCH_REPL_ELOST || result == -ESHUTDOWN ||
		 result == ORCH_REPL_ENOTLEADER)
		c->done_lost++;
	else
		c->done_failed++;
	if (result && result != -EINVAL)
		c->last_err = result;
}

/* Submits @n random operations to member @l, all at once. */
static int submit_n(struct cluster *c, int l, unsigned int n)
{
	c->want_done = c->done_ok + c->done_failed + c->done_lost + n;
	for (unsigned int i = 0; i < n; i++) {
		int error = orch_group_submit(c->m[l].g, NULL, op_random, op_done, c);

		if (error)
			return error;
	}
	return 0;
}

/* @rounds rounds of @burst operations, each round waited for. */
static int run_rounds(struct cluster *c, unsigned int rounds, unsigned int burst)
{
	for (unsigned int r = 0; r < rounds; r++) {
		int l = leader(c), error;

		if (l < 0)
			return -EAGAIN;
		error = submit_n(c, l, burst);
		if (error)
			return error;
		if (!run_until(c, all_done))
			return -ETIMEDOUT;
	}
	return 0;
}

/* --- Cases ------------------------------------------------------------------------ */

ORCH_TEST(operations_go_through_the_log_and_members_end_identical)
{
	struct orch_group_stats gs;
	struct cluster c;
	int l;

	ORCH_CHECK_OK(cluster_init(&c, 0));
	ORCH_CHECK(run_until(&c, has_leader));
	l = leader(&c);
	/* A follower refuses, and says so at once. */
	ORCH_CHECK_RC(orch_group_submit(c.m[(l + 1) % N].g, NULL, op_random, op_done, &c),
		      ORCH_REPL_ENOTLEADER);
	/* One at a time, then bursts that share entries. */
	ORCH_CHECK_OK(run_rounds(&c, 60, 1));
	ORCH_CHECK_OK(run_rounds(&c, 10, 40));
	/* Lost ones only if a slow run (valgrind, TSan) saw an election. */
	ORCH_CHECK(c.done_ok > 200 && c.done_failed > 20);
	/* Whoever led: every op captured once, in fewer entries. */
	struct orch_group_stats sum = { 0 };

	for (int i = 0; i < N; i++) {
		orch_group_stats(c.m[i].g, &gs);
		sum.ops += gs.ops;
		sum.entries += gs.entries;
		sum.batch_max = gs.batch_max > sum.batch_max ? gs.batch_max : sum.batch_max;
		sum.barriers += gs.barriers;
	}
	fprintf(stderr, "  %llu ops in %llu entries (at most %llu in one), %u failed, %u lost\n",
		(unsigned long long)sum.ops, (unsigned long long)sum.entries,
		(unsigned long long)sum.batch_max, c.done_failed, c.done_lost);
	ORCH_CHECK(sum.ops + c.done_lost >= 460 && sum.entries < sum.ops && sum.batch_max > 1);
	ORCH_CHECK(sum.barriers >= 1);
	ORCH_CHECK(run_until(&c, all_caught_up));
	ORCH_CHECK_OK(cluster_same(&c, -1));
	cluster_fini(&c);
}

ORCH_TEST(a_new_leader_goes_on_and_the_old_one_catches_up)
{
	struct orch_repl_status before, after;
	struct orch_meta_ident id = ident();
	char err[256];
	struct cluster c;
	int old, l;

	ORCH_CHECK_OK(cluster_init(&c, 0));
	ORCH_CHECK(run_until(&c, has_leader));
	old = leader(&c);
	ORCH_CHECK_OK(run_rounds(&c, 5, 20));
	orch_repl_status(orch_group_repl(c.m[old].g), &before);
	/* Closed with operations in flight: each is answered, none hangs. */
	ORCH_CHECK_OK(submit_n(&c, old, 30));
	member_stop(&c, old);
	ORCH_CHECK(all_done(&c));

	ORCH_CHECK(run_until(&c, has_leader));
	l = leader(&c);
	ORCH_CHECK(l != old);
	orch_repl_status(orch_group_repl(c.m[l].g), &after);
	ORCH_CHECK(after.term > before.term);
	ORCH_CHECK_OK(run_rounds(&c, 5, 20));

	/* Back with its database and log: replays what it has, skips what it applied. */
	ORCH_CHECK_OK(orch_meta_open(c.m[old].dir, &id, &c.m[old].meta, err, sizeof(err)));
	ORCH_CHECK_OK(member_start(&c, old));
	ORCH_CHECK(run_until(&c, all_caught_up));
	ORCH_CHECK_OK(cluster_same(&c, -1));
	cluster_fini(&c);
}

ORCH_TEST(a_member_made_anew_is_rebuilt_from_a_snapshot)
{
	struct cluster c;
	char cmd[160];
	int l, f;

	/* Snapshots every 32 entries, 8 kept behind: a new member cannot replay. */
	ORCH_CHECK_OK(cluster_init(&c, 32));
	ORCH_CHECK(run_until(&c, has_leader));
	l = leader(&c);
	f = (l + 1) % N;
	ORCH_CHECK_OK(run_rounds(&c, 50, 1));
	member_stop(&c, f);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", c.m[f].dir);
	ORCH_CHECK(system(cmd) == 0);
	ORCH_CHECK_OK(run_rounds(&c, 60, 1));

	/* Its own mkfs (its own root and clock), no log: the snapshot replaces it. */
	ORCH_CHECK_OK(member_meta(&c.m[f], NULL));
	c.m[f].cfg.bootstrap = false;
	ORCH_CHECK_OK(member_start(&c, f));
	ORCH_CHECK(run_until(&c, all_caught_up));
	ORCH_CHECK_OK(cluster_same(&c, -1));
	cluster_fini(&c);
}

ORCH_TEST(a_member_changed_behind_the_groups_back_stops_serving)
{
	struct orch_attr in = { .mode = 0700 }, out;
	struct orch_group_stats gs;
	struct cluster c;
	int l, f;

	ORCH_CHECK_OK(cluster_init(&c, 0));
	ORCH_CHECK(run_until(&c, has_leader));
	l = leader(&c);
	f = (l + 1) % N;
	ORCH_CHECK_OK(orch_meta_inode_setattr(c.m[f].meta, &ROOT, 1, ORCH_SET_MODE, &in, &out,
					      &(uint64_t){ 0 }));
	/* Every operation in the root changes the root's times: f cannot apply them. */
	ORCH_CHECK_OK(run_rounds(&c, 20, 5));
	ORCH_CHECK(run_until(&c, all_caught_up));
	orch_group_stats(c.m[f].g, &gs);
	ORCH_CHECK(gs.diverged);
	ORCH_CHECK_RC(orch_group_submit(c.m[f].g, NULL, op_random, op_done, &c), -EIO);
	ORCH_CHECK_OK(cluster_same(&c, f));

	/* libraft took it out: it cannot be elected, and the two others go on. */
	struct orch_repl_status rs;

	orch_repl_status(orch_group_repl(c.m[f].g), &rs);
	ORCH_CHECK(rs.role == ORCH_REPL_UNAVAILABLE);
	ORCH_CHECK_OK(run_rounds(&c, 5, 5));
	ORCH_CHECK(run_until(&c, all_caught_up));
	ORCH_CHECK_OK(cluster_same(&c, f));
	cluster_fini(&c);
}

/* --- Exactly once ------------------------------------------------------------------ */

/* Creates "x<seq>" in the root, exclusively: run twice, the second says EEXIST. */
struct xop {
	struct cluster *c;
	struct orch_group_req req;
	int result;
	bool done;
};

static int op_create_named(void *arg, struct orch_meta *m)
{
	struct xop *x = arg;
	struct orch_layout lay = { .strip_size = 65536, .stripe_count = 1 };
	struct orch_attr out;
	char name[32];
	bool existed;

	snprintf(name, sizeof(name), "x%llu", (unsigned long long)x->req.seq);
	return orch_meta_create(m, &ROOT, 1, name, strlen(name), S_IFREG | 0644, 0, NULL, &lay,
				true, &out, &existed);
}

static void xop_done(void *arg, int result)
{
	struct xop *x = arg;

	x->result = result;
	x->done = true;
	op_done(x->c, result);
}

/* Submits requests @from..@to of client 7 (again, if they were before) to member @l. */
static int submit_x(struct cluster *c, struct xop *x, int l, uint64_t from, uint64_t to,
		    uint64_t done_below)
{
	c->want_done = c->done_ok + c->done_failed + c->done_lost + (unsigned int)(to - from + 1);
	for (uint64_t s = from; s <= to; s++) {
		struct xop *o = &x[s];
		int error;

		*o = (struct xop){ .c = c, .req = { 7, s, done_below } };
		error = orch_group_submit(c->m[l].g, &o->req, op_create_named, xop_done, o);
		if (error)
			return error;
	}
	return 0;
}

ORCH_TEST(retries_are_answered_not_applied_again)
{
	struct orch_meta_ident id = ident();
	struct orch_group_stats gs;
	struct xop x[64];
	struct cluster c;
	char err[256];
	int l, old, result;

	ORCH_CHECK_OK(cluster_init(&c, 0));
	ORCH_CHECK(run_until(&c, has_leader));
	l = leader(&c);
	ORCH_CHECK_RC(orch_group_submit(c.m[l].g, &(struct orch_group_req){ 7, 0, 0 },
					op_create_named, xop_done, &x[0]), -EINVAL);
	ORCH_CHECK_OK(submit_x(&c, x, l, 1, 20, 1));
	ORCH_CHECK(run_until(&c, all_done));
	for (int s = 1; s <= 20; s++)
		ORCH_CHECK(x[s].done && x[s].result == 0);
	/* Answers lost on the way: the client asks again and gets the same answers. */
	ORCH_CHECK_OK(submit_x(&c, x, l, 1, 20, 1));
	ORCH_CHECK(run_until(&c, all_done));
	for (int s = 1; s <= 20; s++)
		ORCH_CHECK(x[s].result == 0);
	orch_group_stats(c.m[l].g, &gs);
	ORCH_CHECK(gs.retries == 20);

	/* The leader goes away with requests in flight; the client asks the next one. */
	old = l;
	ORCH_CHECK_OK(submit_x(&c, x, old, 21, 50, 21));
	member_stop(&c, old);
	ORCH_CHECK(run_until(&c, has_leader));
	l = leader(&c);
	ORCH_CHECK_OK(submit_x(&c, x, l, 21, 50, 21));
	ORCH_CHECK(run_until(&c, all_done));
	for (int s = 21; s <= 50; s++)
		ORCH_CHECK(x[s].result == 0);
	ORCH_CHECK_OK(submit_x(&c, x, l, 21, 50, 21));
	ORCH_CHECK(run_until(&c, all_done));
	for (int s = 21; s <= 50; s++)
		ORCH_CHECK(x[s].result == 0);

	/* What the client has answers for is forgotten; the rest is kept. */
	ORCH_CHECK_RC(orch_meta_reply_get(c.m[l].meta, 7, 20, &result), -ENOENT);
	ORCH_CHECK_OK(orch_meta_reply_get(c.m[l].meta, 7, 50, &result));
	ORCH_CHECK_OK(submit_x(&c, x, l, 51, 51, 51));
	ORCH_CHECK(run_until(&c, all_done));
	ORCH_CHECK(x[51].result == 0);
	ORCH_CHECK_RC(orch_meta_reply_get(c.m[l].meta, 7, 50, &result), -ENOENT);
	ORCH_CHECK_OK(orch_meta_reply_get(c.m[l].meta, 7, 51, &result));
	ORCH_CHECK(result == 0);

	ORCH_CHECK_OK(orch_meta_open(c.m[old].dir, &id, &c.m[old].meta, err, sizeof(err)));
	ORCH_CHECK_OK(member_start(&c, old));
	ORCH_CHECK(run_until(&c, all_caught_up));
	ORCH_CHECK_OK(cluster_same(&c, -1));
	cluster_fini(&c);
}

/* --- Reads ------------------------------------------------------------------------- */

/* Counts the names "x<n>" in the root that exist. */
struct xread {
	struct cluster *c;
	unsigned int want;      /* names x1..x<want> */
	unsigned int found;
	bool ran, done;
	int result;
};

static int op_count_names(void *arg, struct orch_meta *m)
{
	struct xread *r = arg;

	r->ran = true;
	r->found = 0;
	for (unsigned int i = 1; i <= r->want; i++) {
		struct orch_dirent de;
		char name[32];

		snprintf(name, sizeof(name), "x%u", i);
		if (orch_meta_lookup(m, &ROOT, 1, name, strlen(name), &de) == 0)
			r->found++;
	}
	return 0;
}

static void xread_done(void *arg, int result)
{
	struct xread *r = arg;

	r->result = result;
	r->done = true;
}

static struct xread *watched_read;

static bool the_read_is_done(struct cluster *c)
{
	(void)c;
	return watched_read->done;
}

ORCH_TEST(reads_see_every_change_and_a_cut_off_leader_answers_none)
{
	struct orch_group_stats gs;
	struct xread rd[8];
	struct xop x[32];
	struct cluster c;
	int l;

	ORCH_CHECK_OK(cluster_init(&c, 0));
	ORCH_CHECK(run_until(&c, has_leader));
	l = leader(&c);
	ORCH_CHECK_RC(orch_group_read(c.m[(l + 1) % N].g, op_count_names, xread_done, &rd[0]),
		      ORCH_REPL_ENOTLEADER);
	ORCH_CHECK_OK(submit_x(&c, x, l, 1, 20, 1));
	ORCH_CHECK(run_until(&c, all_done));
	/* Several reads asked at once share one barrier; each sees all 20. */
	for (int i = 0; i < 8; i++) {
		rd[i] = (struct xread){ .c = &c, .want = 20 };
		ORCH_CHECK_OK(orch_group_read(c.m[l].g, op_count_names, xread_done, &rd[i]));
	}
	watched_read = &rd[7];
	ORCH_CHECK(run_until(&c, the_read_is_done));
	for (int i = 0; i < 8; i++)
		ORCH_CHECK(rd[i].done && rd[i].result == 0 && rd[i].found == 20);
	orch_group_stats(c.m[l].g, &gs);
	ORCH_CHECK(gs.reads == 8 && gs.read_barriers <= 2);

	/* The two others go: the leader cannot know it is still the leader. */
	for (int i = 0; i < N; i++)
		if (i != l)
			member_stop(&c, i);
	rd[0] = (struct xread){ .c = &c, .want = 20 };
	ORCH_CHECK_OK(orch_group_read(c.m[l].g, op_count_names, xread_done, &rd[0]));
	watched_read = &rd[0];
	ORCH_CHECK(run_until(&c, the_read_is_done));
	ORCH_CHECK(!rd[0].ran);
	ORCH_CHECK(rd[0].result == ORCH_REPL_ENOTLEADER);
	cluster_fini(&c);
}

/* --- The change hook ------------------------------------------------------------------ */

struct hook_seen {
	struct member *mb;
	unsigned int names, committed;  /* names reported; of them, committed at that time */
	unsigned int attrs;
	unsigned int own_op;            /* names reported with the op that made them, not answered yet */
};

/* Whether entry @name of the root is in @mb's committed database (another connection). */
static bool committed_name(const struct member *mb, const char *name, size_t namelen)
{
	char path[160];
	sqlite3_stmt *st = NULL;
	sqlite3 *db;
	bool found = false;

	snprintf(path, sizeof(path), "%s/meta.db", mb->dir);
	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(db, "SELECT 1 FROM dirent WHERE parent = 1 AND name = ?1", -1, &st,
			       NULL) == SQLITE_OK) {
		sqlite3_bind_blob(st, 1, name, (int)namelen, SQLITE_STATIC);
		found = sqlite3_step(st) == SQLITE_ROW;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return found;
}

static void hook_changed(void *arg, void *op_arg, uint64_t h, const char *name, size_t namelen)
{
	struct hook_seen *hs = arg;
	const struct xop *x = op_arg;
	char want[32];

	if (!name) {
		hs->attrs++;
		return;
	}
	if (h != 1 || namelen < 2 || name[0] != 'x')
		return;
	hs->names++;
	if (committed_name(hs->mb, name, namelen))
		hs->committed++;
	if (x && !x->done) {
		snprintf(want, sizeof(want), "x%llu", (unsigned long long)x->req.seq);
		hs->own_op += strlen(want) == namelen && !memcmp(want, name, namelen);
	}
}

ORCH_TEST(changes_are_reported_once_applied_never_while_captured)
{
	struct hook_seen seen[N];
	struct xop x[32];
	struct cluster c;
	int l;

	ORCH_CHECK_OK(cluster_init(&c, 0));
	for (int i = 0; i < N; i++) {
		seen[i] = (struct hook_seen){ .mb = &c.m[i] };
		orch_group_set_change_hook(c.m[i].g, hook_changed, &seen[i]);
	}
	ORCH_CHECK(run_until(&c, has_leader));
	l = leader(&c);
	ORCH_CHECK_OK(submit_x(&c, x, l, 1, 20, 1));
	ORCH_CHECK(run_until(&c, all_done));
	for (int s = 1; s <= 20; s++)
		ORCH_CHECK(x[s].result == 0);
	/*
	 * Each new name, and the root's attributes, once the name is in the
	 * database, with the op that made it, before that op's answer.
	 */
	ORCH_CHECK(seen[l].names == 20 && seen[l].committed == 20);
	ORCH_CHECK(seen[l].own_op == 20);
	ORCH_CHECK(seen[l].attrs >= 1);
	/*
	 * Members that only apply say nothing: leases are the leader's
	 * (a new leader and the old one's leases: docs/DESIGN.md, next steps).
	 */
	for (int i = 0; i < N; i++)
		if (i != l)
			ORCH_CHECK(seen[i].names == 0);
	cluster_fini(&c);
}

/* libuv writes to peers' sockets with write(2): a closed member's would kill us. */
__attribute__((constructor)) static void ignore_sigpipe(void)
{
	signal(SIGPIPE, SIG_IGN);
}

ORCH_TEST_MAIN()
