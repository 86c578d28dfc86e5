/*
 * liborchard's file-system calls.  See fs.h.
 *
 * Placement rules (docs/DESIGN.md, "Handles and placement"): a name is
 * handled by the server of the directory that holds it, an inode by the
 * server in its handle's top bits, and file data by the server the layout
 * assigns to each strip.  Fan-out calls (striped I/O, readdirplus
 * attributes, statfs, fsync) send every request before waiting for any, so
 * the round trips overlap.
 */
#include "client/fs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"
#include "proto/layout.h"

#define FS_SYMLOOP_MAX 40
/* Pieces of striped I/O in flight at once: bounds memory for huge requests. */
#define FS_IO_BATCH 64
/* Parent-pointer walk bound for the rename check (a cycle means corruption). */
#define FS_DEPTH_MAX 4096

/* --- Helpers ----------------------------------------------------------------------- */

static void fs_req_init(struct orch_msg *m, uint16_t type, const struct orch_cred *cred)
{
	orch_msg_init(m, type);
	m->cred = *cred;
	if (m->cred.ngroups > ORCH_GROUPS_MAX)
		m->cred.ngroups = ORCH_GROUPS_MAX;
}

/* A path component: 1..255 bytes, no '/'.  Checked here for a POSIX errno. */
static int fs_name_check(const char *name, struct orch_str *out)
{
	size_t n = strlen(name);

	if (n == 0)
		return -ENOENT;
	if (n > ORCH_NAME_MAX)
		return -ENAMETOOLONG;
	if (memchr(name, '/', n))
		return -EINVAL;
	*out = orch_str_of(name, n);
	return 0;
}

static int fs_xname_check(const char *name, struct orch_str *out)
{
	size_t n = strlen(name);

	/* What Linux answers for an empty or too long attribute name. */
	if (n == 0 || n > ORCH_XATTR_NAME_MAX)
		return -ERANGE;
	*out = orch_str_of(name, n);
	return 0;
}

/*
 * Attributes of an entry reply from @parent's server (its stamp @stamp),
 * fetched from the inode's server if absent.  @st (may be NULL) gets the
 * stamps: the entry's, and the attributes' if their own server sent them.
 */
static int fs_entry_attr(struct orch_client *cl, const struct orch_cred *cred,
			 uint64_t parent, uint64_t stamp, const struct orch_dirent *e,
			 struct orch_attr *out, struct orch_fs_stamps *st)
{
	if (st) {
		st->entry = stamp;
		st->attr = 0;
	}
	if (e->has_attr) {
		if (out)
			*out = e->attr;
		if (st && orch_handle_server(e->handle) == orch_handle_server(parent))
			st->attr = stamp;
		return 0;
	}
	if (!out)
		return 0;
	return orch_fs_getattr_stamped(cl, cred, e->handle, out, st ? &st->attr : NULL);
}

/* --- Credentials ------------------------------------------------------------------- */

void orch_fs_cred_self(struct orch_cred *out)
{
	gid_t *all;
	int n;

	memset(out, 0, sizeof(*out));
	out->uid = (uint32_t)getuid();
	out->gid = (uint32_t)getgid();
	n = getgroups(0, NULL);
	if (n <= 0)
		return;
	all = calloc((size_t)n, sizeof(*all));
	if (!all)
		return;
	n = getgroups(n, all);
	/* More than ORCH_GROUPS_MAX groups: the first ones are sent. */
	for (int i = 0; i < n && i < ORCH_GROUPS_MAX; i++)
		out->groups[out->ngroups++] = (uint32_t)all[i];
	free(all);
}

/* --- Namespace ------------------------------------------------------------------------ */

/* A request to @req->handle's server whose reply is attributes. */
static int fs_attr_call_gen(struct orch_client *cl, const struct orch_msg *req,
			    struct orch_attr *out, uint64_t *stamp, uint64_t *gen)
{
	struct orch_reply rep;
	int error;

	error = orch_client_call(cl, orch_handle_server(req->handle), req, &rep);
	if (stamp)
		*stamp = rep.stamp;
	if (gen)
		*gen = rep.gen;
	if (error)
		return error;
	if (out)
		*out = rep.m.attr;
	orch_reply_release(&rep);
	return 0;
}

static int fs_attr_call(struct orch_client *cl, const struct orch_msg *req,
			struct orch_attr *out, uint64_t *stamp)
{
	return fs_attr_call_gen(cl, req, out, stamp, NULL);
}

int orch_fs_getattr_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			    struct orch_attr *out, uint64_t *stamp)
{
	struct orch_msg req;

	fs_req_init(&req, ORCH_CL2SV_GETATTR, cred);
	req.handle = h;
	return fs_attr_call(cl, &req, out, stamp);
}

int orch_fs_getattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		    struct orch_attr *out)
{
	return orch_fs_getattr_stamped(cl, cred, h, out, NULL);
}

int orch_fs_lookup_stamped(struct orch_client *cl, const struct orch_cred *cred,
			   uint64_t parent, const char *name, struct orch_attr *out,
			   struct orch_fs_stamps *st)
{
	struct orch_dirent e;
	struct orch_reply rep;
	struct orch_msg req;
	uint64_t stamp;
	int error;

	if (st)
		*st = (struct orch_fs_stamps){ 0 };
	fs_req_init(&req, ORCH_CL2SV_LOOKUP, cred);
	req.parent = parent;
	error = fs_name_check(name, &req.name);
	if (error)
		return error;
	error = orch_client_call(cl, orch_handle_server(parent), &req, &rep);
	if (error) {
		if (st && error == -ENOENT)
			st->entry = rep.stamp;
		return error;
	}
	e = rep.m.entry;
	stamp = rep.stamp;
	orch_reply_release(&rep);
	return fs_entry_attr(cl, cred, parent, stamp, &e, out, st);
}

int orch_fs_lookup(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		   const char *name, struct orch_attr *out)
{
	return orch_fs_lookup_stamped(cl, cred, parent, name, out, NULL);
}

int orch_fs_setattr_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			    uint32_t valid, const struct orch_attr *in, struct orch_attr *out,
			    uint64_t *stamp)
{
	struct orch_msg req;

	fs_req_init(&req, ORCH_CL2SV_SETATTR, cred);
	req.handle = h;
	req.valid = valid;
	req.attr = *in;
	/* The server frees truncated data on every server before it answers. */
	return fs_attr_call(cl, &req, out, stamp);
}

int orch_fs_setattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		    uint32_t valid, const struct orch_attr *in, struct orch_attr *out)
{
	return orch_fs_setattr_stamped(cl, cred, h, valid, in, out, NULL);
}

/* CREATE for files, nodes and symlinks: one round trip to the parent's server. */
static int fs_create(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		     const char *name, uint32_t mode, uint64_t rdev, uint32_t flags,
		     const char *target, struct orch_attr *out, bool *existed,
		     struct orch_fs_stamps *st)
{
	struct orch_dirent e;
	struct orch_reply rep;
	struct orch_msg req;
	uint64_t stamp;
	int error;

	fs_req_init(&req, ORCH_CL2SV_CREATE, cred);
	req.parent = parent;
	error = fs_name_check(name, &req.name);
	if (error)
		return error;
	req.mode = mode;
	req.rdev = rdev;
	req.create_flags = flags;
	if (target) {
		size_t n = strlen(target);

		if (n == 0)
			return -ENOENT;
		if (n > ORCH_PATH_MAX)
			return -ENAMETOOLONG;
		req.target = orch_str_of(target, n);
	}
	error = orch_client_call(cl, orch_handle_server(parent), &req, &rep);
	if (st)
		st->gen = rep.gen;
	if (error)
		return error;
	e = rep.m.entry;
	if (existed)
		*existed = rep.m.eof;
	stamp = rep.stamp;
	orch_reply_release(&rep);
	return fs_entry_attr(cl, cred, parent, stamp, &e, out, st);
}

int orch_fs_create(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		   const char *name, uint32_t mode, uint64_t rdev, bool excl,
		   struct orch_attr *out, bool *existed)
{
	return orch_fs_create_stamped(cl, cred, parent, name, mode, rdev,
				      excl ? ORCH_CREATE_EXCL : 0, out, existed, NULL);
}

int orch_fs_create_stamped(struct orch_client *cl, const struct orch_cred *cred,
			   uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
			   uint32_t flags, struct orch_attr *out, bool *existed,
			   struct orch_fs_stamps *st)
{
	if (existed)
		*existed = false;
	return fs_create(cl, cred, parent, name, mode, rdev, flags, NULL, out, existed, st);
}

int orch_fs_symlink(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		    const char *name, const char *target, struct orch_attr *out)
{
	/* Like symlink(2): an existing name is always -EEXIST. */
	return fs_create(cl, cred, parent, name, S_IFLNK | 0777, 0, true, target, out, NULL, NULL);
}

int orch_fs_mkdir(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		  const char *name, uint32_t mode, struct orch_attr *out)
{
	struct orch_dirent e;
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	fs_req_init(&req, ORCH_CL2SV_MKDIR, cred);
	req.parent = parent;
	error = fs_name_check(name, &req.name);
	if (error)
		return error;
	req.mode = mode;
	error = orch_client_call(cl, orch_handle_server(parent), &req, &rep);
	if (error)
		return error;
	e = rep.m.entry;
	orch_reply_release(&rep);
	return fs_entry_attr(cl, cred, parent, 0, &e, out, NULL);
}

int orch_fs_readlink(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		     char *buf, size_t buflen)
{
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	fs_req_init(&req, ORCH_CL2SV_READLINK, cred);
	req.handle = h;
	error = orch_client_call(cl, orch_handle_server(h), &req, &rep);
	if (error)
		return error;
	error = buflen ? orch_str_copy(&rep.m.target, buf, buflen) : -ENAMETOOLONG;
	orch_reply_release(&rep);
	return error;
}

int orch_fs_link(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		 uint64_t newparent, const char *newname, struct orch_attr *out)
{
	struct orch_dirent e;
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	fs_req_init(&req, ORCH_CL2SV_LINK, cred);
	req.handle = h;
	req.newparent = newparent;
	error = fs_name_check(newname, &req.name2);
	if (error)
		return error;
	error = orch_client_call(cl, orch_handle_server(newparent), &req, &rep);
	if (error)
		return error;
	e = rep.m.entry;
	orch_reply_release(&rep);
	return fs_entry_attr(cl, cred, newparent, 0, &e, out, NULL);
}

static int fs_unlink(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		     const char *name, bool dir)
{
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	fs_req_init(&req, ORCH_CL2SV_UNLINK, cred);
	req.parent = parent;
	error = fs_name_check(name, &req.name);
	if (error)
		return error;
	req.unlink_flags = dir ? ORCH_UNLINK_RMDIR : 0;
	error = orch_client_call(cl, orch_handle_server(parent), &req, &rep);
	if (error)
		return error;
	orch_reply_release(&rep);
	return 0;
}

int orch_fs_unlink(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		   const char *name)
{
	return fs_unlink(cl, cred, parent, name, false);
}

int orch_fs_rmdir(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		  const char *name)
{
	return fs_unlink(cl, cred, parent, name, true);
}

/*
 * -EINVAL if directory @dir is @start or one of its ancestors.  Walks parent
 * pointers up to the root, whose parent is itself.  Racy against a
 * concurrent rename elsewhere, as any client-side check is; the servers keep
 * the namespace consistent.
 */
static int fs_check_not_ancestor(struct orch_client *cl, const struct orch_cred *cred,
				 uint64_t dir, uint64_t start)
{
	uint64_t cur = start;

	for (int depth = 0; depth < FS_DEPTH_MAX; depth++) {
		struct orch_attr a;
		int error;

		if (cur == dir)
			return -EINVAL;
		if (cur == ORCH_ROOT_HANDLE)
			return 0;
		error = orch_fs_getattr(cl, cred, cur, &a);
		if (error)
			return error;
		if (a.parent == cur || a.parent == 0)
			return 0;
		cur = a.parent;
	}
	return -ELOOP;
}

/* Refuses moving the directory @name of @parent under @newparent, its own subtree. */
static int fs_rename_check(struct orch_client *cl, const struct orch_cred *cred,
			   uint64_t parent, const char *name, uint64_t newparent)
{
	struct orch_attr src;
	int error;

	error = orch_fs_lookup(cl, cred, parent, name, &src);
	if (error)
		return error;
	if (!S_ISDIR(src.mode))
		return 0;
	return fs_check_not_ancestor(cl, cred, src.handle, newparent);
}

int orch_fs_rename(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		   const char *name, uint64_t newparent, const char *newname,
		   uint32_t flags)
{
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	fs_req_init(&req, ORCH_CL2SV_RENAME, cred);
	req.parent = parent;
	req.newparent = newparent;
	req.rename_flags = flags;
	error = fs_name_check(name, &req.name);
	if (!error)
		error = fs_name_check(newname, &req.name2);
	if (error)
		return error;
	if (parent != newparent) {
		error = fs_rename_check(cl, cred, parent, name, newparent);
		/* An exchange also moves the target, into the old parent. */
		if (!error && (flags & RENAME_EXCHANGE))
			error = fs_rename_check(cl, cred, newparent, newname, parent);
		if (error)
			return error;
	}
	error = orch_client_call(cl, orch_handle_server(parent), &req, &rep);
	if (error)
		return error;
	orch_reply_release(&rep);
	return 0;
}

/* --- Directories ---------------------------------------------------------------------- */

/*
 * Fills the attributes the directory's server could not give (children held
 * elsewhere): all GETATTRs go out first, then all are awaited.  A child that
 * vanished meanwhile is dropped from the batch, as if it had been removed
 * before the readdir.
 */
static int fs_readdir_attrs(struct orch_client *cl, const struct orch_cred *cred,
			    struct orch_dirent *ents, uint32_t *n)
{
	struct orch_call **calls;
	uint32_t i, kept = 0;
	int error = 0;

	calls = calloc(*n ? *n : 1, sizeof(*calls));
	if (!calls)
		return -ENOMEM;
	for (i = 0; i < *n && !error; i++) {
		struct orch_msg req;

		if (ents[i].has_attr)
			continue;
		fs_req_init(&req, ORCH_CL2SV_GETATTR, cred);
		req.handle = ents[i].handle;
		error = orch_client_send(cl, orch_handle_server(ents[i].handle), &req, &calls[i]);
	}
	/* Every sent call is awaited, even after an error: wait frees it. */
	for (i = 0; i < *n; i++) {
		struct orch_reply rep;
		int rc;

		if (!calls[i]) {
			if (ents[i].has_attr)
				ents[kept++] = ents[i];
			continue;
		}
		rc = orch_client_wait(cl, calls[i], &rep);
		if (rc == 0) {
			ents[i].attr = rep.m.attr;
			ents[i].has_attr = true;
			orch_reply_release(&rep);
			ents[kept++] = ents[i];
		} else if (rc != -ENOENT && rc != -ESTALE && !error) {
			error = rc;
		}
	}
	free(calls);
	if (!error)
		*n = kept;
	return error;
}

int orch_fs_readdir(struct orch_client *cl, const struct orch_cred *cred, uint64_t dir,
		    uint64_t cookie, uint32_t max, bool plus, struct orch_dirent *out,
		    uint32_t *n, bool *eof)
{
	return orch_fs_readdir_stamped(cl, cred, dir, cookie, max, plus, out, n, eof, NULL);
}

int orch_fs_readdir_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t dir,
			    uint64_t cookie, uint32_t max, bool plus, struct orch_dirent *out,
			    uint32_t *n, bool *eof, uint64_t *stamp)
{
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	if (stamp)
		*stamp = 0;
	*n = 0;
	*eof = false;
	if (max == 0 || max > ORCH_READDIR_MAX)
		return -EINVAL;
	fs_req_init(&req, ORCH_CL2SV_READDIR, cred);
	req.handle = dir;
	req.cookie = cookie;
	req.length = max;
	req.readdir_flags = plus ? ORCH_READDIR_PLUS : 0;
	error = orch_client_call(cl, orch_handle_server(dir), &req, &rep);
	if (error)
		return error;
	if (rep.m.ndirents > max) {
		orch_reply_release(&rep);
		return -EIO;
	}
	if (rep.m.ndirents)
		memcpy(out, rep.m.dirents, rep.m.ndirents * sizeof(*out));
	*n = rep.m.ndirents;
	*eof = rep.m.eof;
	if (stamp)
		*stamp = rep.stamp;
	orch_reply_release(&rep);
	if (plus) {
		uint32_t got = *n;

		error = fs_readdir_attrs(cl, cred, out, &got);
		if (error) {
			*n = 0;
			return error;
		}
		*n = got;
	}
	return 0;
}

/* --- Whole-cluster calls ----------------------------------------------------------------- */

/*
 * Sends @req to the first @n servers whose @want is set (all of them if
 * @want is NULL), every request before waiting for any reply, then waits for
 * all of them.  @each, if given, sees every good reply.  Returns 0 or the
 * first error; every request sent is always waited for.
 */
static int fs_fanout(struct orch_client *cl, const struct orch_msg *req, const bool *want,
		     unsigned int n, void (*each)(void *arg, const struct orch_msg *rep),
		     void *arg)
{
	struct orch_call *calls[ORCH_SERVERS_MAX] = { 0 };
	int error = 0;

	n = ORCH_MIN(n, ORCH_MIN(orch_client_cfg(cl)->nservers, (unsigned int)ORCH_SERVERS_MAX));
	for (unsigned int i = 0; i < n && !error; i++)
		if (!want || want[i])
			error = orch_client_send(cl, i, req, &calls[i]);
	for (unsigned int i = 0; i < n; i++) {
		struct orch_reply rep;
		int rc;

		if (!calls[i])
			continue;
		rc = orch_client_wait(cl, calls[i], &rep);
		if (rc) {
			if (!error)
				error = rc;
			continue;
		}
		if (each)
			each(arg, &rep.m);
		orch_reply_release(&rep);
	}
	return error;
}

/*
 * Servers whose blocks share one file system of one host (host_fs) can
 * together store what their stores have free, but no more than that file
 * system gives, counted once: summing each server's own figure showed a
 * host's free space once per server.
 */
struct fs_statfs_sum {
	struct orch_statfs *out;
	uint64_t used, inodes, avail;   /* avail of servers sharing nothing */
	struct fs_statfs_grp { uint64_t fs, avail, host; } g[ORCH_SERVERS_MAX];
	unsigned int ng;
};

static void fs_statfs_add(void *arg, const struct orch_msg *rep)
{
	struct fs_statfs_sum *s = arg;
	const struct orch_statfs *r = &rep->statfs;
	unsigned int i;

	/* A server's own figures: blocks = used + bavail, files = inodes + ffree. */
	if (r->bsize != 4096)
		return;   /* the only block size servers answer */
	s->used += r->blocks - ORCH_MIN(r->bavail, r->blocks);
	s->inodes += r->files - ORCH_MIN(r->ffree, r->files);
	if (!r->host_fs) {
		s->avail += r->bavail;
		return;
	}
	for (i = 0; i < s->ng && s->g[i].fs != r->host_fs; i++)
		;
	if (i == s->ng) {
		if (s->ng == ORCH_SERVERS_MAX)
			return;
		s->g[s->ng++] = (struct fs_statfs_grp){ .fs = r->host_fs };
	}
	s->g[i].avail += r->bavail;
	/* Each has its own reserve on it: the one with the least can go furthest. */
	s->g[i].host = ORCH_MAX(s->g[i].host, r->host_bavail);
}

int orch_fs_statfs(struct orch_client *cl, const struct orch_cred *cred,
		   struct orch_statfs *out)
{
	struct fs_statfs_sum *s = calloc(1, sizeof(*s));
	struct orch_msg req;
	uint64_t avail;
	int error;

	memset(out, 0, sizeof(*out));
	if (!s)
		return -ENOMEM;
	fs_req_init(&req, ORCH_CL2SV_STATFS, cred);
	error = fs_fanout(cl, &req, NULL, ORCH_SERVERS_MAX, fs_statfs_add, s);
	avail = s->avail;
	for (unsigned int i = 0; i < s->ng; i++)
		avail += ORCH_MIN(s->g[i].avail, s->g[i].host);
	*out = (struct orch_statfs){
		.bsize = 4096,
		.blocks = s->used + avail,
		.bfree = avail,
		.bavail = avail,
		.files = s->inodes + avail,
		.ffree = avail,
		.namemax = ORCH_NAME_MAX,
	};
	free(s);
	return error;
}

/* --- Data ------------------------------------------------------------------------------- */

/* One request of striped I/O: a run of the file held contiguously by one server. */
struct fs_piece {
	unsigned int server;
	uint64_t local_off;
	uint8_t *buf;        /* into the caller's buffer */
	uint32_t len;
	struct orch_call *call;
};

/*
 * Cuts [@off, @off + @len) into at most FS_IO_BATCH pieces, strip by strip,
 * merging neighbours that are contiguous in the same server's object
 * (stripe_count 1), never over ORCH_IO_MAX.  Returns the pieces made; they
 * cover *@done bytes.
 */
static size_t fs_io_split(const struct orch_layout *l, uint64_t off, uint8_t *buf,
			  size_t len, struct fs_piece *pc, size_t *done)
{
	size_t np = 0, pos = 0;

	while (pos < len) {
		struct orch_layout_pos lp;
		uint64_t n;

		orch_layout_locate(l, off + pos, &lp);
		n = ORCH_MIN(lp.run, (uint64_t)(len - pos));
		n = ORCH_MIN(n, (uint64_t)ORCH_IO_MAX);
		if (np && pc[np - 1].server == lp.server &&
		    pc[np - 1].local_off + pc[np - 1].len == lp.local_off &&
		    pc[np - 1].len < ORCH_IO_MAX) {
			n = ORCH_MIN(n, (uint64_t)(ORCH_IO_MAX - pc[np - 1].len));
			pc[np - 1].len += (uint32_t)n;
		} else {
			if (np == FS_IO_BATCH)
				break;
			pc[np++] = (struct fs_piece){
				.server = lp.server,
				.local_off = lp.local_off,
				.buf = buf + pos,
				.len = (uint32_t)n,
			};
		}
		pos += n;
	}
	*done = pos;
	return np;
}

/* One batch of READs: all sent, then all awaited (even after an error). */
static int fs_read_batch(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			 struct fs_piece *pc, size_t np)
{
	int error = 0;

	for (size_t i = 0; i < np && !error; i++) {
		struct orch_msg req;

		fs_req_init(&req, ORCH_CL2SV_READ, cred);
		req.handle = h;
		req.offset = pc[i].local_off;
		req.length = pc[i].len;
		error = orch_client_send(cl, pc[i].server, &req, &pc[i].call);
	}
	for (size_t i = 0; i < np; i++) {
		struct orch_reply rep;
		int rc;

		if (!pc[i].call)
			continue;
		rc = orch_client_wait(cl, pc[i].call, &rep);
		pc[i].call = NULL;
		if (!rc) {
			/* Short past the end of that server's object: the rest is a hole. */
			if (rep.m.data.len > pc[i].len) {
				rc = -EIO;
			} else {
				if (rep.m.data.len)
					memcpy(pc[i].buf, rep.m.data.s, rep.m.data.len);
				memset(pc[i].buf + rep.m.data.len, 0,
				       pc[i].len - rep.m.data.len);
			}
		}
		orch_reply_release(&rep); /* zeroed by wait when it failed */
		if (rc && !error)
			error = rc;
	}
	return error;
}

int orch_fs_read(struct orch_client *cl, const struct orch_cred *cred,
		 const struct orch_attr *a, uint64_t off, void *buf, size_t len,
		 size_t *got)
{
	struct fs_piece pc[FS_IO_BATCH];
	uint8_t *p = buf;
	size_t left;

	*got = 0;
	if (!orch_layout_is_valid(&a->layout))
		return -EINVAL;
	if (off >= a->size)
		return 0;
	len = (size_t)ORCH_MIN((uint64_t)len, a->size - off);
	for (left = len; left;) {
		size_t done, np;
		int error;

		np = fs_io_split(&a->layout, off, p, left, pc, &done);
		error = fs_read_batch(cl, cred, a->handle, pc, np);
		if (error)
			return error;
		off += done;
		p += done;
		left -= done;
	}
	*got = len;
	return 0;
}

/* A write in flight: its WRITE requests, and the server of each. */
struct orch_fs_wio {
	size_t n, cap;
	struct orch_call **calls;
	unsigned int *servers;
};

int orch_fs_write_sent(const struct orch_fs_wio *w, struct orch_fs_sent **out, size_t *n)
{
	struct orch_fs_sent *v = malloc((w->n ? w->n : 1) * sizeof(*v));

	*out = v;
	*n = 0;
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < w->n; i++) {
		struct orch_fs_sent s = { .server = w->servers[i],
					  .gen = orch_client_call_gen(w->calls[i]) };
		bool seen = false;

		/* A write covers a few servers: the quadratic scan is short. */
		for (size_t j = 0; j < *n && !seen; j++)
			seen = v[j].server == s.server && v[j].gen == s.gen;
		if (!seen)
			v[(*n)++] = s;
	}
	return 0;
}

int orch_fs_write_wait(struct orch_client *cl, struct orch_fs_wio *w)
{
	int error = 0;

	for (size_t i = 0; i < w->n; i++) {
		struct orch_reply rep;
		int rc = orch_client_wait(cl, w->calls[i], &rep);

		orch_reply_release(&rep);
		if (rc && !error)
			error = rc;
	}
	free(w->servers);
	free(w->calls);
	free(w);
	return error;
}

/*
 * Sends one WRITE at @local_off of @server's object, its data the @n
 * buffers of @iov (at most ORCH_CLIENT_IOV_MAX, ORCH_IO_MAX bytes).
 */
static int fs_write_send_one(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			     unsigned int server, uint64_t local_off, const struct iovec *iov,
			     int n, struct orch_fs_wio *w)
{
	struct orch_msg req;
	int error;

	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 8;
		struct orch_call **v = realloc(w->calls, cap * sizeof(*v));
		unsigned int *sv;

		if (!v)
			return -ENOMEM;
		w->calls = v;
		sv = realloc(w->servers, cap * sizeof(*sv));
		if (!sv)
			return -ENOMEM;
		w->servers = sv;
		w->cap = cap;
	}
	fs_req_init(&req, ORCH_CL2SV_WRITE, cred);
	req.handle = h;
	req.offset = local_off;
	error = orch_client_send_iov(cl, server, &req, iov, n, &w->calls[w->n]);
	if (!error)
		w->servers[w->n++] = server;
	return error;
}

/* One server's share of a chunk of a write: its pieces, in its object's order. */
struct fs_share {
	unsigned int server;
	uint64_t local_off;   /* of its first byte */
	int npieces;
	struct iovec *iov;    /* npieces of them, into the caller's buffer */
};

/*
 * A range of a file is contiguous in each server's object (a server's
 * strips follow each other there), so a chunk of at most ORCH_IO_MAX bytes
 * is one WRITE per server, its strips sent from the caller's buffer one
 * after the other (orch_client_send_iov), rather than one WRITE per strip:
 * fewer frames and store operations, larger extents, and no copy.
 */
static int fs_write_chunk(struct orch_client *cl, const struct orch_cred *cred,
			  const struct orch_attr *a, uint64_t off, const uint8_t *buf,
			  size_t len, struct orch_fs_wio *w)
{
	const struct orch_layout *l = &a->layout;
	size_t cap = ORCH_MIN((size_t)l->stripe_count, len / l->strip_size + 2);
	size_t maxpieces = len / l->strip_size + 2, used = 0, ns = 0;
	struct fs_share *sh = calloc(cap, sizeof(*sh));
	struct iovec *iov = calloc(maxpieces, sizeof(*iov));
	struct orch_layout_pos lp;
	int error = sh && iov ? 0 : -ENOMEM;

	/* Pass 1 counts each server's pieces; pass 2 places them. */
	for (int pass = 0; pass < 2 && !error; pass++) {
		for (size_t pos = 0, n, i; pos < len && !error; pos += n) {
			orch_layout_locate(l, off + pos, &lp);
			n = (size_t)ORCH_MIN(lp.run, (uint64_t)(len - pos));
			for (i = 0; i < ns && sh[i].server != lp.server; i++)
				;
			if (pass == 1) {
				sh[i].iov[sh[i].npieces++] = (struct iovec){
					.iov_base = (void *)(uintptr_t)(buf + pos), .iov_len = n };
				continue;
			}
			if (i == ns) {
				if (ns == cap) {
					error = -EINVAL;   /* cannot happen: at most cap servers */
					break;
				}
				sh[ns++] = (struct fs_share){ .server = lp.server,
							      .local_off = lp.local_off };
			}
			sh[i].npieces++;
		}
		for (size_t i = 0; pass == 0 && i < ns && !error; i++) {
			if (used + (size_t)sh[i].npieces > maxpieces) {
				error = -EINVAL;   /* cannot happen: len / strip + 2 pieces */
				break;
			}
			sh[i].iov = iov + used;
			used += (size_t)sh[i].npieces;
			sh[i].npieces = 0;
		}
	}
	for (size_t i = 0; i < ns && !error; i++) {
		uint64_t at = sh[i].local_off;

		for (int k = 0, n; k < sh[i].npieces && !error; k += n) {
			n = ORCH_MIN(sh[i].npieces - k, ORCH_CLIENT_IOV_MAX);
			error = fs_write_send_one(cl, cred, a->handle, sh[i].server, at,
						  sh[i].iov + k, n, w);
			for (int j = k; j < k + n; j++)
				at += sh[i].iov[j].iov_len;
		}
	}
	free(iov);
	free(sh);
	return error;
}

int orch_fs_write_send(struct orch_client *cl, const struct orch_cred *cred,
		       const struct orch_attr *a, uint64_t off, const void *buf, size_t len,
		       struct orch_fs_wio **out)
{
	struct orch_fs_wio *w;
	int error = 0;

	*out = NULL;
	if (!orch_layout_is_valid(&a->layout))
		return -EINVAL;
	if (off > UINT64_MAX - len)
		return -EFBIG;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	for (size_t at = 0, n; at < len && !error; at += n) {
		n = ORCH_MIN(len - at, (size_t)ORCH_IO_MAX);
		error = fs_write_chunk(cl, cred, a, off + at, (const uint8_t *)buf + at, n, w);
	}
	if (error) {
		orch_fs_write_wait(cl, w);   /* what was sent is waited for */
		return error;
	}
	*out = w;
	return 0;
}

int orch_fs_write(struct orch_client *cl, const struct orch_cred *cred,
		  const struct orch_attr *a, uint64_t off, const void *buf, size_t len)
{
	struct orch_fs_wio *w;
	int error = orch_fs_write_send(cl, cred, a, off, buf, len, &w);

	return error ? error : orch_fs_write_wait(cl, w);
}

/* What one COPY_RANGE fan-out covers; the servers refuse more. */
#define FS_COPY_CHUNK (64ull << 20)

/*
 * A request about two regular files (copy, dedupe): checks their types and
 * layouts and names both in @req.
 */
static int fs_pair_req_init(struct orch_msg *req, uint16_t type, const struct orch_cred *cred,
			    const struct orch_attr *src, const struct orch_attr *dst)
{
	if (!S_ISREG(src->mode) || !S_ISREG(dst->mode))
		return S_ISDIR(src->mode) || S_ISDIR(dst->mode) ? -EISDIR : -EINVAL;
	if (!orch_layout_is_valid(&src->layout) || !orch_layout_is_valid(&dst->layout))
		return -EINVAL;
	fs_req_init(req, type, cred);
	req->handle = src->handle;
	req->layout = src->layout;
	req->handle2 = dst->handle;
	req->layout2 = dst->layout;
	return 0;
}

int orch_fs_copy_range(struct orch_client *cl, const struct orch_cred *cred,
		       const struct orch_attr *src, uint64_t off_in,
		       const struct orch_attr *dst, uint64_t off_out, uint64_t len,
		       uint64_t *copied)
{
	struct orch_msg req;
	int error = 0;

	*copied = 0;
	error = fs_pair_req_init(&req, ORCH_CL2SV_COPY_RANGE, cred, src, dst);
	if (error || off_in >= src->size)
		return error;
	len = ORCH_MIN(len, src->size - off_in);
	if (off_out + len < off_out)
		return -EFBIG;
	while (*copied < len && !error) {
		uint64_t n = ORCH_MIN(len - *copied, FS_COPY_CHUNK);

		req.offset = off_in + *copied;
		req.offset2 = off_out + *copied;
		req.size = n;
		/* Every server of the source's layout copies the strips it holds. */
		error = fs_fanout(cl, &req, NULL, src->layout.stripe_count, NULL, NULL);
		if (!error)
			*copied += n;
	}
	return error;
}

static void fs_size_add(void *arg, const struct orch_msg *rep)
{
	*(uint64_t *)arg += rep->size;
}

/* Sets @want[i] for every server of @l holding a byte of [@off, @off + @len). */
static void fs_range_servers(const struct orch_layout *l, uint64_t off, uint64_t len,
			     bool want[ORCH_SERVERS_MAX])
{
	struct orch_layout_pos p;

	memset(want, 0, ORCH_SERVERS_MAX * sizeof(*want));
	/* A whole row or more touches them all: at most stripe_count strips to walk. */
	for (unsigned int i = 0; len && i < l->stripe_count; i++) {
		orch_layout_locate(l, off, &p);
		if (p.server < ORCH_SERVERS_MAX)
			want[p.server] = true;
		off += ORCH_MIN(p.run, len);
		len -= ORCH_MIN(p.run, len);
	}
}

/*
 * One DEDUPE fan-out per chunk, to the servers holding part of the source
 * range: a piece is served where its source lies (a block-sized dedupe
 * from `orchard dedupe --scan` costs one request, not one per server).
 */
static int fs_dedupe_pass(struct orch_client *cl, struct orch_msg *req, const struct orch_attr *src,
			  uint64_t off_in, uint64_t off_out, uint64_t len, uint64_t *done)
{
	bool want[ORCH_SERVERS_MAX];
	int error = 0;

	for (uint64_t at = 0; at < len && !error; at += FS_COPY_CHUNK) {
		req->offset = off_in + at;
		req->offset2 = off_out + at;
		req->size = ORCH_MIN(len - at, FS_COPY_CHUNK);
		fs_range_servers(&src->layout, req->offset, req->size, want);
		error = fs_fanout(cl, req, want, src->layout.stripe_count, fs_size_add, done);
	}
	return error;
}

int orch_fs_dedupe(struct orch_client *cl, const struct orch_cred *cred,
		   const struct orch_attr *src, uint64_t off_in,
		   const struct orch_attr *dst, uint64_t off_out, uint64_t len,
		   uint64_t *deduped)
{
	struct orch_msg req;
	uint64_t equal = 0;
	int error;

	*deduped = 0;
	error = fs_pair_req_init(&req, ORCH_CL2SV_DEDUPE, cred, src, dst);
	if (error)
		return error;
	if (off_in > src->size || len > src->size - off_in || off_out > dst->size ||
	    len > dst->size - off_out)
		return -EINVAL;
	req.dedupe_flags = ORCH_DEDUPE_COMPARE;
	error = fs_dedupe_pass(cl, &req, src, off_in, off_out, len, &equal);
	if (error)
		return error;
	/* A piece the layouts put on two servers could neither be compared nor shared. */
	if (equal != len)
		return -EXDEV;
	req.dedupe_flags = 0;
	return fs_dedupe_pass(cl, &req, src, off_in, off_out, len, deduped);
}

/* EXTEND or WRITERS (whose flags EXTEND does not carry): size and mtime to @h's server. */
static int fs_size_call(struct orch_client *cl, const struct orch_cred *cred, uint16_t type,
			uint64_t h, uint32_t flags, uint64_t size, int64_t mtime_ns,
			struct orch_attr *out, uint64_t *stamp, uint64_t *gen)
{
	struct orch_msg req;

	fs_req_init(&req, type, cred);
	req.handle = h;
	req.writers_flags = flags;
	req.size = size;
	req.time_ns = mtime_ns;
	return fs_attr_call_gen(cl, &req, out, stamp, gen);
}

int orch_fs_extend_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			   uint64_t size, int64_t mtime_ns, struct orch_attr *out,
			   uint64_t *stamp)
{
	return fs_size_call(cl, cred, ORCH_CL2SV_EXTEND, h, 0, size, mtime_ns, out, stamp, NULL);
}

int orch_fs_extend(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		   uint64_t size, int64_t mtime_ns, struct orch_attr *out)
{
	return orch_fs_extend_stamped(cl, cred, h, size, mtime_ns, out, NULL);
}

int orch_fs_writers_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			    uint32_t flags, uint64_t size, int64_t mtime_ns,
			    struct orch_attr *out, uint64_t *gen, uint64_t *stamp)
{
	return fs_size_call(cl, cred, ORCH_CL2SV_WRITERS, h, flags, size, mtime_ns, out, stamp,
			    gen);
}

int orch_fs_writers(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		    uint32_t flags, uint64_t size, int64_t mtime_ns, struct orch_attr *out,
		    uint64_t *gen)
{
	return orch_fs_writers_stamped(cl, cred, h, flags, size, mtime_ns, out, gen, NULL);
}

int orch_fs_writers_many(struct orch_client *cl, const struct orch_cred *cred, uint32_t flags,
			 const uint64_t *hs, size_t n, int *errors, uint64_t *gens)
{
	struct orch_call *calls[ORCH_FS_WRITERS_MANY];
	struct orch_msg req;

	if (n > ORCH_FS_WRITERS_MANY)
		return -EINVAL;
	fs_req_init(&req, ORCH_CL2SV_WRITERS, cred);
	req.writers_flags = flags;
	for (size_t i = 0; i < n; i++) {
		req.handle = hs[i];
		gens[i] = 0;
		errors[i] = orch_client_send(cl, orch_handle_server(hs[i]), &req, &calls[i]);
	}
	for (size_t i = 0; i < n; i++) {
		struct orch_reply rep;

		if (errors[i])
			continue;
		errors[i] = orch_client_wait(cl, calls[i], &rep);
		gens[i] = rep.gen;
		if (!errors[i])
			orch_reply_release(&rep);
	}
	return 0;
}

int orch_fs_writer_release(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			   uint64_t size, int64_t mtime_ns, struct orch_attr *out)
{
	int error = orch_fs_writers(cl, cred, h, ORCH_WRITERS_RELEASE, size, mtime_ns, out, NULL);

	if (error == -ENOSYS)
		error = size || out ? orch_fs_extend(cl, cred, h, size, mtime_ns, out) : 0;
	return error;
}

/*
 * A file's data may sit on every server of its layout (servers 0 ..
 * stripe_count-1, strip 0 on the inode's own server), so each is asked in
 * parallel; anything else lives on its inode's server only.
 */
static void fs_allocated_add(void *arg, const struct orch_msg *rep)
{
	*(uint64_t *)arg += rep->size;
}

int orch_fs_allocated(struct orch_client *cl, const struct orch_cred *cred,
		      const struct orch_attr *a, uint64_t size, uint64_t *out)
{
	bool want[ORCH_SERVERS_MAX] = { false };
	struct orch_msg req;
	bool any = false;

	*out = 0;
	if (!S_ISREG(a->mode) || !orch_layout_is_valid(&a->layout))
		return 0;
	for (unsigned int i = 0; i < a->layout.stripe_count && i < ORCH_SERVERS_MAX; i++) {
		want[i] = orch_layout_local_size(&a->layout, size, i) > 0;
		any |= want[i];
	}
	if (!any)
		return 0;
	fs_req_init(&req, ORCH_CL2SV_ALLOCATED, cred);
	req.handle = a->handle;
	return fs_fanout(cl, &req, want, a->layout.stripe_count, fs_allocated_add, out);
}

int orch_fs_punch(struct orch_client *cl, const struct orch_cred *cred,
		  const struct orch_attr *a, uint64_t off, uint64_t len)
{
	struct orch_msg req;

	if (!S_ISREG(a->mode))
		return S_ISDIR(a->mode) ? -EISDIR : -ENODEV;
	if (!orch_layout_is_valid(&a->layout))
		return -EINVAL;
	if (off >= a->size || !len)
		return 0;
	len = ORCH_MIN(len, a->size - off); /* nothing lies past the size */
	fs_req_init(&req, ORCH_CL2SV_PUNCH, cred);
	req.handle = a->handle;
	req.layout = a->layout;
	req.offset = off;
	req.size = len;
	return fs_fanout(cl, &req, NULL, a->layout.stripe_count, NULL, NULL);
}

int orch_fs_fsync(struct orch_client *cl, const struct orch_cred *cred,
		  const struct orch_attr *a, bool datasync, uint64_t servers)
{
	bool want[ORCH_SERVERS_MAX] = { false };
	unsigned int home = orch_handle_server(a->handle);
	unsigned int nservers = orch_client_cfg(cl)->nservers;
	struct orch_msg req;

	if (home >= ORCH_SERVERS_MAX)
		return -EINVAL;
	want[home] = true;
	if (S_ISREG(a->mode) && orch_layout_is_valid(&a->layout)) {
		for (unsigned int i = 0; i < a->layout.stripe_count; i++) {
			if (i >= nservers)
				return -EINVAL;
			want[i] |= (servers >> (i < 63 ? i : 63)) & 1;
		}
	}
	fs_req_init(&req, ORCH_CL2SV_FSYNC, cred);
	req.handle = a->handle;
	req.fsync_flags = datasync ? ORCH_FSYNC_DATASYNC : 0;
	return fs_fanout(cl, &req, want, ORCH_SERVERS_MAX, NULL, NULL);
}

/* --- Extended attributes and access ------------------------------------------------------- */

/* GETXATTR and LISTXATTR share their reply: the full size, and the value if it fits. */
static int fs_xattr_get(struct orch_client *cl, struct orch_msg *req, void *buf,
			size_t buflen, size_t *len)
{
	struct orch_reply rep;
	int error;

	*len = 0;
	req->length = (uint32_t)ORCH_MIN(buflen, (size_t)ORCH_IO_MAX);
	error = orch_client_call(cl, orch_handle_server(req->handle), req, &rep);
	if (error)
		return error;
	if (buflen == 0) {
		*len = rep.m.size;
	} else if (rep.m.size > buflen || rep.m.data.len > buflen) {
		error = -ERANGE;
	} else {
		if (rep.m.data.len)
			memcpy(buf, rep.m.data.s, rep.m.data.len);
		*len = rep.m.data.len;
	}
	orch_reply_release(&rep);
	return error;
}

int orch_fs_getxattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		     const char *name, void *buf, size_t buflen, size_t *len)
{
	struct orch_msg req;
	int error;

	*len = 0;
	fs_req_init(&req, ORCH_CL2SV_GETXATTR, cred);
	req.handle = h;
	error = fs_xname_check(name, &req.xname);
	if (error)
		return error;
	return fs_xattr_get(cl, &req, buf, buflen, len);
}

int orch_fs_listxattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		      char *buf, size_t buflen, size_t *len)
{
	struct orch_msg req;

	fs_req_init(&req, ORCH_CL2SV_LISTXATTR, cred);
	req.handle = h;
	return fs_xattr_get(cl, &req, buf, buflen, len);
}

int orch_fs_setxattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		     const char *name, const void *val, size_t len, int flags)
{
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	fs_req_init(&req, ORCH_CL2SV_SETXATTR, cred);
	req.handle = h;
	error = fs_xname_check(name, &req.xname);
	if (error)
		return error;
	if (len > ORCH_XATTR_SIZE_MAX)
		return -E2BIG;
	req.xattr_flags = (uint32_t)flags;
	req.data = orch_str_of(val, len);
	error = orch_client_call(cl, orch_handle_server(h), &req, &rep);
	if (error)
		return error;
	orch_reply_release(&rep);
	return 0;
}

int orch_fs_removexattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			const char *name)
{
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	fs_req_init(&req, ORCH_CL2SV_REMOVEXATTR, cred);
	req.handle = h;
	error = fs_xname_check(name, &req.xname);
	if (error)
		return error;
	error = orch_client_call(cl, orch_handle_server(h), &req, &rep);
	if (error)
		return error;
	orch_reply_release(&rep);
	return 0;
}

int orch_fs_access(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		   uint32_t mask)
{
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	fs_req_init(&req, ORCH_CL2SV_ACCESS, cred);
	req.handle = h;
	req.mode = mask;
	error = orch_client_call(cl, orch_handle_server(h), &req, &rep);
	if (error)
		return error;
	orch_reply_release(&rep);
	return 0;
}

/* --- Path resolution ------------------------------------------------------------------------ */

/*
 * Walks @path (absolute) component by component from the root.  The part
 * still to walk lives in @rest; a symlink met on the way is spliced in front
 * of it (its target, then "/", then what followed), restarting at the root
 * for an absolute target.  The last component's symlink is followed only if
 * @follow, or if a trailing slash asks for a directory.
 */
int orch_fs_resolve(struct orch_client *cl, const struct orch_cred *cred,
		    const char *path, bool follow, struct orch_attr *out)
{
	char rest[ORCH_PATH_MAX + 1], tmp[ORCH_PATH_MAX + 1], target[ORCH_PATH_MAX + 1];
	char comp[ORCH_NAME_MAX + 1];
	struct orch_attr cur;
	size_t plen = strlen(path);
	bool want_dir = false;
	int links = 0, error;
	char *p;

	if (path[0] != '/')
		return -EINVAL;
	if (plen > ORCH_PATH_MAX)
		return -ENAMETOOLONG;
	memcpy(rest, path, plen + 1);
	error = orch_fs_getattr(cl, cred, ORCH_ROOT_HANDLE, &cur);
	if (error)
		return error;

	p = rest;
	for (;;) {
		size_t n;
		char *next;
		bool last;
		struct orch_attr child;

		while (*p == '/')
			p++;
		if (!*p)
			break;
		n = strcspn(p, "/");
		if (n > ORCH_NAME_MAX)
			return -ENAMETOOLONG;
		memcpy(comp, p, n);
		comp[n] = '\0';
		next = p + n;
		while (*next == '/')
			next++;
		last = !*next;
		if (last && p[n] == '/')
			want_dir = true;

		if (!S_ISDIR(cur.mode))
			return -ENOTDIR;
		if (strcmp(comp, ".") == 0) {
			p = next;
			continue;
		}
		if (strcmp(comp, "..") == 0) {
			if (cur.handle != ORCH_ROOT_HANDLE && cur.parent != cur.handle) {
				error = orch_fs_getattr(cl, cred, cur.parent, &cur);
				if (error)
					return error;
			}
			p = next;
			continue;
		}
		error = orch_fs_lookup(cl, cred, cur.handle, comp, &child);
		if (error)
			return error;
		if (S_ISLNK(child.mode) && (!last || follow || want_dir)) {
			size_t tlen, nlen = strlen(next);
			int w;

			if (++links > FS_SYMLOOP_MAX)
				return -ELOOP;
			error = orch_fs_readlink(cl, cred, child.handle, target, sizeof(target));
			if (error)
				return error;
			tlen = strlen(target);
			if (tlen == 0)
				return -ENOENT;
			if (nlen)
				w = snprintf(tmp, sizeof(tmp), "%s/%s", target, next);
			else if (want_dir)
				w = snprintf(tmp, sizeof(tmp), "%s/", target);
			else
				w = snprintf(tmp, sizeof(tmp), "%s", target);
			if (w < 0 || (size_t)w >= sizeof(tmp))
				return -ENAMETOOLONG;
			memcpy(rest, tmp, (size_t)w + 1);
			p = rest;
			want_dir = false;
			if (target[0] == '/') {
				error = orch_fs_getattr(cl, cred, ORCH_ROOT_HANDLE, &cur);
				if (error)
					return error;
			}
			continue;
		}
		cur = child;
		p = next;
	}
	if (want_dir && !S_ISDIR(cur.mode))
		return -ENOTDIR;
	*out = cur;
	return 0;
}

int orch_fs_resolve_parent(struct orch_client *cl, const struct orch_cred *cred,
			   const char *path, struct orch_attr *parent,
			   char name[ORCH_NAME_MAX + 1])
{
	char dir[ORCH_PATH_MAX + 1];
	size_t end = strlen(path), start;
	int error;

	if (path[0] != '/')
		return -EINVAL;
	if (end > ORCH_PATH_MAX)
		return -ENAMETOOLONG;
	while (end > 0 && path[end - 1] == '/')
		end--;
	if (end == 0)
		return -EINVAL; /* "/" has no parent entry */
	start = end;
	while (start > 0 && path[start - 1] != '/')
		start--;
	if (end - start > ORCH_NAME_MAX)
		return -ENAMETOOLONG;
	if ((end - start == 1 && path[start] == '.') ||
	    (end - start == 2 && path[start] == '.' && path[start + 1] == '.'))
		return -EINVAL;
	memcpy(dir, path, start);
	dir[start] = '\0';
	error = orch_fs_resolve(cl, cred, dir, true, parent);
	if (error)
		return error;
	if (!S_ISDIR(parent->mode))
		return -ENOTDIR;
	memcpy(name, path + start, end - start);
	name[end - start] = '\0';
	return 0;
}
