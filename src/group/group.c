/*
 * The namespace of one replica group: operations captured on the leader,
 * batched into log entries, applied on every member.  group.h says what
 * each call promises; docs/DESIGN.md, "The namespace as the group's state
 * machine", why it works this way.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "group/group.h"
#include "meta/meta.h"
#include "net/ev.h"

/* The first byte of every entry: what follows. */
enum group_entry_kind {
	GROUP_ENTRY_CHANGES = 1, /* a changeset of the namespace (possibly empty) */
};

struct group_op {
	struct orch_group_req req;    /* client 0: none */
	orch_group_op_fn op;
	orch_group_done_fn done;
	void *arg;
	int result;             /* the op's return, once captured */
	bool record_set;        /* orch_group_record was called: ... */
	int record;             /* ... what retries get instead of result */
	struct group_op *next;
};

/* A change a capture made, reported once its entry is applied. */
struct group_change {
	struct group_change *next;
	struct group_op *op;    /* whose capture made it; NULL once that op is answered */
	uint64_t h;
	bool has_name;
	size_t namelen;
	char name[];
};

/*
 * One proposal in flight (an entry, or the barrier of reads), its ops
 * detached if the member leaves the group first.
 */
struct group_entry {
	struct orch_group *g;
	struct group_op *ops;
	struct group_change *changes, **changes_tail;
};

struct orch_group {
	struct orch_ev *ev;
	struct orch_meta *meta;
	struct orch_repl *repl;
	struct group_op *queue, **queue_tail;  /* submitted, not captured yet */
	struct group_op *reads, **reads_tail;  /* asked, waiting for the next barrier */
	struct group_entry *reading;           /* the read barrier in flight, or NULL */
	struct group_entry *flight;            /* the entry in flight, or NULL */
	bool barrier;                          /* a barrier in flight */
	uint64_t barrier_term;                 /* the term it was asked in */
	uint64_t ready_term;                   /* the term whose barrier is applied */
	bool unavailable;                      /* an apply failed: out until restarted */
	bool diverged;                         /* ... because the entry never applies here */
	bool closing;
	bool alone;                            /* the only voter: nobody else can lead */
	struct group_entry *capturing;         /* the entry a capture is filling */
	struct group_op *capturing_op;         /* ... and the op it runs */
	orch_group_change_fn change_fn;
	void *change_arg;
	struct orch_ev_timer kick;             /* group_run at the loop's next turn */
	struct orch_group_stats st;
};

static void group_run(void *arg);

static void group_kick(struct orch_group *g)
{
	if (!g->closing)
		orch_ev_timer_arm(g->ev, &g->kick, 0, group_run, g);
}

/* Calls every op of @list back, with @error or else its own result, and frees it. */
static void group_ops_done(struct group_op *list, int error)
{
	while (list) {
		struct group_op *op = list;

		list = op->next;
		op->done(op->arg, error ? error : op->result);
		free(op);
	}
}

/* Empties the list at @head (its tail pointer @tail) and answers it @error. */
static void group_fail_list(struct group_op **head, struct group_op ***tail, int error)
{
	struct group_op *list = *head;

	*head = NULL;
	*tail = head;
	group_ops_done(list, error);
}

static void group_fail_queue(struct orch_group *g, int error)
{
	group_fail_list(&g->queue, &g->queue_tail, error);
}

static void group_fail_reads(struct orch_group *g, int error)
{
	group_fail_list(&g->reads, &g->reads_tail, error);
}

/* --- The change hook ------------------------------------------------------------ */

static void group_changed(void *arg, uint64_t h, const char *name, size_t namelen)
{
	struct orch_group *g = arg;
	struct group_entry *e = g->capturing;
	struct group_change *c;

	if (!e) {
		if (g->change_fn)
			g->change_fn(g->change_arg, NULL, h, name, namelen);
		return;
	}
	c = malloc(sizeof(*c) + (name ? namelen : 0));
	if (!c) {
		/* Said now rather than never: a holder refetches, maybe too early. */
		if (g->change_fn)
			g->change_fn(g->change_arg, g->capturing_op ? g->capturing_op->arg : NULL,
				     h, name, namelen);
		return;
	}
	c->next = NULL;
	c->op = g->capturing_op;
	c->h = h;
	c->has_name = name != NULL;
	c->namelen = name ? namelen : 0;
	if (name)
		memcpy(c->name, name, namelen);
	*e->changes_tail = c;
	e->changes_tail = &c->next;
}

/*
 * Reports (if @report) and frees the changes at the head of @e's list made
 * by @op (every one left, with @op NULL).  Captures append in op order, so
 * an op's changes are together.
 */
static void group_changes_done(struct orch_group *g, struct group_entry *e,
			       const struct group_op *op, bool report)
{
	while (e->changes && (!op || e->changes->op == op)) {
		struct group_change *c = e->changes;

		e->changes = c->next;
		if (report && g->change_fn)
			g->change_fn(g->change_arg, c->op ? c->op->arg : NULL, c->h,
				     c->has_name ? c->name : NULL, c->namelen);
		free(c);
	}
	if (!e->changes)
		e->changes_tail = &e->changes;
}

/* The ops of @e are answered elsewhere: their changes no longer name them. */
static void group_changes_orphan(struct group_entry *e)
{
	for (struct group_change *c = e->changes; c; c = c->next)
		c->op = NULL;
}

void orch_group_set_change_hook(struct orch_group *g, orch_group_change_fn fn, void *arg)
{
	g->change_fn = fn;
	g->change_arg = arg;
}

/* --- Every member: the state machine ------------------------------------------ */

static int group_apply(void *arg, uint64_t index, const void *buf, size_t len, void **result)
{
	struct orch_group *g = arg;
	const unsigned char *b = buf;
	int rc;

	*result = NULL;
	if (g->unavailable)
		return -EIO; /* never past an entry that failed here */
	if (len < 1 || b[0] != GROUP_ENTRY_CHANGES) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "namespace group: log entry %llu is of no kind"
				   " this build knows (%zu bytes); not applied",
				   (unsigned long long)index, len);
		rc = -EBADMSG;
	} else {
		rc = orch_meta_changes_apply(g->meta, index, b + 1, len - 1);
	}
	if (rc < 0) {
		/*
		 * libraft 0.15 takes a member whose apply fails out of the
		 * group (unavailable: no votes, no election, nothing applied)
		 * until it is restarted; a restart replays the entry.  An entry
		 * that never applies here (-EBADMSG: this member diverged, or
		 * the entry is bad) needs this member rebuilt from a snapshot;
		 * a passing error (a full disk) only the restart.
		 */
		ORCH_LOG(ORCH_LOG_ERR, "namespace group: log entry %llu %s (%s): this member"
			 " leaves the group until it is %s", (unsigned long long)index,
			 rc == -EBADMSG ? "does not apply here" : "cannot be applied now",
			 strerror(-rc), rc == -EBADMSG ? "rebuilt from a snapshot" : "restarted");
		g->diverged = rc == -EBADMSG;
		g->unavailable = true;
		group_kick(g);
		return rc;
	}
	if (rc == 0)
		g->st.applied++;
	return 0;
}

static int group_snapshot(void *arg, void **buf, size_t *len)
{
	struct orch_group *g = arg;

	return orch_meta_snapshot(g->meta, buf, len);
}

static int group_restore(void *arg, const void *buf, size_t len)
{
	struct orch_group *g = arg;

	return orch_meta_restore(g->meta, buf, len);
}

/* --- The leader: capture, propose, answer ---------------------------------------- */

static void group_entry_done(void *arg, int error, void *result)
{
	struct group_entry *e = arg;
	struct orch_group *g = e->g;
	struct group_op *list = e->ops;

	bool report = !g->closing || !error;

	(void)result;
	if (g->flight == e)
		g->flight = NULL;
	/* A lost entry's counter reservation may be another leader's too. */
	if (error)
		orch_meta_forget_reservations(g->meta);
	/*
	 * Each op's changes, then its answer, as a server pushes before it
	 * replies.  Also when lost: the entry may still commit under the next
	 * leader.
	 */
	while (list) {
		struct group_op *op = list;

		list = op->next;
		group_changes_done(g, e, op, report);
		op->done(op->arg, error ? error : op->result);
		free(op);
	}
	group_changes_done(g, e, NULL, report);
	free(e);
	group_kick(g);
}

static void group_barrier_done(void *arg, int error, void *result)
{
	struct orch_group *g = arg;

	(void)result;
	g->barrier = false;
	if (!error) {
		/* What this member reserved as leader before may be another's now. */
		orch_meta_forget_reservations(g->meta);
		g->ready_term = g->barrier_term;
	}
	else if (!g->closing)
		group_fail_queue(g, ORCH_REPL_ENOTLEADER);
	group_kick(g);
}

/* The op and the record of its result, in one savepoint: both or neither. */
static int group_op_recorded(void *arg, struct orch_meta *m)
{
	struct group_op *op = arg;

	op->result = orch_meta_capture_step(m, op->op, op->arg);
	if (op->record_set && op->record == ORCH_GROUP_NOT_RECORDED)
		return 0;
	return orch_meta_reply_put(m, op->req.client, op->req.seq,
				   op->record_set ? op->record : op->result, op->req.done_below);
}

void orch_group_record(struct orch_group *g, int result)
{
	struct group_op *op = g->capturing_op;

	if (op && op->req.client) {
		op->record_set = true;
		op->record = result;
	}
}

/*
 * One op in the capture: a retry gets the recorded result; a first try
 * runs, and its result is recorded in the same entry as its changes.
 */
static int group_capture_op(struct orch_group *g, struct group_op *op)
{
	int result, error;

	if (!op->req.client)
		return orch_meta_capture_step(g->meta, op->op, op->arg);
	error = orch_meta_reply_get(g->meta, op->req.client, op->req.seq, &result);
	if (!error) {
		g->st.retries++;
		return result;
	}
	if (error != -ENOENT)
		return error;
	error = orch_meta_capture_step(g->meta, group_op_recorded, op);
	return error ? error : op->result;
}

/* Captures up to ORCH_GROUP_BATCH_MAX queued ops and proposes their changes. */
static void group_propose(struct orch_group *g)
{
	struct group_entry *e = calloc(1, sizeof(*e));
	static unsigned char kind = GROUP_ENTRY_CHANGES;
	struct group_op **tail;
	struct iovec parts[2];
	void *chg = NULL;
	size_t len = 0;
	uint64_t n = 0;
	int error;

	if (!e) {
		group_fail_queue(g, -ENOMEM);
		return;
	}
	e->g = g;
	e->changes_tail = &e->changes;
	error = orch_meta_capture_begin(g->meta);
	if (error) {
		free(e);
		group_fail_queue(g, error);
		return;
	}
	/* The batch leaves the queue first: an op may submit another. */
	tail = &e->ops;
	while (g->queue && n < ORCH_GROUP_BATCH_MAX) {
		struct group_op *op = g->queue;

		g->queue = op->next;
		op->next = NULL;
		*tail = op;
		tail = &op->next;
		n++;
	}
	if (!g->queue)
		g->queue_tail = &g->queue;
	g->capturing = e;
	for (struct group_op *op = e->ops; op; op = op->next) {
		g->capturing_op = op;
		op->result = group_capture_op(g, op);
	}
	g->capturing = NULL;
	g->capturing_op = NULL;
	error = orch_meta_capture_end(g->meta, &chg, &len);
	if (!error && !len && g->alone) {
		/*
		 * Nothing changed (refused ops, ops that only looked): with no
		 * other member that could lead, what the capture saw is the
		 * group's state, so the answers need no entry (and no synced
		 * append).  With other members they would be reads, which need
		 * a barrier: the entry is proposed.
		 */
		g->st.skipped++;
		group_entry_done(e, 0, NULL);
		return;
	}
	if (!error) {
		/* The entry: its kind, then the changes, framed into libraft's buffer at once. */
		parts[0] = (struct iovec){ .iov_base = &kind, .iov_len = 1 };
		parts[1] = (struct iovec){ .iov_base = chg, .iov_len = len };
		error = orch_repl_proposev(g->repl, parts, 2, group_entry_done, e);
	}
	orch_meta_changes_free(chg);
	if (error) {
		/* Nothing was proposed: nothing changed. */
		group_changes_done(g, e, NULL, false);
		group_ops_done(e->ops, error);
		free(e);
		group_kick(g);
		return;
	}
	g->flight = e;
	g->st.entries++;
	g->st.ops += n;
	if (n > g->st.batch_max)
		g->st.batch_max = n;
}

/* The barrier @rd's reads waited for is applied here (or failed). */
static void group_reads_done(void *arg, int error, void *result)
{
	struct group_entry *rd = arg;
	struct orch_group *g = rd->g;
	struct group_op *list = rd->ops;

	(void)result;
	if (g->reading == rd)
		g->reading = NULL;
	free(rd);
	/* A read that did not run has no "maybe": it was not done. */
	if (error == ORCH_REPL_ELOST)
		error = ORCH_REPL_ENOTLEADER;
	if (!error && g->unavailable)
		error = -EIO;
	for (struct group_op *op = list; op && !error; op = op->next) {
		op->result = op->op(op->arg, g->meta);
		g->st.reads++;
	}
	group_ops_done(list, error);
	group_kick(g);
}

/* The reads asked so far wait for one new barrier. */
static void group_read_barrier(struct orch_group *g)
{
	struct group_entry *rd = calloc(1, sizeof(*rd));
	int error;

	if (!rd) {
		group_fail_reads(g, -ENOMEM);
		return;
	}
	rd->g = g;
	rd->ops = g->reads;
	g->reads = NULL;
	g->reads_tail = &g->reads;
	error = orch_repl_barrier(g->repl, group_reads_done, rd);
	if (error) {
		group_ops_done(rd->ops, error);
		free(rd);
		return;
	}
	g->reading = rd;
	g->st.read_barriers++;
}

static void group_run(void *arg)
{
	struct orch_group *g = arg;
	struct orch_repl_status rs;
	int error;

	if (g->unavailable) {
		/*
		 * Nothing in flight will apply here.  The entry may still
		 * commit on the others: its ops learn "maybe" (ELOST) now.
		 */
		if (g->flight) {
			struct group_op *ops = g->flight->ops;

			g->flight->ops = NULL;
			group_changes_orphan(g->flight);
			group_ops_done(ops, ORCH_REPL_ELOST);
		}
		if (g->reading) {
			struct group_op *ops = g->reading->ops;

			g->reading->ops = NULL;
			group_ops_done(ops, -EIO);
		}
		group_fail_queue(g, -EIO);
		group_fail_reads(g, -EIO);
		return;
	}
	if (g->reads && !g->reading)
		group_read_barrier(g);
	if (g->flight || g->barrier || !g->queue)
		return;
	orch_repl_status(g->repl, &rs);
	if (rs.role != ORCH_REPL_LEADER) {
		group_fail_queue(g, ORCH_REPL_ENOTLEADER);
		return;
	}
	if (g->ready_term != rs.term) {
		/* Capture on top of everything committed before this term. */
		g->barrier_term = rs.term;
		error = orch_repl_barrier(g->repl, group_barrier_done, g);
		if (error) {
			group_fail_queue(g, error);
			return;
		}
		g->barrier = true;
		g->st.barriers++;
		return;
	}
	group_propose(g);
}

/* A new op for @g, if this member may take one now; else NULL and *@error. */
static struct group_op *group_op_new(struct orch_group *g, orch_group_op_fn op,
				     orch_group_done_fn done, void *arg, int *error)
{
	struct orch_repl_status rs;
	struct group_op *o;

	*error = 0;
	if (g->closing)
		*error = -ESHUTDOWN;
	else if (g->unavailable)
		*error = -EIO;
	if (*error)
		return NULL;
	orch_repl_status(g->repl, &rs);
	if (rs.role != ORCH_REPL_LEADER) {
		*error = ORCH_REPL_ENOTLEADER;
		return NULL;
	}
	o = calloc(1, sizeof(*o));
	if (!o) {
		*error = -ENOMEM;
		return NULL;
	}
	o->op = op;
	o->done = done;
	o->arg = arg;
	return o;
}

int orch_group_submit(struct orch_group *g, const struct orch_group_req *req,
		      orch_group_op_fn op, orch_group_done_fn done, void *arg)
{
	struct group_op *o;
	int error;

	if (req && (!req->client || !req->seq))
		return -EINVAL;
	o = group_op_new(g, op, done, arg, &error);
	if (!o)
		return error;
	if (req)
		o->req = *req;
	*g->queue_tail = o;
	g->queue_tail = &o->next;
	group_kick(g);
	return 0;
}

int orch_group_read(struct orch_group *g, orch_group_op_fn op, orch_group_done_fn done,
		    void *arg)
{
	struct group_op *o;
	int error;

	o = group_op_new(g, op, done, arg, &error);
	if (!o)
		return error;
	*g->reads_tail = o;
	g->reads_tail = &o->next;
	group_kick(g);
	return 0;
}

/* --- Lifecycle ---------------------------------------------------------------------- */

int orch_group_open(struct orch_ev *ev, struct orch_meta *meta,
		    const struct orch_repl_cfg *cfg, struct orch_group **out)
{
	struct orch_group *g = calloc(1, sizeof(*g));
	struct orch_repl_fsm fsm;
	int error;

	if (!g)
		return -ENOMEM;
	g->ev = ev;
	g->meta = meta;
	g->alone = cfg->nmembers == 1;
	g->queue_tail = &g->queue;
	g->reads_tail = &g->reads;
	fsm = (struct orch_repl_fsm){ .arg = g, .apply = group_apply,
				      .snapshot = group_snapshot, .restore = group_restore };
	orch_meta_set_change_hook(meta, group_changed, g);
	error = orch_repl_open(ev, cfg, &fsm, &g->repl);
	if (error) {
		orch_meta_set_change_hook(meta, NULL, NULL);
		free(g);
		return error;
	}
	*out = g;
	return 0;
}

void orch_group_close(struct orch_group *g)
{
	if (!g)
		return;
	g->closing = true;
	orch_ev_timer_cancel(g->ev, &g->kick);
	/* Calls back what is in flight (ESHUTDOWN or ELOST). */
	orch_repl_close(g->repl);
	if (g->flight) {
		/* Not called back: libraft is gone, so it never will be. */
		struct group_entry *e = g->flight;

		g->flight = NULL;
		group_changes_done(g, e, NULL, false);
		group_ops_done(e->ops, -ESHUTDOWN);
		free(e);
	}
	if (g->reading) {
		struct group_entry *rd = g->reading;

		g->reading = NULL;
		group_ops_done(rd->ops, -ESHUTDOWN);
		free(rd);
	}
	group_fail_queue(g, -ESHUTDOWN);
	group_fail_reads(g, -ESHUTDOWN);
	orch_meta_set_change_hook(g->meta, NULL, NULL);
	free(g);
}

void orch_group_stats(const struct orch_group *g, struct orch_group_stats *st)
{
	*st = g->st;
	st->diverged = g->diverged;
}

struct orch_repl *orch_group_repl(struct orch_group *g)
{
	return g->repl;
}
