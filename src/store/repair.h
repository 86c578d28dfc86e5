/*
 * Offline repair of the extent store: rebuilds one index from the others
 * while nothing has the store open (docs/SPEC-store.md, "Repair").
 *
 *   rmap       from bmap, plus OWN_FS (block 0) and OWN_DEFECTIVE for the
 *              blocks of `bad` records that no data extent maps
 *   freespace  fsb and fsc: the complement of rmap per AG, maximal extents
 *   refcount   refc: a sweep of the data-owner rmap records
 *   bmap       every object's extent map from its rmap records, obj
 *              nextents/nblocks recomputed, each rebuilt extent read back
 *              and compared with the csum table
 *
 * agstat is recomputed whenever a table it counts (rmap, fsb, refc) was
 * rebuilt.  Conflict policy: only records whose CRC is good are sources.
 * A damaged record of the source table makes rmap, freespace and refcount
 * refuse (-EUCLEAN, and the log says which record and which rebuild comes
 * first); bmap skips a damaged rmap record and leaves it in place, so its
 * blocks stay owned.  A record whose CRC fails is never rewritten with a
 * fresh CRC (that would launder the damage): an obj record with a bad CRC
 * keeps its counters.  Repair never frees a block that rmap gives to an
 * object.  Every record the rebuild drops or adds is logged.
 *
 * Each rebuild is one SQLite transaction, committed with synchronous=FULL
 * and checkpointed into store.db, so it survives power loss once
 * orch_store_repair returns.  Then the store is opened normally and
 * orch_store_check runs on the result (the re-check).
 *
 * Not thread-safe against itself on one data_dir (the store lock makes a
 * second caller get -EBUSY).  Any thread.
 */
#ifndef ORCH_STORE_REPAIR_H
#define ORCH_STORE_REPAIR_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store.h"

enum orch_store_rebuild {
	ORCH_STORE_REBUILD_BMAP = 1,
	ORCH_STORE_REBUILD_RMAP,
	ORCH_STORE_REBUILD_FREESPACE,
	ORCH_STORE_REBUILD_REFCOUNT,
};

/* "bmap", "rmap", "freespace", "refcount" <-> the enum.  0 or -EINVAL. */
int orch_store_rebuild_parse(const char *name, enum orch_store_rebuild *out);
const char *orch_store_rebuild_name(enum orch_store_rebuild what);

struct orch_store_repair_opts {
	bool dry_run;           /* compute and report, roll back, no re-check */
	bool check_data;        /* the re-check also reads every block (I17) */
	/* One line per event (a dropped or added record, a refusal, a
	 * checksum mismatch), without a newline; NULL: silent. */
	void (*log)(void *arg, const char *msg);
	/* The re-check's findings; NULL: counted only. */
	orch_store_finding_fn finding;
	void *arg;              /* for both callbacks */
};

struct orch_store_repair_result {
	const char *table;      /* "bmap", "rmap", "fsb+fsc", "refc" */
	uint64_t before;        /* its records before the rebuild */
	uint64_t after;         /* ... and after */
	uint64_t dropped;       /* records before that are not in the result */
	uint64_t added;         /* records of the result that were not there */
	uint64_t skipped;       /* source records left alone (bad CRC, no object) */
	uint64_t csum_bad;      /* bmap: blocks of rebuilt extents failing csum */
	uint64_t objects;       /* bmap: obj records whose counters were set */
	bool agstat;            /* agstat was recomputed */
	bool checked;           /* the re-check ran: findings below */
	long findings;          /* re-check result: >= 0 findings, or -errno */
};

/*
 * Rebuilds @what in the store in @data_dir.  @opts may be NULL (defaults:
 * no dry run, no data check, silent).  Fills *@res (which may be NULL).
 * Returns 0 when the rebuild committed (or, dry run, was computed): the
 * store may still have findings, see res->findings; -EBUSY if the store is
 * open (a server runs); -ENOENT if there is no store; -EUCLEAN if a source
 * record is damaged or out of range, or the geometry is damaged (refused,
 * nothing changed, the log says why); -EINVAL for an unknown @what;
 * -ENOMEM, -EIO.
 */
int orch_store_repair(const char *data_dir, enum orch_store_rebuild what,
		      const struct orch_store_repair_opts *opts,
		      struct orch_store_repair_result *res);

#endif
