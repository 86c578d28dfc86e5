/*
 * orchard scrub: AD2SV_SCRUB to one server or all of them, in parallel.
 * Each server checks itself on its admin thread (store invariants, its
 * namespace, optionally every data block, throttled) while it keeps
 * serving, and answers with a report (text lines or JSON) and the number
 * of findings.  Exit status as xfs_scrub: 1 if anything was found, 4 if a
 * server could not be checked, the two added; 8 for a usage error.
 *
 * Progress: the servers report only at the end, so the bar counts the
 * servers whose report has arrived, read in config order (a fast server
 * behind a slow one counts when the slow one does), redrawn by its ticker
 * so the rate and ETA move while the client waits.
 */
#include "cli/cmd_admin.h"
#include "cli/progress.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "proto/pages.h"

/* A scrub of a big store takes long: the call waits up to a day. */
#define SCRUB_TIMEOUT_MS (24u * 3600 * 1000)
#define SCRUB_RATE_DEFAULT 64u   /* MiB/s */

struct scrub_srv {
	bool asked;
	struct orch_call *call;
	int error;
	struct orch_reply rep;
};

/* A usage error: the reason, the hint, and scrub's own exit code. */
static int scrub_usage(struct orch_cli *cli, const char *what, const char *arg)
{
	orch_cli_usage_err(cli, "%s%s%s%s", what, arg ? " '" : "", arg ? arg : "",
			   arg ? "'" : "");
	return ORCH_SCRUB_USAGE;
}

/* Prints one server's report; returns its share of the exit status. */
static int scrub_print(const struct orch_server_cfg *s, struct scrub_srv *r, bool json,
		       bool first)
{
	const struct orch_msg *m = &r->rep.m;

	if (json) {
		printf("%s\n  {\"name\": ", first ? "" : ",");
		orch_cli_json_str(stdout, s->name, strlen(s->name));
		if (r->error) {
			const char *why = orch_cli_strerror(r->error, s->name);

			printf(", \"up\": false, \"error\": ");
			orch_cli_json_str(stdout, why, strlen(why));
			printf("}");
		} else {
			printf(", \"up\": true, \"errors\": %" PRIu64 ", \"report\": %.*s}",
			       m->size, (int)m->json.len, m->json.s);
		}
	} else if (r->error) {
		orch_cli_msg("cannot scrub server '%s': %s", s->name,
			     orch_cli_strerror(r->error, s->name));
	} else {
		const char *p = m->json.s, *end = p + m->json.len;

		while (p < end) {
			const char *nl = memchr(p, '\n', (size_t)(end - p));
			size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);

			printf("%s: %.*s\n", s->name, (int)len, p);
			p += len + 1;
		}
		printf("%s: %s\n", s->name, m->size ? "errors found" : "clean");
		if (m->size)
			printf("%s: %" PRIu64 " findings\n", s->name, m->size);
	}
	if (r->error)
		return ORCH_SCRUB_OPERATIONAL;
	return m->size ? ORCH_SCRUB_ERRORS : ORCH_SCRUB_CLEAN;
}

static int scrub_run(struct orch_cli *cli, const char *server, bool data, bool json,
		     bool reclaim, uint64_t rate, bool quiet)
{
	struct orch_progress_opts po = { .label = "scrub", .unit = "servers", .quiet = quiet,
					 .tick = true };
	struct orch_progress pg;
	struct scrub_srv *srv;
	const struct orch_cfg *cfg;
	struct orch_cli_fs fs;
	int rc, status = 0, idx = -1;
	bool first = true;

	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc == ORCH_CLI_USAGE ? ORCH_SCRUB_USAGE : ORCH_SCRUB_OPERATIONAL;
	cfg = orch_client_cfg(fs.cl);
	if (server) {
		idx = orch_cfg_server_index(cfg, server);
		if (idx < 0) {
			orch_cli_fs_close(&fs);
			return scrub_usage(cli, "no such server in the configuration:", server);
		}
	}
	srv = calloc(cfg->nservers, sizeof(*srv));
	if (!srv) {
		orch_cli_fs_close(&fs);
		return ORCH_SCRUB_OPERATIONAL;
	}
	orch_client_set_timeout(fs.cl, SCRUB_TIMEOUT_MS);
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		struct orch_msg req;

		if (idx >= 0 && (unsigned int)idx != i)
			continue;
		orch_msg_init(&req, ORCH_AD2SV_SCRUB);
		req.scrub_flags = (data ? ORCH_SCRUB_F_DATA : 0) | (json ? ORCH_SCRUB_F_JSON : 0) |
			      (reclaim ? ORCH_SCRUB_F_RECLAIM : 0);
		req.length = (uint32_t)rate;
		srv[i].asked = true;
		srv[i].error = orch_client_send(fs.cl, i, &req, &srv[i].call);
		po.total++;
	}
	orch_progress_init(&pg, &po);
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		if (srv[i].asked && !srv[i].error)
			srv[i].error = orch_client_wait(fs.cl, srv[i].call, &srv[i].rep);
		if (srv[i].asked)
			orch_progress_add(&pg, 1);
	}
	/* Done: every server answered or was found down, which the report tells. */
	orch_progress_fini(&pg, true);
	if (json)
		printf("{\"servers\": [");
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		if (!srv[i].asked)
			continue;
		status |= scrub_print(&cfg->servers[i], &srv[i], json, first);
		first = false;
		if (!srv[i].error)
			orch_reply_release(&srv[i].rep);
	}
	if (json)
		printf("\n], \"status\": %d}\n", status);
	free(srv);
	orch_cli_fs_close(&fs);
	return status;
}

int orch_cmd_scrub(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "all", no_argument, NULL, 'a' },
		{ "data", no_argument, NULL, 'd' },
		{ "json", no_argument, NULL, 'j' },
		{ "rate", required_argument, NULL, 'r' },
		{ "reclaim", no_argument, NULL, 'R' },
		{ "quiet", no_argument, NULL, 'q' },
		ORCH_CLI_OPTS_END
	};
	bool all = false, data = false, json = false, reclaim = false, quiet = false;
	uint64_t rate = SCRUB_RATE_DEFAULT;
	int opt;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:adjqr:R", opts)) != -1) {
		switch (opt) {
		case 'a': all = true; break;
		case 'd': data = true; break;
		case 'j': json = true; break;
		case 'q': quiet = true; break;
		case 'R': reclaim = true; break;
		case 'r':
			if (orch_cli_uint_parse(optarg, 0, 1u << 20, &rate))
				return scrub_usage(cli, "--rate: bad MiB/s", optarg);
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			orch_cli_usage(cli, ORCH_CLI_USAGE);
			return ORCH_SCRUB_USAGE;
		}
	}
	if (all == (optind < argc))
		return scrub_usage(cli, all ? "give a SERVER or --all, not both" :
				   "give a SERVER or --all", NULL);
	if (optind + (all ? 0 : 1) != argc)
		return scrub_usage(cli, "unexpected argument", argv[argc - 1]);
	return scrub_run(cli, all ? NULL : argv[optind], data, json, reclaim, rate, quiet);
}
