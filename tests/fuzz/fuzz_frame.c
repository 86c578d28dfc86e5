/*
 * The connection's frame reader on an arbitrary byte stream: the bytes go
 * into an accepted connection (net/conn.c) through a socketpair, in pieces
 * whose sizes the input chooses, and the event loop runs until the
 * connection closes.  Whatever arrives (garbage, huge lengths, truncated
 * frames, messages before authentication), the connection must close or
 * keep going without a crash or a leak; before authentication (always:
 * the key is not the input's) it buffers no more than one handshake frame.
 *
 * Input: byte 0 = piece size (1..256), then the stream.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "net/conn.h"
#include "net/ev.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t fuzz_key[ORCH_KEY_LEN];

static void fuzz_on_frame(struct orch_conn *c, const struct orch_frame_hdr *h,
			  const uint8_t *payload)
{
	(void)h;
	(void)payload;
	orch_conn_close(c, 0); /* never reached without the key's MAC */
}

static void fuzz_on_close(struct orch_conn *c, int reason)
{
	(void)reason;
	orch_ev_stop(c->c_ev);
}

static const struct orch_conn_ops fuzz_ops = {
	.on_frame = fuzz_on_frame,
	.on_close = fuzz_on_close,
};

static void fuzz_deadline(void *arg)
{
	orch_ev_stop(arg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct orch_ev_timer timer = { 0 };
	struct orch_conn *c = NULL;
	struct orch_ev *ev;
	size_t piece, off = 1;
	int sv[2];

	if (size < 1)
		return 0;
	orch_log_level = ORCH_LOG_ERR; /* peers' faults are WARN lines */
	piece = (size_t)data[0] + 1;
	if (orch_ev_create(&ev))
		return 0;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		orch_ev_destroy(ev);
		return 0;
	}
	if (orch_conn_accept(ev, sv[0], fuzz_key, &fuzz_ops, NULL, &c)) {
		close(sv[1]);
		orch_ev_destroy(ev);
		return 0;
	}
	orch_conn_get(c);
	while (off < size && !c->c_closed) {
		size_t n = size - off < piece ? size - off : piece;

		if (write(sv[1], data + off, n) != (ssize_t)n)
			break;
		off += n;
		/* Let the loop read this piece (a short deadline ends the turn). */
		orch_ev_timer_arm(ev, &timer, 0, fuzz_deadline, ev);
		orch_ev_run(ev);
		orch_ev_reset_stop(ev);
		/* What a stranger can hold (conn.h): one handshake frame. */
		if (c->c_in.b_cap > 2 * ORCH_CONN_HS_IN_MAX)
			abort();
	}
	close(sv[1]);
	if (!c->c_closed) {
		orch_ev_timer_arm(ev, &timer, 1000, fuzz_deadline, ev);
		orch_ev_run(ev); /* reads the EOF and closes */
	}
	orch_ev_timer_cancel(ev, &timer);
	if (!c->c_closed)
		orch_conn_close(c, 0);
	orch_conn_put(c);
	orch_ev_destroy(ev);
	return 0;
}
