/*
 * GET /metrics and the status page of a server.  See sv_metrics.h for the
 * threads; docs/ADMIN.md, "Monitoring", lists every metric.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "client/status.h"
#include "common/log.h"
#include "common/util.h"
#include "common/version.h"
#include "server/sv_metrics.h"
#include "server/sv_stats.h"
#include "store/agspace.h"
#include "web/httpd.h"

#define SV_METRICS_SLICE_MS 100   /* a waiting page looks for a stop this often */
#define SV_METRICS_AGS_MAX 4096   /* AGs listed per server */
#define SV_STATUS_TIMEOUT_MS 2000 /* a server that takes longer is down on the page */
#define SV_STATUS_REFRESH_S 5

struct sv_metrics {
	struct sv_server *m_sv;
	struct orch_httpd *m_http;
	struct orch_client *m_cl;     /* the status page's (thread safe) */
	atomic_bool m_stopping;
	char m_meta_wal[PATH_MAX];
	char m_store_wal[PATH_MAX];
};

/* --- A snapshot of the loop's counters --------------------------------------------- */

/*
 * One page's request to the loop.  Two references: the page's and the
 * loop's; whichever lets go last frees it, so a page that gave up waiting
 * leaves it to the loop, and a loop that never runs it (stopped) to the
 * final orch_ev_run_posts.
 */
struct sv_snap_job {
	pthread_mutex_t j_lock;
	pthread_cond_t j_cv;
	unsigned int j_refs;          /* protected by j_lock */
	bool j_done;                  /* protected by j_lock: j_snap is filled */
	bool j_abandoned;             /* protected by j_lock: nobody will read j_snap */
	struct sv_server *j_sv;
	struct sv_stats_snap j_snap;  /* the loop's until j_done, then the page's */
};

static void snap_job_put(struct sv_snap_job *j)
{
	bool last;

	pthread_mutex_lock(&j->j_lock);
	last = --j->j_refs == 0;
	pthread_mutex_unlock(&j->j_lock);
	if (!last)
		return;
	pthread_mutex_destroy(&j->j_lock);
	pthread_cond_destroy(&j->j_cv);
	free(j);
}

/* On the loop thread. */
static void snap_job_run(void *arg)
{
	struct sv_snap_job *j = arg;
	bool abandoned;

	pthread_mutex_lock(&j->j_lock);
	abandoned = j->j_abandoned;
	pthread_mutex_unlock(&j->j_lock);
	if (!abandoned)
		sv_stats_collect(j->j_sv, &j->j_snap);
	pthread_mutex_lock(&j->j_lock);
	j->j_done = true;
	pthread_cond_signal(&j->j_cv);
	pthread_mutex_unlock(&j->j_lock);
	snap_job_put(j);
}

static void ts_after_ms(struct timespec *ts, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += (time_t)(ms / 1000);
	ts->tv_nsec += (long)(ms % 1000) * 1000000;
	if (ts->tv_nsec >= 1000000000) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000;
	}
}

/*
 * The loop's counters, copied by the loop.  0, or -EAGAIN if the loop did
 * not get to it within SV_METRICS_WAIT_MS, -ESHUTDOWN if we are stopping,
 * -ENOMEM.  An endpoint thread.
 */
static int sv_metrics_snapshot(struct sv_metrics *m, struct sv_stats_snap *out)
{
	struct sv_snap_job *j = calloc(1, sizeof(*j));
	pthread_condattr_t ca;
	bool done;

	if (!j)
		return -ENOMEM;
	pthread_mutex_init(&j->j_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&j->j_cv, &ca);
	pthread_condattr_destroy(&ca);
	j->j_refs = 2;
	j->j_sv = m->m_sv;
	if (atomic_load(&m->m_stopping)) {
		j->j_refs = 1;
		snap_job_put(j);
		return -ESHUTDOWN;
	}
	orch_ev_post(m->m_sv->s_ev, snap_job_run, j);
	pthread_mutex_lock(&j->j_lock);
	for (unsigned int waited = 0; !j->j_done && waited < SV_METRICS_WAIT_MS &&
	     !atomic_load(&m->m_stopping); waited += SV_METRICS_SLICE_MS) {
		struct timespec ts;

		ts_after_ms(&ts, SV_METRICS_SLICE_MS);
		while (!j->j_done && pthread_cond_timedwait(&j->j_cv, &j->j_lock, &ts) == 0)
			;
	}
	done = j->j_done;
	if (done)
		*out = j->j_snap;
	else
		j->j_abandoned = true;
	pthread_mutex_unlock(&j->j_lock);
	snap_job_put(j);
	return done ? 0 : atomic_load(&m->m_stopping) ? -ESHUTDOWN : -EAGAIN;
}

/* --- /metrics ---------------------------------------------------------------------------- */

/* type="LOOKUP",from="client" of a message name such as "CL2SV_LOOKUP". */
static char *sv_metrics_type_labels(const char *name, char *out, size_t size)
{
	static const struct {
		const char *prefix, *from;
	} from[] = {
		{ "CL2SV_", "client" }, { "SV2SV_", "server" }, { "AD2SV_", "admin" },
		{ "AN2AN_", "any" },    { "SV2CL_", "server" },
	};
	const char *who = "other";

	for (size_t i = 0; i < ORCH_ARRAY_SIZE(from); i++) {
		if (!strncmp(name, from[i].prefix, 6)) {
			who = from[i].from;
			name += 6;
			break;
		}
	}
	return orch_prom_labels(out, size, "type", name, "from", who, NULL);
}

static void sv_metrics_requests(struct orch_buf *b, struct sv_server *sv,
				const struct sv_stats_snap *s)
{
	uint16_t types[SV_MSG_TYPES_MAX];
	size_t ntypes = orch_msg_types(types, SV_MSG_TYPES_MAX);
	struct orch_hist_snap h;
	char labels[128], ename[16];

	orch_prom_family(b, "orchard_server_requests_total", "counter",
			 "Requests received, by message type and by who sends it.");
	for (size_t i = 0; i < ntypes && i < SV_MSG_TYPES_MAX; i++)
		if (s->requests[i])
			orch_prom_u64(b, "orchard_server_requests_total",
				      sv_metrics_type_labels(orch_msg_name(types[i]), labels,
							     sizeof(labels)),
				      s->requests[i]);
	orch_prom_family(b, "orchard_server_request_duration_seconds", "histogram",
			 "Time from a request's arrival to its reply, by message type.");
	for (size_t i = 0; i < ntypes && i < SV_MSG_TYPES_MAX; i++) {
		orch_hist_read(&sv->s_req_hist[i], &h);
		if (orch_hist_count(&h))
			orch_prom_hist(b, "orchard_server_request_duration_seconds",
				       sv_metrics_type_labels(orch_msg_name(types[i]), labels,
							      sizeof(labels)),
				       &h);
	}
	orch_prom_family(b, "orchard_server_request_errors_total", "counter",
			 "Replies with an error, by errno (\"other\": above the last known).");
	for (int e = 1; e < SV_ERRNO_MAX; e++)
		if (s->errors[e])
			orch_prom_u64(b, "orchard_server_request_errors_total",
				      orch_prom_labels(labels, sizeof(labels), "errno",
						       e == SV_ERRNO_MAX - 1 ? "other"
									    : orch_errno_name(e, ename),
						       NULL),
				      s->errors[e]);
	const struct orch_prom_scalar v[] = {
		{ "orchard_server_protocol_errors_total", "counter",
		  "Malformed frames and requests naming servers the cluster lacks.",
		  (double)s->protocol_errors },
		{ "orchard_server_received_bytes_total", "counter",
		  "Bytes received on client and peer connections.", (double)s->bytes_in },
		{ "orchard_server_sent_bytes_total", "counter",
		  "Bytes sent on client and peer connections.", (double)s->bytes_out },
		{ "orchard_server_connections", "gauge", "Client and admin connections open.",
		  (double)s->conns_open },
		{ "orchard_server_connections_accepted_total", "counter",
		  "Client and admin connections accepted.", (double)s->accepted },
		{ "orchard_server_connections_refused_total", "counter",
		  "Connections closed at once because max_connections were open.",
		  (double)s->conns_refused },
		{ "orchard_server_handshake_timeouts_total", "counter",
		  "Connections closed for not authenticating within handshake_timeout_ms.",
		  (double)s->conns_timed_out },
		{ "orchard_server_accept_pauses_total", "counter",
		  "Pauses in accepting connections: no descriptor or memory left.",
		  (double)s->accept_pauses },
	};

	orch_prom_scalars(b, v, ORCH_ARRAY_SIZE(v));
}

/* Bytes of file @path, 0 if it does not exist. */
static uint64_t sv_metrics_file_size(const char *path)
{
	struct stat sb;

	return path[0] && stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static void sv_metrics_durability(struct orch_buf *b, struct sv_metrics *m,
				  const struct sv_stats_snap *s)
{
	const struct orch_store_stats *st = &s->store;
	const struct orch_prom_scalar v[] = {
		{ "orchard_namespace_commits_total", "counter",
		  "Namespace (meta.db) write transactions.", (double)s->commits },
		{ "orchard_namespace_inodes", "gauge", "Inodes held by this server.",
		  (double)s->inodes },
		{ "orchard_namespace_open_files", "gauge",
		  "Files of this server some mount has registered open.", (double)s->open_files },
		{ "orchard_namespace_orphans", "gauge",
		  "Files kept open after their last name went (orphans).", (double)s->orphans },
		{ "orchard_namespace_orphans_freed_total", "counter",
		  "Orphans freed: last close, or their mounts' leases gone.",
		  (double)s->orphans_freed },
		{ "orchard_namespace_wal_bytes", "gauge", "Size of the namespace's WAL file.",
		  (double)sv_metrics_file_size(m->m_meta_wal) },
		{ "orchard_namespace_wal_restarts_total", "counter",
		  "Checkpoints that restarted the namespace WAL.", (double)s->wal_restarts },
		{ "orchard_namespace_wal_restart_seconds_total", "counter",
		  "Time those restarts took, lock waits included.", (double)s->wal_restart_us / 1e6 },
		{ "orchard_namespace_wal_wait_seconds_total", "counter",
		  "Time requests waited for the WAL's write lock.", (double)s->wal_wait_us / 1e6 },
		{ "orchard_server_flushes_total", "counter",
		  "Flushes: the store and the namespace WAL made durable (group commits).",
		  (double)s->syncs },
		{ "orchard_server_fsync_requests_total", "counter",
		  "fsync requests answered by those flushes.", (double)s->fsync_requests },
		{ "orchard_store_operations_total", "counter",
		  "Mutations applied by the store's writer.", (double)st->ops },
		{ "orchard_store_commits_total", "counter",
		  "Store write transactions (operations per commit: the ratio of the two rates).",
		  (double)st->commits },
		{ "orchard_store_syncs_total", "counter", "Flushes done by the store.",
		  (double)st->syncs },
		{ "orchard_store_sync_calls_total", "counter",
		  "Calls for a store flush (calls per flush: sharing).", (double)st->sync_calls },
		{ "orchard_store_checkpoints_total", "counter", "Store WAL checkpoints.",
		  (double)st->checkpoints },
		{ "orchard_store_checkpoint_seconds_total", "counter",
		  "Time the store's checkpoints took.", (double)st->checkpoint_us / 1e6 },
		{ "orchard_store_wal_bytes", "gauge", "Size of the store's WAL file.",
		  (double)sv_metrics_file_size(m->m_store_wal) },
		{ "orchard_store_writes_queued", "gauge", "Data writes waiting for the store.",
		  (double)s->writes_queued },
	};
	struct orch_hist_snap h;

	orch_prom_scalars(b, v, ORCH_ARRAY_SIZE(v));
	orch_prom_family(b, "orchard_server_flush_duration_seconds", "histogram",
			 "Time each flush took (the fsyncs of the store and the WAL).");
	orch_hist_read(&m->m_sv->s_flush_hist, &h);
	orch_prom_hist(b, "orchard_server_flush_duration_seconds", NULL, &h);
}

static void sv_metrics_space(struct orch_buf *b, struct sv_metrics *m,
			     const struct sv_stats_snap *s)
{
	struct orch_store_ag_space *ags = calloc(SV_METRICS_AGS_MAX, sizeof(*ags));
	char labels[32], agnum[16];
	size_t n = 0;

	const struct orch_store_stats *st = &s->store;
	const struct orch_prom_scalar v[] = {
		{ "orchard_store_written_bytes_total", "counter", "Data bytes written.",
		  (double)st->bytes_written },
		{ "orchard_store_read_bytes_total", "counter", "Data bytes read.",
		  (double)st->bytes_read },
		{ "orchard_store_checksum_errors_total", "counter",
		  "Blocks that failed their checksum.", (double)st->csum_errors },
		{ "orchard_store_objects", "gauge", "Data objects held.", (double)s->objects },
		{ "orchard_store_objects_created_total", "counter", "Data objects created.",
		  (double)st->objects_created },
		{ "orchard_store_objects_deleted_total", "counter", "Data objects deleted.",
		  (double)st->objects_deleted },
		{ "orchard_store_capacity_bytes", "gauge", "Data bytes the store can hold.",
		  (double)s->capacity },
		{ "orchard_store_free_bytes", "gauge", "Free data bytes in the store.",
		  (double)s->free },
		{ "orchard_store_failed", "gauge",
		  "1 if the store failed (an I/O error lost data: read-only until restarted, "
		  "docs/ADMIN.md), else 0.", s->store_error ? 1.0 : 0.0 },
		{ "orchard_store_available_bytes", "gauge",
		  "Free bytes the store can still write (the host's file system may hold less "
		  "than the store's free blocks).", (double)s->avail },
	};

	orch_prom_scalars(b, v, ORCH_ARRAY_SIZE(v));
	if (!ags || orch_store_ag_space(m->m_sv->s_store, ags, SV_METRICS_AGS_MAX, &n))
		n = 0;
	for (int k = 0; k < 3; k++) {
		static const char *const fam[3][2] = {
			{ "orchard_store_ag_blocks", "Blocks of each allocation group (4 KiB each)." },
			{ "orchard_store_ag_free_blocks", "Free blocks of each allocation group." },
			{ "orchard_store_ag_used_blocks",
			  "Used blocks of each allocation group (static metadata included)." },
		};

		orch_prom_family(b, fam[k][0], "gauge", fam[k][1]);
		for (size_t i = 0; i < n; i++) {
			uint64_t free_blocks = ORCH_MIN(ags[i].free, ags[i].blocks);

			snprintf(agnum, sizeof(agnum), "%" PRIu32, ags[i].ag);
			orch_prom_u64(b, fam[k][0],
				      orch_prom_labels(labels, sizeof(labels), "ag", agnum, NULL),
				      k == 0 ? ags[i].blocks : k == 1 ? free_blocks
								   : ags[i].blocks - free_blocks);
		}
	}
	free(ags);
}

static void sv_metrics_rest(struct orch_buf *b, const struct sv_stats_snap *s)
{
	const struct orch_prom_scalar v[] = {
		{ "orchard_server_leases", "gauge", "Lease records held for clients.",
		  (double)s->leases },
		{ "orchard_server_lease_grants_total", "counter", "Lease records made.",
		  (double)s->lease_grants },
		{ "orchard_server_lease_pushes_total", "counter",
		  "Invalidations and revokes pushed to clients.", (double)s->lease_pushes },
		{ "orchard_server_lease_revokes_total", "counter",
		  "Times a full lease table revoked every lease.", (double)s->lease_revokes },
		{ "orchard_server_lease_acks_total", "counter",
		  "Acknowledgements of pushes received from clients.", (double)s->acks.acks },
		{ "orchard_server_replies_held_total", "counter",
		  "Replies held until other holders acknowledged their pushes.",
		  (double)s->acks.parked },
		{ "orchard_server_replies_held_by_expiry_total", "counter",
		  "Held replies released by a holder's lease running out, not its ack.",
		  (double)s->acks.by_expiry },
		{ "orchard_server_replies_held_seconds_total", "counter",
		  "Time replies were held for acknowledgements.",
		  (double)s->acks.wait_us / 1e6 },
		{ "orchard_server_intents_done_total", "counter",
		  "Cross-server operations finished.", (double)s->intents_done },
		{ "orchard_server_writer_inodes", "gauge", "Files with registered writers.",
		  (double)s->writer_inodes },
		{ "orchard_server_writer_registrations", "gauge", "Writer registrations held.",
		  (double)s->writer_regs },
		{ "orchard_server_writer_cuts_total", "counter",
		  "Cut rounds of bytes past a file's size.", (double)s->writer_cuts },
		{ "orchard_server_data_objects_reclaimed_total", "counter",
		  "Data objects of lost inodes the sweeps deleted.", (double)s->reclaimed },
		{ "orchard_server_data_objects_cut_total", "counter",
		  "Data objects whose dead bytes past the size the sweeps cut.", (double)s->cut },
		{ "orchard_scrub_runs_total", "counter", "Scrubs finished since start.",
		  (double)s->scrub.runs },
		{ "orchard_scrub_last_findings", "gauge",
		  "What the last scrub found (0 before the first).", (double)s->scrub.findings },
		{ "orchard_scrub_last_success", "gauge",
		  "1 if the last scrub finished (findings or not), 0 if it failed or none ran.",
		  s->scrub.runs && !s->scrub.error ? 1 : 0 },
		{ "orchard_scrub_last_end_timestamp_seconds", "gauge",
		  "When the last scrub ended, since the Unix epoch (0: none yet).",
		  (double)s->scrub.end_s },
		{ "orchard_scrub_last_duration_seconds", "gauge", "How long the last scrub took.",
		  (double)s->scrub.ms / 1e3 },
	};

	orch_prom_scalars(b, v, ORCH_ARRAY_SIZE(v));
}

static int sv_metrics_page(void *arg, struct orch_buf *b, const char **ctype)
{
	struct sv_metrics *m = arg;
	struct sv_server *sv = m->m_sv;
	const struct orch_server_cfg *me = sv->s_me;
	struct sv_stats_snap s = { 0 };
	char labels[256], index[16];
	int error;

	error = sv_metrics_snapshot(m, &s);
	if (error) {
		orch_buf_printf(b, "the server's loop did not answer: %s\n", strerror(-error));
		return 503;
	}
	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	orch_prom_build_info(b, "server", ORCH_PROTO_VERSION);
	snprintf(index, sizeof(index), "%u", sv->s_index);
	orch_prom_family(b, "orchard_server_info", "gauge",
			 "Always 1; the labels name this server and its cluster.");
	orch_prom_u64(b, "orchard_server_info",
		      orch_prom_labels(labels, sizeof(labels), "server", me->name, "index", index,
				       "cluster", sv->s_cfg.cluster_name, NULL), 1);
	orch_prom_process(b, (double)s.started_real_ms / 1e3);
	sv_metrics_requests(b, sv, &s);
	sv_metrics_durability(b, m, &s);
	sv_metrics_space(b, m, &s);
	sv_metrics_rest(b, &s);
	return 200;
}

/* --- The status page -------------------------------------------------------------------- */

static const char sv_status_css[] =
	"body{font:14px/1.45 'DejaVu Sans',system-ui,sans-serif;margin:24px;color:#1d2327;"
	"background:#f6f7f7}"
	"h1{font-size:21px;margin:0 0 2px}"
	".sub{color:#646970;margin:0 0 16px}"
	".cards{display:flex;gap:12px;margin:0 0 16px;flex-wrap:wrap}"
	".card{background:#fff;border:1px solid #dcdcde;border-radius:6px;padding:10px 16px;"
	"min-width:140px;color:#646970}"
	".card b{display:block;font-size:21px;color:#1d2327}"
	".card.bad b{color:#b32d2e}"
	"table{border-collapse:collapse;background:#fff;border:1px solid #dcdcde;width:100%}"
	"th,td{padding:8px 10px;border-bottom:1px solid #f0f0f1;text-align:left;"
	"white-space:nowrap}"
	"th{background:#f0f0f1;font-weight:600}"
	".n{text-align:right;font-variant-numeric:tabular-nums}"
	".st{display:inline-block;padding:1px 9px;border-radius:10px;font-weight:600;"
	"font-size:12px}"
	"tr.up .st{background:#d7f5dd;color:#0a6b1f}"
	"tr.down .st{background:#fbdada;color:#a00}"
	"tr.down td{color:#8c8f94}"
	".bar{display:inline-block;width:80px;height:8px;background:#e4e4e4;border-radius:4px;"
	"vertical-align:middle;margin-right:8px;overflow:hidden}"
	".bar i{display:block;height:8px;background:#2271b1}"
	".warn{color:#b32d2e;font-weight:600}"
	"footer{color:#646970;margin-top:12px;font-size:12px}";

static double sv_status_pct(uint64_t part, uint64_t whole)
{
	return whole ? 100.0 * (double)part / (double)whole : 0;
}

static void sv_status_row(struct orch_buf *b, const struct orch_cfg *cfg, unsigned int i,
			  bool self, const struct orch_status_srv *s, int64_t now_s)
{
	const struct orch_server_cfg *sc = &cfg->servers[i];
	char addr[300], cap[32], used[32], up[32], scrub[96];
	uint64_t u = s->capacity - ORCH_MIN(s->free, s->capacity);
	bool bad;

	snprintf(addr, sizeof(addr), "%s:%u", sc->host, sc->port);
	orch_buf_printf(b, "<tr class=\"%s\"><td><b>",
			s->error || s->store_error[0] ? "down" : "up");
	orch_html_escape(b, sc->name);
	orch_buf_printf(b, "</b>%s<td>", self ? " (this server)" : "");
	orch_html_escape(b, addr);
	orch_buf_printf(b, "<td><span class=\"st\">%s</span>",
			s->error ? "down" : s->store_error[0] ? "failed" : "up");
	if (s->error) {
		orch_buf_printf(b, "<td colspan=\"7\">%s</tr>\n", orch_status_why(s->error));
		return;
	}
	orch_status_bytes(s->capacity, cap, sizeof(cap));
	orch_status_bytes(u, used, sizeof(used));
	orch_status_duration(s->uptime_ms / 1000, up, sizeof(up));
	orch_status_scrub(s, now_s, scrub, sizeof(scrub), &bad);
	orch_buf_printf(b, "<td>");
	orch_html_escape(b, s->version);
	orch_buf_printf(b, "<td>%s<td class=\"n\">%s<td><span class=\"bar\"><i style=\"width:%.0f%%\">"
			   "</i></span>%s (%.1f%%)<td class=\"n\">%.1f<td class=\"n\">%" PRIu64
			   "<td%s>%s</tr>\n",
			up, cap, sv_status_pct(u, s->capacity), used, sv_status_pct(u, s->capacity),
			s->requests_per_s, s->connections, bad ? " class=\"warn\"" : "", scrub);
}

static int sv_status_page(void *arg, struct orch_buf *b, const char **ctype)
{
	struct sv_metrics *m = arg;
	const struct orch_cfg *cfg = &m->m_sv->s_cfg;
	struct orch_status_srv *srv = calloc(ORCH_SERVERS_MAX, sizeof(*srv));
	uint64_t cap = 0, used = 0;
	double rate = 0;
	char capt[32], usedt[32], when[64];
	time_t now = time(NULL);
	unsigned int up;
	struct tm tm;

	if (!srv) {
		orch_buf_printf(b, "out of memory\n");
		return 503;
	}
	*ctype = "text/html; charset=utf-8";
	up = orch_status_query(m->m_cl, srv);
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		if (srv[i].error)
			continue;
		cap += srv[i].capacity;
		used += srv[i].capacity - ORCH_MIN(srv[i].free, srv[i].capacity);
		rate += srv[i].requests_per_s;
	}
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
	orch_status_bytes(cap, capt, sizeof(capt));
	orch_status_bytes(used, usedt, sizeof(usedt));
	orch_buf_printf(b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
			   "<meta http-equiv=\"refresh\" content=\"%d\">"
			   "<meta name=\"viewport\" content=\"width=device-width\"><title>",
			SV_STATUS_REFRESH_S);
	orch_html_escape(b, cfg->cluster_name);
	orch_buf_printf(b, ": %u of %u servers up</title><style>%s</style></head><body>\n"
			   "<h1>Orchard cluster ", up, cfg->nservers, sv_status_css);
	orch_html_escape(b, cfg->cluster_name);
	orch_buf_printf(b, "</h1>\n<p class=\"sub\">As seen by ");
	orch_html_escape(b, m->m_sv->s_me->name);
	orch_buf_printf(b, " at %s; refreshed every %d s</p>\n<div class=\"cards\">"
			   "<div class=\"card%s\">Servers up<b>%u of %u</b></div>"
			   "<div class=\"card\">Capacity<b>%s</b></div>"
			   "<div class=\"card\">Used<b>%s (%.1f%%)</b></div>"
			   "<div class=\"card\">Requests/s<b>%.1f</b></div></div>\n"
			   "<table><tr><th>Server<th>Address<th>State<th>Version<th>Uptime"
			   "<th class=\"n\">Capacity<th>Used<th class=\"n\">Requests/s"
			   "<th class=\"n\">Connections<th>Last scrub</tr>\n",
			when, SV_STATUS_REFRESH_S, up < cfg->nservers ? " bad" : "", up,
			cfg->nservers, capt, usedt, sv_status_pct(used, cap), rate);
	for (unsigned int i = 0; i < cfg->nservers; i++)
		sv_status_row(b, cfg, i, i == m->m_sv->s_index, &srv[i], (int64_t)now);
	orch_buf_printf(b, "</table>\n<footer>Capacity and use are of the servers that answered. "
			   "Metrics of this server: <a href=\"/metrics\">/metrics</a>. "
			   "Orchard " ORCH_VERSION ".</footer>\n</body></html>\n");
	free(srv);
	return 200;
}

/* --- Start and stop ------------------------------------------------------------------------- */

static const struct orch_httpd_page sv_metrics_pages[] = {
	{ "/metrics", sv_metrics_page },
	{ "/", sv_status_page },
	{ "/status", sv_status_page },
	{ NULL, NULL },
};

int sv_metrics_create(struct sv_server *sv)
{
	const struct orch_server_cfg *me = sv->s_me;
	struct sv_metrics *m;
	char err[512];
	int error;

	if (!me->metrics[0])
		return 0;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->m_sv = sv;
	error = orch_httpd_create(me->metrics, me->metrics_public, sv_metrics_pages, m,
				  &m->m_http, err, sizeof(err));
	if (error) {
		ORCH_ERR("%s", err);
		free(m);
		return error;
	}
	sv->s_metrics = m;
	return 0;
}

int sv_metrics_start(struct sv_server *sv)
{
	const struct orch_server_cfg *me = sv->s_me;
	struct sv_metrics *m = sv->s_metrics;
	char err[512];
	int error;

	if (!m)
		return 0;
	snprintf(m->m_meta_wal, sizeof(m->m_meta_wal), "%s-wal", orch_meta_db_path(sv->s_meta));
	if (snprintf(m->m_store_wal, sizeof(m->m_store_wal), "%s/store.db-wal", me->data_dir) >=
	    (int)sizeof(m->m_store_wal))
		m->m_store_wal[0] = '\0'; /* a path too long to stat: no size shown */
	error = orch_client_create(&sv->s_cfg, &m->m_cl);
	if (error) {
		ORCH_ERR("cannot start the metrics endpoint: %s", strerror(-error));
		return error;
	}
	orch_client_set_timeout(m->m_cl, ORCH_MIN(sv->s_cfg.op_timeout_ms,
						  (uint32_t)SV_STATUS_TIMEOUT_MS));
	error = orch_httpd_start(m->m_http, err, sizeof(err));
	if (error) {
		ORCH_ERR("%s", err);
		return error;
	}
	ORCH_NOTICE("metrics: serving http://%s/metrics and the status page", me->metrics);
	return 0;
}

void sv_metrics_stop(struct sv_server *sv)
{
	struct sv_metrics *m = sv->s_metrics;

	if (!m)
		return;
	atomic_store(&m->m_stopping, true);
	orch_httpd_destroy(m->m_http);
	orch_client_destroy(m->m_cl);
	free(m);
	sv->s_metrics = NULL;
}
