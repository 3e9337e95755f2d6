"""A team of CPU threads that runs a whole step's substeps in one kernel launch.

Why: on Taichi's CPU backend every top-level loop of a kernel is handed to the thread pool,
which wakes its workers and waits for them: ~35 us a loop on the 2-core CPU machine
(Taichi 1.7.4, measured: 10 loops of 1,500 trivial items took 290-420 us in one kernel, 21 us
run serially). A substep of a large world runs ~25 such loops (its stages, then every colour
of two passes): ~300 a step in the awake large pyramid, whose step took 34 ms with them
and 20 ms on a team.

How: one top-level loop whose iterations are the team's threads. Each thread takes its
share of a stage (share), then waits at a barrier (barrier) for the others before the next
stage: the same order of stages as separate loops give, so the same results bit for bit. A
barrier costs 2-10 us (a spin on an atomic counter), not ~35.

What it relies on (checked at run time by probe_threads, never assumed): Taichi's CPU
backend splits a loop of n_threads * TASK_ITEMS items into tasks of TASK_ITEMS items and
runs as many tasks at once as it has threads (cpu_max_num_threads), so the items
0, TASK_ITEMS, 2 TASK_ITEMS ... (the members) run on different threads at the same time.
Were two members on one thread, the first would wait forever for the second: every wait is
bounded (SPIN_LIMIT), counted, and a step that hit the bound raises. GPU backends never use
a team (their threads are not all resident at once; a serial loop there is one GPU thread).
"""

import os
import time

import taichi as ti

from ..device import BARRIER_SLOTS
from ..launching import quick

#: Items per task of a CPU loop in Taichi 1.7.4 (measured: 512 items run on one thread,
#: 513 on two).
TASK_ITEMS = 512
#: Most spins of one wait at a barrier (~1-10 s): a member that never arrives must not hang
#: the process. A legitimate wait is one stage of one thread's share (milliseconds), longer
#: only if the OS deschedules a member.
SPIN_LIMIT = 200_000_000
#: Spins a member of probe_threads waits before the probe counts the team as failed.
PROBE_SPIN_LIMIT = 2_000_000
#: Barriers a probe team passes (probe_threads), and the most one may take on average: a
#: loop launch costs ~35 us on the 2-core CPU machine, a barrier 2-10 us (2.4 us between
#: stages that do work, under 1 us back to back). With other processes busy on the same
#: CPUs a barrier took 1-4 ms (a member waits for a turn on a core), so the probe is short.
PROBE_ROUNDS = 20
MAX_BARRIER_S = 30e-6
#: probe_threads calls (~3 a step) after which the team is probed again. A machine that
#: gets busy stops using the team (the awake large pyramid beside one busy process: 87 ms a
#: step on a team, 33 ms launching a kernel per stage; alone: 20 and 34 ms), and one that
#: gets quiet takes it back. The results are bitwise the same on either path.
REPROBE_REQUESTS = 300
#: Whether CPU scenes may run their substeps on a team (tests turn it off to compare with
#: the launch-per-stage path).
ENABLED = True
#: counts.barrier slots: arrivals, generation (each alone in a 64-byte line, away from the
#: step's other scalars, which every stage reads), waits that hit SPIN_LIMIT.
_ARRIVED, _GENERATION, _TIMEOUTS = 16, 48, 0
assert _GENERATION < BARRIER_SLOTS
#: threads: the last probe's team (None: not probed yet); requests: probe_threads calls
#: since; broken: a wait ran out (check), no team any more; probe_barrier_s: the last
#: probe's seconds a barrier (for diagnostics).
_state = {"threads": None, "requests": 0, "broken": False, "probe_barrier_s": None}


@ti.func
def share(begin, end, member, n_members):
    """[lo, hi): member's consecutive share of the items [begin, end)."""
    count = end - begin
    return begin + count * member // n_members, begin + count * (member + 1) // n_members


@ti.func
def barrier(counts: ti.template(), n_members, spin_limit):
    """Wait until all n_members of the team arrive (nothing for a team of one).

    A generation counter: the last to arrive resets the arrivals and starts the next
    generation; the others spin until they see it. The atomics order every member's writes
    before the barrier ahead of every member's reads after it."""
    if n_members > 1:
        generation = ti.atomic_add(counts.barrier[_GENERATION], 0)
        if ti.atomic_add(counts.barrier[_ARRIVED], 1) == n_members - 1:
            ti.atomic_sub(counts.barrier[_ARRIVED], n_members)
            ti.atomic_add(counts.barrier[_GENERATION], 1)
        else:
            spins = 0
            while ti.atomic_add(counts.barrier[_GENERATION], 0) == generation:
                spins += 1
                if spins >= spin_limit:
                    ti.atomic_add(counts.barrier[_TIMEOUTS], 1)
                    break


@ti.func
def items_per_member(n_members):
    """Loop items per member of a team of n_members threads (see member_of): a member
    alone in a task of TASK_ITEMS items, so that members run on different threads."""
    return 1 if n_members == 1 else TASK_ITEMS


@ti.func
def member_of(item, stride):
    """The member (team thread or world) that item `item` of a loop of n_members * stride
    items is (members at every stride-th item); -1: an item that does nothing."""
    member = -1
    if item % stride == 0:
        member = item // stride
    return member


@quick
@ti.kernel
def _probe(counts: ti.template(), n_members: ti.i32, rounds: ti.i32) -> ti.i32:
    """`rounds` barriers of a team of n_members; returns the waits that hit their limit."""
    stride = items_per_member(n_members)
    for item in range(n_members * stride):
        if member_of(item, stride) >= 0:
            for _ in range(rounds):
                barrier(counts, n_members, PROBE_SPIN_LIMIT)
    return counts.barrier[_TIMEOUTS]


@quick
@ti.kernel
def _clear(counts: ti.template()):
    for slot in range(BARRIER_SLOTS):
        counts.barrier[slot] = 0


@quick
@ti.kernel
def _timeouts(counts: ti.template()) -> ti.i32:
    return counts.barrier[_TIMEOUTS]


def check(counts):
    """After a step that may have used a team (its begin, colouring or substeps): raise if a
    wait hit SPIN_LIMIT (a member never came; the step's results are not to be trusted),
    and run later steps without a team (after which there is nothing to check)."""
    if not _state["broken"] and _timeouts(counts):
        _clear(counts)
        disable()
        raise RuntimeError(
            "fx2d_gpu: a CPU thread of the step's team never reached a barrier (Taichi's "
            "thread pool did not run the team's threads at once); this step's results are "
            "unreliable, and later steps launch one kernel per stage")


def usable_threads() -> int:
    """Threads a team may have: Taichi's CPU threads (cpu_max_num_threads), at most the CPUs
    this process may run on. A member without a CPU of its own would keep the others
    spinning at every barrier until the OS schedules it."""
    threads = ti.lang.impl.current_cfg().cpu_max_num_threads
    try:
        threads = min(threads, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # no affinity on this OS (macOS, Windows)
        pass
    return max(threads, 1)


def _barrier_seconds(counts, threads: int) -> float:
    """Seconds one barrier of a team of `threads` takes: a launch of PROBE_ROUNDS barriers
    less a launch of none (what waking the pool's threads costs, ~35 us to ms, is not the
    barrier's), the least of 3 tries; infinite if a wait ran out."""
    best = float("inf")
    for _ in range(3):
        _clear(counts)
        start = time.perf_counter()
        _probe(counts, threads, 0)
        launched = time.perf_counter()
        failed = _probe(counts, threads, PROBE_ROUNDS)
        done = time.perf_counter()
        _clear(counts)
        if failed:
            return float("inf")
        best = min(best, max(0.0, (done - launched) - (launched - start)) / PROBE_ROUNDS)
    return best


def probe_threads(counts) -> int:
    """Threads of a team on this process's CPU backend (usable_threads), if a probe team of
    that many passes PROBE_ROUNDS barriers together, each in under MAX_BARRIER_S on average
    (more means the threads do not run at once: a CPU quota below the CPU count, a busy
    machine); else 0: no team, one launch per stage. Probed again every REPROBE_REQUESTS
    calls, never again once a wait ran out (check)."""
    if _state["broken"]:
        return 0
    if _state["threads"] is None or _state["requests"] >= REPROBE_REQUESTS:
        _state["requests"] = 0
        threads = usable_threads()
        if threads > 1:
            per_barrier = _barrier_seconds(counts, threads)
            _state["probe_barrier_s"] = per_barrier
            threads = threads if per_barrier < MAX_BARRIER_S else 0
        _state["threads"] = threads
    _state["requests"] += 1
    return _state["threads"]


def threads_for(ctx) -> int:
    """Threads of the CPU team that may run a stage of ctx's scene in one launch: 1 for a
    scene whose loops run serially anyway (device.SERIAL_SLOTS), probe_threads for others;
    0 (no team) on GPU backends or when ENABLED is off."""
    if not (ctx.cpu and ENABLED):
        return 0
    return 1 if ctx.serial else probe_threads(ctx.pool.counts)


def disable():
    """No team for the rest of the process."""
    _state["broken"] = True
