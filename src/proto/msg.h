/*
 * Messages: the table in msg.def, and one generic codec that encodes and
 * decodes any message from its field list.  A decoded message borrows its
 * strings and data from the frame it came from (valid until that frame is
 * released) and owns only its dirent array (free with orch_msg_fini).
 * No I/O; any thread.
 */
#ifndef ORCH_PROTO_MSG_H
#define ORCH_PROTO_MSG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "proto/types.h"
#include "proto/wire.h"

enum orch_msg_type {
#define ORCH_MSG(name, num, from, handler, lease, log, req, rep) ORCH_##name = num,
#include "proto/msg.def"
#undef ORCH_MSG
};

enum orch_status {
#define ORCH_STATUS(name, num, err) ORCH_ST_##name = num,
#include "proto/status.def"
#undef ORCH_STATUS
};

/*
 * A member of a replica group that does not lead it answers every request
 * but pings and statistics with this (docs/SPEC-wire.md, "Replica groups").
 */
#define ORCH_ENOTLEADER EREMCHG
#define ORCH_ERETRY EINPROGRESS
#define ORCH_NO_LEADER 0xffffffffu
/*
 * How long after sending a CL2SV_VOUCH that its group answered a client
 * may use what the group leased to it.  A new leader takes changes at the
 * earliest two election timeouts plus 200 ms after its predecessor last
 * heard from a majority (server/sv_ns.c), which is after the vouch was
 * sent: kept well below that.
 */
#define ORCH_VOUCH_TERM_MS 1500u

/* Wire status <-> -errno (unknown values map to -EIO / ORCH_ST_IO). */
int orch_status_to_errno(uint32_t st);
uint32_t orch_errno_to_status(int error);

/* Name for logs ("CL2SV_LOOKUP"), or NULL for an unknown type. */
const char *orch_msg_name(uint16_t type);
/*
 * Field list of a type's request or reply, as msg.def gives it ("c:cred
 * p:parent n:name"; walk it with orch_msg_field_next), or NULL for an
 * unknown type.
 */
const char *orch_msg_fields(uint16_t type, bool reply);
/*
 * What a reply to @type leases on a connection with leases (msg.def;
 * SPEC-wire.md, "Leases"): *@dir gets the code of the request field that
 * names a directory whose entries the reply speaks for, *@inodes the code
 * of the reply field whose inodes it describes; 0 for none, both for an
 * unknown type.  Either pointer may be NULL.
 */
void orch_msg_lease(uint16_t type, char *dir, char *inodes);
/*
 * True if a reply to @type leases (as orch_msg_lease says) on a connection
 * granted @features: one with ORCH_FEAT_LEASES, and for CL2SV_WRITERS also
 * ORCH_FEAT_WRITERS_ATTR (an earlier server leases nothing by it).  The
 * server grants by it and the client trusts by it.
 */
bool orch_msg_reply_leases(uint16_t type, uint64_t features);
/*
 * msg.def's log column: true if a request of @type changes a replica
 * group's namespace (its leader runs it through the log), and if it is
 * also sent exactly once (numbered with ORCH_FRAME_SEQ to a group).
 */
bool orch_msg_changes_namespace(uint16_t type);
bool orch_msg_exactly_once(uint16_t type);
/*
 * True if the request (or reply) of @type ends with data (D), which
 * orch_msg_encode_head leaves out of the frame.
 */
bool orch_msg_has_data_last(uint16_t type, bool reply);
/*
 * Position of @type in the table (the order orch_msg_types() reports), for
 * per-type counters; -1 for an unknown type.
 */
int orch_msg_index(uint16_t type);
/* Every known type, for tests and fuzzers: fills up to @max, returns count. */
size_t orch_msg_types(uint16_t *out, size_t max);

struct orch_statfs {
	uint32_t bsize;
	uint64_t blocks;
	uint64_t bfree;
	uint64_t bavail;
	uint64_t files;
	uint64_t ffree;
	uint32_t namemax;
	/*
	 * The file system under the server's blocks, on its host (0: none
	 * shared, a block device), and the blocks it can still give them.
	 * Servers sharing one count it once (orch_fs_statfs).
	 */
	uint64_t host_fs;
	uint64_t host_bavail;
};

/*
 * K: a place in an AD2SV_FSMAP listing, the key of a record (the last one
 * a page returned), in the order the listing goes.
 */
struct orch_fsmap_key {
	uint64_t start;   /* global block the record starts at */
	int64_t owner;    /* its owner: an object's nid (> 0) or a special owner (< 0) */
	uint64_t fileoff; /* the object block at @start */
};

#define ORCH_NONCE_LEN 32
#define ORCH_MAC_LEN 32
#define ORCH_ORIGIN_CLIENT 0xffffffffu
#define ORCH_JSON_MAX (1u << 20)

/*
 * Any message, request or reply.  Only the fields its type lists are
 * encoded or decoded; the rest are ignored.
 */
struct orch_msg {
	uint16_t type;
	uint8_t flags;        /* ORCH_FRAME_* */
	uint8_t version;      /* of the frame, when decoded */
	uint64_t reqid;
	int status;           /* replies: 0 or -errno */
	/* Replies with status -ORCH_ENOTLEADER: the member that leads, or ORCH_NO_LEADER. */
	uint32_t leader;
	/*
	 * Requests with ORCH_FRAME_SEQ: who asks (> 0), the request's number
	 * (> 0), and below which number the client has every answer.
	 */
	uint64_t client, seq, done_below;

	struct orch_cred cred;   /* c */
	uint64_t handle;         /* h */
	uint64_t handle2;        /* H */
	uint64_t offset2;        /* Q */
	struct orch_layout layout;  /* L */
	struct orch_layout layout2; /* Y */
	uint64_t parent;         /* p */
	uint64_t newparent;      /* P */
	uint64_t offset;         /* o */
	uint64_t size;           /* s */
	uint64_t rdev;           /* r */
	uint64_t cookie;         /* k */
	uint64_t id;             /* i */
	int64_t time_ns;         /* T */
	uint32_t mode;           /* m */
	/*
	 * f: the message's flag word, under the name msg.def gives it (a field
	 * of flags.def: valid, create_flags, unlink_flags ...); flags32 is any
	 * of them, for code that treats every message alike.
	 */
	union {
		uint32_t flags32;
#define ORCH_FLAGS(set, field, unknown) uint32_t field;
#define ORCH_FLAG(set, bit, value, doc)
#include "proto/flags.def"
#undef ORCH_FLAG
#undef ORCH_FLAGS
	};
	uint32_t length;         /* l */
	uint32_t origin;         /* O */
	int32_t delta;           /* d */
	struct orch_str name;    /* n */
	struct orch_str name2;   /* N */
	struct orch_str target;  /* t */
	struct orch_str xname;   /* x */
	struct orch_str data;    /* D */
	struct orch_str json;    /* J */
	struct orch_attr attr;   /* a */
	struct orch_dirent entry; /* e: handle, has_attr, attr */
	struct orch_dirent *dirents; /* E: owned after decode, borrowed for encode */
	uint32_t ndirents;
	bool eof;                /* b */
	struct orch_statfs statfs; /* S */
	struct orch_fsmap_key fsmap_key; /* K */
	uint8_t vmin, vmax;      /* V */
	uint64_t features;       /* V */
	uint8_t nonce[ORCH_NONCE_LEN]; /* Z */
	uint8_t mac[ORCH_MAC_LEN];     /* M */
};

/*
 * True if request @m goes to a group numbered (exactly once): its type is
 * ONCE, or it is a CL2SV_WRITERS that registers nothing on its connection.
 */
bool orch_msg_numbered(const struct orch_msg *m);

/*
 * Appends the frame for @m (header and payload) to @b.  A reply with a
 * non-zero status carries the status only.  Returns 0, -EINVAL for an
 * unknown type or a field over its limit, or the buffer's error.
 */
int orch_msg_encode(struct orch_buf *b, const struct orch_msg *m);

/*
 * The same for a message whose last field is data (D), without the data's
 * bytes: the frame's length counts them, and the caller sends m->data
 * right after the frame, so a 1 MiB WRITE is not copied into the frame.
 * -EINVAL also if the type's last field is not D.
 */
int orch_msg_encode_head(struct orch_buf *b, const struct orch_msg *m);

/*
 * Decodes the payload of a frame whose header is @h.  Returns 0, -ENOSYS
 * for an unknown type (the caller answers AN2AN_UNKNOWN), -EPROTO for a
 * malformed payload, -ENOMEM.  On error *@m holds nothing to free.
 */
int orch_msg_decode(const struct orch_frame_hdr *h, const uint8_t *payload,
		    struct orch_msg *m);

/* The handle in field @code of @m: h, p, P or H; 0 for any other code. */
uint64_t orch_msg_handle(const struct orch_msg *m, char code);

/*
 * Checks that every handle decoded request @m names is of one of the
 * cluster's @nservers servers (the top 16 bits, types.h): its h, p, P and H
 * fields, the parent in a SV2SV_MKDIR_INODE's attributes and the handles in
 * a SV2SV_DATA_DELETE_MANY's data.  The decoder cannot: it does not know the
 * cluster.  A handle of a server that does not exist names nothing anyone
 * can reach, so a request that carries one is refused before it is served
 * (a WRITE would make a data object no delete ever reaches).  Handle 0
 * ("none") passes.  Returns 0, or -EINVAL with the first such handle in
 * *@bad.  Replies are not checked.
 */
int orch_msg_check_handles(const struct orch_msg *m, unsigned int nservers, uint64_t *bad);

/*
 * Checks decoded request @m's flag word against flags.def: -EINVAL if it
 * sets a bit its word does not list and the word's rule is REFUSE, else 0.
 * Replies are not checked.
 */
int orch_msg_check_flags(const struct orch_msg *m);

/* Frees what decode allocated.  Accepts a zeroed message. */
void orch_msg_fini(struct orch_msg *m);

/* Fills a request header: type, a zero status, the caller's reqid. */
static inline void orch_msg_init(struct orch_msg *m, uint16_t type)
{
	*m = (struct orch_msg){ .type = type, .version = ORCH_PROTO_VERSION };
}

/* Copies a borrowed string into a NUL-terminated buffer; -ENAMETOOLONG. */
int orch_str_copy(const struct orch_str *s, char *out, size_t outlen);

static inline struct orch_str orch_str_of(const char *s, size_t len)
{
	return (struct orch_str){ .s = s, .len = (uint32_t)len };
}

/*
 * Walks a field list (orch_msg_fields): returns the code of the field at
 * *@f and moves *@f to the next field, or returns 0 at the end.  *@name, if
 * @name is not NULL, gets the field's name, borrowed from the table.
 */
static inline char orch_msg_field_next(const char **f, struct orch_str *name)
{
	const char *p = *f, *n;
	char code = *p;

	if (!code)
		return 0;
	n = p[1] == ':' ? p + 2 : p + 1;
	for (p = n; *p && *p != ' '; p++)
		;
	if (name)
		*name = orch_str_of(n, (size_t)(p - n));
	*f = *p ? p + 1 : p;
	return code;
}

#endif
