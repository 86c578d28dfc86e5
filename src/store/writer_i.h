/*
 * The writer thread's state, shared by writer.c (operations, transactions,
 * work items), alloc.c (free space, checksums and busy extents) and refc.c
 * (reference counts).  Only the writer thread touches it, except the queue
 * (w_lock).  Names: writer.c exports orch_writer_*, alloc.c orch_alloc_*,
 * refc.c orch_refc_*; all of them writer thread only.
 */
#ifndef ORCH_STORE_WRITER_I_H
#define ORCH_STORE_WRITER_I_H

#include "store/store_i.h"

/* Blocks freed by commit @seq (0 while its transaction is open). */
struct w_busy {
	uint64_t g;
	uint32_t len;
	uint64_t seq;
};

/*
 * A csum row cached by the writer: the rows a batch touches are read once
 * and written once, at commit, however many operations change them.
 */
struct w_cslot {
	struct orch_csum_irec c_rec;  /* valid == 0: the row goes */
	bool used;
	bool existed;                 /* the row is in store.db */
	bool dirty;                   /* changed since it was read or written */
};

#define W_CSUM_SLOTS 1024u        /* a power of two */

/* Counter changes of one AG made by the operation being applied. */
struct w_agdelta {
	uint32_t ag;
	int64_t freeblks, nfree, nrmap, nrefc;
};

struct store_writer {
	struct orch_store *w_st;
	sqlite3 *w_db;
	struct orch_rec_sq w_sq;      /* every statement, prepared at start */
	pthread_t w_thread;
	bool w_started;

	/* The queue: by w_lock. */
	pthread_mutex_t w_lock;
	pthread_cond_t w_cv;
	struct orch_store_op *w_head, **w_tail;
	bool w_stop;
	bool w_idle;                  /* waiting on w_cv, not yet signalled */

	/* Allocation. */
	uint64_t w_cursor;            /* next-fit: global block to try next */
	/*
	 * High-water mark: every block at or past it is free (and, in a
	 * sparse blocks file, a hole or punched), so allocating there grows
	 * the host file.  The allocator takes blocks below it first
	 * (orch_alloc_extent); a hint, raised by allocations and lowered
	 * when a free reaches it, never wrong for correctness.
	 */
	uint64_t w_hwm;
	bool w_reuse_none;            /* a pass below w_hwm found nothing since the
					 last release of busy blocks */
	uint64_t **w_busy_bits;       /* per AG, a bit per busy block (or NULL) */
	uint32_t *w_busy_cnt;         /* per AG, busy blocks */
	struct w_busy *w_busy;        /* committed frees, oldest first (a ring) */
	size_t w_bhead, w_nbusy, w_capbusy;
	struct w_busy *w_pend;        /* frees of the open transaction */
	size_t w_npend, w_cappend;
	uint64_t w_rel_durable, w_rel_oldest;  /* last release pass saw these */
	/*
	 * Free blocks, no longer busy, whose host space was not given back
	 * yet (extents too short to punch at once): per AG a bit per block
	 * (or NULL), punched in batches when the writer is idle, and
	 * cleared when the allocator hands a block out again.
	 */
	uint64_t **w_held_bits;
	uint32_t *w_held_cnt;
	uint64_t w_nheld;
	/*
	 * Records in refc and bad, or more: raised before a transaction adds
	 * one and lowered only by reopening, so 0 (the fast path: nothing is
	 * shared, nothing is bad) is never wrong.
	 */
	int64_t w_nrefc, w_nbad;

	/* The operation being applied, and the transaction so far. */
	struct w_agdelta *w_agd, *w_tagd;
	size_t w_nagd, w_capagd, w_ntagd, w_captagd;

	/* The transaction being built. */
	int64_t w_next_nid, w_next_work;
	bool w_meta_dirty;
	int64_t w_dobjects, w_dfree;  /* of the ops applied so far */
	uint64_t w_txn_ops, w_txn_bytes, w_txn_created, w_txn_deleted;

	struct w_cslot *w_cs;         /* W_CSUM_SLOTS, open addressing */
	size_t w_ncs;

	uint8_t *w_buf;               /* data of one write, block aligned */
	size_t w_bufcap;

	bool w_wal_prefetched;        /* since the WAL was last emptied */
	/* Host space (space_check): bytes available when last looked at, less
	 * what was allocated since, and when (ms; 0: look again). */
	uint64_t w_host_avail, w_host_ms;
	bool w_no_punch;              /* the host file system cannot punch holes */
};

/* Statement @id, reset, for a record's bind (orch_rec_*_bind). */
sqlite3_stmt *orch_writer_stmt(struct store_writer *w, enum orch_rec_stmt id);
/* Binds @n integers to statement @id (after a reset). */
sqlite3_stmt *orch_writer_bind(struct store_writer *w, enum orch_rec_stmt id, const int64_t *v,
			       int n);
/* Binds, steps once: 1 = a row (read it, then sqlite3_reset), 0 = done, <0. */
int orch_writer_row(struct store_writer *w, enum orch_rec_stmt id, const int64_t *v, int n);
/* Binds and runs to completion: 0 or -errno. */
int orch_writer_exec(struct store_writer *w, enum orch_rec_stmt id, const int64_t *v, int n);

#define W_ARGS(...) (const int64_t[]){ __VA_ARGS__ }, \
	(int)(sizeof((const int64_t[]){ __VA_ARGS__ }) / sizeof(int64_t))

/* alloc.c */
struct w_agdelta *orch_alloc_agd(struct store_writer *w, uint32_t ag);
int orch_alloc_extent(struct store_writer *w, uint32_t want, uint32_t *ag, uint32_t *agbno,
	    uint32_t *got);
/* Frees blocks nobody owns any more (bad ones are retired instead). */
int orch_alloc_free(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len);
/* Records AG blocks [agbno, agbno + len) as bad, retiring the free ones. */
int orch_alloc_quarantine(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len);

/* refc.c: an owner lets go of blocks (freed when it was the last one)... */
int orch_refc_release(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len);
/* ...or takes one more reference to blocks already owned. */
int orch_refc_share(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t len);
int orch_alloc_csum_set(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t n,
	       const uint32_t *sums);
int orch_alloc_csum_get(struct store_writer *w, uint32_t ag, uint32_t agbno, uint32_t *sum,
	       bool *valid);
/* Writes the changed cached csum rows into the transaction. */
int orch_alloc_csum_flush(struct store_writer *w);
/* Forgets the cache (after a rollback: it may hold undone changes). */
void orch_alloc_csum_clear(struct store_writer *w);
int orch_alloc_busy_init(struct store_writer *w);
/* Undoes the frees of the open transaction made after @mark (= w_npend then). */
void orch_alloc_busy_undo(struct store_writer *w, size_t mark);
/* Makes room to move the open transaction's frees to the busy list. */
int orch_alloc_busy_reserve(struct store_writer *w);
/* Moves them there as commit @seq (after orch_alloc_busy_reserve). */
void orch_alloc_busy_commit(struct store_writer *w, uint64_t seq);
/* Returns busy blocks that no snapshot can see and that are durable. */
void orch_alloc_busy_release(struct store_writer *w);
void orch_alloc_busy_free(struct store_writer *w);
/* Finds the high-water mark in store.db (at start, after work_resume). */
int orch_alloc_hwm_init(struct store_writer *w);
/*
 * Gives the host the space of up to @max runs of held blocks (when the
 * writer is idle, and all of them at close): true if some are left.
 */
bool orch_alloc_punch_held(struct store_writer *w, size_t max);

#endif
