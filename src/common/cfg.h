/*
 * Cluster configuration: one INI file (libinih).
 *
 *   [cluster]
 *   name = demo
 *   id = 5f0c...            ; random, written by genconfig; mkfs stamps it
 *   key_file = orchard.key  ; relative paths are relative to the config file
 *   strip_size = 65536
 *   op_timeout_ms = 10000
 *   commit_interval_ms = 1000
 *   lease_ms = 30000        ; how long a mount may cache under a lease; 0: no leases
 *   handshake_timeout_ms = 10000 ; a server closes a connection not authenticated by then
 *   max_connections = 4096  ; a server closes at once connections past this many
 *   replicas = 1            ; members per replica group (1..5): consecutive
 *                           ; [server] sections form a group; 2 or more need a
 *                           ; log_address on every member
 *   reclaim_orphans = 1     ; delete data objects whose inode a power cut took
 *                           ; (0: keep them for scrub to report)
 *   store_size = 64G        ; blocks file of each server; K/M/G/T suffixes
 *   store_ag_blocks = 0     ; blocks per allocation group (0: 1048576)
 *   store_maxext = 0        ; longest extent in blocks (0: 4096)
 *   store_reserve = 64M     ; host space the blocks file leaves to the databases
 *                           ; (absent: 1/16 of the file system, 4M..256M; 0: none)
 *
 *   [server s0]
 *   address = 127.0.0.1:7400
 *   data_dir = s0
 *   store_device = /dev/sdb ; optional: the blocks on a device or file
 *   metrics = 127.0.0.1:9500 ; optional: GET /metrics and the status page here
 *   metrics_public = no     ; yes: allow a metrics address that is not loopback
 *   log_address = 127.0.0.1:7600 ; optional: the namespace goes through a
 *                           ; replicated log (libraft) whose members talk here
 *                           ; (docs/DESIGN.md, "The server on the group")
 *
 * The store_* settings but store_reserve are read by mkfs only (they are
 * the store's geometry, docs/SPEC-store.md); 0 means the store's default.
 * Servers are numbered in the order their sections appear.  With replicas =
 * R, sections 0..R-1 are the members of replica group 0, R..2R-1 of group
 * 1, and so on; a group is what owns handles, layouts and strips, and its
 * number is the top 16 bits of every handle it creates, so the order must
 * never change.  In struct orch_cfg, servers[] are the groups (each a copy
 * of its first member: R = 1 is the cluster of old), members[] the sections.
 */
#ifndef ORCH_COMMON_CFG_H
#define ORCH_COMMON_CFG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Where every command looks for the config when neither -c nor
 * $ORCHARD_CONF names one.  make install and the Debian package keep it
 * there; -DORCH_CFG_DEFAULT_PATH=... moves it.
 */
#ifndef ORCH_CFG_DEFAULT_PATH
#define ORCH_CFG_DEFAULT_PATH "/etc/orchard/orchard.conf"
#endif

#define ORCH_SERVERS_MAX 64
/* Members of one replica group at most (the log's own limit, repl.h). */
#define ORCH_REPLICAS_MAX 5
/* Longest log_address, with its NUL (the log's own limit, repl.h). */
#define ORCH_CFG_LOG_ADDR_MAX 64
#define ORCH_KEY_LEN 32
#define ORCH_CFG_NAME_MAX 64
#define ORCH_STRIP_MIN 4096u
#define ORCH_STRIP_MAX (16u << 20)
/* Limits of the store geometry settings (store/store.h). */
#define ORCH_CFG_STORE_SIZE_MIN (64ull * 4096)   /* one AG of 64 blocks */
#define ORCH_CFG_STORE_AG_MIN 64u
#define ORCH_CFG_STORE_AG_MAX (1u << 30)
#define ORCH_CFG_STORE_AG_DEFAULT (1u << 20)
/* store_reserve not set: the store chooses (ORCH_STORE_RESERVE_AUTO). */
#define ORCH_CFG_RESERVE_AUTO UINT64_MAX

struct orch_server_cfg {
	char name[ORCH_CFG_NAME_MAX]; /* section name after "server " */
	char host[256];               /* numeric or resolvable host */
	uint16_t port;
	char data_dir[PATH_MAX]; /* absolute */
	char store_device[PATH_MAX]; /* absolute; "" = data_dir/blocks */
	char metrics[300];       /* HOST:PORT of the HTTP endpoint; "" = off */
	uint32_t metrics_public; /* 1: metrics may be on an address that is not loopback */
	char log_address[300];   /* IPv4:PORT of its replica group's log; "" = no log */
};

struct orch_cfg {
	char path[PATH_MAX]; /* the file it came from, absolute */
	char cluster_name[ORCH_CFG_NAME_MAX];
	char cluster_id[ORCH_CFG_NAME_MAX];
	char key_file[PATH_MAX]; /* absolute */
	uint32_t strip_size;
	uint32_t op_timeout_ms;
	uint32_t commit_interval_ms;
	uint32_t reclaim_orphans;     /* 1: delete data objects whose inode is gone */
	uint32_t lease_ms;            /* 0: servers grant no leases */
	uint32_t handshake_timeout_ms; /* servers: from accept to authenticated */
	uint32_t max_connections;     /* servers: accepted connections open at once */
	uint64_t store_size;          /* bytes; 0 = the store's default */
	uint32_t store_ag_blocks;     /* 0 = default */
	uint32_t store_maxext;        /* 0 = default */
	uint64_t store_reserve;       /* bytes; ORCH_CFG_RESERVE_AUTO when not set */
	uint32_t replicas;            /* members per replica group */
	/* The replica groups (what handles name): each a copy of its first member. */
	unsigned int nservers;
	struct orch_server_cfg servers[ORCH_SERVERS_MAX];
	/* Every [server NAME] section in order; group g's are g*replicas .. +replicas-1. */
	unsigned int nmembers;
	struct orch_server_cfg members[ORCH_SERVERS_MAX];
	uint8_t key[ORCH_KEY_LEN]; /* filled by orch_cfg_load_key() */
};

/*
 * Parses @path into @out (defaults filled first).  On failure returns -errno
 * (-EINVAL for a bad value) and writes a one-line reason into @err.
 */
int orch_cfg_load(const char *path, struct orch_cfg *out, char *err, size_t errlen);

/* Same, from a string (for fuzzing); relative paths resolve against @dir. */
int orch_cfg_parse(const char *text, const char *dir, struct orch_cfg *out,
		   char *err, size_t errlen);

/*
 * The config a command uses: @given (its -c) if set, else $ORCHARD_CONF if
 * set, else ORCH_CFG_DEFAULT_PATH if that file exists; NULL when none
 * applies.  The result is @given, the environment's string or a constant:
 * never freed.  Any thread (reads the environment).
 */
const char *orch_cfg_path(const char *given);

/* The replica group (index in servers[]) of the member named @name, or -ENOENT. */
int orch_cfg_server_index(const struct orch_cfg *cfg, const char *name);
/* The index in members[] of the member named @name, or -ENOENT. */
int orch_cfg_member_index(const struct orch_cfg *cfg, const char *name);

/*
 * @cfg member by member: a copy whose servers are its members, each a group
 * of its own, for what talks to every member (status, ping, stats, local).
 */
void orch_cfg_members_view(const struct orch_cfg *cfg, struct orch_cfg *out);

/* Member @m (0 .. replicas-1) of replica group @g. */
static inline const struct orch_server_cfg *orch_cfg_member(const struct orch_cfg *cfg,
							    unsigned int g, unsigned int m)
{
	return &cfg->members[g * cfg->replicas + m];
}

/*
 * Reads the key file (64 hex digits) into cfg->key.  Refuses a key file that
 * others can read (-EPERM), like ssh does.  Returns 0 or -errno, reason in @err.
 */
int orch_cfg_load_key(struct orch_cfg *cfg, char *err, size_t errlen);

/*
 * Parses a byte count with an optional K, M, G or T suffix (powers of 1024,
 * "KiB" and "KB" accepted too) into @out.  Returns 0 or -EINVAL.
 */
int orch_cfg_parse_size(const char *s, uint64_t *out);

/*
 * Checks a store geometry (0 in a field: its default): @size 0 or at least
 * ORCH_CFG_STORE_SIZE_MIN (the store uses whole blocks); @ag_blocks 0 or a power of
 * two in [ORCH_CFG_STORE_AG_MIN, ORCH_CFG_STORE_AG_MAX]; @maxext 0 or at
 * most the AG size.  Returns 0, or -EINVAL with a one-line reason in @err
 * naming the setting by @names[0..2] (the config keys, or the CLI options,
 * of size, ag_blocks and maxext) followed by @where (" in [cluster]", or "").
 */
int orch_cfg_check_store_geom(uint64_t size, uint32_t ag_blocks, uint32_t maxext,
			      const char *const names[3], const char *where, char *err,
			      size_t errlen);


/* Parses "HOST:PORT" into @host/@port.  Returns 0 or -EINVAL. */
int orch_cfg_parse_address(const char *s, char *host, size_t hostlen, uint16_t *port);

#endif
