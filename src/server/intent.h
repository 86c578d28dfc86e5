/*
 * Cross-server operations as intents (intent.c): a record written with the
 * local change, the peers' steps, and the last local step that deletes it,
 * ordered by durability (docs/DESIGN.md, "Intents").  Above the peer
 * transport, the flusher and the writers table; called by the handlers.
 * Loop thread only.
 */
#ifndef ORCH_SERVER_INTENT_H
#define ORCH_SERVER_INTENT_H

#include "server/sv.h"

/* Intent kinds. */
enum sv_intent_kind {
	SV_INTENT_MKDIR = 1,      /* create a directory inode on a peer, then the entry */
	SV_INTENT_RMDIR = 2,      /* remove a directory inode on a peer, then the entry */
	SV_INTENT_NLINK = 3,      /* adjust a peer's inode link count */
	SV_INTENT_FREE_DATA = 4,  /* delete a file's data objects on every server */
	SV_INTENT_TRUNCATE = 5,   /* cut a file's data objects on every server */
	SV_INTENT_SET_PARENT = 6, /* update a moved directory's parent pointer */
	SV_INTENT_LINK = 7,       /* add a link on a peer's inode, then the entry */
	SV_INTENT_RENAME = 8,     /* add the new entry on a peer, then drop the old */
	SV_INTENT_RENAME_OVER = 9, /* remove a peer's empty victim dir, then rename here */
	SV_INTENT_RENAME_IN_OVER = 10, /* target side of a cross-server rename, same */
};
#define SV_INTENT_KIND_MAX SV_INTENT_RENAME_IN_OVER

/*
 * The body of every intent (encoded with the wire codec into the intent
 * record).  Which fields matter depends on the kind.
 */
struct sv_intent {
	uint64_t i_id;
	uint32_t i_kind;
	uint32_t i_peer;       /* server that must act */
	uint64_t i_handle;     /* object acted on */
	uint64_t i_parent;     /* directory holding the entry (here) */
	uint64_t i_size;       /* TRUNCATE: file size; NLINK: delta (int) */
	char i_name[ORCH_NAME_MAX + 1];
	char i_name2[ORCH_NAME_MAX + 1]; /* RENAME: the new name (on i_peer) */
	uint32_t i_flags;      /* RENAME: rename flags */
	struct orch_cred i_cred; /* RENAME: the caller, checked on the peer */
	uint32_t i_origin;     /* RENAME_IN_OVER: the coordinating server ... */
	uint64_t i_origin_id;  /* ... and its intent, for its applied record */
	uint64_t i_handle2;    /* RENAME_IN_OVER: the inode moving in */
	struct orch_attr i_attr; /* MKDIR: template; TRUNCATE: layout; RENAME: type, new parent */
	uint32_t i_done_mask[(ORCH_SERVERS_MAX + 31) / 32]; /* per-server progress */
};

/*
 * Writes intent @in (in the caller's open transaction; fills in->i_id).
 * Returns 0 or -errno.
 */
int sv_intent_insert(struct sv_server *sv, struct sv_intent *in);

/*
 * Writes, in the caller's open transaction, a FREE_DATA intent for @h: the
 * file's data on every server goes in the background once it commits.
 * *@out is for sv_intent_start, or for free() if the transaction aborts.
 */
int sv_intent_insert_free_data(struct sv_server *sv, uint64_t h, struct sv_intent **out);

/*
 * Drives a committed intent to completion; if @waiter is not NULL it is
 * answered when the intent finishes (or fails for good, or its deadline
 * passes, in which case the intent still completes later).  Consumes @in.
 */
void sv_intent_start(struct sv_server *sv, struct sv_intent *in, struct sv_req *waiter);

/* True while an intent of @kind on inode @handle runs here. */
bool sv_intent_running_on(const struct sv_server *sv, uint32_t kind, uint64_t handle);

/* True while an intent started for (@origin, @origin_id) of a peer runs here. */
bool sv_intent_origin_running(const struct sv_server *sv, uint32_t origin, uint64_t origin_id);

/*
 * An "applied" result of a RENAME_IN that exchanged: the inode that was at
 * the target, with its type in the top 4 bits (handles never use them:
 * server indexes are below ORCH_SERVERS_MAX).
 */
static inline uint64_t sv_applied_exchange(uint64_t h, uint32_t type)
{
	return h | (uint64_t)(type >> 12) << 60;
}

/*
 * Makes the intent machine (sv->s_intents).  After the loop, the namespace,
 * the store and the flusher exist, before anything starts an intent.  0 or
 * -ENOMEM.
 */
int sv_intent_init(struct sv_server *sv);
/* Loads and restarts every intent left in the database (after a restart). */
void sv_intent_replay_all(struct sv_server *sv);
/*
 * Stops the machine: the intents running or batched stay in the database,
 * to be replayed at the next start.  After the peers are gone (their calls
 * failed); a flush that completes later finds nothing to drive.
 */
void sv_intent_fini(struct sv_server *sv);

#endif
