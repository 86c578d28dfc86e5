/*
 * The pages two admin replies carry in their data field (SPEC-wire.md):
 * AD2SV_FSMAP's page of a store's physical map, and CL2SV_BLOCKSUMS's page
 * of an object's block checksums.  The servers' stores fill the records
 * (store/fsmap.h, store/sums.h); the CLI decodes them, so the codecs live
 * here, with the wire, and the CLI needs the store for nothing it asks
 * over the network.
 *
 * Decoders never trust a length and return 0 or -EPROTO.
 */
#ifndef ORCH_PROTO_PAGES_H
#define ORCH_PROTO_PAGES_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* The data servers' block: the unit of fsmap ranges, block sums and dedupe. */
#define ORCH_DATA_BLOCK 4096u
/* The largest object a data server keeps, in bytes. */
#define ORCH_DATA_OBJECT_MAX (1ull << 50)

/* --- AD2SV_FSMAP ----------------------------------------------------------------- */

/* Owners that are not objects (others are a store's object ids, > 0). */
#define ORCH_FSMAP_OWN_FS (-1)        /* superblock and static area */
#define ORCH_FSMAP_OWN_DEFECTIVE (-2) /* quarantined bad blocks */
#define ORCH_FSMAP_OWN_FREE (-3)      /* free space */

/* Records in one page (the wire reply stays far below 1 MiB). */
#define ORCH_FSMAP_PAGE_MAX 4096u
/* Bytes of one encoded record, and of the page header. */
#define ORCH_FSMAP_REC_BYTES 44u
#define ORCH_FSMAP_HDR_BYTES 20u

/* One physical range and one of its owners. */
struct orch_fsmap_rec {
	uint64_t start;         /* global block */
	uint64_t len;           /* blocks */
	int64_t owner;          /* object id (> 0) or ORCH_FSMAP_OWN_* */
	uint64_t handle;        /* object handle, 0 for special owners */
	uint64_t fileoff;       /* object block of @start (objects only) */
	uint32_t flags;         /* rmap flags */
};

/* Geometry sent with every page, so a client can name AGs. */
struct orch_fsmap_geom {
	uint32_t ag_blocks, ag_count, maxext;
	uint64_t blocks;
};

/* The page header and records on the wire (little-endian). */
void orch_fsmap_encode_geom(struct orch_buf *b, const struct orch_fsmap_geom *g);
void orch_fsmap_encode_rec(struct orch_buf *b, const struct orch_fsmap_rec *r);
/*
 * Decodes a page from @len bytes at @p: the geometry into *@g and up to
 * @max records into @out (*@n gets the count).  -EPROTO for a truncated or
 * malformed page, or more than @max records.
 */
int orch_fsmap_decode(const void *p, size_t len, struct orch_fsmap_geom *g,
		      struct orch_fsmap_rec *out, size_t max, size_t *n);

/* --- CL2SV_BLOCKSUMS ------------------------------------------------------------- */

/* Records in one page (the wire reply stays far below ORCH_IO_MAX). */
#define ORCH_BLOCKSUMS_PAGE_MAX 16384u
/* Bytes of one encoded record. */
#define ORCH_BLOCKSUMS_REC_BYTES 20u

/* One written block of an object. */
struct orch_blocksum {
	uint64_t block;    /* object block (byte offset / ORCH_DATA_BLOCK) */
	uint64_t gblock;   /* physical block: equal ones are shared already */
	uint32_t crc;      /* crc32c of the block's 4 KiB */
};

/* One record on the wire (little-endian). */
void orch_blocksums_encode(struct orch_buf *b, const struct orch_blocksum *r);
/*
 * Decodes a page of @len bytes at @p into up to @max records (*@n gets the
 * count).  -EPROTO for a truncated page, more than @max records, or blocks
 * not strictly increasing.
 */
int orch_blocksums_decode(const void *p, size_t len, struct orch_blocksum *out,
			  size_t max, size_t *n);

#endif
