/* Requests and replies.  See sv_req.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/time.h"
#include "server/sv_lease.h"
#include "server/sv_req.h"

struct sv_req *sv_req_create(struct sv_server *sv, struct orch_conn *c,
			     const struct orch_frame_hdr *h)
{
	struct sv_req *r = malloc(sizeof(*r));

	if (!r)
		return NULL;
	/* Every field not named is zero: none is left to chance (r_seq once was). */
	*r = (struct sv_req){
		.r_sv = sv,
		.r_conn = c,
		.r_type = h->type,
		.r_reqid = h->reqid,
		.r_deadline_ms = orch_time_now_ms() + sv->s_cfg.op_timeout_ms,
		.r_start_ns = orch_hist_now_ns(),
		.r_hdr = *h,
		.r_owed = c->c_origin >= sv->s_cfg.nservers,
	};
	orch_conn_get(c);
	if (r->r_owed)
		orch_conn_owe(c);
	return r;
}

/* The reply's latency by request type, and its error by errno. */
static void sv_req_count(struct sv_server *sv, const struct sv_req *r, int status)
{
	int i = orch_msg_index(r->r_type);

	if (i >= 0 && i < SV_MSG_TYPES_MAX)
		orch_hist_observe(&sv->s_req_hist[i], orch_hist_now_ns() - r->r_start_ns);
	if (status < 0)
		sv->s_errors[-status < SV_ERRNO_MAX ? -status : SV_ERRNO_MAX - 1]++;
}

/*
 * Keeps reply @m of a held request (sv_ns.h) as its frame: the buffers @m
 * points into are the handler's, gone by the time the reply may leave.
 */
static void sv_reply_keep(struct sv_req *r, const struct orch_msg *m)
{
	orch_buf_init(&r->r_held, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	r->r_held_set = true;
	/* One that cannot be encoded is kept empty: sv_req_release answers it EIO. */
	if (orch_msg_encode(&r->r_held, m))
		orch_buf_reset(&r->r_held);
}

static void sv_reply_hold(struct sv_req *r, const struct orch_msg *m, struct sv_req **list)
{
	if (r->r_held_set) {
		orch_buf_fini(&r->r_held); /* answered twice: the last answer stands */
	} else {
		r->r_held_next = *list;
		*list = r;
	}
	sv_reply_keep(r, m);
}

/*
 * The file-data gate (sv_gate.h) holds every reply but the handshake's,
 * pings and the operator's requests, which say nothing of the data and
 * must answer while the group has no majority in sync.
 */
static bool sv_reply_gated(const struct sv_req *r)
{
	unsigned int family = r->r_type >> 8;

	return !r->r_gated && family != 0x00 && family != 0x03 &&
	       !sv_gate_open(&r->r_sv->s_gate);
}

/* Kept, in order, until sv_gate_release() finds what it waits for safe. */
static void sv_reply_gate(struct sv_req *r, const struct orch_msg *m)
{
	struct sv_gate *g = &r->r_sv->s_gate;

	r->r_gated = true;
	if (g->g_stop_error) {
		/* Not safe, and never will be here: the client asks the next leader. */
		sv_reply_status(r, g->g_stop_error);
		return;
	}
	r->r_gate_seq = g->g_sent;
	r->r_held_next = NULL;
	*g->g_held_tail = r;
	g->g_held_tail = &r->r_held_next;
	g->g_replies_held++;
	sv_reply_keep(r, m);
}

void sv_reply(struct sv_req *r, struct orch_msg *m)
{
	m->type = r->r_type;
	m->reqid = r->r_reqid;
	m->flags = ORCH_FRAME_REPLY;
	if (r->r_hold_on || r->r_sv->s_hold) {
		sv_reply_hold(r, m, r->r_hold_on ? r->r_hold_on : r->r_sv->s_hold);
		return;
	}
	if (sv_reply_gated(r)) {
		sv_reply_gate(r, m);
		return;
	}
	sv_req_count(r->r_sv, r, m->status);
	sv_lease_grant_reply(r->r_sv, r->r_conn, r->r_lease_dir, m);
	if (sv_ack_waits_pending(&r->r_waits, orch_time_now_ms()) && !r->r_conn->c_closed &&
	    sv_ack_park(r->r_sv, r->r_conn, r->r_owed, &r->r_waits, m) == 0) {
		/* The other holders' pushes leave now; the reply when they answered. */
		sv_lease_flush(r->r_sv, NULL);
		orch_conn_put(r->r_conn);
		free(r);
		return;
	}
	/*
	 * Not parked (no memory to: the reply then leaves at once, as without
	 * acknowledgements).
	 */
	sv_ack_waits_fini(&r->r_waits);
	sv_lease_flush(r->r_sv, r->r_conn);
	if (!r->r_conn->c_closed && orch_conn_send(r->r_conn, m) == -EMSGSIZE) {
		/* A reply that cannot be encoded still answers the request. */
		struct orch_msg e;

		orch_msg_init(&e, r->r_type);
		e.flags = ORCH_FRAME_REPLY;
		e.reqid = r->r_reqid;
		e.status = -EIO;
		orch_conn_send(r->r_conn, &e);
	}
	if (r->r_owed)
		orch_conn_paid(r->r_conn);
	orch_conn_put(r->r_conn);
	free(r);
}

void sv_reply_status(struct sv_req *r, int status)
{
	struct orch_msg m;

	orch_msg_init(&m, r->r_type);
	m.status = status;
	/* Never ourselves: a member that led and lost it does not know the next one yet. */
	if (status == -ORCH_ENOTLEADER)
		m.leader = r->r_sv->s_leader != r->r_sv->s_member ? r->r_sv->s_leader
								 : ORCH_NO_LEADER;
	sv_reply(r, &m);
}

int sv_req_held_status(const struct sv_req *r)
{
	struct orch_rd rd;

	if (r->r_held.b_len < ORCH_FRAME_HDR + 4)
		return -EIO;
	orch_rd_init(&rd, r->r_held.b_data + ORCH_FRAME_HDR, 4);
	return orch_status_to_errno(orch_rd_u32(&rd));
}

void sv_req_release(struct sv_req *r, int error)
{
	struct orch_buf held = r->r_held; /* the reply's frame: @m points into it */
	struct orch_frame_hdr h;
	struct orch_msg m;

	r->r_held_set = false;
	r->r_held_next = NULL;
	if (!error) {
		error = -EIO;
		if (held.b_len >= ORCH_FRAME_HDR) {
			orch_frame_hdr_decode(held.b_data, &h);
			error = orch_msg_decode(&h, held.b_data + ORCH_FRAME_HDR, &m);
		}
		if (!error) {
			sv_reply(r, &m);
			orch_msg_fini(&m);
		}
	}
	if (error)
		sv_reply_status(r, error);
	orch_buf_fini(&held);
}
