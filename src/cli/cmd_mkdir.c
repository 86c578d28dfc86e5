/*
 * orchard mkdir [-p] [-m MODE]: as mkdir(1).  The server stores the mode it
 * is given, so the umask is applied here, as the kernel would.  With -p the
 * path is walked from the root, one lookup per component, creating what is
 * missing (parents get u+wx, as in mkdir(1)).
 */
#include "cli/cli.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

/* mkdir -p inside Orchard. */
static int mkdir_parents(struct orch_cli_fs *fs, const char *path, uint32_t mode)
{
	uint32_t parent_mode = (0777 & ~orch_cli_umask()) | 0300;
	struct orch_attr dir = { 0 }, a;
	char name[ORCH_NAME_MAX + 1];
	const char *p = path;
	int error;

	error = orch_fs_getattr(fs->cl, &fs->cred, ORCH_ROOT_HANDLE, &dir);
	if (error) {
		orch_cli_err(error, "cannot access '/'");
		return error;
	}
	for (;;) {
		size_t len;
		bool last;

		p += strspn(p, "/");
		len = strcspn(p, "/");
		if (!len)
			return 0;
		last = p[len + strspn(p + len, "/")] == '\0';
		if (len > ORCH_NAME_MAX) {
			orch_cli_err(-ENAMETOOLONG, "cannot create directory '%s'", path);
			return -ENAMETOOLONG;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		p += len;
		error = orch_fs_lookup(fs->cl, &fs->cred, dir.handle, name, &a);
		if (error == -ENOENT) {
			error = orch_fs_mkdir(fs->cl, &fs->cred, dir.handle, name,
					      S_IFDIR | (last ? mode : parent_mode), &a);
			/* Lost a race with another mkdir -p: use theirs. */
			if (error == -EEXIST)
				error = orch_fs_lookup(fs->cl, &fs->cred, dir.handle, name, &a);
		}
		if (!error && S_ISLNK(a.mode)) {
			/* Follow it as a path walk would, with the library's resolver. */
			char sub[ORCH_PATH_MAX + 1];
			size_t n = (size_t)(p - path);

			if (n >= sizeof(sub)) {
				error = -ENAMETOOLONG;
			} else {
				memcpy(sub, path, n);
				sub[n] = '\0';
				error = orch_fs_resolve(fs->cl, &fs->cred, sub, true, &a);
			}
		}
		if (!error && !S_ISDIR(a.mode))
			error = -ENOTDIR;
		if (error) {
			orch_cli_err(error, "cannot create directory '%.*s'", (int)(p - path), path);
			return error;
		}
		dir = a;
	}
}

int orch_cmd_mkdir(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "parents", no_argument, NULL, 'p' },
		{ "mode", required_argument, NULL, 'm' },
		ORCH_CLI_OPTS_END
	};
	uint32_t mode = 0777 & ~orch_cli_umask();
	const char *mode_arg = NULL;
	struct orch_cli_fs fs;
	bool parents = false;
	int opt, rc = ORCH_CLI_OK;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:pm:", opts)) != -1) {
		switch (opt) {
		case 'p':
			parents = true;
			break;
		case 'm':
			mode_arg = optarg;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	/* Symbolic modes are relative to a=rwx, as in mkdir(1). */
	if (mode_arg && orch_cli_mode_parse(mode_arg, S_IFDIR | 0777, &mode))
		return orch_cli_usage_err(cli, "invalid mode '%s'", mode_arg);
	if (optind == argc)
		return orch_cli_usage_err(cli, "missing PATH");
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	for (int i = optind; i < argc; i++) {
		char name[ORCH_NAME_MAX + 1];
		struct orch_attr parent, a;
		int error;

		if (argv[i][0] != '/') {
			orch_cli_msg("'%s': paths inside Orchard are absolute (start with '/')",
				     argv[i]);
			rc = ORCH_CLI_FAIL;
			continue;
		}
		if (parents) {
			if (mkdir_parents(&fs, argv[i], mode))
				rc = ORCH_CLI_FAIL;
			continue;
		}
		if (orch_cli_resolve_parent(&fs, argv[i], &parent, name)) {
			rc = ORCH_CLI_FAIL;
			continue;
		}
		error = orch_fs_mkdir(fs.cl, &fs.cred, parent.handle, name, S_IFDIR | mode, &a);
		if (error) {
			orch_cli_err(error, "cannot create directory '%s'", argv[i]);
			rc = ORCH_CLI_FAIL;
		}
	}
	orch_cli_fs_close(&fs);
	return rc;
}
