/*
 * Shared helpers of the server's unit tests (t_lease.c, t_intent.c): a
 * struct sv_server on a namespace in a temporary directory, with a real
 * event loop, and client connections over socketpairs whose far end the
 * test reads frame by frame.  Everything is static inline: each test binary
 * is one .c file.
 *
 *   ORCH_TEST_KEEP=1    the temporary directory is left behind
 */
#ifndef ORCH_TESTS_UNIT_SV_FX_H
#define ORCH_TESTS_UNIT_SV_FX_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "net/conn.h"
#include "net/ev.h"
#include "proto/msg.h"
#include "server/sv.h"
#include "server/sv_ack.h"
#include "server/sv_conns.h"
#include "server/sv_lease.h"

#define FX_CLIENTS_MAX 8
#define FX_FRAMES_MAX 64

static const struct orch_cred FX_ROOT = { .uid = 0, .gid = 0 };
static const uint8_t FX_KEY[ORCH_KEY_LEN] = { 1 };

/* A client connection as the server sees it (c), and the client's end (fd). */
struct fx_client {
	struct orch_conn *c;
	int fd;
};

/* What a client read: one frame, decoded. */
struct fx_frame {
	uint16_t type;
	uint8_t flags;
	uint64_t reqid;
	int status;
	uint64_t handle;
	uint64_t parent;
	char name[ORCH_NAME_MAX + 1];
};

struct sv_fx {
	struct sv_server sv;
	char dir[64];
	struct fx_client cl[FX_CLIENTS_MAX];
	int ncl;
};

/* What main.c does when a client connection closes, as far as these floors go. */
static inline void fx_client_closed(struct orch_conn *c, int reason)
{
	struct sv_server *sv = c->c_arg;

	(void)reason;
	sv_lease_conn_closed(sv, c);
	sv_ack_conn_closed(sv, c);
	sv_conns_remove(sv, c);
}

static inline void fx_client_frame(struct orch_conn *c, const struct orch_frame_hdr *h,
				   const uint8_t *payload)
{
	(void)c, (void)h, (void)payload; /* the tests send the server nothing */
}

static const struct orch_conn_ops fx_client_ops = {
	.on_frame = fx_client_frame,
	.on_close = fx_client_closed,
};

static inline int fx_rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

/*
 * Server @index of @nservers, with a fresh namespace (root directory on
 * server 0) and an event loop; lease_ms as given.  -errno on failure.
 */
static inline int fx_setup(struct sv_fx *fx, unsigned int index, unsigned int nservers,
			   uint32_t lease_ms)
{
	struct orch_meta_ident id = { .server_index = index, .nservers = nservers,
				      .strip_size = 65536 };
	char err[256];
	int error;

	memset(fx, 0, sizeof(*fx));
	snprintf(id.cluster_id, sizeof(id.cluster_id), "test-cluster");
	snprintf(fx->dir, sizeof(fx->dir), "/tmp/t_server.XXXXXX");
	if (!mkdtemp(fx->dir)) {
		fx->dir[0] = 0;
		return -errno;
	}
	fx->sv.s_index = index;
	fx->sv.s_me = &fx->sv.s_cfg.members[index];
	fx->sv.s_cfg.replicas = 1;
	fx->sv.s_cfg.nmembers = nservers;
	fx->sv.s_listen_fd = -1;
	fx->sv.s_cfg.nservers = nservers;
	fx->sv.s_cfg.strip_size = 65536;
	fx->sv.s_cfg.op_timeout_ms = 10000;
	fx->sv.s_cfg.commit_interval_ms = 100;
	fx->sv.s_cfg.lease_ms = lease_ms;
	error = orch_meta_mkfs(fx->dir, &id);
	if (!error)
		error = orch_meta_open(fx->dir, &id, &fx->sv.s_meta, err, sizeof(err));
	if (error) {
		fprintf(stderr, "namespace in '%s': %s\n", fx->dir, err);
		return error;
	}
	return orch_ev_create(&fx->sv.s_ev);
}

/* Closes and reopens the namespace, as a restart would.  0 or -errno. */
static inline int fx_reopen_meta(struct sv_fx *fx)
{
	struct orch_meta_ident id = *orch_meta_ident(fx->sv.s_meta);
	char err[256];

	orch_meta_close(fx->sv.s_meta);
	fx->sv.s_meta = NULL;
	return orch_meta_open(fx->dir, &id, &fx->sv.s_meta, err, sizeof(err));
}

/* Closes the clients' connections; the rest is the test's to undo first. */
static inline void fx_teardown(struct sv_fx *fx)
{
	const char *keep = getenv("ORCH_TEST_KEEP");

	for (int i = 0; i < fx->ncl; i++) {
		if (fx->cl[i].c) {
			orch_conn_close(fx->cl[i].c, 0);
			orch_conn_put(fx->cl[i].c);
		}
		close(fx->cl[i].fd);
	}
	fx->ncl = 0;
	/* Pushes queued on the lease table's connections hold references: let them go. */
	sv_lease_flush(&fx->sv, NULL);
	sv_conns_fini(&fx->sv);
	if (fx->sv.s_ev)
		orch_ev_destroy(fx->sv.s_ev);
	orch_meta_close(fx->sv.s_meta);
	if (fx->dir[0] && !(keep && *keep == '1'))
		nftw(fx->dir, fx_rm_one, 8, FTW_DEPTH | FTW_PHYS);
	memset(fx, 0, sizeof(*fx));
}

/*
 * A client connection, registered as main.c registers accepted ones, that
 * asked for leases (@leases) or not.  NULL on failure.  The fixture keeps a
 * reference, so the connection can still be inspected once closed.
 */
static inline struct fx_client *fx_client(struct sv_fx *fx, bool leases)
{
	struct fx_client *cl;
	int fds[2];

	if (fx->ncl == FX_CLIENTS_MAX ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) < 0)
		return NULL;
	cl = &fx->cl[fx->ncl];
	if (sv_conns_reserve(&fx->sv) ||
	    orch_conn_accept(fx->sv.s_ev, fds[0], FX_KEY, &fx_client_ops, &fx->sv, &cl->c)) {
		close(fds[1]);
		return NULL;
	}
	orch_conn_get(cl->c);
	sv_conns_add(&fx->sv, cl->c);
	cl->c->c_features = leases ? ORCH_FEAT_LEASES : 0;
	cl->fd = fds[1];
	fcntl(cl->fd, F_SETFL, O_NONBLOCK);
	fx->ncl++;
	return cl;
}

/*
 * Reads what has reached @cl so far, decoded, into @out (at most @max
 * frames); returns how many.  -1 if a frame does not decode.
 */
static inline int fx_read(struct fx_client *cl, struct fx_frame *out, int max)
{
	static uint8_t buf[1 << 16];
	size_t len = 0, off = 0;
	ssize_t n;
	int nf = 0;

	while (len < sizeof(buf) && (n = recv(cl->fd, buf + len, sizeof(buf) - len, 0)) > 0)
		len += (size_t)n;
	while (len - off >= ORCH_FRAME_HDR && nf < max) {
		struct orch_frame_hdr h;
		struct orch_msg m;

		orch_frame_hdr_decode(buf + off, &h);
		if (len - off < ORCH_FRAME_HDR + h.length)
			break;
		if (orch_msg_decode(&h, buf + off + ORCH_FRAME_HDR, &m))
			return -1;
		out[nf] = (struct fx_frame){ .type = m.type, .flags = m.flags, .reqid = m.reqid,
					     .status = m.status, .handle = m.handle,
					     .parent = m.parent };
		if (m.name.len && m.name.len <= ORCH_NAME_MAX)
			memcpy(out[nf].name, m.name.s, m.name.len);
		orch_msg_fini(&m);
		nf++;
		off += ORCH_FRAME_HDR + h.length;
	}
	return nf;
}

/* Frames of @type in @f[0..@n) (and, if @h is not 0, about handle or parent @h). */
static inline int fx_count(const struct fx_frame *f, int n, uint16_t type, uint64_t h)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		k += f[i].type == type && (!h || f[i].handle == h || f[i].parent == h);
	return k;
}

static inline void fx_stop_loop(void *arg)
{
	orch_ev_stop(arg);
}

/* Runs the server's loop for @ms: its timers fire meanwhile. */
static inline void fx_run_loop(struct sv_fx *fx, uint32_t ms)
{
	struct orch_ev_timer t = { 0 };

	orch_ev_timer_arm(fx->sv.s_ev, &t, ms, fx_stop_loop, fx->sv.s_ev);
	orch_ev_run(fx->sv.s_ev);
	orch_ev_reset_stop(fx->sv.s_ev);
}

/* Creates regular file @name in the root; its handle, 0 on failure (printed). */
static inline uint64_t fx_mkfile(struct sv_fx *fx, const char *name)
{
	struct orch_layout layout = { .strip_size = 65536, .stripe_count = 1,
				      .first_server = (uint16_t)fx->sv.s_index };
	struct orch_attr a;
	bool existed;
	int error = orch_meta_create(fx->sv.s_meta, &FX_ROOT, 1, name, strlen(name),
				     S_IFREG | 0644, 0, NULL, &layout, true, &a, &existed);

	if (error) {
		fprintf(stderr, "create '%s': %s\n", name, strerror(-error));
		return 0;
	}
	return a.handle;
}

#endif
