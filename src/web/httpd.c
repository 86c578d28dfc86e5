/*
 * The HTTP endpoint, on libmicrohttpd.  See httpd.h.
 *
 * One thread per connection (MHD_USE_THREAD_PER_CONNECTION), with poll()
 * rather than select(): a server may hold more than FD_SETSIZE
 * descriptors.  A page may wait (the server's metrics wait for its loop,
 * its status page for the other servers), and waits only its own
 * connection's thread.
 */
#include "web/httpd.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

struct orch_httpd {
	char h_where[300];
	int h_fd;                            /* until MHD takes it */
	struct MHD_Daemon *h_mhd;
	const struct orch_httpd_page *h_pages;
	void *h_arg;
};

/* --- The address -------------------------------------------------------------------- */

static bool httpd_is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		const uint8_t *a = in6->sin6_addr.s6_addr;

		if (IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr))
			return true;
		return IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr) && a[12] == 127;
	}
	return false;
}

/* Splits "HOST:PORT" or "[HOST]:PORT".  0 or -EINVAL. */
static int httpd_split(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
	const char *colon, *h = addr, *hend;

	if (addr[0] == '[') {
		hend = strchr(addr, ']');
		if (!hend || hend[1] != ':')
			return -EINVAL;
		h = addr + 1;
		colon = hend + 1;
	} else {
		colon = strrchr(addr, ':');
		if (!colon)
			return -EINVAL;
		hend = colon;
	}
	if (hend == h || (size_t)(hend - h) >= hostlen || !colon[1] ||
	    strlen(colon + 1) >= portlen || strspn(colon + 1, "0123456789") != strlen(colon + 1))
		return -EINVAL;
	memcpy(host, h, (size_t)(hend - h));
	host[hend - h] = '\0';
	strcpy(port, colon + 1);
	return atoi(port) >= 1 && atoi(port) <= 65535 ? 0 : -EINVAL;
}

static int httpd_bind(const char *addr, bool public_ok, int *out, char *err, size_t errlen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV };
	struct addrinfo *ai, *p;
	char host[256], port[8];
	int fd = -1, one = 1, error, gai;

	if (httpd_split(addr, host, sizeof(host), port, sizeof(port))) {
		snprintf(err, errlen, "bad metrics address '%s': want HOST:PORT", addr);
		return -EINVAL;
	}
	gai = getaddrinfo(host, port, &hints, &ai);
	if (gai) {
		snprintf(err, errlen, "bad metrics address '%s': %s", addr, gai_strerror(gai));
		return -EINVAL;
	}
	for (p = ai; p && !public_ok; p = p->ai_next) {
		if (!httpd_is_loopback(p->ai_addr)) {
			snprintf(err, errlen, "metrics address '%s' is not a loopback address: "
				 "set metrics_public to serve metrics on it", addr);
			error = -EPERM;
			goto out_free;
		}
	}
	error = -EADDRNOTAVAIL;
	for (p = ai; p; p = p->ai_next) {
		fd = socket(p->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			error = -errno;
			continue;
		}
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (bind(fd, p->ai_addr, p->ai_addrlen) == 0 && listen(fd, 64) == 0)
			break;
		error = -errno;
		close(fd);
		fd = -1;
	}
	if (fd < 0) {
		snprintf(err, errlen, "cannot listen for metrics on '%s': %s", addr,
			 strerror(-error));
		goto out_free;
	}
	*out = fd;
	error = 0;
out_free:
	freeaddrinfo(ai);
	return error;
}

/* --- Requests ------------------------------------------------------------------------ */

__attribute__((format(printf, 2, 0)))
static void httpd_log(void *cls, const char *fmt, va_list ap)
{
	char line[256];
	size_t n;

	(void)cls;
	vsnprintf(line, sizeof(line), fmt, ap);
	n = strlen(line);
	while (n && line[n - 1] == '\n')
		line[--n] = '\0';
	/* A client can make these: rate limited, and not a warning. */
	ORCH_LOG_RATELIMIT(ORCH_LOG_INFO, "http: %s", line);
}

static enum MHD_Result httpd_reply(struct MHD_Connection *conn, unsigned int status,
				   const char *ctype, void *body, size_t len, bool owned)
{
	struct MHD_Response *rsp;
	enum MHD_Result ret;

	rsp = MHD_create_response_from_buffer(len, body, owned ? MHD_RESPMEM_MUST_FREE
							       : MHD_RESPMEM_PERSISTENT);
	if (!rsp) {
		if (owned)
			free(body);
		return MHD_NO;
	}
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
	MHD_add_response_header(rsp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	MHD_add_response_header(rsp, "X-Content-Type-Options", "nosniff");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(rsp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	ret = MHD_queue_response(conn, status, rsp);
	MHD_destroy_response(rsp);
	return ret;
}

static enum MHD_Result httpd_error(struct MHD_Connection *conn, unsigned int status,
				   const char *text)
{
	return httpd_reply(conn, status, "text/plain; charset=utf-8", (void *)text,
			   strlen(text), false);
}

/*
 * Every request, answered at its first call (headers read): a request
 * with a body is refused before the body is read, and libmicrohttpd then
 * closes the connection.
 */
static enum MHD_Result httpd_request(void *cls, struct MHD_Connection *conn, const char *url,
				     const char *method, const char *version,
				     const char *upload_data, size_t *upload_data_size,
				     void **req_cls)
{
	struct orch_httpd *h = cls;
	const struct orch_httpd_page *pg;
	const char *clen, *ctype = "text/plain; charset=utf-8";
	struct orch_buf body;
	int status;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)req_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return httpd_error(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	clen = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
					   MHD_HTTP_HEADER_CONTENT_LENGTH);
	if ((clen && strcmp(clen, "0")) ||
	    MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return httpd_error(conn, MHD_HTTP_BAD_REQUEST, "no request body accepted\n");
	for (pg = h->h_pages; pg->path; pg++)
		if (!strcmp(pg->path, url))
			break;
	if (!pg->path)
		return httpd_error(conn, MHD_HTTP_NOT_FOUND, "not found\n");
	orch_buf_init(&body, ORCH_HTTPD_BODY_MAX);
	status = pg->fn(h->h_arg, &body, &ctype);
	if (body.b_err) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN, "http: page too large: path=%s: %s", pg->path,
				   strerror(-body.b_err));
		orch_buf_fini(&body);
		return httpd_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "page too large\n");
	}
	/* MHD frees the body with free(), as orch_buf_fini would. */
	return httpd_reply(conn, (unsigned int)status, ctype, body.b_data, body.b_len,
			   body.b_data != NULL);
}

/* --- Life ------------------------------------------------------------------------------ */

int orch_httpd_create(const char *addr, bool public_ok, const struct orch_httpd_page *pages,
		      void *arg, struct orch_httpd **out, char *err, size_t errlen)
{
	struct orch_httpd *h = calloc(1, sizeof(*h));
	int error;

	if (!h) {
		snprintf(err, errlen, "%s", strerror(ENOMEM));
		return -ENOMEM;
	}
	error = httpd_bind(addr, public_ok, &h->h_fd, err, errlen);
	if (error) {
		free(h);
		return error;
	}
	snprintf(h->h_where, sizeof(h->h_where), "%s", addr);
	h->h_pages = pages;
	h->h_arg = arg;
	*out = h;
	return 0;
}

int orch_httpd_start(struct orch_httpd *h, char *err, size_t errlen)
{
	h->h_mhd = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			MHD_USE_ERROR_LOG,
		0, NULL, NULL, httpd_request, h,
		MHD_OPTION_LISTEN_SOCKET, h->h_fd,
		MHD_OPTION_CONNECTION_LIMIT, (unsigned int)ORCH_HTTPD_CONNS,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)ORCH_HTTPD_IDLE_S,
		MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ORCH_HTTPD_HEADERS_MAX,
		MHD_OPTION_EXTERNAL_LOGGER, httpd_log, NULL,
		MHD_OPTION_END);
	if (!h->h_mhd) {
		snprintf(err, errlen, "cannot start the metrics endpoint on '%s'", h->h_where);
		return -ENOMEM;
	}
	h->h_fd = -1; /* MHD's now: it closes it at stop */
	return 0;
}

void orch_httpd_destroy(struct orch_httpd *h)
{
	if (!h)
		return;
	if (h->h_mhd)
		MHD_stop_daemon(h->h_mhd);
	if (h->h_fd >= 0)
		close(h->h_fd);
	free(h);
}

const char *orch_httpd_address(const struct orch_httpd *h)
{
	return h->h_where;
}

void orch_html_escape(struct orch_buf *b, const char *s)
{
	for (; *s; s++) {
		const char *e = *s == '&' ? "&amp;" : *s == '<' ? "&lt;" : *s == '>' ? "&gt;" :
				*s == '"' ? "&quot;" : *s == '\'' ? "&#39;" : NULL;

		if (e)
			orch_buf_append(b, e, strlen(e));
		else
			orch_buf_append(b, s, 1);
	}
}
