/*
 * The `orchard` command-line tool, private header.
 *
 * orchard.c parses the global options and dispatches through one table of
 * struct orch_cli_cmd; each subcommand group lives in cmd_<verb>.c and
 * exports orch_cmd_<verb>(), which returns the process exit code:
 * ORCH_CLI_OK (0), ORCH_CLI_FAIL (1) or ORCH_CLI_USAGE (2).  cli.c holds the
 * shared helpers (error messages, option parsing, opening a client, mode
 * strings, human sizes).  Helpers return 0 or -errno like the rest of
 * Orchard; exit codes are spoken only by the commands and by the few helpers
 * whose result a command passes straight on (orch_cli_usage*,
 * orch_cli_args, orch_cli_connect).
 *
 * Files: cmd_genconfig, cmd_mkfs, cmd_local (up, down), cmd_ping, cmd_status,
 * cmd_stats (and cmd_watch, its --watch),
 * cmd_df, cmd_ls, cmd_stat, cmd_mkdir, cmd_put (put, get, cat), cmd_rm,
 * cmd_mv, cmd_ln, cmd_setattr (truncate, chmod, touch), cmd_xattr; progress
 * draws the progress bars of the long commands (progress.h).
 *
 * Single-threaded: the CLI itself starts no thread but a progress bar's
 * ticker, which only draws (progress.h).  The only state is struct
 * orch_cli, the parsed global options, which main() owns and passes down,
 * the client of orch_cli_connect(), which cli.c keeps to name a server in
 * error messages, and the current progress bar, which progress.c keeps for
 * orch_cli_msg() and orch_cli_err() to erase.
 */
#ifndef ORCH_CLI_CLI_H
#define ORCH_CLI_CLI_H

#include <getopt.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "client/fs.h"
#include "client/rpc.h"
#include "common/cfg.h"
#include "common/version.h"
#include "proto/types.h"

#define ORCH_CLI_OK 0
#define ORCH_CLI_FAIL 1
#define ORCH_CLI_USAGE 2

/* Chunk size of put/get/cat: large enough that every strip is in flight. */
#define ORCH_CLI_IO_CHUNK (4u << 20)

/* getopt_long value of --help (long only: -h means "human" in df). */
#define ORCH_CLI_OPT_HELP 0x100

/* Long options every subcommand takes; end a struct option array with it. */
#define ORCH_CLI_OPTS_END                                                      \
	{ "help", no_argument, NULL, ORCH_CLI_OPT_HELP },                      \
	{ "config", required_argument, NULL, 'c' },                            \
	{ NULL, 0, NULL, 0 }

struct orch_cli;

struct orch_cli_cmd {
	const char *name;                                   /* "ls", "local" */
	int (*fn)(struct orch_cli *cli, int argc, char **argv); /* argv[0] = name */
	const char *summary;                                /* one line, for --help */
	const char *usage;                                  /* full --help text */
	void (*usage_more)(FILE *f);                        /* NULL, or printed after */
};

/* The parsed global options.  Owned by main(); commands may update conf. */
struct orch_cli {
	const char *conf;                /* -c CONF, or NULL (see orch_cli_conf_path) */
	const struct orch_cli_cmd *cmd;  /* the subcommand being run */
};

/* A connected client and the caller's credentials, for the fs commands. */
struct orch_cli_fs {
	struct orch_client *cl;
	struct orch_cred cred;
};

/* --- Messages ------------------------------------------------------------- */

/* "orchard: <message>\n" on stderr (a progress bar is erased first). */
void orch_cli_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* "orchard: <message>: <orch_cli_strerror(error, NULL)>\n" on stderr. */
void orch_cli_err(int error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * strerror() of -@error (or @error), but for -EKEYREJECTED, a server that
 * holds another cluster key (rpc.h): "authentication failed: cluster key
 * does not match server NAME", NAME being @server, or if NULL the first
 * such server of the client orch_cli_connect() made.  The text lasts until
 * the next call.
 */
const char *orch_cli_strerror(int error, const char *server);

/*
 * Prints the current subcommand's help: to stdout and returns ORCH_CLI_OK
 * if @code is ORCH_CLI_OK, else a short hint on stderr and returns @code.
 */
int orch_cli_usage(const struct orch_cli *cli, int code);

/* Usage error with a reason: "orchard CMD: <reason>", hint, returns 2. */
int orch_cli_usage_err(const struct orch_cli *cli, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * Makes the next orch_cli_getopt() start a fresh scan.  main() calls it
 * before every subcommand; a subcommand with verbs ("local up") calls it
 * again before parsing the verb's argv.
 */
void orch_cli_getopt_reset(void);

/*
 * getopt_long() for a subcommand: handles -c/--config itself (it sets
 * cli->conf; @shortopts must list "c:" for -c) and returns the other options
 * as getopt_long does (ORCH_CLI_OPT_HELP for --help, '?' for an unknown one,
 * -1 at the end).  @shortopts should begin with '+' where permuting would
 * hurt.
 */
int orch_cli_getopt(struct orch_cli *cli, int argc, char **argv, const char *shortopts,
		    const struct option *longopts);

/*
 * The whole option parsing of a command with no options of its own: -c and
 * --help, then between @min and @max (-1: any) operands from argv[optind].
 * Returns true to go on (*@rc = ORCH_CLI_OK); false with the exit code in
 * *@rc.
 */
bool orch_cli_args(struct orch_cli *cli, int argc, char **argv, int min, int max, int *rc);

/* The same for a command that draws a progress bar: -q/--quiet sets *@quiet. */
bool orch_cli_args_quiet(struct orch_cli *cli, int argc, char **argv, int min, int max,
			 bool *quiet, int *rc);

/*
 * The whole start of a command that asks every server (status, ping): -c,
 * --help, -t/--timeout MS (@default_ms if not given) and no operands, then
 * orch_cli_connect_members() with that timeout.  Returns true with *@fs open (the
 * caller closes it); false with the exit code in *@rc.
 */
bool orch_cli_args_connect(struct orch_cli *cli, int argc, char **argv, uint32_t default_ms,
			   struct orch_cli_fs *fs, int *rc);

/* --- Parsing -------------------------------------------------------------- */

/* Decimal with an optional K/M/G/T suffix (powers of 1024).  0 or -EINVAL. */
int orch_cli_size_parse(const char *s, uint64_t *out);

/* Decimal unsigned integer in [min, max].  0 or -EINVAL. */
int orch_cli_uint_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/*
 * A chmod-style mode: octal ("755") or symbolic ("u+x,go-w", "a=r") applied
 * to @old (permission bits of the file; X uses its type).  0 or -EINVAL.
 */
int orch_cli_mode_parse(const char *s, uint32_t old, uint32_t *out);

/* The process umask, without changing it. */
uint32_t orch_cli_umask(void);

/* --- Formatting ------------------------------------------------------------- */

/* "drwxr-xr-x" (10 chars and NUL) for @mode. */
void orch_cli_mode_str(uint32_t mode, char out[11]);

/* "regular file", "directory", ... for the type bits of @mode. */
const char *orch_cli_type_name(uint32_t mode);

/* 1.5K, 23M, 4.0G: at most 6 chars, powers of 1024. */
void orch_cli_human(uint64_t bytes, char *out, size_t outlen);

/* "2024-05-01 12:34:56.123456789 +0000" local time; with @ns false, to minutes. */
void orch_cli_time_str(int64_t ns, bool with_ns, char *out, size_t outlen);

/* Writes @s as a JSON string literal (quotes and escapes) to @f. */
void orch_cli_json_str(FILE *f, const char *s, size_t len);

/* --- Files and processes ---------------------------------------------------- */

/* mkdir -p; 0 or -errno. */
int orch_cli_mkdir_p(const char *path, uint32_t mode);

/* Reads/writes all of @len, retrying short transfers and EINTR.  0 or -errno. */
int orch_cli_write_all(int fd, const void *buf, size_t len);
/* Reads up to @len, stopping early only at EOF; *@got gets the count. */
int orch_cli_read_full(int fd, void *buf, size_t len, size_t *got);

/* The directory of the running binary (dirname of /proc/self/exe). */
int orch_cli_bin_dir(char *out, size_t outlen);

/* --- Connecting ------------------------------------------------------------- */

/*
 * Loads the config (orch_cli_conf_path()), the key, and creates a
 * client into *@out, with the caller's credentials.  Prints the reason on
 * failure.  Unlike the other helpers it returns an exit code, for the
 * commands to pass on: ORCH_CLI_OK, ORCH_CLI_USAGE (no config given) or
 * ORCH_CLI_FAIL.
 */
int orch_cli_connect(struct orch_cli *cli, struct orch_cli_fs *out);
/*
 * The same with a client that talks to every member of every replica group
 * as a server of its own (orch_cfg_members_view): for status, ping, stats.
 */
int orch_cli_connect_members(struct orch_cli *cli, struct orch_cli_fs *out);
void orch_cli_fs_close(struct orch_cli_fs *fs);

/*
 * Loads a config file into a fresh heap struct (*@out, free() it).  Prints
 * the reason on failure.  With @key, loads the key file as well.
 */
int orch_cli_cfg_load(const char *path, bool key, struct orch_cfg **out);

/*
 * cli->conf, else $ORCHARD_CONF, else ORCH_CFG_DEFAULT_PATH if it exists
 * (orch_cfg_path()); if none, prints a usage error and returns NULL.
 */
const char *orch_cli_conf_path(const struct orch_cli *cli);

/* Resolves @path inside Orchard; prints "cannot access" on failure. */
int orch_cli_resolve(struct orch_cli_fs *fs, const char *path, bool follow,
		     struct orch_attr *out);

/*
 * orch_fs_resolve_parent() with the same checks and messages: *@parent gets
 * the parent directory, @name the last component.
 */
int orch_cli_resolve_parent(struct orch_cli_fs *fs, const char *path, struct orch_attr *parent,
			    char name[ORCH_NAME_MAX + 1]);

/* The last component of @path ("/a/b/" -> "b"), into @out. */
void orch_cli_basename(const char *path, char *out, size_t outlen);

/* --- Shared pieces of subcommands ------------------------------------------- */

/*
 * genconfig: writes DIR/orchard.conf and DIR/orchard.key; prints errors.
 * Servers are on 127.0.0.1 (@base_port, or free ports), unless @hosts names
 * their addresses.
 */
struct orch_cli_genconfig {
	const char *dir;
	unsigned int nservers;
	uint16_t base_port;   /* 0: pick free ports */
	const char *name;
	uint32_t strip_size;
	const char *hosts;    /* "HOST:PORT,HOST:PORT,...", one per server, or NULL */
	const char *data_dir; /* absolute parent of the data dirs, or NULL: see .c */
	unsigned int replicas; /* servers per replica group (0: 1); nservers a multiple */
};
int orch_cli_genconfig_write(const struct orch_cli_genconfig *g, char *conf_path,
			     size_t conf_pathlen);

/* mkfs of member @member (members[]) of @cfg; prints errors and one line of progress. */
int orch_cli_mkfs_server(const struct orch_cfg *cfg, unsigned int member, bool force);

/* --- Subcommands (cmd_*.c) ----------------------------------------------------- */

int orch_cmd_genconfig(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_mkfs(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_local(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_ping(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_cache(struct orch_cli *cli, int argc, char **argv);
void orch_cmd_cache_usage(FILE *f);
int orch_cmd_stats(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_status(struct orch_cli *cli, int argc, char **argv);
/*
 * The counters of the mount at @mnt: the user.orchard.stats xattr of its
 * root (docs/mount.md), a JSON object; *@out is malloc'ed and
 * NUL-terminated.  ORCH_CLI_OK, or ORCH_CLI_FAIL after saying why.
 */
int orch_cli_mount_stats(const char *mnt, char **out);
/*
 * stats --watch (cmd_watch.c): per-second rates by request type of every
 * server, or of the mount at @mnt, redrawn every @interval_ms until SIGINT
 * or SIGTERM, or @count frames (0: no limit).  Returns the exit code.
 */
int orch_cli_stats_watch(struct orch_cli *cli, const char *mnt, uint32_t interval_ms,
			 uint64_t count);
int orch_cmd_ls(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_stat(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_mkdir(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_put(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_clone(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_dedupe(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_repair(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_get(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_cat(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_rm(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_mv(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_ln(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_df(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_truncate(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_chmod(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_touch(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_xattr(struct orch_cli *cli, int argc, char **argv);

#endif
