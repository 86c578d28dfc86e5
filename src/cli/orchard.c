/*
 * orchard: the administration and user tool.
 *
 *   orchard [-c CONF] COMMAND [ARGS...]
 *
 * This file holds main(), the global options and the table of commands with
 * their help texts; every command lives in cmd_<verb>.c.  Exit codes: 0 on
 * success, 1 on failure, 2 on a usage error.
 */
#include "cli/cli.h"
#include "cli/cmd_admin.h"

#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

#define CONF_OPT "  -c, --config CONF  cluster configuration (default: $ORCHARD_CONF, else\n" \
		 "                     " ORCH_CFG_DEFAULT_PATH ")\n"
#define QUIET_OPT "  -q, --quiet        no progress bar (drawn on stderr when it is a terminal)\n"

static const struct orch_cli_cmd cli_cmds[] = {
	{ "genconfig", orch_cmd_genconfig, "write a new cluster configuration and key",
	  "usage: orchard genconfig --servers N --dir DIR [OPTIONS]\n"
	  "       orchard genconfig --servers HOST:PORT,HOST:PORT,... --dir DIR [OPTIONS]\n"
	  "\n"
	  "Writes DIR/orchard.conf and DIR/orchard.key (a new random cluster key,\n"
	  "mode 0600) for N servers on 127.0.0.1, with their data in DIR/s0 ...,\n"
	  "or for servers s0, s1, ... at the addresses given, in that order, with\n"
	  "their data in /var/lib/orchard/s0 ... (copy both files to /etc/orchard/ of\n"
	  "every host).  Never overwrites either file.  Prints the path of the\n"
	  "configuration.\n"
	  "\n"
	  "  -n, --servers N|LIST   number of servers (1-64), or their addresses\n"
	  "  -d, --dir DIR          where to write (created if missing)\n"
	  "  -p, --base-port P      ports P..P+N-1 (default: free ports, picked now)\n"
	  "      --data-dir PATH    data directories PATH/s0 ... (an absolute path)\n"
	  "      --name NAME        cluster name (default: orchard)\n"
	  "      --strip-size BYTES default strip size, a multiple of 4K (default: 64K)\n", NULL },
	{ "mkfs", orch_cmd_mkfs, "initialise one server's data directory",
	  "usage: orchard [-c CONF] mkfs -n NAME [--force] [GEOMETRY OPTIONS]\n"
	  "\n"
	  "Creates the data directory of server NAME (from its [server NAME] section)\n"
	  "and initialises an empty namespace and extent store in it, with the store\n"
	  "geometry of the config's store_size, store_ag_blocks and store_maxext (and\n"
	  "the server's store_device), and prints the geometry it made.\n"
	  "\n" CONF_OPT
	  "  -n, --name NAME       the server to initialise\n"
	  "  -f, --force           wipe a data directory that already holds data\n"
	  "      --store-size SIZE size of the blocks file, K/M/G/T suffixes (0: 64G)\n"
	  "      --ag-blocks N     blocks per allocation group, a power of two (0: 1048576)\n"
	  "      --maxext N        longest extent in blocks (0: 4096)\n"
	  "The geometry options override the config for this mkfs.\n", NULL },
	{ "local", orch_cmd_local, "start or stop a cluster on this host",
	  "usage: orchard local up DIR [--servers N] [--mount MNT]\n"
	  "       orchard local down DIR\n"
	  "\n"
	  "up: if DIR has no orchard.conf, writes one (genconfig, N servers, default 2)\n"
	  "and runs mkfs for every server; then starts each server that is not running\n"
	  "(logs in DIR/NAME.log, pids in DIR/NAME.pid), waits until all answer, and\n"
	  "prints the configuration's path.  A stopped cluster restarts with its data.\n"
	  "down: unmounts DIR's mount if any, stops every server of DIR (SIGTERM, then\n"
	  "SIGKILL after 10 s) and removes the pid files.\n"
	  "\n"
	  "  -n, --servers N    servers of a new cluster (default 2)\n"
	  "  -m, --mount MNT    also mount the file system on MNT\n", NULL },
	{ "ping", orch_cmd_ping, "check that every server answers",
	  "usage: orchard [-c CONF] ping [-t MS]\n"
	  "\n"
	  "Pings every server: name, address, up or down, protocol versions and\n"
	  "round-trip time.  Exits 1 if any server is down.\n"
	  "\n" CONF_OPT
	  "  -t, --timeout MS   give up on a server after MS milliseconds (default 2000)\n", NULL },
	{ "cache", orch_cmd_cache, "show or change a mount's kernel-cache timeouts",
	  "usage: orchard cache MNT [NAME=VALUE ...]\n"
	  "\n"
	  "Prints the timeouts of the Orchard mount at MNT, after setting the ones\n"
	  "given; replies the mount sends afterwards use the new values.  VALUE is\n"
	  "milliseconds.  A bad NAME or VALUE changes nothing.  NAME is one of:\n",
	  orch_cmd_cache_usage },
	{ "status", orch_cmd_status, "show the cluster's health in one screen",
	  "usage: orchard [-c CONF] status [-t MS]\n"
	  "\n"
	  "One line per server: up or down (and why), version, uptime, capacity and\n"
	  "use of its store, requests per second over its last 10 s, open client\n"
	  "connections and the result of its last scrub; the cluster's totals first.\n"
	  "Exits 0 when every server is up, 1 otherwise.\n"
	  "\n" CONF_OPT
	  "  -t, --timeout MS   a server that takes longer is down (default 2000)\n", NULL },
	{ "stats", orch_cmd_stats, "show every server's counters (and a mount's)",
	  "usage: orchard [-c CONF] stats [--json] [MNT]\n"
	  "       orchard [-c CONF] stats --watch [-i SECONDS] [-n COUNT] [MNT]\n"
	  "\n"
	  "Asks every server for its statistics.  --json prints one object:\n"
	  "{\"servers\": [{\"name\": ..., \"address\": ..., \"up\": true, ...}, ...]}\n"
	  "with each server's own fields merged in; a down server has \"up\": false.\n"
	  "With MNT, the client side of that mount is added as \"client\": FUSE\n"
	  "requests and server requests by type; without a config only that is shown.\n"
	  "--watch redraws, every interval until interrupted, the requests per second\n"
	  "of each type on each server (with MNT: the mount's FUSE requests and what\n"
	  "it sent to the servers), as iostat does.\n"
	  "\n" CONF_OPT
	  "  -j, --json         machine-readable output\n"
	  "  -w, --watch        per-second rates by request type, redrawn until Ctrl-C\n"
	  "  -i, --interval S   seconds between redraws with --watch (default 1)\n"
	  "  -n, --count N      stop after N redraws (default: until interrupted)\n", NULL },
	{ "fsmap", orch_cmd_fsmap, "list a server's blocks with their owners",
	  ORCH_CMD_FSMAP_USAGE "\n" CONF_OPT, NULL },
	{ "whoowns", orch_cmd_whoowns, "name the files that own a server's blocks",
	  ORCH_CMD_WHOOWNS_USAGE "\n" CONF_OPT, NULL },
	{ "scrub", orch_cmd_scrub, "check live servers' store and namespace",
	  ORCH_CMD_SCRUB_USAGE CONF_OPT, NULL },
	{ "df", orch_cmd_df, "show space and inode usage",
	  "usage: orchard [-c CONF] df [-h]\n"
	  "\n"
	  "Size, used and available space (in 1K blocks) and inodes, summed over\n"
	  "every server.\n"
	  "\n" CONF_OPT
	  "  -h, --human-readable  sizes like 1.5K, 23M, 4.0G\n", NULL },
	{ "ls", orch_cmd_ls, "list directories",
	  "usage: orchard [-c CONF] ls [-l] PATH...\n"
	  "\n"
	  "Lists each directory PATH (sorted by name); a PATH that is not a directory\n"
	  "lists itself.\n"
	  "\n" CONF_OPT
	  "  -l                 long format: mode, links, uid, gid, size, mtime, name\n", NULL },
	{ "stat", orch_cmd_stat, "show every attribute of a file",
	  "usage: orchard [-c CONF] stat [-L] PATH...\n"
	  "\n"
	  "Prints type, handle (and the server it lives on), mode, owner, size,\n"
	  "layout and times of each PATH.\n"
	  "\n" CONF_OPT
	  "  -L, --dereference  follow a final symbolic link\n", NULL },
	{ "mkdir", orch_cmd_mkdir, "make directories",
	  "usage: orchard [-c CONF] mkdir [-p] [-m MODE] PATH...\n"
	  "\n" CONF_OPT
	  "  -p, --parents      make parents as needed; no error if PATH exists\n"
	  "  -m, --mode MODE    permissions (octal or symbolic; default 0777 & ~umask)\n", NULL },
	{ "put", orch_cmd_put, "copy a local file into Orchard",
	  "usage: orchard [-c CONF] put [--fsync] [--quiet] LOCAL PATH\n"
	  "\n"
	  "Creates PATH, or truncates it if it exists, and writes LOCAL into it ('-'\n"
	  "reads stdin).  If PATH is a directory, writes PATH/basename(LOCAL).\n"
	  "\n"
	  "  -s, --fsync        make the file durable (fsync on every server) before\n"
	  "                     exiting\n" QUIET_OPT CONF_OPT, NULL },
	{ "get", orch_cmd_get, "copy a file out of Orchard",
	  "usage: orchard [-c CONF] get [--quiet] PATH LOCAL\n"
	  "\n"
	  "Writes file PATH to LOCAL ('-' writes stdout; then no progress bar if\n"
	  "stdout is a terminal).  If LOCAL is a directory, writes\n"
	  "LOCAL/basename(PATH).\n"
	  "\n" QUIET_OPT CONF_OPT, NULL },
	{ "cat", orch_cmd_cat, "write files to stdout",
	  "usage: orchard [-c CONF] cat PATH...\n"
	  "\n" CONF_OPT, NULL },
	{ "rm", orch_cmd_rm, "remove files or directories",
	  "usage: orchard [-c CONF] rm [-r] [-f] PATH...\n"
	  "\n" CONF_OPT
	  "  -r, --recursive    remove directories and their contents\n"
	  "  -f, --force        ignore missing files\n", NULL },
	{ "mv", orch_cmd_mv, "rename or move",
	  "usage: orchard [-c CONF] mv SRC DST\n"
	  "\n"
	  "Renames SRC to DST, replacing DST if it is a file; if DST is a directory,\n"
	  "moves SRC into it.\n"
	  "\n" CONF_OPT, NULL },
	{ "ln", orch_cmd_ln, "make hard or symbolic links",
	  "usage: orchard [-c CONF] ln [-s] TARGET LINKNAME\n"
	  "\n"
	  "Makes LINKNAME a hard link to TARGET, or with -s a symbolic link holding\n"
	  "the text TARGET.  If LINKNAME is a directory, the link goes inside it.\n"
	  "\n" CONF_OPT
	  "  -s, --symbolic     make a symbolic link\n", NULL },
	{ "truncate", orch_cmd_truncate, "set the size of a file",
	  "usage: orchard [-c CONF] truncate -s SIZE PATH\n"
	  "\n"
	  "Sets the size of PATH (created if missing); SIZE takes K, M, G, T.\n"
	  "\n" CONF_OPT
	  "  -s, --size SIZE    the new size\n", NULL },
	{ "chmod", orch_cmd_chmod, "change permissions",
	  "usage: orchard [-c CONF] chmod MODE PATH...\n"
	  "\n"
	  "MODE is octal (755) or symbolic (u+x,go-w).\n"
	  "\n" CONF_OPT, NULL },
	{ "clone", orch_cmd_clone, "copy a file by sharing its blocks (reflink)",
	  "usage: orchard [-c CONF] clone [--quiet] SRC DST\n"
	  "\n"
	  "Makes DST (created, or emptied) a copy of SRC that shares SRC's data blocks\n"
	  "on every server: no data moves and no space is used until either file is\n"
	  "written, and a write changes only the file written (copy-on-write).\n"
	  "\n" QUIET_OPT CONF_OPT, NULL },
	{ "dedupe", orch_cmd_dedupe, "share identical blocks of files",
	  "usage: orchard [-c CONF] dedupe SRC DST [--range OFF:LEN]\n"
	  "       orchard [-c CONF] dedupe --scan [--quiet] PATH\n"
	  "\n"
	  "Where DST's bytes equal SRC's (the whole files, or OFF:LEN of both), DST\n"
	  "shares SRC's blocks and frees its own; prints the bytes deduplicated.  If\n"
	  "the contents differ nothing changes and the exit status is 1.  --scan finds\n"
	  "identical blocks in the files under PATH by their stored checksums, checks\n"
	  "them byte for byte, shares them, and prints the space freed.\n"
	  "\n" CONF_OPT
	  "  -r, --range OFF:LEN  only these bytes (K, M, G, T suffixes)\n"
	  "  -s, --scan           find and dedupe identical blocks under PATH\n"
	  "  -q, --quiet          no progress bar of --scan (drawn on stderr when it is\n"
	  "                       a terminal)\n", NULL },
	{ "touch", orch_cmd_touch, "create a file or update its times",
	  "usage: orchard [-c CONF] touch PATH...\n"
	  "\n"
	  "Sets access and modification times of PATH to now; creates an empty file\n"
	  "if it does not exist.\n"
	  "\n" CONF_OPT, NULL },
	{ "repair", orch_cmd_repair, "rebuild an index of a stopped server's store",
	  "usage: orchard [-c CONF] repair SERVER --rebuild WHAT [--dry-run] [--data]\n"
	  "                                [--quiet]\n"
	  "\n"
	  "Rebuilds one index of the extent store of server SERVER, which must be\n"
	  "stopped, from the others, and re-checks the store.  WHAT: bmap (extent\n"
	  "maps, from the reverse map, verified against the data checksums), rmap\n"
	  "(from the extent maps), freespace or refcount (from the reverse map).\n"
	  "Exit: 0 clean after, 1 errors remain, 4 server running or I/O error, 8 usage.\n"
	  "\n" CONF_OPT
	  "      --rebuild WHAT  bmap, rmap, freespace or refcount\n"
	  "      --dry-run       show what would change, change nothing\n"
	  "      --data          the re-check also reads every block\n"
	  "  -q, --quiet         no progress bar (bytes read; drawn on stderr when it\n"
	  "                      is a terminal)\n", NULL },
	{ "xattr", orch_cmd_xattr, "get, set, list or remove extended attributes",
	  "usage: orchard [-c CONF] xattr get PATH NAME\n"
	  "       orchard [-c CONF] xattr set PATH NAME VALUE\n"
	  "       orchard [-c CONF] xattr list PATH\n"
	  "       orchard [-c CONF] xattr rm PATH NAME\n"
	  "\n"
	  "get prints the value followed by a newline; list prints one name a line.\n"
	  "A VALUE that begins with '-' needs '--' before the operands.\n"
	  "\n" CONF_OPT, NULL },
};

static void cli_help(FILE *f)
{
	fputs("usage: orchard [-c CONF] COMMAND [ARGS...]\n"
	      "       orchard COMMAND --help\n"
	      "\n"
	      CONF_OPT
	      "  -h, --help         this help\n"
	      "  -V, --version      print the version\n"
	      "\n"
	      "Environment: ORCHARD_CONF (the default for -c), ORCHARD_LOG_LEVEL (err,\n"
	      "warn, notice, info, debug: the client library's messages; default err).\n"
	      "\n"
	      "Commands:\n", f);
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(cli_cmds); i++)
		fprintf(f, "  %-10s %s\n", cli_cmds[i].name, cli_cmds[i].summary);
}

static const struct orch_cli_cmd *cli_cmd_lookup(const char *name)
{
	for (size_t i = 0; i < ORCH_ARRAY_SIZE(cli_cmds); i++)
		if (strcmp(cli_cmds[i].name, name) == 0)
			return &cli_cmds[i];
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct orch_cli cli = { .conf = NULL };
	const char *level = getenv("ORCHARD_LOG_LEVEL");
	int opt;

	/*
	 * The CLI reports failures itself, in its own words; the library's
	 * warnings (a refused connection while a server starts, say) would
	 * only repeat them.  ORCHARD_LOG_LEVEL=debug shows everything.
	 */
	if (!level || orch_log_level_parse(level, &orch_log_level))
		orch_log_level = ORCH_LOG_ERR;

	/* '+': stop at the command; its options are its own. */
	orch_cli_getopt_reset();
	while ((opt = getopt_long(argc, argv, "+c:hV", opts, NULL)) != -1) {
		switch (opt) {
		case 'c':
			cli.conf = optarg;
			break;
		case 'h':
			cli_help(stdout);
			return ORCH_CLI_OK;
		case 'V':
			printf("orchard %s (protocol %d)\n", ORCH_VERSION, ORCH_PROTO_VERSION);
			return ORCH_CLI_OK;
		default:
			fputs("Try 'orchard --help' for more information.\n", stderr);
			return ORCH_CLI_USAGE;
		}
	}
	if (optind >= argc) {
		cli_help(stderr);
		return ORCH_CLI_USAGE;
	}
	if (strcmp(argv[optind], "help") == 0) {
		if (optind + 1 < argc && (cli.cmd = cli_cmd_lookup(argv[optind + 1])))
			return orch_cli_usage(&cli, ORCH_CLI_OK);
		cli_help(stdout);
		return ORCH_CLI_OK;
	}
	cli.cmd = cli_cmd_lookup(argv[optind]);
	if (!cli.cmd) {
		orch_cli_msg("'%s' is not a command; see 'orchard --help'", argv[optind]);
		return ORCH_CLI_USAGE;
	}
	argc -= optind;
	argv += optind;
	orch_cli_getopt_reset();
	return cli.cmd->fn(&cli, argc, argv);
}
