"""One step of the XPBD pipeline (seed 003): the stage list, and the substep's kernels.

step() reads as the pipeline (Box2D v3's solver stage list, made batched):

    save pairs      pairs.save_previous_pairs      last step's manifolds kept aside
    find pairs      pairs.find_step_pairs          AABBs grown by the step's motion (large
                                                   worlds: fat boxes, and last step's
                                                   pairs if none moved)
    wake            sleep.wake_islands             (bodies woke: find pairs again)
    carry contacts  pairs.carry_contacts           impulses and colours to the new pairs
    begin step      begin_step                     (worlds of more than 40 bodies) the
                                                   first substep's motors and velocities,
                                                   the step's narrow phase: which pairs
                                                   the solver must see
    colour          coloring.color_constraints     those pairs and the joints, or keep
                                                   last step's colouring
    order           pairs.store_in_color_order     a colour's pairs in consecutive memory
    per-body lists  contacts.build_body_lists      for warm starting in a fixed order
    (a step of worlds over 40 bodies that keeps last step's pairs, still stored in colour
    order, skips save, find, carry and order: _keep_pairs runs begin step and checks the
    colouring where the pairs lie)
    substeps        begin_substep                  motors, integrate velocities, narrow
                                                   phase (those begin_step did not do),
                                                   prepare contacts, warm start,
                                                   integrate positions
                    position_pass                  contacts and joints by colour (the
                                                   overflow colour: solver/overflow.py),
                                                   then velocities derived for jointed bodies
                    velocity_pass                  contacts by colour (and overflow)
                    (small worlds: all substeps in one launch, one world per thread,
                    substeps_by_world; other scenes on a CPU backend: all substeps in
                    one launch on a team of CPU threads meeting at barriers,
                    substeps_by_team, solver/team.py; the same results bit for bit)
    report          reporting.report_contacts      touching pairs and begin/end events
    sleep           sleep.update_sleep             timers, islands, sleep or wake whole
    clear forces    integrate.clear_forces

Every stage is a launcher taking the StepContext (solver/context.py); kernels are private.
"""

import taichi as ti

from ..bodies import moves
from ..collision.continuous import sweep_body
from ..device import MAX_COLORS
from ..integrate import begin_step_pose, clear_forces, integrate_position, integrate_velocity
from ..launching import quick
from . import team
from .coloring import color_constraints, coloring_holds_in_order, may_reuse_coloring
from .contacts import (
    FAST_MARGIN_SUBSTEPS,
    REPEAT_SOLVE,
    SPECULATIVE_DISTANCE,
    against_immovable,
    build_body_lists,
    find_manifold,
    prepare_manifold,
    resolve_penetration,
    solve_velocity,
    warm_start_body,
)
from .joints import JOINT_SWEEPS, motor_load, solve_joint, update_motor
from .overflow import apply_mean_delta, solve_overflow
from .pairs import (
    carry_contacts,
    count_kept_pairs,
    find_step_pairs,
    keeps_pairs,
    refit_step_boxes,
    restore_broad_order,
    save_previous_pairs,
    store_in_color_order,
)
from .reporting import report_contacts
from .sleep import update_sleep, wake_islands

vec2 = ti.math.vec2


def step(ctx):
    """Advance every world of ctx's scene by ctx.dt (s) in ctx.substeps substeps (on a CPU
    team of threads or with a launch per stage, as the team's duel chooses: team.duel)."""
    colors_per_launch()  # a bad setting raises before anything changes
    with team.duel(ctx):
        _step(ctx)


def _step(ctx):
    refit = refit_step_boxes(ctx, SPECULATIVE_DISTANCE, pair_window(ctx))
    if _keeps_ordered_pairs(ctx, refit):
        recolored = _keep_pairs(ctx)
    else:
        recolored = _find_pairs(ctx, refit)
    # Kept where they lie with their colouring: last step's per-body lists and reported
    # list still match them (build_body_lists, reporting.refresh_report).
    ctx.cache.pairs_in_place = ctx.cache.pairs_kept and not recolored
    build_body_lists(ctx)
    if ctx.solves_by_world:
        substeps_by_world(ctx)
    elif threads := team_size(ctx):
        substeps_by_team(ctx, threads)
    else:
        for substep in range(ctx.substeps):
            _substep(ctx, substep)
    team.check(ctx.pool.counts)  # reads the device only if a team of several threads ran
    report_contacts(ctx)
    if ctx.enable_sleep:
        update_sleep(ctx)
    clear_forces(ctx)
    ctx.cache.contacts_current = True


def pair_window(ctx) -> float:
    """How far ahead (s) the broad phase looks for pairs: the step, and as far beyond it as
    the fast pairs' speculative margin looks past one substep (contacts.FAST_MARGIN_SUBSTEPS),
    so that a body which will reach something early in the next step is paired in this
    one's last substeps."""
    return ctx.dt + (FAST_MARGIN_SUBSTEPS - 1.0) * ctx.h


def _find_pairs(ctx, refit) -> bool:
    """The step's pairs, matched to last step's, coloured and stored in colour order (the
    stages from "save pairs" to "order"; refit: pairs.refit_step_boxes's answer); returns
    whether it coloured."""
    save_previous_pairs(ctx)
    sleepers = find_step_pairs(ctx, SPECULATIVE_DISTANCE, pair_window(ctx), refit)
    # Where no body sleeps (refit_fat_boxes counted them) there is nothing to wake.
    if sleepers != 0 and wake_islands(ctx):
        # The broad phase pairs no two sleeping bodies: pair the woken ones now, so they
        # meet each other this step.
        find_step_pairs(ctx, SPECULATIVE_DISTANCE, pair_window(ctx))
    carry_contacts(ctx)
    if not ctx.small_coloring:
        begin_step(ctx)
    recolored = color_constraints(ctx)
    store_in_color_order(ctx, recolored)
    return recolored


def _keeps_ordered_pairs(ctx, refit) -> bool:
    """Whether the step keeps last step's pairs (pairs.keeps_pairs) where they lie, in last
    step's colour order (_keep_pairs): they are stored in colour order and the step's
    narrow phase runs before the colouring (not ctx.small_coloring)."""
    return (keeps_pairs(ctx, refit) and ctx.cache.pairs_ordered
            and not ctx.small_coloring)


def _keep_pairs(ctx) -> bool:
    """_find_pairs for a step that keeps last step's pairs and their colour order: the
    step's narrow phase runs on the pairs where they lie, and where the colouring may be
    reused and still holds nothing moves. What it saves: last step's pairs copied aside,
    their bodies copied back, each pair's search for its old self, and the move to colour
    order, which would put every pair back where it was (2-core CPU, on and off in turns
    in one process: awake large pyramid 14.8 -> 13.9 ms a step, many pyramids awake
    51.0 -> 48.2 ms). Otherwise (the colouring fails, is due to start from scratch, or
    overflowed) the pairs go back to the broad phase's order for a new colouring. The
    results are bitwise those of _find_pairs (the tests compare them). Returns whether it
    coloured."""
    count_kept_pairs(ctx)
    begin_step(ctx)
    if may_reuse_coloring(ctx) and coloring_holds_in_order(ctx):
        return color_constraints(ctx, holds=True)
    restore_broad_order(ctx)
    color_constraints(ctx, holds=False)
    store_in_color_order(ctx, recolored=True)
    return True


def _substep(ctx, substep: int):
    """One XPBD substep of length ctx.h (s) for every world; `substep`: its index in the
    step (0: every pair is prepared)."""
    begin_substep(ctx, substep)
    position_pass(ctx)
    velocity_pass(ctx)


def begin_step(ctx):
    """Before the colouring (worlds of more than SMALL_COLORING_MAX_BODIES): the first
    substep's motors and velocity integration, and the step's narrow phase at the poses
    the step starts from, which tells the colouring the pairs the solver must see
    (coloring.solve: those with points, and fast ones). Box2D v3 colours touching
    constraints only: in a poured pile half the candidate pairs have no points. The
    velocities come first because the margins depend on them (the motion the step can
    bring).

    Small worlds colour every candidate pair instead (coloring.color_constraints): they are
    mostly solved one per thread (substeps_by_world), where a pair without points costs a
    check, and that one launch a step does the step's narrow phase too, so begin_step's
    kernel, which holds the narrow phase as well, is not compiled for them.

    Where a CPU team will run the substeps (team_size), the team's kernel does this too, so
    the narrow phase is compiled into one kernel, not two."""
    if threads := team_size(ctx):
        _launch_team(ctx, by_world=False, n_members=threads, before_coloring=True)
    else:
        _launch_begin(ctx, 0, before_coloring=True)


def begin_substep(ctx, substep: int):
    """Motors and velocities (unless begin_step did the first substep's), the narrow phase
    (every pair on substep 0 unless begin_step ran it, fast pairs on later substeps),
    prepare the contacts, warm start, integrate positions (see _begin_substep)."""
    _launch_begin(ctx, substep, before_coloring=False)


def _launch_begin(ctx, substep: int, before_coloring: bool):
    pool = ctx.pool
    _begin_substep(pool.model, pool.bodies, pool.joints, pool.manifolds, pool.prepared,
                   pool.coloring, ctx.serial, ctx.n_slots, ctx.n_bodies, ctx.n_pairs,
                   ctx.n_joints, ctx.gravity, ctx.h, ctx.dt, substep,
                   int(before_coloring), int(not ctx.small_coloring))


def position_pass(ctx):
    """Penetration and joint constraints, colour after colour, the joints again in
    JOINT_SWEEPS - 1 more sweeps. Its last stages, fast bodies swept
    (collision/continuous.py) and velocities of the bodies with joints derived from their
    displacement (_end_position_pass), begin the velocity pass."""
    _solve_pass(ctx, _position_stage, position=True)
    if ctx.n_joints:
        for _ in range(JOINT_SWEEPS - 1):
            _solve_pass(ctx, _position_stage, position=True, subset=JOINTS_ALONE)


def velocity_pass(ctx):
    """The position pass's last stages (_end_position_pass: a kernel of its own; compiled
    into each colour launch's kernel it tripled the Vulkan tests' compile time), then
    contact velocity constraints (normal impulses, friction, restitution), colour after
    colour, then, in scenes of uneven masses (ctx.immovable_sweep), those with an immovable
    body again."""
    pool = ctx.pool
    _end_position_pass(pool.model, pool.bodies, pool.joints, pool.manifolds, pool.prepared,
                       ctx.serial, ctx.n_slots, ctx.n_bodies, ctx.h, ctx.has_bullets,
                       int(ctx.n_joints > 0))
    if ctx.n_pairs:
        _solve_pass(ctx, _velocity_stage, position=False)
        if ctx.immovable_sweep:
            _solve_pass(ctx, _velocity_stage, position=False, subset=IMMOVABLE)


@ti.func
def _push_body(model: ti.template(), bodies: ti.template(), joints: ti.template(), slot,
               n_bodies, n_joints, gravity, h, substep):
    """Body slot's velocity integrated over the substep (gravity, damping, its motors'
    loads); on the step's first substep its pose becomes the step's anchor."""
    body = slot % n_bodies
    if moves(model, bodies, slot, body):
        force, torque = vec2(0.0, 0.0), 0.0
        if joints.body_has_joint[body]:
            force, torque = motor_load(bodies, joints, slot, body, n_joints, n_bodies)
        integrate_velocity(model, bodies, slot, body, gravity, h, force, torque)
    if substep == 0:
        begin_step_pose(bodies, slot)


@ti.func
def _move_body(model: ti.template(), bodies: ti.template(), contacts: ti.template(),
               solver: ti.template(), slot, n_bodies, h):
    """Warm start body slot (its contacts' impulses) and move it by its velocity over h."""
    if moves(model, bodies, slot, slot % n_bodies):
        warm_start_body(model, bodies, contacts, solver, slot, n_bodies)
        integrate_position(bodies, slot, h)


@ti.func
def _derive_velocity(model: ti.template(), bodies: ti.template(), joints: ti.template(), slot,
                     n_bodies, h):
    """v = (x - x_prev) / h, w = (theta - theta_prev) / h for body slot if it has joints.

    Contacts move pose and previous pose together, so for other bodies this would return the
    integrated velocity plus rounding noise (|x| * 1e-7 / h); joint corrections move the pose
    alone, and this turns them into velocity.
    """
    body = slot % n_bodies
    if joints.body_has_joint[body] and moves(model, bodies, slot, body):
        bodies.velocity[slot] = (bodies.delta_position[slot]
                                 - bodies.prev_delta_position[slot]) / h
        bodies.angular_velocity[slot] = (bodies.delta_angle[slot]
                                         - bodies.prev_delta_angle[slot]) / h


@ti.func
def _pair_stages(model: ti.template(), bodies: ti.template(), joints: ti.template(),
                 contacts: ti.template(), solver: ti.template(), coloring: ti.template(), pair,
                 n_bodies, dt, h, substep, before_coloring, begun, gravity):
    """What `pair` needs at the start of substep `substep`: its narrow phase (the step's
    first before the colouring where begin_step runs (`begun`), else in substep 0; later,
    fast pairs again) and its solver constants (prepare_manifold: in substep 0 and after
    every later narrow phase). One call of each, so a kernel that runs this inlines the
    narrow phase once."""
    first = substep == 0
    find, prepare = False, False
    if before_coloring:
        find = True
    elif first:
        find, prepare = not begun, True
    elif solver.refresh[pair] == 1:
        find, prepare = True, True
    matches = ti.Vector([-1, -1])
    if find:
        solve, found = find_manifold(model, bodies, joints, contacts, pair, n_bodies, dt, h,
                                     first, gravity)
        matches = found
        if before_coloring:
            coloring.solve[pair] = 1 if solve else 0
    if prepare:
        prepare_manifold(model, bodies, contacts, solver, pair, n_bodies, dt, h, first,
                         matches)


@quick
@ti.kernel
def _begin_substep(model: ti.template(), bodies: ti.template(), joints: ti.template(),
                   contacts: ti.template(), solver: ti.template(), coloring: ti.template(),
                   serial: ti.template(), n_slots: ti.i32, n_bodies: ti.i32, n_pairs: ti.i32,
                   n_joints: ti.i32, gravity: vec2, h: ti.f32, dt: ti.f32, substep: ti.i32,
                   before_coloring: ti.i32, begun: ti.i32):
    """The substep's first stages: motors and velocities, the pairs' narrow phase and
    preparation (_pair_stages), warm start, integrate positions. begin_step is this kernel
    (or, where a CPU team runs the substeps, the team's) with `before_coloring` (substep
    0's motors, velocities and narrow phase only); `begun`:
    begin_step ran this step, so substep 0 does not do them again.

    Contacts are found at the poses before the first move; slow pairs keep that manifold for
    the step, each point's depth tracked through the bodies' rigid motion (moved_depth), as
    Box2D v3 does, while fast pairs run the narrow phase again every substep (see
    find_manifold). Measured on the awake large pyramid (CPU), keeping resting contacts
    saves the narrow phase's 28% of the step that refreshing every pair every substep cost.
    Warm starting re-applies each point's impulse before the move, so resting bodies do not
    creep.
    """
    # Loop lengths, not ifs around the loops: only a kernel's outermost loops run in
    # parallel.
    push = 1 if before_coloring == 1 or substep > 0 or begun == 0 else 0
    ti.loop_config(serialize=serial)
    for joint_slot in range(push * n_joints * (n_slots // ti.max(n_bodies, 1))):
        update_motor(bodies, joints, joint_slot, n_joints, n_bodies, h)
    ti.loop_config(serialize=serial)
    for slot in range(push * n_slots):
        _push_body(model, bodies, joints, slot, n_bodies, n_joints, gravity, h, substep)
    ti.loop_config(serialize=serial)
    for pair in range(n_pairs):
        _pair_stages(model, bodies, joints, contacts, solver, coloring, pair, n_bodies, dt, h,
                     substep, before_coloring == 1, begun == 1, gravity)
    ti.loop_config(serialize=serial)
    for slot in range((1 - before_coloring) * n_slots):
        _move_body(model, bodies, contacts, solver, slot, n_bodies, h)


@quick
@ti.kernel
def _end_position_pass(model: ti.template(), bodies: ti.template(), joints: ti.template(),
                       contacts: ti.template(), solver: ti.template(), serial: ti.template(),
                       n_slots: ti.i32, n_bodies: ti.i32, h: ti.f32, bullets: ti.template(),
                       jointed: ti.i32):
    """The position pass's last stages: the fast bodies swept against what they must not
    pass (continuous.sweep_body: every one against immovable bodies, then bullets against
    dynamic ones where the scene has bullets), then _derive_velocity for every body slot
    where the scene has joints. `bullets` is compiled in: sweep_body is a good part of the
    kernel's compile time, and scenes without bullets inline it once."""
    for sweep in ti.static(range(2 if bullets else 1)):
        ti.loop_config(serialize=serial)
        for slot in range(n_slots):
            sweep_body(model, bodies, contacts, solver, slot, n_bodies, sweep == 1)
    ti.loop_config(serialize=serial)
    for slot in range(n_slots * jointed):
        _derive_velocity(model, bodies, joints, slot, n_bodies, h)


@ti.func
def _position_stage(model: ti.template(), bodies: ti.template(), joints: ti.template(),
                    contacts: ti.template(), solver: ti.template(), counts: ti.template(), k,
                    n_bodies, h, jacobi_entry):
    """Position pass of constraint k: contact pairs first, then joint slots; jacobi_entry
    >= 0: an overflow pair, whose corrections go there (solver/overflow.py)."""
    if k < counts.n_pairs[None]:
        resolve_penetration(bodies, contacts, solver, k, n_bodies, h, jacobi_entry)
    else:
        solve_joint(model, bodies, joints, counts, k - counts.n_pairs[None], n_bodies, h)


@ti.func
def _velocity_stage(model: ti.template(), bodies: ti.template(), joints: ti.template(),
                    contacts: ti.template(), solver: ti.template(), counts: ti.template(), k,
                    n_bodies, h, jacobi_entry):
    """Velocity pass of constraint k (contacts only; jacobi_entry as in _position_stage)."""
    if k < counts.n_pairs[None]:  # joints are position-level only (seed 003)
        solve_velocity(bodies, contacts, solver, k, n_bodies, h, jacobi_entry)


#: Colours solved per kernel launch where the substeps launch a kernel per stage (GPU
#: backends; CPU scenes without a team). Each colour is a top-level (parallel) loop of the
#: kernel, run one after the other; more per launch means fewer launches from Python
#: (~17 us each through launching.quick, 2 passes x colours / this x 11 substeps a step:
#: 110 of the awake large pyramid's 131 launches a step with 10 colours) but a first compile
#: that grows faster than linearly: the first step of a small scene with an empty offline
#: cache took 35 s with 4 (_solve_colors 23 s of it), 20 s with 2, 12 s with 1; the awake
#: large pyramid's ms/step did not change measurably from 4 to 2 (within this machine's
#: +-25 %), and grew by a quarter with 1 (2-core CPU). Read at each launch (a new value
#: compiles its own kernel): on a GPU, where the launches from Python may be most of a
#: step, `python -m benchmarks --colors-per-launch N` measures other values. The results
#: are the same bit for bit whatever it is (the colours run in the same order).
COLORS_PER_LAUNCH = 2


@quick
@ti.kernel
def _solve_colors(model: ti.template(), bodies: ti.template(), joints: ti.template(),
                  contacts: ti.template(), solver: ti.template(), coloring: ti.template(),
                  counts: ti.template(), serial: ti.template(), stage: ti.template(),
                  per_launch: ti.template(), first_color: ti.i32, n_bodies: ti.i32, h: ti.f32,
                  subset: ti.i32):
    """stage(..., constraint, n_bodies, h) for every constraint of colours first_color ...
    first_color + per_launch - 1 (those below MAX_COLORS): one colour's constraints in
    parallel, colours in sequence. subset: which constraints (ALL, JOINTS_ALONE: a later
    sweep of the position pass, joints.JOINT_SWEEPS; IMMOVABLE: the contacts with an
    immovable body, again, contacts.IMMOVABLE_SWEEP_RATIO)."""
    for j in ti.static(range(per_launch)):
        color = ti.min(first_color + j, MAX_COLORS)  # MAX_COLORS: an empty range
        end = coloring.color_start[color + 1] if color < MAX_COLORS else \
            coloring.color_start[color]
        ti.loop_config(serialize=serial)
        for i in range(coloring.color_start[color], end):
            constraint = coloring.color_list[i]
            is_pair = constraint < counts.n_pairs[None]
            if (subset == ALL or (subset == JOINTS_ALONE and not is_pair)
                    or (subset == IMMOVABLE and is_pair and against_immovable(solver, constraint))):
                stage(model, bodies, joints, contacts, solver, counts, constraint, n_bodies,
                      h, REPEAT_SOLVE if subset == IMMOVABLE else -1)


def colors_per_launch() -> int:
    """COLORS_PER_LAUNCH, checked (a whole number from 1 to MAX_COLORS)."""
    value = COLORS_PER_LAUNCH
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"COLORS_PER_LAUNCH must be an int, got {type(value).__name__}")
    if not 1 <= value <= MAX_COLORS:
        raise ValueError(f"COLORS_PER_LAUNCH must be in [1, {MAX_COLORS}], got {value}")
    return value


#: _solve_pass's subsets: every constraint; the joints alone (the position pass's later
#: sweeps); the contacts with an immovable body (the velocity pass's last sweep, its
#: overflow colour excepted).
ALL, JOINTS_ALONE, IMMOVABLE = 0, 1, 2


def _solve_pass(ctx, stage, position: bool, subset: int = ALL):
    """stage over the constraints of `subset`, colour after colour, then the overflow colour
    in parallel (solver/overflow.py; `position`: which pass `stage` is)."""
    pool, cache = ctx.pool, ctx.cache
    groups = (pool.model, pool.bodies, pool.joints, pool.manifolds, pool.prepared, pool.coloring,
              pool.counts)
    per_launch = COLORS_PER_LAUNCH  # checked when the step began (step)
    for first_color in range(0, cache.n_colors, per_launch):
        _solve_colors(*groups, ctx.serial, stage, per_launch, first_color, ctx.n_bodies, ctx.h,
                      subset)
    if cache.n_overflow and subset != IMMOVABLE:
        solve_overflow(ctx, position, joints_only=subset == JOINTS_ALONE)


def substeps_by_world(ctx):
    """All of the step's substeps in one launch, one world per thread: the same stages as
    _substep, in the same order, with the same results bit for bit.

    A colour's constraints share no dynamic body, so solving them one after the other in
    any order gives what solving them in parallel gives; a world's thread solves its own
    constraints colour after colour (its pairs are stored in colour order in its own range,
    pairs.store_in_color_order). What it saves: the ~8 launches of each substep (~90 a step
    at 11 substeps and 6 colours), which are most of a small scene's step, and the trips
    through memory between them: a world's bodies and contacts stay in the thread's cache
    for the whole step instead of being streamed once per stage.
    """
    _launch_team(ctx, by_world=True, n_members=ctx.n_worlds)


def substeps_by_team(ctx, threads: int):
    """All of the step's substeps in one launch on a team of `threads` CPU threads
    (solver/team.py): each stage, and each colour of a pass, split between the threads,
    with a barrier between them instead of a loop launch (2-10 us, not ~35). The same stages
    as _substep in the same order: the same results bit for bit. (step() checks the
    barrier's waits once, after the substeps: team.check.)"""
    _launch_team(ctx, by_world=False, n_members=threads)


def team_size(ctx) -> int:
    """Threads of the CPU team that runs this step's substeps (substeps_by_team, the
    overflow colour included); 0: launch a kernel per stage instead (GPU backends, a CPU
    backend whose thread pool is broken, see team.threads_for).
    Scenes small enough to run their loops serially (device.SERIAL_SLOTS) get a team of one
    thread: one launch instead of ~100 serial ones."""
    return team.threads_for(ctx)


def _launch_team(ctx, by_world: bool, n_members: int, before_coloring: bool = False):
    pool = ctx.pool
    _substeps_by_team(pool.model, pool.bodies, pool.joints, pool.manifolds, pool.prepared,
                      pool.coloring, pool.counts, n_members, bool(by_world), ctx.n_worlds,
                      ctx.n_bodies, ctx.n_joints, ctx.n_pairs, ctx.cache.n_colors,
                      int(ctx.cache.n_overflow > 0), ctx.substeps, ctx.gravity, ctx.h, ctx.dt,
                      int(before_coloring), int(not ctx.small_coloring), int(ctx.has_bullets),
                      int(ctx.immovable_sweep))


@ti.func
def _next_constraint(contacts: ti.template(), coloring: ti.template(), counts: ti.template(),
                     by_world: ti.template(), world, n_joints, color, cursor):
    """The next constraint of colour `color` for a team member and its cursor after it (-1:
    none left). cursor = (next pair, next joint, end of the member's pairs).

    By world: the world's pairs (stored in colour order, so a colour's are consecutive),
    then its joint slots of that colour. On a team: the member's share of the colour's
    list (cursor[0] to cursor[2])."""
    constraint = -1
    if ti.static(by_world):
        if cursor[0] < cursor[2] and coloring.color[cursor[0]] == color:
            constraint = cursor[0]
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
            cursor[0] += 1
    return constraint, cursor


@ti.func
def _team_pass(model: ti.template(), bodies: ti.template(), joints: ti.template(),
               contacts: ti.template(), solver: ti.template(), coloring: ti.template(),
               counts: ti.template(), stage: ti.template(), position: ti.template(), member,
               n_members, by_world: ti.template(), n_bodies, n_joints, n_colors, overflow, h,
               sweeps, uneven):
    """stage(...) over a member's constraints, colour after colour (see _next_constraint),
    the team waiting for each colour to end before the next; on a team, then the overflow
    colour as solver/overflow.py solves it (the same steps in the same order): its pairs
    at once (Jacobi, a share each), the team waits, each body's mean applied (a share
    each), and in the position pass its joints, in order, on member 0 (a hub's surplus:
    few). `overflow`: the colouring has an overflow colour (its ranges in coloring are
    this step's only then). Worlds solved one per thread have none
    (StepContext.solves_by_world). `sweeps`: how many times over the colours; after the
    first, the joints alone (joints.JOINT_SWEEPS): pairs are skipped, and the overflow's
    pairs' means are not applied again. `uneven` (the velocity pass of a scene of uneven
    masses, StepContext.immovable_sweep): a last sweep over the contacts with an immovable
    body, the overflow's excepted."""
    n_rounds = n_colors
    first_overflow, overflow_pairs, overflow_end = 0, 0, 0
    if ti.static(not by_world) and overflow == 1:
        first_overflow = coloring.color_start[MAX_COLORS]
        overflow_pairs = coloring.n_overflow_pairs[None]
        overflow_end = coloring.color_start[MAX_COLORS + 1]
        n_rounds = n_colors + 2  # the overflow's pairs, then its joints
    immovable_sweep = 0
    if ti.static(not position):
        immovable_sweep = uneven
    for sweep in range(sweeps + immovable_sweep):
        # sweep 0: everything; then the joints alone; the last (`uneven`): the
        # contacts with an immovable body, the overflow's excepted.
        immovable = immovable_sweep == 1 and sweep == sweeps
        joints_alone = sweep > 0 and not immovable
        cursor = ti.Vector([0, 0, 0])
        if ti.static(by_world):
            cursor = ti.Vector([contacts.pair_start[member * n_bodies], 0,
                                contacts.pair_start[(member + 1) * n_bodies]])
            if joints_alone:
                cursor[0] = cursor[2]  # the world's joints alone
        for color in range(n_rounds):
            # A world's joints are searched from the first for every colour (none in the
            # immovable sweep).
            cursor[1] = n_joints if immovable else 0
            if ti.static(not by_world):
                lo, hi = 0, 0
                if color < n_colors:
                    lo, hi = team.share(coloring.color_start[color],
                                        coloring.color_start[color + 1], member, n_members)
                elif immovable:
                    pass
                elif color == n_colors:  # the overflow's pairs
                    lo, hi = team.share(first_overflow, first_overflow + overflow_pairs, member,
                                        n_members)
                elif ti.static(position) and member == 0:  # its joints, in order, on one
                    lo, hi = first_overflow + overflow_pairs, overflow_end
                cursor = ti.Vector([lo, 0, hi])
            # One call of stage: each call site inlines the whole constraint solve, and this
            # kernel's compile time grows with them.
            while True:
                jacobi_entry = -1
                if ti.static(not by_world):
                    if color == n_colors:  # overflow pair i writes entries 2i and 2i + 1
                        jacobi_entry = 2 * (cursor[0] - first_overflow)
                constraint, cursor = _next_constraint(contacts, coloring, counts, by_world,
                                                      member, n_joints, color, cursor)
                if constraint < 0:
                    break
                is_pair = constraint < counts.n_pairs[None]
                if immovable and is_pair:
                    jacobi_entry = REPEAT_SOLVE
                if (sweep == 0 or (joints_alone and not is_pair)
                        or (immovable and is_pair and against_immovable(solver, constraint))):
                    stage(model, bodies, joints, contacts, solver, counts, constraint,
                          n_bodies, h, jacobi_entry)
            team.barrier(counts, n_members, team.SPIN_LIMIT)
            if ti.static(not by_world):
                if color == n_colors and sweep == 0:
                    lo, hi = team.share(0, coloring.n_jacobi_bodies[None], member, n_members)
                    for i in range(lo, hi):
                        apply_mean_delta(bodies, solver, coloring, coloring.jacobi_bodies[i],
                                         position)
                    team.barrier(counts, n_members, team.SPIN_LIMIT)


@quick
@ti.kernel
def _substeps_by_team(model: ti.template(), bodies: ti.template(), joints: ti.template(),
                      contacts: ti.template(), solver: ti.template(), coloring: ti.template(),
                      counts: ti.template(), n_members: ti.i32, by_world: ti.template(),
                      n_worlds: ti.i32, n_bodies: ti.i32, n_joints: ti.i32, n_pairs: ti.i32,
                      n_colors: ti.i32, overflow: ti.i32, substeps: ti.i32, gravity: vec2,
                      h: ti.f32, dt: ti.f32, before_coloring: ti.i32, begun: ti.i32,
                      bullets: ti.i32, uneven: ti.i32):
    """The step's substeps, one launch (substeps_by_world: a member per world; else
    substeps_by_team: a CPU team of n_members threads sharing every stage);
    `before_coloring`, `begun`: as in _begin_substep (with before_coloring, only the first
    substep's stages up to the narrow phase run: begin_step). A member's bodies, joint
    slots and pairs are its world's, or its share of all of them; on a team, a barrier ends
    every stage (a team of one, or a world, waits for nothing). A world per loop item; a
    team thread per task of the CPU backend's thread pool (team.member_of). `by_world` is
    compiled in: a process of small worlds (or of large ones) compiles only its mode."""
    team_size, stride = 1, 1
    if ti.static(not by_world):
        team_size, stride = n_members, team.items_per_member(n_members)
    n_slots = n_worlds * n_bodies
    for item in range(n_members * stride):
        member = team.member_of(item, stride)
        if member >= 0:
            bodies_lo, bodies_hi = member * n_bodies, (member + 1) * n_bodies
            joints_lo, joints_hi = member * n_joints, (member + 1) * n_joints
            pairs_lo, pairs_hi, team_member = 0, 0, 0
            if ti.static(by_world):
                pairs_lo = contacts.pair_start[bodies_lo]
                pairs_hi = contacts.pair_start[bodies_hi]
            else:
                bodies_lo, bodies_hi = team.share(0, n_slots, member, n_members)
                joints_lo, joints_hi = team.share(0, n_worlds * n_joints, member, n_members)
                pairs_lo, pairs_hi, team_member = 0, n_pairs, member
            first_pair_block, n_pair_blocks = team.dealt_blocks(pairs_lo, pairs_hi,
                                                                 team_member)
            for substep in range(1 if before_coloring == 1 else substeps):
                if substep > 0 or begun == 0 or before_coloring == 1:
                    for joint_slot in range(joints_lo, joints_hi):
                        update_motor(bodies, joints, joint_slot, n_joints, n_bodies, h)
                    team.barrier(counts, team_size, team.SPIN_LIMIT)
                    for slot in range(bodies_lo, bodies_hi):
                        _push_body(model, bodies, joints, slot, n_bodies, n_joints, gravity,
                                   h, substep)
                    team.barrier(counts, team_size, team.SPIN_LIMIT)
                # The pairs in blocks dealt round the team (team.dealt_blocks): in colour
                # order the pairs without points, cheap here, lie at the end.
                block = first_pair_block
                while block < n_pair_blocks:
                    lo = pairs_lo + block * team.PAIR_BLOCK
                    for pair in range(lo, ti.min(lo + team.PAIR_BLOCK, pairs_hi)):
                        _pair_stages(model, bodies, joints, contacts, solver, coloring, pair,
                                     n_bodies, dt, h, substep, before_coloring == 1,
                                     begun == 1, gravity)
                    block += team_size
                if before_coloring == 1:
                    continue  # begin_step ends here
                team.barrier(counts, team_size, team.SPIN_LIMIT)
                for slot in range(bodies_lo, bodies_hi):
                    _move_body(model, bodies, contacts, solver, slot, n_bodies, h)
                team.barrier(counts, team_size, team.SPIN_LIMIT)
                _team_pass(model, bodies, joints, contacts, solver, coloring, counts,
                           _position_stage, True, member, team_size, by_world, n_bodies,
                           n_joints, n_colors, overflow, h,
                           JOINT_SWEEPS if n_joints > 0 else 1, 0)
                # _end_position_pass's stages: a body's sweep (bullets: a second, after
                # every body's first, the team waiting in between), then its velocity
                # derived. One inlined sweep_body (compile time).
                for sweep in range(1 + bullets):
                    for slot in range(bodies_lo, bodies_hi):
                        sweep_body(model, bodies, contacts, solver, slot, n_bodies, sweep == 1)
                        if n_joints > 0 and sweep == bullets:
                            _derive_velocity(model, bodies, joints, slot, n_bodies, h)
                    team.barrier(counts, team_size, team.SPIN_LIMIT)
                _team_pass(model, bodies, joints, contacts, solver, coloring, counts,
                           _velocity_stage, False, member, team_size, by_world, n_bodies,
                           n_joints, n_colors, overflow, h, 1, uneven)
