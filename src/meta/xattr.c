/*
 * Extended attributes, intents and applied records: the small tables.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "common/log.h"
#include "common/time.h"
#include "meta/meta_i.h"

/* --- Extended attributes ----------------------------------------------------- */

enum xattr_ns {
	XATTR_NS_USER,
	XATTR_NS_TRUSTED,
	XATTR_NS_SECURITY,
};

/* Parses the namespace of @name: 0, -EOPNOTSUPP, -ERANGE (too long), -EINVAL. */
static int xattr_name_parse(const char *name, size_t *len, enum xattr_ns *ns)
{
	static const struct {
		const char *prefix;
		size_t len;
		enum xattr_ns ns;
	} prefixes[] = {
		{ "user.", 5, XATTR_NS_USER },
		{ "trusted.", 8, XATTR_NS_TRUSTED },
		{ "security.", 9, XATTR_NS_SECURITY },
	};

	*len = strnlen(name, ORCH_XATTR_NAME_MAX + 1);
	if (*len == 0)
		return -EINVAL;
	if (*len > ORCH_XATTR_NAME_MAX)
		return -ERANGE;
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(prefixes); i++) {
		if (strncmp(name, prefixes[i].prefix, prefixes[i].len) == 0) {
			if (*len == prefixes[i].len)
				return -EINVAL;
			*ns = prefixes[i].ns;
			return 0;
		}
	}
	return -EOPNOTSUPP;
}

enum xattr_op {
	XATTR_OP_GET,
	XATTR_OP_SET,
	XATTR_OP_REMOVE,
};

/*
 * Linux xattr_permission(): trusted.* is root's alone (hidden from others
 * on read), user.* only on files and directories and follows the mode bits,
 * security.* is readable by all and settable by root.  Anyone may remove
 * security.capability: the client's kernel has checked (its LSM, as the VFS
 * leaves security.* to it), demanding CAP_SETFCAP for a removexattr(2), and
 * removes it itself as the caller at a write, truncate or chown by someone
 * who need not own the file (cap_inode_killpriv).  Taking it only takes
 * privilege away.
 */
static int xattr_perm(const struct orch_cred *cred, const struct orch_attr *a,
		      enum xattr_ns ns, const char *name, enum xattr_op op)
{
	bool write = op != XATTR_OP_GET;

	switch (ns) {
	case XATTR_NS_TRUSTED:
		if (cred->uid != 0)
			return write ? -EPERM : -ENODATA;
		return 0;
	case XATTR_NS_SECURITY:
		if (op == XATTR_OP_REMOVE && strcmp(name, ORCH_XATTR_CAPS) == 0)
			return 0;
		return write && cred->uid != 0 ? -EPERM : 0;
	case XATTR_NS_USER:
		if (!S_ISREG(a->mode) && !S_ISDIR(a->mode))
			return write ? -EPERM : -ENODATA;
		return orch_perm(cred, a, write ? ORCH_MAY_WRITE : ORCH_MAY_READ);
	}
	return -EOPNOTSUPP;
}

/* Looks up @h and checks access to attribute @name on it. */
static int xattr_prepare(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			 const char *name, enum xattr_op op, size_t *namelen,
			 struct orch_inode_irec *ir)
{
	enum xattr_ns ns;
	int error;

	error = xattr_name_parse(name, namelen, &ns);
	if (error)
		return error;
	error = orch_sqldb_inode_lookup(m, h, ir);
	if (error)
		return error;
	return xattr_perm(cred, &ir->i_attr, ns, name, op);
}

int orch_meta_xattr_get(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			const char *name, void *buf, size_t buflen, size_t *len)
{
	struct orch_inode_irec ir;
	sqlite3_stmt *st;
	size_t namelen;
	int error, vlen;

	*len = 0;
	error = xattr_prepare(m, cred, h, name, XATTR_OP_GET, &namelen, &ir);
	if (error)
		return error;
	st = orch_sqldb_stmt(m, SQLDB_XATTR_GET);
	orch_sqldb_bind_u64(st, 1, h);
	sqlite3_bind_blob(st, 2, name, (int)namelen, SQLITE_STATIC);
	error = orch_sqldb_step(m, SQLDB_XATTR_GET);
	if (error <= 0)
		return error ? error : -ENODATA;
	vlen = sqlite3_column_bytes(st, 0);
	if (sqlite3_column_type(st, 0) != SQLITE_BLOB || vlen > ORCH_XATTR_SIZE_MAX) {
		orch_sqldb_reset(m, SQLDB_XATTR_GET);
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "corrupt record: table=xattr handle=%#" PRIx64 " name='%s'",
				   h, name);
		return -ORCH_ECORRUPT;
	}
	*len = (size_t)vlen;
	error = 0;
	if (buflen) {
		if ((size_t)vlen > buflen)
			error = -ERANGE;
		else if (vlen)
			memcpy(buf, sqlite3_column_blob(st, 0), (size_t)vlen);
	}
	orch_sqldb_reset(m, SQLDB_XATTR_GET);
	return error;
}

static int xattr_set_(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
		      const char *name, const void *val, size_t len, int flags)
{
	struct orch_inode_irec ir;
	sqlite3_stmt *st;
	size_t namelen;
	int error, found;

	error = xattr_prepare(m, cred, h, name, XATTR_OP_SET, &namelen, &ir);
	if (error)
		return error;
	st = orch_sqldb_stmt(m, SQLDB_XATTR_GET);
	orch_sqldb_bind_u64(st, 1, h);
	sqlite3_bind_blob(st, 2, name, (int)namelen, SQLITE_STATIC);
	found = orch_sqldb_step(m, SQLDB_XATTR_GET);
	orch_sqldb_reset(m, SQLDB_XATTR_GET);
	if (found < 0)
		return found;
	if ((flags & XATTR_CREATE) && found)
		return -EEXIST;
	if ((flags & XATTR_REPLACE) && !found)
		return -ENODATA;

	st = orch_sqldb_stmt(m, SQLDB_XATTR_PUT);
	orch_sqldb_bind_u64(st, 1, h);
	sqlite3_bind_blob(st, 2, name, (int)namelen, SQLITE_STATIC);
	/* A zero-length value is stored as an empty blob, never NULL. */
	sqlite3_bind_blob(st, 3, len ? val : "", (int)len, SQLITE_STATIC);
	error = orch_sqldb_exec(m, SQLDB_XATTR_PUT);
	if (error)
		return error;
	ir.i_attr.ctime_ns = orch_time_real_ns();
	return orch_sqldb_inode_update(m, &ir);
}

int orch_meta_xattr_set(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			const char *name, const void *val, size_t len, int flags)
{
	int error;

	if (flags & ~(XATTR_CREATE | XATTR_REPLACE) ||
	    flags == (XATTR_CREATE | XATTR_REPLACE))
		return -EINVAL;
	if (len > ORCH_XATTR_SIZE_MAX)
		return -E2BIG;
	if (len && !val)
		return -EINVAL;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = xattr_set_(m, cred, h, name, val, len, flags);
	return orch_sqldb_op_end(m, error);
}

/*
 * Lists every name the caller may see (trusted.* only for root).  Names are
 * verified as they come back: a stored name with a NUL would split the list.
 */
int orch_meta_xattr_list(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			 char *buf, size_t buflen, size_t *len)
{
	struct orch_inode_irec ir;
	sqlite3_stmt *st;
	size_t total = 0;
	int rc, error = 0;

	*len = 0;
	error = orch_sqldb_inode_lookup(m, h, &ir);
	if (error)
		return error;
	st = orch_sqldb_stmt(m, SQLDB_XATTR_LIST);
	orch_sqldb_bind_u64(st, 1, h);
	while ((rc = orch_sqldb_step(m, SQLDB_XATTR_LIST)) == 1) {
		const char *name = sqlite3_column_blob(st, 0);
		int nlen = sqlite3_column_bytes(st, 0);
		size_t plen;

		if (sqlite3_column_type(st, 0) != SQLITE_BLOB || nlen <= 0 ||
		    nlen > ORCH_XATTR_NAME_MAX || memchr(name, '\0', (size_t)nlen)) {
			ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
					   "corrupt record: table=xattr handle=%#" PRIx64
					   " name_len=%d", h, nlen);
			error = -ORCH_ECORRUPT;
			break;
		}
		if (cred->uid != 0 && nlen >= 8 && memcmp(name, "trusted.", 8) == 0)
			continue;
		plen = (size_t)nlen + 1;
		if (total + plen > ORCH_XATTR_LIST_MAX) {
			error = -E2BIG;
			break;
		}
		if (buflen) {
			if (total + plen > buflen) {
				error = -ERANGE;
				break;
			}
			memcpy(buf + total, name, (size_t)nlen);
			buf[total + (size_t)nlen] = '\0';
		}
		total += plen;
	}
	orch_sqldb_reset(m, SQLDB_XATTR_LIST);
	if (rc < 0)
		return rc;
	if (error)
		return error;
	*len = total;
	return 0;
}

/* Deletes attribute @name of @h, if it has one (*@gone). */
static int xattr_delete(struct orch_meta *m, uint64_t h, const char *name, size_t namelen,
			bool *gone)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_XATTR_DELETE);
	int error;

	orch_sqldb_bind_u64(st, 1, h);
	sqlite3_bind_blob(st, 2, name, (int)namelen, SQLITE_STATIC);
	error = orch_sqldb_exec(m, SQLDB_XATTR_DELETE);
	*gone = !error && sqlite3_changes(m->m_db) > 0;
	return error;
}

int orch_meta_xattr_kill_priv_(struct orch_meta *m, uint64_t h, bool *gone)
{
	return xattr_delete(m, h, ORCH_XATTR_CAPS, strlen(ORCH_XATTR_CAPS), gone);
}

static int xattr_remove_(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			 const char *name)
{
	struct orch_inode_irec ir;
	size_t namelen;
	bool gone;
	int error;

	error = xattr_prepare(m, cred, h, name, XATTR_OP_REMOVE, &namelen, &ir);
	if (error)
		return error;
	error = xattr_delete(m, h, name, namelen, &gone);
	if (error)
		return error;
	if (!gone)
		return -ENODATA;
	ir.i_attr.ctime_ns = orch_time_real_ns();
	return orch_sqldb_inode_update(m, &ir);
}

int orch_meta_xattr_remove(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			   const char *name)
{
	int error;

	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	return orch_sqldb_op_end(m, xattr_remove_(m, cred, h, name));
}

/* --- Intents ------------------------------------------------------------------ */

/*
 * Intent ids come from their own counter and are never reused: other
 * servers remember applied ids (the applied table), so a reused id would
 * make them skip a new operation as already done.
 */
static int intent_insert_(struct orch_meta *m, uint32_t kind, const void *body,
			  size_t len, uint64_t *id)
{
	sqlite3_stmt *st;
	int error;

	error = orch_sqldb_counter_next(m, SQLDB_COUNTER_INTENT, id);
	if (error)
		return error;
	st = orch_sqldb_stmt(m, SQLDB_INTENT_INSERT);
	orch_sqldb_bind_u64(st, 1, *id);
	sqlite3_bind_int64(st, 2, kind);
	sqlite3_bind_blob(st, 3, len ? body : "", (int)len, SQLITE_STATIC);
	sqlite3_bind_int64(st, 4, orch_time_real_ns());
	return orch_sqldb_exec(m, SQLDB_INTENT_INSERT);
}

int orch_meta_intent_insert(struct orch_meta *m, uint32_t kind, const void *body,
			    size_t len, uint64_t *id)
{
	int error;

	if (len > ORCH_META_INTENT_MAX)
		return -E2BIG;
	if (len && !body)
		return -EINVAL;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	return orch_sqldb_op_end(m, intent_insert_(m, kind, body, len, id));
}

int orch_meta_intent_delete(struct orch_meta *m, uint64_t id)
{
	sqlite3_stmt *st;
	int error;

	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	st = orch_sqldb_stmt(m, SQLDB_INTENT_DELETE);
	orch_sqldb_bind_u64(st, 1, id);
	error = orch_sqldb_exec(m, SQLDB_INTENT_DELETE);
	if (!error && sqlite3_changes(m->m_db) == 0)
		error = -ENOENT;
	return orch_sqldb_op_end(m, error);
}

/*
 * One indexed query per intent, with no statement active while @fn runs:
 * the callback may itself delete intents or add new ones (those with a
 * higher id are then visited too).
 */
int orch_meta_intent_foreach(struct orch_meta *m,
			     int (*fn)(void *arg, uint64_t id, uint32_t kind,
				       const void *body, size_t len),
			     void *arg)
{
	uint64_t last = 0;
	uint8_t *body;
	int error;

	body = malloc(ORCH_META_INTENT_MAX);
	if (!body)
		return -ENOMEM;
	for (;;) {
		sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_INTENT_NEXT);
		sqlite3_int64 id, kind;
		int len;

		orch_sqldb_bind_u64(st, 1, last);
		error = orch_sqldb_step(m, SQLDB_INTENT_NEXT);
		if (error <= 0)
			break;
		id = sqlite3_column_int64(st, 0);
		kind = sqlite3_column_int64(st, 1);
		len = sqlite3_column_bytes(st, 2);
		if (sqlite3_column_type(st, 0) != SQLITE_INTEGER || id <= 0 ||
		    sqlite3_column_type(st, 1) != SQLITE_INTEGER || kind < 0 ||
		    kind > UINT32_MAX || sqlite3_column_type(st, 2) != SQLITE_BLOB ||
		    len > ORCH_META_INTENT_MAX) {
			orch_sqldb_reset(m, SQLDB_INTENT_NEXT);
			ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
					   "corrupt record: table=intent after_id=%" PRIu64,
					   last);
			error = -ORCH_ECORRUPT;
			break;
		}
		if (len)
			memcpy(body, sqlite3_column_blob(st, 2), (size_t)len);
		orch_sqldb_reset(m, SQLDB_INTENT_NEXT);
		last = (uint64_t)id;
		error = fn(arg, last, (uint32_t)kind, body, (size_t)len);
		if (error)
			break;
	}
	free(body);
	return error;
}

/* --- Applied records ----------------------------------------------------------- */

int orch_meta_applied_get(struct orch_meta *m, uint32_t origin, uint64_t id,
			  uint64_t *result)
{
	sqlite3_stmt *st = orch_sqldb_stmt(m, SQLDB_APPLIED_GET);
	int error;

	sqlite3_bind_int64(st, 1, origin);
	orch_sqldb_bind_u64(st, 2, id);
	error = orch_sqldb_step(m, SQLDB_APPLIED_GET);
	if (error <= 0)
		return error ? error : -ENOENT;
	if (sqlite3_column_type(st, 0) != SQLITE_INTEGER) {
		orch_sqldb_reset(m, SQLDB_APPLIED_GET);
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "corrupt record: table=applied origin=%u id=%" PRIu64,
				   origin, id);
		return -ORCH_ECORRUPT;
	}
	*result = (uint64_t)sqlite3_column_int64(st, 0);
	orch_sqldb_reset(m, SQLDB_APPLIED_GET);
	return 0;
}

int orch_meta_applied_put(struct orch_meta *m, uint32_t origin, uint64_t id,
			  uint64_t result)
{
	sqlite3_stmt *st;
	int error;

	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	st = orch_sqldb_stmt(m, SQLDB_APPLIED_PUT);
	sqlite3_bind_int64(st, 1, origin);
	orch_sqldb_bind_u64(st, 2, id);
	orch_sqldb_bind_u64(st, 3, result);
	return orch_sqldb_op_end(m, orch_sqldb_exec(m, SQLDB_APPLIED_PUT));
}

/*
 * Ids are compared as stored (signed): they come from a counter that starts
 * at 1 and stays far below 2^63.
 */
int orch_meta_applied_trim(struct orch_meta *m, uint32_t origin, uint64_t below)
{
	sqlite3_stmt *st;
	int error;

	if (below > INT64_MAX)
		below = INT64_MAX;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	st = orch_sqldb_stmt(m, SQLDB_APPLIED_TRIM);
	sqlite3_bind_int64(st, 1, origin);
	orch_sqldb_bind_u64(st, 2, below);
	return orch_sqldb_op_end(m, orch_sqldb_exec(m, SQLDB_APPLIED_TRIM));
}
