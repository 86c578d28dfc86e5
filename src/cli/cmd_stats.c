/*
 * orchard stats: AD2SV_STATS to every server.  Each server answers with the
 * text of one flat JSON object; --json merges those into one document, the
 * default prints a table with one row per key and one column per server.
 * --watch is cmd_watch.c.
 *
 * The server's JSON is not parsed into a tree: we only split an object's
 * members (key text, value text, common/json.h), which is all both outputs
 * need: --json passes every value through untouched, and the table
 * flattens nested objects into "outer.inner" rows.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "client/status.h"
#include "common/json.h"
#include "common/util.h"

#define STATS_KEYS_MAX 512

struct stats_srv {
	int error;              /* 0: up, reply valid */
	struct orch_reply rep;  /* rep.m.json: the server's object */
};

static void stats_json(const struct orch_cfg *cfg, const struct stats_srv *srv,
		       const char *client)
{
	char addr[300];

	printf("{");
	if (client)
		printf("\"client\": %s%s", client, cfg ? ", " : "");
	if (!cfg) {
		printf("}\n");
		return;
	}
	printf("\"servers\": [");
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		const struct orch_str *j = &srv[i].rep.m.json;

		snprintf(addr, sizeof(addr), "%s:%u", cfg->servers[i].host, cfg->servers[i].port);
		printf("%s{\"name\": ", i ? ", " : "");
		orch_cli_json_str(stdout, cfg->servers[i].name, strlen(cfg->servers[i].name));
		printf(", \"address\": ");
		orch_cli_json_str(stdout, addr, strlen(addr));
		if (srv[i].error) {
			const char *why = orch_cli_strerror(srv[i].error, cfg->servers[i].name);

			printf(", \"up\": false, \"error\": ");
			orch_cli_json_str(stdout, why, strlen(why));
		} else if (orch_json_members(j->s, j->len, NULL, 0) < 0) {
			printf(", \"up\": true, \"error\": \"server sent stats that are not a JSON object\"");
		} else {
			/* Merge: the object's text without its braces. */
			const char *in;
			size_t inlen;

			orch_json_inner(j->s, j->len, &in, &inlen);
			printf(", \"up\": true");
			if (inlen)
				printf(", %.*s", (int)inlen, in);
		}
		printf("}");
	}
	printf("]}\n");
}

/* One row of the table: a flattened key ("requests.CL2SV_READ"). */
struct stats_row {
	char key[128];
	const char *v[ORCH_SERVERS_MAX]; /* per server, NULL: absent */
	int vlen[ORCH_SERVERS_MAX];
};

struct stats_tab {
	struct stats_row *rows;
	int nrows;
};

/*
 * Adds the members of object @s (server @srv) under @prefix, descending
 * into nested objects so that every row holds one scalar.
 */
static void stats_flatten(struct stats_tab *t, unsigned int srv, const char *prefix,
			  const char *s, size_t len, int depth)
{
	struct orch_json_kv *kv = calloc(STATS_KEYS_MAX, sizeof(*kv));
	char key[128];
	int n, r;

	if (!kv)
		return;
	n = orch_json_members(s, len, kv, STATS_KEYS_MAX);
	for (int m = 0; m < n; m++) {
		snprintf(key, sizeof(key), "%s%.*s", prefix, (int)kv[m].klen, kv[m].k);
		if (kv[m].v[0] == '{' && depth < 4) {
			char sub[sizeof(key) + 1];

			snprintf(sub, sizeof(sub), "%s.", key);
			stats_flatten(t, srv, sub, kv[m].v, kv[m].vlen, depth + 1);
			continue;
		}
		for (r = 0; r < t->nrows; r++)
			if (!strcmp(t->rows[r].key, key))
				break;
		if (r == t->nrows) {
			if (t->nrows == STATS_KEYS_MAX)
				continue;
			memset(&t->rows[r], 0, sizeof(t->rows[r]));
			snprintf(t->rows[r].key, sizeof(t->rows[r].key), "%s", key);
			t->nrows++;
		}
		t->rows[r].v[srv] = kv[m].v;
		t->rows[r].vlen[srv] = (int)kv[m].vlen;
		if (kv[m].v[0] == '"') {
			t->rows[r].v[srv]++;
			t->rows[r].vlen[srv] -= 2;
		}
	}
	free(kv);
}

/* Keys down, servers across; "-" where a server lacks a key. */
static void stats_table(const struct orch_cfg *cfg, const struct stats_srv *srv)
{
	struct stats_tab t = { 0 };
	int colw[ORCH_SERVERS_MAX], keyw = 2;
	unsigned int n = cfg->nservers;

	t.rows = calloc(STATS_KEYS_MAX, sizeof(*t.rows));
	if (!t.rows) {
		orch_cli_err(-ENOMEM, "cannot print stats");
		return;
	}
	for (unsigned int i = 0; i < n; i++) {
		const struct orch_str *j = &srv[i].rep.m.json;

		if (!srv[i].error)
			stats_flatten(&t, i, "", j->s, j->len, 0);
	}
	for (unsigned int i = 0; i < n; i++) {
		colw[i] = ORCH_MAX((int)strlen(cfg->servers[i].name), 4);
		for (int r = 0; r < t.nrows; r++)
			colw[i] = ORCH_MAX(colw[i], t.rows[r].vlen[i]);
	}
	for (int r = 0; r < t.nrows; r++)
		keyw = ORCH_MAX(keyw, (int)strlen(t.rows[r].key));
	printf("%-*s", keyw, "");
	for (unsigned int i = 0; i < n; i++)
		printf("  %*s", colw[i], cfg->servers[i].name);
	printf("\n%-*s", keyw, "up");
	for (unsigned int i = 0; i < n; i++)
		printf("  %*s", colw[i], srv[i].error ? "no" : "yes");
	printf("\n");
	for (int r = 0; r < t.nrows; r++) {
		printf("%-*s", keyw, t.rows[r].key);
		for (unsigned int i = 0; i < n; i++) {
			if (t.rows[r].v[i])
				printf("  %*.*s", colw[i], t.rows[r].vlen[i], t.rows[r].v[i]);
			else
				printf("  %*s", colw[i], "-");
		}
		printf("\n");
	}
	for (unsigned int i = 0; i < n; i++)
		if (srv[i].error)
			fprintf(stderr, "orchard: server '%s' is down: %s\n", cfg->servers[i].name,
				orch_cli_strerror(srv[i].error, cfg->servers[i].name));
	free(t.rows);
}

int orch_cli_mount_stats(const char *mnt, char **out)
{
	ssize_t n = getxattr(mnt, "user.orchard.stats", NULL, 0);
	char *buf;

	if (n >= 0) {
		buf = malloc((size_t)n + 1);
		if (!buf) {
			orch_cli_err(-ENOMEM, "cannot read the statistics of '%s'", mnt);
			return ORCH_CLI_FAIL;
		}
		n = getxattr(mnt, "user.orchard.stats", buf, (size_t)n);
		if (n >= 0) {
			buf[n] = '\0';
			*out = buf;
			return ORCH_CLI_OK;
		}
		free(buf);
	}
	if (errno == ENODATA || errno == ENOTSUP)
		orch_cli_msg("'%s' is not the root of an Orchard mount", mnt);
	else
		orch_cli_err(-errno, "cannot read the statistics of '%s'", mnt);
	return ORCH_CLI_FAIL;
}

int orch_cmd_stats(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "watch", no_argument, NULL, 'w' },
		{ "interval", required_argument, NULL, 'i' },
		{ "count", required_argument, NULL, 'n' },
		ORCH_CLI_OPTS_END
	};
	struct stats_srv srv[ORCH_SERVERS_MAX];
	int errors[ORCH_SERVERS_MAX];
	struct orch_reply *reps;
	const struct orch_cfg *cfg;
	struct orch_cli_fs fs;
	const char *mnt = NULL;
	char *client = NULL;
	bool json = false, watch = false, watch_opts = false;
	uint64_t interval_s = 1, count = 0;
	int opt, rc;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:jwi:n:", opts)) != -1) {
		switch (opt) {
		case 'j':
			json = true;
			break;
		case 'w':
			watch = true;
			break;
		case 'i':
			if (orch_cli_uint_parse(optarg, 1, 3600, &interval_s))
				return orch_cli_usage_err(cli, "--interval: bad seconds '%s' (1-3600)",
							  optarg);
			watch_opts = true;
			break;
		case 'n':
			if (orch_cli_uint_parse(optarg, 1, UINT32_MAX, &count))
				return orch_cli_usage_err(cli, "--count: bad number '%s'", optarg);
			watch_opts = true;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (optind < argc)
		mnt = argv[optind++];
	if (optind != argc)
		return orch_cli_usage_err(cli, "unexpected argument '%s'", argv[optind]);
	if (watch_opts && !watch)
		return orch_cli_usage_err(cli, "--interval and --count go with --watch");
	if (watch && json)
		return orch_cli_usage_err(cli, "--watch and --json do not go together");
	if (watch)
		return orch_cli_stats_watch(cli, mnt, (uint32_t)interval_s * 1000, count);
	if (mnt) {
		rc = orch_cli_mount_stats(mnt, &client);
		if (rc)
			return rc;
		if (!cli->conf) {
			/* The mount's side alone. */
			if (json)
				stats_json(NULL, NULL, client);
			else
				printf("client %s: %s\n", mnt, client);
			free(client);
			return ORCH_CLI_OK;
		}
	}
	rc = orch_cli_connect_members(cli, &fs);
	if (rc) {
		free(client);
		return rc;
	}
	cfg = orch_client_cfg(fs.cl);
	memset(srv, 0, sizeof(srv));
	/* All at once: a server that does not answer costs one deadline, not one each. */
	reps = calloc(ORCH_SERVERS_MAX, sizeof(*reps));
	if (!reps) {
		free(client);
		orch_cli_fs_close(&fs);
		orch_cli_err(-ENOMEM, "stats");
		return ORCH_CLI_FAIL;
	}
	orch_status_fetch(fs.cl, reps, errors);
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		srv[i].error = errors[i];
		srv[i].rep = reps[i];   /* released below, through srv */
	}
	free(reps);
	if (json) {
		stats_json(cfg, srv, client);
	} else {
		stats_table(cfg, srv);
		if (client)
			printf("client %s: %s\n", mnt, client);
	}
	free(client);
	for (unsigned int i = 0; i < cfg->nservers; i++)
		if (!srv[i].error)
			orch_reply_release(&srv[i].rep);
	orch_cli_fs_close(&fs);
	return ORCH_CLI_OK;
}
