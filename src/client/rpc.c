/*
 * liborchard's transport.  See rpc.h.
 *
 * Each server has one struct rpc_conn.  A call encodes its frame, makes
 * sure the connection is up (connecting it if needed, bounded by the call's
 * deadline), enters the in-flight table under c_lock, and writes the frame
 * under c_send_lock.  Waiting is leader/follower: the first waiting caller
 * takes the reader role and reads frames itself, handing each reply to its
 * call (a condvar signal) until its own arrives; then it passes the role to
 * another waiting call.  In the common case (one request at a time) the
 * reply wakes the thread that waits for it and nobody else: a receiver
 * thread would add a second wakeup per request, about a third of a
 * round trip on a loaded two-core machine.  The reply is decoded by its own
 * caller, so decoding large READ replies runs in parallel.
 *
 * With nothing in flight nobody reads: a connection the server closed is
 * noticed (poll for a hang-up) before the next request is written on it.
 *
 * Lock order: c_send_lock, then c_lock.  No lock is held across a wait for
 * the peer except c_send_lock while a frame is being written, and that write
 * is bounded by the call's deadline.
 *
 * Socket lifetime: a reader never closes the socket.  On a read error it
 * fails the calls in flight, marks the connection down and shutdown()s the
 * socket, which also makes any writer fail at once.  The socket is closed
 * only by the next connector (once no reader holds it) or by destroy, both
 * holding c_send_lock, so nobody can read or write a descriptor number that
 * has been reused for another socket.
 */
#include "client/rpc.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/log.h"
#include "common/util.h"
#include "net/auth.h"

#define RPC_BUCKETS 64            /* in-flight table size per connection */
#define RPC_MAXTYPES 64           /* room for every type of msg.def */
#define RPC_RBUF (64u << 10)      /* read buffer: many small replies per recv */
#define RPC_TAIL_MIN (16u << 10)  /* data this large is sent, not copied into the frame */
#define RPC_RECV_SLICE_MS 1000    /* a reader's blocking recv gives up this often */
#define RPC_PROBE_MS 500          /* deadline of a probe of a sick server (at most) */
#define RPC_PROBE_GAP_MS 250      /* between the end of one probe and the next */
/* Replica groups (SPEC-wire.md): the dial of one member, the pauses while none leads. */
#define RPC_MEMBER_DIAL_MS 1000
#define RPC_NOLEADER_PAUSE_MS 20
#define RPC_NOLEADER_PAUSE_MAX_MS 320
/*
 * A member silent this long is given up for the next, within the call's
 * deadline: a leader cut off from its group is replaced in about 2 s.
 */
#define RPC_GROUP_TRY_MS 2500
/*
 * A silent server (nothing from it since its oldest call in flight was
 * sent) keeps this many callers waiting to their deadline; the others give
 * up after a grace of a quarter of the deadline, in [250 ms, 1 s]: so a
 * server that hangs holds few of the caller's threads (a mount's FUSE
 * workers), and calls to the other servers find threads to run on.
 */
#define RPC_SILENT_KEEP 2
#define RPC_SILENT_GRACE_MIN_MS 250
#define RPC_SILENT_GRACE_MAX_MS 1000

enum rpc_state {
	RPC_DOWN,       /* no socket; the next call connects */
	RPC_CONNECTING, /* one caller is connecting; the others wait */
	RPC_UP,         /* handshake done */
};

struct orch_call {
	uint64_t ca_reqid;
	uint16_t ca_type;            /* of the request, to check the reply */
	struct rpc_conn *ca_conn;
	uint64_t ca_deadline_ms;     /* CLOCK_MONOTONIC */
	/*
	 * A try on a group's member (rpc_call_shorten): ca_deadline_ms ends
	 * the try, this the call, which goes on if the member looks alive.
	 */
	uint64_t ca_full_deadline_ms;
	uint64_t ca_sent_ms;         /* when it was made */
	bool ca_probe;               /* the probe of a sick server (c_probing) */
	pthread_cond_t ca_cond;      /* signalled when ca_done is set */
	bool ca_done;                /* protected by conn->c_lock */
	bool ca_queued;              /* in the table; protected by conn->c_lock */
	bool ca_waiting;             /* its caller sleeps on ca_cond; by c_lock */
	bool ca_awaited;             /* a thread is in rpc_wait for it; by c_lock */
	int ca_error;                /* -EIO if the connection broke */
	struct orch_frame_hdr ca_hdr; /* of the reply */
	uint64_t ca_stamp;           /* the reply's place in its connection's stream */
	bool ca_leased;              /* ... on a connection with leases */
	uint64_t ca_gen;             /* generation of the connection it was sent on */
	uint8_t *ca_payload;         /* owned until handed to the reply */
	struct orch_call *ca_next;   /* bucket chain; protected by c_lock */
	/*
	 * A request to a replica group that changes no namespace, sent by
	 * orch_client_send: what orch_client_wait sends again, to the next
	 * leader, if this try fails as a failover makes calls fail.  NULL
	 * otherwise.
	 */
	struct rpc_again *ca_again;
};

struct rpc_again {
	unsigned int a_server;
	uint64_t a_deadline_ms;      /* the whole call's */
	int a_send_error;            /* not sent: why (the wait goes straight to a retry) */
	/* The request, encoded whole: the caller may reuse its buffers once sent. */
	struct orch_buf a_frame;
};

static void rpc_again_free(struct rpc_again *a)
{
	if (a) {
		orch_buf_fini(&a->a_frame);
		free(a);
	}
}

struct rpc_conn {
	struct orch_client *c_client;
	unsigned int c_index;        /* server index in the config (a replica group) */
	/*
	 * The member of the group the connection goes to (replicas > 1): the
	 * one a member named as leader, else the next after one that failed.
	 * Under c_lock; read by the connector.
	 */
	unsigned int c_member;
	unsigned int c_up_member;    /* the member of the connection up, or last up */
	pthread_mutex_t c_send_lock; /* one frame written at a time; guards c_fd use */
	pthread_mutex_t c_lock;      /* protects everything below but the reader state */
	pthread_cond_t c_state_cond; /* broadcast when a connect attempt ends, or
					the reader role is given up */
	enum rpc_state c_state;
	int c_fd;                    /* -1 when closed; closed under both locks */
	uint64_t c_gen;              /* bumped on every successful connect */
	uint64_t c_features;         /* granted in this connection's HELLO */
	/*
	 * Frames read from this server, over every connection: each reply and
	 * push gets the next value, so stamps order them (the lease cache of
	 * the caller, rpc.h).  Under c_lock.
	 */
	uint64_t c_stamp;
	bool c_closing;              /* destroy is tearing it down: no notice */
	/* The last handshake proved the server holds another key (rpc.h). */
	_Atomic bool c_key_mismatch;
	bool c_reading;              /* a caller holds the reader role */
	/*
	 * Health (rpc.h, "Sick servers"): the server let a call's whole
	 * deadline pass without sending us anything.  While sick, calls fail at
	 * once with -ETIMEDOUT but one at a time, the probe, which reconnects
	 * with a short deadline, no sooner than c_probe_at_ms.  A connect that
	 * succeeds, or any frame read, makes it healthy again.
	 */
	bool c_sick;
	bool c_probing;
	uint64_t c_probe_at_ms;
	uint64_t c_last_rx_ms;       /* when the last frame came (or we connected) */
	unsigned int c_inflight;     /* calls in the table */
	struct orch_call *c_calls[RPC_BUCKETS]; /* in flight, by reqid */

	/* Reader state: only the holder of the reader role touches it. */
	uint8_t *c_rbuf;             /* RPC_RBUF bytes */
	size_t c_rpos, c_rlen;       /* unread bytes are c_rbuf[c_rpos, c_rlen) */
	bool c_have_hdr;             /* a frame is half read: */
	struct orch_frame_hdr c_hdr; /* its header */
	uint8_t *c_payload;          /* its payload so far */
	size_t c_pgot;
	int c_rcvtimeo_ms;           /* the socket's SO_RCVTIMEO; set by the connector too */
	bool c_nowait;               /* recv without waiting (orch_client_poll) */
	/*
	 * Odd while the reader sleeps in recv.  The reader only sleeps once
	 * every whole frame it has is dispatched, so odd, unchanged across a
	 * check that the socket holds nothing, means nothing arrived undealt.
	 */
	_Atomic uint64_t c_recv_seq;
};

struct orch_client {
	struct orch_cfg cl_cfg;
	_Atomic uint32_t cl_timeout_ms;
	uint32_t cl_test_resend_delay_ms;          /* ORCH_TEST_RESEND_DELAY; 0: off */
	_Atomic uint64_t cl_next_reqid;
	size_t cl_ntypes;
	uint16_t cl_types[RPC_MAXTYPES];           /* as orch_msg_types() */
	_Atomic uint64_t cl_counts[RPC_MAXTYPES];  /* requests sent, per type */
	struct rpc_conn *cl_conns;                 /* cl_cfg.nservers of them */
	orch_push_fn cl_push;                      /* set before the first call */
	void *cl_push_arg;
	bool cl_push_acks;                         /* the handler acknowledges pushes */
	orch_dial_fn cl_dial;                      /* tests: set before the first call */
	void *cl_dial_arg;
	/*
	 * Exactly once (replica groups): this client's id, its next request
	 * number, and the numbers of those not answered yet (their least is
	 * what the group may forget below).
	 */
	uint64_t cl_id;
	pthread_mutex_t cl_seq_lock;
	uint64_t cl_next_seq;
	uint64_t *cl_seqs;
	size_t cl_nseqs, cl_seqs_cap;
};

/* The members of @c's group, or 1 (a server of old). */
static unsigned int rpc_members(const struct rpc_conn *c)
{
	const struct orch_cfg *cfg = &c->c_client->cl_cfg;

	return cfg->replicas > 1 ? cfg->replicas : 1;
}

/* True if @server is a replica group of several members. */
static bool rpc_is_group(const struct orch_client *cl, unsigned int server)
{
	return server < cl->cl_cfg.nservers && cl->cl_cfg.replicas > 1;
}

/* --- Time ---------------------------------------------------------------------- */

/*
 * Deadlines use CLOCK_MONOTONIC directly, not orch_time_now_ms(), because the
 * condvars wait on that clock and the test offset of time.h must not shift
 * real waits.
 */
static uint64_t rpc_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int rpc_remaining_ms(uint64_t deadline_ms)
{
	uint64_t now = rpc_now_ms();

	if (now >= deadline_ms)
		return 0;
	return (int)ORCH_MIN(deadline_ms - now, (uint64_t)INT32_MAX);
}

static void rpc_timespec(uint64_t ms, struct timespec *ts)
{
	ts->tv_sec = (time_t)(ms / 1000);
	ts->tv_nsec = (long)(ms % 1000) * 1000000;
}

static int rpc_cond_init(pthread_cond_t *cond)
{
	pthread_condattr_t attr;
	int rc;

	rc = pthread_condattr_init(&attr);
	if (rc)
		return -rc;
	rc = pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
	return -rc;
}

/* --- Socket I/O with a deadline --------------------------------------------------- */

/*
 * Sends @cnt buffers (@iov is consumed) before the deadline, in one
 * sendmsg where the socket takes them.  *@sent gets the bytes that left.
 * 0, -ETIMEDOUT or -EIO.  MSG_NOSIGNAL: a dead peer must not kill the
 * process with SIGPIPE.
 */
static int rpc_send_iov(int fd, struct iovec *iov, int cnt, uint64_t deadline_ms, size_t *sent)
{
	size_t done = 0;

	while (cnt > 0) {
		struct msghdr mh = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
		ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (w > 0) {
			done += (size_t)w;
			while (cnt > 0 && (size_t)w >= iov->iov_len) {
				w -= (ssize_t)iov->iov_len;
				iov++;
				cnt--;
			}
			if (cnt > 0) {
				iov->iov_base = (char *)iov->iov_base + w;
				iov->iov_len -= (size_t)w;
			}
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };
			int ms = rpc_remaining_ms(deadline_ms);
			int rc;

			if (ms == 0) {
				*sent = done;
				return -ETIMEDOUT;
			}
			rc = poll(&pfd, 1, ms);
			if (rc < 0 && errno != EINTR) {
				*sent = done;
				return -EIO;
			}
			continue;
		}
		*sent = done;
		return -EIO;
	}
	*sent = done;
	return 0;
}

/*
 * With the server down, a connect to a local port inside the ephemeral range
 * can pick that very port as its source and connect to itself (TCP
 * simultaneous open); the handshake would then read back its own HELLO.
 */
static bool rpc_is_self_connect(int fd)
{
	struct sockaddr_storage a, b;
	socklen_t alen = sizeof(a), blen = sizeof(b);

	if (getsockname(fd, (struct sockaddr *)&a, &alen) ||
	    getpeername(fd, (struct sockaddr *)&b, &blen))
		return true; /* not connected after all */
	return alen == blen && memcmp(&a, &b, alen) == 0;
}

/*
 * Connects to @ai before the deadline.  A SYN that gets no answer is
 * retransmitted by TCP only after 1 s, and a connection whose SYN was
 * retransmitted starts with a 3 s retransmission timeout; so while no
 * attempt has connected, a fresh one starts every RPC_DIAL_RETRY_MS (at
 * most RPC_DIAL_MAX at once), and the first to connect wins: on a lossy
 * link, or one that just healed, the connection is made within a round
 * trip of a SYN getting through.  Returns a connected non-blocking socket,
 * or -1 (refused, unreachable, or the deadline).
 */
#define RPC_DIAL_RETRY_MS 300
#define RPC_DIAL_MAX 4
static int rpc_dial_one(const struct addrinfo *ai, uint64_t deadline_ms)
{
	struct pollfd pfd[RPC_DIAL_MAX];
	int n = 0, won = -1;
	uint64_t next_ms = 0;

	for (;;) {
		uint64_t now = rpc_now_ms();
		int ms, rc;

		if (now >= deadline_ms)
			break;
		if (n < RPC_DIAL_MAX && now >= next_ms) {
			int fd = socket(ai->ai_family,
					ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);

			if (fd < 0)
				break;
			rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
			if (rc == 0) {
				won = fd;
				break;
			}
			if (errno != EINPROGRESS) {
				close(fd);
				break; /* refused, unreachable: no use trying again now */
			}
			pfd[n++] = (struct pollfd){ .fd = fd, .events = POLLOUT };
			next_ms = now + RPC_DIAL_RETRY_MS;
		}
		ms = rpc_remaining_ms(deadline_ms);
		if (n < RPC_DIAL_MAX)
			ms = (int)ORCH_MIN((uint64_t)ms, next_ms > now ? next_ms - now : 0);
		rc = poll(pfd, (nfds_t)n, ms);
		if (rc < 0 && errno != EINTR)
			break;
		for (int i = 0; rc > 0 && i < n; i++) {
			int soerr = 0;
			socklen_t slen = sizeof(soerr);

			if (!pfd[i].revents)
				continue;
			if (getsockopt(pfd[i].fd, SOL_SOCKET, SO_ERROR, &soerr, &slen) == 0 &&
			    soerr == 0) {
				won = pfd[i].fd;
				pfd[i].fd = -1;
				break;
			}
			/* This one failed (refused): so would a new one. */
			next_ms = UINT64_MAX;
			close(pfd[i].fd);
			pfd[i] = pfd[--n];
			i--;
			rc--;
		}
		if (won >= 0 || (n == 0 && next_ms == UINT64_MAX))
			break;
	}
	for (int i = 0; i < n; i++)
		if (pfd[i].fd >= 0)
			close(pfd[i].fd);
	return won;
}

/*
 * Connects to @host:@port before the deadline, trying every address.
 * Returns a blocking TCP_NODELAY socket, or -EHOSTDOWN.
 */
static int rpc_dial(const struct orch_server_cfg *sv, uint64_t deadline_ms)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res, *ai;
	char port[8];
	int fd = -1;

	snprintf(port, sizeof(port), "%u", sv->port);
	/* getaddrinfo() cannot be bounded; configs use numeric addresses. */
	if (getaddrinfo(sv->host, port, &hints, &res) != 0)
		return -EHOSTDOWN;
	for (ai = res; ai; ai = ai->ai_next) {
		int one = 1;

		fd = rpc_dial_one(ai, deadline_ms);
		if (fd >= 0 && !rpc_is_self_connect(fd) &&
		    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			break;
		}
		if (fd >= 0)
			close(fd);
		fd = -1;
		if (rpc_remaining_ms(deadline_ms) == 0)
			break;
	}
	freeaddrinfo(res);
	return fd >= 0 ? fd : -EHOSTDOWN;
}

/* --- The in-flight table (all under c_lock) ----------------------------------------- */

static struct orch_call **rpc_bucket(struct rpc_conn *c, uint64_t reqid)
{
	return &c->c_calls[reqid % RPC_BUCKETS];
}

static void rpc_table_insert(struct rpc_conn *c, struct orch_call *call)
{
	struct orch_call **b = rpc_bucket(c, call->ca_reqid);

	call->ca_next = *b;
	*b = call;
	call->ca_queued = true;
	c->c_inflight++;
}

/* True if the call with @reqid is in the table.  c_lock held. */
static bool rpc_table_has(struct rpc_conn *c, uint64_t reqid)
{
	for (struct orch_call *call = *rpc_bucket(c, reqid); call; call = call->ca_next)
		if (call->ca_reqid == reqid)
			return true;
	return false;
}

/* Unlinks and returns the call with @reqid, or NULL (timed out, or never ours). */
static struct orch_call *rpc_table_take(struct rpc_conn *c, uint64_t reqid)
{
	for (struct orch_call **p = rpc_bucket(c, reqid); *p; p = &(*p)->ca_next) {
		struct orch_call *call = *p;

		if (call->ca_reqid == reqid) {
			*p = call->ca_next;
			call->ca_next = NULL;
			call->ca_queued = false;
			c->c_inflight--;
			return call;
		}
	}
	return NULL;
}

static void rpc_table_fail_all(struct rpc_conn *c, int error)
{
	for (size_t i = 0; i < RPC_BUCKETS; i++) {
		while (c->c_calls[i]) {
			struct orch_call *call = c->c_calls[i];

			c->c_calls[i] = call->ca_next;
			call->ca_next = NULL;
			call->ca_queued = false;
			call->ca_error = error;
			call->ca_done = true;
			pthread_cond_signal(&call->ca_cond);
		}
	}
	c->c_inflight = 0;
}

/*
 * Wakes one call whose caller sleeps in orch_client_wait, so that it takes
 * the reader role.  Only a sleeper will do: a call in the table may belong
 * to a thread busy elsewhere (waiting for another call of its fan-out, on
 * another connection), and a wakeup sent to it would be lost while the
 * sleepers here sleep to their deadline.  If nobody sleeps, the next
 * caller to wait takes the role itself.
 */
static void rpc_table_wake_one(struct rpc_conn *c)
{
	if (!c->c_inflight)
		return;
	for (size_t i = 0; i < RPC_BUCKETS; i++) {
		for (struct orch_call *call = c->c_calls[i]; call; call = call->ca_next) {
			if (call->ca_waiting) {
				pthread_cond_signal(&call->ca_cond);
				return;
			}
		}
	}
}

/* --- Reading: the reader role ----------------------------------------------------- */

/* Sets the socket's receive timeout to @ms (> 0).  0 or -errno. */
static int rpc_set_rcvtimeo(int fd, int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	return setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ? -errno : 0;
}

/*
 * Receives up to @len bytes into @p, waiting until the deadline: the
 * number received (> 0), -ETIMEDOUT, or -EIO on end of stream or error.
 *
 * The socket is blocking with a receive timeout (SO_RCVTIMEO), so a reader
 * waiting for a reply makes one recv that sleeps until it comes.  A
 * non-blocking recv and then poll and recv again cost two more syscalls per
 * request, and with one request at a time (a FUSE worker's stat) the first
 * recv nearly always found nothing.  The timeout is RPC_RECV_SLICE_MS, cut
 * to what is left of the deadline near its end; only then does it change
 * (a setsockopt).  shutdown() by another thread ends the recv as it ended
 * the poll.
 */
static ssize_t rpc_recv_some(struct rpc_conn *c, int fd, uint8_t *p, size_t len,
			     uint64_t deadline_ms)
{
	for (;;) {
		int ms = rpc_remaining_ms(deadline_ms);
		ssize_t r;

		if (ms == 0)
			return -ETIMEDOUT;
		ms = ORCH_MIN(ms, RPC_RECV_SLICE_MS);
		if (ms != c->c_rcvtimeo_ms) {
			if (rpc_set_rcvtimeo(fd, ms))
				return -EIO;
			c->c_rcvtimeo_ms = ms;
		}
		atomic_fetch_add(&c->c_recv_seq, 1);
		r = recv(fd, p, len, c->c_nowait ? MSG_DONTWAIT : 0);
		atomic_fetch_add(&c->c_recv_seq, 1);
		if (r > 0)
			return r;
		if (r == 0)
			return -EIO;
		if (c->c_nowait && (errno == EAGAIN || errno == EWOULDBLOCK))
			return -EAGAIN;
		if (errno != EINTR && errno != EAGAIN && errno != EWOULDBLOCK)
			return -EIO;
	}
}

/* Reads more bytes into the buffer: 0 when some arrived, or -errno. */
static int rpc_fill(struct rpc_conn *c, int fd, uint64_t deadline_ms)
{
	ssize_t r;

	if (c->c_rpos == c->c_rlen) {
		c->c_rpos = c->c_rlen = 0;
	} else if (c->c_rlen == RPC_RBUF) {
		memmove(c->c_rbuf, c->c_rbuf + c->c_rpos, c->c_rlen - c->c_rpos);
		c->c_rlen -= c->c_rpos;
		c->c_rpos = 0;
	}
	r = rpc_recv_some(c, fd, c->c_rbuf + c->c_rlen, RPC_RBUF - c->c_rlen, deadline_ms);
	if (r < 0)
		return (int)r;
	c->c_rlen += (size_t)r;
	return 0;
}

/* Reads straight into the payload: for the big part of a big frame. */
static int rpc_recv_payload(struct rpc_conn *c, int fd, uint64_t deadline_ms)
{
	ssize_t r = rpc_recv_some(c, fd, c->c_payload + c->c_pgot, c->c_hdr.length - c->c_pgot,
				  deadline_ms);

	if (r < 0)
		return (int)r;
	c->c_pgot += (size_t)r;
	return 0;
}

/*
 * Reads one whole frame: 0 with *@h and *@payload (the caller's), or
 * -ETIMEDOUT or -EAGAIN (c_nowait: a half-read frame stays for the next
 * reader), -EIO, -EPROTO.
 * The header is checked against @max (ORCH_MAXFRAME, or less in the
 * handshake) before the payload is allocated, so a peer cannot make us
 * allocate more.
 */
static int rpc_read_frame(struct rpc_conn *c, int fd, uint64_t deadline_ms, uint32_t max,
			  struct orch_frame_hdr *h, uint8_t **payload)
{
	const char *name = c->c_client->cl_cfg.servers[c->c_index].name;
	int error;

	if (!c->c_have_hdr) {
		while (c->c_rlen - c->c_rpos < ORCH_FRAME_HDR) {
			error = rpc_fill(c, fd, deadline_ms);
			if (error)
				return error;
		}
		orch_frame_hdr_decode(c->c_rbuf + c->c_rpos, &c->c_hdr);
		c->c_rpos += ORCH_FRAME_HDR;
		if (c->c_hdr.length > max) {
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
					   "oversized frame from server '%s': type=0x%04x length=%u",
					   name, c->c_hdr.type, c->c_hdr.length);
			return -EPROTO;
		}
		c->c_payload = malloc(c->c_hdr.length ? c->c_hdr.length : 1);
		if (!c->c_payload) {
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
					   "cannot allocate reply from server '%s': length=%u",
					   name, c->c_hdr.length);
			return -EPROTO;
		}
		c->c_pgot = 0;
		c->c_have_hdr = true;
	}
	while (c->c_pgot < c->c_hdr.length) {
		size_t want = c->c_hdr.length - c->c_pgot;

		if (c->c_rpos < c->c_rlen) {
			size_t n = ORCH_MIN(want, c->c_rlen - c->c_rpos);

			memcpy(c->c_payload + c->c_pgot, c->c_rbuf + c->c_rpos, n);
			c->c_rpos += n;
			c->c_pgot += n;
			continue;
		}
		error = want >= RPC_RBUF / 2 ? rpc_recv_payload(c, fd, deadline_ms)
					     : rpc_fill(c, fd, deadline_ms);
		if (error)
			return error;
	}
	*h = c->c_hdr;
	*payload = c->c_payload;
	c->c_payload = NULL;
	c->c_have_hdr = false;
	return 0;
}

/* Forgets a half-read frame and buffered bytes (the stream is gone). */
static void rpc_reader_reset(struct rpc_conn *c)
{
	free(c->c_payload);
	c->c_payload = NULL;
	c->c_have_hdr = false;
	c->c_rpos = c->c_rlen = 0;
}

/*
 * What the caller cached from this server may be stale from now on: the
 * connection (and the server's record of our leases) went or came.  c_lock
 * held.
 */
static void rpc_push_reset_locked(struct rpc_conn *c)
{
	struct orch_client *cl = c->c_client;

	if (cl->cl_push)
		cl->cl_push(cl->cl_push_arg, c->c_index, ++c->c_stamp, NULL, c->c_gen, 0);
}

/*
 * The connection broke (c_lock held, generation @gen): fails the calls in
 * flight, marks it down and shuts the socket down.
 */
static void rpc_conn_broken_locked(struct rpc_conn *c, int fd)
{
	const char *name = c->c_client->cl_cfg.servers[c->c_index].name;

	rpc_table_fail_all(c, -EIO);
	if (c->c_state == RPC_UP && !c->c_closing)
		ORCH_NOTICE("connection lost: server='%s'", name);
	rpc_push_reset_locked(c);
	c->c_state = RPC_DOWN;
	/* Wakes a writer blocked on this socket; the next connector closes it. */
	shutdown(fd, SHUT_RDWR);
}

/* The server answered (c_lock held). */
static void rpc_healthy_locked(struct rpc_conn *c)
{
	if (c->c_sick) {
		c->c_sick = false;
		ORCH_NOTICE("server answers again: server='%s'",
			    c->c_client->cl_cfg.servers[c->c_index].name);
	}
}

/*
 * The server let a deadline pass in silence (c_lock held): it is sick
 * until it answers a probe.  Its connection is dropped, failing the calls
 * that wait on it, and the probe dials afresh: a new connection sees the
 * network as soon as it is back, where the old one would wait out TCP's
 * retransmission backoff.
 */
static void rpc_sick_locked(struct rpc_conn *c)
{
	/*
	 * A silent member of a group: the probe asks the next one (once: not
	 * again for each caller that saw the same silence).
	 */
	if (rpc_members(c) > 1 && c->c_member == c->c_up_member)
		c->c_member = (c->c_member + 1) % rpc_members(c);
	if (!c->c_sick) {
		c->c_sick = true;
		c->c_probe_at_ms = rpc_now_ms() + RPC_PROBE_GAP_MS;
		ORCH_NOTICE("server not answering: failing its requests at once until it does: server='%s'",
			    c->c_client->cl_cfg.servers[c->c_index].name);
	}
	if (c->c_state == RPC_UP)
		rpc_conn_broken_locked(c, c->c_fd);
}

/*
 * Hands frame @h (@payload is consumed) to its call, or a push to the push
 * handler, stamped in stream order.  c_lock held.  Returns the call it
 * completed, or NULL.
 */
static struct orch_call *rpc_frame_dispatch_locked(struct rpc_conn *c,
						   const struct orch_frame_hdr *h,
						   uint8_t *payload)
{
	struct orch_client *cl = c->c_client;
	uint64_t stamp = ++c->c_stamp;
	struct orch_call *to;

	c->c_last_rx_ms = rpc_now_ms();
	rpc_healthy_locked(c);
	if (h->flags & ORCH_FRAME_PUSH) {
		struct orch_msg m;

		if (cl->cl_push && (c->c_features & ORCH_FEAT_LEASES) &&
		    orch_msg_decode(h, payload, &m) == 0) {
			uint64_t seq = 0;

			/* With acknowledgements, reqid is the push's number unless OWN. */
			if ((c->c_features & ORCH_FEAT_ACKS) && !(h->flags & ORCH_FRAME_OWN)) {
				seq = m.reqid;
				m.reqid = 0;
			}
			/*
			 * "Caused by your request" (SPEC-wire.md) holds only
			 * for a call still waiting: one that timed out was
			 * never applied by our caller.
			 */
			if (m.reqid && !rpc_table_has(c, m.reqid))
				m.reqid = 0;
			cl->cl_push(cl->cl_push_arg, c->c_index, stamp, &m, c->c_gen, seq);
			orch_msg_fini(&m);
		} else if (cl->cl_push) {
			/* A push we cannot read: forget everything from this server. */
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
					   "unreadable push from server '%s': type=0x%04x length=%u",
					   cl->cl_cfg.servers[c->c_index].name, h->type, h->length);
			cl->cl_push(cl->cl_push_arg, c->c_index, stamp, NULL, c->c_gen, 0);
		}
		free(payload);
		return NULL;
	}
	if (!(h->flags & ORCH_FRAME_REPLY)) {
		free(payload);
		return NULL;
	}
	to = rpc_table_take(c, h->reqid);
	if (!to) {
		free(payload); /* a late reply to a call that timed out */
		return NULL;
	}
	to->ca_hdr = *h;
	to->ca_payload = payload;
	to->ca_stamp = stamp;
	to->ca_leased = orch_msg_reply_leases(to->ca_type, c->c_features);
	to->ca_done = true;
	return to;
}

/*
 * As the holder of the reader role: reads one frame and dispatches it;
 * *@done gets the call it completed (or NULL).  Called and returns with
 * c_lock held, which it drops while reading.  Returns 0, -ETIMEDOUT or
 * -EAGAIN (nothing complete yet), or another -errno after which the
 * connection is broken.
 */
static int rpc_read_one_locked(struct rpc_conn *c, int fd, uint64_t deadline_ms,
			       struct orch_call **done)
{
	struct orch_frame_hdr h;
	uint8_t *payload = NULL;
	int error;

	*done = NULL;
	pthread_mutex_unlock(&c->c_lock);
	error = rpc_read_frame(c, fd, deadline_ms, ORCH_MAXFRAME, &h, &payload);
	pthread_mutex_lock(&c->c_lock);
	if (error == -ETIMEDOUT || error == -EAGAIN)
		return error;
	if (error) {
		rpc_reader_reset(c);
		rpc_conn_broken_locked(c, fd);
		return error;
	}
	*done = rpc_frame_dispatch_locked(c, &h, payload);
	return 0;
}

/*
 * Reads frames as the holder of the reader role until @call is done or its
 * deadline passes, handing other replies to their calls.  Called and
 * returns with c_lock held; gives up the role before it returns.
 */
static void rpc_read_until(struct rpc_conn *c, struct orch_call *call)
{
	int fd = c->c_fd;

	c->c_reading = true;
	while (!call->ca_done) {
		struct orch_call *to;

		if (rpc_read_one_locked(c, fd, call->ca_deadline_ms, &to))
			break;
		if (to && to != call)
			pthread_cond_signal(&to->ca_cond);
	}
	c->c_reading = false;
	rpc_table_wake_one(c);
	pthread_cond_broadcast(&c->c_state_cond);
}

/*
 * The reader role, without waiting: hands every frame that has arrived to
 * the call it answers.  c_lock held, the role free and the connection up.
 */
static void rpc_read_ready_locked(struct rpc_conn *c)
{
	int fd = c->c_fd;

	c->c_reading = true;
	c->c_nowait = true;
	for (;;) {
		struct orch_call *to;

		if (rpc_read_one_locked(c, fd, UINT64_MAX, &to))
			break;
		if (to)
			pthread_cond_signal(&to->ca_cond);
	}
	c->c_nowait = false;
	c->c_reading = false;
	rpc_table_wake_one(c);
	pthread_cond_broadcast(&c->c_state_cond);
}

/* --- Handshake -------------------------------------------------------------------- */

/* Encodes @m and writes it before the deadline.  0, -ETIMEDOUT or -EIO. */
static int rpc_hs_send(int fd, const struct orch_msg *m, uint64_t deadline_ms)
{
	struct orch_buf b;
	struct iovec iov;
	size_t sent;
	int error;

	orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_AUTH_MAXFRAME);
	error = orch_msg_encode(&b, m);
	if (!error) {
		iov = (struct iovec){ .iov_base = b.b_data, .iov_len = b.b_len };
		error = rpc_send_iov(fd, &iov, 1, deadline_ms, &sent);
	}
	orch_buf_fini(&b);
	return error;
}

/*
 * The handshake with @c's server ended with @rc < 0 (orch_auth_step) after
 * it read @h (if any): says why, in the client's words, and returns the
 * error for the caller.  A key mismatch has *@out to send: an AUTH with a
 * zero MAC, so the server logs the failure with our address; its answer
 * is read, bounded by the deadline, so the AUTH is in before we close.
 */
static int rpc_handshake_failed(struct rpc_conn *c, int fd, uint64_t deadline_ms,
				struct orch_auth *a, const struct orch_frame_hdr *h,
				struct orch_msg *out, int rc)
{
	struct orch_client *cl = c->c_client;
	const struct orch_server_cfg *sv = &cl->cl_cfg.servers[c->c_index];
	struct orch_frame_hdr ah;
	uint8_t *payload = NULL;

	if (rc == -EKEYREJECTED) {
		orch_auth_set_reqid(a, out, atomic_fetch_add(&cl->cl_next_reqid, 1));
		if (!rpc_hs_send(fd, out, deadline_ms) &&
		    !rpc_read_frame(c, fd, deadline_ms, ORCH_AUTH_MAXFRAME, &ah, &payload))
			free(payload);
		atomic_store(&c->c_key_mismatch, true);
		/* WARN: the callers say it in their own words (the CLI, the mount's check). */
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "authentication failed: cluster key does not match server %s: "
				   "address=%s:%u", sv->name, sv->host, sv->port);
	} else if (rc == -EPROTO) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "unexpected frame in handshake: type=0x%04x flags=0x%02x reqid=%llu length=%u want_type=0x%04x",
				   h->type, h->flags, (unsigned long long)h->reqid, h->length,
				   orch_auth_want(a));
	} else if (a->a_state == ORCH_AUTH_WAIT_AUTH) {
		/*
		 * It proved it holds our key, so this is no key mismatch: a
		 * broken or misbehaving server.
		 */
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "server '%s' rejected our authentication: %s",
				   sv->name, strerror(-rc));
	} else if (rc == -EPROTONOSUPPORT && a->a_version) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "server '%s' chose an unsupported version: version=%u",
				   sv->name, a->a_version);
	} else {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "server '%s' refused hello: %s",
				   sv->name, strerror(-rc));
	}
	return rc;
}

/*
 * The connector's side of net/auth.h: the step function's messages go out
 * numbered from the client's reqids, and the answers come in through the
 * reader (which no one else holds while the connection is being made),
 * bounded by ORCH_AUTH_MAXFRAME.  On success the connection's features
 * are those granted, less leases if the server keeps them for less than
 * our lease_ms.
 */
static int rpc_handshake(struct rpc_conn *c, int fd, uint64_t deadline_ms)
{
	struct orch_client *cl = c->c_client;
	uint8_t nonce[ORCH_NONCE_LEN];
	struct orch_frame_hdr h = { 0 };
	struct orch_auth a;
	struct orch_msg out;
	uint8_t *payload;
	int rc, error;

	error = orch_auth_nonce(nonce);
	if (error)
		return error;
	orch_auth_init(&a, ORCH_AUTH_CONNECTOR, cl->cl_cfg.key, nonce, ORCH_ORIGIN_CLIENT,
		       !cl->cl_push ? 0
		       : ORCH_FEAT_LEASES | ORCH_FEAT_WRITERS_ATTR |
			       (cl->cl_push_acks ? ORCH_FEAT_ACKS : 0));
	rc = orch_auth_step(&a, NULL, NULL, &out);
	while (rc == ORCH_AUTH_MORE) {
		orch_auth_set_reqid(&a, &out, atomic_fetch_add(&cl->cl_next_reqid, 1));
		error = rpc_hs_send(fd, &out, deadline_ms);
		if (!error)
			error = rpc_read_frame(c, fd, deadline_ms, ORCH_AUTH_MAXFRAME, &h, &payload);
		if (error)
			return error;
		rc = orch_auth_step(&a, &h, payload, &out);
		free(payload);
	}
	if (rc < 0)
		return rpc_handshake_failed(c, fd, deadline_ms, &a, &h, &out, rc);
	c->c_features = a.a_features;
	/*
	 * We may trust an entry for our own lease_ms after sending for it; a
	 * server that keeps leases for less would stop pushing before that.
	 */
	if (ORCH_FEAT_LEASE_MS(a.a_peer_features) < cl->cl_cfg.lease_ms) {
		if (c->c_features & ORCH_FEAT_LEASES)
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
					   "server '%s' keeps leases %u ms, less than our lease_ms %u: not caching from it (give clients and servers the same lease_ms)",
					   cl->cl_cfg.servers[c->c_index].name,
					   ORCH_FEAT_LEASE_MS(a.a_peer_features), cl->cl_cfg.lease_ms);
		c->c_features &= ~ORCH_FEAT_LEASES;
	}
	atomic_store(&c->c_key_mismatch, false);
	return 0;
}

/*
 * After the handshake with a member of a replica group: does it serve?  A
 * ping answers even from a follower, with the leader it knows
 * (ORCH_PING_FOLLOWER), so every request sent on the connection, the
 * striped reads and writes of orch_client_send included, goes to the
 * leader.  0 if it serves; -ORCH_ENOTLEADER with c_member moved to the
 * leader it names (*@known true) or to the next member; else -errno.
 */
static int rpc_probe_leader(struct rpc_conn *c, int fd, uint64_t deadline_ms, bool *known)
{
	struct orch_client *cl = c->c_client;
	struct orch_frame_hdr h = { 0 };
	struct orch_msg ping, rep;
	uint8_t *payload;
	uint32_t leader;
	int error;

	orch_msg_init(&ping, ORCH_AN2AN_PING);
	ping.reqid = atomic_fetch_add(&cl->cl_next_reqid, 1);
	error = rpc_hs_send(fd, &ping, deadline_ms);
	if (!error)
		error = rpc_read_frame(c, fd, deadline_ms, ORCH_AUTH_MAXFRAME, &h, &payload);
	if (error)
		return error;
	if (h.type != ORCH_AN2AN_PING || !(h.flags & ORCH_FRAME_REPLY) || h.reqid != ping.reqid) {
		free(payload);
		return -EPROTO;
	}
	error = orch_msg_decode(&h, payload, &rep);
	free(payload);
	if (error)
		return -EPROTO;
	error = rep.status;
	leader = ORCH_PING_LEADER(rep.features);
	if (!error && (rep.features & ORCH_PING_FOLLOWER)) {
		pthread_mutex_lock(&c->c_lock);
		*known = leader < rpc_members(c) && leader != c->c_member;
		c->c_member = *known ? leader : (c->c_member + 1) % rpc_members(c);
		pthread_mutex_unlock(&c->c_lock);
		error = -ORCH_ENOTLEADER;
	}
	orch_msg_fini(&rep);
	return error;
}

/* --- Connecting ---------------------------------------------------------------------- */

/*
 * Closes the previous socket once no reader holds it.  Called by the
 * connector while c_state is RPC_CONNECTING (so nobody takes the reader
 * role or uses a new socket meanwhile), and by destroy.
 */
static void rpc_conn_reap(struct rpc_conn *c)
{
	pthread_mutex_lock(&c->c_lock);
	while (c->c_reading)
		pthread_cond_wait(&c->c_state_cond, &c->c_lock);
	pthread_mutex_unlock(&c->c_lock);

	pthread_mutex_lock(&c->c_send_lock);
	pthread_mutex_lock(&c->c_lock);
	if (c->c_fd >= 0)
		close(c->c_fd);
	c->c_fd = -1;
	rpc_reader_reset(c);
	pthread_mutex_unlock(&c->c_lock);
	pthread_mutex_unlock(&c->c_send_lock);
}

/* The address the connection dials: its group's member c_member.  c_lock held. */
static const struct orch_server_cfg *rpc_conn_target_locked(const struct rpc_conn *c)
{
	const struct orch_cfg *cfg = &c->c_client->cl_cfg;

	if (rpc_members(c) == 1)
		return &cfg->servers[c->c_index];
	return orch_cfg_member(cfg, c->c_index, c->c_member);
}

/*
 * Dials @c's group: its current member, then each other in turn (a dead
 * leader's group answers through the others), each with at most
 * RPC_MEMBER_DIAL_MS of the deadline.  The member that answered stays.
 */
static int rpc_dial_group(struct rpc_conn *c, uint64_t deadline_ms,
			  const struct orch_server_cfg **sv)
{
	unsigned int n = rpc_members(c);
	int fd = -EHOSTDOWN;

	for (unsigned int i = 0; i < n; i++) {
		uint64_t until = n == 1 ? deadline_ms
				       : ORCH_MIN(deadline_ms, rpc_now_ms() + RPC_MEMBER_DIAL_MS);

		pthread_mutex_lock(&c->c_lock);
		if (i)
			c->c_member = (c->c_member + 1) % n;
		*sv = rpc_conn_target_locked(c);
		pthread_mutex_unlock(&c->c_lock);
		fd = rpc_dial(*sv, until);
		if (fd >= 0 || rpc_remaining_ms(deadline_ms) == 0)
			break;
	}
	return fd;
}

static int rpc_conn_open_member(struct rpc_conn *c, uint64_t deadline_ms, bool *known);

/* Dials and authenticates; on success the connection is up.  Connector only. */
static int rpc_conn_open(struct rpc_conn *c, uint64_t deadline_ms)
{
	unsigned int tries = 0;
	int error;

	/* A group: members that do not lead are left for the one they name. */
	for (;;) {
		bool known = false;

		error = rpc_conn_open_member(c, deadline_ms, &known);
		if (error != -ORCH_ENOTLEADER)
			return error;
		if (++tries >= 2 * rpc_members(c) || rpc_remaining_ms(deadline_ms) == 0)
			return error; /* an election: the caller tries again */
		if (!known) {
			struct timespec ts = { 0, RPC_NOLEADER_PAUSE_MS * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
}

/*
 * One try of rpc_conn_open: the current member (or, when it cannot be
 * reached, the others in turn).  -ORCH_ENOTLEADER: it does not lead
 * (rpc_probe_leader); the socket is closed.
 */
static int rpc_conn_open_member(struct rpc_conn *c, uint64_t deadline_ms, bool *known)
{
	const struct orch_server_cfg *sv;
	unsigned int tried;
	int fd, error;

	rpc_conn_reap(c);
	pthread_mutex_lock(&c->c_lock);
	sv = rpc_conn_target_locked(c);
	pthread_mutex_unlock(&c->c_lock);
	if (c->c_client->cl_dial)
		fd = c->c_client->cl_dial(c->c_client->cl_dial_arg, c->c_index);
	else
		fd = rpc_dial_group(c, deadline_ms, &sv);
	pthread_mutex_lock(&c->c_lock);
	tried = c->c_member;
	pthread_mutex_unlock(&c->c_lock);
	if (fd < 0) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot connect to server '%s': address=%s:%u",
				   sv->name, sv->host, sv->port);
		return fd;
	}
	/*
	 * No reader yet (reap waited for it to leave): its state is ours, and
	 * the handshake reads with it.  The new socket has no receive timeout
	 * yet: 0 makes the first recv set one.
	 */
	c->c_rcvtimeo_ms = 0;
	error = rpc_handshake(c, fd, deadline_ms);
	if (!error && rpc_members(c) > 1 && !c->c_client->cl_dial) {
		error = rpc_probe_leader(c, fd, deadline_ms, known);
		if (error == -ORCH_ENOTLEADER) {
			rpc_reader_reset(c);
			close(fd);
			return error;
		}
	}
	if (error)
		goto out_close;
	error = rpc_set_rcvtimeo(fd, RPC_RECV_SLICE_MS);
	if (error)
		goto out_close;
	c->c_rcvtimeo_ms = RPC_RECV_SLICE_MS;

	pthread_mutex_lock(&c->c_lock);
	c->c_fd = fd;
	c->c_gen++;
	c->c_up_member = c->c_member;
	c->c_state = RPC_UP;
	c->c_last_rx_ms = rpc_now_ms();
	rpc_healthy_locked(c);
	rpc_push_reset_locked(c);
	pthread_mutex_unlock(&c->c_lock);
	ORCH_INFO("connected: server='%s' address=%s:%u", sv->name, sv->host, sv->port);
	return 0;
out_close:
	rpc_reader_reset(c);
	close(fd);
	/* A member that fails its handshake (dying, say): the next try goes to another. */
	if (rpc_members(c) > 1) {
		pthread_mutex_lock(&c->c_lock);
		if (c->c_member == tried)
			c->c_member = (c->c_member + 1) % rpc_members(c);
		pthread_mutex_unlock(&c->c_lock);
	}
	if (error == -EACCES || error == -EKEYREJECTED || error == -ETIMEDOUT || error == -ENOMEM)
		return error;
	/* Anything else is the transport's failure as far as callers go. */
	ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "handshake with server '%s' failed: %s",
			   sv->name, strerror(-error));
	return -EIO;
}

/*
 * Returns with c_lock held and the connection up (its generation in *@gen),
 * or with c_lock released and -errno.  One caller connects at a time; the
 * others wait for its result until their own deadline.
 */
static int rpc_conn_ready_locked(struct rpc_conn *c, uint64_t deadline_ms, bool probe,
				 uint64_t *gen)
{
	struct timespec ts;
	int error;

	rpc_timespec(deadline_ms, &ts);
	pthread_mutex_lock(&c->c_lock);
	for (;;) {
		if (c->c_state == RPC_UP && !c->c_reading && !c->c_inflight) {
			/* Nobody reads an idle connection: did the server go away? */
			struct pollfd pfd = { .fd = c->c_fd, .events = POLLIN | POLLRDHUP };

			if (poll(&pfd, 1, 0) == 1 &&
			    (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)))
				rpc_conn_broken_locked(c, c->c_fd);
		}
		if (c->c_state == RPC_UP) {
			*gen = c->c_gen;
			return 0;
		}
		if (c->c_state == RPC_DOWN)
			break;
		if (c->c_sick && !probe) {
			pthread_mutex_unlock(&c->c_lock);
			return -ETIMEDOUT;
		}
		if (pthread_cond_timedwait(&c->c_state_cond, &c->c_lock, &ts) == ETIMEDOUT &&
		    c->c_state == RPC_CONNECTING) {
			pthread_mutex_unlock(&c->c_lock);
			return -ETIMEDOUT;
		}
	}
	c->c_state = RPC_CONNECTING;
	pthread_mutex_unlock(&c->c_lock);

	error = rpc_conn_open(c, deadline_ms);

	pthread_mutex_lock(&c->c_lock);
	if (error)
		c->c_state = RPC_DOWN;
	/* Not even a connection within the deadline: as silent as a hung server. */
	if (error == -ETIMEDOUT || (error == -EHOSTDOWN && rpc_remaining_ms(deadline_ms) == 0))
		rpc_sick_locked(c);
	pthread_cond_broadcast(&c->c_state_cond);
	if (error) {
		pthread_mutex_unlock(&c->c_lock);
		return error;
	}
	*gen = c->c_gen;
	return 0;
}

/* --- Calls ----------------------------------------------------------------------------- */

/*
 * Our bytes on @fd unacknowledged, TCP retransmitting them, and no
 * acknowledgement of anything for @quiet_ms: the path to
 * the server is dead, not only the server busy.  It matters when a frame
 * came after the call left (a reply already on the wire when the link was
 * cut): the connection would be kept, and after a long cut its
 * retransmission backoff (seconds) delays the first call after the heal.
 * A busy or stopped process's kernel still acknowledges.
 */
static bool rpc_tcp_stalled(int fd, uint64_t quiet_ms)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
	    len < offsetof(struct tcp_info, tcpi_last_ack_recv) + sizeof(ti.tcpi_last_ack_recv))
		return false; /* not TCP (the tests' socket pairs) */
	/* One retransmission on a link that still acknowledges is a lost segment. */
	return ti.tcpi_unacked > 0 && (ti.tcpi_retransmits > 0 || ti.tcpi_backoff > 0) &&
	       ti.tcpi_last_ack_recv >= quiet_ms;
}

/* How long a silent server may hold more than RPC_SILENT_KEEP callers. */
static uint64_t rpc_silent_grace_ms(struct orch_client *cl)
{
	return ORCH_MIN(ORCH_MAX(atomic_load(&cl->cl_timeout_ms) / 4, RPC_SILENT_GRACE_MIN_MS),
			RPC_SILENT_GRACE_MAX_MS);
}

static bool rpc_silent_excess_locked(struct rpc_conn *c, const struct orch_call *call,
				     uint64_t grace_ms);

/* The end of a probe: the next may start a gap later, if still sick. */
static void rpc_probe_end(struct orch_call *call)
{
	struct rpc_conn *c = call->ca_conn;

	pthread_mutex_lock(&c->c_lock);
	c->c_probing = false;
	c->c_probe_at_ms = rpc_now_ms() + RPC_PROBE_GAP_MS;
	pthread_mutex_unlock(&c->c_lock);
}

static void rpc_call_free(struct orch_call *call)
{
	if (!call)
		return;
	if (call->ca_probe)
		rpc_probe_end(call);
	free(call->ca_payload);
	rpc_again_free(call->ca_again);
	pthread_cond_destroy(&call->ca_cond);
	free(call);
}

static void rpc_count(struct orch_client *cl, uint16_t type)
{
	int i = orch_msg_index(type);

	if (i >= 0 && (size_t)i < cl->cl_ntypes)
		atomic_fetch_add_explicit(&cl->cl_counts[i], 1, memory_order_relaxed);
}

/*
 * Writes @frame on connection generation @gen.  Returns 0, -EIO if that
 * connection is gone, or -ETIMEDOUT.  A frame cut in the middle would
 * desynchronise the stream, so that case shuts the socket down and every
 * call on it fails.
 */
/* Writes the frame, then the @ntail buffers of data that follow it. */
static int rpc_conn_write(struct rpc_conn *c, uint64_t gen, const struct orch_buf *frame,
			  const struct iovec *tail, int ntail, uint64_t deadline_ms)
{
	struct iovec iov[1 + ORCH_CLIENT_IOV_MAX];
	size_t sent = 0;
	int fd, error;

	pthread_mutex_lock(&c->c_send_lock);
	pthread_mutex_lock(&c->c_lock);
	fd = (c->c_state == RPC_UP && c->c_gen == gen) ? c->c_fd : -1;
	pthread_mutex_unlock(&c->c_lock);
	if (fd < 0) {
		pthread_mutex_unlock(&c->c_send_lock);
		return -EIO;
	}
	iov[0] = (struct iovec){ .iov_base = frame->b_data, .iov_len = frame->b_len };
	if (ntail)
		memcpy(iov + 1, tail, (size_t)ntail * sizeof(*tail));
	error = rpc_send_iov(fd, iov, 1 + ntail, deadline_ms, &sent);
	if (error && (error != -ETIMEDOUT || sent > 0)) {
		/* A reader would notice; with none, the calls waiting would not. */
		pthread_mutex_lock(&c->c_lock);
		if (c->c_gen == gen && c->c_state == RPC_UP && !c->c_reading)
			rpc_conn_broken_locked(c, fd);
		else
			shutdown(fd, SHUT_RDWR);
		pthread_mutex_unlock(&c->c_lock);
	}
	pthread_mutex_unlock(&c->c_send_lock);
	return error;
}

/*
 * orch_client_send, with the data of a request that ends with it sent from
 * @tail (@ntail buffers; req->data is then ignored), not copied.
 */
static int rpc_send(struct orch_client *cl, unsigned int server, const struct orch_msg *req,
		    const struct iovec *tail, int ntail, bool past_silence, struct orch_call **out)
{
	struct iovec one;
	size_t tail_len = 0;
	struct orch_msg m;
	struct orch_call *call;
	struct orch_buf frame;
	struct rpc_conn *c;
	uint64_t gen;
	int error;

	*out = NULL;
	if (server >= cl->cl_cfg.nservers)
		return -EINVAL;
	c = &cl->cl_conns[server];

	call = calloc(1, sizeof(*call));
	if (!call)
		return -ENOMEM;
	error = rpc_cond_init(&call->ca_cond);
	if (error) {
		free(call);
		return error;
	}
	call->ca_conn = c;
	call->ca_type = req->type;
	call->ca_reqid = atomic_fetch_add(&cl->cl_next_reqid, 1);
	call->ca_sent_ms = rpc_now_ms();
	call->ca_deadline_ms = call->ca_sent_ms + atomic_load(&cl->cl_timeout_ms);

	m = *req;
	m.reqid = call->ca_reqid;
	m.flags = req->flags & ORCH_FRAME_SEQ;
	orch_buf_init(&frame, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	/* Large data (a WRITE) goes from the caller's buffer, not copied into the frame. */
	if (!ntail && orch_msg_has_data_last(req->type, false) && req->data.len >= RPC_TAIL_MIN) {
		one = (struct iovec){ .iov_base = (void *)(uintptr_t)req->data.s,
				      .iov_len = req->data.len };
		tail = &one;
		ntail = 1;
	}
	for (int i = 0; i < ntail; i++)
		tail_len += tail[i].iov_len;
	m.data = orch_str_of(ntail ? NULL : req->data.s, ntail ? (uint32_t)tail_len : req->data.len);
	if (ntail > ORCH_CLIENT_IOV_MAX || tail_len > ORCH_IO_MAX ||
	    (ntail && !orch_msg_has_data_last(req->type, false)))
		error = -EINVAL;
	else
		error = ntail ? orch_msg_encode_head(&frame, &m) : orch_msg_encode(&frame, &m);
	if (error) {
		error = error == -ENOMEM ? -ENOMEM : -EINVAL;
		goto out_free_frame;
	}

	/* A sick server: this call is its probe, or fails at once. */
	pthread_mutex_lock(&c->c_lock);
	if (c->c_sick) {
		if (c->c_probing || call->ca_sent_ms < c->c_probe_at_ms) {
			pthread_mutex_unlock(&c->c_lock);
			error = -ETIMEDOUT;
			goto out_free_frame;
		}
		c->c_probing = true;
		call->ca_probe = true;
		call->ca_deadline_ms = ORCH_MIN(call->ca_deadline_ms,
						call->ca_sent_ms + RPC_PROBE_MS);
	} else if (c->c_state == RPC_UP && !past_silence &&
		   rpc_silent_excess_locked(c, call, rpc_silent_grace_ms(cl))) {
		/* Enough callers wait for a server that says nothing already. */
		pthread_mutex_unlock(&c->c_lock);
		error = -ETIMEDOUT;
		goto out_free_frame;
	}
	pthread_mutex_unlock(&c->c_lock);

	error = rpc_conn_ready_locked(c, call->ca_deadline_ms, call->ca_probe, &gen);
	if (error)
		goto out_free_frame;
	/* A probe that connected found the server well: the call has its full time. */
	if (call->ca_probe)
		call->ca_deadline_ms = call->ca_sent_ms + atomic_load(&cl->cl_timeout_ms);
	call->ca_gen = gen;
	/* In the table before the frame leaves, so a fast reply finds it. */
	rpc_table_insert(c, call);
	pthread_mutex_unlock(&c->c_lock);

	error = rpc_conn_write(c, gen, &frame, tail, ntail, call->ca_deadline_ms);
	if (error) {
		pthread_mutex_lock(&c->c_lock);
		if (call->ca_queued)
			rpc_table_take(c, call->ca_reqid);
		pthread_mutex_unlock(&c->c_lock);
		goto out_free_frame;
	}
	orch_buf_fini(&frame);
	rpc_count(cl, req->type);
	*out = call;
	return 0;
out_free_frame:
	orch_buf_fini(&frame);
	rpc_call_free(call);
	return error;
}

/*
 * What a caller of send and wait hears of a replica group with no member
 * that leads (rpc_conn_open), or of a member that does not lead: the
 * request was not done, as when a server cannot be reached.  orch_client_call
 * sees the difference, and goes to the leader.
 */
static int rpc_public_error(int error)
{
	return error == -ORCH_ENOTLEADER || error == -ORCH_ERETRY ? -EHOSTDOWN : error;
}

static int rpc_call(struct orch_client *cl, unsigned int server, const struct orch_msg *req,
		    uint64_t seq, uint32_t timeout_ms, struct orch_reply *rep);

/*
 * True if a request of @type (numbered @seq, or 0) that was sent and then
 * failed with @error (@broke: its connection broke) may go again to a
 * group's next leader.  Numbered ones and those that change no namespace
 * always.  A CL2SV_WRITERS that registers (orch_msg_numbered) changes the
 * namespace, but what it registers belongs to its connection, which the
 * server drops when the connection ends: so after a broken connection it
 * is asked afresh, never after a timeout on a connection still open.
 */
static bool rpc_may_resend(uint16_t type, uint64_t seq, int error, bool broke)
{
	if (error != -ETIMEDOUT && !broke)
		return false;
	return seq || !orch_msg_changes_namespace(type) || (broke && type == ORCH_CL2SV_WRITERS);
}

/*
 * @call (sent, not waited for) is a try that ends at @deadline_ms if that
 * is sooner, unless its member then looks alive (orch_client_wait).
 */
static void rpc_call_shorten(struct orch_call *call, uint64_t deadline_ms)
{
	struct rpc_conn *c = call->ca_conn;

	pthread_mutex_lock(&c->c_lock);
	if (deadline_ms < call->ca_deadline_ms) {
		call->ca_full_deadline_ms = call->ca_deadline_ms;
		call->ca_deadline_ms = deadline_ms;
	}
	pthread_mutex_unlock(&c->c_lock);
}

/* @call (sent, not waited for) ends by @deadline_ms, its member alive or not. */
static void rpc_call_cap(struct orch_call *call, uint64_t deadline_ms)
{
	struct rpc_conn *c = call->ca_conn;

	pthread_mutex_lock(&c->c_lock);
	if (call->ca_deadline_ms > deadline_ms)
		call->ca_deadline_ms = deadline_ms;
	if (call->ca_full_deadline_ms > deadline_ms)
		call->ca_full_deadline_ms = deadline_ms;
	pthread_mutex_unlock(&c->c_lock);
}

/*
 * A copy of @req with its data (@tail's, if any) for rpc_send_again; NULL
 * if it cannot be made.  The tail goes straight into the frame, once.
 */
static struct rpc_again *rpc_again_new(struct orch_client *cl, unsigned int server,
				       const struct orch_msg *req, const struct iovec *tail,
				       int ntail)
{
	struct rpc_again *a = calloc(1, sizeof(*a));
	struct orch_msg m = *req;
	size_t len = 0;
	int error;

	if (!a || ntail < 0 || ntail > ORCH_CLIENT_IOV_MAX)
		goto fail;
	for (int i = 0; i < ntail; i++)
		len += tail[i].iov_len;
	if (len > ORCH_IO_MAX)
		goto fail;
	m.flags = 0;
	m.reqid = 0;
	orch_buf_init(&a->a_frame, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	if (ntail) {
		m.data = orch_str_of(NULL, (uint32_t)len);
		error = orch_msg_encode_head(&a->a_frame, &m);
		if (!error)
			error = orch_buf_reserve(&a->a_frame, len);
		for (int i = 0; i < ntail && !error; i++)
			if (tail[i].iov_len)
				error = orch_buf_append(&a->a_frame, tail[i].iov_base,
							tail[i].iov_len);
	} else {
		error = orch_msg_encode(&a->a_frame, &m);
	}
	if (error)
		goto fail;
	a->a_server = server;
	a->a_deadline_ms = rpc_now_ms() + atomic_load(&cl->cl_timeout_ms);
	return a;
fail:
	rpc_again_free(a);
	return NULL;
}

/*
 * A call to a replica group whose request changes no namespace (reads,
 * writes, fsyncs, lookups: sent twice, they do no harm) keeps what it
 * needs to go again (ca_again): a failover then costs orch_client_wait
 * the time to find the next leader, not an error.  One that could not
 * even be sent comes back as a call that only goes again.
 */
static int rpc_send_again(struct orch_client *cl, unsigned int server, const struct orch_msg *req,
			  const struct iovec *tail, int ntail, struct orch_call **out)
{
	struct rpc_again *a = NULL;
	int error;

	if (rpc_is_group(cl, server) && !(req->flags & ORCH_FRAME_SEQ) &&
	    (!orch_msg_changes_namespace(req->type) || req->type == ORCH_CL2SV_WRITERS))
		a = rpc_again_new(cl, server, req, tail, ntail);
	error = rpc_send(cl, server, req, tail, ntail, false, out);
	if (!a)
		return error;
	if (!error) {
		(*out)->ca_again = a;
		rpc_call_shorten(*out, rpc_now_ms() + RPC_GROUP_TRY_MS);
		return 0;
	}
	if (error != -EIO && error != -EHOSTDOWN && error != -ETIMEDOUT &&
	    error != -ORCH_ENOTLEADER && error != -ORCH_ERETRY) {
		rpc_again_free(a);
		return error;
	}
	*out = calloc(1, sizeof(**out));
	if (!*out) {
		rpc_again_free(a);
		return error;
	}
	a->a_send_error = error;
	(*out)->ca_type = req->type;
	(*out)->ca_again = a;
	return 0;
}

uint64_t orch_client_call_gen(const struct orch_call *call)
{
	/* Set before the call is returned, never changed by others: no lock. */
	return call->ca_again && call->ca_again->a_send_error ? 0 : call->ca_gen;
}

int orch_client_send(struct orch_client *cl, unsigned int server, const struct orch_msg *req,
		     struct orch_call **out)
{
	return rpc_public_error(rpc_send_again(cl, server, req, NULL, 0, out));
}

int orch_client_send_iov(struct orch_client *cl, unsigned int server, const struct orch_msg *req,
			 const struct iovec *data, int n, struct orch_call **out)
{
	return rpc_public_error(rpc_send_again(cl, server, req, data, n, out));
}

/* Decodes the reply a call received.  Consumes call->ca_payload. */
/*
 * A member of @c's group that does not lead it answered on connection
 * generation @gen, naming @leader (or ORCH_NO_LEADER): the connection
 * goes to the leader, or to the next member, from the next call on.
 */
static void rpc_redirect(struct rpc_conn *c, uint64_t gen, uint32_t leader)
{
	unsigned int n = rpc_members(c);

	pthread_mutex_lock(&c->c_lock);
	if (n > 1 && c->c_gen == gen) {
		unsigned int to = leader < n ? leader : (c->c_member + 1) % n;

		if (to != c->c_member) {
			ORCH_INFO("server '%s': member %u does not lead, going to member %u%s",
				  c->c_client->cl_cfg.servers[c->c_index].name, c->c_member, to,
				  leader < n ? "" : " (no leader known)");
			c->c_member = to;
			if (c->c_state == RPC_UP)
				rpc_conn_broken_locked(c, c->c_fd);
		}
	}
	pthread_mutex_unlock(&c->c_lock);
}

static int rpc_reply_decode(struct orch_client *cl, struct orch_call *call,
			    struct orch_reply *rep)
{
	const char *name = cl->cl_cfg.servers[call->ca_conn->c_index].name;
	int error;

	/* A server that does not know the request says so (SPEC-wire.md, "Rules"). */
	if (call->ca_hdr.type == ORCH_AN2AN_UNKNOWN && call->ca_type != ORCH_AN2AN_UNKNOWN)
		return -ENOSYS;
	if (call->ca_hdr.type != call->ca_type) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "reply of the wrong type from server '%s': type=0x%04x want=0x%04x",
				   name, call->ca_hdr.type, call->ca_type);
		return -EIO;
	}
	error = orch_msg_decode(&call->ca_hdr, call->ca_payload, &rep->m);
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "cannot decode reply from server '%s': %s: type=%s length=%u",
				   name, strerror(-error), orch_msg_name(call->ca_type),
				   call->ca_hdr.length);
		memset(rep, 0, sizeof(*rep));
		return -EIO;
	}
	if (rep->m.status) {
		uint32_t leader = rep->m.leader;

		error = rep->m.status;
		orch_msg_fini(&rep->m);
		memset(rep, 0, sizeof(*rep));
		if (error == -ORCH_ENOTLEADER) {
			rpc_redirect(call->ca_conn, call->ca_gen, leader);
			rep->m.leader = leader;
		}
		/* A LOOKUP's ENOENT may be cached too. */
		rep->stamp = call->ca_leased ? call->ca_stamp : 0;
		return error;
	}
	rep->frame = call->ca_payload;
	rep->stamp = call->ca_leased ? call->ca_stamp : 0;
	call->ca_payload = NULL;
	return 0;
}

/*
 * True if @call (in flight, or about to be sent) should give up before its
 * deadline: its server has said nothing since the oldest call in flight
 * was sent, the grace has passed since then, and RPC_SILENT_KEEP callers
 * older than @call wait for it.  Callers: a call nobody waits for yet (a
 * write behind, which its file's fsync collects later) holds no thread.
 * c_lock held.
 */
static bool rpc_silent_excess_locked(struct rpc_conn *c, const struct orch_call *call,
				     uint64_t grace_ms)
{
	uint64_t oldest = call->ca_sent_ms, now = rpc_now_ms();
	unsigned int older = 0;

	/*
	 * A server heard from within the last grace answered after any call
	 * that has waited a grace was sent: no scan of the table, which
	 * every call to a busy server would otherwise pay.
	 */
	if (c->c_inflight < RPC_SILENT_KEEP || c->c_last_rx_ms + grace_ms > now)
		return false;
	for (size_t i = 0; i < RPC_BUCKETS; i++) {
		for (const struct orch_call *o = c->c_calls[i]; o; o = o->ca_next) {
			oldest = ORCH_MIN(oldest, o->ca_sent_ms);
			if (o->ca_awaited &&
			    (o->ca_sent_ms < call->ca_sent_ms ||
			     (o->ca_sent_ms == call->ca_sent_ms && o->ca_reqid < call->ca_reqid)))
				older++;
		}
	}
	return older >= RPC_SILENT_KEEP && c->c_last_rx_ms < oldest && now >= oldest + grace_ms;
}

static int rpc_wait(struct orch_client *cl, struct orch_call *call, struct orch_reply *rep);

/*
 * The end of a try on a group's member whose host still takes our bytes:
 * is its process alive, or frozen (SIGSTOP, a VM paused)?  Its kernel
 * acknowledges TCP either way.  A PING on the same connection, sent past
 * the limit on callers of a silent server, answered within
 * ORCH_VOUCH_TERM_MS says alive (only slow: waiting on another group,
 * say).  Called without c_lock.
 */
static bool rpc_member_answers(struct orch_client *cl, struct orch_call *call)
{
	struct orch_reply rep;
	struct orch_call *ping;
	struct orch_msg m;
	bool alive;

	orch_msg_init(&m, ORCH_AN2AN_PING);
	if (rpc_send(cl, call->ca_conn->c_index, &m, NULL, 0, true, &ping))
		return false;
	rpc_call_cap(ping, rpc_now_ms() + ORCH_VOUCH_TERM_MS);
	alive = rpc_wait(cl, ping, &rep) == 0 && rep.gen == call->ca_gen;
	orch_reply_release(&rep);
	return alive;
}

int orch_client_wait(struct orch_client *cl, struct orch_call *call, struct orch_reply *rep)
{
	struct rpc_again *a = call->ca_again;
	uint16_t call_type;
	int error;

	if (!a)
		return rpc_public_error(rpc_wait(cl, call, rep));
	call->ca_again = NULL;
	call_type = call->ca_type;
	if (a->a_send_error) {
		free(call); /* never sent: nothing else in it */
		error = a->a_send_error;
		memset(rep, 0, sizeof(*rep));
	} else {
		error = rpc_wait(cl, call, rep);
	}
	/*
	 * As rpc_call retries: not sent, or a member that does not lead; a
	 * broken connection or a silent member (rpc_may_resend).
	 */
	if (a->a_send_error || error == -ORCH_ENOTLEADER || error == -ORCH_ERETRY ||
	    rpc_may_resend(call_type, 0, error, rep->broke)) {
		uint64_t left;
		struct orch_frame_hdr h;
		struct orch_msg m;

		if (cl->cl_test_resend_delay_ms && call_type == ORCH_CL2SV_WRITE) {
			struct timespec ts = { cl->cl_test_resend_delay_ms / 1000,
					       (long)(cl->cl_test_resend_delay_ms % 1000) * 1000000L };

			while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
				;
		}
		left = rpc_remaining_ms(a->a_deadline_ms);
		orch_reply_release(rep);
		orch_frame_hdr_decode(a->a_frame.b_data, &h);
		error = left ? orch_msg_decode(&h, a->a_frame.b_data + ORCH_FRAME_HDR, &m)
			     : -ETIMEDOUT;
		if (left && !error) {
			error = rpc_call(cl, a->a_server, &m, 0, (uint32_t)left, rep);
			orch_msg_fini(&m);
		}
	}
	rpc_again_free(a);
	return rpc_public_error(error);
}

static int rpc_wait(struct orch_client *cl, struct orch_call *call, struct orch_reply *rep)
{
	struct rpc_conn *c = call->ca_conn;
	uint64_t grace_ms = rpc_silent_grace_ms(cl);
	bool graced = false, frozen = false;
	struct timespec ts, gts;
	int error = 0;

	memset(rep, 0, sizeof(*rep));
	rpc_timespec(call->ca_deadline_ms, &ts);
	rpc_timespec(call->ca_sent_ms + grace_ms, &gts);
	pthread_mutex_lock(&c->c_lock);
	call->ca_awaited = true;
	while (!call->ca_done) {
		if (!c->c_reading && c->c_state == RPC_UP && call->ca_queued) {
			rpc_read_until(c, call);
			if (call->ca_done)
				break;
		} else {
			int rc;

			call->ca_waiting = true;
			rc = pthread_cond_timedwait(&call->ca_cond, &c->c_lock, graced ? &ts : &gts);
			call->ca_waiting = false;
			if (rc == ETIMEDOUT && !graced && !call->ca_done) {
				/*
				 * Once, after the grace: one caller too many on a
				 * silent server?  Not a try on a group's member: its
				 * end (2.5 s) gives the member up, closing the
				 * connection, so that what the call registered there
				 * goes with it and the call may go to the next leader;
				 * failed here, it could not (a writers' registration).
				 * Not a WRITE either: its bytes are gone, and failed
				 * early it would be reported to the file's next close
				 * though the server may well take it a moment later
				 * (a disk that stalled for a second); it waits its
				 * whole deadline.
				 */
				graced = true;
				if (call->ca_full_deadline_ms <= call->ca_deadline_ms &&
				    call->ca_type != ORCH_CL2SV_WRITE &&
				    rpc_silent_excess_locked(c, call, grace_ms)) {
					rpc_table_take(c, call->ca_reqid);
					error = -ETIMEDOUT;
					break;
				}
				continue;
			}
			if (rc != ETIMEDOUT)
				continue;
		}
		if (rpc_remaining_ms(call->ca_deadline_ms) == 0 && !call->ca_done &&
		    call->ca_full_deadline_ms > call->ca_deadline_ms && c->c_gen == call->ca_gen &&
		    c->c_state == RPC_UP && !rpc_tcp_stalled(c->c_fd, grace_ms)) {
			bool alive;

			pthread_mutex_unlock(&c->c_lock);
			alive = rpc_member_answers(cl, call);
			pthread_mutex_lock(&c->c_lock);
			if (call->ca_done)
				break;
			if (alive) {
				/*
				 * The end of a try, on a member that answers: it is
				 * only slow, and a retry elsewhere would find the
				 * request not finished.  The call waits its whole
				 * deadline.
				 */
				call->ca_deadline_ms = call->ca_full_deadline_ms;
				rpc_timespec(call->ca_deadline_ms, &ts);
				continue;
			}
			/* Frozen: the call goes to the next leader (below). */
			frozen = true;
		}
		/*
		 * Its reply may wait in the socket, unread: nobody reads a
		 * connection for calls nobody waits for, and the caller may
		 * have been elsewhere until now (sending to other servers, one
		 * of them slow to connect).  A reply that came is no timeout.
		 */
		if (rpc_remaining_ms(call->ca_deadline_ms) == 0 && !call->ca_done &&
		    !c->c_reading && !c->c_closing && c->c_state == RPC_UP &&
		    c->c_gen == call->ca_gen && call->ca_queued) {
			rpc_read_ready_locked(c);
			if (call->ca_done)
				break;
		}
		if (rpc_remaining_ms(call->ca_deadline_ms) == 0 && !call->ca_done) {
			/* Out of the table: a late reply is dropped by its reader. */
			if (call->ca_queued)
				rpc_table_take(c, call->ca_reqid);
			error = -ETIMEDOUT;
			/*
			 * Nothing at all from the server in a whole deadline
			 * (a busy server still answers the others), or not even
			 * its kernel acknowledging our bytes: sick.
			 */
			if (c->c_gen == call->ca_gen &&
			    (frozen || c->c_last_rx_ms < call->ca_sent_ms ||
			     (c->c_state == RPC_UP && rpc_tcp_stalled(c->c_fd, grace_ms)))) {
				rpc_sick_locked(c);
				/*
				 * Which closes the connection: what the request
				 * registered on it (CL2SV_WRITERS) goes with it.
				 */
				rep->broke = true;
			}
			break;
		}
	}
	if (!error) {
		error = call->ca_error;
		rep->broke = error == -EIO;
	}
	pthread_mutex_unlock(&c->c_lock);

	if (!error)
		error = rpc_reply_decode(cl, call, rep);
	rep->gen = call->ca_gen;
	if (error == -ETIMEDOUT)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "request timed out: server='%s' type=%s",
				   cl->cl_cfg.servers[c->c_index].name,
				   orch_msg_name(call->ca_type));
	rpc_call_free(call);
	return error;
}

/* A number for a new request, in flight until rpc_seq_done.  0 on ENOMEM. */
static uint64_t rpc_seq_new(struct orch_client *cl)
{
	uint64_t seq = 0;

	pthread_mutex_lock(&cl->cl_seq_lock);
	if (cl->cl_nseqs == cl->cl_seqs_cap) {
		size_t cap = cl->cl_seqs_cap ? 2 * cl->cl_seqs_cap : 64;
		uint64_t *n = realloc(cl->cl_seqs, cap * sizeof(*n));

		if (n) {
			cl->cl_seqs = n;
			cl->cl_seqs_cap = cap;
		}
	}
	if (cl->cl_nseqs < cl->cl_seqs_cap) {
		seq = cl->cl_next_seq++;
		cl->cl_seqs[cl->cl_nseqs++] = seq;
	}
	pthread_mutex_unlock(&cl->cl_seq_lock);
	return seq;
}

/* The least number not answered yet: the group may forget the results below it. */
static uint64_t rpc_seq_done_below(struct orch_client *cl)
{
	uint64_t least;

	pthread_mutex_lock(&cl->cl_seq_lock);
	least = cl->cl_next_seq;
	for (size_t i = 0; i < cl->cl_nseqs; i++)
		least = ORCH_MIN(least, cl->cl_seqs[i]);
	pthread_mutex_unlock(&cl->cl_seq_lock);
	return least;
}

static void rpc_seq_done(struct orch_client *cl, uint64_t seq)
{
	pthread_mutex_lock(&cl->cl_seq_lock);
	for (size_t i = 0; i < cl->cl_nseqs; i++) {
		if (cl->cl_seqs[i] == seq) {
			cl->cl_seqs[i] = cl->cl_seqs[--cl->cl_nseqs];
			break;
		}
	}
	pthread_mutex_unlock(&cl->cl_seq_lock);
}

int orch_client_call(struct orch_client *cl, unsigned int server, const struct orch_msg *req,
		     struct orch_reply *rep)
{
	return orch_client_call_within(cl, server, req, 0, rep);
}

int orch_client_call_within(struct orch_client *cl, unsigned int server,
			    const struct orch_msg *req, uint32_t timeout_ms, struct orch_reply *rep)
{
	uint64_t seq = 0;
	int error;

	if (rpc_is_group(cl, server) && orch_msg_numbered(req)) {
		seq = rpc_seq_new(cl);
		if (!seq)
			return -ENOMEM;
	}
	error = rpc_call(cl, server, req, seq, timeout_ms, rep);
	if (seq)
		rpc_seq_done(cl, seq);
	return error;
}

/*
 * A server of this client's single-server config answered as a member of
 * a replica group: the configs differ (replicas), and nothing was done.
 */
static int rpc_not_a_group(struct orch_client *cl, unsigned int server)
{
	ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
			   "server '%s' answers as a member of a replica group, but this client's "
			   "config has replicas = %u: use the cluster's config",
			   cl->cl_cfg.servers[server].name, cl->cl_cfg.replicas);
	return -EIO;
}

/*
 * Sends @req until a member that leads answers it, or the deadline; with
 * @seq, under that number (every try: exactly once), and also again when
 * its connection broke after it left.
 */
static int rpc_call(struct orch_client *cl, unsigned int server, const struct orch_msg *req,
		    uint64_t seq, uint32_t timeout_ms, struct orch_reply *rep)
{
	uint32_t full_ms = atomic_load(&cl->cl_timeout_ms);
	uint64_t deadline_ms = rpc_now_ms() + (timeout_ms && timeout_ms < full_ms ? timeout_ms
									  : full_ms);
	unsigned int pause_ms = RPC_NOLEADER_PAUSE_MS, tries = 0;
	bool group = rpc_is_group(cl, server);
	struct orch_msg m = *req;
	struct orch_call *call;
	int error;

	if (seq) {
		m.flags = ORCH_FRAME_SEQ;
		m.client = cl->cl_id;
		m.seq = seq;
	}

	/*
	 * A member that does not lead did nothing: the request goes again,
	 * to the leader it named at once, else (an election) after a pause
	 * that doubles, until the deadline.  So does one the leader asks to
	 * send again (RETRY), after a pause.
	 */
	for (;;) {
		bool retry = false;

		memset(rep, 0, sizeof(*rep));
		if (seq)
			m.done_below = rpc_seq_done_below(cl);
		error = rpc_send(cl, server, &m, NULL, 0, false, &call);
		/*
		 * Not sent: a group's member that could not be reached, failed
		 * its handshake or is sick; the connection goes to the next.
		 */
		if (error == -EIO || error == -EHOSTDOWN || error == -ETIMEDOUT) {
			retry = group;
		} else if (error == -ORCH_ENOTLEADER) {
			rep->m.leader = ORCH_NO_LEADER; /* no member leads: an election */
		} else if (!error) {
			if (group)
				rpc_call_shorten(call, rpc_now_ms() + RPC_GROUP_TRY_MS);
			if (timeout_ms)
				rpc_call_cap(call, deadline_ms);
			error = rpc_wait(cl, call, rep);
			/*
			 * Sent, and its connection lost or its member silent: a
			 * request sent exactly once, or one that changes no
			 * namespace, may go to the next leader.
			 */
			retry = (seq && rep->broke) ||
				(group && rpc_may_resend(req->type, seq, error, rep->broke));
		}
		if ((error == -ORCH_ENOTLEADER || error == -ORCH_ERETRY) && !group)
			return rpc_not_a_group(cl, server);
		if (error != -ORCH_ENOTLEADER && error != -ORCH_ERETRY && !retry)
			return error;
		if (rpc_remaining_ms(deadline_ms) == 0)
			break;
		if (retry || error == -ORCH_ERETRY || rep->m.leader == ORCH_NO_LEADER ||
		    ++tries > 2 * ORCH_REPLICAS_MAX) {
			struct timespec ts;
			unsigned int ms = ORCH_MIN(pause_ms, (unsigned int)rpc_remaining_ms(deadline_ms));

			ts.tv_sec = ms / 1000;
			ts.tv_nsec = (long)(ms % 1000) * 1000000L;
			nanosleep(&ts, NULL);
			pause_ms = ORCH_MIN(pause_ms * 2, RPC_NOLEADER_PAUSE_MAX_MS);
		}
	}
	memset(rep, 0, sizeof(*rep));
	if (error != -ORCH_ENOTLEADER && error != -ORCH_ERETRY)
		return error;
	ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "server '%s': %s", cl->cl_cfg.servers[server].name,
			   error == -ORCH_ENOTLEADER ? "no member leads its replica group"
			   : "its group's leader could not take the request in time");
	return -ETIMEDOUT;
}

void orch_reply_release(struct orch_reply *r)
{
	if (!r)
		return;
	orch_msg_fini(&r->m);
	free(r->frame);
	memset(r, 0, sizeof(*r));
}

/* --- Client ------------------------------------------------------------------------------ */

int orch_client_create(const struct orch_cfg *cfg, struct orch_client **out)
{
	struct orch_client *cl;
	unsigned int i;
	int error;

	*out = NULL;
	if (cfg->nservers > ORCH_SERVERS_MAX)
		return -EINVAL;
	cl = calloc(1, sizeof(*cl));
	if (!cl)
		return -ENOMEM;
	cl->cl_cfg = *cfg;
	/* Unique per client instance: a restarted client must not meet its old results. */
	do {
		uint8_t nonce[ORCH_NONCE_LEN];

		if (orch_auth_nonce(nonce)) {
			free(cl);
			return -EIO;
		}
		memcpy(&cl->cl_id, nonce, sizeof(cl->cl_id));
	} while (!cl->cl_id);
	cl->cl_next_seq = 1;
	pthread_mutex_init(&cl->cl_seq_lock, NULL);
	atomic_init(&cl->cl_timeout_ms, cfg->op_timeout_ms ? cfg->op_timeout_ms : 10000);
	if (orch_fault_env(ORCH_FAULT_RESEND_DELAY))
		cl->cl_test_resend_delay_ms =
			(uint32_t)strtoul(orch_fault_env(ORCH_FAULT_RESEND_DELAY), NULL, 10);
	atomic_init(&cl->cl_next_reqid, 1);
	cl->cl_ntypes = orch_msg_types(cl->cl_types, RPC_MAXTYPES);
	for (size_t t = 0; t < RPC_MAXTYPES; t++)
		atomic_init(&cl->cl_counts[t], 0);
	cl->cl_conns = calloc(cfg->nservers ? cfg->nservers : 1, sizeof(*cl->cl_conns));
	if (!cl->cl_conns) {
		error = -ENOMEM;
		goto out_free_client;
	}
	for (i = 0; i < cfg->nservers; i++) {
		struct rpc_conn *c = &cl->cl_conns[i];

		c->c_client = cl;
		c->c_index = i;
		c->c_fd = -1;
		c->c_state = RPC_DOWN;
		atomic_init(&c->c_key_mismatch, false);
		c->c_rbuf = malloc(RPC_RBUF);
		if (!c->c_rbuf) {
			error = -ENOMEM;
			goto out_destroy_conns;
		}
		error = rpc_cond_init(&c->c_state_cond);
		if (error) {
			free(c->c_rbuf);
			goto out_destroy_conns;
		}
		pthread_mutex_init(&c->c_lock, NULL);
		pthread_mutex_init(&c->c_send_lock, NULL);
	}
	*out = cl;
	return 0;
out_destroy_conns:
	while (i-- > 0) {
		free(cl->cl_conns[i].c_rbuf);
		pthread_cond_destroy(&cl->cl_conns[i].c_state_cond);
		pthread_mutex_destroy(&cl->cl_conns[i].c_lock);
		pthread_mutex_destroy(&cl->cl_conns[i].c_send_lock);
	}
	free(cl->cl_conns);
out_free_client:
	pthread_mutex_destroy(&cl->cl_seq_lock);
	free(cl);
	return error;
}

void orch_client_destroy(struct orch_client *cl)
{
	if (!cl)
		return;
	for (unsigned int i = 0; i < cl->cl_cfg.nservers; i++) {
		struct rpc_conn *c = &cl->cl_conns[i];

		pthread_mutex_lock(&c->c_lock);
		c->c_closing = true;
		pthread_mutex_unlock(&c->c_lock);
		rpc_conn_reap(c);
		free(c->c_rbuf);
		pthread_cond_destroy(&c->c_state_cond);
		pthread_mutex_destroy(&c->c_lock);
		pthread_mutex_destroy(&c->c_send_lock);
	}
	free(cl->cl_conns);
	pthread_mutex_destroy(&cl->cl_seq_lock);
	free(cl->cl_seqs);
	free(cl);
}

const struct orch_cfg *orch_client_cfg(const struct orch_client *cl)
{
	return &cl->cl_cfg;
}

void orch_client_set_timeout(struct orch_client *cl, uint32_t op_timeout_ms)
{
	if (op_timeout_ms)
		atomic_store(&cl->cl_timeout_ms, op_timeout_ms);
}

void orch_client_set_push_handler(struct orch_client *cl, orch_push_fn fn, void *arg,
				  bool acks)
{
	cl->cl_push = fn;
	cl->cl_push_arg = arg;
	cl->cl_push_acks = acks;
}

int orch_client_ack(struct orch_client *cl, unsigned int server, uint64_t gen, uint64_t seq)
{
	struct orch_buf frame;
	struct orch_msg m;
	int error;

	if (server >= cl->cl_cfg.nservers)
		return -EINVAL;
	orch_msg_init(&m, ORCH_CL2SV_ACK);
	m.flags = ORCH_FRAME_PUSH;
	m.id = seq;
	orch_buf_init(&frame, ORCH_FRAME_HDR + 64);
	error = orch_msg_encode(&frame, &m);
	if (!error)
		error = rpc_conn_write(&cl->cl_conns[server], gen, &frame, NULL, 0,
				       rpc_now_ms() + atomic_load(&cl->cl_timeout_ms));
	orch_buf_fini(&frame);
	return error;
}

void orch_client_set_dial(struct orch_client *cl, orch_dial_fn fn, void *arg)
{
	cl->cl_dial = fn;
	cl->cl_dial_arg = arg;
}

/*
 * Another thread holds the reader role: true if it sleeps in recv with
 * every frame dispatched and nothing waits in the socket.  c_lock held.
 */
static bool rpc_reader_caught_up(struct rpc_conn *c)
{
	uint64_t seq = atomic_load(&c->c_recv_seq);
	int unread = 1;

	if (!(seq & 1) || ioctl(c->c_fd, FIONREAD, &unread) != 0 || unread != 0)
		return false;
	return atomic_load(&c->c_recv_seq) == seq;
}

bool orch_client_poll(struct orch_client *cl, unsigned int server)
{
	struct rpc_conn *c;
	bool up;

	if (server >= cl->cl_cfg.nservers)
		return false;
	c = &cl->cl_conns[server];
	pthread_mutex_lock(&c->c_lock);
	if (c->c_state == RPC_UP && !c->c_reading && !c->c_closing)
		rpc_read_ready_locked(c);
	up = c->c_state == RPC_UP && (c->c_features & ORCH_FEAT_LEASES);
	if (up && c->c_reading && !rpc_reader_caught_up(c))
		up = false; /* frames in hand or arriving: not sure of the cache */
	pthread_mutex_unlock(&c->c_lock);
	return up;
}

/*
 * A whole frame waits in the read buffer (a reader that got its reply
 * stopped before it): nothing in the socket will announce it.  c_lock held,
 * no reader.
 */
static bool rpc_frame_buffered(const struct rpc_conn *c)
{
	size_t have = c->c_rlen - c->c_rpos;
	struct orch_frame_hdr h;

	if (c->c_have_hdr)
		return have && have >= c->c_hdr.length - c->c_pgot;
	if (have < ORCH_FRAME_HDR)
		return false;
	orch_frame_hdr_decode(c->c_rbuf + c->c_rpos, &h);
	return have - ORCH_FRAME_HDR >= h.length;
}

int orch_client_wait_pushes(struct orch_client *cl, int timeout_ms)
{
	struct pollfd pfd[ORCH_SERVERS_MAX];
	unsigned int server[ORCH_SERVERS_MAX], n = 0;
	bool buffered = false;
	int rc, handled = 0;

	/*
	 * Connections nobody reads (no call in flight, no reader): their fds
	 * as of now.  One may be closed and its number reused while we wait:
	 * then poll wakes for the wrong file, or sleeps to the timeout, and
	 * orch_client_poll checks everything again under the lock.
	 */
	for (unsigned int i = 0; i < cl->cl_cfg.nservers; i++) {
		struct rpc_conn *c = &cl->cl_conns[i];

		pthread_mutex_lock(&c->c_lock);
		if (c->c_state == RPC_UP && !c->c_reading && !c->c_inflight && !c->c_closing &&
		    (c->c_features & ORCH_FEAT_LEASES)) {
			pfd[n] = (struct pollfd){ .fd = c->c_fd, .events = POLLIN | POLLRDHUP };
			/*
			 * Frames a caller read with its reply but left
			 * unparsed: the socket has nothing more to say.
			 */
			if (rpc_frame_buffered(c)) {
				pfd[n].events = 0;
				pfd[n].revents = POLLIN;
				buffered = true;
			}
			server[n++] = i;
		}
		pthread_mutex_unlock(&c->c_lock);
	}
	if (buffered) {
		rc = 1;
	} else {
		rc = poll(pfd, n, timeout_ms);
		if (rc <= 0)
			return rc < 0 && errno != EINTR ? -errno : 0;
	}
	for (unsigned int i = 0; i < n; i++) {
		if (!pfd[i].revents)
			continue;
		orch_client_poll(cl, server[i]);
		handled++;
	}
	return handled;
}

int orch_client_key_mismatch(const struct orch_client *cl)
{
	for (unsigned int i = 0; i < cl->cl_cfg.nservers; i++)
		if (atomic_load(&cl->cl_conns[i].c_key_mismatch))
			return (int)i;
	return -1;
}

void orch_client_request_counts(struct orch_client *cl, uint64_t *counts, size_t n)
{
	for (size_t i = 0; i < n; i++)
		counts[i] = i < cl->cl_ntypes ? atomic_load(&cl->cl_counts[i]) : 0;
}

uint64_t orch_client_conn_gen(struct orch_client *cl, unsigned int server)
{
	struct rpc_conn *c;
	uint64_t gen;

	if (server >= cl->cl_cfg.nservers)
		return 0;
	c = &cl->cl_conns[server];
	pthread_mutex_lock(&c->c_lock);
	gen = c->c_state == RPC_UP ? c->c_gen : 0;
	pthread_mutex_unlock(&c->c_lock);
	return gen;
}
