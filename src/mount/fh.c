/*
 * The handles the kernel holds (fi->fh of open files and directories).
 *
 * The kernel sends RELEASE and RELEASEDIR in the background once the last
 * descriptor is closed.  An unmount right after that close can end the
 * connection before the loop reads them, and then they never come.  So
 * each handle is on this list from its open's reply to its release, and
 * what is left at the end (after the session, when no handler runs) is
 * freed here.
 */
#include "mount/mount_i.h"

void orch_mnt_fhs_init(struct orch_mnt_fhs *s)
{
	pthread_mutex_init(&s->s_lock, NULL);
	s->s_head.fh_prev = s->s_head.fh_next = &s->s_head;
}

void orch_mnt_fh_add(struct orch_mnt_fhs *s, struct orch_mnt_fh *fh,
		     void (*free_fn)(struct orch_mnt_fh *))
{
	fh->fh_free = free_fn;
	pthread_mutex_lock(&s->s_lock);
	fh->fh_prev = &s->s_head;
	fh->fh_next = s->s_head.fh_next;
	fh->fh_next->fh_prev = fh;
	s->s_head.fh_next = fh;
	pthread_mutex_unlock(&s->s_lock);
}

void orch_mnt_fh_del(struct orch_mnt_fhs *s, struct orch_mnt_fh *fh)
{
	pthread_mutex_lock(&s->s_lock);
	fh->fh_prev->fh_next = fh->fh_next;
	fh->fh_next->fh_prev = fh->fh_prev;
	pthread_mutex_unlock(&s->s_lock);
}

void orch_mnt_fhs_fini(struct orch_mnt_fhs *s)
{
	while (s->s_head.fh_next != &s->s_head) {
		struct orch_mnt_fh *fh = s->s_head.fh_next;

		orch_mnt_fh_del(s, fh);
		fh->fh_free(fh);
	}
	pthread_mutex_destroy(&s->s_lock);
}
