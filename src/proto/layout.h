/*
 * Striping math: where a byte of a file lives.  Strip i of a file (bytes
 * [i*strip, (i+1)*strip)) sits on server (first_server + i) % stripe_count,
 * at offset (i / stripe_count) * strip + (offset within the strip) of that
 * server's data object for the file.  Pure functions; any thread.
 */
#ifndef ORCH_PROTO_LAYOUT_H
#define ORCH_PROTO_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "proto/types.h"

struct orch_layout_pos {
	unsigned int server; /* server index holding the byte */
	uint64_t local_off;  /* offset in that server's object */
	uint64_t run;        /* bytes from here to the end of the strip */
};

/* True if @l can be used: strip a multiple of 4096, 1..65535 servers. */
bool orch_layout_is_valid(const struct orch_layout *l);

/* Locates file offset @off.  @l must be valid. */
void orch_layout_locate(const struct orch_layout *l, uint64_t off,
			struct orch_layout_pos *out);

/*
 * The inverse of orch_layout_locate: the file offset of byte @local_off of
 * @server's object.  @l must be valid and @server < stripe_count.
 */
uint64_t orch_layout_file_off(const struct orch_layout *l, unsigned int server,
			      uint64_t local_off);

/* Size of @server's object when the file is @file_size bytes long. */
uint64_t orch_layout_local_size(const struct orch_layout *l, uint64_t file_size,
				unsigned int server);

/*
 * The servers that hold some byte of [@off, @off + @len) of a file: bit i
 * set for server i, bit 63 for every server from 63 up; 0 if @len is 0.
 * @l must be valid.
 */
uint64_t orch_layout_servers(const struct orch_layout *l, uint64_t off, uint64_t len);

#endif
