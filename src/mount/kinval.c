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
 * push handler only queues, and threads of this file make the calls,
 * holding no lock of the mount: one for attributes (and a directory's
 * cached listing, which a name's push drops too), which also sends the
 * servers their acknowledgements ("Acks"), and KINVAL_NAMES for names
 * ("Names").  An attribute push leaves a file's pages alone: dropping them
 * waits for the reads and writes in flight that hold them locked, which
 * may wait for replies that wait for other mounts' acknowledgements, a
 * cycle; the kernel drops them itself when it sees the new size or mtime.
 *
 * The queue is bounded (KINVAL_QMAX) and coalesces: a key already queued
 * is not queued again.  A full queue, or no memory, drops the invalidation,
 * counts it, and drops every inode of that server from the kernel
 * instead, as for a REVOKE.  A server's REVOKE (forget everything it
 * leased), or a connection that went down or came up again (pushes may
 * have been lost), is one flag per server: the attributes thread then
 * drops the attributes and cached listings of every inode of that server
 * the kernel knows.  The kernel's names under those directories live to
 * their entry timeout: the mount keeps no names.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/fault.h"
#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "mount/mount_i.h"

#define KINVAL_QMAX 4096u       /* invalidations waiting; more are dropped */
#define KINVAL_BUCKETS 1024u    /* the queued ones by key, to coalesce */
#define KINVAL_WATCH_MS 100     /* the watcher sees connections come up this often */
#define KINVAL_ACK_EVERY 32     /* acknowledgements in a burst of calls, at least this often */
#define KINVAL_SUSPEND_MS 200   /* a suspend this long or longer drops every lease */
#define KINVAL_NAMES ORCH_ARRAY_SIZE(((struct orch_mnt_kinval *)0)->k_calling)
#define KINVAL_BUSY_MAX ORCH_ARRAY_SIZE(((struct orch_mnt_kinval *)0)->k_busy)

enum { KINVAL_ATTR = 1, KINVAL_ENTRY = 2 };

struct orch_mnt_kinval_item {
	struct orch_mnt_kinval_item *q_next; /* the queue, oldest first */
	struct orch_mnt_kinval_item *q_hnext; /* the bucket's chain */
	uint64_t q_key;                       /* the handle, or the entry's directory */
	/*
	 * The first numbered push it stands for (0: none) on connection
	 * q_gen of server q_server: pushes merged into it later are done
	 * with it too.
	 */
	uint64_t q_gen, q_seq;
	/* A name acknowledged before its call: its directory was busy (dir_enter). */
	bool q_early;
	/* KINVAL_ATTR of a directory whose cached listing goes too (dir.c). */
	bool q_list;
	uint8_t q_server;
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

/* True if a request of this mount holds @dir's lock in the kernel.  k_lock held. */
static bool kinval_busy_locked(const struct orch_mnt_kinval *k, uint64_t dir)
{
	if (k->k_busy_overflow)
		return true;
	for (size_t i = 0; i < KINVAL_BUSY_MAX; i++)
		if (k->k_busy[i].n && k->k_busy[i].dir == dir)
			return true;
	return false;
}

/*
 * Server @s's push @seq on connection @gen needs a walk of all its inodes,
 * and every name the kernel keeps of it goes (knames.c).  k_lock held.
 */
static void kinval_revoke_locked(struct orch_mnt *m, unsigned int s, uint64_t gen,
				 uint64_t seq)
{
	struct orch_mnt_kinval *k = &m->m_kinval;

	orch_mnt_knames_reset(&m->m_knames, s);
	if (seq && k->k_acks[s].gen == gen)
		k->k_acks[s].revoke_seq = ORCH_MAX(k->k_acks[s].revoke_seq, seq);
	if (!k->k_revoked[s]) {
		k->k_revoked[s] = true;
		k->k_any_revoked = true;
	}
	pthread_cond_broadcast(&k->k_wake);
}

/*
 * Queues one invalidation unless the same is queued already; it stands
 * for push @seq (0: none) of server @s's connection @gen.  k_lock held.
 */
static void kinval_queue_locked(struct orch_mnt *m, int kind, uint64_t key,
				const char *name, size_t namelen, bool list, unsigned int s,
				uint64_t gen, uint64_t seq)
{
	struct orch_mnt_kinval *k = &m->m_kinval;
	struct orch_mnt_kinval_item **b, *q;

	b = &k->k_buckets[kinval_bucket(key, name, namelen)];
	for (q = *b; q; q = q->q_hnext) {
		if (q->q_kind == kind && q->q_key == key && q->q_namelen == namelen &&
		    (!namelen || memcmp(q->q_name, name, namelen) == 0)) {
			k->k_coalesced++;
			q->q_list |= list;
			/* Queued earlier, sent later than this push: it covers it. */
			if (seq && (q->q_server != s || q->q_gen != gen || !q->q_seq)) {
				q->q_server = (uint8_t)s;
				q->q_gen = gen;
				q->q_seq = seq;
				q->q_early = kind == KINVAL_ENTRY && kinval_busy_locked(k, key);
			}
			return;
		}
	}
	if (k->k_queued >= KINVAL_QMAX || !(q = malloc(sizeof(*q) + namelen))) {
		k->k_dropped++;
		ORCH_LOG_RATELIMIT(ORCH_LOG_NOTICE,
				   "kernel invalidations dropped (queue full or no memory): "
				   "dropping every inode of that server from the kernel");
		/* What the kernel holds of that server goes instead. */
		kinval_revoke_locked(m, s, gen, seq);
		return;
	}
	q->q_server = (uint8_t)s;
	q->q_gen = gen;
	q->q_seq = seq;
	q->q_early = seq && kind == KINVAL_ENTRY && kinval_busy_locked(k, key);
	q->q_list = list;
	k->k_early += q->q_early;
	q->q_kind = (uint8_t)kind;
	q->q_key = key;
	q->q_namelen = (uint8_t)namelen;
	if (namelen)
		memcpy(q->q_name, name, namelen);
	q->q_hnext = *b;
	*b = q;
	q->q_next = NULL;
	if (k->k_tail[kind - 1])
		k->k_tail[kind - 1]->q_next = q;
	else
		k->k_head[kind - 1] = q;
	k->k_tail[kind - 1] = q;
	k->k_queued++;
	pthread_cond_broadcast(&k->k_wake);
}

/*
 * Takes the oldest item of @kind off its queue and its bucket, but for a
 * name in a busy directory if @skip_busy ("Names").  k_lock held.
 */
static struct orch_mnt_kinval_item *kinval_take_locked(struct orch_mnt_kinval *k, int kind,
						       bool skip_busy)
{
	struct orch_mnt_kinval_item **pp, *q, *prev = NULL, **b;

	for (pp = &k->k_head[kind - 1]; (q = *pp); prev = q, pp = &q->q_next)
		if (!skip_busy || !kinval_busy_locked(k, q->q_key))
			break;
	if (!q)
		return NULL;
	*pp = q->q_next;
	if (k->k_tail[kind - 1] == q)
		k->k_tail[kind - 1] = prev;
	k->k_queued--;
	b = &k->k_buckets[kinval_bucket(q->q_key, q->q_name, q->q_namelen)];
	while (*b != q)
		b = &(*b)->q_hnext;
	*b = q->q_hnext;
	return q;
}

void orch_mnt_push(void *arg, unsigned int server, uint64_t stamp, const struct orch_msg *m,
		   uint64_t gen, uint64_t seq)
{
	struct orch_mnt *mnt = arg;
	struct orch_mnt_kinval *k = &mnt->m_kinval;

	orch_mnt_lc_push(&mnt->m_lc, server, stamp, m);
	if (server >= ORCH_SERVERS_MAX)
		return;
	pthread_mutex_lock(&k->k_lock);
	if (!k->k_on) {
		pthread_mutex_unlock(&k->k_lock);
		return;
	}
	if (seq) {
		struct orch_mnt_kinval_acks *a = &k->k_acks[server];

		/* A new connection numbers from 1 again. */
		if (a->gen != gen)
			*a = (struct orch_mnt_kinval_acks){ .gen = gen };
		a->heard = ORCH_MAX(a->heard, seq);
		a->dirty = true;
		k->k_any_ack_dirty = true;
		pthread_cond_broadcast(&k->k_wake);
	}
	if (!m && !k->k_connected[server]) {
		/* The first connection: nothing leased from it yet to have missed. */
		k->k_connected[server] = true;
	} else if (!m || m->type == ORCH_SV2CL_REVOKE) {
		kinval_revoke_locked(mnt, server, gen, seq);
	} else if (m->reqid) {
		k->k_own++;
	} else if (m->type == ORCH_SV2CL_INVAL_ATTR) {
		kinval_queue_locked(mnt, KINVAL_ATTR, m->handle, NULL, 0, false, server, gen, seq);
	} else if (m->type == ORCH_SV2CL_INVAL_ENTRY && m->name.len <= ORCH_NAME_MAX) {
		kinval_queue_locked(mnt, KINVAL_ENTRY, m->parent, m->name.s, m->name.len, false,
				    server, gen, seq);
		/* The directory's cached listing goes too (dir.c). */
		kinval_queue_locked(mnt, KINVAL_ATTR, m->parent, NULL, 0, true, server, gen, seq);
	}
	pthread_mutex_unlock(&k->k_lock);
}

/* --- Acks ------------------------------------------------------------------------ */

/*
 * The highest push number of server @s whose kernel calls are all done:
 * below the first one still queued or being called (but for names in a
 * busy directory, "Names" below), or owed or under way as a walk; else the
 * highest heard (pushes that needed no call are done when heard).
 * Items are taken oldest first, and one merged into an earlier item is
 * done with it, so everything below the lowest queued number is done.
 * k_lock held; the thread is between two calls.
 */
static uint64_t kinval_done_locked(struct orch_mnt_kinval *k, unsigned int s)
{
	const struct orch_mnt_kinval_acks *a = &k->k_acks[s];
	uint64_t done = a->heard;

	for (int kind = KINVAL_ATTR; kind <= KINVAL_ENTRY; kind++)
		for (const struct orch_mnt_kinval_item *q = k->k_head[kind - 1]; q; q = q->q_next)
			if (q->q_seq && !q->q_early && q->q_server == s && q->q_gen == a->gen)
				done = ORCH_MIN(done, q->q_seq - 1);
	for (size_t i = 0; i < KINVAL_NAMES; i++) {
		const struct orch_mnt_kinval_item *q = k->k_calling[i];

		if (q && q->q_seq && !q->q_early && q->q_server == s && q->q_gen == a->gen)
			done = ORCH_MIN(done, q->q_seq - 1);
	}
	if (a->revoke_seq)
		done = ORCH_MIN(done, a->revoke_seq - 1);
	if (a->walking_seq)
		done = ORCH_MIN(done, a->walking_seq - 1);
	return done;
}

/*
 * Acknowledges what is done, one frame per server with something new to
 * acknowledge.  k_lock held; dropped while sending.  Whatever changes what
 * is done sets k_any_ack_dirty again: a push heard, a call or walk done.
 */
static void kinval_ack_locked(struct orch_mnt *m)
{
	struct orch_mnt_kinval *k = &m->m_kinval;

	if (!k->k_any_ack_dirty)
		return;
	k->k_any_ack_dirty = false;
	for (unsigned int s = 0; s < ORCH_SERVERS_MAX; s++) {
		struct orch_mnt_kinval_acks *a = &k->k_acks[s];
		uint64_t done, gen;

		if (!a->dirty)
			continue;
		done = kinval_done_locked(k, s);
		/* Still something to ack once the rest is done (flagged again then). */
		a->dirty = done < a->heard;
		if (done <= a->acked)
			continue;
		a->acked = done;
		gen = a->gen;
		k->k_acks_sent++;
		pthread_mutex_unlock(&k->k_lock);
		/* A connection gone since needs no ack: its server counts it done. */
		orch_client_ack(m->m_cl, s, gen, done);
		pthread_mutex_lock(&k->k_lock);
	}
}

/* One notify call; -ENOENT (the kernel holds nothing of it) is success. */
static void kinval_call(struct orch_mnt *m, int kind, uint64_t key, const char *name,
			size_t namelen, bool list)
{
	int rc;

	/* A directory's pages are its cached listing, locked only while filled. */
	if (kind == KINVAL_ATTR)
		rc = fuse_lowlevel_notify_inval_inode(m->m_se, key, list ? 0 : -1, 0);
	else if (m->m_expire_only)
		rc = fuse_lowlevel_notify_expire_entry(m->m_se, key, name, namelen,
						       FUSE_LL_EXPIRE_ONLY);
	else
		rc = fuse_lowlevel_notify_inval_entry(m->m_se, key, name, namelen);
	if (rc && rc != -ENOENT && rc != -ENOTCONN)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "cannot drop the kernel's copy of inode %#llx: %s",
				   (unsigned long long)key, strerror(-rc));
}

static void kinval_send(struct orch_mnt *m, const struct orch_mnt_kinval_item *q)
{
	kinval_call(m, q->q_kind, q->q_key, q->q_name, q->q_namelen, q->q_list);
}

/*
 * A server revoked everything it leased: drops the attributes, and a
 * directory's cached listing, of each of its inodes the kernel knows.
 * Never a file's pages (see the top): the kernel drops those itself when
 * the attributes it fetches next show another size or mtime.
 */
static void kinval_server(struct orch_mnt *m, unsigned int server)
{
	struct orch_mnt_inode_ref *hs = NULL;
	size_t n = 0;

	if (orch_mnt_inode_list_server(&m->m_itab, server, &hs, &n)) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_NOTICE,
				   "kernel invalidations dropped (no memory): server='%s'",
				   orch_client_cfg(m->m_cl)->servers[server].name);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		int rc = fuse_lowlevel_notify_inval_inode(m->m_se, hs[i].handle, hs[i].dir ? 0 : -1,
							  0);

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
/*
 * Milliseconds the machine spent suspended since boot, and what the test
 * hook ORCH_TEST_SUSPEND (fault.def) adds: the number in file @hook.
 */
static uint64_t kinval_suspended_ms(const char *hook)
{
	uint64_t ms = orch_time_suspended_ms();
	char buf[32] = "";
	FILE *f;

	if (hook && (f = fopen(hook, "re"))) {
		if (fgets(buf, sizeof(buf), f))
			ms += strtoull(buf, NULL, 10);
		fclose(f);
	}
	return ms;
}

/*
 * The machine was suspended for @ms: CLOCK_MONOTONIC, which our lease
 * terms count in, and the kernel's cache timeouts stood still, but the
 * servers' clocks did not, so any lease may have run out there, with
 * changes made since that nobody pushed to us.  Everything held goes: the
 * lease cache, and every inode of every server from the kernel.
 */
static void kinval_resumed(struct orch_mnt *m, uint64_t ms)
{
	struct orch_mnt_kinval *k = &m->m_kinval;
	unsigned int n = orch_client_cfg(m->m_cl)->nservers;

	ORCH_NOTICE("resumed after %llu ms suspended: dropping every lease and cached copy",
		    (unsigned long long)ms);
	orch_mnt_lc_suspended(&m->m_lc, orch_time_now_ms());
	pthread_mutex_lock(&k->k_lock);
	k->k_suspends++;
	for (unsigned int s = 0; s < n && s < ORCH_SERVERS_MAX; s++)
		kinval_revoke_locked(m, s, 0, 0);
	pthread_mutex_unlock(&k->k_lock);
}

static void *kinval_watch_main(void *arg)
{
	struct orch_mnt *m = arg;
	const char *hook = orch_fault_env(ORCH_FAULT_SUSPEND);
	uint64_t suspended = kinval_suspended_ms(hook);

	static const struct timespec pause = { .tv_nsec = KINVAL_WATCH_MS * 1000000L };

	while (!atomic_load(&m->m_kinval.k_watch_stop)) {
		uint64_t now;

		if (orch_client_wait_pushes(m->m_cl, KINVAL_WATCH_MS) < 0)
			nanosleep(&pause, NULL);
		now = kinval_suspended_ms(hook);
		if (now >= suspended + KINVAL_SUSPEND_MS)
			kinval_resumed(m, now - suspended);
		suspended = now;
	}
	return NULL;
}

/*
 * Names.  An entry's call takes its directory's lock in the kernel, which
 * a request of this mount in that directory holds until its reply, and
 * that reply may wait for other mounts' acknowledgements, which may wait
 * for replies of theirs that wait for ours: a cycle.  So a request that
 * holds a directory's lock marks it busy (dir_enter, from ops.c) for its
 * whole life, and a name pushed in a busy directory is acknowledged at
 * once (q_early) and called only once the directory is free.  Until then
 * a process of this mount may find the old name in its kernel's cache,
 * in a directory this mount is itself changing: a stale window, the price
 * of no cycle (docs/DESIGN.md, "Acknowledged invalidation").  The kernel takes
 * the lock before the mount sees the request, so a call made just then
 * waits for it: dir_enter marks that call early too, and the other names
 * threads carry on meanwhile.
 */

struct kinval_names_arg {
	struct orch_mnt *m;
	unsigned int slot;
};

/* Their arguments: one mount per process (main.c). */
static struct kinval_names_arg kinval_names_args[KINVAL_NAMES];

static bool kinval_busy(void *arg, uint64_t dir)
{
	return kinval_busy_locked(arg, dir);
}

/*
 * A name the kernel keeps whose server was reset (knames.c), in a
 * directory that is not busy: expired, with no acknowledgement (a reset's
 * pushes are not numbered, and a REVOKE's walk does not wait for it: a
 * stale window as a busy directory's).  k_lock held; dropped for the call.
 */
static bool kinval_doomed_name_locked(struct orch_mnt *m)
{
	struct orch_mnt_kinval *k = &m->m_kinval;
	char name[ORCH_NAME_MAX];
	uint64_t parent;
	size_t namelen;

	if (!orch_mnt_knames_take_doomed(&m->m_knames, kinval_busy, k, &parent, name, &namelen))
		return false;
	pthread_mutex_unlock(&k->k_lock);
	kinval_call(m, KINVAL_ENTRY, parent, name, namelen, false);
	pthread_mutex_lock(&k->k_lock);
	k->k_sent++;
	k->k_sent_names++;
	return true;
}

static void *kinval_names_main(void *arg)
{
	const struct kinval_names_arg *na = arg;
	struct orch_mnt *m = na->m;
	struct orch_mnt_kinval *k = &m->m_kinval;

	pthread_mutex_lock(&k->k_lock);
	while (!k->k_stop) {
		struct orch_mnt_kinval_item *q = kinval_take_locked(k, KINVAL_ENTRY, true);

		if (!q) {
			if (!kinval_doomed_name_locked(m))
				pthread_cond_wait(&k->k_wake, &k->k_lock);
			continue;
		}
		k->k_calling[na->slot] = q;
		pthread_mutex_unlock(&k->k_lock);
		kinval_send(m, q);
		pthread_mutex_lock(&k->k_lock);
		k->k_calling[na->slot] = NULL;
		k->k_sent++;
		k->k_sent_names++;
		if (q->q_seq && !q->q_early) {
			/* The attributes thread sends the acknowledgement. */
			k->k_any_ack_dirty = true;
			pthread_cond_broadcast(&k->k_wake);
		}
		free(q);
	}
	pthread_mutex_unlock(&k->k_lock);
	return NULL;
}

void orch_mnt_kinval_wake(struct orch_mnt *m)
{
	struct orch_mnt_kinval *k = &m->m_kinval;

	if (!k->k_buckets)
		return;
	pthread_mutex_lock(&k->k_lock);
	pthread_cond_broadcast(&k->k_wake);
	pthread_mutex_unlock(&k->k_lock);
}

void orch_mnt_kinval_dir_enter(struct orch_mnt *m, uint64_t dir)
{
	struct orch_mnt_kinval *k = &m->m_kinval;
	size_t i, free_slot = KINVAL_BUSY_MAX;
	bool early = false;

	if (!k->k_buckets)
		return;
	pthread_mutex_lock(&k->k_lock);
	for (i = 0; i < KINVAL_BUSY_MAX; i++) {
		if (k->k_busy[i].n && k->k_busy[i].dir == dir)
			break;
		if (!k->k_busy[i].n && free_slot == KINVAL_BUSY_MAX)
			free_slot = i;
	}
	if (i < KINVAL_BUSY_MAX) {
		k->k_busy[i].n++;
	} else if (free_slot < KINVAL_BUSY_MAX) {
		k->k_busy[free_slot].dir = dir;
		k->k_busy[free_slot].n = 1;
	} else {
		k->k_busy_overflow++;
	}
	/* Names of @dir queued or being called now: their calls wait for us. */
	for (struct orch_mnt_kinval_item *q = k->k_head[KINVAL_ENTRY - 1]; q; q = q->q_next) {
		if (q->q_seq && !q->q_early && (k->k_busy_overflow || q->q_key == dir)) {
			q->q_early = true;
			k->k_early++;
			early = true;
		}
	}
	for (size_t j = 0; j < KINVAL_NAMES; j++) {
		struct orch_mnt_kinval_item *q = k->k_calling[j];

		if (q && q->q_seq && !q->q_early && (k->k_busy_overflow || q->q_key == dir)) {
			q->q_early = true;
			k->k_early++;
			early = true;
		}
	}
	if (early) {
		k->k_any_ack_dirty = true;
		for (unsigned int s = 0; s < ORCH_SERVERS_MAX; s++)
			if (k->k_acks[s].heard > k->k_acks[s].acked)
				k->k_acks[s].dirty = true;
		pthread_cond_broadcast(&k->k_wake);
	}
	pthread_mutex_unlock(&k->k_lock);
}

void orch_mnt_kinval_dir_leave(struct orch_mnt *m, uint64_t dir)
{
	struct orch_mnt_kinval *k = &m->m_kinval;
	bool freed = false;
	size_t i;

	if (!k->k_buckets)
		return;
	pthread_mutex_lock(&k->k_lock);
	for (i = 0; i < KINVAL_BUSY_MAX; i++)
		if (k->k_busy[i].n && k->k_busy[i].dir == dir)
			break;
	if (i < KINVAL_BUSY_MAX)
		freed = --k->k_busy[i].n == 0;
	else if (k->k_busy_overflow)
		freed = --k->k_busy_overflow == 0; /* entered past the table */
	/* Names waiting for @dir may be called now. */
	if (freed)
		pthread_cond_broadcast(&k->k_wake);
	pthread_mutex_unlock(&k->k_lock);
}

/*
 * The attributes thread: attributes, REVOKE walks and acknowledgements.
 * Its calls never wait for a lock a request holds (an attribute
 * invalidation takes none; dropping a directory's cached listing waits
 * only for a listing being filled, which holds its page between the
 * READDIR's reply and its copy, never across a request), so an
 * acknowledgement never waits for a reply.
 */
static void *kinval_attrs_main(void *arg)
{
	struct orch_mnt *m = arg;
	struct orch_mnt_kinval *k = &m->m_kinval;
	unsigned int batch = 0;

	pthread_mutex_lock(&k->k_lock);
	while (!k->k_stop) {
		struct orch_mnt_kinval_item *q;

		if (k->k_any_revoked) {
			k->k_any_revoked = false;
			for (unsigned int s = 0; s < ORCH_SERVERS_MAX; s++) {
				struct orch_mnt_kinval_acks *a = &k->k_acks[s];

				if (!k->k_revoked[s])
					continue;
				k->k_revoked[s] = false;
				a->walking_seq = a->revoke_seq;
				a->revoke_seq = 0;
				pthread_mutex_unlock(&k->k_lock);
				kinval_server(m, s);
				pthread_mutex_lock(&k->k_lock);
				k->k_revokes++; /* walks done */
				if (a->walking_seq) {
					a->walking_seq = 0;
					a->dirty = true;
					k->k_any_ack_dirty = true;
				}
			}
			kinval_ack_locked(m);
			continue;
		}
		q = kinval_take_locked(k, KINVAL_ATTR, false);
		if (!q) {
			if (k->k_any_ack_dirty)
				kinval_ack_locked(m);
			else
				pthread_cond_wait(&k->k_wake, &k->k_lock);
			continue;
		}
		pthread_mutex_unlock(&k->k_lock);
		kinval_send(m, q);
		pthread_mutex_lock(&k->k_lock);
		k->k_sent++;
		if (q->q_seq) {
			k->k_any_ack_dirty = true;
			/* In a burst, every KINVAL_ACK_EVERY calls: the first writers go on. */
			if (!k->k_head[KINVAL_ATTR - 1] || ++batch % KINVAL_ACK_EVERY == 0)
				kinval_ack_locked(m);
		}
		free(q);
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
	error = -pthread_create(&k->k_thread[0], NULL, kinval_attrs_main, m);
	k->k_running[0] = !error;
	for (unsigned int i = 0; !error && i < KINVAL_NAMES; i++) {
		kinval_names_args[i] = (struct kinval_names_arg){ m, i };
		error = -pthread_create(&k->k_thread[1 + i], NULL, kinval_names_main,
					&kinval_names_args[i]);
		k->k_running[1 + i] = !error;
	}
	if (error) {
		orch_mnt_kinval_stop(m);
		return error;
	}
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
	pthread_cond_broadcast(&k->k_wake);
	pthread_mutex_unlock(&k->k_lock);
}

void orch_mnt_kinval_stop(struct orch_mnt *m)
{
	struct orch_mnt_kinval *k = &m->m_kinval;
	struct orch_mnt_kinval_item *q;

	if (!k->k_buckets)
		return;
	orch_mnt_kinval_halt(m);
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(k->k_thread); i++) {
		if (k->k_running[i])
			pthread_join(k->k_thread[i], NULL);
		k->k_running[i] = false;
	}
	pthread_mutex_lock(&k->k_lock);
	while ((q = kinval_take_locked(k, KINVAL_ATTR, false)) ||
	       (q = kinval_take_locked(k, KINVAL_ENTRY, false)))
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
	out->sent_names = k->k_sent_names;
	out->coalesced = k->k_coalesced;
	out->dropped = k->k_dropped;
	out->own = k->k_own;
	out->revokes = k->k_revokes;
	out->queued = k->k_queued;
	out->acks = k->k_acks_sent;
	out->acks_early = k->k_early;
	out->suspends = k->k_suspends;
	pthread_mutex_unlock(&k->k_lock);
}
