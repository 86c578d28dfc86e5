/*
 * The namespace requests of clients (sv_cl.c): handlers (sv_req.h), each
 * answers @r once, now or when the intents it started finish, and returns
 * 0.  Loop thread.
 */
#ifndef ORCH_SERVER_SV_CL_H
#define ORCH_SERVER_SV_CL_H

#include "server/sv.h"

int sv_cl_lookup(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_cl_getattr(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* A size change cuts the data on every server before the answer (a TRUNCATE intent). */
int sv_cl_setattr(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* Files, symlinks and nodes; a directory is CL2SV_MKDIR. */
int sv_cl_create(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* The inode goes to the server the name hashes to, through an intent if not here. */
int sv_cl_mkdir(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_cl_readlink(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_cl_link(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* 0, or -EREMOTE with @r kept: its sticky rule needs an owner (sv_req_need_owner). */
int sv_cl_unlink(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* The old parent is held here, the new one anywhere.  0, or -EREMOTE as for unlink. */
int sv_cl_rename(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_cl_readdir(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_cl_statfs(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_cl_access(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* GETXATTR and LISTXATTR. */
int sv_cl_getxattr(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* SETXATTR and REMOVEXATTR. */
int sv_cl_setxattr(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* Answers once everything acknowledged so far is durable (fsync and fdatasync alike). */
int sv_cl_fsync(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/* A writer publishes the size it wrote up to (max-merged). */
int sv_cl_extend(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);

#endif
