/* A log entry's frame (entry.h). */
#include <endian.h>
#include <errno.h>
#include <string.h>

#include "common/crc32c.h"
#include "repl/entry.h"

/* What precedes an entry's bytes (little-endian). */
struct repl_entry_hdr {
	uint32_t e_len;       /* the bytes proposed, without padding */
	uint32_t e_crc;       /* their CRC32C */
};

size_t orch_repl_entry_size(size_t len)
{
	if (len > ORCH_REPL_ENTRY_MAX)
		return 0;
	return (sizeof(struct repl_entry_hdr) + len + 7) & ~(size_t)7;
}

void orch_repl_entry_encodev(void *dst, const struct iovec *iov, unsigned int n, size_t len)
{
	struct repl_entry_hdr h = { .e_len = htole32((uint32_t)len) };
	char *p = (char *)dst + sizeof(h);
	uint32_t crc = 0;

	memset(dst, 0, orch_repl_entry_size(len));
	for (unsigned int i = 0; i < n; i++) {
		if (!iov[i].iov_len)
			continue; /* an empty part may have no buffer at all */
		crc = orch_crc32c(crc, iov[i].iov_base, iov[i].iov_len);
		memcpy(p, iov[i].iov_base, iov[i].iov_len);
		p += iov[i].iov_len;
	}
	h.e_crc = htole32(crc);
	memcpy(dst, &h, sizeof(h));
}

void orch_repl_entry_encode(void *dst, const void *buf, size_t len)
{
	struct iovec one = { .iov_base = (void *)(uintptr_t)buf, .iov_len = len };

	orch_repl_entry_encodev(dst, &one, 1, len);
}

int orch_repl_entry_decode(const void *frame, size_t size, const void **bytes, size_t *len)
{
	const unsigned char *p = frame;
	struct repl_entry_hdr h;
	size_t n;

	if (size < sizeof(h))
		return -EBADMSG;
	memcpy(&h, p, sizeof(h));
	n = le32toh(h.e_len);
	if (n > ORCH_REPL_ENTRY_MAX || n > size - sizeof(h) ||
	    orch_crc32c(0, p + sizeof(h), n) != le32toh(h.e_crc))
		return -EBADMSG;
	*bytes = p + sizeof(h);
	*len = n;
	return 0;
}
