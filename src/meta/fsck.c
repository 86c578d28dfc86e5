/*
 * Reverse lookups (which entries name an inode) and the namespace half of
 * the online scrub.
 *
 * The check runs on a connection of its own, opened read-only, inside one
 * read transaction: SQLite's WAL gives it a snapshot while the server's
 * loop keeps committing on the write connection.  It never changes
 * anything.  What one server cannot know alone (inodes and entries held
 * on other servers) it asks the caller through orch_meta_fsck_ops, 256
 * handles at a time; a finding that depends on such an answer is
 * confirmed on a fresh snapshot first, because the answer is newer than
 * the snapshot (an entry removed meanwhile is no fault).
 *
 * Rules (docs/ADMIN.md):
 *   N1 a live entry names an inode that does not exist
 *   N2 a file's nlink differs from the entries naming it (on every server),
 *      or a directory is named more than once
 *   N3 a directory's nlink differs from 2 + its subdirectories
 *   N4 an entry's type differs from its inode's
 *   N5 an intent older than the limit is still pending
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "meta/meta_i.h"

#define FSCK_BATCH 256
#define FSCK_CONFIRM_MAX 1024

/* --- Reverse lookup (loop thread, the write connection) ---------------------- */

int orch_meta_names(struct orch_meta *m, uint64_t child, struct orch_dirent *out,
		    uint32_t max, uint32_t *n, uint64_t *total)
{
	sqlite3_stmt *s = NULL;
	int rc, error = 0;

	*n = 0;
	*total = 0;
	rc = sqlite3_prepare_v2(m->m_db,
		"SELECT parent, name, type, (SELECT count(*) FROM dirent"
		"  WHERE child = ?1 AND state <> 1)"
		" FROM dirent WHERE child = ?1 AND state <> 1"
		" ORDER BY parent, name LIMIT ?2", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return orch_sqldb_error(m, rc, SQLDB_DIRENT_GET);
	orch_sqldb_bind_u64(s, 1, child);
	sqlite3_bind_int64(s, 2, max);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW && *n < max) {
		struct orch_dirent *d = &out[*n];
		struct orch_inode_irec dir;
		int len = sqlite3_column_bytes(s, 1);

		if (len < 1 || len > ORCH_NAME_MAX)
			continue;  /* a damaged name: the scrub reports records */
		memset(d, 0, sizeof(*d));
		d->handle = (uint64_t)sqlite3_column_int64(s, 0);
		d->namelen = (uint8_t)len;
		memcpy(d->name, sqlite3_column_blob(s, 1), (size_t)len);
		d->type = (uint32_t)sqlite3_column_int64(s, 2);
		*total = (uint64_t)sqlite3_column_int64(s, 3);
		if (orch_sqldb_is_local(m, d->handle) &&
		    orch_sqldb_inode_lookup(m, d->handle, &dir) == 0) {
			d->has_attr = true;
			d->attr = dir.i_attr;
		}
		(*n)++;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE)
		error = orch_sqldb_error(m, rc, SQLDB_DIRENT_GET);
	sqlite3_finalize(s);
	return error;
}

/* --- The check ------------------------------------------------------------------- */

/* An entry whose child is held elsewhere, waiting to be asked about. */
struct fsck_rem {
	uint64_t parent, child;
	uint32_t type;
	uint8_t namelen;
	char name[ORCH_NAME_MAX + 1];
};

struct fsck {
	sqlite3 *db;
	const char *path;
	uint32_t self;
	const struct orch_meta_fsck_ops *ops;
	void *ops_arg;
	orch_meta_finding_fn fn;
	void *arg;
	long found, max;
	sqlite3_stmt *inode_mode;
	struct fsck_rem rem[FSCK_BATCH];
	size_t nrem;
	/* Suspects of N1 to confirm on a fresh snapshot. */
	struct fsck_rem *confirm;
	size_t nconfirm;
};

static void fsck_report(struct fsck *fk, const char *rule, const char *structure,
			uint64_t handle, uint64_t parent, const char *fmt, ...)
	__attribute__((format(printf, 6, 7)));

static void fsck_report(struct fsck *fk, const char *rule, const char *structure,
			uint64_t handle, uint64_t parent, const char *fmt, ...)
{
	struct orch_meta_finding f;
	va_list ap;

	if (fk->found++ >= fk->max || !fk->fn)
		return;
	f.rule = rule;
	f.structure = structure;
	f.handle = handle;
	f.parent = parent;
	va_start(ap, fmt);
	vsnprintf(f.detail, sizeof(f.detail), fmt, ap);
	va_end(ap);
	fk->fn(fk->arg, &f);
}

static int fsck_sql(struct fsck *fk, int rc, const char *what)
{
	ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "namespace check: %s: %s (code %d, errno %d): db='%s'",
			   what, sqlite3_errmsg(fk->db), sqlite3_extended_errcode(fk->db),
			   sqlite3_system_errno(fk->db), fk->path);
	return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
}

static int fsck_begin(struct fsck *fk)
{
	/* A deferred BEGIN takes its snapshot at the first read. */
	int rc = sqlite3_exec(fk->db, "BEGIN; SELECT count(*) FROM super", NULL, NULL,
			      NULL);

	return rc == SQLITE_OK ? 0 : fsck_sql(fk, rc, "begin");
}

static void fsck_end(struct fsck *fk)
{
	sqlite3_exec(fk->db, "COMMIT", NULL, NULL, NULL);
}

/* Mode of local inode @h: 1 found, 0 absent, -errno. */
static int fsck_inode_mode(struct fsck *fk, uint64_t h, uint32_t *mode)
{
	sqlite3_stmt *s = fk->inode_mode;
	int rc;

	sqlite3_bind_int64(s, 1, (int64_t)h);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		*mode = (uint32_t)sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	if (rc == SQLITE_ROW)
		return 1;
	return rc == SQLITE_DONE ? 0 : fsck_sql(fk, rc, "inode lookup");
}

static void fsck_name(const struct fsck_rem *e, char *out, size_t len)
{
	snprintf(out, len, "%.*s", (int)e->namelen, e->name);
}

/* Asks the owners about the batch of remote children; suspects are kept. */
static int fsck_flush_remote(struct fsck *fk)
{
	uint32_t nlink[FSCK_BATCH];
	uint64_t h[FSCK_BATCH];
	int error;

	if (!fk->nrem || !fk->ops || !fk->ops->inode_nlink) {
		fk->nrem = 0;
		return 0;
	}
	for (size_t i = 0; i < fk->nrem; i++)
		h[i] = fk->rem[i].child;
	error = fk->ops->inode_nlink(fk->ops_arg, h, fk->nrem, nlink);
	for (size_t i = 0; !error && i < fk->nrem; i++) {
		struct fsck_rem *p;

		if (nlink[i] != 0 || fk->nconfirm >= FSCK_CONFIRM_MAX)
			continue;
		if (!fk->confirm) {
			fk->confirm = calloc(FSCK_CONFIRM_MAX, sizeof(*fk->confirm));
			if (!fk->confirm)
				return -ENOMEM;
		}
		p = &fk->confirm[fk->nconfirm++];
		*p = fk->rem[i];
	}
	fk->nrem = 0;
	return error;
}

/* One entry: N1 and N4 for a local child, a batch slot for a remote one. */
static int fsck_dirent(struct fsck *fk, sqlite3_stmt *s)
{
	uint64_t parent = (uint64_t)sqlite3_column_int64(s, 0);
	uint64_t child = (uint64_t)sqlite3_column_int64(s, 2);
	uint32_t type = (uint32_t)sqlite3_column_int64(s, 3);
	int len = sqlite3_column_bytes(s, 1);
	struct fsck_rem e = { .parent = parent, .child = child, .type = type };
	char name[ORCH_NAME_MAX + 1];
	uint32_t mode = 0;
	int rc;

	if (len < 1 || len > ORCH_NAME_MAX)
		len = 0;
	e.namelen = (uint8_t)len;
	if (len)
		memcpy(e.name, sqlite3_column_blob(s, 1), (size_t)len);
	fsck_name(&e, name, sizeof(name));
	if (orch_handle_server(child) != fk->self) {
		fk->rem[fk->nrem++] = e;
		return fk->nrem == FSCK_BATCH ? fsck_flush_remote(fk) : 0;
	}
	rc = fsck_inode_mode(fk, child, &mode);
	if (rc < 0)
		return rc;
	if (rc == 0)
		fsck_report(fk, "N1", "dirent", child, parent,
			    "entry '%s' in directory %#" PRIx64 " names inode %#" PRIx64
			    ", which does not exist", name, parent, child);
	else if ((mode & S_IFMT) != type)
		fsck_report(fk, "N4", "dirent", child, parent,
			    "entry '%s' in directory %#" PRIx64 " has type %#o, inode %#"
			    PRIx64 " has type %#o", name, parent, type, child,
			    mode & S_IFMT);
	return 0;
}

static int fsck_dirents(struct fsck *fk)
{
	sqlite3_stmt *s;
	int rc, error = 0;

	rc = sqlite3_prepare_v2(fk->db, "SELECT parent, name, child, type FROM dirent"
				" WHERE state = 0 ORDER BY parent, name", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return fsck_sql(fk, rc, "prepare dirents");
	while (!error && (rc = sqlite3_step(s)) == SQLITE_ROW)
		error = fsck_dirent(fk, s);
	if (!error && rc != SQLITE_DONE)
		error = fsck_sql(fk, rc, "dirents");
	sqlite3_finalize(s);
	return error ? error : fsck_flush_remote(fk);
}

/* N2 and N3 for one inode row (handle, mode, nlink, entries, subdirs). */
static void fsck_inode(struct fsck *fk, sqlite3_stmt *s)
{
	uint64_t h = (uint64_t)sqlite3_column_int64(s, 0);
	uint32_t mode = (uint32_t)sqlite3_column_int64(s, 1);
	int64_t nlink = sqlite3_column_int64(s, 2);
	int64_t names = sqlite3_column_int64(s, 3);
	int64_t subdirs = sqlite3_column_int64(s, 4);
	uint64_t remote = 0;

	/*
	 * Entries in directories held elsewhere count too, and must be asked
	 * for even when the local ones alone match: a name held twice (one
	 * here, one on a peer) looks right from either side alone.
	 */
	if (fk->ops && fk->ops->names_count && fk->ops->names_count(fk->ops_arg, h, &remote))
		return;  /* cannot tell */
	if (S_ISDIR(mode)) {
		if (nlink != 2 + subdirs)
			fsck_report(fk, "N3", "inode", h, 0,
				    "directory %#" PRIx64 " has nlink %" PRId64 ", expected %"
				    PRId64 " (2 + %" PRId64 " subdirectories)", h, nlink,
				    2 + subdirs, subdirs);
		/* None is not reported: a remote mkdir in flight names it only at its end. */
		if (names + (int64_t)remote > 1)
			fsck_report(fk, "N2", "inode", h, 0,
				    "directory %#" PRIx64 " is named by %" PRId64
				    " entries, expected 1", h, names + (int64_t)remote);
		return;
	}
	if (names + (int64_t)remote != nlink)
		fsck_report(fk, "N2", "inode", h, 0,
			    "inode %#" PRIx64 " has nlink %" PRId64 " but %" PRId64
			    " entries name it", h, nlink, names + (int64_t)remote);
}

static int fsck_inodes(struct fsck *fk)
{
	sqlite3_stmt *s;
	int rc;

	rc = sqlite3_prepare_v2(fk->db,
		"SELECT i.handle, i.mode, i.nlink,"
		" (SELECT count(*) FROM dirent d WHERE d.child = i.handle AND d.state <> 1),"
		" (SELECT count(*) FROM dirent d WHERE d.parent = i.handle"
		"   AND d.type = 16384 AND d.state <> 1)"
		" FROM inode i ORDER BY i.handle", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return fsck_sql(fk, rc, "prepare inodes");
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		fsck_inode(fk, s);
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : fsck_sql(fk, rc, "inodes");
}

static int fsck_intents(struct fsck *fk, uint64_t age_ms)
{
	int64_t now = orch_time_real_ns();
	int64_t before = now - (int64_t)ORCH_MIN(age_ms, (uint64_t)INT64_MAX / 2000000) * 1000000;
	sqlite3_stmt *s;
	int rc;

	rc = sqlite3_prepare_v2(fk->db, "SELECT id, kind, created FROM intent"
				" WHERE created < ?1 ORDER BY id", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return fsck_sql(fk, rc, "prepare intents");
	sqlite3_bind_int64(s, 1, before);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		int64_t created = sqlite3_column_int64(s, 2);

		fsck_report(fk, "N5", "intent", 0, 0,
			    "intent %" PRId64 " (kind %" PRId64 ") pending for %" PRId64 " s",
			    (int64_t)sqlite3_column_int64(s, 0),
			    (int64_t)sqlite3_column_int64(s, 1), (now - created) / 1000000000);
	}
	sqlite3_finalize(s);
	return rc == SQLITE_DONE ? 0 : fsck_sql(fk, rc, "intents");
}

/* Reports the N1 suspects whose entry is still there on a fresh snapshot. */
static int fsck_confirm(struct fsck *fk)
{
	sqlite3_stmt *s;
	char name[ORCH_NAME_MAX + 1];
	int rc, error = 0;

	if (!fk->nconfirm)
		return 0;
	rc = sqlite3_prepare_v2(fk->db, "SELECT 1 FROM dirent WHERE parent = ?1"
				" AND name = ?2 AND child = ?3 AND state = 0", -1, &s, NULL);
	if (rc != SQLITE_OK)
		return fsck_sql(fk, rc, "prepare confirm");
	for (size_t i = 0; i < fk->nconfirm; i++) {
		const struct fsck_rem *e = &fk->confirm[i];

		sqlite3_bind_int64(s, 1, (int64_t)e->parent);
		sqlite3_bind_blob(s, 2, e->name, e->namelen, SQLITE_STATIC);
		sqlite3_bind_int64(s, 3, (int64_t)e->child);
		rc = sqlite3_step(s);
		sqlite3_reset(s);
		if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
			error = fsck_sql(fk, rc, "confirm");
			break;
		}
		fsck_name(e, name, sizeof(name));
		if (rc == SQLITE_ROW)
			fsck_report(fk, "N1", "dirent", e->child, e->parent,
				    "entry '%s' in directory %#" PRIx64 " names inode %#"
				    PRIx64 " on server %u, which does not exist", name,
				    e->parent, e->child, orch_handle_server(e->child));
	}
	sqlite3_finalize(s);
	return error;
}

long orch_meta_fsck(const char *db_path, uint32_t server_index, uint64_t intent_age_ms,
		    const struct orch_meta_fsck_ops *ops, void *ops_arg,
		    orch_meta_finding_fn fn, void *arg, long max)
{
	struct fsck *fk = calloc(1, sizeof(*fk));
	int rc, error;

	if (!fk)
		return -ENOMEM;
	*fk = (struct fsck){ .path = db_path, .self = server_index, .ops = ops,
			     .ops_arg = ops_arg, .fn = fn, .arg = arg, .max = max };
	rc = sqlite3_open_v2(db_path, &fk->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		error = fsck_sql(fk, rc, "open");
		goto out;
	}
	sqlite3_busy_timeout(fk->db, 1000);
	rc = sqlite3_prepare_v2(fk->db, "SELECT mode FROM inode WHERE handle = ?1", -1,
				&fk->inode_mode, NULL);
	if (rc != SQLITE_OK) {
		error = fsck_sql(fk, rc, "prepare");
		goto out;
	}
	error = fsck_begin(fk);
	if (error)
		goto out;
	error = fsck_dirents(fk);
	if (!error)
		error = fsck_inodes(fk);
	if (!error)
		error = fsck_intents(fk, intent_age_ms);
	fsck_end(fk);
	if (!error)
		error = fsck_confirm(fk);
out:
	sqlite3_finalize(fk->inode_mode);
	sqlite3_close(fk->db);
	free(fk->confirm);
	long found = fk->found;
	free(fk);
	return error ? error : found;
}
