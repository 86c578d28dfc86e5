/*
 * Data store: a seeded random op sequence checked against an in-memory model,
 * plus the edges of the contract in store.h (holes, ends, idempotent delete,
 * mkfs refusals, descriptor cache eviction, concurrent sync).
 *
 * ORCH_TEST_SEED=<n> replays one model run.
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "unit/test.h"

/* --- Fixture: a fresh store in a temporary directory ---------------------- */

struct fx {
	char dir[64];
	struct orch_store *st;
};

static int rm_one(const char *path, const struct stat *sb, int flag,
		  struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	(void)ftw;
	return remove(path);
}

static int fx_setup(struct fx *fx, bool made)
{
	int rc;

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/t_store.XXXXXX");
	fx->st = NULL;
	if (!mkdtemp(fx->dir)) {
		perror("mkdtemp");
		return -1;
	}
	if (!made)
		return 0;
	rc = orch_store_mkfs(fx->dir, false);
	if (!rc)
		rc = orch_store_open(fx->dir, &fx->st);
	if (rc)
		fprintf(stderr, "store setup: %s\n", strerror(-rc));
	return rc;
}

static void fx_teardown(struct fx *fx)
{
	orch_store_close(fx->st);
	nftw(fx->dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* A case with a fixture; @made: mkfs and open the store first. */
#define STORE_TEST(name_, made_)                                               \
	static void body_##name_(struct fx *fx);                               \
	ORCH_TEST(name_)                                                       \
	{                                                                      \
		struct fx fx;                                                  \
		if (fx_setup(&fx, (made_))) {                                  \
			orch_test_failed = 1;                                  \
			fx_teardown(&fx);                                      \
			return;                                                \
		}                                                              \
		body_##name_(&fx);                                             \
		fx_teardown(&fx);                                              \
	}                                                                      \
	static void body_##name_(struct fx *fx)

static int reopen(struct fx *fx)
{
	orch_store_close(fx->st);
	fx->st = NULL;
	return orch_store_open(fx->dir, &fx->st);
}

static uint64_t nobjects(struct fx *fx)
{
	uint64_t n = UINT64_MAX;

	if (orch_store_statfs(fx->st, NULL, NULL, NULL, &n))
		return UINT64_MAX;
	return n;
}

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

static int count_open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *de;
	int n = 0;

	if (!d)
		return -1;
	while ((de = readdir(d)))
		if (de->d_name[0] != '.')
			n++;
	closedir(d);
	return n - 1; /* the opendir itself */
}

/* --- Model-based random test ----------------------------------------------- */

#define M_NOBJ 6
#define M_MAX (512 * 1024)   /* largest offset the ops reach */
#define M_OPS 4000
#define M_PHASE 700          /* ops between reopens */

struct mobj {
	uint64_t h;
	bool exists;
	uint64_t size;
	unsigned char *data; /* M_MAX bytes; zero past size */
};

static uint64_t rng_state;

static uint64_t rng(void)
{
	uint64_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return rng_state = x;
}

static uint64_t rng_below(uint64_t n)
{
	return n ? rng() % n : 0;
}

/* Reads [off, off+len) of @o from the store and compares with the model. */
static bool model_read_check(struct orch_store *st, struct mobj *o,
			     uint64_t off, size_t len, unsigned char *buf,
			     int op)
{
	size_t got = 12345, want;
	int rc;

	memset(buf, 0xa5, len + 1);
	rc = orch_store_read(st, o->h, off, buf, len, &got);
	if (rc) {
		fprintf(stderr, "op %d: read h=%llx: %s\n", op,
			(unsigned long long)o->h, strerror(-rc));
		return false;
	}
	want = off < o->size ? (size_t)(o->size - off < len ? o->size - off : len) : 0;
	if (got != want) {
		fprintf(stderr, "op %d: read h=%llx off=%llu len=%zu: got=%zu want=%zu\n",
			op, (unsigned long long)o->h, (unsigned long long)off,
			len, got, want);
		return false;
	}
	if (want && memcmp(buf, o->data + off, want)) {
		fprintf(stderr, "op %d: read h=%llx off=%llu len=%zu: data differs\n",
			op, (unsigned long long)o->h, (unsigned long long)off, len);
		return false;
	}
	for (size_t i = got; i <= len; i++) {
		if (buf[i] != 0xa5) {
			fprintf(stderr, "op %d: read wrote past got at %zu\n", op, i);
			return false;
		}
	}
	return true;
}

static bool model_check_all(struct orch_store *st, struct mobj *objs,
			    unsigned char *buf, int op)
{
	for (int i = 0; i < M_NOBJ; i++)
		if (!model_read_check(st, &objs[i], 0, M_MAX + 4096, buf, op))
			return false;
	return true;
}

static void model_run(struct fx *fx, struct mobj *objs, unsigned char *buf,
		      unsigned char *wbuf)
{
	struct orch_store_stats stats;
	uint64_t created = 0, deleted = 0;

	for (int op = 0; op < M_OPS; op++) {
		struct mobj *o = &objs[rng_below(M_NOBJ)];
		unsigned int kind = (unsigned int)rng_below(100);
		uint64_t off, len, n;

		if (op && op % M_PHASE == 0) {
			ORCH_CHECK(model_check_all(fx->st, objs, buf, op));
			ORCH_CHECK_OK(orch_store_sync(fx->st));
			ORCH_CHECK_OK(reopen(fx));
			ORCH_CHECK(model_check_all(fx->st, objs, buf, op));
			n = 0;
			for (int i = 0; i < M_NOBJ; i++)
				n += objs[i].exists;
			ORCH_CHECK(nobjects(fx) == n);
			created = deleted = 0;
		}
		if (kind < 40) {
			len = 1 + rng_below(rng_below(4) ? 8192 : 65536);
			off = rng_below(M_MAX - len + 1);
			if (rng_below(8) == 0) /* block aligned, like a page cache */
				off &= ~4095ull;
			for (uint64_t i = 0; i < len; i++)
				wbuf[i] = (unsigned char)rng();
			ORCH_CHECK_OK(orch_store_write(fx->st, o->h, off, wbuf, len));
			memcpy(o->data + off, wbuf, len);
			if (!o->exists)
				created++;
			o->exists = true;
			if (off + len > o->size)
				o->size = off + len;
		} else if (kind < 65) {
			off = rng_below(M_MAX + 4096);
			len = 1 + rng_below(32768);
			ORCH_CHECK(model_read_check(fx->st, o, off, len, buf, op));
		} else if (kind < 75) {
			n = rng_below(3) ? rng_below(M_MAX + 1) : rng_below(4096);
			if (rng_below(10) == 0)
				n = 0;
			ORCH_CHECK_OK(orch_store_truncate(fx->st, o->h, n));
			if (n < o->size)
				memset(o->data + n, 0, o->size - n);
			if (n > 0 && !o->exists) {
				o->exists = true;
				created++;
			}
			if (o->exists)
				o->size = n;
		} else if (kind < 85) {
			off = rng_below(M_MAX + 4096);
			len = rng_below(5) ? 1 + rng_below(65536) : UINT64_MAX - off;
			ORCH_CHECK_OK(orch_store_punch(fx->st, o->h, off, len));
			if (off < o->size) {
				n = o->size - off < len ? o->size - off : len;
				memset(o->data + off, 0, n);
			}
		} else if (kind < 90) {
			ORCH_CHECK_OK(orch_store_delete(fx->st, o->h));
			if (o->exists)
				deleted++;
			o->exists = false;
			memset(o->data, 0, o->size);
			o->size = 0;
		} else if (kind < 92) {
			ORCH_CHECK_OK(orch_store_sync(fx->st));
		} else {
			ORCH_CHECK(model_read_check(fx->st, o, 0, M_MAX + 4096, buf, op));
		}
	}
	ORCH_CHECK(model_check_all(fx->st, objs, buf, M_OPS));
	orch_store_get_stats(fx->st, &stats);
	ORCH_CHECK(stats.objects_created == created);
	ORCH_CHECK(stats.objects_deleted == deleted);
	ORCH_CHECK_OK(reopen(fx));
	ORCH_CHECK(model_check_all(fx->st, objs, buf, M_OPS));
}

STORE_TEST(random_ops_against_model, true)
{
	struct mobj objs[M_NOBJ];
	unsigned char *buf = malloc(M_MAX + 8192), *wbuf = malloc(65536);
	const char *env = getenv("ORCH_TEST_SEED");
	uint64_t seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	bool ok = buf && wbuf;

	rng_state = seed ? seed : 1;
	printf("random_ops_against_model: seed=%llu\n", (unsigned long long)seed);
	for (int i = 0; i < M_NOBJ; i++) {
		/* server 5; two pairs share a directory (same low byte) */
		objs[i].h = (5ull << 48) | (1 + (uint64_t)(i / 2) * 7 + (uint64_t)(i % 2) * 256);
		objs[i].exists = false;
		objs[i].size = 0;
		objs[i].data = calloc(1, M_MAX);
		ok = ok && objs[i].data;
	}
	if (ok)
		model_run(fx, objs, buf, wbuf);
	else
		orch_test_failed = 1;
	if (orch_test_failed)
		fprintf(stderr, "replay with ORCH_TEST_SEED=%llu\n",
			(unsigned long long)seed);
	for (int i = 0; i < M_NOBJ; i++)
		free(objs[i].data);
	free(buf);
	free(wbuf);
}

/* --- Edges ------------------------------------------------------------------ */

STORE_TEST(holes_read_as_zeros, true)
{
	static unsigned char buf[3 << 20];
	size_t got;

	ORCH_CHECK_OK(orch_store_write(fx->st, 42, 2 << 20, "tail", 4));
	memset(buf, 0xff, sizeof(buf));
	ORCH_CHECK_OK(orch_store_read(fx->st, 42, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == (2 << 20) + 4);
	ORCH_CHECK(all_zero(buf, 2 << 20));
	ORCH_CHECK(memcmp(buf + (2 << 20), "tail", 4) == 0);

	/* extending truncate adds a hole; punch frees one and keeps the size */
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 42, 3 << 20));
	ORCH_CHECK_OK(orch_store_read(fx->st, 42, 2 << 20, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 1 << 20);
	ORCH_CHECK(memcmp(buf, "tail", 4) == 0 && all_zero(buf + 4, got - 4));
	ORCH_CHECK_OK(orch_store_punch(fx->st, 42, (2 << 20) + 1, 2));
	ORCH_CHECK_OK(orch_store_read(fx->st, 42, 2 << 20, buf, 4, &got));
	ORCH_CHECK(got == 4 && memcmp(buf, "t\0\0l", 4) == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 42, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 3 << 20);
}

STORE_TEST(read_past_end_and_absent, true)
{
	char buf[16] = "untouched";
	size_t got = 99;

	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0 && strcmp(buf, "untouched") == 0);
	ORCH_CHECK(nobjects(fx) == 0); /* a read creates nothing */
	ORCH_CHECK_OK(orch_store_write(fx->st, 7, 0, "abc", 3));
	got = 99;
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 3, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 1000, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 1, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 2 && memcmp(buf, "bc", 2) == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, UINT64_MAX, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 0, buf, 0, &got));
	ORCH_CHECK(got == 0);
}

STORE_TEST(delete_is_idempotent_and_drops_fd, true)
{
	struct orch_store_stats s;
	char buf[8];
	size_t got;

	ORCH_CHECK_OK(orch_store_delete(fx->st, 9)); /* never existed */
	ORCH_CHECK_OK(orch_store_write(fx->st, 9, 0, "data", 4));
	ORCH_CHECK(nobjects(fx) == 1);
	ORCH_CHECK_OK(orch_store_delete(fx->st, 9));
	ORCH_CHECK_OK(orch_store_delete(fx->st, 9));
	ORCH_CHECK(nobjects(fx) == 0);
	/* a cached fd would still see the unlinked file */
	ORCH_CHECK_OK(orch_store_read(fx->st, 9, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0);
	/* and recreating starts from nothing */
	ORCH_CHECK_OK(orch_store_write(fx->st, 9, 2, "x", 1));
	ORCH_CHECK_OK(orch_store_read(fx->st, 9, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 3 && memcmp(buf, "\0\0x", 3) == 0);
	orch_store_get_stats(fx->st, &s);
	ORCH_CHECK(s.objects_created == 2 && s.objects_deleted == 1);
	ORCH_CHECK_OK(reopen(fx));
	ORCH_CHECK(nobjects(fx) == 1);
	ORCH_CHECK_OK(orch_store_delete(fx->st, 9)); /* not cached after reopen */
	ORCH_CHECK_OK(orch_store_read(fx->st, 9, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0 && nobjects(fx) == 0);
}

STORE_TEST(truncate_absent, true)
{
	unsigned char buf[200];
	size_t got;

	ORCH_CHECK_OK(orch_store_truncate(fx->st, 11, 0));
	ORCH_CHECK(nobjects(fx) == 0);
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 11, 100));
	ORCH_CHECK(nobjects(fx) == 1);
	memset(buf, 1, sizeof(buf));
	ORCH_CHECK_OK(orch_store_read(fx->st, 11, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 100 && all_zero(buf, 100));
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 11, 0));
	ORCH_CHECK(nobjects(fx) == 1); /* exists, empty */
	ORCH_CHECK_OK(orch_store_punch(fx->st, 12, 0, 4096)); /* absent: no-op */
	ORCH_CHECK_OK(orch_store_punch(fx->st, 11, 0, 0));
	ORCH_CHECK(nobjects(fx) == 1);
}

STORE_TEST(limits, true)
{
	const uint64_t max = ORCH_STORE_MAX_SIZE;
	char c;
	size_t got;

	ORCH_CHECK_RC(orch_store_write(fx->st, 3, max, "x", 1), -EFBIG);
	ORCH_CHECK_RC(orch_store_write(fx->st, 3, max - 1, "xy", 2), -EFBIG);
	ORCH_CHECK_RC(orch_store_write(fx->st, 3, UINT64_MAX, "x", 1), -EFBIG);
	ORCH_CHECK_RC(orch_store_truncate(fx->st, 3, max + 1), -EFBIG);
	ORCH_CHECK(nobjects(fx) == 0);
	ORCH_CHECK_OK(orch_store_write(fx->st, 3, 1, "x", 0)); /* creates nothing */
	ORCH_CHECK(nobjects(fx) == 0);
	/* a sparse object far out (inside ext4's 16 TiB limit) */
	ORCH_CHECK_OK(orch_store_write(fx->st, 3, 1ull << 40, "z", 1));
	ORCH_CHECK_OK(orch_store_read(fx->st, 3, 1ull << 40, &c, 1, &got));
	ORCH_CHECK(got == 1 && c == 'z');
	ORCH_CHECK_OK(orch_store_punch(fx->st, 3, 0, UINT64_MAX));
	ORCH_CHECK_OK(orch_store_read(fx->st, 3, 1ull << 40, &c, 1, &got));
	ORCH_CHECK(got == 1 && c == 0);
	ORCH_CHECK_OK(orch_store_delete(fx->st, 3));
}

STORE_TEST(mkfs_and_open_refusals, false)
{
	struct orch_store *other = NULL;
	char path[128];
	size_t got;
	char buf[4];
	int fd;

	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -ENOENT);
	fx->st = NULL;
	ORCH_CHECK_OK(orch_store_mkfs(fx->dir, false));
	ORCH_CHECK_OK(orch_store_mkfs(fx->dir, false)); /* empty: allowed */
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st));
	ORCH_CHECK_RC(orch_store_open(fx->dir, &other), -EBUSY);
	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, true), -EBUSY);
	ORCH_CHECK_OK(orch_store_write(fx->st, 0x100, 0, "abc", 3));
	ORCH_CHECK_OK(orch_store_write(fx->st, 0x201, 0, "def", 3));
	orch_store_close(fx->st);
	fx->st = NULL;

	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, false), -EEXIST);
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st)); /* untouched */
	ORCH_CHECK(nobjects(fx) == 2);
	orch_store_close(fx->st);
	fx->st = NULL;

	/* meta.db next to it must survive a forced mkfs */
	snprintf(path, sizeof(path), "%s/meta.db", fx->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ORCH_CHECK(fd >= 0);
	close(fd);
	ORCH_CHECK_OK(orch_store_mkfs(fx->dir, true));
	ORCH_CHECK(access(path, F_OK) == 0);
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st));
	ORCH_CHECK(nobjects(fx) == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 0x100, 0, buf, 3, &got));
	ORCH_CHECK(got == 0);
	orch_store_close(fx->st);
	fx->st = NULL;

	/* a damaged or foreign format stamp */
	snprintf(path, sizeof(path), "%s/data/format", fx->dir);
	fd = open(path, O_WRONLY | O_TRUNC);
	ORCH_CHECK(fd >= 0);
	ORCH_CHECK(write(fd, "orchard-store 2\n", 16) == 16);
	close(fd);
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -EPROTONOSUPPORT);
	fd = open(path, O_WRONLY | O_TRUNC);
	ORCH_CHECK(fd >= 0);
	ORCH_CHECK(write(fd, "garbage", 7) == 7);
	close(fd);
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -EUCLEAN);
	ORCH_CHECK(unlink(path) == 0);
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -ENOENT);
	fx->st = NULL;
}

/*
 * More objects than the cache holds, touched round robin (every access a
 * miss) and then hot-spot (every access a hit); contents stay right and
 * the descriptor count stays bounded.
 */
STORE_TEST(fd_cache_eviction, true)
{
	enum { N = 700 };
	int base = count_open_fds();
	uint64_t v, got_v;
	size_t got;

	ORCH_CHECK(base > 0);
	for (int round = 0; round < 3; round++) {
		for (uint64_t i = 0; i < N; i++) {
			v = i * 1000 + (uint64_t)round;
			ORCH_CHECK_OK(orch_store_write(fx->st, 0x10000 + i,
						       (uint64_t)round * 8, &v,
						       sizeof(v)));
		}
	}
	ORCH_CHECK(count_open_fds() <= base + 256);
	ORCH_CHECK(nobjects(fx) == N);
	for (uint64_t i = 0; i < N; i++) {
		for (int round = 0; round < 3; round++) {
			ORCH_CHECK_OK(orch_store_read(fx->st, 0x10000 + i,
						      (uint64_t)round * 8,
						      &got_v, sizeof(got_v), &got));
			ORCH_CHECK(got == sizeof(got_v));
			ORCH_CHECK(got_v == i * 1000 + (uint64_t)round);
		}
	}
	for (int k = 0; k < 1000; k++) {
		uint64_t i = (uint64_t)(k % 10);

		v = (uint64_t)k;
		ORCH_CHECK_OK(orch_store_write(fx->st, 0x10000 + i, 100, &v, sizeof(v)));
	}
	/* delete every other one, some cached, some not */
	for (uint64_t i = 0; i < N; i += 2)
		ORCH_CHECK_OK(orch_store_delete(fx->st, 0x10000 + i));
	ORCH_CHECK(nobjects(fx) == N / 2);
	for (uint64_t i = 0; i < N; i++) {
		ORCH_CHECK_OK(orch_store_read(fx->st, 0x10000 + i, 0, &got_v,
					      sizeof(got_v), &got));
		ORCH_CHECK(got == (i % 2 ? sizeof(got_v) : 0));
	}
	ORCH_CHECK(count_open_fds() <= base + 256);
	ORCH_CHECK_OK(reopen(fx));
	ORCH_CHECK(nobjects(fx) == N / 2);
	orch_store_close(fx->st);
	fx->st = NULL;
	ORCH_CHECK(count_open_fds() == base - 2); /* the store's own dir fds */
}

struct sync_arg {
	struct orch_store *st;
	int rounds;
	int rc;
};

static void *sync_thread(void *p)
{
	struct sync_arg *a = p;

	for (int i = 0; i < a->rounds && !a->rc; i++)
		a->rc = orch_store_sync(a->st);
	return NULL;
}

/* The flusher syncs while the loop thread writes, deletes and truncates. */
STORE_TEST(sync_concurrent_with_io, true)
{
	struct sync_arg a = { fx->st, 20, 0 };
	uint64_t total, free_bytes, avail, objs;
	char buf[4096];
	pthread_t t;

	memset(buf, 'q', sizeof(buf));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK(pthread_create(&t, NULL, sync_thread, &a) == 0);
	for (uint64_t i = 0; i < 2000; i++) {
		int rc = orch_store_write(fx->st, 1 + i % 300, (i % 7) * 4096,
					  buf, sizeof(buf));

		if (!rc && i % 5 == 0)
			rc = orch_store_truncate(fx->st, 1 + (i * 13) % 300, 1000);
		if (!rc && i % 11 == 0)
			rc = orch_store_delete(fx->st, 1 + (i * 7) % 300);
		if (rc) {
			pthread_join(t, NULL);
			ORCH_CHECK_OK(rc);
		}
	}
	pthread_join(t, NULL);
	ORCH_CHECK_OK(a.rc);
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK_OK(orch_store_statfs(fx->st, &total, &free_bytes, &avail, &objs));
	ORCH_CHECK(total > 0 && free_bytes <= total && avail <= free_bytes);
	ORCH_CHECK(objs > 0 && objs <= 300);
}

STORE_TEST(stats_count_bytes, true)
{
	struct orch_store_stats s;
	char buf[100];
	size_t got;

	ORCH_CHECK_OK(orch_store_write(fx->st, 5, 10, "0123456789", 10));
	ORCH_CHECK_OK(orch_store_write(fx->st, 5, 0, "ab", 2));
	ORCH_CHECK_OK(orch_store_read(fx->st, 5, 5, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 15);
	orch_store_get_stats(fx->st, &s);
	ORCH_CHECK(s.bytes_written == 12 && s.bytes_read == 15);
	ORCH_CHECK(s.objects_created == 1 && s.objects_deleted == 0);
}

ORCH_TEST_MAIN()
