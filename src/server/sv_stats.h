/*
 * AN2AN_PING and AD2SV_STATS.  A handler file: it reads the counters of
 * the floors below it.  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_STATS_H
#define ORCH_SERVER_SV_STATS_H

#include "server/sv.h"

/* AN2AN_PING: answers @r with our protocol version. */
int sv_stats_ping(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* AD2SV_STATS: answers @r with the stats JSON. */
int sv_stats_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);

#endif
