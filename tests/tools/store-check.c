/*
 * store-check: runs the extent store's checker (orch_store_check) on the
 * store in a data directory, offline, for the integration tests.
 *
 *   store-check [--data] [--objects] DATA_DIR
 *
 * Opens the store exclusively (the server must be stopped; opening also
 * finishes work items a crash interrupted), prints each finding on its own
 * line to stdout:
 *
 *   <rule> <structure> ag=<ag> block=<agbno> handle=<%016llx> <detail>
 *
 * and exits 0 if there are none, 1 if there are, 2 on a usage error and 4
 * if the store could not be opened or checked.  --data also reads every
 * mapped block and verifies its checksum (I17).  --objects then prints
 * every object that holds bytes, by handle:
 *
 *   object <%016llx handle> <size> <crc32c of its bytes, holes as zeros>
 *
 * so that the stores of a replica group's members can be compared.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "store/fsmap.h"
#include "store/store.h"

#define OBJECT_CHUNK (1u << 20)

struct objects {
	struct orch_store *st;
	uint8_t *buf;
};

/* One object's line; an empty one is left out (absent and empty read alike). */
static int print_object(void *arg, uint64_t h)
{
	struct objects *o = arg;
	uint64_t off = 0;
	uint32_t crc = 0;

	for (;;) {
		size_t got = 0;
		int error = orch_store_read(o->st, h, off, o->buf, OBJECT_CHUNK, &got);

		if (error)
			return error;
		crc = orch_crc32c(crc, o->buf, got);
		off += got;
		if (got < OBJECT_CHUNK)
			break;
	}
	if (off)
		printf("object %016llx %llu %08x\n", (unsigned long long)h,
		       (unsigned long long)off, crc);
	return 0;
}

static int print_objects(struct orch_store *st)
{
	struct objects o = { .st = st, .buf = malloc(OBJECT_CHUNK) };
	uint64_t after = 0;
	bool eof = false;
	int error = o.buf ? 0 : -ENOMEM;

	while (!error && !eof)
		error = orch_store_handles(st, &after, 256, print_object, &o, &eof);
	free(o.buf);
	return error;
}

static void print_finding(void *arg, const struct orch_store_finding *f)
{
	(void)arg;
	printf("%s %s ag=%lld block=%lld handle=%016llx %s\n", f->rule,
	       f->structure ? f->structure : "-", (long long)f->ag,
	       (long long)f->block, (unsigned long long)f->handle, f->detail);
}

int main(int argc, char **argv)
{
	struct orch_store *st = NULL;
	const char *dir = NULL;
	bool data = false, objects = false;
	long n;
	int error;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--data") == 0) {
			data = true;
		} else if (strcmp(argv[i], "--objects") == 0) {
			objects = true;
		} else if (argv[i][0] == '-' || dir) {
			fprintf(stderr, "usage: store-check [--data] [--objects] DATA_DIR\n");
			return 2;
		} else {
			dir = argv[i];
		}
	}
	if (!dir) {
		fprintf(stderr, "usage: store-check [--data] [--objects] DATA_DIR\n");
		return 2;
	}
	error = orch_store_open(dir, &st);
	if (error) {
		fprintf(stderr, "store-check: cannot open the store in '%s': %s\n", dir,
			strerror(-error));
		return 4;
	}
	n = orch_store_check(st, data, print_finding, NULL);
	if (n >= 0 && objects) {
		error = print_objects(st);
		if (error)
			n = error;
	}
	fflush(stdout);
	orch_store_close(st);
	if (n < 0) {
		fprintf(stderr, "store-check: check failed: %s\n", strerror((int)-n));
		return 4;
	}
	fprintf(stderr, "store-check: %ld finding%s\n", n, n == 1 ? "" : "s");
	return n ? 1 : 0;
}
