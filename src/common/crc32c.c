/*
 * CRC-32C: the reflected polynomial 0x82f63b78, initial and final value
 * inverted.  The hardware path feeds 8 bytes per crc32 instruction; the
 * table path (slicing by 1) is for CPUs without SSE4.2 and for checking.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "common/crc32c.h"

static uint32_t crc32c_table[256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;
static bool crc32c_hw;

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
		crc32c_table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	crc32c_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc32c_sw(uint32_t c, const uint8_t *p, size_t len)
{
	while (len--)
		c = crc32c_table[(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t c, const uint8_t *p, size_t len)
{
	uint64_t c64 = c;

	while (len && ((uintptr_t)p & 7)) {
		c = __builtin_ia32_crc32qi(c, *p++);
		len--;
	}
	c64 = c;
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t v;

		memcpy(&v, p, 8);
		c64 = __builtin_ia32_crc32di(c64, v);
	}
	c = (uint32_t)c64;
	while (len--)
		c = __builtin_ia32_crc32qi(c, *p++);
	return c;
}
#endif

uint32_t orch_crc32c(uint32_t crc, const void *buf, size_t len)
{
	uint32_t c = ~crc;

	pthread_once(&crc32c_once, crc32c_init);
#if defined(__x86_64__)
	if (crc32c_hw)
		return ~crc32c_sse42(c, buf, len);
#endif
	return ~crc32c_sw(c, buf, len);
}

/* For the unit test: the table path, whatever the CPU. */
uint32_t orch_crc32c_sw(uint32_t crc, const void *buf, size_t len);
uint32_t orch_crc32c_sw(uint32_t crc, const void *buf, size_t len)
{
	pthread_once(&crc32c_once, crc32c_init);
	return ~crc32c_sw(~crc, buf, len);
}
