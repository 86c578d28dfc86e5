/*
 * A log entry's frame (repl.c, "Entries"): the bytes proposed, behind a
 * header of their length and CRC32C, padded with zeros to a multiple of 8.
 * No libraft here: the fuzzer and the tests link this alone.
 */
#ifndef ORCH_REPL_ENTRY_H
#define ORCH_REPL_ENTRY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define ORCH_REPL_ENTRY_MAX (64u << 20)   /* the bytes of one proposal, at most */

/* The framed size of @len bytes (a multiple of 8); 0 if @len is too long. */
size_t orch_repl_entry_size(size_t len);
/* Frames @len bytes of @buf into @dst, orch_repl_entry_size(len) bytes. */
void orch_repl_entry_encode(void *dst, const void *buf, size_t len);
/* The same for the @n parts of @iov, @len bytes in all: no copy to join them first. */
void orch_repl_entry_encodev(void *dst, const struct iovec *iov, unsigned int n, size_t len);
/*
 * The bytes framed in @frame of @size bytes (as read from a log or a
 * peer: untrusted): 0 with *@bytes and *@len set, or -EBADMSG if the
 * header, the length or the CRC does not hold.
 */
int orch_repl_entry_decode(const void *frame, size_t size, const void **bytes, size_t *len);

#endif
