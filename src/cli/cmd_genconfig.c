/*
 * orchard genconfig: a new cluster's configuration and key.
 *
 * The key is made first, with O_EXCL and mode 0600 from the start (never a
 * window in which another user could read it); the config is then written to
 * a temporary file and linked into place, which fails if orchard.conf
 * appeared meanwhile.  A failure removes what this run created.
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
	int fds[ORCH_SERVERS_MAX];
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
			 const uint16_t *ports)
{
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
		   "; Store geometry, read by mkfs (0: the default in the comment):\n"
		   "; store_size = 0       ; blocks file of each server, sparse (64G)\n"
		   "; store_ag_blocks = 0  ; blocks per allocation group, a power of two (1048576)\n"
		   "; store_maxext = 0     ; longest extent in blocks (4096)\n"
		   "; Host space the blocks file leaves free for meta.db and store.db, so\n"
		   "; that deletes can always commit (read at start; 0: none):\n"
		   "; store_reserve = 64M  ; (1/16 of the file system, 4M to 256M)\n",
		g->name, id, g->strip_size);
	for (unsigned int i = 0; i < g->nservers; i++)
		fprintf(f, "\n[server s%u]\naddress = 127.0.0.1:%u\ndata_dir = s%u\n"
			   "; store_device = /dev/...  ; the blocks on a device, not data_dir/blocks\n",
			i, ports[i], i);
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
	uint16_t ports[ORCH_SERVERS_MAX];
	char dir[PATH_MAX], key[PATH_MAX + 16];
	int error;

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
	if (g->base_port) {
		if ((unsigned int)g->base_port + g->nservers - 1 > 65535) {
			orch_cli_msg("ports %u..%u do not fit below 65536", g->base_port,
				     g->base_port + g->nservers - 1);
			return -EINVAL;
		}
		for (unsigned int i = 0; i < g->nservers; i++)
			ports[i] = (uint16_t)(g->base_port + i);
	} else {
		error = gc_free_ports(g->nservers, ports);
		if (error)
			return error;
	}
	error = gc_write_key(key);
	if (error)
		return error;
	error = gc_write_conf(g, conf_path, ports);
	if (error)
		goto out_unlink_key;
	return 0;
out_unlink_key:
	unlink(key);
	return error;
}

int orch_cmd_genconfig(struct orch_cli *cli, int argc, char **argv)
{
	enum { OPT_NAME = 0x200, OPT_STRIP };
	static const struct option opts[] = {
		{ "servers", required_argument, NULL, 'n' },
		{ "dir", required_argument, NULL, 'd' },
		{ "base-port", required_argument, NULL, 'p' },
		{ "name", required_argument, NULL, OPT_NAME },
		{ "strip-size", required_argument, NULL, OPT_STRIP },
		ORCH_CLI_OPTS_END
	};
	struct orch_cli_genconfig g = { .name = "orchard", .strip_size = 65536 };
	char conf[PATH_MAX];
	uint64_t v;
	int opt;

	while ((opt = orch_cli_getopt(cli, argc, argv, "n:d:p:", opts)) != -1) {
		switch (opt) {
		case 'n':
			if (orch_cli_uint_parse(optarg, 1, ORCH_SERVERS_MAX, &v))
				return orch_cli_usage_err(cli, "--servers: want 1 to %d, not '%s'",
							  ORCH_SERVERS_MAX, optarg);
			g.nservers = (unsigned int)v;
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
	if (orch_cli_genconfig_write(&g, conf, sizeof(conf)))
		return ORCH_CLI_FAIL;
	printf("%s\n", conf);
	return ORCH_CLI_OK;
}
