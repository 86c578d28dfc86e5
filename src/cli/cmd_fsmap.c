/*
 * orchard fsmap and whoowns: the physical map of one server's extent store
 * with the owner of every range, as `xfs_io -c 'fsmap -v'`.
 *
 * The server sends the map page by page (AD2SV_FSMAP, at most
 * ORCH_FSMAP_PAGE_MAX records each, resumed after the key of the last
 * one), so a map of any size costs bounded memory on both sides.  Owners
 * are object handles; this side turns them into paths (client/path.h) and
 * object offsets into file offsets through the file's layout.  A striped
 * file's object holds every stripe_count-th strip, so one physical extent
 * is printed as one line per strip it holds.
 */
#include "cli/cmd_admin.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "client/path.h"
#include "common/util.h"
#include "proto/layout.h"
#include "proto/pages.h"

struct fsmap_out {
	struct orch_client *cl;
	struct orch_path_cache *pc;
	unsigned int server;
	const char *name;
	struct orch_fsmap_geom g;
	bool verbose, json;
	uint64_t n;                  /* lines printed */
	uint64_t total, free_blocks, meta_blocks, bad_blocks, data_blocks;
};

static const char *fsmap_special(int64_t owner)
{
	switch (owner) {
	case ORCH_FSMAP_OWN_FREE: return "free space";
	case ORCH_FSMAP_OWN_FS: return "static metadata";
	case ORCH_FSMAP_OWN_DEFECTIVE: return "bad blocks";
	default: return NULL;
	}
}

/* One line: physical [@p, @p + @len) owned by @owner (text) at file byte @off. */
static void fsmap_line(struct fsmap_out *o, uint64_t p, uint64_t len, const char *owner,
		       const struct orch_path_info *pi, bool has_off, uint64_t off,
		       uint32_t flags)
{
	uint64_t mask = o->g.ag_blocks - 1, bytes = len * ORCH_DATA_BLOCK;

	if (o->json) {
		printf("%s\n  {\"start\": %" PRIu64 ", \"len\": %" PRIu64 ", \"ag\": %" PRIu64
		       ", \"agblock\": %" PRIu64 ", \"owner\": ", o->n ? "," : "", p, len,
		       p / o->g.ag_blocks, p & mask);
		orch_cli_json_str(stdout, owner, strlen(owner));
		if (pi) {
			printf(", \"handle\": %" PRIu64 ", \"paths\": [", pi->handle);
			for (unsigned int i = 0; i < pi->npaths; i++) {
				printf("%s", i ? ", " : "");
				orch_cli_json_str(stdout, pi->paths[i], strlen(pi->paths[i]));
			}
			printf("], \"other_links\": %" PRIu64, pi->more);
		}
		if (has_off)
			printf(", \"offset\": %" PRIu64 ", \"bytes\": %" PRIu64, off, bytes);
		printf(", \"flags\": %" PRIu32 "}", flags);
	} else if (o->verbose) {
		char range[64], agr[64], fo[64];

		snprintf(range, sizeof(range), "[%" PRIu64 "..%" PRIu64 "]", p, p + len - 1);
		snprintf(agr, sizeof(agr), "(%" PRIu64 "..%" PRIu64 ")", p & mask,
			 (p & mask) + len - 1);
		if (has_off)
			snprintf(fo, sizeof(fo), "%" PRIu64 "..%" PRIu64, off, off + bytes - 1);
		else
			snprintf(fo, sizeof(fo), "-");
		printf("%6" PRIu64 ": %-24s %4" PRIu64 " %-22s %-40s %-28s %10" PRIu64 " %#06x\n",
		       o->n, range, p / o->g.ag_blocks, agr, owner, fo, len, flags);
	} else {
		printf("%6" PRIu64 ": [%" PRIu64 "..%" PRIu64 "]: %s", o->n, p, p + len - 1,
		       owner);
		if (has_off)
			printf(" %" PRIu64 "..%" PRIu64, off, off + bytes - 1);
		printf(" %" PRIu64 "\n", len);
	}
	o->n++;
}

/* A data record: one line per strip of the file it holds. */
static void fsmap_data(struct fsmap_out *o, const struct orch_fsmap_rec *r)
{
	const struct orch_path_info *pi = NULL;
	char owner[ORCH_PATH_MAX + 64];
	uint64_t local = r->fileoff * ORCH_DATA_BLOCK;
	uint64_t end = local + r->len * ORCH_DATA_BLOCK;
	bool striped;

	if (!r->handle || orch_path_lookup(o->pc, r->handle, &pi)) {
		snprintf(owner, sizeof(owner), "(object nid %" PRId64 ")", r->owner);
		fsmap_line(o, r->start, r->len, owner, NULL, false, 0, r->flags);
		return;
	}
	orch_path_describe(pi, -1, owner, sizeof(owner));
	striped = pi->has_attr && orch_layout_is_valid(&pi->attr.layout);
	while (local < end) {
		uint64_t run = end - local, off = local;

		if (striped) {
			const struct orch_layout *l = &pi->attr.layout;

			if (l->stripe_count > 1)
				run = ORCH_MIN(run, l->strip_size - local % l->strip_size);
			off = orch_path_file_offset(l, o->server, local);
		}
		fsmap_line(o, r->start + (local - r->fileoff * ORCH_DATA_BLOCK) / ORCH_DATA_BLOCK,
			   run / ORCH_DATA_BLOCK, owner, pi, true, off, r->flags);
		local += run;
	}
}

static void fsmap_rec(struct fsmap_out *o, const struct orch_fsmap_rec *r)
{
	const char *special = fsmap_special(r->owner);

	o->total += r->len;
	if (r->owner == ORCH_FSMAP_OWN_FREE)
		o->free_blocks += r->len;
	else if (r->owner == ORCH_FSMAP_OWN_FS)
		o->meta_blocks += r->len;
	else if (r->owner == ORCH_FSMAP_OWN_DEFECTIVE)
		o->bad_blocks += r->len;
	else
		o->data_blocks += r->len;
	if (special || r->owner <= 0)
		fsmap_line(o, r->start, r->len, special ? special : "(unknown owner)", NULL,
			   false, 0, r->flags);
	else
		fsmap_data(o, r);
}

/* Every page of blocks [@start, @end). */
static int fsmap_walk(struct fsmap_out *o, uint64_t start, uint64_t end)
{
	struct orch_fsmap_rec *recs = malloc(ORCH_FSMAP_PAGE_MAX * sizeof(*recs));
	struct orch_msg req;
	bool eof = false;
	int error = 0;

	if (!recs)
		return -ENOMEM;
	orch_msg_init(&req, ORCH_AD2SV_FSMAP);
	req.offset = start;
	req.size = end;
	while (!eof && !error) {
		struct orch_reply rep = { 0 };
		size_t n;

		error = orch_client_call(o->cl, o->server, &req, &rep);
		if (error)
			break;
		error = orch_fsmap_decode(rep.m.data.s, rep.m.data.len, &o->g, recs,
					  ORCH_FSMAP_PAGE_MAX, &n);
		eof = rep.m.eof;
		req.fsmap_flags = ORCH_FSMAP_RESUME;
		req.fsmap_key = rep.m.fsmap_key;
		orch_reply_release(&rep);
		if (error)
			break;
		if (o->n == 0 && !o->json && o->verbose)
			printf("%6s: %-24s %4s %-22s %-40s %-28s %10s %s\n", "EXT", "BLOCK-RANGE",
			       "AG", "AG-OFFSET", "OWNER", "FILE-OFFSET", "TOTAL", "FLAGS");
		for (size_t i = 0; i < n; i++)
			fsmap_rec(o, &recs[i]);
		if (!eof && n == 0)
			error = -EPROTO;  /* a server that never advances */
	}
	free(recs);
	return error;
}

/* "A:B" or "A" (@colon_ok) into [*@a, *@b] inclusive. */
static int fsmap_range_parse(const char *s, uint64_t *a, uint64_t *b)
{
	char head[32];
	const char *colon = strchr(s, ':');
	size_t hl = colon ? (size_t)(colon - s) : strlen(s);

	if (hl == 0 || hl >= sizeof(head))
		return -EINVAL;
	memcpy(head, s, hl);
	head[hl] = 0;
	if (orch_cli_uint_parse(head, 0, UINT64_MAX - 1, a))
		return -EINVAL;
	*b = *a;
	if (colon && orch_cli_uint_parse(colon + 1, *a, UINT64_MAX - 1, b))
		return -EINVAL;
	return 0;
}

static int fsmap_run(struct orch_cli *cli, const char *server, uint64_t start, uint64_t end,
		     bool verbose, bool json)
{
	struct fsmap_out o = { .verbose = verbose, .json = json, .name = server };
	struct orch_cli_fs fs;
	int idx, rc, error;

	rc = orch_cli_connect(cli, &fs);
	if (rc)
		return rc;
	idx = orch_cfg_server_index(orch_client_cfg(fs.cl), server);
	if (idx < 0) {
		orch_cli_fs_close(&fs);
		return orch_cli_usage_err(cli, "no server '%s' in the configuration", server);
	}
	o.cl = fs.cl;
	o.server = (unsigned int)idx;
	if (orch_path_cache_create(fs.cl, &o.pc)) {
		orch_cli_fs_close(&fs);
		orch_cli_err(-ENOMEM, "fsmap");
		return ORCH_CLI_FAIL;
	}
	if (json)
		printf("{\"server\": \"%s\", \"records\": [", server);
	error = fsmap_walk(&o, start, end);
	if (json)
		printf("\n], \"block_size\": %u, \"blocks\": %" PRIu64 ", \"ag_blocks\": %" PRIu32
		       ", \"ag_count\": %" PRIu32 ", \"total\": %" PRIu64 ", \"free\": %" PRIu64
		       ", \"static\": %" PRIu64 ", \"bad\": %" PRIu64 ", \"data\": %" PRIu64
		       ", \"complete\": %s}\n", ORCH_DATA_BLOCK, o.g.blocks, o.g.ag_blocks,
		       o.g.ag_count, o.total, o.free_blocks, o.meta_blocks, o.bad_blocks,
		       o.data_blocks, error ? "false" : "true");
	else if (verbose && !error)
		printf("total %" PRIu64 " blocks: data %" PRIu64 ", free %" PRIu64 ", static %"
		       PRIu64 ", bad %" PRIu64 "\n", o.total, o.data_blocks, o.free_blocks,
		       o.meta_blocks, o.bad_blocks);
	orch_path_cache_destroy(o.pc);
	orch_cli_fs_close(&fs);
	if (error) {
		orch_cli_err(error, "cannot map server '%s'", server);
		return ORCH_CLI_FAIL;
	}
	return ORCH_CLI_OK;
}

int orch_cmd_fsmap(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "range", required_argument, NULL, 'r' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "json", no_argument, NULL, 'j' },
		ORCH_CLI_OPTS_END
	};
	uint64_t a = 0, b = UINT64_MAX - 1;
	bool verbose = false, json = false;
	int opt;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:r:vj", opts)) != -1) {
		switch (opt) {
		case 'r':
			if (fsmap_range_parse(optarg, &a, &b))
				return orch_cli_usage_err(cli, "--range: bad range '%s'", optarg);
			break;
		case 'v': verbose = true; break;
		case 'j': json = true; break;
		case ORCH_CLI_OPT_HELP: return orch_cli_usage(cli, ORCH_CLI_OK);
		default: return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (verbose && json)
		return orch_cli_usage_err(cli, "-v and --json do not go together");
	if (optind + 1 != argc)
		return orch_cli_usage_err(cli, optind == argc ? "missing SERVER" :
					  "unexpected argument '%s'", argv[argc - 1]);
	return fsmap_run(cli, argv[optind], a, b + 1, verbose, json);
}

int orch_cmd_whoowns(struct orch_cli *cli, int argc, char **argv)
{
	uint64_t a, b;
	int rc;

	if (!orch_cli_args(cli, argc, argv, 2, 2, &rc))
		return rc;
	if (fsmap_range_parse(argv[optind + 1], &a, &b))
		return orch_cli_usage_err(cli, "bad block range '%s'", argv[optind + 1]);
	return fsmap_run(cli, argv[optind], a, b + 1, false, false);
}
