/* Data writes through the store's queue (CL2SV_WRITE, SV2SV_WRITE).  See sv_write.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "server/flush.h"
#include "server/sv_mirror.h"
#include "server/sv_req.h"
#include "server/sv_write.h"

/*
 * Writes go through the store's queue: its writer thread applies many per
 * transaction when they queue up, and the loop goes on meanwhile.  The done
 * callback runs on the writer thread, so it only links the write into
 * s_writes.w_done and posts one drain to the loop if none is pending: a
 * burst of completions costs one wakeup and one small allocation.  Order:
 * the store applies operations in submit order, and its synchronous calls
 * (truncate, punch, delete) wait for those queued before them, so an
 * operation a client sends after a write was acknowledged sees it.
 */
#define SV_WRITES_QUEUED_MAX (256ull << 20)

struct sv_write {
	struct orch_store_op w_op;
	struct sv_server *w_sv;
	struct sv_req *w_req;
	struct sv_write *w_next;  /* in s_writes.w_done */
	uint8_t w_data[];         /* the op's buffer */
};

void sv_writes_init(struct sv_server *sv)
{
	struct sv_writes *ws = &sv->s_writes;

	pthread_mutex_init(&ws->w_lock, NULL);
	pthread_cond_init(&ws->w_cv, NULL);
	ws->w_done = NULL;
	ws->w_posted = false;
	ws->w_completed = ws->w_submitted = ws->w_answered = ws->w_bytes = 0;
}

void sv_writes_fini(struct sv_server *sv)
{
	pthread_mutex_destroy(&sv->s_writes.w_lock);
	pthread_cond_destroy(&sv->s_writes.w_cv);
}

/* Loop thread: answers every write that completed. */
static void sv_writes_drain(void *arg)
{
	struct sv_server *sv = arg;
	struct sv_writes *ws = &sv->s_writes;
	struct sv_write *list, *rev = NULL;

	pthread_mutex_lock(&ws->w_lock);
	list = ws->w_done;
	ws->w_done = NULL;
	ws->w_posted = false;
	pthread_mutex_unlock(&ws->w_lock);
	while (list) {  /* oldest first */
		struct sv_write *next = list->w_next;

		list->w_next = rev;
		rev = list;
		list = next;
	}
	while (rev) {
		struct sv_write *w = rev;

		rev = w->w_next;
		ws->w_bytes -= w->w_op.len;
		ws->w_answered++;
		if (!w->w_op.status)
			sv_flusher_dirty(sv);
		sv_reply_status(w->w_req, w->w_op.status);
		free(w);
	}
}

/* The store's writer thread, after the commit. */
static void sv_write_done(struct orch_store_op *op)
{
	struct sv_write *w = op->arg;
	struct sv_server *sv = w->w_sv;
	struct sv_writes *ws = &sv->s_writes;
	bool post;

	pthread_mutex_lock(&ws->w_lock);
	w->w_next = ws->w_done;
	ws->w_done = w;
	post = !ws->w_posted;
	ws->w_posted = true;
	pthread_mutex_unlock(&ws->w_lock);
	/* A loop that has stopped still runs it (orch_ev_run_posts), and
	 * sv_writes_wait drains as well. */
	if (post)
		orch_ev_post(sv->s_ev, sv_writes_drain, sv);
	/* Counted last: once sv_writes_wait sees it, this thread is done with the loop. */
	pthread_mutex_lock(&ws->w_lock);
	ws->w_completed++;
	pthread_cond_broadcast(&ws->w_cv);
	pthread_mutex_unlock(&ws->w_lock);
}

void sv_write_submit(struct sv_server *sv, struct sv_req *r, uint64_t h, uint64_t off,
		     const void *data, size_t len)
{
	struct sv_writes *ws = &sv->s_writes;
	struct sv_write *w;

	if (ws->w_bytes + len > SV_WRITES_QUEUED_MAX) {
		int error = sv_store_write(sv, h, off, data, len);

		if (!error)
			sv_flusher_dirty(sv);
		sv_reply_status(r, error);
		return;
	}
	w = malloc(sizeof(*w) + len);
	if (!w) {
		sv_reply_status(r, -ENOMEM);
		return;
	}
	if (len)
		memcpy(w->w_data, data, len);
	w->w_op = (struct orch_store_op){
		.type = ORCH_STORE_OP_WRITE,
		.handle = h,
		.off = off,
		.len = len,
		.buf = w->w_data,
		.done = sv_write_done,
		.arg = w,
	};
	w->w_sv = sv;
	w->w_req = r;
	w->w_next = NULL;
	ws->w_submitted++;
	ws->w_bytes += len;
	orch_store_submit(sv->s_store, &w->w_op);
	/* Into the stream in the order of the store's queue (sv_mirror.h). */
	sv_mirror_write(sv, h, off, w->w_data, len);
}

void sv_writes_wait(struct sv_server *sv)
{
	struct sv_writes *ws = &sv->s_writes;

	pthread_mutex_lock(&ws->w_lock);
	while (ws->w_completed != ws->w_submitted)
		pthread_cond_wait(&ws->w_cv, &ws->w_lock);
	pthread_mutex_unlock(&ws->w_lock);
	sv_writes_drain(sv);
}
