"""The power-cut campaign: cuts of random servers, one or two at a time,
during a workload of creates with fsynced data, renames across servers,
links, unlinks and mkdirs, each followed by fsyncs of the parent
directories (and of the file, whose inode holds the link count), and of
writes that extend a file, sometimes past a gap, without any fsync.

After each cut the victims' stores pass `store-check --data` as the cut
left them; then, with the victims restarted and every intent finished:

* every fsynced file has its data, and every name the model says must be
  there is there;
* a file being renamed (fsynced before) has exactly one of its two names;
* no name is there that the model does not allow, no entry names nothing,
  and each file's link count is the number of its names;
* a file that was never fsynced, if it is there, holds its data or zeros,
  block by block;
* a file extended without fsync keeps its fsynced bytes, and has its old
  size or its new one; past the old size it holds the new data or zeros,
  block by block, and the gap before the new data reads zeros (a cut that
  took the size but left the strips must never let them be read: the
  bytes a dead writer left past the size);
* `scrub --all --data` is clean (given a moment for the servers' sweeps of
  objects whose inode the cut took).

Then every server is flushed and the model takes what is there as durable,
and the next round runs.  ORCH_CAMPAIGN_CUTS sets the number of rounds
(20 in the default suite, `make soak` runs 200) and ORCH_CAMPAIGN_SEED the
seed; the summary line at the end gives the figures.  The model, the
workload and the checks are tests/lib/campaign.py's, shared with the kill
campaign (test_kill_campaign.py)."""
import os
import random
import signal
import threading

from campaign import MUST, Workload, new_tally, restart_victims, verify_round
from cluster import Cluster, wait_until
from op import Op

CUTS = int(os.environ.get("ORCH_CAMPAIGN_CUTS", "20"))
STRIP = 4096


def test_power_cut_campaign(tmp_path):
    rnd = random.Random(int(os.environ.get("ORCH_CAMPAIGN_SEED", "16")))
    c = Cluster(tmp_path / "c", nservers=3, strip_size=STRIP)
    files, dirs, gone_handles = {}, {"/": MUST}, set()
    counter = [0]
    tally = dict(new_tally(), cuts=0, ops=0)
    try:
        for n in c.names:
            c.start_pcut(n, wait=False)
        for n in c.names:
            c.wait_up(n)
        with Op(c) as op:
            op.create("/sync")
            op.write("/sync", 0, bytes(3 * STRIP))
            for _ in range(3):
                Workload(rnd, files, dirs, counter).op_mkdir(op)
        for cut in range(CUTS):
            victims = rnd.sample(c.names, 2 if rnd.random() < 0.2 else 1)
            w = Workload(rnd, files, dirs, counter)
            op = Op(c)
            t = threading.Thread(target=w.run, args=(op,))
            t.start()
            try:
                at = rnd.randint(1, 25)
                wait_until(lambda: w.ops >= at or not t.is_alive(), 60,
                           what="the workload to run %d operations" % at)
                assert t.is_alive(), "the workload stopped before the cut: %s" % w.error
                w.stop = True
                for v in victims:
                    c.procs[v].send_signal(signal.SIGUSR2)
                for v in victims:
                    c.wait_power_cut(v)
                    assert "power cut" in c.log_tail(v)
                restart_victims(c, victims, lambda v: c.start_pcut(v, wait=False))
                t.join(120)
                assert not t.is_alive(), "an operation hangs after the cut"
            finally:
                w.stop = True
                t.join(120)
                op.close()
            assert w.crash is None, "the workload failed: %r" % w.crash
            tally["cuts"] += len(victims)
            tally["ops"] += w.ops
            verify_round(c, files, dirs, gone_handles, tally,
                         "round %d, cut %s during %s (%s)" % (cut, victims, w.current,
                                                             w.error))
        c.stop_all()
        c.store_check_all()
        print("\npower-cut campaign: cuts=%d rounds=%d operations=%d fsynced files verified=%d"
              " names checked=%d findings=0" % (tally["cuts"], CUTS, tally["ops"],
                                               tally["files"], tally["names"]))
    finally:
        c.stop_all(check_logs=False)
