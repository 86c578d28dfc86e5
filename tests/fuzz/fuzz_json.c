/*
 * The JSON reader on arbitrary bytes (a server's stats reply, read by the
 * status page and the CLI): never reads past the input, and every text it
 * returns lies within it.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void json_within(const char *s, size_t len, const char *v, size_t vlen)
{
	if (v < s || vlen > len || (size_t)(v - s) > len - vlen)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const paths[] = { "version", "uptime_ms", "requests_per_s",
					     "scrub.runs", "scrub.last_end_s", "a.b.c" };
	struct orch_json_kv kv[16];
	char *s = malloc(size ? size : 1);  /* exactly @size: ASan sees an overread */
	const char *v;
	size_t vlen;
	char str[32];
	uint64_t u;
	double d;
	int n;

	if (!s)
		return 0;
	memcpy(s, data, size);
	n = orch_json_members(s, size, kv, (int)(sizeof(kv) / sizeof(kv[0])));
	for (int i = 0; i < n && i < (int)(sizeof(kv) / sizeof(kv[0])); i++) {
		json_within(s, size, kv[i].k, kv[i].klen);
		json_within(s, size, kv[i].v, kv[i].vlen);
	}
	if (orch_json_inner(s, size, &v, &vlen) == 0)
		json_within(s, size, v, vlen);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		if (orch_json_get(s, size, paths[i], &v, &vlen) == 0)
			json_within(s, size, v, vlen);
		orch_json_get_u64(s, size, paths[i], &u);
		orch_json_get_f64(s, size, paths[i], &d);
		if (orch_json_get_str(s, size, paths[i], str, sizeof(str)) == 0 &&
		    !memchr(str, '\0', sizeof(str)))
			abort();
	}
	free(s);
	return 0;
}
