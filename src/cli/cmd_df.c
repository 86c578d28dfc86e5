/* orchard df: space and inodes, summed over every server by orch_fs_statfs. */
#include "cli/cli.h"

#include <string.h>

static void df_size(uint64_t bytes, bool human, char *out, size_t outlen)
{
	if (human)
		orch_cli_human(bytes, out, outlen);
	else
		snprintf(out, outlen, "%llu", (unsigned long long)(bytes / 1024));
}

static void df_pct(uint64_t used, uint64_t avail, char *out, size_t outlen)
{
	/* df(1) rounds up, and counts only what non-root users can still get. */
	if (used + avail == 0)
		snprintf(out, outlen, "-");
	else
		snprintf(out, outlen, "%llu%%",
			 (unsigned long long)((used * 100 + used + avail - 1) / (used + avail)));
}

int orch_cmd_df(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "human-readable", no_argument, NULL, 'h' },
		ORCH_CLI_OPTS_END
	};
	char fsname[ORCH_CFG_NAME_MAX + 16], size[32], used[32], avail[32], pct[8], ipct[8];
	struct orch_statfs st;
	struct orch_cli_fs fs;
	uint64_t bs, iused;
	bool human = false;
	int opt, rc, error;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:h", opts)) != -1) {
		switch (opt) {
		case 'h':
			human = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (optind != argc)
		return orch_cli_usage_err(cli, "unexpected argument '%s'", argv[optind]);
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	error = orch_fs_statfs(fs.cl, &fs.cred, &st);
	snprintf(fsname, sizeof(fsname), "orchard:%s", orch_client_cfg(fs.cl)->cluster_name);
	orch_cli_fs_close(&fs);
	if (error) {
		orch_cli_err(error, "cannot get file system statistics");
		return ORCH_CLI_FAIL;
	}
	bs = st.bsize ? st.bsize : 4096;
	df_size(st.blocks * bs, human, size, sizeof(size));
	df_size((st.blocks - st.bfree) * bs, human, used, sizeof(used));
	df_size(st.bavail * bs, human, avail, sizeof(avail));
	df_pct(st.blocks - st.bfree, st.bavail, pct, sizeof(pct));
	iused = st.files - st.ffree;
	df_pct(iused, st.ffree, ipct, sizeof(ipct));
	printf("%-20s %12s %12s %12s %5s %12s %12s %12s %5s\n", "Filesystem",
	       human ? "Size" : "1K-blocks", "Used", "Available", "Use%", "Inodes", "IUsed",
	       "IFree", "IUse%");
	printf("%-20s %12s %12s %12s %5s %12llu %12llu %12llu %5s\n", fsname, size, used, avail,
	       pct, (unsigned long long)st.files, (unsigned long long)iused,
	       (unsigned long long)st.ffree, ipct);
	return ORCH_CLI_OK;
}
