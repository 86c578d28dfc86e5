/* Changes of the namespace, directly or through the group.  See sv_ns.h. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fault.h"
#include "common/log.h"
#include "common/time.h"
#include "group/group.h"
#include "server/sv_lease.h"
#include "server/sv_ns.h"
#include "server/sv_req.h"

/* Something a change does outside the namespace once its entry is applied. */
struct ns_deferred {
	struct ns_deferred *d_next;
	void (*d_fn)(struct sv_server *sv, void *arg, int error);
	void *d_arg;
};

/* One change through the group, from submit to answer. */
struct ns_op {
	struct sv_server *o_sv;
	struct sv_req *o_req;              /* a request's handler (sv_ns_submit); else NULL */
	struct sv_req *o_acting;           /* on whose behalf its changes are pushed */
	sv_ns_fn o_fn;                     /* sv_ns_submit's ... */
	sv_ns_done_fn o_done;
	sv_ns_change_fn o_change_fn;       /* ... or sv_ns_change's */
	sv_ns_change_done_fn o_change_done;
	void *o_arg;
	int o_rc;                          /* the function's return */
	bool o_ran;                        /* ns_op_run ran, and returned ... */
	int o_ret;                         /* ... this to the group */
	int o_fail;                        /* a deferral failed: the change must not stay */
	struct ns_deferred *o_deferred, **o_deferred_tail;
	struct sv_req *o_held;             /* replies made in the capture, kept */
};

struct sv_ns {
	struct orch_group *n_group;        /* NULL once closed: changes are refused */
	struct ns_op *n_capturing;         /* the op whose capture runs now */
	uint64_t n_changes;
	uint64_t n_failed;
	/*
	 * A group of more than one member: this member serves while it leads
	 * (n_serving), from the moment a read barrier of its term applied here
	 * (n_promoting until then); a timer watches its role.
	 */
	bool n_multi;
	bool n_serving;
	bool n_promoting;
	struct orch_ev_timer n_watch;
	void (*n_on_lead)(struct sv_server *sv);
	uint64_t n_promotions;
	uint64_t n_vouches;                /* CL2SV_VOUCH asked of the group */
	uint64_t n_changes_from_ms;        /* serving: changes are taken from then on */
	/* The term it serves in: a term it left and led again between two looks is left too. */
	uint64_t n_term;
	uint64_t n_kill_at;                /* ORCH_TEST_NS_KILL; 0: off */
	uint64_t n_seq_applied;            /* exactly-once requests applied by this process */
};

bool sv_ns_replicated(const struct sv_server *sv)
{
	return sv->s_ns != NULL;
}

bool sv_ns_serving(const struct sv_server *sv)
{
	return !sv->s_ns || !sv->s_ns->n_multi || sv->s_ns->n_serving;
}

bool sv_ns_changes_wait(const struct sv_server *sv)
{
	return sv->s_ns && sv->s_ns->n_multi && sv->s_ns->n_serving &&
	       orch_time_now_ms() < sv->s_ns->n_changes_from_ms;
}

uint64_t sv_ns_term(const struct sv_server *sv)
{
	return sv->s_ns && sv->s_ns->n_serving ? sv->s_ns->n_term : 0;
}

bool sv_ns_follows(const struct sv_server *sv, uint32_t member, uint64_t term)
{
	struct orch_repl_status rs;

	if (!sv->s_ns || !sv->s_ns->n_group || sv->s_ns->n_serving)
		return false;
	orch_repl_status(orch_group_repl(sv->s_ns->n_group), &rs);
	return rs.role == ORCH_REPL_FOLLOWER && rs.term == term && rs.leader_id == member + 1ull;
}

int sv_ns_transfer(struct sv_server *sv, uint32_t member)
{
	if (!sv->s_ns || !sv->s_ns->n_group)
		return -EINVAL;
	return orch_repl_transfer(orch_group_repl(sv->s_ns->n_group), member + 1ull);
}

uint32_t sv_ns_leader(const struct sv_server *sv)
{
	struct orch_repl_status rs;

	if (!sv->s_ns || !sv->s_ns->n_group)
		return ORCH_NO_LEADER;
	orch_repl_status(orch_group_repl(sv->s_ns->n_group), &rs);
	/* Member ids are places in the group plus one (sv_ns_init). */
	if (rs.leader_id == 0 || rs.leader_id > sv->s_cfg.replicas)
		return ORCH_NO_LEADER;
	/* Leading but not serving yet: the sender waits a little, it does not spin on us. */
	if (rs.leader_id == sv->s_member + 1 && !sv_ns_serving(sv))
		return ORCH_NO_LEADER;
	return (uint32_t)(rs.leader_id - 1);
}

bool sv_ns_capturing(const struct sv_server *sv)
{
	return sv->s_ns && sv->s_ns->n_capturing;
}

void sv_ns_fail(struct sv_server *sv, int error)
{
	struct ns_op *op = sv->s_ns ? sv->s_ns->n_capturing : NULL;

	if (op && !op->o_fail)
		op->o_fail = error;
}

void sv_ns_acting(struct sv_server *sv, struct sv_req *r)
{
	struct ns_op *op = sv->s_ns ? sv->s_ns->n_capturing : NULL;

	if (op && !op->o_acting)
		op->o_acting = r;
}

int sv_ns_defer(struct sv_server *sv, void (*fn)(struct sv_server *sv, void *arg, int error),
		void *arg)
{
	struct ns_op *op = sv->s_ns ? sv->s_ns->n_capturing : NULL;
	struct ns_deferred *d;

	if (!op)
		return 0;
	d = malloc(sizeof(*d));
	if (!d) {
		sv_ns_fail(sv, -ENOMEM);
		return -ENOMEM;
	}
	*d = (struct ns_deferred){ .d_fn = fn, .d_arg = arg };
	*op->o_deferred_tail = d;
	op->o_deferred_tail = &d->d_next;
	return 1;
}

/* In the group's capture: the function runs, every reply it makes kept. */
static int ns_op_run(void *arg, struct orch_meta *m)
{
	struct ns_op *op = arg;
	struct sv_server *sv = op->o_sv;
	struct sv_req *prev_acting = sv->s_acting;

	(void)m;
	sv->s_ns->n_capturing = op;
	sv->s_hold = &op->o_held;
	if (op->o_req)
		op->o_req->r_hold_on = &op->o_held; /* until done, wherever it is answered */
	if (op->o_acting)
		sv->s_acting = op->o_acting;
	if (op->o_fn)
		op->o_rc = op->o_fn(sv, op->o_req, op->o_arg);
	else
		op->o_rc = op->o_change_fn(sv, op->o_arg);
	/*
	 * A request sent exactly once: a retry is answered with the status it
	 * was answered with here; one kept for an owner fetch did not happen
	 * and comes back under the same ids.
	 */
	if (op->o_fn && op->o_req && op->o_req->r_seq) {
		if (op->o_rc == -EREMOTE)
			orch_group_record(sv->s_ns->n_group, ORCH_GROUP_NOT_RECORDED);
		else if (op->o_req->r_held_set && sv_req_held_status(op->o_req))
			orch_group_record(sv->s_ns->n_group, sv_req_held_status(op->o_req));
	}
	sv->s_acting = prev_acting;
	sv->s_hold = NULL;
	sv->s_ns->n_capturing = NULL;
	op->o_ran = true;
	/*
	 * A deferral that could not be recorded: its work is dropped, so is
	 * the change.  A change that failed changes nothing (a handler answers
	 * its own errors, and returns 0 or -EREMOTE having changed nothing).
	 */
	if (op->o_fail)
		op->o_ret = op->o_fail;
	else
		op->o_ret = op->o_fn ? 0 : op->o_rc;
	return op->o_ret;
}

/*
 * The group's answers that are not the namespace's own, as a client hears
 * them.  Nothing was done (not the leader), or a request sent exactly once
 * (@seq) whose fate the next leader knows: NOTLEADER, and the client asks
 * the leader, which answers a request it applied from its record.
 */
static int ns_error(int error, bool seq)
{
	if (error == ORCH_REPL_ENOTLEADER ||
	    (seq && (error == ORCH_REPL_ELOST || error == -ESHUTDOWN)))
		return -ORCH_ENOTLEADER;
	if (error == ORCH_REPL_ELOST || error == -ESHUTDOWN) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "namespace change not applied: %s",
				   error == ORCH_REPL_ELOST ? "leadership moved while it was in flight"
				   : "shutting down");
		return -EIO;
	}
	return error;
}

/* What the client of @r hears of the group's @result, the server's @error otherwise. */
static int ns_reply_error(const struct sv_req *r, int result, int error)
{
	return r->r_seq ? ns_error(result, true) : error;
}

/* The group's own refusals, as opposed to a status an op recorded. */
static bool ns_group_failure(int error)
{
	return error == ORCH_REPL_ENOTLEADER || error == ORCH_REPL_ELOST ||
	       error == -ESHUTDOWN || error == -EIO || error == -ENOMEM || error == -EFBIG;
}

/* Runs (and frees) @op's deferred actions, telling each @error. */
static void ns_op_deferred(struct sv_server *sv, struct ns_op *op, int error)
{
	while (op->o_deferred) {
		struct ns_deferred *d = op->o_deferred;

		op->o_deferred = d->d_next;
		d->d_fn(sv, d->d_arg, error);
		free(d);
	}
}

/*
 * The entry is applied with @op's changes (@result 0); or @op failed and
 * changed nothing (@result is its own return); or the group did not apply
 * it (anything else).  The replies kept leave (with the error, if the
 * change is not there), then what was deferred runs.
 */
static void ns_op_done(void *arg, int result)
{
	struct ns_op *op = arg;
	struct sv_server *sv = op->o_sv;
	struct sv_req *req = op->o_fn ? op->o_req : NULL;
	bool ran = op->o_ran;
	int error;

	if (!result)
		error = 0;
	else if (ran && result == op->o_ret)
		error = result;
	else if (!ran && req && req->r_seq && !ns_group_failure(result))
		error = result; /* a retry, answered with the status recorded at its first try */
	else
		error = ns_error(result, false);
	/* Not answered yet (it cannot be gone: a reply would have been kept): answers leave. */
	if (ran && req)
		req->r_hold_on = NULL;
	/* The test hook: a leader that dies between applying a change and answering it. */
	if (ran && req && req->r_seq && !error && sv->s_ns->n_kill_at &&
	    ++sv->s_ns->n_seq_applied == sv->s_ns->n_kill_at) {
		ORCH_WARN("ORCH_TEST_NS_KILL: killed after applying request seq=%" PRIu64,
			  req->r_seq);
		raise(SIGKILL);
	}
	while (op->o_held) {
		struct sv_req *r = op->o_held;

		op->o_held = r->r_held_next;
		sv_req_release(r, error ? ns_reply_error(r, result, error) : 0);
	}
	/* Not run: nobody answered it; a retry the group answered from its record is replayed. */
	if (!ran && req) {
		if (!error) {
			if (op->o_done)
				op->o_done(sv, req, op->o_arg, SV_NS_REPLAYED, 0);
			free(op);
			return;
		}
		sv_reply_status(req, ns_reply_error(req, result, error));
	}
	ns_op_deferred(sv, op, error);
	if (error)
		sv->s_ns->n_failed++;
	if (op->o_fn) {
		int rc = op->o_rc;

		if (error && rc == -EREMOTE) {
			/* Kept for an owner fetch: not done, so answered here. */
			sv_reply_status(op->o_req, ns_reply_error(op->o_req, result, error));
		}
		if (error)
			rc = 0;
		if (op->o_done)
			op->o_done(sv, op->o_req, op->o_arg, rc, error);
	} else if (op->o_change_done) {
		op->o_change_done(sv, op->o_arg, error);
	}
	free(op);
}

/* Queues @op in the group, or runs it at once without one. */
static int ns_op_submit(struct sv_server *sv, struct ns_op *op)
{
	struct orch_group_req req;
	bool numbered;
	int error;

	/*
	 * Closed (stopping): a change made now beside the log would be missing
	 * from it, and the next start's replay would not apply.
	 */
	if (!sv->s_ns->n_group)
		return -ESHUTDOWN;
	op->o_sv = sv;
	op->o_deferred_tail = &op->o_deferred;
	numbered = op->o_fn && op->o_req && op->o_req->r_seq;
	if (numbered)
		req = (struct orch_group_req){ .client = op->o_req->r_client,
					       .seq = op->o_req->r_seq,
					       .done_below = op->o_req->r_done_below };
	error = orch_group_submit(sv->s_ns->n_group, numbered ? &req : NULL, ns_op_run,
				  ns_op_done, op);
	if (error)
		return ns_error(error, op->o_req && op->o_req->r_seq);
	sv->s_ns->n_changes++;
	return 0;
}

int sv_ns_submit(struct sv_server *sv, struct sv_req *r, sv_ns_fn fn, sv_ns_done_fn done,
		 void *arg)
{
	struct ns_op *op;
	int rc, error;

	if (!sv->s_ns) {
		rc = fn(sv, r, arg);
		if (done)
			done(sv, r, arg, rc, 0);
		return 0;
	}
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	*op = (struct ns_op){ .o_req = r, .o_acting = r, .o_fn = fn, .o_done = done, .o_arg = arg };
	error = ns_op_submit(sv, op);
	if (error)
		free(op);
	return error;
}

int sv_ns_change(struct sv_server *sv, struct sv_req *acting, sv_ns_change_fn fn,
		 sv_ns_change_done_fn done, void *arg)
{
	struct sv_req *prev_acting = sv->s_acting;
	struct ns_op *op;
	int rc, error;

	if (!sv->s_ns) {
		if (acting)
			sv->s_acting = acting;
		rc = fn(sv, arg);
		sv->s_acting = prev_acting;
		if (done)
			done(sv, arg, rc);
		return 0;
	}
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	*op = (struct ns_op){ .o_acting = acting, .o_change_fn = fn, .o_change_done = done,
			      .o_arg = arg };
	error = ns_op_submit(sv, op);
	if (error)
		free(op);
	return error;
}

/*
 * The namespace's changes, as the group reports them: on behalf of the
 * request whose change made them (its reply waits for the holders' acks).
 */
static void ns_changed(void *arg, void *op_arg, uint64_t h, const char *name, size_t namelen)
{
	struct sv_server *sv = arg;
	struct ns_op *op = op_arg;
	struct sv_req *prev_acting = sv->s_acting;

	if (op && op->o_acting)
		sv->s_acting = op->o_acting;
	sv_lease_changed(sv, h, name, namelen);
	sv->s_acting = prev_acting;
}

/* How long a starting server waits to lead its group of one (it replays its log first). */
#define NS_LEAD_WAIT_MS 30000

struct ns_lead_wait {
	struct sv_server *w_sv;
	struct orch_ev_timer w_timer;
	uint64_t w_deadline_ms;
	bool w_leads;
};

static void ns_lead_check(void *arg)
{
	struct ns_lead_wait *w = arg;
	struct orch_repl_status rs;

	orch_repl_status(orch_group_repl(w->w_sv->s_ns->n_group), &rs);
	w->w_leads = rs.role == ORCH_REPL_LEADER && rs.applied_index >= rs.commit_index;
	if (w->w_leads || orch_time_now_ms() >= w->w_deadline_ms) {
		orch_ev_stop(w->w_sv->s_ev);
		return;
	}
	orch_ev_timer_arm(w->w_sv->s_ev, &w->w_timer, 5, ns_lead_check, w);
}

/*
 * Runs the loop until this member leads with its log applied: the group of
 * one elects itself once its log is loaded.  A signal (the loop stopped by
 * it) or the deadline: -EINTR or -ETIMEDOUT.
 */
static int ns_wait_to_lead(struct sv_server *sv)
{
	struct ns_lead_wait w = { .w_sv = sv,
				  .w_deadline_ms = orch_time_now_ms() + NS_LEAD_WAIT_MS };

	orch_ev_timer_arm(sv->s_ev, &w.w_timer, 0, ns_lead_check, &w);
	orch_ev_run(sv->s_ev);
	orch_ev_timer_cancel(sv->s_ev, &w.w_timer);
	if (w.w_leads) {
		orch_ev_reset_stop(sv->s_ev);
		return 0;
	}
	/* Stopped by a signal: the loop stays stopped, and the server stops. */
	return orch_time_now_ms() >= w.w_deadline_ms ? -ETIMEDOUT : -EINTR;
}

/* How often a member of a larger group looks at its role. */
#define NS_WATCH_MS 20
/* The group's election timeout (libraft's base; followers wait 1x..2x of it). */
#define NS_ELECTION_MS 1000
/*
 * A leader that sent a member a snapshot goes back to probing it after
 * this long (libraft: 30 s).  A member whose directory was wiped and made
 * again answers the snapshot with an index below what the leader last
 * knew it had, and libraft 0.15 keeps waiting for a reply it already got:
 * the member stalls until this passes.  A namespace snapshot that takes
 * longer to install is sent again (wasted, not wrong).
 */
#define NS_SNAPSHOT_RESEND_MS 5000
/* What a deposed leader takes to stop serving once libraft steps it down. */
#define NS_STEP_DOWN_MARGIN_MS 200
/*
 * A mount uses what a group leased to it up to ORCH_VOUCH_TERM_MS after
 * sending a vouch that a barrier of the leader's term answered, so before
 * that leader last heard from a majority; a leader elected after it takes
 * changes two election timeouts plus the margin after that at the
 * earliest.  Half a second to spare for clocks and schedulers.
 */
_Static_assert(ORCH_VOUCH_TERM_MS + 500 <= 2 * NS_ELECTION_MS + NS_STEP_DOWN_MARGIN_MS,
	       "a vouch must end before a new leader takes changes");

static int ns_noop(void *arg, struct orch_meta *m)
{
	(void)arg;
	(void)m;
	return 0;
}

/*
 * A vouch's barrier is applied, or the group could not take it.  It
 * vouches only for the term this member serves in: one that left it meanwhile
 * (the watcher restarts it) vouches for nothing.  A vouch changes nothing,
 * so every failure is NOTLEADER: the client asks the next member.
 */
static void ns_vouched(void *arg, int result)
{
	struct sv_req *r = arg;
	struct sv_ns *ns = r->r_sv->s_ns;
	struct orch_repl_status rs;

	if (!result && ns->n_group) {
		orch_repl_status(orch_group_repl(ns->n_group), &rs);
		if (!ns->n_serving || rs.term != ns->n_term)
			result = ORCH_REPL_ENOTLEADER;
	}
	sv_reply_status(r, result || !ns->n_group ? -ORCH_ENOTLEADER : 0);
}

int sv_ns_vouch(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	(void)m;
	if (!sv->s_ns || sv->s_cfg.replicas <= 1) {
		sv_reply_status(r, 0);
		return 0;
	}
	if (!sv->s_ns->n_group) {
		sv_reply_status(r, -ORCH_ENOTLEADER);
		return 0;
	}
	sv->s_ns->n_vouches++;
	if (orch_group_read(sv->s_ns->n_group, ns_noop, ns_vouched, r))
		sv_reply_status(r, -ORCH_ENOTLEADER);
	return 0;
}

/* The barrier of its term is applied here: this member has every change, and serves. */
static void ns_promoted(void *arg, int result)
{
	struct sv_server *sv = arg;
	struct sv_ns *ns = sv->s_ns;
	struct orch_repl_status rs;

	ns->n_promoting = false;
	if (result || !ns->n_group)
		return; /* not leading any more, or closing: the watcher decides */
	orch_repl_status(orch_group_repl(ns->n_group), &rs);
	ns->n_serving = true;
	ns->n_term = rs.term;
	ns->n_promotions++;
	sv->s_leader = sv->s_member;
	/*
	 * The leader before may still serve, cut off from its group: libraft
	 * steps a leader down when an election timeout passed without hearing
	 * from a majority, checked once per election timeout, so up to two
	 * after its last contact, while followers elect after one at least.
	 * Reads are served at once (this member has every change); changes
	 * wait one more election timeout, so that none is acknowledged while
	 * a reader of the old leader could still miss it.
	 */
	ns->n_changes_from_ms = orch_time_now_ms() + NS_ELECTION_MS + NS_STEP_DOWN_MARGIN_MS;
	ORCH_NOTICE("leading replica group %u (term %" PRIu64 ", applied %" PRIu64 "): serving",
		    sv->s_index, rs.term, rs.applied_index);
	if (ns->n_on_lead)
		ns->n_on_lead(sv);
}

/*
 * A member that leads starts serving once it has every change; one that
 * served and leads no more stops the server, which starts again as a
 * follower (main.c): nothing it held as leader (leases, writers, intents
 * in flight, replies waiting) may outlive its term.
 */
static void ns_watch(void *arg)
{
	struct sv_server *sv = arg;
	struct sv_ns *ns = sv->s_ns;
	struct orch_repl_status rs;

	if (!ns->n_group)
		return;
	orch_repl_status(orch_group_repl(ns->n_group), &rs);
	sv->s_leader = sv_ns_leader(sv);
	if (ns->n_serving && (rs.role != ORCH_REPL_LEADER || rs.term != ns->n_term)) {
		ORCH_NOTICE("replica group %u: this member does not lead any more (%s, term %"
			    PRIu64 ", served in %" PRIu64 "): restarting as a follower", sv->s_index,
			    orch_repl_role_name(rs.role), rs.term, ns->n_term);
		ns->n_serving = false;
		sv->s_restart = true;
		orch_ev_stop(sv->s_ev);
		return;
	}
	if (!ns->n_serving && !ns->n_promoting && rs.role == ORCH_REPL_LEADER &&
	    orch_group_read(ns->n_group, ns_noop, ns_promoted, sv) == 0)
		ns->n_promoting = true;
	orch_ev_timer_arm(sv->s_ev, &ns->n_watch, NS_WATCH_MS, ns_watch, sv);
}

int sv_ns_init(struct sv_server *sv, void (*on_lead)(struct sv_server *sv), char *err,
	       size_t errlen)
{
	const struct orch_server_cfg *me = sv->s_me;
	struct orch_repl_cfg rc = { .id = sv->s_member + 1, .bootstrap = true,
				    .election_ms = NS_ELECTION_MS,
				    .snapshot_timeout_ms = NS_SNAPSHOT_RESEND_MS };
	char dir[PATH_MAX];
	struct sv_ns *ns;
	int error;

	if (!me->log_address[0])
		return 0;
	if (snprintf(dir, sizeof(dir), "%s/log", me->data_dir) >= (int)sizeof(dir)) {
		snprintf(err, errlen, "'%s': path too long", me->data_dir);
		return -ENAMETOOLONG;
	}
	ns = calloc(1, sizeof(*ns));
	if (!ns)
		return -ENOMEM;
	if (orch_fault_env(ORCH_FAULT_NS_KILL))
		ns->n_kill_at = strtoull(orch_fault_env(ORCH_FAULT_NS_KILL), NULL, 10);
	rc.nmembers = sv->s_cfg.replicas;
	for (unsigned int i = 0; i < rc.nmembers; i++) {
		rc.members[i].id = i + 1;
		snprintf(rc.members[i].addr, sizeof(rc.members[i].addr), "%s",
			 orch_cfg_member(&sv->s_cfg, sv->s_index, i)->log_address);
	}
	rc.dir = dir;
	error = orch_group_open(sv->s_ev, sv->s_meta, &rc, &ns->n_group);
	if (error) {
		snprintf(err, errlen, "cannot start the namespace's log in '%s' at %s: %s", dir,
			 me->log_address, strerror(-error));
		free(ns);
		return error;
	}
	orch_group_set_change_hook(ns->n_group, ns_changed, sv);
	sv->s_ns = ns;
	if (rc.nmembers > 1) {
		/* Serves when it leads; until then it tells clients who does. */
		ns->n_multi = true;
		ns->n_on_lead = on_lead;
		orch_ev_timer_arm(sv->s_ev, &ns->n_watch, 0, ns_watch, sv);
		ORCH_NOTICE("namespace changes go through the log at %s (member %u of replica "
			    "group %u, %u members)", me->log_address, sv->s_member, sv->s_index,
			    rc.nmembers);
		return 0;
	}
	error = ns_wait_to_lead(sv);
	if (error) {
		snprintf(err, errlen, "the namespace's log in '%s' %s", dir,
			 error == -EINTR ? "was not ready when the server was asked to stop"
					 : "did not become ready (its member does not lead)");
		sv_ns_destroy(sv);
		return error;
	}
	ORCH_NOTICE("namespace changes go through the log at %s (a group of one member)",
		    me->log_address);
	return 0;
}

void sv_ns_fini(struct sv_server *sv)
{
	struct sv_ns *ns = sv->s_ns;

	if (!ns || !ns->n_group)
		return;
	if (ns->n_multi)
		orch_ev_timer_cancel(sv->s_ev, &ns->n_watch);
	ns->n_serving = false;
	/* Changes in flight are answered (ESHUTDOWN) while the server still can. */
	orch_group_close(ns->n_group);
	ns->n_group = NULL;
}

void sv_ns_destroy(struct sv_server *sv)
{
	sv_ns_fini(sv);
	free(sv->s_ns);
	sv->s_ns = NULL;
}

void sv_ns_counts(const struct sv_server *sv, struct sv_ns_counts *out)
{
	struct orch_group_stats gs;
	struct orch_repl_status rs;

	memset(out, 0, sizeof(*out));
	if (!sv->s_ns || !sv->s_ns->n_group)
		return;

	orch_group_stats(sv->s_ns->n_group, &gs);
	orch_repl_status(orch_group_repl(sv->s_ns->n_group), &rs);
	out->role = orch_repl_role_name(rs.role);
	out->term = rs.term;
	out->last_index = rs.last_index;
	out->commit_index = rs.commit_index;
	out->applied_index = rs.applied_index;
	out->replicated = true;
	out->serving = sv_ns_serving(sv);
	out->promotions = sv->s_ns->n_promotions;
	out->vouches = sv->s_ns->n_vouches;
	if (sv->s_ns->n_serving && orch_time_now_ms() < sv->s_ns->n_changes_from_ms)
		out->changes_wait_ms = sv->s_ns->n_changes_from_ms - orch_time_now_ms();
	out->changes = sv->s_ns->n_changes;
	out->entries = gs.entries;
	out->unlogged = gs.skipped;
	out->batch_max = gs.batch_max;
	out->failed = sv->s_ns->n_failed;
}
