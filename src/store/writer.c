/*
 * The writer thread: the only one that changes the store.
 *
 * It takes every queued operation, applies as many as are waiting in one
 * SQLite transaction (each inside a savepoint, so a failing one is undone
 * alone), commits once and then reports them all: a hundredfold less per
 * operation than a commit each (docs/PERF-NOTES.md, "SQLite or LMDB").
 * Data goes to newly allocated blocks before the commit that maps them
 * (redirect-on-write), so a crash anywhere leaves the old or the new state.
 *
 * Truncate, punch and delete that would free more than STORE_WORK_CHUNK
 * extents become work items: the first transaction does what readers must
 * see at once (the new size, the zeroed edges, the object marked dying) and
 * records the item; then one transaction per chunk frees extents from the
 * end of the range, moving the item's progress, and the last deletes it.
 * The writer finishes an item before it takes the next operation, and
 * opening the store finishes any item a crash interrupted.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "common/util.h"
#include "store/writer_i.h"

/* Runs of held blocks punched by an idle writer before it looks for work again. */
#define W_PUNCH_BATCH 256
/* Operations applied in one transaction at most. */
#define W_BATCH_MAX 512
/* ...or this many bytes of data written. */
#define W_BATCH_BYTES (32u << 20)
/* An operation needs a work item: returned by the apply functions. */
#define W_LONG 1
/* A piece of an operation was applied: commit, then apply it again. */
#define W_AGAIN 3

/* --- Statement helpers ------------------------------------------------------------- */

sqlite3_stmt *orch_writer_bind(struct store_writer *w, enum orch_rec_stmt id, const int64_t *v,
			       int n)
{
	sqlite3_stmt *s = w->w_sq.q_stmt[id];

	sqlite3_reset(s);
	for (int i = 0; i < n; i++)
		sqlite3_bind_int64(s, i + 1, v[i]);
	return s;
}

int orch_writer_row(struct store_writer *w, enum orch_rec_stmt id, const int64_t *v, int n)
{
	orch_writer_bind(w, id, v, n);
	return orch_rec_step(&w->w_sq, id);
}

int orch_writer_exec(struct store_writer *w, enum orch_rec_stmt id, const int64_t *v, int n)
{
	orch_writer_bind(w, id, v, n);
	return orch_rec_exec(&w->w_sq, id);
}

sqlite3_stmt *orch_writer_stmt(struct store_writer *w, enum orch_rec_stmt id)
{
	sqlite3_stmt *s = w->w_sq.q_stmt[id];

	sqlite3_reset(s);
	return s;
}

/* --- Objects ------------------------------------------------------------------------ */

struct w_obj {
	int64_t nid;          /* 0: does not exist */
	bool stored;          /* its row is in store.db (in this transaction) */
	uint64_t handle;
	uint64_t size;
	uint32_t flags;
	int64_t nextents, nblocks;
};

struct w_ext {
	uint64_t off;
	uint32_t ag, agbno, len, flags;
};

/*
 * @o from the row of @s.  The writer trusts its records as it always has:
 * it decodes them through the record layer but does not act on a failed
 * verification (the checker reports it; reads refuse the record).
 */
static void obj_from_row(sqlite3_stmt *s, struct w_obj *o)
{
	struct orch_obj_irec r;

	(void)orch_rec_obj_from_disk(s, 0, &r);
	o->nid = r.nid;
	o->stored = true;
	o->handle = r.handle;
	o->size = r.size;
	o->flags = r.flags;
	o->nextents = (int64_t)r.nextents;
	o->nblocks = (int64_t)r.nblocks;
}

static int obj_load(struct store_writer *w, uint64_t h, struct w_obj *o)
{
	int rc = orch_writer_row(w, ORCH_REC_OBJ_LIVE_BY_HANDLE, W_ARGS(orch_rec_key_u64(h)));

	memset(o, 0, sizeof(*o));
	o->handle = h;
	if (rc <= 0)
		return rc;
	obj_from_row(w->w_sq.q_stmt[ORCH_REC_OBJ_LIVE_BY_HANDLE], o);
	orch_rec_reset(&w->w_sq, ORCH_REC_OBJ_LIVE_BY_HANDLE);
	o->handle = h;
	return 0;
}

static int obj_load_nid(struct store_writer *w, int64_t nid, struct w_obj *o)
{
	int rc = orch_writer_row(w, ORCH_REC_OBJ_BY_NID, W_ARGS(nid));

	memset(o, 0, sizeof(*o));
	if (rc <= 0)
		return rc;
	obj_from_row(w->w_sq.q_stmt[ORCH_REC_OBJ_BY_NID], o);
	orch_rec_reset(&w->w_sq, ORCH_REC_OBJ_BY_NID);
	o->nid = nid;
	return 0;
}

/*
 * Writes @o's row: an UPDATE of the row read, which leaves the obj_handle
 * index alone (one page less in the WAL for every write), or an INSERT of
 * a new one.
 */
static int obj_save(struct store_writer *w, struct w_obj *o)
{
	struct orch_obj_irec r = {
		.nid = o->nid, .handle = o->handle, .size = o->size, .flags = o->flags,
		.nextents = (uint64_t)o->nextents, .nblocks = (uint64_t)o->nblocks,
	};
	int error;

	if (o->stored) {
		orch_rec_obj_bind(orch_writer_stmt(w, ORCH_REC_OBJ_UPD), &r);
		error = orch_rec_exec(&w->w_sq, ORCH_REC_OBJ_UPD);
		if (error || sqlite3_changes(w->w_db) == 1)
			return error;
	}
	orch_rec_obj_bind(orch_writer_stmt(w, ORCH_REC_OBJ_PUT), &r);
	error = orch_rec_exec(&w->w_sq, ORCH_REC_OBJ_PUT);
	if (!error)
		o->stored = true;
	return error;
}

static void obj_new(struct store_writer *w, struct w_obj *o)
{
	o->nid = w->w_next_nid++;
	w->w_meta_dirty = true;
	w->w_dobjects++;
	w->w_txn_created++;
}

/* --- Extent map: bmap and rmap together ------------------------------------------------ */

static int ext_insert_raw(struct store_writer *w, struct w_obj *o, const struct w_ext *e)
{
	struct orch_bmap_irec b = { o->nid, e->off, e->ag, e->agbno, e->len, e->flags };
	struct orch_rmap_irec r = { e->ag, e->agbno, o->nid, e->off, e->len, e->flags };
	struct w_agdelta *d = orch_alloc_agd(w, e->ag);
	int error;

	if (!d)
		return -ENOMEM;
	orch_rec_bmap_bind(orch_writer_stmt(w, ORCH_REC_BMAP_INS), &b);
	error = orch_rec_exec(&w->w_sq, ORCH_REC_BMAP_INS);
	if (error)
		return error;
	orch_rec_rmap_bind(orch_writer_stmt(w, ORCH_REC_RMAP_INS), &r);
	error = orch_rec_exec(&w->w_sq, ORCH_REC_RMAP_INS);
	if (error)
		return error;
	d->nrmap++;
	o->nextents++;
	o->nblocks += e->len;
	return 0;
}

static int ext_delete_raw(struct store_writer *w, struct w_obj *o, const struct w_ext *e)
{
	struct w_agdelta *d = orch_alloc_agd(w, e->ag);
	int error;

	if (!d)
		return -ENOMEM;
	error = orch_writer_exec(w, ORCH_REC_BMAP_DEL, W_ARGS(o->nid, (int64_t)e->off));
	if (!error)
		error = orch_writer_exec(w, ORCH_REC_RMAP_DEL,
					 W_ARGS(e->ag, e->agbno, o->nid, (int64_t)e->off));
	if (error)
		return error;
	d->nrmap--;
	o->nextents--;
	o->nblocks -= e->len;
	return 0;
}

/* An extent from a bmap row (trusted: see obj_from_row). */
static void ext_from_row(sqlite3_stmt *s, struct w_ext *e)
{
	struct orch_bmap_irec r;

	(void)orch_rec_bmap_from_disk(NULL, s, 0, &r);
	e->off = r.off;
	e->ag = r.ag;
	e->agbno = r.agbno;
	e->len = r.len;
	e->flags = r.flags;
}

/* The extent of @o holding object block @b: 1 and *@e, or 0. */
static int ext_at(struct store_writer *w, struct w_obj *o, uint64_t b, struct w_ext *e)
{
	int rc = orch_writer_row(w, ORCH_REC_BMAP_LE, W_ARGS(o->nid, (int64_t)b));

	if (rc <= 0)
		return rc;
	ext_from_row(w->w_sq.q_stmt[ORCH_REC_BMAP_LE], e);
	orch_rec_reset(&w->w_sq, ORCH_REC_BMAP_LE);
	return e->off + e->len > b ? 1 : 0;
}

/* Maps a new extent, merging it into its left neighbour when contiguous. */
static int ext_map(struct store_writer *w, struct w_obj *o, struct w_ext e)
{
	struct w_ext l;
	int rc;

	if (e.off > 0) {
		rc = ext_at(w, o, e.off - 1, &l);
		if (rc < 0)
			return rc;
		if (rc && l.off + l.len == e.off && l.ag == e.ag && l.agbno + l.len == e.agbno &&
		    l.flags == e.flags && l.len + e.len <= w->w_st->st_maxext) {
			rc = ext_delete_raw(w, o, &l);
			if (rc)
				return rc;
			l.len += e.len;
			return ext_insert_raw(w, o, &l);
		}
	}
	return ext_insert_raw(w, o, &e);
}

/* Removes extent @e's blocks [lo, hi) (object blocks) from @o, releasing them. */
static int ext_cut(struct store_writer *w, struct w_obj *o, const struct w_ext *e,
		   uint64_t lo, uint64_t hi)
{
	int error = ext_delete_raw(w, o, e);

	if (!error && e->off < lo) {
		struct w_ext left = *e;

		left.len = (uint32_t)(lo - e->off);
		error = ext_insert_raw(w, o, &left);
	}
	if (!error && e->off + e->len > hi) {
		struct w_ext right = *e;

		right.off = hi;
		right.agbno = e->agbno + (uint32_t)(hi - e->off);
		right.len = (uint32_t)(e->off + e->len - hi);
		error = ext_insert_raw(w, o, &right);
	}
	if (!error)
		error = orch_refc_release(w, e->ag, e->agbno + (uint32_t)(lo - e->off),
				   (uint32_t)(hi - lo));
	return error;
}

/*
 * Extents of @o overlapping object blocks [b0, b1), in order, at most @max;
 * *@more says whether more follow.
 */
static int ext_collect_max(struct store_writer *w, struct w_obj *o, uint64_t b0, uint64_t b1,
			   size_t max, struct w_ext **out, size_t *n, bool *more)
{
	struct w_ext *v = NULL, e;
	size_t cnt = 0, cap = 0;
	sqlite3_stmt *s;
	int rc, error = 0;
	bool have;

	*out = NULL;
	*n = 0;
	*more = false;
	rc = ext_at(w, o, b0, &e);
	if (rc < 0)
		return rc;
	have = rc == 1;
	s = orch_writer_bind(w, ORCH_REC_BMAP_RANGE, W_ARGS(o->nid, (int64_t)b0, (int64_t)b1));
	for (;;) {
		if (have) {
			if (cnt == cap) {
				size_t nc = cap ? cap * 2 : 16;
				struct w_ext *nv = realloc(v, nc * sizeof(*nv));

				if (!nv) {
					error = -ENOMEM;
					break;
				}
				v = nv;
				cap = nc;
			}
			v[cnt++] = e;
		}
		rc = orch_rec_step(&w->w_sq, ORCH_REC_BMAP_RANGE);
		if (rc != 1) {
			error = rc;
			break;
		}
		if (cnt == max) {
			*more = true;
			break;
		}
		ext_from_row(s, &e);
		have = true;
	}
	sqlite3_reset(s);
	if (error) {
		free(v);
		return error;
	}
	*out = v;
	*n = cnt;
	return 0;
}

static int ext_collect(struct store_writer *w, struct w_obj *o, uint64_t b0, uint64_t b1,
		       struct w_ext **out, size_t *n)
{
	bool more;

	return ext_collect_max(w, o, b0, b1, SIZE_MAX, out, n, &more);
}

/* Unmaps object blocks [b0, b1) of @o. */
static int ext_unmap(struct store_writer *w, struct w_obj *o, uint64_t b0, uint64_t b1)
{
	struct w_ext *v;
	size_t n;
	int error = ext_collect(w, o, b0, b1, &v, &n);

	for (size_t i = 0; !error && i < n; i++)
		error = ext_cut(w, o, &v[i], ORCH_MAX(v[i].off, b0),
				ORCH_MIN(v[i].off + v[i].len, b1));
	free(v);
	return error;
}

/* Extents of @o starting in [b0, b1), counted up to @max + 1. */
static int ext_count(struct store_writer *w, struct w_obj *o, uint64_t b0, uint64_t b1,
		     int64_t max, int64_t *n)
{
	int rc = orch_writer_row(w, ORCH_REC_BMAP_COUNT,
				 W_ARGS(o->nid, (int64_t)b0, (int64_t)b1, max + 1));

	if (rc < 0)
		return rc;
	*n = rc ? sqlite3_column_int64(w->w_sq.q_stmt[ORCH_REC_BMAP_COUNT], 0) : 0;
	orch_rec_reset(&w->w_sq, ORCH_REC_BMAP_COUNT);
	/* Only extents starting in the range count; one straddling b0 adds one. */
	return 0;
}

/* --- Data ---------------------------------------------------------------------------- */

static int buf_reserve(struct store_writer *w, size_t len)
{
	if (len <= w->w_bufcap)
		return 0;
	free(w->w_buf);
	w->w_buf = aligned_alloc(ORCH_STORE_BLOCK, len);
	w->w_bufcap = w->w_buf ? len : 0;
	return w->w_buf ? 0 : -ENOMEM;
}

/* Object block @b of @o into @dst (zeros for a hole), verified. */
static int read_block(struct store_writer *w, struct w_obj *o, uint64_t b, uint8_t *dst)
{
	struct orch_store *st = w->w_st;
	struct w_ext e;
	uint32_t sum = 0;
	uint64_t g;
	bool valid;
	int rc = ext_at(w, o, b, &e);

	if (rc <= 0) {
		memset(dst, 0, ORCH_STORE_BLOCK);
		return rc;
	}
	g = store_gblock(st, e.ag, e.agbno) + (b - e.off);
	rc = orch_alloc_csum_get(w, e.ag, e.agbno + (uint32_t)(b - e.off), &sum, &valid);
	if (!rc)
		rc = orch_bdev_read(st, g, 1, dst);
	if (rc)
		return rc;
	if (!valid || orch_crc32c(0, dst, ORCH_STORE_BLOCK) != sum) {
		orch_snap_report_bad(st, o->handle, b, g);
		return -EIO;
	}
	return 0;
}

/*
 * Writes @len bytes of @src (NULL: zeros) at byte @off of @o: the edge
 * blocks are merged with their old contents, the range gets new blocks,
 * the old ones are freed.  @op is the write that @src comes from (NULL for
 * zeros): its submitter may be computing the checksums of @src meanwhile.
 */
static int write_range(struct store_writer *w, struct w_obj *o, uint64_t off,
		       const void *src, size_t len, struct orch_store_op *op)
{
	struct orch_store *st = w->w_st;
	uint64_t b0 = off / ORCH_STORE_BLOCK;
	uint64_t b1 = (off + len + ORCH_STORE_BLOCK - 1) / ORCH_STORE_BLOCK;
	size_t nb = (size_t)(b1 - b0), head = off % ORCH_STORE_BLOCK;
	size_t tail = (off + len) % ORCH_STORE_BLOCK;
	const uint8_t *data;
	const uint32_t *given = NULL;   /* of @src's blocks, from the submitter */
	uint32_t sums[256];
	uint64_t pos;
	int error = 0;

	if (src && !head && !tail) {
		/* Whole blocks: written from the caller's buffer as they are. */
		data = src;
		given = op ? op->o_sums : NULL;
	} else {
		error = buf_reserve(w, nb * ORCH_STORE_BLOCK);
		if (error)
			return error;
		if (head)
			error = read_block(w, o, b0, w->w_buf);
		if (!error && tail && (nb > 1 || !head))
			error = read_block(w, o, b1 - 1, w->w_buf + (nb - 1) * ORCH_STORE_BLOCK);
		if (error)
			return error;
		if (src)
			memcpy(w->w_buf + head, src, len);
		else
			memset(w->w_buf + head, 0, len);
		data = w->w_buf;
	}
	error = ext_unmap(w, o, b0, b1);
	for (pos = b0; !error && pos < b1;) {
		struct w_ext e = { .off = pos };
		const uint8_t *p = data + (pos - b0) * ORCH_STORE_BLOCK;

		error = orch_alloc_extent(w, (uint32_t)ORCH_MIN(b1 - pos, (uint64_t)st->st_maxext),
				&e.ag, &e.agbno, &e.len);
		if (error)
			break;
		error = orch_bdev_write(st, store_gblock(st, e.ag, e.agbno), e.len, p);
		if (!error && given) {
			/* Ready by now, as a rule: the data took longer to write. */
			given = orch_store_op_sums(op);
			error = orch_alloc_csum_set(w, e.ag, e.agbno, e.len, given + (pos - b0));
		}
		for (uint32_t i = 0; !error && !given && i < e.len; i += 256) {
			uint32_t k, m = ORCH_MIN(256u, e.len - i);

			for (k = 0; k < m; k++)
				sums[k] = orch_crc32c(0, p + (size_t)(i + k) * ORCH_STORE_BLOCK,
						      ORCH_STORE_BLOCK);
			error = orch_alloc_csum_set(w, e.ag, e.agbno + i, m, sums);
		}
		if (!error)
			error = ext_map(w, o, e);
		pos += e.len;
	}
	if (error)
		return error;
	if (off + len > o->size)
		o->size = off + len;
	return 0;
}

/* Zeros bytes [from, to) of @o, all inside one block, unless it is a hole. */
static int zero_in_block(struct store_writer *w, struct w_obj *o, uint64_t from, uint64_t to)
{
	struct w_ext e;
	int rc;

	if (from >= to)
		return 0;
	rc = ext_at(w, o, from / ORCH_STORE_BLOCK, &e);
	if (rc <= 0)
		return rc;
	return write_range(w, o, from, NULL, (size_t)(to - from), NULL);
}

/* --- Operations ------------------------------------------------------------------------ */

static int apply_write(struct store_writer *w, struct orch_store_op *op)
{
	struct w_obj o;
	int error;

	if (op->len == 0)
		return 0;
	if (op->len > ORCH_STORE_MAX_IO)
		return -EINVAL;
	if (op->off > ORCH_STORE_MAX_SIZE || op->len > ORCH_STORE_MAX_SIZE - op->off)
		return -EFBIG;
	error = obj_load(w, op->handle, &o);
	if (error)
		return error;
	if (!o.nid)
		obj_new(w, &o);
	error = write_range(w, &o, op->off, op->buf, op->len, op);
	if (!error)
		error = obj_save(w, &o);
	if (!error)
		w->w_txn_bytes += op->len;
	return error;
}

/* Blocks of @size bytes. */
static uint64_t size_blocks(uint64_t size)
{
	return (size + ORCH_STORE_BLOCK - 1) / ORCH_STORE_BLOCK;
}

static int apply_truncate(struct store_writer *w, struct orch_store_op *op, bool prefix)
{
	uint64_t size = op->off, nb = size_blocks(size);
	struct w_obj o;
	int64_t n;
	int error;

	if (size > ORCH_STORE_MAX_SIZE)
		return -EFBIG;
	error = obj_load(w, op->handle, &o);
	if (error)
		return error;
	/* orch_store_cut: only an object that holds bytes past @size. */
	if (op->len == ORCH_STORE_TRUNC_SHRINK && (!o.nid || size >= o.size))
		return 0;
	if (!o.nid) {
		if (!size)
			return 0;
		obj_new(w, &o);
	} else if (size < o.size) {
		if (!prefix) {
			error = ext_count(w, &o, nb, INT64_MAX, STORE_WORK_CHUNK, &n);
			if (error)
				return error;
			if (n > STORE_WORK_CHUNK)
				return W_LONG;
			error = ext_unmap(w, &o, nb, INT64_MAX);
		}
		/* Bytes past the size stay zero, so growing later shows zeros. */
		if (!error && size % ORCH_STORE_BLOCK)
			error = zero_in_block(w, &o, size,
					      ORCH_MIN(o.size, nb * ORCH_STORE_BLOCK));
		if (error)
			return error;
	}
	o.size = size;
	return obj_save(w, &o);
}

static int apply_punch(struct store_writer *w, struct orch_store_op *op, bool prefix)
{
	uint64_t off = op->off, end, pb0, pb1;
	struct w_obj o;
	int64_t n;
	int error;

	error = obj_load(w, op->handle, &o);
	if (error || !o.nid || off >= o.size)
		return error;
	end = op->len > o.size - off ? o.size : off + op->len;
	pb0 = size_blocks(off);
	pb1 = end / ORCH_STORE_BLOCK;
	if (pb0 < pb1 && !prefix) {
		error = ext_count(w, &o, pb0, pb1, STORE_WORK_CHUNK, &n);
		if (error)
			return error;
		if (n > STORE_WORK_CHUNK)
			return W_LONG;
	}
	if (pb0 > pb1) {
		/* Start and end inside one block. */
		error = zero_in_block(w, &o, off, end);
	} else {
		error = zero_in_block(w, &o, off, pb0 * ORCH_STORE_BLOCK);
		if (!error)
			error = zero_in_block(w, &o, pb1 * ORCH_STORE_BLOCK, end);
		if (!error && pb0 < pb1 && !prefix)
			error = ext_unmap(w, &o, pb0, pb1);
	}
	return error ? error : obj_save(w, &o);
}

static int apply_delete(struct store_writer *w, struct orch_store_op *op)
{
	struct w_obj o;
	int error;

	error = obj_load(w, op->handle, &o);
	if (error || !o.nid)
		return error;
	if (o.nextents > STORE_WORK_CHUNK)
		return W_LONG;
	error = ext_unmap(w, &o, 0, INT64_MAX);
	if (!error)
		error = orch_writer_exec(w, ORCH_REC_OBJ_DEL, W_ARGS(o.nid));
	if (!error) {
		w->w_dobjects--;
		w->w_txn_deleted++;
	}
	return error;
}

/* --- Clones and dedupe -------------------------------------------------------------------- */

/* Clone and dedupe: @off2/@handle2 is the source, @off/@handle the destination. */
static int clone_check(const struct orch_store_op *op, const struct w_obj *src,
		       const struct w_obj *dst)
{
	uint64_t len = op->len, sb0, db0, nb;

	if (op->off % ORCH_STORE_BLOCK || op->off2 % ORCH_STORE_BLOCK)
		return -EINVAL;
	if (op->off > ORCH_STORE_MAX_SIZE || len > ORCH_STORE_MAX_SIZE - op->off ||
	    op->off2 > ORCH_STORE_MAX_SIZE || len > ORCH_STORE_MAX_SIZE - op->off2)
		return -EFBIG;
	/* A partial last block is shared whole: only at both ends of file. */
	if (len % ORCH_STORE_BLOCK &&
	    (op->off2 + len != src->size || (dst->nid && op->off + len < dst->size)))
		return -EINVAL;
	sb0 = op->off2 / ORCH_STORE_BLOCK;
	db0 = op->off / ORCH_STORE_BLOCK;
	nb = size_blocks(len);
	if (op->handle == op->handle2 && sb0 < db0 + nb && db0 < sb0 + nb)
		return -EINVAL;
	return 0;
}

/*
 * Maps object blocks [db0, db0 + nb) of @dst to what blocks [sb0, sb0 + nb)
 * of @src map, sharing them, after releasing what @dst had there; @src may
 * be @dst (the ranges do not overlap).  Handles at most @max source and
 * destination extents: *@nb_done is how far it got (nb if all).
 */
static int clone_blocks(struct store_writer *w, struct w_obj *src, uint64_t sb0,
			struct w_obj *dst, uint64_t db0, uint64_t nb, size_t max,
			uint64_t *nb_done)
{
	struct w_ext *sv = NULL, *dv = NULL;
	size_t sn = 0, dn = 0;
	bool more = false;
	int error = 0;

	if (src->nid)
		error = ext_collect_max(w, src, sb0, sb0 + nb, max, &sv, &sn, &more);
	if (!error && more)
		nb = sv[sn - 1].off + sv[sn - 1].len - sb0;
	if (!error && dst->nid) {
		error = ext_collect_max(w, dst, db0, db0 + nb, max, &dv, &dn, &more);
		if (!error && more)
			nb = dv[dn - 1].off + dv[dn - 1].len - db0;
	}
	free(dv);
	if (!error)
		error = ext_unmap(w, dst, db0, db0 + nb);
	for (size_t i = 0; !error && i < sn; i++) {
		uint64_t lo = ORCH_MAX(sv[i].off, sb0), hi = ORCH_MIN(sv[i].off + sv[i].len, sb0 + nb);
		struct w_ext e = sv[i];

		if (lo >= hi)
			break;
		e.off = db0 + (lo - sb0);
		e.agbno = sv[i].agbno + (uint32_t)(lo - sv[i].off);
		e.len = (uint32_t)(hi - lo);
		error = orch_refc_share(w, e.ag, e.agbno, e.len);
		if (!error)
			error = ext_map(w, dst, e);
	}
	free(sv);
	*nb_done = nb;
	return error;
}

/* Saves the objects of a clone: both may share blocks now. */
static int clone_save(struct store_writer *w, struct w_obj *src, struct w_obj *dst)
{
	int error;

	dst->flags |= ORCH_REC_OBJ_REFLINK;
	if (src == dst || !src->nid)
		return obj_save(w, dst);
	src->flags |= ORCH_REC_OBJ_REFLINK;
	error = obj_save(w, src);
	return error ? error : obj_save(w, dst);
}

/*
 * One piece of a clone: at most STORE_WORK_CHUNK extents of either side,
 * so that a long clone does not become one huge transaction.  Returns
 * W_AGAIN with op->o_piece set when more is left (clones need not be
 * atomic: FICLONERANGE is not either).
 */
static int apply_clone(struct store_writer *w, struct orch_store_op *op)
{
	uint64_t left = op->len - op->o_done, sb0, db0, nb, done;
	struct w_obj so, d, *src = &so, *dst = &d;
	int error;

	error = obj_load(w, op->handle2, &so);
	if (!error)
		error = obj_load(w, op->handle, &d);
	if (!error && !op->o_done)
		error = clone_check(op, &so, &d);
	if (error || left == 0)
		return error;
	if (op->handle == op->handle2)
		src = dst;
	if (!src->nid && !dst->nid)
		return 0;   /* a hole onto nothing */
	if (!dst->nid)
		obj_new(w, dst);
	sb0 = (op->off2 + op->o_done) / ORCH_STORE_BLOCK;
	db0 = (op->off + op->o_done) / ORCH_STORE_BLOCK;
	nb = size_blocks(left);
	error = clone_blocks(w, src, sb0, dst, db0, nb, STORE_WORK_CHUNK, &done);
	if (error)
		return error;
	op->o_piece = done < nb ? done * ORCH_STORE_BLOCK : left;
	if (op->off + op->o_done + op->o_piece > dst->size)
		dst->size = op->off + op->o_done + op->o_piece;
	error = clone_save(w, src, dst);
	if (error)
		return error;
	op->result = op->o_done + op->o_piece;
	return done < nb ? W_AGAIN : 0;
}

/*
 * Whether object block @b of @x and @y might hold the same bytes, from the
 * stored checksums alone: false only when both are mapped, both sums are
 * valid and they differ.
 */
static int dedupe_sums_may_match(struct store_writer *w, struct w_obj *x, uint64_t bx,
				 struct w_obj *y, uint64_t by, bool *may)
{
	uint32_t sum[2] = { 0 };
	bool valid[2] = { false };
	struct w_obj *o[2] = { x, y };
	uint64_t b[2] = { bx, by };

	*may = true;
	for (int i = 0; i < 2; i++) {
		struct w_ext e;
		int rc = o[i]->nid ? ext_at(w, o[i], b[i], &e) : 0;

		if (rc <= 0)
			return rc;
		rc = orch_alloc_csum_get(w, e.ag, e.agbno + (uint32_t)(b[i] - e.off), &sum[i],
					 &valid[i]);
		if (rc)
			return rc;
	}
	*may = !(valid[0] && valid[1]) || sum[0] == sum[1];
	return 0;
}

/* Compares blocks [sb0, +nb) of @src with [db0, +nb) of @dst: 0 equal, -EBADE, -errno. */
static int dedupe_compare(struct store_writer *w, struct w_obj *src, uint64_t sb0,
			  struct w_obj *dst, uint64_t db0, uint64_t nb)
{
	uint8_t *a, *b;
	bool may;
	int error = buf_reserve(w, 2 * ORCH_STORE_BLOCK);

	/* The stored checksums first: a difference there costs no data read. */
	for (uint64_t i = 0; !error && i < nb; i++) {
		error = dedupe_sums_may_match(w, src, sb0 + i, dst, db0 + i, &may);
		if (!error && !may)
			return -EBADE;
	}
	a = w->w_buf;
	b = w->w_buf + ORCH_STORE_BLOCK;
	for (uint64_t i = 0; !error && i < nb; i++) {
		error = read_block(w, src, sb0 + i, a);
		if (!error)
			error = read_block(w, dst, db0 + i, b);
		if (!error && memcmp(a, b, ORCH_STORE_BLOCK))
			return -EBADE;
	}
	return error;
}

/*
 * Blocks from the start of a dedupe range that may be shared: those inside
 * both objects (no mapping may reach past a size, I7), plus a last partial
 * block where the two objects end at the same byte.
 */
static uint64_t dedupe_shareable(const struct orch_store_op *op, const struct w_obj *src,
				 const struct w_obj *dst, uint64_t nb)
{
	uint64_t ns = src->size > op->off2 ? (src->size - op->off2) / ORCH_STORE_BLOCK : 0;
	uint64_t nd = dst->size > op->off ? (dst->size - op->off) / ORCH_STORE_BLOCK : 0;

	if (op->off2 + op->len == src->size && op->off + op->len == dst->size)
		return nb;
	return ORCH_MIN(nb, ORCH_MIN(ns, nd));
}

/*
 * Dedupe: a clone of the range, only if its bytes are equal, in one
 * transaction.  The whole range is compared (holes and bytes past an
 * object's end read as zeros); the blocks inside both objects are shared.
 */
static int apply_dedupe(struct store_writer *w, struct orch_store_op *op)
{
	uint64_t sb0 = op->off2 / ORCH_STORE_BLOCK, db0 = op->off / ORCH_STORE_BLOCK;
	uint64_t nb = size_blocks(op->len), share, done;
	struct w_obj so, d, *src = &so, *dst = &d;
	int error;

	op->result = 0;
	if (op->len > ORCH_STORE_MAX_IO)
		return -EINVAL;
	error = obj_load(w, op->handle2, &so);
	if (!error)
		error = obj_load(w, op->handle, &d);
	if (!error)
		error = clone_check(op, &so, &d);
	if (error || op->len == 0)
		return error;
	if (op->handle == op->handle2)
		src = dst;
	error = dedupe_compare(w, src, sb0, dst, db0, nb);
	if (error)
		return error;
	share = src->nid && dst->nid ? dedupe_shareable(op, src, dst, nb) : 0;
	if (share) {
		error = clone_blocks(w, src, sb0, dst, db0, share, SIZE_MAX, &done);
		if (!error)
			error = clone_save(w, src, dst);
	}
	if (!error)
		op->result = share == nb ? op->len : share * ORCH_STORE_BLOCK;
	return error;
}

static int apply_quarantine(struct store_writer *w, struct orch_store_op *op)
{
	struct orch_store *st = w->w_st;
	uint64_t g = op->off, end = op->off + op->len;
	int error = 0;

	if (op->len == 0 || op->len > (1u << 20) || g >= st->st_blocks || op->len > st->st_blocks - g)
		return -EINVAL;
	while (!error && g < end) {
		uint32_t ag = (uint32_t)(g >> st->st_ag_shift);
		uint32_t agbno = (uint32_t)(g & (st->st_ag_blocks - 1));
		uint32_t n = (uint32_t)ORCH_MIN(end - g, (uint64_t)store_ag_len(st, ag) - agbno);

		error = orch_alloc_quarantine(w, ag, agbno, n);
		g += n;
	}
	return error;
}

/* The operation succeeded: adds its counter changes to the transaction's. */
static int agd_merge(struct store_writer *w)
{
	for (size_t i = 0; i < w->w_nagd; i++) {
		struct w_agdelta *d = &w->w_agd[i], *t = NULL;

		for (size_t k = 0; k < w->w_ntagd && !t; k++)
			if (w->w_tagd[k].ag == d->ag)
				t = &w->w_tagd[k];
		if (!t) {
			if (w->w_ntagd == w->w_captagd) {
				size_t cap = w->w_captagd ? w->w_captagd * 2 : 8;
				struct w_agdelta *p = realloc(w->w_tagd, cap * sizeof(*p));

				if (!p)
					return -ENOMEM;
				w->w_tagd = p;
				w->w_captagd = cap;
			}
			t = &w->w_tagd[w->w_ntagd++];
			*t = (struct w_agdelta){ .ag = d->ag };
		}
		t->freeblks += d->freeblks;
		t->nfree += d->nfree;
		t->nrmap += d->nrmap;
		t->nrefc += d->nrefc;
	}
	w->w_nagd = 0;
	return 0;
}

/*
 * Writes the transaction's counter changes into agstat, once per AG per
 * transaction rather than per operation.
 */
static int agstat_flush(struct store_writer *w)
{
	for (size_t i = 0; i < w->w_ntagd; i++) {
		struct w_agdelta *d = &w->w_tagd[i];
		struct orch_agstat_irec a;
		struct orch_fsb_irec l = { 0 };
		int rc;

		/* No skipping when the deltas cancel: the longest extent may have moved. */
		rc = orch_writer_row(w, ORCH_REC_AG_GET, W_ARGS(d->ag));
		if (rc <= 0)
			return rc ? rc : -ORCH_ECORRUPT;
		(void)orch_rec_agstat_from_disk(NULL, w->w_sq.q_stmt[ORCH_REC_AG_GET], 0, &a);
		orch_rec_reset(&w->w_sq, ORCH_REC_AG_GET);
		a.ag = d->ag;
		a.freeblks += (uint64_t)d->freeblks;
		a.nfree += (uint64_t)d->nfree;
		a.nrmap += (uint64_t)d->nrmap;
		a.nrefc += (uint64_t)d->nrefc;
		rc = orch_writer_row(w, ORCH_REC_FSC_MAX, W_ARGS(d->ag));
		if (rc < 0)
			return rc;
		if (rc) {
			(void)orch_rec_fsc_from_disk(NULL, w->w_sq.q_stmt[ORCH_REC_FSC_MAX], 0, &l);
			orch_rec_reset(&w->w_sq, ORCH_REC_FSC_MAX);
		}
		a.longest = l.len;
		orch_rec_agstat_bind(orch_writer_stmt(w, ORCH_REC_AG_PUT), &a);
		rc = orch_rec_exec(&w->w_sq, ORCH_REC_AG_PUT);
		if (rc)
			return rc;
		w->w_dfree += d->freeblks;
	}
	w->w_ntagd = 0;
	return 0;
}

/*
 * Applies @op.  With @safe, inside a savepoint: 0 or -errno (undone alone).
 * Without, an error leaves the transaction half changed and returns
 * W_REDO: the caller rolls it back and applies its operations again, each
 * in a savepoint.  Failures are rare and savepoints cost two statements per
 * operation, so batches go without until one fails.  W_LONG (the operation
 * needs a work item) is returned before anything changed.
 */
#define W_REDO 2

static int apply_one(struct store_writer *w, struct orch_store_op *op, bool safe)
{
	size_t pend = w->w_npend;
	int64_t dobj = w->w_dobjects, dfree = w->w_dfree;
	uint64_t created = w->w_txn_created, deleted = w->w_txn_deleted;
	uint64_t bytes = w->w_txn_bytes;
	int rc;

	if (safe) {
		/* The savepoint must cover the csum rows the batch changed so far. */
		rc = orch_alloc_csum_flush(w);
		if (!rc)
			rc = orch_writer_exec(w, ORCH_REC_SAVEPOINT, NULL, 0);
		if (rc)
			return rc;
	}
	w->w_nagd = 0;
	switch (op->type) {
	case ORCH_STORE_OP_WRITE:
		rc = apply_write(w, op);
		break;
	case ORCH_STORE_OP_TRUNCATE:
		rc = apply_truncate(w, op, false);
		break;
	case ORCH_STORE_OP_PUNCH:
		rc = apply_punch(w, op, false);
		break;
	case ORCH_STORE_OP_DELETE:
		rc = apply_delete(w, op);
		break;
	case ORCH_STORE_OP_CLONE:
		rc = apply_clone(w, op);
		break;
	case ORCH_STORE_OP_DEDUPE:
		rc = apply_dedupe(w, op);
		break;
	case ORCH_STORE_OP_QUARANTINE:
		rc = apply_quarantine(w, op);
		break;
	default:
		rc = -EINVAL;
	}
	if (rc == 0 || rc == W_AGAIN) {
		int error = agd_merge(w);

		if (!error && safe)
			error = orch_writer_exec(w, ORCH_REC_RELEASE, NULL, 0);
		if (!error)
			return rc;
		rc = error;
	}
	if (rc < 0 && !safe)
		return W_REDO;
	if (safe) {
		orch_writer_exec(w, ORCH_REC_ROLLBACK_TO, NULL, 0);
		orch_writer_exec(w, ORCH_REC_RELEASE, NULL, 0);
		orch_alloc_csum_clear(w);
	}
	w->w_nagd = 0;
	orch_alloc_busy_undo(w, pend);
	w->w_dobjects = dobj;
	w->w_dfree = dfree;
	w->w_txn_created = created;
	w->w_txn_deleted = deleted;
	w->w_txn_bytes = bytes;
	return rc;
}

/* --- Transactions -------------------------------------------------------------------------- */

/* WAL bytes wal_prefetch reads ahead at most. */
#define W_WAL_PREFETCH (64u << 20)

/*
 * Once a checkpoint has emptied the WAL, the next commits write it again
 * from its start, frames of 24 + 4096 bytes across page boundaries: every
 * page whose cached copy the kernel dropped meanwhile (memory pressure, or
 * a benchmark dropping caches) is read from disk, synchronously, before
 * its first partial write.  About ten such reads per commit made a 1 MiB
 * write's commit take 1.5 to 2 ms instead of 0.1.  So the writer asks for
 * the old WAL's pages ahead (up to 64 MiB) when it starts again; pages still
 * cached cost a lookup.  (journal_size_limit, truncating the WAL, avoids
 * the reads too but made every fdatasync of the growing WAL write its
 * size: 4 KiB write+fsync ran at half the rate.)
 */
static void wal_prefetch(struct store_writer *w)
{
	struct orch_store *st = w->w_st;
	char path[PATH_MAX];
	struct stat sb;
	int fd;

	if (atomic_load(&st->st_wal_pages) != 0) {
		w->w_wal_prefetched = false;
		return;
	}
	if (w->w_wal_prefetched)
		return;
	w->w_wal_prefetched = true;
	if (snprintf(path, sizeof(path), "%s/" STORE_DB_NAME "-wal", st->st_dir) >=
	    (int)sizeof(path))
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	/* In pieces: the kernel reads no more than its readahead window per call. */
	if (fstat(fd, &sb) == 0)
		for (off_t o = 0; o < ORCH_MIN((off_t)W_WAL_PREFETCH, sb.st_size); o += 1 << 20)
			(void)posix_fadvise(fd, o, 1 << 20, POSIX_FADV_WILLNEED);
	close(fd);
}

static int txn_begin(struct store_writer *w)
{
	/* A failed store changes nothing more (orch_store_failed). */
	if (atomic_load_explicit(&w->w_st->st_failed, memory_order_relaxed))
		return -EIO;
	wal_prefetch(w);
	orch_alloc_busy_release(w);
	w->w_dobjects = w->w_dfree = 0;
	w->w_txn_ops = w->w_txn_bytes = w->w_txn_created = w->w_txn_deleted = 0;
	w->w_nagd = w->w_ntagd = 0;
	return orch_writer_exec(w, ORCH_REC_BEGIN_IMMEDIATE, NULL, 0);
}

/* Undoes the open transaction, in store.db and in memory. */
static void txn_rollback(struct store_writer *w)
{
	orch_writer_exec(w, ORCH_REC_ROLLBACK, NULL, 0);
	orch_alloc_csum_clear(w);
	orch_alloc_busy_undo(w, 0);
	w->w_nagd = w->w_ntagd = 0;
}

/* Commits: 0, or -errno with everything of the transaction undone. */
static int txn_commit(struct store_writer *w)
{
	struct orch_store *st = w->w_st;
	int error = 0;

	error = agstat_flush(w);
	if (!error && w->w_meta_dirty) {
		struct orch_smeta_irec m[2] = {
			{ .k = "next_nid", .v = w->w_next_nid },
			{ .k = "next_work", .v = w->w_next_work },
		};

		for (int i = 0; i < 2 && !error; i++) {
			orch_rec_smeta_bind(orch_writer_stmt(w, ORCH_REC_SMETA_PUT), &m[i]);
			error = orch_rec_exec(&w->w_sq, ORCH_REC_SMETA_PUT);
		}
	}
	if (!error)
		error = orch_alloc_csum_flush(w);
	/* Room to track this transaction's frees, before it can no longer fail. */
	if (!error)
		error = orch_alloc_busy_reserve(w);
	orch_bdev_killpoint(ORCH_KILLPOINT_DATA);
	if (error) {
		txn_rollback(w);
		return error;
	}
	/* Not while a flush is between its blocks and its WAL (store_flush). */
	pthread_mutex_lock(&st->st_commit_lock);
	error = orch_writer_exec(w, ORCH_REC_COMMIT, NULL, 0);
	if (error) {
		pthread_mutex_unlock(&st->st_commit_lock);
		txn_rollback(w);
		return error;
	}
	w->w_meta_dirty = false;
	/* Only this thread writes data, and all of this transaction's is written. */
	st->st_commit_writes = atomic_load(&st->st_data_writes);
	pthread_mutex_lock(&st->st_seq_lock);
	st->st_committed++;
	orch_alloc_busy_commit(w, st->st_committed);
	st->st_stats.commits++;
	st->st_stats.ops += w->w_txn_ops;
	st->st_stats.bytes_written += w->w_txn_bytes;
	st->st_stats.objects_created += w->w_txn_created;
	st->st_stats.objects_deleted += w->w_txn_deleted;
	st->st_objects += (uint64_t)w->w_dobjects;
	st->st_freeblks += (uint64_t)w->w_dfree;
	pthread_mutex_unlock(&st->st_seq_lock);
	pthread_mutex_unlock(&st->st_commit_lock);
	/*
	 * No checkpoint here: it would sync the WAL, this commit with it,
	 * before its blocks are flushed (store_flush says why only a flush
	 * checkpoints).  With nobody flushing, the WAL grows until
	 * orch_store_close; the server flushes every commit_interval_ms.
	 */
	orch_bdev_killpoint(ORCH_KILLPOINT_COMMIT);
	return 0;
}

static void complete(struct store_writer *w, struct orch_store_op *op, int status)
{
	atomic_fetch_sub_explicit(&w->w_st->st_queued, 1, memory_order_release);
	op->status = status;
	op->done(op);
}

/* --- Work items ----------------------------------------------------------------------------- */

struct w_work {
	int64_t seq, type, nid, a, b, progress;
	bool crc_ok;          /* as read at open (work_resume) */
};

static int work_save(struct store_writer *w, const struct w_work *k)
{
	struct orch_work_irec r = {
		.seq = k->seq, .type = (uint32_t)k->type, .nid = k->nid, .a = k->a, .b = k->b,
		.progress = k->progress,
	};

	orch_rec_work_bind(orch_writer_stmt(w, ORCH_REC_WORK_PUT), &r);
	return orch_rec_exec(&w->w_sq, ORCH_REC_WORK_PUT);
}

/* One chunk: frees up to STORE_WORK_CHUNK extents of [a, progress), from the end. */
static int work_chunk(struct store_writer *w, struct w_work *k, bool *finished)
{
	struct w_obj o;
	int error = obj_load_nid(w, k->nid, &o);
	unsigned int n = 0;

	*finished = false;
	if (error)
		return error;
	while (o.nid && n < STORE_WORK_CHUNK) {
		struct w_ext e;
		int rc = orch_writer_row(w, ORCH_REC_BMAP_LAST, W_ARGS(o.nid, k->progress));

		if (rc < 0)
			return rc;
		if (rc)
			ext_from_row(w->w_sq.q_stmt[ORCH_REC_BMAP_LAST], &e);
		orch_rec_reset(&w->w_sq, ORCH_REC_BMAP_LAST);
		if (!rc || (int64_t)(e.off + e.len) <= k->a) {
			k->progress = k->a;
			break;
		}
		error = ext_cut(w, &o, &e, ORCH_MAX(e.off, (uint64_t)k->a),
				ORCH_MIN(e.off + e.len, (uint64_t)k->progress));
		if (error)
			return error;
		k->progress = (int64_t)ORCH_MAX(e.off, (uint64_t)k->a);
		n++;
	}
	if (!o.nid || k->progress <= k->a) {
		*finished = true;
		error = orch_writer_exec(w, ORCH_REC_WORK_DEL, W_ARGS(k->seq));
		if (error || !o.nid)
			return error;
		if (k->type != STORE_WORK_DELETE)
			return obj_save(w, &o);
		w->w_txn_deleted++;
		return orch_writer_exec(w, ORCH_REC_OBJ_DEL, W_ARGS(o.nid));
	}
	error = obj_save(w, &o);
	return error ? error : work_save(w, k);
}

/* Runs work item @k to the end, one transaction per chunk. */
static int work_run(struct store_writer *w, struct w_work *k)
{
	struct orch_store *st = w->w_st;
	bool finished = false;
	int error = 0;

	while (!finished && !error) {
		error = txn_begin(w);
		if (error)
			break;
		w->w_nagd = 0;
		error = work_chunk(w, k, &finished);
		if (!error)
			error = agd_merge(w);
		if (error) {
			txn_rollback(w);
			break;
		}
		error = txn_commit(w);
		if (!error) {
			pthread_mutex_lock(&st->st_seq_lock);
			st->st_stats.work_chunks++;
			pthread_mutex_unlock(&st->st_seq_lock);
			orch_bdev_killpoint(ORCH_KILLPOINT_CHUNK);
		}
	}
	if (error)
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "store: work item %" PRId64 " stopped: %s; "
				   "it resumes at the next start", k->seq, strerror(-error));
	return error;
}

/* @op needs a work item: the first transaction, then the chunks. */
static int run_long(struct store_writer *w, struct orch_store_op *op)
{
	struct w_work k = { 0 };
	struct w_obj o;
	int error;

	error = txn_begin(w);
	if (error)
		return error;
	w->w_nagd = 0;
	error = obj_load(w, op->handle, &o);
	if (!error && !o.nid)
		error = -ENOENT;   /* cannot happen: the caller just saw it */
	if (!error) {
		k.seq = w->w_next_work++;
		w->w_meta_dirty = true;
		k.nid = o.nid;
		switch (op->type) {
		case ORCH_STORE_OP_TRUNCATE:
			k.type = STORE_WORK_TRUNCATE;
			k.a = (int64_t)size_blocks(op->off);
			k.b = k.progress = INT64_MAX;
			error = apply_truncate(w, op, true);
			break;
		case ORCH_STORE_OP_PUNCH:
			k.type = STORE_WORK_PUNCH;
			k.a = (int64_t)size_blocks(op->off);
			k.b = k.progress = (int64_t)(ORCH_MIN(op->off + op->len, o.size) /
						     ORCH_STORE_BLOCK);
			error = apply_punch(w, op, true);
			break;
		default:
			k.type = STORE_WORK_DELETE;
			k.a = 0;
			k.b = k.progress = INT64_MAX;
			o.flags |= ORCH_REC_OBJ_DYING;
			error = obj_save(w, &o);
			w->w_dobjects--;
			break;
		}
	}
	if (!error)
		error = work_save(w, &k);
	if (!error)
		error = agd_merge(w);
	if (error) {
		txn_rollback(w);
		return error;
	}
	w->w_txn_ops = 1;
	error = txn_commit(w);
	return error ? error : work_run(w, &k);
}

/* Finishes the work items left by a crash. */
static int work_resume(struct store_writer *w)
{
	struct w_work *v = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *s = orch_writer_bind(w, ORCH_REC_WORK_ALL, NULL, 0);
	struct orch_work_irec r;
	int rc, error = 0;

	while ((rc = orch_rec_step(&w->w_sq, ORCH_REC_WORK_ALL)) == 1) {
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 8;
			struct w_work *nv = realloc(v, nc * sizeof(*nv));

			if (!nv) {
				error = -ENOMEM;
				break;
			}
			v = nv;
			cap = nc;
		}
		/* A bad CRC or an unknown type: damaged (below). */
		v[n].crc_ok = !orch_rec_work_from_disk(s, 0, &r);
		v[n].seq = r.seq;
		v[n].type = r.type;
		v[n].nid = r.nid;
		v[n].a = r.a;
		v[n].b = r.b;
		v[n].progress = r.progress;
		n++;
	}
	if (!error && rc < 0)
		error = rc;
	orch_rec_reset(&w->w_sq, ORCH_REC_WORK_ALL);
	for (size_t i = 0; !error && i < n; i++) {
		/* Acting on a damaged item could free live blocks: the checker reports it. */
		if (!v[i].crc_ok || v[i].type < STORE_WORK_TRUNCATE ||
		    v[i].type > STORE_WORK_DELETE || v[i].a < 0 || v[i].progress < v[i].a) {
			ORCH_ERR("store in '%s': work item %" PRId64 " is damaged; left alone",
				 w->w_st->st_dir, v[i].seq);
			continue;
		}
		ORCH_INFO("store: resuming work item %" PRId64 " (type %" PRId64 ", object %" PRId64 ")",
			  v[i].seq, v[i].type, v[i].nid);
		/* One item that cannot finish (logged) must not keep the store closed. */
		(void)work_run(w, &v[i]);
	}
	free(v);
	return error;
}

/* --- The thread ----------------------------------------------------------------------------- */

/*
 * Completes the operations of a transaction that ended with @rc.  The
 * synchronous callers among them are woken as one chain, after the loop:
 * each op is read before its caller can wake and end it.
 */
static void complete_all(struct store_writer *w, struct orch_store_op *done, int rc)
{
	struct store_waiter *chain = NULL, **tail = &chain;

	for (struct orch_store_op *d = done, *dn; d; d = dn) {
		int status = rc && !d->status ? rc : d->status;

		dn = d->o_next;
		if (!d->o_waiter) {
			complete(w, d, status);
			continue;
		}
		atomic_fetch_sub_explicit(&w->w_st->st_queued, 1, memory_order_release);
		d->status = status;
		*tail = d->o_waiter;
		tail = &d->o_waiter->sw_next;
	}
	if (chain)
		orch_store_waiter_wake(chain);
}

/*
 * An operation failed halfway in a batch without savepoints: undoes the
 * transaction and applies the batch's operations again, each in its own
 * savepoint.  Returns 0 with the transaction open, or -errno (then the
 * operations are failed by the caller).
 */
static int redo_safe(struct store_writer *w, struct orch_store_op *done, uint64_t *bytes)
{
	int rc;

	txn_rollback(w);
	rc = txn_begin(w);
	if (rc)
		return rc;
	*bytes = 0;
	for (struct orch_store_op *d = done; d; d = d->o_next) {
		d->status = apply_one(w, d, true);
		if (!d->status) {
			w->w_txn_ops++;
			if (d->type == ORCH_STORE_OP_WRITE)
				*bytes += d->len;
		}
	}
	return 0;
}

static void run_batch(struct store_writer *w, struct orch_store_op *list)
{
	struct orch_store_op *done = NULL, **dtail = &done, *op, *next;
	bool open = false, safe = false;
	uint64_t bytes = 0;
	int rc;

	for (op = list; op; op = next) {
		next = op->o_next;
		op->o_next = NULL;
		if (!open) {
			rc = txn_begin(w);
			if (rc) {
				complete(w, op, rc);
				continue;
			}
			open = true;
			safe = false;
			bytes = 0;
		}
		rc = apply_one(w, op, safe);
		if (rc == W_REDO) {
			safe = true;
			rc = redo_safe(w, done, &bytes);
			if (rc) {
				open = false;
				complete_all(w, done, rc);
				done = NULL;
				dtail = &done;
				complete(w, op, rc);
				continue;
			}
			rc = apply_one(w, op, true);
		}
		if (rc == W_AGAIN) {
			/* A piece of a long clone: commit it, then apply the rest. */
			rc = txn_commit(w);
			open = false;
			complete_all(w, done, rc);
			done = NULL;
			dtail = &done;
			if (rc) {
				complete(w, op, rc);
				continue;
			}
			op->o_done += op->o_piece;
			op->o_next = next;
			next = op;
			continue;
		}
		if (rc == W_LONG) {
			/* Finish what came before it, then run it alone. */
			rc = txn_commit(w);
			open = false;
			complete_all(w, done, rc);
			done = NULL;
			dtail = &done;
			complete(w, op, run_long(w, op));
			continue;
		}
		op->status = rc;
		if (!rc) {
			w->w_txn_ops++;
			if (op->type == ORCH_STORE_OP_WRITE)
				bytes += op->len;
		}
		*dtail = op;
		dtail = &op->o_next;
		if (w->w_txn_ops >= W_BATCH_MAX || bytes >= W_BATCH_BYTES || !next) {
			rc = txn_commit(w);
			open = false;
			complete_all(w, done, rc);
			done = NULL;
			dtail = &done;
		}
	}
}

static void *writer_main(void *arg)
{
	struct store_writer *w = arg;

	pthread_mutex_lock(&w->w_lock);
	for (;;) {
		struct orch_store_op *list;
		bool more = false;

		while (!w->w_head && !w->w_stop) {
			struct timespec ts;

			w->w_idle = true;
			if (!more && !w->w_nbusy && !w->w_nheld) {
				pthread_cond_wait(&w->w_cv, &w->w_lock);
				continue;
			}
			/*
			 * Blocks freed last (a delete) are released only here or
			 * at the next transaction: look again every 200 ms while
			 * there are some, so that their space comes back to the
			 * host (host_punch) without waiting for the next write.
			 * Short freed extents are punched here too, once nothing
			 * came for 200 ms, in batches between which a new
			 * operation is taken first (orch_alloc_punch_held).
			 */
			if (!more) {
				clock_gettime(CLOCK_MONOTONIC, &ts);
				ts.tv_nsec += 200 * 1000000L;
				if (ts.tv_nsec >= 1000000000L) {
					ts.tv_sec++;
					ts.tv_nsec -= 1000000000L;
				}
				if (pthread_cond_timedwait(&w->w_cv, &w->w_lock, &ts) != ETIMEDOUT ||
				    w->w_head || w->w_stop)
					continue;
			}
			pthread_mutex_unlock(&w->w_lock);
			orch_alloc_busy_release(w);
			more = orch_alloc_punch_held(w, W_PUNCH_BATCH);
			pthread_mutex_lock(&w->w_lock);
		}
		w->w_idle = false;
		if (!w->w_head)
			break;
		list = w->w_head;
		w->w_head = NULL;
		w->w_tail = &w->w_head;
		pthread_mutex_unlock(&w->w_lock);
		run_batch(w, list);
		pthread_mutex_lock(&w->w_lock);
	}
	pthread_mutex_unlock(&w->w_lock);
	return NULL;
}

void orch_store_submit(struct orch_store *st, struct orch_store_op *op)
{
	op->o_sums = NULL;
	op->o_sums_wait = NULL;
	op->o_waiter = NULL;
	orch_store_submit_(st, op);
}

void orch_store_submit_(struct orch_store *st, struct orch_store_op *op)
{
	struct store_writer *w = st->st_writer;
	bool wake;

	op->o_next = NULL;
	op->status = 0;
	op->result = op->o_done = op->o_piece = 0;
	atomic_fetch_add_explicit(&st->st_queued, 1, memory_order_acquire);
	pthread_mutex_lock(&w->w_lock);
	*w->w_tail = op;
	w->w_tail = &op->o_next;
	wake = w->w_idle;
	w->w_idle = false;
	pthread_mutex_unlock(&w->w_lock);
	/*
	 * Only an idle writer needs a wake-up, one per idle spell, and after
	 * the unlock: woken under it, the writer would block on w_lock at
	 * once (64 submitters at a time made that a switch per operation).
	 */
	if (wake)
		pthread_cond_signal(&w->w_cv);
}

/* --- Start and stop ---------------------------------------------------------------------------- */

static void writer_free(struct store_writer *w)
{
	orch_rec_sq_fini(&w->w_sq);
	sqlite3_close(w->w_db);
	orch_alloc_busy_free(w);
	free(w->w_agd);
	free(w->w_tagd);
	free(w->w_cs);
	free(w->w_buf);
	pthread_mutex_destroy(&w->w_lock);
	pthread_cond_destroy(&w->w_cv);
	free(w);
}

static int load_counters(struct store_writer *w)
{
	static const char *const keys[2] = { "next_nid", "next_work" };
	static const enum orch_rec_stmt counts[4] = {
		ORCH_REC_AG_FREE_SUM, ORCH_REC_OBJ_LIVE_COUNT, ORCH_REC_REFC_COUNT,
		ORCH_REC_BAD_COUNT,
	};
	struct orch_store *st = w->w_st;
	struct orch_smeta_irec m;
	int64_t v[6] = { 0 };
	sqlite3_stmt *s;
	int rc;

	for (int i = 0; i < 6; i++) {
		if (i < 2) {
			s = orch_writer_stmt(w, ORCH_REC_SMETA_GET);
			sqlite3_bind_text(s, 1, keys[i], -1, SQLITE_STATIC);
		} else {
			s = orch_writer_stmt(w, counts[i - 2]);
		}
		rc = orch_rec_step(&w->w_sq, i < 2 ? ORCH_REC_SMETA_GET : counts[i - 2]);
		if (rc <= 0)
			return rc ? rc : -ORCH_ECORRUPT;
		if (i >= 2)
			v[i] = sqlite3_column_int64(s, 0);
		else   /* a damaged counter is refused below */
			v[i] = orch_rec_smeta_from_disk(s, 0, &m) ? -1 : m.v;
		sqlite3_reset(s);
	}
	if (v[0] < 1 || v[1] < 1 || v[2] < 0 || (uint64_t)v[2] > st->st_blocks) {
		ORCH_ERR("store in '%s': damaged counters in store.db", st->st_dir);
		return -ORCH_ECORRUPT;
	}
	w->w_next_nid = v[0];
	w->w_next_work = v[1];
	st->st_freeblks = (uint64_t)v[2];
	st->st_objects = (uint64_t)v[3];
	w->w_nrefc = v[4];
	w->w_nbad = v[5];
	return 0;
}

static int wal_hook(void *arg, sqlite3 *db, const char *name, int pages)
{
	struct orch_store *st = arg;

	(void)db;
	(void)name;
	atomic_store(&st->st_wal_pages, pages);
	return SQLITE_OK;
}

int orch_writer_start(struct orch_store *st)
{
	struct store_writer *w = calloc(1, sizeof(*w));
	int error;

	if (!w)
		return -ENOMEM;
	w->w_st = st;
	w->w_tail = &w->w_head;
	w->w_rel_durable = w->w_rel_oldest = UINT64_MAX;
	pthread_mutex_init(&w->w_lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&w->w_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	error = orch_store_db_open(st, false, &w->w_db);
	if (!error) {
		sqlite3_wal_hook(w->w_db, wal_hook, st);
		/*
		 * A WAL restarted in place keeps its size; a burst that grew it
		 * past STORE_WAL_LIMIT (a reader held the checkpoints back) is
		 * cut back by the first commit after the restart.  Not lower:
		 * a WAL that grows again makes every fdatasync write its size.
		 */
		if (sqlite3_exec(w->w_db, "PRAGMA journal_size_limit=" ORCH_STR(STORE_WAL_LIMIT),
				 NULL, NULL, NULL) != SQLITE_OK)
			error = orch_rec_sql_err(w->w_db, SQLITE_ERROR, "journal_size_limit");
	}
	/* Every statement now: the writer's helpers take them prepared. */
	orch_rec_sq_init(&w->w_sq, w->w_db);
	for (int i = 0; !error && i < ORCH_REC_NSTMT; i++) {
		sqlite3_stmt *s;

		error = orch_rec_stmt(&w->w_sq, (enum orch_rec_stmt)i, &s);
	}
	if (!error)
		error = orch_alloc_busy_init(w);
	if (!error)
		error = load_counters(w);
	st->st_writer = w;
	if (!error)
		error = work_resume(w);
	if (!error)
		error = load_counters(w);
	if (!error)
		error = orch_alloc_hwm_init(w);
	if (!error) {
		error = -pthread_create(&w->w_thread, NULL, writer_main, w);
		w->w_started = !error;
	}
	if (error) {
		st->st_writer = NULL;
		writer_free(w);
	}
	return error;
}

void orch_writer_stop(struct orch_store *st)
{
	struct store_writer *w = st->st_writer;

	if (!w)
		return;
	pthread_mutex_lock(&w->w_lock);
	w->w_stop = true;
	pthread_cond_signal(&w->w_cv);
	pthread_mutex_unlock(&w->w_lock);
	if (w->w_started)
		pthread_join(w->w_thread, NULL);
	/*
	 * What was freed last goes back to the host before the store closes:
	 * the frees made durable, no snapshot open (none may be, now), every
	 * held block punched.  A store that failed keeps what it has.
	 */
	if (w->w_started && (w->w_nbusy || w->w_nheld) && !orch_store_sync(st)) {
		w->w_rel_durable = UINT64_MAX;
		orch_alloc_busy_release(w);
		orch_alloc_punch_held(w, SIZE_MAX);
	}
	st->st_writer = NULL;
	writer_free(w);
}
