/*
 * store-check: runs the extent store's checker (orch_store_check) on the
 * store in a data directory, offline, for the integration tests.
 *
 *   store-check [--data] DATA_DIR
 *
 * Opens the store exclusively (the server must be stopped; opening also
 * finishes work items a crash interrupted), prints each finding on its own
 * line to stdout:
 *
 *   <rule> <structure> ag=<ag> block=<agbno> handle=<%016llx> <detail>
 *
 * and exits 0 if there are none, 1 if there are, 2 on a usage error and 4
 * if the store could not be opened or checked.  --data also reads every
 * mapped block and verifies its checksum (I17).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "store/store.h"

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
	bool data = false;
	long n;
	int error;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--data") == 0) {
			data = true;
		} else if (argv[i][0] == '-' || dir) {
			fprintf(stderr, "usage: store-check [--data] DATA_DIR\n");
			return 2;
		} else {
			dir = argv[i];
		}
	}
	if (!dir) {
		fprintf(stderr, "usage: store-check [--data] DATA_DIR\n");
		return 2;
	}
	error = orch_store_open(dir, &st);
	if (error) {
		fprintf(stderr, "store-check: cannot open the store in '%s': %s\n", dir,
			strerror(-error));
		return 4;
	}
	n = orch_store_check(st, data, print_finding, NULL);
	fflush(stdout);
	orch_store_close(st);
	if (n < 0) {
		fprintf(stderr, "store-check: check failed: %s\n", strerror((int)-n));
		return 4;
	}
	fprintf(stderr, "store-check: %ld finding%s\n", n, n == 1 ? "" : "s");
	return n ? 1 : 0;
}
