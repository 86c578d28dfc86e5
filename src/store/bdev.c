/*
 * Block I/O of the blocks file, and the crash-test kill points: every read,
 * write, punch and sync of the store's data goes through here, so tests
 * can see (the power-cut shim, common/pcut), stop (ORCH_STORE_KILL) and
 * fail (ORCH_STORE_EIO) the store between the steps its durability
 * depends on.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
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

/* --- Injected I/O errors ---------------------------------------------------------- */

/*
 * ORCH_STORE_EIO=OP[,OP...][@PATH] (common/fault.def): the reads, writes
 * or syncs of the blocks file fail with EIO, always, or while the file
 * PATH exists, so a test can start and stop the errors of a running
 * server as a failing disk would.  Read at open; one branch when unset.
 */
#define BDEV_EIO_READ 1u
#define BDEV_EIO_WRITE 2u
#define BDEV_EIO_SYNC 4u

static unsigned int eio_ops;
static char eio_path[PATH_MAX];

void orch_bdev_eio_init(void)
{
	static const struct { const char *name; unsigned int bit; } ops[] = {
		{ "read", BDEV_EIO_READ }, { "write", BDEV_EIO_WRITE }, { "sync", BDEV_EIO_SYNC },
	};
	const char *e = orch_fault_env(ORCH_FAULT_STORE_EIO), *at;
	unsigned int bits = 0;

	eio_ops = 0;
	eio_path[0] = '\0';
	if (!e)
		return;
	at = strchr(e, '@');
	for (const char *p = e; p < (at ? at : e + strlen(e));) {
		size_t n = strcspn(p, ",@");
		unsigned int bit = 0;

		for (size_t k = 0; k < sizeof(ops) / sizeof(ops[0]); k++)
			if (strlen(ops[k].name) == n && strncmp(p, ops[k].name, n) == 0)
				bit = ops[k].bit;
		if (!bit) {
			ORCH_WARN("store: ORCH_STORE_EIO names no operation: '%s'", e);
			return;
		}
		bits |= bit;
		p += n + (p[n] == ',');
	}
	if (at && snprintf(eio_path, sizeof(eio_path), "%s", at + 1) >= (int)sizeof(eio_path)) {
		ORCH_WARN("store: ORCH_STORE_EIO: path too long: '%s'", e);
		eio_path[0] = '\0';
		return;
	}
	eio_ops = bits;
	ORCH_WARN("store: test hook ORCH_STORE_EIO='%s': I/O errors will be injected", e);
}

/* True if operation @op must fail now (ORCH_STORE_EIO). */
static bool eio_now(unsigned int op)
{
	if (__builtin_expect(!(eio_ops & op), 1))
		return false;
	return !eio_path[0] || access(eio_path, F_OK) == 0;
}

/* --- Block I/O --------------------------------------------------------------------- */

int orch_bdev_read(struct orch_store *st, uint64_t gblock, uint32_t n, void *buf)
{
	size_t len = (size_t)n * ORCH_STORE_BLOCK, done = 0;
	off_t off = (off_t)(gblock * ORCH_STORE_BLOCK);

	if (eio_now(BDEV_EIO_READ))
		return -EIO;
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
		ssize_t r = eio_now(BDEV_EIO_WRITE) ? (errno = EIO, -1) :
			    pwrite(st->st_blocks_fd, (const char *)buf + done, len - done,
				   off + (off_t)done);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			int error = -errno;

			/* Its operation fails and changes nothing; no room is no news. */
			if (error != -ENOSPC && error != -EDQUOT)
				ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "store in '%s': cannot write "
						   "blocks %" PRIu64 "+%u: %s", st->st_dir,
						   gblock, n, strerror(-error));
			return error;
		}
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
	if (eio_now(BDEV_EIO_SYNC))
		return -EIO;
	return fdatasync(st->st_blocks_fd) < 0 ? -errno : 0;
}
