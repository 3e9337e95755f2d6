"""A small worlds' step in one launch (StepOptions.small_worlds_in_one_launch,
fused.step_by_world): the broad phase with last step's pairs saved and the wakes it brings,
the colouring with the carry, the substeps a world per thread, the faults, the report and
the sleep pass as loops of one kernel, each going on only where the one before allows.
Compiled on GPU backends; here on the CPU with fold_on_cpu. Every step must give bit for
bit what the stages' own launches give (the option off): the state, the contacts, the
events, where the launch goes all the way, where its pairs outgrow the pool (it stops after
its broad phase, the pool grows and it runs again without saving last step's pairs twice),
and where the colouring overflows (it stops after the colouring, the step is solved across
worlds)."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.device import launching

from .helpers import COLORED_LIKE_GENERAL, DT, TRACE_FIELDS, launches_of

N_WORLDS, STEPS = 64, 100
#: The step before which some worlds' resting stacks are pushed (woken).
PUSH = 70


def _piles(arch, solver, n_worlds=N_WORLDS, **options):
    """n_worlds small worlds of 10 bodies: a static ground, a stack of three boxes and three
    circles dropped beside it (each world's from its own heights and offsets, some thrown),
    and a bar hinged to a static anchor; the piles come to rest and fall asleep."""
    scene = fx.Scene(
        n_worlds=n_worlds, arch=arch, solver=solver, step_options={"fold_on_cpu": True, **options}
    )
    friction = dict(static_friction=0.6, dynamic_friction=0.5)
    scene.add_box((0.0, -0.5), (14.0, 1.0), mass=0.0, **friction)
    for level in range(3):
        scene.add_box((-2.0, 0.45 + 0.95 * level), (0.9, 0.9), **friction)
    for i in range(3):
        scene.add_circle((1.0 + 0.7 * i, 0.6 + 0.9 * i), 0.3, **friction)
    anchor = scene.add_box((5.0, 3.0), (0.2, 0.2), mass=0.0)
    bar = scene.add_box((5.7, 3.0), (1.2, 0.2), **friction)
    scene.add_revolute_joint(anchor, bar, anchor=(0.0, 0.0))
    state = scene.get_state()
    rng = np.random.default_rng(74)
    state.position[:, 1:4, 0] += rng.uniform(-0.08, 0.08, (n_worlds, 1))
    state.position[:, 1:4, 1] += rng.uniform(0.0, 0.6, (n_worlds, 1)) * np.arange(1, 4)
    state.position[:, 4:7, 1] += rng.uniform(0.0, 1.5, (n_worlds, 3))
    thrown = rng.random(n_worlds) < 0.25  # a quarter of the worlds throw their circles
    state.velocity[thrown, 4:7, 0] = rng.uniform(-3.0, 3.0, (int(thrown.sum()), 3))
    scene.set_state(state)
    return scene


def _run(scene, steps=STEPS, each=None, read_each=True):
    """Every step's state, contacts and events of `steps` steps (`each(step)` before each;
    without `read_each` the last step's only), and the engine's launches in each step."""
    out, launches = [], []
    pushed = np.zeros((scene.n_worlds, 2), np.float32)
    pushed[::3] = (0.0, 40.0)  # every third world's stack pushed up (woken)
    for step in range(steps):
        if each is not None:
            each(step)
        if step == PUSH:
            scene.apply_force(2, pushed)
        before = launching.launch_count()
        scene.step(DT)
        launches.append(launching.launch_count() - before)
        if not read_each and step < steps - 1:
            continue
        state = scene.get_state()
        c = scene.contacts(world=None)
        e = scene.contact_events()
        out.append(
            (
                *(getattr(state, name).copy() for name in TRACE_FIELDS),
                c.world,
                c.body_a,
                c.body_b,
                c.normal_impulse,
                c.tangent_impulse,
                e.begin.world,
                e.begin.body_a,
                e.begin.body_b,
                e.end.world,
                e.end.body_a,
                e.end.body_b,
            )
        )
    return out, launches


def _assert_same_steps(a, b):
    for step, (got, wanted) in enumerate(zip(a, b, strict=True)):
        for k, (x, y) in enumerate(zip(got, wanted, strict=True)):
            np.testing.assert_array_equal(x, y, err_msg=f"step {step}, entry {k}")


def test_small_worlds_step_in_one_launch_bitwise_as_their_stages(arch, solver):
    if arch != "cpu":
        pytest.skip("the GPU path is counted on the CPU (fold_on_cpu); test_vulkan runs it")
    substeps_before = launches_of("fused._substeps")
    apart_kernels = (
        "sleep._find_pairs_waking_by_world",
        "coloring._color_worlds",
        "reporting._report_by_world",
    )
    apart_before = launches_of(*apart_kernels)
    stage_before = launching.stage_launches()
    folded, launches = _run(_piles(arch, solver))
    stage_after = launching.stage_launches()
    # One launch a step, the first's after set_state too (its report in the launch: no
    # body was set asleep), the push's forces sent to the device aside (the step's launch
    # clears them after its sleep pass).
    assert launches == [1 + int(step == PUSH) for step in range(STEPS)], launches
    assert launches_of("fused._substeps") - substeps_before == STEPS
    assert launches_of(*apart_kernels) == apart_before
    assert stage_after["find pairs"] - stage_before.get("find pairs", 0) == STEPS
    for stage in ("colour", "substeps", "sleep"):
        assert stage_after.get(stage, 0) == stage_before.get(stage, 0), stage

    sleeping = np.array([step[TRACE_FIELDS.index("sleeping")].sum() for step in folded])
    assert sleeping[PUSH - 1] > 0 and sleeping[PUSH + 1] < sleeping[PUSH - 1]  # slept, woken
    assert sum(len(step[-6]) for step in folded) > 0  # begin events
    assert sum(len(step[-3]) for step in folded) > 0  # end events

    apart, apart_launches = _run(_piles(arch, solver, small_worlds_in_one_launch=False))
    assert min(apart_launches[1:]) >= 4
    _assert_same_steps(folded, apart)


def test_an_overflowing_small_world_stops_its_launch_after_the_colouring(arch):
    """Coloured as the general path colours (StepOptions.color_small_worlds), a hub touched by
    more circles than there are colours overflows: the one launch stops after its
    colouring, and the host solves the step across worlds, as after the colouring's own
    launch; then the same results bit for bit."""
    if arch != "cpu":
        pytest.skip("the GPU path is counted on the CPU (fold_on_cpu); test_vulkan runs it")
    from .test_small_worlds import _hub

    def hub(**options):
        return _hub(arch, {**COLORED_LIKE_GENERAL, "fold_on_cpu": True, **options})

    runs = {}
    for in_launch in (True, False):
        scene = hub(small_worlds_in_one_launch=in_launch)
        first, _ = _run(scene, 1)
        assert scene.n_overflow > 0
        runs[in_launch] = first + _run(scene, 11)[0]
    _assert_same_steps(runs[True], runs[False])


_GROWTH = textwrap.dedent("""
    import hashlib
    from fx2d_gpu import device
    from fx2d_gpu.device import launching, residency, runtime
    runtime.ensure_initialized("cpu")
    # A first pool too small for the piles' pairs, grown to fit them (no headroom) as they
    # pile up: 256 pairs, then 512 from about step 30 (a first pool of 64 grew three times,
    # at steps 15, 17 and 30, and each pool compiles the whole step again).
    device.MIN_CAPACITIES.update(pairs=256)
    residency.GROWTH_HEADROOM, residency.PAIRS_PER_SLOT = 1, 0
    from tests.test_small_worlds_one_launch import _piles, _run
    IN_FLIGHT = "fx2d_gpu.physics.solver.fused._worlds_in_flight"

    def digest(steps):
        sha = hashlib.sha1()
        for step in steps:
            for array in step:
                sha.update(array.tobytes())
        return sha.hexdigest()

    def substeps_launched():
        return launching.kernel_launches()["fx2d_gpu.physics.solver.fused._substeps"]

    def pool_capacity():  # (without reading steps in flight, as step_context would)
        pool = residency.current_pool()
        return 0 if pool is None else pool.pair_capacity

    capacities = []
    if "{mode}" == "read_each":
        scene = _piles("cpu", "{solver}")
        launched = substeps_launched()
        steps, _ = _run(scene, each=lambda step: capacities.append(pool_capacity()))
        launched = substeps_launched() - launched
    else:
        # Steps in flight (solver/in_flight.py), read only at the end (and at the push): a
        # launch in flight whose pairs outgrow the pool stops, those after it do nothing,
        # and the read grows the pool, finishes that step and takes the others again.
        options = dict(steps_in_flight=True)
        if "{mode}" == "in_flight_interleaved":
            options["interleave_small_worlds"] = True
        scene = _piles("cpu", "{solver}", **options)
        launched = launching.kernel_launches().get(IN_FLIGHT, 0)
        steps, _ = _run(
            scene, each=lambda step: capacities.append(pool_capacity()), read_each=False
        )
        launched = launching.kernel_launches()[IN_FLIGHT] - launched
    capacities.append(pool_capacity())
    apart, _ = _run(_piles("cpu", "{solver}", small_worlds_in_one_launch=False))
    if "{mode}" != "read_each":
        apart = apart[-1:]
    grew = sum(b > a for a, b in zip(capacities[1:], capacities[2:]))
    print(capacities)
    print(digest(steps) == digest(apart), grew, launched)
""")


# One solver: the launch stops after its broad phase, which both solvers share, and each
# growth compiles the step's kernels again in the child (~1-1.5 minutes a mode on 2 cores).
@pytest.mark.slow  # a child process that compiles the step for two pools, the first outgrown
@pytest.mark.own_processes
@pytest.mark.parametrize("solver", ["xpbd"])
@pytest.mark.parametrize("mode", ["read_each", "in_flight", "in_flight_interleaved"])
def test_a_small_worlds_launch_whose_pairs_outgrow_the_pool_stops_and_runs_again(
    arch, solver, mode
):
    """Where the broad phase in the small worlds' launch finds more pairs than the pool holds,
    the launch stops after it (nothing coloured or solved), the pool grows (copied as it
    was) and the launch runs again, without saving last step's pairs again (the first
    launch began to overwrite their ranges): bitwise the stages' own launches, which grow
    the pool as their broad phase asks. A first pool too small, grown mid-run. In
    flight (`mode`; solver/in_flight.py), read only at the end: the read finds the launch
    that stopped, grows the pool, finishes that step and takes the steps after it again;
    and so with the state interleaved (a GPU's default, solver/interleaved.py), whose pairs
    take every layout as the piles grow: the padded stride, n_worlds, the list's order in
    the first pool's 256 pairs, n_worlds in the grown one (read step by step on 2026-12-05:
    steps 0-15, 16-20, 21-28, then from 29)."""
    if arch != "cpu":
        pytest.skip("the GPU path is counted on the CPU (fold_on_cpu); test_vulkan runs it")
    out = subprocess.run(
        [sys.executable, "-c", _GROWTH.format(solver=solver, mode=mode)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    same, grew, launched = out.stdout.split()[-3:]
    # In flight, the first step builds the scene, the push's waits for its force.
    wanted = STEPS + 1 if mode == "read_each" else STEPS - 2
    assert int(grew) >= 1 and int(launched) >= wanted, out.stdout[-800:]
    assert same == "True"


def test_a_state_set_with_sleepers_checks_their_resting_pairs_at_the_new_poses():
    """Piles asleep, set back 1 m to the right as they are (asleep): the broad phase pairs
    no two sleepers, so the ground's contact with each sleeping stack's bottom box stays
    listed only by the report's check of last step's resting pairs at the new poses
    (reporting._recheck_resting, its own launch): the pair is listed with its points under
    the box where it now lies, 1 m from where it lay (its half width 0.45 m: no point of
    the old manifold is under it). Set again awake, no pair rests: the step's report is in
    its one launch, and the step itself finds the contact there."""
    scene = _piles("cpu", "soft_step", n_worlds=16)
    for _ in range(300):
        scene.step(DT)
    state = scene.get_state()
    asleep = state.sleeping[:, 1:4].all(axis=1)
    assert asleep.sum() >= 4, asleep  # stacks that fell asleep
    state.position[:, :, 0] += np.where(np.arange(scene.n_bodies) > 0, 1.0, 0.0)
    checks = launches_of("reporting._recheck_resting")
    scene.set_state(state)
    scene.step(DT)
    assert launches_of("reporting._recheck_resting") - checks == 1

    def bottom_contacts_under_the_box(worlds):
        contacts, box_x = scene.contacts(world=None), scene.get_state().position[:, 1, 0]
        for world in worlds:
            (row,) = np.flatnonzero(
                (contacts.world == world) & (contacts.body_a == 0) & (contacts.body_b == 1)
            )
            points = contacts.points[row, : contacts.point_count[row], 0]
            assert np.all(np.abs(points - box_x[world]) <= 0.45 + 1e-3), (world, points)

    bottom_contacts_under_the_box(np.flatnonzero(asleep))
    state = scene.get_state()
    state.sleeping[:] = False
    apart = launches_of("reporting._recheck_resting", "reporting._report_by_world")
    returning = launching.returning_count()
    scene.set_state(state)
    scene.step(DT)
    assert launches_of("reporting._recheck_resting", "reporting._report_by_world") == apart
    assert launching.returning_count() - returning == 1  # the step's one launch
    bottom_contacts_under_the_box(range(scene.n_worlds))


def test_a_reset_of_some_worlds_leaves_the_others_sleepers_contacts_as_they_were():
    """Piles asleep, a few worlds reset to their start (every body awake): the step after
    it lists the other worlds' resting contacts (both bodies asleep or static: nothing
    looks at them) exactly as the step before did, the same points, depths and impulses,
    and builds its list in its one launch."""
    scene = _piles("cpu", "soft_step", n_worlds=16)
    start = scene.get_state()
    for _ in range(300):
        scene.step(DT)
    state = scene.get_state()
    sleeping = np.flatnonzero(state.sleeping[:, 1:4].all(axis=1))
    assert len(sleeping) >= 4, sleeping
    reset, kept = sleeping[:2], sleeping[2:]
    fixed = state.sleeping.copy()
    fixed[:, [0, 7]] = True  # the ground and the hinge's anchor: static

    def resting(contacts):
        """{(world, body_a, body_b): row} of the kept worlds' pairs of fixed bodies."""
        return {
            (w, a, b): row
            for row, (w, a, b) in enumerate(
                zip(contacts.world, contacts.body_a, contacts.body_b, strict=True)
            )
            if w in kept and fixed[w, a] and fixed[w, b]
        }

    before = scene.contacts(world=None)
    scene.reset_worlds(reset, start)
    apart = launches_of("reporting._recheck_resting", "reporting._report_by_world")
    scene.step(DT)
    assert launches_of("reporting._recheck_resting", "reporting._report_by_world") == apart
    after = scene.contacts(world=None)
    rows_before, rows_after = resting(before), resting(after)
    assert len(rows_before) >= 2 * len(kept) and rows_before.keys() == rows_after.keys()
    for name in ("points", "depths", "normal", "normal_impulse", "tangent_impulse"):
        np.testing.assert_array_equal(
            getattr(after, name)[list(rows_after.values())],
            getattr(before, name)[list(rows_before.values())],
            name,
        )


def test_a_resize_of_sleeping_worlds_reports_in_the_steps_launch():
    """set_shape_params wakes every body of the worlds it resizes (write_resized), so no
    resting pair is left to check at the new sizes: the step after it builds its reported
    list in its one launch, as after a restart (a Levels reset resizes its worlds), where
    an inertia alone changed checks the resting pairs apart, as after set_state."""
    scene = _piles("cpu", "soft_step", n_worlds=16)
    for _ in range(300):
        scene.step(DT)
    sleeping = np.flatnonzero(scene.get_state().sleeping[:, 1:4].all(axis=1))
    assert len(sleeping) >= 2, sleeping
    apart = ("reporting._recheck_resting", "reporting._report_by_world")
    scene.set_shape_params(1, size=(0.8, 0.9), world=sleeping[:2])
    before = launches_of(*apart)
    scene.step(DT)
    assert launches_of(*apart) == before
    assert not scene.get_state().sleeping[sleeping[:2], 1].any()  # woken
    scene.set_shape_params(2, inertia=0.2, world=sleeping[2:])
    before = launches_of(*apart)
    scene.step(DT)
    assert launches_of(*apart) - before == 2
