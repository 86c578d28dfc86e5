/*
 * A growable byte buffer with a hard maximum set at init (curl's dynbuf): a
 * peer can never make it grow past what the caller allowed.  A failed append
 * leaves the buffer empty and valid, and the error sticky until reset.
 * Not thread-safe; the owner serialises access.
 */
#ifndef ORCH_COMMON_BUF_H
#define ORCH_COMMON_BUF_H

#include <stddef.h>
#include <stdint.h>

struct orch_buf {
	uint8_t *b_data;
	size_t b_len;
	size_t b_cap;
	size_t b_max;
	int b_err; /* sticky -ENOMEM or -EMSGSIZE from a failed append */
};

void orch_buf_init(struct orch_buf *b, size_t max);
void orch_buf_fini(struct orch_buf *b);
/* Empties the buffer (keeps memory) and clears the error. */
void orch_buf_reset(struct orch_buf *b);
/* Makes room for @n more bytes.  0, -EMSGSIZE (over max) or -ENOMEM. */
int orch_buf_reserve(struct orch_buf *b, size_t n);
int orch_buf_append(struct orch_buf *b, const void *p, size_t n);
/* Appends printf-style text (no NUL).  0, -EMSGSIZE or -ENOMEM, as append. */
int orch_buf_printf(struct orch_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Drops the first @n bytes (consumed input). */
void orch_buf_consume(struct orch_buf *b, size_t n);

#endif
