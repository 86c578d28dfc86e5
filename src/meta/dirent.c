/*
 * Directory entries: lookup, create, the cross-server entry states
 * (pending, busy), unlink, link, rename and readdir.
 *
 * A directory's entries always live on the server that holds the directory
 * inode, so every @parent here must be a directory held here.  The child
 * inode may be elsewhere; then only its handle and type are known.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "common/log.h"
#include "common/time.h"
#include "meta/meta_i.h"

/* --- Helpers ---------------------------------------------------------------- */

static void dirent_touch(struct orch_inode_irec *dir, int64_t now)
{
	dir->i_attr.mtime_ns = now;
	dir->i_attr.ctime_ns = now;
}

/* Takes the directory's next readdir sequence number. */
static uint64_t dirent_seq_take(struct orch_inode_irec *dir)
{
	return dir->i_next_seq++;
}

/*
 * Fills the attributes of a child held here.  An entry naming a local inode
 * that does not exist is damage we report but survive: the entry is still
 * listed, without attributes.
 */
static int dirent_attr_fill(struct orch_meta *m, uint64_t parent, struct orch_dirent *out)
{
	struct orch_inode_irec ir;
	int error;

	out->has_attr = false;
	if (!orch_sqldb_is_local(m, out->handle))
		return 0;
	error = orch_sqldb_inode_lookup(m, out->handle, &ir);
	if (error == -ENOENT) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "dangling entry: table=dirent parent=%#" PRIx64
				   " name='%.*s' child=%#" PRIx64,
				   parent, (int)out->namelen, out->name, out->handle);
		return 0;
	}
	if (error)
		return error;
	out->attr = ir.i_attr;
	out->has_attr = true;
	return 0;
}

static int dirent_fill(struct orch_meta *m, uint64_t parent, const char *name,
		       size_t namelen, const struct orch_dirent_irec *de,
		       struct orch_dirent *out)
{
	memset(out, 0, sizeof(*out));
	out->handle = de->d_child;
	out->cookie = de->d_seq;
	out->type = de->d_type;
	out->namelen = (uint8_t)namelen;
	memcpy(out->name, name, namelen);
	out->name[namelen] = '\0';
	return dirent_attr_fill(m, parent, out);
}

/* The parent's nlink counts its subdirectories (plus "." and its own entry). */
static int dirent_nlink_add(struct orch_inode_irec *dir, int delta)
{
	int64_t n = (int64_t)dir->i_attr.nlink + delta;

	if (n < 2 || n > UINT32_MAX)
		return delta > 0 ? -EMLINK : -ORCH_ECORRUPT;
	dir->i_attr.nlink = (uint32_t)n;
	return 0;
}

/*
 * The sticky rule for one entry.  When the child inode is held elsewhere and
 * only its owner could allow the removal, the decision is the caller's
 * (-EREMOTE): it checks the owner on the child's server.
 */
static int dirent_sticky_check(struct orch_meta *m, const struct orch_cred *cred,
			       const struct orch_attr *dir, uint64_t child)
{
	struct orch_inode_irec ir;
	int error;

	if (!orch_meta_sticky_needs_child(cred, dir))
		return 0;
	if (!orch_sqldb_is_local(m, child)) {
		for (unsigned int i = 0; i < m->m_nremote_owner; i++) {
			if (m->m_remote_owner[i].handle == child) {
				struct orch_attr owner = { .uid = m->m_remote_owner[i].uid };

				return orch_meta_sticky_ok(cred, dir, &owner) ? 0 : -EPERM;
			}
		}
		return -EREMOTE;
	}
	error = orch_sqldb_inode_lookup(m, child, &ir);
	if (error)
		return error;
	return orch_meta_sticky_ok(cred, dir, &ir.i_attr) ? 0 : -EPERM;
}

/* --- Lookup ------------------------------------------------------------------- */

static int dirent_lookup_(struct orch_meta *m, const struct orch_cred *cred,
			  uint64_t parent, const char *name, size_t namelen,
			  struct orch_dirent *out)
{
	struct orch_inode_irec dir;
	struct orch_dirent_irec de;
	int error;

	error = orch_meta_dir_get_(m, parent, &dir);
	if (error)
		return error;
	error = orch_perm(cred, &dir.i_attr, ORCH_MAY_EXEC);
	if (error)
		return error;
	error = orch_sqldb_dirent_lookup(m, parent, name, namelen, &de);
	if (error)
		return error;
	if (de.d_state == ORCH_DIRENT_PENDING)
		return -ENOENT;
	return dirent_fill(m, parent, name, namelen, &de, out);
}

int orch_meta_lookup(struct orch_meta *m, const struct orch_cred *cred,
		     uint64_t parent, const char *name, size_t namelen,
		     struct orch_dirent *out)
{
	bool began;
	int error;

	error = orch_sqldb_name_check(name, namelen);
	if (error)
		return error;
	began = orch_sqldb_read_begin(m);
	error = dirent_lookup_(m, cred, parent, name, namelen, out);
	orch_sqldb_read_end(m, began);
	return error;
}

/* --- Create ------------------------------------------------------------------- */

/* Argument checks of create, before any database work. */
static int dirent_create_check(uint32_t *mode, const char *target,
			       const struct orch_layout *layout)
{
	uint32_t type = *mode & S_IFMT;

	if (type == 0)
		type = S_IFREG; /* mknod(2): a zero type is a regular file */
	if (!orch_sqldb_type_is_valid(type) || (*mode & ~(S_IFMT | 07777)))
		return -EINVAL;
	*mode = type | (*mode & 07777);
	if (type == S_IFLNK) {
		size_t len;

		if (!target)
			return -EINVAL;
		len = strnlen(target, ORCH_PATH_MAX);
		if (len == 0)
			return -ENOENT; /* symlink(2) with an empty target */
		if (len >= ORCH_PATH_MAX)
			return -ENAMETOOLONG;
	}
	if (type == S_IFREG && layout &&
	    (layout->strip_size == 0 || layout->strip_size % 4096 ||
	     layout->stripe_count == 0))
		return -EINVAL;
	return 0;
}

/* The attributes of a new inode, as Linux inode_init_owner() sets them. */
static void dirent_new_inode(struct orch_meta *m, const struct orch_cred *cred,
			     const struct orch_attr *dir, uint32_t mode, uint64_t rdev,
			     const char *target, const struct orch_layout *layout,
			     int64_t now, struct orch_inode_irec *ir)
{
	struct orch_attr *a = &ir->i_attr;

	memset(ir, 0, sizeof(*ir));
	/* Not stored; a new inode has no xattr, and saying so spares GETXATTRs. */
	a->flags = ORCH_ATTR_NOXATTR;
	a->mode = mode;
	a->uid = cred->uid;
	a->gid = cred->gid;
	if (dir->mode & S_ISGID) {
		a->gid = dir->gid;
		if (S_ISDIR(mode))
			a->mode |= S_ISGID;
	}
	if (!S_ISDIR(mode) && (a->mode & (S_ISGID | S_IXGRP)) == (S_ISGID | S_IXGRP) &&
	    cred->uid != 0 && !orch_cred_in_group(cred, a->gid))
		a->mode &= ~(uint32_t)S_ISGID;
	a->nlink = S_ISDIR(mode) ? 2 : 1;
	if (S_ISLNK(mode))
		a->size = strlen(target);
	if (S_ISCHR(mode) || S_ISBLK(mode))
		a->rdev = rdev;
	a->atime_ns = now;
	a->mtime_ns = now;
	a->ctime_ns = now;
	a->parent = dir->handle;
	if (S_ISREG(mode)) {
		if (layout) {
			a->layout = *layout;
		} else {
			a->layout.strip_size = m->m_ident.strip_size;
			a->layout.stripe_count = (uint16_t)ORCH_MIN(m->m_ident.nservers,
								    UINT16_MAX);
			a->layout.first_server = (uint16_t)m->m_ident.server_index;
		}
	}
	if (S_ISDIR(mode))
		ir->i_next_seq = 1;
}

/*
 * Checks in the order Linux does them: search permission for the lookup,
 * then existence, then write permission for the change.
 */
static int dirent_create_(struct orch_meta *m, const struct orch_cred *cred,
			  uint64_t parent, const char *name, size_t namelen,
			  uint32_t mode, uint64_t rdev, const char *target,
			  const struct orch_layout *layout, bool excl,
			  struct orch_attr *out, bool *existed)
{
	struct orch_inode_irec dir, ir;
	struct orch_dirent_irec de;
	int64_t now = orch_time_real_ns();
	uint64_t counter;
	int error;

	error = orch_meta_dir_get_(m, parent, &dir);
	if (error)
		return error;
	error = orch_perm(cred, &dir.i_attr, ORCH_MAY_EXEC);
	if (error)
		return error;
	error = orch_sqldb_dirent_lookup(m, parent, name, namelen, &de);
	if (error == 0) {
		if (de.d_state == ORCH_DIRENT_PENDING || excl || !S_ISREG(mode) ||
		    de.d_type != S_IFREG)
			return -EEXIST;
		/* open(O_CREAT) of an existing file: hand it back. */
		memset(out, 0, sizeof(*out));
		out->handle = de.d_child;
		*existed = true;
		if (!orch_sqldb_is_local(m, de.d_child))
			return 0;
		return orch_meta_inode_get(m, de.d_child, out);
	}
	if (error != -ENOENT)
		return error;
	error = orch_perm(cred, &dir.i_attr, ORCH_MAY_WRITE | ORCH_MAY_EXEC);
	if (error)
		return error;
	if (S_ISDIR(mode)) {
		error = dirent_nlink_add(&dir, +1);
		if (error)
			return error;
	}

	dirent_new_inode(m, cred, &dir.i_attr, mode, rdev, target, layout, now, &ir);
	error = orch_sqldb_counter_next(m, SQLDB_COUNTER_HANDLE, &counter);
	if (error)
		return error;
	ir.i_attr.handle = orch_handle_make(m->m_ident.server_index, counter);
	error = orch_sqldb_inode_insert(m, &ir, S_ISLNK(mode) ? target : NULL);
	if (error)
		return error;
	de = (struct orch_dirent_irec){
		.d_child = ir.i_attr.handle,
		.d_type = mode & S_IFMT,
		.d_seq = dirent_seq_take(&dir),
		.d_state = ORCH_DIRENT_LIVE,
	};
	error = orch_sqldb_dirent_insert(m, parent, name, namelen, &de);
	if (error)
		return error;
	dirent_touch(&dir, now);
	error = orch_sqldb_inode_update(m, &dir);
	if (error)
		return error;
	*out = ir.i_attr;
	return 0;
}

int orch_meta_create(struct orch_meta *m, const struct orch_cred *cred,
		     uint64_t parent, const char *name, size_t namelen,
		     uint32_t mode, uint64_t rdev, const char *target,
		     const struct orch_layout *layout, bool excl,
		     struct orch_attr *out, bool *existed)
{
	int error;

	*existed = false;
	error = orch_sqldb_name_check(name, namelen);
	if (!error)
		error = dirent_create_check(&mode, target, layout);
	if (error)
		return error;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = dirent_create_(m, cred, parent, name, namelen, mode, rdev, target, layout,
			       excl, out, existed);
	return orch_sqldb_op_end(m, error);
}

/* --- Pending and busy entries --------------------------------------------------- */

static int dirent_reserve_(struct orch_meta *m, const struct orch_cred *cred,
			   uint64_t parent, const char *name, size_t namelen, uint32_t type)
{
	struct orch_inode_irec dir;
	struct orch_dirent_irec de;
	int error;

	error = orch_meta_dir_get_(m, parent, &dir);
	if (error)
		return error;
	error = orch_perm(cred, &dir.i_attr, ORCH_MAY_EXEC);
	if (error)
		return error;
	error = orch_sqldb_dirent_lookup(m, parent, name, namelen, &de);
	if (error != -ENOENT)
		return error ? error : -EEXIST;
	error = orch_perm(cred, &dir.i_attr, ORCH_MAY_WRITE | ORCH_MAY_EXEC);
	if (error)
		return error;
	de = (struct orch_dirent_irec){
		.d_child = 0,
		.d_type = type,
		.d_seq = dirent_seq_take(&dir),
		.d_state = ORCH_DIRENT_PENDING,
	};
	error = orch_sqldb_dirent_insert(m, parent, name, namelen, &de);
	if (error)
		return error;
	return orch_sqldb_inode_update(m, &dir);
}

int orch_meta_dirent_reserve(struct orch_meta *m, const struct orch_cred *cred,
			     uint64_t parent, const char *name, size_t namelen,
			     uint32_t type)
{
	int error;

	error = orch_sqldb_name_check(name, namelen);
	if (error)
		return error;
	if (!orch_sqldb_type_is_valid(type))
		return -EINVAL;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = dirent_reserve_(m, cred, parent, name, namelen, type);
	return orch_sqldb_op_end(m, error);
}

/*
 * Idempotent, because intents replay it: committing an entry that already
 * names @child, or dropping one that is gone, succeeds.  The entry gets a
 * fresh sequence number so that a listing in progress sees it.
 */
static int dirent_commit_(struct orch_meta *m, uint64_t parent, const char *name,
			  size_t namelen, uint64_t child)
{
	struct orch_inode_irec dir;
	struct orch_dirent_irec de;
	int64_t now = orch_time_real_ns();
	int error;

	error = orch_meta_dir_get_(m, parent, &dir);
	if (error)
		return error;
	error = orch_sqldb_dirent_lookup(m, parent, name, namelen, &de);
	if (error == -ENOENT)
		return child ? -ENOENT : 0;
	if (error)
		return error;
	if (de.d_state != ORCH_DIRENT_PENDING) {
		if (child && de.d_child == child)
			return 0;
		return child ? -EEXIST : 0;
	}
	if (!child)
		return orch_sqldb_dirent_delete(m, parent, name, namelen);
	if (S_ISDIR(de.d_type)) {
		error = dirent_nlink_add(&dir, +1);
		if (error)
			return error;
	}
	de.d_child = child;
	de.d_state = ORCH_DIRENT_LIVE;
	de.d_seq = dirent_seq_take(&dir);
	error = orch_sqldb_dirent_update(m, parent, name, namelen, &de);
	if (error)
		return error;
	dirent_touch(&dir, now);
	return orch_sqldb_inode_update(m, &dir);
}

int orch_meta_dirent_commit(struct orch_meta *m, uint64_t parent, const char *name,
			    size_t namelen, uint64_t child)
{
	int error;

	error = orch_sqldb_name_check(name, namelen);
	if (error)
		return error;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = dirent_commit_(m, parent, name, namelen, child);
	return orch_sqldb_op_end(m, error);
}

static int dirent_set_busy_(struct orch_meta *m, uint64_t parent, const char *name,
			    size_t namelen, bool busy)
{
	struct orch_dirent_irec de;
	int error;

	error = orch_sqldb_dirent_lookup(m, parent, name, namelen, &de);
	if (error)
		return error;
	if (de.d_state == ORCH_DIRENT_PENDING)
		return -EBUSY;
	if (busy && de.d_state == ORCH_DIRENT_BUSY)
		return -EBUSY;
	if (!busy && de.d_state == ORCH_DIRENT_LIVE)
		return 0;
	de.d_state = busy ? ORCH_DIRENT_BUSY : ORCH_DIRENT_LIVE;
	return orch_sqldb_dirent_update(m, parent, name, namelen, &de);
}

int orch_meta_dirent_set_busy(struct orch_meta *m, uint64_t parent, const char *name,
			      size_t namelen, bool busy)
{
	int error;

	error = orch_sqldb_name_check(name, namelen);
	if (error)
		return error;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = dirent_set_busy_(m, parent, name, namelen, busy);
	return orch_sqldb_op_end(m, error);
}

/* --- Unlink --------------------------------------------------------------------- */

static int dirent_unlink_check_(struct orch_meta *m, const struct orch_cred *cred,
				uint64_t parent, const char *name, size_t namelen,
				bool want_dir, struct orch_dirent *out);

int orch_meta_unlink_check(struct orch_meta *m, const struct orch_cred *cred,
			   uint64_t parent, const char *name, size_t namelen,
			   bool want_dir, struct orch_dirent *out)
{
	bool began;
	int error;

	error = orch_sqldb_name_check(name, namelen);
	if (error)
		return error;
	began = orch_sqldb_read_begin(m);
	error = dirent_unlink_check_(m, cred, parent, name, namelen, want_dir, out);
	orch_sqldb_read_end(m, began);
	return error;
}

/* Linux may_delete() order: exists, permission, sticky, type, emptiness. */
static int dirent_unlink_check_(struct orch_meta *m, const struct orch_cred *cred,
				uint64_t parent, const char *name, size_t namelen,
				bool want_dir, struct orch_dirent *out)
{
	struct orch_inode_irec dir;
	struct orch_dirent_irec de;
	int error;

	error = orch_meta_dir_get_(m, parent, &dir);
	if (error)
		return error;
	error = orch_perm(cred, &dir.i_attr, ORCH_MAY_EXEC);
	if (error)
		return error;
	error = orch_sqldb_dirent_lookup(m, parent, name, namelen, &de);
	if (error)
		return error;
	if (de.d_state != ORCH_DIRENT_LIVE)
		return -EBUSY;
	error = orch_perm(cred, &dir.i_attr, ORCH_MAY_WRITE | ORCH_MAY_EXEC);
	if (error)
		return error;
	if (want_dir && !S_ISDIR(de.d_type))
		return -ENOTDIR;
	if (!want_dir && S_ISDIR(de.d_type))
		return -EISDIR;
	if (S_ISDIR(de.d_type) && orch_sqldb_is_local(m, de.d_child)) {
		error = orch_sqldb_dir_check_empty(m, de.d_child);
		if (error)
			return error;
	}
	error = dirent_fill(m, parent, name, namelen, &de, out);
	if (error)
		return error;
	/* Last, so that on -EREMOTE *out is filled for the caller's check. */
	return dirent_sticky_check(m, cred, &dir.i_attr, de.d_child);
}

/*
 * Removes the child inode held here for an entry that goes away: a
 * directory (empty, checked again) is deleted, anything else loses a link.
 */
static int dirent_child_drop(struct orch_meta *m, const struct orch_dirent_irec *de,
			     int64_t now, bool *freed)
{
	int error;

	*freed = false;
	if (!S_ISDIR(de->d_type))
		return orch_meta_inode_nlink_adjust_(m, de->d_child, -1, now, NULL, freed);
	error = orch_sqldb_dir_check_empty(m, de->d_child);
	if (error)
		return error;
	error = orch_sqldb_inode_delete(m, de->d_child);
	return error;
}

/*
 * A busy entry may be removed: the caller marked it busy itself for the
 * remote half of this very unlink.
 */
static int dirent_unlink_(struct orch_meta *m, uint64_t parent, const char *name,
			  size_t namelen, bool keep_child, bool *remote, bool *freed)
{
	struct orch_inode_irec dir;
	struct orch_dirent_irec de;
	int64_t now = orch_time_real_ns();
	int error;

	error = orch_meta_dir_get_(m, parent, &dir);
	if (error)
		return error;
	error = orch_sqldb_dirent_lookup(m, parent, name, namelen, &de);
	if (error)
		return error;
	if (de.d_state == ORCH_DIRENT_PENDING)
		return -EBUSY;
	if (keep_child) {
		/* Moved elsewhere, not removed: the inode keeps its links. */
	} else if (orch_sqldb_is_local(m, de.d_child)) {
		error = dirent_child_drop(m, &de, now, freed);
		if (error)
			return error;
	} else {
		*remote = true;
	}
	error = orch_sqldb_dirent_delete(m, parent, name, namelen);
	if (error)
		return error;
	if (S_ISDIR(de.d_type)) {
		error = dirent_nlink_add(&dir, -1);
		if (error)
			return error;
	}
	dirent_touch(&dir, now);
	return orch_sqldb_inode_update(m, &dir);
}

int orch_meta_unlink(struct orch_meta *m, uint64_t parent, const char *name,
		     size_t namelen, bool *remote, bool *freed)
{
	int error;

	*remote = false;
	*freed = false;
	error = orch_sqldb_name_check(name, namelen);
	if (error)
		return error;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = dirent_unlink_(m, parent, name, namelen, false, remote, freed);
	if (error) {
		*remote = false;
		*freed = false;
	}
	return orch_sqldb_op_end(m, error);
}

/*
 * The source half of a rename whose target directory is on another server:
 * the entry goes, the inode it names is untouched (it lives on under the new
 * name there).
 */
int orch_meta_dirent_remove(struct orch_meta *m, uint64_t parent, const char *name,
			    size_t namelen)
{
	int error;

	error = orch_sqldb_name_check(name, namelen);
	if (error)
		return error;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = dirent_unlink_(m, parent, name, namelen, true, NULL, NULL);
	return orch_sqldb_op_end(m, error);
}

/* --- Link (an entry for an existing inode) -------------------------------------- */

static int dirent_insert_(struct orch_meta *m, const struct orch_cred *cred,
			  uint64_t parent, const char *name, size_t namelen,
			  uint64_t child, uint32_t type)
{
	struct orch_inode_irec dir;
	struct orch_dirent_irec de;
	int error;

	error = orch_meta_dir_get_(m, parent, &dir);
	if (error)
		return error;
	if (cred) {
		error = orch_perm(cred, &dir.i_attr, ORCH_MAY_EXEC);
		if (error)
			return error;
	}
	error = orch_sqldb_dirent_lookup(m, parent, name, namelen, &de);
	if (error != -ENOENT)
		return error ? error : -EEXIST;
	if (cred) {
		error = orch_perm(cred, &dir.i_attr, ORCH_MAY_WRITE | ORCH_MAY_EXEC);
		if (error)
			return error;
	}
	if (S_ISDIR(type)) {
		error = dirent_nlink_add(&dir, +1);
		if (error)
			return error;
	}
	de = (struct orch_dirent_irec){
		.d_child = child,
		.d_type = type,
		.d_seq = dirent_seq_take(&dir),
		.d_state = ORCH_DIRENT_LIVE,
	};
	error = orch_sqldb_dirent_insert(m, parent, name, namelen, &de);
	if (error)
		return error;
	dirent_touch(&dir, orch_time_real_ns());
	return orch_sqldb_inode_update(m, &dir);
}

int orch_meta_dirent_insert(struct orch_meta *m, const struct orch_cred *cred,
			    uint64_t parent, const char *name, size_t namelen,
			    uint64_t child, uint32_t type)
{
	int error;

	error = orch_sqldb_name_check(name, namelen);
	if (error)
		return error;
	if (!orch_sqldb_type_is_valid(type) || child == 0)
		return -EINVAL;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = dirent_insert_(m, cred, parent, name, namelen, child, type);
	return orch_sqldb_op_end(m, error);
}

/* --- Rename --------------------------------------------------------------------- */

/* What rename reports back; copied out only on success. */
struct dirent_rename_out {
	uint64_t freed_handle;
	uint64_t remote_victim;
	uint32_t remote_victim_type;
	uint64_t moved_remote_dir;
};

/*
 * Sets ctime on a moved inode held here and, when it is a directory that
 * changes parent, its parent pointer.  One held elsewhere is reported.
 */
static int dirent_moved(struct orch_meta *m, uint64_t child, uint32_t type,
			uint64_t newparent, bool reparent, int64_t now, uint64_t *remote_dir)
{
	struct orch_inode_irec ir;
	int error;

	reparent = reparent && S_ISDIR(type);
	if (!orch_sqldb_is_local(m, child)) {
		if (reparent)
			*remote_dir = child;
		return 0;
	}
	error = orch_sqldb_inode_lookup(m, child, &ir);
	if (error)
		return error;
	if (reparent)
		ir.i_attr.parent = newparent;
	ir.i_attr.ctime_ns = now;
	return orch_sqldb_inode_update(m, &ir);
}

/* Write permission on a directory that changes parent (its ".." changes). */
static int dirent_reparent_check(struct orch_meta *m, const struct orch_cred *cred,
				 uint64_t child, uint32_t type)
{
	struct orch_inode_irec ir;
	int error;

	if (!cred || !S_ISDIR(type) || !orch_sqldb_is_local(m, child))
		return 0;
	error = orch_sqldb_inode_lookup(m, child, &ir);
	if (error)
		return error;
	return orch_perm(cred, &ir.i_attr, ORCH_MAY_WRITE);
}

/* The victim of a replacing rename: held here it loses its entry's link. */
static int dirent_victim_drop(struct orch_meta *m, const struct orch_dirent_irec *victim,
			      struct orch_inode_irec *newdir, int64_t now,
			      struct dirent_rename_out *res)
{
	bool freed = false;
	int error;

	if (S_ISDIR(victim->d_type)) {
		error = dirent_nlink_add(newdir, -1);
		if (error)
			return error;
	}
	if (!orch_sqldb_is_local(m, victim->d_child)) {
		res->remote_victim = victim->d_child;
		res->remote_victim_type = victim->d_type;
		return 0;
	}
	error = dirent_child_drop(m, victim, now, &freed);
	if (!error && freed)
		res->freed_handle = victim->d_child;
	return error;
}

static int dirent_exchange(struct orch_meta *m, uint64_t oldparent, const char *oldname,
			   size_t oldlen, struct orch_dirent_irec *src,
			   uint64_t newparent, const char *newname, size_t newlen,
			   struct orch_dirent_irec *dst, struct orch_inode_irec *olddir,
			   struct orch_inode_irec *newdir, int64_t now,
			   struct dirent_rename_out *res)
{
	struct orch_dirent_irec a = *src, b = *dst;
	bool cross = oldparent != newparent;
	int error;

	a.d_child = dst->d_child;
	a.d_type = dst->d_type;
	b.d_child = src->d_child;
	b.d_type = src->d_type;
	error = orch_sqldb_dirent_update(m, oldparent, oldname, oldlen, &a);
	if (!error)
		error = orch_sqldb_dirent_update(m, newparent, newname, newlen, &b);
	if (error)
		return error;
	if (cross && S_ISDIR(src->d_type) != S_ISDIR(dst->d_type)) {
		int d = S_ISDIR(src->d_type) ? 1 : -1;

		error = dirent_nlink_add(olddir, -d);
		if (!error)
			error = dirent_nlink_add(newdir, d);
		if (error)
			return error;
	}
	/* The second moved directory, if remote, goes out as remote_victim. */
	error = dirent_moved(m, src->d_child, src->d_type, newparent, cross, now,
			     &res->moved_remote_dir);
	if (!error)
		error = dirent_moved(m, dst->d_child, dst->d_type, oldparent, cross, now,
				     &res->remote_victim);
	if (!error && res->remote_victim)
		res->remote_victim_type = S_IFDIR;
	return error;
}

static int dirent_rename_(struct orch_meta *m, const struct orch_cred *cred,
			  uint64_t oldparent, const char *oldname, size_t oldlen,
			  uint64_t newparent, const char *newname, size_t newlen,
			  uint32_t flags, struct dirent_rename_out *res)
{
	struct orch_inode_irec olddir_rec, newdir_rec;
	struct orch_inode_irec *olddir = &olddir_rec;
	struct orch_inode_irec *newdir = oldparent == newparent ? olddir : &newdir_rec;
	struct orch_dirent_irec src, dst;
	int64_t now = orch_time_real_ns();
	bool have_dst;
	int error;

	error = orch_meta_dir_get_(m, oldparent, olddir);
	if (!error && newdir != olddir)
		error = orch_meta_dir_get_(m, newparent, newdir);
	if (error)
		return error;
	if (cred) {
		error = orch_perm(cred, &olddir->i_attr, ORCH_MAY_EXEC);
		if (!error)
			error = orch_perm(cred, &newdir->i_attr, ORCH_MAY_EXEC);
		if (error)
			return error;
	}
	error = orch_sqldb_dirent_lookup(m, oldparent, oldname, oldlen, &src);
	if (error)
		return error;
	if (src.d_state != ORCH_DIRENT_LIVE)
		return -EBUSY;
	error = orch_sqldb_dirent_lookup(m, newparent, newname, newlen, &dst);
	if (error && error != -ENOENT)
		return error;
	have_dst = !error;
	if (have_dst && dst.d_state != ORCH_DIRENT_LIVE)
		return -EBUSY;
	if ((flags & RENAME_EXCHANGE) && !have_dst)
		return -ENOENT;
	if ((flags & RENAME_NOREPLACE) && have_dst)
		return -EEXIST;
	/* Two names of one inode (or one name twice): POSIX says do nothing. */
	if (have_dst && dst.d_child == src.d_child)
		return 0;
	/* Cheap guard for the subtree check the caller owes us. */
	if (src.d_child == newparent || (have_dst && dst.d_child == oldparent))
		return -EINVAL;

	if (cred) {
		error = orch_perm(cred, &olddir->i_attr, ORCH_MAY_WRITE | ORCH_MAY_EXEC);
		if (!error)
			error = orch_perm(cred, &newdir->i_attr,
					       ORCH_MAY_WRITE | ORCH_MAY_EXEC);
		if (!error)
			error = dirent_sticky_check(m, cred, &olddir->i_attr, src.d_child);
		if (!error && have_dst)
			error = dirent_sticky_check(m, cred, &newdir->i_attr, dst.d_child);
		if (error)
			return error;
	}
	if (have_dst && !(flags & RENAME_EXCHANGE)) {
		if (S_ISDIR(src.d_type) && !S_ISDIR(dst.d_type))
			return -ENOTDIR;
		if (!S_ISDIR(src.d_type) && S_ISDIR(dst.d_type))
			return -EISDIR;
		if (S_ISDIR(dst.d_type) && orch_sqldb_is_local(m, dst.d_child)) {
			error = orch_sqldb_dir_check_empty(m, dst.d_child);
			if (error)
				return error;
		}
	}
	if (oldparent != newparent) {
		error = dirent_reparent_check(m, cred, src.d_child, src.d_type);
		if (!error && (flags & RENAME_EXCHANGE))
			error = dirent_reparent_check(m, cred, dst.d_child, dst.d_type);
		if (error)
			return error;
	}

	if (flags & RENAME_EXCHANGE) {
		error = dirent_exchange(m, oldparent, oldname, oldlen, &src, newparent,
					newname, newlen, &dst, olddir, newdir, now, res);
		if (error)
			return error;
		goto out_parents;
	}
	if (have_dst) {
		struct orch_dirent_irec moved = dst;

		error = dirent_victim_drop(m, &dst, newdir, now, res);
		if (error)
			return error;
		/* The name keeps its place in readdir order; only its target changes. */
		moved.d_child = src.d_child;
		moved.d_type = src.d_type;
		error = orch_sqldb_dirent_update(m, newparent, newname, newlen, &moved);
	} else {
		struct orch_dirent_irec moved = src;

		moved.d_seq = dirent_seq_take(newdir);
		error = orch_sqldb_dirent_insert(m, newparent, newname, newlen, &moved);
	}
	if (!error)
		error = orch_sqldb_dirent_delete(m, oldparent, oldname, oldlen);
	if (!error && S_ISDIR(src.d_type) && oldparent != newparent) {
		error = dirent_nlink_add(olddir, -1);
		if (!error)
			error = dirent_nlink_add(newdir, +1);
	}
	if (!error)
		error = dirent_moved(m, src.d_child, src.d_type, newparent,
				     oldparent != newparent, now, &res->moved_remote_dir);
	if (error)
		return error;

out_parents:
	dirent_touch(olddir, now);
	error = orch_sqldb_inode_update(m, olddir);
	if (!error && newdir != olddir) {
		dirent_touch(newdir, now);
		error = orch_sqldb_inode_update(m, newdir);
	}
	return error;
}

int orch_meta_rename(struct orch_meta *m, const struct orch_cred *cred,
		     uint64_t oldparent, const char *oldname, size_t oldlen,
		     uint64_t newparent, const char *newname, size_t newlen,
		     uint32_t flags, uint64_t *freed_handle, uint64_t *remote_victim,
		     uint32_t *remote_victim_type, uint64_t *moved_remote_dir)
{
	struct dirent_rename_out res = { 0 };
	int error;

	*freed_handle = 0;
	*remote_victim = 0;
	*remote_victim_type = 0;
	*moved_remote_dir = 0;
	if (flags & ~(uint32_t)(RENAME_NOREPLACE | RENAME_EXCHANGE) ||
	    flags == (RENAME_NOREPLACE | RENAME_EXCHANGE))
		return -EINVAL;
	error = orch_sqldb_name_check(oldname, oldlen);
	if (!error)
		error = orch_sqldb_name_check(newname, newlen);
	if (error)
		return error;
	error = orch_sqldb_op_begin(m);
	if (error)
		return error;
	error = dirent_rename_(m, cred, oldparent, oldname, oldlen, newparent, newname,
			       newlen, flags, &res);
	error = orch_sqldb_op_end(m, error);
	if (error)
		return error;
	*freed_handle = res.freed_handle;
	*remote_victim = res.remote_victim;
	*remote_victim_type = res.remote_victim_type;
	*moved_remote_dir = res.moved_remote_dir;
	return 0;
}

/* --- readdir -------------------------------------------------------------------- */

/* Decodes one DIRENT_LIST row into @out.  NULL or the failing check. */
static orch_failaddr_t dirent_list_from_disk(sqlite3_stmt *st, uint64_t cookie,
					     struct orch_dirent *out)
{
	const void *name = sqlite3_column_blob(st, 0);
	int len = sqlite3_column_bytes(st, 0);
	sqlite3_int64 seq;
	uint32_t type;

	if (sqlite3_column_type(st, 0) != SQLITE_BLOB || len <= 0 || len > ORCH_NAME_MAX)
		return ORCH_THIS_ADDRESS;
	if (orch_sqldb_name_check(name, (size_t)len))
		return ORCH_THIS_ADDRESS;
	if (sqlite3_column_type(st, 1) != SQLITE_INTEGER ||
	    sqlite3_column_type(st, 2) != SQLITE_INTEGER ||
	    sqlite3_column_type(st, 3) != SQLITE_INTEGER)
		return ORCH_THIS_ADDRESS;
	seq = sqlite3_column_int64(st, 3);
	type = (uint32_t)sqlite3_column_int64(st, 2);
	if (seq <= 0 || (uint64_t)seq <= cookie || !orch_sqldb_type_is_valid(type) ||
	    sqlite3_column_int64(st, 1) == 0)
		return ORCH_THIS_ADDRESS;
	memset(out, 0, sizeof(*out));
	out->handle = (uint64_t)sqlite3_column_int64(st, 1);
	out->type = type;
	out->cookie = (uint64_t)seq;
	out->namelen = (uint8_t)len;
	memcpy(out->name, name, (size_t)len);
	out->name[len] = '\0';
	return NULL;
}

/*
 * Entries come in the order of their sequence numbers, which only grow, so
 * a cookie stays valid whatever is added or removed: an entry present for
 * the whole listing is returned exactly once.  "." and ".." are not stored
 * and not returned; the client adds them.
 */
int orch_meta_readdir(struct orch_meta *m, const struct orch_cred *cred,
		      uint64_t dir, uint64_t cookie, uint32_t max, bool plus,
		      struct orch_dirent *out, uint32_t *n, bool *eof)
{
	struct orch_inode_irec dr;
	orch_failaddr_t fa = NULL;
	sqlite3_stmt *st;
	uint32_t count = 0;
	int rc, error;

	*n = 0;
	*eof = false;
	if (max == 0)
		return -EINVAL;
	max = ORCH_MIN(max, (uint32_t)ORCH_READDIR_MAX);
	error = orch_meta_dir_get_(m, dir, &dr);
	if (error)
		return error;
	error = orch_perm(cred, &dr.i_attr, ORCH_MAY_READ);
	if (error)
		return error;
	if (cookie > INT64_MAX) {
		*eof = true;
		return 0;
	}

	/* One row more than asked tells whether the listing is complete. */
	st = orch_sqldb_stmt(m, SQLDB_DIRENT_LIST);
	orch_sqldb_bind_u64(st, 1, dir);
	orch_sqldb_bind_u64(st, 2, cookie);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)max + 1);
	while ((rc = orch_sqldb_step(m, SQLDB_DIRENT_LIST)) == 1) {
		if (count == max)
			break;
		fa = dirent_list_from_disk(st, cookie, &out[count]);
		if (fa)
			break;
		count++;
	}
	orch_sqldb_reset(m, SQLDB_DIRENT_LIST);
	if (rc < 0)
		return rc;
	if (fa) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "corrupt record: table=dirent parent=%#" PRIx64
				   " after_seq=%" PRIu64 " check=%s",
				   dir, count ? out[count - 1].cookie : cookie, fa);
		return -ORCH_ECORRUPT;
	}
	if (plus) {
		for (uint32_t i = 0; i < count; i++) {
			error = dirent_attr_fill(m, dir, &out[i]);
			if (error)
				return error;
		}
	}
	*n = count;
	*eof = rc == 0;
	return 0;
}
