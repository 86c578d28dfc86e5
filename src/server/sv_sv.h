/*
 * The requests other servers send us (sv_sv.c): the peer steps of their
 * intents, each idempotent and answered once durable.  A handler file:
 * above the intent machine and the flusher.  Loop thread.
 */
#ifndef ORCH_SERVER_SV_SV_H
#define ORCH_SERVER_SV_SV_H

#include "server/sv.h"

/*
 * Handles a SV2SV_* request from another server.  0, or -EREMOTE with @r
 * kept: the sticky rule needs an owner (sv_req_need_owner).
 */
int sv_sv_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);

#endif
