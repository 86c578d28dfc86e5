/* HELLO authentication.  See auth.h. */
#include "net/auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

int orch_auth_nonce(uint8_t out[ORCH_NONCE_LEN])
{
	return RAND_bytes(out, ORCH_NONCE_LEN) == 1 ? 0 : -EIO;
}

void orch_auth_mac(const uint8_t key[ORCH_KEY_LEN], bool acceptor,
		   const uint8_t first[ORCH_NONCE_LEN], const uint8_t second[ORCH_NONCE_LEN],
		   uint8_t out[ORCH_MAC_LEN])
{
	static const char la[] = "orchard-acceptor", lc[] = "orchard-connector";
	uint8_t msg[sizeof(lc) + 2 * ORCH_NONCE_LEN];
	const char *label = acceptor ? la : lc;
	size_t n = strlen(label);
	unsigned int outlen = ORCH_MAC_LEN;

	memcpy(msg, label, n);
	memcpy(msg + n, first, ORCH_NONCE_LEN);
	memcpy(msg + n + ORCH_NONCE_LEN, second, ORCH_NONCE_LEN);
	if (!HMAC(EVP_sha256(), key, ORCH_KEY_LEN, msg, n + 2 * ORCH_NONCE_LEN, out, &outlen))
		memset(out, 0, ORCH_MAC_LEN); /* never equals a real MAC check below */
}

bool orch_auth_mac_equal(const uint8_t a[ORCH_MAC_LEN], const uint8_t b[ORCH_MAC_LEN])
{
	static const uint8_t zero[ORCH_MAC_LEN];

	if (CRYPTO_memcmp(a, zero, ORCH_MAC_LEN) == 0)
		return false;
	return CRYPTO_memcmp(a, b, ORCH_MAC_LEN) == 0;
}
