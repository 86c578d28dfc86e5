/*
 * liborchard's file-system calls, by handle (OrangeFS "sysint"): each sends
 * the request to the server that holds the object and decodes the answer.
 * Used by the CLI and the FUSE mount.  Returns 0 or -errno as a local file
 * system would (ENOENT, EEXIST, EACCES, ...), or the transport errors of
 * rpc.h (-ETIMEDOUT, -EIO, -EHOSTDOWN).  Any thread.
 *
 * Every call that returns attributes returns them with the size: there is no
 * size-less attribute fetch.
 */
#ifndef ORCH_CLIENT_FS_H
#define ORCH_CLIENT_FS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "client/rpc.h"
#include "proto/msg.h"
#include "proto/types.h"

/* The calling process's credentials (uid, gid, supplementary groups). */
void orch_fs_cred_self(struct orch_cred *out);

/*
 * Looks up @name in directory @parent.  *@out gets the child's attributes;
 * if the child inode is on another server than the entry, they are fetched
 * from there (a second request).
 */
int orch_fs_lookup(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		   const char *name, struct orch_attr *out);

int orch_fs_getattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		    struct orch_attr *out);

/*
 * For a lease cache (rpc.h): the same calls, also giving the stamps of
 * the replies, 0 where nothing may be cached.  entry: the name's presence
 * or absence (a lookup's -ENOENT has one); attr: the attributes returned.
 */
struct orch_fs_stamps {
	uint64_t entry;
	uint64_t attr;
	uint64_t gen;   /* create: rep.gen of the CREATE (rpc.h) */
};
int orch_fs_lookup_stamped(struct orch_client *cl, const struct orch_cred *cred,
			   uint64_t parent, const char *name, struct orch_attr *out,
			   struct orch_fs_stamps *st);
int orch_fs_getattr_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			    struct orch_attr *out, uint64_t *stamp);
/* A listing's stamp covers its names (plain, not plus). */
int orch_fs_readdir_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t dir,
			    uint64_t cookie, uint32_t max, bool plus, struct orch_dirent *out,
			    uint32_t *n, bool *eof, uint64_t *stamp);
int orch_fs_setattr_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			    uint32_t valid, const struct orch_attr *in, struct orch_attr *out,
			    uint64_t *stamp);
int orch_fs_extend_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			   uint64_t size, int64_t mtime_ns, struct orch_attr *out,
			   uint64_t *stamp);
/*
 * @flags: ORCH_CREATE_EXCL, ORCH_CREATE_WRITER (proto/types.h: a new file
 * registers this client as its writer on the connection of generation
 * st->gen; @st may be NULL).
 */
int orch_fs_create_stamped(struct orch_client *cl, const struct orch_cred *cred,
			   uint64_t parent, const char *name, uint32_t mode, uint64_t rdev,
			   uint32_t flags, struct orch_attr *out, bool *existed,
			   struct orch_fs_stamps *st);

/*
 * setattr with ORCH_SET_* bits in @valid.  A smaller size frees the data
 * beyond it on every server before this returns.
 */
int orch_fs_setattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		    uint32_t valid, const struct orch_attr *in, struct orch_attr *out);

/*
 * Creates a regular file, FIFO, socket or device node (@mode has the type
 * bits; @rdev for devices).  @excl: O_EXCL semantics; without it an existing
 * regular file is returned with *@existed set (may be NULL).
 */
int orch_fs_create(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		   const char *name, uint32_t mode, uint64_t rdev, bool excl,
		   struct orch_attr *out, bool *existed);
int orch_fs_mkdir(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		  const char *name, uint32_t mode, struct orch_attr *out);
int orch_fs_symlink(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		    const char *name, const char *target, struct orch_attr *out);
/* Target into @buf (NUL-terminated); -ENAMETOOLONG if @buflen is too small. */
int orch_fs_readlink(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		     char *buf, size_t buflen);
int orch_fs_link(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		 uint64_t newparent, const char *newname, struct orch_attr *out);
int orch_fs_unlink(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		   const char *name);
int orch_fs_rmdir(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		  const char *name);
/*
 * @flags: 0, RENAME_NOREPLACE or RENAME_EXCHANGE.  A directory moved into its
 * own subtree is refused with -EINVAL (checked by walking parent pointers).
 */
int orch_fs_rename(struct orch_client *cl, const struct orch_cred *cred, uint64_t parent,
		   const char *name, uint64_t newparent, const char *newname,
		   uint32_t flags);

/*
 * One batch of directory @dir from @cookie (0 = start), at most @max
 * (<= ORCH_READDIR_MAX) entries into @out.  With @plus, entries carry
 * attributes (fetched separately for children held on another server).
 * *@eof is true when nothing follows.
 */
int orch_fs_readdir(struct orch_client *cl, const struct orch_cred *cred, uint64_t dir,
		    uint64_t cookie, uint32_t max, bool plus, struct orch_dirent *out,
		    uint32_t *n, bool *eof);

/* Summed over every server. */
int orch_fs_statfs(struct orch_client *cl, const struct orch_cred *cred,
		   struct orch_statfs *out);

/*
 * Reads up to @len bytes at @off of the file @a (its layout and size; the
 * read stops at a->size).  Strips go to their servers in parallel.  Holes
 * read as zeros.  *@got gets the bytes read.
 */
int orch_fs_read(struct orch_client *cl, const struct orch_cred *cred,
		 const struct orch_attr *a, uint64_t off, void *buf, size_t len,
		 size_t *got);

/*
 * Writes @len bytes at @off of file @a, strips in parallel.  Does not change
 * the size in the inode: call orch_fs_extend() afterwards (on close, fsync or
 * flush), as the inode's size is authoritative.
 */
int orch_fs_write(struct orch_client *cl, const struct orch_cred *cred,
		  const struct orch_attr *a, uint64_t off, const void *buf, size_t len);

/*
 * The same in two halves, for write-behind: send returns once every WRITE
 * is on its way (@buf may then be reused) with *@out to give to
 * orch_fs_write_wait() exactly once, which waits for the acknowledgements
 * and returns the first error.  Requests to one server are applied in the
 * order they were sent.
 */
struct orch_fs_wio;
int orch_fs_write_send(struct orch_client *cl, const struct orch_cred *cred,
		       const struct orch_attr *a, uint64_t off, const void *buf, size_t len,
		       struct orch_fs_wio **out);
int orch_fs_write_wait(struct orch_client *cl, struct orch_fs_wio *w);

/*
 * Where a write in flight went: a server and the generation of the
 * connection its WRITEs went on (orch_client_conn_gen), 0 for one not sent
 * yet, which goes at the wait.  A WRITE whose try fails as a failover makes
 * calls fail is sent again by the wait, to the next leader: so a later
 * write of the same bytes sent on another generation of that server's
 * connection can land before it (orch_mnt_wb_write's concern).
 */
struct orch_fs_sent {
	unsigned int server;
	uint64_t gen;
};

/*
 * The distinct places @w's WRITEs went: *@out (to free) gets *@n of them.
 * Only before orch_fs_write_wait().  0 or -ENOMEM.
 */
int orch_fs_write_sent(const struct orch_fs_wio *w, struct orch_fs_sent **out, size_t *n);

/*
 * copy_file_range: copies @len bytes at @off_in of file @src to @off_out of
 * file @dst on the servers (each server copies the strips of @src it holds
 * to wherever @dst's layout puts them; no data passes through the client).
 * The copy stops at src->size; *@copied gets the bytes copied.  Like
 * orch_fs_write it does not change @dst's size: call orch_fs_extend().
 */
int orch_fs_copy_range(struct orch_client *cl, const struct orch_cred *cred,
		       const struct orch_attr *src, uint64_t off_in,
		       const struct orch_attr *dst, uint64_t off_out, uint64_t len,
		       uint64_t *copied);

/*
 * Dedupe (FIDEDUPERANGE): where bytes [@off_in, +@len) of @src equal
 * [@off_out, +@len) of @dst, @dst shares @src's blocks and its own are
 * freed.  Every server is asked to compare first, and only if all found
 * their pieces equal are they asked to share, each piece atomically (a
 * concurrent writer can still make a later piece differ).  Blocks can only
 * be shared within one server, so only pieces that both layouts put on the
 * same server, in whole blocks, count: *@deduped gets those bytes.
 * -EBADE when the contents differ (then nothing changed), -EXDEV when the
 * layouts put some of the range on two servers, -EINVAL past either
 * file's end.
 */
int orch_fs_dedupe(struct orch_client *cl, const struct orch_cred *cred,
		   const struct orch_attr *src, uint64_t off_in,
		   const struct orch_attr *dst, uint64_t off_out, uint64_t len,
		   uint64_t *deduped);

/*
 * The bytes of storage file @a holds (st_blocks * 512): the blocks each
 * server's store maps for its strips, clones included, summed over the
 * servers holding a strip below @size (the size the caller reports, which
 * may be ahead of @a's).  One request per such server, all in flight at once.
 */
int orch_fs_allocated(struct orch_client *cl, const struct orch_cred *cred,
		      const struct orch_attr *a, uint64_t size, uint64_t *out);

/*
 * Frees [@off, @off+@len) of file @a on every server of its layout (holes
 * read as zeros); the size does not change.
 */
int orch_fs_punch(struct orch_client *cl, const struct orch_cred *cred,
		  const struct orch_attr *a, uint64_t off, uint64_t len);

/* Max-merges the size to @size and sets mtime (0 = now).  *@out may be NULL. */
int orch_fs_extend(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		   uint64_t size, int64_t mtime_ns, struct orch_attr *out);

/*
 * CL2SV_WRITERS to @h's server (docs/DESIGN.md, "Writers and bytes past
 * the size").  ORCH_WRITERS_REGISTER before writing past the size:
 * answered once whatever a dead writer left past it is cut; RELEASE once
 * everything written is published.  Both first max-merge the size with
 * @size (0: none) and set mtime from @mtime_ns, as EXTEND.  *@gen gets the
 * generation of the connection the registration lives on (rpc.h), also on
 * failure; -ENOSYS from a server that predates writer registration.
 * *@out (may be NULL) gets the attributes after.
 */
int orch_fs_writers(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		    uint32_t flags, uint64_t size, int64_t mtime_ns, struct orch_attr *out,
		    uint64_t *gen);
/* The same, *@stamp getting the stamp of the attributes (0: not leased). */
int orch_fs_writers_stamped(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			    uint32_t flags, uint64_t size, int64_t mtime_ns,
			    struct orch_attr *out, uint64_t *gen, uint64_t *stamp);

/*
 * orch_fs_writers(@flags) for each of the @n handles @hs, without size or
 * mtime, all in flight at once (each to its inode's server; at most
 * ORCH_FS_WRITERS_MANY): errors[i] gets the result for hs[i], 0 or -errno
 * as orch_fs_writers, and gens[i] the generation of the connection it
 * went on (0 if never sent).  -EINVAL for too many, else 0.
 */
#define ORCH_FS_WRITERS_MANY 64
int orch_fs_writers_many(struct orch_client *cl, const struct orch_cred *cred, uint32_t flags,
			 const uint64_t *hs, size_t n, int *errors, uint64_t *gens);

/*
 * orch_fs_writers(RELEASE), or with a server that predates it, EXTEND
 * (nothing if @size is 0 and @out NULL).
 */
int orch_fs_writer_release(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			   uint64_t size, int64_t mtime_ns, struct orch_attr *out);

/*
 * Makes the file's metadata durable on its inode's server, and its data on
 * the servers of its layout that @servers names (orch_layout_servers' bits;
 * ORCH_FS_SYNC_ALL: all of them).  A server a caller never sent a change
 * of the file to holds none it must make durable, and need not be asked
 * (nor be up).
 */
#define ORCH_FS_SYNC_ALL UINT64_MAX
int orch_fs_fsync(struct orch_client *cl, const struct orch_cred *cred,
		  const struct orch_attr *a, bool datasync, uint64_t servers);

int orch_fs_getxattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		     const char *name, void *buf, size_t buflen, size_t *len);
int orch_fs_setxattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		     const char *name, const void *val, size_t len, int flags);
int orch_fs_listxattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		      char *buf, size_t buflen, size_t *len);
int orch_fs_removexattr(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
			const char *name);
int orch_fs_access(struct orch_client *cl, const struct orch_cred *cred, uint64_t h,
		   uint32_t mask);

/*
 * Resolves an absolute path ("/a/b") from the root, component by component.
 * Symlinks in the middle are followed (at most 40); the last component is
 * followed only if @follow.  *@out gets its attributes.
 */
int orch_fs_resolve(struct orch_client *cl, const struct orch_cred *cred,
		    const char *path, bool follow, struct orch_attr *out);

/*
 * Resolves the parent of @path and returns its attributes in *@parent and
 * the last component in @name (-EINVAL for "/").
 */
int orch_fs_resolve_parent(struct orch_client *cl, const struct orch_cred *cred,
			   const char *path, struct orch_attr *parent,
			   char name[ORCH_NAME_MAX + 1]);

#endif
