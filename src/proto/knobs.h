/*
 * The mount's numeric options and live knobs (knobs.def): names, defaults
 * and limits for orchard-mount, its control xattrs and `orchard cache`.
 */
#ifndef ORCH_PROTO_KNOBS_H
#define ORCH_PROTO_KNOBS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

enum orch_knob_id {
#define ORCH_KNOB_LIVE(name, ...) ORCH_KNOB_ID_##name,
#define ORCH_KNOB_MOUNT(name, ...) ORCH_KNOB_ID_##name,
#include "proto/knobs.def"
#undef ORCH_KNOB_LIVE
#undef ORCH_KNOB_MOUNT
	ORCH_KNOB_COUNT
};

struct orch_knob {
	const char *k_name;
	uint32_t k_default, k_min, k_max;
	bool k_live;          /* changeable on a live mount */
	const char *k_help;   /* one line for --help */
};

/* Indexed by enum orch_knob_id. */
extern const struct orch_knob orch_knobs[ORCH_KNOB_COUNT];

/* The knob named by the @len bytes at @name, or NULL. */
const struct orch_knob *orch_knob_find(const char *name, size_t len);

/* True if @k's default 0 means "not set" (the config's value applies). */
static inline bool orch_knob_zero_unset(const struct orch_knob *k)
{
	return k->k_default == 0 && k->k_min > 0;
}

/*
 * Parses the @len bytes at @s, a decimal number within @k's limits (no
 * sign, no spaces), or "on"/"off" for a switch (0 to 1), into *@out.  0
 * or -EINVAL.
 */
int orch_knob_parse(const struct orch_knob *k, const char *s, size_t len, uint32_t *out);

/* One --help line per knob ("  NAME=N  help (default D)"), live ones only if @live_only. */
void orch_knobs_help(FILE *f, bool live_only);

#endif
