/*
 * orchardd internals: the server's state, shared by all its files (private
 * header).
 *
 * One event-loop thread owns every connection and the namespace database;
 * requests are handled to completion on it, except:
 *  - data writes (CL2SV_WRITE, SV2SV_WRITE), queued to the store's writer
 *    thread, which batches them into few transactions and hands each
 *    completion back to the loop (sv_write.h);
 *  - fsync requests, which wait for the flusher thread (flush.h) to make the
 *    store and the WAL durable, sharing one flush among all waiters;
 *  - long copies and dedupes, on the data worker thread (sv_work.h);
 *  - cross-server operations (intent.h), which write an intent record with
 *    their local change, ask the peer server, and finish when it answers.
 * The store's other calls (read, truncate, punch, delete) are synchronous:
 * they wait on the loop thread, behind the writes queued before them.
 * No lock is held across network I/O and no transaction stays open across a
 * loop iteration.
 *
 * The files are floors: each calls only files listed before it here (on a
 * lower floor, or earlier on its own), never up, so no two files call each
 * other.  Bottom first:
 *
 *   0  sv_conns     the open client connections
 *      sv_peer      calls on other servers
 *      sv_lease     leases and invalidation pushes (revokes through sv_conns)
 *      sv_req       a request and its reply (a reply grants leases)
 *      sv_ns        changes of the namespace, directly or through the group
 *   1  flush        durability: the flusher, fsyncs, answers once durable
 *      sv_write     data writes queued to the store
 *      sv_work      the data worker
 *   2  sv_writers   the writers of files held here, cuts past the size
 *      intent       cross-server operations (tells sv_writers of truncates)
 *      sv_admin     fsmap, names, scrub, sweeps: the admin thread
 *   3  sv_cl        namespace requests of clients
 *      sv_data      data requests of clients
 *      sv_sv        requests of other servers
 *      sv_stats     PING and STATS
 *      sv_metrics   GET /metrics and the status page (HTTP threads)
 *   4  sv_dispatch  decodes every frame and calls its handler
 *   5  main.c       startup, accepting, closing, shutdown
 *
 * A handler that needs what only a higher floor can do returns a code
 * (sv_req_need_owner); the transports take the dispatcher from main.c.
 * Each file's header (same stem, .h) includes only this one.
 */
#ifndef ORCH_SERVER_SV_H
#define ORCH_SERVER_SV_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/cfg.h"
#include "meta/meta.h"
#include "net/conn.h"
#include "net/ev.h"
#include "proto/msg.h"
#include "store/store.h"
#include "web/prom.h"

#define SV_MSG_TYPES_MAX 64
/* Replies counted by the errno of their status; the last slot counts larger ones. */
#define SV_ERRNO_MAX 136
/* Samples of the request rate, one a second: the rate is over the last 10 s. */
#define SV_RATE_SLOTS 11

struct sv_acks;
struct sv_admin;
struct sv_flusher;
struct sv_intents;
struct sv_leases;
struct sv_metrics;
struct sv_ns;
struct sv_peers;
struct sv_req;
struct sv_worker;
struct sv_write;
struct sv_writers;
struct sv_mirror;

/* Writes queued to the store (sv_write.c). */
struct sv_writes {
	pthread_mutex_t w_lock;
	pthread_cond_t w_cv;          /* broadcast when w_completed grows */
	struct sv_write *w_done;      /* protected by w_lock: finished, newest first */
	bool w_posted;                /* protected by w_lock: a drain is posted to the loop */
	uint64_t w_completed;         /* protected by w_lock: done callbacks run */
	uint64_t w_submitted;         /* loop thread only */
	uint64_t w_answered;          /* loop thread only */
	uint64_t w_bytes;             /* loop thread only: data bytes queued */
};

/*
 * The file-data gate of a replica group's leader (sv_gate.h): a reply, or
 * a step waiting for durability, leaves only once every store operation
 * sent to the followers before it is held where a failover keeps it.
 * Loop thread only.
 */
struct sv_gate_wait;
struct sv_server;
struct sv_gate {
	bool g_on;                    /* this member leads a group of several */
	bool g_majority;              /* the members in sync are a majority */
	uint64_t g_sent;              /* store operations sent to the followers */
	uint64_t g_safe;              /* those every follower in sync applied */
	struct sv_req *g_held;        /* replies waiting, oldest first (r_held_next) */
	struct sv_req **g_held_tail;
	struct sv_gate_wait *g_waits; /* steps waiting, oldest first */
	struct sv_gate_wait **g_waits_tail;
	/* Sends a sync to the followers (sv_mirror.c): a step that waits for durability. */
	void (*g_sync)(struct sv_server *sv);
	uint64_t g_replies_held;      /* stats: replies that waited */
	/* This member stopped leading: every reply that would wait is this error. */
	int g_stop_error;
};

/* True if what was sent so far is safe: a reply may leave now. */
static inline bool sv_gate_open(const struct sv_gate *g)
{
	return !g->g_on || (!g->g_stop_error && g->g_majority && g->g_safe >= g->g_sent);
}

/* The open client connections (sv_conns.c).  Loop thread only. */
struct sv_conns {
	struct orch_conn **cs_v;      /* not referenced: each leaves at its close */
	size_t cs_n;
	size_t cs_cap;
	struct orch_ev_timer cs_hs_timer; /* armed while a handshake is under way */
	uint64_t cs_refused;          /* closed at once: max_connections were open */
	uint64_t cs_timed_out;        /* closed: not authenticated in handshake_timeout_ms */
};

/* Requests per second (sv_stats.c), sampled by a timer.  Loop thread only. */
struct sv_rate {
	struct orch_ev_timer r_timer;
	uint64_t r_total[SV_RATE_SLOTS];  /* requests handled, at ... */
	uint64_t r_ms[SV_RATE_SLOTS];     /* ... this monotonic time */
	unsigned int r_next;              /* the slot written next */
	unsigned int r_n;                 /* slots written, at most SV_RATE_SLOTS */
};

/* The last scrub (sv_admin.c, when it answers).  Loop thread only. */
struct sv_scrub_last {
	uint64_t runs;                /* scrubs finished since start */
	int64_t end_s;                /* wall time the last one ended; 0: none yet */
	uint64_t ms;                  /* how long it took */
	uint64_t findings;            /* what it found (all, not only those listed) */
	int error;                    /* 0, or why it could not finish */
	bool data;                    /* it read the data too (--data) */
};

struct sv_server {
	struct orch_cfg s_cfg;
	unsigned int s_index;              /* our replica group: what our handles name */
	unsigned int s_member;             /* our place in it (0 .. replicas-1) */
	const struct orch_server_cfg *s_me; /* our own [server] section */
	/* Stop, then start again (main.c): this member stopped leading its group. */
	bool s_restart;
	/* Stopped by a failure after start (main.c exits 1). */
	bool s_failed;
	/* The member of our group that leads, as last seen (sv_ns.c), or ORCH_NO_LEADER. */
	uint32_t s_leader;
	struct orch_ev *s_ev;
	struct orch_meta *s_meta;
	struct orch_store *s_store;
	int s_listen_fd;
	/*
	 * Accepting stops for a while when accept(2) fails for want of
	 * descriptors or memory (main.c): it resumes when the timer fires or
	 * a connection closes.  Loop thread only.
	 */
	bool s_accept_paused;
	uint32_t s_accept_pause_ms;        /* the last pause; 0 after an accept */
	struct orch_ev_timer s_accept_timer;
	uint64_t s_accept_pauses;
	struct orch_conn_ops s_client_ops; /* of accepted connections (main.c) */
	struct sv_conns s_conns;           /* the open ones (sv_conns.c) */
	struct sv_peers *s_peers;          /* calls on other servers (sv_peer.c) */
	struct sv_leases *s_leases;        /* the lease table (sv_lease.c); NULL: leases off */
	/*
	 * The request on whose behalf the namespace changes now, if any: its
	 * handler runs (sv_dispatch), or a step it waited for (intent.c).  A
	 * push its change makes to its own connection carries its reqid, so
	 * that mount knows the change is its own (SPEC-wire.md, "Leases"); one
	 * to another holder that acknowledges pushes holds its reply
	 * (sv_ack.h).
	 */
	struct sv_req *s_acting;
	struct sv_acks *s_acks;            /* replies held for acknowledgements (sv_ack.c) */
	struct sv_ns *s_ns;                /* the namespace's replica group (sv_ns.c); NULL: none */
	/*
	 * While a change runs in the group's capture: where replies made
	 * meanwhile are kept until its entry is applied (sv_req.h, r_held).
	 */
	struct sv_req **s_hold;
	struct sv_gate s_gate;             /* replies waiting for the followers' data (sv_gate.h) */
	struct sv_mirror *s_mirror;        /* the file-data stream (sv_mirror.c); NULL: none */
	struct sv_flusher *s_flusher;      /* the flusher thread (flush.c) */
	struct sv_writes s_writes;         /* data writes queued to the store (sv_write.c) */
	struct sv_worker *s_worker;        /* the data worker (sv_work.c); NULL: jobs run on the loop */
	struct sv_intents *s_intents;      /* the intent machine (intent.c) */
	struct sv_writers *s_writers;      /* the writers of files held here (sv_writers.c) */
	struct sv_opens *s_opens;          /* open files and orphans held here (sv_opens.c) */
	struct sv_admin *s_admin;          /* the admin thread (sv_admin.c); NULL: not running */
	uint64_t s_started_ms;
	int64_t s_started_real_ms;         /* wall clock, for process_start_time_seconds */
	struct sv_metrics *s_metrics;      /* the HTTP endpoint (sv_metrics.c); NULL: off */
	/*
	 * Latency of each request type, from its frame to its reply (sv_req.c),
	 * observed on the loop thread; relaxed atomics, so the metrics may read
	 * them from anywhere.  And each flush of the flusher (flush.c).
	 */
	struct orch_hist s_req_hist[SV_MSG_TYPES_MAX];
	struct orch_hist s_flush_hist;
	/* Stats, loop thread only. */
	uint64_t s_errors[SV_ERRNO_MAX];  /* replies by the errno of their status */
	struct sv_rate s_rate;
	struct sv_scrub_last s_scrub;
	uint64_t s_requests[SV_MSG_TYPES_MAX];
	uint64_t s_bytes_in;
	uint64_t s_bytes_out;
	uint64_t s_errors_proto;
	uint64_t s_accepted;          /* client connections accepted */
	uint64_t s_syncs;             /* flushes done (group commits) */
	uint64_t s_sync_waiters;      /* fsync requests served by them */
	/* Written by the flusher thread, read for stats. */
	atomic_uint_least64_t s_wal_restarts;   /* checkpoints that restarted the namespace WAL */
	atomic_uint_least64_t s_wal_restart_us; /* time they took, lock wait included */
	uint64_t s_intents_done;
	uint64_t s_lease_grants;      /* lease records made */
	uint64_t s_lease_pushes;      /* invalidations and revokes queued to clients */
	uint64_t s_lease_revokes;     /* times a full table revoked every lease */
};

#endif
