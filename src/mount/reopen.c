/*
 * The keeper of open registrations (docs/DESIGN.md, "Open files whose last
 * name went").  A registration lives on its connection: once the
 * connection to a server is made again (the server restarted, the network
 * broke), that server knows none of this mount's open files, and after a
 * restart it frees every orphan nobody registered again within a lease
 * term of its start.  So the files open here are registered again as soon
 * as the connection is back, not at their next read or write: a file held
 * open but idle must not lose its data.
 *
 * One thread, every tick (an eighth of the server's hold, 50 ms .. 1 s):
 * for each server this mount has a file open on, takes what arrived on its
 * connection (orch_client_poll: a connection the server closed is noticed
 * even when nothing else uses it), then claims the open files not
 * registered on the connection up now (orch_mnt_inode_oreg_claim_stale)
 * and sends their OPENs as root, in rounds of at most
 * ORCH_FS_WRITERS_MANY in flight and REOPEN_PER_SERVER to a server, and
 * a single one to a server not connected: it connects, and the rest wait
 * for its answer.  A server that does not answer gets nothing more until
 * the next tick.  FUSE threads never wait for the keeper: a read or write
 * still registers a file it finds unregistered, and a file being
 * registered by one thread is skipped by the others (i_oreg_busy).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "common/util.h"
#include "mount/mount_i.h"

#define REOPEN_PER_SERVER 16   /* OPENs in flight to one server at once */
#define REOPEN_TICK_MIN_MS 50u
#define REOPEN_TICK_MAX_MS 1000u

/*
 * The server holds what a lost connection had open, and every orphan after
 * its start, for the larger of lease_ms (and a margin) and a quarter of
 * op_timeout_ms (sv_opens.c): a tick is an eighth of that.
 */
static uint32_t reopen_tick_ms(const struct orch_cfg *cfg)
{
	uint32_t term = ORCH_MAX(cfg->lease_ms, cfg->op_timeout_ms / 4);

	return ORCH_MIN(ORCH_MAX(term / 8, REOPEN_TICK_MIN_MS), REOPEN_TICK_MAX_MS);
}

/* Ends the claims of @hs[*@next..@end) unsent. */
static void reopen_unclaim(struct orch_mnt *m, const uint64_t *hs, size_t *next, size_t end)
{
	while (*next < end)
		orch_mnt_inode_oreg_unclaim(&m->m_itab, hs[(*next)++]);
}

/*
 * Sends the OPENs of the claimed @hs[0..@n) (sorted, so by server), whose
 * servers' generations were @gens; ends every claim.
 */
static void reopen_send(struct orch_mnt *m, uint64_t *gens, unsigned int nservers,
			const uint64_t *hs, size_t n)
{
	size_t next[ORCH_SERVERS_MAX], end[ORCH_SERVERS_MAX], done[ORCH_SERVERS_MAX] = { 0 };
	uint64_t batch[ORCH_FS_WRITERS_MANY], got[ORCH_FS_WRITERS_MANY];
	int errors[ORCH_FS_WRITERS_MANY];
	struct orch_cred root = { 0 };
	size_t i = 0;

	for (unsigned int s = 0; s < nservers; s++) {
		next[s] = i;
		while (i < n && orch_handle_server(hs[i]) == s)
			i++;
		end[s] = i;
	}
	for (;;) {
		size_t k = 0;

		/*
		 * The connected servers' first: sending to one that is not
		 * connects, which may take a whole deadline (a host that is
		 * down), and the sends after it would wait for it.
		 */
		for (int up = 1; up >= 0; up--) {
			for (unsigned int s = 0; s < nservers && k < ORCH_FS_WRITERS_MANY; s++) {
				size_t take = up ? REOPEN_PER_SERVER : 1;

				if ((gens[s] != 0) != (up != 0))
					continue;
				while (take-- && next[s] < end[s] && k < ORCH_FS_WRITERS_MANY)
					batch[k++] = hs[next[s]++];
			}
		}
		if (!k)
			break;
		orch_fs_writers_many(m->m_cl, &root, ORCH_WRITERS_OPEN, batch, k, errors, got);
		for (size_t j = 0; j < k; j++) {
			unsigned int s = orch_handle_server(batch[j]);

			if (orch_mnt_open_registered(m, batch[j], errors[j], got[j])) {
				if (got[j])
					gens[s] = got[j];   /* connected: the rest may follow */
				done[s] += !errors[j];
				continue;
			}
			/* Not answered: the others wait for the next tick. */
			reopen_unclaim(m, hs, &next[s], end[s]);
		}
		if (atomic_load(&m->m_reopen.r_stop))
			for (unsigned int s = 0; s < nservers; s++)
				reopen_unclaim(m, hs, &next[s], end[s]);
	}
	for (unsigned int s = 0; s < nservers; s++)
		if (done[s])
			ORCH_NOTICE("open files registered again: server='%s' files=%zu",
				    orch_client_cfg(m->m_cl)->servers[s].name, done[s]);
}

/* One tick's work. */
static void reopen_pass(struct orch_mnt *m)
{
	unsigned int n = ORCH_MIN(orch_client_cfg(m->m_cl)->nservers,
				  (unsigned int)ORCH_SERVERS_MAX);
	uint64_t gens[ORCH_SERVERS_MAX] = { 0 };
	bool want[ORCH_SERVERS_MAX];
	uint64_t *hs;
	size_t nh;

	if (!orch_mnt_inode_open_servers(&m->m_itab, want, n))
		return;
	for (unsigned int s = 0; s < n; s++) {
		if (!want[s])
			continue;
		/* What arrived, so that a connection the server closed is seen as down. */
		orch_client_poll(m->m_cl, s);
		gens[s] = orch_client_conn_gen(m->m_cl, s);
	}
	nh = orch_mnt_inode_oreg_claim_stale(&m->m_itab, gens, n, &hs);
	if (nh)
		reopen_send(m, gens, n, hs, nh);
	free(hs);
}

static void *reopen_main(void *arg)
{
	struct orch_mnt *m = arg;
	struct orch_mnt_reopen *r = &m->m_reopen;
	struct timespec ts;

	pthread_mutex_lock(&r->r_lock);
	while (!atomic_load(&r->r_stop)) {
		pthread_mutex_unlock(&r->r_lock);
		reopen_pass(m);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_sec += r->r_tick_ms / 1000;
		ts.tv_nsec += (long)(r->r_tick_ms % 1000) * 1000000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_mutex_lock(&r->r_lock);
		while (!atomic_load(&r->r_stop) && pthread_cond_timedwait(&r->r_wake, &r->r_lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&r->r_lock);
	return NULL;
}

int orch_mnt_reopen_start(struct orch_mnt *m)
{
	struct orch_mnt_reopen *r = &m->m_reopen;
	pthread_condattr_t ca;
	int error;

	memset(r, 0, sizeof(*r));
	atomic_init(&r->r_stop, false);
	r->r_tick_ms = reopen_tick_ms(orch_client_cfg(m->m_cl));
	pthread_mutex_init(&r->r_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->r_wake, &ca);
	pthread_condattr_destroy(&ca);
	error = -pthread_create(&r->r_thread, NULL, reopen_main, m);
	if (error) {
		pthread_cond_destroy(&r->r_wake);
		pthread_mutex_destroy(&r->r_lock);
		return error;
	}
	r->r_running = true;
	return 0;
}

void orch_mnt_reopen_stop(struct orch_mnt *m)
{
	struct orch_mnt_reopen *r = &m->m_reopen;

	if (!r->r_running)
		return;
	pthread_mutex_lock(&r->r_lock);
	atomic_store(&r->r_stop, true);
	pthread_cond_signal(&r->r_wake);
	pthread_mutex_unlock(&r->r_lock);
	pthread_join(r->r_thread, NULL);
	r->r_running = false;
	pthread_cond_destroy(&r->r_wake);
	pthread_mutex_destroy(&r->r_lock);
}
