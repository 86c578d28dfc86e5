/*
 * The data store of one server: a flat space of data objects, each a sparse
 * byte array named by a 64-bit handle (the file handle whose strips this
 * server holds).  No network code: the server, unit tests, fuzzers and
 * offline tools link this directly.
 *
 * This header is the stable interface.  The backend behind it today keeps one
 * sparse file per object under data_dir/data/ (store.c); a later one is an
 * XFS-style extent store in data_dir/blocks with the same contract.  Callers
 * must rely on nothing but what is written here.
 *
 * Objects come into being on their first write (or a truncate to a non-zero
 * size) and go away on delete.  An object has a size: the end of its last
 * byte written, or the size last set by truncate, whichever came later.
 * Bytes never written, punched, or exposed by extending truncate read as
 * zeros.  The authoritative file size lives in the inode (meta), not here:
 * the store's size only bounds what a read returns.
 *
 * Threads: one struct orch_store is used by one thread, the server's loop
 * thread, except orch_store_sync(), which any thread (the flusher) may call
 * concurrently with everything but orch_store_open/close.  Nothing here
 * blocks on anything but the local disk.
 *
 * Durability: every call that returns 0 is visible at once to later calls
 * and survives a crash of the process (it is in the kernel's page cache).
 * It survives power loss only after a later orch_store_sync() returns 0.
 * orch_store_sync makes everything under data_dir durable, including meta.db
 * and its WAL: the server relies on this to make a client's fsync durable
 * with one call, and every backend must keep this promise.
 *
 * Errors: 0 or -errno.  Errors from the OS are passed through as -errno
 * (-ENOSPC, -EDQUOT, -EIO, -EMFILE, ...); the ones a function can return
 * beyond those are listed with it.  On an error a write, truncate or punch
 * may have been partly applied; the object stays readable.  Nothing here
 * asserts on what it finds on disk.
 */
#ifndef ORCH_STORE_STORE_H
#define ORCH_STORE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* No byte of an object lies at or past this offset (1 PiB). */
#define ORCH_STORE_MAX_SIZE (1ull << 50)

struct orch_store;

/* --- Lifecycle ------------------------------------------------------------- */

/*
 * Initialises the data store in @data_dir (created if missing; its parent
 * must exist): creates data_dir/data and stamps the store format in it.
 * Returns -EEXIST if the store already holds objects, unless @force, which
 * deletes them all first.  Re-running it on an empty store is allowed.
 * -EBUSY if the store is open (by this or another process).  Leaves
 * data_dir/meta.db and any other file alone.  Durable when it returns 0.
 * Any thread, with no store of @data_dir open.
 */
int orch_store_mkfs(const char *data_dir, bool force);

/*
 * 0 if no process (a server, or mkfs) has the store in @data_dir open,
 * -EBUSY if one has; also 0 if there is no store.  mkfs --force asks before
 * it removes anything.  Any thread.
 */
int orch_store_check_unused(const char *data_dir);

/*
 * Opens the data store in @data_dir, exclusively: -EBUSY if it is open
 * already (by this or another process).  Returns -ENOENT if orch_store_mkfs
 * did not make it ("not initialised, run orchard mkfs" is logged),
 * -EPROTONOSUPPORT for another store format version, -ORCH_ECORRUPT if the
 * format stamp is unreadable, -ENOMEM.  Counts the objects (a scan of the
 * store).  On success *@out is the caller's until orch_store_close().
 */
int orch_store_open(const char *data_dir, struct orch_store **out);

/*
 * Closes @st (NULL is allowed) and releases every descriptor it holds.  Does
 * not sync: call orch_store_sync() first if durability is wanted.  No other
 * thread may be inside orch_store_sync(st) or call it later; @st is no longer
 * valid.
 */
void orch_store_close(struct orch_store *st);

/* --- Object I/O (loop thread) ---------------------------------------------- */

/*
 * Writes @len bytes of @buf at byte @off of object @h, creating the object
 * if it does not exist, and extending its size if the write ends past it.
 * @len 0 does nothing (and creates nothing).  Returns -EFBIG if
 * @off + @len > ORCH_STORE_MAX_SIZE (or past the backing file system's
 * largest file), -ENOSPC when the disk is full.  @buf is only read, and not
 * kept.
 */
int orch_store_write(struct orch_store *st, uint64_t h, uint64_t off,
		     const void *buf, size_t len);

/*
 * Reads up to @len bytes at byte @off of object @h into @buf.  *@got is the
 * number of bytes before the object's end: 0 if the object does not exist or
 * @off is at or past its size, less than @len if the object ends inside the
 * range.  Holes inside the object read as zeros.  Bytes of @buf past *@got
 * are left unchanged.  On error *@got is 0 and @buf's contents are
 * undefined.
 */
int orch_store_read(struct orch_store *st, uint64_t h, uint64_t off, void *buf,
		    size_t len, size_t *got);

/*
 * Sets object @h's size to @size: shrinking frees everything past it,
 * growing adds a hole that reads as zeros.  An absent object is created if
 * @size > 0, and left absent if @size is 0.  -EFBIG if
 * @size > ORCH_STORE_MAX_SIZE.
 */
int orch_store_truncate(struct orch_store *st, uint64_t h, uint64_t size);

/*
 * Frees bytes [@off, @off + @len) of object @h: they read as zeros after,
 * and the object's size does not change (a range past the end is ignored).
 * Nothing to do, and 0, if the object does not exist.  The space is given
 * back to the disk where the backing file system allows; otherwise the
 * range is overwritten with zeros.
 */
int orch_store_punch(struct orch_store *st, uint64_t h, uint64_t off,
		     uint64_t len);

/*
 * Deletes object @h and frees its space.  Returns 0 if it does not exist:
 * intent records replay deletes after a crash, so this is idempotent.
 */
int orch_store_delete(struct orch_store *st, uint64_t h);

/* --- Durability ------------------------------------------------------------ */

/*
 * Makes every write, truncate, punch and delete that returned before this
 * call durable against power loss, and with them everything else under
 * data_dir, including meta.db and its WAL.  Any thread; safe concurrently
 * with the loop thread's calls; concurrent callers are serialised (each
 * call does a full flush: batching callers is the caller's business).
 * Returns -EIO (or -ENOSPC, -EDQUOT) if the kernel failed to write back some
 * data since the store was opened.  That data is lost, so the error is
 * sticky: every later call returns it too, until the store is reopened.
 * An operator must act (ERR is logged once).
 */
int orch_store_sync(struct orch_store *st);

/* --- Space and statistics (loop thread) ------------------------------------ */

/*
 * Space of the backing file system in bytes: @total, @free_bytes (free for
 * root) and @avail (free for the server's user), and the number of objects
 * in the store.  Any output pointer may be NULL.
 */
int orch_store_statfs(struct orch_store *st, uint64_t *total,
		      uint64_t *free_bytes, uint64_t *avail, uint64_t *objects);

/* Counters since orch_store_open, for `orchard stats`. */
struct orch_store_stats {
	uint64_t bytes_written;   /* by orch_store_write */
	uint64_t bytes_read;      /* returned by orch_store_read (*got) */
	uint64_t objects_created; /* by write or truncate */
	uint64_t objects_deleted; /* by delete, when the object existed */
};

/* Copies the counters into @out. */
void orch_store_get_stats(const struct orch_store *st,
			  struct orch_store_stats *out);

#endif
