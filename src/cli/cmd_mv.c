/*
 * orchard mv SRC DST: one orch_fs_rename.  As mv(1), a DST that is an
 * existing directory (after following symlinks) receives SRC inside it.
 */
#include "cli/cli.h"

#include <string.h>
#include <sys/stat.h>

int orch_cmd_mv(struct orch_cli *cli, int argc, char **argv)
{
	char sname[ORCH_NAME_MAX + 1], dname[ORCH_NAME_MAX + 1];
	struct orch_attr sparent, dparent;
	const char *src, *dst;
	struct orch_cli_fs fs;
	int rc, error;

	if (!orch_cli_args(cli, argc, argv, 2, 2, &rc))
		return rc;
	src = argv[optind];
	dst = argv[optind + 1];
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	rc = ORCH_CLI_FAIL;
	if (orch_cli_resolve_parent(&fs, src, &sparent, sname))
		goto out_fs;
	if (dst[0] == '/' && orch_fs_resolve(fs.cl, &fs.cred, dst, true, &dparent) == 0 &&
	    S_ISDIR(dparent.mode)) {
		snprintf(dname, sizeof(dname), "%s", sname);
	} else if (orch_cli_resolve_parent(&fs, dst, &dparent, dname)) {
		goto out_fs;
	}
	error = orch_fs_rename(fs.cl, &fs.cred, sparent.handle, sname, dparent.handle, dname, 0);
	if (error) {
		orch_cli_err(error, "cannot move '%s' to '%s'", src, dst);
		goto out_fs;
	}
	rc = ORCH_CLI_OK;
out_fs:
	orch_cli_fs_close(&fs);
	return rc;
}
