"""Steps refused for what they would cost (residency.CapacityError) leave the scene as it was,
bodies spawned at one point spread over the plane, and long static terrain starts in
linear time (issue 42, items 2 and 4)."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.device import residency, runtime
from fx2d_gpu.physics.collision import broad_phase
from fx2d_gpu.physics.solver.contacts import LINEAR_SLOP

RADIUS = 0.1


def pile_at_one_point(n: int, gravity=(0.0, -9.81)) -> fx.Scene:
    scene = fx.Scene(arch="cpu", gravity=gravity)
    scene.add_box((0.0, -0.5), (200.0, 1.0), mass=0.0)
    scene.add_circles(np.tile([[0.0, 5.0]], (n, 1)), RADIUS)
    return scene


def same_state(a: fx.State, b: fx.State) -> bool:
    return all(
        np.array_equal(getattr(a, key), getattr(b, key))
        for key in ("position", "angle", "velocity", "angular_velocity", "sleeping")
    )


def test_a_pile_at_one_point_is_refused_with_its_count_and_the_scene_stays_usable():
    # 1,000 circles at one point, 5 m above the ground: n (n - 1) / 2 = 499,500 pairs, past
    # MAX_PAIRS_PER_BODY a body; before, the steps took 5 s each, and 10,000
    # bricked the scene (every later call refused for memory).
    n = 1000
    scene = pile_at_one_point(n)
    before = scene.get_state()
    with pytest.raises(fx.CapacityError, match=r"499,500 candidate pairs among 1,001 body"):
        scene.step(1 / 60)
    assert isinstance(fx.CapacityError("x"), ValueError)
    assert (scene.time, scene.step_count) == (0.0, 0)
    assert same_state(scene.get_state(), before)
    # Readable and writable: a snapshot, a query, a removal, then spread them and step.
    snapshot = scene.snapshot()
    assert scene.ray_cast((0.0, 9.0), (0.0, -1.0), 5.0).body[0, 0] >= 1
    scene.remove_body(n)  # disabled: it never pairs again
    state = scene.get_state()
    columns = 40
    index = np.arange(n)
    state.position[0, 1:] = np.stack(
        [(index % columns) * 0.25 - 5.0, 0.2 + (index // columns) * 0.25], 1
    )
    scene.set_state(state)
    for _ in range(3):
        scene.step(1 / 60)
    after = scene.get_state()
    assert np.all(np.isfinite(after.position)) and scene.step_count == 3
    # Spread on a grid, the circles fell freely: 3 steps of gravity, to the float32 bit.
    fallen = state.position[0, 1:n, 1] - after.position[0, 1:n, 1]
    np.testing.assert_allclose(fallen, fallen[0], atol=1e-5)
    # The snapshot taken after the refusal is the pile's: restoring it brings the pile back.
    scene.restore(snapshot)
    assert same_state(scene.get_state(), before) and scene.step_count == 0


def test_a_refused_step_keeps_pending_forces_and_the_scene_repeats_a_control_run(monkeypatch):
    # The limit set to nothing refuses the broad phase of any step with a pair (the same
    # path as a pool that cannot grow): the scene must be as if the step was never asked.
    def build():
        scene = fx.Scene(arch="cpu")
        scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0)
        for i in range(4):
            scene.add_box((1.5 * i, 0.5), (1.0, 1.0))
        scene.add_circle((0.0, 3.0), 0.3)
        return scene

    control, refused = build(), build()
    for scene in (control, refused):
        scene.step(1 / 60)
        scene.apply_force(5, (0.0, -500.0))  # the ball, falling: a broad phase each step
    before = refused.get_state()
    with monkeypatch.context() as patch:
        patch.setattr(broad_phase, "MAX_PAIRS_PER_BODY", 0)
        patch.setattr(broad_phase, "PAIR_LIMIT_FLOOR", 0)
        with pytest.raises(fx.CapacityError, match="candidate pairs"):
            refused.step(1 / 60)
    assert same_state(refused.get_state(), before)
    assert (refused.time, refused.step_count) == (control.time, control.step_count)
    # The refused broad phase wrote its pairs over the last step's on the device: the
    # contacts read now are found afresh at the current poses, those of the control.
    assert refused.contacts().pairs() == control.contacts().pairs() != set()
    for scene in (control, refused):
        scene.step(1 / 60)
    # The force applied before the refused step acts in the next one, as in the control: the
    # ball, in free fall (no pair), gets the same push to the bit (500 N on 1 kg for 1/60 s,
    # 8.3 m/s). Only the warm starts of the boxes' pairs were lost (found afresh): a step
    # without them lets a resting box sink a little more into the ground (measured 23 um),
    # well within a tenth of the contact slop (contacts.LINEAR_SLOP, 2 mm).
    a, b = control.get_state(), refused.get_state()
    assert a.velocity[0, 5, 1] == b.velocity[0, 5, 1] < -8.0
    np.testing.assert_allclose(b.position, a.position, atol=0.1 * LINEAR_SLOP)


def test_a_step_refused_for_memory_leaves_the_scene_as_it_was(monkeypatch):
    # The pool made to look full (1 pair) and the memory to hold nothing: the step's broad
    # phase must grow the pool, which check_fits refuses before allocating. Before, the
    # scene kept the need it could not meet (cache.pair_need), so every later call that
    # touched the device (get_state, snapshot, remove_body, ray_cast) was refused as well.
    scene = pile_at_one_point(20)  # 190 pairs, well within the pair limit
    ctx = scene.step_context()
    needs = scene._binding.needs()
    before = scene.get_state()
    with monkeypatch.context() as patch:
        patch.setattr(ctx.pool, "pair_capacity", 1)
        patch.setattr(ctx.pool, "capacities", {**ctx.pool.capacities, "pairs": 1})
        patch.setattr(runtime, "available_memory", lambda: 1024)
        with pytest.raises(fx.CapacityError, match="GiB"):
            scene.step(1 / 60)
    assert scene._binding.needs() == needs
    assert same_state(scene.get_state(), before) and scene.step_count == 0
    scene.snapshot()
    for _ in range(5):
        scene.step(1 / 60)
    assert np.ptp(scene.get_state().position[0, 1:, 0]) > 0.1  # spreading


def test_a_build_refused_for_memory_leaves_the_scene_as_it_was(monkeypatch):
    # A pool the memory cannot hold is refused before anything is allocated
    # (residency.check_fits); the scene keeps its arrays and steps on once it fits.
    scene = fx.Scene(arch="cpu")
    scene.add_circle((0.0, 1.0), 0.5)
    scene.step(1 / 60)
    before = scene.get_state()
    scene.add_circles(np.stack([np.arange(50) * 1.1, np.full(50, 3.0)], 1), 0.5)
    with monkeypatch.context() as patch:
        patch.setattr(runtime, "available_memory", lambda: 1024)
        patch.setattr(residency, "check_fits", refuse_every_pool)
        with pytest.raises(fx.CapacityError, match="GiB"):
            scene.step(1 / 60)
        assert (scene.time, scene.step_count) == (1 / 60, 1)
    scene.step(1 / 60)
    after = scene.get_state()
    assert after.position.shape == (1, 51, 2)
    assert after.position[0, 0, 1] < before.position[0, 0, 1]  # it went on falling


def refuse_every_pool(n_worlds, needs, capacities=None):
    """residency.check_fits as if the scene's pool were larger than the memory (1 KiB)."""
    return real_check_fits(n_worlds, needs, capacities or {**needs, "pairs": 1 << 20})


real_check_fits = residency.check_fits


def test_circles_spawned_at_one_point_spread_over_the_plane():
    # 300 circles at one point, no gravity: each pair of coincident centres is pushed apart
    # along a direction of its own (narrow_phase.concentric_normal), so the pile opens into
    # a disc. One fixed normal stacks them into a column instead (x spread 0, the old rule).
    # A hexagonal packing of n discs of radius r fills a disc of radius about
    # r sqrt(n / 0.9069): 1.82 m for 300 of 0.1 m, so both spreads reach ~3.6 m; the bound
    # asks for a third of it on each axis.
    n = 300
    scene = fx.Scene(arch="cpu", gravity=(0.0, 0.0))
    scene.add_circles(np.zeros((n, 2)), RADIUS)
    for _ in range(240):  # pushed apart MAX_PUSHOUT_SPEED at a time: ~200 steps (3.3 s)
        scene.step(1 / 60)
    position = scene.get_state().position[0]
    packed = RADIUS * np.sqrt(n / 0.9069)
    assert np.ptp(position[:, 0]) > 2 * packed / 3
    assert np.ptp(position[:, 1]) > 2 * packed / 3
    # And they no longer overlap (brute force over every pair): at most a slop's worth. They
    # are not left asleep half-way (a push-out gives no velocity: sleep.OVERLAP_DEPTH).
    gaps = np.linalg.norm(position[:, None] - position[None], axis=2) + np.eye(n) * 1e9
    assert gaps.min() > 2 * RADIUS - 0.02


@pytest.mark.parametrize("n", [3000])
def test_a_long_static_chain_uses_link_sized_cells(n):
    # A chain link is kept where it was given, far from its body's origin: the grid's cell
    # must be the links' size (0.01 m), not their distance from the origin (which made the
    # median "diameter" half the chain's length: every link in one cell, a first step of
    # n^2 checks, 138 s at 100k points). Checked through the broad phase's result and the
    # cell the scene chose; the timing is benchmarks/static_terrain.py's.
    points = np.stack([np.arange(n) * 0.01, np.zeros(n)], 1)
    scene = fx.Scene(arch="cpu")
    scene.add_chain((0.0, 0.0), points)
    ball = scene.add_circle((5.0, 0.31), 0.3)
    for _ in range(10):
        scene.step(1 / 60)
    assert scene._cell == pytest.approx(0.01, rel=1e-6)
    # The ball rests on the chain (one-sided, front up): it neither fell through nor left.
    y = scene.get_state().position[0, ball, 1]
    assert 0.28 < y < 0.32


def test_chain_links_carry_their_computed_sizes():
    # shapes.chain fills each link's cached bounding_radius, diameter and unit_inertia for
    # the whole chain at once (the first step of a 100,000-link chain spent 2.5 s computing
    # them one by one): the same floats as each property's own computation.
    from fx2d_gpu import shapes

    rng = np.random.default_rng(7)
    points = np.cumsum(np.abs(rng.normal(size=(60, 2))) * 5.0, axis=0) - 100.0
    for link in shapes.chain(points) + shapes.chain(points[:20], loop=True):
        for name in ("bounding_radius", "diameter", "unit_inertia"):
            assert link.__dict__[name] == getattr(shapes.Shape, name).func(link), name
