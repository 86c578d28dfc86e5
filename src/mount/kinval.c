/*
 * Kernel invalidations (docs/DESIGN.md, "The kernel's caches"): when a
 * server pushes that another client changed something this mount leased,
 * the kernel's copy goes too, not only the lease cache's, so the change
 * shows here before the kernel's own timeouts run out.
 *
 * Pushes arrive on liborchard's reader threads, which are often FUSE
 * request threads, with a connection lock held.  libfuse's notify calls
 * must not run there: an entry invalidation takes the directory's lock in
 * the kernel, which a request of the same thread may hold, and an inode
 * invalidation may wait for writeback that needs a FUSE thread.  So the
 * push handler only queues, and one thread of this file makes the calls,
 * holding no lock of the mount.
 *
 * The queue is bounded (KINVAL_QMAX) and coalesces: a key already queued
 * is not queued again.  A full queue, or no memory, drops the invalidation
 * and counts it; the kernel's copy then lives to its own timeout
 * (dcache_timeout_ms, getattr_timeout_ms), as it did before this file.
 * A server's REVOKE (forget everything it leased), or a connection that
 * went down or came up again (pushes may have been lost), is one flag per
 * server:
 * the thread then drops the attributes and cached listings of every inode
 * of that server the kernel knows.  The kernel's names under those
 * directories live to their entry timeout: the mount keeps no names.
 *
 * A push with a reqid is this mount's own change (SPEC-wire.md, "Leases"):
 * its kernel applied it already, and dropping it would only cost the next
 * lookup a round trip.  (liborchard clears the reqid of a call that is no
 * longer waiting: one that timed out was never applied.)
 *
 * A name is expired rather than invalidated where the kernel can
 * (FUSE_CAP_EXPIRE_ONLY, Linux 6.2): a push for an entry record that
 * changed while its name did not (a directory marked busy by a rename
 * that then failed) must not unhash a directory some process works in,
 * nor detach mounts on it.  The next lookup asks the mount again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "mount/mount_i.h"

#define KINVAL_QMAX 4096u       /* invalidations waiting; more are dropped */
#define KINVAL_BUCKETS 1024u    /* the queued ones by key, to coalesce */
#define KINVAL_WATCH_MS 100     /* the watcher sees connections come up this often */

enum { KINVAL_ATTR = 1, KINVAL_ENTRY = 2 };

struct orch_mnt_kinval_item {
	struct orch_mnt_kinval_item *q_next; /* the queue, oldest first */
	struct orch_mnt_kinval_item *q_hnext; /* the bucket's chain */
	uint64_t q_key;                       /* the handle, or the entry's directory */
	uint8_t q_kind;
	uint8_t q_namelen;
	char q_name[];
};

static size_t kinval_bucket(uint64_t key, const char *name, size_t namelen)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < namelen; i++)
		h = (h ^ (uint8_t)name[i]) * 1099511628211ull;
	return (size_t)(h >> 40) & (KINVAL_BUCKETS - 1);
}

/* Queues one invalidation unless the same is queued already.  k_lock held. */
static void kinval_queue_locked(struct orch_mnt_kinval *k, int kind, uint64_t key,
				const char *name, size_t namelen)
{
	struct orch_mnt_kinval_item **b, *q;

	b = &k->k_buckets[kinval_bucket(key, name, namelen)];
	for (q = *b; q; q = q->q_hnext) {
		if (q->q_kind == kind && q->q_key == key && q->q_namelen == namelen &&
		    (!namelen || memcmp(q->q_name, name, namelen) == 0)) {
			k->k_coalesced++;
			return;
		}
	}
	if (k->k_queued >= KINVAL_QMAX || !(q = malloc(sizeof(*q) + namelen))) {
		k->k_dropped++;
		ORCH_LOG_RATELIMIT(ORCH_LOG_NOTICE,
				   "kernel invalidations dropped (queue full or no memory): "
				   "the kernel keeps those until its own timeouts");
		return;
	}
	q->q_kind = (uint8_t)kind;
	q->q_key = key;
	q->q_namelen = (uint8_t)namelen;
	if (namelen)
		memcpy(q->q_name, name, namelen);
	q->q_hnext = *b;
	*b = q;
	q->q_next = NULL;
	if (k->k_tail)
		k->k_tail->q_next = q;
	else
		k->k_head = q;
	k->k_tail = q;
	k->k_queued++;
	pthread_cond_signal(&k->k_wake);
}

/* Takes the oldest item off the queue and its bucket.  k_lock held. */
static struct orch_mnt_kinval_item *kinval_take_locked(struct orch_mnt_kinval *k)
{
	struct orch_mnt_kinval_item *q = k->k_head, **p;

	if (!q)
		return NULL;
	k->k_head = q->q_next;
	if (!k->k_head)
		k->k_tail = NULL;
	k->k_queued--;
	p = &k->k_buckets[kinval_bucket(q->q_key, q->q_name, q->q_namelen)];
	while (*p != q)
		p = &(*p)->q_hnext;
	*p = q->q_hnext;
	return q;
}

void orch_mnt_push(void *arg, unsigned int server, uint64_t stamp, const struct orch_msg *m)
{
	struct orch_mnt *mnt = arg;
	struct orch_mnt_kinval *k = &mnt->m_kinval;

	orch_mnt_lc_push(&mnt->m_lc, server, stamp, m);
	pthread_mutex_lock(&k->k_lock);
	if (!k->k_on) {
		pthread_mutex_unlock(&k->k_lock);
		return;
	}
	if (!m && server < ORCH_SERVERS_MAX && !k->k_connected[server]) {
		/* The first connection: nothing leased from it yet to have missed. */
		k->k_connected[server] = true;
	} else if (!m || m->type == ORCH_SV2CL_REVOKE) {
		if (server < ORCH_SERVERS_MAX && !k->k_revoked[server]) {
			k->k_revoked[server] = true;
			k->k_any_revoked = true;
			pthread_cond_signal(&k->k_wake);
		}
	} else if (m->reqid) {
		k->k_own++;
	} else if (m->type == ORCH_SV2CL_INVAL_ATTR) {
		kinval_queue_locked(k, KINVAL_ATTR, m->handle, NULL, 0);
	} else if (m->type == ORCH_SV2CL_INVAL_ENTRY && m->name.len <= ORCH_NAME_MAX) {
		kinval_queue_locked(k, KINVAL_ENTRY, m->parent, m->name.s, m->name.len);
	}
	pthread_mutex_unlock(&k->k_lock);
}

/* One notify call; -ENOENT (the kernel holds nothing of it) is success. */
static void kinval_send(struct orch_mnt *m, const struct orch_mnt_kinval_item *q)
{
	int rc;

	if (q->q_kind == KINVAL_ATTR)
		rc = fuse_lowlevel_notify_inval_inode(m->m_se, q->q_key, -1, 0);
	else if (m->m_expire_only)
		rc = fuse_lowlevel_notify_expire_entry(m->m_se, q->q_key, q->q_name,
						       q->q_namelen, FUSE_LL_EXPIRE_ONLY);
	else
		rc = fuse_lowlevel_notify_inval_entry(m->m_se, q->q_key, q->q_name,
						      q->q_namelen);
	if (rc && rc != -ENOENT && rc != -ENOTCONN)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot drop the kernel's copy of inode %#llx: %s",
				   (unsigned long long)q->q_key, strerror(-rc));
}

/*
 * A server revoked everything it leased: drops the attributes, and a
 * directory's cached listing, of each of its inodes the kernel knows.
 */
static void kinval_server(struct orch_mnt *m, unsigned int server)
{
	uint64_t *hs = NULL;
	size_t n = 0;

	if (orch_mnt_inode_list_server(&m->m_itab, server, &hs, &n)) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_NOTICE,
				   "kernel invalidations dropped (no memory): server='%s'",
				   orch_client_cfg(m->m_cl)->servers[server].name);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int rc = fuse_lowlevel_notify_inval_inode(m->m_se, hs[i], 0, 0);

		if (rc == -ENOTCONN)
			break;
	}
	free(hs);
}

/*
 * The watcher: nobody reads a connection with no call in flight, and a
 * mount whose kernel answers from its own cache makes no calls.  So this
 * thread reads the idle connections' pushes as they come.
 */
static void *kinval_watch_main(void *arg)
{
	struct orch_mnt *m = arg;

	static const struct timespec pause = { .tv_nsec = KINVAL_WATCH_MS * 1000000L };

	while (!atomic_load(&m->m_kinval.k_watch_stop))
		if (orch_client_wait_pushes(m->m_cl, KINVAL_WATCH_MS) < 0)
			nanosleep(&pause, NULL);
	return NULL;
}

static void *kinval_main(void *arg)
{
	struct orch_mnt *m = arg;
	struct orch_mnt_kinval *k = &m->m_kinval;

	pthread_mutex_lock(&k->k_lock);
	while (!k->k_stop) {
		struct orch_mnt_kinval_item *q;

		if (k->k_any_revoked) {
			k->k_any_revoked = false;
			for (unsigned int s = 0; s < ORCH_SERVERS_MAX; s++) {
				if (!k->k_revoked[s])
					continue;
				k->k_revoked[s] = false;
				k->k_revokes++;
				pthread_mutex_unlock(&k->k_lock);
				kinval_server(m, s);
				pthread_mutex_lock(&k->k_lock);
			}
			continue;
		}
		q = kinval_take_locked(k);
		if (!q) {
			pthread_cond_wait(&k->k_wake, &k->k_lock);
			continue;
		}
		pthread_mutex_unlock(&k->k_lock);
		kinval_send(m, q);
		free(q);
		pthread_mutex_lock(&k->k_lock);
		k->k_sent++;
	}
	pthread_mutex_unlock(&k->k_lock);
	return NULL;
}

int orch_mnt_kinval_init(struct orch_mnt *m)
{
	struct orch_mnt_kinval *k = &m->m_kinval;

	memset(k, 0, sizeof(*k));
	k->k_buckets = calloc(KINVAL_BUCKETS, sizeof(*k->k_buckets));
	if (!k->k_buckets)
		return -ENOMEM;
	pthread_mutex_init(&k->k_lock, NULL);
	pthread_cond_init(&k->k_wake, NULL);
	return 0;
}

int orch_mnt_kinval_start(struct orch_mnt *m)
{
	struct orch_mnt_kinval *k = &m->m_kinval;
	int error;

	pthread_mutex_lock(&k->k_lock);
	k->k_on = true;
	k->k_stop = false;
	pthread_mutex_unlock(&k->k_lock);
	error = -pthread_create(&k->k_thread, NULL, kinval_main, m);
	if (error) {
		pthread_mutex_lock(&k->k_lock);
		k->k_on = false;
		pthread_mutex_unlock(&k->k_lock);
		return error;
	}
	k->k_running = true;
	atomic_store(&k->k_watch_stop, false);
	error = -pthread_create(&k->k_watch_thread, NULL, kinval_watch_main, m);
	if (error) {
		orch_mnt_kinval_stop(m);
		return error;
	}
	k->k_watching = true;
	return 0;
}

void orch_mnt_kinval_halt(struct orch_mnt *m)
{
	struct orch_mnt_kinval *k = &m->m_kinval;

	if (!k->k_buckets)
		return;
	atomic_store(&k->k_watch_stop, true);
	if (k->k_watching)
		pthread_join(k->k_watch_thread, NULL);
	k->k_watching = false;
	pthread_mutex_lock(&k->k_lock);
	k->k_on = false;
	k->k_stop = true;
	pthread_cond_signal(&k->k_wake);
	pthread_mutex_unlock(&k->k_lock);
}

void orch_mnt_kinval_stop(struct orch_mnt *m)
{
	struct orch_mnt_kinval *k = &m->m_kinval;
	struct orch_mnt_kinval_item *q;

	if (!k->k_buckets)
		return;
	orch_mnt_kinval_halt(m);
	if (k->k_running)
		pthread_join(k->k_thread, NULL);
	k->k_running = false;
	pthread_mutex_lock(&k->k_lock);
	while ((q = kinval_take_locked(k)))
		free(q);
	pthread_mutex_unlock(&k->k_lock);
}

void orch_mnt_kinval_fini(struct orch_mnt *m)
{
	struct orch_mnt_kinval *k = &m->m_kinval;

	if (!k->k_buckets)
		return;
	orch_mnt_kinval_stop(m);
	pthread_cond_destroy(&k->k_wake);
	pthread_mutex_destroy(&k->k_lock);
	free(k->k_buckets);
	k->k_buckets = NULL;
}

void orch_mnt_kinval_counts(struct orch_mnt *m, struct orch_mnt_kinval_counts *out)
{
	struct orch_mnt_kinval *k = &m->m_kinval;

	memset(out, 0, sizeof(*out));
	if (!k->k_buckets)
		return;
	pthread_mutex_lock(&k->k_lock);
	out->sent = k->k_sent;
	out->coalesced = k->k_coalesced;
	out->dropped = k->k_dropped;
	out->own = k->k_own;
	out->revokes = k->k_revokes;
	out->queued = k->k_queued;
	pthread_mutex_unlock(&k->k_lock);
}
