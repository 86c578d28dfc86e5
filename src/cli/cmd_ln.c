/*
 * orchard ln [-s] TARGET LINKNAME: a hard link to the inode TARGET names
 * (not following a final symlink, as ln(1) on Linux), or a symbolic link
 * holding the text TARGET, which is stored as given and not checked.  A
 * LINKNAME that is an existing directory receives basename(TARGET) inside.
 */
#include "cli/cli.h"

#include <string.h>
#include <sys/stat.h>

int orch_cmd_ln(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "symbolic", no_argument, NULL, 's' },
		ORCH_CLI_OPTS_END
	};
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr parent, a;
	const char *target, *link;
	struct orch_cli_fs fs;
	bool symbolic = false;
	int opt, rc, error;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:s", opts)) != -1) {
		switch (opt) {
		case 's':
			symbolic = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (argc - optind != 2)
		return orch_cli_usage_err(cli, "want TARGET and LINKNAME");
	target = argv[optind];
	link = argv[optind + 1];
	if (!*target)
		return orch_cli_usage_err(cli, "empty TARGET");
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	rc = ORCH_CLI_FAIL;
	if (link[0] == '/' && orch_fs_resolve(fs.cl, &fs.cred, link, true, &parent) == 0 &&
	    S_ISDIR(parent.mode)) {
		orch_cli_basename(target, name, sizeof(name));
		if (!name[0] || !strcmp(name, "/") || !strcmp(name, ".") || !strcmp(name, "..")) {
			orch_cli_msg("cannot link '%s' into '%s': no name to use", target, link);
			goto out_fs;
		}
	} else if (orch_cli_resolve_parent(&fs, link, &parent, name)) {
		goto out_fs;
	}
	if (symbolic) {
		error = orch_fs_symlink(fs.cl, &fs.cred, parent.handle, name, target, &a);
	} else {
		if (orch_cli_resolve(&fs, target, false, &a))
			goto out_fs;
		error = orch_fs_link(fs.cl, &fs.cred, a.handle, parent.handle, name, &a);
	}
	if (error) {
		orch_cli_err(error, "cannot create %s link '%s'", symbolic ? "symbolic" : "hard",
			     link);
		goto out_fs;
	}
	rc = ORCH_CLI_OK;
out_fs:
	orch_cli_fs_close(&fs);
	return rc;
}
