"""Single stages of the step pipeline (fx2d_gpu/physics/solver/step.py) against NumPy references.

Each test builds a small Scene, takes its StepContext (Scene.step_context), writes or lets
the earlier stages produce the stage's input, runs one stage launcher and compares its
output with a reference computed here from hand-derived inputs:

- colouring (coloring.color_constraints): brute-force validity of the colour lists, and the
  colours the documented bidding rule gives, on a star, a chain and a hub of MAX_COLORS + 8 spokes;
- one contact position pass (resolve_penetration's XPBD formula) for a circle and for boxes
  whose manifold is computed by hand;
- one contact velocity pass: accumulated normal impulses, speculative contacts, Coulomb
  friction (static / kinetic regime) and the two-point block solve;
- one joint position pass: JOINT_ITERATIONS x JOINT_SWEEPS XPBD anchor updates of a revolute joint.

The stages run as the per-stage executor runs them (solver/staged.py), walked from the
stage list (solver/stages.py's SUBSTEP_STAGES); before the first substep's stages run,
every field they declare they write (Stage.writes) is filled with NaN (ints with a
garbage value), as mujoco_warp's tests do: a stage that forgets to write one leaves the
garbage for the next stage to read, and the comparison fails.

Only public API is used: Scene methods, the stage launchers and the pool's fields.
"""

import numpy as np
import pytest
import taichi as ti

import fx2d_gpu as fx
import fx2d_gpu.physics.solver.coloring as coloring
import fx2d_gpu.physics.solver.pairs as pairs
from fx2d_gpu.device import (
    LIST_CHUNK,
    LIST_KEYS,
    MAX_COLORS,
    SCAN_BLOCK,
    SCAN_CHUNK,
    UNSOLVED_COLOR,
    buckets,
    list_counts_length,
)
from fx2d_gpu.device.scan import exclusive_scan
from fx2d_gpu.physics.solver import team_stages
from fx2d_gpu.physics.solver.contacts import (
    LINEAR_SLOP,
    MAX_PUSHOUT_SPEED,
    SLOP_FRACTION,
    STICK_SPEED,
    build_body_lists,
)
from fx2d_gpu.physics.solver.context import SMALL_COLORING_MAX_BODIES
from fx2d_gpu.physics.solver.staged import colour_pass, run_items
from fx2d_gpu.physics.solver.stages import SUBSTEP_STAGES
from fx2d_gpu.physics.solver.step import find_pairs

from .fields import put
from .reference.coloring import bid_priority, rule_colors
from .reference.contacts import cross, perp, reference_push, sequential_impulse
from .reference.joints import reference_revolute, rotation

SERIAL = pytest.mark.parametrize("serial", [False, True], ids=["parallel", "serial"])


# ----------------------------------------------------------------------------- helpers
def get(field, n):
    return field.to_numpy()[:n].astype(np.float64)


def stage_context(scene, serial, dt=1.0 / 60.0, substeps=1):
    """The scene's StepContext for a step of dt (s) in `substeps`, its kernels' loops serial
    if `serial` (the tests' scenes are built without gravity: it is the scene's, per
    world)."""
    ctx = scene.step_context(dt)
    ctx.serial, ctx.substeps = serial, substeps
    return ctx


#: Integer fields a test fills before a stage that must write them (floats get NaN).
GARBAGE = -123_456_789


def poison(ctx, stages):
    """Fill every field the stages declare they write (Stage.writes) with NaN, or GARBAGE
    for an int field."""
    for stage in stages:
        for name in stage.writes:
            group, field_name = name.split(".")
            field = getattr(getattr(ctx.pool, group), field_name)
            field.fill(GARBAGE if field.dtype == ti.i32 else float("nan"))


def run_stages(ctx, first: str, last: str, substep: int = 0):
    """SUBSTEP_STAGES from the stage named `first` to the one named `last` (included) of
    substep `substep`, as the per-stage executor runs them (the item stages between two
    colour passes in one launch)."""
    names = [stage.name for stage in SUBSTEP_STAGES]
    index, end = names.index(first), names.index(last) + 1
    while index < end:
        if SUBSTEP_STAGES[index].is_pass:
            colour_pass(ctx, SUBSTEP_STAGES[index])
            index += 1
        else:
            items_end = index
            while items_end < end and not SUBSTEP_STAGES[items_end].is_pass:
                items_end += 1
            run_items(ctx, index, items_end, substep, before_coloring=False)
            index = items_end


def first_substep(ctx):
    """The step's stages up to the first substep's position pass, as solver.step.step runs
    them, the fields they write filled with NaN first (poison)."""
    poison(ctx, SUBSTEP_STAGES)
    find_pairs(ctx)
    ctx.cache.pairs_in_place = False  # found here, not kept (solver.step._step decides)
    build_body_lists(ctx)
    run_stages(ctx, "motors", "integrate positions")


def position_pass(ctx):
    run_stages(ctx, "position pass", "position pass")


def velocity_pass(ctx):
    """The stages after the position pass: continuous, derive velocities, velocity pass."""
    run_stages(ctx, "continuous", "velocity pass")


def manifold(ctx, pair=0):
    """(normal, points (count, 2), depths (count,)) of stored pair `pair`."""
    contacts = ctx.pool.manifolds
    count = int(contacts.point_count.to_numpy()[pair])
    return (
        contacts.normal.to_numpy()[pair].astype(np.float64),
        contacts.point.to_numpy()[pair, :count].astype(np.float64),
        contacts.depth.to_numpy()[pair, :count].astype(np.float64),
    )


def inverse_mass(scene, body):
    """(1/m, 1/I) of a body, 0 for static ones."""
    mass = scene.body_mass(body)
    return (1.0 / mass, 1.0 / scene.body_inertia(body)) if mass > 0.0 else (0.0, 0.0)


def slop_of(scene, body_a, body_b):
    smallest = min(scene.body_shape(b).bounding_radius for b in (body_a, body_b))
    return min(LINEAR_SLOP, SLOP_FRACTION * smallest)


# ----------------------------------------------------------------------------- colouring


def colour_graph(serial, n_bodies, edges, static=(), n_worlds=1, apart=()):
    """Colour the contact pairs `edges` (body pairs, repeated in every world) of a scene of
    n_bodies circles (those in `static` with mass 0), written by hand into the pool as the
    broad phase leaves them (grouped by lower slot, partners ascending, pair_start per
    slot), after carry_contacts found no pairs last step; the solver looks at every pair
    (coloring.solve, as step.begin_step leaves it) but those of `apart`. Returns (ctx, a,
    b, dynamic, solved)."""
    scene = fx.Scene(gravity=(0.0, 0.0), n_worlds=n_worlds)
    for body in range(n_bodies):
        scene.add_circle((3.0 * body, 0.0), 0.5, mass=0.0 if body in static else 1.0)
    ctx = stage_context(scene, serial)
    pairs.save_previous_pairs(ctx)  # a new scene has no pairs: `previous` is left empty
    edges = np.array(edges)
    world = np.repeat(np.arange(n_worlds), len(edges)) * n_bodies
    a = np.tile(edges.min(1), n_worlds) + world
    b = np.tile(edges.max(1), n_worlds) + world
    order = np.lexsort((b, a))
    a, b = a[order], b[order]
    n_slots = n_worlds * n_bodies
    pool = ctx.pool
    put(pool.manifolds.body_a, a)
    put(pool.manifolds.body_b, b)
    put(
        pool.manifolds.pair_start,
        np.concatenate([[0], np.cumsum(np.bincount(a, minlength=n_slots))]),
    )
    ctx.cache.n_pairs = len(a)
    local = {(min(e), max(e)) for e in apart}
    solved = np.array(
        [(x % n_bodies, y % n_bodies) not in local for x, y in zip(a, b, strict=True)]
    )
    put(pool.coloring.solve, solved.astype(np.int32))
    pairs.carry_contacts(ctx)
    # Small worlds too coloured as the general path colours (by default they take one
    # colour: StepOptions.color_small_worlds).
    ctx.options = ctx.options.replace(color_small_worlds=True)
    assert coloring.color_constraints(ctx)  # a new colouring, from scratch
    dynamic = np.tile([body not in static for body in range(n_bodies)], n_worlds)
    return ctx, a, b, dynamic, solved


def check_coloring(ctx, a, b, dynamic):
    """Brute-force checks of the colouring of pairs (a, b); returns (color, color_list,
    color_start) as the device holds them."""
    n = len(a)
    pool, cache = ctx.pool, ctx.cache
    color = pool.coloring.color.to_numpy()[:n]
    start = pool.coloring.color_start.to_numpy()
    listed = pool.coloring.color_list.to_numpy()[:n]
    assert start[0] == 0 and start[UNSOLVED_COLOR + 1] == n and (np.diff(start) >= 0).all()
    np.testing.assert_array_equal(np.sort(listed), np.arange(n))  # each pair exactly once
    used = 0
    for c in range(UNSOLVED_COLOR + 1):
        members = listed[start[c] : start[c + 1]]
        assert (color[members] == c).all(), c  # listed under its own colour
        if c < MAX_COLORS and len(members):
            used = c + 1
            ends = np.concatenate([a[members], b[members]])
            moving = ends[dynamic[ends]]
            assert len(np.unique(moving)) == len(moving), f"colour {c} shares a dynamic body"
    # A colour round always colours the lowest-priority pair left (every body is free of
    # the new colour when the round starts): no empty colour below the last one used.
    assert all(start[c + 1] > start[c] for c in range(used))
    assert cache.n_colors == used
    overflow = listed[start[MAX_COLORS] : start[MAX_COLORS + 1]]
    assert cache.n_overflow == len(overflow)
    # The overflow colour is listed in constraint order (its entries are numbered by it).
    np.testing.assert_array_equal(overflow, np.sort(overflow))
    check_jacobi_lists(ctx, a, b, dynamic, overflow)
    return color, listed, start


def check_jacobi_lists(ctx, a, b, dynamic, overflow):
    """solver/overflow.py's lists against NumPy: each dynamic body of an overflow pair has
    the entries 2 i (its body a) or 2 i + 1 (body b) of overflow pairs i, ascending."""
    groups = ctx.pool.coloring
    overflow_pairs = overflow[overflow < len(a)]
    assert groups.n_overflow_pairs[None] == len(overflow_pairs)
    expected: dict[int, list[int]] = {}
    for i, pair in enumerate(overflow_pairs):
        for side, slot in enumerate((a[pair], b[pair])):
            if dynamic[slot]:
                expected.setdefault(int(slot), []).append(2 * i + side)
    n_bodies = groups.n_jacobi_bodies[None] if len(overflow) else 0
    listed = groups.jacobi_bodies.to_numpy()[:n_bodies]
    assert sorted(listed.tolist()) == sorted(expected)
    starts, counts = groups.jacobi_start.to_numpy(), groups.jacobi_count.to_numpy()
    entries = groups.jacobi_entries.to_numpy()
    for slot, mine in expected.items():
        assert counts[slot] == len(mine)
        assert entries[starts[slot] : starts[slot] + counts[slot]].tolist() == mine


def check_color_order(ctx, a, b, color):
    """store_in_color_order: pair n now holds the broad phase's pair pair_origin[n], pairs
    ascend by colour, and color_list / color follow the new indices. Worlds solved one per
    thread (ctx.solves_by_world) keep the broad phase's order instead, and pair_origin
    lists each world's pairs (in its own range) in colour order, the order its thread
    solves them in."""
    n = len(a)
    pairs.store_in_color_order(ctx, True)
    pool = ctx.pool
    origin = pool.coloring.pair_origin.to_numpy()[:n]
    np.testing.assert_array_equal(np.sort(origin), np.arange(n))
    if ctx.solves_by_world:
        assert not ctx.cache.pairs_ordered
        np.testing.assert_array_equal(pool.manifolds.body_a.to_numpy()[:n], a)
        np.testing.assert_array_equal(pool.coloring.color.to_numpy()[:n], color)
        world = a // ctx.n_bodies
        np.testing.assert_array_equal(world[origin], world)  # each world's in its range
        solved = color[origin]
        same_world = world[1:] == world[:-1]
        assert (np.diff(solved)[same_world] >= 0).all()
        return
    np.testing.assert_array_equal(pool.manifolds.body_a.to_numpy()[:n], a[origin])
    np.testing.assert_array_equal(pool.manifolds.body_b.to_numpy()[:n], b[origin])
    stored = pool.coloring.color.to_numpy()[:n]
    np.testing.assert_array_equal(stored, color[origin])
    assert (np.diff(stored) >= 0).all()
    np.testing.assert_array_equal(pool.coloring.color_list.to_numpy()[:n], np.arange(n))


@SERIAL
def test_coloring_a_star_with_a_shared_static_body(serial):
    """A dynamic hub (0) touching leaves 1-8; leaf 8 is static, a ground under a row of six
    touching dynamic balls (9-14). The hub's 8 pairs need 8 colours, one each, taken in
    bid order (each round the hub goes to the lowest bid on it: its leaves 1-7 have no
    other pair, and static 8 takes no bids). A pair to a leaf ranks before the pair to the
    ground (its leaf counts its one uncoloured constraint, a static body none), so the
    hub's pairs to leaves 1-7 take colours 0-6 in the permutation's order and its pair to
    the ground colour 7. Static bodies never count as taken, so a colour holds several
    pairs on the ground, some won in later sub-rounds of that colour."""
    row = list(range(9, 15))
    edges = (
        [(0, leaf) for leaf in range(1, 9)]
        + [(8, ball) for ball in row]
        + [(ball, ball + 1) for ball in row[:-1]]
    )
    ctx, a, b, dynamic, _ = colour_graph(serial, 15, edges, static={8})
    color, _, _ = check_coloring(ctx, a, b, dynamic)
    to_leaves = np.nonzero((a == 0) & (b != 8))[0]
    by_bid = to_leaves[np.argsort(bid_priority(to_leaves))]
    np.testing.assert_array_equal(color[by_bid], np.arange(7))
    assert color[(a == 0) & (b == 8)] == [7]
    on_ground = np.nonzero(a == 8)[0]
    assert np.bincount(color[on_ground]).max() >= 2  # a static body shared in a colour
    assert ctx.cache.n_colors == 8 and ctx.cache.n_overflow == 0
    np.testing.assert_array_equal(
        color, rule_colors(a, b, dynamic, bid_priority(np.arange(len(a))))
    )
    check_color_order(ctx, a, b, color)


@SERIAL
def test_coloring_a_chain(serial):
    """30 dynamic bodies, pair i-(i+1): adjacent pairs share a body, so at least 2 colours.
    Rounds that each took a maximal set of pairs would need at most 3 (a pair has 2
    neighbours); the rule does not promise maximal rounds, but on this chain it uses 3
    colours, nothing in the overflow, exactly as the rule simulated in NumPy pair by pair."""
    ctx, a, b, dynamic, _ = colour_graph(serial, 30, [(i, i + 1) for i in range(29)])
    color, _, _ = check_coloring(ctx, a, b, dynamic)
    assert (color[:-1] != color[1:]).all()
    assert 2 <= ctx.cache.n_colors <= 3
    assert ctx.cache.n_overflow == 0
    np.testing.assert_array_equal(color, rule_colors(a, b, dynamic, bid_priority(np.arange(29))))
    check_color_order(ctx, a, b, color)


@SERIAL
def test_pairs_apart_take_no_colour(serial):
    """A chain of 60 bodies (a world larger than SMALL_COLORING_MAX_BODIES) with every third pair
    apart (no points in the step's narrow phase, not fast): those take UNSOLVED_COLOR, bid
    for nothing (the others colour as if they were not there, by the rule simulated in
    NumPy) and are stored after every solved pair, where no pass reaches them. In a small
    world every pair takes a colour."""
    chain = [(i, i + 1) for i in range(59)]
    apart = chain[::3]
    ctx, a, b, dynamic, solved = colour_graph(serial, 60, chain, apart=apart)
    assert not ctx.small_coloring
    color, _, start = check_coloring(ctx, a, b, dynamic)
    np.testing.assert_array_equal(color == UNSOLVED_COLOR, ~solved)
    assert start[UNSOLVED_COLOR + 1] - start[UNSOLVED_COLOR] == len(apart)
    # With the pairs apart gone the chain falls into pieces of two pairs: 2 colours.
    assert ctx.cache.n_colors == 2 and ctx.cache.n_overflow == 0
    np.testing.assert_array_equal(
        color, rule_colors(a, b, dynamic, bid_priority(np.arange(59)), solved)
    )
    check_color_order(ctx, a, b, color)
    small = chain[: SMALL_COLORING_MAX_BODIES - 1]
    ctx, a, b, dynamic, _ = colour_graph(serial, SMALL_COLORING_MAX_BODIES, small, apart=small[::3])
    assert ctx.small_coloring
    color, _, _ = check_coloring(ctx, a, b, dynamic)
    assert (color < MAX_COLORS).all()


@SERIAL
@pytest.mark.parametrize("n_worlds", [1, 2])
def test_coloring_a_hub_overflows(serial, n_worlds):
    """One dynamic body in MAX_COLORS + 8 pairs: a colour holds at most one of them, so the
    MAX_COLORS colours hold MAX_COLORS and the other 8 go to the overflow colour, per world.
    Round c gives the hub to its c-th lowest bid; bids are priorities of the pair's index
    within its world, so every world of a batch colours the same as one alone."""
    spokes = MAX_COLORS + 8
    ctx, a, b, dynamic, _ = colour_graph(
        serial, spokes + 1, [(0, s) for s in range(1, spokes + 1)], n_worlds=n_worlds
    )
    color, _, _ = check_coloring(ctx, a, b, dynamic)
    assert ctx.cache.n_colors == MAX_COLORS
    assert ctx.cache.n_overflow == (spokes - MAX_COLORS) * n_worlds
    local = np.arange(spokes)
    expected = np.full(spokes, MAX_COLORS)
    expected[np.argsort(bid_priority(local))[:MAX_COLORS]] = np.arange(MAX_COLORS)
    np.testing.assert_array_equal(color, np.tile(expected, n_worlds))
    np.testing.assert_array_equal(
        color, rule_colors(a, b, dynamic, bid_priority(np.tile(local, n_worlds)))
    )
    check_color_order(ctx, a, b, color)


# ----------------------------------------------------------------------------- position pass


def box_on_box(lower_x, lower_top, upper_x, upper_bottom, width_lower, width_upper):
    """The manifold of an axis-aligned box resting on a wider one, by hand: normal up (from
    the lower box, body a, to the upper one), points at both ends of the overlap of their
    faces, halfway between the faces, depth = overlap of the faces."""
    left = max(lower_x - width_lower / 2, upper_x - width_upper / 2)
    right = min(lower_x + width_lower / 2, upper_x + width_upper / 2)
    y = 0.5 * (lower_top + upper_bottom)
    depth = lower_top - upper_bottom
    return (np.array([0.0, 1.0]), np.array([[left, y], [right, y]]), np.array([depth, depth]))


POSITION_CASES = {
    # circle r 0.5 on a static box, 5 cm deep: one point under the centre (no turn)
    "circle_on_static_box": ("circle", 0.0, 0.0),
    # a unit box overhanging a static box's edge by 0.3 m: two points, net turn
    "box_overhanging_static_box": ("box", 0.0, 0.8),
    # the same on a dynamic 2 kg box: both bodies move and turn
    "box_on_dynamic_box": ("box", 2.0, 0.8),
}


@SERIAL
@pytest.mark.parametrize("case", POSITION_CASES)
@pytest.mark.parametrize("substeps", [1, 11], ids=["h=dt", "h=dt/11"])
def test_position_pass_resolves_penetration_like_xpbd(serial, case, substeps):
    """One position_pass after the first substep's stages: the bodies' displacement equals the
    XPBD formula evaluated in NumPy on the hand-computed manifold (no gravity, no velocity,
    so begin_substep moves nothing). With h = dt/11 the push-out limit MAX_PUSHOUT_SPEED h
    (4.5 mm) caps every point's correction; with h = dt it does not (48 mm < 50 mm).
    Pose and previous pose move together: the pass creates no velocity."""
    shape, lower_mass, upper_x = POSITION_CASES[case]
    d = 0.05
    scene = fx.Scene(gravity=(0.0, 0.0))
    lower_width = 2.0
    scene.add_box((0.0, -0.5), (lower_width, 1.0), mass=lower_mass)  # top face at y = 0
    if shape == "circle":
        upper = scene.add_circle((upper_x, 0.5 - d), 0.5)
        normal = np.array([0.0, 1.0])
        points, depths = np.array([[upper_x, -d / 2]]), np.array([d])
    else:
        upper = scene.add_box((upper_x, 0.5 - d), (1.0, 1.0))
        normal, points, depths = box_on_box(0.0, 0.0, upper_x, -d, lower_width, 1.0)
    ctx = stage_context(scene, serial, substeps=substeps)
    first_substep(ctx)
    assert ctx.cache.n_pairs == 1
    got_normal, got_points, got_depths = manifold(ctx)
    np.testing.assert_allclose(got_normal, normal, atol=1e-7)
    order = np.argsort(got_points[:, 0])
    np.testing.assert_allclose(got_points[order], points, atol=1e-6)
    np.testing.assert_allclose(got_depths[order], depths, atol=1e-6)

    position_pass(ctx)
    bodies = ctx.pool.bodies
    delta = get(bodies.delta_position, 2)
    turn = get(bodies.delta_angle, 2)
    centres = np.array([[0.0, -0.5], [upper_x, 0.5 - d]])
    wa, ia = inverse_mass(scene, 0)
    wb, ib = inverse_mass(scene, upper)
    shift_a, turn_a, shift_b, turn_b = reference_push(
        slop_of(scene, 0, upper),
        ctx.h,
        normal,
        depths,
        points - centres[0],
        points - centres[1],
        wa,
        ia,
        wb,
        ib,
    )
    scale = np.abs(shift_b).max()
    np.testing.assert_allclose(delta, [shift_a, shift_b], rtol=2e-6, atol=2e-6 * scale)
    np.testing.assert_allclose(turn, [turn_a, turn_b], rtol=2e-6, atol=2e-6 * scale)
    if substeps == 11:  # each point's correction is capped at MAX_PUSHOUT_SPEED h
        assert scale < MAX_PUSHOUT_SPEED * ctx.h
    np.testing.assert_array_equal(get(bodies.prev_delta_position, 2), delta)
    np.testing.assert_array_equal(get(bodies.prev_delta_angle, 2), turn)
    state = scene.get_state()
    np.testing.assert_allclose(state.position[0], centres + delta, atol=1e-7)


# ----------------------------------------------------------------------------- velocity pass


VELOCITY_CASES = {
    # (gap m, tangential speed m/s, mu_s, mu_k)
    "touching": (0.0, 0.0, 0.0, 0.0),
    "speculative": (0.0078125, 0.0, 0.0, 0.0),  # 2^-7 m: exact in float32
    "sliding_unclamped": (0.0, 0.5, 0.9, 0.4),
    "sliding_clamped": (0.0, 3.0, 0.9, 0.4),
    "sliding_clamped_backwards": (0.0, -3.0, 0.9, 0.4),
    "sticking_static_friction": (0.0, 0.04, 0.5, 0.001),
    "speculative_sliding": (0.0078125, 1.0, 0.9, 0.4),
}


@SERIAL
@pytest.mark.parametrize("case", VELOCITY_CASES)
def test_velocity_pass_of_a_circle_landing(serial, case):
    """A circle (r 0.5, 1 kg) reaching a static box at 2 m/s down, `gap` above it, sliding
    at u m/s, elasticity 0; the first substep's stages (no gravity: velocities unchanged, the
    circle moves by h v) then velocity_pass. Reference: the sequential impulse above with
    the target normal velocity min(depth after the move, 0) / h (0 while touching: the
    normal velocity must vanish; a speculative contact only stops the circle from closing
    more than the gap), and mu = mu_k if the point slid faster than STICK_SPEED when the
    substep began, else mu_s."""
    gap, u, mu_s, mu_k = VELOCITY_CASES[case]
    v0 = np.array([u, -2.0])
    dt, substeps = 1.0 / 60.0, 8  # h v = 4.2 mm: the gap is not closed in one substep
    scene = fx.Scene(gravity=(0.0, 0.0))
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0, static_friction=mu_s, dynamic_friction=mu_k)
    ball = scene.add_circle(
        (0.0, 0.5 + gap),
        0.5,
        velocity=v0,
        elasticity=0.0,
        static_friction=mu_s,
        dynamic_friction=mu_k,
    )
    ctx = stage_context(scene, serial, dt, substeps)
    first_substep(ctx)
    assert ctx.cache.n_pairs == 1
    normal, points, depths = manifold(ctx)
    np.testing.assert_allclose(normal, [0.0, 1.0], atol=1e-7)
    np.testing.assert_allclose(points, [[0.0, gap / 2]], atol=1e-7)
    np.testing.assert_allclose(depths, [-gap], atol=1e-7)
    velocity_pass(ctx)

    h = dt / substeps
    target = min(-gap - v0[1] * h, 0.0) / h  # depth after the move by h v0, over h
    mu = mu_k if abs(u) >= STICK_SPEED else mu_s
    wb, ib = inverse_mass(scene, ball)
    r = np.array([0.0, gap / 2]) - np.array([0.0, 0.5 + gap])
    v, w, jn, jt = sequential_impulse(v0, 0.0, r, normal, wb, ib, target, mu)
    state = scene.get_state()
    np.testing.assert_allclose(state.velocity[0, ball], v, atol=2e-5)
    np.testing.assert_allclose(state.angular_velocity[0, ball], w, atol=4e-5)
    contacts = ctx.pool.manifolds
    np.testing.assert_allclose(contacts.normal_impulse.to_numpy()[0, 0], jn, rtol=1e-5)
    np.testing.assert_allclose(contacts.tangent_impulse.to_numpy()[0, 0], jt, atol=2e-6)
    if gap == 0.0:  # touching: the accumulated normal impulse stops the approach
        vn = (state.velocity[0, ball] + state.angular_velocity[0, ball] * perp(r)) @ normal
        assert abs(vn) < 1e-5
    if case.startswith("sliding_clamped"):
        assert abs(jt) == pytest.approx(mu_k * jn, rel=1e-6)
    if case == "sticking_static_friction":  # mu_k would have let it slide
        assert abs(jt) > mu_k * jn
        slip = (state.velocity[0, ball] + state.angular_velocity[0, ball] * perp(r)) @ perp(normal)
        assert abs(slip) < 1e-5


@SERIAL
def test_velocity_pass_block_solves_a_two_point_landing(serial):
    """A unit box lands flat at 2 m/s on a static box's edge, overhanging it by 0.3 m (two
    points, x = 0.3 and 1.0, unequal arms), no friction. Against a static body the two
    normal impulses are solved together (block solver): x = K^-1 (target - vn), K_ij =
    w + I (r_i x n)(r_j x n); the reference is numpy.linalg.solve, and both points'
    normal velocities must vanish (one point after the other would leave one closing)."""
    v0 = np.array([0.0, -2.0])
    scene = fx.Scene(gravity=(0.0, 0.0))
    scene.add_box((0.0, -0.5), (2.0, 1.0), mass=0.0)
    box = scene.add_box((0.8, 0.5), (1.0, 1.0), velocity=v0, elasticity=0.0)
    ctx = stage_context(scene, serial, substeps=4)
    first_substep(ctx)
    normal, points, depths = manifold(ctx)
    order = np.argsort(points[:, 0])
    np.testing.assert_allclose(points[order], [[0.3, 0.0], [1.0, 0.0]], atol=1e-6)
    np.testing.assert_allclose(depths, [0.0, 0.0], atol=1e-6)
    velocity_pass(ctx)

    wb, ib = inverse_mass(scene, box)
    arms = points[order] - np.array([0.8, 0.5])
    rn = np.array([cross(r, normal) for r in arms])
    k = wb + ib * np.outer(rn, rn)
    vn = np.full(2, v0 @ normal)
    x = np.linalg.solve(k, -vn)  # target 0: touching after the move
    assert (x > 0).all()
    got = ctx.pool.manifolds.normal_impulse.to_numpy()[0, :2][order]
    np.testing.assert_allclose(got, x, rtol=1e-5)
    state = scene.get_state()
    v, w = state.velocity[0, box], state.angular_velocity[0, box]
    for r in arms:
        assert abs((v + w * perp(r)) @ normal) < 1e-5
    np.testing.assert_allclose(v, v0 + wb * x.sum() * normal, atol=2e-6)
    np.testing.assert_allclose(w, ib * (rn @ x), atol=2e-5)


# ----------------------------------------------------------------------------- joints


def revolute_gap(x1, a1, x2, a2):
    """Distance (m) between the test joint's anchors, (0.5, 0) on the parent and (-0.5, 0)
    on the child, at the given poses."""
    return np.linalg.norm(x1 + rotation(a1) @ (0.5, 0.0) - x2 - rotation(a2) @ (-0.5, 0.0))


@SERIAL
@pytest.mark.parametrize("parent_mass", [0.0, 3.0], ids=["static_parent", "dynamic_parent"])
def test_position_pass_closes_a_revolute_joint_like_xpbd(serial, parent_mass):
    """A revolute joint at (0.5, 0) between a parent box (static or 3 kg) and a 1.5 kg bar,
    whose poses are then moved so that the anchors are 0.22 m (0.25 m) apart and the bar
    is turned by 0.3 rad: far enough that the linearised update leaves a gap each pass, so
    the number of passes and the order of their updates matter. After the first substep's stages
    (no gravity, no velocity) and one position_pass the poses equal the reference's anchor
    updates computed in NumPy, and the velocities derived for jointed bodies (at the start of
    the velocity pass) are their displacement over h."""
    scene = fx.Scene(gravity=(0.0, 0.0))
    parent = scene.add_box((0.0, 0.0), (0.5, 0.5), mass=parent_mass)
    child = scene.add_box((1.0, 0.0), (1.0, 0.2), mass=1.5)
    scene.add_revolute_joint(parent, child, anchor=(0.5, 0.0))  # child anchor (-0.5, 0)
    state = scene.get_state()
    state.position[0, parent] = (0.02, -0.01) if parent_mass else (0.0, 0.0)
    state.angle[0, parent] = 0.1 if parent_mass else 0.0
    state.position[0, child] = (1.07, -0.05)
    state.angle[0, child] = 0.3
    scene.set_state(state)
    start = scene.get_state()  # float32-rounded
    ctx = stage_context(scene, serial, substeps=4)
    first_substep(ctx)
    assert ctx.cache.n_pairs == 0  # joined bodies do not collide
    position_pass(ctx)
    # Velocities are derived for jointed bodies after it ("derive velocities"); with no
    # pairs, that is all the velocity_pass helper's stages do.
    velocity_pass(ctx)

    w1, i1 = inverse_mass(scene, parent)
    w2, i2 = inverse_mass(scene, child)
    x1, a1, x2, a2 = reference_revolute(
        start.position[0, parent],
        start.angle[0, parent],
        start.position[0, child],
        start.angle[0, child],
        np.array([0.5, 0.0]),
        np.array([-0.5, 0.0]),
        w1,
        i1,
        w2,
        i2,
    )
    got = scene.get_state()
    np.testing.assert_allclose(got.position[0, child], x2, atol=1e-6)
    np.testing.assert_allclose(got.angle[0, child], a2, atol=1e-6)
    np.testing.assert_allclose(got.position[0, parent], x1, atol=1e-6)
    np.testing.assert_allclose(got.angle[0, parent], a1, atol=1e-6)
    # The four linearised updates close the gap from 0.22 m to 5.3 mm (static parent) or
    # from 0.25 m to 3.3 mm (dynamic parent); joint_anchors (kinematics.py, float64 on the
    # host) sees the gap the reference leaves.
    before = revolute_gap(
        start.position[0, parent],
        start.angle[0, parent],
        start.position[0, child],
        start.angle[0, child],
    )
    after = revolute_gap(x1, a1, x2, a2)
    assert before > 0.2 and after < 0.03 * before
    anchors = scene.joint_anchors()[0, 0]
    assert np.linalg.norm(anchors[0] - anchors[1]) == pytest.approx(after, abs=2e-6)
    h = ctx.h
    for body, x, a in ((parent, x1, a1), (child, x2, a2)):
        np.testing.assert_allclose(
            got.velocity[0, body], (x - start.position[0, body]) / h, rtol=2e-5, atol=1e-4
        )
        np.testing.assert_allclose(
            got.angular_velocity[0, body], (a - start.angle[0, body]) / h, rtol=2e-5, atol=1e-4
        )


class ScanScratch:
    """The prefix sums' scratch (device.ScanScratch's fields) for n_blocks block sums (and
    a GPU's scan's sum a number); made after Taichi starts."""

    def __init__(self, n_blocks):
        self.blocks = ti.field(ti.i32, n_blocks)
        self.chunks = ti.field(ti.i32, n_blocks // SCAN_CHUNK + 2)
        self.items = ti.field(ti.i32, n_blocks * SCAN_BLOCK)
        self.block_prefix = ti.field(ti.i32, n_blocks)


@ti.kernel
def _team_scan_kernel(
    scratch: ti.template(),
    counts: ti.template(),
    first: ti.template(),
    n_first: ti.i32,
    second: ti.template(),
    n_second: ti.i32,
    cursors: ti.template(),
    kind: ti.template(),
    passes: ti.template(),
):
    # (`passes` only keys the build: one compiled with device.SCAN_PASSES "gpu" is another.)
    for member in range(1):  # a team of one: every phase in order, its barriers nothing
        if ti.static(kind == "scan"):
            team_stages.exclusive_scan(scratch, first, counts, n_first, member, 1)
        elif ti.static(kind == "cursors"):
            team_stages.exclusive_scan_to_cursors(
                scratch, first, cursors, counts, n_first, member, 1
            )
        else:
            team_stages.exclusive_scans(
                scratch, first, n_first, second, n_second, counts, member, 1
            )


def test_team_scans_match_numpy(arch):
    """team_stages' prefix sums (a CPU team's: block sums, the block sums scanned a chunk at
    a time, the chunks' totals, the blocks' running sums; a GPU team's: a number at a time,
    then a block sum at a time, device.scan's GPU passes, compiled for the CPU too with
    device.SCAN_PASSES "gpu") against NumPy's cumulative sums, on a team of one member:
    exclusive_scan; exclusive_scan_to_cursors, whose cursors take the same sums;
    exclusive_scans, two arrays in one pass, the second's blocks after the first's.
    Lengths of none, less than a block, exactly blocks and not, one chunk of blocks and
    several, in both places of a pair."""
    from fx2d_gpu import device
    from fx2d_gpu.device import runtime

    fx.Scene(arch=arch)  # Taichi started on this test's backend
    for passes in ("backend", "gpu") if runtime.on_cpu() else ("backend",):
        device.SCAN_PASSES = None if passes == "backend" else passes
        try:
            _check_team_scans(passes)
        finally:
            device.SCAN_PASSES = None


def _check_team_scans(passes):
    """test_team_scans_match_numpy's checks, with _team_scan_kernel built for `passes`."""

    class Counts:  # a team of one never meets: its barrier counters are never read
        barrier = ti.field(ti.i32, 64)

    rng = np.random.default_rng(4)
    chunk = SCAN_CHUNK * SCAN_BLOCK  # (the GPU passes' chunk: SCAN_BLOCK**2 numbers)
    size = SCAN_BLOCK**2 + 3 * SCAN_BLOCK + 1
    first, second, cursors = (ti.field(ti.i32, size + 1) for _ in range(3))
    scratch = ScanScratch(2 * (size // SCAN_BLOCK + 2))
    lengths = (0, 1, SCAN_BLOCK, 3 * SCAN_BLOCK + 17, chunk, chunk + 1, size)

    def cumulative(values, n):
        return np.concatenate([[0], np.cumsum(values[:n])]).astype(np.int32)

    for n_first in lengths:
        for n_second in (0, SCAN_BLOCK - 1, chunk + 5) if n_first != size else (size,):
            a = rng.integers(0, 50, size + 1).astype(np.int32)
            b = rng.integers(0, 50, size + 1).astype(np.int32)
            first.from_numpy(a)
            second.from_numpy(b)
            _team_scan_kernel(
                scratch, Counts, first, n_first, second, n_second, cursors, "pair", passes
            )
            got_a, got_b = first.to_numpy(), second.to_numpy()
            np.testing.assert_array_equal(got_a[: n_first + 1], cumulative(a, n_first))
            np.testing.assert_array_equal(got_b[: n_second + 1], cumulative(b, n_second))
            np.testing.assert_array_equal(got_a[n_first + 1 :], a[n_first + 1 :])
            np.testing.assert_array_equal(got_b[n_second + 1 :], b[n_second + 1 :])
        for kind in ("scan", "cursors"):
            a = rng.integers(0, 50, size + 1).astype(np.int32)
            first.from_numpy(a)
            cursors.fill(-1)
            _team_scan_kernel(scratch, Counts, first, n_first, second, 0, cursors, kind, passes)
            np.testing.assert_array_equal(first.to_numpy()[: n_first + 1], cumulative(a, n_first))
            copied = cursors.to_numpy()
            if kind == "cursors":
                np.testing.assert_array_equal(copied[:n_first], cumulative(a, n_first)[:n_first])
            assert (copied[n_first:] == -1).all()


@ti.kernel
def _scan_kernel(scratch: ti.template(), data: ti.template(), n: ti.i32, serial: ti.template()):
    exclusive_scan(scratch, data, n, serial)


@ti.kernel
def _scan_as_on_a_gpu(scratch: ti.template(), data: ti.template(), n: ti.i32):
    exclusive_scan(scratch, data, n, False)


def test_exclusive_scan_matches_numpy(arch):
    """scan.exclusive_scan, blocked (parallel) on the CPU and, where kernels run their
    loops serially for small scenes, one loop; on a GPU a thread a number (and the GPU's
    passes compiled for the CPU: device.SCAN_PASSES "gpu", which benchmarks/launches.py
    counts a GPU's tasks with), against NumPy's cumulative sum: lengths of none, less than
    a block, exactly blocks and not, one chunk of blocks (a GPU's: SCAN_BLOCK blocks) and
    several."""
    from fx2d_gpu import device
    from fx2d_gpu.device import runtime

    fx.Scene(arch=arch)  # Taichi started on this test's backend

    rng = np.random.default_rng(3)
    chunk = SCAN_BLOCK * SCAN_BLOCK
    size = 2 * chunk + 5 * SCAN_BLOCK + 1
    data = ti.field(ti.i32, size + 1)
    scratch = ScanScratch(size // SCAN_BLOCK + 2)
    lengths = (0, 1, SCAN_BLOCK - 1, SCAN_BLOCK, 3 * SCAN_BLOCK + 17, chunk, chunk + 1, size)
    for variant in (False, True, "gpu") if runtime.on_cpu() else (False,):
        for n in lengths:
            values = rng.integers(0, 50, size + 1).astype(np.int32)
            data.from_numpy(values)
            if variant == "gpu":  # (the flag is read as the kernel compiles, at its first call)
                device.SCAN_PASSES = "gpu"
                try:
                    _scan_as_on_a_gpu(scratch, data, n)
                finally:
                    device.SCAN_PASSES = None
            else:
                _scan_kernel(scratch, data, n, variant)
            got = data.to_numpy()
            expected = np.concatenate([[0], np.cumsum(values[:n])]).astype(np.int32)
            np.testing.assert_array_equal(got[: n + 1], expected)
            np.testing.assert_array_equal(got[n + 1 :], values[n + 1 :])  # past n: untouched


@ti.func
def _key_of(keys: ti.template(), i):
    return keys[i]


@ti.func
def _listed_key_of(keys: ti.template(), i):
    return keys[i] if keys[i] != 1 else -1  # key 1 counted, not listed


@ti.kernel
def _bucket_kernel(
    scratch: ti.template(),
    keys: ti.template(),
    counts: ti.template(),
    out: ti.template(),
    starts: ti.template(),
    n: ti.i32,
    n_keys: ti.i32,
    serial: ti.template(),
):
    buckets.count_by_key(_key_of, keys, counts, n, n_keys, serial)
    exclusive_scan(scratch, counts, n_keys * buckets.chunks_of(n), serial)
    for _ in range(1):
        for k in range(n_keys):
            starts[k] = buckets.key_start(counts, k, n)
        starts[n_keys] = counts[n_keys * buckets.chunks_of(n)]
    buckets.place_by_key(_listed_key_of, keys, counts, out, n, serial)


def test_indices_listed_by_key_match_a_stable_sort(arch):
    """device.buckets (the colour lists' and the uncoloured list's counting sort) against
    NumPy's stable argsort: each key's indices in index order where its start says, key -1
    listed nothing, a key counted but not listed (the overflow colour's way) leaving its
    range as it was; lengths of none, under a chunk, exactly chunks and not, many chunks;
    parallel, and serially where the CPU runs small scenes' loops so."""
    from fx2d_gpu.device import runtime

    fx.Scene(arch=arch)  # Taichi started on this test's backend
    rng = np.random.default_rng(5)
    n_keys, size = LIST_KEYS, 50 * LIST_CHUNK + 7
    keys, out = ti.field(ti.i32, size), ti.field(ti.i32, size)
    counts = ti.field(ti.i32, list_counts_length(size))
    starts = ti.field(ti.i32, n_keys + 1)
    scratch = ScanScratch(counts.shape[0] // SCAN_BLOCK + 2)
    lengths = (0, 1, LIST_CHUNK - 1, LIST_CHUNK, 3 * LIST_CHUNK + 5, size)
    for serial in (False, True) if runtime.on_cpu() else (False,):
        for n in lengths:
            # Few keys used, as a colouring's: most indices in the first colours.
            values = np.minimum(rng.geometric(0.3, size) - 2, n_keys - 1).astype(np.int32)
            keys.from_numpy(values)
            out.fill(-7)
            _bucket_kernel(scratch, keys, counts, out, starts, n, n_keys, serial)
            got, got_starts = out.to_numpy(), starts.to_numpy()
            head = values[:n]
            order = np.argsort(head, kind="stable")
            order = order[head[order] >= 0]
            expected_starts = np.searchsorted(head[order], np.arange(n_keys + 1))
            expected_starts[n_keys] = len(order)
            np.testing.assert_array_equal(got_starts, expected_starts)
            expected = np.full(size, -7, np.int32)
            listed = order[head[order] != 1]
            where = np.concatenate(
                [np.arange(got_starts[k], got_starts[k + 1]) for k in range(n_keys) if k != 1]
            ).astype(int)
            expected[where] = listed
            np.testing.assert_array_equal(got, expected)
