/*
 * orchard cache MNT [NAME=VALUE ...]: the kernel-cache timeouts of a live
 * mount, the analogue of OrangeFS's /sys/fs/orangefs/{dcache,getattr}_timeout_msecs.  The
 * mount serves them as virtual xattrs of its root (docs/mount.md); this is
 * their front end.  Every NAME=VALUE is checked before anything changes, so
 * a bad one changes nothing.
 */
#include "cli/cli.h"
#include "proto/knobs.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#define CACHE_XATTR_PREFIX "user.orchard."

/* The live knobs' names, "a, b or c", for a message. */
static void cache_knob_names(char *out, size_t len)
{
	size_t n = 0, live = 0, seen = 0;

	for (size_t i = 0; i < ORCH_KNOB_COUNT; i++)
		live += orch_knobs[i].k_live;
	out[0] = '\0';
	for (size_t i = 0; i < ORCH_KNOB_COUNT && n < len; i++) {
		if (!orch_knobs[i].k_live)
			continue;
		seen++;
		n += (size_t)snprintf(out + n, len - n, "%s%s",
				      seen == 1 ? "" : seen == live ? " or " : ", ",
				      orch_knobs[i].k_name);
	}
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

void orch_cmd_cache_usage(FILE *f)
{
	orch_knobs_help(f, true);
}

int orch_cmd_cache(struct orch_cli *cli, int argc, char **argv)
{
	struct {
		const struct orch_knob *knob;
		const char *value;
	} set[ORCH_KNOB_COUNT * 4];
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
		const struct orch_knob *k;
		uint32_t v;

		if (!eq)
			return orch_cli_usage_err(cli, "'%s' is not NAME=VALUE", argv[i]);
		k = orch_knob_find(argv[i], (size_t)(eq - argv[i]));
		if (!k || !k->k_live) {
			char names[256];

			cache_knob_names(names, sizeof(names));
			orch_cli_msg("unknown setting '%.*s' (one of %s); nothing changed",
				     (int)(eq - argv[i]), argv[i], names);
			return ORCH_CLI_FAIL;
		}
		if (orch_knob_parse(k, eq + 1, strlen(eq + 1), &v)) {
			if (k->k_min == 0 && k->k_max == 1)
				orch_cli_msg("bad value '%s' for %s (on, off, 1 or 0); nothing changed",
					     eq + 1, k->k_name);
			else
				orch_cli_msg("bad value '%s' for %s (milliseconds, %u to %u); "
					     "nothing changed", eq + 1, k->k_name, k->k_min,
					     k->k_max);
			return ORCH_CLI_FAIL;
		}
		set[nset].knob = k;
		set[nset].value = eq + 1;
		nset++;
	}
	/* Read first: it proves @mnt is an Orchard mount before anything is set. */
	rc = cache_get(mnt, orch_knobs[0].k_name, val, sizeof(val));
	if (rc)
		return cache_not_a_mount(rc, mnt);
	for (int i = 0; i < nset; i++) {
		char xname[64];

		snprintf(xname, sizeof(xname), CACHE_XATTR_PREFIX "%s", set[i].knob->k_name);
		if (setxattr(mnt, xname, set[i].value, strlen(set[i].value), 0) < 0) {
			orch_cli_err(-errno, "cannot set %s on '%s'", set[i].knob->k_name, mnt);
			return ORCH_CLI_FAIL;
		}
	}
	for (size_t i = 0; i < ORCH_KNOB_COUNT; i++) {
		if (!orch_knobs[i].k_live)
			continue;
		rc = cache_get(mnt, orch_knobs[i].k_name, val, sizeof(val));
		if (rc)
			return cache_not_a_mount(rc, mnt);
		printf("%s=%s\n", orch_knobs[i].k_name, val);
	}
	/* What the kernel keeps (a mount of an older version does not say). */
	{
		char mode[512];

		if (cache_get(mnt, "cache_mode", mode, sizeof(mode)) == 0)
			printf("mode: %s\n", mode);
	}
	return ORCH_CLI_OK;
}
