/* File data in a replica group.  See sv_mirror.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"
#include "common/time.h"
#include "proto/wire.h"
#include "server/flush.h"
#include "store/fsmap.h"
#include "store/sums.h"
#include "server/sv_gate.h"
#include "server/sv_mirror.h"
#include "server/sv_ns.h"
#include "server/sv_req.h"
#include "server/sv_write.h"

/* Bit m set: member m holds the file data in sync.  Absent: every member does (a new group). */
#define MIRROR_KEY "group.data_in_sync"
/* A follower in sync that answers nothing this long while owing answers is taken out. */
#define MIRROR_SILENT_MS 2000
/* How often the leader looks at its followers: dials, silences, transfers. */
#define MIRROR_TICK_MS 100
/* A follower that could not be reached is dialled again after this. */
#define MIRROR_REDIAL_MS 500
/* A resync reads this much of an object at a time ... */
#define MIRROR_CHUNK (256u << 10)
/* ... while less than this waits to be sent to that follower. */
#define MIRROR_RESYNC_AHEAD (4u << 20)
/* More than this waiting to be sent to one follower: it cannot keep up, and is dropped. */
#define MIRROR_BACKLOG_MAX (512ull << 20)
/* Block checksums asked of a follower at a time, in a resync (16 MiB of blocks at most). */
#define MIRROR_SUMS_PAGE 4096u
/* Blocks sent in one frame by a resync by checksums: MIRROR_CHUNK's. */
#define MIRROR_CHUNK_BLOCKS (MIRROR_CHUNK / ORCH_STORE_BLOCK)

enum follower_state {
	F_IDLE,    /* no stream */
	F_RESYNC,  /* streaming, the resync under way */
	F_ENDED,   /* streaming, RESYNC_END sent */
	F_LIVE,    /* streaming, RESYNC_END answered */
};

struct follower {
	unsigned int f_member;
	struct orch_conn *f_conn;      /* NULL: none */
	enum follower_state f_state;
	bool f_in_sync;                /* as the log says */
	uint64_t f_frames;             /* frames sent to it: their reqids */
	uint64_t f_sent;               /* g_sent when the last frame went to it */
	uint64_t f_acked;              /* ... and the last it answered */
	uint64_t f_waiting_since_ms;   /* it owed answers and was silent since; 0: owes none */
	uint64_t f_dial_at_ms;
	bool f_dialled;                /* a stream was tried this term */
	/* The resync: objects above f_after are still to send; f_obj at f_off if f_in_obj. */
	uint64_t f_after;
	uint64_t f_obj, f_off;
	bool f_in_obj;
	uint64_t f_resync_bytes;
	/*
	 * By checksums (mirror_diff): the follower's checksums of f_obj from
	 * block f_off / ORCH_STORE_BLOCK, asked (f_sums_asked) and then here
	 * (f_sums_ready).  Off for a follower that does not know SUMS.
	 */
	bool f_by_sums;
	bool f_sums_asked, f_sums_ready;
	struct orch_blocksum *f_sums;  /* MIRROR_SUMS_PAGE */
	size_t f_nsums, f_sums_at;     /* its checksums, and the next one to compare */
	uint64_t f_sums_next;          /* the block its page ends at ... */
	bool f_sums_eof;               /* ... or none: it holds no block past the page */
};

struct sv_mirror {
	bool m_leading;
	/* A change of the in-sync set is in flight: one at a time, each made from the last. */
	bool m_changing;
	bool m_started;                 /* this member is in sync: streams run */
	uint32_t m_mask;                /* the in-sync set, as applied */
	unsigned int m_hand_to;         /* the member a hand-over asks next */
	uint64_t m_term;
	unsigned int m_nf;
	struct follower m_f[ORCH_REPLICAS_MAX];
	struct orch_ev_timer m_tick;
	struct orch_conn_ops m_ops;
	uint8_t *m_buf;                 /* MIRROR_CHUNK, for resync reads */
	struct orch_blocksum *m_sums;   /* MIRROR_SUMS_PAGE: this member's, in a resync */
	/* As a follower: the stream being applied (referenced), from whom, in which term. */
	struct orch_conn *m_in;
	uint64_t m_in_term;
	uint32_t m_in_member;
	struct sv_mirror_counts m_counts;
};

bool sv_mirror_in_group(const struct sv_server *sv)
{
	return sv->s_cfg.replicas > 1 && sv->s_ns;
}

static bool mirror_streaming(const struct follower *f)
{
	return f->f_conn && f->f_state != F_IDLE;
}

/* Recomputes what is safe, and lets through what waited for it. */
static void mirror_gate(struct sv_server *sv)
{
	struct sv_mirror *mi = sv->s_mirror;
	struct sv_gate *g = &sv->s_gate;
	uint64_t safe = g->g_sent;
	unsigned int n = 1;
	bool live = true;

	if (!mi->m_started)
		return;

	/*
	 * Every follower in sync must apply what was sent on a stream whose
	 * resync is over (F_LIVE: it ran unbroken since, so it holds
	 * everything).  One that is not (its stream broke, or it resyncs at
	 * the start of the term and may still hold bytes its old leader never
	 * acknowledged) closes the gate until it is live or out of the set.
	 */
	for (unsigned int i = 0; i < mi->m_nf; i++) {
		if (!mi->m_f[i].f_in_sync)
			continue;
		n++;
		if (mi->m_f[i].f_state != F_LIVE)
			live = false;
		if (mi->m_f[i].f_acked < safe)
			safe = mi->m_f[i].f_acked;
	}
	g->g_safe = safe;
	g->g_majority = live && n >= sv->s_cfg.replicas / 2 + 1;
	mi->m_counts.in_sync = n;
	sv_gate_advance(sv);
}

/* Bytes waiting to be sent on @c, queued before its handshake ended too. */
static size_t mirror_backlog(const struct orch_conn *c)
{
	return c->c_out.b_len - c->c_out_off + c->c_held.b_len;
}

/* Sends one frame to @f; a failure closes its stream (f_conn NULL after). */
static void mirror_frame(struct sv_server *sv, struct follower *f, struct orch_msg *m)
{
	struct sv_mirror *mi = sv->s_mirror;
	struct orch_conn *c = f->f_conn;
	int error;

	m->origin = sv->s_index;
	m->length = sv->s_member;
	m->id = mi->m_term;
	m->seq = 0;
	m->cookie = sv->s_gate.g_sent;
	m->reqid = ++f->f_frames;
	m->flags = 0;
	if (f->f_sent == f->f_acked && !f->f_waiting_since_ms)
		f->f_waiting_since_ms = orch_time_now_ms();
	f->f_sent = sv->s_gate.g_sent;
	/* A send may close it (a peer that reset): held until we are done with it. */
	orch_conn_get(c);
	error = orch_conn_send(c, m);
	if (!error && !c->c_closed && mirror_backlog(c) > MIRROR_BACKLOG_MAX)
		error = -ENOBUFS;
	if (error && !c->c_closed) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "replica group %u: data stream to member %u "
				   "broken: %s", sv->s_index, f->f_member, strerror(-error));
		orch_conn_close(c, error);
	}
	orch_conn_put(c);
}

/* A store operation applied here: to every follower streaming. */
static void mirror_send(struct sv_server *sv, enum sv_mirror_op op, uint64_t h, uint64_t off,
			uint64_t size, const void *data, size_t len)
{
	struct sv_mirror *mi = sv->s_mirror;
	struct orch_msg m;

	if (!mi || !mi->m_leading)
		return;
	sv->s_gate.g_sent++;
	mi->m_counts.sent++;
	for (unsigned int i = 0; i < mi->m_nf; i++) {
		struct follower *f = &mi->m_f[i];

		if (!mirror_streaming(f))
			continue;
		orch_msg_init(&m, ORCH_SV2SV_MIRROR);
		m.mode = op;
		m.handle = h;
		m.offset = off;
		m.size = size;
		m.data.s = data;
		m.data.len = len;
		mirror_frame(sv, f, &m);
	}
}

static void mirror_sync(struct sv_server *sv)
{
	mirror_send(sv, SV_MIRROR_SYNC, 0, 0, 0, NULL, 0);
}

/* --- The store's calls ----------------------------------------------------------- */

int sv_store_write(struct sv_server *sv, uint64_t h, uint64_t off, const void *data, size_t len)
{
	int error = orch_store_write(sv->s_store, h, off, data, len);

	if (!error)
		mirror_send(sv, SV_MIRROR_WRITE, h, off, 0, data, len);
	return error;
}

/*
 * Sent before its outcome here is known: one the store refuses whatever
 * its state (past the largest object, too long) is not sent at all, as
 * it would fail on every follower and break their streams.
 */
void sv_mirror_write(struct sv_server *sv, uint64_t h, uint64_t off, const void *data,
		     size_t len)
{
	if (len <= ORCH_STORE_MAX_IO && off <= ORCH_STORE_MAX_SIZE &&
	    len <= ORCH_STORE_MAX_SIZE - off)
		mirror_send(sv, SV_MIRROR_WRITE, h, off, 0, data, len);
}

int sv_store_truncate(struct sv_server *sv, uint64_t h, uint64_t size)
{
	int error = orch_store_truncate(sv->s_store, h, size);

	if (!error)
		mirror_send(sv, SV_MIRROR_TRUNCATE, h, 0, size, NULL, 0);
	return error;
}

int sv_store_cut(struct sv_server *sv, uint64_t h, uint64_t size)
{
	int error = orch_store_cut(sv->s_store, h, size);

	if (!error)
		mirror_send(sv, SV_MIRROR_CUT, h, 0, size, NULL, 0);
	return error;
}

int sv_store_punch(struct sv_server *sv, uint64_t h, uint64_t off, uint64_t len)
{
	int error = orch_store_punch(sv->s_store, h, off, len);

	if (!error)
		mirror_send(sv, SV_MIRROR_PUNCH, h, off, len, NULL, 0);
	return error;
}

int sv_store_delete(struct sv_server *sv, uint64_t h)
{
	int error = orch_store_delete(sv->s_store, h);

	if (!error)
		mirror_send(sv, SV_MIRROR_DELETE, h, 0, 0, NULL, 0);
	return error;
}

int sv_store_delete_many(struct sv_server *sv, const uint64_t *handles, size_t n)
{
	int error = orch_store_delete_many(sv->s_store, handles, n);
	uint8_t *wire;

	if (!sv->s_mirror || !sv->s_mirror->m_leading || !n)
		return error;
	wire = malloc(n * 8);
	if (!wire) {
		/* One by one, then: the stream must not miss any. */
		for (size_t i = 0; i < n; i++)
			mirror_send(sv, SV_MIRROR_DELETE, handles[i], 0, 0, NULL, 0);
		return error;
	}
	for (size_t i = 0; i < n; i++)
		orch_put_u64(wire + 8 * i, handles[i]);
	mirror_send(sv, SV_MIRROR_DELETE_MANY, 0, 0, 0, wire, n * 8);
	free(wire);
	return error;
}

/* --- The in-sync set, through the log ---------------------------------------------- */

struct mirror_change {
	struct sv_server *c_sv;
	uint32_t c_mask;
	int c_follower;               /* whose change it is; -1: this member's own */
};

static int mirror_change_fn(struct sv_server *sv, void *arg)
{
	struct mirror_change *c = arg;

	return orch_meta_value_set(sv->s_meta, MIRROR_KEY, c->c_mask);
}

static void mirror_change_done(struct sv_server *sv, void *arg, int result)
{
	struct mirror_change *c = arg;
	struct sv_mirror *mi = sv->s_mirror;

	if (!mi || !mi->m_leading) {
		free(c);
		return;
	}
	mi->m_changing = false;
	if (result) {
		/* The tick proposes it again (leadership lost: the server restarts anyway). */
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "replica group %u: cannot record which members "
				   "hold the data: %s", sv->s_index, strerror(-result));
		free(c);
		return;
	}
	mi->m_mask = c->c_mask;
	for (unsigned int i = 0; i < mi->m_nf; i++)
		mi->m_f[i].f_in_sync = c->c_mask & (1u << mi->m_f[i].f_member);
	if (c->c_follower >= 0 && mi->m_f[c->c_follower].f_in_sync)
		ORCH_NOTICE("replica group %u: member %u holds the file data in sync",
			    sv->s_index, mi->m_f[c->c_follower].f_member);
	free(c);
	mirror_gate(sv);
}

static int mirror_change(struct sv_server *sv, uint32_t mask, int follower)
{
	struct mirror_change *c;
	int error;

	if (sv->s_mirror->m_changing)
		return -EBUSY;
	c = malloc(sizeof(*c));
	if (!c)
		return -ENOMEM;
	*c = (struct mirror_change){ .c_sv = sv, .c_mask = mask, .c_follower = follower };
	error = sv_ns_change(sv, NULL, mirror_change_fn, mirror_change_done, c);
	if (error) {
		free(c);
		return error;
	}
	sv->s_mirror->m_changing = true;
	return 0;
}

/* @f's stream broke or it fell silent: out of sync, through the log, before anything waits on it. */
static void mirror_drop(struct sv_server *sv, struct follower *f)
{
	struct sv_mirror *mi = sv->s_mirror;

	if (f->f_in_sync &&
	    mirror_change(sv, mi->m_mask & ~(1u << f->f_member), (int)(f - mi->m_f)) == 0) {
		mi->m_counts.dropped++;
		ORCH_WARN("replica group %u: member %u does not hold the file data in sync any "
			  "more: it will be resynced", sv->s_index, f->f_member);
	}
}

/* --- Streams ------------------------------------------------------------------------ */

static struct follower *mirror_follower_of(struct sv_server *sv, struct orch_conn *c)
{
	struct sv_mirror *mi = sv->s_mirror;

	for (unsigned int i = 0; mi && i < mi->m_nf; i++)
		if (mi->m_f[i].f_conn == c)
			return &mi->m_f[i];
	return NULL;
}

static void mirror_on_close(struct orch_conn *c, int reason)
{
	struct sv_server *sv = c->c_arg;
	struct follower *f = mirror_follower_of(sv, c);

	sv->s_bytes_in += c->c_bytes_in;
	sv->s_bytes_out += c->c_bytes_out;
	if (!f)
		return;
	(void)reason;
	f->f_conn = NULL;
	if (!sv->s_mirror->m_leading)
		return;
	f->f_state = F_IDLE;
	f->f_waiting_since_ms = 0;
	f->f_dial_at_ms = orch_time_now_ms() + MIRROR_REDIAL_MS;
	mirror_drop(sv, f);
}

static void mirror_pump(struct sv_server *sv, struct follower *f);

/*
 * @f's checksums (the answer to mirror_ask_sums), checked: asked for, in
 * order, within the range asked, and ending past its start unless the
 * last.  -EPROTO otherwise.
 */
static int mirror_took_sums(struct follower *f, const struct orch_msg *m)
{
	uint64_t from = f->f_off / ORCH_STORE_BLOCK;

	if (!f->f_sums_asked || f->f_sums_ready || !f->f_sums ||
	    orch_blocksums_decode(m->data.s, m->data.len, f->f_sums, MIRROR_SUMS_PAGE,
				  &f->f_nsums))
		return -EPROTO;
	if ((!m->eof && m->offset <= from) ||
	    (f->f_nsums && (f->f_sums[0].block < from ||
			    (!m->eof && f->f_sums[f->f_nsums - 1].block >= m->offset))))
		return -EPROTO;
	f->f_sums_next = m->offset;
	f->f_sums_eof = m->eof;
	f->f_sums_at = 0;
	f->f_sums_ready = true;
	return 0;
}

static void mirror_on_frame(struct orch_conn *c, const struct orch_frame_hdr *h,
			    const uint8_t *payload)
{
	struct sv_server *sv = c->c_arg;
	struct follower *f = mirror_follower_of(sv, c);
	struct orch_msg m;
	int error;

	if (!f)
		return;
	error = (h->flags & ORCH_FRAME_REPLY) &&
			(h->type == ORCH_SV2SV_MIRROR || h->type == ORCH_SV2SV_MIRROR_SUMS)
			? orch_msg_decode(h, payload, &m) : -EPROTO;
	if (!error) {
		error = m.status;
		if (!error && h->type == ORCH_SV2SV_MIRROR_SUMS)
			error = mirror_took_sums(f, &m);
		orch_msg_fini(&m);
	}
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "replica group %u: member %u refused the data "
				   "stream: %s", sv->s_index, f->f_member, strerror(-error));
		orch_conn_close(c, error);
		return;
	}
	if (m.cookie > f->f_acked)
		f->f_acked = m.cookie;
	f->f_waiting_since_ms = f->f_acked >= f->f_sent ? 0 : orch_time_now_ms();
	if (m.mode == SV_MIRROR_RESYNC_END && f->f_state == F_ENDED) {
		struct sv_mirror *mi = sv->s_mirror;

		f->f_state = F_LIVE;
		mi->m_counts.resyncs++;
		ORCH_NOTICE("replica group %u: member %u resynced (%" PRIu64 " bytes)%s",
			    sv->s_index, f->f_member, f->f_resync_bytes,
			    f->f_in_sync ? "" : ": adding it back");
		/* Or at the next tick, if another change is in flight. */
		if (!f->f_in_sync)
			mirror_change(sv, mi->m_mask | (1u << f->f_member), (int)(f - mi->m_f));
	}
	if (f->f_state == F_RESYNC)
		mirror_pump(sv, f);
	mirror_gate(sv);
}

static int mirror_next_handle(void *arg, uint64_t handle)
{
	*(uint64_t *)arg = handle;
	return 0;
}

/* Asks @f for its checksums of f_obj from block f_off / ORCH_STORE_BLOCK, in the stream. */
static void mirror_ask_sums(struct sv_server *sv, struct follower *f)
{
	struct orch_msg m;

	orch_msg_init(&m, ORCH_SV2SV_MIRROR_SUMS);
	m.handle = f->f_obj;
	m.offset = f->f_off / ORCH_STORE_BLOCK;
	f->f_sums_asked = true;
	f->f_sums_ready = false;
	mirror_frame(sv, f, &m);
}

/*
 * Sends @f bytes [@off, @off + @len) of f_obj as they are here (@len at
 * most MIRROR_CHUNK; *@got: how many there are, fewer at the end): a write,
 * or a punch where they read as zeros (holes stay holes).  Each replaces
 * the follower's bytes in place, never emptied first: a follower in sync
 * stays a valid copy all along.  An error is logged: the follower cannot
 * be given this object (a damaged block).
 */
static int mirror_send_range(struct sv_server *sv, struct follower *f, uint64_t off,
			     size_t len, size_t *got)
{
	struct sv_mirror *mi = sv->s_mirror;
	struct orch_msg m;
	bool zero = true;
	int error;

	*got = 0;
	error = orch_store_read(sv->s_store, f->f_obj, off, mi->m_buf, len, got);
	if (error == -ENOENT)
		return 0;   /* gone meanwhile: the object's end sends the delete */
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "replica group %u: cannot read object %016" PRIx64
				   " for a resync: %s", sv->s_index, f->f_obj, strerror(-error));
		return error;
	}
	if (!*got || !mirror_streaming(f))
		return 0;
	for (size_t i = 0; i < *got && zero; i++)
		zero = !mi->m_buf[i];
	orch_msg_init(&m, ORCH_SV2SV_MIRROR);
	m.handle = f->f_obj;
	m.offset = off;
	if (zero) {
		m.mode = SV_MIRROR_PUNCH;
		m.size = *got;
	} else {
		m.mode = SV_MIRROR_WRITE;
		m.data.s = (const char *)mi->m_buf;
		m.data.len = *got;
		f->f_resync_bytes += *got;
		mi->m_counts.resync_bytes += *got;
	}
	mirror_frame(sv, f, &m);
	return 0;
}

/* Blocks [@from, @from + @n) of f_obj, as mirror_send_range. */
static int mirror_send_run(struct sv_server *sv, struct follower *f, uint64_t from, uint64_t n)
{
	size_t got;

	return mirror_send_range(sv, f, from * ORCH_STORE_BLOCK, n * ORCH_STORE_BLOCK, &got);
}

/*
 * The follower's page of checksums is here: sends the blocks of the range
 * it covers whose checksums differ from this member's, in runs.  A block
 * is the same if both hold it with the same checksum, or neither does (a
 * store's written blocks all have one: those without read as zeros).
 *
 * The follower's page is its state when it read the request; this
 * member's is its state now, later in the stream.  Every operation in
 * between was applied to both, and each sets bytes to given values (a
 * write, a punch, a cut): applied twice it gives what it gave once.  So a
 * block equal here and there then is equal now, and one that differs is
 * sent as it is now.  Two blocks with the same CRC32C but other bytes are
 * taken as equal (2^-32 for each block that differs).  *@done: the
 * follower's page was the object's last and this member's blocks are all
 * compared.
 */
static int mirror_diff(struct sv_server *sv, struct follower *f, bool *done)
{
	struct sv_mirror *mi = sv->s_mirror;
	const struct orch_blocksum *fs = f->f_sums;
	uint64_t end = f->f_sums_eof ? UINT64_MAX : f->f_sums_next;
	uint64_t cur = f->f_off / ORCH_STORE_BLOCK, run = 0, nrun = 0, next = 0, lim;
	size_t fi = f->f_sums_at, nl = 0, li = 0;
	bool eof = true;
	int error;

	*done = false;
	/* One page of this member's at a time: the pump looks at the backlog between. */
	error = orch_store_block_sums(sv->s_store, f->f_obj, cur, mi->m_sums, MIRROR_SUMS_PAGE,
				      &nl, &next, &eof);
	if (error)
		return error;
	lim = eof ? end : ORCH_MIN(next, end);
	while (!error && mirror_streaming(f)) {
		bool here = li < nl && mi->m_sums[li].block < lim;
		bool there = fi < f->f_nsums && fs[fi].block < lim;
		uint64_t b;
		bool same;

		if (!here && !there)
			break;
		b = !there || (here && mi->m_sums[li].block < fs[fi].block) ? mi->m_sums[li].block
									   : fs[fi].block;
		here = here && mi->m_sums[li].block == b;
		there = there && fs[fi].block == b;
		same = here && there && mi->m_sums[li].crc == fs[fi].crc;
		li += here;
		fi += there;
		if (same) {
			mi->m_counts.resync_same += ORCH_STORE_BLOCK;
			continue;
		}
		if (nrun && b == run + nrun && nrun < MIRROR_CHUNK_BLOCKS) {
			nrun++;
			continue;
		}
		if (nrun)
			error = mirror_send_run(sv, f, run, nrun);
		run = b;
		nrun = 1;
	}
	if (!error && nrun && mirror_streaming(f))
		error = mirror_send_run(sv, f, run, nrun);
	if (error)
		return error;
	f->f_sums_at = fi;
	if (lim < end) {
		f->f_off = lim * ORCH_STORE_BLOCK;  /* the rest of the follower's page next */
		return 0;
	}
	f->f_sums_asked = f->f_sums_ready = false;
	*done = f->f_sums_eof;
	f->f_off = f->f_sums_eof ? 0 : f->f_sums_next * ORCH_STORE_BLOCK;
	return 0;
}

/*
 * Sends @f more of the resync, while little waits to be sent to it.  Each
 * chunk is read once every write queued here is done, and goes into the
 * stream at that point: what the follower gets is the store as it was at
 * that point of the stream, and every later operation follows it.
 */
static void mirror_pump(struct sv_server *sv, struct follower *f)
{
	struct orch_msg m;

	/* Not before the handshake: its features say whether it answers SUMS. */
	if (mirror_streaming(f) && f->f_conn->c_state != ORCH_CONN_READY)
		return;
	while (mirror_streaming(f) && f->f_state == F_RESYNC &&
	       mirror_backlog(f->f_conn) < MIRROR_RESYNC_AHEAD) {
		size_t got = 0;
		int error;

		sv_writes_wait(sv);
		if (!f->f_in_obj) {
			uint64_t next = 0, after = f->f_after;
			bool eof;

			error = orch_store_handles(sv->s_store, &after, 1, mirror_next_handle, &next,
						   &eof);
			if (error || !next) {
				if (error) {
					ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "replica group %u: cannot "
							   "list objects for a resync: %s",
							   sv->s_index, strerror(-error));
					orch_conn_close(f->f_conn, error);
					return;
				}
				orch_msg_init(&m, ORCH_SV2SV_MIRROR);
				m.mode = SV_MIRROR_RESYNC_END;
				m.offset = f->f_after; /* and nothing past the last object */
				f->f_state = F_ENDED;
				mirror_frame(sv, f, &m);
				return;
			}
			/* What the follower holds between the last object and this one is gone here. */
			orch_msg_init(&m, ORCH_SV2SV_MIRROR);
			m.mode = SV_MIRROR_RESYNC_DROP;
			m.offset = f->f_after;
			m.handle = next;
			mirror_frame(sv, f, &m);
			f->f_obj = next;
			f->f_off = 0;
			f->f_in_obj = true;
			/* A follower that knows SUMS gets only the blocks that differ. */
			f->f_by_sums = f->f_sums && (f->f_conn->c_features & ORCH_FEAT_MIRROR_SUMS);
			f->f_sums_asked = f->f_sums_ready = false;
			f->f_sums_at = 0;
			continue;
		}
		if (f->f_by_sums) {
			bool done = false;

			if (f->f_sums_asked && !f->f_sums_ready)
				return;   /* its answer comes back through mirror_on_frame */
			if (!f->f_sums_ready) {
				mirror_ask_sums(sv, f);
				return;
			}
			error = mirror_diff(sv, f, &done);
			if (error) {
				orch_conn_close(f->f_conn, error);
				return;
			}
			if (!done)
				continue;
			goto object_end;
		}
		error = mirror_send_range(sv, f, f->f_off, MIRROR_CHUNK, &got);
		if (error) {
			orch_conn_close(f->f_conn, error);
			return;
		}
		f->f_off += got;
		if (got == MIRROR_CHUNK)
			continue;
		/*
		 * The object's end: its size now, which may end in a hole, or a
		 * delete if it went meanwhile (a read past the end looks alike).
		 */
object_end:
		orch_msg_init(&m, ORCH_SV2SV_MIRROR);
		m.handle = f->f_obj;
		m.mode = SV_MIRROR_TRUNCATE;
		if (orch_store_object_size(sv->s_store, f->f_obj, &m.size) == -ENOENT)
			m.mode = SV_MIRROR_DELETE;
		f->f_in_obj = false;
		f->f_after = f->f_obj;
		if (mirror_streaming(f))
			mirror_frame(sv, f, &m);
	}
}

/* Opens a stream to @f: it starts with a resync. */
static void mirror_dial(struct sv_server *sv, struct follower *f)
{
	const struct orch_server_cfg *to = orch_cfg_member(&sv->s_cfg, sv->s_index, f->f_member);
	struct orch_msg m;
	int error;

	f->f_dial_at_ms = orch_time_now_ms() + MIRROR_REDIAL_MS;
	f->f_dialled = true;
	error = orch_conn_connect(sv->s_ev, to->host, to->port, sv->s_cfg.key, sv->s_index,
				  &sv->s_mirror->m_ops, sv, &f->f_conn);
	if (error) {
		f->f_conn = NULL;
		return;
	}
	f->f_state = F_RESYNC;
	/* One the log still counts in sync keeps what it last applied: the gate waits for its drop. */
	if (!f->f_in_sync)
		f->f_acked = sv->s_gate.g_sent;
	f->f_sent = sv->s_gate.g_sent;
	f->f_waiting_since_ms = 0;
	f->f_after = 0;
	f->f_in_obj = false;
	f->f_resync_bytes = 0;
	f->f_sums_asked = f->f_sums_ready = false;
	if (!f->f_sums)
		f->f_sums = malloc(MIRROR_SUMS_PAGE * sizeof(*f->f_sums));
	orch_msg_init(&m, ORCH_SV2SV_MIRROR);
	m.mode = SV_MIRROR_RESYNC_BEGIN;
	/* The pump starts at its answer: the handshake is over, its features known. */
	mirror_frame(sv, f, &m);
}

/*
 * This member is not in sync: one that is takes the lead.  Each try asks
 * the next such member, since the one asked may be the dead leader (a
 * transfer to it ends after an election timeout).
 */
static void mirror_hand_over(struct sv_server *sv)
{
	struct sv_mirror *mi = sv->s_mirror;
	unsigned int n = sv->s_cfg.replicas;

	for (unsigned int k = 0; k < n; k++) {
		unsigned int m = (mi->m_hand_to + k) % n;
		int error;

		if (!(mi->m_mask & (1u << m)))
			continue;
		error = sv_ns_transfer(sv, m);
		if (error == -EBUSY)
			return; /* the last one is under way */
		mi->m_hand_to = m + 1;
		if (!error)
			ORCH_WARN("replica group %u: this member does not hold the file data in sync:"
				  " handing the lead to member %u", sv->s_index, m);
		return;
	}
	ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "replica group %u: no member holds the file data in "
			   "sync: data requests wait (docs/ADMIN.md, \"Replica groups\")",
			   sv->s_index);
}

/*
 * Once this member and the live followers in the set are a majority, the
 * others leave the set (each comes back when its resync ends): they would
 * keep the gate closed, and one still resyncing must not be elected.
 * Before that they stay: with them the group still has a member in sync
 * to elect if this one dies.
 */
static void mirror_trim(struct sv_server *sv)
{
	struct sv_mirror *mi = sv->s_mirror;
	uint32_t keep = 1u << sv->s_member;
	unsigned int live = 1;

	if (!mi->m_started || mi->m_changing)
		return;
	for (unsigned int i = 0; i < mi->m_nf; i++) {
		const struct follower *f = &mi->m_f[i];

		if (f->f_in_sync && f->f_state == F_LIVE) {
			keep |= 1u << f->f_member;
			live++;
		}
	}
	if (keep != mi->m_mask && live >= sv->s_cfg.replicas / 2 + 1 &&
	    mirror_change(sv, keep, -1) == 0)
		ORCH_NOTICE("replica group %u: members in sync with the file data: %#x (was %#x)",
			    sv->s_index, keep, mi->m_mask);
}

static void mirror_tick(void *arg)
{
	struct sv_server *sv = arg;
	struct sv_mirror *mi = sv->s_mirror;
	uint64_t now = orch_time_now_ms();

	if (!mi->m_started)
		mirror_hand_over(sv);
	sv_gate_expire(sv, now);
	mirror_trim(sv);
	for (unsigned int i = 0; mi->m_started && i < mi->m_nf; i++) {
		struct follower *f = &mi->m_f[i];

		/* In sync by the log, dialled, and without a stream: out. */
		if (f->f_in_sync && !f->f_conn && f->f_dialled)
			mirror_drop(sv, f);
		if (!f->f_conn && now >= f->f_dial_at_ms)
			mirror_dial(sv, f);
		else if (f->f_conn && f->f_waiting_since_ms &&
			 now - f->f_waiting_since_ms >= MIRROR_SILENT_MS)
			orch_conn_close(f->f_conn, -ETIMEDOUT); /* mirror_on_close drops it */
		else if (f->f_conn && !f->f_in_sync && f->f_state == F_LIVE)
			mirror_change(sv, mi->m_mask | (1u << f->f_member), (int)i);
		else if (f->f_conn && f->f_state == F_RESYNC)
			mirror_pump(sv, f);
	}
	orch_ev_timer_arm(sv->s_ev, &mi->m_tick, MIRROR_TICK_MS, mirror_tick, sv);
}

void sv_mirror_lead(struct sv_server *sv)
{
	struct sv_mirror *mi = sv->s_mirror;
	uint64_t mask;
	int error;

	if (!mi)
		return;
	error = orch_meta_value_get(sv->s_meta, MIRROR_KEY, &mask);
	if (error == -ENOENT)
		mask = (1u << sv->s_cfg.replicas) - 1; /* a new group: every store is empty */
	else if (error)
		mask = 0;
	mi->m_mask = (uint32_t)mask;
	mi->m_term = sv_ns_term(sv);
	mi->m_leading = true;
	mi->m_nf = 0;
	for (unsigned int m = 0; m < sv->s_cfg.replicas; m++) {
		struct follower *f = &mi->m_f[mi->m_nf];
		struct orch_blocksum *sums = f->f_sums; /* kept from an earlier term */

		if (m == sv->s_member)
			continue;
		*f = (struct follower){ .f_member = m, .f_in_sync = mi->m_mask & (1u << m),
					.f_sums = sums };
		mi->m_nf++;
	}
	/*
	 * Closed until a majority is resynced: each follower's stream starts
	 * with a resync, since what it got from the last leader may differ
	 * from what this one has in the writes that leader never
	 * acknowledged.  The set in sync stays as it is meanwhile: every
	 * member in it holds every acknowledged byte all along.
	 */
	sv_gate_start(sv, mirror_sync);
	mi->m_started = (mi->m_mask >> sv->s_member) & 1;
	if (mi->m_started) {
		ORCH_NOTICE("replica group %u: serving the file data; resyncing the followers",
			    sv->s_index);
		/* Now: every store operation from here on must reach each stream. */
		for (unsigned int i = 0; i < mi->m_nf; i++)
			mirror_dial(sv, &mi->m_f[i]);
	}
	orch_ev_timer_arm(sv->s_ev, &mi->m_tick, 0, mirror_tick, sv);
}

/* --- As a follower ----------------------------------------------------------------- */

#define MIRROR_DROP_BATCH 256

struct mirror_collect {
	uint64_t h[MIRROR_DROP_BATCH];
	size_t n;
};

static int mirror_collect(void *arg, uint64_t handle)
{
	struct mirror_collect *c = arg;

	if (c->n < ORCH_ARRAY_SIZE(c->h))
		c->h[c->n++] = handle;
	return 0;
}

/* RESYNC_DROP, RESYNC_END: the objects in (@after, @below) are not the leader's (@below 0: no end). */
static int mirror_drop_range(struct sv_server *sv, uint64_t after, uint64_t below)
{
	struct mirror_collect *c = malloc(sizeof(*c));
	int error;

	if (!c)
		return -ENOMEM;
	for (;;) {
		uint64_t from = after;
		bool eof;

		c->n = 0;
		error = orch_store_handles(sv->s_store, &from, MIRROR_DROP_BATCH, mirror_collect,
					   c, &eof);
		while (below && c->n && c->h[c->n - 1] >= below)
			c->n--;
		if (!error && c->n)
			error = orch_store_delete_many(sv->s_store, c->h, c->n);
		if (error || !c->n)
			break;
	}
	free(c);
	return error;
}

static int mirror_apply(struct sv_server *sv, const struct orch_msg *m)
{
	const uint8_t *p = (const uint8_t *)m->data.s;
	uint64_t h[ORCH_DATA_DELETE_MANY_MAX];
	size_t n = m->data.len / 8;

	switch (m->mode) {
	case SV_MIRROR_WRITE:
		return orch_store_write(sv->s_store, m->handle, m->offset, m->data.s, m->data.len);
	case SV_MIRROR_TRUNCATE:
		return orch_store_truncate(sv->s_store, m->handle, m->size);
	case SV_MIRROR_CUT:
		return orch_store_cut(sv->s_store, m->handle, m->size);
	case SV_MIRROR_PUNCH:
		return orch_store_punch(sv->s_store, m->handle, m->offset, m->size);
	case SV_MIRROR_DELETE:
		return orch_store_delete(sv->s_store, m->handle);
	case SV_MIRROR_DELETE_MANY:
		if (m->data.len % 8 || n > ORCH_DATA_DELETE_MANY_MAX)
			return -EINVAL;
		for (size_t i = 0; i < n; i++)
			h[i] = orch_get_u64(p + 8 * i);
		return orch_store_delete_many(sv->s_store, h, n);
	case SV_MIRROR_SYNC:
		return orch_store_sync(sv->s_store);
	case SV_MIRROR_RESYNC_BEGIN:
		return 0;
	case SV_MIRROR_RESYNC_DROP:
		return m->handle > m->offset ? mirror_drop_range(sv, m->offset, m->handle) : -EINVAL;
	case SV_MIRROR_RESYNC_END:
		return mirror_drop_range(sv, m->offset, 0);
	default:
		return -EINVAL;
	}
}

/*
 * A frame of a data stream: only from the leader of this term, as this
 * member knows it (a deposed one is refused, ESTALE).  0, or answered.
 */
static int mirror_from_leader(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct sv_mirror *mi = sv->s_mirror;

	if (!mi || !sv_mirror_in_group(sv)) {
		sv_reply_status(r, -EOPNOTSUPP);
		return -EOPNOTSUPP;
	}
	if (m->origin != sv->s_index || m->length >= sv->s_cfg.replicas ||
	    !sv_ns_follows(sv, m->length, m->id)) {
		mi->m_counts.refused++;
		ORCH_LOG_RATELIMIT(ORCH_LOG_NOTICE, "replica group %u: data stream of member %u "
				   "(term %" PRIu64 ") refused: it does not lead this member",
				   sv->s_index, m->length, m->id);
		sv_reply_status(r, -ESTALE);
		return -ESTALE;
	}
	return 0;
}

void sv_sums_reply(struct sv_server *sv, struct sv_req *r, uint64_t h, uint64_t from, size_t max,
		   uint64_t seq)
{
	struct orch_blocksum *v = malloc((max ? max : 1) * sizeof(*v));
	struct orch_buf b;
	struct orch_msg rep;
	uint64_t next = 0;
	bool eof = true;
	size_t n = 0;

	orch_buf_init(&b, max * ORCH_BLOCKSUMS_REC_BYTES);
	orch_msg_init(&rep, 0);
	rep.status = v ? orch_store_block_sums(sv->s_store, h, from, v, max, &n, &next, &eof)
		       : -ENOMEM;
	for (size_t i = 0; i < n; i++)
		orch_blocksums_encode(&b, &v[i]);
	if (!rep.status)
		rep.status = b.b_err;
	rep.cookie = seq;
	rep.data = orch_str_of((const char *)b.b_data, b.b_len);
	rep.eof = eof;
	rep.offset = next;
	sv_reply(r, &rep);
	orch_buf_fini(&b);
	free(v);
}

/* This member's checksums of an object, in the order of the stream it is resynced by. */
int sv_mirror_sums(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct sv_mirror *mi = sv->s_mirror;

	if (mirror_from_leader(sv, r, m))
		return 0;
	if (r->r_conn != mi->m_in) {
		mi->m_counts.refused++;
		sv_reply_status(r, -EPROTO);   /* only inside the stream it compares */
		return 0;
	}
	sv_sums_reply(sv, r, m->handle, m->offset, MIRROR_SUMS_PAGE, m->cookie);
	return 0;
}

int sv_mirror_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct sv_mirror *mi = sv->s_mirror;
	struct orch_msg rep;
	int error;

	if (mirror_from_leader(sv, r, m))
		return 0;
	if (r->r_conn != mi->m_in) {
		/* A stream starts with a resync: what came before it is not known here. */
		if (m->mode != SV_MIRROR_RESYNC_BEGIN) {
			mi->m_counts.refused++;
			sv_reply_status(r, -EPROTO);
			return 0;
		}
		if (mi->m_in)
			orch_conn_put(mi->m_in);
		orch_conn_get(r->r_conn);
		mi->m_in = r->r_conn;
		mi->m_in_term = m->id;
		mi->m_in_member = m->length;
		ORCH_NOTICE("replica group %u: resync from member %u (term %" PRIu64 ")",
			    sv->s_index, m->length, m->id);
	}
	error = mirror_apply(sv, m);
	/* Absent on both sides is the same state. */
	if (error == -ENOENT && m->mode != SV_MIRROR_WRITE)
		error = 0;
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "replica group %u: cannot apply the leader's "
				   "data operation %u (object %016" PRIx64 "): %s", sv->s_index,
				   m->mode, m->handle, strerror(-error));
		/* Out of sync from here: the next stream starts with a resync. */
		orch_conn_put(mi->m_in);
		mi->m_in = NULL;
		sv_reply_status(r, error);
		return 0;
	}
	mi->m_counts.applied++;
	sv_flusher_dirty(sv);
	orch_msg_init(&rep, r->r_type);
	rep.cookie = m->cookie;
	rep.mode = m->mode;
	sv_reply(r, &rep);
	return 0;
}

/* --- Life --------------------------------------------------------------------------- */

int sv_mirror_init(struct sv_server *sv)
{
	struct sv_mirror *mi;

	if (!sv_mirror_in_group(sv))
		return 0;
	mi = calloc(1, sizeof(*mi));
	if (mi) {
		mi->m_buf = malloc(MIRROR_CHUNK);
		mi->m_sums = malloc(MIRROR_SUMS_PAGE * sizeof(*mi->m_sums));
	}
	if (!mi || !mi->m_buf || !mi->m_sums) {
		if (mi) {
			free(mi->m_buf);
			free(mi->m_sums);
		}
		free(mi);
		return -ENOMEM;
	}
	mi->m_ops = (struct orch_conn_ops){
		.on_frame = mirror_on_frame,
		.on_close = mirror_on_close,
		.features = ORCH_FEAT_MIRROR_SUMS,
	};
	sv->s_mirror = mi;
	return 0;
}

void sv_mirror_fini(struct sv_server *sv)
{
	struct sv_mirror *mi = sv->s_mirror;

	if (!mi)
		return;
	sv_gate_stop(sv, -ORCH_ENOTLEADER);
	if (mi->m_leading)
		orch_ev_timer_cancel(sv->s_ev, &mi->m_tick);
	mi->m_leading = false;
	for (unsigned int i = 0; i < mi->m_nf; i++)
		if (mi->m_f[i].f_conn)
			orch_conn_close(mi->m_f[i].f_conn, -ESHUTDOWN);
	if (mi->m_in)
		orch_conn_put(mi->m_in);
	sv->s_mirror = NULL;
	for (unsigned int i = 0; i < ORCH_REPLICAS_MAX; i++)
		free(mi->m_f[i].f_sums);
	free(mi->m_buf);
	free(mi->m_sums);
	free(mi);
}

void sv_mirror_counts(const struct sv_server *sv, struct sv_mirror_counts *out)
{
	static const char *const states[] = { "idle", "resync", "ended", "live" };
	const struct sv_mirror *mi = sv->s_mirror;
	size_t at = 0;

	memset(out, 0, sizeof(*out));
	if (!mi)
		return;
	*out = mi->m_counts;
	out->sent = sv->s_gate.g_sent;
	out->safe = sv->s_gate.g_safe;
	out->replies_held = sv->s_gate.g_replies_held;
	out->mask = mi->m_mask;
	out->changing = mi->m_changing;
	out->gate_open = sv_gate_open(&sv->s_gate);
	for (const struct sv_req *r = sv->s_gate.g_held; r; r = r->r_held_next)
		out->waiting++;
	for (unsigned int i = 0; i < mi->m_nf && at < sizeof(out->followers); i++) {
		const struct follower *f = &mi->m_f[i];
		int n = snprintf(out->followers + at, sizeof(out->followers) - at,
				 "%s%u:%s:%d:%" PRIu64, at ? " " : "", f->f_member,
				 states[f->f_state], f->f_in_sync, f->f_acked);

		if (n < 0)
			break;
		at += (size_t)n;
	}
}
