/*
 * Host-side types shared by the wire protocol, the namespace and the client:
 * handles, layouts, attributes, credentials.  All integers are fixed width
 * because every one of these is also encoded on the wire (proto/msg.c) and in
 * the database (meta/).
 */
#ifndef ORCH_PROTO_TYPES_H
#define ORCH_PROTO_TYPES_H

#include <stdbool.h>
#include <stdint.h>

/* --- Handles --------------------------------------------------------------- */

/*
 * A handle is 64 bits: the server index in the top 16 bits and a per-server
 * counter, never reused, below.  The root is server 0, counter 1, so its handle
 * is 1 = FUSE_ROOT_ID.  Handle 0 means "none".
 */
#define ORCH_ROOT_HANDLE 1ULL
#define ORCH_HANDLE_SERVER_SHIFT 48
#define ORCH_HANDLE_COUNTER_MASK ((1ULL << ORCH_HANDLE_SERVER_SHIFT) - 1)

static inline unsigned int orch_handle_server(uint64_t h)
{
	return (unsigned int)(h >> ORCH_HANDLE_SERVER_SHIFT);
}

static inline uint64_t orch_handle_make(unsigned int server, uint64_t counter)
{
	return (uint64_t)server << ORCH_HANDLE_SERVER_SHIFT |
	       (counter & ORCH_HANDLE_COUNTER_MASK);
}

/* --- Limits (checked before any allocation) --------------------------------- */

#define ORCH_NAME_MAX 255         /* one path component */
#define ORCH_PATH_MAX 4096        /* symlink target */
#define ORCH_GROUPS_MAX 64        /* supplementary groups sent per request */
#define ORCH_XATTR_NAME_MAX 255
#define ORCH_XATTR_SIZE_MAX 65536
#define ORCH_XATTR_LIST_MAX 65536
#define ORCH_IO_MAX (1u << 20)    /* one READ or WRITE */
#define ORCH_READDIR_MAX 1024     /* entries in one READDIR reply */
#define ORCH_DATA_DELETE_MANY_MAX 1024 /* handles in one SV2SV_DATA_DELETE_MANY */

/* --- Layout ----------------------------------------------------------------- */

/*
 * A file is cut into strips of strip_size bytes; strip i lives on server
 * (first_server + i) % stripe_count.  Strip 0 sits on the inode's own server.
 */
struct orch_layout {
	uint32_t strip_size;   /* bytes, a multiple of 4096; 0 for non-files */
	uint16_t stripe_count; /* servers the file is striped over */
	uint16_t first_server; /* server index of strip 0 */
};

/* CL2SV_DEDUPE flags: only compare, change nothing (the client's first pass). */
#define ORCH_DEDUPE_COMPARE (1u << 0)

/* CL2SV_CREATE flags. */
#define ORCH_CREATE_EXCL (1u << 0)   /* O_EXCL */
#define ORCH_CREATE_WRITER (1u << 1) /* a new regular file: register the creator as
					a writer (CL2SV_WRITERS REGISTER) */

/*
 * CL2SV_WRITERS flags (docs/DESIGN.md, "Writers and bytes past the size").
 * REGISTER and RELEASE first max-merge the size with the request's size
 * when it is not 0, as EXTEND does.
 */
#define ORCH_WRITERS_REGISTER (1u << 0) /* this connection may write past the size */
#define ORCH_WRITERS_RELEASE (1u << 1)  /* ... no longer: it published all it wrote */
#define ORCH_WRITERS_PROBE (1u << 2)    /* admin: BUSY if a writer may still publish */
#define ORCH_WRITERS_RECLAIM (1u << 3)  /* admin: PROBE, then cut past the size */

/* SV2SV_DATA_CUT flags: cut nothing, answer BUSY if something may lie past the size. */
#define ORCH_DATA_CUT_PROBE (1u << 0)

/* AD2SV_SCRUB request flags. */
#define ORCH_SCRUB_F_DATA 0x1u    /* also read every written block (I17) */
#define ORCH_SCRUB_F_JSON 0x2u    /* the report as JSON, else text lines */
#define ORCH_SCRUB_F_RECLAIM 0x4u /* cut what N7 finds (bytes past a file's size) */

/* --- Attributes -------------------------------------------------------------- */

/* Setattr "valid" bits (like FUSE_SET_ATTR_*). */
#define ORCH_SET_MODE (1u << 0)
#define ORCH_SET_UID (1u << 1)
#define ORCH_SET_GID (1u << 2)
#define ORCH_SET_SIZE (1u << 3)
#define ORCH_SET_ATIME (1u << 4)
#define ORCH_SET_MTIME (1u << 5)
#define ORCH_SET_ATIME_NOW (1u << 7)
#define ORCH_SET_MTIME_NOW (1u << 8)
#define ORCH_SET_CTIME (1u << 10)
/* The layout of an empty regular file: a clone target takes its source's. */
#define ORCH_SET_LAYOUT (1u << 11)
#define ORCH_SET_ALL_ 0xdbfu

/*
 * Everything stat(2) needs.  The size is always present: there is no
 * size-less attribute anywhere (the bug the OrangeFS 4.8 series fixed).
 */
struct orch_attr {
	uint64_t handle;
	uint32_t mode; /* S_IFMT type bits and permissions */
	uint32_t uid;
	uint32_t gid;
	uint32_t nlink;
	uint64_t size;
	uint64_t rdev;
	int64_t atime_ns;
	int64_t mtime_ns;
	int64_t ctime_ns;
	uint64_t parent; /* directory the inode was created in or moved to */
	struct orch_layout layout;
	uint32_t flags;  /* ORCH_ATTR_*: what the server knew when it read them */
};

/*
 * The inode had no extended attribute at all: a client may answer a
 * getxattr with ENODATA itself for as long as it trusts the attributes
 * (`ls -l` asks for two or three names per file).
 */
#define ORCH_ATTR_NOXATTR (1u << 0)
#define ORCH_ATTR_KNOWN_ ORCH_ATTR_NOXATTR

/* --- Credentials ----------------------------------------------------------- */

struct orch_cred {
	uint32_t uid;
	uint32_t gid;
	uint32_t ngroups; /* <= ORCH_GROUPS_MAX */
	uint32_t groups[ORCH_GROUPS_MAX];
};

/* --- Directory entries -------------------------------------------------------- */

struct orch_dirent {
	uint64_t handle;
	uint64_t cookie;  /* readdir cursor that resumes after this entry */
	uint32_t type;    /* S_IFMT bits of the child */
	uint8_t namelen;
	char name[ORCH_NAME_MAX + 1];
	bool has_attr;    /* readdirplus: attr valid (child held on this server) */
	struct orch_attr attr;
};

#endif
