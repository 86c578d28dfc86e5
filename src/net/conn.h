/*
 * A framed, authenticated connection on the event loop, in either role:
 * accepted (the server side of a client or peer) or connected (a server
 * reaching a peer).  The connection runs the HELLO/AUTH exchange of
 * net/auth.h itself (feeding orch_auth_step the frames it reads) and hands
 * frames to its owner only once the peer is authenticated, so no request
 * is served before that.
 *
 * Input is bounded: a frame longer than ORCH_MAXFRAME is refused from its
 * header, before anything is allocated.  Before the peer is authenticated
 * the bound is the handshake's (ORCH_AUTH_MAXFRAME): a longer frame is
 * refused from its header, and no more than ORCH_CONN_HS_IN_MAX bytes are
 * read ahead, so a stranger holds a few KiB at most (docs/DESIGN.md,
 * "Connections: what a stranger can hold").  Output is queued, and bounded
 * by backpressure: an acceptor whose output (queued, plus what the replies
 * its owner still owes will add) reaches ORCH_CONN_OUT_CAP stops reading
 * requests, before the next frame it would hand out, and reads again once
 * it is down to ORCH_CONN_OUT_LOW.  How long a handshake may take is the owner's call
 * (c_since_ms says when it began).
 *
 * Lifetime: refcounted.  orch_conn_close() closes the socket, calls
 * ops->on_close once and drops the loop's reference; holders of other
 * references (pending replies) see c_closed and must not send.
 * Threads: loop thread only.
 */
#ifndef ORCH_NET_CONN_H
#define ORCH_NET_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/cfg.h"
#include "net/auth.h"
#include "net/ev.h"
#include "proto/msg.h"
#include "proto/wire.h"

/*
 * What an acceptor's output may hold before it stops reading requests: a
 * peer that sends requests and reads no reply holds this much, plus the
 * one reply that crossed it (at most ORCH_MAXFRAME), plus what it sent and
 * we had read but not parsed (c_in, at most a frame and a read).  8 MiB is
 * seven replies of ORCH_IO_MAX, eight times a mount's default readahead
 * (readahead_kb): a client that reads its replies rarely reaches it, and
 * one that does, reading more ahead, loses no throughput, since reading
 * resumes with ORCH_CONN_OUT_LOW (4 MiB) and the socket's buffers still
 * queued for it.  4096 connections (the default max_connections) at the
 * cap are 32 GiB at worst, where the 64 MiB of before made 256 GiB.  Low
 * water at half, so a stream of large replies toggles reading once per
 * few MiB sent, not once per reply.
 */
#define ORCH_CONN_OUT_CAP (8u << 20)
#define ORCH_CONN_OUT_LOW (ORCH_CONN_OUT_CAP / 2)
/*
 * What a reply the owner owes (orch_conn_owe) counts against the cap until
 * it is queued: more than the state of a request that waits (a data
 * worker's job is 2.4 KiB) and than the replies that wait (status,
 * attributes, an entry), so a peer that floods requests the loop answers
 * later holds at most ORCH_CONN_OUT_CAP / ORCH_CONN_OWED_COST (2048) of
 * them, not as many as it can send.
 */
#define ORCH_CONN_OWED_COST 4096u
/* What a connection reads ahead before its peer is authenticated: one handshake frame. */
#define ORCH_CONN_HS_IN_MAX (ORCH_FRAME_HDR + ORCH_AUTH_MAXFRAME)

enum orch_conn_state {
	ORCH_CONN_CONNECTING,    /* connector: TCP connect in progress */
	ORCH_CONN_HANDSHAKE,     /* HELLO/AUTH under way (c_auth) */
	ORCH_CONN_READY,         /* authenticated: frames go to on_frame */
};

struct orch_conn;

struct orch_conn_ops {
	/*
	 * A complete frame from an authenticated peer.  @payload is valid only
	 * during the call.  The callback may close the connection.
	 */
	void (*on_frame)(struct orch_conn *c, const struct orch_frame_hdr *h,
			 const uint8_t *payload);
	/* Connector role: the handshake finished; queued frames were sent. */
	void (*on_ready)(struct orch_conn *c);
	/* Called once when the connection closes, for any reason. */
	void (*on_close)(struct orch_conn *c, int reason);
	/*
	 * Acceptor: HELLO features (ORCH_FEAT_*) it grants when asked, and in
	 * the bits above ORCH_FEAT_BITS its parameters, always sent.
	 * Connector: the features it asks for.
	 */
	uint64_t features;
};

struct orch_conn {
	int c_fd;
	int c_refs;
	bool c_closed;
	bool c_reading;                 /* EPOLLIN armed (off under backpressure) */
	bool c_parsing;                 /* conn_parse is handing frames out */
	uint32_t c_owed;                /* replies the owner owes (orch_conn_owe) */
	struct orch_ev_timer c_kick;    /* parses what c_in holds once reading resumes */
	uint32_t c_events;              /* what epoll watches for now */
	enum orch_conn_state c_state;
	struct orch_ev *c_ev;
	const struct orch_conn_ops *c_ops;
	void *c_arg;                    /* owner's context */
	struct orch_auth c_auth;        /* the handshake; its role is the conn's */
	uint32_t c_origin;              /* peer: server index or ORCH_ORIGIN_CLIENT */
	uint64_t c_features;            /* granted in the handshake */
	bool c_lost;                    /* a frame could not be queued: close, not write */
	uint64_t c_since_ms;            /* monotonic: accepted, or connecting began */
	/*
	 * The owner's, for one list of its connections (the server's lease
	 * table lists those with pushes queued); conn.c never touches them.
	 */
	bool c_listed;
	struct orch_conn *c_listed_next;
	/*
	 * The owner's too: the pushes numbered on this connection
	 * (ORCH_FEAT_ACKS, the server's lease table) and the last the peer
	 * acknowledged.
	 */
	uint64_t c_push_seq;
	uint64_t c_push_acked;
	struct orch_buf c_in;
	size_t c_in_off;                /* parsed bytes at the head of c_in */
	struct orch_buf c_out;
	size_t c_out_off;               /* sent bytes at the head of c_out */
	struct orch_buf c_held;         /* connector: frames queued before READY */
	uint64_t c_bytes_in;
	uint64_t c_bytes_out;
	char c_peer[64];                /* "host:port" for logs */
};

/*
 * Wraps accepted socket @fd (acceptor role), which will prove @key (borrowed
 * for the connection's life).  Takes ownership of @fd.  0, -ENOMEM, -EIO
 * (no nonce) or the loop's error.
 */
int orch_conn_accept(struct orch_ev *ev, int fd, const uint8_t *key,
		     const struct orch_conn_ops *ops, void *arg, struct orch_conn **out);

/*
 * Starts connecting to @host:@port (connector role), announcing @self as
 * our origin and proving @key (borrowed for the connection's life).
 * Frames sent before the handshake completes are held and flushed at
 * READY.  Failure to connect arrives as on_close.
 */
int orch_conn_connect(struct orch_ev *ev, const char *host, uint16_t port,
		      const uint8_t *key, uint32_t self,
		      const struct orch_conn_ops *ops, void *arg, struct orch_conn **out);

/*
 * Encodes @m and queues it.  0, or -EPIPE if closed, -EMSGSIZE/-EINVAL if
 * unencodable (nothing queued).
 */
int orch_conn_send(struct orch_conn *c, const struct orch_msg *m);
/*
 * The same without writing to the socket: the frame leaves with the next
 * orch_conn_send() or orch_conn_flush(), so several go out in one write.
 * Never closes @c: a frame lost for want of memory (the buffer dropped what
 * it held) marks it, and the next flush closes it instead, so the peer
 * starts afresh rather than miss a frame.
 */
int orch_conn_queue(struct orch_conn *c, const struct orch_msg *m);
/* The same for a frame encoded already (orch_msg_encode), @n bytes at @frame. */
int orch_conn_queue_frame(struct orch_conn *c, const void *frame, size_t n);
void orch_conn_flush(struct orch_conn *c);
/*
 * The owner took a request it will answer later or elsewhere (a worker
 * thread, a peer's answer): until orch_conn_paid(), it counts
 * ORCH_CONN_OWED_COST against @c's output cap.  Loop thread, like the rest.
 */
void orch_conn_owe(struct orch_conn *c);
/* The reply is queued, or will never be: the charge goes. */
void orch_conn_paid(struct orch_conn *c);
/* Closes (idempotent); @reason (-errno or 0) goes to on_close. */
void orch_conn_close(struct orch_conn *c, int reason);

/* "host:port" of the peer of socket @fd, for logs ("?:0" if unknown). */
void orch_conn_peer_name(int fd, char *out, size_t outlen);

void orch_conn_get(struct orch_conn *c);
void orch_conn_put(struct orch_conn *c);

#endif
