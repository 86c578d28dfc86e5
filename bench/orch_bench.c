/*
 * Metadata and data rates of a cluster through liborchard, one operation at
 * a time from one thread (what a single-threaded `tar x` or `make` issues):
 * create, stat (lookup), unlink of N empty files in one directory, and
 * sequential write and read of a large file in 4 MiB calls (as `orchard put`
 * and `get` do).  Prints one "phase ops seconds rate" line per phase.
 *
 *   orch-bench -c CONF [-n FILES] [-m MIB]
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "client/fs.h"
#include "common/cfg.h"
#include "common/log.h"

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void report(const char *phase, double ops, double secs, const char *unit)
{
	printf("%-8s %10.0f %8.3f s %12.1f %s\n", phase, ops, secs, ops / secs, unit);
	fflush(stdout);
}

static int die(const char *what, int error)
{
	fprintf(stderr, "orch-bench: %s: %s\n", what, strerror(-error));
	return 1;
}

int main(int argc, char **argv)
{
	const char *conf = NULL;
	long nfiles = 10000, mib = 256;
	struct orch_client *cl;
	struct orch_cfg cfg;
	struct orch_cred cred;
	struct orch_attr root, dir, a;
	char err[512], name[64], dname[64];
	uint8_t *buf;
	size_t chunk = 4u << 20, got;
	double t0;
	int opt, error;

	while ((opt = getopt(argc, argv, "c:n:m:")) != -1) {
		switch (opt) {
		case 'c': conf = optarg; break;
		case 'n': nfiles = atol(optarg); break;
		case 'm': mib = atol(optarg); break;
		default:
			fprintf(stderr, "usage: orch-bench -c CONF [-n FILES] [-m MIB]\n");
			return 2;
		}
	}
	if (!conf || nfiles <= 0 || mib <= 0) {
		fprintf(stderr, "usage: orch-bench -c CONF [-n FILES] [-m MIB]\n");
		return 2;
	}
	orch_log_level = ORCH_LOG_ERR;
	if (orch_cfg_load(conf, &cfg, err, sizeof(err)) ||
	    orch_cfg_load_key(&cfg, err, sizeof(err))) {
		fprintf(stderr, "orch-bench: %s\n", err);
		return 1;
	}
	error = orch_client_create(&cfg, &cl);
	if (error)
		return die("client", error);
	orch_fs_cred_self(&cred);
	error = orch_fs_getattr(cl, &cred, ORCH_ROOT_HANDLE, &root);
	if (error)
		return die("root", error);
	snprintf(dname, sizeof(dname), "bench-%d", (int)getpid());
	error = orch_fs_mkdir(cl, &cred, root.handle, dname, 0755, &dir);
	if (error)
		return die("mkdir", error);

	t0 = now_s();
	for (long i = 0; i < nfiles; i++) {
		snprintf(name, sizeof(name), "f%ld", i);
		error = orch_fs_create(cl, &cred, dir.handle, name, S_IFREG | 0644, 0, true, &a, NULL);
		if (error)
			return die("create", error);
	}
	report("create", (double)nfiles, now_s() - t0, "ops/s");
	t0 = now_s();
	for (long i = 0; i < nfiles; i++) {
		snprintf(name, sizeof(name), "f%ld", i);
		error = orch_fs_lookup(cl, &cred, dir.handle, name, &a);
		if (error)
			return die("stat", error);
	}
	report("stat", (double)nfiles, now_s() - t0, "ops/s");
	t0 = now_s();
	for (long i = 0; i < nfiles; i++) {
		snprintf(name, sizeof(name), "f%ld", i);
		error = orch_fs_unlink(cl, &cred, dir.handle, name);
		if (error)
			return die("unlink", error);
	}
	report("unlink", (double)nfiles, now_s() - t0, "ops/s");

	buf = malloc(chunk);
	if (!buf)
		return die("malloc", -ENOMEM);
	for (size_t i = 0; i < chunk; i++)
		buf[i] = (uint8_t)(i * 2654435761u >> 13);
	error = orch_fs_create(cl, &cred, dir.handle, "big", S_IFREG | 0644, 0, true, &a, NULL);
	if (error)
		return die("create big", error);
	t0 = now_s();
	for (long off = 0; off < mib << 20; off += (long)chunk) {
		error = orch_fs_write(cl, &cred, &a, (uint64_t)off, buf, chunk);
		if (error)
			return die("write", error);
	}
	error = orch_fs_extend(cl, &cred, a.handle, (uint64_t)mib << 20, 0, &a);
	if (!error)
		error = orch_fs_fsync(cl, &cred, &a, false, ORCH_FS_SYNC_ALL);
	if (error)
		return die("extend+fsync", error);
	report("write", (double)mib, now_s() - t0, "MiB/s (incl. fsync)");
	t0 = now_s();
	for (long off = 0; off < mib << 20; off += (long)chunk) {
		error = orch_fs_read(cl, &cred, &a, (uint64_t)off, buf, chunk, &got);
		if (error || got != chunk)
			return die("read", error ? error : -EIO);
	}
	report("read", (double)mib, now_s() - t0, "MiB/s (server page cache)");
	orch_fs_unlink(cl, &cred, dir.handle, "big");
	orch_fs_rmdir(cl, &cred, root.handle, dname);
	free(buf);
	orch_client_destroy(cl);
	return 0;
}
