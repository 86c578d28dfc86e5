/*
 * The data worker: a thread for client requests that read or remap many
 * blocks of the store (dedupe, copies and clones that stay on this server),
 * so that the loop keeps answering everyone else meanwhile.  A dedupe of
 * 64 MiB reads 128 MiB to compare; on the loop it would stall every client
 * of the server for as long.
 *
 * Jobs run one at a time, in the order submitted; each carries a copy of
 * its request's scalar fields (the frame's payload is gone once the
 * handler returns) and its sv_req, whose reply is posted back to the loop.
 * The store's calls are safe from any thread; the worker touches nothing
 * else of the server but the flusher's atomic dirty flag.  A client waits
 * for its reply before it sends what depends on it, so running beside the
 * loop reorders nothing a client could see.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/log.h"
#include "server/sv.h"
#include "server/sv_req.h"
#include "server/sv_work.h"

struct sv_job {
	struct sv_job *j_next;
	struct sv_server *j_sv;
	struct sv_req *j_req;
	sv_work_fn j_fn;
	struct orch_msg j_msg;   /* the request: scalars only */
	struct orch_msg j_rep;   /* the reply: scalars only */
};

/* The data worker of one server (sv->s_worker). */
struct sv_worker {
	pthread_mutex_t w_lock;
	pthread_cond_t w_cv;
	struct sv_job *w_head, *w_tail; /* protected by w_lock: queued jobs */
	bool w_stop;                    /* protected by w_lock */
	pthread_t w_thread;
	/* The test gate (work_gate), worker thread only. */
	const char *w_gate_path;        /* ORCH_TEST_WORK_GATE */
	int w_gate_fd;
	bool w_gate_gone;               /* the FIFO's writer went away: no more gating */
};

/* On the loop: answers the request. */
static void work_done(void *arg)
{
	struct sv_job *j = arg;

	sv_reply(j->j_req, &j->j_rep);
	free(j);
}

/*
 * Test hook: with ORCH_TEST_WORK_GATE naming a FIFO, each job waits for one
 * byte from it, so a test can hold a job and see the loop answer meanwhile.
 */
static void work_gate(struct sv_worker *wk)
{
	char c;

	if (!wk->w_gate_path || !*wk->w_gate_path || wk->w_gate_gone)
		return;
	if (wk->w_gate_fd < 0)
		wk->w_gate_fd = open(wk->w_gate_path, O_RDONLY | O_CLOEXEC);
	if (wk->w_gate_fd < 0 || read(wk->w_gate_fd, &c, 1) != 1) {
		if (wk->w_gate_fd >= 0)
			close(wk->w_gate_fd);
		wk->w_gate_fd = -1;
		wk->w_gate_gone = true;   /* the writer went away */
	}
}

static void *work_main(void *arg)
{
	struct sv_worker *wk = arg;

	pthread_mutex_lock(&wk->w_lock);
	for (;;) {
		struct sv_job *j;

		while (!wk->w_head && !wk->w_stop)
			pthread_cond_wait(&wk->w_cv, &wk->w_lock);
		j = wk->w_head;
		if (!j)
			break;
		wk->w_head = j->j_next;
		if (!wk->w_head)
			wk->w_tail = NULL;
		pthread_mutex_unlock(&wk->w_lock);
		work_gate(wk);
		orch_msg_init(&j->j_rep, 0);
		j->j_fn(j->j_sv, &j->j_msg, &j->j_rep);
		orch_ev_post(j->j_sv->s_ev, work_done, j);
		pthread_mutex_lock(&wk->w_lock);
	}
	pthread_mutex_unlock(&wk->w_lock);
	return NULL;
}

int sv_work_start(struct sv_server *sv)
{
	struct sv_worker *wk = calloc(1, sizeof(*wk));
	int error;

	if (!wk)
		return -ENOMEM;
	pthread_mutex_init(&wk->w_lock, NULL);
	pthread_cond_init(&wk->w_cv, NULL);
	wk->w_gate_path = orch_fault_env(ORCH_FAULT_WORK_GATE);
	wk->w_gate_fd = -1;
	error = -pthread_create(&wk->w_thread, NULL, work_main, wk);
	if (error) {
		pthread_mutex_destroy(&wk->w_lock);
		pthread_cond_destroy(&wk->w_cv);
		free(wk);
		return error;
	}
	sv->s_worker = wk;
	return 0;
}

void sv_work_stop(struct sv_server *sv)
{
	struct sv_worker *wk = sv->s_worker;

	if (!wk)
		return;
	pthread_mutex_lock(&wk->w_lock);
	wk->w_stop = true;
	pthread_cond_signal(&wk->w_cv);
	pthread_mutex_unlock(&wk->w_lock);
	/* It finishes what was queued; the replies run with the loop's last posts. */
	pthread_join(wk->w_thread, NULL);
	if (wk->w_gate_fd >= 0)
		close(wk->w_gate_fd);
	pthread_mutex_destroy(&wk->w_lock);
	pthread_cond_destroy(&wk->w_cv);
	free(wk);
	sv->s_worker = NULL;
}

void sv_work_submit(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m,
		    sv_work_fn fn)
{
	struct sv_worker *wk = sv->s_worker;
	struct sv_job *j;

	if (!wk) {
		struct orch_msg rep;

		orch_msg_init(&rep, 0);
		fn(sv, m, &rep);   /* no thread: on the loop, as before */
		sv_reply(r, &rep);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		sv_reply_status(r, -ENOMEM);
		return;
	}
	j->j_sv = sv;
	j->j_req = r;
	j->j_fn = fn;
	/*
	 * The fields of CL2SV_COPY_RANGE and CL2SV_DEDUPE ("chLHYoQs[f]"),
	 * all held by value: a copy of the whole message would carry pointers
	 * into the frame, which does not outlive the handler.
	 */
	orch_msg_init(&j->j_msg, m->type);
	j->j_msg.cred = m->cred;
	j->j_msg.handle = m->handle;
	j->j_msg.layout = m->layout;
	j->j_msg.handle2 = m->handle2;
	j->j_msg.layout2 = m->layout2;
	j->j_msg.offset = m->offset;
	j->j_msg.offset2 = m->offset2;
	j->j_msg.size = m->size;
	j->j_msg.flags32 = m->flags32;
	pthread_mutex_lock(&wk->w_lock);
	if (wk->w_tail)
		wk->w_tail->j_next = j;
	else
		wk->w_head = j;
	wk->w_tail = j;
	pthread_cond_signal(&wk->w_cv);
	pthread_mutex_unlock(&wk->w_lock);
}
