"""The kill campaign on replica groups (docs/DESIGN.md, "File data in a
replica group"): two groups of three members, two mounts, and the kill
campaign's workload through each (tests/lib/campaign.py: creates with
fsynced data, overwrites, appends and truncates, renames across
directories and groups, links, unlinks, mkdirs).  Each round the leader of
a random group is SIGKILLed while the workloads run; its store must pass
`store-check --data` as the kill left it, and it is started again.

Unlike the campaign on single servers, nothing may fail: every operation
waits for the group to elect a new leader and completes, since a group
loses nothing it acknowledged when one member dies.  So every operation's
outcome is known, and the model expects exactly what returned.  The
workloads run on for a while after the kill, then the round is verified as
the other campaign does (the tree against the model, through orch-op and a
mount; scrub clean).  At the end every member of each group holds the same
namespace and the same file data (store-check --objects), and every store
passes store-check --data.  ORCH_REPLICA_CAMPAIGN_KILLS sets the number of
kills (6 in the sanitized suite, 20 in `make test-py-log`, 40 in `make
soak`, SOAK_REPLICA_KILLS) and
ORCH_REPLICA_CAMPAIGN_SEED the seed."""
import os
import random
import shutil
import threading
import time

import pytest

from campaign import FuseOp, Workload, new_tally, restart_victims, verify_round
from cluster import Cluster, wait_until
from mount import ORCHARD_MOUNT, Mount
from op import Op
from test_replicas import leader, namespace, stop_settled

pytestmark = pytest.mark.skipif(
    not os.path.exists("/dev/fuse") or not os.path.exists(ORCHARD_MOUNT)
    or shutil.which("fusermount3") is None or os.geteuid() != 0,
    reason="needs root, /dev/fuse, fusermount3 and orchard-mount")

KILLS = int(os.environ.get("ORCH_REPLICA_CAMPAIGN_KILLS", "6"))
SEED = int(os.environ.get("ORCH_REPLICA_CAMPAIGN_SEED", "3"))
STRIP = 4096
TAGS = ("a", "b")
KINDS = (("create", 5), ("rename", 4), ("link", 2), ("unlink", 2), ("extend", 1),
         ("overwrite", 2), ("append", 2), ("truncate", 2), ("mkdir", 1))
# Operations each workload completes after the kill before the round ends.
AFTER_KILL = 15


def test_replica_kill_campaign(tmp_path):
    rnds = {tag: random.Random("%d%s" % (SEED, tag)) for tag in TAGS}
    krnd = random.Random(SEED)
    c = Cluster(tmp_path / "c", nservers=6, replicas=3, strip_size=STRIP)
    files, dirs, gone_handles = {}, {"/": "must"}, set()
    counters = {tag: [0] for tag in TAGS}
    tally = dict(new_tally(), kills=0, rounds=0, ops=0, scrubs=0, scrub_s=0.0)
    mounts = []
    took = []
    t0 = time.monotonic()
    try:
        c.start_all()
        for tag in TAGS:
            mounts.append(Mount(c, tmp_path / ("mnt-" + tag)).start())
        with Op(c) as op:   # the file each round's settle fsyncs
            op.create("/sync")
            op.write("/sync", 0, bytes(3 * STRIP))
        fops = [FuseOp(m.mnt) for m in mounts]
        for tag, fop in zip(TAGS, fops):
            Workload(rnds[tag], files, dirs, counters[tag], tag=tag).op_mkdir(fop)
        while tally["kills"] < KILLS:
            group = krnd.randrange(2)
            victim = leader(c, group)
            ws = [Workload(rnds[tag], files, dirs, counters[tag], KINDS, tag, acked=True)
                  for tag in TAGS]
            ts = [threading.Thread(target=w.run, args=(fop,), daemon=True)
                  for w, fop in zip(ws, fops)]
            for t in ts:
                t.start()
            try:
                at = krnd.randint(2, 30)
                wait_until(lambda: sum(w.ops for w in ws) >= at or
                           not all(t.is_alive() for t in ts), 60,
                           what="the workloads to run %d operations" % at)
                time.sleep(krnd.uniform(0, 0.03))
                c.procs[victim].kill()
                c.procs[victim].wait()
                killed = time.monotonic()
                before = [w.ops for w in ws]
                # Every workload carries on by itself: AFTER_KILL more operations each.
                wait_until(lambda: all(w.ops >= b + AFTER_KILL for w, b in zip(ws, before))
                           or not all(t.is_alive() for t in ts), 60,
                           what="the workloads to carry on after the kill of %s" % victim)
                took.append(time.monotonic() - killed)
            finally:
                for w in ws:
                    w.stop = True
                for t in ts:
                    t.join(120)
            assert not any(t.is_alive() for t in ts), "an operation hangs after the kill"
            for w in ws:
                assert w.crash is None, "the workload failed: %r" % w.crash
                assert w.error is None, \
                    "round %d, kill of %s (group %d): %s failed: %s; the members: %s" % (
                        tally["rounds"] + 1, victim, group, w.current, w.error,
                        {n: (s["log"]["role"], s["log"]["serving"], s.get("data_stream"))
                         for n, s in c.server_stats().items()})
            restart_victims(c, [victim], lambda v: c.start(v, wait=False))
            tally["kills"] += 1
            tally["rounds"] += 1
            tally["ops"] += sum(w.ops for w in ws)
            took_scrub = verify_round(c, files, dirs, gone_handles, tally,
                                      "round %d, kill of %s" % (tally["rounds"], victim))
            tally["scrub_s"] = max(tally["scrub_s"], took_scrub)
            tally["scrubs"] += 1
        while mounts:
            mounts.pop().stop()
        stop_settled(c)
        for g in range(2):
            names = c.names[3 * g:3 * g + 3]
            spaces = [namespace(c, n) for n in names]
            assert spaces[0] == spaces[1] == spaces[2], "group %d's namespaces differ" % g
            data = [c.store_objects(n) for n in names]
            assert data[0] == data[1] == data[2], "group %d's file data differs: %s" % (
                g, [sorted(set(d.items()) ^ set(data[0].items()))[:5] for d in data])
        print("\nreplica kill campaign: kills=%d operations=%d files verified=%d names=%d"
              " lost=%d corrupted=%d other findings=%d; from each kill to %d more"
              " operations of every workload: median %.2f s, max %.2f s; scrub clean"
              " after every round (slowest %.1f s); members identical; time=%.0f s" % (
                  tally["kills"], tally["ops"], tally["files"], tally["names"],
                  tally["lost"], tally["corrupted"], tally["other"], AFTER_KILL,
                  sorted(took)[len(took) // 2], max(took), tally["scrub_s"],
                  time.monotonic() - t0))
        assert tally["lost"] == tally["corrupted"] == tally["other"] == 0
    finally:
        while mounts:
            mounts.pop().stop(check=False)
        c.stop_all(check_logs=False)
