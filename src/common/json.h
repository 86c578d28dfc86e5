/*
 * Reading the JSON objects Orchard itself writes (a server's stats, a
 * mount's stats xattr), without building a tree: split an object into its
 * members (key text, value text, borrowed from the input), or find one
 * member by its path and read it as a number or a string.  Input is
 * untrusted only in that it may be malformed: every function stays within
 * @len bytes and fails cleanly.  Any thread.
 */
#ifndef ORCH_COMMON_JSON_H
#define ORCH_COMMON_JSON_H

#include <stddef.h>
#include <stdint.h>

/* One member, borrowed from the text it was split from. */
struct orch_json_kv {
	const char *k;  /* without quotes, escapes kept */
	size_t klen;
	const char *v;  /* as written; strings keep their quotes */
	size_t vlen;
};

/*
 * Splits the object in the @len bytes at @s into members.  Returns their
 * count, or -1 if @s is not an object; members past @max are not stored
 * (and not counted).  @out may be NULL with @max 0, to check the syntax.
 */
int orch_json_members(const char *s, size_t len, struct orch_json_kv *out, int max);

/*
 * The text between the braces of the object at @s, without the white
 * space around it, in *@in and *@inlen (0 for "{}").  0, or -EINVAL if @s
 * is not an object.
 */
int orch_json_inner(const char *s, size_t len, const char **in, size_t *inlen);

/*
 * The value text of member @path of the object at @s: "uptime_ms", or
 * "scrub.last_end_s" for a member of a nested object.  0, or -ENOENT.
 */
int orch_json_get(const char *s, size_t len, const char *path, const char **v, size_t *vlen);

/* The same as a number: 0, -ENOENT (absent) or -EINVAL (not a number). */
int orch_json_get_u64(const char *s, size_t len, const char *path, uint64_t *out);
int orch_json_get_f64(const char *s, size_t len, const char *path, double *out);

/*
 * The same as a string, unescaped into @out (NUL-terminated, cut to @size;
 * \uXXXX escapes become '?').  0, -ENOENT or -EINVAL (not a string).
 */
int orch_json_get_str(const char *s, size_t len, const char *path, char *out, size_t size);

#endif
