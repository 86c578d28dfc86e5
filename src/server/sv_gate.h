/*
 * The file-data gate of a replica group's leader (docs/DESIGN.md, "File
 * data in a replica group"): what this member tells anyone, a reply or an
 * intent's next step, may depend on every store operation it applied so
 * far, so it leaves only once the followers in sync applied them too and
 * those are a majority with this member.  Then a failover cannot lose
 * what anyone was told.  The state is struct sv_gate in struct sv_server;
 * sv_mirror.c moves it, sv_reply() holds replies at it (sv_gate_open()).
 * Ground floor: above the request core, below the flusher and the mirror.
 * Loop thread only.
 */
#ifndef ORCH_SERVER_SV_GATE_H
#define ORCH_SERVER_SV_GATE_H

#include "server/sv.h"

typedef void (*sv_gate_fn)(struct sv_server *sv, void *arg, int error);

/* Before anything replies: the gate is open (a server of its own never closes it). */
void sv_gate_init(struct sv_server *sv);
/*
 * This member leads a group of several: from now on replies wait.  @sync
 * sends a sync to the followers (for sv_gate_after with @durable).
 */
void sv_gate_start(struct sv_server *sv, void (*sync)(struct sv_server *sv));
/* g_safe or g_majority moved: sends the replies and runs the steps now safe. */
void sv_gate_advance(struct sv_server *sv);
/*
 * Runs @fn(sv, @arg, @error) once what was sent so far is safe; with
 * @durable, sends a sync first, so that it is durable there too.  At once
 * if the gate is off.
 */
void sv_gate_after(struct sv_server *sv, bool durable, int error, sv_gate_fn fn, void *arg);
/*
 * Answers ETIMEDOUT each held reply whose request's deadline passed
 * (r_deadline_ms: its client gave up) or whose connection closed: a gate
 * that stays closed (no majority in sync) must not hold them for ever.
 */
void sv_gate_expire(struct sv_server *sv, uint64_t now_ms);
/*
 * This member stops leading: every held reply is answered @error instead
 * (the client asks the next leader), every step gets @error.
 */
void sv_gate_stop(struct sv_server *sv, int error);

#endif
