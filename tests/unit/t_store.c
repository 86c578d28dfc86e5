/*
 * The extent store (store/store.h, docs/SPEC-store.md): a seeded random op
 * sequence checked against an in-memory model with the checker run after
 * every step, the edges of the contract (holes, ends, idempotent delete,
 * limits, mkfs and open refusals, concurrent sync, queued ops), and the
 * invariants of docs/SPEC-store.md that need a test of their own: I19 and
 * I22 (kill points and a simulated power cut in a forked child), I20
 * (snapshots and block reuse), I21 (chunked work resumed at open), I26
 * (delete frees everything) and I30 (key encodings sort as tuples).
 *
 * ORCH_TEST_SEED=<n> replays a seeded run (the model test and the crash
 * tests print theirs on failure); ORCH_TEST_STEPS=<n> changes the model
 * test's length; ORCH_TEST_KEEP=1 keeps the stores made (in /tmp);
 * ORCH_TEST_IGNORE_RULES=I3,... lets the checker's findings of those rules
 * pass (to look past a known bug, never in CI).
 */
#define _XOPEN_SOURCE 700
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "common/crc32c.h"
#include "common/pcut.h"
#include "common/util.h"
#include "store/fsmap.h"
#include "store/store.h"
#include "store/store_i.h" /* orch_rec_key_u64 (I30) */
#include "unit/store_fx.h"
#include "unit/test.h"

#define BLK ORCH_STORE_BLOCK
#define ORCH_MIN_U64(a, b) ((a) < (b) ? (a) : (b))
#define KiB 1024ull
#define MiB (1024ull * 1024)

/* Small geometry: many AGs and the maxext cap in play. */
static const struct orch_store_geom geom_small = {
	.size = 8 * MiB, .ag_blocks = 64, .maxext = 16,
};
/* The model test's: a short last AG (100 of 128 blocks) too. */
static const struct orch_store_geom geom_model = {
	.size = 16 * MiB + 100 * BLK, .ag_blocks = 128, .maxext = 16,
};
static const struct orch_store_geom geom_default = { 0 };

/* --- Fixture: a fresh store in a temporary directory ---------------------- */

struct fx {
	char dir[FX_DIR_MAX];
	struct orch_store *st;
};

static int fx_setup(struct fx *fx, const struct orch_store_geom *g)
{
	int rc;

	fx->st = NULL;
	if (fx_mkdir(fx->dir, sizeof(fx->dir), "t_store")) {
		perror("mkdtemp");
		return -1;
	}
	if (!g)
		return 0;
	rc = fx_mkstore(fx->dir, g, &fx->st);
	if (rc)
		fprintf(stderr, "store setup: %s\n", strerror(-rc));
	return rc;
}

static void fx_teardown(struct fx *fx)
{
	fx_close(&fx->st);
	fx_rmdir(fx->dir, true);
}

/* A case with a fixture; @geom_: mkfs and open the store first (NULL: not). */
#define STORE_TEST(name_, geom_)                                               \
	static void body_##name_(struct fx *fx);                               \
	ORCH_TEST(name_)                                                       \
	{                                                                      \
		struct fx fx;                                                  \
		if (fx_setup(&fx, (geom_))) {                                  \
			orch_test_failed = 1;                                  \
			fx_teardown(&fx);                                      \
			return;                                                \
		}                                                              \
		body_##name_(&fx);                                             \
		fx_teardown(&fx);                                              \
	}                                                                      \
	static void body_##name_(struct fx *fx)

static int reopen(struct fx *fx)
{
	return fx_reopen(fx->dir, &fx->st);
}

static uint64_t nobjects(struct fx *fx)
{
	uint64_t n = UINT64_MAX;

	if (orch_store_statfs(fx->st, NULL, NULL, NULL, &n))
		return UINT64_MAX;
	return n;
}

static bool all_zero(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

/* --- Checker -------------------------------------------------------------- */

/*
 * ORCH_TEST_IGNORE_RULES="I3,I7" leaves findings of those rules out (to
 * look past a known bug while another is chased); they are still printed.
 */
static bool rule_ignored(const char *rule)
{
	const char *env = getenv("ORCH_TEST_IGNORE_RULES");
	size_t n = strlen(rule);

	for (const char *p = env; p && *p; p += strcspn(p, ",") + (p[strcspn(p, ",")] != 0))
		if (strncmp(p, rule, n) == 0 && (p[n] == ',' || p[n] == '\0'))
			return true;
	return false;
}

struct fctx {
	const char *name;
	long counted;
};

static void print_finding(void *arg, const struct orch_store_finding *f)
{
	struct fctx *c = arg;
	bool ign = rule_ignored(f->rule);

	fprintf(stderr, "  %s: finding %s [%s] ag=%lld block=%lld handle=%016llx: %s%s\n",
		c->name, f->rule, f->structure, (long long)f->ag,
		(long long)f->block, (unsigned long long)f->handle, f->detail,
		ign ? " (ignored)" : "");
	if (!ign)
		c->counted++;
}

/* Runs the checker; prints findings; true if it ran and found nothing. */
static bool store_clean(struct orch_store *st, bool data, const char *ctx)
{
	struct fctx c = { ctx, 0 };
	long n = orch_store_check(st, data, print_finding, &c);

	if (n < 0)
		fprintf(stderr, "  %s: orch_store_check(data=%d): %s\n", ctx, data,
			strerror((int)-n));
	else if (n > 0)
		fprintf(stderr, "  %s: orch_store_check(data=%d): %ld findings\n",
			ctx, data, n);
	return n >= 0 && c.counted == 0;
}

/* Reopens the store after a crash and checks it whole: false (said why) if not. */
static bool fx_reopen_clean(struct fx *fx, const char *ctx)
{
	int rc = orch_store_open(fx->dir, &fx->st);

	if (rc) {
		fprintf(stderr, "%s: reopen failed: %s\n", ctx, strerror(-rc));
		return false;
	}
	return store_clean(fx->st, true, ctx);
}

/* --- Random numbers and data ---------------------------------------------- */

/* @n, or a tenth of it under valgrind. */
static int scaled(int n)
{
	return fx_slow_env() ? (n + 9) / 10 : n;
}

static uint64_t test_seed(void)
{
	uint64_t s = env_seed((uint64_t)time(NULL) ^ (uint64_t)getpid());

	return s ? s : 1;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Deterministic bytes for (seed, tag): what a write of op @tag writes. */
static void fill(unsigned char *p, size_t len, uint64_t seed, uint64_t tag)
{
	uint64_t s = seed * 1000003u + tag * 7919u + 1, v = 0;

	for (size_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			v = splitmix(&s);
		p[i] = (unsigned char)(v >> (8 * (i % 8)));
	}
}

/* --- Model-based random test ----------------------------------------------- */

#define M_NOBJ 4
#define M_MAX (1024 * 1024)       /* largest offset the ops reach */
#define M_WMAX (200 * 1024)       /* largest write */
#define M_PHASE 500               /* steps between reopens */

struct mobj {
	uint64_t h;
	bool exists;
	uint64_t size;
	unsigned char *data; /* M_MAX bytes; zero past size */
};

struct model {
	struct fx *fx;
	struct mobj objs[M_NOBJ];
	unsigned char *buf;   /* M_MAX + 2 blocks */
	unsigned char *wbuf;  /* M_WMAX */
	bool in_burst;        /* generating a burst's ops */
	uint64_t created, deleted;
	int step;
	long enospc;
};

#define MCHECK(m, e)                                                           \
	do {                                                                   \
		if (!(e)) {                                                    \
			fprintf(stderr, "%s:%d: step %d: check failed: %s\n",  \
				__FILE__, __LINE__, (m)->step, #e);            \
			return false;                                          \
		}                                                              \
	} while (0)

#define MCHECK_OK(m, e)                                                        \
	do {                                                                   \
		int rc_ = (e);                                                 \
		if (rc_) {                                                     \
			fprintf(stderr, "%s:%d: step %d: %s: %s\n", __FILE__,  \
				__LINE__, (m)->step, #e, strerror(-rc_));      \
			return false;                                          \
		}                                                              \
	} while (0)

/* Reads [off, off+len) of @o and compares with the model. */
static bool model_read_check(struct model *m, struct mobj *o, uint64_t off,
			     size_t len)
{
	unsigned char *buf = m->buf;
	size_t got = 12345, want;
	int rc;

	memset(buf, 0xa5, len + 1);
	rc = orch_store_read(m->fx->st, o->h, off, buf, len, &got);
	if (rc) {
		fprintf(stderr, "step %d: read h=%016llx off=%llu len=%zu: %s\n",
			m->step, (unsigned long long)o->h, (unsigned long long)off,
			len, strerror(-rc));
		return false;
	}
	want = off < o->size ? (size_t)(o->size - off < len ? o->size - off : len) : 0;
	if (got != want) {
		fprintf(stderr, "step %d: read h=%016llx off=%llu len=%zu: got=%zu want=%zu\n",
			m->step, (unsigned long long)o->h, (unsigned long long)off,
			len, got, want);
		return false;
	}
	if (want && memcmp(buf, o->data + off, want)) {
		size_t i = 0;

		while (buf[i] == o->data[off + i])
			i++;
		fprintf(stderr, "step %d: read h=%016llx off=%llu len=%zu: data differs "
			"at byte %llu (got %02x want %02x)\n", m->step,
			(unsigned long long)o->h, (unsigned long long)off, len,
			(unsigned long long)(off + i), buf[i], o->data[off + i]);
		return false;
	}
	for (size_t i = got; i <= len; i++) {
		if (buf[i] != 0xa5) {
			fprintf(stderr, "step %d: read wrote past got at %zu\n", m->step, i);
			return false;
		}
	}
	return true;
}

static bool model_read_all(struct model *m, struct mobj *o)
{
	return model_read_check(m, o, 0, M_MAX + BLK);
}

static bool model_check_all(struct model *m)
{
	uint64_t n = 0;

	for (int i = 0; i < M_NOBJ; i++) {
		if (!model_read_all(m, &m->objs[i]))
			return false;
		n += m->objs[i].exists;
	}
	MCHECK(m, nobjects(m->fx) == n);
	return true;
}

/* One generated mutation. */
struct mop {
	enum orch_store_op_type type;
	struct mobj *o;
	uint64_t off, len;
	unsigned char *buf;   /* writes: M_WMAX bytes */
	struct mobj *src;     /* clone and dedupe: the source... */
	uint64_t off2;        /* ...and the offset in it */
};

static void model_gen_write(struct mop *op)
{
	uint64_t len, off;

	switch (rng_below(10)) {
	case 0: case 1: case 2: case 3: case 4:
		len = 1 + rng_below(8192);
		break;
	case 5: case 6: case 7:
		len = 1 + rng_below(65536);
		break;
	default:
		len = 1 + rng_below(M_WMAX);
		break;
	}
	off = rng_below(M_MAX - len + 1);
	if (rng_below(4) == 0) { /* block aligned, like a page cache */
		off &= ~(uint64_t)(BLK - 1);
		if (rng_below(2))
			len = (len + BLK - 1) & ~(uint64_t)(BLK - 1);
		if (off + len > M_MAX)
			len = M_MAX - off;
	}
	for (uint64_t i = 0; i < len; i++)
		op->buf[i] = (unsigned char)rng();
	if (rng_below(20) == 0)
		memset(op->buf, 0, len); /* zeros are data too */
	op->off = off;
	op->len = len;
}

/*
 * A clone or dedupe: block-aligned ranges inside the model, not
 * overlapping within one object; sometimes a clone up to the source's
 * unaligned end, where the destination ends too.
 */
static void model_gen_clone(struct model *m, struct mop *op)
{
	uint64_t nblk = M_MAX / BLK, n;

	op->src = &m->objs[rng_below(M_NOBJ)];
	n = 1 + rng_below(rng_below(4) ? 8 : nblk / 4);
	op->off2 = rng_below(nblk - n + 1) * BLK;
	op->off = rng_below(nblk - n + 1) * BLK;
	op->len = n * BLK;
	if (op->type == ORCH_STORE_OP_DEDUPE && rng_below(2)) {
		op->off = op->off2;  /* the same place in another object: often equal */
	}
	if (op->src == op->o && op->off < op->off2 + op->len && op->off2 < op->off + op->len)
		op->o = &m->objs[(op->o - m->objs + 1) % M_NOBJ];
	/* Not in a burst: the sizes may change before it runs. */
	if (op->type == ORCH_STORE_OP_CLONE && !m->in_burst && rng_below(5) == 0 &&
	    op->src->size > op->off2 && op->src->size % BLK && op->src != op->o) {
		uint64_t len = op->src->size - op->off2;

		if (op->off + len >= op->o->size && op->off + (len + BLK - 1) / BLK * BLK <= M_MAX)
			op->len = len;
	}
}

/* A random write, truncate, punch, delete, clone or dedupe of a random object. */
static void model_gen(struct model *m, struct mop *op, unsigned int kind)
{
	uint64_t n;

	op->o = &m->objs[rng_below(M_NOBJ)];
	op->src = NULL;
	op->off2 = 0;
	if (kind < 40) {
		op->type = ORCH_STORE_OP_WRITE;
		model_gen_write(op);
	} else if (kind < 52) {
		op->type = ORCH_STORE_OP_TRUNCATE;
		n = rng_below(3) ? rng_below(M_MAX + 1) : rng_below(3 * BLK);
		if (rng_below(10) == 0)
			n = 0;
		if (rng_below(8) == 0)
			n &= ~(uint64_t)(BLK - 1);
		op->off = n;
		op->len = 0;
	} else if (kind < 64) {
		op->type = ORCH_STORE_OP_PUNCH;
		op->off = rng_below(M_MAX + BLK);
		if (rng_below(4) == 0)
			op->off &= ~(uint64_t)(BLK - 1);
		op->len = rng_below(5) ? 1 + rng_below(rng_below(2) ? 16384 : M_WMAX)
				       : UINT64_MAX - op->off;
	} else if (kind < 68) {
		op->type = ORCH_STORE_OP_DELETE;
		op->off = op->len = 0;
	} else {
		op->type = kind < 74 ? ORCH_STORE_OP_CLONE : ORCH_STORE_OP_DEDUPE;
		model_gen_clone(m, op);
	}
}

/* The model's side of a mutation that succeeded. */
static void model_apply(struct model *m, const struct mop *op)
{
	struct mobj *o = op->o;
	uint64_t n;

	switch (op->type) {
	case ORCH_STORE_OP_WRITE:
		memcpy(o->data + op->off, op->buf, op->len);
		if (!o->exists)
			m->created++;
		o->exists = true;
		if (op->off + op->len > o->size)
			o->size = op->off + op->len;
		break;
	case ORCH_STORE_OP_TRUNCATE:
		if (op->off < o->size)
			memset(o->data + op->off, 0, o->size - op->off);
		if (op->off > 0 && !o->exists) {
			o->exists = true;
			m->created++;
		}
		if (o->exists)
			o->size = op->off;
		break;
	case ORCH_STORE_OP_PUNCH:
		if (op->off < o->size) {
			n = o->size - op->off < op->len ? o->size - op->off : op->len;
			memset(o->data + op->off, 0, n);
		}
		break;
	case ORCH_STORE_OP_DELETE:
		if (o->exists)
			m->deleted++;
		o->exists = false;
		memset(o->data, 0, o->size);
		o->size = 0;
		break;
	case ORCH_STORE_OP_CLONE:
		if (!op->src->exists && !o->exists)
			break;
		n = (op->len + BLK - 1) / BLK * BLK;   /* the last block goes whole */
		memmove(o->data + op->off, op->src->data + op->off2, n);
		if (!o->exists)
			m->created++;
		o->exists = true;
		if (op->off + op->len > o->size)
			o->size = op->off + op->len;
		break;
	case ORCH_STORE_OP_DEDUPE: /* equal bytes: nothing a reader sees changes */
	default:
		break;
	}
}

/* What the store must answer: a dedupe of unequal ranges is refused. */
static int model_expect(const struct mop *op)
{
	if (op->type != ORCH_STORE_OP_DEDUPE)
		return 0;
	return memcmp(op->o->data + op->off, op->src->data + op->off2, op->len) ? -EBADE : 0;
}

static int model_call(struct model *m, const struct mop *op)
{
	struct orch_store *st = m->fx->st;

	switch (op->type) {
	case ORCH_STORE_OP_WRITE:
		return orch_store_write(st, op->o->h, op->off, op->buf, op->len);
	case ORCH_STORE_OP_TRUNCATE:
		return orch_store_truncate(st, op->o->h, op->off);
	case ORCH_STORE_OP_PUNCH:
		return orch_store_punch(st, op->o->h, op->off, op->len);
	case ORCH_STORE_OP_CLONE:
		return orch_store_clone(st, op->src->h, op->off2, op->o->h, op->off, op->len);
	case ORCH_STORE_OP_DEDUPE: {
		uint64_t done = 1;
		int rc = orch_store_dedupe(st, op->src->h, op->off2, op->o->h, op->off, op->len,
					   &done);

		/* Shared: all, or the whole blocks inside both objects. */
		if (rc ? done != 0 : done > op->len || (done != op->len && done % BLK))
			return -EPROTO;
		return rc;
	}
	default:
		return orch_store_delete(st, op->o->h);
	}
}

/* A burst of queued ops (orch_store_submit): the writer batches them. */
#define M_BURST 8

struct burst {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int done;
	struct orch_store_op ops[M_BURST];
};

static void burst_done(struct orch_store_op *op)
{
	struct burst *b = op->arg;

	pthread_mutex_lock(&b->lock);
	b->done++;
	pthread_cond_broadcast(&b->cv);
	pthread_mutex_unlock(&b->lock);
}

static bool model_burst(struct model *m)
{
	static unsigned char bufs[M_BURST][M_WMAX];
	static struct burst b = { .lock = PTHREAD_MUTEX_INITIALIZER,
				  .cv = PTHREAD_COND_INITIALIZER };
	struct mop ops[M_BURST];
	int n = 2 + (int)rng_below(M_BURST - 1);

	b.done = 0;
	m->in_burst = true;
	for (int i = 0; i < n; i++) {
		ops[i].buf = bufs[i];
		model_gen(m, &ops[i], (unsigned int)rng_below(77));
		b.ops[i] = (struct orch_store_op){ .type = ops[i].type,
			.handle = ops[i].o->h, .off = ops[i].off, .len = ops[i].len,
			.buf = ops[i].buf, .done = burst_done, .arg = &b, .status = 1,
			.handle2 = ops[i].src ? ops[i].src->h : 0, .off2 = ops[i].off2 };
	}
	m->in_burst = false;
	for (int i = 0; i < n; i++)
		orch_store_submit(m->fx->st, &b.ops[i]);
	pthread_mutex_lock(&b.lock);
	while (b.done < n)
		pthread_cond_wait(&b.cv, &b.lock);
	pthread_mutex_unlock(&b.lock);
	for (int i = 0; i < n; i++) {
		if (b.ops[i].status == -ENOSPC) {
			m->enospc++; /* busy blocks; a failed op changed nothing */
			continue;
		}
		MCHECK(m, b.ops[i].status == model_expect(&ops[i]));
		model_apply(m, &ops[i]);
	}
	for (int i = 0; i < M_NOBJ; i++)
		if (!model_read_all(m, &m->objs[i]))
			return false;
	return true;
}

/*
 * The same bytes written to two places, then deduplicated: the store must
 * find them equal and share them.
 */
static bool model_dedupe_pair(struct model *m)
{
	struct mop a = { .buf = m->wbuf, .type = ORCH_STORE_OP_WRITE };
	struct mop b, d = { .type = ORCH_STORE_OP_DEDUPE };
	uint64_t n = 1 + rng_below(M_WMAX / BLK), done = 0;

	a.o = &m->objs[rng_below(M_NOBJ)];
	a.len = n * BLK;
	a.off = rng_below(M_MAX / BLK - n + 1) * BLK;
	for (uint64_t i = 0; i < a.len; i++)
		a.buf[i] = (unsigned char)rng();
	b = a;
	b.o = &m->objs[rng_below(M_NOBJ)];
	b.off = rng_below(M_MAX / BLK - n + 1) * BLK;
	if (b.o == a.o && b.off < a.off + a.len && a.off < b.off + b.len)
		return true;   /* overlapping: not a pair */
	MCHECK_OK(m, model_call(m, &a));
	model_apply(m, &a);
	MCHECK_OK(m, model_call(m, &b));
	model_apply(m, &b);
	MCHECK_OK(m, orch_store_dedupe(m->fx->st, a.o->h, a.off, b.o->h, b.off, a.len, &done));
	MCHECK(m, done == a.len);
	d.o = b.o;
	model_apply(m, &d);
	return model_read_all(m, a.o) && model_read_all(m, b.o);
}

/* One random step; then the affected object reads back and the checker is clean. */
static bool model_step(struct model *m)
{
	unsigned int kind = (unsigned int)rng_below(100);
	struct mop op = { .buf = m->wbuf };
	char ctx[64];
	int rc;

	snprintf(ctx, sizeof(ctx), "step %d", m->step);
	if (kind < 77) {
		model_gen(m, &op, kind);
		rc = model_call(m, &op);
		if (rc == -ENOSPC) {
			/* freed blocks are busy until a sync: sync and try again */
			m->enospc++;
			MCHECK_OK(m, orch_store_sync(m->fx->st));
			rc = model_call(m, &op);
		}
		if (rc != model_expect(&op)) {
			fprintf(stderr, "step %d: op %d h=%016llx off=%llu len=%llu: %s\n",
				m->step, op.type, (unsigned long long)op.o->h,
				(unsigned long long)op.off, (unsigned long long)op.len,
				strerror(-rc));
			return false;
		}
		model_apply(m, &op);
		if (!model_read_all(m, op.o))
			return false;
	} else if (kind < 83) {
		MCHECK_OK(m, orch_store_sync(m->fx->st));
	} else if (kind < 86) {
		if (!model_burst(m))
			return false;
	} else if (kind < 90) {
		if (!model_dedupe_pair(m))
			return false;
	} else {
		struct mobj *o = &m->objs[rng_below(M_NOBJ)];
		uint64_t off = rng_below(M_MAX + BLK);

		if (!model_read_check(m, o, off, 1 + rng_below(65536)))
			return false;
	}
	MCHECK(m, store_clean(m->fx->st, m->step % 16 == 0, ctx));
	return true;
}

static bool model_run(struct model *m, int steps)
{
	struct orch_store_stats stats;

	for (m->step = 0; m->step < steps; m->step++) {
		if (m->step && m->step % M_PHASE == 0) {
			MCHECK(m, model_check_all(m));
			orch_store_get_stats(m->fx->st, &stats);
			MCHECK(m, stats.objects_created == m->created);
			MCHECK(m, stats.objects_deleted == m->deleted);
			if (m->step % (2 * M_PHASE) == 0)
				MCHECK_OK(m, orch_store_sync(m->fx->st));
			/* without a sync too: a clean close keeps everything */
			MCHECK_OK(m, reopen(m->fx));
			MCHECK(m, store_clean(m->fx->st, true, "after reopen"));
			MCHECK(m, model_check_all(m));
			m->created = m->deleted = 0;
		}
		if (!model_step(m))
			return false;
	}
	MCHECK(m, model_check_all(m));
	orch_store_get_stats(m->fx->st, &stats);
	printf("model: last phase %llu ops in %llu commits, %llu work chunks\n",
	       (unsigned long long)stats.ops, (unsigned long long)stats.commits,
	       (unsigned long long)stats.work_chunks);
	MCHECK_OK(m, reopen(m->fx));
	MCHECK(m, store_clean(m->fx->st, true, "at the end"));
	MCHECK(m, model_check_all(m));
	return true;
}

static void model_test(struct fx *fx, int default_steps)
{
	static const uint64_t handles[M_NOBJ] = {
		0x0001000000000005ull, 0x0001000000000105ull,
		0x8000000000000001ull, /* sorts after the others as u64 */
		0xffffffffffffffffull,
	};
	const char *env = getenv("ORCH_TEST_STEPS");
	int steps = env ? atoi(env) : scaled(default_steps);
	uint64_t seed = test_seed();
	struct model m = { .fx = fx };
	bool ok;

	rng_state = seed;
	m.buf = malloc(M_MAX + 2 * BLK);
	m.wbuf = malloc(M_WMAX);
	ok = m.buf && m.wbuf;
	for (int i = 0; i < M_NOBJ; i++) {
		m.objs[i].h = handles[i];
		m.objs[i].data = calloc(1, M_MAX);
		ok = ok && m.objs[i].data;
	}
	if (ok)
		ok = model_run(&m, steps);
	if (!ok) {
		orch_test_failed = 1;
		fprintf(stderr, "model test failed: replay with ORCH_TEST_SEED=%llu\n",
			(unsigned long long)seed);
	} else if (m.enospc) {
		fprintf(stderr, "model test: %ld writes needed a sync after ENOSPC\n",
			m.enospc);
	}
	for (int i = 0; i < M_NOBJ; i++)
		free(m.objs[i].data);
	free(m.buf);
	free(m.wbuf);
}

STORE_TEST(random_ops_against_model, &geom_model)
{
	model_test(fx, 6000);
}

STORE_TEST(random_ops_default_geometry, &geom_default)
{
	model_test(fx, 300);
}

/* --- Edges ------------------------------------------------------------------ */

STORE_TEST(holes_read_as_zeros, &geom_small)
{
	static unsigned char buf[3 << 20];
	size_t got;

	ORCH_CHECK_OK(orch_store_write(fx->st, 42, 2 << 20, "tail", 4));
	memset(buf, 0xff, sizeof(buf));
	ORCH_CHECK_OK(orch_store_read(fx->st, 42, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == (2 << 20) + 4);
	ORCH_CHECK(all_zero(buf, 2 << 20));
	ORCH_CHECK(memcmp(buf + (2 << 20), "tail", 4) == 0);

	/* extending truncate adds a hole; punch frees one and keeps the size */
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 42, 3 << 20));
	ORCH_CHECK_OK(orch_store_read(fx->st, 42, 2 << 20, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 1 << 20);
	ORCH_CHECK(memcmp(buf, "tail", 4) == 0 && all_zero(buf + 4, got - 4));
	ORCH_CHECK_OK(orch_store_punch(fx->st, 42, (2 << 20) + 1, 2));
	ORCH_CHECK_OK(orch_store_read(fx->st, 42, 2 << 20, buf, 4, &got));
	ORCH_CHECK(got == 4 && memcmp(buf, "t\0\0l", 4) == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 42, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 3 << 20);

	/* a shrinking truncate inside a block zeroes its tail for a later grow */
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 42, (2 << 20) + 2));
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 42, (2 << 20) + 8));
	memset(buf, 0xff, 16);
	ORCH_CHECK_OK(orch_store_read(fx->st, 42, 2 << 20, buf, 16, &got));
	ORCH_CHECK(got == 8 && memcmp(buf, "t\0\0\0\0\0\0\0", 8) == 0);
	ORCH_CHECK(store_clean(fx->st, true, "holes"));
}

/*
 * Large whole-block writes, whose checksums orch_store_write computes on
 * the calling thread while the writer writes the data: every block reads
 * back and matches its stored checksum (I17), in long extents and in
 * extents cut by maxext across AGs, with the sums on the stack or
 * malloc()ed (over 4 MiB), and overwrites of part of an earlier write.
 */
static bool large_writes_check(struct fx *fx, const uint64_t (*w)[2], size_t nw,
			       uint64_t size)
{
	unsigned char *buf = malloc(ORCH_STORE_MAX_IO), *model = calloc(1, size);
	unsigned char *back = malloc(size);
	bool ok = buf && model && back;
	size_t got = 0;

	for (size_t i = 0; ok && i < nw; i++) {
		rng_state = 1000 + i;
		for (uint64_t k = 0; k < w[i][1]; k++)
			buf[k] = (unsigned char)rng();
		ok = orch_store_write(fx->st, 7, w[i][0], buf, w[i][1]) == 0;
		if (ok)
			memcpy(model + w[i][0], buf, w[i][1]);
	}
	for (uint64_t off = 0; ok && off < size; off += ORCH_STORE_MAX_IO) {
		size_t n = (size_t)ORCH_MIN_U64(size - off, ORCH_STORE_MAX_IO);

		ok = orch_store_read(fx->st, 7, off, back + off, n, &got) == 0 && got == n;
	}
	if (ok && memcmp(back, model, size) != 0) {
		fprintf(stderr, "large writes: data read back differs\n");
		ok = false;
	}
	if (ok)
		ok = store_clean(fx->st, true, "large writes");
	free(buf);
	free(model);
	free(back);
	return ok;
}

STORE_TEST(large_aligned_writes, &geom_default)
{
	static const uint64_t w[][2] = {
		{ 0, 64 * KiB }, { 64 * KiB, 1 * MiB }, { 2 * MiB, 4 * MiB + 4 * KiB },
		{ 8 * MiB, ORCH_STORE_MAX_IO }, { 512 * KiB, 8 * MiB }, { 60 * KiB, 4 * KiB },
		{ 24 * MiB - 64 * KiB, 64 * KiB },
	};

	ORCH_CHECK(large_writes_check(fx, w, ORCH_ARRAY_SIZE(w), 24 * MiB));
}

STORE_TEST(large_aligned_writes_short_extents, &geom_small)
{
	static const uint64_t w[][2] = {
		{ 0, 1 * MiB }, { 256 * KiB, 1 * MiB }, { 1 * MiB, 2 * MiB },
	};

	ORCH_CHECK(large_writes_check(fx, w, ORCH_ARRAY_SIZE(w), 3 * MiB));
}

STORE_TEST(read_past_end_and_absent, &geom_small)
{
	char buf[16] = "untouched";
	size_t got = 99;

	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0 && strcmp(buf, "untouched") == 0);
	ORCH_CHECK(nobjects(fx) == 0); /* a read creates nothing */
	ORCH_CHECK_OK(orch_store_write(fx->st, 7, 0, "abc", 3));
	got = 99;
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 3, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 1000, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 1, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 2 && memcmp(buf, "bc", 2) == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, UINT64_MAX, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 7, 0, buf, 0, &got));
	ORCH_CHECK(got == 0);
}

STORE_TEST(delete_is_idempotent, &geom_small)
{
	struct orch_store_stats s;
	char buf[8];
	size_t got;

	ORCH_CHECK_OK(orch_store_delete(fx->st, 9)); /* never existed */
	ORCH_CHECK_OK(orch_store_write(fx->st, 9, 0, "data", 4));
	ORCH_CHECK(nobjects(fx) == 1);
	ORCH_CHECK_OK(orch_store_delete(fx->st, 9));
	ORCH_CHECK_OK(orch_store_delete(fx->st, 9));
	ORCH_CHECK(nobjects(fx) == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 9, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0);
	/* and recreating starts from nothing */
	ORCH_CHECK_OK(orch_store_write(fx->st, 9, 2, "x", 1));
	ORCH_CHECK_OK(orch_store_read(fx->st, 9, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 3 && memcmp(buf, "\0\0x", 3) == 0);
	orch_store_get_stats(fx->st, &s);
	ORCH_CHECK(s.objects_created == 2 && s.objects_deleted == 1);
	ORCH_CHECK_OK(reopen(fx));
	ORCH_CHECK(nobjects(fx) == 1);
	ORCH_CHECK_OK(orch_store_delete(fx->st, 9));
	ORCH_CHECK_OK(orch_store_read(fx->st, 9, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 0 && nobjects(fx) == 0);
	ORCH_CHECK(store_clean(fx->st, true, "delete"));
}

/*
 * orch_store_delete_many: absent handles, small objects and one long
 * enough for a work item all go, and the small ones share commits.
 */
STORE_TEST(delete_many, &geom_small)
{
	static unsigned char buf[1 * MiB];
	uint64_t h[40], keep = 1000;
	struct orch_store_stats s0, s1;

	fill(buf, sizeof(buf), 7, 7);
	for (int i = 0; i < 40; i++) {
		h[i] = (uint64_t)i + 1;
		if (i % 4 != 3)   /* every fourth never existed */
			ORCH_CHECK_OK(orch_store_write(fx->st, h[i], 0, buf, 5000));
	}
	for (int i = 0; i < 300; i++)   /* object 1: 300 one-block extents, a work item */
		ORCH_CHECK_OK(orch_store_write(fx->st, h[0], (uint64_t)i * 2 * BLK, buf, 100));
	ORCH_CHECK_OK(orch_store_write(fx->st, keep, 0, buf, 3000));
	ORCH_CHECK(nobjects(fx) == 31);
	orch_store_get_stats(fx->st, &s0);
	ORCH_CHECK_OK(orch_store_delete_many(fx->st, h, 40));
	orch_store_get_stats(fx->st, &s1);
	ORCH_CHECK(nobjects(fx) == 1 && orch_store_has_object(fx->st, keep));
	ORCH_CHECK(s1.objects_deleted - s0.objects_deleted == 30);
	printf("delete_many: 30 objects in %llu commits\n",
	       (unsigned long long)(s1.commits - s0.commits));
	ORCH_CHECK(s1.commits - s0.commits < 30);
	ORCH_CHECK_OK(orch_store_delete_many(fx->st, h, 40));   /* idempotent */
	ORCH_CHECK_OK(orch_store_delete_many(fx->st, h, 0));
	ORCH_CHECK(nobjects(fx) == 1);
	ORCH_CHECK(store_clean(fx->st, true, "delete_many"));
}

STORE_TEST(truncate_absent, &geom_small)
{
	unsigned char buf[200];
	size_t got;

	ORCH_CHECK_OK(orch_store_truncate(fx->st, 11, 0));
	ORCH_CHECK(nobjects(fx) == 0);
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 11, 100));
	ORCH_CHECK(nobjects(fx) == 1);
	memset(buf, 1, sizeof(buf));
	ORCH_CHECK_OK(orch_store_read(fx->st, 11, 0, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 100 && all_zero(buf, 100));
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 11, 0));
	ORCH_CHECK(nobjects(fx) == 1); /* exists, empty */
	ORCH_CHECK_OK(orch_store_punch(fx->st, 12, 0, 4096)); /* absent: no-op */
	ORCH_CHECK(nobjects(fx) == 1);
	ORCH_CHECK_OK(orch_store_punch(fx->st, 11, 0, 0));
	ORCH_CHECK(nobjects(fx) == 1);
	ORCH_CHECK(store_clean(fx->st, true, "truncate"));
}

STORE_TEST(limits, &geom_small)
{
	const uint64_t max = ORCH_STORE_MAX_SIZE;
	unsigned char *big;
	char c;
	size_t got;
	int rc;

	ORCH_CHECK_RC(orch_store_write(fx->st, 3, max, "x", 1), -EFBIG);
	ORCH_CHECK_RC(orch_store_write(fx->st, 3, max - 1, "xy", 2), -EFBIG);
	ORCH_CHECK_RC(orch_store_write(fx->st, 3, UINT64_MAX, "x", 1), -EFBIG);
	ORCH_CHECK_RC(orch_store_truncate(fx->st, 3, max + 1), -EFBIG);
	ORCH_CHECK(nobjects(fx) == 0);
	ORCH_CHECK_OK(orch_store_write(fx->st, 3, 1, "x", 0)); /* creates nothing */
	ORCH_CHECK(nobjects(fx) == 0);
	big = calloc(1, ORCH_STORE_MAX_IO + 1);
	ORCH_CHECK(big);
	rc = orch_store_write(fx->st, 3, 0, big, ORCH_STORE_MAX_IO + 1);
	free(big);
	ORCH_CHECK_RC(rc, -EINVAL);
	ORCH_CHECK(nobjects(fx) == 0);
	/* the last byte there may be */
	ORCH_CHECK_OK(orch_store_write(fx->st, 4, max - 1, "y", 1));
	ORCH_CHECK_OK(orch_store_read(fx->st, 4, max - 1, &c, 1, &got));
	ORCH_CHECK(got == 1 && c == 'y');
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 4, max));
	/* a sparse object far out */
	ORCH_CHECK_OK(orch_store_write(fx->st, 3, 1ull << 40, "z", 1));
	ORCH_CHECK_OK(orch_store_read(fx->st, 3, 1ull << 40, &c, 1, &got));
	ORCH_CHECK(got == 1 && c == 'z');
	ORCH_CHECK_OK(orch_store_punch(fx->st, 3, 0, UINT64_MAX));
	ORCH_CHECK_OK(orch_store_read(fx->st, 3, 1ull << 40, &c, 1, &got));
	ORCH_CHECK(got == 1 && c == 0);
	ORCH_CHECK(store_clean(fx->st, true, "limits"));
	ORCH_CHECK_OK(orch_store_delete(fx->st, 3));
	ORCH_CHECK_OK(orch_store_delete(fx->st, 4));
	ORCH_CHECK(store_clean(fx->st, true, "limits, deleted"));
}

/* ENOSPC: a write that does not fit changes nothing; space comes back. */
STORE_TEST(enospc_changes_nothing, &geom_small)
{
	static unsigned char buf[256 * KiB], rb[256 * KiB];
	uint64_t total, free0, written = 0;
	size_t got;
	int rc = 0;

	memset(buf, 'e', 256 * KiB);
	ORCH_CHECK_OK(orch_store_statfs(fx->st, &total, &free0, NULL, NULL));
	ORCH_CHECK(total <= geom_small.size && total >= geom_small.size - 64 * BLK);
	for (int i = 0; i < 100 && !rc; i++) {
		rc = orch_store_write(fx->st, 77, written, buf, 256 * KiB);
		if (!rc)
			written += 256 * KiB;
	}
	ORCH_CHECK_RC(rc, -ENOSPC);
	ORCH_CHECK(written <= free0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 77, written, rb, 256 * KiB, &got));
	ORCH_CHECK(got == 0); /* the failed write did not extend the object */
	ORCH_CHECK(store_clean(fx->st, true, "full"));
	ORCH_CHECK_OK(orch_store_delete(fx->st, 77));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK_OK(orch_store_write(fx->st, 78, 0, buf, 256 * KiB));
	ORCH_CHECK_OK(orch_store_read(fx->st, 78, 0, rb, 256 * KiB, &got));
	ORCH_CHECK(got == 256 * KiB && memcmp(rb, buf, got) == 0);
	ORCH_CHECK(store_clean(fx->st, true, "after delete"));
}

static int put_u32le(const char *path, off_t off, uint32_t v)
{
	unsigned char b[4] = { (unsigned char)v, (unsigned char)(v >> 8),
			       (unsigned char)(v >> 16), (unsigned char)(v >> 24) };
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = pwrite(fd, b, 4, off);
	close(fd);
	return n == 4 ? 0 : -EIO;
}

/* Sets the superblock's format version and fixes its crc. */
static int sb_set_version(const char *dir, uint32_t version)
{
	unsigned char sb[52];
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/blocks", dir);
	if (put_u32le(path, 8, version))
		return -EIO;
	fd = open(path, O_RDONLY);
	if (fd < 0)
		return -errno;
	if (pread(fd, sb, sizeof(sb), 0) != (ssize_t)sizeof(sb)) {
		close(fd);
		return -EIO;
	}
	close(fd);
	return put_u32le(path, 48, orch_crc32c(0, sb, 48));
}

/* Sets smeta @k to @v with a valid record CRC (a well-formed value). */
static int smeta_set(const char *dir, const char *k, int64_t v)
{
	char path[128], sql[160];
	sqlite3 *db = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/store.db", dir);
	snprintf(sql, sizeof(sql), "UPDATE smeta SET v = %lld, crc = %lld WHERE k = '%s'",
		 (long long)v,
		 (long long)orch_rec_crc(ORCH_REC_SMETA, &v, 1, k, strlen(k)), k);
	rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	if (rc == SQLITE_OK && sqlite3_changes(db) != 1)
		rc = SQLITE_NOTFOUND;
	sqlite3_close(db);
	return rc == SQLITE_OK ? 0 : -EIO;
}

STORE_TEST(mkfs_and_open_refusals, NULL)
{
	struct orch_store_geom g = geom_small;
	struct orch_store *other = NULL;
	struct orch_store_info info;
	char path[128], magic;
	unsigned char buf[4];
	size_t got;
	int fd;

	ORCH_CHECK_OK(orch_store_check_unused(fx->dir)); /* no store: 0 */
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -ENOENT);
	fx->st = NULL;

	/* bad geometries */
	g.ag_blocks = 100;
	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, &g, false), -EINVAL);
	g.ag_blocks = 32;
	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, &g, false), -EINVAL);
	g.ag_blocks = 1u << 31;
	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, &g, false), -EINVAL);
	g = geom_small;
	g.size = 63 * BLK; /* not one AG of 64 blocks */
	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, &g, false), -EINVAL);
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -ENOENT);
	fx->st = NULL;

	ORCH_CHECK_OK(orch_store_mkfs(fx->dir, &geom_small, false));
	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, &geom_small, false), -EEXIST);
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st));
	orch_store_info(fx->st, &info);
	ORCH_CHECK(info.block_size == BLK && info.ag_blocks == 64 && info.maxext == 16);
	ORCH_CHECK(info.ag_count == 32 && info.format == 1);
	ORCH_CHECK(info.blocks >= 2047 && info.blocks <= 2048);
	ORCH_CHECK_RC(orch_store_open(fx->dir, &other), -EBUSY);
	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, &geom_small, true), -EBUSY);
	ORCH_CHECK_RC(orch_store_check_unused(fx->dir), -EBUSY);
	ORCH_CHECK_OK(orch_store_write(fx->st, 0x100, 0, "abc", 3));
	ORCH_CHECK_OK(orch_store_write(fx->st, 0x201, 0, "def", 3));
	orch_store_close(fx->st);
	fx->st = NULL;
	ORCH_CHECK_OK(orch_store_check_unused(fx->dir));

	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, &geom_small, false), -EEXIST);
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st)); /* untouched */
	ORCH_CHECK(nobjects(fx) == 2);
	orch_store_close(fx->st);
	fx->st = NULL;

	/* meta.db next to it must survive a forced mkfs */
	snprintf(path, sizeof(path), "%s/meta.db", fx->dir);
	fd = open(path, O_CREAT | O_WRONLY, 0600);
	ORCH_CHECK(fd >= 0);
	close(fd);
	ORCH_CHECK_OK(orch_store_mkfs(fx->dir, &geom_small, true));
	ORCH_CHECK(access(path, F_OK) == 0);
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st));
	ORCH_CHECK(nobjects(fx) == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 0x100, 0, buf, 3, &got));
	ORCH_CHECK(got == 0);
	ORCH_CHECK(store_clean(fx->st, true, "fresh"));
	orch_store_close(fx->st);
	fx->st = NULL;

	/* a damaged superblock */
	snprintf(path, sizeof(path), "%s/blocks", fx->dir);
	fd = open(path, O_RDWR);
	ORCH_CHECK(fd >= 0);
	ORCH_CHECK(pread(fd, &magic, 1, 0) == 1);
	ORCH_CHECK(pwrite(fd, "X", 1, 0) == 1);
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -EUCLEAN);
	fx->st = NULL;
	ORCH_CHECK(pwrite(fd, &magic, 1, 0) == 1);
	close(fd);
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st));
	orch_store_close(fx->st);
	fx->st = NULL;

	/* a format from the future, in the superblock or in smeta */
	ORCH_CHECK_OK(sb_set_version(fx->dir, 2));
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -EPROTONOSUPPORT);
	fx->st = NULL;
	ORCH_CHECK_OK(sb_set_version(fx->dir, 1));
	ORCH_CHECK_OK(smeta_set(fx->dir, "format", 2));
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -EPROTONOSUPPORT);
	fx->st = NULL;
	ORCH_CHECK_OK(smeta_set(fx->dir, "format", 1));
	/* a record that fails its CRC */
	{
		char p[128];
		sqlite3 *db = NULL;

		snprintf(p, sizeof(p), "%s/store.db", fx->dir);
		ORCH_CHECK(sqlite3_open_v2(p, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK);
		ORCH_CHECK(sqlite3_exec(db, "UPDATE smeta SET v = v + 1 WHERE k = 'maxext'",
					NULL, NULL, NULL) == SQLITE_OK);
		sqlite3_close(db);
		ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -EUCLEAN);
		fx->st = NULL;
		ORCH_CHECK_OK(smeta_set(fx->dir, "maxext", 16));
	}
	/* a geometry that disagrees with the superblock */
	ORCH_CHECK_OK(smeta_set(fx->dir, "ag_blocks", 128));
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -EUCLEAN);
	fx->st = NULL;
	ORCH_CHECK_OK(smeta_set(fx->dir, "ag_blocks", 64));
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st));
	ORCH_CHECK(store_clean(fx->st, true, "restored"));
}

/* store.h: maxext is 1 .. ag_blocks, and out of range is -EINVAL. */
STORE_TEST(mkfs_maxext_out_of_range, NULL)
{
	struct orch_store_geom g = geom_small;

	g.maxext = 65;
	ORCH_CHECK_RC(orch_store_mkfs(fx->dir, &g, false), -EINVAL);
	ORCH_CHECK_RC(orch_store_open(fx->dir, &fx->st), -ENOENT);
	fx->st = NULL;
}

/* A last AG shorter than 64 blocks is cut off; a longer one is kept. */
STORE_TEST(short_last_ag, NULL)
{
	struct orch_store_geom g = { .size = 8 * MiB + 100 * BLK, .ag_blocks = 128,
				     .maxext = 16 };
	struct orch_store_info info;
	uint64_t total;

	ORCH_CHECK_OK(orch_store_mkfs(fx->dir, &g, false));
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st));
	orch_store_info(fx->st, &info);
	ORCH_CHECK(info.ag_count == 17);
	ORCH_CHECK(info.blocks >= 16 * 128 + 99 && info.blocks <= 16 * 128 + 100);
	ORCH_CHECK_OK(orch_store_statfs(fx->st, &total, NULL, NULL, NULL));
	ORCH_CHECK(total >= (16 * 128 + 99) * (uint64_t)BLK);
	ORCH_CHECK(store_clean(fx->st, true, "short AG"));
}

struct sync_arg {
	struct orch_store *st;
	int rounds;
	int rc;
};

static void *sync_thread(void *p)
{
	struct sync_arg *a = p;

	for (int i = 0; i < a->rounds && !a->rc; i++)
		a->rc = orch_store_sync(a->st);
	return NULL;
}

/* A flusher syncs while this thread writes, deletes and truncates. */
STORE_TEST(sync_concurrent_with_io, &geom_default)
{
	/* One each: the threads stop on their own error only. */
	struct sync_arg a[2] = { { fx->st, 20, 0 }, { fx->st, 20, 0 } };
	uint64_t total, free_bytes, avail, objs;
	struct orch_store_stats s;
	char buf[4096];
	pthread_t t[2];

	memset(buf, 'q', sizeof(buf));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK(pthread_create(&t[0], NULL, sync_thread, &a[0]) == 0);
	ORCH_CHECK(pthread_create(&t[1], NULL, sync_thread, &a[1]) == 0);
	for (uint64_t i = 0; i < (uint64_t)scaled(2000); i++) {
		int rc = orch_store_write(fx->st, 1 + i % 300, (i % 7) * 4096,
					  buf, sizeof(buf));

		if (!rc && i % 5 == 0)
			rc = orch_store_truncate(fx->st, 1 + (i * 13) % 300, 1000);
		if (!rc && i % 11 == 0)
			rc = orch_store_delete(fx->st, 1 + (i * 7) % 300);
		if (rc) {
			pthread_join(t[0], NULL);
			pthread_join(t[1], NULL);
			ORCH_CHECK_OK(rc);
		}
	}
	pthread_join(t[0], NULL);
	pthread_join(t[1], NULL);
	ORCH_CHECK_OK(a[0].rc);
	ORCH_CHECK_OK(a[1].rc);
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK_OK(orch_store_statfs(fx->st, &total, &free_bytes, &avail, &objs));
	ORCH_CHECK(total > 0 && free_bytes <= total && avail <= free_bytes);
	ORCH_CHECK(objs > 0 && objs <= 300);
	orch_store_get_stats(fx->st, &s);
	ORCH_CHECK(s.sync_calls >= 2 && s.syncs >= 1 && s.syncs <= s.sync_calls);
	ORCH_CHECK(store_clean(fx->st, true, "sync"));
}

STORE_TEST(stats_count_bytes, &geom_small)
{
	struct orch_store_stats s;
	char buf[100];
	size_t got;

	ORCH_CHECK_OK(orch_store_write(fx->st, 5, 10, "0123456789", 10));
	ORCH_CHECK_OK(orch_store_write(fx->st, 5, 0, "ab", 2));
	ORCH_CHECK_OK(orch_store_read(fx->st, 5, 5, buf, sizeof(buf), &got));
	ORCH_CHECK(got == 15);
	orch_store_get_stats(fx->st, &s);
	ORCH_CHECK(s.bytes_written == 12 && s.bytes_read == 15);
	ORCH_CHECK(s.objects_created == 1 && s.objects_deleted == 0);
	ORCH_CHECK(s.ops >= 2 && s.commits >= 1 && s.commits <= s.ops);
	ORCH_CHECK(s.csum_errors == 0);
}

/* --- Queued mutations (orch_store_submit) ---------------------------------- */

struct sub_state {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int done;
	int order[64];
	int status[64];
};

struct sub_op {
	struct orch_store_op op;
	struct sub_state *ss;
	int idx;
};

static void sub_done(struct orch_store_op *op)
{
	struct sub_op *so = op->arg;
	struct sub_state *ss = so->ss;

	pthread_mutex_lock(&ss->lock);
	ss->order[ss->done] = so->idx;
	ss->status[so->idx] = op->status;
	ss->done++;
	pthread_cond_broadcast(&ss->cv);
	pthread_mutex_unlock(&ss->lock);
}

/* Applied in submission order, each done called once, errors reported. */
STORE_TEST(submit_applies_in_order, &geom_small)
{
	static unsigned char data[40][8192];
	struct sub_state ss = { .lock = PTHREAD_MUTEX_INITIALIZER,
				.cv = PTHREAD_COND_INITIALIZER };
	struct sub_op ops[44];
	unsigned char buf[65536];
	int n = 0;
	size_t got;

	/* 40 overlapping writes to one object, each 8 KiB, 1 KiB apart */
	for (int i = 0; i < 40; i++) {
		fill(data[i], sizeof(data[i]), 99, (uint64_t)i);
		ops[n] = (struct sub_op){ .ss = &ss, .idx = n };
		ops[n].op = (struct orch_store_op){ .type = ORCH_STORE_OP_WRITE,
			.handle = 500, .off = (uint64_t)i * 1024, .len = 8192,
			.buf = data[i], .done = sub_done, .arg = &ops[n] };
		n++;
	}
	ops[n] = (struct sub_op){ .ss = &ss, .idx = n };
	ops[n].op = (struct orch_store_op){ .type = ORCH_STORE_OP_PUNCH,
		.handle = 500, .off = 100, .len = 50, .done = sub_done, .arg = &ops[n] };
	n++;
	ops[n] = (struct sub_op){ .ss = &ss, .idx = n };
	ops[n].op = (struct orch_store_op){ .type = ORCH_STORE_OP_TRUNCATE,
		.handle = 500, .off = 20000, .done = sub_done, .arg = &ops[n] };
	n++;
	ops[n] = (struct sub_op){ .ss = &ss, .idx = n };
	ops[n].op = (struct orch_store_op){ .type = ORCH_STORE_OP_WRITE,
		.handle = 500, .off = ORCH_STORE_MAX_SIZE, .len = 1, .buf = "x",
		.done = sub_done, .arg = &ops[n] };
	n++;
	ops[n] = (struct sub_op){ .ss = &ss, .idx = n };
	ops[n].op = (struct orch_store_op){ .type = ORCH_STORE_OP_DELETE,
		.handle = 501, .done = sub_done, .arg = &ops[n] };
	n++;
	for (int i = 0; i < n; i++)
		orch_store_submit(fx->st, &ops[i].op);
	pthread_mutex_lock(&ss.lock);
	while (ss.done < n)
		pthread_cond_wait(&ss.cv, &ss.lock);
	pthread_mutex_unlock(&ss.lock);
	for (int i = 0; i < n; i++) {
		ORCH_CHECK(ss.order[i] == i);
		ORCH_CHECK(ss.status[i] == (i == 42 ? -EFBIG : 0));
	}
	/* the model: each write over the last, then punch and truncate */
	memset(buf, 0, sizeof(buf));
	for (int i = 0; i < 40; i++)
		memcpy(buf + i * 1024, data[i], 8192);
	memset(buf + 100, 0, 50);
	{
		unsigned char rb[sizeof(buf)];

		ORCH_CHECK_OK(orch_store_read(fx->st, 500, 0, rb, sizeof(rb), &got));
		ORCH_CHECK(got == 20000);
		ORCH_CHECK(memcmp(rb, buf, 20000) == 0);
	}
	ORCH_CHECK(store_clean(fx->st, true, "submit"));
}

/* --- Concurrency: threads on their own objects, a checker alongside --------- */

struct conc_arg {
	struct orch_store *st;
	uint64_t h;
	uint64_t seed;
	int rc;
	bool fail;
};

static void *conc_thread(void *p)
{
	struct conc_arg *a = p;
	unsigned char *model = calloc(1, 512 * KiB), *w = malloc(64 * KiB),
		      *r = malloc(512 * KiB);
	uint64_t s = a->seed, size = 0;

	if (!model || !w || !r) {
		a->fail = true;
		goto out;
	}
	for (int i = 0; i < scaled(300) && !a->rc && !a->fail; i++) {
		uint64_t len = 1 + splitmix(&s) % (64 * KiB);
		uint64_t off = splitmix(&s) % (512 * KiB - len);
		size_t got = 0;

		if (splitmix(&s) % 5 == 0) {
			a->rc = orch_store_punch(a->st, a->h, off, len);
			if (off < size)
				memset(model + off, 0, (size - off < len ? size - off : len));
		} else {
			fill(w, len, a->seed, (uint64_t)i);
			a->rc = orch_store_write(a->st, a->h, off, w, len);
			memcpy(model + off, w, len);
			if (off + len > size)
				size = off + len;
		}
		if (!a->rc)
			a->rc = orch_store_read(a->st, a->h, 0, r, 512 * KiB, &got);
		if (!a->rc && (got != size || memcmp(r, model, size))) {
			fprintf(stderr, "thread h=%llu: op %d: read back differs\n",
				(unsigned long long)a->h, i);
			a->fail = true;
		}
	}
out:
	free(model);
	free(w);
	free(r);
	return NULL;
}

struct checker_arg {
	struct orch_store *st;
	_Atomic bool stop;
	long findings;
	int runs;
};

static void *checker_thread(void *p)
{
	struct checker_arg *a = p;

	while (!a->stop && a->findings == 0) {
		struct fctx c = { "concurrent checker", 0 };
		long n = orch_store_check(a->st, a->runs % 2, print_finding, &c);

		a->findings = n < 0 ? 1 : c.counted;
		usleep(1000); /* let the writers in (valgrind runs one thread at a time) */
		if (n < 0)
			fprintf(stderr, "concurrent check: %s\n", strerror((int)-n));
		a->runs++;
	}
	return NULL;
}

STORE_TEST(threads_and_checker_concurrently, &geom_model)
{
	struct conc_arg a[4];
	struct checker_arg ca = { .st = fx->st };
	pthread_t t[4], ct;
	uint64_t seed = test_seed();

	ORCH_CHECK(pthread_create(&ct, NULL, checker_thread, &ca) == 0);
	for (int i = 0; i < 4; i++) {
		a[i] = (struct conc_arg){ .st = fx->st, .h = 0x7000 + (uint64_t)i,
					  .seed = seed + (uint64_t)i };
		ORCH_CHECK(pthread_create(&t[i], NULL, conc_thread, &a[i]) == 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(t[i], NULL);
	ca.stop = true;
	pthread_join(ct, NULL);
	for (int i = 0; i < 4; i++) {
		if (a[i].rc || a[i].fail)
			fprintf(stderr, "thread %d: %s; seed %llu\n", i,
				a[i].rc ? strerror(-a[i].rc) : "data differs",
				(unsigned long long)seed);
		ORCH_CHECK(!a[i].rc && !a[i].fail);
	}
	ORCH_CHECK(ca.findings == 0);
	ORCH_CHECK(ca.runs > 0);
	ORCH_CHECK(store_clean(fx->st, true, "after threads"));
}

/*
 * A read runs on a snapshot of its own: while one thread overwrites a range
 * again and again (each write one byte value, some unaligned, so merged
 * with old blocks), readers of the range see one write whole, never a mix
 * and never bytes of a block reused meanwhile (I20), in a small store with
 * syncs that make freed blocks reusable at once.
 */
struct flip_arg {
	struct orch_store *st;
	/* Shared by the readers and the writer: atomic. */
	_Atomic bool stop;
	_Atomic int rc;
	_Atomic long reads, bad;
};

#define FLIP_LEN (96 * KiB)

static void *flip_reader(void *p)
{
	struct flip_arg *a = p;
	static __thread unsigned char buf[FLIP_LEN];

	while (!a->stop && !a->rc && !a->bad) {
		size_t got;
		int rc = orch_store_read(a->st, 1, 100, buf, FLIP_LEN, &got);

		if (rc) {
			a->rc = rc;
			break;
		}
		a->reads++;
		for (size_t i = 1; i < got; i++) {
			if (buf[i] != buf[0]) {
				fprintf(stderr, "read %ld: byte %zu is %02x, byte 0 %02x: a "
					"mix of writes\n", a->reads, i, buf[i], buf[0]);
				a->bad++;
				break;
			}
		}
	}
	return NULL;
}

STORE_TEST(reads_see_whole_writes, &geom_small)
{
	static unsigned char w[FLIP_LEN + 200], churn[64 * KiB];
	struct flip_arg a = { .st = fx->st };
	pthread_t t[3];
	int rc = 0, enospc = 0;

	memset(w, 1, sizeof(w));
	memset(churn, 7, sizeof(churn));
	ORCH_CHECK_OK(orch_store_write(fx->st, 1, 0, w, sizeof(w)));
	for (int i = 0; i < 3; i++)
		ORCH_CHECK(pthread_create(&t[i], NULL, flip_reader, &a) == 0);
	/* Valgrind runs one thread at a time: a few rounds show the memory errors. */
	for (int i = 0; i < (fx_slow_env() ? 30 : 1500) && !rc && !a.bad && !a.rc; i++) {
		/* the whole range [100, 100 + FLIP_LEN) each time, from a varying start */
		uint64_t start = (uint64_t)(i % 3) * 50;

		memset(w, 2 + i % 250, sizeof(w));
		rc = orch_store_write(fx->st, 1, start, w, FLIP_LEN + 200 - start);
		if (!rc)
			rc = orch_store_write(fx->st, 2 + (uint64_t)(i % 5), 0, churn,
					      sizeof(churn));
		/*
		 * The store fails with ENOSPC when every free block is still
		 * visible to a read in progress (it does not wait for reads to
		 * end): on a loaded machine a reader may sleep while the writer
		 * goes through all 8 MiB.  Not what this test is about: retry.
		 */
		for (int k = 0; rc == -ENOSPC && k < 200; k++) {
			enospc++;
			usleep(1000);
			rc = orch_store_write(fx->st, 2 + (uint64_t)(i % 5), 0, churn,
					      sizeof(churn));
		}
		if (!rc && i % 8 == 0)
			rc = orch_store_sync(fx->st);
	}
	a.stop = true;
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	if (enospc)
		printf("reads_see_whole_writes: %d ENOSPC retries with readers running\n",
		       enospc);
	ORCH_CHECK_OK(rc);
	ORCH_CHECK_OK(a.rc);
	ORCH_CHECK(a.bad == 0);
	ORCH_CHECK(a.reads > 0);
	ORCH_CHECK(store_clean(fx->st, true, "flips"));
}

/* --- I30: key encodings sort as tuples -------------------------------------- */

ORCH_TEST(i30_key_u64_preserves_order)
{
	static const uint64_t edges[] = { 0, 1, (1ull << 63) - 1, 1ull << 63,
					  (1ull << 63) + 1, UINT64_MAX - 1, UINT64_MAX };
	uint64_t v[2000];
	size_t n = 0;

	rng_state = test_seed();
	for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		v[n++] = edges[i];
	while (n < 2000) {
		uint64_t x = rng();

		switch (rng_below(4)) {
		case 0: x >>= rng_below(64); break;        /* small values */
		case 1: x |= 1ull << 63; break;            /* top half */
		case 2: x = (1ull << 63) + rng_below(1000) - 500; break;
		default: break;
		}
		v[n++] = x;
	}
	for (size_t i = 0; i < n; i++) {
		ORCH_CHECK(orch_rec_unkey_u64(orch_rec_key_u64(v[i])) == v[i]);
		for (size_t j = 0; j < 64; j++) {
			uint64_t a = v[i], b = v[(i * 31 + j * 17) % n];

			ORCH_CHECK((a < b) == (orch_rec_key_u64(a) < orch_rec_key_u64(b)));
			ORCH_CHECK((a == b) == (orch_rec_key_u64(a) == orch_rec_key_u64(b)));
		}
	}
	ORCH_CHECK(orch_rec_key_u64(0) == INT64_MIN);
	ORCH_CHECK(orch_rec_key_u64(UINT64_MAX) == INT64_MAX);
}

struct rtuple {
	int64_t ag, agbno, owner, off;
};

static int rtuple_cmp(const void *pa, const void *pb)
{
	const struct rtuple *a = pa, *b = pb;

	if (a->ag != b->ag)
		return a->ag < b->ag ? -1 : 1;
	if (a->agbno != b->agbno)
		return a->agbno < b->agbno ? -1 : 1;
	if (a->owner != b->owner)
		return a->owner < b->owner ? -1 : 1;
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	return 0;
}

static int cmp_u64(const void *pa, const void *pb)
{
	uint64_t a = *(const uint64_t *)pa, b = *(const uint64_t *)pb;

	return a < b ? -1 : a > b;
}

ORCH_TEST(i30_sqlite_orders_composite_keys_as_tuples)
{
	enum { N = 3000 };
	static struct rtuple t[N];
	static uint64_t hs[N];
	sqlite3 *db = NULL;
	sqlite3_stmt *ins = NULL, *sel = NULL;
	size_t n = 0, k;

	rng_state = test_seed();
	ORCH_CHECK(sqlite3_open(":memory:", &db) == SQLITE_OK);
	ORCH_CHECK(sqlite3_exec(db,
		"CREATE TABLE rmap(ag INTEGER NOT NULL, agbno INTEGER NOT NULL,"
		" owner INTEGER NOT NULL, off INTEGER NOT NULL, len INTEGER NOT NULL,"
		" PRIMARY KEY(ag, agbno, owner, off)) WITHOUT ROWID;"
		"CREATE TABLE obj(h INTEGER PRIMARY KEY, x INTEGER) WITHOUT ROWID;",
		NULL, NULL, NULL) == SQLITE_OK);
	ORCH_CHECK(sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO rmap VALUES(?,?,?,?,1)",
				      -1, &ins, NULL) == SQLITE_OK);
	for (int i = 0; i < N; i++) {
		struct rtuple r;

		/* small ranges so that ties on leading fields are common */
		r.ag = (int64_t)rng_below(rng_below(2) ? 4 : 1u << 20);
		r.agbno = (int64_t)rng_below(rng_below(2) ? 8 : 1u << 30);
		switch (rng_below(6)) {
		case 0: r.owner = ORCH_STORE_OWN_FS; break;
		case 1: r.owner = ORCH_STORE_OWN_DEFECTIVE; break;
		case 2: r.owner = -(int64_t)rng_below(1000) - 3; break;
		case 3: r.owner = (int64_t)rng_below(5); break;
		case 4: r.owner = orch_rec_key_u64(rng()); break;
		default: r.owner = (int64_t)(rng() >> 1); break;
		}
		r.off = rng_below(3) ? (int64_t)rng_below(4) : (int64_t)(rng() >> 1);
		sqlite3_bind_int64(ins, 1, r.ag);
		sqlite3_bind_int64(ins, 2, r.agbno);
		sqlite3_bind_int64(ins, 3, r.owner);
		sqlite3_bind_int64(ins, 4, r.off);
		ORCH_CHECK(sqlite3_step(ins) == SQLITE_DONE);
		sqlite3_reset(ins);
		if (sqlite3_changes(db) == 1)
			t[n++] = r;
	}
	sqlite3_finalize(ins);
	qsort(t, n, sizeof(t[0]), rtuple_cmp);

	/* a full scan is in key order; so is a range scan by row value */
	ORCH_CHECK(sqlite3_prepare_v2(db, "SELECT ag, agbno, owner, off FROM rmap",
				      -1, &sel, NULL) == SQLITE_OK);
	for (k = 0; sqlite3_step(sel) == SQLITE_ROW; k++) {
		ORCH_CHECK(k < n);
		ORCH_CHECK(sqlite3_column_int64(sel, 0) == t[k].ag);
		ORCH_CHECK(sqlite3_column_int64(sel, 1) == t[k].agbno);
		ORCH_CHECK(sqlite3_column_int64(sel, 2) == t[k].owner);
		ORCH_CHECK(sqlite3_column_int64(sel, 3) == t[k].off);
	}
	sqlite3_finalize(sel);
	ORCH_CHECK(k == n);
	ORCH_CHECK(sqlite3_prepare_v2(db,
		"SELECT count(*) FROM rmap WHERE (ag, agbno, owner, off) >= (?, ?, ?, ?)",
		-1, &sel, NULL) == SQLITE_OK);
	for (int q = 0; q < 200; q++) {
		size_t i = rng_below(n);

		sqlite3_bind_int64(sel, 1, t[i].ag);
		sqlite3_bind_int64(sel, 2, t[i].agbno);
		sqlite3_bind_int64(sel, 3, t[i].owner);
		sqlite3_bind_int64(sel, 4, t[i].off);
		ORCH_CHECK(sqlite3_step(sel) == SQLITE_ROW);
		ORCH_CHECK((size_t)sqlite3_column_int64(sel, 0) == n - i);
		sqlite3_reset(sel);
	}
	sqlite3_finalize(sel);

	/* u64 handles through orch_rec_key_u64 come back in unsigned order */
	ORCH_CHECK(sqlite3_prepare_v2(db, "INSERT OR IGNORE INTO obj VALUES(?, 0)",
				      -1, &ins, NULL) == SQLITE_OK);
	for (k = 0; k < N; k++) {
		hs[k] = k < 4 ? (uint64_t[]){ 0, UINT64_MAX, 1ull << 63,
					      (1ull << 63) - 1 }[k] : rng();
		sqlite3_bind_int64(ins, 1, orch_rec_key_u64(hs[k]));
		ORCH_CHECK(sqlite3_step(ins) == SQLITE_DONE);
		sqlite3_reset(ins);
	}
	sqlite3_finalize(ins);
	qsort(hs, N, sizeof(hs[0]), cmp_u64);
	n = 0;
	for (k = 0; k < N; k++)
		if (k == 0 || hs[k] != hs[k - 1])
			hs[n++] = hs[k];
	ORCH_CHECK(sqlite3_prepare_v2(db, "SELECT h FROM obj", -1, &sel, NULL) == SQLITE_OK);
	for (k = 0; sqlite3_step(sel) == SQLITE_ROW; k++) {
		ORCH_CHECK(k < n);
		ORCH_CHECK(orch_rec_unkey_u64(sqlite3_column_int64(sel, 0)) == hs[k]);
	}
	ORCH_CHECK(k == n);
	sqlite3_finalize(sel);
	sqlite3_close(db);
}

/* --- I26: delete of the last owner frees all its blocks ---------------------- */

struct owned {
	uint64_t h;
	uint64_t blocks[2048];  /* global block numbers */
	uint32_t ag[2048], agbno[2048];
	int n;
	int other;              /* records of other owners */
};

static int collect_owned(void *arg, const struct orch_store_rmap *r)
{
	struct owned *o = arg;

	if (r->owner < 0 || r->handle != o->h) {
		if (r->owner >= 0)
			o->other++;
		return 0;
	}
	for (uint32_t i = 0; i < r->len && o->n < 2048; i++) {
		o->ag[o->n] = r->ag;
		o->agbno[o->n] = r->agbno + i;
		o->n++;
	}
	return 0;
}

/*
 * Does block (ag, agbno) have its csum valid bit set?  -1 on error.  The
 * bitmap is stored as an (int64_t) cast of its bits (store_i.h).
 */
static int csum_bit(sqlite3 *db, uint32_t ag, uint32_t agbno)
{
	sqlite3_stmt *s = NULL;
	int bit = 0;

	if (sqlite3_prepare_v2(db, "SELECT valid FROM csum WHERE ag = ? AND grp = ?",
			       -1, &s, NULL) != SQLITE_OK)
		return -1;
	sqlite3_bind_int64(s, 1, ag);
	sqlite3_bind_int64(s, 2, agbno / ORCH_REC_CSUM_GROUP);
	if (sqlite3_step(s) == SQLITE_ROW) {
		uint64_t valid = (uint64_t)sqlite3_column_int64(s, 0);

		bit = (int)((valid >> (agbno % ORCH_REC_CSUM_GROUP)) & 1);
	}
	sqlite3_finalize(s);
	return bit;
}

STORE_TEST(i26_delete_frees_all_blocks, &geom_small)
{
	const uint64_t h = 0xabcd000000000042ull, keep = 0x1234;
	static struct owned o;
	struct orch_store_info info;
	uint64_t free0, free1, objs0, objs1;
	static unsigned char buf[1 * MiB];
	sqlite3 *db;

	orch_store_info(fx->st, &info);
	/* another object, which must stay */
	fill(buf, 50000, 5, 5);
	ORCH_CHECK_OK(orch_store_write(fx->st, keep, 0, buf, 50000));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK_OK(orch_store_statfs(fx->st, NULL, &free0, NULL, &objs0));

	/* extents longer than maxext, unaligned edges, holes, a punch, a shrink */
	fill(buf, 1 * MiB, 6, 6);
	ORCH_CHECK_OK(orch_store_write(fx->st, h, 0, buf, 700 * KiB));
	ORCH_CHECK_OK(orch_store_write(fx->st, h, 900 * KiB + 17, buf, 100 * KiB));
	for (int i = 0; i < 20; i++)
		ORCH_CHECK_OK(orch_store_write(fx->st, h, 2 * MiB + (uint64_t)i * 3 * BLK + 5,
					       buf + i, 1000));
	ORCH_CHECK_OK(orch_store_write(fx->st, h, 100 * KiB, buf, 64 * KiB));
	ORCH_CHECK_OK(orch_store_punch(fx->st, h, 300 * KiB + 1, 50 * KiB));
	ORCH_CHECK_OK(orch_store_truncate(fx->st, h, 2 * MiB + 40 * BLK));
	ORCH_CHECK_OK(orch_store_sync(fx->st));

	o = (struct owned){ .h = h };
	ORCH_CHECK_OK(orch_store_owners(fx->st, 0, (uint64_t)info.ag_count * info.ag_blocks,
					collect_owned, &o));
	ORCH_CHECK(o.n > 150 && o.n < 2048);
	ORCH_CHECK(o.other > 0); /* keep's */
	ORCH_CHECK_OK(orch_store_statfs(fx->st, NULL, &free1, NULL, NULL));
	ORCH_CHECK(free1 == free0 - (uint64_t)o.n * BLK);
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	for (int i = 0; i < o.n; i++)
		ORCH_CHECK(csum_bit(db, o.ag[i], o.agbno[i]) == 1);
	sqlite3_close(db);
	ORCH_CHECK(store_clean(fx->st, true, "before delete"));

	ORCH_CHECK_OK(orch_store_delete(fx->st, h));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK_OK(orch_store_statfs(fx->st, NULL, &free1, NULL, &objs1));
	ORCH_CHECK(free1 == free0);
	ORCH_CHECK(objs1 == objs0);
	ORCH_CHECK(store_clean(fx->st, true, "after delete"));
	{
		static struct owned after;

		after = (struct owned){ .h = h };
		ORCH_CHECK_OK(orch_store_owners(fx->st, 0, (uint64_t)info.ag_count * info.ag_blocks,
						collect_owned, &after));
		ORCH_CHECK(after.n == 0);
	}
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	for (int i = 0; i < o.n; i++)
		ORCH_CHECK(csum_bit(db, o.ag[i], o.agbno[i]) == 0);
	/* only keep's rows are left: its 13 blocks */
	ORCH_CHECK(db_int(db, "SELECT count(*) FROM obj", -1) == 1);
	ORCH_CHECK(db_int(db, "SELECT count(*) FROM rmap WHERE owner >= 0", -1) ==
		   db_int(db, "SELECT count(*) FROM bmap", -1));
	ORCH_CHECK(db_int(db, "SELECT coalesce(sum(len), 0) FROM rmap "
			       "WHERE owner >= 0", -1) == 13);
	ORCH_CHECK(db_int(db, "SELECT count(*) FROM work", -1) == 0);
	sqlite3_close(db);
	ORCH_CHECK_OK(reopen(fx));
	ORCH_CHECK_OK(orch_store_statfs(fx->st, NULL, &free1, NULL, &objs1));
	ORCH_CHECK(free1 == free0 && objs1 == objs0);
	ORCH_CHECK(store_clean(fx->st, true, "reopened"));
}

static int collect_any(void *arg, const struct orch_store_rmap *r)
{
	struct owned *o = arg;

	if (r->owner < 0)
		return 0;
	for (uint32_t i = 0; i < r->len && o->n < 2048; i++) {
		o->ag[o->n] = r->ag;
		o->agbno[o->n] = r->agbno + i;
		o->n++;
	}
	return 0;
}

/*
 * store_i.h: the csum valid bitmap is an (int64_t) cast of its bits; bit i
 * (block grp * 64 + i) is set exactly for blocks owned by data (I16), bit
 * 63 (a negative INTEGER) included.  Read here with plain SQL.
 */
STORE_TEST(csum_valid_stored_as_documented, &geom_small)
{
	static struct owned o;
	static bool owned[2048];
	struct orch_store_info info;
	static unsigned char buf[1 * MiB];
	sqlite3 *db;
	int bad = 0;

	fill(buf, 1 * MiB, 7, 7);
	ORCH_CHECK_OK(orch_store_write(fx->st, 5, 0, buf, 1 * MiB));
	orch_store_info(fx->st, &info);
	o = (struct owned){ 0 };
	ORCH_CHECK_OK(orch_store_owners(fx->st, 0, (uint64_t)info.ag_count * info.ag_blocks,
					collect_any, &o));
	ORCH_CHECK(o.n == 256);
	memset(owned, 0, sizeof(owned));
	for (int i = 0; i < o.n; i++)
		owned[o.ag[i] * 64 + o.agbno[i]] = true;
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	for (uint32_t g = 0; g < info.ag_count * 64; g++) {
		int bit = csum_bit(db, g / 64, g % 64);

		if (bit != owned[g] && bad++ < 5)
			fprintf(stderr, "block %u/%u: owned %d, valid bit %d\n", g / 64,
				g % 64, owned[g], bit);
	}
	sqlite3_close(db);
	ORCH_CHECK(bad == 0);
}

/* Chunked truncate, punch and delete (more than 256 extents) finish. */
static int make_many_extents(struct orch_store *st, uint64_t h, int n,
			     unsigned char *model)
{
	unsigned char blk[BLK];

	for (int i = 0; i < n; i++) {
		int rc;

		fill(blk, BLK, 600, (uint64_t)i);
		rc = orch_store_write(st, h, (uint64_t)i * 2 * BLK, blk, BLK);
		if (rc)
			return rc;
		if (model)
			memcpy(model + (uint64_t)i * 2 * BLK, blk, BLK);
	}
	return 0;
}

#define CHUNK_N 600
#define CHUNK_SIZE ((uint64_t)(CHUNK_N * 2 - 1) * BLK)

STORE_TEST(chunked_ops_complete, &geom_small)
{
	static unsigned char model[CHUNK_SIZE], rb[CHUNK_SIZE + BLK];
	struct orch_store_stats s;
	uint64_t free0, free1;
	size_t got;

	memset(model, 0, sizeof(model));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK_OK(orch_store_statfs(fx->st, NULL, &free0, NULL, NULL));
	ORCH_CHECK_OK(make_many_extents(fx->st, 1, CHUNK_N, model));
	ORCH_CHECK_OK(make_many_extents(fx->st, 2, CHUNK_N, NULL));
	ORCH_CHECK_OK(make_many_extents(fx->st, 3, CHUNK_N, NULL));
	ORCH_CHECK(store_clean(fx->st, true, "made"));

	ORCH_CHECK_OK(orch_store_punch(fx->st, 1, 3 * BLK + 5, 3 * MiB));
	memset(model + 3 * BLK + 5, 0, 3 * MiB);
	ORCH_CHECK_OK(orch_store_read(fx->st, 1, 0, rb, CHUNK_SIZE + BLK, &got));
	ORCH_CHECK(got == CHUNK_SIZE && memcmp(rb, model, got) == 0);
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 2, 1 * MiB + 100));
	ORCH_CHECK_OK(orch_store_read(fx->st, 2, 0, rb, CHUNK_SIZE, &got));
	ORCH_CHECK(got == 1 * MiB + 100);
	ORCH_CHECK_OK(orch_store_delete(fx->st, 3));
	orch_store_get_stats(fx->st, &s);
	ORCH_CHECK(s.work_chunks >= 3);
	ORCH_CHECK(nobjects(fx) == 2);
	ORCH_CHECK(store_clean(fx->st, true, "chunked"));
	ORCH_CHECK_OK(orch_store_delete(fx->st, 1));
	ORCH_CHECK_OK(orch_store_delete(fx->st, 2));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK_OK(orch_store_statfs(fx->st, NULL, &free1, NULL, NULL));
	ORCH_CHECK(free1 == free0);
	ORCH_CHECK(store_clean(fx->st, true, "all deleted"));
}

/* --- I20: a snapshot's blocks are not reused until it ends ------------------- */

STORE_TEST(i20_snapshot_blocks_not_reused, &geom_small)
{
	const size_t osz = 256 * KiB;
	static unsigned char old[256 * KiB], new[256 * KiB], rb[256 * KiB],
			     fillb[64 * KiB];
	struct orch_store_snap *sn = NULL;
	uint64_t total, written = 0;
	bool snap_ok, held_clean;
	size_t got;
	int rc = 0;

	fill(old, osz, 20, 1);
	fill(new, osz, 20, 2);
	memset(fillb, 0x5a, 64 * KiB);
	ORCH_CHECK_OK(orch_store_write(fx->st, 1, 0, old, osz));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK_OK(orch_store_snap_begin(fx->st, &sn));
	/* (a read first: snapshot_sees_state_at_begin tests the begin alone) */
	rc = orch_store_snap_read(sn, 1, 0, rb, BLK, &got);
	if (rc || got != BLK || memcmp(rb, old, BLK)) {
		orch_store_snap_end(sn);
		ORCH_CHECK(!"first snapshot read");
	}

	ORCH_CHECK_OK(orch_store_write(fx->st, 1, 0, new, osz)); /* frees the old blocks */
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	/* use up every block the allocator may hand out */
	ORCH_CHECK_OK(orch_store_statfs(fx->st, &total, NULL, NULL, NULL));
	while (!rc && written <= total) {
		rc = orch_store_write(fx->st, 2, written, fillb, 64 * KiB);
		if (!rc)
			written += 64 * KiB;
		if (!rc && written % MiB == 0)
			rc = orch_store_sync(fx->st);
	}
	if (rc != -ENOSPC) {
		orch_store_snap_end(sn);
		ORCH_CHECK_RC(rc, -ENOSPC); /* the store must fill up */
	}
	/* smaller writes too, down to one block */
	for (size_t sz = 32 * KiB; sz >= BLK && rc == -ENOSPC; sz /= 2)
		while (!(rc = orch_store_write(fx->st, 2, written, fillb, sz)))
			written += sz;
	if (rc == -ENOSPC)
		rc = orch_store_sync(fx->st);
	if (rc) {
		orch_store_snap_end(sn);
		ORCH_CHECK_OK(rc);
	}

	memset(rb, 0, osz);
	rc = orch_store_snap_read(sn, 1, 0, rb, osz, &got);
	snap_ok = !rc && got == osz && memcmp(rb, old, osz) == 0;
	if (!snap_ok)
		fprintf(stderr, "snapshot read of the old data: %s, got %zu, %s\n",
			strerror(-rc), got, memcmp(rb, new, osz) == 0 ? "the new data" :
			"neither old nor new data");
	rc = orch_store_snap_read(sn, 2, 0, rb, osz, &got);
	snap_ok = snap_ok && !rc && got == 0; /* object 2 did not exist then */
	held_clean = store_clean(fx->st, true, "snapshot held");
	orch_store_snap_end(sn);
	ORCH_CHECK(snap_ok && held_clean);
	ORCH_CHECK_OK(orch_store_read(fx->st, 1, 0, rb, osz, &got));
	ORCH_CHECK(got == osz && memcmp(rb, new, osz) == 0);

	/* ended and synced: the old blocks may be used again */
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK_OK(orch_store_write(fx->st, 3, 0, fillb, 64 * KiB));
	ORCH_CHECK_OK(orch_store_write(fx->st, 3, 64 * KiB, fillb, 64 * KiB));
	ORCH_CHECK_OK(orch_store_read(fx->st, 1, 0, rb, osz, &got));
	ORCH_CHECK(got == osz && memcmp(rb, new, osz) == 0);
	ORCH_CHECK(store_clean(fx->st, true, "snapshot ended"));
}

/* A snapshot sees the store as it was when it began, read or not. */
STORE_TEST(snapshot_sees_state_at_begin, &geom_small)
{
	struct orch_store_snap *sn = NULL;
	char b[8] = { 0 }, b2[8];
	size_t got, got1 = 0, got2 = 0;
	int rc1, rc2;

	ORCH_CHECK_OK(orch_store_write(fx->st, 1, 0, "old", 3));
	ORCH_CHECK_OK(orch_store_snap_begin(fx->st, &sn));
	ORCH_CHECK_OK(orch_store_write(fx->st, 1, 0, "new", 3));
	ORCH_CHECK_OK(orch_store_write(fx->st, 2, 0, "two", 3));
	rc1 = orch_store_snap_read(sn, 1, 0, b, 3, &got1);
	rc2 = orch_store_snap_read(sn, 2, 0, b2, 3, &got2);
	orch_store_snap_end(sn);
	if (got1 != 3 || memcmp(b, "old", 3))
		fprintf(stderr, "snapshot read '%.3s', want 'old'\n", b);
	ORCH_CHECK(!rc1 && got1 == 3 && memcmp(b, "old", 3) == 0);
	ORCH_CHECK(!rc2 && got2 == 0);
	ORCH_CHECK_OK(orch_store_read(fx->st, 1, 0, b, 3, &got));
	ORCH_CHECK(got == 3 && memcmp(b, "new", 3) == 0);
}

/* --- I19, I21, I22: crashes at kill points, in a child ------------------------ */

#define K_NOBJ 3
#define K_OBJMAX (640 * KiB)

static const uint64_t k_handles[K_NOBJ] = {
	0x0002000000000001ull, 0x8002000000000001ull, 0x0002000000000100ull,
};

enum kop_type { K_WRITE, K_SYNC, K_TRUNCATE, K_PUNCH, K_DELETE };

struct kop {
	enum kop_type type;
	bool sync;
	int obj;
	uint64_t off, len;
};

/* Mostly writes; every 4th op a sync; some truncates, punches, deletes. */
static void kops_gen(uint64_t seed, struct kop *ops, int n)
{
	rng_state = seed;
	for (int i = 0; i < n; i++) {
		struct kop *k = &ops[i];
		unsigned int r = (unsigned int)rng_below(20);

		k->sync = i % 4 == 3;
		k->type = k->sync ? K_SYNC : r < 14 ? K_WRITE : r < 17 ? K_TRUNCATE :
			  r < 19 ? K_PUNCH : K_DELETE;
		k->obj = (int)rng_below(K_NOBJ);
		k->len = 1 + rng_below(rng_below(3) ? 8192 : 120 * KiB);
		k->off = rng_below(K_OBJMAX - k->len);
		if (rng_below(3) == 0)
			k->off &= ~(uint64_t)(BLK - 1);
	}
}

static int kop_run(struct orch_store *st, const struct kop *k, const void *buf)
{
	uint64_t h = k_handles[k->obj];

	switch (k->type) {
	case K_SYNC:
		return orch_store_sync(st);
	case K_WRITE:
		return orch_store_write(st, h, k->off, buf, k->len);
	case K_TRUNCATE:
		return orch_store_truncate(st, h, k->off);
	case K_PUNCH:
		return orch_store_punch(st, h, k->off, k->len);
	default:
		return orch_store_delete(st, h);
	}
}

/* Writes one line to the parent; nothing buffered (the child may die). */
static void ack(int fd, char tag, long a, long b)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "%c %ld %ld\n", tag, a, b);

	if (write(fd, line, (size_t)n) != n)
		_exit(5);
}

/*
 * Reads the child's lines until EOF (every holder of the pipe gone), then
 * reaps it.  The child is killed after 120 s.  Returns the text (malloc'd).
 */
static char *child_collect(pid_t pid, int fd, int *status)
{
	size_t cap = 4096, len = 0;
	char *s = malloc(cap);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	time_t deadline = time(NULL) + 120;

	for (;;) {
		ssize_t n;

		if (poll(&p, 1, 1000) == 0) {
			if (time(NULL) > deadline) {
				fprintf(stderr, "child %d hangs: killing it\n", (int)pid);
				kill(pid, SIGKILL);
				deadline = time(NULL) + 3600;
			}
			continue;
		}
		if (len + 1024 > cap)
			s = realloc(s, cap *= 2);
		n = read(fd, s + len, cap - len - 1);
		if (n <= 0)
			break;
		len += (size_t)n;
	}
	s[len] = '\0';
	close(fd);
	waitpid(pid, status, 0);
	return s;
}

/* Number of lines starting with @tag (and the highest number after it). */
static int count_lines(const char *s, char tag, long *last)
{
	int n = 0;

	*last = -1;
	for (const char *p = s; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		if (*p == tag && p[1] == ' ') {
			n++;
			*last = strtol(p + 2, NULL, 10);
		}
	}
	return n;
}

/* Applies ops [0, n) to the model objects. */
static void kmodel_apply(unsigned char **m, uint64_t *size, const struct kop *ops,
			 int n, uint64_t seed, unsigned char *tmp)
{
	for (int i = 0; i < n; i++) {
		const struct kop *k = &ops[i];
		unsigned char *d = m[k->obj];
		uint64_t *sz = &size[k->obj];

		switch (k->type) {
		case K_SYNC:
			break;
		case K_WRITE:
			fill(tmp, k->len, seed, (uint64_t)i);
			memcpy(d + k->off, tmp, k->len);
			if (k->off + k->len > *sz)
				*sz = k->off + k->len;
			break;
		case K_TRUNCATE:
			if (k->off < *sz)
				memset(d + k->off, 0, *sz - k->off);
			*sz = k->off;
			break;
		case K_PUNCH:
			if (k->off < *sz)
				memset(d + k->off, 0, ORCH_MIN_U64(*sz - k->off, k->len));
			break;
		case K_DELETE:
			memset(d, 0, *sz);
			*sz = 0;
			break;
		}
	}
}

/* --- Sharing: clones (I23, I24), dedupe (I25), quarantine (I18) -------------------- */

static uint64_t store_free(struct fx *fx)
{
	uint64_t f = 0;

	return orch_store_statfs(fx->st, NULL, &f, NULL, NULL) ? UINT64_MAX : f / BLK;
}

static bool reads_as(struct fx *fx, uint64_t h, const unsigned char *want, size_t len)
{
	static unsigned char got[2 * MiB];
	size_t n = 0;
	int rc = orch_store_read(fx->st, h, 0, got, sizeof(got), &n);

	if (rc || n != len || memcmp(got, want, len)) {
		fprintf(stderr, "object %llx: rc %d, %zu bytes (want %zu), %s\n",
			(unsigned long long)h, rc, n, len,
			n == len ? "contents differ" : "size differs");
		return false;
	}
	return true;
}

/*
 * Writes @nblk single blocks of @h interleaved with blocks of @other, so
 * that every block of @h is an extent of its own.
 */
static int write_fragmented(struct fx *fx, uint64_t h, uint64_t other, const unsigned char *buf,
			    uint64_t nblk)
{
	int rc = 0;

	for (uint64_t i = 0; !rc && i < nblk; i++) {
		rc = orch_store_write(fx->st, h, i * BLK, buf + i * BLK, BLK);
		if (!rc)
			rc = orch_store_write(fx->st, other, i * BLK, buf, BLK);
	}
	return rc;
}

STORE_TEST(i23_clone_shares_every_block, &geom_small)
{
	const uint64_t a = 0xa, b = 0xb, pad = 0xfeed;
	const uint64_t nblk = 300, size = nblk * BLK - 1000;   /* > STORE_WORK_CHUNK extents */
	static unsigned char buf[2 * MiB];
	struct orch_store_stats s0, s1;
	uint64_t free0;
	sqlite3 *db;

	fill(buf, sizeof(buf), 23, 1);
	ORCH_CHECK_OK(write_fragmented(fx, a, pad, buf, nblk));
	ORCH_CHECK_OK(orch_store_truncate(fx->st, a, size));
	memset(buf + size, 0, BLK);
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	free0 = store_free(fx);
	orch_store_get_stats(fx->st, &s0);

	/* the whole file, its unaligned end included */
	ORCH_CHECK_OK(orch_store_clone(fx->st, a, 0, b, 0, size));
	orch_store_get_stats(fx->st, &s1);
	ORCH_CHECK(s1.commits - s0.commits >= 2);   /* in pieces of STORE_WORK_CHUNK extents */
	ORCH_CHECK(store_free(fx) == free0);        /* no block copied */
	ORCH_CHECK(reads_as(fx, a, buf, size));
	ORCH_CHECK(reads_as(fx, b, buf, size));
	ORCH_CHECK(store_clean(fx->st, true, "after clone"));
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	ORCH_CHECK(db_int(db, "SELECT coalesce(sum(len), 0) FROM refc WHERE refcount=2", -1) ==
		   (int64_t)nblk);
	ORCH_CHECK(db_int(db, "SELECT count(*) FROM obj WHERE flags & 1", -1) == 2);
	sqlite3_close(db);

	/* a clone of a clone, into the middle of a third object: count 3 */
	ORCH_CHECK_OK(orch_store_write(fx->st, 0xc, 0, buf, 8 * BLK));
	ORCH_CHECK_OK(orch_store_clone(fx->st, b, 4 * BLK, 0xc, 2 * BLK, 4 * BLK));
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	ORCH_CHECK(db_int(db, "SELECT coalesce(sum(len), 0) FROM refc WHERE refcount=3", -1) == 4);
	sqlite3_close(db);
	ORCH_CHECK(store_clean(fx->st, true, "clone of a clone"));

	/* bad arguments change nothing */
	ORCH_CHECK(orch_store_clone(fx->st, a, 1, b, 0, BLK) == -EINVAL);
	ORCH_CHECK(orch_store_clone(fx->st, a, 0, b, 0, 100) == -EINVAL);   /* not at EOF */
	ORCH_CHECK(orch_store_clone(fx->st, a, 0, a, 2 * BLK, 4 * BLK) == -EINVAL);
	ORCH_CHECK_OK(reopen(fx));
	ORCH_CHECK(reads_as(fx, b, buf, size));
	ORCH_CHECK(store_clean(fx->st, true, "reopened"));
}

STORE_TEST(i24_overwrite_of_shared_changes_only_the_writer, &geom_small)
{
	const uint64_t a = 0xa, b = 0xb, size = 96 * BLK;
	static unsigned char orig[96 * BLK], mine[96 * BLK], junk[3 * BLK];
	uint64_t free0, free1;
	sqlite3 *db;

	fill(orig, size, 24, 1);
	fill(junk, sizeof(junk), 24, 2);
	ORCH_CHECK_OK(orch_store_write(fx->st, a, 0, orig, size));
	ORCH_CHECK_OK(orch_store_clone(fx->st, a, 0, b, 0, size));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	free0 = store_free(fx);

	/* an unaligned overwrite of b: 3 blocks get new copies */
	memcpy(mine, orig, size);
	memcpy(mine + 10 * BLK + 100, junk, 2 * BLK);
	ORCH_CHECK_OK(orch_store_write(fx->st, b, 10 * BLK + 100, junk, 2 * BLK));
	ORCH_CHECK(reads_as(fx, a, orig, size));
	ORCH_CHECK(reads_as(fx, b, mine, size));
	ORCH_CHECK(store_free(fx) == free0 - 3);
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	ORCH_CHECK(db_int(db, "SELECT coalesce(sum(len), 0) FROM refc", -1) == 96 - 3);
	sqlite3_close(db);
	ORCH_CHECK(store_clean(fx->st, true, "after overwrite"));

	/* punch and truncate of a drop references too; a keeps everything */
	ORCH_CHECK_OK(orch_store_punch(fx->st, a, 20 * BLK, 10 * BLK));
	ORCH_CHECK_OK(orch_store_truncate(fx->st, a, 50 * BLK));
	memset(orig + 20 * BLK, 0, 10 * BLK);
	ORCH_CHECK(reads_as(fx, a, orig, 50 * BLK));
	ORCH_CHECK(reads_as(fx, b, mine, size));
	ORCH_CHECK(store_free(fx) == free0 - 3);   /* b still holds all of them */
	ORCH_CHECK(store_clean(fx->st, true, "after punch and truncate"));

	/* the last owner frees: delete b, then a */
	ORCH_CHECK_OK(orch_store_delete(fx->st, b));
	free1 = store_free(fx);
	ORCH_CHECK(free1 == free0 + (96 - 50) + 10);  /* a's cuts, now b's too, are free */
	ORCH_CHECK(reads_as(fx, a, orig, 50 * BLK));
	ORCH_CHECK_OK(orch_store_delete(fx->st, a));
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	ORCH_CHECK(db_int(db, "SELECT count(*) FROM refc", -1) == 0);
	ORCH_CHECK(db_int(db, "SELECT count(*) FROM rmap WHERE owner >= 0", -1) == 0);
	sqlite3_close(db);
	ORCH_CHECK(store_clean(fx->st, true, "after both deletes"));
}

STORE_TEST(i25_dedupe_shares_only_equal_ranges, &geom_small)
{
	const uint64_t a = 0xa, b = 0xb, size = 40 * BLK;
	static unsigned char data[40 * BLK], other[40 * BLK];
	uint64_t free0, done = 7;

	fill(data, size, 25, 1);
	memcpy(other, data, size);
	other[33 * BLK + 5] ^= 1;
	ORCH_CHECK_OK(orch_store_write(fx->st, a, 0, data, size));
	ORCH_CHECK_OK(orch_store_write(fx->st, b, 0, other, size));
	free0 = store_free(fx);

	/* different: refused, nothing changes */
	ORCH_CHECK(orch_store_dedupe(fx->st, a, 0, b, 0, size, &done) == -EBADE);
	ORCH_CHECK(done == 0 && store_free(fx) == free0);
	ORCH_CHECK(reads_as(fx, b, other, size));

	/* the equal part: shared, b's old blocks freed */
	ORCH_CHECK_OK(orch_store_dedupe(fx->st, a, 0, b, 0, 32 * BLK, &done));
	ORCH_CHECK(done == 32 * BLK);
	ORCH_CHECK(store_free(fx) == free0 + 32);
	ORCH_CHECK(reads_as(fx, a, data, size));
	ORCH_CHECK(reads_as(fx, b, other, size));
	ORCH_CHECK(store_clean(fx->st, true, "after dedupe"));

	/* again: already shared, still equal, nothing more to free */
	ORCH_CHECK_OK(orch_store_dedupe(fx->st, a, 0, b, 0, 32 * BLK, &done));
	ORCH_CHECK(done == 32 * BLK && store_free(fx) == free0 + 32);
	ORCH_CHECK(orch_store_dedupe(fx->st, a, 0, b, 0, 17 * MiB, &done) == -EINVAL);
	/* past both ends (holes of a sparse stripe read as zeros): compared, not shared */
	ORCH_CHECK_OK(orch_store_dedupe(fx->st, a, 0, b, 0, 48 * BLK, &done) == -EBADE ? 0 : -1);
	ORCH_CHECK_OK(orch_store_dedupe(fx->st, a, 36 * BLK, b, 36 * BLK, 12 * BLK, &done));
	ORCH_CHECK(done == 4 * BLK);   /* blocks 36..39 are inside both */
	ORCH_CHECK(store_free(fx) == free0 + 36);
	ORCH_CHECK(store_clean(fx->st, true, "dedupe again"));
}

/* The bad-block hook's calls, for the quarantine test. */
struct bad_seen {
	int n;
	uint64_t h, off, g;
};

static void bad_hook(void *arg, uint64_t h, uint64_t off, uint64_t g)
{
	struct bad_seen *b = arg;

	b->n++;
	b->h = h;
	b->off = off;
	b->g = g;
}

/* The physical block of object 0x18's block 9. */
static int find_block_9(void *arg, const struct orch_store_rmap *r)
{
	uint64_t *g = arg;

	if (r->handle == 0x18 && r->owner >= 0 && r->fileoff <= 9 && 9 < r->fileoff + r->len)
		*g = ((uint64_t)r->ag << 6) + r->agbno + (9 - r->fileoff);   /* geom_small: 64 */
	return 0;
}

STORE_TEST(i18_quarantined_blocks_never_reused, &geom_small)
{
	const uint64_t h = 0x18, filler = 0x19;
	static unsigned char buf[16 * BLK];
	static struct owned o;
	struct orch_store_info info;
	struct bad_seen seen = { 0 };
	uint64_t free0, bad_owned, bad_free, g;
	size_t got;
	char path[128];
	int fd, rc;
	sqlite3 *db;

	orch_store_info(fx->st, &info);
	orch_store_set_bad_hook(fx->st, bad_hook, &seen);
	fill(buf, sizeof(buf), 18, 1);
	ORCH_CHECK_OK(orch_store_write(fx->st, h, 0, buf, sizeof(buf)));
	o = (struct owned){ .h = h };
	ORCH_CHECK_OK(orch_store_owners(fx->st, 0, (uint64_t)info.ag_count * info.ag_blocks,
					collect_owned, &o));
	ORCH_CHECK(o.n == 16);
	bad_owned = (uint64_t)o.ag[5] * info.ag_blocks + o.agbno[5];
	bad_free = (uint64_t)info.ag_count * info.ag_blocks - 3;  /* free: the store is empty */
	free0 = store_free(fx);

	ORCH_CHECK(orch_store_quarantine(fx->st, 0, 1) == -EINVAL);   /* the superblock */
	ORCH_CHECK_OK(orch_store_quarantine(fx->st, bad_free, 2));
	ORCH_CHECK_OK(orch_store_quarantine(fx->st, bad_free, 2));   /* idempotent */
	ORCH_CHECK(store_free(fx) == free0 - 2);
	ORCH_CHECK_OK(orch_store_quarantine(fx->st, bad_owned, 1));
	ORCH_CHECK(store_free(fx) == free0 - 2);   /* still h's */
	ORCH_CHECK(reads_as(fx, h, buf, sizeof(buf)));
	ORCH_CHECK(store_clean(fx->st, true, "quarantined"));

	/* h lets go of it: retired, not freed */
	ORCH_CHECK_OK(orch_store_write(fx->st, h, 5 * BLK, buf, BLK));
	ORCH_CHECK(store_free(fx) == free0 - 3);
	ORCH_CHECK(store_clean(fx->st, true, "retired"));

	/* fill the store: no bad block is ever handed out */
	for (uint64_t i = 0; (rc = orch_store_write(fx->st, filler, i * sizeof(buf), buf,
						     sizeof(buf))) == 0; i++)
		;
	ORCH_CHECK(rc == -ENOSPC);
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	ORCH_CHECK(db_int(db, "SELECT count(*) FROM rmap WHERE owner=-2", -1) >= 2);
	ORCH_CHECK(db_int(db, "SELECT coalesce(sum(len), 0) FROM bad", -1) == 3);
	sqlite3_close(db);
	ORCH_CHECK(store_clean(fx->st, false, "full"));

	/* a read that finds a bad checksum reports it and quarantines the block */
	ORCH_CHECK_OK(orch_store_delete(fx->st, filler));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	g = UINT64_MAX;
	ORCH_CHECK_OK(orch_store_owners(fx->st, 0, (uint64_t)info.ag_count * info.ag_blocks,
					find_block_9, &g));
	ORCH_CHECK(g != UINT64_MAX);
	snprintf(path, sizeof(path), "%s/blocks", fx->dir);
	fd = open(path, O_WRONLY);
	ORCH_CHECK(fd >= 0);
	ORCH_CHECK(pwrite(fd, "rot", 3, (off_t)(g * BLK + 77)) == 3);
	close(fd);
	ORCH_CHECK(orch_store_read(fx->st, h, 9 * BLK, buf, BLK, &got) == -EIO);
	ORCH_CHECK(seen.n == 1 && seen.h == h && seen.off == 9 * BLK && seen.g == g);
	ORCH_CHECK_OK(orch_store_sync(fx->st));    /* behind the quarantine in the queue */
	ORCH_CHECK_OK(orch_store_truncate(fx->st, 0x77, 1));
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	ORCH_CHECK(db_int(db, "SELECT coalesce(sum(len), 0) FROM bad", -1) == 4);
	sqlite3_close(db);
}

/*
 * Reads and scrubs quarantine one block at a time, so one extent can hold
 * a bad record per block: every one of them is retired when the file goes,
 * whether it goes in one transaction or in chunks (a work item).
 */
static const struct orch_store_geom geom_bad = {
	.size = 64 * MiB, .ag_blocks = 4096, .maxext = 256,
};

static int find_block_1000(void *arg, const struct orch_store_rmap *r)
{
	uint64_t *g = arg;

	if (r->handle == 0x51 && r->owner >= 0 && r->fileoff <= 1000 &&
	    1000 < r->fileoff + r->len)
		*g = ((uint64_t)r->ag << 12) + r->agbno + (1000 - r->fileoff);
	return 0;
}

STORE_TEST(i18_many_bad_records_in_one_extent, &geom_bad)
{
	static unsigned char buf[300 * BLK];   /* write_fragmented reads 300 blocks */
	struct orch_store_info info;
	uint64_t g = UINT64_MAX, free0;
	sqlite3 *db;

	orch_store_info(fx->st, &info);
	fill(buf, sizeof(buf), 51, 1);
	/* Over STORE_WORK_CHUNK extents: the delete becomes a work item. */
	ORCH_CHECK_OK(write_fragmented(fx, 0x51, 0x99, buf, 300));
	ORCH_CHECK_OK(orch_store_write(fx->st, 0x51, 1000 * BLK, buf, 200 * BLK));
	ORCH_CHECK_OK(orch_store_owners(fx->st, 0, (uint64_t)info.ag_count * info.ag_blocks,
					find_block_1000, &g));
	ORCH_CHECK(g != UINT64_MAX);
	for (uint64_t i = 0; i < 100; i++)
		ORCH_CHECK_OK(orch_store_quarantine(fx->st, g + 2 * i, 1));
	ORCH_CHECK_OK(orch_store_quarantine(fx->st, g, 200));   /* fills the gaps, merged */
	ORCH_CHECK(store_clean(fx->st, false, "quarantined"));
	free0 = store_free(fx);
	ORCH_CHECK_OK(orch_store_delete(fx->st, 0x51));
	ORCH_CHECK(store_free(fx) == free0 + 300);   /* the other 300 blocks */
	ORCH_CHECK_OK(reopen(fx));
	ORCH_CHECK(store_clean(fx->st, true, "deleted"));
	db = db_ro(fx->dir);
	ORCH_CHECK(db);
	ORCH_CHECK(db_int(db, "SELECT coalesce(sum(len), 0) FROM rmap WHERE owner=-2", -1) == 200);
	ORCH_CHECK(db_int(db, "SELECT count(*) FROM bad", -1) <= 4);
	sqlite3_close(db);
}

/*
 * One crash: a child runs @nops ops with ORCH_STORE_KILL=@spec and is
 * killed at the point; every acknowledged op must be there after reopen,
 * the op in progress entirely there or entirely not (not at all for
 * "data"), and the checker clean.
 */
static bool kill_round(const char *spec, uint64_t seed)
{
	enum { NOPS = 64 };
	struct kop ops[NOPS];
	unsigned char *m_old[K_NOBJ], *m_new[K_NOBJ], *tmp = malloc(K_OBJMAX),
		      *rb = malloc(K_OBJMAX + BLK);
	uint64_t s_old[K_NOBJ] = { 0 }, s_new[K_NOBJ] = { 0 };
	struct fx fx;
	int pfd[2], status, nack, inprog = -1;
	long last;
	char *out;
	pid_t pid;
	bool ok = false;

	for (int i = 0; i < K_NOBJ; i++) {
		m_old[i] = calloc(1, K_OBJMAX);
		m_new[i] = calloc(1, K_OBJMAX);
	}
	kops_gen(seed, ops, NOPS);
	if (fx_setup(&fx, &geom_small))
		goto out;
	orch_store_close(fx.st);
	fx.st = NULL;
	if (pipe(pfd))
		goto out;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct orch_store *st;
		unsigned char *buf = malloc(K_OBJMAX);

		close(pfd[0]);
		setenv("ORCH_STORE_KILL", spec, 1);
		if (orch_store_open(fx.dir, &st))
			_exit(3);
		ack(pfd[1], 'O', 0, 0);
		for (int i = 0; i < NOPS; i++) {
			int rc;

			if (ops[i].type == K_WRITE)
				fill(buf, ops[i].len, seed, (uint64_t)i);
			rc = kop_run(st, &ops[i], buf);
			if (rc) {
				ack(pfd[1], 'X', i, rc);
				_exit(2);
			}
			ack(pfd[1], 'A', i, 0);
		}
		orch_store_close(st);
		ack(pfd[1], 'E', 0, 0);
		_exit(0);
	}
	close(pfd[1]);
	out = child_collect(pid, pfd[0], &status);
	nack = count_lines(out, 'A', &last);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
		fprintf(stderr, "%s: child was not killed (status %#x): %s\n", spec,
			status, out);
		free(out);
		goto out;
	}
	if (!count_lines(out, 'O', &last))
		fprintf(stderr, "note: %s: killed inside orch_store_open\n", spec);
	free(out);
	if (nack < NOPS && ops[nack].type != K_SYNC)
		inprog = nack;
	kmodel_apply(m_old, s_old, ops, nack, seed, tmp);
	kmodel_apply(m_new, s_new, ops, inprog >= 0 ? nack + 1 : nack, seed, tmp);

	if (!fx_reopen_clean(&fx, spec))
		goto out;
	for (int i = 0; i < K_NOBJ; i++) {
		size_t got;
		int rc = orch_store_read(fx.st, k_handles[i], 0, rb, K_OBJMAX + BLK, &got);
		bool is_old, is_new;

		if (rc) {
			fprintf(stderr, "%s: read object %d: %s\n", spec, i, strerror(-rc));
			goto out;
		}
		is_old = got == s_old[i] && memcmp(rb, m_old[i], got) == 0;
		is_new = got == s_new[i] && memcmp(rb, m_new[i], got) == 0;
		if (!is_old && !is_new) {
			fprintf(stderr, "%s: object %d after %d acked ops (op %d in "
				"progress): neither old nor new state (got %zu, sizes "
				"%llu/%llu)\n", spec, i, nack, inprog, got,
				(unsigned long long)s_old[i], (unsigned long long)s_new[i]);
			goto out;
		}
		if (!is_old && strncmp(spec, "data", 4) == 0) {
			fprintf(stderr, "%s: op %d (type %d) killed before its commit is "
				"there\n", spec, inprog, inprog >= 0 ? (int)ops[inprog].type : -1);
			goto out;
		}
		if (inprog >= 0 && ops[inprog].obj == i && strncmp(spec, "commit", 6) == 0)
			fprintf(stderr, "note: %s: committed op %d (type %d) is %s after "
				"the crash\n", spec, inprog, (int)ops[inprog].type,
				is_new && !is_old ? "there" : "not there (or a no-op)");
	}
	/* and it works on */
	if (orch_store_write(fx.st, k_handles[0], 0, "again", 5) ||
	    !store_clean(fx.st, true, spec))
		goto out;
	ok = true;
out:
	fx_teardown(&fx);
	for (int i = 0; i < K_NOBJ; i++) {
		free(m_old[i]);
		free(m_new[i]);
	}
	free(tmp);
	free(rb);
	return ok;
}

ORCH_TEST(i19_i22_kill_points)
{
	static const char *specs[] = {
		"data", "data:4", "data:17", "commit", "commit:5", "commit:23",
		"flush", "flush:2", "flush:5",
	};
	uint64_t seed = test_seed();

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		if (!kill_round(specs[i], seed + i)) {
			fprintf(stderr, "kill point %s failed: replay with ORCH_TEST_SEED=%llu\n",
				specs[i], (unsigned long long)seed);
			orch_test_failed = 1;
		}
	}
}

/*
 * The same with four threads writing at once, so that the writer commits
 * several writes per transaction: every acknowledged write is there, each
 * thread's write in flight entirely or not at all.
 */
#define B_THREADS 4
#define B_REGIONS 6     /* per thread */
#define B_OPS 40        /* per thread */

struct bregion {
	int obj;
	uint64_t off, len;
};

struct bthread {
	struct orch_store *st;
	const struct bregion *reg;   /* this thread's B_REGIONS */
	uint64_t seed;
	int t, fd;
};

static uint64_t b_tag(int t, int j)
{
	return (uint64_t)t * 1000 + (uint64_t)j;
}

static void *b_writer(void *p)
{
	static __thread unsigned char buf[64 * KiB]; /* the child may be killed */
	struct bthread *a = p;

	for (int j = 0; j < B_OPS; j++) {
		const struct bregion *g = &a->reg[j % B_REGIONS];
		int rc;

		fill(buf, g->len, a->seed, b_tag(a->t, j));
		rc = orch_store_write(a->st, k_handles[g->obj], g->off, buf, g->len);
		if (rc)
			ack(a->fd, 'X', a->t, rc);
		else
			ack(a->fd, 'A', a->t, j);
	}
	return NULL;
}

/*
 * After a crash: every object holds, in each region, thread t's last
 * write there among its first @done[t] (zeros if none), or its write
 * @done[t], which may have reached the disk without being acknowledged;
 * and zeros outside the regions.
 */
static bool b_objects_hold(struct orch_store *st, const struct bregion *reg,
			   const int *done, uint64_t seed, const char *ctx)
{
	static unsigned char rb[K_OBJMAX + BLK], want[64 * KiB];

	for (int obj = 0; obj < K_NOBJ; obj++) {
		size_t got;

		memset(rb, 0, sizeof(rb));
		if (orch_store_read(st, k_handles[obj], 0, rb, K_OBJMAX, &got)) {
			fprintf(stderr, "%s: read failed\n", ctx);
			return false;
		}
		for (int r = obj; r < B_THREADS * B_REGIONS; r += K_NOBJ) {
			int t = r / B_REGIONS, ri = r % B_REGIONS, last = -1;
			bool match;

			/* thread t's j-th write went to region j % B_REGIONS */
			for (int j = ri; j < done[t]; j += B_REGIONS)
				last = j;
			memset(want, 0, reg[r].len);
			if (last >= 0)
				fill(want, reg[r].len, seed, b_tag(t, last));
			match = memcmp(rb + reg[r].off, want, reg[r].len) == 0;
			if (!match && done[t] < B_OPS && done[t] % B_REGIONS == ri) {
				fill(want, reg[r].len, seed, b_tag(t, done[t]));
				match = memcmp(rb + reg[r].off, want, reg[r].len) == 0;
			}
			if (!match) {
				fprintf(stderr, "%s: region %d (thread %d, %d writes done): neither "
					"its last done write nor the one after it\n",
					ctx, r, t, done[t]);
				return false;
			}
			memset(rb + reg[r].off, 0, reg[r].len);
		}
		if (!all_zero(rb, K_OBJMAX)) {
			fprintf(stderr, "%s: object %d: bytes outside every region\n", ctx, obj);
			return false;
		}
	}
	return true;
}

static bool batch_kill_round(const char *spec, uint64_t seed)
{
	static struct bregion reg[B_THREADS * B_REGIONS];
	int nack[B_THREADS] = { 0 }, pfd[2], status;
	struct fx fx;
	char *out;
	pid_t pid;
	bool ok = false;

	rng_state = seed;
	for (int r = 0; r < B_THREADS * B_REGIONS; r++) {
		reg[r].obj = r % K_NOBJ;
		/* 8 slots of 80 KiB per object */
		reg[r].off = (uint64_t)(r / K_NOBJ) * 80 * KiB + rng_below(8192);
		reg[r].len = 1 + rng_below(64 * KiB);
	}
	if (fx_setup(&fx, &geom_small))
		goto out;
	orch_store_close(fx.st);
	fx.st = NULL;
	if (pipe(pfd))
		goto out;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct bthread a[B_THREADS];
		pthread_t th[B_THREADS];
		struct orch_store *st;

		close(pfd[0]);
		setenv("ORCH_STORE_KILL", spec, 1);
		if (orch_store_open(fx.dir, &st))
			_exit(3);
		for (int t = 0; t < B_THREADS; t++) {
			a[t] = (struct bthread){ st, &reg[t * B_REGIONS], seed, t, pfd[1] };
			pthread_create(&th[t], NULL, b_writer, &a[t]);
		}
		for (int t = 0; t < B_THREADS; t++)
			pthread_join(th[t], NULL);
		orch_store_close(st);
		ack(pfd[1], 'E', 0, 0);
		_exit(0);
	}
	close(pfd[1]);
	out = child_collect(pid, pfd[0], &status);
	for (const char *p = out; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		if (*p == 'A') {
			int t = atoi(p + 2);

			nack[t]++;
		} else if (*p == 'X') {
			fprintf(stderr, "%s: a write failed: %.40s\n", spec, p);
			free(out);
			goto out;
		}
	}
	free(out);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL) {
		fprintf(stderr, "%s: child was not killed (status %#x)\n", spec, status);
		goto out;
	}
	if (!fx_reopen_clean(&fx, spec))
		goto out;
	if (!b_objects_hold(fx.st, reg, nack, seed, spec))
		goto out;
	ok = true;
out:
	fx_teardown(&fx);
	return ok;
}

ORCH_TEST(i19_i22_kill_points_batched)
{
	static const char *specs[] = { "data:3", "data:20", "commit:2", "commit:9", "commit:30" };
	uint64_t seed = test_seed();

	for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
		if (!batch_kill_round(specs[i], seed + i)) {
			fprintf(stderr, "kill point %s (batched) failed: replay with "
				"ORCH_TEST_SEED=%llu\n", specs[i], (unsigned long long)seed);
			orch_test_failed = 1;
		}
	}
}

/*
 * I21: killed after the first (or second) chunk of a delete, truncate or
 * punch of an object with 600 extents; open finishes the work.
 */
static bool chunk_round(const char *what, const char *spec)
{
	unsigned char *model = calloc(1, CHUNK_SIZE), *rb = malloc(CHUNK_SIZE + BLK),
		      keepb[3000];
	uint64_t size = CHUNK_SIZE, free0, free1;
	struct fx fx;
	int pfd[2], status;
	size_t got;
	pid_t pid;
	char *out, ctx[64];
	long last;
	bool ok = false;

	snprintf(ctx, sizeof(ctx), "%s at %s", what, spec);
	if (fx_setup(&fx, &geom_small))
		goto out;
	fill(keepb, sizeof(keepb), 3, 3);
	if (orch_store_write(fx.st, 99, 0, keepb, sizeof(keepb)) ||
	    orch_store_sync(fx.st) ||
	    orch_store_statfs(fx.st, NULL, &free0, NULL, NULL) ||
	    make_many_extents(fx.st, 1, CHUNK_N, model))
		goto out;
	orch_store_close(fx.st);
	fx.st = NULL;
	if (pipe(pfd))
		goto out;
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		struct orch_store *st;
		int rc;

		close(pfd[0]);
		setenv("ORCH_STORE_KILL", spec, 1);
		if (orch_store_open(fx.dir, &st))
			_exit(3);
		ack(pfd[1], 'O', 0, 0);
		if (strcmp(what, "delete") == 0)
			rc = orch_store_delete(st, 1);
		else if (strcmp(what, "truncate") == 0)
			rc = orch_store_truncate(st, 1, 1 * MiB + 100);
		else
			rc = orch_store_punch(st, 1, 3 * BLK + 5, 3 * MiB);
		ack(pfd[1], 'A', rc, 0);
		orch_store_close(st);
		_exit(0);
	}
	close(pfd[1]);
	out = child_collect(pid, pfd[0], &status);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL ||
	    !count_lines(out, 'O', &last) || count_lines(out, 'A', &last)) {
		fprintf(stderr, "%s: child not killed at the chunk (status %#x): %s\n",
			ctx, status, out);
		free(out);
		goto out;
	}
	free(out);
	if (!fx_reopen_clean(&fx, ctx))
		goto out;
	if (strcmp(what, "delete") == 0) {
		size = 0;
	} else if (strcmp(what, "truncate") == 0) {
		size = 1 * MiB + 100;
		memset(model + size, 0, CHUNK_SIZE - size);
	} else {
		memset(model + 3 * BLK + 5, 0, 3 * MiB);
	}
	if (orch_store_read(fx.st, 1, 0, rb, CHUNK_SIZE + BLK, &got) || got != size ||
	    memcmp(rb, model, size)) {
		fprintf(stderr, "%s: object 1 not as the finished %s leaves it "
			"(got %zu, want %llu)\n", ctx, what, got, (unsigned long long)size);
		goto out;
	}
	if (nobjects(&fx) != (strcmp(what, "delete") == 0 ? 1u : 2u) ||
	    orch_store_read(fx.st, 99, 0, rb, sizeof(keepb) + 1, &got) ||
	    got != sizeof(keepb) || memcmp(rb, keepb, got)) {
		fprintf(stderr, "%s: the other object changed\n", ctx);
		goto out;
	}
	/* everything freed comes back */
	if (orch_store_delete(fx.st, 1) || orch_store_sync(fx.st) ||
	    orch_store_statfs(fx.st, NULL, &free1, NULL, NULL) || free1 != free0) {
		fprintf(stderr, "%s: free space not restored\n", ctx);
		goto out;
	}
	ok = store_clean(fx.st, true, ctx);
out:
	fx_teardown(&fx);
	free(model);
	free(rb);
	return ok;
}

ORCH_TEST(i21_chunked_work_resumed_at_open)
{
	static const char *whats[] = { "delete", "truncate", "punch" };
	static const char *specs[] = { "chunk", "chunk:2" };

	for (size_t i = 0; i < 3; i++)
		for (size_t j = 0; j < 2; j++)
			if (!chunk_round(whats[i], specs[j]))
				orch_test_failed = 1;
}

/* --- Power loss: the pcut layer, in a child ------------------------------------ */

#define P_REGIONS 12
#define P_OPS 40
#define P_SLOT (256 * KiB)

struct pregion {
	int obj;
	uint64_t off, len;
};

struct pop {
	bool sync;
	int region;
};

/*
 * Forks the child of a power-cut round on a new store of @fx: the child
 * (0 returned) runs with the power-cut layer set to cut at its @at-th
 * recorded write, and reports on pfd[1]; the layer creates @done once it
 * has put the files back as they were at the cut.  The parent gets the
 * pid, or -1.
 */
static pid_t pcut_fork(struct fx *fx, unsigned int at, char *done, size_t ndone, int pfd[2])
{
	char atbuf[16];
	pid_t pid;

	if (fx_setup(fx, &geom_small))
		return -1;
	orch_store_close(fx->st);
	fx->st = NULL;
	snprintf(done, ndone, "%s.pcut-done", fx->dir);
	unlink(done);
	if (pipe(pfd))
		return -1;
	fflush(NULL);
	pid = fork();
	if (pid != 0)
		return pid;
	close(pfd[0]);
	snprintf(atbuf, sizeof(atbuf), "%u", at);
	setenv("ORCH_PCUT", "1", 1);
	setenv("ORCH_PCUT_AT", atbuf, 1);
	setenv("ORCH_PCUT_DONE", done, 1);
	orch_pcut_init();
	return 0;
}

/*
 * The parent's side of pcut_fork(): the child's reports (to free), once it
 * ended in the power cut and the files are back as they were at the cut,
 * or NULL.
 */
static char *pcut_collect(struct fx *fx, pid_t pid, int pfd[2], const char *done,
			  const char *ctx)
{
	int status;
	char *out;

	close(pfd[1]);
	out = child_collect(pid, pfd[0], &status);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 137) {
		fprintf(stderr, "%s: child did not end in a power cut (status %#x): %s\n",
			ctx, status, out);
		free(out);
		return NULL;
	}
	for (int tries = 0; access(done, F_OK) != 0 && tries < 3000; tries++)
		usleep(10000);
	if (access(done, F_OK) != 0) {
		fprintf(stderr, "%s: files not put back\n", ctx);
		free(out);
		return NULL;
	}
	unlink(done);
	/*
	 * The reverting process inherited the store lock; it lets go as it
	 * exits, which may be a moment after the pipe and the done file.
	 */
	for (int tries = 0; orch_store_check_unused(fx->dir) == -EBUSY && tries < 1000; tries++)
		usleep(10000);
	return out;
}

/*
 * A child writes whole regions (disjoint blocks) and syncs, and cuts the
 * power at its @at-th recorded write (or at the end).  After reopen: every
 * region holds exactly its value at the last completed sync or one written
 * after it, nothing reads as garbage or fails, the checker is clean.
 */
static bool pcut_round(uint64_t seed, unsigned int at)
{
	struct pregion reg[P_REGIONS];
	struct pop ops[P_OPS];
	/* static: the child exits with _exit, and valgrind counts leaks then */
	static unsigned char rb[4 * P_SLOT], want[P_SLOT];
	char done[128], *out, ctx[64];
	struct fx fx;
	int pfd[2];
	pid_t pid;
	bool ok = false;
	bool acked[P_OPS] = { false };
	int synced_upto = 0; /* ops before this index are durable */
	int lost = 0;

	snprintf(ctx, sizeof(ctx), "power cut at write %u", at);
	rng_state = seed;
	for (int r = 0; r < P_REGIONS; r++) {
		reg[r].obj = r % 3;
		reg[r].off = (uint64_t)(r / 3) * P_SLOT + rng_below(8192);
		reg[r].len = 1 + rng_below(200 * KiB);
	}
	for (int i = 0; i < P_OPS; i++) {
		ops[i].sync = rng_below(4) == 0;
		ops[i].region = (int)rng_below(P_REGIONS);
	}
	pid = pcut_fork(&fx, at, done, sizeof(done), pfd);
	if (pid < 0)
		goto out;
	if (pid == 0) {
		static unsigned char buf[P_SLOT];
		struct orch_store *st;

		if (orch_store_open(fx.dir, &st))
			_exit(3);
		ack(pfd[1], 'O', 0, 0);
		for (int i = 0; i < P_OPS; i++) {
			const struct pregion *g = &reg[ops[i].region];
			int rc;

			if (ops[i].sync) {
				rc = orch_store_sync(st);
			} else {
				fill(buf, g->len, seed, (uint64_t)i);
				rc = orch_store_write(st, k_handles[g->obj], g->off, buf, g->len);
			}
			if (rc) {
				ack(pfd[1], 'X', i, rc);
				_exit(2);
			}
			ack(pfd[1], 'A', i, 0);
		}
		ack(pfd[1], 'E', 0, 0);
		orch_pcut_cut();
	}
	out = pcut_collect(&fx, pid, pfd, done, ctx);
	if (!out)
		goto out;
	for (const char *p = out; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		if (*p == 'A') {
			int i = atoi(p + 2);

			acked[i] = true;
			if (ops[i].sync)
				synced_upto = i;
		}
	}
	free(out);
	if (!fx_reopen_clean(&fx, ctx))
		goto out;
	for (int obj = 0; obj < 3; obj++) {
		size_t got;
		int rc;

		memset(rb, 0, 4 * P_SLOT);
		rc = orch_store_read(fx.st, k_handles[obj], 0, rb, 4 * P_SLOT, &got);
		if (rc) {
			fprintf(stderr, "%s: read object %d: %s\n", ctx, obj, strerror(-rc));
			goto out;
		}
		for (int r = obj; r < P_REGIONS; r += 3) {
			const struct pregion *g = &reg[r];
			int last_durable = -1;
			bool match = false;

			/* the last write to it that a completed sync covers */
			for (int i = 0; i < synced_upto; i++)
				if (!ops[i].sync && ops[i].region == r)
					last_durable = i;
			memset(want, 0, g->len);
			if (last_durable >= 0)
				fill(want, g->len, seed, (uint64_t)last_durable);
			match = memcmp(rb + g->off, want, g->len) == 0;
			/* or any write after it (acked, or the one in progress) */
			for (int i = last_durable + 1; i < P_OPS && !match; i++) {
				if (ops[i].sync || ops[i].region != r)
					continue;
				if (i > 0 && !acked[i - 1])
					break;
				fill(want, g->len, seed, (uint64_t)i);
				match = memcmp(rb + g->off, want, g->len) == 0;
			}
			if (!match) {
				fprintf(stderr, "%s: object %d region %d (off %llu len %llu): "
					"neither its synced value (write %d) nor a later one\n",
					ctx, obj, r, (unsigned long long)g->off,
					(unsigned long long)g->len, last_durable);
				goto out;
			}
			/* did the cut take back an acknowledged, unsynced write? */
			for (int i = P_OPS - 1; i > last_durable; i--) {
				if (ops[i].sync || ops[i].region != r || !acked[i])
					continue;
				fill(want, g->len, seed, (uint64_t)i);
				lost += memcmp(rb + g->off, want, g->len) != 0;
				break;
			}
			memset(rb + g->off, 0, g->len);
		}
		if (!all_zero(rb, 4 * P_SLOT)) {
			fprintf(stderr, "%s: object %d: bytes outside every region\n", ctx, obj);
			goto out;
		}
	}
	printf("%s: %d regions lost acknowledged writes that no sync covered\n",
	       ctx, lost);
	if (orch_store_write(fx.st, k_handles[0], 0, "again", 5) ||
	    orch_store_sync(fx.st) || !store_clean(fx.st, true, ctx))
		goto out;
	ok = true;
out:
	fx_teardown(&fx);
	return ok;
}

ORCH_TEST(i22_power_cut)
{
	static const unsigned int ats[] = { 1, 3, 8, 15, 30, 60, 100, 160, 250, 400, 100000 };
	uint64_t seed = test_seed();

	for (size_t i = 0; i < sizeof(ats) / sizeof(ats[0]); i++) {
		if (!pcut_round(seed + i, ats[i])) {
			fprintf(stderr, "power cut at %u failed: replay with ORCH_TEST_SEED=%llu\n",
				ats[i], (unsigned long long)seed);
			orch_test_failed = 1;
		}
	}
}

/*
 * Power loss with concurrent syncs: B_THREADS threads each write one of
 * their regions and sync, over and over, so that syncs ride on flushes
 * in progress, start the next one, or find their commit durable already,
 * while the writer commits during flushes.  After the cut every write a
 * thread saw its sync return for is there (or the thread's one write
 * after it), the checker is clean and every block matches its checksum.
 */
struct sthread {
	struct orch_store *st;
	const struct bregion *reg;   /* this thread's B_REGIONS */
	uint64_t seed;
	int t, fd;
};

static void *s_writer(void *p)
{
	static __thread unsigned char buf[64 * KiB];
	struct sthread *a = p;

	for (int j = 0; j < B_OPS; j++) {
		const struct bregion *g = &a->reg[j % B_REGIONS];
		int rc;

		fill(buf, g->len, a->seed, b_tag(a->t, j));
		rc = orch_store_write(a->st, k_handles[g->obj], g->off, buf, g->len);
		if (!rc)
			rc = orch_store_sync(a->st);
		if (rc) {
			ack(a->fd, 'X', a->t, rc);
			return NULL;
		}
		ack(a->fd, 'S', a->t, j);
	}
	return NULL;
}

/* When > 0: the WAL pages at which a flush checkpoints, in sync_cut_round. */
static int sync_cut_ckpt_pages;

static bool sync_cut_round(uint64_t seed, unsigned int at)
{
	static struct bregion reg[B_THREADS * B_REGIONS];
	int synced[B_THREADS], pfd[2];
	char done[128], ctx[64], *out;
	struct fx fx;
	pid_t pid;
	bool ok = false;

	snprintf(ctx, sizeof(ctx), "power cut at write %u, concurrent syncs", at);
	for (int t = 0; t < B_THREADS; t++)
		synced[t] = -1;
	rng_state = seed;
	for (int r = 0; r < B_THREADS * B_REGIONS; r++) {
		reg[r].obj = r % K_NOBJ;
		reg[r].off = (uint64_t)(r / K_NOBJ) * 80 * KiB + rng_below(8192);
		reg[r].len = 1 + rng_below(64 * KiB);
	}
	pid = pcut_fork(&fx, at, done, sizeof(done), pfd);
	if (pid < 0)
		goto out;
	if (pid == 0) {
		struct sthread a[B_THREADS];
		pthread_t th[B_THREADS];
		struct orch_store *st;

		if (orch_store_open(fx.dir, &st))
			_exit(3);
		if (sync_cut_ckpt_pages > 0)
			st->st_ckpt_pages = sync_cut_ckpt_pages;
		for (int t = 0; t < B_THREADS; t++) {
			a[t] = (struct sthread){ st, &reg[t * B_REGIONS], seed, t, pfd[1] };
			pthread_create(&th[t], NULL, s_writer, &a[t]);
		}
		for (int t = 0; t < B_THREADS; t++)
			pthread_join(th[t], NULL);
		ack(pfd[1], 'E', 0, 0);
		orch_pcut_cut();
	}
	out = pcut_collect(&fx, pid, pfd, done, ctx);
	if (!out)
		goto out;
	for (const char *p = out; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
		if (*p == 'S') {
			int t = atoi(p + 2);
			const char *sp = strchr(p + 2, ' ');

			if (t >= 0 && t < B_THREADS && sp)
				synced[t] = atoi(sp + 1);
		} else if (*p == 'X') {
			fprintf(stderr, "%s: a write or sync failed: %.40s\n", ctx, p);
			free(out);
			goto out;
		}
	}
	free(out);
	if (!fx_reopen_clean(&fx, ctx))
		goto out;
	/* Thread t's writes up to its last synced one must be there. */
	for (int t = 0; t < B_THREADS; t++)
		synced[t]++;
	if (!b_objects_hold(fx.st, reg, synced, seed, ctx))
		goto out;
	ok = true;
out:
	fx_teardown(&fx);
	return ok;
}

ORCH_TEST(i22_power_cut_concurrent_syncs)
{
	static const unsigned int ats[] = { 2, 9, 25, 60, 120, 250, 500, 900, 100000 };
	uint64_t seed = test_seed();

	for (size_t i = 0; i < sizeof(ats) / sizeof(ats[0]); i++) {
		if (!sync_cut_round(seed + i, ats[i])) {
			fprintf(stderr, "power cut at %u (concurrent syncs) failed: replay "
				"with ORCH_TEST_SEED=%llu\n", ats[i], (unsigned long long)seed);
			orch_test_failed = 1;
		}
	}
}

/*
 * No commit may be durable before the blocks it maps (I22).  A WAL
 * checkpoint syncs the whole WAL first, so one taken while the WAL held a
 * commit whose blocks were not yet flushed made that commit durable before
 * its data, and after a power cut those blocks failed their checksums (EIO
 * on read).  The writer checkpointed after its commits once the WAL was
 * long, a flush after it let commits go on.  Here every checkpoint
 * threshold is at its lowest, so any checkpoint that can happen does: a
 * child writes and syncs an object, then writes more (new blocks
 * and overwrites) without a sync, and cuts.  After reopen the data check
 * must be clean, every read must succeed, and the synced bytes must be
 * there or the later ones.
 */
#define C_WRITES 16

/* The child of i22_power_cut_checkpoint_unsynced: never returns. */
static _Noreturn void ckpt_child(struct fx *fx, int fd, uint64_t seed)
{
	static unsigned char buf[64 * KiB];
	struct orch_store *st;

	if (orch_store_open(fx->dir, &st))
		_exit(3);
	st->st_ckpt_pages = 1;
	fill(buf, sizeof(buf), seed, 0);
	if (orch_store_write(st, k_handles[0], 0, buf, sizeof(buf)) || orch_store_sync(st))
		_exit(4);
	for (int i = 0; i < C_WRITES; i++) {
		fill(buf, BLK, seed, 1 + (uint64_t)i);
		/* even: a new block of object 1; odd: an overwrite in object 0 */
		if (orch_store_write(st, k_handles[i % 2], (uint64_t)i / 2 * BLK, buf, BLK))
			_exit(4);
	}
	ack(fd, 'E', 0, 0);
	orch_pcut_cut();
}

/* After the cut: each block written without a sync holds its old or its new bytes. */
static bool ckpt_objects_hold(struct orch_store *st, uint64_t seed)
{
	static unsigned char want[64 * KiB], rb[64 * KiB], nb[BLK];
	size_t got;
	int rc;

	for (int obj = 0; obj < 2; obj++) {
		memset(want, 0, sizeof(want));
		if (obj == 0)
			fill(want, sizeof(want), seed, 0);
		memset(rb, 0, sizeof(rb));
		rc = orch_store_read(st, k_handles[obj], 0, rb, sizeof(rb), &got);
		if (rc) {
			fprintf(stderr, "read object %d: %s\n", obj, strerror(-rc));
			return false;
		}
		for (int i = obj == 0; i < C_WRITES; i += 2) {
			size_t o = (size_t)i / 2 * BLK;

			fill(nb, BLK, seed, 1 + (uint64_t)i);
			if (memcmp(rb + o, nb, BLK) == 0)
				memcpy(rb + o, want + o, BLK);
		}
		if (memcmp(rb, want, sizeof(rb)) != 0) {
			fprintf(stderr, "object %d: neither the synced nor the later bytes\n", obj);
			return false;
		}
	}
	return true;
}

ORCH_TEST(i22_power_cut_checkpoint_unsynced)
{
	const char *ctx = "checkpoints, unsynced writes";
	uint64_t seed = test_seed();
	char done[128], *out;
	struct fx fx;
	int pfd[2];
	pid_t pid;

	pid = pcut_fork(&fx, 1000000, done, sizeof(done), pfd);
	if (pid == 0)
		ckpt_child(&fx, pfd[1], seed);
	out = pid < 0 ? NULL : pcut_collect(&fx, pid, pfd, done, ctx);
	if (!out || !fx_reopen_clean(&fx, ctx) || !ckpt_objects_hold(fx.st, seed)) {
		fprintf(stderr, "%s: failed: replay with ORCH_TEST_SEED=%llu\n", ctx,
			(unsigned long long)seed);
		orch_test_failed = 1;
	}
	free(out);
	fx_teardown(&fx);
}

/*
 * The same with concurrent writers and syncs, a flush checkpointing every
 * time: a commit the writer makes right after a flush has synced the WAL
 * must not be made durable by that flush's checkpoint.
 */
ORCH_TEST(i22_power_cut_concurrent_checkpoints)
{
	static const unsigned int ats[] = { 40, 90, 150, 220, 300, 420, 600, 800 };
	uint64_t seed = test_seed();

	sync_cut_ckpt_pages = 1;
	for (size_t i = 0; i < sizeof(ats) / sizeof(ats[0]); i++) {
		if (!sync_cut_round(seed + i, ats[i])) {
			fprintf(stderr, "power cut at %u (checkpoint every flush) failed: replay "
				"with ORCH_TEST_SEED=%llu\n", ats[i], (unsigned long long)seed);
			orch_test_failed = 1;
		}
	}
	sync_cut_ckpt_pages = 0;
}

/* --- Space on the host, and a failing disk ------------------------------- */

static const struct orch_store_geom geom_reuse = {
	.size = 64 * MiB, .ag_blocks = 1024, .maxext = 256,
};

/* Highest global block any owner holds, plus one (0 if none). */
static int collect_top(void *arg, const struct orch_store_rmap *r)
{
	uint64_t *top = arg, end = (uint64_t)r->ag * geom_reuse.ag_blocks + r->agbno + r->len;

	if (end > *top)
		*top = end;
	return 0;
}

static uint64_t blocks_host_bytes(const char *dir)
{
	char path[FX_DIR_MAX + 16];
	struct stat sb;

	snprintf(path, sizeof(path), "%s/blocks", dir);
	return stat(path, &sb) == 0 ? (uint64_t)sb.st_blocks * 512 : UINT64_MAX;
}

/*
 * Rounds of small objects written and deleted: their blocks are used again
 * (the next-fit cursor went round the whole store first), and freed
 * short extents go back to the host (they stayed allocated).
 */
STORE_TEST(freed_blocks_reused_and_punched, &geom_reuse)
{
	static unsigned char buf[48 * BLK];
	uint64_t top = 0, host;

	fill(buf, sizeof(buf), 17, 1);
	ORCH_CHECK_OK(orch_store_write(fx->st, 1, 0, buf, 40 * BLK));
	ORCH_CHECK_OK(orch_store_write(fx->st, 2, 0, buf, 3 * BLK));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	for (int round = 0; round < 20; round++) {
		for (uint64_t h = 100; h < 110; h++)
			ORCH_CHECK_OK(orch_store_write(fx->st, h, 0, buf + h, 5 * BLK - 7));
		ORCH_CHECK_OK(orch_store_sync(fx->st));
		ORCH_CHECK_OK(orch_store_owners(fx->st, 0, 16384, collect_top, &top));
		for (uint64_t h = 100; h < 110; h++)
			ORCH_CHECK_OK(orch_store_delete(fx->st, h));
		/* Durable, so the next round may take them (busy until then). */
		ORCH_CHECK_OK(orch_store_sync(fx->st));
	}
	/* 43 blocks live and 50 a round: without reuse, 20 rounds reach 1044. */
	if (top > 200)
		fprintf(stderr, "highest block used: %" PRIu64 "\n", top);
	ORCH_CHECK(top <= 200);
	/* A close punches every freed block; only the live ones hold space. */
	ORCH_CHECK_OK(reopen(fx));
	host = blocks_host_bytes(fx->dir);
	if (host > 64 * BLK)
		fprintf(stderr, "blocks file holds %" PRIu64 " bytes\n", host);
	ORCH_CHECK(host <= 64 * BLK);
	ORCH_CHECK(store_clean(fx->st, true, "after the rounds"));
	{
		static unsigned char got[40 * BLK];
		size_t n = 0;

		ORCH_CHECK_OK(orch_store_read(fx->st, 1, 0, got, sizeof(got), &n));
		ORCH_CHECK(n == sizeof(got) && memcmp(got, buf, sizeof(got)) == 0);
	}
}

/*
 * ORCH_STORE_EIO: a failed flush fails the store, read-only until it is
 * opened again, and stays failed once the disk works again; a reopen on
 * healthy media has everything synced before.
 */
STORE_TEST(failed_flush_fails_the_store, NULL)
{
	static unsigned char buf[16 * BLK], got[16 * BLK];
	char flag[FX_DIR_MAX + 16], spec[FX_DIR_MAX + 32];
	int64_t since = 0;
	size_t n = 0;
	FILE *f;

	snprintf(flag, sizeof(flag), "%s/flag", fx->dir);
	snprintf(spec, sizeof(spec), "sync@%s", flag);
	ORCH_CHECK_OK(orch_store_mkfs(fx->dir, &geom_small, false));
	setenv("ORCH_STORE_EIO", spec, 1);
	ORCH_CHECK_OK(orch_store_open(fx->dir, &fx->st));
	unsetenv("ORCH_STORE_EIO");
	if (!fx->st)
		return;
	fill(buf, sizeof(buf), 17, 2);
	ORCH_CHECK_OK(orch_store_write(fx->st, 1, 0, buf, sizeof(buf)));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK(orch_store_failed(fx->st, NULL) == 0);

	f = fopen(flag, "w");
	ORCH_CHECK(f != NULL);
	if (f)
		fclose(f);
	ORCH_CHECK_OK(orch_store_write(fx->st, 2, 0, buf, 8 * BLK));
	ORCH_CHECK(orch_store_sync(fx->st) == -EIO);
	ORCH_CHECK(orch_store_failed(fx->st, &since) == -EIO);
	ORCH_CHECK(since > 0);
	unlink(flag);
	/* The disk works again: the store stays failed, and says why. */
	ORCH_CHECK(orch_store_write(fx->st, 3, 0, buf, BLK) == -EIO);
	ORCH_CHECK(orch_store_sync(fx->st) == -EIO);
	ORCH_CHECK(orch_store_failed(fx->st, NULL) == -EIO);
	ORCH_CHECK_OK(orch_store_read(fx->st, 1, 0, got, sizeof(got), &n));
	ORCH_CHECK(n == sizeof(got) && memcmp(got, buf, sizeof(got)) == 0);
	{
		uint64_t avail = 1;

		ORCH_CHECK_OK(orch_store_statfs(fx->st, NULL, NULL, &avail, NULL));
		ORCH_CHECK(avail == 0);
	}

	ORCH_CHECK_OK(reopen(fx));
	if (!fx->st)
		return;
	ORCH_CHECK(orch_store_failed(fx->st, NULL) == 0);
	memset(got, 0, sizeof(got));
	ORCH_CHECK_OK(orch_store_read(fx->st, 1, 0, got, sizeof(got), &n));
	ORCH_CHECK(n == sizeof(got) && memcmp(got, buf, sizeof(got)) == 0);
	ORCH_CHECK_OK(orch_store_write(fx->st, 3, 0, buf, BLK));
	ORCH_CHECK_OK(orch_store_sync(fx->st));
	ORCH_CHECK(store_clean(fx->st, true, "reopened after the failure"));
}

ORCH_TEST_MAIN()
