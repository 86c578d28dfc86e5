/*
 * Durability: the flusher thread (flush.c) makes the store and the
 * namespace WAL durable, for everyone that waits on it at once (group
 * commit), and within commit_interval_ms of any change.  Above the request
 * core (it answers fsyncs and durable replies), below everything that
 * changes state.
 */
#ifndef ORCH_SERVER_FLUSH_H
#define ORCH_SERVER_FLUSH_H

#include "server/sv.h"

/*
 * Starts the flusher thread (sv->s_flusher), with its own connection to the
 * namespace.  After the namespace, the store and the loop exist.  0 or
 * -errno.
 */
int sv_flusher_start(struct sv_server *sv);
/*
 * Stops the thread, then makes everything durable (a clean stop) and calls
 * the waits still parked with the flush's status.
 */
void sv_flusher_stop(struct sv_server *sv);
/* Runs on the loop thread after a flush, with its status (0: durable). */
typedef void (*sv_flushed_fn)(struct sv_server *sv, void *arg, int error);
/*
 * Calls @fn once everything committed or written so far is durable: after a
 * flush that started after this call (it may have to wait for the one in
 * progress).  Also called, with an error, when the flusher stops: @fn must
 * cope with the loop and the peers being gone.  Any thread.
 */
void sv_flusher_after(struct sv_server *sv, sv_flushed_fn fn, void *arg);
/* Answers @r once everything acknowledged so far is durable. */
void sv_flusher_wait(struct sv_server *sv, struct sv_req *r);
/*
 * Answers a peer's intent step @r with @m once what it changed here is
 * durable (a flush later): the coordinator acts on the answer, so a power
 * cut here must not undo it afterwards.  @m is copied; it must carry no
 * pointers (names, data).  Frees @r.
 */
void sv_flusher_reply(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* Notes that a commit or a data write happened (the interval flush is due). */
void sv_flusher_dirty(struct sv_server *sv);

#endif
