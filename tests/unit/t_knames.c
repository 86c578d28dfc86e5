/*
 * The names the kernel keeps on a lease (src/mount/knames.c): a reset of a
 * server dooms its names and only its, a name whose lease was read before
 * a reset is doomed at once, a busy directory's names wait, and a full
 * record refuses rather than forgets.
 */
#include <string.h>

#include "common/time.h"
#include "mount/mount_i.h"
#include "unit/test.h"

#define S0_DIR (((uint64_t)0 << 48) | 2)
#define S1_DIR (((uint64_t)1 << 48) | 2)

static bool never_busy(void *arg, uint64_t dir)
{
	(void)arg;
	(void)dir;
	return false;
}

static bool busy_is(void *arg, uint64_t dir)
{
	return dir == *(const uint64_t *)arg;
}

/* The doomed names, as "dir:name" strings joined by spaces, into @out. */
static size_t take_all(struct orch_mnt_knames *kn, bool (*busy)(void *, uint64_t), void *arg,
		       char *out, size_t size)
{
	char name[ORCH_NAME_MAX];
	uint64_t parent;
	size_t namelen, n = 0, pos = 0;

	out[0] = '\0';
	while (orch_mnt_knames_take_doomed(kn, busy, arg, &parent, name, &namelen)) {
		pos += (size_t)snprintf(out + pos, size - pos, "%s%llx:%.*s", n ? " " : "",
					(unsigned long long)(parent & 0xffff), (int)namelen, name);
		n++;
	}
	return n;
}

ORCH_TEST(a_reset_dooms_its_servers_names_only)
{
	struct orch_mnt_knames kn;
	uint64_t until = orch_time_now_ms() + 30000, held, expired, full;
	char got[256];

	ORCH_CHECK_OK(orch_mnt_knames_init(&kn));
	ORCH_CHECK(orch_mnt_knames_note(&kn, S0_DIR, "a", until, orch_mnt_knames_gen(&kn, S0_DIR), NULL));
	ORCH_CHECK(orch_mnt_knames_note(&kn, S0_DIR, "b", until, orch_mnt_knames_gen(&kn, S0_DIR), NULL));
	ORCH_CHECK(orch_mnt_knames_note(&kn, S1_DIR, "c", until, orch_mnt_knames_gen(&kn, S1_DIR), NULL));
	/* Noted again: still one record. */
	ORCH_CHECK(orch_mnt_knames_note(&kn, S0_DIR, "a", until, orch_mnt_knames_gen(&kn, S0_DIR), NULL));
	orch_mnt_knames_counts(&kn, &held, &expired, &full);
	ORCH_CHECK(held == 3 && expired == 0 && full == 0);
	ORCH_CHECK(take_all(&kn, never_busy, NULL, got, sizeof(got)) == 0);
	orch_mnt_knames_reset(&kn, 0);
	ORCH_CHECK(take_all(&kn, never_busy, NULL, got, sizeof(got)) == 2);
	ORCH_CHECK(strstr(got, "2:a") && strstr(got, "2:b") && !strstr(got, ":c"));
	orch_mnt_knames_counts(&kn, &held, &expired, &full);
	ORCH_CHECK(held == 1 && expired == 2);
	orch_mnt_knames_fini(&kn);
}

/*
 * The lease was read before a reset, the name noted after it: its answer
 * is on its way to the kernel with a lease that may have missed a push.
 */
ORCH_TEST(a_name_read_before_a_reset_is_doomed_at_once)
{
	struct orch_mnt_knames kn;
	uint64_t until = orch_time_now_ms() + 30000, gen;
	bool doomed = false;
	char got[256];

	ORCH_CHECK_OK(orch_mnt_knames_init(&kn));
	gen = orch_mnt_knames_gen(&kn, S0_DIR);
	orch_mnt_knames_reset(&kn, 0);
	ORCH_CHECK(orch_mnt_knames_note(&kn, S0_DIR, "late", until, gen, &doomed) && doomed);
	ORCH_CHECK(take_all(&kn, never_busy, NULL, got, sizeof(got)) == 1);
	ORCH_CHECK(strcmp(got, "2:late") == 0);
	/* Read after the reset: kept. */
	ORCH_CHECK(orch_mnt_knames_note(&kn, S0_DIR, "late", until,
					orch_mnt_knames_gen(&kn, S0_DIR), NULL));
	ORCH_CHECK(take_all(&kn, never_busy, NULL, got, sizeof(got)) == 0);
	orch_mnt_knames_fini(&kn);
}

ORCH_TEST(busy_directories_wait)
{
	struct orch_mnt_knames kn;
	uint64_t until = orch_time_now_ms() + 30000, busy = S0_DIR;
	uint64_t other = ((uint64_t)0 << 48) | 9;
	char got[256];

	ORCH_CHECK_OK(orch_mnt_knames_init(&kn));
	ORCH_CHECK(orch_mnt_knames_note(&kn, S0_DIR, "x", until, orch_mnt_knames_gen(&kn, S0_DIR), NULL));
	ORCH_CHECK(orch_mnt_knames_note(&kn, other, "y", until, orch_mnt_knames_gen(&kn, other), NULL));
	orch_mnt_knames_reset(&kn, 0);
	ORCH_CHECK(take_all(&kn, busy_is, &busy, got, sizeof(got)) == 1);
	ORCH_CHECK(strcmp(got, "9:y") == 0);
	ORCH_CHECK(take_all(&kn, never_busy, NULL, got, sizeof(got)) == 1);
	ORCH_CHECK(strcmp(got, "2:x") == 0);
	orch_mnt_knames_fini(&kn);
}

/* 2^18 names: the next is refused, unless some ran out in the kernel too. */
ORCH_TEST(full_refuses_until_names_run_out)
{
	struct orch_mnt_knames kn;
	uint64_t now = orch_time_now_ms(), gen, held, expired, full;
	char name[32];
	const unsigned int max = 1u << 18;

	ORCH_CHECK_OK(orch_mnt_knames_init(&kn));
	gen = orch_mnt_knames_gen(&kn, S0_DIR);
	for (unsigned int i = 0; i < max; i++) {
		snprintf(name, sizeof(name), "n%u", i);
		/* The first half ran out long ago. */
		ORCH_CHECK(orch_mnt_knames_note(&kn, S0_DIR, name,
						i < max / 2 ? 1 : now + 30000, gen, NULL));
	}
	ORCH_CHECK(orch_mnt_knames_note(&kn, S0_DIR, "one more", now + 30000, gen, NULL));
	orch_mnt_knames_counts(&kn, &held, &expired, &full);
	ORCH_CHECK(held == max / 2 + 1 && full == 0);
	for (unsigned int i = 0; i < max / 2; i++) {
		snprintf(name, sizeof(name), "m%u", i);
		ORCH_CHECK(orch_mnt_knames_note(&kn, S0_DIR, name, now + 30000, gen, NULL) ==
			   (i < max / 2 - 1));
	}
	orch_mnt_knames_counts(&kn, &held, &expired, &full);
	ORCH_CHECK(held == max && full == 1);
	orch_mnt_knames_fini(&kn);
}

ORCH_TEST_MAIN()
