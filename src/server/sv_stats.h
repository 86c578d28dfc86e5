/*
 * AN2AN_PING and AD2SV_STATS, and the snapshot of every counter that both
 * the stats JSON and the metrics (sv_metrics.c) are made from.  A handler
 * file: it reads the counters of the floors below it.  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_STATS_H
#define ORCH_SERVER_SV_STATS_H

#include "server/sv.h"
#include "server/sv_ack.h"
#include "server/sv_ns.h"

/*
 * Every counter of the server at one moment.  Filled on the loop thread,
 * then a plain copy that any thread may read.  The request latency and
 * flush histograms are not here: they are atomics, read where they are.
 */
struct sv_stats_snap {
	uint64_t requests[SV_MSG_TYPES_MAX]; /* by orch_msg_index() */
	uint64_t errors[SV_ERRNO_MAX];       /* replies by errno */
	uint64_t bytes_in, bytes_out;        /* client and peer connections */
	uint64_t protocol_errors;
	uint64_t accepted;                   /* client connections accepted */
	uint64_t conns_open;                 /* ... and open now */
	uint64_t conns_refused;              /* closed at once: max_connections open */
	uint64_t conns_timed_out;            /* closed: not authenticated in time */
	uint64_t accept_pauses;              /* accept(2) out of descriptors or memory */
	uint64_t syncs, fsync_requests;      /* flushes, and the fsyncs they served */
	uint64_t commits;                    /* namespace transactions */
	uint64_t wal_restarts, wal_restart_us, wal_wait_us;
	uint64_t intents_done;
	uint64_t leases, lease_grants, lease_pushes, lease_revokes;
	struct sv_ack_counts acks;           /* replies held for acknowledgements */
	struct sv_ns_counts ns;              /* the namespace's replica group */
	uint64_t inodes;
	uint64_t writer_inodes, writer_regs, writer_cuts;
	uint64_t open_files, open_regs, orphans, orphans_freed;
	uint64_t reclaimed, cut;             /* data objects the sweeps deleted or cut */
	uint64_t writes_queued;              /* data writes waiting for the store */
	struct orch_store_stats store;
	uint64_t capacity, free, avail, objects; /* the store's space, bytes */
	int store_error;                     /* 0, or why the store failed (read-only) */
	int64_t store_failed_s;              /* ...since this wall time */
	struct sv_scrub_last scrub;
	double requests_per_s;               /* over the last 10 s */
	uint64_t uptime_ms;
	int64_t started_real_ms;             /* wall clock */
};

/* AN2AN_PING: answers @r with our protocol version. */
int sv_stats_ping(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* AD2SV_STATS: answers @r with the stats JSON. */
int sv_stats_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* Fills @out. */
void sv_stats_collect(struct sv_server *sv, struct sv_stats_snap *out);
/*
 * Starts sampling the request rate, once a second (a loop timer): after
 * the loop exists.
 */
void sv_stats_start(struct sv_server *sv);

#endif
