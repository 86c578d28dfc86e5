/* Striping math.  See layout.h. */
#include "proto/layout.h"

bool orch_layout_is_valid(const struct orch_layout *l)
{
	return l->strip_size >= 4096 && (l->strip_size % 4096) == 0 &&
	       l->stripe_count >= 1 && l->first_server < l->stripe_count;
}

void orch_layout_locate(const struct orch_layout *l, uint64_t off,
			struct orch_layout_pos *out)
{
	uint64_t strip = off / l->strip_size;
	uint64_t within = off % l->strip_size;

	out->server = (unsigned int)((l->first_server + strip) % l->stripe_count);
	out->local_off = strip / l->stripe_count * l->strip_size + within;
	out->run = l->strip_size - within;
}

uint64_t orch_layout_file_off(const struct orch_layout *l, unsigned int server,
			      uint64_t local_off)
{
	uint64_t slot = (server + l->stripe_count - l->first_server) % l->stripe_count;
	uint64_t strip = local_off / l->strip_size * l->stripe_count + slot;

	return strip * l->strip_size + local_off % l->strip_size;
}

uint64_t orch_layout_local_size(const struct orch_layout *l, uint64_t file_size,
				unsigned int server)
{
	uint64_t row = (uint64_t)l->strip_size * l->stripe_count;
	uint64_t slot = (server + l->stripe_count - l->first_server) % l->stripe_count;
	uint64_t rem = file_size % row;
	uint64_t local = file_size / row * l->strip_size;
	uint64_t start = slot * l->strip_size;

	if (rem > start)
		local += rem - start < l->strip_size ? rem - start : l->strip_size;
	return local;
}

uint64_t orch_layout_servers(const struct orch_layout *l, uint64_t off, uint64_t len)
{
	uint64_t first, last, mask = 0;

	if (!len)
		return 0;
	first = off / l->strip_size;
	last = (len - 1 > UINT64_MAX - off ? UINT64_MAX : off + len - 1) / l->strip_size;
	if (last - first + 1 >= l->stripe_count)
		return l->stripe_count >= 64 ? UINT64_MAX : (UINT64_C(1) << l->stripe_count) - 1;
	for (uint64_t strip = first; strip <= last; strip++) {
		uint64_t server = (l->first_server + strip) % l->stripe_count;

		mask |= UINT64_C(1) << (server < 63 ? server : 63);
	}
	return mask;
}
