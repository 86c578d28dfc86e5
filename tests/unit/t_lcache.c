/*
 * The mount's lease cache (src/mount/lcache.c): what a reply may fill,
 * given the pushes that came before and after it in its server's stream.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/time.h"
#include "mount/mount_i.h"
#include "unit/test.h"

#define S0 ((uint64_t)0 << 48)
#define DIR (S0 | 2)
#define FILE_A (S0 | 3)

static const struct orch_cred root = { .uid = 0, .gid = 0 };
static const struct orch_cred user = { .uid = 1000, .gid = 1000 };

static void lc_setup(struct orch_mnt_lc *lc)
{
	ORCH_CHECK_OK(orch_mnt_lc_init(lc, 2, 10000, false, false));
	ORCH_CHECK(lc->l_on);
}

static struct orch_attr attr_of(uint64_t h, uint32_t mode)
{
	struct orch_attr a = { .handle = h, .mode = mode, .nlink = 1 };

	return a;
}

static void push_attr(struct orch_mnt_lc *lc, uint64_t h, uint64_t stamp)
{
	struct orch_msg m;

	orch_msg_init(&m, ORCH_SV2CL_INVAL_ATTR);
	m.handle = h;
	orch_mnt_lc_push(lc, orch_handle_server(h), stamp, &m);
}

static void push_entry(struct orch_mnt_lc *lc, uint64_t dir, const char *name, uint64_t stamp)
{
	struct orch_msg m;

	orch_msg_init(&m, ORCH_SV2CL_INVAL_ENTRY);
	m.parent = dir;
	m.name = orch_str_of(name, strlen(name));
	orch_mnt_lc_push(lc, orch_handle_server(dir), stamp, &m);
}

static bool has_mode(struct orch_mnt_lc *lc, uint64_t h, uint32_t mode)
{
	struct orch_attr a;

	return orch_mnt_lc_get_attr(lc, h, &a, NULL) && a.mode == mode;
}

ORCH_TEST(off_without_lease_ms)
{
	struct orch_mnt_lc lc;
	struct orch_attr a = attr_of(FILE_A, 0100644);

	ORCH_CHECK_OK(orch_mnt_lc_init(&lc, 2, 0, false, false));
	ORCH_CHECK(!lc.l_on);
	orch_mnt_lc_put_attr(&lc, &a, 5, orch_time_now_ms());
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_fini(&lc);
}

/* A reply fills; a later push kills; a reply read before the push cannot refill. */
ORCH_TEST(push_orders_replies)
{
	struct orch_mnt_lc lc;
	struct orch_attr a = attr_of(FILE_A, 0100644), b = attr_of(FILE_A, 0100600);
	uint64_t now = orch_time_now_ms();

	lc_setup(&lc);
	orch_mnt_lc_put_attr(&lc, &a, 5, now);
	ORCH_CHECK(has_mode(&lc, FILE_A, 0100644));
	push_attr(&lc, FILE_A, 6);
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_put_attr(&lc, &a, 5, now);      /* read before the push */
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_put_attr(&lc, &b, 7, now);      /* read after it */
	ORCH_CHECK(has_mode(&lc, FILE_A, 0100600));
	orch_mnt_lc_put_attr(&lc, &a, 4, now);      /* older than what we hold */
	ORCH_CHECK(has_mode(&lc, FILE_A, 0100600));
	orch_mnt_lc_put_attr(&lc, &a, 0, now);      /* not leased */
	ORCH_CHECK(has_mode(&lc, FILE_A, 0100600));
	orch_mnt_lc_fini(&lc);
}

/* A push for a key not held leaves a tombstone: the reply it overtook cannot fill. */
ORCH_TEST(push_for_unheld_key)
{
	struct orch_mnt_lc lc;
	struct orch_attr a = attr_of(FILE_A, 0100644);
	uint64_t now = orch_time_now_ms();

	lc_setup(&lc);
	push_attr(&lc, FILE_A, 10);
	orch_mnt_lc_put_attr(&lc, &a, 9, now);
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_put_attr(&lc, &a, 11, now);
	ORCH_CHECK(has_mode(&lc, FILE_A, 0100644));
	orch_mnt_lc_fini(&lc);
}

/* A reset (connection up or down) forgets the server's keys, not the other's. */
ORCH_TEST(reset_forgets_one_server)
{
	struct orch_mnt_lc lc;
	uint64_t other = ((uint64_t)1 << 48) | 7;
	struct orch_attr a = attr_of(FILE_A, 0100644), o = attr_of(other, 0100644);
	uint64_t now = orch_time_now_ms();

	lc_setup(&lc);
	orch_mnt_lc_put_attr(&lc, &a, 5, now);
	orch_mnt_lc_put_attr(&lc, &o, 5, now);
	orch_mnt_lc_push(&lc, 0, 20, NULL);
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	ORCH_CHECK(orch_mnt_lc_get_attr(&lc, other, &o, NULL));
	orch_mnt_lc_put_attr(&lc, &a, 19, now);
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_put_attr(&lc, &a, 21, now);
	ORCH_CHECK(orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_fini(&lc);
}

/* Names: per caller; a non-root caller's go when the directory's attributes change. */
ORCH_TEST(names_and_permissions)
{
	struct orch_mnt_lc lc;
	uint64_t kroot, kuser, child = 1, now = orch_time_now_ms();

	lc_setup(&lc);
	kroot = orch_mnt_lc_credkey(&lc, &root);
	kuser = orch_mnt_lc_credkey(&lc, &user);
	ORCH_CHECK(kroot != kuser);
	orch_mnt_lc_put_name(&lc, DIR, "a", kroot, FILE_A, 5, now);
	orch_mnt_lc_put_name(&lc, DIR, "a", kuser, FILE_A, 6, now);
	orch_mnt_lc_put_name(&lc, DIR, "gone", kuser, 0, 7, now);
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "a", kroot, &child, NULL) && child == FILE_A);
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "gone", kuser, &child, NULL) && child == 0);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "gone", kroot, &child, NULL));
	/* chmod of the directory: the user's lookups may no longer pass. */
	push_attr(&lc, DIR, 8);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "a", kuser, &child, NULL));
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "a", kroot, &child, NULL));
	/* The name itself changed. */
	push_entry(&lc, DIR, "a", 9);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "a", kroot, &child, NULL));
	orch_mnt_lc_fini(&lc);
}

/* A directory listed whole answers for names it lacks, until one of them changes. */
ORCH_TEST(complete_directory)
{
	struct orch_mnt_lc lc;
	struct orch_dirent ents[2] = { { .handle = FILE_A, .namelen = 1, .name = "a" },
				       { .handle = FILE_A + 1, .namelen = 1, .name = "b" } };
	uint64_t kroot, kuser, child = 1, now = orch_time_now_ms();

	lc_setup(&lc);
	kroot = orch_mnt_lc_credkey(&lc, &root);
	kuser = orch_mnt_lc_credkey(&lc, &user);
	ORCH_CHECK(orch_mnt_lc_dir_wanted(&lc, DIR, kroot));
	ORCH_CHECK(!orch_mnt_lc_dir_wanted(&lc, DIR, kuser));
	orch_mnt_lc_put_dir(&lc, DIR, ents, 2, 30, now);
	ORCH_CHECK(!orch_mnt_lc_dir_wanted(&lc, DIR, kroot));
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "b", kroot, &child, NULL) && child == FILE_A + 1);
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "c", kroot, &child, NULL) && child == 0);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "c", kuser, &child, NULL));
	/* Someone made "c": unknown now, the others still known absent. */
	push_entry(&lc, DIR, "c", 31);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "c", kroot, &child, NULL));
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "d", kroot, &child, NULL) && child == 0);
	/* A listing older than a push cannot make the directory whole again. */
	orch_mnt_lc_push(&lc, 0, 40, NULL);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "d", kroot, &child, NULL));
	orch_mnt_lc_put_dir(&lc, DIR, ents, 2, 39, now);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "d", kroot, &child, NULL));
	/* Too big to list: not tried again this term. */
	orch_mnt_lc_dir_too_big(&lc, DIR + 1, now);
	ORCH_CHECK(!orch_mnt_lc_dir_wanted(&lc, DIR + 1, kroot));
	orch_mnt_lc_fini(&lc);
}

/* Everything ends lease_ms after its request was sent. */
ORCH_TEST(lease_term_ends)
{
	struct orch_mnt_lc lc;
	struct orch_attr a = attr_of(FILE_A, 0100644);
	uint64_t now = orch_time_now_ms();

	lc_setup(&lc);
	orch_mnt_lc_put_attr(&lc, &a, 5, now);
	ORCH_CHECK(orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_put_attr(&lc, &a, 6, now - 10001);
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_fini(&lc);
}

/* --- Refresh ahead ------------------------------------------------------------- */

static bool attr_due(struct orch_mnt_lc *lc, uint64_t h)
{
	struct orch_attr a;
	bool due = false;

	return orch_mnt_lc_get_attr(lc, h, &a, &due) && due;
}

static struct orch_mnt_lc_renewal renew_getattr(uint64_t h)
{
	struct orch_mnt_lc_renewal r = { .r_kind = ORCH_MNT_LC_RENEW_GETATTR, .r_key = h };

	return r;
}

static struct orch_mnt_lc_renewal renew_lookup(uint64_t dir, const char *name, uint64_t credkey)
{
	struct orch_mnt_lc_renewal r = { .r_kind = ORCH_MNT_LC_RENEW_LOOKUP, .r_key = dir,
					 .r_credkey = credkey };

	snprintf(r.r_name, sizeof(r.r_name), "%s", name);
	return r;
}

/*
 * A hit is due for renewal in the last part of its key's term: a quarter,
 * at least 1 s, at most half the term.
 */
ORCH_TEST(renewal_due_in_the_last_part_of_the_term)
{
	static const struct { uint32_t lease_ms, margin_ms; } terms[] = {
		{ 30000, 7500 }, { 10000, 2500 }, { 2000, 1000 }, { 1000, 500 },
	};

	for (size_t i = 0; i < sizeof(terms) / sizeof(terms[0]); i++) {
		struct orch_mnt_lc lc;
		uint32_t lease = terms[i].lease_ms, margin = terms[i].margin_ms;
		struct orch_attr a = attr_of(FILE_A, 0100644);
		uint64_t now = orch_time_now_ms();
		bool due = true;

		ORCH_CHECK_OK(orch_mnt_lc_init(&lc, 2, lease, false, false));
		orch_mnt_lc_put_attr(&lc, &a, 5, now);
		ORCH_CHECK(orch_mnt_lc_get_attr(&lc, FILE_A, &a, &due) && !due);
		/* 100 ms before the margin starts, and 100 ms into it. */
		orch_mnt_lc_put_attr(&lc, &a, 6, now - (lease - margin) + 100);
		ORCH_CHECK(orch_mnt_lc_get_attr(&lc, FILE_A, &a, &due) && !due);
		orch_mnt_lc_put_attr(&lc, &a, 7, now - (lease - margin) - 100);
		ORCH_CHECK(attr_due(&lc, FILE_A));
		/* Run out: a miss, nothing to renew. */
		orch_mnt_lc_put_attr(&lc, &a, 8, now - lease - 1);
		ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, &due) && !due);
		orch_mnt_lc_fini(&lc);
	}
}

/* Queued once per term: the mark holds until a reply fills the key again. */
ORCH_TEST(renewal_queued_once_per_term)
{
	struct orch_mnt_lc lc;
	struct orch_attr a = attr_of(FILE_A, 0100644);
	struct orch_mnt_lc_renewal r = renew_getattr(FILE_A);
	uint64_t old = orch_time_now_ms() - 9000;
	struct orch_mnt_lc_counts c;

	lc_setup(&lc);
	orch_mnt_lc_put_attr(&lc, &a, 5, old);
	ORCH_CHECK(attr_due(&lc, FILE_A));
	ORCH_CHECK(!orch_mnt_lc_renew(&lc, &r));          /* not started */
	ORCH_CHECK_OK(orch_mnt_lc_renew_start(&lc, 0, NULL, NULL));
	ORCH_CHECK(orch_mnt_lc_renew(&lc, &r));
	ORCH_CHECK(!attr_due(&lc, FILE_A));
	ORCH_CHECK(has_mode(&lc, FILE_A, 0100644));       /* still answered */
	ORCH_CHECK(!orch_mnt_lc_renew(&lc, &r));
	/* A reply of a new term clears the mark; its last part renews again. */
	orch_mnt_lc_put_attr(&lc, &a, 6, old);
	ORCH_CHECK(attr_due(&lc, FILE_A));
	ORCH_CHECK(orch_mnt_lc_renew(&lc, &r));
	/* A key not held, or not due, is not queued. */
	r = renew_getattr(FILE_A + 1);
	ORCH_CHECK(!orch_mnt_lc_renew(&lc, &r));
	orch_mnt_lc_put_attr(&lc, &(struct orch_attr){ .handle = FILE_A + 1 }, 7,
			     orch_time_now_ms());
	ORCH_CHECK(!orch_mnt_lc_renew(&lc, &r));
	orch_mnt_lc_counts(&lc, &c);
	ORCH_CHECK(c.renewals == 0 && c.renewals_dropped == 0); /* nothing took them */
	orch_mnt_lc_renew_stop(&lc);
	orch_mnt_lc_put_attr(&lc, &a, 8, old);
	r = renew_getattr(FILE_A);
	ORCH_CHECK(!orch_mnt_lc_renew(&lc, &r));          /* stopped */
	orch_mnt_lc_fini(&lc);
}

/* A full queue drops the renewal and leaves the key for its next hit. */
ORCH_TEST(renewal_dropped_when_the_queue_is_full)
{
	struct orch_mnt_lc lc;
	uint64_t old = orch_time_now_ms() - 9000;
	struct orch_mnt_lc_renewal r;
	struct orch_mnt_lc_counts c;
	uint64_t h = FILE_A;

	lc_setup(&lc);
	ORCH_CHECK_OK(orch_mnt_lc_renew_start(&lc, 0, NULL, NULL));
	for (;; h++) {
		struct orch_attr a = attr_of(h, 0100644);

		orch_mnt_lc_put_attr(&lc, &a, 5, old);
		r = renew_getattr(h);
		if (!orch_mnt_lc_renew(&lc, &r))
			break;
		ORCH_CHECK(h - FILE_A < 100000);
	}
	orch_mnt_lc_counts(&lc, &c);
	ORCH_CHECK(h - FILE_A >= 16);
	ORCH_CHECK(c.renewals_dropped == 1);
	ORCH_CHECK(attr_due(&lc, h));
	orch_mnt_lc_fini(&lc);                             /* frees what is queued */
}

/*
 * A LOOKUP renews the name and the child's attributes (its reply carries
 * both); a name known absent because its directory is whole renews the
 * directory.  Only the caller's own name is renewed for that caller.
 */
ORCH_TEST(renewal_of_names)
{
	struct orch_mnt_lc lc;
	struct orch_dirent ents[1] = { { .handle = FILE_A + 1, .namelen = 1, .name = "b" } };
	struct orch_attr a = attr_of(FILE_A, 0100644);
	uint64_t kroot, kuser, child, old = orch_time_now_ms() - 9000;
	struct orch_mnt_lc_renewal r;
	bool due;

	lc_setup(&lc);
	kroot = orch_mnt_lc_credkey(&lc, &root);
	kuser = orch_mnt_lc_credkey(&lc, &user);
	ORCH_CHECK_OK(orch_mnt_lc_renew_start(&lc, 0, NULL, NULL));
	orch_mnt_lc_put_name(&lc, DIR, "a", kuser, FILE_A, 5, old);
	orch_mnt_lc_put_attr(&lc, &a, 5, old);
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "a", kuser, &child, &due) && due);
	r = renew_lookup(DIR, "a", kroot);
	ORCH_CHECK(!orch_mnt_lc_renew(&lc, &r));          /* root holds no "a" */
	r = renew_lookup(DIR, "a", kuser);
	ORCH_CHECK(orch_mnt_lc_renew(&lc, &r));
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "a", kuser, &child, &due) && !due);
	ORCH_CHECK(!attr_due(&lc, FILE_A) && has_mode(&lc, FILE_A, 0100644));
	/* The directory listed whole answers "z" absent; its renewal is a LOOKUP of "z". */
	orch_mnt_lc_put_dir(&lc, DIR + 1, ents, 1, 6, old);
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR + 1, "z", kroot, &child, &due) && !child && due);
	r = renew_lookup(DIR + 1, "z", kroot);
	ORCH_CHECK(orch_mnt_lc_renew(&lc, &r));
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR + 1, "y", kroot, &child, &due) && !due);
	/* Its reply (the name absent) renews the directory: "y" is absent for another term. */
	orch_mnt_lc_put_name(&lc, DIR + 1, "z", kroot, 0, 7, orch_time_now_ms());
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR + 1, "y", kroot, &child, &due) && !child && !due);
	orch_mnt_lc_fini(&lc);
}

/*
 * The renewal threads: a fake server answers each renewal with attributes
 * stamped f->stamp, once the test lets it (f->hold).
 */
struct fake_server {
	struct orch_mnt_lc *lc;
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool hold;
	unsigned int taken, sent;
	uint64_t stamp;
};

static void fake_send(void *arg, const struct orch_mnt_lc_renewal *r)
{
	struct fake_server *f = arg;
	struct orch_attr a = attr_of(r->r_key, 0100600);
	uint64_t stamp;

	pthread_mutex_lock(&f->lock);
	f->taken++;
	pthread_cond_broadcast(&f->cv);
	while (f->hold)
		pthread_cond_wait(&f->cv, &f->lock);
	stamp = f->stamp;
	pthread_mutex_unlock(&f->lock);
	orch_mnt_lc_put_attr(f->lc, &a, stamp, orch_time_now_ms());
	pthread_mutex_lock(&f->lock);
	f->sent++;
	pthread_cond_broadcast(&f->cv);
	pthread_mutex_unlock(&f->lock);
}

/* Waits until *@count (f->taken or f->sent) reaches @n. */
static void fake_wait(struct fake_server *f, const unsigned int *count, unsigned int n)
{
	pthread_mutex_lock(&f->lock);
	while (*count < n)
		pthread_cond_wait(&f->cv, &f->lock);
	pthread_mutex_unlock(&f->lock);
}

ORCH_TEST(renewal_threads)
{
	struct orch_mnt_lc lc;
	struct fake_server f = { .lc = &lc, .lock = PTHREAD_MUTEX_INITIALIZER,
				 .cv = PTHREAD_COND_INITIALIZER, .stamp = 10 };
	struct orch_attr a = attr_of(FILE_A, 0100644);
	struct orch_mnt_lc_renewal r = renew_getattr(FILE_A);
	uint64_t old = orch_time_now_ms() - 9000;
	struct orch_mnt_lc_counts c;

	lc_setup(&lc);
	ORCH_CHECK(orch_mnt_lc_renew_start(&lc, ORCH_MNT_LC_RENEW_THREADS_MAX + 1, fake_send,
					   &f) == -EINVAL);
	ORCH_CHECK_OK(orch_mnt_lc_renew_start(&lc, 3, fake_send, &f));
	/* A renewal's reply fills the key for a new term. */
	orch_mnt_lc_put_attr(&lc, &a, 5, old);
	ORCH_CHECK(orch_mnt_lc_renew(&lc, &r));
	fake_wait(&f, &f.sent, 1);
	ORCH_CHECK(has_mode(&lc, FILE_A, 0100600) && !attr_due(&lc, FILE_A));
	/* A push that comes while the renewal is in flight wins over its reply. */
	orch_mnt_lc_put_attr(&lc, &a, 11, old);
	pthread_mutex_lock(&f.lock);
	f.hold = true;
	f.stamp = 12;
	pthread_mutex_unlock(&f.lock);
	ORCH_CHECK(orch_mnt_lc_renew(&lc, &r));
	fake_wait(&f, &f.taken, 2);
	push_attr(&lc, FILE_A, 13);
	pthread_mutex_lock(&f.lock);
	f.hold = false;
	pthread_cond_broadcast(&f.cv);
	pthread_mutex_unlock(&f.lock);
	fake_wait(&f, &f.sent, 2);
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_counts(&lc, &c);
	ORCH_CHECK(c.renewals == 2 && c.renewals_dropped == 0);
	/* Stopped (twice is fine): nothing more is queued. */
	orch_mnt_lc_renew_stop(&lc);
	orch_mnt_lc_renew_stop(&lc);
	orch_mnt_lc_put_attr(&lc, &a, 14, old);
	ORCH_CHECK(attr_due(&lc, FILE_A) && !orch_mnt_lc_renew(&lc, &r));
	orch_mnt_lc_fini(&lc);
	pthread_cond_destroy(&f.cv);
	pthread_mutex_destroy(&f.lock);
}

ORCH_TEST_MAIN()

/*
 * A suspend (kinval.c sees CLOCK_BOOTTIME run ahead of CLOCK_MONOTONIC):
 * every key of every server goes, and a reply to a request sent before
 * the resume is not kept, however new its stamp; one sent after is.
 */
ORCH_TEST(suspend_forgets_everything)
{
	struct orch_mnt_lc lc;
	uint64_t other = ((uint64_t)1 << 48) | 7;
	struct orch_attr a = attr_of(FILE_A, 0100644), o = attr_of(other, 0100644);
	uint64_t before = orch_time_now_ms();

	lc_setup(&lc);
	orch_mnt_lc_put_attr(&lc, &a, 5, before);
	orch_mnt_lc_put_attr(&lc, &o, 5, before);
	ORCH_CHECK(orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_suspended(&lc, before + 1);
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, other, &o, NULL));
	orch_mnt_lc_put_attr(&lc, &a, 50, before);       /* sent before the resume */
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_put_attr(&lc, &a, 51, before + 1);   /* sent after it */
	ORCH_CHECK(orch_mnt_lc_get_attr(&lc, FILE_A, &a, NULL));
	orch_mnt_lc_fini(&lc);
}

/* --- Vouches: what a replica group leased is used only while it vouches --------------- */

#define S1 ((uint64_t)1 << 48)

static int vouch_server0_only(void *arg, unsigned int server)
{
	(void)arg;
	return server == 0 ? 0 : -ETIMEDOUT;
}

ORCH_TEST(groups_leases_are_used_only_while_vouched_for)
{
	struct orch_mnt_lc lc;
	struct orch_mnt_lc_counts c;
	struct orch_attr a = attr_of(FILE_A, 0100644), b = attr_of(S1 | 3, 0100600);
	uint64_t until, t0 = orch_time_now_ms();

	ORCH_CHECK_OK(orch_mnt_lc_init(&lc, 2, 30000, false, true));
	orch_mnt_lc_put_attr(&lc, &a, 5, t0);
	orch_mnt_lc_put_attr(&lc, &b, 5, t0);
	/* Held, but no group vouched yet. */
	ORCH_CHECK(!has_mode(&lc, FILE_A, 0100644));
	ORCH_CHECK(orch_mnt_lc_attr_until(&lc, FILE_A) == 0);
	ORCH_CHECK_OK(orch_mnt_lc_vouch_start(&lc, vouch_server0_only, NULL));
	do {
		orch_mnt_lc_counts(&lc, &c);
	} while (c.vouches == 0 || c.vouches_failed == 0);
	orch_mnt_lc_vouch_stop(&lc);
	/* Server 0 vouched: used, until at most a vouch's term from now. */
	ORCH_CHECK(has_mode(&lc, FILE_A, 0100644));
	until = orch_mnt_lc_attr_until(&lc, FILE_A);
	ORCH_CHECK(until > t0 && until <= orch_time_now_ms() + ORCH_VOUCH_TERM_MS);
	/* Server 1 never answered: its lease is not used. */
	ORCH_CHECK(!has_mode(&lc, S1 | 3, 0100600));
	/* The vouch's term passes with no other (the lease's own is 30 s). */
	orch_time_set_test_offset(ORCH_VOUCH_TERM_MS + 1);
	ORCH_CHECK(!has_mode(&lc, FILE_A, 0100644));
	orch_time_set_test_offset(0);
	orch_mnt_lc_fini(&lc);
}

ORCH_TEST(servers_of_their_own_need_no_vouch)
{
	struct orch_mnt_lc lc;
	struct orch_attr a = attr_of(FILE_A, 0100644);

	lc_setup(&lc);
	ORCH_CHECK_OK(orch_mnt_lc_vouch_start(&lc, vouch_server0_only, NULL));
	ORCH_CHECK(lc.l_vouch_nthreads == 0);
	orch_mnt_lc_put_attr(&lc, &a, 5, orch_time_now_ms());
	ORCH_CHECK(has_mode(&lc, FILE_A, 0100644));
	/* Its own term (10 s here), not a vouch's. */
	ORCH_CHECK(orch_mnt_lc_attr_until(&lc, FILE_A) > orch_time_now_ms() + ORCH_VOUCH_TERM_MS);
	orch_mnt_lc_fini(&lc);
}
