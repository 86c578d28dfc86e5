/*
 * One member of a replica group's log (docs/DESIGN.md, "Replication"):
 * leader election, the replicated log, snapshots and membership come from
 * libraft (the C Raft library of dqlite and LXD, Debian's libraft-dev),
 * never from code of ours.  This file gives the server what it needs of it
 * and nothing more: propose an entry, learn when a majority has it and it
 * was applied here, ask who leads.
 *
 * libraft runs on libuv.  The member's uv loop is embedded in the caller's
 * orch_ev loop (its backend fd watched, its next timeout a timer), so that
 * every callback, the state machine's apply among them, runs on the loop
 * thread like any other handler: the state machine needs no lock of its
 * own.  libuv's thread pool does the log's disk writes (O_DIRECT, AIO).
 *
 * The state machine (struct orch_repl_fsm) must be deterministic: every
 * member applies the same entries in the same order and must reach the
 * same state.  Entries are applied once per start beyond the last
 * snapshot; libraft does not store how far a member applied, so a state
 * machine that persists its own state records the index of each entry it
 * applied and skips those at or below it (the index is passed in).
 *
 * An apply that fails (returns -errno) takes this member out of the group:
 * libraft 0.15 makes it unavailable (no votes, no elections, nothing more
 * applied, the proposer not called back) until it is restarted, and a
 * restart applies the entry again; it never skips it.
 *
 * Errors: 0 or -errno, and two of our own (below).  Threads: loop thread
 * only.  The process must ignore SIGPIPE: libuv writes to peers with
 * write(2), and a peer that closed would kill it.  Floors: uses common and
 * net; group (the namespace's replica group) uses it.
 */
#ifndef ORCH_REPL_REPL_H
#define ORCH_REPL_REPL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct orch_ev;
struct orch_repl;

/* Not the leader: nothing was proposed (orch_repl_status says who leads). */
#define ORCH_REPL_ENOTLEADER (-EREMOTE)
/*
 * Leadership was lost before the entry was known to be applied: it may
 * still commit (under the next leader) or not.  A retry must be idempotent.
 */
#define ORCH_REPL_ELOST (-ECONNABORTED)

#define ORCH_REPL_MEMBERS_MAX 5
#define ORCH_REPL_ADDR_MAX 64

struct orch_repl_member {
	uint64_t id;                       /* > 0, unique in the group */
	char addr[ORCH_REPL_ADDR_MAX];     /* "IPv4:port" of its log's transport */
};

struct orch_repl_fsm {
	void *arg;
	/*
	 * Applies entry @index (contiguous from the last snapshot's).  What it
	 * returns (0 or -errno, deterministic) and *result reach the proposer
	 * on the leader; *result is the FSM's to free on the other members
	 * (this layer passes it on and forgets it there).
	 */
	int (*apply)(void *arg, uint64_t index, const void *buf, size_t len, void **result);
	/* Its whole state, in *buf (malloc'd; this layer frees it). */
	int (*snapshot)(void *arg, void **buf, size_t *len);
	/* Replaces its whole state with a snapshot's. */
	int (*restore)(void *arg, const void *buf, size_t len);
};

struct orch_repl_cfg {
	uint64_t id;                                   /* this member */
	struct orch_repl_member members[ORCH_REPL_MEMBERS_MAX];
	unsigned int nmembers;                         /* the initial voters */
	const char *dir;                               /* the log's directory (made if absent) */
	/*
	 * Bootstrap the group with @members if @dir holds no log yet.  Only
	 * the initial members do, once; a member that joins later, or whose
	 * directory was wiped, starts empty and is caught up by the leader.
	 */
	bool bootstrap;
	unsigned int election_ms;        /* 0: 1000; randomized to 1x..2x by libraft */
	unsigned int heartbeat_ms;       /* 0: election_ms / 10 */
	unsigned int snapshot_every;     /* entries between snapshots; 0: 1024 */
	unsigned int snapshot_keep;      /* entries kept behind a snapshot; 0: 128 */
	/*
	 * How long a leader waits for a member to install the snapshot it sent
	 * before it sends again; 0: libraft's 30 s.  A lost reply stalls that
	 * member this long.
	 */
	unsigned int snapshot_timeout_ms;
};

/* Starts this member on @ev; 0 or -errno (logged with libraft's reason). */
int orch_repl_open(struct orch_ev *ev, const struct orch_repl_cfg *cfg,
		   const struct orch_repl_fsm *fsm, struct orch_repl **out);
/*
 * Stops the member: waits (running its uv loop, not @ev) until libraft
 * closed its files and sockets.  Proposals not applied yet are called back
 * with -ESHUTDOWN (or ORCH_REPL_ELOST).  NULL is a no-op.
 */
void orch_repl_close(struct orch_repl *r);

/*
 * @done(arg, error, result) when the entry is committed and applied here,
 * with apply's return and result; or with ORCH_REPL_ELOST / -ESHUTDOWN.
 * Returns 0 (@done will be called) or -errno (it will not):
 * ORCH_REPL_ENOTLEADER on a member that is not the leader, -EFBIG past
 * ORCH_REPL_ENTRY_MAX bytes (entry.h).
 */
typedef void (*orch_repl_done_fn)(void *arg, int error, void *result);
int orch_repl_propose(struct orch_repl *r, const void *buf, size_t len, orch_repl_done_fn done,
		      void *arg);
/* The same for an entry made of the @n parts of @iov, framed without joining them first. */
int orch_repl_proposev(struct orch_repl *r, const struct iovec *iov, unsigned int n,
		       orch_repl_done_fn done, void *arg);
/*
 * @done once every entry before it is applied here, which, after a new
 * leader is elected, is what makes its reads current (libraft 0.15 has no
 * read index and appends no entry of its own on election).
 */
int orch_repl_barrier(struct orch_repl *r, orch_repl_done_fn done, void *arg);

/*
 * Hands leadership to member @id (libraft's raft_transfer: it catches @id
 * up, then tells it to stand for election at once).  0 once asked, or
 * -errno: ORCH_REPL_ENOTLEADER, -EBUSY while a transfer is under way.
 * The outcome shows in orch_repl_status (this member steps down).
 */
int orch_repl_transfer(struct orch_repl *r, uint64_t id);

enum orch_repl_role {
	ORCH_REPL_UNAVAILABLE, ORCH_REPL_FOLLOWER, ORCH_REPL_CANDIDATE, ORCH_REPL_LEADER
};
const char *orch_repl_role_name(enum orch_repl_role role);

struct orch_repl_status {
	enum orch_repl_role role;
	uint64_t term;
	uint64_t leader_id;          /* 0: none known */
	char leader_addr[ORCH_REPL_ADDR_MAX];
	uint64_t last_index;         /* in this member's log */
	uint64_t commit_index;       /* known committed */
	uint64_t applied_index;      /* applied to the state machine here */
	uint64_t damaged;            /* entries that failed their check here (not applied) */
};
void orch_repl_status(struct orch_repl *r, struct orch_repl_status *st);

#endif
