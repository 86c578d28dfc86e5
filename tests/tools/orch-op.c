/*
 * orch-op: drives liborchard one call per line, for the integration tests
 * (tests/lib/op.py).  Reaches what the `orchard` CLI cannot: any credentials,
 * mknod, O_EXCL, rename flags, readdir batches and cursors, xattr flags.
 *
 *   orch-op -c CONF < commands
 *
 * Each stdin line is one command; each gets exactly one line on stdout,
 * flushed at once: "ok [key=value ...]" or "err ERRNONAME" ("err EUSAGE"
 * for a line orch-op cannot parse).  A line may start with "as UID
 * GID[,G2,...] " to run as that user (groups after the first GID are the
 * supplementary ones); the default is uid 0, gid 0.  Paths are absolute
 * Orchard paths; modes are octal.  Commands: see op_cmds[] below.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include <openssl/evp.h>

#include "client/fs.h"
#include "client/rpc.h"
#include "common/cfg.h"
#include "common/util.h"

#define OP_ARGS_MAX 16
#define OP_HEX_MAX 65536 /* reads longer than this print only their sha256 */
#define OP_BUF_MAX (16u << 20)

/* --- Output --------------------------------------------------------------------- */

/* The "key=value" part of one reply line; grows as needed. */
struct op_out {
	char *s;
	size_t len;
	size_t cap;
	bool oom;
};

static void op_printf(struct op_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void op_printf(struct op_out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->oom)
		return;
	for (;;) {
		size_t room = o->cap - o->len;

		va_start(ap, fmt);
		n = vsnprintf(o->s ? o->s + o->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0) {
			o->oom = true;
			return;
		}
		if ((size_t)n < room) {
			o->len += (size_t)n;
			return;
		}
		size_t cap = o->cap ? o->cap * 2 : 256;

		while (cap - o->len <= (size_t)n)
			cap *= 2;
		char *s = realloc(o->s, cap);

		if (!s) {
			o->oom = true;
			return;
		}
		o->s = s;
		o->cap = cap;
	}
}

static void op_hex(struct op_out *o, const char *key, const uint8_t *p, size_t n)
{
	op_printf(o, " %s=", key);
	for (size_t i = 0; i < n; i++)
		op_printf(o, "%02x", p[i]);
}

/* --- Errno names ------------------------------------------------------------------ */

#define E(x) { x, #x }
static const struct {
	int no;
	const char *name;
} op_errnames[] = {
	E(EPERM), E(ENOENT), E(EIO), E(ENXIO), E(E2BIG), E(EBADF), E(EAGAIN),
	E(ENOMEM), E(EACCES), E(EFAULT), E(EBUSY), E(EEXIST), E(EXDEV), E(ENODEV),
	E(ENOTDIR), E(EISDIR), E(EINVAL), E(ENFILE), E(EMFILE), E(EFBIG), E(ENOSPC),
	E(ESPIPE), E(EROFS), E(EMLINK), E(ERANGE), E(ENAMETOOLONG), E(ENOSYS),
	E(ENOTEMPTY), E(ELOOP), E(ENODATA), E(ETIME), E(EPROTO), E(EBADMSG),
	E(EOVERFLOW), E(EUCLEAN), E(EREMOTE), E(EMSGSIZE), E(EPROTONOSUPPORT),
	E(EOPNOTSUPP), E(ECONNRESET), E(ECONNREFUSED), E(ETIMEDOUT), E(EHOSTDOWN),
	E(EHOSTUNREACH), E(ESTALE), E(ECANCELED), E(EDQUOT), E(ENOTCONN),
};
#undef E

static void op_print_err(int error)
{
	for (size_t i = 0; i < sizeof(op_errnames) / sizeof(op_errnames[0]); i++) {
		if (op_errnames[i].no == -error) {
			printf("err %s\n", op_errnames[i].name);
			return;
		}
	}
	printf("err E%d\n", -error);
}

/* A parse error in the command line itself, not an error from Orchard. */
#define OP_EUSAGE 100000

/* --- Argument parsing ------------------------------------------------------------ */

static int op_u64(const char *s, int base, uint64_t *out)
{
	char *end;

	errno = 0;
	if (!*s || *s == '-')
		return -OP_EUSAGE;
	*out = strtoull(s, &end, base);
	if (errno || *end)
		return -OP_EUSAGE;
	return 0;
}

static int op_u32(const char *s, int base, uint32_t *out)
{
	uint64_t v;
	int error = op_u64(s, base, &v);

	if (error)
		return error;
	if (v > UINT32_MAX)
		return -OP_EUSAGE;
	*out = (uint32_t)v;
	return 0;
}

static int op_i64(const char *s, int64_t *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	if (!*s || errno || *end)
		return -OP_EUSAGE;
	return 0;
}

/* Decodes @s (hex digits) into a new buffer.  Empty is a valid, empty value. */
static int op_unhex(const char *s, uint8_t **out, size_t *len)
{
	size_t n = strlen(s);
	uint8_t *p;

	if (n % 2 || n / 2 > OP_BUF_MAX)
		return -OP_EUSAGE;
	p = malloc(n / 2 + 1);
	if (!p)
		return -ENOMEM;
	for (size_t i = 0; i < n / 2; i++) {
		int hi = orch_hex_digit(s[2 * i]), lo = orch_hex_digit(s[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			free(p);
			return -OP_EUSAGE;
		}
		p[i] = (uint8_t)(hi << 4 | lo);
	}
	*out = p;
	*len = n / 2;
	return 0;
}

/*
 * Data arguments: "hex:DIGITS", "pattern:N" (N bytes, byte at absolute file
 * position p is p % 251, @off being where it goes), or plain text.
 */
static int op_data(const char *s, uint64_t off, uint8_t **out, size_t *len)
{
	if (strncmp(s, "hex:", 4) == 0)
		return op_unhex(s + 4, out, len);
	if (strncmp(s, "pattern:", 8) == 0) {
		uint64_t n;
		uint8_t *p;

		if (op_u64(s + 8, 10, &n) || n > OP_BUF_MAX)
			return -OP_EUSAGE;
		p = malloc(n ? n : 1);
		if (!p)
			return -ENOMEM;
		for (uint64_t i = 0; i < n; i++)
			p[i] = (uint8_t)((off + i) % 251);
		*out = p;
		*len = n;
		return 0;
	}
	*len = strlen(s);
	*out = (uint8_t *)strdup(s);
	return *out ? 0 : -ENOMEM;
}

/* "UID GID[,G2,...]" into @cred. */
static int op_cred_parse(const char *uid, const char *gids, struct orch_cred *cred)
{
	char *copy, *tok, *save = NULL;
	int error = 0;

	memset(cred, 0, sizeof(*cred));
	if (op_u32(uid, 10, &cred->uid))
		return -OP_EUSAGE;
	copy = strdup(gids);
	if (!copy)
		return -ENOMEM;
	tok = strtok_r(copy, ",", &save);
	if (!tok || op_u32(tok, 10, &cred->gid))
		error = -OP_EUSAGE;
	while (!error && (tok = strtok_r(NULL, ",", &save))) {
		if (cred->ngroups == ORCH_GROUPS_MAX || op_u32(tok, 10, &cred->groups[cred->ngroups]))
			error = -OP_EUSAGE;
		else
			cred->ngroups++;
	}
	free(copy);
	return error;
}

/* --- Context and helpers --------------------------------------------------------- */

struct op_ctx {
	struct orch_client *cl;
	struct orch_cred cred; /* this line's caller */
	struct op_out out;
};

static const char *op_type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "reg";
	case S_IFDIR: return "dir";
	case S_IFLNK: return "lnk";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "sock";
	case S_IFCHR: return "chr";
	case S_IFBLK: return "blk";
	default: return "unknown";
	}
}

static void op_attr_print(struct op_out *o, const struct orch_attr *a)
{
	op_printf(o, " handle=%" PRIu64 " server=%u type=%s mode=%o uid=%u gid=%u nlink=%u"
		  " size=%" PRIu64 " rdev_major=%u rdev_minor=%u atime=%" PRId64
		  " mtime=%" PRId64 " ctime=%" PRId64 " parent=%" PRIu64,
		  a->handle, orch_handle_server(a->handle), op_type_name(a->mode), a->mode,
		  a->uid, a->gid, a->nlink, a->size, major((dev_t)a->rdev), minor((dev_t)a->rdev),
		  a->atime_ns, a->mtime_ns, a->ctime_ns, a->parent);
	if (S_ISREG(a->mode))
		op_printf(o, " strip_size=%u stripe_count=%u first_server=%u",
			  a->layout.strip_size, a->layout.stripe_count, a->layout.first_server);
}

static int op_parent(struct op_ctx *ctx, const char *path, struct orch_attr *dir,
		     char name[ORCH_NAME_MAX + 1])
{
	return orch_fs_resolve_parent(ctx->cl, &ctx->cred, path, dir, name);
}

static int op_resolve(struct op_ctx *ctx, const char *path, bool follow, struct orch_attr *a)
{
	return orch_fs_resolve(ctx->cl, &ctx->cred, path, follow, a);
}

static int op_setattr(struct op_ctx *ctx, const char *path, uint32_t valid,
		      const struct orch_attr *in)
{
	struct orch_attr a, out;
	int error;

	error = op_resolve(ctx, path, true, &a);
	if (error)
		return error;
	error = orch_fs_setattr(ctx->cl, &ctx->cred, a.handle, valid, in, &out);
	if (!error)
		op_attr_print(&ctx->out, &out);
	return error;
}

/* --- Commands ---------------------------------------------------------------------- */

static int op_stat(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr a;
	int error;

	(void)argc;
	error = op_resolve(ctx, argv[1], strcmp(argv[0], "stat") == 0, &a);
	if (!error)
		op_attr_print(&ctx->out, &a);
	return error;
}

/* getattr HANDLE: by handle, without any lookup (e.g. an unlinked inode). */
static int op_getattr(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr a;
	uint64_t h;
	int error;

	(void)argc;
	if (op_u64(argv[1], 0, &h))
		return -OP_EUSAGE;
	error = orch_fs_getattr(ctx->cl, &ctx->cred, h, &a);
	if (!error)
		op_attr_print(&ctx->out, &a);
	return error;
}

/* lookup DIR NAME: one LOOKUP in directory DIR, NAME passed through unchecked. */
static int op_lookup(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr dir, a;
	int error;

	(void)argc;
	error = op_resolve(ctx, argv[1], true, &dir);
	if (!error)
		error = orch_fs_lookup(ctx->cl, &ctx->cred, dir.handle, argv[2], &a);
	if (!error)
		op_attr_print(&ctx->out, &a);
	return error;
}

/* create PATH MODE [excl] */
static int op_create(struct op_ctx *ctx, int argc, char **argv)
{
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr dir, a;
	bool excl = false, existed = false;
	uint32_t mode;
	int error;

	if (op_u32(argv[2], 8, &mode))
		return -OP_EUSAGE;
	if (argc == 4) {
		if (strcmp(argv[3], "excl"))
			return -OP_EUSAGE;
		excl = true;
	}
	error = op_parent(ctx, argv[1], &dir, name);
	if (error)
		return error;
	error = orch_fs_create(ctx->cl, &ctx->cred, dir.handle, name, S_IFREG | (mode & 07777), 0,
			       excl, &a, &existed);
	if (error)
		return error;
	op_attr_print(&ctx->out, &a);
	op_printf(&ctx->out, " existed=%d", existed);
	return 0;
}

/* mkdir PATH MODE */
static int op_mkdir(struct op_ctx *ctx, int argc, char **argv)
{
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr dir, a;
	uint32_t mode;
	int error;

	(void)argc;
	if (op_u32(argv[2], 8, &mode))
		return -OP_EUSAGE;
	error = op_parent(ctx, argv[1], &dir, name);
	if (!error)
		error = orch_fs_mkdir(ctx->cl, &ctx->cred, dir.handle, name, mode & 07777, &a);
	if (!error)
		op_attr_print(&ctx->out, &a);
	return error;
}

/* mknod PATH fifo|sock|chr|blk|reg MODE [MAJOR MINOR] */
static int op_mknod(struct op_ctx *ctx, int argc, char **argv)
{
	static const struct {
		const char *name;
		uint32_t type;
	} types[] = {
		{ "fifo", S_IFIFO }, { "sock", S_IFSOCK }, { "chr", S_IFCHR },
		{ "blk", S_IFBLK }, { "reg", S_IFREG },
	};
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr dir, a;
	uint32_t mode, type = 0, maj = 0, min = 0;
	int error;

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcmp(argv[2], types[i].name) == 0)
			type = types[i].type;
	if (!type || op_u32(argv[3], 8, &mode) || argc == 5)
		return -OP_EUSAGE;
	if (argc == 6 && (op_u32(argv[4], 10, &maj) || op_u32(argv[5], 10, &min)))
		return -OP_EUSAGE;
	error = op_parent(ctx, argv[1], &dir, name);
	if (!error)
		error = orch_fs_create(ctx->cl, &ctx->cred, dir.handle, name,
				       type | (mode & 07777), makedev(maj, min), true, &a, NULL);
	if (!error)
		op_attr_print(&ctx->out, &a);
	return error;
}

/* symlink TARGET PATH */
static int op_symlink(struct op_ctx *ctx, int argc, char **argv)
{
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr dir, a;
	int error;

	(void)argc;
	error = op_parent(ctx, argv[2], &dir, name);
	if (!error)
		error = orch_fs_symlink(ctx->cl, &ctx->cred, dir.handle, name, argv[1], &a);
	if (!error)
		op_attr_print(&ctx->out, &a);
	return error;
}

static int op_readlink(struct op_ctx *ctx, int argc, char **argv)
{
	char target[ORCH_PATH_MAX + 1];
	struct orch_attr a;
	int error;

	(void)argc;
	error = op_resolve(ctx, argv[1], false, &a);
	if (!error)
		error = orch_fs_readlink(ctx->cl, &ctx->cred, a.handle, target, sizeof(target));
	if (!error)
		op_printf(&ctx->out, " target=%s", target);
	return error;
}

/* link OLD NEW */
static int op_link(struct op_ctx *ctx, int argc, char **argv)
{
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr old, dir, a;
	int error;

	(void)argc;
	error = op_resolve(ctx, argv[1], false, &old);
	if (!error)
		error = op_parent(ctx, argv[2], &dir, name);
	if (!error)
		error = orch_fs_link(ctx->cl, &ctx->cred, old.handle, dir.handle, name, &a);
	if (!error)
		op_attr_print(&ctx->out, &a);
	return error;
}

/* unlink PATH, rmdir PATH */
static int op_unlink(struct op_ctx *ctx, int argc, char **argv)
{
	char name[ORCH_NAME_MAX + 1];
	struct orch_attr dir;
	int error;

	(void)argc;
	error = op_parent(ctx, argv[1], &dir, name);
	if (error)
		return error;
	if (strcmp(argv[0], "rmdir") == 0)
		return orch_fs_rmdir(ctx->cl, &ctx->cred, dir.handle, name);
	return orch_fs_unlink(ctx->cl, &ctx->cred, dir.handle, name);
}

/* rename OLD NEW [noreplace|exchange] */
static int op_rename(struct op_ctx *ctx, int argc, char **argv)
{
	char name[ORCH_NAME_MAX + 1], name2[ORCH_NAME_MAX + 1];
	struct orch_attr dir, dir2;
	uint32_t flags = 0;
	int error;

	if (argc == 4) {
		if (strcmp(argv[3], "noreplace") == 0)
			flags = RENAME_NOREPLACE;
		else if (strcmp(argv[3], "exchange") == 0)
			flags = RENAME_EXCHANGE;
		else
			return -OP_EUSAGE;
	}
	error = op_parent(ctx, argv[1], &dir, name);
	if (!error)
		error = op_parent(ctx, argv[2], &dir2, name2);
	if (!error)
		error = orch_fs_rename(ctx->cl, &ctx->cred, dir.handle, name, dir2.handle, name2,
				       flags);
	return error;
}

static int op_chmod(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr in = { 0 };

	(void)argc;
	if (op_u32(argv[2], 8, &in.mode))
		return -OP_EUSAGE;
	return op_setattr(ctx, argv[1], ORCH_SET_MODE, &in);
}

/* chown PATH UID GID, -1 leaving one unchanged */
static int op_chown(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr in = { 0 };
	uint32_t valid = 0;

	(void)argc;
	if (strcmp(argv[2], "-1")) {
		if (op_u32(argv[2], 10, &in.uid))
			return -OP_EUSAGE;
		valid |= ORCH_SET_UID;
	}
	if (strcmp(argv[3], "-1")) {
		if (op_u32(argv[3], 10, &in.gid))
			return -OP_EUSAGE;
		valid |= ORCH_SET_GID;
	}
	return op_setattr(ctx, argv[1], valid, &in);
}

static int op_truncate(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr in = { 0 };

	(void)argc;
	if (op_u64(argv[2], 10, &in.size))
		return -OP_EUSAGE;
	return op_setattr(ctx, argv[1], ORCH_SET_SIZE, &in);
}

/* One time argument of utimens: nanoseconds, "now" or "omit". */
static int op_time_arg(const char *s, uint32_t set, uint32_t now, int64_t *ns, uint32_t *valid)
{
	if (strcmp(s, "omit") == 0)
		return 0;
	if (strcmp(s, "now") == 0) {
		*valid |= set | now;
		return 0;
	}
	if (op_i64(s, ns))
		return -OP_EUSAGE;
	*valid |= set;
	return 0;
}

/* utimens PATH ATIME MTIME */
static int op_utimens(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr in = { 0 };
	uint32_t valid = 0;

	(void)argc;
	if (op_time_arg(argv[2], ORCH_SET_ATIME, ORCH_SET_ATIME_NOW, &in.atime_ns, &valid) ||
	    op_time_arg(argv[3], ORCH_SET_MTIME, ORCH_SET_MTIME_NOW, &in.mtime_ns, &valid))
		return -OP_EUSAGE;
	return op_setattr(ctx, argv[1], valid, &in);
}

/* Appends one batch of entries; @plus adds name:handle:mode:size:nlink items. */
static void op_dirents_print(struct op_out *names, struct op_out *attrs, bool *all_attrs,
			     const struct orch_dirent *d, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		op_printf(names, "%s%s", names->len ? "," : "", d[i].name);
		if (!d[i].has_attr) {
			*all_attrs = false;
			continue;
		}
		op_printf(attrs, "%s%s:%" PRIu64 ":%o:%" PRIu64 ":%u", attrs->len ? "," : "",
			  d[i].name, d[i].attr.handle, d[i].attr.mode, d[i].attr.size,
			  d[i].attr.nlink);
	}
}

/*
 * readdir PATH [plus] [batch N] [cookie C] [once]: the whole directory in
 * batches of N (default ORCH_READDIR_MAX), or with "once" a single batch
 * from cookie C, printing the cookie to resume from and eof.
 */
static int op_readdir(struct op_ctx *ctx, int argc, char **argv)
{
	struct op_out names = { 0 }, attrs = { 0 };
	struct orch_dirent *d = NULL;
	uint32_t max = ORCH_READDIR_MAX, n, count = 0, batches = 0;
	uint64_t cookie = 0;
	bool plus = false, once = false, eof = false, all_attrs = true;
	struct orch_attr dir;
	int error;

	for (int i = 2; i < argc; i++) {
		if (strcmp(argv[i], "plus") == 0) {
			plus = true;
		} else if (strcmp(argv[i], "once") == 0) {
			once = true;
		} else if (strcmp(argv[i], "batch") == 0 && i + 1 < argc) {
			if (op_u32(argv[++i], 10, &max))
				return -OP_EUSAGE;
		} else if (strcmp(argv[i], "cookie") == 0 && i + 1 < argc) {
			if (op_u64(argv[++i], 10, &cookie))
				return -OP_EUSAGE;
		} else {
			return -OP_EUSAGE;
		}
	}
	error = op_resolve(ctx, argv[1], true, &dir);
	if (error)
		return error;
	d = calloc(max ? (max > ORCH_READDIR_MAX ? ORCH_READDIR_MAX : max) : 1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	while (!eof) {
		error = orch_fs_readdir(ctx->cl, &ctx->cred, dir.handle, cookie, max, plus, d,
					&n, &eof);
		if (error)
			goto out_free;
		batches++;
		op_dirents_print(&names, &attrs, &all_attrs, d, n);
		count += n;
		if (n)
			cookie = d[n - 1].cookie;
		if (once)
			break;
		if (!n && !eof) {
			/* A server that sends nothing yet claims more would loop us forever. */
			error = -EIO;
			goto out_free;
		}
	}
	if (names.oom || attrs.oom) {
		error = -ENOMEM;
		goto out_free;
	}
	op_printf(&ctx->out, " names=%s count=%u batches=%u cookie=%" PRIu64 " eof=%d",
		  names.s ? names.s : "", count, batches, cookie, eof);
	if (plus)
		op_printf(&ctx->out, " all_attrs=%d attrs=%s", all_attrs, attrs.s ? attrs.s : "");
out_free:
	free(names.s);
	free(attrs.s);
	free(d);
	return error;
}

static int op_xattr_flags(const char *s, int *flags)
{
	if (strcmp(s, "create") == 0)
		*flags = XATTR_CREATE;
	else if (strcmp(s, "replace") == 0)
		*flags = XATTR_REPLACE;
	else
		return -OP_EUSAGE;
	return 0;
}

/* setxattr PATH NAME VALUE [create|replace]; VALUE as for write ("hex:" for empty) */
static int op_setxattr(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr a;
	uint8_t *val;
	size_t len;
	int flags = 0, error;

	if (argc == 5 && op_xattr_flags(argv[4], &flags))
		return -OP_EUSAGE;
	error = op_data(argv[3], 0, &val, &len);
	if (error)
		return error;
	error = op_resolve(ctx, argv[1], false, &a);
	if (!error)
		error = orch_fs_setxattr(ctx->cl, &ctx->cred, a.handle, argv[2], val, len, flags);
	free(val);
	return error;
}

/* getxattr PATH NAME [size]: "size" asks for the size only (buflen 0) */
static int op_getxattr(struct op_ctx *ctx, int argc, char **argv)
{
	size_t cap = ORCH_XATTR_SIZE_MAX, len;
	struct orch_attr a;
	uint8_t *buf;
	int error;

	if (argc == 4) {
		if (strcmp(argv[3], "size"))
			return -OP_EUSAGE;
		cap = 0;
	}
	error = op_resolve(ctx, argv[1], false, &a);
	if (error)
		return error;
	buf = malloc(ORCH_XATTR_SIZE_MAX);
	if (!buf)
		return -ENOMEM;
	error = orch_fs_getxattr(ctx->cl, &ctx->cred, a.handle, argv[2], buf, cap, &len);
	if (!error) {
		op_printf(&ctx->out, " size=%zu", len);
		if (cap)
			op_hex(&ctx->out, "hex", buf, len);
	}
	free(buf);
	return error;
}

static int op_listxattr(struct op_ctx *ctx, int argc, char **argv)
{
	size_t len, count = 0;
	struct orch_attr a;
	char *buf;
	int error;

	(void)argc;
	error = op_resolve(ctx, argv[1], false, &a);
	if (error)
		return error;
	buf = malloc(ORCH_XATTR_LIST_MAX);
	if (!buf)
		return -ENOMEM;
	error = orch_fs_listxattr(ctx->cl, &ctx->cred, a.handle, buf, ORCH_XATTR_LIST_MAX, &len);
	if (!error) {
		op_printf(&ctx->out, " names=");
		for (size_t off = 0; off < len; off += strnlen(buf + off, len - off) + 1) {
			op_printf(&ctx->out, "%s%.*s", count ? "," : "",
				  (int)strnlen(buf + off, len - off), buf + off);
			count++;
		}
		op_printf(&ctx->out, " count=%zu size=%zu", count, len);
	}
	free(buf);
	return error;
}

static int op_removexattr(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr a;
	int error;

	(void)argc;
	error = op_resolve(ctx, argv[1], false, &a);
	if (!error)
		error = orch_fs_removexattr(ctx->cl, &ctx->cred, a.handle, argv[2]);
	return error;
}

/* access PATH MASK: MASK is any of "rwx", or "f" for existence */
static int op_access(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr a;
	uint32_t mask = 0;
	int error;

	(void)argc;
	for (const char *p = argv[2]; *p; p++) {
		switch (*p) {
		case 'r': mask |= R_OK; break;
		case 'w': mask |= W_OK; break;
		case 'x': mask |= X_OK; break;
		case 'f': break;
		default: return -OP_EUSAGE;
		}
	}
	error = op_resolve(ctx, argv[1], true, &a);
	if (!error)
		error = orch_fs_access(ctx->cl, &ctx->cred, a.handle, mask);
	return error;
}

static int op_statfs(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_statfs s;
	int error;

	(void)argc;
	(void)argv;
	error = orch_fs_statfs(ctx->cl, &ctx->cred, &s);
	if (!error)
		op_printf(&ctx->out, " bsize=%u blocks=%" PRIu64 " bfree=%" PRIu64
			  " bavail=%" PRIu64 " files=%" PRIu64 " ffree=%" PRIu64 " namemax=%u",
			  s.bsize, s.blocks, s.bfree, s.bavail, s.files, s.ffree, s.namemax);
	return error;
}

/* Registers this client as a writer of @h (a server without registrations: nothing). */
static int op_register(struct op_ctx *ctx, uint64_t h)
{
	int error = orch_fs_writers(ctx->cl, &ctx->cred, h, ORCH_WRITERS_REGISTER, 0, 0, NULL,
				    NULL);

	return error == -ENOSYS ? 0 : error;
}

/*
 * write PATH OFFSET DATA: registered as a writer, the data, then the size
 * extended as a close would (and the registration released with it)
 */
static int op_write(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr a, out;
	uint64_t off;
	uint8_t *buf;
	size_t len;
	int error;

	(void)argc;
	if (op_u64(argv[2], 10, &off))
		return -OP_EUSAGE;
	error = op_data(argv[3], off, &buf, &len);
	if (error)
		return error;
	error = op_resolve(ctx, argv[1], true, &a);
	if (!error)
		error = op_register(ctx, a.handle);
	if (!error)
		error = orch_fs_write(ctx->cl, &ctx->cred, &a, off, buf, len);
	if (!error)
		error = orch_fs_writer_release(ctx->cl, &ctx->cred, a.handle, off + len, 0, &out);
	if (!error)
		op_attr_print(&ctx->out, &out);
	free(buf);
	return error;
}

/* read PATH OFFSET LEN: got, sha256, and the bytes in hex if at most OP_HEX_MAX */
static int op_read(struct op_ctx *ctx, int argc, char **argv)
{
	uint8_t md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	struct orch_attr a;
	uint64_t off, len;
	uint8_t *buf;
	size_t got;
	int error;

	(void)argc;
	if (op_u64(argv[2], 10, &off) || op_u64(argv[3], 10, &len) || len > OP_BUF_MAX)
		return -OP_EUSAGE;
	error = op_resolve(ctx, argv[1], true, &a);
	if (error)
		return error;
	buf = malloc(len ? len : 1);
	if (!buf)
		return -ENOMEM;
	error = orch_fs_read(ctx->cl, &ctx->cred, &a, off, buf, len, &got);
	if (!error && !EVP_Digest(buf, got, md, &mdlen, EVP_sha256(), NULL))
		error = -ENOMEM;
	if (!error) {
		op_printf(&ctx->out, " got=%zu", got);
		op_hex(&ctx->out, "sha256", md, mdlen);
		if (got <= OP_HEX_MAX)
			op_hex(&ctx->out, "hex", buf, got);
	}
	free(buf);
	return error;
}

static int op_fsync(struct op_ctx *ctx, int argc, char **argv)
{
	struct orch_attr a;
	int error;

	(void)argc;
	error = op_resolve(ctx, argv[1], true, &a);
	if (!error)
		error = orch_fs_fsync(ctx->cl, &ctx->cred, &a, false, ORCH_FS_SYNC_ALL);
	return error;
}

/* copy SRC OFF_IN DST OFF_OUT LEN: server-side copy, then DST's size is extended */
static int op_copy(struct op_ctx *ctx, int argc, char **argv)
{
	uint64_t off_in, off_out, len, copied = 0;
	struct orch_attr src, dst;
	int error;

	(void)argc;
	if (op_u64(argv[2], 10, &off_in) || op_u64(argv[4], 10, &off_out) ||
	    op_u64(argv[5], 10, &len))
		return -OP_EUSAGE;
	error = op_resolve(ctx, argv[1], true, &src);
	if (!error)
		error = op_resolve(ctx, argv[3], true, &dst);
	if (!error)
		error = op_register(ctx, dst.handle);
	if (!error)
		error = orch_fs_copy_range(ctx->cl, &ctx->cred, &src, off_in, &dst, off_out, len,
					   &copied);
	if (!error)
		error = orch_fs_writer_release(ctx->cl, &ctx->cred, dst.handle,
					       copied ? off_out + copied : 0, 0, NULL);
	if (!error)
		op_printf(&ctx->out, " copied=%llu", (unsigned long long)copied);
	return error;
}

static int op_echo(struct op_ctx *ctx, int argc, char **argv)
{
	for (int i = 1; i < argc; i++)
		op_printf(&ctx->out, " %s", argv[i]);
	return 0;
}

/* --- Dispatch ---------------------------------------------------------------------- */

static const struct op_cmd {
	const char *name;
	int min_args; /* not counting the command name */
	int max_args;
	int (*fn)(struct op_ctx *ctx, int argc, char **argv);
} op_cmds[] = {
	{ "stat", 1, 1, op_stat },
	{ "lstat", 1, 1, op_stat },
	{ "getattr", 1, 1, op_getattr },
	{ "lookup", 2, 2, op_lookup },
	{ "create", 2, 3, op_create },
	{ "mkdir", 2, 2, op_mkdir },
	{ "mknod", 3, 5, op_mknod },
	{ "symlink", 2, 2, op_symlink },
	{ "readlink", 1, 1, op_readlink },
	{ "link", 2, 2, op_link },
	{ "unlink", 1, 1, op_unlink },
	{ "rmdir", 1, 1, op_unlink },
	{ "rename", 2, 3, op_rename },
	{ "chmod", 2, 2, op_chmod },
	{ "chown", 3, 3, op_chown },
	{ "truncate", 2, 2, op_truncate },
	{ "utimens", 3, 3, op_utimens },
	{ "readdir", 1, 8, op_readdir },
	{ "setxattr", 3, 4, op_setxattr },
	{ "getxattr", 2, 3, op_getxattr },
	{ "listxattr", 1, 1, op_listxattr },
	{ "removexattr", 2, 2, op_removexattr },
	{ "access", 2, 2, op_access },
	{ "statfs", 0, 0, op_statfs },
	{ "write", 3, 3, op_write },
	{ "read", 3, 3, op_read },
	{ "fsync", 1, 1, op_fsync },
	{ "copy", 5, 5, op_copy },
	{ "echo", 0, OP_ARGS_MAX - 1, op_echo },
};

/* Splits @line at spaces into @argv; returns the count or -OP_EUSAGE. */
static int op_split(char *line, char **argv)
{
	char *save = NULL, *tok;
	int argc = 0;

	for (tok = strtok_r(line, " \t\r\n", &save); tok; tok = strtok_r(NULL, " \t\r\n", &save)) {
		if (argc == OP_ARGS_MAX)
			return -OP_EUSAGE;
		argv[argc++] = tok;
	}
	return argc;
}

static int op_line(struct op_ctx *ctx, char *line)
{
	char *argv[OP_ARGS_MAX];
	int argc = op_split(line, argv), error;
	char **av = argv;

	if (argc < 0)
		return argc;
	memset(&ctx->cred, 0, sizeof(ctx->cred));
	if (argc >= 1 && strcmp(av[0], "as") == 0) {
		if (argc < 4)
			return -OP_EUSAGE;
		error = op_cred_parse(av[1], av[2], &ctx->cred);
		if (error)
			return error;
		av += 3;
		argc -= 3;
	}
	if (argc == 0)
		return -OP_EUSAGE;
	for (size_t i = 0; i < sizeof(op_cmds) / sizeof(op_cmds[0]); i++) {
		const struct op_cmd *c = &op_cmds[i];

		if (strcmp(av[0], c->name))
			continue;
		if (argc - 1 < c->min_args || argc - 1 > c->max_args)
			return -OP_EUSAGE;
		return c->fn(ctx, argc, av);
	}
	return -OP_EUSAGE;
}

static void usage(void)
{
	fprintf(stderr, "usage: orch-op -c CONF < commands\n");
}

int main(int argc, char **argv)
{
	struct op_ctx ctx = { 0 };
	struct orch_cfg *cfg;
	const char *conf = NULL;
	char why[512] = "";
	char *line = NULL;
	size_t cap = 0;
	int opt, error;

	while ((opt = getopt(argc, argv, "c:h")) != -1) {
		switch (opt) {
		case 'c':
			conf = optarg;
			break;
		case 'h':
			usage();
			return 0;
		default:
			usage();
			return 2;
		}
	}
	if (!conf)
		conf = getenv("ORCHARD_CONF");
	if (!conf || optind != argc) {
		usage();
		return 2;
	}
	cfg = calloc(1, sizeof(*cfg));
	if (!cfg) {
		fprintf(stderr, "orch-op: out of memory\n");
		return 1;
	}
	error = orch_cfg_load(conf, cfg, why, sizeof(why));
	if (!error)
		error = orch_cfg_load_key(cfg, why, sizeof(why));
	if (!error)
		error = orch_client_create(cfg, &ctx.cl);
	free(cfg);
	if (error) {
		fprintf(stderr, "orch-op: cannot load '%s': %s\n", conf,
			why[0] ? why : strerror(-error));
		return 1;
	}
	while (getline(&line, &cap, stdin) != -1) {
		ctx.out.len = 0;
		ctx.out.oom = false;
		op_printf(&ctx.out, "%s", "");
		error = op_line(&ctx, line);
		if (!error && ctx.out.oom)
			error = -ENOMEM;
		if (error == -OP_EUSAGE)
			printf("err EUSAGE\n");
		else if (error)
			op_print_err(error);
		else
			printf("ok%s\n", ctx.out.s ? ctx.out.s : "");
		fflush(stdout);
	}
	free(line);
	free(ctx.out.s);
	orch_client_destroy(ctx.cl);
	return 0;
}
