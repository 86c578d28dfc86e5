/*
 * The read-only HTTP endpoint of orchardd and orchard-mount: GET /metrics
 * (the Prometheus text format) and, on servers, a status page.  Served by
 * libmicrohttpd on threads of its own (one per connection, at most
 * ORCH_HTTPD_CONNS), so a slow or stuck client holds only its own thread,
 * never the caller's event loop or FUSE workers.
 *
 * What it accepts: GET and HEAD of a known path, with no request body.
 * Anything else is answered 4xx (405 for another method, 400 for a body,
 * 404 for another path; libmicrohttpd answers malformed requests and
 * headers past ORCH_HTTPD_HEADERS_MAX itself); a connection idle for
 * ORCH_HTTPD_IDLE_S is closed.  Pages are built into a buffer of at most
 * ORCH_HTTPD_BODY_MAX bytes.
 *
 * Where: "HOST:PORT" ("[v6]:PORT" for a literal IPv6 address).  An address
 * that is not loopback (127.0.0.0/8, ::1) is refused unless the caller says
 * the operator asked for it (the config's metrics_public): the pages carry
 * no secret, but an endpoint on a public address is a decision, not a
 * default.
 */
#ifndef ORCH_WEB_HTTPD_H
#define ORCH_WEB_HTTPD_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

#define ORCH_HTTPD_CONNS 16
#define ORCH_HTTPD_IDLE_S 10
#define ORCH_HTTPD_HEADERS_MAX (32u << 10)
#define ORCH_HTTPD_BODY_MAX (8u << 20)

/*
 * A page: appends the body to @body (bounded: its sticky error is checked
 * after the call) and sets *@ctype (a static string).  Returns the HTTP
 * status, 200 or e.g. 503.  Called on a connection thread: several may run
 * at once, each with its own @body.
 */
typedef int (*orch_httpd_page_fn)(void *arg, struct orch_buf *body, const char **ctype);

struct orch_httpd_page {
	const char *path;          /* "/metrics" */
	orch_httpd_page_fn fn;
};

struct orch_httpd;

/*
 * Checks @addr and binds a listening socket to it now, so that a bad or
 * busy address fails the caller's start with a message (in @err) before
 * anything else happens; nothing is served until orch_httpd_start().
 * @pages (static, NULL-path terminated) and @arg are kept.  Returns 0,
 * -EINVAL (bad address), -EPERM (not loopback, !@public_ok), or -errno of
 * the bind.  Any thread.
 */
int orch_httpd_create(const char *addr, bool public_ok, const struct orch_httpd_page *pages,
		      void *arg, struct orch_httpd **out, char *err, size_t errlen);
/*
 * Starts serving (threads: call after any fork).  0 or -errno (e.g.
 * -ENOMEM), with the reason in @err.
 */
int orch_httpd_start(struct orch_httpd *h, char *err, size_t errlen);
/*
 * Stops serving: waits for the pages being built to return.  Then frees
 * @h.  Accepts NULL.
 */
void orch_httpd_destroy(struct orch_httpd *h);
/* The address it listens on, as given ("127.0.0.1:9500"). */
const char *orch_httpd_address(const struct orch_httpd *h);

/* Appends @s to @b with &, <, >, " and ' escaped for HTML text and attributes. */
void orch_html_escape(struct orch_buf *b, const char *s);

#endif
