/*
 * The SQLite wrapper of the namespace: schema, statement cache, error
 * mapping, savepoints, and the inode and entry records with their verifiers.
 * Everything read back from the database is checked here before use.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/log.h"
#include "meta/meta_i.h"

/* --- Schema ---------------------------------------------------------------- */

/* Format version 1.  Any change here changes docs/SPEC-ondisk.md. */
static const char sqldb_schema[] =
	"CREATE TABLE super ("
	" key TEXT NOT NULL PRIMARY KEY,"
	" value NOT NULL"
	") WITHOUT ROWID;"
	"CREATE TABLE inode ("
	" handle INTEGER NOT NULL PRIMARY KEY,"
	" mode INTEGER NOT NULL, uid INTEGER NOT NULL, gid INTEGER NOT NULL,"
	" nlink INTEGER NOT NULL, size INTEGER NOT NULL, rdev INTEGER NOT NULL,"
	" atime INTEGER NOT NULL, mtime INTEGER NOT NULL, ctime INTEGER NOT NULL,"
	" parent INTEGER NOT NULL, strip_size INTEGER NOT NULL,"
	" stripe_count INTEGER NOT NULL, first_server INTEGER NOT NULL,"
	" next_seq INTEGER NOT NULL, target BLOB"
	") WITHOUT ROWID;"
	"CREATE TABLE dirent ("
	" parent INTEGER NOT NULL, name BLOB NOT NULL,"
	" child INTEGER NOT NULL, type INTEGER NOT NULL,"
	" seq INTEGER NOT NULL, state INTEGER NOT NULL,"
	" PRIMARY KEY (parent, name)"
	") WITHOUT ROWID;"
	"CREATE UNIQUE INDEX dirent_seq ON dirent (parent, seq);"
	"CREATE INDEX dirent_child ON dirent (child);"
	"CREATE TABLE xattr ("
	" handle INTEGER NOT NULL, name BLOB NOT NULL, value BLOB NOT NULL,"
	" PRIMARY KEY (handle, name)"
	") WITHOUT ROWID;"
	"CREATE TABLE intent ("
	" id INTEGER NOT NULL PRIMARY KEY, kind INTEGER NOT NULL,"
	" body BLOB NOT NULL, created INTEGER NOT NULL"
	") WITHOUT ROWID;"
	"CREATE TABLE applied ("
	" origin INTEGER NOT NULL, id INTEGER NOT NULL, result INTEGER NOT NULL,"
	" PRIMARY KEY (origin, id)"
	") WITHOUT ROWID;";

int orch_sqldb_schema_create(sqlite3 *db)
{
	char *msg = NULL;
	int rc;

	rc = sqlite3_exec(db, sqldb_schema, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		ORCH_ERR("cannot create the namespace tables: %s", msg ? msg : "?");
		sqlite3_free(msg);
		return rc == SQLITE_FULL ? -ENOSPC : -EIO;
	}
	return 0;
}

/* --- Statement cache and errors -------------------------------------------- */

static const char *const sqldb_stmt_sql[SQLDB_NSTMT] = {
#define ORCH_MDB_SQL_(name, sql) [SQLDB_##name] = sql,
	ORCH_MDB_STMTS(ORCH_MDB_SQL_)
#undef ORCH_MDB_SQL_
};

static const char *const sqldb_stmt_name[SQLDB_NSTMT] = {
#define ORCH_MDB_NAME_(name, sql) [SQLDB_##name] = #name,
	ORCH_MDB_STMTS(ORCH_MDB_NAME_)
#undef ORCH_MDB_NAME_
};

/*
 * The entries naming an inode (path resolution, scrub) are an index range
 * scan.  The index came after format 1 shipped: it is created at open when
 * missing, and older binaries keep it up to date as SQLite does any index.
 */
static const char sqldb_index_child[] =
	"CREATE INDEX IF NOT EXISTS dirent_child ON dirent (child)";

/*
 * Inodes whose last name went while a client had them open: kept (nlink
 * 0) until the last close (docs/DESIGN.md, "Open files whose last name
 * went").  Also created at open when missing; an older binary ignores it.
 */
static const char sqldb_table_orphan[] =
	"CREATE TABLE IF NOT EXISTS orphan ("
	" handle INTEGER NOT NULL PRIMARY KEY, since INTEGER NOT NULL"
	") WITHOUT ROWID";

/*
 * The result of each request a replica group applied for a client (client
 * id, sequence number), so that a retry is answered, not applied again
 * (docs/DESIGN.md, "Exactly once").  Created at open when missing, as
 * orphan is.
 */
static const char sqldb_table_reply[] =
	"CREATE TABLE IF NOT EXISTS reply ("
	" client INTEGER NOT NULL, seq INTEGER NOT NULL, result INTEGER NOT NULL,"
	" PRIMARY KEY (client, seq)"
	") WITHOUT ROWID";

int orch_sqldb_tables_ensure(struct orch_meta *m)
{
	static const struct {
		const char *what, *sql;
	} later[] = {
		{ "index dirent_child", sqldb_index_child },
		{ "table orphan", sqldb_table_orphan },
		{ "table reply", sqldb_table_reply },
	};

	for (size_t i = 0; i < ORCH_ARRAY_SIZE(later); i++) {
		if (sqlite3_exec(m->m_db, later[i].sql, NULL, NULL, NULL) != SQLITE_OK) {
			ORCH_ERR("cannot create %s: %s: db='%s'", later[i].what,
				 sqlite3_errmsg(m->m_db), m->m_path);
			return -EIO;
		}
	}
	return 0;
}

int orch_sqldb_prepare_all(struct orch_meta *m)
{
	int error = orch_sqldb_tables_ensure(m);

	if (error)
		return error;
	for (int i = 0; i < SQLDB_NSTMT; i++) {
		int rc = sqlite3_prepare_v3(m->m_db, sqldb_stmt_sql[i], -1,
					    SQLITE_PREPARE_PERSISTENT, &m->m_stmt[i], NULL);

		if (rc != SQLITE_OK) {
			ORCH_ERR("cannot prepare statement: %s: stmt=%s db='%s'",
				 sqlite3_errmsg(m->m_db), sqldb_stmt_name[i], m->m_path);
			return -EIO;
		}
	}
	return 0;
}

void orch_sqldb_finalize_all(struct orch_meta *m)
{
	for (int i = 0; i < SQLDB_NSTMT; i++) {
		sqlite3_finalize(m->m_stmt[i]);
		m->m_stmt[i] = NULL;
	}
}

/*
 * The one place SQLite result codes become errno values.  Constraint
 * violations of a key are "exists"; a full disk is ENOSPC; anything else is
 * an operator's problem and is logged with SQLite's own message.
 */
int orch_sqldb_error(struct orch_meta *m, int rc, enum orch_sqldb_stmt id)
{
	switch (rc) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_CONSTRAINT_PRIMARYKEY:
	case SQLITE_CONSTRAINT_UNIQUE:
		return -EEXIST;
	case SQLITE_FULL:
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "namespace database full: stmt=%s db='%s'",
				   sqldb_stmt_name[id], m->m_path);
		return -ENOSPC;
	default:
		ORCH_ERR("namespace database error: %s: stmt=%s rc=%d db='%s'",
			 sqlite3_errmsg(m->m_db), sqldb_stmt_name[id], rc, m->m_path);
		return -EIO;
	}
}

sqlite3_stmt *orch_sqldb_stmt(struct orch_meta *m, enum orch_sqldb_stmt id)
{
	sqlite3_stmt *st = m->m_stmt[id];

	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	return st;
}

void orch_sqldb_reset(struct orch_meta *m, enum orch_sqldb_stmt id)
{
	sqlite3_reset(m->m_stmt[id]);
}

int orch_sqldb_step(struct orch_meta *m, enum orch_sqldb_stmt id)
{
	int rc = sqlite3_step(m->m_stmt[id]);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	rc = orch_sqldb_error(m, rc, id); /* before reset, while errmsg is ours */
	sqlite3_reset(m->m_stmt[id]);
	return rc;
}

int orch_sqldb_exec(struct orch_meta *m, enum orch_sqldb_stmt id)
{
	int rc;

	do
		rc = orch_sqldb_step(m, id);
	while (rc == 1);
	sqlite3_reset(m->m_stmt[id]);
	return rc;
}

/* orch_sqldb_exec() of an UPDATE or DELETE of one row: -ENOENT if none changed. */
static int sqldb_exec_one(struct orch_meta *m, enum orch_sqldb_stmt id)
{
	int rc = orch_sqldb_exec(m, id);

	if (rc == 0 && sqlite3_changes(m->m_db) != 1)
		return -ENOENT;
	return rc;
}

/* --- Savepoints ------------------------------------------------------------- */

/*
 * Outside orch_meta_begin() an operation takes the write lock at once
 * (BEGIN IMMEDIATE), not at its first write as a SAVEPOINT's deferred
 * transaction would: upgrading a read transaction to a write one fails with
 * SQLITE_BUSY without calling the busy handler, so an operation that met
 * the flusher's checkpoint holding the lock (flush.c) would fail instead of
 * waiting for it.
 */
int orch_sqldb_op_begin(struct orch_meta *m)
{
	int error;

	if (m->m_txn_lost)
		return -EIO;
	if (m->m_in_txn || !sqlite3_get_autocommit(m->m_db)) {
		orch_sqldb_stmt(m, SQLDB_SAVEPOINT);
		error = orch_sqldb_exec(m, SQLDB_SAVEPOINT);
		if (!error && m->m_op_txn)
			m->m_op_nest++;
		return error;
	}
	orch_sqldb_stmt(m, SQLDB_BEGIN);
	error = orch_sqldb_exec(m, SQLDB_BEGIN);
	if (error)
		return error;
	m->m_op_txn = true;
	return 0;
}

void orch_sqldb_committed(struct orch_meta *m)
{
	m->m_commits++;
	if (!m->m_reserved)
		return;
	/* A new counter reservation is durable before any value of it leaves. */
	m->m_reserved = false;
	if (orch_meta_sync_wal(m->m_db)) {
		/*
		 * Committed, so not an error of this transaction, but not known
		 * durable (logged): the next value reserves, and syncs, afresh.
		 */
		for (int c = 0; c < SQLDB_NCOUNTERS; c++)
			m->m_counter[c].c_limit = 0;
	}
}

/* The end of an operation in its own transaction: commit or roll back. */
static int sqldb_op_txn_end(struct orch_meta *m, int error)
{
	m->m_op_txn = false;
	if (sqlite3_get_autocommit(m->m_db))
		return error ? error : -EIO; /* SQLite rolled it back itself */
	if (!error) {
		orch_sqldb_stmt(m, SQLDB_COMMIT);
		error = orch_sqldb_exec(m, SQLDB_COMMIT);
		if (!error) {
			orch_sqldb_committed(m);
			return 0;
		}
		if (sqlite3_get_autocommit(m->m_db))
			return error;
	}
	orch_sqldb_stmt(m, SQLDB_ROLLBACK);
	orch_sqldb_exec(m, SQLDB_ROLLBACK);
	return error;
}

/*
 * SQLite may roll a whole transaction back by itself after some errors (a
 * full disk, an I/O error).  Then the savepoint is gone: inside an explicit
 * transaction we remember it so that commit fails instead of pretending.
 */
int orch_sqldb_op_end(struct orch_meta *m, int error)
{
	int rc;

	if (m->m_op_txn && m->m_op_nest == 0)
		return sqldb_op_txn_end(m, error);
	if (m->m_op_txn)
		m->m_op_nest--;
	if (sqlite3_get_autocommit(m->m_db)) {
		if (m->m_in_txn) {
			ORCH_ERR("transaction rolled back by sqlite: db='%s'", m->m_path);
			m->m_txn_lost = true;
		}
		return error ? error : -EIO;
	}
	if (error) {
		orch_sqldb_stmt(m, SQLDB_ROLLBACK_TO);
		orch_sqldb_exec(m, SQLDB_ROLLBACK_TO);
		orch_sqldb_stmt(m, SQLDB_RELEASE);
		orch_sqldb_exec(m, SQLDB_RELEASE);
		return error;
	}
	orch_sqldb_stmt(m, SQLDB_RELEASE);
	rc = orch_sqldb_exec(m, SQLDB_RELEASE);
	if (rc) {
		/* A failed standalone commit: leave nothing half done. */
		if (!m->m_in_txn && !m->m_op_txn && !sqlite3_get_autocommit(m->m_db)) {
			orch_sqldb_stmt(m, SQLDB_ROLLBACK);
			orch_sqldb_exec(m, SQLDB_ROLLBACK);
		}
		return rc;
	}
	if (!m->m_in_txn && !m->m_op_txn)
		orch_sqldb_committed(m);
	return 0;
}

/* --- Read transactions ------------------------------------------------------ */

bool orch_sqldb_read_begin(struct orch_meta *m)
{
	if (m->m_in_txn || !sqlite3_get_autocommit(m->m_db))
		return false;
	orch_sqldb_stmt(m, SQLDB_BEGIN_READ);
	return orch_sqldb_exec(m, SQLDB_BEGIN_READ) == 0;
}

void orch_sqldb_read_end(struct orch_meta *m, bool began)
{
	if (!began || sqlite3_get_autocommit(m->m_db))
		return;
	orch_sqldb_stmt(m, SQLDB_COMMIT);
	if (orch_sqldb_exec(m, SQLDB_COMMIT) && !sqlite3_get_autocommit(m->m_db)) {
		orch_sqldb_stmt(m, SQLDB_ROLLBACK);
		orch_sqldb_exec(m, SQLDB_ROLLBACK);
	}
}

/* --- Super table ----------------------------------------------------------- */

/* Reads super integer @key into *@out (-ENOENT if absent). */
static int sqldb_super_get_u64(struct orch_meta *m, const char *key, uint64_t *out)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_SUPER_GET);
	int rc;

	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = orch_sqldb_step(m, SQLDB_SUPER_GET);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	if (sqlite3_column_type(st, 0) != SQLITE_INTEGER ||
	    sqlite3_column_int64(st, 0) < 0) {
		orch_sqldb_reset(m, SQLDB_SUPER_GET);
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "corrupt record: table=super key='%s'", key);
		return -ORCH_ECORRUPT;
	}
	*out = (uint64_t)sqlite3_column_int64(st, 0);
	orch_sqldb_reset(m, SQLDB_SUPER_GET);
	return 0;
}

/* The group's own values live under "group." (meta.h): never the identity's keys. */
static bool sqldb_group_key(const char *key)
{
	return strncmp(key, "group.", 6) == 0 && key[6];
}

int orch_meta_value_get(struct orch_meta *m, const char *key, uint64_t *out)
{
	return sqldb_group_key(key) ? sqldb_super_get_u64(m, key, out) : -EPERM;
}

int orch_meta_value_set(struct orch_meta *m, const char *key, uint64_t value)
{
	sqlite3_stmt *st;
	int error;

	if (!sqldb_group_key(key))
		return -EPERM;
	if (value > INT64_MAX)
		return -EINVAL;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	st = orch_sqldb_stmt(m, SQLDB_SUPER_PUT);
	sqlite3_bind_text(st, 1, key, -1, SQLITE_TRANSIENT);
	orch_sqldb_bind_u64(st, 2, value);
	return orch_sqldb_op_end(m, orch_sqldb_exec(m, SQLDB_SUPER_PUT));
}

static const char *const sqldb_counter_key[SQLDB_NCOUNTERS] = {
	[SQLDB_COUNTER_HANDLE] = "next_handle",
	[SQLDB_COUNTER_INTENT] = "next_intent",
};

/* Reads counter @c's super row: 1..2^48 (2^48: all taken), else -EUCLEAN. */
static int sqldb_counter_stored(struct orch_meta *m, enum sqldb_counter c, uint64_t *out)
{
	int error = sqldb_super_get_u64(m, sqldb_counter_key[c], out);

	if (error == -ENOENT || (!error && (*out < 1 || *out > ORCH_HANDLE_COUNTER_MASK + 1))) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "corrupt record: table=super key='%s'",
				   sqldb_counter_key[c]);
		return -ORCH_ECORRUPT;
	}
	return error;
}

/*
 * Counter values are never handed out twice: a handle names one inode for
 * ever, and other servers remember applied intent ids.  Writing the super
 * row for every value put one more WAL page in every create and unlink
 * commit, so the row holds the end of a reservation of SQLDB_COUNTER_BATCH
 * values instead, written in the transaction that takes the first of them;
 * the others come from memory.  A value is handed out only while the row,
 * read in the same transaction, still says what we reserved, so every
 * committed value is below the committed row, across a crash too (which
 * skips the rest of the reservation: nothing needs counters dense).  A
 * rollback, whole or to a savepoint, that undid the reservation leaves the
 * row different from c_limit, and the next call reserves again from what
 * the row holds, which is above every value still committed.  Checking
 * costs a read of a cached row; the write it saves costs a 4 KiB WAL frame.
 *
 * Values leave the server before their transaction is durable: a client
 * writes data objects on other servers under a new handle at once, and
 * peers keep records by intent id.  Had a power cut undone the reservation,
 * the values would be handed out again, and a new file would adopt a dead
 * one's objects.  So the commit that makes a reservation also syncs the
 * WAL before it returns (orch_meta_commit; m_reserved), and no value of a
 * reservation leaves before the reservation is durable.
 */
int orch_sqldb_counter_next(struct orch_meta *m, enum sqldb_counter c, uint64_t *out)
{
	uint64_t *next = &m->m_counter[c].c_next, *limit = &m->m_counter[c].c_limit;
	uint64_t stored, lim;
	sqlite3_stmt *st;
	int error;

	error = sqldb_counter_stored(m, c, &stored);
	if (error)
		return error;
	if (stored != *limit || *next >= *limit) {
		if (stored > ORCH_HANDLE_COUNTER_MASK)
			return -ENOSPC;
		lim = ORCH_MIN(stored + SQLDB_COUNTER_BATCH, ORCH_HANDLE_COUNTER_MASK + 1);
		st = orch_sqldb_stmt(m, SQLDB_COUNTER_SET);
		sqlite3_bind_text(st, 1, sqldb_counter_key[c], -1, SQLITE_STATIC);
		orch_sqldb_bind_u64(st, 2, lim);
		*limit = 0;
		error = orch_sqldb_exec(m, SQLDB_COUNTER_SET);
		if (error)
			return error;
		*next = stored;
		*limit = lim;
		m->m_reserved = true;
	}
	*out = (*next)++;
	return 0;
}

int orch_sqldb_counter_peek(struct orch_meta *m, enum sqldb_counter c, uint64_t *out)
{
	uint64_t stored;
	int error = sqldb_counter_stored(m, c, &stored);

	if (error)
		return error;
	if (stored == m->m_counter[c].c_limit && m->m_counter[c].c_next < stored)
		*out = m->m_counter[c].c_next;
	else
		*out = stored;
	return 0;
}

/* --- Names ------------------------------------------------------------------ */

int orch_sqldb_name_check(const char *name, size_t namelen)
{
	if (namelen == 0)
		return -EINVAL;
	if (namelen > ORCH_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', namelen) || memchr(name, '\0', namelen))
		return -EINVAL;
	if (name[0] == '.' && (namelen == 1 || (namelen == 2 && name[1] == '.')))
		return -EINVAL;
	return 0;
}

/* --- Inode records ---------------------------------------------------------- */

static bool sqldb_col_int(sqlite3_stmt *st, int col, int64_t lo, int64_t hi, int64_t *out)
{
	int64_t v;

	if (sqlite3_column_type(st, col) != SQLITE_INTEGER)
		return false;
	v = sqlite3_column_int64(st, col);
	if (v < lo || v > hi)
		return false;
	*out = v;
	return true;
}

/* Decodes and verifies the row of INODE_GET.  NULL or the failing check. */
static orch_failaddr_t sqldb_inode_from_disk(sqlite3_stmt *st, uint64_t h,
					   struct orch_inode_irec *out)
{
	struct orch_attr *a = &out->i_attr;
	/* Column ranges; rdev and parent are u64 bit patterns, times signed. */
	static const int64_t lo[15] = {
		0, 0, 0, 0, 0, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN, INT64_MIN,
		0, 0, 0, 0, 0,
	};
	static const int64_t hi[15] = {
		UINT32_MAX, UINT32_MAX, UINT32_MAX, UINT32_MAX, INT64_MAX, INT64_MAX,
		INT64_MAX, INT64_MAX, INT64_MAX, INT64_MAX, UINT32_MAX, UINT16_MAX,
		UINT16_MAX, INT64_MAX, 1,
	};
	int64_t v[15];

	for (int i = 0; i < 15; i++)
		if (!sqldb_col_int(st, i, lo[i], hi[i], &v[i]))
			return ORCH_THIS_ADDRESS;
	memset(out, 0, sizeof(*out));
	a->handle = h;
	a->mode = (uint32_t)v[0];
	a->uid = (uint32_t)v[1];
	a->gid = (uint32_t)v[2];
	a->nlink = (uint32_t)v[3];
	a->size = (uint64_t)v[4];
	a->rdev = (uint64_t)v[5];
	a->atime_ns = v[6];
	a->mtime_ns = v[7];
	a->ctime_ns = v[8];
	a->parent = (uint64_t)v[9];
	a->layout.strip_size = (uint32_t)v[10];
	a->layout.stripe_count = (uint16_t)v[11];
	a->layout.first_server = (uint16_t)v[12];
	out->i_next_seq = (uint64_t)v[13];
	a->flags = v[14] ? 0 : ORCH_ATTR_NOXATTR;   /* computed, not stored */

	if (!orch_sqldb_type_is_valid(a->mode & S_IFMT) || (a->mode & ~(S_IFMT | 07777)))
		return ORCH_THIS_ADDRESS;
	/* A regular file with no link is an orphan (open, its last name gone). */
	if ((a->nlink == 0 && !S_ISREG(a->mode)) || a->parent == 0)
		return ORCH_THIS_ADDRESS;
	if (S_ISDIR(a->mode) && (a->nlink < 2 || out->i_next_seq == 0))
		return ORCH_THIS_ADDRESS;
	if (S_ISREG(a->mode) && (a->layout.strip_size == 0 || a->layout.stripe_count == 0))
		return ORCH_THIS_ADDRESS;
	return NULL;
}

int orch_sqldb_inode_lookup(struct orch_meta *m, uint64_t h, struct orch_inode_irec *out)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_INODE_GET);
	orch_failaddr_t fa;
	int rc;

	orch_sqldb_bind_u64(st, 1, h);
	rc = orch_sqldb_step(m, SQLDB_INODE_GET);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	fa = sqldb_inode_from_disk(st, h, out);
	orch_sqldb_reset(m, SQLDB_INODE_GET);
	if (fa) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "corrupt record: table=inode handle=%#" PRIx64 " check=%s",
				   h, fa);
		return -ORCH_ECORRUPT;
	}
	return 0;
}

static void sqldb_inode_bind(sqlite3_stmt *st, const struct orch_inode_irec *in)
{
	const struct orch_attr *a = &in->i_attr;

	orch_sqldb_bind_u64(st, 1, a->handle);
	sqlite3_bind_int64(st, 2, a->mode);
	sqlite3_bind_int64(st, 3, a->uid);
	sqlite3_bind_int64(st, 4, a->gid);
	sqlite3_bind_int64(st, 5, a->nlink);
	orch_sqldb_bind_u64(st, 6, a->size);
	orch_sqldb_bind_u64(st, 7, a->rdev);
	sqlite3_bind_int64(st, 8, a->atime_ns);
	sqlite3_bind_int64(st, 9, a->mtime_ns);
	sqlite3_bind_int64(st, 10, a->ctime_ns);
	orch_sqldb_bind_u64(st, 11, a->parent);
	sqlite3_bind_int64(st, 12, a->layout.strip_size);
	sqlite3_bind_int64(st, 13, a->layout.stripe_count);
	sqlite3_bind_int64(st, 14, a->layout.first_server);
	orch_sqldb_bind_u64(st, 15, in->i_next_seq);
}

int orch_sqldb_inode_insert(struct orch_meta *m, const struct orch_inode_irec *in,
			  const char *target)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_INODE_INSERT);

	sqldb_inode_bind(st, in);
	if (target)
		sqlite3_bind_blob(st, 16, target, (int)strlen(target), SQLITE_STATIC);
	return orch_sqldb_exec(m, SQLDB_INODE_INSERT);
}

int orch_sqldb_inode_update(struct orch_meta *m, const struct orch_inode_irec *in)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_INODE_UPDATE);
	int rc;

	sqldb_inode_bind(st, in);
	rc = sqldb_exec_one(m, SQLDB_INODE_UPDATE);
	if (rc == 0)
		orch_sqldb_changed(m, in->i_attr.handle, NULL, 0);
	return rc;
}

int orch_sqldb_inode_delete(struct orch_meta *m, uint64_t h)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_INODE_DELETE);
	int rc;

	orch_sqldb_bind_u64(st, 1, h);
	rc = orch_sqldb_exec(m, SQLDB_INODE_DELETE);
	if (rc)
		return rc;
	orch_sqldb_changed(m, h, NULL, 0);
	st = orch_sqldb_stmt(m, SQLDB_XATTR_DELETE_ALL);
	orch_sqldb_bind_u64(st, 1, h);
	return orch_sqldb_exec(m, SQLDB_XATTR_DELETE_ALL);
}

/* --- Entry records ---------------------------------------------------------- */

int orch_sqldb_dirent_lookup(struct orch_meta *m, uint64_t parent, const char *name,
			   size_t namelen, struct orch_dirent_irec *out)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_DIRENT_GET);
	int64_t child, type, seq, state;
	bool ok;
	int rc;

	orch_sqldb_bind_u64(st, 1, parent);
	sqlite3_bind_blob(st, 2, name, (int)namelen, SQLITE_STATIC);
	rc = orch_sqldb_step(m, SQLDB_DIRENT_GET);
	if (rc <= 0)
		return rc ? rc : -ENOENT;
	ok = sqldb_col_int(st, 0, INT64_MIN, INT64_MAX, &child) &&
	     sqldb_col_int(st, 1, 0, UINT32_MAX, &type) &&
	     sqldb_col_int(st, 2, 1, INT64_MAX, &seq) &&
	     sqldb_col_int(st, 3, ORCH_DIRENT_LIVE, ORCH_DIRENT_BUSY, &state);
	orch_sqldb_reset(m, SQLDB_DIRENT_GET);
	if (ok) {
		out->d_child = (uint64_t)child;
		out->d_type = (uint32_t)type;
		out->d_seq = (uint64_t)seq;
		out->d_state = (uint32_t)state;
		ok = orch_sqldb_type_is_valid(out->d_type) &&
		     (out->d_child != 0 || state == ORCH_DIRENT_PENDING);
	}
	if (!ok) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "corrupt record: table=dirent parent=%#" PRIx64 " name='%.*s'",
				   parent, (int)namelen, name);
		return -ORCH_ECORRUPT;
	}
	return 0;
}

static void sqldb_dirent_bind(sqlite3_stmt *st, uint64_t parent, const char *name,
			    size_t namelen, const struct orch_dirent_irec *in)
{
	orch_sqldb_bind_u64(st, 1, parent);
	sqlite3_bind_blob(st, 2, name, (int)namelen, SQLITE_STATIC);
	orch_sqldb_bind_u64(st, 3, in->d_child);
	sqlite3_bind_int64(st, 4, in->d_type);
	orch_sqldb_bind_u64(st, 5, in->d_seq);
	sqlite3_bind_int64(st, 6, in->d_state);
}

int orch_sqldb_dirent_insert(struct orch_meta *m, uint64_t parent, const char *name,
			   size_t namelen, const struct orch_dirent_irec *in)
{
	int rc;

	sqldb_dirent_bind(orch_sqldb_stmt(m, SQLDB_DIRENT_INSERT), parent, name, namelen, in);
	rc = orch_sqldb_exec(m, SQLDB_DIRENT_INSERT);
	if (rc == 0)
		orch_sqldb_changed(m, parent, name, namelen);
	return rc;
}

int orch_sqldb_dirent_update(struct orch_meta *m, uint64_t parent, const char *name,
			   size_t namelen, const struct orch_dirent_irec *in)
{
	int rc;

	sqldb_dirent_bind(orch_sqldb_stmt(m, SQLDB_DIRENT_UPDATE), parent, name, namelen, in);
	rc = sqldb_exec_one(m, SQLDB_DIRENT_UPDATE);
	if (rc == 0)
		orch_sqldb_changed(m, parent, name, namelen);
	return rc;
}

int orch_sqldb_dirent_delete(struct orch_meta *m, uint64_t parent, const char *name,
			   size_t namelen)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_DIRENT_DELETE);
	int rc;

	orch_sqldb_bind_u64(st, 1, parent);
	sqlite3_bind_blob(st, 2, name, (int)namelen, SQLITE_STATIC);
	rc = sqldb_exec_one(m, SQLDB_DIRENT_DELETE);
	if (rc == 0)
		orch_sqldb_changed(m, parent, name, namelen);
	return rc;
}

int orch_sqldb_dir_check_empty(struct orch_meta *m, uint64_t dir)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_DIRENT_ANY);
	int rc;

	orch_sqldb_bind_u64(st, 1, dir);
	rc = orch_sqldb_step(m, SQLDB_DIRENT_ANY);
	orch_sqldb_reset(m, SQLDB_DIRENT_ANY);
	if (rc < 0)
		return rc;
	return rc ? -ENOTEMPTY : 0;
}
