"""Sleep by islands (fx2d_gpu/physics/solver/sleep.py): island labels, falling asleep and waking.

The stages are driven on hand-built data: a Scene supplies the bodies (dynamic, static,
kinematic, shape-less) and the joints, then the candidate pairs and manifolds are written
into the device groups of its StepContext (Scene.step_context) and the stage launchers of
fx2d_gpu.physics.solver.sleep run on them. Scene-level tests run the issue-12 scene (a ball
into four sleeping balls).
"""

import numpy as np
import pytest

import fx2d_gpu as fx
import fx2d_gpu.physics.solver.sleep as sleep

from .fields import put
from .helpers import FOLDED_TEAM
from .reference.sleep import component_labels, island_edges

DT = 1.0 / 60.0
G = 9.81


# ----------------------------------------------------------------------------- helpers
def get(field, n):
    return field.to_numpy()[:n]


#: How the island pass runs: parallel loops, serial loops, or a world per thread
#: (sleep._label_by_world, for pairs stored world by world).
MODES = ("parallel", "serial", "by_world")


def stage_context(scene, mode):
    """The scene's StepContext, its kernels' loops serial in the "serial" mode; the island
    pass (label, settle) labels a world per thread in the "by_world" mode."""
    ctx = scene.step_context()
    ctx.serial = mode == "serial"
    ctx.test_by_world = mode == "by_world"
    return ctx


def label(ctx, n_pairs):
    """sleep.label_islands over the first n_pairs pairs written into ctx."""
    ctx.cache.n_pairs = n_pairs
    return sleep.label_islands(ctx, by_world=ctx.test_by_world)


def settle(ctx, n_pairs, dt):
    """sleep.update_sleep after a step of dt (s) with n_pairs pairs."""
    ctx.cache.n_pairs, ctx.dt = n_pairs, dt
    return sleep.update_sleep(ctx, by_world=ctx.test_by_world)


def wake(ctx, n_pairs):
    """sleep.wake_islands after a broad phase that found n_pairs pairs."""
    ctx.cache.n_pairs = n_pairs
    return sleep.wake_islands(ctx)


def write_pairs(ctx, a, b, count, depth):
    """Candidate pairs (slots a < b) with manifolds of count points of the given depths,
    and each slot's range of them (manifolds.pair_start, as the broad phase writes it: the
    ranges hold the pairs where they are sorted by their lower slot)."""
    pool = ctx.pool
    low = np.minimum(a, b)
    put(pool.manifolds.body_a, low)
    put(pool.manifolds.body_b, np.maximum(a, b))
    put(pool.manifolds.point_count, count)
    put(pool.manifolds.depth, depth)
    counts = np.bincount(low, minlength=ctx.n_slots)
    put(pool.manifolds.pair_start, np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))


def write_previous_pairs(ctx, n_slots, a, b):
    """Last step's pairs as save_previous_pairs leaves them (grouped by body a)."""
    pool = ctx.pool
    a, b = np.minimum(a, b), np.maximum(a, b)
    order = np.argsort(a, kind="stable")
    put(pool.previous.body_a, a[order])
    put(pool.previous.body_b, b[order])
    counts = np.bincount(a, minlength=n_slots)
    put(pool.previous.pair_start, np.concatenate([[0], np.cumsum(counts)]))


KINDS = ("dynamic", "static", "kinematic", "shapeless")


def mixed_scene(rng, n_worlds, n_bodies, n_joints):
    """Bodies of every kind, far apart (nothing touches by itself), and random joints."""
    scene = fx.Scene(gravity=(0.0, 0.0), n_worlds=n_worlds)
    kinds = rng.choice(KINDS, p=[0.6, 0.2, 0.1, 0.1], size=n_bodies)
    for b, kind in enumerate(kinds):
        options = {
            "static": {"mass": 0.0},
            "kinematic": {"external_forces_enabled": False},
            "shapeless": {"collides": False},
        }.get(kind, {})
        scene.add_circle((3.0 * b, 0.0), 0.5, **options)
    joints = []
    while len(joints) < n_joints:
        parent, child = (int(x) for x in rng.choice(n_bodies, 2, replace=False))
        if kinds[parent] == "static" and kinds[child] == "static":
            continue
        scene.add_revolute_joint(parent, child)
        joints.append((parent, child))
    # Island nodes: bodies that contacts and joints move (dynamic, with a shape or not).
    node = np.isin(kinds, ("dynamic", "shapeless"))
    return scene, np.tile(node, n_worlds), joints


def random_pairs(rng, n_worlds, n_bodies, per_world):
    """Pairs within each world, shuffled, with 0-2 points of depths around -TOUCH_DISTANCE;
    points past the count get depths that would touch (they must be ignored)."""
    a, b = [], []
    for world in range(n_worlds):
        ends = rng.integers(0, n_bodies, size=(per_world, 2))
        ends = ends[ends[:, 0] != ends[:, 1]]
        a.append(world * n_bodies + ends.min(1))
        b.append(world * n_bodies + ends.max(1))
    a, b = np.concatenate(a), np.concatenate(b)
    order = rng.permutation(len(a))
    a, b = a[order], b[order]
    count = rng.integers(0, 3, size=len(a))
    depth = rng.uniform(-3 * sleep.TOUCH_DISTANCE, 0.02, size=(len(a), 2))
    depth[np.arange(2)[None, :] >= count[:, None]] = 0.05
    return a, b, count, depth.astype(np.float32)


# ----------------------------------------------------------------------------- labels
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_labels_match_a_reference_union_find(mode, seed):
    rng = np.random.default_rng(seed)
    n_worlds, n_bodies = 4, 60
    scene, node, joints = mixed_scene(rng, n_worlds, n_bodies, n_joints=12)
    ctx = stage_context(scene, mode)
    n_slots = n_worlds * n_bodies
    a, b, count, depth = random_pairs(rng, n_worlds, n_bodies, per_world=50)
    if mode == "by_world":  # stored world by world (by lower slot), as the step stores them
        order = np.argsort(a, kind="stable")
        a, b, count, depth = a[order], b[order], count[order], depth[order]
    write_pairs(ctx, a, b, count, depth)
    launches = label(ctx, len(a))
    expected = component_labels(
        n_slots, island_edges(node, n_bodies, n_worlds, a, b, count, depth, joints)
    )
    np.testing.assert_array_equal(get(ctx.pool.bodies.island, n_slots), expected)
    assert 1 <= launches <= 2
    assert len(np.unique(expected)) < n_slots - 20  # the graphs do join islands

    # Whole islands fall asleep; with no pairs left (the broad phase pairs no two sleeping
    # bodies) a sleeping body stays in the island it fell asleep with, awake bodies keep
    # only their joints.
    roots = np.unique(expected[node])
    asleep = np.isin(expected, rng.choice(roots, len(roots) // 2, replace=False)) & node
    put(ctx.pool.bodies.sleeping, asleep.astype(np.int32))
    label(ctx, 0)
    edges = island_edges(node, n_bodies, n_worlds, a[:0], b[:0], count[:0], depth[:0], joints)
    edges += [(s, expected[s]) for s in np.nonzero(asleep)[0]]
    np.testing.assert_array_equal(
        get(ctx.pool.bodies.island, n_slots), component_labels(n_slots, edges)
    )
    put(ctx.pool.bodies.sleeping, np.zeros(n_slots, np.int32))


@pytest.mark.parametrize("shuffled", [False, True], ids=["in_order", "shuffled"])
def test_a_chain_of_10000_bodies_is_one_island_in_few_launches(shuffled):
    n = 10_000
    scene = fx.Scene(gravity=(0.0, 0.0))
    for i in range(n):
        scene.add_circle((3.0 * i, 0.0), 0.5)
    ctx = stage_context(scene, "parallel")
    rng = np.random.default_rng(7)
    chain = rng.permutation(n) if shuffled else np.arange(n)
    order = rng.permutation(n - 1) if shuffled else np.arange(n - 1)
    a, b = chain[:-1][order], chain[1:][order]
    write_pairs(ctx, a, b, np.ones(n - 1, np.int32), np.zeros((n - 1, 2), np.float32))
    launches = label(ctx, n - 1)
    assert (get(ctx.pool.bodies.island, n) == 0).all()
    assert launches <= 2
    # Cut the chain in the middle of the pair list: two islands.
    cut = (n - 1) // 2
    put(ctx.pool.manifolds.point_count, np.where(np.arange(n - 1) == cut, 0, 1))
    label(ctx, n - 1)
    labels = get(ctx.pool.bodies.island, n)
    expected = component_labels(
        n, [(u, v) for k, (u, v) in enumerate(zip(a, b, strict=True)) if k != cut]
    )
    np.testing.assert_array_equal(labels, expected)


# ----------------------------------------------------------------------------- sleeping
def row_scene(n_balls, **body):
    """n_balls touching balls in a row (centres 1 m apart), then a static ground far away."""
    scene = fx.Scene(gravity=(0.0, 0.0))
    for i in range(n_balls):
        scene.add_circle((float(i), 0.0), 0.5, **body)
    scene.add_box((0.0, -50.0), (1.0, 1.0), mass=0.0)
    return scene


def touch(ctx, pairs, depth=0.0):
    a = np.array([p[0] for p in pairs])
    b = np.array([p[1] for p in pairs])
    write_pairs(
        ctx, a, b, np.ones(len(pairs), np.int32), np.full((len(pairs), 2), depth, np.float32)
    )
    return len(pairs)


@pytest.mark.parametrize("mode", MODES)
def test_an_island_sleeps_only_when_every_body_is_ready(mode):
    scene = row_scene(4)
    ctx = stage_context(scene, mode)
    n = scene.n_bodies  # balls 0-3, the ground 4
    n_pairs = touch(ctx, [(0, 1), (1, 2), (2, 3), (3, 4)])  # ball 3 also on the ground
    velocity = np.zeros((n, 2), np.float32)
    velocity[3] = (0.3, 0.0)  # ball 3 moves: nothing that touches it may sleep
    put(ctx.pool.bodies.velocity, velocity)
    for _ in range(5):
        assert settle(ctx, n_pairs, 0.3) == 1
        assert not get(ctx.pool.bodies.sleeping, n).any()
    np.testing.assert_allclose(get(ctx.pool.bodies.sleep_time, 4), [1.5, 1.5, 1.5, 0.0], rtol=1e-6)
    # The static ground links no island.
    np.testing.assert_array_equal(get(ctx.pool.bodies.island, n), [0, 0, 0, 0, 4])

    # Balls 1 and 2 apart by more than TOUCH_DISTANCE: balls 0 and 1 sleep on their own.
    depth = np.zeros((n_pairs, 2), np.float32)
    depth[1] = -2 * sleep.TOUCH_DISTANCE
    put(ctx.pool.manifolds.depth, depth)
    settle(ctx, n_pairs, 0.3)
    np.testing.assert_array_equal(get(ctx.pool.bodies.sleeping, n), [1, 1, 0, 0, 0])

    # Ball 3 slows down: once it was slow for SLEEP_TIME, balls 2 and 3 sleep, velocities 0.
    velocity[3] = (0.01, 0.0)
    put(ctx.pool.bodies.velocity, velocity)
    settle(ctx, n_pairs, 0.3)
    np.testing.assert_array_equal(get(ctx.pool.bodies.sleeping, n), [1, 1, 0, 0, 0])
    settle(ctx, n_pairs, 0.3)
    np.testing.assert_array_equal(get(ctx.pool.bodies.sleeping, n), [1, 1, 1, 1, 0])
    assert not get(ctx.pool.bodies.velocity, n).any()
    np.testing.assert_array_equal(get(ctx.pool.bodies.island, n), [0, 0, 2, 2, 4])


@pytest.mark.parametrize("mode", MODES)
def test_an_awake_body_that_is_not_ready_wakes_the_sleeping_island_it_touches(mode):
    scene = row_scene(5)
    ctx = stage_context(scene, mode)
    n = scene.n_bodies  # balls 0-4, the ground 5
    touch(ctx, [(0, 1), (1, 2), (2, 3)])
    settle(ctx, 3, 0.6)  # all slow long enough: asleep
    np.testing.assert_array_equal(get(ctx.pool.bodies.sleeping, n), [1, 1, 1, 1, 1, 0])
    put(ctx.pool.bodies.sleeping, [1, 1, 1, 1, 0])  # ball 4 woke (a push)
    put(ctx.pool.bodies.sleep_time, [0.6, 0.6, 0.6, 0.6, 0.0])
    # The broad phase pairs no two sleeping bodies: only ball 4 with ball 3.
    n_pairs = touch(ctx, [(3, 4)])
    settle(ctx, n_pairs, DT)
    np.testing.assert_array_equal(get(ctx.pool.bodies.sleeping, n), [0, 0, 0, 0, 0, 0])
    np.testing.assert_allclose(get(ctx.pool.bodies.sleep_time, 5), [0, 0, 0, 0, DT], atol=1e-7)


# ----------------------------------------------------------------------------- waking
def sleeping_row(mode, extra=()):
    """Four touching balls (0-3) asleep as one island, the ground (4), then one ball per x
    in `extra`, far away, awake (timer 0); no pairs last step."""
    scene = row_scene(4)
    for x in extra:
        scene.add_circle((x, 0.0), 0.5)
    ctx = stage_context(scene, mode)
    n = scene.n_bodies
    touch(ctx, [(0, 1), (1, 2), (2, 3)])
    settle(ctx, 3, 0.6)
    np.testing.assert_array_equal(
        get(ctx.pool.bodies.sleeping, n), [1, 1, 1, 1, 0] + [1] * len(extra)
    )
    np.testing.assert_array_equal(get(ctx.pool.bodies.island, n), [0, 0, 0, 0] + list(range(4, n)))
    put(ctx.pool.bodies.sleeping, [1, 1, 1, 1, 0] + [0] * len(extra))
    put(ctx.pool.bodies.sleep_time, [0.6] * 4 + [0.0] * (1 + len(extra)))
    write_previous_pairs(ctx, n, np.zeros(0, int), np.zeros(0, int))
    return ctx, n


def pair(ctx, a, b, depth):
    return touch(ctx, [(a, b)], depth)


@pytest.mark.parametrize("mode", MODES)
def test_a_moving_body_wakes_the_whole_island_it_may_hit(mode):
    ctx, n = sleeping_row(mode, extra=[-3.0, 20.0])
    striker = 5
    put(ctx.pool.bodies.sleeping, [1, 1, 1, 1, 0, 0, 1])  # ball 6: another island, asleep, apart
    velocity = np.zeros((n, 2), np.float32)
    velocity[striker] = (6.0, 0.0)
    put(ctx.pool.bodies.velocity, velocity)
    n_pairs = pair(ctx, 0, striker, depth=-0.05)  # a candidate pair: they may touch
    assert wake(ctx, n_pairs) == 4
    np.testing.assert_array_equal(get(ctx.pool.bodies.sleeping, n), [0, 0, 0, 0, 0, 0, 1])
    np.testing.assert_array_equal(get(ctx.pool.bodies.sleep_time, 4), [0, 0, 0, 0])


@pytest.mark.parametrize("mode", MODES)
def test_a_slow_body_wakes_an_island_only_through_a_new_pair(mode):
    ctx, n = sleeping_row(mode, extra=[-3.0])
    ball = 5
    velocity = np.zeros((n, 2), np.float32)
    velocity[ball] = (0.02, 0.0)  # below the sleep threshold: drifting, not moving fast
    put(ctx.pool.bodies.velocity, velocity)
    put(ctx.pool.bodies.sleep_time, [0.6] * 4 + [0.0, 0.2])
    n_pairs = pair(ctx, 0, ball, depth=-0.005)
    write_previous_pairs(ctx, n, np.array([0]), np.array([ball]))
    assert wake(ctx, n_pairs) == 0  # an old pair
    assert get(ctx.pool.bodies.sleeping, 4).all()
    write_previous_pairs(ctx, n, np.zeros(0, int), np.zeros(0, int))
    assert wake(ctx, n_pairs) == 4  # a new pair (carry_contacts' rule)
    assert not get(ctx.pool.bodies.sleeping, n).any()


@pytest.mark.parametrize("mode", MODES)
def test_a_body_just_woken_does_not_wake_the_islands_near_it(mode):
    """Woken bodies are at rest with their timers at 0; they meet their sleeping neighbours
    through new pairs (no two sleeping bodies were paired): no chain of wakes through a pile
    of islands, one ring a step."""
    ctx, n = sleeping_row(mode, extra=[-3.0])
    ball = 5  # woken at the end of the last step: timer 0, velocity 0
    n_pairs = pair(ctx, 0, ball, depth=-0.005)
    assert wake(ctx, n_pairs) == 0
    assert get(ctx.pool.bodies.sleeping, 4).all()


@pytest.mark.parametrize("mode", MODES)
def test_forces_and_joints_wake_islands(mode):
    ctx, n = sleeping_row(mode)
    force = np.zeros((n, 2), np.float32)
    force[2] = (0.0, 1.0)
    put(ctx.pool.bodies.force, force)
    assert wake(ctx, 0) == 4
    put(ctx.pool.bodies.force, np.zeros((n, 2), np.float32))

    scene = row_scene(4)
    scene.add_circle((10.0, 0.0), 0.5)
    scene.add_revolute_joint(3, 5)  # the joint puts ball 5 in the row's island
    ctx = stage_context(scene, mode)
    n = scene.n_bodies
    touch(ctx, [(0, 1), (1, 2), (2, 3)])
    settle(ctx, 3, 0.6)
    np.testing.assert_array_equal(get(ctx.pool.bodies.island, n), [0, 0, 0, 0, 4, 0])
    np.testing.assert_array_equal(get(ctx.pool.bodies.sleeping, n), [1, 1, 1, 1, 0, 1])
    put(ctx.pool.bodies.sleeping, [1, 1, 1, 1, 0, 0])  # ball 5 woken (e.g. a new motor target)
    write_previous_pairs(ctx, n, np.zeros(0, int), np.zeros(0, int))
    assert wake(ctx, 0) == 4
    assert not get(ctx.pool.bodies.sleeping, n).any()


def test_labels_from_elsewhere_never_index_out_of_range():
    ctx, n = sleeping_row(False, extra=[-3.0])
    put(ctx.pool.bodies.island, [10**6, -5, 3, 2])  # garbage: each ball counts as its own island
    velocity = np.zeros((n, 2), np.float32)
    velocity[5] = (0.0, 1.0)
    put(ctx.pool.bodies.velocity, velocity)
    n_pairs = pair(ctx, 1, 5, depth=-0.05)
    assert wake(ctx, n_pairs) == 1
    np.testing.assert_array_equal(get(ctx.pool.bodies.sleeping, n), [1, 0, 1, 1, 0, 0])


# ----------------------------------------------------------------------------- the scene
def test_a_push_on_a_sleeping_stack_wakes_the_whole_stack(arch):
    scene = fx.Scene(arch=arch)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0)
    boxes = [scene.add_box((0.0, 0.5 + i), (1.0, 1.0)) for i in range(3)]
    for _ in range(180):
        scene.step(DT)
    assert scene.get_state().sleeping[0, boxes].all()
    scene.apply_force(boxes[-1], (5.0, 0.0))
    scene.step(DT)
    assert not scene.get_state().sleeping[0, boxes].any()


def ball_into_a_row(arch, enable_sleep, settle_steps=None, solver="xpbd"):
    """Issue 12 item 2: four touching balls (r 0.5, 1 kg, e 1, no friction, no gravity) at
    rest; once they sleep (or after settle_steps), a fifth arrives from 3 m at 6 m/s.

    Returns the steps waited, the final x velocities (striker last), the striker's lowest x
    velocity and the deepest overlap of two balls over 2 s.
    """
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, enable_sleep=enable_sleep, solver=solver)
    ball = {"mass": 1.0, "elasticity": 1.0, "static_friction": 0.0, "dynamic_friction": 0.0}
    row = [scene.add_circle((float(i), 0.0), 0.5, **ball) for i in range(4)]
    steps = 0
    while steps < (settle_steps or 120):
        scene.step(DT)
        steps += 1
        if settle_steps is None and scene.get_state().sleeping[0, row].all():
            break
    if settle_steps is None:
        assert scene.get_state().sleeping[0, row].all()
    striker = scene.add_circle((-3.0, 0.0), 0.5, velocity=(6.0, 0.0), **ball)
    lowest, overlap = 6.0, 0.0
    for _ in range(round(2.0 / DT)):
        scene.step(DT)
        state = scene.get_state()
        lowest = min(lowest, state.velocity[0, striker, 0])
        x = np.sort(state.position[0, :, 0])
        overlap = max(overlap, 1.0 - np.diff(x).min())
    return steps, scene.get_state().velocity[0, :, 0], lowest, overlap


def test_sleeping_balls_are_hit_as_if_they_were_awake(arch, solver):
    """The sleeping row wakes as a whole before the striker reaches it: the impact conserves
    momentum and ends as it does with sleep disabled, and no ball is pushed into another."""
    steps, velocity, _, overlap = ball_into_a_row(arch, enable_sleep=True, solver=solver)
    _, awake_velocity, _, _ = ball_into_a_row(
        arch, enable_sleep=False, settle_steps=steps, solver=solver
    )
    assert velocity.sum() == pytest.approx(6.0, rel=1e-4)
    np.testing.assert_allclose(velocity, awake_velocity, atol=1e-3)
    assert overlap < 0.01


def test_a_ball_into_four_sleeping_balls_conserves_momentum(arch, solver):
    """The issue's scene: total momentum stays +6 to 1e-4 relative (it went to -7.5 when the
    sleeping balls acted as a wall) and the impact creates no kinetic energy, with either
    solver. With XPBD, as in a Newton's cradle of equal elastic balls, the last ball leaves
    near 6 m/s while the others stay (restitution in the substep of each impact: a
    step-level bounce spread the impact through the row inelastically, 0, 2.25, 2.81, 2.81
    and the striker -1.875). The soft step's one restitution pass a step spreads it as
    Box2D v3 does (docs/solvers.md: 0, 0.86, 2.69, 3.92 and -1.47 here; Box2D v3, pyb2d3,
    4 substeps: 0.85, 1.90, 2.75, 2.75 and -2.26), so only the first two hold for it."""
    _, velocity, _, _ = ball_into_a_row(arch, enable_sleep=True, solver=solver)
    assert velocity.sum() == pytest.approx(6.0, rel=1e-4)
    assert 0.5 * np.sum(velocity**2) <= 0.5 * 6.0**2 * 1.01
    if solver == "xpbd":
        assert velocity[3] == pytest.approx(6.0, rel=0.05)  # the far end of the row
        np.testing.assert_allclose(velocity[[0, 1, 2, 4]], 0.0, atol=0.3)


def test_a_moving_kinematic_body_wakes_and_pushes_a_sleeping_one():
    """A kinematic pusher (external forces off, 2 m/s) reaches a box asleep on the ground:
    the broad phase pairs them, the box wakes and is pushed ahead, never passed through."""
    scene = fx.Scene(arch="cpu")
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0)
    box = scene.add_box((0.0, 0.5), (1.0, 1.0))
    for _ in range(90):
        scene.step(1 / 60)
    assert scene.get_state().sleeping[0, box]
    pusher = scene.add_box(
        (-3.0, 0.5),
        (1.0, 1.0),
        external_forces_enabled=False,
        gravity_scale=0.0,
        velocity=(2.0, 0.0),
    )
    gaps = []
    for _ in range(90):
        scene.step(1 / 60)
        state = scene.get_state()
        gaps.append(state.position[0, box, 0] - state.position[0, pusher, 0])
    assert not scene.get_state().sleeping[0, box]
    from fx2d_gpu.physics.solver.contacts import LINEAR_SLOP

    assert min(gaps) >= 1.0 - LINEAR_SLOP  # side by side at most a slop deep, never through
    # The pusher's face reaches the box after 1 s (2 m at 2 m/s); frictionless, e = 0.1
    # against the kinematic (immovable) pusher: the box leaves at 2 (1 + e) = 2.2 m/s and
    # slides for the last 0.5 s: x = 1.1 (1 cm for the impact's substep). (The bound was
    # x > 1.)
    assert scene.get_state().position[0, box, 0] == pytest.approx(1.1, abs=0.01)


def test_bodies_asleep_on_a_floor_that_is_disabled_fall(arch):
    """A row of boxes asleep on a static floor, and a pendulum asleep on a static pivot:
    disabling the floor and the pivot wakes them (they touched it, or were jointed to it),
    and they fall freely: y = y0 - g t^2 / 2 (symplectic Euler's g t h / 2 more), where
    before they hung asleep in the air."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    floor = scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0)
    boxes = [scene.add_box((2.0 * i - 4.0, 0.5), (1.0, 1.0)) for i in range(5)]
    pivot = scene.add_box((8.0, 6.0), (0.2, 0.2), mass=0)
    bob = scene.add_circle((8.0, 5.0), 0.2)
    scene.add_revolute_joint(pivot, bob, anchor=(0.0, 0.0))  # at the pivot (its frame)
    for _ in range(120):
        scene.step(DT)
    state = scene.get_state()
    assert state.sleeping[0, boxes + [bob]].all()
    start = state.position[0, boxes + [bob], 1].copy()
    scene.set_enabled([floor, pivot], False)
    steps = 30
    for _ in range(steps):
        scene.step(DT)
    state = scene.get_state()
    t, h = steps * DT, DT / scene.substeps
    fallen = start - state.position[0, boxes + [bob], 1]
    np.testing.assert_allclose(fallen, 0.5 * G * t * t + 0.5 * G * t * h, rtol=1e-3)


@FOLDED_TEAM
def test_sleep_in_the_teams_launch_is_its_own_launches(arch, solver):
    """On a team, a launch that ran the substeps and listed the reported pairs runs the step's
    sleep pass at its end (sleep.update_sleep_by_team, StepOptions.sleep_in_launch): the
    same states, sleep flags, contacts and events every step as update_sleep's own
    launches, for a jointed grid swinging to rest and a pyramid falling asleep, woken by
    balls rolling into it; and update_sleep's kernel is launched far less."""
    from fx2d_gpu import scenes

    from .helpers import assert_same_trace, launches_of, trace

    def grid(options):
        return scenes.joint_grid(8, 8, arch=arch, solver=solver, step_options=options)

    def pyramid(options):
        specs, _ = scenes.pyramid_layout(10)
        scene = scenes.build_scene(specs, arch=arch, solver=solver, step_options=options)
        for i, x in enumerate((-9.5, -10.6)):
            scene.add_circle((x, 0.41 + i), 0.4, velocity=(1.5, 0.0))
        return scene

    for build, steps in ((grid, 120), (pyramid, 240)):
        got = {}
        for in_launch in (True, False):
            scene = build({"sleep_in_launch": in_launch, "fold_on_cpu": True})
            before = launches_of("sleep._label_launch")
            got[in_launch] = trace(scene, steps)
            got[in_launch]["sleep launches"] = launches_of("sleep._label_launch") - before
            got[in_launch]["asleep"] = int(scene.get_state().sleeping.sum())
        assert_same_trace(got[True], got[False])
        assert got[True]["asleep"] == got[False]["asleep"]
        if build is pyramid:
            # Asleep by step 50, woken by the ball at ~175, asleep again by 225.
            assert got[True]["asleep"] == 55
        if arch == "cpu":  # a CPU team ran the steps (a GPU's team: test_gpu_team)
            assert got[False]["sleep launches"] >= steps // 2, got[False]["sleep launches"]
            assert got[True]["sleep launches"] < got[False]["sleep launches"] // 4, got


def _box_landing_until_asleep(arch):
    """A 0.5 m box dropped 0.5 m onto a static ground (a small world: one launch a step, a
    world per thread) stepped until it sleeps (at most 200 steps): (the step it fell
    asleep at or None, its final state)."""
    scene = fx.Scene(arch=arch)
    scene.add_box((6.0, 1.0), (8.0, 0.5), mass=0.0)
    box = scene.add_box((6.0, 1.75), (0.5, 0.5))
    for step in range(200):
        scene.step(DT)
        if scene.get_state().sleeping[0, box]:
            return step, scene.get_state()
    return None, scene.get_state()


@FOLDED_TEAM
def test_a_small_scene_sleeps_after_a_team_slept_another_scene(arch):
    """A team's launch that runs the sleep pass notes that it did in the step counters that
    a small worlds' launch answers with too: the small worlds' launch clears them first, so
    a box landing on the ground falls asleep at the same step, in the same state, stepped
    before or after a jointed grid stepped on a team that sleeps in its launch (before the
    fix, the host read the grid's note as the box's sleep pass and never ran one: the box
    never slept)."""
    from fx2d_gpu import scenes

    first, state = _box_landing_until_asleep(arch)
    assert first is not None
    grid = scenes.joint_grid(
        8, 8, arch=arch, step_options={"sleep_in_launch": True, "fold_on_cpu": True}
    )
    for _ in range(3):
        grid.step(DT)
    again, state_again = _box_landing_until_asleep(arch)
    assert again == first
    for name in ("position", "angle", "velocity", "angular_velocity"):
        np.testing.assert_array_equal(getattr(state_again, name), getattr(state, name))


def _wake_in_launch_or_its_own(arch, build, steps: int, window: range, each=None):
    """build(step_options) stepped `steps` steps with StepOptions.wake_in_launch on and off
    (fold_on_cpu: the GPU team's kernel), each(scene) after every step: the same states,
    sleep flags, contacts and events every step; on a CPU team, sleep._wake_launch launched
    in each step of `window` with it off and in none with it on. Returns (the trace with
    it on, its scene)."""
    from .helpers import assert_same_trace, launches_of, trace

    got, wakes = {}, {}
    for in_launch in (True, False):
        scene = build({"wake_in_launch": in_launch, "fold_on_cpu": True})
        launched = wakes[in_launch] = []

        def note(scene, launched=launched):
            if each is not None:
                each(scene)
            launched.append(launches_of("sleep._wake_launch"))

        got[in_launch] = trace(scene, steps, each=note), scene
    assert_same_trace(got[True][0], got[False][0])
    if arch == "cpu":  # a CPU team ran the steps (a GPU's team: test_gpu_team)
        in_window = {k: w[window[-1]] - w[window[0] - 1] for k, w in wakes.items()}
        assert in_window == {True: 0, False: len(window)}, in_window
    return got[True]


@FOLDED_TEAM
def test_the_wake_in_the_teams_kept_launch_is_its_own_launch(arch, solver):
    """A kept step's team launch whose refit finds only sleepers (nothing refitted, nothing
    awake that can move and collide beside them) runs sleep.wake_islands' pass itself and
    goes on where nothing woke (sleep.wake_islands_by_team, StepOptions.wake_in_launch):
    the same states, sleep flags, contacts and events every step as the host's wake launch
    and a second kept launch, for a pyramid and a box hanging from a shape-less kinematic
    hanger falling asleep (the hanger kept awake), woken where the public edits wake
    nothing themselves (written on the device: Scene.apply_force and set_state wake what
    they touch, and a body whose sleep flag changed is refitted, which stops the launch
    before its wake pass): a force on the sleeping top box, then, once all sleeps again,
    the hanger set moving (its joint wakes the bob). Where the launch's wake woke them,
    the step finds its pairs again. Asleep, the wake's own kernel is not launched."""
    from fx2d_gpu import scenes

    specs, _ = scenes.pyramid_layout(10)
    top, hanger, bob = len(specs) - 1, len(specs), len(specs) + 1
    steps, push_at, drag_at = 420, 100, 360

    def build(options):
        scene = scenes.build_scene(specs, arch=arch, solver=solver, step_options=options)
        scene.add_circle(
            (15.0, 5.0), 0.2, collides=False, external_forces_enabled=False, gravity_scale=0.0
        )
        scene.add_box((15.0, 3.0), (0.5, 0.5))
        scene.add_revolute_joint(hanger, bob)
        return scene

    def wake_by_hand(scene):
        pool = scene.step_context().pool
        sleep_time = pool.bodies.sleep_time.to_numpy()
        if scene.step_count < drag_at:
            # The hanger stays awake, its timer never 0 (a kinematic body whose timer is 0
            # pushes what it holds: sleep._pushes).
            sleep_time[hanger] = 0.01
            put(pool.bodies.sleep_time, sleep_time)
        asleep = scene.get_state().sleeping[0]
        if scene.step_count == push_at:  # all asleep since step ~50
            assert asleep[1:hanger].all() and asleep[hanger + 1 :].all(), asleep
            force = np.zeros((scene.n_bodies, 2), np.float32)
            force[top] = (150.0, 0.0)
            put(pool.bodies.force, force)
            scene.step_context().cache.forces_on_device = True  # (cleared after the step)
        if scene.step_count == drag_at:  # asleep again
            assert asleep[1:hanger].all() and asleep[hanger + 1 :].all(), asleep
            assert not asleep[hanger]
            velocity = scene.get_state().velocity[0]
            velocity[hanger] = (1.0, 0.0)
            put(pool.bodies.velocity, velocity.astype(np.float32))

    # Asleep (by step ~50), a wake launch a step, or none.
    traced, _ = _wake_in_launch_or_its_own(arch, build, steps, range(60, push_at), wake_by_hand)
    state = traced["state"]
    assert state["position"][0, top, 0] > 0.4  # pushed ~0.5 m along the box below (was 0)
    assert not state["sleeping"][0, bob] and state["position"][0, bob, 0] > 15.5  # dragged


@FOLDED_TEAM
def test_the_wake_after_the_teams_broad_phase_is_its_own_launch(arch, solver):
    """Balls rolling towards a pyramid asleep (awake bodies that move beside sleepers, so
    each step finds its pairs): a kept step's team launch that runs the broad phase itself
    runs the wake pass after it (StepOptions.wake_in_launch) and goes on where nothing
    woke, or stops where the balls' new pairs woke the pyramid (the host pairs it: a broad
    phase again): the same states, sleep flags, contacts and events every step as the
    host's wake launch after a broad phase; while the balls roll up, the wake's own kernel
    is not launched."""
    from fx2d_gpu import scenes

    specs, _ = scenes.pyramid_layout(10)

    def build(options):
        scene = scenes.build_scene(specs, arch=arch, solver=solver, step_options=options)
        for i, x in enumerate((-9.5, -10.6)):
            scene.add_circle((x, 0.41 + i), 0.4, velocity=(1.5, 0.0))
        return scene

    # Asleep by ~50, the balls rolling up until the hit at ~175, asleep again by 225.
    _, scene = _wake_in_launch_or_its_own(arch, build, 240, range(60, 150))
    # The pyramid, woken, asleep again.
    assert scene.get_state().sleeping.sum() == len(specs) - 1
