/*
 * Acknowledged invalidation (docs/DESIGN.md, "Acknowledged invalidation"):
 * the reply to a request that changed what other clients hold under a
 * lease leaves only once each of them acknowledged the push (its kernel
 * dropped its copy), or its lease ran out, or its connection closed.
 *
 * The lease table numbers the pushes on a connection that asked for
 * ORCH_FEAT_ACKS and adds a wait (connection, number, lease end) to the
 * request on whose behalf the change is made (sv->s_acting); sv_reply()
 * parks a reply whose waits are not all met, encoded, and this file sends
 * it when they are: at a CL2SV_ACK, a close, or a timer at the earliest
 * lease end.  Ground floor: below the lease table and the request core,
 * above the connections.  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_ACK_H
#define ORCH_SERVER_SV_ACK_H

#include <stdbool.h>
#include <stdint.h>

#include "server/sv.h"

struct sv_ack_wait {
	struct orch_conn *w_conn;   /* referenced */
	uint64_t w_seq;             /* met once the peer acknowledged this push ... */
	uint64_t w_expire_ms;       /* ... or its lease ran out (monotonic) */
};

/* What one reply waits for; zeroed is empty. */
struct sv_ack_waits {
	struct sv_ack_wait *a_v;
	uint32_t a_n, a_cap;
	/* Waits that could not be recorded (no memory): until this time, whatever is acknowledged. */
	uint64_t a_until_ms;
};

/*
 * The reply of the request that @w belongs to must wait for push @seq to
 * @c, whose lease on what it names ends at @expire_ms.  One wait per
 * connection: a later push to the same one raises it.
 */
void sv_ack_wait_add(struct sv_ack_waits *w, struct orch_conn *c, uint64_t seq,
		     uint64_t expire_ms);
/* The same for a wait that can only end at @until_ms. */
void sv_ack_wait_add_until(struct sv_ack_waits *w, uint64_t until_ms);
/* Lets go of @w's connections. */
void sv_ack_waits_fini(struct sv_ack_waits *w);
/* True if @w waits for something not met yet. */
bool sv_ack_waits_pending(const struct sv_ack_waits *w, uint64_t now_ms);

/*
 * Parks reply @m to @c (typed and numbered by the caller) until @w is met:
 * the waits move into the parked reply (@w is left empty), the reply is
 * encoded, and @owed says it is owed on @c (orch_conn_owe), paid when it
 * leaves.  0, or -errno (nothing parked: the caller sends it now).
 */
int sv_ack_park(struct sv_server *sv, struct orch_conn *c, bool owed, struct sv_ack_waits *w,
		const struct orch_msg *m);
/* Client connection @c acknowledged every push up to @seq. */
void sv_ack_received(struct sv_server *sv, struct orch_conn *c, uint64_t seq);
/* Client connection @c closed: what waited for it only is sent. */
void sv_ack_conn_closed(struct sv_server *sv, struct orch_conn *c);

/* Counters for stats, loop thread. */
struct sv_ack_counts {
	uint64_t acks;              /* CL2SV_ACK frames taken */
	uint64_t parked;            /* replies that waited */
	uint64_t by_ack;            /* ... and left because every holder acknowledged */
	uint64_t by_expiry;         /* ... or because a holder's lease ran out first */
	uint64_t wait_us;           /* their waits, in all */
	uint64_t wait_max_us;       /* the longest */
	uint64_t waiting;           /* parked now */
};
void sv_ack_counts(const struct sv_server *sv, struct sv_ack_counts *out);

/* Sets up sv->s_acks; 0 or -ENOMEM.  fini drops the parked replies (the connections are closed). */
int sv_ack_init(struct sv_server *sv);
void sv_ack_fini(struct sv_server *sv);

#endif
