/*
 * File data in a replica group (docs/DESIGN.md, "File data in a replica
 * group").  The leader sends every store operation it applies, in the
 * order it applies them, to each follower on a connection of its own
 * (SV2SV_MIRROR); the follower applies them in arrival order.  Which
 * followers hold the data in sync is a value of the namespace, changed
 * through the log; the gate (sv_gate.h) holds every reply until the
 * followers in sync applied what was sent before it and make a majority
 * with the leader.  A follower whose stream did not run from the start of
 * the leader's term is resynced in full, through the same stream, then
 * added back.  A leader that is not in sync hands leadership to one that
 * is.
 *
 * Every store operation of the server goes through the sv_store_*
 * functions here (or sv_write.c's queue, which calls sv_mirror_write), so
 * that none escapes the stream; on a server that does not lead a group of
 * several they are the plain store calls.  Above the store, the flusher,
 * the gate and sv_ns; below the handlers and intents.  Loop thread only.
 */
#ifndef ORCH_SERVER_SV_MIRROR_H
#define ORCH_SERVER_SV_MIRROR_H

#include <stddef.h>
#include <stdint.h>

#include "server/sv.h"

/* SV2SV_MIRROR's op (the wire's numbers: never reused). */
enum sv_mirror_op {
	SV_MIRROR_WRITE = 1,        /* handle, offset, data */
	SV_MIRROR_TRUNCATE = 2,     /* handle, size */
	SV_MIRROR_CUT = 3,          /* handle, size */
	SV_MIRROR_PUNCH = 4,        /* handle, offset, size: the length */
	SV_MIRROR_DELETE = 5,       /* handle */
	SV_MIRROR_DELETE_MANY = 6,  /* data: the handles, 8 bytes each */
	SV_MIRROR_SYNC = 7,         /* make everything durable */
	SV_MIRROR_RESYNC_BEGIN = 8, /* a resync starts (the first frame of a stream) */
	SV_MIRROR_RESYNC_END = 9,   /* every object was sent; none past offset (a handle) */
	SV_MIRROR_RESYNC_DROP = 10, /* no object between offset and handle (both excluded) */
};

/* After the namespace's group is open and before serving.  0 or -ENOMEM. */
int sv_mirror_init(struct sv_server *sv);
/*
 * This member leads and serves (sv_ns's on_lead): closes the gate and
 * starts the streams, once the log says this member is in sync.
 */
void sv_mirror_lead(struct sv_server *sv);
/*
 * Stops the streams and answers what waits at the gate (ENOTLEADER: the
 * client asks the next leader).  Before the flusher stops.
 */
void sv_mirror_fini(struct sv_server *sv);

/* SV2SV_MIRROR and SV2SV_MIRROR_SUMS, on a follower. */
int sv_mirror_request(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
int sv_mirror_sums(struct sv_server *sv, struct sv_req *r, const struct orch_msg *m);
/*
 * Answers @r with a page of at most @max checksums of object @h's blocks
 * from block @from on: SV2SV_MIRROR_SUMS's reply, with @seq as its seq,
 * and CL2SV_BLOCKSUMS's (sv_data.c).
 */
void sv_sums_reply(struct sv_server *sv, struct sv_req *r, uint64_t h, uint64_t from, size_t max,
		   uint64_t seq);

/* The store's calls, applied here and sent to the followers. */
int sv_store_write(struct sv_server *sv, uint64_t h, uint64_t off, const void *data, size_t len);
int sv_store_truncate(struct sv_server *sv, uint64_t h, uint64_t size);
int sv_store_cut(struct sv_server *sv, uint64_t h, uint64_t size);
int sv_store_punch(struct sv_server *sv, uint64_t h, uint64_t off, uint64_t len);
int sv_store_delete(struct sv_server *sv, uint64_t h);
int sv_store_delete_many(struct sv_server *sv, const uint64_t *handles, size_t n);
/* Sends a write queued to the store here (sv_write.c) as it is queued. */
void sv_mirror_write(struct sv_server *sv, uint64_t h, uint64_t off, const void *data,
		     size_t len);
/* True if copies, dedupes and reclaims are refused (-EOPNOTSUPP): a group of several. */
bool sv_mirror_in_group(const struct sv_server *sv);

struct sv_mirror_counts {
	uint64_t sent;              /* operations sent */
	uint64_t safe;              /* ... applied by every follower in sync */
	uint64_t in_sync;           /* members in sync, this one included (leader) */
	uint64_t resyncs;           /* resyncs finished */
	uint64_t resync_bytes;      /* bytes sent by them */
	uint64_t resync_same;       /* bytes they found equal by checksum, not sent */
	uint64_t dropped;           /* followers taken out of sync */
	uint64_t applied;           /* operations applied here as a follower */
	uint64_t refused;           /* frames refused here (another term or leader) */
	uint64_t replies_held;      /* replies that waited at the gate */
	/* Now (leader): the set in sync (a bit per member), a change of it in flight, the gate. */
	uint64_t mask;
	bool changing;
	bool gate_open;
	uint64_t waiting;           /* replies and steps held at the gate */
	/* Each follower's stream: "member:state:in_sync:acked" joined by spaces. */
	char followers[160];
};
void sv_mirror_counts(const struct sv_server *sv, struct sv_mirror_counts *out);

#endif
