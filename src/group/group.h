/*
 * The namespace of one replica group (docs/DESIGN.md, "The namespace as
 * the group's state machine"): the group's log (src/repl) carrying the
 * namespace's changes (src/meta, changes.c).
 *
 * On the leader, orch_group_submit runs a caller's operation on the
 * namespace inside a capture; the changes of every operation submitted
 * while the previous entry was in flight go into one entry; each
 * operation's @done runs once that entry is committed and applied here,
 * with the operation's own result.  Every member applies every entry to
 * its database with the entry's index.  Before the first entry of a new
 * term the leader commits a barrier, so that it captures on top of every
 * entry committed before it led.
 *
 * A member whose database refuses an entry (it diverged, or the entry is
 * damaged) or cannot apply it now (a full disk) leaves the group (libraft
 * makes it unavailable until restarted, and never skips the entry) and
 * answers -EIO to every submission; one that diverged must be rebuilt from
 * a snapshot.
 *
 * Threads: the loop thread of @ev only.  Floors: uses meta and repl; the
 * server will use it.
 */
#ifndef ORCH_GROUP_GROUP_H
#define ORCH_GROUP_GROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "repl/repl.h"

struct orch_ev;
struct orch_meta;
struct orch_group;

/* Entries of one capture at most: a bound on the work one entry redoes. */
#define ORCH_GROUP_BATCH_MAX 256

/*
 * Opens the group's member on @ev over the namespace @meta (open, and the
 * caller's until orch_group_close).  @cfg as orch_repl_open.
 */
int orch_group_open(struct orch_ev *ev, struct orch_meta *meta,
		    const struct orch_repl_cfg *cfg, struct orch_group **out);
/* Ops submitted and not done are called back with -ESHUTDOWN or ORCH_REPL_ELOST. */
void orch_group_close(struct orch_group *g);

/*
 * An operation on the namespace: any meta calls, run on the leader inside
 * a savepoint of a capture; it returns 0 or -errno (a failed one changes
 * nothing).  Its own transactions (orch_meta_begin, commit, abort) are
 * savepoints inside it; one it leaves open fails it.
 */
typedef int (*orch_group_op_fn)(void *arg, struct orch_meta *m);
/*
 * @result: the operation's return once its entry is applied here; or
 * ORCH_REPL_ENOTLEADER (not run: leadership moved first), ORCH_REPL_ELOST
 * (leadership moved while its entry was in flight: it may or may not have
 * happened), -ESHUTDOWN, -EIO.
 */
typedef void (*orch_group_done_fn)(void *arg, int result);
/* (@done runs inside libraft's callbacks: it may submit, never close the group.) */

/*
 * Who asks, for exactly-once: request @seq (> 0) of client @client (> 0,
 * unique per client instance), whose requests below @done_below have their
 * answers.  The result of every such request is recorded in the entry that
 * applies it; a retry (the same client and seq, on this leader or the
 * next) is answered with the recorded result and not run again.
 */
struct orch_group_req {
	uint64_t client;
	uint64_t seq;
	uint64_t done_below;
};

/*
 * A group of one member answers ops whose capture changed nothing
 * without proposing an entry (nobody else can have changed the state
 * they saw).
 *
 * Queues @op; 0 (@done will run, never from inside this call) or -errno
 * (it will not): ORCH_REPL_ENOTLEADER, -EIO (this member diverged),
 * -ESHUTDOWN, -EINVAL (a @req with client or seq 0).  @req NULL: no
 * exactly-once (a retry after ORCH_REPL_ELOST may apply it twice).
 */
int orch_group_submit(struct orch_group *g, const struct orch_group_req *req,
		      orch_group_op_fn op, orch_group_done_fn done, void *arg);

/*
 * Inside an op submitted with a @req: its retries are answered with
 * @result rather than with the op's return (an op that answers its own
 * errors and returns 0); ORCH_GROUP_NOT_RECORDED: nothing is recorded (it
 * did not happen and will be submitted again, under the same @req).
 */
#define ORCH_GROUP_NOT_RECORDED INT_MIN
void orch_group_record(struct orch_group *g, int result);

/*
 * A read of the namespace that sees every change applied anywhere in the
 * group before it was asked: @op runs on this member (outside any
 * capture; it must not change anything) once a barrier proposed after
 * this call is applied here, which a majority of the current term must
 * accept; its return reaches @done.  Reads asked while a barrier is in
 * flight share the next one.  A member cut off from the majority answers
 * none (ORCH_REPL_ENOTLEADER once it steps down), never an old state.
 * Same returns as orch_group_submit.
 */
int orch_group_read(struct orch_group *g, orch_group_op_fn op, orch_group_done_fn done,
		    void *arg);

/*
 * The namespace's change hook (orch_meta_set_change_hook), as the group
 * runs it: the group takes @meta's hook at open, and the changes an entry
 * makes reach @fn on the leader once the entry is applied there, never
 * while they are only captured: each operation's changes, with its @arg as
 * @op_arg, just before its @done (NULL once that operation was answered
 * otherwise).  Changes made outside the group reach it at once, with
 * @op_arg NULL.  A change a failed operation rolled back is reported all
 * the same (a holder refetches).
 */
typedef void (*orch_group_change_fn)(void *arg, void *op_arg, uint64_t h, const char *name,
				     size_t namelen);
void orch_group_set_change_hook(struct orch_group *g, orch_group_change_fn fn, void *arg);

struct orch_group_stats {
	uint64_t entries;       /* proposed by this member */
	uint64_t skipped;       /* captures that changed nothing, answered without an entry */
	uint64_t ops;           /* in those entries */
	uint64_t batch_max;     /* most ops in one entry */
	uint64_t applied;       /* entries applied here (replays skipped) */
	uint64_t barriers;      /* at the start of a term */
	uint64_t retries;       /* answered from the recorded result */
	uint64_t reads;         /* run after their barrier */
	uint64_t read_barriers; /* barriers proposed for reads */
	bool diverged;
};
void orch_group_stats(const struct orch_group *g, struct orch_group_stats *st);
struct orch_repl *orch_group_repl(struct orch_group *g);

#endif
