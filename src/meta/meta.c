/*
 * The namespace of one server: lifecycle (mkfs, open, identity checks),
 * transactions, and the operations on inodes alone.  Entries are in
 * dirent.c, xattrs, intents and applied records in xattr.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pcut.h"
#include "common/time.h"
#include "meta/meta_i.h"
#include "proto/layout.h"

#define META_BUSY_TIMEOUT_MS 5000
#define META_BUSY_FAST 100 /* busy waits of 100 us before waits of 1 ms */

/* --- Opening the database --------------------------------------------------- */

static void meta_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void meta_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

static int meta_path(char *buf, size_t len, const char *data_dir)
{
	int n = snprintf(buf, len, "%s/%s", data_dir, ORCH_META_DB_NAME);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Runs one pragma or statement without results on a raw connection. */
static int meta_exec(sqlite3 *db, const char *sql)
{
	int rc = sqlite3_exec(db, sql, NULL, NULL, NULL);

	if (rc != SQLITE_OK) {
		ORCH_ERR("cannot run '%s': %s", sql, sqlite3_errmsg(db));
		return rc == SQLITE_FULL ? -ENOSPC : -EIO;
	}
	return 0;
}

/*
 * The write lock is held by someone else only while orchardd's flusher
 * finishes a checkpoint that restarts the WAL (flush.c): a few milliseconds.
 * SQLite's own busy handler sleeps 1, 2, 5, 10 ms... so a request would
 * wait up to twice the hold-off; polling every 100 us for the first 10 ms
 * ends the wait soon after the lock is free.  Gives up after
 * META_BUSY_TIMEOUT_MS, as sqlite3_busy_timeout() would.
 */
static int meta_busy(void *arg, int count)
{
	struct orch_meta *m = arg;
	struct timespec ts = { 0, 100000 };

	if (count >= META_BUSY_FAST + (META_BUSY_TIMEOUT_MS - META_BUSY_FAST / 10))
		return 0;
	if (count >= META_BUSY_FAST)
		ts.tv_nsec = 1000000;
	nanosleep(&ts, NULL);
	m->m_busy_us += (uint64_t)ts.tv_nsec / 1000;
	return 1;
}

/*
 * WAL with synchronous=NORMAL: a commit is durable against a process crash
 * at once and against power loss when the server syncs the WAL, which it
 * does itself for clients that ask (see the durability contract in DESIGN).
 */
static int meta_configure(struct orch_meta *m)
{
	sqlite3_stmt *st;
	bool wal;
	int rc;

	sqlite3_extended_result_codes(m->m_db, 1);
	sqlite3_busy_handler(m->m_db, meta_busy, m);
	rc = sqlite3_prepare_v2(m->m_db, "PRAGMA journal_mode = WAL", -1, &st, NULL);
	if (rc != SQLITE_OK)
		goto out_sqlite;
	rc = sqlite3_step(st);
	wal = rc == SQLITE_ROW &&
	      strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
	sqlite3_finalize(st);
	if (!wal) {
		ORCH_ERR("cannot switch to WAL mode: %s: db='%s'",
			 sqlite3_errmsg(m->m_db), m->m_path);
		return -EIO;
	}
	rc = meta_exec(m->m_db, "PRAGMA synchronous = NORMAL");
	if (!rc)
		rc = meta_exec(m->m_db, "PRAGMA foreign_keys = OFF");
	/*
	 * No automatic checkpoints: with synchronous=NORMAL a checkpoint
	 * fsyncs, and it would land on whichever request crossed the WAL
	 * threshold.  orchardd's flusher thread checkpoints instead, off the
	 * request path; closing the last connection checkpoints too.
	 */
	if (!rc)
		rc = meta_exec(m->m_db, "PRAGMA wal_autocheckpoint = 0");
	return rc;

out_sqlite:
	ORCH_ERR("cannot configure the namespace database: %s: db='%s'",
		 sqlite3_errmsg(m->m_db), m->m_path);
	return -EIO;
}

static int meta_alloc(const char *data_dir, int flags, struct orch_meta **out)
{
	struct orch_meta *m;
	int error;

	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	error = meta_path(m->m_path, sizeof(m->m_path), data_dir);
	if (!error)
		error = orch_pcut_vfs_register(); /* no-op unless crash-testing */
	if (error)
		goto out_free;
	if (sqlite3_open_v2(m->m_path, &m->m_db, flags | SQLITE_OPEN_NOMUTEX, NULL) !=
	    SQLITE_OK) {
		ORCH_ERR("cannot open the namespace database: %s: db='%s'",
			 m->m_db ? sqlite3_errmsg(m->m_db) : "out of memory", m->m_path);
		error = -EIO;
		goto out_close;
	}
	error = meta_configure(m);
	if (error)
		goto out_close;
	*out = m;
	return 0;

out_close:
	sqlite3_close(m->m_db);
out_free:
	free(m);
	return error;
}

void orch_meta_close(struct orch_meta *m)
{
	if (!m)
		return;
	orch_meta_capture_cancel(m);
	if (m->m_in_txn)
		orch_meta_abort(m);
	orch_sqldb_finalize_all(m);
	if (sqlite3_close(m->m_db) != SQLITE_OK)
		ORCH_ERR("cannot close the namespace database: %s: db='%s'",
			 sqlite3_errmsg(m->m_db), m->m_path);
	free(m);
}

/* --- mkfs ------------------------------------------------------------------- */

static int meta_ident_check(const struct orch_meta_ident *id)
{
	size_t len = strnlen(id->cluster_id, sizeof(id->cluster_id));

	if (len == 0 || len == sizeof(id->cluster_id))
		return -EINVAL;
	if (id->nservers == 0 || id->nservers > (1u << 16) ||
	    id->server_index >= id->nservers)
		return -EINVAL;
	if (id->strip_size == 0 || id->strip_size % 4096)
		return -EINVAL;
	return 0;
}

static int meta_super_put(struct orch_meta *m, const char *key, const char *text,
			  uint64_t value)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(m->m_db, "INSERT INTO super (key, value) VALUES (?1, ?2)",
				-1, &st, NULL);
	if (rc == SQLITE_OK) {
		sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
		if (text)
			sqlite3_bind_text(st, 2, text, -1, SQLITE_STATIC);
		else
			sqlite3_bind_int64(st, 2, (sqlite3_int64)value);
		rc = sqlite3_step(st);
	}
	sqlite3_finalize(st);
	if (rc != SQLITE_DONE) {
		ORCH_ERR("cannot write the super table: %s: key='%s' db='%s'",
			 sqlite3_errmsg(m->m_db), key, m->m_path);
		return rc == SQLITE_FULL ? -ENOSPC : -EIO;
	}
	return 0;
}

static int meta_root_create(struct orch_meta *m, int64_t now)
{
	struct orch_inode_irec root = { .i_next_seq = 1 };

	root.i_attr.handle = ORCH_ROOT_HANDLE;
	root.i_attr.mode = S_IFDIR | 0755;
	root.i_attr.nlink = 2;
	root.i_attr.parent = ORCH_ROOT_HANDLE;
	root.i_attr.atime_ns = now;
	root.i_attr.mtime_ns = now;
	root.i_attr.ctime_ns = now;
	return orch_sqldb_inode_insert(m, &root, NULL);
}

/* Everything of mkfs that goes into the database, in one transaction. */
static int meta_mkfs_fill(struct orch_meta *m, const struct orch_meta_ident *id)
{
	int64_t now = id->replica ? 0 : orch_time_real_ns();
	char sql[64];
	int error;

	error = meta_exec(m->m_db, "BEGIN IMMEDIATE");
	if (error)
		return error;
	snprintf(sql, sizeof(sql), "PRAGMA application_id = %d", ORCH_META_APPLICATION_ID);
	error = meta_exec(m->m_db, sql);
	if (!error)
		error = orch_sqldb_schema_create(m->m_db);
	if (!error)
		error = meta_super_put(m, "format_version", NULL, ORCH_META_FORMAT_VERSION);
	if (!error)
		error = meta_super_put(m, "cluster_id", id->cluster_id, 0);
	if (!error)
		error = meta_super_put(m, "server_index", NULL, id->server_index);
	if (!error)
		error = meta_super_put(m, "nservers", NULL, id->nservers);
	if (!error)
		error = meta_super_put(m, "strip_size", NULL, id->strip_size);
	if (!error)
		error = meta_super_put(m, "next_handle", NULL, id->server_index == 0 ? 2 : 1);
	if (!error)
		error = meta_super_put(m, "next_intent", NULL, 1);
	if (!error)
		error = meta_super_put(m, "created_ns", NULL, (uint64_t)now);
	if (!error)
		error = orch_sqldb_prepare_all(m);
	if (!error && id->server_index == 0)
		error = meta_root_create(m, now);
	if (error)
		goto out_rollback;
	return meta_exec(m->m_db, "COMMIT");

out_rollback:
	meta_exec(m->m_db, "ROLLBACK");
	return error;
}

static void meta_unlink_db(const char *path)
{
	char side[PATH_MAX + 8];

	unlink(path);
	snprintf(side, sizeof(side), "%s-wal", path);
	unlink(side);
	snprintf(side, sizeof(side), "%s-shm", path);
	unlink(side);
}

/*
 * The file is created with O_EXCL first, so two concurrent mkfs runs cannot
 * both succeed and an existing database is never touched.
 */
int orch_meta_mkfs(const char *data_dir, const struct orch_meta_ident *id)
{
	struct orch_meta *m;
	char path[PATH_MAX];
	int error, fd;

	error = meta_ident_check(id);
	if (error)
		return error;
	error = meta_path(path, sizeof(path), data_dir);
	if (error)
		return error;
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	close(fd);

	error = meta_alloc(data_dir, SQLITE_OPEN_READWRITE, &m);
	if (error)
		goto out_unlink;
	error = meta_mkfs_fill(m, id);
	orch_meta_close(m);
	if (error)
		goto out_unlink;
	return 0;

out_unlink:
	meta_unlink_db(path);
	return error;
}

/* --- open ------------------------------------------------------------------- */

/* One-off read of a super value, before the statement cache exists. */
static int meta_super_read(struct orch_meta *m, const char *key, uint64_t *num,
			   char *text, size_t textlen)
{
	sqlite3_stmt *st;
	int rc, error = 0;

	rc = sqlite3_prepare_v2(m->m_db, "SELECT value FROM super WHERE key = ?1", -1,
				&st, NULL);
	if (rc != SQLITE_OK) {
		ORCH_ERR("cannot read the super table: %s: db='%s'",
			 sqlite3_errmsg(m->m_db), m->m_path);
		return -ORCH_ECORRUPT;
	}
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		error = rc == SQLITE_DONE ? -ORCH_ECORRUPT : -EIO;
	} else if (text) {
		int len = sqlite3_column_bytes(st, 0);

		if (sqlite3_column_type(st, 0) != SQLITE_TEXT || len <= 0 ||
		    (size_t)len >= textlen)
			error = -ORCH_ECORRUPT;
		else
			memcpy(text, sqlite3_column_text(st, 0), (size_t)len + 1);
	} else {
		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER ||
		    sqlite3_column_int64(st, 0) < 0)
			error = -ORCH_ECORRUPT;
		else
			*num = (uint64_t)sqlite3_column_int64(st, 0);
	}
	sqlite3_finalize(st);
	if (error == -ORCH_ECORRUPT)
		ORCH_ERR("corrupt record: table=super key='%s' db='%s'", key, m->m_path);
	return error;
}

static int meta_app_id(struct orch_meta *m, int32_t *out)
{
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(m->m_db, "PRAGMA application_id", -1, &st, NULL);
	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
		*out = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (rc != SQLITE_ROW) {
		ORCH_ERR("cannot read the database header: %s: db='%s'",
			 sqlite3_errmsg(m->m_db), m->m_path);
		return -EIO;
	}
	return 0;
}

/* Checks what the database says it is against what the caller expects. */
static int meta_identify(struct orch_meta *m, const char *data_dir,
			 const struct orch_meta_ident *expect, char *err, size_t errlen)
{
	struct orch_meta_ident *id = &m->m_ident;
	uint64_t version, v[3];
	int32_t app_id = 0;
	int error;

	error = meta_app_id(m, &app_id);
	if (error) {
		meta_err(err, errlen, "'%s': cannot read meta.db", data_dir);
		return error;
	}
	if (app_id == 0) {
		meta_err(err, errlen, "'%s' holds an incomplete meta.db (interrupted mkfs?)",
			 data_dir);
		return -ORCH_ECORRUPT;
	}
	if (app_id != ORCH_META_APPLICATION_ID) {
		meta_err(err, errlen, "'%s': meta.db is not an orchard namespace", data_dir);
		return -EPROTONOSUPPORT;
	}
	error = meta_super_read(m, "format_version", &version, NULL, 0);
	if (error)
		goto out_corrupt;
	if (version != ORCH_META_FORMAT_VERSION) {
		meta_err(err, errlen, "'%s': format version %" PRIu64 ", this build reads %d",
			 data_dir, version, ORCH_META_FORMAT_VERSION);
		return -EPROTONOSUPPORT;
	}
	error = meta_super_read(m, "cluster_id", NULL, id->cluster_id,
				sizeof(id->cluster_id));
	if (!error)
		error = meta_super_read(m, "server_index", &v[0], NULL, 0);
	if (!error)
		error = meta_super_read(m, "nservers", &v[1], NULL, 0);
	if (!error)
		error = meta_super_read(m, "strip_size", &v[2], NULL, 0);
	if (error)
		goto out_corrupt;
	id->server_index = (uint32_t)v[0];
	id->nservers = (uint32_t)v[1];
	id->strip_size = (uint32_t)v[2];
	if (v[0] > UINT32_MAX || v[1] > UINT32_MAX || v[2] > UINT32_MAX ||
	    meta_ident_check(id)) {
		error = -ORCH_ECORRUPT;
		goto out_corrupt;
	}
	if (!expect)
		return 0;
	if (strncmp(expect->cluster_id, id->cluster_id, sizeof(id->cluster_id)) != 0) {
		meta_err(err, errlen, "'%s' belongs to cluster %s, not %.*s", data_dir,
			 id->cluster_id, (int)sizeof(expect->cluster_id), expect->cluster_id);
		return -EXDEV;
	}
	if (expect->server_index != id->server_index) {
		meta_err(err, errlen, "'%s' belongs to server %u, not %u", data_dir,
			 id->server_index, expect->server_index);
		return -EXDEV;
	}
	return 0;

out_corrupt:
	meta_err(err, errlen, "'%s': meta.db has a damaged super table (%s)", data_dir,
		 strerror(-error));
	return error;
}

int orch_meta_open(const char *data_dir, const struct orch_meta_ident *expect,
		   struct orch_meta **out, char *err, size_t errlen)
{
	char path[PATH_MAX];
	struct orch_meta *m;
	struct stat stbuf;
	int error;

	meta_err(err, errlen, "no error");
	error = meta_path(path, sizeof(path), data_dir);
	if (error) {
		meta_err(err, errlen, "'%s': path too long", data_dir);
		return error;
	}
	if (stat(path, &stbuf) != 0) {
		error = -errno;
		if (error == -ENOENT)
			meta_err(err, errlen, "'%s' is not initialised (run: orchard mkfs)",
				 data_dir);
		else
			meta_err(err, errlen, "'%s': %s", path, strerror(-error));
		return error;
	}
	error = meta_alloc(data_dir, SQLITE_OPEN_READWRITE, &m);
	if (error) {
		meta_err(err, errlen, "'%s': cannot open meta.db (%s)", data_dir,
			 strerror(-error));
		return error;
	}
	error = meta_identify(m, data_dir, expect, err, errlen);
	if (error)
		goto out_close;
	error = orch_sqldb_prepare_all(m);
	if (error) {
		meta_err(err, errlen, "'%s': cannot prepare statements on meta.db", data_dir);
		goto out_close;
	}
	*out = m;
	return 0;

out_close:
	orch_meta_close(m);
	return error;
}

void orch_meta_set_change_hook(struct orch_meta *m, orch_meta_change_fn fn, void *arg)
{
	m->m_change = fn;
	m->m_change_arg = arg;
}

void orch_meta_set_open_hook(struct orch_meta *m, orch_meta_open_fn fn, void *arg)
{
	m->m_is_open = fn;
	m->m_is_open_arg = arg;
}

const struct orch_meta_ident *orch_meta_ident(const struct orch_meta *m)
{
	return &m->m_ident;
}

const char *orch_meta_db_path(const struct orch_meta *m)
{
	return m->m_path;
}

/* --- Transactions ------------------------------------------------------------ */

int orch_meta_begin(struct orch_meta *m)
{
	int error;

	if (m->m_capture) {
		/* Inside a capture: a savepoint of its transaction (meta_i.h). */
		ORCH_ASSERT(!m->m_capture_txn);
		if (m->m_capture_txn)
			return -EINVAL;
		error = orch_sqldb_op_begin(m);
		m->m_capture_txn = !error;
		return error;
	}
	ORCH_ASSERT(!m->m_in_txn);
	if (m->m_in_txn)
		return -EINVAL;
	orch_sqldb_stmt(m, SQLDB_BEGIN);
	error = orch_sqldb_exec(m, SQLDB_BEGIN);
	if (error)
		return error;
	m->m_in_txn = true;
	m->m_txn_lost = false;
	return 0;
}

int orch_meta_commit(struct orch_meta *m)
{
	int error;

	if (m->m_capture_txn) {
		m->m_capture_txn = false;
		return orch_sqldb_op_end(m, 0);
	}
	ORCH_ASSERT(m->m_in_txn);
	if (!m->m_in_txn)
		return -EINVAL;
	if (m->m_txn_lost) {
		orch_meta_abort(m);
		return -EIO;
	}
	orch_sqldb_stmt(m, SQLDB_COMMIT);
	error = orch_sqldb_exec(m, SQLDB_COMMIT);
	if (error) {
		orch_meta_abort(m);
		return error;
	}
	m->m_in_txn = false;
	orch_sqldb_committed(m);
	return 0;
}

void orch_meta_abort(struct orch_meta *m)
{
	if (m->m_capture_txn) {
		m->m_capture_txn = false;
		orch_sqldb_op_end(m, -ECANCELED);
		return;
	}
	if (!sqlite3_get_autocommit(m->m_db)) {
		orch_sqldb_stmt(m, SQLDB_ROLLBACK);
		orch_sqldb_exec(m, SQLDB_ROLLBACK);
	}
	m->m_in_txn = false;
	m->m_txn_lost = false;
}

uint64_t orch_meta_commit_count(const struct orch_meta *m)
{
	return m->m_commits;
}

uint64_t orch_meta_busy_us(const struct orch_meta *m)
{
	return m->m_busy_us;
}

/* --- Inodes ------------------------------------------------------------------- */

int orch_meta_inode_get(struct orch_meta *m, uint64_t h, struct orch_attr *out)
{
	struct orch_inode_irec ir;
	int error;

	error = orch_sqldb_inode_lookup(m, h, &ir);
	if (!error)
		*out = ir.i_attr;
	return error;
}

int orch_meta_dir_get_(struct orch_meta *m, uint64_t h, struct orch_inode_irec *out)
{
	int error = orch_sqldb_inode_lookup(m, h, out);

	if (error)
		return error;
	return S_ISDIR(out->i_attr.mode) ? 0 : -ENOTDIR;
}

static int inode_create_(struct orch_meta *m, const struct orch_attr *in,
			 struct orch_attr *out)
{
	struct orch_inode_irec ir = { .i_attr = *in };
	struct orch_attr *a = &ir.i_attr;
	int64_t now = orch_time_real_ns();
	uint64_t counter;
	int error;

	error = orch_sqldb_counter_next(m, SQLDB_COUNTER_HANDLE, &counter);
	if (error)
		return error;
	a->handle = orch_handle_make(m->m_ident.server_index, counter);
	if (!a->nlink)
		a->nlink = S_ISDIR(a->mode) ? 2 : 1;
	if (!a->atime_ns)
		a->atime_ns = now;
	if (!a->mtime_ns)
		a->mtime_ns = now;
	if (!a->ctime_ns)
		a->ctime_ns = now;
	if (S_ISDIR(a->mode)) {
		ir.i_next_seq = 1;
		a->size = 0;
		memset(&a->layout, 0, sizeof(a->layout));
	}
	error = orch_sqldb_inode_insert(m, &ir, NULL);
	if (!error) {
		*out = *a;
		out->flags = ORCH_ATTR_NOXATTR;   /* computed, not stored: none yet */
	}
	return error;
}

/*
 * Symlinks are refused: their target cannot be passed here, and they are
 * always created with their entry (orch_meta_create).
 */
int orch_meta_inode_create(struct orch_meta *m, const struct orch_attr *in,
			   struct orch_attr *out)
{
	uint32_t type = in->mode & S_IFMT;
	int error;

	if (!orch_sqldb_type_is_valid(type) || type == S_IFLNK ||
	    (in->mode & ~(S_IFMT | 07777)) || in->parent == 0)
		return -EINVAL;
	if (S_ISDIR(in->mode) && in->nlink == 1)
		return -EINVAL;
	if (S_ISREG(in->mode) &&
	    (in->layout.strip_size == 0 || in->layout.strip_size % 4096 ||
	     in->layout.stripe_count == 0))
		return -EINVAL;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	return orch_sqldb_op_end(m, inode_create_(m, in, out));
}

/* --- setattr --------------------------------------------------------------------- */

/* The permission half of setattr: Linux setattr_prepare() and friends. */
static int inode_setattr_check(const struct orch_cred *cred, const struct orch_attr *a,
			       uint32_t valid, const struct orch_attr *in)
{
	bool root = cred->uid == 0, owner = root || cred->uid == a->uid;

	/* Through a descriptor opened for writing, the open checked it (ftruncate). */
	bool handle = valid & ORCH_SET_HANDLE;

	if (valid & ORCH_SET_SIZE) {
		if (S_ISDIR(a->mode))
			return -EISDIR;
		if (!S_ISREG(a->mode))
			return -EINVAL;
		if (!handle && orch_perm(cred, a, ORCH_MAY_WRITE))
			return -EACCES;
	}
	if ((valid & ORCH_SET_KILL_SUIDGID) && !handle && orch_perm(cred, a, ORCH_MAY_WRITE))
		return -EACCES;
	if ((valid & ORCH_SET_UID) && !root && !(owner && in->uid == a->uid))
		return -EPERM;
	if ((valid & ORCH_SET_GID) && !root &&
	    !(owner && (in->gid == a->gid || orch_cred_in_group(cred, in->gid))))
		return -EPERM;
	if ((valid & ORCH_SET_MODE) && !owner)
		return -EPERM;
	/* Explicit times need the owner; "now" is enough with write access. */
	if ((valid & ORCH_SET_ATIME) && !(valid & ORCH_SET_ATIME_NOW) && !owner)
		return -EPERM;
	if ((valid & ORCH_SET_MTIME) && !(valid & ORCH_SET_MTIME_NOW) && !owner)
		return -EPERM;
	if ((valid & (ORCH_SET_ATIME_NOW | ORCH_SET_MTIME_NOW)) && !owner &&
	    orch_perm(cred, a, ORCH_MAY_WRITE))
		return -EACCES;
	if ((valid & ORCH_SET_CTIME) && !owner)
		return -EPERM;
	if (valid & ORCH_SET_LAYOUT) {
		if (!S_ISREG(a->mode))
			return S_ISDIR(a->mode) ? -EISDIR : -EINVAL;
		if (orch_perm(cred, a, ORCH_MAY_WRITE))
			return -EACCES;
		/* Only while no byte can sit where the old layout put it. */
		if (a->size || ((valid & ORCH_SET_SIZE) && in->size))
			return -EBUSY;
	}
	return 0;
}

static int inode_setattr_(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			  uint32_t valid, const struct orch_attr *in,
			  struct orch_attr *out, uint64_t *old_size)
{
	struct orch_inode_irec ir;
	struct orch_attr *a = &ir.i_attr;
	int64_t now = orch_time_real_ns();
	bool root = cred->uid == 0, caps = false;
	uint32_t kill = 0;
	int error;

	error = orch_sqldb_inode_lookup(m, h, &ir);
	if (error)
		return error;
	*old_size = a->size;
	error = inode_setattr_check(cred, a, valid, in);
	if (error)
		return error;
	/*
	 * The set-id bits a chown, a truncate or a write takes, from the
	 * attributes before the change; an explicit mode wins.  The servers
	 * take them for every client: orchard put has no kernel to do it, and
	 * a mount's kernel does it only while FUSE_CAP_HANDLE_KILLPRIV is not
	 * in effect (src/mount/ops.c, mnt_init).
	 */
	if (!(valid & ORCH_SET_MODE)) {
		if (valid & (ORCH_SET_UID | ORCH_SET_GID))
			kill |= orch_perm_kill_suidgid(cred, a, true);
		if (valid & (ORCH_SET_SIZE | ORCH_SET_KILL_SUIDGID))
			kill |= orch_perm_kill_suidgid(cred, a, false);
	}
	/*
	 * The file capabilities go at the same changes, root's included
	 * (Linux file_remove_privs, chown_common: ATTR_KILL_PRIV, whatever the
	 * mode).  A mount's kernel removes them first itself, as the caller
	 * (REMOVEXATTR, xattr.c); this is for the clients that do not (orchard
	 * put's truncate, a kernel that leaves killpriv to the file system).
	 */
	if (((valid & (ORCH_SET_UID | ORCH_SET_GID)) && !S_ISDIR(a->mode)) ||
	    ((valid & (ORCH_SET_SIZE | ORCH_SET_KILL_SUIDGID)) && S_ISREG(a->mode))) {
		error = orch_meta_xattr_kill_priv_(m, h, &caps);
		if (error)
			return error;
	}
	/* Nothing else asked and nothing to take: no change, no new ctime. */
	valid &= ~(uint32_t)(ORCH_SET_HANDLE | ORCH_SET_KILL_SUIDGID);
	if (!valid && !kill && !caps) {
		*out = *a;
		return 0;
	}
	a->mode &= ~kill;
	if (valid & ORCH_SET_UID)
		a->uid = in->uid;
	if (valid & ORCH_SET_GID)
		a->gid = in->gid;
	if (valid & ORCH_SET_MODE) {
		a->mode = (a->mode & S_IFMT) | (in->mode & 07777);
		/* Linux: only a member of the (new) group may keep S_ISGID. */
		if (!root && !orch_cred_in_group(cred, a->gid))
			a->mode &= ~(uint32_t)S_ISGID;
	}
	if (valid & ORCH_SET_SIZE) {
		a->size = in->size;
		if (!(valid & (ORCH_SET_MTIME | ORCH_SET_MTIME_NOW)))
			a->mtime_ns = now;
	}
	if (valid & ORCH_SET_ATIME_NOW)
		a->atime_ns = now;
	else if (valid & ORCH_SET_ATIME)
		a->atime_ns = in->atime_ns;
	if (valid & ORCH_SET_MTIME_NOW)
		a->mtime_ns = now;
	else if (valid & ORCH_SET_MTIME)
		a->mtime_ns = in->mtime_ns;
	if (valid & ORCH_SET_LAYOUT) {
		const struct orch_layout *l = &in->layout;

		if (!orch_layout_is_valid(l) || l->stripe_count > m->m_ident.nservers)
			return -EINVAL;
		a->layout = *l;
	}
	a->ctime_ns = (valid & ORCH_SET_CTIME) ? in->ctime_ns : now;
	error = orch_sqldb_inode_update(m, &ir);
	if (!error)
		*out = *a;
	return error;
}

int orch_meta_inode_setattr(struct orch_meta *m, const struct orch_cred *cred,
			    uint64_t h, uint32_t valid, const struct orch_attr *in,
			    struct orch_attr *out, uint64_t *old_size)
{
	int error;

	if (valid & ~ORCH_SET_KNOWN_)
		return -EINVAL;
	if ((valid & ORCH_SET_SIZE) && in->size > INT64_MAX)
		return -EFBIG;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = inode_setattr_(m, cred, h, valid, in, out, old_size);
	return orch_sqldb_op_end(m, error);
}

/* --- Sizes and link counts ------------------------------------------------------ */

static int inode_extend_(struct orch_meta *m, uint64_t h, uint64_t size,
			 int64_t mtime_ns, struct orch_attr *out)
{
	struct orch_inode_irec ir;
	struct orch_attr *a = &ir.i_attr;
	bool dirty = false;
	int error;

	error = orch_sqldb_inode_lookup(m, h, &ir);
	if (error)
		return error;
	if (!S_ISREG(a->mode))
		return S_ISDIR(a->mode) ? -EISDIR : -EINVAL;
	if (size > a->size) {
		a->size = size;
		dirty = true;
	}
	if (mtime_ns) {
		a->mtime_ns = mtime_ns;
		a->ctime_ns = mtime_ns;
		dirty = true;
	}
	if (dirty)
		error = orch_sqldb_inode_update(m, &ir);
	if (!error)
		*out = *a;
	return error;
}

int orch_meta_inode_extend(struct orch_meta *m, uint64_t h, uint64_t size,
			   int64_t mtime_ns, struct orch_attr *out)
{
	int error;

	if (size > INT64_MAX)
		return -EFBIG;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	return orch_sqldb_op_end(m, inode_extend_(m, h, size, mtime_ns, out));
}

int orch_meta_inode_nlink_adjust_(struct orch_meta *m, uint64_t h, int delta,
				  int64_t now, struct orch_attr *out, bool *freed)
{
	struct orch_inode_irec ir;
	struct orch_attr *a = &ir.i_attr;
	int error;

	*freed = false;
	if (delta != 1 && delta != -1)
		return -EINVAL;
	error = orch_sqldb_inode_lookup(m, h, &ir);
	if (error)
		return error;
	if (S_ISDIR(a->mode))
		return -EISDIR;
	if (delta > 0 && a->nlink == UINT32_MAX)
		return -EMLINK;
	if (delta > 0 && a->nlink == 0)
		return -ENOENT;  /* an orphan: no name may come back */
	a->nlink = (uint32_t)((int64_t)a->nlink + delta);
	a->ctime_ns = now;
	if (a->nlink == 0 && S_ISREG(a->mode) && m->m_is_open &&
	    m->m_is_open(m->m_is_open_arg, h)) {
		error = orch_sqldb_inode_update(m, &ir);
		if (!error) {
			sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_ORPHAN_PUT);

			orch_sqldb_bind_u64(st, 1, h);
			sqlite3_bind_int64(st, 2, now);
			error = orch_sqldb_exec(m, SQLDB_ORPHAN_PUT);
		}
	} else if (a->nlink == 0) {
		error = orch_sqldb_inode_delete(m, h);
		*freed = !error;
	} else {
		error = orch_sqldb_inode_update(m, &ir);
	}
	if (!error && out)
		*out = *a;
	return error;
}

int orch_meta_inode_nlink_adjust(struct orch_meta *m, uint64_t h, int delta,
				 struct orch_attr *out, bool *freed)
{
	int error;

	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = orch_meta_inode_nlink_adjust_(m, h, delta, orch_time_real_ns(), out, freed);
	if (error)
		*freed = false;
	return orch_sqldb_op_end(m, error);
}

static int orphan_free_(struct orch_meta *m, uint64_t h, bool *freed)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_ORPHAN_DELETE);
	struct orch_inode_irec ir;
	int error;

	orch_sqldb_bind_u64(st, 1, h);
	error = orch_sqldb_exec(m, SQLDB_ORPHAN_DELETE);
	if (error || sqlite3_changes(m->m_db) == 0)
		return error;  /* no orphan record: not ours to free */
	error = orch_sqldb_inode_lookup(m, h, &ir);
	if (error == -ENOENT)
		return 0;
	if (!error && ir.i_attr.nlink == 0) {
		error = orch_sqldb_inode_delete(m, h);
		*freed = !error;
	}
	return error;
}

int orch_meta_orphan_free(struct orch_meta *m, uint64_t h, bool *freed)
{
	int error;

	*freed = false;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = orch_sqldb_op_end(m, orphan_free_(m, h, freed));
	if (error)
		*freed = false;
	return error;
}

/*
 * Handles are below 2^63 (server index < ORCH_SERVERS_MAX, shifted by
 * ORCH_HANDLE_SERVER_SHIFT), so SQLite's signed order of the column is theirs.
 */
int orch_meta_orphan_next(struct orch_meta *m, uint64_t after, uint64_t *h)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_ORPHAN_NEXT);
	int rc;

	orch_sqldb_bind_u64(st, 1, after);
	rc = orch_sqldb_step(m, SQLDB_ORPHAN_NEXT);
	if (rc > 0)
		*h = (uint64_t)sqlite3_column_int64(st, 0);
	orch_sqldb_reset(m, SQLDB_ORPHAN_NEXT);
	return rc > 0 ? 0 : rc == 0 ? -ENOENT : rc;
}

/* --- Directories held for another server's entry ---------------------------------- */

static int inode_dir_remove_(struct orch_meta *m, uint64_t h)
{
	struct orch_inode_irec ir;
	int error;

	error = orch_meta_dir_get_(m, h, &ir);
	if (error)
		return error == -ENOENT ? 0 : error;
	error = orch_sqldb_dir_check_empty(m, h);
	if (error)
		return error;
	return orch_sqldb_inode_delete(m, h);
}

int orch_meta_dir_remove(struct orch_meta *m, uint64_t h)
{
	int error;

	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	return orch_sqldb_op_end(m, inode_dir_remove_(m, h));
}

static int inode_set_parent_(struct orch_meta *m, uint64_t h, uint64_t parent)
{
	struct orch_inode_irec ir;
	int error;

	error = orch_sqldb_inode_lookup(m, h, &ir);
	if (error)
		return error;
	ir.i_attr.parent = parent;
	ir.i_attr.ctime_ns = orch_time_real_ns();
	return orch_sqldb_inode_update(m, &ir);
}

int orch_meta_inode_set_parent(struct orch_meta *m, uint64_t h, uint64_t parent)
{
	int error;

	if (parent == 0)
		return -EINVAL;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	return orch_sqldb_op_end(m, inode_set_parent_(m, h, parent));
}

/* --- readlink, access, counts ------------------------------------------------------- */

int orch_meta_readlink(struct orch_meta *m, uint64_t h, char *buf, size_t buflen)
{
	struct orch_inode_irec ir;
	sqlite3_stmt *st;
	const void *p;
	int error, len;

	error = orch_sqldb_inode_lookup(m, h, &ir);
	if (error)
		return error;
	if (!S_ISLNK(ir.i_attr.mode))
		return -EINVAL;
	st = orch_sqldb_stmt(m, SQLDB_INODE_TARGET);
	orch_sqldb_bind_u64(st, 1, h);
	error = orch_sqldb_step(m, SQLDB_INODE_TARGET);
	if (error <= 0)
		return error ? error : -ENOENT;
	p = sqlite3_column_blob(st, 0);
	len = sqlite3_column_bytes(st, 0);
	if (sqlite3_column_type(st, 0) != SQLITE_BLOB || len <= 0 ||
	    len >= ORCH_PATH_MAX || memchr(p, '\0', (size_t)len)) {
		orch_sqldb_reset(m, SQLDB_INODE_TARGET);
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "corrupt record: table=inode handle=%#" PRIx64 " field=target",
				   h);
		return -ORCH_ECORRUPT;
	}
	error = 0;
	if ((size_t)len >= buflen) {
		error = -ERANGE;
	} else {
		memcpy(buf, p, (size_t)len);
		buf[len] = '\0';
	}
	orch_sqldb_reset(m, SQLDB_INODE_TARGET);
	return error;
}

int orch_meta_access(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
		     uint32_t mask)
{
	struct orch_inode_irec ir;
	int error;

	if (mask & ~(uint32_t)(R_OK | W_OK | X_OK))
		return -EINVAL;
	error = orch_sqldb_inode_lookup(m, h, &ir);
	if (error)
		return error;
	/* R_OK, W_OK, X_OK have the values of the permission bits. */
	return mask ? orch_perm(cred, &ir.i_attr, mask) : 0;
}

int orch_meta_counts(struct orch_meta *m, uint64_t *inodes, uint64_t *next_counter)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_INODE_COUNT);
	int error;

	error = orch_sqldb_step(m, SQLDB_INODE_COUNT);
	if (error <= 0)
		return error ? error : -EIO;
	*inodes = (uint64_t)sqlite3_column_int64(st, 0);
	orch_sqldb_reset(m, SQLDB_INODE_COUNT);
	return orch_sqldb_counter_peek(m, SQLDB_COUNTER_HANDLE, next_counter);
}

/* --- Owners of remote inodes ------------------------------------------------ */

int orch_meta_remote_owner_set(struct orch_meta *m, uint64_t h, uint32_t uid)
{
	if (m->m_nremote_owner == ORCH_META_REMOTE_OWNERS)
		return -E2BIG;
	m->m_remote_owner[m->m_nremote_owner].handle = h;
	m->m_remote_owner[m->m_nremote_owner].uid = uid;
	m->m_nremote_owner++;
	return 0;
}

void orch_meta_remote_owner_clear(struct orch_meta *m)
{
	m->m_nremote_owner = 0;
}
