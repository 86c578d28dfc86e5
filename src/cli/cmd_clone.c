/*
 * orchard clone SRC DST: a reflink copy.  The copy is made in a new,
 * private file next to DST that takes SRC's layout, so that each server
 * holds the strips of both files and shares SRC's blocks with the copy
 * instead of copying them (the servers' copy_file_range,
 * orch_fs_copy_range); the new file then replaces DST by rename.  Nobody
 * else can have the private file open, so its layout can change safely,
 * and DST is never seen half copied.  No data moves and no data block is
 * used; writing to either file later changes only that file.  A big file
 * takes many requests, so the copy goes a chunk at a time under a progress
 * bar of the bytes shared.
 */
#include "cli/cli.h"
#include "cli/progress.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/*
 * Bytes shared per orch_fs_copy_range call: the library's own chunk
 * (FS_COPY_CHUNK in client/fs.c), so the servers get the same requests as
 * from one call for the whole file, and the bar moves after each.
 */
#define CLONE_CHUNK (64ull << 20)

/* Shares all of @src with @dst, a chunk at a time; *@copied gets the bytes. */
static int clone_copy(struct orch_cli_fs *fs, const struct orch_attr *src,
		      const struct orch_attr *dst, bool quiet, uint64_t *copied)
{
	struct orch_progress_opts po = { .label = "clone", .total = src->size, .quiet = quiet };
	struct orch_progress pg;
	int error = 0;

	*copied = 0;
	orch_progress_init(&pg, &po);
	/* Once at least: an empty file's call still checks both files. */
	do {
		uint64_t n = ORCH_MIN(src->size - *copied, CLONE_CHUNK), got = 0;

		error = orch_fs_copy_range(fs->cl, &fs->cred, src, *copied, dst, *copied, n, &got);
		if (error || !got)
			break;   /* nothing is copied past src->size */
		*copied += got;
		orch_progress_add(&pg, got);
	} while (*copied < src->size);
	orch_progress_fini(&pg, !error);
	return error;
}

/* Creates the private file @tmp in @parent with @src's mode and layout. */
static int clone_tmp_create(struct orch_cli_fs *fs, uint64_t parent, const struct orch_attr *src,
			    char *tmp, size_t tmplen, struct orch_attr *a)
{
	struct orch_attr lay = { .layout = src->layout };
	uint64_t r = 0;
	bool existed;
	int error;

	if (getrandom(&r, sizeof(r), 0) != sizeof(r))
		r ^= (uint64_t)getpid() << 32;
	snprintf(tmp, tmplen, ".orchard-clone.%016" PRIx64, r);
	error = orch_fs_create_stamped(fs->cl, &fs->cred, parent, tmp,
				       S_IFREG | (src->mode & 0777 & ~orch_cli_umask()), 0,
				       ORCH_CREATE_EXCL | ORCH_CREATE_WRITER, a, &existed, NULL);
	if (error)
		return error;
	error = orch_fs_setattr(fs->cl, &fs->cred, a->handle, ORCH_SET_LAYOUT, &lay, a);
	if (error)
		orch_fs_unlink(fs->cl, &fs->cred, parent, tmp);
	return error;
}

int orch_cmd_clone(struct orch_cli *cli, int argc, char **argv)
{
	char name[ORCH_NAME_MAX + 1], tmp[64];
	const char *sp, *dp;
	struct orch_attr src, dst, parent;
	struct orch_cli_fs fs;
	uint64_t copied = 0;
	bool quiet = false;
	int rc, error;

	if (!orch_cli_args_quiet(cli, argc, argv, 2, 2, &quiet, &rc))
		return rc;
	sp = argv[optind];
	dp = argv[optind + 1];
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	rc = ORCH_CLI_FAIL;
	if (orch_cli_resolve(&fs, sp, true, &src) || orch_cli_resolve_parent(&fs, dp, &parent, name))
		goto out;
	if (!S_ISREG(src.mode)) {
		orch_cli_msg("cannot clone '%s': not a regular file", sp);
		goto out;
	}
	error = clone_tmp_create(&fs, parent.handle, &src, tmp, sizeof(tmp), &dst);
	if (error) {
		orch_cli_err(error, "cannot create the copy of '%s' next to '%s'", sp, dp);
		goto out;
	}
	error = clone_copy(&fs, &src, &dst, quiet, &copied);
	if (!error)
		error = orch_fs_writer_release(fs.cl, &fs.cred, dst.handle, src.size, src.mtime_ns,
					       NULL);
	if (!error)
		error = orch_fs_rename(fs.cl, &fs.cred, parent.handle, tmp, parent.handle, name, 0);
	if (error) {
		orch_fs_unlink(fs.cl, &fs.cred, parent.handle, tmp);
		orch_cli_err(error, "cannot clone '%s' to '%s'", sp, dp);
		goto out;
	}
	printf("cloned '%s' to '%s': %" PRIu64 " bytes shared\n", sp, dp, copied);
	rc = ORCH_CLI_OK;
out:
	orch_cli_fs_close(&fs);
	return rc;
}
