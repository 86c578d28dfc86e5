/*
 * orchard stats --watch [MNT]: requests per second by type, redrawn every
 * interval until interrupted, as `iostat 1` or `juicefs stats` do.
 *
 * Each frame is the difference of two samples of the counters, divided by
 * the time between them: of every server (AD2SV_STATS, all at once; a
 * column each and a total), or of the mount at MNT (its stats xattr: its
 * FUSE requests and the requests it sent to the servers).  A row appears
 * once its type has been seen moving, and stays, so the screen does not
 * jump.  On a terminal each frame replaces the last; otherwise frames
 * follow each other, a blank line between.  SIGINT and SIGTERM end it
 * cleanly (exit 0), after the frame in progress.
 */
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "client/status.h"
#include "common/json.h"
#include "common/util.h"

#define WATCH_ROWS_MAX 256
#define WATCH_MEMBERS_MAX 256

enum watch_kind { WATCH_RATE, WATCH_BYTES };

struct watch_row {
	char section[32];                  /* heading of the group it is in */
	char name[64];
	enum watch_kind kind;
	uint64_t prev[ORCH_SERVERS_MAX];   /* last sample, by column */
	bool have[ORCH_SERVERS_MAX];       /* prev holds a sample */
	double rate[ORCH_SERVERS_MAX];     /* per second, this frame */
	bool fresh[ORCH_SERVERS_MAX];      /* rate measured this frame */
	bool seen;                         /* has moved at some frame */
};

struct watch {
	struct watch_row *rows;            /* [WATCH_ROWS_MAX] */
	int nrows;
	unsigned int ncols;
	const char *cols[ORCH_SERVERS_MAX];
	int col_error[ORCH_SERVERS_MAX];   /* 0: sampled this frame */
	bool col_ok[ORCH_SERVERS_MAX];     /* the last sample of the column succeeded */
	double dt;                         /* seconds since the last sample */
};

static volatile sig_atomic_t watch_stop;

static void watch_on_signal(int sig)
{
	(void)sig;
	watch_stop = 1;
}

static double watch_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct watch_row *watch_row(struct watch *w, const char *section, const char *name,
				   size_t nlen, enum watch_kind kind)
{
	struct watch_row *r;

	for (int i = 0; i < w->nrows; i++) {
		r = &w->rows[i];
		if (!strcmp(r->section, section) && strlen(r->name) == nlen &&
		    !memcmp(r->name, name, nlen))
			return r;
	}
	if (w->nrows == WATCH_ROWS_MAX || nlen >= sizeof(r->name))
		return NULL;
	r = &w->rows[w->nrows++];
	memset(r, 0, sizeof(*r));
	snprintf(r->section, sizeof(r->section), "%s", section);
	memcpy(r->name, name, nlen);
	r->kind = kind;
	/*
	 * A server lists only the types it has seen: a type new to a column
	 * that answered before was at 0 then.
	 */
	for (unsigned int c = 0; c < w->ncols; c++)
		r->have[c] = w->col_ok[c];
	return r;
}

/* One counter of column @col: its rate since the last sample. */
static void watch_sample(struct watch *w, unsigned int col, const char *section,
			 const char *name, size_t nlen, enum watch_kind kind, uint64_t v)
{
	struct watch_row *r = watch_row(w, section, name, nlen, kind);

	if (!r)
		return;
	/* A counter that went down was reset (a restart): no rate this time. */
	r->rate[col] = r->have[col] && v >= r->prev[col] && w->dt > 0
			       ? (double)(v - r->prev[col]) / w->dt : 0;
	r->seen |= r->rate[col] > 0;
	r->fresh[col] = true;
	r->prev[col] = v;
	r->have[col] = true;
}

/* Every numeric member of the object at @path of @j, as rows of @section. */
static void watch_object(struct watch *w, unsigned int col, const char *j, size_t len,
			 const char *path, const char *section)
{
	struct orch_json_kv *kv = calloc(WATCH_MEMBERS_MAX, sizeof(*kv));
	const char *obj;
	size_t olen;
	int n;

	if (!kv)
		return;
	if (!orch_json_get(j, len, path, &obj, &olen)) {
		n = orch_json_members(obj, olen, kv, WATCH_MEMBERS_MAX);
		for (int i = 0; i < n; i++) {
			char num[32];

			if (kv[i].vlen >= sizeof(num) || kv[i].v[0] < '0' || kv[i].v[0] > '9')
				continue;
			memcpy(num, kv[i].v, kv[i].vlen);
			num[kv[i].vlen] = '\0';
			watch_sample(w, col, section, kv[i].k, kv[i].klen, WATCH_RATE,
				     strtoull(num, NULL, 10));
		}
	}
	free(kv);
}

/*
 * After column @col answered: a type it did not list has not moved (it
 * lists only the types it has seen; one that went missing restarted).
 */
static void watch_column_done(struct watch *w, unsigned int col)
{
	for (int i = 0; i < w->nrows; i++) {
		struct watch_row *r = &w->rows[i];

		if (!r->fresh[col] && r->kind == WATCH_RATE) {
			r->rate[col] = 0;
			r->prev[col] = 0;
			r->have[col] = r->fresh[col] = true;
		}
	}
	w->col_ok[col] = true;
}

/* A byte counter of @j at @path, shown as @label. */
static void watch_bytes(struct watch *w, unsigned int col, const char *j, size_t len,
			const char *path, const char *label)
{
	uint64_t v;

	if (!orch_json_get_u64(j, len, path, &v))
		watch_sample(w, col, "BYTES/S", label, strlen(label), WATCH_BYTES, v);
}

static void watch_servers(struct watch *w, struct orch_client *cl)
{
	struct orch_reply *reps = calloc(ORCH_SERVERS_MAX, sizeof(*reps));
	int errors[ORCH_SERVERS_MAX];

	if (!reps) {
		for (unsigned int c = 0; c < w->ncols; c++)
			w->col_error[c] = -ENOMEM;
		return;
	}
	orch_status_fetch(cl, reps, errors);
	for (unsigned int c = 0; c < w->ncols; c++) {
		const char *j = reps[c].m.json.s;
		size_t len = reps[c].m.json.len;

		w->col_error[c] = errors[c];
		w->col_ok[c] = false;
		if (errors[c])
			continue;
		watch_object(w, c, j, len, "requests", "REQUESTS/S");
		watch_bytes(w, c, j, len, "bytes_in", "network in");
		watch_bytes(w, c, j, len, "bytes_out", "network out");
		watch_bytes(w, c, j, len, "data_bytes_read", "data read");
		watch_bytes(w, c, j, len, "data_bytes_written", "data written");
		watch_column_done(w, c);
		orch_reply_release(&reps[c]);
	}
	free(reps);
}

static int watch_mount(struct watch *w, const char *mnt)
{
	char *j;

	if (orch_cli_mount_stats(mnt, &j))
		return ORCH_CLI_FAIL;
	w->col_error[0] = 0;
	watch_object(w, 0, j, strlen(j), "fuse", "FUSE REQUESTS/S");
	watch_object(w, 0, j, strlen(j), "server_requests", "SENT TO SERVERS/S");
	watch_bytes(w, 0, j, strlen(j), "io.bytes_read", "read");
	watch_bytes(w, 0, j, strlen(j), "io.bytes_written", "written");
	watch_column_done(w, 0);
	free(j);
	return ORCH_CLI_OK;
}

/* One sample of every column.  ORCH_CLI_OK, or ORCH_CLI_FAIL (the mount went away). */
static int watch_take(struct watch *w, const char *mnt, struct orch_client *cl)
{
	for (int i = 0; i < w->nrows; i++)
		memset(w->rows[i].fresh, 0, sizeof(w->rows[i].fresh));
	if (mnt)
		return watch_mount(w, mnt);
	watch_servers(w, cl);
	return ORCH_CLI_OK;
}

static void watch_cell(const struct watch_row *r, double v, bool fresh, char *out, size_t size)
{
	if (!fresh)
		snprintf(out, size, "-");
	else if (r->kind == WATCH_BYTES)
		orch_status_bytes((uint64_t)(v + 0.5), out, size);
	else
		snprintf(out, size, "%.1f", v);
}

/* The rows of @section that have moved, under a heading; how many. */
static int watch_draw_section(const struct watch *w, const char *section, int namew, int colw)
{
	bool total = w->ncols > 1, head = false;
	char cell[32];
	int shown = 0;

	for (int i = 0; i < w->nrows; i++) {
		const struct watch_row *r = &w->rows[i];
		double sum = 0;
		bool all = true;

		if (!r->seen || strcmp(section, r->section))
			continue;
		if (!head) {
			head = true;
			printf("\n%-*s", namew, section);
			for (unsigned int c = 0; c < w->ncols; c++)
				printf("  %*s", colw, w->cols[c]);
			if (total)
				printf("  %*s", colw, "total");
			printf("\n");
		}
		printf("%-*s", namew, r->name);
		for (unsigned int c = 0; c < w->ncols; c++) {
			bool fresh = r->fresh[c] && !w->col_error[c];

			watch_cell(r, r->rate[c], fresh, cell, sizeof(cell));
			printf("  %*s", colw, cell);
			sum += fresh ? r->rate[c] : 0;
			all &= fresh;
		}
		if (total) {
			watch_cell(r, sum, true, cell, sizeof(cell));
			printf("  %*s%s", colw, cell, all ? "" : "*");
		}
		printf("\n");
		shown++;
	}
	return shown;
}

static void watch_draw(const struct watch *w, const char *title, uint32_t interval_ms,
		       bool tty)
{
	char when[32];
	int namew = 12, colw = 10, shown = 0;
	time_t now = time(NULL);
	struct tm tm;

	localtime_r(&now, &tm);
	strftime(when, sizeof(when), "%H:%M:%S", &tm);
	for (int i = 0; i < w->nrows; i++)
		namew = ORCH_MAX(namew, (int)strlen(w->rows[i].name));
	for (unsigned int c = 0; c < w->ncols; c++)
		colw = ORCH_MAX(colw, (int)strlen(w->cols[c]));
	/* Home and clear: each frame replaces the last. */
	if (tty)
		fputs("\033[H\033[2J", stdout);
	printf("%s  %s, every %u s (Ctrl-C to stop)\n", when, title, interval_ms / 1000);
	/* Sections in the order they first came, rows in the order they came. */
	for (int k = 0; k < w->nrows; k++) {
		bool first_of_section = true;

		for (int p = 0; p < k; p++)
			first_of_section &= strcmp(w->rows[p].section, w->rows[k].section) != 0;
		if (first_of_section)
			shown += watch_draw_section(w, w->rows[k].section, namew, colw);
	}
	if (!shown)
		printf("\n(no requests)\n");
	for (unsigned int c = 0; c < w->ncols; c++)
		if (w->col_error[c])
			printf("%s is down: %s\n", w->cols[c], orch_status_why(w->col_error[c]));
	if (!tty)
		printf("\n");
	fflush(stdout);
}

/* Sleeps until @deadline (monotonic seconds) or a signal to stop. */
static void watch_sleep(double deadline)
{
	for (;;) {
		double left = deadline - watch_now();
		struct timespec ts;

		if (watch_stop || left <= 0)
			return;
		ts.tv_sec = (time_t)left;
		ts.tv_nsec = (long)((left - (double)ts.tv_sec) * 1e9);
		nanosleep(&ts, NULL);
	}
}

int orch_cli_stats_watch(struct orch_cli *cli, const char *mnt, uint32_t interval_ms,
			 uint64_t count)
{
	struct sigaction sa = { .sa_handler = watch_on_signal };
	struct watch w = { 0 };
	struct orch_cli_fs fs = { 0 };
	const struct orch_cfg *cfg = NULL;
	char title[ORCH_CFG_NAME_MAX + 4200];
	bool tty = isatty(STDOUT_FILENO);
	double last, next;
	uint64_t frames = 0;
	int rc = ORCH_CLI_OK;

	w.rows = calloc(WATCH_ROWS_MAX, sizeof(*w.rows));
	if (!w.rows) {
		orch_cli_err(-ENOMEM, "cannot watch");
		return ORCH_CLI_FAIL;
	}
	if (mnt) {
		w.ncols = 1;
		w.cols[0] = "mount";
		snprintf(title, sizeof(title), "mount %s", mnt);
	} else {
		rc = orch_cli_connect_members(cli, &fs);
		if (rc)
			goto out_free;
		cfg = orch_client_cfg(fs.cl);
		/* A server that does not answer within a frame is shown down. */
		orch_client_set_timeout(fs.cl, ORCH_MAX(interval_ms / 2, 500u));
		w.ncols = cfg->nservers;
		for (unsigned int c = 0; c < w.ncols; c++)
			w.cols[c] = cfg->servers[c].name;
		snprintf(title, sizeof(title), "cluster %s", cfg->cluster_name);
	}
	/* No SA_RESTART: a signal cuts the sleep short. */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	/* The first sample is only the base of the first frame. */
	last = watch_now();
	rc = watch_take(&w, mnt, fs.cl);
	next = last + interval_ms / 1000.0;
	while (!rc) {
		watch_sleep(next);
		if (watch_stop)
			break;
		w.dt = watch_now() - last;
		last += w.dt;
		rc = watch_take(&w, mnt, fs.cl);
		if (rc)
			break;
		watch_draw(&w, title, interval_ms, tty);
		if (count && ++frames >= count)
			break;
		next += interval_ms / 1000.0;
		/* Late (a slow server, a stopped process): start the beat again. */
		if (next < watch_now())
			next = watch_now() + interval_ms / 1000.0;
	}
	if (fs.cl)
		orch_cli_fs_close(&fs);
out_free:
	free(w.rows);
	return rc;
}
