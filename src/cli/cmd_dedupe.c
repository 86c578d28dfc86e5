/*
 * orchard dedupe SRC DST [--range OFF:LEN]: where DST's bytes equal SRC's,
 * DST shares SRC's blocks and its own are freed (FIDEDUPERANGE, through
 * orch_fs_dedupe: every server compares, then shares).  Different contents
 * change nothing and exit 1.
 *
 * orchard dedupe --scan PATH: finds regular files under PATH with identical
 * contents (grouped by size, then by SHA-256 of their bytes), and dedupes
 * each against the first of its group; the servers compare byte for byte
 * before they share anything, so a hash collision cannot lose data.
 * Whole files only: identical blocks inside otherwise different files are
 * not found.  Blocks are shared within a server only, so twins whose
 * layouts put their strips on different servers are counted, not shared.
 */
#include "cli/cli.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/evp.h>

#include "common/util.h"

/* "OFF:LEN", each with an optional K/M/G/T suffix. */
static int dedupe_range_parse(const char *s, uint64_t *off, uint64_t *len)
{
	char buf[64];
	char *colon;

	if (strlen(s) >= sizeof(buf))
		return -EINVAL;
	strcpy(buf, s);
	colon = strchr(buf, ':');
	if (!colon)
		return -EINVAL;
	*colon = '\0';
	if (orch_cli_size_parse(buf, off) || orch_cli_size_parse(colon + 1, len) || !*len)
		return -EINVAL;
	return 0;
}

/* Dedupes one pair and says what happened: 0, or 1 if nothing was shared. */
static int dedupe_pair(struct orch_cli_fs *fs, const char *sp, const struct orch_attr *src,
		       const char *dp, const struct orch_attr *dst, uint64_t off, uint64_t len,
		       uint64_t *deduped)
{
	int error = orch_fs_dedupe(fs->cl, &fs->cred, src, off, dst, off, len, deduped);

	if (error == -EBADE)
		orch_cli_msg("'%s' and '%s': contents differ", sp, dp);
	else if (error == -EXDEV)
		orch_cli_msg("'%s' and '%s': their layouts put the range on different servers, "
			     "which cannot share blocks", sp, dp);
	else if (error)
		orch_cli_err(error, "cannot dedupe '%s' and '%s'", sp, dp);
	return error ? 1 : 0;
}

/* --- --scan ------------------------------------------------------------------------ */

struct scan_file {
	char *path;
	struct orch_attr attr;
	unsigned char sha[32];
};

struct scan {
	struct orch_cli_fs *fs;
	struct scan_file *v;
	size_t n, cap;
	int errors;
};

static int scan_add(struct scan *sc, const char *path, const struct orch_attr *a)
{
	if (sc->n == sc->cap) {
		size_t cap = sc->cap ? sc->cap * 2 : 64;
		struct scan_file *p = realloc(sc->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		sc->v = p;
		sc->cap = cap;
	}
	sc->v[sc->n].path = strdup(path);
	if (!sc->v[sc->n].path)
		return -ENOMEM;
	sc->v[sc->n].attr = *a;
	memset(sc->v[sc->n].sha, 0, sizeof(sc->v[sc->n].sha));
	sc->n++;
	return 0;
}

/* Every non-empty regular file under @path (directory @dir). */
static int scan_walk(struct scan *sc, const char *path, uint64_t dir)
{
	struct orch_dirent *ents = calloc(128, sizeof(*ents));
	size_t plen = strlen(path);
	char *child = malloc(plen + ORCH_NAME_MAX + 2);
	uint64_t cookie = 0;
	bool eof = false;
	uint32_t n;
	int error = ents && child ? 0 : -ENOMEM;

	while (!error && !eof) {
		error = orch_fs_readdir(sc->fs->cl, &sc->fs->cred, dir, cookie, 128, false, ents,
					&n, &eof);
		if (error) {
			orch_cli_err(error, "cannot read directory '%s'", path);
			break;
		}
		for (uint32_t i = 0; i < n && !error; i++) {
			struct orch_attr a;

			if (!strcmp(ents[i].name, ".") || !strcmp(ents[i].name, ".."))
				continue;
			snprintf(child, plen + ORCH_NAME_MAX + 2, "%s%s%s", path,
				 path[plen - 1] == '/' ? "" : "/", ents[i].name);
			if (orch_fs_getattr(sc->fs->cl, &sc->fs->cred, ents[i].handle, &a)) {
				sc->errors++;   /* gone meanwhile: not ours to dedupe */
				continue;
			}
			if (S_ISDIR(a.mode))
				error = scan_walk(sc, child, a.handle);
			else if (S_ISREG(a.mode) && a.size)
				error = scan_add(sc, child, &a);
		}
		if (n)
			cookie = ents[n - 1].cookie;
	}
	free(child);
	free(ents);
	return error;
}

static int scan_hash(struct scan *sc, struct scan_file *f)
{
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	uint8_t *buf = malloc(ORCH_CLI_IO_CHUNK);
	int error = ctx && buf && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ? 0 : -ENOMEM;

	for (uint64_t off = 0; !error && off < f->attr.size;) {
		size_t got = 0;

		error = orch_fs_read(sc->fs->cl, &sc->fs->cred, &f->attr, off, buf,
				     ORCH_CLI_IO_CHUNK, &got);
		if (!error && got == 0)
			error = -EIO;   /* shorter than its size: changing under us */
		if (!error)
			EVP_DigestUpdate(ctx, buf, got);
		off += got;
	}
	if (!error)
		EVP_DigestFinal_ex(ctx, f->sha, NULL);
	EVP_MD_CTX_free(ctx);
	free(buf);
	return error;
}

/* Blocks are shared only within a server: files of one layout only. */
static int scan_layout_cmp(const struct orch_layout *a, const struct orch_layout *b)
{
	if (a->strip_size != b->strip_size)
		return a->strip_size < b->strip_size ? -1 : 1;
	if (a->stripe_count != b->stripe_count)
		return a->stripe_count < b->stripe_count ? -1 : 1;
	return (int)a->first_server - (int)b->first_server;
}

/* By size, then contents, then layout: a group of twins is a run. */
static int scan_cmp(const void *x, const void *y)
{
	const struct scan_file *a = x, *b = y;
	int c;

	if (a->attr.size != b->attr.size)
		return a->attr.size < b->attr.size ? -1 : 1;
	c = memcmp(a->sha, b->sha, sizeof(a->sha));
	return c ? c : scan_layout_cmp(&a->attr.layout, &b->attr.layout);
}

static int dedupe_scan(struct orch_cli_fs *fs, const char *path)
{
	struct scan sc = { .fs = fs };
	uint64_t saved = 0, files = 0, elsewhere = 0;
	struct orch_attr root;
	int error;

	if (orch_cli_resolve(fs, path, true, &root))
		return ORCH_CLI_FAIL;
	error = S_ISDIR(root.mode) ? scan_walk(&sc, path, root.handle) : scan_add(&sc, path, &root);
	/* By size first (the hashes are still zero): only twins are worth reading. */
	if (!error)
		qsort(sc.v, sc.n, sizeof(*sc.v), scan_cmp);
	for (size_t i = 0; !error && i < sc.n; i++) {
		bool twin = (i > 0 && sc.v[i - 1].attr.size == sc.v[i].attr.size) ||
			    (i + 1 < sc.n && sc.v[i + 1].attr.size == sc.v[i].attr.size);

		if (twin && scan_hash(&sc, &sc.v[i]))
			sc.errors++;
	}
	if (!error)
		qsort(sc.v, sc.n, sizeof(*sc.v), scan_cmp);
	for (size_t i = 0, first = 0; !error && i < sc.n; i++) {
		uint64_t d = 0;

		if (i == 0 || scan_cmp(&sc.v[first], &sc.v[i])) {
			/* Same bytes, other layout: a twin that cannot share. */
			if (i > 0 && sc.v[i].attr.size == sc.v[first].attr.size &&
			    !memcmp(sc.v[i].sha, sc.v[first].sha, sizeof(sc.v[i].sha)))
				elsewhere++;
			first = i;
			continue;
		}
		if (dedupe_pair(fs, sc.v[first].path, &sc.v[first].attr, sc.v[i].path,
				&sc.v[i].attr, 0, sc.v[i].attr.size, &d))
			sc.errors++;
		saved += d;
		files += d > 0;
	}
	if (error)
		orch_cli_err(error, "cannot scan '%s'", path);
	else
		printf("scanned %zu files: %" PRIu64 " deduplicated, %" PRIu64 " bytes saved; "
		       "%" PRIu64 " identical but striped over other servers\n", sc.n, files, saved,
		       elsewhere);
	for (size_t i = 0; i < sc.n; i++)
		free(sc.v[i].path);
	free(sc.v);
	return error || sc.errors ? ORCH_CLI_FAIL : ORCH_CLI_OK;
}

/* --- The command ------------------------------------------------------------------- */

int orch_cmd_dedupe(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "range", required_argument, NULL, 'r' },
		{ "scan", no_argument, NULL, 's' },
		ORCH_CLI_OPTS_END
	};
	const char *range = NULL;
	struct orch_attr src, dst;
	struct orch_cli_fs fs;
	uint64_t off = 0, len = 0, deduped = 0;
	bool scan = false;
	int opt, rc;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:r:s", opts)) != -1) {
		switch (opt) {
		case 'r':
			range = optarg;
			break;
		case 's':
			scan = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (argc - optind != (scan ? 1 : 2) || (scan && range))
		return orch_cli_usage_err(cli, scan ? "--scan takes one PATH and no --range"
						    : "want SRC and DST");
	if (range && dedupe_range_parse(range, &off, &len))
		return orch_cli_usage_err(cli, "bad --range '%s': want OFF:LEN", range);
	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	if (scan) {
		rc = dedupe_scan(&fs, argv[optind]);
		goto out;
	}
	rc = ORCH_CLI_FAIL;
	if (orch_cli_resolve(&fs, argv[optind], true, &src) ||
	    orch_cli_resolve(&fs, argv[optind + 1], true, &dst))
		goto out;
	if (!range) {
		if (src.size != dst.size) {
			orch_cli_msg("'%s' and '%s': contents differ (sizes %" PRIu64 " and %" PRIu64
				     ")", argv[optind], argv[optind + 1], src.size, dst.size);
			goto out;
		}
		len = src.size;
	}
	if (dedupe_pair(&fs, argv[optind], &src, argv[optind + 1], &dst, off, len, &deduped))
		goto out;
	printf("deduplicated %" PRIu64 " bytes\n", deduped);
	rc = ORCH_CLI_OK;
out:
	orch_cli_fs_close(&fs);
	return rc;
}
