/*
 * The extent store's facade: lifecycle (mkfs, open, close), the
 * superblock, durability, statistics and the synchronous calls.  Read
 * snapshots and the read path are in snap.c, block I/O in bdev.c, the
 * records in rec.c (store_ondisk.h); the writer thread and everything that
 * changes the indexes in writer.c, alloc.c and refc.c; the checker and the
 * owners query in check.c.  On-disk format: docs/SPEC-store.md.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/fs.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "common/crc32c.h"
#include "common/log.h"
#include "common/pcut.h"
#include "common/util.h"
#include "store/store_i.h"

#define STORE_SB_LEN 52

/* --- Paths, lock, superblock ------------------------------------------------------ */

static char *store_path(const char *dir, const char *name)
{
	char *p;

	if (asprintf(&p, "%s/%s", dir, name) < 0)
		return NULL;
	return p;
}

int orch_store_lock(const char *dir, int *fdp)
{
	char *p = store_path(dir, STORE_LOCK_NAME);
	int fd;

	if (!p)
		return -ENOMEM;
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	free(p);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int error = errno == EWOULDBLOCK ? -EBUSY : -errno;

		close(fd);
		return error;
	}
	*fdp = fd;
	return 0;
}

int orch_store_check_unused(const char *data_dir)
{
	int fd, error = orch_store_lock(data_dir, &fd);

	if (error == -ENOENT)
		return 0;
	if (error)
		return error;
	close(fd);
	return 0;
}

static void sb_encode(const struct store_sb *sb, uint8_t *blk)
{
	memset(blk, 0, ORCH_STORE_BLOCK);
	memcpy(blk, STORE_SB_MAGIC, 8);
	orch_put_le32(blk + 8, sb->format);
	orch_put_le32(blk + 12, sb->block_size);
	orch_put_le32(blk + 16, sb->ag_blocks);
	orch_put_le32(blk + 20, sb->maxext);
	orch_put_le64(blk + 24, sb->blocks);
	memcpy(blk + 32, sb->uuid, 16);
	orch_put_le32(blk + 48, orch_crc32c(0, blk, 48));
}

int orch_store_sb_decode(const uint8_t *blk, struct store_sb *sb)
{
	if (memcmp(blk, STORE_SB_MAGIC, 8) != 0)
		return -ENOENT;
	if (orch_get_le32(blk + 48) != orch_crc32c(0, blk, 48))
		return -ORCH_ECORRUPT;
	sb->format = orch_get_le32(blk + 8);
	sb->block_size = orch_get_le32(blk + 12);
	sb->ag_blocks = orch_get_le32(blk + 16);
	sb->maxext = orch_get_le32(blk + 20);
	sb->blocks = orch_get_le64(blk + 24);
	memcpy(sb->uuid, blk + 32, 16);
	if (sb->format != STORE_FORMAT)
		return -EPROTONOSUPPORT;
	if (sb->block_size != ORCH_STORE_BLOCK || sb->ag_blocks < STORE_MIN_AG_BLOCKS ||
	    sb->ag_blocks > STORE_MAX_AG_BLOCKS || (sb->ag_blocks & (sb->ag_blocks - 1)) ||
	    sb->maxext < 1 || sb->maxext > sb->ag_blocks || sb->blocks < STORE_MIN_AG_BLOCKS ||
	    sb->blocks / sb->ag_blocks >= (1ull << 31))
		return -ORCH_ECORRUPT;
	return 0;
}

/* --- Databases --------------------------------------------------------------------- */

static int db_open_path(const char *path, bool readonly, bool create, sqlite3 **out)
{
	int flags = (readonly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE) |
		    (create ? SQLITE_OPEN_CREATE : 0) | SQLITE_OPEN_NOMUTEX;
	sqlite3 *db = NULL;
	int rc = sqlite3_open_v2(path, &db, flags, NULL);

	if (rc != SQLITE_OK) {
		int error = rc == SQLITE_CANTOPEN ? -ENOENT : -EIO;

		if (db)
			ORCH_ERR("cannot open %s: %s", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return error;
	}
	sqlite3_busy_timeout(db, 10000);
	sqlite3_extended_result_codes(db, 0);
	rc = sqlite3_exec(db,
			  "PRAGMA journal_mode=WAL;"
			  "PRAGMA synchronous=NORMAL;"
			  "PRAGMA wal_autocheckpoint=0;"
			  "PRAGMA cache_size=-16384;",
			  NULL, NULL, NULL);
	if (rc != SQLITE_OK && !readonly) {
		ORCH_ERR("cannot set up %s: %s", path, sqlite3_errmsg(db));
		sqlite3_close(db);
		return -EIO;
	}
	*out = db;
	return 0;
}

int orch_store_db_open(const struct orch_store *st, bool readonly, sqlite3 **out)
{
	char *p = store_path(st->st_dir, STORE_DB_NAME);
	int error;

	if (!p)
		return -ENOMEM;
	error = db_open_path(p, readonly, false, out);
	free(p);
	return error;
}

static int smeta_get(sqlite3 *db, const char *k, int64_t *v)
{
	struct orch_smeta_irec m;
	struct orch_rec_sq q;
	orch_failaddr_t fa = NULL;
	sqlite3_stmt *s;
	int rc;

	orch_rec_sq_init(&q, db);
	rc = orch_rec_stmt(&q, ORCH_REC_SMETA_GET, &s);
	if (!rc) {
		sqlite3_bind_text(s, 1, k, -1, SQLITE_STATIC);
		rc = orch_rec_step(&q, ORCH_REC_SMETA_GET);
	}
	if (rc == 1)
		fa = orch_rec_smeta_from_disk(s, 0, &m);
	orch_rec_sq_fini(&q);
	if (rc < 0)
		return rc;
	if (rc == 0 || fa) {
		ORCH_ERR("store.db: smeta '%s' %s: check=%s", k, rc ? "fails verification" :
			 "is missing", fa ? fa : "-");
		return -ORCH_ECORRUPT;
	}
	*v = m.v;
	return 0;
}

/* --- mkfs ------------------------------------------------------------------------ */

static int geom_resolve(const struct orch_store_geom *g, int fd, bool is_dev,
			uint64_t *blocks, uint32_t *agb, uint32_t *maxext)
{
	uint64_t size = g && g->size ? g->size : STORE_DEFAULT_SIZE;

	if (is_dev) {
		uint64_t devsize;

		if (ioctl(fd, BLKGETSIZE64, &devsize) < 0)
			return -errno;
		if (!g || !g->size || g->size > devsize)
			size = devsize;
	}
	*agb = g && g->ag_blocks ? g->ag_blocks : STORE_DEFAULT_AG_BLOCKS;
	if (g && g->maxext > *agb)
		return -EINVAL;
	*maxext = g && g->maxext ? g->maxext : STORE_DEFAULT_MAXEXT;
	*blocks = size / ORCH_STORE_BLOCK;
	if (*agb < STORE_MIN_AG_BLOCKS || *agb > STORE_MAX_AG_BLOCKS ||
	    (*agb & (*agb - 1)))
		return -EINVAL;
	if (*maxext > *agb)
		*maxext = *agb;
	if (*maxext < 1)
		return -EINVAL;
	/* The last AG must hold at least 64 blocks; smaller tails are cut off. */
	if (*blocks % *agb && *blocks % *agb < STORE_MIN_AG_BLOCKS)
		*blocks -= *blocks % *agb;
	if (*blocks < STORE_MIN_AG_BLOCKS || *blocks / *agb >= (1ull << 31))
		return -EINVAL;
	return 0;
}

static int mkfs_tables(sqlite3 *db, const struct store_sb *sb, uint32_t ag_count)
{
	static const char *const keys[] = { "format", "block_size", "ag_blocks", "ag_count",
					    "maxext", "blocks", "next_nid", "next_work",
					    "uuid_hi", "uuid_lo" };
	struct orch_rec_sq q;
	sqlite3_stmt *s;
	uint64_t uh, ul;
	int error;

	orch_rec_sq_init(&q, db);
	error = orch_rec_stmt(&q, ORCH_REC_BEGIN, &s);
	if (!error)
		error = orch_rec_exec(&q, ORCH_REC_BEGIN);
	if (!error && sqlite3_exec(db, ORCH_REC_SCHEMA, NULL, NULL, NULL) != SQLITE_OK)
		error = -EIO;
	memcpy(&uh, sb->uuid, 8);
	memcpy(&ul, sb->uuid + 8, 8);
	{
		int64_t vals[] = { sb->format, sb->block_size, sb->ag_blocks, ag_count,
				   sb->maxext, (int64_t)sb->blocks, 1, 1,
				   (int64_t)(uh & INT64_MAX), (int64_t)(ul & INT64_MAX) };

		for (size_t i = 0; !error && i < ORCH_ARRAY_SIZE(keys); i++) {
			struct orch_smeta_irec m = { .v = vals[i] };

			strcpy(m.k, keys[i]);
			error = ORCH_REC_PUT(&q, ORCH_REC_SMETA_INS, orch_rec_smeta_bind, &m);
		}
	}
	for (uint32_t ag = 0; !error && ag < ag_count; ag++) {
		uint64_t start = (uint64_t)ag * sb->ag_blocks;
		uint32_t len = (uint32_t)ORCH_MIN((uint64_t)sb->ag_blocks, sb->blocks - start);
		uint32_t first = ag == 0 ? 1 : 0;   /* AG 0 block 0: superblock */
		struct orch_fsb_irec f = { ag, first, len - first };
		struct orch_rmap_irec r = { 0, 0, ORCH_STORE_OWN_FS, 0, 1, 0 };
		struct orch_agstat_irec a = {
			.ag = ag, .blocks = len, .freeblks = f.len, .longest = f.len,
			.nfree = 1, .nrmap = ag == 0 ? 1 : 0,
		};

		error = ORCH_REC_PUT(&q, ORCH_REC_FSB_INS, orch_rec_fsb_bind, &f);
		if (!error)
			error = ORCH_REC_PUT(&q, ORCH_REC_FSC_INS, orch_rec_fsc_bind, &f);
		if (!error && ag == 0)
			error = ORCH_REC_PUT(&q, ORCH_REC_RMAP_INS, orch_rec_rmap_bind, &r);
		if (!error)
			error = ORCH_REC_PUT(&q, ORCH_REC_AG_PUT, orch_rec_agstat_bind, &a);
	}
	if (!error)
		error = orch_rec_stmt(&q, ORCH_REC_COMMIT, &s);
	if (!error)
		error = orch_rec_exec(&q, ORCH_REC_COMMIT);
	if (error) {
		ORCH_ERR("cannot create store tables: %s", sqlite3_errmsg(db));
		if (!sqlite3_get_autocommit(db) && !orch_rec_stmt(&q, ORCH_REC_ROLLBACK, &s))
			orch_rec_exec(&q, ORCH_REC_ROLLBACK);
	}
	orch_rec_sq_fini(&q);
	return error ? -EIO : 0;
}

static int remove_store_files(const char *dir)
{
	const char *names[] = { STORE_DB_NAME, STORE_DB_NAME "-wal", STORE_DB_NAME "-shm" };

	for (size_t i = 0; i < ORCH_ARRAY_SIZE(names); i++) {
		char *p = store_path(dir, names[i]);

		if (!p)
			return -ENOMEM;
		if (unlink(p) < 0 && errno != ENOENT) {
			int error = -errno;

			free(p);
			return error;
		}
		free(p);
	}
	return 0;
}

static int fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int error = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		error = -errno;
	close(fd);
	return error;
}

int orch_store_mkfs(const char *data_dir, const struct orch_store_geom *g,
		    bool force)
{
	char *dbp = NULL, *blp = NULL;
	uint8_t *blk = NULL;
	struct store_sb sb = { .format = STORE_FORMAT, .block_size = ORCH_STORE_BLOCK };
	sqlite3 *db = NULL;
	struct stat stb;
	int lockfd = -1, fd = -1, error;
	bool is_dev = false;
	uint64_t blocks = 0;
	uint32_t agb = 0, maxext = 0;

	if (mkdir(data_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	error = orch_store_lock(data_dir, &lockfd);
	if (error)
		return error;
	dbp = store_path(data_dir, STORE_DB_NAME);
	blp = g && g->device ? strdup(g->device) : store_path(data_dir, STORE_BLOCKS_NAME);
	blk = aligned_alloc(ORCH_STORE_BLOCK, ORCH_STORE_BLOCK);
	if (!dbp || !blp || !blk) {
		error = -ENOMEM;
		goto out;
	}
	if (access(dbp, F_OK) == 0 && !force) {
		error = -EEXIST;
		goto out;
	}
	if (g && g->device) {
		char *link = store_path(data_dir, STORE_BLOCKS_NAME);

		if (!link) {
			error = -ENOMEM;
			goto out;
		}
		if ((unlink(link) < 0 && errno != ENOENT) || symlink(g->device, link) < 0)
			error = -errno;
		free(link);
		if (error)
			goto out;
	}
	fd = open(blp, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		error = -errno;
		goto out;
	}
	if (fstat(fd, &stb) < 0) {
		error = -errno;
		goto out;
	}
	is_dev = S_ISBLK(stb.st_mode);
	error = geom_resolve(g, fd, is_dev, &blocks, &agb, &maxext);
	if (error)
		goto out;
	error = remove_store_files(data_dir);
	if (error)
		goto out;
	if (!is_dev) {
		/* A new sparse file: a replaced store leaves nothing behind. */
		if (ftruncate(fd, 0) < 0 || ftruncate(fd, (off_t)(blocks * ORCH_STORE_BLOCK)) < 0) {
			error = -errno;
			goto out;
		}
	}
	sb.ag_blocks = agb;
	sb.maxext = maxext;
	sb.blocks = blocks;
	if (getrandom(sb.uuid, sizeof(sb.uuid), 0) != sizeof(sb.uuid)) {
		error = -EIO;
		goto out;
	}
	sb_encode(&sb, blk);
	if (pwrite(fd, blk, ORCH_STORE_BLOCK, 0) != ORCH_STORE_BLOCK || fdatasync(fd) < 0) {
		error = errno ? -errno : -EIO;
		goto out;
	}
	error = db_open_path(dbp, false, true, &db);
	if (error)
		goto out;
	error = mkfs_tables(db, &sb, (uint32_t)((blocks + agb - 1) / agb));
	if (!error && sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL,
				   NULL) != SQLITE_OK)
		error = -EIO;
	sqlite3_close(db);
	if (!error)
		error = fsync_dir(data_dir);
out:
	if (fd >= 0)
		close(fd);
	if (lockfd >= 0)
		close(lockfd);
	free(blk);
	free(dbp);
	free(blp);
	return error;
}

/* --- Durability --------------------------------------------------------------------------- */

/* fdatasync of the WAL file, through SQLite's own handle (and the pcut shim). */
static int sync_wal(struct orch_store *st)
{
	sqlite3_file *f = NULL;
	int rc;

	rc = sqlite3_file_control(st->st_sync_db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &f);
	if (rc != SQLITE_OK || !f || !f->pMethods)
		return -EIO;
	rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);
	return rc == SQLITE_OK ? 0 : -EIO;
}

/*
 * Copies the WAL into store.db once it has grown: here, where a flush was
 * asked for anyway, never on the path of a write (automatic checkpoints
 * are off; a checkpoint fsyncs).  Only from store_flush, under
 * st_commit_lock, after the blocks and the WAL are synced; see there.
 * No commit can land meanwhile, so the checkpoint copies every frame
 * unless a reader still uses an older snapshot, and the writer's next
 * transaction then writes the WAL from its start again (SQLite restarts
 * it when every frame is copied and no reader needs them): the WAL stays
 * near STORE_CKPT_PAGES plus what one flush interval commits.
 */
static void store_checkpoint(struct orch_store *st)
{
	struct timespec t0, t1;
	int log = 0, done = 0;

	if (atomic_load(&st->st_wal_pages) < st->st_ckpt_pages)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (sqlite3_wal_checkpoint_v2(st->st_sync_db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log,
				      &done) == SQLITE_OK && done >= log)
		atomic_store(&st->st_wal_pages, 0);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_mutex_lock(&st->st_seq_lock);
	st->st_stats.checkpoints++;
	st->st_stats.checkpoint_us += (uint64_t)((t1.tv_sec - t0.tv_sec) * 1000000 +
						 (t1.tv_nsec - t0.tv_nsec) / 1000);
	pthread_mutex_unlock(&st->st_seq_lock);
}

/*
 * The data blocks, then the WAL, with commits held off in between: a WAL
 * sync covers every commit in the WAL, so one made after the blocks were
 * flushed would become durable before its data.  The writer keeps
 * applying operations meanwhile; only its COMMIT waits.  A second blocks
 * fdatasync is needed only if a commit made meanwhile maps data written
 * after the first began: blocks the writer has written for a transaction
 * still open are no business of this flush (no WAL frame points to them
 * yet).  Commits up to st_sync_upto are durable when it returns 0.
 *
 * The rule: the blocks a commit maps are durable before anything can make
 * that commit durable.  Whatever syncs the WAL makes every commit in it
 * durable, and that is not only sync_wal: a checkpoint (synchronous=NORMAL)
 * fsyncs the WAL before it copies frames into store.db, and closing the
 * last connection checkpoints.  So nothing syncs the WAL except here,
 * under st_commit_lock, after the blocks fdatasync that covers every
 * commit in it: the checkpoint runs before the lock is let go.  (Taken
 * after the unlock, as it was, or by the writer after its COMMIT, it made
 * durable the commits the writer had made since this flush's fdatasync,
 * and a power cut left their blocks failing their checksums.)  Holding
 * commits off for the checkpoint costs them its copy and the fsync of
 * store.db, once every STORE_CKPT_PAGES of WAL; orch_store_close flushes
 * before its connections close.
 */
static int store_flush(struct orch_store *st)
{
	uint64_t writes = atomic_load(&st->st_data_writes);
	uint64_t mark;
	int error = 0;

	/* Most of the data, while the writer still commits... */
	mark = orch_pcut_mark();
	error = orch_bdev_sync(st);
	if (error)
		return error;
	/* ...then what the commits made since need, if anything, and the WAL,
	 * with commits held off. */
	pthread_mutex_lock(&st->st_commit_lock);
	pthread_mutex_lock(&st->st_seq_lock);
	st->st_sync_upto = st->st_committed;
	st->st_sync_captured = true;
	pthread_mutex_unlock(&st->st_seq_lock);
	if (st->st_commit_writes > writes) {
		mark = orch_pcut_mark();
		error = orch_bdev_sync(st);
	}
	if (!error)
		orch_pcut_synced_upto(st->st_blocks_path, mark);
	if (!error) {
		orch_bdev_killpoint(ORCH_KILLPOINT_FLUSH);
		error = sync_wal(st);
	}
	if (!error)
		store_checkpoint(st);
	pthread_mutex_unlock(&st->st_commit_lock);
	return error;
}

/*
 * Every mutation that completed before the call is committed by then, at
 * or below st_committed: the caller needs that commit durable, not a flush
 * of its own.  So it returns at once if a flush already covered it, rides
 * on the flush in progress if that flush has not yet read st_committed or
 * read it late enough, and otherwise waits for the next one (started by
 * one of its waiters).  Callers that arrive in a burst as the writer's
 * batch completes then share one flush, and a caller woken late does not
 * start a flush for a commit that is already on its way to disk.
 */
int orch_store_sync(struct orch_store *st)
{
	uint64_t need;
	int error;

	pthread_mutex_lock(&st->st_seq_lock);
	st->st_stats.sync_calls++;
	need = st->st_committed;
	while (st->st_durable < need && !st->st_sync_err) {
		uint64_t gen;

		if (st->st_syncing) {
			gen = st->st_sync_started;
			if (st->st_sync_captured && st->st_sync_upto < need)
				gen++;
			pthread_cond_wait(&st->st_sync_cv[gen % 2], &st->st_seq_lock);
			continue;
		}
		st->st_syncing = true;
		st->st_sync_captured = false;
		gen = ++st->st_sync_started;
		pthread_mutex_unlock(&st->st_seq_lock);
		error = store_flush(st);
		pthread_mutex_lock(&st->st_seq_lock);
		st->st_syncing = false;
		st->st_sync_done = gen;
		st->st_stats.syncs++;
		if (error) {
			if (!st->st_sync_err) {
				ORCH_ERR("store in '%s' failed: cannot flush its blocks or its WAL: "
					 "%s: read-only from now on, data not yet flushed may be "
					 "lost; restart the server on healthy media "
					 "(docs/ADMIN.md, \"Disk errors\")",
					 st->st_dir, strerror(-error));
				st->st_sync_err = error;
				st->st_failed_s = (int64_t)time(NULL);
				atomic_store(&st->st_failed, error);
			}
		} else if (st->st_sync_upto > st->st_durable) {
			st->st_durable = st->st_sync_upto;
		}
		error = st->st_sync_err;
		pthread_mutex_unlock(&st->st_seq_lock);
		/*
		 * Its waiters are done; one of the next one's must start it
		 * (after an error, nobody will: all of them wake).  Woken
		 * after the unlock, not under it, where each would first
		 * block on st_seq_lock again: a context switch apiece.  Its
		 * own commit is covered: the flush read st_committed later.
		 */
		pthread_cond_broadcast(&st->st_sync_cv[gen % 2]);
		if (error)
			pthread_cond_broadcast(&st->st_sync_cv[(gen + 1) % 2]);
		else
			pthread_cond_signal(&st->st_sync_cv[(gen + 1) % 2]);
		return error;
	}
	error = st->st_sync_err;
	pthread_mutex_unlock(&st->st_seq_lock);
	return error;
}

int orch_store_failed(struct orch_store *st, int64_t *since_s)
{
	int error;

	if (!atomic_load(&st->st_failed))
		return 0;
	pthread_mutex_lock(&st->st_seq_lock);
	error = st->st_sync_err;
	if (since_s)
		*since_s = st->st_failed_s;
	pthread_mutex_unlock(&st->st_seq_lock);
	return error;
}

static uint64_t store_host_fs(dev_t dev);

/* --- Open and close ----------------------------------------------------------------------- */

static void store_free(struct orch_store *st)
{
	orch_snap_pool_free(st);
	/*
	 * The last connection to close checkpoints the WAL, which syncs it:
	 * unless a flush covered every commit, leave the WAL to the next open
	 * rather than make commits durable before their blocks.
	 */
	if (st->st_sync_db && st->st_durable < st->st_committed)
		sqlite3_db_config(st->st_sync_db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, 1, NULL);
	sqlite3_close(st->st_sync_db);
	if (st->st_blocks_fd >= 0)
		close(st->st_blocks_fd);
	if (st->st_lock_fd >= 0)
		close(st->st_lock_fd);
	pthread_mutex_destroy(&st->st_pool_lock);
	pthread_mutex_destroy(&st->st_seq_lock);
	pthread_mutex_destroy(&st->st_commit_lock);
	pthread_cond_destroy(&st->st_sync_cv[0]);
	pthread_cond_destroy(&st->st_sync_cv[1]);
	pthread_cond_destroy(&st->st_snap_cv);
	free(st->st_blocks_path);
	free(st->st_dir);
	free(st);
}

/* Reads and cross-checks the superblock and smeta. */
static int store_load_geometry(struct orch_store *st)
{
	uint8_t *blk = aligned_alloc(ORCH_STORE_BLOCK, ORCH_STORE_BLOCK);
	struct store_sb sb;
	int64_t v[8];
	const char *keys[] = { "format", "block_size", "ag_blocks", "ag_count", "maxext",
			       "blocks", "uuid_hi", "uuid_lo" };
	uint64_t uh, ul;
	int error;

	if (!blk)
		return -ENOMEM;
	error = smeta_get(st->st_sync_db, "format", &v[0]);
	if (!error && v[0] != STORE_FORMAT) {
		ORCH_ERR("store in '%s' has format version %" PRId64
			 "; this orchardd supports version %d", st->st_dir, v[0], STORE_FORMAT);
		error = -EPROTONOSUPPORT;
		goto out;
	}
	for (size_t i = 1; !error && i < ORCH_ARRAY_SIZE(keys); i++)
		error = smeta_get(st->st_sync_db, keys[i], &v[i]);
	if (error) {
		ORCH_ERR("store in '%s': store.db has no valid geometry; the store cannot be "
			 "opened: restore the data directory, or re-create the store with "
			 "orchard mkfs (which erases it)", st->st_dir);
		goto out;
	}
	error = orch_bdev_read(st, 0, 1, blk);
	if (error)
		goto out;
	error = orch_store_sb_decode(blk, &sb);
	if (error == -EPROTONOSUPPORT) {
		ORCH_ERR("store in '%s': blocks file has format version %u; this orchardd "
			 "supports version %d", st->st_dir, sb.format, STORE_FORMAT);
		goto out;
	}
	memcpy(&uh, sb.uuid, 8);
	memcpy(&ul, sb.uuid + 8, 8);
	if (error || sb.block_size != ORCH_STORE_BLOCK || sb.ag_blocks != (uint64_t)v[2] ||
	    sb.maxext != (uint64_t)v[4] || sb.blocks != (uint64_t)v[5] ||
	    (int64_t)(uh & INT64_MAX) != v[6] || (int64_t)(ul & INT64_MAX) != v[7] ||
	    v[1] != ORCH_STORE_BLOCK) {
		ORCH_ERR("store in '%s': the superblock of '%s' is damaged or belongs to "
			 "another store; check that it is this store's blocks file or device, "
			 "else restore the data directory or re-create the store with orchard "
			 "mkfs (which erases it)", st->st_dir, st->st_blocks_path);
		error = -ORCH_ECORRUPT;
		goto out;
	}
	if ((uint64_t)v[3] != (sb.blocks + sb.ag_blocks - 1) / sb.ag_blocks) {
		ORCH_ERR("store in '%s': impossible geometry (ag_count %" PRId64 " for %" PRIu64
			 " blocks of AGs of %" PRIu32 "): store.db is damaged; restore the data "
			 "directory or re-create the store with orchard mkfs (which erases it)",
			 st->st_dir, v[3], sb.blocks, sb.ag_blocks);
		error = -ORCH_ECORRUPT;
		goto out;
	}
	st->st_ag_blocks = sb.ag_blocks;
	st->st_ag_shift = (uint32_t)__builtin_ctz(sb.ag_blocks);
	st->st_ag_count = (uint32_t)v[3];
	st->st_maxext = sb.maxext;
	st->st_blocks = sb.blocks;
out:
	free(blk);
	return error;
}

int orch_store_open(const char *data_dir, struct orch_store **out)
{
	struct orch_store *st = calloc(1, sizeof(*st));
	char *dbp = NULL;
	struct stat stb;
	int error;

	if (!st)
		return -ENOMEM;
	st->st_blocks_fd = -1;
	st->st_lock_fd = -1;
	pthread_mutex_init(&st->st_pool_lock, NULL);
	pthread_mutex_init(&st->st_seq_lock, NULL);
	/* What is on disk now: durable only after the first flush (below). */
	st->st_committed = 1;
	st->st_ckpt_pages = STORE_CKPT_PAGES;
	pthread_mutex_init(&st->st_commit_lock, NULL);
	pthread_cond_init(&st->st_sync_cv[0], NULL);
	pthread_cond_init(&st->st_sync_cv[1], NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&st->st_snap_cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	orch_bdev_killpoint_init();
	orch_bdev_eio_init();
	error = orch_pcut_vfs_register();
	if (error)
		goto fail;
	st->st_dir = strdup(data_dir);
	dbp = store_path(data_dir, STORE_DB_NAME);
	if (!st->st_dir || !dbp) {
		error = -ENOMEM;
		goto fail;
	}
	if (access(dbp, F_OK) < 0) {
		error = -errno;
		if (error == -ENOENT)
			ORCH_ERR("no store in '%s': not initialised, run orchard mkfs", data_dir);
		goto fail;
	}
	error = orch_store_lock(data_dir, &st->st_lock_fd);
	if (error)
		goto fail;
	error = db_open_path(dbp, false, false, &st->st_sync_db);
	if (error)
		goto fail;
	/* data_dir/blocks: the sparse file, or a symlink to the device. */
	st->st_blocks_path = store_path(data_dir, STORE_BLOCKS_NAME);
	if (!st->st_blocks_path) {
		error = -ENOMEM;
		goto fail;
	}
	st->st_blocks_fd = open(st->st_blocks_path, O_RDWR | O_CLOEXEC);
	if (st->st_blocks_fd < 0) {
		error = -errno;
		ORCH_ERR("store in '%s': cannot open '%s': %s", data_dir, st->st_blocks_path,
			 strerror(errno));
		goto fail;
	}
	if (fstat(st->st_blocks_fd, &stb) < 0) {
		error = -errno;
		goto fail;
	}
	st->st_sparse = S_ISREG(stb.st_mode);
	if (st->st_sparse)
		st->st_host_fs = store_host_fs(stb.st_dev);
	orch_store_set_reserve(st, ORCH_STORE_RESERVE_AUTO);
	error = store_load_geometry(st);
	if (error)
		goto fail;
	error = orch_writer_start(st);   /* also resumes work items */
	if (error)
		goto fail;
	/* Blocks freed before a crash may still be on the way to disk. */
	error = orch_store_sync(st);
	if (error) {
		orch_writer_stop(st);
		goto fail;
	}
	free(dbp);
	*out = st;
	return 0;
fail:
	free(dbp);
	store_free(st);
	return error;
}

void orch_store_close(struct orch_store *st)
{
	if (!st)
		return;
	orch_writer_stop(st);
	/* What the writer committed last, so that the close can checkpoint (a
	 * no-op after the server's last flush). */
	(void)orch_store_sync(st);
	store_free(st);
}

/* --- Space and statistics ------------------------------------------------------------------ */

void orch_store_set_reserve(struct orch_store *st, uint64_t bytes)
{
	struct statvfs sv;

	if (!st->st_sparse) {
		bytes = 0;
	} else if (bytes == ORCH_STORE_RESERVE_AUTO) {
		bytes = STORE_RESERVE_MIN;
		if (fstatvfs(st->st_blocks_fd, &sv) == 0)
			bytes = ORCH_MAX(bytes, (uint64_t)sv.f_blocks * sv.f_frsize / 16);
		bytes = ORCH_MIN(bytes, STORE_RESERVE_MAX);
	}
	atomic_store(&st->st_reserve, bytes);
}

/*
 * Names the file system under a sparse blocks file on this host: FNV-1a
 * of the kernel's boot id (random per boot: distinct hosts differ, the
 * containers of one kernel agree) and the device number.  Never 0.
 */
static uint64_t store_host_fs(dev_t dev)
{
	char boot[64] = "";
	uint64_t h = 0xcbf29ce484222325ull;
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");
	size_t n = 0;

	if (f) {
		n = fread(boot, 1, sizeof(boot) - 1, f);
		fclose(f);
	}
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)boot[i]) * 0x100000001b3ull;
	for (size_t i = 0; i < sizeof(uint64_t); i++)
		h = (h ^ (((uint64_t)dev >> (8 * i)) & 0xff)) * 0x100000001b3ull;
	return h ? h : 1;
}

int orch_store_space(struct orch_store *st, struct orch_store_space *out)
{
	uint64_t reserve = atomic_load(&st->st_reserve);

	*out = (struct orch_store_space){ .total = (st->st_blocks - 1) * ORCH_STORE_BLOCK,
					  .host_avail = UINT64_MAX };
	pthread_mutex_lock(&st->st_seq_lock);
	out->free = st->st_freeblks * ORCH_STORE_BLOCK;
	out->objects = st->st_objects;
	pthread_mutex_unlock(&st->st_seq_lock);
	out->free = ORCH_MIN(out->free, out->total);
	out->used = out->total - out->free;
	if (st->st_sparse) {
		struct statvfs sv;
		uint64_t b;

		if (fstatvfs(st->st_blocks_fd, &sv) < 0)
			return -errno;
		/* The allocator refuses blocks that would eat into the reserve. */
		b = (uint64_t)sv.f_bavail * sv.f_frsize;
		out->host_avail = b > reserve ? b - reserve : 0;
		out->host_fs = st->st_host_fs;
	}
	out->avail = ORCH_MIN(out->free, out->host_avail);
	if (orch_store_failed(st, NULL))
		out->avail = 0;   /* it stores nothing more */
	return 0;
}

int orch_store_statfs(struct orch_store *st, uint64_t *total, uint64_t *free_bytes,
		      uint64_t *avail, uint64_t *objects)
{
	struct orch_store_space sp;
	int error = orch_store_space(st, &sp);

	if (total)
		*total = sp.total;
	if (free_bytes)
		*free_bytes = sp.free;
	if (avail)
		*avail = sp.avail;
	if (objects)
		*objects = sp.objects;
	return error;
}

void orch_store_get_stats(struct orch_store *st, struct orch_store_stats *out)
{
	pthread_mutex_lock(&st->st_seq_lock);
	*out = st->st_stats;
	pthread_mutex_unlock(&st->st_seq_lock);
	out->bytes_read = atomic_load(&st->st_bytes_read);
}

void orch_store_info(struct orch_store *st, struct orch_store_info *out)
{
	out->block_size = ORCH_STORE_BLOCK;
	out->ag_blocks = st->st_ag_blocks;
	out->ag_count = st->st_ag_count;
	out->maxext = st->st_maxext;
	out->blocks = st->st_blocks;
	out->format = STORE_FORMAT;
}

/* --- Synchronous mutations ------------------------------------------------------------------ */

/*
 * orch_store_object_size with nothing queued, before or after, that could
 * change it (-EAGAIN if something is).  Then a delete of an absent object,
 * or a cut of one not larger, has nothing to do and need not wait for the
 * writer: every unlink of a file that never had data on this server asks.
 */
static int store_settled_size(struct orch_store *st, uint64_t h, uint64_t *size)
{
	int error;

	if (atomic_load_explicit(&st->st_queued, memory_order_acquire) != 0)
		return -EAGAIN;
	error = orch_store_object_size(st, h, size);
	/* A DYING object reads as absent, but its work item is not done. */
	if (atomic_load_explicit(&st->st_queued, memory_order_acquire) != 0)
		return -EAGAIN;
	return error;
}

/* Is object @h absent, with nothing queued that could create it? */
static bool store_surely_absent(struct orch_store *st, uint64_t h)
{
	uint64_t size;

	return store_settled_size(st, h, &size) == -ENOENT;
}

/*
 * A synchronous call waits on a semaphore, not a mutex and a condition
 * variable: the writer wakes the caller with one sem_post and never holds
 * a lock the caller then needs (signalled under its mutex, the caller,
 * often woken on the writer's CPU, ran only to block on that mutex).
 * glibc's sem_post touches nothing after the wake-up, so the caller may
 * destroy the semaphore as soon as sem_wait returns.  The callers of one
 * batch wake each other in turn (struct store_waiter).
 */
void orch_store_waiter_wake(struct store_waiter *sw)
{
	sem_post(&sw->sw_sem);
}

/* @done of an operation completed alone (not in a batch's chain). */
static void sync_done(struct orch_store_op *op)
{
	orch_store_waiter_wake(op->o_waiter);
}

static void sync_wait_init(struct store_waiter *sw, struct orch_store_op *op)
{
	sem_init(&sw->sw_sem, 0, 0);
	sw->sw_next = NULL;
	op->done = sync_done;
	op->arg = NULL;
	op->o_waiter = sw;
}

static int sync_wait_end(struct store_waiter *sw, struct orch_store_op *op)
{
	while (sem_wait(&sw->sw_sem) < 0 && errno == EINTR)
		;
	/* Set before the chain's first wake-up; its waiter is still asleep. */
	if (sw->sw_next)
		orch_store_waiter_wake(sw->sw_next);
	sem_destroy(&sw->sw_sem);
	return op->status;
}

static int submit_wait(struct orch_store *st, struct orch_store_op *op)
{
	struct store_waiter sw;

	op->o_sums = NULL;
	op->o_sums_wait = NULL;
	sync_wait_init(&sw, op);
	orch_store_submit_(st, op);
	return sync_wait_end(&sw, op);
}

/* Writes of at least this many whole blocks have their checksums computed
 * by the submitting thread; below it the handover costs more than it saves. */
#define STORE_SUMS_MIN_BLOCKS 16u
/* Checksums kept on the submitter's stack (4 MiB of data); more are malloc()ed. */
#define STORE_SUMS_STACK 1024u

/* A write's checksums on their way from the submitter to the writer. */
struct store_sums {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	bool ready;
};

const uint32_t *orch_store_op_sums(struct orch_store_op *op)
{
	struct store_sums *s = op->o_sums_wait;

	if (!op->o_sums || !s)
		return op->o_sums;
	pthread_mutex_lock(&s->lock);
	while (!s->ready)
		pthread_cond_wait(&s->cv, &s->lock);
	pthread_mutex_unlock(&s->lock);
	return op->o_sums;
}

/*
 * A write that waits for its operation anyway checksums the data itself,
 * after submitting it: the writer thread allocates blocks and copies the
 * data into the page cache meanwhile, and takes the sums when it needs
 * them, for the csum rows (orch_store_op_sums).  The caller owns @buf until
 * the operation is done, so both threads may read it.
 */
int orch_store_write(struct orch_store *st, uint64_t h, uint64_t off,
		     const void *buf, size_t len)
{
	struct orch_store_op op = { .type = ORCH_STORE_OP_WRITE, .handle = h, .off = off,
				    .len = len, .buf = buf };
	uint32_t stack_sums[STORE_SUMS_STACK], *sums = NULL;
	size_t nb = len / ORCH_STORE_BLOCK;
	struct store_sums ss = { .ready = false };
	struct store_waiter sw;
	int error;

	if (off % ORCH_STORE_BLOCK || len % ORCH_STORE_BLOCK || nb < STORE_SUMS_MIN_BLOCKS ||
	    len > ORCH_STORE_MAX_IO)
		return submit_wait(st, &op);
	sums = nb <= STORE_SUMS_STACK ? stack_sums : malloc(nb * sizeof(*sums));
	if (!sums)
		return submit_wait(st, &op);
	pthread_mutex_init(&ss.lock, NULL);
	pthread_cond_init(&ss.cv, NULL);
	op.o_sums = sums;
	op.o_sums_wait = &ss;
	sync_wait_init(&sw, &op);
	orch_store_submit_(st, &op);
	for (size_t i = 0; i < nb; i++)
		sums[i] = orch_crc32c(0, (const uint8_t *)buf + i * ORCH_STORE_BLOCK,
				      ORCH_STORE_BLOCK);
	pthread_mutex_lock(&ss.lock);
	ss.ready = true;
	pthread_cond_signal(&ss.cv);
	pthread_mutex_unlock(&ss.lock);
	error = sync_wait_end(&sw, &op);
	pthread_mutex_destroy(&ss.lock);
	pthread_cond_destroy(&ss.cv);
	if (sums != stack_sums)
		free(sums);
	return error;
}

int orch_store_truncate(struct orch_store *st, uint64_t h, uint64_t size)
{
	struct orch_store_op op = { .type = ORCH_STORE_OP_TRUNCATE, .handle = h, .off = size };

	if (size == 0 && store_surely_absent(st, h))
		return 0;
	return submit_wait(st, &op);
}

bool orch_store_nothing_past(struct orch_store *st, uint64_t h, uint64_t size)
{
	uint64_t now;
	int error = store_settled_size(st, h, &now);

	return error == -ENOENT || (!error && now <= size);
}

int orch_store_cut(struct orch_store *st, uint64_t h, uint64_t size)
{
	struct orch_store_op op = { .type = ORCH_STORE_OP_TRUNCATE, .handle = h, .off = size,
				    .len = ORCH_STORE_TRUNC_SHRINK };

	/* The common case: nothing past @size, and no queued write that could put it there. */
	if (orch_store_nothing_past(st, h, size))
		return 0;
	return submit_wait(st, &op);
}

int orch_store_punch(struct orch_store *st, uint64_t h, uint64_t off, uint64_t len)
{
	struct orch_store_op op = { .type = ORCH_STORE_OP_PUNCH, .handle = h, .off = off,
				    .len = len };

	return submit_wait(st, &op);
}

int orch_store_delete(struct orch_store *st, uint64_t h)
{
	struct orch_store_op op = { .type = ORCH_STORE_OP_DELETE, .handle = h };

	if (store_surely_absent(st, h))
		return 0;
	return submit_wait(st, &op);
}

/* The operations of one orch_store_delete_many(): the last to finish posts. */
struct store_many {
	sem_t sem;
	atomic_size_t left;
};

static void many_release(struct store_many *m, size_t k)
{
	if (atomic_fetch_sub_explicit(&m->left, k, memory_order_acq_rel) == k)
		sem_post(&m->sem);
}

static void many_done(struct orch_store_op *op)
{
	many_release(op->arg, 1);
}

int orch_store_delete_many(struct orch_store *st, const uint64_t *handles, size_t n)
{
	struct orch_store_op *ops;
	struct store_many m;
	size_t queued = 0;
	int error = 0;

	if (n == 0)
		return 0;
	ops = calloc(n, sizeof(*ops));
	if (!ops) {
		/* One at a time still frees everything. */
		for (size_t i = 0; i < n; i++) {
			int e = orch_store_delete(st, handles[i]);

			if (e && !error)
				error = e;
		}
		return error;
	}
	sem_init(&m.sem, 0, 0);
	atomic_init(&m.left, n + 1);   /* + 1: held until every op is queued */
	for (size_t i = 0; i < n; i++) {
		if (store_surely_absent(st, handles[i]))
			continue;
		ops[i] = (struct orch_store_op){ .type = ORCH_STORE_OP_DELETE, .handle = handles[i],
						 .done = many_done, .arg = &m };
		orch_store_submit(st, &ops[i]);
		queued++;
	}
	many_release(&m, n - queued + 1);
	while (sem_wait(&m.sem) < 0 && errno == EINTR)
		;
	sem_destroy(&m.sem);
	for (size_t i = 0; i < n && !error; i++)
		error = ops[i].status;
	free(ops);
	return error;
}

int orch_store_clone(struct orch_store *st, uint64_t src, uint64_t src_off, uint64_t dst,
		     uint64_t dst_off, uint64_t len)
{
	struct orch_store_op op = { .type = ORCH_STORE_OP_CLONE, .handle = dst, .off = dst_off,
				    .len = len, .handle2 = src, .off2 = src_off };

	return submit_wait(st, &op);
}

int orch_store_dedupe(struct orch_store *st, uint64_t src, uint64_t src_off, uint64_t dst,
		      uint64_t dst_off, uint64_t len, uint64_t *deduped)
{
	struct orch_store_op op = { .type = ORCH_STORE_OP_DEDUPE, .handle = dst, .off = dst_off,
				    .len = len, .handle2 = src, .off2 = src_off };
	int error = submit_wait(st, &op);

	*deduped = error ? 0 : op.result;
	return error;
}

int orch_store_quarantine(struct orch_store *st, uint64_t gblock, uint64_t n)
{
	struct orch_store_op op = { .type = ORCH_STORE_OP_QUARANTINE, .off = gblock, .len = n };

	return submit_wait(st, &op);
}

void orch_store_set_bad_hook(struct orch_store *st, orch_store_bad_fn fn, void *arg)
{
	st->st_bad_fn = fn;
	st->st_bad_arg = arg;
}
