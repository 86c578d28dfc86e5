/* Progress bars of the CLI.  See progress.h. */
#include "cli/progress.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/time.h"
#include "common/util.h"

#define PROGRESS_INTERVAL_MS (1000 / ORCH_PROGRESS_HZ)
#define PROGRESS_LINE_MAX 400      /* columns drawn at most */
#define PROGRESS_BAR_MIN 10        /* a narrower bar is left out */
#define PROGRESS_BAR_MAX 50

/* The bar orch_cli_msg() and friends erase; the thread that made it only. */
static struct orch_progress *progress_cur;

/* --- Drawing (p_lock held) ------------------------------------------------ */

/* Columns of stderr's terminal, less one so that a full line never wraps. */
static size_t progress_cols(void)
{
	struct winsize ws;
	const char *env;
	long cols = 0;

	if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
		cols = ws.ws_col;
	else if ((env = getenv("COLUMNS")))
		cols = strtol(env, NULL, 10);
	if (cols <= 0)
		cols = 80;
	return (size_t)ORCH_MAX(20, ORCH_MIN(cols - 1, (long)PROGRESS_LINE_MAX));
}

/* "0:07", "12:34", "1:02:03". */
static void progress_time(uint64_t secs, char *out, size_t outlen)
{
	if (secs >= 3600)
		snprintf(out, outlen, "%" PRIu64 ":%02u:%02u", secs / 3600,
			 (unsigned int)(secs / 60 % 60), (unsigned int)(secs % 60));
	else
		snprintf(out, outlen, "%u:%02u", (unsigned int)(secs / 60),
			 (unsigned int)(secs % 60));
}

/*
 * "  12M/29M" or "1/3 servers"; without a total "  12M", "1 servers".  The
 * count done is padded to its widest (orch_cli_human's 5 columns, or the
 * total's digits), so the line does not shift as it grows.
 */
static void progress_count(const struct orch_progress *p, char *out, size_t outlen)
{
	char a[16], b[16];

	if (p->p_unit) {
		if (p->p_total)
			snprintf(out, outlen, "%*" PRIu64 "/%" PRIu64 " %s",
				 snprintf(NULL, 0, "%" PRIu64, p->p_total), p->p_done, p->p_total,
				 p->p_unit);
		else
			snprintf(out, outlen, "%" PRIu64 " %s", p->p_done, p->p_unit);
		return;
	}
	orch_cli_human(p->p_done, a, sizeof(a));
	if (p->p_total) {
		orch_cli_human(p->p_total, b, sizeof(b));
		snprintf(out, outlen, "%5s/%s", a, b);
	} else {
		snprintf(out, outlen, "%5s", a);
	}
}

/* Writes @len bytes of @s to stderr, all of it. */
static void progress_write(const char *s, size_t len)
{
	fwrite(s, 1, len, stderr);
	fflush(stderr);
}

/* Takes the bar off the screen: spaces over it, the cursor back at column 0. */
static void progress_erase(struct orch_progress *p)
{
	char buf[PROGRESS_LINE_MAX + 2];

	if (!p->p_shown)
		return;
	buf[0] = '\r';
	memset(buf + 1, ' ', p->p_shown);
	buf[p->p_shown + 1] = '\r';
	progress_write(buf, p->p_shown + 2);
	p->p_shown = 0;
}

/*
 * Composes and draws the line: label, percentage, bar, counts, rate, the
 * time so far and, with a total and some progress, the ETA.  The bar
 * takes what the rest leaves of the width; parts that still do not fit
 * are cut off at the right.  @final ends the line.
 */
static void progress_draw(struct orch_progress *p, uint64_t now, bool final)
{
	char line[PROGRESS_LINE_MAX + 1], out[2 * PROGRESS_LINE_MAX + 4];
	char left[ORCH_PROGRESS_LABEL_MAX + 16], right[160], count[64], rate[32], when[48];
	uint64_t ms = now > p->p_start_ms ? now - p->p_start_ms : 0;
	double secs = (double)ORCH_MAX(ms, 1) / 1000, per_s = (double)p->p_done / secs;
	size_t cols = progress_cols(), len = 0, n;
	uint64_t hash = 0xcbf29ce484222325ull;   /* FNV-1a of the line */
	int pct = -1;

	if (p->p_total)
		pct = (int)ORCH_MIN(100, p->p_done * 100 / p->p_total);
	else if (final)
		pct = 100;   /* nothing to do, done */
	progress_count(p, count, sizeof(count));
	if (p->p_unit) {
		snprintf(rate, sizeof(rate), "%5.1f/s", per_s);
	} else {
		char h[16];

		orch_cli_human((uint64_t)per_s, h, sizeof(h));
		snprintf(rate, sizeof(rate), "%5s/s", h);
	}
	progress_time(ms / 1000, when, sizeof(when));
	/* With a total, the ETA has its place from the start: "--:--" until known. */
	if (!final && p->p_total) {
		char eta[24] = "--:--";

		if (p->p_done >= p->p_total) {
			strcpy(eta, "0:00");
		} else if (p->p_done) {
			double left_s = (double)(p->p_total - p->p_done) / per_s + 0.5;

			progress_time(left_s < 1e9 ? (uint64_t)left_s : 1000000000ull, eta,
				      sizeof(eta));
		}
		snprintf(when + strlen(when), sizeof(when) - strlen(when), "  ETA %5s", eta);
	}
	if (pct >= 0)
		snprintf(left, sizeof(left), "%s %3d%% ", p->p_label, pct);
	else
		snprintf(left, sizeof(left), "%s ", p->p_label);
	snprintf(right, sizeof(right), "%s  %s  %s", count, rate, when);

	len = (size_t)snprintf(line, sizeof(line), "%s", left);
	/*
	 * The numbers after the bar keep their columns (padded), and the bar
	 * never widens again, so it does not jump when the ETA goes at the end.
	 */
	n = strlen(right);
	if (pct >= 0 && cols > len + n + 3 + PROGRESS_BAR_MIN) {
		size_t w = ORCH_MIN(cols - len - n - 3, (size_t)PROGRESS_BAR_MAX), fill;

		if (p->p_bar_w && p->p_bar_w < w)
			w = p->p_bar_w;
		p->p_bar_w = w;
		fill = (size_t)pct * w / 100;

		line[len++] = '[';
		for (size_t i = 0; i < w; i++)
			line[len++] = i < fill ? '=' : i == fill ? '>' : ' ';
		line[len++] = ']';
		line[len++] = ' ';
	}
	n = (size_t)snprintf(line + len, sizeof(line) - len, "%s", right);
	len = ORCH_MIN(len + n, cols);
	line[len] = '\0';
	/* The ticker of a bar that does not move would redraw the same line. */
	for (size_t i = 0; i < len; i++)
		hash = (hash ^ (unsigned char)line[i]) * 0x100000001b3ull;
	p->p_drawn_ms = now;
	if (!final && p->p_shown == len && p->p_shown_hash == hash)
		return;

	/* Over what is there: carriage return, the line, spaces past its end. */
	n = 0;
	out[n++] = '\r';
	memcpy(out + n, line, len);
	n += len;
	if (p->p_shown > len) {
		memset(out + n, ' ', p->p_shown - len);
		n += p->p_shown - len;
	}
	if (final)
		out[n++] = '\n';
	progress_write(out, n);
	p->p_shown = final ? 0 : len;
	p->p_shown_hash = hash;
}

/* Draws if 1/HZ second has passed since the last draw and nothing pauses it. */
static void progress_maybe_draw(struct orch_progress *p)
{
	uint64_t now = orch_time_now_ms();

	if (!p->p_paused && now - p->p_drawn_ms >= PROGRESS_INTERVAL_MS)
		progress_draw(p, now, false);
}

/* --- The ticker thread ---------------------------------------------------- */

static void *progress_ticker(void *arg)
{
	struct orch_progress *p = arg;
	struct timespec ts;

	pthread_mutex_lock(&p->p_lock);
	while (!p->p_stop) {
		/* Until 1/HZ s after the last draw, whoever made it. */
		uint64_t now = orch_time_now_ms(), due = p->p_drawn_ms + PROGRESS_INTERVAL_MS;
		long wait_ms = due > now + 10 ? (long)(due - now) : 10;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += wait_ms / 1000;
		ts.tv_nsec += wait_ms % 1000 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&p->p_cond, &p->p_lock, &ts);
		if (p->p_stop)
			break;
		if (p->p_sample)
			p->p_done = p->p_sample(p->p_arg);
		progress_maybe_draw(p);
	}
	pthread_mutex_unlock(&p->p_lock);
	return NULL;
}

/* Starts the ticker; false if it cannot (then updates alone draw). */
static bool progress_ticker_start(struct orch_progress *p)
{
	pthread_condattr_t ca;
	bool ok;

	if (pthread_condattr_init(&ca))
		return false;
	ok = !pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) &&
	     !pthread_cond_init(&p->p_cond, &ca);
	pthread_condattr_destroy(&ca);
	if (!ok)
		return false;
	if (pthread_create(&p->p_thread, NULL, progress_ticker, p)) {
		pthread_cond_destroy(&p->p_cond);
		return false;
	}
	return true;
}

/* --- The API -------------------------------------------------------------- */

void orch_progress_init(struct orch_progress *p, const struct orch_progress_opts *o)
{
	memset(p, 0, sizeof(*p));
	p->p_on = !o->quiet && isatty(STDERR_FILENO) && !progress_cur;
	if (!p->p_on)
		return;
	snprintf(p->p_label, sizeof(p->p_label), "%s", o->label ? o->label : "");
	p->p_unit = o->unit;
	p->p_total = o->total;
	p->p_sample = o->sample;
	p->p_arg = o->arg;
	p->p_start_ms = orch_time_now_ms();
	pthread_mutex_init(&p->p_lock, NULL);
	progress_cur = p;
	progress_draw(p, p->p_start_ms, false);
	if (o->tick)
		p->p_ticking = progress_ticker_start(p);
}

void orch_progress_set(struct orch_progress *p, uint64_t done)
{
	if (!p->p_on)
		return;
	pthread_mutex_lock(&p->p_lock);
	p->p_done = done;
	progress_maybe_draw(p);
	pthread_mutex_unlock(&p->p_lock);
}

void orch_progress_add(struct orch_progress *p, uint64_t n)
{
	if (!p->p_on)
		return;
	pthread_mutex_lock(&p->p_lock);
	p->p_done += n;
	progress_maybe_draw(p);
	pthread_mutex_unlock(&p->p_lock);
}

void orch_progress_set_total(struct orch_progress *p, uint64_t total)
{
	if (!p->p_on)
		return;
	pthread_mutex_lock(&p->p_lock);
	p->p_total = total;
	progress_maybe_draw(p);
	pthread_mutex_unlock(&p->p_lock);
}

void orch_progress_set_label(struct orch_progress *p, const char *label)
{
	if (!p->p_on)
		return;
	pthread_mutex_lock(&p->p_lock);
	snprintf(p->p_label, sizeof(p->p_label), "%s", label);
	progress_maybe_draw(p);
	pthread_mutex_unlock(&p->p_lock);
}

void orch_progress_fini(struct orch_progress *p, bool done)
{
	if (!p->p_on)
		return;
	if (p->p_ticking) {
		pthread_mutex_lock(&p->p_lock);
		p->p_stop = true;
		pthread_cond_signal(&p->p_cond);
		pthread_mutex_unlock(&p->p_lock);
		pthread_join(p->p_thread, NULL);
		pthread_cond_destroy(&p->p_cond);
		p->p_ticking = false;
	}
	pthread_mutex_lock(&p->p_lock);
	if (done) {
		if (p->p_sample)
			p->p_done = p->p_sample(p->p_arg);
		if (!p->p_total || p->p_done > p->p_total)
			p->p_total = p->p_done;
		progress_draw(p, orch_time_now_ms(), true);
	} else {
		progress_erase(p);
	}
	pthread_mutex_unlock(&p->p_lock);
	pthread_mutex_destroy(&p->p_lock);
	if (progress_cur == p)
		progress_cur = NULL;
	p->p_on = false;
}

void orch_progress_pause(void)
{
	struct orch_progress *p = progress_cur;

	if (!p)
		return;
	pthread_mutex_lock(&p->p_lock);
	p->p_paused++;
	progress_erase(p);
	pthread_mutex_unlock(&p->p_lock);
}

void orch_progress_resume(void)
{
	struct orch_progress *p = progress_cur;

	if (!p)
		return;
	/* What was printed meanwhile reaches the terminal before the bar does. */
	fflush(stdout);
	pthread_mutex_lock(&p->p_lock);
	if (p->p_paused)
		p->p_paused--;
	pthread_mutex_unlock(&p->p_lock);
}
