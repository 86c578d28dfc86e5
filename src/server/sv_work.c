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

#include "common/log.h"
#include "server/sv.h"
#include "server/sv_req.h"

struct sv_job {
	struct sv_job *j_next;
	struct sv_server *j_sv;
	struct sv_req *j_req;
	sv_work_fn j_fn;
	struct orch_msg j_msg;   /* the request: scalars only */
	struct orch_msg j_rep;   /* the reply: scalars only */
};

static struct {
	pthread_mutex_t w_lock;
	pthread_cond_t w_cv;
	struct sv_job *w_head, *w_tail;
	bool w_started, w_stop;
	pthread_t w_thread;
} work_state = { .w_lock = PTHREAD_MUTEX_INITIALIZER, .w_cv = PTHREAD_COND_INITIALIZER };

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
static void work_gate(void)
{
	static const char *path;
	static bool checked, open_for_good;
	static int fd = -1;
	char c;

	if (!checked) {   /* the worker thread only */
		path = getenv("ORCH_TEST_WORK_GATE");
		checked = true;
	}
	if (!path || !*path || open_for_good)
		return;
	if (fd < 0)
		fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || read(fd, &c, 1) != 1) {
		if (fd >= 0)
			close(fd);
		fd = -1;
		open_for_good = true;   /* the writer went away */
	}
}

static void *work_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&work_state.w_lock);
	for (;;) {
		struct sv_job *j;

		while (!work_state.w_head && !work_state.w_stop)
			pthread_cond_wait(&work_state.w_cv, &work_state.w_lock);
		j = work_state.w_head;
		if (!j)
			break;
		work_state.w_head = j->j_next;
		if (!work_state.w_head)
			work_state.w_tail = NULL;
		pthread_mutex_unlock(&work_state.w_lock);
		work_gate();
		orch_msg_init(&j->j_rep, 0);
		j->j_fn(j->j_sv, &j->j_msg, &j->j_rep);
		if (orch_ev_post(j->j_sv->s_ev, work_done, j)) {
			/* The loop is gone: nobody is left to answer. */
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "data worker: a reply was dropped");
			orch_conn_put(j->j_req->r_conn);
			free(j->j_req);
			free(j);
		}
		pthread_mutex_lock(&work_state.w_lock);
	}
	pthread_mutex_unlock(&work_state.w_lock);
	return NULL;
}

int sv_work_start(struct sv_server *sv)
{
	int error;

	(void)sv;
	work_state.w_stop = false;
	error = -pthread_create(&work_state.w_thread, NULL, work_main, NULL);
	if (!error)
		work_state.w_started = true;
	return error;
}

void sv_work_stop(struct sv_server *sv)
{
	(void)sv;
	if (!work_state.w_started)
		return;
	pthread_mutex_lock(&work_state.w_lock);
	work_state.w_stop = true;
	pthread_cond_signal(&work_state.w_cv);
	pthread_mutex_unlock(&work_state.w_lock);
	/* It finishes what was queued; the replies run with the loop's last posts. */
	pthread_join(work_state.w_thread, NULL);
	work_state.w_started = false;
}

void sv_work_submit(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m,
		    sv_work_fn fn)
{
	struct sv_job *j;

	if (!work_state.w_started) {
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
	pthread_mutex_lock(&work_state.w_lock);
	if (work_state.w_tail)
		work_state.w_tail->j_next = j;
	else
		work_state.w_head = j;
	work_state.w_tail = j;
	pthread_cond_signal(&work_state.w_cv);
	pthread_mutex_unlock(&work_state.w_lock);
}
