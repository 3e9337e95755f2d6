"""Capsules, rounded boxes and edges in motion (issue 16): stacks that stand, inertia that
swings at the analytic rate, bodies that rest on edges."""

import math

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import shapes

from .helpers import DT, run

G = 9.81


def test_capsule_pendulum_swings_at_its_inertia(arch, solver):
    """A capsule hinged at one cap centre: a physical pendulum, small-angle period
    2 pi sqrt(I_pivot / (m g d)), d = L / 2, I_pivot = I_cm + m d^2 (I_cm from the capsule's
    true area). Measured from the zero crossings of its angle over 3 periods (1 %)."""
    length, radius, mass = 1.2, 0.15, 2.0
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, enable_sleep=False, solver=solver)
    pin = scene.add_circle((0.0, 0.0), 0.05, mass=0)
    amplitude = 0.1
    centre = (length / 2 * math.sin(amplitude), -length / 2 * math.cos(amplitude))
    rod = scene.add_capsule(centre, length, radius, mass=mass, angle=amplitude - math.pi / 2)
    scene.add_revolute_joint(pin, rod, anchor=(0.0, 0.0))
    d = length / 2
    period = 2 * math.pi * math.sqrt((scene.body_inertia(rod) + mass * d * d) / (mass * G * d))
    angles, times = [], []
    for step in range(round(3.2 * period / DT)):
        scene.step(DT)
        angles.append(scene.get_state().angle[0, rod] + math.pi / 2)
        times.append((step + 1) * DT)
    angles = np.array(angles)
    crossings = []
    for k in range(1, len(angles)):
        if angles[k - 1] > 0 >= angles[k] or angles[k - 1] < 0 <= angles[k]:
            t = times[k - 1] + DT * angles[k - 1] / (angles[k - 1] - angles[k])
            crossings.append(t)
    measured = 2 * np.mean(np.diff(crossings))
    assert measured == pytest.approx(period, rel=0.01)
    # The thin-rod period would be 5 % shorter: the caps' inertia is what this measures.
    thin = 2 * math.pi * math.sqrt((mass * length**2 / 3) / (mass * G * d))
    assert abs(measured - thin) > 0.03 * period


def test_capsule_stack_and_rounded_pyramid_stand(arch, solver):
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_box((0.0, -0.5), (40.0, 1.0), mass=0, static_friction=0.6, dynamic_friction=0.5)
    friction = dict(static_friction=0.6, dynamic_friction=0.5)
    capsules = [scene.add_capsule((-6.0, 0.2 + 0.4 * i), 1.5, 0.2, **friction) for i in range(6)]
    boxes = []
    base, size, radius = 6, 0.8, 0.05
    outer = size + 2 * radius
    for row in range(base):
        for i in range(base - row):
            x = 3.0 + (i - (base - row - 1) / 2) * outer
            boxes.append(
                scene.add_box((x, outer / 2 + row * outer), (size, size), radius=radius, **friction)
            )
    start = scene.get_state()
    settled = run(scene, seconds=5.0).get_state()
    state = run(scene, seconds=5.0).get_state()
    # Settling sinks each contact by about the solver's slop (2 mm) and may shift a layer
    # sideways by a centimetre or two; after that nothing moves, nothing tilts.
    for group, drop in ((capsules, 0.03), (boxes, 0.03)):
        moved = np.linalg.norm(state.position[0, group] - start.position[0, group], axis=1)
        assert moved.max() < drop, (group, moved.max())
        still = np.linalg.norm(state.position[0, group] - settled.position[0, group], axis=1)
        assert still.max() < 1e-3
    assert np.abs(state.angle[0, capsules]).max() < 0.02
    assert np.abs(state.angle[0, boxes]).max() < 0.02


def test_bodies_rest_on_an_edge_from_above(arch, solver):
    """A box, a circle and a capsule dropped on a static edge come to rest on it (its line
    is y = 0: the shapes rest at their own half heights, less a slop)."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_edge((0.0, 0.0), (-5.0, 0.0), (5.0, 0.0), static_friction=0.5, dynamic_friction=0.4)
    box = scene.add_box((-2.0, 1.0), (0.6, 0.4), static_friction=0.5, dynamic_friction=0.4)
    ball = scene.add_circle((0.0, 1.5), 0.25, static_friction=0.5, dynamic_friction=0.4)
    pill = scene.add_capsule((2.0, 2.0), 1.0, 0.15, static_friction=0.5, dynamic_friction=0.4)
    state = run(scene, seconds=3.0).get_state()
    np.testing.assert_allclose(
        state.position[0, [box, ball, pill], 1], [0.2, 0.25, 0.15], atol=0.01
    )
    assert np.abs(state.velocity[0, [box, ball, pill]]).max() < 0.02


def test_shapes_demo_settles_on_its_edges(arch):
    """`fx2d demo shapes`: 36 bodies of every kind tumble down edge ramps; after 12 s all of
    them lie inside the bin, none below its wavy chain floor (y >= 0 everywhere), at rest,
    but for a circle that may still roll to and fro in a dip of the floor (nothing damps a
    roll without slip: it keeps its energy), and the frame renders every kind (capsules and
    rounded shapes filled from their outlines)."""
    from fx2d_gpu.demos import demo_shapes
    from fx2d_gpu.draw.render import default_bounds, render

    scene = demo_shapes(arch=arch)
    state = run(scene, seconds=12.0).get_state()
    level = scene.n_bodies - 36  # the edges and the chain's links come first
    bodies = state.position[0, level:]
    assert bodies[:, 1].min() > 0.1
    assert np.abs(bodies[:, 0]).max() < 9.0
    links = range(2, 26)
    contacts = scene.contacts()
    touching = set(zip(contacts.body_a.tolist(), contacts.body_b.tolist(), strict=True))
    for body in range(level, scene.n_bodies):
        speed = np.linalg.norm(state.velocity[0, body])
        if speed >= 0.05:
            shape = scene.body_shape(body)
            assert shape.kind == shapes.SHAPE_CIRCLE, body
            # Rolling without slip, on a link of the floor, below its crests (0.5 m).
            spin = abs(state.angular_velocity[0, body])
            assert abs(spin * shape.radius - speed) < 0.02 * speed, body
            assert any((link, body) in touching for link in links), body
            assert bodies[body - level, 1] - shape.radius < 0.5, body
    kinds = {scene.body_shape(b).kind for b in range(scene.n_bodies)}
    assert kinds == {
        shapes.SHAPE_EDGE,
        shapes.SHAPE_CHAIN,
        shapes.SHAPE_CAPSULE,
        shapes.SHAPE_POLYGON,
        shapes.SHAPE_CIRCLE,
    }
    width, height = 380, 350
    image = render(scene, 0, (width, height))
    x0, y0, x1, y1 = default_bounds(scene)
    background = image[0, 0]
    for body in range(level, scene.n_bodies):  # every body's centre is painted
        x, y = state.position[0, body]
        column = int((x - x0) / (x1 - x0) * width)
        row = int((y1 - y) / (y1 - y0) * height)
        assert (image[row - 1 : row + 2, column - 1 : column + 2] != background).any(), body


def _contact(scene, a, b):
    """(normal a -> b, deepest depth) of the pair, or None."""
    c = scene.contacts()
    for i in range(len(c)):
        if (c.body_a[i], c.body_b[i]) == (a, b):
            return c.normal[i], c.depths[i, : c.point_count[i]].max()
    return None


@pytest.mark.parametrize(
    "case",
    [
        "end_on",
        "side_by_side",
        "circle_apart",
        "circle_side",
        "on_rectangle",
        "rounded_boxes",
        "zero_length",
    ],
)
def test_fx2d_capsule_collision_scenarios(arch, case):
    """Fx2D's tests/test_capsule_collision.cpp, pair by pair. Its figures (a depth within
    0.05 .. 0.15, a normal's component above 0.9, a depth to 1 cm) were looser than these
    scenes allow: each pair is placed so that its depth and normal follow exactly from the
    geometry (worked out beside each case), checked to float32 precision (1e-5)."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
    if case == "end_on":  # ends at -0.4 and 0.4, radius 0.5 each: 0.2 deep along +x
        a = scene.add_capsule((-1.4, 0.0), 2.0, 0.5)
        b = scene.add_capsule((1.4, 0.0), 2.0, 0.5)
        normal, depth = _contact(scene, a, b)
        assert depth == pytest.approx(0.2, abs=1e-5)
        np.testing.assert_allclose(normal, [1.0, 0.0], atol=1e-5)
    elif case == "side_by_side":  # parallel segments 0.8 apart, radii 0.5: 0.2 deep along +y
        a = scene.add_capsule((0.0, 0.0), 2.0, 0.5)
        b = scene.add_capsule((0.0, 0.8), 2.0, 0.5)
        normal, depth = _contact(scene, a, b)
        assert depth == pytest.approx(0.2, abs=1e-5)
        np.testing.assert_allclose(normal, [0.0, 1.0], atol=1e-5)
    elif case == "circle_apart":
        a = scene.add_capsule((0.0, 0.0), 2.0, 0.5)
        b = scene.add_circle((10.0, 0.0), 0.5)
        assert _contact(scene, a, b) is None
    elif case == "circle_side":  # over the segment (x -1.5..1.5), 0.8 above it: 0.2 deep, +y
        a = scene.add_capsule((0.0, 0.0), 4.0, 0.5)
        b = scene.add_circle((0.5, 0.8), 0.5)
        normal, depth = _contact(scene, a, b)
        assert depth == pytest.approx(0.2, abs=1e-5)
        np.testing.assert_allclose(normal, [0.0, 1.0], atol=1e-5)
    elif case == "on_rectangle":  # the rectangle is body a here: normal +y from it
        # The box's top is at y = 1, the flat capsule's underside at 1.4 - 0.5 = 0.9: its
        # whole segment is 0.1 deep.
        a = scene.add_box((0.0, 0.0), (10.0, 2.0))
        b = scene.add_capsule((0.0, 1.4), 4.0, 0.5)
        normal, depth = _contact(scene, a, b)
        assert depth == pytest.approx(0.1, abs=1e-5)
        np.testing.assert_allclose(normal, [0.0, 1.0], atol=1e-5)
    elif case == "rounded_boxes":  # cores 0.4 apart, skins 0.25 each: 0.1 deep along +x
        a = scene.add_box((0.0, 0.0), (2.0, 2.0), radius=0.25)
        b = scene.add_box((2.4, 0.0), (2.0, 2.0), radius=0.25)
        normal, depth = _contact(scene, a, b)
        assert depth == pytest.approx(0.1, abs=1e-5)
        np.testing.assert_allclose(normal, [1.0, 0.0], atol=1e-5)
    else:  # a capsule of length 0 collides as the circle of its radius
        capsule = scene.add_capsule((0.0, 0.0), 0.0, 0.5)
        ball = scene.add_circle((3.0, 0.0), 0.5)
        other = scene.add_circle((0.8, 0.0), 0.5)
        twin = scene.add_circle((3.8, 0.0), 0.5)
        assert scene.body_shape(capsule).kind == shapes.SHAPE_CIRCLE
        assert _contact(scene, capsule, other)[1] == pytest.approx(
            _contact(scene, ball, twin)[1], abs=1e-6
        )
