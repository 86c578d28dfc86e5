/*
 * The server's lease table (src/server/sv_lease.c) on its own: a server
 * struct with a real namespace and event loop, and client connections over
 * socketpairs.  What replies grant, the pushes a namespace change sends to
 * every holder (others' before the requester's reply, the requester's with
 * it), closed connections and expired terms, and the bound of the table.
 * With acknowledgements (sv_ack.c): numbered pushes, and replies held until
 * the other holders acknowledged, closed or ran out of lease.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/time.h"
#include "server/sv_conns.h"
#include "server/sv_lease.h"
#include "server/sv_req.h"
#include "unit/sv_fx.h"
#include "unit/test.h"

#define ROOT_DIR 1
#define REMOTE(n) ((uint64_t)1 << ORCH_HANDLE_SERVER_SHIFT | (n)) /* held by server 1 */

static struct sv_fx F;
static struct fx_frame FR[FX_FRAMES_MAX];

/* Server 0 of 2, leases of @lease_ms. */
static int setup(uint32_t lease_ms)
{
	int error = fx_setup(&F, 0, 2, lease_ms);

	if (!error)
		error = sv_lease_init(&F.sv);
	return error ? error : sv_ack_init(&F.sv);
}

static void teardown(void)
{
	sv_ack_fini(&F.sv);
	sv_lease_fini(&F.sv);
	fx_teardown(&F);
}

/* What a GETATTR reply about @h grants @cl. */
static void grant_attr(struct fx_client *cl, uint64_t h)
{
	struct orch_msg rep;

	orch_msg_init(&rep, ORCH_CL2SV_GETATTR);
	rep.attr.handle = h;
	sv_lease_grant_reply(&F.sv, cl->c, 0, &rep);
}

/* What a READDIR reply of directory @dir (0: none) with @n entries from @h0 on grants. */
static void grant_readdir(struct fx_client *cl, uint64_t dir, uint64_t h0, uint32_t n)
{
	static struct orch_dirent d[1024];
	struct orch_msg rep;

	for (uint32_t i = 0; i < n; i++)
		d[i] = (struct orch_dirent){ .handle = h0 + i, .has_attr = true };
	orch_msg_init(&rep, ORCH_CL2SV_READDIR);
	rep.dirents = d;
	rep.ndirents = n;
	sv_lease_grant_reply(&F.sv, cl->c, dir, &rep);
}

/* Publishes a new size of @h: a change of its inode record. */
static int change_attr(uint64_t h, uint64_t size)
{
	struct orch_attr a;

	return orch_meta_inode_extend(F.sv.s_meta, h, size, orch_time_real_ns(), &a);
}

/* Two clients that took leases, both holding one on new file "f".  0 or -1. */
static int two_holders(struct fx_client **a, struct fx_client **b, uint64_t *f)
{
	*a = fx_client(&F, true);
	*b = fx_client(&F, true);
	*f = fx_mkfile(&F, "f");
	if (!*a || !*b || !*f)
		return -1;
	grant_attr(*a, *f);
	grant_attr(*b, *f);
	return 0;
}

ORCH_TEST(change_pushes_to_every_holder)
{
	struct fx_client *a, *b, *plain;
	uint64_t f;
	int n;

	ORCH_CHECK_OK(setup(30000));
	ORCH_CHECK(two_holders(&a, &b, &f) == 0);
	plain = fx_client(&F, false);
	ORCH_CHECK(plain);
	grant_attr(plain, f); /* did not ask for leases: no record */
	ORCH_CHECK(sv_lease_count(&F.sv) == 2);
	ORCH_CHECK(F.sv.s_lease_grants == 2);
	grant_attr(a, f); /* renewed, not doubled */
	ORCH_CHECK(sv_lease_count(&F.sv) == 2);

	ORCH_CHECK_OK(change_attr(f, 100));
	sv_lease_flush(&F.sv, NULL);
	n = fx_read(a, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_SV2CL_INVAL_ATTR && FR[0].handle == f);
	ORCH_CHECK(FR[0].flags == ORCH_FRAME_PUSH);
	n = fx_read(b, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_SV2CL_INVAL_ATTR && FR[0].handle == f);
	ORCH_CHECK(fx_read(plain, FR, FX_FRAMES_MAX) == 0);
	ORCH_CHECK(F.sv.s_lease_pushes == 2);

	/* A lease covers the handle for its whole term: the next change is pushed too. */
	ORCH_CHECK_OK(change_attr(f, 200));
	sv_lease_flush(&F.sv, NULL);
	ORCH_CHECK(fx_count(FR, fx_read(a, FR, FX_FRAMES_MAX), ORCH_SV2CL_INVAL_ATTR, f) == 1);
	ORCH_CHECK(sv_lease_count(&F.sv) == 2);
	teardown();
}

ORCH_TEST(absent_name_leases_the_directory)
{
	struct orch_msg rep;
	struct fx_client *a;
	int n;

	ORCH_CHECK_OK(setup(30000));
	a = fx_client(&F, true);
	ORCH_CHECK(a);
	/* LOOKUP of a name that is not there: the directory's entries are leased. */
	orch_msg_init(&rep, ORCH_CL2SV_LOOKUP);
	rep.status = -ENOENT;
	sv_lease_grant_reply(&F.sv, a->c, ROOT_DIR, &rep);
	ORCH_CHECK(sv_lease_count(&F.sv) == 1);
	/* Other failures grant nothing. */
	orch_msg_init(&rep, ORCH_CL2SV_GETATTR);
	rep.status = -ENOENT;
	rep.attr.handle = 77;
	sv_lease_grant_reply(&F.sv, a->c, 0, &rep);
	ORCH_CHECK(sv_lease_count(&F.sv) == 1);

	ORCH_CHECK(fx_mkfile(&F, "new") != 0);
	sv_lease_flush(&F.sv, NULL);
	n = fx_read(a, FR, FX_FRAMES_MAX);
	ORCH_CHECK(fx_count(FR, n, ORCH_SV2CL_INVAL_ENTRY, ROOT_DIR) == 1);
	for (int i = 0; i < n; i++)
		if (FR[i].type == ORCH_SV2CL_INVAL_ENTRY)
			ORCH_CHECK(strcmp(FR[i].name, "new") == 0);
	teardown();
}

ORCH_TEST(only_what_is_held_here_is_leased)
{
	struct fx_client *a;

	ORCH_CHECK_OK(setup(30000));
	a = fx_client(&F, true);
	ORCH_CHECK(a);
	grant_attr(a, REMOTE(5));
	ORCH_CHECK(sv_lease_count(&F.sv) == 0);
	/* A listing leases the directory and the entries it has attributes for. */
	grant_readdir(a, ROOT_DIR, 100, 3);
	ORCH_CHECK(sv_lease_count(&F.sv) == 4);
	grant_readdir(a, REMOTE(1), REMOTE(100), 3);
	ORCH_CHECK(sv_lease_count(&F.sv) == 4);
	teardown();
}

ORCH_TEST(closed_connection_loses_its_leases)
{
	struct fx_client *a, *b;
	uint64_t f;

	ORCH_CHECK_OK(setup(30000));
	ORCH_CHECK(two_holders(&a, &b, &f) == 0);
	grant_readdir(a, ROOT_DIR, 100, 10);
	ORCH_CHECK(sv_lease_count(&F.sv) == 13);
	orch_conn_close(a->c, 0);
	ORCH_CHECK(sv_lease_count(&F.sv) == 1);
	/* Nothing is pushed to it any more; the other holder still hears. */
	ORCH_CHECK_OK(change_attr(f, 10));
	sv_lease_flush(&F.sv, NULL);
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_SV2CL_INVAL_ATTR, f) == 1);
	ORCH_CHECK(F.sv.s_lease_pushes == 1);
	teardown();
}

/*
 * A request changes a leased file: the other holder's push is written
 * before the reply leaves (no timer, no flush: sv_reply does it), and the
 * requester's own push leaves ahead of its reply, on the same stream.
 */
ORCH_TEST(pushes_leave_before_the_reply)
{
	struct orch_frame_hdr h = { .type = ORCH_CL2SV_EXTEND, .reqid = 42 };
	struct fx_client *a, *b;
	struct orch_msg rep;
	struct sv_req *r;
	uint64_t f;
	int n;

	ORCH_CHECK_OK(setup(30000));
	ORCH_CHECK(two_holders(&a, &b, &f) == 0);
	r = sv_req_create(&F.sv, b->c, &h);
	ORCH_CHECK(r);
	orch_msg_init(&rep, 0);
	ORCH_CHECK_OK(orch_meta_inode_extend(F.sv.s_meta, f, 4096, orch_time_real_ns(), &rep.attr));
	ORCH_CHECK(fx_read(a, FR, FX_FRAMES_MAX) == 0); /* queued, not written */
	sv_reply(r, &rep);
	n = fx_read(a, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_SV2CL_INVAL_ATTR && FR[0].handle == f);
	n = fx_read(b, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 2);
	ORCH_CHECK(FR[0].type == ORCH_SV2CL_INVAL_ATTR && FR[0].handle == f);
	ORCH_CHECK(FR[1].type == ORCH_CL2SV_EXTEND && FR[1].flags == ORCH_FRAME_REPLY);
	ORCH_CHECK(FR[1].reqid == 42 && FR[1].status == 0);
	teardown();
}

/*
 * The connections with pushes queued are listed in the lease table, not in
 * the process: a server in the same process (a second fixture) writes
 * only its own, and a reply of one server does not write the other's.
 */
ORCH_TEST(each_server_writes_only_its_own_pushes)
{
	struct orch_frame_hdr h = { .type = ORCH_CL2SV_GETATTR, .reqid = 7 };
	static struct sv_fx G;
	struct fx_client *a, *b, *g;
	struct orch_msg rep;
	struct orch_attr at;
	struct sv_req *r;
	uint64_t f, gf;

	ORCH_CHECK_OK(setup(30000));
	ORCH_CHECK(two_holders(&a, &b, &f) == 0);
	ORCH_CHECK_OK(fx_setup(&G, 0, 2, 30000));
	ORCH_CHECK_OK(sv_lease_init(&G.sv));
	g = fx_client(&G, true);
	gf = fx_mkfile(&G, "f");
	ORCH_CHECK(g && gf);
	orch_msg_init(&rep, ORCH_CL2SV_GETATTR);
	rep.attr.handle = gf;
	sv_lease_grant_reply(&G.sv, g->c, 0, &rep);

	ORCH_CHECK_OK(change_attr(f, 100));
	ORCH_CHECK_OK(orch_meta_inode_extend(G.sv.s_meta, gf, 100, orch_time_real_ns(), &at));
	sv_lease_flush(&G.sv, NULL);
	ORCH_CHECK(fx_count(FR, fx_read(g, FR, FX_FRAMES_MAX), ORCH_SV2CL_INVAL_ATTR, gf) == 1);
	ORCH_CHECK(fx_read(a, FR, FX_FRAMES_MAX) == 0 && fx_read(b, FR, FX_FRAMES_MAX) == 0);
	/* G answers a request: still nothing of F's leaves. */
	r = sv_req_create(&G.sv, g->c, &h);
	ORCH_CHECK(r);
	orch_msg_init(&rep, 0);
	rep.status = -ENOENT;
	sv_reply(r, &rep);
	ORCH_CHECK(fx_read(a, FR, FX_FRAMES_MAX) == 0);
	/* F's own reply to b writes a's push and b's with it. */
	h.type = ORCH_CL2SV_EXTEND;
	r = sv_req_create(&F.sv, b->c, &h);
	ORCH_CHECK(r);
	orch_msg_init(&rep, 0);
	rep.attr.handle = f;
	sv_reply(r, &rep);
	ORCH_CHECK(fx_count(FR, fx_read(a, FR, FX_FRAMES_MAX), ORCH_SV2CL_INVAL_ATTR, f) == 1);
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_SV2CL_INVAL_ATTR, f) == 1);
	sv_lease_fini(&G.sv);
	fx_teardown(&G);
	teardown();
}

/*
 * Records end a margin after the client's term: a change finds them gone
 * and pushes nothing, and the sweep (every term) drops the others.
 */
ORCH_TEST(expired_leases_are_not_pushed_and_get_swept)
{
	const uint32_t term = 1 + SV_LEASE_MARGIN_MS; /* lease_ms 1 */
	struct fx_client *a;
	uint64_t f, g;

	ORCH_CHECK_OK(setup(1));
	a = fx_client(&F, true);
	f = fx_mkfile(&F, "f");
	g = fx_mkfile(&F, "g");
	ORCH_CHECK(a && f && g);
	grant_attr(a, f);
	grant_attr(a, g);
	ORCH_CHECK(sv_lease_count(&F.sv) == 2);
	fx_run_loop(&F, term + 100);
	ORCH_CHECK_OK(change_attr(f, 1));
	sv_lease_flush(&F.sv, NULL);
	ORCH_CHECK(fx_read(a, FR, FX_FRAMES_MAX) == 0);
	ORCH_CHECK(sv_lease_count(&F.sv) <= 1);
	/* The first sweep may have come just before g's end: the next one drops it. */
	fx_run_loop(&F, term);
	ORCH_CHECK(sv_lease_count(&F.sv) == 0);
	teardown();
}

ORCH_TEST(no_table_when_lease_ms_is_zero)
{
	struct fx_client *a;
	uint64_t f;

	ORCH_CHECK_OK(setup(0));
	ORCH_CHECK(F.sv.s_leases == NULL);
	a = fx_client(&F, true);
	f = fx_mkfile(&F, "f");
	ORCH_CHECK(a && f);
	grant_attr(a, f);
	ORCH_CHECK(sv_lease_count(&F.sv) == 0);
	ORCH_CHECK_OK(change_attr(f, 1));
	sv_lease_flush(&F.sv, NULL);
	ORCH_CHECK(fx_read(a, FR, FX_FRAMES_MAX) == 0);
	teardown();
}

/*
 * The table holds SV_LEASE_MAX records.  A reply whose grants fit exactly
 * is granted; the next one that does not fit empties the table, tells
 * every client that took leases to forget all (REVOKE), then grants its
 * own, so none of them is lost.
 */
ORCH_TEST(full_table_revokes_everything)
{
	struct fx_client *a, *b, *plain;
	uint64_t h = 1000;
	int n;

	ORCH_CHECK_OK(setup(30000));
	a = fx_client(&F, true);
	b = fx_client(&F, true);
	plain = fx_client(&F, false);
	ORCH_CHECK(a && b && plain);
	for (uint32_t i = 0; i < SV_LEASE_MAX / 1024 - 1; i++, h += 1024)
		grant_readdir(a, 0, h, 1024);
	ORCH_CHECK(sv_lease_count(&F.sv) == SV_LEASE_MAX - 1024);
	/* A reply reserves room for its entries and two more: 1022 fit exactly. */
	grant_readdir(a, 0, h, 1022);
	h += 1022;
	ORCH_CHECK(sv_lease_count(&F.sv) == SV_LEASE_MAX - 2);
	grant_attr(b, h++);
	ORCH_CHECK(sv_lease_count(&F.sv) == SV_LEASE_MAX - 1);
	ORCH_CHECK(F.sv.s_lease_revokes == 0);
	ORCH_CHECK(fx_read(a, FR, FX_FRAMES_MAX) == 0);

	grant_readdir(b, ROOT_DIR, h, 1);
	ORCH_CHECK(F.sv.s_lease_revokes == 1);
	ORCH_CHECK(sv_lease_count(&F.sv) == 2); /* the directory and its entry */
	sv_lease_flush(&F.sv, NULL);
	n = fx_read(a, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_SV2CL_REVOKE && FR[0].flags == ORCH_FRAME_PUSH);
	n = fx_read(b, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_SV2CL_REVOKE);
	ORCH_CHECK(fx_read(plain, FR, FX_FRAMES_MAX) == 0);
	/* What the revoke dropped is no longer pushed. */
	ORCH_CHECK(fx_mkfile(&F, "after") != 0);
	sv_lease_flush(&F.sv, NULL);
	n = fx_read(a, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 0);
	n = fx_read(b, FR, FX_FRAMES_MAX);
	ORCH_CHECK(fx_count(FR, n, ORCH_SV2CL_INVAL_ENTRY, ROOT_DIR) == 1);
	teardown();
}

ORCH_TEST_MAIN()

/* --- Acknowledged invalidation (sv_ack.c) ---------------------------------------------- */

/* Two holders of "f" that acknowledge pushes (ORCH_FEAT_ACKS), and a third that does not. */
static int ack_holders(struct fx_client **a, struct fx_client **b, struct fx_client **old,
		       uint64_t *f)
{
	if (two_holders(a, b, f))
		return -1;
	*old = fx_client(&F, true);
	if (!*old)
		return -1;
	grant_attr(*old, *f);
	(*a)->c->c_features |= ORCH_FEAT_ACKS;
	(*b)->c->c_features |= ORCH_FEAT_ACKS;
	return 0;
}

/* A request of @cl changes f's size on its behalf (as a handler does) and replies. */
static void extend_for(struct fx_client *cl, uint64_t reqid, uint64_t f, uint64_t size)
{
	struct orch_frame_hdr h = { .type = ORCH_CL2SV_EXTEND, .reqid = reqid };
	struct sv_req *r = sv_req_create(&F.sv, cl->c, &h);
	struct orch_msg rep;

	orch_msg_init(&rep, 0);
	F.sv.s_acting = r;
	rep.status = orch_meta_inode_extend(F.sv.s_meta, f, size, orch_time_real_ns(),
					    &rep.attr);
	F.sv.s_acting = NULL;
	sv_reply(r, &rep);
}

/*
 * b changes f: a's push is numbered, b's own is marked OWN with b's
 * reqid, the holder that asked for no acks gets a plain push, and b's
 * reply waits until a acknowledged that push number.
 */
ORCH_TEST(reply_waits_for_the_other_holders_ack)
{
	struct fx_client *a, *b, *old;
	struct sv_ack_counts ac;
	uint64_t f;
	int n;

	ORCH_CHECK_OK(setup(30000));
	ORCH_CHECK(ack_holders(&a, &b, &old, &f) == 0);
	extend_for(b, 42, f, 4096);
	n = fx_read(a, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_SV2CL_INVAL_ATTR && FR[0].handle == f);
	ORCH_CHECK(FR[0].flags == ORCH_FRAME_PUSH && FR[0].reqid == 1);
	n = fx_read(old, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].flags == ORCH_FRAME_PUSH && FR[0].reqid == 0);
	n = fx_read(b, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_SV2CL_INVAL_ATTR);
	ORCH_CHECK(FR[0].flags == (ORCH_FRAME_PUSH | ORCH_FRAME_OWN) && FR[0].reqid == 42);
	sv_ack_counts(&F.sv, &ac);
	ORCH_CHECK(ac.parked == 1 && ac.waiting == 1);

	/* An ack of less does not release it; the ack of its number does. */
	sv_ack_received(&F.sv, a->c, 0);
	ORCH_CHECK(fx_read(b, FR, FX_FRAMES_MAX) == 0);
	sv_ack_received(&F.sv, a->c, 1);
	n = fx_read(b, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_CL2SV_EXTEND && FR[0].flags == ORCH_FRAME_REPLY);
	ORCH_CHECK(FR[0].reqid == 42 && FR[0].status == 0);
	sv_ack_counts(&F.sv, &ac);
	ORCH_CHECK(ac.by_ack == 1 && ac.by_expiry == 0 && ac.waiting == 0);

	/*
	 * An ack of numbers not sent yet (from the network) counts only up
	 * to the last one sent: the next push, number 2, still holds b's reply.
	 */
	sv_ack_received(&F.sv, a->c, 5);
	ORCH_CHECK(a->c->c_push_acked == 1);
	extend_for(b, 43, f, 8192);
	n = fx_read(a, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].reqid == 2);
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_CL2SV_EXTEND, 0) == 0);
	sv_ack_received(&F.sv, a->c, 2);
	n = fx_read(b, FR, FX_FRAMES_MAX);
	ORCH_CHECK(fx_count(FR, n, ORCH_CL2SV_EXTEND, 0) == 1);
	teardown();
}

/* A holder that closes its connection holds nobody: its copies went with it. */
ORCH_TEST(closed_holder_releases_the_reply)
{
	struct fx_client *a, *b, *old;
	uint64_t f;

	ORCH_CHECK_OK(setup(30000));
	ORCH_CHECK(ack_holders(&a, &b, &old, &f) == 0);
	extend_for(b, 7, f, 100);
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_CL2SV_EXTEND, 0) == 0);
	orch_conn_close(a->c, 0);
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_CL2SV_EXTEND, 0) == 1);
	teardown();
}

/*
 * A holder that never answers holds the reply until its lease runs out
 * (the record's term: lease_ms and the margin), not longer.
 */
ORCH_TEST(silent_holder_holds_the_reply_for_its_lease_only)
{
	struct fx_client *a, *b, *old;
	struct sv_ack_counts ac;
	uint64_t f, t0;
	int got = 0;

	ORCH_CHECK_OK(setup(200));
	ORCH_CHECK(ack_holders(&a, &b, &old, &f) == 0);
	t0 = orch_time_now_ms();
	extend_for(b, 9, f, 100);
	while (!got && orch_time_now_ms() - t0 < 5000) {
		fx_run_loop(&F, 50);
		got = fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_CL2SV_EXTEND, 0);
	}
	ORCH_CHECK(got == 1);
	/* Not before the lease's end: 200 ms + SV_LEASE_MARGIN_MS after the grant. */
	ORCH_CHECK(orch_time_now_ms() - t0 >= 200 + SV_LEASE_MARGIN_MS - 50);
	sv_ack_counts(&F.sv, &ac);
	ORCH_CHECK(ac.by_expiry == 1 && ac.by_ack == 0);
	teardown();
}

/* The replies of changes that concern no other holder, and of reads, never wait. */
ORCH_TEST(only_others_holders_hold_a_reply)
{
	struct fx_client *a, *b, *old;
	struct sv_ack_counts ac;
	uint64_t f, g;

	ORCH_CHECK_OK(setup(30000));
	ORCH_CHECK(ack_holders(&a, &b, &old, &f) == 0);
	g = fx_mkfile(&F, "g");
	ORCH_CHECK(g);
	grant_attr(b, g);
	extend_for(b, 11, g, 100); /* only b holds g */
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_CL2SV_EXTEND, 0) == 1);
	sv_ack_counts(&F.sv, &ac);
	ORCH_CHECK(ac.parked == 0);
	teardown();
}

/*
 * A create in a directory another client holds: the name's push and the
 * directory's are both numbered, and the reply waits for the ack of the
 * later one (an ack covers every push up to its number).
 */
ORCH_TEST(name_pushes_are_numbered_and_waited_for)
{
	struct orch_frame_hdr h = { .type = ORCH_CL2SV_CREATE, .reqid = 5 };
	struct fx_client *a, *b;
	struct sv_ack_counts ac;
	struct orch_msg rep;
	struct sv_req *r;
	uint64_t last = 0;
	int n;

	ORCH_CHECK_OK(setup(30000));
	a = fx_client(&F, true);
	b = fx_client(&F, true);
	ORCH_CHECK(a && b);
	a->c->c_features |= ORCH_FEAT_ACKS;
	b->c->c_features |= ORCH_FEAT_ACKS;
	grant_readdir(a, ROOT_DIR, 100, 0);
	r = sv_req_create(&F.sv, b->c, &h);
	ORCH_CHECK(r);
	F.sv.s_acting = r;
	ORCH_CHECK(fx_mkfile(&F, "new") != 0);
	F.sv.s_acting = NULL;
	orch_msg_init(&rep, 0);
	sv_reply(r, &rep);
	n = fx_read(a, FR, FX_FRAMES_MAX);
	ORCH_CHECK(fx_count(FR, n, ORCH_SV2CL_INVAL_ENTRY, ROOT_DIR) == 1);
	ORCH_CHECK(fx_count(FR, n, ORCH_SV2CL_INVAL_ATTR, ROOT_DIR) == 1);
	for (int i = 0; i < n; i++) {
		ORCH_CHECK(FR[i].flags == ORCH_FRAME_PUSH && FR[i].reqid == last + 1);
		last = FR[i].reqid;
	}
	sv_ack_counts(&F.sv, &ac);
	ORCH_CHECK(ac.parked == 1);
	sv_ack_received(&F.sv, a->c, last - 1);
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_CL2SV_CREATE, 0) == 0);
	sv_ack_received(&F.sv, a->c, last);
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_CL2SV_CREATE, 0) == 1);
	teardown();
}

/*
 * A full table revokes everything: until a holder acknowledged its REVOKE
 * no record says what it holds, so every change's reply waits for it.
 */
ORCH_TEST(unacknowledged_revoke_holds_every_change)
{
	struct fx_client *a, *b, *old;
	uint64_t f, g;
	int n;

	ORCH_CHECK_OK(setup(30000));
	ORCH_CHECK(ack_holders(&a, &b, &old, &f) == 0);
	g = fx_mkfile(&F, "g");
	ORCH_CHECK(g);
	/* A listing too large for what is left: the table is emptied, holders revoked. */
	grant_readdir(b, ROOT_DIR, 1000, 1024);
	for (uint32_t i = 0; F.sv.s_lease_revokes == 0 && i < SV_LEASE_MAX / 1024 + 2; i++)
		grant_readdir(b, ROOT_DIR, 2000 + (uint64_t)i * 1024, 1024);
	ORCH_CHECK(F.sv.s_lease_revokes == 1);
	sv_lease_flush(&F.sv, NULL);
	n = fx_read(a, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_SV2CL_REVOKE && FR[0].reqid == 1);
	fx_read(b, FR, FX_FRAMES_MAX);
	/* g was held by nobody; b's change of it still waits for a's REVOKE. */
	extend_for(b, 8, g, 10);
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_CL2SV_EXTEND, 0) == 0);
	sv_ack_received(&F.sv, a->c, 1);
	n = fx_read(b, FR, FX_FRAMES_MAX);
	ORCH_CHECK(fx_count(FR, n, ORCH_CL2SV_EXTEND, 0) == 1);
	/* Once acknowledged, changes of what nobody holds do not wait. */
	extend_for(b, 9, g, 20);
	ORCH_CHECK(fx_count(FR, fx_read(b, FR, FX_FRAMES_MAX), ORCH_CL2SV_EXTEND, 0) == 1);
	teardown();
}
