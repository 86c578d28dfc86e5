/*
 * The physical map of an extent store, for fsmap, whoowns and the online
 * scrub: every range of the blocks file with its owner (an object, a
 * special owner, or free space), in physical order, page by page; the
 * codec that carries a page over the wire; a throttled data scan; and an
 * iterator of the objects' handles.
 *
 * Everything here reads on read snapshots (store_snap_get) while the store
 * keeps working; nothing is changed.  Any thread, once the store is open.
 * Errors: 0 or -errno (-ENOMEM, -EIO from SQLite, -EPROTO from the decoder).
 */
#ifndef ORCH_STORE_FSMAP_H
#define ORCH_STORE_FSMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "store/store.h"

/* Owner of a free extent, after ORCH_STORE_OWN_FS and OWN_DEFECTIVE. */
#define ORCH_STORE_OWN_FREE (-3)

/* Records in one page of the map (the wire reply stays far below 1 MiB). */
#define ORCH_FSMAP_PAGE_MAX 4096u
/* Bytes of one encoded record, and of the page header. */
#define ORCH_FSMAP_REC_BYTES 44u
#define ORCH_FSMAP_HDR_BYTES 20u

/* One physical range and one of its owners. */
struct orch_fsmap_rec {
	uint64_t start;         /* global block */
	uint64_t len;           /* blocks */
	int64_t owner;          /* nid (> 0) or ORCH_STORE_OWN_* */
	uint64_t handle;        /* object handle, 0 for special owners */
	uint64_t fileoff;       /* object block of @start (objects only) */
	uint32_t flags;         /* rmap flags */
};

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

/* Geometry sent with every page, so a client can name AGs. */
struct orch_fsmap_geom {
	uint32_t ag_blocks, ag_count, maxext;
	uint64_t blocks;
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

/* The page header and records on the wire (little-endian, SPEC-wire.md). */
void orch_fsmap_encode_geom(struct orch_buf *b, const struct orch_fsmap_geom *g);
void orch_fsmap_encode_rec(struct orch_buf *b, const struct orch_fsmap_rec *r);
/*
 * Decodes a page from @len bytes at @p: the geometry into *@g and up to
 * @max records into @out (*@n gets the count).  -EPROTO for a truncated or
 * malformed page, or more than @max records.  Never trusts a length.
 */
int orch_fsmap_decode(const void *p, size_t len, struct orch_fsmap_geom *g,
		      struct orch_fsmap_rec *out, size_t max, size_t *n);

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
			  const volatile bool *stop);

#endif
