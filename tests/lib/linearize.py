"""A linearizability checker for registers, for Jepsen-style tests.

A history is a list of operations on named registers (one file each, say),
each recorded by the client that ran it:

    Op(key="r1", kind="w", value="a3", call=t0, ret=t1)    # a write that returned
    Op(key="r1", kind="r", value="a3", call=t2, ret=t3)    # a read and what it saw
    Op(key="r1", kind="w", value="b1", call=t4, ret=None)  # a write whose outcome is
                                                           # unknown (timed out, crashed)

`check(history, initial)` says whether some order of the operations (1)
puts each one at a single instant between its call and its return, (2)
respects real time (an operation that returned before another was called
comes first) and (3) makes every read return the value of the latest
write before it (or `initial`).  A write with no return may take effect at
any instant after its call, or never; a read with no return tells nothing
and is dropped.  Registers are independent (a history is linearizable iff
each register's part is: Herlihy and Wing's locality), so each is checked
alone.

The search is Wing and Gong's, with Lowe's improvement (as in Knossos and
Porcupine): walk the calls and returns in time order; a call may be
linearized now if the register allows it, and is then lifted out of the
list with its return; reaching a return whose call is not linearized means
backtracking.  A cache of (set of linearized operations, register value)
prunes every state seen before, which keeps the search polynomial in
practice.  `check_brute` tries every order and exists only to test
`check` on small histories.
"""
import itertools
from dataclasses import dataclass
from typing import Optional


@dataclass
class Op:
    key: str
    kind: str                 # "w" (write value) or "r" (read, saw value)
    value: object
    call: float
    ret: Optional[float]      # None: no answer (writes only)
    client: int = 0


@dataclass
class Verdict:
    ok: bool
    key: Optional[str] = None          # the first register that is not linearizable
    ops: Optional[list] = None         # its operations, in call order
    longest: Optional[list] = None     # the longest order found that holds

    def explain(self):
        if self.ok:
            return "linearizable"
        done = {id(o) for o in self.longest or []}
        rest = [o for o in self.ops if id(o) not in done]
        # What had to come next: every op called before the first of them returned.
        first_ret = min((o.ret for o in rest if o.ret is not None), default=float("inf"))
        last = (self.longest or [None])[-1]
        lines = [f"register {self.key!r} is not linearizable ({len(self.ops)} operations);"
                 f" the longest order that holds has {len(done)}, ending with"
                 f" {_fmt(last) if last else 'nothing'};"
                 " none of these can come next:"]
        lines += ["  " + _fmt(o) for o in rest if o.call <= first_ret]
        # And what led there: the order's last few, then the write that set
        # each value a stuck read saw.
        lines.append("the order that holds ends with:")
        lines += ["  " + _fmt(o) for o in (self.longest or [])[-6:]]
        seen = {o.value for o in rest if o.kind == "r" and o.call <= first_ret}
        lines += ["  wrote what was read: " + _fmt(o) for o in self.ops
                  if o.kind == "w" and o.value in seen]
        return "\n".join(lines)


def _fmt(o):
    ret = "never" if o.ret is None else f"{o.ret:.6f}"
    return f"client {o.client}: {o.kind} {o.value!r} [{o.call:.6f} .. {ret}]"


class _Entry:
    __slots__ = ("op", "id", "is_call", "time", "match", "prev", "next")

    def __init__(self, op, id_, is_call, time):
        self.op, self.id, self.is_call, self.time = op, id_, is_call, time
        self.match = self.prev = self.next = None


def _step(value, op):
    """The register's rule: (allowed, value after)."""
    if op.kind == "w":
        return True, op.value
    return op.value == value, value


def _check_key(ops, initial):
    """(True, None) or (False, longest linearized prefix) for one register."""
    ops = [o for o in ops if o.ret is not None or o.kind == "w"]
    if not ops:
        return True, None
    inf = float("inf")
    entries = []
    for i, o in enumerate(ops):
        c = _Entry(o, i, True, o.call)
        r = _Entry(o, i, False, inf if o.ret is None else o.ret)
        c.match, r.match = r, c
        entries += [c, r]
    # Calls before returns at equal times: equal stamps overlap.
    entries.sort(key=lambda e: (e.time, 0 if e.is_call else 1))
    head = _Entry(None, -1, False, -inf)
    prev = head
    for e in entries:
        prev.next, e.prev = e, prev
        prev = e

    def lift(e):
        e.prev.next = e.next
        if e.next:
            e.next.prev = e.prev
        m = e.match
        m.prev.next = m.next
        if m.next:
            m.next.prev = m.prev

    def unlift(e):
        m = e.match
        m.prev.next = m
        if m.next:
            m.next.prev = m
        e.prev.next = e
        if e.next:
            e.next.prev = e

    linearized, value = 0, initial
    cache = {(0, initial)}
    stack, longest = [], []
    e = head.next
    while head.next is not None:
        if e.is_call:
            ok, after = _step(value, e.op)
            key = (linearized | (1 << e.id), after)
            if ok and key not in cache:
                cache.add(key)
                stack.append((e, value))
                linearized, value = key
                lift(e)
                if len(stack) > len(longest):
                    longest = [s.op for s, _ in stack]
                e = head.next
            else:
                e = e.next
        else:
            if not stack:
                return False, longest
            top, value = stack.pop()
            linearized &= ~(1 << top.id)
            unlift(top)
            e = top.next
    return True, None


def check(history, initial=None):
    """A Verdict for @history (a list of Op) with every register at @initial."""
    by_key = {}
    for o in history:
        by_key.setdefault(o.key, []).append(o)
    for key in sorted(by_key):
        ops = sorted(by_key[key], key=lambda o: o.call)
        ok, longest = _check_key(ops, initial)
        if not ok:
            return Verdict(False, key, ops, longest)
    return Verdict(True)


def check_fresh(history, initial=None):
    """The weaker promise of a file system that makes a change visible
    everywhere once the call that made it returns: no read returns a value
    that no write had begun to write by the read's return, nor one that a
    later write, begun after it returned and returned itself before the
    read began, had replaced.  Reads overlapping writes may see old and new
    values in any order ("new-old inversion": allowed here, not by
    `check`).  Returns the violations, as (read, why) pairs."""
    bad = []
    by_key = {}
    for o in history:
        by_key.setdefault(o.key, []).append(o)
    inf = float("inf")
    for key, ops in sorted(by_key.items()):
        writes = {}
        for o in ops:
            if o.kind == "w":
                writes.setdefault(o.value, []).append(o)
        done = sorted((o for o in ops if o.kind == "w" and o.ret is not None),
                      key=lambda o: o.ret)
        for r in ops:
            if r.kind != "r" or r.ret is None:
                continue
            if r.value == initial and r.value not in writes:
                # The initial value: stale once any write returned before r began.
                if any(w.ret < r.call for w in done):
                    bad.append((r, "the initial value, replaced before the read began"))
                continue
            sources = [w for w in writes.get(r.value, []) if w.call < r.ret]
            if not sources:
                bad.append((r, "a value no write had begun by the read's return"))
                continue
            # The freshest possible source: the one that returned last (or never).
            src_end = max(inf if w.ret is None else w.ret for w in sources)
            newer = [w for w in done if w.call > src_end and w.ret < r.call]
            if newer:
                bad.append((r, "a value replaced by %r [%.6f .. %.6f] before the read"
                               " began" % (newer[0].value, newer[0].call, newer[0].ret)))
    return bad


def check_brute(history, initial=None):
    """True iff some order of @history holds, by trying them all (small only)."""
    by_key = {}
    for o in history:
        if o.ret is not None or o.kind == "w":
            by_key.setdefault(o.key, []).append(o)
    for ops in by_key.values():
        if not any(_order_holds(order, initial) for order in itertools.permutations(ops)):
            return False
    return True


def _order_holds(order, initial):
    value = initial
    for i, a in enumerate(order):
        # Real time: nothing placed after @a returned before @a was called.
        if any(b.ret is not None and b.ret < a.call for b in order[i + 1:]):
            return False
        ok, value = _step(value, a)
        if not ok:
            return False
    # A write with no answer that never happened is one placed last.
    return True
