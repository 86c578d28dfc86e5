/*
 * Requests for file data, served where the data is (each server of a
 * layout acts on the strips it holds): READ and WRITE of one object,
 * copy_file_range, dedupe, block checksums and hole punching.  Writes go
 * through the store's queue (sv_write.c), long copies and dedupes to the
 * data worker (sv_work.c).  Loop thread.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "proto/layout.h"
#include "server/flush.h"
#include "server/sv_data.h"
#include "server/sv_peer.h"
#include "server/sv_mirror.h"
#include "server/sv_req.h"
#include "server/sv_work.h"
#include "server/sv_write.h"
#include "store/sums.h"

int sv_data_read(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	size_t len = ORCH_MIN(m->length, ORCH_IO_MAX), got = 0;
	struct orch_msg rep;
	void *buf = malloc(len ? len : 1);

	orch_msg_init(&rep, 0);
	rep.status = buf ? orch_store_read(sv->s_store, m->handle, m->offset, buf, len, &got)
			 : -ENOMEM;
	rep.data = orch_str_of(buf, got);
	sv_reply(r, &rep);
	free(buf);
	return 0;
}

int sv_data_write(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	sv_write_submit(sv, r, m->handle, m->offset, m->data.s, m->data.len);
	return 0;
}

/*
 * copy_file_range, served where the data is: this server copies the pieces
 * of the source range it holds, each to the server the destination's
 * layout puts it on, and answers when every piece is written.  The client
 * sends the same request to every server of the source's layout.  A piece
 * that stays here is cloned (the store shares its blocks: no data moves)
 * where whole blocks line up, which they do whenever both files have one
 * layout and the offsets agree, as for `cp`; the rest is read and written,
 * here or on a peer through SV2SV_WRITE.
 */
#define SV_COPY_MAX (64ull << 20)

/* A piece whose source and destination are both on this server. */
static int sv_copy_local(struct sv_server *sv, const struct orch_msg *m, uint64_t soff,
			 uint64_t doff, uint64_t n, uint8_t *buf)
{
	uint64_t whole = 0;
	size_t got = 0;
	int error = 0;

	if (soff % ORCH_STORE_BLOCK == 0 && doff % ORCH_STORE_BLOCK == 0)
		whole = n / ORCH_STORE_BLOCK * ORCH_STORE_BLOCK;
	if (whole)
		error = orch_store_clone(sv->s_store, m->handle, soff, m->handle2, doff, whole);
	if (error || whole == n)
		return error;
	error = orch_store_read(sv->s_store, m->handle, soff + whole, buf, n - whole, &got);
	if (error)
		return error;
	memset(buf + got, 0, n - whole - got);  /* a hole, or past the object's end */
	return orch_store_write(sv->s_store, m->handle2, doff + whole, buf, n - whole);
}

struct copy_job {
	struct sv_req *cj_req;
	unsigned int cj_outstanding; /* peer writes in flight, plus one while sending */
	int cj_error;
	uint64_t cj_copied;
};

static void sv_copy_put(struct copy_job *cj)
{
	struct orch_msg rep;

	if (--cj->cj_outstanding)
		return;
	orch_msg_init(&rep, 0);
	rep.status = cj->cj_error;
	rep.size = cj->cj_copied;
	sv_reply(cj->cj_req, &rep);
	free(cj);
}

static void sv_copy_written(struct sv_server *sv, void *arg, int error,
			    const struct orch_msg *rep)
{
	struct copy_job *cj = arg;

	(void)sv;
	(void)rep;
	if (error && !cj->cj_error)
		cj->cj_error = error == -EHOSTDOWN ? -EIO : error;
	sv_copy_put(cj);
}

/*
 * Both files have one layout and the ranges lie a whole number of stripe
 * rows apart (what cp does: offset 0 to offset 0): then this server's
 * strips of each range are one contiguous range of its object, and one
 * clone covers them all instead of one per strip.  True if it took the
 * request (*@error says how it went).
 */
static bool sv_copy_whole_rows(struct sv_server *sv, const struct orch_msg *m, uint8_t *buf,
			       int *error)
{
	const struct orch_layout *l = &m->layout, *l2 = &m->layout2;
	uint64_t row = (uint64_t)l->strip_size * l->stripe_count, ls, le, ld;
	uint64_t delta = m->offset2 > m->offset ? m->offset2 - m->offset : m->offset - m->offset2;

	if (l->strip_size != l2->strip_size || l->stripe_count != l2->stripe_count ||
	    l->first_server != l2->first_server || delta % row)
		return false;
	*error = 0;
	if (sv->s_index >= l->stripe_count)
		return true;   /* holds no strip of either */
	ls = orch_layout_local_size(l, m->offset, sv->s_index);
	le = orch_layout_local_size(l, m->offset + m->size, sv->s_index);
	ld = orch_layout_local_size(l, m->offset2, sv->s_index);
	/* Whole blocks, so that only a tail under one block is copied (into @buf). */
	if (ls % ORCH_STORE_BLOCK || ld % ORCH_STORE_BLOCK)
		return false;
	if (le > ls)
		*error = sv_copy_local(sv, m, ls, ld, le - ls, buf);
	return true;
}

/*
 * Calls @fn for each piece of the source range that this server holds, with
 * where its destination lies; stops at the first non-zero return.
 */
static int sv_copy_pieces(struct sv_server *sv, const struct orch_msg *m,
			  int (*fn)(void *arg, const struct orch_layout_pos *sp,
				    const struct orch_layout_pos *dp, uint64_t n),
			  void *arg)
{
	uint64_t off = m->offset, end = m->offset + m->size;
	struct orch_layout_pos sp, dp;
	int rc = 0;

	while (off < end && !rc) {
		uint64_t n;

		orch_layout_locate(&m->layout, off, &sp);
		n = ORCH_MIN(sp.run, end - off);
		if (sp.server == sv->s_index) {
			orch_layout_locate(&m->layout2, m->offset2 + (off - m->offset), &dp);
			n = ORCH_MIN(n, dp.run);
			rc = fn(arg, &sp, &dp, n);
		}
		off += n;
	}
	return rc;
}

static int sv_copy_is_remote(void *arg, const struct orch_layout_pos *sp,
			     const struct orch_layout_pos *dp, uint64_t n)
{
	(void)sp;
	(void)n;
	return dp->server != *(unsigned int *)arg;
}

struct copy_local {
	struct sv_server *sv;
	const struct orch_msg *m;
	uint8_t *buf;
	uint64_t copied;
};

static int sv_copy_local_piece(void *arg, const struct orch_layout_pos *sp,
			       const struct orch_layout_pos *dp, uint64_t n)
{
	struct copy_local *cl = arg;
	int error = sv_copy_local(cl->sv, cl->m, sp->local_off, dp->local_off, n, cl->buf);

	if (!error)
		cl->copied += n;
	return error;
}

/* On the data worker: a copy whose pieces held here all stay here. */
static void sv_copy_run(struct sv_server *sv, const struct orch_msg *m, struct orch_msg *rep)
{
	struct copy_local cl = { .sv = sv, .m = m };
	int error = 0;

	cl.buf = malloc(ORCH_MIN((uint64_t)m->layout.strip_size, m->size ? m->size : 1));
	if (!cl.buf) {
		rep->status = -ENOMEM;
		return;
	}
	if (sv_copy_whole_rows(sv, m, cl.buf, &error))
		cl.copied = m->size;
	else
		error = sv_copy_pieces(sv, m, sv_copy_local_piece, &cl);
	free(cl.buf);
	sv_flusher_dirty(sv);
	rep->status = error;
	rep->size = cl.copied;
}

struct copy_mixed {
	struct sv_server *sv;
	const struct orch_msg *m;
	struct copy_job *cj;
	uint8_t *buf;
};

/* A piece copied here, or read here and written by a peer (SV2SV_WRITE). */
static int sv_copy_mixed_piece(void *arg, const struct orch_layout_pos *sp,
			       const struct orch_layout_pos *dp, uint64_t n)
{
	struct copy_mixed *cm = arg;
	struct sv_server *sv = cm->sv;
	struct orch_msg w;
	size_t got = 0;
	int error;

	if (dp->server == sv->s_index) {
		error = sv_copy_local(sv, cm->m, sp->local_off, dp->local_off, n, cm->buf);
		cm->cj->cj_copied += n;
		return error;
	}
	if (dp->server >= sv->s_cfg.nservers)
		return -EINVAL;
	error = orch_store_read(sv->s_store, cm->m->handle, sp->local_off, cm->buf, n, &got);
	if (error)
		return error;
	memset(cm->buf + got, 0, n - got); /* a hole, or past the object's end */
	orch_msg_init(&w, ORCH_SV2SV_WRITE);
	w.origin = sv->s_index;
	w.handle = cm->m->handle2;
	w.offset = dp->local_off;
	w.data = orch_str_of((const char *)cm->buf, n);
	cm->cj->cj_outstanding++;
	sv_peer_call(sv, dp->server, &w, sv_copy_written, cm->cj);
	cm->cj->cj_copied += n;
	return 0;
}

int sv_data_copy_range(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct copy_mixed cm;
	struct copy_job *cj;
	uint8_t *buf;
	int error;

	/* Not through the data stream yet (sv_mirror.h): the kernel copies by reads and writes. */
	if (sv_mirror_in_group(sv)) {
		sv_reply_status(r, -EOPNOTSUPP);
		return 0;
	}
	if (!orch_layout_is_valid(&m->layout) || !orch_layout_is_valid(&m->layout2) ||
	    m->size > SV_COPY_MAX || m->offset + m->size < m->offset ||
	    m->offset2 + m->size < m->offset2) {
		sv_reply_status(r, -EINVAL);
		return 0;
	}
	/* Nothing to send to a peer (cp of a file to one of its layout): off the loop. */
	if (!sv_copy_pieces(sv, m, sv_copy_is_remote, &sv->s_index)) {
		sv_work_submit(sv, r, m, sv_copy_run);
		return 0;
	}
	cj = calloc(1, sizeof(*cj));
	buf = malloc(ORCH_MIN((uint64_t)m->layout.strip_size, m->size ? m->size : 1));
	if (!cj || !buf) {
		free(cj);
		free(buf);
		sv_reply_status(r, -ENOMEM);
		return 0;
	}
	cj->cj_req = r;
	cj->cj_outstanding = 1;
	cm = (struct copy_mixed){ .sv = sv, .m = m, .cj = cj, .buf = buf };
	error = sv_copy_pieces(sv, m, sv_copy_mixed_piece, &cm);
	free(buf);
	if (error && !cj->cj_error)
		cj->cj_error = error;
	sv_flusher_dirty(sv);
	sv_copy_put(cj);
	return 0;
}

/*
 * Dedupe (FIDEDUPERANGE), served where the data is, like copy_file_range:
 * for each piece of the source range held here whose destination is here
 * too, the store compares the bytes and, if equal, shares the source's
 * blocks, in one transaction (orch_store_dedupe).  ORCH_DEDUPE_COMPARE
 * only compares, so that the client can ask every server before any
 * changes anything.  Pieces on two servers, and partial blocks, cannot
 * share a block: compared, not counted.  Replies with the bytes shared (or
 * found equal), -EBADE at the first piece that differs.
 */
static int sv_dedupe_piece(struct sv_server *sv, const struct orch_msg *m, uint64_t soff,
			   uint64_t doff, uint64_t n, uint8_t *buf, uint64_t *deduped)
{
	uint64_t whole = 0, d = 0;
	size_t got[2];
	int error = 0;

	if (!(m->dedupe_flags & ORCH_DEDUPE_COMPARE) && soff % ORCH_STORE_BLOCK == 0 &&
	    doff % ORCH_STORE_BLOCK == 0)
		whole = n / ORCH_STORE_BLOCK * ORCH_STORE_BLOCK;
	for (uint64_t at = 0, n1; !error && at < whole; at += n1) {
		n1 = ORCH_MIN(whole - at, (uint64_t)ORCH_STORE_MAX_IO);
		/* d may be short of n1: blocks past an object's end are not shared. */
		error = orch_store_dedupe(sv->s_store, m->handle, soff + at, m->handle2, doff + at,
					  n1, &d);
		*deduped += d;
	}
	if (error || whole == n)
		return error;
	/* What cannot be shared is compared, so that "differ" means differ. */
	n -= whole;
	error = orch_store_read(sv->s_store, m->handle, soff + whole, buf, n, &got[0]);
	if (!error)
		error = orch_store_read(sv->s_store, m->handle2, doff + whole, buf + n, n, &got[1]);
	if (error)
		return error;
	memset(buf + got[0], 0, n - got[0]);
	memset(buf + n + got[1], 0, n - got[1]);
	if (memcmp(buf, buf + n, n))
		return -EBADE;
	if (m->dedupe_flags & ORCH_DEDUPE_COMPARE)
		*deduped += n;
	return 0;
}

/* On the data worker: compares (and shares) every piece held here. */
static void sv_dedupe_run(struct sv_server *sv, const struct orch_msg *m, struct orch_msg *rep)
{
	uint64_t off = m->offset, end = m->offset + m->size, deduped = 0;
	struct orch_layout_pos sp, dp;
	uint8_t *buf;
	int error = 0;

	buf = malloc(2 * ORCH_MIN((uint64_t)m->layout.strip_size, m->size ? m->size : 1));
	if (!buf) {
		rep->status = -ENOMEM;
		return;
	}
	while (off < end && !error) {
		uint64_t n;

		orch_layout_locate(&m->layout, off, &sp);
		n = ORCH_MIN(sp.run, end - off);
		orch_layout_locate(&m->layout2, m->offset2 + (off - m->offset), &dp);
		n = ORCH_MIN(n, dp.run);
		if (sp.server == sv->s_index && dp.server == sv->s_index)
			error = sv_dedupe_piece(sv, m, sp.local_off, dp.local_off, n, buf, &deduped);
		off += n;
	}
	free(buf);
	if (!error && !(m->dedupe_flags & ORCH_DEDUPE_COMPARE))
		sv_flusher_dirty(sv);
	rep->status = error;
	rep->size = deduped;
}

int sv_data_dedupe(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	if (sv_mirror_in_group(sv)) {
		sv_reply_status(r, -EOPNOTSUPP);
		return 0;
	}
	if (!orch_layout_is_valid(&m->layout) || !orch_layout_is_valid(&m->layout2) ||
	    m->size > SV_COPY_MAX || m->offset + m->size < m->offset ||
	    m->offset2 + m->size < m->offset2) {
		sv_reply_status(r, -EINVAL);
		return 0;
	}
	sv_work_submit(sv, r, m, sv_dedupe_run);
	return 0;
}

/*
 * The checksums of this server's written blocks of one object, a page
 * from object block m->offset, at most m->length records: what `orchard
 * dedupe --scan` groups blocks by.  Read-only, like READ, and as cheap as a
 * read of the extent map; replies with the page, eof and the block to
 * resume from.
 */
int sv_data_block_sums(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	sv_sums_reply(sv, r, m->handle, m->offset,
			   ORCH_MIN((size_t)m->length, (size_t)ORCH_BLOCKSUMS_PAGE_MAX), 0);
	return 0;
}

/*
 * fallocate(PUNCH_HOLE): this server frees the pieces of [offset,
 * offset+size) of the file that it holds; the client asks every server of
 * the layout.  The size does not change.
 */
int sv_data_punch(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	uint64_t from, to;
	int error = 0;

	if (!orch_layout_is_valid(&m->layout) || m->offset > ORCH_STORE_MAX_SIZE ||
	    m->size > ORCH_STORE_MAX_SIZE) {
		sv_reply_status(r, -EINVAL);
		return 0;
	}
	/*
	 * This server's strips of [offset, offset+size) are one contiguous range
	 * of its object: from the bytes it holds below the start to those below
	 * the end.  One call, whatever the size (no loop a peer could make long).
	 */
	if (sv->s_index >= m->layout.stripe_count) {
		sv_reply_status(r, 0); /* holds no strip of this file */
		return 0;
	}
	from = orch_layout_local_size(&m->layout, m->offset, sv->s_index);
	to = orch_layout_local_size(&m->layout, m->offset + m->size, sv->s_index);
	if (to > from)
		error = sv_store_punch(sv, m->handle, from, to - from);
	if (!error)
		sv_flusher_dirty(sv);
	sv_reply_status(r, error);
	return 0;
}

/*
 * The blocks the store holds for this server's strips of the file, shared
 * ones included: the object record's count, one index probe on the loop,
 * like the size a GETATTR reads.  The client sums the servers' answers.
 */
int sv_data_allocated(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_msg rep;
	uint64_t nblocks = 0;

	orch_msg_init(&rep, 0);
	rep.status = orch_store_object_blocks(sv->s_store, m->handle, &nblocks);
	rep.size = nblocks * ORCH_STORE_BLOCK;
	sv_reply(r, &rep);
	return 0;
}
