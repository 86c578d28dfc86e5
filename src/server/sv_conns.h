/*
 * The connection registry: the client (and admin) connections this server
 * accepted that are still open.  Stats add up their bytes, the lease table
 * revokes through them, and a stopping server closes them.  Peer
 * connections are not here (sv_peer.h).
 *
 * Ground floor: it calls nothing else of the server.  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_CONNS_H
#define ORCH_SERVER_SV_CONNS_H

#include "server/sv.h"

/*
 * Makes room for one more connection, so that sv_conns_add() cannot fail:
 * called before accepting, so that a connection is never accepted and
 * then dropped.  0 or -ENOMEM.
 */
int sv_conns_reserve(struct sv_server *sv);
/* Registers @c (not referenced: it leaves at its close).  After sv_conns_reserve(). */
void sv_conns_add(struct sv_server *sv, struct orch_conn *c);
/* Forgets @c; nothing if it is not registered.  From its on_close. */
void sv_conns_remove(struct sv_server *sv, struct orch_conn *c);
/* Calls @fn for every open client connection; @fn must not close any. */
void sv_conns_each(struct sv_server *sv, void (*fn)(struct orch_conn *c, void *arg), void *arg);
/* Adds the bytes moved so far on the open connections to *@in and *@out. */
void sv_conns_bytes(const struct sv_server *sv, uint64_t *in, uint64_t *out);
/* Closes every registered connection with @reason (each leaves through its on_close). */
void sv_conns_close_all(struct sv_server *sv, int reason);
/* Frees the registry, after sv_conns_close_all(). */
void sv_conns_fini(struct sv_server *sv);

#endif
