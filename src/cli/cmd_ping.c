/*
 * orchard ping: one AN2AN_PING to every server.  The first ping of a server
 * also connects and authenticates, so the round trip is timed on a second
 * ping over the established connection.
 */
#include "cli/cli.h"

#include <string.h>
#include <time.h>

#define PING_DEFAULT_MS 2000

static double ping_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One ping of server @i; *@vmin/@vmax and its state (*@state) from the reply. */
static int ping_one(struct orch_client *cl, unsigned int i, uint8_t *vmin, uint8_t *vmax,
		    uint64_t *state)
{
	struct orch_reply rep = { 0 };
	struct orch_msg req;
	int error;

	orch_msg_init(&req, ORCH_AN2AN_PING);
	error = orch_client_call(cl, i, &req, &rep);
	if (error)
		return error;
	*vmin = rep.m.vmin;
	*vmax = rep.m.vmax;
	*state = rep.m.features;
	orch_reply_release(&rep);
	return 0;
}

int orch_cmd_ping(struct orch_cli *cli, int argc, char **argv)
{
	const struct orch_cfg *cfg;
	struct orch_cli_fs fs;
	int rc, namew = 4, addrw = 7, down = 0, failed = 0;

	if (!orch_cli_args_connect(cli, argc, argv, PING_DEFAULT_MS, &fs, &rc))
		return rc;
	cfg = orch_client_cfg(fs.cl);
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		char addr[300];
		int len = snprintf(addr, sizeof(addr), "%s:%u", cfg->servers[i].host,
				   cfg->servers[i].port);

		addrw = len > addrw ? len : addrw;
		len = (int)strlen(cfg->servers[i].name);
		namew = len > namew ? len : namew;
	}
	printf("%-*s  %-*s  %-6s  %-8s  %s\n", namew, "NAME", addrw, "ADDRESS", "STATE",
	       "PROTOCOL", "RTT");
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		const struct orch_server_cfg *s = &cfg->servers[i];
		uint8_t vmin = 0, vmax = 0;
		uint64_t state = 0;
		char addr[300], proto[16];
		double t0, rtt;
		int error;

		snprintf(addr, sizeof(addr), "%s:%u", s->host, s->port);
		error = ping_one(fs.cl, i, &vmin, &vmax, &state);
		if (!error) {
			t0 = ping_now_ms();
			error = ping_one(fs.cl, i, &vmin, &vmax, &state);
			rtt = ping_now_ms() - t0;
		}
		if (error) {
			printf("%-*s  %-*s  %-6s  %-8s  %s\n", namew, s->name, addrw, addr, "down",
			       "-", orch_cli_strerror(error, s->name));
			down++;
			continue;
		}
		if (vmin == vmax)
			snprintf(proto, sizeof(proto), "v%u", vmin);
		else
			snprintf(proto, sizeof(proto), "v%u-v%u", vmin, vmax);
		/* A server whose store failed answers, but keeps nothing new. */
		failed += (state & ORCH_PING_STORE_FAILED) != 0;
		printf("%-*s  %-*s  %-6s  %-8s  %.3f ms\n", namew, s->name, addrw, addr,
		       state & ORCH_PING_STORE_FAILED ? "failed" : "up", proto, rtt);
	}
	if (down)
		orch_cli_msg("%d of %u servers down", down, cfg->nservers);
	if (failed)
		orch_cli_msg("%d of %u servers failed: their stores are read-only after an I/O "
			     "error (orchard stats; docs/ADMIN.md, \"Disk errors\")",
			     failed, cfg->nservers);
	orch_cli_fs_close(&fs);
	return down || failed ? ORCH_CLI_FAIL : ORCH_CLI_OK;
}
