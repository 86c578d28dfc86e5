/*
 * Mutual authentication from the cluster key (docs/SPEC-wire.md, "Handshake"):
 *
 *   connector -> acceptor  HELLO  vmin vmax features Nc origin
 *   acceptor  -> connector HELLO' version features Ns MACa
 *                          MACa = HMAC-SHA256(key, "orchard-acceptor" Nc Ns)
 *   connector -> acceptor  AUTH   MACc = HMAC-SHA256(key, "orchard-connector" Ns Nc)
 *   acceptor  -> connector AUTH'  status
 *
 * Each side proves it holds the key over the other side's fresh nonce, so
 * neither a replay nor a reflection works.  No request is served before the
 * acceptor has checked MACc.
 *
 * The exchange is written once, as a step function without I/O
 * (orch_auth_step): it takes the frame a transport read and gives back the
 * message to send.  Both transports run it, the event loop's (net/conn.c,
 * in either role) and liborchard's blocking one (client/rpc.c, connector),
 * so a change to HELLO is made here only.  It opens no socket, reads no
 * clock, allocates nothing and logs nothing: the transport says what
 * happened in its own words (it knows the peer's name).  Nonces come from
 * the caller (orch_auth_nonce), so tests can replay an exchange exactly.
 * Any thread; one struct orch_auth is used by one thread at a time.
 */
#ifndef ORCH_NET_AUTH_H
#define ORCH_NET_AUTH_H

#include <stdbool.h>
#include <stdint.h>

#include "common/cfg.h"
#include "proto/msg.h"

/*
 * No handshake message is longer (HELLO is 82 bytes).  A transport that
 * reads a handshake frame into a buffer of its own may refuse a longer one
 * from its header, before reading it.
 */
#define ORCH_AUTH_MAXFRAME 4096

/* Fills @out with random bytes from OpenSSL.  0 or -EIO. */
int orch_auth_nonce(uint8_t out[ORCH_NONCE_LEN]);

/* MAC a side sends: @acceptor picks the label; @first/@second are nonces. */
void orch_auth_mac(const uint8_t key[ORCH_KEY_LEN], bool acceptor,
		   const uint8_t first[ORCH_NONCE_LEN], const uint8_t second[ORCH_NONCE_LEN],
		   uint8_t out[ORCH_MAC_LEN]);

/* Constant-time comparison of two MACs; a zero @a never matches. */
bool orch_auth_mac_equal(const uint8_t a[ORCH_MAC_LEN], const uint8_t b[ORCH_MAC_LEN]);

/* --- The exchange, one step at a time ------------------------------------------ */

enum orch_auth_role {
	ORCH_AUTH_CONNECTOR,    /* opened the connection: sends HELLO */
	ORCH_AUTH_ACCEPTOR,     /* accepted it: answers */
};

/* What the handshake waits for; where it stopped, once a_error is set. */
enum orch_auth_state {
	ORCH_AUTH_START,        /* connector: nothing sent yet */
	ORCH_AUTH_WAIT_HELLO,   /* acceptor: HELLO; connector: the answer to it */
	ORCH_AUTH_WAIT_AUTH,    /* acceptor: AUTH; connector: the answer to it */
	ORCH_AUTH_DONE,         /* both sides proved they hold the key */
};

/* orch_auth_step: the handshake goes on (0 means it is done). */
#define ORCH_AUTH_MORE 1

struct orch_auth {
	enum orch_auth_role a_role;
	enum orch_auth_state a_state;
	int a_error;                          /* the step's error that ended it, or 0 */
	const uint8_t *a_key;                 /* cluster key, borrowed */
	uint32_t a_origin;                    /* connector: ours, sent in HELLO */
	/*
	 * Connector: the features it asks for.  Acceptor: the ORCH_FEAT_BITS
	 * it grants when asked, and above them its parameters, always sent.
	 */
	uint64_t a_offer;
	uint64_t a_reqid;                     /* connector: its request in flight */
	uint8_t a_nonce[ORCH_NONCE_LEN];      /* ours */
	uint8_t a_peer_nonce[ORCH_NONCE_LEN]; /* theirs */
	/* What the peer said, once the step that read it returned: */
	uint8_t a_peer_vmin, a_peer_vmax;     /* acceptor: the versions HELLO offered */
	uint8_t a_version;                    /* the version the acceptor chose (0: none) */
	uint32_t a_peer_origin;               /* acceptor: the connector's origin */
	uint64_t a_peer_features;             /* connector: as the acceptor sent them */
	/*
	 * Granted.  Acceptor: what it sends, (asked & offered & ORCH_FEAT_BITS)
	 * and its parameters.  Connector: the ORCH_FEAT_BITS it asked for that
	 * the acceptor granted.  Valid at ORCH_AUTH_DONE.
	 */
	uint64_t a_features;
};

/*
 * Starts a handshake as @role, proving @key (borrowed until the handshake
 * ends) over our fresh @nonce.  A connector announces @origin and asks for
 * @features; an acceptor ignores @origin and offers @features (a_offer).
 */
void orch_auth_init(struct orch_auth *a, enum orch_auth_role role, const uint8_t *key,
		    const uint8_t nonce[ORCH_NONCE_LEN], uint32_t origin, uint64_t features);

/*
 * Feeds the handshake the frame @h with @payload (valid during the call)
 * that the transport read; a connector's first step takes none (NULL),
 * and makes HELLO.  *@out gets the message to send next, or type 0 for
 * none: whatever the result, the transport sends it first (it may be a
 * refusal that tells the peer why).  Returns:
 *   ORCH_AUTH_MORE    send *@out and feed the peer's answer;
 *   0                 authenticated (an acceptor sends AUTH' first);
 *   -EPROTO           not the message expected now: another type or
 *                     direction, a reply to another reqid, a payload that
 *                     does not decode, a step after the end;
 *   -EPROTONOSUPPORT  acceptor: no version in common (*@out says so);
 *                     connector: the acceptor chose a version we do not
 *                     speak (a_version), or refused HELLO for that reason;
 *   -EKEYREJECTED     the peer's MAC is wrong: it holds another key.
 *                     Acceptor: *@out refuses its AUTH.  Connector: *@out
 *                     is an AUTH whose MAC is 32 zero bytes, which never
 *                     verifies and discloses no MAC over the acceptor's
 *                     nonce, so the acceptor logs the failure too;
 *   -EACCES           connector: the acceptor refused our MAC after it had
 *                     proved its own (so no key mismatch);
 *   another -errno    connector: the acceptor refused HELLO with it.
 * After an error every step returns -EPROTO; a_state says where it stopped.
 * A connector's request leaves with reqid 0 unless the transport numbers it
 * (orch_auth_set_reqid); an acceptor answers with the request's reqid.
 */
int orch_auth_step(struct orch_auth *a, const struct orch_frame_hdr *h, const uint8_t *payload,
		   struct orch_msg *out);

/*
 * Connector: the request in @out that the last step returned leaves with
 * @reqid (the transport's own numbering); its answer must carry it.
 */
void orch_auth_set_reqid(struct orch_auth *a, struct orch_msg *out, uint64_t reqid);

/*
 * The type of the message the handshake waits for (or waited for, where it
 * failed), or 0 at the start and the end.
 */
uint16_t orch_auth_want(const struct orch_auth *a);

#endif
