/*
 * orchard-mount: mounts an Orchard cluster with FUSE (libfuse3 low-level
 * API, multi-threaded loop).  See docs/mount.md.
 *
 *   orchard-mount -c CONF MNT [-o OPTS] [-f] [-d]
 *   orchard-mount CONF MNT -o OPTS        (as mount.fuse3 calls it)
 *
 * The mount is up before the command returns; without -f the process then
 * goes into the background.  It ends when the file system is unmounted
 * (fusermount3 -u, umount) or on SIGTERM/SIGINT/SIGHUP, which unmount.
 */
#include "mount/mount_i.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cfg.h"
#include "common/log.h"
#include "common/sdnotify.h"
#include "common/util.h"
#include "proto/knobs.h"

/*
 * The numeric options, their defaults and limits are in proto/knobs.def.
 * The readahead default (1 MiB) is there because FUSE starts every mount
 * at 128 KiB, which leaves one client waiting on one server round trip per
 * 128 KiB; 1 MiB keeps both servers of a stripe busy (docs/mount.md).
 */
struct mnt_opts {
	char *conf;
	char *log;
	char *fsname;     /* -o fsname=: the source in /proc/mounts, or NULL */
	char *metrics;    /* -o metrics=HOST:PORT: serve GET /metrics there, or NULL */
	int metrics_public; /* -o metrics_public: allow an address that is not loopback */
	char *first;      /* first operand: the mountpoint, or CONF if two */
	char *mountpoint; /* second operand */
	unsigned int knob[ORCH_KNOB_COUNT]; /* by enum orch_knob_id */
	int default_permissions;
	int no_readdirplus;
	int help;
};

enum {
	MNT_KEY_HELP,
	MNT_KEY_DEFAULT_PERMISSIONS,
};

static const struct fuse_opt mnt_opt_spec[] = {
	{ "-c %s", offsetof(struct mnt_opts, conf), 0 },
	{ "--conf=%s", offsetof(struct mnt_opts, conf), 0 },
	{ "conf=%s", offsetof(struct mnt_opts, conf), 0 },
	{ "log=%s", offsetof(struct mnt_opts, log), 0 },
	{ "fsname=%s", offsetof(struct mnt_opts, fsname), 0 },
	{ "metrics=%s", offsetof(struct mnt_opts, metrics), 0 },
	{ "metrics_public", offsetof(struct mnt_opts, metrics_public), 1 },
#define MNT_KNOB_OPT(name, ...) \
	{ #name "=%u", offsetof(struct mnt_opts, knob[ORCH_KNOB_ID_##name]), 0 },
#define MNT_SWITCH_OPT(name, ...) \
	{ #name "=on", offsetof(struct mnt_opts, knob[ORCH_KNOB_ID_##name]), 1 }, \
	{ #name "=1", offsetof(struct mnt_opts, knob[ORCH_KNOB_ID_##name]), 1 }, \
	{ #name "=off", offsetof(struct mnt_opts, knob[ORCH_KNOB_ID_##name]), 0 }, \
	{ #name "=0", offsetof(struct mnt_opts, knob[ORCH_KNOB_ID_##name]), 0 },
#define ORCH_KNOB_LIVE MNT_KNOB_OPT
#define ORCH_KNOB_MOUNT MNT_KNOB_OPT
#define ORCH_KNOB_SWITCH MNT_SWITCH_OPT
#include "proto/knobs.def"
#undef ORCH_KNOB_LIVE
#undef ORCH_KNOB_MOUNT
#undef ORCH_KNOB_SWITCH
#undef MNT_SWITCH_OPT
#undef MNT_KNOB_OPT
	{ "readdirplus=no", offsetof(struct mnt_opts, no_readdirplus), 1 },
	{ "readdirplus=yes", offsetof(struct mnt_opts, no_readdirplus), 0 },
	FUSE_OPT_KEY("default_permissions", MNT_KEY_DEFAULT_PERMISSIONS),
	FUSE_OPT_KEY("-h", MNT_KEY_HELP),
	FUSE_OPT_KEY("--help", MNT_KEY_HELP),
	FUSE_OPT_END
};

static void mnt_usage(FILE *f)
{
	fprintf(f,
		"usage: orchard-mount -c CONF MOUNTPOINT [-o OPTIONS] [-f] [-d]\n"
		"       orchard-mount CONF MOUNTPOINT [-o OPTIONS]\n"
		"Mounts the Orchard cluster described by CONF on MOUNTPOINT.\n"
		"  -c, --conf=CONF          cluster config file (also -o conf=CONF; default:\n"
		"                           $ORCHARD_CONF, else " ORCH_CFG_DEFAULT_PATH ")\n"
		"  -f                       stay in the foreground\n"
		"  -d                       FUSE debug output (implies -f)\n"
		"Options (-o, comma separated; the *_ms ones are changeable later with\n"
		"`orchard cache`, see docs/mount.md):\n");
	orch_knobs_help(f, false);
	fprintf(f,
		"  readdirplus=no           plain READDIR: no attributes with listings\n"
		"  log=FILE                 append log lines to FILE\n"
		"  metrics=HOST:PORT        serve Prometheus metrics on http://HOST:PORT/metrics\n"
		"                           (a loopback address, unless metrics_public is given)\n"
		"  metrics_public           allow a metrics address that is not loopback\n"
		"  and the FUSE mount options (allow_other, default_permissions, ...).\n");
}

static int mnt_opt_proc(void *data, const char *arg, int key, struct fuse_args *outargs)
{
	struct mnt_opts *o = data;

	(void)outargs;
	switch (key) {
	case FUSE_OPT_KEY_NONOPT:
		if (o->mountpoint) {
			fprintf(stderr, "orchard-mount: too many operands: '%s'\n", arg);
			return -1;
		}
		if (!o->first)
			o->first = strdup(arg);
		else
			o->mountpoint = strdup(arg);
		return 0;
	case MNT_KEY_HELP:
		o->help = 1;
		return 0;
	case MNT_KEY_DEFAULT_PERMISSIONS:
		o->default_permissions = 1;
		return 1; /* a mount option: keep it for the session */
	default:
		return 1;
	}
}

/* Every numeric option within its limits (0 is "not set" where knobs.def says so). */
static int mnt_check_knobs(const struct mnt_opts *o)
{
	for (size_t i = 0; i < ORCH_KNOB_COUNT; i++) {
		const struct orch_knob *k = &orch_knobs[i];
		unsigned int v = o->knob[i];

		if (v == 0 && orch_knob_zero_unset(k))
			continue;
		if (v < k->k_min || v > k->k_max) {
			fprintf(stderr, "orchard-mount: %s=%u is out of range (%u..%u)\n",
				k->k_name, v, k->k_min, k->k_max);
			return -EINVAL;
		}
	}
	return 0;
}

/* Parses our options out of @args; what remains is for libfuse. */
static int mnt_parse(struct fuse_args *args, struct mnt_opts *o)
{
	for (size_t i = 0; i < ORCH_KNOB_COUNT; i++)
		o->knob[i] = orch_knobs[i].k_default;
	if (fuse_opt_parse(args, o, mnt_opt_spec, mnt_opt_proc) == -1)
		return -EINVAL;
	if (o->help)
		return 0;
	/* One operand is the mountpoint; two are CONF and the mountpoint. */
	if (!o->mountpoint) {
		o->mountpoint = o->first;
		o->first = NULL;
	} else if (o->conf) {
		fprintf(stderr, "orchard-mount: CONF given twice\n");
		return -EINVAL;
	} else {
		o->conf = o->first;
		o->first = NULL;
	}
	if (!o->conf && orch_cfg_path(NULL))
		o->conf = strdup(orch_cfg_path(NULL));
	if (!o->mountpoint || !o->conf) {
		fprintf(stderr, "orchard-mount: %s\n",
			!o->mountpoint ? "no mountpoint"
				       : "no configuration: give -c CONF, set ORCHARD_CONF or "
					 "write " ORCH_CFG_DEFAULT_PATH);
		return -EINVAL;
	}
	return mnt_check_knobs(o);
}

/*
 * libfuse's messages ("fuse: unknown option(s): `-o foo'") with our name in
 * front while stderr is the user's; once the log is a file or syslog (in
 * the background, where stderr is gone), through it.  libfuse writes some
 * lines in pieces: they are put together up to the newline.
 */
static bool mnt_log_started;
static pthread_mutex_t mnt_fuse_log_lock = PTHREAD_MUTEX_INITIALIZER;
static char mnt_fuse_line[512];  /* protected by mnt_fuse_log_lock */

__attribute__((format(printf, 2, 0)))
static void mnt_fuse_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
	size_t n;

	pthread_mutex_lock(&mnt_fuse_log_lock);
	n = strlen(mnt_fuse_line);
	vsnprintf(mnt_fuse_line + n, sizeof(mnt_fuse_line) - n, fmt, ap);
	n = strlen(mnt_fuse_line);
	if (n && (mnt_fuse_line[n - 1] == '\n' || n == sizeof(mnt_fuse_line) - 1)) {
		while (n && mnt_fuse_line[n - 1] == '\n')
			mnt_fuse_line[--n] = '\0';
		if (!mnt_log_started)
			fprintf(stderr, "orchard-mount: %s\n", mnt_fuse_line);
		else if ((int)level <= ORCH_LOG_ERR)
			ORCH_ERR("%s", mnt_fuse_line);
		else
			ORCH_LOG((enum orch_log_level)ORCH_MIN((int)level, ORCH_LOG_DEBUG), "%s",
				 mnt_fuse_line);
		mnt_fuse_line[0] = '\0';
	}
	pthread_mutex_unlock(&mnt_fuse_log_lock);
}

static void mnt_opts_free(struct mnt_opts *o)
{
	free(o->conf);
	free(o->log);
	free(o->fsname);
	free(o->metrics);
	free(o->first);
	free(o->mountpoint);
}

/* The config and its key.  The key is wiped by the caller once copied. */
static int mnt_cfg_load(const char *path, struct orch_cfg *cfg)
{
	char why[512] = "";
	int error;

	error = orch_cfg_load(path, cfg, why, sizeof(why));
	if (!error)
		error = orch_cfg_load_key(cfg, why, sizeof(why));
	if (error)
		fprintf(stderr, "orchard-mount: %s: %s\n", path, why[0] ? why : strerror(-error));
	return error;
}

/*
 * Before anything is mounted, every server is asked for a PING, all at once
 * (a thread each, at most ORCH_SERVERS_MAX), each bounded by the shorter of
 * the op timeout and MNT_AUTH_CHECK_MS.  A server that proves it holds
 * another key is fatal: a mount that cannot authenticate would answer every
 * call with an error nobody understands.  A server that cannot be reached
 * proves nothing, and is no reason not to mount, as before: its files fail
 * until it is back.  The client is a throwaway: the mount's own one is made
 * after the fork into the background.
 */
#define MNT_AUTH_CHECK_MS 5000u

struct mnt_auth {
	struct orch_client *a_cl;
	unsigned int a_server;
	int a_error;
};

static void *mnt_auth_one(void *arg)
{
	struct mnt_auth *a = arg;
	struct orch_reply rep = { 0 };
	struct orch_msg req;

	orch_msg_init(&req, ORCH_AN2AN_PING);
	a->a_error = orch_client_call(a->a_cl, a->a_server, &req, &rep);
	if (!a->a_error)
		orch_reply_release(&rep);
	return NULL;
}

static int mnt_auth_check(const struct orch_cfg *cfg)
{
	struct mnt_auth a[ORCH_SERVERS_MAX];
	pthread_t threads[ORCH_SERVERS_MAX];
	bool started[ORCH_SERVERS_MAX];
	struct orch_client *cl;
	unsigned int bad = 0, first = 0;
	int error;

	error = orch_client_create(cfg, &cl);
	if (error) {
		fprintf(stderr, "orchard-mount: cannot create client: %s\n", strerror(-error));
		return error;
	}
	orch_client_set_timeout(cl, ORCH_MIN(cfg->op_timeout_ms ? cfg->op_timeout_ms
							       : MNT_AUTH_CHECK_MS,
					     MNT_AUTH_CHECK_MS));
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		a[i] = (struct mnt_auth){ .a_cl = cl, .a_server = i };
		started[i] = pthread_create(&threads[i], NULL, mnt_auth_one, &a[i]) == 0;
		if (!started[i])
			mnt_auth_one(&a[i]); /* no thread: ask in turn */
	}
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		if (started[i])
			pthread_join(threads[i], NULL);
		if (a[i].a_error == -EKEYREJECTED && !bad++)
			first = i;
	}
	orch_client_destroy(cl);
	if (!bad)
		return 0;
	if (bad == 1)
		fprintf(stderr, "orchard-mount: authentication failed: cluster key does not match "
			"server %s; not mounted\n", cfg->servers[first].name);
	else
		fprintf(stderr, "orchard-mount: authentication failed: cluster key does not match "
			"server %s (and %u more); not mounted\n",
			cfg->servers[first].name, bad - 1);
	return -EKEYREJECTED;
}

/*
 * Type fuse.orchard, and the source /proc/mounts and df show: -o fsname=
 * if given, else "orchard:CLUSTER".  mount.orchard gives the config's path,
 * the source of the fstab line, so that mount -a sees the line mounted.
 */
static int mnt_add_names(struct fuse_args *args, const struct orch_cfg *cfg,
			 const char *fsname)
{
	char opt[PATH_MAX + 64];

	if (fsname)
		snprintf(opt, sizeof(opt), "-osubtype=orchard,fsname=%s", fsname);
	else
		snprintf(opt, sizeof(opt), "-osubtype=orchard,fsname=orchard:%s",
			 cfg->cluster_name);
	/* A comma would split the option list. */
	for (char *p = opt + strlen("-osubtype=orchard,"); *p; p++)
		if (*p == ',' || *p == ' ')
			*p = '_';
	return fuse_opt_add_arg(args, opt) ? -ENOMEM : 0;
}

#define MNT_MAX_THREADS 32 /* FUSE workers unless max_threads=N says */

/*
 * Lease renewal threads (lcache.c, refresh ahead): each sends one renewal
 * at a time, so this many are in flight, enough that a lossy link's
 * retransmission stalls one of them without holding up the others.
 */
#define MNT_LC_RENEW_THREADS 8

static int mnt_run(struct fuse_session *se, const struct fuse_cmdline_opts *fo, bool mt_given)
{
	struct fuse_loop_config *lc;
	int rc;

	if (fo->singlethread)
		return fuse_session_loop(se);
	lc = fuse_loop_cfg_create();
	if (!lc)
		return -ENOMEM;
	fuse_loop_cfg_set_clone_fd(lc, (unsigned int)fo->clone_fd);
	/* UINT_MAX: not given on the command line, keep libfuse's default. */
	if (fo->max_idle_threads != UINT_MAX)
		fuse_loop_cfg_set_idle_threads(lc, fo->max_idle_threads);
	/*
	 * More workers than libfuse's 10: a server that hangs holds a burst of
	 * requests for a while (liborchard lets it keep only a few past a
	 * grace, rpc.h), and the other servers' requests need threads meanwhile.
	 */
	fuse_loop_cfg_set_max_threads(lc, mt_given ? fo->max_threads : MNT_MAX_THREADS);
	rc = fuse_session_loop_mt(se, lc);
	fuse_loop_cfg_destroy(lc);
	return rc;
}

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts fo = { 0 };
	struct mnt_opts o = { 0 };
	struct orch_mnt m = { 0 };
	struct fuse_session *se = NULL;
	const struct fuse_lowlevel_ops *ops;
	struct orch_cfg *cfg = NULL;
	bool mt_given = false;
	int rc = 1, error;

	orch_log_set_ident("orchard-mount");
	fuse_set_log_func(mnt_fuse_log);
	if (mnt_parse(&args, &o))
		goto out_usage;
	if (o.help) {
		mnt_usage(stdout);
		printf("\nFUSE options:\n");
		fuse_lowlevel_help();
		rc = 0;
		goto out_opts;
	}
	/* libfuse's max_threads is 10 whether given or not: was it? */
	for (int i = 0; i < args.argc; i++)
		if (strstr(args.argv[i], "max_threads="))
			mt_given = true;
	if (fuse_parse_cmdline(&args, &fo) != 0)
		goto out_usage;
	if (o.log && orch_log_open_file(o.log)) {
		fprintf(stderr, "orchard-mount: cannot open log '%s': %s\n", o.log,
			strerror(errno));
		goto out_opts;
	}
	mnt_log_started = o.log != NULL;
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg || mnt_cfg_load(o.conf, cfg))
		goto out_opts;
	if (o.knob[ORCH_KNOB_ID_op_timeout_ms])
		cfg->op_timeout_ms = o.knob[ORCH_KNOB_ID_op_timeout_ms];
	atomic_store(&m.m_dcache_timeout_ms, o.knob[ORCH_KNOB_ID_dcache_timeout_ms]);
	atomic_store(&m.m_getattr_timeout_ms, o.knob[ORCH_KNOB_ID_getattr_timeout_ms]);
	atomic_store(&m.m_negative_timeout_ms, o.knob[ORCH_KNOB_ID_negative_timeout_ms]);
	atomic_store(&m.m_coherent, o.knob[ORCH_KNOB_ID_coherent]);
	atomic_store(&m.m_op_timeout_ms, cfg->op_timeout_ms);
	m.m_default_permissions = o.default_permissions;
	m.m_readdirplus = !o.no_readdirplus;
	m.m_owner = getuid();
	if (orch_mnt_itab_init(&m.m_itab)) {
		fprintf(stderr, "orchard-mount: %s\n", strerror(ENOMEM));
		goto out_cfg;
	}
	orch_mnt_fhs_init(&m.m_fhs);
	if (mnt_add_names(&args, cfg, o.fsname))
		goto out_itab;
	/*
	 * libfuse refuses an option nobody knows here, naming it ("fuse:
	 * unknown option(s): `-o foo'"): before any server is asked.
	 */
	/* With metrics, every request is timed (metrics.c); without, nothing is. */
	ops = o.metrics ? orch_mnt_ops_timed() : &orch_mnt_ops;
	se = fuse_session_new(&args, ops, sizeof(*ops), &m);
	if (!se) {
		fprintf(stderr, "orchard-mount: not mounted\n");
		goto out_itab;
	}
	if (mnt_auth_check(cfg))
		goto out_session;
	/* Bound now, so that a bad or busy address mounts nothing. */
	if (o.metrics && orch_mnt_metrics_create(&m, o.metrics, o.metrics_public, o.mountpoint,
						 cfg->cluster_name))
		goto out_session;
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	if (fuse_session_mount(se, o.mountpoint) != 0)
		goto out_signals;
	/* Set at the first open: the kernel resets it when INIT is answered. */
	m.m_readahead_kb = o.knob[ORCH_KNOB_ID_readahead_kb];
	m.m_mountpoint = m.m_readahead_kb ? realpath(o.mountpoint, NULL) : NULL;
	/*
	 * Into the background before liborchard starts its threads (they
	 * would not survive the fork): the client connects lazily, on the
	 * first request.
	 */
	if (fuse_daemonize(fo.foreground) != 0)
		goto out_unmount;
	/* Backgrounded, stderr is /dev/null: log to syslog, the journal (mount -t). */
	if (!fo.foreground && !o.log) {
		orch_log_open_syslog();
		mnt_log_started = true;
	}
	error = orch_client_create(cfg, &m.m_cl);
	/* The client copied it; the key need not linger here. */
	memset(cfg->key, 0, sizeof(cfg->key));
	if (error) {
		ORCH_ERR("cannot create client: %s", strerror(-error));
		goto out_unmount;
	}
	error = orch_mnt_lc_init(&m.m_lc, cfg->nservers, cfg->lease_ms, m.m_default_permissions,
				 cfg->replicas > 1);
	if (error) {
		ORCH_ERR("cannot set up the lease cache: %s", strerror(-error));
		goto out_unmount;
	}
	error = orch_mnt_knames_init(&m.m_knames);
	if (!error)
		error = orch_mnt_kinval_init(&m);
	if (error) {
		ORCH_ERR("cannot set up kernel invalidations: %s", strerror(-error));
		goto out_unmount;
	}
	/* Before the first call: the connections ask for leases in HELLO. */
	if (m.m_lc.l_on)
		orch_client_set_push_handler(m.m_cl, orch_mnt_push, &m, true);
	/* Without its threads the cache still answers; its keys just run out. */
	error = orch_mnt_lc_renew_start(&m.m_lc, MNT_LC_RENEW_THREADS, orch_mnt_lc_renew_send, &m);
	if (error)
		ORCH_WARN("lease renewal off: %s", strerror(-error));
	/* Without them what groups leased is never used: every call asks. */
	error = orch_mnt_lc_vouch_start(&m.m_lc, orch_mnt_lc_vouch_send, &m);
	if (error)
		ORCH_WARN("leases of replica groups unused: %s", strerror(-error));
	m.m_se = se;
	/* Without its thread the kernel keeps what it has to its own timeouts. */
	error = orch_mnt_kinval_start(&m);
	if (error)
		ORCH_WARN("kernel invalidations off: %s", strerror(-error));
	error = orch_mnt_wb_start(&m, (size_t)o.knob[ORCH_KNOB_ID_writebehind_kb] << 10);
	if (error) {
		ORCH_ERR("cannot start write-behind: %s", strerror(-error));
		goto out_unmount;
	}
	/* Without the keeper, open files are registered again at their next read or write. */
	error = orch_mnt_reopen_start(&m);
	if (error)
		ORCH_WARN("cannot start the keeper of open registrations: %s", strerror(-error));
	/* Metrics off if their threads cannot start: the file system is mounted. */
	if (orch_mnt_metrics_start(&m))
		orch_mnt_metrics_stop(&m);
	/* orchard-mount@.service runs -f as Type=notify: mounted and serving. */
	if (fo.foreground)
		orch_sdnotify_send("READY=1\nSTATUS=mounted");
	ORCH_NOTICE("mounted: cluster='%s' mountpoint='%s' dcache_timeout_ms=%u "
		    "getattr_timeout_ms=%u negative_timeout_ms=%u op_timeout_ms=%u "
		    "writebehind_kb=%u lease_ms=%u coherent=%u",
		    cfg->cluster_name, o.mountpoint, o.knob[ORCH_KNOB_ID_dcache_timeout_ms],
		    o.knob[ORCH_KNOB_ID_getattr_timeout_ms],
		    o.knob[ORCH_KNOB_ID_negative_timeout_ms], cfg->op_timeout_ms,
		    o.knob[ORCH_KNOB_ID_writebehind_kb], cfg->lease_ms,
		    o.knob[ORCH_KNOB_ID_coherent]);
	error = mnt_run(se, &fo, mt_given);
	/* libfuse ends its loop on a read of /dev/fuse that failed: say which. */
	if (error < 0)
		ORCH_ERR("the FUSE session ended on an error: %s (unmounted: mount again)",
			 strerror(-error));
	rc = error < 0 ? 1 : 0;
	/* No hit queues a renewal any more; the ones queued are not worth the wait. */
	orch_mnt_lc_renew_stop(&m.m_lc);
	orch_mnt_lc_vouch_stop(&m.m_lc);
	/* Before what its page reads stops (the write-behind, the client). */
	orch_mnt_metrics_stop(&m);
	orch_mnt_reopen_stop(&m);
	/* Every write in flight acknowledged (or logged) before the end. */
	orch_mnt_wb_stop(&m);
	/*
	 * Nothing more goes to the kernel.  A call in progress may wait on a
	 * request the loop left unread (libfuse's deadlock note): halting
	 * first keeps that to the one call already made.
	 */
	orch_mnt_kinval_halt(&m);
	ORCH_NOTICE("unmounted: mountpoint='%s'", o.mountpoint);
out_unmount:
	fuse_session_unmount(se);
	/* Before the session goes: the notifier's calls use it. */
	orch_mnt_kinval_stop(&m);
	m.m_se = NULL;
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	orch_mnt_metrics_stop(&m);
	orch_mnt_kinval_stop(&m);
	/* Ends the session: no handler runs after this. */
	fuse_session_destroy(se);
	/* Its threads call the client. */
	orch_mnt_lc_renew_stop(&m.m_lc);
	orch_mnt_lc_vouch_stop(&m.m_lc);
	orch_client_destroy(m.m_cl);
	orch_mnt_kinval_fini(&m);
	orch_mnt_knames_fini(&m.m_knames);
	orch_mnt_lc_fini(&m.m_lc);
out_itab:
	orch_mnt_fhs_fini(&m.m_fhs);
	orch_mnt_itab_fini(&m.m_itab);
	free(m.m_mountpoint);
out_cfg:
	if (cfg)
		memset(cfg->key, 0, sizeof(cfg->key));
out_opts:
	free(cfg);
	free(fo.mountpoint);
	fuse_opt_free_args(&args);
	mnt_opts_free(&o);
	return rc;
out_usage:
	fprintf(stderr, "Try 'orchard-mount --help' for more information.\n");
	rc = 2;
	goto out_opts;
}
