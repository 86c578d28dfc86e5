/*
 * The data store of one server: a flat space of data objects, each a sparse
 * byte array named by a 64-bit handle (the file handle whose strips this
 * server holds).  No network code: the server, unit tests, fuzzers and
 * offline tools link this directly.
 *
 * It is an XFS-style extent store (docs/SPEC-store.md): one blocks file (or
 * block device) of 4 KiB blocks in allocation groups, and indexes in a
 * SQLite database, data_dir/store.db: the extent map (bmap), the reverse map
 * (rmap), free space by block and by size, refcounts, per-block crc32c,
 * bad blocks, work items and per-AG counters, all updated in one
 * transaction per operation, so the owner of every block is always known.
 * Every write is redirect-on-write: new data goes to free blocks and the
 * mapping switches in the commit, so a crash leaves the old or the new
 * state, never a mix.  Reads verify every block's checksum.
 *
 * Objects come into being on their first write (or a truncate to a non-zero
 * size) and go away on delete.  An object has a size: the end of its last
 * byte written, or the size last set by truncate, whichever came later.
 * Bytes never written, punched, or exposed by extending truncate read as
 * zeros.  The authoritative file size lives in the inode (meta), not here:
 * the store's size only bounds what a read returns.
 *
 * Threads: every function may be called from any thread once the store is
 * open.  Mutations are queued to the store's one writer thread, which
 * applies many per transaction when they queue up; the synchronous calls
 * below wait for their operation, orch_store_submit() does not.  Reads run
 * on the calling thread, on a read snapshot of their own.
 *
 * Durability: a mutation that completed (returned, or called its done
 * callback) with 0 is visible at once to later calls and survives a crash of
 * the process (it is committed to the WAL in the kernel's page cache).  It
 * survives power loss only after a later orch_store_sync() returns 0, which
 * flushes the data blocks first and then the store's WAL.  It does not
 * cover data_dir/meta.db: the namespace syncs itself.  A power loss may
 * lose unsynced operations; a read of a block whose data was lost returns
 * -EIO or the old data, never wrong bytes.
 *
 * Errors: 0 or -errno.  Errors from the OS are passed through as -errno
 * (-ENOSPC, -EDQUOT, -EIO, -EMFILE, ...); the ones a function can return
 * beyond those are listed with it.  A failed mutation changed nothing.
 * Nothing here asserts on what it finds on disk.
 */
#ifndef ORCH_STORE_STORE_H
#define ORCH_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* No byte of an object lies at or past this offset (1 PiB). */
#define ORCH_STORE_MAX_SIZE (1ull << 50)
/* The allocation and checksum unit. */
#define ORCH_STORE_BLOCK 4096u
/* Largest write or read in one call (a frame's payload fits easily). */
#define ORCH_STORE_MAX_IO (16u << 20)

struct orch_store;

/* --- Lifecycle ------------------------------------------------------------- */

/* Layout chosen at mkfs; 0 in a field means its default. */
struct orch_store_geom {
	uint64_t size;          /* bytes of the blocks file (default 64 GiB);
				   a block device's own size when it is one */
	uint32_t ag_blocks;     /* blocks per allocation group: a power of two,
				   64 .. 2^30 (default 2^20 = 4 GiB) */
	uint32_t maxext;        /* longest mapped extent in blocks,
				   1 .. ag_blocks (default 4096 = 16 MiB) */
	const char *device;     /* NULL: data_dir/blocks, a sparse file; else
				   a block device or file path used as is */
};

/*
 * Initialises the store in @data_dir (created if missing; its parent must
 * exist): lays out the blocks file in allocation groups and creates
 * store.db.  -EEXIST if a store is there already, unless @force, which
 * replaces it.  -EINVAL for a bad geometry (too small for one AG of 64
 * blocks, ag_blocks not a power of two, maxext out of range).  -EBUSY if
 * the store is open (by this or another process).  Leaves data_dir/meta.db
 * and any other file alone.  Durable when it returns 0.
 */
int orch_store_mkfs(const char *data_dir, const struct orch_store_geom *g,
		    bool force);

/*
 * 0 if no process (a server, or mkfs) has the store in @data_dir open,
 * -EBUSY if one has; also 0 if there is no store.  Any thread.
 */
int orch_store_check_unused(const char *data_dir);

/*
 * Opens the store in @data_dir, exclusively: -EBUSY if it is open already
 * (by this or another process).  -ENOENT if orch_store_mkfs did not make it
 * ("not initialised, run orchard mkfs" is logged), -EPROTONOSUPPORT for a
 * store format version this build does not know (logged with both
 * versions), -EUCLEAN if its superblock or geometry is damaged.  Finishes
 * the work items a crash interrupted and syncs before it returns, so blocks
 * freed before the crash can be reused safely.  Starts the writer thread.
 */
int orch_store_open(const char *data_dir, struct orch_store **out);

/*
 * Waits for queued mutations, stops the writer thread, and closes @st
 * (NULL is allowed).  Does not sync: call orch_store_sync() first if
 * durability is wanted.  No other thread may use @st any more.
 */
void orch_store_close(struct orch_store *st);

/* --- Mutations -------------------------------------------------------------- */

enum orch_store_op_type {
	ORCH_STORE_OP_WRITE,    /* @buf, @len bytes at @off */
	ORCH_STORE_OP_TRUNCATE, /* size becomes @off (@len ORCH_STORE_TRUNC_SHRINK:
				   only if it is larger) */
	ORCH_STORE_OP_PUNCH,    /* [@off, @off + @len) reads as zeros */
	ORCH_STORE_OP_DELETE,
	ORCH_STORE_OP_CLONE,    /* share @len bytes of @handle2 at @off2 at @off */
	ORCH_STORE_OP_DEDUPE,   /* clone, only where the bytes are equal */
	ORCH_STORE_OP_QUARANTINE, /* global blocks [@off, @off + @len) are bad */
};

/*
 * One queued mutation.  The caller fills the public fields, keeps the op
 * and @buf valid until @done runs, and does not touch them meanwhile.
 */
struct orch_store_op {
	enum orch_store_op_type type;
	uint64_t handle;
	uint64_t off;
	uint64_t len;
	const void *buf;
	uint64_t handle2, off2; /* the source of a clone or dedupe */
	uint64_t result;        /* set before @done: bytes a dedupe shared */
	/* Runs once on the writer thread, after the commit; keep it short. */
	void (*done)(struct orch_store_op *op);
	void *arg;              /* the caller's */
	int status;             /* set before @done: 0 or -errno */
	/* Private to the store. */
	struct orch_store_op *o_next;
	uint64_t o_done, o_piece;  /* bytes of a clone applied, in this transaction */
	/* A write's block checksums, computed by orch_store_write meanwhile
	 * (NULL: the writer computes them); see orch_store_op_sums(). */
	const uint32_t *o_sums;
	struct store_sums *o_sums_wait;
	/* A synchronous caller sleeps on it (then @done is not called). */
	struct store_waiter *o_waiter;
};

/*
 * Queues @op; its @done callback reports the result.  Operations are applied
 * in the order they were submitted.  Errors are the ones of the synchronous
 * call of the same type.
 */
void orch_store_submit(struct orch_store *st, struct orch_store_op *op);

/*
 * Writes @len bytes of @buf at byte @off of object @h, creating the object
 * if it does not exist, and extending its size if the write ends past it.
 * @len 0 does nothing (and creates nothing).  -EFBIG if @off + @len >
 * ORCH_STORE_MAX_SIZE, -EINVAL if @len > ORCH_STORE_MAX_IO, -ENOSPC when
 * no free blocks are left (blocks freed by overwrites count as free once a
 * flush made the free durable and no snapshot can still read them: the
 * writer flushes and waits up to about a second for reads to end before it
 * gives up), -EIO if an old block the write must merge with fails its
 * checksum.
 */
int orch_store_write(struct orch_store *st, uint64_t h, uint64_t off,
		     const void *buf, size_t len);

/*
 * Sets object @h's size to @size: shrinking frees everything past it,
 * growing adds a hole that reads as zeros.  An absent object is created if
 * @size > 0, and left absent if @size is 0.  -EFBIG if
 * @size > ORCH_STORE_MAX_SIZE.
 */
int orch_store_truncate(struct orch_store *st, uint64_t h, uint64_t size);

/*
 * Cuts object @h at @size if it is larger: frees everything past @size,
 * as a shrinking truncate does; an object that is not larger, or absent,
 * is left alone (not grown, not created).  Ordered after the writes queued
 * before it, like a truncate; with nothing queued and nothing to cut it
 * does not wait for the writer.
 */
#define ORCH_STORE_TRUNC_SHRINK 1u
int orch_store_cut(struct orch_store *st, uint64_t h, uint64_t size);

/*
 * True if object @h surely holds nothing past @size (absent, or not
 * larger) and no queued mutation could put anything there; false if it
 * may (what orch_store_cut would then cut, or wait for).
 */
bool orch_store_nothing_past(struct orch_store *st, uint64_t h, uint64_t size);

/*
 * The size of object @h now (a fresh snapshot): 0 with *@size, or -ENOENT
 * if it does not exist.
 */
int orch_store_object_size(struct orch_store *st, uint64_t h, uint64_t *size);

/*
 * The blocks object @h holds now (a fresh snapshot), shared ones (clones)
 * included, as XFS counts them: the obj record's nblocks, kept by every
 * change of the extent map, so one index probe.  0 if there is no object.
 */
int orch_store_object_blocks(struct orch_store *st, uint64_t h, uint64_t *nblocks);

/*
 * Frees bytes [@off, @off + @len) of object @h: they read as zeros after,
 * and the object's size does not change (a range past the end is ignored).
 * Nothing to do, and 0, if the object does not exist.
 */
int orch_store_punch(struct orch_store *st, uint64_t h, uint64_t off,
		     uint64_t len);

/*
 * Deletes object @h and frees its blocks.  Returns 0 if it does not exist:
 * intent records replay deletes after a crash, so this is idempotent.
 */
int orch_store_delete(struct orch_store *st, uint64_t h);

/*
 * orch_store_delete() of each of @handles[0..@n), queued together so that
 * the writer applies them in one transaction (or a few), not one commit
 * each.  Returns 0, or the first error; the others are still attempted.
 */
int orch_store_delete_many(struct orch_store *st, const uint64_t *handles, size_t n);

/*
 * Makes bytes [@dst_off, @dst_off + @len) of object @dst share the blocks
 * of bytes [@src_off, @src_off + @len) of object @src (reflink): no data is
 * copied, and a later write to either object changes only that object
 * (copy-on-write).  Both offsets and @len must be multiples of
 * ORCH_STORE_BLOCK, except that @len may end at the source's size (then the
 * last partial block is shared whole).  @dst is created if absent and its
 * size grows to cover the range; what @dst held there before is released.
 * Holes of the source become holes of the destination.  -EINVAL for
 * unaligned ranges, the same object with overlapping ranges, or @len past
 * ORCH_STORE_MAX_SIZE; -ENOSPC if the indexes' reserve is short.  A clone
 * of an absent source, or past its end, clones a hole.
 */
int orch_store_clone(struct orch_store *st, uint64_t src, uint64_t src_off,
		     uint64_t dst, uint64_t dst_off, uint64_t len);

/*
 * Dedupe (FIDEDUPERANGE): compares bytes [@src_off, +@len) of @src with
 * [@dst_off, +@len) of @dst, and only if they are identical makes @dst
 * share @src's blocks and releases @dst's old ones, as one transaction that
 * sees no concurrent change in between.  Alignment as orch_store_clone, and
 * @len at most ORCH_STORE_MAX_IO.  Holes, absent objects and bytes past an
 * object's end compare as zeros; only blocks inside both objects are
 * shared.  *@deduped is the number of bytes now shared (@len if all), or 0
 * with -EBADE when the contents differ (nothing changed).  -EIO if a block
 * fails its checksum.
 */
int orch_store_dedupe(struct orch_store *st, uint64_t src, uint64_t src_off,
		      uint64_t dst, uint64_t dst_off, uint64_t len,
		      uint64_t *deduped);

/*
 * Quarantines global blocks [@gblock, @gblock + @n): they are recorded in
 * the bad-block index and never allocated again.  Free blocks are retired
 * at once (owner ORCH_STORE_OWN_DEFECTIVE); blocks still mapped keep their
 * owners (reads of them fail their checksum, or not, as before) and are
 * retired when their last owner lets go of them.  Idempotent.  The store
 * calls it itself for every block a read finds bad.  -EINVAL if the range
 * is outside the data blocks.
 */
int orch_store_quarantine(struct orch_store *st, uint64_t gblock, uint64_t n);

/*
 * Called once for every block a read finds bad (after it is logged and
 * counted, before the quarantine): object @h, byte offset @off in it,
 * global block @gblock.  Runs on the reading thread: keep it short, do not
 * call back into the store.  Set it once, before the store is shared.
 */
typedef void (*orch_store_bad_fn)(void *arg, uint64_t h, uint64_t off,
				  uint64_t gblock);
void orch_store_set_bad_hook(struct orch_store *st, orch_store_bad_fn fn,
			     void *arg);

/*
 * Host space kept free for the databases (bytes), when the blocks file is
 * a regular file: a sparse file takes space as its holes are written, and
 * meta.db and store.db, on the same file system, must always be able to
 * commit an unlink and the frees it causes.  A write that would leave
 * less than this free gets -ENOSPC.  ORCH_STORE_RESERVE_AUTO: 1/16 of
 * the file system, at least 4 MiB and at most 256 MiB (the default);
 * 0: none.  Any thread.
 */
#define ORCH_STORE_RESERVE_AUTO UINT64_MAX
void orch_store_set_reserve(struct orch_store *st, uint64_t bytes);

/* --- Reads ----------------------------------------------------------------- */

/*
 * Reads up to @len bytes (at most ORCH_STORE_MAX_IO) at byte @off of object
 * @h into @buf.  *@got is the number of bytes before the object's end: 0 if
 * the object does not exist or @off is at or past its size, less than @len
 * if the object ends inside the range.  Holes inside the object read as
 * zeros.  Bytes of @buf past *@got are left unchanged.  -EIO if a block
 * fails its checksum (logged with the object, offset and physical block);
 * then *@got is 0 and @buf's contents are undefined.
 */
int orch_store_read(struct orch_store *st, uint64_t h, uint64_t off, void *buf,
		    size_t len, size_t *got);

/*
 * A read snapshot held open: every read through it sees the store as it
 * was when it began, and the blocks it can see are not reused until it
 * ends.  For long reads (copy, scrub) and tests.  At most a handful per
 * thread; end each one.
 */
struct orch_store_snap;
int orch_store_snap_begin(struct orch_store *st, struct orch_store_snap **out);
int orch_store_snap_read(struct orch_store_snap *sn, uint64_t h, uint64_t off,
			 void *buf, size_t len, size_t *got);
void orch_store_snap_end(struct orch_store_snap *sn);

/* --- Durability ------------------------------------------------------------ */

/*
 * Makes every mutation that completed before this call durable against
 * power loss: fdatasync of the blocks file, then a sync of the store's WAL.
 * No commit happens between the two, so no mapping can become durable
 * before the data it points to.  Concurrent callers share flushes: a
 * caller waits for at most the flush in progress and one more, and none
 * if a flush has already made every commit before the call durable
 * (nothing changed since).  Returns -EIO (or -ENOSPC, -EDQUOT) if the
 * kernel failed to write back some data since the store was opened.  That
 * data is lost, so the error is sticky until the store is reopened.
 */
int orch_store_sync(struct orch_store *st);

/*
 * A store whose flush failed (an fdatasync of the blocks, or the sync of
 * its WAL: data the kernel could not write back, which is lost) has
 * failed: it is read-only until it is opened again.  Every mutation then
 * fails with -EIO without touching the disk, every orch_store_sync()
 * returns the error that failed it, and reads go on (data written since
 * the last successful sync may read as it was before, or fail its
 * checksum).  One line at ERR says so when it happens.  Returns 0 while
 * the store is healthy, else that error (-EIO, -ENOSPC, ...), with the
 * wall time of the failure in *@since_s (may be NULL).  Any thread.
 *
 * A data write that fails (pwrite) fails only its own operation, which
 * changes nothing, and is logged; the store goes on.
 */
int orch_store_failed(struct orch_store *st, int64_t *since_s);

/* --- Space and statistics --------------------------------------------------- */

/*
 * The store's space in bytes, and what its host can still give it.  A
 * sparse blocks file takes host space only for the blocks in use, and
 * several stores may share one file system: what they can still store
 * together is their free blocks, but no more than that file system can
 * give (once), which the caller works out from @host_fs and @host_avail
 * (orch_fs_statfs).
 */
struct orch_store_space {
	uint64_t total;       /* data blocks of the store (its size at mkfs) */
	uint64_t used;        /* ...in use: total - free */
	uint64_t free;        /* free blocks of the store */
	uint64_t host_avail;  /* what the file system under a sparse blocks file can
				 still give new blocks (after store_reserve);
				 UINT64_MAX on a block device */
	uint64_t host_fs;     /* that file system on this host, never 0; 0 on a device */
	uint64_t avail;       /* what this store can still write: min(free, host_avail),
				 0 once the store failed (orch_store_failed) */
	uint64_t objects;
};

/* Fills @out.  Returns 0, or the error of fstatvfs (@out holds the rest).  Any thread. */
int orch_store_space(struct orch_store *st, struct orch_store_space *out);

/*
 * orch_store_space()'s @total, @free_bytes, @avail and objects.  Any
 * output pointer may be NULL.
 */
int orch_store_statfs(struct orch_store *st, uint64_t *total,
		      uint64_t *free_bytes, uint64_t *avail, uint64_t *objects);

/* Counters since orch_store_open, for `orchard stats`. */
struct orch_store_stats {
	uint64_t bytes_written;   /* by writes */
	uint64_t bytes_read;      /* returned by reads (*got) */
	uint64_t objects_created; /* by write or truncate */
	uint64_t objects_deleted; /* by delete, when the object existed */
	uint64_t ops;             /* mutations applied */
	uint64_t commits;         /* write transactions: ops / commits = batching */
	uint64_t syncs;           /* flushes done by orch_store_sync */
	uint64_t sync_calls;      /* calls to it: sync_calls / syncs = sharing */
	uint64_t csum_errors;     /* blocks that failed their checksum */
	uint64_t work_chunks;     /* transactions of chunked operations */
	uint64_t checkpoints;     /* WAL checkpoints by flushes */
	uint64_t checkpoint_us;   /* their time, commits held off throughout */
	uint64_t bad_records;     /* reads failed by a record failing verification */
};

void orch_store_get_stats(struct orch_store *st, struct orch_store_stats *out);

/* --- Inspection: the reverse map (check.c) ------------------------------------ */

/* Special owners of blocks, after every object number. */
#define ORCH_STORE_OWN_FS        (-1)  /* superblock and static area */
#define ORCH_STORE_OWN_DEFECTIVE (-2)  /* quarantined bad blocks */

/* One reverse-map record: physical blocks and what owns them. */
struct orch_store_rmap {
	uint32_t ag, agbno, len;  /* blocks [agbno, agbno + len) of AG @ag */
	int64_t owner;            /* object number (nid), or a special owner */
	uint64_t handle;          /* the object's handle; 0 for special owners */
	uint64_t fileoff;         /* in blocks, of the object */
	uint32_t flags;
};

/*
 * Calls @fn for every rmap record overlapping global blocks
 * [@start, @end) (block = ag * ag_blocks + agbno), in key order, on one read
 * snapshot: XFS's overlapped query, a bounded range scan because no record
 * is longer than maxext.  Stops early and returns @fn's value if non-zero.
 */
typedef int (*orch_store_rmap_fn)(void *arg, const struct orch_store_rmap *r);
int orch_store_owners(struct orch_store *st, uint64_t start, uint64_t end,
		      orch_store_rmap_fn fn, void *arg);

/* Geometry of an open store. */
struct orch_store_info {
	uint32_t block_size, ag_blocks, ag_count, maxext;
	uint64_t blocks;          /* data blocks in all AGs */
	uint32_t format;          /* store format version */
};
void orch_store_info(struct orch_store *st, struct orch_store_info *out);

/* One broken rule found by the checker. */
struct orch_store_finding {
	const char *rule;         /* "I1" .. "I18", or "crc" */
	const char *structure;    /* table: "rmap", "fsb", "bmap", ... */
	int64_t ag;               /* -1 if not about one AG */
	int64_t block;            /* agbno, or -1 */
	uint64_t handle;          /* object handle, or 0 */
	char detail[192];
};
typedef void (*orch_store_finding_fn)(void *arg,
				      const struct orch_store_finding *f);

/*
 * Checks invariants I1 to I18 of docs/SPEC-store.md ("Invariants") and
 * every record's CRC, on one read snapshot, while the store keeps
 * working.  Calls @fn for each finding (NULL: count only)
 * and returns the number of findings (>= 0), or -errno if it could not
 * check.  @data also reads every mapped block and verifies its checksum
 * (I17).
 */
long orch_store_check(struct orch_store *st, bool data,
		      orch_store_finding_fn fn, void *arg);

#endif
