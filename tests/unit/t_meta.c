/*
 * The namespace module (src/meta) against a real meta.db in a temp dir:
 * lifecycle and identity, every operation with its error cases, link
 * counts, rename, readdir cursors, xattrs, intents, applied records,
 * transactions, and records damaged behind the module's back.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/log.h"
#include "meta/meta.h"
#include "meta/meta_i.h" /* SQLDB_COUNTER_BATCH */
#include "unit/test.h"

#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif

/* --- Fixture --------------------------------------------------------------- */

static struct orch_meta *M;  /* the open namespace of the current case */
static char D[64];           /* its data dir */

static const struct orch_cred ROOT = { .uid = 0, .gid = 0 };
static const struct orch_cred ALICE = { .uid = 1000, .gid = 1000 };
static const struct orch_cred BOB = { .uid = 1001, .gid = 1001 };

static struct orch_meta_ident ident(uint32_t index)
{
	struct orch_meta_ident id = { .server_index = index, .nservers = 4,
				      .strip_size = 65536 };

	snprintf(id.cluster_id, sizeof(id.cluster_id), "test-cluster");
	return id;
}

static int rm_one(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
	(void)sb, (void)flag, (void)ftw;
	return remove(path);
}

/* Also runs at exit, so a failed case leaves no temp dir behind. */
static void fx_teardown(void)
{
	orch_meta_close(M);
	M = NULL;
	if (D[0])
		nftw(D, rm_one, 8, FTW_DEPTH | FTW_PHYS);
	D[0] = '\0';
}

static int fx_setup(uint32_t index)
{
	struct orch_meta_ident id = ident(index);
	static bool registered;
	char err[256];
	int error;

	if (!registered) {
		atexit(fx_teardown);
		registered = true;
	}
	fx_teardown();
	snprintf(D, sizeof(D), "/tmp/t_meta.XXXXXX");
	if (!mkdtemp(D))
		return -errno;
	error = orch_meta_mkfs(D, &id);
	if (error)
		return error;
	error = orch_meta_open(D, &id, &M, err, sizeof(err));
	if (error)
		fprintf(stderr, "open: %s\n", err);
	return error;
}

static int fx_reopen(void)
{
	struct orch_meta_ident id = *orch_meta_ident(M);
	char err[256];

	orch_meta_close(M);
	M = NULL;
	return orch_meta_open(D, &id, &M, err, sizeof(err));
}

/* Runs @sql on a second connection, behind the module's back. */
static int raw_sql(const char *sql)
{
	char path[128];
	sqlite3 *db;
	int rc;

	snprintf(path, sizeof(path), "%s/meta.db", D);
	if (sqlite3_open(path, &db) != SQLITE_OK)
		return -EIO;
	rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	if (rc != SQLITE_OK)
		fprintf(stderr, "raw_sql: %s: %s\n", sql, sqlite3_errmsg(db));
	sqlite3_close(db);
	return rc == SQLITE_OK ? 0 : -EIO;
}

/* Creates @name in @parent; returns the handle (0 on error, printed). */
static uint64_t mk(const struct orch_cred *cred, uint64_t parent, const char *name,
		   uint32_t mode)
{
	struct orch_attr a;
	bool existed;
	int error;

	error = orch_meta_create(M, cred, parent, name, strlen(name), mode, 0,
				 S_ISLNK(mode) ? "target" : NULL, NULL, true, &a, &existed);
	if (error) {
		fprintf(stderr, "mk '%s': %s\n", name, strerror(-error));
		return 0;
	}
	return a.handle;
}

static int lookup(const struct orch_cred *cred, uint64_t parent, const char *name,
		  struct orch_dirent *de)
{
	return orch_meta_lookup(M, cred, parent, name, strlen(name), de);
}

static uint64_t handle_of(uint64_t parent, const char *name)
{
	struct orch_dirent de;

	return lookup(&ROOT, parent, name, &de) ? 0 : de.handle;
}

static uint32_t nlink_of(uint64_t h)
{
	struct orch_attr a;

	return orch_meta_inode_get(M, h, &a) ? 0 : a.nlink;
}

static int unlink_(uint64_t parent, const char *name, bool *remote, bool *freed)
{
	return orch_meta_unlink(M, parent, name, strlen(name), remote, freed);
}

static int check_rm(const struct orch_cred *cred, uint64_t parent, const char *name,
		    bool dir)
{
	struct orch_dirent de;

	return orch_meta_unlink_check(M, cred, parent, name, strlen(name), dir, &de);
}

struct rn_out {
	uint64_t freed, victim, moved;
	uint32_t victim_type;
};

static int rn(const struct orch_cred *cred, uint64_t op, const char *on, uint64_t np,
	      const char *nn, uint32_t flags, struct rn_out *o)
{
	struct rn_out dummy;

	if (!o)
		o = &dummy;
	return orch_meta_rename(M, cred, op, on, strlen(on), np, nn, strlen(nn), flags,
				&o->freed, &o->victim, &o->victim_type, &o->moved);
}

/* --- Lifecycle and identity -------------------------------------------------- */

ORCH_TEST(mkfs_open_reopen)
{
	struct orch_meta_ident id = ident(0);
	struct orch_attr root;
	uint64_t inodes, next;

	ORCH_CHECK_OK(fx_setup(0));
	ORCH_CHECK_RC(orch_meta_mkfs(D, &id), -EEXIST);
	ORCH_CHECK(strcmp(orch_meta_ident(M)->cluster_id, "test-cluster") == 0);
	ORCH_CHECK(orch_meta_ident(M)->nservers == 4);
	ORCH_CHECK(orch_meta_ident(M)->strip_size == 65536);
	ORCH_CHECK(strstr(orch_meta_db_path(M), "/meta.db") != NULL);
	ORCH_CHECK_OK(orch_meta_inode_get(M, ORCH_ROOT_HANDLE, &root));
	ORCH_CHECK(root.mode == (S_IFDIR | 0755));
	ORCH_CHECK(root.uid == 0 && root.gid == 0 && root.nlink == 2);
	ORCH_CHECK(root.parent == ORCH_ROOT_HANDLE);
	ORCH_CHECK(root.mtime_ns > 0);
	ORCH_CHECK_OK(orch_meta_counts(M, &inodes, &next));
	ORCH_CHECK(inodes == 1 && next == 2);

	ORCH_CHECK(mk(&ROOT, 1, "f", S_IFREG | 0644) == 2);
	ORCH_CHECK_OK(fx_reopen());
	ORCH_CHECK(handle_of(1, "f") == 2);
	/* Handles are reserved 64 at a time (sqldb.c): a reopen skips the rest. */
	ORCH_CHECK_OK(orch_meta_counts(M, &inodes, &next));
	ORCH_CHECK(inodes == 2 && next == 2 + SQLDB_COUNTER_BATCH);
	fx_teardown();
}

ORCH_TEST(mkfs_rejects_bad_ident)
{
	struct orch_meta_ident id = ident(0);

	ORCH_CHECK_OK(fx_setup(0));
	fx_teardown();
	snprintf(D, sizeof(D), "/tmp/t_meta.XXXXXX");
	ORCH_CHECK(mkdtemp(D) != NULL);
	id.server_index = 4;
	ORCH_CHECK_RC(orch_meta_mkfs(D, &id), -EINVAL);
	id = ident(0);
	id.strip_size = 1000;
	ORCH_CHECK_RC(orch_meta_mkfs(D, &id), -EINVAL);
	id = ident(0);
	id.cluster_id[0] = '\0';
	ORCH_CHECK_RC(orch_meta_mkfs(D, &id), -EINVAL);
	/* Nothing left behind by the refusals. */
	ORCH_CHECK(access("meta.db", F_OK) != 0);
	id = ident(0);
	ORCH_CHECK_OK(orch_meta_mkfs(D, &id));
	fx_teardown();
}

ORCH_TEST(open_refusals)
{
	struct orch_meta_ident id = ident(0);
	struct orch_meta *m2 = NULL;
	char err[256];

	ORCH_CHECK_OK(fx_setup(0));
	orch_meta_close(M);
	M = NULL;

	ORCH_CHECK_RC(orch_meta_open("/tmp/t_meta.does-not-exist", &id, &m2, err,
				     sizeof(err)), -ENOENT);
	ORCH_CHECK(strstr(err, "is not initialised (run: orchard mkfs)") != NULL);

	snprintf(id.cluster_id, sizeof(id.cluster_id), "other");
	ORCH_CHECK_RC(orch_meta_open(D, &id, &m2, err, sizeof(err)), -EXDEV);
	ORCH_CHECK(strstr(err, "belongs to cluster test-cluster, not other") != NULL);

	id = ident(2);
	ORCH_CHECK_RC(orch_meta_open(D, &id, &m2, err, sizeof(err)), -EXDEV);
	ORCH_CHECK(strstr(err, "server 0, not 2") != NULL);

	/* nservers and strip_size are not part of the identity. */
	id = ident(0);
	id.nservers = 9;
	id.strip_size = 4096;
	ORCH_CHECK_OK(orch_meta_open(D, &id, &m2, err, sizeof(err)));
	orch_meta_close(m2);

	ORCH_CHECK_OK(raw_sql("UPDATE super SET value = 2 WHERE key = 'format_version'"));
	ORCH_CHECK_RC(orch_meta_open(D, &id, &m2, err, sizeof(err)), -EPROTONOSUPPORT);
	ORCH_CHECK(strstr(err, "format version 2, this build reads 1") != NULL);

	ORCH_CHECK_OK(raw_sql("UPDATE super SET value = 1 WHERE key = 'format_version';"
			      "PRAGMA application_id = 7"));
	ORCH_CHECK_RC(orch_meta_open(D, &id, &m2, err, sizeof(err)), -EPROTONOSUPPORT);
	ORCH_CHECK(strstr(err, "not an orchard namespace") != NULL);
	fx_teardown();
}

ORCH_TEST(other_server_has_no_root)
{
	struct orch_attr in = { 0 }, out, a;
	uint64_t inodes, next;

	ORCH_CHECK_OK(fx_setup(1));
	ORCH_CHECK_RC(orch_meta_inode_get(M, ORCH_ROOT_HANDLE, &a), -ENOENT);
	ORCH_CHECK_OK(orch_meta_counts(M, &inodes, &next));
	ORCH_CHECK(inodes == 0 && next == 1);

	/* A directory whose entry lives on server 0. */
	in.mode = S_IFDIR | 0700;
	in.uid = 1000;
	in.gid = 1000;
	in.parent = ORCH_ROOT_HANDLE;
	ORCH_CHECK_OK(orch_meta_inode_create(M, &in, &out));
	ORCH_CHECK(out.handle == orch_handle_make(1, 1));
	ORCH_CHECK(out.nlink == 2 && out.mtime_ns > 0);
	ORCH_CHECK_OK(orch_meta_inode_get(M, out.handle, &a));
	ORCH_CHECK(a.uid == 1000 && a.mode == (S_IFDIR | 0700));
	in.mode = S_IFLNK | 0777;
	ORCH_CHECK_RC(orch_meta_inode_create(M, &in, &out), -EINVAL);
	in.mode = 0xf0000 | 0644;
	ORCH_CHECK_RC(orch_meta_inode_create(M, &in, &out), -EINVAL);

	/* Entries in it, then dir_remove: not empty, then gone, then idempotent. */
	ORCH_CHECK(mk(&ALICE, a.handle, "x", S_IFREG | 0600) != 0);
	ORCH_CHECK_RC(orch_meta_dir_remove(M, a.handle), -ENOTEMPTY);
	{
		bool remote, freed;

		ORCH_CHECK_OK(unlink_(a.handle, "x", &remote, &freed));
		ORCH_CHECK(!remote && freed);
	}
	ORCH_CHECK_OK(orch_meta_inode_set_parent(M, a.handle, 5));
	ORCH_CHECK_OK(orch_meta_inode_get(M, a.handle, &out));
	ORCH_CHECK(out.parent == 5);
	ORCH_CHECK_OK(orch_meta_dir_remove(M, a.handle));
	ORCH_CHECK_RC(orch_meta_inode_get(M, a.handle, &out), -ENOENT);
	ORCH_CHECK_OK(orch_meta_dir_remove(M, a.handle));
	ORCH_CHECK_RC(orch_meta_inode_set_parent(M, a.handle, 5), -ENOENT);
	fx_teardown();
}

/* --- Create and lookup ------------------------------------------------------ */

ORCH_TEST(create_every_type)
{
	struct orch_attr a, root0, root1, out;
	struct orch_dirent de;
	struct orch_layout lay = { .strip_size = 8192, .stripe_count = 2, .first_server = 0 };
	char buf[64];
	bool existed;

	ORCH_CHECK_OK(fx_setup(0));
	ORCH_CHECK_OK(orch_meta_inode_get(M, 1, &root0));
	usleep(2000);

	ORCH_CHECK_OK(orch_meta_create(M, &ROOT, 1, "file", 4, S_IFREG | 0644, 0, NULL,
				       &lay, true, &a, &existed));
	ORCH_CHECK(!existed && a.nlink == 1 && a.size == 0 && a.parent == 1);
	ORCH_CHECK(a.layout.strip_size == 8192 && a.layout.stripe_count == 2);
	ORCH_CHECK(mk(&ROOT, 1, "dir", S_IFDIR | 0755) != 0);
	ORCH_CHECK(mk(&ROOT, 1, "fifo", S_IFIFO | 0600) != 0);
	ORCH_CHECK(mk(&ROOT, 1, "sock", S_IFSOCK | 0600) != 0);
	ORCH_CHECK_OK(orch_meta_create(M, &ROOT, 1, "tty", 3, S_IFCHR | 0600, 0x0501, NULL,
				       NULL, true, &a, &existed));
	ORCH_CHECK(a.rdev == 0x0501);
	ORCH_CHECK_OK(orch_meta_create(M, &ROOT, 1, "link", 4, S_IFLNK | 0777, 0,
				       "some/where", NULL, true, &a, &existed));
	ORCH_CHECK(a.size == 10);
	/* A zero type is a regular file, with the default layout. */
	ORCH_CHECK_OK(orch_meta_create(M, &ROOT, 1, "plain", 5, 0644, 0, NULL, NULL, true,
				       &a, &existed));
	ORCH_CHECK(a.mode == (S_IFREG | 0644));
	ORCH_CHECK(a.layout.strip_size == 65536 && a.layout.stripe_count == 4);

	ORCH_CHECK_OK(lookup(&ROOT, 1, "link", &de));
	ORCH_CHECK(de.type == S_IFLNK && de.has_attr && de.attr.handle == de.handle);
	ORCH_CHECK(de.namelen == 4 && strcmp(de.name, "link") == 0 && de.cookie > 0);
	ORCH_CHECK_OK(orch_meta_readlink(M, de.handle, buf, sizeof(buf)));
	ORCH_CHECK(strcmp(buf, "some/where") == 0);
	ORCH_CHECK_RC(orch_meta_readlink(M, de.handle, buf, 10), -ERANGE);
	ORCH_CHECK_RC(orch_meta_readlink(M, handle_of(1, "file"), buf, sizeof(buf)), -EINVAL);

	ORCH_CHECK_OK(orch_meta_inode_get(M, 1, &root1));
	ORCH_CHECK(root1.nlink == 3);
	ORCH_CHECK(root1.mtime_ns > root0.mtime_ns && root1.ctime_ns == root1.mtime_ns);

	/* open(O_CREAT) without O_EXCL on an existing file returns it. */
	ORCH_CHECK_OK(orch_meta_create(M, &ROOT, 1, "file", 4, S_IFREG | 0600, 0, NULL,
				       NULL, false, &out, &existed));
	ORCH_CHECK(existed && out.handle == handle_of(1, "file") && out.mode == (S_IFREG | 0644));
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, "file", 4, S_IFREG | 0600, 0, NULL,
				       NULL, true, &out, &existed), -EEXIST);
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, "dir", 3, S_IFREG | 0600, 0, NULL, NULL,
				       false, &out, &existed), -EEXIST);
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, "file", 4, S_IFDIR | 0700, 0, NULL,
				       NULL, false, &out, &existed), -EEXIST);
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, "bad", 3, S_IFLNK | 0777, 0, NULL, NULL,
				       true, &out, &existed), -EINVAL);
	lay.strip_size = 100;
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, "bad", 3, S_IFREG | 0644, 0, NULL, &lay,
				       true, &out, &existed), -EINVAL);
	fx_teardown();
}

ORCH_TEST(create_and_lookup_errors)
{
	char longname[ORCH_NAME_MAX + 2];
	struct orch_dirent de;
	struct orch_attr a;
	uint64_t file, dir;
	bool existed;

	ORCH_CHECK_OK(fx_setup(0));
	file = mk(&ROOT, 1, "f", S_IFREG | 0644);
	ORCH_CHECK(file);
	ORCH_CHECK_RC(lookup(&ROOT, 1, "missing", &de), -ENOENT);
	ORCH_CHECK_RC(lookup(&ROOT, file, "x", &de), -ENOTDIR);
	ORCH_CHECK_RC(lookup(&ROOT, 12345, "x", &de), -ENOENT);
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, file, "x", 1, S_IFREG | 0644, 0, NULL,
				       NULL, true, &a, &existed), -ENOTDIR);

	/* Names: empty, dots, slash, NUL, and length limits. */
	ORCH_CHECK_RC(orch_meta_lookup(M, &ROOT, 1, "", 0, &de), -EINVAL);
	ORCH_CHECK_RC(lookup(&ROOT, 1, ".", &de), -EINVAL);
	ORCH_CHECK_RC(lookup(&ROOT, 1, "..", &de), -EINVAL);
	ORCH_CHECK_RC(lookup(&ROOT, 1, "a/b", &de), -EINVAL);
	ORCH_CHECK_RC(orch_meta_lookup(M, &ROOT, 1, "a\0b", 3, &de), -EINVAL);
	memset(longname, 'n', sizeof(longname));
	longname[ORCH_NAME_MAX + 1] = '\0';
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, longname, ORCH_NAME_MAX + 1,
				       S_IFREG | 0644, 0, NULL, NULL, true, &a, &existed),
		      -ENAMETOOLONG);
	ORCH_CHECK_OK(orch_meta_create(M, &ROOT, 1, longname, ORCH_NAME_MAX, S_IFREG | 0644,
				       0, NULL, NULL, true, &a, &existed));
	ORCH_CHECK_OK(orch_meta_lookup(M, &ROOT, 1, longname, ORCH_NAME_MAX, &de));
	ORCH_CHECK(de.namelen == ORCH_NAME_MAX && de.name[ORCH_NAME_MAX] == '\0');
	/* Arbitrary bytes are names, stored byte-exact. */
	ORCH_CHECK(mk(&ROOT, 1, "\xff\xfe caf\xc3\xa9", S_IFREG | 0644));
	ORCH_CHECK_OK(lookup(&ROOT, 1, "\xff\xfe caf\xc3\xa9", &de));
	ORCH_CHECK_RC(lookup(&ROOT, 1, "\xff\xfe caf\xc3", &de), -ENOENT);

	/* Permissions: alice cannot create in root's 0755 dir, nor search a 0700 one. */
	ORCH_CHECK_RC(orch_meta_create(M, &ALICE, 1, "x", 1, S_IFREG | 0644, 0, NULL, NULL,
				       true, &a, &existed), -EACCES);
	dir = mk(&ROOT, 1, "private", S_IFDIR | 0700);
	ORCH_CHECK(dir && mk(&ROOT, dir, "inner", S_IFREG | 0644));
	ORCH_CHECK_RC(lookup(&ALICE, dir, "inner", &de), -EACCES);
	ORCH_CHECK_OK(lookup(&ROOT, dir, "inner", &de));
	/* Search only (0711): lookup yes, readdir no, create no. */
	{
		struct orch_attr in = { .mode = 0711 }, out;
		struct orch_dirent ents[4];
		uint64_t old;
		uint32_t n;
		bool eof;

		ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, dir, ORCH_SET_MODE, &in, &out,
						      &old));
		ORCH_CHECK_OK(lookup(&ALICE, dir, "inner", &de));
		ORCH_CHECK_RC(orch_meta_readdir(M, &ALICE, dir, 0, 4, false, ents, &n, &eof),
			      -EACCES);
		ORCH_CHECK_RC(orch_meta_create(M, &ALICE, dir, "y", 1, S_IFREG | 0644, 0, NULL,
					       NULL, true, &a, &existed), -EACCES);
		/* An existing name is EEXIST before the write check, as on Linux. */
		ORCH_CHECK_RC(orch_meta_create(M, &ALICE, dir, "inner", 5, S_IFREG | 0644, 0,
					       NULL, NULL, true, &a, &existed), -EEXIST);
	}
	fx_teardown();
}

ORCH_TEST(create_owner_and_setgid)
{
	struct orch_attr in = { 0 }, out, a;
	struct orch_cred carol = { .uid = 1002, .gid = 1002, .ngroups = 1, .groups = { 50 } };
	uint64_t shared, old, d;
	bool existed;

	ORCH_CHECK_OK(fx_setup(0));
	shared = mk(&ROOT, 1, "shared", S_IFDIR | 0777);
	ORCH_CHECK(shared);
	ORCH_CHECK_OK(orch_meta_create(M, &ALICE, shared, "a", 1, S_IFREG | 0640, 0, NULL,
				       NULL, true, &a, &existed));
	ORCH_CHECK(a.uid == 1000 && a.gid == 1000);

	in.mode = 02777;
	in.gid = 50;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, shared, ORCH_SET_MODE | ORCH_SET_GID,
					      &in, &out, &old));
	ORCH_CHECK(out.mode == (S_IFDIR | 02777) && out.gid == 50);
	/* In a setgid dir, new inodes take its group; directories keep S_ISGID. */
	ORCH_CHECK_OK(orch_meta_create(M, &ALICE, shared, "b", 1, S_IFREG | 0640, 0, NULL,
				       NULL, true, &a, &existed));
	ORCH_CHECK(a.gid == 50 && !(a.mode & S_ISGID));
	d = mk(&ALICE, shared, "sub", S_IFDIR | 0755);
	ORCH_CHECK_OK(orch_meta_inode_get(M, d, &a));
	ORCH_CHECK(a.gid == 50 && (a.mode & S_ISGID));
	/* A setgid executable by a non-member loses S_ISGID; a member keeps it. */
	ORCH_CHECK_OK(orch_meta_create(M, &ALICE, shared, "x1", 2, S_IFREG | 02755, 0, NULL,
				       NULL, true, &a, &existed));
	ORCH_CHECK(!(a.mode & S_ISGID));
	ORCH_CHECK_OK(orch_meta_create(M, &carol, shared, "x2", 2, S_IFREG | 02755, 0, NULL,
				       NULL, true, &a, &existed));
	ORCH_CHECK(a.mode & S_ISGID);
	fx_teardown();
}

/* --- setattr, extend, access -------------------------------------------------- */

/* fx_setup, then "home" (0777, root's) in the root and "f" (0644, ALICE's) in it. */
static int fx_setup_home(uint64_t *d, uint64_t *f)
{
	int error = fx_setup(0);

	if (error)
		return error;
	*d = mk(&ROOT, 1, "home", S_IFDIR | 0777);
	*f = *d ? mk(&ALICE, *d, "f", S_IFREG | 0644) : 0;
	return *f ? 0 : -EIO;
}

ORCH_TEST(setattr_rules)
{
	struct orch_cred alice2 = ALICE;
	struct orch_attr in = { 0 }, out, a;
	uint64_t f, d, old;

	ORCH_CHECK_OK(fx_setup_home(&d, &f));

	/* chmod: owner yes, others EPERM; type bits never change. */
	in.mode = S_IFDIR | 0600;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_MODE, &in, &out, &old));
	ORCH_CHECK(out.mode == (S_IFREG | 0600));
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_MODE, &in, &out, &old),
		      -EPERM);
	/* S_ISGID is dropped when the owner is not in the file's group. */
	in.mode = 02755;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_GID,
					      &(struct orch_attr){ .gid = 7 }, &out, &old));
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_MODE, &in, &out, &old));
	ORCH_CHECK(out.mode == (S_IFREG | 0755));
	alice2.ngroups = 1;
	alice2.groups[0] = 7;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &alice2, f, ORCH_SET_MODE, &in, &out, &old));
	ORCH_CHECK(out.mode == (S_IFREG | 02755));

	/* chown: root only; chgrp: owner to a group he is in. */
	in.uid = 1001;
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_UID, &in, &out, &old),
		      -EPERM);
	in.uid = 1000;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_UID, &in, &out, &old));
	in.gid = 1000;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_GID, &in, &out, &old));
	ORCH_CHECK(out.gid == 1000);
	/* ...and a chown by non-root clears the set-id bits. */
	ORCH_CHECK(!(out.mode & S_ISGID));
	in.gid = 1001;
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_GID, &in, &out, &old),
		      -EPERM);
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_GID, &in, &out, &old),
		      -EPERM);
	in.mode = 04755;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_MODE, &in, &out, &old));
	in.uid = 1001;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_UID, &in, &out, &old));
	/* Root's chown clears them too, as Linux does for anything but a directory. */
	ORCH_CHECK(out.uid == 1001 && out.mode == (S_IFREG | 0755));

	/* size */
	in.size = 100;
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_SIZE, &in, &out, &old),
		      -EACCES);
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_SIZE, &in, &out, &old));
	ORCH_CHECK(out.size == 100 && old == 0);
	in.size = 10;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_SIZE, &in, &out, &old));
	ORCH_CHECK(out.size == 10 && old == 100);
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ROOT, d, ORCH_SET_SIZE, &in, &out, &old),
		      -EISDIR);
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ROOT, mk(&ROOT, d, "l", S_IFLNK | 0777),
					      ORCH_SET_SIZE, &in, &out, &old), -EINVAL);
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ROOT, f, 1u << 20, &in, &out, &old),
		      -EINVAL);
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ROOT, 999, ORCH_SET_SIZE, &in, &out, &old),
		      -ENOENT);
	/* Through a descriptor opened for writing, no write permission is needed. */
	in.size = 20;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_SIZE | ORCH_SET_HANDLE, &in,
					      &out, &old));
	ORCH_CHECK(out.size == 20 && old == 10);

	/* A write or a truncate by non-root takes the set-id bits (file gid 1000). */
	in.mode = 06777;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_MODE, &in, &out, &old));
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_KILL_SUIDGID, &in, &out, &old));
	ORCH_CHECK(out.mode == (S_IFREG | 06777));       /* root: CAP_FSETID */
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_KILL_SUIDGID, &in, &out,
					      &old));
	ORCH_CHECK(out.mode == (S_IFREG | 0777) && out.size == 20);
	in.mode = 02767;                                  /* not group-executable */
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_MODE, &in, &out, &old));
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_KILL_SUIDGID, &in, &out,
					      &old));
	ORCH_CHECK(out.mode == (S_IFREG | 02767));       /* a member of the group keeps it */
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_SIZE, &in, &out, &old));
	ORCH_CHECK(out.mode == (S_IFREG | 0767));        /* not a member: gone */
	in.mode = 04700;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_MODE, &in, &out, &old));
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_KILL_SUIDGID, &in, &out,
					      &old), -EACCES);
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f,
					      ORCH_SET_KILL_SUIDGID | ORCH_SET_HANDLE, &in, &out,
					      &old));
	ORCH_CHECK(out.mode == (S_IFREG | 0700));
	in.mode = 0755;
	in.size = 10;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_MODE | ORCH_SET_SIZE, &in,
					      &out, &old));

	/* times: explicit needs the owner, "now" is enough with write access. */
	in.atime_ns = 1000;
	in.mtime_ns = 2000;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_ATIME | ORCH_SET_MTIME,
					      &in, &out, &old));
	ORCH_CHECK(out.atime_ns == 1000 && out.mtime_ns == 2000 && out.ctime_ns > 2000);
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_MTIME, &in, &out, &old),
		      -EPERM);
	in.mode = 0666;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_MODE, &in, &out, &old));
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f,
					      ORCH_SET_ATIME_NOW | ORCH_SET_MTIME_NOW, &in,
					      &out, &old));
	ORCH_CHECK(out.atime_ns > 2000 && out.mtime_ns > 2000);
	in.mode = 0644;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_MODE, &in, &out, &old));
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_MTIME_NOW, &in, &out,
					      &old), -EACCES);
	ORCH_CHECK_OK(orch_meta_inode_get(M, f, &a));
	ORCH_CHECK(a.mode == (S_IFREG | 0644) && a.uid == 1001 && a.size == 10);
	fx_teardown();
}

/* Has @h the file-capability xattr? */
static bool has_caps(uint64_t h)
{
	size_t len;

	return orch_meta_xattr_get(M, &ROOT, h, ORCH_XATTR_CAPS, NULL, 0, &len) == 0;
}

static int set_caps(uint64_t h)
{
	static const char caps[20] = { 1, 0, 0, 2, 0, 0x20 };   /* rev. 2, CAP_NET_RAW */

	return orch_meta_xattr_set(M, &ROOT, h, ORCH_XATTR_CAPS, caps, sizeof(caps), 0);
}

ORCH_TEST(killpriv_drops_caps)
{
	struct orch_attr in = { 0 }, out, a;
	uint64_t f, d, old;

	ORCH_CHECK_OK(fx_setup_home(&d, &f));

	/* Anyone may remove it (the kernel checked); only root sets it. */
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ALICE, f, ORCH_XATTR_CAPS, "x", 1, 0), -EPERM);
	ORCH_CHECK_OK(set_caps(f));
	ORCH_CHECK_OK(orch_meta_xattr_remove(M, &BOB, f, ORCH_XATTR_CAPS));
	ORCH_CHECK(!has_caps(f));
	ORCH_CHECK_RC(orch_meta_xattr_remove(M, &BOB, f, ORCH_XATTR_CAPS), -ENODATA);
	ORCH_CHECK_OK(orch_meta_xattr_set(M, &ROOT, f, "security.x", "1", 1, 0));
	ORCH_CHECK_RC(orch_meta_xattr_remove(M, &ALICE, f, "security.x"), -EPERM);

	/* chmod and times keep it. */
	ORCH_CHECK_OK(set_caps(f));
	in.mode = 0666;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_MODE | ORCH_SET_MTIME_NOW,
					      &in, &out, &old));
	ORCH_CHECK(has_caps(f));

	/* A truncate, through a descriptor or not, root's included. */
	in.size = 5;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_SIZE, &in, &out, &old));
	ORCH_CHECK(!has_caps(f));
	ORCH_CHECK_OK(set_caps(f));
	ORCH_CHECK_OK(orch_meta_inode_get(M, f, &a));
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_SIZE | ORCH_SET_HANDLE, &in,
					      &out, &old));
	ORCH_CHECK(!has_caps(f) && out.ctime_ns > a.ctime_ns);

	/* A write (KILL_SUIDGID) without set-id bits to take: still a change. */
	ORCH_CHECK_OK(set_caps(f));
	ORCH_CHECK_OK(orch_meta_inode_get(M, f, &a));
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &BOB, f, ORCH_SET_KILL_SUIDGID, &in, &out,
					      &old));
	ORCH_CHECK(!has_caps(f) && out.mode == (S_IFREG | 0666) && out.ctime_ns > a.ctime_ns);

	/* A chgrp by the owner, a chown by root. */
	ORCH_CHECK_OK(set_caps(f));
	in.gid = 1000;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ALICE, f, ORCH_SET_GID, &in, &out, &old));
	ORCH_CHECK(!has_caps(f));
	ORCH_CHECK_OK(set_caps(f));
	in.uid = 1001;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_UID, &in, &out, &old));
	ORCH_CHECK(!has_caps(f));

	/* A directory keeps it at a chown. */
	ORCH_CHECK_OK(set_caps(d));
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, d, ORCH_SET_UID, &in, &out, &old));
	ORCH_CHECK(has_caps(d));

	/* A setattr that fails after the drop leaves it. */
	in.size = 0;
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_SIZE, &in, &out, &old));
	ORCH_CHECK_OK(set_caps(f));
	in.layout = (struct orch_layout){ .strip_size = 4096, .stripe_count = 0 };
	ORCH_CHECK_RC(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_SIZE | ORCH_SET_LAYOUT, &in,
					      &out, &old), -EINVAL);
	ORCH_CHECK(has_caps(f));
	fx_teardown();
}

ORCH_TEST(extend_and_access)
{
	struct orch_cred carol = { .uid = 1002, .gid = 1002, .ngroups = 2, .groups = { 3, 1000 } };
	struct orch_attr out;
	uint64_t f, x, d;

	ORCH_CHECK_OK(fx_setup(0));
	f = mk(&ROOT, 1, "f", S_IFREG | 0640);
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, f, ORCH_SET_GID,
					      &(struct orch_attr){ .gid = 1000 }, &out,
					      &(uint64_t){ 0 }));
	ORCH_CHECK_OK(orch_meta_inode_extend(M, f, 5000, 0, &out));
	ORCH_CHECK(out.size == 5000);
	ORCH_CHECK_OK(orch_meta_inode_extend(M, f, 3000, 77, &out));
	ORCH_CHECK(out.size == 5000 && out.mtime_ns == 77 && out.ctime_ns == 77);
	ORCH_CHECK_RC(orch_meta_inode_extend(M, 1, 10, 0, &out), -EISDIR);
	ORCH_CHECK_RC(orch_meta_inode_extend(M, 4242, 10, 0, &out), -ENOENT);

	ORCH_CHECK_OK(orch_meta_access(M, &ROOT, f, R_OK | W_OK));
	ORCH_CHECK_RC(orch_meta_access(M, &ROOT, f, X_OK), -EACCES);
	ORCH_CHECK_OK(orch_meta_access(M, &ROOT, 1, X_OK));
	ORCH_CHECK_OK(orch_meta_access(M, &carol, f, R_OK));          /* group via groups[] */
	ORCH_CHECK_RC(orch_meta_access(M, &carol, f, W_OK), -EACCES);
	ORCH_CHECK_RC(orch_meta_access(M, &BOB, f, R_OK), -EACCES);
	ORCH_CHECK_OK(orch_meta_access(M, &BOB, f, F_OK));
	ORCH_CHECK_RC(orch_meta_access(M, &BOB, f, 8), -EINVAL);
	x = mk(&ROOT, 1, "x", S_IFREG | 0001);
	ORCH_CHECK_OK(orch_meta_access(M, &ROOT, x, X_OK));
	ORCH_CHECK_OK(orch_meta_access(M, &BOB, x, X_OK));
	/* The owner class alone decides for the owner. */
	ORCH_CHECK_RC(orch_meta_create(M, &ALICE, 1, "d", 1, S_IFDIR | 0077, 0, NULL, NULL,
				       true, &out, &(bool){ false }), -EACCES);
	d = mk(&ROOT, 1, "d", S_IFDIR | 0077);
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, d, ORCH_SET_UID,
					      &(struct orch_attr){ .uid = 1000 }, &out,
					      &(uint64_t){ 0 }));
	ORCH_CHECK_RC(orch_meta_access(M, &ALICE, d, R_OK), -EACCES);
	ORCH_CHECK_OK(orch_meta_access(M, &BOB, d, R_OK | W_OK | X_OK));
	fx_teardown();
}

/* --- Link counts, unlink, rmdir ------------------------------------------------------ */

ORCH_TEST(hard_links_and_unlink)
{
	struct orch_attr out;
	uint64_t f, d;
	bool remote, freed;

	ORCH_CHECK_OK(fx_setup(0));
	f = mk(&ROOT, 1, "f", S_IFREG | 0644);
	d = mk(&ROOT, 1, "d", S_IFDIR | 0755);
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, &ROOT, d, "f2", 2, f, S_IFREG));
	ORCH_CHECK(nlink_of(f) == 1); /* insert leaves the count to the caller */
	ORCH_CHECK_OK(orch_meta_inode_nlink_adjust(M, f, +1, &out, &freed));
	ORCH_CHECK(out.nlink == 2 && !freed);
	ORCH_CHECK_RC(orch_meta_dirent_insert(M, &ROOT, d, "f2", 2, f, S_IFREG), -EEXIST);
	ORCH_CHECK_RC(orch_meta_dirent_insert(M, &ALICE, d, "f3", 2, f, S_IFREG), -EACCES);
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, NULL, d, "f3", 2, f, S_IFREG));
	ORCH_CHECK_OK(unlink_(d, "f3", &remote, &freed));
	ORCH_CHECK(!remote && !freed && nlink_of(f) == 1);
	ORCH_CHECK_OK(orch_meta_inode_nlink_adjust(M, f, +1, &out, &freed));
	ORCH_CHECK_RC(orch_meta_inode_nlink_adjust(M, f, 2, &out, &freed), -EINVAL);
	ORCH_CHECK_RC(orch_meta_inode_nlink_adjust(M, d, -1, &out, &freed), -EISDIR);
	ORCH_CHECK_RC(orch_meta_inode_nlink_adjust(M, 777, -1, &out, &freed), -ENOENT);

	ORCH_CHECK_OK(orch_meta_xattr_set(M, &ROOT, f, "user.k", "v", 1, 0));
	ORCH_CHECK_OK(unlink_(1, "f", &remote, &freed));
	ORCH_CHECK(!remote && !freed && nlink_of(f) == 1);
	ORCH_CHECK_OK(unlink_(d, "f2", &remote, &freed));
	ORCH_CHECK(!remote && freed);
	ORCH_CHECK_RC(orch_meta_inode_get(M, f, &out), -ENOENT);
	ORCH_CHECK_RC(unlink_(d, "f2", &remote, &freed), -ENOENT);

	/* An entry naming an inode on another server. */
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, &ROOT, d, "far", 3,
					      orch_handle_make(2, 9), S_IFREG));
	ORCH_CHECK_OK(unlink_(d, "far", &remote, &freed));
	ORCH_CHECK(remote && !freed);
	fx_teardown();
}

ORCH_TEST(dir_nlink_and_rmdir)
{
	struct orch_dirent de;
	uint64_t a, b;
	bool remote, freed;

	ORCH_CHECK_OK(fx_setup(0));
	a = mk(&ROOT, 1, "a", S_IFDIR | 0755);
	b = mk(&ROOT, a, "b", S_IFDIR | 0755);
	ORCH_CHECK(mk(&ROOT, a, "file", S_IFREG | 0644));
	ORCH_CHECK(nlink_of(1) == 3 && nlink_of(a) == 3 && nlink_of(b) == 2);

	ORCH_CHECK_RC(check_rm(&ROOT, 1, "a", true), -ENOTEMPTY);
	ORCH_CHECK_RC(check_rm(&ROOT, 1, "a", false), -EISDIR);
	ORCH_CHECK_RC(check_rm(&ROOT, a, "file", true), -ENOTDIR);
	ORCH_CHECK_RC(check_rm(&ROOT, a, "nope", true), -ENOENT);
	ORCH_CHECK_RC(check_rm(&ALICE, a, "file", false), -EACCES);
	ORCH_CHECK_OK(orch_meta_unlink_check(M, &ROOT, a, "b", 1, true, &de));
	ORCH_CHECK(de.handle == b && de.type == S_IFDIR && de.has_attr);
	ORCH_CHECK_OK(unlink_(a, "b", &remote, &freed));
	ORCH_CHECK(!remote && !freed && nlink_of(a) == 2);
	ORCH_CHECK_RC(orch_meta_inode_get(M, b, &de.attr), -ENOENT);
	/* orch_meta_unlink rechecks emptiness of a local directory. */
	ORCH_CHECK_RC(unlink_(1, "a", &remote, &freed), -ENOTEMPTY);
	ORCH_CHECK_OK(unlink_(a, "file", &remote, &freed));
	ORCH_CHECK(freed);
	ORCH_CHECK_OK(unlink_(1, "a", &remote, &freed));
	ORCH_CHECK(nlink_of(1) == 2);
	fx_teardown();
}

/* The source side of a cross-server rename: the entry goes, the inode stays. */
ORCH_TEST(dirent_remove_keeps_the_inode)
{
	struct orch_dirent de;
	uint64_t f, d, sub;

	ORCH_CHECK_OK(fx_setup(0));
	d = mk(&ROOT, 1, "d", S_IFDIR | 0755);
	f = mk(&ROOT, d, "f", S_IFREG | 0644);
	sub = mk(&ROOT, d, "sub", S_IFDIR | 0755);
	ORCH_CHECK(nlink_of(d) == 3);
	ORCH_CHECK_OK(orch_meta_dirent_set_busy(M, d, "f", 1, true));
	ORCH_CHECK_OK(orch_meta_dirent_remove(M, d, "f", 1)); /* busy is accepted */
	ORCH_CHECK(nlink_of(f) == 1);
	ORCH_CHECK_RC(orch_meta_lookup(M, &ROOT, d, "f", 1, &de), -ENOENT);
	ORCH_CHECK_OK(orch_meta_dirent_remove(M, d, "sub", 3));
	ORCH_CHECK(nlink_of(d) == 2 && nlink_of(sub) == 2);
	ORCH_CHECK_RC(orch_meta_dirent_remove(M, d, "sub", 3), -ENOENT);
	ORCH_CHECK_OK(orch_meta_dirent_reserve(M, &ROOT, d, "p", 1, S_IFREG));
	ORCH_CHECK_RC(orch_meta_dirent_remove(M, d, "p", 1), -EBUSY);
	fx_teardown();
}

ORCH_TEST(sticky_directory)
{
	struct orch_attr in = { .mode = 01777 }, out;
	struct orch_cred dave = { .uid = 1003, .gid = 1003 };
	struct orch_dirent de;
	uint64_t tmp, old;

	ORCH_CHECK_OK(fx_setup(0));
	tmp = mk(&ROOT, 1, "tmp", S_IFDIR | 0777);
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, tmp, ORCH_SET_MODE, &in, &out, &old));
	ORCH_CHECK(mk(&ALICE, tmp, "af", S_IFREG | 0666));
	ORCH_CHECK(mk(&ALICE, tmp, "ad", S_IFDIR | 0777));
	ORCH_CHECK(mk(&BOB, tmp, "bf", S_IFREG | 0666));

	ORCH_CHECK_RC(check_rm(&BOB, tmp, "af", false), -EPERM);
	ORCH_CHECK_RC(check_rm(&BOB, tmp, "ad", true), -EPERM);
	ORCH_CHECK_OK(check_rm(&ALICE, tmp, "af", false));
	ORCH_CHECK_OK(check_rm(&ROOT, tmp, "af", false));
	ORCH_CHECK_RC(rn(&BOB, tmp, "af", tmp, "mine", 0, NULL), -EPERM);
	/* Replacing someone else's file is removing it. */
	ORCH_CHECK_RC(rn(&BOB, tmp, "bf", tmp, "af", 0, NULL), -EPERM);
	ORCH_CHECK_OK(rn(&ALICE, tmp, "af", tmp, "af2", 0, NULL));
	/* The directory's owner may remove anything in it. */
	ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, tmp, ORCH_SET_UID,
					      &(struct orch_attr){ .uid = 1003 }, &out, &old));
	ORCH_CHECK_OK(check_rm(&dave, tmp, "af2", false));
	/* A child held elsewhere: the owner check is the caller's (-EREMOTE). */
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, NULL, tmp, "far", 3,
					      orch_handle_make(3, 1), S_IFREG));
	ORCH_CHECK_RC(orch_meta_unlink_check(M, &BOB, tmp, "far", 3, false, &de), -EREMOTE);
	ORCH_CHECK(de.handle == orch_handle_make(3, 1) && !de.has_attr);
	ORCH_CHECK_OK(check_rm(&dave, tmp, "far", false));
	fx_teardown();
}

/* --- Rename ------------------------------------------------------------------------ */

ORCH_TEST(rename_files)
{
	struct orch_dirent de;
	struct rn_out o;
	uint64_t a, b, c, d;
	bool freed;

	ORCH_CHECK_OK(fx_setup(0));
	a = mk(&ROOT, 1, "a", S_IFREG | 0644);
	b = mk(&ROOT, 1, "b", S_IFREG | 0644);
	d = mk(&ROOT, 1, "d", S_IFDIR | 0755);

	/* Plain move and move to another directory. */
	ORCH_CHECK_OK(rn(&ROOT, 1, "a", 1, "a1", 0, &o));
	ORCH_CHECK(handle_of(1, "a1") == a && handle_of(1, "a") == 0);
	ORCH_CHECK(o.freed == 0 && o.victim == 0 && o.moved == 0);
	ORCH_CHECK_OK(rn(&ROOT, 1, "a1", d, "a", 0, &o));
	ORCH_CHECK(handle_of(d, "a") == a && nlink_of(d) == 2);
	ORCH_CHECK_RC(rn(&ROOT, 1, "a1", 1, "x", 0, NULL), -ENOENT);

	/* Overwrite: the victim's last link goes, the caller frees its data. */
	ORCH_CHECK_OK(rn(&ROOT, d, "a", 1, "b", 0, &o));
	ORCH_CHECK(o.freed == b && handle_of(1, "b") == a);
	ORCH_CHECK_RC(orch_meta_inode_get(M, b, &de.attr), -ENOENT);

	/* Overwrite a victim with another link: it only loses one. */
	c = mk(&ROOT, 1, "c", S_IFREG | 0644);
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, &ROOT, d, "c2", 2, c, S_IFREG));
	ORCH_CHECK_OK(orch_meta_inode_nlink_adjust(M, c, +1, &de.attr, &freed));
	ORCH_CHECK_OK(rn(&ROOT, 1, "b", 1, "c", 0, &o));
	ORCH_CHECK(o.freed == 0 && nlink_of(c) == 1 && handle_of(1, "c") == a);

	/* Two names of one inode: nothing happens, both stay. */
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, &ROOT, d, "a-link", 6, a, S_IFREG));
	ORCH_CHECK_OK(rn(&ROOT, 1, "c", d, "a-link", 0, &o));
	ORCH_CHECK(handle_of(1, "c") == a && handle_of(d, "a-link") == a);
	ORCH_CHECK_OK(rn(&ROOT, 1, "c", 1, "c", 0, &o));

	/* NOREPLACE, bad flags, a victim on another server. */
	ORCH_CHECK_RC(rn(&ROOT, 1, "c", d, "c2", RENAME_NOREPLACE, NULL), -EEXIST);
	ORCH_CHECK_OK(rn(&ROOT, 1, "c", d, "fresh", RENAME_NOREPLACE, NULL));
	ORCH_CHECK_RC(rn(&ROOT, d, "fresh", d, "x", RENAME_NOREPLACE | RENAME_EXCHANGE, NULL),
		      -EINVAL);
	ORCH_CHECK_RC(rn(&ROOT, d, "fresh", d, "x", 4, NULL), -EINVAL);
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, &ROOT, d, "far", 3, orch_handle_make(1, 5),
					      S_IFREG));
	ORCH_CHECK_OK(rn(&ROOT, d, "fresh", d, "far", 0, &o));
	ORCH_CHECK(o.victim == orch_handle_make(1, 5) && o.victim_type == S_IFREG);
	ORCH_CHECK(o.freed == 0);

	/* Permissions on both parents. */
	ORCH_CHECK_RC(rn(&ALICE, d, "far", d, "x", 0, NULL), -EACCES);
	ORCH_CHECK_RC(rn(&ROOT, d, "bad/name", d, "x", 0, NULL), -EINVAL);
	fx_teardown();
}

ORCH_TEST(rename_directories)
{
	struct orch_attr at;
	struct rn_out o;
	uint64_t p1, p2, x, e, full, f;

	ORCH_CHECK_OK(fx_setup(0));
	p1 = mk(&ROOT, 1, "p1", S_IFDIR | 0755);
	p2 = mk(&ROOT, 1, "p2", S_IFDIR | 0755);
	x = mk(&ROOT, p1, "x", S_IFDIR | 0755);
	ORCH_CHECK(nlink_of(p1) == 3 && nlink_of(p2) == 2);

	/* Moved between parents: nlinks follow, parent pointer updated. */
	ORCH_CHECK_OK(rn(&ROOT, p1, "x", p2, "x", 0, &o));
	ORCH_CHECK(nlink_of(p1) == 2 && nlink_of(p2) == 3);
	ORCH_CHECK_OK(orch_meta_inode_get(M, x, &at));
	ORCH_CHECK(at.parent == p2 && o.moved == 0);

	/* Over an empty directory: it is deleted, counts stay right. */
	e = mk(&ROOT, p1, "e", S_IFDIR | 0755);
	ORCH_CHECK_OK(rn(&ROOT, p2, "x", p1, "e", 0, &o));
	ORCH_CHECK(nlink_of(p1) == 3 && nlink_of(p2) == 2);
	ORCH_CHECK_RC(orch_meta_inode_get(M, e, &at), -ENOENT);
	ORCH_CHECK(handle_of(p1, "e") == x && o.freed == 0);

	/* Over a non-empty directory, a file over a dir, a dir over a file. */
	full = mk(&ROOT, p2, "full", S_IFDIR | 0755);
	ORCH_CHECK(mk(&ROOT, full, "inside", S_IFREG | 0644));
	f = mk(&ROOT, p2, "f", S_IFREG | 0644);
	ORCH_CHECK(f);
	ORCH_CHECK_RC(rn(&ROOT, p1, "e", p2, "full", 0, NULL), -ENOTEMPTY);
	ORCH_CHECK_RC(rn(&ROOT, p2, "f", p1, "e", 0, NULL), -EISDIR);
	ORCH_CHECK_RC(rn(&ROOT, p1, "e", p2, "f", 0, NULL), -ENOTDIR);
	/* Into itself (the caller's check, guarded cheaply here). */
	ORCH_CHECK_RC(rn(&ROOT, 1, "p1", p1, "self", 0, NULL), -EINVAL);

	/* Same parent, over an empty dir: one subdirectory fewer. */
	ORCH_CHECK(mk(&ROOT, p2, "empty", S_IFDIR | 0755));
	ORCH_CHECK(nlink_of(p2) == 4);
	ORCH_CHECK_OK(rn(&ROOT, p2, "full", p2, "empty", 0, NULL));
	ORCH_CHECK(nlink_of(p2) == 3 && handle_of(p2, "empty") == full);

	/* A directory whose inode is elsewhere: reported, not touched. */
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, &ROOT, p1, "remote", 6,
					      orch_handle_make(2, 3), S_IFDIR));
	ORCH_CHECK(nlink_of(p1) == 4);
	ORCH_CHECK_OK(rn(&ROOT, p1, "remote", p2, "remote", 0, &o));
	ORCH_CHECK(o.moved == orch_handle_make(2, 3));
	ORCH_CHECK(nlink_of(p1) == 3 && nlink_of(p2) == 4);
	/* ...and as a victim, reported with its type for the remote check. */
	ORCH_CHECK_OK(rn(&ROOT, p1, "e", p2, "remote", 0, &o));
	ORCH_CHECK(o.victim == orch_handle_make(2, 3) && o.victim_type == S_IFDIR);
	ORCH_CHECK(nlink_of(p1) == 2 && nlink_of(p2) == 4);

	/* Write permission on a directory that changes parent. */
	{
		struct orch_attr in = { .mode = 0777 }, out;
		uint64_t old, mine;

		ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, p1, ORCH_SET_MODE, &in, &out,
						      &old));
		ORCH_CHECK_OK(orch_meta_inode_setattr(M, &ROOT, p2, ORCH_SET_MODE, &in, &out,
						      &old));
		mine = mk(&ALICE, p1, "mine", S_IFDIR | 0555);
		ORCH_CHECK(mine);
		ORCH_CHECK_RC(rn(&ALICE, p1, "mine", p2, "mine", 0, NULL), -EACCES);
		ORCH_CHECK_OK(rn(&ALICE, p1, "mine", p1, "mine2", 0, NULL));
	}
	fx_teardown();
}

ORCH_TEST(rename_exchange)
{
	struct orch_attr at;
	struct rn_out o;
	uint64_t p1, p2, f, d;

	ORCH_CHECK_OK(fx_setup(0));
	p1 = mk(&ROOT, 1, "p1", S_IFDIR | 0755);
	p2 = mk(&ROOT, 1, "p2", S_IFDIR | 0755);
	f = mk(&ROOT, p1, "f", S_IFREG | 0644);
	d = mk(&ROOT, p2, "d", S_IFDIR | 0755);
	ORCH_CHECK(nlink_of(p1) == 2 && nlink_of(p2) == 3);

	ORCH_CHECK_RC(rn(&ROOT, p1, "f", p2, "none", RENAME_EXCHANGE, NULL), -ENOENT);
	ORCH_CHECK_RC(rn(&ROOT, p1, "none", p2, "d", RENAME_EXCHANGE, NULL), -ENOENT);
	ORCH_CHECK_OK(rn(&ROOT, p1, "f", p2, "d", RENAME_EXCHANGE, &o));
	ORCH_CHECK(handle_of(p1, "f") == d && handle_of(p2, "d") == f);
	ORCH_CHECK(nlink_of(p1) == 3 && nlink_of(p2) == 2);
	ORCH_CHECK(nlink_of(f) == 1 && nlink_of(d) == 2);
	ORCH_CHECK_OK(orch_meta_inode_get(M, d, &at));
	ORCH_CHECK(at.parent == p1);
	ORCH_CHECK(o.freed == 0 && o.victim == 0 && o.moved == 0);

	/* Exchange in one directory, and of a directory held elsewhere. */
	ORCH_CHECK_OK(rn(&ROOT, p1, "f", p1, "f", RENAME_EXCHANGE, &o));
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, &ROOT, p2, "far", 3, orch_handle_make(1, 8),
					      S_IFDIR));
	ORCH_CHECK_OK(rn(&ROOT, p1, "f", p2, "far", RENAME_EXCHANGE, &o));
	ORCH_CHECK(handle_of(p1, "f") == orch_handle_make(1, 8) && handle_of(p2, "far") == d);
	ORCH_CHECK(o.victim == orch_handle_make(1, 8) && o.victim_type == S_IFDIR);
	ORCH_CHECK_OK(orch_meta_inode_get(M, d, &at));
	ORCH_CHECK(at.parent == p2);
	ORCH_CHECK(nlink_of(p1) == 3 && nlink_of(p2) == 3);
	fx_teardown();
}

/* --- Cross-server entry states ------------------------------------------------------- */

ORCH_TEST(pending_and_busy_entries)
{
	struct orch_dirent de, ents[8];
	struct orch_attr a;
	uint32_t n;
	bool eof, existed, remote, freed;
	uint64_t child = orch_handle_make(2, 40), f;

	ORCH_CHECK_OK(fx_setup(0));
	ORCH_CHECK_OK(orch_meta_dirent_reserve(M, &ROOT, 1, "new", 3, S_IFDIR));
	ORCH_CHECK_RC(orch_meta_dirent_reserve(M, &ROOT, 1, "new", 3, S_IFDIR), -EEXIST);
	ORCH_CHECK_RC(orch_meta_dirent_reserve(M, &ALICE, 1, "other", 5, S_IFDIR), -EACCES);
	ORCH_CHECK_RC(orch_meta_dirent_reserve(M, &ROOT, 1, "t", 1, 0), -EINVAL);
	ORCH_CHECK_RC(lookup(&ROOT, 1, "new", &de), -ENOENT);
	ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, 1, 0, 8, false, ents, &n, &eof));
	ORCH_CHECK(n == 0 && eof);
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, "new", 3, S_IFREG | 0644, 0, NULL, NULL,
				       false, &a, &existed), -EEXIST);
	ORCH_CHECK_RC(check_rm(&ROOT, 1, "new", true), -EBUSY);
	ORCH_CHECK_RC(unlink_(1, "new", &remote, &freed), -EBUSY);
	ORCH_CHECK_RC(rn(&ROOT, 1, "new", 1, "x", 0, NULL), -EBUSY);
	ORCH_CHECK_RC(orch_meta_dirent_set_busy(M, 1, "new", 3, true), -EBUSY);

	ORCH_CHECK_OK(orch_meta_dirent_commit(M, 1, "new", 3, child));
	ORCH_CHECK_OK(orch_meta_dirent_commit(M, 1, "new", 3, child)); /* replayed */
	ORCH_CHECK_RC(orch_meta_dirent_commit(M, 1, "new", 3, child + 1), -EEXIST);
	ORCH_CHECK_OK(lookup(&ROOT, 1, "new", &de));
	ORCH_CHECK(de.handle == child && de.type == S_IFDIR && !de.has_attr);
	ORCH_CHECK(nlink_of(1) == 3);

	/* A dropped reservation leaves nothing; dropping twice is fine. */
	ORCH_CHECK_OK(orch_meta_dirent_reserve(M, &ROOT, 1, "gone", 4, S_IFREG));
	ORCH_CHECK_OK(orch_meta_dirent_commit(M, 1, "gone", 4, 0));
	ORCH_CHECK_OK(orch_meta_dirent_commit(M, 1, "gone", 4, 0));
	ORCH_CHECK_RC(orch_meta_dirent_commit(M, 1, "gone", 4, child), -ENOENT);
	ORCH_CHECK(nlink_of(1) == 3);

	/* Busy: visible, but other mutations get EBUSY. */
	f = mk(&ROOT, 1, "f", S_IFREG | 0644);
	ORCH_CHECK_OK(orch_meta_dirent_set_busy(M, 1, "f", 1, true));
	ORCH_CHECK_OK(lookup(&ROOT, 1, "f", &de));
	ORCH_CHECK(de.handle == f);
	ORCH_CHECK_RC(orch_meta_dirent_set_busy(M, 1, "f", 1, true), -EBUSY);
	ORCH_CHECK_RC(check_rm(&ROOT, 1, "f", false), -EBUSY);
	ORCH_CHECK_RC(rn(&ROOT, 1, "f", 1, "g", 0, NULL), -EBUSY);
	ORCH_CHECK_RC(rn(&ROOT, 1, "new", 1, "f", 0, NULL), -EBUSY);
	ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, 1, 0, 8, false, ents, &n, &eof));
	ORCH_CHECK(n == 2 && eof);
	ORCH_CHECK_OK(orch_meta_dirent_set_busy(M, 1, "f", 1, false));
	ORCH_CHECK_OK(orch_meta_dirent_set_busy(M, 1, "f", 1, false));
	ORCH_CHECK_OK(check_rm(&ROOT, 1, "f", false));
	ORCH_CHECK_RC(orch_meta_dirent_set_busy(M, 1, "zz", 2, true), -ENOENT);
	fx_teardown();
}

/* --- readdir --------------------------------------------------------------------- */

#define RD_N 120

/*
 * Lists in small batches while entries are removed (some already returned,
 * some not yet) and added.  Every entry present for the whole listing must
 * come back exactly once; none may come back twice.
 */
ORCH_TEST(readdir_cursor_stability)
{
	struct orch_dirent ents[7];
	int seen[RD_N + 100] = { 0 };
	bool removed[RD_N] = { false };
	uint64_t d, cookie = 0, last = 0;
	char name[32];
	int batch = 0, added = 0;
	bool eof = false;
	bool remote, freed;
	uint32_t n;

	ORCH_CHECK_OK(fx_setup(0));
	d = mk(&ROOT, 1, "d", S_IFDIR | 0755);
	for (int i = 0; i < RD_N; i++) {
		snprintf(name, sizeof(name), "e%03d", i);
		ORCH_CHECK(mk(&ROOT, d, name, S_IFREG | 0644));
	}
	ORCH_CHECK_OK(orch_meta_dirent_reserve(M, &ROOT, d, "pending", 7, S_IFREG));
	while (!eof) {
		ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, d, cookie, 7, false, ents, &n, &eof));
		ORCH_CHECK(n <= 7 && (n > 0 || eof));
		for (uint32_t i = 0; i < n; i++) {
			int idx;

			ORCH_CHECK(ents[i].cookie > last);
			last = ents[i].cookie;
			ORCH_CHECK(strcmp(ents[i].name, "pending") != 0);
			if (ents[i].name[0] == 'e') {
				idx = atoi(ents[i].name + 1);
			} else {
				ORCH_CHECK(ents[i].name[0] == 'n');
				idx = RD_N + atoi(ents[i].name + 1);
			}
			seen[idx]++;
		}
		if (n)
			cookie = ents[n - 1].cookie;
		/* Churn: remove one behind and one ahead, rename one, add one. */
		batch++;
		for (int k = 0; k < 2; k++) {
			int victim = (batch * 37 + k * 53) % RD_N;

			snprintf(name, sizeof(name), "e%03d", victim);
			if (!removed[victim] && !unlink_(d, name, &remote, &freed))
				removed[victim] = true;
		}
		if (added < 100) {
			snprintf(name, sizeof(name), "n%03d", added++);
			ORCH_CHECK(mk(&ROOT, d, name, S_IFREG | 0644));
		}
	}
	for (int i = 0; i < RD_N; i++) {
		ORCH_CHECK(seen[i] <= 1);
		if (!removed[i])
			ORCH_CHECK(seen[i] == 1);
	}
	for (int i = 0; i < added; i++)
		ORCH_CHECK(seen[RD_N + i] <= 1);
	/* Entries added after the listing passed their place are the newest, so seen. */
	ORCH_CHECK(seen[RD_N] == 1);

	/* Restarting from a stale cookie of a removed entry still works. */
	ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, d, 1, 7, false, ents, &n, &eof));
	ORCH_CHECK(n == 7 && ents[0].cookie > 1 && !eof);
	/* A cookie past the end, and beyond INT64_MAX. */
	ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, d, 1u << 30, 7, false, ents, &n, &eof));
	ORCH_CHECK(n == 0 && eof);
	ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, d, UINT64_MAX, 7, false, ents, &n, &eof));
	ORCH_CHECK(n == 0 && eof);
	ORCH_CHECK_RC(orch_meta_readdir(M, &ROOT, d, 0, 0, false, ents, &n, &eof), -EINVAL);
	ORCH_CHECK_RC(orch_meta_readdir(M, &ROOT, handle_of(d, "n000"), 0, 7, false, ents,
					&n, &eof), -ENOTDIR);
	fx_teardown();
}

ORCH_TEST(readdirplus_attrs)
{
	struct orch_dirent ents[8];
	struct orch_attr a;
	uint64_t d, f, s;
	uint32_t n;
	bool eof;

	ORCH_CHECK_OK(fx_setup(0));
	d = mk(&ROOT, 1, "d", S_IFDIR | 0755);
	f = mk(&ROOT, d, "f", S_IFREG | 0600);
	s = mk(&ROOT, d, "s", S_IFDIR | 0700);
	ORCH_CHECK_OK(orch_meta_inode_extend(M, f, 4321, 0, &a));
	ORCH_CHECK_OK(orch_meta_dirent_insert(M, &ROOT, d, "far", 3, orch_handle_make(3, 2),
					      S_IFREG));
	ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, d, 0, 8, true, ents, &n, &eof));
	ORCH_CHECK(n == 3 && eof);
	ORCH_CHECK(strcmp(ents[0].name, "f") == 0 && ents[0].has_attr);
	ORCH_CHECK(ents[0].attr.size == 4321 && ents[0].attr.handle == f);
	ORCH_CHECK(ents[0].attr.mode == (S_IFREG | 0600) && ents[0].type == S_IFREG);
	ORCH_CHECK(ents[1].handle == s && ents[1].has_attr && ents[1].attr.nlink == 2);
	ORCH_CHECK(ents[2].handle == orch_handle_make(3, 2) && !ents[2].has_attr);
	ORCH_CHECK(ents[2].type == S_IFREG);
	ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, d, 0, 8, false, ents, &n, &eof));
	ORCH_CHECK(n == 3 && !ents[0].has_attr);
	/* An exact fit reports eof only when nothing is left. */
	ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, d, 0, 3, true, ents, &n, &eof));
	ORCH_CHECK(n == 3 && eof);
	ORCH_CHECK_OK(orch_meta_readdir(M, &ROOT, d, 0, 2, true, ents, &n, &eof));
	ORCH_CHECK(n == 2 && !eof);
	fx_teardown();
}

/* --- Extended attributes ---------------------------------------------------------- */

ORCH_TEST(xattrs)
{
	char buf[256], big[ORCH_XATTR_SIZE_MAX + 1];
	size_t len;
	uint64_t f, l;

	ORCH_CHECK_OK(fx_setup(0));
	f = mk(&ALICE, mk(&ROOT, 1, "home", S_IFDIR | 0777), "f", S_IFREG | 0644);
	ORCH_CHECK(f);
	ORCH_CHECK_OK(orch_meta_xattr_set(M, &ALICE, f, "user.color", "blue", 4,
					  XATTR_CREATE));
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ALICE, f, "user.color", "red", 3, XATTR_CREATE),
		      -EEXIST);
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ALICE, f, "user.none", "x", 1, XATTR_REPLACE),
		      -ENODATA);
	ORCH_CHECK_OK(orch_meta_xattr_set(M, &ALICE, f, "user.color", "green", 5,
					  XATTR_REPLACE));
	ORCH_CHECK_OK(orch_meta_xattr_set(M, &ALICE, f, "user.empty", NULL, 0, 0));

	/* Size query, exact fit, too small. */
	ORCH_CHECK_OK(orch_meta_xattr_get(M, &ALICE, f, "user.color", NULL, 0, &len));
	ORCH_CHECK(len == 5);
	ORCH_CHECK_OK(orch_meta_xattr_get(M, &BOB, f, "user.color", buf, 5, &len));
	ORCH_CHECK(len == 5 && memcmp(buf, "green", 5) == 0);
	ORCH_CHECK_RC(orch_meta_xattr_get(M, &ALICE, f, "user.color", buf, 4, &len), -ERANGE);
	ORCH_CHECK_OK(orch_meta_xattr_get(M, &ALICE, f, "user.empty", buf, sizeof(buf), &len));
	ORCH_CHECK(len == 0);
	ORCH_CHECK_RC(orch_meta_xattr_get(M, &ALICE, f, "user.none", buf, sizeof(buf), &len),
		      -ENODATA);

	/* Namespaces and permissions. */
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &BOB, f, "user.x", "1", 1, 0), -EACCES);
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ALICE, f, "trusted.x", "1", 1, 0), -EPERM);
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ALICE, f, "security.x", "1", 1, 0), -EPERM);
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ALICE, f, "system.x", "1", 1, 0), -EOPNOTSUPP);
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ALICE, f, "user.", "1", 1, 0), -EINVAL);
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ALICE, f, "user.x", "1", 1, 3), -EINVAL);
	ORCH_CHECK_OK(orch_meta_xattr_set(M, &ROOT, f, "trusted.t", "1", 1, 0));
	ORCH_CHECK_OK(orch_meta_xattr_set(M, &ROOT, f, "security.s", "22", 2, 0));
	ORCH_CHECK_RC(orch_meta_xattr_get(M, &ALICE, f, "trusted.t", buf, sizeof(buf), &len),
		      -ENODATA);
	ORCH_CHECK_OK(orch_meta_xattr_get(M, &ALICE, f, "security.s", buf, sizeof(buf), &len));
	memset(big, 'v', sizeof(big));
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ALICE, f, "user.big", big, sizeof(big), 0),
		      -E2BIG);
	ORCH_CHECK_OK(orch_meta_xattr_set(M, &ALICE, f, "user.big", big, sizeof(big) - 1, 0));
	ORCH_CHECK_OK(orch_meta_xattr_get(M, &ALICE, f, "user.big", NULL, 0, &len));
	ORCH_CHECK(len == ORCH_XATTR_SIZE_MAX);
	ORCH_CHECK_OK(orch_meta_xattr_remove(M, &ALICE, f, "user.big"));
	l = mk(&ROOT, 1, "l", S_IFLNK | 0777);
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ROOT, l, "user.x", "1", 1, 0), -EPERM);
	ORCH_CHECK_RC(orch_meta_xattr_set(M, &ROOT, 999, "user.x", "1", 1, 0), -ENOENT);

	/* list: root sees trusted.*, others do not; size protocol. */
	ORCH_CHECK_OK(orch_meta_xattr_list(M, &ROOT, f, NULL, 0, &len));
	ORCH_CHECK(len == sizeof("security.s") + sizeof("trusted.t") + sizeof("user.color") +
			      sizeof("user.empty"));
	ORCH_CHECK_OK(orch_meta_xattr_list(M, &ROOT, f, buf, sizeof(buf), &len));
	ORCH_CHECK(memcmp(buf, "security.s\0trusted.t\0user.color\0user.empty\0", len) == 0);
	ORCH_CHECK_RC(orch_meta_xattr_list(M, &ROOT, f, buf, len - 1, &len), -ERANGE);
	ORCH_CHECK_OK(orch_meta_xattr_list(M, &BOB, f, buf, sizeof(buf), &len));
	ORCH_CHECK(len == sizeof("security.s") + sizeof("user.color") + sizeof("user.empty"));

	ORCH_CHECK_OK(orch_meta_xattr_remove(M, &ALICE, f, "user.color"));
	ORCH_CHECK_RC(orch_meta_xattr_remove(M, &ALICE, f, "user.color"), -ENODATA);
	ORCH_CHECK_RC(orch_meta_xattr_remove(M, &BOB, f, "user.empty"), -EACCES);
	ORCH_CHECK_RC(orch_meta_xattr_get(M, &ALICE, f, "user.color", buf, sizeof(buf), &len),
		      -ENODATA);
	fx_teardown();
}

/* --- Intents and applied records ------------------------------------------------------ */

struct intent_seen {
	int n;
	uint64_t ids[8];
	uint32_t kinds[8];
	char bodies[8][16];
	int stop_at;
};

static int intent_cb(void *arg, uint64_t id, uint32_t kind, const void *body, size_t len)
{
	struct intent_seen *s = arg;

	if (s->n >= 8 || len >= 16)
		return -EOVERFLOW;
	s->ids[s->n] = id;
	s->kinds[s->n] = kind;
	memcpy(s->bodies[s->n], body, len);
	s->bodies[s->n][len] = '\0';
	if (++s->n == s->stop_at)
		return 42;
	return 0;
}

/* The callback deletes what it visits, as a replay loop does. */
static int intent_cb_delete(void *arg, uint64_t id, uint32_t kind, const void *body,
			    size_t len)
{
	(void)kind, (void)body, (void)len;
	++*(int *)arg;
	return orch_meta_intent_delete(M, id);
}

ORCH_TEST(intents_persist)
{
	struct intent_seen s = { 0 };
	char big[8193] = { 0 };
	uint64_t id1, id2, id3, id4;
	int count = 0;

	ORCH_CHECK_OK(fx_setup(0));
	ORCH_CHECK_OK(orch_meta_intent_insert(M, 1, "one", 3, &id1));
	ORCH_CHECK_OK(orch_meta_intent_insert(M, 2, "two", 3, &id2));
	ORCH_CHECK_OK(orch_meta_intent_insert(M, 3, "three", 5, &id3));
	ORCH_CHECK(id1 < id2 && id2 < id3);
	ORCH_CHECK_RC(orch_meta_intent_insert(M, 4, big, sizeof(big), &id4), -E2BIG);
	ORCH_CHECK_OK(orch_meta_intent_delete(M, id2));
	ORCH_CHECK_RC(orch_meta_intent_delete(M, id2), -ENOENT);

	ORCH_CHECK_OK(fx_reopen());
	ORCH_CHECK_OK(orch_meta_intent_foreach(M, intent_cb, &s));
	ORCH_CHECK(s.n == 2 && s.ids[0] == id1 && s.ids[1] == id3);
	ORCH_CHECK(s.kinds[0] == 1 && strcmp(s.bodies[0], "one") == 0);
	ORCH_CHECK(s.kinds[1] == 3 && strcmp(s.bodies[1], "three") == 0);
	memset(&s, 0, sizeof(s));
	s.stop_at = 1;
	ORCH_CHECK_RC(orch_meta_intent_foreach(M, intent_cb, &s), 42);
	ORCH_CHECK(s.n == 1);

	/* Ids are never reused, even after the newest is deleted and reopened. */
	ORCH_CHECK_OK(orch_meta_intent_delete(M, id3));
	ORCH_CHECK_OK(fx_reopen());
	ORCH_CHECK_OK(orch_meta_intent_insert(M, 5, "", 0, &id4));
	ORCH_CHECK(id4 > id3);
	ORCH_CHECK_OK(orch_meta_intent_foreach(M, intent_cb_delete, &count));
	ORCH_CHECK(count == 2);
	count = 0;
	ORCH_CHECK_OK(orch_meta_intent_foreach(M, intent_cb_delete, &count));
	ORCH_CHECK(count == 0);
	fx_teardown();
}

ORCH_TEST(applied_records)
{
	uint64_t r;

	ORCH_CHECK_OK(fx_setup(0));
	ORCH_CHECK_RC(orch_meta_applied_get(M, 1, 10, &r), -ENOENT);
	for (uint64_t id = 1; id <= 20; id++)
		ORCH_CHECK_OK(orch_meta_applied_put(M, 1, id, id * 100));
	ORCH_CHECK_OK(orch_meta_applied_put(M, 2, 5, 7));
	ORCH_CHECK_OK(orch_meta_applied_put(M, 1, 20, 99)); /* replay overwrites */
	ORCH_CHECK_OK(orch_meta_applied_get(M, 1, 10, &r));
	ORCH_CHECK(r == 1000);
	ORCH_CHECK_OK(orch_meta_applied_get(M, 1, 20, &r));
	ORCH_CHECK(r == 99);
	ORCH_CHECK_OK(orch_meta_applied_trim(M, 1, 15));
	ORCH_CHECK_RC(orch_meta_applied_get(M, 1, 14, &r), -ENOENT);
	ORCH_CHECK_OK(orch_meta_applied_get(M, 1, 15, &r));
	ORCH_CHECK_OK(orch_meta_applied_get(M, 2, 5, &r)); /* other origins untouched */
	ORCH_CHECK(r == 7);
	ORCH_CHECK_OK(orch_meta_applied_put(M, 3, UINT64_MAX, UINT64_MAX));
	ORCH_CHECK_OK(fx_reopen());
	ORCH_CHECK_OK(orch_meta_applied_get(M, 3, UINT64_MAX, &r));
	ORCH_CHECK(r == UINT64_MAX);
	ORCH_CHECK_OK(orch_meta_applied_get(M, 1, 16, &r));
	ORCH_CHECK(r == 1600);
	fx_teardown();
}

/* --- Transactions and counters --------------------------------------------------------- */

ORCH_TEST(transaction_abort_leaves_no_trace)
{
	uint64_t inodes0, next0, inodes, next, commits, f, id;
	struct orch_dirent de;
	struct intent_seen s = { 0 };

	ORCH_CHECK_OK(fx_setup(0));
	f = mk(&ROOT, 1, "keep", S_IFREG | 0644);
	/*
	 * Values a counter reserved in memory and handed to the aborted
	 * transaction are skipped, not given back; the database is unchanged,
	 * which a reopen (forgetting the reservation) shows.
	 */
	ORCH_CHECK_OK(fx_reopen());
	ORCH_CHECK_OK(orch_meta_counts(M, &inodes0, &next0));
	commits = orch_meta_commit_count(M);

	ORCH_CHECK_OK(orch_meta_begin(M));
	ORCH_CHECK(mk(&ROOT, 1, "d", S_IFDIR | 0755));
	ORCH_CHECK(mk(&ROOT, 1, "f", S_IFREG | 0644));
	ORCH_CHECK_OK(orch_meta_intent_insert(M, 9, "x", 1, &id));
	ORCH_CHECK_OK(rn(&ROOT, 1, "keep", 1, "moved", 0, NULL));
	ORCH_CHECK(nlink_of(1) == 3); /* visible inside the transaction */
	orch_meta_abort(M);

	ORCH_CHECK(handle_of(1, "d") == 0 && handle_of(1, "f") == 0);
	ORCH_CHECK(handle_of(1, "keep") == f);
	ORCH_CHECK(nlink_of(1) == 2);
	ORCH_CHECK_OK(fx_reopen());
	ORCH_CHECK_OK(orch_meta_counts(M, &inodes, &next));
	ORCH_CHECK(inodes == inodes0 && next == next0);
	ORCH_CHECK_OK(orch_meta_intent_foreach(M, intent_cb, &s));
	ORCH_CHECK(s.n == 0);
	ORCH_CHECK(orch_meta_commit_count(M) == commits);

	/* A committed transaction counts once, however many operations. */
	ORCH_CHECK_OK(orch_meta_begin(M));
	ORCH_CHECK(mk(&ROOT, 1, "a", S_IFREG | 0644));
	ORCH_CHECK(mk(&ROOT, 1, "b", S_IFREG | 0644));
	ORCH_CHECK_OK(orch_meta_commit(M));
	ORCH_CHECK(orch_meta_commit_count(M) == commits + 1);
	ORCH_CHECK_OK(lookup(&ROOT, 1, "b", &de));
	ORCH_CHECK(mk(&ROOT, 1, "c", S_IFREG | 0644));
	ORCH_CHECK(orch_meta_commit_count(M) == commits + 2);
	fx_teardown();
}

/*
 * Lookups and unlink checks read in one transaction of their own, and end
 * it whatever they return: a writer can begin right after, and nothing
 * counts as a commit.  Inside an open transaction they use that one and
 * see its changes.
 */
ORCH_TEST(lookups_leave_no_transaction)
{
	struct orch_dirent de;
	uint64_t commits, dir;

	ORCH_CHECK_OK(fx_setup(0));
	dir = mk(&ROOT, 1, "private", S_IFDIR | 0700);
	ORCH_CHECK(dir && mk(&ROOT, 1, "f", S_IFREG | 0644));
	commits = orch_meta_commit_count(M);
	ORCH_CHECK_OK(lookup(&ROOT, 1, "f", &de));
	ORCH_CHECK_RC(lookup(&ROOT, 1, "missing", &de), -ENOENT);
	ORCH_CHECK_RC(lookup(&ALICE, dir, "x", &de), -EACCES);
	ORCH_CHECK_OK(orch_meta_unlink_check(M, &ROOT, 1, "f", 1, false, &de));
	ORCH_CHECK_RC(orch_meta_unlink_check(M, &ROOT, 1, "private", 7, false, &de), -EISDIR);
	ORCH_CHECK(orch_meta_commit_count(M) == commits);
	ORCH_CHECK_OK(orch_meta_begin(M));
	ORCH_CHECK(mk(&ROOT, 1, "g", S_IFREG | 0644));
	ORCH_CHECK_OK(lookup(&ROOT, 1, "g", &de));
	ORCH_CHECK_OK(orch_meta_unlink_check(M, &ROOT, 1, "g", 1, false, &de));
	ORCH_CHECK_OK(orch_meta_commit(M));
	ORCH_CHECK(orch_meta_commit_count(M) == commits + 1);
	ORCH_CHECK_OK(lookup(&ROOT, 1, "g", &de));
	fx_teardown();
}

/*
 * An operation that fails after writing (here: the handle counter collides
 * with an existing inode, so the insert fails after the counter moved) must
 * leave nothing, both standalone and inside an open transaction.
 */
ORCH_TEST(failed_operation_is_undone)
{
	struct orch_attr a;
	uint64_t inodes, next;
	bool existed;

	ORCH_CHECK_OK(fx_setup(0));
	ORCH_CHECK(mk(&ROOT, 1, "a", S_IFREG | 0644) == 2);
	ORCH_CHECK_OK(raw_sql("UPDATE super SET value = 2 WHERE key = 'next_handle'"));
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, "b", 1, S_IFREG | 0644, 0, NULL, NULL,
				       true, &a, &existed), -EEXIST);
	ORCH_CHECK_OK(orch_meta_counts(M, &inodes, &next));
	ORCH_CHECK(next == 2 && inodes == 2);

	ORCH_CHECK_OK(orch_meta_begin(M));
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, "c", 1, S_IFDIR | 0755, 0, NULL, NULL,
				       true, &a, &existed), -EEXIST); /* the same way */
	ORCH_CHECK_OK(orch_meta_counts(M, &inodes, &next));
	ORCH_CHECK(next == 2 && nlink_of(1) == 2);
	ORCH_CHECK_OK(raw_sql("SELECT 1")); /* a reader is not blocked */
	ORCH_CHECK_OK(orch_meta_intent_insert(M, 1, "k", 1, &next));
	ORCH_CHECK_OK(orch_meta_commit(M));
	ORCH_CHECK(handle_of(1, "c") == 0 && nlink_of(1) == 2);
	ORCH_CHECK_OK(orch_meta_counts(M, &inodes, &next));
	ORCH_CHECK(next == 2 && inodes == 2);
	fx_teardown();
}

ORCH_TEST(handles_never_reused)
{
	uint64_t first, h, max = 0;
	bool remote, freed;

	ORCH_CHECK_OK(fx_setup(0));
	for (int i = 0; i < 5; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%d", i);
		h = mk(&ROOT, 1, name, S_IFREG | 0644);
		ORCH_CHECK(h > max);
		max = h;
	}
	first = max;
	ORCH_CHECK_OK(unlink_(1, "f4", &remote, &freed));
	ORCH_CHECK(freed);
	ORCH_CHECK_OK(fx_reopen());
	h = mk(&ROOT, 1, "again", S_IFREG | 0644);
	/* A reopen skips the rest of the reservation (SQLDB_COUNTER_BATCH handles, sqldb.c). */
	ORCH_CHECK(first == 6 && h == 2 + SQLDB_COUNTER_BATCH);
	/* An aborted create's number is skipped; nothing committed reuses one. */
	ORCH_CHECK_OK(orch_meta_begin(M));
	ORCH_CHECK(mk(&ROOT, 1, "ghost", S_IFREG | 0644) == h + 1);
	orch_meta_abort(M);
	ORCH_CHECK(mk(&ROOT, 1, "next", S_IFREG | 0644) == h + 2);
	ORCH_CHECK_OK(fx_reopen());
	ORCH_CHECK(mk(&ROOT, 1, "again2", S_IFREG | 0644) == h + SQLDB_COUNTER_BATCH);
	/* A reservation rolled back with its transaction is made again. */
	ORCH_CHECK_OK(fx_reopen());
	ORCH_CHECK_OK(orch_meta_begin(M));
	ORCH_CHECK(mk(&ROOT, 1, "ghost2", S_IFREG | 0644) == h + 2 * SQLDB_COUNTER_BATCH);
	orch_meta_abort(M);
	ORCH_CHECK(mk(&ROOT, 1, "again3", S_IFREG | 0644) == h + 2 * SQLDB_COUNTER_BATCH);
	ORCH_CHECK_OK(fx_reopen());
	ORCH_CHECK(mk(&ROOT, 1, "again4", S_IFREG | 0644) == h + 3 * SQLDB_COUNTER_BATCH);
	ORCH_CHECK(orch_handle_server(h) == 0);
	fx_teardown();
}

/* --- Damaged records ---------------------------------------------------------------- */

ORCH_TEST(corrupt_records_are_refused)
{
	struct orch_dirent de, ents[4];
	struct orch_attr a;
	enum orch_log_level lvl = orch_log_level;
	uint64_t f, d;
	uint32_t n;
	bool eof;
	char sql[256];

	ORCH_CHECK_OK(fx_setup(0));
	orch_log_level = 0; /* the complaints are expected */
	f = mk(&ROOT, 1, "f", S_IFREG | 0644);
	d = mk(&ROOT, 1, "d", S_IFDIR | 0755);
	snprintf(sql, sizeof(sql), "UPDATE inode SET mode = %d WHERE handle = %llu",
		 0170000 | 0644, (unsigned long long)f);
	ORCH_CHECK_OK(raw_sql(sql));
	ORCH_CHECK_RC(orch_meta_inode_get(M, f, &a), -EUCLEAN);
	ORCH_CHECK_RC(lookup(&ROOT, 1, "f", &de), -EUCLEAN);
	snprintf(sql, sizeof(sql), "UPDATE inode SET nlink = 'two' WHERE handle = %llu",
		 (unsigned long long)d);
	ORCH_CHECK_OK(raw_sql(sql));
	ORCH_CHECK_RC(orch_meta_inode_get(M, d, &a), -EUCLEAN);
	ORCH_CHECK_OK(raw_sql("UPDATE dirent SET type = 12345 WHERE name = CAST('d' AS BLOB)"));
	ORCH_CHECK_RC(lookup(&ROOT, 1, "d", &de), -EUCLEAN);
	ORCH_CHECK_RC(orch_meta_readdir(M, &ROOT, 1, 0, 4, false, ents, &n, &eof), -EUCLEAN);
	ORCH_CHECK_OK(raw_sql("UPDATE dirent SET type = 16384, name = X'612F62' "
			      "WHERE name = CAST('d' AS BLOB)"));
	ORCH_CHECK_RC(orch_meta_readdir(M, &ROOT, 1, 0, 4, false, ents, &n, &eof), -EUCLEAN);
	ORCH_CHECK_OK(raw_sql("INSERT INTO intent VALUES (99, 1, 'text not blob', 0)"));
	ORCH_CHECK_RC(orch_meta_intent_foreach(M, intent_cb_delete, &(int){ 0 }), -EUCLEAN);
	ORCH_CHECK_OK(raw_sql("UPDATE super SET value = 'x' WHERE key = 'next_handle'"));
	ORCH_CHECK_RC(orch_meta_create(M, &ROOT, 1, "g", 1, S_IFREG | 0644, 0, NULL, NULL,
				       true, &a, &(bool){ false }), -EUCLEAN);
	orch_log_level = lvl;
	fx_teardown();
}

ORCH_TEST_MAIN()
