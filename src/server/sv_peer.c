/*
 * The peer transport: the connections we open to other servers (as a
 * client of theirs) and calls on them with completion callbacks, failed
 * when the peer goes down or does not answer within op_timeout_ms.  The
 * requests peers send us are handled in sv_sv.c.  A peer that is a
 * replica group is reached through the member that leads it, found as
 * liborchard finds it (a NOTLEADER names it; a member that cannot be
 * reached is skipped for the next).  A call a member that does not lead
 * refused (nothing was done) goes again, as it was encoded, to the member
 * the refusal names, within its deadline: a member that just came to
 * lead its group finds the other groups' leaders on its first calls
 * instead of failing them, which its callers would try again only after
 * a pause (an intent's second, a writers' cut's hold).
 *
 * A member that says nothing is given up too, as liborchard gives up a
 * try: a leader frozen (SIGSTOP, a VM paused) keeps its connection open,
 * its kernel acknowledging our bytes, while its group elects another.
 * Once the oldest call has waited PEER_TRY_MS with nothing from the
 * member since it was sent, a PING goes on the same connection; without
 * an answer in ORCH_VOUCH_TERM_MS the connection is closed and its calls
 * fail as a peer that is down does (-EHOSTDOWN: their callers try again),
 * and the next calls go to the next member.  A member that answers the
 * PING is only slow, and its calls wait their whole deadline.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "server/sv_peer.h"

struct peer_call {
	uint64_t pc_reqid;
	uint64_t pc_deadline_ms;
	uint64_t pc_sent_ms;        /* queued on its connection */
	sv_peer_cb pc_cb;
	void *pc_arg;
	struct orch_buf pc_frame;   /* the request, encoded, to send it again */
	unsigned int pc_moves;      /* members it was sent again to (PEER_MOVES_MAX) */
	struct peer_call *pc_next;
};

/*
 * Members a call follows refusals to: twice round the group covers an
 * election that ends while it moves, and bounds a group with no leader.
 */
#define PEER_MOVES_MAX(replicas) (2 * (replicas))

/* How long a group's member may say nothing to a call before it is probed. */
#define PEER_TRY_MS 2500

struct sv_peer {
	struct orch_conn *p_conn;   /* NULL when not connected */
	struct peer_call *p_calls;  /* in flight, oldest first */
	struct peer_call *p_again;  /* refused: sent again once the connection moved */
	uint64_t p_next_reqid;
	bool p_down_logged;
	/*
	 * A replica group: the member the connection goes to, moved to the
	 * leader a NOTLEADER names (p_moved: its connection is closed for
	 * that), else to the next one when the connection fails.
	 */
	unsigned int p_member;
	bool p_moved;
	/* A silent member (the PING probe): see the head of this file. */
	uint64_t p_gen;             /* connections made to this peer */
	uint64_t p_rx_ms;           /* the last reply on the connection */
	uint64_t p_probe_gen;       /* the connection a PING in flight probes; 0: none */
	bool p_close_silent;        /* its probe went unanswered: closed by peer_tick */
	bool p_silent;              /* closed for that: its calls fail -EHOSTDOWN */
};

struct sv_peers {
	struct sv_peer *ps_peer;         /* [nservers]; [s_index] unused */
	struct orch_ev_timer ps_timer;   /* fails calls past their deadline */
	struct orch_conn_ops ps_ops;     /* of the connections we open */
};

static void peer_call_free(struct peer_call *pc)
{
	orch_buf_fini(&pc->pc_frame);
	free(pc);
}

static void peer_fail_list(struct sv_server *sv, struct peer_call *list, int error)
{
	while (list) {
		struct peer_call *next = list->pc_next;

		list->pc_cb(sv, list->pc_arg, error, NULL);
		peer_call_free(list);
		list = next;
	}
}

static void peer_fail_all(struct sv_server *sv, struct sv_peer *p, int error)
{
	struct peer_call *list = p->p_calls;

	p->p_calls = NULL;
	peer_fail_list(sv, list, error);
}

/*
 * Sends @pc to peer @peer, connecting to its current member first if
 * needed, and adds it to the calls in flight; on failure, fails it.
 */
static void peer_send(struct sv_server *sv, unsigned int peer, struct peer_call *pc)
{
	struct sv_peer *p = &sv->s_peers->ps_peer[peer];
	const struct orch_server_cfg *scfg;
	struct peer_call **tail;
	int error = 0;

	if (!p->p_conn) {
		scfg = sv->s_cfg.replicas > 1 ? orch_cfg_member(&sv->s_cfg, peer, p->p_member)
					       : &sv->s_cfg.servers[peer];
		if (orch_conn_connect(sv->s_ev, scfg->host, scfg->port, sv->s_cfg.key,
				      sv->s_index, &sv->s_peers->ps_ops, sv, &p->p_conn))
			error = -EHOSTDOWN;
		else
			p->p_gen++;
	}
	if (!error)
		error = orch_conn_queue_frame(p->p_conn, pc->pc_frame.b_data, pc->pc_frame.b_len);
	if (error) {
		pc->pc_cb(sv, pc->pc_arg, error == -EPIPE ? -EHOSTDOWN : error, NULL);
		peer_call_free(pc);
		return;
	}
	for (tail = &p->p_calls; *tail; tail = &(*tail)->pc_next)
		;
	*tail = pc;
	pc->pc_sent_ms = orch_time_now_ms();
	orch_conn_flush(p->p_conn);
}

static struct sv_peer *peer_of_conn(struct sv_server *sv, struct orch_conn *c,
				    unsigned int *index)
{
	for (unsigned int i = 0; i < sv->s_cfg.nservers; i++) {
		if (sv->s_peers->ps_peer[i].p_conn == c) {
			if (index)
				*index = i;
			return &sv->s_peers->ps_peer[i];
		}
	}
	return NULL;
}

static void peer_on_close(struct orch_conn *c, int reason)
{
	struct sv_server *sv = c->c_arg;
	unsigned int i;
	struct sv_peer *p = peer_of_conn(sv, c, &i);

	sv->s_bytes_in += c->c_bytes_in;
	sv->s_bytes_out += c->c_bytes_out;
	if (!p)
		return;
	p->p_conn = NULL;
	if (sv->s_cfg.replicas > 1 && !p->p_moved)
		p->p_member = (p->p_member + 1) % sv->s_cfg.replicas;
	/*
	 * Left for the member that leads: not a peer going down.  The calls
	 * in flight may have been done; those it refused go to that member.
	 */
	if (p->p_moved) {
		struct peer_call *again = p->p_again;

		p->p_moved = false;
		p->p_again = NULL;
		peer_fail_all(sv, p, -EHOSTDOWN);
		while (again) {
			struct peer_call *next = again->pc_next;

			again->pc_next = NULL;
			peer_send(sv, i, again);
			again = next;
		}
		return;
	}
	if (p->p_silent) {
		p->p_silent = false;
		peer_fail_all(sv, p, -EHOSTDOWN);
		return;
	}
	if (!p->p_down_logged) {
		ORCH_NOTICE("peer down: server=%s: %s", sv->s_cfg.servers[i].name,
			    reason ? strerror(-reason) : "closed");
		p->p_down_logged = true;
	}
	peer_fail_all(sv, p, reason == -ECONNREFUSED || !reason ? -EHOSTDOWN : -EIO);
}

static void peer_on_ready(struct orch_conn *c)
{
	struct sv_server *sv = c->c_arg;
	unsigned int i;
	struct sv_peer *p = peer_of_conn(sv, c, &i);

	if (p && p->p_down_logged) {
		ORCH_NOTICE("peer up: server=%s", sv->s_cfg.servers[i].name);
		p->p_down_logged = false;
	}
}

static void peer_call_within(struct sv_server *sv, unsigned int peer, struct orch_msg *m,
			     uint32_t timeout_ms, sv_peer_cb cb, void *arg);

/* The end of a PING to a member that said nothing (peer_probe). */
static void peer_probed(struct sv_server *sv, void *arg, int error, const struct orch_msg *rep)
{
	struct sv_peer *p = &sv->s_peers->ps_peer[(uintptr_t)arg];
	uint64_t gen = p->p_probe_gen;

	(void)rep;
	p->p_probe_gen = 0;
	/* Answered: only slow.  Or its connection went meanwhile. */
	if (!error || !p->p_conn || p->p_gen != gen)
		return;
	p->p_close_silent = true;   /* we may be inside peer_tick's walk of the calls */
}

/*
 * A group's member that has said nothing since its oldest call was sent,
 * PEER_TRY_MS ago: a PING on the same connection tells frozen from slow.
 */
static void peer_probe(struct sv_server *sv, unsigned int i, uint64_t now)
{
	struct sv_peer *p = &sv->s_peers->ps_peer[i];
	const struct peer_call *oldest = p->p_calls;
	struct orch_msg m;

	if (sv->s_cfg.replicas < 2 || !p->p_conn || p->p_probe_gen || !oldest ||
	    now < oldest->pc_sent_ms + PEER_TRY_MS || p->p_rx_ms >= oldest->pc_sent_ms)
		return;
	p->p_probe_gen = p->p_gen;
	orch_msg_init(&m, ORCH_AN2AN_PING);
	peer_call_within(sv, i, &m, ORCH_VOUCH_TERM_MS, peer_probed, (void *)(uintptr_t)i);
}

/*
 * Fails calls whose deadline passed (the peer may be hung rather than
 * gone), and probes a group's member that says nothing.
 */
static void peer_tick(void *arg)
{
	struct sv_server *sv = arg;
	uint64_t now = orch_time_now_ms();

	for (unsigned int i = 0; i < sv->s_cfg.nservers; i++) {
		struct sv_peer *p = &sv->s_peers->ps_peer[i];
		struct peer_call **pp = &p->p_calls;

		while (*pp) {
			struct peer_call *pc = *pp;

			if (pc->pc_deadline_ms > now) {
				pp = &pc->pc_next;
				continue;
			}
			*pp = pc->pc_next;
			pc->pc_cb(sv, pc->pc_arg, -ETIMEDOUT, NULL);
			peer_call_free(pc);
		}
		if (p->p_close_silent) {
			p->p_close_silent = false;
			if (p->p_conn) {
				ORCH_NOTICE("peer member silent: group of server=%s member=%s: "
					    "its calls fail, the next go to the next member",
					    sv->s_cfg.servers[i].name,
					    orch_cfg_member(&sv->s_cfg, i, p->p_member)->name);
				p->p_silent = true;
				orch_conn_close(p->p_conn, -ETIMEDOUT);
			}
		}
		peer_probe(sv, i, now);
	}
	orch_ev_timer_arm(sv->s_ev, &sv->s_peers->ps_timer, 500, peer_tick, sv);
}

void sv_peers_bytes(struct sv_server *sv, uint64_t *in, uint64_t *out)
{
	for (unsigned int i = 0; i < sv->s_cfg.nservers && sv->s_peers; i++) {
		struct orch_conn *c = sv->s_peers->ps_peer[i].p_conn;

		if (c) {
			*in += c->c_bytes_in;
			*out += c->c_bytes_out;
		}
	}
}

int sv_peers_init(struct sv_server *sv, sv_frame_fn on_frame)
{
	struct sv_peers *ps = calloc(1, sizeof(*ps));

	if (ps)
		ps->ps_peer = calloc(sv->s_cfg.nservers, sizeof(*ps->ps_peer));
	if (!ps || !ps->ps_peer) {
		free(ps);
		return -ENOMEM;
	}
	ps->ps_ops = (struct orch_conn_ops){
		.on_frame = on_frame,
		.on_ready = peer_on_ready,
		.on_close = peer_on_close,
	};
	sv->s_peers = ps;
	orch_ev_timer_arm(sv->s_ev, &ps->ps_timer, 500, peer_tick, sv);
	return 0;
}

void sv_peers_fini(struct sv_server *sv)
{
	if (!sv->s_peers)
		return;
	orch_ev_timer_cancel(sv->s_ev, &sv->s_peers->ps_timer);
	for (unsigned int i = 0; i < sv->s_cfg.nservers; i++) {
		struct sv_peer *p = &sv->s_peers->ps_peer[i];

		if (p->p_conn)
			orch_conn_close(p->p_conn, -ESHUTDOWN);
		peer_fail_all(sv, p, -ESHUTDOWN);
		peer_fail_list(sv, p->p_again, -ESHUTDOWN);
		p->p_again = NULL;
	}
	free(sv->s_peers->ps_peer);
	free(sv->s_peers);
	sv->s_peers = NULL;
}

void sv_peer_call(struct sv_server *sv, unsigned int peer, struct orch_msg *m,
		  sv_peer_cb cb, void *arg)
{
	peer_call_within(sv, peer, m, sv->s_cfg.op_timeout_ms, cb, arg);
}

static void peer_call_within(struct sv_server *sv, unsigned int peer, struct orch_msg *m,
			     uint32_t timeout_ms, sv_peer_cb cb, void *arg)
{
	struct peer_call *pc;
	struct sv_peer *p;
	int error;

	if (peer >= sv->s_cfg.nservers || peer == sv->s_index) {
		cb(sv, arg, -EINVAL, NULL);
		return;
	}
	p = &sv->s_peers->ps_peer[peer];
	pc = calloc(1, sizeof(*pc));
	if (!pc) {
		cb(sv, arg, -ENOMEM, NULL);
		return;
	}
	m->reqid = ++p->p_next_reqid;
	m->flags = 0;
	pc->pc_reqid = m->reqid;
	pc->pc_deadline_ms = orch_time_now_ms() + timeout_ms;
	pc->pc_cb = cb;
	pc->pc_arg = arg;
	orch_buf_init(&pc->pc_frame, ORCH_MAXFRAME);
	error = orch_msg_encode(&pc->pc_frame, m);
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot encode message: type=%s peer=%s: %s",
				   orch_msg_name(m->type), sv->s_cfg.servers[peer].name,
				   strerror(-error));
		peer_call_free(pc);
		cb(sv, arg, error, NULL);
		return;
	}
	peer_send(sv, peer, pc);
}

void sv_peer_reply(struct sv_server *sv, struct orch_conn *c,
		   const struct orch_frame_hdr *h, const uint8_t *payload)
{
	struct sv_peer *p = peer_of_conn(sv, c, NULL);
	struct peer_call **pp, *pc = NULL;
	struct orch_msg m;
	int error;

	if (!p) {
		sv->s_errors_proto++;
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "unexpected reply frame, closing: peer=%s type=0x%04x",
				   c->c_peer, h->type);
		orch_conn_close(c, -EPROTO);
		return;
	}
	p->p_rx_ms = orch_time_now_ms();
	for (pp = &p->p_calls; *pp; pp = &(*pp)->pc_next) {
		if ((*pp)->pc_reqid == h->reqid) {
			pc = *pp;
			*pp = pc->pc_next;
			break;
		}
	}
	if (!pc)
		return; /* timed out already */
	error = orch_msg_decode(h, payload, &m);
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "malformed reply from peer: peer=%s type=0x%04x: %s",
				   c->c_peer, h->type, strerror(-error));
		pc->pc_cb(sv, pc->pc_arg, -EIO, NULL);
	} else if (m.status == -ORCH_ENOTLEADER) {
		/*
		 * A member of the peer's group that does not lead it: nothing was
		 * done.  The connection goes to the leader it names (or the next
		 * member), and the call with it, once the connection closed
		 * (peer_on_close).  A call that moved too often or is past its
		 * deadline fails as a peer that is down does, which its caller
		 * tries again (an intent every INTENT_RETRY_MS).
		 */
		unsigned int n = sv->s_cfg.replicas;
		unsigned int to = m.leader < n ? m.leader : (p->p_member + 1) % n;
		bool move = n > 1 && p->p_conn == c && to != p->p_member;

		orch_msg_fini(&m);
		if (move && pc->pc_moves < PEER_MOVES_MAX(n) &&
		    orch_time_now_ms() < pc->pc_deadline_ms) {
			struct peer_call **tail = &p->p_again;

			while (*tail)
				tail = &(*tail)->pc_next;
			pc->pc_moves++;
			pc->pc_next = NULL;
			*tail = pc;
			pc = NULL;
		} else {
			pc->pc_cb(sv, pc->pc_arg, -EHOSTDOWN, NULL);
		}
		if (move) {
			p->p_member = to;
			p->p_moved = true;
			orch_conn_close(c, -EHOSTDOWN);
		}
	} else if (m.status == -ORCH_ERETRY) {
		/* The peer's leader takes no change yet: asked again, on this connection. */
		pc->pc_cb(sv, pc->pc_arg, -EHOSTDOWN, NULL);
		orch_msg_fini(&m);
	} else {
		pc->pc_cb(sv, pc->pc_arg, m.status, &m);
		orch_msg_fini(&m);
	}
	if (pc)
		peer_call_free(pc);
}
