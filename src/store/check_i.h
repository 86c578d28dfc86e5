/*
 * Inside the checker: its state, shared by check.c (the passes, the
 * records of an AG, the findings) and check_sweep.c (the sweep of an AG's
 * segments, and the data check).  Only orch_store_check's thread touches
 * it.
 */
#ifndef ORCH_STORE_CHECK_I_H
#define ORCH_STORE_CHECK_I_H

#include <stdbool.h>
#include <stdint.h>

#include "store/store_i.h"

/* Blocks per read of the data check. */
#define CHK_READ_RUN 256u
/* Bytes of a csum row's sums blob. */
#define CHK_SUMS_BYTES (ORCH_REC_CSUM_GROUP * 4u)
/* Owners named in one sharing finding. */
#define CHK_NAME_OWNERS 4
/* Rules: 0 = crc, n = In. */
#define CHK_NRULES 19

/* A growable array; grows only with rows actually read. */
struct chk_vec {
	void *v;
	size_t n, cap;
};

/* One rmap record of the AG being checked. */
struct chk_rrec {
	int64_t agbno, len, owner, off, flags;
	uint32_t start, end;    /* clipped to the AG; empty: not swept */
};

/* One fsb, fsc or bad record (fsc: sorted by agbno too). */
struct chk_frec {
	int64_t agbno, len;
	uint32_t start, end;
};

/* One refc record. */
struct chk_crec {
	int64_t agbno, len, count;
	uint32_t start, end;
};

/* One csum row with a sane group number. */
struct chk_srec {
	int64_t grp;
	uint64_t valid;
	bool sums_ok;           /* sums is CHK_SUMS_BYTES long, crc good */
	uint8_t sums[CHK_SUMS_BYTES];
};

enum chk_ev_kind { EV_RMAP, EV_FSB, EV_REFC, EV_BAD };

struct chk_ev {
	uint32_t pos;
	uint8_t kind;
	int8_t delta;
	uint32_t idx;
};

/* Coverage of the current segment of the sweep. */
struct chk_cnt {
	int64_t nfree, nrmap, ndata, nwritten, nfs, nspecial;
	int64_t nrefc, refcount, nbad, ndefective;
};

/* The AG being checked. */
struct chk_ag {
	uint32_t ag, len;
	struct chk_vec rmap, fsb, fsc, refc, csum, bad, ev;
	uint32_t *act;          /* rmap records covering the segment */
	uint32_t *apos;         /* rmap index -> its slot in act */
	size_t nact, act_cap;
	struct chk_cnt cnt;
	size_t ccur;            /* csum cursor of the sweep */
	int run_kind;           /* I1 finding being coalesced, 0: none */
	uint32_t run_a, run_b;
};

struct chk {
	struct orch_store *st;
	struct orch_rec_sq *q;  /* the snapshot connection's statements */
	orch_store_finding_fn fn;
	void *arg;
	bool data;
	long found;
	unsigned reported[CHK_NRULES];
	int64_t next_nid;       /* INT64_MAX if smeta lacks it */
	int64_t next_work;      /* INT64_MAX if smeta lacks it */
	/* The last object looked up by nid. */
	int64_t o_nid;
	bool o_cached, o_exists;
	uint64_t o_handle;
	int64_t o_flags;
	uint8_t *buf;           /* data check: CHK_READ_RUN blocks */
	struct chk_vec work;    /* pending work items, by nid */
};

/*
 * Reports a finding of rule @rule (0: crc, n: In) on @structure (a table),
 * at AG @ag block @block (-1: none) of object @handle (0: none); counted
 * always, passed on up to CHK_REPORT_MAX per rule.
 */
void orch_check_report(struct chk *ck, int rule, const char *structure,
		       int64_t ag, int64_t block, uint64_t handle,
		       const char *fmt, ...)
	__attribute__((format(printf, 7, 8)));

/* The object @nid into ck->o_* (one entry cache): 0 or -errno. */
int orch_check_obj_lookup(struct chk *ck, int64_t nid);

/* Adds the start and end events of record @idx ([start, end), @kind). */
int orch_check_ev_add(struct chk_ag *a, uint32_t start, uint32_t end,
		      enum chk_ev_kind kind, size_t idx);

/* check_sweep.c: the sweep of AG @a's loaded records (I1, I6, I11-I14,
 * I16, I18) and, with ck->data, the data check (I17): 0 or -errno. */
int orch_check_sweep(struct chk *ck, struct chk_ag *a);
int orch_check_data(struct chk *ck, struct chk_ag *a);

#endif
