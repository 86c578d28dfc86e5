/*
 * Data writes queued to the store's writer thread, each answered on the
 * loop thread once it completed.  The queue's state is struct sv_writes
 * in struct sv_server.  Above the request core and the flusher (a write
 * that succeeded marks the server dirty), below the handlers.
 */
#ifndef ORCH_SERVER_SV_WRITE_H
#define ORCH_SERVER_SV_WRITE_H

#include "server/sv.h"

/* Before the loop runs. */
void sv_writes_init(struct sv_server *sv);
/*
 * Writes @len bytes of @data (copied: it may be the request frame's
 * payload) at @off of object @h, queued to the store's writer thread, and
 * answers @r with the status on the loop thread once the write completed.
 * Past 256 MiB queued (SV_WRITES_QUEUED_MAX), writes synchronously, so
 * a flood of writes waits on the loop rather than filling memory.  Loop
 * thread.
 */
void sv_write_submit(struct sv_server *sv, struct sv_req *r, uint64_t h, uint64_t off,
		     const void *data, size_t len);
/*
 * Waits until every queued write has completed, and answers them (replies
 * to closed connections are dropped).  Loop thread, after the loop stopped
 * and before the store closes and the loop is destroyed.
 */
void sv_writes_wait(struct sv_server *sv);
/*
 * Frees what sv_writes_init set up: after sv_writes_wait() and after the
 * loop's posts ran or were dropped (orch_ev_run_posts, orch_ev_destroy).
 */
void sv_writes_fini(struct sv_server *sv);

#endif
