/*
 * Free space, checksums and busy extents, on the writer thread.
 *
 * Free space is kept twice, by block (fsb) and by size (fsc), with maximal
 * extents: freeing merges with both neighbours.  The allocator is next-fit
 * from a cursor, so a sequential writer gets contiguous blocks and its
 * extents merge; it skips busy blocks, which were freed by a transaction
 * that is not yet durable or that an open snapshot may still read (XFS's
 * busy extents; docs/SPEC-store.md, I20).  It takes free blocks below the
 * high-water mark before any past it: a sparse blocks file then grows
 * only when nothing freed can be used again, where a cursor going round
 * the whole store (64 GiB) left every freed block taking host space.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>

#include "common/log.h"
#include "common/pcut.h"
#include "common/time.h"
#include "common/util.h"
#include "store/writer_i.h"

/* --- Room for the databases on the host file system --------------------------------- */

/*
 * A sparse blocks file takes host space as its holes are written, and it
 * shares its file system with meta.db and store.db.  Let it take the last
 * free blocks and an unlink can no longer commit (the namespace WAL cannot
 * grow), so nothing can be deleted to make room.  So the allocator keeps
 * st_reserve free: a write that would leave less gets ENOSPC, while the
 * databases may still use the reserve.  The check counts every new block
 * as taking host space, though one the store reuses may hold it already:
 * at worst a write is refused a little early.
 */

/* How long a look at the host's free space (fstatvfs) is trusted, in ms. */
#define W_HOST_LOOK_MS 100
/* Freed extents of at least this many blocks give their space back to the
 * host; shorter ones only while it is short of space (under 4 reserves):
 * a punch per 4 KiB overwrite would cost a syscall and host metadata for
 * space the store reuses anyway. */
#define W_PUNCH_MIN_BLOCKS 16u

/* Host bytes available: looked up at most every W_HOST_LOOK_MS (or now,
 * with @fresh), less what was allocated since. */
static uint64_t host_avail(struct store_writer *w, bool fresh)
{
	uint64_t now = orch_time_now_ms();
	struct statvfs sv;

	if (fresh || !w->w_host_ms || now - w->w_host_ms >= W_HOST_LOOK_MS) {
		if (fstatvfs(w->w_st->st_blocks_fd, &sv) == 0) {
			w->w_host_avail = (uint64_t)sv.f_bavail * sv.f_frsize;
			w->w_host_ms = now ? now : 1;
		}
	}
	return w->w_host_avail;
}

/* Do @blocks new blocks leave the reserve free on the host? */
static bool host_space_ok(struct store_writer *w, uint32_t blocks)
{
	uint64_t reserve = atomic_load(&w->w_st->st_reserve);
	uint64_t need = reserve + (uint64_t)blocks * ORCH_STORE_BLOCK;

	if (!reserve)
		return true;
	/* Far from the reserve the last look will do; near it every check
	 * looks again, as other servers may share the file system and take
	 * from it meanwhile. */
	if (host_avail(w, false) >= need + 3 * reserve)
		return true;
	return host_avail(w, true) >= need;
}

static void host_space_reclaim(struct store_writer *w);

/*
 * 0 if @blocks new blocks leave the reserve free; else the space freed
 * blocks still hold is given back first (host_space_reclaim), and
 * -ENOSPC (logged) if that was not enough.
 */
static int host_space_check(struct store_writer *w, uint32_t blocks)
{
	struct orch_store *st = w->w_st;
	uint64_t reserve = atomic_load(&st->st_reserve);

	if (host_space_ok(w, blocks))
		return 0;
	if (w->w_nheld || w->w_nbusy) {
		host_space_reclaim(w);
		if (orch_store_failed(st, NULL))
			return -EIO;
		if (host_space_ok(w, blocks))
			return 0;
	}
	ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
			   "store in '%s': no space for new blocks: %llu KiB free on the "
			   "file system of '%s', %llu KiB kept for the databases (store_reserve): "
			   "writes answer ENOSPC until files are removed or the file system grows "
			   "(docs/ADMIN.md, \"A full file system\")",
			   st->st_dir, (unsigned long long)(w->w_host_avail >> 10),
			   st->st_blocks_path, (unsigned long long)(reserve >> 10));
	return -ENOSPC;
}

static void host_space_take(struct store_writer *w, uint32_t blocks)
{
	uint64_t b = (uint64_t)blocks * ORCH_STORE_BLOCK;

	w->w_host_avail = w->w_host_avail > b ? w->w_host_avail - b : 0;
}

/* Punches global blocks [g, g + n): true if their space went back to the host. */
static bool host_punch_range(struct store_writer *w, uint64_t g, uint32_t n)
{
	struct orch_store *st = w->w_st;
	int error;

	if (!st->st_sparse || w->w_no_punch || orch_store_failed(st, NULL))
		return false;
	error = orch_bdev_punch(st, g, n);
	if (error) {
		if (error == -EOPNOTSUPP) {
			w->w_no_punch = true;
			ORCH_INFO("store in '%s': the file system of '%s' cannot punch holes: "
				  "freed blocks keep their space", st->st_dir, st->st_blocks_path);
		}
		return false;
	}
	w->w_host_ms = 0;   /* look again: the space is back */
	return true;
}

static int held_set(struct store_writer *w, uint64_t g, uint32_t n, bool on);

/*
 * Gives the host the space of freed blocks back (a hole), once they are
 * no longer busy: their free is durable and no snapshot reads them, and
 * the allocator cannot have handed them out again yet.  Not synced: a
 * punch lost in a crash only leaves the space taken until the blocks are
 * used again.  Short extents wait, held, for the writer to be idle
 * (orch_alloc_punch_held): the allocator may take them again at once.
 */
static void host_punch(struct store_writer *w, const struct w_busy *b)
{
	struct orch_store *st = w->w_st;
	uint64_t reserve = atomic_load(&st->st_reserve);

	if (!st->st_sparse || w->w_no_punch)
		return;
	if (b->len < W_PUNCH_MIN_BLOCKS && (!reserve || host_avail(w, false) >= 4 * reserve)) {
		/* Not held if there is no memory for the map: the space stays
		 * taken until the blocks are used again, as after a crash. */
		(void)held_set(w, b->g, b->len, true);
		return;
	}
	host_punch_range(w, b->g, b->len);
}

struct w_agdelta *orch_alloc_agd(struct store_writer *w, uint32_t ag)
{
	for (size_t i = 0; i < w->w_nagd; i++)
		if (w->w_agd[i].ag == ag)
			return &w->w_agd[i];
	if (w->w_nagd == w->w_capagd) {
		size_t cap = w->w_capagd ? w->w_capagd * 2 : 8;
		struct w_agdelta *p = realloc(w->w_agd, cap * sizeof(*p));

		if (!p)
			return NULL;
		w->w_agd = p;
		w->w_capagd = cap;
	}
	w->w_agd[w->w_nagd] = (struct w_agdelta){ .ag = ag };
	return &w->w_agd[w->w_nagd++];
}

/* --- Busy extents ------------------------------------------------------------------ */

/*
 * A bitmap per AG answers "is this block busy" and "where does the busy
 * (or free) run end" in a few word operations, whatever the number of busy
 * extents; the extents themselves queue in commit order, so releasing them
 * pops from the front.
 */

int orch_alloc_busy_init(struct store_writer *w)
{
	uint32_t n = w->w_st->st_ag_count;

	w->w_busy_bits = calloc(n, sizeof(*w->w_busy_bits));
	w->w_busy_cnt = calloc(n, sizeof(*w->w_busy_cnt));
	w->w_held_bits = calloc(n, sizeof(*w->w_held_bits));
	w->w_held_cnt = calloc(n, sizeof(*w->w_held_cnt));
	return w->w_busy_bits && w->w_busy_cnt && w->w_held_bits && w->w_held_cnt ? 0 : -ENOMEM;
}

static bool bit_get(const uint64_t *bits, uint32_t b)
{
	return bits && (bits[b / 64] >> (b % 64) & 1);
}

/* First block in [b, end) whose bit equals @want, or @end. */
static uint32_t bit_find(const uint64_t *bits, uint32_t b, uint32_t end, bool want)
{
	if (!bits)
		return want ? end : b;
	while (b < end) {
		uint64_t word = bits[b / 64];

		if (!want)
			word = ~word;
		word >>= b % 64;
		if (word)
			return ORCH_MIN(end, b + (uint32_t)__builtin_ctzll(word));
		b = (b / 64 + 1) * 64;
	}
	return end;
}

/*
 * Sets (or clears) the bits of AG blocks [b, b + len) in the map of AG
 * @ag in @maps, made on first use and freed when empty; @cnt[ag] counts
 * its bits set.  Returns the number of bits changed, or -ENOMEM.
 */
static int64_t map_set(struct store_writer *w, uint64_t **maps, uint32_t *cnt, uint32_t ag,
		       uint32_t b, uint32_t len, bool on)
{
	uint64_t *bits = maps[ag];
	int64_t changed = 0;

	if (!bits) {
		if (!on)
			return 0;
		bits = calloc((w->w_st->st_ag_blocks + 63) / 64, sizeof(*bits));
		if (!bits)
			return -ENOMEM;
		maps[ag] = bits;
	}
	for (uint32_t i = b; i < b + len;) {
		uint32_t k = i % 64, n = ORCH_MIN(64 - k, b + len - i);
		uint64_t mask = (n == 64 ? ~0ull : (1ull << n) - 1) << k;
		uint64_t old = bits[i / 64];

		bits[i / 64] = on ? old | mask : old & ~mask;
		changed += __builtin_popcountll(old ^ bits[i / 64]);
		i += n;
	}
	if (on) {
		cnt[ag] += (uint32_t)changed;
	} else if ((cnt[ag] -= (uint32_t)changed) == 0) {
		free(bits);
		maps[ag] = NULL;
	}
	return changed;
}

static int bits_set(struct store_writer *w, uint32_t ag, uint32_t b, uint32_t len, bool on)
{
	int64_t n = map_set(w, w->w_busy_bits, w->w_busy_cnt, ag, b, len, on);

	return n < 0 ? (int)n : 0;
}

static int busy_unset(struct store_writer *w, const struct w_busy *b)
{
	struct orch_store *st = w->w_st;

	return bits_set(w, (uint32_t)(b->g >> st->st_ag_shift),
			(uint32_t)(b->g & (st->st_ag_blocks - 1)), b->len, false);
}

/* Marks (or unmarks) global blocks [g, g + n), all in one AG, as held. */
static int held_set(struct store_writer *w, uint64_t g, uint32_t n, bool on)
{
	struct orch_store *st = w->w_st;
	uint32_t ag = (uint32_t)(g >> st->st_ag_shift);
	int64_t c;

	if (!on && !w->w_held_cnt[ag])
		return 0;
	c = map_set(w, w->w_held_bits, w->w_held_cnt, ag, (uint32_t)(g & (st->st_ag_blocks - 1)),
		    n, on);
	if (c < 0)
		return (int)c;
	if (on)
		w->w_nheld += (uint64_t)c;
	else
		w->w_nheld -= (uint64_t)c;
	return 0;
}

static int busy_add(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	int error;

	if (w->w_npend == w->w_cappend) {
		size_t cap = w->w_cappend ? w->w_cappend * 2 : 64;
		struct w_busy *p = realloc(w->w_pend, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		w->w_pend = p;
		w->w_cappend = cap;
	}
	error = bits_set(w, ag, agbno, len, true);
	if (error)
		return error;
	w->w_pend[w->w_npend++] = (struct w_busy){ .g = store_gblock(w->w_st, ag, agbno),
						   .len = len };
	return 0;
}

void orch_alloc_busy_undo(struct store_writer *w, size_t mark)
{
	while (w->w_npend > mark)
		busy_unset(w, &w->w_pend[--w->w_npend]);
}

int orch_alloc_busy_reserve(struct store_writer *w)
{
	size_t n = w->w_nbusy + w->w_npend;

	if (n > w->w_capbusy) {
		size_t cap = ORCH_MAX(n, w->w_capbusy * 2);
		struct w_busy *p = malloc(cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		for (size_t i = 0; i < w->w_nbusy; i++)
			p[i] = w->w_busy[(w->w_bhead + i) % w->w_capbusy];
		free(w->w_busy);
		w->w_busy = p;
		w->w_bhead = 0;
		w->w_capbusy = cap;
	}
	return 0;
}

void orch_alloc_busy_commit(struct store_writer *w, uint64_t seq)
{
	for (size_t i = 0; i < w->w_npend; i++) {
		w->w_pend[i].seq = seq;
		w->w_busy[(w->w_bhead + w->w_nbusy++) % w->w_capbusy] = w->w_pend[i];
	}
	w->w_npend = 0;
}

void orch_alloc_busy_release(struct store_writer *w)
{
	struct orch_store *st = w->w_st;
	uint64_t durable, oldest, upto;

	if (!w->w_nbusy)
		return;
	pthread_mutex_lock(&st->st_seq_lock);
	durable = st->st_durable;
	pthread_mutex_unlock(&st->st_seq_lock);
	oldest = orch_snap_oldest(st);
	if (durable == w->w_rel_durable && oldest == w->w_rel_oldest)
		return;
	w->w_rel_durable = durable;
	w->w_rel_oldest = oldest;
	upto = ORCH_MIN(durable, oldest);
	while (w->w_nbusy && w->w_busy[w->w_bhead].seq <= upto) {
		host_punch(w, &w->w_busy[w->w_bhead]);
		busy_unset(w, &w->w_busy[w->w_bhead]);
		w->w_bhead = (w->w_bhead + 1) % w->w_capbusy;
		w->w_nbusy--;
		w->w_reuse_none = false;   /* something below the mark may be free now */
	}
}

bool orch_alloc_punch_held(struct store_writer *w, size_t max)
{
	struct orch_store *st = w->w_st;
	size_t runs = 0;

	for (uint32_t ag = 0; ag < st->st_ag_count && w->w_nheld; ag++) {
		uint32_t b = 0, end = store_ag_len(st, ag);

		while (w->w_held_bits[ag] && b < end) {
			uint32_t s = bit_find(w->w_held_bits[ag], b, end, true), e;

			if (s >= end)
				break;
			if (runs++ >= max)
				return true;
			e = bit_find(w->w_held_bits[ag], s, end, false);
			host_punch_range(w, store_gblock(st, ag, s), e - s);
			held_set(w, store_gblock(st, ag, s), e - s, false);
			b = e;
		}
	}
	return w->w_nheld != 0;
}

/*
 * The host is short of space for new blocks: gives it back what freed
 * blocks still hold, at once, rather than answering ENOSPC to a write
 * that comes right after a delete.  Held blocks are punched; busy ones
 * are made durable (a sync, only on the way to ENOSPC, as when the store
 * itself is full of busy blocks), then released (and punched: the host is
 * short) as soon as no read can see them, waiting about a second at most
 * for reads in progress.  Frees of the transaction still open stay busy.
 */
static void host_space_reclaim(struct store_writer *w)
{
	struct orch_store *st = w->w_st;
	unsigned int waits = 0;

	if (w->w_nbusy && !orch_store_sync(st)) {
		for (;;) {
			w->w_rel_durable = UINT64_MAX;
			orch_alloc_busy_release(w);
			if (!w->w_nbusy || waits++ >= STORE_ALLOC_WAITS ||
			    !orch_snap_wait_end(st, 10))
				break;
		}
	}
	orch_alloc_punch_held(w, SIZE_MAX);
}

void orch_alloc_busy_free(struct store_writer *w)
{
	for (uint32_t i = 0; i < w->w_st->st_ag_count; i++) {
		if (w->w_busy_bits)
			free(w->w_busy_bits[i]);
		if (w->w_held_bits)
			free(w->w_held_bits[i]);
	}
	free(w->w_busy_bits);
	free(w->w_busy_cnt);
	free(w->w_held_bits);
	free(w->w_held_cnt);
	free(w->w_busy);
	free(w->w_pend);
	w->w_busy_bits = w->w_held_bits = NULL;
	w->w_busy_cnt = w->w_held_cnt = NULL;
	w->w_nheld = 0;
	w->w_busy = w->w_pend = NULL;
	w->w_nbusy = w->w_npend = w->w_capbusy = w->w_cappend = 0;
}

/* --- Free-space records -------------------------------------------------------------- */

/*
 * The extent of a free-space (fsb) row, trusted as the writer trusts its
 * records (writer.c obj_from_row).
 */
static void fsb_from_row(sqlite3_stmt *q, uint32_t *agbno, uint32_t *len)
{
	struct orch_fsb_irec r;

	(void)orch_rec_fsb_from_disk(NULL, q, 0, &r);
	*agbno = r.agbno;
	*len = r.len;
}

static int fs_ins(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	struct orch_fsb_irec r = { ag, agbno, len };
	int error;

	orch_rec_fsb_bind(orch_writer_stmt(w, ORCH_REC_FSB_INS), &r);
	error = orch_rec_exec(&w->w_sq, ORCH_REC_FSB_INS);
	if (error)
		return error;
	orch_rec_fsc_bind(orch_writer_stmt(w, ORCH_REC_FSC_INS), &r);
	return orch_rec_exec(&w->w_sq, ORCH_REC_FSC_INS);
}

static int fs_del(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	int error = orch_writer_exec(w, ORCH_REC_FSB_DEL, W_ARGS(ag, agbno));

	return error ? error : orch_writer_exec(w, ORCH_REC_FSC_DEL, W_ARGS(ag, len, agbno));
}

/*
 * In AG @ag from block @from on, the first free run not busy that starts
 * before block @end: *@s and *@len (0 if none; at most @want), and the
 * free record (*@ra, *@rl) that holds it.
 */
static int find_run(struct store_writer *w, uint32_t ag, uint32_t from, uint32_t end,
		    uint32_t want, uint32_t *s, uint32_t *len, uint32_t *ra, uint32_t *rl)
{
	sqlite3_stmt *q;
	int rc;

	*len = 0;
	for (int pass = 0; pass < 2; pass++) {
		/* Pass 0: the record holding @from; pass 1: records after it. */
		if (pass == 0) {
			rc = orch_writer_row(w, ORCH_REC_FSB_LE, W_ARGS(ag, from));
			if (rc < 0)
				return rc;
			if (rc == 0)
				continue;
			q = w->w_sq.q_stmt[ORCH_REC_FSB_LE];
		} else {
			q = orch_writer_bind(w, ORCH_REC_FSB_GT, W_ARGS(ag, from));
			rc = orch_rec_step(&w->w_sq, ORCH_REC_FSB_GT);
			if (rc != 1)
				return rc;
		}
		do {
			uint32_t a, l;
			const uint64_t *bits = w->w_busy_bits[ag];
			uint32_t e, x;

			fsb_from_row(q, &a, &l);
			e = a + l;
			x = ORCH_MAX(a, from);

			if (x < e && bit_get(bits, x))
				x = bit_find(bits, x, e, false);
			if (x >= end && x < e) {
				sqlite3_reset(q);   /* past the end, and the next records too */
				return 0;
			}
			if (x < e) {
				*s = x;
				/* Look no further than needed: free extents can be huge. */
				*len = bit_find(bits, x, x + ORCH_MIN(e - x, want), true) - x;
				*ra = a;
				*rl = l;
				sqlite3_reset(q);
				return 0;
			}
		} while (pass == 1 && (rc = orch_rec_step(&w->w_sq, ORCH_REC_FSB_GT)) == 1);
		sqlite3_reset(q);
		if (pass == 1 && rc < 0)
			return rc;
	}
	return 0;
}

/* Takes blocks [s, s + min(want, len)) of free record (ra, rl) of AG @ag. */
static int take_run(struct store_writer *w, uint32_t ag, uint32_t want, uint32_t s,
		    uint32_t len, uint32_t ra, uint32_t rl, uint32_t *agp, uint32_t *agbnop,
		    uint32_t *got)
{
	struct orch_store *st = w->w_st;
	uint32_t take = ORCH_MIN(want, len);
	struct w_agdelta *d = orch_alloc_agd(w, ag);
	uint64_t end;
	int error;

	if (!d)
		return -ENOMEM;
	error = fs_del(w, ag, ra, rl);
	if (!error && s > ra)
		error = fs_ins(w, ag, ra, s - ra);
	if (!error && s + take < ra + rl)
		error = fs_ins(w, ag, s + take, ra + rl - (s + take));
	if (error)
		return error;
	d->freeblks -= take;
	d->nfree += (s > ra) + (s + take < ra + rl) - 1;
	*agp = ag;
	*agbnop = s;
	*got = take;
	end = store_gblock(st, ag, s) + take;
	w->w_cursor = end;
	if (end > w->w_hwm)
		w->w_hwm = end;
	held_set(w, store_gblock(st, ag, s), take, false);
	host_space_take(w, take);
	return 0;
}

/*
 * Next-fit over global blocks [@start, @end) only: the first free run not
 * busy that starts there.  *@len 0 if none.
 */
static int find_below(struct store_writer *w, uint64_t start, uint64_t end, uint32_t want,
		      uint32_t *ag, uint32_t *s, uint32_t *len, uint32_t *ra, uint32_t *rl)
{
	struct orch_store *st = w->w_st;

	*len = 0;
	for (uint64_t g = start; g < end;) {
		uint32_t a = (uint32_t)(g >> st->st_ag_shift);
		uint64_t ag_start = (uint64_t)a << st->st_ag_shift;
		uint64_t ag_end = ag_start + store_ag_len(st, a);
		int error;

		if (a >= st->st_ag_count)
			break;
		error = find_run(w, a, (uint32_t)(g - ag_start),
				 (uint32_t)(ORCH_MIN(end, ag_end) - ag_start), want, s, len, ra, rl);
		if (error || *len) {
			*ag = a;
			return error;
		}
		g = ag_start + st->st_ag_blocks;
	}
	return 0;
}

/*
 * Free blocks below the high-water mark are used first, next-fit from the
 * cursor and round to the start of the store: only when none is free and
 * not busy does the allocation go past the mark, growing a sparse blocks
 * file.  A pass that found nothing is not made again until busy blocks
 * are released (every flush, while frees come), so a sequential writer
 * growing the file pays for one failed pass per release at most: two
 * index lookups per AG below the mark when nothing there is free.
 */
int orch_alloc_extent(struct store_writer *w, uint32_t want, uint32_t *agp, uint32_t *agbnop,
	    uint32_t *got)
{
	struct orch_store *st = w->w_st;
	uint64_t at = w->w_hwm;   /* past it every block is free: grow from there */
	uint32_t ag = (uint32_t)(at >> st->st_ag_shift);
	uint32_t from = (uint32_t)(at & (st->st_ag_blocks - 1));
	unsigned int waits = 0;
	bool synced = false;
	int error;

	want = ORCH_MIN(want, st->st_maxext);
	error = host_space_check(w, want);
	if (error)
		return error;
	if (!w->w_reuse_none && w->w_hwm > 0) {
		uint64_t c = w->w_cursor < w->w_hwm ? w->w_cursor : 0;
		uint32_t a = 0, s, len, ra, rl;

		error = find_below(w, c, w->w_hwm, want, &a, &s, &len, &ra, &rl);
		if (!error && !len && c > 0)
			error = find_below(w, 0, c, want, &a, &s, &len, &ra, &rl);
		if (error)
			return error;
		if (len)
			return take_run(w, a, want, s, len, ra, rl, agp, agbnop, got);
		w->w_reuse_none = true;
	}
	if (ag >= st->st_ag_count) {
		ag = 0;
		from = 0;
	}
	for (uint32_t tries = 0; tries <= st->st_ag_count; tries++) {
		uint32_t s, len, ra, rl;

		error = find_run(w, ag, from, UINT32_MAX, want, &s, &len, &ra, &rl);

		if (error)
			return error;
		if (len == 0) {
			ag = ag + 1 == st->st_ag_count ? 0 : ag + 1;
			from = 0;
			if (tries < st->st_ag_count || !w->w_nbusy)
				continue;
			/*
			 * Only busy blocks are left: make their frees durable,
			 * then give reads in progress a moment to end (about
			 * a second in all; a snapshot held longer wins).
			 */
			if (!synced) {
				synced = true;
				error = orch_store_sync(st);
				if (error)
					return error;
			} else if (waits++ >= STORE_ALLOC_WAITS ||
				   !orch_snap_wait_end(st, 10)) {
				continue;
			}
			w->w_rel_durable = UINT64_MAX;
			orch_alloc_busy_release(w);
			tries = 0;
			continue;
		}
		return take_run(w, ag, want, s, len, ra, rl, agp, agbnop, got);
	}
	return -ENOSPC;
}

int orch_alloc_hwm_init(struct store_writer *w)
{
	struct orch_store *st = w->w_st;

	w->w_hwm = 0;
	w->w_reuse_none = false;
	for (uint32_t ag = st->st_ag_count; ag-- > 0;) {
		uint32_t end = store_ag_len(st, ag), a = 0, l = 0;
		int rc = orch_writer_row(w, ORCH_REC_FSB_LE, W_ARGS(ag, end));

		if (rc < 0)
			return rc;
		if (rc) {
			fsb_from_row(w->w_sq.q_stmt[ORCH_REC_FSB_LE], &a, &l);
			orch_rec_reset(&w->w_sq, ORCH_REC_FSB_LE);
		}
		if (rc && a + l == end && a == 0)
			continue;   /* the whole AG is free */
		w->w_hwm = ((uint64_t)ag << st->st_ag_shift) + (rc && a + l == end ? a : end);
		break;
	}
	w->w_cursor = ORCH_MIN(w->w_cursor, w->w_hwm);
	return 0;
}

/* Returns AG blocks [agbno, agbno + len) to free space, merged with their neighbours. */
static int free_run(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	struct w_agdelta *d = orch_alloc_agd(w, ag);
	uint32_t start = agbno, end = agbno + len;
	int merged = 0, rc, error;

	if (!d)
		return -ENOMEM;
	if (agbno > 0) {
		rc = orch_writer_row(w, ORCH_REC_FSB_LE, W_ARGS(ag, agbno - 1));
		if (rc < 0)
			return rc;
		if (rc) {
			uint32_t a, l;

			fsb_from_row(w->w_sq.q_stmt[ORCH_REC_FSB_LE], &a, &l);
			orch_rec_reset(&w->w_sq, ORCH_REC_FSB_LE);
			if (a + l > agbno) {
				ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "store: freeing free blocks "
						   "%u/%u+%u", ag, agbno, len);
				return -ORCH_ECORRUPT;
			}
			if (a + l == agbno) {
				error = fs_del(w, ag, a, l);
				if (error)
					return error;
				start = a;
				merged++;
			}
		}
	}
	rc = orch_writer_row(w, ORCH_REC_FSB_AT, W_ARGS(ag, end));
	if (rc < 0)
		return rc;
	if (rc) {
		uint32_t a, l;

		fsb_from_row(w->w_sq.q_stmt[ORCH_REC_FSB_AT], &a, &l);
		orch_rec_reset(&w->w_sq, ORCH_REC_FSB_AT);
		error = fs_del(w, ag, end, l);
		if (error)
			return error;
		end += l;
		merged++;
	}
	error = fs_ins(w, ag, start, end - start);
	if (error)
		return error;
	if (end == store_ag_len(w->w_st, ag)) {
		/* Free to the end of the AG: the mark may come down to here. */
		uint64_t ag_start = (uint64_t)ag << w->w_st->st_ag_shift;

		if (ag_start + start < w->w_hwm && w->w_hwm <= ag_start + end)
			w->w_hwm = ag_start + start;
	}
	d->freeblks += len;
	d->nfree += 1 - merged;
	/* Their checksums go with them. */
	error = orch_alloc_csum_set(w, ag, agbno, len, NULL);
	if (error)
		return error;
	return busy_add(w, ag, agbno, len);
}

/* --- Bad blocks ---------------------------------------------------------------------- */

/* Gives AG blocks [agbno, agbno + len) to OWN_DEFECTIVE, in records of at most maxext. */
static int retire(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	struct w_agdelta *d = orch_alloc_agd(w, ag);
	int error = 0;

	if (!d)
		return -ENOMEM;
	for (uint32_t b = agbno; !error && b < agbno + len;) {
		uint32_t l = ORCH_MIN(agbno + len - b, w->w_st->st_maxext);
		struct orch_rmap_irec r = { ag, b, ORCH_STORE_OWN_DEFECTIVE, 0, l, 0 };

		orch_rec_rmap_bind(orch_writer_stmt(w, ORCH_REC_RMAP_INS), &r);
		error = orch_rec_exec(&w->w_sq, ORCH_REC_RMAP_INS);
		d->nrmap++;
		b += l;
	}
	return error ? error : orch_alloc_csum_set(w, ag, agbno, len, NULL);
}

/*
 * bad_parts calls @fn for the parts of [agbno, agbno + len) inside bad
 * records (@in) and outside them (!@in), in order.
 */
typedef int (*bad_part_fn)(struct store_writer *w, uint32_t ag, uint32_t agbno,
			   uint32_t len, bool in);

/* The parts of a range inside bad records, merged where they touch. */
struct bad_run {
	uint32_t b, e;
};

static int bad_runs(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len,
		    struct bad_run **out, size_t *nout)
{
	int64_t lo = (int64_t)agbno - w->w_st->st_maxext;
	uint32_t pos = agbno, end = agbno + len;
	struct bad_run *v = NULL;
	size_t n = 0, cap = 0;
	sqlite3_stmt *s;
	int rc, error = 0;

	/*
	 * No fixed bound: reads and scrubs quarantine block by block, so a
	 * long extent may hold as many bad records as blocks.
	 */
	s = orch_writer_bind(w, ORCH_REC_BAD_WIN, W_ARGS(ag, lo, end));
	while ((rc = orch_rec_step(&w->w_sq, ORCH_REC_BAD_WIN)) == 1) {
		struct orch_bad_irec r;
		int64_t b, l;

		(void)orch_rec_bad_from_disk(NULL, s, 0, &r);   /* trusted, as fsb_from_row */
		b = r.agbno;
		l = r.len;

		if (b + l <= pos || l < 1)
			continue;
		if (b < pos && n) {
			error = -ORCH_ECORRUPT;   /* overlapping records */
			break;
		}
		b = ORCH_MAX(b, (int64_t)pos);
		if (n && v[n - 1].e == (uint32_t)b) {
			v[n - 1].e = (uint32_t)ORCH_MIN(b + l, (int64_t)end);
		} else {
			if (n == cap) {
				struct bad_run *nv = realloc(v, (cap = cap ? 2 * cap : 8) * sizeof(*v));

				if (!nv) {
					error = -ENOMEM;
					break;
				}
				v = nv;
			}
			v[n].b = (uint32_t)b;
			v[n++].e = (uint32_t)ORCH_MIN(b + l, (int64_t)end);
		}
		pos = v[n - 1].e;
	}
	if (!error && rc < 0)
		error = rc;
	sqlite3_reset(s);
	if (error) {
		free(v);
		return error;
	}
	*out = v;
	*nout = n;
	return 0;
}

static int bad_parts(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len,
		     bad_part_fn fn)
{
	uint32_t pos = agbno, end = agbno + len;
	struct bad_run *v = NULL;
	size_t n = 0;
	int error = bad_runs(w, ag, agbno, len, &v, &n);

	for (size_t i = 0; !error && i <= n; i++) {
		uint32_t b = i < n ? v[i].b : end;

		if (b > pos)
			error = fn(w, ag, pos, b - pos, false);
		if (!error && i < n)
			error = fn(w, ag, v[i].b, v[i].e - v[i].b, true);
		if (i < n)
			pos = v[i].e;
	}
	free(v);
	return error;
}

static int free_part(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len,
		     bool bad)
{
	return bad ? retire(w, ag, agbno, len) : free_run(w, ag, agbno, len);
}

int orch_alloc_free(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	if (!w->w_nbad)
		return free_run(w, ag, agbno, len);
	return bad_parts(w, ag, agbno, len, free_part);
}

/* Takes the free blocks of [agbno, agbno + len), known good, out of free space. */
static int retire_free(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	struct w_agdelta *d = orch_alloc_agd(w, ag);
	uint32_t pos = agbno, end = agbno + len;
	int rc, error = 0;

	if (!d)
		return -ENOMEM;
	while (!error && pos < end) {
		uint32_t a, l, s, e;

		rc = orch_writer_row(w, ORCH_REC_FSB_LE, W_ARGS(ag, pos));
		if (rc < 0)
			return rc;
		a = l = 0;
		if (rc) {
			fsb_from_row(w->w_sq.q_stmt[ORCH_REC_FSB_LE], &a, &l);
			orch_rec_reset(&w->w_sq, ORCH_REC_FSB_LE);
		}
		if (!rc || a + l <= pos) {
			/* pos is owned; skip to the next free record. */
			rc = orch_writer_row(w, ORCH_REC_FSB_GT, W_ARGS(ag, pos));
			if (rc <= 0)
				return rc;
			fsb_from_row(w->w_sq.q_stmt[ORCH_REC_FSB_GT], &a, &l);
			orch_rec_reset(&w->w_sq, ORCH_REC_FSB_GT);
			if (a >= end)
				return 0;
		}
		s = ORCH_MAX(a, pos);
		e = ORCH_MIN(a + l, end);
		error = fs_del(w, ag, a, l);
		if (!error && a < s)
			error = fs_ins(w, ag, a, s - a);
		if (!error && e < a + l)
			error = fs_ins(w, ag, e, a + l - e);
		if (!error)
			error = retire(w, ag, s, e - s);
		d->freeblks -= e - s;
		d->nfree += (a < s) + (e < a + l) - 1;
		pos = e;
	}
	return error;
}

/* Inserts bad record [agbno, agbno + len) (at most maxext), merged with neighbours that fit. */
static int bad_insert(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	uint32_t m = w->w_st->st_maxext;
	struct orch_bad_irec r;
	int rc;

	/* The record ending at agbno, if the two fit in one (trusted, as fsb_from_row). */
	rc = orch_writer_row(w, ORCH_REC_BAD_LE, W_ARGS(ag, (int64_t)agbno - 1));
	if (rc < 0)
		return rc;
	if (rc) {
		int64_t b, l;

		(void)orch_rec_bad_from_disk(NULL, w->w_sq.q_stmt[ORCH_REC_BAD_LE], 0, &r);
		orch_rec_reset(&w->w_sq, ORCH_REC_BAD_LE);
		b = r.agbno;
		l = r.len;
		if (b + l == agbno && l + len <= m) {
			rc = orch_writer_exec(w, ORCH_REC_BAD_DEL, W_ARGS(ag, b));
			if (rc)
				return rc;
			agbno = (uint32_t)b;
			len += (uint32_t)l;
		}
	}
	/* ... and the one starting at its end. */
	rc = orch_writer_row(w, ORCH_REC_BAD_AT, W_ARGS(ag, (int64_t)agbno + len));
	if (rc < 0)
		return rc;
	if (rc) {
		int64_t l;

		(void)orch_rec_bad_from_disk(NULL, w->w_sq.q_stmt[ORCH_REC_BAD_AT], 0, &r);
		orch_rec_reset(&w->w_sq, ORCH_REC_BAD_AT);
		l = r.len;
		if (l > 0 && l + len <= m) {
			rc = orch_writer_exec(w, ORCH_REC_BAD_DEL,
					     W_ARGS(ag, (int64_t)agbno + len));
			if (rc)
				return rc;
			len += (uint32_t)l;
		}
	}
	r = (struct orch_bad_irec){ ag, agbno, len, (int64_t)time(NULL), STORE_BAD_REPORTED };
	orch_rec_bad_bind(orch_writer_stmt(w, ORCH_REC_BAD_INS), &r);
	return orch_rec_exec(&w->w_sq, ORCH_REC_BAD_INS);
}

static int quarantine_part(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len,
			   bool bad)
{
	int error = 0;

	if (bad)
		return 0;   /* already recorded */
	for (uint32_t b = agbno; !error && b < agbno + len;) {
		uint32_t l = ORCH_MIN(agbno + len - b, w->w_st->st_maxext);

		error = bad_insert(w, ag, b, l);
		b += l;
	}
	return error ? error : retire_free(w, ag, agbno, len);
}

int orch_alloc_quarantine(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len)
{
	int rc = orch_writer_row(w, ORCH_REC_RMAP_FS_ANY,
				 W_ARGS(ag, (int64_t)agbno - w->w_st->st_maxext,
						 agbno + len, agbno));

	if (rc < 0)
		return rc;
	if (rc) {
		orch_rec_reset(&w->w_sq, ORCH_REC_RMAP_FS_ANY);
		return -EINVAL;   /* the superblock is not a data block */
	}
	w->w_nbad++;
	return bad_parts(w, ag, agbno, len, quarantine_part);
}

/* --- Checksums ------------------------------------------------------------------------ */

void orch_alloc_csum_clear(struct store_writer *w)
{
	if (w->w_cs)
		for (size_t i = 0; i < W_CSUM_SLOTS; i++)
			w->w_cs[i].used = false;
	w->w_ncs = 0;
}

int orch_alloc_csum_flush(struct store_writer *w)
{
	for (size_t i = 0; w->w_cs && i < W_CSUM_SLOTS; i++) {
		struct w_cslot *c = &w->w_cs[i];
		int error;

		if (!c->used || !c->dirty)
			continue;
		if (!c->c_rec.valid) {
			error = c->existed ? orch_writer_exec(w, ORCH_REC_CSUM_DEL,
						    W_ARGS(c->c_rec.ag, c->c_rec.grp)) : 0;
		} else {
			orch_rec_csum_bind(orch_writer_stmt(w, ORCH_REC_CSUM_PUT), &c->c_rec);
			error = orch_rec_exec(&w->w_sq, ORCH_REC_CSUM_PUT);
		}
		if (error)
			return error;
		c->existed = c->c_rec.valid != 0;
		c->dirty = false;
	}
	return 0;
}

/* The cached row of group @grp of AG @ag, read from store.db if needed. */
static int csum_slot(struct store_writer *w, uint32_t ag, uint32_t grp, struct w_cslot **out)
{
	uint32_t mask = W_CSUM_SLOTS - 1;
	uint32_t i = (uint32_t)((((uint64_t)ag << 32 | grp) * 0x9e3779b97f4a7c15ull) >> 40) & mask;
	struct w_cslot *c;
	int rc;

	if (!w->w_cs) {
		w->w_cs = calloc(W_CSUM_SLOTS, sizeof(*w->w_cs));
		if (!w->w_cs)
			return -ENOMEM;
	}
	for (;; i = (i + 1) & mask) {
		c = &w->w_cs[i];
		if (!c->used)
			break;
		if (c->c_rec.ag == ag && c->c_rec.grp == grp) {
			*out = c;
			return 0;
		}
	}
	if (w->w_ncs >= W_CSUM_SLOTS / 2) {
		/* Full enough: write the changes, start over. */
		int error = orch_alloc_csum_flush(w);

		if (error)
			return error;
		orch_alloc_csum_clear(w);
		return csum_slot(w, ag, grp, out);
	}
	memset(c, 0, sizeof(*c));
	rc = orch_writer_row(w, ORCH_REC_CSUM_GET, W_ARGS(ag, grp));
	if (rc < 0)
		return rc;
	if (rc) {
		/* Trusted, as fsb_from_row; a row without its sums decodes with
		 * no valid bit and is rewritten whole. */
		(void)orch_rec_csum_from_disk(NULL, w->w_sq.q_stmt[ORCH_REC_CSUM_GET], 0,
					      &c->c_rec);
		orch_rec_reset(&w->w_sq, ORCH_REC_CSUM_GET);
		c->existed = true;
	}
	c->c_rec.ag = ag;
	c->c_rec.grp = grp;
	c->used = true;
	w->w_ncs++;
	*out = c;
	return 0;
}

/* Sets (or with @sums NULL, clears) the checksums of @n blocks from @agbno. */
int orch_alloc_csum_set(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t n,
	       const uint32_t *sums)
{
	uint32_t b = agbno, end = agbno + n;

	while (b < end) {
		uint32_t grp = b / ORCH_REC_CSUM_GROUP;
		uint32_t gend = ORCH_MIN(end, (grp + 1) * ORCH_REC_CSUM_GROUP);
		struct w_cslot *c;
		int error = csum_slot(w, ag, grp, &c);

		if (error)
			return error;
		for (; b < gend; b++) {
			uint32_t i = b % ORCH_REC_CSUM_GROUP;

			if (sums) {
				c->c_rec.sums[i] = sums[b - agbno];
				c->c_rec.valid |= 1ull << i;
			} else {
				c->c_rec.sums[i] = 0;
				c->c_rec.valid &= ~(1ull << i);
			}
		}
		c->dirty = true;
	}
	return 0;
}

int orch_alloc_csum_get(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t *sum,
	       bool *valid)
{
	uint32_t i = agbno % ORCH_REC_CSUM_GROUP;
	struct w_cslot *c;
	int error = csum_slot(w, ag, agbno / ORCH_REC_CSUM_GROUP, &c);

	*valid = false;
	if (error)
		return error;
	if (c->c_rec.valid >> i & 1) {
		*sum = c->c_rec.sums[i];
		*valid = true;
	}
	return 0;
}
