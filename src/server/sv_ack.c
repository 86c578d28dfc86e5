/* Replies held until the other holders dropped their copies.  See sv_ack.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "net/conn.h"
#include "server/sv.h"
#include "server/sv_ack.h"

struct sv_parked {
	struct sv_parked *p_next;
	struct orch_conn *p_conn;   /* referenced */
	bool p_owed;
	bool p_expired;             /* a wait was met by its lease's end, not an ack */
	uint64_t p_since_ns;
	struct sv_ack_waits p_waits;
	struct orch_buf p_frame;    /* the reply, encoded */
};

struct sv_acks {
	struct sv_parked *a_parked; /* newest first */
	struct orch_ev_timer a_timer;
	uint64_t a_timer_at;        /* when it fires; 0: not armed */
	struct sv_ack_counts a_counts;
};

void sv_ack_wait_add(struct sv_ack_waits *w, struct orch_conn *c, uint64_t seq,
		     uint64_t expire_ms)
{
	for (uint32_t i = 0; i < w->a_n; i++) {
		struct sv_ack_wait *x = &w->a_v[i];

		if (x->w_conn == c) {
			x->w_seq = ORCH_MAX(x->w_seq, seq);
			x->w_expire_ms = ORCH_MAX(x->w_expire_ms, expire_ms);
			return;
		}
	}
	if (w->a_n == w->a_cap) {
		uint32_t cap = w->a_cap ? w->a_cap * 2 : 4;
		struct sv_ack_wait *v = realloc(w->a_v, cap * sizeof(*v));

		if (!v) {
			/* Wait the lease out: never answer before the holder may have dropped it. */
			w->a_until_ms = ORCH_MAX(w->a_until_ms, expire_ms);
			return;
		}
		w->a_v = v;
		w->a_cap = cap;
	}
	orch_conn_get(c);
	w->a_v[w->a_n++] = (struct sv_ack_wait){ c, seq, expire_ms };
}

void sv_ack_wait_add_until(struct sv_ack_waits *w, uint64_t until_ms)
{
	w->a_until_ms = ORCH_MAX(w->a_until_ms, until_ms);
}

void sv_ack_waits_fini(struct sv_ack_waits *w)
{
	for (uint32_t i = 0; i < w->a_n; i++)
		orch_conn_put(w->a_v[i].w_conn);
	free(w->a_v);
	memset(w, 0, sizeof(*w));
}

/* The holder answered or is gone: its copies are dropped. */
static bool ack_wait_answered(const struct sv_ack_wait *x)
{
	return x->w_conn->c_closed || x->w_conn->c_push_acked >= x->w_seq;
}

/*
 * Drops the waits of @w that are met at @now; true if none is left.
 * *@expired is set if one was met by its lease's end alone; *@next_ms is
 * lowered to the earliest end of those left.
 */
static bool ack_waits_settle(struct sv_ack_waits *w, uint64_t now, bool *expired,
			     uint64_t *next_ms)
{
	uint32_t j = 0;

	for (uint32_t i = 0; i < w->a_n; i++) {
		struct sv_ack_wait *x = &w->a_v[i];
		struct orch_conn *c = x->w_conn;

		if (ack_wait_answered(x)) {
			orch_conn_put(c);
		} else if (x->w_expire_ms <= now) {
			*expired = true;
			orch_conn_put(c);
		} else {
			*next_ms = ORCH_MIN(*next_ms, x->w_expire_ms);
			w->a_v[j++] = *x;
		}
	}
	w->a_n = j;
	if (w->a_until_ms > now) {
		*next_ms = ORCH_MIN(*next_ms, w->a_until_ms);
		return false;
	}
	if (w->a_until_ms) {
		w->a_until_ms = 0;
		*expired = true;
	}
	return j == 0;
}

bool sv_ack_waits_pending(const struct sv_ack_waits *w, uint64_t now_ms)
{
	if (w->a_until_ms > now_ms)
		return true;
	for (uint32_t i = 0; i < w->a_n; i++) {
		const struct sv_ack_wait *x = &w->a_v[i];

		if (!ack_wait_answered(x) && x->w_expire_ms > now_ms)
			return true;
	}
	return false;
}

static void ack_release(struct sv_acks *a, struct sv_parked *p)
{
	uint64_t us = (orch_hist_now_ns() - p->p_since_ns) / 1000;

	if (p->p_expired)
		a->a_counts.by_expiry++;
	else
		a->a_counts.by_ack++;
	a->a_counts.wait_us += us;
	a->a_counts.wait_max_us = ORCH_MAX(a->a_counts.wait_max_us, us);
	a->a_counts.waiting--;
	if (!p->p_conn->c_closed &&
	    orch_conn_queue_frame(p->p_conn, p->p_frame.b_data, p->p_frame.b_len) == 0)
		orch_conn_flush(p->p_conn);
	else if (p->p_conn->c_lost)
		orch_conn_flush(p->p_conn); /* closes it: its client starts afresh */
	if (p->p_owed)
		orch_conn_paid(p->p_conn);
	orch_conn_put(p->p_conn);
	sv_ack_waits_fini(&p->p_waits);
	orch_buf_fini(&p->p_frame);
	free(p);
}

static void ack_timer(void *arg);

/* Sends every parked reply whose waits are met, and arms the timer for the rest. */
static void ack_settle(struct sv_server *sv)
{
	struct sv_acks *a = sv->s_acks;
	uint64_t now = orch_time_now_ms(), next = UINT64_MAX;
	struct sv_parked **pp = &a->a_parked, *done = NULL;

	while (*pp) {
		struct sv_parked *p = *pp;

		if (ack_waits_settle(&p->p_waits, now, &p->p_expired, &next)) {
			*pp = p->p_next;
			p->p_next = done;
			done = p;
		} else {
			pp = &p->p_next;
		}
	}
	/* Oldest first, as they were answered. */
	while (done) {
		struct sv_parked *p = done;

		done = p->p_next;
		ack_release(a, p);
	}
	if (next == UINT64_MAX) {
		if (a->a_timer_at)
			orch_ev_timer_cancel(sv->s_ev, &a->a_timer);
		a->a_timer_at = 0;
	} else if (a->a_timer_at != next) {
		a->a_timer_at = next;
		orch_ev_timer_arm(sv->s_ev, &a->a_timer, (uint32_t)(next - now), ack_timer, sv);
	}
}

static void ack_timer(void *arg)
{
	struct sv_server *sv = arg;

	sv->s_acks->a_timer_at = 0;
	ack_settle(sv);
}

int sv_ack_park(struct sv_server *sv, struct orch_conn *c, bool owed, struct sv_ack_waits *w,
		const struct orch_msg *m)
{
	struct sv_acks *a = sv->s_acks;
	struct sv_parked *p;
	int error;

	if (!a)
		return -ENOSYS;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	orch_buf_init(&p->p_frame, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	error = orch_msg_encode(&p->p_frame, m);
	if (error) {
		orch_buf_fini(&p->p_frame);
		free(p);
		return error;
	}
	orch_conn_get(c);
	p->p_conn = c;
	p->p_owed = owed;
	p->p_since_ns = orch_hist_now_ns();
	p->p_waits = *w;
	memset(w, 0, sizeof(*w));
	p->p_next = a->a_parked;
	a->a_parked = p;
	a->a_counts.parked++;
	a->a_counts.waiting++;
	ack_settle(sv);
	return 0;
}

void sv_ack_received(struct sv_server *sv, struct orch_conn *c, uint64_t seq)
{
	if (!sv->s_acks)
		return;
	sv->s_acks->a_counts.acks++;
	/* From the network: no ack counts for a push not sent yet. */
	seq = ORCH_MIN(seq, c->c_push_seq);
	if (seq <= c->c_push_acked)
		return;
	c->c_push_acked = seq;
	if (sv->s_acks->a_parked)
		ack_settle(sv);
}

void sv_ack_conn_closed(struct sv_server *sv, struct orch_conn *c)
{
	(void)c;
	if (sv->s_acks && sv->s_acks->a_parked)
		ack_settle(sv);
}

void sv_ack_counts(const struct sv_server *sv, struct sv_ack_counts *out)
{
	if (sv->s_acks)
		*out = sv->s_acks->a_counts;
	else
		memset(out, 0, sizeof(*out));
}

int sv_ack_init(struct sv_server *sv)
{
	sv->s_acks = calloc(1, sizeof(*sv->s_acks));
	return sv->s_acks ? 0 : -ENOMEM;
}

void sv_ack_fini(struct sv_server *sv)
{
	struct sv_acks *a = sv->s_acks;

	if (!a)
		return;
	if (a->a_timer_at)
		orch_ev_timer_cancel(sv->s_ev, &a->a_timer);
	while (a->a_parked) {
		struct sv_parked *p = a->a_parked;

		a->a_parked = p->p_next;
		ack_release(a, p);
	}
	free(a);
	sv->s_acks = NULL;
}
