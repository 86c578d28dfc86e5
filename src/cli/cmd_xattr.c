/*
 * orchard xattr get|set|list|rm PATH [NAME [VALUE]]: extended attributes,
 * following a final symlink (as getfattr/setfattr do by default).
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct xattr_verb {
	const char *name;
	int nargs;  /* operands after the verb: PATH, NAME, VALUE */
};

static const struct xattr_verb xattr_verbs[] = {
	{ "get", 2 }, { "set", 3 }, { "list", 1 }, { "rm", 2 },
};

static int xattr_run(struct orch_cli_fs *fs, const char *verb, char **args)
{
	const char *path = args[0], *name = args[1];
	struct orch_attr a;
	size_t len = 0;
	char *buf;
	int error;

	if (orch_cli_resolve(fs, path, true, &a))
		return -ENOENT;
	if (!strcmp(verb, "set")) {
		error = orch_fs_setxattr(fs->cl, &fs->cred, a.handle, name, args[2],
					 strlen(args[2]), 0);
		if (error)
			orch_cli_err(error, "cannot set '%s' on '%s'", name, path);
		return error;
	}
	if (!strcmp(verb, "rm")) {
		error = orch_fs_removexattr(fs->cl, &fs->cred, a.handle, name);
		if (error)
			orch_cli_err(error, "cannot remove '%s' from '%s'", name, path);
		return error;
	}
	buf = malloc(ORCH_XATTR_LIST_MAX > ORCH_XATTR_SIZE_MAX ? ORCH_XATTR_LIST_MAX
							      : ORCH_XATTR_SIZE_MAX);
	if (!buf)
		return -ENOMEM;
	if (!strcmp(verb, "get")) {
		error = orch_fs_getxattr(fs->cl, &fs->cred, a.handle, name, buf,
					 ORCH_XATTR_SIZE_MAX, &len);
		if (error) {
			orch_cli_err(error, "cannot get '%s' of '%s'", name, path);
		} else {
			error = orch_cli_write_all(STDOUT_FILENO, buf, len);
			if (!error)
				error = orch_cli_write_all(STDOUT_FILENO, "\n", 1);
			if (error)
				orch_cli_err(error, "cannot write stdout");
		}
	} else {
		error = orch_fs_listxattr(fs->cl, &fs->cred, a.handle, buf, ORCH_XATTR_LIST_MAX,
					  &len);
		if (error)
			orch_cli_err(error, "cannot list attributes of '%s'", path);
		/* NUL-separated names, one a line. */
		for (size_t off = 0; !error && off < len;) {
			size_t n = strnlen(buf + off, len - off);

			if (n)
				printf("%.*s\n", (int)n, buf + off);
			off += n + 1;
		}
	}
	free(buf);
	return error;
}

int orch_cmd_xattr(struct orch_cli *cli, int argc, char **argv)
{
	const struct xattr_verb *v = NULL;
	struct orch_cli_fs fs;
	int rc, error;

	if (argc < 2)
		return orch_cli_usage_err(cli, "missing verb (get, set, list or rm)");
	if (!strcmp(argv[1], "--help"))
		return orch_cli_usage(cli, ORCH_CLI_OK);
	for (size_t i = 0; i < sizeof(xattr_verbs) / sizeof(xattr_verbs[0]); i++)
		if (!strcmp(argv[1], xattr_verbs[i].name))
			v = &xattr_verbs[i];
	if (!v)
		return orch_cli_usage_err(cli, "unknown verb '%s' (want get, set, list or rm)",
					  argv[1]);
	/* Options as usual; a VALUE that begins with '-' needs "--" first. */
	orch_cli_getopt_reset();
	if (!orch_cli_args(cli, argc - 1, argv + 1, v->nargs, v->nargs, &rc))
		return rc;
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	error = xattr_run(&fs, v->name, argv + 1 + optind);
	orch_cli_fs_close(&fs);
	return error ? ORCH_CLI_FAIL : ORCH_CLI_OK;
}
