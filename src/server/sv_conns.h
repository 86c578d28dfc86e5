/*
 * The connection registry: the client (and admin) connections this server
 * accepted that are still open.  Stats add up their bytes, the lease table
 * revokes through them, and a stopping server closes them.  Peer
 * connections are not here (sv_peer.h).
 *
 * It also keeps strangers out: at most max_connections are open at once
 * (the acceptor closes the ones past it, sv_conns_full()), and one that
 * has not authenticated handshake_timeout_ms after it was accepted is
 * closed (one timer for all of them).  0 in either setting: no bound
 * (the unit tests' servers).
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
/*
 * True if max_connections are open: the acceptor closes a new connection
 * at once and counts it (sv_conns_refused()).
 */
bool sv_conns_full(const struct sv_server *sv);
/* Counts a connection the acceptor closed because sv_conns_full(). */
void sv_conns_refused(struct sv_server *sv);
/*
 * Registers @c (not referenced: it leaves at its close).  After
 * sv_conns_reserve().  If @c is not authenticated handshake_timeout_ms
 * after it was made (c_since_ms), it is closed with -ETIMEDOUT.
 */
void sv_conns_add(struct sv_server *sv, struct orch_conn *c);
/* Forgets @c; nothing if it is not registered.  From its on_close. */
void sv_conns_remove(struct sv_server *sv, struct orch_conn *c);
/* Calls @fn for every open client connection; @fn must not close any. */
void sv_conns_each(struct sv_server *sv, void (*fn)(struct orch_conn *c, void *arg), void *arg);
/* Adds the bytes moved so far on the open connections to *@in and *@out. */
void sv_conns_bytes(const struct sv_server *sv, uint64_t *in, uint64_t *out);
/*
 * Closes every registered connection with @reason (each leaves through its
 * on_close), and stops the handshake timer.
 */
void sv_conns_close_all(struct sv_server *sv, int reason);
/* Frees the registry, after sv_conns_close_all(). */
void sv_conns_fini(struct sv_server *sv);

#endif
