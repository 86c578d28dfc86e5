/*
 * Namespace requests from clients, served on the loop thread.  Each
 * handler decodes nothing itself: the dispatcher (sv_dispatch.c) decodes
 * the frame with the generic codec, then the handler applies the request
 * to the namespace and replies once.  Handlers whose work spans other
 * servers hand the reply over to intent.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <time.h>

#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "server/flush.h"
#include "server/intent.h"
#include "server/sv.h"
#include "server/sv_cl.h"
#include "server/sv_req.h"
#include "server/sv_opens.h"
#include "server/sv_writers.h"

static bool sv_is_local(const struct sv_server *sv, uint64_t h)
{
	return orch_handle_server(h) == sv->s_index;
}

/*
 * Commits the open transaction, which holds intent @in, and starts @in with
 * @r waiting for it.  On a failed commit returns the error: @in and @r are
 * still the caller's.
 */
static int sv_commit_and_start(struct sv_server *sv, struct sv_intent *in, struct sv_req *r)
{
	int error = orch_meta_commit(sv->s_meta);

	if (error)
		return error;
	sv_flusher_dirty(sv);
	sv_intent_start(sv, in, r);
	return 0;
}

/* --- Namespace --------------------------------------------------------------------------------- */

int sv_cl_lookup(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_msg rep;
	int error;

	orch_msg_init(&rep, 0);
	error = orch_meta_lookup(sv->s_meta, &m->cred, m->parent, m->name.s, m->name.len,
				 &rep.entry);
	rep.status = error;
	sv_reply(r, &rep);
	return 0;
}

int sv_cl_getattr(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_msg rep;

	orch_msg_init(&rep, 0);
	rep.status = orch_meta_inode_get(sv->s_meta, m->handle, &rep.attr);
	sv_reply(r, &rep);
	return 0;
}

/*
 * A smaller size must cut the data on every server of the layout before the
 * caller hears back, or a later extension would resurrect old bytes.  The
 * size changes first, with a TRUNCATE intent in the same transaction.
 */
int sv_cl_setattr(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_msg rep;
	struct sv_intent *in = NULL;
	uint64_t old_size = 0;
	int error;

	orch_msg_init(&rep, 0);
	error = orch_meta_begin(sv->s_meta);
	if (error)
		goto out_reply;
	error = orch_meta_inode_setattr(sv->s_meta, &m->cred, m->handle, m->valid, &m->attr,
					&rep.attr, &old_size);
	if (error)
		goto out_abort;
	/*
	 * Shrinking cuts the data past the new size.  Growing cuts past the old
	 * one: a writer that died before publishing its size can leave bytes
	 * there, and the new range must read as zeros.
	 */
	if ((m->valid & ORCH_SET_SIZE) && rep.attr.size != old_size && S_ISREG(rep.attr.mode)) {
		in = calloc(1, sizeof(*in));
		if (!in) {
			error = -ENOMEM;
			goto out_abort;
		}
		in->i_kind = SV_INTENT_TRUNCATE;
		in->i_handle = m->handle;
		in->i_size = ORCH_MIN(rep.attr.size, old_size);
		in->i_attr = rep.attr;
		error = sv_intent_insert(sv, in);
		if (error)
			goto out_abort;
	}
	error = orch_meta_commit(sv->s_meta);
	if (error)
		goto out_free;
	sv_flusher_dirty(sv);
	if (in) {
		sv_intent_start(sv, in, r);
		return 0;
	}
	goto out_reply;
out_abort:
	orch_meta_abort(sv->s_meta);
out_free:
	free(in);
out_reply:
	rep.status = error;
	sv_reply(r, &rep);
	return 0;
}

static struct orch_layout sv_new_layout(const struct sv_server *sv)
{
	return (struct orch_layout){
		.strip_size = sv->s_cfg.strip_size,
		.stripe_count = (uint16_t)sv->s_cfg.nservers,
		.first_server = (uint16_t)sv->s_index,
	};
}

int sv_cl_create(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_layout layout = sv_new_layout(sv);
	char target[ORCH_PATH_MAX + 1];
	struct orch_msg rep;
	int error;

	orch_msg_init(&rep, 0);
	error = orch_str_copy(&m->target, target, sizeof(target));
	if (error)
		goto out_reply;
	if (S_ISDIR(m->mode) || (S_ISLNK(m->mode) && !target[0])) {
		error = -EINVAL;
		goto out_reply;
	}
	if (!S_ISLNK(m->mode) && target[0]) {
		error = -EINVAL;
		goto out_reply;
	}
	error = orch_meta_create(sv->s_meta, &m->cred, m->parent, m->name.s, m->name.len,
				 m->mode, m->rdev, S_ISLNK(m->mode) ? target : NULL, &layout,
				 m->create_flags & ORCH_CREATE_EXCL, &rep.entry.attr, &rep.eof);
	if (!error && (m->create_flags & ORCH_CREATE_WRITER) && !rep.eof &&
	    S_ISREG(rep.entry.attr.mode))
		error = sv_writers_created(sv, r->r_conn, rep.entry.attr.handle);
	/* A mount's CREATE opens the file too (CL2SV_WRITERS OPEN), until its CLOSE. */
	if (!error && (m->create_flags & ORCH_CREATE_OPEN) && !rep.eof &&
	    S_ISREG(rep.entry.attr.mode))
		error = sv_opens_request(sv, r->r_conn, rep.entry.attr.handle, true);
	if (!error) {
		rep.entry.handle = rep.entry.attr.handle;
		/*
		 * An existing name of an inode held elsewhere (a link or a
		 * rename from another server): we have no attributes for it,
		 * and the client asks the inode's server.
		 */
		rep.entry.has_attr = sv_is_local(sv, rep.entry.handle);
		sv_flusher_dirty(sv);
	}
out_reply:
	rep.status = error;
	sv_reply(r, &rep);
	return 0;
}

/* Spreads directories over the servers: FNV-1a of the parent and the name. */
static unsigned int sv_dir_placement(const struct sv_server *sv, uint64_t parent,
				     const struct orch_str *name)
{
	uint64_t h = 1469598103934665603ULL;

	for (int i = 0; i < 8; i++) {
		h ^= (parent >> (8 * i)) & 0xff;
		h *= 1099511628211ULL;
	}
	for (uint32_t i = 0; i < name->len; i++) {
		h ^= (uint8_t)name->s[i];
		h *= 1099511628211ULL;
	}
	return (unsigned int)(h % sv->s_cfg.nservers);
}

int sv_cl_mkdir(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	unsigned int where = sv_dir_placement(sv, m->parent, &m->name);
	struct orch_attr parent;
	struct sv_intent *in;
	struct orch_msg rep;
	int error;

	orch_msg_init(&rep, 0);
	if (where == sv->s_index) {
		struct orch_layout none = { 0 };
		bool existed;

		error = orch_meta_create(sv->s_meta, &m->cred, m->parent, m->name.s, m->name.len,
					 S_IFDIR | (m->mode & 07777), 0, NULL, &none, true,
					 &rep.entry.attr, &existed);
		if (!error) {
			rep.entry.handle = rep.entry.attr.handle;
			rep.entry.has_attr = true;
			sv_flusher_dirty(sv);
		}
		goto out_reply;
	}
	/* The inode goes to another server: reserve the name, then ask it. */
	in = calloc(1, sizeof(*in));
	if (!in) {
		error = -ENOMEM;
		goto out_reply;
	}
	error = orch_meta_inode_get(sv->s_meta, m->parent, &parent);
	if (error)
		goto out_free;
	error = orch_meta_begin(sv->s_meta);
	if (error)
		goto out_free;
	error = orch_meta_dirent_reserve(sv->s_meta, &m->cred, m->parent, m->name.s,
					 m->name.len, S_IFDIR);
	if (error)
		goto out_abort;
	in->i_kind = SV_INTENT_MKDIR;
	in->i_peer = where;
	in->i_parent = m->parent;
	memcpy(in->i_name, m->name.s, m->name.len);
	in->i_attr.mode = S_IFDIR | (m->mode & 07777);
	in->i_attr.uid = m->cred.uid;
	in->i_attr.gid = m->cred.gid;
	if (parent.mode & S_ISGID) {
		in->i_attr.gid = parent.gid;
		in->i_attr.mode |= S_ISGID;
	}
	in->i_attr.nlink = 2;
	in->i_attr.parent = m->parent;
	in->i_attr.atime_ns = in->i_attr.mtime_ns = in->i_attr.ctime_ns = orch_time_real_ns();
	error = sv_intent_insert(sv, in);
	if (error)
		goto out_abort;
	error = sv_commit_and_start(sv, in, r);
	if (!error)
		return 0;
	goto out_free;
out_abort:
	orch_meta_abort(sv->s_meta);
out_free:
	free(in);
out_reply:
	rep.status = error;
	sv_reply(r, &rep);
	return 0;
}

int sv_cl_readlink(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	char target[ORCH_PATH_MAX + 1];
	struct orch_msg rep;

	orch_msg_init(&rep, 0);
	rep.status = orch_meta_readlink(sv->s_meta, m->handle, target, sizeof(target));
	rep.target = orch_str_of(target, strlen(target));
	sv_reply(r, &rep);
	return 0;
}

int sv_cl_link(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct sv_intent *in;
	struct orch_attr a;
	struct orch_msg rep;
	bool freed;
	int error;

	orch_msg_init(&rep, 0);
	if (sv_is_local(sv, m->handle)) {
		error = orch_meta_inode_get(sv->s_meta, m->handle, &a);
		if (error)
			goto out_reply;
		if (S_ISDIR(a.mode)) {
			error = -EPERM;
			goto out_reply;
		}
		error = orch_meta_begin(sv->s_meta);
		if (error)
			goto out_reply;
		error = orch_meta_dirent_insert(sv->s_meta, &m->cred, m->newparent, m->name2.s,
						m->name2.len, m->handle, a.mode & S_IFMT);
		if (!error)
			error = orch_meta_inode_nlink_adjust(sv->s_meta, m->handle, 1,
							     &rep.entry.attr, &freed);
		if (error) {
			orch_meta_abort(sv->s_meta);
			goto out_reply;
		}
		error = orch_meta_commit(sv->s_meta);
		if (error)
			goto out_reply;
		sv_flusher_dirty(sv);
		rep.entry.handle = m->handle;
		rep.entry.has_attr = true;
		goto out_reply;
	}
	/* Inode elsewhere: reserve the name, add the link there, then commit the name. */
	in = calloc(1, sizeof(*in));
	if (!in) {
		error = -ENOMEM;
		goto out_reply;
	}
	error = orch_meta_begin(sv->s_meta);
	if (error)
		goto out_free;
	error = orch_meta_dirent_reserve(sv->s_meta, &m->cred, m->newparent, m->name2.s,
					 m->name2.len, S_IFREG);
	if (error)
		goto out_abort;
	in->i_kind = SV_INTENT_LINK;
	in->i_peer = orch_handle_server(m->handle);
	in->i_handle = m->handle;
	in->i_parent = m->newparent;
	memcpy(in->i_name, m->name2.s, m->name2.len);
	in->i_size = 1;
	error = sv_intent_insert(sv, in);
	if (error)
		goto out_abort;
	error = orch_meta_commit(sv->s_meta);
	if (error)
		goto out_free;
	sv_intent_start(sv, in, r);
	return 0;
out_abort:
	orch_meta_abort(sv->s_meta);
out_free:
	free(in);
out_reply:
	rep.status = error;
	sv_reply(r, &rep);
	return 0;
}

int sv_cl_unlink(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	bool want_dir = m->unlink_flags & ORCH_UNLINK_RMDIR, remote = false, freed = false;
	struct sv_intent *in = NULL;
	struct orch_dirent de;
	int error;

	error = orch_meta_unlink_check(sv->s_meta, &m->cred, m->parent, m->name.s, m->name.len,
				       want_dir, &de);
	if (error == -EREMOTE) {
		/* Sticky directory, child on another server: ask it who owns it. */
		return sv_req_need_owner(r, de.handle);
	}
	if (error)
		goto out_reply;
	error = orch_meta_begin(sv->s_meta);
	if (error)
		goto out_reply;
	if (!sv_is_local(sv, de.handle) && S_ISDIR(de.type)) {
		/* The directory must be found empty where it lives before the name goes. */
		error = orch_meta_dirent_set_busy(sv->s_meta, m->parent, m->name.s, m->name.len,
						  true);
		if (error)
			goto out_abort;
		in = calloc(1, sizeof(*in));
		if (!in) {
			error = -ENOMEM;
			goto out_abort;
		}
		in->i_kind = SV_INTENT_RMDIR;
		in->i_peer = orch_handle_server(de.handle);
		in->i_handle = de.handle;
		in->i_parent = m->parent;
		memcpy(in->i_name, m->name.s, m->name.len);
		error = sv_intent_insert(sv, in);
		if (error)
			goto out_abort;
	} else {
		error = orch_meta_unlink(sv->s_meta, m->parent, m->name.s, m->name.len, &remote,
					 &freed);
		if (error)
			goto out_abort;
		if (remote) {
			in = calloc(1, sizeof(*in));
			if (!in) {
				error = -ENOMEM;
				goto out_abort;
			}
			in->i_kind = SV_INTENT_NLINK;
			in->i_peer = orch_handle_server(de.handle);
			in->i_handle = de.handle;
			in->i_size = (uint64_t)-1;
			error = sv_intent_insert(sv, in);
			if (error)
				goto out_abort;
		} else if (freed && S_ISREG(de.type)) {
			error = sv_intent_insert_free_data(sv, de.handle, &in);
			if (error)
				goto out_abort;
		}
	}
	error = orch_meta_commit(sv->s_meta);
	if (error)
		goto out_free;
	sv_flusher_dirty(sv);
	if (in) {
		/* Freeing data needs nobody to wait; the rest answers when done. */
		bool wait = in->i_kind != SV_INTENT_FREE_DATA;

		sv_intent_start(sv, in, wait ? r : NULL);
		if (wait)
			return 0;
	}
	goto out_reply;
out_abort:
	orch_meta_abort(sv->s_meta);
out_free:
	free(in);
out_reply:
	sv_reply_status(r, error);
	return 0;
}

/*
 * A rename intent of @kind acting on @handle at server @peer, carrying the
 * whole request (both names, flags, the caller).  NULL on ENOMEM.
 */
static struct sv_intent *sv_rename_intent(const struct orch_msg *m, uint32_t kind,
					  unsigned int peer, uint64_t handle)
{
	struct sv_intent *in = calloc(1, sizeof(*in));

	if (!in)
		return NULL;
	in->i_kind = kind;
	in->i_peer = peer;
	in->i_handle = handle;
	in->i_parent = m->parent;
	memcpy(in->i_name, m->name.s, m->name.len);
	in->i_attr.parent = m->newparent;
	memcpy(in->i_name2, m->name2.s, m->name2.len);
	in->i_flags = m->rename_flags;
	in->i_cred = m->cred;
	return in;
}

/*
 * Marks the old entry busy (and the new one, with @both), writes rename
 * intent @in in the same transaction and starts it with @r waiting.
 * Consumes @in and @r whatever happens.
 */
static void sv_rename_start(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m,
			    struct sv_intent *in, bool both)
{
	int error;

	error = orch_meta_begin(sv->s_meta);
	if (error)
		goto out_free;
	error = orch_meta_dirent_set_busy(sv->s_meta, m->parent, m->name.s, m->name.len, true);
	if (!error && both)
		error = orch_meta_dirent_set_busy(sv->s_meta, m->newparent, m->name2.s,
						  m->name2.len, true);
	if (!error)
		error = sv_intent_insert(sv, in);
	if (error) {
		orch_meta_abort(sv->s_meta);
		goto out_free;
	}
	error = sv_commit_and_start(sv, in, r);
	if (!error)
		return;
out_free:
	free(in);
	sv_reply_status(r, error);
}

/*
 * Rename into a directory held by another server: check what can be checked
 * here (the source entry, write permission and the sticky rule on the old
 * parent), mark the old entry busy and write a RENAME intent in one
 * transaction; the peer then adds the new entry (replacing a victim as
 * rename(2) does; with RENAME_EXCHANGE, handing back the inode it had) and
 * intent.c removes the old entry (or points it at that inode).
 */
static int sv_rename_remote(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_attr dir, child;
	struct orch_dirent src;
	struct sv_intent *in;
	int error;

	if (m->rename_flags & ORCH_RENAME_NOREPLACE && m->rename_flags & ORCH_RENAME_EXCHANGE) {
		error = -EINVAL;
		goto out_reply;
	}
	error = orch_meta_lookup(sv->s_meta, &m->cred, m->parent, m->name.s, m->name.len, &src);
	if (!error)
		error = orch_meta_access(sv->s_meta, &m->cred, m->parent, W_OK | X_OK);
	if (!error)
		error = orch_meta_inode_get(sv->s_meta, m->parent, &dir);
	if (error)
		goto out_reply;
	if ((dir.mode & S_ISVTX) && m->cred.uid != 0 && m->cred.uid != dir.uid) {
		/* Sticky: only the owner of the entry may move it. */
		if (sv_is_local(sv, src.handle)) {
			error = orch_meta_inode_get(sv->s_meta, src.handle, &child);
			if (!error && child.uid != m->cred.uid)
				error = -EPERM;
			if (error)
				goto out_reply;
		} else {
			unsigned int k;

			for (k = 0; k < r->r_nowners && r->r_owners[k].handle != src.handle; k++)
				;
			if (k == r->r_nowners)
				return sv_req_need_owner(r, src.handle);
			if (r->r_owners[k].uid != m->cred.uid) {
				error = -EPERM;
				goto out_reply;
			}
		}
	}
	if (S_ISDIR(src.type) && sv_is_local(sv, src.handle)) {
		/* Its ".." changes: that needs write permission on it. */
		error = orch_meta_access(sv->s_meta, &m->cred, src.handle, W_OK);
		if (error)
			goto out_reply;
	}
	in = sv_rename_intent(m, SV_INTENT_RENAME, orch_handle_server(m->newparent), src.handle);
	if (!in) {
		error = -ENOMEM;
		goto out_reply;
	}
	in->i_attr.mode = src.type;
	sv_rename_start(sv, r, m, in, false);
	return 0;
out_reply:
	sv_reply_status(r, error);
	return 0;
}

/*
 * orch_meta_rename needs the owner of the source or the target inode for the
 * sticky rule: fetch the first one held elsewhere that is not known yet.
 */
static int sv_rename_fetch_owner(struct sv_server *sv, struct sv_req *r,
				 const struct orch_msg *m)
{
	struct orch_dirent de;
	const struct orch_str *names[2] = { &m->name, &m->name2 };
	uint64_t dirs[2] = { m->parent, m->newparent };

	for (int i = 0; i < 2; i++) {
		bool known = false;

		if (orch_meta_lookup(sv->s_meta, &m->cred, dirs[i], names[i]->s, names[i]->len, &de))
			continue;
		if (sv_is_local(sv, de.handle))
			continue;
		for (unsigned int k = 0; k < r->r_nowners; k++)
			known |= r->r_owners[k].handle == de.handle;
		if (!known)
			return sv_req_need_owner(r, de.handle);
	}
	sv_reply_status(r, -EPERM);
	return 0;
}

/*
 * Rename over a directory whose inode is on another server.  A dry run of
 * the rename (rolled back) checks everything but the victim's emptiness;
 * then both entries are marked busy with a RENAME_OVER intent, the peer
 * removes the victim if it is empty, and intent.c performs the rename.
 */
static int sv_rename_over_remote_dir(struct sv_server *sv, struct sv_req *r,
				     const struct orch_msg *m, uint64_t victim_dir)
{
	uint64_t freed = 0, victim = 0, moved_dir = 0;
	uint32_t victim_type = 0;
	struct sv_intent *in;
	int error;

	error = orch_meta_begin(sv->s_meta);
	if (error)
		goto out_reply;
	error = orch_meta_rename(sv->s_meta, &m->cred, m->parent, m->name.s, m->name.len,
				 m->newparent, m->name2.s, m->name2.len, m->rename_flags, &freed,
				 &victim, &victim_type, &moved_dir);
	orch_meta_abort(sv->s_meta);
	if (error == -EREMOTE)
		return sv_rename_fetch_owner(sv, r, m);
	if (error || victim != victim_dir) {
		/* Refused, or a no-op (same inode): nothing to remove. */
		if (!error)
			goto out_plain;
		goto out_reply;
	}
	in = sv_rename_intent(m, SV_INTENT_RENAME_OVER, orch_handle_server(victim_dir), victim_dir);
	if (!in) {
		error = -ENOMEM;
		goto out_reply;
	}
	sv_rename_start(sv, r, m, in, true);
	return 0;
out_reply:
	sv_reply_status(r, error);
	return 0;
out_plain:
	sv_reply_status(r, 0);
	return 0;
}

/*
 * Rename with both directories here.  What the namespace cannot finish
 * locally (a replaced inode or a moved directory held elsewhere, data to
 * free) becomes intents in the same transaction.
 */
int sv_cl_rename(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	uint64_t freed = 0, victim = 0, moved_dir = 0;
	struct sv_intent *ins[3] = { NULL, NULL, NULL };
	uint32_t victim_type = 0;
	int nin = 0, error;
	bool wait;

	if (!sv_is_local(sv, m->newparent))
		return sv_rename_remote(sv, r, m);
	error = orch_meta_begin(sv->s_meta);
	if (error)
		goto out_reply;
	error = orch_meta_rename(sv->s_meta, &m->cred, m->parent, m->name.s, m->name.len,
				 m->newparent, m->name2.s, m->name2.len, m->rename_flags, &freed,
				 &victim, &victim_type, &moved_dir);
	if (error == -EREMOTE) {
		orch_meta_abort(sv->s_meta);
		return sv_rename_fetch_owner(sv, r, m);
	}
	if (error)
		goto out_abort;
	if (victim && S_ISDIR(victim_type) && !(m->rename_flags & ORCH_RENAME_EXCHANGE)) {
		/*
		 * A victim directory held elsewhere must be found empty there
		 * first.  Rare: finding out here, rather than with a lookup
		 * before, saves every other rename that lookup.
		 */
		orch_meta_abort(sv->s_meta);
		return sv_rename_over_remote_dir(sv, r, m, victim);
	}
	if (freed && !S_ISDIR(victim_type)) {
		error = sv_intent_insert_free_data(sv, freed, &ins[nin]);
		if (error)
			goto out_abort;
		nin++;
	}
	if (victim) {
		ins[nin] = calloc(1, sizeof(*ins[nin]));
		if (!ins[nin]) {
			error = -ENOMEM;
			goto out_abort;
		}
		ins[nin]->i_peer = orch_handle_server(victim);
		ins[nin]->i_handle = victim;
		if (m->rename_flags & ORCH_RENAME_EXCHANGE) {
			/* Not a victim: the other directory moved, to the old parent. */
			ins[nin]->i_kind = SV_INTENT_SET_PARENT;
			ins[nin]->i_parent = m->parent;
		} else {
			ins[nin]->i_kind = SV_INTENT_NLINK;
			ins[nin]->i_size = (uint64_t)-1;
		}
		error = sv_intent_insert(sv, ins[nin++]);
		if (error)
			goto out_abort;
	}
	if (moved_dir) {
		ins[nin] = calloc(1, sizeof(*ins[nin]));
		if (!ins[nin]) {
			error = -ENOMEM;
			goto out_abort;
		}
		ins[nin]->i_kind = SV_INTENT_SET_PARENT;
		ins[nin]->i_peer = orch_handle_server(moved_dir);
		ins[nin]->i_handle = moved_dir;
		ins[nin]->i_parent = m->newparent;
		error = sv_intent_insert(sv, ins[nin++]);
		if (error)
			goto out_abort;
	}
	error = orch_meta_commit(sv->s_meta);
	if (error)
		goto out_free;
	sv_flusher_dirty(sv);
	/*
	 * The last intent carries the reply, so the caller sees the moved
	 * parent; nobody waits for freeing data.  Starting consumes an intent.
	 */
	wait = nin && ins[nin - 1]->i_kind != SV_INTENT_FREE_DATA;
	for (int i = 0; i < nin; i++)
		sv_intent_start(sv, ins[i], i == nin - 1 && wait ? r : NULL);
	if (wait)
		return 0;
	goto out_reply;
out_abort:
	orch_meta_abort(sv->s_meta);
out_free:
	for (int i = 0; i < nin; i++)
		free(ins[i]);
	free(ins[nin]);
out_reply:
	sv_reply_status(r, error);
	return 0;
}

int sv_cl_readdir(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	uint32_t max = m->length ? ORCH_MIN(m->length, (uint32_t)ORCH_READDIR_MAX) : 1;
	struct orch_msg rep;

	orch_msg_init(&rep, 0);
	rep.dirents = malloc(max * sizeof(*rep.dirents));
	if (!rep.dirents) {
		rep.status = -ENOMEM;
		sv_reply(r, &rep);
		return 0;
	}
	rep.status = orch_meta_readdir(sv->s_meta, &m->cred, m->handle, m->cookie, max,
				       m->readdir_flags & ORCH_READDIR_PLUS, rep.dirents,
				       &rep.ndirents, &rep.eof);
	sv_reply(r, &rep);
	free(rep.dirents);
	return 0;
}

/*
 * What this server can really still store, not the store's size at mkfs
 * (64 GiB by default, whatever the disk): blocks = used + avail, where
 * avail is the store's free blocks but no more than its host's file
 * system can give.  Servers sharing that file system each see all of
 * it, so the reply names it (host_fs) with what it can give, and the
 * client counts that once (orch_fs_statfs).
 */
int sv_cl_statfs(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_store_space sp;
	uint64_t inodes, next, avail;
	struct orch_msg rep;
	int error;

	(void)m;
	orch_msg_init(&rep, 0);
	error = orch_store_space(sv->s_store, &sp);
	if (!error)
		error = orch_meta_counts(sv->s_meta, &inodes, &next);
	if (!error) {
		avail = sp.avail / 4096;
		rep.statfs = (struct orch_statfs){
			.bsize = 4096,
			.blocks = sp.used / 4096 + avail,
			.bfree = avail,
			.bavail = avail,
			.files = inodes + avail,
			.ffree = avail,
			.namemax = ORCH_NAME_MAX,
			.host_fs = sp.host_fs,
			.host_bavail = sp.host_fs ? sp.host_avail / 4096 : 0,
		};
	}
	rep.status = error;
	sv_reply(r, &rep);
	return 0;
}

int sv_cl_access(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	sv_reply_status(r, orch_meta_access(sv->s_meta, &m->cred, m->handle, m->mode));
	return 0;
}

/* --- Extended attributes ---------------------------------------------------------------- */

int sv_cl_getxattr(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	size_t want = ORCH_MIN(m->length, (uint32_t)ORCH_XATTR_SIZE_MAX), len = 0;
	bool list = m->type == ORCH_CL2SV_LISTXATTR;
	char name[ORCH_XATTR_NAME_MAX + 1];
	struct orch_msg rep;
	void *buf = NULL;
	int error = 0;

	orch_msg_init(&rep, 0);
	if (want) {
		buf = malloc(want);
		if (!buf) {
			error = -ENOMEM;
			goto out_reply;
		}
	}
	if (list) {
		error = orch_meta_xattr_list(sv->s_meta, &m->cred, m->handle, buf, want, &len);
	} else {
		error = orch_str_copy(&m->xname, name, sizeof(name));
		if (!error)
			error = orch_meta_xattr_get(sv->s_meta, &m->cred, m->handle, name, buf,
						    want, &len);
	}
	rep.size = len;
	rep.data = orch_str_of(buf, want ? len : 0);
out_reply:
	rep.status = error;
	sv_reply(r, &rep);
	free(buf);
	return 0;
}

int sv_cl_setxattr(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	char name[ORCH_XATTR_NAME_MAX + 1];
	bool remove = m->type == ORCH_CL2SV_REMOVEXATTR;
	int error;

	error = orch_str_copy(&m->xname, name, sizeof(name));
	if (!error && !remove && m->data.len > ORCH_XATTR_SIZE_MAX)
		error = -E2BIG;
	if (!error)
		error = remove ? orch_meta_xattr_remove(sv->s_meta, &m->cred, m->handle, name)
			       : orch_meta_xattr_set(sv->s_meta, &m->cred, m->handle, name,
						     m->data.s, m->data.len, (int)m->xattr_flags);
	if (!error)
		sv_flusher_dirty(sv);
	sv_reply_status(r, error);
	return 0;
}

/* --- Durability, and sizes published by writers ------------------------------------------------ */

int sv_cl_fsync(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	(void)m; /* FSYNC_DATASYNC or not, everything is flushed */
	sv_flusher_wait(sv, r);
	return 0;
}

int sv_cl_extend(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_msg rep;

	orch_msg_init(&rep, 0);
	rep.status = orch_meta_inode_extend(sv->s_meta, m->handle, m->size, m->time_ns,
					    &rep.attr);
	if (!rep.status)
		sv_flusher_dirty(sv);
	sv_reply(r, &rep);
	return 0;
}
