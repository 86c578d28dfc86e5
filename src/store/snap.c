/*
 * Read connections, snapshots and the read path.  A read takes a pooled
 * connection, registers its snapshot (so that no block it can see is
 * reused until it ends: alloc.c's busy extents), reads the object's
 * records and checksums from it, verified (rec.c), and then the blocks
 * (bdev.c), each checked against its checksum.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "common/util.h"
#include "store/store_i.h"

/* --- Read connections and snapshots ---------------------------------------------- */

static void conn_free(struct store_conn *c)
{
	if (!c)
		return;
	orch_rec_sq_fini(&c->c_sq);
	sqlite3_close(c->c_db);
	free(c->c_ext);
	free(c->c_buf);
	free(c->c_sums);
	free(c->c_valid);
	free(c);
}

static int conn_new(struct orch_store *st, struct store_conn **out)
{
	struct store_conn *c = calloc(1, sizeof(*c));
	int error;

	if (!c)
		return -ENOMEM;
	error = orch_store_db_open(st, false, &c->c_db);
	if (error) {
		free(c);
		return error;
	}
	orch_rec_sq_init(&c->c_sq, c->c_db);
	*out = c;
	return 0;
}

void orch_snap_pool_free(struct orch_store *st)
{
	struct store_conn *c, *n;

	for (c = st->st_pool; c; c = n) {
		n = c->c_next;
		conn_free(c);
	}
	st->st_pool = NULL;
}

int orch_snap_get(struct orch_store *st, struct store_conn **out)
{
	struct store_conn *c;
	sqlite3_stmt *s;
	int error;

	pthread_mutex_lock(&st->st_pool_lock);
	c = st->st_pool;
	if (c)
		st->st_pool = c->c_next;
	pthread_mutex_unlock(&st->st_pool_lock);
	if (!c) {
		error = conn_new(st, &c);
		if (error)
			return error;
	}
	/* Register before the snapshot begins: it then sees at least c_epoch. */
	pthread_mutex_lock(&st->st_seq_lock);
	c->c_epoch = st->st_committed;
	pthread_mutex_unlock(&st->st_seq_lock);
	pthread_mutex_lock(&st->st_pool_lock);
	c->c_active = true;
	c->c_reg_next = st->st_active;
	st->st_active = c;
	pthread_mutex_unlock(&st->st_pool_lock);
	/* A deferred BEGIN takes its snapshot at the first read: read now. */
	error = orch_rec_stmt(&c->c_sq, ORCH_REC_BEGIN, &s);
	if (!error)
		error = orch_rec_exec(&c->c_sq, ORCH_REC_BEGIN);
	if (!error)
		error = orch_rec_stmt(&c->c_sq, ORCH_REC_SNAP_BEGIN, &s);
	if (!error)
		error = orch_rec_exec(&c->c_sq, ORCH_REC_SNAP_BEGIN);
	if (error) {
		orch_snap_put(st, c);
		return error;
	}
	*out = c;
	return 0;
}

/* Ends the SQLite read transaction but keeps the blocks registered. */
static void snap_end_txn(struct store_conn *c)
{
	sqlite3_stmt *s;

	if (!sqlite3_get_autocommit(c->c_db) && !orch_rec_stmt(&c->c_sq, ORCH_REC_COMMIT, &s))
		orch_rec_exec(&c->c_sq, ORCH_REC_COMMIT);
}

void orch_snap_put(struct orch_store *st, struct store_conn *c)
{
	snap_end_txn(c);
	pthread_mutex_lock(&st->st_pool_lock);
	for (struct store_conn **pp = &st->st_active; *pp; pp = &(*pp)->c_reg_next) {
		if (*pp == c) {
			*pp = c->c_reg_next;
			break;
		}
	}
	c->c_active = false;
	c->c_next = st->st_pool;
	st->st_pool = c;
	pthread_cond_broadcast(&st->st_snap_cv);
	pthread_mutex_unlock(&st->st_pool_lock);
}

bool orch_snap_wait_end(struct orch_store *st, unsigned int ms)
{
	struct timespec ts;
	bool any;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_nsec += (long)ms * 1000000;
	ts.tv_sec += ts.tv_nsec / 1000000000;
	ts.tv_nsec %= 1000000000;
	pthread_mutex_lock(&st->st_pool_lock);
	any = st->st_active != NULL;
	if (any)
		pthread_cond_timedwait(&st->st_snap_cv, &st->st_pool_lock, &ts);
	pthread_mutex_unlock(&st->st_pool_lock);
	return any;
}

uint64_t orch_snap_oldest(struct orch_store *st)
{
	uint64_t oldest = UINT64_MAX;

	pthread_mutex_lock(&st->st_pool_lock);
	for (struct store_conn *c = st->st_active; c; c = c->c_reg_next)
		if (c->c_epoch < oldest)
			oldest = c->c_epoch;
	pthread_mutex_unlock(&st->st_pool_lock);
	return oldest;
}

/* --- Reads ------------------------------------------------------------------------------- */

/*
 * A record the read needs failed verification: the read fails with EIO (the
 * client's answer for damaged data), logged once per call site and period,
 * naming the table, the record's key and the object read.  The checker and
 * repair deal with the record; nothing else is done about it here.
 */
static int read_bad_record(struct orch_store *st, enum orch_rec_tbl t, const char *key,
			   uint64_t h, orch_failaddr_t fa)
{
	pthread_mutex_lock(&st->st_seq_lock);
	st->st_stats.bad_records++;
	pthread_mutex_unlock(&st->st_seq_lock);
	ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
			   "corrupt record: table=%s %s object=%016" PRIx64 " check=%s;"
			   " reads of the object fail with EIO: run orchard scrub to list the"
			   " damage, orchard repair on the stopped server to rebuild an index",
			   orch_rec_tbl_name(t), key, h, fa);
	return -EIO;
}

/*
 * Looks up the object: 0 and *nid (0 if absent or being deleted), its size
 * and, if @nblocks is not NULL, the blocks its extents map.
 */
static int read_obj(struct orch_store *st, struct store_conn *c, uint64_t h, int64_t *nid,
		    uint64_t *size, uint64_t *nblocks)
{
	struct orch_obj_irec o;
	orch_failaddr_t fa;
	sqlite3_stmt *s;
	char key[48];
	int rc, error;

	*nid = 0;
	error = orch_rec_stmt(&c->c_sq, ORCH_REC_OBJ_BY_HANDLE, &s);
	if (error)
		return error;
	sqlite3_bind_int64(s, 1, orch_rec_key_u64(h));
	while ((rc = orch_rec_step(&c->c_sq, ORCH_REC_OBJ_BY_HANDLE)) == 1) {
		fa = orch_rec_obj_from_disk(s, 0, &o);
		if (!fa && o.handle != h)
			fa = ORCH_THIS_ADDRESS;
		if (fa) {
			snprintf(key, sizeof(key), "nid=%" PRId64, o.nid);
			orch_rec_reset(&c->c_sq, ORCH_REC_OBJ_BY_HANDLE);
			return read_bad_record(st, ORCH_REC_OBJ, key, h, fa);
		}
		if (o.flags & ORCH_REC_OBJ_DYING)
			continue;
		*nid = o.nid;
		*size = o.size;
		if (nblocks)
			*nblocks = o.nblocks;
	}
	return rc;
}

/*
 * The cross-check a read can afford: the rmap record of an extent's first
 * block, one primary-key probe, names the same owner, offset, length and
 * flags.  A bmap record moved onto another object's blocks with a CRC made
 * to match is caught here: the blocks' rmap names their real owner.
 */
static orch_failaddr_t read_rmap_agrees(struct orch_store *st, struct store_conn *c,
					const struct orch_bmap_irec *e, int *error)
{
	struct orch_rmap_irec r;
	orch_failaddr_t fa;
	sqlite3_stmt *s;
	int rc;

	*error = orch_rec_stmt(&c->c_sq, ORCH_REC_RMAP_GET, &s);
	if (*error)
		return NULL;
	sqlite3_bind_int64(s, 1, e->ag);
	sqlite3_bind_int64(s, 2, e->agbno);
	sqlite3_bind_int64(s, 3, e->nid);
	sqlite3_bind_int64(s, 4, (int64_t)e->off);
	rc = orch_rec_step(&c->c_sq, ORCH_REC_RMAP_GET);
	if (rc < 0) {
		*error = rc;
		return NULL;
	}
	if (rc == 0)
		return ORCH_THIS_ADDRESS;
	fa = orch_rec_rmap_from_disk(st, s, 0, &r);
	orch_rec_reset(&c->c_sq, ORCH_REC_RMAP_GET);
	if (fa)
		return fa;
	if (r.len != e->len || r.flags != e->flags)
		return ORCH_THIS_ADDRESS;
	return NULL;
}

/* Extents of @nid overlapping object blocks [b0, b1), in order, into c->c_ext. */
static int read_extents(struct orch_store *st, struct store_conn *c, uint64_t h,
			int64_t nid, uint64_t b0, uint64_t b1, size_t *n)
{
	static const enum orch_rec_stmt q[2] = { ORCH_REC_BMAP_LE, ORCH_REC_BMAP_RANGE };
	struct orch_bmap_irec e;
	orch_failaddr_t fa = NULL;
	sqlite3_stmt *s;
	size_t cnt = 0;
	char key[64];
	int rc = 0, error = 0;

	for (int pass = 0; pass < 2 && !error && !fa; pass++) {
		error = orch_rec_stmt(&c->c_sq, q[pass], &s);
		if (error)
			break;
		sqlite3_bind_int64(s, 1, nid);
		sqlite3_bind_int64(s, 2, (int64_t)b0);
		if (pass == 1)
			sqlite3_bind_int64(s, 3, (int64_t)b1);
		while ((rc = orch_rec_step(&c->c_sq, q[pass])) == 1) {
			fa = orch_rec_bmap_from_disk(st, s, 0, &e);
			if (!fa && e.nid != nid)
				fa = ORCH_THIS_ADDRESS;
			/* Sorted by off: an overlap is a damaged map (I7). */
			if (!fa && cnt && e.off < c->c_ext[cnt - 1].off + c->c_ext[cnt - 1].len)
				fa = ORCH_THIS_ADDRESS;
			if (fa) {
				orch_rec_reset(&c->c_sq, q[pass]);
				break;
			}
			if (e.off + e.len <= b0)   /* the extent before the range */
				continue;
			if (cnt == c->c_extcap) {
				size_t nc = c->c_extcap ? c->c_extcap * 2 : 16;
				struct orch_bmap_irec *nv = realloc(c->c_ext, nc * sizeof(*nv));

				if (!nv) {
					orch_rec_reset(&c->c_sq, q[pass]);
					error = -ENOMEM;
					break;
				}
				c->c_ext = nv;
				c->c_extcap = nc;
			}
			c->c_ext[cnt++] = e;
		}
		if (rc < 0)
			error = rc;
	}
	for (size_t i = 0; i < cnt && !error && !fa; i++) {
		e = c->c_ext[i];
		fa = read_rmap_agrees(st, c, &e, &error);
		if (fa) {
			snprintf(key, sizeof(key), "nid=%" PRId64 " off=%" PRIu64 " rmap=(%u,%u)",
				 e.nid, e.off, e.ag, e.agbno);
			*n = 0;
			return read_bad_record(st, ORCH_REC_BMAP, key, h, fa);
		}
	}
	if (fa) {
		snprintf(key, sizeof(key), "nid=%" PRId64 " off=%" PRIu64, e.nid, e.off);
		*n = 0;
		return read_bad_record(st, ORCH_REC_BMAP, key, h, fa);
	}
	*n = cnt;
	return error;
}

/* Room for @nb blocks of checksums (and of data if @data) in the conn. */
static int read_reserve(struct store_conn *c, size_t nb, bool data)
{
	if (nb > c->c_sumcap) {
		uint32_t *s = realloc(c->c_sums, nb * sizeof(*s));
		bool *v;

		if (!s)
			return -ENOMEM;
		c->c_sums = s;
		v = realloc(c->c_valid, nb * sizeof(*v));
		if (!v)
			return -ENOMEM;
		c->c_valid = v;
		c->c_sumcap = nb;
	}
	if (data && nb * ORCH_STORE_BLOCK > c->c_bufcap) {
		free(c->c_buf);
		c->c_buf = aligned_alloc(ORCH_STORE_BLOCK, nb * ORCH_STORE_BLOCK);
		c->c_bufcap = c->c_buf ? nb * ORCH_STORE_BLOCK : 0;
		if (!c->c_buf)
			return -ENOMEM;
	}
	return 0;
}

/*
 * Fills @sums[i] with the checksum of AG @ag's block agbno + i, i < len;
 * @valid[i] says whether it has one.  A csum record that fails
 * verification fails the read (object @h, for the log).
 */
static int read_csums(struct orch_store *st, struct store_conn *c, uint64_t h, uint32_t ag,
		      uint32_t agbno, uint32_t len, uint32_t *sums, bool *valid)
{
	struct orch_csum_irec cs;
	orch_failaddr_t fa;
	sqlite3_stmt *s;
	char key[48];
	int rc, error;

	memset(valid, 0, len * sizeof(*valid));
	error = orch_rec_stmt(&c->c_sq, ORCH_REC_CSUM_RANGE, &s);
	if (error)
		return error;
	sqlite3_bind_int64(s, 1, ag);
	sqlite3_bind_int64(s, 2, agbno / ORCH_REC_CSUM_GROUP);
	sqlite3_bind_int64(s, 3, (agbno + len - 1) / ORCH_REC_CSUM_GROUP);
	while ((rc = orch_rec_step(&c->c_sq, ORCH_REC_CSUM_RANGE)) == 1) {
		fa = orch_rec_csum_from_disk(st, s, 0, &cs);
		if (!fa && cs.ag != ag)
			fa = ORCH_THIS_ADDRESS;
		if (fa) {
			orch_rec_reset(&c->c_sq, ORCH_REC_CSUM_RANGE);
			snprintf(key, sizeof(key), "ag=%u grp=%u", ag, cs.grp);
			return read_bad_record(st, ORCH_REC_CSUM, key, h, fa);
		}
		for (uint32_t i = 0; i < ORCH_REC_CSUM_GROUP; i++) {
			uint64_t b = (uint64_t)cs.grp * ORCH_REC_CSUM_GROUP + i;

			if (b < agbno || b >= (uint64_t)agbno + len || !(cs.valid >> i & 1))
				continue;
			sums[b - agbno] = cs.sums[i];
			valid[b - agbno] = true;
		}
	}
	return rc;
}

static void quarantine_done(struct orch_store_op *op)
{
	if (op->status && op->status != -EINVAL)
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "store: quarantine of block %" PRIu64 " failed: %s",
				   op->off, strerror(-op->status));
	free(op);
}

void orch_snap_report_bad(struct orch_store *st, uint64_t h, uint64_t objblock,
		      uint64_t gblock)
{
	struct orch_store_op *op = NULL;
	bool seen = false;

	pthread_mutex_lock(&st->st_seq_lock);
	st->st_stats.csum_errors++;
	/* A client rereading one bad block queues one quarantine, not one per read. */
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(st->st_bad_recent); i++)
		seen |= st->st_bad_recent[i] == gblock + 1;
	if (!seen)
		st->st_bad_recent[st->st_bad_next++ % ORCH_ARRAY_SIZE(st->st_bad_recent)] = gblock + 1;
	pthread_mutex_unlock(&st->st_seq_lock);
	if (!seen)
		op = calloc(1, sizeof(*op));
	if (op) {
		op->type = ORCH_STORE_OP_QUARANTINE;
		op->off = gblock;
		op->len = 1;
		op->done = quarantine_done;
		orch_store_submit(st, op);
	}
	ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
			   "checksum mismatch: object %016" PRIx64 " offset %" PRIu64
			   " (physical block %" PRIu64 ")",
			   h, objblock * ORCH_STORE_BLOCK, gblock);
	if (st->st_bad_fn)
		st->st_bad_fn(st->st_bad_arg, h, objblock * ORCH_STORE_BLOCK, gblock);
}

/*
 * The read path: mapping and checksums from the snapshot @c, then the data,
 * while the blocks stay registered.  Ends the SQLite transaction when
 * @end_txn (a one-shot read) before the data I/O, so the WAL can be
 * checkpointed meanwhile.
 */
static int snap_read(struct orch_store *st, struct store_conn *c, bool end_txn,
		     uint64_t h, uint64_t off, void *buf, size_t len, size_t *got)
{
	struct orch_bmap_irec *ext;
	uint8_t *blocks;
	size_t n = 0, want, nb;
	uint64_t size = 0, b0, b1, pos;
	int64_t nid;
	bool direct;
	int error;

	*got = 0;
	if (len > ORCH_STORE_MAX_IO)
		return -EINVAL;
	error = read_obj(st, c, h, &nid, &size, NULL);
	if (error || !nid || off >= size || len == 0) {
		if (end_txn)
			snap_end_txn(c);
		return error;
	}
	want = (size_t)ORCH_MIN((uint64_t)len, size - off);
	b0 = off / ORCH_STORE_BLOCK;
	b1 = (off + want + ORCH_STORE_BLOCK - 1) / ORCH_STORE_BLOCK;
	nb = (size_t)(b1 - b0);
	/* Whole blocks go straight into the caller's buffer. */
	direct = off % ORCH_STORE_BLOCK == 0 && want % ORCH_STORE_BLOCK == 0;
	error = read_extents(st, c, h, nid, b0, b1, &n);
	if (!error)
		error = read_reserve(c, nb, !direct);
	if (error)
		goto out;
	ext = c->c_ext;
	blocks = direct ? buf : c->c_buf;
	/* Checksums first, from the same snapshot as the mapping. */
	for (size_t i = 0; i < n; i++) {
		uint64_t lo = ORCH_MAX(ext[i].off, b0), hi = ORCH_MIN(ext[i].off + ext[i].len, b1);

		error = read_csums(st, c, h, ext[i].ag,
				   ext[i].agbno + (uint32_t)(lo - ext[i].off),
				   (uint32_t)(hi - lo), c->c_sums + (lo - b0),
				   c->c_valid + (lo - b0));
		if (error)
			goto out;
	}
	if (end_txn)
		snap_end_txn(c);
	pos = b0;
	for (size_t i = 0; i <= n; i++) {
		uint64_t lo = i < n ? ORCH_MAX(ext[i].off, b0) : b1;
		uint64_t hi = i < n ? ORCH_MIN(ext[i].off + ext[i].len, b1) : b1;
		uint64_t g;
		uint8_t *dst;

		if (lo > pos)   /* a hole */
			memset(blocks + (pos - b0) * ORCH_STORE_BLOCK, 0,
			       (size_t)(lo - pos) * ORCH_STORE_BLOCK);
		if (i == n)
			break;
		g = store_gblock(st, ext[i].ag, ext[i].agbno) + (lo - ext[i].off);
		dst = blocks + (lo - b0) * ORCH_STORE_BLOCK;
		error = orch_bdev_read(st, g, (uint32_t)(hi - lo), dst);
		if (error) {
			ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
					   "read error: object %016" PRIx64 " offset %" PRIu64
					   " (physical block %" PRIu64 "): %s",
					   h, lo * ORCH_STORE_BLOCK, g, strerror(-error));
			goto out;
		}
		for (uint64_t b = lo; b < hi; b++) {
			uint8_t *p = blocks + (b - b0) * ORCH_STORE_BLOCK;

			if (!c->c_valid[b - b0] ||
			    orch_crc32c(0, p, ORCH_STORE_BLOCK) != c->c_sums[b - b0]) {
				orch_snap_report_bad(st, h, b, g + (b - lo));
				error = -EIO;
				goto out;
			}
		}
		pos = hi;
	}
	if (!direct)
		memcpy(buf, blocks + (off - b0 * ORCH_STORE_BLOCK), want);
	*got = want;
	atomic_fetch_add_explicit(&st->st_bytes_read, want, memory_order_relaxed);
out:
	if (end_txn)
		snap_end_txn(c);
	/* Do not keep a huge buffer for a rare huge unaligned read. */
	if (c->c_bufcap > (1u << 20) + 2 * ORCH_STORE_BLOCK) {
		free(c->c_buf);
		c->c_buf = NULL;
		c->c_bufcap = 0;
	}
	return error;
}

int orch_store_read(struct orch_store *st, uint64_t h, uint64_t off, void *buf,
		    size_t len, size_t *got)
{
	struct store_conn *c;
	int error;

	*got = 0;
	if (len > ORCH_STORE_MAX_IO)
		return -EINVAL;
	error = orch_snap_get(st, &c);
	if (error)
		return error;
	error = snap_read(st, c, true, h, off, buf, len, got);
	orch_snap_put(st, c);
	return error;
}

struct orch_store_snap {
	struct orch_store *sn_st;
	struct store_conn *sn_conn;
};

int orch_store_snap_begin(struct orch_store *st, struct orch_store_snap **out)
{
	struct orch_store_snap *sn = calloc(1, sizeof(*sn));
	int error;

	if (!sn)
		return -ENOMEM;
	error = orch_snap_get(st, &sn->sn_conn);
	if (error) {
		free(sn);
		return error;
	}
	sn->sn_st = st;
	*out = sn;
	return 0;
}

int orch_store_snap_read(struct orch_store_snap *sn, uint64_t h, uint64_t off,
			 void *buf, size_t len, size_t *got)
{
	return snap_read(sn->sn_st, sn->sn_conn, false, h, off, buf, len, got);
}

void orch_store_snap_end(struct orch_store_snap *sn)
{
	if (!sn)
		return;
	orch_snap_put(sn->sn_st, sn->sn_conn);
	free(sn);
}

int orch_store_object_size(struct orch_store *st, uint64_t h, uint64_t *size)
{
	struct store_conn *c;
	int64_t nid = 0;
	int error;

	*size = 0;
	error = orch_snap_get(st, &c);
	if (error)
		return error;
	error = read_obj(st, c, h, &nid, size, NULL);
	orch_snap_put(st, c);
	if (!error && !nid)
		error = -ENOENT;
	return error;
}

int orch_store_object_blocks(struct orch_store *st, uint64_t h, uint64_t *nblocks)
{
	struct store_conn *c;
	uint64_t size;
	int64_t nid = 0;
	int error;

	*nblocks = 0;
	error = orch_snap_get(st, &c);
	if (error)
		return error;
	error = read_obj(st, c, h, &nid, &size, nblocks);
	orch_snap_put(st, c);
	if (!error && !nid)
		*nblocks = 0;   /* no object: nothing allocated */
	return error;
}
