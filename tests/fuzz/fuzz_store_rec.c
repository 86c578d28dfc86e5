/*
 * The store's record decoders (rec.c) on arbitrary rows: never crash, and
 * a record a decoder accepts encodes back to the same columns and CRC
 * (round-trip oracle) with the ranges its verifier promises.
 *
 * Input: byte 0 picks the table, byte 1 the mode (bit 0: give the row a
 * matching CRC, so the range checks are reached; bit 1: no geometry; bit 2:
 * one column is text instead of an integer), then up to 8 columns of 8
 * little-endian bytes, then the csum blob or the smeta key (the rest).
 * The geometry is a fake store's: 4 AGs of 64 blocks, the last one 32,
 * maxext 16.
 */
#include <sqlite3.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct orch_store geo = {
	.st_ag_blocks = 64, .st_ag_shift = 6, .st_ag_count = 4, .st_maxext = 16,
	.st_blocks = 224,
};

/* Integer columns before crc, per table. */
static const int nfields[] = {
	[ORCH_REC_AGSTAT] = 7, [ORCH_REC_OBJ] = 6, [ORCH_REC_BMAP] = 6, [ORCH_REC_RMAP] = 6,
	[ORCH_REC_FSB] = 3, [ORCH_REC_FSC] = 3, [ORCH_REC_REFC] = 4, [ORCH_REC_CSUM] = 3,
	[ORCH_REC_BAD] = 5, [ORCH_REC_WORK] = 6, [ORCH_REC_SMETA] = 1,
};

static sqlite3_stmt *row_stmt(void)
{
	static sqlite3 *db;
	static sqlite3_stmt *s;

	if (!s && (sqlite3_open(":memory:", &db) != SQLITE_OK ||
		   sqlite3_prepare_v2(db, "SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9", -1, &s,
				      NULL) != SQLITE_OK))
		abort();
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return s;
}

/* Checks that @rec (persistent, accepted) holds @f's fields and crc. */
static void same(const void *rec, const int64_t *f, int n)
{
	int64_t r[8];

	memcpy(r, rec, (size_t)(n + 1) * sizeof(r[0]));
	if (memcmp(r, f, (size_t)(n + 1) * sizeof(r[0])))
		abort();
}

static void check_bmap(const struct orch_store *st, const struct orch_bmap_irec *b)
{
	if (b->len < 1 || b->nid < 1 || (st && (b->ag >= st->st_ag_count || b->len > st->st_maxext ||
						 b->agbno + b->len > store_ag_len(st, b->ag))))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	enum orch_rec_tbl t;
	const struct orch_store *st;
	const uint8_t *tail;
	int64_t f[9] = { 0 };
	size_t tlen;
	sqlite3_stmt *s;
	uint8_t mode;
	int n, col = 0, textcol;
	orch_failaddr_t fa;

	if (size < 2)
		return 0;
	t = (enum orch_rec_tbl)(ORCH_REC_AGSTAT + data[0] % 11);
	mode = data[1];
	st = mode & 2 ? NULL : &geo;
	n = nfields[t];
	data += 2;
	size -= 2;
	for (int i = 0; i < n && size >= 8; i++, data += 8, size -= 8)
		f[i] = (int64_t)orch_get_le64(data);
	tail = data;
	tlen = size;
	textcol = mode & 4 ? mode >> 4 : -1;
	if (mode & 1) {
		if (t == ORCH_REC_SMETA)
			f[n] = orch_rec_crc(t, f, n, tail, tlen);
		else
			f[n] = orch_rec_crc(t, f, n, t == ORCH_REC_CSUM ? tail : NULL,
					    t == ORCH_REC_CSUM ? tlen : 0);
	}
	s = row_stmt();
	if (t == ORCH_REC_SMETA)
		sqlite3_bind_text(s, ++col, (const char *)tail, (int)tlen, SQLITE_STATIC);
	for (int i = 0; i <= n; i++) {
		if (t == ORCH_REC_CSUM && i == 3)
			sqlite3_bind_blob(s, ++col, tail, (int)tlen, SQLITE_STATIC);
		if (col == textcol)
			sqlite3_bind_text(s, ++col, "x", 1, SQLITE_STATIC);
		else
			sqlite3_bind_int64(s, ++col, f[i]);
	}
	if (sqlite3_step(s) != SQLITE_ROW)
		abort();

	switch (t) {
	case ORCH_REC_SMETA: {
		struct orch_smeta_irec m;
		struct orch_rec_smeta r;

		fa = orch_rec_smeta_from_disk(s, 0, &m);
		if (!fa) {
			orch_rec_smeta_to_disk(&m, &r);
			if (strlen(m.k) != tlen || memcmp(m.k, tail, tlen))
				abort();
			same(&r, f, 1);
		}
		break;
	}
	case ORCH_REC_AGSTAT: {
		struct orch_agstat_irec a;
		struct orch_rec_agstat r;

		fa = orch_rec_agstat_from_disk(st, s, 0, &a);
		if (!fa) {
			orch_rec_agstat_to_disk(&a, &r);
			same(&r, f, n);
			if (a.longest > a.freeblks || a.freeblks > a.blocks)
				abort();
		}
		break;
	}
	case ORCH_REC_OBJ: {
		struct orch_obj_irec o;
		struct orch_rec_obj r;

		fa = orch_rec_obj_from_disk(s, 0, &o);
		if (!fa) {
			orch_rec_obj_to_disk(&o, &r);
			same(&r, f, n);
			if (o.nid < 1 || o.size > ORCH_STORE_MAX_SIZE)
				abort();
		}
		break;
	}
	case ORCH_REC_BMAP: {
		struct orch_bmap_irec b;
		struct orch_rec_bmap r;

		fa = orch_rec_bmap_from_disk(st, s, 0, &b);
		if (!fa) {
			orch_rec_bmap_to_disk(&b, &r);
			same(&r, f, n);
			check_bmap(st, &b);
		}
		break;
	}
	case ORCH_REC_RMAP: {
		struct orch_rmap_irec m;
		struct orch_rec_rmap r;

		fa = orch_rec_rmap_from_disk(st, s, 0, &m);
		if (!fa) {
			orch_rec_rmap_to_disk(&m, &r);
			same(&r, f, n);
			if (m.len < 1 || m.owner == 0)
				abort();
		}
		break;
	}
	case ORCH_REC_FSB:
	case ORCH_REC_FSC: {
		struct orch_fsb_irec x;
		struct orch_rec_fsb rb;
		struct orch_rec_fsc rc;

		fa = t == ORCH_REC_FSB ? orch_rec_fsb_from_disk(st, s, 0, &x) :
					 orch_rec_fsc_from_disk(st, s, 0, &x);
		if (!fa) {
			if (t == ORCH_REC_FSB) {
				orch_rec_fsb_to_disk(&x, &rb);
				same(&rb, f, n);
			} else {
				orch_rec_fsc_to_disk(&x, &rc);
				same(&rc, f, n);
			}
			if (x.len < 1)
				abort();
		}
		break;
	}
	case ORCH_REC_REFC: {
		struct orch_refc_irec x;
		struct orch_rec_refc r;

		fa = orch_rec_refc_from_disk(st, s, 0, &x);
		if (!fa) {
			orch_rec_refc_to_disk(&x, &r);
			same(&r, f, n);
			if (x.refcount < 2)
				abort();
		}
		break;
	}
	case ORCH_REC_CSUM: {
		struct orch_csum_irec x;
		struct orch_rec_csum r;

		fa = orch_rec_csum_from_disk(st, s, 0, &x);
		if (!fa) {
			orch_rec_csum_to_disk(&x, &r);
			same(&r, f, n);
			if (tlen != sizeof(r.sums) || memcmp(r.sums, tail, tlen) || !x.valid)
				abort();
		}
		break;
	}
	case ORCH_REC_BAD: {
		struct orch_bad_irec x;
		struct orch_rec_bad r;

		fa = orch_rec_bad_from_disk(st, s, 0, &x);
		if (!fa) {
			orch_rec_bad_to_disk(&x, &r);
			same(&r, f, n);
		}
		break;
	}
	case ORCH_REC_WORK: {
		struct orch_work_irec x;
		struct orch_rec_work r;

		fa = orch_rec_work_from_disk(s, 0, &x);
		if (!fa) {
			orch_rec_work_to_disk(&x, &r);
			same(&r, f, n);
		}
		break;
	}
	}
	sqlite3_reset(s);
	return 0;
}
