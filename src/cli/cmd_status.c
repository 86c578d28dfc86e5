/*
 * orchard status: the cluster's health in one screen (client/status.h),
 * one line per server.  Exits 0 when every server answered, 1 otherwise.
 */
#include "cli/cli.h"

#include <string.h>
#include <time.h>

#include "client/status.h"
#include "common/util.h"

#define STATUS_DEFAULT_MS 2000
#define STATUS_COLS 11
#define STATUS_COL_LOG 9  /* shown only if a server has a replicated log */

/* Right-aligned columns (numbers). */
static const bool status_right[STATUS_COLS] = {
	[5] = true, [6] = true, [7] = true, [8] = true,
};

static const char *const status_head[STATUS_COLS] = {
	"SERVER", "ADDRESS", "STATE", "VERSION", "UPTIME", "CAPACITY", "USED", "REQ/S", "CONNS",
	"LOG", "LAST SCRUB",
};

struct status_row {
	char cell[STATUS_COLS][96];
};

static void status_fill(struct status_row *row, const struct orch_server_cfg *sc,
			const struct orch_status_srv *s, int64_t now)
{
	uint64_t used = s->capacity - ORCH_MIN(s->free, s->capacity);
	char up[32], cap[32], u[32];

	snprintf(row->cell[0], sizeof(row->cell[0]), "%s", sc->name);
	snprintf(row->cell[1], sizeof(row->cell[1]), "%s:%u", sc->host, sc->port);
	if (s->error) {
		snprintf(row->cell[2], sizeof(row->cell[2]), "down (%s)", orch_status_why(s->error));
		for (int c = 3; c < STATUS_COLS; c++)
			snprintf(row->cell[c], sizeof(row->cell[c]), "-");
		return;
	}
	orch_status_duration(s->uptime_ms / 1000, up, sizeof(up));
	orch_status_bytes(s->capacity, cap, sizeof(cap));
	orch_status_bytes(used, u, sizeof(u));
	if (s->store_error[0])
		snprintf(row->cell[2], sizeof(row->cell[2]), "failed (%s)", s->store_error);
	else
		snprintf(row->cell[2], sizeof(row->cell[2]), "up");
	snprintf(row->cell[3], sizeof(row->cell[3]), "%s", s->version);
	snprintf(row->cell[4], sizeof(row->cell[4]), "%s", up);
	snprintf(row->cell[5], sizeof(row->cell[5]), "%s", cap);
	snprintf(row->cell[6], sizeof(row->cell[6]), "%s %3.0f%%", u,
		 s->capacity ? 100.0 * (double)used / (double)s->capacity : 0.0);
	snprintf(row->cell[7], sizeof(row->cell[7]), "%.1f", s->requests_per_s);
	snprintf(row->cell[8], sizeof(row->cell[8]), "%llu", (unsigned long long)s->connections);
	if (!s->log_role[0])
		snprintf(row->cell[9], sizeof(row->cell[9]), "-");
	else if (s->log_applied < s->log_commit)
		snprintf(row->cell[9], sizeof(row->cell[9]), "%s t%llu @%llu (%llu behind)",
			 s->log_role, (unsigned long long)s->log_term,
			 (unsigned long long)s->log_applied,
			 (unsigned long long)(s->log_commit - s->log_applied));
	else
		snprintf(row->cell[9], sizeof(row->cell[9]), "%s t%llu @%llu", s->log_role,
			 (unsigned long long)s->log_term, (unsigned long long)s->log_applied);
	orch_status_scrub(s, now, row->cell[10], sizeof(row->cell[10]), NULL);
}

static void status_cell(const char *text, int c, const int *w)
{
	if (c == STATUS_COLS - 1)
		printf("%s\n", text);
	else if (status_right[c])
		printf("%*s  ", w[c], text);
	else
		printf("%-*s  ", w[c], text);
}

/* @show_log: the LOG column (term and applied index of each server's log). */
static void status_print(const struct status_row *rows, unsigned int n, bool show_log)
{
	int w[STATUS_COLS];

	for (int c = 0; c < STATUS_COLS; c++) {
		w[c] = (int)strlen(status_head[c]);
		for (unsigned int r = 0; r < n; r++)
			w[c] = ORCH_MAX(w[c], (int)strlen(rows[r].cell[c]));
	}
	for (int c = 0; c < STATUS_COLS; c++)
		if (c != STATUS_COL_LOG || show_log)
			status_cell(status_head[c], c, w);
	for (unsigned int r = 0; r < n; r++)
		for (int c = 0; c < STATUS_COLS; c++)
			if (c != STATUS_COL_LOG || show_log)
				status_cell(rows[r].cell[c], c, w);
}

int orch_cmd_status(struct orch_cli *cli, int argc, char **argv)
{
	struct orch_status_srv srv[ORCH_SERVERS_MAX];
	struct status_row rows[ORCH_SERVERS_MAX];
	const struct orch_cfg *cfg;
	struct orch_cli_fs fs;
	uint64_t cap = 0, used = 0;
	double rate = 0;
	char capt[32], usedt[32];
	bool show_log = false;
	unsigned int up;
	int rc;

	if (!orch_cli_args_connect(cli, argc, argv, STATUS_DEFAULT_MS, &fs, &rc))
		return rc;
	cfg = orch_client_cfg(fs.cl);
	up = orch_status_query(fs.cl, srv);
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		status_fill(&rows[i], &cfg->servers[i], &srv[i], (int64_t)time(NULL));
		if (srv[i].error)
			continue;
		show_log |= srv[i].log_role[0] != '\0';
		cap += srv[i].capacity;
		used += srv[i].capacity - ORCH_MIN(srv[i].free, srv[i].capacity);
		rate += srv[i].requests_per_s;
	}
	orch_status_bytes(cap, capt, sizeof(capt));
	orch_status_bytes(used, usedt, sizeof(usedt));
	printf("cluster %s: %u of %u servers up, %s of %s used (%.1f%%), %.1f requests/s\n\n",
	       cfg->cluster_name, up, cfg->nservers, usedt, capt,
	       cap ? 100.0 * (double)used / (double)cap : 0.0, rate);
	status_print(rows, cfg->nservers, show_log);
	rc = up == cfg->nservers ? ORCH_CLI_OK : ORCH_CLI_FAIL;
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		if (srv[i].error) {
			fprintf(stderr, "orchard: server '%s' is down: %s\n", cfg->servers[i].name,
				orch_cli_strerror(srv[i].error, cfg->servers[i].name));
		} else if (srv[i].store_error[0]) {
			fprintf(stderr, "orchard: server '%s' failed: its store is read-only after "
				"an I/O error (%s); see docs/ADMIN.md, \"Disk errors\"\n",
				cfg->servers[i].name, srv[i].store_error);
			rc = ORCH_CLI_FAIL;
		}
	}
	orch_cli_fs_close(&fs); /* @cfg is the client's: not past here */
	return rc;
}
