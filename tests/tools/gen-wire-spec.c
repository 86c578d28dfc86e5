/*
 * Writes the part of docs/SPEC-wire.md that msg.def and flags.def already
 * say: every message with its fields by name, what its reply leases, and
 * every bit of every flag word.  make spec rewrites it; make test-unit
 * fails when it is out of date.
 *
 *   gen-wire-spec                  prints the part
 *   gen-wire-spec --check FILE     exit 1 if FILE's part differs
 *   gen-wire-spec --update FILE    rewrites FILE's part
 *
 * The part lies between the lines BEGIN and END below.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/msg.h"

#define BEGIN "<!-- Generated from src/proto/msg.def and flags.def by make spec: do not edit. -->"
#define END "<!-- End of the generated part. -->"

static const struct row {
	const char *name;
	unsigned int num;
	const char *from;
	const char *lease;
	const char *log;
	const char *req;
	const char *rep;
} rows[] = {
#define ORCH_MSG(name, num, from, handler, lease, log, req, rep) \
	{ #name, num, #from, lease, #log, req, rep },
#include "proto/msg.def"
#undef ORCH_MSG
};

static const struct word {
	const char *set;
	const char *field;
	const char *unknown;
} words[] = {
#define ORCH_FLAGS(set, field, unknown) { #set, #field, #unknown },
#define ORCH_FLAG(set, bit, value, doc)
#include "proto/flags.def"
#undef ORCH_FLAG
#undef ORCH_FLAGS
};

static const struct bit {
	const char *set;
	const char *bit;
	unsigned int value;
	const char *doc;
} bits[] = {
#define ORCH_FLAGS(set, field, unknown)
#define ORCH_FLAG(set, bit, value, doc) { #set, #bit, value, doc },
#include "proto/flags.def"
#undef ORCH_FLAG
#undef ORCH_FLAGS
};

#define NROWS (sizeof(rows) / sizeof(rows[0]))

/* How a field code is encoded, in SPEC-wire's words ("Field codes"); NULL if unknown. */
static const char *code_type(char code)
{
	switch (code) {
	case 'c': return "cred";
	case 'h': case 'p': case 'P': case 'o': case 's': case 'r':
	case 'k': case 'i': case 'H': case 'Q': return "u64";
	case 'T': return "i64";
	case 'L': case 'Y': return "layout";
	case 'm': case 'l': case 'O': case 'f': return "u32";
	case 'd': return "i32";
	case 'n': case 'N': case 'x': return "str8";
	case 't': return "str16";
	case 'D': case 'J': return "str32";
	case 'a': return "attr";
	case 'e': return "entry";
	case 'E': return "dirents";
	case 'b': return "u8";
	case 'S': return "statfs";
	case 'V': return "version";
	case 'Z': case 'M': return "bytes32";
	case 'K': return "fsmap_key";
	default: return NULL;
	}
}

/* Every field code, for the check of SPEC-wire's "Field codes" table. */
static const char all_codes[] = "chpPosrkiHQTLYmlOfdnNxtDJaeEbSVZMK";

/*
 * Checks @doc's hand-written "Field codes" table, rows "| codes | type |
 * ...", against code_type: every code once, with the type the Messages
 * tables give it.
 */
static bool codes_check(const char *doc)
{
	const char *p = strstr(doc, "\n## Field codes\n"), *end;
	char seen[sizeof(all_codes)] = { 0 };
	bool ok = true;

	end = p ? strstr(p + 1, "\n## ") : NULL;
	for (; p && p < end; p = strchr(p + 1, '\n')) {
		const char *codes = p + 3, *type, *type_end;

		if (strncmp(p, "\n| ", 3) != 0 || !(type = strstr(codes, " | ")) || type > end)
			continue;
		type += 3;
		type_end = strstr(type, " |");
		for (const char *c = codes; c < type - 3 && type_end; c += 2) {
			const char *want = code_type(*c), *at = strchr(all_codes, *c);

			if (c[1] != ' ' || !want || !at)
				break;  /* the header or the separator */
			if (strlen(want) != (size_t)(type_end - type) ||
			    memcmp(want, type, strlen(want)) != 0 || seen[at - all_codes]++) {
				fprintf(stderr, "gen-wire-spec: \"Field codes\": code %c: the type is "
					"%s, once\n", *c, want);
				ok = false;
			}
		}
	}
	for (size_t i = 0; i < sizeof(all_codes) - 1; i++) {
		if (!seen[i]) {
			fprintf(stderr, "gen-wire-spec: \"Field codes\" has no row for code %c\n",
				all_codes[i]);
			ok = false;
		}
	}
	return ok;
}

/* True if @list has a field of code @code, whose name *@name gets. */
static bool field_name(const char *list, char code, struct orch_str *name)
{
	char c;

	while ((c = orch_msg_field_next(&list, name)))
		if (c == code)
			return true;
	return false;
}

/* Writes @list as "name:type ...", or "none".  False for a code without a type. */
static bool fields_write(FILE *out, const char *list)
{
	struct orch_str name;
	bool first = true;
	char code;

	if (!*list) {
		fputs("none", out);
		return true;
	}
	fputc('`', out);
	while ((code = orch_msg_field_next(&list, &name))) {
		const char *type = code_type(code);

		if (!type) {
			fprintf(stderr, "gen-wire-spec: field code '%c' has no type here\n", code);
			return false;
		}
		fprintf(out, "%s%.*s", first ? "" : " ", (int)name.len, name.s);
		if (strlen(type) != name.len || memcmp(type, name.s, name.len) != 0)
			fprintf(out, ":%s", type);
		first = false;
	}
	fputc('`', out);
	return true;
}

static const char *from_words(const char *from)
{
	if (strcmp(from, "ANY") == 0)
		return "any";
	if (strcmp(from, "SERVER") == 0)
		return "servers";
	if (strcmp(from, "CONN") == 0)
		return "handshake";
	if (strcmp(from, "ONEWAY") == 0)
		return "one-way";
	return "push";
}

/* msg.def's log column, for the messages table. */
static const char *log_words(const char *log)
{
	if (strcmp(log, "ONCE") == 0)
		return "log, once";
	if (strcmp(log, "LOG") == 0)
		return "log";
	return "-";
}

static bool messages_write(FILE *out)
{
	const char *family = "";

	fputs("## Messages\n\n"
	      "Each message's request and reply fields, in order, as `name:type` (the\n"
	      "type is the field code's encoding, \"Field codes\" above; a name alone is\n"
	      "its own type).  A reply's fields follow its status, if OK.  *Served*:\n"
	      "a request a server serves from any authenticated peer, from servers only\n"
	      "(else `PERM`), the handshake's (answered `AN2AN_UNKNOWN` after it), a\n"
	      "push (answered `NOSYS`) or a one-way frame from a client (never\n"
	      "answered).  *Group*: in a replica group, a request its leader runs\n"
	      "through the log, and one a client also sends exactly once (\"Replica\n"
	      "groups\").\n", out);
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];

		if (strncmp(r->name, family, 5) != 0) {
			family = r->name;
			fprintf(out, "\n| %.5s | number | served | group | request | reply |\n"
				"|---|---|---|---|---|---|\n", family);
		}
		fprintf(out, "| `%s` | 0x%04x | %s | %s | ", r->name, r->num, from_words(r->from),
			log_words(r->log));
		if (!fields_write(out, r->req))
			return false;
		fputs(" | ", out);
		if (!fields_write(out, r->rep))
			return false;
		fputs(" |\n", out);
	}
	return true;
}

static bool leases_write(FILE *out)
{
	fputs("\n### What replies lease\n\n"
	      "On a connection with leases (\"Leases\" above): the directory a request\n"
	      "field names, whose entries the reply speaks for, and the inodes a reply\n"
	      "field describes (with their attributes).\n\n"
	      "| reply to | directory | inodes |\n|---|---|---|\n", out);
	for (size_t i = 0; i < NROWS; i++) {
		const struct row *r = &rows[i];
		struct orch_str dir = { 0 }, inodes = { 0 };

		if (!r->lease[0])
			continue;
		if ((r->lease[0] != '-' && !field_name(r->req, r->lease[0], &dir)) ||
		    (r->lease[1] != '-' && !field_name(r->rep, r->lease[1], &inodes))) {
			fprintf(stderr, "gen-wire-spec: %s leases a field it does not have\n",
				r->name);
			return false;
		}
		fprintf(out, "| `%s` | %s%.*s%s | %s%.*s%s |\n", r->name,
			dir.len ? "`" : "", (int)dir.len, dir.s, dir.len ? "`" : "-",
			inodes.len ? "`" : "", (int)inodes.len, inodes.s, inodes.len ? "`" : "-");
	}
	return true;
}

static void flags_write(FILE *out)
{
	fputs("\n### Flag words\n\n"
	      "Every bit of every flag word (`src/proto/flags.def`), its constant and\n"
	      "what it means.  A request with a bit its word does not list is answered\n"
	      "`INVAL` where the word refuses unknown bits, and served as if the bit\n"
	      "were clear where it ignores them.\n", out);
	for (size_t w = 0; w < sizeof(words) / sizeof(words[0]); w++) {
		const char *sep = "";

		fprintf(out, "\n`%s` (", words[w].field);
		for (size_t i = 0; i < NROWS; i++) {
			struct orch_str name;

			if (field_name(rows[i].req, 'f', &name) && strlen(words[w].field) == name.len &&
			    memcmp(words[w].field, name.s, name.len) == 0) {
				fprintf(out, "%s`%s`", sep, rows[i].name);
				sep = ", ";
			}
		}
		fprintf(out, "); other bits: %s.\n\n| bit | constant | meaning |\n|---|---|---|\n",
			strcmp(words[w].unknown, "REFUSE") == 0 ? "`INVAL`" : "ignored");
		for (size_t b = 0; b < sizeof(bits) / sizeof(bits[0]); b++)
			if (strcmp(bits[b].set, words[w].set) == 0)
				fprintf(out, "| 0x%x | `ORCH_%s_%s` | %s |\n", bits[b].value,
					bits[b].set, bits[b].bit, bits[b].doc);
	}
}

/* The generated part, markers included, in a malloc'd string; NULL on error. */
static char *part_make(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&text, &len);
	bool ok;

	if (!out)
		return NULL;
	fputs(BEGIN "\n\n", out);
	ok = messages_write(out) && leases_write(out);
	if (ok)
		flags_write(out);
	fputs("\n" END "\n", out);
	fclose(out);
	if (!ok) {
		free(text);
		return NULL;
	}
	return text;
}

static char *file_read(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0) {
		text = malloc((size_t)n + 1);
		if (text && fread(text, 1, (size_t)n, f) == (size_t)n) {
			text[n] = '\0';
		} else {
			free(text);
			text = NULL;
		}
	}
	fclose(f);
	return text;
}

/* Compares (@check) or rewrites the generated part of @path with @part.  0, 1 or 2. */
static int doc_sync(const char *path, const char *part, bool check)
{
	char *doc = file_read(path), *begin, *end;
	int rc = 0;
	FILE *f;

	begin = doc ? strstr(doc, BEGIN "\n") : NULL;
	end = begin ? strstr(begin, END "\n") : NULL;
	if (!end) {
		fprintf(stderr, "gen-wire-spec: %s: no generated part (its first and last lines)\n",
			path);
		free(doc);
		return 1;
	}
	end += strlen(END "\n");
	if (!codes_check(doc)) {
		free(doc);
		return 1;
	}
	if ((size_t)(end - begin) == strlen(part) && memcmp(begin, part, strlen(part)) == 0) {
		free(doc);
		return 0;
	}
	if (check) {
		fprintf(stderr, "gen-wire-spec: %s is out of date with msg.def and flags.def: "
			"run make spec\n", path);
		rc = 1;
	} else if (!(f = fopen(path, "w")) ||
		   fprintf(f, "%.*s%s%s", (int)(begin - doc), doc, part, end) < 0 || fclose(f)) {
		perror(path);
		rc = 1;
	}
	free(doc);
	return rc;
}

int main(int argc, char **argv)
{
	char *part;
	int rc;

	if (argc != 1 && (argc != 3 || (strcmp(argv[1], "--check") != 0 &&
					strcmp(argv[1], "--update") != 0))) {
		fprintf(stderr, "usage: gen-wire-spec [--check FILE | --update FILE]\n");
		return 2;
	}
	part = part_make();
	if (!part)
		return 1;
	if (argc == 1) {
		fputs(part, stdout);
		rc = 0;
	} else {
		rc = doc_sync(argv[2], part, strcmp(argv[1], "--check") == 0);
	}
	free(part);
	return rc;
}
