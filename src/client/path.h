/*
 * Handle -> path, without a namespace scan: the inode's server gives its
 * attributes (layout, link count, the directory it was created in), every
 * server answers which of its entries name the handle (AD2SV_NAMES, an
 * index lookup), and each directory's name is found the same way, up to
 * the root.  Directory paths are cached, so a map of many files in few
 * directories costs about two requests per file.
 *
 * Used by `orchard fsmap`/`whoowns` and by the server's admin thread
 * (bad-block reports).  One struct orch_path_cache is used by one thread
 * at a time; it makes synchronous calls through the caller's client.
 */
#ifndef ORCH_CLIENT_PATH_H
#define ORCH_CLIENT_PATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client/rpc.h"
#include "proto/types.h"

/* Paths of one inode listed; more links are counted, not named. */
#define ORCH_PATH_LINKS_MAX 8

/* What is known about one handle. */
struct orch_path_info {
	uint64_t handle;
	int error;              /* 0, -ENOENT: no inode; else could not ask */
	bool has_attr;
	struct orch_attr attr;  /* if has_attr: layout, nlink, size */
	unsigned int npaths;    /* 0: unlinked (no entry names it) */
	uint64_t more;          /* entries naming it beyond paths[] */
	char *paths[ORCH_PATH_LINKS_MAX];
};

struct orch_path_cache;

/* A cache using @cl (borrowed; must outlive the cache).  0 or -ENOMEM. */
int orch_path_cache_create(struct orch_client *cl, struct orch_path_cache **out);
void orch_path_cache_destroy(struct orch_path_cache *pc);

/*
 * Resolves @h.  *@out stays valid until the next call on @pc or its
 * destruction.  Returns 0 (with out->error saying what could not be
 * found) or -ENOMEM.
 */
int orch_path_lookup(struct orch_path_cache *pc, uint64_t h,
		     const struct orch_path_info **out);

/*
 * One line naming the owner of bytes: "/a/b" or "/a/b (+2 other links)",
 * "(unlinked file, handle 0x...)", "(handle 0x...: <error>)" into @buf.
 * With @link >= 0, only path number @link.
 */
void orch_path_describe(const struct orch_path_info *pi, int link, char *buf,
			size_t len);

/*
 * Byte @local of server @server's object of a file with layout @l, as an
 * offset in the file (the inverse of orch_layout_locate).  @l must be valid.
 */
uint64_t orch_path_file_offset(const struct orch_layout *l, unsigned int server,
			       uint64_t local);

#endif
