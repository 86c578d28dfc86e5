/*
 * The inode table: handle -> lookup count and last attributes (see
 * mount_i.h).  A chained hash table under one mutex; every operation is a
 * short critical section with no I/O, so one lock serves all FUSE threads.
 */
#include "mount/mount_i.h"

#include "common/time.h"

#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/util.h"

#define ITAB_MIN_BUCKETS 1024u

/*
 * Handles are a server index in the top bits and a counter below, so the
 * low bits are already well spread; the multiply mixes in the server.
 */
static size_t itab_hash(const struct orch_mnt_itab *t, uint64_t h)
{
	return (size_t)((h * 0x9e3779b97f4a7c15ULL) >> 32) & (t->t_nbuckets - 1);
}

static struct orch_mnt_inode *itab_find(const struct orch_mnt_itab *t, uint64_t h)
{
	struct orch_mnt_inode *in = t->t_buckets[itab_hash(t, h)];

	while (in && in->i_attr.handle != h)
		in = in->i_next;
	return in;
}

/*
 * Doubles the bucket array.  A failed allocation leaves the table as it was:
 * longer chains, still correct.
 */
static void itab_grow(struct orch_mnt_itab *t)
{
	size_t n = t->t_nbuckets * 2;
	struct orch_mnt_inode **nb, **old = t->t_buckets;
	size_t oldn = t->t_nbuckets;

	nb = calloc(n, sizeof(*nb));
	if (!nb)
		return;
	t->t_buckets = nb;
	t->t_nbuckets = n;
	for (size_t i = 0; i < oldn; i++) {
		struct orch_mnt_inode *in = old[i], *next;

		for (; in; in = next) {
			size_t b = itab_hash(t, in->i_attr.handle);

			next = in->i_next;
			in->i_next = nb[b];
			nb[b] = in;
		}
	}
	free(old);
}

/* The attributes to report: the last ones with the pending write's size and mtime. */
static void itab_report(const struct orch_mnt_inode *in, struct orch_attr *rep)
{
	*rep = in->i_attr;
	rep->size = ORCH_MAX(in->i_attr.size, in->i_wend);
	if (in->i_wmtime_ns) {
		rep->mtime_ns = in->i_wmtime_ns;
		rep->ctime_ns = ORCH_MAX(rep->ctime_ns, in->i_wmtime_ns);
	}
}

int orch_mnt_itab_init(struct orch_mnt_itab *t)
{
	struct orch_mnt_inode *root;

	memset(t, 0, sizeof(*t));
	t->t_nbuckets = ITAB_MIN_BUCKETS;
	t->t_buckets = calloc(t->t_nbuckets, sizeof(*t->t_buckets));
	root = calloc(1, sizeof(*root));
	if (!t->t_buckets || !root) {
		free(t->t_buckets);
		free(root);
		return -ENOMEM;
	}
	pthread_mutex_init(&t->t_lock, NULL);
	pthread_cond_init(&t->t_wreg_cv, NULL);
	root->i_attr.handle = ORCH_ROOT_HANDLE;
	root->i_attr.mode = S_IFDIR | 0755;
	root->i_attr.parent = ORCH_ROOT_HANDLE;
	root->i_nlookup = 1;
	root->i_pinned = true;
	t->t_buckets[itab_hash(t, ORCH_ROOT_HANDLE)] = root;
	t->t_count = 1;
	return 0;
}

void orch_mnt_itab_fini(struct orch_mnt_itab *t)
{
	if (!t->t_buckets)
		return;
	for (size_t i = 0; i < t->t_nbuckets; i++) {
		struct orch_mnt_inode *in = t->t_buckets[i], *next;

		for (; in; in = next) {
			next = in->i_next;
			free(in);
		}
	}
	free(t->t_buckets);
	t->t_buckets = NULL;
	pthread_mutex_destroy(&t->t_lock);
	pthread_cond_destroy(&t->t_wreg_cv);
}

void orch_mnt_itab_counts(struct orch_mnt_itab *t, uint64_t *inodes, uint64_t *unknown)
{
	pthread_mutex_lock(&t->t_lock);
	*inodes = t->t_count;
	*unknown = t->t_forget_unknown;
	pthread_mutex_unlock(&t->t_lock);
}

/*
 * New attributes for @in, asked for at @asked.  Attributes that say the
 * inode has no xattr at all make every well-known name absent as of now
 * (for getattr_timeout_ms, like the attributes themselves): `ls -l` then
 * costs no GETXATTR; unless this mount changed its xattrs since @asked.
 */
static void itab_set_attr(struct orch_mnt_inode *in, const struct orch_attr *a, uint64_t asked)
{
	in->i_attr = *a;
	if ((a->flags & ORCH_ATTR_NOXATTR) && in->i_xchanged <= asked) {
		uint32_t now = orch_time_now_ms32();

		in->i_xabsent = (uint8_t)((1u << ORCH_MNT_XWELLKNOWN) - 1);
		for (int i = 0; i < ORCH_MNT_XWELLKNOWN; i++)
			in->i_xabsent_at[i] = now;
	}
}

uint64_t orch_mnt_inode_asked(struct orch_mnt_itab *t)
{
	/* A change counted after this load is one i_changed > the value loaded. */
	return atomic_load(&t->t_changes);
}

/* An answer to a question asked at @asked: newer than what @in has? */
static void itab_answer(struct orch_mnt_inode *in, const struct orch_attr *a, uint64_t asked)
{
	if (in->i_changed <= asked)
		itab_set_attr(in, a, asked);
}

/* This mount's own change of @in, answered with @a. */
static void itab_changed(struct orch_mnt_itab *t, struct orch_mnt_inode *in,
			 const struct orch_attr *a)
{
	itab_set_attr(in, a, UINT64_MAX);
	in->i_changed = atomic_fetch_add(&t->t_changes, 1) + 1;
}

int orch_mnt_inode_get(struct orch_mnt_itab *t, const struct orch_attr *a, uint64_t asked,
		       struct orch_attr *rep, bool *known)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, a->handle);
	if (known)
		*known = in && in->i_nlookup > 0;
	if (!in) {
		in = calloc(1, sizeof(*in));
		if (!in) {
			pthread_mutex_unlock(&t->t_lock);
			return -ENOMEM;
		}
		if (t->t_count >= t->t_nbuckets * 2)
			itab_grow(t);
		in->i_attr.handle = a->handle;
		in->i_unsynced = ORCH_FS_SYNC_ALL;
		in->i_next = t->t_buckets[itab_hash(t, a->handle)];
		t->t_buckets[itab_hash(t, a->handle)] = in;
		t->t_count++;
	}
	in->i_nlookup++;
	itab_answer(in, a, asked);
	itab_report(in, rep);
	pthread_mutex_unlock(&t->t_lock);
	return 0;
}

/* The t_open list and its counts by server: @in's first open, its last close. */
static uint32_t *itab_open_srv(struct orch_mnt_itab *t, const struct orch_mnt_inode *in)
{
	unsigned int s = orch_handle_server(in->i_attr.handle);

	return s < ORCH_SERVERS_MAX ? &t->t_open_srv[s] : NULL;
}

static void itab_open_link(struct orch_mnt_itab *t, struct orch_mnt_inode *in)
{
	uint32_t *srv = itab_open_srv(t, in);

	in->i_oprev = NULL;
	in->i_onext = t->t_open;
	if (t->t_open)
		t->t_open->i_oprev = in;
	t->t_open = in;
	t->t_nopen++;
	if (srv)
		(*srv)++;
}

static void itab_open_unlink(struct orch_mnt_itab *t, struct orch_mnt_inode *in)
{
	uint32_t *srv = itab_open_srv(t, in);

	if (in->i_oprev)
		in->i_oprev->i_onext = in->i_onext;
	else
		t->t_open = in->i_onext;
	if (in->i_onext)
		in->i_onext->i_oprev = in->i_oprev;
	in->i_onext = in->i_oprev = NULL;
	t->t_nopen--;
	if (srv)
		(*srv)--;
}

void orch_mnt_inode_forget(struct orch_mnt_itab *t, uint64_t h, uint64_t n)
{
	struct orch_mnt_inode **pp, *in;

	pthread_mutex_lock(&t->t_lock);
	pp = &t->t_buckets[itab_hash(t, h)];
	while (*pp && (*pp)->i_attr.handle != h)
		pp = &(*pp)->i_next;
	in = *pp;
	if (!in) {
		t->t_forget_unknown++;
		pthread_mutex_unlock(&t->t_lock);
		return;
	}
	/* The kernel never forgets more than it looked up; clamp if it did. */
	ORCH_ASSERT(in->i_nlookup >= n || in->i_pinned);
	in->i_nlookup = in->i_nlookup > n ? in->i_nlookup - n : 0;
	if (in->i_nlookup == 0 && !in->i_pinned) {
		/* The kernel holds an open file's inode: a FORGET gone wrong. */
		if (in->i_opens)
			itab_open_unlink(t, in);
		*pp = in->i_next;
		t->t_count--;
		free(in);
	}
	pthread_mutex_unlock(&t->t_lock);
}

void orch_mnt_inode_update(struct orch_mnt_itab *t, const struct orch_attr *a, uint64_t asked,
			   struct orch_attr *rep)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, a->handle);
	if (in) {
		itab_answer(in, a, asked);
		itab_report(in, rep);
	} else {
		*rep = *a;
	}
	pthread_mutex_unlock(&t->t_lock);
}

bool orch_mnt_inode_blocks(struct orch_mnt_itab *t, const struct orch_attr *rep,
			   uint64_t *blocks)
{
	struct orch_mnt_inode *in;
	bool known = false;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, rep->handle);
	if (in && in->i_blk_valid && in->i_blk_size == rep->size &&
	    in->i_blk_mtime_ns == rep->mtime_ns && in->i_blk_ctime_ns == rep->ctime_ns) {
		*blocks = in->i_blk;
		known = true;
	}
	pthread_mutex_unlock(&t->t_lock);
	return known;
}

void orch_mnt_inode_blocks_set(struct orch_mnt_itab *t, const struct orch_attr *rep,
			       uint64_t blocks)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, rep->handle);
	if (in) {
		in->i_blk_valid = true;
		in->i_blk = blocks;
		in->i_blk_size = rep->size;
		in->i_blk_mtime_ns = rep->mtime_ns;
		in->i_blk_ctime_ns = rep->ctime_ns;
	}
	pthread_mutex_unlock(&t->t_lock);
}

void orch_mnt_inode_blocks_forget(struct orch_mnt_itab *t, uint64_t h)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in)
		in->i_blk_valid = false;
	pthread_mutex_unlock(&t->t_lock);
}

int orch_mnt_inode_attr(struct orch_mnt_itab *t, uint64_t h, struct orch_attr *out)
{
	struct orch_mnt_inode *in;
	int error = -ENOENT;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in) {
		itab_report(in, out);
		error = 0;
	}
	pthread_mutex_unlock(&t->t_lock);
	return error;
}

void orch_mnt_inode_written(struct orch_mnt_itab *t, uint64_t h, uint64_t end,
			    int64_t mtime_ns, uint64_t servers)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in) {
		in->i_fresh = false;
		in->i_unsynced |= servers;
		if (end > in->i_wend)
			in->i_wend = end;
		if (mtime_ns > in->i_wmtime_ns)
			in->i_wmtime_ns = mtime_ns;
	}
	pthread_mutex_unlock(&t->t_lock);
}

uint64_t orch_mnt_inode_sync_take(struct orch_mnt_itab *t, uint64_t h)
{
	struct orch_mnt_inode *in;
	uint64_t servers = ORCH_FS_SYNC_ALL;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in) {
		servers = in->i_unsynced;
		in->i_unsynced = 0;
	}
	pthread_mutex_unlock(&t->t_lock);
	return servers;
}

void orch_mnt_inode_sync_owe(struct orch_mnt_itab *t, uint64_t h, uint64_t servers)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in)
		in->i_unsynced |= servers;
	pthread_mutex_unlock(&t->t_lock);
}

uint64_t orch_mnt_inode_wend(struct orch_mnt_itab *t, uint64_t h, int64_t *mtime_ns)
{
	struct orch_mnt_inode *in;
	uint64_t end = 0;

	*mtime_ns = 0;
	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in) {
		end = in->i_wend;
		*mtime_ns = in->i_wmtime_ns;
	}
	pthread_mutex_unlock(&t->t_lock);
	return end;
}

void orch_mnt_inode_extended(struct orch_mnt_itab *t, uint64_t covered,
			     int64_t covered_mtime, const struct orch_attr *a,
			     struct orch_attr *rep)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, a->handle);
	if (in) {
		itab_changed(t, in, a);
		/* A write that ended past @covered meanwhile still needs its EXTEND. */
		if (in->i_wend <= covered || in->i_wend <= a->size)
			in->i_wend = 0;
		/* ... and so does one made after @covered_mtime. */
		if (in->i_wmtime_ns <= covered_mtime)
			in->i_wmtime_ns = 0;
		itab_report(in, rep);
	} else {
		*rep = *a;
	}
	pthread_mutex_unlock(&t->t_lock);
}

void orch_mnt_inode_setattr_done(struct orch_mnt_itab *t, const struct orch_attr *a,
				 bool size_set, bool mtime_set, struct orch_attr *rep)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, a->handle);
	if (in) {
		itab_changed(t, in, a);
		if (size_set) {
			in->i_wend = 0;
			in->i_unsynced = ORCH_FS_SYNC_ALL; /* the cut reached every server */
		}
		if (size_set || mtime_set)
			in->i_wmtime_ns = 0;
		itab_report(in, rep);
	} else {
		*rep = *a;
	}
	pthread_mutex_unlock(&t->t_lock);
}

bool orch_mnt_inode_cto_open(struct orch_mnt_itab *t, const struct orch_attr *a, bool may_keep,
			     bool *dropping)
{
	struct orch_mnt_inode *in;
	bool keep = false;

	*dropping = false;
	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, a->handle);
	if (in) {
		keep = may_keep && in->i_cto_valid && !in->i_cto_dropping &&
		       in->i_cto_size == a->size && in->i_cto_mtime_ns == a->mtime_ns;
		if (!keep) {
			in->i_cto_dropping++;
			*dropping = true;
		}
		in->i_cto_valid = true;
		in->i_cto_size = a->size;
		in->i_cto_mtime_ns = a->mtime_ns;
	}
	pthread_mutex_unlock(&t->t_lock);
	return keep;
}

void orch_mnt_inode_cto_dropped(struct orch_mnt_itab *t, uint64_t h)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in && in->i_cto_dropping)
		in->i_cto_dropping--;
	pthread_mutex_unlock(&t->t_lock);
}

void orch_mnt_inode_list_set(struct orch_mnt_itab *t, uint64_t h, uint64_t until_ms)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in)
		in->i_list_until = until_ms;
	pthread_mutex_unlock(&t->t_lock);
}

bool orch_mnt_inode_list_covered(struct orch_mnt_itab *t, uint64_t h, uint64_t now_ms)
{
	struct orch_mnt_inode *in;
	bool covered;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	covered = in && now_ms < in->i_list_until;
	pthread_mutex_unlock(&t->t_lock);
	return covered;
}

void orch_mnt_inode_cto_set(struct orch_mnt_itab *t, const struct orch_attr *a)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, a->handle);
	if (in) {
		in->i_cto_valid = true;
		in->i_cto_size = a->size;
		in->i_cto_mtime_ns = a->mtime_ns;
	}
	pthread_mutex_unlock(&t->t_lock);
}

/* --- Open files and removed names --------------------------------------------- */

void orch_mnt_inode_set_fresh(struct orch_mnt_itab *t, uint64_t h, bool fresh)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in)
		in->i_fresh = fresh;
	pthread_mutex_unlock(&t->t_lock);
}

bool orch_mnt_inode_take_fresh(struct orch_mnt_itab *t, uint64_t h)
{
	struct orch_mnt_inode *in;
	bool fresh = false;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in) {
		fresh = in->i_fresh;
		in->i_fresh = false;
	}
	pthread_mutex_unlock(&t->t_lock);
	return fresh;
}

void orch_mnt_inode_opened(struct orch_mnt_itab *t, uint64_t h, uint64_t oreg_gen)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in) {
		/* A new file's CREATE registered it: before anyone can close it. */
		if (oreg_gen && !in->i_opens && !in->i_oreg_busy) {
			in->i_oreg_gen = oreg_gen;
			in->i_oreg_none = false;
		}
		if (!in->i_opens++)
			itab_open_link(t, in);
	}
	pthread_mutex_unlock(&t->t_lock);
}

bool orch_mnt_inode_released(struct orch_mnt_itab *t, uint64_t h, uint64_t *gen)
{
	struct orch_mnt_inode *in;
	bool last = false;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in && in->i_opens && --in->i_opens == 0) {
		itab_open_unlink(t, in);
		if (in->i_oreg_gen && !in->i_oreg_none) {
			*gen = in->i_oreg_gen;
			last = true;
		}
		in->i_oreg_gen = 0;
		in->i_oreg_none = false;
	}
	pthread_mutex_unlock(&t->t_lock);
	return last;
}

/* t_lock held: may a thread register @in on generation @cur now? */
static bool itab_oreg_stale(const struct orch_mnt_inode *in, uint64_t cur)
{
	return in->i_opens && !in->i_oreg_busy && (!cur || in->i_oreg_gen != cur);
}

bool orch_mnt_inode_oreg_claim(struct orch_mnt_itab *t, uint64_t h, uint64_t cur)
{
	struct orch_mnt_inode *in;
	bool claim = false;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in && itab_oreg_stale(in, cur)) {
		in->i_oreg_busy = true;
		claim = true;
	}
	pthread_mutex_unlock(&t->t_lock);
	return claim;
}

static int itab_handle_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

size_t orch_mnt_inode_oreg_claim_stale(struct orch_mnt_itab *t, const uint64_t *gens,
				       unsigned int nservers, uint64_t **out)
{
	uint64_t *hs;
	size_t cap, n = 0;

	*out = NULL;
	pthread_mutex_lock(&t->t_lock);
	cap = t->t_nopen;
	pthread_mutex_unlock(&t->t_lock);
	/* Files opened meanwhile registered at their open; the next pass sees the rest. */
	hs = cap ? malloc(cap * sizeof(*hs)) : NULL;
	if (!hs)
		return 0;
	pthread_mutex_lock(&t->t_lock);
	for (struct orch_mnt_inode *in = t->t_open; in && n < cap; in = in->i_onext) {
		unsigned int s = orch_handle_server(in->i_attr.handle);

		if (s < nservers && itab_oreg_stale(in, gens[s])) {
			in->i_oreg_busy = true;
			hs[n++] = in->i_attr.handle;
		}
	}
	pthread_mutex_unlock(&t->t_lock);
	if (!n) {
		free(hs);
		return 0;
	}
	qsort(hs, n, sizeof(*hs), itab_handle_cmp);
	*out = hs;
	return n;
}

void orch_mnt_inode_oreg_unclaim(struct orch_mnt_itab *t, uint64_t h)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in)
		in->i_oreg_busy = false;
	pthread_mutex_unlock(&t->t_lock);
}

bool orch_mnt_inode_oreg_set(struct orch_mnt_itab *t, uint64_t h, uint64_t gen, bool none)
{
	struct orch_mnt_inode *in;
	bool undo = true;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in) {
		in->i_oreg_busy = false;
		if (in->i_opens) {
			/* Registered there already: the server counted this OPEN twice. */
			undo = gen && !none && in->i_oreg_gen == gen && !in->i_oreg_none;
			in->i_oreg_gen = gen;
			in->i_oreg_none = none;
		}
	}
	pthread_mutex_unlock(&t->t_lock);
	return undo;
}

bool orch_mnt_inode_open_servers(struct orch_mnt_itab *t, bool *want, unsigned int n)
{
	bool any = false;

	pthread_mutex_lock(&t->t_lock);
	for (unsigned int s = 0; s < n; s++) {
		want[s] = s < ORCH_SERVERS_MAX && t->t_open_srv[s];
		any |= want[s];
	}
	pthread_mutex_unlock(&t->t_lock);
	return any;
}

int orch_mnt_inode_list_server(struct orch_mnt_itab *t, unsigned int server,
			       struct orch_mnt_inode_ref **out, size_t *n)
{
	struct orch_mnt_inode_ref *hs;
	size_t k = 0;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&t->t_lock);
	hs = malloc((t->t_count ? t->t_count : 1) * sizeof(*hs));
	if (!hs) {
		pthread_mutex_unlock(&t->t_lock);
		return -ENOMEM;
	}
	for (size_t b = 0; b < t->t_nbuckets; b++)
		for (struct orch_mnt_inode *in = t->t_buckets[b]; in; in = in->i_next)
			if (orch_handle_server(in->i_attr.handle) == server)
				hs[k++] = (struct orch_mnt_inode_ref){
					.handle = in->i_attr.handle,
					.dir = S_ISDIR(in->i_attr.mode),
				};
	pthread_mutex_unlock(&t->t_lock);
	*out = hs;
	*n = k;
	return 0;
}

void orch_mnt_inode_unpublished_drop(struct orch_mnt_itab *t, uint64_t h)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in && !in->i_opens) {
		in->i_wend = 0;
		in->i_wmtime_ns = 0;
	}
	pthread_mutex_unlock(&t->t_lock);
}

/* t_lock held: waits until nobody registers or releases @h; NULL if it is gone. */
static struct orch_mnt_inode *itab_wreg_wait(struct orch_mnt_itab *t, uint64_t h)
{
	struct orch_mnt_inode *in;

	while ((in = itab_find(t, h)) && in->i_wreg_busy)
		pthread_cond_wait(&t->t_wreg_cv, &t->t_lock);
	return in;
}

bool orch_mnt_inode_wreg_check(struct orch_mnt_itab *t, uint64_t h, uint64_t cur)
{
	struct orch_mnt_inode *in;
	bool done = true;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	/* The fast path of every write: registered on the connection that is up. */
	if (in && (in->i_wreg_busy || !cur || in->i_wreg_gen != cur)) {
		in = itab_wreg_wait(t, h);
		if (in && (!cur || in->i_wreg_gen != cur)) {
			in->i_wreg_busy = true;
			done = false;
		}
	}
	pthread_mutex_unlock(&t->t_lock);
	return done;
}

void orch_mnt_inode_wreg_set(struct orch_mnt_itab *t, uint64_t h, uint64_t gen)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in) {
		in->i_wreg_gen = gen;
		in->i_wreg_busy = false;
	}
	pthread_cond_broadcast(&t->t_wreg_cv);
	pthread_mutex_unlock(&t->t_lock);
}

void orch_mnt_inode_wreg_created(struct orch_mnt_itab *t, uint64_t h, uint64_t gen)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in && !in->i_wreg_busy && !in->i_wreg_gen)
		in->i_wreg_gen = gen;
	pthread_mutex_unlock(&t->t_lock);
}

bool orch_mnt_inode_wreg_take_last(struct orch_mnt_itab *t, uint64_t h, bool clean,
				   uint64_t *gen)
{
	struct orch_mnt_inode *in;
	bool take = false;

	pthread_mutex_lock(&t->t_lock);
	in = itab_wreg_wait(t, h);
	if (in && in->i_wreg_gen && in->i_opens == 1 && (!clean || !in->i_wend)) {
		*gen = in->i_wreg_gen;
		in->i_wreg_gen = 0;
		in->i_wreg_busy = true;
		take = true;
	}
	pthread_mutex_unlock(&t->t_lock);
	return take;
}

/* --- Absent well-known xattrs ---------------------------------------------------- */

static const char *const itab_xwellknown[ORCH_MNT_XWELLKNOWN] = {
	ORCH_XATTR_CAPS,
	"security.selinux",
	"system.posix_acl_access",
	"system.posix_acl_default",
};

int orch_mnt_xattr_wellknown(const char *name)
{
	for (int i = 0; i < ORCH_MNT_XWELLKNOWN; i++)
		if (strcmp(name, itab_xwellknown[i]) == 0)
			return i;
	return -1;
}

bool orch_mnt_inode_xattr_is_absent(struct orch_mnt_itab *t, uint64_t h, int idx,
				    uint32_t ttl_ms)
{
	struct orch_mnt_inode *in;
	bool absent = false;

	if (idx < 0 || !ttl_ms)
		return false;
	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in && (in->i_xabsent & (1u << idx)))
		absent = orch_time_before32(orch_time_now_ms32(), in->i_xabsent_at[idx] + ttl_ms);
	pthread_mutex_unlock(&t->t_lock);
	return absent;
}

void orch_mnt_inode_xattr_set_absent(struct orch_mnt_itab *t, uint64_t h, int idx,
				     uint64_t asked)
{
	struct orch_mnt_inode *in;

	if (idx < 0)
		return;
	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in && in->i_xchanged <= asked) {
		in->i_xabsent |= (uint8_t)(1u << idx);
		in->i_xabsent_at[idx] = orch_time_now_ms32();
	}
	pthread_mutex_unlock(&t->t_lock);
}

void orch_mnt_inode_xattr_forget(struct orch_mnt_itab *t, uint64_t h)
{
	struct orch_mnt_inode *in;

	pthread_mutex_lock(&t->t_lock);
	in = itab_find(t, h);
	if (in) {
		in->i_xabsent = 0;
		in->i_xchanged = atomic_fetch_add(&t->t_changes, 1) + 1;
	}
	pthread_mutex_unlock(&t->t_lock);
}
