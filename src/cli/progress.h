/*
 * Progress bars of the CLI's long commands: put and get of large files,
 * clone, scrub, dedupe --scan and repair.
 *
 *   put   0% [>                       ]     0/300M      0/s  0:00  ETA --:--
 *   put  42% [=========>              ]  126M/300M   141M/s  0:00  ETA  0:01
 *   put 100% [========================]  300M/300M   145M/s  0:02
 *   scrub  50% [==========>           ] 1/2 servers    0.1/s  0:10  ETA  0:10
 *   put   12M   4.1M/s  0:03                 (total unknown: put from stdin)
 *
 * Where it goes.  The bar is drawn on stderr, and only when stderr is a
 * terminal and the command was not given --quiet.  stdout, where results
 * and the data of `get PATH -` go, never gets a byte of it, so a command
 * whose stdout is piped or redirected writes exactly what it wrote before
 * bars existed, while its bar still shows on the terminal (curl's and
 * git's choice; rsync draws on stdout, which would corrupt `get PATH -`).
 * When stderr is not a terminal (a script, cron, a log) nothing at all is
 * drawn.
 *
 * How.  One line, redrawn with a carriage return and padding spaces (no
 * escape sequences, so any terminal will do), at most ORCH_PROGRESS_HZ
 * times a second, as wide as the terminal (TIOCGWINSZ on stderr, else
 * $COLUMNS, else 80, minus one column so that it never wraps).  Bytes are
 * shown in human units (orch_cli_human), other units as counts; the rate is
 * the average since the start; the time so far is always there, the ETA
 * when there is a total.  Numbers are padded so that they keep their
 * columns, and the bar does not change width as they grow.  The bar is
 * drawn once at the start, so even a short command shows it, and ends with
 * a final line (total and average rate, the time taken) when the work is
 * done, or is erased when it failed.
 *
 * One bar at a time per process: the current one.  orch_cli_msg() and
 * orch_cli_err() erase it before they print (orch_progress_pause/resume),
 * so messages never land on its line; the next update draws it again.  A
 * command printing lines to stdout while its bar runs wraps them the same
 * way.
 *
 * Threads.  A bar with .tick is redrawn from a thread of its own (the only
 * thread the CLI itself starts), for work that blocks in one long call and
 * would otherwise freeze the bar: scrub waiting for the servers, repair
 * inside the store library.  Its fields are then behind p_lock, and every
 * function below may be called from any thread; pause and resume belong
 * to the thread that printed.  Without .tick the bar is drawn only by the
 * calls below, on the caller's thread.
 */
#ifndef ORCH_CLI_PROGRESS_H
#define ORCH_CLI_PROGRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ORCH_PROGRESS_HZ 10
#define ORCH_PROGRESS_LABEL_MAX 31

struct orch_progress_opts {
	const char *label;   /* first on the line: "put", "scrub" (copied) */
	const char *unit;    /* NULL: bytes; else the items' name: "servers" */
	uint64_t total;      /* bytes or items in all; 0: unknown (no %, no ETA) */
	bool quiet;          /* --quiet: draw nothing */
	bool tick;           /* redraw from a thread, ORCH_PROGRESS_HZ a second */
	/* With .tick: the count so far, read by that thread before each draw
	 * instead of the caller's updates; NULL: none. */
	uint64_t (*sample)(void *arg);
	void *arg;           /* for .sample */
};

/* Storage the caller owns: orch_progress_init, then orch_progress_fini. */
struct orch_progress {
	bool p_on;                 /* drawing: stderr is a tty, not quiet */
	bool p_ticking;            /* p_thread runs */
	bool p_stop;               /* tells p_thread to end; protected by p_lock */
	char p_label[ORCH_PROGRESS_LABEL_MAX + 1]; /* protected by p_lock */
	const char *p_unit;        /* NULL: bytes */
	uint64_t p_done;           /* so far; protected by p_lock */
	uint64_t p_total;          /* 0: unknown; protected by p_lock */
	uint64_t p_start_ms;       /* orch_time_now_ms() at init */
	uint64_t p_drawn_ms;       /* last draw; protected by p_lock */
	size_t p_shown;            /* columns on screen now, 0: none; p_lock */
	uint64_t p_shown_hash;     /* a hash of that line; protected by p_lock */
	size_t p_bar_w;            /* the bar's width so far, 0: none; p_lock */
	unsigned int p_paused;     /* pause depth: no drawing; protected by p_lock */
	uint64_t (*p_sample)(void *arg);
	void *p_arg;
	pthread_mutex_t p_lock;    /* initialised only if p_on */
	pthread_cond_t p_cond;     /* wakes p_thread to stop */
	pthread_t p_thread;
};

/*
 * Starts a bar as @o says and makes it the current one; draws it at once
 * (if it is drawn at all: stderr a terminal, not o->quiet).  Cannot fail:
 * a ticker thread that cannot start leaves a bar drawn by the updates
 * only.  The caller's thread, with no other bar running.
 */
void orch_progress_init(struct orch_progress *p, const struct orch_progress_opts *o);

/* Work done: @n more, or @done so far.  Redraws if 1/HZ s has passed. */
void orch_progress_add(struct orch_progress *p, uint64_t n);
void orch_progress_set(struct orch_progress *p, uint64_t done);

/* Changes the total (0: unknown) or the label (copied, truncated). */
void orch_progress_set_total(struct orch_progress *p, uint64_t total);
void orch_progress_set_label(struct orch_progress *p, const char *label);

/*
 * Ends @p: with @done, its final line (total: what was done, if unknown)
 * and a newline; else the bar is erased, as the failure has been told.
 * Stops the ticker; @p is no longer the current bar.
 */
void orch_progress_fini(struct orch_progress *p, bool done);

/*
 * Erase the current bar, if any, and keep it off the screen until the
 * matching resume: around any line printed while a bar runs.  Nest.
 */
void orch_progress_pause(void);
void orch_progress_resume(void);

#endif
