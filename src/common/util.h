/* Small shared helpers: error aliases, assertions, array sizes. */
#ifndef ORCH_COMMON_UTIL_H
#define ORCH_COMMON_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* Persistent data failed verification (XFS EFSCORRUPTED). */
#define ORCH_ECORRUPT EUCLEAN
/* A checksum did not match (XFS EFSBADCRC). */
#define ORCH_EBADCRC EBADMSG

#define ORCH_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define ORCH_MIN(a, b) ((a) < (b) ? (a) : (b))
#define ORCH_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Value of hex digit @c, or -1. */
static inline int orch_hex_digit(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Mixes the bits of @h for a hash table's bucket (a power-of-two mask of
 * the result): handles of one server are sequential.
 */
static inline uint64_t orch_hash_u64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdULL;
	h ^= h >> 33;
	return h;
}

/* Names the check that failed, for corruption reports. */
typedef const char *orch_failaddr_t;
#define ORCH_STR_(x) #x
#define ORCH_STR(x) ORCH_STR_(x)
#define ORCH_THIS_ADDRESS (__FILE__ ":" ORCH_STR(__LINE__))

/*
 * Programmer invariants only, never disk or network input.  Aborts in debug
 * and CI builds (ORCH_DEBUG_BUILD), warns in release builds.
 */
#ifdef ORCH_DEBUG_BUILD
#define ORCH_ASSERT(e)                                                         \
	do {                                                                   \
		if (!(e)) {                                                    \
			fprintf(stderr, "%s:%d: assertion failed: %s\n",       \
				__FILE__, __LINE__, #e);                       \
			abort();                                               \
		}                                                              \
	} while (0)
#else
#define ORCH_ASSERT(e)                                                         \
	do {                                                                   \
		if (!(e))                                                      \
			fprintf(stderr, "%s:%d: assertion failed: %s\n",       \
				__FILE__, __LINE__, #e);                       \
	} while (0)
#endif

#endif
