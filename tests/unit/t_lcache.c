/*
 * The mount's lease cache (src/mount/lcache.c): what a reply may fill,
 * given the pushes that came before and after it in its server's stream.
 */
#include <errno.h>
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
	ORCH_CHECK_OK(orch_mnt_lc_init(lc, 2, 10000, false));
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

	return orch_mnt_lc_get_attr(lc, h, &a) && a.mode == mode;
}

ORCH_TEST(off_without_lease_ms)
{
	struct orch_mnt_lc lc;
	struct orch_attr a = attr_of(FILE_A, 0100644);

	ORCH_CHECK_OK(orch_mnt_lc_init(&lc, 2, 0, false));
	ORCH_CHECK(!lc.l_on);
	orch_mnt_lc_put_attr(&lc, &a, 5, orch_time_now_ms());
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a));
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
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a));
	orch_mnt_lc_put_attr(&lc, &a, 5, now);      /* read before the push */
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a));
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
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a));
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
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a));
	ORCH_CHECK(orch_mnt_lc_get_attr(&lc, other, &o));
	orch_mnt_lc_put_attr(&lc, &a, 19, now);
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a));
	orch_mnt_lc_put_attr(&lc, &a, 21, now);
	ORCH_CHECK(orch_mnt_lc_get_attr(&lc, FILE_A, &a));
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
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "a", kroot, &child) && child == FILE_A);
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "gone", kuser, &child) && child == 0);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "gone", kroot, &child));
	/* chmod of the directory: the user's lookups may no longer pass. */
	push_attr(&lc, DIR, 8);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "a", kuser, &child));
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "a", kroot, &child));
	/* The name itself changed. */
	push_entry(&lc, DIR, "a", 9);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "a", kroot, &child));
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
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "b", kroot, &child) && child == FILE_A + 1);
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "c", kroot, &child) && child == 0);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "c", kuser, &child));
	/* Someone made "c": unknown now, the others still known absent. */
	push_entry(&lc, DIR, "c", 31);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "c", kroot, &child));
	ORCH_CHECK(orch_mnt_lc_get_name(&lc, DIR, "d", kroot, &child) && child == 0);
	/* A listing older than a push cannot make the directory whole again. */
	orch_mnt_lc_push(&lc, 0, 40, NULL);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "d", kroot, &child));
	orch_mnt_lc_put_dir(&lc, DIR, ents, 2, 39, now);
	ORCH_CHECK(!orch_mnt_lc_get_name(&lc, DIR, "d", kroot, &child));
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
	ORCH_CHECK(orch_mnt_lc_get_attr(&lc, FILE_A, &a));
	orch_mnt_lc_put_attr(&lc, &a, 6, now - 10001);
	ORCH_CHECK(!orch_mnt_lc_get_attr(&lc, FILE_A, &a));
	orch_mnt_lc_fini(&lc);
}

ORCH_TEST_MAIN()
