/*
 * CRC-32C: the reflected polynomial 0x82f63b78, initial and final value
 * inverted.  The hardware path feeds 8 bytes per crc32 instruction; the
 * table path (slicing by 1) is for CPUs without SSE4.2 and for checking.
 *
 * One crc32 instruction takes 3 cycles but a new one can start every
 * cycle, so a single chain of them runs at a third of the unit's speed.
 * Buffers of a block or more are cut into three streams of CRC32C_STRIDE
 * bytes, each with its own chain, and the three values are joined with
 * the linearity of CRCs: the register after A then B is the register after
 * A moved past len(B) zero bytes, xor the register after B alone (from 0).
 * Moving past STRIDE zero bytes is a linear map of the register, kept as
 * four byte tables (Mark Adler's crc32c.c, zlib's crc32_combine).  About
 * 2.5x the single chain on 4 KiB blocks, which every store write and read
 * checksums.
 */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#include "common/crc32c.h"

/* Bytes per stream: three of them cover 4080 bytes of a 4096-byte block. */
#define CRC32C_STRIDE 1360u

static uint32_t crc32c_table[256];
/* The register moved past CRC32C_STRIDE zero bytes, a byte of it at a time. */
static uint32_t crc32c_skip[4][256];
static pthread_once_t crc32c_once = PTHREAD_ONCE_INIT;
static bool crc32c_hw;

/* Fills crc32c_skip from crc32c_table: the map is linear, so the images of
 * the 32 one-bit registers give every entry. */
static void crc32c_skip_init(void)
{
	uint32_t basis[32];

	for (int b = 0; b < 32; b++) {
		uint32_t c = 1u << b;

		for (uint32_t n = 0; n < CRC32C_STRIDE; n++)
			c = crc32c_table[c & 0xff] ^ (c >> 8);
		basis[b] = c;
	}
	for (int k = 0; k < 4; k++) {
		for (uint32_t v = 0; v < 256; v++) {
			uint32_t x = 0;

			for (int j = 0; j < 8; j++)
				if (v >> j & 1)
					x ^= basis[8 * k + j];
			crc32c_skip[k][v] = x;
		}
	}
}

static uint32_t crc32c_skip_stride(uint32_t c)
{
	return crc32c_skip[0][c & 0xff] ^ crc32c_skip[1][(c >> 8) & 0xff] ^
	       crc32c_skip[2][(c >> 16) & 0xff] ^ crc32c_skip[3][c >> 24];
}

static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
		crc32c_table[i] = c;
	}
	crc32c_skip_init();
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
	/* Three chains at once, joined at the end of each 3 * STRIDE bytes. */
	while (len >= 3 * CRC32C_STRIDE) {
		uint64_t c0 = c, c1 = 0, c2 = 0;
		const uint8_t *end = p + CRC32C_STRIDE;

		do {
			uint64_t v0, v1, v2;

			memcpy(&v0, p, 8);
			memcpy(&v1, p + CRC32C_STRIDE, 8);
			memcpy(&v2, p + 2 * CRC32C_STRIDE, 8);
			c0 = __builtin_ia32_crc32di(c0, v0);
			c1 = __builtin_ia32_crc32di(c1, v1);
			c2 = __builtin_ia32_crc32di(c2, v2);
			p += 8;
		} while (p < end);
		c = crc32c_skip_stride((uint32_t)c0) ^ (uint32_t)c1;
		c = crc32c_skip_stride(c) ^ (uint32_t)c2;
		p += 2 * CRC32C_STRIDE;
		len -= 3 * CRC32C_STRIDE;
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
