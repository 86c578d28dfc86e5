/* Clocks.  See time.h. */
#include "common/time.h"

#include <stdatomic.h>
#include <time.h>

static _Atomic uint64_t time_test_offset;

uint64_t orch_time_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000 +
	       atomic_load(&time_test_offset);
}

uint64_t orch_time_suspended_ms(void)
{
	struct timespec boot, mono;

	clock_gettime(CLOCK_BOOTTIME, &boot);
	clock_gettime(CLOCK_MONOTONIC, &mono);
	return (uint64_t)((boot.tv_sec - mono.tv_sec) * 1000 +
			  (boot.tv_nsec - mono.tv_nsec) / 1000000);
}

int64_t orch_time_real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void orch_time_set_test_offset(uint64_t offset_ms)
{
	atomic_store(&time_test_offset, offset_ms);
}
