/*
 * orchardd: one Orchard server.  Loads the config, opens this server's
 * namespace and store, listens, and runs the event loop until SIGTERM or
 * SIGINT, then closes everything cleanly (a clean stop leaves all data
 * durable).
 */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pcut.h"
#include "common/sdnotify.h"
#include "common/time.h"
#include "common/util.h"
#include "server/flush.h"
#include "server/intent.h"
#include "server/sv.h"
#include "server/sv_admin.h"
#include "server/sv_conns.h"
#include "server/sv_dispatch.h"
#include "server/sv_ack.h"
#include "server/sv_lease.h"
#include "server/sv_metrics.h"
#include "server/sv_peer.h"
#include "server/sv_stats.h"
#include "server/sv_work.h"
#include "server/sv_write.h"
#include "server/sv_gate.h"
#include "server/sv_mirror.h"
#include "server/sv_ns.h"
#include "server/sv_opens.h"
#include "server/sv_writers.h"


static void usage(FILE *f)
{
	fprintf(f, "usage: orchardd [-c CONF] -n NAME [--log FILE] [--log-level LEVEL]\n"
		   "Serves server NAME of the cluster described by CONF.\n"
		   "  -c, --config CONF     cluster config file (default: $ORCHARD_CONF,\n"
		   "                        else " ORCH_CFG_DEFAULT_PATH ")\n"
		   "  -n, --name NAME       which [server NAME] this is\n"
		   "  --log FILE            append log lines to FILE instead of stderr\n"
		   "  --log-level LEVEL     err, warn, notice (default), info, debug\n");
}

/*
 * A failed accept(2) that would fail again at once (no descriptor left,
 * no memory) stops accepting for a while, from 50 ms doubling to 1 s while
 * it lasts; the connections wait in the listen queue.  Retrying at once
 * would spin: the listening socket stays readable.
 */
#define SV_ACCEPT_PAUSE_MIN_MS 50u
#define SV_ACCEPT_PAUSE_MAX_MS 1000u
/* Descriptors a server needs besides its connections (databases, peers, metrics). */
#define SV_FDS_BESIDES_CONNS 256u

static void sv_accept_resume(struct sv_server *sv)
{
	if (!sv->s_accept_paused)
		return;
	sv->s_accept_paused = false;
	orch_ev_timer_cancel(sv->s_ev, &sv->s_accept_timer);
	/* Level-triggered: connections that waited are reported at once. */
	orch_ev_mod(sv->s_ev, sv->s_listen_fd, EPOLLIN);
}

static void sv_accept_resume_timer(void *arg)
{
	sv_accept_resume(arg);
}

static void sv_accept_pause(struct sv_server *sv, int error)
{
	uint32_t ms = sv->s_accept_pause_ms ? sv->s_accept_pause_ms * 2 : SV_ACCEPT_PAUSE_MIN_MS;

	sv->s_accept_pause_ms = ORCH_MIN(ms, SV_ACCEPT_PAUSE_MAX_MS);
	sv->s_accept_paused = true;
	sv->s_accept_pauses++;
	orch_ev_mod(sv->s_ev, sv->s_listen_fd, 0);
	orch_ev_timer_arm(sv->s_ev, &sv->s_accept_timer, sv->s_accept_pause_ms,
			  sv_accept_resume_timer, sv);
	ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot accept, pausing for %u ms: %s: connections=%zu",
			   sv->s_accept_pause_ms, strerror(error), sv->s_conns.cs_n);
}

static void client_on_close(struct orch_conn *c, int reason)
{
	struct sv_server *sv = c->c_arg;

	(void)reason;
	sv->s_bytes_in += c->c_bytes_in;
	sv->s_bytes_out += c->c_bytes_out;
	sv_lease_conn_closed(sv, c);
	sv_ack_conn_closed(sv, c);
	sv_writers_conn_closed(sv, c);
	sv_opens_conn_closed(sv, c);
	sv_conns_remove(sv, c);
	/* Its descriptor is free: a connection waiting for one may have it. */
	sv_accept_resume(sv);
}

static void on_accept(struct orch_ev *ev, int fd, uint32_t events, void *arg)
{
	struct sv_server *sv = arg;

	(void)events;
	for (;;) {
		struct orch_conn *c;
		int cfd = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (cfd < 0) {
			/* Gone before we took it, or a signal: take the next. */
			if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				sv_accept_pause(sv, errno);
			return;
		}
		sv->s_accept_pause_ms = 0;
		if (sv_conns_full(sv)) {
			char peer[64];

			orch_conn_peer_name(cfd, peer, sizeof(peer));
			close(cfd);
			sv_conns_refused(sv);
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
					   "too many connections, closing: peer=%s max_connections=%u",
					   peer, sv->s_cfg.max_connections);
			continue;
		}
		if (sv_conns_reserve(sv)) {
			close(cfd);
			continue;
		}
		if (orch_conn_accept(ev, cfd, sv->s_cfg.key, &sv->s_client_ops, sv, &c))
			continue;
		sv_conns_add(sv, c);
		sv->s_accepted++;
	}
}

static void on_signal(struct orch_ev *ev, int fd, uint32_t events, void *arg)
{
	struct signalfd_siginfo si;

	(void)events;
	(void)arg;
	if (read(fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGUSR2)
			orch_pcut_cut(); /* crash tests only: see common/pcut.h */
		ORCH_NOTICE("stopping: signal=%u", si.ssi_signo);
		orch_ev_stop(ev);
	}
}

/*
 * Raises the soft limit on descriptors towards max_connections and what
 * the server needs besides, as far as the hard limit allows, and says so
 * if that is not enough: connections past it wait for a free descriptor.
 */
static void sv_raise_nofile(const struct sv_server *sv)
{
	rlim_t need = (rlim_t)sv->s_cfg.max_connections + SV_FDS_BESIDES_CONNS;
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
		return;
	if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > rl.rlim_cur) {
		struct rlimit want = rl;

		want.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > need ? need : rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &want) == 0)
			rl = want;
	}
	if (rl.rlim_cur < need)
		ORCH_NOTICE("file limit below max_connections: nofile=%llu max_connections=%u; "
			    "connections past the limit wait for a free descriptor",
			    (unsigned long long)rl.rlim_cur, sv->s_cfg.max_connections);
}

static int sv_listen(const struct orch_server_cfg *scfg, int *out)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE };
	struct addrinfo *ai;
	char port[8];
	int fd, one = 1, error;

	snprintf(port, sizeof(port), "%u", scfg->port);
	if (getaddrinfo(scfg->host, port, &hints, &ai) != 0)
		return -EADDRNOTAVAIL;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		error = -errno;
		goto out_free;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 512) < 0) {
		error = -errno;
		close(fd);
		goto out_free;
	}
	*out = fd;
	error = 0;
out_free:
	freeaddrinfo(ai);
	return error;
}

/*
 * This member came to lead its replica group with every change applied
 * (sv_ns.c): what a server does at start once its namespace is current.
 * The tables made at start served nothing meanwhile; the writers' hold
 * and the orphans are taken again from now and from the namespace.
 */
static void sv_lead(struct sv_server *sv)
{
	sv_writers_fini(sv);
	sv_opens_fini(sv);
	if (sv_writers_init(sv) || sv_opens_init(sv)) {
		ORCH_ERR("cannot set up the writers or open files tables: stopping");
		sv->s_failed = true;
		orch_ev_stop(sv->s_ev);
		return;
	}
	/* The data stream first: the intents' store operations must go into it. */
	sv_mirror_lead(sv);
	sv_intent_replay_all(sv);
}

/*
 * Starts this program again, as it was started: a member that stopped
 * leading comes back as a follower with nothing of its term (every
 * descriptor is close-on-exec), under the same process id.  Only returns
 * if exec fails.
 */
static void sv_restart(char **argv)
{
	/* The signal mask stays: a SIGTERM meanwhile waits for the new loop. */
	ORCH_NOTICE("starting again");
	execv("/proc/self/exe", argv);
	ORCH_ERR("cannot start again: %s", strerror(errno));
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "name", required_argument, NULL, 'n' },
		{ "log", required_argument, NULL, 'L' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *conf = NULL, *name = NULL, *logfile = NULL;
	struct sv_server sv = { .s_listen_fd = -1, .s_leader = ORCH_NO_LEADER };
	struct orch_meta_ident ident = { 0 };
	char err[512], ident_str[96];
	sigset_t mask;
	int opt, idx, sigfd = -1, error, status = 1;

	while ((opt = getopt_long(argc, argv, "c:n:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'c': conf = optarg; break;
		case 'n': name = optarg; break;
		case 'L': logfile = optarg; break;
		case 'l':
			if (orch_log_level_parse(optarg, &orch_log_level)) {
				fprintf(stderr, "orchardd: bad log level '%s'\n", optarg);
				return 2;
			}
			break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	conf = orch_cfg_path(conf);
	if (!conf || !name || optind != argc) {
		usage(stderr);
		return 2;
	}
	if (logfile && (error = orch_log_open_file(logfile))) {
		fprintf(stderr, "orchardd: cannot open log '%s': %s\n", logfile, strerror(-error));
		return 1;
	}
	snprintf(ident_str, sizeof(ident_str), "orchardd %s", name);
	orch_log_set_ident(ident_str);
	orch_pcut_init();
	if (orch_cfg_load(conf, &sv.s_cfg, err, sizeof(err)) ||
	    orch_cfg_load_key(&sv.s_cfg, err, sizeof(err))) {
		ORCH_ERR("cannot load config: %s", err);
		return 1;
	}
	idx = orch_cfg_member_index(&sv.s_cfg, name);
	if (idx < 0) {
		ORCH_ERR("no server '%s' in '%s'", name, conf);
		return 1;
	}
	sv.s_me = &sv.s_cfg.members[idx];
	sv.s_index = (unsigned int)idx / sv.s_cfg.replicas;
	sv.s_member = (unsigned int)idx % sv.s_cfg.replicas;
	sv_raise_nofile(&sv);
	/*
	 * Before any thread starts (the store's writer starts in
	 * orch_store_open): threads inherit the mask, and the signals must
	 * reach the loop's signalfd, not kill a thread that does not expect them.
	 */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	if (orch_pcut_enabled())
		sigaddset(&mask, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &mask, NULL);
	sv.s_started_ms = orch_time_now_ms();
	sv.s_started_real_ms = orch_time_real_ns() / 1000000;
	snprintf(ident.cluster_id, sizeof(ident.cluster_id), "%s", sv.s_cfg.cluster_id);
	ident.server_index = sv.s_index;
	ident.nservers = sv.s_cfg.nservers;
	ident.strip_size = sv.s_cfg.strip_size;
	/* Before any data is opened: a metrics address we cannot have stops us. */
	if (sv_metrics_create(&sv))
		return 1;
	error = orch_meta_open(sv.s_me->data_dir, &ident, &sv.s_meta, err, sizeof(err));
	if (error) {
		ORCH_ERR("cannot open namespace: %s", err);
		sv_metrics_stop(&sv);
		return 1;
	}
	error = orch_store_open(sv.s_me->data_dir, &sv.s_store);
	if (error) {
		ORCH_ERR("cannot open store in '%s': %s", sv.s_me->data_dir,
			 strerror(-error));
		goto out_meta;
	}
	_Static_assert(ORCH_CFG_RESERVE_AUTO == ORCH_STORE_RESERVE_AUTO, "reserve: auto");
	orch_store_set_reserve(sv.s_store, sv.s_cfg.store_reserve);
	sv_writes_init(&sv);
	sv_gate_init(&sv);
	error = orch_ev_create(&sv.s_ev);
	if (error)
		goto out_writes;
	error = sv_flusher_start(&sv);
	if (error)
		goto out_ev;
	error = sv_listen(sv.s_me, &sv.s_listen_fd);
	if (error) {
		ORCH_ERR("cannot listen on %s:%u: %s", sv.s_me->host,
			 sv.s_me->port, strerror(-error));
		goto out_flusher;
	}
	sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sigfd < 0 || orch_ev_add(sv.s_ev, sigfd, EPOLLIN, on_signal, NULL) ||
	    sv_peers_init(&sv, sv_dispatch_frame)) {
		ORCH_ERR("cannot set up event loop");
		goto out_listen;
	}
	if (sv_lease_init(&sv) || sv_ack_init(&sv)) {
		ORCH_ERR("cannot set up the lease table");
		goto out_listen;
	}
	/*
	 * The namespace's log, if any, before anything that reads or changes
	 * the namespace (the writers, intents and orphans below): it replays
	 * what the database lacks, and this member leads before it serves.
	 * After the lease table: the group takes the namespace's change hook.
	 */
	error = sv_ns_init(&sv, sv_lead, err, sizeof(err));
	if (error) {
		ORCH_ERR("%s", err);
		goto out_listen;
	}
	if (sv_mirror_init(&sv)) {
		ORCH_ERR("cannot set up the data stream");
		goto out_listen;
	}
	if (sv_writers_init(&sv)) {
		ORCH_ERR("cannot set up the writers table");
		goto out_listen;
	}
	if (sv_intent_init(&sv)) {
		ORCH_ERR("cannot set up the intents");
		goto out_listen;
	}
	if (sv_opens_init(&sv)) {
		ORCH_ERR("cannot set up the open files table");
		goto out_listen;
	}
	if (orch_ev_add(sv.s_ev, sv.s_listen_fd, EPOLLIN, on_accept, &sv)) {
		ORCH_ERR("cannot set up event loop");
		goto out_listen;
	}
	/*
	 * Leases, and acknowledged pushes, are granted to clients that ask,
	 * unless lease_ms is 0; checksums to a group's leader that asks, on its
	 * data stream (sv_mirror.c).
	 */
	sv.s_client_ops = (struct orch_conn_ops){
		.on_frame = sv_dispatch_frame,
		.on_close = client_on_close,
		.features = ORCH_FEAT_MIRROR_SUMS |
			    (sv.s_cfg.lease_ms ? ORCH_FEAT_LEASES | ORCH_FEAT_ACKS |
			     ORCH_FEAT_WRITERS_ATTR | (uint64_t)sv.s_cfg.lease_ms << 32 : 0),
	};
	if (sv_metrics_start(&sv))
		goto out_listen;
	if (sv_admin_start(&sv))
		ORCH_WARN("cannot start the admin thread: scrub and bad-block reports are off");
	if (sv_work_start(&sv))
		ORCH_WARN("cannot start the data worker: dedupes and copies run on the loop");
	ORCH_NOTICE("serving: server=%s index=%u address=%s:%u data_dir=%s", name, sv.s_index,
		    sv.s_me->host, sv.s_me->port,
		    sv.s_me->data_dir);
	orch_sdnotify_send("READY=1\nSTATUS=serving"); /* Type=notify units */
	/* A member of a larger group does this when it comes to lead (sv_lead). */
	if (sv_ns_serving(&sv))
		sv_intent_replay_all(&sv);
	sv_stats_start(&sv);
	error = orch_ev_run(sv.s_ev);
	status = error || sv.s_failed ? 1 : 0;
	/* First: its pages read the loop's state, which goes away below. */
	sv_metrics_stop(&sv);
	/* Writes still in the store's queue finish, and are answered if we can. */
	sv_writes_wait(&sv);
	sv_work_stop(&sv);
	/* What waits for the followers is answered NOTLEADER, and so is all that follows. */
	sv_mirror_fini(&sv);
	sv_admin_stop(&sv);
	sv_writers_stop(&sv);
	sv_opens_stop(&sv);
	/* Changes in flight are answered while their connections are open. */
	sv_ns_fini(&sv);
	sv_conns_close_all(&sv, -ESHUTDOWN);
	sv_lease_fini(&sv);
	sv_peers_fini(&sv);
	sv_writers_fini(&sv);
	sv_opens_fini(&sv);
	sv_intent_fini(&sv);
out_listen:
	sv_metrics_stop(&sv); /* a failed start's (the clean stop's is done) */
	sv_mirror_fini(&sv);
	sv_ns_fini(&sv);
	if (sigfd >= 0)
		close(sigfd);
	close(sv.s_listen_fd);
out_flusher:
	sv_flusher_stop(&sv);
	/* A flush that finished as the loop stopped still answers its waiters. */
	orch_ev_run_posts(sv.s_ev);
	/* Replies still held for acknowledgements: their connections are closed. */
	sv_ack_fini(&sv);
out_ev:
	orch_ev_destroy(sv.s_ev);
out_writes:
	/* After the loop's last posts: a drain posted late may still lock it. */
	sv_writes_fini(&sv);
	orch_store_close(sv.s_store);
	sv_admin_fini(&sv);
out_meta:
	sv_metrics_stop(&sv);
	sv_ns_destroy(&sv);
	orch_meta_close(sv.s_meta);
	sv_conns_fini(&sv);
	if (status == 0)
		ORCH_NOTICE("stopped cleanly");
	if (status == 0 && sv.s_restart) {
		sv_restart(argv);
		status = 1; /* exec failed: a supervisor that restarts failures starts it */
	}
	return status;
}
