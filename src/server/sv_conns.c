/* The live client connections.  See sv_conns.h. */
#include <errno.h>
#include <stdlib.h>

#include "server/sv_conns.h"

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

void sv_conns_add(struct sv_server *sv, struct orch_conn *c)
{
	struct sv_conns *cs = &sv->s_conns;

	cs->cs_v[cs->cs_n++] = c;
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
	/* Each close removes its connection (on_close): take the last until none is left. */
	while (sv->s_conns.cs_n)
		orch_conn_close(sv->s_conns.cs_v[sv->s_conns.cs_n - 1], reason);
}

void sv_conns_fini(struct sv_server *sv)
{
	free(sv->s_conns.cs_v);
	sv->s_conns = (struct sv_conns){ 0 };
}
