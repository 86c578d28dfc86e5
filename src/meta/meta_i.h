/*
 * Private to src/meta: the handle struct, the statement cache, the record
 * codecs (sqldb.c) and the permission rules shared by meta.c, dirent.c and
 * xattr.c.  The on-disk format is described in docs/SPEC-ondisk.md.
 *
 * Naming: sqldb.c exports orch_sqldb_*; an internal twin of a public function
 * (no savepoint of its own, for use inside another operation) carries a
 * trailing underscore.
 */
#ifndef ORCH_META_META_I_H
#define ORCH_META_META_I_H

#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/util.h"
#include "meta/meta.h"
#include "proto/perm.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

#define ORCH_META_DB_NAME "meta.db"
#define ORCH_META_INTENT_MAX 8192         /* bytes in one intent body */
#define ORCH_META_APPLICATION_ID 0x4f524348 /* "ORCH", PRAGMA application_id */

/* --- Statement cache ------------------------------------------------------- */

/*
 * Every statement, prepared once at open.  X(name, sql).  Unsigned 64-bit
 * values (handles, ids, cookies) are stored as the int64 with the same bits.
 */
#define ORCH_MDB_STMTS(X)                                                      \
	X(BEGIN, "BEGIN IMMEDIATE")                                            \
	X(BEGIN_READ, "BEGIN")                                                 \
	X(COMMIT, "COMMIT")                                                    \
	X(ROLLBACK, "ROLLBACK")                                                \
	X(SAVEPOINT, "SAVEPOINT orch_op")                                      \
	X(RELEASE, "RELEASE orch_op")                                          \
	X(ROLLBACK_TO, "ROLLBACK TO orch_op")                                  \
	X(SUPER_GET, "SELECT value FROM super WHERE key = ?1")                 \
	X(COUNTER_SET, "UPDATE super SET value = ?2 WHERE key = ?1")           \
	X(SUPER_PUT, "INSERT OR REPLACE INTO super (key, value) VALUES (?1, ?2)") \
	X(INODE_GET, "SELECT mode, uid, gid, nlink, size, rdev, atime, "       \
		     "mtime, ctime, parent, strip_size, stripe_count, "        \
		     "first_server, next_seq, EXISTS (SELECT 1 FROM xattr "   \
		     "WHERE xattr.handle = ?1) FROM inode WHERE handle = ?1") \
	X(INODE_TARGET, "SELECT target FROM inode WHERE handle = ?1")          \
	X(INODE_INSERT, "INSERT INTO inode (handle, mode, uid, gid, nlink, "   \
			"size, rdev, atime, mtime, ctime, parent, strip_size, " \
			"stripe_count, first_server, next_seq, target) "       \
			"VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, " \
			"?12, ?13, ?14, ?15, ?16)")                            \
	X(INODE_UPDATE, "UPDATE inode SET mode = ?2, uid = ?3, gid = ?4, "     \
			"nlink = ?5, size = ?6, rdev = ?7, atime = ?8, "       \
			"mtime = ?9, ctime = ?10, parent = ?11, "              \
			"strip_size = ?12, stripe_count = ?13, "               \
			"first_server = ?14, next_seq = ?15 WHERE handle = ?1") \
	X(INODE_DELETE, "DELETE FROM inode WHERE handle = ?1")                 \
	X(INODE_COUNT, "SELECT count(*) FROM inode")                           \
	X(DIRENT_GET, "SELECT child, type, seq, state FROM dirent "            \
		      "WHERE parent = ?1 AND name = ?2")                       \
	X(DIRENT_INSERT, "INSERT INTO dirent (parent, name, child, type, seq, " \
			 "state) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")             \
	X(DIRENT_UPDATE, "UPDATE dirent SET child = ?3, type = ?4, seq = ?5, " \
			 "state = ?6 WHERE parent = ?1 AND name = ?2")         \
	X(DIRENT_DELETE, "DELETE FROM dirent WHERE parent = ?1 AND name = ?2") \
	X(DIRENT_ANY, "SELECT 1 FROM dirent WHERE parent = ?1 LIMIT 1")        \
	X(DIRENT_LIST, "SELECT name, child, type, seq, state FROM dirent "     \
		       "INDEXED BY dirent_seq WHERE parent = ?1 AND seq > ?2 " \
		       "AND state <> 1 ORDER BY seq LIMIT ?3")                 \
	X(XATTR_GET, "SELECT value FROM xattr WHERE handle = ?1 AND name = ?2") \
	X(XATTR_PUT, "INSERT OR REPLACE INTO xattr (handle, name, value) "     \
		     "VALUES (?1, ?2, ?3)")                                    \
	X(XATTR_DELETE, "DELETE FROM xattr WHERE handle = ?1 AND name = ?2")   \
	X(XATTR_DELETE_ALL, "DELETE FROM xattr WHERE handle = ?1")             \
	X(XATTR_LIST, "SELECT name, length(value) FROM xattr WHERE handle = ?1 " \
		      "ORDER BY name")                                         \
	X(INTENT_INSERT, "INSERT INTO intent (id, kind, body, created) "       \
			 "VALUES (?1, ?2, ?3, ?4)")                            \
	X(INTENT_DELETE, "DELETE FROM intent WHERE id = ?1")                   \
	X(INTENT_NEXT, "SELECT id, kind, body FROM intent WHERE id > ?1 "      \
		       "ORDER BY id LIMIT 1")                                  \
	X(APPLIED_GET, "SELECT result FROM applied WHERE origin = ?1 AND id = ?2") \
	X(APPLIED_PUT, "INSERT OR REPLACE INTO applied (origin, id, result) "  \
		       "VALUES (?1, ?2, ?3)")                                  \
	X(APPLIED_TRIM, "DELETE FROM applied WHERE origin = ?1 AND id < ?2") \
	X(ORPHAN_PUT, "INSERT OR REPLACE INTO orphan (handle, since) "         \
		      "VALUES (?1, ?2)")                                       \
	X(ORPHAN_DELETE, "DELETE FROM orphan WHERE handle = ?1")               \
	X(ORPHAN_NEXT, "SELECT handle FROM orphan WHERE handle > ?1 "          \
		       "ORDER BY handle LIMIT 1")                                  \
	X(REPLY_GET, "SELECT result FROM reply WHERE client = ?1 AND seq = ?2") \
	X(REPLY_PUT, "INSERT INTO reply (client, seq, result) VALUES (?1, ?2, ?3)") \
	X(REPLY_TRIM, "DELETE FROM reply WHERE client = ?1 AND seq < ?2")

enum orch_sqldb_stmt {
#define ORCH_MDB_ENUM_(name, sql) SQLDB_##name,
	ORCH_MDB_STMTS(ORCH_MDB_ENUM_)
#undef ORCH_MDB_ENUM_
	SQLDB_NSTMT
};

/* --- The handle ------------------------------------------------------------ */

#define ORCH_META_REMOTE_OWNERS 2

/* Counters of the super table, reserved in batches (orch_sqldb_counter_next). */
enum sqldb_counter {
	SQLDB_COUNTER_HANDLE, /* "next_handle" */
	SQLDB_COUNTER_INTENT, /* "next_intent" */
	SQLDB_NCOUNTERS
};

/*
 * Values a counter reserves at a time: one super row write, and one WAL
 * sync (orch_meta_commit), per this many.  Large, so that the sync is rare;
 * a crash skips the rest of a reservation (2^48 values: 2^32 crashes).
 */
#define SQLDB_COUNTER_BATCH 65536

struct orch_meta {
	sqlite3 *m_db;                        /* the one write connection */
	sqlite3_stmt *m_stmt[SQLDB_NSTMT];      /* prepared at open, reset after use */
	struct orch_meta_ident m_ident;       /* as read from the super table */
	char m_path[PATH_MAX];                /* data_dir/meta.db */
	bool m_in_txn;                        /* orch_meta_begin() is open */
	bool m_txn_lost;                      /* SQLite rolled the open txn back */
	bool m_op_txn;                        /* op_begin began its own txn */
	unsigned int m_op_nest;               /* ops nested in it (savepoints) */
	uint64_t m_commits;                   /* commits since open */
	uint64_t m_busy_us;                   /* slept in meta_busy() */
	/* Counter values reserved in memory (orch_sqldb_counter_next). */
	struct {
		uint64_t c_next;              /* next value to hand out */
		uint64_t c_limit;             /* what super holds; 0: none */
	} m_counter[SQLDB_NCOUNTERS];
	bool m_reserved;                      /* the open txn made a reservation */
	/* Owners of inodes held elsewhere, told by the caller (sticky rule). */
	struct {
		uint64_t handle;
		uint32_t uid;
	} m_remote_owner[ORCH_META_REMOTE_OWNERS];
	unsigned int m_nremote_owner;
	orch_meta_change_fn m_change;         /* NULL: nobody listens */
	void *m_change_arg;
	orch_meta_open_fn m_is_open;          /* NULL: nothing is open */
	void *m_is_open_arg;
	struct sqlite3_session *m_capture;    /* recording changes (changes.c) */
	/*
	 * orch_meta_begin() inside a capture: a savepoint in the capture's
	 * transaction, so that code written for transactions of its own runs
	 * unchanged as an operation of a replica group (changes.c).
	 */
	bool m_capture_txn;
};

static inline void orch_sqldb_changed(struct orch_meta *m, uint64_t h, const char *name,
				    size_t namelen)
{
	if (m->m_change)
		m->m_change(m->m_change_arg, h, name, namelen);
}

/*
 * An inode in host form: the attributes plus the directory's next readdir
 * sequence number (0 for non-directories).
 */
struct orch_inode_irec {
	struct orch_attr i_attr;
	uint64_t i_next_seq;
};

/* Entry states (dirent.state). */
enum orch_dirent_state {
	ORCH_DIRENT_LIVE = 0,
	ORCH_DIRENT_PENDING = 1, /* reserved for a create on another server */
	ORCH_DIRENT_BUSY = 2,    /* in a cross-server unlink or rename */
};

/* An entry row in host form. */
struct orch_dirent_irec {
	uint64_t d_child;
	uint32_t d_type;
	uint64_t d_seq;
	uint32_t d_state;
};

/* --- sqldb.c: SQLite wrapper ------------------------------------------------- */

/* Creates what came after format 1 shipped (index, tables) when missing. */
int orch_sqldb_tables_ensure(struct orch_meta *m);

/* Maps a SQLite result code to -errno, logging anything unexpected. */
int orch_sqldb_error(struct orch_meta *m, int rc, enum orch_sqldb_stmt id);

/* The cached statement @id, reset and with no bindings. */
sqlite3_stmt *orch_sqldb_stmt(struct orch_meta *m, enum orch_sqldb_stmt id);

/* Steps @id once: 1 row, 0 done, or -errno.  The caller resets on a row. */
int orch_sqldb_step(struct orch_meta *m, enum orch_sqldb_stmt id);

/* Steps @id to completion and resets it.  0 or -errno. */
int orch_sqldb_exec(struct orch_meta *m, enum orch_sqldb_stmt id);

void orch_sqldb_reset(struct orch_meta *m, enum orch_sqldb_stmt id);

static inline void orch_sqldb_bind_u64(sqlite3_stmt *st, int col, uint64_t v)
{
	sqlite3_bind_int64(st, col, (sqlite3_int64)v);
}

/*
 * Brackets one operation: inside orch_meta_begin() in SAVEPOINT orch_op,
 * which nests; outside it in its own BEGIN IMMEDIATE transaction.  op_end
 * releases (commits) on @error 0 and rolls back otherwise; it returns
 * @error, or the commit error.
 */
int orch_sqldb_op_begin(struct orch_meta *m);
int orch_sqldb_op_end(struct orch_meta *m, int error);

/*
 * Brackets the reads of one query made of several statements in one read
 * transaction, unless a transaction is open already: on its own, each
 * statement takes and drops the WAL read lock (two fcntl calls) and reads
 * the WAL index header again.  read_begin returns whether it began one;
 * pass that to read_end, which ends it.  Nothing is written in between.
 */
bool orch_sqldb_read_begin(struct orch_meta *m);
void orch_sqldb_read_end(struct orch_meta *m, bool began);

/* Creates every table in a new database. */
int orch_sqldb_schema_create(sqlite3 *db);

int orch_sqldb_prepare_all(struct orch_meta *m);
void orch_sqldb_finalize_all(struct orch_meta *m);

/*
 * Takes the next value of counter @c, in the caller's transaction.  Values
 * are reserved SQLDB_COUNTER_BATCH at a time: super holds the end of the
 * reservation, so most calls read it and write nothing.  0, -EUCLEAN,
 * -ENOSPC (counter exhausted), -EIO.
 */
int orch_sqldb_counter_next(struct orch_meta *m, enum sqldb_counter c, uint64_t *out);
/*
 * After every commit of the write connection: counts it, and syncs the WAL
 * if the transaction made a counter reservation (orch_sqldb_counter_next).
 */
void orch_sqldb_committed(struct orch_meta *m);

/* The value counter @c hands out next (for statistics and tests). */
int orch_sqldb_counter_peek(struct orch_meta *m, enum sqldb_counter c, uint64_t *out);

/* Inode rows.  lookup verifies the record (-EUCLEAN). */
int orch_sqldb_inode_lookup(struct orch_meta *m, uint64_t h, struct orch_inode_irec *out);
int orch_sqldb_inode_insert(struct orch_meta *m, const struct orch_inode_irec *in,
			  const char *target);
int orch_sqldb_inode_update(struct orch_meta *m, const struct orch_inode_irec *in);
/* Deletes the inode row and its xattrs. */
int orch_sqldb_inode_delete(struct orch_meta *m, uint64_t h);

/* Entry rows.  lookup verifies the record (-EUCLEAN). */
int orch_sqldb_dirent_lookup(struct orch_meta *m, uint64_t parent, const char *name,
			   size_t namelen, struct orch_dirent_irec *out);
int orch_sqldb_dirent_insert(struct orch_meta *m, uint64_t parent, const char *name,
			   size_t namelen, const struct orch_dirent_irec *in);
int orch_sqldb_dirent_update(struct orch_meta *m, uint64_t parent, const char *name,
			   size_t namelen, const struct orch_dirent_irec *in);
int orch_sqldb_dirent_delete(struct orch_meta *m, uint64_t parent, const char *name,
			   size_t namelen);
/* 0 if @dir has no entries (pending ones count), -ENOTEMPTY otherwise. */
int orch_sqldb_dir_check_empty(struct orch_meta *m, uint64_t dir);

/* Checks a name from a caller: -EINVAL, -ENAMETOOLONG or 0. */
int orch_sqldb_name_check(const char *name, size_t namelen);

/* True for the S_IFMT values Orchard stores. */
static inline bool orch_sqldb_type_is_valid(uint32_t type)
{
	switch (type) {
	case S_IFREG:
	case S_IFDIR:
	case S_IFLNK:
	case S_IFIFO:
	case S_IFSOCK:
	case S_IFCHR:
	case S_IFBLK:
		return true;
	default:
		return false;
	}
}

/* True if inode @h is numbered by this server. */
static inline bool orch_sqldb_is_local(const struct orch_meta *m, uint64_t h)
{
	return orch_handle_server(h) == m->m_ident.server_index;
}

/* --- meta.c: internal twins used by dirent.c ------------------------------- */

int orch_meta_inode_nlink_adjust_(struct orch_meta *m, uint64_t h, int delta,
				  int64_t now, struct orch_attr *out, bool *freed);

/* Reads directory @h for an entry operation: -ENOENT, -ENOTDIR. */
int orch_meta_dir_get_(struct orch_meta *m, uint64_t h, struct orch_inode_irec *out);

/* --- xattr.c: internal twin used by meta.c ----------------------------------- */

/*
 * Drops the file-capability xattr (ORCH_XATTR_CAPS) of @h, as Linux does at
 * a write, a truncate or a chown; *@gone says whether it had one.  The
 * caller updates the inode (ctime).
 */
int orch_meta_xattr_kill_priv_(struct orch_meta *m, uint64_t h, bool *gone);

/* --- Permissions (Linux generic_permission; the checks are in proto/perm.h) --- */


/*
 * The sticky rule: in a sticky directory only the owner of the entry's
 * inode, the owner of the directory, or root may remove or rename it.
 */
static inline bool orch_meta_sticky_ok(const struct orch_cred *cred,
				       const struct orch_attr *dir,
				       const struct orch_attr *child)
{
	if (!(dir->mode & S_ISVTX) || cred->uid == 0 || cred->uid == dir->uid)
		return true;
	return child && child->uid == cred->uid;
}

/* True if the sticky rule can be decided without the child's owner. */
static inline bool orch_meta_sticky_needs_child(const struct orch_cred *cred,
						const struct orch_attr *dir)
{
	return (dir->mode & S_ISVTX) && cred->uid != 0 && cred->uid != dir->uid;
}

#endif
