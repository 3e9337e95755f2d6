"""All of a step's substeps in one launch: a world per thread, or a CPU team of threads.

It walks the scene's solver's stage list (solver/stages.py's STAGES) like the per-stage
executor (solver/staged.py),
in the same order, with the same results bit for bit:

- substeps_by_world (small worlds): a member per world. A world's thread solves its own
  constraints one after the other, colour after colour (its pairs lie in its own range of
  the broad phase's order, and pair_origin lists them there in colour order:
  pairs.store_in_color_order): by default one colour, so its pairs in the broad phase's
  order, then its joints (StepOptions.color_small_worlds off); coloured as the general path
  colours, in the general path's order, and since a colour's constraints share no dynamic
  body, solving them one after the other gives what solving them in parallel gives. What it
  saves: the ~8 launches of each substep (~90 a step at 11 substeps and 6 colours), which
  are most of a small scene's step, and the trips through memory between them: a world's
  bodies and contacts stay in the thread's cache for the whole step.
- step_by_world (small worlds on a GPU, StepOptions.small_worlds_in_one_launch): the whole
  step in the same launch, as loops before and after the substeps' loop: last step's pairs
  saved, the broad phase and its wakes, the colouring with the carry, then the substeps,
  the faults, the report and the sleep pass, each going on only where the one before
  allows (device-side counts): four launches and four host syncs a step become one and
  one.
- small worlds by block (StepOptions.small_worlds_by_block, BY_BLOCK): their substeps in
  the same launches, a block of threads a block of worlds, each stage's items and each
  colour's constraints of its worlds shared by the block's threads, which meet at the
  block's barrier (_block_pass); on a CPU a block is one thread.
- substeps_by_team (other scenes on a CPU backend, solver/team.py): a team of threads, each
  stage and each colour of a pass split between them, with a barrier after each instead of
  a loop launch (2-10 us, not ~35); the overflow colour included.
- kept_step_by_team (a team, a step that keeps last step's pairs, step._keep_pairs): the
  rest of the step in the same launch where it can be: the fat boxes' refit, begin_step,
  the colouring's check, the substeps, and after them the faults and the report's
  refresh, each going on only where the one before allows. A launch wakes the CPU
  thread pool (~65 us on the 2-core CPU VM): the awake large pyramid's step went from
  7-8 launches to one.

A member runs an item stage over its share of the stage's domain (its world's items, or its
share of all of them) and waits at a barrier (a team of one, or a world, waits for
nothing).
"""

from dataclasses import dataclass
from typing import TYPE_CHECKING

import taichi as ti

from ...device import ANSWER_ENTRIES, FLIGHT_CACHE_ENTRIES, MAX_COLORS, TALLY_SLOTS
from ...device.launching import quick
from ..bodies import moves
from ..collision.broad_phase import (
    grid_table_size,
    note_room,
    pair_limit,
    refit_slot,
    restless_slot,
)
from ..integrate import clear_force
from . import gpu_team, team, team_stages
from .coloring import (
    FRESH_COLORING_STEPS,
    HOLDS,
    LOWERED,
    check_slot,
    color_rounds_by_team,
    color_worlds,
    colors_by_world,
    holds_code,
    keeps_colors,
    may_reuse_coloring,
    one_color_by_world,
    solves_other_pairs,
    stages_taken,
    start_coloring_by_team,
    take_turns,
    wait_for_stages,
)
from .contacts import REPEAT_SOLVE, swept_again
from .faults import clear_faults, mark_faults
from .interleaved import (
    body_stride,
    body_view,
    copy_world,
    manifold_view,
    note_most_pairs,
    pair_layout,
    prepared_view,
)
from .joints import JOINT_SWEEPS
from .overflow import apply_mean_delta, clear_entries
from .pairs import carry_pair, record_constraint_counts, saved_pairs_args
from .plan import current_plan
from .reporting import (
    MAX_REFRESH_BACKOFF,
    copy_listed,
    held_entries,
    refresh_due,
    refresh_holds,
    refresh_tally,
    report_by_team,
    report_counts,
    report_fits,
    report_worlds,
)
from .sleep import find_pairs_waking, no_convergence, update_sleep_by_team, wake_islands_by_team
from .stages import (
    BEGIN_STEP_STAGES,
    BEGUN_PREPARED,
    BODY_SLOTS,
    CHAIN_ROLES,
    CONTACTLESS_STAGES,
    IDLE,
    JOINT_SLOTS,
    NOT_IDLE,
    PAIRS,
    PASS_NUMBERS,
    STAGES,
    STILL,
    Substep,
    begun_before,
    bounce_possible,
    fast_pairs_noted,
    runs,
)

if TYPE_CHECKING:
    from .context import StepContext

vec2 = ti.math.vec2


def substeps_by_world(ctx: "StepContext", contacts: bool = True):
    """All of the step's substeps in one launch, one world per thread (spread over the CPU
    backend's tasks: team.world_stride) or a block of worlds at a time where the plan says
    (BY_BLOCK: _world_members), each world's faults found after them
    (ctx.faults_found, see _launch). Without `contacts` (a step without contacts,
    step.contactless_step): the kernel compiled with the stages as such a step runs them
    (stages.CONTACTLESS_STAGES), its joints alone in colour 0 and in order, no pairs; the
    launch records the step's constraint counts (no pairs) itself and clears the applied
    forces after the substeps (integrate.clear_forces' work: no launch of its own)."""
    clears = not contacts and ctx.cache.forces_on_device
    # (Never BY_STAGE: a plan that takes it runs the substeps on the team, StepPlan.
    # substep_executor.)
    by_world, n_members, stride = _world_members(ctx, contacts)
    _launch(
        ctx,
        by_world=by_world,
        n_members=n_members,
        stride=stride,
        contacts=contacts,
        clears_forces=clears,
    )
    if clears:
        ctx.cache.forces_on_device = False


def pass_by_world(ctx: "StepContext", stage):
    """Colour pass `stage` of small worlds that take one colour
    (coloring.one_color_by_world), a world per thread, in a launch of its own: a profiled
    step's (staged.colour_pass), as substeps_by_world solves it: the same results bit for
    bit (a world's constraints in the same order)."""
    pool = ctx.pool
    sweeps = JOINT_SWEEPS if stage.joint_sweeps and ctx.n_joints > 0 else 1
    uneven = int(ctx.immovable_sweep) if stage.immovable_sweep else 0
    _pass_by_world(
        pool.model,
        pool.bodies,
        pool.joints,
        pool.manifolds,
        pool.prepared,
        pool.coloring,
        pool.counts,
        stage.run,
        stage.position,
        stage.joints,
        ctx.n_worlds,
        team.world_stride(ctx),
        ctx.n_bodies,
        ctx.n_joints,
        ctx.cache.n_colors,
        ctx.h,
        sweeps,
        uneven,
    )


@quick
@ti.kernel
def _pass_by_world(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    constraint: ti.template(),
    position: ti.template(),
    with_joints: ti.template(),
    n_worlds: ti.i32,
    world_stride: ti.i32,
    n_bodies: ti.i32,
    n_joints: ti.i32,
    n_colors: ti.i32,
    h: ti.f32,
    sweeps: ti.i32,
    uneven: ti.i32,
):
    """pass_by_world's launch: _member_pass for each world (member_of's stride, as the
    substeps' loop)."""
    for item in range(n_worlds * world_stride):
        world = team.member_of(item, world_stride)
        if world >= 0:
            _member_pass(
                model,
                bodies,
                joints,
                manifolds,
                prepared,
                coloring,
                counts,
                constraint,
                position,
                with_joints,
                world,
                1,
                True,
                n_bodies,
                n_joints,
                n_colors,
                0,
                h,
                sweeps,
                uneven,
                True,
                False,
                ti.Vector([-1, 0, 0]),
                False,
                n_worlds,
            )


def substeps_by_team(ctx: "StepContext", threads: int):
    """All of the step's substeps in one launch on a team of `threads` CPU threads, the
    faults found after them (ctx.faults_found, see _launch). (step() checks the barrier's
    waits once, after the substeps: team.check, from ctx.barrier_timeouts.)"""
    _launch(ctx, by_world=False, n_members=threads)


def begin_step_by_team(ctx: "StepContext", threads: int):
    """begin_step's stages (stages.BEGIN_STEP_STAGES) on a team of `threads` CPU threads:
    the narrow phase is compiled into the team's kernel, not into a second one."""
    _launch(ctx, by_world=False, n_members=threads, mode=BEGIN)


def kept_step_by_team(
    ctx: "StepContext", threads: int, refit: tuple[float, float] | None = None
) -> tuple[int, tuple[int, int, int] | None, "Paired | None", "LaunchColoring | None", int]:
    """A step that keeps last step's pairs where they lie and may reuse its colouring
    (step._keep_pairs), in one launch on a team of `threads` CPU threads: begin_step's
    stages, the check that the colouring still holds (coloring._coloring_holds_in_order's,
    each member its share of the pairs and bodies), and where it holds, the substeps
    (substeps_by_team). `refit` (margin m, motion time s): first the fat boxes' refit
    (broad_phase.refit_fat_boxes, not reset), and the rest only where it leaves the pairs
    kept and nothing asleep (pairs.keeps_pairs, no sleeper: no wake_islands to ask); where
    it found sleepers, StepOptions.wake_in_launch runs the wake pass in the launch
    (_wake_by_team, as the host's wake_islands) and goes on where nothing woke: after the
    refit where only sleepers stopped it (nothing refitted or restless: the pairs are kept
    where nothing wakes), or after its broad phase (below; an awake body that can move
    beside sleepers also has the pairs found).
    Returns (the check's answer, coloring.verdict_holds reads it; the refit's answer,
    refit_fat_boxes', or None without `refit`; what its broad phase found, or None; what
    a colouring in the launch did, or None: found_step_by_team's; how the wake pass went,
    WAKE_*);
    where the refit or the check stops it, nothing after them ran, except that where the
    refit moved boxes and nothing sleeps, the launch saves last step's pairs and (the scene's
    StepOptions.broad_phase_in_launch) finds the pairs itself: where they fit the pool and
    last step's colouring may be reused for them it goes on as found_step_by_team's launch
    (the check's answer is then that launch's; with StepOptions.color_in_launch also where
    the pairs are not last step's number: it colours them itself, as found_step_by_team's
    launch colours where the check fails), else it stops after the broad phase
    (`Paired`). The same results bit for bit as those in their own launches;
    what it saves is their launches, each of which wakes the CPU backend's thread pool
    (~65 us on the 2-core CPU VM, against ~12 us for a launch of serial loops). Soft step,
    on and off in turns in one process (2-core CPU): begin_step, the check and the
    substeps in one launch, awake large pyramid 4.63 -> 4.42 ms a step (best windows; the
    windows' median ratio 0.95), many pyramids 16.7 -> 16.4 (0.975); the refit too, awake
    large pyramid 4.21 -> 4.06 (0.965), many pyramids 16.0 -> 15.8 (0.995)."""
    return _launch(ctx, by_world=False, n_members=threads, mode=KEPT, refit=refit)


def found_step_by_team(ctx: "StepContext", threads: int) -> tuple[int, "LaunchColoring | None"]:
    """The rest of a step whose broad phase found its pairs (step.find_pairs, where last
    step's colouring may be reused: may_reuse_coloring), in one launch on a team of
    `threads` threads: last step's contacts carried to the pairs (pairs.carry_contacts'),
    begin_step's stages, the check that last
    step's colouring still holds (coloring._coloring_still_valid's, each member its share:
    team_stages.found_coloring_part), and where it holds the pairs moved to colour order
    (pairs._gather_pairs'), their per-body lists (contacts._build_body_contacts') and the
    substeps, as substeps_by_team runs them. Returns the check's answer (coloring.
    verdict_holds reads it) and, where the launch coloured the constraints itself
    (colors_in_launch), what that colouring did (LaunchColoring), else None. Where the
    check does not hold, or does not run (last step's colouring may not be reused:
    coloring.may_reuse_coloring), the launch colours the step's constraints itself
    (StepOptions.color_in_launch: _color_by_team, the colouring's stages on the team) and
    goes on as where the check held, unless something overflowed the colours: then it
    stops after the colour lists and the host orders the overflow and goes on as after its
    own colouring; without color_in_launch nothing after the check ran, and the step
    colours again. The same results bit for bit as those stages' own launches, six
    of which it replaces (on a GPU: five launches and two host syncs a step of the awake
    large pyramid); with the colouring, eleven (the colouring's three and the order's two
    of them, each of the colouring's a host sync, on a pile whose pairs change every
    step)."""
    code, _, _, colored, _ = _launch(ctx, by_world=False, n_members=threads, mode=FOUND)
    return code, colored


@dataclass(frozen=True)
class LaunchColoring:
    """What a team's launch that coloured the step's constraints itself did
    (colors_in_launch): whether it started from last step's colours (`keep`,
    coloring.keeps_colors as the host said before the launch), the colours it used, the
    constraints it left to the overflow colour, and whether it went on after the colour
    lists (nothing overflowed: it moved the pairs to colour order, built their per-body
    lists and ran the substeps) or stopped there (the host orders the overflow, moves the
    pairs and runs the substeps)."""

    keep: bool
    used: int
    overflow: int
    went_on: bool


def colors_in_launch(ctx: "StepContext") -> bool:
    """Whether a found step's team launch colours the step's constraints itself where last
    step's colouring does not hold or may not be reused (StepOptions.color_in_launch,
    compiled in with the folded stages: folds); not for a step without constraints (the
    host's colouring then runs nothing, and leaves the colour lists as they were)."""
    return ctx.options.color_in_launch and folds(ctx) and ctx.n_constraints > 0


@dataclass(frozen=True)
class WorldLaunch:
    """What the host tells the small worlds' step in one launch (step_by_world): the broad
    phase's margin (m) and motion time (s); whether it saves last step's pairs first (not in
    a launch again after the pool grew: the first one began to overwrite them), builds the
    reported list (`report`), runs the sleep pass after it (`sleep`) and then clears the
    applied forces where the list fit (`clears_forces`: integrate.clear_forces' work, no
    launch of its own)."""

    margin: float
    motion_time: float
    save: bool
    report: bool
    sleep: bool
    clears_forces: bool = False


@dataclass(frozen=True)
class WorldStep:
    """What the small worlds' step in one launch did (step_by_world's answer): how far it went
    (FIND_STOPPED, FIND_COLORED or FIND_WENT_ON), the pairs its broad phase found and the
    bodies it lost; the colouring's colours used and overflowing constraints (from
    FIND_COLORED on); the faulty worlds and the barrier's timeouts, and where it built the
    reported list its counts (pairs, begin events, end events; FIND_WENT_ON)."""

    progress: int
    pairs: int
    lost: int
    used: int
    overflow: int
    faults: int
    timeouts: int
    listed: tuple[int, int, int]


def step_by_world(ctx: "StepContext", launch: WorldLaunch) -> WorldStep:
    """A small worlds' step (ctx.small_worlds, StepPlan.worlds_launch) in one launch of the
    substeps' kernel, a world per thread in each of its loops, each going on only where the
    one before allows (device-side flags: the host does not wait in between): last step's
    pairs saved and the broad phase with the wakes it brings (sleep.find_pairs_waking, as
    sleep.find_pairs_waking_by_world); where the pairs fit the pool, the colouring with the
    carry and each world's solve order (coloring.color_worlds, as _color_worlds with carry);
    where nothing overflowed, the substeps a world per thread and the faults (as
    substeps_by_world), then where `launch.report` asks the reported list and where it fit
    and `launch.sleep` asks the sleep pass (reporting.report_worlds, as _report_by_world),
    then where `launch.clears_forces` asks and the list fit, the applied forces cleared.
    The values the host passed those launches (the step's pairs, colours) are read on the
    device. Returns what it did (WorldStep): step._step_by_world notes it as those four
    launches' answers would have been noted, and where it stopped, finishes the step their
    way. The same results bit for bit (tests/test_small_worlds_one_launch.py); on a GPU four
    launches and four host syncs a step become one and one."""
    by_world, n_members, stride = _world_members(ctx)
    a = _launch(
        ctx,
        by_world=by_world,
        n_members=n_members,
        stride=stride,
        worlds=launch,
        clears_forces=launch.clears_forces,
    )
    return world_step(a)


def _world_members(ctx: "StepContext", contacts: bool = True) -> tuple[bool | int, int, int]:
    """(by_world, n_members, stride) of a small worlds' step's launch: BY_STAGE on the
    step's team where its substeps run by stage (StepOptions.small_worlds_by_stage,
    StepPlan.worlds_by_stage: a CPU's threads, CUDA's grid team), else a world a member
    (A_WORLD_A_THREAD, team.world_stride), as a step without contacts always is (the two
    solve in the same order: the same results)."""
    plan = current_plan(ctx)
    if contacts and plan.worlds_by_stage:
        return BY_STAGE, plan.team_threads, 1
    if contacts and plan.worlds_by_block:
        return BY_BLOCK, block_members(ctx.n_worlds, ctx.n_bodies, ctx.n_joints, ctx.n_pairs), 1
    return True, ctx.n_worlds, team.world_stride(ctx)  # (True: A_WORLD_A_THREAD)


def block_threads() -> int:
    """Threads of a block of BY_BLOCK (StepOptions.small_worlds_by_block): a GPU's
    gpu_team.BLOCK_THREADS, meeting at the block's barrier; a CPU's one (a thread steps its
    block's worlds alone)."""
    return gpu_team.BLOCK_THREADS if gpu_team.on_gpu() else 1


def block_members(
    n_worlds: int, n_bodies: int, n_joints: int = 0, n_pairs: int = 0, threads: int = 0
) -> int:
    """A BY_BLOCK launch's loop items (n_members): its blocks times block_threads(). A
    GPU's block takes as many worlds as fit its threads a body slot each, and a constraint
    each as the last broad phase found them (`n_pairs` in all; joint slots `n_joints` a
    world), at least one: a colour pass walks a block's constraints a thread each, and a
    block with more constraints than threads walks them twice, its other warps waiting
    for the first at each colour's barrier. A CPU's block takes CPU_BLOCK_WORLDS. The
    launch spreads the worlds evenly over the blocks (block_worlds); how many a block
    takes changes no result. `threads`: a block's (0: block_threads(); 1: a CPU's)."""
    threads = threads or block_threads()
    if threads == 1:
        return -(-n_worlds // CPU_BLOCK_WORLDS)
    items = max(n_bodies, -(-n_pairs // max(n_worlds, 1)) + n_joints, 1)
    return -(-n_worlds // max(1, threads // items)) * threads


def world_step(a) -> WorldStep:
    """The WorldStep of a small worlds' step's raw answer `a` (_Answer's entries)."""
    return WorldStep(
        progress=int(a[_FIND_ENTRY]),
        pairs=int(a[_PAIRS_ENTRY]),
        lost=int(a[13]),
        used=int(a[15]),
        overflow=int(a[16]),
        faults=int(a[0]),
        timeouts=int(a[1]),
        listed=(int(a[_LISTED_ENTRY]), int(a[8]), int(a[9])),
    )


def went_as_taken(step: WorldStep, pair_capacity: int, contacts: bool = True) -> bool:
    """Whether a small worlds' step in flight went as the host takes it to go, where it
    launches the next without reading this one's answer (_hold_answer, on the device, says
    the same): no fault; with `contacts` (not a step without contacts), through the
    substeps, the reported list built within the pool."""
    if step.faults != 0 or step.timeouts != 0:
        return False
    return not contacts or (step.progress == FIND_WENT_ON and step.listed[0] <= pair_capacity)


def step_by_world_in_flight(ctx: "StepContext", launch: WorldLaunch, slot: int, late: int):
    """step_by_world's launch for a step in flight (solver/in_flight.py): the same step, bit
    for bit, whose answer the host does not wait for: it is held on the device in
    counts.answers[slot] (held_answers reads them all). `late`: the slot + 1 of last
    step's answer where last step was in flight too (the launch reads last step's pairs
    and reported list there), else 0. Where a step in flight stopped short
    (went_as_taken), every launch in flight after it does nothing."""
    assert launch.report and launch.save, launch
    _in_flight(ctx, slot, late, launch)


def substeps_in_flight(ctx: "StepContext", slot: int):
    """substeps_by_world(contacts=False)'s launch for a step without contacts in flight
    (solver/in_flight.py; no applied forces to clear): its answer, its faults, is held in
    counts.answers[slot]; where a world faulted, every launch in flight after it does
    nothing."""
    assert not ctx.cache.forces_on_device
    _in_flight(ctx, slot, 0, None)


def _in_flight(ctx: "StepContext", slot: int, late: int, launch: WorldLaunch | None):
    """_worlds_in_flight's launch: a small worlds' step told `launch`, or without contacts
    (None)."""
    pool, cache = ctx.pool, ctx.cache
    contacts = launch is not None
    if launch is None:
        launch = WorldLaunch(margin=0.0, motion_time=0.0, save=False, report=False, sleep=False)
    by_world, n_members, stride = _world_members(ctx, contacts)
    _worlds_in_flight(
        model=pool.model,
        bodies=pool.bodies,
        joints=pool.joints,
        grid=pool.grid,
        manifolds=pool.manifolds,
        previous=pool.previous,
        staging=pool.staging,
        scan=pool.scan,
        prepared=pool.prepared,
        coloring=pool.coloring,
        counts=pool.counts,
        faults=pool.faults,
        reported=pool.reported,
        events=pool.events,
        islands=pool.islands,
        solver=ctx.solver,
        by_world=by_world,
        n_members=n_members,
        **_loop_flags(ctx, by_world, contacts),
        world_stride=stride,
        n_worlds=ctx.n_worlds,
        n_bodies=ctx.n_bodies,
        n_joints=ctx.n_joints,
        n_pairs=ctx.n_pairs,
        substeps=ctx.substeps,
        h=ctx.h,
        dt=ctx.dt,
        begun=begun_before(ctx.small_coloring),
        bullets=int(ctx.has_bullets),
        uneven=int(ctx.immovable_sweep),
        chained=0,  # (a world a thread: its own member, it never meets)
        n_reported=cache.n_reported,
        save=_save_flags(ctx) if launch.save else 0,
        margin=launch.margin,
        motion_time=launch.motion_time,
        sleep=int(launch.sleep),
        cell_size=ctx.cell_size,
        serial=bool(ctx.serial),
        world_args=_world_args(ctx, launch) if contacts else (0,) * 5,
        slot=slot,
        late=late,
        contacts=contacts,
        n_colors=cache.n_colors,
    )


def kept_step_in_flight(
    ctx: "StepContext", threads: int, refit: tuple[float, float], slot: int, late: int
):
    """kept_step_by_team's launch (with `refit`) for a step in flight (solver/in_flight.py):
    the same step, bit for bit, whose answer the host does not wait for. It takes what it
    is told from last step's StepCache on the device (_team_in_flight): where `late` (the
    slot + 1 of last step's) is 0, from the host's (ctx.cache, as it is now). Its answer
    and the StepCache it leaves are held in counts.answers[slot] and
    counts.flight_caches[slot] (held_flight_caches reads them)."""
    args, _ = _launch_args(ctx, False, threads, KEPT, 1, refit, None, True, False)
    options = ctx.options
    _team_in_flight(
        **args,
        slot=slot,
        late=late,
        cache_in=[int(getattr(ctx.cache, name)) for name in FLIGHT_CACHE_FIELDS] + [1],
        may_refresh=int(options.refresh_report),
        reports=int(options.report_in_launch),
        keep_fresh=int(options.keep_fresh_coloring),
    )


def held_flight_caches(ctx: "StepContext", n: int) -> list[tuple[dict, int]]:
    """The StepCaches the first n team's steps in flight left (kept_step_in_flight), as
    {FLIGHT_CACHE_FIELDS name: value}, and whether each step went as taken (1), stopped
    short (0) or ran nothing (NOT_RUN)."""
    held = []
    for row in ctx.pool.counts.flight_caches.to_numpy()[:n]:
        held.append(
            (dict(zip(FLIGHT_CACHE_FIELDS, (int(v) for v in row), strict=False)), int(row[-1]))
        )
    return held


def held_raw_answers(ctx: "StepContext", n: int) -> list[list[int]]:
    """The answers of the first n steps in flight, as _launch reads a launch's answer."""
    return [[int(v) for v in a] for a in ctx.pool.counts.answers.to_numpy()[:n]]


def kept_answer(ctx: "StepContext", answer: list[int], threads: int, refit):
    """kept_step_by_team's return for a kept step's launch (`threads`, `refit`) that
    answered `answer` (held_raw_answers: a step in flight that stopped short), noted on ctx
    as _launch notes it, ctx's StepCache as the step found it."""
    _, flags = _launch_args(ctx, False, threads, KEPT, 1, refit, None, True, False)
    return _note_answer(ctx, answer, KEPT, refit, *flags)


def held_answers(ctx: "StepContext", n: int) -> list[WorldStep]:
    """The answers of the first n steps in flight (slots 0 to n - 1), in one read of the
    device."""
    return [world_step(a) for a in held_raw_answers(ctx, n)]


def _world_args(ctx: "StepContext", launch: WorldLaunch) -> tuple[int, ...]:
    """_substeps' world_args (_WorldArgs) for ctx's step in one launch."""
    return (
        int(keeps_colors(ctx)),
        int(one_color_by_world(ctx)),
        held_entries(ctx.cache),
        ctx.pool.pair_capacity,
        pair_limit(ctx.n_slots),
    )


def _team_world_args(ctx: "StepContext") -> tuple[int, ...]:
    """_substeps' world_args for a team's launch: only the held entries of its report."""
    return (0, 0, held_entries(ctx.cache), 0, 0)


#: Where each of the team's checks tallies in counts.tally (device.TALLY_SLOTS): the kept
#: colouring's two counts (_kept_coloring_holds), the report's three (refresh_tally), the
#: refit's three (_refit_by_team), how far the launch's broad phase went (FIND_*), how its
#: sleep pass went (SLEPT_*), how a colouring in the launch went (COLORED_*) and its colours
#: used and overflowing constraints (_color_by_team), and how a wake pass in the launch went
#: (WAKE_*); then stages.BOUNCE_TALLY and FAST_TALLY, whether a point may bounce and
#: whether a pair is fast; last, the refit's awake bodies that move (bodies.moves) where
#: some sleep (_refit_by_team: none in an idle step makes it still, Substep.idle).
(
    _HOLDS_TALLY,
    _REFRESH_TALLY,
    _REFIT_TALLY,
    _FIND_TALLY,
    _SLEEP_TALLY,
    _COLOR_TALLY,
    _WAKE_TALLY,
    _MOVERS_TALLY,
) = (0, 2, 5, 8, 9, 10, 13, 16)

#: How a colouring in a team's launch went (its answer's COLORED entry): none made; made,
#: something overflowed, the launch stopped after the colour lists; made, the launch went on.
COLORED_NONE, COLORED_STOPPED, COLORED_WENT_ON = 0, 1, 2

#: How the sleep pass at a team launch's end went (its answer's SLEEP entry): not run; run,
#: its labelling not converged (a bug: the host raises); run.
SLEPT_NONE, SLEPT_UNCONVERGED, SLEPT = 0, 1, 2

#: How the wake pass in a kept step's team launch went (its answer's WAKE entry;
#: StepOptions.wake_in_launch: where the refit found sleepers but nothing refitted or
#: restless, sleep.wake_islands_by_team): not run; run, nothing woke (the launch went on as
#: a kept step); run, bodies woke (the launch stopped: the step finds its pairs again).
WAKE_NONE, WAKE_QUIET, WAKE_WOKE = 0, 1, 2

#: _substeps' answer: faulty worlds, the barrier's timeouts, the colouring check's answer,
#: whether it refreshed the reported list, the refit's three counts, the reported list's
#: three counts where it built one; how far a broad phase in the launch went (FIND_*) and
#: what it needed: grid entries, pairs, bodies lost; how its sleep pass went (SLEPT_*; see
#: _substeps); the colours used and the constraints overflowing them of a colouring in the
#: launch (the small worlds' step, step_by_world; a team's, _color_by_team) and how a team's
#: went (COLORED_*); how a wake pass in a kept step's launch went (WAKE_*).
_Answer = ti.types.vector(ANSWER_ENTRIES, ti.i32)
#: Entries of the answer a step in flight's next launch reads (_launch_body's `late`): the
#: broad phase's pairs, the reported list's length; and how far the step went.
_PAIRS_ENTRY, _LISTED_ENTRY, _FIND_ENTRY = 12, 7, 10

#: The StepCache fields a team's step in flight leaves on the device, in this order
#: (counts.flight_caches; _FlightCache's entries, then _C_TAKEN: whether the step went as
#: the host takes it to go). The next launch takes its arguments from them
#: (_flight_launch), and the host's read of the flight notes them (in_flight.settle).
FLIGHT_CACHE_FIELDS = (
    "n_pairs",
    "pairs_ordered",
    "coloring_valid",
    "colored_pairs",
    "n_colors",
    "n_overflow",
    "lost_bodies",
    "colorings",
    "scratch_colorings",
    "steps_since_fresh_coloring",
    "colors_fresh",
    "n_reported",
    "n_begin_events",
    "n_end_events",
    "state_set",
    "pairs_fat",
    "pair_reuses",
    "pairs_kept",
    "pairs_in_place",
    "report_mapped",
    "report_refreshes",
    "refresh_backoff",
    "refresh_skips",
    "contacts_current",
)
(
    _C_PAIRS,
    _C_ORDERED,
    _C_VALID,
    _C_COLORED,
    _C_COLORS,
    _C_OVERFLOW,
    _C_LOST,
    _C_COLORINGS,
    _C_SCRATCH,
    _C_SINCE_FRESH,
    _C_FRESH,
    _C_REPORTED,
    _C_BEGIN,
    _C_END,
    _C_STATE_SET,
    _C_FAT,
    _C_REUSES,
    _C_KEPT,
    _C_IN_PLACE,
    _C_MAPPED,
    _C_REFRESHES,
    _C_BACKOFF,
    _C_SKIPS,
    _C_CURRENT,
    _C_TAKEN,
) = range(FLIGHT_CACHE_ENTRIES)
_FlightCache = ti.types.vector(FLIGHT_CACHE_ENTRIES, ti.i32)
#: A flight cache's _C_TAKEN where the step's launch ran nothing (_team_in_flight); else 1
#: (it went as taken) or 0 (it stopped short).
NOT_RUN = -1
#: Entries of a team's answer a step in flight reads besides _PAIRS_ENTRY and the others:
#: whether it refreshed the list, the refit's first count, bodies lost, the sleep pass's
#: progress, and how a colouring in the launch went (its colours and overflow before it).
_REFRESHED_ENTRY, _REFIT_ENTRY, _LOST_ENTRY, _SLEEP_ENTRY, _COLORED_ENTRY = 3, 4, 13, 14, 17
_WAKE_ENTRY = 18

#: How far a kept step's launch that went on to find its pairs went (its answer's FIND
#: entry): not at all; the broad phase, then stopped (the pool must grow, or the pairs are
#: not last step's number: may_reuse_coloring); on, as found_step_by_team goes.
FIND_NONE, FIND_STOPPED, FIND_WENT_ON = 0, 1, 2
#: How far the small worlds' step in one launch went (step_by_world; its answer's FIND
#: entry): FIND_STOPPED, after its broad phase (the pool must grow for its pairs, or they
#: are more than allowed); FIND_COLORED, after its colouring (something overflowed: the
#: worlds are solved across worlds, StepContext.solves_by_world); FIND_WENT_ON, through the
#: substeps, the faults and, where asked, the report and the sleep pass.
FIND_COLORED = 3

#: _substeps' `world_args` (step_by_world): whether the colouring starts from last step's
#: colours (coloring.keeps_colors), whether every constraint takes colour 0
#: (coloring.one_color_by_world), the old reported list's entries held (reporting's
#: n_held; a team's report in its launch takes it too: _team_world_args), the pool's pairs
#: and the most pairs allowed (broad_phase.pairs_fit checks them).
_WorldArgs = ti.types.vector(5, ti.i32)
_KEEP, _ONE_COLOR, _N_HELD, _WORLD_CAPACITY, _WORLD_LIMIT = range(5)

#: _substeps' `find_args`: the grid's hash-table mask, the partners a body notes, the pool's
#: grid entries and pairs (the host's capacities, which broad_phase.pairs_fit checks), the
#: most pairs allowed (broad_phase.check_pair_count), the pairs last step's colouring
#: coloured (may_reuse_coloring wants as many), and whether the found step builds the
#: report.
_FindArgs = ti.types.vector(7, ti.i32)
(
    _TABLE_MASK,
    _NOTE_ROOM,
    _ENTRY_CAPACITY,
    _PAIR_CAPACITY,
    _PAIR_LIMIT,
    _COLORED_PAIRS,
    _REPORT_FOUND,
) = range(7)

#: _substeps' `color_args` (a team's found step, FOUND, or a kept step's launch that finds its
#: pairs): whether last step's colouring may be reused (coloring.may_reuse_coloring: the
#: check runs; a kept step's launch checks where its broad phase found as many pairs as that
#: colouring coloured), whether the launch colours the constraints itself where the check
#: does not hold or does not run (colors_in_launch; compiled in with `recolors`), and whether
#: that colouring starts from last step's colours (coloring.keeps_colors).
_ColorArgs = ti.types.vector(3, ti.i32)
_MAY_REUSE, _RECOLOR, _KEEP_COLORS = range(3)

#: _substeps' modes: begin_step's stages; the substeps; begin_step, the colouring's check
#: and the substeps where it holds (kept_step_by_team); begin_step, the check of a
#: colouring of found pairs, and where it holds their move to colour order, their per-body
#: lists and the substeps (found_step_by_team).
SUBSTEPS, BEGIN, KEPT, FOUND = 0, 1, 2, 3

#: _substeps' `by_world` (compiled in): who runs a launch's loops. A team's threads share
#: every stage (False: large worlds); a world a member in every loop (True,
#: A_WORLD_A_THREAD: small worlds); BY_STAGE: a small worlds' step whose loops are a world
#: a thread but for its substeps, which a team's threads share stage by stage, colour after
#: colour, as a large world's (StepOptions.small_worlds_by_stage: _world_members);
#: BY_BLOCK: the same but for its substeps, which a block of threads solves a block of
#: worlds at a time, meeting at the block's barrier (StepOptions.small_worlds_by_block:
#: block_members, block_worlds, _block_pass).
A_WORLD_A_THREAD, BY_STAGE, BY_BLOCK = 1, 2, 3

#: Worlds a block of BY_BLOCK takes on a CPU, whose block is one thread (a team of one): it
#: steps them stage by stage, colour after colour, as a GPU's block does its own.
CPU_BLOCK_WORLDS = 4


def _launch(
    ctx: "StepContext",
    by_world: bool,
    n_members: int,
    mode: int = SUBSTEPS,
    stride: int = 1,
    refit: tuple[float, float] | None = None,
    worlds: "WorldLaunch | None" = None,
    contacts: bool = True,
    clears_forces: bool = False,
):
    """The launch (`mode`: SUBSTEPS, BEGIN, KEPT or FOUND; `refit`: see kept_step_by_team;
    `worlds`: the small worlds' step in one launch, step_by_world, whose raw answer it returns);
    returns (the colouring check's answer (KEPT, FOUND), the refit's answer or None, what its
    broad phase found or None: _note_answer). After the
    substeps it also marks the faulty worlds (solver/faults.py: what contain_faults reads
    after the step; the step's later stages, report, sleep and clear forces, change no
    pose or velocity that makes or mends a fault) and reads the barrier's timeouts:
    ctx.faults_found and ctx.barrier_timeouts, so neither takes a launch of its own after
    the step (awake large pyramid: 0.15 ms of ~5 on the 2-core CPU; 4,096 small worlds
    0.3 of ~15)."""
    args, flags = _launch_args(
        ctx, by_world, n_members, mode, stride, refit, worlds, contacts, clears_forces
    )
    answer = _substeps(**args)
    if worlds is not None:
        return [int(value) for value in answer]
    return _note_answer(ctx, [int(value) for value in answer], mode, refit, *flags)


def interleaves(ctx: "StepContext") -> bool:
    """Whether a small worlds' step works on its state interleaved (solver/interleaved.py,
    StepOptions.interleave_small_worlds: None, on GPU backends)."""
    asked = ctx.options.interleave_small_worlds
    return gpu_team.on_gpu() if asked is None else asked


def begins_by_item(ctx: "StepContext") -> bool:
    """Whether a small worlds' step runs its first substep's stages up to the narrow phase
    a thread an item before its substeps a world a thread (_begin_by_item,
    StepOptions.small_worlds_begin_by_item: None, on CUDA). Never on SPIR-V (Vulkan,
    Metal): Taichi 1.7.4's SPIR-V code generator fails on the step's kernel with the
    narrow phase's loop in it ("Value ... does not yet exist", software Vulkan)."""
    if gpu_team.on_spirv():
        return False
    asked = ctx.options.small_worlds_begin_by_item
    return gpu_team.on_cuda() if asked is None else asked


def _chains(ctx: "StepContext", by_world: bool) -> bool:
    """Whether a team's launch may take its substeps' stages by turns
    (StepOptions.stages_by_turns with colors_by_turns; the launch starts the chain itself
    where its step allows: _chain_starts): where no stage in the chain reads another body
    that moves, and no pass meets between sweeps. Not with joints (the motors read both
    bodies; XPBD sweeps joints again at barriers), kinematic bodies (moved by a stage of
    their own, read by the constraints of the bodies they meet, which take no turn at
    them), bullets (the continuous sweep's second round reads the dynamic bodies they
    meet) or, in XPBD, worlds of uneven masses (the velocity pass sweeps the contacts with
    immovable bodies again, at a barrier)."""
    options = ctx.options
    uneven = ctx.immovable_sweep and any(stage.immovable_sweep for stage in STAGES[ctx.solver])
    return (
        not by_world
        and options.colors_by_turns
        and options.stages_by_turns
        and not gpu_team.on_spirv()
        and ctx.n_joints == 0
        and not ctx.has_kinematic
        and not ctx.has_bullets
        and not uneven
    )


def _launch_args(
    ctx: "StepContext",
    by_world: bool,
    n_members: int,
    mode: int,
    stride: int,
    refit: tuple[float, float] | None,
    worlds: "WorldLaunch | None",
    contacts: bool,
    clears_forces: bool,
) -> tuple[dict, tuple[bool, bool, bool]]:
    """_substeps' arguments for _launch's launch, by name, and the flags _note_answer reads
    its answer with: (whether its broad phase may find the pairs, whether it refreshes the
    reported list, whether it builds it)."""
    pool = ctx.pool
    folded = folds(ctx, by_world) or worlds is not None
    refresh, report = _report_flags(ctx, by_world, mode, folded)
    margin, motion_time = refit if refit is not None else (0.0, 0.0)
    save = _save_flags(ctx) if refit is not None and folded else 0
    sleep = folded and mode != BEGIN and ctx.enable_sleep and ctx.options.sleep_in_launch
    if worlds is not None:
        margin, motion_time = worlds.margin, worlds.motion_time
        save = _save_flags(ctx) if worlds.save else 0
        report, sleep = worlds.report, worlds.sleep
    find = folded and mode == KEPT and refit is not None and finds_in_launch(ctx)
    wake = folded and mode == KEPT and refit is not None and ctx.options.wake_in_launch
    # The team's colouring is compiled into every large world's folded kernel, turned on or
    # off at launch by color_args' _RECOLOR: one compile serves color_in_launch on and off.
    recolors = folded and worlds is None
    colors_here = recolors and ctx.options.color_in_launch
    args = dict(
        model=pool.model,
        bodies=pool.bodies,
        joints=pool.joints,
        grid=pool.grid,
        manifolds=pool.manifolds,
        previous=pool.previous,
        staging=pool.staging,
        scan=pool.scan,
        prepared=pool.prepared,
        coloring=pool.coloring,
        counts=pool.counts,
        faults=pool.faults,
        reported=pool.reported,
        events=pool.events,
        islands=pool.islands,
        solver=ctx.solver,
        n_members=n_members,
        by_world=by_world if by_world in (BY_STAGE, BY_BLOCK) else bool(by_world),
        **_loop_flags(ctx, by_world, contacts),
        world_stride=stride,
        n_worlds=ctx.n_worlds,
        n_bodies=ctx.n_bodies,
        n_joints=ctx.n_joints,
        n_pairs=ctx.n_pairs,
        n_colors=ctx.cache.n_colors,
        overflow=int(ctx.cache.n_overflow > 0),
        substeps=ctx.substeps,
        h=ctx.h,
        dt=ctx.dt,
        mode=mode,
        begun=begun_before(ctx.small_coloring),
        bullets=int(ctx.has_bullets),
        uneven=int(ctx.immovable_sweep),
        chained=int(_chains(ctx, by_world)),
        refresh=int(refresh),
        report=int(report),
        n_reported=ctx.cache.n_reported,
        refit=int(refit is not None),
        save=save,
        margin=margin,
        motion_time=motion_time,
        folded=folded,
        recolors=recolors,
        color_args=_color_args(ctx, mode) if colors_here else (1, 0, 0),
        find=int(find),
        sleep=int(sleep),
        wake=int(wake),
        cell_size=ctx.cell_size,
        find_args=_find_args(ctx) if find else (0,) * 7,
        serial=bool(ctx.serial) if worlds is not None else False,
        world_args=_world_args(ctx, worlds) if worlds is not None else _team_world_args(ctx),
        contacts=contacts,
        clears_forces=int(clears_forces),
    )
    return args, (find, refresh, report)


def _loop_flags(ctx: "StepContext", by_world, contacts: bool) -> dict:
    """The flags _substeps and _worlds_in_flight compile in for a launch's loops
    (`by_world`: False, A_WORLD_A_THREAD, BY_STAGE or BY_BLOCK), by name."""
    per_world = by_world == A_WORLD_A_THREAD
    return dict(
        # (a team's kernel takes 0, so the option never compiles it again)
        world_block=ctx.options.gpu_world_block if per_world else 0,
        # (a world a thread never takes turns; nor SPIR-V, whose invocations have no
        # promise of progress while another waits)
        turns=bool(ctx.options.colors_by_turns)
        and by_world in (False, BY_STAGE)
        and not gpu_team.on_spirv(),
        # (a team's kernel takes False, and one without contacts begin_by_item)
        interleave=per_world and interleaves(ctx),
        begin_by_item=bool(by_world) and contacts and begins_by_item(ctx),
    )


def _color_args(ctx: "StepContext", mode: int) -> tuple[int, int, int]:
    """_substeps' color_args (_ColorArgs) for a team's launch compiled with the colouring
    (`recolors`). A kept step's launch (KEPT) may reuse last step's colouring
    (step._kept_launch_team asked), and the device sees whether its broad phase's pairs are
    as many as that colouring coloured and whether there are constraints to colour."""
    if mode == FOUND:
        return int(may_reuse_coloring(ctx)), int(colors_in_launch(ctx)), int(keeps_colors(ctx))
    if mode == KEPT:
        return int(may_reuse_coloring(ctx)), 1, int(keeps_colors(ctx))
    return 1, 0, int(keeps_colors(ctx))


def _report_flags(ctx: "StepContext", by_world: bool, mode: int, folded: bool):
    """(_substeps' `refresh`, `report`) for a launch: the reported list refreshed at the
    launch's end where a refresh is due (reporting.refresh_due) for pairs left where the list
    was made from them (those a kept colouring keeps in place, or (SUBSTEPS) where the step
    put them); built there where the refresh did not hold: not where a refresh due now runs
    on its own after the launch (it reads the old list), nor after a state written with a
    sleeper (report_contacts checks the resting pairs again first: resting_recheck; after
    any state written, it holds no pair by the old list: held_entries)."""
    in_place = mode == KEPT or (mode == SUBSTEPS and ctx.cache.pairs_in_place)
    team_tail = not by_world and mode != BEGIN
    refresh = team_tail and ctx.options.refresh_in_launch and refresh_due(ctx, in_place=in_place)
    report = (
        team_tail
        and folded
        and ctx.options.report_in_launch
        and not ctx.cache.resting_recheck
        and (refresh or not refresh_due(ctx, in_place=in_place))
    )
    return refresh, report


def _note_answer(ctx: "StepContext", answer, mode, refit, find, refresh, report):
    """_launch's answer (_substeps'): returns (the colouring check's answer, the refit's
    answer or None, what its broad phase found or None, what a colouring in the launch did
    or None: LaunchColoring, how its wake pass went: WAKE_*), and where the substeps ran notes
    on ctx what the launch did after them: faults, barrier timeouts, the reported list
    refreshed or built, the sleep pass."""
    code = answer[2]
    refitted = None if refit is None else tuple(answer[4:7])
    wake = answer[_WAKE_ENTRY]
    went_on = refitted is None or kept_in_launch(refitted, wake)
    paired = None
    if find and answer[10] != FIND_NONE:
        paired = Paired(*answer[10:14])
        if paired.went_on:  # as found_step_by_team's launch: no refresh, its own report
            went_on, refresh, report = True, False, _reports_found(ctx)
    colored = None
    if answer[17] != COLORED_NONE:
        colored = LaunchColoring(
            keep=keeps_colors(ctx),  # (what the launch was told: the launch changed nothing of it)
            used=answer[15],
            overflow=answer[16],
            went_on=answer[17] == COLORED_WENT_ON,
        )
    solved = code & HOLDS or (colored is not None and colored.went_on)
    if mode == SUBSTEPS or (mode in (KEPT, FOUND) and went_on and solved):
        ctx.faults_found, ctx.barrier_timeouts = answer[0], answer[1]
        if refresh:
            ctx.report_refreshed = bool(answer[3])
        if report and not ctx.report_refreshed:
            ctx.report_built = tuple(answer[7:10])
        if answer[14] == SLEPT_UNCONVERGED:
            raise no_convergence()
        ctx.slept_in_launch = answer[14] == SLEPT
    return code, refitted, paired, colored, wake


@dataclass(frozen=True)
class Paired:
    """What the broad phase in a kept step's launch found (kept_step_by_team): how far the
    launch went (FIND_STOPPED or FIND_WENT_ON) and the grid entries, pairs and lost bodies
    it needed (broad_phase.find_candidate_pairs' answer)."""

    progress: int
    entries: int
    pairs: int
    lost: int

    @property
    def went_on(self) -> bool:
        """Whether the launch went on as found_step_by_team's does (the check's answer is
        then its colouring check's)."""
        return self.progress == FIND_WENT_ON


def folds(ctx: "StepContext", by_world: bool = False) -> bool:
    """Whether the team's kernel is compiled with the stages folded into it from outside the
    substeps (StepOptions.folds_stages): the found step's, the save of last step's pairs,
    the report, the broad phase, the sleep pass. Not for small worlds, which fold their
    own."""
    return not by_world and ctx.options.folds_stages(gpu_team.on_gpu())


def finds_in_launch(ctx: "StepContext") -> bool:
    """Whether a kept step's launch whose refit moved boxes finds the pairs itself and goes
    on as found_step_by_team (StepOptions.broad_phase_in_launch and found_in_one_launch;
    worlds that colour across worlds)."""
    options = ctx.options
    return (
        options.broad_phase_in_launch and options.found_in_one_launch and not colors_by_world(ctx)
    )


def _reports_found(ctx: "StepContext") -> bool:
    """Whether a found step's launch builds the reported list (a found step's pairs are not
    where the list was made from them: no refresh is due, _launch's `report`)."""
    return ctx.options.report_in_launch and not ctx.cache.resting_recheck


def _find_args(ctx: "StepContext") -> tuple[int, ...]:
    """_substeps' find_args (_FindArgs) for ctx's step."""
    pool, n_slots = ctx.pool, ctx.n_slots
    return (
        grid_table_size(pool, n_slots) - 1,
        note_room(ctx, "manifolds"),
        pool.entry_capacity,
        pool.pair_capacity,
        pair_limit(n_slots),
        ctx.cache.colored_pairs,
        int(_reports_found(ctx)),
    )


#: Bits of _substeps' `save`: a kept step's launch whose refit moved boxes saves last step's
#: pairs (pairs.save_previous_pairs'), stored in colour order, with their colours.
SAVE, SAVE_ORDERED, SAVE_COLORED = 1, 2, 4


def _save_flags(ctx: "StepContext") -> int:
    """_substeps' `save` for a kept step's launch: SAVE, and pairs.saved_pairs_args' flags
    (its pair count is the launch's n_pairs, last step's)."""
    _, ordered, colored = saved_pairs_args(ctx)
    return SAVE | (SAVE_ORDERED if ordered else 0) | (SAVE_COLORED if colored else 0)


def saves_in_launch(ctx: "StepContext", refitted) -> bool:
    """Whether a kept step's launch that its refit stopped saved last step's pairs (the
    refit's answer, refit_fat_boxes': boxes were refitted, or with
    StepOptions.wake_in_launch and a broad phase in the launch, finds_in_launch, a body is
    restless beside sleepers: the pairs will be found; a kernel with the folded stages,
    folds). The device's _refit_finds."""
    wakes_after_finding = ctx.options.wake_in_launch and finds_in_launch(ctx)
    return folds(ctx) and (refitted[0] > 0 or (wakes_after_finding and refitted[2] > 0))


def kept_in_launch(refitted, wake: int) -> bool:
    """Whether a kept step's launch with the refit, which answered `refitted` and `wake`
    (WAKE_*), kept last step's pairs and went on: its refit let it (refit_keeps), or
    refitted nothing and found nothing restless, and its wake pass woke none of the
    sleepers it found (the device's _kept_pairs)."""
    return refit_keeps(refitted) or (refitted[0] == 0 and refitted[2] == 0 and wake == WAKE_QUIET)


def refit_keeps(refitted) -> bool:
    """Whether the refit's answer (refit_fat_boxes') let a kept step's launch go on:
    nothing refitted, asleep or restless (_refit_by_team)."""
    return refitted == (0, 0, 0)


@ti.func
def _refit_by_team(
    model: ti.template(),
    bodies: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_worlds,
    n_bodies,
    margin,
    motion_time,
):
    """broad_phase._refit_fat_boxes on a team (not reset): each member clears its share of
    the worlds' sleep marks, refits its share of the slots (broad_phase.refit_slot) and
    counts their restless ones (restless_slot), the team meeting between, the counts
    tallied into counts.tally[5:8] (cleared at the launch's start); where some sleep, also
    the awake slots that move (bodies.moves) into counts.tally[_MOVERS_TALLY] (none: an
    idle step is still, Substep.idle). Returns whether the launch goes on: nothing
    refitted, asleep or restless (refit_keeps)."""
    lo, hi = team.share(0, n_worlds, member, n_members)
    for world in range(lo, hi):
        grid.world_sleeps[world] = 0
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    part = ti.Vector([0, 0])  # (refitted, asleep)
    lo, hi = team.share(0, n_worlds * n_bodies, member, n_members)
    for slot in range(lo, hi):
        part += ti.Vector(refit_slot(model, bodies, grid, slot, n_bodies, margin, motion_time, 0))
    refitted_asleep = _team_tally(counts, _REFIT_TALLY, part, n_members)
    restless = ti.Vector([0])
    # A restless slot is an awake one in a world with a sleeping slot: with none asleep,
    # none (its tally stays 0), and the team need not meet for it (an awake scene's kept
    # step: a barrier fewer). The same sum for every member: the branch is the team's.
    if refitted_asleep[1] > 0:
        movers = 0
        for slot in range(lo, hi):  # after the team met: every world's sleep marked
            restless[0] += restless_slot(model, bodies, grid, slot, n_bodies)
            if moves(model, bodies, slot, slot % n_bodies):
                movers += 1
        # (Both tallied before the team's one meeting: _team_tally's, for the restless.)
        if movers != 0:
            ti.atomic_add(counts.tally[_MOVERS_TALLY], movers)
        restless = _team_tally(counts, _REFIT_TALLY + 2, restless, n_members)
    return refitted_asleep[0] == 0 and refitted_asleep[1] == 0 and restless[0] == 0


@ti.func
def _refit_finds(counts: ti.template(), wake, find):
    """Whether, after the launch's refit (_refit_by_team, its tallies final) stopped a kept
    step, the step finds its pairs (here where `find`, or on the host): boxes were refitted,
    or (`wake` and `find`: the launch wakes sleepers after its broad phase) an awake body
    that can move is restless beside sleepers. saves_in_launch says the same on the host."""
    restless = 0
    if wake == 1 and find == 1:
        restless = counts.tally[_REFIT_TALLY + 2]
    return counts.tally[_REFIT_TALLY] > 0 or restless > 0


@ti.func
def _wake_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    islands: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_slots,
    n_bodies,
    n_pairs,
    n_joints,
    kept: ti.template(),
):
    """The wake pass in a kept step's launch (StepOptions.wake_in_launch), where the refit
    found sleepers: sleep.wake_islands_by_team over the n_pairs pairs, `kept` (last step's,
    kept: only sleepers stopped the refit) or found by the launch's broad phase (last
    step's saved in `previous`), as the host's wake_islands(kept) after the refit or the
    broad phase. Nothing where nothing sleeps (the host asks no wake either). Tallies
    WAKE_QUIET or WAKE_WOKE (and after a broad phase, FIND_STOPPED where bodies woke: the
    host pairs them). Returns the bodies woken, the same for every member."""
    woken = 0
    if counts.tally[_REFIT_TALLY + 1] > 0:  # (the refit's tally, final: _team_tally)
        woken = wake_islands_by_team(
            model,
            bodies,
            joints,
            manifolds,
            previous,
            islands,
            counts,
            member,
            n_members,
            n_slots,
            n_bodies,
            n_pairs,
            n_joints,
            kept,
        )
        if member == 0:
            counts.tally[_WAKE_TALLY] = WAKE_QUIET
            if woken > 0:
                counts.tally[_WAKE_TALLY] = WAKE_WOKE
                if ti.static(not kept):
                    counts.tally[_FIND_TALLY] = FIND_STOPPED
    return woken


@ti.func
def _refit_left_only_sleepers(counts: ti.template()):
    """Whether the launch's refit (_refit_by_team, its tallies final) refitted nothing and
    found no body restless, but some asleep: the host would keep the pairs where
    sleep.wake_islands(kept=True) wakes nothing (step._after_refit)."""
    return (
        counts.tally[_REFIT_TALLY] == 0
        and counts.tally[_REFIT_TALLY + 1] > 0
        and counts.tally[_REFIT_TALLY + 2] == 0
    )


@ti.func
def _refit_left_nothing_asleep(counts: ti.template()):
    """Whether the launch's refit (_refit_by_team, its tallies final) found no body asleep and
    none restless: the broad phase then wakes nothing (sleep.wake_islands)."""
    return counts.tally[_REFIT_TALLY + 1] == 0 and counts.tally[_REFIT_TALLY + 2] == 0


@ti.func
def _carry_by_team(
    manifolds: ti.template(),
    previous: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_pairs,
    n_joints,
):
    """pairs.carry_contacts on a team: each member carries last step's contacts to its share
    of the found pairs (the team meets after, before anything reads them)."""
    if member == 0:
        record_constraint_counts(counts, n_pairs, n_joints)
    lo, hi = team.share(0, n_pairs, member, n_members)
    for k in range(lo, hi):
        carry_pair(manifolds, previous, k)
    team.barrier(counts, n_members, team.SPIN_LIMIT)


@ti.func
def _find_pairs_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    notes: ti.template(),
    member,
    n_members,
    n_worlds,
    n_bodies,
    cell_size,
    margin,
    motion_time,
    find_args,
    recolor,
    n_joint_slots,
):
    """A kept step's launch whose refit moved boxes (nothing asleep): the broad phase on the
    team (team_stages.find_pairs, with the refit's margin and motion time, fat boxes), its
    progress in counts.tally[_FIND_TALLY]. Returns the step's pairs where the launch goes on
    as found_step_by_team does (they fit the pool, are allowed, and are as many as last
    step's colouring coloured, or, where the launch colours them itself (`recolor`:
    colors_in_launch), there are constraints to colour), else -1: the host takes it from
    the broad phase's answer."""
    found = team_stages.find_pairs(
        model,
        bodies,
        joints,
        manifolds,
        grid,
        counts,
        scan,
        notes,
        member,
        n_members,
        n_worlds,
        n_bodies,
        cell_size,
        find_args[_TABLE_MASK],
        margin,
        motion_time,
        find_args[_NOTE_ROOM],
    )
    step_pairs = -1
    if (
        found[0] <= find_args[_ENTRY_CAPACITY]
        and found[1] <= find_args[_PAIR_CAPACITY]
        and found[1] <= find_args[_PAIR_LIMIT]
        and (
            found[1] == find_args[_COLORED_PAIRS] or (recolor == 1 and found[1] + n_joint_slots > 0)
        )
    ):
        step_pairs = found[1]
    if member == 0:
        counts.tally[_FIND_TALLY] = FIND_WENT_ON if step_pairs >= 0 else FIND_STOPPED
    return step_pairs


@ti.func
def _sleep_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    staging: ti.template(),
    islands: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_slots,
    n_bodies,
    n_pairs,
    n_joints,
    dt,
    refreshed,
    report,
):
    """The step's sleep pass at the end of a team's launch (sleep.update_sleep_by_team), where
    the launch listed the reported pairs: `refreshed` the list, or built it (`report`) and it
    fit the pool (reporting.report_counts' test), so that report_contacts builds it no more
    and the report comes before the sleep, as in the step's order; its outcome in
    counts.tally[_SLEEP_TALLY] (SLEPT_*). Last in the team's loop: the loop's end orders
    the settled slots before the launch reads anything (update_sleep_by_team meets at no
    barrier after its last round)."""
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    listed = refreshed
    if not refreshed and report == 1:
        listed = report_fits(staging, n_slots)
    if listed:
        converged = update_sleep_by_team(
            model,
            bodies,
            joints,
            manifolds,
            islands,
            counts,
            member,
            n_members,
            n_slots,
            n_bodies,
            n_pairs,
            n_joints,
            dt,
        )
        if member == 0:
            counts.tally[_SLEEP_TALLY] = SLEPT if converged == 1 else SLEPT_UNCONVERGED


@ti.func
def _team_tally(counts: ti.template(), first: ti.template(), part, n_members):
    """The team's sums of `part` (a member's counts, a vector): each member adds its own into
    counts.tally[first:] (cleared at the launch's start; a member whose count is 0 adds
    nothing: on a grid team most, whose atomics would queue on one address), the team
    meets, and every member reads the same sums after it (plain reads: team.barrier)."""
    for entry in ti.static(range(part.n)):
        if part[entry] != 0:
            ti.atomic_add(counts.tally[first + entry], part[entry])
    team.barrier(counts, n_members, team.SPIN_LIMIT)
    total = part
    for entry in ti.static(range(part.n)):
        total[entry] = counts.tally[first + entry]
    return total


@ti.func
def _refresh_report_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    reported: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_pairs,
    n_reported,
    n_bodies,
):
    """reporting._refresh_report on a team, after the substeps: each member tallies its
    share of the pairs and the list's entries (reporting.refresh_tally) into
    counts.tally[2:5], the team meets, and where the list may be refreshed each member
    copies its share of the entries again. In the substeps' launch, not a launch of its
    own, which wakes the CPU thread pool again (soft step, on and off in turns in one
    process, 2-core CPU: awake large pyramid 4.40 -> 4.22 ms a step, the windows' median
    ratio 0.96; many pyramids 16.3 -> 16.0, 0.98). Returns whether it refreshed the list
    (the same for every member)."""
    part = ti.Vector([0, 0, 0])
    lo, hi = team.share(0, n_pairs + n_reported, member, n_members)
    for e in range(lo, hi):
        part += refresh_tally(model, bodies, joints, manifolds, reported, e, n_pairs, n_bodies)
    held = refresh_holds(_team_tally(counts, _REFRESH_TALLY, part, n_members))
    if held:
        lo, hi = team.share(0, n_reported, member, n_members)
        for i in range(lo, hi):
            copy_listed(reported, manifolds, i)
    return held


@ti.func
def _kept_coloring_holds(
    model: ti.template(),
    bodies: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    member,
    n_members,
    n_pairs,
    n_joints,
    n_slots,
    n_bodies,
):
    """coloring._coloring_holds_in_order on a team: each member checks its share of the
    pairs and body slots, tallies into counts.tally[0:2] (cleared by member 0 at the
    launch's start, several barriers before), the team meets, and every member reads the
    same answer (coloring.holds_code)."""
    if member == 0:
        record_constraint_counts(counts, n_pairs, n_joints)
    part = ti.Vector([0, 0])  # (changed, lowered)
    lo, hi = team.share(0, n_pairs, member, n_members)
    for pair in range(lo, hi):
        if solves_other_pairs(coloring, pair):
            part[0] += 1
    lo, hi = team.share(0, n_slots, member, n_members)
    for slot in range(lo, hi):
        part += ti.Vector(check_slot(model, bodies, coloring, slot, n_bodies))
    total = _team_tally(counts, _HOLDS_TALLY, part, n_members)
    return holds_code(total[0], total[1])


@ti.func
def _found_pairs_in_order(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    staging: ti.template(),
    scan: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    recolors: ti.template(),
    member,
    n_members,
    n_pairs,
    n_slots,
    n_bodies,
    n_joint_slots,
    check,
    color_args,
):
    """found_step_by_team's part between begin_step's stages and the substeps: the check of
    last step's colouring on the found pairs (`check`: where it may be reused;
    team_stages.found_coloring_part, tallied into counts.tally[0:2], which member 0 cleared
    at the launch's start; unchecked, it counts as changed), where it does not hold and
    color_args ask it (`recolors` compiles it in) a new colouring (_color_by_team), and
    where either leaves a colouring without overflow the pairs moved to colour order and
    their per-body lists (team_stages). Returns (HOLDS where the substeps go on, else 0;
    the new colouring's colours used and overflow, or -1 where none was made), the same for
    every member."""
    code = 0
    if check == 1:
        part = team_stages.found_coloring_part(
            model,
            bodies,
            manifolds,
            previous,
            coloring,
            member,
            n_members,
            n_pairs,
            n_slots,
            n_bodies,
        )
        total = _team_tally(counts, _HOLDS_TALLY, part, n_members)
        code = holds_code(total[0], total[1])
    elif member == 0:
        counts.tally[_HOLDS_TALLY] = 1
    colors = ti.Vector([-1, -1])
    if ti.static(recolors):
        if (code & HOLDS) == 0 and color_args[_RECOLOR] == 1:
            colors = _color_by_team(
                model,
                bodies,
                joints,
                manifolds,
                coloring,
                counts,
                scan,
                member,
                n_members,
                n_pairs,
                n_slots,
                n_bodies,
                n_joint_slots,
                color_args[_KEEP_COLORS],
            )
            if colors[1] == 0:
                code = HOLDS
    if (code & HOLDS) != 0:
        team_stages.gather_pairs(manifolds, staging, coloring, counts, member, n_members, n_pairs)
        team_stages.build_body_contacts(
            manifolds, prepared, coloring, scan, counts, member, n_members, n_slots, n_pairs
        )
    return code, colors


@ti.func
def _color_by_team(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    scan: ti.template(),
    member,
    n_members,
    n_pairs,
    n_slots,
    n_bodies,
    n_joint_slots,
    keep,
):
    """coloring._color's colouring of a found step's constraints (large worlds: the pairs the
    solver does not look at take no colour) on the team, as color_constraints(holds=False)
    makes it: its start (coloring.start_coloring_by_team; `keep`: from last step's
    colours), the rounds where something is left uncoloured (coloring.color_rounds_by_team,
    as its own launch runs them on the host's team), the colour lists
    (team_stages.group_by_color) and, where nothing overflowed and there are pairs,
    the plan of their colour order (team_stages.plan_color_order, as
    pairs.store_in_color_order's). Member 0 notes in counts.tally[_COLOR_TALLY:] how it
    went (COLORED_*), the colours used and the overflow, the launch's answer. Returns
    (colours used, overflow), the same for every member."""
    n_constraints = n_pairs + n_joint_slots
    uncolored = start_coloring_by_team(
        model,
        bodies,
        joints,
        manifolds,
        coloring,
        counts,
        member,
        n_members,
        n_slots,
        n_constraints,
        n_bodies,
        keep,
        0,
    )
    if uncolored > 0:
        color_rounds_by_team(
            model,
            bodies,
            joints,
            manifolds,
            coloring,
            counts,
            member,
            n_members,
            uncolored,
            n_bodies,
        )
    colors = team_stages.group_by_color(coloring, counts, scan, member, n_members, n_constraints)
    if member == 0:
        counts.tally[_COLOR_TALLY] = COLORED_WENT_ON if colors[1] == 0 else COLORED_STOPPED
        counts.tally[_COLOR_TALLY + 1] = colors[0]
        counts.tally[_COLOR_TALLY + 2] = colors[1]
    if colors[1] == 0 and n_pairs > 0:
        team_stages.plan_color_order(
            coloring, scan, counts, member, n_members, n_pairs, n_constraints
        )
    return colors


@ti.func
def _next_constraint(
    manifolds: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    by_world: ti.template(),
    world,
    n_joints,
    color,
    cursor,
    contacts: ti.template(),
):
    """The next constraint of colour `color` for a team member and its cursor after it (-1:
    none left). cursor = (next pair, next joint (by world) or the stride through the list
    (on a team: 0 as 1), end of the member's pairs).

    By world: the world's pairs in its solve order (pair_origin over the world's range:
    colour after colour, so a colour's are consecutive there), then its joint slots of
    that colour. On a team: the member's share of the colour's list (cursor[0] to
    cursor[2]). Without `contacts` (by world): the world's joint slots in order, every one
    of colour 0 (a step without contacts colours nothing: its worlds take one colour)."""
    constraint = -1
    if ti.static(not contacts):
        if cursor[1] < n_joints:
            constraint = world * n_joints + cursor[1]
            cursor[1] += 1
    elif ti.static(by_world):
        pair = -1
        if cursor[0] < cursor[2]:
            pair = coloring.pair_origin[cursor[0]]
        if pair >= 0 and coloring.color[pair] == color:
            constraint = pair
            cursor[0] += 1
        else:
            first_joint = counts.n_pairs[None] + world * n_joints
            while cursor[1] < n_joints and coloring.color[first_joint + cursor[1]] != color:
                cursor[1] += 1
            if cursor[1] < n_joints:
                constraint = first_joint + cursor[1]
                cursor[1] += 1
    else:
        if cursor[0] < cursor[2]:
            constraint = coloring.color_list[cursor[0]]
            cursor[0] += ti.max(cursor[1], 1)  # (a pass by turns strides the members)
    return constraint, cursor


@ti.func
def _member_share(
    coloring: ti.template(),
    with_joints: ti.template(),
    color,
    n_colors,
    immovable,
    first_overflow,
    overflow_pairs,
    overflow_end,
    member,
    n_members,
):
    """A team member's cursor (see _next_constraint) over round `color` of a colour pass:
    its share of colour `color`'s list (of a small colour, team.small_color, a share among
    the small team's members, none for the others); after the colours, its share of the
    overflow's pairs, then (a pass that solves joints) the overflow's joints, in order, on
    member 0; nothing in the immovable sweep's overflow rounds."""
    lo, hi = 0, 0
    if color < n_colors:
        begin, end = coloring.color_start[color], coloring.color_start[color + 1]
        if team.small_color(end - begin, n_members):
            members = team.small_team(n_members)
            if member < members:
                lo, hi = team.share(begin, end, member, members)
        else:
            lo, hi = team.share(begin, end, member, n_members)
    elif immovable:
        pass
    elif color == n_colors:  # the overflow's pairs
        lo, hi = team.share(first_overflow, first_overflow + overflow_pairs, member, n_members)
    elif ti.static(with_joints) and member == 0:  # its joints, in order, on one
        lo, hi = first_overflow + overflow_pairs, overflow_end
    return ti.Vector([lo, 0, hi])


@ti.func
def _in_small_run(coloring: ti.template(), color, n_colors, n_members, by_world: ti.template()):
    """Whether colour `color` of a pass and the next are both small (team.small_color): the
    small team goes on to the next at its own barrier (team.small_barrier), not the whole
    team's. Never by world (a member is a world, which meets nobody)."""
    run = False
    if ti.static(not by_world):
        if 0 <= color and color + 1 < n_colors:
            first = coloring.color_start[color]
            second = coloring.color_start[color + 1]
            end = coloring.color_start[color + 2]
            run = team.small_color(second - first, n_members) and team.small_color(
                end - second, n_members
            )
    return run


@ti.func
def _member_pass(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    constraint_of: ti.template(),
    position: ti.template(),
    with_joints: ti.template(),
    member,
    n_members,
    by_world: ti.template(),
    n_bodies,
    n_joints,
    n_colors,
    overflow,
    h,
    sweeps,
    uneven,
    contacts: ti.template(),
    turns: ti.template(),
    chain,
    joints_by_world: ti.template(),
    n_worlds,
):
    """A colour pass over a member's constraints, colour after colour (see
    _next_constraint), the team waiting for each colour to end before the next; on a team,
    then the overflow colour as solver/overflow.py solves it (the same steps in the same
    order): its pairs at once (Jacobi, a share each), the team waits, each body's mean
    applied (a share each; `position`: as moves, else as velocities), and where the pass
    solves joints (`with_joints`) its joints, in order, on member 0 (a hub's surplus:
    few). `overflow`: the colouring has an overflow colour (its ranges in coloring are this
    step's only then). Worlds solved one per thread have none
    (StepContext.solves_by_world). `sweeps`: how many times over the colours; after the
    first, the joints alone (joints.JOINT_SWEEPS): pairs are skipped, and the overflow's
    pairs' means are not applied again. `uneven` (the velocity pass of a scene of uneven
    masses, StepContext.immovable_sweep): a last sweep over the contacts with an immovable
    body, the overflow's excepted. Without `contacts` (by world, a step without contacts):
    the joints alone, `constraint_of` a joint slot's (stages.CONTACTLESS_STAGES).

    `turns` (StepOptions.colors_by_turns, a team's): the first sweep's colours in one round
    (colour -1 here) without the team's barriers between them: the members go through the
    colours' list strided (member, member + n_members, ...: colour order), and each
    constraint waits for its bodies' constraints of lower colours (coloring.take_turns);
    the team meets once after the round, but in a chain (StepOptions.stages_by_turns;
    `chain`: take_turns', (substep, pass, last); substep -1 outside one) where the pass is
    not its last.

    `joints_by_world` (a team's small worlds' substeps by stage, BY_STAGE: n_worlds
    worlds): a later sweep over the joints alone takes the worlds a share each, each
    world's joints in colour order (_world_joints), and the team meets once after it, not
    once a colour: the same solves in the same order on each body (a world's joints are
    the only ones at its bodies)."""
    n_rounds = n_colors
    groups = ti.static((model, bodies, joints, manifolds, coloring, counts))  # (take_turns')
    first_overflow, overflow_pairs, overflow_end = 0, 0, 0
    if ti.static(not by_world) and overflow == 1:
        first_overflow = coloring.color_start[MAX_COLORS]
        overflow_pairs = coloring.n_overflow_pairs[None]
        overflow_end = coloring.color_start[MAX_COLORS + 1]
        n_rounds = n_colors + 2  # the overflow's pairs, then its joints
    immovable_sweep = uneven
    for sweep in range(sweeps + immovable_sweep):
        # sweep 0: everything; then the joints alone; the last (`uneven`): the
        # contacts with an immovable body, the overflow's excepted.
        immovable = immovable_sweep == 1 and sweep == sweeps
        joints_alone = sweep > 0 and not immovable
        if ti.static(joints_by_world):
            if joints_alone:
                lo, hi = team.share(0, n_worlds, member, n_members)
                for world in range(lo, hi):
                    _world_joints(
                        model,
                        bodies,
                        joints,
                        manifolds,
                        prepared,
                        coloring,
                        counts,
                        constraint_of,
                        world,
                        n_bodies,
                        n_joints,
                        n_colors,
                        h,
                    )
                team.barrier(counts, n_members, team.SPIN_LIMIT)
                continue
        by_turns = False
        if ti.static(turns and not by_world):
            by_turns = sweep == 0 and n_colors > 0
        # Rounds: the colours, then the overflow's (n_rounds); by turns, the colours' one
        # round (-1), then the overflow's.
        first_round, n_iterations = 0, n_rounds
        if by_turns:
            first_round, n_iterations = n_colors - 1, n_rounds - n_colors + 1
        cursor = ti.Vector([0, 0, 0])
        if ti.static(by_world and contacts):
            cursor = ti.Vector(
                [
                    manifolds.pair_start[member * n_bodies],
                    0,
                    manifolds.pair_start[(member + 1) * n_bodies],
                ]
            )
            if joints_alone:
                cursor[0] = cursor[2]  # the world's joints alone
        for iteration in range(n_iterations):
            color = first_round + iteration
            if by_turns and iteration == 0:
                color = -1
            # A world's joints are searched from the first for every colour (none in the
            # immovable sweep).
            cursor[1] = n_joints if immovable else 0
            if color < 0:
                end = coloring.color_start[n_colors]
                cursor = ti.Vector([member, n_members, end])
            elif ti.static(not by_world):
                cursor = _member_share(
                    coloring,
                    with_joints,
                    color,
                    n_colors,
                    immovable,
                    first_overflow,
                    overflow_pairs,
                    overflow_end,
                    member,
                    n_members,
                )
            # One call of constraint_of: each call site inlines the whole constraint solve,
            # and this kernel's compile time grows with them.
            while True:
                jacobi_entry = -1
                if ti.static(not by_world):
                    if color == n_colors:  # overflow pair i writes entries 2i and 2i + 1
                        jacobi_entry = 2 * (cursor[0] - first_overflow)
                k, cursor = _next_constraint(
                    manifolds, coloring, counts, by_world, member, n_joints, color, cursor, contacts
                )
                if k < 0:
                    break
                is_pair = False
                if ti.static(contacts):
                    is_pair = k < counts.n_pairs[None]
                solves = sweep == 0 or (joints_alone and not is_pair)
                if ti.static(contacts):
                    if immovable and is_pair:
                        jacobi_entry = REPEAT_SOLVE
                        if swept_again(model, manifolds, prepared, k, n_bodies):
                            solves = True
                if ti.static(turns and not by_world):
                    if color < 0:
                        take_turns(*groups, k, n_bodies, chain, False)
                if solves:
                    if jacobi_entry >= 0:
                        clear_entries(prepared, jacobi_entry)
                    constraint_of(
                        model,
                        bodies,
                        joints,
                        manifolds,
                        prepared,
                        counts,
                        k,
                        n_bodies,
                        h,
                        jacobi_entry,
                    )
                if ti.static(turns and not by_world):
                    if color < 0:
                        take_turns(*groups, k, n_bodies, chain, True)
            if chain[0] < 0 or chain[2] == 1:
                team.meet(
                    counts,
                    member,
                    n_members,
                    _in_small_run(coloring, color, n_colors, n_members, by_world),
                )
            if ti.static(not by_world):
                if color == n_colors and sweep == 0:
                    lo, hi = team.share(0, coloring.n_jacobi_bodies[None], member, n_members)
                    for i in range(lo, hi):
                        apply_mean_delta(
                            bodies, prepared, coloring, coloring.jacobi_bodies[i], position
                        )
                    team.barrier(counts, n_members, team.SPIN_LIMIT)


@ti.func
def block_worlds(member, block_size, n_members, n_worlds):
    """(lane, first world, end world) of loop item `member` of a BY_BLOCK launch of
    n_members items: its block's worlds, n_worlds spread evenly over the n_members //
    block_size blocks (the last ones may have none, and still meet at each barrier)."""
    n_blocks = n_members // block_size
    per_block = (n_worlds + n_blocks - 1) // n_blocks
    first = ti.min(member // block_size * per_block, n_worlds)
    return ti.Vector([member % block_size, first, ti.min(first + per_block, n_worlds)])


@ti.func
def _block_pass(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    constraint_of: ti.template(),
    block,
    block_size,
    pair_range,
    n_bodies,
    n_joints,
    n_colors,
    h,
    sweeps,
    uneven,
):
    """A colour pass of a block of worlds (BY_BLOCK; `block`: block_worlds' lane, first and
    end world; `pair_range`: their pairs, which lie world after world): colour after colour,
    the block's threads take its pairs and then its joint slots in turn (lane, lane +
    block_size, ...) and solve those of the colour, then meet at the block's barrier. A
    colour's constraints share no moving body, so this solves what a world a thread solves
    in the same colour order (_member_pass by world): the same results. `sweeps`: the
    first over everything, later ones (XPBD's joints.JOINT_SWEEPS) over the joints alone;
    `uneven`: a last sweep over the contacts, each solved again where it meets an immovable
    body (contacts.swept_again)."""
    n_pairs = pair_range[1] - pair_range[0]
    first_joint = counts.n_pairs[None] + block[1] * n_joints
    n_items = n_pairs + (block[2] - block[1]) * n_joints
    for sweep in range(sweeps + uneven):
        immovable = uneven == 1 and sweep == sweeps
        first, end = 0, n_items
        if sweep > 0 and not immovable:
            first = n_pairs  # the joints alone
        if immovable:
            end = n_pairs  # the contacts alone
        for color in range(n_colors):
            item = first + block[0]
            while item < end:
                constraint = first_joint + item - n_pairs
                if item < n_pairs:
                    constraint = pair_range[0] + item
                if coloring.color[constraint] == color:
                    solves, entry = not immovable, -1
                    if immovable:
                        entry = REPEAT_SOLVE
                        if swept_again(model, manifolds, prepared, constraint, n_bodies):
                            solves = True
                    if solves:
                        constraint_of(
                            model,
                            bodies,
                            joints,
                            manifolds,
                            prepared,
                            counts,
                            constraint,
                            n_bodies,
                            h,
                            entry,
                        )
                item += block_size
            team.barrier(counts, block_size, team.SPIN_LIMIT)


@ti.func
def _world_joints(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    constraint_of: ti.template(),
    world,
    n_bodies,
    n_joints,
    n_colors,
    h,
):
    """A world's joint slots solved by constraint_of colour after colour, as a world a
    thread's later sweep over the joints alone takes them (_next_constraint by world, its
    cursor past the world's pairs)."""
    for color in range(n_colors):
        cursor = ti.Vector([0, 0, 0])  # (no pairs: the joints alone)
        while True:
            k, cursor = _next_constraint(
                manifolds, coloring, counts, True, world, n_joints, color, cursor, True
            )
            if k < 0:
                break
            constraint_of(model, bodies, joints, manifolds, prepared, counts, k, n_bodies, h, -1)


@ti.func
def _member_items(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    stage: ti.template(),
    s: ti.template(),
    team_size,
    joint_range,
    body_range,
    pair_range,
    pair_blocks,
    role: ti.template(),
):
    """An item stage over a member's items (joint_range, body_range: first, end and step,
    team.slots_of; pairs: in
    blocks dealt round the team, team.dealt_blocks: in colour order the pairs without
    points, cheap here, lie at the end), then the team's barrier (_meets_after); twice for
    bullets where the stage sweeps them (the team waiting in between). One call of
    stage.run (compile time: a call site inlines the stage). In a chained launch
    (s.chained; StepOptions.stages_by_turns) the team does not meet: a body stage of
    `role` (stages.ChainRole) waits for each body's turn where its group
    starts and passes it on where the group ends (coloring.wait_for_stages,
    stages_taken)."""
    if runs(stage.when, s) == 1:
        n_rounds = 1
        if ti.static(stage.sweeps_bullets):
            n_rounds += s.bullets
        for round in range(n_rounds):
            if ti.static(stage.domain == JOINT_SLOTS):
                joint_slot = joint_range[0]
                while joint_slot < joint_range[1]:
                    stage.run(
                        model,
                        bodies,
                        joints,
                        manifolds,
                        prepared,
                        coloring,
                        counts,
                        joint_slot,
                        s,
                        round,
                    )
                    joint_slot += joint_range[2]
            elif ti.static(stage.domain == BODY_SLOTS):
                slot = body_range[0]
                while slot < body_range[1]:
                    if ti.static(role.waits):
                        if s.chained == 1 and _waits_here(role, s.substep) == 1:
                            wait_for_stages(
                                model,
                                bodies,
                                coloring,
                                counts,
                                slot,
                                s.n_bodies,
                                s.substep,
                                role.group,
                            )
                    stage.run(
                        model, bodies, joints, manifolds, prepared, coloring, counts, slot, s, round
                    )
                    if ti.static(role.passes):
                        if s.chained == 1:
                            stages_taken(model, bodies, coloring, slot, s.n_bodies)
                    slot += body_range[2]
            else:
                ti.static_assert(stage.domain == PAIRS)
                block, size = pair_blocks[0], team.pair_block()
                while block < pair_blocks[1]:
                    lo = pair_range[0] + block * size
                    for pair in range(lo, ti.min(lo + size, pair_range[1])):
                        stage.run(
                            model,
                            bodies,
                            joints,
                            manifolds,
                            prepared,
                            coloring,
                            counts,
                            pair,
                            s,
                            round,
                        )
                    block += team_size
            if s.chained == 0 and _meets_after(stage, s):
                team.barrier(counts, team_size, team.SPIN_LIMIT)


@ti.func
def _chain_starts(s: ti.template(), n_colors, overflow):
    """1 where a chained launch (StepOptions.stages_by_turns, _chains) takes its substeps'
    stages by turns from substep 0's narrow phase on, read after the team met there: its
    colour passes by turns (colours, no overflow colour, whose Jacobi rounds meet) and no
    fast pair (whose narrow phase reads both bodies every substep); else 0."""
    starts = 0
    if n_colors > 0 and overflow == 0 and s.fast == 0:
        starts = 1
    return starts


@ti.func
def _waits_here(role: ti.template(), substep):
    """1 where a body stage of ChainRole `role` starts its group in a chained substep
    (substep 0's chain starts after its narrow phase), else 0."""
    waits = 0
    if ti.static(role.waits_first):
        if substep == 0:
            waits = 1
    if ti.static(role.waits_later):
        if substep > 0:
            waits = 1
    return waits


@ti.func
def _pass_runs(
    stage: ti.template(), s: ti.template(), counts: ti.template(), by_block: ti.template()
):
    """1 where a colour pass runs in this substep (stages.runs) and may change anything:
    every pass but the soft step's restitution (its last substep's), which bounces only
    points whose approach its narrow phase noted (stages.bounce_possible, read only where
    the pass would run: once a step): a step where none may bounce, a resting pile's,
    skips its colours and the team's barrier after each (a grid team's microseconds each
    on a GPU). Its pairs would write back the velocities they read, so the step is the
    same bit for bit. The launch clears the note before its substeps, whose substep 0
    prepares every pair (a launch of begin_step's stages finds manifolds, it prepares
    none). Else 0. A block of BY_BLOCK (`by_block`) runs it wherever it may run: the note
    is every block's, and its threads must agree (they meet inside the pass)."""
    go = runs(stage.when, s)
    if ti.static(stage.bounces_only and not by_block):
        if go == 1:  # (nested: Taichi's `and` evaluates both sides)
            if not bounce_possible(counts):
                go = 0
    return go


@ti.func
def _meets_after(stage: ti.template(), s: ti.template()):
    """Whether the team meets at its barrier after an item stage: always, but after a stage
    over joint slots (the motors) in a scene without joints in a substep after the first:
    it wrote nothing, and the colour pass before it (the last substep's) ended at the
    team's barrier, which orders everything before it against everything after; and after
    a stage that touches only its own bodies in a substep after the first of a step
    without fast pairs (Stage.own_bodies_after_first: integrate velocities, then a narrow
    phase with nothing to do, before the warm start or XPBD's integrate positions, which
    read only their own bodies); and after every item stage of a substep before the last
    in an idle step (Substep.idle: no pair, no joint slot), whose stages touch only the
    member's own slots, so that only the last substep's barriers order them against what
    comes after (the report, the sleep pass; an asleep pyramid of 210 boxes with a ball
    drifting beside it: 67 barriers a step to 57 with the soft step, 77 to 56 with XPBD);
    and after any item stage of a still step (Substep.idle STILL), whose begin_step stages
    and one substep write, of bodies that do not move, only what no stage of the step
    reads (stages.STILL; the asleep pyramid alone: 20 barriers a step to 14 with both
    solvers). Barriers saved a substep: on a GPU's grid team microseconds each."""
    meets = 1
    if ti.static(stage.domain == JOINT_SLOTS):
        if s.jointed == 0 and s.substep > 0:
            meets = 0
    elif ti.static(stage.own_bodies_after_first):
        if s.substep > 0 and s.before_coloring == 0 and s.fast == 0:
            meets = 0
    if s.idle == IDLE and s.before_coloring == 0 and s.substep < s.substeps - 1:
        meets = 0
    if s.idle == STILL:
        meets = 0
    return meets == 1


@ti.func
def _nothing_moves(
    model: ti.template(),
    bodies: ti.template(),
    counts: ti.template(),
    refit,
    body_range,
    n_bodies,
    n_members,
):
    """Whether no body slot moves (bodies.moves), the same answer for every member: where
    the launch's refit ran (`refit` 1), as it tallied (_MOVERS_TALLY, counted where
    something sleeps: else it does not say); else each member counts its slots (body_range:
    team.slots_of's first, end and step), and the team meets once (the tallies were
    cleared at the launch's start)."""
    still = False
    if refit == 1:
        still = counts.tally[_REFIT_TALLY + 1] > 0 and counts.tally[_MOVERS_TALLY] == 0
    else:
        movers = ti.Vector([0])
        slot = body_range[0]
        while slot < body_range[1]:
            if moves(model, bodies, slot, slot % n_bodies):
                movers[0] += 1
            slot += body_range[2]
        still = _team_tally(counts, _MOVERS_TALLY, movers, n_members)[0] == 0
    return still


@quick
@ti.kernel
def _substeps(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    staging: ti.template(),
    scan: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    faults: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    islands: ti.template(),
    grid: ti.template(),
    solver: ti.template(),
    n_members: ti.i32,
    by_world: ti.template(),
    world_block: ti.template(),
    turns: ti.template(),
    interleave: ti.template(),
    begin_by_item: ti.template(),
    world_stride: ti.i32,
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_joints: ti.i32,
    n_pairs: ti.i32,
    n_colors: ti.i32,
    overflow: ti.i32,
    substeps: ti.i32,
    h: ti.f32,
    dt: ti.f32,
    mode: ti.i32,
    begun: ti.i32,
    bullets: ti.i32,
    uneven: ti.i32,
    chained: ti.i32,
    refresh: ti.i32,
    report: ti.i32,
    n_reported: ti.i32,
    refit: ti.i32,
    save: ti.i32,
    margin: ti.f32,
    motion_time: ti.f32,
    folded: ti.template(),
    recolors: ti.template(),
    color_args: _ColorArgs,
    find: ti.i32,
    sleep: ti.i32,
    wake: ti.i32,
    cell_size: ti.f32,
    find_args: _FindArgs,
    serial: ti.template(),
    world_args: _WorldArgs,
    contacts: ti.template(),
    clears_forces: ti.i32,
) -> _Answer:
    """The step's substeps, one launch, whose answer the host reads (_launch_body, not in
    flight)."""
    return _launch_body(
        model,
        bodies,
        joints,
        manifolds,
        previous,
        staging,
        scan,
        prepared,
        coloring,
        counts,
        faults,
        reported,
        events,
        islands,
        grid,
        solver,
        n_members,
        by_world,
        world_block,
        turns,
        interleave,
        begin_by_item,
        world_stride,
        n_worlds,
        n_bodies,
        n_joints,
        n_pairs,
        n_colors,
        overflow,
        substeps,
        h,
        dt,
        mode,
        begun,
        bullets,
        uneven,
        chained,
        refresh,
        report,
        n_reported,
        refit,
        save,
        margin,
        motion_time,
        folded,
        recolors,
        color_args,
        find,
        sleep,
        wake,
        cell_size,
        find_args,
        serial,
        world_args,
        contacts,
        clears_forces,
        False,
        0,
        0,
    )


@quick
@ti.kernel
def _worlds_in_flight(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    grid: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    staging: ti.template(),
    scan: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    faults: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    islands: ti.template(),
    solver: ti.template(),
    by_world: ti.template(),
    n_members: ti.i32,
    world_block: ti.template(),
    turns: ti.template(),
    interleave: ti.template(),
    begin_by_item: ti.template(),
    world_stride: ti.i32,
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_joints: ti.i32,
    n_pairs: ti.i32,
    substeps: ti.i32,
    h: ti.f32,
    dt: ti.f32,
    begun: ti.i32,
    bullets: ti.i32,
    uneven: ti.i32,
    chained: ti.i32,
    n_reported: ti.i32,
    save: ti.i32,
    margin: ti.f32,
    motion_time: ti.f32,
    sleep: ti.i32,
    cell_size: ti.f32,
    serial: ti.template(),
    world_args: _WorldArgs,
    slot: ti.i32,
    late: ti.i32,
    contacts: ti.template(),
    n_colors: ti.i32,
):
    """A small worlds' step in flight (step_by_world_in_flight): _substeps' launch of the
    whole step (by world, folded, with the report), which returns nothing: its answer is
    held in counts.answers[slot], and where the step stopped short counts.stopped makes the
    launches after it do nothing (_hold_answer). `late`: the slot + 1 of last step's answer,
    if that step was in flight too (its pairs and reported list are read from there, not
    from n_pairs and n_reported), else 0. Without `contacts`: a step without contacts in
    flight (substeps_in_flight: _substeps' launch of substeps_by_world(contacts=False),
    its joints in n_colors colours)."""
    _launch_body(
        model,
        bodies,
        joints,
        manifolds,
        previous,
        staging,
        scan,
        prepared,
        coloring,
        counts,
        faults,
        reported,
        events,
        islands,
        grid,
        solver,
        n_members=n_members,
        by_world=by_world,
        world_block=world_block,
        turns=turns,
        interleave=interleave,
        begin_by_item=begin_by_item,
        world_stride=world_stride,
        n_worlds=n_worlds,
        n_bodies=n_bodies,
        n_joints=n_joints,
        n_pairs=n_pairs,
        n_colors=n_colors,
        overflow=0,  # (a step in flight follows one without overflow: in_flight.flies)
        substeps=substeps,
        h=h,
        dt=dt,
        mode=SUBSTEPS,
        begun=begun,
        bullets=bullets,
        uneven=uneven,
        chained=chained,
        refresh=0,
        report=1,
        n_reported=n_reported,
        refit=0,
        save=save,
        margin=margin,
        motion_time=motion_time,
        folded=contacts,
        recolors=False,
        color_args=_ColorArgs(1, 0, 0),
        find=0,
        sleep=sleep,
        wake=0,
        cell_size=cell_size,
        find_args=_FindArgs(0, 0, 0, 0, 0, 0, 0),
        serial=serial,
        world_args=world_args,
        contacts=contacts,
        clears_forces=0,
        in_flight=True,
        answer_slot=slot,
        late=late,
    )


@quick
@ti.kernel
def _team_in_flight(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    staging: ti.template(),
    scan: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    faults: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    islands: ti.template(),
    grid: ti.template(),
    solver: ti.template(),
    n_members: ti.i32,
    by_world: ti.template(),
    world_block: ti.template(),
    turns: ti.template(),
    interleave: ti.template(),
    begin_by_item: ti.template(),
    world_stride: ti.i32,
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_joints: ti.i32,
    n_pairs: ti.i32,
    n_colors: ti.i32,
    overflow: ti.i32,
    substeps: ti.i32,
    h: ti.f32,
    dt: ti.f32,
    mode: ti.i32,
    begun: ti.i32,
    bullets: ti.i32,
    uneven: ti.i32,
    chained: ti.i32,
    refresh: ti.i32,
    report: ti.i32,
    n_reported: ti.i32,
    refit: ti.i32,
    save: ti.i32,
    margin: ti.f32,
    motion_time: ti.f32,
    folded: ti.template(),
    recolors: ti.template(),
    color_args: _ColorArgs,
    find: ti.i32,
    sleep: ti.i32,
    wake: ti.i32,
    cell_size: ti.f32,
    find_args: _FindArgs,
    serial: ti.template(),
    world_args: _WorldArgs,
    contacts: ti.template(),
    clears_forces: ti.i32,
    slot: ti.i32,
    late: ti.i32,
    cache_in: _FlightCache,
    may_refresh: ti.i32,
    reports: ti.i32,
    keep_fresh: ti.i32,
):
    """A team's kept step in flight (kept_step_in_flight): _substeps' launch of a kept step
    (KEPT, with the refit, the broad phase and the colouring folded in), which returns
    nothing. Its StepCache-dependent arguments (n_pairs, n_colors, overflow, refresh,
    report, n_reported, save, color_args, find_args' coloured pairs and report flag) are
    not the host's: the launch takes them from the StepCache the step before it left
    (counts.flight_caches[late - 1]; `cache_in`, the host's, where `late` is 0: a
    flight's first step) as the host would (_flight_launch, with the scene's options
    `may_refresh`: StepOptions.refresh_report; `reports`: report_in_launch; `keep_fresh`:
    keep_fresh_coloring). Its answer is held in counts.answers[slot] and the StepCache it
    leaves, as the host would note the step (_cache_after), in counts.flight_caches[slot],
    with whether it went as the host takes a step in flight to go (_went_as_taken); where
    not, counts.stopped makes the launches after it do nothing."""
    before = cache_in
    if late > 0:
        before = counts.flight_caches[late - 1]
    took = _flight_launch(before, may_refresh, reports, keep_fresh)
    found_args = find_args
    found_args[_COLORED_PAIRS] = before[_C_COLORED]
    found_args[_REPORT_FOUND] = took[_T_REPORT]
    # (A flight's steps follow no state written by hand: in_flight._team_step_flies.)
    held_args = world_args
    held_args[_N_HELD] = before[_C_REPORTED]
    if late > 0 and counts.stopped[None] == 0:
        if took[_T_MAY_REUSE] == 0 and before[_C_PAIRS] + n_worlds * n_joints == 0:
            # Nothing to colour and no colouring to reuse: the host takes no kept launch
            # (step._kept_launch_team, fused.colors_in_launch), so this one runs nothing.
            counts.flight_caches[slot][_C_TAKEN] = NOT_RUN
            counts.stopped[None] = 1
    answer = _launch_body(
        model=model,
        bodies=bodies,
        joints=joints,
        manifolds=manifolds,
        previous=previous,
        staging=staging,
        scan=scan,
        prepared=prepared,
        coloring=coloring,
        counts=counts,
        faults=faults,
        reported=reported,
        events=events,
        islands=islands,
        grid=grid,
        solver=solver,
        n_members=n_members,
        by_world=by_world,
        world_block=world_block,
        turns=turns,
        interleave=interleave,
        begin_by_item=begin_by_item,
        world_stride=world_stride,
        n_worlds=n_worlds,
        n_bodies=n_bodies,
        n_joints=n_joints,
        n_pairs=before[_C_PAIRS],
        n_colors=before[_C_COLORS],
        overflow=1 if before[_C_OVERFLOW] > 0 else 0,
        substeps=substeps,
        h=h,
        dt=dt,
        mode=mode,
        begun=begun,
        bullets=bullets,
        uneven=uneven,
        chained=chained,
        refresh=took[_T_REFRESH],
        report=took[_T_REPORT],
        n_reported=before[_C_REPORTED],
        refit=refit,
        save=took[_T_SAVE],
        margin=margin,
        motion_time=motion_time,
        folded=folded,
        recolors=recolors,
        color_args=_ColorArgs(took[_T_MAY_REUSE], 1, took[_T_KEEP]),
        find=find,
        sleep=sleep,
        wake=wake,
        cell_size=cell_size,
        find_args=found_args,
        serial=serial,
        world_args=held_args,
        contacts=contacts,
        clears_forces=clears_forces,
        in_flight=True,
        answer_slot=slot,
        late=0,
    )
    if counts.stopped[None] == 0:  # (the launch ran: _launch_body cleared it for slot 0)
        counts.answers[slot] = answer
        after = _cache_after(before, answer, took[_T_REFRESH], took[_T_KEEP], may_refresh)
        after[_C_TAKEN] = _went_as_taken(
            answer, took[_T_REFRESH], took[_T_REPORT], sleep, find_args[_PAIR_CAPACITY]
        )
        counts.flight_caches[slot] = after
        if after[_C_TAKEN] == 0:
            counts.stopped[None] = 1


#: What _flight_launch takes from a StepCache for a team's kept step: whether the launch
#: refreshes the reported list (reporting.refresh_due), whether it builds it
#: (_report_flags), its save flags (_save_flags), and color_args' may-reuse and keep
#: flags (coloring.may_reuse_coloring, keeps_colors).
_T_REFRESH, _T_REPORT, _T_SAVE, _T_MAY_REUSE, _T_KEEP = range(5)


@ti.func
def _flight_launch(cache, may_refresh, reports, keep_fresh):
    """The arguments the host gives a team's kept step (_launch_args for kept_step_by_team
    with StepOptions.refresh_in_launch) that depend on the StepCache `cache` (a
    _FlightCache): see _T_REFRESH."""
    state_set = cache[_C_STATE_SET]
    refresh = 0
    if may_refresh == 1 and cache[_C_MAPPED] == 1 and state_set == 0 and cache[_C_SKIPS] == 0:
        refresh = 1
    report = 1 if reports == 1 and state_set == 0 else 0
    save = SAVE + SAVE_ORDERED * cache[_C_ORDERED] + SAVE_COLORED * cache[_C_VALID]
    keep = 0
    if cache[_C_VALID] == 1 and cache[_C_SINCE_FRESH] < FRESH_COLORING_STEPS:
        keep = 1
    may_reuse = 0
    if (
        cache[_C_VALID] == 1
        and (keep == 1 or (keep_fresh == 1 and cache[_C_FRESH] == 1))
        and cache[_C_PAIRS] == cache[_C_COLORED]
        and cache[_C_OVERFLOW] == 0
    ):
        may_reuse = 1
    return ti.Vector([refresh, report, save, may_reuse, keep])


@ti.func
def _kept_pairs(answer) -> ti.i32:
    """Whether a kept step's launch kept last step's pairs: its refit refitted nothing and
    found nothing restless, and nothing asleep (refit_keeps) or its wake pass woke nothing
    (WAKE_QUIET)."""
    kept = 0
    if answer[_REFIT_ENTRY] == 0 and answer[_REFIT_ENTRY + 2] == 0:
        if answer[_REFIT_ENTRY + 1] == 0 or answer[_WAKE_ENTRY] == WAKE_QUIET:
            kept = 1
    return kept


@ti.func
def _went_as_taken(answer, refresh, report, sleep, capacity) -> ti.i32:
    """Whether a team's kept step in flight went as the host takes it to go, with no launch
    of its own after it (what step._after_kept_launch and step._after_pairs then do is
    _cache_after's): no fault nor barrier timeout; its pairs kept and last step's colouring
    held, or found, within the pool, and coloured or still coloured by last step's
    colouring, without overflow; the reported list refreshed or built within the pool's
    `capacity` pairs; with `sleep`, the sleep pass run and converged."""
    code = answer[2]
    solved = 0
    if _kept_pairs(answer) == 1:
        if (code & HOLDS) != 0:
            solved = 1
    elif answer[_FIND_ENTRY] == FIND_WENT_ON:
        if answer[_COLORED_ENTRY] == COLORED_WENT_ON:
            solved = 1
        elif answer[_COLORED_ENTRY] == COLORED_NONE and (code & HOLDS) != 0:
            solved = 1
    listed = 0
    if refresh == 1 and _kept_pairs(answer) == 1 and answer[_REFRESHED_ENTRY] == 1:
        listed = 1
    elif report == 1 and answer[_LISTED_ENTRY] <= capacity:
        listed = 1
    slept = 1 if sleep == 0 or answer[_SLEEP_ENTRY] == SLEPT else 0
    taken = 0
    if answer[0] == 0 and answer[1] == 0 and solved == 1 and listed == 1 and slept == 1:
        taken = 1
    return taken


@ti.func
def _cache_after(cache, answer, refresh, keep, may_refresh):
    """The StepCache `cache` (a _FlightCache) as the host notes a team's kept step that went
    as taken (_went_as_taken) and answered `answer`, told `refresh` and `keep`
    (_flight_launch; `may_refresh`: StepOptions.refresh_report): pairs.count_kept_pairs
    or broad_phase.pairs_fit, coloring.verdict_holds, color_constraints(holds=True) or
    colored_in_launch, pairs.store_in_color_order, step._after_pairs' pairs_in_place,
    reporting.report_contacts (refreshed, refresh_report's skip, note_report)."""
    after = cache
    kept = _kept_pairs(answer)
    if kept == 1:
        after[_C_REUSES] += 1
    else:  # the launch's broad phase found them
        after[_C_LOST] = answer[_LOST_ENTRY]
        after[_C_PAIRS] = answer[_PAIRS_ENTRY]
        after[_C_FAT] = 1
    after[_C_KEPT] = kept
    if (answer[2] & LOWERED) != 0:
        after[_C_FRESH] = 0
    recolored = 0
    if answer[_COLORED_ENTRY] != COLORED_NONE:  # coloured in the launch (COLORED_WENT_ON)
        after[_C_COLORS] = answer[_COLORED_ENTRY - 2]
        after[_C_OVERFLOW] = answer[_COLORED_ENTRY - 1]
        after[_C_COLORINGS] += 1
        after[_C_FRESH] = 1 - keep
        if keep == 0:
            after[_C_SCRATCH] += 1
            after[_C_SINCE_FRESH] = 0
        recolored = 1
    elif after[_C_SINCE_FRESH] >= FRESH_COLORING_STEPS:
        after[_C_SINCE_FRESH] = 0  # (a colouring from scratch due and held counts as one)
    after[_C_SINCE_FRESH] += 1
    after[_C_VALID] = 1
    after[_C_COLORED] = after[_C_PAIRS]
    after[_C_ORDERED] = 1
    after[_C_IN_PLACE] = kept * (1 - recolored)
    listed = 1
    if refresh == 1 and kept == 1:  # (a found step's launch does not refresh)
        if answer[_REFRESHED_ENTRY] == 1:
            after[_C_BACKOFF] = 0
            after[_C_BEGIN] = 0
            after[_C_END] = 0
            after[_C_REFRESHES] += 1
            listed = 0
        else:
            after[_C_BACKOFF] = ti.min(2 * after[_C_BACKOFF] + 1, MAX_REFRESH_BACKOFF)
            after[_C_SKIPS] = after[_C_BACKOFF]
    elif after[_C_IN_PLACE] == 1 and after[_C_MAPPED] == 1 and may_refresh == 1:
        if after[_C_STATE_SET] == 0 and after[_C_SKIPS] > 0:
            after[_C_SKIPS] -= 1  # (reporting.refresh_report's skip)
    if listed == 1:
        after[_C_REPORTED] = answer[_LISTED_ENTRY]
        after[_C_BEGIN] = answer[_LISTED_ENTRY + 1]
        after[_C_END] = answer[_LISTED_ENTRY + 2]
        after[_C_MAPPED] = 1
        after[_C_STATE_SET] = 0
    after[_C_CURRENT] = 1
    return after


@ti.func
def _hold_answer(counts: ti.template(), answer, slot, report, capacity, contacts: ti.template()):
    """A step in flight's answer held in counts.answers[slot]; where the step did not go as
    the host takes a step in flight to go (no fault; with `contacts`, its pairs fit and
    nothing overflowed, the reported list built and within the pool's `capacity` pairs),
    counts.stopped: the launches after it do nothing until the host reads the answers
    (in_flight.settle)."""
    counts.answers[slot] = answer
    stopped = answer[0] != 0 or answer[1] != 0
    if ti.static(contacts):
        if answer[_FIND_ENTRY] != FIND_WENT_ON or report != 1 or answer[_LISTED_ENTRY] > capacity:
            stopped = True
    if stopped:
        counts.stopped[None] = 1


@ti.func
def _begin_by_item(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    solver: ti.template(),
    interleave: ti.template(),
    n_worlds,
    n_bodies,
    n_joints,
    n_pairs,
    substeps,
    h,
    dt,
    begun,
    bullets,
    runs_now,
):
    """A small worlds' first substep up to its narrow phase (the stages before
    BEGIN_STEP_STAGES: motors, integrate velocities, the narrow phase), a loop each with a
    thread a joint slot, a body slot and a pair (of n_pairs), before the launch's loop of a
    world a thread, whose substep 0 then runs none of them (stages.BEGUN_PREPARED): each
    item's stage runs as its world's thread would run it, on the state its world's thread
    would find (a world's items touch no other world's; the joints' motors all before any
    body, as a world's are before its bodies), so the results are the same bit for bit.
    The bodies and the carried manifold fields are written where they lie (the world's
    thread copies them to its interleaved layout after: interleaved.copy_world), the
    prepared contacts at their interleaved places (pair_layout, as the world's thread
    finds them). `runs_now` 0: nothing runs (the launch stopped short, or is not a
    SUBSTEPS launch). Called at a kernel's top level: its loops are the kernel's."""
    stages = ti.static(STAGES[solver])
    # Each domain's items, worked out before the first loop: bounds between two loops
    # would take a serial task of their own each.
    n_joint_slots = n_worlds * n_joints * runs_now
    n_body_slots = n_worlds * n_bodies * runs_now
    n_pairs_now = n_pairs * runs_now
    for index in ti.static(range(BEGIN_STEP_STAGES)):
        stage = ti.static(stages[index])
        ti.static_assert(not stage.sweeps_bullets and not stage.is_pass)
        if ti.static(stage.domain != PAIRS):
            n_items = n_body_slots
            if ti.static(stage.domain == JOINT_SLOTS):
                n_items = n_joint_slots
            for item in range(n_items):  # a joint or body slot
                s = _first_substep(n_bodies, n_joints, h, dt, substeps, begun, bullets)
                if runs(stage.when, s) == 1:
                    stage.run(
                        model, bodies, joints, manifolds, prepared, coloring, counts, item, s, 0
                    )
        else:
            for pair in range(n_pairs_now):
                s = _first_substep(n_bodies, n_joints, h, dt, substeps, begun, bullets)
                world = manifolds.body_a[pair] // n_bodies
                first = manifolds.pair_start[world * n_bodies]
                layout = ti.Vector([1, first])
                if ti.static(interleave):
                    layout = pair_layout(
                        counts.most_world_pairs[None],
                        n_worlds,
                        ti.static(prepared.restitution.shape[0]),
                        world,
                        first,
                    )
                seen = prepared_view(prepared, interleave, first, layout[0], layout[1])
                if runs(stage.when, s) == 1:
                    stage.run(model, bodies, joints, manifolds, seen, coloring, counts, pair, s, 0)


@ti.func
def _first_substep(n_bodies, n_joints, h, dt, substeps, begun, bullets):
    """The Substep a launch's member (a world, or a team's thread) starts its substeps with
    (_launch_body): substep 0, after any colouring."""
    return Substep(
        n_bodies=n_bodies,
        n_joints=n_joints,
        h=h,
        dt=dt,
        substep=0,
        substeps=substeps,
        before_coloring=0,
        begun=begun,
        bullets=bullets,
        jointed=1 if n_joints > 0 else 0,
        chained=0,
        fast=1,
        idle=NOT_IDLE,
    )


@ti.func
def _launch_body(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    previous: ti.template(),
    staging: ti.template(),
    scan: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    faults: ti.template(),
    reported: ti.template(),
    events: ti.template(),
    islands: ti.template(),
    grid: ti.template(),
    solver: ti.template(),
    n_members,
    by_world: ti.template(),
    world_block: ti.template(),
    turns: ti.template(),
    interleave: ti.template(),
    begin_by_item: ti.template(),
    world_stride,
    n_worlds,
    n_bodies,
    n_joints,
    n_pairs,
    n_colors,
    overflow,
    substeps,
    h,
    dt,
    mode,
    begun,
    bullets,
    uneven,
    chained,
    refresh,
    report,
    n_reported,
    refit,
    save,
    margin,
    motion_time,
    folded: ti.template(),
    recolors: ti.template(),
    color_args,
    find,
    sleep,
    wake,
    cell_size,
    find_args,
    serial: ti.template(),
    world_args,
    contacts: ti.template(),
    clears_forces,
    in_flight: ti.template(),
    answer_slot,
    late,
):
    """The step's substeps, one launch (a member per world, or a CPU team of n_members threads
    sharing every stage); `mode`: SUBSTEPS; BEGIN, only substep 0's stages up to the narrow
    phase, before the colouring (begin_step: stages.Substep's before_coloring); KEPT (a
    team), BEGIN's stages, the colouring's check (_kept_coloring_holds) and where it holds
    the substeps: the stages' loop starts a phase early (-1, before_coloring), so each stage
    is still inlined once; FOUND (a team), as KEPT for pairs the broad phase found
    (found_step_by_team: _found_pairs_in_order's check, move and lists). `begun`: see
    stages.Substep. A member's bodies, joint slots and pairs are its world's, or its share
    of all of them. A world per loop item; a team thread per task of the CPU backend's
    thread pool (team.member_of). `by_world` is compiled in: a process of small worlds (or
    of large ones) compiles only its mode; so is `world_block`, the threads of a CUDA block
    of its world-per-thread loop (StepOptions.gpu_world_block: their registers). After the
    substeps each member marks the faults of its bodies and joints (faults.mark_faults, its
    world's marks cleared first; on a team, each member clears its share of the worlds and
    the team meets before anyone marks); returns (faulty worlds, the barrier's timeouts so
    far, the check's answer: coloring.HOLDS unless it failed, and with `refresh` (a team,
    reporting.refresh_due) whether it refreshed the reported list: _refresh_report_by_team,
    last; then the refit's three counts, with `refit`: KEPT's launch starts with the fat
    boxes' refit, _refit_by_team, and goes on only where it allows). faults.count must be 0
    when it starts (faults.contain_faults leaves it so).

    By world and `folded` (step_by_world): the whole step of small worlds. Before the
    substeps' loop, last step's pairs saved (`save`'s bits, of n_pairs pairs) and the broad
    phase with its wakes (sleep.find_pairs_waking, `margin`, `motion_time`), then where its
    pairs fit world_args' capacity and limit the colouring with the carry
    (coloring.color_worlds, world_args' keep and one-colour flags), its progress in
    counts.tally[_FIND_TALLY] (FIND_STOPPED, FIND_COLORED, FIND_WENT_ON); the substeps' loop
    runs only where it went on, with the colours the colouring used (not n_colors); after it,
    with `report`, the reported list (reporting.report_worlds, of n_reported old entries,
    world_args' n_held held) and with `sleep` the sleep pass. Its loops run serially where
    `serial`. The answer's last two entries: the colouring's colours used and overflowing
    constraints.

    Without `contacts` (by world, SUBSTEPS, not folded: a step without contacts,
    substeps_by_world): the stages of stages.CONTACTLESS_STAGES, no pairs, each world's
    joints in colour 0 in order (`n_colors` 1 where there are joints); the launch first
    records the constraint counts (no pairs), which no colouring launch did, and with
    `clears_forces` each world zeroes its bodies' applied forces after its substeps. With
    contacts (a small worlds' step in one launch, `world_args`), `clears_forces` clears
    them after the sleep pass, where the reported list fit.

    `in_flight` (the small worlds' step in flight, _worlds_in_flight): nothing runs where
    counts.stopped says a step in flight before it stopped short (every loop over no
    world, the colour lists left as they are); last step's pairs and reported list are
    read from its answer where `late` (its slot + 1) says it was in flight too; and the
    answer is held in counts.answers[answer_slot] (_hold_answer)."""
    # The substeps' loop: a member a world, or a team's threads (a large world's team, or
    # small worlds' substeps by stage: BY_STAGE, whose other loops are a world a thread), or
    # blocks of threads each a team of its own worlds (BY_BLOCK: block_worlds).
    per_world = ti.static(by_world == A_WORLD_A_THREAD)
    by_block = ti.static(by_world == BY_BLOCK)
    team_size, stride = 1, world_stride
    if ti.static(by_block):
        team_size, stride = ti.static(block_threads()), 1
    elif ti.static(not per_world):
        team_size, stride = n_members, team.items_per_member(n_members)
    n_slots = n_worlds * n_bodies
    n_items = n_members * stride
    # The small worlds' step in one launch (by_world and folded: step_by_world): the broad
    # phase and the colouring first, the substeps where they allow.
    world_colors, found, solve = ti.Vector([n_colors, 0]), n_pairs, 1
    # Steps in flight (step_by_world_in_flight): a launch after one that stopped does
    # nothing (go 0); a launch after one in flight (`late`: its answer's slot + 1) takes
    # last step's pairs and reported list from that answer, which the host has not read.
    go, last_pairs, last_reported, held = 1, n_pairs, n_reported, world_args[_N_HELD]
    if ti.static(in_flight):
        if answer_slot == 0:  # a new flight: whatever stopped the last one was read
            counts.stopped[None] = 0
        go = 1 - counts.stopped[None]
        if late > 0:
            last_pairs = counts.answers[late - 1][_PAIRS_ENTRY]
            last_reported = counts.answers[late - 1][_LISTED_ENTRY]
            held = last_reported
    if ti.static(by_world):
        # The answer reads counts.tally, which a team's launch clears first thing (member
        # 0) and a launch by world sets only in part: what a team's launch of another
        # scene left there (its sleep pass's SLEPT) told the host that this launch slept
        # its worlds, and a small scene stepped after a large one on the GPU path never
        # fell asleep.
        for entry in ti.static(range(TALLY_SLOTS)):
            counts.tally[entry] = 0
    if ti.static(not contacts):
        ti.static_assert(by_world and not folded)
        record_constraint_counts(counts, 0, n_joints)
    if ti.static(by_world and folded):
        found = find_pairs_waking(
            model,
            bodies,
            joints,
            manifolds,
            grid,
            counts,
            scan,
            serial,
            previous,
            islands,
            coloring,
            n_worlds,
            n_bodies,
            n_joints,
            cell_size,
            margin,
            motion_time,
            0,
            save & SAVE,
            last_pairs,
            (save & SAVE_ORDERED) // SAVE_ORDERED,
            (save & SAVE_COLORED) // SAVE_COLORED,
            go,
        )[1]
        fit = 0
        if go == 1 and found <= world_args[_WORLD_CAPACITY] and found <= world_args[_WORLD_LIMIT]:
            fit = 1
        world_colors = color_worlds(
            model,
            bodies,
            joints,
            manifolds,
            previous,
            prepared,
            coloring,
            counts,
            serial,
            scan,
            n_worlds,
            n_bodies,
            found,
            n_joints,
            world_args[_KEEP],
            1,
            world_args[_ONE_COLOR],
            fit,
            go,
        )
        progress = FIND_STOPPED
        if fit == 1:
            progress = FIND_COLORED
            if world_colors[1] == 0:
                progress = FIND_WENT_ON
        solve = 1 if progress == FIND_WENT_ON else 0
        if go == 1:
            counts.tally[_FIND_TALLY] = progress
        n_items *= solve
    if ti.static(in_flight and (not contacts or not by_world)):
        n_items *= go  # (a team's step in flight: solver/team_flight.py)
    if ti.static(by_world and interleave and contacts):
        note_most_pairs(manifolds, counts, n_worlds, n_bodies)
    # A small worlds' first substep up to its narrow phase a thread an item
    # (StepOptions.small_worlds_begin_by_item); the worlds' substeps go on from there.
    substep_begun = begun
    if ti.static(begin_by_item):
        ti.static_assert(by_world and contacts)
        runs_now = 0  # (an if, not a select: see pairs.save_pair)
        if mode == SUBSTEPS:
            runs_now = solve
        _begin_by_item(
            model,
            bodies,
            joints,
            manifolds,
            prepared,
            coloring,
            counts,
            solver,
            interleave,
            n_worlds,
            n_bodies,
            n_joints,
            found,
            substeps,
            h,
            dt,
            begun,
            bullets,
            runs_now,
        )
        if runs_now == 1:
            substep_begun = BEGUN_PREPARED
    if ti.static(not per_world and gpu_team.on_gpu()):
        ti.loop_config(block_dim=gpu_team.BLOCK_THREADS)  # a block, or a grid team's blocks
    elif ti.static(per_world and gpu_team.on_cuda()):
        ti.loop_config(block_dim=world_block)  # its registers (StepOptions.gpu_world_block)
    for item in range(n_items):
        member = team.member_of(item, stride)
        if member >= 0:
            # (first, end, step: team.slots_of)
            body_range = ti.Vector([member * n_bodies, (member + 1) * n_bodies, 1])
            joint_range = ti.Vector([member * n_joints, (member + 1) * n_joints, 1])
            pair_range, team_member = ti.Vector([0, 0]), 0
            block = ti.Vector([0, 0, 0])  # (BY_BLOCK: lane, first world, end world)
            if ti.static(per_world and contacts):
                pair_range = ti.Vector(
                    [manifolds.pair_start[body_range[0]], manifolds.pair_start[body_range[1]]]
                )
            elif ti.static(by_block):
                block = block_worlds(member, team_size, n_members, n_worlds)
                first_slot, end_slot = block[1] * n_bodies, block[2] * n_bodies
                body_range = team.slots_of(first_slot, end_slot, block[0], team_size)
                joint_range = team.slots_of(
                    block[1] * n_joints, block[2] * n_joints, block[0], team_size
                )
                pair_range = ti.Vector(
                    [manifolds.pair_start[first_slot], manifolds.pair_start[end_slot]]
                )
                team_member = block[0]
            elif ti.static(not per_world):  # (a world a thread without contacts: its own)
                body_range = team.slots_of(0, n_slots, member, n_members)
                joint_range = team.slots_of(0, n_worlds * n_joints, member, n_members)
                # (`found`: n_pairs, or the pairs a small worlds' launch found: BY_STAGE)
                pair_range, team_member = ti.Vector([0, found]), member
            pair_blocks = ti.Vector(team.dealt_blocks(pair_range[0], pair_range[1], team_member))
            # What a broad phase in the launch changes (`find`): the pairs, the mode, the
            # report's flags.
            step_pairs, step_mode, step_refresh, step_report = n_pairs, mode, refresh, report
            # The colouring the passes solve in: last step's, unless the launch makes one.
            check, pass_colors, pass_overflow = color_args[_MAY_REUSE], world_colors[0], overflow
            if mode != BEGIN:
                if ti.static(per_world):
                    clear_faults(faults, member)
                else:
                    lo, hi = 0, 0
                    if ti.static(by_block):
                        lo, hi = team.share(block[1], block[2], block[0], team_size)
                    else:
                        lo, hi = team.share(0, n_worlds, member, n_members)
                    for world in range(lo, hi):
                        clear_faults(faults, world)
                    # (BY_STAGE: the launch cleared the tallies first, and its colouring
                    # noted there; it carried last step's contacts as it coloured.)
                    if ti.static(not by_world):
                        if member == 0:
                            for entry in ti.static(range(TALLY_SLOTS)):
                                counts.tally[entry] = 0
                        if ti.static(folded):
                            if mode == FOUND:
                                _carry_by_team(
                                    manifolds,
                                    previous,
                                    counts,
                                    member,
                                    team_size,
                                    n_pairs,
                                    n_joints,
                                )
                    team.barrier(counts, team_size, team.SPIN_LIMIT)
            s = _first_substep(n_bodies, n_joints, h, dt, substeps, substep_begun, bullets)
            stages = ti.static(STAGES[solver] if contacts else CONTACTLESS_STAGES[solver])
            # (Stages by turns, a team's: chain_roles; a launch `chained` starts the chain
            # after substep 0's narrow phase where the step allows, _chain_starts.)
            chains = ti.static(turns and contacts and not by_world)
            roles = ti.static(CHAIN_ROLES[solver, chains])
            code = HOLDS
            if ti.static(not by_world):
                if refit == 1:  # (not in one condition: a kernel's `and` evaluates both)
                    if not _refit_by_team(
                        model,
                        bodies,
                        grid,
                        counts,
                        member,
                        team_size,
                        n_worlds,
                        n_bodies,
                        margin,
                        motion_time,
                    ):
                        code = 0  # the step does not keep its pairs: the team stops
                        if ti.static(folded):
                            if wake == 1 and _refit_left_only_sleepers(counts):
                                # The host would keep the pairs once wake_islands woke
                                # nothing: the wake here, and on where nothing woke.
                                woken = _wake_by_team(
                                    model,
                                    bodies,
                                    joints,
                                    manifolds,
                                    previous,
                                    islands,
                                    counts,
                                    member,
                                    team_size,
                                    n_slots,
                                    n_bodies,
                                    n_pairs,
                                    n_joints,
                                    True,
                                )
                                if woken == 0:
                                    code = HOLDS
                            if (save & SAVE) != 0 and _refit_finds(counts, wake, find):
                                # The pairs are found next (here, or by the host), last
                                # step's saved first (saves_in_launch).
                                team_stages.save_pairs(
                                    manifolds,
                                    previous,
                                    coloring,
                                    member,
                                    team_size,
                                    n_slots,
                                    n_pairs,
                                    (save & SAVE_ORDERED) // SAVE_ORDERED,
                                    (save & SAVE_COLORED) // SAVE_COLORED,
                                )
                                if find == 1 and (wake == 1 or _refit_left_nothing_asleep(counts)):
                                    team.barrier(counts, team_size, team.SPIN_LIMIT)
                                    step_pairs = _find_pairs_by_team(
                                        model,
                                        bodies,
                                        joints,
                                        manifolds,
                                        grid,
                                        counts,
                                        scan,
                                        staging,
                                        member,
                                        team_size,
                                        n_worlds,
                                        n_bodies,
                                        cell_size,
                                        margin,
                                        motion_time,
                                        find_args,
                                        color_args[_RECOLOR],
                                        n_worlds * n_joints,
                                    )
                                    if step_pairs >= 0 and wake == 1:
                                        # Sleepers beside what moves: the host's wake after
                                        # its broad phase; where it woke bodies, the launch
                                        # stops (the host pairs them: a broad phase again).
                                        if (
                                            _wake_by_team(
                                                model,
                                                bodies,
                                                joints,
                                                manifolds,
                                                previous,
                                                islands,
                                                counts,
                                                member,
                                                team_size,
                                                n_slots,
                                                n_bodies,
                                                step_pairs,
                                                n_joints,
                                                False,
                                            )
                                            > 0
                                        ):
                                            step_pairs = -1
                                    if step_pairs >= 0:  # found; the colouring may be reused,
                                        # or the launch colours them itself
                                        check = 0
                                        if step_pairs == find_args[_COLORED_PAIRS]:
                                            check = color_args[_MAY_REUSE]
                                        step_mode, code = FOUND, HOLDS
                                        step_refresh, step_report = 0, find_args[_REPORT_FOUND]
                                        pair_range = ti.Vector([0, step_pairs])
                                        pair_blocks = ti.Vector(
                                            team.dealt_blocks(0, step_pairs, team_member)
                                        )
                                        _carry_by_team(
                                            manifolds,
                                            previous,
                                            counts,
                                            member,
                                            team_size,
                                            step_pairs,
                                            n_joints,
                                        )
            # A small world's substeps on its state interleaved (StepOptions.
            # interleave_small_worlds, solver/interleaved.py): the groups as its stages see
            # them, its state copied in here and out after the substeps.
            bodies_interleaved = ti.static(per_world and interleave)
            pairs_interleaved = ti.static(per_world and interleave and contacts)
            layout = ti.Vector([1, pair_range[0]])
            if ti.static(pairs_interleaved):
                layout = pair_layout(
                    counts.most_world_pairs[None],
                    n_worlds,
                    ti.static(prepared.restitution.shape[0]),
                    member,
                    pair_range[0],
                )
            world_pitch = n_worlds  # (the interleaved bodies' stride)
            if ti.static(bodies_interleaved):
                world_pitch = body_stride(
                    n_worlds, n_bodies, ti.static(bodies.interleaved_angle.shape[0])
                )
            solved = body_view(bodies, bodies_interleaved, member, n_bodies, world_pitch)
            solved_manifolds = manifold_view(
                manifolds, staging, pairs_interleaved, pair_range[0], layout[0], layout[1]
            )
            solved_prepared = prepared_view(
                prepared, pairs_interleaved, pair_range[0], layout[0], layout[1]
            )
            # (What copies the world's state in, and out after its substeps.)
            world_state = ti.static(
                (
                    bodies,
                    manifolds,
                    staging,
                    member,
                    n_bodies,
                    world_pitch,
                    pair_range,
                    layout,
                    pairs_interleaved,
                )
            )
            if ti.static(bodies_interleaved):
                copy_world(*world_state, True)
            # A team's step with nothing to pair or join (a world asleep, bodies in free
            # fall): its item stages meet in its last substep alone (_meets_after); where
            # besides no body moves, it runs its first substep alone (STILL).
            end_phase = 0 if step_mode == BEGIN else substeps
            if ti.static(not by_world):
                if step_pairs == 0 and n_joints == 0:
                    s.idle = IDLE
                    if step_mode != BEGIN:
                        if _nothing_moves(
                            model, bodies, counts, refit, body_range, n_bodies, team_size
                        ):
                            s.idle = STILL
                            end_phase = 1
            # Phase -1: begin_step's stages (BEGIN, KEPT); then the substeps (SUBSTEPS,
            # KEPT where the colouring holds).
            for phase in range(0 if step_mode == SUBSTEPS else -1, end_phase):
                if ti.static(not by_world):
                    if phase == 0 and step_mode == KEPT and (code & HOLDS) != 0:
                        # Where last step's colouring may not be reused (check 0: a step
                        # due to colour from scratch), it counts as changed: the team stops
                        # after begin_step's stages and the host colours.
                        code = 0
                        if check == 1:
                            code = _kept_coloring_holds(
                                model,
                                bodies,
                                coloring,
                                counts,
                                member,
                                team_size,
                                n_pairs,
                                n_joints,
                                n_slots,
                                n_bodies,
                            )
                        elif member == 0:
                            counts.tally[_HOLDS_TALLY] = 1
                    if ti.static(folded):
                        if phase == 0 and step_mode == FOUND:
                            code, colors = _found_pairs_in_order(
                                model,
                                bodies,
                                joints,
                                manifolds,
                                previous,
                                staging,
                                scan,
                                prepared,
                                coloring,
                                counts,
                                recolors,
                                member,
                                team_size,
                                step_pairs,
                                n_slots,
                                n_bodies,
                                n_worlds * n_joints,
                                check,
                                color_args,
                            )
                            if colors[0] >= 0:  # its own colouring, without overflow
                                pass_colors, pass_overflow = colors[0], 0
                s.substep = ti.max(phase, 0)
                s.before_coloring = 1 if phase < 0 else 0
                if (code & HOLDS) != 0:  # else: the colouring did not hold, the team stops
                    for index in ti.static(range(len(stages))):
                        stage = ti.static(stages[index])
                        role = ti.static(roles[index])
                        if ti.static(index < BEGIN_STEP_STAGES):
                            _member_items(
                                model,
                                solved,
                                joints,
                                solved_manifolds,
                                solved_prepared,
                                coloring,
                                counts,
                                stage,
                                s,
                                team_size,
                                joint_range,
                                body_range,
                                pair_range,
                                pair_blocks,
                                role,
                            )
                            if ti.static(index == BEGIN_STEP_STAGES - 1):
                                # (after the team met; once a step. A block reads no
                                # tally that other blocks may still be writing: its
                                # threads would part at its barriers. s.fast stays 1.)
                                if phase == 0 and not by_block:
                                    s.fast = 1 if fast_pairs_noted(counts) else 0
                                if ti.static(chains):
                                    if phase == 0 and chained == 1:
                                        s.chained = _chain_starts(s, pass_colors, pass_overflow)
                        elif s.before_coloring == 0:
                            if ti.static(stage.is_pass):
                                if _pass_runs(stage, s, counts, by_block) == 1:
                                    sweeps, stage_uneven = 1, 0
                                    if ti.static(stage.joint_sweeps):
                                        sweeps = JOINT_SWEEPS if n_joints > 0 else 1
                                    if ti.static(stage.immovable_sweep):
                                        stage_uneven = uneven
                                    chain = ti.Vector([-1, 0, 0])
                                    number = ti.static(PASS_NUMBERS[solver][index])
                                    if ti.static(chains and number < 2):
                                        if s.chained == 1:
                                            last = number == 1 and s.substep == substeps - 1
                                            chain = ti.Vector([s.substep, number, int(last)])
                                    if ti.static(by_block):
                                        _block_pass(
                                            model,
                                            solved,
                                            joints,
                                            solved_manifolds,
                                            solved_prepared,
                                            coloring,
                                            counts,
                                            stage.run,
                                            block,
                                            team_size,
                                            pair_range,
                                            n_bodies,
                                            n_joints,
                                            pass_colors,
                                            h,
                                            sweeps,
                                            stage_uneven,
                                        )
                                    else:
                                        _member_pass(
                                            model,
                                            solved,
                                            joints,
                                            solved_manifolds,
                                            solved_prepared,
                                            coloring,
                                            counts,
                                            stage.run,
                                            stage.position,
                                            stage.joints,
                                            member,
                                            team_size,
                                            per_world,
                                            n_bodies,
                                            n_joints,
                                            pass_colors,
                                            pass_overflow,
                                            h,
                                            sweeps,
                                            stage_uneven,
                                            contacts,
                                            turns,
                                            chain,
                                            ti.static(by_world == BY_STAGE),
                                            n_worlds,
                                        )
                            else:
                                _member_items(
                                    model,
                                    solved,
                                    joints,
                                    solved_manifolds,
                                    solved_prepared,
                                    coloring,
                                    counts,
                                    stage,
                                    s,
                                    team_size,
                                    joint_range,
                                    body_range,
                                    pair_range,
                                    pair_blocks,
                                    role,
                                )
            if ti.static(bodies_interleaved):
                copy_world(*world_state, False)
            if mode != BEGIN and (code & HOLDS) != 0:
                mark_faults(
                    model, bodies, joints, faults, body_range, joint_range, n_bodies, n_joints
                )
                if ti.static(not contacts):
                    if clears_forces == 1:
                        # (a world's slots: a step without contacts is a world a thread)
                        for slot in range(body_range[0], body_range[1]):
                            clear_force(bodies, slot)
                if ti.static(not by_world):
                    refreshed = False
                    if step_refresh == 1:
                        refreshed = _refresh_report_by_team(
                            model,
                            bodies,
                            joints,
                            manifolds,
                            reported,
                            counts,
                            member,
                            team_size,
                            step_pairs,
                            n_reported,
                            n_bodies,
                        )
                    if ti.static(folded):
                        if step_report == 1 and not refreshed:
                            report_by_team(
                                model,
                                bodies,
                                joints,
                                manifolds,
                                staging,
                                reported,
                                events,
                                prepared,
                                coloring,
                                scan,
                                counts,
                                member,
                                team_size,
                                n_slots,
                                n_bodies,
                                step_pairs,
                                n_reported,
                                held,
                            )
                        if sleep == 1:
                            _sleep_by_team(
                                model,
                                bodies,
                                joints,
                                manifolds,
                                staging,
                                islands,
                                counts,
                                member,
                                team_size,
                                n_slots,
                                n_bodies,
                                step_pairs,
                                n_joints,
                                dt,
                                refreshed,
                                step_report,
                            )
    tally = ti.static(counts.tally)
    listed = ti.Vector([0, 0, 0])
    if ti.static(folded and not by_world):
        if report == 1 or find_args[_REPORT_FOUND] == 1:
            listed = report_counts(staging, coloring, n_worlds * n_bodies, n_reported)
    if ti.static(by_world and folded):
        listed = report_worlds(
            model,
            bodies,
            joints,
            manifolds,
            staging,
            reported,
            events,
            prepared,
            coloring,
            scan,
            serial,
            islands,
            n_worlds,
            n_bodies,
            last_reported,
            held,
            found,
            n_joints,
            sleep,
            dt,
            solve * report,
            clears_forces,
        )
    # A team's colouring in the launch (_color_by_team) is noted where world_colors are.
    colors = ti.Vector([world_colors[0], world_colors[1], 0])
    if ti.static(recolors and not by_world):
        colors = ti.Vector([tally[_COLOR_TALLY + entry] for entry in ti.static((1, 2, 0))])
    answer = _Answer(
        faults.count[None],
        team.timeouts(counts),
        holds_code(tally[_HOLDS_TALLY], tally[_HOLDS_TALLY + 1]),
        1
        if refresh_holds(
            ti.Vector([tally[_REFRESH_TALLY + entry] for entry in ti.static(range(3))])
        )
        else 0,
        tally[_REFIT_TALLY],
        tally[_REFIT_TALLY + 1],
        tally[_REFIT_TALLY + 2],
        listed[0],
        listed[1],
        listed[2],
        tally[_FIND_TALLY],
        counts.entries_needed[None],
        counts.pairs_needed[None],
        counts.lost_bodies[None],
        tally[_SLEEP_TALLY],
        colors[0],
        colors[1],
        colors[2],
        tally[_WAKE_TALLY],
    )
    if ti.static(in_flight and by_world):  # (a team's: solver/team_flight.py holds it)
        if go == 1:
            _hold_answer(counts, answer, answer_slot, report, world_args[_WORLD_CAPACITY], contacts)
    return answer
