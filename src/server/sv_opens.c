/*
 * Opens and orphans (docs/DESIGN.md, "Open files whose last name went").
 *
 * A mount registers, on the inode's server, each file it has open
 * (CL2SV_WRITERS OPEN at its first open of the inode, CLOSE at its last
 * close; counted per connection, so an OPEN and a CLOSE racing on two
 * threads of the mount leave the right count).  When the last link of a
 * file goes, the namespace asks this table (orch_meta_set_open_hook): if
 * the file is open, or may be (a connection that had it open closed less
 * than a lease term ago, or this server started less than a lease term
 * ago and the file was already an orphan), the inode stays, with nlink 0,
 * and an orphan record in the same transaction as the unlink.  When the
 * last registration of an orphan goes and no hold is left, the inode and
 * its record are deleted and a FREE_DATA intent inserted in one
 * transaction, so the data on every server goes as a removed file's does.
 *
 * A closed connection is not proof of a dead client: it may reconnect and
 * register again (the mount does as soon as it is connected again).  So
 * the opens of a closed connection are held for a lease term, the time
 * after which the client's leases are gone too.  After a restart this
 * server knows no opens: every orphan in the table is held for a lease
 * term from the start, and freed then unless a mount registered again.
 *
 * Loop thread only.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "server/flush.h"
#include "server/intent.h"
#include "server/sv.h"
#include "server/sv_lease.h"
#include "server/sv_ns.h"
#include "server/sv_opens.h"

#define OP_BUCKETS 4096u  /* a power of two */

struct op_reg {
	struct op_reg *r_next;
	struct orch_conn *r_conn;    /* not referenced: the record goes at its close */
	uint64_t r_count;            /* OPENs less CLOSEs */
};

struct op_node {
	struct op_node *n_next;      /* hash chain */
	uint64_t n_handle;
	struct op_reg *n_regs;
	bool n_orphan;               /* its last name went (the record may say so) */
	bool n_freeing;              /* the change that frees it is in flight (sv_ns.h) */
	uint64_t n_hold_until;       /* monotonic ms: kept until then without registrations */
	bool n_timer_armed;
	struct orch_ev_timer n_timer;
	struct sv_server *n_sv;      /* for n_timer */
};

struct sv_opens {
	struct op_node **buckets;
	size_t nodes, regs, orphans;
	uint64_t freed;
	uint64_t hold_ms;            /* a lease term and its margin */
	bool stopping;
};

static size_t op_bucket(uint64_t h)
{
	return (size_t)(orch_hash_u64(h) & (OP_BUCKETS - 1));
}

static struct op_node *op_find(struct sv_opens *ot, uint64_t h)
{
	if (!ot)
		return NULL;
	for (struct op_node *n = ot->buckets[op_bucket(h)]; n; n = n->n_next)
		if (n->n_handle == h)
			return n;
	return NULL;
}

static struct op_node *op_get(struct sv_server *sv, uint64_t h)
{
	struct sv_opens *ot = sv->s_opens;
	struct op_node *n = op_find(ot, h);
	size_t b;

	if (n)
		return n;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	b = op_bucket(h);
	n->n_handle = h;
	n->n_sv = sv;
	n->n_next = ot->buckets[b];
	ot->buckets[b] = n;
	ot->nodes++;
	return n;
}

static void op_node_free(struct sv_server *sv, struct op_node *n)
{
	struct sv_opens *ot = sv->s_opens;

	for (struct op_node **pp = &ot->buckets[op_bucket(n->n_handle)]; *pp;
	     pp = &(*pp)->n_next) {
		if (*pp == n) {
			*pp = n->n_next;
			break;
		}
	}
	if (n->n_timer_armed)
		orch_ev_timer_cancel(sv->s_ev, &n->n_timer);
	while (n->n_regs) {
		struct op_reg *r = n->n_regs;

		n->n_regs = r->r_next;
		free(r);
		ot->regs--;
	}
	if (n->n_orphan)
		ot->orphans--;
	ot->nodes--;
	free(n);
}

/*
 * Frees orphan @h: its inode and record go with a FREE_DATA intent, in one
 * transaction.  On failure the orphan stays, held for another term (the
 * next start frees it at the latest).
 */
static int op_orphan_free(struct sv_server *sv, void *arg)
{
	uint64_t h = (uintptr_t)arg;
	struct sv_intent *in = NULL;
	bool freed = false;
	int error;

	error = orch_meta_begin(sv->s_meta);
	if (error)
		return error;
	error = orch_meta_orphan_free(sv->s_meta, h, &freed);
	if (!error && freed)
		error = sv_intent_insert_free_data(sv, h, &in);
	if (error) {
		orch_meta_abort(sv->s_meta);
		return error;
	}
	error = orch_meta_commit(sv->s_meta);
	if (error) {
		free(in);
		return error;
	}
	sv_flusher_dirty(sv);
	if (in) {
		sv->s_opens->freed++;
		sv_intent_start(sv, in, NULL);
	}
	return 0;
}

static void op_hold_end(void *arg);
static void op_arm(struct sv_server *sv, struct op_node *n);

/* The change that frees orphan @arg is applied, or failed (@error). */
static void op_orphan_freed(struct sv_server *sv, void *arg, int error)
{
	struct sv_opens *ot = sv->s_opens;
	uint64_t h = (uintptr_t)arg;
	struct op_node *n = op_find(ot, h);

	if (!n)
		return;
	n->n_freeing = false;
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot free a removed file: handle=%#" PRIx64
				   ": %s", h, strerror(-error));
		n->n_hold_until = orch_time_now_ms() + ot->hold_ms;
		op_arm(sv, n);
		return;
	}
	/* Opened again meanwhile (by handle): the node stays for its registrations. */
	if (!n->n_regs)
		op_node_free(sv, n);
}

static void op_arm(struct sv_server *sv, struct op_node *n)
{
	uint64_t now = orch_time_now_ms();

	if (n->n_timer_armed)
		orch_ev_timer_cancel(sv->s_ev, &n->n_timer);
	n->n_timer_armed = true;
	orch_ev_timer_arm(sv->s_ev, &n->n_timer,
			  (uint32_t)(n->n_hold_until > now ? n->n_hold_until - now : 0),
			  op_hold_end, n);
}

/* Nothing registered: frees the orphan or forgets the node, unless held. */
static void op_settle(struct sv_server *sv, struct op_node *n)
{
	struct sv_opens *ot = sv->s_opens;
	int error;

	if (n->n_regs || ot->stopping)
		return;
	if (orch_time_now_ms() < n->n_hold_until) {
		if (!n->n_timer_armed)
			op_arm(sv, n);
		return;
	}
	if (n->n_orphan) {
		/* A change of the namespace: through the replica group, if any (sv_ns.h). */
		/* A member that does not lead frees nothing: the next leader takes them again. */
		if (n->n_freeing || !sv_ns_serving(sv))
			return;
		n->n_freeing = true;
		error = sv_ns_change(sv, NULL, op_orphan_free, op_orphan_freed,
				     (void *)(uintptr_t)n->n_handle);
		if (error)
			op_orphan_freed(sv, (void *)(uintptr_t)n->n_handle, error);
		return;
	}
	op_node_free(sv, n);
}

static void op_hold_end(void *arg)
{
	struct op_node *n = arg;

	n->n_timer_armed = false;
	op_settle(n->n_sv, n);
}

/* The namespace's question at the last unlink of @h: open, or maybe? */
static bool op_is_open(void *arg, uint64_t h)
{
	struct sv_server *sv = arg;
	struct sv_opens *ot = sv->s_opens;
	struct op_node *n = op_find(ot, h);

	if (!n || ot->stopping)
		return false;
	if (!n->n_orphan) {
		n->n_orphan = true;
		ot->orphans++;
	}
	return true;
}

int sv_opens_init(struct sv_server *sv)
{
	struct sv_opens *ot = calloc(1, sizeof(*ot));
	uint64_t h = 0, now = orch_time_now_ms();
	int error;

	if (!ot)
		return -ENOMEM;
	ot->buckets = calloc(OP_BUCKETS, sizeof(*ot->buckets));
	if (!ot->buckets) {
		free(ot);
		return -ENOMEM;
	}
	/* Without leases a mount still reconnects: hold as long as a writer's cut is. */
	ot->hold_ms = ORCH_MAX((uint64_t)sv->s_cfg.lease_ms + SV_LEASE_MARGIN_MS,
			       (uint64_t)sv->s_cfg.op_timeout_ms / 4);
	sv->s_opens = ot;
	while ((error = orch_meta_orphan_next(sv->s_meta, h, &h)) == 0) {
		struct op_node *n = op_get(sv, h);

		if (!n) {
			error = -ENOMEM;
			break;
		}
		n->n_orphan = true;
		ot->orphans++;
		n->n_hold_until = now + ot->hold_ms;
		op_arm(sv, n);
	}
	if (error != -ENOENT) {
		sv_opens_fini(sv);
		return error;
	}
	if (ot->orphans)
		ORCH_NOTICE("%zu removed files were open: kept for %" PRIu64 " ms", ot->orphans,
			    ot->hold_ms);
	orch_meta_set_open_hook(sv->s_meta, op_is_open, sv);
	return 0;
}

void sv_opens_stop(struct sv_server *sv)
{
	if (sv->s_opens)
		sv->s_opens->stopping = true;
}

void sv_opens_fini(struct sv_server *sv)
{
	struct sv_opens *ot = sv->s_opens;

	if (!ot)
		return;
	orch_meta_set_open_hook(sv->s_meta, NULL, NULL);
	for (size_t b = 0; b < OP_BUCKETS; b++)
		while (ot->buckets[b])
			op_node_free(sv, ot->buckets[b]);
	free(ot->buckets);
	free(ot);
	sv->s_opens = NULL;
}

int sv_opens_request(struct sv_server *sv, struct orch_conn *c, uint64_t h, bool open)
{
	struct sv_opens *ot = sv->s_opens;
	struct op_node *n = open ? op_get(sv, h) : op_find(ot, h);
	struct op_reg *r = NULL, **pp;

	if (!n)
		return open ? -ENOMEM : 0;
	for (pp = &n->n_regs; *pp; pp = &(*pp)->r_next) {
		if ((*pp)->r_conn == c) {
			r = *pp;
			break;
		}
	}
	if (open) {
		if (!r) {
			r = calloc(1, sizeof(*r));
			if (!r) {
				op_settle(sv, n);
				return -ENOMEM;
			}
			r->r_conn = c;
			r->r_next = n->n_regs;
			n->n_regs = r;
			ot->regs++;
		}
		r->r_count++;
		return 0;
	}
	/* A CLOSE without its OPEN (a connection of before) changes nothing. */
	if (r && --r->r_count == 0) {
		*pp = r->r_next;
		free(r);
		ot->regs--;
		op_settle(sv, n);
	}
	return 0;
}

void sv_opens_conn_closed(struct sv_server *sv, struct orch_conn *c)
{
	struct sv_opens *ot = sv->s_opens;

	if (!ot || !ot->regs)
		return;
	for (size_t b = 0; b < OP_BUCKETS && ot->regs; b++) {
		struct op_node *n = ot->buckets[b];

		while (n) {
			struct op_node *next = n->n_next;

			for (struct op_reg **pp = &n->n_regs; *pp; pp = &(*pp)->r_next) {
				if ((*pp)->r_conn == c) {
					struct op_reg *r = *pp;

					*pp = r->r_next;
					free(r);
					ot->regs--;
					n->n_hold_until = ORCH_MAX(n->n_hold_until,
								   orch_time_now_ms() + ot->hold_ms);
					op_settle(sv, n);
					break;
				}
			}
			n = next;
		}
	}
}

void sv_opens_counts(const struct sv_server *sv, uint64_t *files, uint64_t *regs,
		     uint64_t *orphans, uint64_t *freed)
{
	const struct sv_opens *ot = sv->s_opens;

	*files = ot ? ot->nodes : 0;
	*regs = ot ? ot->regs : 0;
	*orphans = ot ? ot->orphans : 0;
	*freed = ot ? ot->freed : 0;
}
