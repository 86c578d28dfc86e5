/* CRC-32C: known values, and the hardware path (three interleaved streams
 * on long buffers) against the table, at every length and alignment that
 * crosses the stream boundaries. */
#include <stdint.h>
#include <stdlib.h>

#include "common/crc32c.h"
#include "unit/test.h"

uint32_t orch_crc32c_sw(uint32_t crc, const void *buf, size_t len);

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (uint8_t)x;
	}
}

ORCH_TEST(known_values)
{
	static const uint8_t zeros[32], ones[32] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
	};

	ORCH_CHECK(orch_crc32c(0, "123456789", 9) == 0xe3069283u);
	/* RFC 3720, B.4 */
	ORCH_CHECK(orch_crc32c(0, zeros, 32) == 0x8a9136aau);
	ORCH_CHECK(orch_crc32c(0, ones, 32) == 0x62a8ab43u);
	ORCH_CHECK(orch_crc32c(0, NULL, 0) == 0);
}

ORCH_TEST(hw_matches_table)
{
	size_t max = 3 * 4096 + 64;
	uint8_t *buf = malloc(max + 8);

	ORCH_CHECK(buf);
	fill(buf, max + 8, 7);
	for (size_t len = 0; len <= max; len += len < 4200 ? 1 : 61) {
		for (size_t a = 0; a < 8; a += len > 4200 ? 3 : 1) {
			uint32_t seed = (uint32_t)(len * 2654435761u);

			if (orch_crc32c(seed, buf + a, len) != orch_crc32c_sw(seed, buf + a, len)) {
				fprintf(stderr, "len=%zu align=%zu\n", len, a);
				free(buf);
				ORCH_CHECK(0);
			}
		}
	}
	free(buf);
}

/* Continuing a CRC in pieces gives the CRC of the whole, however cut. */
ORCH_TEST(pieces_join)
{
	uint8_t *buf = malloc(16384);
	uint32_t whole;

	ORCH_CHECK(buf);
	fill(buf, 16384, 11);
	whole = orch_crc32c(0, buf, 16384);
	for (size_t cut = 0; cut <= 16384; cut += 511) {
		uint32_t c = orch_crc32c(0, buf, cut);

		if (orch_crc32c(c, buf + cut, 16384 - cut) != whole) {
			fprintf(stderr, "cut=%zu\n", cut);
			free(buf);
			ORCH_CHECK(0);
		}
	}
	free(buf);
}

ORCH_TEST_MAIN()
