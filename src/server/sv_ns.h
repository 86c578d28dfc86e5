/*
 * Changes of the namespace, made directly or through the server's replica
 * group (docs/DESIGN.md, "The server on the group").
 *
 * Without a group (no log_address: every cluster of today), a change runs
 * at once, in its handler's own transactions, exactly as before.  With
 * one, a change runs on the leader inside the group's next capture
 * (src/group): its transactions are savepoints of the capture, and what it
 * would do outside the namespace waits for its entry to be applied:
 *  - every reply it makes is kept (sv_reply encodes it: sv->s_hold) and
 *    leaves once the entry is applied, after the pushes its changes make;
 *  - what it defers (sv_ns_defer: the start of an intent) runs then;
 *  - an entry that never applies answers the request with an error and
 *    tells each deferred action, which drops its work.
 * Ground floor: above sv_lease and sv_req.  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_NS_H
#define ORCH_SERVER_SV_NS_H

#include <stdbool.h>
#include <stddef.h>

#include "server/sv.h"

struct sv_req;
struct orch_msg;

/*
 * CL2SV_VOUCH: answered once a barrier proposed after it arrived is applied
 * here (this member led after the request came), at once without a group
 * of several members; NOTLEADER from a member that does not lead.
 */
int sv_ns_vouch(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);

/*
 * Opens the server's group if its config gives a log_address; 0 or -errno
 * with a one-line reason in @err.  Before serving, after the lease table
 * (it takes the namespace's change hook).  A group of one: returns once
 * this member leads.  A larger one: returns at once; the member serves
 * (sv_ns_serving) from when it leads with every change applied, and then
 * @on_lead runs; when it stops leading it sets sv->s_restart and stops
 * the loop.
 */
int sv_ns_init(struct sv_server *sv, void (*on_lead)(struct sv_server *sv), char *err,
	       size_t errlen);
/*
 * Closes the group: changes in flight are answered, and every change asked
 * from now on is refused (-ESHUTDOWN), none made beside the log.  destroy
 * frees what is left, at the very end.
 */
void sv_ns_fini(struct sv_server *sv);
void sv_ns_destroy(struct sv_server *sv);

/* True if the namespace changes through the group. */
bool sv_ns_replicated(const struct sv_server *sv);
/*
 * True if this server answers requests: always, but for a member of a
 * group of more than one that does not lead it (or not yet with every
 * change applied).  Such a member answers ORCH_ENOTLEADER naming
 * sv_ns_leader(): the place of the member that leads, or ORCH_NO_LEADER.
 */
bool sv_ns_serving(const struct sv_server *sv);
uint32_t sv_ns_leader(const struct sv_server *sv);
/*
 * True for a leader that serves reads but takes no change yet: the
 * leader before it may still serve until libraft has stepped it down
 * (sv_ns.c, ns_promoted).  It answers changes NOTLEADER naming itself.
 */
bool sv_ns_changes_wait(const struct sv_server *sv);
/* The libraft term this member serves in as leader; 0 if it does not serve. */
uint64_t sv_ns_term(const struct sv_server *sv);
/* True if this member is a follower of member @member (a place) in @term. */
bool sv_ns_follows(const struct sv_server *sv, uint32_t member, uint64_t term);
/* Hands the group's leadership to member @member (orch_repl_transfer); 0 or -errno. */
int sv_ns_transfer(struct sv_server *sv, uint32_t member);

/*
 * A change for request @r: @fn(sv, r, arg) handles it, as a handler does
 * (answers @r, hands it on, or keeps it and returns -EREMOTE).  Then
 * @done(sv, r, arg, rc, error) runs with @fn's return @rc, and @error 0
 * if the change is applied, else why not: then sv_ns answered @r with
 * @error and @rc is 0.  @r is valid in @done only if @rc is -EREMOTE.
 * Direct: both run now.  Through the group: later, @fn inside a capture.
 * -errno if the group takes no change now (not the leader, shutting
 * down): nothing ran, @r is the caller's.
 */
/*
 * @rc in @done of a request sent exactly once (r_seq) that the group had
 * applied already (a client's retry): @fn did not run now, and @done must
 * answer @r from the namespace as its first run would have.
 */
#define SV_NS_REPLAYED 1
typedef int (*sv_ns_fn)(struct sv_server *sv, struct sv_req *r, void *arg);
typedef void (*sv_ns_done_fn)(struct sv_server *sv, struct sv_req *r, void *arg, int rc,
			      int error);
int sv_ns_submit(struct sv_server *sv, struct sv_req *r, sv_ns_fn fn, sv_ns_done_fn done,
		 void *arg);

/*
 * A change not made for a request of its own (an intent's step, an
 * orphan's free): @fn(sv, arg) makes it (0 or -errno; a failed one
 * changes nothing), on behalf of @acting if not NULL (its reply waits
 * for the pushes' acknowledgements).  @done(sv, arg, result) then, with
 * @fn's return or why the change is not there.  Direct: both now.
 * Through the group: later, @fn inside a capture, where every reply it
 * makes is kept until the entry is applied.  -errno: nothing runs.
 */
typedef int (*sv_ns_change_fn)(struct sv_server *sv, void *arg);
typedef void (*sv_ns_change_done_fn)(struct sv_server *sv, void *arg, int result);
int sv_ns_change(struct sv_server *sv, struct sv_req *acting, sv_ns_change_fn fn,
		 sv_ns_change_done_fn done, void *arg);

/* Inside a change in the capture: its changes are pushed on behalf of @r (if none was named). */
void sv_ns_acting(struct sv_server *sv, struct sv_req *r);

/*
 * Inside a change running through the group: @fn(sv, arg, error) runs once
 * its entry is applied (@error 0) or known not to be (@error < 0: drop the
 * work; sv_ns answers the request).  Returns 1 (deferred); 0 outside such
 * a change (the caller acts at once); -ENOMEM (the caller drops the work
 * and the change fails: nothing of it is kept).
 */
int sv_ns_defer(struct sv_server *sv, void (*fn)(struct sv_server *sv, void *arg, int error),
		void *arg);

/* True while a change runs inside the group's capture (sv_ns_defer defers). */
bool sv_ns_capturing(const struct sv_server *sv);
/* Fails the change running inside the capture with @error: nothing of it is kept. */
void sv_ns_fail(struct sv_server *sv, int error);

/* Counters for stats (loop thread); all 0 without a group. */
struct sv_ns_counts {
	bool replicated;
	bool serving;           /* answers requests (sv_ns_serving) */
	uint64_t promotions;    /* times this member started serving as leader */
	uint64_t vouches;       /* CL2SV_VOUCH that went through the group */
	uint64_t changes_wait_ms; /* serving, but changes wait this much longer */
	uint64_t changes;       /* submitted through the group */
	uint64_t entries;       /* proposed */
	uint64_t unlogged;      /* changed nothing, answered without an entry */
	uint64_t batch_max;     /* most changes in one entry */
	uint64_t failed;        /* answered with an error: their entry did not apply */
	const char *role;       /* this member's (repl.h), a constant string */
	uint64_t term;
	uint64_t last_index;    /* of its log */
	uint64_t commit_index;
	uint64_t applied_index;
};
void sv_ns_counts(const struct sv_server *sv, struct sv_ns_counts *out);

#endif
