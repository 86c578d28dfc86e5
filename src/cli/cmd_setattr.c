/*
 * The commands that are one setattr each: truncate, chmod and touch.  The
 * server checks permissions as Linux would (src/meta/meta.h).  truncate and
 * touch create a missing file, as their coreutils namesakes do.
 */
#include "cli/cli.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/*
 * Resolves @path, creating an empty regular file if its last component is
 * missing; *@a gets its attributes.
 */
static int setattr_open(struct orch_cli_fs *fs, const char *path, struct orch_attr *a)
{
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr parent;
	int error;

	if (path[0] == '/') {
		error = orch_fs_resolve(fs->cl, &fs->cred, path, true, a);
		if (error != -ENOENT) {
			if (error)
				orch_cli_err(error, "cannot access '%s'", path);
			return error;
		}
	}
	error = orch_cli_resolve_parent(fs, path, &parent, name);
	if (error)
		return error;
	error = orch_fs_create(fs->cl, &fs->cred, parent.handle, name,
			       S_IFREG | (0666 & ~orch_cli_umask()), 0, false, a, NULL);
	if (error)
		orch_cli_err(error, "cannot create '%s'", path);
	return error;
}

int orch_cmd_truncate(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		ORCH_CLI_OPTS_END
	};
	const char *size_arg = NULL;
	struct orch_attr a, in = { 0 };
	struct orch_cli_fs fs;
	int opt, error, rc = ORCH_CLI_OK;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:s:", opts)) != -1) {
		switch (opt) {
		case 's':
			size_arg = optarg;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (!size_arg)
		return orch_cli_usage_err(cli, "-s SIZE is required");
	if (orch_cli_size_parse(size_arg, &in.size))
		return orch_cli_usage_err(cli, "invalid size '%s'", size_arg);
	if (optind == argc)
		return orch_cli_usage_err(cli, "missing PATH");
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	for (int i = optind; i < argc; i++) {
		if (setattr_open(&fs, argv[i], &a)) {
			rc = ORCH_CLI_FAIL;
			continue;
		}
		error = orch_fs_setattr(fs.cl, &fs.cred, a.handle, ORCH_SET_SIZE, &in, &a);
		if (error) {
			orch_cli_err(error, "cannot truncate '%s'", argv[i]);
			rc = ORCH_CLI_FAIL;
		}
	}
	orch_cli_fs_close(&fs);
	return rc;
}

int orch_cmd_chmod(struct orch_cli *cli, int argc, char **argv)
{
	struct orch_cli_fs fs;
	const char *mode_arg;
	uint32_t check;
	int rc, error;

	if (!orch_cli_args(cli, argc, argv, 2, -1, &rc))
		return rc;
	mode_arg = argv[optind];
	/* Reject a bad mode before touching anything. */
	if (orch_cli_mode_parse(mode_arg, S_IFREG, &check))
		return orch_cli_usage_err(cli, "invalid mode '%s'", mode_arg);
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	for (int i = optind + 1; i < argc; i++) {
		struct orch_attr a, in = { 0 };
		uint32_t perm;

		if (orch_cli_resolve(&fs, argv[i], true, &a)) {
			rc = ORCH_CLI_FAIL;
			continue;
		}
		orch_cli_mode_parse(mode_arg, a.mode, &perm);
		in.mode = (a.mode & S_IFMT) | perm;
		error = orch_fs_setattr(fs.cl, &fs.cred, a.handle, ORCH_SET_MODE, &in, &a);
		if (error) {
			orch_cli_err(error, "cannot change permissions of '%s'", argv[i]);
			rc = ORCH_CLI_FAIL;
		}
	}
	orch_cli_fs_close(&fs);
	return rc;
}

int orch_cmd_touch(struct orch_cli *cli, int argc, char **argv)
{
	struct orch_attr a, in = { 0 };
	struct orch_cli_fs fs;
	int rc, error;

	if (!orch_cli_args(cli, argc, argv, 1, -1, &rc))
		return rc;
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	for (int i = optind; i < argc; i++) {
		if (setattr_open(&fs, argv[i], &a)) {
			rc = ORCH_CLI_FAIL;
			continue;
		}
		error = orch_fs_setattr(fs.cl, &fs.cred, a.handle,
					ORCH_SET_ATIME_NOW | ORCH_SET_MTIME_NOW, &in, &a);
		if (error) {
			orch_cli_err(error, "cannot touch '%s'", argv[i]);
			rc = ORCH_CLI_FAIL;
		}
	}
	orch_cli_fs_close(&fs);
	return rc;
}
