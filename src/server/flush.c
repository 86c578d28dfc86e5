/*
 * Durability: the flusher thread.
 *
 * fsync, fdatasync and syncfs requests are parked here; the thread makes the
 * store durable (orch_store_sync: its blocks, then its own WAL) and then the
 * namespace WAL (orch_meta_sync_wal, on this thread's own connection), and
 * answers every request that was parked before the flush started, so
 * concurrent fsyncs share one flush (group commit).  Requests that arrive
 * during a flush wait for the next one: the running flush may have missed
 * their data.  The store goes first: a namespace change that names data
 * (a size published by EXTEND) is never durable before that data is.
 *
 * Without requests, anything committed is flushed within commit_interval_ms
 * (DESIGN.md, "Durability contract"), and the WAL is checkpointed into the
 * database from here, so no request pays for copying the WAL or syncing
 * the database.  The one exception is bounded: the WAL restarts from its
 * start only when a checkpoint has copied all of it, which never happens
 * while the loop commits without pause; so when the writer is idle anyway,
 * or past SV_WAL_LIMIT_FRAMES, a second checkpoint holds the write lock for
 * the frames committed since the passive one (a sync of those and of the
 * database), and writes wait that long (see flush_restart).
 *
 * A peer's intent step is answered the same way, once what it changed is
 * durable (sv_flusher_reply): the coordinator acts on the answer.
 */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/log.h"
#include "common/pcut.h"
#include "common/time.h"
#include "server/flush.h"
#include "server/sv_gate.h"
#include "server/sv_ns.h"
#include "server/sv.h"
#include "server/sv_req.h"

/*
 * The WAL size (in 4 KiB frames, 64 MiB) past which a checkpoint restarts
 * it even though writers have to wait for it (about 1.5 ms each time in the
 * mount benchmark): a bound on its disk space, its page cache and the
 * recovery after a crash.  DESIGN.md, "The namespace WAL".
 */
#define SV_WAL_LIMIT_FRAMES 16384

/*
 * How long a restarting checkpoint waits for readers (and for the loop's
 * transaction in progress), in ms.  It holds the write lock meanwhile, so a
 * long reader, such as a scrub's snapshot, would otherwise hold every write
 * off for the connection's whole busy timeout at each flush; the restart is
 * retried at the next flush instead.
 */
#define SV_WAL_RESTART_WAIT_MS 5
#define SV_CKPT_BUSY_MS 100

/* Something to do on the loop once a flush that started after it was parked is done. */
struct flush_wait {
	sv_flushed_fn w_fn;
	void *w_arg;
};

struct flush_batch {
	struct sv_server *sv;
	struct flush_wait *waits;
	size_t n;
	int error;
};

struct sv_flusher {
	pthread_t f_thread;
	pthread_mutex_t f_lock;
	pthread_cond_t f_cv;
	bool f_stop;               /* protected by f_lock */
	struct flush_wait *f_waits; /* protected by f_lock: parked fsyncs and other waits */
	size_t f_n, f_cap;         /* protected by f_lock */
	atomic_bool f_dirty;       /* something committed since the last flush */
	sqlite3 *f_ckpt;           /* the thread's own connection: WAL syncs, checkpoints */
};

static void flush_done(void *arg)
{
	struct flush_batch *b = arg;

	for (size_t i = 0; i < b->n; i++)
		b->waits[i].w_fn(b->sv, b->waits[i].w_arg, b->error);
	b->sv->s_syncs++;
	b->sv->s_sync_waiters += b->n;
	free(b->waits);
	free(b);
}

/*
 * Makes the next commit write the WAL from its start: copies what the
 * passive checkpoint left (the frames committed while it ran) and syncs the
 * database, holding the write lock throughout, so writes wait that long.
 * @mode is SQLITE_CHECKPOINT_TRUNCATE when the writer is idle: the file is
 * emptied, and later commits append to it.  A restarted WAL that kept its
 * file rewrites its old pages with writes that do not cover whole pages, and
 * a page that has left the page cache meanwhile is read back from disk by
 * the loop thread inside a commit (in the mount benchmark, unlinks after an
 * idle phase took 3x their time).  Under load @mode is
 * SQLITE_CHECKPOINT_RESTART: those pages were written within the last
 * seconds, and truncating a large file under the lock made requests wait
 * for 100 ms and more.
 */
static void flush_restart(struct sv_server *sv, struct sv_flusher *f, int mode)
{
	struct timespec t0, t1;
	int log = 0, done = 0, rc;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	sqlite3_busy_timeout(f->f_ckpt, SV_WAL_RESTART_WAIT_MS);
	rc = sqlite3_wal_checkpoint_v2(f->f_ckpt, NULL, mode, &log, &done);
	sqlite3_busy_timeout(f->f_ckpt, SV_CKPT_BUSY_MS);
	if (rc != SQLITE_OK) {
		/* A reader outlived the wait: the next flush tries again. */
		ORCH_LOG_RATELIMIT(ORCH_LOG_INFO, "wal restart deferred: %s",
				   sqlite3_errmsg(f->f_ckpt));
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	atomic_fetch_add(&sv->s_wal_restarts, 1);
	atomic_fetch_add(&sv->s_wal_restart_us,
			 (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000 +
				    (t1.tv_nsec - t0.tv_nsec) / 1000));
}

/*
 * A passive checkpoint first, which never blocks the loop and copies almost
 * everything.  Then the restart, if the WAL is over its limit (and the
 * restart has little left to copy), or if the writer is idle: the passive
 * checkpoint copied every frame and nothing was committed since this flush
 * began, so the restart has nothing to copy or sync, and most likely no
 * request meets its lock.  "Copied every frame" alone is not idle: between
 * two requests of a busy client it often is, and the restart would then
 * sync the frames of the next ones while they wait.  No restart at
 * shutdown (@sv NULL): closing the last connection checkpoints anyway.
 */
static void flush_checkpoint(struct sv_server *sv, struct sv_flusher *f)
{
	int log = 0, done = 0;

	if (sqlite3_wal_checkpoint_v2(f->f_ckpt, NULL, SQLITE_CHECKPOINT_PASSIVE, &log,
				      &done) != SQLITE_OK) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_INFO, "wal checkpoint incomplete: %s",
				   sqlite3_errmsg(f->f_ckpt));
		return;
	}
	if (!sv || log <= 0)
		return;
	if (done == log && !atomic_load(&f->f_dirty))
		flush_restart(sv, f, SQLITE_CHECKPOINT_TRUNCATE);
	else if (log >= SV_WAL_LIMIT_FRAMES)
		flush_restart(sv, f, SQLITE_CHECKPOINT_RESTART);
}

/* The namespace WAL's length in frames (SQLite's default 4 KiB pages and
 * 24-byte frame headers), from its size; 0 if unknown. */
static uint64_t flush_wal_frames(struct sv_server *sv)
{
	char path[PATH_MAX];
	struct stat sb;

	if (snprintf(path, sizeof(path), "%s-wal", orch_meta_db_path(sv->s_meta)) >=
	    (int)sizeof(path) || stat(path, &sb) != 0)
		return 0;
	return (uint64_t)sb.st_size / (4096 + 24);
}

/* The store, then the namespace WAL.  0 or the first error. */
static int flush_sync(struct sv_server *sv, struct sv_flusher *f)
{
	int error, meta_error;

	/* A failure is the store's failure, logged once there (orch_store_failed). */
	error = orch_store_sync(sv->s_store);
	meta_error = orch_meta_sync_wal(f->f_ckpt);
	return error ? error : meta_error;
}

static void *flush_main(void *arg)
{
	struct sv_server *sv = arg;
	struct sv_flusher *f = sv->s_flusher;
	uint32_t interval = sv->s_cfg.commit_interval_ms;

	pthread_mutex_lock(&f->f_lock);
	while (!f->f_stop) {
		struct flush_batch *b;
		struct timespec ts;
		uint64_t t0;
		bool waiters;
		int error;

		if (f->f_n == 0) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_sec += interval / 1000;
			ts.tv_nsec += (long)(interval % 1000) * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&f->f_cv, &f->f_lock, &ts);
			if (f->f_stop)
				break;
			if (f->f_n == 0 && !atomic_load(&f->f_dirty))
				continue;
		}
		b = calloc(1, sizeof(*b));
		if (!b) {
			pthread_mutex_unlock(&f->f_lock);
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "flusher: out of memory, retrying");
			struct timespec pause = { 0, 10000000 };
			nanosleep(&pause, NULL);
			pthread_mutex_lock(&f->f_lock);
			continue;
		}
		b->sv = sv;
		b->waits = f->f_waits;
		b->n = f->f_n;
		f->f_waits = NULL;
		f->f_n = f->f_cap = 0;
		atomic_store(&f->f_dirty, false);
		pthread_mutex_unlock(&f->f_lock);

		t0 = orch_hist_now_ns();
		error = flush_sync(sv, f);
		orch_hist_observe(&sv->s_flush_hist, orch_hist_now_ns() - t0);
		b->error = error;
		waiters = b->n != 0;
		orch_ev_post(sv->s_ev, flush_done, b);
		/*
		 * After the answers are on their way.  fsyncs arriving meanwhile
		 * wait for the checkpoint too, so while they keep coming it runs
		 * only once the WAL is past its limit: skipping it whenever any
		 * fsync waited let a steady stream of them grow the WAL for ever.
		 */
		if (!waiters || flush_wal_frames(sv) >= SV_WAL_LIMIT_FRAMES)
			flush_checkpoint(sv, f);
		pthread_mutex_lock(&f->f_lock);
	}
	pthread_mutex_unlock(&f->f_lock);
	return NULL;
}

int sv_flusher_start(struct sv_server *sv)
{
	struct sv_flusher *f = calloc(1, sizeof(*f));
	pthread_condattr_t ca;
	int error;

	if (!f)
		return -ENOMEM;
	pthread_mutex_init(&f->f_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&f->f_cv, &ca);
	pthread_condattr_destroy(&ca);
	/* The thread's own connection (SQLite connections are not shared). */
	if (sqlite3_open_v2(orch_meta_db_path(sv->s_meta), &f->f_ckpt,
			    SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		ORCH_ERR("cannot open the flusher's namespace connection: %s",
			 f->f_ckpt ? sqlite3_errmsg(f->f_ckpt) : "out of memory");
		error = -EIO;
		goto out_free;
	}
	sqlite3_busy_timeout(f->f_ckpt, SV_CKPT_BUSY_MS);
	sqlite3_exec(f->f_ckpt, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL);
	sv->s_flusher = f;
	error = -pthread_create(&f->f_thread, NULL, flush_main, sv);
	if (error) {
		sv->s_flusher = NULL;
		goto out_free;
	}
	return 0;
out_free:
	sqlite3_close(f->f_ckpt);
	pthread_mutex_destroy(&f->f_lock);
	pthread_cond_destroy(&f->f_cv);
	free(f);
	return error;
}

void sv_flusher_stop(struct sv_server *sv)
{
	struct sv_flusher *f = sv->s_flusher;
	int error;

	if (!f)
		return;
	pthread_mutex_lock(&f->f_lock);
	f->f_stop = true;
	pthread_cond_signal(&f->f_cv);
	pthread_mutex_unlock(&f->f_lock);
	pthread_join(f->f_thread, NULL);
	/* A clean stop leaves everything durable: the store, then the namespace. */
	error = flush_sync(sv, f);
	flush_checkpoint(NULL, f);
	for (size_t i = 0; i < f->f_n; i++)
		f->f_waits[i].w_fn(sv, f->f_waits[i].w_arg, error);
	free(f->f_waits);
	sqlite3_close(f->f_ckpt);
	pthread_mutex_destroy(&f->f_lock);
	pthread_cond_destroy(&f->f_cv);
	free(f);
	sv->s_flusher = NULL;
}

/* A flush asked inside the group's capture, waiting for the change's entry. */
struct flush_later {
	sv_flushed_fn fl_fn;
	void *fl_arg;
};

static void flush_after_applied(struct sv_server *sv, void *arg, int error)
{
	struct flush_later fl = *(struct flush_later *)arg;

	free(arg);
	if (error)
		fl.fl_fn(sv, fl.fl_arg, error);
	else
		sv_flusher_after(sv, fl.fl_fn, fl.fl_arg);
}

/*
 * On a group's leader, durable means durable on a majority: the followers
 * were sent a sync when the step asked, and the step waits for them at
 * the gate after the flush here.
 */
static void flush_then_gate(struct sv_server *sv, void *arg, int error)
{
	struct flush_later fl = *(struct flush_later *)arg;

	free(arg);
	sv_gate_after(sv, false, error, fl.fl_fn, fl.fl_arg);
}

static void flush_queue(struct sv_server *sv, sv_flushed_fn fn, void *arg);

void sv_flusher_after(struct sv_server *sv, sv_flushed_fn fn, void *arg)
{
	if (sv_ns_capturing(sv)) {
		/*
		 * What waits for durability waits for the change's entry first:
		 * until it is applied, nothing of it is in the database to flush.
		 */
		struct flush_later *fl = malloc(sizeof(*fl));

		if (fl) {
			*fl = (struct flush_later){ .fl_fn = fn, .fl_arg = arg };
			if (sv_ns_defer(sv, flush_after_applied, fl) == 1)
				return;
			free(fl);
		}
		sv_ns_fail(sv, -ENOMEM);
		fn(sv, arg, -ENOMEM);
		return;
	}
	if (sv->s_gate.g_on) {
		struct flush_later *fl = malloc(sizeof(*fl));

		if (!fl) {
			fn(sv, arg, -ENOMEM);
			return;
		}
		*fl = (struct flush_later){ .fl_fn = fn, .fl_arg = arg };
		if (sv->s_gate.g_sync)
			sv->s_gate.g_sync(sv);
		flush_queue(sv, flush_then_gate, fl);
		return;
	}
	flush_queue(sv, fn, arg);
}

/* Parks @fn for the next flush. */
static void flush_queue(struct sv_server *sv, sv_flushed_fn fn, void *arg)
{
	struct sv_flusher *f = sv->s_flusher;

	pthread_mutex_lock(&f->f_lock);
	if (f->f_n == f->f_cap) {
		size_t cap = f->f_cap ? f->f_cap * 2 : 16;
		struct flush_wait *p = realloc(f->f_waits, cap * sizeof(*p));

		if (!p) {
			pthread_mutex_unlock(&f->f_lock);
			fn(sv, arg, -ENOMEM);
			return;
		}
		f->f_waits = p;
		f->f_cap = cap;
	}
	f->f_waits[f->f_n++] = (struct flush_wait){ .w_fn = fn, .w_arg = arg };
	pthread_cond_signal(&f->f_cv);
	pthread_mutex_unlock(&f->f_lock);
}

void sv_flusher_dirty(struct sv_server *sv)
{
	atomic_store(&sv->s_flusher->f_dirty, true);
}

/* --- Answers once durable ------------------------------------------------------- */

static void flush_answer(struct sv_server *sv, void *arg, int error)
{
	(void)sv;
	sv_reply_status(arg, error);
}

void sv_flusher_wait(struct sv_server *sv, struct sv_req *r)
{
	sv_flusher_after(sv, flush_answer, r);
}

struct durable_reply {
	struct sv_req *dr_req;
	struct orch_msg dr_msg;
};

/*
 * Crash point @step of the peer step a durable reply answers:
 * "<message>-<step>" (docs/DESIGN.md, "Intents").
 */
static void flush_point(uint16_t type, const char *step)
{
	char name[64];

	if (!orch_pcut_enabled())
		return;
	snprintf(name, sizeof(name), "%s-%s", orch_msg_name(type), step);
	orch_pcut_point(name);
}

static void flush_reply_durable(struct sv_server *sv, void *arg, int error)
{
	struct durable_reply *dr = arg;

	(void)sv;
	flush_point(dr->dr_req->r_type, "durable");
	if (error && !dr->dr_msg.status) {
		/* Not durable: a failure, which the coordinator retries. */
		orch_msg_init(&dr->dr_msg, 0);
		dr->dr_msg.status = error;
	}
	sv_reply(dr->dr_req, &dr->dr_msg);
	free(dr);
}

void sv_flusher_reply(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct durable_reply *dr = malloc(sizeof(*dr));

	flush_point(r->r_type, "applied");
	if (!dr) {
		/* Not knowing it durable, say nothing: the coordinator retries. */
		sv_reply_status(r, -ENOMEM);
		return;
	}
	dr->dr_req = r;
	dr->dr_msg = *m;
	sv_flusher_after(sv, flush_reply_durable, dr);
}
