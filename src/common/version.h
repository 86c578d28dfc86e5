/*
 * The release every program reports: `orchard --version`, the servers'
 * stats and the build_info metric.  debian/changelog and this agree;
 * -DORCH_VERSION=... overrides it.
 */
#ifndef ORCH_COMMON_VERSION_H
#define ORCH_COMMON_VERSION_H

#ifndef ORCH_VERSION
#define ORCH_VERSION "0.1.0"
#endif

#endif
