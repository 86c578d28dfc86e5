/*
 * Striping math against a brute-force model.  The model never divides: it
 * walks the file byte by byte, deals the bytes out strip by strip to the
 * servers in turn (counters that wrap at strip_size and stripe_count), and
 * gives each server's bytes consecutive local offsets.  Every byte's locate()
 * and every server's local_size() at many file sizes must agree with it.
 */
#include <stdint.h>
#include <stdlib.h>

#include "proto/layout.h"
#include "unit/test.h"

struct model {
	const struct orch_layout *l;
	unsigned int server;  /* server of the current byte */
	uint64_t within;      /* byte's position in its strip */
	uint64_t local[16];   /* bytes dealt to each server so far */
};

static void model_init(struct model *mo, const struct orch_layout *l)
{
	memset(mo, 0, sizeof(*mo));
	mo->l = l;
	mo->server = l->first_server;
}

/* Deals the next byte; leaves its server, local offset and run in *@out. */
static void model_step(struct model *mo, struct orch_layout_pos *out)
{
	out->server = mo->server;
	out->local_off = mo->local[mo->server]++;
	out->run = mo->l->strip_size - mo->within;
	if (++mo->within == mo->l->strip_size) {
		mo->within = 0;
		if (++mo->server == mo->l->stripe_count)
			mo->server = 0;
	}
}

/* File sizes worth checking local_size at: strip and row edges, and a few odd ones. */
static bool is_checkpoint(const struct orch_layout *l, uint64_t size)
{
	uint64_t s = l->strip_size;

	if (size < 3 || size % s <= 1 || size % s == s - 1)
		return true;
	return size % 997 == 0;
}

/*
 * One layout: every byte of a file of a little over @rows rows is located
 * and compared; local_size is compared at every checkpoint size.  Returns
 * false (after printing) on the first mismatch.
 */
static bool check_layout(uint32_t strip, uint16_t count, uint16_t first, unsigned int rows)
{
	struct orch_layout l = { .strip_size = strip, .stripe_count = count,
				 .first_server = first };
	uint64_t max = (uint64_t)strip * count * rows + strip / 2 + 3;
	struct model mo;

	model_init(&mo, &l);
	for (uint64_t off = 0; off <= max; off++) {
		struct orch_layout_pos want, got;

		if (is_checkpoint(&l, off)) {
			/* mo.local[] now holds each server's size for a file of @off bytes. */
			for (unsigned int sv = 0; sv < count; sv++) {
				uint64_t ls = orch_layout_local_size(&l, off, sv);

				if (ls != mo.local[sv]) {
					fprintf(stderr,
						"local_size strip=%u count=%u first=%u size=%llu server=%u: got %llu want %llu\n",
						strip, count, first, (unsigned long long)off, sv,
						(unsigned long long)ls,
						(unsigned long long)mo.local[sv]);
					return false;
				}
			}
		}
		model_step(&mo, &want);
		orch_layout_locate(&l, off, &got);
		if (orch_layout_file_off(&l, got.server, got.local_off) != off) {
			fprintf(stderr, "file_off strip=%u count=%u first=%u off=%llu: got %llu\n",
				strip, count, first, (unsigned long long)off,
				(unsigned long long)orch_layout_file_off(&l, got.server,
									 got.local_off));
			return false;
		}
		if (got.server != want.server || got.local_off != want.local_off ||
		    got.run != want.run) {
			fprintf(stderr,
				"locate strip=%u count=%u first=%u off=%llu: got (%u,%llu,%llu) want (%u,%llu,%llu)\n",
				strip, count, first, (unsigned long long)off, got.server,
				(unsigned long long)got.local_off, (unsigned long long)got.run,
				want.server, (unsigned long long)want.local_off,
				(unsigned long long)want.run);
			return false;
		}
	}
	return true;
}

ORCH_TEST(layout_is_valid)
{
	struct orch_layout l = { .strip_size = 65536, .stripe_count = 3, .first_server = 2 };

	ORCH_CHECK(orch_layout_is_valid(&l));
	l.first_server = 3;
	ORCH_CHECK(!orch_layout_is_valid(&l));
	l.first_server = 0;
	l.stripe_count = 0;
	ORCH_CHECK(!orch_layout_is_valid(&l));
	l.stripe_count = 65535;
	ORCH_CHECK(orch_layout_is_valid(&l));
	l.strip_size = 0;
	ORCH_CHECK(!orch_layout_is_valid(&l));
	l.strip_size = 4096 + 512;
	ORCH_CHECK(!orch_layout_is_valid(&l));
	l.strip_size = 2048;
	ORCH_CHECK(!orch_layout_is_valid(&l));
	l.strip_size = 4096;
	ORCH_CHECK(orch_layout_is_valid(&l));
}

/* Small strips, many server counts, every first server. */
ORCH_TEST(layout_small_strips_vs_model)
{
	static const uint32_t strips[] = { 4096, 8192, 12288 };

	for (size_t i = 0; i < sizeof(strips) / sizeof(strips[0]); i++)
		for (uint16_t count = 1; count <= 7; count++)
			for (uint16_t first = 0; first < count; first++)
				ORCH_CHECK(check_layout(strips[i], count, first, 3));
}

/* The default 64 KiB strip and a 1 MiB one, fewer rows. */
ORCH_TEST(layout_large_strips_vs_model)
{
	for (uint16_t count = 1; count <= 4; count++)
		for (uint16_t first = 0; first < count; first++)
			ORCH_CHECK(check_layout(65536, count, first, 2));
	ORCH_CHECK(check_layout(1u << 20, 3, 1, 1));
	ORCH_CHECK(check_layout(1u << 20, 1, 0, 2));
}

/*
 * Far out in a big file the answer must be the same as one row earlier,
 * shifted by one strip locally: checks offsets the byte walk cannot reach,
 * where 32-bit overflow would show.
 */
ORCH_TEST(layout_large_offsets_periodic)
{
	static const uint32_t strips[] = { 4096, 65536, 1u << 20, 16u << 20 };
	static const uint16_t counts[] = { 1, 2, 3, 7, 64, 65535 };
	static const uint64_t rows_at[] = { 1, 1000, 1ull << 20, 1ull << 30 };

	for (size_t si = 0; si < 4; si++) {
		for (size_t ci = 0; ci < 6; ci++) {
			struct orch_layout l = { .strip_size = strips[si],
						 .stripe_count = counts[ci],
						 .first_server = (uint16_t)(counts[ci] / 2) };
			uint64_t row = (uint64_t)l.strip_size * l.stripe_count;

			for (size_t ri = 0; ri < 4; ri++) {
				uint64_t k = rows_at[ri];
				static const uint64_t offs[] = { 0, 1, 4095, 4096, 65537 };

				if (k > (UINT64_MAX / 2) / row)
					continue; /* past 2^63: no file is that big */

				for (size_t oi = 0; oi < 5; oi++) {
					uint64_t off = offs[oi] % row;
					struct orch_layout_pos a, b;

					orch_layout_locate(&l, off, &a);
					orch_layout_locate(&l, off + k * row, &b);
					ORCH_CHECK(a.server == b.server);
					ORCH_CHECK(b.local_off == a.local_off + k * l.strip_size);
					ORCH_CHECK(a.run == b.run);
					ORCH_CHECK(orch_layout_file_off(&l, b.server, b.local_off) ==
						   off + k * row);
					for (unsigned int sv = 0; sv < l.stripe_count && sv < 8; sv++)
						ORCH_CHECK(orch_layout_local_size(&l, off + k * row, sv) ==
							   orch_layout_local_size(&l, off, sv) +
								   k * l.strip_size);
				}
			}
		}
	}
}

/* The local sizes of all servers always add up to the file size. */
ORCH_TEST(layout_local_sizes_sum)
{
	for (int iter = 0; iter < 20000; iter++) {
		uint16_t count = (uint16_t)(1 + rand() % 9);
		struct orch_layout l = { .strip_size = 4096u * (uint32_t)(1 + rand() % 32),
					 .stripe_count = count,
					 .first_server = (uint16_t)(rand() % count) };
		uint64_t size = (uint64_t)rand() * (uint64_t)(1 + rand() % 4096), sum = 0;

		for (unsigned int sv = 0; sv < count; sv++)
			sum += orch_layout_local_size(&l, size, sv);
		ORCH_CHECK(sum == size);
	}
}

ORCH_TEST_MAIN()

/* The servers of a byte range are those locate() finds walking it run by run. */
ORCH_TEST(layout_servers_of_a_range)
{
	for (int iter = 0; iter < 20000; iter++) {
		uint16_t count = (uint16_t)(1 + rand() % 9);
		struct orch_layout l = { .strip_size = 4096u * (uint32_t)(1 + rand() % 4),
					 .stripe_count = count,
					 .first_server = (uint16_t)(rand() % count) };
		uint64_t off = (uint64_t)rand() % (l.strip_size * 20);
		uint64_t len = (uint64_t)rand() % (l.strip_size * (uint64_t)(rand() % 12 + 1));
		uint64_t want = 0;

		for (uint64_t at = off; at < off + len;) {
			struct orch_layout_pos p;

			orch_layout_locate(&l, at, &p);
			want |= UINT64_C(1) << p.server;
			at += p.run;
		}
		ORCH_CHECK(orch_layout_servers(&l, off, len) == want);
	}
	/* Past 63 servers, bit 63 stands for them all; the end of the file space. */
	struct orch_layout wide = { .strip_size = 4096, .stripe_count = 100, .first_server = 99 };

	ORCH_CHECK(orch_layout_servers(&wide, 0, 4096) == UINT64_C(1) << 63);
	ORCH_CHECK(orch_layout_servers(&wide, 4096, 4096) == 1);
	ORCH_CHECK(orch_layout_servers(&wide, 0, 100 * 4096) == UINT64_MAX);
	ORCH_CHECK(orch_layout_servers(&wide, UINT64_MAX - 10, 100) != 0);
	ORCH_CHECK(orch_layout_servers(&wide, 12345, 0) == 0);
}
