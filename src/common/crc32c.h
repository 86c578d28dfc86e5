/*
 * CRC-32C (Castagnoli), as iSCSI, ext4, XFS and BlueStore use it: the
 * checksum of every store block and record.  Uses the SSE4.2 instruction
 * when the CPU has it, a table otherwise; both give the same values.
 */
#ifndef ORCH_COMMON_CRC32C_H
#define ORCH_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/*
 * Continues @crc over @len bytes of @buf.  Start with 0: orch_crc32c(0,
 * "123456789", 9) is 0xe3069283.
 */
uint32_t orch_crc32c(uint32_t crc, const void *buf, size_t len);

#endif
