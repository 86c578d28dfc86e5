/* Cluster health from every server's stats.  See status.h. */
#include "client/status.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json.h"

/* Reads what status shows out of one server's stats JSON. */
static void status_parse(const char *j, size_t len, struct orch_status_srv *s)
{
	if (orch_json_get_str(j, len, "version", s->version, sizeof(s->version)))
		snprintf(s->version, sizeof(s->version), "?");
	orch_json_get_u64(j, len, "uptime_ms", &s->uptime_ms);
	orch_json_get_u64(j, len, "capacity_bytes", &s->capacity);
	orch_json_get_u64(j, len, "free_bytes", &s->free);
	orch_json_get_f64(j, len, "requests_per_s", &s->requests_per_s);
	orch_json_get_u64(j, len, "connections_open", &s->connections);
	orch_json_get_u64(j, len, "inodes", &s->inodes);
	orch_json_get_u64(j, len, "scrub.runs", &s->scrub_runs);
	orch_json_get_u64(j, len, "scrub.last_end_s", (uint64_t *)&s->scrub_end_s);
	orch_json_get_u64(j, len, "scrub.last_ms", &s->scrub_ms);
	orch_json_get_u64(j, len, "scrub.last_findings", &s->scrub_findings);
	{
		uint64_t data = 0;

		orch_json_get_u64(j, len, "scrub.last_data", &data);
		s->scrub_data = data != 0;
	}
	orch_json_get_str(j, len, "scrub.last_error", s->scrub_error, sizeof(s->scrub_error));
	orch_json_get_str(j, len, "store_error", s->store_error, sizeof(s->store_error));
	if (!orch_json_get_str(j, len, "log.role", s->log_role, sizeof(s->log_role))) {
		orch_json_get_u64(j, len, "log.term", &s->log_term);
		orch_json_get_u64(j, len, "log.applied_index", &s->log_applied);
		orch_json_get_u64(j, len, "log.commit_index", &s->log_commit);
	}
}

struct status_ask {
	struct orch_client *cl;
	unsigned int server;
	struct orch_reply *rep;
	int *error;
	pthread_t thread;
	bool started;
};

static void *status_ask_one(void *arg)
{
	struct status_ask *a = arg;
	struct orch_msg req;

	orch_msg_init(&req, ORCH_AD2SV_STATS);
	*a->error = orch_client_call(a->cl, a->server, &req, a->rep);
	return NULL;
}

/*
 * A thread per server: a send connects first, and a server that accepts
 * connections but says nothing (frozen) holds its sender for the whole
 * deadline; in one thread, N of them cost N deadlines.
 */
void orch_status_fetch(struct orch_client *cl, struct orch_reply *reps, int *errors)
{
	const struct orch_cfg *cfg = orch_client_cfg(cl);
	struct status_ask ask[ORCH_SERVERS_MAX];

	for (unsigned int i = 0; i < cfg->nservers; i++) {
		memset(&reps[i], 0, sizeof(reps[i]));
		ask[i] = (struct status_ask){ .cl = cl, .server = i, .rep = &reps[i],
					      .error = &errors[i] };
		ask[i].started = pthread_create(&ask[i].thread, NULL, status_ask_one, &ask[i]) == 0;
	}
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		if (ask[i].started)
			pthread_join(ask[i].thread, NULL);
		else
			status_ask_one(&ask[i]);   /* no thread: in turn */
	}
}

unsigned int orch_status_query(struct orch_client *cl, struct orch_status_srv *out)
{
	const struct orch_cfg *cfg = orch_client_cfg(cl);
	struct orch_reply *reps = calloc(ORCH_SERVERS_MAX, sizeof(*reps));
	int errors[ORCH_SERVERS_MAX];
	unsigned int up = 0;

	for (unsigned int i = 0; i < cfg->nservers; i++)
		memset(&out[i], 0, sizeof(out[i]));
	if (!reps) {
		for (unsigned int i = 0; i < cfg->nservers; i++)
			out[i].error = -ENOMEM;
		return 0;
	}
	orch_status_fetch(cl, reps, errors);
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		out[i].error = errors[i];
		if (errors[i])
			continue;
		if (orch_json_members(reps[i].m.json.s, reps[i].m.json.len, NULL, 0) < 0)
			out[i].error = -EPROTO;
		else
			status_parse(reps[i].m.json.s, reps[i].m.json.len, &out[i]);
		orch_reply_release(&reps[i]);
		up += out[i].error == 0;
	}
	free(reps);
	return up;
}

const char *orch_status_why(int error)
{
	switch (-error) {
	case EHOSTDOWN:
	case ECONNREFUSED:
		return "unreachable";
	case ETIMEDOUT:
		return "no answer";
	case EIO:
		return "connection lost";
	case EKEYREJECTED:
		return "wrong cluster key";
	case EACCES:
		return "refused our key";
	case EPROTO:
		return "bad stats";
	default:
		return strerror(-error);
	}
}

void orch_status_bytes(uint64_t bytes, char *out, size_t size)
{
	static const char *const units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	double v = (double)bytes;
	unsigned int u = 0;

	while (v >= 1000 && u < sizeof(units) / sizeof(units[0]) - 1) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, size, "%llu B", (unsigned long long)bytes);
	else
		snprintf(out, size, v < 10 ? "%.1f %s" : "%.0f %s", v, units[u]);
}

void orch_status_duration(uint64_t s, char *out, size_t size)
{
	if (s >= 86400)
		snprintf(out, size, "%llud %lluh", (unsigned long long)(s / 86400),
			 (unsigned long long)(s % 86400 / 3600));
	else if (s >= 3600)
		snprintf(out, size, "%lluh %02llum", (unsigned long long)(s / 3600),
			 (unsigned long long)(s % 3600 / 60));
	else if (s >= 60)
		snprintf(out, size, "%llum %02llus", (unsigned long long)(s / 60),
			 (unsigned long long)(s % 60));
	else
		snprintf(out, size, "%llus", (unsigned long long)s);
}

void orch_status_scrub(const struct orch_status_srv *s, int64_t now_s, char *out,
		       size_t size, bool *bad)
{
	char age[32];

	if (bad)
		*bad = false;
	if (!s->scrub_runs) {
		snprintf(out, size, "never");
		return;
	}
	orch_status_duration(now_s > s->scrub_end_s ? (uint64_t)(now_s - s->scrub_end_s) : 0, age,
			     sizeof(age));
	if (bad)
		*bad = s->scrub_error[0] || s->scrub_findings;
	if (s->scrub_error[0])
		snprintf(out, size, "failed (%s) %s ago", s->scrub_error, age);
	else if (s->scrub_findings)
		snprintf(out, size, "%llu finding%s%s %s ago",
			 (unsigned long long)s->scrub_findings, s->scrub_findings == 1 ? "" : "s",
			 s->scrub_data ? " (data)" : "", age);
	else
		snprintf(out, size, "clean%s %s ago", s->scrub_data ? " (data)" : "", age);
}
