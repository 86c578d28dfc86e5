/*
 * Open files and their data.
 *
 * Sizes: a write goes to the servers at once (answered before they commit
 * it, see wb.c) but does not change the inode's
 * size, which is authoritative (fs.h); the highest written end is published
 * with orch_fs_extend() when the writer flushes, fsyncs or releases.  Until
 * then the inode table's i_wend keeps what this mount reports and reads.
 *
 * Close-to-open: open always fetches fresh attributes, and the kernel keeps
 * the file's page cache (keep_cache) only if size and mtime equal what the
 * previous open or close of the inode recorded, and no open told to drop
 * the pages is still on its way back to its program (mnt_file_used).
 */
#include "mount/mount_i.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "proto/layout.h"
#include "proto/perm.h"

/*
 * Per open file (fi->fh).  The time of the last write, which the EXTEND
 * sets as mtime, is the inode's (i_wmtime_ns), since a utime or truncate
 * through any descriptor or path supersedes it.
 */
struct mnt_file {
	struct orch_mnt_fh f_fh;    /* first: on the mount's list until RELEASE */
	uint64_t f_handle;
	_Atomic bool f_dirty;       /* written since the last EXTEND through this file */
	bool f_direct;              /* O_DIRECT, O_[D]SYNC: writes wait for the servers */
	_Atomic bool f_cto_dropping; /* opened without keep_cache, not used yet */
};

static struct mnt_file *mnt_file_of(const struct fuse_file_info *fi)
{
	return (struct mnt_file *)(uintptr_t)fi->fh;
}

/*
 * Without default_permissions the kernel leaves the open check to us, for
 * files and directories (opendir) alike: read and write access by the open
 * flags, O_TRUNC needs write, by the servers' rule on their attributes.
 */
int orch_mnt_open_check(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
			int flags)
{
	uint32_t mask = 0;

	if (m->m_default_permissions || cred->uid == 0)
		return 0;
	switch (flags & O_ACCMODE) {
	case O_RDONLY: mask = R_OK; break;
	case O_WRONLY: mask = W_OK; break;
	default: mask = R_OK | W_OK; break;
	}
	if (flags & O_TRUNC)
		mask |= W_OK;
	return orch_mnt_access_check(m, cred, h, mask);
}

/*
 * Attributes (layout, size) of an open file: the kernel holds the inode
 * while the file is open, so it is in the table; asked of the server only
 * if not.
 */
static int mnt_file_attr(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
			 struct orch_attr *out)
{
	int error = orch_mnt_inode_attr(&m->m_itab, h, out);

	if (error == -ENOENT)
		error = orch_fs_getattr(m->m_cl, cred, h, out);
	return error;
}

/*
 * A request on @f: its open has returned to the program, so the kernel
 * dropped the pages it was told to (orch_mnt_inode_cto_open).
 */
static void mnt_file_used(struct orch_mnt *m, struct mnt_file *f)
{
	if (f && atomic_exchange(&f->f_cto_dropping, false))
		orch_mnt_inode_cto_dropped(&m->m_itab, f->f_handle);
}

/* @f (attached, never answered to the kernel) goes. */
static void mnt_file_discard(struct orch_mnt *m, struct mnt_file *f)
{
	mnt_file_used(m, f);
	orch_mnt_fh_del(&m->m_fhs, &f->f_fh);
	free(f);
}

/* At the end of the mount, a file whose RELEASE never came. */
static void mnt_file_free(struct orch_mnt_fh *fh)
{
	free(fh);
}

/* Before the open's reply: its RELEASE may come at once. */
static int mnt_file_attach(struct orch_mnt *m, struct fuse_file_info *fi, uint64_t h)
{
	struct mnt_file *f = calloc(1, sizeof(*f));

	if (!f)
		return -ENOMEM;
	f->f_handle = h;
	/* Set at open; an fcntl(F_SETFL) later does not reach us. */
	f->f_direct = fi->flags & (O_DIRECT | O_SYNC | O_DSYNC);
	orch_mnt_fh_add(&m->m_fhs, &f->f_fh, mnt_file_free);
	fi->fh = (uint64_t)(uintptr_t)f;
	return 0;
}

bool orch_mnt_open_registered(struct orch_mnt *m, uint64_t h, int error, uint64_t gen)
{
	struct orch_cred root = { 0 };
	bool none = error == -EINVAL || error == -ENOSYS || error == -ENOENT;

	if (orch_mnt_inode_oreg_set(&m->m_itab, h, error && !none ? 0 : gen, none) && !error &&
	    gen == orch_client_conn_gen(m->m_cl, orch_handle_server(h)))
		/* Closed meanwhile (its release found nothing registered), or counted twice. */
		orch_fs_writers(m->m_cl, &root, h, ORCH_WRITERS_CLOSE, 0, 0, NULL, NULL);
	if (error && !none)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot register an open file: ino=%#llx: %s",
				   (unsigned long long)h, strerror(-error));
	return !error || none;
}

/*
 * Registers this mount's opens of @h with the inode's server, on the
 * connection up now, unless they are registered there (docs/DESIGN.md,
 * "Open files whose last name went"): at the first open, and again after
 * that server's connection changed if the keeper (reopen.c) has not yet.
 * While registered, the server keeps the file's inode and data even once
 * its last name is gone.
 */
static void mnt_open_register(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h)
{
	uint64_t cur = orch_client_conn_gen(m->m_cl, orch_handle_server(h)), gen = 0;
	int error;

	if (!orch_mnt_inode_oreg_claim(&m->m_itab, h, cur))
		return;
	error = orch_fs_writers(m->m_cl, cred, h, ORCH_WRITERS_OPEN, 0, 0, NULL, &gen);
	orch_mnt_open_registered(m, h, error, gen ? gen : cur);
}

/*
 * Before a size change: publishes (EXTENDs) what this mount wrote past the
 * inode's size on the servers.  The server cuts the data at the smaller of
 * the old and new sizes, and only if they differ; written bytes past its old
 * size would otherwise survive a truncate to that size (and reappear when
 * the file grows again) or be cut by a truncate to a size between the two.
 */
int orch_mnt_publish_size(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h)
{
	struct orch_attr a, rep;
	uint64_t end, stamp, sent_ms;
	int64_t mtime_ns;
	int error;

	/* The servers cut what they have: the writes in flight first. */
	orch_mnt_wb_wait(m, h, false);
	end = orch_mnt_inode_wend(&m->m_itab, h, &mtime_ns);
	if (!end)
		return 0;
	sent_ms = orch_time_now_ms();
	error = orch_fs_extend_stamped(m->m_cl, cred, h, end, mtime_ns, &a, &stamp);
	if (!error) {
		orch_mnt_lc_put_attr(&m->m_lc, &a, stamp, sent_ms);
		orch_mnt_inode_extended(&m->m_itab, end, mtime_ns, &a, &rep);
	}
	return error;
}

/*
 * Before a write (or a copy into @h) that may end past the size: this
 * mount must be registered as a writer of @h on the connection to its
 * server that is up now (docs/DESIGN.md, "Writers and bytes past the
 * size").  Done by the open for writing of a file this mount did not
 * create (whose GETATTR it replaces: the reply carries the attributes),
 * and again before a write after that server's connection changed: then
 * what this mount wrote and has not published goes with the registration
 * (max-merged into the size first), so the cut the server makes when no
 * other writer is registered keeps it.  Returns 1 if it registered now
 * (*@out, if not NULL, then has the attributes), 0 if it was registered
 * (or the server has no registrations), or -errno.
 */
static int mnt_writer_register(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
			       struct orch_attr *out)
{
	uint64_t cur = orch_client_conn_gen(m->m_cl, orch_handle_server(h)), gen = 0, end;
	struct orch_attr a, rep;
	int64_t mtime_ns;
	int error;

	if (orch_mnt_inode_wreg_check(&m->m_itab, h, cur))
		return 0;
	orch_mnt_wb_wait(m, h, false);
	end = orch_mnt_inode_wend(&m->m_itab, h, &mtime_ns);
	error = orch_fs_writers(m->m_cl, cred, h, ORCH_WRITERS_REGISTER, end, mtime_ns, &a, &gen);
	if (!error) {
		if (end)
			orch_mnt_inode_extended(&m->m_itab, end, mtime_ns, &a, &rep);
		if (out)
			*out = a;
	}
	orch_mnt_inode_wreg_set(&m->m_itab, h, error && error != -ENOSYS ? 0 : gen);
	if (error == -ENOSYS)
		return 0;  /* a server without registrations makes no cuts either */
	return error ? error : 1;
}

/*
 * At the last close of @f's inode in this mount: releases its writer
 * registration, if any (after which the server may cut past the size, so
 * only once nothing is left unpublished), and its open registration
 * (mnt_open_register), in one request: in a replica group each is a log
 * entry.  The server applies CLOSE after RELEASE, so the last close of a
 * removed file frees it after its size is published.
 */
static void mnt_registrations_release(struct orch_mnt *m, const struct orch_cred *cred,
				      struct mnt_file *f)
{
	uint64_t h = f->f_handle, cur = orch_client_conn_gen(m->m_cl, orch_handle_server(h));
	uint64_t wgen = 0, ogen = 0;
	bool writer = orch_mnt_inode_wreg_take_last(&m->m_itab, h, true, &wgen);
	uint32_t flags = 0;
	int error;

	/* A registration lives on its connection: one that changed took it along. */
	if (writer && wgen == cur)
		flags |= ORCH_WRITERS_RELEASE;
	if (orch_mnt_inode_released(&m->m_itab, h, &ogen) && ogen == cur)
		flags |= ORCH_WRITERS_CLOSE;
	error = flags ? orch_fs_writers(m->m_cl, cred, h, flags, 0, 0, NULL, NULL) : 0;
	if (error && (flags & ORCH_WRITERS_RELEASE) && error != -ENOSYS && error != -ENOENT)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot release the writer registration: "
				   "ino=%#llx: %s", (unsigned long long)h, strerror(-error));
	if (writer)
		orch_mnt_inode_wreg_set(&m->m_itab, h, 0);
}

void orch_mnt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_attr a, rep, zero = { 0 };
	struct orch_cred cred;
	bool dropping;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_OPEN);
	orch_mnt_readahead_once(m);
	orch_mnt_cred(req, &cred);
	error = orch_mnt_open_check(m, &cred, ino, fi->flags);
	if (error)
		goto out_err;
	/* The revalidation of close-to-open; O_TRUNC's SETATTR doubles as it. */
	if (fi->flags & O_TRUNC) {
		error = orch_mnt_publish_size(m, &cred, ino);
		if (!error)
			error = orch_fs_setattr(m->m_cl, &cred, ino, ORCH_SET_SIZE, &zero, &a);
		if (!error)
			orch_mnt_inode_setattr_done(&m->m_itab, &a, true, true, &rep);
		/* Before the first write: the server answers a write at once (write-behind). */
		if (!error && (fi->flags & O_ACCMODE) != O_RDONLY) {
			error = mnt_writer_register(m, &cred, ino, NULL);
			error = error > 0 ? 0 : error;
		}
	} else {
		uint64_t asked = orch_mnt_inode_asked(&m->m_itab);

		error = (fi->flags & O_ACCMODE) != O_RDONLY ? mnt_writer_register(m, &cred, ino, &a)
							     : 0;
		if (error > 0) {
			error = 0;
		} else if (!error) {
			/* Leased attributes are current: every change since was pushed. */
			error = orch_mnt_getattr(m, &cred, ino, &a);
		}
		if (!error)
			orch_mnt_inode_update(&m->m_itab, &a, asked, &rep);
	}
	if (error)
		goto out_err;
	error = mnt_file_attach(m, fi, ino);
	if (error)
		goto out_err;
	fi->keep_cache = orch_mnt_inode_cto_open(&m->m_itab, &a, true, &dropping);
	atomic_store(&mnt_file_of(fi)->f_cto_dropping, dropping);
	orch_mnt_inode_set_fresh(&m->m_itab, ino, false);
	orch_mnt_inode_opened(&m->m_itab, ino, 0);
	/* Before the reply: an unlink after the open must find it registered. */
	mnt_open_register(m, &cred, ino);
	if (fuse_reply_open(req, fi)) {
		/* Never open in the program: as its release would have. */
		mnt_registrations_release(m, &cred, mnt_file_of(fi));
		mnt_file_discard(m, mnt_file_of(fi));
	}
	return;
out_err:
	orch_mnt_reply_err(req, error);
}

void orch_mnt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_attr a, rep, zero = { 0 };
	struct orch_fs_stamps st;
	struct orch_cred cred;
	bool existed = false, dropping;
	uint64_t sent_ms, asked;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_CREATE);
	orch_mnt_readahead_once(m);
	orch_mnt_cred(req, &cred);
	asked = orch_mnt_inode_asked(&m->m_itab);
	sent_ms = orch_time_now_ms();
	/* A new file registers us as its writer: no round trip before its first write. */
	error = orch_fs_create_stamped(m->m_cl, &cred, parent, name, S_IFREG | (mode & 07777), 0,
				       ((fi->flags & O_EXCL) ? ORCH_CREATE_EXCL : 0) |
				       ORCH_CREATE_WRITER | ORCH_CREATE_OPEN, &a, &existed, &st);
	if (!error)
		orch_mnt_lc_fill(m, orch_mnt_lc_credkey(&m->m_lc, &cred), parent, name, 0, &a,
				 &st, sent_ms);
	/*
	 * The kernel asks CREATE only for a name it believed absent; if another
	 * client made it meanwhile, this is an open of that file.
	 */
	if (!error && existed) {
		error = orch_mnt_open_check(m, &cred, a.handle, fi->flags);
		if (!error && (fi->flags & O_TRUNC)) {
			int64_t wmtime;
			bool cut = a.size || orch_mnt_inode_wend(&m->m_itab, a.handle, &wmtime);

			error = orch_mnt_publish_size(m, &cred, a.handle);
			if (!error && cut)
				error = orch_fs_setattr(m->m_cl, &cred, a.handle, ORCH_SET_SIZE,
							&zero, &a);
			if (!error && cut)
				orch_mnt_inode_setattr_done(&m->m_itab, &a, true, true, &rep);
		}
	}
	if (!error)
		error = mnt_file_attach(m, fi, a.handle);
	if (error) {
		orch_mnt_reply_err(req, error);
		return;
	}
	/*
	 * This open's keep_cache is off: a file this mount knew under another
	 * name counts as dropping its pages (orch_mnt_inode_cto_open).
	 */
	orch_mnt_inode_cto_open(&m->m_itab, &a, false, &dropping);
	atomic_store(&mnt_file_of(fi)->f_cto_dropping, dropping);
	if (orch_mnt_reply_entry_named(req, parent, name, orch_mnt_lc_credkey(&m->m_lc, &cred), &a,
				       asked, fi, existed ? 0 : st.gen)) {
		mnt_file_discard(m, mnt_file_of(fi)); /* no RELEASE will come for it */
		if (!existed)
			orch_fs_writers(m->m_cl, &cred, a.handle,
					ORCH_WRITERS_RELEASE | ORCH_WRITERS_CLOSE, 0, 0, NULL, NULL);
		return;
	}
	/* A new file is registered as open by its CREATE (OPEN); an existing one is not. */
	if (existed)
		mnt_open_register(m, &cred, a.handle);
	if (!existed) {
		/* The reference for the next open's keep_cache (no pages yet). */
		orch_mnt_inode_cto_set(&m->m_itab, &a);
		orch_mnt_inode_set_fresh(&m->m_itab, a.handle, true);
		orch_mnt_inode_wreg_created(&m->m_itab, a.handle, st.gen);
	}
}

void orch_mnt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	struct orch_attr a;
	size_t got = 0;
	char *buf;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_READ);
	mnt_file_used(m, mnt_file_of(fi));
	orch_mnt_cred(req, &cred);
	/* A server answers a READ at once, a WRITE after its commit. */
	orch_mnt_wb_wait(m, ino, false);
	/* Registered again after the server's connection changed (a restart). */
	mnt_open_register(m, &cred, ino);
	error = mnt_file_attr(m, &cred, ino, &a);
	if (error)
		goto out_err;
	size = ORCH_MIN(size, (size_t)ORCH_IO_MAX);
	buf = malloc(size ? size : 1);
	if (!buf) {
		error = -ENOMEM;
		goto out_err;
	}
	error = orch_fs_read(m->m_cl, &cred, &a, (uint64_t)off, buf, size, &got);
	if (error) {
		free(buf);
		goto out_err;
	}
	atomic_fetch_add_explicit(&m->m_bytes_read, got, memory_order_relaxed);
	fuse_reply_buf(req, buf, got);
	free(buf);
	return;
out_err:
	orch_mnt_reply_err(req, error);
}

/*
 * FUSE_CAP_HANDLE_KILLPRIV leaves it to us to take the set-id bits at a
 * write (Linux file_remove_privs): before the first write of a caller who is
 * not root into a file whose last known mode has them, the inode's server
 * clears them (ORCH_SET_KILL_SUIDGID, through the descriptor: the writer
 * need not own the file, nor still have write permission).  A file without
 * them, the usual case, costs nothing more.
 */
static int mnt_write_kill_suidgid(struct orch_mnt *m, const struct orch_cred *cred,
				  struct orch_attr *a)
{
	uint64_t stamp, sent_ms;
	struct orch_attr got;
	int error;

	if (!orch_perm_kill_suidgid(cred, a, false))
		return 0;
	sent_ms = orch_time_now_ms();
	error = orch_fs_setattr_stamped(m->m_cl, cred, a->handle,
					ORCH_SET_KILL_SUIDGID | ORCH_SET_HANDLE, a, &got, &stamp);
	if (error)
		return error;
	orch_mnt_lc_put_attr(&m->m_lc, &got, stamp, sent_ms);
	orch_mnt_inode_setattr_done(&m->m_itab, &got, false, false, a);
	return 0;
}

void orch_mnt_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		    off_t off, struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct mnt_file *f = mnt_file_of(fi);
	struct orch_cred cred;
	struct orch_attr a;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_WRITE);
	mnt_file_used(m, f);
	orch_mnt_cred(req, &cred);
	mnt_open_register(m, &cred, ino);
	error = mnt_file_attr(m, &cred, ino, &a);
	if (!error)
		error = mnt_write_kill_suidgid(m, &cred, &a);
	if (!error)
		error = mnt_writer_register(m, &cred, ino, NULL);
	if (error < 0)
		goto out_err;
	error = orch_mnt_wb_write(m, &cred, &a, (uint64_t)off, buf, size, f->f_direct);
	if (error)
		goto out_err;
	orch_mnt_inode_written(&m->m_itab, ino, (uint64_t)off + size, orch_time_real_ns(),
			       orch_layout_is_valid(&a.layout)
				       ? orch_layout_servers(&a.layout, (uint64_t)off, size)
				       : ORCH_FS_SYNC_ALL);
	atomic_store(&f->f_dirty, true);
	atomic_fetch_add_explicit(&m->m_bytes_written, size, memory_order_relaxed);
	fuse_reply_write(req, size);
	return;
out_err:
	orch_mnt_reply_err(req, error);
}

/*
 * Publishes what @f wrote: max-merges the inode's size with the pending
 * written end and sets mtime to the time of the last write, as a local file
 * system would have -- unless a setattr of mtime or size came after that
 * write: then the time is 0, which the server takes as "leave it" --, then records
 * the result for close-to-open.  Nothing to do if @f wrote nothing since the
 * last time.
 */
static int mnt_file_extend(struct orch_mnt *m, const struct orch_cred *cred,
			   struct mnt_file *f, bool closing)
{
	struct orch_attr a, rep;
	uint64_t end, stamp = 0, sent_ms, gen;
	int64_t mtime_ns;
	int werr, error;

	/* The data first (write-behind), and the error of a write already answered. */
	werr = orch_mnt_wb_wait(m, f->f_handle, true);
	if (!atomic_exchange(&f->f_dirty, false))
		return werr;
	end = orch_mnt_inode_wend(&m->m_itab, f->f_handle, &mtime_ns);
	sent_ms = orch_time_now_ms();
	/*
	 * The close of the inode's only open file here: the size goes with the
	 * release of the writer registration, in the same round trip.
	 */
	if (closing && !werr && orch_mnt_inode_wreg_take_last(&m->m_itab, f->f_handle, false, &gen)) {
		/* Its reply leases the attributes: the next stat asks nobody. */
		if (gen == orch_client_conn_gen(m->m_cl, orch_handle_server(f->f_handle)))
			error = orch_fs_writers_stamped(m->m_cl, cred, f->f_handle,
							ORCH_WRITERS_RELEASE, end, mtime_ns, &a,
							NULL, &stamp);
		else
			error = -ENOSYS;
		if (error == -ENOSYS)
			error = orch_fs_extend_stamped(m->m_cl, cred, f->f_handle, end, mtime_ns,
						       &a, &stamp);
		orch_mnt_inode_wreg_set(&m->m_itab, f->f_handle, 0);
	} else {
		error = orch_fs_extend_stamped(m->m_cl, cred, f->f_handle, end, mtime_ns, &a,
					       &stamp);
	}
	if (!error)
		orch_mnt_lc_put_attr(&m->m_lc, &a, stamp, sent_ms);
	if (error) {
		/* Still to publish: the next flush, fsync or release retries. */
		atomic_store(&f->f_dirty, true);
		return werr ? werr : error;
	}
	orch_mnt_inode_extended(&m->m_itab, end, mtime_ns, &a, &rep);
	orch_mnt_inode_cto_set(&m->m_itab, &a);
	return werr;
}

void orch_mnt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;

	(void)ino;
	orch_mnt_count(m, ORCH_MNT_OP_FLUSH);
	mnt_file_used(m, mnt_file_of(fi));
	orch_mnt_cred(req, &cred);
	orch_mnt_reply_err(req, mnt_file_extend(m, &cred, mnt_file_of(fi), true));
}

/*
 * RELEASE carries no caller (the last close may come from any context), so
 * the size is published as root.  A failure here cannot reach the program;
 * it is logged.
 */
void orch_mnt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct mnt_file *f = mnt_file_of(fi);
	struct orch_cred cred = { 0 };
	bool unpublished;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_RELEASE);
	mnt_file_used(m, f);
	error = mnt_file_extend(m, &cred, f, true);
	unpublished = error != 0;
	if (error)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "at release: a write or the size could not be published: ino=%#llx: %s",
				   (unsigned long long)ino, strerror(-error));
	mnt_registrations_release(m, &cred, f);
	/* The close that could not publish told the program; nobody retries now. */
	if (unpublished)
		orch_mnt_inode_unpublished_drop(&m->m_itab, ino);
	orch_mnt_fh_del(&m->m_fhs, &f->f_fh);
	free(f);
	fuse_reply_err(req, 0);
}

/*
 * fallocate.  PUNCH_HOLE (with KEEP_SIZE, as Linux requires) frees the range
 * on the servers.  ZERO_RANGE is a punch of the part below the size (the
 * servers zero the unaligned edges and free the blocks between), then, without
 * KEEP_SIZE, the size rule of mode 0: the part past the old size reads as
 * zeros once the size grows, since growing cuts whatever lay past it.  Mode
 * 0 and KEEP_SIZE succeed without reserving space: the store is sparse and
 * allocates at write time, so a later write can still meet ENOSPC
 * (documented); mode 0 extends the size.  Other modes (COLLAPSE_RANGE,
 * INSERT_RANGE) answer EOPNOTSUPP.
 */
void orch_mnt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_attr a, in = { 0 }, rep;
	struct orch_cred cred;
	uint64_t end;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_FALLOCATE);
	mnt_file_used(m, mnt_file_of(fi));
	orch_mnt_cred(req, &cred);
	if (off < 0 || len <= 0) {
		error = -EINVAL;
		goto out_reply;
	}
	if (mode != 0 && mode != FALLOC_FL_KEEP_SIZE &&
	    mode != (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE) &&
	    (mode & ~FALLOC_FL_KEEP_SIZE) != FALLOC_FL_ZERO_RANGE) {
		error = -EOPNOTSUPP;
		goto out_reply;
	}
	end = (uint64_t)off + (uint64_t)len;
	orch_mnt_inode_sync_owe(&m->m_itab, ino, ORCH_FS_SYNC_ALL);
	error = orch_mnt_publish_size(m, &cred, ino);
	if (!error)
		error = orch_fs_getattr(m->m_cl, &cred, ino, &a);
	if (error)
		goto out_reply;
	/* Both punch only below the size (orch_fs_punch); nothing lies past it. */
	if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE)) {
		error = orch_fs_punch(m->m_cl, &cred, &a, (uint64_t)off, (uint64_t)len);
		/* Blocks went, while size and times stay: count again. */
		orch_mnt_inode_blocks_forget(&m->m_itab, ino);
	}
	if (!error && !(mode & (FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) && end > a.size) {
		in.size = end;
		/* The kernel sends fallocate only for a descriptor opened for writing. */
		error = orch_fs_setattr(m->m_cl, &cred, ino, ORCH_SET_SIZE | ORCH_SET_HANDLE, &in,
					&a);
		if (!error)
			orch_mnt_inode_setattr_done(&m->m_itab, &a, true, true, &rep);
	}
out_reply:
	orch_mnt_reply_err(req, error);
}

/*
 * A destination this mount just created and nobody has written or opened
 * since (what cp(1) copies into) takes the source's layout first: then
 * every strip of the copy lands on the server that holds the source's,
 * which shares the blocks instead of copying them.  Only then: a writer
 * still using the old layout would put its strips where the new one does
 * not look (see docs/mount.md for the one window left: another mount
 * opening the new name before the copy).  Best effort: if it fails, the
 * copy is a plain one.
 */
static void mnt_adopt_layout(struct orch_mnt *m, const struct orch_cred *cred,
			     const struct orch_attr *src, struct orch_attr *dst)
{
	struct orch_attr in = { .layout = src->layout }, a;

	if (!orch_mnt_inode_take_fresh(&m->m_itab, dst->handle))
		return;
	if (dst->size || src->handle == dst->handle || !S_ISREG(dst->mode) ||
	    (src->layout.strip_size == dst->layout.strip_size &&
	     src->layout.stripe_count == dst->layout.stripe_count &&
	     src->layout.first_server == dst->layout.first_server))
		return;
	if (orch_fs_setattr(m->m_cl, cred, dst->handle, ORCH_SET_LAYOUT, &in, &a) == 0)
		orch_mnt_inode_setattr_done(&m->m_itab, &a, false, false, dst);
}

/*
 * copy_file_range: the servers copy (orch_fs_copy_range), sharing blocks
 * where they can (a reflink clone); no data passes through here.  What this mount wrote to either file but has not published
 * is published first, so the copy sees it and clamps at the right size; the
 * destination's new end is then pending like a write's.  (The kernel has
 * written back and will invalidate the page cache of both ranges.)
 */
void orch_mnt_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			      struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			      struct fuse_file_info *fi_out, size_t len, int flags)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct mnt_file *f = mnt_file_of(fi_out);
	struct orch_attr src, dst;
	struct orch_cred cred;
	uint64_t copied = 0;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_COPY_FILE_RANGE);
	mnt_file_used(m, mnt_file_of(fi_in));
	mnt_file_used(m, f);
	orch_mnt_cred(req, &cred);
	if (flags) {
		error = -EINVAL;
		goto out_err;
	}
	error = orch_mnt_publish_size(m, &cred, ino_in);
	if (!error && ino_out != ino_in)
		error = orch_mnt_publish_size(m, &cred, ino_out);
	if (!error)
		error = orch_fs_getattr(m->m_cl, &cred, ino_in, &src);
	if (!error)
		error = orch_fs_getattr(m->m_cl, &cred, ino_out, &dst);
	if (error)
		goto out_err;
	if (ino_in == ino_out && (uint64_t)off_in < (uint64_t)off_out + len &&
	    (uint64_t)off_out < (uint64_t)off_in + len) {
		error = -EINVAL; /* overlapping ranges of one file, as Linux refuses */
		goto out_err;
	}
	mnt_adopt_layout(m, &cred, &src, &dst);
	error = mnt_writer_register(m, &cred, ino_out, NULL);
	if (error < 0)
		goto out_err;
	error = orch_fs_copy_range(m->m_cl, &cred, &src, (uint64_t)off_in, &dst,
				   (uint64_t)off_out, len, &copied);
	if (error)
		goto out_err;
	if (copied) {
		orch_mnt_inode_written(&m->m_itab, ino_out, (uint64_t)off_out + copied,
				       orch_time_real_ns(), ORCH_FS_SYNC_ALL);
		atomic_store(&f->f_dirty, true);
	}
	fuse_reply_write(req, (size_t)copied);
	return;
out_err:
	orch_mnt_reply_err(req, error);
}

void orch_mnt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	struct orch_mnt *m = orch_mnt_of(req);
	struct orch_cred cred;
	struct orch_attr a;
	uint64_t servers;
	int error;

	orch_mnt_count(m, ORCH_MNT_OP_FSYNC);
	mnt_file_used(m, mnt_file_of(fi));
	orch_mnt_cred(req, &cred);
	/*
	 * Only the servers this mount changed the file's data on since its
	 * last fsync: a small file's fsync asks one or two servers, not every
	 * one its layout spans, and does not wait for one that fails over
	 * without holding any of it.  Taken before the writes still behind
	 * are flushed: each was counted when it was taken.
	 */
	servers = orch_mnt_inode_sync_take(&m->m_itab, ino);
	/* The size goes first, so the fsync makes it durable too. */
	error = mnt_file_extend(m, &cred, mnt_file_of(fi), false);
	if (!error)
		error = mnt_file_attr(m, &cred, ino, &a);
	if (!error)
		error = orch_fs_fsync(m->m_cl, &cred, &a, datasync, servers);
	if (error)
		orch_mnt_inode_sync_owe(&m->m_itab, ino, servers);
	orch_mnt_reply_err(req, error);
}
