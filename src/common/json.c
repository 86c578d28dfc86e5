/* Reading Orchard's own JSON objects.  See json.h. */
#include "common/json.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"

static const char *json_ws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
		p++;
	return p;
}

/* End of the string starting at the quote @p, past the closing quote. */
static const char *json_skip_str(const char *p, const char *end)
{
	for (p++; p < end; p++) {
		if (*p == '\\')
			p++;
		else if (*p == '"')
			return p + 1;
	}
	return NULL;
}

/* End of the value at @p: a string, a balanced {...}/[...], or a scalar. */
static const char *json_skip_value(const char *p, const char *end)
{
	int depth = 0;

	if (p < end && *p == '"')
		return json_skip_str(p, end);
	if (p < end && (*p == '{' || *p == '[')) {
		while (p < end) {
			if (*p == '"') {
				p = json_skip_str(p, end);
				if (!p)
					return NULL;
				continue;
			}
			if (*p == '{' || *p == '[')
				depth++;
			else if ((*p == '}' || *p == ']') && --depth == 0)
				return p + 1;
			p++;
		}
		return NULL;
	}
	while (p < end && !memchr(",}] \t\r\n", *p, 7))
		p++;
	return p;
}

int orch_json_members(const char *s, size_t len, struct orch_json_kv *out, int max)
{
	const char *p = s, *end = s + len, *q;
	int n = 0;

	p = json_ws(p, end);
	if (p == end || *p++ != '{')
		return -1;
	for (;;) {
		p = json_ws(p, end);
		if (p < end && *p == '}')
			return n;
		if (p == end || *p != '"')
			return -1;
		q = json_skip_str(p, end);
		if (!q)
			return -1;
		if (n < max) {
			out[n].k = p + 1;
			out[n].klen = (size_t)(q - p - 2);
		}
		p = json_ws(q, end);
		if (p == end || *p++ != ':')
			return -1;
		p = json_ws(p, end);
		q = json_skip_value(p, end);
		if (!q || q == p)
			return -1;
		if (n < max) {
			out[n].v = p;
			out[n].vlen = (size_t)(q - p);
		}
		n += n < max;
		p = json_ws(q, end);
		if (p < end && *p == ',')
			p++;
		else if (p < end && *p == '}')
			return n;
		else
			return -1;
	}
}

int orch_json_inner(const char *s, size_t len, const char **in, size_t *inlen)
{
	const char *p, *end = s + len;

	if (orch_json_members(s, len, NULL, 0) < 0)
		return -EINVAL;
	p = json_ws(s, end) + 1;
	while (end > p && memchr(" \t\r\n", end[-1], 4))
		end--;
	end--; /* the closing brace */
	while (end > p && memchr(" \t\r\n", end[-1], 4))
		end--;
	p = json_ws(p, end);
	*in = p;
	*inlen = end > p ? (size_t)(end - p) : 0;
	return 0;
}

/* The member named by the @klen bytes at @key of the object at @s. */
static int json_find(const char *s, size_t len, const char *key, size_t klen, const char **v,
		     size_t *vlen)
{
	const char *p = s, *end = s + len, *q;

	p = json_ws(p, end);
	if (p == end || *p++ != '{')
		return -EINVAL;
	for (;;) {
		const char *k;
		size_t kl;

		p = json_ws(p, end);
		if (p == end || *p != '"')
			return -ENOENT;
		q = json_skip_str(p, end);
		if (!q)
			return -EINVAL;
		k = p + 1;
		kl = (size_t)(q - p - 2);
		p = json_ws(q, end);
		if (p == end || *p++ != ':')
			return -EINVAL;
		p = json_ws(p, end);
		q = json_skip_value(p, end);
		if (!q || q == p)
			return -EINVAL;
		if (kl == klen && !memcmp(k, key, klen)) {
			*v = p;
			*vlen = (size_t)(q - p);
			return 0;
		}
		p = json_ws(q, end);
		if (p < end && *p == ',')
			p++;
		else
			return -ENOENT;
	}
}

int orch_json_get(const char *s, size_t len, const char *path, const char **v, size_t *vlen)
{
	const char *obj = s;
	size_t olen = len;

	for (;;) {
		const char *dot = strchr(path, '.');
		size_t klen = dot ? (size_t)(dot - path) : strlen(path);
		int error = json_find(obj, olen, path, klen, v, vlen);

		if (error)
			return error == -EINVAL ? -ENOENT : error;
		if (!dot)
			return 0;
		obj = *v;
		olen = *vlen;
		path = dot + 1;
	}
}

/* The value as a NUL-terminated number text in @tmp, or -EINVAL. */
static int json_number(const char *v, size_t vlen, char *tmp, size_t size)
{
	if (!vlen || vlen >= size || !memchr("-0123456789", v[0], 11))
		return -EINVAL;
	memcpy(tmp, v, vlen);
	tmp[vlen] = '\0';
	return 0;
}

int orch_json_get_u64(const char *s, size_t len, const char *path, uint64_t *out)
{
	const char *v;
	char tmp[32], *e;
	size_t vlen;
	int error = orch_json_get(s, len, path, &v, &vlen);

	if (error)
		return error;
	if (json_number(v, vlen, tmp, sizeof(tmp)) || tmp[0] == '-')
		return -EINVAL;
	errno = 0;
	*out = strtoull(tmp, &e, 10);
	return errno || *e ? -EINVAL : 0;
}

int orch_json_get_f64(const char *s, size_t len, const char *path, double *out)
{
	const char *v;
	char tmp[64], *e;
	size_t vlen;
	int error = orch_json_get(s, len, path, &v, &vlen);

	if (error)
		return error;
	if (json_number(v, vlen, tmp, sizeof(tmp)))
		return -EINVAL;
	*out = strtod(tmp, &e);
	return *e ? -EINVAL : 0;
}

int orch_json_get_str(const char *s, size_t len, const char *path, char *out, size_t size)
{
	const char *v, *end;
	size_t vlen, n = 0;
	int error = orch_json_get(s, len, path, &v, &vlen);

	if (error)
		return error;
	if (vlen < 2 || v[0] != '"' || !size)
		return -EINVAL;
	end = v + vlen - 1;
	for (v++; v < end && n + 1 < size; v++) {
		char c = *v;

		if (c == '\\' && v + 1 < end) {
			c = *++v;
			if (c == 'n')
				c = '\n';
			else if (c == 't')
				c = '\t';
			else if (c == 'u') {
				c = '?';
				v += ORCH_MIN((size_t)4, (size_t)(end - v - 1));
			}
		}
		out[n++] = c;
	}
	out[n] = '\0';
	return 0;
}
