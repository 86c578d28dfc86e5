/*
 * What a member of a replica group takes from its log or its leader and
 * hands to the namespace (src/meta/changes.c), on arbitrary bytes: a log
 * entry's changeset (first byte even) or a snapshot image (odd).  Neither
 * may crash or read outside the input, and the applied index moves exactly
 * when an entry says it applied.  One database, made once, lives through
 * the whole run; changes that do apply accumulate in it.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "meta/meta.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct orch_meta *M;
static uint64_t next_index = 1;

static void fuzz_meta_fini(void)
{
	char cmd[128];
	char dir[96];

	if (!M)
		return;
	snprintf(dir, sizeof(dir), "%s", orch_meta_db_path(M));
	*strrchr(dir, '/') = '\0';
	orch_meta_close(M);
	M = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
}

static struct orch_meta *fuzz_meta(void)
{
	struct orch_meta_ident id = { .server_index = 0, .nservers = 1, .strip_size = 65536 };
	static char dir[] = "/tmp/fuzz_meta_changes.XXXXXX";
	char err[256];

	if (M)
		return M;
	snprintf(id.cluster_id, sizeof(id.cluster_id), "fuzz");
	orch_log_level = (enum orch_log_level)(ORCH_LOG_ERR - 1); /* refusals log */
	if (!mkdtemp(dir) || orch_meta_mkfs(dir, &id) ||
	    orch_meta_open(dir, &id, &M, err, sizeof(err)))
		abort();
	atexit(fuzz_meta_fini);
	return M;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct orch_meta *m = fuzz_meta();
	uint64_t before, after;
	uint8_t *copy;
	int rc;

	if (size < 1)
		return 0;
	/* Exactly the input's bytes, so that ASan sees any read past them. */
	copy = malloc(size - 1 ? size - 1 : 1);
	if (!copy)
		abort();
	memcpy(copy, data + 1, size - 1);
	if (orch_meta_applied_index(m, &before))
		abort();
	if (data[0] & 1) {
		rc = orch_meta_restore(m, copy, size - 1);
		if (orch_meta_applied_index(m, &after))
			abort();
		if (rc < 0 && after != before)
			abort();
		next_index = after + 1;
	} else {
		rc = orch_meta_changes_apply(m, next_index, copy, size - 1);
		if (orch_meta_applied_index(m, &after))
			abort();
		if (rc == 0 ? after != next_index : after != before)
			abort();
		if (rc == 0)
			next_index++;
	}
	free(copy);
	return 0;
}
