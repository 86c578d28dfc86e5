/*
 * Cross-server operations as intents (XFS intent/done items, one record per
 * operation).  The coordinator writes the intent in the same transaction as
 * its local change (step C1), then asks the peer(s) (step P1); when they
 * answer, one more transaction (C2) applies the rest of the local change and
 * deletes the intent.  A crash in between leaves the intent, which
 * sv_intent_replay_all() drives again at start; the peers' side is
 * idempotent (sv_sv.c).  An unreachable peer leaves the intent running: it
 * is retried every second until done, while a waiting client is answered
 * -ETIMEDOUT at its deadline.
 *
 * The steps are ordered by durability, so that a power cut of either side
 * at any point converges (docs/DESIGN.md, "Intents", argues it step by
 * step): no peer is asked before C1 is durable (else a cut of ours could
 * forget an intent whose peer step stands: two names, or an inode nobody
 * names); a peer answers only once P1 is durable (sv_flusher_reply: else C2
 * could stand on a step that a cut of the peer undid: no name at all); a
 * data intent's local store step is durable before C2 (else the deleted
 * object comes back with nothing left to delete it); and a peer forgets its
 * record of P1 only once our C2 is durable (intent_trim_peers: else a
 * replay of ours would find P1 neither applied nor remembered).  These
 * flushes are the price of a cross-server step, shared by every intent in
 * flight (the flusher's group commit); same-server operations pay none.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/pcut.h"
#include "common/time.h"
#include "proto/layout.h"
#include "proto/wire.h"
#include "server/flush.h"
#include "server/intent.h"
#include "server/sv.h"
#include "server/sv_ns.h"
#include "server/sv_peer.h"
#include "server/sv_mirror.h"
#include "server/sv_req.h"
#include "server/sv_writers.h"

#define INTENT_BODY_VERSION 1
#define INTENT_RETRY_MS 1000
/* Peers forget their idempotency records of ours every this many intents. */
#define INTENT_TRIM_EVERY 256
/* FREE_DATA intents nobody waits for go out in batches of at most ... */
#define INTENT_FREE_BATCH 256
/* ... and the first of a batch waits at most this long for company. */
#define INTENT_FREE_DELAY_MS 10

#if INTENT_FREE_BATCH > ORCH_DATA_DELETE_MANY_MAX
#error "a free-data batch must fit one SV2SV_DATA_DELETE_MANY"
#endif

struct intent_run {
	struct sv_intent *ir_in;
	struct sv_req *ir_waiter;   /* NULL once answered or for background work */
	unsigned int ir_outstanding; /* peer calls and flush waits in flight */
	bool ir_retry;               /* a peer was unreachable: drive again later */
	bool ir_durable;             /* C1 is known durable: peers may act */
	bool ir_store_dirty;         /* a local store step since the last flush */
	struct intent_run *ir_next;  /* all active runs */
};

/* Flush callbacks name runs by id: a run may be gone (finished, or at stop). */
_Static_assert(sizeof(uintptr_t) >= sizeof(uint64_t), "intent ids fit a pointer");


/*
 * A batch of FREE_DATA intents: what an intent_run is for one, for up to
 * INTENT_FREE_BATCH.  Only the id and the handle of each are kept.
 */
struct free_batch {
	uint64_t fb_id[INTENT_FREE_BATCH];
	uint64_t fb_handle[INTENT_FREE_BATCH];
	unsigned int fb_n;
	unsigned int fb_outstanding; /* peer calls in flight */
	uint32_t fb_done_mask[(ORCH_SERVERS_MAX + 31) / 32];
	bool fb_store_dirty;         /* deleted here; not yet known durable */
	struct free_batch *fb_next;  /* in is_free_flying or is_free_syncing */
};

/* The intent machine of one server (sv->s_intents).  Loop thread only. */
struct sv_intents {
	struct intent_run *is_runs;          /* every intent running alone */
	struct orch_ev_timer is_timer;       /* drives again the runs that must retry */
	bool is_timer_armed;
	unsigned int is_since_trim;          /* intents finished since the last trim */
	uint64_t is_last_done;               /* the highest id finished */
	struct free_batch *is_free_filling;  /* collecting; sent by the free timer */
	struct free_batch *is_free_full;     /* full, sent by the free timer (armed for now) */
	struct free_batch *is_free_syncing;  /* waiting for a flush (before sending, or finishing) */
	struct free_batch *is_free_flying;   /* sent, waiting for peers */
	struct orch_ev_timer is_free_timer;  /* sends the batch being filled */
	bool is_free_timer_armed;
};

static const char *const intent_names[] = {
	[SV_INTENT_MKDIR] = "mkdir",   [SV_INTENT_RMDIR] = "rmdir",
	[SV_INTENT_NLINK] = "nlink",   [SV_INTENT_FREE_DATA] = "free-data",
	[SV_INTENT_TRUNCATE] = "truncate", [SV_INTENT_SET_PARENT] = "set-parent",
	[SV_INTENT_LINK] = "link",     [SV_INTENT_RENAME] = "rename",
	[SV_INTENT_RENAME_OVER] = "rename-over", [SV_INTENT_RENAME_IN_OVER] = "rename-in-over",
};

/* Crash point @step of intent @in: "<kind>-<step>" (docs/DESIGN.md, "Intents"). */
static void intent_point(const struct sv_intent *in, const char *step)
{
	char name[64];

	if (!orch_pcut_enabled())
		return;
	snprintf(name, sizeof(name), "%s-%s", intent_names[in->i_kind], step);
	orch_pcut_point(name);
}

/* --- Encoding ------------------------------------------------------------------------------- */

static void intent_encode(const struct sv_intent *in, struct orch_buf *b)
{
	size_t namelen = strlen(in->i_name);

	orch_wr_u8(b, INTENT_BODY_VERSION);
	orch_wr_u32(b, in->i_peer);
	orch_wr_u64(b, in->i_handle);
	orch_wr_u64(b, in->i_parent);
	orch_wr_u64(b, in->i_size);
	orch_wr_u8(b, (uint8_t)namelen);
	orch_wr_bytes(b, in->i_name, namelen);
	orch_wr_u32(b, in->i_attr.mode);
	orch_wr_u32(b, in->i_attr.uid);
	orch_wr_u32(b, in->i_attr.gid);
	orch_wr_u64(b, in->i_attr.parent);
	orch_wr_u64(b, (uint64_t)in->i_attr.mtime_ns);
	orch_wr_u32(b, in->i_attr.layout.strip_size);
	orch_wr_u16(b, in->i_attr.layout.stripe_count);
	orch_wr_u16(b, in->i_attr.layout.first_server);
	namelen = strlen(in->i_name2);
	orch_wr_u8(b, (uint8_t)namelen);
	orch_wr_bytes(b, in->i_name2, namelen);
	orch_wr_u32(b, in->i_flags);
	orch_wr_u32(b, in->i_cred.uid);
	orch_wr_u32(b, in->i_cred.gid);
	orch_wr_u16(b, (uint16_t)in->i_cred.ngroups);
	for (uint32_t i = 0; i < in->i_cred.ngroups; i++)
		orch_wr_u32(b, in->i_cred.groups[i]);
	orch_wr_u32(b, in->i_origin);
	orch_wr_u64(b, in->i_origin_id);
	orch_wr_u64(b, in->i_handle2);
}

/* Decodes and verifies an intent body read back from the database. */
static int intent_decode(const void *body, size_t len, struct sv_intent *in)
{
	struct orch_rd rd;
	struct orch_str name;

	orch_rd_init(&rd, body, len);
	if (orch_rd_u8(&rd) != INTENT_BODY_VERSION)
		return -EUCLEAN;
	in->i_peer = orch_rd_u32(&rd);
	in->i_handle = orch_rd_u64(&rd);
	in->i_parent = orch_rd_u64(&rd);
	in->i_size = orch_rd_u64(&rd);
	orch_rd_str8(&rd, &name, ORCH_NAME_MAX);
	if (!rd.err) {
		memcpy(in->i_name, name.s, name.len);
		in->i_name[name.len] = '\0';
	}
	in->i_attr.mode = orch_rd_u32(&rd);
	in->i_attr.uid = orch_rd_u32(&rd);
	in->i_attr.gid = orch_rd_u32(&rd);
	in->i_attr.parent = orch_rd_u64(&rd);
	in->i_attr.mtime_ns = (int64_t)orch_rd_u64(&rd);
	in->i_attr.atime_ns = in->i_attr.ctime_ns = in->i_attr.mtime_ns;
	in->i_attr.nlink = 2;
	in->i_attr.layout.strip_size = orch_rd_u32(&rd);
	in->i_attr.layout.stripe_count = orch_rd_u16(&rd);
	in->i_attr.layout.first_server = orch_rd_u16(&rd);
	orch_rd_str8(&rd, &name, ORCH_NAME_MAX);
	if (!rd.err) {
		memcpy(in->i_name2, name.s, name.len);
		in->i_name2[name.len] = '\0';
	}
	in->i_flags = orch_rd_u32(&rd);
	in->i_cred.uid = orch_rd_u32(&rd);
	in->i_cred.gid = orch_rd_u32(&rd);
	in->i_cred.ngroups = orch_rd_u16(&rd);
	if (in->i_cred.ngroups > ORCH_GROUPS_MAX)
		return -EUCLEAN;
	for (uint32_t i = 0; i < in->i_cred.ngroups; i++)
		in->i_cred.groups[i] = orch_rd_u32(&rd);
	in->i_origin = orch_rd_u32(&rd);
	in->i_origin_id = orch_rd_u64(&rd);
	in->i_handle2 = orch_rd_u64(&rd);
	return orch_rd_done(&rd, INTENT_BODY_VERSION) ? -EUCLEAN : 0;
}

int sv_intent_insert(struct sv_server *sv, struct sv_intent *in)
{
	struct orch_buf b;
	int error;

	orch_buf_init(&b, 4096);
	intent_encode(in, &b);
	error = b.b_err;
	if (!error)
		error = orch_meta_intent_insert(sv->s_meta, in->i_kind, b.b_data, b.b_len,
						&in->i_id);
	orch_buf_fini(&b);
	return error;
}

int sv_intent_insert_free_data(struct sv_server *sv, uint64_t h, struct sv_intent **out)
{
	struct sv_intent *in = calloc(1, sizeof(*in));
	int error;

	if (!in)
		return -ENOMEM;
	in->i_kind = SV_INTENT_FREE_DATA;
	in->i_handle = h;
	error = sv_intent_insert(sv, in);
	if (error) {
		free(in);
		return error;
	}
	*out = in;
	return 0;
}

/* --- Running ---------------------------------------------------------------------------------- */

static void intent_trim_done(struct sv_server *sv, void *arg, int error,
			     const struct orch_msg *rep)
{
	(void)sv;
	(void)arg;
	(void)error;
	(void)rep;
}

/* The smallest of @below and the ids in the batches of list @fb. */
static uint64_t intent_free_oldest(const struct free_batch *fb, uint64_t below)
{
	for (; fb; fb = fb->fb_next)
		for (unsigned int i = 0; i < fb->fb_n; i++)
			if (fb->fb_id[i] < below)
				below = fb->fb_id[i];
	return below;
}

static void intent_trim_send(struct sv_server *sv, void *arg, int error)
{
	uint64_t below = (uintptr_t)arg;

	if (error || !sv->s_peers)
		return; /* the next trim covers these too */
	for (unsigned int s = 0; s < sv->s_cfg.nservers; s++) {
		struct orch_msg m;

		if (s == sv->s_index)
			continue;
		orch_msg_init(&m, ORCH_SV2SV_APPLIED_TRIM);
		m.origin = sv->s_index;
		m.id = below;
		sv_peer_call(sv, s, &m, intent_trim_done, NULL);
	}
}

/*
 * Peers keep an "applied" record per intent of ours so that replays are
 * idempotent.  Every intent below the oldest one still running is done, so
 * its records may go, once its last step (C2) is durable: a cut that undid
 * C2 replays the intent, and the peer must still know it applied P1.  So
 * the trim goes out after the next flush; intents finishing meanwhile are
 * above the mark.
 */
static void intent_trim_peers(struct sv_server *sv)
{
	struct sv_intents *is = sv->s_intents;
	uint64_t below = is->is_last_done + 1;

	for (struct intent_run *run = is->is_runs; run; run = run->ir_next)
		if (run->ir_in->i_id < below)
			below = run->ir_in->i_id;
	below = intent_free_oldest(is->is_free_flying, below);
	below = intent_free_oldest(is->is_free_syncing, below);
	below = intent_free_oldest(is->is_free_full, below);
	below = intent_free_oldest(is->is_free_filling, below);
	sv_flusher_after(sv, intent_trim_send, (void *)(uintptr_t)below);
}

/*
 * --- Steps as changes of the namespace ---------------------------------------------------
 *
 * Every callback that may write the namespace (a peer's answer, a flush
 * done, a retry) runs as a change (sv_ns.h): through the server's replica
 * group if it has one, where its transactions are savepoints of a capture,
 * its replies wait for the entry and what it starts (intents, flushes)
 * waits for the entry to be applied.  In-memory state moves at once: a
 * step whose entry does not apply (this member left its group, or is
 * stopping) leaves its intent in the database, driven again at the next
 * start.  Without a group the callback simply runs.
 */
struct intent_step {
	void (*st_peer)(struct sv_server *sv, void *arg, int error, const struct orch_msg *rep);
	void (*st_flushed)(struct sv_server *sv, void *arg, int error);
	void (*st_timer)(void *arg);
	void *st_arg;
	int st_error;
	bool st_has_rep;
	struct orch_msg st_rep;   /* a peer's answer: scalar fields only, copied */
};

static int intent_step_run(struct sv_server *sv, void *arg)
{
	struct intent_step *st = arg;

	if (st->st_peer)
		st->st_peer(sv, st->st_arg, st->st_error, st->st_has_rep ? &st->st_rep : NULL);
	else if (st->st_flushed)
		st->st_flushed(sv, st->st_arg, st->st_error);
	else
		st->st_timer(st->st_arg);
	return 0;
}

static void intent_step_done(struct sv_server *sv, void *arg, int error)
{
	(void)sv;
	if (error)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "an intent's step was not applied (%s): its "
				   "intent is driven again at the next start", strerror(-error));
	free(arg);
}

static void intent_as_change(struct sv_server *sv, const struct intent_step *st)
{
	struct intent_step *copy;
	int error = -ENOMEM;

	if (!sv_ns_replicated(sv)) {
		intent_step_run(sv, (void *)st);
		return;
	}
	copy = malloc(sizeof(*copy));
	if (copy) {
		*copy = *st;
		if (copy->st_has_rep) {
			/* Only its scalars are read: no pointer into a gone frame survives. */
			copy->st_rep.name = copy->st_rep.name2 = copy->st_rep.target =
				copy->st_rep.xname = copy->st_rep.data = copy->st_rep.json =
				(struct orch_str){ 0 };
			copy->st_rep.dirents = NULL;
			copy->st_rep.ndirents = 0;
		}
		error = sv_ns_change(sv, NULL, intent_step_run, intent_step_done, copy);
		if (!error)
			return;
		free(copy);
	}
	/* Stopping: the step waits for the next start, like every unfinished intent. */
	if (error != -ESHUTDOWN)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "an intent's step could not be queued: its "
				   "intent is driven again at the next start");
}

static void intent_as_change_peer(struct sv_server *sv,
				  void (*fn)(struct sv_server *, void *, int, const struct orch_msg *),
				  void *arg, int error, const struct orch_msg *rep)
{
	struct intent_step st = { .st_peer = fn, .st_arg = arg, .st_error = error,
				  .st_has_rep = rep != NULL };

	if (rep)
		st.st_rep = *rep;
	intent_as_change(sv, &st);
}

static void intent_as_change_flushed(struct sv_server *sv,
				     void (*fn)(struct sv_server *, void *, int), void *arg,
				     int error)
{
	intent_as_change(sv, &(struct intent_step){ .st_flushed = fn, .st_arg = arg,
						    .st_error = error });
}

static void intent_drive(struct sv_server *sv, struct intent_run *run);

static void intent_answer(struct intent_run *run, struct orch_msg *m)
{
	struct sv_req *r = run->ir_waiter;

	if (!r)
		return;
	run->ir_waiter = NULL;
	if (r->r_type == ORCH_SV2SV_RENAME_IN)
		sv_flusher_reply(r->r_sv, r, m); /* RENAME_IN_OVER: a peer step, answered once durable */
	else
		sv_reply(r, m);
}

static void intent_answer_status(struct intent_run *run, int status)
{
	struct orch_msg m;

	orch_msg_init(&m, 0);
	m.status = status;
	intent_answer(run, &m);
}

static void intent_unlink_run(struct sv_intents *is, struct intent_run *run)
{
	for (struct intent_run **pp = &is->is_runs; *pp; pp = &(*pp)->ir_next) {
		if (*pp == run) {
			*pp = run->ir_next;
			return;
		}
	}
}

/*
 * The last local step: @apply (may be NULL) runs in the transaction that
 * deletes the intent.  Answers the waiter with @status unless @reply is given.
 */
static int intent_finish(struct sv_server *sv, struct intent_run *run,
			 int (*apply)(struct sv_server *, struct sv_intent *, void *), void *arg,
			 struct orch_msg *reply, int status)
{
	struct sv_intents *is = sv->s_intents;
	struct sv_intent *in = run->ir_in;
	struct sv_req *prev_acting = sv->s_acting;
	int error;

	intent_point(in, "answered");
	/*
	 * On behalf of the waiting request, if any: its reply waits for the
	 * other holders' acknowledgements of this step's changes too.
	 */
	if (run->ir_waiter)
		sv->s_acting = run->ir_waiter;
	sv_ns_acting(sv, sv->s_acting); /* through the group: pushed once applied */
	error = orch_meta_begin(sv->s_meta);
	if (!error && apply)
		error = apply(sv, in, arg);
	if (!error)
		error = orch_meta_intent_delete(sv->s_meta, in->i_id);
	if (error) {
		orch_meta_abort(sv->s_meta);
	} else {
		error = orch_meta_commit(sv->s_meta);
	}
	sv->s_acting = prev_acting;
	if (error) {
		/* Leave the intent for the next retry; nothing was half-applied. */
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot finish intent: id=%llu kind=%s: %s",
				   (unsigned long long)in->i_id, intent_names[in->i_kind],
				   strerror(-error));
		run->ir_retry = true;
		intent_answer_status(run, error);
		return error;
	}
	sv_flusher_dirty(sv);
	intent_point(in, "finished");
	sv->s_intents_done++;
	if (in->i_id > is->is_last_done)
		is->is_last_done = in->i_id;
	if (reply)
		intent_answer(run, reply);
	else
		intent_answer_status(run, status);
	intent_unlink_run(is, run);
	if (in->i_kind == SV_INTENT_TRUNCATE)
		sv_writers_sizing(sv, in->i_handle, false);
	free(run->ir_in);
	free(run);
	if (++is->is_since_trim >= INTENT_TRIM_EVERY) {
		is->is_since_trim = 0;
		intent_trim_peers(sv);
	}
	return 0;
}

/*
 * intent_finish for a run whose waiter (@waiter, may be NULL) the caller
 * took off it to answer later: the step is still made on its behalf.
 * Answers nobody.
 */
static int intent_finish_for(struct sv_server *sv, struct sv_req *waiter,
			     struct intent_run *run,
			     int (*apply)(struct sv_server *, struct sv_intent *, void *), void *arg)
{
	struct sv_req *prev_acting = sv->s_acting;
	int error;

	if (waiter)
		sv->s_acting = waiter;
	error = intent_finish(sv, run, apply, arg, NULL, 0);
	sv->s_acting = prev_acting;
	return error;
}

/* A peer could not be reached: keep the intent and try again later. */
static void intent_defer(struct sv_server *sv, struct intent_run *run, int error)
{
	(void)sv;
	run->ir_retry = true;
	if (run->ir_waiter && orch_time_now_ms() >= run->ir_waiter->r_deadline_ms)
		intent_answer_status(run, error == -EHOSTDOWN ? -EIO : error);
}

/* -- mkdir: the peer made the inode; the reserved name now points to it. */

static int intent_apply_mkdir(struct sv_server *sv, struct sv_intent *in, void *arg)
{
	const struct orch_attr *a = arg;

	return orch_meta_dirent_commit(sv->s_meta, in->i_parent, in->i_name, strlen(in->i_name),
				       a ? a->handle : 0);
}

static int intent_apply_rmdir(struct sv_server *sv, struct sv_intent *in, void *arg)
{
	size_t len = strlen(in->i_name);
	bool removed = arg != NULL, remote, freed;
	int error;

	error = orch_meta_dirent_set_busy(sv->s_meta, in->i_parent, in->i_name, len, false);
	if (error || !removed)
		return error == -ENOENT ? 0 : error;
	error = orch_meta_unlink(sv->s_meta, in->i_parent, in->i_name, len, &remote, &freed);
	return error == -ENOENT ? 0 : error;
}

static int intent_apply_link(struct sv_server *sv, struct sv_intent *in, void *arg)
{
	const struct orch_attr *a = arg;
	size_t len = strlen(in->i_name);
	int error;

	error = orch_meta_dirent_commit(sv->s_meta, in->i_parent, in->i_name, len, 0);
	if (error || !a)
		return error;
	return orch_meta_dirent_insert(sv->s_meta, NULL, in->i_parent, in->i_name, len,
				       in->i_handle, a->mode & S_IFMT);
}

/* -- rename: the peer holds the new entry; the old one goes (or stays, on failure). */

static int intent_apply_rename_undo(struct sv_server *sv, struct sv_intent *in, void *arg)
{
	int error;

	(void)arg;
	error = orch_meta_dirent_set_busy(sv->s_meta, in->i_parent, in->i_name,
					  strlen(in->i_name), false);
	return error == -ENOENT ? 0 : error;
}

/*
 * What the second step of a cross-server rename does here.  The moved inode
 * (X) is now under the new name on the peer; with RENAME_EXCHANGE the
 * peer's old inode (Y) takes X's old name here.  A moved directory's
 * parent pointer is set where it lives: here, on the peer (which did it),
 * or on a third server through a SET_PARENT intent (up to two).
 */
struct rename_step {
	uint64_t rs_y;             /* exchange: the inode coming here, else 0 */
	uint32_t rs_y_type;
	struct sv_intent *rs_next[2];
	int rs_nnext;
};

static int intent_rename_reparent(struct sv_server *sv, struct sv_intent *in,
				  struct rename_step *rs, uint64_t h, uint64_t parent)
{
	unsigned int owner = orch_handle_server(h);
	struct sv_intent *next;

	if (owner == sv->s_index)
		return orch_meta_inode_set_parent(sv->s_meta, h, parent);
	if (owner == in->i_peer)
		return 0; /* the peer set it in its step */
	next = calloc(1, sizeof(*next));
	if (!next)
		return -ENOMEM;
	next->i_kind = SV_INTENT_SET_PARENT;
	next->i_peer = owner;
	next->i_handle = h;
	next->i_parent = parent;
	rs->rs_next[rs->rs_nnext++] = next;
	return sv_intent_insert(sv, next);
}

static int intent_apply_rename(struct sv_server *sv, struct sv_intent *in, void *arg)
{
	struct rename_step *rs = arg;
	size_t len = strlen(in->i_name);
	int error;

	error = orch_meta_dirent_remove(sv->s_meta, in->i_parent, in->i_name, len);
	if (error == -ENOENT)
		return 0; /* replayed after it was done */
	if (error)
		return error;
	if (rs->rs_y) {
		error = orch_meta_dirent_insert(sv->s_meta, NULL, in->i_parent, in->i_name, len,
						rs->rs_y, rs->rs_y_type);
		if (!error && S_ISDIR(rs->rs_y_type))
			error = intent_rename_reparent(sv, in, rs, rs->rs_y, in->i_parent);
		if (error)
			return error;
	}
	if (!S_ISDIR(in->i_attr.mode))
		return 0;
	/* The moved directory's ".." now is the new parent, wherever it lives. */
	return intent_rename_reparent(sv, in, rs, in->i_handle, in->i_attr.parent);
}

static void intent_rename_done(struct sv_server *sv, struct intent_run *run, int error,
			       const struct orch_msg *rep)
{
	struct rename_step rs = { 0 };
	struct sv_req *waiter;

	if (error == -EAGAIN) {
		/* The peer is still finishing this step from an earlier try. */
		intent_defer(sv, run, error);
		return;
	}
	if (error || rep->size == 1) {
		/* Refused, or the new name already was this inode: nothing moves. */
		intent_finish(sv, run, intent_apply_rename_undo, NULL, NULL, error);
		return;
	}
	if (run->ir_in->i_flags & ORCH_RENAME_EXCHANGE) {
		rs.rs_y = rep->handle;
		rs.rs_y_type = rep->mode & S_IFMT;
	}
	/* With parent pointers to set elsewhere, the caller hears back after them. */
	waiter = run->ir_waiter;
	run->ir_waiter = NULL;
	if (intent_finish_for(sv, waiter, run, intent_apply_rename, &rs)) {
		if (waiter)
			sv_reply_status(waiter, -EIO);
		for (int i = 0; i < rs.rs_nnext; i++)
			free(rs.rs_next[i]);
		return;
	}
	if (!rs.rs_nnext && waiter)
		sv_reply_status(waiter, 0);
	for (int i = 0; i < rs.rs_nnext; i++)
		sv_intent_start(sv, rs.rs_next[i], i == rs.rs_nnext - 1 ? waiter : NULL);
}

/*
 * -- the target side of a cross-server rename over a directory held on a
 * third server: that server removed the (empty) victim; the entry now names
 * the inode moving in.  The coordinator's request is answered from here.
 */
static int intent_apply_rename_in_over(struct sv_server *sv, struct sv_intent *in, void *arg)
{
	bool removed = arg != NULL;
	size_t len = strlen(in->i_name);
	uint32_t type = in->i_attr.mode & S_IFMT;
	int error;

	error = orch_meta_dirent_set_busy(sv->s_meta, in->i_parent, in->i_name, len, false);
	if (error || !removed)
		return error == -ENOENT ? 0 : error;
	error = orch_meta_dirent_remove(sv->s_meta, in->i_parent, in->i_name, len);
	if (!error)
		error = orch_meta_dirent_insert(sv->s_meta, NULL, in->i_parent, in->i_name, len,
						in->i_handle2, type);
	if (!error && S_ISDIR(type) && orch_handle_server(in->i_handle2) == sv->s_index)
		error = orch_meta_inode_set_parent(sv->s_meta, in->i_handle2, in->i_parent);
	if (!error)
		error = orch_meta_applied_put(sv->s_meta, in->i_origin, in->i_origin_id, 1);
	return error;
}

bool sv_intent_running_on(const struct sv_server *sv, uint32_t kind, uint64_t handle)
{
	for (struct intent_run *run = sv->s_intents->is_runs; run; run = run->ir_next)
		if (run->ir_in->i_kind == kind && run->ir_in->i_handle == handle)
			return true;
	return false;
}

bool sv_intent_origin_running(const struct sv_server *sv, uint32_t origin, uint64_t origin_id)
{
	for (struct intent_run *run = sv->s_intents->is_runs; run; run = run->ir_next)
		if (run->ir_in->i_kind == SV_INTENT_RENAME_IN_OVER &&
		    run->ir_in->i_origin == origin && run->ir_in->i_origin_id == origin_id)
			return true;
	return false;
}

/*
 * -- rename over a remote directory: the peer removed the (empty) victim;
 * now the rename, as checked by the dry run, with both entries un-busied.
 */
struct rename_over {
	bool ro_done;            /* the victim is gone: rename */
	struct sv_intent *ro_next; /* SET_PARENT for a moved directory held elsewhere */
};

static int intent_apply_rename_over(struct sv_server *sv, struct sv_intent *in, void *arg)
{
	struct rename_over *ro = arg;
	uint64_t freed = 0, victim = 0, moved = 0;
	uint32_t victim_type = 0;
	size_t len = strlen(in->i_name), len2 = strlen(in->i_name2);
	int error;

	error = orch_meta_dirent_set_busy(sv->s_meta, in->i_parent, in->i_name, len, false);
	if (!error || error == -ENOENT)
		error = orch_meta_dirent_set_busy(sv->s_meta, in->i_attr.parent, in->i_name2,
						  len2, false);
	if (error == -ENOENT)
		error = 0;
	if (error || !ro->ro_done)
		return error;
	/* Checked by the dry run; the victim entry names a removed inode. */
	error = orch_meta_rename(sv->s_meta, NULL, in->i_parent, in->i_name, len,
				 in->i_attr.parent, in->i_name2, len2, in->i_flags, &freed,
				 &victim, &victim_type, &moved);
	if (error)
		return error == -ENOENT ? 0 : error; /* replayed after it was done */
	if (moved && ro->ro_next) {
		ro->ro_next->i_handle = moved;
		ro->ro_next->i_peer = orch_handle_server(moved);
		return sv_intent_insert(sv, ro->ro_next);
	}
	return 0;
}

static void intent_rename_over_done(struct sv_server *sv, struct intent_run *run, int error)
{
	struct rename_over ro = { .ro_done = !error };
	struct sv_intent *in = run->ir_in;
	struct sv_req *waiter;

	ro.ro_next = calloc(1, sizeof(*ro.ro_next));
	if (!ro.ro_next) {
		intent_defer(sv, run, -ENOMEM);
		return;
	}
	ro.ro_next->i_kind = SV_INTENT_SET_PARENT;
	ro.ro_next->i_parent = in->i_attr.parent;
	/* The caller hears back once a moved directory's parent pointer is set. */
	waiter = run->ir_waiter;
	run->ir_waiter = NULL;
	if (intent_finish_for(sv, waiter, run, intent_apply_rename_over, &ro)) {
		if (waiter)
			sv_reply_status(waiter, -EIO);
		free(ro.ro_next);
		return;
	}
	if (!ro.ro_next->i_id) {
		if (waiter)
			sv_reply_status(waiter, error);
		free(ro.ro_next);
		return;
	}
	sv_intent_start(sv, ro.ro_next, waiter);
}

static void intent_peer_done_step(struct sv_server *sv, void *arg, int error,
			     const struct orch_msg *rep)
{
	struct intent_run *run = arg;
	struct sv_intent *in = run->ir_in;
	struct orch_msg m;

	run->ir_outstanding--;
	if (!rep) {
		intent_defer(sv, run, error);
		return;
	}
	orch_msg_init(&m, 0);
	switch (in->i_kind) {
	case SV_INTENT_MKDIR:
		if (error) {
			intent_finish(sv, run, intent_apply_mkdir, NULL, NULL, error);
			return;
		}
		m.entry.handle = rep->attr.handle;
		m.entry.has_attr = true;
		m.entry.attr = rep->attr;
		intent_finish(sv, run, intent_apply_mkdir, &m.entry.attr, &m, 0);
		return;
	case SV_INTENT_RMDIR:
		/* Gone already: removed by an earlier try whose answer was lost. */
		if (error == -ENOENT)
			error = 0;
		intent_finish(sv, run, intent_apply_rmdir, error ? NULL : run, NULL, error);
		return;
	case SV_INTENT_LINK:
		if (error) {
			intent_finish(sv, run, intent_apply_link, NULL, NULL, error);
			return;
		}
		m.entry.handle = in->i_handle;
		m.entry.has_attr = true;
		m.entry.attr = rep->attr;
		intent_finish(sv, run, intent_apply_link, &m.entry.attr, &m, 0);
		return;
	case SV_INTENT_RENAME:
		intent_rename_done(sv, run, error, rep);
		return;
	case SV_INTENT_RENAME_OVER:
		intent_rename_over_done(sv, run, error == -ENOENT ? 0 : error);
		return;
	case SV_INTENT_RENAME_IN_OVER:
		if (error == -ENOENT)
			error = 0; /* the victim went in an earlier try */
		intent_finish(sv, run, intent_apply_rename_in_over, error ? NULL : run, NULL, error);
		return;
	case SV_INTENT_NLINK:
	case SV_INTENT_SET_PARENT:
		/* Already gone is done. */
		intent_finish(sv, run, NULL, NULL, NULL, error == -ENOENT ? 0 : error);
		return;
	default:
		/* FREE_DATA and TRUNCATE complete through intent_data_done(). */
		break;
	}
}

static void intent_peer_done(struct sv_server *sv, void *arg, int error, const struct orch_msg *rep)
{
	intent_as_change_peer(sv, intent_peer_done_step, arg, error, rep);
}

/* Per-server completion of FREE_DATA / TRUNCATE calls. */
struct data_call {
	struct intent_run *dc_run;
	unsigned int dc_server;
};

/* The run of intent @id; NULL if it finished, or the machine stopped. */
static struct intent_run *intent_run_find(struct sv_server *sv, uint64_t id)
{
	if (!sv->s_intents)
		return NULL;
	for (struct intent_run *run = sv->s_intents->is_runs; run; run = run->ir_next)
		if (run->ir_in->i_id == id)
			return run;
	return NULL;
}

static void intent_data_finish_if_done(struct sv_server *sv, struct intent_run *run);

static void intent_store_durable_step(struct sv_server *sv, void *arg, int error)
{
	struct intent_run *run = intent_run_find(sv, (uintptr_t)arg);

	if (!run)
		return;
	run->ir_outstanding--;
	if (error) {
		run->ir_retry = true; /* the tick drives it again, and flushes again */
		return;
	}
	run->ir_store_dirty = false;
	intent_data_finish_if_done(sv, run);
}

static void intent_store_durable(struct sv_server *sv, void *arg, int error)
{
	intent_as_change_flushed(sv, intent_store_durable_step, arg, error);
}

static void intent_data_finish_if_done(struct sv_server *sv, struct intent_run *run)
{
	struct sv_intent *in = run->ir_in;
	unsigned int n = in->i_kind == SV_INTENT_TRUNCATE ? in->i_attr.layout.stripe_count
							  : sv->s_cfg.nservers;
	struct orch_msg m;

	if (run->ir_outstanding)
		return;
	for (unsigned int s = 0; s < n; s++) {
		if (!(in->i_done_mask[s / 32] & (1u << (s % 32)))) {
			run->ir_retry = true;
			if (run->ir_waiter && orch_time_now_ms() >= run->ir_waiter->r_deadline_ms)
				intent_answer_status(run, -ETIMEDOUT);
			return;
		}
	}
	if (run->ir_store_dirty) {
		/* Our own store step must be durable before C2 may be. */
		intent_point(in, "stored");
		run->ir_outstanding++;
		sv_flusher_after(sv, intent_store_durable, (void *)(uintptr_t)in->i_id);
		return;
	}
	if (in->i_kind == SV_INTENT_TRUNCATE) {
		orch_msg_init(&m, 0);
		m.status = orch_meta_inode_get(sv->s_meta, in->i_handle, &m.attr);
		intent_finish(sv, run, NULL, NULL, &m, 0);
	} else {
		intent_finish(sv, run, NULL, NULL, NULL, 0);
	}
}

static void intent_data_done_step(struct sv_server *sv, void *arg, int error,
			     const struct orch_msg *rep)
{
	struct data_call *dc = arg;
	struct intent_run *run = dc->dc_run;

	run->ir_outstanding--;
	if (rep && !error)
		run->ir_in->i_done_mask[dc->dc_server / 32] |= 1u << (dc->dc_server % 32);
	else if (rep)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "peer failed to %s data: server=%u handle=%llx: %s",
				   intent_names[run->ir_in->i_kind], dc->dc_server,
				   (unsigned long long)run->ir_in->i_handle, strerror(-error));
	free(dc);
	intent_data_finish_if_done(sv, run);
}

static void intent_data_done(struct sv_server *sv, void *arg, int error, const struct orch_msg *rep)
{
	intent_as_change_peer(sv, intent_data_done_step, arg, error, rep);
}

/* FREE_DATA and TRUNCATE: every server still to do, in parallel. */
static void intent_drive_data(struct sv_server *sv, struct intent_run *run)
{
	struct sv_intent *in = run->ir_in;
	bool truncate = in->i_kind == SV_INTENT_TRUNCATE;
	unsigned int n = truncate ? in->i_attr.layout.stripe_count : sv->s_cfg.nservers;

	if (truncate && !orch_layout_is_valid(&in->i_attr.layout))
		n = 0;
	run->ir_outstanding++; /* hold the run while sending */
	for (unsigned int s = 0; s < n && s < sv->s_cfg.nservers; s++) {
		uint64_t local = truncate ? orch_layout_local_size(&in->i_attr.layout, in->i_size, s)
					  : 0;
		struct data_call *dc;
		struct orch_msg m;
		int error;

		if (in->i_done_mask[s / 32] & (1u << (s % 32)))
			continue;
		if (s == sv->s_index) {
			error = truncate ? sv_store_truncate(sv, in->i_handle, local)
					 : sv_store_delete(sv, in->i_handle);
			if (!error) {
				in->i_done_mask[s / 32] |= 1u << (s % 32);
				run->ir_store_dirty = true;
			}
			continue;
		}
		dc = malloc(sizeof(*dc));
		if (!dc)
			continue;
		dc->dc_run = run;
		dc->dc_server = s;
		orch_msg_init(&m, truncate ? ORCH_SV2SV_DATA_TRUNCATE : ORCH_SV2SV_DATA_DELETE);
		m.origin = sv->s_index;
		m.id = in->i_id;
		m.handle = in->i_handle;
		m.size = local;
		run->ir_outstanding++;
		sv_peer_call(sv, s, &m, intent_data_done, dc);
	}
	run->ir_outstanding--;
	intent_data_finish_if_done(sv, run);
}

static void intent_c1_durable_step(struct sv_server *sv, void *arg, int error)
{
	struct intent_run *run = intent_run_find(sv, (uintptr_t)arg);

	if (!run)
		return;
	run->ir_outstanding--;
	if (error) {
		run->ir_retry = true; /* the tick tries the flush again */
		return;
	}
	run->ir_durable = true;
	intent_point(run->ir_in, "durable");
	intent_drive(sv, run);
}

static void intent_c1_durable(struct sv_server *sv, void *arg, int error)
{
	intent_as_change_flushed(sv, intent_c1_durable_step, arg, error);
}

static void intent_drive(struct sv_server *sv, struct intent_run *run)
{
	struct sv_intent *in = run->ir_in;
	struct orch_msg m;

	run->ir_retry = false;
	if (!run->ir_durable) {
		/* No peer acts on C1 before it is durable (top of this file). */
		run->ir_outstanding++;
		sv_flusher_after(sv, intent_c1_durable, (void *)(uintptr_t)in->i_id);
		return;
	}
	switch (in->i_kind) {
	case SV_INTENT_FREE_DATA:
	case SV_INTENT_TRUNCATE:
		intent_drive_data(sv, run);
		return;
	case SV_INTENT_MKDIR:
		orch_msg_init(&m, ORCH_SV2SV_MKDIR_INODE);
		m.attr = in->i_attr;
		break;
	case SV_INTENT_RMDIR:
	case SV_INTENT_RENAME_OVER:
	case SV_INTENT_RENAME_IN_OVER:
		orch_msg_init(&m, ORCH_SV2SV_RMDIR_INODE);
		break;
	case SV_INTENT_NLINK:
	case SV_INTENT_LINK:
		orch_msg_init(&m, ORCH_SV2SV_NLINK_ADJ);
		m.delta = (int32_t)in->i_size;
		break;
	case SV_INTENT_SET_PARENT:
		orch_msg_init(&m, ORCH_SV2SV_SET_PARENT);
		m.parent = in->i_parent;
		break;
	case SV_INTENT_RENAME:
		orch_msg_init(&m, ORCH_SV2SV_RENAME_IN);
		m.cred = in->i_cred;
		m.parent = in->i_attr.parent;
		m.name = orch_str_of(in->i_name2, strlen(in->i_name2));
		m.mode = in->i_attr.mode & S_IFMT;
		m.rename_flags = in->i_flags;
		m.newparent = in->i_parent; /* where an exchanged inode goes */
		break;
	default:
		ORCH_LOG_ONCE(ORCH_LOG_ERR, "unknown intent kind %u: id=%llu", in->i_kind,
			      (unsigned long long)in->i_id);
		return;
	}
	m.origin = sv->s_index;
	m.id = in->i_id;
	m.handle = in->i_handle;
	run->ir_outstanding++;
	sv_peer_call(sv, in->i_peer, &m, intent_peer_done, run);
}

static void intent_tick(void *arg);

static void intent_tick_step(void *arg)
{
	struct sv_server *sv = arg;
	struct sv_intents *is = sv->s_intents;
	struct intent_run *run, *next;

	is->is_timer_armed = false;
	for (run = is->is_runs; run; run = next) {
		next = run->ir_next;
		if (run->ir_retry && !run->ir_outstanding)
			intent_drive(sv, run);
	}
	if (is->is_runs) {
		orch_ev_timer_arm(sv->s_ev, &is->is_timer, INTENT_RETRY_MS, intent_tick, sv);
		is->is_timer_armed = true;
	}
}

static void intent_tick(void *arg)
{
	struct sv_server *sv = arg;
	bool due = false;

	/* Only a retry may write (an entry each tick for nothing would fill the log). */
	for (struct intent_run *run = sv->s_intents->is_runs; run && !due; run = run->ir_next)
		due = run->ir_retry && !run->ir_outstanding;
	if (due)
		intent_as_change(sv, &(struct intent_step){ .st_timer = intent_tick_step,
							    .st_arg = sv });
	else
		intent_tick_step(sv);
}

/* Makes @in a running intent (consumed).  NULL on ENOMEM: it stays in the database. */
static struct intent_run *intent_run_add(struct sv_server *sv, struct sv_intent *in,
					 struct sv_req *waiter)
{
	struct sv_intents *is = sv->s_intents;
	struct intent_run *run = calloc(1, sizeof(*run));

	if (!run) {
		/* Stays in the database; replayed at the next start. */
		if (waiter)
			sv_reply_status(waiter, -ENOMEM);
		free(in);
		return NULL;
	}
	run->ir_in = in;
	run->ir_waiter = waiter;
	if (in->i_kind == SV_INTENT_TRUNCATE)
		sv_writers_sizing(sv, in->i_handle, true);
	run->ir_next = is->is_runs;
	is->is_runs = run;
	if (!is->is_timer_armed) {
		orch_ev_timer_arm(sv->s_ev, &is->is_timer, INTENT_RETRY_MS, intent_tick, sv);
		is->is_timer_armed = true;
	}
	return run;
}

/* --- Free-data batches ------------------------------------------------------------------------ */

/*
 * Freeing a removed file's data needs nobody to wait, and the intent in the
 * database already makes it crash-safe, so it need not happen at once.
 * Driven one by one it cost a peer round trip per server and one more
 * transaction per unlink, on the loop that serves the next request.  A
 * batch collects up to INTENT_FREE_BATCH intents for INTENT_FREE_DELAY_MS,
 * frees their objects here, sends one SV2SV_DATA_DELETE_MANY to each peer
 * and deletes every intent in one transaction.  If anything fails, each
 * intent goes on alone as before (intent_drive_data), knowing which servers
 * are done, and is retried every INTENT_RETRY_MS.
 */

/* Takes @fb out of list @head; false if it is not there. */
static bool intent_free_unlink(struct free_batch **head, struct free_batch *fb)
{
	for (struct free_batch **pp = head; *pp; pp = &(*pp)->fb_next) {
		if (*pp == fb) {
			*pp = fb->fb_next;
			return true;
		}
	}
	return false;
}

static bool intent_free_all_done(struct sv_server *sv, const struct free_batch *fb)
{
	for (unsigned int s = 0; s < sv->s_cfg.nservers; s++)
		if (!(fb->fb_done_mask[s / 32] & (1u << (s % 32))))
			return false;
	return true;
}

/* Deletes every intent of @fb in one transaction.  0 or -errno (nothing deleted). */
static int intent_free_commit(struct sv_server *sv, const struct free_batch *fb)
{
	int error;

	error = orch_meta_begin(sv->s_meta);
	if (error)
		return error;
	for (unsigned int i = 0; i < fb->fb_n && !error; i++) {
		error = orch_meta_intent_delete(sv->s_meta, fb->fb_id[i]);
		if (error == -ENOENT)
			error = 0; /* not ours to worry about: nothing is left to do */
	}
	if (error) {
		orch_meta_abort(sv->s_meta);
		return error;
	}
	return orch_meta_commit(sv->s_meta);
}

/* Each intent of @fb on its own, with the servers @fb finished, retried by the tick. */
static void intent_free_fallback(struct sv_server *sv, const struct free_batch *fb)
{
	for (unsigned int i = 0; i < fb->fb_n; i++) {
		struct sv_intent *in = calloc(1, sizeof(*in));
		struct intent_run *run;

		if (!in)
			continue; /* stays in the database; replayed at the next start */
		in->i_id = fb->fb_id[i];
		in->i_kind = SV_INTENT_FREE_DATA;
		in->i_handle = fb->fb_handle[i];
		memcpy(in->i_done_mask, fb->fb_done_mask, sizeof(in->i_done_mask));
		run = intent_run_add(sv, in, NULL);
		if (run)
			run->ir_retry = true;
	}
}

/* Every server is done with @fb (or some failed): the intents go, or go on alone. */
static void intent_free_complete(struct sv_server *sv, struct free_batch *fb)
{
	struct sv_intents *is = sv->s_intents;
	int error = -EAGAIN;

	if (intent_free_all_done(sv, fb)) {
		error = intent_free_commit(sv, fb);
		if (error)
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
					   "cannot finish free-data intents: ids=%llu..: %s",
					   (unsigned long long)fb->fb_id[0], strerror(-error));
	}
	if (error) {
		intent_free_fallback(sv, fb);
		free(fb);
		return;
	}
	sv_flusher_dirty(sv);
	orch_pcut_point("free-data-finished");
	sv->s_intents_done += fb->fb_n;
	for (unsigned int i = 0; i < fb->fb_n; i++)
		if (fb->fb_id[i] > is->is_last_done)
			is->is_last_done = fb->fb_id[i];
	is->is_since_trim += fb->fb_n;
	free(fb);
	if (is->is_since_trim >= INTENT_TRIM_EVERY) {
		is->is_since_trim = 0;
		intent_trim_peers(sv);
	}
}

/* Our deletes of @fb are durable (or the flush failed). */
static void intent_free_stored_step(struct sv_server *sv, void *arg, int error)
{
	struct sv_intents *is = sv->s_intents;
	struct free_batch *fb = arg;

	if (!is || !intent_free_unlink(&is->is_free_syncing, fb))
		return; /* stopping: freed with the rest */
	if (error) {
		/* Not known durable: each intent deletes here again, alone. */
		fb->fb_done_mask[sv->s_index / 32] &= ~(1u << (sv->s_index % 32));
	}
	fb->fb_store_dirty = false;
	intent_free_complete(sv, fb);
}

static void intent_free_stored(struct sv_server *sv, void *arg, int error)
{
	intent_as_change_flushed(sv, intent_free_stored_step, arg, error);
}

static void intent_free_finish_if_done(struct sv_server *sv, struct free_batch *fb)
{
	struct sv_intents *is = sv->s_intents;
	if (fb->fb_outstanding)
		return;
	intent_free_unlink(&is->is_free_flying, fb);
	if (fb->fb_store_dirty && intent_free_all_done(sv, fb)) {
		/* Our deletes must be durable before the intents' deletion may be. */
		orch_pcut_point("free-data-stored");
		fb->fb_next = is->is_free_syncing;
		is->is_free_syncing = fb;
		sv_flusher_after(sv, intent_free_stored, fb);
		return;
	}
	intent_free_complete(sv, fb);
}

struct free_call {
	struct free_batch *fc_batch;
	unsigned int fc_server;
};

static void intent_free_done_step(struct sv_server *sv, void *arg, int error,
			     const struct orch_msg *rep)
{
	struct free_call *fc = arg;
	struct free_batch *fb = fc->fc_batch;

	fb->fb_outstanding--;
	if (rep && !error)
		fb->fb_done_mask[fc->fc_server / 32] |= 1u << (fc->fc_server % 32);
	else if (rep)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "peer failed to free data: server=%u ids=%llu..: %s",
				   fc->fc_server, (unsigned long long)fb->fb_id[0],
				   strerror(-error));
	free(fc);
	intent_free_finish_if_done(sv, fb);
}

static void intent_free_done(struct sv_server *sv, void *arg, int error, const struct orch_msg *rep)
{
	intent_as_change_peer(sv, intent_free_done_step, arg, error, rep);
}

/* Frees the objects of @fb here and asks every peer to free theirs. */
static void intent_free_send(struct sv_server *sv, struct free_batch *fb)
{
	struct sv_intents *is = sv->s_intents;
	uint8_t wire[INTENT_FREE_BATCH * 8];

	for (unsigned int i = 0; i < fb->fb_n; i++)
		orch_put_u64(wire + 8 * i, fb->fb_handle[i]);
	fb->fb_next = is->is_free_flying;
	is->is_free_flying = fb;
	fb->fb_outstanding++; /* hold the batch while sending */
	for (unsigned int s = 0; s < sv->s_cfg.nservers; s++) {
		struct free_call *fc;
		struct orch_msg m;
		int error = 0;

		if (s == sv->s_index) {
			error = sv_store_delete_many(sv, fb->fb_handle, fb->fb_n);
			if (!error) {
				fb->fb_done_mask[s / 32] |= 1u << (s % 32);
				fb->fb_store_dirty = true;
			}
			continue;
		}
		fc = malloc(sizeof(*fc));
		if (!fc)
			continue;
		fc->fc_batch = fb;
		fc->fc_server = s;
		orch_msg_init(&m, ORCH_SV2SV_DATA_DELETE_MANY);
		m.origin = sv->s_index;
		m.id = fb->fb_id[0];
		m.data = orch_str_of((const char *)wire, 8 * (size_t)fb->fb_n);
		fb->fb_outstanding++;
		sv_peer_call(sv, s, &m, intent_free_done, fc);
	}
	fb->fb_outstanding--;
	intent_free_finish_if_done(sv, fb);
}

/* The intents of @fb are durable (C1): now their objects may go. */
static void intent_free_durable_step(struct sv_server *sv, void *arg, int error)
{
	struct sv_intents *is = sv->s_intents;
	struct free_batch *fb = arg;

	if (!is || !intent_free_unlink(&is->is_free_syncing, fb))
		return; /* stopping: freed with the rest */
	if (error) {
		intent_free_fallback(sv, fb); /* each alone, after its own flush */
		free(fb);
		return;
	}
	orch_pcut_point("free-data-durable");
	intent_free_send(sv, fb);
}

static void intent_free_durable(struct sv_server *sv, void *arg, int error)
{
	intent_as_change_flushed(sv, intent_free_durable_step, arg, error);
}

/* Parks @fb until its intents are durable. */
static void intent_free_wait(struct sv_server *sv, struct free_batch *fb)
{
	struct sv_intents *is = sv->s_intents;
	fb->fb_next = is->is_free_syncing;
	is->is_free_syncing = fb;
	sv_flusher_after(sv, intent_free_durable, fb);
}

static void intent_free_tick(void *arg);

static void intent_free_tick_step(void *arg)
{
	struct sv_server *sv = arg;
	struct sv_intents *is = sv->s_intents;
	struct free_batch *fb = is->is_free_filling;

	is->is_free_timer_armed = false;
	is->is_free_filling = NULL;
	if (fb)
		intent_free_wait(sv, fb);
	while (is->is_free_full) {
		fb = is->is_free_full;
		is->is_free_full = fb->fb_next;
		intent_free_wait(sv, fb);
	}
}

/* Writes nothing itself (the flushes it asks for call back as steps). */
static void intent_free_tick(void *arg)
{
	intent_free_tick_step(arg);
}

/* Adds FREE_DATA intent @in (consumed) to the batch being filled. */
static void intent_free_queue(struct sv_server *sv, struct sv_intent *in)
{
	struct sv_intents *is = sv->s_intents;
	struct free_batch *fb = is->is_free_filling;
	struct intent_run *run;

	if (!fb) {
		fb = calloc(1, sizeof(*fb));
		if (!fb) {
			run = intent_run_add(sv, in, NULL);
			if (run)
				intent_drive(sv, run);
			return;
		}
		is->is_free_filling = fb;
	}
	fb->fb_id[fb->fb_n] = in->i_id;
	fb->fb_handle[fb->fb_n] = in->i_handle;
	fb->fb_n++;
	free(in);
	if (fb->fb_n == INTENT_FREE_BATCH) {
		/* Sent from the loop, not before the caller has answered its request. */
		is->is_free_filling = NULL;
		fb->fb_next = is->is_free_full;
		is->is_free_full = fb;
		orch_ev_timer_arm(sv->s_ev, &is->is_free_timer, 0, intent_free_tick, sv);
		is->is_free_timer_armed = true;
	} else if (!is->is_free_timer_armed) {
		orch_ev_timer_arm(sv->s_ev, &is->is_free_timer, INTENT_FREE_DELAY_MS,
				  intent_free_tick, sv);
		is->is_free_timer_armed = true;
	}
}

/* An intent written by a change that runs through the group: started once it is applied. */
struct intent_start {
	struct sv_intent *is_in;
	struct sv_req *is_waiter;
};

static void intent_start_now(struct sv_server *sv, struct sv_intent *in, struct sv_req *waiter);

static void intent_start_applied(struct sv_server *sv, void *arg, int error)
{
	struct intent_start *st = arg;

	if (error) {
		free(st->is_in); /* never written */
		if (st->is_waiter)
			sv_reply_status(st->is_waiter, error);
	} else
		intent_start_now(sv, st->is_in, st->is_waiter);
	free(st);
}

void sv_intent_start(struct sv_server *sv, struct sv_intent *in, struct sv_req *waiter)
{
	struct intent_start *st;

	if (sv_ns_capturing(sv)) {
		/* Its record is only captured yet: nobody may act on it before it is applied. */
		st = malloc(sizeof(*st));
		if (st) {
			*st = (struct intent_start){ .is_in = in, .is_waiter = waiter };
			if (sv_ns_defer(sv, intent_start_applied, st) == 1)
				return;
			free(st);
		}
		sv_ns_fail(sv, -ENOMEM);
		free(in);
		return;
	}
	intent_start_now(sv, in, waiter);
}

static void intent_start_now(struct sv_server *sv, struct sv_intent *in, struct sv_req *waiter)
{
	struct intent_run *run;

	intent_point(in, "begun");
	if (in->i_kind == SV_INTENT_FREE_DATA && !waiter) {
		intent_free_queue(sv, in);
		return;
	}
	run = intent_run_add(sv, in, waiter);
	if (run)
		intent_drive(sv, run);
}

static int intent_replay_one(void *arg, uint64_t id, uint32_t kind, const void *body,
			     size_t len)
{
	struct sv_server *sv = arg;
	struct sv_intent *in = calloc(1, sizeof(*in));

	if (!in)
		return -ENOMEM;
	if (kind < SV_INTENT_MKDIR || kind > SV_INTENT_KIND_MAX || intent_decode(body, len, in) ||
	    (kind != SV_INTENT_FREE_DATA && kind != SV_INTENT_TRUNCATE &&
	     in->i_peer >= sv->s_cfg.nservers)) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "corrupt intent record, skipped: id=%llu kind=%u",
				   (unsigned long long)id, kind);
		free(in);
		return 0;
	}
	in->i_id = id;
	in->i_kind = kind;
	sv_intent_start(sv, in, NULL);
	return 0;
}

void sv_intent_replay_all(struct sv_server *sv)
{
	int error = orch_meta_intent_foreach(sv->s_meta, intent_replay_one, sv);

	if (error)
		ORCH_ERR("cannot replay intents: %s", strerror(-error));
}

int sv_intent_init(struct sv_server *sv)
{
	sv->s_intents = calloc(1, sizeof(*sv->s_intents));
	return sv->s_intents ? 0 : -ENOMEM;
}

void sv_intent_fini(struct sv_server *sv)
{
	struct sv_intents *is = sv->s_intents;

	if (!is)
		return;
	orch_ev_timer_cancel(sv->s_ev, &is->is_timer);
	orch_ev_timer_cancel(sv->s_ev, &is->is_free_timer);
	/* Their intents stay in the database and are replayed at the next start. */
	free(is->is_free_filling);
	while (is->is_free_full) {
		struct free_batch *fb = is->is_free_full;

		is->is_free_full = fb->fb_next;
		free(fb);
	}
	while (is->is_free_flying) {
		struct free_batch *fb = is->is_free_flying;

		is->is_free_flying = fb->fb_next;
		free(fb);
	}
	while (is->is_free_syncing) {
		struct free_batch *fb = is->is_free_syncing;

		is->is_free_syncing = fb->fb_next;
		free(fb);
	}
	while (is->is_runs) {
		struct intent_run *run = is->is_runs;

		is->is_runs = run->ir_next;
		free(run->ir_in);
		free(run);
	}
	free(is);
	sv->s_intents = NULL;
}
