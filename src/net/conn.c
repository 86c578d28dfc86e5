/* Framed, authenticated connections.  See conn.h. */
#include "net/conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"
#include "net/auth.h"

#define CONN_READ_CHUNK (256u * 1024)
/* One whole frame plus a read chunk of the next. */
#define CONN_IN_MAX (ORCH_FRAME_HDR + ORCH_MAXFRAME + CONN_READ_CHUNK)

static void conn_io(struct orch_ev *ev, int fd, uint32_t events, void *arg);
static void conn_kicked(void *arg);

static void conn_update_events(struct orch_conn *c)
{
	uint32_t ev = 0;

	if (c->c_closed)
		return;
	if (c->c_state == ORCH_CONN_CONNECTING) {
		ev = EPOLLOUT;
	} else {
		if (c->c_reading)
			ev |= EPOLLIN;
		if (c->c_out.b_len > c->c_out_off)
			ev |= EPOLLOUT;
	}
	/* Every reply flushes: most of them change nothing, and cost no syscall. */
	if (ev == c->c_events)
		return;
	if (orch_ev_mod(c->c_ev, c->c_fd, ev) == 0)
		c->c_events = ev;
}

/*
 * Backpressure, then the events to watch.  An acceptor whose output (what
 * is queued, and ORCH_CONN_OWED_COST per reply owed) reaches
 * ORCH_CONN_OUT_CAP stops reading requests; at ORCH_CONN_OUT_LOW it reads
 * again, first the frames it had read and not parsed, from the loop (the
 * kick: no byte may come to wake it, and here we may be deep in another
 * connection's handler).  A connector always reads: what comes are the
 * answers to its own requests, and not reading them would drain nothing.
 */
static void conn_pace(struct orch_conn *c)
{
	size_t load;

	if (c->c_closed)
		return;
	if (c->c_auth.a_role == ORCH_AUTH_ACCEPTOR) {
		load = c->c_out.b_len - c->c_out_off + (size_t)c->c_owed * ORCH_CONN_OWED_COST;
		if (c->c_reading && load >= ORCH_CONN_OUT_CAP) {
			c->c_reading = false;
		} else if (!c->c_reading && load <= ORCH_CONN_OUT_LOW) {
			c->c_reading = true;
			/* While parsing, the parse goes on by itself. */
			if (!c->c_parsing && c->c_in.b_len)
				orch_ev_timer_arm(c->c_ev, &c->c_kick, 0, conn_kicked, c);
		}
	}
	conn_update_events(c);
}

/*
 * A connection in @role on @fd, its handshake ready to start with a fresh
 * nonce: a connector announces @self and asks for ops->features; an
 * acceptor offers them.  0, -ENOMEM or -EIO.
 */
static int conn_alloc(struct orch_ev *ev, int fd, enum orch_auth_role role, const uint8_t *key,
		      uint32_t self, const struct orch_conn_ops *ops, void *arg,
		      struct orch_conn **out)
{
	uint8_t nonce[ORCH_NONCE_LEN];
	struct orch_conn *c;

	if (orch_auth_nonce(nonce))
		return -EIO;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	orch_auth_init(&c->c_auth, role, key, nonce, self, ops->features);
	c->c_fd = fd;
	c->c_refs = 1;
	c->c_ev = ev;
	c->c_ops = ops;
	c->c_arg = arg;
	c->c_reading = true;
	c->c_origin = ORCH_ORIGIN_CLIENT;
	c->c_since_ms = orch_time_now_ms();
	orch_buf_init(&c->c_in, CONN_IN_MAX);
	orch_buf_init(&c->c_out, SIZE_MAX);
	orch_buf_init(&c->c_held, SIZE_MAX);
	*out = c;
	return 0;
}

void orch_conn_peer_name(int fd, char *out, size_t outlen)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char host[INET6_ADDRSTRLEN] = "?";
	int port = 0;

	if (getpeername(fd, (struct sockaddr *)&ss, &len) == 0) {
		if (ss.ss_family == AF_INET) {
			struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

			inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
			port = ntohs(sin->sin_port);
		} else if (ss.ss_family == AF_INET6) {
			struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

			inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
			port = ntohs(sin6->sin6_port);
		}
	}
	snprintf(out, outlen, "%s:%d", host, port);
}

static void conn_sock_setup(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int orch_conn_accept(struct orch_ev *ev, int fd, const uint8_t *key,
		     const struct orch_conn_ops *ops, void *arg, struct orch_conn **out)
{
	struct orch_conn *c;
	int error;

	conn_sock_setup(fd);
	error = conn_alloc(ev, fd, ORCH_AUTH_ACCEPTOR, key, 0, ops, arg, &c);
	if (error) {
		close(fd);
		return error;
	}
	c->c_state = ORCH_CONN_HANDSHAKE;
	orch_conn_peer_name(fd, c->c_peer, sizeof(c->c_peer));
	error = orch_ev_add(ev, fd, EPOLLIN, conn_io, c);
	c->c_events = EPOLLIN;
	if (error) {
		close(fd);
		orch_buf_fini(&c->c_in);
		free(c);
		return error;
	}
	*out = c;
	return 0;
}

int orch_conn_connect(struct orch_ev *ev, const char *host, uint16_t port,
		      const uint8_t *key, uint32_t self,
		      const struct orch_conn_ops *ops, void *arg, struct orch_conn **out)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *ai;
	struct orch_conn *c;
	char portstr[8];
	int fd, error;

	snprintf(portstr, sizeof(portstr), "%u", port);
	if (getaddrinfo(host, portstr, &hints, &ai) != 0)
		return -EHOSTUNREACH;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		error = -errno;
		freeaddrinfo(ai);
		return error;
	}
	conn_sock_setup(fd);
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS) {
		error = -errno;
		freeaddrinfo(ai);
		close(fd);
		return error;
	}
	freeaddrinfo(ai);
	error = conn_alloc(ev, fd, ORCH_AUTH_CONNECTOR, key, self, ops, arg, &c);
	if (error) {
		close(fd);
		return error;
	}
	c->c_state = ORCH_CONN_CONNECTING;
	snprintf(c->c_peer, sizeof(c->c_peer), "%s:%u", host, port);
	error = orch_ev_add(ev, fd, EPOLLOUT, conn_io, c);
	c->c_events = EPOLLOUT;
	if (error) {
		close(fd);
		free(c);
		return error;
	}
	*out = c;
	return 0;
}

void orch_conn_get(struct orch_conn *c)
{
	c->c_refs++;
}

void orch_conn_put(struct orch_conn *c)
{
	if (!c || --c->c_refs > 0)
		return;
	orch_buf_fini(&c->c_in);
	orch_buf_fini(&c->c_out);
	orch_buf_fini(&c->c_held);
	free(c);
}

void orch_conn_close(struct orch_conn *c, int reason)
{
	if (c->c_closed)
		return;
	c->c_closed = true;
	orch_ev_timer_cancel(c->c_ev, &c->c_kick);
	orch_ev_del(c->c_ev, c->c_fd);
	close(c->c_fd);
	c->c_fd = -1;
	if (c->c_ops->on_close)
		c->c_ops->on_close(c, reason);
	orch_conn_put(c);
}

/* --- Output ----------------------------------------------------------------------- */

/*
 * Frames may go out now: an acceptor writes from the start (its handshake
 * answers, nothing of its owner's comes before READY), a connector once
 * READY; before, its owner's frames wait in c_held.
 */
static bool conn_is_writable(const struct orch_conn *c)
{
	return c->c_state == ORCH_CONN_READY || c->c_auth.a_role == ORCH_AUTH_ACCEPTOR;
}

static void conn_flush(struct orch_conn *c)
{
	while (c->c_out.b_len > c->c_out_off) {
		ssize_t n = send(c->c_fd, c->c_out.b_data + c->c_out_off,
				 c->c_out.b_len - c->c_out_off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				break;
			orch_conn_close(c, -errno);
			return;
		}
		c->c_out_off += (size_t)n;
		c->c_bytes_out += (uint64_t)n;
	}
	if (c->c_out_off == c->c_out.b_len) {
		orch_buf_reset(&c->c_out);
		c->c_out_off = 0;
	} else if (c->c_out_off > c->c_out.b_len / 2) {
		orch_buf_consume(&c->c_out, c->c_out_off);
		c->c_out_off = 0;
	}
	conn_pace(c);
}

int orch_conn_queue(struct orch_conn *c, const struct orch_msg *m)
{
	struct orch_buf *b;
	int error;

	if (c->c_closed)
		return -EPIPE;
	b = conn_is_writable(c) ? &c->c_out : &c->c_held;
	error = orch_msg_encode(b, m);
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot encode message: type=%s peer=%s: %s",
				   orch_msg_name(m->type), c->c_peer, strerror(-error));
		if (b->b_err) {
			/* The buffer dropped everything it held: the stream is cut. */
			b->b_err = 0;
			c->c_lost = true;
		}
		return error;
	}
	return 0;
}

int orch_conn_queue_frame(struct orch_conn *c, const void *frame, size_t n)
{
	struct orch_buf *b;
	int error;

	if (c->c_closed)
		return -EPIPE;
	b = conn_is_writable(c) ? &c->c_out : &c->c_held;
	error = orch_buf_append(b, frame, n);
	if (error && b->b_err) {
		b->b_err = 0;
		c->c_lost = true;
	}
	return error;
}

void orch_conn_flush(struct orch_conn *c)
{
	if (c->c_closed)
		return;
	if (c->c_lost) {
		orch_conn_close(c, -ENOMEM);
		return;
	}
	if (conn_is_writable(c))
		conn_flush(c);
}

void orch_conn_owe(struct orch_conn *c)
{
	c->c_owed++;
	conn_pace(c);
}

void orch_conn_paid(struct orch_conn *c)
{
	if (c->c_owed)
		c->c_owed--;
	conn_pace(c);
}

int orch_conn_send(struct orch_conn *c, const struct orch_msg *m)
{
	int error = orch_conn_queue(c, m);

	if (!error || c->c_lost)
		orch_conn_flush(c);
	return error;
}

/* --- Handshake ---------------------------------------------------------------------- */

/*
 * The handshake failed with @error (orch_auth_step) on frame @h: says why,
 * sends the refusal queued for the peer, if any, and closes.  The reasons
 * given to on_close are those of before the step function: a peer that
 * is refused is -EACCES, one that speaks another version as acceptor
 * -EPROTONOSUPPORT.
 */
static void conn_auth_failed(struct orch_conn *c, const struct orch_frame_hdr *h, int error)
{
	const struct orch_auth *a = &c->c_auth;
	bool acceptor = a->a_role == ORCH_AUTH_ACCEPTOR;
	int reason = -EACCES;

	if (error == -EKEYREJECTED && acceptor) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "peer failed authentication (wrong cluster key?): peer=%s",
				   c->c_peer);
	} else if (error == -EKEYREJECTED) {
		/* It was told, by an AUTH with a zero MAC (auth.h), so it logs us too. */
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "server failed authentication (wrong cluster key?): peer=%s",
				   c->c_peer);
	} else if (error == -EPROTONOSUPPORT && acceptor) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "peer speaks another protocol: peer=%s versions=%u..%u ours=%u",
				   c->c_peer, a->a_peer_vmin, a->a_peer_vmax, ORCH_PROTO_VERSION);
		reason = error;
	} else if (error == -EACCES || error == -ENOMEM || !h) {
		/* The acceptor refused our proof (it logs why), or we ran out of memory. */
		reason = error;
	} else {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "unexpected message before authentication: peer=%s type=0x%04x len=%u",
				   c->c_peer, h->type, h->length);
	}
	conn_flush(c);
	orch_conn_close(c, reason);
}

/*
 * Feeds frame @h (NULL: a connector's start) to the handshake and sends
 * what it answers.  Anything but the expected message closes the
 * connection: an unauthenticated peer gets no service at all.
 */
static void conn_handshake(struct orch_conn *c, const struct orch_frame_hdr *h,
			   const uint8_t *payload)
{
	struct orch_auth *a = &c->c_auth;
	bool connector = a->a_role == ORCH_AUTH_CONNECTOR;
	struct orch_msg out;
	int rc;

	rc = orch_auth_step(a, h, payload, &out);
	if (out.type && orch_msg_encode(&c->c_out, &out) && rc >= 0)
		rc = -ENOMEM;
	if (rc < 0) {
		conn_auth_failed(c, h, rc);
		return;
	}
	if (rc == 0) {
		c->c_state = ORCH_CONN_READY;
		c->c_features = a->a_features;
		if (!connector)
			c->c_origin = a->a_peer_origin;
		if (c->c_held.b_len) {
			orch_buf_append(&c->c_out, c->c_held.b_data, c->c_held.b_len);
			orch_buf_reset(&c->c_held);
		}
	}
	conn_flush(c);
	if (rc == 0 && connector && !c->c_closed && c->c_ops->on_ready)
		c->c_ops->on_ready(c);
}

/* --- Input --------------------------------------------------------------------------- */

/*
 * Hands every complete frame in c_in to its consumer, until backpressure
 * stops reading: the rest waits in c_in (conn_read parses it first).
 */
static void conn_parse(struct orch_conn *c)
{
	c->c_parsing = true;
	while (!c->c_closed && c->c_reading && c->c_in.b_len - c->c_in_off >= ORCH_FRAME_HDR) {
		const uint8_t *p = c->c_in.b_data + c->c_in_off;
		struct orch_frame_hdr h;

		orch_frame_hdr_decode(p, &h);
		if (h.length > ORCH_MAXFRAME) {
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
					   "frame too large, closing: peer=%s type=0x%04x len=%u max=%u",
					   c->c_peer, h.type, h.length, ORCH_MAXFRAME);
			orch_conn_close(c, -EPROTO);
			return;
		}
		/* A stranger gets no more room than the handshake needs. */
		if (c->c_state != ORCH_CONN_READY && h.length > ORCH_AUTH_MAXFRAME) {
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
					   "frame too large for a handshake, closing: peer=%s "
					   "type=0x%04x len=%u max=%u",
					   c->c_peer, h.type, h.length, ORCH_AUTH_MAXFRAME);
			orch_conn_close(c, -EPROTO);
			return;
		}
		if (c->c_in.b_len - c->c_in_off < ORCH_FRAME_HDR + (size_t)h.length)
			break;
		c->c_in_off += ORCH_FRAME_HDR + h.length;
		if (c->c_state == ORCH_CONN_READY)
			c->c_ops->on_frame(c, &h, p + ORCH_FRAME_HDR);
		else
			conn_handshake(c, &h, p + ORCH_FRAME_HDR);
	}
	c->c_parsing = false;
	if (c->c_closed)
		return;
	orch_buf_consume(&c->c_in, c->c_in_off);
	c->c_in_off = 0;
}

/*
 * How much the next read may take: a chunk, or before authentication what
 * is left of one handshake frame (conn_parse consumed every whole frame
 * and refused a longer one, so something is left).
 */
static size_t conn_read_size(const struct orch_conn *c)
{
	if (c->c_state == ORCH_CONN_READY)
		return CONN_READ_CHUNK;
	return c->c_in.b_len < ORCH_CONN_HS_IN_MAX ? ORCH_CONN_HS_IN_MAX - c->c_in.b_len : 0;
}

/*
 * Parses what c_in holds, then reads and parses until the socket is dry or
 * reading stops.  Only a partial frame is left in c_in when it reads (the
 * parse took every whole one, or reading stopped), so c_in stays within
 * CONN_IN_MAX.
 */
static void conn_read(struct orch_conn *c)
{
	conn_parse(c);
	while (!c->c_closed && c->c_reading) {
		size_t room, want = conn_read_size(c);
		ssize_t n;

		if (!want || orch_buf_reserve(&c->c_in, want)) {
			orch_buf_reset(&c->c_in);
			orch_conn_close(c, want ? -ENOMEM : -EPROTO);
			return;
		}
		room = c->c_in.b_cap - c->c_in.b_len;
		if (c->c_state != ORCH_CONN_READY && room > want)
			room = want;
		n = recv(c->c_fd, c->c_in.b_data + c->c_in.b_len, room, 0);
		if (n == 0) {
			orch_conn_close(c, 0);
			return;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				orch_conn_close(c, -errno);
			return;
		}
		c->c_in.b_len += (size_t)n;
		c->c_bytes_in += (uint64_t)n;
		conn_parse(c);
		if ((size_t)n < room)
			return;
	}
}

/* The socket's pending error (SO_ERROR), 0 if none. */
static int conn_sock_error(const struct orch_conn *c)
{
	int err = 0;
	socklen_t len = sizeof(err);

	getsockopt(c->c_fd, SOL_SOCKET, SO_ERROR, &err, &len);
	return err;
}

/* Reading resumed with frames waiting in c_in (conn_pace). */
static void conn_kicked(void *arg)
{
	struct orch_conn *c = arg;

	orch_conn_get(c);
	if (c->c_reading)
		conn_read(c);
	orch_conn_put(c);
}

static void conn_io(struct orch_ev *ev, int fd, uint32_t events, void *arg)
{
	struct orch_conn *c = arg;

	(void)ev;
	(void)fd;
	orch_conn_get(c);
	if (c->c_state == ORCH_CONN_CONNECTING) {
		int err = conn_sock_error(c);

		if (err) {
			orch_conn_close(c, -err);
			goto out_put;
		}
		c->c_state = ORCH_CONN_HANDSHAKE;
		conn_handshake(c, NULL, NULL);
		goto out_put;
	}
	if (c->c_reading && (events & (EPOLLIN | EPOLLHUP | EPOLLERR))) {
		conn_read(c);
	} else if (events & (EPOLLHUP | EPOLLERR)) {
		/* Not reading (backpressure), and epoll reports these regardless: gone. */
		int err = conn_sock_error(c);

		orch_conn_close(c, err ? -err : -ECONNRESET);
		goto out_put;
	}
	if (!c->c_closed && (events & EPOLLOUT))
		conn_flush(c);
out_put:
	orch_conn_put(c);
}
