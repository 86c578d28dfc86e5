/*
 * The mount's metrics: GET /metrics on -o metrics=HOST:PORT (web/httpd.h),
 * and the latency of every FUSE request.
 *
 * Every counter the page reads is an atomic or sits under its module's
 * own lock (the inode table, the lease cache, the write-behind), so the
 * endpoint's threads read them where they are; nothing waits for a FUSE
 * worker.  The latency of a request is timed by a wrapper around its
 * handler: the handler replies before it returns (write-behind replies
 * before the servers commit, which is what the caller waits for), so the
 * wrapper sees the time from the request's dispatch to its reply.  The
 * wrappers are installed only with metrics on.
 */
#include "mount/mount_i.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cfg.h"
#include "common/log.h"
#include "common/time.h"
#include "common/util.h"
#include "web/httpd.h"

#define MNT_METRICS_TYPES_MAX 256

struct orch_mnt_metrics {
	struct orch_mnt *mm_mnt;
	struct orch_httpd *mm_http;
	char mm_mountpoint[PATH_MAX];
	char mm_cluster[ORCH_CFG_NAME_MAX];
	double mm_started_s;
};

static const char *const mnt_op_names[] = {
#define MNT_OP_NAME(name) #name,
	ORCH_MNT_OPS(MNT_OP_NAME)
#undef MNT_OP_NAME
};

/* --- The page --------------------------------------------------------------------- */

static void mnt_metrics_requests(struct orch_buf *b, struct orch_mnt *m)
{
	struct orch_hist_snap h;
	char labels[128], ename[16];
	uint64_t n;

	orch_prom_family(b, "orchard_mount_requests_total", "counter",
			 "FUSE requests received, by opcode.");
	for (size_t i = 0; i < ORCH_MNT_OP_COUNT; i++)
		if ((n = atomic_load(&m->m_ops[i])))
			orch_prom_u64(b, "orchard_mount_requests_total",
				      orch_prom_labels(labels, sizeof(labels), "type", mnt_op_names[i],
						       NULL), n);
	orch_prom_family(b, "orchard_mount_request_duration_seconds", "histogram",
			 "Time from a FUSE request's dispatch to its reply, by opcode.");
	for (size_t i = 0; i < ORCH_MNT_OP_COUNT; i++) {
		orch_hist_read(&m->m_op_hist[i], &h);
		if (orch_hist_count(&h))
			orch_prom_hist(b, "orchard_mount_request_duration_seconds",
				       orch_prom_labels(labels, sizeof(labels), "type",
							mnt_op_names[i], NULL), &h);
	}
	orch_prom_family(b, "orchard_mount_request_errors_total", "counter",
			 "FUSE requests answered with an error, by errno.");
	for (int e = 1; e < ORCH_MNT_ERRNO_MAX; e++)
		if ((n = atomic_load(&m->m_errors[e])))
			orch_prom_u64(b, "orchard_mount_request_errors_total",
				      orch_prom_labels(labels, sizeof(labels), "errno",
						       e == ORCH_MNT_ERRNO_MAX - 1
							       ? "other" : orch_errno_name(e, ename),
						       NULL), n);
	const struct orch_prom_scalar v[] = {
		{ "orchard_mount_read_bytes_total", "counter", "Bytes returned by reads.",
		  (double)atomic_load(&m->m_bytes_read) },
		{ "orchard_mount_written_bytes_total", "counter", "Bytes taken by writes.",
		  (double)atomic_load(&m->m_bytes_written) },
	};

	orch_prom_scalars(b, v, ORCH_ARRAY_SIZE(v));
}

/* Requests sent to the servers, by message type, and which servers are connected. */
static void mnt_metrics_servers(struct orch_buf *b, struct orch_mnt *m)
{
	const struct orch_cfg *cfg = orch_client_cfg(m->m_cl);
	uint16_t types[MNT_METRICS_TYPES_MAX];
	uint64_t counts[MNT_METRICS_TYPES_MAX];
	size_t ntypes = orch_msg_types(types, MNT_METRICS_TYPES_MAX);
	char labels[128];
	unsigned int up = 0;

	orch_client_request_counts(m->m_cl, counts, ntypes);
	orch_prom_family(b, "orchard_mount_server_requests_total", "counter",
			 "Requests sent to the servers, by message type.");
	for (size_t i = 0; i < ntypes; i++) {
		const char *name = orch_msg_name(types[i]);

		if (!counts[i] || !name)
			continue;
		/* CL2SV_LOOKUP -> LOOKUP, as the servers' own metric names it. */
		if (strlen(name) > 6 && name[5] == '_')
			name += 6;
		orch_prom_u64(b, "orchard_mount_server_requests_total",
			      orch_prom_labels(labels, sizeof(labels), "type", name, NULL),
			      counts[i]);
	}
	orch_prom_family(b, "orchard_mount_server_connected", "gauge",
			 "1 while the mount's connection to the server is up.");
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		bool on = orch_client_conn_gen(m->m_cl, i) != 0;

		up += on;
		orch_prom_u64(b, "orchard_mount_server_connected",
			      orch_prom_labels(labels, sizeof(labels), "server",
					       cfg->servers[i].name, NULL), on);
	}
	orch_prom_gauge(b, "orchard_mount_connections", "Connections to servers that are up.",
			up);
}

static void mnt_metrics_caches(struct orch_buf *b, struct orch_mnt *m)
{
	struct orch_mnt_lc_counts lcc;
	struct orch_mnt_kinval_counts kic;
	struct orch_mnt_wb_counts wbc;
	uint64_t inodes, unknown;

	orch_mnt_lc_counts(&m->m_lc, &lcc);
	orch_mnt_kinval_counts(m, &kic);
	orch_mnt_itab_counts(&m->m_itab, &inodes, &unknown);
	orch_mnt_wb_counts(m, &wbc);
	const struct orch_prom_scalar v[] = {
		{ "orchard_mount_leases", "gauge", "Names and attributes held under leases.",
		  (double)lcc.entries },
		{ "orchard_mount_lease_cache_hits_total", "counter",
		  "Lookups and getattrs answered from the lease cache.", (double)lcc.hits },
		{ "orchard_mount_lease_cache_misses_total", "counter",
		  "Lookups and getattrs the lease cache could not answer.", (double)lcc.misses },
		{ "orchard_mount_lease_pushes_total", "counter",
		  "Invalidations pushed by the servers.", (double)lcc.pushes },
		{ "orchard_mount_lease_renewals_total", "counter",
		  "Leases renewed ahead of their end because they were in use.",
		  (double)lcc.renewals },
		{ "orchard_mount_lease_renewals_dropped_total", "counter",
		  "Renewals not queued because the queue was full.",
		  (double)lcc.renewals_dropped },
		{ "orchard_mount_lease_vouches_total", "counter",
		  "Replica groups that vouched for what they leased (asked 3 times per 1.5 s).",
		  (double)lcc.vouches },
		{ "orchard_mount_lease_vouches_failed_total", "counter",
		  "Vouches a replica group did not give (no leader, or none reached).",
		  (double)lcc.vouches_failed },
		{ "orchard_mount_kernel_invalidations_total", "counter",
		  "Kernel caches dropped because another client changed what they hold.",
		  (double)kic.sent },
		{ "orchard_mount_kernel_invalidations_dropped_total", "counter",
		  "Kernel invalidations not queued (queue full): those live to their timeout.",
		  (double)kic.dropped },
		{ "orchard_mount_inodes", "gauge", "Inodes the kernel holds.", (double)inodes },
		{ "orchard_mount_forget_unknown_total", "counter",
		  "FORGETs of inodes the mount did not know.", (double)unknown },
		{ "orchard_mount_writebehind_bytes", "gauge",
		  "Written bytes answered but not yet committed by the servers.",
		  (double)wbc.in_flight },
		{ "orchard_mount_writebehind_writes_total", "counter",
		  "Writes sent behind their answer.", (double)wbc.writes },
		{ "orchard_mount_writebehind_waits_total", "counter",
		  "Waits for a file's writes in flight (reads, flush, fsync, truncate).",
		  (double)wbc.waits },
		{ "orchard_mount_writebehind_overtaken_total", "counter",
		  "Writes sent again behind an older write of their file a failover held.",
		  (double)wbc.overtaken },
	};

	orch_prom_scalars(b, v, ORCH_ARRAY_SIZE(v));
}

static int mnt_metrics_page(void *arg, struct orch_buf *b, const char **ctype)
{
	struct orch_mnt_metrics *mm = arg;
	char labels[PATH_MAX + 256];

	*ctype = "text/plain; version=0.0.4; charset=utf-8";
	orch_prom_build_info(b, "mount", ORCH_PROTO_VERSION);
	orch_prom_family(b, "orchard_mount_info", "gauge",
			 "Always 1; the labels name the mount point and the cluster.");
	orch_prom_u64(b, "orchard_mount_info",
		      orch_prom_labels(labels, sizeof(labels), "mountpoint", mm->mm_mountpoint,
				       "cluster", mm->mm_cluster, NULL), 1);
	orch_prom_process(b, mm->mm_started_s);
	mnt_metrics_requests(b, mm->mm_mnt);
	mnt_metrics_servers(b, mm->mm_mnt);
	mnt_metrics_caches(b, mm->mm_mnt);
	return 200;
}

static const struct orch_httpd_page mnt_metrics_pages[] = {
	{ "/metrics", mnt_metrics_page },
	{ NULL, NULL },
};

int orch_mnt_metrics_create(struct orch_mnt *m, const char *addr, bool public_ok,
			    const char *mountpoint, const char *cluster)
{
	struct orch_mnt_metrics *mm = calloc(1, sizeof(*mm));
	char err[512];
	int error;

	if (!mm) {
		fprintf(stderr, "orchard-mount: %s\n", strerror(ENOMEM));
		return -ENOMEM;
	}
	mm->mm_mnt = m;
	mm->mm_started_s = (double)orch_time_real_ns() / 1e9;
	/* Before the mount exists, so that realpath does not ask ourselves. */
	if (!realpath(mountpoint, mm->mm_mountpoint))
		snprintf(mm->mm_mountpoint, sizeof(mm->mm_mountpoint), "%s", mountpoint);
	snprintf(mm->mm_cluster, sizeof(mm->mm_cluster), "%s", cluster);
	error = orch_httpd_create(addr, public_ok, mnt_metrics_pages, mm, &mm->mm_http, err,
				  sizeof(err));
	if (error) {
		fprintf(stderr, "orchard-mount: %s; not mounted\n", err);
		free(mm);
		return error;
	}
	m->m_metrics = mm;
	return 0;
}

int orch_mnt_metrics_start(struct orch_mnt *m)
{
	char err[512];
	int error;

	if (!m->m_metrics)
		return 0;
	error = orch_httpd_start(m->m_metrics->mm_http, err, sizeof(err));
	if (error) {
		ORCH_ERR("%s", err);
		return error;
	}
	ORCH_NOTICE("metrics: serving http://%s/metrics",
		    orch_httpd_address(m->m_metrics->mm_http));
	return 0;
}

void orch_mnt_metrics_stop(struct orch_mnt *m)
{
	if (!m->m_metrics)
		return;
	orch_httpd_destroy(m->m_metrics->mm_http);
	free(m->m_metrics);
	m->m_metrics = NULL;
}

/* --- Timing every request ----------------------------------------------------------- */

/*
 * The wrapper of handler @op: the mount is read before the call, since
 * the request is gone once answered.
 */
#define MNT_TIMED(op, OP, params, args)                                               \
	static void mnt_timed_##op params                                             \
	{                                                                             \
		struct orch_mnt *m = orch_mnt_of(req);                                \
		uint64_t t0 = orch_hist_now_ns();                                     \
                                                                                      \
		orch_mnt_ops.op args;                                                 \
		orch_hist_observe(&m->m_op_hist[ORCH_MNT_OP_##OP], orch_hist_now_ns() - t0); \
	}

MNT_TIMED(lookup, LOOKUP, (fuse_req_t req, fuse_ino_t parent, const char *name),
	  (req, parent, name))
MNT_TIMED(forget, FORGET, (fuse_req_t req, fuse_ino_t ino, uint64_t nlookup),
	  (req, ino, nlookup))
MNT_TIMED(forget_multi, BATCH_FORGET,
	  (fuse_req_t req, size_t count, struct fuse_forget_data *forgets),
	  (req, count, forgets))
MNT_TIMED(getattr, GETATTR, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
	  (req, ino, fi))
MNT_TIMED(setattr, SETATTR,
	  (fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
	   struct fuse_file_info *fi),
	  (req, ino, attr, to_set, fi))
MNT_TIMED(readlink, READLINK, (fuse_req_t req, fuse_ino_t ino), (req, ino))
MNT_TIMED(mknod, MKNOD,
	  (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev),
	  (req, parent, name, mode, rdev))
MNT_TIMED(mkdir, MKDIR, (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode),
	  (req, parent, name, mode))
MNT_TIMED(symlink, SYMLINK,
	  (fuse_req_t req, const char *link, fuse_ino_t parent, const char *name),
	  (req, link, parent, name))
MNT_TIMED(unlink, UNLINK, (fuse_req_t req, fuse_ino_t parent, const char *name),
	  (req, parent, name))
MNT_TIMED(rmdir, RMDIR, (fuse_req_t req, fuse_ino_t parent, const char *name),
	  (req, parent, name))
MNT_TIMED(rename, RENAME,
	  (fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
	   const char *newname, unsigned int flags),
	  (req, parent, name, newparent, newname, flags))
MNT_TIMED(link, LINK,
	  (fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname),
	  (req, ino, newparent, newname))
MNT_TIMED(open, OPEN, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
	  (req, ino, fi))
MNT_TIMED(create, CREATE,
	  (fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
	   struct fuse_file_info *fi),
	  (req, parent, name, mode, fi))
MNT_TIMED(read, READ,
	  (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi),
	  (req, ino, size, off, fi))
MNT_TIMED(write, WRITE,
	  (fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
	   struct fuse_file_info *fi),
	  (req, ino, buf, size, off, fi))
MNT_TIMED(flush, FLUSH, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
	  (req, ino, fi))
MNT_TIMED(release, RELEASE, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
	  (req, ino, fi))
MNT_TIMED(fsync, FSYNC,
	  (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
	  (req, ino, datasync, fi))
MNT_TIMED(copy_file_range, COPY_FILE_RANGE,
	  (fuse_req_t req, fuse_ino_t ino_in, off_t off_in, struct fuse_file_info *fi_in,
	   fuse_ino_t ino_out, off_t off_out, struct fuse_file_info *fi_out, size_t len,
	   int flags),
	  (req, ino_in, off_in, fi_in, ino_out, off_out, fi_out, len, flags))
MNT_TIMED(fallocate, FALLOCATE,
	  (fuse_req_t req, fuse_ino_t ino, int mode, off_t off, off_t len,
	   struct fuse_file_info *fi),
	  (req, ino, mode, off, len, fi))
MNT_TIMED(opendir, OPENDIR, (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi),
	  (req, ino, fi))
MNT_TIMED(readdir, READDIR,
	  (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi),
	  (req, ino, size, off, fi))
MNT_TIMED(readdirplus, READDIRPLUS,
	  (fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi),
	  (req, ino, size, off, fi))
MNT_TIMED(releasedir, RELEASEDIR,
	  (fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi), (req, ino, fi))
MNT_TIMED(fsyncdir, FSYNCDIR,
	  (fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi),
	  (req, ino, datasync, fi))
MNT_TIMED(statfs, STATFS, (fuse_req_t req, fuse_ino_t ino), (req, ino))
MNT_TIMED(setxattr, SETXATTR,
	  (fuse_req_t req, fuse_ino_t ino, const char *name, const char *value, size_t size,
	   int flags),
	  (req, ino, name, value, size, flags))
MNT_TIMED(getxattr, GETXATTR, (fuse_req_t req, fuse_ino_t ino, const char *name, size_t size),
	  (req, ino, name, size))
MNT_TIMED(listxattr, LISTXATTR, (fuse_req_t req, fuse_ino_t ino, size_t size),
	  (req, ino, size))
MNT_TIMED(removexattr, REMOVEXATTR, (fuse_req_t req, fuse_ino_t ino, const char *name),
	  (req, ino, name))
MNT_TIMED(access, ACCESS, (fuse_req_t req, fuse_ino_t ino, int mask), (req, ino, mask))

const struct fuse_lowlevel_ops *orch_mnt_ops_timed(void)
{
	static struct fuse_lowlevel_ops ops;

	/* Same table, same NULLs: a handler the mount lacks stays absent. */
	ops = orch_mnt_ops;
#define MNT_SET(op) ops.op = orch_mnt_ops.op ? mnt_timed_##op : NULL
	MNT_SET(lookup);
	MNT_SET(forget);
	MNT_SET(forget_multi);
	MNT_SET(getattr);
	MNT_SET(setattr);
	MNT_SET(readlink);
	MNT_SET(mknod);
	MNT_SET(mkdir);
	MNT_SET(symlink);
	MNT_SET(unlink);
	MNT_SET(rmdir);
	MNT_SET(rename);
	MNT_SET(link);
	MNT_SET(open);
	MNT_SET(create);
	MNT_SET(read);
	MNT_SET(write);
	MNT_SET(flush);
	MNT_SET(release);
	MNT_SET(fsync);
	MNT_SET(copy_file_range);
	MNT_SET(fallocate);
	MNT_SET(opendir);
	MNT_SET(readdir);
	MNT_SET(readdirplus);
	MNT_SET(releasedir);
	MNT_SET(fsyncdir);
	MNT_SET(statfs);
	MNT_SET(setxattr);
	MNT_SET(getxattr);
	MNT_SET(listxattr);
	MNT_SET(removexattr);
	MNT_SET(access);
#undef MNT_SET
	return &ops;
}
