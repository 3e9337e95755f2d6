"""The substeps with a launch per stage group (GPU backends; CPU scenes without a team).

It walks the scene's solver's stage list (solver/stages.py's STAGES: SUBSTEP_STAGES for
XPBD, SOFT_STEP_STAGES for the soft step): the item stages between two colour passes run
in one kernel, each a parallel loop over its domain (stages.stage_groups: motors to
integrate positions, then continuous and derive velocities); a colour pass launches a
kernel per StepOptions.colors_per_launch colours, then the overflow colour (solver/overflow.py).
Profiled (solver/profile.py), every stage is a launch of its own, timed.
"""

from typing import TYPE_CHECKING

import taichi as ti

from ...device import MAX_COLORS
from ...device.launching import quick
from . import fused
from .coloring import one_color_by_world
from .contacts import REPEAT_SOLVE, swept_again
from .joints import JOINT_SWEEPS
from .overflow import solve_overflow
from .profile import NO_PROFILE
from .stages import (
    BEGIN_STEP_STAGES,
    BODY_SLOTS,
    JOINT_SLOTS,
    PAIRS,
    STAGES,
    Substep,
    begun_before,
    runs,
    runs_on_host,
    stage_groups,
)

if TYPE_CHECKING:
    from .context import StepContext

vec2 = ti.math.vec2

# Colours solved per kernel launch of a colour pass (StepOptions.colors_per_launch, 2 by default).
# Each colour is a top-level (parallel) loop of the kernel, run one after the other; more per launch
# means fewer launches from Python (~17 us each through launching.quick, 2 passes x colours / this x
# 11 substeps a step: 110 of the awake large pyramid's 131 launches a step with 10 colours) but a
# first compile that grows faster than linearly: the first step of a small scene with an empty
# offline cache took 35 s with 4 (_solve_colors 23 s of it), 20 s with 2, 12 s with 1; the awake
# large pyramid's ms/step did not change measurably from 4 to 2 (within this machine's +-25 %), and
# grew by a quarter with 1 (2-core CPU). Read at each launch (a new value compiles its own kernel):
# on a GPU, where the launches from Python may be most of a step, `python -m benchmarks
# --colors-per-launch N` measures other values. The results are the same bit for bit whatever it is
# (the colours run in the same order).

#: solve_pass's subsets: every constraint; the joints alone (the position pass's later
#: sweeps); the contacts with an immovable body (the velocity pass's last sweep, its
#: overflow colour excepted).
ALL, JOINTS_ALONE, IMMOVABLE = 0, 1, 2


def substep(ctx: "StepContext", index: int, profile=NO_PROFILE):
    """Substep `index` (0: the step's first) of ctx's step, a launch per stage group (one
    per stage, timed, where `profile` records)."""
    stages = STAGES[ctx.solver]
    groups = stage_groups(stages)
    if profile.records:
        groups = [(i, i + 1) for i in range(len(stages))]
    for first, last in groups:
        with profile.stage(stages[first].name if last == first + 1 else None):
            if stages[first].is_pass:
                if runs_on_host(stages[first], index, ctx.substeps):
                    colour_pass(ctx, stages[first])
            else:
                run_items(ctx, first, last, index, before_coloring=False)


def begin_step(ctx: "StepContext", profile=NO_PROFILE):
    """begin_step's stages (stages.BEGIN_STEP_STAGES: substep 0's up to the narrow phase,
    before the colouring) in one launch (one per stage where `profile` records). The launch
    is the substeps' first group's kernel, its later stages off (they run AFTER_COLORING):
    a kernel of its own would compile the narrow phase a second time (on lavapipe's Vulkan,
    a small pyramid's first step 88 -> 136 s)."""
    stages = STAGES[ctx.solver]
    first_group = stage_groups(stages)[0]
    assert first_group[0] == 0 and first_group[1] >= BEGIN_STEP_STAGES
    groups = [first_group]
    if profile.records:
        groups = [(i, i + 1) for i in range(BEGIN_STEP_STAGES)]
    for first, last in groups:
        with profile.stage("begin step: " + stages[first].name if last == first + 1 else None):
            run_items(ctx, first, last, 0, before_coloring=True)


def run_items(ctx: "StepContext", first: int, last: int, index: int, before_coloring: bool):
    """The item stages [first:last] of the solver's list (STAGES[ctx.solver]) of substep
    `index`, one launch."""
    pool = ctx.pool
    bullets = ctx.has_bullets and any(
        stage.sweeps_bullets for stage in STAGES[ctx.solver][first:last]
    )
    _item_stages(
        model=pool.model,
        bodies=pool.bodies,
        joints=pool.joints,
        manifolds=pool.manifolds,
        prepared=pool.prepared,
        coloring=pool.coloring,
        counts=pool.counts,
        serial=ctx.serial,
        solver=ctx.solver,
        first=first,
        last=last,
        bullets=bullets,
        n_slots=ctx.n_slots,
        n_pairs=ctx.n_pairs,
        n_bodies=ctx.n_bodies,
        n_joints=ctx.n_joints,
        h=ctx.h,
        dt=ctx.dt,
        substep=index,
        substeps=ctx.substeps,
        before_coloring=int(before_coloring),
        begun=begun_before(ctx.small_coloring),
        jointed=int(ctx.n_joints > 0),
    )


@ti.func
def _domain_size(domain: ti.template(), n_slots, n_pairs, n_bodies, n_joints):
    """Items of a stage's domain over every world."""
    size = n_pairs
    if ti.static(domain == JOINT_SLOTS):
        size = n_joints * (n_slots // ti.max(n_bodies, 1))
    elif ti.static(domain == BODY_SLOTS):
        size = n_slots
    else:
        ti.static_assert(domain == PAIRS)
    return size


@quick
@ti.kernel
def _item_stages(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    solver: ti.template(),
    first: ti.template(),
    last: ti.template(),
    bullets: ti.template(),
    n_slots: ti.i32,
    n_pairs: ti.i32,
    n_bodies: ti.i32,
    n_joints: ti.i32,
    h: ti.f32,
    dt: ti.f32,
    substep: ti.i32,
    substeps: ti.i32,
    before_coloring: ti.i32,
    begun: ti.i32,
    jointed: ti.i32,
):
    """STAGES[solver][first:last] (item stages), each a parallel loop over its domain in
    every world, one after the other; a stage that sweeps bullets twice where the scene has
    bullets (`bullets`, compiled in: the sweep is a good part of the kernel's compile time,
    and scenes without bullets inline it once). `before_coloring`, `begun`: see
    stages.Substep."""
    s = Substep(
        n_bodies=n_bodies,
        n_joints=n_joints,
        h=h,
        dt=dt,
        substep=substep,
        substeps=substeps,
        before_coloring=before_coloring,
        begun=begun,
        bullets=0,
        jointed=jointed,
    )
    for stage in ti.static(STAGES[solver][first:last]):
        for round in ti.static(range(2 if stage.sweeps_bullets and bullets else 1)):
            # Loop lengths, not ifs around the loops: only a kernel's outermost loops run
            # in parallel.
            ti.loop_config(serialize=serial)
            for item in range(
                runs(stage.when, s)
                * _domain_size(stage.domain, n_slots, n_pairs, n_bodies, n_joints)
            ):
                stage.run(
                    model, bodies, joints, manifolds, prepared, coloring, counts, item, s, round
                )


def colour_pass(ctx: "StepContext", stage):
    """A colour pass (stage.run over the constraints, colour after colour, then the overflow
    colour; a pass of contacts alone only where there are pairs): the joints again in
    JOINT_SWEEPS - 1 more sweeps where stage.joint_sweeps (XPBD's position pass); in scenes
    of uneven masses (ctx.immovable_sweep) the contacts with an immovable body again where
    stage.immovable_sweep (XPBD's velocity pass). Small worlds of one colour
    (coloring.one_color_by_world), whose constraints share bodies within the colour, go a
    world per thread (fused.pass_by_world)."""
    if one_color_by_world(ctx):
        fused.pass_by_world(ctx, stage)
        return
    if stage.joints or ctx.n_pairs:
        solve_pass(ctx, stage)
    if stage.joint_sweeps and ctx.n_joints:
        for _ in range(JOINT_SWEEPS - 1):
            solve_pass(ctx, stage, subset=JOINTS_ALONE)
    if stage.immovable_sweep and ctx.n_pairs and ctx.immovable_sweep:
        solve_pass(ctx, stage, subset=IMMOVABLE)


def solve_pass(ctx: "StepContext", stage, subset: int = ALL):
    """stage.run over the constraints of `subset`, colour after colour, then the overflow
    colour in parallel (solver/overflow.py)."""
    constraint = stage.run
    pool, cache = ctx.pool, ctx.cache
    per_launch = ctx.options.colors_per_launch
    for first_color in range(0, cache.n_colors, per_launch):
        _solve_colors(
            model=pool.model,
            bodies=pool.bodies,
            joints=pool.joints,
            manifolds=pool.manifolds,
            prepared=pool.prepared,
            coloring=pool.coloring,
            counts=pool.counts,
            serial=ctx.serial,
            constraint=constraint,
            per_launch=per_launch,
            first_color=first_color,
            n_bodies=ctx.n_bodies,
            h=ctx.h,
            subset=subset,
        )
    if cache.n_overflow and subset != IMMOVABLE:
        solve_overflow(ctx, stage, joints_only=subset == JOINTS_ALONE)


@quick
@ti.kernel
def _solve_colors(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    serial: ti.template(),
    constraint: ti.template(),
    per_launch: ti.template(),
    first_color: ti.i32,
    n_bodies: ti.i32,
    h: ti.f32,
    subset: ti.i32,
):
    """constraint(..., k, n_bodies, h, jacobi_entry) for every constraint k of colours
    first_color ... first_color + per_launch - 1 (those below MAX_COLORS): one colour's
    constraints in parallel, colours in sequence. subset: which constraints (ALL,
    JOINTS_ALONE: a later sweep of the position pass, joints.JOINT_SWEEPS; IMMOVABLE: the
    contacts with an immovable body, again, contacts.IMMOVABLE_SWEEP_RATIO)."""
    for j in ti.static(range(per_launch)):
        color = ti.min(first_color + j, MAX_COLORS)  # MAX_COLORS: an empty range
        end = coloring.color_start[color + 1] if color < MAX_COLORS else coloring.color_start[color]
        ti.loop_config(serialize=serial)
        for i in range(coloring.color_start[color], end):
            k = coloring.color_list[i]
            is_pair = k < counts.n_pairs[None]
            if (
                subset == ALL
                or (subset == JOINTS_ALONE and not is_pair)
                or (
                    subset == IMMOVABLE
                    and is_pair
                    and swept_again(model, manifolds, prepared, k, n_bodies)
                )
            ):
                constraint(
                    model,
                    bodies,
                    joints,
                    manifolds,
                    prepared,
                    counts,
                    k,
                    n_bodies,
                    h,
                    REPEAT_SOLVE if subset == IMMOVABLE else -1,
                )
