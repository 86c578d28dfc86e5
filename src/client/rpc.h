/*
 * liborchard's transport: one TCP connection per server, authenticated with
 * the cluster key (net/auth.h), many requests in flight on each, replies
 * matched by request id.  Every call has a deadline (cfg->op_timeout_ms): a
 * dead or unreachable server gives -ETIMEDOUT or -EIO, never a hang.  A broken
 * connection fails the calls in flight on it (-EIO) and is re-established by
 * the next call, so the client recovers by itself when the server returns.
 *
 * Sick servers: a server that lets a call's whole deadline pass without
 * sending anything (a cut link, a frozen process), or with our bytes
 * still unacknowledged by its host (a cut link), is sick; its calls then
 * fail at once with -ETIMEDOUT, but for one at a time, at most every
 * 250 ms, that probes it (reconnects with a deadline of 500 ms).  A
 * connect or any frame from it makes it well (docs/mount.md, "Failures").
 *
 * Replica groups (a config with replicas > 1): a server index names a
 * group, and its connection goes to one member at a time, the one that
 * leads as far as the client knows.  orch_client_call follows a member's
 * NOTLEADER to the leader it names (or the next member, after a pause,
 * while none is known), skips members it cannot reach or that stay silent
 * 2.5 s, and numbers the requests that change a namespace so that one
 * sent again after its leader died is done once (docs/DESIGN.md, "Replica
 * groups of several members").  orch_client_send/wait number nothing: a
 * request that changes no namespace (a read, a write, an fsync) is kept,
 * encoded with its data, and a wait whose try failed that way sends it
 * again through orch_client_call's loop; one that changes a namespace
 * fails as it would on a single server.
 *
 * Connecting races fresh SYNs every 300 ms (at most four at once) rather
 * than wait for TCP's 1 s SYN retransmission: a lossy or just-healed link
 * connects within a round trip of a SYN getting through.
 *
 * Threads: every function may be called from any thread concurrently.  The
 * library starts no threads: callers waiting for replies take turns reading
 * each connection.  No lock is held while waiting for a reply.
 */
#ifndef ORCH_CLIENT_RPC_H
#define ORCH_CLIENT_RPC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "common/cfg.h"
#include "proto/msg.h"

struct orch_client;
struct orch_call;

/*
 * Creates a client for the cluster in @cfg (copied; cfg->key must already be
 * loaded).  Connects lazily.  Returns 0 or -ENOMEM.
 */
int orch_client_create(const struct orch_cfg *cfg, struct orch_client **out);

/* Closes connections.  Calls in flight must have finished. */
void orch_client_destroy(struct orch_client *cl);

/* The configuration the client was made with. */
const struct orch_cfg *orch_client_cfg(const struct orch_client *cl);

/* Changes the per-call deadline (milliseconds, > 0). */
void orch_client_set_timeout(struct orch_client *cl, uint32_t op_timeout_ms);

/*
 * A decoded reply.  m's strings, data and dirents stay valid until
 * orch_reply_release().
 */
struct orch_reply {
	struct orch_msg m;
	uint8_t *frame; /* owned */
	/*
	 * With a push handler (below): the reply's place among the frames of
	 * its server, pushes included; 0 if its connection has no leases.
	 * Set for a status-only reply too.
	 */
	uint64_t stamp;
	/*
	 * The generation of the connection the request went on (counts the
	 * connects to its server; see orch_client_conn_gen), also when the
	 * call failed after it was sent; 0 if it was never sent.
	 */
	uint64_t gen;
	/*
	 * Its connection broke after the request was sent: the call failed
	 * with -EIO, or timed out on a server so silent that the connection
	 * was closed (-ETIMEDOUT).
	 */
	bool broke;
};

/* Frees a reply.  Accepts a zeroed one; the reply is zeroed after. */
void orch_reply_release(struct orch_reply *r);

/*
 * Sends @req (type and fields set; reqid and flags are filled in) to server
 * @server and waits for its reply.  Returns 0 with *@rep filled (the caller
 * releases it), or -errno: the reply's status if it is not OK (nothing to
 * release), -ETIMEDOUT at the deadline, -EIO if the connection broke,
 * -EHOSTDOWN if the server cannot be reached, -EKEYREJECTED if it holds
 * another cluster key (orch_client_key_mismatch() names it), -EACCES if it
 * refused our proof of the key, -EINVAL for a bad server index or an
 * unencodable request.
 */
int orch_client_call(struct orch_client *cl, unsigned int server,
		     const struct orch_msg *req, struct orch_reply *rep);
/*
 * The same, given up after @timeout_ms if that is sooner than the
 * client's deadline (0: the client's), even on a member whose host still
 * acknowledges: for requests whose answer is worth nothing later (a
 * mount's vouch).
 */
int orch_client_call_within(struct orch_client *cl, unsigned int server,
			    const struct orch_msg *req, uint32_t timeout_ms,
			    struct orch_reply *rep);

/*
 * The same in two halves, to keep several requests in flight (striped I/O):
 * send returns 0 and a call object that orch_client_wait() must be given
 * exactly once (it frees it); or -errno, and then nothing to wait for.
 * @req and what it points to may be reused as soon as send returns.
 */
int orch_client_send(struct orch_client *cl, unsigned int server,
		     const struct orch_msg *req, struct orch_call **out);
int orch_client_wait(struct orch_client *cl, struct orch_call *call,
		     struct orch_reply *rep);

/*
 * orch_client_send for a request whose last field is data (a WRITE), the
 * data given as @n buffers sent one after the other without being copied
 * (req->data is ignored): at most ORCH_CLIENT_IOV_MAX buffers and
 * ORCH_IO_MAX bytes in all, else -EINVAL.
 */
#define ORCH_CLIENT_IOV_MAX 64
int orch_client_send_iov(struct orch_client *cl, unsigned int server, const struct orch_msg *req,
			 const struct iovec *data, int n, struct orch_call **out);

/*
 * Leases (docs/DESIGN.md, "Leases and invalidations").  With a push
 * handler set (before the first call), every connection asks its server
 * for leases; @fn then gets each SV2CL_* push, with its stamp, on the
 * thread reading that connection and with its lock held (it must not call
 * the client), in the order of the stream: a reply with a lower stamp was
 * read before the push.  @m NULL means "forget what this server told you,
 * up to @stamp": the connection came up or went down, or a push could not
 * be read.  @gen is the connection's generation (orch_client_conn_gen).
 *
 * With @acks, connections also ask for acknowledged pushes
 * (ORCH_FEAT_ACKS): a push with @seq > 0 holds the reply to the change
 * that caused it until the handler's side calls orch_client_ack() with
 * @gen and @seq or more, or the lease runs out (docs/DESIGN.md,
 * "Acknowledged invalidation").  Pushes of one connection are numbered
 * 1, 2, ... in stream order; an ack covers every push up to its number.
 */
typedef void (*orch_push_fn)(void *arg, unsigned int server, uint64_t stamp,
			     const struct orch_msg *m, uint64_t gen, uint64_t seq);
void orch_client_set_push_handler(struct orch_client *cl, orch_push_fn fn, void *arg,
				  bool acks);
/*
 * Tells @server that every push up to @seq on connection generation @gen
 * is done.  One frame, no reply; any thread.  0, -EIO if that connection
 * is gone (its pushes need no answer then), or -ETIMEDOUT.
 */
int orch_client_ack(struct orch_client *cl, unsigned int server, uint64_t gen, uint64_t seq);

/*
 * For tests (tests/unit/t_rpc.c): @fn replaces the TCP connect to a server,
 * so a fake server can sit at the other end of a socketpair.  Set before
 * the first call.  @fn returns a connected, blocking stream socket, which
 * the client owns from then on, or -errno (the call fails with it).  It is
 * called from the thread making a call, for one server at a time.
 */
typedef int (*orch_dial_fn)(void *arg, unsigned int server);
void orch_client_set_dial(struct orch_client *cl, orch_dial_fn fn, void *arg);

/*
 * Reads, without waiting, the frames that have arrived from @server when
 * no other thread is reading them (pushes go to the handler), so a cache
 * hit sees every invalidation that reached this host.  Returns true if
 * the connection is up and has leases.
 */
bool orch_client_poll(struct orch_client *cl, unsigned int server);
/*
 * Waits up to @timeout_ms for frames on the connections nobody is reading
 * (no call in flight) and reads them as orch_client_poll does, so pushes
 * reach the handler while this client makes no calls.  Returns how many
 * connections it read, 0 on timeout, or -errno.  One thread at a time.
 */
int orch_client_wait_pushes(struct orch_client *cl, int timeout_ms);

/*
 * The first server (in config order) whose last handshake proved that it
 * holds another cluster key than ours, or -1: what a caller that got
 * -EKEYREJECTED names in its message.  Cleared by a handshake that succeeds.
 */
int orch_client_key_mismatch(const struct orch_client *cl);

/*
 * The generation of the connection to @server if it is up (every connect
 * makes a new one: what that server keeps per connection, such as writer
 * registrations, is gone when it changes), else 0.
 */
uint64_t orch_client_conn_gen(struct orch_client *cl, unsigned int server);

/*
 * The generation of the connection @call (from orch_client_send, not
 * waited for yet) went out on; 0 if it could not be sent yet, and goes at
 * the wait (a replica group between leaders).
 */
uint64_t orch_client_call_gen(const struct orch_call *call);

/*
 * Per-type request counts sent by this client since creation (for
 * `orchard stats` on a mount).  Fills @counts indexed like orch_msg_types().
 */
void orch_client_request_counts(struct orch_client *cl, uint64_t *counts, size_t n);

#endif
