/*
 * The store's record layer: the record CRC, the decoders and verifiers,
 * the encoders and the statement cache (store_ondisk.h says how to use
 * them).  Decoding never trusts a column: a value that does not fit its
 * field fails verification instead of being truncated into range.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "store/store_i.h"

/* --- Tables and the record CRC ------------------------------------------------- */

/* Per table: its name and its fields, the integer columns before crc. */
static const struct {
	const char *name;
	int nf;
} rec_tbl[] = {
	[ORCH_REC_AGSTAT] = { "agstat", 7 },
	[ORCH_REC_OBJ] = { "obj", 6 },
	[ORCH_REC_BMAP] = { "bmap", 6 },
	[ORCH_REC_RMAP] = { "rmap", 6 },
	[ORCH_REC_FSB] = { "fsb", 3 },
	[ORCH_REC_FSC] = { "fsc", 3 },
	[ORCH_REC_REFC] = { "refc", 4 },
	[ORCH_REC_CSUM] = { "csum", 3 },
	[ORCH_REC_BAD] = { "bad", 5 },
	[ORCH_REC_WORK] = { "work", 6 },
	[ORCH_REC_SMETA] = { "smeta", 1 },
};

const char *orch_rec_tbl_name(enum orch_rec_tbl t)
{
	if ((size_t)t >= ORCH_ARRAY_SIZE(rec_tbl) || !rec_tbl[t].name)
		return "?";
	return rec_tbl[t].name;
}

uint32_t orch_rec_crc(enum orch_rec_tbl t, const int64_t *f, int n,
		      const void *blob, size_t bloblen)
{
	uint8_t b[8];
	uint32_t crc;

	b[0] = (uint8_t)t;
	crc = orch_crc32c(0, b, 1);
	for (int i = 0; i < n; i++) {
		orch_put_le64(b, (uint64_t)f[i]);
		crc = orch_crc32c(crc, b, 8);
	}
	if (blob && bloblen)
		crc = orch_crc32c(crc, blob, bloblen);
	return crc;
}

/*
 * The CRC of a persistent record of table @t (not smeta, whose key is not
 * in the struct): its fields are the int64 array the struct starts with.
 */
static uint32_t rec_crc_of(enum orch_rec_tbl t, const void *rec, const void *blob,
			   size_t bloblen)
{
	int64_t f[8];

	memcpy(f, rec, (size_t)rec_tbl[t].nf * sizeof(f[0]));
	return orch_rec_crc(t, f, rec_tbl[t].nf, blob, bloblen);
}

int orch_rec_nfields(enum orch_rec_tbl t)
{
	return rec_tbl[t].nf;
}

void orch_rec_seal(enum orch_rec_tbl t, int64_t *f)
{
	f[rec_tbl[t].nf] = orch_rec_crc(t, f, rec_tbl[t].nf, NULL, 0);
}

bool orch_rec_crc_ok(enum orch_rec_tbl t, const int64_t *f, const void *blob, size_t bloblen,
		     uint32_t *computed)
{
	*computed = orch_rec_crc(t, f, rec_tbl[t].nf, blob, bloblen);
	return f[rec_tbl[t].nf] == (int64_t)*computed;
}

/*
 * Reads @n integer columns from @col into @f (a persistent record, crc
 * last); false if one is not an INTEGER (it is read as SQLite converts it).
 */
static bool rec_cols(sqlite3_stmt *s, int col, int n, void *rec)
{
	int64_t f[8];
	bool ok = true;

	for (int i = 0; i < n; i++) {
		ok &= sqlite3_column_type(s, col + i) == SQLITE_INTEGER;
		f[i] = sqlite3_column_int64(s, col + i);
	}
	memcpy(rec, f, (size_t)n * sizeof(f[0]));
	return ok;
}

bool orch_rec_read(enum orch_rec_tbl t, sqlite3_stmt *s, int col, int64_t *f)
{
	int nf = rec_tbl[t].nf;
	bool ok;

	if (t == ORCH_REC_SMETA)
		return rec_cols(s, col + 1, 2, f);
	if (t != ORCH_REC_CSUM)
		return rec_cols(s, col, nf + 1, f);
	ok = rec_cols(s, col, nf, f);
	ok &= sqlite3_column_type(s, col + nf + 1) == SQLITE_INTEGER;
	f[nf] = sqlite3_column_int64(s, col + nf + 1);
	return ok;
}

static void rec_bind(sqlite3_stmt *s, const void *rec, int n)
{
	int64_t f[8];

	memcpy(f, rec, (size_t)n * sizeof(f[0]));
	for (int i = 0; i < n; i++)
		sqlite3_bind_int64(s, i + 1, f[i]);
}

/* --- Field checks --------------------------------------------------------------- */

/* Stores @v in *@out: 1 if it fits, else 0 (an int: the decoders '&' the
 * results, so that every field is decoded whatever fails). */
static int rec_u32(int64_t v, uint32_t *out)
{
	*out = (uint32_t)v;
	return v >= 0 && v <= UINT32_MAX;
}

/*
 * An extent of AG blocks: len >= 1, inside its AG, and with @capped at most
 * maxext long.  The AG's bounds need @st; without it only the form.
 */
static bool rec_ext_ok(const struct orch_store *st, uint32_t ag, uint32_t agbno,
		       uint32_t len, bool capped)
{
	if (len < 1)
		return false;
	if (!st)
		return (uint64_t)agbno + len <= UINT32_MAX;
	if (ag >= st->st_ag_count || (uint64_t)agbno + len > store_ag_len(st, ag))
		return false;
	return !capped || len <= st->st_maxext;
}

/* --- smeta ---------------------------------------------------------------------- */

orch_failaddr_t orch_rec_smeta_from_disk(sqlite3_stmt *s, int col, struct orch_smeta_irec *out)
{
	/* A column's type is asked before its value: reading a value may
	 * convert it, and then its type is undefined (sqlite3_column_type). */
	int ktype = sqlite3_column_type(s, col);
	const unsigned char *k = sqlite3_column_text(s, col);
	int klen = sqlite3_column_bytes(s, col);
	struct orch_rec_smeta rec;
	bool typed = rec_cols(s, col + 1, 2, &rec);

	memset(out, 0, sizeof(*out));
	out->v = rec.v;
	if (!k || klen < 1 || (size_t)klen >= sizeof(out->k) ||
	    ktype != SQLITE_TEXT || memchr(k, 0, (size_t)klen))
		return ORCH_THIS_ADDRESS;
	memcpy(out->k, k, (size_t)klen);
	if (!typed)
		return ORCH_THIS_ADDRESS;
	if (rec.crc != orch_rec_crc(ORCH_REC_SMETA, &rec.v, 1, out->k, (size_t)klen))
		return ORCH_THIS_ADDRESS;
	return NULL;
}

void orch_rec_smeta_to_disk(const struct orch_smeta_irec *in, struct orch_rec_smeta *out)
{
	out->v = in->v;
	out->crc = orch_rec_crc(ORCH_REC_SMETA, &out->v, 1, in->k, strlen(in->k));
}

void orch_rec_smeta_bind(sqlite3_stmt *s, const struct orch_smeta_irec *in)
{
	struct orch_rec_smeta rec;

	orch_rec_smeta_to_disk(in, &rec);
	sqlite3_bind_text(s, 1, in->k, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 2, rec.v);
	sqlite3_bind_int64(s, 3, rec.crc);
}

/* --- agstat --------------------------------------------------------------------- */

orch_failaddr_t orch_rec_agstat_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					  int col, struct orch_agstat_irec *out)
{
	struct orch_rec_agstat r;
	bool typed = rec_cols(s, col, 8, &r);
	int fits = rec_u32(r.ag, &out->ag) & rec_u32(r.blocks, &out->blocks);

	out->freeblks = (uint64_t)r.freeblks;
	out->longest = (uint64_t)r.longest;
	out->nfree = (uint64_t)r.nfree;
	out->nrmap = (uint64_t)r.nrmap;
	out->nrefc = (uint64_t)r.nrefc;
	if (!typed || !fits)
		return ORCH_THIS_ADDRESS;
	if (r.crc != rec_crc_of(ORCH_REC_AGSTAT, &r, NULL, 0))
		return ORCH_THIS_ADDRESS;
	if (r.freeblks < 0 || r.longest < 0 || r.nfree < 0 || r.nrmap < 0 || r.nrefc < 0 ||
	    out->longest > out->freeblks || out->freeblks > out->blocks)
		return ORCH_THIS_ADDRESS;
	if (st && (out->ag >= st->st_ag_count || out->blocks != store_ag_len(st, out->ag)))
		return ORCH_THIS_ADDRESS;
	return NULL;
}

void orch_rec_agstat_to_disk(const struct orch_agstat_irec *in, struct orch_rec_agstat *out)
{
	*out = (struct orch_rec_agstat){
		.ag = in->ag, .blocks = in->blocks, .freeblks = (int64_t)in->freeblks,
		.longest = (int64_t)in->longest, .nfree = (int64_t)in->nfree,
		.nrmap = (int64_t)in->nrmap, .nrefc = (int64_t)in->nrefc,
	};
	out->crc = rec_crc_of(ORCH_REC_AGSTAT, out, NULL, 0);
}

/* --- obj ------------------------------------------------------------------------ */

orch_failaddr_t orch_rec_obj_from_disk(sqlite3_stmt *s, int col, struct orch_obj_irec *out)
{
	struct orch_rec_obj r;
	bool typed = rec_cols(s, col, 7, &r);

	out->nid = r.nid;
	out->handle = orch_rec_unkey_u64(r.handle);
	out->size = (uint64_t)r.size;
	out->flags = (uint32_t)r.flags;
	out->nextents = (uint64_t)r.nextents;
	out->nblocks = (uint64_t)r.nblocks;
	if (!typed)
		return ORCH_THIS_ADDRESS;
	if (r.crc != rec_crc_of(ORCH_REC_OBJ, &r, NULL, 0))
		return ORCH_THIS_ADDRESS;
	if (r.nid < 1 || r.size < 0 || (uint64_t)r.size > ORCH_STORE_MAX_SIZE)
		return ORCH_THIS_ADDRESS;
	if (r.flags < 0 || (r.flags & ~(int64_t)ORCH_REC_OBJ_FLAGS))
		return ORCH_THIS_ADDRESS;
	if (r.nextents < 0 || r.nblocks < 0 || r.nextents > r.nblocks)
		return ORCH_THIS_ADDRESS;
	return NULL;
}

void orch_rec_obj_to_disk(const struct orch_obj_irec *in, struct orch_rec_obj *out)
{
	*out = (struct orch_rec_obj){
		.nid = in->nid, .handle = orch_rec_key_u64(in->handle),
		.size = (int64_t)in->size, .flags = in->flags,
		.nextents = (int64_t)in->nextents, .nblocks = (int64_t)in->nblocks,
	};
	out->crc = rec_crc_of(ORCH_REC_OBJ, out, NULL, 0);
}

/* --- bmap ----------------------------------------------------------------------- */

orch_failaddr_t orch_rec_bmap_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					int col, struct orch_bmap_irec *out)
{
	struct orch_rec_bmap r;
	bool typed = rec_cols(s, col, 7, &r);
	int fits = rec_u32(r.ag, &out->ag) & rec_u32(r.agbno, &out->agbno) &
		    rec_u32(r.len, &out->len) & rec_u32(r.flags, &out->flags);

	out->nid = r.nid;
	out->off = (uint64_t)r.off;
	if (!typed || !fits)
		return ORCH_THIS_ADDRESS;
	if (r.crc != rec_crc_of(ORCH_REC_BMAP, &r, NULL, 0))
		return ORCH_THIS_ADDRESS;
	if (r.nid < 1 || r.off < 0 || (out->flags & ~ORCH_REC_EXT_FLAGS))
		return ORCH_THIS_ADDRESS;
	if (out->off + out->len > ORCH_STORE_MAX_SIZE / ORCH_STORE_BLOCK)
		return ORCH_THIS_ADDRESS;
	if (!rec_ext_ok(st, out->ag, out->agbno, out->len, true))
		return ORCH_THIS_ADDRESS;
	return NULL;
}

void orch_rec_bmap_to_disk(const struct orch_bmap_irec *in, struct orch_rec_bmap *out)
{
	*out = (struct orch_rec_bmap){
		.nid = in->nid, .off = (int64_t)in->off, .ag = in->ag, .agbno = in->agbno,
		.len = in->len, .flags = in->flags,
	};
	out->crc = rec_crc_of(ORCH_REC_BMAP, out, NULL, 0);
}

/* --- rmap ----------------------------------------------------------------------- */

orch_failaddr_t orch_rec_rmap_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					int col, struct orch_rmap_irec *out)
{
	struct orch_rec_rmap r;
	bool typed = rec_cols(s, col, 7, &r);
	int fits = rec_u32(r.ag, &out->ag) & rec_u32(r.agbno, &out->agbno) &
		    rec_u32(r.len, &out->len) & rec_u32(r.flags, &out->flags);

	out->owner = r.owner;
	out->off = (uint64_t)r.off;
	if (!typed || !fits)
		return ORCH_THIS_ADDRESS;
	if (r.crc != rec_crc_of(ORCH_REC_RMAP, &r, NULL, 0))
		return ORCH_THIS_ADDRESS;
	if (r.owner == 0 || r.owner < ORCH_STORE_OWN_DEFECTIVE || r.off < 0 ||
	    (out->flags & ~ORCH_REC_EXT_FLAGS))
		return ORCH_THIS_ADDRESS;
	if (r.owner < 0 && (r.off != 0 || out->flags))
		return ORCH_THIS_ADDRESS;
	if (!rec_ext_ok(st, out->ag, out->agbno, out->len, true))
		return ORCH_THIS_ADDRESS;
	return NULL;
}

void orch_rec_rmap_to_disk(const struct orch_rmap_irec *in, struct orch_rec_rmap *out)
{
	*out = (struct orch_rec_rmap){
		.ag = in->ag, .agbno = in->agbno, .owner = in->owner, .off = (int64_t)in->off,
		.len = in->len, .flags = in->flags,
	};
	out->crc = rec_crc_of(ORCH_REC_RMAP, out, NULL, 0);
}

/* --- fsb, fsc ------------------------------------------------------------------- */

/* A free extent of fsb (ag, agbno, len) or fsc (ag, len, agbno). */
static orch_failaddr_t rec_free_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					  int col, enum orch_rec_tbl t, struct orch_fsb_irec *out)
{
	int64_t f[4];
	bool typed = rec_cols(s, col, 4, f);
	int64_t agbno = t == ORCH_REC_FSB ? f[1] : f[2], len = t == ORCH_REC_FSB ? f[2] : f[1];
	int fits = rec_u32(f[0], &out->ag) & rec_u32(agbno, &out->agbno) &
		    rec_u32(len, &out->len);

	if (!typed || !fits)
		return ORCH_THIS_ADDRESS;
	if (f[3] != orch_rec_crc(t, f, 3, NULL, 0))
		return ORCH_THIS_ADDRESS;
	if (!rec_ext_ok(st, out->ag, out->agbno, out->len, false))
		return ORCH_THIS_ADDRESS;
	return NULL;
}

orch_failaddr_t orch_rec_fsb_from_disk(const struct orch_store *st, sqlite3_stmt *s,
				       int col, struct orch_fsb_irec *out)
{
	return rec_free_from_disk(st, s, col, ORCH_REC_FSB, out);
}

orch_failaddr_t orch_rec_fsc_from_disk(const struct orch_store *st, sqlite3_stmt *s,
				       int col, struct orch_fsb_irec *out)
{
	return rec_free_from_disk(st, s, col, ORCH_REC_FSC, out);
}

void orch_rec_fsb_to_disk(const struct orch_fsb_irec *in, struct orch_rec_fsb *out)
{
	*out = (struct orch_rec_fsb){ .ag = in->ag, .agbno = in->agbno, .len = in->len };
	out->crc = rec_crc_of(ORCH_REC_FSB, out, NULL, 0);
}

void orch_rec_fsc_to_disk(const struct orch_fsb_irec *in, struct orch_rec_fsc *out)
{
	*out = (struct orch_rec_fsc){ .ag = in->ag, .len = in->len, .agbno = in->agbno };
	out->crc = rec_crc_of(ORCH_REC_FSC, out, NULL, 0);
}

/* --- refc ----------------------------------------------------------------------- */

orch_failaddr_t orch_rec_refc_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					int col, struct orch_refc_irec *out)
{
	struct orch_rec_refc r;
	bool typed = rec_cols(s, col, 5, &r);
	int fits = rec_u32(r.ag, &out->ag) & rec_u32(r.agbno, &out->agbno) &
		    rec_u32(r.len, &out->len);

	out->refcount = (uint64_t)r.refcount;
	if (!typed || !fits)
		return ORCH_THIS_ADDRESS;
	if (r.crc != rec_crc_of(ORCH_REC_REFC, &r, NULL, 0))
		return ORCH_THIS_ADDRESS;
	if (r.refcount < 2 || !rec_ext_ok(st, out->ag, out->agbno, out->len, true))
		return ORCH_THIS_ADDRESS;
	return NULL;
}

void orch_rec_refc_to_disk(const struct orch_refc_irec *in, struct orch_rec_refc *out)
{
	*out = (struct orch_rec_refc){
		.ag = in->ag, .agbno = in->agbno, .len = in->len,
		.refcount = (int64_t)in->refcount,
	};
	out->crc = rec_crc_of(ORCH_REC_REFC, out, NULL, 0);
}

/* --- csum ----------------------------------------------------------------------- */

orch_failaddr_t orch_rec_csum_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					int col, struct orch_csum_irec *out)
{
	struct orch_rec_csum r;
	const uint8_t *blob;
	bool typed, sized;
	int fits;

	typed = rec_cols(s, col, 3, &r);
	typed &= sqlite3_column_type(s, col + 4) == SQLITE_INTEGER;
	r.crc = sqlite3_column_int64(s, col + 4);
	typed &= sqlite3_column_type(s, col + 3) == SQLITE_BLOB;   /* before the value */
	blob = sqlite3_column_blob(s, col + 3);
	sized = blob && sqlite3_column_bytes(s, col + 3) == (int)sizeof(r.sums);
	fits = rec_u32(r.ag, &out->ag) & rec_u32(r.grp, &out->grp);
	out->valid = sized ? (uint64_t)r.valid : 0;   /* no sums: none is valid */
	memset(r.sums, 0, sizeof(r.sums));
	if (sized)
		memcpy(r.sums, blob, sizeof(r.sums));
	for (uint32_t i = 0; i < ORCH_REC_CSUM_GROUP; i++)
		out->sums[i] = orch_get_le32(r.sums + 4 * i);
	if (!typed || !fits || !sized)
		return ORCH_THIS_ADDRESS;
	if (r.crc != rec_crc_of(ORCH_REC_CSUM, &r, r.sums, sizeof(r.sums)))
		return ORCH_THIS_ADDRESS;
	if (out->valid == 0)      /* rows with no valid bit are deleted */
		return ORCH_THIS_ADDRESS;
	if (st && (out->ag >= st->st_ag_count ||
		   (uint64_t)out->grp * ORCH_REC_CSUM_GROUP >= store_ag_len(st, out->ag)))
		return ORCH_THIS_ADDRESS;
	return NULL;
}

void orch_rec_csum_to_disk(const struct orch_csum_irec *in, struct orch_rec_csum *out)
{
	out->ag = in->ag;
	out->grp = in->grp;
	out->valid = (int64_t)in->valid;
	for (uint32_t i = 0; i < ORCH_REC_CSUM_GROUP; i++)
		orch_put_le32(out->sums + 4 * i, in->sums[i]);
	out->crc = rec_crc_of(ORCH_REC_CSUM, out, out->sums, sizeof(out->sums));
}

void orch_rec_csum_bind(sqlite3_stmt *s, const struct orch_csum_irec *in)
{
	struct orch_rec_csum rec;

	orch_rec_csum_to_disk(in, &rec);
	rec_bind(s, &rec, 3);
	sqlite3_bind_blob(s, 4, rec.sums, sizeof(rec.sums), SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 5, rec.crc);
}

int orch_rec_csum_get(struct orch_rec_sq *q, uint32_t ag, int64_t grp,
		      struct orch_csum_irec *out)
{
	sqlite3_stmt *s;
	int rc = orch_rec_stmt(q, ORCH_REC_CSUM_GET, &s);

	memset(out, 0, sizeof(*out));
	out->ag = ag;
	out->grp = (uint32_t)grp;
	if (rc)
		return rc;
	sqlite3_bind_int64(s, 1, ag);
	sqlite3_bind_int64(s, 2, grp);
	rc = orch_rec_step(q, ORCH_REC_CSUM_GET);
	if (rc == 1) {
		if (orch_rec_csum_from_disk(NULL, s, 0, out)) {
			out->valid = 0;   /* damaged: its blocks have no sums */
			rc = 0;
		}
		orch_rec_reset(q, ORCH_REC_CSUM_GET);
		out->ag = ag;
		out->grp = (uint32_t)grp;
	}
	return rc;
}

/* --- bad ------------------------------------------------------------------------ */

orch_failaddr_t orch_rec_bad_from_disk(const struct orch_store *st, sqlite3_stmt *s,
				       int col, struct orch_bad_irec *out)
{
	struct orch_rec_bad r;
	bool typed = rec_cols(s, col, 6, &r);
	int fits = rec_u32(r.ag, &out->ag) & rec_u32(r.agbno, &out->agbno) &
		    rec_u32(r.len, &out->len) & rec_u32(r.source, &out->source);

	out->first_seen = r.first_seen;
	if (!typed || !fits)
		return ORCH_THIS_ADDRESS;
	if (r.crc != rec_crc_of(ORCH_REC_BAD, &r, NULL, 0))
		return ORCH_THIS_ADDRESS;
	if (!rec_ext_ok(st, out->ag, out->agbno, out->len, true))
		return ORCH_THIS_ADDRESS;
	return NULL;
}

void orch_rec_bad_to_disk(const struct orch_bad_irec *in, struct orch_rec_bad *out)
{
	*out = (struct orch_rec_bad){
		.ag = in->ag, .agbno = in->agbno, .len = in->len,
		.first_seen = in->first_seen, .source = in->source,
	};
	out->crc = rec_crc_of(ORCH_REC_BAD, out, NULL, 0);
}

/* --- work ----------------------------------------------------------------------- */

orch_failaddr_t orch_rec_work_from_disk(sqlite3_stmt *s, int col, struct orch_work_irec *out)
{
	struct orch_rec_work r;
	bool typed = rec_cols(s, col, 7, &r);
	int fits = rec_u32(r.type, &out->type);

	out->seq = r.seq;
	out->nid = r.nid;
	out->a = r.a;
	out->b = r.b;
	out->progress = r.progress;
	if (!typed || !fits)
		return ORCH_THIS_ADDRESS;
	if (r.crc != rec_crc_of(ORCH_REC_WORK, &r, NULL, 0))
		return ORCH_THIS_ADDRESS;
	/* The sequence and the object are the checker's (I10): an item the
	 * writer leaves alone at open must be one the checker reports. */
	if (out->type < STORE_WORK_TRUNCATE || out->type > STORE_WORK_DELETE)
		return ORCH_THIS_ADDRESS;
	return NULL;
}

void orch_rec_work_to_disk(const struct orch_work_irec *in, struct orch_rec_work *out)
{
	*out = (struct orch_rec_work){
		.seq = in->seq, .type = in->type, .nid = in->nid, .a = in->a, .b = in->b,
		.progress = in->progress,
	};
	out->crc = rec_crc_of(ORCH_REC_WORK, out, NULL, 0);
}

/* --- Binders (smeta and csum, which bind a text or a blob, are above) ----------- */

/* Every column of the persistent form is an int64, crc last. */
#define REC_BINDER(tbl, irec)                                                  \
	void orch_rec_##tbl##_bind(sqlite3_stmt *s, const struct orch_##irec##_irec *in) \
	{                                                                      \
		struct orch_rec_##tbl rec;                                     \
									       \
		orch_rec_##tbl##_to_disk(in, &rec);                            \
		rec_bind(s, &rec, (int)(sizeof(rec) / sizeof(int64_t)));       \
	}

REC_BINDER(agstat, agstat)
REC_BINDER(obj, obj)
REC_BINDER(bmap, bmap)
REC_BINDER(rmap, rmap)
REC_BINDER(fsb, fsb)
REC_BINDER(fsc, fsb)
REC_BINDER(refc, refc)
REC_BINDER(bad, bad)
REC_BINDER(work, work)
#undef REC_BINDER

/* --- Statements and errors --------------------------------------------------------- */

static const char *const rec_stmt_sql[ORCH_REC_NSTMT] = {
#define ORCH_REC_SQL_(name, sql) [ORCH_REC_##name] = sql,
	ORCH_REC_STMTS(ORCH_REC_SQL_)
#undef ORCH_REC_SQL_
};

static const char *const rec_stmt_names[ORCH_REC_NSTMT] = {
#define ORCH_REC_NAME_(name, sql) [ORCH_REC_##name] = #name,
	ORCH_REC_STMTS(ORCH_REC_NAME_)
#undef ORCH_REC_NAME_
};

const char *orch_rec_stmt_name(enum orch_rec_stmt id)
{
	return rec_stmt_names[id];
}

int orch_rec_sql_err(sqlite3 *db, int rc, const char *what)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "store.db damaged (%s): %s", what,
				   sqlite3_errmsg(db));
		return -ORCH_ECORRUPT;
	default:
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "store.db: %s: %s", what, sqlite3_errmsg(db));
		return -EIO;
	}
}

void orch_rec_sq_init(struct orch_rec_sq *q, sqlite3 *db)
{
	memset(q, 0, sizeof(*q));
	q->q_db = db;
}

void orch_rec_sq_fini(struct orch_rec_sq *q)
{
	for (int i = 0; i < ORCH_REC_NSTMT; i++) {
		sqlite3_finalize(q->q_stmt[i]);
		q->q_stmt[i] = NULL;
	}
}

int orch_rec_stmt(struct orch_rec_sq *q, enum orch_rec_stmt id, sqlite3_stmt **out)
{
	sqlite3_stmt *s = q->q_stmt[id];

	if (!s) {
		int rc = sqlite3_prepare_v3(q->q_db, rec_stmt_sql[id], -1,
					    SQLITE_PREPARE_PERSISTENT, &s, NULL);

		if (rc != SQLITE_OK) {
			*out = NULL;
			return orch_rec_sql_err(q->q_db, rc, rec_stmt_names[id]);
		}
		q->q_stmt[id] = s;
	} else {
		sqlite3_reset(s);
		sqlite3_clear_bindings(s);
	}
	*out = s;
	return 0;
}

int orch_rec_step(struct orch_rec_sq *q, enum orch_rec_stmt id)
{
	sqlite3_stmt *s = q->q_stmt[id];
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW)
		return 1;
	/* The error is logged before the reset, which may replace its message. */
	if (rc != SQLITE_DONE)
		rc = orch_rec_sql_err(q->q_db, rc, rec_stmt_names[id]);
	else
		rc = 0;
	sqlite3_reset(s);
	return rc;
}

int orch_rec_exec(struct orch_rec_sq *q, enum orch_rec_stmt id)
{
	int rc;

	do
		rc = orch_rec_step(q, id);
	while (rc == 1);
	return rc;
}

void orch_rec_reset(struct orch_rec_sq *q, enum orch_rec_stmt id)
{
	sqlite3_reset(q->q_stmt[id]);
}
