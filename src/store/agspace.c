/* Space per allocation group.  See agspace.h. */
#include "store/agspace.h"

#include <sqlite3.h>

#include "store/store_i.h"

int orch_store_ag_space(struct orch_store *st, struct orch_store_ag_space *out, size_t max,
			size_t *n)
{
	struct store_conn *c;
	sqlite3_stmt *s = NULL;
	int rc, error;

	*n = 0;
	error = store_snap_get(st, &c);
	if (error)
		return error;
	rc = sqlite3_prepare_v2(c->c_db, "SELECT ag, blocks, freeblks FROM agstat ORDER BY ag",
				-1, &s, NULL);
	while (rc == SQLITE_OK && (rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (*n < max) {
			out[*n].ag = (uint32_t)sqlite3_column_int64(s, 0);
			out[*n].blocks = (uint64_t)sqlite3_column_int64(s, 1);
			out[*n].free = (uint64_t)sqlite3_column_int64(s, 2);
			(*n)++;
		}
		rc = SQLITE_OK;
	}
	error = rc == SQLITE_DONE ? 0 : store_sql_err(c->c_db, rc, "agstat");
	sqlite3_finalize(s);
	store_snap_put(st, c);
	return error;
}
