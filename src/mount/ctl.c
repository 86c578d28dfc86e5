/*
 * Runtime knobs and counters, as virtual extended attributes of the mount's
 * root (docs/mount.md): the analogue of OrangeFS's
 * /sys/fs/orangefs/{dcache,getattr}_timeout_msecs, with no extra socket and the kernel's
 * own permission and path handling.
 *
 *   user.orchard.dcache_timeout_ms     read/write, decimal milliseconds
 *   user.orchard.getattr_timeout_ms    read/write
 *   user.orchard.negative_timeout_ms   read/write
 *   user.orchard.op_timeout_ms         read/write (liborchard's deadline)
 *   user.orchard.coherent              read/write, 0 or 1 (on, off)
 *   user.orchard.cache_mode            read only, one line: what the kernel keeps
 *   user.orchard.stats                 read only, JSON
 *
 * The names are answered here and never reach the servers; the server's
 * list of the root's xattrs does not include them.
 */
#include "mount/mount_i.h"
#include "proto/knobs.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "common/log.h"
#include "common/util.h"
#include "proto/msg.h"

#define CTL_STATS "stats"
#define CTL_CACHE_MODE "cache_mode"
/*
 * A size-only query of the stats gets this much slack: the counters grow
 * between that query and the read that follows it (getfattr does both),
 * and the read must not fail with ERANGE.
 */
#define CTL_STATS_SLACK 1024
#define CTL_STATS_MAX 16384
#define CTL_MSG_TYPES_MAX 256

/* --- Readahead ------------------------------------------------------------------- */

/*
 * The device number of the mount on @dir (absolute), from mountinfo: a
 * stat() of the mountpoint would ask this very process, which may be the
 * thread that has to answer.  The last match is the newest mount.
 */
static int ctl_find_dev(const char *dir, unsigned int *maj, unsigned int *min)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096], point[4096];
	int found = -ENOENT;

	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		unsigned int a, b;

		/* id parent maj:min root mountpoint ... (spaces in names are \040) */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &a, &b, point) == 3 &&
		    !strcmp(point, dir)) {
			*maj = a;
			*min = b;
			found = 0;
		}
	}
	fclose(f);
	return found;
}

/* Sets the mount's readahead (needs root: otherwise the kernel's stays). */
static void ctl_set_readahead(const char *dir, unsigned int kb)
{
	unsigned int maj, min;
	char path[64];
	FILE *f;
	int error = ctl_find_dev(dir, &maj, &min);

	if (!error) {
		snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb", maj, min);
		f = fopen(path, "w");
		if (!f) {
			error = -errno;
		} else {
			fprintf(f, "%u\n", kb);
			error = fclose(f) ? -errno : 0;
		}
	}
	if (error)
		ORCH_INFO("readahead_kb=%u not set: %s; the kernel's stays", kb, strerror(-error));
}

void orch_mnt_readahead_once(struct orch_mnt *m)
{
	if (m->m_mountpoint && !atomic_exchange(&m->m_readahead_done, true))
		ctl_set_readahead(m->m_mountpoint, m->m_readahead_kb);
}

/* Where each live knob of proto/knobs.def lives in struct orch_mnt (0: not live). */
static const size_t ctl_knob_offsets[ORCH_KNOB_COUNT] = {
#define ORCH_KNOB_LIVE(name, ...) [ORCH_KNOB_ID_##name] = offsetof(struct orch_mnt, m_##name),
#define ORCH_KNOB_MOUNT(name, ...) [ORCH_KNOB_ID_##name] = 0,
#include "proto/knobs.def"
#undef ORCH_KNOB_LIVE
#undef ORCH_KNOB_MOUNT
};

static const char *const ctl_op_names[] = {
#define CTL_OP_NAME(name) #name,
	ORCH_MNT_OPS(CTL_OP_NAME)
#undef CTL_OP_NAME
};

static _Atomic uint32_t *ctl_knob_ptr(struct orch_mnt *m, const struct orch_knob *k)
{
	return (_Atomic uint32_t *)((char *)m + ctl_knob_offsets[k - orch_knobs]);
}

/* The live knob @name, or NULL. */
static const struct orch_knob *ctl_knob_find(const char *name)
{
	const struct orch_knob *k = orch_knob_find(name, strlen(name));

	return k && k->k_live ? k : NULL;
}

bool orch_mnt_ctl_is_ctl(uint64_t ino, const char *name)
{
	return ino == FUSE_ROOT_ID &&
	       strncmp(name, ORCH_MNT_CTL_PREFIX, strlen(ORCH_MNT_CTL_PREFIX)) == 0;
}

/* Appends to @buf of @size at *@pos; returns false once it overflowed. */
static bool ctl_printf(char *buf, size_t size, size_t *pos, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static bool ctl_printf(char *buf, size_t size, size_t *pos, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (*pos >= size)
		return false;
	va_start(ap, fmt);
	n = vsnprintf(buf + *pos, size - *pos, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= size - *pos) {
		*pos = size;
		return false;
	}
	*pos += (size_t)n;
	return true;
}

/*
 * {"fuse": {"LOOKUP": n, ...}, "server_requests": {"CL2SV_LOOKUP": n, ...},
 *  "cache": {"dcache_timeout_ms": n, ...},
 *  "inode_table": {"inodes": n, "forget_unknown": n},
 *  "write_behind": {"max_bytes": n, "writes": n, "waits": n, "bytes_in_flight": n,
 *                   "overtaken": n},
 *  "lease_cache": {"lease_ms": n, "entries": n, "hits": n, "misses": n, "pushes": n,
 *                  "renewals": n, "renewals_dropped": n, "vouches": n,
 *                  "vouches_failed": n},
 *  "kernel_invalidations": {"sent": n, "sent_attrs": n, "sent_names": n,
 *                           "coalesced": n, "dropped": n, "own": n, "revokes": n,
 *                           "queued": n, "acks": n, "acks_early": n, "suspends": n, "names_kept": n, "names_reset": n,
 *                           "names_unkept": n},
 *  "io": {"bytes_read": n, "bytes_written": n}}.
 * Every key is always present.
 */
static int ctl_stats_json(struct orch_mnt *m, char *buf, size_t size, size_t *len)
{
	uint16_t types[CTL_MSG_TYPES_MAX];
	uint64_t counts[CTL_MSG_TYPES_MAX];
	uint64_t inodes, unknown;
	struct orch_mnt_wb_counts wbc;
	struct orch_mnt_lc_counts lcc;
	struct orch_mnt_kinval_counts kic;
	uint64_t kept, reset, unkept;
	size_t ntypes, pos = 0;
	bool first = true;

	ntypes = orch_msg_types(types, CTL_MSG_TYPES_MAX);
	orch_client_request_counts(m->m_cl, counts, ntypes);
	ctl_printf(buf, size, &pos, "{\"fuse\": {");
	for (size_t i = 0; i < ORCH_MNT_OP_COUNT; i++)
		ctl_printf(buf, size, &pos, "%s\"%s\": %" PRIu64, i ? ", " : "", ctl_op_names[i],
			   atomic_load(&m->m_ops[i]));
	ctl_printf(buf, size, &pos, "}, \"server_requests\": {");
	for (size_t i = 0; i < ntypes; i++) {
		const char *name = orch_msg_name(types[i]);

		if (!name)
			continue;
		ctl_printf(buf, size, &pos, "%s\"%s\": %" PRIu64, first ? "" : ", ", name,
			   counts[i]);
		first = false;
	}
	ctl_printf(buf, size, &pos, "}, \"cache\": {");
	for (size_t i = 0, n = 0; i < ORCH_KNOB_COUNT; i++)
		if (orch_knobs[i].k_live)
			ctl_printf(buf, size, &pos, "%s\"%s\": %" PRIu32, n++ ? ", " : "",
				   orch_knobs[i].k_name, atomic_load(ctl_knob_ptr(m, &orch_knobs[i])));
	orch_mnt_itab_counts(&m->m_itab, &inodes, &unknown);
	ctl_printf(buf, size, &pos,
		   "}, \"inode_table\": {\"inodes\": %" PRIu64 ", \"forget_unknown\": %" PRIu64,
		   inodes, unknown);
	orch_mnt_wb_counts(m, &wbc);
	ctl_printf(buf, size, &pos,
		   "}, \"write_behind\": {\"max_bytes\": %" PRIu64 ", \"writes\": %" PRIu64
		   ", \"waits\": %" PRIu64 ", \"bytes_in_flight\": %" PRIu64
		   ", \"overtaken\": %" PRIu64,
		   wbc.max_bytes, wbc.writes, wbc.waits, wbc.in_flight, wbc.overtaken);
	orch_mnt_lc_counts(&m->m_lc, &lcc);
	ctl_printf(buf, size, &pos,
		   "}, \"lease_cache\": {\"lease_ms\": %" PRIu64 ", \"entries\": %" PRIu64
		   ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64 ", \"pushes\": %" PRIu64
		   ", \"renewals\": %" PRIu64 ", \"renewals_dropped\": %" PRIu64
		   ", \"vouches\": %" PRIu64 ", \"vouches_failed\": %" PRIu64,
		   lcc.lease_ms, lcc.entries, lcc.hits, lcc.misses, lcc.pushes, lcc.renewals,
		   lcc.renewals_dropped, lcc.vouches, lcc.vouches_failed);
	orch_mnt_kinval_counts(m, &kic);
	ctl_printf(buf, size, &pos,
		   "}, \"kernel_invalidations\": {\"sent\": %" PRIu64 ", \"sent_attrs\": %" PRIu64
		   ", \"sent_names\": %" PRIu64 ", \"coalesced\": %" PRIu64
		   ", \"dropped\": %" PRIu64 ", \"own\": %" PRIu64 ", \"revokes\": %" PRIu64
		   ", \"queued\": %" PRIu64 ", \"acks\": %" PRIu64 ", \"acks_early\": %" PRIu64
		   ", \"suspends\": %" PRIu64,
		   kic.sent, kic.sent - kic.sent_names, kic.sent_names, kic.coalesced, kic.dropped, kic.own, kic.revokes, kic.queued,
		   kic.acks, kic.acks_early, kic.suspends);
	orch_mnt_knames_counts(&m->m_knames, &kept, &reset, &unkept);
	ctl_printf(buf, size, &pos,
		   ", \"names_kept\": %" PRIu64 ", \"names_reset\": %" PRIu64
		   ", \"names_unkept\": %" PRIu64, kept, reset, unkept);
	ctl_printf(buf, size, &pos,
		   "}, \"io\": {\"bytes_read\": %" PRIu64 ", \"bytes_written\": %" PRIu64,
		   atomic_load(&m->m_bytes_read), atomic_load(&m->m_bytes_written));
	if (!ctl_printf(buf, size, &pos, "}}"))
		return -EOVERFLOW;
	*len = pos;
	return 0;
}

/*
 * What the kernel keeps, in one line (`orchard cache` prints it): in
 * coherent mode with leases, leased answers to the end of their lease;
 * else the timeouts.
 */
static size_t ctl_cache_mode(struct orch_mnt *m, char *buf, size_t size)
{
	int n;

	if (atomic_load(&m->m_coherent) && m->m_lc.l_on)
		n = snprintf(buf, size,
			     "coherent: names, absent names and attributes the servers lease "
			     "are kept to the end of the lease (lease_ms=%" PRIu32 "), dropped "
			     "at once by a change; what no lease covers is asked again at each use",
			     m->m_lc.l_lease_ms);
	else if (atomic_load(&m->m_coherent))
		n = snprintf(buf, size, "timeouts: coherent is on, but the config grants no "
			     "leases (lease_ms=0)");
	else
		n = snprintf(buf, size, "timeouts: coherent is off");
	return n < 0 ? 0 : ORCH_MIN((size_t)n, size - 1);
}

int orch_mnt_ctl_get(struct orch_mnt *m, const char *name, char *buf, size_t size,
		     size_t *len)
{
	const char *key = name + strlen(ORCH_MNT_CTL_PREFIX);
	const struct orch_knob *k;
	char text[CTL_STATS_MAX];
	size_t n;
	int error;

	if (strcmp(key, CTL_STATS) == 0) {
		error = ctl_stats_json(m, text, sizeof(text), &n);
		if (error)
			return error;
		if (size == 0) {
			*len = n + CTL_STATS_SLACK;
			return 0;
		}
	} else if (strcmp(key, CTL_CACHE_MODE) == 0) {
		n = ctl_cache_mode(m, text, sizeof(text));
		if (size == 0) {
			*len = n;
			return 0;
		}
	} else {
		k = ctl_knob_find(key);
		if (!k)
			return -ENODATA;
		n = (size_t)snprintf(text, sizeof(text), "%" PRIu32,
				     atomic_load(ctl_knob_ptr(m, k)));
		if (size == 0) {
			*len = n;
			return 0;
		}
	}
	if (n > size)
		return -ERANGE;
	memcpy(buf, text, n);
	*len = n;
	return 0;
}

int orch_mnt_ctl_set(struct orch_mnt *m, uid_t uid, const char *name, const char *value,
		     size_t size, int flags)
{
	const char *key = name + strlen(ORCH_MNT_CTL_PREFIX);
	const struct orch_knob *k;
	uint32_t v;
	int error;

	if (strcmp(key, CTL_STATS) == 0 || strcmp(key, CTL_CACHE_MODE) == 0)
		return -EPERM;
	k = ctl_knob_find(key);
	if (!k)
		return -EOPNOTSUPP;
	if (uid != 0 && uid != m->m_owner)
		return -EPERM;
	if (flags & XATTR_CREATE)
		return -EEXIST;
	/* Decimal digits, optionally one trailing newline (as `echo` leaves it). */
	if (size && value[size - 1] == '\n')
		size--;
	error = orch_knob_parse(k, value, size, &v);
	if (error)
		return error;
	if (k == &orch_knobs[ORCH_KNOB_ID_op_timeout_ms])
		orch_client_set_timeout(m->m_cl, v);
	atomic_store(ctl_knob_ptr(m, k), v);
	return 0;
}
