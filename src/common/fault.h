/*
 * The test hooks of fault.def: their ids and how code reads them.
 */
#ifndef ORCH_COMMON_FAULT_H
#define ORCH_COMMON_FAULT_H

enum orch_fault {
#define ORCH_FAULT(id, ...) ORCH_FAULT_##id,
#define ORCH_KILLPOINT(...)
#include "common/fault.def"
#undef ORCH_FAULT
#undef ORCH_KILLPOINT
	ORCH_FAULT_COUNT
};

enum orch_killpoint {
#define ORCH_FAULT(...)
#define ORCH_KILLPOINT(id, ...) ORCH_KILLPOINT_##id,
#include "common/fault.def"
#undef ORCH_FAULT
#undef ORCH_KILLPOINT
	ORCH_KILLPOINT_COUNT
};

/* The value of hook @f's environment variable, or NULL if unset or empty. */
const char *orch_fault_env(enum orch_fault f);

/* The name of kill point @k ("data", ...). */
const char *orch_killpoint_name(enum orch_killpoint k);

#endif
