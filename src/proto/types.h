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

/* --- Flag words (flags.def) ---------------------------------------------------- */

/* Each bit: ORCH_<SET>_<BIT>, e.g. ORCH_UNLINK_RMDIR. */
enum {
#define ORCH_FLAGS(set, field, unknown)
#define ORCH_FLAG(set, bit, value, doc) ORCH_##set##_##bit = (value),
#include "proto/flags.def"
#undef ORCH_FLAG
#undef ORCH_FLAGS
};

/* Each word's bits: ORCH_<SET>_KNOWN_, e.g. ORCH_SET_KNOWN_. */
enum {
	ORCH_FLAGS_NONE_ = 0   /* so that each word's constant can start with a comma */
#define ORCH_FLAGS(set, field, unknown) , ORCH_##set##_KNOWN_ = 0
#define ORCH_FLAG(set, bit, value, doc) | (value)
#include "proto/flags.def"
#undef ORCH_FLAG
#undef ORCH_FLAGS
};

/* --- Attributes -------------------------------------------------------------- */

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

/*
 * The file-capability xattr (Linux VFS_CAP_*): dropped at a write, a
 * truncate or a change of owner, like the set-id bits.
 */
#define ORCH_XATTR_CAPS "security.capability"

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
