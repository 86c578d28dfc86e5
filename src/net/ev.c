/* The event loop.  See ev.h. */
#include "net/ev.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "common/time.h"

struct ev_slot {
	orch_ev_fd_fn fn;
	void *arg;
};

struct ev_post {
	orch_ev_fn fn;
	void *arg;
	struct ev_post *next;
};

struct orch_ev {
	int epfd;
	int wakefd;                  /* eventfd: posts and stop */
	struct ev_slot *slots;       /* indexed by fd */
	int nslots;
	struct orch_ev_timer *timers; /* sorted by t_at */
	pthread_mutex_t post_lock;
	struct ev_post *posts;       /* protected by post_lock, newest first */
	atomic_bool stop;
	uint64_t now;
};

int orch_ev_create(struct orch_ev **out)
{
	struct orch_ev *ev = calloc(1, sizeof(*ev));
	int error;

	if (!ev)
		return -ENOMEM;
	ev->epfd = epoll_create1(EPOLL_CLOEXEC);
	ev->wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ev->epfd < 0 || ev->wakefd < 0) {
		error = -errno;
		goto out_close;
	}
	pthread_mutex_init(&ev->post_lock, NULL);
	ev->now = orch_time_now_ms();
	error = orch_ev_add(ev, ev->wakefd, EPOLLIN, NULL, NULL);
	if (error)
		goto out_close;
	*out = ev;
	return 0;
out_close:
	if (ev->epfd >= 0)
		close(ev->epfd);
	if (ev->wakefd >= 0)
		close(ev->wakefd);
	free(ev->slots);
	free(ev);
	return error;
}

void orch_ev_destroy(struct orch_ev *ev)
{
	if (!ev)
		return;
	while (ev->posts) {
		struct ev_post *p = ev->posts;

		ev->posts = p->next;
		free(p);
	}
	close(ev->epfd);
	close(ev->wakefd);
	pthread_mutex_destroy(&ev->post_lock);
	free(ev->slots);
	free(ev);
}

int orch_ev_add(struct orch_ev *ev, int fd, uint32_t events, orch_ev_fd_fn fn, void *arg)
{
	struct epoll_event e = { .events = events, .data.fd = fd };

	if (fd >= ev->nslots) {
		int n = ev->nslots ? ev->nslots : 64;
		struct ev_slot *s;

		while (n <= fd)
			n *= 2;
		s = realloc(ev->slots, (size_t)n * sizeof(*s));
		if (!s)
			return -ENOMEM;
		memset(s + ev->nslots, 0, (size_t)(n - ev->nslots) * sizeof(*s));
		ev->slots = s;
		ev->nslots = n;
	}
	if (epoll_ctl(ev->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
		return -errno;
	ev->slots[fd] = (struct ev_slot){ fn, arg };
	return 0;
}

int orch_ev_mod(struct orch_ev *ev, int fd, uint32_t events)
{
	struct epoll_event e = { .events = events, .data.fd = fd };

	return epoll_ctl(ev->epfd, EPOLL_CTL_MOD, fd, &e) < 0 ? -errno : 0;
}

void orch_ev_del(struct orch_ev *ev, int fd)
{
	epoll_ctl(ev->epfd, EPOLL_CTL_DEL, fd, NULL);
	if (fd < ev->nslots)
		ev->slots[fd] = (struct ev_slot){ NULL, NULL };
}

void orch_ev_timer_cancel(struct orch_ev *ev, struct orch_ev_timer *t)
{
	struct orch_ev_timer **p;

	if (!t->t_armed)
		return;
	for (p = &ev->timers; *p; p = &(*p)->t_next) {
		if (*p == t) {
			*p = t->t_next;
			break;
		}
	}
	t->t_armed = false;
}

/* Timers are few (one per server subsystem), so a sorted list will do. */
void orch_ev_timer_arm(struct orch_ev *ev, struct orch_ev_timer *t, uint32_t delay_ms,
		       orch_ev_fn fn, void *arg)
{
	struct orch_ev_timer **p;

	orch_ev_timer_cancel(ev, t);
	t->t_at = orch_time_now_ms() + delay_ms;
	t->t_fn = fn;
	t->t_arg = arg;
	t->t_armed = true;
	for (p = &ev->timers; *p && (*p)->t_at <= t->t_at; p = &(*p)->t_next)
		;
	t->t_next = *p;
	*p = t;
}

void orch_ev_post(struct orch_ev *ev, orch_ev_fn fn, void *arg)
{
	struct ev_post *p;
	uint64_t one = 1;

	while (!(p = malloc(sizeof(*p)))) {
		struct timespec pause = { 0, 1000000 };

		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "event loop: out of memory for posted work, "
				   "retrying");
		nanosleep(&pause, NULL);
	}
	p->fn = fn;
	p->arg = arg;
	pthread_mutex_lock(&ev->post_lock);
	p->next = ev->posts;
	ev->posts = p;
	pthread_mutex_unlock(&ev->post_lock);
	if (write(ev->wakefd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is saturated, so the loop wakes anyway. */
	}
}

void orch_ev_stop(struct orch_ev *ev)
{
	uint64_t one = 1;

	atomic_store(&ev->stop, true);
	if (write(ev->wakefd, &one, sizeof(one)) < 0) {
		/* As in orch_ev_post. */
	}
}

void orch_ev_reset_stop(struct orch_ev *ev)
{
	atomic_store(&ev->stop, false);
}

/* Runs posted work in the order it was posted. */
static void ev_run_posts(struct orch_ev *ev)
{
	struct ev_post *list, *rev = NULL;
	uint64_t v;

	if (read(ev->wakefd, &v, sizeof(v)) < 0) {
		/* EAGAIN: nothing was written since the last read. */
	}
	pthread_mutex_lock(&ev->post_lock);
	list = ev->posts;
	ev->posts = NULL;
	pthread_mutex_unlock(&ev->post_lock);
	while (list) {
		struct ev_post *next = list->next;

		list->next = rev;
		rev = list;
		list = next;
	}
	while (rev) {
		struct ev_post *next = rev->next;

		rev->fn(rev->arg);
		free(rev);
		rev = next;
	}
}

void orch_ev_run_posts(struct orch_ev *ev)
{
	ev_run_posts(ev);
}

static void ev_run_timers(struct orch_ev *ev)
{
	while (ev->timers && ev->timers->t_at <= ev->now) {
		struct orch_ev_timer *t = ev->timers;

		ev->timers = t->t_next;
		t->t_armed = false;
		t->t_fn(t->t_arg);
	}
}

int orch_ev_run(struct orch_ev *ev)
{
	struct epoll_event events[64];

	while (!atomic_load(&ev->stop)) {
		int timeout = -1, n;

		ev->now = orch_time_now_ms();
		if (ev->timers)
			timeout = ev->timers->t_at <= ev->now ? 0 : (int)(ev->timers->t_at - ev->now);
		n = epoll_wait(ev->epfd, events, 64, timeout);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		ev->now = orch_time_now_ms();
		for (int i = 0; i < n; i++) {
			int fd = events[i].data.fd;

			if (fd == ev->wakefd) {
				ev_run_posts(ev);
				continue;
			}
			/* A callback earlier in this batch may have removed it. */
			if (fd < ev->nslots && ev->slots[fd].fn)
				ev->slots[fd].fn(ev, fd, events[i].events, ev->slots[fd].arg);
		}
		ev_run_timers(ev);
	}
	return 0;
}
