/*
 * Syncing the namespace WAL from a connection other than the loop thread's.
 *
 * With synchronous=NORMAL SQLite never syncs the WAL at commit; the server
 * makes it durable off the request path, from its flusher thread.  Asking
 * the connection for its WAL file (SQLITE_FCNTL_JOURNAL_POINTER) and calling
 * the file's xSync syncs through the VFS in use, so the power-cut shim
 * (common/pcut_vfs.c) records the sync as it would SQLite's own.
 */
#include <errno.h>
#include <sqlite3.h>

#include "common/log.h"
#include "meta/meta.h"

int orch_meta_sync_wal(struct sqlite3 *db)
{
	sqlite3_file *wal = NULL;
	int rc;

	/*
	 * The pager opens the WAL at the first read transaction, and keeps it
	 * open until the connection closes; a tiny read makes sure it is.
	 */
	rc = sqlite3_exec(db, "SELECT 1 FROM sqlite_master LIMIT 1", NULL, NULL, NULL);
	if (rc != SQLITE_OK) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "cannot open the namespace wal: %s",
				   sqlite3_errmsg(db));
		return -EIO;
	}
	rc = sqlite3_file_control(db, "main", SQLITE_FCNTL_JOURNAL_POINTER, &wal);
	if (rc != SQLITE_OK || !wal || !wal->pMethods) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "cannot find the namespace wal: rc=%d", rc);
		return -EIO;
	}
	rc = wal->pMethods->xSync(wal, SQLITE_SYNC_NORMAL);
	if (rc != SQLITE_OK) {
		ORCH_LOG_RATELIMIT(ORCH_LOG_ERR, "cannot sync the namespace wal: %s",
				   sqlite3_errstr(rc));
		return -EIO;
	}
	return 0;
}
