/*
 * The mount's lease cache: names and attributes the servers leased to this
 * mount (docs/DESIGN.md, "Leases and invalidations"), so that a LOOKUP or
 * GETATTR the kernel sends once its own timeouts ran out is answered here,
 * without a round trip, while nothing changed.
 *
 * Correctness rests on the order of one server's stream.  liborchard
 * stamps every frame it reads from a server, replies and pushes alike, in
 * stream order (rpc.h).  A push invalidates the keys it names at its
 * stamp; a reply may fill a key only if no push for that key came after it
 * (the key's stamp is lower).  A push for a key we do not hold leaves a
 * tombstone with its stamp.  Dropping tombstones (the cache is full) raises
 * the server's rejection floor: any reply read before may have missed a
 * push.  A connection that came up or went down drops everything of its
 * server, and so does a push we have no memory to record.  Every entry also ends
 * lease_ms after its request was sent, before the server's lease does.
 *
 * Keys are the attributes of a handle, a name in a directory (present
 * with its handle, or absent), and a directory known complete: listed
 * whole under its lease, so that a name we hold nothing about is absent
 * (a create or a rename's target then costs no lookup).  A push makes a
 * tombstone, never just a gap, so a complete directory stays right.
 *
 * Permissions: without default_permissions the server checks the caller's
 * search permission in a lookup.  A name is served only to the credentials
 * it was looked up with (credkey), and, unless those pass every check
 * (root, or default_permissions: credkey LC_CRED_FREE), only while the
 * directory's attributes have not changed since.  Completeness answers
 * only LC_CRED_FREE callers.
 *
 * Renewal (refresh ahead): a hit on a key in the last part of its term
 * (lc_renew_margin_ms) lets the caller queue a renewal of it, the request a
 * miss would make, which a few threads of this file send through a
 * callback (the mount's: mnt_lc_renew in ops.c).  Its reply fills through
 * lc_put like any other, so a push after it still wins.  A key is queued
 * at most once per term (e_renewing, cleared by the next fill); a full
 * queue drops the renewal and leaves the key unmarked, for its next hit.
 *
 * The pushes come on liborchard's reader threads with its connection lock
 * held: lc_lock is a leaf, and nothing calls liborchard holding it (the
 * renewal threads wait on l_renew_cv under it, and call out without it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/time.h"
#include "mount/mount_i.h"

#define LC_MAX (1u << 18)       /* entries; at the cap everything is dropped */
#define LC_BUCKETS (1u << 16)
#define LC_RENEW_QMAX 256u      /* renewals waiting; more are dropped */

enum { LC_ATTR = 1, LC_NAME = 2, LC_DIR = 3 };

#define LC_CRED_FREE ORCH_MNT_LC_CRED_FREE

struct lc_ent {
	struct lc_ent *e_next;
	uint64_t e_key;          /* the handle (LC_ATTR) or the directory (LC_NAME) */
	uint64_t e_child;        /* LC_NAME: the handle, 0 if the name is absent */
	uint64_t e_credkey;      /* LC_NAME: whose lookup it was (LC_CRED_FREE: anyone's); 0: a tombstone's */
	uint64_t e_stamp;        /* of the reply that filled it, or the push that killed it */
	uint64_t e_inval;        /* LC_ATTR: stamp of the last push for it; 0: none */
	uint64_t e_expire_ms;
	struct orch_attr e_attr; /* LC_ATTR */
	uint8_t e_kind;
	bool e_valid;            /* false: a tombstone, kept for its stamp */
	bool e_renewing;         /* a renewal is queued or in flight this term */
	uint8_t e_namelen;
	char e_name[];
};

static uint64_t lc_hash(int kind, uint64_t key, const char *name, size_t namelen)
{
	uint64_t h = 1469598103934665603ull ^ (uint64_t)kind;

	for (int i = 0; i < 8; i++) {
		h ^= (key >> (i * 8)) & 0xff;
		h *= 1099511628211ull;
	}
	for (size_t i = 0; i < namelen; i++) {
		h ^= (uint8_t)name[i];
		h *= 1099511628211ull;
	}
	return h;
}

static struct lc_ent **lc_bucket(struct orch_mnt_lc *lc, int kind, uint64_t key,
				 const char *name, size_t namelen)
{
	return &lc->l_buckets[lc_hash(kind, key, name, namelen) & (LC_BUCKETS - 1)];
}

static bool lc_match(const struct lc_ent *e, int kind, uint64_t key, const char *name,
		     size_t namelen)
{
	return e->e_kind == kind && e->e_key == key && e->e_namelen == namelen &&
	       (namelen == 0 || memcmp(e->e_name, name, namelen) == 0);
}

static unsigned int lc_server(const struct orch_mnt_lc *lc, uint64_t h)
{
	unsigned int s = orch_handle_server(h);

	return s < lc->l_nservers ? s : 0;
}

/* Drops every entry; replies read so far may have missed a push.  l_lock held. */
static void lc_clear_locked(struct orch_mnt_lc *lc)
{
	for (size_t i = 0; i < LC_BUCKETS; i++) {
		while (lc->l_buckets[i]) {
			struct lc_ent *e = lc->l_buckets[i];

			lc->l_buckets[i] = e->e_next;
			free(e);
		}
	}
	lc->l_count = 0;
	for (unsigned int s = 0; s < lc->l_nservers; s++)
		lc->l_srv[s].reject = lc->l_srv[s].last;
}

/*
 * How long before the end of its term a hit renews a key.  A quarter of
 * the term, but at least 1 s and at most half the term:
 * - it must cover the renewal: the wait in the queue behind the rest of
 *   the working set, which enters its last part at about the same time,
 *   and a round trip that may lose a segment or two on a lossy link
 *   (TCP's first retransmission waits at least 200 ms, the next one
 *   twice that), hence the second's floor;
 * - it sets what renewal costs: a key used all the time is asked for once
 *   per term minus the margin (4/3 of a miss's once per term at a
 *   quarter), and a key used only once, inside the margin, is renewed once
 *   more; so no more than half the term (twice per term) on short terms.
 * For the default 30 s term that is 7.5 s; for 2 s, 1 s.
 */
static uint32_t lc_renew_margin_ms(uint32_t lease_ms)
{
	uint32_t margin = lease_ms / 4;

	if (margin < 1000)
		margin = 1000;
	return margin < lease_ms / 2 ? margin : lease_ms / 2;
}

int orch_mnt_lc_init(struct orch_mnt_lc *lc, unsigned int nservers, uint32_t lease_ms,
		     bool default_permissions, bool groups)
{
	pthread_condattr_t ca;

	memset(lc, 0, sizeof(*lc));
	if (!lease_ms || !nservers)
		return 0;
	lc->l_buckets = calloc(LC_BUCKETS, sizeof(*lc->l_buckets));
	lc->l_srv = calloc(nservers, sizeof(*lc->l_srv));
	if (!lc->l_buckets || !lc->l_srv) {
		free(lc->l_buckets);
		free(lc->l_srv);
		lc->l_buckets = NULL;
		lc->l_srv = NULL;
		return -ENOMEM;
	}
	pthread_mutex_init(&lc->l_lock, NULL);
	pthread_cond_init(&lc->l_renew_cv, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&lc->l_vouch_cv, &ca);
	pthread_condattr_destroy(&ca);
	lc->l_groups = groups;
	for (unsigned int i = 0; i < nservers; i++)
		lc->l_srv[i].vouched_until = groups ? 0 : UINT64_MAX;
	lc->l_nservers = nservers;
	lc->l_lease_ms = lease_ms;
	lc->l_renew_margin_ms = lc_renew_margin_ms(lease_ms);
	lc->l_default_permissions = default_permissions;
	lc->l_on = true;
	return 0;
}

void orch_mnt_lc_fini(struct orch_mnt_lc *lc)
{
	if (!lc->l_on)
		return;
	orch_mnt_lc_renew_stop(lc);
	orch_mnt_lc_vouch_stop(lc);
	free(lc->l_renew_q);
	lc_clear_locked(lc);
	pthread_cond_destroy(&lc->l_renew_cv);
	pthread_cond_destroy(&lc->l_vouch_cv);
	pthread_mutex_destroy(&lc->l_lock);
	free(lc->l_buckets);
	free(lc->l_srv);
	lc->l_on = false;
}

uint64_t orch_mnt_lc_credkey(const struct orch_mnt_lc *lc, const struct orch_cred *cred)
{
	uint64_t h = 1469598103934665603ull;
	uint32_t v[2 + ORCH_GROUPS_MAX];
	size_t n = 0;

	if (lc->l_default_permissions || cred->uid == 0)
		return LC_CRED_FREE;
	v[n++] = cred->uid;
	v[n++] = cred->gid;
	for (unsigned int i = 0; i < cred->ngroups && i < ORCH_GROUPS_MAX; i++)
		v[n++] = cred->groups[i];
	for (size_t i = 0; i < n * sizeof(v[0]); i++) {
		h ^= ((const uint8_t *)v)[i];
		h *= 1099511628211ull;
	}
	return h | 2; /* never 0 or LC_CRED_FREE */
}

/* A new dead entry for a key (a tombstone), linked in; NULL on ENOMEM. */
static struct lc_ent *lc_new_locked(struct orch_mnt_lc *lc, int kind, uint64_t key,
				    const char *name, size_t namelen, uint64_t credkey)
{
	struct lc_ent **b = lc_bucket(lc, kind, key, name, namelen);
	struct lc_ent *e = calloc(1, sizeof(*e) + namelen + 1);

	if (!e)
		return NULL;
	e->e_kind = (uint8_t)kind;
	e->e_key = key;
	e->e_credkey = credkey;
	e->e_namelen = (uint8_t)namelen;
	if (namelen)
		memcpy(e->e_name, name, namelen);
	e->e_next = *b;
	*b = e;
	lc->l_count++;
	return e;
}

static struct lc_ent *lc_find_locked(struct orch_mnt_lc *lc, int kind, uint64_t key)
{
	for (struct lc_ent *e = *lc_bucket(lc, kind, key, NULL, 0); e; e = e->e_next)
		if (lc_match(e, kind, key, NULL, 0))
			return e;
	return NULL;
}

/*
 * Marks every entry of the key dead at @stamp, or makes a tombstone if
 * there is none.  False if it could not (no memory).
 */
static bool lc_kill_locked(struct orch_mnt_lc *lc, int kind, uint64_t key, const char *name,
			   size_t namelen, uint64_t stamp)
{
	bool found = false;

	for (struct lc_ent *e = *lc_bucket(lc, kind, key, name, namelen); e; e = e->e_next) {
		if (!lc_match(e, kind, key, name, namelen))
			continue;
		e->e_valid = false;
		if (e->e_stamp < stamp)
			e->e_stamp = stamp;
		e->e_inval = stamp;
		found = true;
	}
	if (!found && lc->l_count < LC_MAX) {
		struct lc_ent *e = lc_new_locked(lc, kind, key, name, namelen, 0);

		if (e) {
			e->e_stamp = e->e_inval = stamp;
			found = true;
		}
	}
	return found;
}

void orch_mnt_lc_suspended(struct orch_mnt_lc *lc, uint64_t now_ms)
{
	/* A vouch counts on a clock that stood still: the groups vouch again first. */
	if (lc->l_on && lc->l_groups) {
		pthread_mutex_lock(&lc->l_lock);
		for (unsigned int i = 0; i < lc->l_nservers; i++)
			lc->l_srv[i].vouched_until = 0;
		pthread_mutex_unlock(&lc->l_lock);
	}
	if (!lc->l_on)
		return;
	pthread_mutex_lock(&lc->l_lock);
	lc_clear_locked(lc);
	lc->l_not_before_ms = now_ms;
	pthread_mutex_unlock(&lc->l_lock);
}

void orch_mnt_lc_push(void *arg, unsigned int server, uint64_t stamp, const struct orch_msg *m)
{
	struct orch_mnt_lc *lc = arg;
	struct lc_srv *sv;
	bool found = true;

	if (!lc->l_on || server >= lc->l_nservers)
		return;
	pthread_mutex_lock(&lc->l_lock);
	sv = &lc->l_srv[server];
	if (sv->last < stamp)
		sv->last = stamp;
	if (!m || m->type == ORCH_SV2CL_REVOKE) {
		sv->floor = stamp;
		sv->reject = stamp;
	} else if (m->type == ORCH_SV2CL_INVAL_ATTR) {
		found = lc_kill_locked(lc, LC_ATTR, m->handle, NULL, 0, stamp);
	} else if (m->type == ORCH_SV2CL_INVAL_ENTRY) {
		found = lc_kill_locked(lc, LC_NAME, m->parent, m->name.s, m->name.len, stamp);
	}
	if (!found) {
		/*
		 * No memory for a tombstone: a complete directory, or a name
		 * whose permission check rests on its directory's attributes,
		 * could now be wrong.  Forget everything from this server.
		 */
		sv->floor = stamp;
		sv->reject = stamp;
	}
	lc->l_pushes++;
	pthread_mutex_unlock(&lc->l_lock);
}

/*
 * Fills a key from a reply stamped @stamp, sent at @sent_ms.  @cmp_attr
 * points at the attributes for LC_ATTR.
 */
static void lc_put(struct orch_mnt_lc *lc, int kind, uint64_t key, const char *name,
		   size_t namelen, uint64_t credkey, uint64_t child, const struct orch_attr *a,
		   uint64_t stamp, uint64_t sent_ms)
{
	struct lc_srv *sv;
	struct lc_ent *e, *mine = NULL, *dead = NULL;

	if (!lc->l_on || !stamp || namelen > ORCH_NAME_MAX)
		return;
	pthread_mutex_lock(&lc->l_lock);
	sv = &lc->l_srv[lc_server(lc, key)];
	if (stamp <= sv->reject || stamp <= sv->floor || sent_ms < lc->l_not_before_ms)
		goto out;
	for (e = *lc_bucket(lc, kind, key, name, namelen); e; e = e->e_next) {
		if (!lc_match(e, kind, key, name, namelen))
			continue;
		if (e->e_stamp > stamp)
			goto out; /* what we hold, or a push, is newer */
		if (e->e_credkey == credkey)
			mine = e;
		else if (!e->e_valid && !dead)
			dead = e;
	}
	if (!mine && dead) {
		mine = dead; /* a tombstone older than this reply: reuse it */
		mine->e_credkey = credkey;
	}
	if (!mine) {
		if (lc->l_count >= LC_MAX) {
			lc_clear_locked(lc);
			if (stamp <= sv->reject)
				goto out;
		}
		mine = lc_new_locked(lc, kind, key, name, namelen, credkey);
		if (!mine)
			goto out;
	}
	mine->e_child = child;
	if (a)
		mine->e_attr = *a;
	mine->e_stamp = stamp;
	mine->e_expire_ms = sent_ms + lc->l_lease_ms;
	mine->e_valid = true;
	mine->e_renewing = false;
	if (kind == LC_NAME) {
		/*
		 * The reply renewed the directory's lease on the server: a
		 * directory still known whole stays so for another term.
		 */
		struct lc_ent *d = lc_find_locked(lc, LC_DIR, key);

		if (d && d->e_valid && orch_time_now_ms() < d->e_expire_ms &&
		    d->e_expire_ms < mine->e_expire_ms) {
			d->e_expire_ms = mine->e_expire_ms;
			d->e_renewing = false;
		}
	}
out:
	pthread_mutex_unlock(&lc->l_lock);
}

void orch_mnt_lc_put_attr(struct orch_mnt_lc *lc, const struct orch_attr *a, uint64_t stamp,
			  uint64_t sent_ms)
{
	lc_put(lc, LC_ATTR, a->handle, NULL, 0, 0, 0, a, stamp, sent_ms);
}

void orch_mnt_lc_put_name(struct orch_mnt_lc *lc, uint64_t parent, const char *name,
			  uint64_t credkey, uint64_t child, uint64_t stamp, uint64_t sent_ms)
{
	lc_put(lc, LC_NAME, parent, name, strlen(name), credkey, child, NULL, stamp, sent_ms);
}

/* The live entry of a key for @credkey, or NULL.  l_lock held. */
static struct lc_ent *lc_get_locked(struct orch_mnt_lc *lc, int kind, uint64_t key,
				    const char *name, size_t namelen, uint64_t credkey)
{
	const struct lc_srv *sv = &lc->l_srv[lc_server(lc, key)];
	uint64_t now = orch_time_now_ms();

	for (struct lc_ent *e = *lc_bucket(lc, kind, key, name, namelen); e; e = e->e_next) {
		if (!lc_match(e, kind, key, name, namelen) || e->e_credkey != credkey)
			continue;
		if (e->e_valid && e->e_stamp > sv->floor && now < e->e_expire_ms &&
		    now < sv->vouched_until)
			return e;
		return NULL;
	}
	return NULL;
}

/* A live entry in the last part of its term that no renewal was queued for. */
static bool lc_due(const struct orch_mnt_lc *lc, const struct lc_ent *e, uint64_t now)
{
	return !e->e_renewing && now + lc->l_renew_margin_ms >= e->e_expire_ms;
}

bool orch_mnt_lc_get_attr(struct orch_mnt_lc *lc, uint64_t h, struct orch_attr *out, bool *due)
{
	struct lc_ent *e;

	if (due)
		*due = false;
	if (!lc->l_on)
		return false;
	pthread_mutex_lock(&lc->l_lock);
	e = lc_get_locked(lc, LC_ATTR, h, NULL, 0, 0);
	if (e) {
		*out = e->e_attr;
		if (due)
			*due = lc_due(lc, e, orch_time_now_ms());
	}
	lc->l_hits += e != NULL;
	lc->l_misses += e == NULL;
	pthread_mutex_unlock(&lc->l_lock);
	return e != NULL;
}

/* Live, fresh and after the last reset of its server. */
static bool lc_alive(const struct orch_mnt_lc *lc, const struct lc_ent *e, uint64_t now)
{
	const struct lc_srv *sv = &lc->l_srv[lc_server(lc, e->e_key)];

	return e->e_valid && e->e_stamp > sv->floor && now < e->e_expire_ms &&
	       now < sv->vouched_until;
}

/* Until when @e may be used: its term, or its group's vouch if that ends first. */
static uint64_t lc_until(const struct orch_mnt_lc *lc, const struct lc_ent *e)
{
	uint64_t vouched = lc->l_srv[lc_server(lc, e->e_key)].vouched_until;

	return e->e_expire_ms < vouched ? e->e_expire_ms : vouched;
}

/*
 * A name for @credkey: its entry, or, with nothing at all held about the
 * name, "absent" if the directory is known whole (LC_CRED_FREE callers).
 * l_lock held.
 */
static bool lc_get_name_locked(struct orch_mnt_lc *lc, uint64_t parent, const char *name,
			       size_t namelen, uint64_t credkey, uint64_t *child, bool *due,
			       uint64_t *until)
{
	uint64_t now = orch_time_now_ms();
	bool known = false;
	struct lc_ent *d;

	for (struct lc_ent *e = *lc_bucket(lc, LC_NAME, parent, name, namelen); e; e = e->e_next) {
		if (!lc_match(e, LC_NAME, parent, name, namelen))
			continue;
		known = true;
		if (e->e_credkey != credkey || !lc_alive(lc, e, now))
			continue;
		if (credkey != LC_CRED_FREE) {
			/* A permission check that may have changed with the directory. */
			struct lc_ent *pa = lc_find_locked(lc, LC_ATTR, parent);

			if (pa && pa->e_inval > e->e_stamp)
				return false;
		}
		*child = e->e_child;
		*due = lc_due(lc, e, now);
		*until = lc_until(lc, e);
		return true;
	}
	if (known || credkey != LC_CRED_FREE)
		return false;
	d = lc_find_locked(lc, LC_DIR, parent);
	if (!d || !lc_alive(lc, d, now))
		return false;
	*child = 0;
	*due = lc_due(lc, d, now);
	*until = lc_until(lc, d);
	return true;
}

bool orch_mnt_lc_get_name(struct orch_mnt_lc *lc, uint64_t parent, const char *name,
			  uint64_t credkey, uint64_t *child, bool *due)
{
	bool hit, renew = false;
	uint64_t until;

	if (due)
		*due = false;
	if (!lc->l_on)
		return false;
	pthread_mutex_lock(&lc->l_lock);
	hit = lc_get_name_locked(lc, parent, name, strlen(name), credkey, child, &renew, &until);
	if (due)
		*due = hit && renew;
	lc->l_hits += hit;
	lc->l_misses += !hit;
	pthread_mutex_unlock(&lc->l_lock);
	return hit;
}

uint64_t orch_mnt_lc_vouched_until(struct orch_mnt_lc *lc, uint64_t h)
{
	uint64_t until;

	if (!lc->l_on)
		return 0;
	pthread_mutex_lock(&lc->l_lock);
	until = lc->l_srv[lc_server(lc, h)].vouched_until;
	pthread_mutex_unlock(&lc->l_lock);
	return until;
}

uint64_t orch_mnt_lc_attr_until(struct orch_mnt_lc *lc, uint64_t h)
{
	struct lc_ent *e;
	uint64_t until = 0;

	if (!lc->l_on)
		return 0;
	pthread_mutex_lock(&lc->l_lock);
	e = lc_get_locked(lc, LC_ATTR, h, NULL, 0, 0);
	if (e)
		until = lc_until(lc, e);
	pthread_mutex_unlock(&lc->l_lock);
	return until;
}

uint64_t orch_mnt_lc_name_until(struct orch_mnt_lc *lc, uint64_t parent, const char *name,
				uint64_t credkey)
{
	uint64_t child, until = 0;
	bool due;

	if (!lc->l_on || strlen(name) > ORCH_NAME_MAX)
		return 0;
	pthread_mutex_lock(&lc->l_lock);
	if (!lc_get_name_locked(lc, parent, name, strlen(name), credkey, &child, &due, &until))
		until = 0;
	pthread_mutex_unlock(&lc->l_lock);
	return until;
}

bool orch_mnt_lc_dir_wanted(struct orch_mnt_lc *lc, uint64_t dir, uint64_t credkey)
{
	struct lc_ent *d;
	bool want;

	if (!lc->l_on || credkey != LC_CRED_FREE)
		return false;
	pthread_mutex_lock(&lc->l_lock);
	d = lc_find_locked(lc, LC_DIR, dir);
	/* A dead record still in its term: too big to list, do not try again. */
	want = !d || (d->e_valid ? !lc_alive(lc, d, orch_time_now_ms())
				 : orch_time_now_ms() >= d->e_expire_ms);
	pthread_mutex_unlock(&lc->l_lock);
	return want;
}

void orch_mnt_lc_dir_too_big(struct orch_mnt_lc *lc, uint64_t dir, uint64_t sent_ms)
{
	struct lc_ent *d;

	if (!lc->l_on)
		return;
	pthread_mutex_lock(&lc->l_lock);
	d = lc_find_locked(lc, LC_DIR, dir);
	if (!d && lc->l_count < LC_MAX)
		d = lc_new_locked(lc, LC_DIR, dir, NULL, 0, 0);
	if (d && !d->e_valid)
		d->e_expire_ms = sent_ms + lc->l_lease_ms;
	pthread_mutex_unlock(&lc->l_lock);
}

void orch_mnt_lc_put_dir(struct orch_mnt_lc *lc, uint64_t dir, const struct orch_dirent *ents,
			 uint32_t n, uint64_t stamp, uint64_t sent_ms)
{
	const struct lc_srv *sv;
	struct lc_ent *d;

	if (!lc->l_on || !stamp)
		return;
	for (uint32_t i = 0; i < n; i++)
		lc_put(lc, LC_NAME, dir, ents[i].name, ents[i].namelen, LC_CRED_FREE,
		       ents[i].handle, NULL, stamp, sent_ms);
	pthread_mutex_lock(&lc->l_lock);
	sv = &lc->l_srv[lc_server(lc, dir)];
	if (stamp <= sv->reject || stamp <= sv->floor || sent_ms < lc->l_not_before_ms)
		goto out;
	d = lc_find_locked(lc, LC_DIR, dir);
	if (!d) {
		if (lc->l_count >= LC_MAX)
			goto out;
		d = lc_new_locked(lc, LC_DIR, dir, NULL, 0, 0);
		if (!d)
			goto out;
	} else if (d->e_stamp > stamp) {
		goto out; /* a push after the listing made it incomplete */
	}
	d->e_stamp = stamp;
	d->e_expire_ms = sent_ms + lc->l_lease_ms;
	d->e_valid = true;
	d->e_renewing = false;
out:
	pthread_mutex_unlock(&lc->l_lock);
}

/* --- Renewal ------------------------------------------------------------------ */

/*
 * The keys @r renews that are live and due, up to 3: a GETATTR the
 * attributes; a LOOKUP the name (or, for a name known absent because the
 * directory is whole, the directory) and the child's attributes, which its
 * reply carries too.  l_lock held.
 */
static size_t lc_renew_keys_locked(struct orch_mnt_lc *lc, const struct orch_mnt_lc_renewal *r,
				   struct lc_ent *keys[3])
{
	uint64_t now = orch_time_now_ms();
	struct lc_ent *e, *a;
	size_t n = 0;

	if (r->r_kind == ORCH_MNT_LC_RENEW_GETATTR) {
		e = lc_get_locked(lc, LC_ATTR, r->r_key, NULL, 0, 0);
		if (e && lc_due(lc, e, now))
			keys[n++] = e;
		return n;
	}
	e = lc_get_locked(lc, LC_NAME, r->r_key, r->r_name, strlen(r->r_name), r->r_credkey);
	if (!e) {
		e = r->r_credkey == LC_CRED_FREE ? lc_find_locked(lc, LC_DIR, r->r_key) : NULL;
		if (e && lc_alive(lc, e, now) && lc_due(lc, e, now))
			keys[n++] = e;
		return n;
	}
	if (lc_due(lc, e, now))
		keys[n++] = e;
	a = e->e_child ? lc_get_locked(lc, LC_ATTR, e->e_child, NULL, 0, 0) : NULL;
	if (a && lc_due(lc, a, now))
		keys[n++] = a;
	return n;
}

bool orch_mnt_lc_renew(struct orch_mnt_lc *lc, const struct orch_mnt_lc_renewal *r)
{
	struct lc_ent *keys[3];
	bool queued = false;
	size_t n;

	if (!lc->l_on)
		return false;
	pthread_mutex_lock(&lc->l_lock);
	if (!lc->l_renew_q || lc->l_renew_stop)
		goto out;
	n = lc_renew_keys_locked(lc, r, keys);
	if (!n)
		goto out;
	if (lc->l_renew_n == LC_RENEW_QMAX) {
		lc->l_renew_dropped++; /* unmarked: the key's next hit tries again */
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		keys[i]->e_renewing = true;
	lc->l_renew_q[(lc->l_renew_head + lc->l_renew_n++) % LC_RENEW_QMAX] = *r;
	pthread_cond_signal(&lc->l_renew_cv);
	queued = true;
out:
	pthread_mutex_unlock(&lc->l_lock);
	return queued;
}

static void *lc_renew_main(void *arg)
{
	struct orch_mnt_lc *lc = arg;
	struct orch_mnt_lc_renewal r;

	pthread_mutex_lock(&lc->l_lock);
	for (;;) {
		while (!lc->l_renew_n && !lc->l_renew_stop)
			pthread_cond_wait(&lc->l_renew_cv, &lc->l_lock);
		if (lc->l_renew_stop)
			break;
		r = lc->l_renew_q[lc->l_renew_head];
		lc->l_renew_head = (lc->l_renew_head + 1) % LC_RENEW_QMAX;
		lc->l_renew_n--;
		lc->l_renewals++;
		pthread_mutex_unlock(&lc->l_lock);
		lc->l_renew_fn(lc->l_renew_arg, &r);
		pthread_mutex_lock(&lc->l_lock);
	}
	pthread_mutex_unlock(&lc->l_lock);
	return NULL;
}

int orch_mnt_lc_renew_start(struct orch_mnt_lc *lc, unsigned int nthreads,
			    orch_mnt_lc_renew_fn fn, void *arg)
{
	int rc = 0;

	if (!lc->l_on)
		return 0;
	if (lc->l_renew_q || nthreads > ORCH_MNT_LC_RENEW_THREADS_MAX)
		return -EINVAL;
	lc->l_renew_q = calloc(LC_RENEW_QMAX, sizeof(*lc->l_renew_q));
	if (!lc->l_renew_q)
		return -ENOMEM;
	lc->l_renew_fn = fn;
	lc->l_renew_arg = arg;
	for (unsigned int i = 0; !rc && i < nthreads; i++) {
		rc = -pthread_create(&lc->l_renew_threads[i], NULL, lc_renew_main, lc);
		if (!rc)
			lc->l_renew_nthreads++;
	}
	if (rc)
		orch_mnt_lc_renew_stop(lc);
	return rc;
}

void orch_mnt_lc_renew_stop(struct orch_mnt_lc *lc)
{
	if (!lc->l_on)
		return;
	pthread_mutex_lock(&lc->l_lock);
	lc->l_renew_stop = true;
	pthread_cond_broadcast(&lc->l_renew_cv);
	pthread_mutex_unlock(&lc->l_lock);
	for (unsigned int i = 0; i < lc->l_renew_nthreads; i++)
		pthread_join(lc->l_renew_threads[i], NULL);
	lc->l_renew_nthreads = 0;
}

/*
 * Asks each of its groups (every l_vouch_nthreads-th from @arg's index) to
 * vouch, once per ORCH_MNT_LC_VOUCH_EVERY_MS, and moves the group's use of
 * its leases to ORCH_VOUCH_TERM_MS after the ask was sent.  A group that
 * does not answer (no leader, cut off) is used no more once that ends.
 */
/* CLOCK_MONOTONIC's time (l_vouch_cv's clock) at orch_time_now_ms() == @at_ms. */
static void lc_deadline(struct timespec *ts, uint64_t at_ms)
{
	uint64_t now = orch_time_now_ms(), left = at_ms > now ? at_ms - now : 0;

	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(left / 1000);
	ts->tv_nsec += (long)(left % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

struct lc_voucher {
	struct orch_mnt_lc *v_lc;
	unsigned int v_first;
};

static void *lc_vouch_main(void *arg)
{
	struct lc_voucher *v = arg;
	struct orch_mnt_lc *lc = v->v_lc;
	unsigned int first = v->v_first;

	free(v);
	pthread_mutex_lock(&lc->l_lock);
	while (!lc->l_vouch_stop) {
		uint64_t round_ms = orch_time_now_ms();
		struct timespec until;

		for (unsigned int s = first; s < lc->l_nservers && !lc->l_vouch_stop;
		     s += lc->l_vouch_nthreads) {
			uint64_t sent_ms = orch_time_now_ms();
			int error;

			pthread_mutex_unlock(&lc->l_lock);
			error = lc->l_vouch_fn(lc->l_vouch_arg, s);
			pthread_mutex_lock(&lc->l_lock);
			if (error) {
				lc->l_vouch_failed++;
				continue;
			}
			lc->l_vouches++;
			if (lc->l_srv[s].vouched_until < sent_ms + ORCH_VOUCH_TERM_MS)
				lc->l_srv[s].vouched_until = sent_ms + ORCH_VOUCH_TERM_MS;
		}
		lc_deadline(&until, round_ms + ORCH_MNT_LC_VOUCH_EVERY_MS);
		while (!lc->l_vouch_stop &&
		       pthread_cond_timedwait(&lc->l_vouch_cv, &lc->l_lock, &until) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&lc->l_lock);
	return NULL;
}

int orch_mnt_lc_vouch_start(struct orch_mnt_lc *lc, orch_mnt_lc_vouch_fn fn, void *arg)
{
	unsigned int n;
	int rc = 0;

	if (!lc->l_on || !lc->l_groups)
		return 0;
	n = lc->l_nservers < ORCH_MNT_LC_VOUCH_THREADS_MAX ? lc->l_nservers
							   : ORCH_MNT_LC_VOUCH_THREADS_MAX;
	lc->l_vouch_fn = fn;
	lc->l_vouch_arg = arg;
	/* Set before the first thread runs: each strides by it. */
	pthread_mutex_lock(&lc->l_lock);
	lc->l_vouch_nthreads = n;
	pthread_mutex_unlock(&lc->l_lock);
	for (unsigned int i = 0; i < n; i++) {
		struct lc_voucher *v = malloc(sizeof(*v));

		rc = v ? 0 : -ENOMEM;
		if (v) {
			*v = (struct lc_voucher){ .v_lc = lc, .v_first = i };
			rc = -pthread_create(&lc->l_vouch_threads[i], NULL, lc_vouch_main, v);
			if (rc)
				free(v);
		}
		if (rc) {
			/* The groups of the threads not started are never vouched for: not used. */
			pthread_mutex_lock(&lc->l_lock);
			lc->l_vouch_stop = true;
			pthread_cond_broadcast(&lc->l_vouch_cv);
			pthread_mutex_unlock(&lc->l_lock);
			for (unsigned int j = 0; j < i; j++)
				pthread_join(lc->l_vouch_threads[j], NULL);
			lc->l_vouch_nthreads = 0;
			return rc;
		}
	}
	return 0;
}

void orch_mnt_lc_vouch_stop(struct orch_mnt_lc *lc)
{
	if (!lc->l_on)
		return;
	pthread_mutex_lock(&lc->l_lock);
	lc->l_vouch_stop = true;
	pthread_cond_broadcast(&lc->l_vouch_cv);
	pthread_mutex_unlock(&lc->l_lock);
	for (unsigned int i = 0; i < lc->l_vouch_nthreads; i++)
		pthread_join(lc->l_vouch_threads[i], NULL);
	lc->l_vouch_nthreads = 0;
}

void orch_mnt_lc_counts(struct orch_mnt_lc *lc, struct orch_mnt_lc_counts *out)
{
	memset(out, 0, sizeof(*out));
	if (!lc->l_on)
		return;
	pthread_mutex_lock(&lc->l_lock);
	out->entries = lc->l_count;
	out->hits = lc->l_hits;
	out->misses = lc->l_misses;
	out->pushes = lc->l_pushes;
	out->renewals = lc->l_renewals;
	out->renewals_dropped = lc->l_renew_dropped;
	out->vouches = lc->l_vouches;
	out->vouches_failed = lc->l_vouch_failed;
	pthread_mutex_unlock(&lc->l_lock);
	out->lease_ms = lc->l_lease_ms;
}
