/*
 * The physical map of an extent store, for fsmap, whoowns and the online
 * scrub: every range of the blocks file with its owner (an object, a
 * special owner, or free space), in physical order, page by page (the
 * records and their wire codec are proto/pages.h); a throttled data scan;
 * and an iterator of the objects' handles.
 *
 * Everything here reads on read snapshots (orch_snap_get) while the store
 * keeps working; nothing is changed.  Any thread, once the store is open.
 * Errors: 0 or -errno (-ENOMEM, -EIO from SQLite).
 */
#ifndef ORCH_STORE_FSMAP_H
#define ORCH_STORE_FSMAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/pages.h"
#include "store/store.h"

/* Owner of a free extent, after ORCH_STORE_OWN_FS and OWN_DEFECTIVE. */
#define ORCH_STORE_OWN_FREE ORCH_FSMAP_OWN_FREE

/*
 * Where a listing stopped: the key (physical start, owner, object block)
 * of the last record returned.  Zeroed (@valid false): from the beginning.
 */
struct orch_fsmap_cursor {
	bool valid;
	uint64_t start;
	int64_t owner;
	uint64_t off;
};

/*
 * Calls @fn for up to @max records overlapping global blocks [@start,
 * @end) that come after *@cur, in (start, owner, offset) order: every
 * rmap record (one per owner of a shared range) and every free extent,
 * clipped to the range.  Bad blocks are OWN_DEFECTIVE rmap records.
 * Advances *@cur past what was returned; *@eof is true when nothing is
 * left.  One read snapshot per call; pages of one listing may see
 * different snapshots.  @fn's non-zero return stops and is returned.
 */
typedef int (*orch_fsmap_fn)(void *arg, const struct orch_fsmap_rec *r);
int orch_store_fsmap(struct orch_store *st, uint64_t start, uint64_t end,
		     struct orch_fsmap_cursor *cur, size_t max,
		     orch_fsmap_fn fn, void *arg, bool *eof);

/*
 * Calls @fn for the handle of every object that exists on one snapshot (not
 * DYING), @max at most per call, from handle > *@after (0: from the
 * start), advancing *@after; *@eof when done.
 */
typedef int (*orch_store_handle_fn)(void *arg, uint64_t handle);
int orch_store_handles(struct orch_store *st, uint64_t *after, size_t max,
		       orch_store_handle_fn fn, void *arg, bool *eof);

/* True if object @h exists now (a fresh snapshot). */
bool orch_store_has_object(struct orch_store *st, uint64_t h);

/*
 * The data scan of a scrub: reads every written block of the store in
 * physical order and compares it with its checksum, like the checker's
 * I17, but in batches of a snapshot each, sleeping between batches so it
 * reads no faster than @rate_bytes per second (0: no limit).  Calls @bad
 * for every block that fails (global block, and the reason), and returns
 * the number of blocks read (>= 0) or -errno.  *@stop, if not NULL, is
 * polled between batches: true ends the scan early with -ECANCELED.
 */
typedef void (*orch_store_bad_block_fn)(void *arg, uint64_t gblock,
					const char *why);
long orch_store_scan_data(struct orch_store *st, uint64_t rate_bytes,
			  orch_store_bad_block_fn bad, void *arg,
			  const atomic_bool *stop);

#endif
