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

void orch_repl_entry_encode(void *dst, const void *buf, size_t len)
{
	struct repl_entry_hdr h = {
		.e_len = htole32((uint32_t)len),
		.e_crc = htole32(orch_crc32c(0, buf, len)),
	};

	memset(dst, 0, orch_repl_entry_size(len));
	memcpy(dst, &h, sizeof(h));
	memcpy((char *)dst + sizeof(h), buf, len);
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
