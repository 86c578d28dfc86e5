/*
 * orchard rm [-r] [-f]: unlink files; with -r, empty directories depth first
 * and rmdir them.
 *
 * A directory is emptied in passes: each pass reads it in batches and removes
 * what it read.  Readdir cookies are meant to be stable under deletion, but a
 * second pass costs one empty readdir and makes the result independent of
 * that promise.  Passes stop when one removes nothing (done) or fails on an
 * entry (reported once; the directory is then left, as rm(1) does).
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Entries per readdir while removing: memory per level of the tree. */
#define RM_BATCH 128

struct rm_opts {
	bool recursive;
	bool force;
};

static int rm_dir(struct orch_cli_fs *fs, const char *path, uint64_t dir,
		  const struct rm_opts *o);

/* Removes @name (type @type, handle @h) from @parent. */
static int rm_entry(struct orch_cli_fs *fs, const char *path, uint64_t parent,
		    const char *name, uint32_t type, uint64_t h, const struct rm_opts *o)
{
	int error;

	if (S_ISDIR(type)) {
		if (!o->recursive) {
			orch_cli_err(-EISDIR, "cannot remove '%s'", path);
			return -EISDIR;
		}
		error = rm_dir(fs, path, h, o);
		if (error)
			return error;
		error = orch_fs_rmdir(fs->cl, &fs->cred, parent, name);
	} else {
		error = orch_fs_unlink(fs->cl, &fs->cred, parent, name);
	}
	if (error == -ENOENT && o->force)
		return 0;
	if (error)
		orch_cli_err(error, "cannot remove '%s'", path);
	return error;
}

/* Empties directory @dir (named @path). */
static int rm_dir(struct orch_cli_fs *fs, const char *path, uint64_t dir,
		  const struct rm_opts *o)
{
	struct orch_dirent *ents;
	size_t plen = strlen(path);
	unsigned int removed;
	char *child;
	int error = 0, first_error = 0;

	ents = calloc(RM_BATCH, sizeof(*ents));
	child = malloc(plen + ORCH_NAME_MAX + 2);
	if (!ents || !child) {
		error = -ENOMEM;
		orch_cli_err(error, "cannot remove '%s'", path);
		goto out_free;
	}
	do {
		uint64_t cookie = 0;
		bool eof = false;
		uint32_t n;

		removed = 0;
		while (!eof) {
			error = orch_fs_readdir(fs->cl, &fs->cred, dir, cookie, RM_BATCH, false,
						ents, &n, &eof);
			if (error) {
				orch_cli_err(error, "cannot read directory '%s'", path);
				goto out_free;
			}
			if (n == 0)
				break;
			for (uint32_t i = 0; i < n; i++) {
				if (!strcmp(ents[i].name, ".") || !strcmp(ents[i].name, ".."))
					continue;
				snprintf(child, plen + ORCH_NAME_MAX + 2, "%s%s%s", path,
					 path[plen - 1] == '/' ? "" : "/", ents[i].name);
				error = rm_entry(fs, child, dir, ents[i].name, ents[i].type,
						 ents[i].handle, o);
				if (error && !first_error)
					first_error = error;
				removed += !error;
			}
			cookie = ents[n - 1].cookie;
		}
	} while (removed && !first_error);
	error = first_error;
out_free:
	free(child);
	free(ents);
	return error;
}

int orch_cmd_rm(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "recursive", no_argument, NULL, 'r' },
		{ "force", no_argument, NULL, 'f' },
		ORCH_CLI_OPTS_END
	};
	struct rm_opts o = { 0 };
	struct orch_cli_fs fs;
	int opt, rc = ORCH_CLI_OK;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:rRf", opts)) != -1) {
		switch (opt) {
		case 'r':
		case 'R':
			o.recursive = true;
			break;
		case 'f':
			o.force = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (optind == argc)
		return o.force ? ORCH_CLI_OK : orch_cli_usage_err(cli, "missing PATH");
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	for (int i = optind; i < argc; i++) {
		const char *path = argv[i];
		char name[ORCH_NAME_MAX + 1];
		struct orch_attr parent, a;
		int error;

		if (path[0] != '/') {
			orch_cli_msg("'%s': paths inside Orchard are absolute (start with '/')",
				     path);
			rc = ORCH_CLI_FAIL;
			continue;
		}
		if (strspn(path, "/") == strlen(path)) {
			orch_cli_msg("refusing to remove '/'");
			rc = ORCH_CLI_FAIL;
			continue;
		}
		error = orch_fs_resolve_parent(fs.cl, &fs.cred, path, &parent, name);
		if (!error && (!strcmp(name, ".") || !strcmp(name, ".."))) {
			orch_cli_msg("refusing to remove '.' or '..' directory: skipping '%s'",
				     path);
			rc = ORCH_CLI_FAIL;
			continue;
		}
		if (!error)
			error = orch_fs_lookup(fs.cl, &fs.cred, parent.handle, name, &a);
		if (!error)
			error = rm_entry(&fs, path, parent.handle, name, a.mode, a.handle, &o);
		else if (!(error == -ENOENT && o.force))
			orch_cli_err(error, "cannot remove '%s'", path);
		else
			error = 0;
		if (error)
			rc = ORCH_CLI_FAIL;
	}
	orch_cli_fs_close(&fs);
	return rc;
}
