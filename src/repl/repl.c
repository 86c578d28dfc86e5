/*
 * libraft and its uv backend, embedded in an orch_ev loop (repl.h).
 *
 * Embedding: a uv loop is an epoll set of its own; its fd is watched by
 * the orch_ev loop, and a timer fires at the uv loop's next timeout.
 * Either runs one non-blocking pass of the uv loop (uv_run NOWAIT) and
 * re-arms the timer.  A raft_* call that starts I/O kicks a pass at once
 * (a 0 ms timer), since what it queued may wait for no fd.
 *
 * Settings that are not libraft's defaults, and why (measured in a spike
 * on this kind of machine; docs/DESIGN.md, "Replication"):
 * - pre-vote on: without it each failover took two elections, since
 *   followers that heard the old leader lately refuse the first candidate;
 * - 1 MiB log segments instead of 8 MiB: a restart loads the open
 *   segments synchronously (150-390 ms at 8 MiB, 34-91 ms at 1 MiB), and
 *   the preallocated files are smaller;
 * - 100 ms between connection retries instead of 1 s: a restarted member
 *   is heard again sooner;
 * - TCP_NODELAY on the transport's connections (repl_tcp_*): libraft's TCP
 *   transport leaves Nagle on, so an append sent while the previous one was
 *   unacknowledged waited for the follower's delayed ACK, up to 40 ms: one
 *   unlink in five took 40 ms instead of 2.
 *
 * Entries: libraft 0.15 keeps entries 8-byte aligned in its messages and
 * segments, and a follower that receives several entries whose lengths
 * are not multiples of 8 sees them shifted (tests/unit/t_repl.c found it;
 * dqlite pads every entry).  So each entry is framed here: a header of
 * its length and its CRC32C, then the bytes, padded to 8.  The CRC also
 * catches an entry damaged on a member's disk or in memory: the state
 * machine never sees bytes that are not what the leader proposed.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>

#include <raft.h>
#include <raft/uv.h>
#include <uv.h>

#include "common/log.h"
#include "net/ev.h"
#include "repl/entry.h"
#include "repl/repl.h"

#define REPL_SEGMENT_SIZE (1u << 20)
#define REPL_CONNECT_RETRY_MS 100

struct orch_repl {
	struct orch_ev *r_ev;
	uv_loop_t r_loop;
	struct raft_uv_transport r_transport;
	/* libraft's TCP transport under repl_tcp_*: its own calls and callbacks. */
	int (*r_tcp_listen)(struct raft_uv_transport *t, raft_uv_accept_cb cb);
	int (*r_tcp_connect)(struct raft_uv_transport *t, struct raft_uv_connect *req,
			     raft_id id, const char *address, raft_uv_connect_cb cb);
	raft_uv_accept_cb r_accept_cb;
	bool r_listen_failed;         /* the transport's listen did (libraft says no more) */
	struct raft_io r_io;
	/* libraft's uv io close under repl_io_close, and raft's callback for it. */
	void (*r_uv_close)(struct raft_io *io, raft_io_close_cb cb);
	raft_io_close_cb r_io_close_cb;
	bool r_io_close_called;
	struct raft r_raft;
	struct raft_fsm r_rfsm;
	struct orch_repl_fsm r_fsm;
	struct orch_ev_timer r_timer;
	int r_uvfd;                   /* the uv loop's epoll fd, watched by r_ev */
	bool r_transport_up, r_io_up, r_raft_up;
	bool r_closing;               /* in orch_repl_close: no more passes, no proposals */
	bool r_closed;                /* raft_close called back */
	bool r_in_pass;               /* in uv_run: a kick need not arm the timer */
	uint64_t r_damaged;           /* entries that failed their check (fsm_apply) */
	struct raft_transfer r_transfer;
	bool r_transferring;          /* r_transfer is libraft's until its callback */
};

/* A proposal or a barrier waiting for its callback. */
struct repl_req {
	union {
		struct raft_apply apply;
		struct raft_barrier barrier;
	} q;
	orch_repl_done_fn q_done;
	void *q_arg;
};

static int repl_error(int rv)
{
	switch (rv) {
	case 0:
		return 0;
	case RAFT_NOTLEADER:
		return ORCH_REPL_ENOTLEADER;
	case RAFT_LEADERSHIPLOST:
		return ORCH_REPL_ELOST;
	case RAFT_SHUTDOWN:
		return -ESHUTDOWN;
	case RAFT_NOMEM:
		return -ENOMEM;
	case RAFT_TOOBIG:
		return -EFBIG;
	case RAFT_NOSPACE:
		return -ENOSPC;
	default:
		return rv < 0 ? rv : -EIO; /* the state machine's own -errno, or libraft's */
	}
}

/* --- libraft's TCP transport, with TCP_NODELAY ----------------------------------- */

static struct orch_repl *repl_of_transport(struct raft_uv_transport *t)
{
	return (struct orch_repl *)((char *)t - offsetof(struct orch_repl, r_transport));
}

static void repl_tcp_nodelay(struct uv_stream_s *stream)
{
	if (stream && stream->type == UV_TCP)
		uv_tcp_nodelay((uv_tcp_t *)stream, 1);
}

static void repl_tcp_accepted(struct raft_uv_transport *t, raft_id id, const char *address,
			      struct uv_stream_s *stream)
{
	repl_tcp_nodelay(stream);
	repl_of_transport(t)->r_accept_cb(t, id, address, stream);
}

static int repl_tcp_listen(struct raft_uv_transport *t, raft_uv_accept_cb cb)
{
	struct orch_repl *r = repl_of_transport(t);
	int rv;

	r->r_accept_cb = cb;
	rv = r->r_tcp_listen(t, repl_tcp_accepted);
	r->r_listen_failed = rv != 0;
	return rv;
}

/* A connect of libraft's, passed on under a request of our own. */
struct repl_connect {
	struct raft_uv_connect c_inner; /* the TCP transport's */
	struct raft_uv_connect *c_outer; /* libraft's */
	raft_uv_connect_cb c_cb;
};

static void repl_tcp_connected(struct raft_uv_connect *inner, struct uv_stream_s *stream,
			       int status)
{
	struct repl_connect *c = (struct repl_connect *)inner;
	struct raft_uv_connect *outer = c->c_outer;
	raft_uv_connect_cb cb = c->c_cb;

	free(c);
	if (status == 0)
		repl_tcp_nodelay(stream);
	cb(outer, stream, status);
}

static int repl_tcp_connect(struct raft_uv_transport *t, struct raft_uv_connect *req,
			    raft_id id, const char *address, raft_uv_connect_cb cb)
{
	struct repl_connect *c = calloc(1, sizeof(*c));
	int rv;

	if (!c)
		return RAFT_NOMEM;
	c->c_outer = req;
	c->c_cb = cb;
	rv = repl_of_transport(t)->r_tcp_connect(t, &c->c_inner, id, address,
						  repl_tcp_connected);
	if (rv)
		free(c);
	return rv;
}

/* --- libraft's uv io, its close callback called once ------------------------------ */

static struct orch_repl *repl_of_io(struct raft_io *io)
{
	return (struct orch_repl *)((char *)io - offsetof(struct orch_repl, r_io));
}

/*
 * raft's callback for the io's close frees the member's address.  ASan
 * saw that address freed twice, both times inside libraft, at a stop with
 * changes in flight (CI, once): libraft 0.15's uv io called its close
 * callback twice, as far as the stacks tell (not reproduced here).  It is
 * passed on once.
 */
static void repl_io_closed(struct raft_io *io)
{
	struct orch_repl *r = repl_of_io(io);

	if (r->r_io_close_called)
		return;
	r->r_io_close_called = true;
	r->r_io_close_cb(io);
}

static void repl_io_close(struct raft_io *io, raft_io_close_cb cb)
{
	struct orch_repl *r = repl_of_io(io);

	r->r_io_close_cb = cb;
	r->r_uv_close(io, repl_io_closed);
}

/* --- The uv loop inside the orch_ev loop --------------------------------------- */

static void repl_pass(void *arg);

static void repl_rearm(struct orch_repl *r)
{
	int t = uv_backend_timeout(&r->r_loop);

	if (r->r_closing)
		return;
	if (t < 0)
		orch_ev_timer_cancel(r->r_ev, &r->r_timer);
	else
		orch_ev_timer_arm(r->r_ev, &r->r_timer, (uint32_t)t, repl_pass, r);
}

static void repl_pass(void *arg)
{
	struct orch_repl *r = arg;

	r->r_in_pass = true;
	uv_run(&r->r_loop, UV_RUN_NOWAIT);
	r->r_in_pass = false;
	repl_rearm(r);
}

static void repl_readable(struct orch_ev *ev, int fd, uint32_t events, void *arg)
{
	(void)ev;
	(void)fd;
	(void)events;
	repl_pass(arg);
}

/* After a raft_* call: what it queued runs at the loop's next turn. */
static void repl_kick(struct orch_repl *r)
{
	if (!r->r_in_pass && !r->r_closing)
		orch_ev_timer_arm(r->r_ev, &r->r_timer, 0, repl_pass, r);
}

/* --- The state machine, as libraft calls it --------------------------------------- */

static int fsm_apply(struct raft_fsm *rfsm, const struct raft_buffer *buf, void **result)
{
	struct orch_repl *r = rfsm->data;
	/* libraft 0.15 passes no index: this entry is the one after the last applied. */
	uint64_t index = r->r_raft.last_applied + 1;
	const void *bytes;
	size_t len;

	*result = NULL;
	if (orch_repl_entry_decode(buf->base, buf->len, &bytes, &len)) {
		/*
		 * Every member holds what the leader proposed, so this one's
		 * copy was damaged: its state machine misses the entry, and
		 * must be rebuilt from a healthy member's snapshot.
		 */
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "replication: member %llu: log entry %llu fails its check "
				   "(%zu bytes): not applied; this member's state must be rebuilt",
				   (unsigned long long)r->r_raft.id, (unsigned long long)index,
				   buf->len);
		r->r_damaged++;
		return -EIO;
	}
	return r->r_fsm.apply(r->r_fsm.arg, index, bytes, len, result);
}

/* Snapshot buffers are libraft's to free (raft_free), so they come from raft_malloc. */
static int fsm_snapshot(struct raft_fsm *rfsm, struct raft_buffer *bufs[], unsigned *n)
{
	struct orch_repl *r = rfsm->data;
	struct raft_buffer *v;
	void *state = NULL;
	size_t len = 0;
	int error = r->r_fsm.snapshot(r->r_fsm.arg, &state, &len);

	if (error)
		return RAFT_IOERR;
	v = raft_malloc(sizeof(*v));
	if (!v) {
		free(state);
		return RAFT_NOMEM;
	}
	v->len = len;
	v->base = raft_malloc(len ? len : 1);
	if (!v->base) {
		raft_free(v);
		free(state);
		return RAFT_NOMEM;
	}
	memcpy(v->base, state, len);
	free(state);
	*bufs = v;
	*n = 1;
	return 0;
}

static int fsm_restore(struct raft_fsm *rfsm, struct raft_buffer *buf)
{
	struct orch_repl *r = rfsm->data;
	int error = r->r_fsm.restore(r->r_fsm.arg, buf->base, buf->len);

	if (error) {
		ORCH_LOG(ORCH_LOG_ERR, "replication: member %llu cannot install a snapshot: %s",
			 (unsigned long long)r->r_raft.id, strerror(-error));
		return RAFT_IOERR;
	}
	raft_free(buf->base); /* ours once restored */
	return 0;
}

/* --- Open and close ---------------------------------------------------------- */

static int repl_fail(struct orch_repl *r, const char *what, int rv)
{
	const char *why = r->r_raft_up ? raft_errmsg(&r->r_raft) : NULL;
	const char *io = "";

	/*
	 * raft_start passes the io's errors on without their message (libraft
	 * 0.15): what failed (a listen's "address already in use", a bad
	 * segment) is in the io's own, or the transport's.
	 */
	if (r->r_io_up && r->r_io.errmsg[0])
		io = r->r_io.errmsg;
	else if (r->r_transport_up && r->r_transport.errmsg[0])
		io = r->r_transport.errmsg;
	if (!why || !*why)
		why = raft_strerror(rv);
	if (*io && strcmp(io, why) != 0)
		ORCH_LOG(ORCH_LOG_ERR, "replication: member %llu: %s: %s (%s)",
			 (unsigned long long)r->r_raft.id, what, why, io);
	else
		ORCH_LOG(ORCH_LOG_ERR, "replication: member %llu: %s: %s",
			 (unsigned long long)r->r_raft.id, what, why);
	return repl_error(rv);
}

static int repl_configure(struct orch_repl *r, const struct orch_repl_cfg *cfg)
{
	struct raft_configuration conf;
	int rv;

	raft_configuration_init(&conf);
	for (unsigned int i = 0; i < cfg->nmembers; i++) {
		rv = raft_configuration_add(&conf, cfg->members[i].id, cfg->members[i].addr,
					    RAFT_VOTER);
		if (rv) {
			raft_configuration_close(&conf);
			return repl_fail(r, "bad member list", rv);
		}
	}
	rv = raft_bootstrap(&r->r_raft, &conf);
	raft_configuration_close(&conf);
	if (rv == RAFT_CANTBOOTSTRAP)
		return 0; /* the directory holds a log: bootstrapped before */
	return rv ? repl_fail(r, "cannot bootstrap the group", rv) : 0;
}

int orch_repl_open(struct orch_ev *ev, const struct orch_repl_cfg *cfg,
		   const struct orch_repl_fsm *fsm, struct orch_repl **out)
{
	const char *addr = NULL;
	struct orch_repl *r;
	int rv, error;

	*out = NULL;
	for (unsigned int i = 0; i < cfg->nmembers; i++)
		if (cfg->members[i].id == cfg->id)
			addr = cfg->members[i].addr;
	if (!cfg->id || !addr || cfg->nmembers > ORCH_REPL_MEMBERS_MAX)
		return -EINVAL;
	if (mkdir(cfg->dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->r_ev = ev;
	r->r_fsm = *fsm;
	r->r_uvfd = -1;
	r->r_raft.id = cfg->id; /* for repl_fail's messages before raft_init */
	r->r_rfsm = (struct raft_fsm){ .version = 1, .data = r, .apply = fsm_apply,
				       .snapshot = fsm_snapshot, .restore = fsm_restore };
	if (uv_loop_init(&r->r_loop) != 0) {
		free(r);
		return -ENOMEM;
	}
	rv = raft_uv_tcp_init(&r->r_transport, &r->r_loop);
	if (rv) {
		error = repl_fail(r, "cannot set up its transport", rv);
		goto fail;
	}
	r->r_transport_up = true;
	r->r_tcp_listen = r->r_transport.listen;
	r->r_tcp_connect = r->r_transport.connect;
	r->r_transport.listen = repl_tcp_listen;
	r->r_transport.connect = repl_tcp_connect;
	rv = raft_uv_init(&r->r_io, &r->r_loop, cfg->dir, &r->r_transport);
	if (rv) {
		error = repl_fail(r, "cannot open its log directory", rv);
		goto fail;
	}
	r->r_io_up = true;
	r->r_uv_close = r->r_io.close;
	r->r_io.close = repl_io_close;
	raft_uv_set_segment_size(&r->r_io, REPL_SEGMENT_SIZE);
	raft_uv_set_connect_retry_delay(&r->r_io, REPL_CONNECT_RETRY_MS);
	rv = raft_init(&r->r_raft, &r->r_io, &r->r_rfsm, cfg->id, addr);
	if (rv) {
		error = repl_fail(r, "cannot start", rv);
		goto fail;
	}
	r->r_raft_up = true;
	r->r_raft.data = r;
	{
		unsigned int election = cfg->election_ms ? cfg->election_ms : 1000;
		unsigned int heartbeat = cfg->heartbeat_ms ? cfg->heartbeat_ms : election / 10;

		raft_set_election_timeout(&r->r_raft, election);
		raft_set_heartbeat_timeout(&r->r_raft, heartbeat ? heartbeat : 1);
	}
	raft_set_pre_vote(&r->r_raft, true);
	raft_set_snapshot_threshold(&r->r_raft, cfg->snapshot_every ? cfg->snapshot_every : 1024);
	raft_set_snapshot_trailing(&r->r_raft, cfg->snapshot_keep ? cfg->snapshot_keep : 128);
	if (cfg->snapshot_timeout_ms)
		raft_set_install_snapshot_timeout(&r->r_raft, cfg->snapshot_timeout_ms);
	if (cfg->bootstrap) {
		error = repl_configure(r, cfg);
		if (error)
			goto fail;
	}
	rv = raft_start(&r->r_raft);
	if (rv) {
		if (r->r_listen_failed) {
			/* the error libraft gives is RAFT_IOERR, without a word */
			ORCH_LOG(ORCH_LOG_ERR, "replication: member %llu: cannot listen at %s: "
				 "in use, or not an address of this host",
				 (unsigned long long)cfg->id, addr);
			error = -EADDRINUSE;
		} else {
			error = repl_fail(r, "cannot load its log", rv);
		}
		goto fail;
	}
	r->r_uvfd = uv_backend_fd(&r->r_loop);
	error = orch_ev_add(ev, r->r_uvfd, EPOLLIN, repl_readable, r);
	if (error) {
		r->r_uvfd = -1;
		goto fail;
	}
	repl_kick(r);
	*out = r;
	return 0;
fail:
	orch_repl_close(r);
	return error;
}

static void repl_closed(struct raft *raft)
{
	struct orch_repl *r = raft->data;

	r->r_closed = true;
}

void orch_repl_close(struct orch_repl *r)
{
	if (!r)
		return;
	r->r_closing = true;
	orch_ev_timer_cancel(r->r_ev, &r->r_timer);
	if (r->r_uvfd >= 0)
		orch_ev_del(r->r_ev, r->r_uvfd);
	if (r->r_raft_up) {
		raft_close(&r->r_raft, repl_closed);
		while (!r->r_closed)
			uv_run(&r->r_loop, UV_RUN_ONCE);
	}
	r->r_closed = true;
	/*
	 * Whatever libuv still runs (closing handles, pool work) finishes
	 * before raft_uv_close frees libraft's io: its close callback does
	 * not wait for an open segment being created in the thread pool,
	 * whose work reads the io's directory (a server stopped just after it
	 * started: a use after free under ASan, in CI).
	 */
	while (uv_run(&r->r_loop, UV_RUN_DEFAULT))
		;
	if (r->r_io_up)
		raft_uv_close(&r->r_io);
	if (r->r_transport_up)
		raft_uv_tcp_close(&r->r_transport);
	while (uv_run(&r->r_loop, UV_RUN_DEFAULT))
		;
	if (uv_loop_close(&r->r_loop) != 0)
		ORCH_LOG(ORCH_LOG_WARN, "replication: member %llu: its uv loop did not close",
			 (unsigned long long)r->r_raft.id);
	free(r);
}

/* --- Proposals --------------------------------------------------------------- */

static void repl_applied(struct raft_apply *req, int status, void *result)
{
	struct repl_req *q = req->data;

	q->q_done(q->q_arg, repl_error(status), result);
	free(q);
}

static void repl_barrier_done(struct raft_barrier *req, int status)
{
	struct repl_req *q = req->data;

	q->q_done(q->q_arg, repl_error(status), NULL);
	free(q);
}

/* A request for @done(@arg), if this member may make one; else NULL and *@error. */
static struct repl_req *repl_req_new(struct orch_repl *r, orch_repl_done_fn done, void *arg,
				     int *error)
{
	struct repl_req *q;

	*error = r->r_closing ? -ESHUTDOWN
		 : raft_state(&r->r_raft) != RAFT_LEADER ? ORCH_REPL_ENOTLEADER : 0;
	if (*error)
		return NULL;
	q = malloc(sizeof(*q));
	if (!q) {
		*error = -ENOMEM;
		return NULL;
	}
	q->q_done = done;
	q->q_arg = arg;
	return q;
}

int orch_repl_proposev(struct orch_repl *r, const struct iovec *iov, unsigned int n,
		       orch_repl_done_fn done, void *arg)
{
	struct raft_buffer b;
	struct repl_req *q;
	size_t len = 0;
	int rv, error;

	for (unsigned int i = 0; i < n; i++) {
		if (iov[i].iov_len > ORCH_REPL_ENTRY_MAX)
			return -EFBIG;
		len += iov[i].iov_len;
	}
	b.len = orch_repl_entry_size(len);
	if (!b.len)
		return -EFBIG;
	q = repl_req_new(r, done, arg, &error);
	if (!q)
		return error;
	b.base = raft_malloc(b.len);
	if (!b.base) {
		free(q);
		return -ENOMEM;
	}
	orch_repl_entry_encodev(b.base, iov, n, len);
	q->q.apply.data = q;
	/* The buffer is libraft's once this returns 0, ours to free otherwise. */
	rv = raft_apply(&r->r_raft, &q->q.apply, &b, 1, repl_applied);
	if (rv) {
		raft_free(b.base);
		free(q);
		return repl_error(rv);
	}
	repl_kick(r);
	return 0;
}

int orch_repl_propose(struct orch_repl *r, const void *buf, size_t len, orch_repl_done_fn done,
		      void *arg)
{
	struct iovec one = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };

	return orch_repl_proposev(r, &one, 1, done, arg);
}

int orch_repl_barrier(struct orch_repl *r, orch_repl_done_fn done, void *arg)
{
	int rv;
	struct repl_req *q = repl_req_new(r, done, arg, &rv);

	if (!q)
		return rv;
	q->q.barrier.data = q;
	rv = raft_barrier(&r->r_raft, &q->q.barrier, repl_barrier_done);
	if (rv) {
		free(q);
		return repl_error(rv);
	}
	repl_kick(r);
	return 0;
}

static void repl_transfer_done(struct raft_transfer *req)
{
	struct orch_repl *r = req->data;

	r->r_transferring = false;
}

int orch_repl_transfer(struct orch_repl *r, uint64_t id)
{
	int rv;

	if (r->r_closing)
		return -ESHUTDOWN;
	if (r->r_transferring)
		return -EBUSY;
	r->r_transfer.data = r;
	rv = raft_transfer(&r->r_raft, &r->r_transfer, id, repl_transfer_done);
	if (rv)
		return repl_error(rv);
	r->r_transferring = true;
	repl_kick(r);
	return 0;
}

/* --- Status ------------------------------------------------------------------ */

const char *orch_repl_role_name(enum orch_repl_role role)
{
	switch (role) {
	case ORCH_REPL_FOLLOWER:
		return "follower";
	case ORCH_REPL_CANDIDATE:
		return "candidate";
	case ORCH_REPL_LEADER:
		return "leader";
	default:
		return "unavailable";
	}
}

void orch_repl_status(struct orch_repl *r, struct orch_repl_status *st)
{
	const char *addr = NULL;
	raft_id leader = 0;

	memset(st, 0, sizeof(*st));
	switch (raft_state(&r->r_raft)) {
	case RAFT_FOLLOWER:
		st->role = ORCH_REPL_FOLLOWER;
		break;
	case RAFT_CANDIDATE:
		st->role = ORCH_REPL_CANDIDATE;
		break;
	case RAFT_LEADER:
		st->role = ORCH_REPL_LEADER;
		break;
	default:
		st->role = ORCH_REPL_UNAVAILABLE;
	}
	st->term = r->r_raft.current_term;
	raft_leader(&r->r_raft, &leader, &addr);
	st->leader_id = leader;
	if (addr)
		snprintf(st->leader_addr, sizeof(st->leader_addr), "%s", addr);
	st->last_index = raft_last_index(&r->r_raft);
	st->commit_index = r->r_raft.commit_index;
	st->applied_index = raft_last_applied(&r->r_raft);
	st->damaged = r->r_damaged;
}
