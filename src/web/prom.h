/*
 * Metrics in the Prometheus text format (version 0.0.4), and the latency
 * histogram the servers and the mount keep.
 *
 *   # HELP orchard_server_requests_total Requests handled, by type.
 *   # TYPE orchard_server_requests_total counter
 *   orchard_server_requests_total{type="LOOKUP",from="client"} 42
 *
 * A histogram has fixed buckets, 50 us to 10 s (ORCH_HIST_BOUNDS), so that
 * an observation is a few compares and two relaxed atomic adds: cheap on
 * the server's loop thread and on the mount's FUSE workers, and readable
 * from any other thread without a lock.  Its count is the sum of its
 * buckets, so a snapshot read while observations land is still a valid
 * histogram (the +Inf bucket equals _count); only _sum may lag or lead by
 * the observations in flight.
 *
 * The writer appends to a bounded orch_buf; an append that does not fit
 * leaves the buffer's sticky error set (buf.h), which the caller checks
 * once at the end.
 */
#ifndef ORCH_WEB_PROM_H
#define ORCH_WEB_PROM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

/* Upper bounds of the buckets, in ns: 50 us, 100 us, 250 us ... 10 s. */
#define ORCH_HIST_BOUNDS 17

struct orch_hist {
	/* [i]: observations <= bound i and above bound i-1; [ORCH_HIST_BOUNDS]: above 10 s */
	_Atomic uint64_t h_n[ORCH_HIST_BOUNDS + 1];
	_Atomic uint64_t h_sum_ns;
};

/* A copy of a histogram, read at one moment (more or less: see above). */
struct orch_hist_snap {
	uint64_t n[ORCH_HIST_BOUNDS + 1];
	uint64_t sum_ns;
};

/* Records one observation of @ns nanoseconds.  Any thread. */
void orch_hist_observe(struct orch_hist *h, uint64_t ns);
/* Copies @h into @out.  Any thread. */
void orch_hist_read(const struct orch_hist *h, struct orch_hist_snap *out);
/* Observations in @s. */
uint64_t orch_hist_count(const struct orch_hist_snap *s);
/* Monotonic nanoseconds, for timing what a histogram observes. */
uint64_t orch_hist_now_ns(void);

/*
 * Label text for a sample: `k1="v1",k2="v2"` from NULL-terminated pairs of
 * key and value, values escaped as the format wants (\\, \", \n).  Returns
 * @out; a label set that does not fit @size is cut at a pair boundary.
 */
char *orch_prom_labels(char *out, size_t size, ...) __attribute__((sentinel));

/*
 * The # HELP and # TYPE lines of family @name; @type is "counter",
 * "gauge" or "histogram".  Write each family's lines once, before its
 * samples.
 */
void orch_prom_family(struct orch_buf *b, const char *name, const char *type,
		      const char *help);
/* One sample line: @name{@labels} @v; @labels may be NULL or "". */
void orch_prom_u64(struct orch_buf *b, const char *name, const char *labels, uint64_t v);
/* A family and its one unlabelled sample. */
void orch_prom_counter(struct orch_buf *b, const char *name, const char *help, uint64_t v);
void orch_prom_gauge(struct orch_buf *b, const char *name, const char *help, double v);
/* One unlabelled sample and its family: a row of a table of them. */
struct orch_prom_scalar {
	const char *name;
	const char *type;         /* "counter" or "gauge" */
	const char *help;
	double value;             /* whole numbers print whole, up to 2^53 exactly */
};
/* Each of @v[0..@n) as its family and its sample. */
void orch_prom_scalars(struct orch_buf *b, const struct orch_prom_scalar *v, size_t n);

/*
 * The samples of histogram @name (a family declared "histogram") in
 * seconds: @name_bucket{@labels,le="..."} for every bound and +Inf,
 * @name_sum and @name_count.
 */
void orch_prom_hist(struct orch_buf *b, const char *name, const char *labels,
		    const struct orch_hist_snap *s);

/*
 * orchard_build_info{version,protocol,role} 1, and the process's own
 * metrics as client libraries name them: process_start_time_seconds
 * (@start_s, Unix time), process_cpu_seconds_total,
 * process_resident_memory_bytes, process_open_fds (from /proc/self).
 */
void orch_prom_build_info(struct orch_buf *b, const char *role, unsigned int protocol);
void orch_prom_process(struct orch_buf *b, double start_s);

/*
 * The symbolic name of errno value @e ("ENOENT"), or "E<number>" in @tmp
 * (at least 16 bytes) for a value glibc does not name.
 */
const char *orch_errno_name(int e, char *tmp);


#endif
