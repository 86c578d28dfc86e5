/* HELLO authentication.  See auth.h. */
#include "net/auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <string.h>

/* The protocol versions we speak. */
#define AUTH_VMIN ORCH_PROTO_VERSION
#define AUTH_VMAX ORCH_PROTO_VERSION

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

/* --- The exchange ---------------------------------------------------------------- */

void orch_auth_init(struct orch_auth *a, enum orch_auth_role role, const uint8_t *key,
		    const uint8_t nonce[ORCH_NONCE_LEN], uint32_t origin, uint64_t features)
{
	*a = (struct orch_auth){
		.a_role = role,
		.a_state = role == ORCH_AUTH_CONNECTOR ? ORCH_AUTH_START : ORCH_AUTH_WAIT_HELLO,
		.a_key = key,
		.a_origin = origin,
		.a_offer = features,
	};
	memcpy(a->a_nonce, nonce, ORCH_NONCE_LEN);
}

uint16_t orch_auth_want(const struct orch_auth *a)
{
	switch (a->a_state) {
	case ORCH_AUTH_WAIT_HELLO:
		return ORCH_AN2AN_HELLO;
	case ORCH_AUTH_WAIT_AUTH:
		return ORCH_AN2AN_AUTH;
	default:
		return 0;
	}
}

void orch_auth_set_reqid(struct orch_auth *a, struct orch_msg *out, uint64_t reqid)
{
	if (a->a_role != ORCH_AUTH_CONNECTOR)
		return; /* an acceptor's replies carry their request's reqid */
	out->reqid = reqid;
	a->a_reqid = reqid;
}

/* A connector's request: numbered 0 until the transport numbers it. */
static void auth_request(struct orch_auth *a, struct orch_msg *out, uint16_t type)
{
	orch_msg_init(out, type);
	a->a_reqid = 0;
}

static void auth_reply(struct orch_msg *out, uint16_t type, uint64_t reqid, int status)
{
	orch_msg_init(out, type);
	out->flags = ORCH_FRAME_REPLY;
	out->reqid = reqid;
	out->status = status;
}

/*
 * Decodes @h and @payload into *@m if they are the message the handshake
 * waits for: its type, from the other role (a request to the acceptor, a
 * reply to our request to the connector).  The header is checked first, so
 * nothing else is decoded (HELLO and AUTH allocate nothing).
 */
static int auth_decode(const struct orch_auth *a, const struct orch_frame_hdr *h,
		       const uint8_t *payload, struct orch_msg *m)
{
	bool reply = h->flags & ORCH_FRAME_REPLY;

	if (h->type != orch_auth_want(a))
		return -EPROTO;
	if (a->a_role == ORCH_AUTH_ACCEPTOR ? reply : (!reply || h->reqid != a->a_reqid))
		return -EPROTO;
	return orch_msg_decode(h, payload, m) ? -EPROTO : 0;
}

/* Connector: HELLO with our versions, features, origin and nonce. */
static int auth_connect(struct orch_auth *a, struct orch_msg *out)
{
	auth_request(a, out, ORCH_AN2AN_HELLO);
	out->vmin = AUTH_VMIN;
	out->vmax = AUTH_VMAX;
	out->features = a->a_offer;
	out->origin = a->a_origin;
	memcpy(out->nonce, a->a_nonce, ORCH_NONCE_LEN);
	a->a_state = ORCH_AUTH_WAIT_HELLO;
	return ORCH_AUTH_MORE;
}

/* Acceptor: HELLO -> HELLO' with the version, the features, Ns and MACa. */
static int auth_accept_hello(struct orch_auth *a, const struct orch_msg *m, struct orch_msg *out)
{
	uint8_t lo = m->vmin > AUTH_VMIN ? m->vmin : AUTH_VMIN;
	uint8_t hi = m->vmax < AUTH_VMAX ? m->vmax : AUTH_VMAX;

	a->a_peer_vmin = m->vmin;
	a->a_peer_vmax = m->vmax;
	if (lo > hi) {
		auth_reply(out, ORCH_AN2AN_HELLO, m->reqid, -EPROTONOSUPPORT);
		return -EPROTONOSUPPORT;
	}
	a->a_version = hi;
	a->a_peer_origin = m->origin;
	a->a_features = (m->features & a->a_offer & ORCH_FEAT_BITS) |
			(a->a_offer & ~ORCH_FEAT_BITS);
	memcpy(a->a_peer_nonce, m->nonce, ORCH_NONCE_LEN);
	auth_reply(out, ORCH_AN2AN_HELLO, m->reqid, 0);
	out->vmin = out->vmax = a->a_version;
	out->features = a->a_features;
	memcpy(out->nonce, a->a_nonce, ORCH_NONCE_LEN);
	orch_auth_mac(a->a_key, true, a->a_peer_nonce, a->a_nonce, out->mac);
	a->a_state = ORCH_AUTH_WAIT_AUTH;
	return ORCH_AUTH_MORE;
}

/* Acceptor: AUTH -> AUTH', OK if MACc proves the key over our nonce. */
static int auth_accept_auth(struct orch_auth *a, const struct orch_msg *m, struct orch_msg *out)
{
	uint8_t mac[ORCH_MAC_LEN];

	orch_auth_mac(a->a_key, false, a->a_nonce, a->a_peer_nonce, mac);
	if (!orch_auth_mac_equal(mac, m->mac)) {
		auth_reply(out, ORCH_AN2AN_AUTH, m->reqid, -EACCES);
		return -EKEYREJECTED;
	}
	auth_reply(out, ORCH_AN2AN_AUTH, m->reqid, 0);
	a->a_state = ORCH_AUTH_DONE;
	return 0;
}

/*
 * Connector: HELLO' -> AUTH with MACc, once MACa proved the acceptor holds
 * our key over our nonce.
 */
static int auth_connect_hello(struct orch_auth *a, const struct orch_msg *m, struct orch_msg *out)
{
	uint8_t mac[ORCH_MAC_LEN];

	if (m->status)
		return m->status;
	a->a_version = m->vmin;
	if (m->vmin < AUTH_VMIN || m->vmin > AUTH_VMAX)
		return -EPROTONOSUPPORT;
	memcpy(a->a_peer_nonce, m->nonce, ORCH_NONCE_LEN);
	orch_auth_mac(a->a_key, true, a->a_nonce, a->a_peer_nonce, mac);
	if (!orch_auth_mac_equal(mac, m->mac)) {
		/* Tell it, so it logs us too: a zero MAC, which discloses nothing. */
		auth_request(a, out, ORCH_AN2AN_AUTH);
		return -EKEYREJECTED;
	}
	a->a_peer_features = m->features;
	a->a_features = m->features & a->a_offer & ORCH_FEAT_BITS;
	auth_request(a, out, ORCH_AN2AN_AUTH);
	orch_auth_mac(a->a_key, false, a->a_peer_nonce, a->a_nonce, out->mac);
	a->a_state = ORCH_AUTH_WAIT_AUTH;
	return ORCH_AUTH_MORE;
}

/* Connector: AUTH' says whether the acceptor took our MAC. */
static int auth_connect_auth(struct orch_auth *a, const struct orch_msg *m)
{
	if (m->status)
		return -EACCES;
	a->a_state = ORCH_AUTH_DONE;
	return 0;
}

int orch_auth_step(struct orch_auth *a, const struct orch_frame_hdr *h, const uint8_t *payload,
		   struct orch_msg *out)
{
	bool acceptor = a->a_role == ORCH_AUTH_ACCEPTOR;
	struct orch_msg m;
	int rc;

	*out = (struct orch_msg){ 0 };
	if (a->a_error || a->a_state == ORCH_AUTH_DONE)
		return -EPROTO;
	if (a->a_state == ORCH_AUTH_START)
		rc = h ? -EPROTO : auth_connect(a, out);
	else if (!h || auth_decode(a, h, payload, &m))
		rc = -EPROTO;
	else if (a->a_state == ORCH_AUTH_WAIT_HELLO)
		rc = acceptor ? auth_accept_hello(a, &m, out) : auth_connect_hello(a, &m, out);
	else
		rc = acceptor ? auth_accept_auth(a, &m, out) : auth_connect_auth(a, &m);
	if (rc < 0)
		a->a_error = rc;
	return rc;
}
