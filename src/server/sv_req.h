/*
 * The request core: a request being answered, and the reply every handler
 * sends through.  Ground floor: above the lease table (a reply grants
 * leases and lets the pushes queued for others leave first), below every
 * handler.  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_REQ_H
#define ORCH_SERVER_SV_REQ_H

#include <errno.h>

#include "server/sv.h"
#include "server/sv_ack.h"

/*
 * A request being answered.  Handlers that finish at once reply through
 * sv_reply(); those that wait (fsync, cross-server) keep the sv_req and reply
 * later; sv_reply() frees it.  The connection is referenced so it outlives
 * the wait; if it closed meanwhile the reply is dropped.  A client's
 * request is owed on its connection (orch_conn_owe) until answered, so one
 * that sends requests the loop answers later stops being read past the
 * output cap like one that reads no reply.  A peer server's is not: its
 * requests may wait on our calls to it, which the same count on its side
 * could hold back while it waits on us.
 */
struct sv_req {
	struct sv_server *r_sv;
	struct orch_conn *r_conn;
	uint16_t r_type;
	uint64_t r_reqid;
	uint64_t r_deadline_ms;       /* give up waiting for a peer after this */
	uint64_t r_start_ns;          /* its frame arrived (for the latency histograms) */
	struct orch_frame_hdr r_hdr;  /* of the request */
	const uint8_t *r_raw;         /* its payload: valid only while dispatched */
	uint64_t r_lease_dir;         /* directory whose entries the reply leases; 0: none */
	unsigned int r_nowners;       /* owners fetched for the sticky rule */
	struct {
		uint64_t handle;
		uint32_t uid;
	} r_owners[2];
	uint64_t r_need_owner;        /* the inode whose owner a handler asked for */
	/*
	 * Owed on r_conn until sv_reply().  One dropped off the loop (the data
	 * worker or admin thread could not post its reply) keeps its charge
	 * until the connection closes.
	 */
	bool r_owed;
	/* The other holders whose acknowledgement the reply waits for (sv_ack.h). */
	struct sv_ack_waits r_waits;
	/*
	 * A reply made while a change runs in the replica group's capture
	 * (sv->s_hold set, sv_ns.h) is encoded into r_held and kept on that
	 * change's list (r_held_next) until its entry is applied:
	 * sv_req_release().
	 */
	bool r_held_set;
	struct orch_buf r_held;
	struct sv_req *r_held_next;
	/*
	 * While the change its handler made waits for its entry: where its
	 * reply is kept if it comes first, from wherever (a writers' round
	 * answered by peers before the entry is applied).
	 */
	struct sv_req **r_hold_on;
	/*
	 * Passed the file-data gate (sv_gate.h), or waits there for the
	 * followers to hold the store operations sent up to r_gate_seq.
	 */
	bool r_gated;
	uint64_t r_gate_seq;
	/*
	 * Sent exactly once (ORCH_FRAME_SEQ): the client's ids, which the
	 * replica group records its result under (sv_ns.c).  r_seq 0: not.
	 */
	uint64_t r_client, r_seq, r_done_below;
};

/*
 * The status of the reply kept for held request @r (r_held_set): 0 or
 * -errno; -EIO if it could not be encoded.
 */
int sv_req_held_status(const struct sv_req *r);

/* Allocates a pending request for frame @h on @c.  NULL on ENOMEM. */
struct sv_req *sv_req_create(struct sv_server *sv, struct orch_conn *c,
			     const struct orch_frame_hdr *h);
/*
 * Sends @m (type/reqid/flags filled in from @r) and frees @r.  Counts the
 * reply: its latency by type, and its status's errno if it is an error.
 * A reply that must wait for other holders' acknowledgements (r_waits)
 * is encoded and parked (sv_ack_park), and leaves when they are met.
 */
void sv_reply(struct sv_req *r, struct orch_msg *m);
/* Sends a status-only reply and frees @r. */
void sv_reply_status(struct sv_req *r, int status);

/*
 * Sends the reply kept for held request @r (r_held_set), as sv_reply()
 * would have (leases, acknowledgements), or with @error that status
 * instead, and frees @r.
 */
void sv_req_release(struct sv_req *r, int error);

/*
 * A request handler, one per message (msg.def; sv_dispatch.c calls it):
 * answers @r through sv_reply() now, or keeps it and answers later, and
 * returns 0; or returns sv_req_need_owner(), with @r kept and unanswered.
 */
typedef int sv_handler_fn(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);

/*
 * The sticky-directory rule needs the owner of @child, an inode held on
 * another server.  A handler returns this, with nothing left open and @r
 * not answered; the dispatcher then fetches the owner from that server and
 * handles the request again from the start with the owner known (meta.h,
 * orch_meta_remote_owner_set), up to ORCH_ARRAY_SIZE(r_owners) times.
 * Handlers never call up into the dispatcher.
 */
static inline int sv_req_need_owner(struct sv_req *r, uint64_t child)
{
	r->r_need_owner = child;
	return -EREMOTE;
}

#endif
