"""The solver against physics: resting, stacking, bouncing, sliding (dt 1/60, 11 substeps;
the tests that take `solver` also with the soft step at its 4)."""

import math

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import device
from fx2d_gpu.device import MAX_COLORS, UNSOLVED_COLOR
from fx2d_gpu.scenes import (
    BodySpec,
    batched_small,
    build_scene,
    pile,
    pile_layout,
    pyramid,
    pyramid_layout,
    random_pile,
)

from .helpers import (
    COLORED_LIKE_GENERAL,
    DT,
    LINEAR_SLOP,
    run,
    soft_column_drop,
    soft_contact_hertz,
    soft_deflection,
    track,
)
from .reference.coloring import colors_sharing_a_body, greedy_color_count
from .reference.contacts import closing_speed as reference_closing_speed
from .reference.contacts import manifold_sweep

G = 9.81


def ground_scene(arch, solver="xpbd", **ground):
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_box((0.0, -0.5), (40.0, 1.0), mass=0, **ground)
    return scene


def test_box_resting_on_ground_is_still_and_sleeps(arch, solver):
    scene = ground_scene(arch, solver)
    box = scene.add_box((0.0, 0.5), (1.0, 1.0))
    positions, speeds = track(scene, box, seconds=3.0)
    assert np.ptp(positions[:, 1]) < 0.5e-3
    assert speeds.max() < 0.02
    assert np.abs(positions[-1] - [0.0, 0.5]).max() < 1e-3  # creep
    assert scene.get_state().sleeping[0, box]


def test_with_sleep_disabled_a_resting_box_stays_awake_and_still(arch):
    scene = fx.Scene(arch=arch, enable_sleep=False)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0, static_friction=0.6, dynamic_friction=0.6)
    box = scene.add_box((0.0, 0.5), (1.0, 1.0), static_friction=0.6, dynamic_friction=0.6)
    positions, speeds = track(scene, box, seconds=2.0)
    assert not scene.get_state().sleeping.any()
    assert np.abs(positions[-1] - [0.0, 0.5]).max() < 1e-3
    with pytest.raises(TypeError, match="enable_sleep"):
        fx.Scene(arch=arch, enable_sleep="no")


def test_three_box_stack_keeps_its_heights(arch, solver):
    """XPBD: each of the 3 contacts under the top box at most a slop (2 mm) deep; the soft
    step: they compress 2.5 k g / w^2 (k boxes above, 30 Hz) and the ground's 1.25 n g / w^2
    (60 Hz): 2.3 mm in all (tests/test_soft_step.py)."""
    scene = ground_scene(arch, solver)
    boxes = [scene.add_box((0.0, 0.5 + i), (1.0, 1.0)) for i in range(3)]
    start = scene.get_state().position[0, boxes, 1]
    worst = 0.0
    for _ in range(round(5.0 / DT)):
        scene.step(DT)
        worst = max(worst, np.abs(scene.get_state().position[0, boxes, 1] - start).max())
    assert worst < 6e-3


def test_ten_box_stack_stands(arch, solver):
    """The top box stays within 5 cm, and its drop is the column's compression, derived for
    each solver: XPBD holds every contact within a slop of touching (contacts.LINEAR_SLOP),
    so 10 contacts let the top box sink at most 10 slops (20 mm); the soft step's contacts
    are springs, and the column closes by their summed static deflections
    (helpers.soft_column_drop: 31.9 mm), which the top box reaches at rest and never
    passes by more than 2 % (a damping ratio of 10 barely overshoots)."""
    n = 10
    scene = ground_scene(arch, solver, static_friction=0.6, dynamic_friction=0.6)
    boxes = [
        scene.add_box((0.0, 0.5 + i), (1.0, 1.0), static_friction=0.6, dynamic_friction=0.6)
        for i in range(n)
    ]
    top0 = scene.get_state().position[0, boxes[-1]]
    positions, _ = track(scene, boxes[-1], seconds=10.0)
    assert np.linalg.norm(positions - top0, axis=1).max() < 0.05
    drop = top0[1] - positions[:, 1]
    if solver == "xpbd":
        assert drop.max() < n * LINEAR_SLOP
    else:
        assert drop.max() < 1.02 * soft_column_drop(n)
        assert drop[-1] == pytest.approx(soft_column_drop(n), rel=0.05)


def soft_pyramid_drop_bound(rows: int, substeps: int = 4) -> float:
    """An upper bound, m, on the top box's drop in a brick pyramid of `rows` rows of 1 m,
    1 kg boxes (each row's boxes centred over the gaps of the row below) under the soft
    step, at rest. A box of row j (0 at the top) bears at most its own weight and half of
    each of the two boxes on it, so at most j + 1 boxes (the full j + 1 only far from the
    rows' ends), on the two contacts below it: (j + 1) / 4 box weights a point. The
    points of a half-overlap contact lie over one box's centre and the other's edge: 1/m_eff
    = 2/m + (0.5^2) / I = 3.5 per kg (I = 1/6 kg m^2), so each closes 0.875 (j + 1) g / w^2.
    The bottom row bears at most `rows` boxes on the ground's two corner points (1/m_eff
    2.5, twice the hertz): 1.25 rows g / w^2. The top sinks by the contacts' closings
    down the column of boxes under it (helpers.soft_column_drop's reasoning for a column)."""
    between_rows = sum(
        0.875 * (j + 1) * soft_deflection(soft_contact_hertz(substeps, False))
        for j in range(rows - 1)
    )
    return between_rows + 1.25 * rows * soft_deflection(soft_contact_hertz(substeps, True))


def test_pyramid_of_210_boxes_stands(arch, solver):
    """The top box stays on the pyramid and sinks no more than its contacts allow, derived
    for each solver: sideways within 5 % of its 1 m width (it stands on the two boxes
    under it); down, under XPBD within a slop of touching at each of the 20 contacts down
    to the ground (contacts.LINEAR_SLOP: 40 mm), under the soft step within the springs'
    static closing (soft_pyramid_drop_bound: 47.6 mm; it sinks ~29 mm, as Box2D v3's
    pyramid does, since the boxes away from the centre bear less than j + 1)."""
    rows = 20
    scene = pyramid(rows, arch=arch, solver=solver, substeps=None)
    top = scene.n_bodies - 1
    top0 = scene.get_state().position[0, top]
    positions, _ = track(scene, top, seconds=10.0)
    assert np.abs(positions[:, 0] - top0[0]).max() < 0.05
    drop = top0[1] - positions[:, 1]
    if solver == "xpbd":
        assert drop.max() < rows * LINEAR_SLOP
    else:
        assert drop.max() < soft_pyramid_drop_bound(rows)


@pytest.mark.parametrize("e", [0.25, 0.5, 0.8])
def test_circle_bounces_to_e_squared_of_its_drop(arch, e, solver):
    """The pair's restitution is the ball's: under the default mixing (the smaller, Fx2D's
    rule, the same for both solvers) against the ground's 1."""
    scene = ground_scene(arch, solver, elasticity=1.0)
    r = 0.25
    ball = scene.add_circle((0.0, 1.0 + r), r, elasticity=e)
    positions, _ = track(scene, ball, seconds=1.5)
    heights = positions[:, 1] - r
    velocities = np.diff(positions[:, 1])
    impact = np.argmax(velocities > 0)  # first frame moving up again
    apex = heights[impact : impact + 60].max()
    assert apex == pytest.approx(e * e, rel=0.10)


def incline_scene(arch, degrees, mu_s, mu_k, solver="xpbd"):
    theta = math.radians(degrees)
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    material = dict(static_friction=mu_s, dynamic_friction=mu_k)
    scene.add_box((0.0, 0.0), (60.0, 1.0), mass=0, angle=theta, **material)
    normal = np.array([-math.sin(theta), math.cos(theta)])
    box = scene.add_box(tuple(normal * 1.0), (1.0, 1.0), angle=theta, **material)
    downhill = -np.array([math.cos(theta), math.sin(theta)])
    return scene, box, downhill


def test_static_friction_holds_a_box_on_a_30_degree_incline(arch, solver):
    scene, box, _ = incline_scene(arch, 30.0, 0.7, 0.5, solver)
    positions, _ = track(scene, box, seconds=3.0)
    assert np.linalg.norm(positions[-1] - positions[0]) < 0.01


def test_kinetic_friction_on_a_35_degree_incline(arch, solver):
    scene, box, downhill = incline_scene(arch, 35.0, 0.3, 0.3, solver)
    theta = math.radians(35.0)
    for _ in range(10):  # settle onto the slope
        scene.step(DT)
    v0 = scene.get_state().velocity[0, box] @ downhill
    run(scene, seconds=1.5)
    v1 = scene.get_state().velocity[0, box] @ downhill
    expected = G * (math.sin(theta) - 0.3 * math.cos(theta))
    assert (v1 - v0) / 1.5 == pytest.approx(expected, rel=0.05)


def coloring(scene):
    """The last step's pairs and colouring, from the scene's device groups."""
    ctx = scene.step_context()
    n = ctx.n_pairs
    contacts, groups = ctx.pool.manifolds, ctx.pool.coloring
    a = contacts.body_a.to_numpy()[:n]
    b = contacts.body_b.to_numpy()[:n]
    color = groups.color.to_numpy()[: ctx.n_constraints]
    starts = groups.color_start.to_numpy()
    listed = groups.color_list.to_numpy()[: starts[UNSOLVED_COLOR + 1]]
    return a, b, color, starts, listed


def assert_listed_in_index_order(scene, listed, starts):
    """Each colour's constraints listed in index order (device.buckets: the same lists on
    every backend and team; atomic cursors left a GPU's in the threads' order). Pairs stored
    in colour order since (pairs.store_in_color_order) are listed at their new indices,
    taken in the list's order: their broad-phase indices (coloring.pair_origin) tell it."""
    ctx = scene.step_context()
    n = ctx.n_pairs
    keys = listed.copy()
    if ctx.cache.pairs_ordered and n:
        origin = ctx.pool.coloring.pair_origin.to_numpy()[:n]
        pairs = listed < n
        keys[pairs] = origin[listed[pairs]]
    for c in range(UNSOLVED_COLOR + 1):
        part = keys[starts[c] : starts[c + 1]]
        assert np.all(np.diff(part) > 0), f"colour {c}'s list is not in index order"


def assert_valid_coloring(scene):
    """Every pair listed once under its own colour; no colour holds two constraints on one
    moving body (checked by brute force against the scene's state); every pair with points
    or refreshed every substep is solved (has a colour or is in the overflow). Returns how
    many pairs the broad phase found."""
    a, b, color, starts, listed = coloring(scene)
    n = len(a)
    assert sorted(listed) == list(range(len(color)))  # pairs, then joint slots
    for c in range(UNSOLVED_COLOR + 1):
        assert np.all(color[listed[starts[c] : starts[c + 1]]] == c)
    assert_listed_in_index_order(scene, listed, starts)
    ctx = scene.step_context()
    points = ctx.pool.manifolds.point_count.to_numpy()[:n]
    fast = ctx.pool.prepared.refresh.to_numpy()[:n]
    unsolved = color[:n] == UNSOLVED_COLOR
    assert not np.any(unsolved & ((points > 0) | (fast == 1)))
    state = scene.get_state()
    nb = scene.n_bodies
    dynamic = np.array([scene.body_mass(i) > 0 for i in range(nb)])
    # Per body slot: dynamic and awake (static or sleeping bodies may be shared).
    moving = np.tile(dynamic, scene.n_worlds) & ~state.sleeping.reshape(-1)
    # Each constraint's body slots: pairs (a, b), then joint slots (world by world).
    ends_of_joints = np.array([scene.joint_bodies(j) for j in range(scene.n_joints)], int).reshape(
        -1, 2
    )
    joints = np.arange(len(color) - n) if scene.n_joints else np.zeros(0, int)
    worlds = joints // max(scene.n_joints, 1)
    ends = np.concatenate(
        [
            np.stack([a, b], 1),
            worlds[:, None] * nb + ends_of_joints[joints % max(scene.n_joints, 1)],
        ]
    )
    shared = colors_sharing_a_body(listed, starts, ends, moving, MAX_COLORS)
    assert not shared, f"colours {shared} share a body"
    assert scene.n_colors <= MAX_COLORS
    return n


def test_graph_coloring_is_valid_on_dense_piles(arch):
    for seed in range(3):
        scene = random_pile(3000, arch=arch, seed=seed, n_worlds=2)
        scene.step(DT)
        assert assert_valid_coloring(scene) > 3000


def test_only_pairs_with_points_take_a_colour(arch):
    """Box2D v3 colours touching constraints only. In a settling pile many of the broad
    phase's pairs (AABBs grown by the step's motion) are apart: those, and only those, are
    left unsolved (no points with the margin of the motion the step can bring), and an
    exact narrow phase at the poses the step ends with (Scene.contacts after set_state)
    finds none of them touching."""
    scene = pile(2000, arch=arch)
    for _ in range(60):  # pouring: ~4,500 pairs, ~30 % of them apart
        scene.step(DT)
    a, b, color, _, _ = coloring(scene)
    n = len(a)
    unsolved = color[:n] == UNSOLVED_COLOR
    assert 0.1 * n < unsolved.sum() < 0.9 * n, (unsolved.sum(), n)
    assert_valid_coloring(scene)
    nb = scene.n_bodies
    apart = {(x % nb, y % nb) for x, y in zip(a[unsolved], b[unsolved], strict=True)}
    scene.set_state(scene.get_state())  # contacts() now runs an exact narrow phase
    found = scene.contacts()
    touching = set(zip(found.body_a.tolist(), found.body_b.tolist(), strict=True))
    assert not apart & touching


def test_colours_kept_from_last_step_stay_valid_in_a_falling_pile(arch, monkeypatch):
    """A falling, tumbling pile gains and loses pairs every step; each step starts from the
    last step's colours (only new pairs bid), and the result must still be a valid
    colouring, also after bodies fall asleep and wake up. Small worlds too, coloured as the
    general path colours (by default they take one colour: test_small_worlds.py)."""
    scene = random_pile(600, arch=arch, seed=7)
    for step in range(150):
        scene.step(DT)
        if step % 10 == 0 or step > 140:
            assert_valid_coloring(scene)
    assert scene.colorings - scene.scratch_colorings > 20  # most steps kept the colours
    # With joints (kept per joint slot) in many worlds of thrown bodies:
    scene = batched_small(32, arch=arch, step_options=COLORED_LIKE_GENERAL)
    for step in range(60):
        scene.step(DT)
        if step % 5 == 0:
            assert_valid_coloring(scene)
    assert scene.colorings - scene.scratch_colorings > 5


@pytest.mark.parametrize("filler", [0, 60], ids=["small world", "large world"])
def test_a_fast_ball_apart_when_the_step_starts_is_still_solved(arch, filler):
    """A ball shot at 60 m/s (1 m a step) at a 10 cm plank: at the start of its impact step
    the two are further apart than a fast pair's one-substep margin, so the step's first
    narrow phase gives them no point. A fast pair is solved all the same (coloured in a
    large world, where only pairs with points or fast ones take a colour; every pair in a
    small one): the ball stops at the plank's face and pushes it, never passes through.
    No friction anywhere (a pair takes the smaller coefficient): momentum along x is
    conserved.

    Bounds: at the end of every step the ball is at most a slop (LINEAR_SLOP) into the
    plank, measured against the plank as it is, turned: the ball, 4 cm fallen by then,
    hits below the plank's centre and sets it spinning at ~9 rad/s (the old gap, taken
    from the plank's unturned face, grew 8 mm a step after the impact, to 3.5 cm: not a
    depth). The impact is perfectly inelastic (e = min(0, 0.1) = 0): both leave at
    60 * 1 / (1 + 2) = 20 m/s, less the under 1 % that goes into the plank's spin (the
    bound on the plank was 10 m/s)."""
    scene = ground_scene(arch)
    plank = scene.add_box(
        (0.0, 0.5), (0.1, 1.0), mass=2.0, static_friction=0.0, dynamic_friction=0.0
    )
    ball = scene.add_circle(
        (-5.55, 0.5),
        0.1,
        mass=1.0,
        velocity=(60.0, 0.0),
        static_friction=0.0,
        dynamic_friction=0.0,
        elasticity=0.0,
    )
    for i in range(filler):  # resting boxes far away: a world of more than 40 bodies
        scene.add_box((10.0 + 0.6 * (i % 20), 0.25 + 0.55 * (i // 20)), (0.5, 0.5))
    from fx2d_gpu.physics.solver.contacts import LINEAR_SLOP

    deepest = -math.inf
    for _ in range(12):
        scene.step(DT)
        s = scene.get_state()
        # The ball's centre in the plank's frame; its depth: r less its distance to the
        # plank's 0.1 x 1 rectangle (negative inside).
        turn = float(s.angle[0, plank])
        offset = s.position[0, ball] - s.position[0, plank]
        local = (
            np.array([[math.cos(turn), math.sin(turn)], [-math.sin(turn), math.cos(turn)]]) @ offset
        )
        beyond = np.abs(local) - (0.05, 0.5)
        distance = np.linalg.norm(np.maximum(beyond, 0.0)) + min(beyond.max(), 0.0)
        deepest = max(deepest, 0.1 - distance)
    assert deepest <= LINEAR_SLOP
    s = scene.get_state()
    assert s.position[0, ball, 0] < s.position[0, plank, 0]
    momentum = 1.0 * s.velocity[0, ball, 0] + 2.0 * s.velocity[0, plank, 0]
    assert s.velocity[0, plank, 0] == pytest.approx(20.0, rel=0.02)
    assert momentum == pytest.approx(60.0, rel=1e-4)  # no friction: conserved (was 2 %)


def test_a_poured_pile_keeps_few_colours(arch):
    # Starting every step from the last step's colours fragments them as a pile is poured
    # (14 colours where a greedy colouring of the same pairs needs 9); coloring from
    # scratch every FRESH_COLORING_STEPS steps keeps the count at the greedy one's.
    from fx2d_gpu.physics.solver.coloring import FRESH_COLORING_STEPS

    scene = pile(2000, arch=arch)
    moving = np.array([spec.mass != 0 for spec in pile_layout(2000)], bool)
    for step in range(1, 6 * FRESH_COLORING_STEPS + 1):
        scene.step(DT)
        if step > 4 * FRESH_COLORING_STEPS and step % 8 == 0:
            reference = greedy_color_count(scene.candidate_pairs()[:, 1:], moving)
            assert scene.n_colors <= reference + 1, (step, scene.n_colors, reference)


def test_a_pyramid_takes_at_most_two_colours_more_than_a_box_meets_moving_boxes(arch):
    """A 30-row pyramid (465 boxes) at rest: a box touches at most 6 others that move (two
    below, two beside, two above; the ground is static), counted here by brute force from
    the solved pairs, and 6 colours would do (the contacts of each of the three directions
    alternate between two colours along their lines). The bids rank the constraints at the
    busiest bodies first (coloring.priority: an edge colouring's largest-degree-first), so
    the colouring stays within 2 of the degree: 8 colours, where bids by the permutation
    alone took 9 here (and 10 in the 100-row pyramid). Fewer colours are fewer passes of
    every substep, and on a GPU fewer of its team's barriers."""
    scene = pyramid(30, arch=arch, enable_sleep=False)
    moving = np.array([scene.body_mass(i) > 0 for i in range(scene.n_bodies)])
    for _ in range(40):
        scene.step(DT)
    a, b, color, _, _ = coloring(scene)
    solved = color[: len(a)] != UNSOLVED_COLOR
    ends = np.concatenate([a[solved], b[solved]])
    degree = np.bincount(ends[moving[ends]]).max()
    assert degree == 6
    assert_valid_coloring(scene)
    assert scene.n_colors <= degree + 2, scene.n_colors


def _settled_and_scattered(arch, solver, n_worlds):
    """A 12-row pyramid (78 boxes: a large world, coloured in parallel rounds) with five
    boxes dropped 3-4 m onto it (new pairs at 0.7-0.9 s: colourings that start from the
    last colours), in each of n_worlds worlds, sleep off; in a second world the boxes are
    thrown about, so that world's pairs change every step."""
    specs, _ = pyramid_layout(12)
    specs = [BodySpec(s.kind, s.position, s.size, mass=s.mass) for s in specs]
    specs += [
        BodySpec("box", (x, y), (1.0, 1.0))
        for x, y in ((-4.2, 8.0), (-2.1, 11.0), (0.3, 14.5), (2.4, 11.0), (4.5, 8.0))
    ]
    # Thrown up beside the pyramid, it lands at ~3.4 s (step ~205): new pairs after a
    # kept colouring from scratch.
    specs.append(BodySpec("box", (15.0, 1.0), (1.0, 1.0), velocity=(0.0, 16.6)))
    scene = build_scene(specs, n_worlds=n_worlds, arch=arch, solver=solver, enable_sleep=False)
    if n_worlds > 1:
        state = scene.get_state()
        rng = np.random.default_rng(7)
        state.velocity[1, 1:] = rng.uniform(-6.0, 6.0, state.velocity[1, 1:].shape)
        scene.set_state(state)
    return scene


def test_a_due_colouring_from_scratch_keeps_colours_it_would_give_again(arch, solver, monkeypatch):
    """A colouring from scratch falls due every FRESH_COLORING_STEPS steps. Where the
    colouring still holds and no step coloured since the last one from scratch (nor did a moving
    body become fixed), that one would give the same colours: it is kept
    (StepOptions.keep_fresh_coloring). Shown against making it: a settled pyramid keeps its
    colouring through the due steps and steps bit for bit as when it colours from scratch; and alone
    it steps bit for bit as in a batch beside a world whose pairs change every step (where the due
    colourings from scratch are made). The kept colours are those made from scratch (compared at
    each due step and the next, and every 16th step)."""
    from fx2d_gpu.physics.solver import coloring as coloring_module

    # The drops settle by step 145 (XPBD) and 182 (soft step), the thrown box lands at
    # ~205 and rests by 225: XPBD makes the colourings from scratch due at 160 and 224 and
    # keeps those at 192, 256 and 288; the soft step makes 192, 224 and 256 and keeps 288.
    steps = 9 * coloring_module.FRESH_COLORING_STEPS + 5
    alone = _settled_and_scattered(arch, solver, 1)
    batch = _settled_and_scattered(arch, solver, 2)
    made = _settled_and_scattered(arch, solver, 1)
    made.step_options = {"keep_fresh_coloring": False}
    for step in range(steps):
        for scene in (alone, batch, made):
            scene.step(DT)
        if step % 32 > 1 and step % 16 and step != steps - 1:
            continue  # compared at each due step and the next, and every 16th
        kept, fresh = coloring(alone), coloring(made)
        for i in (0, 1, 2):  # each pair's bodies and colour
            np.testing.assert_array_equal(kept[i], fresh[i], err_msg=(step, i))
        expected = alone.get_state()
        for other in (batch.get_state(), made.get_state()):
            for name in ("position", "angle", "velocity", "angular_velocity"):
                np.testing.assert_array_equal(
                    getattr(other, name)[:1], getattr(expected, name), err_msg=(step, name)
                )
    # The test saw both: colourings from the last colours, and due ones from scratch
    # kept where the others made them.
    assert alone.colorings > alone.scratch_colorings + 10
    assert made.scratch_colorings >= alone.scratch_colorings + 1
    assert batch.scratch_colorings >= alone.scratch_colorings + 1
    assert alone.get_state().position[0, 78, 1] > 11.0  # the pyramid's top box: 12 rows stand
    # A kept one counts as made: the next falls due at the same step in both (a world's
    # colourings from scratch come at the same steps alone and in a batch).
    since = [
        scene.step_context().cache.steps_since_fresh_coloring for scene in (alone, made, batch)
    ]
    assert since[0] == since[1] == since[2] <= coloring_module.FRESH_COLORING_STEPS


def test_repeat_runs_are_bitwise_identical(arch, solver):
    finals = []
    for _ in range(2):
        scene = random_pile(400, arch=arch, seed=3, solver=solver, substeps=None)
        for _ in range(40):
            scene.step(DT)
        s = scene.get_state()
        finals.append((s.position, s.angle, s.velocity, s.angular_velocity))
    for x, y in zip(*finals, strict=True):
        np.testing.assert_array_equal(x, y)


def test_batched_worlds_equal_single_runs(arch, solver):
    batch = random_pile(150, arch=arch, seed=5, n_worlds=14, solver=solver, substeps=None)
    # On the CPU the batch is large enough for the kernels' parallel variant and each single
    # world small enough for their serial one (device.SERIAL_SLOTS): both must agree.
    assert batch.n_bodies <= device.SERIAL_SLOTS < batch.n_worlds * batch.n_bodies
    state = batch.get_state()
    rng = np.random.default_rng(0)
    state.position[:, 1:] += rng.normal(0, 0.05, size=state.position[:, 1:].shape)
    batch.set_state(state)
    start = batch.get_state()
    for _ in range(30):
        batch.step(DT)
    end = batch.get_state()
    # Four of the worlds, the first and last among them (each world's own rows and the
    # batch's ends), each stepped alone.
    for w in (0, 5, 9, batch.n_worlds - 1):
        single = random_pile(150, arch=arch, seed=5, solver=solver, substeps=None)
        s = single.get_state()
        for key in ("position", "angle", "velocity", "angular_velocity", "sleeping"):
            getattr(s, key)[0] = getattr(start, key)[w]
        single.set_state(s)
        for _ in range(30):
            single.step(DT)
        got = single.get_state()
        np.testing.assert_array_equal(got.position[0], end.position[w])
        np.testing.assert_array_equal(got.angle[0], end.angle[w])


def test_a_sleeping_box_wakes_when_hit_or_pushed(arch, solver):
    scene = ground_scene(arch, solver)
    box = scene.add_box((0.0, 0.5), (1.0, 1.0))
    other = scene.add_box((5.0, 0.5), (1.0, 1.0))
    for _ in range(90):
        scene.step(DT)
    assert scene.get_state().sleeping[0, [box, other]].all()
    ball = scene.add_circle((0.0, 3.0), 0.3, mass=5.0)
    woke = False
    for _ in range(60):
        scene.step(DT)
        woke |= not scene.get_state().sleeping[0, box]
    assert woke, "the falling ball did not wake the box"
    assert scene.get_state().position[0, ball, 1] > 1.0  # it landed on the box
    assert scene.get_state().sleeping[0, other]  # nothing touched this one
    scene.apply_force(other, (50.0, 0.0))
    scene.step(DT)
    assert not scene.get_state().sleeping[0, other]
    assert scene.get_state().velocity[0, other, 0] > 0.0


def test_overflow_colour_is_solved_not_dropped(arch):
    # MAX_COLORS + 9 circles all overlapping one hub: more pairs share the hub than there
    # are colours.
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
    scene.add_circle((0.0, 0.0), 1.0, mass=5.0)
    for angle in np.linspace(0, 2 * np.pi, MAX_COLORS + 9, endpoint=False):
        scene.add_circle((1.05 * np.cos(angle), 1.05 * np.sin(angle)), 0.08)
    scene.step(DT)
    assert scene.n_colors == MAX_COLORS and scene.n_overflow > 0
    for _ in range(60):
        scene.step(DT)
    s = scene.get_state()
    distance = np.linalg.norm(s.position[0, 1:] - s.position[0, 0], axis=1)
    # Every small circle was pushed out to the hub's surface (1.08 m), overflow ones too.
    assert distance.min() > 1.08 - 0.005


def plank_of_boxes(arch, n_worlds=1):
    """MAX_COLORS + 9 boxes (0.5 m) resting apart on one dynamic plank on the ground: the
    plank is in more pairs than there are colours (those and the ground's), so 10 of them
    per world are solved in the overflow colour (Jacobi, solver/overflow.py)."""
    n_boxes = MAX_COLORS + 9
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, n_worlds=n_worlds, enable_sleep=False)
    scene.add_box((0.0, -0.5), (60.0, 1.0), mass=0)
    plank = scene.add_box((0.0, 0.25), (0.6 * n_boxes + 1.0, 0.5), mass=20.0)
    boxes = [
        scene.add_box((0.6 * (i - n_boxes / 2), 0.751), (0.5, 0.5), mass=1.0)
        for i in range(n_boxes)
    ]
    return scene, plank, boxes


def test_overflow_pairs_hold_a_plank_of_boxes(arch):
    scene, plank, boxes = plank_of_boxes(arch)
    overflow = []
    for _ in range(120):
        scene.step(DT)
        overflow.append(scene.n_overflow)
    assert min(overflow) == 10  # every step solved 10 pairs in the overflow colour
    s = scene.get_state()
    # The plank rests on the ground and every box on the plank, level and still.
    assert s.position[0, plank, 1] == pytest.approx(0.25, abs=5e-3)
    np.testing.assert_allclose(s.position[0, boxes, 1], 0.75, atol=1e-2)
    assert np.abs(s.angle[0, boxes]).max() < 1e-3
    assert np.abs(s.velocity[0, boxes]).max() < 1e-2
    # Boxes solved in the overflow rest like the others (and do not sink into the plank).
    heights = s.position[0, boxes, 1]
    assert heights.max() - heights.min() < 5e-3


def test_overflow_is_repeatable_and_the_same_in_a_batch(arch):
    finals = []
    for n_worlds, world in ((1, 0), (1, 0), (3, 2)):
        scene, _, _ = plank_of_boxes(arch, n_worlds)
        state = scene.get_state()
        state.velocity[:, :, 0] = 0.3  # slide everything: friction in the overflow too
        scene.set_state(state)
        for _ in range(40):
            scene.step(DT)
        assert scene.n_overflow == 10 * n_worlds
        s = scene.get_state()
        finals.append(
            np.concatenate([s.position[world].ravel(), s.angle[world], s.velocity[world].ravel()])
        )
    np.testing.assert_array_equal(finals[0], finals[1])
    np.testing.assert_array_equal(finals[0], finals[2])


def _circles_closing_on_a_hub(arch, solver):
    """36 circles (0.08 m) thrown at a hub (1 m) from 0.32 m off its surface at 1 m/s, in
    30 steps: their pairs are found before they touch, ~20 steps in more of them touch the
    hub than there are colours, and some overflow pairs have no points in a pass. Returns
    the final poses and velocities (flat) and the largest n_overflow seen. Coloured as the
    general path colours (a world this small is otherwise solved one constraint after the
    other, with no overflow colour)."""
    scene = fx.Scene(
        gravity=(0.0, 0.0), arch=arch, solver=solver, step_options=COLORED_LIKE_GENERAL
    )
    scene.add_circle((0.0, 0.0), 1.0)
    for angle in np.linspace(0.0, 2.0 * np.pi, 36, endpoint=False):
        direction = np.array([np.cos(angle), np.sin(angle)])
        scene.add_circle(1.4 * direction, 0.08, velocity=-direction)
    most = 0
    for _ in range(30):
        scene.step(DT)
        most = max(most, scene.n_overflow)
    s = scene.get_state()
    return np.concatenate([s.position.ravel(), s.angle.ravel(), s.velocity.ravel()]), most


def test_an_overflow_colour_steps_the_same_whatever_an_earlier_scene_left(arch, solver):
    """A pass clears each overflow pair's Jacobi entries before solving it, and a body's
    mean takes only the entries that act: nothing an earlier scene's overflow left in the
    device pool reaches the next one. Circles closing on a hub step bitwise the same before
    and after a plank of boxes solved in the overflow colour (before the fix, a pair
    without points kept the plank's entries, and the hub's scene drifted by rounding)."""
    before, most = _circles_closing_on_a_hub(arch, solver)
    assert most > 0
    plank, _, _ = plank_of_boxes(arch)
    for _ in range(20):
        plank.step(DT)
    assert plank.n_overflow == 10
    after, _ = _circles_closing_on_a_hub(arch, solver)
    np.testing.assert_array_equal(after, before)


def test_dense_piles_of_circles_and_boxes_need_no_overflow(arch):
    """A pile poured from high up packs ~6 neighbours a body: the colours hold every pair."""
    for seed, kinds in ((0, "mixed"), (1, "circles")):
        scene = random_pile(1200, arch=arch, seed=seed)
        if kinds == "circles":
            scene = fx.Scene(arch=arch)
            rng = np.random.default_rng(seed)
            scene.add_box((0.0, -0.5), (14.0, 1.0), mass=0)
            for side in (-1, 1):
                scene.add_box((side * 7.5, 10.0), (1.0, 22.0), mass=0)
            for i in range(1200):
                scene.add_circle(
                    (rng.uniform(-6.5, 6.5), 0.3 + 0.35 * i / 13 * 0.9), rng.uniform(0.12, 0.25)
                )
        worst = 0
        for _ in range(120):
            scene.step(DT)
            worst = max(worst, scene.n_overflow)
        assert worst == 0, kinds
        assert scene.n_colors >= 6  # dense: many colours, all of them parallel
        assert_valid_coloring(scene)


def test_closing_speed_bounds_every_single_impact_and_is_tight():
    """contacts.closing_speed against brute force (tests/reference/contacts.py): each body
    keeps its velocity or takes one impact of restitution e with a surface of any normal m
    (v - (1 + e)(v.m)m, m against v); the fastest the two can then close along any
    direction is the largest |a' - b'| over a fine sweep of both normals. The bound holds
    and is attained."""
    import taichi as ti

    from fx2d_gpu.physics.solver.contacts import closing_speed

    rng = np.random.default_rng(3)
    cases = 200
    v = rng.normal(0.0, 5.0, (cases, 2, 2)).astype(np.float32)
    v[:20, 1] = v[:20, 0]  # falling side by side
    v[20:40, 1] = 0.0  # a body at rest
    e = rng.choice([0.0, 0.1, 0.5, 1.0], (cases, 2)).astype(np.float32)
    velocities = ti.Vector.field(2, ti.f32, (cases, 2))
    elasticities = ti.field(ti.f32, (cases, 2))
    bounds = ti.field(ti.f32, cases)
    velocities.from_numpy(v)
    elasticities.from_numpy(e)

    @ti.kernel
    def evaluate():
        for i in range(cases):
            bounds[i] = closing_speed(
                velocities[i, 0], velocities[i, 1], elasticities[i, 0], elasticities[i, 1]
            )

    evaluate()
    got = bounds.to_numpy()
    for i in range(cases):
        brute = reference_closing_speed(v[i, 0], e[i, 0], v[i, 1], e[i, 1])
        scale = 1e-4 * (1.0 + np.abs(v[i]).sum())
        assert got[i] >= brute - scale, (i, got[i], brute)
        assert got[i] <= brute * 1.001 + scale, (i, got[i], brute)


def test_a_manifolds_velocity_sweep_is_the_row_by_row_gauss_seidel_sweep():
    """XPBD's velocity sweep over a manifold (contacts._sweep_points, which carries each
    row's relative velocity to the later rows through their coupling and applies the
    impulses to the bodies once) against the sweep row by row from the bodies' velocities
    in float64 NumPy (tests/reference/contacts.py): random 1- and 2-point manifolds between
    two moving bodies of equal masses (no block solver), random arms, normals, velocities,
    carried impulses and friction. The same impulses and velocities to float32 rounding."""
    import taichi as ti

    from fx2d_gpu.physics.solver.contacts import _sweep_points, tangent_of

    rng = np.random.default_rng(11)
    cases = 300
    angle = rng.uniform(-np.pi, np.pi, cases)
    normals = np.stack([np.cos(angle), np.sin(angle)], 1)
    velocities = rng.normal(0.0, 2.0, (cases, 6))  # v_a, w_a, v_b, w_b
    inverse = np.stack([np.full(cases, 0.5), rng.uniform(0.2, 3.0, cases)], 1)
    masses = np.concatenate([inverse, inverse], 1)  # w_a = w_b: no block solver
    arms = rng.uniform(-0.6, 0.6, (cases, 2, 2, 2))  # case, body, point, xy
    targets = rng.uniform(-1.0, 0.0, (cases, 2))
    mu = rng.choice([0.0, 0.3, 1.0], (cases, 2))
    carried = np.abs(rng.normal(0.0, 0.5, (cases, 2, 2)))  # normal, tangent
    carried[:, 1] *= rng.choice([-1.0, 1.0], (cases, 2))
    counts = np.where(np.arange(cases) % 3 == 0, 1, 2)
    f32 = ti.f32
    normal_f, velocity_f, mass_f, arm_f, target_f, mu_f, impulse_f = (
        ti.field(f32, (cases, width)) for width in (2, 6, 4, 8, 2, 2, 4)
    )
    count_f = ti.field(ti.i32, cases)
    out = ti.field(f32, (cases, 10))
    for field, values in (
        (normal_f, normals),
        (velocity_f, velocities),
        (mass_f, masses),
        (arm_f, arms.reshape(cases, 8)),
        (target_f, targets),
        (mu_f, mu),
        (impulse_f, carried.reshape(cases, 4)),
    ):
        field.from_numpy(values.astype(np.float32))
    count_f.from_numpy(counts.astype(np.int32))

    @ti.kernel
    def sweep():
        for c in range(cases):
            normal = ti.math.vec2(normal_f[c, 0], normal_f[c, 1])
            tangent = tangent_of(normal)
            masses_c = ti.math.vec4(mass_f[c, 0], mass_f[c, 1], mass_f[c, 2], mass_f[c, 3])
            arm_a, arm_b = ti.Matrix.zero(f32, 2, 2), ti.Matrix.zero(f32, 2, 2)
            normal_mass, tangent_mass = ti.math.vec2(0.0), ti.math.vec2(0.0)
            for i in ti.static(range(2)):
                for k in ti.static(range(2)):
                    arm_a[i, k] = arm_f[c, 2 * i + k]
                    arm_b[i, k] = arm_f[c, 4 + 2 * i + k]
                ra = ti.math.vec2(arm_a[i, 0], arm_a[i, 1])
                rb = ti.math.vec2(arm_b[i, 0], arm_b[i, 1])
                for d in ti.static(range(2)):
                    direction = normal if d == 0 else tangent
                    k_row = (
                        masses_c[0]
                        + masses_c[2]
                        + masses_c[1] * (ra.x * direction.y - ra.y * direction.x) ** 2
                        + masses_c[3] * (rb.x * direction.y - rb.y * direction.x) ** 2
                    )
                    if d == 0:
                        normal_mass[i] = 1.0 / k_row
                    else:
                        tangent_mass[i] = 1.0 / k_row
            va, wa, vb, wb, jn, jt = _sweep_points(
                ti.math.vec2(velocity_f[c, 0], velocity_f[c, 1]),
                velocity_f[c, 2],
                ti.math.vec2(velocity_f[c, 3], velocity_f[c, 4]),
                velocity_f[c, 5],
                masses_c,
                normal,
                arm_a,
                arm_b,
                ti.math.vec2(target_f[c, 0], target_f[c, 1]),
                normal_mass,
                tangent_mass,
                ti.math.vec2(mu_f[c, 0], mu_f[c, 1]),
                ti.math.vec2(impulse_f[c, 0], impulse_f[c, 1]),
                ti.math.vec2(impulse_f[c, 2], impulse_f[c, 3]),
                count_f[c],
                1.0,
            )
            results = ti.Vector([va.x, va.y, wa, vb.x, vb.y, wb, jn[0], jn[1], jt[0], jt[1]])
            for k in ti.static(range(10)):
                out[c, k] = results[k]

    sweep()
    got = out.to_numpy().astype(np.float64)
    for c in range(cases):
        n = counts[c]
        (va, wa, vb, wb), jn, jt = manifold_sweep(
            (velocities[c, :2], velocities[c, 2], velocities[c, 3:5], velocities[c, 5]),
            masses[c],
            normals[c],
            arms[c, 0, :n],
            arms[c, 1, :n],
            targets[c],
            mu[c],
            carried[c, 0, :n],
            carried[c, 1, :n],
        )
        expected = np.concatenate([va, [wa], vb, [wb], jn, np.zeros(2 - n), jt, np.zeros(2 - n)])
        if n == 1:  # a 1-point manifold leaves the second point's impulses as they came
            expected[[7, 9]] = carried[c, 0, 1], carried[c, 1, 1]
        scale = 1.0 + np.abs(expected).max()
        np.testing.assert_allclose(got[c], expected, atol=2e-5 * scale, err_msg=str(c))


def test_a_body_deflected_into_its_falling_neighbour_meets_it_without_sinking_in(arch):
    """Two balls fall side by side at 15 m/s, 3 cm apart; the left one lands on a small 45
    degree static wedge, which throws it sideways into the right one (which passes the
    wedge by). Their relative velocity when that step starts is zero: the pair's margin
    must come from what an impact can do to either ball (contacts.closing_bound). With the
    relative velocity alone the step finds no point between them and they overlapped by
    2.9 cm; with the bound they meet without overlapping."""
    scene = ground_scene(arch)
    corner, wedge = np.array([-0.8, 1.0]), np.array([(0.0, 0.0), (0.2, 0.0), (0.0, 0.2)])
    scene.add_polygon(
        tuple(corner + wedge.mean(0)),
        wedge.tolist(),
        mass=0,
        static_friction=0.0,
        dynamic_friction=0.0,
    )
    balls = [
        scene.add_circle(
            (x, 2.6),
            0.1,
            velocity=(0.0, -15.0),
            elasticity=0.0,
            static_friction=0.0,
            dynamic_friction=0.0,
        )
        for x in (-0.66, -0.43)
    ]
    deepest = 0.0
    for _ in range(20):
        scene.step(DT)
        s = scene.get_state()
        distance = np.linalg.norm(s.position[0, balls[1]] - s.position[0, balls[0]])
        deepest = max(deepest, 0.2 - distance)
    assert scene.get_state().velocity[0, balls[1], 0] > 1.0  # it was hit (only the ball hits it)
    assert deepest < 0.005
