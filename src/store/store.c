/*
 * Interim data store backend: one sparse file per object.
 *
 *   data_dir/data/format                 "orchard-store 1\n", written by mkfs
 *   data_dir/data/<hh>/<hhhhhhhhhhhhhhhh> object h: low byte of h, then all of h
 *
 * The directory level uses the handle's low byte because the top 16 bits are
 * the server index (the same for every object here) while the low bits count
 * up, so consecutive files spread evenly over the 256 directories.
 *
 * The file system does the real work: sparse files give holes, ftruncate
 * sizes, fallocate(PUNCH_HOLE) frees ranges, syncfs gives durability.  What
 * this file adds is the naming, an LRU cache of open descriptors (so a
 * stream of small writes does not pay an open and close each) and the
 * object count.  The extent store that replaces it keeps store.h unchanged.
 */
#include <assert.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/log.h"
#include "common/pcut.h"
#include "common/util.h"
#include "store/store.h"

static_assert(sizeof(off_t) == 8, "object offsets need a 64-bit off_t");

#define STORE_FORMAT_VERSION 1
#define STORE_FORMAT_NAME "format"
#define STORE_FORMAT_MAGIC "orchard-store "

/* Open descriptors kept; well under the default RLIMIT_NOFILE of 1024. */
#define STORE_FD_CACHE 256
#define STORE_FD_HASH_BITS 9
#define STORE_FD_BUCKETS (1u << STORE_FD_HASH_BITS)

/* "hh/" + 16 hex digits + NUL */
#define STORE_NAME_LEN 20

struct store_fd {
	uint64_t f_handle;              /* object the descriptor is open on */
	int f_fd;                       /* -1 while the slot is free */
	struct store_fd *f_hnext;       /* hash chain */
	struct store_fd *f_prev;        /* LRU list, most recent after head */
	struct store_fd *f_next;        /* LRU list, or the free list */
};

struct orch_store {
	char *st_path;                  /* data_dir, for log lines */
	int st_dirfd;                   /* data_dir: syncfs target */
	int st_datafd;                  /* data_dir/data: flock()ed, base of names */
	bool st_sync_data;              /* data/ is another file system: syncfs both */
	uint64_t st_objects;            /* objects in the store */
	struct orch_store_stats st_stats;

	/* fd cache: loop thread only */
	struct store_fd st_fds[STORE_FD_CACHE];
	struct store_fd *st_hash[STORE_FD_BUCKETS];
	struct store_fd st_lru;         /* sentinel: next = newest, prev = oldest */
	struct store_fd *st_free;       /* free slots, chained by f_next */

	pthread_mutex_t st_sync_lock;   /* serialises orch_store_sync */
	int st_sync_err;                /* sticky sync failure; by st_sync_lock */
};

/* --- Names ----------------------------------------------------------------- */

static void store_obj_name(uint64_t h, char name[STORE_NAME_LEN])
{
	snprintf(name, STORE_NAME_LEN, "%02x/%016llx", (unsigned int)(h & 0xff),
		 (unsigned long long)h);
}

static bool store_is_hex_name(const char *s, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		char c = s[i];

		if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
			return false;
	}
	return s[n] == '\0';
}

/* --- Descriptor cache ------------------------------------------------------ */

static unsigned int store_fd_hash(uint64_t h)
{
	return (unsigned int)((h * 0x9e3779b97f4a7c15ull) >>
			      (64 - STORE_FD_HASH_BITS));
}

static void store_fdc_init(struct orch_store *st)
{
	int i;

	st->st_lru.f_next = st->st_lru.f_prev = &st->st_lru;
	st->st_free = NULL;
	for (i = STORE_FD_CACHE - 1; i >= 0; i--) {
		st->st_fds[i].f_fd = -1;
		st->st_fds[i].f_next = st->st_free;
		st->st_free = &st->st_fds[i];
	}
}

static void store_lru_unlink(struct store_fd *f)
{
	f->f_prev->f_next = f->f_next;
	f->f_next->f_prev = f->f_prev;
}

static void store_lru_push(struct orch_store *st, struct store_fd *f)
{
	f->f_prev = &st->st_lru;
	f->f_next = st->st_lru.f_next;
	st->st_lru.f_next->f_prev = f;
	st->st_lru.f_next = f;
}

static struct store_fd *store_fdc_lookup(struct orch_store *st, uint64_t h)
{
	struct store_fd *f;

	for (f = st->st_hash[store_fd_hash(h)]; f; f = f->f_hnext) {
		if (f->f_handle == h) {
			store_lru_unlink(f);
			store_lru_push(st, f);
			return f;
		}
	}
	return NULL;
}

/*
 * Closes the slot's descriptor.  A close error is only logged: a write-back
 * failure behind it is also recorded on the file system and reported by the
 * next orch_store_sync, which is what the durability contract rests on.
 */
static void store_fdc_remove(struct orch_store *st, struct store_fd *f)
{
	struct store_fd **pp = &st->st_hash[store_fd_hash(f->f_handle)];

	while (*pp != f)
		pp = &(*pp)->f_hnext;
	*pp = f->f_hnext;
	store_lru_unlink(f);
	if (close(f->f_fd) < 0 && errno != EINTR)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "cannot close object: handle=%016llx: %s",
				   (unsigned long long)f->f_handle,
				   strerror(errno));
	f->f_fd = -1;
	f->f_next = st->st_free;
	st->st_free = f;
}

/* Closes the least recently used descriptor.  False if none is open. */
static bool store_fdc_evict(struct orch_store *st)
{
	if (st->st_lru.f_prev == &st->st_lru)
		return false;
	store_fdc_remove(st, st->st_lru.f_prev);
	return true;
}

static void store_fdc_insert(struct orch_store *st, uint64_t h, int fd)
{
	struct store_fd *f;
	unsigned int b = store_fd_hash(h);

	if (!st->st_free)
		store_fdc_evict(st);
	f = st->st_free;
	st->st_free = f->f_next;
	f->f_handle = h;
	f->f_fd = fd;
	f->f_hnext = st->st_hash[b];
	st->st_hash[b] = f;
	store_lru_push(st, f);
}

static void store_fdc_drop(struct orch_store *st, uint64_t h)
{
	struct store_fd *f = store_fdc_lookup(st, h);

	if (f)
		store_fdc_remove(st, f);
}

/* --- Opening objects ------------------------------------------------------- */

/*
 * openat() under data/, giving back cached descriptors when the process is
 * out of them: the cache is the server's biggest user of descriptors, so a
 * busy server should not refuse a write for want of one.
 */
static int store_openat(struct orch_store *st, const char *name, int flags)
{
	for (;;) {
		int fd = openat(st->st_datafd, name, flags | O_CLOEXEC, 0640);

		if (fd >= 0)
			return fd;
		if ((errno == EMFILE || errno == ENFILE) && store_fdc_evict(st))
			continue;
		return -errno;
	}
}

/*
 * Gives the descriptor of object @h, from the cache or opened (and cached).
 * With @create an absent object is created (and its directory if needed);
 * without, an absent object is -ENOENT.  The descriptor belongs to the cache:
 * valid until the next call that may open or drop one.
 */
static int store_obj_fd(struct orch_store *st, uint64_t h, bool create,
			int *fdp)
{
	char name[STORE_NAME_LEN];
	struct store_fd *f;
	int tries, fd = -ENOENT;
	bool created = false;

	f = store_fdc_lookup(st, h);
	if (f) {
		*fdp = f->f_fd;
		return 0;
	}
	store_obj_name(h, name);
	/*
	 * Open first, since most objects exist; then create.  The loop covers
	 * a missing directory and the object appearing in between; it is
	 * bounded because both are only ever undone by a delete, which the
	 * one loop thread is not running.
	 */
	for (tries = 0; tries < 4; tries++) {
		fd = store_openat(st, name, O_RDWR);
		if (fd != -ENOENT || !create)
			break;
		fd = store_openat(st, name, O_RDWR | O_CREAT | O_EXCL);
		if (fd >= 0) {
			created = true;
			break;
		}
		if (fd == -ENOENT) {
			name[2] = '\0';
			if (mkdirat(st->st_datafd, name, 0750) < 0 &&
			    errno != EEXIST)
				fd = -errno;
			name[2] = '/';
			if (fd != -ENOENT)
				break;
		} else if (fd != -EEXIST) {
			break;
		}
	}
	if (fd < 0)
		return fd;
	if (created) {
		orch_pcut_created_fd(fd);
		st->st_objects++;
		st->st_stats.objects_created++;
	}
	store_fdc_insert(st, h, fd);
	*fdp = fd;
	return 0;
}

/* Logs an I/O failure; full disks and bad requests are not operator errors. */
static void store_log_io(const char *what, uint64_t h, uint64_t off, int error)
{
	if (error == -EFBIG || error == -EINVAL)
		return;
	if (error == -ENOSPC || error == -EDQUOT)
		ORCH_LOG_RATELIMIT(ORCH_LOG_WARN,
				   "data store full: op=%s handle=%016llx off=%llu: %s",
				   what, (unsigned long long)h,
				   (unsigned long long)off, strerror(-error));
	else
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR,
				   "cannot %s object: handle=%016llx off=%llu: %s",
				   what, (unsigned long long)h,
				   (unsigned long long)off, strerror(-error));
}

/* --- Object I/O ------------------------------------------------------------ */

int orch_store_write(struct orch_store *st, uint64_t h, uint64_t off,
		     const void *buf, size_t len)
{
	const char *p = buf;
	size_t done = 0;
	int error, fd;

	if (len == 0)
		return 0;
	if (off > ORCH_STORE_MAX_SIZE || len > ORCH_STORE_MAX_SIZE - off)
		return -EFBIG;
	error = store_obj_fd(st, h, true, &fd);
	if (error)
		goto out_log;
	orch_pcut_write_fd(fd, off, len);
	while (done < len) {
		ssize_t n = pwrite(fd, p + done, len - done,
				   (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			error = -errno;
			break;
		}
		if (n == 0) {
			/* No progress and no errno: never loop on it. */
			error = -EIO;
			break;
		}
		done += (size_t)n;
	}
	st->st_stats.bytes_written += done;
	if (!error)
		return 0;
out_log:
	store_log_io("write", h, off + done, error);
	return error;
}

int orch_store_read(struct orch_store *st, uint64_t h, uint64_t off, void *buf,
		    size_t len, size_t *got)
{
	char *p = buf;
	size_t done = 0;
	int error, fd;

	*got = 0;
	if (off >= ORCH_STORE_MAX_SIZE || len == 0)
		return 0;
	len = ORCH_MIN(len, ORCH_STORE_MAX_SIZE - off);
	error = store_obj_fd(st, h, false, &fd);
	if (error == -ENOENT)
		return 0;
	if (error)
		goto out_log;
	while (done < len) {
		ssize_t n = pread(fd, p + done, len - done, (off_t)(off + done));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			error = -errno;
			goto out_log;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	st->st_stats.bytes_read += done;
	*got = done;
	return 0;
out_log:
	store_log_io("read", h, off + done, error);
	return error;
}

int orch_store_truncate(struct orch_store *st, uint64_t h, uint64_t size)
{
	int error, fd;

	if (size > ORCH_STORE_MAX_SIZE)
		return -EFBIG;
	error = store_obj_fd(st, h, size > 0, &fd);
	if (error == -ENOENT && size == 0)
		return 0;
	if (error)
		goto out_log;
	orch_pcut_truncate_fd(fd, size);
	while (ftruncate(fd, (off_t)size) < 0) {
		if (errno != EINTR) {
			error = -errno;
			goto out_log;
		}
	}
	return 0;
out_log:
	store_log_io("truncate", h, size, error);
	return error;
}

/*
 * For file systems without hole punching: write zeros over the range.  Slow
 * for big ranges, but only such file systems pay it, and reads stay right.
 */
static int store_zero_range(int fd, uint64_t off, uint64_t end)
{
	static const char zeros[65536];

	while (off < end) {
		size_t n = (size_t)ORCH_MIN(end - off, (uint64_t)sizeof(zeros));
		ssize_t w = pwrite(fd, zeros, n, (off_t)off);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		off += (uint64_t)w;
	}
	return 0;
}

int orch_store_punch(struct orch_store *st, uint64_t h, uint64_t off,
		     uint64_t len)
{
	struct stat sb;
	uint64_t end;
	int error, fd;

	if (len == 0 || off >= ORCH_STORE_MAX_SIZE)
		return 0;
	error = store_obj_fd(st, h, false, &fd);
	if (error == -ENOENT)
		return 0;
	if (error)
		goto out_log;
	/*
	 * Clip to the size: nothing past it holds data, and a range past the
	 * file system's largest offset would fail with EFBIG for no reason.
	 */
	if (fstat(fd, &sb) < 0) {
		error = -errno;
		goto out_log;
	}
	if (sb.st_size < 0 || off >= (uint64_t)sb.st_size)
		return 0;
	end = off + ORCH_MIN(len, (uint64_t)sb.st_size - off);
	orch_pcut_punch_fd(fd, off, (size_t)(end - off));
	while (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			 (off_t)off, (off_t)(end - off)) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EOPNOTSUPP || errno == ENOSYS) {
			ORCH_LOG_ONCE(ORCH_LOG_WARN,
				      "file system cannot punch holes, writing zeros: dir='%s'",
				      st->st_path);
			error = store_zero_range(fd, off, end);
			if (error)
				goto out_log;
			return 0;
		}
		error = -errno;
		goto out_log;
	}
	return 0;
out_log:
	store_log_io("punch", h, off, error);
	return error;
}

/*
 * The cached descriptor goes first: a read through it would still see the
 * unlinked file's data, and a write through it would be lost.
 */
int orch_store_delete(struct orch_store *st, uint64_t h)
{
	char name[STORE_NAME_LEN];

	store_fdc_drop(st, h);
	store_obj_name(h, name);
	if (orch_pcut_enabled()) {
		char path[PATH_MAX];

		snprintf(path, sizeof(path), "%s/data/%s", st->st_path, name);
		orch_pcut_unlink(path);
	}
	if (unlinkat(st->st_datafd, name, 0) < 0) {
		int error = -errno;

		if (error == -ENOENT)
			return 0;
		store_log_io("delete", h, 0, error);
		return error;
	}
	if (st->st_objects)
		st->st_objects--;
	st->st_stats.objects_deleted++;
	return 0;
}

/* --- Durability ------------------------------------------------------------ */

/*
 * syncfs(2) flushes the whole file system under data_dir: every object's
 * data and metadata, the directory entries of creates and deletes, and
 * meta.db with its WAL, in one call and with no list of dirty objects to
 * keep.  Since Linux 5.8 it reports write-back errors that happened since
 * the descriptor was opened (or last synced); st_dirfd is opened by
 * orch_store_open, so nothing since then is missed.  It is the only fd this
 * touches, and it does not change while the store is open, so the loop
 * thread can go on meanwhile.  Write-back failure means the page cache
 * dropped data a client may have been told is safe; a later syncfs would
 * report success, so the failure is kept (PostgreSQL's "fsyncgate" lesson).
 */
int orch_store_sync(struct orch_store *st)
{
	uint64_t mark = orch_pcut_mark();
	int error;

	pthread_mutex_lock(&st->st_sync_lock);
	error = st->st_sync_err;
	if (error)
		goto out_unlock;
	if (syncfs(st->st_dirfd) < 0 ||
	    (st->st_sync_data && syncfs(st->st_datafd) < 0)) {
		error = -errno;
		st->st_sync_err = error;
		ORCH_ERR("cannot sync data store, data may be lost: dir='%s': %s",
			 st->st_path, strerror(-error));
	} else {
		orch_pcut_synced_all(mark);
	}
out_unlock:
	pthread_mutex_unlock(&st->st_sync_lock);
	return error;
}

/* --- Space and statistics -------------------------------------------------- */

int orch_store_statfs(struct orch_store *st, uint64_t *total,
		      uint64_t *free_bytes, uint64_t *avail, uint64_t *objects)
{
	struct statvfs sv;
	uint64_t bsize;

	if (fstatvfs(st->st_datafd, &sv) < 0)
		return -errno;
	bsize = sv.f_frsize ? sv.f_frsize : sv.f_bsize;
	if (total)
		*total = (uint64_t)sv.f_blocks * bsize;
	if (free_bytes)
		*free_bytes = (uint64_t)sv.f_bfree * bsize;
	if (avail)
		*avail = (uint64_t)sv.f_bavail * bsize;
	if (objects)
		*objects = st->st_objects;
	return 0;
}

void orch_store_get_stats(const struct orch_store *st,
			  struct orch_store_stats *out)
{
	*out = st->st_stats;
}

/* --- Lifecycle ------------------------------------------------------------- */

/*
 * Walks data/<hh>/ counting objects, or with @wipe deleting them and their
 * directories.  Entries that are not ours (other names) are left alone and
 * not counted.  Consumes nothing: @datafd stays open.
 */
static int store_scan(int datafd, bool wipe, uint64_t *count)
{
	struct dirent *de;
	DIR *d;
	int fd, error = 0;

	*count = 0;
	fd = openat(datafd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	d = fdopendir(fd);
	if (!d) {
		error = -errno;
		close(fd);
		return error;
	}
	for (;;) {
		struct dirent *se;
		DIR *sd;
		int sfd;

		errno = 0;
		de = readdir(d);
		if (!de) {
			error = -errno;
			break;
		}
		if (!store_is_hex_name(de->d_name, 2))
			continue;
		sfd = openat(datafd, de->d_name,
			     O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sfd < 0) {
			if (errno == ENOTDIR || errno == ELOOP)
				continue;
			error = -errno;
			break;
		}
		sd = fdopendir(sfd);
		if (!sd) {
			error = -errno;
			close(sfd);
			break;
		}
		for (;;) {
			errno = 0;
			se = readdir(sd);
			if (!se) {
				error = -errno;
				break;
			}
			if (!store_is_hex_name(se->d_name, 16))
				continue;
			if (!wipe) {
				(*count)++;
				continue;
			}
			if (unlinkat(sfd, se->d_name, 0) < 0 &&
			    errno != ENOENT) {
				error = -errno;
				break;
			}
		}
		closedir(sd);
		if (error)
			break;
		if (wipe && unlinkat(datafd, de->d_name, AT_REMOVEDIR) < 0 &&
		    errno != ENOENT && errno != ENOTEMPTY && errno != EEXIST) {
			error = -errno;
			break;
		}
	}
	closedir(d);
	return error;
}

/* flock() on data/ keeps two servers (or mkfs and a server) apart. */
static int store_lock(int datafd, const char *data_dir)
{
	while (flock(datafd, LOCK_EX | LOCK_NB) < 0) {
		if (errno == EINTR)
			continue;
		if (errno == EWOULDBLOCK) {
			ORCH_ERR("data store in use by another process or handle: dir='%s'",
				 data_dir);
			return -EBUSY;
		}
		return -errno;
	}
	return 0;
}

/* Opens data_dir and data_dir/data; -ENOENT if either is missing. */
static int store_open_dirs(const char *data_dir, int *dirfdp, int *datafdp)
{
	int dirfd, datafd, error;

	dirfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	datafd = openat(dirfd, "data", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (datafd < 0) {
		error = -errno;
		close(dirfd);
		return error;
	}
	*dirfdp = dirfd;
	*datafdp = datafd;
	return 0;
}

static int store_format_write(int datafd)
{
	char text[32];
	const char *tmp = STORE_FORMAT_NAME ".tmp";
	size_t len, done = 0;
	int fd, error = 0;

	len = (size_t)snprintf(text, sizeof(text), "%s%d\n", STORE_FORMAT_MAGIC,
			       STORE_FORMAT_VERSION);
	fd = openat(datafd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0)
		return -errno;
	while (done < len) {
		ssize_t n = write(fd, text + done, len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			error = -errno;
			goto out_unlink;
		}
		if (n == 0) {
			error = -EIO;
			goto out_unlink;
		}
		done += (size_t)n;
	}
	if (fsync(fd) < 0) {
		error = -errno;
		goto out_unlink;
	}
	close(fd);
	if (renameat(datafd, tmp, datafd, STORE_FORMAT_NAME) < 0) {
		error = -errno;
		unlinkat(datafd, tmp, 0);
	}
	return error;
out_unlink:
	close(fd);
	unlinkat(datafd, tmp, 0);
	return error;
}

/* Reads and checks data/format. */
static int store_format_check(int datafd, const char *data_dir)
{
	char text[64];
	size_t done = 0;
	char *end;
	unsigned long ver;
	int fd, error = 0;

	fd = openat(datafd, STORE_FORMAT_NAME, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (done < sizeof(text) - 1) {
		ssize_t n = read(fd, text + done, sizeof(text) - 1 - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			error = -errno;
			break;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	close(fd);
	if (error)
		return error;
	text[done] = '\0';
	if (strncmp(text, STORE_FORMAT_MAGIC, strlen(STORE_FORMAT_MAGIC)))
		goto out_corrupt;
	errno = 0;
	ver = strtoul(text + strlen(STORE_FORMAT_MAGIC), &end, 10);
	if (errno || end == text + strlen(STORE_FORMAT_MAGIC) || *end != '\n')
		goto out_corrupt;
	if (ver != STORE_FORMAT_VERSION) {
		ORCH_ERR("unsupported data store format: dir='%s' version=%lu want=%d",
			 data_dir, ver, STORE_FORMAT_VERSION);
		return -EPROTONOSUPPORT;
	}
	return 0;
out_corrupt:
	ORCH_ERR("corrupt data store format stamp: dir='%s' file='data/%s'",
		 data_dir, STORE_FORMAT_NAME);
	return -ORCH_ECORRUPT;
}

int orch_store_check_unused(const char *data_dir)
{
	char path[PATH_MAX];
	int fd, error;

	snprintf(path, sizeof(path), "%s/data", data_dir);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	error = store_lock(fd, data_dir);
	close(fd); /* drops the lock */
	return error;
}

int orch_store_mkfs(const char *data_dir, bool force)
{
	uint64_t count;
	int dirfd, datafd, error;

	if (mkdir(data_dir, 0750) < 0 && errno != EEXIST)
		return -errno;
	dirfd = open(data_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dirfd < 0)
		return -errno;
	if (mkdirat(dirfd, "data", 0750) < 0 && errno != EEXIST) {
		error = -errno;
		goto out_close_dir;
	}
	datafd = openat(dirfd, "data", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (datafd < 0) {
		error = -errno;
		goto out_close_dir;
	}
	error = store_lock(datafd, data_dir);
	if (error)
		goto out_close_data;
	error = store_scan(datafd, false, &count);
	if (error)
		goto out_close_data;
	if (count && !force) {
		ORCH_ERR("data store not empty, mkfs needs force: dir='%s' objects=%llu",
			 data_dir, (unsigned long long)count);
		error = -EEXIST;
		goto out_close_data;
	}
	if (count) {
		error = store_scan(datafd, true, &count);
		if (error)
			goto out_close_data;
	}
	error = store_format_write(datafd);
	if (error)
		goto out_close_data;
	/* The new directories, the wipe and the stamp, all at once. */
	if (syncfs(datafd) < 0)
		error = -errno;
out_close_data:
	close(datafd);
out_close_dir:
	close(dirfd);
	return error;
}

static void store_log_not_made(const char *data_dir)
{
	ORCH_ERR("data store not initialised, run orchard mkfs: dir='%s'",
		 data_dir);
}

int orch_store_open(const char *data_dir, struct orch_store **out)
{
	struct orch_store *st;
	struct stat dsb, ssb;
	int error;

	st = calloc(1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	st->st_path = strdup(data_dir);
	if (!st->st_path) {
		error = -ENOMEM;
		goto out_free;
	}
	error = store_open_dirs(data_dir, &st->st_dirfd, &st->st_datafd);
	if (error == -ENOENT)
		store_log_not_made(data_dir);
	if (error)
		goto out_free;
	error = store_lock(st->st_datafd, data_dir);
	if (error)
		goto out_close_dirs;
	error = store_format_check(st->st_datafd, data_dir);
	if (error == -ENOENT)
		store_log_not_made(data_dir);
	if (error)
		goto out_close_dirs;
	error = store_scan(st->st_datafd, false, &st->st_objects);
	if (error)
		goto out_close_dirs;
	if (fstat(st->st_dirfd, &dsb) < 0 || fstat(st->st_datafd, &ssb) < 0) {
		error = -errno;
		goto out_close_dirs;
	}
	st->st_sync_data = dsb.st_dev != ssb.st_dev;
	error = pthread_mutex_init(&st->st_sync_lock, NULL);
	if (error) {
		error = -error;
		goto out_close_dirs;
	}
	store_fdc_init(st);
	*out = st;
	return 0;
out_close_dirs:
	close(st->st_datafd);
	close(st->st_dirfd);
out_free:
	free(st->st_path);
	free(st);
	return error;
}

void orch_store_close(struct orch_store *st)
{
	if (!st)
		return;
	while (store_fdc_evict(st))
		;
	pthread_mutex_destroy(&st->st_sync_lock);
	close(st->st_datafd);
	close(st->st_dirfd);
	free(st->st_path);
	free(st);
}
