/*
 * orchard ls [-l]: reads each directory in batches of ORCH_READDIR_MAX with
 * orch_fs_readdir (readdirplus for -l: one round trip per batch, attributes
 * included), then prints the entries sorted by name.
 */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/util.h"

struct ls_ent {
	char *name;
	struct orch_attr attr;
	char *target;  /* symlinks with -l */
};

struct ls_list {
	struct ls_ent *e;
	size_t n, cap;
};

static int ls_ent_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ls_ent *)a)->name, ((const struct ls_ent *)b)->name);
}

static void ls_sort(struct ls_list *l)
{
	if (l->n) /* an empty list has no array, and qsort wants one */
		qsort(l->e, l->n, sizeof(*l->e), ls_ent_cmp);
}

static void ls_list_fini(struct ls_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->e[i].name);
		free(l->e[i].target);
	}
	free(l->e);
	*l = (struct ls_list){ 0 };
}

static int ls_list_add(struct ls_list *l, const char *name, const struct orch_attr *a)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		struct ls_ent *e = realloc(l->e, cap * sizeof(*e));

		if (!e)
			return -ENOMEM;
		l->e = e;
		l->cap = cap;
	}
	l->e[l->n].name = strdup(name);
	if (!l->e[l->n].name)
		return -ENOMEM;
	l->e[l->n].attr = *a;
	l->e[l->n].target = NULL;
	l->n++;
	return 0;
}

/* Reads directory @dir (path @path, for messages) into @l. */
static int ls_read_dir(struct orch_cli_fs *fs, const char *path, uint64_t dir, bool plus,
		       struct ls_list *l)
{
	struct orch_dirent *ents;
	uint64_t cookie = 0;
	bool eof = false;
	uint32_t n;
	int error = 0;

	ents = calloc(ORCH_READDIR_MAX, sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	while (!eof) {
		error = orch_fs_readdir(fs->cl, &fs->cred, dir, cookie, ORCH_READDIR_MAX, plus,
					ents, &n, &eof);
		if (error) {
			orch_cli_err(error, "cannot read directory '%s'", path);
			break;
		}
		if (n == 0)
			break;
		for (uint32_t i = 0; i < n && !error; i++) {
			struct orch_attr a = { .handle = ents[i].handle, .mode = ents[i].type };

			if (!strcmp(ents[i].name, ".") || !strcmp(ents[i].name, ".."))
				continue;
			if (ents[i].has_attr)
				a = ents[i].attr;
			error = ls_list_add(l, ents[i].name, &a);
			if (error)
				orch_cli_err(error, "cannot list '%s'", path);
		}
		cookie = ents[n - 1].cookie;
	}
	free(ents);
	return error;
}

/*
 * Fills what readdirplus could not: attributes it did not carry, and
 * symlink targets.  A failure on one entry is reported and leaves it partly
 * blank; the listing goes on.
 */
static int ls_fill_long(struct orch_cli_fs *fs, const char *dirpath, struct ls_list *l)
{
	char target[ORCH_PATH_MAX + 1];
	int error, rc = 0;

	for (size_t i = 0; i < l->n; i++) {
		struct ls_ent *e = &l->e[i];

		if (!e->attr.nlink) {
			error = orch_fs_getattr(fs->cl, &fs->cred, e->attr.handle, &e->attr);
			if (error) {
				orch_cli_err(error, "cannot access '%s/%s'",
					     strcmp(dirpath, "/") ? dirpath : "", e->name);
				rc = error;
				continue;
			}
		}
		if (S_ISLNK(e->attr.mode)) {
			error = orch_fs_readlink(fs->cl, &fs->cred, e->attr.handle, target,
						 sizeof(target));
			if (!error)
				e->target = strdup(target);
		}
	}
	return rc;
}

static int ls_width_u64(uint64_t v)
{
	int w = 1;

	while (v >= 10) {
		v /= 10;
		w++;
	}
	return w;
}

static void ls_print(const struct ls_list *l, bool lng)
{
	int wlink = 1, wuid = 1, wgid = 1, wsize = 1;

	if (!lng) {
		for (size_t i = 0; i < l->n; i++)
			printf("%s\n", l->e[i].name);
		return;
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct orch_attr *a = &l->e[i].attr;

		wlink = ORCH_MAX(wlink, ls_width_u64(a->nlink));
		wuid = ORCH_MAX(wuid, ls_width_u64(a->uid));
		wgid = ORCH_MAX(wgid, ls_width_u64(a->gid));
		wsize = ORCH_MAX(wsize, ls_width_u64(a->size));
	}
	for (size_t i = 0; i < l->n; i++) {
		const struct ls_ent *e = &l->e[i];
		char mode[11], when[32];

		orch_cli_mode_str(e->attr.mode, mode);
		orch_cli_time_str(e->attr.mtime_ns, false, when, sizeof(when));
		printf("%s %*u %*u %*u %*llu %s %s", mode, wlink, e->attr.nlink, wuid, e->attr.uid,
		       wgid, e->attr.gid, wsize, (unsigned long long)e->attr.size, when, e->name);
		if (e->target)
			printf(" -> %s", e->target);
		printf("\n");
	}
}

int orch_cmd_ls(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { ORCH_CLI_OPTS_END };
	struct ls_list files = { 0 };
	struct orch_cli_fs fs;
	bool lng = false, many, printed;
	int opt, rc = ORCH_CLI_OK;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:l", opts)) != -1) {
		switch (opt) {
		case 'l':
			lng = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (optind == argc)
		return orch_cli_usage_err(cli, "missing PATH");
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	many = argc - optind > 1;

	/* As ls(1): files given on the command line first, then each directory. */
	for (int i = optind; i < argc; i++) {
		struct orch_attr a;

		if (orch_cli_resolve(&fs, argv[i], !lng, &a)) {
			rc = ORCH_CLI_FAIL;
			argv[i] = NULL;
			continue;
		}
		if (S_ISDIR(a.mode))
			continue;
		if (ls_list_add(&files, argv[i], &a)) {
			orch_cli_err(-ENOMEM, "cannot list '%s'", argv[i]);
			rc = ORCH_CLI_FAIL;
		}
		argv[i] = NULL;
	}
	if (lng && ls_fill_long(&fs, "", &files))
		rc = ORCH_CLI_FAIL;
	ls_sort(&files);
	ls_print(&files, lng);
	printed = files.n > 0;

	for (int i = optind; i < argc; i++) {
		struct ls_list l = { 0 };
		struct orch_attr a;

		if (!argv[i])
			continue;
		if (orch_cli_resolve(&fs, argv[i], true, &a) ||
		    ls_read_dir(&fs, argv[i], a.handle, lng, &l)) {
			rc = ORCH_CLI_FAIL;
			ls_list_fini(&l);
			continue;
		}
		if (lng && ls_fill_long(&fs, argv[i], &l))
			rc = ORCH_CLI_FAIL;
		ls_sort(&l);
		if (many)
			printf("%s%s:\n", printed ? "\n" : "", argv[i]);
		ls_print(&l, lng);
		printed = true;
		ls_list_fini(&l);
	}
	ls_list_fini(&files);
	orch_cli_fs_close(&fs);
	return rc;
}
