/* Power-cut simulation.  See pcut.h. */
#include "common/pcut.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fault.h"
#include "common/log.h"

bool orch_pcut_on;

enum pcut_kind {
	PCUT_WRITE,   /* old bytes at off (pc_len of them existed) and old size */
	PCUT_CREATE,  /* the file did not exist */
	PCUT_UNLINK,  /* the whole old file */
};

struct pcut_rec {
	enum pcut_kind pc_kind;
	char *pc_path;
	uint64_t pc_off;
	size_t pc_len;          /* bytes saved in pc_old */
	uint64_t pc_old_size;   /* size before the change */
	uint8_t *pc_old;
	uint64_t pc_seq;
	struct pcut_rec *pc_next; /* newer first */
};

static pthread_mutex_t pcut_lock = PTHREAD_MUTEX_INITIALIZER;
static _Noreturn void pcut_cut_locked(void);
static struct pcut_rec *pcut_recs; /* protected by pcut_lock */
static uint64_t pcut_seq;          /* protected by pcut_lock */
static uint64_t pcut_writes;       /* protected by pcut_lock */
static uint64_t pcut_at;           /* cut at this write; 0 = never */
static char pcut_point_name[64];   /* cut at this named point ... */
static uint64_t pcut_point_left;   /* ... when reached this many more times (protected) */

void orch_pcut_init(void)
{
	const char *on = orch_fault_env(ORCH_FAULT_PCUT), *at = orch_fault_env(ORCH_FAULT_PCUT_AT);
	const char *point = orch_fault_env(ORCH_FAULT_PCUT_POINT);

	orch_pcut_on = on && strcmp(on, "1") == 0;
	if (orch_pcut_on && at)
		pcut_at = strtoull(at, NULL, 10);
	if (orch_pcut_on && point) {
		const char *colon = strchr(point, ':');
		size_t len = colon ? (size_t)(colon - point) : strlen(point);

		if (len < sizeof(pcut_point_name)) {
			memcpy(pcut_point_name, point, len);
			pcut_point_name[len] = '\0';
			pcut_point_left = colon ? strtoull(colon + 1, NULL, 10) : 1;
		}
	}
	if (orch_pcut_on)
		ORCH_NOTICE("power-cut simulation on: cut_at_write=%llu cut_at_point=%s:%llu",
			    (unsigned long long)pcut_at, pcut_point_name[0] ? pcut_point_name : "-",
			    (unsigned long long)pcut_point_left);
}

void orch_pcut_point_reached(const char *name)
{
	if (!pcut_point_name[0] || strcmp(name, pcut_point_name) != 0)
		return;
	pthread_mutex_lock(&pcut_lock);
	if (pcut_point_left && --pcut_point_left == 0) {
		ORCH_NOTICE("power cut at point %s", name);
		pcut_cut_locked();
	}
	pthread_mutex_unlock(&pcut_lock);
}

/*
 * Saves up to @len bytes at @off of the file @rd reads; returns the bytes
 * saved.  The old bytes are read through the caller's own handle, never by
 * opening the file again: closing any descriptor of a file drops every
 * POSIX lock the process holds on it (fcntl(2)), and with SQLite's locks
 * gone another process could checkpoint and delete the WAL under a server
 * that still writes to it.
 */
static size_t pcut_save(const struct orch_pcut_reader *rd, uint64_t off, size_t len,
			uint8_t **out, uint64_t *size)
{
	size_t n = 0;

	*out = NULL;
	*size = 0;
	if (rd->size(rd->arg, size) != 0)
		return 0;
	if (off < *size) {
		n = (size_t)(*size - off < len ? *size - off : len);
		*out = malloc(n ? n : 1);
		if (!*out || rd->read(rd->arg, *out, n, off) != 0) {
			ORCH_ERR("power-cut: cannot save the old bytes of a file");
			abort();
		}
	}
	return n;
}

static int pcut_fd_size(void *arg, uint64_t *size)
{
	struct stat st;

	if (fstat(*(int *)arg, &st) != 0)
		return -errno;
	*size = (uint64_t)st.st_size;
	return 0;
}

static int pcut_fd_read(void *arg, void *buf, size_t len, uint64_t off)
{
	return pread(*(int *)arg, buf, len, (off_t)off) == (ssize_t)len ? 0 : -EIO;
}

static void pcut_add(enum pcut_kind kind, const char *path, uint64_t off, size_t len,
		     const struct orch_pcut_reader *rd)
{
	struct pcut_rec *r = calloc(1, sizeof(*r));

	if (!r || !(r->pc_path = strdup(path))) {
		ORCH_ERR("power-cut: out of memory");
		abort();
	}
	r->pc_kind = kind;
	r->pc_off = off;
	if (kind != PCUT_CREATE)
		r->pc_len = pcut_save(rd, off, len, &r->pc_old, &r->pc_old_size);
	pthread_mutex_lock(&pcut_lock);
	r->pc_seq = ++pcut_seq;
	r->pc_next = pcut_recs;
	pcut_recs = r;
	if (kind == PCUT_WRITE && pcut_at && ++pcut_writes >= pcut_at)
		pcut_cut_locked();
	pthread_mutex_unlock(&pcut_lock);
}

static int pcut_fd_path(int fd, char *path, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, path, len - 1);
	if (n < 0)
		return -errno;
	path[n] = '\0';
	return 0;
}

void orch_pcut_write_via(const char *path, uint64_t off, size_t len,
			 const struct orch_pcut_reader *rd)
{
	if (orch_pcut_on)
		pcut_add(PCUT_WRITE, path, off, len, rd);
}

void orch_pcut_write_fd(int fd, uint64_t off, size_t len)
{
	char path[PATH_MAX];
	struct orch_pcut_reader rd = { pcut_fd_size, pcut_fd_read, &fd };

	if (orch_pcut_on && pcut_fd_path(fd, path, sizeof(path)) == 0)
		pcut_add(PCUT_WRITE, path, off, len, &rd);
}

/* Truncation saves the tail it cuts (from @size to the end). */
void orch_pcut_truncate_via(const char *path, uint64_t size, const struct orch_pcut_reader *rd)
{
	if (orch_pcut_on)
		pcut_add(PCUT_WRITE, path, size, SIZE_MAX, rd);
}

void orch_pcut_created(const char *path)
{
	if (orch_pcut_on)
		pcut_add(PCUT_CREATE, path, 0, 0, NULL);
}

/*
 * A file about to be unlinked has to be opened to be saved.  That is safe
 * for the files deleted here (SQLite's WAL and journals, which it never
 * locks), not for a file the process holds locks on.
 */
void orch_pcut_unlink(const char *path)
{
	int fd;
	struct orch_pcut_reader rd = { pcut_fd_size, pcut_fd_read, &fd };

	if (!orch_pcut_on)
		return;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return; /* nothing there to put back */
	pcut_add(PCUT_UNLINK, path, 0, SIZE_MAX, &rd);
	close(fd);
}

uint64_t orch_pcut_mark(void)
{
	uint64_t mark;

	if (!orch_pcut_on)
		return 0;
	pthread_mutex_lock(&pcut_lock);
	mark = pcut_seq;
	pthread_mutex_unlock(&pcut_lock);
	return mark;
}

static void pcut_free(struct pcut_rec *r)
{
	free(r->pc_path);
	free(r->pc_old);
	free(r);
}

static void pcut_forget(const char *path, uint64_t upto)
{
	struct pcut_rec **pp;

	pthread_mutex_lock(&pcut_lock);
	for (pp = &pcut_recs; *pp;) {
		struct pcut_rec *r = *pp;

		if (r->pc_seq <= upto && (!path || strcmp(r->pc_path, path) == 0)) {
			*pp = r->pc_next;
			pcut_free(r);
		} else {
			pp = &r->pc_next;
		}
	}
	pthread_mutex_unlock(&pcut_lock);
}

void orch_pcut_synced_upto(const char *path, uint64_t mark)
{
	if (orch_pcut_on)
		pcut_forget(path, mark);
}

/* Undoes one record.  Runs in the cutting child: async-signal-safe calls only. */
static void pcut_undo(const struct pcut_rec *r)
{
	int fd;

	switch (r->pc_kind) {
	case PCUT_CREATE:
		unlink(r->pc_path);
		return;
	case PCUT_UNLINK:
		fd = open(r->pc_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
		break;
	case PCUT_WRITE:
	default:
		fd = open(r->pc_path, O_WRONLY | O_CLOEXEC);
		break;
	}
	if (fd < 0)
		return; /* unlinked later and put back by an older record, or never there */
	/* In the cutting child: no logging (not async-signal-safe). */
	if (r->pc_len)
		(void)!pwrite(fd, r->pc_old, r->pc_len, (off_t)r->pc_off);
	(void)!ftruncate(fd, (off_t)r->pc_old_size);
	close(fd);
}

/*
 * Other threads may be inside a write whose record is already made.  So the
 * undo cannot run here: a child process, forked with the records, waits until
 * this whole process is gone (its pipe reads EOF once every thread has
 * exited and the descriptors are closed), then puts the files back and
 * creates the file named by ORCH_PCUT_DONE, which tests wait for.  The child
 * only makes async-signal-safe calls.
 */
static _Noreturn void pcut_cut_locked(void)
{
	const char *done = orch_fault_env(ORCH_FAULT_PCUT_DONE);
	unsigned int n = 0;
	int pfd[2];
	char c;

	for (struct pcut_rec *r = pcut_recs; r; r = r->pc_next)
		n++;
	ORCH_NOTICE("power cut: %u unsynced changes dropped", n);
	if (pipe(pfd) < 0) {
		ORCH_ERR("power-cut: cannot make a pipe");
		abort();
	}
	if (fork() == 0) {
		/*
		 * Hold nothing of the dead server's but the pipe: an inherited
		 * descriptor would keep its locks (the store's flock) past the
		 * done file.
		 */
		close(pfd[1]);
		if (pfd[0] > 3)
			close_range(3, (unsigned int)pfd[0] - 1, 0);
		close_range((unsigned int)pfd[0] + 1, ~0u, 0);
		while (read(pfd[0], &c, 1) > 0)
			;
		for (struct pcut_rec *r = pcut_recs; r; r = r->pc_next)
			pcut_undo(r);
		if (done) {
			int fd = open(done, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

			if (fd >= 0)
				close(fd);
		}
		_exit(0);
	}
	_exit(137);
}

_Noreturn void orch_pcut_cut(void)
{
	pthread_mutex_lock(&pcut_lock);
	pcut_cut_locked();
}
