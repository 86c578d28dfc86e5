/* Bounded growable buffer.  See buf.h. */
#include "common/buf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void orch_buf_init(struct orch_buf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->b_max = max;
}

void orch_buf_fini(struct orch_buf *b)
{
	free(b->b_data);
	memset(b, 0, sizeof(*b));
}

void orch_buf_reset(struct orch_buf *b)
{
	b->b_len = 0;
	b->b_err = 0;
}

static void buf_fail(struct orch_buf *b, int error)
{
	b->b_len = 0;
	b->b_err = error;
}

int orch_buf_reserve(struct orch_buf *b, size_t n)
{
	size_t cap;
	uint8_t *p;

	if (b->b_err)
		return b->b_err;
	if (n > b->b_max || b->b_len > b->b_max - n) {
		buf_fail(b, -EMSGSIZE);
		return -EMSGSIZE;
	}
	if (b->b_len + n <= b->b_cap)
		return 0;
	cap = b->b_cap ? b->b_cap : 256;
	while (cap < b->b_len + n)
		cap *= 2;
	if (cap > b->b_max)
		cap = b->b_max;
	p = realloc(b->b_data, cap);
	if (!p) {
		buf_fail(b, -ENOMEM);
		return -ENOMEM;
	}
	b->b_data = p;
	b->b_cap = cap;
	return 0;
}

int orch_buf_append(struct orch_buf *b, const void *p, size_t n)
{
	int error = orch_buf_reserve(b, n);

	if (error)
		return error;
	if (n)
		memcpy(b->b_data + b->b_len, p, n);
	b->b_len += n;
	return 0;
}

int orch_buf_printf(struct orch_buf *b, const char *fmt, ...)
{
	char tmp[256];
	va_list ap;
	int n, error;

	va_start(ap, fmt);
	n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n < sizeof(tmp))
		return orch_buf_append(b, tmp, (size_t)n);
	/* Longer: format again in place, with room for vsnprintf's NUL. */
	error = orch_buf_reserve(b, (size_t)n + 1);
	if (error)
		return error;
	va_start(ap, fmt);
	vsnprintf((char *)b->b_data + b->b_len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	b->b_len += (size_t)n;
	return 0;
}

void orch_buf_consume(struct orch_buf *b, size_t n)
{
	if (n >= b->b_len) {
		b->b_len = 0;
		return;
	}
	memmove(b->b_data, b->b_data + n, b->b_len - n);
	b->b_len -= n;
}
