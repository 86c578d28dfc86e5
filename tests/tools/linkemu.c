/*
 * linkemu: a user-space link emulator for the fault tests (tests/lib/netns.py).
 *
 *   linkemu [--cap BYTES] NAME=DEV[@NETNS]=ADDR ...
 *
 * Each argument is a host: a TUN device DEV that linkemu creates (inside the
 * network namespace /run/netns/NETNS if given), through which the host at
 * IPv4 address ADDR reaches every other host.  linkemu is the wire between
 * them: it reads each IP packet a host sends, finds the host its destination
 * address names, and writes the packet into that host's device, after the
 * packet has passed two stages, the sender's uplink ("out") and the
 * receiver's ("in").  Each stage can delay packets (with jitter, in order),
 * lose them (a seeded generator, so a run's decisions are repeatable),
 * hold them (stall: queued until the link is up again) or drop them all
 * (down).  Packets are real, so TCP above sees real losses, retransmission
 * timeouts and SYN retries; this kernel has no netem, and a TCP relay
 * could only turn a loss into a pause.
 *
 * Control: one command per stdin line, each answered with one stdout line,
 * "ok ..." or "err WHY", once it is in effect:
 *
 *   set NAME [dir=in|out|both] [state=up|down|stall] [delay_us=N]
 *            [jitter_us=N] [loss=P] [seed=N]
 *   stats NAME      -> ok in_pkts=.. in_lost=.. in_cut=.. in_queued=.. out_...
 *   quit
 *
 * linkemu prints "ready" once every device exists, and exits when stdin
 * closes (its owner died): the devices go with it.  ADDR is matched exactly;
 * anything that is not IPv4 is dropped (counted nowhere).
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_tun.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#define EMU_HOSTS_MAX 32
#define EMU_PKT_MAX 65536
#define EMU_CAP_DEFAULT (32u << 20)

struct pkt {
	struct pkt *next;
	uint64_t due_ns;     /* when it leaves its current stage */
	int to;              /* destination host */
	int stage;           /* 0: in the sender's "out" stage, 1: the receiver's "in" */
	size_t len;
	uint8_t data[];
};

/* One direction of a host's uplink. */
struct stage {
	enum { ST_UP, ST_DOWN, ST_STALL } state;
	uint64_t delay_ns, jitter_ns;
	double loss;
	uint64_t rng;
	struct pkt *head, *tail;
	size_t queued;       /* bytes */
	uint64_t last_due;   /* FIFO: a packet never leaves before the one ahead */
	uint64_t pkts, lost, cut, dropped_full;
};

struct host {
	char name[32];
	char dev[IFNAMSIZ];
	char netns[64];
	uint32_t addr;       /* network order */
	int fd;
	struct stage st[2];  /* [0] out, [1] in */
};

static struct host hosts[EMU_HOSTS_MAX];
static int nhosts;
static size_t cap = EMU_CAP_DEFAULT;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* xorshift64*: a run's losses depend only on the seed and the packet order. */
static double rnd(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return (double)((x * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void seed_stage(struct stage *st, uint64_t seed, int salt)
{
	st->rng = (seed + 1) * 0x9e3779b97f4a7c15ull + (uint64_t)salt * 0xbf58476d1ce4e5b9ull;
	if (!st->rng)
		st->rng = 1;
	for (int i = 0; i < 8; i++)
		rnd(&st->rng);
}

/* Creates the TUN device of @h, in its namespace if it has one. */
static int tun_open(struct host *h)
{
	struct ifreq ifr;
	int self = -1, ns = -1, fd = -1, error = 0;

	if (h->netns[0]) {
		char path[128];

		snprintf(path, sizeof(path), "/run/netns/%s", h->netns);
		self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
		ns = open(path, O_RDONLY | O_CLOEXEC);
		if (self < 0 || ns < 0 || setns(ns, CLONE_NEWNET) != 0) {
			fprintf(stderr, "linkemu: cannot enter netns '%s': %s\n", h->netns,
				strerror(errno));
			error = -1;
			goto out;
		}
	}
	fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC | O_NONBLOCK);
	memset(&ifr, 0, sizeof(ifr));
	ifr.ifr_flags = IFF_TUN | IFF_NO_PI;
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", h->dev);
	if (fd < 0 || ioctl(fd, TUNSETIFF, &ifr) != 0) {
		fprintf(stderr, "linkemu: cannot create tun '%s': %s\n", h->dev, strerror(errno));
		error = -1;
	}
	if (self >= 0 && setns(self, CLONE_NEWNET) != 0) {
		fprintf(stderr, "linkemu: cannot return to our netns: %s\n", strerror(errno));
		error = -1;
	}
out:
	if (self >= 0)
		close(self);
	if (ns >= 0)
		close(ns);
	if (error) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	h->fd = fd;
	return 0;
}

static int host_find(uint32_t addr)
{
	for (int i = 0; i < nhosts; i++)
		if (hosts[i].addr == addr)
			return i;
	return -1;
}

static int host_by_name(const char *name)
{
	for (int i = 0; i < nhosts; i++)
		if (strcmp(hosts[i].name, name) == 0)
			return i;
	return -1;
}

/* Puts @p into stage @st (dropping it as the stage says). */
static void stage_enter(struct stage *st, struct pkt *p, uint64_t now)
{
	uint64_t due;

	st->pkts++;
	if (st->state == ST_DOWN) {
		st->cut++;
		free(p);
		return;
	}
	if (st->loss > 0 && rnd(&st->rng) < st->loss) {
		st->lost++;
		free(p);
		return;
	}
	if (st->queued + p->len > cap) {
		st->dropped_full++;
		free(p);
		return;
	}
	due = now + st->delay_ns;
	if (st->jitter_ns)
		due += (uint64_t)(rnd(&st->rng) * (double)st->jitter_ns);
	if (due < st->last_due)
		due = st->last_due;
	st->last_due = due;
	p->due_ns = due;
	p->next = NULL;
	if (st->tail)
		st->tail->next = p;
	else
		st->head = p;
	st->tail = p;
	st->queued += p->len;
}

/* Moves every due packet on: out -> the receiver's in -> its device. */
static void stages_run(uint64_t now)
{
	bool moved = true;

	while (moved) {
		moved = false;
		for (int i = 0; i < nhosts; i++) {
			for (int s = 0; s < 2; s++) {
				struct stage *st = &hosts[i].st[s];

				while (st->head && st->state == ST_UP && st->head->due_ns <= now) {
					struct pkt *p = st->head;

					st->head = p->next;
					if (!st->head)
						st->tail = NULL;
					st->queued -= p->len;
					if (p->stage == 0) {
						p->stage = 1;
						stage_enter(&hosts[p->to].st[1], p, now);
						moved = true;
					} else {
						/* A full device queue loses the packet, as a wire would. */
						if (write(hosts[p->to].fd, p->data, p->len) < 0 &&
						    errno != EAGAIN && errno != EIO)
							perror("linkemu: write");
						free(p);
					}
				}
			}
		}
	}
}

/* Nanoseconds to the next due packet, or -1. */
static int64_t stages_next(uint64_t now)
{
	int64_t best = -1;

	for (int i = 0; i < nhosts; i++) {
		for (int s = 0; s < 2; s++) {
			const struct stage *st = &hosts[i].st[s];
			int64_t d;

			if (!st->head || st->state != ST_UP)
				continue;
			d = st->head->due_ns > now ? (int64_t)(st->head->due_ns - now) : 0;
			if (best < 0 || d < best)
				best = d;
		}
	}
	return best;
}

static void stage_flush(struct stage *st)
{
	while (st->head) {
		struct pkt *p = st->head;

		st->head = p->next;
		st->cut++;
		free(p);
	}
	st->tail = NULL;
	st->queued = 0;
}

/* Reads what host @i sent. */
static void host_read(int i, uint64_t now)
{
	for (;;) {
		struct pkt *p = malloc(sizeof(*p) + EMU_PKT_MAX);
		ssize_t n;
		uint32_t dst;
		int to;

		if (!p)
			abort();
		n = read(hosts[i].fd, p->data, EMU_PKT_MAX);
		if (n <= 0) {
			free(p);
			return;
		}
		if (n < 20 || (p->data[0] >> 4) != 4) {
			free(p);
			continue;
		}
		memcpy(&dst, p->data + 16, 4);
		to = host_find(dst);
		if (to < 0 || to == i) {
			free(p);
			continue;
		}
		p->len = (size_t)n;
		p->to = to;
		p->stage = 0;
		stage_enter(&hosts[i].st[0], p, now);
	}
}

/* One control line; the answer goes to stdout. */
static void control(char *line)
{
	char *save = NULL, *cmd = strtok_r(line, " \t\n", &save), *name, *kv;
	int h, dirs = 3;
	struct stage tmp[2];

	if (!cmd)
		return;
	if (strcmp(cmd, "quit") == 0) {
		printf("ok\n");
		fflush(stdout);
		exit(0);
	}
	name = strtok_r(NULL, " \t\n", &save);
	h = name ? host_by_name(name) : -1;
	if (h < 0) {
		printf("err no such host\n");
		goto out;
	}
	if (strcmp(cmd, "stats") == 0) {
		const struct stage *o = &hosts[h].st[0], *in = &hosts[h].st[1];

		printf("ok out_pkts=%llu out_lost=%llu out_cut=%llu out_queued=%zu "
		       "in_pkts=%llu in_lost=%llu in_cut=%llu in_queued=%zu\n",
		       (unsigned long long)o->pkts, (unsigned long long)o->lost,
		       (unsigned long long)(o->cut + o->dropped_full), o->queued,
		       (unsigned long long)in->pkts, (unsigned long long)in->lost,
		       (unsigned long long)(in->cut + in->dropped_full), in->queued);
		goto out;
	}
	if (strcmp(cmd, "set") != 0) {
		printf("err unknown command\n");
		goto out;
	}
	/* Parsed into copies first: a bad line changes nothing. */
	memcpy(tmp, hosts[h].st, sizeof(tmp));
	while ((kv = strtok_r(NULL, " \t\n", &save))) {
		char *v = strchr(kv, '=');

		if (!v) {
			printf("err bad argument '%s'\n", kv);
			goto out;
		}
		*v++ = '\0';
		if (strcmp(kv, "dir") == 0) {
			dirs = strcmp(v, "out") == 0 ? 1 : strcmp(v, "in") == 0 ? 2 :
			       strcmp(v, "both") == 0 ? 3 : 0;
			if (!dirs) {
				printf("err bad dir\n");
				goto out;
			}
			continue;
		}
		for (int s = 0; s < 2; s++) {
			struct stage *st = &tmp[s];

			if (!(dirs & (1 << s)))
				continue;
			if (strcmp(kv, "state") == 0) {
				if (strcmp(v, "up") == 0)
					st->state = ST_UP;
				else if (strcmp(v, "down") == 0)
					st->state = ST_DOWN;
				else if (strcmp(v, "stall") == 0)
					st->state = ST_STALL;
				else {
					printf("err bad state\n");
					goto out;
				}
			} else if (strcmp(kv, "delay_us") == 0) {
				st->delay_ns = strtoull(v, NULL, 10) * 1000;
			} else if (strcmp(kv, "jitter_us") == 0) {
				st->jitter_ns = strtoull(v, NULL, 10) * 1000;
			} else if (strcmp(kv, "loss") == 0) {
				st->loss = strtod(v, NULL);
				if (st->loss < 0 || st->loss > 1) {
					printf("err bad loss\n");
					goto out;
				}
			} else if (strcmp(kv, "seed") == 0) {
				seed_stage(st, strtoull(v, NULL, 10), h * 2 + s);
			} else {
				printf("err unknown key '%s'\n", kv);
				goto out;
			}
		}
	}
	for (int s = 0; s < 2; s++) {
		struct stage *st = &hosts[h].st[s];

		st->state = tmp[s].state;
		st->delay_ns = tmp[s].delay_ns;
		st->jitter_ns = tmp[s].jitter_ns;
		st->loss = tmp[s].loss;
		st->rng = tmp[s].rng;
		/* Down: what it held is lost, as on a cable pulled out. */
		if (st->state == ST_DOWN)
			stage_flush(st);
	}
	printf("ok\n");
out:
	fflush(stdout);
}

/* NAME=DEV[@NETNS]=ADDR */
static int host_parse(const char *arg, struct host *h)
{
	char buf[256], *dev, *addr, *at;
	struct in_addr a;

	snprintf(buf, sizeof(buf), "%s", arg);
	dev = strchr(buf, '=');
	if (!dev)
		return -1;
	*dev++ = '\0';
	addr = strchr(dev, '=');
	if (!addr)
		return -1;
	*addr++ = '\0';
	at = strchr(dev, '@');
	if (at) {
		*at++ = '\0';
		if (strlen(at) >= sizeof(h->netns))
			return -1;
		memcpy(h->netns, at, strlen(at) + 1);
	}
	if (!buf[0] || strlen(buf) >= sizeof(h->name) || !dev[0] || strlen(dev) >= IFNAMSIZ ||
	    inet_pton(AF_INET, addr, &a) != 1)
		return -1;
	memcpy(h->name, buf, strlen(buf) + 1);
	memcpy(h->dev, dev, strlen(dev) + 1);
	h->addr = a.s_addr;
	seed_stage(&h->st[0], 0, nhosts * 2);
	seed_stage(&h->st[1], 0, nhosts * 2 + 1);
	return 0;
}

int main(int argc, char **argv)
{
	struct pollfd pfd[EMU_HOSTS_MAX + 1];
	char line[1024];
	size_t llen = 0;
	int i = 1;

	/* Our owner's death closes stdin, but a SIGKILLed pytest may leave it open. */
	prctl(PR_SET_PDEATHSIG, SIGTERM);
	signal(SIGPIPE, SIG_IGN);
	if (i + 1 < argc && strcmp(argv[i], "--cap") == 0) {
		cap = strtoull(argv[i + 1], NULL, 10);
		i += 2;
	}
	for (; i < argc; i++) {
		if (nhosts == EMU_HOSTS_MAX || host_parse(argv[i], &hosts[nhosts])) {
			fprintf(stderr, "usage: linkemu [--cap BYTES] NAME=DEV[@NETNS]=ADDR ...\n");
			return 2;
		}
		nhosts++;
	}
	if (nhosts < 2) {
		fprintf(stderr, "linkemu: at least two hosts\n");
		return 2;
	}
	for (i = 0; i < nhosts; i++)
		if (tun_open(&hosts[i]))
			return 1;
	printf("ready\n");
	fflush(stdout);

	for (;;) {
		uint64_t now = now_ns();
		int64_t next;
		struct timespec ts, *tsp = NULL;
		int rc;

		stages_run(now);
		next = stages_next(now);
		if (next >= 0) {
			ts.tv_sec = next / 1000000000;
			ts.tv_nsec = next % 1000000000;
			tsp = &ts;
		}
		for (i = 0; i < nhosts; i++)
			pfd[i] = (struct pollfd){ .fd = hosts[i].fd, .events = POLLIN };
		pfd[nhosts] = (struct pollfd){ .fd = 0, .events = POLLIN };
		rc = ppoll(pfd, (nfds_t)nhosts + 1, tsp, NULL);
		if (rc < 0 && errno != EINTR) {
			perror("linkemu: ppoll");
			return 1;
		}
		now = now_ns();
		for (i = 0; i < nhosts; i++)
			if (pfd[i].revents & POLLIN)
				host_read(i, now);
		if (pfd[nhosts].revents & (POLLIN | POLLHUP)) {
			ssize_t n = read(0, line + llen, sizeof(line) - 1 - llen);
			char *nl;

			if (n <= 0)
				return 0;
			llen += (size_t)n;
			line[llen] = '\0';
			while ((nl = strchr(line, '\n'))) {
				*nl = '\0';
				control(line);
				llen -= (size_t)(nl + 1 - line);
				memmove(line, nl + 1, llen + 1);
			}
			if (llen == sizeof(line) - 1)
				llen = 0; /* an overlong line is dropped */
		}
	}
}
