/*
 * A SQLite VFS shim for the power-cut simulation (common/pcut.h): every
 * write, truncate, create and delete of a database (meta.db, store.db), its
 * WAL and its shared-memory file is recorded before it happens, and a sync forgets
 * the file's records, so a simulated power cut puts each database and its WAL back
 * to what the disk would hold.  Registered as the default VFS only when the
 * simulation is on; otherwise SQLite's own unix VFS is used untouched.
 * Memory-mapped I/O is not offered (iVersion 2), so every write goes
 * through xWrite.
 */
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "common/pcut.h"

struct pcut_file {
	sqlite3_file pf_base;  /* must be first */
	const char *pf_path;   /* owned by SQLite, valid until close; NULL for temp files */
	sqlite3_file *pf_real; /* the unix VFS's file, right after this struct */
};

static sqlite3_vfs *pcut_real_vfs;

static int pcut_close(sqlite3_file *f)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xClose(p->pf_real);
}

static int pcut_read(sqlite3_file *f, void *buf, int amt, sqlite3_int64 off)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xRead(p->pf_real, buf, amt, off);
}

/* The simulation reads old bytes through the real file (see pcut.h). */
static int pcut_real_size(void *arg, uint64_t *size)
{
	sqlite3_file *real = arg;
	sqlite3_int64 n = 0;

	if (real->pMethods->xFileSize(real, &n) != SQLITE_OK || n < 0)
		return -EIO;
	*size = (uint64_t)n;
	return 0;
}

static int pcut_real_read(void *arg, void *buf, size_t len, uint64_t off)
{
	sqlite3_file *real = arg;

	if (len > INT_MAX)
		return -EFBIG;
	return real->pMethods->xRead(real, buf, (int)len, (sqlite3_int64)off) == SQLITE_OK ?
		       0 : -EIO;
}

static int pcut_write(sqlite3_file *f, const void *buf, int amt, sqlite3_int64 off)
{
	struct pcut_file *p = (struct pcut_file *)f;
	struct orch_pcut_reader rd = { pcut_real_size, pcut_real_read, p->pf_real };

	if (p->pf_path)
		orch_pcut_write_via(p->pf_path, (uint64_t)off, (size_t)amt, &rd);
	return p->pf_real->pMethods->xWrite(p->pf_real, buf, amt, off);
}

static int pcut_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	struct pcut_file *p = (struct pcut_file *)f;
	struct orch_pcut_reader rd = { pcut_real_size, pcut_real_read, p->pf_real };

	if (p->pf_path)
		orch_pcut_truncate_via(p->pf_path, (uint64_t)size, &rd);
	return p->pf_real->pMethods->xTruncate(p->pf_real, size);
}

static int pcut_sync(sqlite3_file *f, int flags)
{
	struct pcut_file *p = (struct pcut_file *)f;
	/* Writes by other threads while the sync runs may not be covered. */
	uint64_t mark = orch_pcut_mark();
	int rc = p->pf_real->pMethods->xSync(p->pf_real, flags);

	if (rc == SQLITE_OK && p->pf_path)
		orch_pcut_synced_upto(p->pf_path, mark);
	return rc;
}

static int pcut_file_size(sqlite3_file *f, sqlite3_int64 *size)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xFileSize(p->pf_real, size);
}

static int pcut_lock(sqlite3_file *f, int level)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xLock(p->pf_real, level);
}

static int pcut_unlock(sqlite3_file *f, int level)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xUnlock(p->pf_real, level);
}

static int pcut_check_reserved(sqlite3_file *f, int *out)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xCheckReservedLock(p->pf_real, out);
}

static int pcut_file_control(sqlite3_file *f, int op, void *arg)
{
	struct pcut_file *p = (struct pcut_file *)f;

	/* No memory-mapped I/O: its writes would bypass xWrite. */
	if (op == SQLITE_FCNTL_MMAP_SIZE) {
		*(sqlite3_int64 *)arg = 0;
		return SQLITE_OK;
	}
	return p->pf_real->pMethods->xFileControl(p->pf_real, op, arg);
}

static int pcut_sector_size(sqlite3_file *f)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xSectorSize(p->pf_real);
}

static int pcut_device_chars(sqlite3_file *f)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xDeviceCharacteristics(p->pf_real);
}

/* The WAL index (-shm) is rebuilt from the WAL after a crash; pass it through. */
static int pcut_shm_map(sqlite3_file *f, int pg, int pgsz, int extend, void volatile **pp)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xShmMap(p->pf_real, pg, pgsz, extend, pp);
}

static int pcut_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xShmLock(p->pf_real, off, n, flags);
}

static void pcut_shm_barrier(sqlite3_file *f)
{
	struct pcut_file *p = (struct pcut_file *)f;

	p->pf_real->pMethods->xShmBarrier(p->pf_real);
}

static int pcut_shm_unmap(sqlite3_file *f, int del)
{
	struct pcut_file *p = (struct pcut_file *)f;

	return p->pf_real->pMethods->xShmUnmap(p->pf_real, del);
}

static const sqlite3_io_methods pcut_io = {
	.iVersion = 2,
	.xClose = pcut_close,
	.xRead = pcut_read,
	.xWrite = pcut_write,
	.xTruncate = pcut_truncate,
	.xSync = pcut_sync,
	.xFileSize = pcut_file_size,
	.xLock = pcut_lock,
	.xUnlock = pcut_unlock,
	.xCheckReservedLock = pcut_check_reserved,
	.xFileControl = pcut_file_control,
	.xSectorSize = pcut_sector_size,
	.xDeviceCharacteristics = pcut_device_chars,
	.xShmMap = pcut_shm_map,
	.xShmLock = pcut_shm_lock,
	.xShmBarrier = pcut_shm_barrier,
	.xShmUnmap = pcut_shm_unmap,
};

static int pcut_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags,
		     int *out_flags)
{
	struct pcut_file *p = (struct pcut_file *)f;
	bool existed = name && access(name, F_OK) == 0;
	int rc;

	(void)vfs;
	p->pf_path = name;
	p->pf_real = (sqlite3_file *)(p + 1);
	rc = pcut_real_vfs->xOpen(pcut_real_vfs, name, p->pf_real, flags, out_flags);
	if (rc != SQLITE_OK) {
		f->pMethods = NULL;
		return rc;
	}
	if (name && !existed)
		orch_pcut_created(name);
	f->pMethods = &pcut_io;
	return SQLITE_OK;
}

static int pcut_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
	(void)vfs;
	orch_pcut_unlink(name);
	return pcut_real_vfs->xDelete(pcut_real_vfs, name, sync_dir);
}

static int pcut_access(sqlite3_vfs *vfs, const char *name, int flags, int *out)
{
	(void)vfs;
	return pcut_real_vfs->xAccess(pcut_real_vfs, name, flags, out);
}

static int pcut_full_path(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
	(void)vfs;
	return pcut_real_vfs->xFullPathname(pcut_real_vfs, name, n, out);
}

static int pcut_randomness(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return pcut_real_vfs->xRandomness(pcut_real_vfs, n, out);
}

static int pcut_sleep(sqlite3_vfs *vfs, int us)
{
	(void)vfs;
	return pcut_real_vfs->xSleep(pcut_real_vfs, us);
}

static int pcut_current_time(sqlite3_vfs *vfs, double *out)
{
	(void)vfs;
	return pcut_real_vfs->xCurrentTime(pcut_real_vfs, out);
}

static int pcut_last_error(sqlite3_vfs *vfs, int n, char *out)
{
	(void)vfs;
	return pcut_real_vfs->xGetLastError(pcut_real_vfs, n, out);
}

static sqlite3_vfs pcut_vfs = {
	.iVersion = 1,
	.mxPathname = 4096,
	.zName = "orch-pcut",
	.xOpen = pcut_open,
	.xDelete = pcut_delete,
	.xAccess = pcut_access,
	.xFullPathname = pcut_full_path,
	.xRandomness = pcut_randomness,
	.xSleep = pcut_sleep,
	.xCurrentTime = pcut_current_time,
	.xGetLastError = pcut_last_error,
};

int orch_pcut_vfs_register(void)
{
	if (!orch_pcut_enabled() || pcut_real_vfs)
		return 0;
	pcut_real_vfs = sqlite3_vfs_find(NULL);
	if (!pcut_real_vfs)
		return -EIO;
	pcut_vfs.szOsFile = (int)sizeof(struct pcut_file) + pcut_real_vfs->szOsFile;
	pcut_vfs.mxPathname = pcut_real_vfs->mxPathname;
	return sqlite3_vfs_register(&pcut_vfs, 1) == SQLITE_OK ? 0 : -EIO;
}
