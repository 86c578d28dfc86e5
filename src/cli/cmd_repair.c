/*
 * orchard repair: rebuilds one index of a stopped server's extent store
 * from the others (src/store/repair.h), then re-checks the store.  Runs on
 * the server's host, on its data directory from the config; the store lock
 * makes it refuse while the server runs.
 *
 * Exit status as xfs_repair/xfs_scrub add them up: 0 the store checks clean
 * after the rebuild, 1 findings remain (or the rebuild refused because a
 * source record is damaged), 4 operational error (the server is running,
 * no store, I/O), 8 usage.  A dry run exits 1 if the rebuild would change
 * anything, else 0.
 *
 * Progress: the store library does the whole rebuild and re-check in one
 * call and tells nothing of its progress, so the bar shows the bytes this
 * process has read so far (rchar of /proc/self/io: the store's indexes,
 * and its data blocks for bmap and --data), with the rate and the time so
 * far, and no ETA; its ticker redraws it while the call runs.
 */
#include "cli/cli.h"
#include "cli/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/repair.h"

#define REPAIR_EXIT_ERRORS 1
#define REPAIR_EXIT_OPERATIONAL 4
#define REPAIR_EXIT_USAGE 8

int orch_cmd_repair(struct orch_cli *cli, int argc, char **argv);

static void repair_log(void *arg, const char *msg)
{
	(void)arg;
	orch_cli_msg("repair: %s", msg);
}

static void repair_finding(void *arg, const struct orch_store_finding *f)
{
	(void)arg;
	orch_progress_pause();
	printf("finding: %s %s ag=%" PRId64 " block=%" PRId64 " handle=%#" PRIx64
	       ": %s\n", f->rule, f->structure, f->ag, f->block, f->handle,
	       f->detail);
	orch_progress_resume();
}

/* rchar of /proc/self/io: bytes this process has read; 0 if not accounted. */
static uint64_t repair_rchar(void)
{
	char buf[512];
	const char *at;
	ssize_t n;
	int fd = open("/proc/self/io", O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return 0;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	at = strstr(buf, "rchar: ");
	return at ? strtoull(at + 7, NULL, 10) : 0;
}

/* The bar's count: bytes read since *@arg, the rchar at the start.  Any thread. */
static uint64_t repair_progress_sample(void *arg)
{
	uint64_t start = *(const uint64_t *)arg, now = repair_rchar();

	return now > start ? now - start : 0;
}

static int repair_usage(struct orch_cli *cli, const char *why, const char *arg)
{
	if (why)
		orch_cli_msg("repair: %s%s%s%s", why, arg ? " '" : "", arg ? arg : "",
			     arg ? "'" : "");
	return orch_cli_usage(cli, REPAIR_EXIT_USAGE);
}

/* Prints the outcome; returns the exit status. */
static int repair_report(const char *server, enum orch_store_rebuild what, bool dry,
			 const struct orch_store_repair_result *r)
{
	printf("%s %s of server '%s': %s records %" PRIu64 " before, %" PRIu64
	       " after (%" PRIu64 " added, %" PRIu64 " dropped)\n",
	       dry ? "dry run: would rebuild" : "rebuilt", orch_store_rebuild_name(what),
	       server, r->table, r->before, r->after, r->added, r->dropped);
	if (r->skipped)
		printf("left alone: %" PRIu64 " source records (see above)\n", r->skipped);
	if (what == ORCH_STORE_REBUILD_BMAP)
		printf("objects whose counters changed: %" PRIu64 "; blocks failing their "
		       "checksum: %" PRIu64 "\n", r->objects, r->csum_bad);
	if (r->agstat)
		printf("agstat recomputed\n");
	if (dry)
		return r->added || r->dropped ? REPAIR_EXIT_ERRORS : ORCH_CLI_OK;
	if (r->findings < 0) {
		orch_cli_err((int)r->findings, "re-check of server '%s' failed", server);
		return REPAIR_EXIT_OPERATIONAL;
	}
	if (r->findings == 0) {
		printf("re-check: clean\n");
		return r->csum_bad ? REPAIR_EXIT_ERRORS : ORCH_CLI_OK;
	}
	printf("re-check: %ld finding%s remain\n", r->findings, r->findings == 1 ? "" : "s");
	return REPAIR_EXIT_ERRORS;
}

int orch_cmd_repair(struct orch_cli *cli, int argc, char **argv)
{
	enum { OPT_REBUILD = 0x200, OPT_DRY, OPT_DATA };
	static const struct option opts[] = {
		{ "rebuild", required_argument, NULL, OPT_REBUILD },
		{ "dry-run", no_argument, NULL, OPT_DRY },
		{ "data", no_argument, NULL, OPT_DATA },
		{ "quiet", no_argument, NULL, 'q' },
		ORCH_CLI_OPTS_END
	};
	struct orch_store_repair_opts o = { .log = repair_log, .finding = repair_finding };
	struct orch_progress_opts po = { .tick = true, .sample = repair_progress_sample };
	struct orch_store_repair_result res;
	struct orch_progress pg;
	char label[32];
	uint64_t rchar0;
	enum orch_store_rebuild what = 0;
	const char *path, *server;
	struct orch_cfg *cfg;
	int opt, idx, error, rc;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:q", opts)) != -1) {
		switch (opt) {
		case 'q':
			po.quiet = true;
			break;
		case OPT_REBUILD:
			if (orch_store_rebuild_parse(optarg, &what))
				return repair_usage(cli, "--rebuild: want bmap, rmap, freespace "
						    "or refcount, not", optarg);
			break;
		case OPT_DRY:
			o.dry_run = true;
			break;
		case OPT_DATA:
			o.check_data = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, REPAIR_EXIT_USAGE);
		}
	}
	if (optind + 1 != argc)
		return repair_usage(cli, optind == argc ? "SERVER is required" :
				    "unexpected argument", optind == argc ? NULL :
				    argv[optind + 1]);
	if (!what)
		return repair_usage(cli, "--rebuild is required", NULL);
	server = argv[optind];
	path = orch_cli_conf_path(cli);
	if (!path)
		return REPAIR_EXIT_USAGE;
	if (orch_cli_cfg_load(path, false, &cfg))
		return REPAIR_EXIT_OPERATIONAL;
	idx = orch_cfg_member_index(cfg, server);
	if (idx < 0) {
		orch_cli_msg("no server '%s' in '%s'", server, cfg->path);
		free(cfg);
		return REPAIR_EXIT_USAGE;
	}
	snprintf(label, sizeof(label), "repair %s", orch_store_rebuild_name(what));
	po.label = label;
	rchar0 = repair_rchar();
	po.arg = &rchar0;
	orch_progress_init(&pg, &po);
	error = orch_store_repair(cfg->members[idx].data_dir, what, &o, &res);
	orch_progress_fini(&pg, !error);
	if (error == -EBUSY) {
		orch_cli_msg("cannot repair the store in '%s': it is in use (is server '%s' "
			     "running? stop it first)", cfg->members[idx].data_dir, server);
		rc = REPAIR_EXIT_OPERATIONAL;
	} else if (error == -EUCLEAN) {
		orch_cli_msg("refused to rebuild %s of server '%s': a source record is "
			     "damaged (see above); nothing was changed",
			     orch_store_rebuild_name(what), server);
		rc = REPAIR_EXIT_ERRORS;
	} else if (error) {
		orch_cli_err(error, "cannot repair the store in '%s'",
			     cfg->members[idx].data_dir);
		rc = REPAIR_EXIT_OPERATIONAL;
	} else {
		rc = repair_report(server, what, o.dry_run, &res);
	}
	free(cfg);
	return rc;
}
