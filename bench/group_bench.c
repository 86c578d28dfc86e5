/*
 * Namespace operations through a replica group (src/group) against the
 * same operations on the namespace directly, side by side in one run:
 *
 *   direct   orch_meta_create in its own transaction (what a server of
 *            today does; no fsync: the WAL is synced by the flusher later)
 *   group1   through a group of one member (capture, log entry written and
 *            synced by libraft, apply)
 *   group3   through a group of three members on 127.0.0.1
 *
 * Each creates --ops files in one directory, with --window operations
 * outstanding (1: one at a time; 64: batched into shared entries).  The
 * three members of group3 run in this one process on one loop thread, as
 * every test does: on real hosts each member has its own CPU, so this
 * bounds the CPU cost from above and the network's from below.  Runs
 * --rounds times (default 3), the modes taking turns, and reports the
 * median rate and its ratio to direct.
 *
 *   group-bench [-d DIR] [--ops N] [--rounds N] [--window N]
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/time.h"
#include "group/group.h"
#include "meta/meta.h"
#include "net/ev.h"
#include "unit/ev_fx.h"

#define MAXM 3

static const struct orch_cred ROOT = { .uid = 0, .gid = 0 };

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct bench {
	const char *dir;
	unsigned int ops, window, rounds;
	struct orch_ev *ev;
	struct orch_meta *meta[MAXM];
	struct orch_group *g[MAXM];
	unsigned int n, submitted, done, failed;
	char root[256];
};

static struct orch_meta_ident ident(void)
{
	struct orch_meta_ident id = { .server_index = 0, .nservers = 1, .strip_size = 65536 };

	snprintf(id.cluster_id, sizeof(id.cluster_id), "bench");
	return id;
}

static int create_one(struct orch_meta *m, unsigned int i)
{
	struct orch_layout lay = { .strip_size = 65536, .stripe_count = 1 };
	struct orch_attr out;
	char name[32];
	bool existed;

	snprintf(name, sizeof(name), "f%u", i);
	return orch_meta_create(m, &ROOT, 1, name, strlen(name), S_IFREG | 0644, 0, NULL, &lay,
				true, &out, &existed);
}

/* --- Members -------------------------------------------------------------------- */

static int members_open(struct bench *b, unsigned int n, unsigned int round)
{
	struct orch_meta_ident id = ident();
	struct orch_repl_cfg cfg[MAXM];
	char err[256], path[300];
	void *img = NULL;
	size_t len = 0;
	int error = 0;

	memset(cfg, 0, sizeof(cfg));
	snprintf(b->root, sizeof(b->root), "%s/r%u-n%u", b->dir, round, n ? n : 0);
	if (mkdir(b->root, 0700) != 0)
		return -errno;
	for (unsigned int i = 0; i < (n ? n : 1) && !error; i++) {
		snprintf(path, sizeof(path), "%s/m%u", b->root, i);
		if (mkdir(path, 0700) != 0)
			return -errno;
		error = orch_meta_mkfs(path, &id);
		if (!error)
			error = orch_meta_open(path, &id, &b->meta[i], err, sizeof(err));
		if (!error && i == 0 && n > 1)
			error = orch_meta_snapshot(b->meta[0], &img, &len);
		if (!error && i > 0)
			error = orch_meta_restore(b->meta[i], img, len);
	}
	free(img);
	if (error || n == 0)
		return error;
	for (unsigned int i = 0; i < n; i++) {
		static char logdirs[MAXM][300];
		uint16_t port = fx_free_port();

		snprintf(logdirs[i], sizeof(logdirs[i]), "%s/m%u/log", b->root, i);
		for (unsigned int j = 0; j < n; j++) {
			cfg[j].members[i].id = i + 1;
			snprintf(cfg[j].members[i].addr, ORCH_REPL_ADDR_MAX, "127.0.0.1:%u", port);
		}
		cfg[i].id = i + 1;
		cfg[i].dir = logdirs[i];
		cfg[i].bootstrap = true;
		cfg[i].nmembers = n;
		cfg[i].election_ms = 1000;
		cfg[i].heartbeat_ms = 50;
	}
	for (unsigned int i = 0; i < n && !error; i++)
		error = orch_group_open(b->ev, b->meta[i], &cfg[i], &b->g[i]);
	return error;
}

static void members_close(struct bench *b)
{
	char cmd[300];

	for (int i = 0; i < MAXM; i++) {
		orch_group_close(b->g[i]);
		b->g[i] = NULL;
		orch_meta_close(b->meta[i]);
		b->meta[i] = NULL;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", b->root);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", b->root);
}

static int leader_of(struct bench *b)
{
	for (int i = 0; i < MAXM; i++) {
		struct orch_repl_status st;

		if (!b->g[i])
			continue;
		orch_repl_status(orch_group_repl(b->g[i]), &st);
		if (st.role == ORCH_REPL_LEADER)
			return i;
	}
	return -1;
}

static bool has_leader(void *arg)
{
	return leader_of(arg) >= 0;
}

/* --- Through the group ----------------------------------------------------------- */

struct create_op {
	struct bench *b;
	unsigned int i;
};

static int op_create(void *arg, struct orch_meta *m)
{
	struct create_op *c = arg;

	return create_one(m, c->i);
}

static void submit_more(struct bench *b);

static void op_done(void *arg, int result)
{
	struct create_op *c = arg;
	struct bench *b = c->b;

	b->done++;
	if (result)
		b->failed++;
	free(c);
	submit_more(b);
}

static void submit_more(struct bench *b)
{
	int l = leader_of(b);

	while (l >= 0 && b->submitted < b->ops && b->submitted - b->done < b->window) {
		struct create_op *c = malloc(sizeof(*c));

		if (!c || orch_group_submit(b->g[l], NULL, op_create, op_done, c) != 0) {
			free(c);
			b->failed++;
			b->done++;
		} else {
			c->b = b;
			c->i = b->submitted;
		}
		b->submitted++;
	}
}

static bool all_done(void *arg)
{
	struct bench *b = arg;

	return b->done >= b->ops;
}

/* Operations per second of one mode, or a negative errno. */
static double run_mode(struct bench *b, unsigned int members, unsigned int round)
{
	uint64_t t0;
	double secs;
	int error;

	error = members_open(b, members, round);
	if (error) {
		members_close(b);
		return error;
	}
	b->submitted = b->done = b->failed = 0;
	if (members == 0) {
		t0 = now_ns();
		for (unsigned int i = 0; i < b->ops; i++)
			if (create_one(b->meta[0], i))
				b->failed++;
	} else {
		if (!fx_run_until(b->ev, has_leader, b, 30000)) {
			members_close(b);
			return -ETIMEDOUT;
		}
		t0 = now_ns();
		submit_more(b);
		if (!fx_run_until(b->ev, all_done, b, 600000)) {
			members_close(b);
			return -ETIMEDOUT;
		}
	}
	secs = (double)(now_ns() - t0) / 1e9;
	members_close(b);
	if (b->failed)
		return -EIO;
	return b->ops / secs;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "ops", required_argument, NULL, 'n' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "window", required_argument, NULL, 'w' },
		{ NULL, 0, NULL, 0 },
	};
	static const char *const names[] = { "direct", "group1", "group3" };
	static const unsigned int members[] = { 0, 1, 3 };
	struct bench b = { .dir = "/tmp", .ops = 5000, .window = 64, .rounds = 3 };
	char tmpl[300];
	double rate[3][16];
	int c;

	while ((c = getopt_long(argc, argv, "d:", longopts, NULL)) != -1) {
		switch (c) {
		case 'd': b.dir = optarg; break;
		case 'n': b.ops = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'r': b.rounds = (unsigned int)strtoul(optarg, NULL, 0); break;
		case 'w': b.window = (unsigned int)strtoul(optarg, NULL, 0); break;
		default:
			fprintf(stderr, "usage: group-bench [-d DIR] [--ops N] [--rounds N]"
				" [--window N]\n");
			return 2;
		}
	}
	if (!b.ops || !b.window || !b.rounds || b.rounds > 15) {
		fprintf(stderr, "group-bench: --ops, --window and --rounds (<= 15) must be > 0\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN); /* libuv writes to peers with write(2) */
	snprintf(tmpl, sizeof(tmpl), "%s/group-bench.XXXXXX", b.dir);
	if (!mkdtemp(tmpl) || orch_ev_create(&b.ev)) {
		perror("group-bench");
		return 1;
	}
	b.dir = tmpl;
	for (unsigned int r = 0; r < b.rounds; r++) {
		for (int m = 0; m < 3; m++) {
			rate[m][r] = run_mode(&b, members[m], r);
			if (rate[m][r] < 0) {
				fprintf(stderr, "group-bench: %s: %s\n", names[m],
					strerror((int)-rate[m][r]));
				return 1;
			}
		}
	}
	rmdir(tmpl);
	orch_ev_destroy(b.ev);
	printf("%u creates in one directory, window %u, median of %u rounds\n", b.ops,
	       b.window, b.rounds);
	printf("%-8s %12s %10s   %s\n", "mode", "creates/s", "vs direct", "rounds");
	for (int m = 0; m < 3; m++) {
		double sorted[16];

		memcpy(sorted, rate[m], b.rounds * sizeof(double));
		qsort(sorted, b.rounds, sizeof(double), cmp_double);
		rate[m][15] = sorted[b.rounds / 2];
	}
	for (int m = 0; m < 3; m++) {
		printf("%-8s %12.0f %9.2fx  ", names[m], rate[m][15], rate[m][15] / rate[0][15]);
		for (unsigned int r = 0; r < b.rounds; r++)
			printf(" %.0f", rate[m][r]);
		printf("\n");
	}
	return 0;
}
