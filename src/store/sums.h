/*
 * An object's written blocks with their stored checksums, page by page, and
 * the codec that carries a page over the wire: what `orchard dedupe --scan`
 * groups identical blocks by (docs/ADMIN.md).  The checksums are a hint
 * only; dedupe compares the bytes before it shares anything.
 *
 * Reads on one read snapshot per page while the store keeps working; any
 * thread, once the store is open.  Errors: 0 or -errno (-ENOMEM, -EIO from
 * SQLite, -EPROTO from the decoder).
 */
#ifndef ORCH_STORE_SUMS_H
#define ORCH_STORE_SUMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "store/store.h"

/* Records in one page (the wire reply stays far below ORCH_IO_MAX). */
#define ORCH_BLOCKSUMS_PAGE_MAX 16384u
/* Bytes of one encoded record. */
#define ORCH_BLOCKSUMS_REC_BYTES 20u

/* One written block of an object. */
struct orch_blocksum {
	uint64_t block;    /* object block (byte offset / ORCH_STORE_BLOCK) */
	uint64_t gblock;   /* physical block: equal ones are shared already */
	uint32_t crc;      /* crc32c of the block's 4 KiB */
};

/*
 * Fills @out with up to @max blocks of object @h from object block @from
 * on, in order: every block that is written and has a checksum (holes,
 * unwritten extents and blocks without a checksum are skipped).  *@n gets
 * the count; *@next the block to ask from next, and *@eof is true when no
 * block follows.  An absent object is empty.
 */
int orch_store_block_sums(struct orch_store *st, uint64_t h, uint64_t from,
			  struct orch_blocksum *out, size_t max, size_t *n,
			  uint64_t *next, bool *eof);

/* One record on the wire (little-endian, SPEC-wire.md). */
void orch_blocksums_encode(struct orch_buf *b, const struct orch_blocksum *r);
/*
 * Decodes a page of @len bytes at @p into up to @max records (*@n gets the
 * count).  -EPROTO for a truncated page, more than @max records, or blocks
 * not strictly increasing.  Never trusts a length.
 */
int orch_blocksums_decode(const void *p, size_t len, struct orch_blocksum *out,
			  size_t max, size_t *n);

#endif
