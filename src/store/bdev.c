/*
 * Block I/O of the blocks file, and the crash-test kill points: every read,
 * write, punch and sync of the store's data goes through here, so tests
 * can see (the power-cut shim, common/pcut) and stop (ORCH_STORE_KILL) the
 * store between the steps its durability depends on.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/log.h"
#include "common/pcut.h"
#include "store/store_i.h"

/* --- Kill points ----------------------------------------------------------------- */

static int killpoint_count = -1;   /* hits left before the kill; -1 = off */
static enum orch_killpoint killpoint_at;

void orch_bdev_killpoint_init(void)
{
	const char *e = orch_fault_env(ORCH_FAULT_STORE_KILL);
	size_t n;

	killpoint_count = -1;
	if (!e)
		return;
	n = strcspn(e, ":");
	for (int k = 0; k < ORCH_KILLPOINT_COUNT; k++) {
		const char *name = orch_killpoint_name((enum orch_killpoint)k);

		if (strlen(name) == n && strncmp(e, name, n) == 0) {
			killpoint_at = (enum orch_killpoint)k;
			killpoint_count = e[n] == ':' ? atoi(e + n + 1) : 1;
			if (killpoint_count < 1)
				killpoint_count = 1;
			return;
		}
	}
	ORCH_WARN("store: ORCH_STORE_KILL names no kill point: '%s'", e);
}

void orch_bdev_killpoint(enum orch_killpoint point)
{
	if (__builtin_expect(killpoint_count < 0, 1))
		return;
	if (point == killpoint_at &&
	    __atomic_sub_fetch(&killpoint_count, 1, __ATOMIC_SEQ_CST) == 0) {
		ORCH_WARN("store: kill point '%s' reached, killing the process",
			  orch_killpoint_name(point));
		raise(SIGKILL);
	}
}

/* --- Block I/O --------------------------------------------------------------------- */

int orch_bdev_read(struct orch_store *st, uint64_t gblock, uint32_t n, void *buf)
{
	size_t len = (size_t)n * ORCH_STORE_BLOCK, done = 0;
	off_t off = (off_t)(gblock * ORCH_STORE_BLOCK);

	while (done < len) {
		ssize_t r = pread(st->st_blocks_fd, (char *)buf + done, len - done,
				  off + (off_t)done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r == 0) {   /* a sparse file shorter than the store: zeros */
			memset((char *)buf + done, 0, len - done);
			break;
		}
		done += (size_t)r;
	}
	return 0;
}

int orch_bdev_write(struct orch_store *st, uint64_t gblock, uint32_t n, const void *buf)
{
	size_t len = (size_t)n * ORCH_STORE_BLOCK, done = 0;
	off_t off = (off_t)(gblock * ORCH_STORE_BLOCK);

	orch_pcut_write_fd(st->st_blocks_fd, (uint64_t)off, len);
	while (done < len) {
		ssize_t r = pwrite(st->st_blocks_fd, (const char *)buf + done,
				   len - done, off + (off_t)done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		done += (size_t)r;
	}
	/* Counted once written: a flush that saw the count before it began
	 * its fdatasync has these bytes covered (store_flush). */
	atomic_fetch_add(&st->st_data_writes, 1);
	return 0;
}

int orch_bdev_punch(struct orch_store *st, uint64_t gblock, uint32_t n)
{
	off_t off = (off_t)(gblock * ORCH_STORE_BLOCK), len = (off_t)n * ORCH_STORE_BLOCK;

	orch_pcut_punch_fd(st->st_blocks_fd, (uint64_t)off, (size_t)len);
	if (fallocate(st->st_blocks_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off,
		      len) < 0)
		return -errno;
	return 0;
}

int orch_bdev_sync(struct orch_store *st)
{
	return fdatasync(st->st_blocks_fd) < 0 ? -errno : 0;
}
