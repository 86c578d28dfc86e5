/*
 * An object's written blocks with their stored checksums, page by page (the
 * records and their wire codec are proto/pages.h): what `orchard dedupe --scan`
 * groups identical blocks by (docs/ADMIN.md).  The checksums are a hint
 * only; dedupe compares the bytes before it shares anything.
 *
 * Reads on one read snapshot per page while the store keeps working; any
 * thread, once the store is open.  Errors: 0 or -errno (-ENOMEM, -EIO from
 * SQLite).
 */
#ifndef ORCH_STORE_SUMS_H
#define ORCH_STORE_SUMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/pages.h"
#include "store/store.h"

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

#endif
