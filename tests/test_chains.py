"""Chains (issue 16): Fx2D's own chain scenarios (its tests/test_chain.cpp, each with bounds
derived for the scene built here, not Fx2D's figures), the smooth slide over joints that
ghost vertices buy, and its chain_terrain scene. The physics tests run under both solvers
(the `solver` fixture), within the same bounds: the soft step's contacts rest within the
slop too (a disc's static deflection at 60 Hz against a static body is 0.07 mm)."""

import math

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import examples, shapes
from fx2d_gpu.physics.solver.contacts import LINEAR_SLOP
from fx2d_gpu.physics.solver.sleep import SLEEP_LINEAR_SPEED

from .helpers import DT, run

TERRAIN = [
    [0.5, 8.5],
    [3.0, 6.2],
    [5.5, 5.4],
    [7.5, 3.2],
    [10.0, 2.2],
    [12.5, 2.6],
    [14.5, 4.4],
    [16.0, 3.6],
    [17.5, 4.6],
    [19.5, 4.2],
]


def make_scene(arch, gravity=-10.0, solver="xpbd"):
    return fx.Scene(gravity=(0.0, gravity), arch=arch, solver=solver)


def add_chain(scene, points):
    """Fx2D's test helper: a static chain, elasticity 0, friction 0.6 / 0.5."""
    return scene.add_chain(
        (0.0, 0.0), points, elasticity=0.0, static_friction=0.6, dynamic_friction=0.5
    )


def surface_y(x):
    for (x0, y0), (x1, y1) in zip(TERRAIN[:-1], TERRAIN[1:], strict=True):
        if x0 <= x <= x1:
            return y0 + (x - x0) / (x1 - x0) * (y1 - y0)
    return -100.0


def test_chain_shape_properties_and_bad_input(arch):
    links = shapes.chain([[0, 0], [2, 0], [4, 1], [6, 1]])
    assert len(links) == 3  # 4 points, 3 segments
    assert all(link.kind == shapes.SHAPE_CHAIN for link in links)
    assert shapes.unit_inertia(links[0]) == 0.0
    assert len(shapes.chain([[0, 0], [2, 0], [1, 1]], loop=True)) == 3
    scene = make_scene(arch)
    first = add_chain(scene, [[0, 0], [2, 0], [4, 1], [6, 1]])
    assert scene.n_bodies == 3 and first == 0
    assert all(scene.body_mass(b) == 0 for b in range(3))
    for points, word in (([[0, 0], [1, 0]], "at least 3"), ([[0, 0], [1, 0], [1, 0]], "apart")):
        with pytest.raises(ValueError, match=word):
            scene.add_chain((0, 0), points)
    with pytest.raises(ValueError, match="mass"):
        scene.add_chain((0, 0), [[0, 0], [1, 0], [2, 0]], mass=1.0)
    assert scene.n_bodies == 3  # refused calls added nothing


def test_box_rests_on_flat_chain(arch, solver):
    scene = fx.Scene(gravity=(0.0, -10.0), arch=arch, solver=solver)
    add_chain(scene, [[2, 5], [12, 5], [22, 5], [32, 5]])
    box = scene.add_box((12.0, 8.0), (1.0, 1.0), static_friction=0.6, dynamic_friction=0.5)
    state = run(scene, 240).get_state()
    # It falls 2.5 m flat onto the chain, e = min(0.1, 0) = 0: no bounce, and rests on the
    # chain (y = 5) half its 1 m up, at most a slop deep. Nothing pushes it sideways (it
    # lands square, across the joint at x = 12): x stays 12 but for rounding. (Fx2D's
    # figures, 5 cm and 20 cm, were its own scene's.)
    assert state.position[0, box, 1] == pytest.approx(5.5, abs=LINEAR_SLOP)
    assert abs(state.position[0, box, 0] - 12.0) < 1e-3


def test_ball_settles_in_a_chain_valley(arch, solver):
    scene = make_scene(arch, solver=solver)
    add_chain(scene, [[2, 12], [10, 4], [20, 4], [28, 12]])
    ball = scene.add_circle(
        (12.0, 14.0), 0.5, elasticity=0.1, static_friction=0.5, dynamic_friction=0.4
    )
    state = run(scene, 600).get_state()
    # Dropped over the valley's flat floor (y = 4 for x in 10..20) at x = 12, it falls
    # straight onto it (e = min(0.1, 0) = 0: no bounce) and rests there, its centre r = 0.5
    # up, at most a slop deep, below the sleep speed. (Fx2D's figures, y > 4, 9 < x < 21
    # and 0.5 m/s, let it be anywhere in the valley, half sunk, still rolling.)
    assert state.position[0, ball, 1] == pytest.approx(4.5, abs=LINEAR_SLOP)
    assert abs(state.position[0, ball, 0] - 12.0) < 1e-3
    assert np.linalg.norm(state.velocity[0, ball]) < SLEEP_LINEAR_SPEED


def test_body_crosses_segment_joints(arch, solver):
    scene = make_scene(arch, solver=solver)
    add_chain(scene, [[2, 9], [14, 8], [26, 7.2], [40, 6.8]])
    ball = scene.add_circle(
        (4.0, 9.3), 0.4, elasticity=0.0, static_friction=0.02, dynamic_friction=0.02
    )
    state = run(scene, 400).get_state()
    # It slides the whole way: rolling would take mu >= tan(theta) / 3 = 0.028 > 0.02 on
    # the first link (theta = atan(1 / 12)), 0.022 on the second. It drops 7 cm onto the
    # first link (0.11 s, e = 0), slides at g (sin - mu cos) = 0.631 m/s^2, reaches the
    # joint at x = 14 after 5.63 s at 3.55 m/s, then at 0.466 m/s^2 on the second link:
    # at 6.67 s its centre is at x = 17.89 (5 cm for the landing and the substeps). Over
    # the joint it keeps to the chain: its centre r / cos(theta) above the second link's
    # line at its x, at most a slop deep. (Fx2D's figures, x > 12 and y > 6, held before
    # the first joint and 1 m under the chain.)
    x, y = state.position[0, ball]
    assert x == pytest.approx(17.89, abs=0.05)
    theta = math.atan2(0.8, 12.0)
    line = 8.0 - (x - 14.0) * math.tan(theta)
    assert y == pytest.approx(line + 0.4 / math.cos(theta), abs=LINEAR_SLOP)


def test_chain_against_chain_is_skipped(arch):
    scene = make_scene(arch, gravity=0.0)
    add_chain(scene, [[2, 10], [12, 10], [22, 10]])
    add_chain(scene, [[2, 10], [12, 10], [22, 10]])
    scene.step(DT)
    assert len(scene.contacts()) == 0


@pytest.mark.parametrize("drop_x", [2.0, 9.0, 13.2, 16.0, 17.4])
def test_steep_terrain_holds_dropped_balls(arch, drop_x, solver):
    scene = make_scene(arch, solver=solver)
    add_chain(scene, TERRAIN)
    ball = scene.add_circle(
        (drop_x, surface_y(drop_x) + 2.0),
        0.25,
        elasticity=0.25,
        static_friction=0.4,
        dynamic_friction=0.3,
    )
    state = run(scene, 300).get_state()
    x, y = state.position[0, ball]
    # On the terrain (moving or at rest) the centre is at least r from the chain, less the
    # slop it may sink, so at least that far above the chain's height at its x (the
    # vertical is no shorter than the distance). (Fx2D's figure, 0.3 m below the chain,
    # would pass a ball of r 0.25 that fell through.)
    assert y > surface_y(x) + 0.25 - LINEAR_SLOP, (drop_x, x, y)


def test_chain_is_one_sided(arch):
    """Authored left to right, the front is up: a body resting above touches it; one just
    below, inside the same overlap, does not (it would be pushed further through)."""
    scene = make_scene(arch, gravity=0.0)
    add_chain(scene, [[2, 10], [12, 10], [22, 10]])
    above = scene.add_circle((12.0, 10.3), 0.4)
    below = scene.add_circle((6.0, 9.7), 0.4)
    box_below = scene.add_box((16.0, 9.8), (1.0, 1.0))
    touching = {int(b) for b in scene.contacts().body_b}
    assert above in touching
    assert below not in touching and box_below not in touching


@pytest.mark.parametrize("kind", ["box", "capsule", "circle"])
def test_a_box_slides_along_a_flat_chain_without_catching(arch, kind, solver):
    """Issue 16: a box slides 20 m along a 40-link flat chain with friction 0 and loses under
    1 % of its speed, its vertical speed under 1 cm/s (a capsule and a circle too). (The
    same links as separate edges stop a box within 5 m: each joint's end catches its
    corner.)"""
    scene = fx.Scene(arch=arch, enable_sleep=False, solver=solver)
    scene.add_chain((0.0, 0.0), [[x, 0.0] for x in np.linspace(-2.0, 38.0, 41)])
    box = {
        "box": lambda: scene.add_box((0.0, 0.25), (0.5, 0.5)),
        "capsule": lambda: scene.add_capsule((0.0, 0.2), 0.6, 0.2),
        "circle": lambda: scene.add_circle((0.0, 0.25), 0.25),
    }[kind]()
    state = scene.get_state()
    state.velocity[0, box] = (5.0, 0.0)
    scene.set_state(state)
    vertical = 0.0
    for _ in range(240):  # 4 s at 5 m/s: 20 m
        scene.step(DT)
        vertical = max(vertical, abs(scene.get_state().velocity[0, box, 1]))
    state = scene.get_state()
    assert state.position[0, box, 0] == pytest.approx(20.0, abs=0.1)
    assert state.velocity[0, box, 0] > 0.99 * 5.0
    assert vertical < 0.01


def test_chain_from_yaml_and_short_chains_refused(arch, solver):
    text = """
scene: {size: [40, 20], gravity: [0, -10]}
entities:
  terrain:
    pose: [0, 0, 0]
    physics: {mass: 0.0, elasticity: 0.0, gravity_scale: 0.0, external_forces_enabled: false,
              static_friction: 0.6, dynamic_friction: 0.5}
    visual: {geometry: {chain: [[2, 5], [12, 5], [22, 6], [32, 6]]}}
    collision: {geometry: {chain: [[2, 5], [12, 5], [22, 6], [32, 6]]}}
  crate:
    pose: [8, 9, 0]
    physics: {mass: 1.0, elasticity: 0.0, static_friction: 0.6, dynamic_friction: 0.5}
    visual: {geometry: {rectangle: [1.0, 1.0]}}
    collision: {geometry: {rectangle: [1.0, 1.0]}}
"""
    scene = fx.load_scene(text, arch=arch, solver=solver)
    terrain, crate = scene.body_index("terrain"), scene.body_index("crate")
    assert (terrain, crate) == (0, 3)  # 4 authored points make 3 links, then the crate
    assert len(scene.visuals) == scene.n_bodies
    state = run(scene, 240).get_state()
    # Dropped at x = 8 over the flat first link (y = 5), e = 0: it rests half its 1 m up,
    # at most a slop deep.
    assert state.position[0, crate, 1] == pytest.approx(5.5, abs=LINEAR_SLOP)
    short = text.replace("[[2, 5], [12, 5], [22, 6], [32, 6]]", "[[0, 0], [1, 0]]")
    with pytest.raises((ValueError, TypeError), match="terrain.*chain"):
        fx.load_scene(short, arch=arch)


def test_fx2d_chain_terrain_scene_catches_balls(arch, solver):
    """Fx2D's examples/chain_terrain: its scene (fx2d_gpu/examples/chain_terrain.yml), and
    balls dropped along the terrain as its example spawns them (radius 0.18-0.38 m,
    elasticity 0.25): none falls through, and they come to rest on the terrain (or its
    catch floor)."""
    scene = fx.load_scene(examples.path("chain_terrain"), arch=arch, solver=solver)
    balls, radii = [], [0.18 + 0.10 * (i % 3) for i in range(12)]
    for i, x in enumerate(np.linspace(1.5, 19.0, 12)):
        balls.append(
            scene.add_circle(
                (x, surface_y(x) + 1.5 + 0.2 * i),
                radii[i],
                elasticity=0.25,
                static_friction=0.4,
                dynamic_friction=0.3,
            )
        )
    state = run(scene, 600).get_state()
    for ball, radius in zip(balls, radii, strict=True):
        # Above the terrain, never through: the centre at least its radius, less a slop,
        # above the chain at its x (on the terrain or on other balls; beyond the ends,
        # surface_y is -100: the floor).
        x, y = state.position[0, ball]
        assert y > surface_y(x) + radius - LINEAR_SLOP, (ball, x, y)
    # At rest: below the sleep speed.
    assert np.abs(state.velocity[0, balls]).max() < SLEEP_LINEAR_SPEED


def test_chain_link_manifolds_by_hand(arch):
    """A box across the flat joint at x = 0 gets one manifold per link, each clipped to its
    link and pointing straight up; a circle over a convex corner (the chain bends down
    there) gets the corner's direction; one over a concave joint only the faces' normals."""
    scene = make_scene(arch, gravity=0.0)
    # Links: (-4,0)-(0,0) | (0,0)-(4,0) flat | (4,0)-(8,-2) bends down (convex at x=4) |
    # (8,-2)-(12,0) bends up (concave at x=8).
    add_chain(scene, [[-4, 0], [0, 0], [4, 0], [8, -2], [12, 0]])
    box = scene.add_box((0.2, 0.49), (1.0, 1.0))
    # 0.4 m from the convex corner (4, 0), between the two links' normals (at 75 degrees).
    direction = np.array([np.cos(np.radians(75)), np.sin(np.radians(75))])
    corner_ball = scene.add_circle(tuple(np.array([4.0, 0.0]) + 0.4 * direction), 0.45)
    valley_ball = scene.add_circle((8.0, -1.47), 0.5)
    c = scene.contacts()
    pairs = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(c.body_a, c.body_b, strict=True))}
    for link, xs in ((0, [-0.3, 0.0]), (1, [0.0, 0.7])):
        i = pairs[(link, box)]
        assert c.point_count[i] == 2
        np.testing.assert_allclose(c.normal[i], [0, 1], atol=1e-6)
        np.testing.assert_allclose(sorted(c.points[i, :, 0]), xs, atol=1e-6)
        np.testing.assert_allclose(c.depths[i], [0.01, 0.01], atol=1e-6)
    # Over the convex corner: the direction from the corner, from the link ending there
    # only (link 2, which starts there, leaves it to link 1).
    i = pairs[(1, corner_ball)]
    np.testing.assert_allclose(c.normal[i], direction, atol=1e-5)
    np.testing.assert_allclose(c.depths[i, 0], 0.05, atol=1e-6)
    assert (2, corner_ball) not in pairs
    # In the valley (concave joint at (8, -2)): each link's face normal, never the joint's.
    for link, slope in ((2, -0.5), (3, 0.5)):
        i = pairs[(link, valley_ball)]
        normal = np.array([-slope, 1.0]) / np.hypot(slope, 1.0)
        np.testing.assert_allclose(c.normal[i], normal, atol=1e-6)
