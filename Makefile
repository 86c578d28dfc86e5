# Orchard: one non-recursive Makefile.  `make help` lists the targets.
BUILDDIR ?= build
CC ?= cc
PYTHON ?= /usr/bin/python3
V ?= 0
Q := $(if $(filter 1,$(V)),,@)

PKGS := fuse3 sqlite3 inih libcrypto raft libuv
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS := $(shell pkg-config --libs $(PKGS) 2>/dev/null)
# The HTTP endpoint (src/web): linked into orchardd and orchard-mount only.
MHD_CFLAGS := $(shell pkg-config --cflags libmicrohttpd 2>/dev/null)
MHD_LIBS := $(shell pkg-config --libs libmicrohttpd 2>/dev/null)

CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Wmissing-prototypes -Wshadow -Wformat=2 -Werror
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -Isrc $(PKG_CFLAGS) $(MHD_CFLAGS) $(CFLAGS)
LDLIBS := $(PKG_LIBS) -lpthread

ifeq ($(SANITIZE),1)
ALL_CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -DORCH_DEBUG_BUILD
LDFLAGS += -fsanitize=address,undefined
endif
# ThreadSanitizer (check-tsan): the server's threads, the mount's FUSE
# workers and liborchard's leader/follower reading.
ifeq ($(SANITIZE),thread)
ALL_CFLAGS += -fsanitize=thread -fno-omit-frame-pointer -DORCH_DEBUG_BUILD
LDFLAGS += -fsanitize=thread
endif

# Modules, in dependency order: each may use the ones before it.
MODULES := common web proto net repl meta group store client
lib_srcs = $(wildcard src/$(1)/*.c)
lib_objs = $(patsubst src/%.c,$(BUILDDIR)/obj/%.o,$(call lib_srcs,$(1)))
LIBS := $(foreach m,$(MODULES),$(BUILDDIR)/lib/liborch$(m).a)
# Link order: dependants first.
LINKLIBS := $(foreach m,$(shell echo $(MODULES) | tr ' ' '\n' | tac),$(BUILDDIR)/lib/liborch$(m).a)

BINS := $(BUILDDIR)/bin/orchardd $(BUILDDIR)/bin/orchard
ifneq ($(wildcard src/mount/*.c),)
BINS += $(BUILDDIR)/bin/orchard-mount
endif
UNIT_SRCS := $(wildcard tests/unit/t_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILDDIR)/tests/%,$(UNIT_SRCS))
# Test tools: small programs the integration tests drive (tests/tools/*.c).
TOOL_SRCS := $(wildcard tests/tools/*.c)
TOOL_BINS := $(patsubst tests/tools/%.c,$(BUILDDIR)/tests/%,$(TOOL_SRCS))
BENCH_BINS := $(BUILDDIR)/bench/orch-bench $(BUILDDIR)/bench/store-bench \
	$(BUILDDIR)/bench/group-bench

.PHONY: all deps spec test test-unit test-py test-py-log soak check check-asan check-tsan check-clang check-valgrind fuzz-smoke fuzz fuzz-replay bench bench-mount bench-store bench-group bench-failover clean help
.SECONDARY:
all: $(BINS) $(UNIT_BINS) $(TOOL_BINS) $(BENCH_BINS)

deps:
	$(Q)bash scripts/deps.sh

# Recorded flags: changing CFLAGS or SANITIZE rebuilds everything.
FLAGS_FILE := $(BUILDDIR)/.flags
$(shell mkdir -p $(BUILDDIR) && echo '$(CC) $(ALL_CFLAGS) $(LDFLAGS)' | cmp -s - $(FLAGS_FILE) || echo '$(CC) $(ALL_CFLAGS) $(LDFLAGS)' > $(FLAGS_FILE))

$(BUILDDIR)/obj/%.o: src/%.c $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -MMD -MP -c $< -o $@

$(BUILDDIR)/obj/tests/%.o: tests/%.c $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -MMD -MP -c $< -o $@

define lib_rule
$(BUILDDIR)/lib/liborch$(1).a: $(call lib_objs,$(1))
	@mkdir -p $$(dir $$@)
	@rm -f $$@
	$(Q)ar rcs $$@ $$^
endef
$(foreach m,$(MODULES),$(eval $(call lib_rule,$(m))))

$(BUILDDIR)/bin/orchardd: $(call lib_objs,server) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call lib_objs,server) $(LINKLIBS) $(MHD_LIBS) $(LDLIBS)

$(BUILDDIR)/bin/orchard: $(call lib_objs,cli) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call lib_objs,cli) $(LINKLIBS) $(LDLIBS)

$(BUILDDIR)/bin/orchard-mount: $(call lib_objs,mount) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $(call lib_objs,mount) $(LINKLIBS) $(MHD_LIBS) $(LDLIBS)

# The mount's lease cache and its record of kernel names are tested on their
# own (they need no FUSE session).
$(BUILDDIR)/tests/t_lcache: $(BUILDDIR)/obj/tests/unit/t_lcache.o $(BUILDDIR)/obj/mount/lcache.o $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILDDIR)/obj/mount/lcache.o $(LINKLIBS) $(LDLIBS)

$(BUILDDIR)/tests/t_knames: $(BUILDDIR)/obj/tests/unit/t_knames.o $(BUILDDIR)/obj/mount/knames.o $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(BUILDDIR)/obj/mount/knames.o $(LINKLIBS) $(LDLIBS)

# Parts of the server are tested on their own, linked with the server files
# below them; orchardd is not a library.
SV_TEST_OBJS = $(patsubst %,$(BUILDDIR)/obj/server/%.o,$(1))
T_LEASE_OBJS := $(call SV_TEST_OBJS,sv_conns sv_ack sv_lease sv_req)
# t_intent brings its own peer transport and flusher.
T_INTENT_OBJS := $(call SV_TEST_OBJS,sv_conns sv_ack sv_lease sv_req sv_gate sv_ns sv_write sv_mirror \
		 sv_writers sv_opens intent)
$(BUILDDIR)/tests/t_lease: $(BUILDDIR)/obj/tests/unit/t_lease.o $(T_LEASE_OBJS) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(T_LEASE_OBJS) $(LINKLIBS) $(LDLIBS)

$(BUILDDIR)/tests/t_intent: $(BUILDDIR)/obj/tests/unit/t_intent.o $(T_INTENT_OBJS) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(T_INTENT_OBJS) $(LINKLIBS) $(LDLIBS)

# t_conn: the connection's input bounds and the registry's deadline and cap.
$(BUILDDIR)/tests/t_conn: $(BUILDDIR)/obj/tests/unit/t_conn.o $(call SV_TEST_OBJS,sv_conns) $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(call SV_TEST_OBJS,sv_conns) $(LINKLIBS) $(LDLIBS)

$(BUILDDIR)/tests/t_%: $(BUILDDIR)/obj/tests/unit/t_%.o $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LINKLIBS) $(LDLIBS)

$(BUILDDIR)/tests/%: $(BUILDDIR)/obj/tests/tools/%.o $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LINKLIBS) $(LDLIBS)

# --- Tests ------------------------------------------------------------------
# `make test`: unit tests, fuzz-corpus replay, then the integration suite
# (real servers on 127.0.0.1).  TESTFLAGS goes to pytest (e.g. -k rename).
test: all test-unit fuzz-replay test-py

# The unit tests, and docs/SPEC-wire.md's generated part against msg.def
# and flags.def (make spec rewrites it).
test-unit: $(UNIT_BINS) $(BUILDDIR)/tests/gen-wire-spec
	$(Q)bash tests/lib/run_unit.sh $(UNIT_BINS)
	$(Q)$(BUILDDIR)/tests/gen-wire-spec --check docs/SPEC-wire.md && echo "SPEC-wire.md: up to date"

spec: $(BUILDDIR)/tests/gen-wire-spec
	$(Q)$< --update docs/SPEC-wire.md

# PYTEST_JOBS=N runs the suite in N processes (python3-pytest-xdist), a test
# file to a process: the tests of one file share fixtures and some share
# host-wide state (test_mount_helper.py's /etc/fstab), so files are the unit.
PYTEST_JOBS ?=
# -n only where python3-pytest-xdist is installed (scripts/deps.sh installs it).
XDIST := $(shell $(PYTHON) -c 'import xdist' 2>/dev/null && echo yes)
xdist = $(if $(XDIST),-n $(1) --dist loadfile)
test-py: $(BINS) $(TOOL_BINS)
	$(Q)ORCH_BUILDDIR=$(abspath $(BUILDDIR)) $(PYTHON) -m pytest -q \
		$(if $(PYTEST_JOBS),$(call xdist,$(PYTEST_JOBS))) tests/py $(TESTFLAGS)

# The namespace, POSIX, lease, acknowledgement and freshness tests again, every server's
# namespace through a replicated log of its own (ORCH_TEST_LOG=1,
# tests/lib/cluster.py; docs/DESIGN.md, "The server on the group"); and,
# side by side with them, the kill campaign on replica groups at the 20
# leader kills of its issue (LOG_REPLICA_KILLS; 6 in the sanitized suite,
# where each kill costs three times as long).
LOG_TESTS := tests/py/test_namespace.py tests/py/test_posix.py tests/py/test_leases.py \
	tests/py/test_acks.py tests/py/test_intents.py tests/py/test_group_server.py \
	tests/py/test_linearize.py tests/py/test_replica_campaign.py
LOG_REPLICA_KILLS ?= 20
test-py-log: $(BINS) $(TOOL_BINS)
	$(Q)ORCH_TEST_LOG=1 ORCH_REPLICA_CAMPAIGN_KILLS=$(LOG_REPLICA_KILLS) \
		ORCH_BUILDDIR=$(abspath $(BUILDDIR)) $(PYTHON) -m pytest -q \
		$(call xdist,$(or $(PYTEST_JOBS),2)) $(LOG_TESTS) $(TESTFLAGS)

# The long campaigns: the power-cut campaign of tests/py/test_pcut_campaign.py,
# 200 rounds of cuts of random servers (one or two) under a mixed workload;
# the kill campaign of tests/py/test_kill_campaign.py, 100 SIGKILLs of
# random servers under a workload through two FUSE mounts; and the network
# faults of tests/py/test_faults_net.py at the scale they were first
# measured at (10 s deadline, 45 s freeze, 5% loss); and the two-mount
# random test of coherent mode at SOAK_COHERENT_OPS changes.  Long: each
# test may run an hour (ORCH_TEST_DEADLINE, tests/lib/deadline.py).
SOAK_CUTS ?= 200
SOAK_KILLS ?= 100
SOAK_REPLICA_KILLS ?= 40
SOAK_COHERENT_OPS ?= 20000
soak: export ORCH_TEST_DEADLINE ?= 3600
soak: $(BINS) $(TOOL_BINS)
	$(Q)ORCH_CAMPAIGN_CUTS=$(SOAK_CUTS) ORCH_KILL_CAMPAIGN_KILLS=$(SOAK_KILLS) \
		ORCH_BUILDDIR=$(abspath $(BUILDDIR)) $(PYTHON) -m pytest -q -s \
		tests/py/test_pcut_campaign.py tests/py/test_kill_campaign.py::test_kill_campaign $(TESTFLAGS)
	$(Q)ORCH_NET_SOAK=1 ORCH_BUILDDIR=$(abspath $(BUILDDIR)) $(PYTHON) -m pytest -q -s tests/py/test_faults_net.py $(TESTFLAGS)
	$(Q)ORCH_TEST_OPS=$(SOAK_COHERENT_OPS) ORCH_BUILDDIR=$(abspath $(BUILDDIR)) $(PYTHON) -m pytest -q -s \
		tests/py/test_coherent.py::test_random_changes_show_on_the_other_mount_at_once $(TESTFLAGS)
	$(Q)ORCH_REPLICA_CAMPAIGN_KILLS=$(SOAK_REPLICA_KILLS) ORCH_BUILDDIR=$(abspath $(BUILDDIR)) \
		$(PYTHON) -m pytest -q -s tests/py/test_replica_campaign.py $(TESTFLAGS)

# Most integration tests wait on servers, fsyncs and timers rather than
# computing, so three files run side by side (PYTEST_JOBS) even on two
# CPUs: 927 s against 1,050 s for two, the CPUs 88% busy.  The slowest
# tests are listed at the end: this stage is most of CI's time.
check-asan:
	$(Q)$(MAKE) --no-print-directory -j$(CHECK_JOBS) BUILDDIR=build-asan SANITIZE=1 \
		CFLAGS="-O1 -g" all
	$(Q)$(MAKE) --no-print-directory BUILDDIR=build-asan SANITIZE=1 CFLAGS="-O1 -g" \
		PYTEST_JOBS=$(or $(PYTEST_JOBS),3) TESTFLAGS="--durations=15 $(TESTFLAGS)" test

# ThreadSanitizer in build-tsan/: the unit tests (t_rpc drives liborchard's
# leader/follower reader) and the pytest files whose mounts, servers and
# clients run the most threads at once.  Built with clang: its runtime is
# linked in statically (libclang-rt-14-dev, which deps.sh installs) and
# check-clang already keeps the tree warning-free with it.  A report stops
# the process (halt_on_error) with exit 66, and the pytest harness fails a
# test whose server, mount or CLI printed one.  tests/tsan.supp says why
# each of its entries is no race.  TSAN_UNIT_BINS, TSAN_UNIT_EXCLUDE,
# TSAN_PYTESTS and TSAN_PYFLAGS pick what runs: the store's record and
# repair campaigns, its random-operations model test and the many-small-
# files test run one thread at a time and take most of the time under
# TSan (10 of 19 minutes), so CI leaves them to the other builds.
TSAN_CC ?= clang
TSAN_UNIT_BINS ?= $(filter-out %/t_store_fuzzrec %/t_store_repair %/t_store_check, \
	$(patsubst tests/unit/%.c,build-tsan/tests/%,$(UNIT_SRCS)))
TSAN_UNIT_EXCLUDE ?= random_ops_against_model
TSAN_PYTESTS ?= tests/py/test_mount.py tests/py/test_data.py tests/py/test_leases.py \
	tests/py/test_kernel_inval.py tests/py/test_acks.py tests/py/test_metrics.py \
	tests/py/test_group_server.py tests/py/test_replicas.py
# test_metrics.py: its HTTP threads against the loop and the FUSE workers
# (about 10 s); the Prometheus and Chromium tests check formats, not threads.
# test_acks.py runs its coherent half: the other runs the same threads.
# test_group_server.py: the log's libuv loop and threads inside the server
# (about 20 s); its power cuts run the same threads.  test_replicas.py:
# liborchard's member switching and retries against groups that fail over.
# test_replica_registers.py's four linearizability histories run the same
# threads as those failovers, for longer, so they run in the ASan and plain
# stages only.
TSAN_PYFLAGS ?= -k "not many_small_files and not prometheus_server and not chromium and not minute \
	and not power_cut and not linearizable"
# Two files at a time, as check-asan: the mounts and servers mostly wait.
TSAN_JOBS ?= 2
TSAN_OPTIONS_CHECK := halt_on_error=1 exitcode=66 second_deadlock_stack=1 \
	suppressions=$(abspath tests/tsan.supp)
check-tsan:
	$(Q)$(MAKE) --no-print-directory -j$(CHECK_JOBS) BUILDDIR=build-tsan SANITIZE=thread \
		CC=$(TSAN_CC) CFLAGS="-O1 -g" all
	$(Q)TSAN_OPTIONS="$(TSAN_OPTIONS_CHECK)" ORCH_TEST_EXCLUDE="$(TSAN_UNIT_EXCLUDE)" \
		bash tests/lib/run_unit.sh $(TSAN_UNIT_BINS)
	$(Q)TSAN_OPTIONS="$(TSAN_OPTIONS_CHECK)" ORCH_BUILDDIR=$(abspath build-tsan) \
		$(PYTHON) -m pytest -q $(call xdist,$(TSAN_JOBS)) $(TSAN_PYTESTS) $(TSAN_PYFLAGS) \
		$(TESTFLAGS)

# The code must build warning-free with clang too.
check-clang:
	$(Q)$(MAKE) --no-print-directory -j$(CHECK_JOBS) BUILDDIR=build-clang CC=clang all

# Unit tests under valgrind (memcheck): slow, so unit tests only, side by
# side as test-unit runs them.
VALGRIND := valgrind -q --suppressions=$(abspath tests/valgrind.supp) --error-exitcode=1 --leak-check=full --errors-for-leak-kinds=definite \
	--show-possibly-lost=no
check-valgrind: $(UNIT_BINS)
	$(Q)UNIT_WRAP="$(VALGRIND)" bash tests/lib/run_unit.sh $(UNIT_BINS) >$(BUILDDIR)/valgrind.log 2>&1 || \
		{ tail -80 $(BUILDDIR)/valgrind.log; \
		  echo "valgrind: unit tests failed (whole log: $(BUILDDIR)/valgrind.log)"; exit 1; }
	$(Q)echo "valgrind: unit tests clean"

# Everything CI runs: the build, the unit tests and the fuzz corpora, a
# clang build, valgrind on the unit tests, the unit and integration tests
# under ASan+UBSan, TSan, a short fuzz run and the Debian packages.  The
# integration suite runs once, under ASan+UBSan: a second, plain run took
# ten more minutes and found nothing the sanitized one does not (`make
# test` runs it plain; the packages' smoke test runs the plain binaries).
# The builds of the stages run CHECK_JOBS compilers at once (the tests run
# as each stage says).
CHECK_JOBS ?= $(shell nproc 2>/dev/null || echo 1)
CHECK_STAGES := all test-unit fuzz-replay test-py-log check-clang check-valgrind check-asan check-tsan \
	fuzz-smoke check-deb
check: deps
	$(Q)start=$$(date +%s); for stage in $(CHECK_STAGES); do \
		t=$$(date +%s); \
		$(MAKE) --no-print-directory $$([ $$stage = all ] && echo -j$(CHECK_JOBS)) $$stage || \
			{ echo "check: $$stage failed"; exit 1; }; \
		echo "check: $$stage took $$(( $$(date +%s) - t )) s"; \
	done; echo "check: everything passed in $$(( $$(date +%s) - start )) s"

fuzz-smoke:
	$(Q)$(MAKE) --no-print-directory -j$(CHECK_JOBS) $(FUZZ_BINS)
	$(Q)$(MAKE) --no-print-directory fuzz FUZZ_TIME=$(FUZZ_SMOKE_TIME)

# --- Install, man pages, Debian package -------------------------------------
# make install [PREFIX=/usr/local] [DESTDIR=...]: binaries, man pages, the
# systemd units, the mount helper and an example config.  The helper goes
# to /sbin whatever PREFIX is (mount(8) looks for mount.TYPE there only) and
# the example to /etc/orchard, where every command looks for its config
# (ORCH_CFG_DEFAULT_PATH, compiled in: CONFDIR moves the example only).
# make uninstall removes exactly INSTALLED.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
MANDIR ?= $(PREFIX)/share/man
UNITDIR ?= $(PREFIX)/lib/systemd/system
MOUNTHELPERDIR ?= /sbin
CONFDIR ?= /etc/orchard
MANPAGES := man/orchard.1 man/orchard.conf.5 man/orchardd.8 man/orchard-mount.8 \
	man/mount.orchard.8
UNITS := orchardd@.service orchard-mount@.service
INSTALLED := $(BINDIR)/orchard $(SBINDIR)/orchardd $(SBINDIR)/orchard-mount \
	$(MOUNTHELPERDIR)/mount.orchard $(addprefix $(UNITDIR)/,$(UNITS)) \
	$(foreach m,$(MANPAGES),$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m))) \
	$(CONFDIR)/orchard.conf.example
SUBST_DIRS := sed -e 's|@SBINDIR@|$(SBINDIR)|g'

.PHONY: bins install uninstall check-deb
# The three programs alone (what the Debian package builds).
bins: $(BINS)

install: $(BINS)
	$(Q)install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(SBINDIR) $(DESTDIR)$(MOUNTHELPERDIR) \
		$(DESTDIR)$(UNITDIR) $(DESTDIR)$(CONFDIR) \
		$(addprefix $(DESTDIR)$(MANDIR)/man,1 5 8)
	$(Q)install -m 0755 $(BUILDDIR)/bin/orchard $(DESTDIR)$(BINDIR)/
	$(Q)install -m 0755 $(BUILDDIR)/bin/orchardd $(BUILDDIR)/bin/orchard-mount $(DESTDIR)$(SBINDIR)/
	$(Q)$(SUBST_DIRS) dist/mount.orchard.in > $(DESTDIR)$(MOUNTHELPERDIR)/mount.orchard
	$(Q)chmod 0755 $(DESTDIR)$(MOUNTHELPERDIR)/mount.orchard
	$(Q)for u in $(UNITS); do $(SUBST_DIRS) dist/$$u.in > $(DESTDIR)$(UNITDIR)/$$u && \
		chmod 0644 $(DESTDIR)$(UNITDIR)/$$u || exit 1; done
	$(Q)for m in $(MANPAGES); do s=$${m##*.}; \
		install -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/ || exit 1; done
	$(Q)install -m 0644 dist/orchard.conf.example $(DESTDIR)$(CONFDIR)/

uninstall:
	$(Q)rm -f $(addprefix $(DESTDIR),$(INSTALLED))
	$(Q)rmdir $(DESTDIR)$(CONFDIR) 2>/dev/null || true

# The Debian packages (debian/), built with dpkg-buildpackage into
# $(BUILDDIR)/deb/, then installed on this machine, used (two servers
# started from /usr/sbin, a mount through mount -t orchard, a file written
# and read back) and purged: tests/deb/smoke.sh.  Root only; CI runs it.
check-deb:
	$(Q)bash tests/deb/smoke.sh $(abspath $(BUILDDIR))/deb

# --- Fuzzing (clang + libFuzzer) --------------------------------------------
FUZZDIR := $(BUILDDIR)-fuzz
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(FUZZDIR)/%,$(FUZZ_SRCS))
FUZZ_TIME ?= 60
FUZZ_SMOKE_TIME ?= 5
FUZZ_LIBSRCS := $(foreach m,common proto net meta store,$(call lib_srcs,$(m))) src/repl/entry.c
# The libraries are compiled once, instrumented (fuzzer-no-link), and each
# target links them: not compiled again for every target.
FUZZ_OBJS := $(patsubst src/%.c,$(FUZZDIR)/obj/%.o,$(FUZZ_LIBSRCS))
FUZZ_FLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -Isrc -Itests $(PKG_CFLAGS) \
	-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all

$(FUZZDIR)/obj/%.o: src/%.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ-CC $@")
	$(Q)clang $(FUZZ_FLAGS) -MMD -MP -c $< -o $@

$(FUZZDIR)/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_OBJS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  FUZZ-LD $@")
	$(Q)clang $(FUZZ_FLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_OBJS) $(LDLIBS)

-include $(FUZZ_OBJS:.o=.d)

fuzz: $(FUZZ_BINS)
	$(Q)for f in $(FUZZ_BINS); do n=$$(basename $$f); mkdir -p $(FUZZDIR)/corpus/$$n; \
		$$f -max_total_time=$(FUZZ_TIME) -timeout=1 $(FUZZDIR)/corpus/$$n tests/fuzz/corpus/$$n || exit 1; done

# Replays the seed corpus and every saved crash with the normal build.
fuzz-replay: $(patsubst tests/fuzz/%.c,$(BUILDDIR)/tests/%,$(FUZZ_SRCS))
	$(Q)for f in $^; do n=$$(basename $$f); $$f tests/fuzz/corpus/$$n tests/fuzz/regress/$$n || exit 1; done

$(BUILDDIR)/tests/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/replay_main.c $(LIBS)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LD      $@")
	$(Q)$(CC) $(ALL_CFLAGS) -Itests $(LDFLAGS) -o $@ $< tests/fuzz/replay_main.c $(LINKLIBS) $(LDLIBS)

$(BUILDDIR)/bench/orch-bench: $(BUILDDIR)/obj/bench/orch_bench.o $(LIBS)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LINKLIBS) $(LDLIBS)

$(BUILDDIR)/bench/store-bench: $(BUILDDIR)/obj/bench/store_bench.o $(LIBS)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LINKLIBS) $(LDLIBS)

$(BUILDDIR)/bench/group-bench: $(BUILDDIR)/obj/bench/group_bench.o $(LIBS)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(LDFLAGS) -o $@ $< $(LINKLIBS) $(LDLIBS)

$(BUILDDIR)/obj/bench/%.o: bench/%.c $(FLAGS_FILE)
	@mkdir -p $(dir $@)
	$(Q)$(CC) $(ALL_CFLAGS) -Itests -MMD -MP -c $< -o $@

bench: $(BINS) $(BENCH_BINS)
	$(Q)ORCH_BUILDDIR=$(abspath $(BUILDDIR)) $(PYTHON) bench/cli_bench.py

# Namespace operations through a replica group of 1 and of 3 members
# against the namespace directly (src/group; DESIGN.md, "Replication").
# BENCHFLAGS="--ops N --window N --rounds N".
bench-group: $(BUILDDIR)/bench/group-bench
	$(Q)$(BUILDDIR)/bench/group-bench --window 1 --ops 1000 $(BENCHFLAGS)
	$(Q)$(BUILDDIR)/bench/group-bench --window 64 $(BENCHFLAGS)

# The mount against a local directory and libfuse's passthrough_ll, side by
# side (its targets: docs/PERF-NOTES.md).  BENCHFLAGS=--quick-ish flags: see
# its --help.
# Both benchmarks also draw their ratios in a PNG chart (bench/chart.py,
# python3-matplotlib): $(BUILDDIR)/bench/bench-mount.png and bench-store.png,
# or CHART=path.
bench-mount: $(BINS)
	$(Q)ORCH_BUILDDIR=$(abspath $(BUILDDIR)) $(PYTHON) bench/mount_bench.py \
		$(if $(CHART),--chart $(CHART)) $(BENCHFLAGS)

# Replica groups' failover: SIGKILLs of a random group's leader under
# probes on every group, the time to the failed group's first operation
# and the other groups' slowest (BENCHFLAGS="--kills N --servers G
# --replicas R"; docs/PERF-NOTES.md).  Needs root and /dev/fuse.
bench-failover: $(BINS)
	$(Q)ORCH_BUILDDIR=$(abspath $(BUILDDIR)) $(PYTHON) bench/failover_bench.py $(BENCHFLAGS)

# The extent store against pwrite/pread on a file in the same directory
# (its targets: docs/PERF-NOTES.md).  Writes about 2 GiB; drops the files it reads
# from the page cache before each read.  BENCHFLAGS="--quick", "-d DIR",
# "--json", "--phases fsync": see store-bench --help.
STORE_JSON := $(BUILDDIR)/bench/bench-store.json
bench-store: $(BUILDDIR)/bench/store-bench
	$(Q)rm -f $(STORE_JSON)
	$(Q)$(BUILDDIR)/bench/store-bench --json-file $(STORE_JSON) $(BENCHFLAGS)
	$(Q)if [ -f $(STORE_JSON) ]; then $(PYTHON) bench/chart.py store $(STORE_JSON) \
		$(or $(CHART),$(BUILDDIR)/bench/bench-store.png); fi

clean:
	rm -rf $(BUILDDIR) build-asan build-tsan build-clang $(FUZZDIR)

help:
	@echo "make            build binaries and unit tests into $(BUILDDIR)/"
	@echo "make deps       install the Debian packages the build and tests need"
	@echo "make check      what CI runs: deps, build, unit tests, clang, valgrind, ASan+UBSan and TSan"
	@echo "                tests, a short fuzz run, the Debian packages (CHECK_STAGES)"
	@echo "make test       unit tests, fuzz replay, integration tests (TESTFLAGS=... for pytest,"
	@echo "                PYTEST_JOBS=N for N test files at a time)"
	@echo "make test-py-log  the namespace tests with every server's namespace through a log"
	@echo "make spec       rewrite docs/SPEC-wire.md's tables from src/proto/msg.def and flags.def"
	@echo "make soak       the power-cut campaign, 200 rounds (SOAK_CUTS=N), the kill"
	@echo "                campaign, 100 server kills (SOAK_KILLS=N), long network faults"
	@echo "make check-asan the same under ASan+UBSan in build-asan/"
	@echo "make check-tsan unit tests and the mount, data, lease and metrics tests under TSan in build-tsan/"
	@echo "make fuzz       run every libFuzzer target for FUZZ_TIME seconds"
	@echo "make install    binaries, man pages, units, mount helper (PREFIX=/usr/local DESTDIR=)"
	@echo "make uninstall  remove what make install put there (same PREFIX and DESTDIR)"
	@echo "make check-deb  build the Debian packages, install them, smoke-test, purge (root)"
	@echo "make bench      CLI benchmark against a 2-server local cluster"
	@echo "make bench-mount  the mount vs a local dir and passthrough_ll (BENCHFLAGS=...), and a PNG chart"
	@echo "make bench-store  the data store vs pwrite/pread on the same disk (BENCHFLAGS=--quick ...), and a PNG chart"
	@echo "make bench-group  namespace creates through a replica group of 1 and 3 vs the namespace directly"
	@echo "make bench-failover  time from a leader's SIGKILL to its group's next operation, 20 kills"

-include $(shell find $(BUILDDIR)/obj -name '*.d' 2>/dev/null)
