/*
 * The extent store's records: the one place that knows how a row of
 * store.db looks (docs/SPEC-store.md describes it for operators; keep the
 * two in step).  Everything that reads or writes a store table goes
 * through here: the schema, every statement, and per table a persistent
 * form (struct orch_rec_<table>: the columns as SQLite stores them, crc
 * last), a host-native form (struct orch_<table>_irec), and
 *
 *   orch_rec_<table>_from_disk()  reads a row's columns, decodes them into
 *                                 the irec, then verifies the record: its
 *                                 column types, its CRC and the ranges of
 *                                 its fields.  Returns NULL or the failing
 *                                 check (orch_failaddr_t).  The irec is
 *                                 filled even when a check fails, for the
 *                                 checker and repair, which report a bad
 *                                 record and go on.
 *   orch_rec_<table>_to_disk()    encodes an irec with its CRC.
 *   orch_rec_<table>_bind()       binds the encoded record to ?1..?n of a
 *                                 statement, in column order.
 *
 * Rows are selected whole (every column in table order, crc last), so a
 * decoder never needs a key from elsewhere.  Callers log a failure with
 * the table, key and object, and return -EUCLEAN (or -EIO to a client).
 * Nothing here touches the store's state: tests and fuzzers link it alone.
 */
#ifndef ORCH_STORE_STORE_ONDISK_H
#define ORCH_STORE_STORE_ONDISK_H

#include <assert.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/util.h"

struct orch_store;

/* --- Schema ------------------------------------------------------------------ */

/*
 * The tables.  Every integer is an SQLite INTEGER (signed 64 bits); u64
 * handles, which may reach 2^63, are stored through orch_rec_key_u64() so
 * that they sort as unsigned; the csum valid bitmap, never sorted, is stored
 * as an (int64_t) cast of its bits.  Every record ends in crc = crc32c of
 * its fields (orch_rec_crc), so a read or a scrub notices bit rot or a
 * stray write in any single record.  The tuple (ag, agbno) sorts as the
 * global block number ag * ag_blocks + agbno.
 */
#define ORCH_REC_SCHEMA \
	"CREATE TABLE smeta(k TEXT PRIMARY KEY, v INTEGER NOT NULL," \
	"  crc INTEGER NOT NULL) WITHOUT ROWID;" \
	"CREATE TABLE agstat(ag INTEGER PRIMARY KEY, blocks INTEGER NOT NULL," \
	"  freeblks INTEGER NOT NULL, longest INTEGER NOT NULL," \
	"  nfree INTEGER NOT NULL, nrmap INTEGER NOT NULL, nrefc INTEGER NOT NULL," \
	"  crc INTEGER NOT NULL) WITHOUT ROWID;" \
	"CREATE TABLE obj(nid INTEGER PRIMARY KEY, handle INTEGER NOT NULL," \
	"  size INTEGER NOT NULL, flags INTEGER NOT NULL," \
	"  nextents INTEGER NOT NULL, nblocks INTEGER NOT NULL," \
	"  crc INTEGER NOT NULL) WITHOUT ROWID;" \
	"CREATE INDEX obj_handle ON obj(handle);" \
	"CREATE TABLE bmap(nid INTEGER NOT NULL, off INTEGER NOT NULL," \
	"  ag INTEGER NOT NULL, agbno INTEGER NOT NULL, len INTEGER NOT NULL," \
	"  flags INTEGER NOT NULL, crc INTEGER NOT NULL," \
	"  PRIMARY KEY(nid, off)) WITHOUT ROWID;" \
	"CREATE TABLE rmap(ag INTEGER NOT NULL, agbno INTEGER NOT NULL," \
	"  owner INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL," \
	"  flags INTEGER NOT NULL, crc INTEGER NOT NULL," \
	"  PRIMARY KEY(ag, agbno, owner, off)) WITHOUT ROWID;" \
	"CREATE TABLE fsb(ag INTEGER NOT NULL, agbno INTEGER NOT NULL," \
	"  len INTEGER NOT NULL, crc INTEGER NOT NULL," \
	"  PRIMARY KEY(ag, agbno)) WITHOUT ROWID;" \
	"CREATE TABLE fsc(ag INTEGER NOT NULL, len INTEGER NOT NULL," \
	"  agbno INTEGER NOT NULL, crc INTEGER NOT NULL," \
	"  PRIMARY KEY(ag, len, agbno)) WITHOUT ROWID;" \
	"CREATE TABLE refc(ag INTEGER NOT NULL, agbno INTEGER NOT NULL," \
	"  len INTEGER NOT NULL, refcount INTEGER NOT NULL, crc INTEGER NOT NULL," \
	"  PRIMARY KEY(ag, agbno)) WITHOUT ROWID;" \
	"CREATE TABLE csum(ag INTEGER NOT NULL, grp INTEGER NOT NULL," \
	"  valid INTEGER NOT NULL, sums BLOB NOT NULL, crc INTEGER NOT NULL," \
	"  PRIMARY KEY(ag, grp)) WITHOUT ROWID;" \
	"CREATE TABLE bad(ag INTEGER NOT NULL, agbno INTEGER NOT NULL," \
	"  len INTEGER NOT NULL, first_seen INTEGER NOT NULL," \
	"  source INTEGER NOT NULL, crc INTEGER NOT NULL," \
	"  PRIMARY KEY(ag, agbno)) WITHOUT ROWID;" \
	"CREATE TABLE work(seq INTEGER PRIMARY KEY, type INTEGER NOT NULL," \
	"  nid INTEGER NOT NULL, a INTEGER NOT NULL, b INTEGER NOT NULL," \
	"  progress INTEGER NOT NULL, crc INTEGER NOT NULL) WITHOUT ROWID;"

/* Blocks per csum record: one row holds 64 crc32c values and a valid bitmap. */
#define ORCH_REC_CSUM_GROUP 64u
#define ORCH_REC_CSUM_BYTES (ORCH_REC_CSUM_GROUP * 4u)

/* obj.flags */
#define ORCH_REC_OBJ_REFLINK 0x1u     /* may share blocks (set by clones) */
#define ORCH_REC_OBJ_DYING 0x2u       /* being deleted by a work item: absent */
#define ORCH_REC_OBJ_FLAGS 0x3u
/* bmap / rmap flags */
#define ORCH_REC_EXT_UNWRITTEN 0x1u   /* allocated, reads as zeros (unused so far) */
#define ORCH_REC_EXT_FLAGS 0x1u

/* Record CRC domains: the table a record belongs to is part of its CRC. */
enum orch_rec_tbl {
	ORCH_REC_AGSTAT = 1,
	ORCH_REC_OBJ,
	ORCH_REC_BMAP,
	ORCH_REC_RMAP,
	ORCH_REC_FSB,
	ORCH_REC_FSC,
	ORCH_REC_REFC,
	ORCH_REC_CSUM,
	ORCH_REC_BAD,
	ORCH_REC_WORK,
	ORCH_REC_SMETA,           /* fields: v; blob: the key's text */
};

/* The table's name, for logs ("bmap"). */
const char *orch_rec_tbl_name(enum orch_rec_tbl t);

/*
 * crc32c over the table tag and @n fields, each as 8 little-endian bytes,
 * then @blob (may be NULL).  In the column order of the table, crc excluded.
 */
uint32_t orch_rec_crc(enum orch_rec_tbl t, const int64_t *f, int n,
		      const void *blob, size_t bloblen);

/* u64 <-> SQLite INTEGER, order-preserving (flip the sign bit). */
static inline int64_t orch_rec_key_u64(uint64_t v)
{
	return (int64_t)(v ^ 0x8000000000000000ull);
}

static inline uint64_t orch_rec_unkey_u64(int64_t v)
{
	return (uint64_t)v ^ 0x8000000000000000ull;
}

/* Little-endian fields of blobs and of the superblock. */
static inline void orch_put_le32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline void orch_put_le64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t orch_get_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static inline uint64_t orch_get_le64(const uint8_t *p)
{
	return (uint64_t)orch_get_le32(p) | (uint64_t)orch_get_le32(p + 4) << 32;
}

/* --- Records ------------------------------------------------------------------ */

/*
 * Persistent forms: the columns in table order, as stored (int64), crc
 * last.  Each is an array of int64_t in disguise (asserted below), which
 * is how the CRC walks it.
 */
struct orch_rec_smeta { int64_t v, crc; };           /* + the key text */
struct orch_rec_agstat { int64_t ag, blocks, freeblks, longest, nfree, nrmap, nrefc, crc; };
struct orch_rec_obj { int64_t nid, handle, size, flags, nextents, nblocks, crc; };
struct orch_rec_bmap { int64_t nid, off, ag, agbno, len, flags, crc; };
struct orch_rec_rmap { int64_t ag, agbno, owner, off, len, flags, crc; };
struct orch_rec_fsb { int64_t ag, agbno, len, crc; };
struct orch_rec_fsc { int64_t ag, len, agbno, crc; };
struct orch_rec_refc { int64_t ag, agbno, len, refcount, crc; };
struct orch_rec_csum { int64_t ag, grp, valid, crc; uint8_t sums[ORCH_REC_CSUM_BYTES]; };
struct orch_rec_bad { int64_t ag, agbno, len, first_seen, source, crc; };
struct orch_rec_work { int64_t seq, type, nid, a, b, progress, crc; };

static_assert(sizeof(struct orch_rec_agstat) == 8 * 8, "agstat rec");
static_assert(sizeof(struct orch_rec_obj) == 7 * 8, "obj rec");
static_assert(sizeof(struct orch_rec_bmap) == 7 * 8, "bmap rec");
static_assert(sizeof(struct orch_rec_rmap) == 7 * 8, "rmap rec");
static_assert(sizeof(struct orch_rec_fsb) == 4 * 8, "fsb rec");
static_assert(sizeof(struct orch_rec_fsc) == 4 * 8, "fsc rec");
static_assert(sizeof(struct orch_rec_refc) == 5 * 8, "refc rec");
static_assert(offsetof(struct orch_rec_csum, sums) == 4 * 8, "csum rec");
static_assert(sizeof(struct orch_rec_bad) == 6 * 8, "bad rec");
static_assert(sizeof(struct orch_rec_work) == 7 * 8, "work rec");

/* Host-native forms.  Block numbers are AG-relative, lengths in blocks. */
struct orch_smeta_irec {
	char k[16];               /* NUL-terminated; longer keys fail verification */
	int64_t v;
};

struct orch_agstat_irec {
	uint32_t ag;
	uint32_t blocks;          /* the AG's length */
	uint64_t freeblks, longest, nfree, nrmap, nrefc;
};

struct orch_obj_irec {
	int64_t nid;              /* >= 1, never reused */
	uint64_t handle;
	uint64_t size;            /* bytes */
	uint32_t flags;           /* ORCH_REC_OBJ_* */
	uint64_t nextents, nblocks;
};

struct orch_bmap_irec {
	int64_t nid;
	uint64_t off;             /* object block */
	uint32_t ag, agbno, len;
	uint32_t flags;           /* ORCH_REC_EXT_* */
};

struct orch_rmap_irec {
	uint32_t ag, agbno;
	int64_t owner;            /* nid, or ORCH_STORE_OWN_* below 0 */
	uint64_t off;             /* object block (0 for special owners) */
	uint32_t len;
	uint32_t flags;
};

struct orch_fsb_irec {        /* fsb and fsc */
	uint32_t ag, agbno, len;
};

struct orch_refc_irec {
	uint32_t ag, agbno, len;
	uint64_t refcount;        /* >= 2 */
};

struct orch_csum_irec {
	uint32_t ag;
	uint32_t grp;             /* blocks grp * 64 .. grp * 64 + 63 */
	uint64_t valid;           /* bit i: block grp * 64 + i has sums[i] */
	uint32_t sums[ORCH_REC_CSUM_GROUP];
};

struct orch_bad_irec {
	uint32_t ag, agbno, len;
	int64_t first_seen;       /* seconds since the epoch */
	uint32_t source;          /* STORE_BAD_* */
};

struct orch_work_irec {
	int64_t seq;
	uint32_t type;            /* enum store_work_type */
	int64_t nid;
	int64_t a, b, progress;
};

/*
 * Decoders: the row's columns from @col on, in table order with crc last
 * (the statements' *_COLS lists).  @st gives the geometry for the range
 * checks (ag, agbno + len, maxext); NULL leaves those out.  A csum row
 * whose sums blob is missing or not 256 bytes decodes with valid = 0.
 */
orch_failaddr_t orch_rec_smeta_from_disk(sqlite3_stmt *s, int col, struct orch_smeta_irec *out);
orch_failaddr_t orch_rec_agstat_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					  int col, struct orch_agstat_irec *out);
orch_failaddr_t orch_rec_obj_from_disk(sqlite3_stmt *s, int col, struct orch_obj_irec *out);
orch_failaddr_t orch_rec_bmap_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					int col, struct orch_bmap_irec *out);
orch_failaddr_t orch_rec_rmap_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					int col, struct orch_rmap_irec *out);
orch_failaddr_t orch_rec_fsb_from_disk(const struct orch_store *st, sqlite3_stmt *s,
				       int col, struct orch_fsb_irec *out);
orch_failaddr_t orch_rec_fsc_from_disk(const struct orch_store *st, sqlite3_stmt *s,
				       int col, struct orch_fsb_irec *out);
orch_failaddr_t orch_rec_refc_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					int col, struct orch_refc_irec *out);
orch_failaddr_t orch_rec_csum_from_disk(const struct orch_store *st, sqlite3_stmt *s,
					int col, struct orch_csum_irec *out);
orch_failaddr_t orch_rec_bad_from_disk(const struct orch_store *st, sqlite3_stmt *s,
				       int col, struct orch_bad_irec *out);
orch_failaddr_t orch_rec_work_from_disk(sqlite3_stmt *s, int col, struct orch_work_irec *out);

/*
 * For the checker, which reports each rule itself: the row's integer
 * columns from @col on into @f as SQLite converts them, in table order and
 * crc last (orch_rec_nfields(t) + 1 values; smeta: v, crc; csum: ag, grp,
 * valid, crc, the sums blob left to the caller).  False if one is not an
 * INTEGER.
 */
bool orch_rec_read(enum orch_rec_tbl t, sqlite3_stmt *s, int col, int64_t *f);
/* Fields before crc of a table's record: f[orch_rec_nfields(t)] is its crc. */
int orch_rec_nfields(enum orch_rec_tbl t);
/*
 * Whether the crc of record @f (as orch_rec_read gives it) matches its
 * fields and @blob (csum: the sums as stored, any length; smeta: the key);
 * *@computed is the CRC it should have.
 */
bool orch_rec_crc_ok(enum orch_rec_tbl t, const int64_t *f, const void *blob, size_t bloblen,
		     uint32_t *computed);
/* Sets the crc of record @f (fields in table order; not csum or smeta). */
void orch_rec_seal(enum orch_rec_tbl t, int64_t *f);

/* Encoders: the persistent form with its CRC. */
void orch_rec_smeta_to_disk(const struct orch_smeta_irec *in, struct orch_rec_smeta *out);
void orch_rec_agstat_to_disk(const struct orch_agstat_irec *in, struct orch_rec_agstat *out);
void orch_rec_obj_to_disk(const struct orch_obj_irec *in, struct orch_rec_obj *out);
void orch_rec_bmap_to_disk(const struct orch_bmap_irec *in, struct orch_rec_bmap *out);
void orch_rec_rmap_to_disk(const struct orch_rmap_irec *in, struct orch_rec_rmap *out);
void orch_rec_fsb_to_disk(const struct orch_fsb_irec *in, struct orch_rec_fsb *out);
void orch_rec_fsc_to_disk(const struct orch_fsb_irec *in, struct orch_rec_fsc *out);
void orch_rec_refc_to_disk(const struct orch_refc_irec *in, struct orch_rec_refc *out);
void orch_rec_csum_to_disk(const struct orch_csum_irec *in, struct orch_rec_csum *out);
void orch_rec_bad_to_disk(const struct orch_bad_irec *in, struct orch_rec_bad *out);
void orch_rec_work_to_disk(const struct orch_work_irec *in, struct orch_rec_work *out);

/*
 * Binders: encode, then bind every column (crc included) to ?1..?n of @s,
 * in table order (INSERT ... VALUES(?1, ...), or an UPDATE naming the same
 * numbers).  smeta binds ?1 = k, ?2 = v, ?3 = crc.  The csum blob is
 * copied (SQLITE_TRANSIENT).
 */
void orch_rec_smeta_bind(sqlite3_stmt *s, const struct orch_smeta_irec *in);
void orch_rec_agstat_bind(sqlite3_stmt *s, const struct orch_agstat_irec *in);
void orch_rec_obj_bind(sqlite3_stmt *s, const struct orch_obj_irec *in);
void orch_rec_bmap_bind(sqlite3_stmt *s, const struct orch_bmap_irec *in);
void orch_rec_rmap_bind(sqlite3_stmt *s, const struct orch_rmap_irec *in);
void orch_rec_fsb_bind(sqlite3_stmt *s, const struct orch_fsb_irec *in);
void orch_rec_fsc_bind(sqlite3_stmt *s, const struct orch_fsb_irec *in);
void orch_rec_refc_bind(sqlite3_stmt *s, const struct orch_refc_irec *in);
void orch_rec_csum_bind(sqlite3_stmt *s, const struct orch_csum_irec *in);
void orch_rec_bad_bind(sqlite3_stmt *s, const struct orch_bad_irec *in);
void orch_rec_work_bind(sqlite3_stmt *s, const struct orch_work_irec *in);

/* --- Statements ----------------------------------------------------------------- */

/* Whole rows, in table order, crc last: what the decoders read. */
#define ORCH_REC_SMETA_COLS "k, v, crc"
#define ORCH_REC_AGSTAT_COLS "ag, blocks, freeblks, longest, nfree, nrmap, nrefc, crc"
#define ORCH_REC_OBJ_COLS "nid, handle, size, flags, nextents, nblocks, crc"
#define ORCH_REC_BMAP_COLS "nid, off, ag, agbno, len, flags, crc"
#define ORCH_REC_RMAP_COLS "ag, agbno, owner, off, len, flags, crc"
#define ORCH_REC_FSB_COLS "ag, agbno, len, crc"
#define ORCH_REC_FSC_COLS "ag, len, agbno, crc"
#define ORCH_REC_REFC_COLS "ag, agbno, len, refcount, crc"
#define ORCH_REC_CSUM_COLS "ag, grp, valid, sums, crc"
#define ORCH_REC_BAD_COLS "ag, agbno, len, first_seen, source, crc"
#define ORCH_REC_WORK_COLS "seq, type, nid, a, b, progress, crc"

#define ORCH_REC_OUTSIDE(t) \
	"SELECT ag, count(*) FROM " t " WHERE ag < 0 GROUP BY ag" \
	" UNION ALL SELECT ag, count(*) FROM " t " WHERE ag >= ?1 GROUP BY ag"

/*
 * Every statement the store runs on store.db.  X(name, sql).  Prepared on
 * first use per connection (struct orch_rec_sq) and kept.
 */
#define ORCH_REC_STMTS(X) \
	/* Transactions */ \
	X(BEGIN, "BEGIN") \
	X(BEGIN_IMMEDIATE, "BEGIN IMMEDIATE") \
	X(COMMIT, "COMMIT") \
	X(ROLLBACK, "ROLLBACK") \
	X(SAVEPOINT, "SAVEPOINT op") \
	X(RELEASE, "RELEASE op") \
	X(ROLLBACK_TO, "ROLLBACK TO op") \
	X(SNAP_BEGIN, "SELECT 1 FROM smeta LIMIT 1") \
	/* smeta */ \
	X(SMETA_GET, "SELECT " ORCH_REC_SMETA_COLS " FROM smeta WHERE k=?1") \
	X(SMETA_ALL, "SELECT " ORCH_REC_SMETA_COLS " FROM smeta ORDER BY k") \
	X(SMETA_INS, "INSERT INTO smeta VALUES(?1,?2,?3)") \
	X(SMETA_PUT, "UPDATE smeta SET v=?2, crc=?3 WHERE k=?1") \
	/* agstat */ \
	X(AG_GET, "SELECT " ORCH_REC_AGSTAT_COLS " FROM agstat WHERE ag=?1") \
	X(AG_ALL, "SELECT " ORCH_REC_AGSTAT_COLS " FROM agstat ORDER BY ag") \
	X(AG_PUT, "INSERT OR REPLACE INTO agstat VALUES(?1,?2,?3,?4,?5,?6,?7,?8)") \
	/* obj */ \
	X(OBJ_BY_HANDLE, "SELECT " ORCH_REC_OBJ_COLS " FROM obj WHERE handle=?1") \
	X(OBJ_LIVE_BY_HANDLE, "SELECT " ORCH_REC_OBJ_COLS " FROM obj" \
			      " WHERE handle=?1 AND (flags & 2)=0") \
	X(OBJ_BY_NID, "SELECT " ORCH_REC_OBJ_COLS " FROM obj WHERE nid=?1") \
	X(OBJ_ALL, "SELECT " ORCH_REC_OBJ_COLS " FROM obj ORDER BY nid") \
	X(OBJ_LIVE_AFTER, "SELECT " ORCH_REC_OBJ_COLS " FROM obj WHERE handle>?1" \
			  " AND (flags & 2)=0 ORDER BY handle LIMIT ?2") \
	X(OBJ_PUT, "INSERT OR REPLACE INTO obj VALUES(?1,?2,?3,?4,?5,?6,?7)") \
	/* The handle of a nid never changes; leaving it out spares the index. */ \
	X(OBJ_UPD, "UPDATE obj SET size=?3, flags=?4, nextents=?5, nblocks=?6, crc=?7" \
		   " WHERE nid=?1") \
	X(OBJ_DEL, "DELETE FROM obj WHERE nid=?1") \
	/* bmap */ \
	X(BMAP_LE, "SELECT " ORCH_REC_BMAP_COLS " FROM bmap WHERE nid=?1 AND off<=?2" \
		   " ORDER BY off DESC LIMIT 1") \
	X(BMAP_RANGE, "SELECT " ORCH_REC_BMAP_COLS " FROM bmap WHERE nid=?1 AND off>?2" \
		      " AND off<?3 ORDER BY off") \
	X(BMAP_LAST, "SELECT " ORCH_REC_BMAP_COLS " FROM bmap WHERE nid=?1 AND off<?2" \
		     " ORDER BY off DESC LIMIT 1") \
	X(BMAP_FROM, "SELECT " ORCH_REC_BMAP_COLS " FROM bmap WHERE nid=?1 AND off>=?2" \
		     " ORDER BY off") \
	X(BMAP_ALL, "SELECT " ORCH_REC_BMAP_COLS " FROM bmap ORDER BY nid, off") \
	X(BMAP_GET, "SELECT " ORCH_REC_BMAP_COLS " FROM bmap WHERE nid=?1 AND off=?2") \
	/* The extent covering ?2, if any, then every later one. */ \
	X(BMAP_WALK, "SELECT " ORCH_REC_BMAP_COLS " FROM bmap WHERE nid=?1 AND off>=" \
		     "(SELECT COALESCE(MAX(off), 0) FROM bmap WHERE nid=?1 AND off<=?2)" \
		     " ORDER BY off") \
	X(BMAP_INS, "INSERT INTO bmap VALUES(?1,?2,?3,?4,?5,?6,?7)") \
	X(BMAP_PUT, "INSERT OR REPLACE INTO bmap VALUES(?1,?2,?3,?4,?5,?6,?7)") \
	X(BMAP_DEL, "DELETE FROM bmap WHERE nid=?1 AND off=?2") \
	X(BMAP_DEL_OBJ, "DELETE FROM bmap WHERE nid=?1") \
	X(BMAP_COUNT, "SELECT count(*) FROM (SELECT 1 FROM bmap WHERE nid=?1 AND off>=?2" \
		      " AND off<?3 LIMIT ?4)") \
	/* rmap */ \
	X(RMAP_GET, "SELECT " ORCH_REC_RMAP_COLS " FROM rmap" \
		    " WHERE ag=?1 AND agbno=?2 AND owner=?3 AND off=?4") \
	X(RMAP_INS, "INSERT INTO rmap VALUES(?1,?2,?3,?4,?5,?6,?7)") \
	X(RMAP_DEL, "DELETE FROM rmap WHERE ag=?1 AND agbno=?2 AND owner=?3 AND off=?4") \
	/* Records from (?2, ?3, ?4) on in AG ?1, in key order. */ \
	X(RMAP_AFTER, "SELECT " ORCH_REC_RMAP_COLS " FROM rmap WHERE ag=?1" \
		      " AND (agbno, owner, off) > (?2, ?3, ?4) ORDER BY ag, agbno, owner, off") \
	/* Records starting in [?2, ?3) of AG ?1 and after (?4, ?5, ?6), with \
	 * their owner's handle (NULL for special owners and lost objects). */ \
	X(RMAP_OWNERS, "SELECT r.ag, r.agbno, r.owner, r.off, r.len, r.flags, r.crc," \
		       " o.handle FROM rmap r LEFT JOIN obj o ON r.owner > 0 AND o.nid = r.owner" \
		       " WHERE r.ag=?1 AND r.agbno>=?2 AND r.agbno<?3" \
		       " AND (r.agbno, r.owner, r.off) > (?4, ?5, ?6)" \
		       " ORDER BY r.ag, r.agbno, r.owner, r.off") \
	X(RMAP_FS_ANY, "SELECT 1 FROM rmap WHERE ag=?1 AND agbno>?2 AND agbno<?3" \
		       " AND agbno+len>?4 AND owner=-1 LIMIT 1") \
	/* fsb, fsc */ \
	X(FSB_LE, "SELECT " ORCH_REC_FSB_COLS " FROM fsb WHERE ag=?1 AND agbno<=?2" \
		  " ORDER BY agbno DESC LIMIT 1") \
	X(FSB_GT, "SELECT " ORCH_REC_FSB_COLS " FROM fsb WHERE ag=?1 AND agbno>?2" \
		  " ORDER BY agbno") \
	X(FSB_RANGE, "SELECT " ORCH_REC_FSB_COLS " FROM fsb WHERE ag=?1 AND agbno>=?2" \
		     " AND agbno<?3 ORDER BY ag, agbno") \
	X(FSB_AT, "SELECT " ORCH_REC_FSB_COLS " FROM fsb WHERE ag=?1 AND agbno=?2") \
	X(FSB_INS, "INSERT INTO fsb VALUES(?1,?2,?3,?4)") \
	X(FSB_DEL, "DELETE FROM fsb WHERE ag=?1 AND agbno=?2") \
	X(FSC_INS, "INSERT INTO fsc VALUES(?1,?2,?3,?4)") \
	X(FSC_DEL, "DELETE FROM fsc WHERE ag=?1 AND len=?2 AND agbno=?3") \
	X(FSC_MAX, "SELECT " ORCH_REC_FSC_COLS " FROM fsc WHERE ag=?1" \
		   " ORDER BY len DESC LIMIT 1") \
	/* csum */ \
	X(CSUM_GET, "SELECT " ORCH_REC_CSUM_COLS " FROM csum WHERE ag=?1 AND grp=?2") \
	X(CSUM_RANGE, "SELECT " ORCH_REC_CSUM_COLS " FROM csum WHERE ag=?1 AND grp>=?2" \
		      " AND grp<=?3 ORDER BY grp") \
	X(CSUM_PUT, "INSERT OR REPLACE INTO csum VALUES(?1,?2,?3,?4,?5)") \
	X(CSUM_DEL, "DELETE FROM csum WHERE ag=?1 AND grp=?2") \
	/* refc */ \
	X(REFC_WIN, "SELECT " ORCH_REC_REFC_COLS " FROM refc WHERE ag=?1 AND agbno>=?2" \
		    " AND agbno<=?3 ORDER BY agbno") \
	X(REFC_INS, "INSERT INTO refc VALUES(?1,?2,?3,?4,?5)") \
	X(REFC_DEL, "DELETE FROM refc WHERE ag=?1 AND agbno=?2") \
	/* bad */ \
	X(BAD_WIN, "SELECT " ORCH_REC_BAD_COLS " FROM bad WHERE ag=?1 AND agbno>=?2" \
		   " AND agbno<?3 ORDER BY agbno") \
	X(BAD_LE, "SELECT " ORCH_REC_BAD_COLS " FROM bad WHERE ag=?1 AND agbno<=?2" \
		  " ORDER BY agbno DESC LIMIT 1") \
	X(BAD_AT, "SELECT " ORCH_REC_BAD_COLS " FROM bad WHERE ag=?1 AND agbno=?2") \
	X(BAD_INS, "INSERT INTO bad VALUES(?1,?2,?3,?4,?5,?6)") \
	X(BAD_DEL, "DELETE FROM bad WHERE ag=?1 AND agbno=?2") \
	/* work */ \
	X(WORK_PUT, "INSERT OR REPLACE INTO work VALUES(?1,?2,?3,?4,?5,?6,?7)") \
	X(WORK_DEL, "DELETE FROM work WHERE seq=?1") \
	X(WORK_ALL, "SELECT " ORCH_REC_WORK_COLS " FROM work ORDER BY seq") \
	X(WORK_BY_NID, "SELECT " ORCH_REC_WORK_COLS " FROM work ORDER BY nid, seq") \
	/* The checker: every record of AG ?1, whatever its fields hold */ \
	X(RMAP_OF_AG, "SELECT " ORCH_REC_RMAP_COLS " FROM rmap WHERE ag=?1" \
		      " ORDER BY ag, agbno, owner, off") \
	X(FSB_OF_AG, "SELECT " ORCH_REC_FSB_COLS " FROM fsb WHERE ag=?1 ORDER BY ag, agbno") \
	X(FSC_OF_AG, "SELECT " ORCH_REC_FSC_COLS " FROM fsc WHERE ag=?1 ORDER BY agbno, len") \
	X(REFC_OF_AG, "SELECT " ORCH_REC_REFC_COLS " FROM refc WHERE ag=?1 ORDER BY ag, agbno") \
	X(CSUM_OF_AG, "SELECT " ORCH_REC_CSUM_COLS " FROM csum WHERE ag=?1 ORDER BY ag, grp") \
	X(BAD_OF_AG, "SELECT " ORCH_REC_BAD_COLS " FROM bad WHERE ag=?1 ORDER BY ag, agbno") \
	/* ... and the records of no AG: (ag, count) below 0 or at ?1 and up. \
	 * Two index ranges; "ag < 0 OR ag >= ?" would scan the table. */ \
	X(AGSTAT_OUTSIDE, ORCH_REC_OUTSIDE("agstat")) \
	X(RMAP_OUTSIDE, ORCH_REC_OUTSIDE("rmap")) \
	X(FSB_OUTSIDE, ORCH_REC_OUTSIDE("fsb")) \
	X(FSC_OUTSIDE, ORCH_REC_OUTSIDE("fsc")) \
	X(REFC_OUTSIDE, ORCH_REC_OUTSIDE("refc")) \
	X(CSUM_OUTSIDE, ORCH_REC_OUTSIDE("csum")) \
	X(BAD_OUTSIDE, ORCH_REC_OUTSIDE("bad")) \
	/* Offline repair: whole tables in key order, emptied, counted */ \
	X(RMAP_ALL, "SELECT " ORCH_REC_RMAP_COLS " FROM rmap ORDER BY ag, agbno, owner, off") \
	X(RMAP_DATA_ALL, "SELECT " ORCH_REC_RMAP_COLS " FROM rmap WHERE owner > 0" \
			 " ORDER BY ag, agbno, owner, off") \
	X(FSB_ALL, "SELECT " ORCH_REC_FSB_COLS " FROM fsb ORDER BY ag, agbno") \
	X(FSC_ALL, "SELECT " ORCH_REC_FSC_COLS " FROM fsc ORDER BY ag, len, agbno") \
	X(REFC_ALL, "SELECT " ORCH_REC_REFC_COLS " FROM refc ORDER BY ag, agbno") \
	X(BAD_ALL, "SELECT " ORCH_REC_BAD_COLS " FROM bad ORDER BY ag, agbno") \
	X(AG_INS, "INSERT INTO agstat VALUES(?1,?2,?3,?4,?5,?6,?7,?8)") \
	X(BMAP_CLEAR, "DELETE FROM bmap") \
	X(RMAP_CLEAR, "DELETE FROM rmap") \
	X(FSB_CLEAR, "DELETE FROM fsb") \
	X(FSC_CLEAR, "DELETE FROM fsc") \
	X(REFC_CLEAR, "DELETE FROM refc") \
	X(AG_CLEAR, "DELETE FROM agstat") \
	X(BMAP_NO_RMAP_COUNT, "SELECT count(*) FROM bmap AS b WHERE NOT EXISTS" \
			      " (SELECT 1 FROM rmap AS r WHERE r.ag = b.ag AND r.agbno = b.agbno" \
			      " AND r.owner = b.nid AND r.off = b.off AND r.len = b.len" \
			      " AND r.flags = b.flags)") \
	X(FSB_SUM_OF_AG, "SELECT coalesce(sum(len), 0) FROM fsb WHERE ag=?1") \
	X(FSB_MAX_OF_AG, "SELECT coalesce(max(len), 0) FROM fsb WHERE ag=?1") \
	X(FSB_COUNT_OF_AG, "SELECT count(*) FROM fsb WHERE ag=?1") \
	X(RMAP_COUNT_OF_AG, "SELECT count(*) FROM rmap WHERE ag=?1") \
	X(REFC_COUNT_OF_AG, "SELECT count(*) FROM refc WHERE ag=?1") \
	/* Counters the writer loads at open */ \
	X(AG_FREE_SUM, "SELECT coalesce(sum(freeblks), 0) FROM agstat") \
	X(OBJ_LIVE_COUNT, "SELECT count(*) FROM obj WHERE (flags & 2)=0") \
	X(REFC_COUNT, "SELECT count(*) FROM refc") \
	X(BAD_COUNT, "SELECT count(*) FROM bad")

enum orch_rec_stmt {
#define ORCH_REC_ENUM_(name, sql) ORCH_REC_##name,
	ORCH_REC_STMTS(ORCH_REC_ENUM_)
#undef ORCH_REC_ENUM_
	ORCH_REC_NSTMT
};

/*
 * The statements of one connection, prepared when first asked for.  One
 * thread at a time, like the connection.
 */
struct orch_rec_sq {
	sqlite3 *q_db;
	sqlite3_stmt *q_stmt[ORCH_REC_NSTMT];
};

/* Starts with no statement prepared; @db stays the caller's. */
void orch_rec_sq_init(struct orch_rec_sq *q, sqlite3 *db);
/* Finalizes the prepared statements (not the connection). */
void orch_rec_sq_fini(struct orch_rec_sq *q);

/*
 * Statement @id, reset with its bindings cleared, in *@out: 0, or -errno
 * if it cannot be prepared (logged).
 */
int orch_rec_stmt(struct orch_rec_sq *q, enum orch_rec_stmt id, sqlite3_stmt **out);
/* Steps @id once: 1 = a row (read it, then reset), 0 = done (reset), <0. */
int orch_rec_step(struct orch_rec_sq *q, enum orch_rec_stmt id);
/* Runs @id to completion and resets it: 0 or -errno. */
int orch_rec_exec(struct orch_rec_sq *q, enum orch_rec_stmt id);
/*
 * Prepares statement @id of @q, binds @rec with @bind (an orch_rec_*_bind)
 * and runs it: 0 or -errno.  For one-off writes (mkfs, tests).
 */
#define ORCH_REC_PUT(q, id, bind, rec)                                         \
	({                                                                     \
		sqlite3_stmt *put_s_;                                          \
		int put_e_ = orch_rec_stmt((q), (id), &put_s_);                \
		if (!put_e_) {                                                 \
			bind(put_s_, (rec));                                   \
			put_e_ = orch_rec_exec((q), (id));                     \
		}                                                              \
		put_e_;                                                        \
	})

/*
 * Reads the csum row of group @grp of AG @ag (CSUM_GET) into *@out: 1 if it
 * is there and verifies, 0 if there is none or it fails verification (then
 * out->valid is 0: its blocks have no sums; the checker reports the row),
 * or -errno.  out->ag and out->grp are @ag and @grp whatever the answer.
 */
int orch_rec_csum_get(struct orch_rec_sq *q, uint32_t ag, int64_t grp,
		      struct orch_csum_irec *out);
/* Resets @id (after reading the row of orch_rec_step). */
void orch_rec_reset(struct orch_rec_sq *q, enum orch_rec_stmt id);
/*
 * Maps an SQLite result code to -errno, logging (rate-limited) the
 * unexpected ones with @what: 0 for OK/ROW/DONE, -ENOMEM, -ENOSPC, -EBUSY,
 * -EUCLEAN (a damaged database file) or -EIO.
 */
int orch_rec_sql_err(sqlite3 *db, int rc, const char *what);
/* The statement's name, for logs ("BMAP_LE"). */
const char *orch_rec_stmt_name(enum orch_rec_stmt id);

#endif
