/*
 * orchard clone SRC DST: a reflink copy.  DST is created (or emptied) and
 * takes SRC's layout, so that each server holds the strips of both files
 * and shares SRC's blocks with DST instead of copying them (the servers'
 * copy_file_range, orch_fs_copy_range).  No data moves and no data block is
 * used; writing to either file later changes only that file.
 */
#include "cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <sys/stat.h>

/* Creates or empties @path with @src's layout; *@a gets its attributes. */
static int clone_open(struct orch_cli_fs *fs, const char *path, const struct orch_attr *src,
		      struct orch_attr *a)
{
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr parent, zero = { 0 }, lay = { .layout = src->layout };
	bool existed = false;
	int error;

	error = orch_cli_resolve_parent(fs, path, &parent, name);
	if (error)
		return error;
	error = orch_fs_create(fs->cl, &fs->cred, parent.handle, name,
			       S_IFREG | (src->mode & 0777 & ~orch_cli_umask()), 0, false, a,
			       &existed);
	if (error) {
		orch_cli_err(error, "cannot create '%s'", path);
		return error;
	}
	if (a->handle == src->handle) {
		orch_cli_msg("'%s' and the source are the same file", path);
		return -EINVAL;
	}
	if (existed && a->size) {
		error = orch_fs_setattr(fs->cl, &fs->cred, a->handle, ORCH_SET_SIZE, &zero, a);
		if (error) {
			orch_cli_err(error, "cannot truncate '%s'", path);
			return error;
		}
	}
	error = orch_fs_setattr(fs->cl, &fs->cred, a->handle, ORCH_SET_LAYOUT, &lay, a);
	if (error)
		orch_cli_err(error, "cannot give '%s' the layout of the source", path);
	return error;
}

int orch_cmd_clone(struct orch_cli *cli, int argc, char **argv)
{
	struct orch_attr src, dst;
	struct orch_cli_fs fs;
	uint64_t copied = 0;
	int rc, error;

	if (!orch_cli_args(cli, argc, argv, 2, 2, &rc))
		return rc;
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	rc = ORCH_CLI_FAIL;
	if (orch_cli_resolve(&fs, argv[optind], true, &src))
		goto out;
	if (!S_ISREG(src.mode)) {
		orch_cli_msg("cannot clone '%s': not a regular file", argv[optind]);
		goto out;
	}
	if (clone_open(&fs, argv[optind + 1], &src, &dst))
		goto out;
	error = orch_fs_copy_range(fs.cl, &fs.cred, &src, 0, &dst, 0, src.size, &copied);
	if (!error)
		error = orch_fs_extend(fs.cl, &fs.cred, dst.handle, src.size, 0, NULL);
	if (error) {
		orch_cli_err(error, "cannot clone '%s' to '%s'", argv[optind], argv[optind + 1]);
		goto out;
	}
	printf("cloned '%s' to '%s': %" PRIu64 " bytes shared\n", argv[optind],
	       argv[optind + 1], copied);
	rc = ORCH_CLI_OK;
out:
	orch_cli_fs_close(&fs);
	return rc;
}
