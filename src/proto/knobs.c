/* The mount's numeric options and live knobs, from knobs.def. */
#include "proto/knobs.h"

#include <errno.h>
#include <string.h>

const struct orch_knob orch_knobs[ORCH_KNOB_COUNT] = {
#define ORCH_KNOB_LIVE(name, dflt, min, max, help) \
	[ORCH_KNOB_ID_##name] = { #name, dflt, min, max, true, help },
#define ORCH_KNOB_MOUNT(name, dflt, min, max, help) \
	[ORCH_KNOB_ID_##name] = { #name, dflt, min, max, false, help },
#include "proto/knobs.def"
#undef ORCH_KNOB_LIVE
#undef ORCH_KNOB_MOUNT
};

const struct orch_knob *orch_knob_find(const char *name, size_t len)
{
	for (size_t i = 0; i < ORCH_KNOB_COUNT; i++)
		if (strlen(orch_knobs[i].k_name) == len && memcmp(orch_knobs[i].k_name, name, len) == 0)
			return &orch_knobs[i];
	return NULL;
}

int orch_knob_parse(const struct orch_knob *k, const char *s, size_t len, uint32_t *out)
{
	uint64_t v = 0;

	if (k->k_min == 0 && k->k_max == 1 && (len == 2 || len == 3)) {
		if (memcmp(s, "on", len) == 0 && len == 2) {
			*out = 1;
			return 0;
		}
		if (memcmp(s, "off", len) == 0 && len == 3) {
			*out = 0;
			return 0;
		}
	}

	if (!len || len > 10)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
	}
	if (v < k->k_min || v > k->k_max)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* Prints @text from column 27 on, wrapped at word boundaries before column 80. */
static void knobs_help_text(FILE *f, const char *text)
{
	const size_t width = 80 - 27;
	size_t col = 0;

	while (*text) {
		size_t word = strcspn(text, " ");

		/* "(default N)" stays on one line. */
		if (strncmp(text, "(default ", 9) == 0 && text[strcspn(text, ")")])
			word = strcspn(text, ")") + 1;

		if (col && col + 1 + word > width) {
			fprintf(f, "\n%27s", "");
			col = 0;
		} else if (col) {
			fputc(' ', f);
			col++;
		}
		fprintf(f, "%.*s", (int)word, text);
		col += word;
		text += word;
		text += strspn(text, " ");
	}
	fputc('\n', f);
}

void orch_knobs_help(FILE *f, bool live_only)
{
	for (size_t i = 0; i < ORCH_KNOB_COUNT; i++) {
		const struct orch_knob *k = &orch_knobs[i];
		char opt[64], text[256];

		if (live_only && !k->k_live)
			continue;
		bool sw = k->k_min == 0 && k->k_max == 1;

		snprintf(opt, sizeof(opt), sw ? "%s=on|off" : "%s=N", k->k_name);
		if (orch_knob_zero_unset(k))
			snprintf(text, sizeof(text), "%s", k->k_help);
		else if (sw)
			snprintf(text, sizeof(text), "%s (default %s)", k->k_help,
				 k->k_default ? "on" : "off");
		else
			snprintf(text, sizeof(text), "%s (default %u)", k->k_help, k->k_default);
		fprintf(f, "  %-24s ", opt);
		knobs_help_text(f, text);
	}
}
