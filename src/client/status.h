/*
 * Cluster health, as `orchard status` prints it and each server's status
 * page shows it: every server asked for its stats (AD2SV_STATS) at once,
 * and the few numbers an operator looks at first read out of each answer.
 * A server that does not answer within the client's timeout is down.
 *
 * Any thread: the calls go through the caller's client (thread safe).
 */
#ifndef ORCH_CLIENT_STATUS_H
#define ORCH_CLIENT_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/rpc.h"

struct orch_status_srv {
	int error;                /* 0: up and answered; else why it is down */
	char version[32];
	uint64_t uptime_ms;
	uint64_t capacity;        /* bytes of the store */
	uint64_t free;            /* bytes free in it */
	double requests_per_s;    /* over the server's last 10 s */
	uint64_t connections;     /* client connections open */
	uint64_t inodes;
	uint64_t scrub_runs;      /* scrubs since the server started; 0: none */
	int64_t scrub_end_s;      /* wall time the last one ended */
	uint64_t scrub_ms;
	uint64_t scrub_findings;
	bool scrub_data;
	char scrub_error[32];     /* "" if the last scrub finished */
	char store_error[32];     /* "" while the store is healthy; else why it failed */
	/* The namespace's replicated log, if the server has one (docs/DESIGN.md). */
	char log_role[16];        /* "" without a log; else leader, follower, ... */
	uint64_t log_term;
	uint64_t log_applied;     /* entries applied here ... */
	uint64_t log_commit;      /* ... of those known committed */
};

/*
 * Asks every server of @cl's config for its stats at once: for server i,
 * @errors[i] is 0 and @reps[i] its reply (rep.m.json; the caller releases
 * it), or the error and @reps[i] zeroed.
 */
void orch_status_fetch(struct orch_client *cl, struct orch_reply *reps, int *errors);

/*
 * Fills @out[i] for every server i of @cl's config (cfg->nservers
 * entries), asking all at once.  Returns the number of servers up.
 */
unsigned int orch_status_query(struct orch_client *cl, struct orch_status_srv *out);

/* Why a server is down, in a few words ("unreachable", "no answer", ...). */
const char *orch_status_why(int error);
/* "1.5 GiB", "512 B". */
void orch_status_bytes(uint64_t bytes, char *out, size_t size);
/* "3d 4h", "2h 05m", "4m 10s", "12s". */
void orch_status_duration(uint64_t seconds, char *out, size_t size);
/*
 * The last scrub at wall time @now_s: "never", "clean 5m ago",
 * "3 findings 1h 02m ago", "failed (EIO) 10s ago".  @bad (may be NULL)
 * is set when the last scrub found something or failed.
 */
void orch_status_scrub(const struct orch_status_srv *s, int64_t now_s, char *out,
		       size_t size, bool *bad);

#endif
