/*
 * The data worker (sv_work.c): a thread for the client requests that read
 * or remap many blocks of the store, so the loop goes on meanwhile.  Above
 * the request core, below the data handlers.
 */
#ifndef ORCH_SERVER_SV_WORK_H
#define ORCH_SERVER_SV_WORK_H

#include "server/sv.h"

/* Computes the reply @rep (initialised, status 0) to request @m, on the worker. */
typedef void (*sv_work_fn)(struct sv_server *sv, const struct orch_msg *m, struct orch_msg *rep);
/*
 * Starts the thread (sv->s_worker).  After the store and the loop exist.
 * 0 or -errno: then there is no worker, and jobs run on the loop.
 */
int sv_work_start(struct sv_server *sv);
/*
 * Runs what is queued, then stops and frees the worker; the replies go out
 * with the loop's last posts.
 */
void sv_work_stop(struct sv_server *sv);
/*
 * Runs @fn for @m, a CL2SV_COPY_RANGE or CL2SV_DEDUPE (its fields are
 * copied; no pointer into the frame is carried), on the worker and answers
 * @r with its reply on the loop.  Without a worker, runs it at once.  Loop
 * thread.
 */
void sv_work_submit(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m,
		    sv_work_fn fn);

#endif
