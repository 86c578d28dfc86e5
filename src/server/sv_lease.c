/*
 * Leases: which client connections may be caching what, and the pushes
 * that tell them it changed (docs/DESIGN.md, "Leases and invalidations").
 *
 * A mount that asked for leases in HELLO (ORCH_FEAT_LEASES) may cache, for
 * lease_ms after it sent the request, what a reply from this server told
 * it about an inode held here: its attributes, and for a directory the
 * presence or absence of every name it looked up in it.  sv_reply() grants
 * the lease (sv_lease_grant_reply): one record per (handle, connection),
 * refreshed by every reply that covers it.  Every write of an inode or
 * entry record reaches sv_lease_changed() through the namespace's change
 * hook, inside the handler and so before its reply, and pushes
 * SV2CL_INVAL_ATTR or SV2CL_INVAL_ENTRY to every live holder (the
 * requester included: the push is ahead of its reply on the same stream,
 * and the client orders them).  Holders stay: a lease covers a handle for
 * its whole term, however often it changes.
 *
 * Bounds: at most SV_LEASE_MAX records.  A full table is emptied and every
 * holder told SV2CL_REVOKE (forget all you cached from this server), which
 * is rare and always safe.  Expired records go at the next sweep, a closed
 * connection's at its close.  Loop thread only.
 */
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "server/sv.h"
#include "server/sv_conns.h"
#include "server/sv_lease.h"
#include "server/sv_req.h"

#define SV_LEASE_BUCKETS0 4096u

struct sv_lease {
	struct sv_lease *l_next;        /* hash chain */
	uint64_t l_handle;
	struct orch_conn *l_conn;       /* not referenced: records go at its close */
	uint64_t l_expire_ms;           /* monotonic */
};

struct sv_leases {
	struct sv_lease **t_buckets;
	size_t t_nbuckets;              /* a power of two */
	size_t t_count;
	uint32_t t_term_ms;             /* lease_ms + margin */
	struct orch_ev_timer t_sweep;
	/*
	 * Pushes are queued on their connections, which are listed here
	 * (lease_queue), and written before the next reply of anyone
	 * (sv_lease_flush), the requester's own with its reply, or at this
	 * timer, in the same loop turn: a burst of changes costs each holder
	 * one write.
	 */
	struct orch_ev_timer t_flush;
	bool t_flush_armed;
	/*
	 * The connections with pushes queued, each referenced, linked through
	 * c_listed_next (the connection's link for its owner: no allocation).
	 */
	struct orch_conn *t_listed;
	/* REVOKEs sent to connections that acknowledge, until they did (lease_revoke_all). */
	struct sv_ack_waits t_revoked;
};

static size_t lease_bucket(uint64_t h, size_t nbuckets)
{
	return (size_t)orch_hash_u64(h) & (nbuckets - 1);
}

static void lease_grow(struct sv_leases *t)
{
	size_t n = t->t_nbuckets * 2;
	struct sv_lease **b = calloc(n, sizeof(*b));

	if (!b)
		return; /* longer chains, still correct */
	for (size_t i = 0; i < t->t_nbuckets; i++) {
		while (t->t_buckets[i]) {
			struct sv_lease *l = t->t_buckets[i];
			size_t j = lease_bucket(l->l_handle, n);

			t->t_buckets[i] = l->l_next;
			l->l_next = b[j];
			b[j] = l;
		}
	}
	free(t->t_buckets);
	t->t_buckets = b;
	t->t_nbuckets = n;
}

/* Drops every record for which @drop is true. */
static void lease_filter(struct sv_leases *t, bool (*drop)(const struct sv_lease *, const void *),
			 const void *arg)
{
	for (size_t i = 0; i < t->t_nbuckets; i++) {
		struct sv_lease **p = &t->t_buckets[i];

		while (*p) {
			struct sv_lease *l = *p;

			if (drop(l, arg)) {
				*p = l->l_next;
				free(l);
				t->t_count--;
			} else {
				p = &l->l_next;
			}
		}
	}
}

static bool lease_is_expired(const struct sv_lease *l, const void *arg)
{
	return l->l_expire_ms <= *(const uint64_t *)arg;
}

static bool lease_is_of_conn(const struct sv_lease *l, const void *arg)
{
	return l->l_conn == arg;
}

static bool lease_any(const struct sv_lease *l, const void *arg)
{
	(void)l;
	(void)arg;
	return true;
}

/* --- Connections with pushes queued ------------------------------------------------ */

/* Queues @m on @c (orch_conn_queue) and lists @c for lease_flush_listed(). */
static int lease_queue(struct sv_leases *t, struct orch_conn *c, const struct orch_msg *m)
{
	int error = orch_conn_queue(c, m);

	if (!c->c_listed && !c->c_closed) {
		orch_conn_get(c);
		c->c_listed = true;
		c->c_listed_next = t->t_listed;
		t->t_listed = c;
	}
	return error;
}

/* Writes out every listed connection but @keep (NULL: all), which stays listed. */
static void lease_flush_listed(struct sv_leases *t, struct orch_conn *keep)
{
	/* Take the list first: a close below may queue and list again. */
	struct orch_conn *c = t->t_listed;

	t->t_listed = NULL;
	while (c) {
		struct orch_conn *next = c->c_listed_next;

		c->c_listed_next = NULL;
		c->c_listed = false;
		if (c == keep) {
			c->c_listed = true;
			c->c_listed_next = t->t_listed;
			t->t_listed = c;
			c = next;
			continue;
		}
		orch_conn_flush(c);
		orch_conn_put(c);
		c = next;
	}
}

static void lease_flush(void *arg)
{
	struct sv_server *sv = arg;

	sv->s_leases->t_flush_armed = false;
	lease_flush_listed(sv->s_leases, NULL);
}

/*
 * Queues a push to @c; it is written with @c's next frame, before the next
 * reply to anyone, or at the flush timer.  Never writes, so never closes
 * @c under a caller that walks the table (a push that cannot be queued
 * makes the next flush close @c: its client then forgets everything).
 */
static void lease_push(struct sv_server *sv, struct orch_conn *c, uint16_t type, uint64_t h,
		       const char *name, size_t namelen, uint64_t expire_ms)
{
	struct sv_req *r = sv->s_acting;
	bool acks = c->c_features & ORCH_FEAT_ACKS;
	struct orch_msg p;

	if (c->c_closed)
		return;
	orch_msg_init(&p, type);
	p.flags = ORCH_FRAME_PUSH;
	if (r && r->r_conn == c && type != ORCH_SV2CL_REVOKE) {
		/*
		 * The holder's own change: its kernel already knows
		 * (SPEC-wire.md).  Never a REVOKE, which speaks of everything.
		 */
		p.reqid = r->r_reqid;
		if (acks)
			p.flags |= ORCH_FRAME_OWN;
	} else if (acks) {
		/* Numbered, and the change's reply waits for it (sv_ack.h). */
		p.reqid = ++c->c_push_seq;
		if (r && type != ORCH_SV2CL_REVOKE)
			sv_ack_wait_add(&r->r_waits, c, p.reqid, expire_ms);
	}
	p.handle = h;
	p.parent = h;
	p.name = orch_str_of(name, namelen);
	if (lease_queue(sv->s_leases, c, &p) == 0)
		sv->s_lease_pushes++;
	else
		c->c_lost = true;
	if (!sv->s_leases->t_flush_armed) {
		sv->s_leases->t_flush_armed = true;
		orch_ev_timer_arm(sv->s_ev, &sv->s_leases->t_flush, 0, lease_flush, sv);
	}
}

void sv_lease_flush(struct sv_server *sv, struct orch_conn *requester)
{
	if (sv->s_leases)
		lease_flush_listed(sv->s_leases, requester);
}

static void lease_revoke(struct orch_conn *c, void *arg)
{
	struct sv_server *sv = arg;
	struct sv_leases *t = sv->s_leases;
	uint64_t expire = orch_time_now_ms() + t->t_term_ms;

	if (!(c->c_features & ORCH_FEAT_LEASES) || c->c_closed)
		return;
	lease_push(sv, c, ORCH_SV2CL_REVOKE, 0, NULL, 0, expire);
	if (c->c_features & ORCH_FEAT_ACKS)
		sv_ack_wait_add(&t->t_revoked, c, c->c_push_seq, expire);
}

/*
 * The table is full: everybody forgets everything, and so do we.  Until a
 * holder acknowledged its REVOKE (or its leases ran out), it may still
 * show anything it had: every change's reply waits for it, since no
 * record says who held what (lease_changed).
 */
static void lease_revoke_all(struct sv_server *sv)
{
	sv_conns_each(sv, lease_revoke, sv);
	lease_filter(sv->s_leases, lease_any, NULL);
	sv->s_lease_revokes++;
	ORCH_LOG_RATELIMIT(ORCH_LOG_NOTICE, "lease table full: revoked every lease (%u records)",
			   SV_LEASE_MAX);
}

static void lease_sweep(void *arg)
{
	struct sv_server *sv = arg;
	struct sv_leases *t = sv->s_leases;
	uint64_t now = orch_time_now_ms();

	lease_filter(t, lease_is_expired, &now);
	orch_ev_timer_arm(sv->s_ev, &t->t_sweep, t->t_term_ms, lease_sweep, sv);
}

/* @c may cache what it is told about @h, if held here, until @expire. */
static void lease_grant(struct sv_server *sv, struct orch_conn *c, uint64_t h, uint64_t expire)
{
	struct sv_leases *t = sv->s_leases;
	struct sv_lease **b, *l;

	if (orch_handle_server(h) != sv->s_index)
		return;
	b = &t->t_buckets[lease_bucket(h, t->t_nbuckets)];
	for (l = *b; l; l = l->l_next) {
		if (l->l_handle == h && l->l_conn == c) {
			l->l_expire_ms = expire;
			return;
		}
	}
	if (t->t_count >= SV_LEASE_MAX) {
		/* sv_lease_grant_reply made room: cannot happen. */
		c->c_lost = true;
		return;
	}
	if (t->t_count >= t->t_nbuckets * 2) {
		lease_grow(t);
		b = &t->t_buckets[lease_bucket(h, t->t_nbuckets)];
	}
	l = malloc(sizeof(*l));
	if (!l) {
		/*
		 * The client will believe it holds a lease: close the
		 * connection (at its next flush, after this reply), so that it
		 * forgets everything from us.
		 */
		c->c_lost = true;
		return;
	}
	l->l_handle = h;
	l->l_conn = c;
	l->l_expire_ms = expire;
	l->l_next = *b;
	*b = l;
	t->t_count++;
	sv->s_lease_grants++;
}

void sv_lease_grant_reply(struct sv_server *sv, struct orch_conn *c, uint64_t dir,
			  const struct orch_msg *rep)
{
	struct sv_leases *t = sv->s_leases;
	size_t need = 2 + rep->ndirents;
	uint64_t expire;
	char inodes;

	/* What the client does not cache (it did not ask): no pushes for nothing. */
	if (!t || !orch_msg_reply_leases(rep->type, c->c_features) || c->c_closed)
		return;
	expire = orch_time_now_ms() + t->t_term_ms;
	/*
	 * Room first, so that no grant of this reply is undone by a revoke
	 * that the client would read before the reply.
	 */
	if (t->t_count + need > SV_LEASE_MAX) {
		uint64_t now = orch_time_now_ms();

		lease_filter(t, lease_is_expired, &now);
		if (t->t_count + need > SV_LEASE_MAX / 2)
			lease_revoke_all(sv);
	}
	if (dir && (rep->status == 0 || (rep->type == ORCH_CL2SV_LOOKUP && rep->status == -ENOENT)))
		lease_grant(sv, c, dir, expire);
	if (rep->status)
		return;
	/* Only what the mount caches (src/mount/lcache.c), as msg.def says. */
	orch_msg_lease(rep->type, NULL, &inodes);
	switch (inodes) {
	case 'a':
		lease_grant(sv, c, rep->attr.handle, expire);
		break;
	case 'e':
		if (rep->entry.has_attr)
			lease_grant(sv, c, rep->entry.handle, expire);
		break;
	case 'E':
		for (uint32_t i = 0; i < rep->ndirents; i++)
			if (rep->dirents[i].has_attr)
				lease_grant(sv, c, rep->dirents[i].handle, expire);
		break;
	default:
		break;
	}
}

/* A change's reply also waits for the REVOKEs not yet acknowledged (lease_revoke_all). */
static void lease_changed_after_revoke(struct sv_server *sv)
{
	struct sv_leases *t = sv->s_leases;

	if (!t->t_revoked.a_n && !t->t_revoked.a_until_ms)
		return;
	if (!sv_ack_waits_pending(&t->t_revoked, orch_time_now_ms())) {
		sv_ack_waits_fini(&t->t_revoked);
		return;
	}
	if (!sv->s_acting)
		return;
	for (uint32_t i = 0; i < t->t_revoked.a_n; i++) {
		const struct sv_ack_wait *x = &t->t_revoked.a_v[i];

		/* The requester learns its own change from its reply. */
		if (x->w_conn != sv->s_acting->r_conn)
			sv_ack_wait_add(&sv->s_acting->r_waits, x->w_conn, x->w_seq,
					x->w_expire_ms);
	}
	if (t->t_revoked.a_until_ms)
		sv_ack_wait_add_until(&sv->s_acting->r_waits, t->t_revoked.a_until_ms);
}

/* The namespace's change hook: push to every live holder of @h. */
static void lease_changed(void *arg, uint64_t h, const char *name, size_t namelen)
{
	struct sv_server *sv = arg;
	struct sv_leases *t = sv->s_leases;
	struct sv_lease **p;
	uint64_t now;

	if (!t)
		return;
	lease_changed_after_revoke(sv);
	if (!t->t_count)
		return;
	now = orch_time_now_ms();
	p = &t->t_buckets[lease_bucket(h, t->t_nbuckets)];
	while (*p) {
		struct sv_lease *l = *p;

		if (l->l_handle != h) {
			p = &l->l_next;
			continue;
		}
		if (l->l_expire_ms <= now || l->l_conn->c_closed) {
			*p = l->l_next;
			free(l);
			t->t_count--;
			continue;
		}
		if (name)
			lease_push(sv, l->l_conn, ORCH_SV2CL_INVAL_ENTRY, h, name, namelen,
				   l->l_expire_ms);
		else
			lease_push(sv, l->l_conn, ORCH_SV2CL_INVAL_ATTR, h, NULL, 0,
				   l->l_expire_ms);
		p = &l->l_next;
	}
}

void sv_lease_conn_closed(struct sv_server *sv, struct orch_conn *c)
{
	struct sv_leases *t = sv->s_leases;

	if (t && t->t_count && (c->c_features & ORCH_FEAT_LEASES))
		lease_filter(t, lease_is_of_conn, c);
}

size_t sv_lease_count(const struct sv_server *sv)
{
	return sv->s_leases ? sv->s_leases->t_count : 0;
}

void sv_lease_changed(struct sv_server *sv, uint64_t h, const char *name, size_t namelen)
{
	lease_changed(sv, h, name, namelen);
}

int sv_lease_init(struct sv_server *sv)
{
	struct sv_leases *t;

	if (!sv->s_cfg.lease_ms)
		return 0;
	t = calloc(1, sizeof(*t));
	if (t)
		t->t_buckets = calloc(SV_LEASE_BUCKETS0, sizeof(*t->t_buckets));
	if (!t || !t->t_buckets) {
		free(t);
		return -ENOMEM;
	}
	t->t_nbuckets = SV_LEASE_BUCKETS0;
	t->t_count = 0;
	t->t_term_ms = sv->s_cfg.lease_ms + SV_LEASE_MARGIN_MS;
	sv->s_leases = t;
	orch_meta_set_change_hook(sv->s_meta, lease_changed, sv);
	orch_ev_timer_arm(sv->s_ev, &t->t_sweep, t->t_term_ms, lease_sweep, sv);
	return 0;
}

void sv_lease_fini(struct sv_server *sv)
{
	struct sv_leases *t = sv->s_leases;

	if (!t)
		return;
	orch_meta_set_change_hook(sv->s_meta, NULL, NULL);
	orch_ev_timer_cancel(sv->s_ev, &t->t_sweep);
	orch_ev_timer_cancel(sv->s_ev, &t->t_flush);
	lease_flush(sv);
	lease_filter(t, lease_any, NULL);
	sv_ack_waits_fini(&t->t_revoked);
	free(t->t_buckets);
	free(t);
	sv->s_leases = NULL;
}
