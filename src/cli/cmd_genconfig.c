/*
 * orchard genconfig: a new cluster's configuration and key.
 *
 * The key is made first, with O_EXCL and mode 0600 from the start (never a
 * window in which another user could read it); the config is then written to
 * a temporary file and linked into place, which fails if orchard.conf
 * appeared meanwhile.  A failure removes what this run created.
 *
 * Two forms: --servers N puts N servers on 127.0.0.1 with their data next to
 * the config (a test or single-host cluster); --servers HOST:PORT,... names
 * servers on other hosts, whose data goes to /var/lib/orchard/NAME (the
 * StateDirectory of orchardd@.service), as the same file is copied to every
 * host (docs/ADMIN.md, "Deploy on three hosts").
 */
#include "cli/cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/rand.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define GC_CONF "orchard.conf"
#define GC_KEY "orchard.key"
/* Data directories of servers on other hosts (--servers HOST:PORT,...). */
#define GC_HOSTS_DATA_DIR "/var/lib/orchard"
/* "HOST:PORT": a host name of at most 255 bytes, a colon, a port. */
#define GC_ADDR_MAX 264

static void gc_hex(const uint8_t *p, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[p[i] >> 4];
		out[2 * i + 1] = digits[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/*
 * Splits --servers HOST:PORT,HOST:PORT,... into @addrs, checking each
 * address as the config parser will and refusing a repeated one.  Returns
 * the number of servers, or -EINVAL with the reason in @why.
 */
static int gc_hosts_parse(const char *list, char addrs[][GC_ADDR_MAX], char *why,
			  size_t whylen)
{
	const char *p = list;
	int n = 0;

	for (;;) {
		size_t len = strcspn(p, ",");
		char host[256];
		uint16_t port;

		if (n == ORCH_SERVERS_MAX) {
			snprintf(why, whylen, "more than %d servers", ORCH_SERVERS_MAX);
			return -EINVAL;
		}
		if (len >= GC_ADDR_MAX) {
			snprintf(why, whylen, "address too long: '%.*s...'", 32, p);
			return -EINVAL;
		}
		memcpy(addrs[n], p, len);
		addrs[n][len] = '\0';
		/* What would break the INI line, or the address parser. */
		if (orch_cfg_parse_address(addrs[n], host, sizeof(host), &port) ||
		    strpbrk(addrs[n], " \t;#[]=")) {
			snprintf(why, whylen, "bad address '%s': want HOST:PORT", addrs[n]);
			return -EINVAL;
		}
		for (int i = 0; i < n; i++) {
			if (strcmp(addrs[i], addrs[n]) == 0) {
				snprintf(why, whylen, "address '%s' given twice", addrs[n]);
				return -EINVAL;
			}
		}
		n++;
		if (!p[len])
			return n;
		p += len + 1;
	}
}

/*
 * Picks @n distinct free ports below the kernel's ephemeral range
 * (ip_local_port_range): a port in that range can be taken at any moment
 * by an outgoing connection, for example a client retrying the very server
 * that is down, which then cannot bind it again when it restarts.  Each
 * candidate is bound to check that it is free; all stay bound until every
 * port is known.  Another process may still take one before the server
 * binds it; `local up` then reports the bind error from the server's log.
 */
static int gc_free_ports(unsigned int n, uint16_t *ports)
{
	unsigned int lo = 32768, i, opened = 0, tries;
	int fds[2 * ORCH_SERVERS_MAX];
	int error = -EADDRINUSE;
	uint32_t seed;
	FILE *f;

	f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	if (f) {
		if (fscanf(f, "%u", &lo) != 1 || lo < 2048)
			lo = 32768;
		fclose(f);
	}
	if (RAND_bytes((unsigned char *)&seed, sizeof(seed)) != 1)
		seed = (uint32_t)getpid();
	for (tries = 0; tries < 4096 && opened < n; tries++) {
		struct sockaddr_in sa = { .sin_family = AF_INET };
		uint16_t port;
		bool dup = false;
		int fd;

		seed = seed * 1103515245u + 12345u;
		port = (uint16_t)(1024 + (seed >> 8) % (lo - 1024));
		for (i = 0; i < opened; i++)
			dup |= ports[i] == port;
		if (dup)
			continue;
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		sa.sin_port = htons(port);
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			error = -errno;
			break;
		}
		if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
			close(fd);
			continue;
		}
		fds[opened] = fd;
		ports[opened++] = port;
	}
	for (i = 0; i < opened; i++)
		close(fds[i]);
	if (opened == n)
		return 0;
	orch_cli_err(error, "cannot find free ports on 127.0.0.1");
	return error;
}

/*
 * The log_address of server @i of @addrs on other hosts: its host, which
 * must be numeric IPv4 (the log's transport takes no names), and its port
 * plus one, which no server address may be.  0, or -EINVAL with @why.
 */
static int gc_log_address(char addrs[][GC_ADDR_MAX], unsigned int n, unsigned int i,
			  char *out, char *why, size_t whylen)
{
	char host[256];
	struct in_addr a;
	uint16_t port;

	if (orch_cfg_parse_address(addrs[i], host, sizeof(host), &port) ||
	    inet_pton(AF_INET, host, &a) != 1 || port == 65535) {
		if (snprintf(why, whylen, "'%s': with --replicas, give numeric IPv4 addresses "
			     "whose port is below 65535 (the log listens on PORT+1)", addrs[i]) < 0)
			why[0] = '\0';
		return -EINVAL;
	}
	/* A numeric IPv4 host: at most 15 bytes. */
	if (snprintf(out, GC_ADDR_MAX, "%s:%u", host, port + 1u) >= GC_ADDR_MAX)
		return -EINVAL;
	for (unsigned int j = 0; j < n; j++) {
		if (strcmp(addrs[j], out) == 0) {
			if (snprintf(why, whylen, "'%s' is a server's address and the log address "
				     "of '%s' (PORT+1): leave a gap between ports", out, addrs[i]) < 0)
				why[0] = '\0';
			return -EINVAL;
		}
	}
	return 0;
}

static int gc_write_key(const char *path)
{
	uint8_t key[ORCH_KEY_LEN];
	char hex[2 * ORCH_KEY_LEN + 2];
	int fd, error;

	if (RAND_bytes(key, sizeof(key)) != 1) {
		orch_cli_msg("cannot generate a key: OpenSSL RAND_bytes failed");
		return -EIO;
	}
	gc_hex(key, sizeof(key), hex);
	memset(key, 0, sizeof(key));
	strcat(hex, "\n");
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd < 0) {
		error = -errno;
		orch_cli_err(error, "cannot create '%s'", path);
		return error;
	}
	error = orch_cli_write_all(fd, hex, strlen(hex));
	memset(hex, 0, sizeof(hex));
	if (!error && fsync(fd) < 0)
		error = -errno;
	if (close(fd) < 0 && !error)
		error = -errno;
	if (error) {
		orch_cli_err(error, "cannot write '%s'", path);
		unlink(path);
	}
	return error;
}

static int gc_write_conf(const struct orch_cli_genconfig *g, const char *path,
			 char addrs[][GC_ADDR_MAX], char logs[][GC_ADDR_MAX])
{
	unsigned int replicas = g->replicas ? g->replicas : 1;
	char tmp[PATH_MAX + 16], id[33];
	uint8_t idb[16];
	FILE *f;
	int error = 0;

	if (RAND_bytes(idb, sizeof(idb)) != 1) {
		orch_cli_msg("cannot generate a cluster id: OpenSSL RAND_bytes failed");
		return -EIO;
	}
	gc_hex(idb, sizeof(idb), id);
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid());
	f = fopen(tmp, "wx");
	if (!f) {
		error = -errno;
		orch_cli_err(error, "cannot create '%s'", tmp);
		return error;
	}
	fprintf(f, "; Orchard cluster configuration, written by orchard genconfig.\n"
		   "; Servers are numbered in the order of their sections: never reorder them.\n"
		   "[cluster]\n"
		   "name = %s\n"
		   "id = %s\n"
		   "key_file = " GC_KEY "\n"
		   "strip_size = %u\n"
		   "; Servers per replica group: each group is this many consecutive\n"
		   "; [server] sections, on different hosts (orchard.conf(5)).\n"
		   "replicas = %u\n"
		   "; Store geometry, read by mkfs (0: the default in the comment):\n"
		   "; store_size = 0       ; blocks file of each server, sparse (64G)\n"
		   "; store_ag_blocks = 0  ; blocks per allocation group, a power of two (1048576)\n"
		   "; store_maxext = 0     ; longest extent in blocks (4096)\n"
		   "; Host space the blocks file leaves free for meta.db and store.db, so\n"
		   "; that deletes can always commit (read at start; 0: none):\n"
		   "; store_reserve = 64M  ; (1/16 of the file system, 4M to 256M)\n",
		g->name, id, g->strip_size, replicas);
	if (g->hosts)
		fprintf(f, "; Copy this file and " GC_KEY " (mode 0600) to /etc/orchard/ on\n"
			   "; every server and client host.\n");
	for (unsigned int i = 0; i < g->nservers; i++) {
		if (replicas > 1 && i % replicas == 0)
			fprintf(f, "\n; Replica group %u", i / replicas);
		fprintf(f, "\n[server s%u]\naddress = %s\n", i, addrs[i]);
		if (replicas > 1)
			fprintf(f, "log_address = %s\n", logs[i]);
		if (g->data_dir)
			fprintf(f, "data_dir = %s/s%u\n", g->data_dir, i);
		else
			fprintf(f, "data_dir = s%u\n", i);
		fprintf(f, "; store_device = /dev/...  ; the blocks on a device, not data_dir/blocks\n");
	}
	if (fflush(f) != 0 || fsync(fileno(f)) < 0)
		error = -errno;
	if (fclose(f) != 0 && !error)
		error = -errno;
	if (error) {
		orch_cli_err(error, "cannot write '%s'", tmp);
		goto out_unlink;
	}
	/* link() fails with EEXIST, where rename() would overwrite. */
	if (link(tmp, path) < 0) {
		error = -errno;
		orch_cli_err(error, "cannot create '%s'", path);
	}
out_unlink:
	unlink(tmp);
	return error;
}

int orch_cli_genconfig_write(const struct orch_cli_genconfig *g, char *conf_path,
			     size_t conf_pathlen)
{
	uint16_t ports[2 * ORCH_SERVERS_MAX];
	char addrs[ORCH_SERVERS_MAX][GC_ADDR_MAX], logs[ORCH_SERVERS_MAX][GC_ADDR_MAX];
	unsigned int replicas = g->replicas ? g->replicas : 1, nports;
	char dir[PATH_MAX], key[PATH_MAX + 16], why[GC_ADDR_MAX + 64];
	struct orch_cli_genconfig gg = *g;
	int n, error;

	error = orch_cli_mkdir_p(g->dir, 0755);
	if (error) {
		orch_cli_err(error, "cannot create directory '%s'", g->dir);
		return error;
	}
	if (!realpath(g->dir, dir)) {
		error = -errno;
		orch_cli_err(error, "cannot access '%s'", g->dir);
		return error;
	}
	if ((size_t)snprintf(conf_path, conf_pathlen, "%s/" GC_CONF, dir) >= conf_pathlen)
		return -ENAMETOOLONG;
	snprintf(key, sizeof(key), "%s/" GC_KEY, dir);
	if (access(conf_path, F_OK) == 0) {
		orch_cli_msg("'%s' exists; refusing to overwrite it", conf_path);
		return -EEXIST;
	}
	/* With replicas, each server's log has a port too: the next N ports, or PORT+1. */
	nports = replicas > 1 ? 2 * g->nservers : g->nservers;
	if (g->hosts) {
		n = gc_hosts_parse(g->hosts, addrs, why, sizeof(why));
		if (n < 0) {
			orch_cli_msg("--servers: %s", why);
			return n;
		}
		gg.nservers = (unsigned int)n;
		if (!gg.data_dir)
			gg.data_dir = GC_HOSTS_DATA_DIR;
	} else if (g->base_port) {
		if ((unsigned int)g->base_port + nports - 1 > 65535) {
			orch_cli_msg("ports %u..%u do not fit below 65536", g->base_port,
				     g->base_port + nports - 1);
			return -EINVAL;
		}
		for (unsigned int i = 0; i < nports; i++)
			ports[i] = (uint16_t)(g->base_port + i);
	} else {
		error = gc_free_ports(nports, ports);
		if (error)
			return error;
	}
	if (gg.nservers % replicas) {
		orch_cli_msg("%u servers do not make groups of --replicas %u", gg.nservers,
			     replicas);
		return -EINVAL;
	}
	if (!g->hosts)
		for (unsigned int i = 0; i < g->nservers; i++)
			snprintf(addrs[i], sizeof(addrs[i]), "127.0.0.1:%u", ports[i]);
	for (unsigned int i = 0; replicas > 1 && i < gg.nservers; i++) {
		error = g->hosts ? gc_log_address(addrs, gg.nservers, i, logs[i], why, sizeof(why))
				 : 0;
		if (error) {
			orch_cli_msg("--servers: %s", why);
			return error;
		}
		if (!g->hosts)
			snprintf(logs[i], sizeof(logs[i]), "127.0.0.1:%u", ports[g->nservers + i]);
	}
	error = gc_write_key(key);
	if (error)
		return error;
	error = gc_write_conf(&gg, conf_path, addrs, logs);
	if (error)
		goto out_unlink_key;
	return 0;
out_unlink_key:
	unlink(key);
	return error;
}

int orch_cmd_genconfig(struct orch_cli *cli, int argc, char **argv)
{
	enum { OPT_NAME = 0x200, OPT_STRIP, OPT_DATA_DIR };
	static const struct option opts[] = {
		{ "servers", required_argument, NULL, 'n' },
		{ "dir", required_argument, NULL, 'd' },
		{ "base-port", required_argument, NULL, 'p' },
		{ "name", required_argument, NULL, OPT_NAME },
		{ "strip-size", required_argument, NULL, OPT_STRIP },
		{ "data-dir", required_argument, NULL, OPT_DATA_DIR },
		{ "replicas", required_argument, NULL, 'r' },
		ORCH_CLI_OPTS_END
	};
	struct orch_cli_genconfig g = { .name = "orchard", .strip_size = 65536 };
	char conf[PATH_MAX], addrs[ORCH_SERVERS_MAX][GC_ADDR_MAX], why[GC_ADDR_MAX + 64];
	uint64_t v;
	int opt, n;

	while ((opt = orch_cli_getopt(cli, argc, argv, "n:d:p:r:", opts)) != -1) {
		switch (opt) {
		case 'r':
			if (orch_cli_uint_parse(optarg, 1, ORCH_REPLICAS_MAX, &v))
				return orch_cli_usage_err(cli, "--replicas: want 1 to %d, not '%s'",
							  ORCH_REPLICAS_MAX, optarg);
			g.replicas = (unsigned int)v;
			break;
		case 'n':
			/* A count, or the servers' addresses. */
			if (strchr(optarg, ':')) {
				n = gc_hosts_parse(optarg, addrs, why, sizeof(why));
				if (n < 0)
					return orch_cli_usage_err(cli, "--servers: %s", why);
				g.hosts = optarg;
				g.nservers = (unsigned int)n;
			} else if (orch_cli_uint_parse(optarg, 1, ORCH_SERVERS_MAX, &v)) {
				return orch_cli_usage_err(cli, "--servers: want 1 to %d, or "
							  "HOST:PORT,..., not '%s'",
							  ORCH_SERVERS_MAX, optarg);
			} else {
				g.hosts = NULL;
				g.nservers = (unsigned int)v;
			}
			break;
		case 'd':
			g.dir = optarg;
			break;
		case 'p':
			if (orch_cli_uint_parse(optarg, 1, 65535, &v))
				return orch_cli_usage_err(cli, "--base-port: bad port '%s'", optarg);
			g.base_port = (uint16_t)v;
			break;
		case OPT_NAME:
			if (!*optarg || strlen(optarg) >= ORCH_CFG_NAME_MAX ||
			    strpbrk(optarg, " \t\n;#[]="))
				return orch_cli_usage_err(cli, "--name: bad cluster name '%s'", optarg);
			g.name = optarg;
			break;
		case OPT_STRIP:
			if (orch_cli_size_parse(optarg, &v) || v < ORCH_STRIP_MIN ||
			    v > ORCH_STRIP_MAX || v % ORCH_STRIP_MIN)
				return orch_cli_usage_err(cli,
					"--strip-size: want a multiple of 4K from 4K to 16M, not '%s'",
					optarg);
			g.strip_size = (uint32_t)v;
			break;
		case OPT_DATA_DIR:
			if (optarg[0] != '/' || strpbrk(optarg, "\n;#"))
				return orch_cli_usage_err(cli, "--data-dir: want an absolute path, "
							  "not '%s'", optarg);
			g.data_dir = optarg;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (optind != argc)
		return orch_cli_usage_err(cli, "unexpected argument '%s'", argv[optind]);
	if (!g.nservers || !g.dir)
		return orch_cli_usage_err(cli, "--servers and --dir are required");
	if (g.hosts && g.base_port)
		return orch_cli_usage_err(cli, "--base-port goes with --servers N, not with "
					  "addresses");
	if (orch_cli_genconfig_write(&g, conf, sizeof(conf)))
		return ORCH_CLI_FAIL;
	printf("%s\n", conf);
	return ORCH_CLI_OK;
}
