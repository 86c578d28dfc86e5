/*
 * Inside the extent store: the on-disk schema, the store object, the read
 * connection pool and the helpers the store's files share.  Nothing outside
 * src/store includes this.  The format is described for operators in
 * docs/SPEC-store.md; keep the two in step.
 */
#ifndef ORCH_STORE_STORE_I_H
#define ORCH_STORE_STORE_I_H

#include <pthread.h>
#include <semaphore.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/fault.h"
#include "store/store.h"
#include "store/store_ondisk.h"

#define STORE_FORMAT 1
#define STORE_DB_NAME "store.db"
#define STORE_BLOCKS_NAME "blocks"
#define STORE_LOCK_NAME "store.lock"   /* flock()ed by whoever has the store */
#define STORE_SB_MAGIC "ORCHSTOR"

#define STORE_DEFAULT_SIZE (64ull << 30)
#define STORE_DEFAULT_AG_BLOCKS (1u << 20)
#define STORE_DEFAULT_MAXEXT 4096u
#define STORE_MIN_AG_BLOCKS 64u
#define STORE_MAX_AG_BLOCKS (1u << 30)

/* WAL pages (4 KiB) after which a flush also checkpoints (store_flush). */
#define STORE_CKPT_PAGES 4096
/* WAL bytes kept after a restart: the writer's first commit in a restarted
 * WAL cuts a file grown past this back to it (journal_size_limit). */
#define STORE_WAL_LIMIT 67108864  /* 64 MiB; a literal: it is pasted into a PRAGMA */

/* Extents a chunk of a long truncate, punch or delete frees per transaction. */
#define STORE_WORK_CHUNK 256u

/* The automatic reserve (orch_store_set_reserve): 1/16 of the host file
 * system, within these bounds. */
#define STORE_RESERVE_MIN (4ull << 20)
#define STORE_RESERVE_MAX (256ull << 20)

/* Waits of 10 ms for reads to end before a write gets ENOSPC. */
#define STORE_ALLOC_WAITS 100

/* bad.source: how the blocks were found bad. */
#define STORE_BAD_REPORTED 1      /* a checksum mismatch or I/O error, or an operator */

/* Work item types. */
enum store_work_type {
	STORE_WORK_TRUNCATE = 1,  /* nid, a = new size in bytes */
	STORE_WORK_PUNCH = 2,     /* nid, a = first block, b = end block */
	STORE_WORK_DELETE = 3,    /* nid */
};

/* A connection for reads: pooled, one thread at a time. */
struct store_conn {
	sqlite3 *c_db;
	struct orch_rec_sq c_sq;  /* its statements */
	uint64_t c_epoch;         /* commit count when its snapshot began */
	bool c_active;            /* a snapshot is registered */
	struct store_conn *c_next;
	struct store_conn *c_reg_next;  /* registry of active snapshots */
	/* Buffers of the read path, kept between reads (see snap_read). */
	struct orch_bmap_irec *c_ext;
	size_t c_extcap;
	uint8_t *c_buf;           /* blocks of an unaligned read */
	size_t c_bufcap;
	uint32_t *c_sums;
	bool *c_valid;
	size_t c_sumcap;
};

struct store_writer;

/*
 * A synchronous caller waiting for its operation (orch_store_write and
 * the other blocking calls).  The writer wakes the callers of a batch as
 * a chain: it posts the first, and each caller, once awake, posts the
 * next before it returns (store_waiter_wait).  Waking them all itself,
 * one sem_post each, cost the writer a futex call per operation and,
 * as each woken caller preempted it, a context switch: with 64 callers
 * a tenth of its time, on the one thread every operation waits for.  A
 * caller slow to get a CPU delays the ones after it in the chain.
 */
struct store_waiter {
	sem_t sw_sem;
	struct store_waiter *sw_next;  /* the caller to wake next, or NULL */
};

/* Wakes @sw, which passes the wake-up along its chain. */
void orch_store_waiter_wake(struct store_waiter *sw);

struct orch_store {
	char *st_dir;
	char *st_blocks_path;
	int st_blocks_fd;
	int st_lock_fd;               /* flock()ed: one opener at a time */
	bool st_sparse;               /* blocks is a regular file */
	uint64_t st_host_fs;          /* ...on this file system of this host (orch_store_space) */

	/* Geometry, fixed at mkfs. */
	uint32_t st_ag_blocks, st_ag_shift, st_ag_count, st_maxext;
	uint64_t st_blocks;           /* total, including the static area */

	/* Read side. */
	pthread_mutex_t st_pool_lock;
	struct store_conn *st_pool;   /* idle read connections */
	struct store_conn *st_active; /* snapshots in progress */
	pthread_cond_t st_snap_cv;    /* broadcast when a snapshot ends */

	/* Commit and durability sequence numbers (by st_seq_lock). */
	pthread_mutex_t st_seq_lock;
	/* Write transactions committed; 1 at open stands for the state found
	 * on disk, which only a flush makes known to be durable. */
	uint64_t st_committed;
	uint64_t st_durable;          /* ... of which known to be on disk */
	uint64_t st_sync_started, st_sync_done;  /* flush generations */
	bool st_syncing;
	/* The flush in progress has read st_committed: it makes up to
	 * st_sync_upto durable.  Before that, it covers every commit made. */
	bool st_sync_captured;
	uint64_t st_sync_upto;
	int st_sync_err;              /* sticky: a flush failed (the store failed) */
	int64_t st_failed_s;          /* ...at this wall time */
	atomic_int st_failed;         /* st_sync_err, read without the lock */
	/* Callers of orch_store_sync waiting for flush generation g sleep on
	 * st_sync_cv[g % 2], so the end of one flush wakes only its own. */
	pthread_cond_t st_sync_cv[2];
	/* Held by the writer around COMMIT and by a flush from its blocks
	 * fdatasync to the end of its WAL sync and checkpoint. */
	pthread_mutex_t st_commit_lock;
	/* st_data_writes when the last commit was made (by st_commit_lock):
	 * every block a committed mapping points to was written by then. */
	uint64_t st_commit_writes;
	sqlite3 *st_sync_db;          /* the flush's connection (its WAL handle) */

	struct store_writer *st_writer;
	orch_store_bad_fn st_bad_fn;  /* orch_store_set_bad_hook */
	void *st_bad_arg;
	uint64_t st_bad_recent[16];   /* blocks found bad lately, + 1 (st_seq_lock) */
	unsigned int st_bad_next;
	atomic_int st_wal_pages;      /* frames in the WAL since the last checkpoint */
	/* STORE_CKPT_PAGES, set at open; a unit test lowers it before its
	 * first operation to checkpoint at every flush. */
	int st_ckpt_pages;
	/* Host bytes the blocks file leaves free (orch_store_set_reserve);
	 * 0 when it is a device. */
	atomic_uint_fast64_t st_reserve;
	atomic_uint_fast64_t st_bytes_read;  /* returned by reads */
	atomic_long st_queued;        /* mutations submitted and not completed */
	atomic_uint_fast64_t st_data_writes;  /* pwrites to the blocks file */

	/* Statistics: the writer's and syncs' under st_seq_lock, reads atomic. */
	struct orch_store_stats st_stats;
	uint64_t st_objects;          /* by the writer thread */
	uint64_t st_freeblks;         /* by the writer thread */
};

/* Global block number <-> (ag, agbno). */
static inline uint64_t store_gblock(const struct orch_store *st, uint32_t ag,
				    uint32_t agbno)
{
	return ((uint64_t)ag << st->st_ag_shift) | agbno;
}

/* Blocks in AG @ag (the last one may be short). */
static inline uint32_t store_ag_len(const struct orch_store *st, uint32_t ag)
{
	uint64_t start = (uint64_t)ag << st->st_ag_shift;
	uint64_t left = st->st_blocks - start;

	return left < st->st_ag_blocks ? (uint32_t)left : st->st_ag_blocks;
}

/* The superblock, block 0 of the blocks file (docs/SPEC-store.md). */
struct store_sb {
	uint32_t format, block_size, ag_blocks, maxext;
	uint64_t blocks;
	uint8_t uuid[16];
};

/*
 * Decodes and validates a superblock from one 4096-byte block: 0,
 * -ENOENT (no magic: not a store), -EUCLEAN (bad CRC or impossible
 * geometry) or -EPROTONOSUPPORT (another format version; sb->format says
 * which).
 */
int orch_store_sb_decode(const uint8_t *blk, struct store_sb *sb);

/*
 * Takes the store lock of @dir (one opener at a time: a server, or an
 * offline tool): *@fdp, to close to let go; -EBUSY if someone holds it.
 */
int orch_store_lock(const char *dir, int *fdp);

/* Opens a connection to store.db with the store's pragmas. */
int orch_store_db_open(const struct orch_store *st, bool readonly, sqlite3 **out);

/*
 * Takes a read connection and begins a snapshot on it, registered so that
 * no block it can see is reused until orch_snap_put().  For reads, the
 * owners query and the checker.
 */
int orch_snap_get(struct orch_store *st, struct store_conn **out);
void orch_snap_put(struct orch_store *st, struct store_conn *c);
/* Closes the idle read connections (at close, none active). */
void orch_snap_pool_free(struct orch_store *st);

/* Oldest snapshot still active, as a commit count (UINT64_MAX if none). */
uint64_t orch_snap_oldest(struct orch_store *st);
/* Waits up to @ms for a snapshot to end; false if none is active. */
bool orch_snap_wait_end(struct orch_store *st, unsigned int ms);

/*
 * Counts and logs (rate-limited) a block of object @h that failed its
 * checksum: object block @objblock, global block @gblock.
 */
void orch_snap_report_bad(struct orch_store *st, uint64_t h, uint64_t objblock,
		      uint64_t gblock);

/* --- bdev.c: block I/O and kill points ------------------------------------------ */

/* pread/pwrite of whole blocks of the blocks file, with retries: 0 or -errno.
 * A read past the end of a short sparse file gives zeros.  Any thread. */
int orch_bdev_read(struct orch_store *st, uint64_t gblock, uint32_t n, void *buf);
int orch_bdev_write(struct orch_store *st, uint64_t gblock, uint32_t n, const void *buf);
/* Gives the host the space of @n blocks from @gblock (a hole, not synced):
 * 0 or -errno (-EOPNOTSUPP: the file system cannot). */
int orch_bdev_punch(struct orch_store *st, uint64_t gblock, uint32_t n);
/* fdatasync of the blocks file: 0 or -errno. */
int orch_bdev_sync(struct orch_store *st);

/*
 * Crash-test hook (common/fault.def): ORCH_STORE_KILL=<point>[:<n>] makes
 * the process SIGKILL itself the n-th time (default 1st) it passes kill
 * point @point.  Read by orch_bdev_killpoint_init (at open); one branch
 * when unset.
 */
void orch_bdev_killpoint_init(void);
void orch_bdev_killpoint(enum orch_killpoint point);
/* Test hook (common/fault.def): ORCH_STORE_EIO, read at open. */
void orch_bdev_eio_init(void);

/*
 * The checksums of every block of write @op, if its submitter computes
 * them (orch_store_write does, for large whole-block writes, while the
 * writer allocates and writes the data): waits until they are ready.
 * NULL if the writer must compute them.  Writer thread.
 */
const uint32_t *orch_store_op_sums(struct orch_store_op *op);

/* orch_store_submit, keeping @op's o_sums and o_sums_wait. */
void orch_store_submit_(struct orch_store *st, struct orch_store_op *op);

/* Writer thread (writer.c). */
int orch_writer_start(struct orch_store *st);
void orch_writer_stop(struct orch_store *st);

#endif
