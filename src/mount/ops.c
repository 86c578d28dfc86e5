/*
 * FUSE handlers for the namespace, attributes, xattrs and statfs, and the
 * helpers the other handler files share.  Each handler asks liborchard and
 * replies once, at its single exit.
 *
 * Caching (docs/DESIGN.md, "Client caching"): every entry and attribute
 * reply carries entry_timeout = dcache_timeout_ms and attr_timeout =
 * getattr_timeout_ms, read from the knobs at reply time so a change on a
 * live mount applies to the next reply.  In coherent mode (the coherent
 * knob; docs/DESIGN.md, "Coherent mode") an answer the lease cache holds
 * under a lease is kept by the kernel until that lease ends instead:
 * every change of it before then is pushed and dropped from the kernel
 * before the change returns.  The kernel keeps the cache; when
 * it asks again, this process answers from its lease cache (lcache.c) what
 * a server leased to it, and asks the server otherwise.  The kernel also
 * drops the parents' attributes after create, unlink, rename and link, and
 * the renamed inode's.
 */
#include "mount/mount_i.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>

#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "proto/perm.h"

/* --- Shared helpers ------------------------------------------------------------ */

/*
 * Reading the supplementary groups costs a read of /proc/PID/status per
 * request, so it is skipped for uid 0: the servers grant root every check
 * that the groups could decide (as Linux does).
 */
void orch_mnt_cred(fuse_req_t req, struct orch_cred *out)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	gid_t groups[ORCH_GROUPS_MAX];
	int n;

	out->uid = (uint32_t)ctx->uid;
	out->gid = (uint32_t)ctx->gid;
	out->ngroups = 0;
	if (ctx->uid == 0)
		return;
	n = fuse_req_getgroups(req, ORCH_GROUPS_MAX, groups);
	/* More than ORCH_GROUPS_MAX: the first ones are sent, as orch_fs_cred_self does. */
	for (int i = 0; i < n && i < ORCH_GROUPS_MAX; i++)
		out->groups[out->ngroups++] = (uint32_t)groups[i];
}

void orch_mnt_reply_err(fuse_req_t req, int error)
{
	switch (error) {
	case -EHOSTDOWN:
	case -ECONNREFUSED:
	case -ECONNRESET:
	case -ENOTCONN:
	case -EPIPE:
	case -EPROTO:
		error = -EIO;
		break;
	}
	if (error)
		orch_mnt_count_error(orch_mnt_of(req), error);
	fuse_reply_err(req, -error);
}

/* @a as struct stat (@a as reported: see orch_mnt_inode.i_wend, i_wmtime_ns). */
static void orch_mnt_attr_to_stat(const struct orch_attr *a, struct stat *st)
{
	uint64_t size = a->size;

	memset(st, 0, sizeof(*st));
	st->st_ino = a->handle;
	st->st_mode = a->mode;
	st->st_nlink = a->nlink;
	st->st_uid = a->uid;
	st->st_gid = a->gid;
	st->st_rdev = a->rdev;
	st->st_size = (off_t)size;
	/* What the size would need; mnt_stat puts the servers' count in its place. */
	st->st_blocks = (blkcnt_t)((size + 511) / 512);
	/* A whole strip per request suits the striped I/O path. */
	st->st_blksize = a->layout.strip_size ? (blksize_t)a->layout.strip_size : 4096;
	st->st_atim.tv_sec = a->atime_ns / 1000000000;
	st->st_atim.tv_nsec = a->atime_ns % 1000000000;
	st->st_mtim.tv_sec = a->mtime_ns / 1000000000;
	st->st_mtim.tv_nsec = a->mtime_ns % 1000000000;
	st->st_ctim.tv_sec = a->ctime_ns / 1000000000;
	st->st_ctim.tv_nsec = a->ctime_ns % 1000000000;
}

static double mnt_timeout(_Atomic uint32_t *knob)
{
	return atomic_load(knob) / 1000.0;
}

/*
 * How long the kernel may keep an answer leased until @until (monotonic
 * ms; 0: not leased).  In coherent mode (with leases), to that time, and
 * not at all if it is not leased: nothing would tell the kernel it
 * changed, so it asks again at its next use (the lease cache or a server
 * answers, with a lease).  Else for @knob's time.
 */
static double mnt_keep(struct orch_mnt *m, uint64_t until, _Atomic uint32_t *knob)
{
	uint64_t now;

	if (!atomic_load(&m->m_coherent) || !m->m_lc.l_on)
		return mnt_timeout(knob);
	now = orch_time_now_ms();
	return until > now ? (double)(until - now) / 1000.0 : 0;
}

/*
 * The stat of reported attributes @a and how long the kernel may keep it
 * (@until: as mnt_keep).  st_blocks of a regular file is what the servers
 * hold (docs/DESIGN.md, "Allocated blocks"): the count the inode table
 * keeps for these very attributes, or, not known, an estimate from the
 * size that the kernel must not keep (timeout 0), so that its next stat
 * asks GETATTR, which counts (mnt_getattr).  An empty file holds none.
 */
static double mnt_stat(struct orch_mnt *m, const struct orch_attr *a, struct stat *st,
		       uint64_t until)
{
	uint64_t blocks;

	orch_mnt_attr_to_stat(a, st);
	if (S_ISREG(a->mode) && a->size) {
		if (!orch_mnt_inode_blocks(&m->m_itab, a, &blocks))
			return 0;
		st->st_blocks = (blkcnt_t)blocks;
	} else if (S_ISREG(a->mode)) {
		st->st_blocks = 0;
	}
	return mnt_keep(m, until, &m->m_getattr_timeout_ms);
}

void orch_mnt_entry_param(struct orch_mnt *m, const struct orch_attr *a,
			  struct fuse_entry_param *e, uint64_t entry_until, uint64_t attr_until)
{
	memset(e, 0, sizeof(*e));
	e->ino = a->handle;
	e->generation = 0;
	e->attr_timeout = mnt_stat(m, a, &e->attr, attr_until);
	e->entry_timeout = mnt_keep(m, entry_until, &m->m_dcache_timeout_ms);
}

/*
 * An entry reply whose name is leased until @entry_until and attributes
 * until @attr_until (as mnt_keep).  The attributes of an inode the kernel
 * does not hold yet count as not leased: a push for it that comes before
 * the kernel has made the inode finds nothing to drop, and the kernel
 * would keep the old attributes to the lease's end.  Once it holds the
 * inode, an invalidation also makes it ignore an answer older than itself
 * (the kernel's attr_version).
 */
static int mnt_reply_entry_until(fuse_req_t req, const struct orch_attr *a, uint64_t asked,
				 struct fuse_file_info *fi, uint64_t oreg_gen,
				 uint64_t entry_until, uint64_t attr_until)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct fuse_entry_param e;
	struct orch_attr rep;
	bool known;
	int rc;

	/* Counted before the reply, so a FORGET racing the reply finds it. */
	if (orch_mnt_inode_get(&m->m_itab, a, asked, &rep, &known)) {
		fuse_reply_err(req, ENOMEM);
		return -ENOMEM;
	}
	/*
	 * CREATE opens a file: counted before the reply too, or a close and
	 * its RELEASE could come first and the count never drop back.
	 */
	if (fi)
		orch_mnt_inode_opened(&m->m_itab, a->handle, oreg_gen);
	orch_mnt_entry_param(m, &rep, &e, entry_until, known ? attr_until : 0);
	rc = fi ? fuse_reply_create(req, &e, fi) : fuse_reply_entry(req, &e);
	/* An interrupted request: the kernel never took the reference. */
	if (rc) {
		uint64_t gen;

		/* The caller releases the server's registration (a new file's is the CREATE's). */
		if (fi)
			orch_mnt_inode_released(&m->m_itab, a->handle, &gen);
		orch_mnt_inode_forget(&m->m_itab, a->handle, 1);
	}
	return rc ? -ENOENT : 0;
}

uint64_t orch_mnt_name_until(struct orch_mnt *m, uint64_t parent, const char *name,
			     uint64_t credkey)
{
	uint64_t gen = orch_mnt_knames_gen(&m->m_knames, parent);
	uint64_t until = orch_mnt_lc_name_until(&m->m_lc, parent, name, credkey);
	bool doomed = false;

	if (until && !orch_mnt_knames_note(&m->m_knames, parent, name, until, gen, &doomed))
		until = 0;
	/* Its expiry waits for the directory lock this request holds: after the reply. */
	if (doomed)
		orch_mnt_kinval_wake(m);
	return until;
}

int orch_mnt_reply_entry(fuse_req_t req, const struct orch_attr *a, uint64_t asked,
			 struct fuse_file_info *fi, uint64_t oreg_gen)
{
	return mnt_reply_entry_until(req, a, asked, fi, oreg_gen, 0, 0);
}

int orch_mnt_reply_entry_named(fuse_req_t req, uint64_t parent, const char *name,
			       uint64_t credkey, const struct orch_attr *a, uint64_t asked,
			       struct fuse_file_info *fi, uint64_t oreg_gen)
{
	struct orch_mnt *m = orch_mnt_of(req);
	uint64_t entry_until = 0, attr_until = 0;

	if (atomic_load(&m->m_coherent)) {
		entry_until = orch_mnt_name_until(m, parent, name, credkey);
		attr_until = orch_mnt_lc_attr_until(&m->m_lc, a->handle);
	}
	return mnt_reply_entry_until(req, a, asked, fi, oreg_gen, entry_until, attr_until);
}

/* An attribute reply, leased until @until (as mnt_keep). */
static void mnt_reply_attr(fuse_req_t req, const struct orch_attr *a, uint64_t until)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct stat st;
	double timeout = mnt_stat(m, a, &st, until);

	fuse_reply_attr(req, &st, timeout);
}

/* --- Lifecycle ---------------------------------------------------------------------- */

/*
 * Writeback caching stays off: writes go to the servers as they come, and
 * the kernel's i_size is only ever ahead of the inode's by what this mount
 * wrote (i_wend).  READDIRPLUS is used for every listing, not only the
 * first batch, so `ls -l` fills the kernel caches in one pass.
 */
static void mnt_init(void *userdata, struct fuse_conn_info *conn)
{
	struct orch_mnt *m = userdata;

	conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	conn->want &= ~(FUSE_CAP_READDIRPLUS | FUSE_CAP_READDIRPLUS_AUTO);
	if (m->m_readdirplus && (conn->capable & FUSE_CAP_READDIRPLUS))
		conn->want |= FUSE_CAP_READDIRPLUS;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	if (conn->capable & FUSE_CAP_PARALLEL_DIROPS)
		conn->want |= FUSE_CAP_PARALLEL_DIROPS;
	/* O_TRUNC comes to open() (file.c), saving the kernel's extra SETATTR. */
	if (conn->capable & FUSE_CAP_ATOMIC_O_TRUNC)
		conn->want |= FUSE_CAP_ATOMIC_O_TRUNC;
	/*
	 * The set-id bits: taken by the servers at a chown or truncate, and by
	 * the mount at a write (file.c).  Asked for, but libfuse 3.14 (Debian
	 * 12) never passes FUSE_HANDLE_KILLPRIV on to the kernel, which then
	 * clears them itself with a SETATTR of the mode, sent as the writer
	 * (mnt_setattr_kill).
	 */
	if (conn->capable & FUSE_CAP_HANDLE_KILLPRIV)
		conn->want |= FUSE_CAP_HANDLE_KILLPRIV;
	/*
	 * Another client's change to a name expires the kernel's dentry
	 * rather than unhashing it (kinval.c): a process inside a directory
	 * whose entry record only changed keeps its working directory, and
	 * mounts on it stay.  Kernels before 6.2 lack it.
	 */
	if (conn->capable & FUSE_CAP_EXPIRE_ONLY) {
		conn->want |= FUSE_CAP_EXPIRE_ONLY;
		m->m_expire_only = true;
	}
	conn->max_write = ORCH_IO_MAX;
	/* Inode times are nanoseconds. */
	conn->time_gran = 1;
}

/* --- Names -------------------------------------------------------------------------- */

/*
 * Attributes of @h from the lease cache, after reading the invalidations
 * that reached us.  Off while getattr_timeout_ms is 0: then every stat
 * asks the servers, as that setting promises.  True on a hit; *@due: the
 * caller is to renew them (orch_mnt_lc_get_attr).
 */
static bool orch_mnt_lc_attr(struct orch_mnt *m, uint64_t h, struct orch_attr *out, bool *due)
{
	*due = false;
	return m->m_lc.l_on && atomic_load(&m->m_getattr_timeout_ms) &&
	       orch_client_poll(m->m_cl, orch_handle_server(h)) &&
	       orch_mnt_lc_get_attr(&m->m_lc, h, out, due);
}

/*
 * Renewals (refresh ahead, lcache.c) are sent as root where the key is
 * anyone's: attributes, and names whose credkey is LC_CRED_FREE (the
 * servers grant root every check).  A name looked up for a caller is
 * renewed with that caller's credentials, those of the hit.
 */
static const struct orch_cred mnt_root_cred = { .uid = 0, .gid = 0 };

static void mnt_lc_renew_attr(struct orch_mnt *m, uint64_t h)
{
	struct orch_mnt_lc_renewal r = { .r_kind = ORCH_MNT_LC_RENEW_GETATTR, .r_key = h,
					 .r_cred = mnt_root_cred };

	orch_mnt_lc_renew(&m->m_lc, &r);
}

static void mnt_lc_renew_name(struct orch_mnt *m, const struct orch_cred *cred,
			      uint64_t credkey, uint64_t parent, const char *name)
{
	struct orch_mnt_lc_renewal r = { .r_kind = ORCH_MNT_LC_RENEW_LOOKUP, .r_key = parent,
					 .r_credkey = credkey };

	r.r_cred = credkey == ORCH_MNT_LC_CRED_FREE ? mnt_root_cred : *cred;
	snprintf(r.r_name, sizeof(r.r_name), "%s", name);
	orch_mnt_lc_renew(&m->m_lc, &r);
}

static bool mnt_lc_name_ok(const char *name)
{
	return strlen(name) <= ORCH_NAME_MAX && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int orch_mnt_access_check(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
			  uint32_t mask)
{
	struct orch_attr a;
	bool due;

	/* The servers' own rule, on attributes every change since was pushed for. */
	if (!(mask & ~(uint32_t)(R_OK | W_OK | X_OK)) && orch_mnt_lc_attr(m, h, &a, &due)) {
		if (due)
			mnt_lc_renew_attr(m, h);
		return mask ? orch_perm(cred, &a, mask) : 0;
	}
	return orch_fs_access(m->m_cl, cred, h, mask);
}

/* GETATTR of @h from its server, filling the lease cache. */
static int mnt_getattr_asked(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
			     struct orch_attr *out)
{
	uint64_t stamp, sent_ms = orch_time_now_ms();
	int error;

	error = orch_fs_getattr_stamped(m->m_cl, cred, h, out, &stamp);
	if (!error)
		orch_mnt_lc_put_attr(&m->m_lc, out, stamp, sent_ms);
	return error;
}

int orch_mnt_getattr(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
		     struct orch_attr *out)
{
	bool due;

	if (orch_mnt_lc_attr(m, h, out, &due)) {
		if (due)
			mnt_lc_renew_attr(m, h);
		return 0;
	}
	return mnt_getattr_asked(m, cred, h, out);
}

/*
 * A lookup from the lease cache (off while dcache_timeout_ms is 0): 0 with
 * *@a, -ENOENT for a name known absent, or 1 for a miss.  A hit on a name
 * or child's attributes near the end of its term renews both, by a LOOKUP
 * (whose reply carries the attributes).
 */
static int mnt_lookup_cached(struct orch_mnt *m, const struct orch_cred *cred, uint64_t credkey,
			     uint64_t parent, const char *name, struct orch_attr *a)
{
	bool due = false, adue = false, hit;
	uint64_t child;

	/*
	 * A name the servers refuse gets their error, not ours; "." and ".."
	 * are not entries (a moved directory's ".." changes with no push).
	 */
	if (!m->m_lc.l_on || !atomic_load(&m->m_dcache_timeout_ms) || !mnt_lc_name_ok(name) ||
	    !orch_client_poll(m->m_cl, orch_handle_server(parent)) ||
	    !orch_mnt_lc_get_name(&m->m_lc, parent, name, credkey, &child, &due))
		return 1;
	hit = !child;
	/* The child's server was read just now if it is the directory's. */
	if (child && orch_handle_server(child) == orch_handle_server(parent))
		hit = atomic_load(&m->m_getattr_timeout_ms) &&
		      orch_mnt_lc_get_attr(&m->m_lc, child, a, &adue);
	else if (child)
		hit = orch_mnt_lc_attr(m, child, a, &adue);
	if (!hit)
		return 1;
	if (due || adue)
		mnt_lc_renew_name(m, cred, credkey, parent, name);
	return child ? 0 : -ENOENT;
}

/* Fills the lease cache from a lookup or create sent at @sent_ms. */
void orch_mnt_lc_fill(struct orch_mnt *m, uint64_t credkey, uint64_t parent, const char *name,
		      int error, const struct orch_attr *a, const struct orch_fs_stamps *st,
		      uint64_t sent_ms)
{
	if (!m->m_lc.l_on || (error && error != -ENOENT) || !mnt_lc_name_ok(name))
		return;
	orch_mnt_lc_put_name(&m->m_lc, parent, name, credkey, error ? 0 : a->handle, st->entry,
			     sent_ms);
	if (!error)
		orch_mnt_lc_put_attr(&m->m_lc, a, st->attr, sent_ms);
}

/* LOOKUP of @name in @parent from its server, filling the lease cache. */
static int mnt_lookup_asked(struct orch_mnt *m, const struct orch_cred *cred, uint64_t credkey,
			    uint64_t parent, const char *name, struct orch_attr *a,
			    struct orch_fs_stamps *st)
{
	uint64_t sent_ms = orch_time_now_ms();
	int error;

	error = orch_fs_lookup_stamped(m->m_cl, cred, parent, name, a, st);
	orch_mnt_lc_fill(m, credkey, parent, name, error, a, st, sent_ms);
	return error;
}

/*
 * A renewal thread's work (lcache.c, orch_mnt_lc_renew_fn): the request a
 * miss makes, whose reply fills the cache through the same stamp order.
 */
void orch_mnt_lc_renew_send(void *arg, const struct orch_mnt_lc_renewal *r)
{
	struct orch_mnt *m = arg;
	struct orch_fs_stamps st;
	struct orch_attr a;

	if (r->r_kind == ORCH_MNT_LC_RENEW_GETATTR)
		mnt_getattr_asked(m, &r->r_cred, r->r_key, &a);
	else
		mnt_lookup_asked(m, &r->r_cred, r->r_credkey, r->r_key, r->r_name, &a, &st);
}

int orch_mnt_lc_vouch_send(void *arg, unsigned int server)
{
	struct orch_mnt *m = arg;
	struct orch_reply rep;
	struct orch_msg req;
	int error;

	orch_msg_init(&req, ORCH_CL2SV_VOUCH);
	/* An answer later than a vouch's term is worth nothing. */
	error = orch_client_call_within(m->m_cl, server, &req, ORCH_VOUCH_TERM_MS, &rep);
	orch_reply_release(&rep);
	return error;
}

/*
 * After a name was found absent in @dir: lists @dir once per lease term,
 * so that if it is small the next absent names cost no round trip (a
 * create, a rename's target, a compiler's search for headers).
 */
static void mnt_lc_learn_dir(struct orch_mnt *m, const struct orch_cred *cred, uint64_t dir)
{
	struct orch_dirent *ents = malloc(ORCH_READDIR_MAX * sizeof(*ents));
	uint64_t stamp, sent_ms = orch_time_now_ms();
	uint32_t n;
	bool eof;

	if (!ents)
		return;
	if (orch_fs_readdir_stamped(m->m_cl, cred, dir, 0, ORCH_READDIR_MAX, false, ents, &n,
				    &eof, &stamp) == 0) {
		if (eof)
			orch_mnt_lc_put_dir(&m->m_lc, dir, ents, n, stamp, sent_ms);
		else
			orch_mnt_lc_dir_too_big(&m->m_lc, dir, sent_ms);
	}
	free(ents);
}

static void mnt_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_fs_stamps st;
	struct orch_cred cred;
	struct orch_attr a;
	uint64_t credkey, asked, entry_until = 0;
	bool learn = false;
	uint32_t neg;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_LOOKUP);
	orch_mnt_cred(req, &cred);
	asked = orch_mnt_inode_asked(&m->m_itab);
	credkey = orch_mnt_lc_credkey(&m->m_lc, &cred);
	error = mnt_lookup_cached(m, &cred, credkey, parent, name, &a);
	if (error == 1) {
		error = mnt_lookup_asked(m, &cred, credkey, parent, name, &a, &st);
		learn = error == -ENOENT && st.entry && atomic_load(&m->m_dcache_timeout_ms) &&
			orch_mnt_lc_dir_wanted(&m->m_lc, parent, credkey);
	}
	neg = atomic_load(&m->m_negative_timeout_ms);
	/* In coherent mode: until when the lease cache holds the absent name. */
	if (error == -ENOENT && atomic_load(&m->m_coherent))
		entry_until = orch_mnt_name_until(m, parent, name, credkey);
	if (!error) {
		orch_mnt_reply_entry_named(req, parent, name, credkey, &a, asked, NULL, 0);
	} else if (error == -ENOENT && (neg || entry_until)) {
		/* A negative entry: ino 0, cached for negative_timeout_ms or its lease. */
		struct fuse_entry_param e = { .ino = 0 };

		e.entry_timeout = mnt_keep(m, entry_until, &m->m_negative_timeout_ms);
		/* The caller gets ENOENT all the same: counted as the error it is. */
		orch_mnt_count_error(m, -ENOENT);
		fuse_reply_entry(req, &e);
	} else {
		orch_mnt_reply_err(req, error);
	}
	/* After the reply: the caller does not wait for it. */
	if (learn)
		mnt_lc_learn_dir(m, &cred, parent);
}

static void mnt_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	struct orch_mnt *m = orch_mnt_of(req);

	orch_mnt_count(m, ORCH_MNT_OP_FORGET);
	orch_mnt_inode_forget(&m->m_itab, ino, nlookup);
	fuse_reply_none(req);
}

static void mnt_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct orch_mnt *m = orch_mnt_of(req);

	orch_mnt_count(m, ORCH_MNT_OP_BATCH_FORGET);
	for (size_t i = 0; i < count; i++)
		orch_mnt_inode_forget(&m->m_itab, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static void mnt_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		      dev_t rdev)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	struct orch_attr a;
	uint64_t asked;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_MKNOD);
	orch_mnt_cred(req, &cred);
	/* mknod(2) never opens an existing file: always exclusive. */
	asked = orch_mnt_inode_asked(&m->m_itab);
	error = orch_fs_create(m->m_cl, &cred, parent, name, mode, rdev, true, &a, NULL);
	if (error)
		orch_mnt_reply_err(req, error);
	else
		orch_mnt_reply_entry(req, &a, asked, NULL, 0);
}

static void mnt_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	struct orch_attr a;
	uint64_t asked;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_MKDIR);
	orch_mnt_cred(req, &cred);
	asked = orch_mnt_inode_asked(&m->m_itab);
	error = orch_fs_mkdir(m->m_cl, &cred, parent, name, S_IFDIR | (mode & 07777), &a);
	if (error)
		orch_mnt_reply_err(req, error);
	else
		orch_mnt_reply_entry(req, &a, asked, NULL, 0);
}

static void mnt_symlink(fuse_req_t req, const char *target, fuse_ino_t parent,
			const char *name)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	struct orch_attr a;
	uint64_t asked;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_SYMLINK);
	orch_mnt_cred(req, &cred);
	asked = orch_mnt_inode_asked(&m->m_itab);
	error = orch_fs_symlink(m->m_cl, &cred, parent, name, target, &a);
	if (error)
		orch_mnt_reply_err(req, error);
	else
		orch_mnt_reply_entry(req, &a, asked, NULL, 0);
}

static void mnt_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	struct orch_attr a;
	uint64_t asked;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_LINK);
	orch_mnt_cred(req, &cred);
	asked = orch_mnt_inode_asked(&m->m_itab);
	error = orch_fs_link(m->m_cl, &cred, ino, newparent, newname, &a);
	if (error)
		orch_mnt_reply_err(req, error);
	else
		orch_mnt_reply_entry(req, &a, asked, NULL, 0);
}

static void mnt_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct orch_mnt *m = orch_mnt_of(req);
	char target[ORCH_PATH_MAX + 1];
	struct orch_cred cred;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_READLINK);
	orch_mnt_cred(req, &cred);
	error = orch_fs_readlink(m->m_cl, &cred, ino, target, sizeof(target));
	if (error)
		orch_mnt_reply_err(req, error);
	else
		fuse_reply_readlink(req, target);
}

static void mnt_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;

	int error;

	orch_mnt_count(m, ORCH_MNT_OP_UNLINK);
	orch_mnt_cred(req, &cred);
	/* A file open anywhere stays on its server until its last close. */
	error = orch_fs_unlink(m->m_cl, &cred, parent, name);
	orch_mnt_reply_err(req, error);
}

static void mnt_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;

	orch_mnt_count(m, ORCH_MNT_OP_RMDIR);
	orch_mnt_cred(req, &cred);
	orch_mnt_reply_err(req, orch_fs_rmdir(m->m_cl, &cred, parent, name));
}

static void mnt_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
		       fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	int error = -EINVAL;

	orch_mnt_count(m, ORCH_MNT_OP_RENAME);
	/* RENAME_WHITEOUT (overlayfs) is not supported; nor both flags at once. */
	if (flags == 0 || flags == RENAME_NOREPLACE || flags == RENAME_EXCHANGE) {
		orch_mnt_cred(req, &cred);
		/* A replaced file that is open anywhere keeps working until closed. */
		error = orch_fs_rename(m->m_cl, &cred, parent, name, newparent, newname, flags);
	}
	orch_mnt_reply_err(req, error);
}

/* --- Attributes ------------------------------------------------------------------------ */

static void mnt_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	struct orch_attr a, rep;
	uint64_t asked, bytes;
	int error;

	(void)fi;
	orch_mnt_count(m, ORCH_MNT_OP_GETATTR);
	orch_mnt_cred(req, &cred);
	asked = orch_mnt_inode_asked(&m->m_itab);
	error = orch_mnt_getattr(m, &cred, ino, &a);
	if (error) {
		orch_mnt_reply_err(req, error);
		return;
	}
	orch_mnt_inode_update(&m->m_itab, &a, asked, &rep);
	/* st_blocks: counted on the servers once per change of the attributes. */
	if (S_ISREG(rep.mode) && rep.size && !orch_mnt_inode_blocks(&m->m_itab, &rep, &bytes) &&
	    !orch_fs_allocated(m->m_cl, &cred, &rep, rep.size, &bytes))
		orch_mnt_inode_blocks_set(&m->m_itab, &rep, bytes / 512);
	mnt_reply_attr(req, &rep,
		       atomic_load(&m->m_coherent) ? orch_mnt_lc_attr_until(&m->m_lc, ino) : 0);
}

static int64_t mnt_ts_ns(const struct timespec *ts)
{
	return (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
}

/*
 * Without FUSE_CAP_HANDLE_KILLPRIV in effect (ops.c, mnt_init) the kernel
 * clears the set-id bits of a file that someone without CAP_FSETID writes,
 * truncates or chowns by a SETATTR of the mode, alone or with the size or
 * owner, sent as that caller: who needs only write permission, not to own
 * the file.  Such a SETATTR by a caller other than the owner and root, whose
 * mode only takes set-id bits from the mode this mount last saw (the kernel
 * has just asked for it), becomes ORCH_SET_KILL_SUIDGID: the server takes
 * the bits by its rule (proto/perm.h, the kernel's), with write permission
 * or through the caller's descriptor.  The one difference from a local file
 * system: such a user's chmod u-s, g-s is served as that clearing, where
 * Linux answers EPERM.
 */
static uint32_t mnt_setattr_kill(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
				 uint32_t valid, uint32_t mode)
{
	const uint32_t setid = S_ISUID | S_ISGID;
	struct orch_attr cur;

	if (!(valid & ORCH_SET_MODE) || cred->uid == 0 ||
	    orch_mnt_inode_attr(&m->m_itab, h, &cur) || cred->uid == cur.uid ||
	    (mode & ~setid) != (cur.mode & 07777 & ~setid) || (mode & setid & ~cur.mode) ||
	    (mode & setid) == (cur.mode & setid))
		return valid;
	return (valid & ~(uint32_t)ORCH_SET_MODE) | ORCH_SET_KILL_SUIDGID;
}

static void mnt_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_attr in = { 0 }, a, rep;
	struct orch_cred cred;
	uint64_t stamp, sent_ms;
	uint32_t valid = 0;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_SETATTR);
	if (to_set & FUSE_SET_ATTR_MODE) {
		valid |= ORCH_SET_MODE;
		in.mode = attr->st_mode & 07777;
	}
	if (to_set & FUSE_SET_ATTR_UID) {
		valid |= ORCH_SET_UID;
		in.uid = attr->st_uid;
	}
	if (to_set & FUSE_SET_ATTR_GID) {
		valid |= ORCH_SET_GID;
		in.gid = attr->st_gid;
	}
	if (to_set & FUSE_SET_ATTR_SIZE) {
		valid |= ORCH_SET_SIZE;
		in.size = (uint64_t)attr->st_size;
	}
	if (to_set & FUSE_SET_ATTR_ATIME) {
		valid |= ORCH_SET_ATIME;
		if (to_set & FUSE_SET_ATTR_ATIME_NOW)
			valid |= ORCH_SET_ATIME_NOW;
		else
			in.atime_ns = mnt_ts_ns(&attr->st_atim);
	}
	if (to_set & FUSE_SET_ATTR_MTIME) {
		valid |= ORCH_SET_MTIME;
		if (to_set & FUSE_SET_ATTR_MTIME_NOW)
			valid |= ORCH_SET_MTIME_NOW;
		else
			in.mtime_ns = mnt_ts_ns(&attr->st_mtim);
	}
	if (to_set & FUSE_SET_ATTR_CTIME) {
		valid |= ORCH_SET_CTIME;
		in.ctime_ns = mnt_ts_ns(&attr->st_ctim);
	}
	/*
	 * ftruncate: the kernel lets only a descriptor opened for writing
	 * send it, and the open checked the permission; a check now would
	 * refuse what open(O_CREAT|O_RDWR, 0) allowed, as no local file system does.
	 */
	if (fi && (valid & ORCH_SET_SIZE))
		valid |= ORCH_SET_HANDLE;
	orch_mnt_cred(req, &cred);
	valid = mnt_setattr_kill(m, &cred, ino, valid, in.mode);
	error = (valid & ORCH_SET_SIZE) ? orch_mnt_publish_size(m, &cred, ino) : 0;
	sent_ms = orch_time_now_ms();
	if (!error)
		error = orch_fs_setattr_stamped(m->m_cl, &cred, ino, valid, &in, &a, &stamp);
	if (error) {
		orch_mnt_reply_err(req, error);
		return;
	}
	orch_mnt_lc_put_attr(&m->m_lc, &a, stamp, sent_ms);
	orch_mnt_inode_setattr_done(&m->m_itab, &a, valid & ORCH_SET_SIZE,
				    valid & (ORCH_SET_MTIME | ORCH_SET_MTIME_NOW), &rep);
	mnt_reply_attr(req, &rep, 0);
}

static void mnt_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;

	orch_mnt_count(m, ORCH_MNT_OP_ACCESS);
	orch_mnt_cred(req, &cred);
	orch_mnt_reply_err(req, orch_mnt_access_check(m, &cred, ino, (uint32_t)mask));
}

static void mnt_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_statfs sf;
	struct orch_cred cred;
	struct statvfs st;
	int error;

	(void)ino;
	orch_mnt_count(m, ORCH_MNT_OP_STATFS);
	orch_mnt_cred(req, &cred);
	error = orch_fs_statfs(m->m_cl, &cred, &sf);
	if (error) {
		orch_mnt_reply_err(req, error);
		return;
	}
	memset(&st, 0, sizeof(st));
	st.f_bsize = sf.bsize;
	st.f_frsize = sf.bsize;
	st.f_blocks = sf.blocks;
	st.f_bfree = sf.bfree;
	st.f_bavail = sf.bavail;
	st.f_files = sf.files;
	st.f_ffree = sf.ffree;
	st.f_favail = sf.ffree;
	st.f_namemax = sf.namemax;
	fuse_reply_statfs(req, &st);
}

/* --- Extended attributes --------------------------------------------------------------- */

static void mnt_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
			 size_t size, int flags)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_SETXATTR);
	orch_mnt_cred(req, &cred);
	if (orch_mnt_ctl_is_ctl(ino, name)) {
		error = orch_mnt_ctl_set(m, cred.uid, name, value, size, flags);
	} else {
		error = orch_fs_setxattr(m->m_cl, &cred, ino, name, value, size, flags);
		orch_mnt_inode_xattr_forget(&m->m_itab, ino);
	}
	orch_mnt_reply_err(req, error);
}

/*
 * GETXATTR and LISTXATTR: with @size 0 the kernel asks for the length only;
 * otherwise the value must fit in @size bytes (-ERANGE if not).
 */
static void mnt_reply_xattr(fuse_req_t req, int error, const char *buf, size_t size,
			    size_t len)
{
	if (error)
		orch_mnt_reply_err(req, error);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else
		fuse_reply_buf(req, buf, len);
}

static void mnt_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	char *buf = NULL;
	size_t len = 0;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_GETXATTR);
	if (size) {
		size = ORCH_MIN(size, (size_t)ORCH_XATTR_SIZE_MAX);
		buf = malloc(size);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
	}
	if (orch_mnt_ctl_is_ctl(ino, name)) {
		error = orch_mnt_ctl_get(m, name, buf, size, &len);
	} else {
		int known = orch_mnt_xattr_wellknown(name);

		if (orch_mnt_inode_xattr_is_absent(&m->m_itab, ino, known,
						   atomic_load(&m->m_getattr_timeout_ms))) {
			error = -ENODATA;
		} else {
			uint64_t asked = orch_mnt_inode_asked(&m->m_itab);

			orch_mnt_cred(req, &cred);
			error = orch_fs_getxattr(m->m_cl, &cred, ino, name, buf, size, &len);
			if (error == -ENODATA)
				orch_mnt_inode_xattr_set_absent(&m->m_itab, ino, known, asked);
		}
	}
	mnt_reply_xattr(req, error, buf, size, len);
	free(buf);
}

/* The virtual names of ctl.c are never stored, so the server's list omits them. */
static void mnt_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	char *buf = NULL;
	size_t len = 0;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_LISTXATTR);
	if (size) {
		size = ORCH_MIN(size, (size_t)ORCH_XATTR_LIST_MAX);
		buf = malloc(size);
		if (!buf) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
	}
	orch_mnt_cred(req, &cred);
	error = orch_fs_listxattr(m->m_cl, &cred, ino, buf, size, &len);
	mnt_reply_xattr(req, error, buf, size, len);
	free(buf);
}

static void mnt_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_REMOVEXATTR);
	orch_mnt_cred(req, &cred);
	if (orch_mnt_ctl_is_ctl(ino, name)) {
		error = -EPERM;
	} else {
		error = orch_fs_removexattr(m->m_cl, &cred, ino, name);
		orch_mnt_inode_xattr_forget(&m->m_itab, ino);
	}
	orch_mnt_reply_err(req, error);
}

/* --- Requests that hold a directory's lock in the kernel -------------------------------- */

/*
 * The kernel holds the lock of the directory these change (of the
 * directory itself for a setattr or an xattr change) until the reply;
 * kinval.c must know, so that no acknowledgement waits for that lock
 * (orch_mnt_kinval_dir_enter).  Each handler replies before it returns.
 */
#define MNT_HOLDING(dir, call)                                   \
	do {                                                     \
		struct orch_mnt *m_ = orch_mnt_of(req);          \
		uint64_t dir_ = (dir);                           \
								 \
		orch_mnt_kinval_dir_enter(m_, dir_);             \
		call;                                            \
		orch_mnt_kinval_dir_leave(m_, dir_);             \
	} while (0)

static void mnt_setattr_held(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
			     struct fuse_file_info *fi)
{
	MNT_HOLDING(ino, mnt_setattr(req, ino, attr, to_set, fi));
}

static void mnt_mknod_held(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			   dev_t rdev)
{
	MNT_HOLDING(parent, mnt_mknod(req, parent, name, mode, rdev));
}

static void mnt_mkdir_held(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	MNT_HOLDING(parent, mnt_mkdir(req, parent, name, mode));
}

static void mnt_symlink_held(fuse_req_t req, const char *target, fuse_ino_t parent,
			     const char *name)
{
	MNT_HOLDING(parent, mnt_symlink(req, target, parent, name));
}

static void mnt_unlink_held(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	MNT_HOLDING(parent, mnt_unlink(req, parent, name));
}

static void mnt_rmdir_held(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	MNT_HOLDING(parent, mnt_rmdir(req, parent, name));
}

static void mnt_rename_held(fuse_req_t req, fuse_ino_t parent, const char *name,
			    fuse_ino_t newparent, const char *newname, unsigned int flags)
{
	struct orch_mnt *m = orch_mnt_of(req);

	orch_mnt_kinval_dir_enter(m, newparent);
	MNT_HOLDING(parent, mnt_rename(req, parent, name, newparent, newname, flags));
	orch_mnt_kinval_dir_leave(m, newparent);
}

static void mnt_link_held(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
			  const char *newname)
{
	MNT_HOLDING(newparent, mnt_link(req, ino, newparent, newname));
}

static void mnt_create_held(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
			    struct fuse_file_info *fi)
{
	MNT_HOLDING(parent, orch_mnt_create(req, parent, name, mode, fi));
}

static void mnt_setxattr_held(fuse_req_t req, fuse_ino_t ino, const char *name,
			      const char *value, size_t size, int flags)
{
	MNT_HOLDING(ino, mnt_setxattr(req, ino, name, value, size, flags));
}

static void mnt_removexattr_held(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	MNT_HOLDING(ino, mnt_removexattr(req, ino, name));
}

/* --- The table ------------------------------------------------------------------------- */

/* Locks and ioctl: not implemented; the kernel then keeps POSIX and flock locks per mount. */
const struct fuse_lowlevel_ops orch_mnt_ops = {
	.init = mnt_init,
	.lookup = mnt_lookup,
	.forget = mnt_forget,
	.forget_multi = mnt_forget_multi,
	.getattr = mnt_getattr,
	.setattr = mnt_setattr_held,
	.readlink = mnt_readlink,
	.mknod = mnt_mknod_held,
	.mkdir = mnt_mkdir_held,
	.symlink = mnt_symlink_held,
	.unlink = mnt_unlink_held,
	.rmdir = mnt_rmdir_held,
	.rename = mnt_rename_held,
	.link = mnt_link_held,
	.open = orch_mnt_open,
	.create = mnt_create_held,
	.read = orch_mnt_read,
	.write = orch_mnt_write,
	.flush = orch_mnt_flush,
	.release = orch_mnt_release,
	.fsync = orch_mnt_fsync,
	.copy_file_range = orch_mnt_copy_file_range,
	.fallocate = orch_mnt_fallocate,
	.opendir = orch_mnt_opendir,
	.readdir = orch_mnt_readdir,
	.readdirplus = orch_mnt_readdirplus,
	.releasedir = orch_mnt_releasedir,
	.fsyncdir = orch_mnt_fsyncdir,
	.statfs = mnt_statfs,
	.setxattr = mnt_setxattr_held,
	.getxattr = mnt_getxattr,
	.listxattr = mnt_listxattr,
	.removexattr = mnt_removexattr_held,
	.access = mnt_access,
};
