/* Cluster configuration.  See cfg.h. */
#include "common/cfg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/util.h"

struct cfg_parse {
	struct orch_cfg *cfg;
	const char *dir;
	char *err;
	size_t errlen;
	int error;
};

static void cfg_resolve(const char *dir, const char *val, char *out, size_t outlen)
{
	if (val[0] == '/' || !dir)
		snprintf(out, outlen, "%s", val);
	else
		snprintf(out, outlen, "%s/%s", dir, val);
}

static int cfg_u32(const char *val, uint32_t min, uint32_t max, uint32_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(val, &end, 10);
	if (errno || end == val || *end || v < min || v > max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

int orch_cfg_parse_size(const char *s, uint64_t *out)
{
	unsigned long long v;
	unsigned int shift = 0;
	char *end;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		shift = 10;
		break;
	case 'm': case 'M':
		shift = 20;
		break;
	case 'g': case 'G':
		shift = 30;
		break;
	case 't': case 'T':
		shift = 40;
		break;
	default:
		return -EINVAL;
	}
	if (*end && end[1] && strcmp(end + 1, "iB") != 0 && strcmp(end + 1, "B") != 0)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

int orch_cfg_check_store_geom(uint64_t size, uint32_t ag_blocks, uint32_t maxext,
			      const char *const names[3], const char *where, char *err,
			      size_t errlen)
{
	uint32_t ag = ag_blocks ? ag_blocks : ORCH_CFG_STORE_AG_DEFAULT;

	if (size && size < ORCH_CFG_STORE_SIZE_MIN) {
		snprintf(err, errlen, "bad %s %llu%s: want 0 (default 64G) or at least 256K "
			 "(64 blocks of 4K)", names[0], (unsigned long long)size, where);
		return -EINVAL;
	}
	if (ag_blocks && (ag_blocks < ORCH_CFG_STORE_AG_MIN || ag_blocks > ORCH_CFG_STORE_AG_MAX ||
			  (ag_blocks & (ag_blocks - 1)))) {
		snprintf(err, errlen, "bad %s %u%s: want 0 (default %u) or a power of two "
			 "from %u to %u", names[1], ag_blocks, where, ORCH_CFG_STORE_AG_DEFAULT,
			 ORCH_CFG_STORE_AG_MIN, ORCH_CFG_STORE_AG_MAX);
		return -EINVAL;
	}
	if (maxext > ag) {
		snprintf(err, errlen, "bad %s %u%s: want 0 (default 4096) or 1 to %u "
			 "(the blocks of one allocation group)", names[2], maxext, where, ag);
		return -EINVAL;
	}
	return 0;
}

/* Parses yes/no, true/false, on/off or 1/0 into @out.  Returns 0 or -EINVAL. */
static int orch_cfg_parse_bool(const char *s, uint32_t *out)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < ORCH_ARRAY_SIZE(yes); i++) {
		if (!strcasecmp(s, yes[i]) || !strcasecmp(s, no[i])) {
			*out = !strcasecmp(s, yes[i]);
			return 0;
		}
	}
	return -EINVAL;
}

int orch_cfg_parse_address(const char *s, char *host, size_t hostlen, uint16_t *port)
{
	const char *colon = strrchr(s, ':');
	uint32_t p;
	size_t n;

	if (!colon || colon == s)
		return -EINVAL;
	n = (size_t)(colon - s);
	if (n >= hostlen)
		return -EINVAL;
	if (cfg_u32(colon + 1, 1, 65535, &p))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	*port = (uint16_t)p;
	return 0;
}

/* A metrics address: HOST:PORT ([V6]:PORT), copied into @out.  0 or -EINVAL. */
static int cfg_metrics_address(const char *val, char *out, size_t outlen)
{
	char host[256];
	uint16_t port;

	if (orch_cfg_parse_address(val, host, sizeof(host), &port) ||
	    snprintf(out, outlen, "%s", val) >= (int)outlen)
		return -EINVAL;
	return 0;
}

/* A replica group log's address: numeric IPv4 and a port, as libraft's transport takes it. */
static int cfg_log_address(const char *val, char *out, size_t outlen)
{
	char host[256];
	struct in_addr a;
	uint16_t port;

	if (orch_cfg_parse_address(val, host, sizeof(host), &port) || !port ||
	    inet_pton(AF_INET, host, &a) != 1 || strlen(val) >= ORCH_CFG_LOG_ADDR_MAX ||
	    snprintf(out, outlen, "%s", val) >= (int)outlen)
		return -EINVAL;
	return 0;
}

/* inih handler: nonzero means "go on"; our own errors are kept in @p. */
static int cfg_handler(void *user, const char *section, const char *name,
		       const char *value)
{
	struct cfg_parse *p = user;
	struct orch_cfg *cfg = p->cfg;
	int bad = 0;

	if (p->error)
		return 1;
	if (strcmp(section, "cluster") == 0) {
		if (strcmp(name, "name") == 0)
			bad = snprintf(cfg->cluster_name, sizeof(cfg->cluster_name), "%s", value) >= (int)sizeof(cfg->cluster_name);
		else if (strcmp(name, "id") == 0)
			bad = snprintf(cfg->cluster_id, sizeof(cfg->cluster_id), "%s", value) >= (int)sizeof(cfg->cluster_id);
		else if (strcmp(name, "key_file") == 0)
			cfg_resolve(p->dir, value, cfg->key_file, sizeof(cfg->key_file));
		else if (strcmp(name, "strip_size") == 0)
			bad = cfg_u32(value, ORCH_STRIP_MIN, ORCH_STRIP_MAX, &cfg->strip_size) ||
			      (cfg->strip_size & (ORCH_STRIP_MIN - 1));
		else if (strcmp(name, "op_timeout_ms") == 0)
			bad = cfg_u32(value, 10, 3600000, &cfg->op_timeout_ms);
		else if (strcmp(name, "commit_interval_ms") == 0)
			bad = cfg_u32(value, 1, 3600000, &cfg->commit_interval_ms);
		else if (strcmp(name, "replicas") == 0)
			bad = cfg_u32(value, 1, ORCH_REPLICAS_MAX, &cfg->replicas);
		else if (strcmp(name, "reclaim_orphans") == 0)
			bad = cfg_u32(value, 0, 1, &cfg->reclaim_orphans);
		else if (strcmp(name, "lease_ms") == 0)
			bad = cfg_u32(value, 0, 3600000, &cfg->lease_ms);
		else if (strcmp(name, "handshake_timeout_ms") == 0)
			bad = cfg_u32(value, 100, 3600000, &cfg->handshake_timeout_ms);
		else if (strcmp(name, "max_connections") == 0)
			bad = cfg_u32(value, 1, 1000000, &cfg->max_connections);
		else if (strcmp(name, "store_size") == 0)
			bad = orch_cfg_parse_size(value, &cfg->store_size) ? 3 : 0;
		else if (strcmp(name, "store_reserve") == 0)
			bad = orch_cfg_parse_size(value, &cfg->store_reserve) ||
			      cfg->store_reserve == ORCH_CFG_RESERVE_AUTO ? 3 : 0;
		else if (strcmp(name, "store_ag_blocks") == 0)
			bad = cfg_u32(value, 0, UINT32_MAX, &cfg->store_ag_blocks) ? 4 : 0;
		else if (strcmp(name, "store_maxext") == 0)
			bad = cfg_u32(value, 0, UINT32_MAX, &cfg->store_maxext) ? 4 : 0;
		else
			bad = 2;
	} else if (strncmp(section, "server ", 7) == 0) {
		const char *sname = section + 7;
		struct orch_server_cfg *s = NULL;

		for (unsigned int i = 0; i < cfg->nmembers; i++)
			if (strcmp(cfg->members[i].name, sname) == 0)
				s = &cfg->members[i];
		if (!s) {
			if (cfg->nmembers == ORCH_SERVERS_MAX) {
				snprintf(p->err, p->errlen, "too many servers (max %d)", ORCH_SERVERS_MAX);
				p->error = -EINVAL;
				return 1;
			}
			if (!*sname || strlen(sname) >= ORCH_CFG_NAME_MAX) {
				snprintf(p->err, p->errlen, "bad server name '%s'", sname);
				p->error = -EINVAL;
				return 1;
			}
			s = &cfg->members[cfg->nmembers++];
			snprintf(s->name, sizeof(s->name), "%s", sname);
		}
		if (strcmp(name, "address") == 0)
			bad = orch_cfg_parse_address(value, s->host, sizeof(s->host), &s->port) != 0;
		else if (strcmp(name, "data_dir") == 0)
			cfg_resolve(p->dir, value, s->data_dir, sizeof(s->data_dir));
		else if (strcmp(name, "store_device") == 0)
			bad = !*value;
		else if (strcmp(name, "metrics") == 0)
			bad = cfg_metrics_address(value, s->metrics, sizeof(s->metrics)) ? 5 : 0;
		else if (strcmp(name, "metrics_public") == 0)
			bad = orch_cfg_parse_bool(value, &s->metrics_public) ? 6 : 0;
		else if (strcmp(name, "log_address") == 0)
			bad = cfg_log_address(value, s->log_address, sizeof(s->log_address)) ? 7 : 0;
		else
			bad = 2;
		if (!bad && strcmp(name, "store_device") == 0)
			cfg_resolve(p->dir, value, s->store_device, sizeof(s->store_device));
	} else {
		snprintf(p->err, p->errlen, "unknown section '[%s]'", section);
		p->error = -EINVAL;
		return 1;
	}
	if (bad == 2)
		snprintf(p->err, p->errlen, "unknown setting '%s' in [%s]", name, section);
	else if (bad == 3)
		snprintf(p->err, p->errlen, "bad value for '%s' in [%s]: want a byte count, "
			 "with an optional K, M, G or T suffix", name, section);
	else if (bad == 5)
		snprintf(p->err, p->errlen, "bad value for '%s' in [%s]: want HOST:PORT", name,
			 section);
	else if (bad == 6)
		snprintf(p->err, p->errlen, "bad value for '%s' in [%s]: want yes or no", name,
			 section);
	else if (bad == 7)
		snprintf(p->err, p->errlen, "bad value for '%s' in [%s]: want IPv4:PORT (the "
			 "log's transport takes numeric IPv4 addresses)", name, section);
	else if (bad == 4)
		snprintf(p->err, p->errlen, "bad value for '%s' in [%s]: want a number of blocks",
			 name, section);
	else if (bad)
		snprintf(p->err, p->errlen, "bad value for '%s' in [%s]", name, section);
	if (bad) {
		p->error = -EINVAL;
	}
	return 1;
}

static void cfg_defaults(struct orch_cfg *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	snprintf(cfg->cluster_name, sizeof(cfg->cluster_name), "orchard");
	cfg->strip_size = 65536;
	cfg->op_timeout_ms = 10000;
	cfg->commit_interval_ms = 1000;
	cfg->reclaim_orphans = 1;
	cfg->lease_ms = 30000;
	cfg->handshake_timeout_ms = 10000;
	cfg->max_connections = 4096;
	cfg->store_reserve = ORCH_CFG_RESERVE_AUTO;
	cfg->replicas = 1;
}

/* The replica groups from the members: consecutive sections, @replicas each. */
static int cfg_groups(struct orch_cfg *cfg, char *err, size_t errlen)
{
	unsigned int r = cfg->replicas;

	if (cfg->nmembers % r) {
		snprintf(err, errlen, "%u [server] sections do not make groups of replicas = %u",
			 cfg->nmembers, r);
		return -EINVAL;
	}
	for (unsigned int i = 0; r > 1 && i < cfg->nmembers; i++) {
		const struct orch_server_cfg *s = &cfg->members[i];

		if (!s->log_address[0]) {
			snprintf(err, errlen, "[server %s] needs a log_address (replicas = %u)",
				 s->name, r);
			return -EINVAL;
		}
		for (unsigned int j = i - i % r; j < i; j++) {
			if (!strcmp(cfg->members[j].log_address, s->log_address)) {
				snprintf(err, errlen, "[server %s] and [server %s] of one group have "
					 "the same log_address", cfg->members[j].name, s->name);
				return -EINVAL;
			}
		}
	}
	cfg->nservers = cfg->nmembers / r;
	for (unsigned int g = 0; g < cfg->nservers; g++)
		cfg->servers[g] = cfg->members[g * r];
	return 0;
}

static int cfg_check(struct orch_cfg *cfg, char *err, size_t errlen)
{
	static const char *const store_keys[3] = {
		"store_size", "store_ag_blocks", "store_maxext",
	};
	int error;

	if (cfg->nmembers == 0) {
		snprintf(err, errlen, "no [server NAME] section");
		return -EINVAL;
	}
	if (!cfg->key_file[0]) {
		snprintf(err, errlen, "[cluster] has no key_file");
		return -EINVAL;
	}
	if (!cfg->cluster_id[0]) {
		snprintf(err, errlen, "[cluster] has no id");
		return -EINVAL;
	}
	for (unsigned int i = 0; i < cfg->nmembers; i++) {
		if (!cfg->members[i].port || !cfg->members[i].data_dir[0]) {
			snprintf(err, errlen, "[server %s] needs address and data_dir",
				 cfg->members[i].name);
			return -EINVAL;
		}
	}
	error = orch_cfg_check_store_geom(cfg->store_size, cfg->store_ag_blocks,
					  cfg->store_maxext, store_keys, " in [cluster]", err,
					  errlen);
	return error ? error : cfg_groups(cfg, err, errlen);
}

int orch_cfg_parse(const char *text, const char *dir, struct orch_cfg *out,
		   char *err, size_t errlen)
{
	struct cfg_parse p = { .cfg = out, .dir = dir, .err = err, .errlen = errlen };
	int line;

	cfg_defaults(out);
	line = ini_parse_string(text, cfg_handler, &p);
	if (p.error)
		return p.error;
	if (line != 0) {
		snprintf(err, errlen, "syntax error on line %d", line);
		return -EINVAL;
	}
	return cfg_check(out, err, errlen);
}

int orch_cfg_load(const char *path, struct orch_cfg *out, char *err, size_t errlen)
{
	char abs[PATH_MAX], dir[PATH_MAX], *slash, *text;
	FILE *f;
	long len;
	int error;

	if (!realpath(path, abs)) {
		error = -errno;
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return error;
	}
	snprintf(dir, sizeof(dir), "%s", abs);
	slash = strrchr(dir, '/');
	if (slash && slash != dir)
		*slash = '\0';
	f = fopen(abs, "r");
	if (!f) {
		error = -errno;
		snprintf(err, errlen, "cannot open '%s': %s", path, strerror(errno));
		return error;
	}
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	if (len < 0 || len > (1 << 20)) {
		fclose(f);
		snprintf(err, errlen, "'%s' is not a config file", path);
		return -EINVAL;
	}
	rewind(f);
	text = malloc((size_t)len + 1);
	if (!text) {
		fclose(f);
		return -ENOMEM;
	}
	text[fread(text, 1, (size_t)len, f)] = '\0';
	fclose(f);
	error = orch_cfg_parse(text, dir, out, err, errlen);
	free(text);
	if (!error)
		snprintf(out->path, sizeof(out->path), "%s", abs);
	return error;
}

const char *orch_cfg_path(const char *given)
{
	const char *env = getenv("ORCHARD_CONF");

	if (given && *given)
		return given;
	if (env && *env)
		return env;
	/* A missing default is "no config given", not "cannot open". */
	return access(ORCH_CFG_DEFAULT_PATH, F_OK) == 0 ? ORCH_CFG_DEFAULT_PATH : NULL;
}

void orch_cfg_members_view(const struct orch_cfg *cfg, struct orch_cfg *out)
{
	if (out != cfg)
		*out = *cfg;
	out->replicas = 1;
	out->nservers = cfg->nmembers;
	memcpy(out->servers, out->members, sizeof(out->servers));
}

int orch_cfg_member_index(const struct orch_cfg *cfg, const char *name)
{
	for (unsigned int i = 0; i < cfg->nmembers; i++)
		if (strcmp(cfg->members[i].name, name) == 0)
			return (int)i;
	return -ENOENT;
}

int orch_cfg_server_index(const struct orch_cfg *cfg, const char *name)
{
	int i = orch_cfg_member_index(cfg, name);

	return i < 0 ? i : i / (int)cfg->replicas;
}

int orch_cfg_load_key(struct orch_cfg *cfg, char *err, size_t errlen)
{
	char text[2 * ORCH_KEY_LEN + 2];
	struct stat st;
	ssize_t n;
	int fd, error;

	fd = open(cfg->key_file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		error = -errno;
		snprintf(err, errlen, "cannot open key file '%s': %s", cfg->key_file, strerror(errno));
		return error;
	}
	if (fstat(fd, &st) == 0 && (st.st_mode & 077)) {
		close(fd);
		snprintf(err, errlen, "key file '%s' is readable by others (chmod 600 it)",
			 cfg->key_file);
		return -EPERM;
	}
	n = read(fd, text, sizeof(text));
	close(fd);
	if (n < 2 * ORCH_KEY_LEN) {
		snprintf(err, errlen, "key file '%s' is too short", cfg->key_file);
		return -EINVAL;
	}
	for (int i = 0; i < ORCH_KEY_LEN; i++) {
		int hi = orch_hex_digit(text[2 * i]), lo = orch_hex_digit(text[2 * i + 1]);

		if (hi < 0 || lo < 0) {
			snprintf(err, errlen, "key file '%s' is not hex", cfg->key_file);
			return -EINVAL;
		}
		cfg->key[i] = (uint8_t)(hi << 4 | lo);
	}
	return 0;
}
