/*
 * The event loop: epoll for file descriptors, one-shot timers, and a queue
 * through which other threads hand work to the loop (an eventfd wakes it),
 * in the manner of Redis's ae and MooseFS's main_poll_register.
 *
 * Threads: everything is loop-thread only except orch_ev_post() and
 * orch_ev_stop(), which any thread may call.
 */
#ifndef ORCH_NET_EV_H
#define ORCH_NET_EV_H

#include <stdbool.h>
#include <stdint.h>

struct orch_ev;

typedef void (*orch_ev_fd_fn)(struct orch_ev *ev, int fd, uint32_t events, void *arg);
typedef void (*orch_ev_fn)(void *arg);

/* A timer the caller owns (embed it); armed at most once at a time. */
struct orch_ev_timer {
	uint64_t t_at;             /* monotonic ms deadline */
	orch_ev_fn t_fn;
	void *t_arg;
	bool t_armed;
	struct orch_ev_timer *t_next; /* protected by: loop thread */
};

int orch_ev_create(struct orch_ev **out);
/* Frees the loop.  Registered fds are not closed.  Pending posts are dropped. */
void orch_ev_destroy(struct orch_ev *ev);

/* Watches @fd for @events (EPOLLIN, EPOLLOUT).  0 or -errno. */
int orch_ev_add(struct orch_ev *ev, int fd, uint32_t events, orch_ev_fd_fn fn, void *arg);
int orch_ev_mod(struct orch_ev *ev, int fd, uint32_t events);
void orch_ev_del(struct orch_ev *ev, int fd);

/* Arms @t to call fn(arg) in @delay_ms.  Re-arming moves it. */
void orch_ev_timer_arm(struct orch_ev *ev, struct orch_ev_timer *t, uint32_t delay_ms,
		       orch_ev_fn fn, void *arg);
void orch_ev_timer_cancel(struct orch_ev *ev, struct orch_ev_timer *t);

/*
 * Any thread: runs fn(arg) on the loop thread soon, exactly once (or never,
 * if the loop is destroyed first).  It cannot fail: posted work is a reply
 * or a completion nothing else would deliver, so without memory it waits
 * for some, retrying every millisecond (with a rate-limited log line),
 * rather than leave its caller to free, off the loop, what the loop owns.
 */
void orch_ev_post(struct orch_ev *ev, orch_ev_fn fn, void *arg);

/*
 * Runs the work other threads posted and the loop has not run yet, now
 * (after the loop stopped, before orch_ev_destroy(), so nothing posted is
 * lost).  Loop thread, loop not running.
 */
void orch_ev_run_posts(struct orch_ev *ev);

/* Runs until orch_ev_stop().  Returns 0 or -errno from epoll. */
int orch_ev_run(struct orch_ev *ev);
/* Any thread, and async-signal-safe. */
void orch_ev_stop(struct orch_ev *ev);
/* Loop thread, between runs: lets orch_ev_run() run again after a stop. */
void orch_ev_reset_stop(struct orch_ev *ev);

#endif
