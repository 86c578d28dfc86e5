/* Wrap-safe time comparisons, with a clock that starts just before the wrap. */
#include "common/time.h"
#include "unit/test.h"

ORCH_TEST(before_after_plain)
{
	ORCH_CHECK(orch_time_before32(1, 2));
	ORCH_CHECK(!orch_time_before32(2, 1));
	ORCH_CHECK(!orch_time_before32(5, 5));
	ORCH_CHECK(orch_time_after32(2, 1));
}

ORCH_TEST(before_across_wrap)
{
	uint32_t a = 0xfffffc18u; /* 1000 ms before the wrap */
	uint32_t b = a + 2000;    /* 1000 ms after it: numerically smaller */

	ORCH_CHECK(b < a);
	ORCH_CHECK(orch_time_before32(a, b));
	ORCH_CHECK(orch_time_after32(b, a));
	ORCH_CHECK(!orch_time_expired32(b, a));
	ORCH_CHECK(orch_time_expired32(a, b));
}

/*
 * A 50 ms timeout taken one second before the 32-bit millisecond clock wraps
 * stays valid until 50 ms have passed and expires after, on both sides.
 */
ORCH_TEST(clock_starting_before_wrap)
{
	uint32_t now = orch_time_now_ms32();

	orch_time_set_test_offset((uint64_t)(0x100000000ull - 1000 - now));
	now = orch_time_now_ms32();
	ORCH_CHECK(now > 0xfffff000u);
	for (uint32_t step = 0; step < 3000; step += 10) {
		uint32_t t0 = now + step;
		uint32_t deadline = t0 + 50;

		ORCH_CHECK(!orch_time_expired32(deadline, t0));
		ORCH_CHECK(!orch_time_expired32(deadline, t0 + 49));
		ORCH_CHECK(orch_time_expired32(deadline, t0 + 50));
		ORCH_CHECK(orch_time_expired32(deadline, t0 + 1000000));
	}
	orch_time_set_test_offset(0);
}

ORCH_TEST_MAIN()
