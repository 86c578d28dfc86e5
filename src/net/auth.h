/*
 * Mutual authentication from the cluster key (docs/SPEC-wire.md, "HELLO"):
 *
 *   connector -> acceptor  HELLO  vmin vmax features Nc origin
 *   acceptor  -> connector HELLO' version features Ns MACa
 *                          MACa = HMAC-SHA256(key, "orchard-acceptor" Nc Ns)
 *   connector -> acceptor  AUTH   MACc = HMAC-SHA256(key, "orchard-connector" Ns Nc)
 *   acceptor  -> connector AUTH'  status
 *
 * Each side proves it holds the key over the other side's fresh nonce, so
 * neither a replay nor a reflection works.  No request is served before the
 * acceptor has checked MACc.  Any thread.
 */
#ifndef ORCH_NET_AUTH_H
#define ORCH_NET_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cfg.h"
#include "proto/msg.h"

/* Fills @out with random bytes from OpenSSL.  0 or -EIO. */
int orch_auth_nonce(uint8_t out[ORCH_NONCE_LEN]);

/* MAC a side sends: @acceptor picks the label; @first/@second are nonces. */
void orch_auth_mac(const uint8_t key[ORCH_KEY_LEN], bool acceptor,
		   const uint8_t first[ORCH_NONCE_LEN], const uint8_t second[ORCH_NONCE_LEN],
		   uint8_t out[ORCH_MAC_LEN]);

/* Constant-time comparison of two MACs. */
bool orch_auth_mac_equal(const uint8_t a[ORCH_MAC_LEN], const uint8_t b[ORCH_MAC_LEN]);

#endif
