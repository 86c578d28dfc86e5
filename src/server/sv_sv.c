/*
 * The SV2SV requests other servers send us (the calls we make on them are
 * in sv_peer.c).  Every SV2SV request is idempotent, because a coordinator
 * replays its intents until they are done: creations are remembered in the
 * "applied" table by (origin server, intent id); deletions and truncations
 * are naturally idempotent.  Every answer to a step that changes something
 * leaves only once the change is durable (sv_flusher_reply; DESIGN.md,
 * "Intents"), including an answer from the applied record, which a kill
 * (not a power cut) may have left unsynced.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"
#include "server/flush.h"
#include "server/intent.h"
#include "server/sv.h"
#include "server/sv_mirror.h"
#include "server/sv_req.h"
#include "server/sv_sv.h"
#include "server/sv_write.h"

int sv_sv_mkdir_inode(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_msg rep;
	uint64_t done;
	int error;

	orch_msg_init(&rep, 0);
	if (!S_ISDIR(m->attr.mode)) {
		error = -EINVAL;
		goto out_reply;
	}
	error = orch_meta_applied_get(sv->s_meta, m->origin, m->id, &done);
	if (!error) {
		error = orch_meta_inode_get(sv->s_meta, done, &rep.attr);
		goto out_reply;
	}
	error = orch_meta_begin(sv->s_meta);
	if (error)
		goto out_reply;
	error = orch_meta_inode_create(sv->s_meta, &m->attr, &rep.attr);
	if (!error)
		error = orch_meta_applied_put(sv->s_meta, m->origin, m->id, rep.attr.handle);
	if (error) {
		orch_meta_abort(sv->s_meta);
		goto out_reply;
	}
	error = orch_meta_commit(sv->s_meta);
	if (!error)
		sv_flusher_dirty(sv);
out_reply:
	rep.status = error;
	sv_flusher_reply(sv, r, &rep);
	return 0;
}

int sv_sv_nlink_adj(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	int delta = m->delta;
	struct sv_intent *in = NULL;
	struct orch_attr a;
	struct orch_msg rep;
	uint64_t done;
	bool freed = false;
	int error;

	orch_msg_init(&rep, 0);
	if (delta != 1 && delta != -1) {
		error = -EINVAL;
		goto out_reply;
	}
	error = orch_meta_applied_get(sv->s_meta, m->origin, m->id, &done);
	if (!error) {
		error = orch_meta_inode_get(sv->s_meta, m->handle, &rep.attr);
		goto out_reply;
	}
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
	error = orch_meta_inode_nlink_adjust(sv->s_meta, m->handle, delta, &rep.attr, &freed);
	if (!error)
		error = orch_meta_applied_put(sv->s_meta, m->origin, m->id, m->handle);
	if (!error && freed && S_ISREG(a.mode))
		error = sv_intent_insert_free_data(sv, m->handle, &in);
	if (error) {
		orch_meta_abort(sv->s_meta);
		goto out_reply;
	}
	error = orch_meta_commit(sv->s_meta);
	if (error) {
		free(in);
		goto out_reply;
	}
	sv_flusher_dirty(sv);
	if (in)
		sv_intent_start(sv, in, NULL);
out_reply:
	rep.status = error;
	sv_flusher_reply(sv, r, &rep);
	return 0;
}

/*
 * RENAME_EXCHANGE, target side: the entry here now names the inode moving in
 * (X), and the one it named (Y) goes back to the coordinator, which puts it
 * under X's old name.  Permissions: write on this directory, and the
 * sticky rule for Y.
 */
static int sv_sv_exchange_in(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m,
			     const struct orch_dirent *y, struct orch_msg *rep)
{
	uint32_t type = m->mode & S_IFMT;
	struct orch_attr dir, owner;
	int error;

	error = orch_meta_access(sv->s_meta, &m->cred, m->parent, W_OK | X_OK);
	if (!error)
		error = orch_meta_inode_get(sv->s_meta, m->parent, &dir);
	if (error)
		return error;
	if ((dir.mode & S_ISVTX) && m->cred.uid != 0 && m->cred.uid != dir.uid) {
		if (orch_handle_server(y->handle) == sv->s_index) {
			error = orch_meta_inode_get(sv->s_meta, y->handle, &owner);
			if (error)
				return error;
		} else {
			unsigned int k;

			for (k = 0; k < r->r_nowners && r->r_owners[k].handle != y->handle; k++)
				;
			if (k == r->r_nowners)
				return -EREMOTE;
			owner.uid = r->r_owners[k].uid;
		}
		if (owner.uid != m->cred.uid)
			return -EPERM;
	}
	error = orch_meta_dirent_remove(sv->s_meta, m->parent, m->name.s, m->name.len);
	if (!error)
		error = orch_meta_dirent_insert(sv->s_meta, NULL, m->parent, m->name.s, m->name.len,
						m->handle, type);
	if (!error && S_ISDIR(type) && orch_handle_server(m->handle) == sv->s_index)
		error = orch_meta_inode_set_parent(sv->s_meta, m->handle, m->parent);
	if (!error && S_ISDIR(y->type) && orch_handle_server(y->handle) == sv->s_index)
		error = orch_meta_inode_set_parent(sv->s_meta, y->handle, m->newparent);
	if (!error)
		error = orch_meta_applied_put(sv->s_meta, m->origin, m->id,
					      sv_applied_exchange(y->handle, y->type));
	rep->handle = y->handle;
	rep->mode = y->type;
	return error;
}

/*
 * The victim is a directory held on a third server: it must be found empty
 * there first.  Mark the entry busy, write a RENAME_IN_OVER intent and
 * answer the coordinator when it is done (intent.c).
 */
static int sv_sv_rename_in_over(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m,
				const struct orch_dirent *victim)
{
	struct sv_intent *in = calloc(1, sizeof(*in));
	int error;

	if (!in)
		return -ENOMEM;
	in->i_kind = SV_INTENT_RENAME_IN_OVER;
	in->i_peer = orch_handle_server(victim->handle);
	in->i_handle = victim->handle;
	in->i_parent = m->parent;
	memcpy(in->i_name, m->name.s, m->name.len);
	in->i_attr.mode = m->mode & S_IFMT;
	in->i_origin = m->origin;
	in->i_origin_id = m->id;
	in->i_handle2 = m->handle;
	error = orch_meta_dirent_set_busy(sv->s_meta, m->parent, m->name.s, m->name.len, true);
	if (!error)
		error = sv_intent_insert(sv, in);
	if (!error)
		error = orch_meta_commit(sv->s_meta);
	if (error) {
		free(in);
		return error;
	}
	sv_flusher_dirty(sv);
	sv_intent_start(sv, in, r);
	return 0;
}

/*
 * The target half of a cross-server rename: put entry @name in @parent (held
 * here) for inode @handle, replacing what is there as rename(2) would, or
 * swapping with it for RENAME_EXCHANGE.  The coordinator removes or
 * repoints the old entry once we answer.  Reply size=1 means the name
 * already named this inode (rename does nothing).  Idempotent through the
 * applied record of (origin, id).
 */
int sv_sv_rename_in(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct sv_intent *ins[2] = { NULL, NULL };
	uint32_t type = m->mode & S_IFMT;
	bool exchange = m->rename_flags & ORCH_RENAME_EXCHANGE;
	struct orch_dirent victim;
	struct orch_msg rep;
	bool remote = false, freed = false;
	uint64_t done;
	int nin = 0, error;

	orch_msg_init(&rep, 0);
	error = orch_meta_applied_get(sv->s_meta, m->origin, m->id, &done);
	if (!error) {
		rep.size = done == 2;
		if (exchange && done != 2) {
			rep.handle = done & ((1ULL << 60) - 1);
			rep.mode = (uint32_t)(done >> 60) << 12;
		}
		goto out_reply;
	}
	if (sv_intent_origin_running(sv, m->origin, m->id)) {
		error = -EAGAIN; /* still at it from an earlier try */
		goto out_reply;
	}
	error = orch_meta_begin(sv->s_meta);
	if (error)
		goto out_reply;
	error = orch_meta_lookup(sv->s_meta, &m->cred, m->parent, m->name.s, m->name.len, &victim);
	if (!error && victim.handle == m->handle) {
		rep.size = 1;
		error = orch_meta_applied_put(sv->s_meta, m->origin, m->id, 2);
		if (error)
			goto out_abort;
		goto out_commit;
	}
	if (exchange) {
		if (!error)
			error = sv_sv_exchange_in(sv, r, m, &victim, &rep);
		if (error == -EREMOTE) {
			orch_meta_abort(sv->s_meta);
			return sv_req_need_owner(r, victim.handle);
		}
		if (error)
			goto out_abort;
		goto out_commit;
	}
	if (!error) {
		if (m->rename_flags & ORCH_RENAME_NOREPLACE) {
			error = -EEXIST;
			goto out_abort;
		}
		error = orch_meta_unlink_check(sv->s_meta, &m->cred, m->parent, m->name.s,
					       m->name.len, S_ISDIR(type), &victim);
		if (error == -EREMOTE) {
			/* Sticky target directory: its owner decides, on its server. */
			orch_meta_abort(sv->s_meta);
			return sv_req_need_owner(r, victim.handle);
		}
		if (error)
			goto out_abort;
		if (S_ISDIR(victim.type) && orch_handle_server(victim.handle) != sv->s_index) {
			error = sv_sv_rename_in_over(sv, r, m, &victim);
			if (error)
				goto out_abort;
			return 0;
		}
		error = orch_meta_unlink(sv->s_meta, m->parent, m->name.s, m->name.len, &remote,
					 &freed);
		if (error)
			goto out_abort;
		if (remote || (freed && S_ISREG(victim.type))) {
			ins[nin] = calloc(1, sizeof(*ins[nin]));
			if (!ins[nin]) {
				error = -ENOMEM;
				goto out_abort;
			}
			ins[nin]->i_handle = victim.handle;
			if (remote) {
				ins[nin]->i_kind = SV_INTENT_NLINK;
				ins[nin]->i_peer = orch_handle_server(victim.handle);
				ins[nin]->i_size = (uint64_t)-1;
			} else {
				ins[nin]->i_kind = SV_INTENT_FREE_DATA;
			}
			error = sv_intent_insert(sv, ins[nin++]);
			if (error)
				goto out_abort;
		}
	} else if (error != -ENOENT) {
		goto out_abort;
	}
	error = orch_meta_dirent_insert(sv->s_meta, &m->cred, m->parent, m->name.s, m->name.len,
					m->handle, type);
	if (!error && S_ISDIR(type) && orch_handle_server(m->handle) == sv->s_index)
		error = orch_meta_inode_set_parent(sv->s_meta, m->handle, m->parent);
	if (!error)
		error = orch_meta_applied_put(sv->s_meta, m->origin, m->id, 1);
	if (error)
		goto out_abort;
out_commit:
	error = orch_meta_commit(sv->s_meta);
	if (error)
		goto out_free;
	sv_flusher_dirty(sv);
	for (int i = 0; i < nin; i++)
		sv_intent_start(sv, ins[i], NULL);
	goto out_reply;
out_abort:
	orch_meta_abort(sv->s_meta);
out_free:
	for (int i = 0; i < nin; i++)
		free(ins[i]);
out_reply:
	rep.status = error;
	sv_flusher_reply(sv, r, &rep);
	return 0;
}

/* Answers @r with @error once what the request changed is durable. */
static int sv_sv_reply_durable(struct sv_server *sv, struct sv_req *r, int error)
{
	struct orch_msg rep;

	if (!error)
		sv_flusher_dirty(sv);
	orch_msg_init(&rep, 0);
	rep.status = error;
	sv_flusher_reply(sv, r, &rep);
	return 0;
}

int sv_sv_rmdir_inode(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	return sv_sv_reply_durable(sv, r, orch_meta_dir_remove(sv->s_meta, m->handle));
}

int sv_sv_data_delete(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	return sv_sv_reply_durable(sv, r, sv_store_delete(sv, m->handle));
}

/*
 * A batch of a coordinator's FREE_DATA intents: @m->data is their handles,
 * 8 bytes each.  Every object is deleted even if one fails; the first error
 * is the answer, and the coordinator then retries intent by intent.
 */
int sv_sv_data_delete_many(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	const uint8_t *p = (const uint8_t *)m->data.s;
	uint64_t h[ORCH_DATA_DELETE_MANY_MAX];
	size_t n = m->data.len / 8;

	if (m->data.len % 8 || n > ORCH_DATA_DELETE_MANY_MAX)
		return sv_sv_reply_durable(sv, r, -EINVAL);
	for (size_t i = 0; i < n; i++)
		h[i] = orch_get_u64(p + 8 * i);
	return sv_sv_reply_durable(sv, r, sv_store_delete_many(sv, h, n));
}

int sv_sv_data_truncate(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	return sv_sv_reply_durable(sv, r, sv_store_truncate(sv, m->handle, m->size));
}

int sv_sv_set_parent(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	return sv_sv_reply_durable(sv, r,
				   orch_meta_inode_set_parent(sv->s_meta, m->handle, m->parent));
}

int sv_sv_applied_trim(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	int error = orch_meta_applied_trim(sv->s_meta, m->origin, m->id);

	if (!error)
		sv_flusher_dirty(sv);
	sv_reply_status(r, error); /* forgetting needs no durability */
	return 0;
}

int sv_sv_write(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	sv_write_submit(sv, r, m->handle, m->offset, m->data.s, m->data.len);
	return 0;
}
