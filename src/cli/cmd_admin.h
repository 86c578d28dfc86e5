/*
 * The reverse-map tools of the CLI: fsmap and whoowns (cmd_fsmap.c), scrub
 * (cmd_scrub.c).  Declared apart from cli.h so those files and orchard.c's
 * table are all they touch.
 */
#ifndef ORCH_CLI_CMD_ADMIN_H
#define ORCH_CLI_CMD_ADMIN_H

#include "cli/cli.h"

/* Exit codes of scrub, as xfs_scrub: they add up. */
#define ORCH_SCRUB_CLEAN 0
#define ORCH_SCRUB_ERRORS 1
#define ORCH_SCRUB_OPTIMISE 2   /* never produced yet */
#define ORCH_SCRUB_OPERATIONAL 4
#define ORCH_SCRUB_USAGE 8

int orch_cmd_fsmap(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_whoowns(struct orch_cli *cli, int argc, char **argv);
int orch_cmd_scrub(struct orch_cli *cli, int argc, char **argv);

#define ORCH_CMD_FSMAP_USAGE                                                          \
	"usage: orchard [-c CONF] fsmap SERVER [--range START:END] [-v | --json]\n"   \
	"\n"                                                                          \
	"Lists the physical ranges of server SERVER's extent store in block order,\n" \
	"each with its owner: a file path and the byte range of the file it holds,\n" \
	"or 'static metadata', 'free space', 'bad blocks'.  A block shared by\n"      \
	"several files appears once per owner.  Blocks are 4 KiB store blocks,\n"     \
	"numbered globally (AG * ag_blocks + block in the AG).\n"                     \
	"\n"                                                                          \
	"  -r, --range START:END  only blocks START through END\n"                    \
	"  -v, --verbose          a table with AG, AG block, lengths and flags\n"     \
	"  -j, --json             one JSON object\n"

#define ORCH_CMD_WHOOWNS_USAGE                                                        \
	"usage: orchard [-c CONF] whoowns SERVER BLOCK[:BLOCK]\n"                      \
	"\n"                                                                          \
	"Names the owners of store block BLOCK (or blocks BLOCK through BLOCK) of\n"  \
	"server SERVER: file paths with byte ranges, or a special owner.\n"

#define ORCH_CMD_SCRUB_USAGE                                                          \
	"usage: orchard [-c CONF] scrub (SERVER | --all) [--data] [--reclaim] [--json]\n" \
	"                                [--rate MB] [--quiet]\n"                      \
	"\n"                                                                          \
	"Checks live servers while clients keep working: every invariant of the\n"    \
	"extent store's indexes and records, and the namespace (link counts,\n"      \
	"entries naming no inode, data objects without an inode, old intents,\n"     \
	"bytes past a file's size that no live writer can publish).\n"               \
	"--data also reads every written block and verifies its checksum; a bad\n"    \
	"block is reported with every file and byte range it belongs to, and\n"      \
	"quarantined.  Exit status adds up: 0 clean, 1 errors found, 4 a server\n"    \
	"could not be checked, 8 usage error.\n"                                       \
	"\n"                                                                          \
	"  -a, --all        every server of the config\n"                             \
	"  -d, --data       verify the data too\n"                                    \
	"  -R, --reclaim    cut the bytes past a file's size that were found (N7)\n"   \
	"  -r, --rate MB    read data at most MB MiB/s per server (default 64, 0: no limit)\n" \
	"  -j, --json       one JSON object\n"                                       \
	"  -q, --quiet      no progress bar (drawn on stderr when it is a terminal)\n"

#endif
