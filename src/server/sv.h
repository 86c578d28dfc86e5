/*
 * orchardd internals shared by the server's files (private header).
 *
 * One event-loop thread owns every connection and the namespace database;
 * requests are handled to completion on it, except:
 *  - data writes (CL2SV_WRITE, SV2SV_WRITE), queued to the store's writer
 *    thread, which batches them into few transactions and hands each
 *    completion back to the loop (sv_write_submit);
 *  - fsync requests, which wait for the flusher thread (flush.c) to make the
 *    store and the WAL durable, sharing one flush among all waiters;
 *  - cross-server operations (intent.c), which write an intent record with
 *    their local change, ask the peer server, and finish when it answers.
 * The store's other calls (read, truncate, punch, delete) are synchronous:
 * they wait on the loop thread, behind the writes queued before them.
 * No lock is held across network I/O and no transaction stays open across a
 * loop iteration.
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

#define SV_MSG_TYPES_MAX 64

struct sv_intents;
struct sv_leases;
struct sv_peers;
struct sv_admin;
struct sv_flusher;
struct sv_write;
struct sv_worker;
struct sv_writers;
struct sv_req;

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

/* The open client connections (sv_conns.c).  Loop thread only. */
struct sv_conns {
	struct orch_conn **cs_v;      /* not referenced: each leaves at its close */
	size_t cs_n;
	size_t cs_cap;
};

struct sv_server {
	struct orch_cfg s_cfg;
	unsigned int s_index;         /* our position in the config */
	struct orch_ev *s_ev;
	struct orch_meta *s_meta;
	struct orch_store *s_store;
	int s_listen_fd;
	struct orch_conn_ops s_client_ops; /* of accepted connections (main.c) */
	struct sv_conns s_conns;      /* the open ones */
	struct sv_peers *s_peers;     /* the transport to the others (sv_peer.c) */
	struct sv_leases *s_leases;   /* the lease table (sv_lease.c); NULL: leases off */
	struct sv_flusher *s_flusher;
	struct sv_writes s_writes;
	struct sv_worker *s_worker;   /* the data worker (sv_work.c); NULL: jobs run on the loop */
	struct sv_intents *s_intents;  /* the intent machine (intent.c) */
	struct sv_writers *s_writers;  /* the writers of files held here (sv_writers.c) */
	struct sv_admin *s_admin;     /* the admin thread (sv_admin.c); NULL: not running */
	uint64_t s_started_ms;
	/* Stats, loop thread only. */
	uint16_t s_types[SV_MSG_TYPES_MAX];
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

/* --- Requests from other servers (sv_sv.c) ----------------------------------------------- */

/*
 * Handles a SV2SV_* request from another server.  0, or -EREMOTE with @r
 * kept: the sticky rule needs an owner (sv_req_need_owner).
 */
int sv_sv_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);

/* --- Durability (flush.c) -------------------------------------------------------------- */

int sv_flusher_start(struct sv_server *sv);
void sv_flusher_stop(struct sv_server *sv);
/* Runs on the loop thread after a flush, with its status (0: durable). */
typedef void (*sv_flushed_fn)(struct sv_server *sv, void *arg, int error);
/*
 * Calls @fn once everything committed or written so far is durable: after a
 * flush that started after this call (it may have to wait for the one in
 * progress).  Also called, with an error, when the flusher stops: @fn must
 * cope with the loop and the peers being gone.  Any thread.
 */
void sv_flusher_after(struct sv_server *sv, sv_flushed_fn fn, void *arg);
/* Answers @r once everything acknowledged so far is durable. */
void sv_flusher_wait(struct sv_server *sv, struct sv_req *r);
/*
 * Answers a peer's intent step @r with @m once what it changed here is
 * durable (a flush later): the coordinator acts on the answer, so a power
 * cut here must not undo it afterwards.  @m is copied; it must carry no
 * pointers (names, data).  Frees @r.
 */
void sv_flusher_reply(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* Notes that a commit or a data write happened (the interval flush is due). */
void sv_flusher_dirty(struct sv_server *sv);

#endif
