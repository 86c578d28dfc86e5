/*
 * The data requests of clients (sv_data.c): handlers (sv_req.h), each
 * answers @r (now, or once the store's writer or the data worker is done)
 * and returns 0.  Loop thread.
 */
#ifndef ORCH_SERVER_SV_DATA_H
#define ORCH_SERVER_SV_DATA_H

#include "server/sv.h"

/* CL2SV_READ: up to ORCH_IO_MAX bytes of one object held here. */
int sv_data_read(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* CL2SV_WRITE: queued to the store's writer. */
int sv_data_write(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* CL2SV_COPY_RANGE: the pieces of the source held here, to wherever they go. */
int sv_data_copy_range(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* CL2SV_DEDUPE: compares (and shares) the pieces held here, on the data worker. */
int sv_data_dedupe(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* CL2SV_BLOCKSUMS: a page of the stored checksums of one object's blocks. */
int sv_data_block_sums(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* CL2SV_PUNCH: frees the pieces of a range held here. */
int sv_data_punch(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* ALLOCATED: the bytes of blocks this server's store holds for the object (st_blocks). */
int sv_data_allocated(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);

#endif
