/*
 * Writes the seed corpus of fuzz_msg_decode: for every message type, a
 * request and a reply with every listed field filled in, and an error reply,
 * in the target's input format (type index, 0, flags, payload).
 *
 *   gen-msg-corpus DIR
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/msg.h"

static void fill(struct orch_msg *m, struct orch_dirent *d)
{
	static const char data[] = "0123456789abcdef";

	m->cred.uid = 1000;
	m->cred.gid = 100;
	m->cred.ngroups = 2;
	m->cred.groups[0] = 10;
	m->cred.groups[1] = 20;
	m->handle = 0x0001000000000042ULL;
	m->handle2 = 0x0002000000000043ULL;
	m->offset2 = 131072;
	m->layout = (struct orch_layout){ 65536, 3, 1 };
	m->layout2 = (struct orch_layout){ 65536, 3, 2 };
	m->parent = 1;
	m->newparent = 0x0002000000000007ULL;
	m->offset = 65536;
	m->size = 123456;
	m->rdev = 0x0801;
	m->cookie = 3;
	m->id = 9;
	m->time_ns = 1700000000123456789LL;
	m->mode = 0100644;
	m->flags32 = m->type == ORCH_CL2SV_SETATTR ? 0x3f : 1; /* SETATTR's is valid */
	m->length = 4096;
	m->origin = 1;
	m->delta = 1;
	m->name = orch_str_of("name", 4);
	m->name2 = orch_str_of("other", 5);
	m->target = orch_str_of("/some/target", 12);
	m->xname = orch_str_of("user.k", 6);
	m->data = orch_str_of(data, 16);
	m->json = orch_str_of("{\"a\": 1}", 8);
	m->attr.handle = m->handle;
	m->attr.mode = 0100644;
	m->attr.size = 5;
	m->attr.nlink = 1;
	m->attr.layout = (struct orch_layout){ 65536, 3, 1 };
	m->entry.handle = m->handle;
	m->entry.has_attr = true;
	m->entry.attr = m->attr;
	memset(d, 0, 2 * sizeof(*d));
	d[0].handle = 5;
	d[0].cookie = 1;
	d[0].type = 0100000;
	d[0].namelen = 1;
	d[0].name[0] = 'a';
	d[1] = d[0];
	d[1].has_attr = true;
	d[1].attr = m->attr;
	m->dirents = d;
	m->ndirents = 2;
	m->eof = true;
	m->statfs = (struct orch_statfs){ 4096, 100, 50, 40, 1000, 900, 255, 7, 30 };
	m->vmin = m->vmax = 1;
	m->fsmap_key = (struct orch_fsmap_key){ 3, 9, 131072 }; /* the seeds of before */
	memset(m->nonce, 0xab, sizeof(m->nonce));
	memset(m->mac, 0xcd, sizeof(m->mac));
}

static int write_seed(const char *dir, const char *tag, size_t idx, uint8_t flags,
		      const struct orch_msg *m)
{
	char path[4096];
	struct orch_buf b;
	uint8_t head[3] = { (uint8_t)idx, 0, flags };
	FILE *f;

	orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	if (orch_msg_encode(&b, m)) {
		orch_buf_fini(&b);
		return -1;
	}
	snprintf(path, sizeof(path), "%s/%s-%04x-%s", dir, orch_msg_name(m->type), m->type, tag);
	f = fopen(path, "wb");
	if (!f) {
		orch_buf_fini(&b);
		return -1;
	}
	fwrite(head, 1, 3, f);
	fwrite(b.b_data + ORCH_FRAME_HDR, 1, b.b_len - ORCH_FRAME_HDR, f);
	fclose(f);
	orch_buf_fini(&b);
	return 0;
}

int main(int argc, char **argv)
{
	uint16_t types[128];
	size_t n = orch_msg_types(types, 128);
	struct orch_dirent d[2];
	struct orch_msg m;

	if (argc != 2) {
		fprintf(stderr, "usage: gen-msg-corpus DIR\n");
		return 2;
	}
	mkdir(argv[1], 0755);
	for (size_t i = 0; i < n; i++) {
		orch_msg_init(&m, types[i]);
		fill(&m, d);
		if (write_seed(argv[1], "req", i, 0, &m))
			return 1;
		m.flags = ORCH_FRAME_REPLY;
		if (write_seed(argv[1], "rep", i, ORCH_FRAME_REPLY, &m))
			return 1;
		m.status = -ENOENT;
		if (write_seed(argv[1], "err", i, ORCH_FRAME_REPLY, &m))
			return 1;
	}
	return 0;
}
