/* The Prometheus text format and latency histograms.  See prom.h. */
#include "web/prom.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/version.h"

static const uint64_t orch_hist_bounds_ns[ORCH_HIST_BOUNDS] = {
	50000, 100000, 250000, 500000,                 /* 50 us .. 500 us */
	1000000, 2500000, 5000000, 10000000,           /* 1 ms .. 10 ms */
	25000000, 50000000, 100000000, 250000000,      /* 25 ms .. 250 ms */
	500000000, 1000000000, 2500000000, 5000000000, /* 500 ms .. 5 s */
	10000000000,                                   /* 10 s */
};

/* The le="" labels of the bounds, as Prometheus clients print them. */
static const char *const hist_le[ORCH_HIST_BOUNDS] = {
	"5e-05", "0.0001", "0.00025", "0.0005", "0.001", "0.0025", "0.005", "0.01",
	"0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10",
};

void orch_hist_observe(struct orch_hist *h, uint64_t ns)
{
	size_t i = 0;

	while (i < ORCH_HIST_BOUNDS && ns > orch_hist_bounds_ns[i])
		i++;
	atomic_fetch_add_explicit(&h->h_n[i], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->h_sum_ns, ns, memory_order_relaxed);
}

void orch_hist_read(const struct orch_hist *h, struct orch_hist_snap *out)
{
	for (size_t i = 0; i <= ORCH_HIST_BOUNDS; i++)
		out->n[i] = atomic_load_explicit(&h->h_n[i], memory_order_relaxed);
	out->sum_ns = atomic_load_explicit(&h->h_sum_ns, memory_order_relaxed);
}

uint64_t orch_hist_count(const struct orch_hist_snap *s)
{
	uint64_t n = 0;

	for (size_t i = 0; i <= ORCH_HIST_BOUNDS; i++)
		n += s->n[i];
	return n;
}

uint64_t orch_hist_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* --- The text format ------------------------------------------------------------ */

char *orch_prom_labels(char *out, size_t size, ...)
{
	size_t pos = 0;
	const char *k;
	va_list ap;

	if (size)
		out[0] = '\0';
	va_start(ap, size);
	while ((k = va_arg(ap, const char *)) != NULL) {
		const char *v = va_arg(ap, const char *);
		size_t start = pos;
		int n = snprintf(out + pos, size - pos, "%s%s=\"", pos ? "," : "", k);

		if (n < 0 || (size_t)n >= size - pos)
			goto out_cut;
		pos += (size_t)n;
		for (; v && *v; v++) {
			const char *esc = *v == '\\' ? "\\\\" : *v == '"' ? "\\\"" :
					  *v == '\n' ? "\\n" : NULL;
			size_t len = esc ? 2 : 1;

			if (pos + len + 2 > size) {
				pos = start;
				goto out_cut;
			}
			memcpy(out + pos, esc ? esc : v, len);
			pos += len;
		}
		out[pos++] = '"';
		out[pos] = '\0';
		continue;
out_cut:
		out[start] = '\0';
		break;
	}
	va_end(ap);
	return out;
}

void orch_prom_family(struct orch_buf *b, const char *name, const char *type,
		      const char *help)
{
	orch_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void orch_prom_u64(struct orch_buf *b, const char *name, const char *labels, uint64_t v)
{
	if (labels && *labels)
		orch_buf_printf(b, "%s{%s} %" PRIu64 "\n", name, labels, v);
	else
		orch_buf_printf(b, "%s %" PRIu64 "\n", name, v);
}

static void orch_prom_f64(struct orch_buf *b, const char *name, const char *labels, double v)
{
	char num[64];

	/* Whole numbers whole; others to 15 digits, which every double holds. */
	if (v == (double)(int64_t)v)
		snprintf(num, sizeof(num), "%" PRId64, (int64_t)v);
	else
		snprintf(num, sizeof(num), "%.15g", v);
	if (labels && *labels)
		orch_buf_printf(b, "%s{%s} %s\n", name, labels, num);
	else
		orch_buf_printf(b, "%s %s\n", name, num);
}

void orch_prom_counter(struct orch_buf *b, const char *name, const char *help, uint64_t v)
{
	orch_prom_family(b, name, "counter", help);
	orch_prom_u64(b, name, NULL, v);
}

void orch_prom_gauge(struct orch_buf *b, const char *name, const char *help, double v)
{
	orch_prom_family(b, name, "gauge", help);
	orch_prom_f64(b, name, NULL, v);
}

void orch_prom_scalars(struct orch_buf *b, const struct orch_prom_scalar *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		orch_prom_family(b, v[i].name, v[i].type, v[i].help);
		orch_prom_f64(b, v[i].name, NULL, v[i].value);
	}
}

void orch_prom_hist(struct orch_buf *b, const char *name, const char *labels,
		    const struct orch_hist_snap *s)
{
	const char *sep = labels && *labels ? "," : "";
	uint64_t cum = 0;

	if (!labels)
		labels = "";
	for (size_t i = 0; i < ORCH_HIST_BOUNDS; i++) {
		cum += s->n[i];
		orch_buf_printf(b, "%s_bucket{%s%sle=\"%s\"} %" PRIu64 "\n", name, labels, sep,
			    hist_le[i], cum);
	}
	cum += s->n[ORCH_HIST_BOUNDS];
	orch_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name, labels, sep, cum);
	if (*labels) {
		orch_buf_printf(b, "%s_sum{%s} %.9f\n", name, labels, (double)s->sum_ns / 1e9);
		orch_buf_printf(b, "%s_count{%s} %" PRIu64 "\n", name, labels, cum);
	} else {
		orch_buf_printf(b, "%s_sum %.9f\n", name, (double)s->sum_ns / 1e9);
		orch_buf_printf(b, "%s_count %" PRIu64 "\n", name, cum);
	}
}

/* --- Build and process ------------------------------------------------------------ */

void orch_prom_build_info(struct orch_buf *b, const char *role, unsigned int protocol)
{
	char proto[16], labels[128];

	snprintf(proto, sizeof(proto), "%u", protocol);
	orch_prom_family(b, "orchard_build_info", "gauge",
			 "Always 1; the labels name the release, the protocol and the program.");
	orch_prom_u64(b, "orchard_build_info",
		      orch_prom_labels(labels, sizeof(labels), "version", ORCH_VERSION,
				       "protocol", proto, "role", role, NULL), 1);
}

/* CPU seconds and resident bytes of this process, from /proc/self/stat. */
static int prom_proc_stat(double *cpu_s, uint64_t *rss)
{
	char text[1024], *p;
	unsigned long utime, stime;
	long rss_pages;
	size_t n;
	FILE *f = fopen("/proc/self/stat", "r");

	if (!f)
		return -errno;
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	/* The command name may hold spaces and parentheses: fields follow the last ')'. */
	p = strrchr(text, ')');
	if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu "
			 "%*d %*d %*d %*d %*d %*d %*u %*u %ld", &utime, &stime, &rss_pages) != 3)
		return -EINVAL;
	*cpu_s = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
	*rss = (uint64_t)(rss_pages > 0 ? rss_pages : 0) * (uint64_t)sysconf(_SC_PAGESIZE);
	return 0;
}

void orch_prom_process(struct orch_buf *b, double start_s)
{
	double cpu_s;
	uint64_t rss, fds = 0;
	DIR *d;

	orch_prom_gauge(b, "process_start_time_seconds",
			"Start time of the process since the Unix epoch, in seconds.", start_s);
	if (prom_proc_stat(&cpu_s, &rss) == 0) {
		orch_prom_family(b, "process_cpu_seconds_total", "counter",
				 "User and system CPU time spent, in seconds.");
		orch_prom_f64(b, "process_cpu_seconds_total", NULL, cpu_s);
		orch_prom_gauge(b, "process_resident_memory_bytes", "Resident memory size in bytes.",
				(double)rss);
	}
	d = opendir("/proc/self/fd");
	if (d) {
		while (readdir(d))
			fds++;
		closedir(d);
		/* Less ".", ".." and the directory's own descriptor. */
		orch_prom_gauge(b, "process_open_fds", "Number of open file descriptors.",
				(double)(fds >= 3 ? fds - 3 : 0));
	}
}

const char *orch_errno_name(int e, char *tmp)
{
	const char *name = e > 0 ? strerrorname_np(e) : NULL;

	if (name)
		return name;
	snprintf(tmp, 16, "E%d", e);
	return tmp;
}
