/*
 * Shared helpers of the unit tests that run members on one orch_ev loop
 * (t_repl.c, t_group.c): a free TCP port on 127.0.0.1, and running the
 * loop until a condition holds or a deadline passes (polled every 5 ms,
 * never a sleep).  Everything is static: each test binary is one .c file.
 */
#ifndef ORCH_TESTS_UNIT_EV_FX_H
#define ORCH_TESTS_UNIT_EV_FX_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/time.h"
#include "net/ev.h"

/*
 * A port nobody listens on now (0 if none could be found), below the
 * kernel's ephemeral range (32768 by default): a port the kernel handed out
 * for a bind to port 0 can be taken by any outgoing connection before the
 * listener the test configures binds it.
 */
static uint16_t fx_free_port(void)
{
	static unsigned int seed;
	static uint16_t given[64]; /* not twice to one test */
	static unsigned int ngiven;

	if (!seed)
		seed = (unsigned int)getpid() * 2654435761u ^ (unsigned int)orch_time_now_ms();
	for (int tries = 0; tries < 1000; tries++) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		uint16_t port;
		bool dup = false, ok;

		seed = seed * 1103515245u + 12345u;
		port = (uint16_t)(10000 + (seed >> 8) % 22000);
		for (unsigned int i = 0; i < ngiven && i < 64; i++)
			dup |= given[i] == port;
		if (fd < 0)
			return 0;
		a.sin_port = htons(port);
		ok = !dup && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (ok) {
			given[ngiven++ % 64] = port;
			return port;
		}
	}
	return 0;
}

struct fx_until {
	struct orch_ev *ev;
	bool (*cond)(void *arg);
	void *arg;
	uint64_t deadline;
	struct orch_ev_timer t;
	bool met;
};

static void fx_until_check(void *arg)
{
	struct fx_until *u = arg;

	if (u->cond(u->arg)) {
		u->met = true;
		orch_ev_stop(u->ev);
	} else if (orch_time_now_ms() > u->deadline) {
		orch_ev_stop(u->ev);
	} else {
		orch_ev_timer_arm(u->ev, &u->t, 5, fx_until_check, u);
	}
}

/* Runs @ev until @cond(@arg) holds (true) or @wait_ms pass (false). */
static bool fx_run_until(struct orch_ev *ev, bool (*cond)(void *arg), void *arg,
			 uint64_t wait_ms)
{
	struct fx_until u = { .ev = ev, .cond = cond, .arg = arg,
			      .deadline = orch_time_now_ms() + wait_ms };

	orch_ev_timer_arm(ev, &u.t, 0, fx_until_check, &u);
	orch_ev_run(ev);
	orch_ev_reset_stop(ev);
	orch_ev_timer_cancel(ev, &u.t);
	return u.met;
}

#endif
