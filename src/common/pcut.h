/*
 * Power-cut simulation, for crash tests (SQLite's test6.c, littlefs's emubd).
 *
 * When enabled (environment ORCH_PCUT=1, read once by orch_pcut_init()),
 * every write, truncate, create and unlink that the namespace (through a
 * SQLite VFS shim, meta/vfs_pcut.c) and the store make is first recorded
 * with what it overwrites.  A sync of a file forgets that file's records; a
 * sync of everything (the store's syncfs) forgets all records made before it
 * started.  A cut (orch_pcut_cut) puts back, newest first, everything not yet
 * synced and kills the process: the files are left exactly as a power loss
 * at that instant could have left them, with nothing written since the last
 * sync.  A cut happens at the N-th recorded write if ORCH_PCUT_AT=N, when
 * the server gets SIGUSR2, or at a named point of the code (a step of a
 * cross-server intent, say) if ORCH_PCUT_POINT=NAME or NAME:N (the N-th
 * time it is reached; orch_pcut_point).
 *
 * Disabled, each hook is one predictable branch.  Any thread; the records
 * are protected by one mutex.
 */
#ifndef ORCH_COMMON_PCUT_H
#define ORCH_COMMON_PCUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern bool orch_pcut_on;

/* Reads ORCH_PCUT and ORCH_PCUT_AT.  Call once, before other threads start. */
void orch_pcut_init(void);

static inline bool orch_pcut_enabled(void)
{
	return orch_pcut_on;
}

/*
 * How the simulation reads what a change is about to overwrite: through the
 * caller's own handle of the file, never by opening it again, since closing
 * any descriptor of a file drops every POSIX lock the process holds on it
 * (SQLite's among them).  Each returns 0 or a negative errno.
 */
struct orch_pcut_reader {
	int (*size)(void *arg, uint64_t *size);
	int (*read)(void *arg, void *buf, size_t len, uint64_t off);
	void *arg;
};

/* Before writing @len bytes at @off of @path (read by @rd), or of the file
 * open on @fd (which must be open for reading). */
void orch_pcut_write_via(const char *path, uint64_t off, size_t len,
			 const struct orch_pcut_reader *rd);
void orch_pcut_write_fd(int fd, uint64_t off, size_t len);
/* Before setting the size to @size (also before a hole punch). */
void orch_pcut_truncate_via(const char *path, uint64_t size, const struct orch_pcut_reader *rd);
/* Before punching [off, off+len): same record as a write. */
#define orch_pcut_punch_fd orch_pcut_write_fd
/* After creating @path (it did not exist before). */
void orch_pcut_created(const char *path);
/* Before unlinking @path. */
void orch_pcut_unlink(const char *path);

/* A sync starts: returns a mark for orch_pcut_synced_upto(). */
uint64_t orch_pcut_mark(void);
/*
 * A sync of @path that began at @mark (orch_pcut_mark) finished: forget its
 * records made before the mark, keep those written while it ran.
 */
void orch_pcut_synced_upto(const char *path, uint64_t mark);

/*
 * Registers a SQLite VFS shim (common/pcut_vfs.c) as the default, so every
 * database opened afterwards goes through the simulation.  A no-op unless
 * the simulation is on; call after orch_pcut_init(), before opening.
 */
int orch_pcut_vfs_register(void);

/*
 * A named crash point: cuts here if ORCH_PCUT_POINT names it (and this is
 * its N-th time).  docs/DESIGN.md ("Intents") lists the points of the
 * cross-server steps.
 */
void orch_pcut_point_reached(const char *name);
static inline void orch_pcut_point(const char *name)
{
	if (orch_pcut_on)
		orch_pcut_point_reached(name);
}

/* Puts back every unsynced change and ends the process with status 137. */
_Noreturn void orch_pcut_cut(void);

#endif
