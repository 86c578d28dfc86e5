/*
 * Write-behind: a FUSE WRITE is answered as soon as its strips are sent to
 * their servers, as NFS answers a write before the server has committed
 * it.  Without it a sequential writer waits for a round trip and a store
 * commit per max_write (1 MiB); with it the next write is copied while the
 * servers commit the last ones, and their store batches several writes per
 * transaction.  One thread (the reaper) collects the acknowledgements in
 * the order the writes were sent, and a thread that waits for a file's
 * writes collects those the reaper has not reached itself: a write whose
 * server is failing over or hung holds the reaper, not the other files'
 * fsyncs.  One file's writes are still collected one at a time, in order
 * (wb_unclaimed): collecting a write may send it again.
 *
 * What keeps it correct:
 * - Order: a server applies one connection's writes in the order sent, so
 *   overlapping writes in flight land in the order the kernel gave them.
 *   A write to a replica group whose leader died is sent again, to the
 *   next, by the thread that collects it: so one file's writes are
 *   collected in order, one at a time, and a write that went on a newer
 *   connection than an older write of its file still in flight there is
 *   sent once more after the file's writes are in (wb_overtakes).
 * - Reads and everything else that looks at a file's data on the servers
 *   (read, setattr, fallocate, copy_file_range, flush, fsync, release)
 *   first wait for the file's writes in flight (orch_mnt_wb_wait): a
 *   server answers a READ at once, but a WRITE only after its commit.
 * - Errors: a write that fails after it was answered is reported like
 *   NFS does, by the file's next write, flush (close) or fsync, and the
 *   kernel's page cache of the file is dropped so nobody reads bytes the
 *   servers do not have.  A thread of its own (the dropper) drops it: the
 *   kernel waits for every page lock, and a READ holds its pages locked
 *   while it waits here for the file's writes, which the reaper must be
 *   free to collect.
 * - Memory: at most m_wb_max bytes in flight per mount; a writer beyond
 *   that waits for the oldest.  0 turns write-behind off.
 * - Close-to-open and fsync are unchanged: flush and fsync wait first.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "mount/mount_i.h"

struct mnt_wb_ent {
	struct mnt_wb_ent *e_next;
	uint64_t e_handle;
	size_t e_bytes;
	struct orch_fs_wio *e_io;
	bool e_claimed;     /* a thread waits for its acknowledgement (wb_collect) */
	/* Where its WRITEs went (orch_fs_write_sent), read under w_lock. */
	struct orch_fs_sent *e_sent;
	size_t e_nsent;
};

static void wb_ent_free(struct mnt_wb_ent *e)
{
	free(e->e_sent);
	free(e);
}

/* A write error not reported yet, kept per handle. */
struct mnt_wb_err {
	uint64_t handle;
	int error;
};

/* The error of @h, taken (0 if none).  Under w_lock. */
static int wb_err_take(struct orch_mnt_wb *wb, uint64_t h)
{
	for (size_t i = 0; i < wb->w_nerr; i++) {
		if (wb->w_err[i].handle == h) {
			int error = wb->w_err[i].error;

			wb->w_err[i] = wb->w_err[--wb->w_nerr];
			return error;
		}
	}
	return 0;
}

/* Keeps the first error of @h.  Under w_lock. */
static void wb_err_put(struct orch_mnt_wb *wb, uint64_t h, int error)
{
	struct mnt_wb_err *v;

	for (size_t i = 0; i < wb->w_nerr; i++)
		if (wb->w_err[i].handle == h)
			return;
	if (wb->w_nerr == wb->w_errcap) {
		size_t cap = wb->w_errcap ? wb->w_errcap * 2 : 8;

		v = realloc(wb->w_err, cap * sizeof(*v));
		if (!v)
			return;   /* logged by the caller; the page cache is dropped anyway */
		wb->w_err = v;
		wb->w_errcap = cap;
	}
	wb->w_err[wb->w_nerr++] = (struct mnt_wb_err){ .handle = h, .error = error };
}

static bool wb_has(const struct orch_mnt_wb *wb, uint64_t h)
{
	for (const struct mnt_wb_ent *e = wb->w_head; e; e = e->e_next)
		if (e->e_handle == h)
			return true;
	return false;
}

/* Queues @h for the dropper, once.  Under w_lock. */
static void wb_drop_put(struct orch_mnt_wb *wb, uint64_t h)
{
	uint64_t *v;

	for (size_t i = 0; i < wb->w_ndrop; i++)
		if (wb->w_drop[i] == h)
			return;
	if (wb->w_ndrop == wb->w_dropcap) {
		size_t cap = wb->w_dropcap ? wb->w_dropcap * 2 : 8;

		v = realloc(wb->w_drop, cap * sizeof(*v));
		if (!v)
			return;   /* the error is still reported at the next write, close or fsync */
		wb->w_drop = v;
		wb->w_dropcap = cap;
	}
	wb->w_drop[wb->w_ndrop++] = h;
	pthread_cond_signal(&wb->w_drop_work);
}

static void *wb_dropper(void *arg)
{
	struct orch_mnt *m = arg;
	struct orch_mnt_wb *wb = &m->m_wb;

	pthread_mutex_lock(&wb->w_lock);
	for (;;) {
		uint64_t h;

		while (!wb->w_ndrop && !wb->w_drop_stop)
			pthread_cond_wait(&wb->w_drop_work, &wb->w_lock);
		if (!wb->w_ndrop)
			break;
		h = wb->w_drop[--wb->w_ndrop];
		pthread_mutex_unlock(&wb->w_lock);
		if (m->m_se)
			fuse_lowlevel_notify_inval_inode(m->m_se, h, 0, 0);
		pthread_mutex_lock(&wb->w_lock);
	}
	pthread_mutex_unlock(&wb->w_lock);
	return NULL;
}

/* How many claimed writes the reaper looks past for one of another file. */
#define WB_CLAIMED_SKIP 64

/*
 * The next write to collect: the oldest of @h, or of any file if @h is 0
 * (no handle is), that is its file's oldest in flight and nobody waits
 * for yet; NULL if there is none.  A file's writes are collected one at a
 * time, in the order they were sent, because collecting one may send it
 * again (to the next leader of a group, orch_client_wait): two writes of
 * one range sent again at once could land in either order, the older
 * last.  So a claimed write is always its file's oldest.
 */
static struct mnt_wb_ent *wb_unclaimed(const struct orch_mnt_wb *wb, uint64_t h)
{
	uint64_t busy[WB_CLAIMED_SKIP];
	size_t nbusy = 0;

	for (struct mnt_wb_ent *e = wb->w_head; e; e = e->e_next) {
		bool seen = false;

		if (h) {
			if (e->e_handle == h)
				return e->e_claimed ? NULL : e;
			continue;
		}
		for (size_t i = 0; i < nbusy && !seen; i++)
			seen = busy[i] == e->e_handle;
		if (seen)
			continue;   /* a later write of a file whose oldest is claimed */
		if (!e->e_claimed)
			return e;
		if (nbusy == WB_CLAIMED_SKIP)
			return NULL;   /* the reaper waits for one of them */
		busy[nbusy++] = e->e_handle;
	}
	return NULL;
}

/*
 * Waits for the acknowledgement of @e, which the caller claimed, and takes
 * it off the list.  Called and returns under w_lock, which it drops while
 * it waits: the entry stays on the list meanwhile, so waiters see it.
 */
static void wb_collect(struct orch_mnt *m, struct mnt_wb_ent *e)
{
	struct orch_mnt_wb *wb = &m->m_wb;
	struct mnt_wb_ent **pp, *prev = NULL;
	int error;

	pthread_mutex_unlock(&wb->w_lock);
	error = orch_fs_write_wait(m->m_cl, e->e_io);
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "write-behind: a write to inode %#llx failed: %s; "
				   "reported at its next write, close or fsync",
				   (unsigned long long)e->e_handle, strerror(-error));
	}
	pthread_mutex_lock(&wb->w_lock);
	if (error) {
		wb_err_put(wb, e->e_handle, error);
		wb_drop_put(wb, e->e_handle);
	}
	for (pp = &wb->w_head; *pp != e; pp = &(*pp)->e_next)
		prev = *pp;
	*pp = e->e_next;
	if (wb->w_tail == e)
		wb->w_tail = prev;
	wb->w_bytes -= e->e_bytes;
	pthread_cond_broadcast(&wb->w_done);
	pthread_cond_signal(&wb->w_work);   /* the reaper, if it waited for the list to empty */
	wb_ent_free(e);
}

static void *wb_reaper(void *arg)
{
	struct orch_mnt *m = arg;
	struct orch_mnt_wb *wb = &m->m_wb;

	pthread_mutex_lock(&wb->w_lock);
	for (;;) {
		struct mnt_wb_ent *e;

		while (!(e = wb_unclaimed(wb, 0)) && !(wb->w_stop && !wb->w_head))
			pthread_cond_wait(&wb->w_work, &wb->w_lock);
		if (!e)
			break;
		e->e_claimed = true;
		wb_collect(m, e);
	}
	pthread_mutex_unlock(&wb->w_lock);
	return NULL;
}

static void wb_dropper_stop(struct orch_mnt_wb *wb)
{
	pthread_mutex_lock(&wb->w_lock);
	wb->w_drop_stop = true;
	pthread_cond_signal(&wb->w_drop_work);
	pthread_mutex_unlock(&wb->w_lock);
	pthread_join(wb->w_dropper, NULL);   /* it drops what is queued first */
	free(wb->w_drop);
	wb->w_drop = NULL;
}

int orch_mnt_wb_start(struct orch_mnt *m, size_t max_bytes)
{
	struct orch_mnt_wb *wb = &m->m_wb;
	int error;

	memset(wb, 0, sizeof(*wb));
	wb->w_max = max_bytes;
	if (!max_bytes)
		return 0;
	pthread_mutex_init(&wb->w_lock, NULL);
	pthread_cond_init(&wb->w_work, NULL);
	pthread_cond_init(&wb->w_done, NULL);
	pthread_cond_init(&wb->w_drop_work, NULL);
	error = -pthread_create(&wb->w_dropper, NULL, wb_dropper, m);
	if (!error) {
		error = -pthread_create(&wb->w_thread, NULL, wb_reaper, m);
		if (error)
			wb_dropper_stop(wb);
	}
	if (error) {
		pthread_cond_destroy(&wb->w_drop_work);
		pthread_cond_destroy(&wb->w_done);
		pthread_cond_destroy(&wb->w_work);
		pthread_mutex_destroy(&wb->w_lock);
		wb->w_max = 0;
		return error;
	}
	wb->w_running = true;
	return 0;
}

void orch_mnt_wb_stop(struct orch_mnt *m)
{
	struct orch_mnt_wb *wb = &m->m_wb;

	if (!wb->w_running)
		return;
	pthread_mutex_lock(&wb->w_lock);
	wb->w_stop = true;
	pthread_cond_signal(&wb->w_work);
	pthread_mutex_unlock(&wb->w_lock);
	pthread_join(wb->w_thread, NULL);   /* it drains the queue first */
	wb_dropper_stop(wb);
	wb->w_running = false;
	if (wb->w_nerr)
		ORCH_ERR("write-behind: %zu files had write errors not reported to anyone",
			 wb->w_nerr);
	free(wb->w_err);
	pthread_cond_destroy(&wb->w_drop_work);
	pthread_cond_destroy(&wb->w_done);
	pthread_cond_destroy(&wb->w_work);
	pthread_mutex_destroy(&wb->w_lock);
}

/*
 * Did @e, just sent, go to a server on another connection than a write of
 * its file still in flight there?  That one may be sent again when it is
 * collected, after @e: its old connection broke (its leader died), or it
 * was not sent yet (no leader), and @e went on the next.  Under w_lock,
 * before @e is on the list.
 */
static bool wb_overtakes(const struct orch_mnt_wb *wb, const struct mnt_wb_ent *e)
{
	for (const struct mnt_wb_ent *o = wb->w_head; o; o = o->e_next) {
		if (o->e_handle != e->e_handle)
			continue;
		for (size_t i = 0; i < o->e_nsent; i++)
			for (size_t j = 0; j < e->e_nsent; j++)
				if (o->e_sent[i].server == e->e_sent[j].server &&
				    e->e_sent[j].gen && o->e_sent[i].gen != e->e_sent[j].gen)
					return true;
	}
	return false;
}

int orch_mnt_wb_write(struct orch_mnt *m, const struct orch_cred *cred,
		      const struct orch_attr *a, uint64_t off, const void *buf, size_t len,
		      bool sync)
{
	struct orch_mnt_wb *wb = &m->m_wb;
	struct mnt_wb_ent *e;
	bool overtakes, unknown;
	int error;

	if (!wb->w_running)
		return orch_fs_write(m->m_cl, cred, a, off, buf, len);
	if (sync) {
		error = orch_mnt_wb_wait(m, a->handle, true);
		return error ? error : orch_fs_write(m->m_cl, cred, a, off, buf, len);
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	pthread_mutex_lock(&wb->w_lock);
	/* Room for it, unless nothing is in flight (a write larger than the cap). */
	while (wb->w_bytes && wb->w_bytes + len > wb->w_max)
		pthread_cond_wait(&wb->w_done, &wb->w_lock);
	error = wb_err_take(wb, a->handle);
	if (error) {
		pthread_mutex_unlock(&wb->w_lock);
		free(e);
		return error;
	}
	wb->w_bytes += len;   /* reserved while it is sent, outside the lock */
	pthread_mutex_unlock(&wb->w_lock);
	/*
	 * The kernel sends one file's writes one at a time (the inode lock), so
	 * they reach each server in order; other files' writes go in parallel.
	 */
	error = orch_fs_write_send(m->m_cl, cred, a, off, buf, len, &e->e_io);
	/* Where it went unknown (no memory for the list): as if it overtook. */
	unknown = !error && orch_fs_write_sent(e->e_io, &e->e_sent, &e->e_nsent);
	pthread_mutex_lock(&wb->w_lock);
	if (error) {
		wb->w_bytes -= len;
		pthread_cond_broadcast(&wb->w_done);
		pthread_mutex_unlock(&wb->w_lock);
		wb_ent_free(e);
		return error;
	}
	e->e_handle = a->handle;
	e->e_bytes = len;
	e->e_claimed = false;
	e->e_next = NULL;
	overtakes = unknown || wb_overtakes(wb, e);
	if (wb->w_tail)
		wb->w_tail->e_next = e;
	else
		wb->w_head = e;
	wb->w_tail = e;
	wb->w_writes++;
	wb->w_overtaken += overtakes;
	pthread_cond_signal(&wb->w_work);
	pthread_mutex_unlock(&wb->w_lock);
	if (!overtakes)
		return 0;
	/*
	 * The older write, sent again later, would put its old bytes over
	 * these: once the file's writes are in (the older ones first, in
	 * order), these go again, answered before the kernel sends the next.
	 */
	orch_mnt_wb_wait(m, a->handle, false);
	return orch_fs_write(m->m_cl, cred, a, off, buf, len);
}

int orch_mnt_wb_wait(struct orch_mnt *m, uint64_t h, bool take_error)
{
	struct orch_mnt_wb *wb = &m->m_wb;
	int error = 0;

	if (!wb->w_running)
		return 0;
	pthread_mutex_lock(&wb->w_lock);
	if (wb_has(wb, h))
		wb->w_waits++;
	/* Collects what the reaper has not reached; waits for what others collect. */
	while (wb_has(wb, h)) {
		struct mnt_wb_ent *e = wb_unclaimed(wb, h);

		if (e) {
			e->e_claimed = true;
			wb_collect(m, e);
		} else {
			pthread_cond_wait(&wb->w_done, &wb->w_lock);
		}
	}
	if (take_error)
		error = wb_err_take(wb, h);
	pthread_mutex_unlock(&wb->w_lock);
	return error;
}

void orch_mnt_wb_counts(struct orch_mnt *m, struct orch_mnt_wb_counts *out)
{
	struct orch_mnt_wb *wb = &m->m_wb;

	memset(out, 0, sizeof(*out));
	if (!wb->w_running)
		return;
	pthread_mutex_lock(&wb->w_lock);
	out->max_bytes = wb->w_max;
	out->writes = wb->w_writes;
	out->waits = wb->w_waits;
	out->overtaken = wb->w_overtaken;
	out->in_flight = wb->w_bytes;
	pthread_mutex_unlock(&wb->w_lock);
}
