/*
 * Permission checks on attributes (Linux generic_permission, mode bits
 * only), shared by the servers and the mount, which answers ACCESS from
 * leased attributes with the very same rule.
 */
#ifndef ORCH_PROTO_PERM_H
#define ORCH_PROTO_PERM_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "common/util.h"
#include "proto/types.h"

#define ORCH_MAY_EXEC 1u
#define ORCH_MAY_WRITE 2u
#define ORCH_MAY_READ 4u

static inline bool orch_cred_in_group(const struct orch_cred *cred, uint32_t gid)
{
	uint32_t n = ORCH_MIN(cred->ngroups, (uint32_t)ORCH_GROUPS_MAX);

	if (cred->gid == gid)
		return true;
	for (uint32_t i = 0; i < n; i++)
		if (cred->groups[i] == gid)
			return true;
	return false;
}

/*
 * 0 or -EACCES.  The owner class alone decides for the owner, the group
 * class for a member, as Linux does (a group can be denied what others may).
 * Root bypasses read and write; it may execute a non-directory only if
 * some x bit is set, and may always search a directory.
 */
static inline int orch_perm(const struct orch_cred *cred, const struct orch_attr *a,
			    uint32_t mask)
{
	uint32_t bits;

	if (cred->uid == 0) {
		if ((mask & ORCH_MAY_EXEC) && !S_ISDIR(a->mode) && !(a->mode & 0111))
			return -EACCES;
		return 0;
	}
	if (cred->uid == a->uid)
		bits = (a->mode >> 6) & 7;
	else if (orch_cred_in_group(cred, a->gid))
		bits = (a->mode >> 3) & 7;
	else
		bits = a->mode & 7;
	return (mask & ~bits) ? -EACCES : 0;
}

/*
 * The set-id bits a change by @cred takes from a file (Linux
 * setattr_should_drop_suidgid, setattr_should_drop_sgid): S_ISUID, and
 * S_ISGID if the file is group-executable or the caller (not root) is not
 * in its group.  A write or a truncate takes them from a regular file,
 * unless the caller is root (CAP_FSETID); a change of owner (@chown) takes
 * them from anything but a directory, root's changes included.
 */
static inline uint32_t orch_perm_kill_suidgid(const struct orch_cred *cred,
					      const struct orch_attr *a, bool chown)
{
	bool root = cred->uid == 0;
	uint32_t kill = 0;

	if (chown ? S_ISDIR(a->mode) : (!S_ISREG(a->mode) || root))
		return 0;
	if (a->mode & S_ISUID)
		kill |= S_ISUID;
	if ((a->mode & S_ISGID) &&
	    ((a->mode & S_IXGRP) || (!root && !orch_cred_in_group(cred, a->gid))))
		kill |= S_ISGID;
	return kill;
}

#endif
