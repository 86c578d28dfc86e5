/*
 * The server's HTTP endpoint (web/httpd.h), when its [server NAME] section
 * sets `metrics = HOST:PORT`: GET /metrics in the Prometheus text format,
 * and GET / (or /status), a page of the whole cluster's health.
 *
 * Threads (docs/DESIGN.md, "Metrics"): pages are built on the endpoint's
 * connection threads, never on the loop.  The counters only the loop may
 * read are copied by the loop: a page posts a snapshot request to the loop
 * (orch_ev_post) and waits for it at most SV_METRICS_WAIT_MS, answering
 * 503 if the loop does not get to it; everything else (the latency
 * histograms, the store's counters and space, WAL sizes) is read where it
 * is, by atomics or the store's own locks.  The status page asks every
 * server, this one included, for its stats over the network, through a
 * client of its own, as `orchard status` does.
 *
 * A handler file of floor 3, after sv_stats (whose snapshot it formats).
 */
#ifndef ORCH_SERVER_SV_METRICS_H
#define ORCH_SERVER_SV_METRICS_H

#include "server/sv.h"

#define SV_METRICS_WAIT_MS 2000

/*
 * Binds the address the config sets (sv->s_metrics), so that a bad,
 * public or busy one stops the start before any data is opened; does
 * nothing if the config sets none.  0, or -errno after logging why (the
 * server should not start: the operator asked for an endpoint it cannot
 * have).  Before the loop runs.
 */
int sv_metrics_create(struct sv_server *sv);
/*
 * Starts serving: after the loop, the store and the namespace exist; pages
 * wait for the loop to run.  0, or -errno after logging.  Loop thread,
 * before the loop runs.
 */
int sv_metrics_start(struct sv_server *sv);
/*
 * Stops serving and frees the endpoint: waits for the pages being built;
 * pages waiting for the loop give up at once.  Right after the loop
 * stopped, before anything a page reads goes away (and on every way out of
 * a failed start).  Loop thread.
 */
void sv_metrics_stop(struct sv_server *sv);

#endif
