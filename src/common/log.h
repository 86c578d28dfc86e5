/*
 * Logging: levels, a pluggable sink, and rate limiting for anything a peer can
 * trigger.  Messages follow git's style: lowercase, no final period, the error
 * first, then key=value context.
 *
 * Any thread.  The level filter runs before formatting.
 */
#ifndef ORCH_COMMON_LOG_H
#define ORCH_COMMON_LOG_H

#include <stdatomic.h>
#include <stdint.h>

enum orch_log_level {
	ORCH_LOG_ERR = 3,    /* an operator must act */
	ORCH_LOG_WARN = 4,   /* degraded, but continuing */
	ORCH_LOG_NOTICE = 5, /* lifecycle: start, stop, peer up/down */
	ORCH_LOG_INFO = 6,
	ORCH_LOG_DEBUG = 7,
};

extern enum orch_log_level orch_log_level;

void orch_log(enum orch_log_level lvl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Sends log lines to @path (appended) instead of stderr.  Returns 0 or -errno.
 * Call before any thread starts logging.
 */
int orch_log_open_file(const char *path);

/*
 * Sends log lines to syslog(3) (facility daemon, the ident as its tag)
 * instead of a file: for a daemon whose stderr is gone.  Call after
 * orch_log_set_ident() and before any thread starts logging.
 */
void orch_log_open_syslog(void);

/* Sets a prefix such as "orchardd s0" put before every line.  Copied. */
void orch_log_set_ident(const char *ident);

/* Parses "err", "warn", "notice", "info", "debug".  Returns 0 or -EINVAL. */
int orch_log_level_parse(const char *s, enum orch_log_level *out);

#define ORCH_LOG(lvl, ...)                                                     \
	do {                                                                   \
		if ((lvl) <= orch_log_level)                                   \
			orch_log((lvl), __VA_ARGS__);                          \
	} while (0)

#define ORCH_ERR(...) ORCH_LOG(ORCH_LOG_ERR, __VA_ARGS__)
#define ORCH_WARN(...) ORCH_LOG(ORCH_LOG_WARN, __VA_ARGS__)
#define ORCH_NOTICE(...) ORCH_LOG(ORCH_LOG_NOTICE, __VA_ARGS__)
#define ORCH_INFO(...) ORCH_LOG(ORCH_LOG_INFO, __VA_ARGS__)
#define ORCH_DEBUG(...) ORCH_LOG(ORCH_LOG_DEBUG, __VA_ARGS__)

/* Per call site: at most 10 lines per 5 s, then one "N suppressed" line. */
struct orch_ratelimit {
	_Atomic uint32_t rl_window; /* start of the window, seconds (wrap-safe) */
	_Atomic uint32_t rl_count;  /* lines in this window */
	_Atomic uint32_t rl_missed; /* suppressed in this window */
};

/* True if the caller may log now; @where names the call site.  Any thread. */
_Bool orch_ratelimit_ok(struct orch_ratelimit *rl, const char *where);

#define ORCH_LOG_RATELIMIT(lvl, ...)                                           \
	do {                                                                   \
		static struct orch_ratelimit rl_;                              \
		if ((lvl) <= orch_log_level &&                                 \
		    orch_ratelimit_ok(&rl_, __FILE__ ":" ORCH_LOG_STR_(__LINE__))) \
			orch_log((lvl), __VA_ARGS__);                          \
	} while (0)

#define ORCH_LOG_STR2_(x) #x
#define ORCH_LOG_STR_(x) ORCH_LOG_STR2_(x)

#define ORCH_LOG_ONCE(lvl, ...)                                                \
	do {                                                                   \
		static atomic_flag once_ = ATOMIC_FLAG_INIT;                   \
		if (!atomic_flag_test_and_set(&once_))                         \
			ORCH_LOG((lvl), __VA_ARGS__);                          \
	} while (0)

#endif
