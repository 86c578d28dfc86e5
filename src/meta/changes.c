/*
 * The namespace as a replica group's state machine: what a mutation changed,
 * as a SQLite changeset (the session extension), applied on every member in
 * one transaction together with its log index; and the whole database as
 * one buffer for snapshots.  docs/DESIGN.md, "The namespace as the group's
 * state machine", says why changesets and not re-executed requests.
 */
#define SQLITE_ENABLE_SESSION 1
#define SQLITE_ENABLE_PREUPDATE_HOOK 1

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "meta/meta_i.h"

#define CHANGES_APPLIED_KEY "applied_index"

/* --- Capture ------------------------------------------------------------------ */

int orch_meta_capture_begin(struct orch_meta *m)
{
	sqlite3_session *s = NULL;
	int rc, error;

	if (m->m_capture || m->m_in_txn)
		return -EINVAL;
	rc = sqlite3session_create(m->m_db, "main", &s);
	if (rc == SQLITE_OK)
		rc = sqlite3session_attach(s, NULL);
	if (rc != SQLITE_OK) {
		ORCH_ERR("cannot start recording changes: %s: db='%s'", sqlite3_errstr(rc),
			 m->m_path);
		if (s)
			sqlite3session_delete(s);
		return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
	}
	error = orch_meta_begin(m);
	if (error) {
		sqlite3session_delete(s);
		return error;
	}
	m->m_capture = s;
	return 0;
}

/*
 * Whatever the capture changed is undone here, committed or not: the
 * changes come back through orch_meta_changes_apply once the group has
 * decided them, on the leader as on every other member.
 */
static void changes_capture_drop(struct orch_meta *m)
{
	sqlite3session_delete(m->m_capture);
	m->m_capture = NULL;
	m->m_capture_txn = false;
	orch_meta_abort(m);
	/* The reservation rolled back with it; applying it brings it back. */
	m->m_reserved = false;
}

void orch_meta_forget_reservations(struct orch_meta *m)
{
	for (int c = 0; c < SQLDB_NCOUNTERS; c++)
		m->m_counter[c].c_limit = 0;
}

int orch_meta_capture_step(struct orch_meta *m, int (*fn)(void *arg, struct orch_meta *m),
			   void *arg)
{
	int error, rc;

	if (!m->m_capture)
		return -EINVAL;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	rc = fn(arg, m);
	if (m->m_capture_txn) {
		/* @fn began a transaction and ended it neither way: it changes nothing. */
		ORCH_ERR("an operation left its transaction open: db='%s'", m->m_path);
		orch_meta_abort(m);
		rc = rc ? rc : -EINVAL;
	}
	/* A session reads rows' final values: what a savepoint undid is not in it. */
	return orch_sqldb_op_end(m, rc);
}

void orch_meta_capture_cancel(struct orch_meta *m)
{
	if (m->m_capture)
		changes_capture_drop(m);
}

int orch_meta_capture_end(struct orch_meta *m, void **out, size_t *outlen)
{
	void *chg = NULL;
	int n = 0, rc;

	*out = NULL;
	*outlen = 0;
	if (!m->m_capture)
		return -EINVAL;
	if (m->m_txn_lost || sqlite3_get_autocommit(m->m_db)) {
		/* SQLite rolled the transaction back (disk full, I/O error). */
		changes_capture_drop(m);
		return -EIO;
	}
	rc = sqlite3session_changeset(m->m_capture, &n, &chg);
	changes_capture_drop(m);
	if (rc != SQLITE_OK) {
		sqlite3_free(chg);
		ORCH_ERR("cannot collect recorded changes: %s: db='%s'", sqlite3_errstr(rc),
			 m->m_path);
		return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
	}
	/* SQLite's own buffer, handed over as it is: no copy on every entry. */
	if (n > 0) {
		*out = chg;
		*outlen = (size_t)n;
	} else {
		sqlite3_free(chg);
	}
	return 0;
}

void orch_meta_changes_free(void *chg)
{
	sqlite3_free(chg);
}

/* --- Apply --------------------------------------------------------------------- */

int orch_meta_applied_index(struct orch_meta *m, uint64_t *index)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_SUPER_GET);
	int error;

	*index = 0;
	sqlite3_bind_text(st, 1, CHANGES_APPLIED_KEY, -1, SQLITE_STATIC);
	error = orch_sqldb_step(m, SQLDB_SUPER_GET);
	if (error < 0)
		return error;
	if (error == 0)
		return 0; /* never applied anything */
	if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || sqlite3_column_int64(st, 0) < 0) {
		orch_sqldb_reset(m, SQLDB_SUPER_GET);
		ORCH_ERR("corrupt record: table=super key='%s' db='%s'", CHANGES_APPLIED_KEY,
			 m->m_path);
		return -ORCH_ECORRUPT;
	}
	*index = (uint64_t)sqlite3_column_int64(st, 0);
	orch_sqldb_reset(m, SQLDB_SUPER_GET);
	return 0;
}

/* What went wrong while applying one changeset, for the one log line. */
struct changes_apply {
	struct orch_meta *m;
	uint64_t index;
	int conflict;          /* the first conflict's SQLITE_CHANGESET_* kind, or 0 */
	char table[32];        /* its table */
	bool foreign;          /* a table that is not the namespace's */
};

/*
 * The tables a changeset may touch, as sqldb_schema (sqldb.c) makes them:
 * column count and primary-key flags (1-based position in the key, 0 for
 * other columns), the table header of a changeset for that table.
 */
static const struct changes_table {
	const char *name;
	unsigned int ncol;
	unsigned char pk[16];
} changes_tables[] = {
	{ "super", 2, { 1, 0 } },
	{ "inode", 16, { 1 } },
	{ "dirent", 6, { 1, 2 } },
	{ "xattr", 3, { 1, 2 } },
	{ "intent", 4, { 1 } },
	{ "applied", 3, { 1, 2 } },
	{ "orphan", 2, { 1 } },
	{ "reply", 3, { 1, 2 } },
};

static int changes_filter(void *arg, const char *table)
{
	struct changes_apply *a = arg;

	for (size_t i = 0; i < ORCH_ARRAY_SIZE(changes_tables); i++)
		if (strcmp(table, changes_tables[i].name) == 0)
			return 1;
	a->foreign = true;
	return 0;
}

/* --- Checking a changeset before SQLite reads it ------------------------------- */

/*
 * SQLite 3.40's changeset reader can loop forever on some malformed input
 * (found by fuzz_meta_changes), so every byte is checked here first,
 * against the format of sqlite3session.h: per table a header ('T', column
 * count as a varint, one primary-key byte per column, the name and a NUL),
 * then its changes (operation, indirect flag, values: old ones for DELETE
 * and UPDATE, new ones for INSERT and UPDATE); a value is a type byte and
 * 8 bytes (integer, real), a varint length and bytes (text, blob), or
 * nothing (NULL; "undefined", only in an UPDATE).
 */
struct changes_cursor {
	const unsigned char *p, *end;
};

static bool changes_varint(struct changes_cursor *c, uint64_t *out)
{
	uint64_t v = 0;

	for (int i = 0; i < 9; i++) {
		if (c->p >= c->end)
			return false;
		if (i == 8) {
			v = (v << 8) | *c->p++;
			break;
		}
		v = (v << 7) | (*c->p & 0x7f);
		if (!(*c->p++ & 0x80))
			break;
	}
	*out = v;
	return true;
}

/* One value; *@type gets its type byte (0: "undefined"). */
static bool changes_value(struct changes_cursor *c, unsigned int *type)
{
	uint64_t len;

	if (c->p >= c->end)
		return false;
	*type = *c->p++;
	switch (*type) {
	case 0: /* undefined */
	case SQLITE_NULL:
		return true;
	case SQLITE_INTEGER:
	case SQLITE_FLOAT:
		if (c->end - c->p < 8)
			return false;
		c->p += 8;
		return true;
	case SQLITE_TEXT:
	case SQLITE_BLOB:
		if (!changes_varint(c, &len) || len > (uint64_t)(c->end - c->p))
			return false;
		c->p += len;
		return true;
	default:
		return false;
	}
}

/*
 * One change's values, with the rules SQLite's writer keeps and its reader
 * (3.40) trusts: a key column is never NULL; INSERT and DELETE define every
 * column; an UPDATE defines the key in its old values only, and any other
 * column in both or in neither.
 */
static bool changes_record(struct changes_cursor *c, const struct changes_table *t,
			   unsigned int op)
{
	unsigned int old[16], type, changed = 0;

	for (unsigned int i = 0; i < t->ncol; i++) {
		if (!changes_value(c, &old[i]))
			return false;
		if (t->pk[i] ? old[i] == 0 || old[i] == SQLITE_NULL
			     : old[i] == 0 && op != SQLITE_UPDATE)
			return false;
	}
	if (op != SQLITE_UPDATE)
		return true;
	for (unsigned int i = 0; i < t->ncol; i++) {
		if (!changes_value(c, &type))
			return false;
		if (t->pk[i] ? type != 0 : (type == 0) != (old[i] == 0))
			return false;
		changed += !t->pk[i] && type != 0;
	}
	/* An UPDATE of nothing: SQLite would build an empty SET and fail everywhere. */
	return changed > 0;
}

static bool changes_header(struct changes_cursor *c, const struct changes_table **out)
{
	const unsigned char *name, *nul;
	uint64_t ncol;

	c->p++; /* 'T' */
	if (!changes_varint(c, &ncol) || ncol > 16 || (uint64_t)(c->end - c->p) < ncol)
		return false;
	name = c->p + ncol;
	nul = memchr(name, '\0', (size_t)(c->end - name));
	if (!nul)
		return false;
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(changes_tables); i++) {
		const struct changes_table *t = &changes_tables[i];

		if (t->ncol == ncol && strlen(t->name) == (size_t)(nul - name) &&
		    memcmp(t->name, name, (size_t)(nul - name)) == 0 &&
		    memcmp(t->pk, c->p, ncol) == 0) {
			*out = t;
			c->p = nul + 1;
			return true;
		}
	}
	return false;
}

static bool changes_well_formed(const void *chg, size_t len)
{
	struct changes_cursor c = { .p = chg, .end = (const unsigned char *)chg + len };
	const struct changes_table *t = NULL;

	while (c.p < c.end) {
		unsigned int op;

		if (*c.p == 'T') {
			if (!changes_header(&c, &t))
				return false;
			continue;
		}
		if (!t || c.end - c.p < 2)
			return false;
		op = *c.p++;
		if (*c.p++ > 1) /* indirect: 0 or 1 */
			return false;
		if (op != SQLITE_INSERT && op != SQLITE_DELETE && op != SQLITE_UPDATE)
			return false;
		if (!changes_record(&c, t, op))
			return false;
	}
	return true;
}

/*
 * Any conflict means this member's database is not the one the change was
 * recorded against: the members diverged, and nothing of the entry may be
 * applied.
 */
static int changes_conflict(void *arg, int kind, sqlite3_changeset_iter *it)
{
	struct changes_apply *a = arg;
	const char *table = NULL;
	int ncol, op, indirect;

	if (!a->conflict) {
		a->conflict = kind;
		if (sqlite3changeset_op(it, &table, &ncol, &op, &indirect) == SQLITE_OK && table)
			snprintf(a->table, sizeof(a->table), "%s", table);
	}
	return SQLITE_CHANGESET_ABORT;
}

static const char *changes_conflict_name(int kind)
{
	switch (kind) {
	case SQLITE_CHANGESET_DATA: return "a row differs";
	case SQLITE_CHANGESET_NOTFOUND: return "a row is missing";
	case SQLITE_CHANGESET_CONFLICT: return "a row exists already";
	case SQLITE_CHANGESET_CONSTRAINT: return "a constraint fails";
	case SQLITE_CHANGESET_FOREIGN_KEY: return "a foreign key fails";
	default: return "?";
	}
}

/* One line per refused entry (they come from peers: rate-limited). */
static void changes_refused(const struct changes_apply *a, int rc)
{
	if (a->conflict)
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "log entry %" PRIu64 " does not apply: %s in"
				   " table %s; this member's namespace differs from the"
				   " group's: db='%s'", a->index,
				   changes_conflict_name(a->conflict), a->table, a->m->m_path);
	else if (a->foreign)
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "log entry %" PRIu64 " changes a table that is"
				   " not the namespace's; not applied: db='%s'", a->index,
				   a->m->m_path);
	else
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "log entry %" PRIu64 " does not apply: %s:"
				   " db='%s'", a->index, sqlite3_errstr(rc), a->m->m_path);
}

/*
 * What a failed apply means: -EBADMSG if the entry can never apply here
 * (a conflict: this member diverged; or the entry itself is bad), else the
 * error of the moment (-ENOSPC, -ENOMEM, -EIO) that a later try may not meet.
 */
static int changes_apply_error(const struct changes_apply *a, int rc)
{
	if (a->conflict || a->foreign)
		return -EBADMSG;
	switch (rc & 0xff) {
	case SQLITE_FULL: return -ENOSPC;
	case SQLITE_NOMEM: return -ENOMEM;
	case SQLITE_CORRUPT:
	case SQLITE_MISMATCH:
	case SQLITE_RANGE:
	case SQLITE_SCHEMA:
	case SQLITE_CONSTRAINT:
	case SQLITE_ERROR:
		return -EBADMSG;
	default: return -EIO;
	}
}

/* In the apply's transaction: a statement of the cache, as every entry runs it. */
static int changes_index_put(struct orch_meta *m, uint64_t index)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_SUPER_PUT);

	sqlite3_bind_text(st, 1, CHANGES_APPLIED_KEY, -1, SQLITE_STATIC);
	orch_sqldb_bind_u64(st, 2, index);
	return orch_sqldb_exec(m, SQLDB_SUPER_PUT);
}

int orch_meta_changes_apply(struct orch_meta *m, uint64_t index, const void *chg, size_t len)
{
	struct changes_apply a = { .m = m, .index = index };
	uint64_t applied;
	int rc, error;

	if (m->m_capture || m->m_in_txn || index == 0)
		return -EINVAL;
	if (len > INT_MAX)
		return -E2BIG;
	error = orch_meta_applied_index(m, &applied);
	if (error)
		return error;
	if (index <= applied)
		return 1; /* a replay after restart: in the database already */
	if (len > 0 && !changes_well_formed(chg, len)) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "log entry %" PRIu64 " is not a well-formed"
				   " change of the namespace; not applied: db='%s'", index,
				   m->m_path);
		return -EBADMSG;
	}
	error = orch_meta_begin(m);
	if (error)
		return error;
	if (len > 0) {
		/* The changeset is only read; SQLite's prototype is not const. */
		rc = sqlite3changeset_apply_v2(m->m_db, (int)len, (void *)(uintptr_t)chg,
					       changes_filter, changes_conflict, &a, NULL, NULL,
					       SQLITE_CHANGESETAPPLY_NOSAVEPOINT);
		if (rc != SQLITE_OK || a.conflict || a.foreign) {
			orch_meta_abort(m);
			changes_refused(&a, rc);
			return changes_apply_error(&a, rc);
		}
	}
	error = changes_index_put(m, index);
	if (error) {
		orch_meta_abort(m);
		return error;
	}
	return orch_meta_commit(m);
}

/* --- Snapshots ----------------------------------------------------------------- */

int orch_meta_snapshot(struct orch_meta *m, void **out, size_t *outlen)
{
	sqlite3_int64 n = 0;
	unsigned char *img;

	*out = NULL;
	*outlen = 0;
	if (m->m_capture || m->m_in_txn)
		return -EINVAL;
	/* One read transaction: every page of one committed state. */
	img = sqlite3_serialize(m->m_db, "main", &n, 0);
	if (!img || n < 100) {
		sqlite3_free(img);
		ORCH_ERR("cannot copy the namespace for a snapshot: %s: db='%s'",
			 sqlite3_errmsg(m->m_db), m->m_path);
		return -ENOMEM;
	}
	*out = malloc((size_t)n);
	if (!*out) {
		sqlite3_free(img);
		return -ENOMEM;
	}
	memcpy(*out, img, (size_t)n);
	/*
	 * Bytes 18 and 19 of the header say WAL mode; an image in memory has
	 * no WAL, so it says "rollback journal" (1, 1) and opens anywhere.
	 */
	((unsigned char *)*out)[18] = 1;
	((unsigned char *)*out)[19] = 1;
	*outlen = (size_t)n;
	sqlite3_free(img);
	return 0;
}

/* One value of the image's super table, as text, for the identity check. */
static int changes_image_super(sqlite3 *db, const char *key, char *buf, size_t buflen)
{
	sqlite3_stmt *st;
	int rc, error = -ORCH_ECORRUPT;

	rc = sqlite3_prepare_v2(db, "SELECT CAST(value AS TEXT) FROM super WHERE key = ?1", -1,
				&st, NULL);
	if (rc != SQLITE_OK)
		return -ORCH_ECORRUPT;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
		snprintf(buf, buflen, "%s", (const char *)sqlite3_column_text(st, 0));
		error = 0;
	}
	sqlite3_finalize(st);
	return error;
}

/* The image is a sound SQLite database of this very namespace (cluster, index). */
static int changes_image_check(struct orch_meta *m, sqlite3 *img)
{
	char app[16], ver[16], cluster[80], index[16], want[16], check[16];
	sqlite3_stmt *st;
	int rc;

	rc = sqlite3_prepare_v2(img, "PRAGMA quick_check", -1, &st, NULL);
	if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW || !sqlite3_column_text(st, 0))
		snprintf(check, sizeof(check), "failed");
	else
		snprintf(check, sizeof(check), "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	if (strcmp(check, "ok") != 0) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "snapshot refused: its database fails SQLite's"
				   " check: db='%s'", m->m_path);
		return -ORCH_ECORRUPT;
	}
	rc = sqlite3_prepare_v2(img, "PRAGMA application_id", -1, &st, NULL);
	if (rc != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
		app[0] = '\0';
	else
		snprintf(app, sizeof(app), "%d", sqlite3_column_int(st, 0));
	sqlite3_finalize(st);
	snprintf(want, sizeof(want), "%d", ORCH_META_APPLICATION_ID);
	if (strcmp(app, want) != 0 ||
	    changes_image_super(img, "format_version", ver, sizeof(ver)) ||
	    changes_image_super(img, "cluster_id", cluster, sizeof(cluster)) ||
	    changes_image_super(img, "server_index", index, sizeof(index))) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "snapshot refused: not an orchard namespace:"
				   " db='%s'", m->m_path);
		return -ORCH_ECORRUPT;
	}
	snprintf(want, sizeof(want), "%d", ORCH_META_FORMAT_VERSION);
	if (strcmp(ver, want) != 0) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "snapshot refused: format version %s, this build"
				   " reads %d: db='%s'", ver, ORCH_META_FORMAT_VERSION, m->m_path);
		return -EPROTONOSUPPORT;
	}
	/* The index it stands for, when it has one, is what apply reads back. */
	rc = sqlite3_prepare_v2(img, "SELECT typeof(value) = 'integer' AND value >= 0 FROM super"
				" WHERE key = '" CHANGES_APPLIED_KEY "'", -1, &st, NULL);
	if (rc != SQLITE_OK || (rc = sqlite3_step(st)) == SQLITE_ERROR ||
	    (rc == SQLITE_ROW && sqlite3_column_int(st, 0) != 1)) {
		sqlite3_finalize(st);
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "snapshot refused: its applied index is"
				   " damaged: db='%s'", m->m_path);
		return -ORCH_ECORRUPT;
	}
	sqlite3_finalize(st);
	snprintf(want, sizeof(want), "%" PRIu32, m->m_ident.server_index);
	if (strcmp(cluster, m->m_ident.cluster_id) != 0 || strcmp(index, want) != 0) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "snapshot refused: it is the namespace of"
				   " cluster %s index %s, not cluster %s index %s: db='%s'",
				   cluster, index, m->m_ident.cluster_id, want, m->m_path);
		return -EXDEV;
	}
	return 0;
}

int orch_meta_restore(struct orch_meta *m, const void *buf, size_t len)
{
	sqlite3_backup *bk;
	unsigned char *copy;
	sqlite3 *img = NULL;
	int rc, error;

	if (m->m_capture || m->m_in_txn)
		return -EINVAL;
	if (len < 512 || len > (size_t)INT64_MAX)
		return -ORCH_ECORRUPT;
	/* SQLite owns (and may resize and frees) a deserialized image. */
	copy = sqlite3_malloc64(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, buf, len);
	rc = sqlite3_open_v2(":memory:", &img, SQLITE_OPEN_READWRITE, NULL);
	if (rc != SQLITE_OK) {
		sqlite3_free(copy);
		sqlite3_close(img);
		return -ENOMEM;
	}
	rc = sqlite3_deserialize(img, "main", copy, (sqlite3_int64)len, (sqlite3_int64)len,
				 SQLITE_DESERIALIZE_FREEONCLOSE | SQLITE_DESERIALIZE_READONLY);
	if (rc != SQLITE_OK) {
		sqlite3_close(img);
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "snapshot refused: not a database image:"
				   " db='%s'", m->m_path);
		return -ORCH_ECORRUPT;
	}
	error = changes_image_check(m, img);
	/*
	 * The header's text encoding (offset 56, big-endian): SQLite reads a
	 * bad value as UTF-8 in the image but copies it into the live
	 * database, which then cannot read its own tables.
	 */
	if (!error && memcmp((const unsigned char *)buf + 56, "\0\0\0\1", 4) != 0) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "snapshot refused: its text encoding is not"
				   " UTF-8: db='%s'", m->m_path);
		error = -ORCH_ECORRUPT;
	}
	if (error) {
		sqlite3_close(img);
		return error;
	}
	/* Page by page into the live database, in one write transaction of it. */
	bk = sqlite3_backup_init(m->m_db, "main", img, "main");
	if (!bk) {
		ORCH_ERR("cannot install a snapshot: %s: db='%s'", sqlite3_errmsg(m->m_db),
			 m->m_path);
		sqlite3_close(img);
		return -EIO;
	}
	rc = sqlite3_backup_step(bk, -1);
	sqlite3_backup_finish(bk);
	sqlite3_close(img);
	if (rc != SQLITE_DONE) {
		ORCH_ERR("cannot install a snapshot: %s: db='%s'", sqlite3_errstr(rc), m->m_path);
		return rc == SQLITE_FULL ? -ENOSPC : -EIO;
	}
	/* Counter reservations held in memory belong to the state just replaced. */
	orch_meta_forget_reservations(m);
	/* An image from an older member may lack what this one creates at open. */
	return orch_sqldb_tables_ensure(m);
}

/* --- Exactly once: what each client's request returned ---------------------- */

int orch_meta_reply_get(struct orch_meta *m, uint64_t client, uint64_t seq, int *result)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_REPLY_GET);
	int64_t v;
	int error;

	orch_sqldb_bind_u64(st, 1, client);
	orch_sqldb_bind_u64(st, 2, seq);
	error = orch_sqldb_step(m, SQLDB_REPLY_GET);
	if (error <= 0)
		return error ? error : -ENOENT;
	v = sqlite3_column_int64(st, 0);
	if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || v > 0 || v < -4095) {
		orch_sqldb_reset(m, SQLDB_REPLY_GET);
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "corrupt record: table=reply client=%" PRIu64
				   " seq=%" PRIu64 ": db='%s'", client, seq, m->m_path);
		return -ORCH_ECORRUPT;
	}
	*result = (int)v;
	orch_sqldb_reset(m, SQLDB_REPLY_GET);
	return 0;
}

int orch_meta_reply_put(struct orch_meta *m, uint64_t client, uint64_t seq, int result,
			uint64_t done_below)
{
	sqlite3_stmt *st;
	int error;

	if (result > 0 || result < -4095)
		return -EINVAL;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	st = orch_sqldb_stmt(m, SQLDB_REPLY_PUT);
	orch_sqldb_bind_u64(st, 1, client);
	orch_sqldb_bind_u64(st, 2, seq);
	sqlite3_bind_int64(st, 3, result);
	error = orch_sqldb_exec(m, SQLDB_REPLY_PUT);
	if (!error && done_below) {
		/* Sequence numbers are compared as stored: clients count from 1. */
		st = orch_sqldb_stmt(m, SQLDB_REPLY_TRIM);
		orch_sqldb_bind_u64(st, 1, client);
		orch_sqldb_bind_u64(st, 2, ORCH_MIN(done_below, (uint64_t)INT64_MAX));
		error = orch_sqldb_exec(m, SQLDB_REPLY_TRIM);
	}
	return orch_sqldb_op_end(m, error);
}
