/*
 * The reverse-map tools and the admin thread (sv_admin.c): AD2SV_FSMAP and
 * AD2SV_NAMES, scrubs, bad blocks turned into file paths, and the sweeps
 * of orphaned data objects.  Above the peer transport and the request
 * core.  The handlers are loop-thread only.
 */
#ifndef ORCH_SERVER_SV_ADMIN_H
#define ORCH_SERVER_SV_ADMIN_H

#include "server/sv.h"

/*
 * Makes the admin state (sv->s_admin), starts the admin thread (scrubs,
 * bad-block reports, sweeps) and registers the store's bad-block hook.
 * After the store and the loop exist, before the loop runs.  0 or -errno:
 * then there is no admin state, and scrubs answer ENOSYS.
 */
int sv_admin_start(struct sv_server *sv);
/* Stops the thread; a scrub in progress is cancelled.  Loop thread, loop stopped. */
void sv_admin_stop(struct sv_server *sv);
/* Frees the admin state, after the store closed (its bad-block hook may fire until then). */
void sv_admin_fini(struct sv_server *sv);
/* Handlers (sv_req.h), loop thread. */
int sv_admin_fsmap(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_admin_names(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_admin_scrub(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/*
 * SV2SV_RECLAIM from a peer: sweep this server's objects of files whose
 * inode it held, deleting those whose inode it no longer has (in the
 * background, on the admin thread).  Answered at once.
 */
int sv_admin_reclaim_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* Data objects the sweeps deleted since start (stats). */
uint64_t sv_admin_reclaimed(const struct sv_server *sv);
/* Data objects whose dead bytes past the size a sweep had cut (stats). */
uint64_t sv_admin_cut(const struct sv_server *sv);

#endif
