/* Helpers shared by the subcommands of `orchard`.  See cli.h. */
#include "cli/cli.h"
#include "cli/progress.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* --- Messages ------------------------------------------------------------- */

/* Both erase a progress bar first (progress.h): a message gets a line of its own. */
void orch_cli_msg(const char *fmt, ...)
{
	va_list ap;

	orch_progress_pause();
	fputs("orchard: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	orch_progress_resume();
}

/*
 * The client orch_cli_connect() made, for orch_cli_strerror() to name the
 * server whose key differs: every command's error message goes through
 * orch_cli_err(), which has no client at hand.
 */
static struct orch_client *cli_client;

const char *orch_cli_strerror(int error, const char *server)
{
	static char msg[ORCH_CFG_NAME_MAX + 64];
	int i;

	if (error < 0)
		error = -error;
	if (error != EKEYREJECTED)
		return strerror(error);
	if (!server && cli_client && (i = orch_client_key_mismatch(cli_client)) >= 0)
		server = orch_client_cfg(cli_client)->servers[i].name;
	if (!server)
		return "authentication failed: cluster key does not match the servers'";
	snprintf(msg, sizeof(msg), "authentication failed: cluster key does not match server %s",
		 server);
	return msg;
}

void orch_cli_err(int error, const char *fmt, ...)
{
	va_list ap;

	orch_progress_pause();
	fputs("orchard: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, ": %s\n", orch_cli_strerror(error, NULL));
	orch_progress_resume();
}

int orch_cli_usage(const struct orch_cli *cli, int code)
{
	if (code == ORCH_CLI_OK) {
		fputs(cli->cmd->usage, stdout);
		if (cli->cmd->usage_more)
			cli->cmd->usage_more(stdout);
		return ORCH_CLI_OK;
	}
	fprintf(stderr, "Try 'orchard %s --help' for more information.\n", cli->cmd->name);
	return code;
}

int orch_cli_usage_err(const struct orch_cli *cli, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "orchard %s: ", cli->cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return orch_cli_usage(cli, ORCH_CLI_USAGE);
}

/*
 * optind = 0 is glibc's full reinitialisation: it also forgets a half-scanned
 * "-abc" cluster and re-reads the '+' at the head of the option string, which
 * optind = 1 does not guarantee once getopt has run on another argv.
 */
void orch_cli_getopt_reset(void)
{
	optind = 0;
}

int orch_cli_getopt(struct orch_cli *cli, int argc, char **argv, const char *shortopts,
		    const struct option *longopts)
{
	char *argv0 = argv[0], name[64];
	int opt;

	/* getopt's own complaints name argv[0]: make it "orchard ls". */
	snprintf(name, sizeof(name), "orchard %s", argv0);
	argv[0] = name;
	for (;;) {
		opt = getopt_long(argc, argv, shortopts, longopts, NULL);
		if (opt != 'c')
			break;
		cli->conf = optarg;
	}
	argv[0] = argv0;
	return opt;
}

/* --- Parsing -------------------------------------------------------------- */

int orch_cli_uint_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	if (!*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end || v < min || v > max)
		return -EINVAL;
	*out = v;
	return 0;
}

int orch_cli_size_parse(const char *s, uint64_t *out)
{
	return orch_cfg_parse_size(s, out);
}

uint32_t orch_cli_umask(void)
{
	mode_t m = umask(0);

	umask(m);
	return (uint32_t)m;
}

/*
 * Symbolic modes as chmod(1) reads them, without the umask subtlety of an
 * empty "who" (we apply to all, like "a").
 */
static int cli_mode_symbolic(const char *s, uint32_t old, uint32_t *out)
{
	uint32_t mode = old & 07777;

	while (*s) {
		uint32_t who = 0, perm = 0;
		char op;

		for (; *s && strchr("ugoa", *s); s++)
			who |= *s == 'u' ? 04700 : *s == 'g' ? 02070 : *s == 'o' ? 01007 : 07777;
		if (!who)
			who = 07777;
		if (!*s || !strchr("+-=", *s))
			return -EINVAL;
		while (*s && strchr("+-=", *s)) {
			op = *s++;
			perm = 0;
			for (; *s && strchr("rwxXst", *s); s++) {
				switch (*s) {
				case 'r': perm |= 0444; break;
				case 'w': perm |= 0222; break;
				case 'x': perm |= 0111; break;
				case 'X':
					if (S_ISDIR(old) || (old & 0111))
						perm |= 0111;
					break;
				case 's': perm |= 06000; break;
				case 't': perm |= 01000; break;
				}
			}
			perm &= who;
			if (op == '+')
				mode |= perm;
			else if (op == '-')
				mode &= ~perm;
			else
				mode = (mode & ~who) | perm;
		}
		if (*s == ',')
			s++;
		else if (*s)
			return -EINVAL;
	}
	*out = mode;
	return 0;
}

int orch_cli_mode_parse(const char *s, uint32_t old, uint32_t *out)
{
	unsigned long v;
	char *end;

	if (*s >= '0' && *s <= '7') {
		errno = 0;
		v = strtoul(s, &end, 8);
		if (errno || *end || v > 07777)
			return -EINVAL;
		*out = (uint32_t)v;
		return 0;
	}
	if (!*s)
		return -EINVAL;
	return cli_mode_symbolic(s, old, out);
}

/* --- Formatting ------------------------------------------------------------- */

void orch_cli_mode_str(uint32_t mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	char type;

	switch (mode & S_IFMT) {
	case S_IFDIR: type = 'd'; break;
	case S_IFLNK: type = 'l'; break;
	case S_IFCHR: type = 'c'; break;
	case S_IFBLK: type = 'b'; break;
	case S_IFIFO: type = 'p'; break;
	case S_IFSOCK: type = 's'; break;
	default: type = '-'; break;
	}
	out[0] = type;
	for (int i = 0; i < 9; i++)
		out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
	if (mode & S_ISUID)
		out[3] = (mode & S_IXUSR) ? 's' : 'S';
	if (mode & S_ISGID)
		out[6] = (mode & S_IXGRP) ? 's' : 'S';
	if (mode & S_ISVTX)
		out[9] = (mode & S_IXOTH) ? 't' : 'T';
	out[10] = '\0';
}

const char *orch_cli_type_name(uint32_t mode)
{
	switch (mode & S_IFMT) {
	case S_IFREG: return "regular file";
	case S_IFDIR: return "directory";
	case S_IFLNK: return "symbolic link";
	case S_IFCHR: return "character special file";
	case S_IFBLK: return "block special file";
	case S_IFIFO: return "fifo";
	case S_IFSOCK: return "socket";
	default: return "unknown";
	}
}

void orch_cli_human(uint64_t bytes, char *out, size_t outlen)
{
	static const char units[] = "BKMGTPE";
	double v = (double)bytes;
	unsigned int u = 0;

	while (v >= 1024 && u < sizeof(units) - 2) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(out, outlen, "%llu", (unsigned long long)bytes);
	else if (v < 10)
		snprintf(out, outlen, "%.1f%c", v, units[u]);
	else
		snprintf(out, outlen, "%.0f%c", v, units[u]);
}

void orch_cli_time_str(int64_t ns, bool with_ns, char *out, size_t outlen)
{
	time_t sec = (time_t)(ns / 1000000000);
	long rem = (long)(ns % 1000000000);
	char date[64], zone[16];
	struct tm tm;

	if (rem < 0) {
		rem += 1000000000;
		sec--;
	}
	if (!localtime_r(&sec, &tm)) {
		snprintf(out, outlen, "%lld", (long long)ns);
		return;
	}
	if (!with_ns) {
		strftime(out, outlen, "%Y-%m-%d %H:%M", &tm);
		return;
	}
	strftime(date, sizeof(date), "%Y-%m-%d %H:%M:%S", &tm);
	strftime(zone, sizeof(zone), "%z", &tm);
	snprintf(out, outlen, "%s.%09ld %s", date, rem, zone);
}

void orch_cli_json_str(FILE *f, const char *s, size_t len)
{
	fputc('"', f);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c == '\n')
			fputs("\\n", f);
		else if (c == '\t')
			fputs("\\t", f);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* --- Files and processes ---------------------------------------------------- */

int orch_cli_mkdir_p(const char *path, uint32_t mode)
{
	char buf[PATH_MAX];
	size_t len = strlen(path);
	struct stat st;

	if (len == 0 || len >= sizeof(buf))
		return -ENAMETOOLONG;
	memcpy(buf, path, len + 1);
	for (char *p = buf + 1;; p++) {
		char c = *p;

		if (c != '/' && c != '\0')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) < 0 && errno != EEXIST)
			return -errno;
		*p = c;
		if (!c)
			break;
	}
	if (stat(path, &st) < 0)
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int orch_cli_write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int orch_cli_read_full(int fd, void *buf, size_t len, size_t *got)
{
	char *p = buf;
	size_t done = 0;

	while (done < len) {
		ssize_t n = read(fd, p + done, len - done);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			*got = done;
			return -errno;
		}
		if (n == 0)
			break;
		done += (size_t)n;
	}
	*got = done;
	return 0;
}

int orch_cli_bin_dir(char *out, size_t outlen)
{
	ssize_t n = readlink("/proc/self/exe", out, outlen - 1);
	char *slash;

	if (n < 0)
		return -errno;
	if ((size_t)n >= outlen - 1)
		return -ENAMETOOLONG;
	out[n] = '\0';
	slash = strrchr(out, '/');
	if (!slash)
		return -ENOENT;
	*slash = '\0';
	return 0;
}

void orch_cli_basename(const char *path, char *out, size_t outlen)
{
	size_t len = strlen(path);
	const char *start;

	while (len > 1 && path[len - 1] == '/')
		len--;
	start = path + len;
	while (start > path && start[-1] != '/')
		start--;
	len -= (size_t)(start - path);
	if (len >= outlen)
		len = outlen - 1;
	memcpy(out, start, len);
	out[len] = '\0';
}

/* --- Connecting ------------------------------------------------------------- */

const char *orch_cli_conf_path(const struct orch_cli *cli)
{
	const char *conf = orch_cfg_path(cli->conf);

	if (!conf)
		orch_cli_usage_err(cli, "no configuration: give -c CONF, set ORCHARD_CONF "
				   "or write " ORCH_CFG_DEFAULT_PATH);
	return conf;
}

int orch_cli_cfg_load(const char *path, bool key, struct orch_cfg **out)
{
	struct orch_cfg *cfg;
	char why[512];
	int error;

	cfg = malloc(sizeof(*cfg));
	if (!cfg) {
		orch_cli_err(-ENOMEM, "cannot load '%s'", path);
		return -ENOMEM;
	}
	why[0] = '\0';
	error = orch_cfg_load(path, cfg, why, sizeof(why));
	if (error)
		goto out_free;
	if (key) {
		error = orch_cfg_load_key(cfg, why, sizeof(why));
		if (error)
			goto out_free;
	}
	*out = cfg;
	return 0;
out_free:
	if (why[0])
		orch_cli_msg("%s: %s", path, why);
	else
		orch_cli_err(error, "cannot load '%s'", path);
	free(cfg);
	return error;
}

/* orch_cli_connect, or with @members a client whose servers are the members. */
static int cli_connect(struct orch_cli *cli, bool members, struct orch_cli_fs *out)
{
	struct orch_cfg *cfg;
	const char *path;
	int error;

	path = orch_cli_conf_path(cli);
	if (!path)
		return ORCH_CLI_USAGE;
	if (orch_cli_cfg_load(path, true, &cfg))
		return ORCH_CLI_FAIL;
	if (members)
		orch_cfg_members_view(cfg, cfg);
	error = orch_client_create(cfg, &out->cl);
	/* The client copied it; the key need not linger in our memory. */
	memset(cfg->key, 0, sizeof(cfg->key));
	free(cfg);
	if (error) {
		orch_cli_err(error, "cannot create client");
		return ORCH_CLI_FAIL;
	}
	orch_fs_cred_self(&out->cred);
	cli_client = out->cl;
	return ORCH_CLI_OK;
}

int orch_cli_connect(struct orch_cli *cli, struct orch_cli_fs *out)
{
	return cli_connect(cli, false, out);
}

int orch_cli_connect_members(struct orch_cli *cli, struct orch_cli_fs *out)
{
	return cli_connect(cli, true, out);
}

void orch_cli_fs_close(struct orch_cli_fs *fs)
{
	if (cli_client == fs->cl)
		cli_client = NULL;
	orch_client_destroy(fs->cl);
	fs->cl = NULL;
}

int orch_cli_resolve(struct orch_cli_fs *fs, const char *path, bool follow,
		     struct orch_attr *out)
{
	int error;

	if (path[0] != '/') {
		orch_cli_msg("'%s': paths inside Orchard are absolute (start with '/')", path);
		return -EINVAL;
	}
	error = orch_fs_resolve(fs->cl, &fs->cred, path, follow, out);
	if (error)
		orch_cli_err(error, "cannot access '%s'", path);
	return error;
}

int orch_cli_resolve_parent(struct orch_cli_fs *fs, const char *path, struct orch_attr *parent,
			    char name[ORCH_NAME_MAX + 1])
{
	int error;

	if (path[0] != '/') {
		orch_cli_msg("'%s': paths inside Orchard are absolute (start with '/')", path);
		return -EINVAL;
	}
	error = orch_fs_resolve_parent(fs->cl, &fs->cred, path, parent, name);
	if (!error && !S_ISDIR(parent->mode))
		error = -ENOTDIR;
	if (error == -EINVAL && strspn(path, "/") == strlen(path))
		orch_cli_msg("'%s': the root has no parent", path);
	else if (error)
		orch_cli_err(error, "cannot access '%s'", path);
	return error;
}

bool orch_cli_args(struct orch_cli *cli, int argc, char **argv, int min, int max, int *rc)
{
	return orch_cli_args_quiet(cli, argc, argv, min, max, NULL, rc);
}

bool orch_cli_args_quiet(struct orch_cli *cli, int argc, char **argv, int min, int max,
			 bool *quiet, int *rc)
{
	static const struct option opts[] = { ORCH_CLI_OPTS_END };
	static const struct option qopts[] = {
		{ "quiet", no_argument, NULL, 'q' },
		ORCH_CLI_OPTS_END
	};
	int opt, n;

	while ((opt = orch_cli_getopt(cli, argc, argv, quiet ? "c:q" : "c:",
				      quiet ? qopts : opts)) != -1) {
		if (opt == 'q') {
			*quiet = true;
			continue;
		}
		*rc = orch_cli_usage(cli, opt == ORCH_CLI_OPT_HELP ? ORCH_CLI_OK : ORCH_CLI_USAGE);
		return false;
	}
	n = argc - optind;
	if (n < min || (max >= 0 && n > max)) {
		*rc = orch_cli_usage_err(cli, n < min ? "missing operand" : "too many operands");
		return false;
	}
	*rc = ORCH_CLI_OK;
	return true;
}

bool orch_cli_args_connect(struct orch_cli *cli, int argc, char **argv, uint32_t default_ms,
			   struct orch_cli_fs *fs, int *rc)
{
	static const struct option opts[] = {
		{ "timeout", required_argument, NULL, 't' },
		ORCH_CLI_OPTS_END
	};
	uint32_t timeout_ms = default_ms;
	uint64_t v;
	int opt;

	while ((opt = orch_cli_getopt(cli, argc, argv, "c:t:", opts)) != -1) {
		switch (opt) {
		case 't':
			if (orch_cli_uint_parse(optarg, 1, 3600000, &v)) {
				*rc = orch_cli_usage_err(cli, "--timeout: bad milliseconds '%s'",
							 optarg);
				return false;
			}
			timeout_ms = (uint32_t)v;
			break;
		case ORCH_CLI_OPT_HELP:
			*rc = orch_cli_usage(cli, ORCH_CLI_OK);
			return false;
		default:
			*rc = orch_cli_usage(cli, ORCH_CLI_USAGE);
			return false;
		}
	}
	if (optind != argc) {
		*rc = orch_cli_usage_err(cli, "unexpected argument '%s'", argv[optind]);
		return false;
	}
	*rc = orch_cli_connect_members(cli, fs);
	if (*rc)
		return false;
	orch_client_set_timeout(fs->cl, timeout_ms);
	return true;
}
