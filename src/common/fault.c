/* The test hooks of fault.def. */
#include "common/fault.h"

#include <stdlib.h>

static const char *const fault_env[ORCH_FAULT_COUNT] = {
#define ORCH_FAULT(id, var, where, what) [ORCH_FAULT_##id] = var,
#define ORCH_KILLPOINT(...)
#include "common/fault.def"
#undef ORCH_FAULT
#undef ORCH_KILLPOINT
};

static const char *const killpoint_names[ORCH_KILLPOINT_COUNT] = {
#define ORCH_FAULT(...)
#define ORCH_KILLPOINT(id, name, what) [ORCH_KILLPOINT_##id] = name,
#include "common/fault.def"
#undef ORCH_FAULT
#undef ORCH_KILLPOINT
};

const char *orch_fault_env(enum orch_fault f)
{
	const char *v;

	if ((unsigned int)f >= ORCH_FAULT_COUNT || !fault_env[f])
		return NULL;
	v = getenv(fault_env[f]);
	return v && *v ? v : NULL;
}

const char *orch_killpoint_name(enum orch_killpoint k)
{
	return (unsigned int)k < ORCH_KILLPOINT_COUNT ? killpoint_names[k] : "?";
}
