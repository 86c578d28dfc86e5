/*
 * Opens: which client connections have each regular file held here open,
 * and the orphans, files whose last name went while open, which are kept
 * (nlink 0) until the last close (sv_opens.c; docs/DESIGN.md, "Open files
 * whose last name went").  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_OPENS_H
#define ORCH_SERVER_SV_OPENS_H

#include "server/sv.h"

/*
 * Makes the table (sv->s_opens) and hooks it into the namespace; the
 * orphans of before this start are held until the clients' leases of
 * before have run out.  0 or -errno.
 */
int sv_opens_init(struct sv_server *sv);
/* From now on nothing is freed (the server is stopping). */
void sv_opens_stop(struct sv_server *sv);
void sv_opens_fini(struct sv_server *sv);
/* CL2SV_WRITERS OPEN (@open) or CLOSE of regular file @h by connection @c.  0 or -ENOMEM. */
int sv_opens_request(struct sv_server *sv, struct orch_conn *c, uint64_t h, bool open);
/* Client connection @c closed: its opens are held for a lease term, then go. */
void sv_opens_conn_closed(struct sv_server *sv, struct orch_conn *c);
/* Files tracked, open registrations, orphans kept, orphans freed (stats). */
void sv_opens_counts(const struct sv_server *sv, uint64_t *files, uint64_t *regs,
		     uint64_t *orphans, uint64_t *freed);

#endif
