/*
 * What monitors ask: AN2AN_PING, and AD2SV_STATS, the counters of every
 * part of the server as one JSON object (`orchard stats`).
 */
#include <inttypes.h>
#include <stdio.h>

#include "common/time.h"
#include "server/sv_admin.h"
#include "server/sv_conns.h"
#include "server/sv_lease.h"
#include "server/sv_peer.h"
#include "server/sv_req.h"
#include "server/sv_stats.h"
#include "server/sv_writers.h"

int sv_stats_ping(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m)
{
	struct orch_msg rep;

	(void)sv;
	(void)m;
	orch_msg_init(&rep, 0);
	rep.vmin = rep.vmax = ORCH_PROTO_VERSION;
	sv_reply(r, &rep);
	return 0;
}

static void sv_json_u64(struct orch_buf *b, const char *key, uint64_t v, bool comma)
{
	char tmp[96];
	int n = snprintf(tmp, sizeof(tmp), "%s\"%s\": %" PRIu64, comma ? ", " : "", key, v);

	orch_buf_append(b, tmp, (size_t)n);
}

static void sv_stats_json(struct sv_server *sv, struct orch_buf *b)
{
	struct orch_store_stats st;
	uint64_t inodes = 0, next = 0, bytes_in = sv->s_bytes_in, bytes_out = sv->s_bytes_out;
	bool first = true;
	uint16_t types[SV_MSG_TYPES_MAX];
	size_t ntypes = orch_msg_types(types, SV_MSG_TYPES_MAX);

	orch_store_get_stats(sv->s_store, &st);
	orch_meta_counts(sv->s_meta, &inodes, &next);
	sv_conns_bytes(sv, &bytes_in, &bytes_out);
	sv_peers_bytes(sv, &bytes_in, &bytes_out);
	orch_buf_append(b, "{\"requests\": {", 14);
	for (size_t i = 0; i < ntypes; i++) {
		if (!sv->s_requests[i])
			continue;
		sv_json_u64(b, orch_msg_name(types[i]), sv->s_requests[i], !first);
		first = false;
	}
	orch_buf_append(b, "}", 1);
	sv_json_u64(b, "bytes_in", bytes_in, true);
	sv_json_u64(b, "bytes_out", bytes_out, true);
	sv_json_u64(b, "commits", orch_meta_commit_count(sv->s_meta), true);
	sv_json_u64(b, "syncs", sv->s_syncs, true);
	sv_json_u64(b, "fsync_requests", sv->s_sync_waiters, true);
	sv_json_u64(b, "wal_restarts", atomic_load(&sv->s_wal_restarts), true);
	sv_json_u64(b, "wal_restart_us", atomic_load(&sv->s_wal_restart_us), true);
	sv_json_u64(b, "wal_wait_us", orch_meta_busy_us(sv->s_meta), true);
	sv_json_u64(b, "intents_done", sv->s_intents_done, true);
	sv_json_u64(b, "leases", sv_lease_count(sv), true);
	sv_json_u64(b, "lease_grants", sv->s_lease_grants, true);
	sv_json_u64(b, "lease_pushes", sv->s_lease_pushes, true);
	sv_json_u64(b, "lease_revokes", sv->s_lease_revokes, true);
	sv_json_u64(b, "inodes", inodes, true);
	{
		uint64_t wnodes, wregs, wcuts;

		sv_writers_counts(sv, &wnodes, &wregs, &wcuts);
		sv_json_u64(b, "writer_inodes", wnodes, true);
		sv_json_u64(b, "writer_registrations", wregs, true);
		sv_json_u64(b, "writer_cuts", wcuts, true);
	}
	sv_json_u64(b, "data_bytes_written", st.bytes_written, true);
	sv_json_u64(b, "data_bytes_read", st.bytes_read, true);
	sv_json_u64(b, "data_objects_created", st.objects_created, true);
	sv_json_u64(b, "data_objects_deleted", st.objects_deleted, true);
	sv_json_u64(b, "data_objects_reclaimed", sv_admin_reclaimed(sv), true);
	sv_json_u64(b, "data_objects_cut", sv_admin_cut(sv), true);
	/* The store's own counters (store.h), and the writes queued to it. */
	orch_buf_append(b, ", \"store\": {", 12);
	sv_json_u64(b, "ops", st.ops, false);
	sv_json_u64(b, "commits", st.commits, true);
	sv_json_u64(b, "syncs", st.syncs, true);
	sv_json_u64(b, "sync_calls", st.sync_calls, true);
	sv_json_u64(b, "csum_errors", st.csum_errors, true);
	sv_json_u64(b, "work_chunks", st.work_chunks, true);
	sv_json_u64(b, "checkpoints", st.checkpoints, true);
	sv_json_u64(b, "checkpoint_us", st.checkpoint_us, true);
	sv_json_u64(b, "writes_queued", sv->s_writes.w_submitted - sv->s_writes.w_answered, true);
	orch_buf_append(b, "}", 1);
	sv_json_u64(b, "protocol_errors", sv->s_errors_proto, true);
	sv_json_u64(b, "connections", sv->s_accepted, true);
	sv_json_u64(b, "uptime_ms", orch_time_now_ms() - sv->s_started_ms, true);
	orch_buf_append(b, "}", 1);
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
