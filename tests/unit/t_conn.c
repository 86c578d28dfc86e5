/*
 * What a stranger can hold (net/conn.c, server/sv_conns.c): accepted
 * connections over socketpairs on a real event loop, the test speaking
 * for the peer, in raw bytes or as a connector running orch_auth_step.
 *
 * Checked: before authentication a frame longer than a handshake's is
 * refused from its header, and no more than one handshake frame is read
 * ahead, however much the peer sends; after it a full-size frame passes.
 * The registry closes the connections that are not authenticated
 * handshake_timeout_ms after they were made, not before, and only those;
 * it is full at max_connections.  After authentication, output is bounded:
 * an acceptor stops reading at ORCH_CONN_OUT_CAP, queued or owed, and
 * reads again at ORCH_CONN_OUT_LOW, first the frames it had read and not
 * parsed; every reply comes, in order; a paused connection whose peer goes
 * is closed, not watched for ever.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"
#include "net/auth.h"
#include "net/conn.h"
#include "net/ev.h"
#include "proto/msg.h"
#include "server/sv.h"
#include "server/sv_conns.h"
#include "unit/test.h"

#define PEERS_MAX 4

static const uint8_t key[ORCH_KEY_LEN] = { 7 };

struct fx;

/* One accepted connection and the test's end of it. */
struct peer {
	struct fx *fx;
	struct orch_conn *c;        /* referenced: inspectable once closed */
	int fd;                     /* blocking */
	int closed_reason;
	bool closed;
	uint32_t frames, last_len;  /* frames the owner got, the last one's length */
	uint32_t reply_len;         /* each frame is answered with this much data */
	bool owe;                   /* each frame is owed an answer (orch_conn_owe) */
};

struct fx {
	struct sv_server sv;        /* its loop, its settings and its registry only */
	struct peer p[PEERS_MAX];
	int n;
};

static void fx_on_frame(struct orch_conn *c, const struct orch_frame_hdr *h,
			const uint8_t *payload)
{
	struct peer *p = c->c_arg;

	(void)payload;
	p->frames++;
	p->last_len = h->length;
	if (p->owe)
		orch_conn_owe(c);
	if (p->reply_len) {
		static uint8_t data[ORCH_IO_MAX];
		struct orch_msg m;

		orch_msg_init(&m, ORCH_CL2SV_READ);
		m.flags = ORCH_FRAME_REPLY;
		m.reqid = h->reqid;
		m.data = orch_str_of((const char *)data, p->reply_len);
		orch_conn_send(c, &m);
	}
}

static int fx_setup(struct fx *fx, uint32_t hs_timeout_ms, uint32_t max_conns)
{
	memset(fx, 0, sizeof(*fx));
	orch_log_level = ORCH_LOG_ERR; /* the refusals are WARN lines */
	fx->sv.s_listen_fd = -1;
	fx->sv.s_cfg.handshake_timeout_ms = hs_timeout_ms;
	fx->sv.s_cfg.max_connections = max_conns;
	return orch_ev_create(&fx->sv.s_ev);
}

static void fx_teardown(struct fx *fx)
{
	sv_conns_close_all(&fx->sv, 0);
	for (int i = 0; i < fx->n; i++) {
		orch_conn_put(fx->p[i].c);
		close(fx->p[i].fd);
	}
	sv_conns_fini(&fx->sv);
	orch_ev_destroy(fx->sv.s_ev);
}

/* What main.c's on_close does for the registry. */
static void fx_reg_on_close(struct orch_conn *c, int reason)
{
	struct peer *p = c->c_arg;

	p->closed = true;
	p->closed_reason = reason;
	sv_conns_remove(&p->fx->sv, c);
}

static const struct orch_conn_ops fx_ops = {
	.on_frame = fx_on_frame,
	.on_close = fx_reg_on_close,
};

/* A connection accepted as main.c accepts one, registered; NULL on failure. */
static struct peer *fx_accept(struct fx *fx)
{
	struct peer *p;
	int fds[2];

	if (fx->n == PEERS_MAX || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
		return NULL;
	p = &fx->p[fx->n];
	p->fx = fx;
	if (sv_conns_reserve(&fx->sv) ||
	    orch_conn_accept(fx->sv.s_ev, fds[0], key, &fx_ops, p, &p->c)) {
		close(fds[1]);
		return NULL;
	}
	orch_conn_get(p->c);
	sv_conns_add(&fx->sv, p->c);
	p->fd = fds[1];
	fx->n++;
	return p;
}

static void fx_stop(void *arg)
{
	orch_ev_stop(arg);
}

/* Runs the loop for @ms. */
static void fx_run(struct fx *fx, uint32_t ms)
{
	struct orch_ev_timer t = { 0 };

	orch_ev_timer_arm(fx->sv.s_ev, &t, ms, fx_stop, fx->sv.s_ev);
	orch_ev_run(fx->sv.s_ev);
	orch_ev_reset_stop(fx->sv.s_ev);
	orch_ev_timer_cancel(fx->sv.s_ev, &t);
}

static bool send_all(int fd, const void *data, size_t len)
{
	const uint8_t *b = data;

	while (len) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0)
			return false;
		b += n;
		len -= (size_t)n;
	}
	return true;
}

static void put_hdr_id(uint8_t *b, uint32_t length, uint16_t type, uint64_t reqid)
{
	struct orch_frame_hdr h = { .length = length, .type = type, .version = 1, .reqid = reqid };

	orch_frame_hdr_encode(b, &h);
}

static void put_hdr(uint8_t *b, uint32_t length, uint16_t type)
{
	put_hdr_id(b, length, type, 1);
}

/*
 * Reads one frame from @p's end, running the loop between tries (it writes
 * the answer); its header into *@h, its payload into @payload.  0 or -1.
 */
static int peer_read_frame(struct fx *fx, struct peer *p, struct orch_frame_hdr *h,
			   uint8_t *payload, size_t max)
{
	uint8_t buf[ORCH_FRAME_HDR + ORCH_AUTH_MAXFRAME];
	size_t len = 0;

	for (int tries = 0; tries < 200; tries++) {
		ssize_t n = recv(p->fd, buf + len, sizeof(buf) - len, MSG_DONTWAIT);

		if (n > 0)
			len += (size_t)n;
		else if (n == 0)
			return -1;
		if (len >= ORCH_FRAME_HDR) {
			orch_frame_hdr_decode(buf, h);
			if (h->length > max || h->length > sizeof(buf) - ORCH_FRAME_HDR)
				return -1;
			if (len >= ORCH_FRAME_HDR + h->length) {
				memcpy(payload, buf + ORCH_FRAME_HDR, h->length);
				return 0;
			}
		}
		fx_run(fx, 10);
	}
	return -1;
}

/* Sends @m from @p's end.  0 or -1. */
static int peer_send_msg(struct peer *p, const struct orch_msg *m)
{
	struct orch_buf b;
	int ok;

	orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_AUTH_MAXFRAME);
	ok = orch_msg_encode(&b, m) == 0 && send_all(p->fd, b.b_data, b.b_len);
	orch_buf_fini(&b);
	return ok ? 0 : -1;
}

/* Authenticates @p's end as a client, running the loop for the acceptor.  0 or -1. */
static int peer_handshake(struct fx *fx, struct peer *p)
{
	uint8_t nonce[ORCH_NONCE_LEN] = { 9 }, payload[ORCH_AUTH_MAXFRAME];
	struct orch_frame_hdr h;
	struct orch_auth a;
	struct orch_msg out;
	int rc;

	orch_auth_init(&a, ORCH_AUTH_CONNECTOR, key, nonce, ORCH_ORIGIN_CLIENT, 0);
	rc = orch_auth_step(&a, NULL, NULL, &out);
	while (rc == ORCH_AUTH_MORE) {
		if (peer_send_msg(p, &out) ||
		    peer_read_frame(fx, p, &h, payload, sizeof(payload)))
			return -1;
		rc = orch_auth_step(&a, &h, payload, &out);
	}
	fx_run(fx, 10);
	return rc == 0 && p->c->c_state == ORCH_CONN_READY ? 0 : -1;
}

/* --- Input before and after authentication ------------------------------------- */

/* A stranger's connection, on a loop of its own, that sent a header announcing @length. */
static struct peer *stranger_announcing(struct fx *fx, uint32_t length)
{
	uint8_t hdr[ORCH_FRAME_HDR];
	struct peer *p;

	if (fx_setup(fx, 0, 0) || !(p = fx_accept(fx)))
		return NULL;
	put_hdr(hdr, length, ORCH_AN2AN_HELLO);
	return send_all(p->fd, hdr, sizeof(hdr)) ? p : NULL;
}

ORCH_TEST(handshake_frame_too_large_is_refused_from_its_header)
{
	static uint8_t junk[64 * 1024];
	struct fx fx;
	/* Allowed after authentication; one byte more than any handshake frame. */
	struct peer *p = stranger_announcing(&fx, ORCH_AUTH_MAXFRAME + 1);

	ORCH_CHECK(p);
	ORCH_CHECK(send_all(p->fd, junk, sizeof(junk)));
	fx_run(&fx, 100);
	ORCH_CHECK(p->closed);
	ORCH_CHECK(p->closed_reason == -EPROTO);
	ORCH_CHECK(p->c->c_in.b_cap <= 2 * ORCH_CONN_HS_IN_MAX);
	ORCH_CHECK(p->c->c_bytes_in <= ORCH_CONN_HS_IN_MAX);
	ORCH_CHECK(fx.sv.s_conns.cs_n == 0);
	fx_teardown(&fx);
}

ORCH_TEST(stranger_reads_at_most_one_handshake_frame_ahead)
{
	static uint8_t junk[256 * 1024];
	struct fx fx;
	/* The largest handshake frame, one byte short: it waits for the rest. */
	struct peer *p = stranger_announcing(&fx, ORCH_AUTH_MAXFRAME);

	ORCH_CHECK(p);
	ORCH_CHECK(send_all(p->fd, junk, ORCH_AUTH_MAXFRAME - 1));
	fx_run(&fx, 50);
	ORCH_CHECK(!p->closed);
	ORCH_CHECK(p->c->c_bytes_in == ORCH_CONN_HS_IN_MAX - 1);
	ORCH_CHECK(p->c->c_in.b_cap <= 2 * ORCH_CONN_HS_IN_MAX);
	/* Much more: the frame's last byte is read, and no more (it is no HELLO). */
	ORCH_CHECK(send_all(p->fd, junk, sizeof(junk) / 2));
	fx_run(&fx, 50);
	ORCH_CHECK(p->closed);
	ORCH_CHECK(p->c->c_bytes_in == ORCH_CONN_HS_IN_MAX);
	ORCH_CHECK(p->c->c_in.b_cap <= 2 * ORCH_CONN_HS_IN_MAX);
	ORCH_CHECK(p->frames == 0);
	fx_teardown(&fx);
}

ORCH_TEST(authenticated_peer_sends_a_full_size_frame)
{
	uint8_t hdr[ORCH_FRAME_HDR];
	uint8_t *body = calloc(1, ORCH_MAXFRAME);
	struct peer *p;
	struct fx fx;

	ORCH_CHECK(body);
	ORCH_CHECK_OK(fx_setup(&fx, 0, 0));
	p = fx_accept(&fx);
	ORCH_CHECK(p);
	ORCH_CHECK(peer_handshake(&fx, p) == 0);
	fcntl(p->fd, F_SETFL, O_NONBLOCK);
	put_hdr(hdr, ORCH_MAXFRAME, 0x7ff0); /* the owner's business, not the conn's */
	ORCH_CHECK(send_all(p->fd, hdr, sizeof(hdr)));
	for (size_t off = 0; off < ORCH_MAXFRAME;) {
		ssize_t n = send(p->fd, body + off, ORCH_MAXFRAME - off, MSG_NOSIGNAL);

		if (n > 0)
			off += (size_t)n;
		else
			fx_run(&fx, 5);
		ORCH_CHECK(!p->closed);
	}
	for (int i = 0; i < 100 && !p->frames; i++)
		fx_run(&fx, 10);
	free(body);
	ORCH_CHECK(!p->closed);
	ORCH_CHECK(p->frames == 1 && p->last_len == ORCH_MAXFRAME);
	fx_teardown(&fx);
}

/* --- Output after authentication: backpressure ------------------------------------- */

/* An authenticated peer, non-blocking, that sent @n empty requests numbered 1..@n. */
static struct peer *member_sending(struct fx *fx, uint32_t n)
{
	uint8_t *reqs = calloc(n, ORCH_FRAME_HDR);
	struct peer *p;
	bool ok;

	if (!reqs || fx_setup(fx, 0, 0) || !(p = fx_accept(fx)) || peer_handshake(fx, p)) {
		free(reqs);
		return NULL;
	}
	for (uint32_t i = 0; i < n; i++)
		put_hdr_id(reqs + (size_t)i * ORCH_FRAME_HDR, 0, 0x7ff0, i + 1);
	fcntl(p->fd, F_SETFL, O_NONBLOCK);
	ok = send_all(p->fd, reqs, (size_t)n * ORCH_FRAME_HDR);
	free(reqs);
	return ok ? p : NULL;
}

static size_t out_queued(const struct orch_conn *c)
{
	return c->c_out.b_len - c->c_out_off;
}

ORCH_TEST(unread_replies_stop_reading_at_the_cap)
{
	const uint32_t n = 40, reply = ORCH_IO_MAX;
	/* A reply's frame: header, status, the data's length, the data. */
	const size_t frame = ORCH_FRAME_HDR + 8 + reply;
	uint8_t *buf = malloc(frame);
	size_t have = 0;
	uint32_t got = 0;
	struct fx fx;
	struct peer *p = member_sending(&fx, n);

	ORCH_CHECK(buf && p);
	p->reply_len = reply;
	fx_run(&fx, 50);
	/* It stopped at the cap: one reply over it at most, the rest unread. */
	ORCH_CHECK(!p->closed);
	ORCH_CHECK(!p->c->c_reading);
	ORCH_CHECK(out_queued(p->c) >= ORCH_CONN_OUT_CAP);
	ORCH_CHECK(out_queued(p->c) < ORCH_CONN_OUT_CAP + frame);
	ORCH_CHECK(p->frames < n);
	fx_run(&fx, 50);
	ORCH_CHECK(p->frames < n && !p->c->c_reading);
	/*
	 * The peer reads: every reply comes, in order, and the requests left
	 * in c_in are parsed once the output is down to the low mark, though
	 * no byte comes to wake the connection.
	 */
	for (int tries = 0; tries < 2000 && got < n; tries++) {
		ssize_t r = recv(p->fd, buf + have, frame - have, 0);
		struct orch_frame_hdr h;

		if (r > 0)
			have += (size_t)r;
		if (have == frame) {
			orch_frame_hdr_decode(buf, &h);
			ORCH_CHECK(h.reqid == got + 1 && h.length == frame - ORCH_FRAME_HDR);
			ORCH_CHECK(h.flags & ORCH_FRAME_REPLY);
			got++;
			have = 0;
			ORCH_CHECK(out_queued(p->c) < ORCH_CONN_OUT_CAP + frame);
		}
		if (r <= 0)
			fx_run(&fx, 1);
	}
	free(buf);
	ORCH_CHECK(got == n && p->frames == n);
	ORCH_CHECK(!p->closed && p->c->c_reading);
	fx_teardown(&fx);
}

ORCH_TEST(owed_replies_count_against_the_cap)
{
	const uint32_t owed_max = ORCH_CONN_OUT_CAP / ORCH_CONN_OWED_COST, n = owed_max + 900;
	struct fx fx;
	struct peer *p = member_sending(&fx, n);

	ORCH_CHECK(p);
	p->owe = true;
	fx_run(&fx, 50);
	/* Nothing queued: the owed replies alone stopped it. */
	ORCH_CHECK(p->frames == owed_max && p->c->c_owed == owed_max);
	ORCH_CHECK(!p->c->c_reading && out_queued(p->c) == 0);
	/* Paid down to just above the low mark: still stopped. */
	for (uint32_t i = 0; i < owed_max / 2 - 1; i++)
		orch_conn_paid(p->c);
	fx_run(&fx, 20);
	ORCH_CHECK(p->frames == owed_max && !p->c->c_reading);
	/* At the mark it reads again, the frames already read first. */
	orch_conn_paid(p->c);
	ORCH_CHECK(p->c->c_reading);
	for (int i = 0; i < 100 && p->frames < n; i++)
		fx_run(&fx, 10);
	ORCH_CHECK(p->frames == n && p->c->c_reading);
	ORCH_CHECK(p->c->c_owed == n - owed_max / 2);
	fx_teardown(&fx);
}

ORCH_TEST(stopped_connection_whose_peer_goes_is_closed)
{
	const uint32_t owed_max = ORCH_CONN_OUT_CAP / ORCH_CONN_OWED_COST;
	struct fx fx;
	struct peer *p = member_sending(&fx, owed_max + 10);

	ORCH_CHECK(p);
	p->owe = true;
	fx_run(&fx, 50);
	ORCH_CHECK(!p->c->c_reading && !p->closed);
	close(p->fd);
	p->fd = -1;
	for (int i = 0; i < 100 && !p->closed; i++)
		fx_run(&fx, 10);
	ORCH_CHECK(p->closed && p->closed_reason < 0);
	fx_teardown(&fx);
}

/* --- The registry: handshake deadline, max_connections ---------------------------- */

ORCH_TEST(handshake_timeout_closes_only_the_unauthenticated)
{
	struct peer *member, *idle, *half;
	uint8_t hdr[ORCH_FRAME_HDR];
	uint64_t t0 = orch_time_now_ms();
	struct fx fx;

	ORCH_CHECK_OK(fx_setup(&fx, 300, 0));
	member = fx_accept(&fx);
	idle = fx_accept(&fx);
	half = fx_accept(&fx);
	ORCH_CHECK(member && idle && half);
	ORCH_CHECK(idle->c->c_since_ms >= t0 && idle->c->c_since_ms <= orch_time_now_ms());
	ORCH_CHECK(fx.sv.s_conns.cs_hs_timer.t_armed);
	ORCH_CHECK(peer_handshake(&fx, member) == 0);
	/* Half a frame: not a handshake either. */
	put_hdr(hdr, 80, ORCH_AN2AN_HELLO);
	ORCH_CHECK(send_all(half->fd, hdr, sizeof(hdr)));
	fx_run(&fx, 100);
	if (orch_time_now_ms() - t0 < 300) {
		ORCH_CHECK(!idle->closed && !half->closed);
		ORCH_CHECK(fx.sv.s_conns.cs_timed_out == 0);
	}
	for (int i = 0; i < 200 && !(idle->closed && half->closed); i++)
		fx_run(&fx, 10);
	ORCH_CHECK(orch_time_now_ms() - t0 >= 300);
	ORCH_CHECK(idle->closed && idle->closed_reason == -ETIMEDOUT);
	ORCH_CHECK(half->closed && half->closed_reason == -ETIMEDOUT);
	ORCH_CHECK(fx.sv.s_conns.cs_timed_out == 2);
	/* The member stays, and nothing is left for the timer. */
	fx_run(&fx, 400);
	ORCH_CHECK(!member->closed);
	ORCH_CHECK(!fx.sv.s_conns.cs_hs_timer.t_armed);
	fx_teardown(&fx);
}

ORCH_TEST(full_at_max_connections)
{
	struct peer *a, *b;
	struct fx fx;

	ORCH_CHECK_OK(fx_setup(&fx, 0, 2));
	a = fx_accept(&fx);
	ORCH_CHECK(a && !sv_conns_full(&fx.sv));
	b = fx_accept(&fx);
	ORCH_CHECK(b && sv_conns_full(&fx.sv));
	sv_conns_refused(&fx.sv);
	ORCH_CHECK(fx.sv.s_conns.cs_refused == 1);
	/* No handshake timeout set: none is armed. */
	ORCH_CHECK(!fx.sv.s_conns.cs_hs_timer.t_armed);
	orch_conn_close(b->c, 0);
	ORCH_CHECK(b->closed);
	fx_teardown(&fx);
}

ORCH_TEST_MAIN()
