/*
 * The peer transport: calls on other servers over connections we open to
 * them, each completed exactly once on the loop thread.  Ground floor: it
 * calls nothing else of the server; the frames peers send on these
 * connections go to the on_frame of the ops main.c gives it.  Loop thread
 * only.
 */
#ifndef ORCH_SERVER_SV_PEER_H
#define ORCH_SERVER_SV_PEER_H

#include "server/sv.h"

/* A frame on a connection (struct orch_conn_ops.on_frame). */
typedef void (*sv_frame_fn)(struct orch_conn *c, const struct orch_frame_hdr *h,
			    const uint8_t *payload);

/*
 * After the loop exists; connects lazily, at the first call.  Frames the
 * peers send on these connections that are not replies to our calls go
 * to @on_frame (the dispatcher).  0 or -ENOMEM.
 */
int sv_peers_init(struct sv_server *sv, sv_frame_fn on_frame);
/* Closes the connections and fails every call in flight with -ESHUTDOWN. */
void sv_peers_fini(struct sv_server *sv);

/* Completion of a request to a peer: @rep is NULL with @error on failure. */
typedef void (*sv_peer_cb)(struct sv_server *sv, void *arg, int error,
			   const struct orch_msg *rep);

/*
 * Sends @m to server @peer; @cb runs exactly once on the loop thread, with
 * the reply or an error (-EHOSTDOWN if the peer cannot be reached, or is a
 * group whose member went silent, -EIO if the connection breaks,
 * -ETIMEDOUT after op_timeout_ms).
 */
void sv_peer_call(struct sv_server *sv, unsigned int peer, struct orch_msg *m,
		  sv_peer_cb cb, void *arg);
/* A reply frame from a peer connection we opened. */
void sv_peer_reply(struct sv_server *sv, struct orch_conn *c,
		   const struct orch_frame_hdr *h, const uint8_t *payload);

/*
 * Bytes moved so far on peer connections still open (clients': sv_conns.h);
 * closed ones are already in s_bytes_in/out.
 */
void sv_peers_bytes(struct sv_server *sv, uint64_t *in, uint64_t *out);

#endif
