"""Broad phase against brute-force AABB overlap (tests/reference/broad_phase.py)."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import device, shapes
from fx2d_gpu.physics.collision import broad_phase

from .reference.broad_phase import scene_pairs


def device_pairs(scene):
    pairs = scene.candidate_pairs()
    as_set = {tuple(int(x) for x in row) for row in pairs}
    assert len(as_set) == len(pairs), "a pair was emitted twice"
    return as_set


def assert_same_pairs(scene):
    expected, near = scene_pairs(scene)
    got = device_pairs(scene)
    # Boxes that touch within 1e-4 m may round either way in float32.
    assert (got ^ expected) <= near, sorted(got ^ expected)[:10]
    return got


def mixed_scene(arch, n_bodies, n_worlds, seed, extent=30.0):
    rng = np.random.default_rng(seed)
    scene = fx.Scene(gravity=(0, 0), n_worlds=n_worlds, arch=arch)
    scene.add_box((0, -extent / 2), (100.0, 1.0), mass=0)  # a 100 m static ground
    scene.add_box((0, extent / 2), (100.0, 1.0), mass=0)
    for i in range(n_bodies - 2):
        kind = i % 3
        mass = 0.0 if i % 17 == 0 else 1.0
        if kind == 0:
            scene.add_circle((0, 0), rng.choice([0.01, 0.05, 0.3, 1.5]), mass=mass)
        elif kind == 1:
            scene.add_box((0, 0), rng.uniform(0.02, 2.0, size=2), mass=mass)
        else:
            legs = rng.uniform(0.05, 1, size=2)
            scene.add_polygon((0, 0), [[0, 0], [legs[0], 0], [0, legs[1]]], mass=mass)
    state = scene.get_state()
    state.position[:, 2:] = rng.uniform(-extent / 2, extent / 2, size=(n_worlds, n_bodies - 2, 2))
    state.angle[:, 2:] = rng.uniform(-np.pi, np.pi, size=(n_worlds, n_bodies - 2))
    state.sleeping[:, 2:] = rng.random((n_worlds, n_bodies - 2)) < 0.1
    scene.set_state(state)
    return scene


def test_mixed_sizes_several_worlds_match_brute_force(arch):
    scene = mixed_scene(arch, 1500, 3, seed=1)
    got = assert_same_pairs(scene)
    assert len(got) > 1000
    assert {w for w, _, _ in got} == {0, 1, 2}
    # Ground (body 0) meets the small bodies lying across it.
    assert any(a == 0 for _, a, _ in got)


NOTED = fx.StepOptions().noted_partners


@pytest.mark.parametrize("noted", [NOTED, 0])
def test_the_steps_broad_phase_matches_brute_force(arch, noted):
    # Into the step's own pair list a body's partners are noted while they are counted and
    # written from the notes (broad_phase._find_pairs); a body with more partners than it
    # notes (the 100 m grounds) searches again. Both ways, and with no notes at all, the
    # pairs are brute force's and in the same order.
    scene = mixed_scene(arch, 1500, 3, seed=2)
    scene.step_options = {"noted_partners": noted}
    ctx = scene.step_context()
    n = broad_phase.find_candidate_pairs(ctx)  # (into="manifolds": the step's pairs)
    nb = scene.n_bodies
    a = ctx.pool.manifolds.body_a.to_numpy()[:n].astype(np.int64)
    b = ctx.pool.manifolds.body_b.to_numpy()[:n].astype(np.int64)
    got = {(int(x) // nb, int(x) % nb, int(y) % nb) for x, y in zip(a, b, strict=True)}
    assert len(got) == n, "a pair was written twice"
    expected, near = scene_pairs(scene)
    assert (got ^ expected) <= near, sorted(got ^ expected)[:10]
    owned = np.diff(ctx.pool.manifolds.pair_start.to_numpy()[: ctx.n_slots + 1])
    assert (owned > NOTED).any()  # bodies that search again
    assert ((owned > 1) & (owned <= NOTED)).sum() > 100  # and that write from their notes
    # Each body's pairs in partner order, whichever way they were written.
    owner = np.repeat(np.arange(ctx.n_slots), owned)
    partner = a + b - owner
    same_owner = owner[1:] == owner[:-1]
    assert (partner[1:][same_owner] > partner[:-1][same_owner]).all()


def test_world_bodies_never_pair_across_worlds(arch):
    # Every world holds the same poses: each pair must appear once per world, never mixed.
    scene = fx.Scene(gravity=(0, 0), n_worlds=4, arch=arch)
    for i in range(10):
        scene.add_circle((0.3 * i, 0.0), 0.2)
    pairs = device_pairs(scene)
    per_world = [{(a, b) for w, a, b in pairs if w == world} for world in range(4)]
    assert all(p == per_world[0] for p in per_world)
    assert per_world[0] == {(i, i + 1) for i in range(9)}


def test_static_pairs_are_skipped(arch):
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_box((0, 0), (2, 2), mass=0)
    scene.add_box((1, 0), (2, 2), mass=0)
    scene.add_circle((2, 0), 0.5)
    assert device_pairs(scene) == {(0, 1, 2)}


# The slow tier (pytest -m slow): 20,000 bodies grow the process's device pool to ~1 GB
# (residency.GROWTH_HEADROOM), which every later test of the process then keeps, and
# every kernel compiles again for it (~1 min): so it runs first (grows_pool, conftest).
@pytest.mark.slow
@pytest.mark.grows_pool
def test_dense_pile_grows_buffers_and_loses_nothing(arch):
    # 20,000 bodies packed so densely that the pairs outgrow the pool's first pair buffer.
    rng = np.random.default_rng(7)
    n = 20000
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    # Boxes and circles in turn, added in one call (the same bodies as one by one).
    scene.add_shapes(
        np.zeros((n, 2)),
        [
            shapes.circle(rng.uniform(0.3, 0.6)) if i % 2 else shapes.box(rng.uniform(0.4, 1.0, 2))
            for i in range(n)
        ],
    )
    state = scene.get_state()
    state.position[0] = rng.uniform(0, 45, size=(n, 2))
    state.angle[0] = rng.uniform(-np.pi, np.pi, size=n)
    scene.set_state(state)
    got = assert_same_pairs(scene)
    assert len(got) > device.MIN_CAPACITIES["pairs"]
    assert scene.step_context().pool.pair_capacity >= len(got)
    # And the contacts of those pairs are all there: every overlapping circle pair has one.
    contacts = scene.contacts()
    assert len(contacts) > 0.5 * len(got)


_EXTREMES = """
import json
import numpy as np
import fx2d_gpu as fx


def run(scene, steps):  # "stepped", or "raised " and the SimulationError's message
    try:
        for _ in range(steps):
            scene.step(1 / 60)
    except fx.SimulationError as error:
        return "raised " + str(error)
    return "stepped"


out = {}
for speed in (1e9, 9.9e9):  # just under shapes.MAX_SPEED
    scene = fx.Scene(arch="cpu")
    scene.add_box((0, -0.5), (20, 1), mass=0)
    boxes = [scene.add_box((1.1 * i, 0.5), (1, 1)) for i in range(5)]
    scene.add_circle((-5, 0.5), 0.3, velocity=(speed, 0))
    outcome = run(scene, 3)
    out[f"{speed:g}"] = [outcome, bool(np.isfinite(scene.get_state().position).all())]
for on_fault in ("raise", "reset"):
    scene = fx.Scene(gravity=(0, 0), arch="cpu", on_fault=on_fault)
    base = scene.add_box((0, 0), (0.4, 0.4), mass=0)
    arm = scene.add_box((1, 0), (2, 0.25), mass=1, inertia=0.5)
    scene.add_revolute_joint(base, arm, control_mode="velocity", target=3.0, pid=(1e30, 0, 0))
    outcome = run(scene, 10)
    out[on_fault] = [outcome, list(map(int, scene.faulted_worlds)),
                     bool(np.isfinite(scene.get_state().angle).all())]
print(json.dumps(out))
"""


def test_extreme_speeds_and_gains_neither_crash_nor_hang():
    """Issue 14 item 3: a body at 1e20 m/s crashed the interpreter in its first step (its
    swept AABB spanned ~1e18 cells) and 1e15 m/s hung a step for minutes; a PID gain of 1e30
    crashed in the third step. Speeds from 1e10 m/s are now refused at input
    (test_faults.py); in a child process (a crash fails the test, not pytest) a body just
    under that limit steps normally, and the runaway PID is a SimulationError naming world
    and body, or (on_fault="reset") a reset world."""
    import json
    import os
    import subprocess
    import sys

    run = subprocess.run(
        [sys.executable, "-c", _EXTREMES],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, PYTHONPATH=os.getcwd()),
    )
    assert run.returncode == 0, run.stderr[-2000:]
    figures = json.loads(run.stdout.strip().splitlines()[-1])
    for speed in ("1e+09", "9.9e+09"):
        assert figures[speed] == ["stepped", True], (speed, figures[speed])
    outcome, _, _ = figures["raise"]
    assert outcome.startswith("raised step 1: world 0, body 1"), outcome
    # The gain runs away again after every reset: the world is reset every step, and the
    # scene keeps stepping with finite state.
    assert figures["reset"] == ["stepped", [0], True]
