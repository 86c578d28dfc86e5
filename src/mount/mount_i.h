/*
 * orchard-mount internals: the FUSE low-level client (libfuse3), shared by
 * main.c (options, session), ops.c (namespace, attributes, xattrs),
 * file.c (open files and data), wb.c (write-behind), reopen.c (open files
 * registered again after a reconnect), kinval.c (the kernel's copy of
 * other clients' changes dropped), dir.c (directory listing), inode.c
 * (the inode table), ctl.c (runtime knobs as virtual xattrs, counters) and
 * metrics.c (GET /metrics, FUSE request latency).
 *
 * The FUSE nodeid is the Orchard handle (the root's handle is 1 =
 * FUSE_ROOT_ID) and the generation is always 0: handles are never reused.
 *
 * Threads: every handler runs on a thread of fuse_session_loop_mt() and may
 * run concurrently with any other.  Shared state is the inode table (its own
 * mutex, see below), the knobs and counters (atomics), and liborchard (thread
 * safe).  No lock is held across a liborchard call.
 *
 * Two attribute caches, each the truth for something else: the lease cache
 * (lcache.c, m_lc) holds what a server said under a lease, and is the
 * truth for everything another client may change (a push removes it
 * before that change is answered); the inode table (inode.c, m_itab)
 * holds the last attributes this mount saw of each inode the kernel
 * knows, and is the truth only for this mount's own unpublished writes
 * (i_wend, i_wmtime_ns override size and mtime until EXTEND publishes
 * them), its open files and its writer registrations.  Every answer to
 * the kernel passes through the inode table's overlay (itab_report),
 * whichever cache or server reply it started from.
 *
 * Lock order: mnt_dir.d_lock, then orch_mnt_itab.t_lock.  Nothing else nests
 * (orch_mnt_wb.w_lock is a leaf; so is orch_mnt_lc.l_lock, which the push
 * handler takes on liborchard's reading thread, under its connection lock).
 */
#ifndef ORCH_MOUNT_MOUNT_I_H
#define ORCH_MOUNT_MOUNT_I_H

#define FUSE_USE_VERSION 312

#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "client/fs.h"
#include "client/rpc.h"
#include "proto/types.h"
#include "web/prom.h"

/* --- Counters: FUSE requests by opcode ------------------------------------- */

#define ORCH_MNT_OPS(X)                                                        \
	X(LOOKUP) X(FORGET) X(BATCH_FORGET) X(GETATTR) X(SETATTR)              \
	X(READLINK) X(SYMLINK) X(MKNOD) X(MKDIR) X(UNLINK) X(RMDIR)            \
	X(RENAME) X(LINK) X(OPEN) X(CREATE) X(READ) X(WRITE) X(FLUSH)          \
	X(RELEASE) X(FSYNC) X(OPENDIR) X(READDIR) X(READDIRPLUS)               \
	X(RELEASEDIR) X(FSYNCDIR) X(STATFS) X(SETXATTR) X(GETXATTR)            \
	X(LISTXATTR) X(REMOVEXATTR) X(ACCESS) X(COPY_FILE_RANGE) X(FALLOCATE)

enum orch_mnt_op {
#define ORCH_MNT_OP_ENUM(name) ORCH_MNT_OP_##name,
	ORCH_MNT_OPS(ORCH_MNT_OP_ENUM)
#undef ORCH_MNT_OP_ENUM
	ORCH_MNT_OP_COUNT
};

/* Error replies counted by errno; the last slot counts larger ones. */
#define ORCH_MNT_ERRNO_MAX 136

/* --- Inode table ------------------------------------------------------------ */

/* ".orchard-deleted-" and 16 hex digits of the handle. */
#define ORCH_MNT_XWELLKNOWN 4

/*
 * One entry per handle the kernel holds: the FUSE lookup count is its
 * refcount (passthrough_ll), and FORGET frees it at zero.  The root is
 * pinned and never freed.  Every field is protected by orch_mnt_itab.t_lock.
 */
struct orch_mnt_inode {
	struct orch_mnt_inode *i_next; /* hash chain */
	uint64_t i_nlookup;            /* lookups the kernel has not forgotten */
	bool i_pinned;                 /* the root: never freed */
	struct orch_attr i_attr;       /* last attributes seen, layout included */
	/*
	 * Highest end of a write from this mount that no EXTEND has covered
	 * yet; 0 if none.  The size we report is max(i_attr.size, i_wend) so
	 * that the kernel never sees the file shrink between a write and the
	 * flush that publishes its size.  A truncate clears it.
	 */
	uint64_t i_wend;
	/*
	 * Wall time of the last write from this mount whose EXTEND has not
	 * published it yet; 0 if none.  It is the mtime we report meanwhile
	 * (the write marked mtime for update), and the mtime the EXTEND sets.
	 * A setattr that sets mtime (utime, truncate) supersedes it: cleared,
	 * so the EXTEND after it leaves the mtime alone.
	 */
	int64_t i_wmtime_ns;
	/*
	 * The servers of the file's layout that may hold a change this mount
	 * made to its data and no fsync from here has made durable since
	 * (orch_layout_servers' bits): an fsync asks only them, and the
	 * inode's own server.  A write adds the servers of its range; a
	 * truncate, a punch or a copy adds all; a new entry starts with all,
	 * since what came before it is unknown.
	 */
	uint64_t i_unsynced;
	/*
	 * Files this mount has open on the inode, and the generation of the
	 * connection to the inode's server on which it registered them
	 * (CL2SV_WRITERS OPEN; 0: not registered).  The server keeps the file
	 * while it is registered, even once its last name is gone
	 * (docs/DESIGN.md, "Open files whose last name went").
	 * i_oreg_none: that server answered that it keeps no registration (a
	 * server of before them, a file already gone): not asked again on
	 * that connection, nothing to close.  i_oreg_busy: a thread is
	 * registering it (claimed); nobody else sends meanwhile.  While open,
	 * the inode is on the table's t_open list (i_onext, i_oprev).
	 */
	uint32_t i_opens;
	uint64_t i_oreg_gen;
	bool i_oreg_none;
	bool i_oreg_busy;
	struct orch_mnt_inode *i_onext, *i_oprev;
	/*
	 * Created by this mount and neither opened again nor written since:
	 * what cp(1) copies into, whose layout copy_file_range may change.
	 */
	bool i_fresh;
	/*
	 * Writer registration (docs/DESIGN.md, "Writers and bytes past the
	 * size"): the generation of the connection to the inode's server on
	 * which this mount is registered as a writer of it (rpc.h,
	 * orch_client_conn_gen), 0 if it is not.  A registration lives on one
	 * connection: when the generation changes, the mount registers again
	 * before its next write.  i_wreg_busy: a thread is registering or
	 * releasing; others wait (t_wreg_cv), so a release and a register never
	 * cross on the wire.
	 */
	uint64_t i_wreg_gen;
	bool i_wreg_busy;
	/*
	 * Well-known xattrs the servers said the inode lacks, and when (ms32):
	 * the kernel asks for security.capability before every write and ls -l
	 * for security.selinux and the ACLs of every entry; an absence is
	 * trusted for getattr_timeout_ms, like the attributes.
	 */
	uint32_t i_xabsent_at[ORCH_MNT_XWELLKNOWN];
	uint8_t i_xabsent;             /* bit i: name i is known absent */
	/*
	 * t_changes when a setxattr or removexattr through this mount last
	 * ended: an absence learned from a question asked before (a GETXATTR,
	 * attributes with NOXATTR) may predate it and is not recorded.
	 */
	uint64_t i_xchanged;
	/*
	 * t_changes when this mount last applied its own change of the
	 * attributes (an EXTEND, a SETATTR): a reply to a question asked
	 * before that (orch_mnt_inode_asked) may have been answered before the
	 * change and must not overwrite what it left.
	 */
	uint64_t i_changed;
	/*
	 * A directory's listing in the kernel's cache (coherent mode, dir.c):
	 * every change of it is pushed to this mount until then, the end of
	 * the lease of the READDIR that filled it (0: none).
	 */
	uint64_t i_list_until;
	/* Close-to-open: size and mtime at the previous open or close. */
	bool i_cto_valid;
	uint64_t i_cto_size;
	int64_t i_cto_mtime_ns;
	/*
	 * Opens answered without keep_cache whose file has not been used
	 * since: the kernel drops the old pages only after such a reply, on
	 * its way back to the program, so until then another open must not
	 * keep them (orch_mnt_inode_cto_open).
	 */
	uint32_t i_cto_dropping;
	/*
	 * st_blocks (512-byte units) as the servers last counted them
	 * (orch_fs_allocated), good while the reported size, mtime and ctime
	 * are those it was counted for (i_blk_valid).
	 */
	bool i_blk_valid;
	uint64_t i_blk;
	uint64_t i_blk_size;
	int64_t i_blk_mtime_ns;
	int64_t i_blk_ctime_ns;
};

struct orch_mnt_itab {
	pthread_mutex_t t_lock;          /* protects everything below and the inodes */
	struct orch_mnt_inode **t_buckets;
	size_t t_nbuckets;               /* a power of two */
	size_t t_count;                  /* inodes in the table */
	uint64_t t_forget_unknown;       /* FORGETs of a handle not in the table */
	pthread_cond_t t_wreg_cv;        /* an i_wreg_busy was cleared */
	struct orch_mnt_inode *t_open;   /* inodes with files open here */
	size_t t_nopen;                  /* ... how many */
	uint32_t t_open_srv[ORCH_SERVERS_MAX]; /* ... by the server of their handle */
	/*
	 * Own attribute changes applied (i_changed): raised under t_lock, read
	 * without it (orch_mnt_inode_asked, on every lookup and getattr).
	 */
	_Atomic uint64_t t_changes;
};

/* --- Write-behind (wb.c) ------------------------------------------------------ */

struct mnt_wb_ent;
struct mnt_wb_err;

struct orch_mnt_wb {
	pthread_mutex_t w_lock;           /* protects everything below */
	pthread_cond_t w_work;            /* the reaper: something was queued */
	pthread_cond_t w_done;            /* waiters: something was acknowledged */
	struct mnt_wb_ent *w_head, *w_tail; /* in flight, in the order sent */
	size_t w_bytes;                   /* in flight or being sent */
	size_t w_max;                     /* cap on w_bytes; 0: write-through */
	struct mnt_wb_err *w_err;         /* errors not reported yet */
	size_t w_nerr, w_errcap;
	uint64_t w_writes, w_waits;       /* counters: writes queued, waits that slept */
	uint64_t w_overtaken;             /* writes sent again behind an older one (wb.c) */
	bool w_stop, w_running;
	pthread_t w_thread;
	/* Files whose pages the dropper drops (a write of theirs failed), and it. */
	pthread_cond_t w_drop_work;
	uint64_t *w_drop;
	size_t w_ndrop, w_dropcap;
	bool w_drop_stop;
	pthread_t w_dropper;
};

/* --- The keeper of open registrations (reopen.c) -------------------------------- */

struct orch_mnt_reopen {
	pthread_mutex_t r_lock;           /* for r_wake */
	pthread_cond_t r_wake;            /* r_stop was set (CLOCK_MONOTONIC) */
	uint32_t r_tick_ms;
	atomic_bool r_stop;               /* set under r_lock; read anywhere */
	bool r_running;
	pthread_t r_thread;
};

/* --- Kernel invalidations (kinval.c) -------------------------------------------- */

struct orch_mnt_kinval_item;
struct orch_mnt;

struct orch_mnt_kinval {
	pthread_mutex_t k_lock;           /* protects everything below */
	pthread_cond_t k_wake;            /* the thread: something was queued, or stop */
	/* The queues, oldest first: [0] attributes, [1] names (kinval.c). */
	struct orch_mnt_kinval_item *k_head[2], *k_tail[2];
	struct orch_mnt_kinval_item **k_buckets;      /* the queued ones by key */
	unsigned int k_queued;
	bool k_revoked[ORCH_SERVERS_MAX]; /* a REVOKE of this server waits */
	bool k_connected[ORCH_SERVERS_MAX]; /* its connection came up once */
	bool k_any_revoked;
	/*
	 * Acknowledgements, per server (kinval.c, "Acks"): the connection
	 * whose pushes they are, the highest number heard and the last
	 * acknowledged; the REVOKE (or dropped push) whose walk is owed, and
	 * the one walked now.
	 */
	struct orch_mnt_kinval_acks {
		uint64_t gen, heard, acked;
		uint64_t revoke_seq, walking_seq;
		bool dirty;
	} k_acks[ORCH_SERVERS_MAX];
	bool k_any_ack_dirty;
	/*
	 * Directories whose lock in the kernel a request of this mount holds
	 * now (a create, an unlink, a rename ... in it, a setattr of it), with
	 * how many: their names are acknowledged before the kernel call,
	 * which waits until they are done (kinval.c, "Names").  More than
	 * KINVAL_BUSY_MAX at once: every directory counts as busy.
	 */
	struct { uint64_t dir; unsigned int n; } k_busy[32];
	unsigned int k_busy_overflow;
	/* What each names thread is calling now (NULL: none). */
	struct orch_mnt_kinval_item *k_calling[4];
	bool k_on;                        /* the threads run: pushes are queued */
	bool k_stop;
	/* [0] the attributes thread, then the names threads (k_calling's). */
	bool k_running[5];
	pthread_t k_thread[5];
	/* The watcher: reads pushes on connections nobody reads (kinval.c). */
	atomic_bool k_watch_stop;
	bool k_watching;
	pthread_t k_watch_thread;
	uint64_t k_sent, k_sent_names, k_coalesced, k_dropped, k_own, k_revokes, k_acks_sent, k_early;
	uint64_t k_suspends;
};

/*
 * liborchard's push handler (rpc.h, orch_push_fn); @arg is the mount: the
 * lease cache first, then the kernel's copy of another client's change.
 */
void orch_mnt_push(void *arg, unsigned int server, uint64_t stamp, const struct orch_msg *m,
		   uint64_t gen, uint64_t seq);
/*
 * init before the push handler is set; start once m_se is; halt (nothing
 * more is queued or sent) once the session loop ended, and stop (joins the
 * notifier) after fuse_session_unmount and before fuse_session_destroy.
 */
int orch_mnt_kinval_init(struct orch_mnt *m);
int orch_mnt_kinval_start(struct orch_mnt *m);
void orch_mnt_kinval_halt(struct orch_mnt *m);
void orch_mnt_kinval_stop(struct orch_mnt *m);
void orch_mnt_kinval_fini(struct orch_mnt *m);
struct orch_mnt_kinval_counts {
	uint64_t sent, sent_names, coalesced, dropped, own, revokes, queued, acks, acks_early, suspends;
};
void orch_mnt_kinval_counts(struct orch_mnt *m, struct orch_mnt_kinval_counts *out);
/*
 * Around a request that holds directory @dir's lock in the kernel
 * (ops.c): from enter to leave, pushes of names in @dir are acknowledged
 * without waiting for the kernel call, which would wait for that request.
 */
/* Wakes the names threads: a name was doomed outside a reset (knames.c). */
void orch_mnt_kinval_wake(struct orch_mnt *m);
void orch_mnt_kinval_dir_enter(struct orch_mnt *m, uint64_t dir);
void orch_mnt_kinval_dir_leave(struct orch_mnt *m, uint64_t dir);

/* --- Handles the kernel holds (fh.c) ------------------------------------------ */

/* First member of each fi->fh object: on the list from open to release. */
struct orch_mnt_fh {
	struct orch_mnt_fh *fh_prev, *fh_next;
	void (*fh_free)(struct orch_mnt_fh *fh); /* at the end, if never released */
};
struct orch_mnt_fhs {
	pthread_mutex_t s_lock; /* a leaf */
	struct orch_mnt_fh s_head;
};
void orch_mnt_fhs_init(struct orch_mnt_fhs *s);
/* Frees what the kernel never released: after the session, no handler runs. */
void orch_mnt_fhs_fini(struct orch_mnt_fhs *s);
void orch_mnt_fh_add(struct orch_mnt_fhs *s, struct orch_mnt_fh *fh,
		     void (*free_fn)(struct orch_mnt_fh *));
void orch_mnt_fh_del(struct orch_mnt_fhs *s, struct orch_mnt_fh *fh);

/* --- Names the kernel keeps on a lease (knames.c) ------------------------------- */

struct kname;

struct orch_mnt_knames {
	pthread_mutex_t n_lock;             /* a leaf, under kinval's k_lock */
	struct kname **n_buckets;           /* by (directory, name); NULL: not set up */
	struct kname *n_doomed;             /* to expire in the kernel (kinval's names threads) */
	size_t n_count, n_ndoomed;
	/* Per server, bumped by each reset: a name read before one is doomed. */
	_Atomic uint64_t n_gen[ORCH_SERVERS_MAX];
	uint64_t n_expired, n_full;
};

int orch_mnt_knames_init(struct orch_mnt_knames *kn);
void orch_mnt_knames_fini(struct orch_mnt_knames *kn);
/* The generation of @parent's server: read before the lease the kernel gets. */
uint64_t orch_mnt_knames_gen(struct orch_mnt_knames *kn, uint64_t parent);
/*
 * The kernel is about to keep @name in @parent until @until_ms, under a
 * lease read at generation @gen.  False: no room, give it timeout 0.
 * *@doomed (if given) is set if a reset since @gen dooms it at once: the
 * names threads must be woken (orch_mnt_kinval_wake).
 */
bool orch_mnt_knames_note(struct orch_mnt_knames *kn, uint64_t parent, const char *name,
			  uint64_t until_ms, uint64_t gen, bool *doomed);
/* Pushes of @server may have been lost: every name of it noted goes. */
void orch_mnt_knames_reset(struct orch_mnt_knames *kn, unsigned int server);
/*
 * Takes a doomed name whose directory is not @busy into @parent, @name
 * (ORCH_NAME_MAX bytes) and @namelen.  False: none.
 */
bool orch_mnt_knames_take_doomed(struct orch_mnt_knames *kn,
				 bool (*busy)(void *arg, uint64_t dir), void *arg,
				 uint64_t *parent, char *name, size_t *namelen);
/* Names held now, expired after resets, and refused (table full). */
void orch_mnt_knames_counts(struct orch_mnt_knames *kn, uint64_t *held, uint64_t *expired,
			    uint64_t *full);

/* --- The lease cache (lcache.c) ------------------------------------------------- */

struct lc_ent;

struct lc_srv {
	uint64_t floor;   /* entries stamped at or below it are dead (reset) */
	uint64_t reject;  /* replies stamped at or below it may not fill */
	uint64_t last;    /* highest stamp seen */
	/*
	 * A replica group: nothing of it is used from this time (monotonic
	 * ms) on, unless a vouch moves it (orch_mnt_lc_vouch_start).  A
	 * server of its own: UINT64_MAX.
	 */
	uint64_t vouched_until;
};

/* What asks server @server to vouch (CL2SV_VOUCH); 0 if it did. */
typedef int (*orch_mnt_lc_vouch_fn)(void *arg, unsigned int server);
#define ORCH_MNT_LC_VOUCH_THREADS_MAX 16u
/* How often each group is asked to vouch: three times per ORCH_VOUCH_TERM_MS. */
#define ORCH_MNT_LC_VOUCH_EVERY_MS (ORCH_VOUCH_TERM_MS / 3)

/*
 * A renewal (refresh ahead, lcache.c): the request a miss of the key would
 * make, sent by a renewal thread.  A LOOKUP of r_name in r_key for
 * r_credkey, as r_cred; or a GETATTR of r_key, as r_cred.
 */
enum { ORCH_MNT_LC_RENEW_LOOKUP = 1, ORCH_MNT_LC_RENEW_GETATTR = 2 };
struct orch_mnt_lc_renewal {
	int r_kind;
	uint64_t r_key;
	uint64_t r_credkey;
	struct orch_cred r_cred;
	char r_name[ORCH_NAME_MAX + 1];
};
/* Sends @r and fills the cache from its reply; on a renewal thread. */
typedef void (*orch_mnt_lc_renew_fn)(void *arg, const struct orch_mnt_lc_renewal *r);
#define ORCH_MNT_LC_RENEW_THREADS_MAX 16u

struct orch_mnt_lc {
	pthread_mutex_t l_lock;          /* a leaf: protects everything below */
	bool l_on;                       /* lease_ms > 0 and set up */
	bool l_default_permissions;
	uint32_t l_lease_ms;
	uint32_t l_renew_margin_ms;      /* a hit this close to a key's end renews it */
	unsigned int l_nservers;
	struct lc_srv *l_srv;            /* [l_nservers] */
	struct lc_ent **l_buckets;
	size_t l_count;
	uint64_t l_hits, l_misses, l_pushes;
	uint64_t l_not_before_ms;        /* replies to requests sent before: not kept */
	/* Renewals: a ring of l_renew_n from l_renew_head; NULL: not started. */
	struct orch_mnt_lc_renewal *l_renew_q;
	size_t l_renew_head, l_renew_n;
	pthread_cond_t l_renew_cv;       /* a renewal was queued, or stop */
	bool l_renew_stop;
	orch_mnt_lc_renew_fn l_renew_fn;
	void *l_renew_arg;
	pthread_t l_renew_threads[ORCH_MNT_LC_RENEW_THREADS_MAX];
	unsigned int l_renew_nthreads;
	uint64_t l_renewals, l_renew_dropped;
	/* Vouches: servers are replica groups; each thread asks every nth group. */
	bool l_groups;
	orch_mnt_lc_vouch_fn l_vouch_fn;
	void *l_vouch_arg;
	bool l_vouch_stop;
	pthread_cond_t l_vouch_cv;       /* stop */
	pthread_t l_vouch_threads[ORCH_MNT_LC_VOUCH_THREADS_MAX];
	unsigned int l_vouch_nthreads;
	uint64_t l_vouches, l_vouch_failed;
};

/* The credkey of callers every permission check passes (root, default_permissions). */
#define ORCH_MNT_LC_CRED_FREE 1u

/*
 * Off (every call misses) if @lease_ms is 0.  @groups: the servers are
 * replica groups, whose leases are used only while vouched for (below).
 * 0 or -ENOMEM.
 */
int orch_mnt_lc_init(struct orch_mnt_lc *lc, unsigned int nservers, uint32_t lease_ms,
		     bool default_permissions, bool groups);
void orch_mnt_lc_fini(struct orch_mnt_lc *lc);
/*
 * The machine was suspended (kinval.c sees it): every lease may have run
 * out on its server meanwhile, so everything held goes, and replies to
 * requests sent before @now_ms are not kept.
 */
void orch_mnt_lc_suspended(struct orch_mnt_lc *lc, uint64_t now_ms);
/* liborchard's push handler (rpc.h, orch_push_fn); @arg is the cache. */
void orch_mnt_lc_push(void *arg, unsigned int server, uint64_t stamp, const struct orch_msg *m);
/* Who a name is served to: the caller's credentials, or ORCH_MNT_LC_CRED_FREE. */
uint64_t orch_mnt_lc_credkey(const struct orch_mnt_lc *lc, const struct orch_cred *cred);
/*
 * Fill from a reply stamped @stamp (0: not leased, nothing happens) to a
 * request sent at @sent_ms (orch_time_now_ms).  @child 0: the name is absent.
 */
void orch_mnt_lc_put_attr(struct orch_mnt_lc *lc, const struct orch_attr *a, uint64_t stamp,
			  uint64_t sent_ms);
void orch_mnt_lc_put_name(struct orch_mnt_lc *lc, uint64_t parent, const char *name,
			  uint64_t credkey, uint64_t child, uint64_t stamp, uint64_t sent_ms);
/*
 * Hits.  The caller first reads what arrived (orch_client_poll of the
 * key's server) and asks only if that returned true.  *@due (may be NULL):
 * the hit's key is in the last part of its term and not being renewed;
 * the caller then queues its renewal (orch_mnt_lc_renew).
 */
bool orch_mnt_lc_get_attr(struct orch_mnt_lc *lc, uint64_t h, struct orch_attr *out,
			  bool *due);
bool orch_mnt_lc_get_name(struct orch_mnt_lc *lc, uint64_t parent, const char *name,
			  uint64_t credkey, uint64_t *child, bool *due);
/*
 * Until when (monotonic ms) the cache holds @h's attributes, or the name
 * @name in @parent for @credkey, under a lease; 0 if it does not.  What
 * the kernel may keep them for in coherent mode (ops.c).  Counts no hit.
 */
uint64_t orch_mnt_lc_attr_until(struct orch_mnt_lc *lc, uint64_t h);
/* Until when what @h's server leased may be used at all (its vouch); 0 if off. */
uint64_t orch_mnt_lc_vouched_until(struct orch_mnt_lc *lc, uint64_t h);
uint64_t orch_mnt_lc_name_until(struct orch_mnt_lc *lc, uint64_t parent, const char *name,
				uint64_t credkey);
/*
 * Refresh ahead.  start: @nthreads (at most ORCH_MNT_LC_RENEW_THREADS_MAX;
 * 0 for tests: nothing takes the queue) call @fn for each renewal queued;
 * 0 or -errno.  renew: queues @r if a key it renews is live and due, and
 * marks those keys (once per term); false if not queued (nothing due, the
 * queue is full: counted as dropped, or not started).  stop: the threads
 * end (each after the renewal it is sending), what is queued is dropped
 * and nothing more is queued; fini stops them too.
 */
int orch_mnt_lc_renew_start(struct orch_mnt_lc *lc, unsigned int nthreads,
			    orch_mnt_lc_renew_fn fn, void *arg);
bool orch_mnt_lc_renew(struct orch_mnt_lc *lc, const struct orch_mnt_lc_renewal *r);
void orch_mnt_lc_renew_stop(struct orch_mnt_lc *lc);
/*
 * Vouches (replica groups only; nothing to do otherwise).  A leader cut off
 * from its group may still answer, and a mount cut off from it hears no
 * push or close: so what a group leased is used only up to
 * ORCH_VOUCH_TERM_MS after sending a vouch that group answered (docs/
 * DESIGN.md, "Leases across a leader change").  start: threads ask each
 * group every ORCH_MNT_LC_VOUCH_EVERY_MS through @fn; 0 or -errno.  stop:
 * they end after the call each is making; fini stops them too.
 */
int orch_mnt_lc_vouch_start(struct orch_mnt_lc *lc, orch_mnt_lc_vouch_fn fn, void *arg);
void orch_mnt_lc_vouch_stop(struct orch_mnt_lc *lc);
/*
 * Complete directories.  wanted: true if @dir is worth listing for
 * @credkey (not known whole, not found too big this term); put_dir: the
 * whole listing of @dir (one page that reached the end), stamped @stamp;
 * too_big: the listing did not fit, do not try again this term.
 */
bool orch_mnt_lc_dir_wanted(struct orch_mnt_lc *lc, uint64_t dir, uint64_t credkey);
void orch_mnt_lc_put_dir(struct orch_mnt_lc *lc, uint64_t dir, const struct orch_dirent *ents,
			 uint32_t n, uint64_t stamp, uint64_t sent_ms);
void orch_mnt_lc_dir_too_big(struct orch_mnt_lc *lc, uint64_t dir, uint64_t sent_ms);
struct orch_mnt_lc_counts {
	uint64_t lease_ms, entries, hits, misses, pushes, renewals, renewals_dropped;
	uint64_t vouches, vouches_failed;
};
void orch_mnt_lc_counts(struct orch_mnt_lc *lc, struct orch_mnt_lc_counts *out);
struct orch_mnt;
/*
 * ops.c: access(2) for @cred on @h: from leased attributes with the
 * servers' rule (proto/perm.h), else asked of @h's server.  0 or -errno.
 */
int orch_mnt_access_check(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
			  uint32_t mask);
/* ops.c: attributes of @h, from the cache if it holds them, else from its server. */
int orch_mnt_getattr(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
		     struct orch_attr *out);
/* ops.c: the renewal threads' orch_mnt_lc_renew_fn; @arg is the mount. */
void orch_mnt_lc_renew_send(void *arg, const struct orch_mnt_lc_renewal *r);
/* ops.c: asks group @server to vouch for what it leased (orch_mnt_lc_vouch_fn). */
int orch_mnt_lc_vouch_send(void *arg, unsigned int server);
/* ops.c: fills the cache from a lookup or create (@error 0 or -ENOENT) sent at @sent_ms. */
void orch_mnt_lc_fill(struct orch_mnt *m, uint64_t credkey, uint64_t parent, const char *name,
		      int error, const struct orch_attr *a, const struct orch_fs_stamps *st,
		      uint64_t sent_ms);

/* --- The mount -------------------------------------------------------------- */

struct orch_mnt {
	struct orch_client *m_cl;         /* liborchard, thread safe */
	struct orch_mnt_itab m_itab;
	/*
	 * The live knobs of proto/knobs.def, each named m_<knob> (ctl.c finds
	 * them so): read once per reply, changed by setxattr.
	 */
	_Atomic uint32_t m_dcache_timeout_ms;   /* entry_timeout */
	_Atomic uint32_t m_getattr_timeout_ms;  /* attr_timeout */
	_Atomic uint32_t m_negative_timeout_ms; /* negative entry timeout; 0 = none */
	_Atomic uint32_t m_op_timeout_ms;       /* liborchard per-call deadline */
	_Atomic uint32_t m_coherent;            /* 1: leased answers kept to the lease's end */
	_Atomic uint64_t m_ops[ORCH_MNT_OP_COUNT]; /* FUSE requests by opcode */
	_Atomic uint64_t m_errors[ORCH_MNT_ERRNO_MAX]; /* error replies by errno */
	_Atomic uint64_t m_bytes_read;    /* returned by READ */
	_Atomic uint64_t m_bytes_written; /* taken by WRITE */
	/* FUSE request latency by opcode: kept only with metrics on (metrics.c). */
	struct orch_hist m_op_hist[ORCH_MNT_OP_COUNT];
	struct orch_mnt_metrics *m_metrics; /* the HTTP endpoint; NULL: off */
	bool m_default_permissions;       /* the kernel checks permissions itself */
	bool m_readdirplus;               /* listings carry attributes (READDIRPLUS) */
	bool m_expire_only;               /* the kernel expires dentries on request (kinval.c) */
	uid_t m_owner;                    /* uid that mounted; may change the knobs */
	char *m_mountpoint;               /* absolute; NULL: leave the readahead alone */
	unsigned int m_readahead_kb;
	atomic_bool m_readahead_done;
	struct orch_mnt_wb m_wb;
	struct orch_mnt_lc m_lc;          /* names and attributes under leases */
	struct orch_mnt_reopen m_reopen;  /* registers open files again after a reconnect */
	struct orch_mnt_kinval m_kinval;  /* drops the kernel's copy of others' changes */
	struct orch_mnt_knames m_knames;  /* names the kernel keeps on a lease, to drop at a reset */
	struct orch_mnt_fhs m_fhs;        /* open files and directories, freed at the end if unreleased */
	struct fuse_session *m_se;        /* for notifications; set while it runs */
};

/*
 * Write-behind (wb.c).  start: after the client exists (the reaper is a
 * thread), @max_bytes in flight at most, 0 for write-through; stop: after
 * the session loop, waits for every write in flight.
 */
int orch_mnt_wb_start(struct orch_mnt *m, size_t max_bytes);
void orch_mnt_wb_stop(struct orch_mnt *m);
/*
 * Sends a write of file @a and returns: 0 once it is on its way, or an
 * error, also the error of an earlier write of the file not reported yet.
 * @sync (O_DIRECT): waits for the file's writes and then for this one.
 */
int orch_mnt_wb_write(struct orch_mnt *m, const struct orch_cred *cred,
		      const struct orch_attr *a, uint64_t off, const void *buf, size_t len,
		      bool sync);
/* For `orchard stats MNT`. */
struct orch_mnt_wb_counts {
	uint64_t max_bytes, writes, waits, in_flight, overtaken;
};
void orch_mnt_wb_counts(struct orch_mnt *m, struct orch_mnt_wb_counts *out);
/*
 * Waits until no write of @h is in flight.  @take_error: returns (and
 * forgets) the error of a write of @h not reported yet; else returns 0 and
 * keeps it for the file's next write, flush or fsync.
 */
int orch_mnt_wb_wait(struct orch_mnt *m, uint64_t h, bool take_error);

/*
 * The keeper of open registrations (reopen.c): start after the client
 * exists, stop after the session loop (before the client is destroyed).
 */
int orch_mnt_reopen_start(struct orch_mnt *m);
void orch_mnt_reopen_stop(struct orch_mnt *m);

/*
 * Sets the mount's kernel readahead to m_readahead_kb, once: at the first
 * open, because answering INIT resets it to the kernel's 128 KiB (ctl.c).
 */
void orch_mnt_readahead_once(struct orch_mnt *m);

extern const struct fuse_lowlevel_ops orch_mnt_ops;

static inline struct orch_mnt *orch_mnt_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static inline void orch_mnt_count(struct orch_mnt *m, enum orch_mnt_op op)
{
	atomic_fetch_add_explicit(&m->m_ops[op], 1, memory_order_relaxed);
}

/* An error reply with -@error (negative). */
static inline void orch_mnt_count_error(struct orch_mnt *m, int error)
{
	int e = -error < ORCH_MNT_ERRNO_MAX ? -error : ORCH_MNT_ERRNO_MAX - 1;

	atomic_fetch_add_explicit(&m->m_errors[e], 1, memory_order_relaxed);
}

/* --- metrics.c: GET /metrics of the mount (-o metrics=HOST:PORT) -------------- */

/*
 * Checks @addr and binds it (before anything is mounted: a bad address
 * fails the mount, with a message on stderr).  0 or -errno.
 */
int orch_mnt_metrics_create(struct orch_mnt *m, const char *addr, bool public_ok,
			    const char *mountpoint, const char *cluster);
/* Starts serving: after the fork into the background and once m_cl exists. */
int orch_mnt_metrics_start(struct orch_mnt *m);
/* Stops serving and frees the endpoint (before m_cl and the write-behind stop). */
void orch_mnt_metrics_stop(struct orch_mnt *m);
/*
 * orch_mnt_ops with every request timed into m_op_hist, for a mount with
 * metrics on; a mount without them uses orch_mnt_ops and pays nothing.
 */
const struct fuse_lowlevel_ops *orch_mnt_ops_timed(void);

/* --- ops.c: helpers shared by the handler files ------------------------------ */

/* The caller's uid, gid and supplementary groups, from the FUSE request. */
void orch_mnt_cred(fuse_req_t req, struct orch_cred *out);

/*
 * Replies with -@error, turning liborchard's transport errors into EIO (a
 * program expects EIO or ETIMEDOUT from a file system, not EHOSTDOWN).
 */
void orch_mnt_reply_err(fuse_req_t req, int error);


/*
 * Registers @a in the inode table (one lookup more) and replies with the
 * entry, or with @fi for CREATE (@fi non-NULL).  Returns 0, or -errno if the
 * kernel did not take the reply (interrupted): then the lookup is dropped
 * again and no RELEASE will come for @fi.  @oreg_gen: with @fi, the
 * connection generation on which the request registered the open (a
 * CREATE with ORCH_CREATE_OPEN), 0 if none.
 */
int orch_mnt_reply_entry(fuse_req_t req, const struct orch_attr *a, uint64_t asked,
			 struct fuse_file_info *fi, uint64_t oreg_gen);

/*
 * orch_mnt_reply_entry for the answer to @name in @parent (for
 * @credkey): in coherent mode the kernel keeps the name and attributes as
 * long as the lease cache holds them under a lease (ops.c, mnt_keep).
 */
int orch_mnt_reply_entry_named(fuse_req_t req, uint64_t parent, const char *name,
			       uint64_t credkey, const struct orch_attr *a, uint64_t asked,
			       struct fuse_file_info *fi, uint64_t oreg_gen);
/*
 * In coherent mode, until when the kernel may keep @name in @parent: the
 * end of its lease, noted so that a reset can drop it (knames.c); 0: not
 * leased, or no room to note it.
 */
uint64_t orch_mnt_name_until(struct orch_mnt *m, uint64_t parent, const char *name,
			     uint64_t credkey);

/*
 * Fills @e for @a, as reported: timeouts from the knobs, or in coherent
 * mode to @entry_until and @attr_until (monotonic ms; 0: not leased, not
 * kept).
 */
void orch_mnt_entry_param(struct orch_mnt *m, const struct orch_attr *a,
			  struct fuse_entry_param *e, uint64_t entry_until, uint64_t attr_until);

/* --- inode.c ---------------------------------------------------------------- */

/* Creates the table with the root (handle 1) pinned.  Returns 0 or -ENOMEM. */
int orch_mnt_itab_init(struct orch_mnt_itab *t);
/* Frees every inode, whatever its count (at unmount). */
void orch_mnt_itab_fini(struct orch_mnt_itab *t);

/* Inodes in the table (the root included) and the unknown-FORGET count. */
void orch_mnt_itab_counts(struct orch_mnt_itab *t, uint64_t *inodes, uint64_t *unknown);

/*
 * Attribute replies and this mount's own changes race: a LOOKUP answered
 * before a close's EXTEND can reach the table after it, and would give the
 * kernel the size before the write.  So a question that brings back
 * attributes first takes orch_mnt_inode_asked(), and its answer replaces
 * an inode's attributes only if this mount applied no change of them
 * since (i_changed): the change's reply is at least as new.
 */
uint64_t orch_mnt_inode_asked(struct orch_mnt_itab *t);

/*
 * One lookup more on @a->handle (inserted if new) and its attributes
 * replaced by @a, unless a change of this mount was applied after @asked.
 * *@rep gets the attributes to report: the table's, with the size and
 * mtime of writes not yet published; *@known (may be NULL) whether the
 * kernel held the inode already.  Returns 0 or -ENOMEM.
 */
int orch_mnt_inode_get(struct orch_mnt_itab *t, const struct orch_attr *a, uint64_t asked,
		       struct orch_attr *rep, bool *known);

/*
 * Drops @n lookups of @h; frees the inode at zero.  An unknown @h is counted
 * (a lookup count gone wrong) and otherwise ignored.
 */
void orch_mnt_inode_forget(struct orch_mnt_itab *t, uint64_t h, uint64_t n);

/*
 * Replaces the attributes of @a->handle if it is in the table (and this
 * mount applied no change of them after @asked), and returns the
 * attributes to report in *@rep (@a if it is not in the table).
 */
void orch_mnt_inode_update(struct orch_mnt_itab *t, const struct orch_attr *a, uint64_t asked,
			   struct orch_attr *rep);

/*
 * Copies the last attributes of @h into *@out, as reported (size and mtime
 * of pending writes).  Returns 0, or -ENOENT if @h is not in the table.
 */
int orch_mnt_inode_attr(struct orch_mnt_itab *t, uint64_t h, struct orch_attr *out);

/*
 * st_blocks of @rep (reported attributes): true with *@blocks if the table
 * holds a count made for the same size, mtime and ctime.  _set records one;
 * _forget drops it (after a punch, which changes none of the three).
 */
bool orch_mnt_inode_blocks(struct orch_mnt_itab *t, const struct orch_attr *rep,
			   uint64_t *blocks);
void orch_mnt_inode_blocks_set(struct orch_mnt_itab *t, const struct orch_attr *rep,
			       uint64_t blocks);
void orch_mnt_inode_blocks_forget(struct orch_mnt_itab *t, uint64_t h);

/*
 * Records that this mount wrote up to @end in @h at wall time @mtime_ns,
 * to the servers @servers (orch_layout_servers).
 */
void orch_mnt_inode_written(struct orch_mnt_itab *t, uint64_t h, uint64_t end,
			    int64_t mtime_ns, uint64_t servers);

/*
 * The servers an fsync of @h must ask (i_unsynced; all if @h is unknown),
 * which count as synced from now on; orch_mnt_inode_sync_owe() gives them
 * back if the fsync fails.  A write that adds one meanwhile keeps it for
 * the next fsync, as it should: it was not done when this one began.
 */
uint64_t orch_mnt_inode_sync_take(struct orch_mnt_itab *t, uint64_t h);
void orch_mnt_inode_sync_owe(struct orch_mnt_itab *t, uint64_t h, uint64_t servers);

/*
 * The pending written end of @h (0 if none or unknown), and in *@mtime_ns
 * the time of the pending write (0: none since the last setattr of mtime).
 */
uint64_t orch_mnt_inode_wend(struct orch_mnt_itab *t, uint64_t h, int64_t *mtime_ns);

/*
 * After an EXTEND to @covered with @covered_mtime answered @a: stores @a
 * and clears the pending end and write time if the EXTEND covered them.
 * *@rep as for orch_mnt_inode_update().
 */
void orch_mnt_inode_extended(struct orch_mnt_itab *t, uint64_t covered,
			     int64_t covered_mtime, const struct orch_attr *a,
			     struct orch_attr *rep);

/*
 * After a setattr answered @a: stores @a; a size change (@size_set) drops
 * the pending end, and a size or mtime change (@mtime_set) the pending
 * write time, which the setattr superseded.
 */
void orch_mnt_inode_setattr_done(struct orch_mnt_itab *t, const struct orch_attr *a,
				 bool size_set, bool mtime_set, struct orch_attr *rep);

/*
 * Writer registration of @h.  check: true if this mount is registered on
 * connection generation @cur (nothing to do); else false, and the caller
 * owns the inode's registration (busy) until wreg_set, which records the
 * generation now registered (0: none).  An inode not in the table: true.
 * created: a CREATE registered this mount on @gen (unless a thread is at
 * it).  take_last: if @h's only open file is the caller's and the mount is
 * registered (and, with @clean, has nothing unpublished), true with the
 * generation in *@gen and the caller owning the registration: it releases
 * it and calls wreg_set(0).
 */
bool orch_mnt_inode_wreg_check(struct orch_mnt_itab *t, uint64_t h, uint64_t cur);
void orch_mnt_inode_wreg_set(struct orch_mnt_itab *t, uint64_t h, uint64_t gen);
void orch_mnt_inode_wreg_created(struct orch_mnt_itab *t, uint64_t h, uint64_t gen);
bool orch_mnt_inode_wreg_take_last(struct orch_mnt_itab *t, uint64_t h, bool clean,
				   uint64_t *gen);

/*
 * An open file of @h more (after a successful open or create); @oreg_gen
 * non-zero: the request registered it on that connection generation.
 */
void orch_mnt_inode_opened(struct orch_mnt_itab *t, uint64_t h, uint64_t oreg_gen);
/*
 * Open registrations: claim returns true if @h is open here, nobody is
 * registering it, and it is not registered on connection generation @cur
 * (0: the connection is down); the caller then owns its registration
 * (i_oreg_busy), sends CL2SV_WRITERS OPEN and ends the claim with
 * oreg_set.  claim_stale claims so every open inode whose server @s has
 * gens[s] (0: down) as its generation and that is not registered on it,
 * for the keeper (reopen.c): *@out gets a malloc'd array of their
 * handles, sorted (so by server), and the count is returned.
 */
bool orch_mnt_inode_oreg_claim(struct orch_mnt_itab *t, uint64_t h, uint64_t cur);
size_t orch_mnt_inode_oreg_claim_stale(struct orch_mnt_itab *t, const uint64_t *gens,
				       unsigned int nservers, uint64_t **out);
/* Ends a claim of @h that sent nothing: as it was. */
void orch_mnt_inode_oreg_unclaim(struct orch_mnt_itab *t, uint64_t h);
/*
 * Ends a claim: the OPEN went on generation @gen (0: it failed, not
 * registered; @none: the server answered that it keeps no registration).
 * Returns true if the caller must send CLOSE on @gen to undo its OPEN: @h
 * was closed meanwhile, or it was registered on @gen already (a claim made
 * on a generation read before another thread registered it).
 */
bool orch_mnt_inode_oreg_set(struct orch_mnt_itab *t, uint64_t h, uint64_t gen, bool none);
/* Servers (@want, @n of them) this mount has files open on; false if none. */
bool orch_mnt_inode_open_servers(struct orch_mnt_itab *t, bool *want, unsigned int n);
/*
 * The inodes in the table that server @server owns (what it may have
 * leased), in a new array *@out (free it) of *@n.  0 or -ENOMEM.
 */
struct orch_mnt_inode_ref {
	uint64_t handle;
	bool dir;
};
int orch_mnt_inode_list_server(struct orch_mnt_itab *t, unsigned int server,
			       struct orch_mnt_inode_ref **out, size_t *n);
/* i_fresh: set by create, cleared by another open or a write; take clears it. */
void orch_mnt_inode_set_fresh(struct orch_mnt_itab *t, uint64_t h, bool fresh);
bool orch_mnt_inode_take_fresh(struct orch_mnt_itab *t, uint64_t h);

/*
 * After a release that could not publish what this mount wrote to @h (the
 * inode's server down, say): if no file of @h is open here any more,
 * forgets the pending written end and write time.  Nothing here would
 * publish them now but a later open for writing, truncate or copy, which
 * would make the file grow to an end whose bytes the servers cut in the
 * meantime (a writer that went without publishing), and until then this
 * mount alone would report that size.
 */
void orch_mnt_inode_unpublished_drop(struct orch_mnt_itab *t, uint64_t h);

/*
 * One open file of @h less.  Returns true if that was the last one and it
 * was registered, with the registration's connection generation in
 * *@gen (the caller sends CL2SV_WRITERS CLOSE on it if still up).
 */
bool orch_mnt_inode_released(struct orch_mnt_itab *t, uint64_t h, uint64_t *gen);

/*
 * The absent-xattr cache: index of @name among the well-known names, or
 * -1.  is_absent: true if @h was found to lack name @idx less than @ttl_ms
 * ago.  set_absent records it now, from a GETXATTR sent at @asked
 * (orch_mnt_inode_asked); forget drops the inode's record, when a setxattr
 * or removexattr through this mount has ended, and so an answer asked for
 * before.
 */
int orch_mnt_xattr_wellknown(const char *name);
bool orch_mnt_inode_xattr_is_absent(struct orch_mnt_itab *t, uint64_t h, int idx,
				    uint32_t ttl_ms);
void orch_mnt_inode_xattr_set_absent(struct orch_mnt_itab *t, uint64_t h, int idx,
				     uint64_t asked);
void orch_mnt_inode_xattr_forget(struct orch_mnt_itab *t, uint64_t h);

/*
 * Close-to-open, at an open that found @a: true if the kernel may keep the
 * file's page cache, which it may if @may_keep and @a's size and mtime equal
 * what the previous open or close recorded, and no open that dropped the
 * pages is still on its way (i_cto_dropping).  Records @a as the new
 * reference.  False counts this open as dropping and sets *@dropping:
 * the caller calls orch_mnt_inode_cto_dropped once the file is used.
 */
bool orch_mnt_inode_cto_open(struct orch_mnt_itab *t, const struct orch_attr *a, bool may_keep,
			     bool *dropping);
/* A file opened without keep_cache was used: its open finished, old pages gone. */
void orch_mnt_inode_cto_dropped(struct orch_mnt_itab *t, uint64_t h);
/* Records @a as the close-to-open reference (at close). */
void orch_mnt_inode_cto_set(struct orch_mnt_itab *t, const struct orch_attr *a);
/*
 * A directory's listing cached by the kernel: covered by pushes until
 * @until_ms (set), or whether it still is (list_covered).  A directory the
 * table does not hold is not covered.
 */
void orch_mnt_inode_list_set(struct orch_mnt_itab *t, uint64_t h, uint64_t until_ms);
bool orch_mnt_inode_list_covered(struct orch_mnt_itab *t, uint64_t h, uint64_t now_ms);

/* --- ctl.c: runtime knobs and counters as virtual xattrs on the root ---------- */

#define ORCH_MNT_CTL_PREFIX "user.orchard."

/* True if @name on inode @ino is one of ours (so the server never sees it). */
bool orch_mnt_ctl_is_ctl(uint64_t ino, const char *name);

/*
 * getxattr of a virtual name: the value into @buf (at most @size bytes), its
 * length into *@len; with @size 0 only the length (stats: an upper bound).
 * Returns 0, -ENODATA for an unknown name, -ERANGE if @size is too small.
 */
int orch_mnt_ctl_get(struct orch_mnt *m, const char *name, char *buf, size_t size,
		     size_t *len);

/*
 * setxattr of a virtual name by @uid.  Returns 0 (changed), -EOPNOTSUPP for
 * an unknown name, -EPERM for a read-only name or a caller that is neither
 * root nor the mount's owner, -EINVAL for a bad value (nothing changed),
 * -EEXIST with XATTR_CREATE (every knob exists).
 */
int orch_mnt_ctl_set(struct orch_mnt *m, uid_t uid, const char *name, const char *value,
		     size_t size, int flags);

/* --- Handlers in file.c and dir.c ----------------------------------------------- */

/*
 * Publishes the pending written end of @h (EXTEND) before a size change.
 * Returns 0 or -errno.
 */
int orch_mnt_publish_size(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h);

void orch_mnt_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void orch_mnt_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		     struct fuse_file_info *fi);
void orch_mnt_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		   struct fuse_file_info *fi);
void orch_mnt_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size,
		    off_t off, struct fuse_file_info *fi);
void orch_mnt_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void orch_mnt_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void orch_mnt_fsync(fuse_req_t req, fuse_ino_t ino, int datasync,
		    struct fuse_file_info *fi);
void orch_mnt_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
			struct fuse_file_info *fi);
void orch_mnt_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			      struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			      struct fuse_file_info *fi_out, size_t len, int flags);

/*
 * Ends a claimed open registration of @h (orch_mnt_inode_oreg_claim) with
 * the result @error of its OPEN, sent on connection generation @gen: records
 * it, and undoes an OPEN that was one too many.  Returns false if the
 * server did not answer (the transport failed: try again later).
 */
bool orch_mnt_open_registered(struct orch_mnt *m, uint64_t h, int error, uint64_t gen);

/* The open permission check (file.c): 0 with default_permissions or for root. */
int orch_mnt_open_check(struct orch_mnt *m, const struct orch_cred *cred, uint64_t h,
			int flags);

void orch_mnt_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void orch_mnt_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		      struct fuse_file_info *fi);
void orch_mnt_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
			  struct fuse_file_info *fi);
void orch_mnt_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void orch_mnt_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync,
		       struct fuse_file_info *fi);

#endif
