/*
 * orchard put / get / cat: file data in and out, ORCH_CLI_IO_CHUNK (4 MiB) at
 * a time; the client library splits each chunk into strips and sends them to
 * their servers in parallel.  put writes the data first and sets the size
 * once at the end (orch_fs_extend), as the inode's size is authoritative and
 * a writer only ever max-merges it.  put and get show a progress bar in
 * bytes (progress.h); cat does not, as its data goes to the terminal.
 */
#include "cli/cli.h"
#include "cli/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

/* @dir + "/" + basename(@path) into @out. */
static int put_join(const char *dir, const char *path, char *out, size_t outlen)
{
	char base[ORCH_NAME_MAX + 1];

	orch_cli_basename(path, base, sizeof(base));
	if (!base[0] || !strcmp(base, "/") || !strcmp(base, ".") || !strcmp(base, ".."))
		return -EINVAL;
	if ((size_t)snprintf(out, outlen, "%s%s%s", dir,
			     dir[strlen(dir) - 1] == '/' ? "" : "/", base) >= outlen)
		return -ENAMETOOLONG;
	return 0;
}

/*
 * Copies file @a (named @path) to @fd (named @local, for messages),
 * counting the bytes on @pg (NULL: none).
 */
static int put_copy_out(struct orch_cli_fs *fs, const char *path, const struct orch_attr *a,
			int fd, const char *local, struct orch_progress *pg)
{
	uint64_t off = 0;
	size_t got;
	char *buf;
	int error = 0;

	if (S_ISDIR(a->mode)) {
		orch_cli_err(-EISDIR, "cannot read '%s'", path);
		return -EISDIR;
	}
	buf = malloc(ORCH_CLI_IO_CHUNK);
	if (!buf) {
		orch_cli_err(-ENOMEM, "cannot read '%s'", path);
		return -ENOMEM;
	}
	while (off < a->size) {
		size_t want = (size_t)ORCH_MIN((uint64_t)ORCH_CLI_IO_CHUNK, a->size - off);

		error = orch_fs_read(fs->cl, &fs->cred, a, off, buf, want, &got);
		if (error) {
			orch_cli_err(error, "cannot read '%s'", path);
			break;
		}
		if (got == 0)
			break; /* truncated by someone meanwhile */
		error = orch_cli_write_all(fd, buf, got);
		if (error) {
			orch_cli_err(error, "cannot write '%s'", local);
			break;
		}
		off += got;
		if (pg)
			orch_progress_add(pg, got);
	}
	free(buf);
	return error;
}

/*
 * Opens (creating or truncating) the file @path for put; *@a gets its
 * attributes, layout included.
 */
static int put_open(struct orch_cli_fs *fs, const char *path, struct orch_attr *a)
{
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr parent, zero = { 0 };
	bool existed = false;
	int error;

	error = orch_cli_resolve_parent(fs, path, &parent, name);
	if (error)
		return error;
	/* A new file registers us as its writer; an existing one is registered after the cut. */
	error = orch_fs_create_stamped(fs->cl, &fs->cred, parent.handle, name,
				       S_IFREG | (0666 & ~orch_cli_umask()), 0, ORCH_CREATE_WRITER,
				       a, &existed, NULL);
	if (error) {
		orch_cli_err(error, "cannot create '%s'", path);
		return error;
	}
	if (existed && a->size) {
		error = orch_fs_setattr(fs->cl, &fs->cred, a->handle, ORCH_SET_SIZE, &zero, a);
		if (error)
			orch_cli_err(error, "cannot truncate '%s'", path);
	}
	if (!error && existed) {
		error = orch_fs_writers(fs->cl, &fs->cred, a->handle, ORCH_WRITERS_REGISTER, 0, 0,
					NULL, NULL);
		if (error == -ENOSYS)
			error = 0;
		if (error)
			orch_cli_err(error, "cannot open '%s' for writing", path);
	}
	return error;
}

int orch_cmd_put(struct orch_cli *cli, int argc, char **argv)
{
	char dest[ORCH_PATH_MAX + ORCH_NAME_MAX + 2];
	const char *local, *path;
	struct orch_cli_fs fs;
	struct orch_attr a;
	struct orch_progress pg;
	struct orch_progress_opts po = { .label = "put" };
	struct stat st;
	uint64_t off = 0;
	size_t got = 0;
	static const struct option opts[] = {
		{ "fsync", no_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		ORCH_CLI_OPTS_END
	};
	bool sync = false;
	char *buf = NULL;
	int fd, opt, rc, error;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:sq", opts)) != -1) {
		switch (opt) {
		case 's':
			sync = true;
			break;
		case 'q':
			po.quiet = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (argc - optind != 2)
		return orch_cli_usage_err(cli, argc - optind < 2 ? "missing operand"
								  : "too many operands");
	local = argv[optind];
	path = argv[optind + 1];
	if (strcmp(local, "-") == 0) {
		fd = STDIN_FILENO;
	} else {
		fd = open(local, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			orch_cli_err(-errno, "cannot open '%s'", local);
			return ORCH_CLI_FAIL;
		}
	}
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		goto out_close;
	rc = ORCH_CLI_FAIL;
	/* Into an existing directory, as cp(1) does. */
	if (path[0] == '/' && orch_fs_resolve(fs.cl, &fs.cred, path, true, &a) == 0 &&
	    S_ISDIR(a.mode)) {
		if (fd == STDIN_FILENO) {
			orch_cli_err(-EISDIR, "cannot put stdin into '%s'", path);
			goto out_fs;
		}
		error = put_join(path, local, dest, sizeof(dest));
		if (error) {
			orch_cli_err(error, "cannot put '%s' into '%s'", local, path);
			goto out_fs;
		}
		path = dest;
	}
	if (put_open(&fs, path, &a))
		goto out_fs;
	buf = malloc(ORCH_CLI_IO_CHUNK);
	if (!buf) {
		orch_cli_err(-ENOMEM, "cannot write '%s'", path);
		goto out_fs;
	}
	/* The size of a regular file; a pipe's is unknown: bytes and rate, no ETA. */
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
		po.total = (uint64_t)st.st_size;
	orch_progress_init(&pg, &po);
	for (;;) {
		error = orch_cli_read_full(fd, buf, ORCH_CLI_IO_CHUNK, &got);
		if (error) {
			orch_cli_err(error, "cannot read '%s'", local);
			goto out_extend;
		}
		if (got == 0)
			break;
		error = orch_fs_write(fs.cl, &fs.cred, &a, off, buf, got);
		if (error) {
			orch_cli_err(error, "cannot write '%s'", path);
			goto out_extend;
		}
		off += got;
		orch_progress_add(&pg, got);
		if (got < ORCH_CLI_IO_CHUNK)
			break;
	}
	rc = ORCH_CLI_OK;
out_extend:
	/* Even after an error, publish what did get written; then we are no writer. */
	error = orch_fs_writer_release(fs.cl, &fs.cred, a.handle, off, 0, &a);
	if (error) {
		orch_cli_err(error, "cannot set the size of '%s'", path);
		rc = ORCH_CLI_FAIL;
	} else if (sync && rc == ORCH_CLI_OK) {
		error = orch_fs_fsync(fs.cl, &fs.cred, &a, false, ORCH_FS_SYNC_ALL);
		if (error) {
			orch_cli_err(error, "cannot fsync '%s'", path);
			rc = ORCH_CLI_FAIL;
		}
	}
	orch_progress_fini(&pg, rc == ORCH_CLI_OK);
	free(buf);
out_fs:
	orch_cli_fs_close(&fs);
out_close:
	if (fd != STDIN_FILENO)
		close(fd);
	return rc;
}

int orch_cmd_get(struct orch_cli *cli, int argc, char **argv)
{
	char dest[PATH_MAX + ORCH_NAME_MAX + 2];
	const char *path, *local;
	struct orch_cli_fs fs;
	struct orch_attr a;
	struct orch_progress pg;
	struct orch_progress_opts po = { .label = "get" };
	struct stat st;
	int fd, rc, error;

	if (!orch_cli_args_quiet(cli, argc, argv, 2, 2, &po.quiet, &rc))
		return rc;
	path = argv[optind];
	local = argv[optind + 1];
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	rc = ORCH_CLI_FAIL;
	if (orch_cli_resolve(&fs, path, true, &a))
		goto out_fs;
	if (S_ISDIR(a.mode)) {
		orch_cli_err(-EISDIR, "cannot read '%s'", path);
		goto out_fs;
	}
	if (strcmp(local, "-") == 0) {
		fd = STDOUT_FILENO;
	} else {
		if (stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
			error = put_join(local, path, dest, sizeof(dest));
			if (error) {
				orch_cli_err(error, "cannot get '%s' into '%s'", path, local);
				goto out_fs;
			}
			local = dest;
		}
		fd = open(local, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0) {
			orch_cli_err(-errno, "cannot open '%s'", local);
			goto out_fs;
		}
	}
	/* Data on the terminal and a bar there would garble each other. */
	if (fd == STDOUT_FILENO && isatty(STDOUT_FILENO))
		po.quiet = true;
	po.total = a.size;
	orch_progress_init(&pg, &po);
	if (!put_copy_out(&fs, path, &a, fd, fd == STDOUT_FILENO ? "stdout" : local, &pg))
		rc = ORCH_CLI_OK;
	if (fd != STDOUT_FILENO && close(fd) < 0) {
		orch_cli_err(-errno, "cannot write '%s'", local);
		rc = ORCH_CLI_FAIL;
	}
	orch_progress_fini(&pg, rc == ORCH_CLI_OK);
out_fs:
	orch_cli_fs_close(&fs);
	return rc;
}

int orch_cmd_cat(struct orch_cli *cli, int argc, char **argv)
{
	struct orch_cli_fs fs;
	struct orch_attr a;
	int rc;

	if (!orch_cli_args(cli, argc, argv, 1, -1, &rc))
		return rc;
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	for (int i = optind; i < argc; i++) {
		if (orch_cli_resolve(&fs, argv[i], true, &a) ||
		    put_copy_out(&fs, argv[i], &a, STDOUT_FILENO, "stdout", NULL))
			rc = ORCH_CLI_FAIL;
	}
	orch_cli_fs_close(&fs);
	return rc;
}
