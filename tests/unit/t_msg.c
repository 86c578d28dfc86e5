/*
 * The message codec: every message of msg.def round-trips, request and
 * reply, with every listed field set to a distinct value; golden bytes pin
 * the wire format; truncated, oversized and trailing input is refused the
 * way wire.h promises, and oversized counts are refused before anything is
 * allocated.
 */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "proto/msg.h"
#include "unit/test.h"

#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif

/* --- Allocation counting --------------------------------------------------------- */

/*
 * To prove that a limit is checked before allocating, count the allocations
 * made while a decode runs.  Under ASan or TSan their allocator hooks do it
 * (an interposed malloc would hand glibc's blocks to the sanitizer's free);
 * otherwise malloc and calloc are interposed and forwarded to glibc.  gcc
 * names the sanitizer with a macro, clang 14 only through __has_feature.
 */
static volatile int alloc_watch;
static volatile unsigned long alloc_count;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define T_SANITIZER_ALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define T_SANITIZER_ALLOC 1
#endif
#endif

#ifdef T_SANITIZER_ALLOC
int __sanitizer_install_malloc_and_free_hooks(void (*m)(const volatile void *, size_t),
					      void (*f)(const volatile void *));

static void count_malloc(const volatile void *p, size_t n)
{
	(void)p;
	(void)n;
	if (alloc_watch)
		alloc_count++;
}

static void count_free(const volatile void *p)
{
	(void)p;
}

__attribute__((constructor)) static void alloc_hooks_install(void)
{
	__sanitizer_install_malloc_and_free_hooks(count_malloc, count_free);
}
#else
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);

void *malloc(size_t n)
{
	if (alloc_watch)
		alloc_count++;
	return __libc_malloc(n);
}

void *calloc(size_t n, size_t size)
{
	if (alloc_watch)
		alloc_count++;
	return __libc_calloc(n, size);
}
#endif

/*
 * False where the counting cannot work (under valgrind, whose allocator
 * replaces both): the "no allocation" checks then pass trivially, so the
 * one check that an allocation is seen is skipped too.
 */
static bool alloc_counting_works(void)
{
	void *p;

#if __has_include(<valgrind/valgrind.h>)
	if (RUNNING_ON_VALGRIND)
		return false;
#endif
	alloc_count = 0;
	alloc_watch = 1;
	p = malloc(16);
	/* Used, so that the compiler (clang) does not drop the pair. */
	__asm__ volatile("" : : "r"(p) : "memory");
	alloc_watch = 0;
	free(p);
	return alloc_count > 0;
}

/* Decodes with allocation counting; *@allocs gets how many were made. */
static int decode_counted(const struct orch_frame_hdr *h, const uint8_t *p,
			  struct orch_msg *m, unsigned long *allocs)
{
	int rc;

	alloc_count = 0;
	alloc_watch = 1;
	rc = orch_msg_decode(h, p, m);
	alloc_watch = 0;
	*allocs = alloc_count;
	return rc;
}

/* --- Filling and comparing messages ------------------------------------------------------ */

/* splitmix64: distinct-looking values in every byte of every field. */
static uint64_t mix(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Backing store for the strings and arrays a filled message borrows. */
struct store {
	char name[ORCH_NAME_MAX];
	char name2[ORCH_NAME_MAX];
	char xname[ORCH_NAME_MAX];
	char target[ORCH_PATH_MAX];
	char data[5000];
	char json[3000];
	struct orch_dirent ents[4];
};

static void fill_bytes(char *p, size_t n, uint64_t *st)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)(mix(st) | 1); /* never NUL, so names are C-safe too */
}

static void fill_attr(struct orch_attr *a, uint64_t *st)
{
	a->handle = mix(st);
	a->mode = (uint32_t)mix(st);
	a->uid = (uint32_t)mix(st);
	a->gid = (uint32_t)mix(st);
	a->nlink = (uint32_t)mix(st);
	a->size = mix(st);
	a->rdev = mix(st);
	a->atime_ns = (int64_t)mix(st);
	a->mtime_ns = (int64_t)mix(st);
	a->ctime_ns = (int64_t)mix(st);
	a->parent = mix(st);
	a->layout.strip_size = (uint32_t)mix(st);
	a->layout.stripe_count = (uint16_t)mix(st);
	a->layout.first_server = (uint16_t)mix(st);
}

/*
 * Sets every field @fields lists.  @variant changes the shapes: lengths at
 * their limits or minimal, optional attributes present or absent.
 */
static void fill(struct orch_msg *m, const char *fields, int variant, struct store *s,
		 uint64_t seed)
{
	uint64_t st = seed;
	bool big = variant & 1;
	const char *f = fields;
	char code;

	while ((code = orch_msg_field_next(&f, NULL))) {
		switch (code) {
		case 'c':
			m->cred.uid = (uint32_t)mix(&st);
			m->cred.gid = (uint32_t)mix(&st);
			m->cred.ngroups = big ? ORCH_GROUPS_MAX : 3;
			for (uint32_t i = 0; i < m->cred.ngroups; i++)
				m->cred.groups[i] = (uint32_t)mix(&st);
			break;
		case 'h': m->handle = mix(&st); break;
		case 'H': m->handle2 = mix(&st); break;
		case 'Q': m->offset2 = mix(&st); break;
		case 'L':
		case 'Y': {
			struct orch_layout *l = code == 'L' ? &m->layout : &m->layout2;

			l->strip_size = (uint32_t)mix(&st);
			l->stripe_count = (uint16_t)mix(&st);
			l->first_server = (uint16_t)mix(&st);
			break;
		}
		case 'p': m->parent = mix(&st); break;
		case 'P': m->newparent = mix(&st); break;
		case 'o': m->offset = mix(&st); break;
		case 's': m->size = mix(&st); break;
		case 'r': m->rdev = mix(&st); break;
		case 'k': m->cookie = mix(&st); break;
		case 'i': m->id = mix(&st); break;
		case 'T': m->time_ns = (int64_t)mix(&st); break;
		case 'm': m->mode = (uint32_t)mix(&st); break;
		case 'f': m->flags32 = (uint32_t)mix(&st); break;
		case 'l': m->length = (uint32_t)mix(&st); break;
		case 'O': m->origin = (uint32_t)mix(&st); break;
		case 'd': m->delta = (int32_t)mix(&st); break;
		case 'n':
			fill_bytes(s->name, ORCH_NAME_MAX, &st);
			m->name = orch_str_of(s->name, big ? ORCH_NAME_MAX : 1);
			break;
		case 'N':
			fill_bytes(s->name2, ORCH_NAME_MAX, &st);
			m->name2 = orch_str_of(s->name2, big ? ORCH_NAME_MAX : 7);
			break;
		case 'x':
			fill_bytes(s->xname, ORCH_NAME_MAX, &st);
			m->xname = orch_str_of(s->xname, big ? ORCH_NAME_MAX : 12);
			break;
		case 't':
			fill_bytes(s->target, ORCH_PATH_MAX, &st);
			m->target = orch_str_of(s->target, big ? ORCH_PATH_MAX : 0);
			break;
		case 'D':
			fill_bytes(s->data, sizeof(s->data), &st);
			m->data = orch_str_of(s->data, big ? sizeof(s->data) : 0);
			break;
		case 'J':
			fill_bytes(s->json, sizeof(s->json), &st);
			m->json = orch_str_of(s->json, big ? sizeof(s->json) : 2);
			break;
		case 'a': fill_attr(&m->attr, &st); break;
		case 'e':
			m->entry.handle = mix(&st);
			m->entry.has_attr = big;
			if (big)
				fill_attr(&m->entry.attr, &st);
			break;
		case 'E':
			m->ndirents = big ? 4 : 0;
			m->dirents = big ? s->ents : NULL;
			for (uint32_t i = 0; i < 4; i++) {
				struct orch_dirent *d = &s->ents[i];

				memset(d, 0, sizeof(*d));
				d->handle = mix(&st);
				d->cookie = mix(&st);
				d->type = (uint32_t)mix(&st);
				d->namelen = (uint8_t)(i == 3 ? ORCH_NAME_MAX : 1 + i * 5);
				fill_bytes(d->name, d->namelen, &st);
				d->has_attr = i % 2 == 1;
				if (d->has_attr)
					fill_attr(&d->attr, &st);
			}
			break;
		case 'b': m->eof = true; break;
		case 'S':
			m->statfs.bsize = (uint32_t)mix(&st);
			m->statfs.blocks = mix(&st);
			m->statfs.bfree = mix(&st);
			m->statfs.bavail = mix(&st);
			m->statfs.files = mix(&st);
			m->statfs.ffree = mix(&st);
			m->statfs.namemax = (uint32_t)mix(&st);
			m->statfs.host_fs = mix(&st);
			m->statfs.host_bavail = mix(&st);
			break;
		case 'V':
			m->vmin = (uint8_t)mix(&st);
			m->vmax = (uint8_t)mix(&st);
			m->features = mix(&st);
			break;
		case 'Z':
			fill_bytes((char *)m->nonce, ORCH_NONCE_LEN, &st);
			break;
		case 'M':
			fill_bytes((char *)m->mac, ORCH_MAC_LEN, &st);
			break;
		case 'K':
			m->fsmap_key.start = mix(&st);
			m->fsmap_key.owner = (int64_t)mix(&st);
			m->fsmap_key.fileoff = mix(&st);
			break;
		default:
			fprintf(stderr, "test does not know field code '%c'\n", code);
			abort();
		}
	}
}

static bool str_eq(const struct orch_str *a, const struct orch_str *b)
{
	return a->len == b->len && (a->len == 0 || memcmp(a->s, b->s, a->len) == 0);
}

static bool attr_eq(const struct orch_attr *a, const struct orch_attr *b)
{
	return a->handle == b->handle && a->mode == b->mode && a->uid == b->uid &&
	       a->gid == b->gid && a->nlink == b->nlink && a->size == b->size &&
	       a->rdev == b->rdev && a->atime_ns == b->atime_ns &&
	       a->mtime_ns == b->mtime_ns && a->ctime_ns == b->ctime_ns &&
	       a->parent == b->parent && a->layout.strip_size == b->layout.strip_size &&
	       a->layout.stripe_count == b->layout.stripe_count &&
	       a->layout.first_server == b->layout.first_server;
}

static bool dirent_eq(const struct orch_dirent *a, const struct orch_dirent *b)
{
	return a->handle == b->handle && a->cookie == b->cookie && a->type == b->type &&
	       a->namelen == b->namelen && memcmp(a->name, b->name, a->namelen) == 0 &&
	       a->has_attr == b->has_attr && (!a->has_attr || attr_eq(&a->attr, &b->attr));
}

/* Compares field @code of @a and @b; prints which one differs. */
static bool field_eq(char code, const struct orch_msg *a, const struct orch_msg *b)
{
	bool eq;

	switch (code) {
	case 'c':
		eq = a->cred.uid == b->cred.uid && a->cred.gid == b->cred.gid &&
		     a->cred.ngroups == b->cred.ngroups &&
		     memcmp(a->cred.groups, b->cred.groups,
			    a->cred.ngroups * sizeof(a->cred.groups[0])) == 0;
		break;
	case 'h': eq = a->handle == b->handle; break;
	case 'p': eq = a->parent == b->parent; break;
	case 'P': eq = a->newparent == b->newparent; break;
	case 'o': eq = a->offset == b->offset; break;
	case 'H': eq = a->handle2 == b->handle2; break;
	case 'Q': eq = a->offset2 == b->offset2; break;
	case 'L': eq = memcmp(&a->layout, &b->layout, sizeof(a->layout)) == 0; break;
	case 'Y': eq = memcmp(&a->layout2, &b->layout2, sizeof(a->layout2)) == 0; break;
	case 's': eq = a->size == b->size; break;
	case 'r': eq = a->rdev == b->rdev; break;
	case 'k': eq = a->cookie == b->cookie; break;
	case 'i': eq = a->id == b->id; break;
	case 'T': eq = a->time_ns == b->time_ns; break;
	case 'm': eq = a->mode == b->mode; break;
	case 'f': eq = a->flags32 == b->flags32; break;
	case 'l': eq = a->length == b->length; break;
	case 'O': eq = a->origin == b->origin; break;
	case 'd': eq = a->delta == b->delta; break;
	case 'n': eq = str_eq(&a->name, &b->name); break;
	case 'N': eq = str_eq(&a->name2, &b->name2); break;
	case 'x': eq = str_eq(&a->xname, &b->xname); break;
	case 't': eq = str_eq(&a->target, &b->target); break;
	case 'D': eq = str_eq(&a->data, &b->data); break;
	case 'J': eq = str_eq(&a->json, &b->json); break;
	case 'a': eq = attr_eq(&a->attr, &b->attr); break;
	case 'e':
		eq = a->entry.handle == b->entry.handle &&
		     a->entry.has_attr == b->entry.has_attr &&
		     (!a->entry.has_attr || attr_eq(&a->entry.attr, &b->entry.attr));
		break;
	case 'E':
		eq = a->ndirents == b->ndirents;
		for (uint32_t i = 0; eq && i < a->ndirents; i++)
			eq = dirent_eq(&a->dirents[i], &b->dirents[i]);
		break;
	case 'b': eq = a->eof == b->eof; break;
	case 'S': eq = memcmp(&a->statfs, &b->statfs, sizeof(a->statfs)) == 0; break;
	case 'V':
		eq = a->vmin == b->vmin && a->vmax == b->vmax && a->features == b->features;
		break;
	case 'Z': eq = memcmp(a->nonce, b->nonce, ORCH_NONCE_LEN) == 0; break;
	case 'M': eq = memcmp(a->mac, b->mac, ORCH_MAC_LEN) == 0; break;
	case 'K':
		eq = a->fsmap_key.start == b->fsmap_key.start &&
		     a->fsmap_key.owner == b->fsmap_key.owner &&
		     a->fsmap_key.fileoff == b->fsmap_key.fileoff;
		break;
	default: eq = false; break;
	}
	if (!eq)
		fprintf(stderr, "field '%c' of %s differs\n", code, orch_msg_name(a->type));
	return eq;
}

/* --- Helpers ------------------------------------------------------------------------- */

/* Encodes @m; the payload is copied to an exact-size heap block (ASan sees overreads). */
static int encode(const struct orch_msg *m, struct orch_frame_hdr *h, uint8_t **payload)
{
	struct orch_buf b;
	int rc;

	*payload = NULL;
	orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	rc = orch_msg_encode(&b, m);
	if (rc == 0) {
		orch_frame_hdr_decode(b.b_data, h);
		if (h->length + ORCH_FRAME_HDR != b.b_len) {
			rc = -EBADMSG;
		} else {
			*payload = malloc(h->length ? h->length : 1);
			if (h->length)
				memcpy(*payload, b.b_data + ORCH_FRAME_HDR, h->length);
		}
	}
	orch_buf_fini(&b);
	return rc;
}

/* Decodes the first @len bytes of @p as a frame like @h, from an exact-size copy. */
static int decode_prefix(const struct orch_frame_hdr *h, const uint8_t *p, uint32_t len,
			 struct orch_msg *m)
{
	struct orch_frame_hdr hh = *h;
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	hh.length = len;
	if (len)
		memcpy(copy, p, len);
	rc = orch_msg_decode(&hh, copy, m);
	orch_msg_fini(m);
	free(copy);
	return rc;
}

static size_t all_types(uint16_t *types)
{
	return orch_msg_types(types, 256);
}

/* --- Round trips ------------------------------------------------------------------------ */

static uint16_t types_buf[256];

/* Every type, both directions, two shapes: encode, decode, compare each field. */
ORCH_TEST(roundtrip_every_message)
{
	size_t n = all_types(types_buf);
	int checked = 0;

	ORCH_CHECK(n >= 20);
	for (size_t t = 0; t < n; t++) {
		for (int reply = 0; reply <= 1; reply++) {
			for (int variant = 0; variant < 2; variant++) {
				const char *fields = orch_msg_fields(types_buf[t], reply);
				struct store *s = calloc(1, sizeof(*s));
				struct orch_msg in, out;
				struct orch_frame_hdr h;
				uint8_t *payload;
				char code;

				ORCH_CHECK(s && fields);
				orch_msg_init(&in, types_buf[t]);
				in.flags = reply ? ORCH_FRAME_REPLY : 0;
				in.reqid = 0x1122334455667788ull + t;
				fill(&in, fields, variant, s, t * 4 + (uint64_t)reply * 2 + (uint64_t)variant);
				ORCH_CHECK_OK(encode(&in, &h, &payload));
				ORCH_CHECK(h.type == in.type && h.reqid == in.reqid &&
					   h.flags == in.flags && h.version == ORCH_PROTO_VERSION);
				ORCH_CHECK_OK(orch_msg_decode(&h, payload, &out));
				ORCH_CHECK(out.type == in.type && out.reqid == in.reqid);
				ORCH_CHECK(out.status == 0);
				for (const char *f = fields; (code = orch_msg_field_next(&f, NULL));)
					ORCH_CHECK(field_eq(code, &in, &out));
				orch_msg_fini(&out);
				free(payload);
				free(s);
				checked++;
			}
		}
	}
	ORCH_CHECK(checked == (int)n * 4);
}

/* True if @list is "code:name" words one space apart, names lower case and each used once. */
static bool field_list_ok(const char *list)
{
	struct orch_str names[64], name;
	size_t n = 0;
	const char *p = list, *f = list;

	while (*p) {
		const char *start;

		if (!isalpha((unsigned char)p[0]) || p[1] != ':')
			return false;
		start = p += 2;
		while (islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_')
			p++;
		if (p == start || !islower((unsigned char)*start) || (*p && *p != ' ') ||
		    (*p == ' ' && !p[1]))
			return false;
		if (*p)
			p++;
	}
	while (orch_msg_field_next(&f, &name)) {
		for (size_t i = 0; i < n; i++)
			if (str_eq(&names[i], &name))
				return false;
		if (n == 64)
			return false;
		names[n++] = name;
	}
	return true;
}

/* msg.def names every field of every message, request and reply. */
ORCH_TEST(field_lists_named)
{
	size_t n = all_types(types_buf);
	const char *f = "c:cred p:parent n:name";
	struct orch_str name;

	ORCH_CHECK(orch_msg_field_next(&f, &name) == 'c' && name.len == 4 &&
		   memcmp(name.s, "cred", 4) == 0);
	ORCH_CHECK(orch_msg_field_next(&f, &name) == 'p' && name.len == 6);
	ORCH_CHECK(orch_msg_field_next(&f, &name) == 'n' && name.len == 4 && *f == '\0');
	ORCH_CHECK(orch_msg_field_next(&f, &name) == 0);
	ORCH_CHECK(!field_list_ok("cpn") && !field_list_ok("c:cred  p:parent") &&
		   !field_list_ok("c:cred ") && !field_list_ok("c:Cred") &&
		   !field_list_ok("c:cred c:cred") && field_list_ok(""));
	for (size_t t = 0; t < n; t++) {
		for (int reply = 0; reply <= 1; reply++) {
			const char *list = orch_msg_fields(types_buf[t], reply);

			if (!field_list_ok(list))
				fprintf(stderr, "%s %s: bad field list \"%s\"\n",
					orch_msg_name(types_buf[t]), reply ? "reply" : "request", list);
			ORCH_CHECK(field_list_ok(list));
		}
	}
	ORCH_CHECK(orch_msg_has_data_last(ORCH_CL2SV_WRITE, false));
	ORCH_CHECK(orch_msg_has_data_last(ORCH_CL2SV_READ, true));
	ORCH_CHECK(!orch_msg_has_data_last(ORCH_CL2SV_READ, false));
	ORCH_CHECK(!orch_msg_has_data_last(ORCH_SV2CL_REVOKE, false));
	ORCH_CHECK(!orch_msg_has_data_last(0x7777, false));
}

/* A reply with a non-OK status carries only the status, for every type. */
ORCH_TEST(roundtrip_error_replies)
{
	static const int errs[] = { -ENOENT, -EACCES, -EEXIST, -ENOTEMPTY, -EUCLEAN, -EIO };
	size_t n = all_types(types_buf);

	for (size_t t = 0; t < n; t++) {
		struct orch_msg in, out;
		struct orch_frame_hdr h;
		uint8_t *payload;
		struct store *s = calloc(1, sizeof(*s));

		ORCH_CHECK(s);
		orch_msg_init(&in, types_buf[t]);
		in.flags = ORCH_FRAME_REPLY;
		in.status = errs[t % 6];
		fill(&in, orch_msg_fields(types_buf[t], true), 1, s, t);
		ORCH_CHECK_OK(encode(&in, &h, &payload));
		ORCH_CHECK(h.length == 4);
		ORCH_CHECK_OK(orch_msg_decode(&h, payload, &out));
		ORCH_CHECK(out.status == in.status);
		ORCH_CHECK(out.ndirents == 0 && out.dirents == NULL);
		free(payload);
		free(s);
	}
}

/* Fields at their maxima: 1 MiB of data, 1024 dirents with attributes. */
ORCH_TEST(roundtrip_limits)
{
	struct orch_msg in, out;
	struct orch_frame_hdr h;
	uint8_t *payload;
	char *data = malloc(ORCH_IO_MAX);
	struct orch_dirent *ents = calloc(ORCH_READDIR_MAX, sizeof(*ents));
	uint64_t st = 99;

	ORCH_CHECK(data && ents);
	fill_bytes(data, ORCH_IO_MAX, &st);
	orch_msg_init(&in, ORCH_CL2SV_WRITE);
	in.handle = 5;
	in.offset = 1ull << 40;
	in.data = orch_str_of(data, ORCH_IO_MAX);
	ORCH_CHECK_OK(encode(&in, &h, &payload));
	ORCH_CHECK_OK(orch_msg_decode(&h, payload, &out));
	ORCH_CHECK(field_eq('D', &in, &out) && field_eq('o', &in, &out));
	free(payload);

	orch_msg_init(&in, ORCH_CL2SV_READDIR);
	in.flags = ORCH_FRAME_REPLY;
	in.ndirents = ORCH_READDIR_MAX;
	in.dirents = ents;
	for (uint32_t i = 0; i < ORCH_READDIR_MAX; i++) {
		ents[i].handle = i + 1;
		ents[i].cookie = mix(&st);
		ents[i].namelen = ORCH_NAME_MAX;
		fill_bytes(ents[i].name, ORCH_NAME_MAX, &st);
		ents[i].has_attr = true;
		fill_attr(&ents[i].attr, &st);
	}
	ORCH_CHECK_OK(encode(&in, &h, &payload));
	ORCH_CHECK(h.length <= ORCH_MAXFRAME);
	ORCH_CHECK_OK(orch_msg_decode(&h, payload, &out));
	ORCH_CHECK(field_eq('E', &in, &out));
	orch_msg_fini(&out);
	free(payload);
	free(ents);
	free(data);
}

/* --- Golden bytes ------------------------------------------------------------------------ */

static int hex_decode(const char *hex, uint8_t *out, size_t max)
{
	size_t n = 0;

	for (const char *p = hex; *p;) {
		unsigned int v;

		if (*p == ' ' || *p == '\n' || *p == '|') {
			p++;
			continue;
		}
		if (n == max || sscanf(p, "%2x", &v) != 1)
			return -1;
		out[n++] = (uint8_t)v;
		p += 2;
	}
	return (int)n;
}

/* Encodes @m and checks it against @hex, then decodes @hex into @out. */
/* *@out borrows from a static buffer, valid until the next call. */
static int golden_check(const struct orch_msg *m, const char *hex, struct orch_msg *out)
{
	static uint8_t want[512];
	struct orch_buf b;
	struct orch_frame_hdr h;
	int n = hex_decode(hex, want, sizeof(want)), rc;

	if (n < ORCH_FRAME_HDR)
		return -EINVAL;
	orch_buf_init(&b, 4096);
	rc = orch_msg_encode(&b, m);
	if (rc == 0 && (b.b_len != (size_t)n || memcmp(b.b_data, want, (size_t)n) != 0)) {
		fprintf(stderr, "encoded %s:", orch_msg_name(m->type));
		for (size_t i = 0; i < b.b_len; i++)
			fprintf(stderr, " %02x", b.b_data[i]);
		fprintf(stderr, "\n");
		rc = -EBADMSG;
	}
	orch_buf_fini(&b);
	if (rc)
		return rc;
	orch_frame_hdr_decode(want, &h);
	if (h.length != (uint32_t)n - ORCH_FRAME_HDR)
		return -EBADMSG;
	return orch_msg_decode(&h, want + ORCH_FRAME_HDR, out);
}

ORCH_TEST(golden_lookup_request)
{
	static const char hex[] =
		"1e000000 0101 01 00 0807060504030201 |"   /* header */
		"e8030000 64000000 0200 0a000000 14000000 |" /* cred */
		"0100000000000000 |"                        /* parent */
		"03 616263";                                /* name */
	struct orch_msg m, out;

	orch_msg_init(&m, ORCH_CL2SV_LOOKUP);
	m.reqid = 0x0102030405060708ull;
	m.cred = (struct orch_cred){ .uid = 1000, .gid = 100, .ngroups = 2,
				     .groups = { 10, 20 } };
	m.parent = ORCH_ROOT_HANDLE;
	m.name = orch_str_of("abc", 3);
	ORCH_CHECK_OK(golden_check(&m, hex, &out));
	ORCH_CHECK(out.type == ORCH_CL2SV_LOOKUP && out.flags == 0 &&
		   out.reqid == m.reqid);
	for (const char *f = "cpn"; *f; f++)
		ORCH_CHECK(field_eq(*f, &m, &out));
}

ORCH_TEST(golden_getattr_reply)
{
	static const char hex[] =
		"5c000000 0201 01 01 2a00000000000000 |" /* header: reply */
		"00000000 |"                             /* status OK */
		"0500000000000100 a4810000 e8030000 64000000 01000000 |"
		"7011010000000000 0000000000000000 |"    /* size, rdev */
		"0100000000000000 0200000000000000 0300000000000000 |" /* a/m/ctime */
		"0100000000000000 |"                     /* parent */
		"00000100 0200 0100 0000000000000000";   /* layout, reserved */
	struct orch_msg m, out;

	orch_msg_init(&m, ORCH_CL2SV_GETATTR);
	m.flags = ORCH_FRAME_REPLY;
	m.reqid = 42;
	m.attr = (struct orch_attr){
		.handle = orch_handle_make(1, 5),
		.mode = S_IFREG | 0644,
		.uid = 1000,
		.gid = 100,
		.nlink = 1,
		.size = 70000,
		.atime_ns = 1,
		.mtime_ns = 2,
		.ctime_ns = 3,
		.parent = ORCH_ROOT_HANDLE,
		.layout = { .strip_size = 65536, .stripe_count = 2, .first_server = 1 },
	};
	ORCH_CHECK_OK(golden_check(&m, hex, &out));
	ORCH_CHECK(out.status == 0 && (out.flags & ORCH_FRAME_REPLY));
	ORCH_CHECK(field_eq('a', &m, &out));
}

/* A signed field: the link-count delta -1 is four bytes of two's complement. */
ORCH_TEST(golden_nlink_adj_delta)
{
	static const char hex[] =
		"18000000 0304 01 00 0100000000000000 |" /* header */
		"02000000 0700000000000000 |"            /* origin, intent */
		"0500000000000100 ffffffff";              /* handle, delta */
	struct orch_msg m, out;

	orch_msg_init(&m, ORCH_SV2SV_NLINK_ADJ);
	m.reqid = 1;
	m.origin = 2;
	m.id = 7;
	m.handle = orch_handle_make(1, 5);
	m.delta = -1;
	ORCH_CHECK_OK(golden_check(&m, hex, &out));
	ORCH_CHECK(out.delta == -1 && out.handle == m.handle && out.id == 7);
}

/* FSMAP's resume key: start, owner (signed: -3 is free space), object block. */
ORCH_TEST(golden_fsmap_key)
{
	static const char hex[] =
		"2c000000 0203 01 00 0100000000000000 |"       /* header */
		"0000000000000000 0000000000000000 01000000 |" /* start, end, flags */
		"1000000000000000 fdffffffffffffff 0200000000000000"; /* key */
	struct orch_msg m, out;

	orch_msg_init(&m, ORCH_AD2SV_FSMAP);
	m.reqid = 1;
	m.fsmap_flags = ORCH_FSMAP_RESUME;
	m.fsmap_key = (struct orch_fsmap_key){ .start = 16, .owner = -3, .fileoff = 2 };
	ORCH_CHECK_OK(golden_check(&m, hex, &out));
	ORCH_CHECK(field_eq('K', &m, &out) && out.fsmap_key.owner == -3);
}

ORCH_TEST(golden_error_reply)
{
	static const char hex[] = "04000000 0101 01 01 0700000000000000 | 02000000";
	struct orch_msg m, out;

	orch_msg_init(&m, ORCH_CL2SV_LOOKUP);
	m.flags = ORCH_FRAME_REPLY;
	m.reqid = 7;
	m.status = -ENOENT;
	m.entry.handle = 99; /* not encoded: an error carries the status only */
	ORCH_CHECK_OK(golden_check(&m, hex, &out));
	ORCH_CHECK(out.status == -ENOENT && out.entry.handle == 0);
}

/* --- Malformed input ---------------------------------------------------------------------- */

/* Every strict prefix of every encoding (both shapes, both directions) is -EPROTO. */
ORCH_TEST(truncated_every_length)
{
	size_t n = all_types(types_buf);

	for (size_t t = 0; t < n; t++) {
		for (int reply = 0; reply <= 1; reply++) {
			for (int variant = 0; variant < 2; variant++) {
				struct store *s = calloc(1, sizeof(*s));
				struct orch_msg in, out;
				struct orch_frame_hdr h;
				uint8_t *payload;

				ORCH_CHECK(s);
				orch_msg_init(&in, types_buf[t]);
				in.flags = reply ? ORCH_FRAME_REPLY : 0;
				fill(&in, orch_msg_fields(types_buf[t], reply), variant, s, t);
				ORCH_CHECK_OK(encode(&in, &h, &payload));
				for (uint32_t len = 0; len < h.length; len++) {
					int rc = decode_prefix(&h, payload, len, &out);

					if (rc != -EPROTO)
						fprintf(stderr, "%s reply=%d len=%u/%u: rc=%d\n",
							orch_msg_name(in.type), reply, len,
							h.length, rc);
					ORCH_CHECK_RC(rc, -EPROTO);
				}
				ORCH_CHECK_OK(decode_prefix(&h, payload, h.length, &out));
				free(payload);
				free(s);
			}
		}
	}
}

/* Bytes after the last field: refused from version 1, kept for later fields from 2. */
ORCH_TEST(trailing_bytes_by_version)
{
	struct orch_msg in, out;
	struct orch_frame_hdr h;
	uint8_t *payload, *longer;

	orch_msg_init(&in, ORCH_CL2SV_LOOKUP);
	in.cred.uid = 5;
	in.parent = 77;
	in.name = orch_str_of("name", 4);
	ORCH_CHECK_OK(encode(&in, &h, &payload));
	longer = malloc(h.length + 3);
	ORCH_CHECK(longer);
	memcpy(longer, payload, h.length);
	memcpy(longer + h.length, "\x01\x02\x03", 3);
	h.length += 3;
	ORCH_CHECK_RC(orch_msg_decode(&h, longer, &out), -EPROTO);
	h.version = ORCH_PROTO_VERSION + 1;
	ORCH_CHECK_OK(orch_msg_decode(&h, longer, &out));
	ORCH_CHECK(out.version == ORCH_PROTO_VERSION + 1);
	for (const char *f = "cpn"; *f; f++)
		ORCH_CHECK(field_eq(*f, &in, &out));
	free(longer);
	free(payload);
}

ORCH_TEST(unknown_type_enosys)
{
	static const uint16_t unknown[] = { 0x0000, 0x0100, 0x01ff, 0x7777, 0xffff };
	uint8_t payload[8] = { 0 };

	for (size_t i = 0; i < 5; i++) {
		struct orch_frame_hdr h = { .length = 8, .type = unknown[i], .version = 1 };
		struct orch_msg m, in;
		struct orch_buf b;

		ORCH_CHECK(orch_msg_name(unknown[i]) == NULL);
		ORCH_CHECK_RC(orch_msg_decode(&h, payload, &m), -ENOSYS);
		h.flags = ORCH_FRAME_REPLY;
		ORCH_CHECK_RC(orch_msg_decode(&h, payload, &m), -ENOSYS);
		orch_msg_init(&in, unknown[i]);
		orch_buf_init(&b, 1024);
		ORCH_CHECK_RC(orch_msg_encode(&b, &in), -EINVAL);
		orch_buf_fini(&b);
	}
}

/* Hand-made payloads: a cred with any group count. */
static void raw_cred(struct orch_buf *b, uint16_t ngroups)
{
	orch_wr_u32(b, 1);
	orch_wr_u32(b, 2);
	orch_wr_u16(b, ngroups);
	for (uint16_t i = 0; i < ngroups; i++)
		orch_wr_u32(b, i);
}

/* Decodes @b's contents as @type; returns the code and the allocations made. */
static int raw_decode(struct orch_buf *b, uint16_t type, bool reply, unsigned long *allocs)
{
	struct orch_frame_hdr h = { .length = (uint32_t)b->b_len, .type = type,
				    .version = ORCH_PROTO_VERSION,
				    .flags = reply ? ORCH_FRAME_REPLY : 0 };
	uint8_t *copy = malloc(b->b_len ? b->b_len : 1);
	struct orch_msg m;
	int rc;

	if (b->b_len)
		memcpy(copy, b->b_data, b->b_len);
	rc = decode_counted(&h, copy, &m, allocs);
	orch_msg_fini(&m);
	free(copy);
	return rc;
}

ORCH_TEST(oversized_fields_rejected_without_allocating)
{
	struct orch_buf b;
	unsigned long allocs;

	orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_MAXFRAME + 4096);

	/* ngroups 64 is fine, 65 is not, even with every group present. */
	raw_cred(&b, ORCH_GROUPS_MAX);
	orch_wr_u64(&b, 1);
	orch_wr_str8(&b, "a", 1);
	ORCH_CHECK_OK(raw_decode(&b, ORCH_CL2SV_LOOKUP, false, &allocs));
	orch_buf_reset(&b);
	raw_cred(&b, ORCH_GROUPS_MAX + 1);
	orch_wr_u64(&b, 1);
	orch_wr_str8(&b, "a", 1);
	ORCH_CHECK_RC(raw_decode(&b, ORCH_CL2SV_LOOKUP, false, &allocs), -EPROTO);
	ORCH_CHECK(allocs == 0);
	orch_buf_reset(&b);
	raw_cred(&b, 0xffff);
	ORCH_CHECK_RC(raw_decode(&b, ORCH_CL2SV_LOOKUP, false, &allocs), -EPROTO);
	orch_buf_reset(&b);

	/* A name's length byte cannot say more than 255; 0 is refused. */
	raw_cred(&b, 0);
	orch_wr_u64(&b, 1);
	orch_wr_u8(&b, 0);
	ORCH_CHECK_RC(raw_decode(&b, ORCH_CL2SV_LOOKUP, false, &allocs), -EPROTO);
	orch_buf_reset(&b);
	raw_cred(&b, 0);
	orch_wr_u64(&b, 1);
	orch_wr_u8(&b, 255); /* says 255, only 10 follow */
	orch_wr_bytes(&b, "0123456789", 10);
	ORCH_CHECK_RC(raw_decode(&b, ORCH_CL2SV_LOOKUP, false, &allocs), -EPROTO);
	orch_buf_reset(&b);

	/* Data: ORCH_IO_MAX + 1 bytes, all present, refused by the limit alone. */
	orch_wr_u32(&b, 0);
	orch_wr_u32(&b, ORCH_IO_MAX + 1);
	ORCH_CHECK_OK(orch_buf_reserve(&b, ORCH_IO_MAX + 1));
	memset(b.b_data + b.b_len, 'x', ORCH_IO_MAX + 1);
	b.b_len += ORCH_IO_MAX + 1;
	ORCH_CHECK_RC(raw_decode(&b, ORCH_CL2SV_READ, true, &allocs), -EPROTO);
	ORCH_CHECK(allocs == 0);
	b.b_len -= 1; /* the same with exactly ORCH_IO_MAX is fine */
	orch_put_u32(b.b_data + 4, ORCH_IO_MAX);
	ORCH_CHECK_OK(raw_decode(&b, ORCH_CL2SV_READ, true, &allocs));
	orch_buf_reset(&b);
	orch_wr_u32(&b, 0);
	orch_wr_u32(&b, 0xffffffffu);
	ORCH_CHECK_RC(raw_decode(&b, ORCH_CL2SV_READ, true, &allocs), -EPROTO);
	orch_buf_reset(&b);

	/* Symlink target over ORCH_PATH_MAX, all present. */
	orch_wr_u32(&b, 0);
	orch_wr_u16(&b, ORCH_PATH_MAX + 1);
	for (int i = 0; i <= ORCH_PATH_MAX; i++)
		orch_wr_u8(&b, 'a');
	ORCH_CHECK_RC(raw_decode(&b, ORCH_CL2SV_READLINK, true, &allocs), -EPROTO);
	orch_buf_reset(&b);

	/* JSON over 1 MiB. */
	orch_wr_u32(&b, 0);
	orch_wr_u32(&b, ORCH_JSON_MAX + 1);
	ORCH_CHECK_RC(raw_decode(&b, ORCH_AD2SV_STATS, true, &allocs), -EPROTO);
	orch_buf_reset(&b);

	/* Dirents: a good one allocates (so the counter works), too many do not. */
	orch_wr_u32(&b, 0);
	orch_wr_u16(&b, 1);
	orch_wr_u64(&b, 1);
	orch_wr_u64(&b, 2);
	orch_wr_u32(&b, S_IFREG);
	orch_wr_str8(&b, "f", 1);
	orch_wr_u8(&b, 0);
	orch_wr_u8(&b, 1); /* eof */
	ORCH_CHECK_OK(raw_decode(&b, ORCH_CL2SV_READDIR, true, &allocs));
	ORCH_CHECK(allocs >= 1 || !alloc_counting_works());
	orch_buf_reset(&b);
	orch_wr_u32(&b, 0);
	orch_wr_u16(&b, ORCH_READDIR_MAX + 1);
	for (uint32_t i = 0; i < ORCH_READDIR_MAX + 1; i++) {
		orch_wr_u64(&b, i + 1);
		orch_wr_u64(&b, i + 2);
		orch_wr_u32(&b, S_IFREG);
		orch_wr_str8(&b, "f", 1);
		orch_wr_u8(&b, 0);
	}
	orch_wr_u8(&b, 1);
	ORCH_CHECK(b.b_err == 0);
	ORCH_CHECK_RC(raw_decode(&b, ORCH_CL2SV_READDIR, true, &allocs), -EPROTO);
	ORCH_CHECK(allocs == 0);
	/* A count that the bytes present cannot hold is refused before calloc too. */
	orch_buf_reset(&b);
	orch_wr_u32(&b, 0);
	orch_wr_u16(&b, ORCH_READDIR_MAX);
	orch_wr_u64(&b, 1);
	ORCH_CHECK_RC(raw_decode(&b, ORCH_CL2SV_READDIR, true, &allocs), -EPROTO);
	ORCH_CHECK(allocs == 0);

	/* A header length over ORCH_MAXFRAME is refused before reading anything. */
	{
		struct orch_frame_hdr h = { .length = ORCH_MAXFRAME + 1,
					    .type = ORCH_CL2SV_WRITE, .version = 1 };
		struct orch_msg m;
		uint8_t one = 0;

		ORCH_CHECK_RC(orch_msg_decode(&h, &one, &m), -EPROTO);
	}
	orch_buf_fini(&b);
}

/* The encoder refuses what the decoder would refuse, and leaves the buffer as it was. */
ORCH_TEST(encode_rejects_over_limits)
{
	static char big[ORCH_PATH_MAX + 2];
	struct orch_dirent one = { .handle = 1, .namelen = 0 };
	struct orch_msg m;
	struct orch_buf b;

	orch_buf_init(&b, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	orch_buf_append(&b, "keep", 4);

	orch_msg_init(&m, ORCH_CL2SV_LOOKUP);
	m.name = orch_str_of(big, ORCH_NAME_MAX + 1);
	ORCH_CHECK_RC(orch_msg_encode(&b, &m), -EINVAL);
	ORCH_CHECK(b.b_len == 4);
	m.name = orch_str_of(big, 0);
	ORCH_CHECK_RC(orch_msg_encode(&b, &m), -EINVAL);
	m.name = orch_str_of(big, 1);
	m.cred.ngroups = ORCH_GROUPS_MAX + 1;
	ORCH_CHECK_RC(orch_msg_encode(&b, &m), -EINVAL);
	ORCH_CHECK(b.b_len == 4);

	orch_msg_init(&m, ORCH_CL2SV_CREATE);
	m.name = orch_str_of(big, 1);
	m.target = orch_str_of(big, ORCH_PATH_MAX + 1);
	ORCH_CHECK_RC(orch_msg_encode(&b, &m), -EINVAL);

	orch_msg_init(&m, ORCH_CL2SV_WRITE);
	m.data = orch_str_of(big, ORCH_IO_MAX + 1); /* checked before it is read */
	ORCH_CHECK_RC(orch_msg_encode(&b, &m), -EINVAL);

	orch_msg_init(&m, ORCH_CL2SV_READDIR);
	m.flags = ORCH_FRAME_REPLY;
	m.ndirents = ORCH_READDIR_MAX + 1;
	m.dirents = &one;
	ORCH_CHECK_RC(orch_msg_encode(&b, &m), -EINVAL);
	m.ndirents = 1; /* an entry without a name */
	ORCH_CHECK_RC(orch_msg_encode(&b, &m), -EINVAL);
	ORCH_CHECK(b.b_len == 4 && memcmp(b.b_data, "keep", 4) == 0);
	orch_buf_fini(&b);
}

/*
 * orch_msg_encode_head: the frame without the data's bytes, which follow it;
 * together the same bytes as orch_msg_encode.  Refused where data is not
 * the last field, and over the limit.
 */
ORCH_TEST(encode_head_leaves_trailing_data_out)
{
	static char data[70000];
	struct orch_buf full, head;
	struct orch_msg m;

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (char)(i * 7);
	orch_buf_init(&full, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	orch_buf_init(&head, ORCH_FRAME_HDR + ORCH_MAXFRAME);
	orch_msg_init(&m, ORCH_CL2SV_WRITE);
	m.reqid = 42;
	m.handle = 0x1234;
	m.offset = 1 << 20;
	m.cred.uid = 7;
	m.data = orch_str_of(data, sizeof(data));
	ORCH_CHECK_RC(orch_msg_encode(&full, &m), 0);
	ORCH_CHECK_RC(orch_msg_encode_head(&head, &m), 0);
	ORCH_CHECK(head.b_len + sizeof(data) == full.b_len);
	ORCH_CHECK(memcmp(head.b_data, full.b_data, head.b_len) == 0);
	ORCH_CHECK(memcmp(full.b_data + head.b_len, data, sizeof(data)) == 0);

	orch_msg_init(&m, ORCH_CL2SV_READ);   /* no data at all */
	ORCH_CHECK_RC(orch_msg_encode_head(&head, &m), -EINVAL);
	orch_msg_init(&m, ORCH_CL2SV_SETXATTR);   /* data, then nothing: allowed */
	m.xname = orch_str_of("user.a", 6);
	m.data = orch_str_of(data, 10);
	ORCH_CHECK_RC(orch_msg_encode_head(&head, &m), 0);
	orch_msg_init(&m, ORCH_CL2SV_WRITE);
	m.data = orch_str_of(data, ORCH_IO_MAX + 1);
	ORCH_CHECK_RC(orch_msg_encode_head(&head, &m), -EINVAL);
	orch_buf_fini(&full);
	orch_buf_fini(&head);
}

/*
 * Every handle field of every request, one at a time, is checked against the
 * server count: the last server's handles pass, the next server's do not.
 */
ORCH_TEST(check_handles_every_request)
{
	const uint64_t ok = orch_handle_make(2, 5), bad = orch_handle_make(3, 5);
	uint16_t types[128];
	size_t n = orch_msg_types(types, 128);
	uint64_t got;

	for (size_t t = 0; t < n; t++) {
		const char *f = orch_msg_fields(types[t], false);
		char code;

		while ((code = orch_msg_field_next(&f, NULL))) {
			struct orch_msg m;
			uint64_t *field = NULL;

			orch_msg_init(&m, types[t]);
			switch (code) {
			case 'h': field = &m.handle; break;
			case 'p': field = &m.parent; break;
			case 'P': field = &m.newparent; break;
			case 'H': field = &m.handle2; break;
			default: break;
			}
			if (!field)
				continue;
			*field = ok;
			ORCH_CHECK_OK(orch_msg_check_handles(&m, 3, &got));
			*field = bad;
			got = 0;
			ORCH_CHECK_RC(orch_msg_check_handles(&m, 3, &got), -EINVAL);
			ORCH_CHECK(got == bad);
			ORCH_CHECK_OK(orch_msg_check_handles(&m, 4, &got));
			/* Replies carry what the server chose: not checked here. */
			m.flags = ORCH_FRAME_REPLY;
			ORCH_CHECK_OK(orch_msg_check_handles(&m, 3, &got));
		}
	}
}

ORCH_TEST(check_handles_in_attr_and_data)
{
	uint8_t list[3 * 8];
	struct orch_msg m;
	uint64_t got = 0;

	orch_msg_init(&m, ORCH_SV2SV_MKDIR_INODE);
	m.attr.parent = UINT64_MAX;
	ORCH_CHECK_RC(orch_msg_check_handles(&m, 65535, &got), -EINVAL);
	ORCH_CHECK(got == UINT64_MAX);
	m.attr.parent = orch_handle_make(65534, 1);
	ORCH_CHECK_OK(orch_msg_check_handles(&m, 65535, &got));
	/* A SETATTR's attributes name nothing: the server ignores their handles. */
	orch_msg_init(&m, ORCH_CL2SV_SETATTR);
	m.handle = 7;
	m.attr.parent = m.attr.handle = UINT64_MAX;
	ORCH_CHECK_OK(orch_msg_check_handles(&m, 1, &got));

	orch_msg_init(&m, ORCH_SV2SV_DATA_DELETE_MANY);
	orch_put_u64(list, 9);
	orch_put_u64(list + 8, orch_handle_make(1, 9));
	orch_put_u64(list + 16, 1ULL << 63);
	m.data = orch_str_of((const char *)list, 16);
	ORCH_CHECK_OK(orch_msg_check_handles(&m, 2, &got));
	m.data.len = 24;
	ORCH_CHECK_RC(orch_msg_check_handles(&m, 2, &got), -EINVAL);
	ORCH_CHECK(got == 1ULL << 63);
	/* A ragged tail is the handler's EINVAL, not a handle. */
	m.data.len = 20;
	ORCH_CHECK_OK(orch_msg_check_handles(&m, 2, &got));
	ORCH_CHECK_RC(orch_msg_check_handles(&m, 1, &got), -EINVAL);
	ORCH_CHECK(got == orch_handle_make(1, 9));
}

/* --- The server's columns of msg.def ----------------------------------------------------- */

static const struct {
	const char *name;
	const char *from;
	const char *handler;
	const char *lease;
	const char *log;
	const char *req;
	const char *rep;
} msg_rows[] = {
#define ORCH_MSG(name, num, from, handler, lease, log, req, rep) \
	{ #name, #from, #handler, lease, #log, req, rep },
#include "proto/msg.def"
#undef ORCH_MSG
};

/* True if field list @list has a field of code @code. */
static bool list_has(const char *list, char code)
{
	char c;

	while ((c = orch_msg_field_next(&list, NULL)))
		if (c == code)
			return true;
	return false;
}

/*
 * Who may send what, and who handles it: a handler exactly for what a
 * server serves, SV2SV_* from servers, SV2CL_* pushed, ONEWAY only from
 * clients (CL2SV_*).  Leases name a
 * handle field of the request and an attribute field of the reply, and
 * orch_msg_lease reads them back.  What goes through a group's log is
 * served, and what goes exactly once is a client's.
 */
ORCH_TEST(dispatch_columns)
{
	size_t n = sizeof(msg_rows) / sizeof(msg_rows[0]);
	int leasing = 0;

	ORCH_CHECK(n == all_types(types_buf));
	for (size_t i = 0; i < n; i++) {
		const char *name = msg_rows[i].name, *from = msg_rows[i].from;
		const char *l = msg_rows[i].lease;
		bool served = strcmp(from, "ANY") == 0 || strcmp(from, "SERVER") == 0;
		char dir, inodes;

		ORCH_CHECK(served || strcmp(from, "CONN") == 0 || strcmp(from, "PUSH") == 0 ||
			   strcmp(from, "ONEWAY") == 0);
		ORCH_CHECK(served == (strcmp(msg_rows[i].handler, "NULL") != 0));
		ORCH_CHECK((strncmp(name, "SV2SV_", 6) == 0) == (strcmp(from, "SERVER") == 0));
		ORCH_CHECK((strncmp(name, "SV2CL_", 6) == 0) == (strcmp(from, "PUSH") == 0));
		ORCH_CHECK(strncmp(name, "CL2SV_", 6) != 0 || strcmp(from, "ANY") == 0 ||
			   strcmp(from, "ONEWAY") == 0);
		ORCH_CHECK(strcmp(from, "ONEWAY") != 0 || strncmp(name, "CL2SV_", 6) == 0);
		ORCH_CHECK(strncmp(name, "AD2SV_", 6) != 0 || strcmp(from, "ANY") == 0);
		ORCH_CHECK(strcmp(msg_rows[i].log, "NONE") == 0 || strcmp(msg_rows[i].log, "LOG") == 0 ||
			   strcmp(msg_rows[i].log, "ONCE") == 0);
		ORCH_CHECK(orch_msg_changes_namespace(types_buf[i]) ==
			   (strcmp(msg_rows[i].log, "NONE") != 0));
		ORCH_CHECK(orch_msg_exactly_once(types_buf[i]) == (strcmp(msg_rows[i].log, "ONCE") == 0));
		ORCH_CHECK(!orch_msg_changes_namespace(types_buf[i]) || served);
		ORCH_CHECK(!orch_msg_exactly_once(types_buf[i]) || strncmp(name, "CL2SV_", 6) == 0);
		orch_msg_lease(types_buf[i], &dir, &inodes);
		if (!l[0]) {
			ORCH_CHECK(dir == 0 && inodes == 0);
			continue;
		}
		leasing++;
		ORCH_CHECK(served && strlen(l) == 2 && strcmp(l, "--") != 0);
		ORCH_CHECK(l[0] == '-' || (strchr("hpPH", l[0]) && list_has(msg_rows[i].req, l[0])));
		ORCH_CHECK(l[1] == '-' || (strchr("aeE", l[1]) && list_has(msg_rows[i].rep, l[1])));
		ORCH_CHECK(dir == (l[0] == '-' ? 0 : l[0]) && inodes == (l[1] == '-' ? 0 : l[1]));
	}
	ORCH_CHECK(leasing == 9);
	ORCH_CHECK(!orch_msg_changes_namespace(0x7777) && !orch_msg_exactly_once(0x7777));
}

/* Which replies lease on which connection: WRITERS only with WRITERS_ATTR. */
ORCH_TEST(replies_lease_by_the_features_granted)
{
	const uint64_t both = ORCH_FEAT_LEASES | ORCH_FEAT_WRITERS_ATTR;

	ORCH_CHECK(orch_msg_reply_leases(ORCH_CL2SV_GETATTR, ORCH_FEAT_LEASES));
	ORCH_CHECK(!orch_msg_reply_leases(ORCH_CL2SV_GETATTR, ORCH_FEAT_WRITERS_ATTR));
	ORCH_CHECK(!orch_msg_reply_leases(ORCH_CL2SV_WRITERS, ORCH_FEAT_LEASES));
	ORCH_CHECK(orch_msg_reply_leases(ORCH_CL2SV_WRITERS, both));
	ORCH_CHECK(!orch_msg_reply_leases(ORCH_CL2SV_WRITERS, ORCH_FEAT_WRITERS_ATTR));
}

/* Numbered to a group: ONCE types, and writers' requests that register nothing. */
ORCH_TEST(numbered_requests)
{
	static const struct {
		uint32_t flags;
		bool numbered;
	} writers[] = {
		{ ORCH_WRITERS_RELEASE, true },
		{ ORCH_WRITERS_CLOSE, true },
		{ ORCH_WRITERS_RELEASE | ORCH_WRITERS_CLOSE, true },
		{ ORCH_WRITERS_REGISTER, false },
		{ ORCH_WRITERS_OPEN, false },
		{ ORCH_WRITERS_REGISTER | ORCH_WRITERS_OPEN, false },
		{ ORCH_WRITERS_PROBE, false },
		{ ORCH_WRITERS_RECLAIM, false },
	};
	struct orch_msg m;

	for (size_t i = 0; i < sizeof(writers) / sizeof(writers[0]); i++) {
		orch_msg_init(&m, ORCH_CL2SV_WRITERS);
		m.writers_flags = writers[i].flags;
		ORCH_CHECK(orch_msg_numbered(&m) == writers[i].numbered);
	}
	orch_msg_init(&m, ORCH_CL2SV_CREATE);
	ORCH_CHECK(orch_msg_numbered(&m));
	orch_msg_init(&m, ORCH_CL2SV_LOOKUP);
	ORCH_CHECK(!orch_msg_numbered(&m));
	orch_msg_init(&m, ORCH_SV2SV_RENAME_IN);
	ORCH_CHECK(!orch_msg_numbered(&m));
}

ORCH_TEST(lease_and_handle_accessors)
{
	char dir = 'x', inodes = 'x';
	struct orch_msg m;

	orch_msg_lease(0x7777, &dir, &inodes);
	ORCH_CHECK(dir == 0 && inodes == 0);
	orch_msg_lease(ORCH_CL2SV_READDIR, &dir, NULL);
	orch_msg_lease(ORCH_CL2SV_READDIR, NULL, &inodes);
	ORCH_CHECK(dir == 'h' && inodes == 'E');
	orch_msg_init(&m, ORCH_CL2SV_LINK);
	m.handle = 1;
	m.parent = 2;
	m.newparent = 3;
	m.handle2 = 4;
	ORCH_CHECK(orch_msg_handle(&m, 'h') == 1 && orch_msg_handle(&m, 'p') == 2 &&
		   orch_msg_handle(&m, 'P') == 3 && orch_msg_handle(&m, 'H') == 4);
	ORCH_CHECK(orch_msg_handle(&m, 'a') == 0 && orch_msg_handle(&m, 0) == 0);
}

/* --- Flag words ------------------------------------------------------------------------ */

enum flag_unknown { FLAG_REFUSE, FLAG_IGNORE };

static const struct {
	const char *set;
	const char *field;
	uint32_t known;
	enum flag_unknown unknown;
} flag_words[] = {
#define ORCH_FLAGS(set, field, unknown) { #set, #field, ORCH_##set##_KNOWN_, FLAG_##unknown },
#define ORCH_FLAG(set, bit, value, doc)
#include "proto/flags.def"
#undef ORCH_FLAG
#undef ORCH_FLAGS
};

static const struct {
	const char *set;
	const char *bit;
	uint32_t value;
	const char *doc;
} flag_bits[] = {
#define ORCH_FLAGS(set, field, unknown)
#define ORCH_FLAG(set, bit, value, doc) { #set, #bit, value, doc },
#include "proto/flags.def"
#undef ORCH_FLAG
#undef ORCH_FLAGS
};

/*
 * flags.def: each bit is one bit, used once in its word, and documented;
 * a word's KNOWN_ is all its bits; no two words share a name or a field.
 */
ORCH_TEST(flag_table)
{
	size_t nwords = sizeof(flag_words) / sizeof(flag_words[0]);
	size_t nbits = sizeof(flag_bits) / sizeof(flag_bits[0]);

	ORCH_CHECK(nwords >= 12);
	for (size_t w = 0; w < nwords; w++) {
		uint32_t seen = 0;

		for (size_t v = 0; v < w; v++) {
			ORCH_CHECK(strcmp(flag_words[v].set, flag_words[w].set) != 0);
			ORCH_CHECK(strcmp(flag_words[v].field, flag_words[w].field) != 0);
		}
		for (size_t b = 0; b < nbits; b++) {
			uint32_t v = flag_bits[b].value;

			if (strcmp(flag_bits[b].set, flag_words[w].set) != 0)
				continue;
			ORCH_CHECK(v != 0 && (v & (v - 1)) == 0);
			ORCH_CHECK(!(seen & v));
			ORCH_CHECK(flag_bits[b].doc[0] != '\0');
			seen |= v;
		}
		if (seen != flag_words[w].known)
			fprintf(stderr, "flag word %s: bits %#x, known %#x\n", flag_words[w].set,
				seen, flag_words[w].known);
		ORCH_CHECK(seen != 0 && seen == flag_words[w].known);
	}
	/* Values kept from before the table, and the Linux values that travel as they are. */
	ORCH_CHECK(ORCH_SET_KNOWN_ == 0x3dbf);
	ORCH_CHECK(ORCH_RENAME_NOREPLACE == 1 && ORCH_RENAME_EXCHANGE == 2);
	ORCH_CHECK(ORCH_XATTR_CREATE == 1 && ORCH_XATTR_REPLACE == 2);
}

/*
 * A message's flag word (code f) is named after a word of flags.def, which
 * struct orch_msg then has under that name; every word of flags.def is some
 * message's.
 */
ORCH_TEST(flag_words_named_in_msg_def)
{
	size_t n = all_types(types_buf), nwords = sizeof(flag_words) / sizeof(flag_words[0]);
	bool used[sizeof(flag_words) / sizeof(flag_words[0])] = { false };
	struct orch_msg m;

	for (size_t t = 0; t < n; t++) {
		for (int reply = 0; reply <= 1; reply++) {
			const char *f = orch_msg_fields(types_buf[t], reply);
			struct orch_str name;
			char code;

			while ((code = orch_msg_field_next(&f, &name))) {
				size_t w;

				if (code != 'f')
					continue;
				for (w = 0; w < nwords; w++)
					if (strlen(flag_words[w].field) == name.len &&
					    memcmp(flag_words[w].field, name.s, name.len) == 0)
						break;
				if (w == nwords)
					fprintf(stderr, "%s: flag word '%.*s' is not in flags.def\n",
						orch_msg_name(types_buf[t]), (int)name.len, name.s);
				ORCH_CHECK(w < nwords);
				used[w] = true;
			}
		}
	}
	for (size_t w = 0; w < nwords; w++) {
		if (!used[w])
			fprintf(stderr, "flags.def: no message carries %s\n", flag_words[w].field);
		ORCH_CHECK(used[w]);
	}
	/* The names are one word. */
	orch_msg_init(&m, ORCH_CL2SV_UNLINK);
	m.unlink_flags = ORCH_UNLINK_RMDIR;
	ORCH_CHECK(m.flags32 == ORCH_UNLINK_RMDIR && m.rename_flags == m.unlink_flags);
}

/*
 * A request whose flag word sets a bit flags.def does not list is refused
 * where the word says REFUSE and passes where it says IGNORE; known bits,
 * messages without a flag word and replies always pass.
 */
ORCH_TEST(check_flags_every_request)
{
	size_t n = all_types(types_buf), nwords = sizeof(flag_words) / sizeof(flag_words[0]);
	int refusing = 0;

	for (size_t t = 0; t < n; t++) {
		const char *f = orch_msg_fields(types_buf[t], false);
		size_t w = nwords;
		struct orch_str name;
		struct orch_msg m;
		char code;

		while ((code = orch_msg_field_next(&f, &name)))
			for (size_t i = 0; code == 'f' && i < nwords; i++)
				if (strlen(flag_words[i].field) == name.len &&
				    memcmp(flag_words[i].field, name.s, name.len) == 0)
					w = i;
		orch_msg_init(&m, types_buf[t]);
		m.flags32 = w < nwords ? flag_words[w].known : UINT32_MAX;
		ORCH_CHECK_OK(orch_msg_check_flags(&m));
		if (w == nwords)
			continue;
		refusing += flag_words[w].unknown == FLAG_REFUSE;
		for (int bit = 0; bit < 32; bit++) {
			m.flags32 = 1u << bit;
			m.flags = 0;
			if (flag_words[w].known & m.flags32)
				ORCH_CHECK_OK(orch_msg_check_flags(&m));
			else
				ORCH_CHECK_RC(orch_msg_check_flags(&m),
					      flag_words[w].unknown == FLAG_REFUSE ? -EINVAL : 0);
			m.flags = ORCH_FRAME_REPLY;
			ORCH_CHECK_OK(orch_msg_check_flags(&m));
		}
	}
	ORCH_CHECK(refusing == 7);   /* SETATTR, RENAME, RENAME_IN, SETXATTR, WRITERS, DEDUPE, DATA_CUT */
}

/* Status <-> errno: every errno of status.def maps back to itself; unknown ones to EIO. */
ORCH_TEST(status_mapping)
{
	static const int errs[] = { EPERM, ENOENT, EIO, EACCES, EEXIST, ENOTDIR, EISDIR,
				    EINVAL, ENOSPC, ENAMETOOLONG, ENOTEMPTY, ELOOP, ENODATA,
				    ERANGE, ESTALE, EUCLEAN, ETIMEDOUT, EHOSTDOWN };

	ORCH_CHECK(orch_errno_to_status(0) == ORCH_ST_OK);
	ORCH_CHECK(orch_status_to_errno(ORCH_ST_OK) == 0);
	for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		ORCH_CHECK(orch_status_to_errno(orch_errno_to_status(-errs[i])) == -errs[i]);
		ORCH_CHECK(orch_errno_to_status(-errs[i]) == orch_errno_to_status(errs[i]));
	}
	ORCH_CHECK(orch_status_to_errno(0xdeadbeef) == -EIO);
	ORCH_CHECK(orch_errno_to_status(-EHWPOISON) == ORCH_ST_IO);
}

ORCH_TEST_MAIN()
