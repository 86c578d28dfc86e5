/*
 * orchard mkfs: initialises one server's data directory, an empty extent
 * store (the blocks file, or the server's store_device, and store.db) laid
 * out with the geometry of the config's store_* settings, and an empty
 * namespace (meta.db) stamped with the cluster id and the server's index.
 * A directory that holds anything is refused unless --force, which first
 * deletes what a previous mkfs made (meta.db and its WAL/SHM files, the
 * data/ tree of the interim store, the log/ of a replicated namespace; the
 * store replaces its own files) and leaves any other file alone.
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
	/*
	 * The object files of the interim store (before the extent store), and
	 * the namespace's replicated log: replayed onto a new namespace, its
	 * entries would not apply (they change rows this one never had).
	 */
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/%s", dir, i ? "log" : "data");
		if (access(path, F_OK) < 0)
			continue;
		if (nftw(path, mkfs_rm_cb, 16, FTW_DEPTH | FTW_PHYS) != 0)
			return -EIO;
	}
	return 0;
}

static void mkfs_print_size(char *out, size_t outlen, uint64_t bytes)
{
	static const char units[] = "KMGTP";
	int u = -1;

	while (bytes >= 1024 && bytes % 1024 == 0 && u + 1 < (int)sizeof(units) - 1) {
		bytes /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(out, outlen, "%llu bytes", (unsigned long long)bytes);
	else
		snprintf(out, outlen, "%llu %ciB", (unsigned long long)bytes, units[u]);
}

/* Prints the geometry the store was made with, read back from the store. */
static void mkfs_print_geom(const struct orch_server_cfg *s)
{
	struct orch_store_info info;
	struct orch_store *st;
	char size[32], where[PATH_MAX + 16];
	int error;

	if (s->store_device[0])
		snprintf(where, sizeof(where), "%s", s->store_device);
	else
		snprintf(where, sizeof(where), "%s/blocks", s->data_dir);
	error = orch_store_open(s->data_dir, &st);
	if (error) {
		orch_cli_err(error, "cannot open the new store in '%s' to show its geometry",
			     s->data_dir);
		return;
	}
	orch_store_info(st, &info);
	orch_store_close(st);
	mkfs_print_size(size, sizeof(size), info.blocks * info.block_size);
	fprintf(stderr, "orchard: store of server '%s': %s in '%s', format %u: "
		"%llu blocks of %u bytes, %u allocation group%s of %u blocks, "
		"extents of at most %u blocks\n",
		s->name, size, where, info.format, (unsigned long long)info.blocks, info.block_size, info.ag_count,
		info.ag_count == 1 ? "" : "s", info.ag_blocks, info.maxext);
}

int orch_cli_mkfs_server(const struct orch_cfg *cfg, unsigned int member, bool force)
{
	const struct orch_server_cfg *s = &cfg->members[member];
	const struct orch_store_geom geom = {
		.size = cfg->store_size,
		.ag_blocks = cfg->store_ag_blocks,
		.maxext = cfg->store_maxext,
		.device = s->store_device[0] ? s->store_device : NULL,
	};
	struct orch_meta_ident ident = {
		.server_index = member / cfg->replicas,
		.nservers = cfg->nservers,
		.strip_size = cfg->strip_size,
		.replica = cfg->replicas > 1,
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
	error = orch_store_mkfs(s->data_dir, &geom, force);
	if (error == -EBUSY) {
		orch_cli_msg("cannot initialise store in '%s': it is in use (is server '%s' running?)",
			     s->data_dir, s->name);
		return error;
	}
	if (error == -EINVAL) {
		orch_cli_msg("cannot initialise store in '%s': bad geometry (store_size %llu, "
			     "store_ag_blocks %u, store_maxext %u; 0 = default)", s->data_dir,
			     (unsigned long long)geom.size, geom.ag_blocks, geom.maxext);
		return error;
	}
	if (error == -EEXIST) {
		orch_cli_msg("a store exists in '%s' already; use --force to replace it",
			     s->data_dir);
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
	if (cfg->replicas > 1)
		fprintf(stderr, "orchard: initialised server '%s' (member %u of replica group %u "
			"of %u) in '%s'\n", s->name, member % cfg->replicas, ident.server_index,
			cfg->nservers, s->data_dir);
	else
		fprintf(stderr, "orchard: initialised server '%s' (index %u of %u) in '%s'\n",
			s->name, member, cfg->nservers, s->data_dir);
	mkfs_print_geom(s);
	return 0;
}

int orch_cmd_mkfs(struct orch_cli *cli, int argc, char **argv)
{
	enum { OPT_SIZE = 0x200, OPT_AG, OPT_MAXEXT };
	static const struct option opts[] = {
		{ "name", required_argument, NULL, 'n' },
		{ "force", no_argument, NULL, 'f' },
		{ "store-size", required_argument, NULL, OPT_SIZE },
		{ "ag-blocks", required_argument, NULL, OPT_AG },
		{ "maxext", required_argument, NULL, OPT_MAXEXT },
		ORCH_CLI_OPTS_END
	};
	const char *names[3] = { "store_size", "store_ag_blocks", "store_maxext" };
	const char *name = NULL, *path;
	uint64_t size = 0, ag = 0, maxext = 0;
	bool has_size = false, has_ag = false, has_maxext = false;
	struct orch_cfg *cfg;
	bool force = false;
	char err[256];
	int opt, idx, rc;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:n:f", opts)) != -1) {
		switch (opt) {
		case 'n':
			name = optarg;
			break;
		case 'f':
			force = true;
			break;
		case OPT_SIZE:
			if (orch_cli_size_parse(optarg, &size))
				return orch_cli_usage_err(cli, "--store-size: want a byte count with an "
							  "optional K, M, G or T suffix, not '%s'",
							  optarg);
			has_size = true;
			break;
		case OPT_AG:
			if (orch_cli_uint_parse(optarg, 0, UINT32_MAX, &ag))
				return orch_cli_usage_err(cli, "--ag-blocks: want a number of blocks, "
							  "not '%s'", optarg);
			has_ag = true;
			break;
		case OPT_MAXEXT:
			if (orch_cli_uint_parse(optarg, 0, UINT32_MAX, &maxext))
				return orch_cli_usage_err(cli, "--maxext: want a number of blocks, "
							  "not '%s'", optarg);
			has_maxext = true;
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
	/* Options override the config's geometry, for this mkfs only. */
	if (has_size) {
		cfg->store_size = size;
		names[0] = "--store-size";
	}
	if (has_ag) {
		cfg->store_ag_blocks = (uint32_t)ag;
		names[1] = "--ag-blocks";
	}
	if (has_maxext) {
		cfg->store_maxext = (uint32_t)maxext;
		names[2] = "--maxext";
	}
	if (orch_cfg_check_store_geom(cfg->store_size, cfg->store_ag_blocks, cfg->store_maxext,
				      names, "", err, sizeof(err))) {
		free(cfg);
		return orch_cli_usage_err(cli, "%s", err);
	}
	idx = orch_cfg_member_index(cfg, name);
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
