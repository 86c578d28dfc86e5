/*
 * The dispatcher: every frame of every connection (clients, the admin CLI,
 * other servers) comes here.  It decodes the frame, refuses what no
 * handler may see (malformed frames, handles of servers the cluster does
 * not have, server requests from a client), hands replies to our own
 * calls to the peer transport, and calls the handler of the request's
 * type.  The top floor of the server but for main.c.  Loop thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "server/flush.h"
#include "server/sv.h"
#include "server/sv_admin.h"
#include "server/sv_cl.h"
#include "server/sv_data.h"
#include "server/sv_dispatch.h"
#include "server/sv_peer.h"
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

/*
 * Calls the handler of @m's type.  0 once @r is answered or kept; -EREMOTE
 * with @r kept, to fetch the owner of r->r_need_owner (sv_req_need_owner).
 */
static int sv_dispatch(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	int error = 0;

	switch (m->type) {
	case ORCH_CL2SV_LOOKUP:
	case ORCH_CL2SV_CREATE:
	case ORCH_CL2SV_MKDIR:
		r->r_lease_dir = m->parent;
		break;
	case ORCH_CL2SV_LINK:
		r->r_lease_dir = m->newparent;
		break;
	case ORCH_CL2SV_READDIR:
		r->r_lease_dir = m->handle;
		break;
	default:
		break;
	}
	switch (m->type) {
	case ORCH_AN2AN_PING: error = sv_stats_ping(sv, r, m); break;
	case ORCH_CL2SV_LOOKUP: error = sv_cl_lookup(sv, r, m); break;
	case ORCH_CL2SV_GETATTR: error = sv_cl_getattr(sv, r, m); break;
	case ORCH_CL2SV_SETATTR: error = sv_cl_setattr(sv, r, m); break;
	case ORCH_CL2SV_CREATE: error = sv_cl_create(sv, r, m); break;
	case ORCH_CL2SV_MKDIR: error = sv_cl_mkdir(sv, r, m); break;
	case ORCH_CL2SV_READLINK: error = sv_cl_readlink(sv, r, m); break;
	case ORCH_CL2SV_LINK: error = sv_cl_link(sv, r, m); break;
	case ORCH_CL2SV_UNLINK: error = sv_cl_unlink(sv, r, m); break;
	case ORCH_CL2SV_RENAME: error = sv_cl_rename(sv, r, m); break;
	case ORCH_CL2SV_READDIR: error = sv_cl_readdir(sv, r, m); break;
	case ORCH_CL2SV_STATFS: error = sv_cl_statfs(sv, r, m); break;
	case ORCH_CL2SV_GETXATTR:
	case ORCH_CL2SV_LISTXATTR: error = sv_cl_getxattr(sv, r, m); break;
	case ORCH_CL2SV_SETXATTR:
	case ORCH_CL2SV_REMOVEXATTR: error = sv_cl_setxattr(sv, r, m); break;
	case ORCH_CL2SV_ACCESS: error = sv_cl_access(sv, r, m); break;
	case ORCH_CL2SV_EXTEND: error = sv_cl_extend(sv, r, m); break;
	case ORCH_CL2SV_WRITERS: error = sv_writers_request(sv, r, m); break;
	case ORCH_CL2SV_READ: error = sv_data_read(sv, r, m); break;
	case ORCH_CL2SV_WRITE: error = sv_data_write(sv, r, m); break;
	case ORCH_CL2SV_FSYNC: error = sv_cl_fsync(sv, r, m); break;
	case ORCH_CL2SV_COPY_RANGE: error = sv_data_copy_range(sv, r, m); break;
	case ORCH_CL2SV_PUNCH: error = sv_data_punch(sv, r, m); break;
	case ORCH_CL2SV_DEDUPE: error = sv_data_dedupe(sv, r, m); break;
	case ORCH_CL2SV_BLOCKSUMS: error = sv_data_block_sums(sv, r, m); break;
	case ORCH_AD2SV_STATS: error = sv_stats_request(sv, r, m); break;
	case ORCH_AD2SV_FSMAP: error = sv_admin_fsmap(sv, r, m); break;
	case ORCH_AD2SV_NAMES: error = sv_admin_names(sv, r, m); break;
	case ORCH_AD2SV_SCRUB: error = sv_admin_scrub(sv, r, m); break;
	case ORCH_SV2SV_MKDIR_INODE:
	case ORCH_SV2SV_RMDIR_INODE:
	case ORCH_SV2SV_NLINK_ADJ:
	case ORCH_SV2SV_DATA_DELETE:
	case ORCH_SV2SV_DATA_DELETE_MANY:
	case ORCH_SV2SV_DATA_TRUNCATE:
	case ORCH_SV2SV_SET_PARENT:
	case ORCH_SV2SV_RENAME_IN:
	case ORCH_SV2SV_APPLIED_TRIM:
	case ORCH_SV2SV_WRITE:
	case ORCH_SV2SV_RECLAIM:
	case ORCH_SV2SV_DATA_CUT:
		if (r->r_conn->c_origin >= sv->s_cfg.nservers) {
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "server request from a client: peer=%s type=%s",
					   r->r_conn->c_peer, orch_msg_name(m->type));
			sv_reply_status(r, -EPERM);
			break;
		}
		switch (m->type) {
		case ORCH_SV2SV_MKDIR_INODE: error = sv_sv_mkdir_inode(sv, r, m); break;
		case ORCH_SV2SV_RMDIR_INODE: error = sv_sv_rmdir_inode(sv, r, m); break;
		case ORCH_SV2SV_NLINK_ADJ: error = sv_sv_nlink_adj(sv, r, m); break;
		case ORCH_SV2SV_DATA_DELETE: error = sv_sv_data_delete(sv, r, m); break;
		case ORCH_SV2SV_DATA_DELETE_MANY: error = sv_sv_data_delete_many(sv, r, m); break;
		case ORCH_SV2SV_DATA_TRUNCATE: error = sv_sv_data_truncate(sv, r, m); break;
		case ORCH_SV2SV_SET_PARENT: error = sv_sv_set_parent(sv, r, m); break;
		case ORCH_SV2SV_RENAME_IN: error = sv_sv_rename_in(sv, r, m); break;
		case ORCH_SV2SV_APPLIED_TRIM: error = sv_sv_applied_trim(sv, r, m); break;
		case ORCH_SV2SV_WRITE: error = sv_sv_write(sv, r, m); break;
		case ORCH_SV2SV_RECLAIM: error = sv_admin_reclaim_request(sv, r, m); break;
		default: error = sv_writers_cut_request(sv, r, m); break;
		}
		break;
	default:
		sv_reply_status(r, -ENOSYS);
		break;
	}
	return error;
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
		sv_reply_status(r, error == -EHOSTDOWN ? -EIO : error);
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

/* Dispatches with the owners fetched so far known to the sticky rule. */
static void sv_dispatch_owned(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m,
			      const uint8_t *payload)
{
	for (unsigned int i = 0; i < r->r_nowners; i++)
		orch_meta_remote_owner_set(sv->s_meta, r->r_owners[i].handle, r->r_owners[i].uid);
	r->r_raw = payload;
	if (sv_dispatch(sv, r, m) == -EREMOTE)
		sv_owner_fetch(sv, r, r->r_need_owner);
	/* @r may be gone now. */
	orch_meta_remote_owner_clear(sv->s_meta);
}

/* --- Frames --------------------------------------------------------------------------------- */

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
	if (error == -ENOSYS || (!error && (m.type == ORCH_AN2AN_HELLO ||
					    m.type == ORCH_AN2AN_AUTH ||
					    m.type == ORCH_AN2AN_UNKNOWN))) {
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
	r = sv_req_create(sv, c, h);
	if (!r) {
		orch_msg_fini(&m);
		orch_conn_close(c, -ENOMEM);
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
