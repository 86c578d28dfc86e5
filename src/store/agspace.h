/*
 * Space per allocation group, for the servers' metrics: each AG's blocks
 * and free blocks as the last commit left them (the agstat rows), read on
 * a read snapshot (orch_snap_get) while the store keeps working.  Any
 * thread, once the store is open.
 */
#ifndef ORCH_STORE_AGSPACE_H
#define ORCH_STORE_AGSPACE_H

#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

struct orch_store_ag_space {
	uint32_t ag;
	uint64_t blocks;      /* blocks of the AG, its static metadata included */
	uint64_t free;        /* free blocks */
};

/*
 * Fills @out with up to @max AGs in AG order, their number in *@n.
 * Returns 0 or -errno (-ENOMEM, -EIO from SQLite, -EUCLEAN for an agstat
 * record that fails verification).
 */
int orch_store_ag_space(struct orch_store *st, struct orch_store_ag_space *out, size_t max,
			size_t *n);

#endif
