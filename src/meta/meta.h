/*
 * The namespace of one server, in SQLite (data_dir/meta.db, WAL mode,
 * synchronous=NORMAL).  No network code: the server, unit tests, fuzzers and
 * offline tools link this directly.
 *
 * Every function runs inside the transaction the caller opened with
 * orch_meta_begin(), or, if none is open, in its own autocommit transaction.
 * An operation that touches another server is split by the caller (the
 * server) into a local part done here plus an intent record written in the
 * same transaction (orch_meta_intent_insert), which the server replays until
 * the remote part is done.
 *
 * Threads: one struct orch_meta is used by one thread at a time (the server's
 * loop thread).  Nothing here blocks on anything but SQLite and the disk.
 *
 * Errors: 0 or -errno.  -ENOENT, -EEXIST, -ENOTDIR, -EISDIR, -ENOTEMPTY,
 * -EACCES, -EPERM, -ENAMETOOLONG, -EINVAL, -EBUSY (entry in the middle of a
 * cross-server operation), -ENOSPC (SQLITE_FULL), -ORCH_ECORRUPT (a record
 * that fails verification), -EIO (anything else; sqlite3_errmsg is logged),
 * -EREMOTE (a sticky-directory check that needs the owner of a child inode
 * held on another server; see unlink_check and rename).
 *
 * Permission checks use the caller's credentials exactly as a local Linux
 * file system does (owner/group/other bits, supplementary groups, uid 0
 * bypasses rw and needs one x bit to execute, sticky directories).
 */
#ifndef ORCH_META_META_H
#define ORCH_META_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto/types.h"

#define ORCH_META_FORMAT_VERSION 1

struct orch_meta;

/* Identity stamped into meta.db by mkfs and checked at every open. */
struct orch_meta_ident {
	char cluster_id[64];   /* from the config's [cluster] id */
	uint32_t server_index; /* this server's position in the config */
	uint32_t nservers;     /* servers in the cluster at mkfs */
	uint32_t strip_size;   /* default strip size for new files */
	/*
	 * mkfs only: a member of a replica group of several, made apart from
	 * the others, whose database must start identical to theirs (the log
	 * checks every change against the rows it finds): the root's times
	 * and the creation time are then 0, not now.
	 */
	bool replica;
};

/* --- Lifecycle ---------------------------------------------------------------- */

/*
 * Creates data_dir/meta.db with every table, stamps @id and the format
 * version, and, on server 0, creates the root directory (handle 1, mode 0755,
 * owner 0:0, nlink 2, parent 1).  The handle counter starts at 2 on server 0
 * and at 1 elsewhere.  -EEXIST if meta.db exists.
 */
int orch_meta_mkfs(const char *data_dir, const struct orch_meta_ident *id);

/*
 * Opens data_dir/meta.db.  Refuses, with a one-line reason in @err:
 * no database (-ENOENT: "not initialised, run orchard mkfs"), another format
 * version (-EPROTONOSUPPORT), another cluster id or server index (-EXDEV).
 * @expect->nservers and strip_size are not checked; @expect NULL checks
 * nothing (offline tools).  On success *@out is the caller's until
 * orch_meta_close().
 */
int orch_meta_open(const char *data_dir, const struct orch_meta_ident *expect,
		   struct orch_meta **out, char *err, size_t errlen);
void orch_meta_close(struct orch_meta *m);

/* The identity read from the database. */
const struct orch_meta_ident *orch_meta_ident(const struct orch_meta *m);

/*
 * Called whenever a record that a client may cache is written: the inode
 * @h (@name NULL) or the entry @name (@namelen bytes) of directory @h.  It
 * runs inside the transaction, before the commit; a change rolled back
 * afterwards was reported all the same, which costs a holder a refetch.
 * The server pushes cache invalidations from it (server/sv_lease.c).
 */
typedef void (*orch_meta_change_fn)(void *arg, uint64_t h, const char *name, size_t namelen);
void orch_meta_set_change_hook(struct orch_meta *m, orch_meta_change_fn fn, void *arg);

/*
 * Asked when the link count of regular file @h drops to 0: true if a
 * client has it open (server/sv_opens.c).  The inode is then kept with
 * nlink 0 and recorded in the orphan table, in the same transaction,
 * until orch_meta_orphan_free().
 */
typedef bool (*orch_meta_open_fn)(void *arg, uint64_t h);
void orch_meta_set_open_hook(struct orch_meta *m, orch_meta_open_fn fn, void *arg);

/* --- Transactions ------------------------------------------------------------ */

/*
 * BEGIN IMMEDIATE / COMMIT / ROLLBACK.  No nesting.  Inside a capture
 * (changes.c) they are a savepoint of the capture's transaction, its
 * release and its rollback: code that makes its own transactions runs
 * unchanged as an operation of a replica group.
 */
int orch_meta_begin(struct orch_meta *m);
int orch_meta_commit(struct orch_meta *m);
void orch_meta_abort(struct orch_meta *m);

/* Commits since open (for stats). */
uint64_t orch_meta_commit_count(const struct orch_meta *m);
/* Microseconds slept waiting for another connection's lock (busy handler). */
uint64_t orch_meta_busy_us(const struct orch_meta *m);

/*
 * Durability: the path of the WAL file (data_dir/meta.db-wal) and of the
 * database, which the server's flusher thread fdatasyncs for fsync requests.
 */
const char *orch_meta_db_path(const struct orch_meta *m);

struct sqlite3;

/*
 * Makes the namespace WAL durable against power loss: every transaction
 * committed (on any connection) before the call survives.  @db is a
 * connection of the caller's own to data_dir/meta.db (in WAL mode), used
 * by one thread at a time: the server's flusher thread passes its
 * checkpoint connection, so no request waits.  The WAL is synced through
 * SQLite's VFS (xSync), so the power-cut shim sees it.  Returns 0, or -EIO
 * (the reason is logged).  The data store syncs itself (orch_store_sync).
 */
int orch_meta_sync_wal(struct sqlite3 *db);

/* --- Inodes -------------------------------------------------------------------- */

/* Reads inode @h.  -ENOENT if this server has no such inode. */
int orch_meta_inode_get(struct orch_meta *m, uint64_t h, struct orch_attr *out);

/*
 * Creates an inode on this server with a fresh handle from the counter, from
 * @in (handle ignored; times of 0 become now).  Used for directories whose
 * entry lives on another server.  *@out gets the stored attributes.
 */
int orch_meta_inode_create(struct orch_meta *m, const struct orch_attr *in,
			   struct orch_attr *out);

/*
 * setattr: @valid is ORCH_SET_* bits, values from @in.  Permission rules as
 * Linux: mode by owner or root (clears S_ISGID if not in the file's group and
 * not root); uid by root only; gid by root, or the owner to a group he is in;
 * size needs write permission and a regular file (-EISDIR for a directory,
 * -EINVAL for others); *_NOW need owner or write permission, explicit times
 * need the owner or root.  A chown (root's too), a truncate and
 * ORCH_SET_KILL_SUIDGID (a write) clear the set-id bits as Linux does
 * (orch_perm_kill_suidgid), and drop the file capabilities (ORCH_XATTR_CAPS)
 * whoever asks; KILL_SUIDGID needs write permission, and with
 * ORCH_SET_HANDLE neither it nor the size needs it.  ctime is set to now on
 * every change.  The caller frees data beyond a smaller size.
 * *@out gets the new attributes, *@old_size the size before.
 */
int orch_meta_inode_setattr(struct orch_meta *m, const struct orch_cred *cred,
			    uint64_t h, uint32_t valid, const struct orch_attr *in,
			    struct orch_attr *out, uint64_t *old_size);

/*
 * Max-merges the size of regular file @h up to @size and sets mtime/ctime to
 * @mtime_ns if non-zero (a writer reporting what it wrote).  No permission
 * check: the caller wrote the data under its own open.
 */
int orch_meta_inode_extend(struct orch_meta *m, uint64_t h, uint64_t size,
			   int64_t mtime_ns, struct orch_attr *out);

/*
 * Adds @delta (+1 or -1) to the link count of a non-directory inode; at zero
 * the inode and its xattrs are deleted and *@freed is set true (the caller
 * then frees its data everywhere), unless the open hook says a client has
 * the file open: then it stays, an orphan with nlink 0 (*@freed false).
 * Updates ctime.  -ENOENT if absent, or +1 on an orphan.
 */
int orch_meta_inode_nlink_adjust(struct orch_meta *m, uint64_t h, int delta,
				 struct orch_attr *out, bool *freed);

/*
 * Deletes directory inode @h if it has no entries: -ENOTEMPTY otherwise,
 * 0 if it does not exist (already done).  Used for directories whose entry
 * lives on another server.
 */
int orch_meta_dir_remove(struct orch_meta *m, uint64_t h);

/* Sets the parent pointer of @h (a directory moved by rename). */
int orch_meta_inode_set_parent(struct orch_meta *m, uint64_t h, uint64_t parent);

/* --- Entries --------------------------------------------------------------------- */

/*
 * Finds @name in directory @parent (held here).  Needs exec permission on the
 * parent.  Entries in the middle of a cross-server create are invisible.
 * *@out gets handle, type, cookie; out->has_attr and out->attr are filled if
 * the child inode is on this server.
 */
int orch_meta_lookup(struct orch_meta *m, const struct orch_cred *cred,
		     uint64_t parent, const char *name, size_t namelen,
		     struct orch_dirent *out);

/*
 * Creates entry @name in @parent and a new inode on this server for it, in
 * one step: regular files, symlinks (@target), FIFOs, sockets, devices
 * (@rdev), and directories placed here.  Needs write+exec on the parent
 * (-EACCES), -EEXIST if the name exists, except that a regular-file create
 * with @excl false on an existing regular file returns it with
 * *@existed = true (caller then applies O_TRUNC rules).  The new inode's
 * uid is cred->uid; gid is cred->gid, or the parent's gid if the parent is
 * S_ISGID (directories then inherit S_ISGID).  Files get layout @layout
 * (NULL: strip_size of the ident, striped over all servers, starting here).
 * Parent mtime/ctime become now; a new directory adds 1 to the parent nlink.
 * A mode type of 0 means S_IFREG.  If the existing file's inode is held on
 * another server, only out->handle is set (out->nlink is 0).
 */
int orch_meta_create(struct orch_meta *m, const struct orch_cred *cred,
		     uint64_t parent, const char *name, size_t namelen,
		     uint32_t mode, uint64_t rdev, const char *target,
		     const struct orch_layout *layout, bool excl,
		     struct orch_attr *out, bool *existed);

/*
 * Reserves @name in @parent for a child that another server is creating
 * (pending: invisible to lookup and readdir, -EEXIST to other creates,
 * -EBUSY to unlink and rename).  Same permission checks as create.
 */
int orch_meta_dirent_reserve(struct orch_meta *m, const struct orch_cred *cred,
			     uint64_t parent, const char *name, size_t namelen,
			     uint32_t type);

/*
 * Completes a reservation: the entry now names @child (visible), or, with
 * @child 0, the reservation is dropped.  A directory child adds 1 to the
 * parent's nlink.  Parent mtime/ctime become now.  Idempotent for replays:
 * 0 if the entry already names @child or (@child 0) is gone; -EEXIST if it
 * names another inode, -ENOENT if @child is non-zero and the entry is gone.
 */
int orch_meta_dirent_commit(struct orch_meta *m, uint64_t parent, const char *name,
			    size_t namelen, uint64_t child);

/*
 * Marks an existing entry busy (in the middle of a cross-server unlink,
 * rmdir or rename: still visible, -EBUSY to other mutations) or clears it.
 * -EBUSY if it is already busy or pending; clearing a live entry is 0.
 */
int orch_meta_dirent_set_busy(struct orch_meta *m, uint64_t parent, const char *name,
			      size_t namelen, bool busy);

/*
 * Checks that @cred may remove @name from @parent (write+exec on parent,
 * sticky rule) and that its type fits: @want_dir true (rmdir) needs a
 * directory (-ENOTDIR), false (unlink) needs a non-directory (-EISDIR).
 * Returns the entry in *@out; a child directory held here must be empty
 * (-ENOTEMPTY).  Changes nothing.  -EBUSY for a pending or busy entry,
 * -EPERM for the sticky rule.  -EREMOTE (with *@out filled) when the parent
 * is sticky, @cred is neither root nor the parent's owner, and the child is
 * held elsewhere: the caller allows the removal only if the child's owner
 * on its server is cred->uid.
 */
int orch_meta_unlink_check(struct orch_meta *m, const struct orch_cred *cred,
			   uint64_t parent, const char *name, size_t namelen,
			   bool want_dir, struct orch_dirent *out);

/*
 * Removes entry @name from @parent (after orch_meta_unlink_check; a busy
 * entry is accepted, the caller marked it for this very unlink).  Parent
 * mtime/ctime become now, nlink drops by one for a directory child.  If the
 * child inode is held here: a directory is deleted, a non-directory loses a
 * link and is deleted at zero with *@freed set (the caller frees its data).
 * If the child is elsewhere, *@remote is set and the caller adjusts it there.
 */
int orch_meta_unlink(struct orch_meta *m, uint64_t parent, const char *name,
		     size_t namelen, bool *remote, bool *freed);

/*
 * Removes entry @name from @parent without touching the inode it names (the
 * source side of a rename into a directory on another server; a busy entry
 * is accepted).  Parent mtime/ctime become now; nlink drops by one for a
 * directory child.
 */
int orch_meta_dirent_remove(struct orch_meta *m, uint64_t parent, const char *name,
			    size_t namelen);

/*
 * Adds entry @name in @parent for existing inode @child of type @type (hard
 * link, or the target side of a rename).  Needs write+exec on the parent
 * (@cred NULL skips the check, for replays).  -EEXIST if present.  Does not
 * touch the child's link count.
 */
int orch_meta_dirent_insert(struct orch_meta *m, const struct orch_cred *cred,
			    uint64_t parent, const char *name, size_t namelen,
			    uint64_t child, uint32_t type);

/*
 * Rename with both directories on this server.  @flags: 0, RENAME_NOREPLACE
 * or RENAME_EXCHANGE (linux/fs.h values).  Linux rules: permissions on both
 * parents and the sticky rule; dir over non-dir -ENOTDIR, non-dir over dir
 * -EISDIR, over a non-empty directory held here -ENOTEMPTY; same inode:
 * no-op.  The caller has checked that a moved directory does not go into its
 * own subtree.  A replaced target inode held here loses a link (freed at
 * zero: *@freed_handle set to it); one held elsewhere is returned in
 * *@remote_victim for the caller to adjust there (0 if none).  A moved
 * directory held here gets its parent pointer updated; one held elsewhere is
 * returned in *@moved_remote_dir (0 if none).  Parent nlinks, mtimes and the
 * moved inode's ctime are updated.
 * -EBUSY if either entry is pending or busy; -EPERM for the sticky rule;
 * -EREMOTE (nothing changed) if the sticky rule needs the owner of an inode
 * held elsewhere: the caller checks it there and calls again with @cred
 * NULL, which skips every permission check (also for replays).  A moved
 * directory held here must be writable by @cred when its parent changes;
 * for one held elsewhere that check is the caller's.
 * RENAME_EXCHANGE has no victim: *@remote_victim then reports the second
 * moved directory held elsewhere (the one now under @oldparent, its parent
 * pointer to be set there), with *@remote_victim_type S_IFDIR.
 */
int orch_meta_rename(struct orch_meta *m, const struct orch_cred *cred,
		     uint64_t oldparent, const char *oldname, size_t oldlen,
		     uint64_t newparent, const char *newname, size_t newlen,
		     uint32_t flags, uint64_t *freed_handle, uint64_t *remote_victim,
		     uint32_t *remote_victim_type, uint64_t *moved_remote_dir);

/*
 * Lists directory @dir from @cookie (0 = start), at most @max entries, in an
 * order that stays stable while entries are added and removed (each entry
 * gets a per-directory sequence number at insertion; the cookie is the last
 * one returned).  Needs read permission.  With @plus, entries whose inode is
 * held here carry attributes.  *@n gets the count; *@eof is true when the
 * listing is complete.  "." and ".." are not stored and never returned.
 * -EINVAL if @max is 0; @max is capped at ORCH_READDIR_MAX.
 */
int orch_meta_readdir(struct orch_meta *m, const struct orch_cred *cred,
		      uint64_t dir, uint64_t cookie, uint32_t max, bool plus,
		      struct orch_dirent *out, uint32_t *n, bool *eof);

/* Reads the target of symlink @h (-EINVAL if not a symlink).  NUL-terminated. */
int orch_meta_readlink(struct orch_meta *m, uint64_t h, char *buf, size_t buflen);

/* Checks @mask (R_OK|W_OK|X_OK) on inode @h for @cred (access(2)). */
int orch_meta_access(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
		     uint32_t mask);

/*
 * The sticky-directory rule needs the owner of the entry's inode; when that
 * inode is held on another server, calls return -EREMOTE.  The caller then
 * fetches the owner there, tells it here, and calls again: the rule is then
 * applied with that uid.  At most 2 owners (rename has two entries);
 * -E2BIG beyond.  Cleared by orch_meta_remote_owner_clear() (the caller does
 * so once the request is done).
 */
int orch_meta_remote_owner_set(struct orch_meta *m, uint64_t h, uint32_t uid);
void orch_meta_remote_owner_clear(struct orch_meta *m);

/* --- Extended attributes --------------------------------------------------------- */

/*
 * Namespaces: "user." needs read/write permission on the inode (and a file or
 * directory); "trusted." and "security." need uid 0 to set or remove, but
 * anyone may remove ORCH_XATTR_CAPS (the client's kernel checks); other
 * prefixes are -EOPNOTSUPP.  Values up to ORCH_XATTR_SIZE_MAX.
 * get: -ENODATA if absent; if @buflen is 0, returns the size in *@len only;
 * -ERANGE if too small.  set @flags: XATTR_CREATE (-EEXIST), XATTR_REPLACE
 * (-ENODATA).  list: NUL-separated names, same size protocol.
 */
int orch_meta_xattr_get(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			const char *name, void *buf, size_t buflen, size_t *len);
int orch_meta_xattr_set(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			const char *name, const void *val, size_t len, int flags);
int orch_meta_xattr_list(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			 char *buf, size_t buflen, size_t *len);
int orch_meta_xattr_remove(struct orch_meta *m, const struct orch_cred *cred, uint64_t h,
			   const char *name);

/* --- Intents (cross-server operations) ------------------------------------------- */

/*
 * A persistent record of a cross-server operation, written in the same
 * transaction as its local change and deleted when the remote part is done.
 * @body is the caller's encoding (at most 8 KiB, -E2BIG beyond), stored as a
 * blob.  Ids come from a persistent counter and are never reused (other
 * servers key their applied records by them).  delete: -ENOENT if absent.
 */
int orch_meta_intent_insert(struct orch_meta *m, uint32_t kind, const void *body,
			    size_t len, uint64_t *id);
int orch_meta_intent_delete(struct orch_meta *m, uint64_t id);

/*
 * Calls @fn for every intent, oldest first; stops on a non-zero return and
 * returns it.  No statement is active during @fn, which may insert or
 * delete intents.  @body is valid only during the call.
 */
int orch_meta_intent_foreach(struct orch_meta *m,
			     int (*fn)(void *arg, uint64_t id, uint32_t kind,
				       const void *body, size_t len),
			     void *arg);

/*
 * Idempotency for requests other servers replay: the result of intent @id of
 * server @origin, once applied here.  get: -ENOENT if not applied yet.
 * trim: forgets the records of @origin below @below (the origin's oldest
 * pending intent id).
 */
int orch_meta_applied_get(struct orch_meta *m, uint32_t origin, uint64_t id,
			  uint64_t *result);
int orch_meta_applied_put(struct orch_meta *m, uint32_t origin, uint64_t id,
			  uint64_t result);
int orch_meta_applied_trim(struct orch_meta *m, uint32_t origin, uint64_t below);

/*
 * Orphans: inodes kept with nlink 0 while open.  free: in the caller's
 * transaction, deletes orphan @h's inode, xattrs and record and sets
 * *@freed (the caller frees the data); nothing (*@freed false) if @h is no
 * orphan.  next: the smallest orphan above @after, -ENOENT past the last.
 */
int orch_meta_orphan_free(struct orch_meta *m, uint64_t h, bool *freed);
int orch_meta_orphan_next(struct orch_meta *m, uint64_t after, uint64_t *h);

/* --- The namespace as a replica group's state machine (changes.c) -------------- */

/*
 * A leader records what a mutation changes, without keeping it: capture_begin
 * opens a transaction that records every row change; the caller runs one or
 * more operations in it; capture_end rolls it all back and hands over the
 * changes as a SQLite changeset (*@out, freed with orch_meta_changes_free;
 * NULL and 0 bytes when nothing changed; -EIO if SQLite lost the
 * transaction).  capture_cancel
 * drops a capture.  The change hook still fires during a capture.
 */
int orch_meta_capture_begin(struct orch_meta *m);
/* Runs @fn inside a capture, in a savepoint: a failing @fn changes nothing. */
int orch_meta_capture_step(struct orch_meta *m, int (*fn)(void *arg, struct orch_meta *m),
			   void *arg);
int orch_meta_capture_end(struct orch_meta *m, void **out, size_t *outlen);
void orch_meta_changes_free(void *chg);
void orch_meta_capture_cancel(struct orch_meta *m);
/*
 * Handles and intent ids are reserved in batches held in memory, the
 * reservation being a row of the captured changes.  A leader whose entry
 * was lost, or that led before another did, may hold a batch another
 * leader reserved too: it forgets its batches at every new term and after
 * a lost entry, and the next value reserves afresh above the stored row.
 */
void orch_meta_forget_reservations(struct orch_meta *m);

/*
 * Every member applies the decided changes of log entry @index (> 0) in one
 * transaction that also records @index; an entry at or below the recorded
 * index is a replay and is skipped (returns 1).  A change that does not
 * apply exactly (a row missing or different: this member diverged), that
 * is malformed, or that touches a table not the namespace's, changes
 * nothing: -EBADMSG (it never will apply here) and one log line; -ENOSPC,
 * -ENOMEM, -EIO: it failed this time.  applied_index: the last index
 * applied (0: none).
 */
int orch_meta_changes_apply(struct orch_meta *m, uint64_t index, const void *chg,
			    size_t len);
int orch_meta_applied_index(struct orch_meta *m, uint64_t *index);

/*
 * snapshot: the whole database, one committed state, as one buffer (*@out
 * from malloc).  restore: replaces this member's database with such an
 * image, after checking that it is a sound database of the same cluster and
 * index (-ORCH_ECORRUPT, -EPROTONOSUPPORT, -EXDEV otherwise, and nothing
 * changes).  Neither during a transaction.
 */
int orch_meta_snapshot(struct orch_meta *m, void **out, size_t *outlen);
int orch_meta_restore(struct orch_meta *m, const void *buf, size_t len);

/*
 * Exactly once: the result (0 or -errno) of request @seq of client @client,
 * recorded in the same entry as its changes.  get: -ENOENT if none.  put:
 * -EEXIST if recorded already; also forgets the client's results below
 * @done_below (the client has its answers; 0: forget nothing).
 */
int orch_meta_reply_get(struct orch_meta *m, uint64_t client, uint64_t seq, int *result);
int orch_meta_reply_put(struct orch_meta *m, uint64_t client, uint64_t seq, int result,
			uint64_t done_below);

/* --- Values of the group -------------------------------------------------------- */

/*
 * A number kept under @key in the super table, for what a replica group
 * decides through its log (which members hold the file data in sync:
 * sv_mirror.c).  get: 0 or -ENOENT.  set: inside a capture it is one of
 * the entry's changes.  Keys of the database's identity are refused
 * (-EPERM).
 */
int orch_meta_value_get(struct orch_meta *m, const char *key, uint64_t *out);
int orch_meta_value_set(struct orch_meta *m, const char *key, uint64_t value);

/* --- Statistics --------------------------------------------------------------------- */

/* Inodes held here, and the next counter value. */
int orch_meta_counts(struct orch_meta *m, uint64_t *inodes, uint64_t *next_counter);

/* --- Reverse lookups and the namespace check (fsck.c) ------------------------ */

/*
 * The entries held here that name inode @child (hard links, and the name of
 * a directory), pending ones excluded: up to @max into @out (handle = the
 * directory, name, type = the child's type, has_attr with the directory's
 * attributes when it is held here), *@n the number returned, *@total all of
 * them.  An index lookup (dirent_child), never a scan.  Loop thread.
 */
int orch_meta_names(struct orch_meta *m, uint64_t child, struct orch_dirent *out,
		    uint32_t max, uint32_t *n, uint64_t *total);

/* One broken namespace rule found by orch_meta_fsck (docs/ADMIN.md lists them). */
struct orch_meta_finding {
	const char *rule;       /* "N1" .. "N6" */
	const char *structure;  /* "dirent", "inode", "intent" */
	uint64_t handle;        /* inode, or the entry's child */
	uint64_t parent;        /* the entry's directory, or 0 */
	char detail[256];
};
typedef void (*orch_meta_finding_fn)(void *arg, const struct orch_meta_finding *f);

/*
 * What the check needs from other servers, asked by the caller in batches:
 * inode_nlink fills @nlink[i] for each of @n handles held elsewhere (0: no
 * such inode; UINT32_MAX: could not ask); names_count gives the entries
 * naming @h held on every other server (-errno: could not ask).
 */
struct orch_meta_fsck_ops {
	int (*inode_nlink)(void *arg, const uint64_t *h, size_t n, uint32_t *nlink);
	int (*names_count)(void *arg, uint64_t h, uint64_t *count);
};

/*
 * Checks the namespace in @db_path (meta.db of server @server_index) on
 * one read snapshot of its own connection, while the server keeps writing:
 * link counts against the entries (N2 files, N3 directories), entries
 * naming no inode (N1; inodes held elsewhere asked through @ops), entry
 * types against their inode (N4), intents older than @intent_age_ms (N5).
 * A suspect that depends on another server is confirmed on a fresh
 * snapshot before it is reported.  Calls @fn per finding (at most @max;
 * the return counts all) and returns the number of findings or -errno.
 * Any thread but the loop's.
 */
long orch_meta_fsck(const char *db_path, uint32_t server_index, uint64_t intent_age_ms,
		    const struct orch_meta_fsck_ops *ops, void *ops_arg,
		    orch_meta_finding_fn fn, void *arg, long max);

#endif
