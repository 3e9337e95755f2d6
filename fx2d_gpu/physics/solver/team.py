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
bounded (SPIN_LIMIT), counted, and a step that hit the bound raises. On a GPU backend the
same kernels run on one block of threads, which meet at the block's own barrier
(solver/gpu_team.py): a GPU's threads are not all resident at once, a block's are.
"""

import contextlib
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import taichi as ti

from ... import device
from ...device import BARRIER_SLOTS, FENCE_SLOTS, runtime, team_items_by_turns
from ...device.launching import quick
from . import gpu_team

if TYPE_CHECKING:
    from .context import StepContext

#: Items per task of a CPU loop in Taichi 1.7.4 (measured: 512 items run on one thread,
#: 513 on two).
TASK_ITEMS = 512
#: Tasks per CPU thread that a loop a world per item is spread over (world_stride): a
#: world's work stays on one thread, and several tasks a thread let the pool even out
#: worlds of unequal cost.
WORLD_TASKS_PER_THREAD = 4
#: Fewest worlds in one of those tasks: below it, waking another thread costs more than
#: the worlds' substeps (~3-6 us a world on the 2-core CPU).
MIN_WORLDS_PER_TASK = 16
#: Most spins of one wait at a barrier (~1-10 s): a member that never arrives must not hang
#: the process. A legitimate wait is one stage of one thread's share (milliseconds), longer
#: only if the OS deschedules a member.
SPIN_LIMIT = 200_000_000
#: Spins between a waiting member's looks at whether another wait ran out (_generation_barrier).
TIMEOUT_CHECK_SPINS = 4096
#: Spins a member of probe_threads waits before the probe counts the team as failed.
PROBE_SPIN_LIMIT = 2_000_000
#: Barriers a probe team passes (probe_threads), and the most one may take on average: a
#: loop launch costs ~35 us on the 2-core CPU machine, a barrier 2-10 us (2.4 us between
#: stages that do work, under 1 us back to back). With other processes busy on the same
#: CPUs a barrier took 1-4 ms (a member waits for a turn on a core), so the probe is short.
PROBE_ROUNDS = 20
MAX_BARRIER_S = 30e-6
#: probe_threads calls (one a step: the step's plan asks) after which the team is probed again: a
#: machine whose barriers got slow gets a team of one thread, one whose barriers are fast again
#: takes the team back. The results are bitwise the same either way. After a probe that failed,
#: sooner (REPROBE_FAILED_REQUESTS): on the 2-core machine a moment of the host's own work can fail
#: all three tries of one probe, and the awake large pyramid then ran ~100 steps on one thread
#: (substeps 8.7 ms against 4.5).
REPROBE_REQUESTS = 100
REPROBE_FAILED_REQUESTS = 10
#: The duel (duel, choose_for_step, record_step). The barrier probe cannot see a machine
#: busy with other processes (its 20 barriers pass within one time slice), but a step's
#: wall time can: on the 2-core machine the awake large pyramid took 20-40 ms a step on a
#: team of 2 alone, 120-150 ms beside one busy process and ~1 s beside two (a member waits
#: a time slice at every barrier), where a team of one thread (no barrier to wait at, the
#: same kernel, so nothing to compile) took 32-46 and 33-79 ms. So a scene that may have a
#: team of several threads now and then runs one step the other way (a trial: a team of
#: one, or of several when it runs on one). A trial comes every DUEL_STEPS steps (doubled
#: after each trial that changed nothing, up to DUEL_MAX_STEPS; a few steps after one that
#: changed the choice), and at once after two steps in a row DUEL_SLOW times slower than
#: the median of the scene's last DUEL_HISTORY steps. A trial that took less than
#: DUEL_MARGIN times that median (a team of several threads: no more than it; after slow
#: steps, the faster of them) is checked: the next DUEL_CHECKS steps run the choice again,
#: and the choice changes only if the trial beat the faster of them too by as much.
#: Without the check a scene's own costly steps switched it to a team of one for nothing:
#: a fresh colouring or a step that colours again comes out slow (17-31 ms against 6-9),
#: two of them in a row called a trial that won against them (and with one step to check
#: it, another such step came next), and in the benchmark suite's large pyramid (soft step,
#: side by side with Box2D v3) the duel switched 20 times in 600 steps, a third of them on
#: one thread: 12.8 ms a step against 9.4 with no duel. The two ways give bitwise the
#: same results.
DUEL_STEPS = 50
DUEL_MAX_STEPS = 800
DUEL_MARGIN = 0.8
DUEL_SLOW = 2.0
DUEL_HISTORY = 3
DUEL_CHECKS = 2


@dataclass(frozen=True)
class TeamTimings:
    """When the team's barriers are probed again and how its duel chooses, per scene
    (StepOptions.team_timings). The defaults are the module's constants above, whose
    comments say why each has its value; a test or a measurement asks for others (a duel
    that never trials, a probe every step, a clock that stands in for the machine).

    Attributes:
        reprobe_requests: probe_threads calls (one a step) after which the barriers are
            probed again (REPROBE_REQUESTS).
        reprobe_failed_requests: the same after a probe that failed
            (REPROBE_FAILED_REQUESTS).
        max_barrier_s: the most seconds one barrier of a probe may take on average for the
            team to keep its threads (MAX_BARRIER_S).
        duel_steps: steps between the duel's trials at first (DUEL_STEPS).
        duel_max_steps: the most steps between trials (DUEL_MAX_STEPS).
        duel_margin: a team of one wins a trial in under this fraction of the choice's
            time (DUEL_MARGIN).
        duel_slow: a step this many times the history's median is slow (DUEL_SLOW).
        duel_history: steps of the history whose median a trial is measured against
            (DUEL_HISTORY).
        duel_checks: steps after a trial that won which check it (DUEL_CHECKS).
        clock: seconds now, by which the duel times a step (called as the step starts and
            as it ends; time.perf_counter).
    """

    reprobe_requests: int = REPROBE_REQUESTS
    reprobe_failed_requests: int = REPROBE_FAILED_REQUESTS
    max_barrier_s: float = MAX_BARRIER_S
    duel_steps: int = DUEL_STEPS
    duel_max_steps: int = DUEL_MAX_STEPS
    duel_margin: float = DUEL_MARGIN
    duel_slow: float = DUEL_SLOW
    duel_history: int = DUEL_HISTORY
    duel_checks: int = DUEL_CHECKS
    clock: Callable[[], float] = time.perf_counter


#: The timings a scene starts with (StepOptions' default).
DEFAULT_TIMINGS = TeamTimings()


@dataclass(frozen=True)
class TeamStatus:
    """The team's state in this process, for diagnostics and tests (status).

    Attributes:
        probed_threads: the last barrier probe's team (None: not probed yet).
        probe_barrier_s: that probe's seconds a barrier (None: not measured).
        broken: a wait ran out (check): no team for the rest of the process (until reset).
        many: the duel's choice: a team of several threads (else of one).
        switches: changes of the duel's choice since the process started (or reset).
        step_threads: threads of the team that ran the substeps of the last step that
            finished (0: none ran them: GPU, small worlds, a launch per stage, a profiled
            step); as the step ends, before the duel's clock reads its end.
    """

    probed_threads: int | None
    probe_barrier_s: float | None
    broken: bool
    many: bool
    switches: int
    step_threads: int


#: counts.barrier slots: arrivals, generation (each alone in a 64-byte line, away from the
#: step's other scalars, which every stage reads), waits that hit SPIN_LIMIT (a test marks
#: a wait that ran out there).
ARRIVED, GENERATION, TIMEOUTS = 16, 48, 0
assert GENERATION < BARRIER_SLOTS
#: threads: the last probe's team (None: not probed yet); requests: probe_threads calls
#: since; broken: a wait ran out (check), no team any more; handed: threads_for gave out a
#: team of several threads since the last check; probe_barrier_s: the last probe's seconds
#: a barrier (for diagnostics); step_threads: the team that ran the last step's substeps
#: (status).
_FRESH_STATE = {
    "threads": None,
    "requests": 0,
    "broken": False,
    "handed": False,
    "probe_barrier_s": None,
    "step_threads": 0,
}
_state = dict(_FRESH_STATE)
#: many: the duel's choice (teams of several threads, else of one); now: this step's
#: (None outside a step that duels); trial: this step runs against the choice; scene: the
#: StepCache of the scene whose steps are compared; steps: its duelling steps since the
#: last trial; interval: steps between trials now; seconds: its last DUEL_HISTORY steps'
#: wall times on the choice; reference: the slow steps' time that called the next trial
#: (None: the trial is measured against the history's median); slow: the last step's time
#: if it was slow (DUEL_SLOW), else None; won: the time of a trial that won, while the
#: steps after it (on the choice) check it, else None; checks: those steps' times so far;
#: start: when this step began (timings.clock); switches: changes of choice (diagnostics);
#: timings: the scene's TeamTimings (another scene's, or new ones, start the duel afresh).
_FRESH_DUEL = {
    "many": True,
    "now": None,
    "trial": False,
    "scene": None,
    "steps": 0,
    "interval": DUEL_STEPS,
    "seconds": [],
    "reference": None,
    "slow": None,
    "won": None,
    "checks": [],
    "start": 0.0,
    "switches": 0,
    "timings": DEFAULT_TIMINGS,
}
_duel = dict(_FRESH_DUEL, seconds=[], checks=[])


@ti.func
def turns(count, member, n_members):
    """How many of the items [0, count) member takes when the members take them in turn
    (member, member + n_members, ...: on a GPU a warp's lanes neighbouring items): where
    share's consecutive shares would have each lane of a warp read its own stretch."""
    return (count - member + n_members - 1) // n_members if member < count else 0


@ti.func
def share(begin, end, member, n_members):
    """[lo, hi): member's consecutive share of the items [begin, end): begin + count * member
    // n_members to begin + count * (member + 1) // n_members, computed as q * member +
    r * member // n_members (q, r = divmod(count, n_members)), the same integers without the
    product count * member, which overflows 32 bits in a grid team (a 1M pile's million
    bodies times member 33,791 of an H200's 132 x 256: the launch read out of bounds on CUDA).
    r * member < n_members**2 stays in 32 bits for up to 46,340 members, which
    gpu_team.MAX_GRID_BLOCKS keeps a grid team within; a world per member (a step without
    contacts of any number of worlds) shares worlds x per-world counts, so r is 0."""
    count = end - begin
    q, r = count // n_members, count % n_members
    return (
        begin + q * member + r * member // n_members,
        begin + q * (member + 1) + r * (member + 1) // n_members,
    )


@ti.func
def slots_of(begin, end, member, n_members):
    """A member's slots of [begin, end) in a stage over body or joint slots, as (first, end,
    step): on a GPU (device.team_items_by_turns) in turn, member, member + n_members, ...,
    so that a warp's lanes read neighbouring slots (a consecutive share each left a lane
    ~15 slots from the next at 65,536 small worlds on a grid team); on a CPU its share, in
    lines of its own. Each slot's stage is its own: the same results either way."""
    first, last, step = 0, 0, 1
    if ti.static(team_items_by_turns()):
        first, last, step = begin + member, end, n_members
    else:
        first, last = share(begin, end, member, n_members)
    return ti.Vector([first, last, step])


#: Pairs per block of a stage whose items cost unevenly (dealt_blocks): enough to keep a
#: member's reads and writes in lines of its own, few enough to even out the work.
PAIR_BLOCK = 64


@ti.func
def pair_block():
    """Pairs per block that dealt_blocks deals: PAIR_BLOCK on a CPU; 1 on a GPU, where a
    member is one thread of many and neighbouring threads reading neighbouring pairs read
    them in one memory transaction (a block of 64 left most of a GPU team's threads idle:
    15,000 pairs are 235 blocks for 256 threads, or 33,792 in a grid team)."""
    size = PAIR_BLOCK
    if ti.static(gpu_team.on_gpu()):
        size = 1
    return size


@ti.func
def dealt_blocks(begin, end, member):
    """(member's first block, number of blocks) of the items [begin, end) in blocks of
    pair_block() items; a member of a team of n takes every n-th block from its first. For
    pairs in colour order, where halves gave one member the pairs with points and the other
    those without, a share each of both (awake large pyramid: the step's narrow phase 2.4 ms
    in halves, 1.7 ms dealt). Each pair's stage is its own, so how they are dealt changes
    no result."""
    size = pair_block()
    return member, (end - begin + size - 1) // size


@ti.func
def _generation_barrier(counts: ti.template(), n_arrivals, spin_limit):
    """Wait until n_arrivals callers arrive: a generation counter. The last to arrive resets
    the arrivals and starts the next generation; the others spin until they see it
    (wait_while: bounded, and on a GPU cut short once a wait ran out). The atomics order
    every caller's writes before it ahead of every caller's reads after it."""
    generation = ti.atomic_add(counts.barrier[GENERATION], 0)
    if ti.atomic_add(counts.barrier[ARRIVED], 1) == n_arrivals - 1:
        ti.atomic_sub(counts.barrier[ARRIVED], n_arrivals)
        ti.atomic_add(counts.barrier[GENERATION], 1)
    else:
        wait_while(counts, counts.barrier, GENERATION, generation, True, spin_limit)


@ti.func
def wait_while(
    counts: ti.template(), field: ti.template(), index, value, same: ti.template(), spin_limit
):
    """Spin while field[index] (read atomically) equals `value` (`same` True) or differs
    from it (`same` False), each wait bounded by spin_limit spins (one that runs out is
    counted in TIMEOUTS and goes on). On a GPU, once one ran out later waits give up
    within TIMEOUT_CHECK_SPINS spins: the step's results are discarded anyway (check
    raises), and a member that never comes would otherwise keep the GPU waiting out the
    limit at every wait left in the launch. (A CPU team keeps waiting: its probe and duel
    look after it, and a count left from a launch outside a step must not cut later waits
    short.) The team's barrier and a colour pass by turns (coloring.take_turns) wait so."""
    spins = 0
    while _still(ti.atomic_add(field[index], 0), value, same):
        spins += 1
        if spins >= spin_limit:
            ti.atomic_add(counts.barrier[TIMEOUTS], 1)
            break
        if ti.static(gpu_team.on_gpu()):
            if spins % TIMEOUT_CHECK_SPINS == 0 and ti.atomic_add(counts.barrier[TIMEOUTS], 0):
                break


@ti.func
def _still(now, value, same: ti.template()):
    """wait_while's condition: `now` equals `value` (`same`), or differs from it."""
    held = now != value
    if ti.static(same):
        held = now == value
    return held


@ti.func
def barrier(counts: ti.template(), n_members, spin_limit):
    """Wait until all n_members of the team arrive (nothing for a team of one).

    On a CPU the members are threads meeting at a generation counter (_generation_barrier).
    On a GPU a team of one block meets at the block's own barrier (gpu_team.py); a grid
    team (on CUDA, more members than a block: gpu_team.grid_blocks) meets at the block's
    barrier, its blocks' first threads at a generation counter between two fences, and
    the block's barrier again: every member's writes before it are seen by every read
    after it (gpu_team.py's docstring).

    So a value the team tallied before it (a count, a flag) is read after it with a plain
    load, as every stage reads what the one before it wrote: not with an atomic read
    (`atomic_add(x, 0)`), which every member of a grid team would queue on one address
    (33,792 atomics on an H200, each served in turn at the L2 cache: some 20 µs a read).

    Where device.COUNT_BARRIER_SITES is on (a CPU team's count, benchmarks.launches
    --barrier-sites), each member also counts the barrier at its call site's slot
    (barrier_site_slot)."""
    if ti.static(device.COUNT_BARRIER_SITES):
        if n_members > 1:
            ti.atomic_add(counts.barrier[ti.static(barrier_site_slot())], 1)
    if ti.static(gpu_team.on_gpu()):
        # Never for a member that is a world (n_members 1): a block's threads are then
        # different worlds, which run different loops and must not wait for each other.
        if ti.static(gpu_team.on_cuda()):
            if n_members > gpu_team.BLOCK_THREADS:
                ti.simt.block.sync()
                if gpu_team.leads_block():
                    ti.simt.grid.memfence()
                    _generation_barrier(
                        counts,
                        n_members // gpu_team.BLOCK_THREADS,
                        ti.min(spin_limit, gpu_team.GRID_SPIN_LIMIT),
                    )
                    ti.simt.grid.memfence()
                ti.simt.block.sync()
            elif n_members > 1:
                gpu_team.barrier(counts)
        elif n_members > 1:
            gpu_team.barrier(counts)
    elif n_members > 1:
        _generation_barrier(counts, n_members, spin_limit)


#: Where a barrier's call sites are counted (device.COUNT_BARRIER_SITES): counts.barrier's
#: slots from here, one a site, FENCE_SLOTS of them (on a CPU, where no fence uses them).
SITE_SLOT = BARRIER_SLOTS - FENCE_SLOTS
#: The call sites met so far, (file, line, function) -> its index (barrier_site_slot), in
#: the order the kernels inlined them.
BARRIER_SITES: dict[tuple[str, int, str], int] = {}
#: Taichi's text for a transformed source line (launching.cache_source_positions's, or
#: Taichi's own): File "<path>", line <n>, in <function>.
_SOURCE_POSITION = re.compile(r'File "([^"]+)", line (\d+), in (\w+)')
#: The functions whose lines are the barrier's own, not a call site: (file, function).
_BARRIER_FUNCTIONS = (("team.py", "barrier"), ("team.py", "meet"), ("gpu_team.py", "barrier"))


def barrier_site_slot() -> int:
    """counts.barrier's slot of the barrier being inlined now (compile time: called from
    barrier, where device.COUNT_BARRIER_SITES is on): its call site, the innermost source
    line Taichi is transforming outside barrier and meet (so a barrier met through meet is
    counted where meet was called), registered in BARRIER_SITES.
    Raises RuntimeError past FENCE_SLOTS sites, or off the CPU backend, whose fences use
    the slots."""
    if gpu_team.on_gpu():
        raise RuntimeError("barrier sites are counted on a CPU backend only")
    for text in reversed(ti.lang.impl.get_runtime().src_info_stack):
        found = _SOURCE_POSITION.search(text or "")
        if found is None:
            continue
        site = (os.path.basename(found.group(1)), int(found.group(2)), found.group(3))
        if (site[0], site[2]) in _BARRIER_FUNCTIONS:
            continue
        if site not in BARRIER_SITES:
            if len(BARRIER_SITES) >= FENCE_SLOTS:
                raise RuntimeError(f"more than {FENCE_SLOTS} barrier sites")
            BARRIER_SITES[site] = len(BARRIER_SITES)
        return SITE_SLOT + BARRIER_SITES[site]
    raise RuntimeError("a barrier inlined outside any kernel's source")


#: Most constraints of a colour a CPU team's first member solves alone (small_color): a
#: contact or joint solve is ~50-100 ns, a barrier of the CPU team microseconds.
SMALL_COLOR_ITEMS_CPU = 64


@ti.func
def small_team(n_members):
    """Members that solve a run of small colours (small_color) of a team of n_members: on a
    CPU its first member alone, who meets nobody between the run's colours; on CUDA's grid
    team its first block (members 0 to gpu_team.BLOCK_THREADS - 1), who meet at their
    block's barrier (small_barrier), tens of nanoseconds where the grid's is microseconds;
    else (one block) the whole team."""
    members = n_members
    if ti.static(gpu_team.on_cuda()):
        if n_members > gpu_team.BLOCK_THREADS:
            members = gpu_team.BLOCK_THREADS
    elif ti.static(not gpu_team.on_gpu()):
        members = 1
    return members


@ti.func
def small_color(count, n_members):
    """Whether a colour of `count` constraints is small on a team of n_members: where a
    smaller team (small_team) runs it, no more than a constraint a member on a grid team,
    SMALL_COLOR_ITEMS_CPU on a CPU. A run of small colours is solved by the small team one
    colour after the other, the whole team meeting once after it: the same solves in the
    same order as a barrier after each (a colour's constraints share no dynamic body), for
    fewer of the team's barriers (the pyramid's last colours hold 42 and 1 of its 14,950
    constraints)."""
    return _fits_small_team(count, n_members, 1)


#: Most uncoloured constraints a grid team's small team colours alone, per thread of its
#: block: a colouring round is 8 passes (SUB_ROUNDS of bids and takes) of light work, a few
#: constraints a thread, where the grid's 8 barriers a round are microseconds each.
SMALL_ROUNDS_ITEMS_PER_THREAD = 4


@ti.func
def small_rounds(count, n_members):
    """Whether a colouring of `count` uncoloured constraints is left to the small team
    (small_team) on a team of n_members: its rounds meet at the small team's barriers
    (small_barrier), none of the whole team's (coloring.color_rounds_by_team). At most
    SMALL_ROUNDS_ITEMS_PER_THREAD a thread of the grid team's first block on CUDA,
    SMALL_COLOR_ITEMS_CPU on a CPU (whose small team is one member: the rounds' work is
    then serial, ~0.4 us a constraint a round, against 8 of the team's barriers of 1-5 us
    a round); never on a team of one block (no smaller team)."""
    return _fits_small_team(count, n_members, SMALL_ROUNDS_ITEMS_PER_THREAD)


@ti.func
def _fits_small_team(count, n_members, per_thread):
    """Whether `count` items are few enough for the small team (small_team) of a team of
    n_members: at most per_thread a thread of the grid team's first block on CUDA,
    SMALL_COLOR_ITEMS_CPU on a CPU (its small team is one member); none where there is no
    smaller team (one block)."""
    limit = -1
    if small_team(n_members) < n_members:
        limit = per_thread * gpu_team.BLOCK_THREADS
        if ti.static(not gpu_team.on_gpu()):
            limit = SMALL_COLOR_ITEMS_CPU
    return count <= limit


@ti.func
def small_barrier(member, n_members):
    """The barrier between two small colours of a run: the small team's (small_team)
    members meet at their block's barrier on CUDA's grid team (its block 0: the condition is
    the same for all of a block's threads, as the block's barrier needs); a CPU's small
    team is one member, who meets nobody. The others pass on to the team's barrier after
    the run."""
    if ti.static(gpu_team.on_cuda()):
        if n_members > gpu_team.BLOCK_THREADS and member < gpu_team.BLOCK_THREADS:
            ti.simt.block.sync()


@ti.func
def meet(counts: ti.template(), member, n_members, small):
    """The barrier after a step of work that the whole team (`small` False: barrier) or
    its small team (small_team; `small` True: small_barrier) shared."""
    if small:
        small_barrier(member, n_members)
    else:
        barrier(counts, n_members, SPIN_LIMIT)


@ti.func
def items_per_member(n_members):
    """Loop items per member of a team of n_members threads (see member_of): a member
    alone in a task of TASK_ITEMS items, so that members run on different threads (on a
    GPU, a member a thread of the team's block: gpu_team.py)."""
    items = TASK_ITEMS
    if ti.static(gpu_team.on_gpu()):
        items = 1
    return 1 if n_members == 1 else items


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
def probe_barriers(counts: ti.template(), n_members: ti.i32, rounds: ti.i32) -> ti.i32:
    """`rounds` barriers of a team of n_members (each wait bounded by PROBE_SPIN_LIMIT
    spins); returns the waits that hit their limit since the count was cleared
    (clear_barriers)."""
    stride = items_per_member(n_members)
    for item in range(n_members * stride):
        if member_of(item, stride) >= 0:
            for _ in range(rounds):
                barrier(counts, n_members, PROBE_SPIN_LIMIT)
    return counts.barrier[TIMEOUTS]


@quick
@ti.kernel
def clear_barriers(counts: ti.template()):
    """counts.barrier zeroed: no member arrived, no wait ran out."""
    for slot in range(BARRIER_SLOTS):
        counts.barrier[slot] = 0


@ti.func
def timeouts(counts: ti.template()):
    """The waits that hit their limit since the count was last cleared."""
    return counts.barrier[TIMEOUTS]


@quick
@ti.kernel
def _timeouts(counts: ti.template()) -> ti.i32:
    return timeouts(counts)


def check(counts, read: int | None = None):
    """After a step: if a team of several threads may have run a stage of it (its begin,
    colouring or substeps; threads_for gave one out), raise if a wait hit SPIN_LIMIT (a
    member never came; the step's results are not to be trusted), and run later steps
    without a team. `read`: the timeouts as the step's last team launch returned them
    (timeouts), else (None) they are read from the device; nothing is read if no team
    ran."""
    if not _state["handed"]:
        return
    _state["handed"] = False
    if not _state["broken"] and (_timeouts(counts) if read is None else read):
        clear_barriers(counts)
        disable()
        who = (
            "a block of the step's grid team never reached a barrier (the GPU did not run "
            "all its blocks at once: another process's kernels beside it?)"
            if gpu_team.on_gpu()
            else "a CPU thread of the step's team never reached a barrier (Taichi's thread "
            "pool did not run the team's threads at once)"
        )
        raise RuntimeError(
            f"fx2d_gpu: {who}; this step's results are unreliable, and later steps "
            "launch one kernel per stage"
        )


def world_stride(ctx: "StepContext") -> int:
    """Loop items per world (member_of's stride) of the substeps' loop a world per item
    (fused.substeps_by_world) on a CPU backend: enough items that the worlds fill up to
    WORLD_TASKS_PER_THREAD tasks of TASK_ITEMS per thread, each of at least
    MIN_WORLDS_PER_TASK worlds. Taichi runs a task's items on one thread: 256 worlds, an
    item each, ran on one thread (and scenes whose other loops run serially,
    device.SERIAL_WORLDS, still solve on all threads). 1 on GPU backends (a thread a
    world)."""
    if not ctx.cpu:
        return 1
    tasks = min(WORLD_TASKS_PER_THREAD * usable_threads(), ctx.n_worlds // MIN_WORLDS_PER_TASK)
    if tasks <= 1:
        return 1
    return -(-tasks * TASK_ITEMS // ctx.n_worlds)  # ceil: at least `tasks` full tasks


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
        clear_barriers(counts)
        start = time.perf_counter()
        probe_barriers(counts, threads, 0)
        launched = time.perf_counter()
        failed = probe_barriers(counts, threads, PROBE_ROUNDS)
        done = time.perf_counter()
        clear_barriers(counts)
        if failed:
            return float("inf")
        best = min(best, max(0.0, (done - launched) - (launched - start)) / PROBE_ROUNDS)
    return best


def probe_threads(counts, timings: TeamTimings = DEFAULT_TIMINGS) -> int:
    """Threads of a team on this process's CPU backend (usable_threads), if a probe team of
    that many passes PROBE_ROUNDS barriers together, each in under timings.max_barrier_s
    (MAX_BARRIER_S) on average
    (more means the threads do not run at once: a CPU quota below the CPU count, a busy
    machine); else 1: a team of one thread, which waits for nobody (and runs the same
    kernel: a launch per stage would compile kernels of its own, ~1 s with the offline
    cache warm, in the middle of a run). Probed again every timings.reprobe_requests calls
    (timings.reprobe_failed_requests after a probe that failed). 0 (one launch per stage, on
    all the pool's threads) once a wait ran out (check)."""
    if _state["broken"]:
        return 0
    due = timings.reprobe_requests
    if _state["threads"] is not None and _state["threads"] < usable_threads():
        due = min(due, timings.reprobe_failed_requests)
    if _state["threads"] is None or _state["requests"] >= due:
        _state["requests"] = 0
        threads = usable_threads()
        if threads > 1:
            per_barrier = _barrier_seconds(counts, threads)
            _state["probe_barrier_s"] = per_barrier
            threads = threads if per_barrier < timings.max_barrier_s else 1
        _state["threads"] = threads
    _state["requests"] += 1
    return _state["threads"]


def threads_for(ctx: "StepContext") -> int:
    """Threads of the CPU team that may run a stage of ctx's scene in one launch: 1 for a
    team of one (team_of_one), probe_threads for others
    (1 where the duel chose a team of one); 0 (no team) where the scene's StepOptions.team
    is off. On a GPU backend, the GPU team's block (gpu_team.threads_for: scenes of at most
    StepOptions.gpu_team_slots body slots), above them on CUDA a grid team where
    StepOptions.gpu_grid_team asks, up to StepOptions.gpu_grid_team_slots (a block per
    multiprocessor; none once its barrier ran out). Small worlds that solve their
    substeps by stage (StepOptions.small_worlds_by_stage) take a team at any size: a CPU's
    threads where their loops run serially, CUDA's grid team above gpu_grid_team_slots,
    where a world a thread is the other choice (fused._world_members). A step asks
    once, as it plans (solver/plan.py), and its stages read the plan's answer
    (threads_in_step)."""
    options = ctx.options
    # (small worlds by stage: a world a thread is their other choice, at any size)
    by_stage = ctx.small_worlds and options.small_worlds_by_stage
    if not ctx.cpu:
        blocks = 0
        if options.gpu_grid_team and not _state["broken"]:
            blocks = gpu_team.grid_blocks(options.gpu_grid_blocks)
        grid_slots = ctx.n_slots if by_stage else options.gpu_grid_team_slots
        threads = gpu_team.threads_for(
            ctx.n_slots,
            ctx.serial,
            options.team,
            options.gpu_team_slots,
            runtime.on_software_vulkan(),
            blocks,
            grid_slots,
        )
        # A grid team's barrier can run out (a block not resident): check() looks.
        _state["handed"] = _state["handed"] or threads > gpu_team.BLOCK_THREADS
        return threads
    if not options.team:
        return 0
    if team_of_one(ctx) and not by_stage:
        return 1
    threads = probe_threads(ctx.pool.counts, options.team_timings)
    many = _duel["many"] if _duel["now"] is None else _duel["now"]
    threads = threads if many else min(threads, 1)
    _state["handed"] = _state["handed"] or threads > 1
    return threads


def team_of_one(ctx: "StepContext") -> bool:
    """Whether ctx's scene's CPU team is one thread, whatever a probe or the duel would say:
    its loops run serially (device.SERIAL_SLOTS) and it is made of small worlds or has at
    most device.TEAM_OF_ONE_SLOTS body slots."""
    return ctx.serial and (ctx.small_worlds or ctx.n_slots <= device.TEAM_OF_ONE_SLOTS)


def threads_in_step(ctx: "StepContext") -> int:
    """The team's threads for a stage of ctx's scene: the step's plan's (StepPlan.team_threads)
    inside a step, threads_for's outside one (a stage a test drives alone)."""
    return threads_for(ctx) if ctx.plan is None else ctx.plan.team_threads


@contextlib.contextmanager
def duel(ctx: "StepContext"):
    """Around a step of ctx's scene: choose_for_step before, record_step after (a step that
    raised is not timed). Between them, the team that ran the step's substeps is noted
    (TeamStatus.step_threads)."""
    choose_for_step(ctx)
    try:
        yield
    except BaseException:
        _duel["now"] = None
        raise
    _state["step_threads"] = _substep_team(ctx)
    record_step()


def _substep_team(ctx: "StepContext") -> int:
    """Threads of the team that ran the substeps of the step ctx's plan describes (0: its
    executor is not the team)."""
    plan = ctx.plan
    if plan is None or plan.substep_executor(ctx.solves_by_world) != "team":
        return 0
    return plan.team_threads


def status() -> TeamStatus:
    """The team's state in this process now (see TeamStatus)."""
    return TeamStatus(
        probed_threads=_state["threads"],
        probe_barrier_s=_state["probe_barrier_s"],
        broken=_state["broken"],
        many=_duel["many"],
        switches=_duel["switches"],
        step_threads=_state["step_threads"],
    )


def reset():
    """The team as in a fresh process: not probed, not broken, the duel's choice a team of
    several threads with no history. For a test that broke the team (check) or a tool that
    measures from a known start; the next step probes the barriers."""
    _state.clear()
    _state.update(_FRESH_STATE)
    _duel.clear()
    _duel.update(_FRESH_DUEL, seconds=[], checks=[])


def choose_for_step(ctx: "StepContext"):
    """At the start of a step of ctx's scene: whether its stages may run on a team of
    several threads (see DUEL_STEPS; the scene's StepOptions.team_timings). Steps that
    could not have one (GPU, a team of one: team_of_one, StepOptions.team off, no team since
    a wait ran out) take no part."""
    _duel["now"] = None
    if not (ctx.cpu and ctx.options.team) or team_of_one(ctx) or _state["broken"]:
        return
    timings = ctx.options.team_timings
    if _duel["scene"] is not ctx.cache or _duel["timings"] != timings:
        # Another scene (or other timings, another clock): its times are not comparable,
        # and a choice made on the last one (a scene falling asleep can make a team of one
        # look as fast) starts again.
        _duel.update(
            scene=ctx.cache,
            timings=timings,
            many=True,
            steps=0,
            interval=timings.duel_steps,
            seconds=[],
            reference=None,
            slow=None,
            won=None,
        )
    _duel["steps"] += 1
    _duel["trial"] = (
        _duel["won"] is None
        and _duel["steps"] >= _duel["interval"]
        and (_duel["reference"] is not None or len(_duel["seconds"]) == timings.duel_history)
    )
    _duel["now"] = _duel["many"] != _duel["trial"]
    _duel["start"] = timings.clock()


def record_step():
    """At the end of a step that choose_for_step let duel: a trial that beat the scene's
    history (or the slow steps that called it) waits for the next DUEL_CHECKS steps, on
    the choice, to check it, and the faster of them decides; other steps join the scene's
    history (one DUEL_SLOW times slower than its median calls a trial at the next step,
    measured against it). The constants are the duel's TeamTimings'."""
    if _duel["now"] is None:
        return
    timings = _duel["timings"]
    elapsed, many = timings.clock() - _duel["start"], _duel["now"]
    _duel["now"] = None
    history = _duel["seconds"]
    full = len(history) == timings.duel_history
    typical = sorted(history)[len(history) // 2] if full else None
    # A team of several threads comes back if it is no slower (it is the default, and the
    # one that scales with the CPUs); a team of one replaces it only if clearly faster.
    if _duel["trial"]:
        _duel["steps"] = 0
        reference = _duel["reference"] or typical
        if elapsed <= _margin(many, timings) * reference:
            _duel.update(won=elapsed, checks=[])  # the next steps, on the choice, check it
        else:
            _duel["interval"] = min(2 * _duel["interval"], timings.duel_max_steps)
            history.clear()  # learnt again, on the choice as it is now
        _duel["reference"] = None
    elif _duel["won"] is not None:
        _duel["checks"].append(elapsed)
        if len(_duel["checks"]) < timings.duel_checks:
            return
        trial, _duel["won"] = _duel["won"], None
        if trial <= _margin(not many, timings) * min(_duel["checks"]):
            # The next trial soon (once the history is learnt again), so a switch that a
            # passing slowdown caused is undone within a few steps.
            _duel.update(
                many=not _duel["many"],
                interval=timings.duel_history + 2,
                switches=_duel["switches"] + 1,
            )
        else:
            _duel["interval"] = min(2 * _duel["interval"], timings.duel_max_steps)
        history.clear()
    elif typical is not None and elapsed > timings.duel_slow * typical:
        # Two slow steps in a row call a trial at the next step, measured against the
        # faster of them (one slow step is more often a compile or a recolouring than a
        # busy machine).
        if _duel["slow"] is None:
            _duel["slow"] = elapsed
        else:
            _duel.update(steps=_duel["interval"], reference=min(_duel["slow"], elapsed), slow=None)
    else:
        _duel["slow"] = None
        history.append(elapsed)
        del history[: -timings.duel_history]


def _margin(many: bool, timings: TeamTimings) -> float:
    """How much faster than the choice a trial on a team of several threads (`many`) or of
    one must be to win: no slower, or timings.duel_margin times."""
    return 1.0 if many else timings.duel_margin


def disable():
    """No team for the rest of the process."""
    _state["broken"] = True
