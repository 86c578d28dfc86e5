/*
 * orchard local up|down DIR: a whole cluster on this host, for development
 * and tests.  DIR holds orchard.conf, orchard.key, one data directory per
 * server, and per server NAME.log and NAME.pid.  A mount made with
 * `up --mount` leaves DIR/mount.pid and DIR/mountpoint.
 *
 * A pid file is trusted only if its process is alive and is an orchardd
 * (/proc/PID/comm), so a stale file after a reboot never gets an unrelated
 * process signalled.
 */
#include "cli/cli.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/time.h"

#define LOCAL_START_MS 15000   /* every server must answer within this */
#define LOCAL_STOP_MS 10000    /* SIGTERM grace before SIGKILL */
#define LOCAL_POLL_MS 100
#define LOCAL_PING_MS 1000     /* one ping's deadline while starting */
#define LOCAL_TAIL_LINES 10
#define LOCAL_DEFAULT_SERVERS 2

struct local_srv {
	pid_t pid;     /* 0: not running (or exited and reaped) */
	bool started;  /* our child, started by this run */
	bool up;       /* answered a ping */
};

static void local_sleep_ms(unsigned int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* --- Pid files and processes ------------------------------------------------ */

/*
 * True if @pid exists and is not a zombie.  A server whose `local up` has
 * exited is reparented to init (or a subreaper), which may be slow to reap
 * it, or never do so in a container; kill(pid, 0) alone would call that
 * zombie alive.
 */
static bool local_pid_alive(pid_t pid)
{
	char path[64], buf[512], *paren;
	ssize_t n;
	int fd;

	if (pid <= 0 || (kill(pid, 0) < 0 && errno != EPERM))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno != ENOENT;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	/* "pid (comm) S ...": the state follows the last ')'. */
	paren = strrchr(buf, ')');
	if (!paren || paren[1] != ' ')
		return true;
	return paren[2] != 'Z' && paren[2] != 'X';
}

/* True if @pid is alive and its command name is @comm. */
static bool local_pid_is(pid_t pid, const char *comm)
{
	char path[64], name[64];
	ssize_t n;
	int fd;

	if (!local_pid_alive(pid))
		return false;
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, name, sizeof(name) - 1);
	close(fd);
	if (n <= 0)
		return false;
	name[n] = '\0';
	name[strcspn(name, "\n")] = '\0';
	return strcmp(name, comm) == 0;
}

/* Reads a pid file; 0 if missing or unreadable. */
static pid_t local_pid_read(const char *path)
{
	char text[32];
	ssize_t n;
	long v;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	text[n] = '\0';
	v = strtol(text, NULL, 10);
	return v > 0 && v < INT32_MAX ? (pid_t)v : 0;
}

/* Writes @pid to @path atomically (temporary file, then rename). */
static int local_pid_write(const char *path, pid_t pid)
{
	char tmp[PATH_MAX + 8], text[32];
	int fd, error;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	snprintf(text, sizeof(text), "%d\n", (int)pid);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		error = -errno;
		orch_cli_err(error, "cannot create '%s'", tmp);
		return error;
	}
	error = orch_cli_write_all(fd, text, strlen(text));
	close(fd);
	if (!error && rename(tmp, path) < 0)
		error = -errno;
	if (error) {
		unlink(tmp);
		orch_cli_err(error, "cannot write '%s'", path);
	}
	return error;
}

/* Prints the last lines of a log to stderr, indented. */
static void local_log_tail(const char *path)
{
	char buf[4096];
	const char *start;
	ssize_t n;
	off_t size;
	int fd, lines = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	size = lseek(fd, 0, SEEK_END);
	if (size > (off_t)sizeof(buf) - 1)
		lseek(fd, size - (off_t)sizeof(buf) + 1, SEEK_SET);
	else
		lseek(fd, 0, SEEK_SET);
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return;
	buf[n] = '\0';
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	for (start = buf + n; start > buf; start--)
		if (start[-1] == '\n' && ++lines == LOCAL_TAIL_LINES)
			break;
	fprintf(stderr, "orchard: last lines of '%s':\n", path);
	while (*start) {
		size_t len = strcspn(start, "\n");

		fprintf(stderr, "  | %.*s\n", (int)len, start);
		start += len + (start[len] == '\n');
	}
}

/*
 * Starts @argv[0] in a new session with stdin from /dev/null and stdout and
 * stderr appended to @log.  An exec failure comes back through a
 * close-on-exec pipe, so it is reported here and not as a silent exit.
 */
static int local_spawn(char *const argv[], const char *log, pid_t *out)
{
	int pfd[2], logfd, nullfd, child_err = 0, error;
	ssize_t n;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	logfd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (logfd < 0) {
		error = -errno;
		orch_cli_err(error, "cannot open '%s'", log);
		goto out_close_pipe;
	}
	nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nullfd < 0) {
		error = -errno;
		goto out_close_log;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		error = -errno;
		orch_cli_err(error, "cannot fork");
		goto out_close_null;
	}
	if (pid == 0) {
		setsid();
		dup2(nullfd, 0);
		dup2(logfd, 1);
		dup2(logfd, 2);
		/* Keep only the error pipe, as fd 3, still close-on-exec. */
		if (pfd[1] != 3)
			dup3(pfd[1], 3, O_CLOEXEC);
		close_range(4, ~0u, 0);
		execv(argv[0], argv);
		child_err = errno;
		if (write(3, &child_err, sizeof(child_err)) < 0)
			_exit(126);
		_exit(127);
	}
	close(pfd[1]);
	pfd[1] = -1;
	do
		n = read(pfd[0], &child_err, sizeof(child_err));
	while (n < 0 && errno == EINTR);
	if (n == sizeof(child_err)) {
		waitpid(pid, NULL, 0);
		error = -child_err;
		orch_cli_err(error, "cannot run '%s'", argv[0]);
		goto out_close_null;
	}
	*out = pid;
	error = 0;
out_close_null:
	close(nullfd);
out_close_log:
	close(logfd);
out_close_pipe:
	close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	return error;
}

/* Runs a command to completion, output to ours.  Exit status or -errno. */
static int local_run(char *const argv[])
{
	int status;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0) {
		execvp(argv[0], argv);
		fprintf(stderr, "orchard: cannot run '%s': %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * SIGTERM to every pid in @pids (0 entries skipped), then waits for all of
 * them together; whatever is left after @grace_ms gets SIGKILL.  @pids are
 * not our children (servers outlive the `local up` that started them), so
 * exit is seen in /proc (local_pid_alive).  *@killed counts the SIGKILLed.
 */
static void local_stop_pids(pid_t *pids, unsigned int n, unsigned int grace_ms,
			    unsigned int *killed)
{
	uint64_t deadline = orch_time_now_ms() + grace_ms;
	bool left;

	*killed = 0;
	for (unsigned int i = 0; i < n; i++)
		if (pids[i] > 0)
			kill(pids[i], SIGTERM);
	for (;;) {
		left = false;
		for (unsigned int i = 0; i < n; i++) {
			if (pids[i] <= 0)
				continue;
			/* Reap it if it is our child (a failed `up`). */
			waitpid(pids[i], NULL, WNOHANG);
			if (!local_pid_alive(pids[i]))
				pids[i] = 0;
			else
				left = true;
		}
		if (!left || orch_time_now_ms() >= deadline)
			break;
		local_sleep_ms(LOCAL_POLL_MS);
	}
	if (!left)
		return;
	for (unsigned int i = 0; i < n; i++) {
		if (pids[i] > 0) {
			kill(pids[i], SIGKILL);
			(*killed)++;
		}
	}
	/* SIGKILL is not instant either; give the kernel a moment. */
	deadline = orch_time_now_ms() + 2000;
	for (unsigned int i = 0; i < n; i++) {
		while (pids[i] > 0 && orch_time_now_ms() < deadline) {
			waitpid(pids[i], NULL, WNOHANG);
			if (!local_pid_alive(pids[i]))
				break;
			local_sleep_ms(20);
		}
	}
}

/* --- Mount hook ----------------------------------------------------------------- */

/* True if @path is a mount point (its device differs from its parent's). */
static bool local_is_mountpoint(const char *path)
{
	char parent[PATH_MAX + 4];
	struct stat a, b;

	snprintf(parent, sizeof(parent), "%s/..", path);
	if (stat(path, &a) < 0 || stat(parent, &b) < 0)
		return false;
	return a.st_dev != b.st_dev || a.st_ino == b.st_ino;
}

/*
 * Runs orchard-mount in the foreground of its own session, so that its pid
 * is the mount's and `local down` can wait for it after fusermount3 -u.
 */
static int local_mount(const char *dir, const char *bindir, const char *conf,
		       const char *mnt)
{
	char prog[PATH_MAX + 16], path[PATH_MAX + 32], log[PATH_MAX + 16], real[PATH_MAX];
	uint64_t deadline;
	pid_t pid;
	int error, fd;

	snprintf(path, sizeof(path), "%s/mount.pid", dir);
	if (local_pid_is(local_pid_read(path), "orchard-mount")) {
		printf("the cluster in %s is already mounted\n", dir);
		return 0;
	}
	error = orch_cli_mkdir_p(mnt, 0755);
	if (error || !realpath(mnt, real)) {
		error = error ? error : -errno;
		orch_cli_err(error, "cannot use mount point '%s'", mnt);
		return error;
	}
	snprintf(prog, sizeof(prog), "%s/orchard-mount", bindir);
	snprintf(log, sizeof(log), "%s/mount.log", dir);
	char *argv[] = { prog, "-f", "-c", (char *)conf, real, NULL };

	error = local_spawn(argv, log, &pid);
	if (error)
		return error;
	error = local_pid_write(path, pid);
	if (error)
		goto out_kill;
	snprintf(path, sizeof(path), "%s/mountpoint", dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || orch_cli_write_all(fd, real, strlen(real)) ||
	    orch_cli_write_all(fd, "\n", 1)) {
		error = -errno;
		orch_cli_err(error, "cannot write '%s'", path);
		if (fd >= 0)
			close(fd);
		goto out_kill;
	}
	close(fd);
	deadline = orch_time_now_ms() + LOCAL_START_MS;
	while (!local_is_mountpoint(real)) {
		if (waitpid(pid, NULL, WNOHANG) == pid) {
			orch_cli_msg("orchard-mount exited before mounting '%s'", real);
			local_log_tail(log);
			return -EIO;
		}
		if (orch_time_now_ms() >= deadline) {
			orch_cli_msg("'%s' is not mounted after %d s", real, LOCAL_START_MS / 1000);
			local_log_tail(log);
			error = -ETIMEDOUT;
			goto out_kill;
		}
		local_sleep_ms(LOCAL_POLL_MS);
	}
	printf("mounted on %s (pid %d)\n", real, (int)pid);
	return 0;
out_kill:
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return error;
}

/* Unmounts DIR's mount if `up --mount` made one. */
static void local_unmount(const char *dir)
{
	char pidpath[PATH_MAX + 16], mppath[PATH_MAX + 16], mnt[PATH_MAX];
	unsigned int killed;
	ssize_t n;
	pid_t pid;
	int fd;

	snprintf(pidpath, sizeof(pidpath), "%s/mount.pid", dir);
	if (access(pidpath, F_OK) < 0)
		return;
	pid = local_pid_read(pidpath);
	snprintf(mppath, sizeof(mppath), "%s/mountpoint", dir);
	fd = open(mppath, O_RDONLY | O_CLOEXEC);
	n = fd >= 0 ? read(fd, mnt, sizeof(mnt) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n > 0) {
		mnt[n] = '\0';
		mnt[strcspn(mnt, "\n")] = '\0';
		if (local_is_mountpoint(mnt)) {
			char *argv[] = { "fusermount3", "-u", mnt, NULL };

			if (local_run(argv) == 0)
				printf("unmounted %s\n", mnt);
			else
				orch_cli_msg("cannot unmount '%s' (busy?); stopping servers anyway",
					     mnt);
		}
	}
	if (local_pid_is(pid, "orchard-mount"))
		local_stop_pids(&pid, 1, LOCAL_STOP_MS, &killed);
	unlink(pidpath);
	unlink(mppath);
}

/* --- up ------------------------------------------------------------------------ */

/* Kills what this run started and removes their pid files. */
static void local_abort(const char *dir, const struct orch_cfg *cfg, struct local_srv *srv)
{
	pid_t pids[ORCH_SERVERS_MAX] = { 0 };
	char path[PATH_MAX + 96];
	unsigned int killed, n = 0;

	for (unsigned int i = 0; i < cfg->nservers; i++) {
		if (!srv[i].started)
			continue;
		snprintf(path, sizeof(path), "%s/%s.pid", dir, cfg->servers[i].name);
		unlink(path);
		if (srv[i].pid <= 0)
			continue; /* exited, and reaped: its pid may be anyone's now */
		pids[i] = srv[i].pid;
		n++;
	}
	if (!n)
		return;
	local_stop_pids(pids, cfg->nservers, 2000, &killed);
	orch_cli_msg("stopped the %u server(s) this run started", n);
}

/* Why server @i is not answering: it exited (log tail printed), or not. */
static bool local_srv_died(const char *dir, const struct orch_cfg *cfg,
			   struct local_srv *s, unsigned int i)
{
	char log[PATH_MAX + 96];
	int status;

	if (s->started) {
		if (s->pid <= 0)
			return true;
		if (waitpid(s->pid, &status, WNOHANG) != s->pid)
			return false;
		s->pid = 0;
		if (WIFEXITED(status))
			orch_cli_msg("server '%s' exited with status %d while starting",
				     cfg->servers[i].name, WEXITSTATUS(status));
		else
			orch_cli_msg("server '%s' was killed by signal %d while starting",
				     cfg->servers[i].name, WTERMSIG(status));
	} else {
		if (local_pid_is(s->pid, "orchardd"))
			return false;
		orch_cli_msg("server '%s' (pid %d) exited", cfg->servers[i].name, (int)s->pid);
	}
	snprintf(log, sizeof(log), "%s/%s.log", dir, cfg->servers[i].name);
	local_log_tail(log);
	return true;
}

/* Pings every server until all answer, one dies, or the deadline passes. */
static int local_wait_up(const char *dir, const struct orch_cfg *cfg, struct local_srv *srv)
{
	uint64_t deadline = orch_time_now_ms() + LOCAL_START_MS;
	struct orch_client *cl;
	char log[PATH_MAX + 96];
	int error, last[ORCH_SERVERS_MAX] = { 0 };
	bool all;

	error = orch_client_create(cfg, &cl);
	if (error) {
		orch_cli_err(error, "cannot create client");
		return error;
	}
	orch_client_set_timeout(cl, LOCAL_PING_MS);
	for (;;) {
		all = true;
		for (unsigned int i = 0; i < cfg->nservers; i++) {
			struct orch_reply rep = { 0 };
			struct orch_msg req;

			if (srv[i].up)
				continue;
			if (local_srv_died(dir, cfg, &srv[i], i)) {
				error = -ECHILD;
				goto out_destroy;
			}
			orch_msg_init(&req, ORCH_AN2AN_PING);
			last[i] = orch_client_call(cl, i, &req, &rep);
			if (last[i] == 0) {
				orch_reply_release(&rep);
				srv[i].up = true;
			} else {
				all = false;
			}
		}
		if (all)
			break;
		if (orch_time_now_ms() >= deadline) {
			for (unsigned int i = 0; i < cfg->nservers; i++) {
				if (srv[i].up)
					continue;
				orch_cli_err(last[i], "server '%s' did not answer within %d s",
					     cfg->servers[i].name, LOCAL_START_MS / 1000);
				snprintf(log, sizeof(log), "%s/%s.log", dir, cfg->servers[i].name);
				local_log_tail(log);
			}
			error = -ETIMEDOUT;
			goto out_destroy;
		}
		local_sleep_ms(LOCAL_POLL_MS);
	}
	error = 0;
out_destroy:
	orch_client_destroy(cl);
	return error;
}

/* Makes DIR/orchard.conf and every server's data directory. */
static int local_create(const char *dir, unsigned int nservers, unsigned int replicas,
			char *conf, size_t conflen)
{
	struct orch_cli_genconfig g = {
		.dir = dir,
		.nservers = nservers,
		.replicas = replicas,
		.name = "local",
		.strip_size = 65536,
	};
	struct orch_cfg *cfg;
	int error;

	error = orch_cli_genconfig_write(&g, conf, conflen);
	if (error)
		return error;
	error = orch_cli_cfg_load(conf, false, &cfg);
	if (error)
		return error;
	for (unsigned int i = 0; i < cfg->nmembers && !error; i++)
		error = orch_cli_mkfs_server(cfg, i, false);
	free(cfg);
	if (replicas > 1)
		printf("created a cluster of %u replica groups of %u servers in %s\n",
		       nservers / replicas, replicas, dir);
	else
		printf("created a %u-server cluster in %s\n", nservers, dir);
	return error;
}

static int local_up(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "servers", required_argument, NULL, 'n' },
		{ "replicas", required_argument, NULL, 'r' },
		{ "mount", required_argument, NULL, 'm' },
		ORCH_CLI_OPTS_END
	};
	char bindir[PATH_MAX], dir[PATH_MAX], conf[PATH_MAX + 16], prog[PATH_MAX + 16];
	char pidpath[PATH_MAX + 96], log[PATH_MAX + 96];
	struct local_srv srv[ORCH_SERVERS_MAX] = { 0 };
	unsigned int nservers = LOCAL_DEFAULT_SERVERS, replicas = 1, running = 0;
	const char *mnt = NULL;
	bool servers_given = false, replicas_given = false;
	struct orch_cfg *cfg;
	uint64_t v;
	int opt, error;

	while ((opt = orch_cli_getopt(cli, argc, argv, "n:r:m:", opts)) != -1) {
		switch (opt) {
		case 'r':
			if (orch_cli_uint_parse(optarg, 1, ORCH_REPLICAS_MAX, &v))
				return orch_cli_usage_err(cli, "--replicas: want 1 to %d, not '%s'",
							  ORCH_REPLICAS_MAX, optarg);
			replicas = (unsigned int)v;
			replicas_given = true;
			break;
		case 'n':
			if (orch_cli_uint_parse(optarg, 1, ORCH_SERVERS_MAX, &v))
				return orch_cli_usage_err(cli, "--servers: want 1 to %d, not '%s'",
							  ORCH_SERVERS_MAX, optarg);
			nservers = (unsigned int)v;
			servers_given = true;
			break;
		case 'm':
			mnt = optarg;
			break;
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (argc - optind != 1)
		return orch_cli_usage_err(cli, "local up takes one DIR");
	if (!servers_given)
		nservers = LOCAL_DEFAULT_SERVERS * replicas; /* two groups */
	if (nservers % replicas)
		return orch_cli_usage_err(cli, "--servers %u do not make groups of --replicas %u",
					  nservers, replicas);
	error = orch_cli_bin_dir(bindir, sizeof(bindir));
	if (error) {
		orch_cli_err(error, "cannot find the directory of this program");
		return ORCH_CLI_FAIL;
	}
	if (mnt) {
		snprintf(prog, sizeof(prog), "%s/orchard-mount", bindir);
		if (access(prog, X_OK) < 0) {
			orch_cli_msg("mount is not available yet (no '%s')", prog);
			return ORCH_CLI_FAIL;
		}
	}
	snprintf(prog, sizeof(prog), "%s/orchardd", bindir);
	if (access(prog, X_OK) < 0) {
		orch_cli_err(-errno, "cannot run the server '%s'", prog);
		return ORCH_CLI_FAIL;
	}
	error = orch_cli_mkdir_p(argv[optind], 0755);
	if (error || !realpath(argv[optind], dir)) {
		orch_cli_err(error ? error : -errno, "cannot create directory '%s'", argv[optind]);
		return ORCH_CLI_FAIL;
	}
	snprintf(conf, sizeof(conf), "%s/orchard.conf", dir);
	if (access(conf, F_OK) < 0) {
		if (local_create(dir, nservers, replicas, conf, sizeof(conf)))
			return ORCH_CLI_FAIL;
	}
	if (orch_cli_cfg_load(conf, true, &cfg))
		return ORCH_CLI_FAIL;
	if (servers_given && cfg->nmembers != nservers)
		orch_cli_msg("%s already has %u servers; --servers %u ignored", conf,
			     cfg->nmembers, nservers);
	if (replicas_given && cfg->replicas != replicas)
		orch_cli_msg("%s already has replicas = %u; --replicas %u ignored", conf,
			     cfg->replicas, replicas);
	/* From here on every member is started, and waited for, as a server of its own. */
	orch_cfg_members_view(cfg, cfg);

	for (unsigned int i = 0; i < cfg->nservers; i++) {
		const char *name = cfg->servers[i].name;
		pid_t pid;

		if (strchr(name, '/')) {
			orch_cli_msg("server name '%s' cannot name a pid file", name);
			goto out_fail;
		}
		snprintf(pidpath, sizeof(pidpath), "%s/%s.pid", dir, name);
		pid = local_pid_read(pidpath);
		if (local_pid_is(pid, "orchardd")) {
			srv[i].pid = pid;
			running++;
		}
	}
	if (running == cfg->nservers) {
		printf("cluster in %s is already running\n", dir);
		goto out_mount;
	}
	for (unsigned int i = 0; i < cfg->nservers; i++) {
		const char *name = cfg->servers[i].name;
		char *sargv[] = { prog, "-c", conf, "-n", (char *)name, "--log", log, NULL };

		if (srv[i].pid)
			continue;
		snprintf(log, sizeof(log), "%s/%s.log", dir, name);
		snprintf(pidpath, sizeof(pidpath), "%s/%s.pid", dir, name);
		if (local_spawn(sargv, log, &srv[i].pid))
			goto out_abort;
		srv[i].started = true;
		if (local_pid_write(pidpath, srv[i].pid))
			goto out_abort;
		printf("started %s on %s:%u (pid %d)\n", name, cfg->servers[i].host,
		       cfg->servers[i].port, (int)srv[i].pid);
	}
	if (local_wait_up(dir, cfg, srv))
		goto out_abort;
out_mount:
	if (mnt && local_mount(dir, bindir, conf, mnt))
		goto out_fail;
	free(cfg);
	printf("%s\n", conf);
	return ORCH_CLI_OK;
out_abort:
	local_abort(dir, cfg, srv);
out_fail:
	free(cfg);
	return ORCH_CLI_FAIL;
}

/* --- down ------------------------------------------------------------------------ */

static int local_down(struct orch_cli *cli, int argc, char **argv)
{
	static const struct option opts[] = { ORCH_CLI_OPTS_END };
	pid_t pids[ORCH_SERVERS_MAX], stopping[ORCH_SERVERS_MAX];
	char names[ORCH_SERVERS_MAX][256];
	char dir[PATH_MAX], path[PATH_MAX + 300];
	unsigned int n = 0, killed;
	struct dirent *de;
	DIR *d;
	int opt;

	while ((opt = orch_cli_getopt(cli, argc, argv, "", opts)) != -1) {
		switch (opt) {
		case ORCH_CLI_OPT_HELP:
			return orch_cli_usage(cli, ORCH_CLI_OK);
		default:
			return orch_cli_usage(cli, ORCH_CLI_USAGE);
		}
	}
	if (argc - optind != 1)
		return orch_cli_usage_err(cli, "local down takes one DIR");
	if (!realpath(argv[optind], dir)) {
		orch_cli_err(-errno, "cannot access '%s'", argv[optind]);
		return ORCH_CLI_FAIL;
	}
	local_unmount(dir);
	d = opendir(dir);
	if (!d) {
		orch_cli_err(-errno, "cannot open '%s'", dir);
		return ORCH_CLI_FAIL;
	}
	while ((de = readdir(d))) {
		size_t len = strlen(de->d_name);
		pid_t pid;

		if (len <= 4 || strcmp(de->d_name + len - 4, ".pid") ||
		    strcmp(de->d_name, "mount.pid") == 0 || len - 4 >= sizeof(names[0]))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		pid = local_pid_read(path);
		if (!local_pid_is(pid, "orchardd")) {
			printf("%.*s was not running (removed stale %s)\n", (int)(len - 4),
			       de->d_name, de->d_name);
			unlink(path);
			continue;
		}
		if (n == ORCH_SERVERS_MAX) {
			orch_cli_msg("more than %d pid files in '%s'; stopping the first %d",
				     ORCH_SERVERS_MAX, dir, ORCH_SERVERS_MAX);
			break;
		}
		snprintf(names[n], sizeof(names[n]), "%.*s", (int)(len - 4), de->d_name);
		pids[n++] = pid;
	}
	closedir(d);
	if (n == 0) {
		printf("nothing was running in %s\n", dir);
		return ORCH_CLI_OK;
	}
	/* local_stop_pids() zeroes what it stopped; keep @pids to report. */
	memcpy(stopping, pids, n * sizeof(pids[0]));
	local_stop_pids(stopping, n, LOCAL_STOP_MS, &killed);
	for (unsigned int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s/%s.pid", dir, names[i]);
		unlink(path);
		printf("stopped %s (pid %d)\n", names[i], (int)pids[i]);
	}
	if (killed)
		orch_cli_msg("%u server(s) ignored SIGTERM for %d s and were killed", killed,
			     LOCAL_STOP_MS / 1000);
	return ORCH_CLI_OK;
}

int orch_cmd_local(struct orch_cli *cli, int argc, char **argv)
{
	if (argc < 2)
		return orch_cli_usage_err(cli, "missing verb (up or down)");
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return orch_cli_usage(cli, ORCH_CLI_OK);
	orch_cli_getopt_reset();
	if (strcmp(argv[1], "up") == 0)
		return local_up(cli, argc - 1, argv + 1);
	if (strcmp(argv[1], "down") == 0)
		return local_down(cli, argc - 1, argv + 1);
	return orch_cli_usage_err(cli, "unknown verb '%s' (want up or down)", argv[1]);
}
