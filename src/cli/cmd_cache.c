/*
 * orchard cache MNT [NAME=VALUE ...]: the kernel-cache timeouts of a live
 * mount, the analogue of OrangeFS's /sys/fs/orangefs/{dcache,getattr}_timeout_msecs.  The
 * mount serves them as virtual xattrs of its root (docs/mount.md); this is
 * their front end.  Every NAME=VALUE is checked before anything changes, so
 * a bad one changes nothing.
 */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#define CACHE_XATTR_PREFIX "user.orchard."
#define CACHE_MAX_MS 86400000ul

static const struct {
	const char *name;
	unsigned long min;
} cache_knobs[] = {
	{ "dcache_timeout_ms", 0 },
	{ "getattr_timeout_ms", 0 },
	{ "negative_timeout_ms", 0 },
	{ "op_timeout_ms", 1 },
};

#define CACHE_NKNOBS (sizeof(cache_knobs) / sizeof(cache_knobs[0]))

static int cache_knob(const char *name, size_t len)
{
	for (size_t i = 0; i < CACHE_NKNOBS; i++)
		if (strlen(cache_knobs[i].name) == len && memcmp(cache_knobs[i].name, name, len) == 0)
			return (int)i;
	return -1;
}

/* Reads one knob of the mount at @mnt into @out (NUL-terminated). */
static int cache_get(const char *mnt, const char *name, char *out, size_t outlen)
{
	char xname[64];
	ssize_t n;

	snprintf(xname, sizeof(xname), CACHE_XATTR_PREFIX "%s", name);
	n = getxattr(mnt, xname, out, outlen - 1);
	if (n < 0)
		return -errno;
	out[n] = '\0';
	return 0;
}

static int cache_not_a_mount(int error, const char *mnt)
{
	if (error == -ENODATA || error == -EOPNOTSUPP || error == -ENOTSUP)
		orch_cli_msg("'%s' is not the root of an Orchard mount", mnt);
	else
		orch_cli_err(error, "cannot read the cache settings of '%s'", mnt);
	return ORCH_CLI_FAIL;
}

int orch_cmd_cache(struct orch_cli *cli, int argc, char **argv)
{
	struct {
		int knob;
		const char *value;
	} set[CACHE_NKNOBS * 4];
	const char *mnt;
	char val[64];
	int nset = 0, rc;

	if (!orch_cli_args(cli, argc, argv, 1, -1, &rc))
		return rc;
	mnt = argv[optind++];
	if (argc - optind > (int)(sizeof(set) / sizeof(set[0])))
		return orch_cli_usage_err(cli, "too many settings");
	for (int i = optind; i < argc; i++) {
		const char *eq = strchr(argv[i], '=');
		unsigned long v;
		char *end;
		int k;

		if (!eq)
			return orch_cli_usage_err(cli, "'%s' is not NAME=VALUE", argv[i]);
		k = cache_knob(argv[i], (size_t)(eq - argv[i]));
		if (k < 0) {
			orch_cli_msg("unknown setting '%.*s' (one of dcache_timeout_ms, "
				     "getattr_timeout_ms, negative_timeout_ms, op_timeout_ms); "
				     "nothing changed", (int)(eq - argv[i]), argv[i]);
			return ORCH_CLI_FAIL;
		}
		errno = 0;
		v = strtoul(eq + 1, &end, 10);
		if (!eq[1] || *end || errno || eq[1] == '-' || v < cache_knobs[k].min ||
		    v > CACHE_MAX_MS) {
			orch_cli_msg("bad value '%s' for %s (milliseconds, %lu to %lu); nothing changed",
				     eq + 1, cache_knobs[k].name, cache_knobs[k].min, CACHE_MAX_MS);
			return ORCH_CLI_FAIL;
		}
		set[nset].knob = k;
		set[nset].value = eq + 1;
		nset++;
	}
	/* Read first: it proves @mnt is an Orchard mount before anything is set. */
	rc = cache_get(mnt, cache_knobs[0].name, val, sizeof(val));
	if (rc)
		return cache_not_a_mount(rc, mnt);
	for (int i = 0; i < nset; i++) {
		char xname[64];

		snprintf(xname, sizeof(xname), CACHE_XATTR_PREFIX "%s", cache_knobs[set[i].knob].name);
		if (setxattr(mnt, xname, set[i].value, strlen(set[i].value), 0) < 0) {
			orch_cli_err(-errno, "cannot set %s on '%s'", cache_knobs[set[i].knob].name, mnt);
			return ORCH_CLI_FAIL;
		}
	}
	for (size_t i = 0; i < CACHE_NKNOBS; i++) {
		rc = cache_get(mnt, cache_knobs[i].name, val, sizeof(val));
		if (rc)
			return cache_not_a_mount(rc, mnt);
		printf("%s=%s\n", cache_knobs[i].name, val);
	}
	return ORCH_CLI_OK;
}
