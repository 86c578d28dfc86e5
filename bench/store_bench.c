/*
 * The extent store against plain pwrite/pread on a file in the same
 * directory (so on the same disk), in one run:
 *
 *   1. large sequential writes: 1 MiB writes of one object / file up to
 *      SIZE, then one orch_store_sync / fdatasync;
 *   2. sequential 1 MiB reads of it after dropping the page cache;
 *   3. 4 KiB writes, no sync, from 1 and from 64 writer threads (each its
 *      own object, or its own region of the plain file);
 *   4. 4 KiB write + sync per operation, from 1 and from 64 writers (the
 *      store shares flushes between concurrent callers).
 *
 * Prints a table of both rates, the ratio store/plain against the targets
 * (large writes >= 70%, reads >= 80% (paired by round), write+fsync with
 * 64 writers >= 10x one writer), and the store's batching: operations per commit and
 * orch_store_sync calls per flush.  Before each read, the files either
 * side reads (the plain file; the store's blocks, store.db and its WAL)
 * are dropped from the page cache, and what stays resident is reported.
 *
 * Phases 1, 2 and 4 run --rounds times (default 3), plain and store taking
 * turns (phase 2 reads twice per round, A B B A), and report the median:
 * on a VM the disk's rates vary a lot from one run to the next.  Phase 3 runs once (50000 operations per run).
 * The default run takes 1.5 to 3 minutes, --quick about 30 s.
 *
 *   store-bench [-d DIR] [--size-mb N] [--quick] [--fsync-secs S]
 *               [--rounds N] [--json] [--json-file FILE] [--drop files|global]
 *               [--phases LIST]
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "store/store.h"

#define BIG_IO (1u << 20)
#define SMALL_IO 4096u
#define MANY 64
#define MAX_ROUNDS 9

enum { PLAIN, STORE };

/* Phases to run (--phases). */
enum { PH_LARGE = 1, PH_SMALL = 2, PH_FSYNC = 4, PH_ALL = 7 };

/* A rate measured for plain and store, and the store's counters over it. */
struct result {
	const char *key;          /* JSON name */
	const char *label;        /* table row */
	const char *unit;
	double rate[2];           /* indexed by PLAIN, STORE */
	long ops[2];
	double secs[2];
	bool capped[2];           /* stopped by the time limit */
	double rates[2][MAX_ROUNDS]; /* of each round */
	int nrounds[2];
	double t_write[2], t_sync[2]; /* phases 3, 4: seconds in the calls */
	struct orch_store_stats d; /* store counters: delta over the run */
	double paired;            /* reads: median of the rounds' ratios, or 0 */
};

enum {
	R_WRITE, R_READ, R_W1, R_W64, R_WS1, R_WS64, R_NR
};

struct bench {
	char dir[4096];
	char plain_path[4200];
	char store_path[4200];
	bool made_dir;
	uint64_t size;            /* bytes of phases 1 and 2 */
	long small_ops;           /* phase 3: operations per run */
	double small_secs;        /* phase 3: time limit per run */
	double fsync_secs;        /* phase 4: seconds per run */
	long fsync_cap;           /* phase 4: operations per run at most */
	int rounds;               /* of phases 1 and 2 */
	bool quick, json;
	bool drop_global;         /* --drop global: also /proc/sys/vm/drop_caches */
	char drop_note[160];
	uint64_t resident_kib[2]; /* most left cached before a read, by side */
	unsigned int phases;      /* PH_* to run */
	double load;              /* 1-minute load average at the start */
	double others;            /* CPUs used by other processes, average */
	long ncpu;
	struct orch_store *st;
	int fd;
	uint64_t next_handle;
	struct result r[R_NR];
};

static struct bench *g_bench;

static double now_s(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_MONOTONIC, &ts)) {
		perror("store-bench: clock_gettime");
		exit(1);
	}
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int rm_entry(const char *path, const struct stat *sb, int type,
		    struct FTW *ftw)
{
	(void)sb;
	(void)type;
	(void)ftw;
	if (remove(path) && errno != ENOENT)
		fprintf(stderr, "store-bench: remove %s: %s\n", path,
			strerror(errno));
	return 0;
}

/* Removes the files this program made; the store itself must be closed. */
static void cleanup(struct bench *b)
{
	if (unlink(b->plain_path) && errno != ENOENT)
		fprintf(stderr, "store-bench: unlink %s: %s\n", b->plain_path,
			strerror(errno));
	if (nftw(b->store_path, rm_entry, 16, FTW_DEPTH | FTW_PHYS) &&
	    errno != ENOENT)
		fprintf(stderr, "store-bench: remove %s: %s\n", b->store_path,
			strerror(errno));
	if (b->made_dir && rmdir(b->dir))
		fprintf(stderr, "store-bench: rmdir %s: %s\n", b->dir,
			strerror(errno));
}

/* Reports @what and @error (-errno or 0 for errno), cleans up, exits 1. */
static void __attribute__((noreturn)) die(const char *what, int error)
{
	fprintf(stderr, "store-bench: %s: %s\n", what,
		strerror(error ? -error : errno));
	if (g_bench) {
		/* The store may be mid-operation: remove its files open. */
		cleanup(g_bench);
	}
	exit(1);
}

static void progress(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void progress(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fputs("store-bench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void fill_random(uint8_t *buf, size_t len, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i += 8) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		memcpy(buf + i, &x, len - i < 8 ? len - i : 8);
	}
}

static void *xaligned(size_t len)
{
	void *p = NULL;
	int error = posix_memalign(&p, 4096, len);

	if (error)
		die("posix_memalign", -error);
	return p;
}

/* A fresh, empty plain file. */
static void plain_create(struct bench *b)
{
	if (unlink(b->plain_path) && errno != ENOENT)
		die("unlink plain file", 0);
	b->fd = open(b->plain_path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		     0644);
	if (b->fd < 0)
		die("open plain file", 0);
}

static void plain_close(struct bench *b)
{
	if (close(b->fd))
		die("close plain file", 0);
	b->fd = -1;
}

/* Writes back everything dirty, so no run pays for the one before. */
static void settle(void)
{
	sync();
}

static void stats_add(struct orch_store_stats *d,
		      const struct orch_store_stats *x)
{
	d->bytes_written += x->bytes_written;
	d->bytes_read += x->bytes_read;
	d->ops += x->ops;
	d->commits += x->commits;
	d->syncs += x->syncs;
	d->sync_calls += x->sync_calls;
	d->csum_errors += x->csum_errors;
	d->checkpoints += x->checkpoints;
	d->checkpoint_us += x->checkpoint_us;
}

static void get_stats(struct bench *b, struct orch_store_stats *s)
{
	orch_store_get_stats(b->st, s);
}

static void stats_sub(struct orch_store_stats *d,
		      const struct orch_store_stats *a,
		      const struct orch_store_stats *z)
{
	d->bytes_written = z->bytes_written - a->bytes_written;
	d->bytes_read = z->bytes_read - a->bytes_read;
	d->ops = z->ops - a->ops;
	d->commits = z->commits - a->commits;
	d->syncs = z->syncs - a->syncs;
	d->sync_calls = z->sync_calls - a->sync_calls;
	d->csum_errors = z->csum_errors - a->csum_errors;
	d->checkpoints = z->checkpoints - a->checkpoints;
	d->checkpoint_us = z->checkpoint_us - a->checkpoint_us;
}

/* --- Phase 1: large sequential write --------------------------------------- */

static void set_mark(uint8_t *buf, uint64_t idx)
{
	memcpy(buf, &idx, sizeof(idx));
	memcpy(buf + BIG_IO - sizeof(idx), &idx, sizeof(idx));
}

static bool check_mark(const uint8_t *buf, uint64_t idx)
{
	uint64_t a, z;

	memcpy(&a, buf, sizeof(a));
	memcpy(&z, buf + BIG_IO - sizeof(z), sizeof(z));
	return a == idx && z == idx;
}

/* Phase 1, plain: 1 MiB pwrites into a fresh file, then fdatasync. */
static double write_plain(struct bench *b, uint8_t *buf)
{
	uint64_t n = b->size / BIG_IO;
	double t0;

	if (b->fd >= 0)
		plain_close(b);
	plain_create(b);
	settle();
	t0 = now_s();
	for (uint64_t i = 0; i < n; i++) {
		ssize_t w;

		set_mark(buf, i);
		w = pwrite(b->fd, buf, BIG_IO, (off_t)(i * BIG_IO));
		if (w < 0)
			die("pwrite plain file", 0);
		if (w != (ssize_t)BIG_IO)
			die("pwrite plain file: short write", -EIO);
	}
	if (fdatasync(b->fd))
		die("fdatasync plain file", 0);
	return now_s() - t0;
}

/* Phase 1, store: 1 MiB writes of a new object @h, then one sync. */
static double write_store(struct bench *b, uint8_t *buf, uint64_t h,
			  struct orch_store_stats *d)
{
	uint64_t n = b->size / BIG_IO;
	struct orch_store_stats s0, s1;
	double t0, t;
	int error;

	settle();
	get_stats(b, &s0);
	t0 = now_s();
	for (uint64_t i = 0; i < n; i++) {
		set_mark(buf, i);
		error = orch_store_write(b->st, h, i * BIG_IO, buf, BIG_IO);
		if (error)
			die("orch_store_write (large)", error);
	}
	error = orch_store_sync(b->st);
	if (error)
		die("orch_store_sync (large)", error);
	t = now_s() - t0;
	get_stats(b, &s1);
	stats_sub(d, &s0, &s1);
	return t;
}

/* The store's files a read goes to: the data, and the index it looks up. */
static const char *const store_files[] = { "blocks", "store.db", "store.db-wal" };
#define NSTORE_FILES (sizeof(store_files) / sizeof(store_files[0]))

static void store_file(const struct bench *b, size_t i, char *path, size_t len)
{
	snprintf(path, len, "%s/%s", b->store_path, store_files[i]);
}

static void drop_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
}

/* Adds the pages of @path in the page cache to *@in (mincore, 1 GiB at a time). */
static void count_resident(const char *path, uint64_t *in)
{
	static unsigned char vec[(1u << 30) / 4096];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat sb;

	if (fd < 0)
		return;
	if (fstat(fd, &sb) == 0) {
		for (off_t o = 0; o < sb.st_size; o += 1 << 30) {
			size_t len = (size_t)(sb.st_size - o < (1 << 30) ?
					      sb.st_size - o : (1 << 30));
			void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, o);

			if (p == MAP_FAILED)
				break;
			if (mincore(p, len, vec) == 0)
				for (size_t i = 0; i < (len + 4095) / 4096; i++)
					*in += vec[i] & 1;
			munmap(p, len);
		}
	}
	close(fd);
}

/* KiB of @kind's files still in the page cache. */
static uint64_t resident_kib(const struct bench *b, int kind)
{
	char path[4300];
	uint64_t in = 0;

	if (kind == PLAIN) {
		count_resident(b->plain_path, &in);
	} else {
		for (size_t i = 0; i < NSTORE_FILES; i++) {
			store_file(b, i, path, sizeof(path));
			count_resident(path, &in);
		}
	}
	return in * 4;
}

/*
 * Before a read of @kind: every file either side reads is written back and
 * dropped from the page cache, the plain file and all the store's (its
 * blocks, and store.db and its WAL, whose pages a cold read must fetch as
 * well).  With --drop global (and root), /proc/sys/vm/drop_caches is
 * written too; it drops every other process's cache as well, and their
 * reads back compete with the one measured.  What stays resident of
 * @kind's files is checked and reported, so neither side reads warm.
 */
static void drop_caches(struct bench *b, int kind)
{
	char path[4300];
	uint64_t kib;
	int fd, saved;
	ssize_t w;

	settle();
	if (b->drop_global) {
		fd = open("/proc/sys/vm/drop_caches", O_WRONLY | O_CLOEXEC);
		w = -1;
		saved = errno;
		if (fd >= 0) {
			w = write(fd, "3\n", 2);
			saved = errno;
			close(fd);
		}
		if (w != 2 && !b->drop_note[0]) {
			snprintf(b->drop_note, sizeof(b->drop_note),
				 "could not write /proc/sys/vm/drop_caches: %s; "
				 "dropped the files read only",
				 w < 0 ? strerror(saved) : "short write");
			fprintf(stderr, "store-bench: %s\n", b->drop_note);
		}
	}
	drop_file(b->plain_path);
	for (size_t i = 0; i < NSTORE_FILES; i++) {
		store_file(b, i, path, sizeof(path));
		drop_file(path);
	}
	kib = resident_kib(b, kind);
	if (kib > b->resident_kib[kind])
		b->resident_kib[kind] = kib;
}

/* Phase 2, plain: 1 MiB preads of the file write_plain made. */
static double read_plain(struct bench *b, uint8_t *buf)
{
	uint64_t n = b->size / BIG_IO;
	double t0;

	drop_caches(b, PLAIN);
	t0 = now_s();
	for (uint64_t i = 0; i < n; i++) {
		ssize_t g = pread(b->fd, buf, BIG_IO, (off_t)(i * BIG_IO));

		if (g < 0)
			die("pread plain file", 0);
		if (g != (ssize_t)BIG_IO || !check_mark(buf, i))
			die("pread plain file: short read or wrong data", -EIO);
	}
	return now_s() - t0;
}

/* Phase 2, store: 1 MiB reads of object @h. */
static double read_store(struct bench *b, uint8_t *buf, uint64_t h,
			 struct orch_store_stats *d)
{
	uint64_t n = b->size / BIG_IO;
	struct orch_store_stats s0, s1;
	double t0, t;
	size_t got;
	int error;

	drop_caches(b, STORE);
	get_stats(b, &s0);
	t0 = now_s();
	for (uint64_t i = 0; i < n; i++) {
		error = orch_store_read(b->st, h, i * BIG_IO, buf, BIG_IO, &got);
		if (error)
			die("orch_store_read", error);
		if (got != BIG_IO || !check_mark(buf, i))
			die("orch_store_read: short read or wrong data", -EIO);
	}
	t = now_s() - t0;
	get_stats(b, &s1);
	stats_sub(d, &s0, &s1);
	return t;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, z = *(const double *)y;

	return a < z ? -1 : a > z;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Sets @r's rate of @kind from the median of @nsecs times of one pass. */
static void set_large(struct bench *b, struct result *r, int kind, double *secs,
		      int nsecs)
{
	uint64_t n = b->size / BIG_IO;

	r->ops[kind] = (long)(n * (uint64_t)nsecs);
	r->secs[kind] = median(secs, nsecs);
	r->rate[kind] = (double)n / r->secs[kind];
}

/*
 * Phases 1 and 2, @b->rounds times, a new file and a new object each
 * round.  The writes take turns (who goes first alternates); the reads
 * go A B B A (A alternating), so in every round each side reads once
 * first after the writes and once after the other's read, and a drift
 * within the round (the host writing back what was just written, another
 * process's I/O starting or ending) weighs on both alike.  With one read
 * each, A B, the side first in two rounds of three took the first slot's
 * luck twice.  Each side's rate is from its median time.
 */
static void large_phases(struct bench *b)
{
	struct result *rw = &b->r[R_WRITE], *rr = &b->r[R_READ];
	double ws[2][MAX_ROUNDS], rs[2][2 * MAX_ROUNDS], pr[MAX_ROUNDS];
	uint64_t n = b->size / BIG_IO;
	struct orch_store_stats d;
	uint8_t *buf = xaligned(BIG_IO);
	int nr[2] = { 0, 0 };

	fill_random(buf, BIG_IO, 42);
	for (int i = 0; i < b->rounds; i++) {
		uint64_t h = b->next_handle++;

		for (int j = 0; j < 2; j++) {
			int kind = (i + j) % 2 ? STORE : PLAIN;

			if (kind == PLAIN) {
				ws[PLAIN][i] = write_plain(b, buf);
			} else {
				ws[STORE][i] = write_store(b, buf, h, &d);
				stats_add(&rw->d, &d);
			}
			progress("round %d: large write %s: %" PRIu64
				 " MiB in %.2f s", i + 1, kind ? "store" : "plain",
				 n, ws[kind][i]);
		}
		for (int j = 0; j < 4; j++) {
			int kind = (i + (j == 1 || j == 2)) % 2 ? STORE : PLAIN;
			double t;

			if (kind == PLAIN) {
				t = read_plain(b, buf);
			} else {
				t = read_store(b, buf, h, &d);
				stats_add(&rr->d, &d);
			}
			rs[kind][nr[kind]++] = t;
			progress("round %d: read %s: %" PRIu64 " MiB in %.2f s",
				 i + 1, kind ? "store" : "plain", n, t);
		}
	}
	/*
	 * The reads' ratio pairs each round's two reads of a side with the
	 * other's (plain time / store time, summed over the round): a drift
	 * or a step in the disk's speed within the round weighs on both
	 * sides alike there, where medians of each side alone may take
	 * their values from different regimes.
	 */
	for (int i = 0; i < b->rounds; i++)
		pr[i] = (rs[PLAIN][2 * i] + rs[PLAIN][2 * i + 1]) /
			(rs[STORE][2 * i] + rs[STORE][2 * i + 1]);
	rr->paired = median(pr, b->rounds);
	/* after: median() sorts */
	for (int k = PLAIN; k <= STORE; k++) {
		set_large(b, rw, k, ws[k], b->rounds);
		set_large(b, rr, k, rs[k], nr[k]);
	}
	plain_close(b);
	free(buf);
}

/* --- Phases 3 and 4: 4 KiB writes from many threads -------------------------- */

struct writer {
	struct bench *b;
	pthread_barrier_t *go;
	const double *deadline;
	int kind;
	bool fsync;
	long max_ops;
	uint64_t handle;          /* store: its object */
	uint64_t base;            /* plain: its region of the file */
	long done;
	double t_write, t_sync;   /* seconds spent in each kind of call */
	int error;                /* -errno */
	const char *what;
	pthread_t tid;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	struct bench *b = w->b;
	uint8_t *buf = xaligned(SMALL_IO);
	double deadline;
	int error;

	fill_random(buf, SMALL_IO, w->handle ^ w->base);
	error = pthread_barrier_wait(w->go);
	if (error && error != PTHREAD_BARRIER_SERIAL_THREAD) {
		w->error = -error;
		w->what = "pthread_barrier_wait";
		goto out;
	}
	deadline = *w->deadline;
	for (long i = 0; i < w->max_ops; i++) {
		uint64_t off = (uint64_t)i * SMALL_IO;
		double t0 = now_s(), t1;

		memcpy(buf, &i, sizeof(i));
		if (w->kind == PLAIN) {
			ssize_t n = pwrite(b->fd, buf, SMALL_IO,
					   (off_t)(w->base + off));

			if (n != (ssize_t)SMALL_IO) {
				w->error = n < 0 ? -errno : -EIO;
				w->what = "pwrite plain file";
				break;
			}
			t1 = now_s();
			w->t_write += t1 - t0;
			if (w->fsync && fdatasync(b->fd)) {
				w->error = -errno;
				w->what = "fdatasync plain file";
				break;
			}
		} else {
			error = orch_store_write(b->st, w->handle, off, buf,
						 SMALL_IO);
			if (error) {
				w->error = error;
				w->what = "orch_store_write (4 KiB)";
				break;
			}
			t1 = now_s();
			w->t_write += t1 - t0;
			if (w->fsync) {
				error = orch_store_sync(b->st);
				if (error) {
					w->error = error;
					w->what = "orch_store_sync (4 KiB)";
					break;
				}
			}
		}
		w->done++;
		if (w->fsync) {
			double t2 = now_s();

			w->t_sync += t2 - t1;
			if (t2 >= deadline)
				break;
		} else if (t1 >= deadline) {
			break;
		}
	}
out:
	free(buf);
	return NULL;
}

/*
 * One run: @nthreads writers, @total_ops operations between them at most,
 * stopped at @secs seconds.  Fills @r's slot @kind.
 */
static void small_run(struct bench *b, struct result *r, int kind,
		      int nthreads, bool fsync, long total_ops, double secs)
{
	struct writer *ws = calloc((size_t)nthreads, sizeof(*ws));
	long per = total_ops / nthreads;
	struct orch_store_stats s0, s1, d;
	pthread_barrier_t go;
	double deadline = 0, t0, t1;
	long done = 0;
	int error;

	if (!ws)
		die("calloc", -ENOMEM);
	if (per < 1)
		per = 1;
	if (kind == PLAIN)
		plain_create(b);
	settle();
	error = pthread_barrier_init(&go, NULL, (unsigned)nthreads + 1);
	if (error)
		die("pthread_barrier_init", -error);
	for (int i = 0; i < nthreads; i++) {
		struct writer *w = &ws[i];

		w->b = b;
		w->go = &go;
		w->deadline = &deadline;
		w->kind = kind;
		w->fsync = fsync;
		w->max_ops = per;
		w->handle = b->next_handle++;
		w->base = (uint64_t)i * (uint64_t)per * SMALL_IO;
		error = pthread_create(&w->tid, NULL, writer_main, w);
		if (error)
			die("pthread_create", -error);
	}
	if (kind == STORE)
		get_stats(b, &s0);
	t0 = now_s();
	deadline = t0 + secs;
	error = pthread_barrier_wait(&go);
	if (error && error != PTHREAD_BARRIER_SERIAL_THREAD)
		die("pthread_barrier_wait", -error);
	for (int i = 0; i < nthreads; i++) {
		error = pthread_join(ws[i].tid, NULL);
		if (error)
			die("pthread_join", -error);
	}
	t1 = now_s();
	if (kind == STORE) {
		get_stats(b, &s1);
		stats_sub(&d, &s0, &s1);
		stats_add(&r->d, &d);
	}
	for (int i = 0; i < nthreads; i++) {
		if (ws[i].error)
			die(ws[i].what, ws[i].error);
		done += ws[i].done;
		r->t_write[kind] += ws[i].t_write;
		r->t_sync[kind] += ws[i].t_sync;
	}
	pthread_barrier_destroy(&go);
	if (kind == PLAIN)
		plain_close(b);
	r->ops[kind] += done;
	r->secs[kind] += t1 - t0;
	r->rates[kind][r->nrounds[kind]++] = (double)done / (t1 - t0);
	if (!fsync && done < per * nthreads)
		r->capped[kind] = true;
	progress("%s %s: %ld ops in %.2f s, %.0f ops/s%s", r->label,
		 kind == PLAIN ? "plain" : "store", done, t1 - t0,
		 (double)done / (t1 - t0),
		 !fsync && done < per * nthreads ? " (time limit)" : "");
	free(ws);
}

/*
 * Phase 3 (@fsync false: once, a fixed number of operations per run) or
 * phase 4 (@fsync: @b->rounds times, a fixed time per run), each with 1
 * and with 64 writers, plain and store taking turns.  Each rate is the
 * median of the rounds.
 */
static void small_phase(struct bench *b, bool fsync)
{
	int idx[2] = { fsync ? R_WS1 : R_W1, fsync ? R_WS64 : R_W64 };
	int nthreads[2] = { 1, MANY };
	int rounds = fsync ? b->rounds : 1;
	long ops = fsync ? b->fsync_cap : b->small_ops;
	double secs = fsync ? b->fsync_secs : b->small_secs;

	for (int i = 0; i < rounds; i++) {
		for (int c = 0; c < 2; c++) {
			for (int j = 0; j < 2; j++) {
				int kind = (i + j) % 2 ? STORE : PLAIN;

				small_run(b, &b->r[idx[c]], kind, nthreads[c],
					  fsync, ops, secs);
			}
		}
	}
	for (int c = 0; c < 2; c++) {
		struct result *r = &b->r[idx[c]];

		for (int k = PLAIN; k <= STORE; k++)
			r->rate[k] = median(r->rates[k], r->nrounds[k]);
	}
}

/* --- Report ---------------------------------------------------------------- */

static double ratio(double a, double z)
{
	return z > 0 ? a / z : 0;
}

/* Store over plain for row @x: the paired ratio where there is one. */
static double row_ratio(const struct result *x)
{
	return x->paired > 0 ? x->paired : ratio(x->rate[STORE], x->rate[PLAIN]);
}

static double quot(uint64_t a, uint64_t z)
{
	return z ? (double)a / (double)z : 0;
}

/* Mean microseconds per op; 0 for phases 1 and 2, which do not count. */
static double us(double secs, long ops)
{
	return ops > 0 ? secs / (double)ops * 1e6 : 0;
}

static const char *verdict(double v, double target)
{
	return v >= target ? "PASS" : "MISS";
}

/* Whether result row @i was measured (--phases). */
static bool row_ran(const struct bench *b, int i)
{
	unsigned int ph = i <= R_READ ? PH_LARGE : i <= R_W64 ? PH_SMALL : PH_FSYNC;

	return b->phases & ph;
}

static void print_table(const struct bench *b)
{
	const struct result *r = b->r;
	double scale = ratio(r[R_WS64].rate[STORE], r[R_WS1].rate[STORE]);
	double pscale = ratio(r[R_WS64].rate[PLAIN], r[R_WS1].rate[PLAIN]);

	printf("store-bench: %s, large write/read %" PRIu64 " MiB, median of "
	       "%d round%s%s\n", b->dir, b->size >> 20, b->rounds,
	       b->rounds == 1 ? "" : "s", b->quick ? " (quick)" : "");
	printf("reads: cold, %s; left cached before a read: plain %" PRIu64
	       " KiB, store %" PRIu64 " KiB\n", b->drop_note[0] ? b->drop_note :
	       b->drop_global ? "after drop_caches and dropping the files read" :
	       "after dropping the files read (data, store.db and its WAL)",
	       b->resident_kib[PLAIN], b->resident_kib[STORE]);
	printf("machine: %ld CPUs, load average %.2f at the start; other "
	       "processes and kernel threads\n  used %.2f CPUs meanwhile%s\n\n",
	       b->ncpu, b->load, b->others, b->load > 1 || b->others > 0.5 ?
	       " (busy: rates are noisy)" : "");
	printf("%-32s %12s %12s %-6s %7s  %s\n", "phase", "plain", "store",
	       "unit", "s/p", "target");
	for (int i = 0; i < R_NR; i++) {
		const struct result *x = &r[i];
		double q = row_ratio(x);
		char tgt[32] = "";

		if (!row_ran(b, i))
			continue;
		if (i == R_WRITE)
			snprintf(tgt, sizeof(tgt), ">= 0.70 %s",
				 verdict(q, 0.70));
		else if (i == R_READ)
			snprintf(tgt, sizeof(tgt), ">= 0.80 %s",
				 verdict(q, 0.80));
		printf("%-32s %12.1f %12.1f %-6s %7.2f  %s\n", x->label,
		       x->rate[PLAIN], x->rate[STORE], x->unit, q, tgt);
	}
	if (b->phases & PH_LARGE)
		printf("read s/p: median over the rounds of plain time / store time, "
		       "each side's two reads\n  of the round (A B B A) summed\n");
	if (b->phases & PH_FSYNC)
		printf("%-32s %12.1fx %11.1fx %-6s %7s  >= 10x %s\n",
		       "4 KiB write+fsync, 64 vs 1", pscale, scale, "", "",
		       verdict(scale, 10.0));
	for (int i = R_W1; i <= R_W64; i++)
		for (int k = PLAIN; k <= STORE; k++)
			if (r[i].capped[k])
				printf("note: %s, %s: stopped at the %.0f s limit "
				       "after %ld ops\n", r[i].label,
				       k == PLAIN ? "plain" : "store",
				       b->small_secs, r[i].ops[k]);
	if (b->phases & PH_FSYNC)
		printf("4 KiB write+fsync: %d round%s of %.1f s per cell, median; "
		       "a plain op is pwrite + fdatasync,\n  a store op "
		       "orch_store_write + orch_store_sync\n", b->rounds,
		       b->rounds == 1 ? "" : "s", b->fsync_secs);
	printf("\nmean latency per 4 KiB op, us (write: pwrite or "
	       "orch_store_write; sync: fdatasync or orch_store_sync):\n");
	printf("%-32s %12s %12s %12s %12s\n", "phase", "plain write",
	       "plain sync", "store write", "store sync");
	for (int i = R_W1; i < R_NR; i++) {
		const struct result *x = &r[i];

		if (!row_ran(b, i))
			continue;
		printf("%-32s", x->label);
		for (int k = PLAIN; k <= STORE; k++) {
			double n = (double)(x->ops[k] ? x->ops[k] : 1);

			printf(" %12.1f", x->t_write[k] / n * 1e6);
			if (i >= R_WS1)
				printf(" %12.1f", x->t_sync[k] / n * 1e6);
			else
				printf(" %12s", "-");
		}
		printf("\n");
	}
	printf("\nstore batching (deltas of orch_store_get_stats):\n");
	printf("%-32s %10s %10s %8s %8s %10s %12s %6s %8s\n", "phase", "ops",
	       "commits", "syncs", "calls", "ops/commit", "calls/flush", "ckpts", "ckpt_ms");
	for (int i = 0; i < R_NR; i++) {
		const struct orch_store_stats *d = &r[i].d;

		if (!row_ran(b, i))
			continue;
		printf("%-32s %10" PRIu64 " %10" PRIu64 " %8" PRIu64
		       " %8" PRIu64 " %10.2f %12.2f %6" PRIu64 " %8.1f\n", r[i].label, d->ops,
		       d->commits, d->syncs, d->sync_calls,
		       quot(d->ops, d->commits), quot(d->sync_calls, d->syncs),
		       d->checkpoints, (double)d->checkpoint_us / 1000);
	}
	if (b->phases & PH_FSYNC)
		printf("\nstore 4 KiB write+fsync: %.2f ops per flush with 1 writer, "
		       "%.2f with 64\n",
		       quot(r[R_WS1].d.ops, r[R_WS1].d.syncs),
		       quot(r[R_WS64].d.ops, r[R_WS64].d.syncs));
}

/* The results as JSON to @f: what --json prints and --json-file writes. */
static void print_json(const struct bench *b, FILE *f)
{
	const struct result *r = b->r;
	double scale = ratio(r[R_WS64].rate[STORE], r[R_WS1].rate[STORE]);

	fprintf(f, "{\n  \"dir\": \"%s\",\n  \"size_mib\": %" PRIu64
	        ",\n  \"rounds\": %d,\n  \"quick\": %s,\n  \"drop_global\": %s,\n"
	        "  \"resident_kib_plain\": %" PRIu64 ",\n  \"resident_kib_store\": %"
	        PRIu64 ",\n  \"cpus\": %ld,\n  \"load_start\": %.2f,\n"
	        "  \"other_cpus_used\": %.3f,\n"
	        "  \"phases\": {\n", b->dir, b->size >> 20, b->rounds,
	        b->quick ? "true" : "false",
	        b->drop_global && !b->drop_note[0] ? "true" : "false",
	        b->resident_kib[PLAIN], b->resident_kib[STORE],
	        b->ncpu, b->load, b->others);
	for (int i = 0; i < R_NR; i++) {
		const struct result *x = &r[i];
		const struct orch_store_stats *d = &x->d;

		fprintf(f, "    \"%s\": {\"unit\": \"%s\", "
		        "\"plain\": %.3f, \"store\": %.3f, \"ratio\": %.4f, "
		        "\"plain_ops\": %ld, \"plain_secs\": %.4f, "
		        "\"store_ops\": %ld, \"store_secs\": %.4f, "
		        "\"plain_write_us\": %.2f, \"plain_sync_us\": %.2f, "
		        "\"store_write_us\": %.2f, \"store_sync_us\": %.2f, "
		        "\"store_commits\": %" PRIu64 ", \"store_mutations\": %"
		        PRIu64 ", \"store_syncs\": %" PRIu64
		        ", \"store_sync_calls\": %" PRIu64
		        ", \"ops_per_commit\": %.3f, \"calls_per_flush\": %.3f, "
		        "\"label\": \"%s\", \"ran\": %s}%s\n",
		        x->key, x->unit, x->rate[PLAIN], x->rate[STORE],
		        row_ratio(x), x->ops[PLAIN],
		        x->secs[PLAIN], x->ops[STORE], x->secs[STORE],
		        us(x->t_write[PLAIN], x->ops[PLAIN]),
		        us(x->t_sync[PLAIN], x->ops[PLAIN]),
		        us(x->t_write[STORE], x->ops[STORE]),
		        us(x->t_sync[STORE], x->ops[STORE]),
		        d->commits, d->ops, d->syncs, d->sync_calls,
		        quot(d->ops, d->commits), quot(d->sync_calls, d->syncs),
		        x->label, row_ran(b, i) ? "true" : "false", i + 1 < R_NR ? "," : "");
	}
	fprintf(f, "  },\n  \"targets\": {\n"
	        "    \"large_write_ratio\": {\"value\": %.4f, \"min\": 0.70, \"pass\": %s},\n"
	        "    \"read_ratio\": {\"value\": %.4f, \"min\": 0.80, \"pass\": %s},\n"
	        "    \"fsync_64_vs_1\": {\"value\": %.4f, \"min\": 10, \"pass\": %s}\n"
	        "  }\n}\n",
	        ratio(r[R_WRITE].rate[STORE], r[R_WRITE].rate[PLAIN]),
	        ratio(r[R_WRITE].rate[STORE], r[R_WRITE].rate[PLAIN]) >= 0.70 ?
	        "true" : "false",
	        row_ratio(&r[R_READ]),
	        row_ratio(&r[R_READ]) >= 0.80 ?
	        "true" : "false",
	        scale, scale >= 10.0 ? "true" : "false");
}

/* --- Main ------------------------------------------------------------------ */

/* Seconds all CPUs were busy since boot (/proc/stat), or -1. */
static double cpu_busy(void)
{
	unsigned long long v[8] = { 0 };
	long hz = sysconf(_SC_CLK_TCK);
	FILE *f = fopen("/proc/stat", "re");
	int n;

	if (!f)
		return -1;
	n = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0],
		   &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]);
	fclose(f);
	if (n != 8 || hz <= 0)
		return -1;
	/* user nice system idle iowait irq softirq steal: all but idle, iowait */
	return (double)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / (double)hz;
}

/* CPU seconds of this process, all threads. */
static double self_cpu(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		die("clock_gettime", 0);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: store-bench [-d DIR] [--size-mb N] [--quick] "
		"[--fsync-secs S] [--rounds N] [--json]\n"
		"                   [--json-file FILE] [--drop files|global] [--phases LIST]\n"
		"  -d, --dir DIR     where to put the plain file and the store\n"
		"                    (default /var/tmp/orch-store-bench)\n"
		"  --size-mb N       size of the large write and read (default 1024)\n"
		"  --quick           128 MiB and fewer 4 KiB operations\n"
		"  --fsync-secs S    seconds per 4 KiB write+fsync run (default 4, quick 2)\n"
		"  --rounds N        rounds of the large write and read and of\n"
		"                    write+fsync, median taken (default 3, quick 1)\n"
		"  --json            print the results as JSON\n"
		"  --json-file FILE  also write them as JSON to FILE (for bench/chart.py)\n"
		"  --drop MODE       before each read, drop from the page cache the\n"
		"                    files read (files, the default) or, as root,\n"
		"                    everything as well (global: drop_caches)\n"
		"  --phases LIST     of large (write and read), small (4 KiB writes),\n"
		"                    fsync (4 KiB write+fsync); default all\n");
}

static void init_results(struct bench *b)
{
	static const struct {
		const char *key, *label, *unit;
	} rows[R_NR] = {
		[R_WRITE] = { "large_write", "large write 1 MiB + fdatasync", "MiB/s" },
		[R_READ] = { "read_cold", "read 1 MiB, caches dropped", "MiB/s" },
		[R_W1] = { "write4k_1", "4 KiB write, 1 writer", "ops/s" },
		[R_W64] = { "write4k_64", "4 KiB write, 64 writers", "ops/s" },
		[R_WS1] = { "write4k_fsync_1", "4 KiB write+fsync, 1 writer", "ops/s" },
		[R_WS64] = { "write4k_fsync_64", "4 KiB write+fsync, 64 writers", "ops/s" },
	};

	for (int i = 0; i < R_NR; i++) {
		b->r[i].key = rows[i].key;
		b->r[i].label = rows[i].label;
		b->r[i].unit = rows[i].unit;
	}
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "size-mb", required_argument, NULL, 's' },
		{ "quick", no_argument, NULL, 'q' },
		{ "fsync-secs", required_argument, NULL, 'f' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "json", no_argument, NULL, 'j' },
		{ "json-file", required_argument, NULL, 'J' },
		{ "drop", required_argument, NULL, 'D' },
		{ "phases", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static struct bench bench = { .phases = PH_ALL };
	struct bench *b = &bench;
	struct orch_store_geom geom = { 0 };
	const char *dir = "/var/tmp/orch-store-bench", *json_file = NULL;
	long size_mb = -1;
	double fsync_secs = -1;
	double busy0, busy1, self0, t0;
	long rounds = -1;
	char *end;
	uint64_t big;
	int opt, error;

	while ((opt = getopt_long(argc, argv, "d:h", longopts, NULL)) != -1) {
		switch (opt) {
		case 'd':
			dir = optarg;
			break;
		case 's':
			errno = 0;
			size_mb = strtol(optarg, &end, 10);
			if (errno || *end || size_mb < 1 || size_mb > (1l << 20)) {
				fprintf(stderr, "store-bench: bad --size-mb %s\n",
					optarg);
				return 2;
			}
			break;
		case 'q':
			b->quick = true;
			break;
		case 'f':
			fsync_secs = strtod(optarg, &end);
			if (*end || !(fsync_secs > 0 && fsync_secs <= 3600)) {
				fprintf(stderr, "store-bench: bad --fsync-secs %s\n",
					optarg);
				return 2;
			}
			break;
		case 'r':
			errno = 0;
			rounds = strtol(optarg, &end, 10);
			if (errno || *end || rounds < 1 || rounds > MAX_ROUNDS) {
				fprintf(stderr, "store-bench: bad --rounds %s (1..%d)\n",
					optarg, MAX_ROUNDS);
				return 2;
			}
			break;
		case 'j':
			b->json = true;
			break;
		case 'J':
			json_file = optarg;
			break;
		case 'D':
			if (strcmp(optarg, "global") && strcmp(optarg, "files")) {
				fprintf(stderr, "store-bench: bad --drop %s (global, files)\n",
					optarg);
				return 2;
			}
			b->drop_global = !strcmp(optarg, "global");
			break;
		case 'p':
			b->phases = 0;
			for (char *t = strtok(optarg, ","); t; t = strtok(NULL, ",")) {
				if (!strcmp(t, "large")) {
					b->phases |= PH_LARGE;
				} else if (!strcmp(t, "small")) {
					b->phases |= PH_SMALL;
				} else if (!strcmp(t, "fsync")) {
					b->phases |= PH_FSYNC;
				} else {
					fprintf(stderr, "store-bench: bad --phases %s "
						"(large,small,fsync)\n", t);
					return 2;
				}
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (strlen(dir) >= sizeof(b->dir) - 16) {
		fprintf(stderr, "store-bench: directory name too long\n");
		return 2;
	}
	orch_log_level = ORCH_LOG_WARN;
	init_results(b);
	b->fd = -1;
	strcpy(b->dir, dir);
	snprintf(b->plain_path, sizeof(b->plain_path), "%s/plain", dir);
	snprintf(b->store_path, sizeof(b->store_path), "%s/store", dir);
	if (size_mb < 0)
		size_mb = b->quick ? 128 : 1024;
	b->size = (uint64_t)size_mb << 20;
	b->small_ops = b->quick ? 10000 : 50000;
	b->small_secs = b->quick ? 4 : 15;
	b->fsync_secs = fsync_secs > 0 ? fsync_secs : b->quick ? 2 : 4;
	b->fsync_cap = 400000;
	b->rounds = rounds > 0 ? (int)rounds : b->quick ? 1 : 3;
	b->next_handle = 1;

	if (mkdir(dir, 0755) == 0)
		b->made_dir = true;
	else if (errno != EEXIST)
		die(dir, 0);
	g_bench = b;

	/*
	 * Room for the large objects, the 4 KiB runs (phase 4 is bounded by
	 * fsync_cap operations per run) and slack for redirect-on-write; the
	 * blocks file is sparse.
	 */
	big = (uint64_t)(b->rounds + 1) * b->size +
	      2 * (uint64_t)b->rounds * (uint64_t)b->fsync_cap * SMALL_IO +
	      (2ull << 30);
	geom.size = big;
	error = orch_store_mkfs(b->store_path, &geom, true);
	if (error)
		die("orch_store_mkfs", error);
	error = orch_store_open(b->store_path, &b->st);
	if (error)
		die("orch_store_open", error);

	if (getloadavg(&b->load, 1) != 1)
		b->load = -1;
	b->ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	busy0 = cpu_busy();
	self0 = self_cpu();
	t0 = now_s();
	if (b->phases & PH_LARGE)
		large_phases(b);
	if (b->phases & PH_SMALL)
		small_phase(b, false);
	if (b->phases & PH_FSYNC)
		small_phase(b, true);

	busy1 = cpu_busy();
	if (busy0 >= 0 && busy1 >= 0)
		b->others = (busy1 - busy0 - (self_cpu() - self0)) /
			    (now_s() - t0);
	if (b->others < 0)
		b->others = 0;
	orch_store_close(b->st);
	b->st = NULL;
	g_bench = NULL;
	cleanup(b);

	if (json_file) {
		FILE *f = fopen(json_file, "we");

		if (f)
			print_json(b, f);
		if (!f || fclose(f)) {
			fprintf(stderr, "store-bench: cannot write %s: %s\n", json_file,
				strerror(errno));
			return 1;
		}
	}
	if (b->json)
		print_json(b, stdout);
	else
		print_table(b);
	if (fflush(stdout) || ferror(stdout)) {
		perror("store-bench: stdout");
		return 1;
	}
	return 0;
}
