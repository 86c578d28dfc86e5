/*
 * Directory listing.
 *
 * The kernel asks READDIR(PLUS) with a buffer of a page or so, which holds
 * some 25 entries with attributes; the server answers up to
 * MNT_DIR_BATCH per request.  So each open directory keeps the last batch
 * and serves the kernel's requests from it, and `ls -l` costs one server
 * request per MNT_DIR_BATCH entries.
 *
 * Offsets: FUSE resumes a listing from the offset of the last entry it got.
 * "." is at offset 1 and ".." at 2; the server entry with cookie c (its
 * sequence number, >= 1) is at c + 2, so resuming from offset o >= 2 asks
 * the server for what follows cookie o - 2.  Server cookies are stable under
 * concurrent create and delete (meta/dirent.c), and so are ours.
 *
 * The kernel's listing cache (coherent mode): an open directory is cached by
 * the kernel (cache_readdir), and the cache is kept from one open to the
 * next (keep_cache) while every change of the directory is still pushed
 * to this mount: until the end of the lease of the READDIR that started
 * the listing (i_list_until).  A push for the directory, or for a name in
 * it, drops the cached pages (kinval.c); the kernel also starts over when
 * the directory's mtime differs from the one it cached the listing at,
 * which catches a listing that a push overtook on its way (docs/DESIGN.md,
 * "Listings").
 *
 * Lookup counts: every entry handed to the kernel through
 * fuse_add_direntry_plus(), except "." and "..", is one lookup (the kernel
 * will FORGET it), so it is counted in the inode table before the reply; if
 * the reply does not reach the kernel the counts are dropped again.
 */
#include "mount/mount_i.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/time.h"
#include "common/util.h"

#define MNT_DIR_BATCH 256u
#define MNT_DIR_OFF_DOT 1
#define MNT_DIR_OFF_DOTDOT 2

/* Per open directory (fi->fh). */
struct mnt_dir {
	struct orch_mnt_fh d_fh; /* first: on the mount's list until RELEASEDIR */
	/*
	 * Held across the server request of a refill: it only serializes the
	 * readers of this one open directory, which the kernel serializes
	 * anyway (f_pos_lock).  Taken before the inode table's lock.
	 */
	pthread_mutex_t d_lock;
	uint64_t d_handle;
	struct orch_dirent *d_ents; /* the last batch; protected by d_lock */
	uint32_t d_n;               /* entries in it */
	uint64_t d_start;           /* server cookie it was read from */
	bool d_valid;               /* d_ents holds a batch */
	bool d_plus;                /* ... with attributes */
	bool d_eof;                 /* ... and nothing follows it */
	uint64_t d_asked;           /* ... asked at (orch_mnt_inode_asked) */
};

static struct mnt_dir *mnt_dir_of(const struct fuse_file_info *fi)
{
	return (struct mnt_dir *)(uintptr_t)fi->fh;
}

static void mnt_dir_free(struct orch_mnt_fh *fh)
{
	struct mnt_dir *d = (struct mnt_dir *)fh;

	pthread_mutex_destroy(&d->d_lock);
	free(d->d_ents);
	free(d);
}

void orch_mnt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	struct mnt_dir *d;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_OPENDIR);
	/* A directory the caller may not read cannot be opened (not only listed). */
	orch_mnt_cred(req, &cred);
	error = orch_mnt_open_check(m, &cred, ino, fi->flags);
	if (error) {
		orch_mnt_reply_err(req, error);
		return;
	}
	d = calloc(1, sizeof(*d));
	if (d)
		d->d_ents = malloc(MNT_DIR_BATCH * sizeof(*d->d_ents));
	if (!d || !d->d_ents) {
		if (d)
			free(d);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&d->d_lock, NULL);
	d->d_handle = ino;
	fi->fh = (uint64_t)(uintptr_t)d;
	if (atomic_load(&m->m_coherent) && m->m_lc.l_on) {
		fi->cache_readdir = 1;
		fi->keep_cache = orch_mnt_inode_list_covered(&m->m_itab, ino, orch_time_now_ms());
	}
	/* Before the reply: its RELEASEDIR may come at once. */
	orch_mnt_fh_add(&m->m_fhs, &d->d_fh, mnt_dir_free);
	if (fuse_reply_open(req, fi)) {
		orch_mnt_fh_del(&m->m_fhs, &d->d_fh);
		mnt_dir_free(&d->d_fh);
	}
}

void orch_mnt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct mnt_dir *d = mnt_dir_of(fi);

	(void)ino;
	orch_mnt_count(m, ORCH_MNT_OP_RELEASEDIR);
	orch_mnt_fh_del(&m->m_fhs, &d->d_fh);
	mnt_dir_free(&d->d_fh);
	fuse_reply_err(req, 0);
}

/*
 * Index in the batch of the entry that follows @cookie, or -1 if the batch
 * cannot tell (not loaded, without the attributes @plus needs, or @cookie
 * not in it).  d_n means "after the batch".
 */
static int64_t mnt_dir_find(const struct mnt_dir *d, uint64_t cookie, bool plus)
{
	if (!d->d_valid || (plus && !d->d_plus))
		return -1;
	if (cookie == d->d_start)
		return 0;
	for (uint32_t i = 0; i < d->d_n; i++)
		if (d->d_ents[i].cookie == cookie)
			return i + 1;
	return -1;
}

/*
 * What a listing stamped @stamp tells the lease cache: the names (whoever
 * listed, they are served only to callers every check passes), the
 * attributes the directory's server sent with them, and, for a plain first
 * batch that is the whole directory, that it is complete.
 */
static void mnt_dir_lease(struct orch_mnt *m, const struct mnt_dir *d, uint64_t cookie,
			  bool plus, uint64_t stamp, uint64_t sent_ms)
{
	unsigned int server = orch_handle_server(d->d_handle);

	if (!stamp)
		return;
	/* A plus listing drops names whose inode vanished: not proof of absence. */
	if (cookie == 0 && d->d_eof && !plus) {
		orch_mnt_lc_put_dir(&m->m_lc, d->d_handle, d->d_ents, d->d_n, stamp, sent_ms);
	} else {
		for (uint32_t i = 0; i < d->d_n; i++)
			orch_mnt_lc_put_name(&m->m_lc, d->d_handle, d->d_ents[i].name,
					     ORCH_MNT_LC_CRED_FREE, d->d_ents[i].handle, stamp,
					     sent_ms);
	}
	if (!plus)
		return;
	for (uint32_t i = 0; i < d->d_n; i++)
		if (orch_handle_server(d->d_ents[i].handle) == server)
			orch_mnt_lc_put_attr(&m->m_lc, &d->d_ents[i].attr, stamp, sent_ms);
}

static int mnt_dir_fill(struct orch_mnt *m, const struct orch_cred *cred, struct mnt_dir *d,
			uint64_t cookie, bool plus)
{
	uint64_t stamp, sent_ms = orch_time_now_ms();
	int error;

	d->d_valid = false;
	d->d_asked = orch_mnt_inode_asked(&m->m_itab);
	error = orch_fs_readdir_stamped(m->m_cl, cred, d->d_handle, cookie, MNT_DIR_BATCH, plus,
					d->d_ents, &d->d_n, &d->d_eof, &stamp);
	if (error)
		return error;
	mnt_dir_lease(m, d, cookie, plus, stamp, sent_ms);
	/* The start of a listing the kernel may cache: pushed to us for a term. */
	if (cookie == 0 && stamp && atomic_load(&m->m_coherent) && m->m_lc.l_on) {
		uint64_t until = sent_ms + m->m_lc.l_lease_ms,
			 vouched = orch_mnt_lc_vouched_until(&m->m_lc, d->d_handle);

		orch_mnt_inode_list_set(&m->m_itab, d->d_handle, until < vouched ? until : vouched);
	}
	d->d_start = cookie;
	d->d_plus = plus;
	d->d_valid = true;
	return 0;
}

/* The listing being built for one reply. */
struct mnt_dirbuf {
	char *b_buf;
	size_t b_size;
	size_t b_pos;
	uint64_t *b_counted; /* handles given a lookup (plus), to undo on failure */
	size_t b_ncounted;
};

/*
 * Adds one entry at offset @off.  Returns 1 if added, 0 if it does not fit,
 * or -errno.  For plus, @a has the attributes and a lookup is counted;
 * @a NULL is "." or "..", with no lookup (the kernel does not take one).
 */
static int mnt_dirbuf_add(fuse_req_t req, struct mnt_dirbuf *b, bool plus, uint64_t dir,
			  const char *name, uint64_t ino, uint32_t type, const struct orch_attr *a,
			  uint64_t asked, off_t off)
{
	struct orch_mnt *m = orch_mnt_of(req);
	size_t room = b->b_size - b->b_pos, need;

	if (!plus) {
		struct stat st = { .st_ino = ino, .st_mode = type };

		need = fuse_add_direntry(req, b->b_buf + b->b_pos, room, name, &st, off);
	} else if (!a) {
		struct fuse_entry_param e = { .ino = 0 };

		e.attr.st_ino = ino;
		e.attr.st_mode = type;
		need = fuse_add_direntry_plus(req, b->b_buf + b->b_pos, room, name, &e, off);
	} else {
		struct fuse_entry_param e;
		struct orch_attr rep;
		uint64_t entry_until = 0, attr_until = 0;
		bool known;

		/* What fits is measured first: a lookup is counted only if added. */
		if (fuse_add_direntry_plus(req, NULL, 0, name, NULL, off) > room)
			return 0;
		if (orch_mnt_inode_get(&m->m_itab, a, asked, &rep, &known))
			return -ENOMEM;
		b->b_counted[b->b_ncounted++] = a->handle;
		/*
		 * In coherent mode, kept as a lookup's answer would be: what the
		 * listing leased (mnt_dir_lease), attributes only of an inode
		 * the kernel holds already (ops.c, mnt_reply_entry_until).
		 */
		if (atomic_load(&m->m_coherent)) {
			entry_until = orch_mnt_name_until(m, dir, name, ORCH_MNT_LC_CRED_FREE);
			if (known)
				attr_until = orch_mnt_lc_attr_until(&m->m_lc, a->handle);
		}
		orch_mnt_entry_param(m, &rep, &e, entry_until, attr_until);
		need = fuse_add_direntry_plus(req, b->b_buf + b->b_pos, room, name, &e, off);
	}
	if (need > room)
		return 0;
	b->b_pos += need;
	return 1;
}

static void mnt_do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			   struct fuse_file_info *fi, bool plus)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct mnt_dir *d = mnt_dir_of(fi);
	struct mnt_dirbuf b = { .b_size = size };
	struct orch_cred cred;
	struct orch_attr self;
	uint64_t cookie;
	int rc = 1, error = 0;

	orch_mnt_count(m, plus ? ORCH_MNT_OP_READDIRPLUS : ORCH_MNT_OP_READDIR);
	orch_mnt_cred(req, &cred);
	b.b_buf = malloc(size ? size : 1);
	/* An entry takes at least 24 bytes: a bound on how many fit. */
	b.b_counted = malloc((size / 24 + 1) * sizeof(*b.b_counted));
	if (!b.b_buf || !b.b_counted) {
		error = -ENOMEM;
		goto out_free;
	}
	pthread_mutex_lock(&d->d_lock);
	if (off == 0) {
		/* A fresh listing (or rewinddir): nothing cached may be reused. */
		d->d_valid = false;
		rc = mnt_dirbuf_add(req, &b, plus, ino, ".", ino, S_IFDIR, NULL, 0,
				    MNT_DIR_OFF_DOT);
	}
	if (rc > 0 && off <= MNT_DIR_OFF_DOT) {
		uint64_t parent = ino;

		if (orch_mnt_inode_attr(&m->m_itab, ino, &self) == 0 && self.parent)
			parent = self.parent;
		rc = mnt_dirbuf_add(req, &b, plus, ino, "..", parent, S_IFDIR, NULL, 0,
				    MNT_DIR_OFF_DOTDOT);
	}
	cookie = off <= MNT_DIR_OFF_DOTDOT ? 0 : (uint64_t)off - MNT_DIR_OFF_DOTDOT;
	while (rc > 0) {
		int64_t i = mnt_dir_find(d, cookie, plus);

		if (i < 0 || (i == d->d_n && !d->d_eof)) {
			error = mnt_dir_fill(m, &cred, d, cookie, plus);
			if (error)
				break;
			i = 0;
		}
		if (i == d->d_n)
			break; /* the end of the directory */
		for (; i < d->d_n; i++) {
			const struct orch_dirent *e = &d->d_ents[i];

			rc = mnt_dirbuf_add(req, &b, plus, ino, e->name, e->handle, e->type,
					    plus ? &e->attr : NULL, d->d_asked,
					    (off_t)(e->cookie + MNT_DIR_OFF_DOTDOT));
			if (rc <= 0)
				break;
			cookie = e->cookie;
		}
	}
	pthread_mutex_unlock(&d->d_lock);
	if (rc < 0)
		error = rc;
	/* Entries already in the buffer are worth returning; an error only if none. */
	if (!error || b.b_pos) {
		error = 0;
		if (fuse_reply_buf(req, b.b_buf, b.b_pos) == 0)
			goto out_free;
		/* The kernel never got them: nothing to reply, lookups to undo. */
	}
	for (size_t k = 0; k < b.b_ncounted; k++)
		orch_mnt_inode_forget(&m->m_itab, b.b_counted[k], 1);
out_free:
	free(b.b_buf);
	free(b.b_counted);
	if (error)
		orch_mnt_reply_err(req, error);
}

void orch_mnt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi)
{
	mnt_do_readdir(req, ino, size, off, fi, false);
}

void orch_mnt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			  struct fuse_file_info *fi)
{
	mnt_do_readdir(req, ino, size, off, fi, true);
}

void orch_mnt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		       struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	struct orch_attr a;
	int error;

	(void)fi;
	orch_mnt_count(m, ORCH_MNT_OP_FSYNCDIR);
	orch_mnt_cred(req, &cred);
	error = orch_fs_getattr(m->m_cl, &cred, ino, &a);
	if (!error)
		error = orch_fs_fsync(m->m_cl, &cred, &a, datasync, 0);
	orch_mnt_reply_err(req, error);
}
