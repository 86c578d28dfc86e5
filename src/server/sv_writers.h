/*
 * Writers: the client connections registered as writers of each file held
 * here, and the cuts of the bytes past the size that no writer alive can
 * publish (sv_writers.c; docs/DESIGN.md, "Writers and bytes past the
 * size").  Above the peer transport and the request core; the intent
 * machine tells it when a truncate runs.  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_WRITERS_H
#define ORCH_SERVER_SV_WRITERS_H

#include "server/sv.h"

/* Makes the table (sv->s_writers), before the loop runs.  0 or -ENOMEM. */
int sv_writers_init(struct sv_server *sv);
/* From now on closed connections start no cut (the server is stopping). */
void sv_writers_stop(struct sv_server *sv);
/* After every connection closed and the peers are gone; answers waiters ESHUTDOWN. */
void sv_writers_fini(struct sv_server *sv);
/* CL2SV_WRITERS (and its admin flags PROBE, RECLAIM): answers @r now or after a cut. */
int sv_writers_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* SV2SV_DATA_CUT: cuts this server's object of the file past the size given. */
int sv_writers_cut_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* A CREATE with ORCH_CREATE_WRITER made regular file @h: @c is its writer.  0 or -ENOMEM. */
int sv_writers_created(struct sv_server *sv, struct orch_conn *c, uint64_t h);
/* Client connection @c closed: its registrations go, and a cut may start. */
void sv_writers_conn_closed(struct sv_server *sv, struct orch_conn *c);
/*
 * A TRUNCATE intent of @h starts (@running) or ends: PROBE answers BUSY
 * meanwhile (the size is cut before the data).
 */
void sv_writers_sizing(struct sv_server *sv, uint64_t h, bool running);
/* Inodes tracked, registrations, cut rounds started (stats). */
void sv_writers_counts(const struct sv_server *sv, uint64_t *nodes, uint64_t *regs,
		       uint64_t *cuts);

#endif
