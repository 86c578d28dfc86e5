/*
 * Minimal unit-test harness.  A test binary defines cases with ORCH_TEST and
 * runs them from main() with ORCH_TEST_MAIN().  Exit 0 = pass, 77 = skip,
 * 1 = fail.  Assertions print file:line, the expression and, for -errno
 * results, strerror.
 *
 *   ORCH_TEST(codec_roundtrip) { ORCH_CHECK(x == 1); ORCH_CHECK_OK(f()); }
 *   ORCH_TEST_MAIN()
 */
#ifndef ORCH_TESTS_UNIT_TEST_H
#define ORCH_TESTS_UNIT_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct orch_test_case {
	const char *name;
	void (*fn)(void);
	struct orch_test_case *next;
};

extern struct orch_test_case *orch_test_list;
extern int orch_test_failed;

#define ORCH_TEST(name_)                                                       \
	static void test_##name_(void);                                        \
	static struct orch_test_case tcase_##name_ = { #name_, test_##name_,   \
						       NULL };                 \
	__attribute__((constructor)) static void treg_##name_(void)            \
	{                                                                      \
		struct orch_test_case **p = &orch_test_list;                   \
		while (*p)                                                     \
			p = &(*p)->next;                                       \
		*p = &tcase_##name_;                                           \
	}                                                                      \
	static void test_##name_(void)

/* Fails the current case and returns from it. */
#define ORCH_CHECK(e)                                                          \
	do {                                                                   \
		if (!(e)) {                                                    \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #e);                                 \
			orch_test_failed = 1;                                  \
			return;                                                \
		}                                                              \
	} while (0)

/* @e returns 0 or -errno; fails with strerror. */
#define ORCH_CHECK_OK(e)                                                       \
	do {                                                                   \
		int rc_ = (e);                                                 \
		if (rc_ != 0) {                                                \
			fprintf(stderr, "%s:%d: %s: %s (%d)\n", __FILE__,      \
				__LINE__, #e, strerror(-rc_), rc_);            \
			orch_test_failed = 1;                                  \
			return;                                                \
		}                                                              \
	} while (0)

/* @e must return exactly @want (e.g. -ENOENT). */
#define ORCH_CHECK_RC(e, want)                                                 \
	do {                                                                   \
		int rc_ = (e), want_ = (want);                                 \
		if (rc_ != want_) {                                            \
			fprintf(stderr, "%s:%d: %s: got %d (%s), want %d (%s)\n", \
				__FILE__, __LINE__, #e, rc_, strerror(-rc_),   \
				want_, strerror(-want_));                      \
			orch_test_failed = 1;                                  \
			return;                                                \
		}                                                              \
	} while (0)

/*
 * Runs every case, or those whose name contains argv[1], but none whose
 * name contains a word of $ORCH_TEST_EXCLUDE (comma separated: the slow
 * single-threaded campaigns that a sanitizer run may leave out).  A case
 * that fails does not stop the others.
 */
static inline int orch_test_excluded(const char *name)
{
	const char *ex = getenv("ORCH_TEST_EXCLUDE");

	while (ex && *ex) {
		size_t n = strcspn(ex, ",");
		char word[128];

		if (n && n < sizeof(word)) {
			memcpy(word, ex, n);
			word[n] = '\0';
			if (strstr(name, word))
				return 1;
		}
		ex += n + (ex[n] == ',');
	}
	return 0;
}

/* Runs @t; with $ORCH_TEST_TIMES set, says how long it took (to stderr). */
static inline void orch_test_timed(const struct orch_test_case *t)
{
	struct timespec a, b;

	if (!getenv("ORCH_TEST_TIMES")) {
		t->fn();
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	t->fn();
	clock_gettime(CLOCK_MONOTONIC, &b);
	fprintf(stderr, "time %s: %.3f s\n", t->name,
		(double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9);
}

#define ORCH_TEST_MAIN()                                                       \
	struct orch_test_case *orch_test_list;                                 \
	int orch_test_failed;                                                  \
	int main(int argc, char **argv)                                        \
	{                                                                      \
		int failures = 0, run = 0;                                     \
		for (struct orch_test_case *t = orch_test_list; t; t = t->next) { \
			if ((argc > 1 && !strstr(t->name, argv[1])) ||         \
			    orch_test_excluded(t->name))                       \
				continue;                                      \
			orch_test_failed = 0;                                  \
			orch_test_timed(t);                                    \
			run++;                                                 \
			if (orch_test_failed) {                                \
				failures++;                                    \
				fprintf(stderr, "FAIL %s\n", t->name);         \
			}                                                      \
		}                                                              \
		printf("%s: %d passed, %d failed\n", argv[0], run - failures, failures); \
		return failures ? 1 : 0;                                       \
	}

#endif
