/*
 * The server's intent machine (src/server/intent.c) on its own, against a
 * real namespace, with this file standing in for the peer transport
 * (sv_peer_call: the calls are queued, and the test answers them) and the
 * flusher (sv_flusher_after: the waits are parked until the test flushes).
 * So the test decides when each step of a cross-server operation happens,
 * and checks the order the design requires (docs/DESIGN.md, "Intents"):
 * no peer is asked before the local change is durable, the local change
 * finishes only on the peer's answer, a restart replays what was left, an
 * unreachable peer is asked again, free-data intents go out in batches, and
 * peers are told to forget only after a flush.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/time.h"
#include "proto/wire.h"
#include "server/flush.h"
#include "server/intent.h"
#include "server/sv_peer.h"
#include "server/sv_req.h"
#include "store/store.h"
#include "unit/sv_fx.h"
#include "unit/test.h"

#define ROOT_DIR 1
#define PEER 1                                                   /* the other server */
#define REMOTE(n) ((uint64_t)PEER << ORCH_HANDLE_SERVER_SHIFT | (n)) /* held there */
#define NEWDIR REMOTE(7)                                         /* a directory there */

static struct sv_fx F;
static struct fx_frame FR[FX_FRAMES_MAX];

/* --- The peer transport, faked: calls wait for the test's answer ----------- */

#define CALLS_MAX 300

struct fake_call {
	unsigned int peer;
	struct orch_msg m;               /* scalars; the name and data copied below */
	char name[ORCH_NAME_MAX + 1];
	uint64_t handles[ORCH_DATA_DELETE_MANY_MAX]; /* DATA_DELETE_MANY */
	uint32_t nhandles;
	sv_peer_cb cb;
	void *arg;
};

static struct fake_call CALLS[CALLS_MAX];
static int NCALLS;

/* The transport's state: here, only whether it is up (sv->s_peers set). */
struct sv_peers {
	bool up;
};

static struct sv_peers PEERS = { .up = true };

void sv_peer_call(struct sv_server *sv, unsigned int peer, struct orch_msg *m, sv_peer_cb cb,
		  void *arg)
{
	struct fake_call *c = &CALLS[NCALLS++];

	if (NCALLS > CALLS_MAX)
		abort();
	*c = (struct fake_call){ .peer = peer, .m = *m, .cb = cb, .arg = arg };
	if (m->name.len)
		memcpy(c->name, m->name.s, m->name.len);
	c->m.name = orch_str_of(c->name, m->name.len);
	c->nhandles = m->data.len / 8;
	for (uint32_t i = 0; i < c->nhandles && i < ORCH_DATA_DELETE_MANY_MAX; i++)
		c->handles[i] = orch_get_u64((const uint8_t *)m->data.s + 8 * i);
	c->m.data = orch_str_of(NULL, 0);
	(void)sv;
}

/*
 * Answers call @i: with a reply of status @status (and the fields of
 * @rep, if not NULL), or, with @reach set, the transport's failure
 * @reach (no reply: -EHOSTDOWN, -ETIMEDOUT, -ESHUTDOWN).
 */
static void answer(int i, int status, const struct orch_msg *rep, int reach)
{
	struct fake_call c = CALLS[i];
	struct orch_msg m;

	memmove(&CALLS[i], &CALLS[i + 1], (size_t)(NCALLS - i - 1) * sizeof(CALLS[0]));
	NCALLS--;
	if (reach) {
		c.cb(&F.sv, c.arg, reach, NULL);
		return;
	}
	if (rep)
		m = *rep;
	else
		orch_msg_init(&m, 0);
	m.type = c.m.type;
	m.flags = ORCH_FRAME_REPLY;
	m.status = status;
	c.cb(&F.sv, c.arg, status, &m);
}

/* --- The flusher, faked: waits are parked until flush() -------------------- */

#define WAITS_MAX 300

struct fake_wait {
	sv_flushed_fn fn;
	void *arg;
};

static struct fake_wait WAITS[WAITS_MAX];
static int NWAITS;

void sv_flusher_after(struct sv_server *sv, sv_flushed_fn fn, void *arg)
{
	(void)sv;
	if (NWAITS == WAITS_MAX)
		abort();
	WAITS[NWAITS++] = (struct fake_wait){ fn, arg };
}

void sv_flusher_dirty(struct sv_server *sv)
{
	(void)sv;
}

struct durable_reply {
	struct sv_req *dr_req;
	struct orch_msg dr_msg;
};

static void durable_reply_send(struct sv_server *sv, void *arg, int error)
{
	struct durable_reply *dr = arg;

	(void)sv;
	if (error && !dr->dr_msg.status) {
		orch_msg_init(&dr->dr_msg, 0);
		dr->dr_msg.status = error;
	}
	sv_reply(dr->dr_req, &dr->dr_msg);
	free(dr);
}

void sv_flusher_reply(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct durable_reply *dr = malloc(sizeof(*dr));

	if (!dr)
		abort();
	dr->dr_req = r;
	dr->dr_msg = *m;
	sv_flusher_after(sv, durable_reply_send, dr);
}

/*
 * One flush: what was parked when it began is durable now (@error 0) or
 * failed; waits parked meanwhile are for the next one.
 */
static void flush(int error)
{
	struct fake_wait w[WAITS_MAX];
	int n = NWAITS;

	memcpy(w, WAITS, (size_t)n * sizeof(w[0]));
	NWAITS = 0;
	for (int i = 0; i < n; i++)
		w[i].fn(&F.sv, w[i].arg, error);
}

/* --- Fixture --------------------------------------------------------------- */

/* The transport up and the intent machine made, as main.c does. */
static int start(void)
{
	F.sv.s_peers = &PEERS;
	return sv_intent_init(&F.sv);
}

/*
 * What the server does at stop: the transport fails the calls in flight
 * and goes, the machine stops, and the flusher's last flush fails what
 * still waits.
 */
static void stop(void)
{
	while (NCALLS)
		answer(0, 0, NULL, -ESHUTDOWN);
	F.sv.s_peers = NULL;
	sv_intent_fini(&F.sv);
	flush(-ESHUTDOWN);
}

static int setup(void)
{
	int error = fx_setup(&F, 0, 2, 0);

	NCALLS = NWAITS = 0;
	return error ? error : start();
}

static void teardown(void)
{
	stop();
	if (F.sv.s_store)
		orch_store_close(F.sv.s_store);
	F.sv.s_store = NULL;
	fx_teardown(&F);
}

/* A store in the fixture's directory, for the data intents' local steps. */
static int setup_store(void)
{
	struct orch_store_geom g = { .size = 64 << 20, .ag_blocks = 4096, .maxext = 256 };
	int error = orch_store_mkfs(F.dir, &g, false);

	return error ? error : orch_store_open(F.dir, &F.sv.s_store);
}

static int count_one(void *arg, uint64_t id, uint32_t kind, const void *body, size_t len)
{
	(void)id, (void)kind, (void)body, (void)len;
	++*(int *)arg;
	return 0;
}

/* Intent records in the namespace. */
static int intents(void)
{
	int n = 0;

	return orch_meta_intent_foreach(F.sv.s_meta, count_one, &n) ? -1 : n;
}

/* A request of @type from @cl, to wait on an intent. */
static struct sv_req *request(struct fx_client *cl, uint16_t type, uint64_t reqid)
{
	struct orch_frame_hdr h = { .type = type, .reqid = reqid };

	return sv_req_create(&F.sv, cl->c, &h);
}

/* Writes @in in its own transaction (C1, as a handler does).  0 or -errno. */
static int insert(struct sv_intent *in, int (*local)(void))
{
	int error = orch_meta_begin(F.sv.s_meta);

	if (error)
		return error;
	error = local ? local() : 0;
	if (!error)
		error = sv_intent_insert(&F.sv, in);
	if (error) {
		orch_meta_abort(F.sv.s_meta);
		return error;
	}
	return orch_meta_commit(F.sv.s_meta);
}

static int mark_a_busy(void)
{
	return orch_meta_dirent_set_busy(F.sv.s_meta, ROOT_DIR, "a", 1, true);
}

/*
 * C1 of a rename of /a to NEWDIR/b (held by the peer), as sv_cl_rename
 * writes it: "a" busy and a RENAME intent, committed.  NULL on failure.
 */
static struct sv_intent *rename_a(uint64_t a)
{
	struct sv_intent *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->i_kind = SV_INTENT_RENAME;
	in->i_peer = PEER;
	in->i_handle = a;
	in->i_parent = ROOT_DIR;
	strcpy(in->i_name, "a");
	in->i_attr.parent = NEWDIR;
	in->i_attr.mode = S_IFREG;
	strcpy(in->i_name2, "b");
	in->i_cred = FX_ROOT;
	if (insert(in, mark_a_busy)) {
		free(in);
		return NULL;
	}
	return in;
}

static int lookup(const char *name)
{
	struct orch_dirent de;

	return orch_meta_lookup(F.sv.s_meta, &FX_ROOT, ROOT_DIR, name, strlen(name), &de);
}

/*
 * A client, file /a, and the rename of /a to NEWDIR/b started with the
 * client's request @reqid waiting for it.  The intent's id, 0 on failure.
 */
static uint64_t start_rename(struct fx_client **cl, uint64_t *a, uint64_t reqid)
{
	struct sv_intent *in;
	uint64_t id;

	*cl = fx_client(&F, false);
	*a = fx_mkfile(&F, "a");
	in = *cl && *a ? rename_a(*a) : NULL;
	if (!in)
		return 0;
	id = in->i_id;
	sv_intent_start(&F.sv, in, request(*cl, ORCH_CL2SV_RENAME, reqid));
	return id;
}

/* --- Cases ----------------------------------------------------------------- */

ORCH_TEST(rename_steps_in_order)
{
	struct fx_client *cl;
	struct orch_msg rep;
	uint64_t a, id;
	int n;

	ORCH_CHECK_OK(setup());
	id = start_rename(&cl, &a, 7);
	ORCH_CHECK(id);

	/* C1 is committed, not known durable: nobody is asked yet. */
	ORCH_CHECK(NCALLS == 0 && NWAITS == 1);
	ORCH_CHECK(intents() == 1);
	ORCH_CHECK_RC(mark_a_busy(), -EBUSY);
	flush(0);

	/* P1: the peer adds the new entry, told everything it needs. */
	ORCH_CHECK(NCALLS == 1);
	ORCH_CHECK(CALLS[0].peer == PEER && CALLS[0].m.type == ORCH_SV2SV_RENAME_IN);
	ORCH_CHECK(CALLS[0].m.origin == 0 && CALLS[0].m.id == id);
	ORCH_CHECK(CALLS[0].m.handle == a && CALLS[0].m.parent == NEWDIR);
	ORCH_CHECK(strcmp(CALLS[0].name, "b") == 0 && CALLS[0].m.newparent == ROOT_DIR);
	ORCH_CHECK(fx_read(cl, FR, FX_FRAMES_MAX) == 0);
	ORCH_CHECK(lookup("a") == 0);

	/* C2 on its answer: the old name goes with the intent, and the caller hears. */
	orch_msg_init(&rep, 0);
	answer(0, 0, &rep, 0);
	ORCH_CHECK(intents() == 0);
	ORCH_CHECK_RC(lookup("a"), -ENOENT);
	n = fx_read(cl, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].type == ORCH_CL2SV_RENAME && FR[0].flags == ORCH_FRAME_REPLY);
	ORCH_CHECK(FR[0].reqid == 7 && FR[0].status == 0);
	ORCH_CHECK(F.sv.s_intents_done == 1);
	ORCH_CHECK(NCALLS == 0 && NWAITS == 0);
	teardown();
}

ORCH_TEST(refused_rename_keeps_the_old_name)
{
	struct fx_client *cl;
	uint64_t a;
	int n;

	ORCH_CHECK_OK(setup());
	ORCH_CHECK(start_rename(&cl, &a, 8));
	flush(0);
	ORCH_CHECK(NCALLS == 1);
	answer(0, -EEXIST, NULL, 0);
	ORCH_CHECK(intents() == 0);
	ORCH_CHECK(lookup("a") == 0);
	/* No longer busy: it can be marked again. */
	ORCH_CHECK_OK(mark_a_busy());
	n = fx_read(cl, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].reqid == 8 && FR[0].status == -EEXIST);
	teardown();
}

/*
 * A restart in the middle: once before C1 was known durable, once after
 * the peer was asked.  The records stay; the replay waits for a flush
 * before it asks again, with the same intent id (the peer's key for
 * answering from what it applied).
 */
ORCH_TEST(restart_replays_what_was_left)
{
	struct sv_intent *in;
	struct orch_msg rep;
	uint64_t a, id;

	ORCH_CHECK_OK(setup());
	a = fx_mkfile(&F, "a");
	ORCH_CHECK(a);
	in = rename_a(a);
	ORCH_CHECK(in);
	id = in->i_id;
	sv_intent_start(&F.sv, in, NULL);
	ORCH_CHECK(NWAITS == 1 && NCALLS == 0);
	stop(); /* the flush it waited for fails after the machine is gone */
	ORCH_CHECK(intents() == 1);

	ORCH_CHECK_OK(fx_reopen_meta(&F));
	ORCH_CHECK_OK(start());
	sv_intent_replay_all(&F.sv);
	ORCH_CHECK(NCALLS == 0 && NWAITS == 1);
	flush(0);
	ORCH_CHECK(NCALLS == 1 && CALLS[0].m.id == id && CALLS[0].m.type == ORCH_SV2SV_RENAME_IN);
	stop(); /* asked, not answered */
	ORCH_CHECK(intents() == 1);
	ORCH_CHECK_RC(mark_a_busy(), -EBUSY);

	ORCH_CHECK_OK(fx_reopen_meta(&F));
	ORCH_CHECK_OK(start());
	sv_intent_replay_all(&F.sv);
	ORCH_CHECK(NCALLS == 0);
	flush(0);
	ORCH_CHECK(NCALLS == 1 && CALLS[0].m.id == id);
	ORCH_CHECK(strcmp(CALLS[0].name, "b") == 0 && CALLS[0].m.handle == a);
	orch_msg_init(&rep, 0);
	answer(0, 0, &rep, 0);
	ORCH_CHECK(intents() == 0);
	ORCH_CHECK_RC(lookup("a"), -ENOENT);
	teardown();
}

/*
 * A peer that cannot be reached: the caller is answered at its deadline
 * (EIO), the intent stays and is driven again by the retry tick, without
 * another flush (C1 is durable already), until the peer answers.
 */
ORCH_TEST(unreachable_peer_is_asked_again)
{
	struct fx_client *cl;
	struct orch_msg rep;
	uint64_t a, id;
	int n;

	ORCH_CHECK_OK(setup());
	F.sv.s_cfg.op_timeout_ms = 0; /* the caller's deadline is now */
	id = start_rename(&cl, &a, 9);
	ORCH_CHECK(id);
	flush(0);
	ORCH_CHECK(NCALLS == 1);
	answer(0, 0, NULL, -EHOSTDOWN);
	n = fx_read(cl, FR, FX_FRAMES_MAX);
	ORCH_CHECK(n == 1 && FR[0].reqid == 9 && FR[0].status == -EIO);
	ORCH_CHECK(NCALLS == 0 && intents() == 1);

	fx_run_loop(&F, 1200); /* the retry tick: once a second */
	ORCH_CHECK(NWAITS == 0);
	ORCH_CHECK(NCALLS == 1 && CALLS[0].m.id == id && CALLS[0].m.type == ORCH_SV2SV_RENAME_IN);
	orch_msg_init(&rep, 0);
	answer(0, 0, &rep, 0);
	ORCH_CHECK(intents() == 0);
	ORCH_CHECK_RC(lookup("a"), -ENOENT);
	ORCH_CHECK(fx_read(cl, FR, FX_FRAMES_MAX) == 0); /* answered once */
	teardown();
}

/* Writes a FREE_DATA intent of @h (as the last unlink does) and starts it unwaited. */
static int free_data(uint64_t h)
{
	struct sv_intent *in;
	int error = orch_meta_begin(F.sv.s_meta);

	if (error)
		return error;
	error = sv_intent_insert_free_data(&F.sv, h, &in);
	if (error) {
		orch_meta_abort(F.sv.s_meta);
		return error;
	}
	error = orch_meta_commit(F.sv.s_meta);
	if (error)
		return error;
	sv_intent_start(&F.sv, in, NULL);
	return 0;
}

/*
 * Freeing data waits for company (10 ms), then for C1 to be durable; then
 * one DATA_DELETE_MANY per peer carries every handle, and the intents go
 * in one transaction once our own deletes are durable too.
 */
ORCH_TEST(free_data_goes_in_batches)
{
	const uint64_t h1 = 100, h2 = 101;

	ORCH_CHECK_OK(setup());
	ORCH_CHECK_OK(setup_store());
	ORCH_CHECK_OK(free_data(h1));
	ORCH_CHECK_OK(free_data(h2));
	ORCH_CHECK(intents() == 2);
	ORCH_CHECK(NCALLS == 0 && NWAITS == 0); /* collecting */
	fx_run_loop(&F, 50);
	ORCH_CHECK(NCALLS == 0 && NWAITS == 1);
	flush(0);
	ORCH_CHECK(NCALLS == 1 && CALLS[0].peer == PEER);
	ORCH_CHECK(CALLS[0].m.type == ORCH_SV2SV_DATA_DELETE_MANY && CALLS[0].nhandles == 2);
	ORCH_CHECK(CALLS[0].handles[0] == h1 && CALLS[0].handles[1] == h2);
	answer(0, 0, NULL, 0);
	/* Our deletes must be durable before the intents' deletion. */
	ORCH_CHECK(intents() == 2 && NWAITS == 1);
	flush(0);
	ORCH_CHECK(intents() == 0);
	ORCH_CHECK(F.sv.s_intents_done == 2);
	teardown();
}

/* A peer that fails a batch: each intent goes on alone, retried, after its own flush. */
ORCH_TEST(failed_batch_goes_on_intent_by_intent)
{
	const uint64_t h1 = 100, h2 = 101;
	uint64_t seen = 0;

	ORCH_CHECK_OK(setup());
	ORCH_CHECK_OK(setup_store());
	ORCH_CHECK_OK(free_data(h1));
	ORCH_CHECK_OK(free_data(h2));
	fx_run_loop(&F, 50);
	flush(0);
	ORCH_CHECK(NCALLS == 1);
	answer(0, -EIO, NULL, 0);
	ORCH_CHECK(intents() == 2 && NCALLS == 0);

	fx_run_loop(&F, 1200); /* the retry tick */
	ORCH_CHECK(NCALLS == 0 && NWAITS == 2);
	flush(0);
	ORCH_CHECK(NCALLS == 2);
	for (int i = 0; i < 2; i++) {
		ORCH_CHECK(CALLS[i].m.type == ORCH_SV2SV_DATA_DELETE && CALLS[i].peer == PEER);
		seen |= CALLS[i].m.handle == h1 ? 1 : CALLS[i].m.handle == h2 ? 2 : 4;
	}
	ORCH_CHECK(seen == 3);
	answer(0, 0, NULL, 0);
	answer(0, 0, NULL, 0);
	ORCH_CHECK(intents() == 0);
	teardown();
}

/*
 * Peers keep an "applied" record per intent of ours; every 256 finished
 * intents they are told which they may forget, but only after a flush, so
 * that our finished steps are durable first.
 */
ORCH_TEST(peers_forget_only_after_a_flush)
{
	uint64_t last = 0;

	ORCH_CHECK_OK(setup());
	for (int i = 0; i < 256; i++) {
		struct sv_intent *in = calloc(1, sizeof(*in));

		ORCH_CHECK(in);
		in->i_kind = SV_INTENT_SET_PARENT;
		in->i_peer = PEER;
		in->i_handle = REMOTE(1000 + i);
		in->i_parent = ROOT_DIR;
		ORCH_CHECK_OK(insert(in, NULL));
		last = in->i_id;
		sv_intent_start(&F.sv, in, NULL);
		flush(0);
		ORCH_CHECK(NCALLS == 1 && CALLS[0].m.type == ORCH_SV2SV_SET_PARENT);
		ORCH_CHECK(CALLS[0].m.parent == ROOT_DIR && CALLS[0].m.handle == REMOTE(1000 + i));
		answer(0, 0, NULL, 0);
	}
	ORCH_CHECK(intents() == 0);
	ORCH_CHECK(NCALLS == 0 && NWAITS == 1);
	flush(0);
	ORCH_CHECK(NCALLS == 1 && CALLS[0].peer == PEER);
	ORCH_CHECK(CALLS[0].m.type == ORCH_SV2SV_APPLIED_TRIM);
	ORCH_CHECK(CALLS[0].m.origin == 0 && CALLS[0].m.id == last + 1);
	teardown();
}

/* While the target side of a rename runs its own intent, the peer's retries wait. */
ORCH_TEST(origin_running_while_its_intent_runs)
{
	struct sv_intent *in = calloc(1, sizeof(*in));

	ORCH_CHECK_OK(setup());
	ORCH_CHECK(in);
	in->i_kind = SV_INTENT_RENAME_IN_OVER;
	in->i_peer = PEER;
	in->i_handle = REMOTE(3);
	in->i_parent = ROOT_DIR;
	strcpy(in->i_name, "victim");
	in->i_origin = PEER;
	in->i_origin_id = 99;
	in->i_handle2 = REMOTE(4);
	ORCH_CHECK_OK(insert(in, NULL));
	ORCH_CHECK(!sv_intent_origin_running(&F.sv, PEER, 99));
	sv_intent_start(&F.sv, in, NULL);
	ORCH_CHECK(sv_intent_origin_running(&F.sv, PEER, 99));
	ORCH_CHECK(!sv_intent_origin_running(&F.sv, PEER, 98));
	ORCH_CHECK(!sv_intent_origin_running(&F.sv, 0, 99));
	flush(0);
	ORCH_CHECK(NCALLS == 1 && CALLS[0].m.type == ORCH_SV2SV_RMDIR_INODE);
	answer(0, -ENOTEMPTY, NULL, 0);
	ORCH_CHECK(!sv_intent_origin_running(&F.sv, PEER, 99));
	ORCH_CHECK(intents() == 0);
	teardown();
}

ORCH_TEST_MAIN()
