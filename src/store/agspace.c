/* Space per allocation group.  See agspace.h. */
#include "store/agspace.h"

#include <errno.h>

#include "common/log.h"
#include "store/store_i.h"

int orch_store_ag_space(struct orch_store *st, struct orch_store_ag_space *out, size_t max,
			size_t *n)
{
	struct orch_agstat_irec ag;
	struct store_conn *c;
	orch_failaddr_t fa = NULL;
	sqlite3_stmt *s;
	int rc, error;

	*n = 0;
	error = orch_snap_get(st, &c);
	if (error)
		return error;
	error = orch_rec_stmt(&c->c_sq, ORCH_REC_AG_ALL, &s);
	while (!error && (rc = orch_rec_step(&c->c_sq, ORCH_REC_AG_ALL)) == 1) {
		fa = orch_rec_agstat_from_disk(st, s, 0, &ag);
		if (fa) {
			ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "corrupt record: table=agstat check=%s", fa);
			orch_rec_reset(&c->c_sq, ORCH_REC_AG_ALL);
			error = -EUCLEAN;
			break;
		}
		if (*n < max) {
			out[*n].ag = ag.ag;
			out[*n].blocks = ag.blocks;
			out[*n].free = ag.freeblks;
			(*n)++;
		}
	}
	if (!error && rc < 0)
		error = rc;
	orch_snap_put(st, c);
	return error;
}
