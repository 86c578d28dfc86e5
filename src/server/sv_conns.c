/* The live client connections.  See sv_conns.h. */
#include <errno.h>
#include <stdlib.h>

#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "server/sv_conns.h"

/*
 * The handshake timer fires at most this often: each firing walks the
 * registry, so a stream of strangers costs a few walks a second, not one
 * per stranger.  Each is closed at most this late.
 */
#define SV_CONNS_HS_GRAIN_MS 100

int sv_conns_reserve(struct sv_server *sv)
{
	struct sv_conns *cs = &sv->s_conns;
	struct orch_conn **p;
	size_t cap;

	if (cs->cs_n < cs->cs_cap)
		return 0;
	cap = cs->cs_cap ? cs->cs_cap * 2 : 64;
	p = realloc(cs->cs_v, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	cs->cs_v = p;
	cs->cs_cap = cap;
	return 0;
}

bool sv_conns_full(const struct sv_server *sv)
{
	uint32_t max = sv->s_cfg.max_connections;

	return max && sv->s_conns.cs_n >= max;
}

void sv_conns_refused(struct sv_server *sv)
{
	sv->s_conns.cs_refused++;
}

/*
 * The handshake timer: closes the connections not authenticated
 * handshake_timeout_ms after they were made, and waits for the next one to
 * be due, if any is still in its handshake.  One walk of the registry per
 * deadline: it holds at most max_connections, and only strangers arm it.
 */
static void sv_conns_hs_tick(void *arg)
{
	struct sv_server *sv = arg;
	struct sv_conns *cs = &sv->s_conns;
	uint64_t limit = sv->s_cfg.handshake_timeout_ms, now = orch_time_now_ms();
	uint64_t next = UINT64_MAX;

	/* From the end: a close moves the last connection into the slot it frees. */
	for (size_t i = cs->cs_n; i-- > 0;) {
		struct orch_conn *c;

		if (i >= cs->cs_n)
			continue;
		c = cs->cs_v[i];
		if (c->c_closed || c->c_state == ORCH_CONN_READY)
			continue;
		if (now - c->c_since_ms >= limit) {
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
					   "no authentication within %u ms, closing: peer=%s",
					   sv->s_cfg.handshake_timeout_ms, c->c_peer);
			cs->cs_timed_out++;
			orch_conn_close(c, -ETIMEDOUT);
		} else if (c->c_since_ms + limit < next) {
			next = c->c_since_ms + limit;
		}
	}
	if (next != UINT64_MAX)
		orch_ev_timer_arm(sv->s_ev, &cs->cs_hs_timer,
				  (uint32_t)ORCH_MAX(next - now, (uint64_t)SV_CONNS_HS_GRAIN_MS),
				  sv_conns_hs_tick, sv);
}

void sv_conns_add(struct sv_server *sv, struct orch_conn *c)
{
	struct sv_conns *cs = &sv->s_conns;
	uint32_t limit = sv->s_cfg.handshake_timeout_ms;

	cs->cs_v[cs->cs_n++] = c;
	/* Deadlines come in the order of the connections: the armed one is earlier. */
	if (limit && c->c_state != ORCH_CONN_READY && !cs->cs_hs_timer.t_armed) {
		uint64_t now = orch_time_now_ms(), due = c->c_since_ms + limit;

		orch_ev_timer_arm(sv->s_ev, &cs->cs_hs_timer, due > now ? (uint32_t)(due - now) : 0,
				  sv_conns_hs_tick, sv);
	}
}

void sv_conns_remove(struct sv_server *sv, struct orch_conn *c)
{
	struct sv_conns *cs = &sv->s_conns;

	for (size_t i = 0; i < cs->cs_n; i++) {
		if (cs->cs_v[i] == c) {
			cs->cs_v[i] = cs->cs_v[--cs->cs_n];
			return;
		}
	}
}

void sv_conns_each(struct sv_server *sv, void (*fn)(struct orch_conn *c, void *arg), void *arg)
{
	for (size_t i = 0; i < sv->s_conns.cs_n; i++)
		fn(sv->s_conns.cs_v[i], arg);
}

void sv_conns_bytes(const struct sv_server *sv, uint64_t *in, uint64_t *out)
{
	for (size_t i = 0; i < sv->s_conns.cs_n; i++) {
		*in += sv->s_conns.cs_v[i]->c_bytes_in;
		*out += sv->s_conns.cs_v[i]->c_bytes_out;
	}
}

void sv_conns_close_all(struct sv_server *sv, int reason)
{
	orch_ev_timer_cancel(sv->s_ev, &sv->s_conns.cs_hs_timer);
	/* Each close removes its connection (on_close): take the last until none is left. */
	while (sv->s_conns.cs_n)
		orch_conn_close(sv->s_conns.cs_v[sv->s_conns.cs_n - 1], reason);
}

void sv_conns_fini(struct sv_server *sv)
{
	free(sv->s_conns.cs_v);
	sv->s_conns = (struct sv_conns){ 0 };
}
