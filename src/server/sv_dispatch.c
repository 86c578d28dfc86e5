/*
 * The dispatcher: every frame of every connection (clients, the admin CLI,
 * other servers) comes here.  It decodes the frame, refuses what no
 * handler may see (malformed frames, handles of servers the cluster does
 * not have, server requests from a client, flag bits flags.def does not
 * list), hands replies to our own calls to the peer transport, and calls
 * the handler msg.def names for the request's type.  The top floor of the
 * server but for main.c.  Loop thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "server/intent.h"
#include "server/sv.h"
#include "server/sv_ack.h"
#include "server/sv_admin.h"
#include "server/sv_cl.h"
#include "server/sv_data.h"
#include "server/sv_dispatch.h"
#include "server/sv_mirror.h"
#include "server/sv_peer.h"
#include "server/sv_ns.h"
#include "server/sv_req.h"
#include "server/sv_stats.h"
#include "server/sv_sv.h"
#include "server/sv_writers.h"

static void sv_count(struct sv_server *sv, uint16_t type)
{
	int i = orch_msg_index(type);

	if (i >= 0 && i < SV_MSG_TYPES_MAX)
		sv->s_requests[i]++;
}

static void sv_unknown(struct orch_conn *c, const struct orch_frame_hdr *h)
{
	struct orch_msg rep;

	orch_msg_init(&rep, ORCH_AN2AN_UNKNOWN);
	rep.flags = ORCH_FRAME_REPLY;
	rep.reqid = h->reqid;
	rep.status = -ENOSYS;
	orch_conn_send(c, &rep);
}

/* --- The dispatch table, from msg.def -------------------------------------------------------- */

/* Whose requests of a type a server serves: msg.def's "from". */
enum sv_from {
	SV_FROM_ANY,    /* every authenticated connection */
	SV_FROM_SERVER, /* other servers only: a client is answered PERM */
	SV_FROM_CONN,   /* nobody: the handshake's and UNKNOWN, answered AN2AN_UNKNOWN */
	SV_FROM_PUSH,   /* nobody: what servers push to clients, answered NOSYS */
	SV_FROM_ONEWAY, /* a client's, never answered: sv_dispatch_frame takes it */
};

/* One per message, in msg.def's order (orch_msg_index). */
static const struct sv_route {
	sv_handler_fn *rt_handler; /* NULL: not served (CONN, PUSH) */
	enum sv_from rt_from;
} sv_routes[] = {
#define ORCH_MSG(name, num, from, handler, lease, log, req, rep) { handler, SV_FROM_##from },
#include "proto/msg.def"
#undef ORCH_MSG
};

/* The route of @type, or NULL for a type msg.def does not have. */
static const struct sv_route *sv_route(uint16_t type)
{
	int i = orch_msg_index(type);

	return i >= 0 && (size_t)i < ORCH_ARRAY_SIZE(sv_routes) ? &sv_routes[i] : NULL;
}

/*
 * Calls the handler of @m's type, if its connection may send it and its
 * flag word sets no bit the handler does not know.  0 once
 * @r is answered or kept; -EREMOTE with @r kept, to fetch the owner of
 * r->r_need_owner (sv_req_need_owner).
 */
static int sv_dispatch(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	const struct sv_route *rt = sv_route(m->type);
	struct sv_req *prev_acting;
	char dir;
	int rc;

	if (!rt || !rt->rt_handler) {
		sv_reply_status(r, -ENOSYS);
		return 0;
	}
	if (rt->rt_from == SV_FROM_SERVER && r->r_conn->c_origin >= sv->s_cfg.nservers) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "server request from a client: peer=%s type=%s",
				   r->r_conn->c_peer, orch_msg_name(m->type));
		sv_reply_status(r, -EPERM);
		return 0;
	}
	/* A bit flags.def does not list, in a word that refuses them. */
	if (orch_msg_check_flags(m)) {
		sv_reply_status(r, -EINVAL);
		return 0;
	}
	orch_msg_lease(m->type, &dir, NULL);
	r->r_lease_dir = orch_msg_handle(m, dir);
	/* Saved and restored: a handler never runs inside another today, but could. */
	prev_acting = sv->s_acting;
	sv->s_acting = r;
	rc = rt->rt_handler(sv, r, m);
	sv->s_acting = prev_acting;
	return rc;
}

/* --- The owner of an inode held elsewhere, for the sticky rule ------------------------------- */

struct owner_fetch {
	struct sv_req *of_req;
	uint64_t of_child;
	uint8_t *of_payload; /* copy of the request's */
};

static void sv_dispatch_owned(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m,
			      const uint8_t *payload);

static void sv_owner_fetched(struct sv_server *sv, void *arg, int error,
			     const struct orch_msg *rep)
{
	struct owner_fetch *of = arg;
	struct sv_req *r = of->of_req;
	struct orch_msg m;

	if (!error) {
		r->r_owners[r->r_nowners].handle = of->of_child;
		r->r_owners[r->r_nowners].uid = rep->attr.uid;
		r->r_nowners++;
		error = orch_msg_decode(&r->r_hdr, of->of_payload, &m);
	}
	if (error) {
		/*
		 * The owner's group could not answer (down, or electing, or the
		 * member asked did not lead): nothing was done, and a request
		 * sent exactly once is asked again.
		 */
		if (error == -EHOSTDOWN)
			error = r->r_seq ? -ORCH_ERETRY : -EIO;
		sv_reply_status(r, error);
	} else {
		sv_dispatch_owned(sv, r, &m, of->of_payload);
		orch_msg_fini(&m);
	}
	free(of->of_payload);
	free(of);
}

/*
 * A handler asked for the owner of @child (sv_req_need_owner): fetch it
 * from the inode's server, then handle @r again from the start, with a
 * copy of its payload, the owner known.
 */
static void sv_owner_fetch(struct sv_server *sv, struct sv_req *r, uint64_t child)
{
	struct owner_fetch *of;
	struct orch_msg m;

	if (r->r_nowners == ORCH_ARRAY_SIZE(r->r_owners) || !r->r_raw) {
		sv_reply_status(r, -EPERM);
		return;
	}
	of = calloc(1, sizeof(*of));
	if (of)
		of->of_payload = malloc(r->r_hdr.length ? r->r_hdr.length : 1);
	if (!of || !of->of_payload) {
		free(of);
		sv_reply_status(r, -ENOMEM);
		return;
	}
	memcpy(of->of_payload, r->r_raw, r->r_hdr.length);
	of->of_req = r;
	of->of_child = child;
	r->r_raw = NULL;
	orch_msg_init(&m, ORCH_CL2SV_GETATTR);
	m.handle = child;
	sv_peer_call(sv, orch_handle_server(child), &m, sv_owner_fetched, of);
}

/* --- Changes through the replica group ------------------------------------------------------ */

/*
 * Dispatches with the owners fetched so far known to the sticky rule;
 * sv_dispatch's return (@r may be gone unless it is -EREMOTE).
 */
static int sv_dispatch_with_owners(struct sv_server *sv, struct sv_req *r,
				   const struct orch_msg *m, const uint8_t *payload)
{
	int rc;

	for (unsigned int i = 0; i < r->r_nowners; i++)
		orch_meta_remote_owner_set(sv->s_meta, r->r_owners[i].handle, r->r_owners[i].uid);
	r->r_raw = payload;
	rc = sv_dispatch(sv, r, m);
	orch_meta_remote_owner_clear(sv->s_meta);
	return rc;
}

/* The request's payload, copied: the change runs after its frame is gone. */
struct change_payload {
	uint8_t *cp_bytes;
};

/* In the group's capture: decodes the copy and runs the handler. */
static int sv_change_run(struct sv_server *sv, struct sv_req *r, void *arg)
{
	struct change_payload *cp = arg;
	struct orch_msg m;
	int rc;

	rc = orch_msg_decode(&r->r_hdr, cp->cp_bytes, &m);
	if (rc) {
		sv_reply_status(r, rc);
		return 0;
	}
	rc = sv_dispatch_with_owners(sv, r, &m, cp->cp_bytes);
	orch_msg_fini(&m);
	return rc;
}

/*
 * A retry of request @r that the group applied at its first try (sv_ns.h,
 * SV_NS_REPLAYED): answered as that try was, from the namespace as it is
 * now.  A reply with attributes reads them again; one with an entry looks
 * the name up; one whose name is not there yet is asked again.
 */
static void sv_change_replay(struct sv_server *sv, struct sv_req *r, const uint8_t *payload)
{
	struct orch_msg m;
	int error;

	error = orch_msg_decode(&r->r_hdr, payload, &m);
	if (error) {
		sv_reply_status(r, error);
		return;
	}
	switch (m.type) {
	case ORCH_CL2SV_SETATTR:
		/*
		 * A size change is answered once its data is cut on every group
		 * (a TRUNCATE intent): until then, ask again.
		 */
		if ((m.valid & ORCH_SET_SIZE) &&
		    sv_intent_running_on(sv, SV_INTENT_TRUNCATE, m.handle)) {
			sv_reply_status(r, -ORCH_ERETRY);
			break;
		}
		/* fall through */
	case ORCH_CL2SV_EXTEND:
	case ORCH_CL2SV_WRITERS:                          /* a release or close (orch_msg_numbered) */
		sv_cl_getattr(sv, r, &m);                 /* reply: a:attr (epoch 0) */
		break;
	case ORCH_CL2SV_LINK:
		m.parent = m.newparent;
		m.name = m.name2;
		/* fall through */
	case ORCH_CL2SV_CREATE:
	case ORCH_CL2SV_MKDIR: {
		struct orch_dirent e;

		/*
		 * Not there: its first try waits for another group still (an
		 * intent, whose answer the record does not hold), or failed
		 * there: ask again shortly.
		 */
		if (orch_meta_lookup(sv->s_meta, &m.cred, m.parent, m.name.s, m.name.len, &e)) {
			sv_reply_status(r, -ORCH_ERETRY);
			break;
		}
		sv_cl_lookup(sv, r, &m);                  /* reply: e:entry (b:existed false) */
		break;
	}
	default:
		sv_reply_status(r, 0);                    /* status only */
		break;
	}
	orch_msg_fini(&m);
}

static void sv_change_done(struct sv_server *sv, struct sv_req *r, void *arg, int rc, int error)
{
	struct change_payload *cp = arg;

	if (!error && rc == SV_NS_REPLAYED)
		sv_change_replay(sv, r, cp->cp_bytes);
	if (!error && rc == -EREMOTE) {
		r->r_raw = cp->cp_bytes;
		sv_owner_fetch(sv, r, r->r_need_owner); /* copies the payload */
	}
	free(cp->cp_bytes);
	free(cp);
}

/* Hands request @r (its frame's @payload) to the group; answers it if it cannot. */
static void sv_change_submit(struct sv_server *sv, struct sv_req *r, const uint8_t *payload)
{
	struct change_payload *cp = calloc(1, sizeof(*cp));
	int error = -ENOMEM;

	if (cp)
		cp->cp_bytes = malloc(r->r_hdr.length ? r->r_hdr.length : 1);
	if (cp && cp->cp_bytes) {
		memcpy(cp->cp_bytes, payload, r->r_hdr.length);
		error = sv_ns_submit(sv, r, sv_change_run, sv_change_done, cp);
		if (!error)
			return;
		free(cp->cp_bytes);
	}
	free(cp);
	sv_reply_status(r, error);
}

/* Dispatches with the owners fetched so far known to the sticky rule. */
static void sv_dispatch_owned(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m,
			      const uint8_t *payload)
{
	if (sv_ns_replicated(sv) && orch_msg_changes_namespace(m->type)) {
		if (sv_ns_changes_wait(sv))
			sv_reply_status(r, -ORCH_ERETRY);
		else
			sv_change_submit(sv, r, payload);
		return;
	}
	if (sv_dispatch_with_owners(sv, r, m, payload) == -EREMOTE)
		sv_owner_fetch(sv, r, r->r_need_owner);
}

/* --- Frames --------------------------------------------------------------------------------- */

/*
 * A one-way frame (msg.def's ONEWAY), never answered.  An ack on a
 * connection that did not ask for acknowledgements is the peer's bug,
 * and harmless: it is dropped.
 */
static void sv_oneway(struct sv_server *sv, struct orch_conn *c, const struct orch_msg *m)
{
	if (m->type == ORCH_CL2SV_ACK && (c->c_features & ORCH_FEAT_ACKS))
		sv_ack_received(sv, c, m->id);
}

void sv_dispatch_frame(struct orch_conn *c, const struct orch_frame_hdr *h, const uint8_t *payload)
{
	struct sv_server *sv = c->c_arg;
	struct orch_msg m;
	struct sv_req *r;
	uint64_t bad;
	int error;

	if (h->flags & ORCH_FRAME_REPLY) {
		sv_peer_reply(sv, c, h, payload);
		return;
	}
	error = orch_msg_decode(h, payload, &m);
	if (error == -ENOSYS || (!error && sv_route(m.type)->rt_from == SV_FROM_CONN)) {
		orch_msg_fini(&m);
		sv_unknown(c, h);
		return;
	}
	if (error) {
		sv->s_errors_proto++;
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "malformed request, closing: peer=%s type=%s len=%u: %s",
				   c->c_peer, orch_msg_name(h->type), h->length, strerror(-error));
		orch_conn_close(c, -EPROTO);
		return;
	}
	sv_count(sv, h->type);
	if (sv_route(m.type)->rt_from == SV_FROM_ONEWAY) {
		sv_oneway(sv, c, &m);
		orch_msg_fini(&m);
		return;
	}
	r = sv_req_create(sv, c, h);
	if (!r) {
		orch_msg_fini(&m);
		orch_conn_close(c, -ENOMEM);
		return;
	}
	if (m.flags & ORCH_FRAME_SEQ) {
		r->r_client = m.client;
		r->r_seq = m.seq;
		r->r_done_below = m.done_below;
	}
	/*
	 * A member of a replica group that does not lead it serves nothing but
	 * pings and stats (orchard status shows every member): it names the
	 * leader, and the sender goes there (SPEC-wire.md, "Replica groups").
	 */
	if (!sv_ns_serving(sv) && m.type != ORCH_AN2AN_PING && m.type != ORCH_AD2SV_STATS &&
	    m.type != ORCH_SV2SV_MIRROR && m.type != ORCH_SV2SV_MIRROR_SUMS) {
		struct orch_msg rep;

		orch_msg_init(&rep, m.type);
		rep.status = -ORCH_ENOTLEADER;
		rep.leader = sv_ns_leader(sv);
		orch_msg_fini(&m);
		sv_reply(r, &rep);
		return;
	}
	/*
	 * Before any handler: a handle of a server the cluster does not have
	 * would otherwise make a data object or an entry nothing can reach,
	 * or an intent retried for ever.  The request is well formed, so the
	 * peer gets an answer and keeps its connection.
	 */
	if (orch_msg_check_handles(&m, sv->s_cfg.nservers, &bad)) {
		sv->s_errors_proto++;
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "handle of a server not in the cluster, refused: peer=%s type=%s "
				   "handle=%#" PRIx64 " servers=%u",
				   c->c_peer, orch_msg_name(h->type), bad, sv->s_cfg.nservers);
		orch_msg_fini(&m);
		sv_reply_status(r, -EINVAL);
		return;
	}
	sv_dispatch_owned(sv, r, &m, payload);
	orch_msg_fini(&m);
}
