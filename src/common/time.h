/*
 * Clocks and wrap-safe comparisons.  Every expiry check in Orchard compares
 * by signed difference, as the kernel's time_before() does, so a counter that
 * wraps (32-bit milliseconds wrap every 49.7 days) never makes an old entry
 * look fresh.  Any thread.
 */
#ifndef ORCH_COMMON_TIME_H
#define ORCH_COMMON_TIME_H

#include <stdbool.h>
#include <stdint.h>

/* Monotonic milliseconds (CLOCK_MONOTONIC), plus the test offset below. */
uint64_t orch_time_now_ms(void);

/* 32-bit monotonic milliseconds: wraps; compare only with the helpers. */
static inline uint32_t orch_time_now_ms32(void)
{
	return (uint32_t)orch_time_now_ms();
}

/*
 * Milliseconds this machine spent suspended since boot (CLOCK_BOOTTIME
 * less CLOCK_MONOTONIC): CLOCK_MONOTONIC and the kernel's own cache
 * timeouts stand still in a suspend, a server's lease terms do not.
 */
uint64_t orch_time_suspended_ms(void);

/* Wall-clock nanoseconds since the epoch (CLOCK_REALTIME), for inode times. */
int64_t orch_time_real_ns(void);

/* True if @a is before @b on a wrapping 32-bit clock. */
static inline bool orch_time_before32(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b) < 0;
}

static inline bool orch_time_after32(uint32_t a, uint32_t b)
{
	return orch_time_before32(b, a);
}

/* True if a deadline taken from orch_time_now_ms32() has passed at @now. */
static inline bool orch_time_expired32(uint32_t deadline, uint32_t now)
{
	return !orch_time_before32(now, deadline);
}

/*
 * Tests only: shift the monotonic clock by @offset_ms (e.g. so that the
 * 32-bit value wraps one second from now).
 */
void orch_time_set_test_offset(uint64_t offset_ms);

#endif
