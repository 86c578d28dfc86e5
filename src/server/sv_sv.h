/*
 * The requests other servers send us (sv_sv.c): the peer steps of their
 * intents, each idempotent and answered once durable.  A handler file:
 * above the intent machine and the flusher.  Loop thread.
 */
#ifndef ORCH_SERVER_SV_SV_H
#define ORCH_SERVER_SV_SV_H

#include "server/sv.h"

/* Handlers (sv_req.h), one per SV2SV_* request but DATA_CUT and RECLAIM. */
int sv_sv_mkdir_inode(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_sv_rmdir_inode(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* NLINK_ADJ: adds delta (+1 or -1) to the inode's link count. */
int sv_sv_nlink_adj(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_sv_data_delete(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_sv_data_delete_many(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_sv_data_truncate(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_sv_set_parent(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* RENAME_IN: 0, or -EREMOTE with @r kept: the sticky rule needs an owner. */
int sv_sv_rename_in(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* APPLIED_TRIM: forgets the origin's applied records below id, answered at once. */
int sv_sv_applied_trim(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* WRITE: a piece of a copy, queued to the store's writer. */
int sv_sv_write(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);

#endif
