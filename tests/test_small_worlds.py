"""Small worlds (at most solver/context.BY_WORLD_MAX_BODIES bodies) take their own path
through a step: the broad phase checks every body of a world instead of hashing, and all
substeps run in one launch, one world per thread, each world's constraints one after the
other in its own order (one colour: StepOptions.color_small_worlds off). Coloured as the general
path colours them, they are solved in its order: the general path (grid, one launch per
stage and group of colours) is then the independent reference, and the two must agree bit
for bit, because a colour's constraints share no dynamic body, so solving them in sequence
or in parallel is the same arithmetic."""

import numpy as np
import pytest
import taichi as ti

import fx2d_gpu as fx
from fx2d_gpu import device
from fx2d_gpu.device import MAX_COLORS
from fx2d_gpu.physics.solver import context, team
from fx2d_gpu.physics.solver import pairs as solver_pairs
from fx2d_gpu.scenes import batched_small

from .helpers import (
    COLORED_LIKE_GENERAL,
    DT,
    GENERAL_PATH,
    TRACE_FIELDS,
    SubstepsByWorld,
    assert_same_trace,
    launches_of,
    machine_scene,
    trace,
    xfail_where_paths_round_apart,
)


# Serial loops on the CPU; parallel ones (more worlds than device.SERIAL_WORLDS).
@pytest.mark.parametrize("n_worlds", [3, device.SERIAL_WORLDS + 1])
def test_small_worlds_step_bitwise_like_the_general_path(arch, n_worlds, request):
    xfail_where_paths_round_apart(request, arch)
    scene = machine_scene(n_worlds, arch, step_options=COLORED_LIKE_GENERAL)
    ctx = scene.step_context()
    assert ctx.serial == (ctx.cpu and n_worlds == 3)
    by_world = SubstepsByWorld()
    small = trace(scene, 150, each=by_world)
    assert by_world.steps == 150  # every step took the small-world path ...
    assert small["events"][0][0] > 0 and max(e[1] for e in small["events"]) > 0
    assert small["state"]["sleeping"].any()  # ... with contacts, events and sleep in it

    by_world = SubstepsByWorld()
    general = trace(machine_scene(n_worlds, arch, step_options=GENERAL_PATH), 150, each=by_world)
    assert by_world.steps == 0
    assert_same_trace(small, general)


def test_a_world_alone_and_in_a_batch_agree_on_the_small_world_path(arch):
    batch = trace(machine_scene(40, arch), 60)
    alone = trace(machine_scene(1, arch), 60)
    for name in TRACE_FIELDS:
        np.testing.assert_array_equal(batch["state"][name][:1], alone["state"][name], err_msg=name)


def _hub(arch, step_options=None):
    """A circle and 36 rim circles thrown at it: more than MAX_COLORS (31) constraints on
    one body, in a small world (37 bodies)."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, step_options=step_options)
    scene.add_circle((0.0, 0.0), 1.0)
    for angle in np.linspace(0.0, 2.0 * np.pi, 36, endpoint=False):
        scene.add_circle(
            (1.07 * np.cos(angle), 1.07 * np.sin(angle)),
            0.08,
            velocity=(-np.cos(angle), -np.sin(angle)),
        )
    return scene


def test_an_overflowing_colouring_falls_back_to_the_general_path(arch):
    """Coloured as the general path colours (StepOptions.color_small_worlds), a hub touched
    by more circles than there are colours overflows; those steps are solved through the
    overflow's Jacobi pass, with the same results as the general path."""
    by_world = SubstepsByWorld()
    scene = _hub(arch, COLORED_LIKE_GENERAL)
    assert scene.n_bodies <= context.BY_WORLD_MAX_BODIES
    first = trace(scene, 1, each=by_world)
    assert scene.n_overflow > 0 and by_world.steps == 0
    small = trace(scene, 20)
    general = _hub(arch, GENERAL_PATH)
    assert_same_trace(first, trace(general, 1))
    assert_same_trace(small, trace(general, 20))


def test_small_worlds_take_one_colour_solved_in_each_worlds_order(arch):
    """By default (StepOptions.color_small_worlds off) a small world's constraints all take
    colour 0 and its thread solves them in its own order: its pairs where the broad phase
    put them (pair_origin the identity), then its joints; nothing overflows."""
    by_world = SubstepsByWorld()
    scene = machine_scene(5, arch)
    for _ in range(30):
        scene.step(DT)
        by_world()
    ctx = scene.step_context()
    assert by_world.steps == 30 and ctx.n_pairs > 0 and ctx.n_joints > 0
    assert (scene.n_colors, scene.n_overflow) == (1, 0)
    coloring = ctx.pool.coloring
    np.testing.assert_array_equal(coloring.color.to_numpy()[: ctx.n_constraints], 0)
    np.testing.assert_array_equal(
        coloring.pair_origin.to_numpy()[: ctx.n_pairs], np.arange(ctx.n_pairs)
    )


def test_a_hub_of_one_colour_stays_on_the_small_world_path(arch):
    """The hub that overflows the general path's colours takes one colour and is solved a
    world per thread, every step; with nothing else in its world (no gravity) its contacts'
    impulses are equal and opposite, so its total momentum stays what it was: zero, the
    rim's throws cancelling."""
    by_world = SubstepsByWorld()
    scene = _hub(arch)
    state = scene.get_state()
    masses = scene.get_body_params()["mass"][0]
    thrown = np.abs(masses[:, None] * state.velocity[0]).sum()
    inward = state.velocity[0, 1:].copy()  # thrown at the hub, 1 m/s
    scene.step(DT)
    by_world()
    hub_pairs = scene.candidate_pairs()
    assert (hub_pairs[:, 1] == 0).sum() > MAX_COLORS  # more than there are colours
    for _ in range(19):
        scene.step(DT)
        by_world()
    assert by_world.steps == 20 and scene.n_overflow == 0 and scene.n_colors == 1
    state = scene.get_state()
    assert ((state.velocity[0, 1:] * inward).sum(axis=1) < 0.0).all()  # all turned back
    momentum = (masses[:, None] * state.velocity[0]).sum(axis=0)
    assert np.abs(momentum).max() < 1e-5 * thrown


@ti.kernel
def _first_and_last_meet(counts: ti.template(), n_worlds: ti.i32, stride: ti.i32) -> ti.i32:
    """A loop a world per item as the substeps' (team.member_of over n_worlds * stride
    items) where the first and the last world wait for each other at a barrier; returns the
    waits that ran out (0: the two ran at the same time, on different threads)."""
    for item in range(n_worlds * stride):
        world = team.member_of(item, stride)
        if world == 0 or world == n_worlds - 1:
            team.barrier(counts, 2, team.PROBE_SPIN_LIMIT)
    return counts.barrier[team.TIMEOUTS]


def test_a_few_hundred_worlds_solve_on_every_cpu_thread(arch):
    """Taichi's CPU backend runs a loop in tasks of team.TASK_ITEMS items, a task on one
    thread: the substeps of 256 worlds, an item each, were one task on one thread. Their
    loop strides the worlds (team.world_stride) so that the first and the last world lie in
    tasks that run at once: they meet at a barrier, where with an item a world the first
    waits for the last in vain. A GPU runs a world per thread (stride 1)."""
    scene = batched_small(256, arch=arch)
    ctx = scene.step_context()
    stride = team.world_stride(ctx)
    if not ctx.cpu:
        assert stride == 1
        return
    assert ctx.serial  # the other loops of so few small worlds run serially
    counts = ctx.pool.counts
    try:
        if team.usable_threads() > 1:
            team.clear_barriers(counts)
            assert _first_and_last_meet(counts, 256, stride) == 0
        team.clear_barriers(counts)
        assert _first_and_last_meet(counts, 256, 1) == 1  # one task: one thread
    finally:
        team.clear_barriers(counts)
    # And the results are the same whatever the stride (a world stays on one thread): the
    # 256 worlds again as scenes of 16 (too few for more than one task: stride 1).
    assert stride > 1
    velocity = scene.get_state().velocity
    strided = trace(scene, 30)
    for first in range(0, 256, 16):
        part = batched_small(16, arch=arch)
        state = part.get_state()
        state.velocity[:] = velocity[first : first + 16]
        part.set_state(state)
        assert team.world_stride(part.step_context()) == 1
        assert_same_worlds(strided, trace(part, 30), first)


def assert_same_worlds(batch: dict, part: dict, first: int):
    """`part`, a trace of a scene of worlds first, first + 1, ... of `batch`'s scene, equals
    those worlds' rows of `batch` bit for bit: state and every step's contacts."""
    n = len(part["state"]["position"])
    for name in TRACE_FIELDS:
        np.testing.assert_array_equal(
            batch["state"][name][first : first + n], part["state"][name], err_msg=name
        )
    for step_batch, step_part in zip(batch["contacts"], part["contacts"], strict=True):
        rows = (step_batch[0] >= first) & (step_batch[0] < first + n)
        np.testing.assert_array_equal(step_batch[0][rows] - first, step_part[0])
        for column_batch, column_part in zip(step_batch[1:], step_part[1:], strict=True):
            np.testing.assert_array_equal(column_batch[rows], column_part)


@pytest.mark.parametrize(
    "flag, separate",
    [
        ("carry_in_coloring", ("pairs._carry_contacts", "pairs._plan_world_order")),
        ("sleep_in_report", ("sleep._label_by_world",)),
        ("save_in_broad_phase", ("pairs._save_previous_pairs",)),
    ],
)
def test_a_small_world_step_folds_launches_without_changing_a_bit(arch, flag, separate):
    """The small worlds' step folds launches together (each wakes the CPU thread pool):
    carrying the contacts, the colouring and the worlds' solve order in one
    (coloring._color_worlds with carry; its colour lists are always in it), saving last
    step's pairs and the broad phase in one (sleep._find_pairs_waking_by_world with save),
    the report and the sleep in one
    (reporting._report_by_world with sleep). Folded, the step runs none of the kernels it
    replaces and gives what they give, bit for bit (state, contacts, events, sleep)."""
    steps = 120
    before = launches_of(*separate)
    folded = trace(machine_scene(40, arch), steps)
    assert launches_of(*separate) == before
    assert folded["state"]["sleeping"].any()
    apart = trace(machine_scene(40, arch, step_options={flag: False}), steps)
    assert launches_of(*separate) - before == steps * len(separate)
    assert_same_trace(folded, apart)


def test_a_small_world_without_constraints_still_plans_its_solve_order(arch):
    """A world with no constraint yet (a box falling towards the ground) still gets its
    per-body contact lists (empty) from the colouring's launch, as from
    pairs.store_in_color_order's own: the lists another scene's step left in the shared
    pool are never read. (Planned only where there were constraints, the fold let a box
    fall through with the last scene's lists.)"""

    def run(**step_options):
        busy = batched_small(8, arch=arch, step_options=step_options)
        for _ in range(20):
            busy.step(1 / 60)
        scene = fx.Scene(arch=arch, step_options=step_options)
        scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)
        scene.add_box((0.0, 2.0), (0.5, 0.5))
        return trace(scene, 60)

    folded = run()
    assert abs(folded["state"]["position"][0, 1, 1] - 0.25) < 0.01  # it landed, and rests
    assert_same_trace(folded, run(carry_in_coloring=False))


def test_a_small_world_broad_phase_launched_again_does_not_save_the_pairs_again(arch, monkeypatch):
    """A broad phase whose pairs outgrow the pool grows it (copied as it was) and launches
    again (broad_phase.find_candidate_pairs): only the first launch saves last step's pairs
    (step._saving_first_launch), since it began to overwrite them (the pair ranges). Every
    step's launch made twice here, as such a retry would, the run is bitwise one launch a
    step; saving in both, the contacts carried from the overwritten pairs would differ."""
    find_candidate_pairs = solver_pairs.find_candidate_pairs

    def launched_twice(
        ctx, margin=0.0, motion_time=0.0, into="manifolds", fat=False, by_world=None
    ):
        if by_world is not None:  # the step's small worlds: a first launch, as if too small
            pool = ctx.pool
            by_world(
                ctx,
                (
                    pool.model,
                    pool.bodies,
                    pool.joints,
                    pool.manifolds,
                    pool.grid,
                    pool.counts,
                    pool.scan,
                    ctx.serial,
                ),
                margin,
                motion_time,
                fat,
            )
        return find_candidate_pairs(ctx, margin, motion_time, into, fat, by_world)

    once = trace(machine_scene(40, arch), 90)
    monkeypatch.setattr(solver_pairs, "find_candidate_pairs", launched_twice)
    assert_same_trace(once, trace(machine_scene(40, arch), 90))
