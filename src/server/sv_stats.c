/*
 * What monitors ask: AN2AN_PING, and AD2SV_STATS, the counters of every
 * part of the server as one JSON object (`orchard stats`, `orchard
 * status`, the status page).  The same snapshot feeds the metrics.
 */
#include <inttypes.h>
#include <stdio.h>

#include "common/time.h"
#include "common/util.h"
#include "common/version.h"
#include "server/sv_admin.h"
#include "server/sv_conns.h"
#include "server/sv_lease.h"
#include "server/sv_peer.h"
#include "server/sv_req.h"
#include "server/sv_mirror.h"
#include "server/sv_stats.h"
#include "server/sv_opens.h"
#include "server/sv_writers.h"

#define SV_RATE_TICK_MS 1000

int sv_stats_ping(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_msg rep;

	(void)m;
	orch_msg_init(&rep, 0);
	rep.vmin = rep.vmax = ORCH_PROTO_VERSION;
	if (orch_store_failed(sv->s_store, NULL))
		rep.features = ORCH_PING_STORE_FAILED;
	if (!sv_ns_serving(sv)) {
		uint32_t leader = sv_ns_leader(sv);

		rep.features |= ORCH_PING_FOLLOWER |
				(uint64_t)(leader == ORCH_NO_LEADER ? 0xff : leader & 0xff) << 8;
	}
	sv_reply(r, &rep);
	return 0;
}

/* --- The request rate ---------------------------------------------------------------- */

static uint64_t sv_requests_total(const struct sv_server *sv)
{
	uint64_t n = 0;

	for (size_t i = 0; i < SV_MSG_TYPES_MAX; i++)
		n += sv->s_requests[i];
	return n;
}

static void sv_rate_tick(void *arg)
{
	struct sv_server *sv = arg;
	struct sv_rate *rt = &sv->s_rate;

	rt->r_total[rt->r_next] = sv_requests_total(sv);
	rt->r_ms[rt->r_next] = orch_time_now_ms();
	rt->r_next = (rt->r_next + 1) % SV_RATE_SLOTS;
	if (rt->r_n < SV_RATE_SLOTS)
		rt->r_n++;
	orch_ev_timer_arm(sv->s_ev, &rt->r_timer, SV_RATE_TICK_MS, sv_rate_tick, sv);
}

void sv_stats_start(struct sv_server *sv)
{
	sv_rate_tick(sv);
}

/* Requests per second from the oldest sample kept to now. */
static double sv_rate(const struct sv_server *sv)
{
	const struct sv_rate *rt = &sv->s_rate;
	unsigned int oldest = (rt->r_next + SV_RATE_SLOTS - rt->r_n) % SV_RATE_SLOTS;
	uint64_t now = orch_time_now_ms();

	if (!rt->r_n)
		return 0;
	/* At least a second: right after the start a few requests are no rate. */
	return (double)(sv_requests_total(sv) - rt->r_total[oldest]) * 1000.0 /
	       (double)ORCH_MAX(now - rt->r_ms[oldest], (uint64_t)SV_RATE_TICK_MS);
}

/* --- The snapshot ------------------------------------------------------------------- */

void sv_stats_collect(struct sv_server *sv, struct sv_stats_snap *out)
{
	uint64_t next;

	*out = (struct sv_stats_snap){
		.bytes_in = sv->s_bytes_in,
		.bytes_out = sv->s_bytes_out,
		.protocol_errors = sv->s_errors_proto,
		.accepted = sv->s_accepted,
		.conns_open = sv->s_conns.cs_n,
		.conns_refused = sv->s_conns.cs_refused,
		.conns_timed_out = sv->s_conns.cs_timed_out,
		.accept_pauses = sv->s_accept_pauses,
		.syncs = sv->s_syncs,
		.fsync_requests = sv->s_sync_waiters,
		.commits = orch_meta_commit_count(sv->s_meta),
		.wal_restarts = atomic_load(&sv->s_wal_restarts),
		.wal_restart_us = atomic_load(&sv->s_wal_restart_us),
		.wal_wait_us = orch_meta_busy_us(sv->s_meta),
		.intents_done = sv->s_intents_done,
		.leases = sv_lease_count(sv),
		.lease_grants = sv->s_lease_grants,
		.lease_pushes = sv->s_lease_pushes,
		.lease_revokes = sv->s_lease_revokes,
		.reclaimed = sv_admin_reclaimed(sv),
		.cut = sv_admin_cut(sv),
		.writes_queued = sv->s_writes.w_submitted - sv->s_writes.w_answered,
		.scrub = sv->s_scrub,
		.requests_per_s = sv_rate(sv),
		.uptime_ms = orch_time_now_ms() - sv->s_started_ms,
		.started_real_ms = sv->s_started_real_ms,
	};
	for (size_t i = 0; i < SV_MSG_TYPES_MAX; i++)
		out->requests[i] = sv->s_requests[i];
	for (size_t i = 0; i < SV_ERRNO_MAX; i++)
		out->errors[i] = sv->s_errors[i];
	sv_conns_bytes(sv, &out->bytes_in, &out->bytes_out);
	sv_peers_bytes(sv, &out->bytes_in, &out->bytes_out);
	orch_meta_counts(sv->s_meta, &out->inodes, &next);
	sv_writers_counts(sv, &out->writer_inodes, &out->writer_regs, &out->writer_cuts);
	sv_ack_counts(sv, &out->acks);
	sv_ns_counts(sv, &out->ns);
	sv_opens_counts(sv, &out->open_files, &out->open_regs, &out->orphans, &out->orphans_freed);
	orch_store_get_stats(sv->s_store, &out->store);
	orch_store_statfs(sv->s_store, &out->capacity, &out->free, &out->avail, &out->objects);
	out->store_error = orch_store_failed(sv->s_store, &out->store_failed_s);
}

/* --- The JSON ---------------------------------------------------------------------- */

static void sv_json_u64(struct orch_buf *b, const char *key, uint64_t v, bool comma)
{
	char tmp[96];
	int n = snprintf(tmp, sizeof(tmp), "%s\"%s\": %" PRIu64, comma ? ", " : "", key, v);

	orch_buf_append(b, tmp, (size_t)n);
}

static void sv_json_raw(struct orch_buf *b, const char *key, const char *text)
{
	char tmp[160];
	int n = snprintf(tmp, sizeof(tmp), ", \"%s\": %s", key, text);

	orch_buf_append(b, tmp, (size_t)n);
}

static void sv_stats_json(struct sv_server *sv, struct orch_buf *b)
{
	struct sv_stats_snap s;
	const struct orch_store_stats *st = &s.store;
	char tmp[64], ename[16];
	bool first = true;
	uint16_t types[SV_MSG_TYPES_MAX];
	size_t ntypes = orch_msg_types(types, SV_MSG_TYPES_MAX);

	sv_stats_collect(sv, &s);
	orch_buf_append(b, "{\"requests\": {", 14);
	for (size_t i = 0; i < ntypes; i++) {
		if (!s.requests[i])
			continue;
		sv_json_u64(b, orch_msg_name(types[i]), s.requests[i], !first);
		first = false;
	}
	orch_buf_append(b, "}", 1);
	sv_json_u64(b, "bytes_in", s.bytes_in, true);
	sv_json_u64(b, "bytes_out", s.bytes_out, true);
	sv_json_u64(b, "commits", s.commits, true);
	sv_json_u64(b, "syncs", s.syncs, true);
	sv_json_u64(b, "fsync_requests", s.fsync_requests, true);
	sv_json_u64(b, "wal_restarts", s.wal_restarts, true);
	sv_json_u64(b, "wal_restart_us", s.wal_restart_us, true);
	sv_json_u64(b, "wal_wait_us", s.wal_wait_us, true);
	sv_json_u64(b, "intents_done", s.intents_done, true);
	sv_json_u64(b, "leases", s.leases, true);
	sv_json_u64(b, "lease_grants", s.lease_grants, true);
	sv_json_u64(b, "lease_pushes", s.lease_pushes, true);
	sv_json_u64(b, "lease_revokes", s.lease_revokes, true);
	sv_json_u64(b, "acks", s.acks.acks, true);
	sv_json_u64(b, "replies_held", s.acks.parked, true);
	sv_json_u64(b, "replies_held_by_expiry", s.acks.by_expiry, true);
	sv_json_u64(b, "replies_holding", s.acks.waiting, true);
	sv_json_u64(b, "replies_held_us", s.acks.wait_us, true);
	sv_json_u64(b, "replies_held_max_us", s.acks.wait_max_us, true);
	sv_json_u64(b, "inodes", s.inodes, true);
	sv_json_u64(b, "writer_inodes", s.writer_inodes, true);
	sv_json_u64(b, "writer_registrations", s.writer_regs, true);
	sv_json_u64(b, "writer_cuts", s.writer_cuts, true);
	sv_json_u64(b, "open_files", s.open_files, true);
	sv_json_u64(b, "open_registrations", s.open_regs, true);
	sv_json_u64(b, "orphans", s.orphans, true);
	sv_json_u64(b, "orphans_freed", s.orphans_freed, true);
	sv_json_u64(b, "data_bytes_written", st->bytes_written, true);
	sv_json_u64(b, "data_bytes_read", st->bytes_read, true);
	sv_json_u64(b, "data_objects", s.objects, true);
	sv_json_u64(b, "data_objects_created", st->objects_created, true);
	sv_json_u64(b, "data_objects_deleted", st->objects_deleted, true);
	sv_json_u64(b, "data_objects_reclaimed", s.reclaimed, true);
	sv_json_u64(b, "data_objects_cut", s.cut, true);
	/* The store's own counters (store.h), and the writes queued to it. */
	orch_buf_append(b, ", \"store\": {", 12);
	sv_json_u64(b, "ops", st->ops, false);
	sv_json_u64(b, "commits", st->commits, true);
	sv_json_u64(b, "syncs", st->syncs, true);
	sv_json_u64(b, "sync_calls", st->sync_calls, true);
	sv_json_u64(b, "csum_errors", st->csum_errors, true);
	sv_json_u64(b, "bad_records", st->bad_records, true);
	sv_json_u64(b, "work_chunks", st->work_chunks, true);
	sv_json_u64(b, "checkpoints", st->checkpoints, true);
	sv_json_u64(b, "checkpoint_us", st->checkpoint_us, true);
	sv_json_u64(b, "writes_queued", s.writes_queued, true);
	orch_buf_append(b, "}", 1);
	if (s.ns.replicated) {
		/* The namespace's log (sv_ns.h); absent without one. */
		orch_buf_printf(b, ", \"log\": {\"role\": \"%s\"", s.ns.role);
		sv_json_u64(b, "term", s.ns.term, true);
		sv_json_u64(b, "last_index", s.ns.last_index, true);
		sv_json_u64(b, "commit_index", s.ns.commit_index, true);
		sv_json_u64(b, "applied_index", s.ns.applied_index, true);
		sv_json_u64(b, "changes", s.ns.changes, true);
		sv_json_u64(b, "entries", s.ns.entries, true);
		sv_json_u64(b, "unlogged", s.ns.unlogged, true);
		sv_json_u64(b, "batch_max", s.ns.batch_max, true);
		sv_json_u64(b, "failed", s.ns.failed, true);
		sv_json_raw(b, "serving", s.ns.serving ? "true" : "false");
		sv_json_u64(b, "promotions", s.ns.promotions, true);
		sv_json_u64(b, "vouches", s.ns.vouches, true);
		sv_json_u64(b, "changes_wait_ms", s.ns.changes_wait_ms, true);
		sv_json_u64(b, "group", sv->s_index, true);
		sv_json_u64(b, "member", sv->s_member, true);
		orch_buf_append(b, "}", 1);
	}
	if (sv->s_mirror) {
		/* The file-data stream of a group of several (sv_mirror.h). */
		struct sv_mirror_counts mc;

		sv_mirror_counts(sv, &mc);
		orch_buf_append(b, ", \"data_stream\": {", 18);
		sv_json_u64(b, "sent", mc.sent, false);
		sv_json_u64(b, "safe", mc.safe, true);
		sv_json_u64(b, "in_sync", mc.in_sync, true);
		sv_json_u64(b, "resyncs", mc.resyncs, true);
		sv_json_u64(b, "resync_bytes", mc.resync_bytes, true);
		sv_json_u64(b, "resync_same", mc.resync_same, true);
		sv_json_u64(b, "dropped", mc.dropped, true);
		sv_json_u64(b, "applied", mc.applied, true);
		sv_json_u64(b, "refused", mc.refused, true);
		sv_json_u64(b, "replies_held", mc.replies_held, true);
		sv_json_u64(b, "mask", mc.mask, true);
		sv_json_raw(b, "changing", mc.changing ? "true" : "false");
		sv_json_raw(b, "gate_open", mc.gate_open ? "true" : "false");
		sv_json_u64(b, "waiting", mc.waiting, true);
		orch_buf_printf(b, ", \"followers\": \"%s\"", mc.followers);
		orch_buf_append(b, "}", 1);
	}
	sv_json_u64(b, "protocol_errors", s.protocol_errors, true);
	sv_json_u64(b, "connections", s.accepted, true);
	sv_json_u64(b, "uptime_ms", s.uptime_ms, true);
	/* For `orchard status` and the status page. */
	sv_json_raw(b, "version", "\"" ORCH_VERSION "\"");
	sv_json_u64(b, "started_s", (uint64_t)(s.started_real_ms / 1000), true);
	snprintf(tmp, sizeof(tmp), "%.1f", s.requests_per_s);
	sv_json_raw(b, "requests_per_s", tmp);
	sv_json_u64(b, "connections_open", s.conns_open, true);
	sv_json_u64(b, "connections_refused", s.conns_refused, true);
	sv_json_u64(b, "connections_timed_out", s.conns_timed_out, true);
	sv_json_u64(b, "accept_pauses", s.accept_pauses, true);
	sv_json_u64(b, "capacity_bytes", s.capacity, true);
	sv_json_u64(b, "free_bytes", s.free, true);
	sv_json_u64(b, "avail_bytes", s.avail, true);
	/* "ok", or "failed": read-only after an I/O error (orch_store_failed). */
	sv_json_raw(b, "store_state", s.store_error ? "\"failed\"" : "\"ok\"");
	snprintf(tmp, sizeof(tmp), "\"%s\"",
		 s.store_error ? orch_errno_name(-s.store_error, ename) : "");
	sv_json_raw(b, "store_error", tmp);
	sv_json_u64(b, "store_failed_s", (uint64_t)s.store_failed_s, true);
	orch_buf_append(b, ", \"errors\": {", 13);
	first = true;
	for (int e = 1; e < SV_ERRNO_MAX; e++) {
		if (!s.errors[e])
			continue;
		sv_json_u64(b, e == SV_ERRNO_MAX - 1 ? "other" : orch_errno_name(e, tmp),
			    s.errors[e], !first);
		first = false;
	}
	orch_buf_append(b, "}, \"scrub\": {", 13);
	sv_json_u64(b, "runs", s.scrub.runs, false);
	sv_json_u64(b, "last_end_s", (uint64_t)s.scrub.end_s, true);
	sv_json_u64(b, "last_ms", s.scrub.ms, true);
	sv_json_u64(b, "last_findings", s.scrub.findings, true);
	sv_json_u64(b, "last_data", s.scrub.data, true);
	snprintf(tmp, sizeof(tmp), "\"%s\"",
		 s.scrub.error ? orch_errno_name(-s.scrub.error, ename) : "");
	sv_json_raw(b, "last_error", tmp);
	orch_buf_append(b, "}}", 2);
}

int sv_stats_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_buf b;
	struct orch_msg rep;

	(void)m;
	orch_buf_init(&b, ORCH_JSON_MAX);
	sv_stats_json(sv, &b);
	orch_msg_init(&rep, 0);
	rep.status = b.b_err;
	rep.json = orch_str_of((const char *)b.b_data, b.b_len);
	sv_reply(r, &rep);
	orch_buf_fini(&b);
	return 0;
}
