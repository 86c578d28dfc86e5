/*
 * orchard dedupe SRC DST [--range OFF:LEN]: where DST's bytes equal SRC's,
 * DST shares SRC's blocks and its own are freed (FIDEDUPERANGE, through
 * orch_fs_dedupe: every server compares, then shares).  Different contents
 * change nothing and exit 1.
 *
 * orchard dedupe --scan PATH: finds identical blocks in the regular files
 * under PATH by the checksums the servers store for every block
 * (CL2SV_BLOCKSUMS), server by server since blocks are shared within a
 * server only.  Blocks with one checksum but different physical blocks
 * are deduped onto the one with most owners, neighbours merged into runs;
 * the servers compare the bytes before they share anything, so a checksum
 * that matches by chance changes nothing.  Memory: about 32 bytes per
 * block of one server's share of the files.
 *
 * The scan's progress bar is in bytes: while walking, those of the files
 * found; then each server's share of every file as its checksums are
 * listed, and the bytes of each run as the servers compare and share them.
 * The runs of a server are known only once its listing is done: they are
 * added to the total then, so the percentage can step back.
 */
#include "cli/cli.h"
#include "cli/progress.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/rpc.h"
#include "common/util.h"
#include "proto/layout.h"
#include "proto/pages.h"

/* Bytes one dedupe request of the scan covers at most. */
#define SCAN_RUN_MAX (16ull << 20)

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
};

/* One written block of a file on the server being scanned. */
struct scan_blk {
	uint32_t crc;
	uint32_t file;     /* index in scan.files */
	uint64_t gblock;   /* the server's physical block */
	uint64_t off;      /* file offset */
};

/* Blocks of @dst to share with the same-sized range of @src. */
struct scan_pair {
	uint32_t src, dst;
	uint64_t src_off, dst_off, len;
};

struct scan {
	struct orch_cli_fs *fs;
	struct orch_progress *pg;
	uint64_t pg_total;      /* the bar's total, bytes */
	struct scan_file *files;
	size_t nfiles, files_cap;
	struct scan_blk *blks;
	size_t nblks, blks_cap;
	struct scan_pair *pairs;
	size_t npairs, pairs_cap;
	struct orch_blocksum *page;
	uint64_t blocks, deduped, ranges, collisions;
	int errors;
};

/* Appends one zeroed element to a growing array. */
static void *scan_grow(void **v, size_t *n, size_t *cap, size_t size)
{
	if (*n == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		void *p = realloc(*v, nc * size);

		if (!p)
			return NULL;
		*v = p;
		*cap = nc;
	}
	return memset((char *)*v + (*n)++ * size, 0, size);
}

static int scan_add(struct scan *sc, const char *path, const struct orch_attr *a)
{
	struct scan_file *f;

	if (sc->nfiles >= UINT32_MAX)
		return -EFBIG;
	f = scan_grow((void **)&sc->files, &sc->nfiles, &sc->files_cap, sizeof(*f));
	if (!f)
		return -ENOMEM;
	f->attr = *a;
	f->path = strdup(path);
	orch_progress_add(sc->pg, a->size);
	return f->path ? 0 : -ENOMEM;
}

/* The bytes of file @fi that server @server holds: what its listing covers. */
static uint64_t scan_share(const struct scan *sc, size_t fi, unsigned int server)
{
	const struct orch_attr *a = &sc->files[fi].attr;

	if (server >= a->layout.stripe_count)
		return 0;
	return orch_layout_local_size(&a->layout, a->size, server);
}

/* Every regular file of at least one block under @path (directory @dir). */
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
			if (orch_fs_getattr(sc->fs->cl, &sc->fs->cred, ents[i].handle, &a))
				continue;   /* gone meanwhile: not ours to dedupe */
			if (S_ISDIR(a.mode))
				error = scan_walk(sc, child, a.handle);
			else if (S_ISREG(a.mode) && a.size >= ORCH_DATA_BLOCK &&
				 orch_layout_is_valid(&a.layout))
				error = scan_add(sc, child, &a);
		}
		if (n)
			cookie = ents[n - 1].cookie;
	}
	free(child);
	free(ents);
	return error;
}

/*
 * The checksums of file @fi's blocks on server @server, page by page
 * (CL2SV_BLOCKSUMS), as file offsets; only whole blocks inside the file's
 * size, the ones a dedupe can share.
 */
static int scan_file_sums(struct scan *sc, uint32_t fi, unsigned int server)
{
	const struct scan_file *f = &sc->files[fi];
	struct orch_msg req;
	bool eof = false;
	int error = 0;

	orch_msg_init(&req, ORCH_CL2SV_BLOCKSUMS);
	req.cred = sc->fs->cred;
	req.handle = f->attr.handle;
	req.offset = 0;
	req.length = ORCH_BLOCKSUMS_PAGE_MAX;
	while (!eof && !error) {
		struct orch_reply rep = { 0 };
		size_t n = 0;

		error = orch_client_call(sc->fs->cl, server, &req, &rep);
		if (error)
			break;
		error = orch_blocksums_decode(rep.m.data.s, rep.m.data.len, sc->page,
					      ORCH_BLOCKSUMS_PAGE_MAX, &n);
		eof = rep.m.eof;
		if (!error && !eof && rep.m.offset <= req.offset)
			error = -EPROTO;   /* a server that never advances */
		req.offset = rep.m.offset;
		orch_reply_release(&rep);
		for (size_t i = 0; i < n && !error; i++) {
			uint64_t off = orch_layout_file_off(&f->attr.layout, server,
							    sc->page[i].block * ORCH_DATA_BLOCK);
			struct scan_blk *b;

			if (off > f->attr.size || f->attr.size - off < ORCH_DATA_BLOCK)
				continue;
			b = scan_grow((void **)&sc->blks, &sc->nblks, &sc->blks_cap, sizeof(*b));
			if (!b) {
				error = -ENOMEM;
				break;
			}
			*b = (struct scan_blk){ .crc = sc->page[i].crc, .file = fi,
						.gblock = sc->page[i].gblock, .off = off };
		}
	}
	return error;
}

/* By checksum, then physical block: a group of equal sums, cut by sharing. */
static int scan_blk_cmp(const void *x, const void *y)
{
	const struct scan_blk *a = x, *b = y;

	if (a->crc != b->crc)
		return a->crc < b->crc ? -1 : 1;
	if (a->gblock != b->gblock)
		return a->gblock < b->gblock ? -1 : 1;
	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

static int scan_pair_cmp(const void *x, const void *y)
{
	const struct scan_pair *a = x, *b = y;

	if (a->dst != b->dst)
		return a->dst < b->dst ? -1 : 1;
	return a->dst_off < b->dst_off ? -1 : a->dst_off > b->dst_off;
}

/*
 * Blocks [@i, @j) of sc->blks have one checksum.  The physical block with
 * the most owners stays; every owner of each other one gets a pair that
 * would share the kept block instead.
 */
static int scan_group(struct scan *sc, size_t i, size_t j)
{
	size_t keep = i, keep_n = 0;

	for (size_t k = i, run; k < j; k += run) {
		for (run = 1; k + run < j && sc->blks[k + run].gblock == sc->blks[k].gblock; run++)
			;
		if (run > keep_n) {
			keep = k;
			keep_n = run;
		}
	}
	for (size_t k = i; k < j; k++) {
		struct scan_pair *p;

		if (sc->blks[k].gblock == sc->blks[keep].gblock)
			continue;
		p = scan_grow((void **)&sc->pairs, &sc->npairs, &sc->pairs_cap, sizeof(*p));
		if (!p)
			return -ENOMEM;
		*p = (struct scan_pair){ .src = sc->blks[keep].file, .src_off = sc->blks[keep].off,
					 .dst = sc->blks[k].file, .dst_off = sc->blks[k].off,
					 .len = ORCH_DATA_BLOCK };
	}
	return 0;
}

/* True if @p continues @run in both files, inside one strip of each. */
static bool scan_pair_extends(const struct scan *sc, const struct scan_pair *run,
			      const struct scan_pair *p)
{
	uint32_t ss = sc->files[run->src].attr.layout.strip_size;
	uint32_t ds = sc->files[run->dst].attr.layout.strip_size;

	return p->src == run->src && p->dst == run->dst &&
	       p->src_off == run->src_off + run->len && p->dst_off == run->dst_off + run->len &&
	       p->src_off / ss == run->src_off / ss && p->dst_off / ds == run->dst_off / ds &&
	       run->len < SCAN_RUN_MAX;
}

/*
 * Dedupes one run.  The servers compare the bytes first, so a checksum
 * that matched by chance changes nothing: the run is then retried block by
 * block, and the blocks that differ are counted, not errors.
 */
static void scan_dedupe(struct scan *sc, const struct scan_pair *p)
{
	const struct scan_file *s = &sc->files[p->src], *d = &sc->files[p->dst];
	uint64_t done = 0;
	int error;

	error = orch_fs_dedupe(sc->fs->cl, &sc->fs->cred, &s->attr, p->src_off, &d->attr,
			       p->dst_off, p->len, &done);
	if (error == -EBADE && p->len > ORCH_DATA_BLOCK) {
		for (uint64_t at = 0; at < p->len; at += ORCH_DATA_BLOCK) {
			struct scan_pair one = *p;

			one.src_off += at;
			one.dst_off += at;
			one.len = ORCH_DATA_BLOCK;
			scan_dedupe(sc, &one);
		}
		return;
	}
	sc->ranges += !error;
	sc->deduped += done;
	if (error == -EBADE)
		sc->collisions++;
	else if (error == -ENOENT || error == -ESTALE)
		;   /* deleted meanwhile */
	else if (error) {
		orch_cli_err(error, "cannot dedupe '%s' at %" PRIu64 " and '%s' at %" PRIu64,
			     s->path, p->src_off, d->path, p->dst_off);
		sc->errors++;
	}
}

/* Finds and dedupes the identical blocks that server @server holds. */
static int scan_server(struct scan *sc, unsigned int server)
{
	char label[32];
	int error = 0;

	snprintf(label, sizeof(label), "sums s%u", server);
	orch_progress_set_label(sc->pg, label);
	sc->nblks = sc->npairs = 0;
	for (size_t fi = 0; fi < sc->nfiles && !error; fi++) {
		if (server >= sc->files[fi].attr.layout.stripe_count)
			continue;
		orch_progress_add(sc->pg, scan_share(sc, fi, server));
		error = scan_file_sums(sc, (uint32_t)fi, server);
		if (error == -ENOENT || error == -ESTALE) {
			error = 0;   /* deleted meanwhile */
		} else if (error) {
			orch_cli_err(error, "cannot list the blocks of '%s' on server %u",
				     sc->files[fi].path, server);
			sc->errors++;
			error = 0;
		}
	}
	sc->blocks += sc->nblks;
	if (sc->nblks)
		qsort(sc->blks, sc->nblks, sizeof(*sc->blks), scan_blk_cmp);
	for (size_t i = 0, j; i < sc->nblks && !error; i = j) {
		for (j = i + 1; j < sc->nblks && sc->blks[j].crc == sc->blks[i].crc; j++)
			;
		if (sc->blks[j - 1].gblock != sc->blks[i].gblock)
			error = scan_group(sc, i, j);
	}
	if (error)
		return error;
	if (sc->npairs)
		qsort(sc->pairs, sc->npairs, sizeof(*sc->pairs), scan_pair_cmp);
	snprintf(label, sizeof(label), "dedupe s%u", server);
	orch_progress_set_label(sc->pg, label);
	for (size_t i = 0; i < sc->npairs; i++)
		sc->pg_total += sc->pairs[i].len;
	orch_progress_set_total(sc->pg, sc->pg_total);
	for (size_t i = 0, j; i < sc->npairs; i = j) {
		struct scan_pair run = sc->pairs[i];

		for (j = i + 1; j < sc->npairs && scan_pair_extends(sc, &run, &sc->pairs[j]); j++)
			run.len += sc->pairs[j].len;
		scan_dedupe(sc, &run);
		orch_progress_add(sc->pg, run.len);
	}
	return 0;
}

static int dedupe_scan(struct orch_cli_fs *fs, const char *path, bool quiet)
{
	struct orch_progress_opts po = { .label = "walk", .quiet = quiet };
	struct orch_progress pg;
	struct scan sc = { .fs = fs, .pg = &pg };
	struct orch_statfs before, after;
	unsigned int nservers = orch_client_cfg(fs->cl)->nservers;
	struct orch_attr root;
	char freed[32];
	int error;

	if (orch_cli_resolve(fs, path, true, &root))
		return ORCH_CLI_FAIL;
	orch_progress_init(&pg, &po);
	sc.page = malloc(ORCH_BLOCKSUMS_PAGE_MAX * sizeof(*sc.page));
	error = sc.page ? orch_fs_statfs(fs->cl, &fs->cred, &before) : -ENOMEM;
	if (!error)
		error = S_ISDIR(root.mode) ? scan_walk(&sc, path, root.handle)
					   : scan_add(&sc, path, &root);
	/* The walk's count was of the files found; now the listing's. */
	for (size_t fi = 0; fi < sc.nfiles; fi++)
		for (unsigned int s = 0; s < nservers; s++)
			sc.pg_total += scan_share(&sc, fi, s);
	orch_progress_set(&pg, 0);
	orch_progress_set_total(&pg, sc.pg_total);
	for (unsigned int s = 0; s < nservers && !error; s++)
		error = scan_server(&sc, s);
	if (!error)
		error = orch_fs_statfs(fs->cl, &fs->cred, &after);
	orch_progress_set_label(&pg, "dedupe");
	orch_progress_fini(&pg, !error);
	if (error) {
		orch_cli_err(error, "cannot scan '%s'", path);
	} else {
		int64_t d = (int64_t)(after.bfree - before.bfree) * after.bsize;

		orch_cli_human(d > 0 ? (uint64_t)d : 0, freed, sizeof(freed));
		printf("scanned %zu files, %" PRIu64 " blocks: %" PRIu64
		       " bytes deduplicated in %" PRIu64 " ranges; free space grew by %" PRId64
		       " bytes (%s)\n", sc.nfiles, sc.blocks, sc.deduped, sc.ranges, d, freed);
		if (sc.collisions)
			printf("%" PRIu64 " blocks had equal checksums but different bytes\n",
			       sc.collisions);
	}
	for (size_t i = 0; i < sc.nfiles; i++)
		free(sc.files[i].path);
	free(sc.files);
	free(sc.blks);
	free(sc.pairs);
	free(sc.page);
	return error || sc.errors ? ORCH_CLI_FAIL : ORCH_CLI_OK;
}

/* --- The command ------------------------------------------------------------------- */

int orch_cmd_dedupe(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "range", required_argument, NULL, 'r' },
		{ "scan", no_argument, NULL, 's' },
		{ "quiet", no_argument, NULL, 'q' },
		ORCH_CLI_OPTS_END
	};
	const char *range = NULL;
	struct orch_attr src, dst;
	struct orch_cli_fs fs;
	uint64_t off = 0, len = 0, deduped = 0;
	bool scan = false, quiet = false;
	int opt, rc;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:qr:s", opts)) != -1) {
		switch (opt) {
		case 'q':
			quiet = true;
			break;
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
		rc = dedupe_scan(&fs, argv[optind], quiet);
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
