/*
 * Handle -> path.  See path.h.
 *
 * Entries of a directory live on the server of the directory's inode, so
 * the entry naming directory D sits on the server of D's parent, and that
 * server also holds the parent's inode: one AD2SV_NAMES there returns D's
 * name and the parent's attributes, whose parent pointer is the next step
 * up.  Directories keep their parent pointer through renames (SET_PARENT);
 * files keep the directory they were created in, which is only a hint, so
 * a file's entries are asked of that server first and of every other
 * server when they do not account for its link count.
 *
 * Everything a server answers is untrusted: the walk up is bounded
 * (PATH_DEPTH_MAX), a loop or a missing step ends the path with "?", and
 * paths are cut at ORCH_PATH_MAX.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "client/path.h"

#define PATH_BUCKETS 1024
#define PATH_CACHE_MAX 8192     /* entries before the cache starts over */
#define PATH_DEPTH_MAX 256      /* directory levels followed up */
#define PATH_NAMES_MAX 16       /* entries asked per server */

struct path_dir {
	uint64_t handle;
	char *path;
	struct path_dir *next;
};

struct orch_path_cache {
	struct orch_client *cl;
	struct path_dir *dirs[PATH_BUCKETS];
	size_t ndirs;
	struct orch_path_info info;     /* the last answer */
};

int orch_path_cache_create(struct orch_client *cl, struct orch_path_cache **out)
{
	struct orch_path_cache *pc = calloc(1, sizeof(*pc));

	if (!pc)
		return -ENOMEM;
	pc->cl = cl;
	*out = pc;
	return 0;
}

static void path_info_clear(struct orch_path_info *pi)
{
	for (unsigned int i = 0; i < pi->npaths; i++)
		free(pi->paths[i]);
	memset(pi, 0, sizeof(*pi));
}

static void path_dirs_clear(struct orch_path_cache *pc)
{
	for (size_t b = 0; b < PATH_BUCKETS; b++) {
		while (pc->dirs[b]) {
			struct path_dir *d = pc->dirs[b];

			pc->dirs[b] = d->next;
			free(d->path);
			free(d);
		}
	}
	pc->ndirs = 0;
}

void orch_path_cache_destroy(struct orch_path_cache *pc)
{
	if (!pc)
		return;
	path_info_clear(&pc->info);
	path_dirs_clear(pc);
	free(pc);
}

static const char *path_dir_find(struct orch_path_cache *pc, uint64_t h)
{
	for (struct path_dir *d = pc->dirs[h % PATH_BUCKETS]; d; d = d->next)
		if (d->handle == h)
			return d->path;
	return NULL;
}

static void path_dir_add(struct orch_path_cache *pc, uint64_t h, const char *path)
{
	struct path_dir *d;

	if (pc->ndirs >= PATH_CACHE_MAX)
		path_dirs_clear(pc);
	d = malloc(sizeof(*d));
	if (!d)
		return;
	d->path = strdup(path);
	if (!d->path) {
		free(d);
		return;
	}
	d->handle = h;
	d->next = pc->dirs[h % PATH_BUCKETS];
	pc->dirs[h % PATH_BUCKETS] = d;
	pc->ndirs++;
}

/* --- Requests --------------------------------------------------------------- */

static int path_getattr(struct orch_path_cache *pc, uint64_t h, struct orch_attr *out)
{
	struct orch_reply rep = { 0 };
	struct orch_msg req;
	int error;

	orch_msg_init(&req, ORCH_CL2SV_GETATTR);
	req.handle = h;
	error = orch_client_call(pc->cl, orch_handle_server(h), &req, &rep);
	if (error)
		return error;
	*out = rep.m.attr;
	orch_reply_release(&rep);
	return 0;
}

/* AD2SV_NAMES of @h to @server; the caller releases *@rep. */
static int path_names(struct orch_path_cache *pc, unsigned int server, uint64_t h,
		      struct orch_reply *rep)
{
	struct orch_msg req;

	orch_msg_init(&req, ORCH_AD2SV_NAMES);
	req.handle = h;
	return orch_client_call(pc->cl, server, &req, rep);
}

/* --- Directories, up to the root ------------------------------------------------ */

/* Prepends "/@name" to the path being built backwards in @buf at *@pos. */
static void path_prepend(char *buf, size_t *pos, const char *name, size_t len)
{
	if (len + 1 > *pos) {
		*pos = 0;   /* too deep: the path starts with what fits */
		return;
	}
	*pos -= len;
	memcpy(buf + *pos, name, len);
	buf[--*pos] = '/';
}

/*
 * Path of directory @dir whose parent is @parent (from its attributes),
 * into @out.  Unknown steps become "?".
 */
static void path_dir(struct orch_path_cache *pc, uint64_t dir, uint64_t parent,
		     char *out, size_t outlen)
{
	char buf[ORCH_PATH_MAX + 1];
	size_t pos = ORCH_PATH_MAX;
	uint64_t start = dir;
	const char *known = NULL;
	int depth;

	buf[pos] = 0;
	for (depth = 0; dir != ORCH_ROOT_HANDLE && depth < PATH_DEPTH_MAX; depth++) {
		struct orch_reply rep = { 0 };
		const struct orch_dirent *d = NULL;

		known = path_dir_find(pc, dir);
		if (known)
			break;
		if (!parent || path_names(pc, orch_handle_server(parent), dir, &rep)) {
			path_prepend(buf, &pos, "?", 1);
			break;
		}
		for (uint32_t i = 0; i < rep.m.ndirents && !d; i++)
			if (rep.m.dirents[i].handle == parent)
				d = &rep.m.dirents[i];
		if (!d) {
			orch_reply_release(&rep);
			path_prepend(buf, &pos, "?", 1);
			break;
		}
		path_prepend(buf, &pos, d->name, d->namelen);
		dir = parent;
		parent = d->has_attr ? d->attr.parent : 0;
		orch_reply_release(&rep);
	}
	if (depth == PATH_DEPTH_MAX)
		path_prepend(buf, &pos, "?", 1);
	snprintf(out, outlen, "%s%s", known && strcmp(known, "/") ? known : "",
		 buf[pos] ? buf + pos : (known ? "" : "/"));
	if (!out[0])
		snprintf(out, outlen, "/");
	if (!strchr(out, '?'))
		path_dir_add(pc, start, out);
}

/* --- Files -------------------------------------------------------------------------- */

/* Adds the entries of one NAMES reply as paths; counts the rest. */
static void path_add_entries(struct orch_path_cache *pc, struct orch_path_info *pi,
			     const struct orch_msg *m, uint64_t *seen)
{
	char dir[ORCH_PATH_MAX + 1], full[ORCH_PATH_MAX + ORCH_NAME_MAX + 2];

	*seen += m->size;
	for (uint32_t i = 0; i < m->ndirents; i++) {
		const struct orch_dirent *d = &m->dirents[i];
		uint64_t pp = d->has_attr ? d->attr.parent : 0;

		if (pi->npaths == ORCH_PATH_LINKS_MAX)
			break;
		path_dir(pc, d->handle, pp, dir, sizeof(dir));
		snprintf(full, sizeof(full), "%s%s%.*s", dir, strcmp(dir, "/") ? "/" : "",
			 (int)d->namelen, d->name);
		pi->paths[pi->npaths] = strdup(full);
		if (pi->paths[pi->npaths])
			pi->npaths++;
	}
}

int orch_path_lookup(struct orch_path_cache *pc, uint64_t h,
		     const struct orch_path_info **out)
{
	const struct orch_cfg *cfg = orch_client_cfg(pc->cl);
	struct orch_path_info *pi = &pc->info;
	unsigned int first;
	uint64_t seen = 0;

	*out = pi;
	if (pi->handle == h && h)
		return 0;
	path_info_clear(pi);
	pi->handle = h;
	pi->error = path_getattr(pc, h, &pi->attr);
	pi->has_attr = pi->error == 0;
	/* Where the file was created first: usually its only entry. */
	first = pi->has_attr ? orch_handle_server(pi->attr.parent) : orch_handle_server(h);
	for (unsigned int k = 0; k < cfg->nservers; k++) {
		unsigned int s = k == 0 ? first : (k <= first ? k - 1 : k);
		struct orch_reply rep = { 0 };

		if (s >= cfg->nservers)
			continue;
		if (k > 0 && pi->has_attr && seen >= pi->attr.nlink && !S_ISDIR(pi->attr.mode))
			break;
		if (path_names(pc, s, h, &rep) == 0) {
			path_add_entries(pc, pi, &rep.m, &seen);
			orch_reply_release(&rep);
		}
	}
	pi->more = seen > pi->npaths ? seen - pi->npaths : 0;
	return 0;
}

void orch_path_describe(const struct orch_path_info *pi, int link, char *buf, size_t len)
{
	if (pi->npaths == 0) {
		if (pi->error && pi->error != -ENOENT)
			snprintf(buf, len, "(handle %#" PRIx64 ": %s)", pi->handle,
				 strerror(-pi->error));
		else
			snprintf(buf, len, "(unlinked file, handle %#" PRIx64 ")", pi->handle);
		return;
	}
	if (link >= 0 && (unsigned int)link < pi->npaths) {
		snprintf(buf, len, "%s", pi->paths[link]);
		return;
	}
	if (pi->npaths + pi->more > 1)
		snprintf(buf, len, "%s (+%" PRIu64 " other links)", pi->paths[0],
			 pi->npaths - 1 + pi->more);
	else
		snprintf(buf, len, "%s", pi->paths[0]);
}

uint64_t orch_path_file_offset(const struct orch_layout *l, unsigned int server,
			       uint64_t local)
{
	uint64_t slot = (server + l->stripe_count - l->first_server) % l->stripe_count;
	uint64_t j = local / l->strip_size, within = local % l->strip_size;

	return (j * l->stripe_count + slot) * l->strip_size + within;
}
