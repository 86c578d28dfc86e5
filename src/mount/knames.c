/*
 * The names the kernel keeps on a lease (docs/DESIGN.md, "Names the
 * kernel keeps").  In coherent mode a name, present or absent, goes to the
 * kernel with the rest of its lease as its timeout: up to lease_ms, 30 s
 * by default.  A push drops it then (kinval.c).  But when pushes may have
 * been lost (its server's connection went down or came up again, a REVOKE,
 * a push dropped for want of room, a suspend) the mount must drop every
 * such name of that server, and the kernel has no call for "every child
 * of this directory": each name must be named.  So every name handed to
 * the kernel with a lease is noted here, with its server's reset
 * generation as it was before the lease was looked at.
 *
 * A reset bumps the server's generation and moves its names to the doomed
 * list, which kinval.c's names threads empty (expiring each name in the
 * kernel) as they empty their queue, skipping busy directories.  A name
 * noted with an old generation, a lease read before a reset that came
 * while its reply was on the way, is doomed at once: its call waits in the
 * kernel for the directory's lock, which the lookup holds until the
 * dentry is in place, so it comes after it.
 *
 * Bounded: at most KNAMES_MAX names.  A full table first forgets the names
 * whose timeout passed; if still full, the caller gives the kernel a
 * timeout of 0, so nothing is kept that cannot be dropped.  Times are
 * CLOCK_MONOTONIC's, which stands still in a suspend as the kernel's
 * jiffies do.  n_lock is a leaf, taken under kinval's k_lock.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/time.h"
#include "common/util.h"
#include "mount/mount_i.h"

#define KNAMES_MAX (1u << 18)
#define KNAMES_BUCKETS (1u << 16)
#define KNAMES_SLACK_MS 1000   /* the kernel rounds a timeout up to its ticks */

struct kname {
	struct kname *n_next;       /* the bucket's chain, or the doomed list */
	uint64_t n_parent;
	uint64_t n_until_ms;
	uint64_t n_gen;             /* its server's generation when its lease was read */
	uint8_t n_namelen;
	char n_name[];
};

static size_t knames_bucket(uint64_t parent, const char *name, size_t namelen)
{
	uint64_t h = parent * 0x9e3779b97f4a7c15ull;

	for (size_t i = 0; i < namelen; i++)
		h = (h ^ (unsigned char)name[i]) * 0x100000001b3ull;
	return (size_t)(h >> 32) & (KNAMES_BUCKETS - 1);
}

static unsigned int knames_server(uint64_t parent)
{
	unsigned int s = orch_handle_server(parent);

	return s < ORCH_SERVERS_MAX ? s : 0;
}

int orch_mnt_knames_init(struct orch_mnt_knames *kn)
{
	memset(kn, 0, sizeof(*kn));
	kn->n_buckets = calloc(KNAMES_BUCKETS, sizeof(*kn->n_buckets));
	if (!kn->n_buckets)
		return -ENOMEM;
	pthread_mutex_init(&kn->n_lock, NULL);
	return 0;
}

static void knames_free_chain(struct kname *n)
{
	while (n) {
		struct kname *next = n->n_next;

		free(n);
		n = next;
	}
}

void orch_mnt_knames_fini(struct orch_mnt_knames *kn)
{
	if (!kn->n_buckets)
		return;
	for (size_t i = 0; i < KNAMES_BUCKETS; i++)
		knames_free_chain(kn->n_buckets[i]);
	knames_free_chain(kn->n_doomed);
	free(kn->n_buckets);
	kn->n_buckets = NULL;
	pthread_mutex_destroy(&kn->n_lock);
}

uint64_t orch_mnt_knames_gen(struct orch_mnt_knames *kn, uint64_t parent)
{
	return atomic_load(&kn->n_gen[knames_server(parent)]);
}

/* Forgets the names whose timeout passed in the kernel too.  n_lock held. */
static void knames_sweep_locked(struct orch_mnt_knames *kn, uint64_t now)
{
	for (size_t i = 0; i < KNAMES_BUCKETS; i++) {
		struct kname **pp = &kn->n_buckets[i], *n;

		while ((n = *pp)) {
			if (n->n_until_ms + KNAMES_SLACK_MS < now) {
				*pp = n->n_next;
				free(n);
				kn->n_count--;
			} else {
				pp = &n->n_next;
			}
		}
	}
}

static void knames_doom_locked(struct orch_mnt_knames *kn, struct kname *n)
{
	n->n_next = kn->n_doomed;
	kn->n_doomed = n;
	kn->n_ndoomed++;
}

bool orch_mnt_knames_note(struct orch_mnt_knames *kn, uint64_t parent, const char *name,
			  uint64_t until_ms, uint64_t gen, bool *doomed)
{
	size_t namelen = strlen(name);
	struct kname **pp, *n;
	uint64_t now = orch_time_now_ms();
	bool ok = true;

	if (!kn->n_buckets || namelen > ORCH_NAME_MAX)
		return false;
	pthread_mutex_lock(&kn->n_lock);
	for (pp = &kn->n_buckets[knames_bucket(parent, name, namelen)]; (n = *pp);
	     pp = &n->n_next)
		if (n->n_parent == parent && n->n_namelen == namelen &&
		    memcmp(n->n_name, name, namelen) == 0)
			break;
	if (n) {
		*pp = n->n_next; /* taken out, put back below */
		kn->n_count--;
		/* A kernel copy from before the reset it stands for is doomed already. */
		if (n->n_gen == gen)
			n->n_until_ms = ORCH_MAX(n->n_until_ms, until_ms);
		else
			n->n_until_ms = until_ms;
	} else {
		if (kn->n_count + kn->n_ndoomed >= KNAMES_MAX)
			knames_sweep_locked(kn, now);
		if (kn->n_count + kn->n_ndoomed >= KNAMES_MAX ||
		    !(n = malloc(sizeof(*n) + namelen))) {
			kn->n_full++;
			ok = false;
			goto out;
		}
		n->n_parent = parent;
		n->n_until_ms = until_ms;
		n->n_namelen = (uint8_t)namelen;
		memcpy(n->n_name, name, namelen);
	}
	n->n_gen = gen;
	if (gen != atomic_load(&kn->n_gen[knames_server(parent)])) {
		knames_doom_locked(kn, n);
		if (doomed)
			*doomed = true;
	} else {
		pp = &kn->n_buckets[knames_bucket(parent, name, namelen)];
		n->n_next = *pp;
		*pp = n;
		kn->n_count++;
	}
out:
	pthread_mutex_unlock(&kn->n_lock);
	return ok;
}

void orch_mnt_knames_reset(struct orch_mnt_knames *kn, unsigned int server)
{
	if (!kn->n_buckets || server >= ORCH_SERVERS_MAX)
		return;
	pthread_mutex_lock(&kn->n_lock);
	atomic_fetch_add(&kn->n_gen[server], 1);
	for (size_t i = 0; i < KNAMES_BUCKETS; i++) {
		struct kname **pp = &kn->n_buckets[i], *n;

		while ((n = *pp)) {
			if (knames_server(n->n_parent) == server) {
				*pp = n->n_next;
				kn->n_count--;
				knames_doom_locked(kn, n);
			} else {
				pp = &n->n_next;
			}
		}
	}
	pthread_mutex_unlock(&kn->n_lock);
}

bool orch_mnt_knames_take_doomed(struct orch_mnt_knames *kn,
				 bool (*busy)(void *arg, uint64_t dir), void *arg,
				 uint64_t *parent, char *name, size_t *namelen)
{
	struct kname **pp, *n;

	if (!kn->n_buckets)
		return false;
	pthread_mutex_lock(&kn->n_lock);
	for (pp = &kn->n_doomed; (n = *pp); pp = &n->n_next)
		if (!busy(arg, n->n_parent))
			break;
	if (n) {
		*pp = n->n_next;
		kn->n_ndoomed--;
		kn->n_expired++;
	}
	pthread_mutex_unlock(&kn->n_lock);
	if (!n)
		return false;
	*parent = n->n_parent;
	*namelen = n->n_namelen;
	memcpy(name, n->n_name, n->n_namelen);
	free(n);
	return true;
}

void orch_mnt_knames_counts(struct orch_mnt_knames *kn, uint64_t *held, uint64_t *expired,
			    uint64_t *full)
{
	*held = *expired = *full = 0;
	if (!kn->n_buckets)
		return;
	pthread_mutex_lock(&kn->n_lock);
	*held = kn->n_count + kn->n_ndoomed;
	*expired = kn->n_expired;
	*full = kn->n_full;
	pthread_mutex_unlock(&kn->n_lock);
}
