/* The file-data gate.  See sv_gate.h. */
#include <errno.h>
#include <stdlib.h>

#include "server/sv_gate.h"
#include "server/sv_req.h"

struct sv_gate_wait {
	uint64_t w_seq;
	int w_error;
	sv_gate_fn w_fn;
	void *w_arg;
	struct sv_gate_wait *w_next;
};

void sv_gate_init(struct sv_server *sv)
{
	struct sv_gate *g = &sv->s_gate;

	*g = (struct sv_gate){ 0 };
	g->g_held_tail = &g->g_held;
	g->g_waits_tail = &g->g_waits;
}

void sv_gate_start(struct sv_server *sv, void (*sync)(struct sv_server *sv))
{
	sv->s_gate.g_on = true;
	sv->s_gate.g_sync = sync;
}

/* True if what was sent up to @seq is safe. */
static bool gate_safe(const struct sv_gate *g, uint64_t seq)
{
	return !g->g_on || (g->g_majority && g->g_safe >= seq);
}

void sv_gate_advance(struct sv_server *sv)
{
	struct sv_gate *g = &sv->s_gate;

	/* Both lists are in the order of their seq: the first not safe ends the walk. */
	while (g->g_held && gate_safe(g, g->g_held->r_gate_seq)) {
		struct sv_req *r = g->g_held;

		g->g_held = r->r_held_next;
		if (!g->g_held)
			g->g_held_tail = &g->g_held;
		r->r_held_next = NULL;
		sv_req_release(r, 0);
	}
	while (g->g_waits && gate_safe(g, g->g_waits->w_seq)) {
		struct sv_gate_wait *w = g->g_waits;

		g->g_waits = w->w_next;
		if (!g->g_waits)
			g->g_waits_tail = &g->g_waits;
		w->w_fn(sv, w->w_arg, w->w_error);
		free(w);
	}
}

void sv_gate_expire(struct sv_server *sv, uint64_t now_ms)
{
	struct sv_gate *g = &sv->s_gate;
	struct sv_req **pp = &g->g_held;

	while (*pp) {
		struct sv_req *r = *pp;

		if (r->r_deadline_ms > now_ms && !r->r_conn->c_closed) {
			pp = &r->r_held_next;
			continue;
		}
		*pp = r->r_held_next;
		r->r_held_next = NULL;
		sv_req_release(r, -ETIMEDOUT);
	}
	g->g_held_tail = pp;
}

void sv_gate_after(struct sv_server *sv, bool durable, int error, sv_gate_fn fn, void *arg)
{
	struct sv_gate *g = &sv->s_gate;
	struct sv_gate_wait *w;

	if (!g->g_on || g->g_stop_error) {
		fn(sv, arg, g->g_stop_error && !error ? g->g_stop_error : error);
		return;
	}
	if (durable && g->g_sync)
		g->g_sync(sv);
	if (gate_safe(g, g->g_sent) && !g->g_waits) {
		fn(sv, arg, error);
		return;
	}
	w = malloc(sizeof(*w));
	if (!w) {
		fn(sv, arg, -ENOMEM);
		return;
	}
	*w = (struct sv_gate_wait){ .w_seq = g->g_sent, .w_error = error, .w_fn = fn,
				    .w_arg = arg };
	*g->g_waits_tail = w;
	g->g_waits_tail = &w->w_next;
}

void sv_gate_stop(struct sv_server *sv, int error)
{
	struct sv_gate *g = &sv->s_gate;

	if (!g->g_on)
		return;
	g->g_stop_error = error;
	while (g->g_held) {
		struct sv_req *r = g->g_held;

		g->g_held = r->r_held_next;
		r->r_held_next = NULL;
		sv_req_release(r, error);
	}
	g->g_held_tail = &g->g_held;
	while (g->g_waits) {
		struct sv_gate_wait *w = g->g_waits;

		g->g_waits = w->w_next;
		w->w_fn(sv, w->w_arg, w->w_error ? w->w_error : error);
		free(w);
	}
	g->g_waits_tail = &g->g_waits;
}
