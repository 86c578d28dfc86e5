/*
 * liborchard's transport (src/client/rpc.c) against a fake server at the
 * other end of a socketpair (orch_client_set_dial).  Many threads call at
 * once, so the callers waiting on a connection take turns reading it
 * (leader/follower) and hand replies to each other.  The fake server
 * answers each batch of requests it reads in reverse order, so replies
 * arrive out of order, and what a request asks of it is coded in the
 * request's handle (FAKE_* below): hold it, answer late, push before or
 * after the reply, or drop the connection.
 *
 * Checked: every reply reaches its own caller; pushes reach the handler in
 * stream order, before the replies read after them, and orch_client_poll
 * reads those that come while nobody waits; a dropped connection fails the
 * calls in flight at once and the next call connects again; deadlines
 * expire and the reader role moves on when its holder gives up; a server
 * with another key is named; a server that breaks the handshake (FAKE_HS_*)
 * fails the call at once, and the next one gets through; a WRITE to a
 * replica group that a member refuses (it does not lead) goes to the next
 * member with the bytes it was sent with; a WRITERS reply is stamped for
 * the lease cache only where the server granted ORCH_FEAT_WRITERS_ATTR.
 * Run plain, under valgrind, ASan and TSan
 * (make check-tsan): there it is the race check of the reader's handover.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client/rpc.h"
#include "common/util.h"
#include "net/auth.h"
#include "proto/msg.h"
#include "unit/test.h"

/* --- What a request asks of the fake server (bits of its handle) ------------- */

#define FAKE_HOLD (1ull << 56)       /* never answered */
#define FAKE_LATE (1ull << 57)       /* answered FAKE_LATE_MS after it came */
#define FAKE_PUSH (1ull << 58)       /* a push of its handle comes before the reply */
#define FAKE_PUSH_AFTER (1ull << 59) /* ... comes FAKE_PUSH_AFTER_MS after it */
#define FAKE_DROP (1ull << 60)       /* the server closes the connection */
#define FAKE_PUSH_TAIL (1ull << 61)  /* a push of its handle right after the reply, one write */
#define FAKE_VALUE(h) ((h) & ((1ull << 56) - 1))

/* How the fake server breaks the handshake (f_hs). */
enum fake_hs {
	FAKE_HS_OK,
	FAKE_HS_REFUSE,         /* HELLO' refuses our versions */
	FAKE_HS_VERSION,        /* HELLO' chooses version 2 */
	FAKE_HS_REQID,          /* HELLO' answers another reqid */
	FAKE_HS_HUGE,           /* a frame longer than any handshake message */
	FAKE_HS_PUSH,           /* a push before HELLO' */
	FAKE_HS_CLOSE,          /* closes after HELLO */
	FAKE_HS_SILENT,         /* never answers HELLO */
	FAKE_HS_REJECT,         /* AUTH' refuses a good MAC */
};

#define FAKE_LATE_MS 1200
#define FAKE_PUSH_AFTER_MS 30
#define FAKE_CONNS_MAX 16
#define FAKE_DELAYED_MAX 64
#define FAKE_LEASE_MS 1000

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* --- The fake server ---------------------------------------------------------- */

struct fake {
	uint8_t f_key[ORCH_KEY_LEN];   /* the key it proves it holds */
	uint64_t f_features;           /* granted in its HELLO reply */
	pthread_mutex_t f_lock;
	pthread_t f_threads[FAKE_CONNS_MAX]; /* one per connection; by f_lock */
	int f_nconns;                  /* dials so far; by f_lock */
	int f_refuse;                  /* dial fails with this (-errno) when set; by f_lock */
	_Atomic long f_served;         /* requests answered (now or late) */
	_Atomic long f_held;           /* FAKE_HOLD requests received */
	_Atomic int f_max_batch;       /* most requests answered in one batch */
	_Atomic long f_auth_failed;    /* AUTHs whose MAC did not verify */
	_Atomic int f_hs;              /* enum fake_hs, for the next handshakes */
	/*
	 * WRITEs (a replica group's data path): the next f_notleader of them
	 * are answered as a member that does not lead; the others are kept
	 * (the last one, by f_lock) and answered.
	 */
	_Atomic int f_notleader;
	_Atomic long f_writes;         /* WRITEs received, refused or not */
	uint8_t *f_wdata;              /* the last WRITE kept: its data ... */
	size_t f_wlen;
	uint64_t f_whandle, f_woff;    /* ... handle and offset */
};

/* A connection's server side: its thread owns all of it. */
struct fake_conn {
	struct fake *fc_fake;
	int fc_fd;
	uint8_t *fc_buf;               /* bytes read, not yet parsed */
	size_t fc_len, fc_cap;
	struct {
		uint64_t due_ms;
		struct orch_buf frame;
	} fc_delayed[FAKE_DELAYED_MAX];
	int fc_ndelayed;
};

/* Writes all of @p; false if the client is gone. */
static bool fake_write(struct fake_conn *fc, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fc->fc_fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return false;
		p += w;
		n -= (size_t)w;
	}
	return true;
}

/*
 * Takes the next whole frame out of the buffer: true with *@h and
 * *@payload (malloc'd, the caller's), false if none is whole yet.
 */
static bool fake_take_frame(struct fake_conn *fc, struct orch_frame_hdr *h, uint8_t **payload)
{
	if (fc->fc_len < ORCH_FRAME_HDR)
		return false;
	orch_frame_hdr_decode(fc->fc_buf, h);
	if (fc->fc_len < ORCH_FRAME_HDR + (size_t)h->length)
		return false;
	*payload = malloc(h->length ? h->length : 1);
	if (!*payload)
		abort();
	memcpy(*payload, fc->fc_buf + ORCH_FRAME_HDR, h->length);
	fc->fc_len -= ORCH_FRAME_HDR + h->length;
	memmove(fc->fc_buf, fc->fc_buf + ORCH_FRAME_HDR + h->length, fc->fc_len);
	return true;
}

/* True if a whole frame waits in the buffer. */
static bool fake_has_frame(const struct fake_conn *fc)
{
	struct orch_frame_hdr h;

	if (fc->fc_len < ORCH_FRAME_HDR)
		return false;
	orch_frame_hdr_decode(fc->fc_buf, &h);
	return fc->fc_len >= ORCH_FRAME_HDR + (size_t)h.length;
}

/* Reads what has come (waiting up to @ms, -1 = no limit); false at end of stream. */
static bool fake_fill(struct fake_conn *fc, int ms)
{
	struct pollfd pfd = { .fd = fc->fc_fd, .events = POLLIN };
	ssize_t r;
	int rc;

	rc = poll(&pfd, 1, ms);
	if (rc < 0)
		return errno == EINTR;
	if (rc == 0)
		return true;
	if (fc->fc_cap - fc->fc_len < 64 * 1024) {
		uint8_t *nb = realloc(fc->fc_buf, fc->fc_cap * 2);

		if (!nb)
			abort();
		fc->fc_buf = nb;
		fc->fc_cap *= 2;
	}
	r = recv(fc->fc_fd, fc->fc_buf + fc->fc_len, fc->fc_cap - fc->fc_len, 0);
	if (r < 0)
		return errno == EINTR || errno == EAGAIN;
	if (r == 0)
		return false;
	fc->fc_len += (size_t)r;
	return true;
}

/* The next frame, waiting for it (10 s at most): false if the client left. */
static bool fake_read_frame(struct fake_conn *fc, struct orch_frame_hdr *h, uint8_t **payload,
			    struct orch_msg *m)
{
	uint64_t deadline = now_ms() + 10000;

	while (!fake_take_frame(fc, h, payload)) {
		if (now_ms() > deadline || !fake_fill(fc, 100))
			return false;
	}
	if (orch_msg_decode(h, *payload, m) != 0) {
		free(*payload);
		*payload = NULL;
		return false;
	}
	return true;
}

/* Encodes and sends @m; false if the client is gone. */
static bool fake_send(struct fake_conn *fc, const struct orch_msg *m)
{
	struct orch_buf b;
	bool ok;

	orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	ok = orch_msg_encode(&b, m) == 0 && fake_write(fc, b.b_data, b.b_len);
	orch_buf_fini(&b);
	return ok;
}

static void fake_push_encode(struct orch_buf *out, uint64_t handle)
{
	struct orch_msg p;

	orch_msg_init(&p, ORCH_SV2CL_INVAL_ATTR);
	p.flags = ORCH_FRAME_PUSH;
	p.handle = handle;
	if (orch_msg_encode(out, &p) != 0)
		abort();
}

/*
 * Writes what f_hs says in place of HELLO' @rep: true if the handshake is
 * to go on (@rep may have been changed).
 */
static bool fake_handshake_fault(struct fake_conn *fc, struct orch_msg *rep)
{
	uint8_t hdr[ORCH_FRAME_HDR], junk[64] = { 0 };
	struct orch_frame_hdr h;
	struct orch_buf b;
	bool ok;

	switch (atomic_load(&fc->fc_fake->f_hs)) {
	case FAKE_HS_REFUSE:
		rep->status = -EPROTONOSUPPORT;
		fake_send(fc, rep);
		return false;
	case FAKE_HS_VERSION:
		rep->vmin = rep->vmax = ORCH_PROTO_VERSION + 1;
		return true;
	case FAKE_HS_REQID:
		rep->reqid++;
		return true;
	case FAKE_HS_HUGE:
		h = (struct orch_frame_hdr){ .length = ORCH_AUTH_MAXFRAME + 1,
					     .type = ORCH_AN2AN_HELLO, .version = ORCH_PROTO_VERSION,
					     .flags = ORCH_FRAME_REPLY, .reqid = rep->reqid };
		orch_frame_hdr_encode(hdr, &h);
		fake_write(fc, hdr, sizeof(hdr));
		fake_write(fc, junk, sizeof(junk));
		return false;
	case FAKE_HS_PUSH:
		orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_MAXFRAME);
		fake_push_encode(&b, 1);
		ok = fake_write(fc, b.b_data, b.b_len);
		orch_buf_fini(&b);
		return ok;
	case FAKE_HS_CLOSE:
		return false;
	case FAKE_HS_SILENT:
		while (fake_fill(fc, 100)) /* until the client gives up */
			;
		return false;
	default:
		return true;
	}
}

/* The acceptor's half of net/auth.h, written apart.  True if the client is in. */
static bool fake_handshake(struct fake_conn *fc)
{
	struct fake *f = fc->fc_fake;
	struct orch_frame_hdr h;
	struct orch_msg m, rep;
	uint8_t nc[ORCH_NONCE_LEN], ns[ORCH_NONCE_LEN], mac[ORCH_MAC_LEN];
	uint8_t *payload;
	bool ok;

	if (!fake_read_frame(fc, &h, &payload, &m))
		return false;
	ok = m.type == ORCH_AN2AN_HELLO && !(m.flags & ORCH_FRAME_REPLY);
	memcpy(nc, m.nonce, sizeof(nc));
	orch_msg_fini(&m);
	free(payload);
	if (!ok || orch_auth_nonce(ns) != 0)
		return false;
	orch_msg_init(&rep, ORCH_AN2AN_HELLO);
	rep.flags = ORCH_FRAME_REPLY;
	rep.reqid = h.reqid;
	rep.vmin = rep.vmax = ORCH_PROTO_VERSION;
	rep.features = f->f_features;
	memcpy(rep.nonce, ns, sizeof(ns));
	orch_auth_mac(f->f_key, true, nc, ns, rep.mac);
	if (!fake_handshake_fault(fc, &rep) || !fake_send(fc, &rep))
		return false;

	if (!fake_read_frame(fc, &h, &payload, &m))
		return false;
	orch_auth_mac(f->f_key, false, ns, nc, mac);
	ok = m.type == ORCH_AN2AN_AUTH && orch_auth_mac_equal(mac, m.mac);
	orch_msg_fini(&m);
	free(payload);
	if (!ok)
		atomic_fetch_add(&f->f_auth_failed, 1);
	if (atomic_load(&f->f_hs) == FAKE_HS_REJECT)
		ok = false;
	orch_msg_init(&rep, ORCH_AN2AN_AUTH);
	rep.flags = ORCH_FRAME_REPLY;
	rep.reqid = h.reqid;
	rep.status = ok ? 0 : -EACCES;
	return fake_send(fc, &rep) && ok;
}

/* Appends the reply to GETATTR @handle: attr.handle echoes it, size is 3x. */
static void fake_reply_encode(struct orch_buf *out, uint64_t reqid, uint64_t handle)
{
	struct orch_msg rep;

	orch_msg_init(&rep, ORCH_CL2SV_GETATTR);
	rep.flags = ORCH_FRAME_REPLY;
	rep.reqid = reqid;
	rep.attr.handle = handle;
	rep.attr.size = handle * 3;
	rep.attr.mode = 0100644;
	rep.attr.nlink = 1;
	if (orch_msg_encode(out, &rep) != 0)
		abort();
}

/* Queues a copy of @frame, to be sent at @due_ms. */
static void fake_delay(struct fake_conn *fc, uint64_t due_ms, const struct orch_buf *frame)
{
	int i = fc->fc_ndelayed++;

	if (i >= FAKE_DELAYED_MAX)
		abort();
	fc->fc_delayed[i].due_ms = due_ms;
	orch_buf_init(&fc->fc_delayed[i].frame, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	if (orch_buf_append(&fc->fc_delayed[i].frame, frame->b_data, frame->b_len) != 0)
		abort();
}

/* Sends the delayed frames that are due; ms to the next one (-1: none). */
static int fake_send_due(struct fake_conn *fc, bool *alive)
{
	uint64_t now = now_ms();
	int next = -1;

	for (int i = 0; i < fc->fc_ndelayed;) {
		if (fc->fc_delayed[i].due_ms <= now) {
			if (*alive)
				*alive = fake_write(fc, fc->fc_delayed[i].frame.b_data,
						    fc->fc_delayed[i].frame.b_len);
			orch_buf_fini(&fc->fc_delayed[i].frame);
			fc->fc_delayed[i] = fc->fc_delayed[--fc->fc_ndelayed];
			continue;
		}
		if (next < 0 || fc->fc_delayed[i].due_ms - now < (uint64_t)next)
			next = (int)(fc->fc_delayed[i].due_ms - now);
		i++;
	}
	return next;
}

/* Keeps the data of WRITE @m, the last one kept. */
static void fake_keep_write(struct fake *f, const struct orch_msg *m)
{
	pthread_mutex_lock(&f->f_lock);
	free(f->f_wdata);
	f->f_wdata = malloc(m->data.len ? m->data.len : 1);
	if (!f->f_wdata)
		abort();
	memcpy(f->f_wdata, m->data.s, m->data.len);
	f->f_wlen = m->data.len;
	f->f_whandle = m->handle;
	f->f_woff = m->offset;
	pthread_mutex_unlock(&f->f_lock);
}

/*
 * Answers WRITE @m: refused as a follower's while f_notleader lasts, else
 * kept.  A WRITERS is answered with the attributes of its handle.
 */
static void fake_answer_write(struct fake *f, struct orch_buf *out, uint64_t reqid,
			       const struct orch_msg *m)
{
	struct orch_msg rep;
	int left;

	orch_msg_init(&rep, m->type);
	rep.flags = ORCH_FRAME_REPLY;
	rep.reqid = reqid;
	if (m->type == ORCH_CL2SV_WRITERS) {
		rep.attr.handle = m->handle;
		rep.attr.size = m->size;
		rep.attr.mode = 0100644;
		rep.attr.nlink = 1;
	} else {
		atomic_fetch_add(&f->f_writes, 1);
		left = atomic_load(&f->f_notleader);
		if (left > 0 && atomic_compare_exchange_strong(&f->f_notleader, &left, left - 1)) {
			rep.status = -ORCH_ENOTLEADER;
			rep.leader = ORCH_NO_LEADER;
		} else {
			fake_keep_write(f, m);
		}
	}
	if (orch_msg_encode(out, &rep) != 0)
		abort();
}

/*
 * Answers the requests read so far, in reverse order: the replies (and
 * pushes) of the batch go out in one write.  False when the connection is
 * to end (FAKE_DROP, or the client left).
 */
static bool fake_serve_batch(struct fake_conn *fc)
{
	struct fake *f = fc->fc_fake;
	struct {
		uint64_t reqid, handle;
	} reqs[512];
	struct orch_frame_hdr h;
	struct orch_buf out, one;
	uint8_t *payload;
	int n = 0;
	bool alive = true, drop = false;

	/* WRITE and WRITERS are answered as they come, the GETATTRs after. */
	orch_buf_init(&out, 64u << 20);
	while (n < (int)ORCH_ARRAY_SIZE(reqs) && fake_take_frame(fc, &h, &payload)) {
		struct orch_msg m;

		if (orch_msg_decode(&h, payload, &m) != 0 ||
		    (m.type != ORCH_CL2SV_GETATTR && m.type != ORCH_CL2SV_WRITE &&
		     m.type != ORCH_CL2SV_WRITERS)) {
			fprintf(stderr, "fake server: unexpected frame type=0x%04x\n", h.type);
			abort();
		}
		if (m.type != ORCH_CL2SV_GETATTR) {
			fake_answer_write(f, &out, h.reqid, &m);
			orch_msg_fini(&m);
			free(payload);
			continue;
		}
		reqs[n].reqid = h.reqid;
		reqs[n].handle = m.handle;
		orch_msg_fini(&m);
		free(payload);
		n++;
	}
	orch_buf_init(&one, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	for (int i = n - 1; i >= 0; i--) {
		uint64_t handle = reqs[i].handle;

		if (handle & FAKE_DROP) {
			drop = true;
			continue;
		}
		if (handle & FAKE_HOLD) {
			atomic_fetch_add(&f->f_held, 1);
			continue;
		}
		if (handle & FAKE_LATE) {
			orch_buf_reset(&one);
			fake_reply_encode(&one, reqs[i].reqid, handle);
			fake_delay(fc, now_ms() + FAKE_LATE_MS, &one);
			atomic_fetch_add(&f->f_served, 1);
			continue;
		}
		if (handle & FAKE_PUSH)
			fake_push_encode(&out, FAKE_VALUE(handle));
		fake_reply_encode(&out, reqs[i].reqid, handle);
		if (handle & FAKE_PUSH_TAIL)
			fake_push_encode(&out, FAKE_VALUE(handle));
		if (handle & FAKE_PUSH_AFTER) {
			orch_buf_reset(&one);
			fake_push_encode(&one, FAKE_VALUE(handle));
			fake_delay(fc, now_ms() + FAKE_PUSH_AFTER_MS, &one);
		}
		atomic_fetch_add(&f->f_served, 1);
	}
	if (n > atomic_load(&f->f_max_batch))
		atomic_store(&f->f_max_batch, n);
	if (out.b_err)
		abort();
	if (out.b_len)
		alive = fake_write(fc, out.b_data, out.b_len);
	orch_buf_fini(&out);
	orch_buf_fini(&one);
	return alive && !drop;
}

static void *fake_conn_main(void *arg)
{
	struct fake_conn *fc = arg;
	bool alive;

	fc->fc_cap = 256 * 1024;
	fc->fc_buf = malloc(fc->fc_cap);
	if (!fc->fc_buf)
		abort();
	alive = fake_handshake(fc);
	while (alive) {
		int ms = fake_send_due(fc, &alive);

		/* A batch cut at reqs[]'s size left whole frames: no wait then. */
		if (!alive || !fake_fill(fc, fake_has_frame(fc) ? 0 : ms))
			break;
		alive = fake_serve_batch(fc);
	}
	/* What is still delayed dies with the connection. */
	alive = false;
	fake_send_due(fc, &alive);
	for (int i = 0; i < fc->fc_ndelayed; i++)
		orch_buf_fini(&fc->fc_delayed[i].frame);
	shutdown(fc->fc_fd, SHUT_RDWR);
	close(fc->fc_fd);
	free(fc->fc_buf);
	free(fc);
	return NULL;
}

/* orch_dial_fn: a socketpair, whose other end gets a server thread. */
static int fake_dial(void *arg, unsigned int server)
{
	struct fake *f = arg;
	struct fake_conn *fc;
	int sv[2], error = 0;

	(void)server;
	pthread_mutex_lock(&f->f_lock);
	if (f->f_refuse || f->f_nconns == FAKE_CONNS_MAX) {
		error = f->f_refuse ? f->f_refuse : -EMFILE;
		goto out_unlock;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		error = -errno;
		goto out_unlock;
	}
	fc = calloc(1, sizeof(*fc));
	if (!fc) {
		error = -ENOMEM;
		goto out_close;
	}
	fc->fc_fake = f;
	fc->fc_fd = sv[1];
	error = -pthread_create(&f->f_threads[f->f_nconns], NULL, fake_conn_main, fc);
	if (error) {
		free(fc);
		goto out_close;
	}
	f->f_nconns++;
	pthread_mutex_unlock(&f->f_lock);
	return sv[0];
out_close:
	close(sv[0]);
	close(sv[1]);
out_unlock:
	pthread_mutex_unlock(&f->f_lock);
	return error;
}

static void fake_init(struct fake *f, uint8_t key_byte, bool leases)
{
	memset(f, 0, sizeof(*f));
	memset(f->f_key, key_byte, sizeof(f->f_key));
	f->f_features = leases ? ORCH_FEAT_LEASES | ((uint64_t)FAKE_LEASE_MS << 32) : 0;
	pthread_mutex_init(&f->f_lock, NULL);
}

/* Joins the server threads: the client must be destroyed first. */
static void fake_fini(struct fake *f)
{
	for (int i = 0; i < f->f_nconns; i++)
		pthread_join(f->f_threads[i], NULL);
	free(f->f_wdata);
	pthread_mutex_destroy(&f->f_lock);
}

static int fake_nconns(struct fake *f)
{
	int n;

	pthread_mutex_lock(&f->f_lock);
	n = f->f_nconns;
	pthread_mutex_unlock(&f->f_lock);
	return n;
}

/* --- Client side ------------------------------------------------------------ */

/*
 * A client of @nservers servers (replica groups of @replicas members, 1:
 * plain servers), all served by @f, with key bytes 0x5a.
 */
static int client_make_groups(struct fake *f, unsigned int nservers, unsigned int replicas,
			      uint32_t timeout_ms, struct orch_client **out)
{
	struct orch_cfg *cfg = calloc(1, sizeof(*cfg));
	int error;

	if (!cfg)
		return -ENOMEM;
	cfg->nservers = nservers;
	cfg->replicas = replicas;
	cfg->nmembers = nservers * replicas;
	cfg->op_timeout_ms = timeout_ms;
	cfg->lease_ms = FAKE_LEASE_MS;
	memset(cfg->key, 0x5a, sizeof(cfg->key));
	for (unsigned int i = 0; i < cfg->nmembers; i++) {
		snprintf(cfg->members[i].name, sizeof(cfg->members[i].name), "fake%u", i);
		snprintf(cfg->members[i].host, sizeof(cfg->members[i].host), "socketpair");
	}
	/* A group goes by its first member's name. */
	for (unsigned int i = 0; i < nservers; i++)
		cfg->servers[i] = cfg->members[i * replicas];
	error = orch_client_create(cfg, out);
	free(cfg);
	if (!error)
		orch_client_set_dial(*out, fake_dial, f);
	return error;
}

static int client_make(struct fake *f, unsigned int nservers, uint32_t timeout_ms,
		       struct orch_client **out)
{
	return client_make_groups(f, nservers, 1, timeout_ms, out);
}

/* GETATTR of @handle on @server: 0 or -errno; checks the reply is ours. */
static int getattr_send(struct orch_client *cl, unsigned int server, uint64_t handle,
			struct orch_call **call)
{
	struct orch_msg req;

	orch_msg_init(&req, ORCH_CL2SV_GETATTR);
	req.handle = handle;
	return orch_client_send(cl, server, &req, call);
}

/* Waits for a GETATTR of @handle; -EBADMSG if the reply was another's. */
static int getattr_wait(struct orch_client *cl, struct orch_call *call, uint64_t handle,
			struct orch_reply *rep)
{
	int error = orch_client_wait(cl, call, rep);

	if (error)
		return error;
	if (rep->m.type != ORCH_CL2SV_GETATTR || rep->m.attr.handle != handle ||
	    rep->m.attr.size != handle * 3) {
		fprintf(stderr, "reply for handle %llu reached the caller of %llu\n",
			(unsigned long long)rep->m.attr.handle, (unsigned long long)handle);
		orch_reply_release(rep);
		return -EBADMSG;
	}
	return 0;
}

static int getattr(struct orch_client *cl, unsigned int server, uint64_t handle,
		   struct orch_reply *rep)
{
	struct orch_call *call;
	int error = getattr_send(cl, server, handle, &call);

	if (error)
		return error;
	return getattr_wait(cl, call, handle, rep);
}

/* Test threads: what they did, for the main thread to check after join. */
struct worker {
	struct orch_client *w_cl;
	unsigned int w_id;
	unsigned int w_nservers;
	int w_rounds;
	int w_error;          /* first failure */
	long w_calls;         /* calls that got their reply */
};

static void worker_fail(struct worker *w, int error, const char *what)
{
	if (!w->w_error) {
		fprintf(stderr, "worker %u: %s: %s\n", w->w_id, what, strerror(-error));
		w->w_error = error;
	}
}

static uint64_t worker_handle(const struct worker *w, int round, int k)
{
	return ((uint64_t)w->w_id << 32) | ((uint64_t)round << 4) | (uint64_t)k;
}

/*
 * Each round puts 1 to 4 calls in flight, spread over the servers (a
 * fan-out, as a striped read does), then waits for them in an order that
 * changes from round to round.
 */
static void *worker_fanout(void *arg)
{
	struct worker *w = arg;

	for (int r = 0; r < w->w_rounds && !w->w_error; r++) {
		struct orch_call *calls[4];
		uint64_t handles[4];
		int n = 1 + (int)((w->w_id + (unsigned int)r) % 4), sent = 0;

		for (int k = 0; k < n; k++) {
			int error;

			handles[k] = worker_handle(w, r, k);
			error = getattr_send(w->w_cl, (unsigned int)(r + k) % w->w_nservers,
					     handles[k], &calls[k]);
			if (error) {
				worker_fail(w, error, "send");
				break;
			}
			sent++;
		}
		for (int j = 0; j < sent; j++) {
			int k = (r % 2) ? sent - 1 - j : j;
			struct orch_reply rep;
			int error = getattr_wait(w->w_cl, calls[k], handles[k], &rep);

			if (error) {
				worker_fail(w, error, "wait");
				continue;
			}
			w->w_calls++;
			orch_reply_release(&rep);
		}
	}
	return NULL;
}

/* One call at a time, w_rounds of them, on server 0. */
static void *worker_serial(void *arg)
{
	struct worker *w = arg;

	for (int r = 0; r < w->w_rounds; r++) {
		struct orch_reply rep;
		int error = getattr(w->w_cl, 0, worker_handle(w, r, 0), &rep);

		if (error) {
			worker_fail(w, error, "call");
			continue;
		}
		w->w_calls++;
		orch_reply_release(&rep);
	}
	return NULL;
}

/* Valgrind runs one thread at a time: fewer rounds there. */
static int rounds(int n)
{
	const char *p = getenv("LD_PRELOAD");

	return p && strstr(p, "vgpreload") ? (n + 9) / 10 : n;
}

/* --- Cases ---------------------------------------------------------------- */

ORCH_TEST(replies_reach_their_callers)
{
	enum { NTHREADS = 8, NSERVERS = 2 };
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	uint64_t counts[64] = { 0 };
	uint16_t types[64];
	struct orch_client *cl;
	struct fake f;
	long calls = 0, getattrs = 0;
	size_t ntypes;
	int failed = 0;

	fake_init(&f, 0x5a, false);
	ORCH_CHECK_OK(client_make(&f, NSERVERS, 30000, &cl));
	for (int i = 0; i < NTHREADS; i++) {
		w[i] = (struct worker){ .w_cl = cl, .w_id = (unsigned int)i + 1,
					.w_nservers = NSERVERS, .w_rounds = rounds(150) };
		ORCH_CHECK(pthread_create(&t[i], NULL, worker_fanout, &w[i]) == 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], NULL);
		failed += w[i].w_error != 0;
		calls += w[i].w_calls;
	}
	ntypes = orch_msg_types(types, 64);
	orch_client_request_counts(cl, counts, 64);
	for (size_t i = 0; i < ntypes; i++)
		if (types[i] == ORCH_CL2SV_GETATTR)
			getattrs = (long)counts[i];
	orch_client_destroy(cl);
	fake_fini(&f);
	printf("replies_reach_their_callers: %ld calls, at most %d requests read at once\n",
	       calls, atomic_load(&f.f_max_batch));
	ORCH_CHECK(failed == 0);
	ORCH_CHECK(calls == atomic_load(&f.f_served));
	ORCH_CHECK(getattrs == calls);
	ORCH_CHECK(f.f_nconns == NSERVERS); /* one connection each, never dropped */
}

/* What the push handler saw, per server; its own lock (it runs on readers). */
struct pushes {
	pthread_mutex_t p_lock;
	uint64_t p_last_stamp[2];  /* stamps must rise, per server */
	bool p_order_broken;
	long p_resets[2];          /* m == NULL: forget everything */
	long p_count;
	uint64_t p_stamp[4096];    /* of the push of value v, by v; 0 = none yet */
};

static void push_record(void *arg, unsigned int server, uint64_t stamp, const struct orch_msg *m,
			uint64_t gen, uint64_t seq)
{
	struct pushes *p = arg;

	(void)gen;
	pthread_mutex_lock(&p->p_lock);
	/* No acknowledgements were asked for: no push is numbered. */
	if (seq)
		p->p_order_broken = true;
	if (server >= 2 || stamp <= p->p_last_stamp[server])
		p->p_order_broken = true;
	else
		p->p_last_stamp[server] = stamp;
	if (!m) {
		if (server < 2)
			p->p_resets[server]++;
	} else if (m->type != ORCH_SV2CL_INVAL_ATTR || m->handle >= 4096) {
		p->p_order_broken = true;
	} else {
		p->p_stamp[m->handle] = stamp;
		p->p_count++;
	}
	pthread_mutex_unlock(&p->p_lock);
}

static uint64_t push_stamp(struct pushes *p, uint64_t v)
{
	uint64_t s;

	pthread_mutex_lock(&p->p_lock);
	s = p->p_stamp[v];
	pthread_mutex_unlock(&p->p_lock);
	return s;
}

struct push_worker {
	struct orch_client *pw_cl;
	struct pushes *pw_p;
	unsigned int pw_id;
	int pw_rounds;
	int pw_error;
};

/* Every other call has a push of its value sent just before its reply. */
static void *push_worker_main(void *arg)
{
	struct push_worker *pw = arg;

	for (int r = 0; r < pw->pw_rounds && !pw->pw_error; r++) {
		uint64_t v = pw->pw_id * 1000 + (uint64_t)r;
		bool push = r % 2 == 0;
		uint64_t h = v | (push ? FAKE_PUSH : 0);
		struct orch_reply rep;
		int error = getattr(pw->pw_cl, (unsigned int)r % 2, h, &rep);

		if (error) {
			pw->pw_error = error;
			break;
		}
		/* The push was read before the reply: the handler has it. */
		if (rep.stamp == 0 || (push && (push_stamp(pw->pw_p, v) == 0 ||
						push_stamp(pw->pw_p, v) >= rep.stamp))) {
			fprintf(stderr, "push of %llu: stamp %llu, reply stamp %llu\n",
				(unsigned long long)v,
				(unsigned long long)push_stamp(pw->pw_p, v),
				(unsigned long long)rep.stamp);
			pw->pw_error = -EBADMSG;
		}
		orch_reply_release(&rep);
	}
	return NULL;
}

ORCH_TEST(pushes_reach_the_handler_in_stream_order)
{
	enum { NTHREADS = 4 };
	struct push_worker pw[NTHREADS];
	pthread_t t[NTHREADS];
	struct pushes *p = calloc(1, sizeof(*p));
	struct orch_client *cl;
	struct orch_reply rep;
	struct fake f;
	uint64_t deadline, t0, v = 4000;
	bool seen = false;
	int failed = 0;
	long count;

	ORCH_CHECK(p != NULL);
	pthread_mutex_init(&p->p_lock, NULL);
	fake_init(&f, 0x5a, true);
	ORCH_CHECK_OK(client_make(&f, 2, 30000, &cl));
	orch_client_set_push_handler(cl, push_record, p, false);
	for (int i = 0; i < NTHREADS; i++) {
		pw[i] = (struct push_worker){ .pw_cl = cl, .pw_p = p, .pw_id = (unsigned int)i,
					      .pw_rounds = rounds(200) };
		ORCH_CHECK(pthread_create(&t[i], NULL, push_worker_main, &pw[i]) == 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(t[i], NULL);
		failed += pw[i].pw_error != 0;
	}

	/*
	 * A push that comes while nobody waits on the connection: read by
	 * orch_client_poll, which the mount calls before it trusts its cache.
	 */
	ORCH_CHECK_OK(getattr(cl, 0, v | FAKE_PUSH_AFTER, &rep));
	orch_reply_release(&rep);
	deadline = now_ms() + 10000;
	while (!seen && now_ms() < deadline) {
		ORCH_CHECK(orch_client_poll(cl, 0));
		seen = push_stamp(p, v) != 0;
		if (!seen)
			sleep_ms(5);
	}
	ORCH_CHECK(seen);

	/* ... or by the watcher, orch_client_wait_pushes, with no call at all. */
	ORCH_CHECK_OK(getattr(cl, 0, (v + 1) | FAKE_PUSH_AFTER, &rep));
	orch_reply_release(&rep);
	deadline = now_ms() + 10000;
	while (push_stamp(p, v + 1) == 0 && now_ms() < deadline)
		ORCH_CHECK(orch_client_wait_pushes(cl, 100) >= 0);
	ORCH_CHECK(push_stamp(p, v + 1) != 0);

	/*
	 * A push that came in the same recv as a reply stays in the reader's
	 * buffer, with nothing left in the socket to wake poll: the watcher
	 * finds it there at once.
	 */
	ORCH_CHECK_OK(getattr(cl, 0, (v + 2) | FAKE_PUSH_TAIL, &rep));
	orch_reply_release(&rep);
	ORCH_CHECK(push_stamp(p, v + 2) == 0);
	t0 = now_ms();
	ORCH_CHECK(orch_client_wait_pushes(cl, 5000) == 1);
	ORCH_CHECK(now_ms() - t0 < 1000);
	ORCH_CHECK(push_stamp(p, v + 2) != 0);
	orch_client_destroy(cl);
	fake_fini(&f);
	pthread_mutex_lock(&p->p_lock);
	count = p->p_count;
	pthread_mutex_unlock(&p->p_lock);
	pthread_mutex_destroy(&p->p_lock);
	ORCH_CHECK(failed == 0);
	ORCH_CHECK(seen);
	ORCH_CHECK(!p->p_order_broken);
	/* Each connection's start told the cache to forget. */
	ORCH_CHECK(p->p_resets[0] >= 1 && p->p_resets[1] >= 1);
	ORCH_CHECK(count == NTHREADS * ((rounds(200) + 1) / 2) + 3);
	free(p);
}

struct held_call {
	struct orch_client *h_cl;
	uint64_t h_handle;
	int h_error;
	uint64_t h_gen;
	uint64_t h_elapsed_ms;
};

static void *held_call_main(void *arg)
{
	struct held_call *hc = arg;
	struct orch_reply rep = { 0 };
	uint64_t t0 = now_ms();

	hc->h_error = getattr(hc->h_cl, 0, hc->h_handle, &rep);
	hc->h_gen = rep.gen;
	hc->h_elapsed_ms = now_ms() - t0;
	if (!hc->h_error)
		orch_reply_release(&rep);
	return NULL;
}

static bool wait_held(struct fake *f, long n)
{
	uint64_t deadline = now_ms() + 20000;

	while (atomic_load(&f->f_held) < n) {
		if (now_ms() > deadline)
			return false;
		sleep_ms(2);
	}
	return true;
}

ORCH_TEST(drop_fails_calls_in_flight_and_reconnects)
{
	enum { NHELD = 4 };
	struct held_call hc[NHELD + 1];
	pthread_t t[NHELD + 1];
	struct orch_client *cl;
	struct orch_reply rep;
	struct fake f;
	uint64_t gen1;

	fake_init(&f, 0x5a, true);
	/* A deadline far away: the calls must fail because of the drop. */
	ORCH_CHECK_OK(client_make(&f, 1, 60000, &cl));
	ORCH_CHECK_OK(getattr(cl, 0, 7, &rep));
	gen1 = rep.gen;
	orch_reply_release(&rep);
	ORCH_CHECK(gen1 != 0 && gen1 == orch_client_conn_gen(cl, 0));
	for (int i = 0; i <= NHELD; i++) {
		hc[i] = (struct held_call){ .h_cl = cl, .h_handle = (uint64_t)(100 + i) | FAKE_HOLD };
		if (i == NHELD)
			hc[i].h_handle = 200 | FAKE_DROP;
		if (i == NHELD)
			ORCH_CHECK(wait_held(&f, NHELD));
		ORCH_CHECK(pthread_create(&t[i], NULL, held_call_main, &hc[i]) == 0);
	}
	for (int i = 0; i <= NHELD; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i <= NHELD; i++) {
		ORCH_CHECK_RC(hc[i].h_error, -EIO);
		ORCH_CHECK(hc[i].h_gen == gen1);
		ORCH_CHECK(hc[i].h_elapsed_ms < 30000);
	}
	/* The next call connects again. */
	ORCH_CHECK_OK(getattr(cl, 0, 8, &rep));
	ORCH_CHECK(rep.gen > gen1);
	orch_reply_release(&rep);
	ORCH_CHECK(fake_nconns(&f) == 2);

	/* A server that cannot be reached: its error, and no hang. */
	pthread_mutex_lock(&f.f_lock);
	f.f_refuse = -EHOSTDOWN;
	pthread_mutex_unlock(&f.f_lock);
	ORCH_CHECK_RC(getattr(cl, 0, 9 | FAKE_DROP, &rep), -EIO);
	ORCH_CHECK_RC(getattr(cl, 0, 10, &rep), -EHOSTDOWN);
	ORCH_CHECK(orch_client_conn_gen(cl, 0) == 0);
	orch_client_destroy(cl);
	fake_fini(&f);
}

ORCH_TEST(deadlines_expire_and_the_reader_role_moves_on)
{
	enum { NWORKERS = 3, TIMEOUT_MS = 500 };
	struct worker w[NWORKERS];
	pthread_t t[NWORKERS], th;
	struct held_call hc;
	struct orch_client *cl;
	struct orch_reply rep;
	struct fake f;
	uint64_t t0, el;
	int failed = 0;

	fake_init(&f, 0x5a, false);
	ORCH_CHECK_OK(client_make(&f, 1, TIMEOUT_MS, &cl));
	ORCH_CHECK_OK(getattr(cl, 0, 1, &rep)); /* connected before the clock runs */
	orch_reply_release(&rep);

	/*
	 * A call never answered: its caller waits first, so it reads for the
	 * others until its deadline, then hands the role on.
	 */
	hc = (struct held_call){ .h_cl = cl, .h_handle = 2 | FAKE_HOLD };
	ORCH_CHECK(pthread_create(&th, NULL, held_call_main, &hc) == 0);
	ORCH_CHECK(wait_held(&f, 1));
	for (int i = 0; i < NWORKERS; i++) {
		w[i] = (struct worker){ .w_cl = cl, .w_id = (unsigned int)i + 1,
					.w_nservers = 1, .w_rounds = rounds(200) };
		ORCH_CHECK(pthread_create(&t[i], NULL, worker_serial, &w[i]) == 0);
	}
	pthread_join(th, NULL);
	for (int i = 0; i < NWORKERS; i++) {
		pthread_join(t[i], NULL);
		failed += w[i].w_error != 0;
	}
	ORCH_CHECK_RC(hc.h_error, -ETIMEDOUT);
	ORCH_CHECK(hc.h_elapsed_ms >= TIMEOUT_MS - 20);
	ORCH_CHECK(hc.h_elapsed_ms < 20 * TIMEOUT_MS);
	ORCH_CHECK(failed == 0);

	/* A reply that comes after its deadline is dropped by whoever reads it. */
	t0 = now_ms();
	ORCH_CHECK_RC(getattr(cl, 0, 3 | FAKE_LATE, &rep), -ETIMEDOUT);
	el = now_ms() - t0;
	ORCH_CHECK(el >= TIMEOUT_MS - 20 && el < FAKE_LATE_MS);
	sleep_ms(FAKE_LATE_MS - TIMEOUT_MS + 200);
	ORCH_CHECK_OK(getattr(cl, 0, 4, &rep));
	orch_reply_release(&rep);
	/* It said nothing for a whole deadline: sick, so the probe reconnected. */
	ORCH_CHECK(fake_nconns(&f) == 2);

	/* A shorter deadline set on the fly applies to the next calls. */
	orch_client_set_timeout(cl, 100);
	t0 = now_ms();
	ORCH_CHECK_RC(getattr(cl, 0, 5 | FAKE_HOLD, &rep), -ETIMEDOUT);
	el = now_ms() - t0;
	ORCH_CHECK(el >= 80 && el < TIMEOUT_MS + 1000);
	orch_client_destroy(cl);
	fake_fini(&f);
}

/* A call given a shorter time than the client's ends then, the server silent or not. */
ORCH_TEST(a_call_within_ends_at_its_own_time)
{
	struct orch_client *cl;
	struct orch_reply rep;
	struct orch_msg req;
	struct fake f;
	uint64_t t0, el;

	fake_init(&f, 0x5a, false);
	ORCH_CHECK_OK(client_make(&f, 1, 10000, &cl));
	ORCH_CHECK_OK(getattr(cl, 0, 1, &rep)); /* connected before the clock runs */
	orch_reply_release(&rep);
	orch_msg_init(&req, ORCH_CL2SV_GETATTR);
	/* 0: the client's own deadline; a call answered is answered. */
	req.handle = 3;
	ORCH_CHECK_OK(orch_client_call_within(cl, 0, &req, 0, &rep));
	ORCH_CHECK(rep.m.attr.handle == 3);
	orch_reply_release(&rep);
	/* Never answered: over at 200 ms, not at the client's 10 s (slack for valgrind). */
	req.handle = 2 | FAKE_HOLD;
	t0 = now_ms();
	ORCH_CHECK_RC(orch_client_call_within(cl, 0, &req, 200, &rep), -ETIMEDOUT);
	el = now_ms() - t0;
	ORCH_CHECK(el >= 180 && el < 5000);
	orch_client_destroy(cl);
	fake_fini(&f);
}

ORCH_TEST(another_key_is_named)
{
	struct orch_client *cl;
	struct orch_reply rep;
	struct fake f;

	fake_init(&f, 0x11, false); /* the client holds 0x5a bytes */
	ORCH_CHECK_OK(client_make(&f, 2, 5000, &cl));
	ORCH_CHECK(orch_client_key_mismatch(cl) == -1);
	ORCH_CHECK_RC(getattr(cl, 1, 1, &rep), -EKEYREJECTED);
	ORCH_CHECK(orch_client_key_mismatch(cl) == 1);
	orch_client_destroy(cl);
	fake_fini(&f);
	/* The client disclosed no MAC over our nonce: its AUTH failed here. */
	ORCH_CHECK(atomic_load(&f.f_auth_failed) == 1);
}

/*
 * Each fault on a reconnection (the reader's buffer and receive timeout
 * were used by the connection before): the call fails at once, or at its
 * deadline for a server that says nothing, and the next call gets through.
 */
ORCH_TEST(handshake_faults_fail_the_call_and_the_next_gets_through)
{
	static const struct {
		enum fake_hs hs;
		int error;
	} cases[] = {
		{ FAKE_HS_REFUSE, -EIO },   { FAKE_HS_VERSION, -EIO }, { FAKE_HS_REQID, -EIO },
		{ FAKE_HS_HUGE, -EIO },     { FAKE_HS_PUSH, -EIO },    { FAKE_HS_CLOSE, -EIO },
		{ FAKE_HS_SILENT, -ETIMEDOUT }, { FAKE_HS_REJECT, -EACCES },
	};

	for (size_t i = 0; i < ORCH_ARRAY_SIZE(cases); i++) {
		struct orch_client *cl;
		struct orch_reply rep;
		struct fake f;
		uint64_t t0, el;

		fake_init(&f, 0x5a, true);
		ORCH_CHECK_OK(client_make(&f, 1, 3000, &cl));
		ORCH_CHECK_OK(getattr(cl, 0, 7, &rep));
		orch_reply_release(&rep);
		ORCH_CHECK_RC(getattr(cl, 0, 8 | FAKE_DROP, &rep), -EIO);

		atomic_store(&f.f_hs, cases[i].hs);
		/* Longer than a recv slice: a stale receive timeout would wait for ever. */
		if (cases[i].hs == FAKE_HS_SILENT)
			orch_client_set_timeout(cl, 1200);
		t0 = now_ms();
		ORCH_CHECK_RC(getattr(cl, 0, 7, &rep), cases[i].error);
		el = now_ms() - t0;
		ORCH_CHECK(cases[i].hs == FAKE_HS_SILENT ? el >= 1100 && el < 3000 : el < 2000);
		/* Only a server whose MAC failed holds another key. */
		ORCH_CHECK(orch_client_key_mismatch(cl) == -1);
		ORCH_CHECK(orch_client_conn_gen(cl, 0) == 0);

		atomic_store(&f.f_hs, FAKE_HS_OK);
		orch_client_set_timeout(cl, 3000);
		if (cases[i].hs == FAKE_HS_SILENT) {
			/* Silent for a deadline: sick, its calls fail at once until a probe. */
			t0 = now_ms();
			ORCH_CHECK_RC(getattr(cl, 0, 9, &rep), -ETIMEDOUT);
			ORCH_CHECK(now_ms() - t0 < 200);
			sleep_ms(300); /* RPC_PROBE_GAP_MS */
		}
		ORCH_CHECK_OK(getattr(cl, 0, 9, &rep));
		orch_reply_release(&rep);
		ORCH_CHECK(orch_client_conn_gen(cl, 0) == 2);
		orch_client_destroy(cl);
		ORCH_CHECK(fake_nconns(&f) == 3);
		fake_fini(&f);
		ORCH_CHECK(atomic_load(&f.f_auth_failed) == 0);
	}
}

/*
 * A WRITE to a replica group keeps a copy of its data to go again: the
 * caller's buffers are its own again once the send returns, and a member
 * that does not lead sends the call to the next member, which gets the
 * same bytes (three buffers of odd sizes, one of them empty, the copy
 * written straight into the frame).
 */
ORCH_TEST(a_write_to_a_group_goes_again_with_the_bytes_it_was_sent_with)
{
	static uint8_t a[5003], c[70001];
	uint8_t *want = malloc(sizeof(a) + sizeof(c));
	struct iovec iov[3] = {
		{ .iov_base = a, .iov_len = sizeof(a) },
		{ .iov_base = NULL, .iov_len = 0 },
		{ .iov_base = c, .iov_len = sizeof(c) },
	};
	struct orch_client *cl;
	struct orch_call *call;
	struct orch_reply rep;
	struct orch_msg req;
	struct fake f;

	ORCH_CHECK(want != NULL);
	for (size_t i = 0; i < sizeof(a); i++)
		a[i] = (uint8_t)(i * 7 + 1);
	for (size_t i = 0; i < sizeof(c); i++)
		c[i] = (uint8_t)(i * 13 + 5);
	memcpy(want, a, sizeof(a));
	memcpy(want + sizeof(a), c, sizeof(c));
	fake_init(&f, 0x5a, false);
	atomic_store(&f.f_notleader, 1);
	ORCH_CHECK_OK(client_make_groups(&f, 1, 3, 5000, &cl));
	orch_msg_init(&req, ORCH_CL2SV_WRITE);
	req.handle = 42;
	req.offset = 1u << 20;
	ORCH_CHECK_OK(orch_client_send_iov(cl, 0, &req, iov, 3, &call));
	/* The caller's buffers are free for other use now. */
	memset(a, 0xee, sizeof(a));
	memset(c, 0xee, sizeof(c));
	ORCH_CHECK_OK(orch_client_wait(cl, call, &rep));
	orch_reply_release(&rep);
	orch_client_destroy(cl);
	/* Refused by the first member, kept by the next, on a connection of its own. */
	ORCH_CHECK(atomic_load(&f.f_writes) == 2);
	ORCH_CHECK(fake_nconns(&f) == 2);
	pthread_mutex_lock(&f.f_lock);
	ORCH_CHECK(f.f_whandle == 42 && f.f_woff == 1u << 20);
	ORCH_CHECK(f.f_wlen == sizeof(a) + sizeof(c));
	ORCH_CHECK(f.f_wdata && memcmp(f.f_wdata, want, f.f_wlen) == 0);
	pthread_mutex_unlock(&f.f_lock);
	fake_fini(&f);
	free(want);
}

/*
 * A WRITERS reply is stamped (the mount may cache its attributes) only on
 * a connection whose server granted ORCH_FEAT_WRITERS_ATTR: one of an
 * earlier version leases nothing by it, while its GETATTR replies are.
 */
ORCH_TEST(a_writers_reply_is_stamped_only_where_the_server_leases_it)
{
	for (int granted = 0; granted < 2; granted++) {
		struct pushes p = { .p_lock = PTHREAD_MUTEX_INITIALIZER };
		struct orch_client *cl;
		struct orch_reply rep;
		struct orch_msg req;
		struct fake f;

		fake_init(&f, 0x5a, true);
		if (granted)
			f.f_features |= ORCH_FEAT_WRITERS_ATTR;
		ORCH_CHECK_OK(client_make(&f, 1, 5000, &cl));
		orch_client_set_push_handler(cl, push_record, &p, false);
		ORCH_CHECK_OK(getattr(cl, 0, 5, &rep));
		ORCH_CHECK(rep.stamp != 0);
		orch_reply_release(&rep);
		orch_msg_init(&req, ORCH_CL2SV_WRITERS);
		req.handle = 5;
		req.size = 4096;
		req.writers_flags = ORCH_WRITERS_RELEASE;
		ORCH_CHECK_OK(orch_client_call(cl, 0, &req, &rep));
		ORCH_CHECK(rep.m.attr.handle == 5 && rep.m.attr.size == 4096);
		ORCH_CHECK(granted ? rep.stamp != 0 : rep.stamp == 0);
		orch_reply_release(&rep);
		orch_client_destroy(cl);
		fake_fini(&f);
		pthread_mutex_destroy(&p.p_lock);
	}
}

ORCH_TEST_MAIN()
