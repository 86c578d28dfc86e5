/*
 * Writes the seed corpus of fuzz_auth: exchanges between a connector and
 * an acceptor run with the step function itself (key and nonces of
 * fuzz_auth.c), each side's input saved in the target's format (role byte,
 * then the frames that side read), whole and broken: a wrong MAC, versions
 * we do not speak, a refusal, a message out of order.
 *
 *   gen-auth-corpus DIR
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "net/auth.h"
#include "proto/msg.h"

#define GEN_ACCEPTOR 1
#define GEN_LEASES 2

static uint8_t key[ORCH_KEY_LEN], nc[ORCH_NONCE_LEN], ns[ORCH_NONCE_LEN];

/* One seed being built: the role byte, then frames. */
struct seed {
	struct orch_buf b;
};

static void seed_start(struct seed *s, uint8_t role)
{
	orch_buf_init(&s->b, 1u << 16);
	orch_buf_append(&s->b, &role, 1);
}

static void seed_add(struct seed *s, const struct orch_msg *m)
{
	orch_msg_encode(&s->b, m);
}

static int seed_write(struct seed *s, const char *dir, const char *name)
{
	char path[4096];
	FILE *f;
	int error = 0;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || s->b.b_err || fwrite(s->b.b_data, 1, s->b.b_len, f) != s->b.b_len)
		error = -EIO;
	if (f && fclose(f))
		error = -EIO;
	if (error)
		fprintf(stderr, "gen-auth-corpus: cannot write '%s'\n", path);
	orch_buf_fini(&s->b);
	return error;
}

/* The four messages of an exchange that succeeds, each as its reader gets it. */
struct exchange {
	struct orch_msg hello, hello_r, auth, auth_r;
};

static int exchange_run(struct exchange *x, uint64_t ask)
{
	struct orch_auth c, a;
	struct orch_buf b;
	struct orch_frame_hdr h;
	struct orch_msg *msgs[] = { &x->hello, &x->hello_r, &x->auth, &x->auth_r };
	int rc = 0;

	orch_auth_init(&c, ORCH_AUTH_CONNECTOR, key, nc, ORCH_ORIGIN_CLIENT, ask);
	orch_auth_init(&a, ORCH_AUTH_ACCEPTOR, key, ns, ORCH_ORIGIN_CLIENT,
		       ORCH_FEAT_LEASES | (uint64_t)1000 << 32);
	orch_buf_init(&b, 1u << 16);
	if (orch_auth_step(&c, NULL, NULL, &x->hello) != ORCH_AUTH_MORE)
		rc = -1;
	/* Each message is stepped into the other side through its bytes. */
	for (int i = 0; i < 3 && !rc; i++) {
		struct orch_auth *to = i % 2 ? &c : &a;

		orch_buf_reset(&b);
		if (orch_msg_encode(&b, msgs[i])) {
			rc = -1;
			break;
		}
		orch_frame_hdr_decode(b.b_data, &h);
		if (orch_auth_step(to, &h, b.b_data + ORCH_FRAME_HDR, msgs[i + 1]) < 0)
			rc = -1;
	}
	orch_buf_fini(&b);
	return rc;
}

int main(int argc, char **argv)
{
	struct exchange x;
	struct orch_msg m;
	struct seed s;
	int error = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: gen-auth-corpus DIR\n");
		return 2;
	}
	memset(key, 0x5a, sizeof(key));
	memset(nc, 0x11, sizeof(nc));
	memset(ns, 0x22, sizeof(ns));
	if (exchange_run(&x, ORCH_FEAT_LEASES)) {
		fprintf(stderr, "gen-auth-corpus: the exchange failed\n");
		return 1;
	}

	/* Acceptor: the whole exchange, a wrong MAC, AUTH first, other versions. */
	seed_start(&s, GEN_ACCEPTOR);
	seed_add(&s, &x.hello);
	seed_add(&s, &x.auth);
	seed_add(&s, &x.auth); /* after the end */
	error |= seed_write(&s, argv[1], "acceptor-ok");
	seed_start(&s, GEN_ACCEPTOR);
	seed_add(&s, &x.hello);
	m = x.auth;
	memset(m.mac, 0, sizeof(m.mac));
	seed_add(&s, &m);
	error |= seed_write(&s, argv[1], "acceptor-zero-mac");
	seed_start(&s, GEN_ACCEPTOR);
	seed_add(&s, &x.auth);
	seed_add(&s, &x.hello);
	error |= seed_write(&s, argv[1], "acceptor-auth-first");
	seed_start(&s, GEN_ACCEPTOR);
	m = x.hello;
	m.vmin = ORCH_PROTO_VERSION + 1;
	m.vmax = ORCH_PROTO_VERSION + 2;
	seed_add(&s, &m);
	error |= seed_write(&s, argv[1], "acceptor-versions");

	/* Connector: the whole exchange, a refusal, a wrong MAC, AUTH' refused. */
	seed_start(&s, GEN_LEASES);
	seed_add(&s, &x.hello_r);
	seed_add(&s, &x.auth_r);
	seed_add(&s, &x.hello_r); /* after the end */
	error |= seed_write(&s, argv[1], "connector-ok");
	seed_start(&s, 0);
	m = x.hello_r;
	m.status = -EPROTONOSUPPORT;
	seed_add(&s, &m);
	error |= seed_write(&s, argv[1], "connector-refused");
	seed_start(&s, 0);
	m = x.hello_r;
	m.mac[0] ^= 1;
	seed_add(&s, &m);
	error |= seed_write(&s, argv[1], "connector-wrong-mac");
	seed_start(&s, 0);
	seed_add(&s, &x.hello_r);
	m = x.auth_r;
	m.status = -EACCES;
	seed_add(&s, &m);
	error |= seed_write(&s, argv[1], "connector-auth-refused");
	return error ? 1 : 0;
}
