/*
 * orchard mkfs: initialises one server's data directory, an empty extent
 * store (store/) and an empty namespace (meta/) stamped with the cluster id
 * and the server's index.  A directory that holds anything is refused unless
 * --force, which first deletes what a previous mkfs made (meta.db and its
 * WAL/SHM files, the data/ tree) and leaves any other file alone.
 */
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "meta/meta.h"
#include "store/store.h"

/* 1 if @dir has no entry but "." and "..", 0 if it has, or -errno. */
static int mkfs_dir_is_empty(const char *dir)
{
	struct dirent *de;
	DIR *d;
	int empty = 1;

	d = opendir(dir);
	if (!d)
		return -errno;
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) {
			empty = 0;
			break;
		}
	}
	closedir(d);
	return empty;
}

static int mkfs_rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if ((flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT) {
		orch_cli_err(-errno, "cannot remove '%s'", path);
		return -1;
	}
	return 0;
}

static int mkfs_wipe(const char *dir)
{
	static const char *const files[] = { "meta.db", "meta.db-wal", "meta.db-shm" };
	char path[PATH_MAX + 32];
	int error;

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, files[i]);
		if (unlink(path) < 0 && errno != ENOENT) {
			error = -errno;
			orch_cli_err(error, "cannot remove '%s'", path);
			return error;
		}
	}
	snprintf(path, sizeof(path), "%s/data", dir);
	if (access(path, F_OK) < 0)
		return 0;
	if (nftw(path, mkfs_rm_cb, 16, FTW_DEPTH | FTW_PHYS) != 0)
		return -EIO;
	return 0;
}

int orch_cli_mkfs_server(const struct orch_cfg *cfg, unsigned int idx, bool force)
{
	const struct orch_server_cfg *s = &cfg->servers[idx];
	struct orch_meta_ident ident = {
		.server_index = idx,
		.nservers = cfg->nservers,
		.strip_size = cfg->strip_size,
	};
	int error, empty;

	snprintf(ident.cluster_id, sizeof(ident.cluster_id), "%s", cfg->cluster_id);
	error = orch_cli_mkdir_p(s->data_dir, 0700);
	if (error) {
		orch_cli_err(error, "cannot create data directory '%s'", s->data_dir);
		return error;
	}
	empty = mkfs_dir_is_empty(s->data_dir);
	if (empty < 0) {
		orch_cli_err(empty, "cannot read data directory '%s'", s->data_dir);
		return empty;
	}
	if (!empty) {
		if (!force) {
			orch_cli_msg("data directory '%s' of server '%s' is not empty; "
				     "use --force to wipe it", s->data_dir, s->name);
			return -EEXIST;
		}
		/* The server holds the store lock; wiping under it would lose everything. */
		error = orch_store_check_unused(s->data_dir);
		if (error == -EBUSY) {
			orch_cli_msg("cannot wipe '%s': it is in use (is server '%s' running?)",
				     s->data_dir, s->name);
			return error;
		}
		if (!error)
			error = mkfs_wipe(s->data_dir);
		if (error)
			return error;
	}
	error = orch_store_mkfs(s->data_dir, force);
	if (error == -EBUSY) {
		orch_cli_msg("cannot initialise store in '%s': it is in use (is server '%s' running?)",
			     s->data_dir, s->name);
		return error;
	}
	if (error) {
		orch_cli_err(error, "cannot initialise store in '%s'", s->data_dir);
		return error;
	}
	error = orch_meta_mkfs(s->data_dir, &ident);
	if (error) {
		orch_cli_err(error, "cannot initialise namespace in '%s'", s->data_dir);
		return error;
	}
	fprintf(stderr, "orchard: initialised server '%s' (index %u of %u) in '%s'\n",
		s->name, idx, cfg->nservers, s->data_dir);
	return 0;
}

int orch_cmd_mkfs(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "force", no_argument, NULL, 'f' },
		ORCH_CLI_OPTS_END
	};
	const char *name = NULL, *path;
	struct orch_cfg *cfg;
	bool force = false;
	int opt, idx, rc;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:n:f", opts)) != -1) {
		switch (opt) {
		case 'n':
			name = optarg;
			break;
		case 'f':
			force = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (optind != argc)
		return orch_cli_usage_err(cli, "unexpected argument '%s'", argv[optind]);
	if (!name)
		return orch_cli_usage_err(cli, "-n NAME is required");
	path = orch_cli_conf_path(cli);
	if (!path)
		return ORCH_CLI_USAGE;
	if (orch_cli_cfg_load(path, false, &cfg))
		return ORCH_CLI_FAIL;
	idx = orch_cfg_server_index(cfg, name);
	if (idx < 0) {
		orch_cli_msg("no server '%s' in '%s'", name, cfg->path);
		rc = ORCH_CLI_FAIL;
	} else {
		rc = orch_cli_mkfs_server(cfg, (unsigned int)idx, force) ? ORCH_CLI_FAIL
									  : ORCH_CLI_OK;
	}
	free(cfg);
	return rc;
}
