/*
 * The generic message codec.  Each message lists its fields as a string of
 * codes (msg.def); encode and decode walk that string, so the table is the
 * single description of the protocol and there is no per-message code to
 * drift from it.
 */
#include "proto/msg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "common/util.h"

/*
 * Two flag words are Linux's (flags.def): the client sends what the kernel
 * gave it and the namespace takes them as they come.
 */
_Static_assert(ORCH_RENAME_NOREPLACE == RENAME_NOREPLACE && ORCH_RENAME_EXCHANGE == RENAME_EXCHANGE,
	       "rename_flags are Linux's");
_Static_assert((int)ORCH_XATTR_CREATE == (int)XATTR_CREATE &&
	       (int)ORCH_XATTR_REPLACE == (int)XATTR_REPLACE,
	       "xattr_flags are Linux's");

/* msg.def's log column. */
enum msg_log { MSG_NONE, MSG_LOG, MSG_ONCE };

struct msg_desc {
	uint16_t type;
	const char *name;
	const char *req;
	const char *rep;
	const char *lease;
	enum msg_log log;
};

static const struct msg_desc msg_table[] = {
#define ORCH_MSG(name_, num, from, handler, lease_, log_, req_, rep_) \
	{ num, #name_, req_, rep_, lease_, MSG_##log_ },
#include "proto/msg.def"
#undef ORCH_MSG
};

static const struct msg_desc *msg_find(uint16_t type)
{
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(msg_table); i++)
		if (msg_table[i].type == type)
			return &msg_table[i];
	return NULL;
}

int orch_msg_index(uint16_t type)
{
	const struct msg_desc *d = msg_find(type);

	return d ? (int)(d - msg_table) : -1;
}

bool orch_msg_changes_namespace(uint16_t type)
{
	const struct msg_desc *d = msg_find(type);

	return d && d->log != MSG_NONE;
}

bool orch_msg_exactly_once(uint16_t type)
{
	const struct msg_desc *d = msg_find(type);

	return d && d->log == MSG_ONCE;
}

bool orch_msg_numbered(const struct orch_msg *m)
{
	/*
	 * A writers' request that registers nothing on its connection (a
	 * release, a close) is numbered too: sent again after the leader that
	 * applied it froze, it must not extend the size a second time, over a
	 * truncate made in between.  One that registers (on the connection it
	 * goes on) must be asked afresh on the next connection.
	 */
	if (m->type == ORCH_CL2SV_WRITERS)
		return !(m->writers_flags & (ORCH_WRITERS_REGISTER | ORCH_WRITERS_OPEN |
					     ORCH_WRITERS_PROBE | ORCH_WRITERS_RECLAIM));
	return orch_msg_exactly_once(m->type);
}

const char *orch_msg_name(uint16_t type)
{
	const struct msg_desc *d = msg_find(type);

	return d ? d->name : NULL;
}

const char *orch_msg_fields(uint16_t type, bool reply)
{
	const struct msg_desc *d = msg_find(type);

	return d ? (reply ? d->rep : d->req) : NULL;
}

void orch_msg_lease(uint16_t type, char *dir, char *inodes)
{
	const struct msg_desc *d = msg_find(type);
	const char *l = d && d->lease[0] ? d->lease : "--";

	if (dir)
		*dir = l[0] == '-' ? 0 : l[0];
	if (inodes)
		*inodes = l[1] == '-' ? 0 : l[1];
}

bool orch_msg_reply_leases(uint16_t type, uint64_t features)
{
	if (!(features & ORCH_FEAT_LEASES))
		return false;
	return type != ORCH_CL2SV_WRITERS || (features & ORCH_FEAT_WRITERS_ATTR);
}

uint64_t orch_msg_handle(const struct orch_msg *m, char code)
{
	switch (code) {
	case 'h': return m->handle;
	case 'p': return m->parent;
	case 'P': return m->newparent;
	case 'H': return m->handle2;
	default: return 0;
	}
}

bool orch_msg_has_data_last(uint16_t type, bool reply)
{
	const char *f = orch_msg_fields(type, reply);
	char code, last = 0;

	while (f && (code = orch_msg_field_next(&f, NULL)))
		last = code;
	return last == 'D';
}

size_t orch_msg_types(uint16_t *out, size_t max)
{
	size_t n = ORCH_MIN(max, ORCH_ARRAY_SIZE(msg_table));

	for (size_t i = 0; i < n; i++)
		out[i] = msg_table[i].type;
	return n;
}

/* --- Status codes ------------------------------------------------------------- */

static const struct {
	uint32_t st;
	int error;
} status_table[] = {
#define ORCH_STATUS(name, num, err) { num, err },
#include "proto/status.def"
#undef ORCH_STATUS
};

int orch_status_to_errno(uint32_t st)
{
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(status_table); i++)
		if (status_table[i].st == st)
			return -status_table[i].error;
	return -EIO;
}

uint32_t orch_errno_to_status(int error)
{
	if (error < 0)
		error = -error;
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(status_table); i++)
		if (status_table[i].error == error)
			return status_table[i].st;
	return ORCH_ST_IO;
}

/* --- Compound fields ------------------------------------------------------------ */


static void attr_encode(struct orch_buf *b, const struct orch_attr *a)
{
	orch_wr_u64(b, a->handle);
	orch_wr_u32(b, a->mode);
	orch_wr_u32(b, a->uid);
	orch_wr_u32(b, a->gid);
	orch_wr_u32(b, a->nlink);
	orch_wr_u64(b, a->size);
	orch_wr_u64(b, a->rdev);
	orch_wr_u64(b, (uint64_t)a->atime_ns);
	orch_wr_u64(b, (uint64_t)a->mtime_ns);
	orch_wr_u64(b, (uint64_t)a->ctime_ns);
	orch_wr_u64(b, a->parent);
	orch_wr_u32(b, a->layout.strip_size);
	orch_wr_u16(b, a->layout.stripe_count);
	orch_wr_u16(b, a->layout.first_server);
	orch_wr_u32(b, a->flags);
	orch_wr_u32(b, 0); /* reserved */
}

static void attr_decode(struct orch_rd *rd, struct orch_attr *a)
{
	a->handle = orch_rd_u64(rd);
	a->mode = orch_rd_u32(rd);
	a->uid = orch_rd_u32(rd);
	a->gid = orch_rd_u32(rd);
	a->nlink = orch_rd_u32(rd);
	a->size = orch_rd_u64(rd);
	a->rdev = orch_rd_u64(rd);
	a->atime_ns = (int64_t)orch_rd_u64(rd);
	a->mtime_ns = (int64_t)orch_rd_u64(rd);
	a->ctime_ns = (int64_t)orch_rd_u64(rd);
	a->parent = orch_rd_u64(rd);
	a->layout.strip_size = orch_rd_u32(rd);
	a->layout.stripe_count = orch_rd_u16(rd);
	a->layout.first_server = orch_rd_u16(rd);
	a->flags = orch_rd_u32(rd) & ORCH_ATTR_KNOWN_;   /* unknown bits: a newer peer's */
	(void)orch_rd_u32(rd);
}

static bool name_ok(const struct orch_str *s)
{
	return s->len >= 1 && s->len <= ORCH_NAME_MAX;
}

/* --- Encode ---------------------------------------------------------------------- */

static int field_encode(struct orch_buf *b, char code, const struct orch_msg *m)
{
	switch (code) {
	case 'c':
		if (m->cred.ngroups > ORCH_GROUPS_MAX)
			return -EINVAL;
		orch_wr_u32(b, m->cred.uid);
		orch_wr_u32(b, m->cred.gid);
		orch_wr_u16(b, (uint16_t)m->cred.ngroups);
		for (uint32_t i = 0; i < m->cred.ngroups; i++)
			orch_wr_u32(b, m->cred.groups[i]);
		break;
	case 'h': orch_wr_u64(b, m->handle); break;
	case 'H': orch_wr_u64(b, m->handle2); break;
	case 'Q': orch_wr_u64(b, m->offset2); break;
	case 'L':
	case 'Y': {
		const struct orch_layout *l = code == 'L' ? &m->layout : &m->layout2;

		orch_wr_u32(b, l->strip_size);
		orch_wr_u16(b, l->stripe_count);
		orch_wr_u16(b, l->first_server);
		break;
	}
	case 'p': orch_wr_u64(b, m->parent); break;
	case 'P': orch_wr_u64(b, m->newparent); break;
	case 'o': orch_wr_u64(b, m->offset); break;
	case 's': orch_wr_u64(b, m->size); break;
	case 'r': orch_wr_u64(b, m->rdev); break;
	case 'k': orch_wr_u64(b, m->cookie); break;
	case 'i': orch_wr_u64(b, m->id); break;
	case 'T': orch_wr_u64(b, (uint64_t)m->time_ns); break;
	case 'm': orch_wr_u32(b, m->mode); break;
	case 'f': orch_wr_u32(b, m->flags32); break;
	case 'l': orch_wr_u32(b, m->length); break;
	case 'O': orch_wr_u32(b, m->origin); break;
	case 'd': orch_wr_u32(b, (uint32_t)m->delta); break;
	case 'n':
	case 'N':
	case 'x': {
		const struct orch_str *s = code == 'n' ? &m->name : code == 'N' ? &m->name2 : &m->xname;

		if (!name_ok(s))
			return -EINVAL;
		orch_wr_str8(b, s->s, s->len);
		break;
	}
	case 't':
		if (m->target.len > ORCH_PATH_MAX)
			return -EINVAL;
		orch_wr_str16(b, m->target.s, m->target.len);
		break;
	case 'D':
		if (m->data.len > ORCH_IO_MAX)
			return -EINVAL;
		orch_wr_str32(b, m->data.s, m->data.len);
		break;
	case 'J':
		if (m->json.len > ORCH_JSON_MAX)
			return -EINVAL;
		orch_wr_str32(b, m->json.s, m->json.len);
		break;
	case 'a': attr_encode(b, &m->attr); break;
	case 'e':
		orch_wr_u64(b, m->entry.handle);
		orch_wr_u8(b, m->entry.has_attr);
		if (m->entry.has_attr)
			attr_encode(b, &m->entry.attr);
		break;
	case 'E':
		if (m->ndirents > ORCH_READDIR_MAX)
			return -EINVAL;
		orch_wr_u16(b, (uint16_t)m->ndirents);
		for (uint32_t i = 0; i < m->ndirents; i++) {
			const struct orch_dirent *d = &m->dirents[i];

			if (d->namelen < 1)
				return -EINVAL;
			orch_wr_u64(b, d->handle);
			orch_wr_u64(b, d->cookie);
			orch_wr_u32(b, d->type);
			orch_wr_str8(b, d->name, d->namelen);
			orch_wr_u8(b, d->has_attr);
			if (d->has_attr)
				attr_encode(b, &d->attr);
		}
		break;
	case 'b': orch_wr_u8(b, m->eof); break;
	case 'S':
		orch_wr_u32(b, m->statfs.bsize);
		orch_wr_u64(b, m->statfs.blocks);
		orch_wr_u64(b, m->statfs.bfree);
		orch_wr_u64(b, m->statfs.bavail);
		orch_wr_u64(b, m->statfs.files);
		orch_wr_u64(b, m->statfs.ffree);
		orch_wr_u32(b, m->statfs.namemax);
		orch_wr_u64(b, m->statfs.host_fs);
		orch_wr_u64(b, m->statfs.host_bavail);
		break;
	case 'V':
		orch_wr_u8(b, m->vmin);
		orch_wr_u8(b, m->vmax);
		orch_wr_u64(b, m->features);
		break;
	case 'K':
		orch_wr_u64(b, m->fsmap_key.start);
		orch_wr_u64(b, (uint64_t)m->fsmap_key.owner);
		orch_wr_u64(b, m->fsmap_key.fileoff);
		break;
	case 'Z': orch_wr_bytes(b, m->nonce, ORCH_NONCE_LEN); break;
	case 'M': orch_wr_bytes(b, m->mac, ORCH_MAC_LEN); break;
	default:
		return -EINVAL;
	}
	return 0;
}

/* @head: the last field, data, is left out but for its length (orch_msg_encode_head). */
static int msg_encode(struct orch_buf *b, const struct orch_msg *m, bool head)
{
	const struct msg_desc *d = msg_find(m->type);
	bool reply = m->flags & ORCH_FRAME_REPLY;
	struct orch_frame_hdr h;
	size_t start = b->b_len, tail = 0;
	int error;

	if (!d)
		return -EINVAL;
	if (head) {
		if (!orch_msg_has_data_last(m->type, reply) || (reply && m->status))
			return -EINVAL;
		if (m->data.len > ORCH_IO_MAX)
			return -EINVAL;
		tail = m->data.len;
	}
	error = orch_buf_reserve(b, ORCH_FRAME_HDR);
	if (error)
		return error;
	b->b_len += ORCH_FRAME_HDR;
	if (reply)
		orch_wr_u32(b, orch_errno_to_status(m->status));
	if (reply && m->status == -ORCH_ENOTLEADER)
		orch_wr_u32(b, m->leader);
	if (!reply && (m->flags & ORCH_FRAME_SEQ)) {
		orch_wr_u64(b, m->client);
		orch_wr_u64(b, m->seq);
		orch_wr_u64(b, m->done_below);
	}
	if (!reply || m->status == 0) {
		const char *f = reply ? d->rep : d->req;
		char code;

		while ((code = orch_msg_field_next(&f, NULL))) {
			if (head && *f == '\0') {
				orch_wr_u32(b, (uint32_t)tail);   /* the bytes follow */
				break;
			}
			error = field_encode(b, code, m);
			if (error)
				goto out_truncate;
		}
	}
	if (b->b_err) {
		error = b->b_err;
		goto out_truncate;
	}
	if (b->b_len - start - ORCH_FRAME_HDR + tail > ORCH_MAXFRAME) {
		error = -EMSGSIZE;
		goto out_truncate;
	}
	h = (struct orch_frame_hdr){
		.length = (uint32_t)(b->b_len - start - ORCH_FRAME_HDR + tail),
		.type = m->type,
		.version = ORCH_PROTO_VERSION,
		.flags = m->flags,
		.reqid = m->reqid,
	};
	orch_frame_hdr_encode(b->b_data + start, &h);
	return 0;
out_truncate:
	if (!b->b_err)
		b->b_len = start;
	return error;
}

int orch_msg_encode(struct orch_buf *b, const struct orch_msg *m)
{
	return msg_encode(b, m, false);
}

int orch_msg_encode_head(struct orch_buf *b, const struct orch_msg *m)
{
	return msg_encode(b, m, true);
}

/* --- Decode ------------------------------------------------------------------------ */

static void dirents_decode(struct orch_rd *rd, struct orch_msg *m)
{
	/* Smallest encoded entry: 8+8+4+1+1 name byte+1. */
	const size_t min_entry = 23;
	uint32_t n = orch_rd_u16(rd);

	if (rd->err)
		return;
	if (n > ORCH_READDIR_MAX || (size_t)n * min_entry > orch_rd_left(rd)) {
		rd->err = -EPROTO;
		return;
	}
	if (n == 0)
		return;
	m->dirents = calloc(n, sizeof(*m->dirents));
	if (!m->dirents) {
		rd->err = -ENOMEM;
		return;
	}
	m->ndirents = n;
	for (uint32_t i = 0; i < n && !rd->err; i++) {
		struct orch_dirent *de = &m->dirents[i];
		struct orch_str s;

		de->handle = orch_rd_u64(rd);
		de->cookie = orch_rd_u64(rd);
		de->type = orch_rd_u32(rd);
		orch_rd_str8(rd, &s, ORCH_NAME_MAX);
		if (!rd->err && !name_ok(&s))
			rd->err = -EPROTO;
		if (!rd->err) {
			memcpy(de->name, s.s, s.len);
			de->namelen = (uint8_t)s.len;
		}
		de->has_attr = orch_rd_u8(rd) != 0;
		if (de->has_attr)
			attr_decode(rd, &de->attr);
	}
}

static void field_decode(struct orch_rd *rd, char code, struct orch_msg *m)
{
	switch (code) {
	case 'c':
		m->cred.uid = orch_rd_u32(rd);
		m->cred.gid = orch_rd_u32(rd);
		m->cred.ngroups = orch_rd_u16(rd);
		if (m->cred.ngroups > ORCH_GROUPS_MAX) {
			m->cred.ngroups = 0;
			rd->err = -EPROTO;
			break;
		}
		for (uint32_t i = 0; i < m->cred.ngroups; i++)
			m->cred.groups[i] = orch_rd_u32(rd);
		break;
	case 'h': m->handle = orch_rd_u64(rd); break;
	case 'H': m->handle2 = orch_rd_u64(rd); break;
	case 'Q': m->offset2 = orch_rd_u64(rd); break;
	case 'L':
	case 'Y': {
		struct orch_layout *l = code == 'L' ? &m->layout : &m->layout2;

		l->strip_size = orch_rd_u32(rd);
		l->stripe_count = orch_rd_u16(rd);
		l->first_server = orch_rd_u16(rd);
		break;
	}
	case 'p': m->parent = orch_rd_u64(rd); break;
	case 'P': m->newparent = orch_rd_u64(rd); break;
	case 'o': m->offset = orch_rd_u64(rd); break;
	case 's': m->size = orch_rd_u64(rd); break;
	case 'r': m->rdev = orch_rd_u64(rd); break;
	case 'k': m->cookie = orch_rd_u64(rd); break;
	case 'i': m->id = orch_rd_u64(rd); break;
	case 'T': m->time_ns = (int64_t)orch_rd_u64(rd); break;
	case 'm': m->mode = orch_rd_u32(rd); break;
	case 'f': m->flags32 = orch_rd_u32(rd); break;
	case 'l': m->length = orch_rd_u32(rd); break;
	case 'O': m->origin = orch_rd_u32(rd); break;
	case 'd': m->delta = (int32_t)orch_rd_u32(rd); break;
	case 'n':
	case 'N':
	case 'x': {
		struct orch_str *s = code == 'n' ? &m->name : code == 'N' ? &m->name2 : &m->xname;

		orch_rd_str8(rd, s, ORCH_NAME_MAX);
		if (!rd->err && !name_ok(s))
			rd->err = -EPROTO;
		break;
	}
	case 't': orch_rd_str16(rd, &m->target, ORCH_PATH_MAX); break;
	case 'D': orch_rd_str32(rd, &m->data, ORCH_IO_MAX); break;
	case 'J': orch_rd_str32(rd, &m->json, ORCH_JSON_MAX); break;
	case 'a': attr_decode(rd, &m->attr); break;
	case 'e':
		m->entry.handle = orch_rd_u64(rd);
		m->entry.has_attr = orch_rd_u8(rd) != 0;
		if (m->entry.has_attr)
			attr_decode(rd, &m->entry.attr);
		break;
	case 'E': dirents_decode(rd, m); break;
	case 'b': m->eof = orch_rd_u8(rd) != 0; break;
	case 'S':
		m->statfs.bsize = orch_rd_u32(rd);
		m->statfs.blocks = orch_rd_u64(rd);
		m->statfs.bfree = orch_rd_u64(rd);
		m->statfs.bavail = orch_rd_u64(rd);
		m->statfs.files = orch_rd_u64(rd);
		m->statfs.ffree = orch_rd_u64(rd);
		m->statfs.namemax = orch_rd_u32(rd);
		m->statfs.host_fs = orch_rd_u64(rd);
		m->statfs.host_bavail = orch_rd_u64(rd);
		break;
	case 'V':
		m->vmin = orch_rd_u8(rd);
		m->vmax = orch_rd_u8(rd);
		m->features = orch_rd_u64(rd);
		break;
	case 'K':
		m->fsmap_key.start = orch_rd_u64(rd);
		m->fsmap_key.owner = (int64_t)orch_rd_u64(rd);
		m->fsmap_key.fileoff = orch_rd_u64(rd);
		break;
	case 'Z': orch_rd_bytes(rd, m->nonce, ORCH_NONCE_LEN); break;
	case 'M': orch_rd_bytes(rd, m->mac, ORCH_MAC_LEN); break;
	default: rd->err = -EPROTO; break;
	}
}

int orch_msg_decode(const struct orch_frame_hdr *h, const uint8_t *payload,
		    struct orch_msg *m)
{
	const struct msg_desc *d = msg_find(h->type);
	bool reply = h->flags & ORCH_FRAME_REPLY;
	struct orch_rd rd;
	int error;

	memset(m, 0, sizeof(*m));
	m->type = h->type;
	m->flags = h->flags;
	m->version = h->version;
	m->reqid = h->reqid;
	if (!d)
		return -ENOSYS;
	if (h->length > ORCH_MAXFRAME)
		return -EPROTO;
	orch_rd_init(&rd, payload, h->length);
	if (reply)
		m->status = orch_status_to_errno(orch_rd_u32(&rd));
	if (reply && m->status == -ORCH_ENOTLEADER)
		m->leader = orch_rd_u32(&rd);
	if (!reply && (m->flags & ORCH_FRAME_SEQ)) {
		m->client = orch_rd_u64(&rd);
		m->seq = orch_rd_u64(&rd);
		m->done_below = orch_rd_u64(&rd);
		/* Numbers start at 1; nothing is done above the request itself. */
		if (!m->client || !m->seq || m->done_below > m->seq)
			rd.err = -EPROTO;
	}
	if (!reply || m->status == 0) {
		const char *f = reply ? d->rep : d->req;
		char code;

		while (!rd.err && (code = orch_msg_field_next(&f, NULL)))
			field_decode(&rd, code, m);
	}
	error = orch_rd_done(&rd, h->version);
	if (error) {
		orch_msg_fini(m);
		return error;
	}
	return 0;
}

static bool handle_in_cluster(uint64_t h, unsigned int nservers, uint64_t *bad)
{
	if (orch_handle_server(h) < nservers)
		return true;
	*bad = h;
	return false;
}

int orch_msg_check_handles(const struct orch_msg *m, unsigned int nservers, uint64_t *bad)
{
	const char *f = orch_msg_fields(m->type, false);
	char code;

	if (!f || (m->flags & ORCH_FRAME_REPLY))
		return 0;
	/* From the table, so a new message's handles are checked without a line here. */
	while ((code = orch_msg_field_next(&f, NULL))) {
		uint64_t h;

		switch (code) {
		case 'h':
		case 'p':
		case 'P':
		case 'H': h = orch_msg_handle(m, code); break;
		/*
		 * A SETATTR's attributes are new values whose handle and parent
		 * the server ignores; a MKDIR_INODE's parent becomes the new
		 * directory's "..".
		 */
		case 'a': h = m->type == ORCH_SV2SV_MKDIR_INODE ? m->attr.parent : 0; break;
		default: continue;
		}
		if (!handle_in_cluster(h, nservers, bad))
			return -EINVAL;
	}
	/* The one message whose handles travel in its data (SPEC-wire, "Batched data deletes"). */
	if (m->type == ORCH_SV2SV_DATA_DELETE_MANY) {
		const uint8_t *p = (const uint8_t *)m->data.s;

		for (uint32_t off = 0; off + 8 <= m->data.len; off += 8)
			if (!handle_in_cluster(orch_get_u64(p + off), nservers, bad))
				return -EINVAL;
	}
	return 0;
}

/* --- Flag words ----------------------------------------------------------------------- */

#define FLAGS_REFUSE true
#define FLAGS_IGNORE false

static const struct flag_word {
	const char *field;
	uint32_t known;
	bool refuse;
} flag_words[] = {
#define ORCH_FLAGS(set, field, unknown) { #field, ORCH_##set##_KNOWN_, FLAGS_##unknown },
#define ORCH_FLAG(set, bit, value, doc)
#include "proto/flags.def"
#undef ORCH_FLAG
#undef ORCH_FLAGS
};

static const struct flag_word *flag_word_find(const struct orch_str *field)
{
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(flag_words); i++)
		if (strlen(flag_words[i].field) == field->len &&
		    memcmp(flag_words[i].field, field->s, field->len) == 0)
			return &flag_words[i];
	return NULL;
}

int orch_msg_check_flags(const struct orch_msg *m)
{
	const char *f = orch_msg_fields(m->type, false);
	struct orch_str name;
	char code;

	if (!f || (m->flags & ORCH_FRAME_REPLY))
		return 0;
	while ((code = orch_msg_field_next(&f, &name))) {
		const struct flag_word *w = code == 'f' ? flag_word_find(&name) : NULL;

		if (w && w->refuse && (m->flags32 & ~w->known))
			return -EINVAL;
	}
	return 0;
}

void orch_msg_fini(struct orch_msg *m)
{
	free(m->dirents);
	m->dirents = NULL;
	m->ndirents = 0;
}

int orch_str_copy(const struct orch_str *s, char *out, size_t outlen)
{
	if (s->len >= outlen)
		return -ENAMETOOLONG;
	if (s->len)
		memcpy(out, s->s, s->len);
	out[s->len] = '\0';
	return 0;
}
