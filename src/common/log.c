/* Logging sink, levels and rate limiting.  See log.h. */
#include "common/log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "common/time.h"

enum orch_log_level orch_log_level = ORCH_LOG_NOTICE;

_Static_assert(ORCH_LOG_ERR == LOG_ERR && ORCH_LOG_WARN == LOG_WARNING &&
	       ORCH_LOG_NOTICE == LOG_NOTICE && ORCH_LOG_INFO == LOG_INFO &&
	       ORCH_LOG_DEBUG == LOG_DEBUG, "the levels are syslog's");

static int log_fd = STDERR_FILENO;
static _Bool log_syslog; /* lines go to syslog(3), not log_fd */
static char log_ident[64];

static const char *const level_names[] = {
	[ORCH_LOG_ERR] = "error",   [ORCH_LOG_WARN] = "warn",
	[ORCH_LOG_NOTICE] = "notice", [ORCH_LOG_INFO] = "info",
	[ORCH_LOG_DEBUG] = "debug",
};

int orch_log_open_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);

	if (fd < 0)
		return -errno;
	log_fd = fd;
	return 0;
}

void orch_log_open_syslog(void)
{
	/* The ident is kept by openlog(), not copied: log_ident lives on. */
	openlog(log_ident[0] ? log_ident : NULL, LOG_PID, LOG_DAEMON);
	log_syslog = 1;
}

void orch_log_set_ident(const char *ident)
{
	snprintf(log_ident, sizeof(log_ident), "%s", ident);
}

int orch_log_level_parse(const char *s, enum orch_log_level *out)
{
	for (int l = ORCH_LOG_ERR; l <= ORCH_LOG_DEBUG; l++) {
		if (strcmp(s, level_names[l]) == 0) {
			*out = (enum orch_log_level)l;
			return 0;
		}
	}
	return -EINVAL;
}

/*
 * One write(2) per line, so lines of concurrent threads and processes sharing
 * a log file never interleave.
 */
void orch_log(enum orch_log_level lvl, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	struct tm tm;
	va_list ap;
	int n, m;

	if (log_syslog) {
		/* syslog stamps the time itself. */
		va_start(ap, fmt);
		vsnprintf(line, sizeof(line), fmt, ap);
		va_end(ap);
		syslog((int)lvl, "%s: %s", level_names[lvl], line);
		return;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s%s%s: ",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_ident,
		     log_ident[0] ? " " : "", level_names[lvl]);
	va_start(ap, fmt);
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	n += m;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(log_fd, line, (size_t)n) < 0) {
		/* Nowhere left to report it. */
	}
}

_Bool orch_ratelimit_ok(struct orch_ratelimit *rl, const char *where)
{
	uint32_t now = (uint32_t)(orch_time_now_ms() / 1000);
	uint32_t start = atomic_load(&rl->rl_window);

	if (orch_time_after32(now, start + 5) || start == 0) {
		uint32_t missed = atomic_exchange(&rl->rl_missed, 0);

		atomic_store(&rl->rl_window, now ? now : 1);
		atomic_store(&rl->rl_count, 0);
		if (missed)
			orch_log(ORCH_LOG_WARN, "%u similar log lines suppressed: at=%s", missed,
				 where);
	}
	if (atomic_fetch_add(&rl->rl_count, 1) < 10)
		return 1;
	atomic_fetch_add(&rl->rl_missed, 1);
	return 0;
}
