/*
 * Writers: which client connections may hold bytes of an inode held here
 * that its size does not cover yet, and the cuts that keep a dead writer's
 * bytes from ever being read (docs/DESIGN.md, "Writers and bytes past the
 * size").
 *
 * A client writes a file's strips straight to the data servers and
 * publishes the size later (EXTEND), so the data objects may hold bytes
 * past the inode's size.  A live writer's will be published; a dead
 * writer's never will, and a later size change past them would make them
 * readable.  So the inode's server keeps, in memory, one node per inode
 * with the connections registered as its writers (CL2SV_WRITERS REGISTER,
 * or CL2SV_CREATE with ORCH_CREATE_WRITER for a new file), and cuts every
 * data object at the published size (SV2SV_DATA_CUT to each server of the
 * layout, orch_store_cut here) when
 *  - a connection registers and no other is registered: whatever lies past
 *    the size belongs to nobody alive.  The registration is answered once
 *    the cut is done, so the new writer's bytes come after it;
 *  - the last registration goes, if one of them went without publishing
 *    (its connection closed: "tainted").  A RELEASE says its sender
 *    published everything it wrote, so a file whose writers all released
 *    costs no cut.
 * While a cut runs, every registration waits for it (its bytes must not be
 * cut).  After a restart there are no registrations: writers register
 * again before they write further (the mount does when its connection's
 * generation changed), publishing what they wrote first.
 *
 * A closed connection is not proof of a dead writer: the client may only
 * have lost the connection, and registers again (with what it wrote) on
 * its next write.  So a cut is held for WR_HOLD after such a close, and
 * after this server started (it knows no registrations of before):
 * whoever registers meanwhile waits for the held cut, which then cuts at
 * the size every registration of the hold published.  The hold is a
 * quarter of op_timeout_ms, so a held registration is still answered
 * within the client's own timeout.  A cut held only by the start first
 * asks every server of the layout whether anything lies past the size
 * (SV2SV_DATA_CUT PROBE): if nothing does, there is nothing to keep or
 * to cut, and the registrations are answered at once (the common case,
 * which then costs no hold after every restart).  A hold after a close
 * has no such shortcut: the closed connection's last writes may not have
 * reached the data servers yet.
 *
 * The admin side (scrub's rule N7): PROBE answers BUSY while a writer is
 * registered or a cut runs, RECLAIM cuts when no writer is (waiting for a
 * cut that runs).
 *
 * Loop thread only.  Nodes are found by handle; a peer's answer finds its
 * node by handle and round, so an answer for a node gone (or after
 * sv_writers_fini) is dropped.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "proto/layout.h"
#include "server/flush.h"
#include "server/sv.h"
#include "server/sv_peer.h"
#include "server/sv_mirror.h"
#include "server/sv_req.h"
#include "server/sv_opens.h"
#include "server/sv_writers.h"

#define WR_BUCKETS 16384u  /* a power of two */

struct wr_reg {
	struct wr_reg *r_next;
	struct orch_conn *r_conn;    /* not referenced: the record goes at its close */
};

struct wr_wait {
	struct wr_wait *w_next;
	struct sv_req *w_req;        /* answered with the attributes when the cut ends */
	bool w_register;             /* a REGISTER: undone if the cut failed */
};

struct wr_node {
	struct wr_node *n_next;      /* hash chain */
	uint64_t n_handle;
	struct wr_reg *n_regs;
	bool n_taint;                /* a writer left without publishing */
	bool n_cutting;              /* a cut round is in flight */
	bool n_probe;                /* ... a probe (n_held): does anything lie past the size? */
	bool n_recut;                /* another round when this one ends */
	uint64_t n_round;            /* of the round in flight */
	unsigned int n_outstanding;  /* servers of the round not answered */
	int n_error;                 /* of the round: first failure */
	struct wr_wait *n_waiters;
	uint64_t n_hold_until;       /* monotonic ms: no cut before (a writer left) */
	bool n_held;                 /* n_timer starts the round (n_cutting is set) */
	struct orch_ev_timer n_timer;
	struct sv_server *n_sv;      /* for n_timer */
};

struct wr_call {
	uint64_t c_handle;
	uint64_t c_round;
	unsigned int c_server;
};

/* The writers table of one server (sv->s_writers). */
struct sv_writers {
	struct wr_node **buckets;
	/*
	 * Per bucket, for scrub's N7 (which reads an object's size between two
	 * PROBEs): a count bumped by every registration, cut round and size
	 * cut of a handle of the bucket, and the TRUNCATE intents running for
	 * them.  Two PROBEs with the same count saw no such change between.
	 */
	uint32_t *epochs;
	uint32_t *sizing;
	size_t nodes, regs;
	uint64_t next_round;
	uint64_t cuts;               /* cut rounds started (stats) */
	uint64_t hold_ms;            /* WR_HOLD */
	uint64_t hold_until;         /* monotonic ms: no cut before (this server started) */
	bool stopping;
};

static size_t wr_bucket(uint64_t h)
{
	return (size_t)(orch_hash_u64(h) & (WR_BUCKETS - 1));
}

static struct wr_node *wr_find(struct sv_writers *wt, uint64_t h)
{
	if (!wt)
		return NULL;
	for (struct wr_node *n = wt->buckets[wr_bucket(h)]; n; n = n->n_next)
		if (n->n_handle == h)
			return n;
	return NULL;
}

static struct wr_node *wr_get(struct sv_server *sv, uint64_t h)
{
	struct sv_writers *wt = sv->s_writers;
	struct wr_node *n = wr_find(wt, h);
	size_t b;

	if (n || !wt)
		return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	b = wr_bucket(h);
	n->n_handle = h;
	n->n_sv = sv;
	n->n_next = wt->buckets[b];
	wt->buckets[b] = n;
	wt->nodes++;
	return n;
}

/* Frees @n if nothing keeps it. */
static void wr_node_put(struct sv_writers *wt, struct wr_node *n)
{
	struct wr_node **pp;

	if (n->n_regs || n->n_cutting || n->n_waiters)
		return;
	for (pp = &wt->buckets[wr_bucket(n->n_handle)]; *pp; pp = &(*pp)->n_next) {
		if (*pp == n) {
			*pp = n->n_next;
			wt->nodes--;
			free(n);
			return;
		}
	}
}

static bool wr_has(const struct wr_node *n, const struct orch_conn *c)
{
	for (const struct wr_reg *r = n->n_regs; r; r = r->r_next)
		if (r->r_conn == c)
			return true;
	return false;
}

/* Removes @c's registration; true if it had one. */
static bool wr_remove(struct sv_writers *wt, struct wr_node *n, const struct orch_conn *c)
{
	for (struct wr_reg **pp = &n->n_regs; *pp; pp = &(*pp)->r_next) {
		if ((*pp)->r_conn == c) {
			struct wr_reg *r = *pp;

			*pp = r->r_next;
			free(r);
			wt->regs--;
			return true;
		}
	}
	return false;
}

static int wr_add(struct sv_writers *wt, struct wr_node *n, struct orch_conn *c)
{
	struct wr_reg *r;

	if (wr_has(n, c))
		return 0;
	r = malloc(sizeof(*r));
	if (!r)
		return -ENOMEM;
	wt->epochs[wr_bucket(n->n_handle)]++;
	r->r_conn = c;
	r->r_next = n->n_regs;
	n->n_regs = r;
	wt->regs++;
	return 0;
}

static void wr_answer(struct sv_server *sv, struct sv_req *r, int error, uint64_t h)
{
	struct orch_msg rep;

	orch_msg_init(&rep, 0);
	rep.status = error ? error : orch_meta_inode_get(sv->s_meta, h, &rep.attr);
	sv_reply(r, &rep);
}

static void wr_round_start(struct sv_server *sv, struct wr_node *n);
static void wr_round_done(struct sv_server *sv, struct wr_node *n);

/*
 * What a waiter hears of a round that failed: a server that could not be
 * reached is EIO, but in a cluster of replica groups it is a group
 * between leaders (a failover takes seconds), and nothing is registered:
 * RETRY, and the client asks again.
 */
static int wr_error(const struct sv_server *sv, int error)
{
	if (error != -EHOSTDOWN && error != -ETIMEDOUT)
		return error;
	return sv->s_cfg.replicas > 1 ? -ORCH_ERETRY : error == -EHOSTDOWN ? -EIO : error;
}

/* The round of @n ended: answers its waiters, and goes on or frees it. */
static void wr_round_end(struct sv_server *sv, struct wr_node *n)
{
	struct sv_writers *wt = sv->s_writers;
	struct wr_wait *w = n->n_waiters;

	wt->epochs[wr_bucket(n->n_handle)]++;
	n->n_cutting = false;
	n->n_waiters = NULL;
	if (!n->n_error)
		n->n_taint = false;
	else
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot cut the bytes past the size: handle=%#"
				   PRIx64 ": %s", n->n_handle, strerror(-n->n_error));
	/* A registration made during the round keeps the node: look it up again after. */
	while (w) {
		struct wr_wait *next = w->w_next;

		/* Not cut: such a writer's bytes could be cut later, so it is no writer. */
		if (n->n_error && w->w_register)
			wr_remove(wt, n, w->w_req->r_conn);
		wr_answer(sv, w->w_req, wr_error(sv, n->n_error), n->n_handle);
		free(w);
		w = next;
	}
	if (n->n_recut && !n->n_regs && !wt->stopping) {
		n->n_recut = false;
		wr_round_start(sv, n);
		return;
	}
	n->n_recut = false;
	wr_node_put(wt, n);
}

static void wr_cut_done(struct sv_server *sv, void *arg, int error, const struct orch_msg *rep)
{
	struct sv_writers *wt = sv->s_writers;
	struct wr_call *call = arg;
	struct wr_node *n = wr_find(wt, call->c_handle);

	/* No answer, the connection broke: a peer group changing leaders, in a cluster of them. */
	if (!rep && error == -EIO && sv->s_cfg.replicas > 1)
		error = -EHOSTDOWN;
	if (n && n->n_cutting && n->n_round == call->c_round) {
		if (error && !n->n_error)
			n->n_error = error;
		if (--n->n_outstanding == 0)
			wr_round_done(sv, n);
	}
	free(call);
}

static void wr_hold_end(void *arg)
{
	struct wr_node *n = arg;

	n->n_held = false;
	wr_round_start(n->n_sv, n);
}

/*
 * Sends round @n->n_round to every server of @n's layout (here at once,
 * through SV2SV_DATA_CUT to the others): each cuts its object at the size
 * now, or with @probe only says whether anything may lie past it (BUSY).
 */
static void wr_round_send(struct sv_server *sv, struct wr_node *n, bool probe)
{
	struct sv_writers *wt = sv->s_writers;
	struct orch_attr a;
	int error;

	n->n_probe = probe;
	n->n_round = ++wt->next_round;
	n->n_error = 0;
	n->n_outstanding = 1; /* held while sending */
	error = orch_meta_inode_get(sv->s_meta, n->n_handle, &a);
	if (error == -ENOENT || (!error && !S_ISREG(a.mode))) {
		/* Gone (its data goes with its last name), or not a file. */
		error = 0;
	} else if (!error && orch_layout_is_valid(&a.layout)) {
		for (unsigned int s = 0; s < a.layout.stripe_count && s < sv->s_cfg.nservers; s++) {
			uint64_t local = orch_layout_local_size(&a.layout, a.size, s);
			struct wr_call *call;
			struct orch_msg m;

			if (s == sv->s_index) {
				int e = !probe ? sv_store_cut(sv, n->n_handle, local) :
					orch_store_nothing_past(sv->s_store, n->n_handle, local) ?
					0 : -EBUSY;

				if (e && !n->n_error)
					n->n_error = e;
				continue;
			}
			call = malloc(sizeof(*call));
			if (!call) {
				if (!n->n_error)
					n->n_error = -ENOMEM;
				continue;
			}
			call->c_handle = n->n_handle;
			call->c_round = n->n_round;
			call->c_server = s;
			orch_msg_init(&m, ORCH_SV2SV_DATA_CUT);
			m.origin = sv->s_index;
			m.handle = n->n_handle;
			m.size = local;
			m.cut_flags = probe ? ORCH_DATA_CUT_PROBE : 0;
			n->n_outstanding++;
			sv_peer_call(sv, s, &m, wr_cut_done, call);
		}
	}
	if (error && !n->n_error)
		n->n_error = error;
	if (--n->n_outstanding == 0)
		wr_round_done(sv, n);
}

/*
 * A probe of a held cut ended: if every server said nothing lies past the
 * size, there is nothing to cut and the hold ends now, with the
 * registrations answered; else (or if one could not say, or a writer's
 * connection closed meanwhile) the cut waits for the end of the hold.
 */
static void wr_probe_end(struct sv_server *sv, struct wr_node *n)
{
	n->n_probe = false;
	if (n->n_error || !n->n_held || orch_time_now_ms() < n->n_hold_until)
		return;
	orch_ev_timer_cancel(sv->s_ev, &n->n_timer);
	n->n_held = false;
	wr_round_end(sv, n);
}

static void wr_round_done(struct sv_server *sv, struct wr_node *n)
{
	if (n->n_probe)
		wr_probe_end(sv, n);
	else
		wr_round_end(sv, n);
}

/*
 * Cuts every data object of @n's inode at its size now.  Not an intent:
 * a cut changes nothing a reader may see, and one lost in a crash is made
 * by the next registration (or found by scrub).  Within a hold, the round
 * starts when the hold ends; it counts as running meanwhile, and a hold
 * of this server's start only is probed first (wr_probe_end).
 */
static void wr_round_start(struct sv_server *sv, struct wr_node *n)
{
	struct sv_writers *wt = sv->s_writers;
	uint64_t now = orch_time_now_ms(), until = ORCH_MAX(wt->hold_until, n->n_hold_until);

	wt->epochs[wr_bucket(n->n_handle)]++;
	n->n_cutting = true;
	if (now < until && !wt->stopping) {
		n->n_held = true;
		orch_ev_timer_arm(sv->s_ev, &n->n_timer, (uint32_t)(until - now), wr_hold_end, n);
		if (now >= n->n_hold_until)
			wr_round_send(sv, n, true);
		return;
	}
	wt->cuts++;
	wr_round_send(sv, n, false);
}

/* The last registration went: cut if a writer may have left bytes. */
static void wr_left(struct sv_server *sv, struct wr_node *n)
{
	struct sv_writers *wt = sv->s_writers;

	if (n->n_regs || wt->stopping || !n->n_taint) {
		wr_node_put(wt, n);
		return;
	}
	if (n->n_cutting)
		n->n_recut = true;
	else
		wr_round_start(sv, n);
}

/* Queues @r for the end of @n's round; false without memory. */
static bool wr_wait_round(struct wr_node *n, struct sv_req *r, bool reg)
{
	struct wr_wait *w = malloc(sizeof(*w));

	if (!w)
		return false;
	w->w_req = r;
	w->w_register = reg;
	w->w_next = n->n_waiters;
	n->n_waiters = w;
	return true;
}

int sv_writers_init(struct sv_server *sv)
{
	struct sv_writers *wt = calloc(1, sizeof(*wt));

	if (!wt)
		return -ENOMEM;
	wt->hold_ms = sv->s_cfg.op_timeout_ms / 4;
	wt->hold_until = orch_time_now_ms() + wt->hold_ms;
	wt->buckets = calloc(WR_BUCKETS, sizeof(*wt->buckets));
	wt->epochs = calloc(WR_BUCKETS, sizeof(*wt->epochs));
	wt->sizing = calloc(WR_BUCKETS, sizeof(*wt->sizing));
	if (wt->buckets && wt->epochs && wt->sizing) {
		sv->s_writers = wt;
		return 0;
	}
	free(wt->buckets);
	free(wt->epochs);
	free(wt->sizing);
	free(wt);
	return -ENOMEM;
}

void sv_writers_stop(struct sv_server *sv)
{
	sv->s_writers->stopping = true;
}

void sv_writers_fini(struct sv_server *sv)
{
	struct sv_writers *wt = sv->s_writers;

	if (!wt)
		return;
	for (size_t b = 0; b < WR_BUCKETS; b++) {
		while (wt->buckets[b]) {
			struct wr_node *n = wt->buckets[b];

			wt->buckets[b] = n->n_next;
			orch_ev_timer_cancel(sv->s_ev, &n->n_timer);
			while (n->n_regs) {
				struct wr_reg *r = n->n_regs;

				n->n_regs = r->r_next;
				free(r);
			}
			while (n->n_waiters) {
				struct wr_wait *w = n->n_waiters;

				n->n_waiters = w->w_next;
				sv_reply_status(w->w_req, -ESHUTDOWN);
				free(w);
			}
			free(n);
		}
	}
	free(wt->buckets);
	free(wt->epochs);
	free(wt->sizing);
	free(wt);
	sv->s_writers = NULL;
}

void sv_writers_sizing(struct sv_server *sv, uint64_t h, bool running)
{
	struct sv_writers *wt = sv->s_writers;
	size_t b = wr_bucket(h);

	if (!wt)
		return;
	wt->epochs[b]++;
	if (running)
		wt->sizing[b]++;
	else if (wt->sizing[b])
		wt->sizing[b]--;
}

int sv_writers_created(struct sv_server *sv, struct orch_conn *c, uint64_t h)
{
	struct sv_writers *wt = sv->s_writers;
	struct wr_node *n;
	int error;

	n = wr_get(sv, h);
	if (!n)
		return -ENOMEM;
	/* A new handle has no data anywhere: nothing to cut. */
	error = wr_add(wt, n, c);
	if (error)
		wr_node_put(wt, n);
	return error;
}

void sv_writers_conn_closed(struct sv_server *sv, struct orch_conn *c)
{
	struct sv_writers *wt = sv->s_writers;

	if (!wt || !wt->regs)
		return;
	for (size_t b = 0; b < WR_BUCKETS && wt->regs; b++) {
		struct wr_node *n = wt->buckets[b];

		while (n) {
			struct wr_node *next = n->n_next;

			if (wr_remove(wt, n, c)) {
				n->n_taint = true;
				n->n_hold_until = orch_time_now_ms() + wt->hold_ms;
				wr_left(sv, n);
			}
			n = next;
		}
	}
}

int sv_writers_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct sv_writers *wt = sv->s_writers;
	uint32_t f = m->writers_flags, o = f & (ORCH_WRITERS_OPEN | ORCH_WRITERS_CLOSE);
	struct orch_msg rep;
	struct wr_node *n;
	bool opened = false;
	int error = 0;

	orch_msg_init(&rep, 0);
	f &= ~o;
	if ((!f && !o) || ((f & ORCH_WRITERS_REGISTER) && (f & ORCH_WRITERS_RELEASE)) ||
	    o == (ORCH_WRITERS_OPEN | ORCH_WRITERS_CLOSE) ||
	    (o && (f & (ORCH_WRITERS_PROBE | ORCH_WRITERS_RECLAIM)))) {
		sv_reply_status(r, -EINVAL);
		return 0;
	}
	error = orch_meta_inode_get(sv->s_meta, m->handle, &rep.attr);
	if (!error && !S_ISREG(rep.attr.mode))
		error = -EINVAL;
	/* An open registers before anything else is answered; a close ends the request. */
	if (!error && (o & ORCH_WRITERS_OPEN)) {
		error = sv_opens_request(sv, r->r_conn, m->handle, true);
		opened = !error;
	}
	/* What the writer wrote first: then it is below the size any cut uses. */
	if (!error && m->size && (f & (ORCH_WRITERS_REGISTER | ORCH_WRITERS_RELEASE))) {
		error = orch_meta_inode_extend(sv->s_meta, m->handle, m->size, m->time_ns,
					       &rep.attr);
		if (!error)
			sv_flusher_dirty(sv);
	}
	if (error) {
		if (opened)  /* not registered after all */
			sv_opens_request(sv, r->r_conn, m->handle, false);
		rep.status = error;
		sv_reply(r, &rep);
		return 0;
	}
	n = wr_find(wt, m->handle);
	if (f & ORCH_WRITERS_RELEASE) {
		if (n && wr_remove(wt, n, r->r_conn))
			wr_left(sv, n);
	}
	if (!f || (f & ORCH_WRITERS_RELEASE)) {
		/* The last close of an orphan frees it: after the release. */
		if (o & ORCH_WRITERS_CLOSE)
			sv_opens_request(sv, r->r_conn, m->handle, false);
		sv_reply(r, &rep);
		return 0;
	}
	if (f & (ORCH_WRITERS_PROBE | ORCH_WRITERS_RECLAIM)) {
		/*
		 * Within the hold after the start, a writer of before may come
		 * back.  A RECLAIM joins a cut already running for no writer
		 * (another server's scrub asked first): it cuts what this one
		 * would.
		 */
		if ((n && (n->n_regs || (n->n_cutting && (f & ORCH_WRITERS_PROBE)))) ||
		    ((f & ORCH_WRITERS_PROBE) && wt->sizing[wr_bucket(m->handle)]) ||
		    orch_time_now_ms() < wt->hold_until) {
			sv_reply_status(r, -EBUSY);
			return 0;
		}
		if (f & ORCH_WRITERS_PROBE) {
			rep.cookie = wt->epochs[wr_bucket(m->handle)];
			sv_reply(r, &rep);
			return 0;
		}
	}
	n = wr_get(sv, m->handle);
	if (!n) {
		sv_reply_status(r, -ENOMEM);
		return 0;
	}
	if (f & ORCH_WRITERS_REGISTER) {
		/* Registered already, or another writer is: the bytes past the size may be its. */
		bool others = n->n_regs != NULL;

		error = wr_add(wt, n, r->r_conn);
		if (error) {
			wr_node_put(wt, n);
			sv_reply_status(r, error);
			return 0;
		}
		/* A cut in flight must end before this writer writes. */
		if (!n->n_cutting && others) {
			sv_reply(r, &rep);
			return 0;
		}
	}
	if (!wr_wait_round(n, r, f & ORCH_WRITERS_REGISTER)) {
		if (f & ORCH_WRITERS_REGISTER)
			wr_remove(wt, n, r->r_conn);
		wr_node_put(wt, n);
		sv_reply_status(r, -ENOMEM);
		return 0;
	}
	if (!n->n_cutting)
		wr_round_start(sv, n);
	return 0;
}

int sv_writers_cut_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	if (m->cut_flags & ORCH_DATA_CUT_PROBE)
		sv_reply_status(r, orch_store_nothing_past(sv->s_store, m->handle, m->size) ? 0
											    : -EBUSY);
	else
		sv_reply_status(r, sv_store_cut(sv, m->handle, m->size));
	return 0;
}

void sv_writers_counts(const struct sv_server *sv, uint64_t *nodes, uint64_t *regs,
		       uint64_t *cuts)
{
	const struct sv_writers *wt = sv->s_writers;

	*nodes = wt ? wt->nodes : 0;
	*regs = wt ? wt->regs : 0;
	*cuts = wt ? wt->cuts : 0;
}
