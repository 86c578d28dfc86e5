/*
 * The dispatcher (sv_dispatch.c): the on_frame of every connection, client
 * or peer.  Loop thread.
 */
#ifndef ORCH_SERVER_SV_DISPATCH_H
#define ORCH_SERVER_SV_DISPATCH_H

#include "server/sv.h"

/* Handles one authenticated frame: a request or, from a peer, a reply. */
void sv_dispatch_frame(struct orch_conn *c, const struct orch_frame_hdr *h,
		       const uint8_t *payload);

#endif
