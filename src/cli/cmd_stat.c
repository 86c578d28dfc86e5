/*
 * orchard stat: every attribute of an inode, including what only Orchard
 * has: the handle, the server it lives on, and the striping layout.
 */
#include "cli/cli.h"

#include <inttypes.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

static void stat_print(struct orch_cli_fs *fs, const char *path, const struct orch_attr *a)
{
	char mode[11], t[64], target[ORCH_PATH_MAX + 1];

	orch_cli_mode_str(a->mode, mode);
	printf("  File: %s", path);
	if (S_ISLNK(a->mode) &&
	    orch_fs_readlink(fs->cl, &fs->cred, a->handle, target, sizeof(target)) == 0)
		printf(" -> %s", target);
	printf("\n  Type: %s\n", orch_cli_type_name(a->mode));
	printf("Handle: 0x%016" PRIx64 "  Server: %u  Parent: 0x%016" PRIx64 "\n", a->handle,
	       orch_handle_server(a->handle), a->parent);
	printf("  Size: %-12" PRIu64 "  Links: %u", a->size, a->nlink);
	if (S_ISCHR(a->mode) || S_ISBLK(a->mode))
		printf("  Device: %u,%u", major(a->rdev), minor(a->rdev));
	printf("\nAccess: (%04o/%s)  Uid: %u  Gid: %u\n", a->mode & 07777, mode, a->uid, a->gid);
	if (S_ISREG(a->mode))
		printf("Layout: strip_size=%u stripe_count=%u first_server=%u\n",
		       a->layout.strip_size, a->layout.stripe_count, a->layout.first_server);
	orch_cli_time_str(a->atime_ns, true, t, sizeof(t));
	printf("Access: %s\n", t);
	orch_cli_time_str(a->mtime_ns, true, t, sizeof(t));
	printf("Modify: %s\n", t);
	orch_cli_time_str(a->ctime_ns, true, t, sizeof(t));
	printf("Change: %s\n", t);
}

int orch_cmd_stat(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dereference", no_argument, NULL, 'L' },
		ORCH_CLI_OPTS_END
	};
	struct orch_cli_fs fs;
	bool follow = false;
	int opt, rc = ORCH_CLI_OK;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:L", opts)) != -1) {
		switch (opt) {
		case 'L':
			follow = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (optind == argc)
		return orch_cli_usage_err(cli, "missing PATH");
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	for (int i = optind; i < argc; i++) {
		struct orch_attr a;

		if (orch_cli_resolve(&fs, argv[i], follow, &a)) {
			rc = ORCH_CLI_FAIL;
			continue;
		}
		stat_print(&fs, argv[i], &a);
	}
	orch_cli_fs_close(&fs);
	return rc;
}
