/*
 * The Prometheus text writer, the latency histogram (web/prom.h) and the
 * JSON member reader (common/json.h) that status and stats --watch use.
 * The format itself is checked against a real parser in test_metrics.py.
 */
#include <errno.h>
#include <string.h>

#include "common/json.h"
#include "unit/test.h"
#include "web/prom.h"

static const char *buf_text(struct orch_buf *b)
{
	orch_buf_append(b, "", 1);
	b->b_len--;
	return (const char *)b->b_data;
}

ORCH_TEST(hist_buckets_are_cumulative_and_count_is_their_sum)
{
	static struct orch_hist h;
	struct orch_hist_snap s;
	struct orch_buf b;

	orch_hist_observe(&h, 10000);          /* 10 us: first bucket */
	orch_hist_observe(&h, 50000);          /* exactly 50 us: first bucket too */
	orch_hist_observe(&h, 3000000);        /* 3 ms: le=0.005 */
	orch_hist_observe(&h, 60000000000ull); /* 60 s: only +Inf */
	orch_hist_read(&h, &s);
	ORCH_CHECK(orch_hist_count(&s) == 4);
	ORCH_CHECK(s.n[0] == 2 && s.n[ORCH_HIST_BOUNDS] == 1);
	orch_buf_init(&b, 1 << 16);
	orch_prom_hist(&b, "t_seconds", "type=\"X\"", &s);
	ORCH_CHECK(b.b_err == 0);
	ORCH_CHECK(strstr(buf_text(&b), "t_seconds_bucket{type=\"X\",le=\"5e-05\"} 2\n"));
	ORCH_CHECK(strstr(buf_text(&b), "t_seconds_bucket{type=\"X\",le=\"0.0025\"} 2\n"));
	ORCH_CHECK(strstr(buf_text(&b), "t_seconds_bucket{type=\"X\",le=\"0.005\"} 3\n"));
	ORCH_CHECK(strstr(buf_text(&b), "t_seconds_bucket{type=\"X\",le=\"10\"} 3\n"));
	ORCH_CHECK(strstr(buf_text(&b), "t_seconds_bucket{type=\"X\",le=\"+Inf\"} 4\n"));
	ORCH_CHECK(strstr(buf_text(&b), "t_seconds_count{type=\"X\"} 4\n"));
	ORCH_CHECK(strstr(buf_text(&b), "t_seconds_sum{type=\"X\"} 60.003060000\n"));
	orch_buf_fini(&b);
}

ORCH_TEST(labels_are_escaped_and_cut_whole)
{
	char l[64];

	orch_prom_labels(l, sizeof(l), "a", "x\"y\\z\nw", "b", "2", NULL);
	ORCH_CHECK(!strcmp(l, "a=\"x\\\"y\\\\z\\nw\",b=\"2\""));
	/* A pair that does not fit is left out whole. */
	orch_prom_labels(l, 16, "a", "1", "bbbb", "0123456789", NULL);
	ORCH_CHECK(!strcmp(l, "a=\"1\""));
	orch_prom_labels(l, sizeof(l), NULL);
	ORCH_CHECK(!strcmp(l, ""));
}

ORCH_TEST(samples_and_families)
{
	struct orch_buf b;

	orch_buf_init(&b, 4096);
	orch_prom_counter(&b, "x_total", "Things.", 7);
	orch_prom_gauge(&b, "y", "A level.", 0.25);
	orch_prom_gauge(&b, "z", "Whole.", 1e12);
	ORCH_CHECK(!strcmp(buf_text(&b), "# HELP x_total Things.\n# TYPE x_total counter\n"
					 "x_total 7\n# HELP y A level.\n# TYPE y gauge\ny 0.25\n"
					 "# HELP z Whole.\n# TYPE z gauge\nz 1000000000000\n"));
	orch_buf_fini(&b);
}

ORCH_TEST(a_page_past_its_bound_fails_whole)
{
	struct orch_buf b;

	orch_buf_init(&b, 64);
	for (int i = 0; i < 10; i++)
		orch_prom_counter(&b, "x_total", "Things.", 7);
	ORCH_CHECK(b.b_err == -EMSGSIZE);
	orch_buf_fini(&b);
}

ORCH_TEST(errno_names)
{
	char tmp[16];

	ORCH_CHECK(!strcmp(orch_errno_name(ENOENT, tmp), "ENOENT"));
	ORCH_CHECK(!strcmp(orch_errno_name(4000, tmp), "E4000"));
}

ORCH_TEST(json_paths_numbers_and_strings)
{
	static const char j[] = "{\"requests\": {\"CL2SV_LOOKUP\": 3}, \"version\": \"0.1\\\"x\", "
				"\"rate\": 2.5, \"scrub\": {\"runs\": 1, \"last_error\": \"\"}}";
	struct orch_json_kv kv[4];
	char str[16];
	uint64_t u;
	double d;
	const char *in;
	size_t inlen;

	ORCH_CHECK_OK(orch_json_get_u64(j, strlen(j), "requests.CL2SV_LOOKUP", &u));
	ORCH_CHECK(u == 3);
	ORCH_CHECK_OK(orch_json_get_u64(j, strlen(j), "scrub.runs", &u));
	ORCH_CHECK(u == 1);
	ORCH_CHECK_OK(orch_json_get_f64(j, strlen(j), "rate", &d));
	ORCH_CHECK(d == 2.5);
	ORCH_CHECK_OK(orch_json_get_str(j, strlen(j), "version", str, sizeof(str)));
	ORCH_CHECK(!strcmp(str, "0.1\"x"));
	ORCH_CHECK_OK(orch_json_get_str(j, strlen(j), "scrub.last_error", str, sizeof(str)));
	ORCH_CHECK(!strcmp(str, ""));
	ORCH_CHECK_RC(orch_json_get_u64(j, strlen(j), "nope", &u), -ENOENT);
	ORCH_CHECK_RC(orch_json_get_u64(j, strlen(j), "scrub.nope", &u), -ENOENT);
	ORCH_CHECK_RC(orch_json_get_u64(j, strlen(j), "version", &u), -EINVAL);
	ORCH_CHECK(orch_json_members(j, strlen(j), kv, 4) == 4);
	ORCH_CHECK(kv[1].klen == 7 && !memcmp(kv[1].k, "version", 7));
	ORCH_CHECK_OK(orch_json_inner(" { \"a\": 1 } ", 12, &in, &inlen));
	ORCH_CHECK(inlen == 6 && !memcmp(in, "\"a\": 1", 6));
	ORCH_CHECK_OK(orch_json_inner("{}", 2, &in, &inlen));
	ORCH_CHECK(inlen == 0);
}

ORCH_TEST(json_malformed_stays_in_bounds)
{
	static const char *const bad[] = {
		"", "{", "{\"a\"", "{\"a\": ", "{\"a\": 1", "{\"a\": {\"b\": 1}", "[1]",
		"{\"a\" 1}", "{\"a\": \"x}",
	};
	uint64_t u;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ORCH_CHECK(orch_json_members(bad[i], strlen(bad[i]), NULL, 0) < 0);
		/* A lookup reads only up to what it finds: {"a": {"b": 1} has a.b. */
		ORCH_CHECK(orch_json_get_u64(bad[i], strlen(bad[i]), "a.b", &u) != 0 ||
			   !strcmp(bad[i], "{\"a\": {\"b\": 1}"));
	}
}

ORCH_TEST_MAIN()
