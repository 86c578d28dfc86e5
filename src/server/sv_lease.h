/*
 * Leases: which client connections may be caching what, and the pushes that
 * tell them it changed (sv_lease.c).  Ground floor: above the connection
 * registry (a full table revokes through it), below the request core,
 * whose every reply grants leases.  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_LEASE_H
#define ORCH_SERVER_SV_LEASE_H

#include "server/sv.h"

/*
 * Records at most (about 40 MiB): a reply whose grants would not fit first
 * empties the table and tells every holder SV2CL_REVOKE.
 */
#define SV_LEASE_MAX (1u << 20)
/* A record lasts this much past the client's term (lease_ms): clock drift. */
#define SV_LEASE_MARGIN_MS 1000u

/*
 * Makes the table (sv->s_leases) and sets the namespace's change hook, which
 * pushes every change to its holders.  After the loop and the namespace
 * exist; nothing if lease_ms is 0 (then no reply grants a lease).  0 or
 * -ENOMEM.
 */
int sv_lease_init(struct sv_server *sv);
/*
 * Writes the pushes still queued, lets go of the connections they were
 * queued on, and frees the table.  After every connection closed.
 */
void sv_lease_fini(struct sv_server *sv);
/*
 * The leases reply @rep to @c carries: the entries of directory @dir (0:
 * none; a LOOKUP's ENOENT too) and the attributes it holds.  From sv_reply.
 */
void sv_lease_grant_reply(struct sv_server *sv, struct orch_conn *c, uint64_t dir,
			  const struct orch_msg *rep);
/*
 * @h (or its entry @name) changed: pushes to its holders, on behalf of
 * sv->s_acting.  The namespace's change hook, which the replica group
 * takes and calls through sv_ns.c once a change is applied.  Nothing
 * without a lease table.
 */
void sv_lease_changed(struct sv_server *sv, uint64_t h, const char *name, size_t namelen);
/* Client connection @c closed: its records go. */
void sv_lease_conn_closed(struct sv_server *sv, struct orch_conn *c);
/*
 * Writes the pushes queued for other holders before a reply leaves (from
 * sv_reply): a client told "done" can tell another client, which must then
 * already have its push.  @requester's own leave with the reply.
 */
void sv_lease_flush(struct sv_server *sv, struct orch_conn *requester);
/* Records in the table (stats). */
size_t sv_lease_count(const struct sv_server *sv);

#endif
