/*
 * Admin requests of the reverse-map tools, and the admin thread.
 *
 * AD2SV_FSMAP and AD2SV_NAMES are answered on the loop thread: each is a
 * bounded index scan (one page of at most ORCH_FSMAP_PAGE_MAX records, at
 * most ADM_NAMES_MAX entries).  AD2SV_SCRUB is long: it runs on the admin
 * thread, one scrub at a time per server (a second gets EBUSY), and its
 * reply is posted back to the loop.  The data pass reads at most --rate
 * bytes per second and holds no snapshot while it sleeps, so clients keep
 * their share of the disk and freed blocks are reused as usual.
 *
 * The same thread turns bad blocks into file paths: the store's bad-block
 * hook (called on the reading thread) only queues the block; the thread
 * asks the store who owns it (orch_store_owners) and the cluster where
 * those files are (client/path.h, through a client of its own: the admin
 * thread never touches the loop's connections or the namespace handle),
 * and logs one rate-limited line per block.
 *
 * It also reclaims data objects whose inode is gone (docs/DESIGN.md,
 * "Orphaned data objects"): at start it sweeps every object, and it tells
 * each peer to sweep the objects of files whose inode this server held
 * (SV2SV_RECLAIM), since a power cut may have taken some of those inodes.
 *
 * Admin requests are authorised like AD2SV_STATS: any peer that passed
 * the cluster-key handshake; nothing is served before it.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "client/path.h"
#include "client/rpc.h"
#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "proto/layout.h"
#include "server/flush.h"
#include "server/sv.h"
#include "server/sv_admin.h"
#include "server/sv_peer.h"
#include "server/sv_mirror.h"
#include "server/sv_req.h"
#include "store/fsmap.h"

#define ADM_NAMES_MAX 16
#define ADM_FINDINGS_MAX 1000        /* listed in a scrub report; all are counted */
#define ADM_BAD_QUEUE_MAX 1024       /* blocks waiting for a log line */
#define ADM_BAD_RECENT 64            /* blocks not logged twice in a row */
#define ADM_OWNERS_MAX 16            /* owners named per bad block */
#define ADM_INTENT_AGE_MS (10 * 60 * 1000)
#define ADM_BATCH 256                /* handles asked of other servers at once */
#define ADM_CLIENT_TIMEOUT_MS 5000
#define ADM_OWNERS_TEXT 2048
#define ADM_ORPHAN_GRACE_MS 2000      /* a delete intent reaches every server by then */
#define ADM_RECLAIM_RETRY_MS 5000     /* a peer that did not answer is asked again */
#define ADM_PAST_TRIES 24             /* times a refused cut is asked again */
#define ADM_PAST_SLACK_MS 500         /* past the peer's start hold, before asking again */

/* --- State ----------------------------------------------------------------- */

struct adm_finding {
	char rule[8];
	char structure[16];
	int64_t ag, block;           /* -1 if not about a block */
	uint64_t handle;
	char detail[256];
	char *owners;                /* bad blocks: the files hit (malloc'd) */
};

struct adm_job {
	struct sv_req *j_req;
	bool j_data, j_json, j_reclaim;
	uint64_t j_rate;             /* bytes per second, 0: no limit */
	int j_error;                 /* operational failure */
	long j_count;                /* findings */
	struct adm_finding *j_f;     /* [ADM_FINDINGS_MAX] */
	size_t j_nf;
	uint64_t j_blocks_read;
	uint64_t j_objects;
	uint64_t j_ms;
	uint64_t *j_bad;             /* blocks the data pass found bad */
	size_t j_nbad;
	struct orch_buf j_out;       /* the report */
	struct sv_server *j_sv;
};

struct sv_admin {
	struct sv_server *a_sv;
	pthread_t a_thread;
	bool a_started;
	pthread_mutex_t a_lock;
	pthread_cond_t a_cv;
	bool a_stop;                 /* protected by a_lock */
	atomic_bool a_cancel;        /* polled by the passes, set under a_lock */
	struct adm_job *a_job;       /* protected by a_lock: queued scrub */
	bool a_busy;                 /* loop thread: a scrub is queued or running */
	uint64_t a_bad[ADM_BAD_QUEUE_MAX]; /* protected by a_lock */
	size_t a_nbad;
	uint64_t a_bad_dropped;
	uint64_t a_recent[ADM_BAD_RECENT]; /* admin thread only */
	size_t a_nrecent;
	struct orch_client *a_cl;    /* admin thread only */
	struct orch_path_cache *a_paths;
	/* Reclaim (bit i: server index i), protected by a_lock. */
	uint64_t a_sweep;            /* owners whose objects to sweep */
	uint64_t a_tell;             /* peers not yet told to sweep ours */
	uint64_t a_telling;          /* ... being told, by the loop thread */
	uint64_t a_retry_ms;         /* when to try a_sweep and a_tell again */
	_Atomic uint64_t a_reclaimed; /* objects deleted by a sweep (stats) */
	/* Objects with dead bytes past the size whose cut the inode's server
	 * refused (BUSY), asked again at a_past_ms; admin thread only. */
	uint64_t a_past[ADM_BATCH];
	uint8_t a_past_tries[ADM_BATCH];
	size_t a_npast;
	uint64_t a_past_ms;
	_Atomic uint64_t a_cut;      /* objects a sweep had cut at the size (stats) */
};


/* --- FSMAP and NAMES (loop thread) ------------------------------------------------- */

static int adm_fsmap_rec(void *arg, const struct orch_fsmap_rec *r)
{
	orch_fsmap_encode_rec(arg, r);
	return 0;
}

int sv_admin_fsmap(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_fsmap_cursor cur = { .valid = m->fsmap_flags & ORCH_FSMAP_RESUME,
					 .start = m->fsmap_key.start, .owner = m->fsmap_key.owner,
					 .off = m->fsmap_key.fileoff };
	struct orch_store_info info;
	struct orch_fsmap_geom g;
	struct orch_msg rep;
	struct orch_buf b;
	bool eof = true;
	int error;

	orch_store_info(sv->s_store, &info);
	g = (struct orch_fsmap_geom){ .ag_blocks = info.ag_blocks, .ag_count = info.ag_count,
				      .maxext = info.maxext, .blocks = info.blocks };
	orch_buf_init(&b, ORCH_FSMAP_HDR_BYTES +
			  (size_t)ORCH_FSMAP_PAGE_MAX * ORCH_FSMAP_REC_BYTES);
	orch_fsmap_encode_geom(&b, &g);
	error = orch_store_fsmap(sv->s_store, m->offset, m->size ? m->size : UINT64_MAX,
				 &cur, ORCH_FSMAP_PAGE_MAX, adm_fsmap_rec, &b, &eof);
	orch_msg_init(&rep, 0);
	rep.status = error ? error : b.b_err;
	rep.data = orch_str_of((const char *)b.b_data, b.b_len);
	rep.eof = eof;
	rep.fsmap_key = (struct orch_fsmap_key){ cur.start, cur.owner, cur.off };
	sv_reply(r, &rep);
	orch_buf_fini(&b);
	return 0;
}

int sv_admin_names(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_dirent *d = calloc(ADM_NAMES_MAX, sizeof(*d));
	struct orch_msg rep;
	uint32_t n = 0;
	uint64_t total = 0;

	orch_msg_init(&rep, 0);
	rep.status = d ? orch_meta_names(sv->s_meta, m->handle, d, ADM_NAMES_MAX, &n, &total)
		       : -ENOMEM;
	rep.dirents = d;
	rep.ndirents = n;
	rep.size = total;
	sv_reply(r, &rep);
	free(d);
	return 0;
}

/* --- Findings ---------------------------------------------------------------------- */

static struct adm_finding *adm_add(struct adm_job *j, const char *rule,
				   const char *structure, int64_t ag, int64_t block,
				   uint64_t handle, const char *detail)
{
	struct adm_finding *f;

	j->j_count++;
	if (j->j_nf >= ADM_FINDINGS_MAX)
		return NULL;
	f = &j->j_f[j->j_nf++];
	memset(f, 0, sizeof(*f));
	snprintf(f->rule, sizeof(f->rule), "%s", rule);
	snprintf(f->structure, sizeof(f->structure), "%s", structure);
	f->ag = ag;
	f->block = block;
	f->handle = handle;
	snprintf(f->detail, sizeof(f->detail), "%s", detail);
	return f;
}

static void adm_store_finding(void *arg, const struct orch_store_finding *f)
{
	adm_add(arg, f->rule, f->structure, f->ag, f->block, f->handle, f->detail);
}

static void adm_meta_finding(void *arg, const struct orch_meta_finding *f)
{
	adm_add(arg, f->rule, f->structure, -1, -1, f->handle, f->detail);
}

/* --- Bad blocks to paths (admin thread) ----------------------------------------- */

struct adm_owner {
	int64_t owner;
	uint64_t handle;
	uint64_t objblock;           /* the bad block's block in the object */
};

struct adm_owners {
	uint64_t gblock;
	uint64_t ag_blocks;
	struct adm_owner o[ADM_OWNERS_MAX];
	size_t n, more;
};

static int adm_owner_cb(void *arg, const struct orch_store_rmap *r)
{
	struct adm_owners *ow = arg;
	uint64_t start = (uint64_t)r->ag * ow->ag_blocks + r->agbno;

	if (ow->n == ADM_OWNERS_MAX || ow->gblock < start) {
		ow->more += ow->gblock >= start;
		return 0;
	}
	ow->o[ow->n].owner = r->owner;
	ow->o[ow->n].handle = r->handle;
	ow->o[ow->n].objblock = r->fileoff + (ow->gblock - start);
	ow->n++;
	return 0;
}

/* Appends to @out at *@pos, never past @len. */
static void adm_cat(char *out, size_t len, size_t *pos, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static void adm_cat(char *out, size_t len, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*pos >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(out + *pos, len - *pos, fmt, ap);
	va_end(ap);
	if (n > 0)
		*pos = ORCH_MIN(len - 1, *pos + (size_t)n);
}

/* "file bytes A..B" for one owner; every path of the file. */
static void adm_describe_owner(struct sv_admin *a, const struct adm_owner *o,
			       char *out, size_t len, size_t *pos)
{
	const struct orch_path_info *pi;
	uint64_t local = o->objblock * ORCH_STORE_BLOCK, off = local;
	char name[ORCH_PATH_MAX + 64];

	if (o->owner == ORCH_STORE_OWN_FS) {
		adm_cat(out, len, pos, "%sstatic metadata", *pos ? ", " : "");
		return;
	}
	if (o->owner == ORCH_STORE_OWN_DEFECTIVE) {
		adm_cat(out, len, pos, "%sbad blocks", *pos ? ", " : "");
		return;
	}
	if (!a->a_paths || orch_path_lookup(a->a_paths, o->handle, &pi) || !o->handle) {
		adm_cat(out, len, pos, "%sobject nid %" PRId64 " bytes %" PRIu64 "..%" PRIu64,
			*pos ? ", " : "", o->owner, local, local + ORCH_STORE_BLOCK - 1);
		return;
	}
	if (pi->has_attr && orch_layout_is_valid(&pi->attr.layout))
		off = orch_path_file_offset(&pi->attr.layout, a->a_sv->s_index, local);
	for (unsigned int i = 0; i < ORCH_MAX(pi->npaths, 1u); i++) {
		orch_path_describe(pi, pi->npaths ? (int)i : -1, name, sizeof(name));
		adm_cat(out, len, pos, "%s%s bytes %" PRIu64 "..%" PRIu64, *pos ? ", " : "",
			name, off, off + ORCH_STORE_BLOCK - 1);
	}
	if (pi->more)
		adm_cat(out, len, pos, " (+%" PRIu64 " other links)", pi->more);
}

/* Every file that owns global block @g, as one line of text. */
static void adm_describe_block(struct sv_admin *a, uint64_t g, char *out, size_t len)
{
	struct adm_owners ow = { .gblock = g };
	struct orch_store_info info;
	size_t pos = 0;
	int error;

	out[0] = 0;
	orch_store_info(a->a_sv->s_store, &info);
	ow.ag_blocks = info.ag_blocks;
	error = orch_store_owners(a->a_sv->s_store, g, g + 1, adm_owner_cb, &ow);
	if (error) {
		snprintf(out, len, "owners unknown: %s", strerror(-error));
		return;
	}
	for (size_t i = 0; i < ow.n; i++)
		adm_describe_owner(a, &ow.o[i], out, len, &pos);
	if (ow.more)
		adm_cat(out, len, &pos, ", +%zu more owners", ow.more);
	if (!ow.n)
		adm_cat(out, len, &pos, "free space");
}

static void adm_geom(struct sv_admin *a, uint64_t g, uint64_t *ag, uint64_t *agbno)
{
	struct orch_store_info info;

	orch_store_info(a->a_sv->s_store, &info);
	*ag = g / info.ag_blocks;
	*agbno = g % info.ag_blocks;
}

/*
 * True if block @g was reported lately (a client retrying a read hits it
 * again and again); remembers it otherwise.
 */
static bool adm_recent(struct sv_admin *a, uint64_t g)
{
	for (size_t i = 0; i < ADM_BAD_RECENT; i++)
		if (a->a_recent[i] == g + 1)
			return true;
	a->a_recent[a->a_nrecent] = g + 1;  /* 0 is an empty slot */
	a->a_nrecent = (a->a_nrecent + 1) % ADM_BAD_RECENT;
	return false;
}

/* Logs one bad block found by a read, unless it was logged just now. */
static void adm_log_bad(struct sv_admin *a, uint64_t g)
{
	char text[ADM_OWNERS_TEXT];
	uint64_t ag, agbno;

	if (adm_recent(a, g))
		return;
	adm_describe_block(a, g, text, sizeof(text));
	adm_geom(a, g, &ag, &agbno);
	ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "bad block %" PRIu64 " (ag %" PRIu64 " block %" PRIu64
			   "): %s", g, ag, agbno, text);
}

/* The store's hook: the reading thread only queues the block. */
static void adm_bad_hook(void *arg, uint64_t h, uint64_t off, uint64_t gblock)
{
	struct sv_admin *a = arg;

	(void)h;
	(void)off;
	pthread_mutex_lock(&a->a_lock);
	if (a->a_started && !a->a_stop && a->a_nbad < ADM_BAD_QUEUE_MAX) {
		a->a_bad[a->a_nbad++] = gblock;
		pthread_cond_signal(&a->a_cv);
	} else {
		a->a_bad_dropped++;
	}
	pthread_mutex_unlock(&a->a_lock);
}

/* --- Asking other servers (admin thread) ------------------------------------------ */

/*
 * GETATTR of each handle, pipelined: nlink, 0 if absent, UINT32_MAX
 * unknown; the attributes too if @attr is not NULL (valid where nlink is
 * neither).
 */
static int adm_inode_attrs(struct sv_admin *a, const uint64_t *h, size_t n, uint32_t *nlink,
			   struct orch_attr *attr)
{
	struct orch_call *calls[ADM_BATCH];

	for (size_t base = 0; base < n; base += ADM_BATCH) {
		size_t k = ORCH_MIN(n - base, (size_t)ADM_BATCH);

		for (size_t i = 0; i < k; i++) {
			struct orch_msg req;

			orch_msg_init(&req, ORCH_CL2SV_GETATTR);
			req.handle = h[base + i];
			calls[i] = NULL;
			nlink[base + i] = UINT32_MAX;
			if (orch_handle_server(req.handle) >= a->a_sv->s_cfg.nservers)
				nlink[base + i] = 0;
			else
				orch_client_send(a->a_cl, orch_handle_server(req.handle), &req,
						 &calls[i]);
		}
		for (size_t i = 0; i < k; i++) {
			struct orch_reply rep = { 0 };
			int error;

			if (!calls[i])
				continue;
			error = orch_client_wait(a->a_cl, calls[i], &rep);
			if (!error) {
				nlink[base + i] = rep.m.attr.nlink ? rep.m.attr.nlink : 1;
				if (attr)
					attr[base + i] = rep.m.attr;
				orch_reply_release(&rep);
			} else if (error == -ENOENT) {
				nlink[base + i] = 0;
			}
		}
	}
	return 0;
}

static int adm_inode_nlink(void *arg, const uint64_t *h, size_t n, uint32_t *nlink)
{
	return adm_inode_attrs(arg, h, n, nlink, NULL);
}

/* Entries naming @h on every other server. */
static int adm_names_count(void *arg, uint64_t h, uint64_t *count)
{
	struct sv_admin *a = arg;

	*count = 0;
	for (unsigned int s = 0; s < a->a_sv->s_cfg.nservers; s++) {
		struct orch_reply rep = { 0 };
		struct orch_msg req;
		int error;

		if (s == a->a_sv->s_index)
			continue;
		orch_msg_init(&req, ORCH_AD2SV_NAMES);
		req.handle = h;
		error = orch_client_call(a->a_cl, s, &req, &rep);
		if (error)
			return error;
		*count += rep.m.size;
		orch_reply_release(&rep);
	}
	return 0;
}

static const struct orch_meta_fsck_ops adm_fsck_ops = {
	.inode_nlink = adm_inode_nlink,
	.names_count = adm_names_count,
};

/* --- The scrub (admin thread) ----------------------------------------------------- */

struct adm_handles {
	uint64_t h[ADM_BATCH];
	size_t n;
};

static int adm_handle_cb(void *arg, uint64_t h)
{
	struct adm_handles *hs = arg;

	hs->h[hs->n++] = h;
	return 0;
}

/*
 * Reports suspects of N6 still orphaned after ADM_ORPHAN_GRACE_MS: a file
 * removed a moment ago loses its inode first and its data objects when the
 * delete intent reaches this server, so an object without an inode is a
 * fault only if it outlives that.
 */
static void adm_orphans_confirm(struct sv_admin *a, struct adm_job *j, const uint64_t *h,
				size_t n, uint64_t since_ms)
{
	uint64_t now = orch_time_now_ms();

	if (n && now < since_ms + ADM_ORPHAN_GRACE_MS) {
		struct timespec ts = { 0, 0 };
		uint64_t ms = since_ms + ADM_ORPHAN_GRACE_MS - now;

		ts.tv_sec = (time_t)(ms / 1000);
		ts.tv_nsec = (long)(ms % 1000) * 1000000;
		nanosleep(&ts, NULL);
	}
	for (size_t i = 0; i < n && !atomic_load(&a->a_cancel); i++) {
		uint32_t again;
		char d[160];

		adm_inode_nlink(a, &h[i], 1, &again);
		if (again != 0 || !orch_store_has_object(a->a_sv->s_store, h[i]))
			continue;
		snprintf(d, sizeof(d), "data object %#" PRIx64 " has no inode on server %u",
			 h[i], orch_handle_server(h[i]));
		adm_add(j, "N6", "obj", -1, -1, h[i], d);
	}
}

/*
 * N7: does this server's object of file @h (attributes @at) hold bytes
 * past the file's size?  *@local gets the object's size where the file
 * ends, if not NULL.
 */
static bool adm_past_size(struct sv_admin *a, uint64_t h, const struct orch_attr *at,
			  uint64_t *local)
{
	unsigned int self = a->a_sv->s_index;
	uint64_t want = 0, size;

	if (!S_ISREG(at->mode) || orch_store_object_size(a->a_sv->s_store, h, &size))
		return false;
	if (orch_layout_is_valid(&at->layout) && self < at->layout.stripe_count)
		want = orch_layout_local_size(&at->layout, at->size, self);
	if (local)
		*local = want;
	return size > want;
}

/*
 * CL2SV_WRITERS PROBE of @h at its inode's server: false if a writer is
 * registered or a cut or truncate runs (BUSY), or it cannot say; else
 * *@at gets the attributes and *@epoch the epoch of @h's writers.
 */
static bool adm_writers_probe(struct sv_admin *a, uint64_t h, struct orch_attr *at,
			      uint64_t *epoch)
{
	struct orch_reply rep = { 0 };
	struct orch_msg req;

	orch_msg_init(&req, ORCH_CL2SV_WRITERS);
	req.handle = h;
	req.writers_flags = ORCH_WRITERS_PROBE;
	if (orch_handle_server(h) >= a->a_sv->s_cfg.nservers ||
	    orch_client_call(a->a_cl, orch_handle_server(h), &req, &rep))
		return false;  /* a writer (BUSY), gone, or not asked: nothing to say */
	*at = rep.m.attr;
	*epoch = rep.m.cookie;
	orch_reply_release(&rep);
	return true;
}

/*
 * N7 confirmed: the inode's server says no writer is registered and no
 * cut or truncate runs (CL2SV_WRITERS PROBE: a live writer's bytes past
 * the size are on their way to being published), and with the size it
 * answered, the object still holds bytes past it.  The object's size is
 * read between two PROBEs that answered the same epoch, so no writer
 * registered, no cut ran and no truncate changed the size meanwhile.
 * With --reclaim the inode's server then cuts them (RECLAIM), as it would
 * for a new writer.
 */
static void adm_past_confirm(struct sv_admin *a, struct adm_job *j, uint64_t h)
{
	struct orch_reply rep = { 0 };
	struct orch_attr at;
	struct orch_msg req;
	uint64_t local = 0, size = 0, epoch, again;
	const char *how = "";
	char d[224], why[96];
	int error;

	if (!adm_writers_probe(a, h, &at, &epoch) ||
	    orch_store_object_size(a->a_sv->s_store, h, &size) ||
	    !adm_writers_probe(a, h, &at, &again) || again != epoch ||
	    !adm_past_size(a, h, &at, &local) || size <= local)
		return;
	orch_msg_init(&req, ORCH_CL2SV_WRITERS);
	req.handle = h;
	if (j->j_reclaim) {
		req.writers_flags = ORCH_WRITERS_RECLAIM;
		error = orch_client_call(a->a_cl, orch_handle_server(h), &req, &rep);
		if (!error) {
			orch_reply_release(&rep);
			how = " (reclaimed)";
		} else {
			snprintf(why, sizeof(why), " (not reclaimed: %s)", strerror(-error));
			how = why;
		}
	}
	snprintf(d, sizeof(d), "data object %#" PRIx64 " holds %" PRIu64 " bytes past the file's "
		 "size and no writer can publish them%s", h, size - local, how);
	adm_add(j, "N7", "obj", -1, -1, h, d);
}

/* N6: data objects whose inode is gone (asked of the inode's server). */
static int adm_orphans(struct sv_admin *a, struct adm_job *j)
{
	uint64_t *sus = malloc(ADM_FINDINGS_MAX * sizeof(*sus));
	uint64_t *past = malloc(ADM_FINDINGS_MAX * sizeof(*past));
	struct orch_attr *attr = malloc(ADM_BATCH * sizeof(*attr));
	uint64_t after = 0, since = 0;
	size_t nsus = 0, npast = 0;
	bool eof = false;
	int error = 0;

	if (!sus || !past || !attr) {
		free(sus);
		free(past);
		free(attr);
		return -ENOMEM;
	}
	while (!eof && !error && !atomic_load(&a->a_cancel)) {
		struct adm_handles hs = { .n = 0 };
		uint32_t nlink[ADM_BATCH];

		error = orch_store_handles(a->a_sv->s_store, &after, ADM_BATCH, adm_handle_cb,
					   &hs, &eof);
		if (error)
			break;
		j->j_objects += hs.n;
		adm_inode_attrs(a, hs.h, hs.n, nlink, attr);
		for (size_t i = 0; i < hs.n && npast < ADM_FINDINGS_MAX; i++)
			if (nlink[i] != 0 && nlink[i] != UINT32_MAX &&
			    adm_past_size(a, hs.h[i], &attr[i], NULL))
				past[npast++] = hs.h[i];
		for (size_t i = 0; i < hs.n && nsus < ADM_FINDINGS_MAX; i++) {
			if (nlink[i] != 0)
				continue;
			if (!nsus)
				since = orch_time_now_ms();
			sus[nsus++] = hs.h[i];
		}
	}
	if (!error)
		adm_orphans_confirm(a, j, sus, nsus, since);
	for (size_t i = 0; !error && i < npast && !atomic_load(&a->a_cancel); i++)
		adm_past_confirm(a, j, past[i]);
	free(sus);
	free(past);
	free(attr);
	return error;
}

static void adm_bad_block(void *arg, uint64_t g, const char *why)
{
	struct adm_job *j = arg;
	struct adm_finding *f;
	uint64_t ag, agbno;
	char d[192];

	adm_geom(j->j_sv->s_admin, g, &ag, &agbno);
	snprintf(d, sizeof(d), "block %" PRIu64 " fails its checksum: %s", g, why);
	f = adm_add(j, "I17", "data", (int64_t)ag, (int64_t)agbno, 0, d);
	if (f && j->j_nbad < ADM_FINDINGS_MAX)
		j->j_bad[j->j_nbad++] = g;
}

/* Names the files of every bad block, logs them and quarantines the blocks. */
static void adm_bad_report(struct sv_admin *a, struct adm_job *j)
{
	char *text = malloc(ADM_OWNERS_TEXT);
	size_t k = 0;

	for (size_t i = 0; i < j->j_nf && text; i++) {
		struct adm_finding *f = &j->j_f[i];
		uint64_t g;
		int error;

		if (strcmp(f->rule, "I17") || k >= j->j_nbad)
			continue;
		g = j->j_bad[k++];
		adm_describe_block(a, g, text, ADM_OWNERS_TEXT);
		f->owners = strdup(text);
		adm_recent(a, g);
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "bad block %" PRIu64 " (ag %" PRId64 " block %"
				   PRId64 "): %s", g, f->ag, f->block, text);
		error = orch_store_quarantine(a->a_sv->s_store, g, 1);
		if (error && error != -EINVAL)
			ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot quarantine block %" PRIu64 ": %s",
					   g, strerror(-error));
	}
	free(text);
}

static int adm_scrub_run(struct sv_admin *a, struct adm_job *j)
{
	struct sv_server *sv = a->a_sv;
	int64_t since;
	int failed = orch_store_failed(sv->s_store, &since);
	long n;

	if (failed) {
		/* Its indexes may look clean: what it lost is what it never wrote. */
		char d[200], when[32];
		time_t t = (time_t)since;
		struct tm tm;

		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", gmtime_r(&t, &tm));
		snprintf(d, sizeof(d), "the store failed at %s UTC: %s; read-only, data not "
			 "flushed before may be lost: restart the server on healthy media",
			 when, strerror(-failed));
		adm_add(j, "F1", "store", -1, -1, 0, d);
	}
	n = orch_store_check(sv->s_store, false, adm_store_finding, j);
	if (n < 0)
		return (int)n;
	if (j->j_data) {
		n = orch_store_scan_data(sv->s_store, j->j_rate, adm_bad_block, j, &a->a_cancel);
		if (n < 0)
			return (int)n;
		j->j_blocks_read = (uint64_t)n;
		adm_bad_report(a, j);
	}
	n = orch_meta_fsck(orch_meta_db_path(sv->s_meta), sv->s_index, ADM_INTENT_AGE_MS,
			   &adm_fsck_ops, a, adm_meta_finding, j, ADM_FINDINGS_MAX);
	if (n < 0)
		return (int)n;
	j->j_count += n - (long)ORCH_MIN((unsigned long)n, (unsigned long)ADM_FINDINGS_MAX);
	return adm_orphans(a, j);
}

/* --- The report ----------------------------------------------------------------- */

static void adm_json_str(struct orch_buf *b, const char *s)
{
	orch_buf_append(b, "\"", 1);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		char esc[8];

		if (c == '"' || c == '\\') {
			esc[0] = '\\';
			esc[1] = (char)c;
			orch_buf_append(b, esc, 2);
		} else if (c < 0x20) {
			snprintf(esc, sizeof(esc), "\\u%04x", c);
			orch_buf_append(b, esc, 6);
		} else {
			orch_buf_append(b, s, 1);
		}
	}
	orch_buf_append(b, "\"", 1);
}

static void adm_printf(struct orch_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void adm_printf(struct orch_buf *b, const char *fmt, ...)
{
	char tmp[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n > 0)
		orch_buf_append(b, tmp, ORCH_MIN((size_t)n, sizeof(tmp) - 1));
}

static void adm_render_json(struct adm_job *j, struct orch_buf *b)
{
	adm_printf(b, "{\"errors\": %ld, \"listed\": %zu, \"data\": %s, \"blocks_read\": %"
		   PRIu64 ", \"objects\": %" PRIu64 ", \"ms\": %" PRIu64 ", \"findings\": [",
		   j->j_count, j->j_nf, j->j_data ? "true" : "false", j->j_blocks_read,
		   j->j_objects, j->j_ms);
	for (size_t i = 0; i < j->j_nf; i++) {
		const struct adm_finding *f = &j->j_f[i];
		size_t mark = b->b_len;

		/* Leave room to close the document: drop findings that do not fit. */
		if (b->b_len > b->b_max - 8192)
			break;
		adm_printf(b, "%s{\"rule\": \"%s\", \"structure\": \"%s\", \"ag\": %" PRId64
			   ", \"block\": %" PRId64 ", \"handle\": %" PRIu64 ", \"detail\": ",
			   i ? ", " : "", f->rule, f->structure, f->ag, f->block, f->handle);
		adm_json_str(b, f->detail);
		if (f->owners) {
			orch_buf_append(b, ", \"owners\": ", 12);
			adm_json_str(b, f->owners);
		}
		orch_buf_append(b, "}", 1);
		(void)mark;
	}
	orch_buf_append(b, "]}", 2);
}

static void adm_render_text(struct adm_job *j, struct orch_buf *b)
{
	for (size_t i = 0; i < j->j_nf; i++) {
		const struct adm_finding *f = &j->j_f[i];

		if (b->b_len > b->b_max - 8192)
			break;
		adm_printf(b, "%s %s", f->rule, f->structure);
		if (f->ag >= 0)
			adm_printf(b, " ag %" PRId64, f->ag);
		if (f->block >= 0)
			adm_printf(b, " block %" PRId64, f->block);
		if (f->handle)
			adm_printf(b, " handle %#" PRIx64, f->handle);
		adm_printf(b, ": %s", f->detail);
		if (f->owners) {
			orch_buf_append(b, ": ", 2);
			orch_buf_append(b, f->owners, strlen(f->owners));
		}
		orch_buf_append(b, "\n", 1);
	}
	if ((size_t)j->j_count > j->j_nf)
		adm_printf(b, "... and %zu more findings\n", (size_t)j->j_count - j->j_nf);
}

static void adm_job_free(struct adm_job *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->j_nf; i++)
		free(j->j_f[i].owners);
	free(j->j_f);
	free(j->j_bad);
	orch_buf_fini(&j->j_out);
	free(j);
}

/* On the loop: answers the scrub request. */
static void adm_scrub_done(void *arg)
{
	struct adm_job *j = arg;
	struct orch_msg rep;

	orch_msg_init(&rep, 0);
	rep.status = j->j_error ? j->j_error : j->j_out.b_err;
	rep.size = (uint64_t)j->j_count;
	rep.json = orch_str_of((const char *)j->j_out.b_data, j->j_out.b_len);
	sv_reply(j->j_req, &rep);
	j->j_sv->s_scrub = (struct sv_scrub_last){
		.runs = j->j_sv->s_scrub.runs + 1, .end_s = time(NULL), .ms = j->j_ms,
		.findings = (uint64_t)j->j_count, .error = j->j_error, .data = j->j_data,
	};
	j->j_sv->s_admin->a_busy = false;
	adm_job_free(j);
}

static void adm_scrub(struct sv_admin *a, struct adm_job *j)
{
	uint64_t t0 = orch_time_now_ms();
	int error;

	ORCH_NOTICE("scrub started: data=%d rate=%" PRIu64, j->j_data, j->j_rate);
	error = adm_scrub_run(a, j);
	j->j_ms = orch_time_now_ms() - t0;
	if (error) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "scrub failed: %s", strerror(-error));
		j->j_error = error;
	} else if (j->j_json) {
		adm_render_json(j, &j->j_out);
	} else {
		adm_render_text(j, &j->j_out);
	}
	ORCH_NOTICE("scrub done: findings=%ld ms=%" PRIu64, j->j_count, j->j_ms);
	orch_ev_post(a->a_sv->s_ev, adm_scrub_done, j);
}

/* --- Reclaiming orphaned data objects (admin thread) ----------------------------- */

static void adm_dirty(void *arg)
{
	sv_flusher_dirty(arg);
}

/*
 * Has the inode's server cut the bytes of object @h past the file's size
 * (CL2SV_WRITERS RECLAIM), as a new writer's registration would: after a
 * power cut took an unsynced size, or a writer died, nothing else will
 * (DESIGN.md, "Writers and bytes past the size").  The server refuses
 * (BUSY) while a writer is registered, a cut runs or its start hold lasts;
 * the object is then asked about again later, @tries times so far.  False
 * only when there is no room to remember it.
 */
static bool adm_past_cut(struct sv_admin *a, uint64_t h, uint8_t tries)
{
	struct orch_reply rep = { 0 };
	struct orch_msg req;
	int error;

	orch_msg_init(&req, ORCH_CL2SV_WRITERS);
	req.handle = h;
	req.writers_flags = ORCH_WRITERS_RECLAIM;
	error = orch_client_call(a->a_cl, orch_handle_server(h), &req, &rep);
	if (!error) {
		orch_reply_release(&rep);
		atomic_fetch_add(&a->a_cut, 1);
		return true;
	}
	if (error == -ENOENT || error == -EINVAL || tries >= ADM_PAST_TRIES)
		return true;   /* gone, or not a file: nothing to cut */
	if (a->a_npast == ORCH_ARRAY_SIZE(a->a_past))
		return false;
	if (!a->a_npast)
		a->a_past_ms = orch_time_now_ms() + a->a_sv->s_cfg.op_timeout_ms / 4 +
			       ADM_PAST_SLACK_MS;
	a->a_past_tries[a->a_npast] = tries;
	a->a_past[a->a_npast++] = h;
	return true;
}

/* Asks again about the objects adm_past_cut could not have cut. */
static void adm_past_retry(struct sv_admin *a)
{
	uint64_t h[ADM_BATCH];
	uint8_t tries[ADM_BATCH];
	struct orch_attr attr[ADM_BATCH];
	uint32_t nlink[ADM_BATCH];
	size_t n = a->a_npast;

	memcpy(h, a->a_past, n * sizeof(h[0]));
	memcpy(tries, a->a_past_tries, n * sizeof(tries[0]));
	a->a_npast = 0;
	adm_inode_attrs(a, h, n, nlink, attr);
	for (size_t i = 0; i < n && !atomic_load(&a->a_cancel); i++) {
		if (nlink[i] == 0 || nlink[i] == UINT32_MAX)
			continue;   /* the orphan sweeps deal with those */
		if (adm_past_size(a, h[i], &attr[i], NULL))
			adm_past_cut(a, h[i], (uint8_t)(tries[i] + 1));
	}
}

/*
 * Deletes this server's objects whose handle belongs to a server in
 * @owners and whose inode that server says does not exist.  Safe because
 * a handle is never handed out twice (meta: a counter reservation is
 * durable before any value of it leaves): no inode can come to own the
 * object later, and a removal's own delete of it is idempotent.  Returns
 * the owners that could not be asked (down, or failing): sweep them again.
 */
static uint64_t adm_sweep(struct sv_admin *a, uint64_t owners)
{
	struct orch_store *st = a->a_sv->s_store;
	uint64_t after = 0, left = 0, reclaimed = 0;
	bool eof = false;

	while (!eof && !atomic_load(&a->a_cancel)) {
		struct adm_handles hs = { .n = 0 };
		uint64_t ask[ADM_BATCH], dead[ADM_BATCH];
		uint32_t nlink[ADM_BATCH];
		struct orch_attr attr[ADM_BATCH];
		size_t nask = 0, ndead = 0;

		if (orch_store_handles(st, &after, ADM_BATCH, adm_handle_cb, &hs, &eof))
			return owners;
		for (size_t i = 0; i < hs.n; i++) {
			unsigned int s = orch_handle_server(hs.h[i]);
			uint64_t bit = s < 64 ? 1ull << s : 0;

			/* A handle of no server (refused at decode since) has no inode. */
			if (s >= a->a_sv->s_cfg.nservers || (owners & bit && !(left & bit)))
				ask[nask++] = hs.h[i];
		}
		adm_inode_attrs(a, ask, nask, nlink, attr);
		for (size_t i = 0; i < nask; i++) {
			unsigned int s = orch_handle_server(ask[i]);

			if (nlink[i] == 0)
				dead[ndead++] = ask[i];
			else if (nlink[i] == UINT32_MAX && s < 64)
				left |= 1ull << s;
			else if (adm_past_size(a, ask[i], &attr[i], NULL) &&
				 !adm_past_cut(a, ask[i], 0) && s < 64)
				left |= 1ull << s;   /* no room to ask again: sweep again */
		}
		if (ndead && !orch_store_delete_many(st, dead, ndead))
			reclaimed += ndead;
	}
	if (reclaimed) {
		atomic_fetch_add(&a->a_reclaimed, reclaimed);
		ORCH_NOTICE("reclaimed %" PRIu64 " data objects whose inode is gone", reclaimed);
		orch_ev_post(a->a_sv->s_ev, adm_dirty, a->a_sv);
	}
	return atomic_load(&a->a_cancel) ? 0 : left;
}

/* A peer's answer to SV2SV_RECLAIM (loop thread): one that failed is asked again. */
static void adm_told(struct sv_server *sv, void *arg, int error, const struct orch_msg *rep)
{
	struct sv_admin *a = sv->s_admin;
	unsigned int peer = (unsigned int)(uintptr_t)arg;

	if (!error)
		error = rep->status;
	if (!error)
		return;
	ORCH_LOG_RATELIMIT(ORCH_LOG_INFO, "cannot ask %s to reclaim: %s",
			   sv->s_cfg.servers[peer].name, strerror(-error));
	pthread_mutex_lock(&a->a_lock);
	a->a_tell |= 1ull << peer;
	a->a_retry_ms = orch_time_now_ms() + ADM_RECLAIM_RETRY_MS;
	pthread_cond_signal(&a->a_cv);
	pthread_mutex_unlock(&a->a_lock);
}

/*
 * Sends SV2SV_RECLAIM to the peers in a_telling (loop thread): on the
 * peer connections, which carry this server's index (the admin thread's
 * client connections are a client's).
 */
static void adm_tell_loop(void *arg)
{
	struct sv_admin *a = arg;
	struct sv_server *sv = a->a_sv;
	uint64_t peers;

	pthread_mutex_lock(&a->a_lock);
	peers = a->a_telling;
	a->a_telling = 0;
	pthread_mutex_unlock(&a->a_lock);
	for (unsigned int s = 0; s < sv->s_cfg.nservers && s < 64; s++) {
		struct orch_msg m;

		if (!(peers & 1ull << s))
			continue;
		orch_msg_init(&m, ORCH_SV2SV_RECLAIM);
		m.origin = sv->s_index;
		sv_peer_call(sv, s, &m, adm_told, (void *)(uintptr_t)s);
	}
}

/* Has the loop tell @peers to sweep our objects; failures come back to a_tell. */
static void adm_tell(struct sv_admin *a, uint64_t peers)
{
	pthread_mutex_lock(&a->a_lock);
	a->a_telling |= peers;
	pthread_mutex_unlock(&a->a_lock);
	orch_ev_post(a->a_sv->s_ev, adm_tell_loop, a);
}

/*
 * Sweeps this server's objects of files whose inode @owner held, deleting
 * those whose inode it no longer has (in the background).
 */
static void sv_admin_reclaim(struct sv_server *sv, unsigned int owner)
{
	struct sv_admin *a = sv->s_admin;

	/*
	 * In a group of several the store changes only through the leader's
	 * data stream (sv_mirror.h), which this thread's deletes would miss.
	 */
	if (!a || owner >= 64 || !sv->s_cfg.reclaim_orphans || sv_mirror_in_group(sv))
		return;
	pthread_mutex_lock(&a->a_lock);
	a->a_sweep |= 1ull << owner;
	a->a_retry_ms = 0;
	pthread_cond_signal(&a->a_cv);
	pthread_mutex_unlock(&a->a_lock);
}

int sv_admin_reclaim_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	/* Only for the peer itself: it is the one that knows it restarted. */
	if (m->origin != r->r_conn->c_origin) {
		sv_reply_status(r, -EINVAL);
		return 0;
	}
	sv_admin_reclaim(sv, m->origin);
	sv_reply_status(r, 0); /* the sweep runs later; nothing to make durable */
	return 0;
}

uint64_t sv_admin_reclaimed(const struct sv_server *sv)
{
	return sv->s_admin ? atomic_load(&sv->s_admin->a_reclaimed) : 0;
}

uint64_t sv_admin_cut(const struct sv_server *sv)
{
	return sv->s_admin ? atomic_load(&sv->s_admin->a_cut) : 0;
}

/* --- The thread --------------------------------------------------------------------- */

/* Waits on a_cv (a_lock held) until signalled, or until @at_ms if not 0. */
static void adm_wait(struct sv_admin *a, uint64_t at_ms)
{
	struct timespec ts;

	if (!at_ms) {
		pthread_cond_wait(&a->a_cv, &a->a_lock);
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)((at_ms - ORCH_MIN(at_ms, orch_time_now_ms())) / 1000 + 1);
	pthread_cond_timedwait(&a->a_cv, &a->a_lock, &ts);
}

static void *adm_main(void *arg)
{
	struct sv_admin *a = arg;

	pthread_mutex_lock(&a->a_lock);
	while (!a->a_stop) {
		struct adm_job *j = a->a_job;
		uint64_t bad[ADM_BAD_QUEUE_MAX];
		size_t nbad = a->a_nbad;
		uint64_t now = orch_time_now_ms();
		bool due = (a->a_sweep || a->a_tell) && now >= a->a_retry_ms;
		bool past = a->a_npast && now >= a->a_past_ms;
		uint64_t sweep = due ? a->a_sweep : 0, tell = due ? a->a_tell : 0;

		if (!j && !nbad && !due && !past) {
			uint64_t at = a->a_sweep || a->a_tell ? a->a_retry_ms : 0;

			if (a->a_npast && (!at || a->a_past_ms < at))
				at = a->a_past_ms;
			adm_wait(a, at);
			continue;
		}
		memcpy(bad, a->a_bad, nbad * sizeof(bad[0]));
		a->a_nbad = 0;
		a->a_job = NULL;
		a->a_sweep &= ~sweep;
		a->a_tell &= ~tell;
		pthread_mutex_unlock(&a->a_lock);
		/* Each may wait on peers: a stopping server drops the rest. */
		for (size_t i = 0; i < nbad && !atomic_load(&a->a_cancel); i++)
			adm_log_bad(a, bad[i]);
		if (j)
			adm_scrub(a, j);
		if (tell)
			adm_tell(a, tell);
		tell = 0;
		if (past)
			adm_past_retry(a);
		if (sweep)
			sweep = adm_sweep(a, sweep);
		pthread_mutex_lock(&a->a_lock);
		if (sweep || tell) {
			a->a_sweep |= sweep;
			a->a_tell |= tell;
			a->a_retry_ms = orch_time_now_ms() + ADM_RECLAIM_RETRY_MS;
		}
	}
	pthread_mutex_unlock(&a->a_lock);
	return NULL;
}

int sv_admin_start(struct sv_server *sv)
{
	struct sv_admin *a = calloc(1, sizeof(*a));
	pthread_condattr_t ca;
	int error;

	if (!a)
		return -ENOMEM;
	a->a_sv = sv;
	pthread_mutex_init(&a->a_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&a->a_cv, &ca);
	pthread_condattr_destroy(&ca);
	/* Objects of files lost in a power cut, here or on a peer, go (see top). */
	for (unsigned int s = 0; sv->s_cfg.reclaim_orphans && !sv_mirror_in_group(sv) &&
	     s < sv->s_cfg.nservers && s < 64; s++) {
		a->a_sweep |= 1ull << s;
		if (s != sv->s_index)
			a->a_tell |= 1ull << s;
	}
	error = orch_client_create(&sv->s_cfg, &a->a_cl);
	if (error)
		goto out_free;
	orch_client_set_timeout(a->a_cl, ORCH_MIN(sv->s_cfg.op_timeout_ms,
						  (uint32_t)ADM_CLIENT_TIMEOUT_MS));
	error = orch_path_cache_create(a->a_cl, &a->a_paths);
	if (error)
		goto out_client;
	sv->s_admin = a;
	error = -pthread_create(&a->a_thread, NULL, adm_main, a);
	if (error)
		goto out_paths;
	pthread_mutex_lock(&a->a_lock);
	a->a_started = true;
	pthread_mutex_unlock(&a->a_lock);
	orch_store_set_bad_hook(sv->s_store, adm_bad_hook, a);
	return 0;
out_paths:
	sv->s_admin = NULL;
	orch_path_cache_destroy(a->a_paths);
out_client:
	orch_client_destroy(a->a_cl);
out_free:
	pthread_mutex_destroy(&a->a_lock);
	pthread_cond_destroy(&a->a_cv);
	free(a);
	return error;
}

void sv_admin_stop(struct sv_server *sv)
{
	struct sv_admin *a = sv->s_admin;
	struct adm_job *j;

	if (!a)
		return;
	pthread_mutex_lock(&a->a_lock);
	if (!a->a_started) {
		pthread_mutex_unlock(&a->a_lock);
		return;
	}
	a->a_stop = true;
	atomic_store(&a->a_cancel, true);
	pthread_cond_signal(&a->a_cv);
	pthread_mutex_unlock(&a->a_lock);
	pthread_join(a->a_thread, NULL);
	pthread_mutex_lock(&a->a_lock);
	a->a_started = false;
	j = a->a_job;
	a->a_job = NULL;
	pthread_mutex_unlock(&a->a_lock);
	if (j) {
		sv_reply_status(j->j_req, -ESHUTDOWN);
		adm_job_free(j);
	}
	orch_path_cache_destroy(a->a_paths);
	orch_client_destroy(a->a_cl);
	a->a_paths = NULL;
	a->a_cl = NULL;
}

void sv_admin_fini(struct sv_server *sv)
{
	struct sv_admin *a = sv->s_admin;

	if (!a)
		return;
	pthread_mutex_destroy(&a->a_lock);
	pthread_cond_destroy(&a->a_cv);
	free(a);
	sv->s_admin = NULL;
}

/* --- SCRUB (loop thread) --------------------------------------------------------- */

int sv_admin_scrub(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct sv_admin *a = sv->s_admin;
	struct adm_job *j;

	if (!a || !a->a_started || a->a_busy) {
		sv_reply_status(r, a && a->a_started ? -EBUSY : -ENOSYS);
		return 0;
	}
	j = calloc(1, sizeof(*j));
	if (j) {
		j->j_f = calloc(ADM_FINDINGS_MAX, sizeof(*j->j_f));
		j->j_bad = calloc(ADM_FINDINGS_MAX, sizeof(*j->j_bad));
	}
	if (!j || !j->j_f || !j->j_bad) {
		adm_job_free(j);
		sv_reply_status(r, -ENOMEM);
		return 0;
	}
	orch_buf_init(&j->j_out, ORCH_JSON_MAX);
	j->j_sv = sv;
	j->j_req = r;
	j->j_data = m->scrub_flags & ORCH_SCRUB_F_DATA;
	j->j_json = m->scrub_flags & ORCH_SCRUB_F_JSON;
	j->j_reclaim = m->scrub_flags & ORCH_SCRUB_F_RECLAIM;
	j->j_rate = (uint64_t)m->length << 20;
	a->a_busy = true;
	pthread_mutex_lock(&a->a_lock);
	a->a_job = j;
	pthread_cond_signal(&a->a_cv);
	pthread_mutex_unlock(&a->a_lock);
	return 0;
}
