"""The Scene API: mass properties, naming, validation that leaves the scene unchanged."""

import math
import pickle

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import shapes


def test_mass_properties_from_shapes(arch):
    scene = fx.Scene(arch=arch)
    c = scene.add_circle((0, 0), 0.5, mass=2.0)
    b = scene.add_box((0, 0), (2.0, 1.0), mass=3.0)
    # A right triangle with legs 3 (x) and 6 (y): centroid (1, 2), I_c = m (a^2 + b^2) / 18.
    t = scene.add_polygon((5, 5), [[0, 0], [0, 6], [3, 0]], mass=1.5)
    # A regular hexagon of circumradius R: I = 5/12 m R^2.
    hexagon = [[math.cos(a), math.sin(a)] for a in np.arange(6) * math.pi / 3]
    h = scene.add_polygon((0, 0), hexagon, mass=1.0)
    assert scene.body_inertia(c) == pytest.approx(0.5 * 2.0 * 0.25)
    assert scene.body_inertia(b) == pytest.approx(3.0 * 5.0 / 12.0)
    assert scene.body_inertia(t) == pytest.approx(1.5 * (9 + 36) / 18.0)
    assert scene.body_inertia(h) == pytest.approx(5.0 / 12.0)
    # The triangle was re-centred: its centre of mass is where we put it.
    assert np.allclose(scene.body_shape(t).vertices.mean(axis=0), 0.0)
    # Shapes are immutable (scene files share one among bodies), pickled ones too.
    for shape in (scene.body_shape(t), pickle.loads(pickle.dumps(scene.body_shape(t)))):
        with pytest.raises(ValueError, match="read-only"):
            shape.vertices[0, 0] = 9.0
    assert np.allclose(scene.get_state().position[0, t], [5, 5])
    static = scene.add_box((0, 0), (1, 1), mass=0)
    assert scene.body_inertia(static) == math.inf
    override = scene.add_circle((0, 0), 1.0, mass=1.0, inertia=7.0)
    assert scene.body_inertia(override) == 7.0


def _rounded_box_inertia(w, h, r, mass):
    """A w x h box rounded by r, about its centre, piece by piece: the core, four side strips
    and four quarter discs (area pi r^2 / 4, centroid 4 r / (3 pi) from its corner on the
    diagonal, polar moment pi r^4 / 8 about the corner), by the parallel-axis rule."""
    pieces = [(w * h, (w * w + h * h) / 12.0, 0.0)]  # (area, J about own centroid, d^2)
    for length, depth, offset in ((w, r, h / 2 + r / 2), (h, r, w / 2 + r / 2)):
        area = length * depth
        pieces += [(area, area * (length**2 + depth**2) / 12.0 / area, offset**2)] * 2
    quarter = math.pi * r * r / 4.0
    lever = 4.0 * r / (3.0 * math.pi)
    corner = np.array([w / 2, h / 2])
    centroid = corner + lever
    about_corner = math.pi * r**4 / 8.0
    about_centroid = about_corner - quarter * 2 * lever**2
    pieces += [(quarter, about_centroid / quarter, float(centroid @ centroid))] * 4
    total = sum(a for a, _, _ in pieces)
    second = sum(a * (j + d2) for a, j, d2 in pieces)
    return total, mass * second / total


def test_mass_properties_of_capsules_and_rounded_shapes(arch):
    """Capsules and rounded polygons get mass properties from their true areas (issue 16),
    against the analytic formulas to 1e-6; edges have none and are static."""
    scene = fx.Scene(arch=arch)
    length, radius, mass = 2.0, 0.5, 3.0
    capsule = scene.add_capsule((1, 2), length, radius, mass=mass)
    # A rectangle L x 2r and two half discs; each half disc's centroid sits 4r / (3 pi)
    # beyond its end of the segment: I = m_rect (L^2 + 4 r^2) / 12
    # + m_caps (r^2 / 2 + L^2 / 4 + L 4 r / (3 pi)).
    rect, caps = 2 * radius * length, math.pi * radius**2
    m_rect, m_caps = mass * rect / (rect + caps), mass * caps / (rect + caps)
    expected = m_rect * (length**2 + 4 * radius**2) / 12.0 + m_caps * (
        radius**2 / 2 + length**2 / 4 + length * 4 * radius / (3 * math.pi)
    )
    assert scene.body_inertia(capsule) == pytest.approx(expected, rel=1e-6)
    assert scene.body_shape(capsule).bounding_radius == pytest.approx(1.5)
    w, h, r = 1.2, 0.6, 0.15
    box = scene.add_box((0, 0), (w, h), radius=r, mass=2.0)
    area, inertia = _rounded_box_inertia(w, h, r, 2.0)
    assert area == pytest.approx(w * h + 2 * r * (w + h) + math.pi * r * r)
    assert scene.body_inertia(box) == pytest.approx(inertia, rel=1e-6)
    # A rounded right triangle (legs 3 and 6): its centroid moves towards the long sides'
    # skin; checked against a fine grid (the area inside, the skin's outline included).
    triangle = [[0, 0], [3, 0], [0, 6]]
    t = scene.add_polygon((0, 0), triangle, radius=0.5, mass=1.0)
    shape = scene.body_shape(t)
    xs = np.linspace(-1.0, 4.0, 1201)
    ys = np.linspace(-1.0, 7.0, 1921)
    gx, gy = np.meshgrid(xs, ys)
    points = np.stack([gx.ravel(), gy.ravel()], 1)
    verts = np.array(triangle, float)
    inside = np.all(
        [
            (points - verts[i])
            @ np.array([-(verts[(i + 1) % 3] - verts[i])[1], (verts[(i + 1) % 3] - verts[i])[0]])
            >= 0
            for i in range(3)
        ],
        axis=0,
    )
    near = np.min(
        [
            np.linalg.norm(
                points
                - (
                    verts[i]
                    + np.clip(
                        ((points - verts[i]) @ (verts[(i + 1) % 3] - verts[i]))
                        / np.sum((verts[(i + 1) % 3] - verts[i]) ** 2),
                        0,
                        1,
                    )[:, None]
                    * (verts[(i + 1) % 3] - verts[i])
                ),
                axis=1,
            )
            for i in range(3)
        ],
        axis=0,
    )
    solid = points[inside | (near <= 0.5)]
    cell = (xs[1] - xs[0]) * (ys[1] - ys[0])
    area, _, _ = shapes.rounded_moments(shape.vertices, shape.normals, 0.5)
    assert area == pytest.approx(len(solid) * cell, rel=2e-3)
    centroid = solid.mean(0)
    # The body origin is the rounded shape's centroid: the core sits where it should.
    _, core_centroid = shapes.polygon_area_centroid(verts)
    np.testing.assert_allclose(shape.vertices.mean(0) + centroid, verts.mean(0), atol=2e-3)
    grid_inertia = np.mean(np.sum((solid - centroid) ** 2, axis=1))
    assert scene.body_inertia(t) == pytest.approx(grid_inertia, rel=2e-3)
    assert not np.allclose(centroid, core_centroid, atol=1e-2)  # the skin moved it
    edge = scene.add_edge((0, 0), (-2, 0), (3, 1))
    assert scene.body_mass(edge) == 0 and scene.body_inertia(edge) == math.inf
    np.testing.assert_allclose(scene.body_shape(edge).vertices, [[-2, 0], [3, 1]])


def test_clockwise_polygon_is_reoriented():
    shape, centroid = shapes.polygon([[0, 0], [0, 1], [1, 1], [1, 0]])
    assert np.allclose(centroid, [0.5, 0.5])
    area, _ = shapes.polygon_area_centroid(shape.vertices)
    assert area > 0
    np.testing.assert_allclose(np.linalg.norm(shape.normals, axis=1), 1.0)


@pytest.mark.parametrize(
    "call,exc,word",
    [
        (lambda s: s.add_circle((0, 0), -1.0), ValueError, "radius"),
        (lambda s: s.add_circle((0, 0), "big"), TypeError, "radius"),
        (lambda s: s.add_circle((0, 0, 0), 1.0), ValueError, "position"),
        (lambda s: s.add_box((0, 0), (1.0, 0.0)), ValueError, "size"),
        (lambda s: s.add_polygon((0, 0), [[0, 0], [1, 0]]), ValueError, "vertices"),
        (
            lambda s: s.add_polygon((0, 0), [[0, 0], [2, 0], [1, 0.2], [2, 2], [0, 2]]),
            ValueError,
            "convex",
        ),
        (lambda s: s.add_polygon((0, 0), [[0, 0]] * 9), ValueError, "vertices"),
        (lambda s: s.add_circle((0, 0), 1.0, mass=-1.0), ValueError, "mass"),
        (lambda s: s.add_circle((0, 0), 1.0, inertia=0.0), ValueError, "inertia"),
        (lambda s: s.add_circle((0, 0), 1.0, elasticity=math.nan), ValueError, "elasticity"),
        (lambda s: s.add_circle((0, 0), 1.0, name="a"), ValueError, "name"),
        (lambda s: s.add_circle((0, 0), 1.0, colour="red"), TypeError, "colour"),
        (lambda s: s.apply_force(5, (1.0, 0.0)), ValueError, "body"),
        (lambda s: s.apply_force(0, (1.0, 0.0, 0.0)), ValueError, "force"),
        (lambda s: s.body_index("nobody"), ValueError, "nobody"),
        (lambda s: s.contacts(world=3), ValueError, "world"),
        # Issue 14 item 5: numbers float32 or the solver cannot represent.
        (lambda s: s.add_circle((0, 0), 1e-200), ValueError, "radius"),
        (lambda s: s.add_box((0, 0), (1.0, 1e-9)), ValueError, "size"),
        # 1e-320 built from its bits: once Taichi runs, the CPU may parse such literals as 0.
        (
            lambda s: s.add_circle((0, 0), 1.0, mass=np.uint64(2024).view(np.float64)),
            ValueError,
            "mass",
        ),
        (lambda s: s.add_circle((0, 0), 1.0, mass=1e-20), ValueError, "mass"),
        (lambda s: s.add_circle((0, 0), 1.0, inertia=1e-35), ValueError, "inertia"),
        (lambda s: s.add_circle((1e39, 0), 1.0), ValueError, "position"),
        (lambda s: s.add_circle((0, 0), 1.0, velocity=(0.0, -1e39)), ValueError, "velocity"),
        (lambda s: s.apply_force(0, (1e39, 0.0)), ValueError, "force"),
        # Issue 16: capsules, edges, rounded shapes.
        (lambda s: s.add_capsule((0, 0), 1.0, 0.0), ValueError, "radius"),
        (lambda s: s.add_capsule((0, 0), -1.0, 0.2), ValueError, "length"),
        (lambda s: s.add_capsule((0, 0), "long", 0.2), TypeError, "length"),
        (lambda s: s.add_edge((0, 0), (0, 0), (0, 0)), ValueError, "apart"),
        (lambda s: s.add_edge((0, 0), (0, 0), (1, 0), mass=1.0), ValueError, "mass"),
        (lambda s: s.add_edge((0, 0), (0, 0, 0), (1, 0)), ValueError, "a must"),
        (lambda s: s.add_box((0, 0), (1, 1), radius=-0.1), ValueError, "radius"),
        (
            lambda s: s.add_polygon((0, 0), [[0, 0], [1, 0], [0, 1]], radius=math.inf),
            ValueError,
            "radius",
        ),
    ],
)
def test_bad_input_raises_and_leaves_scene_unchanged(arch, call, exc, word):
    scene = fx.Scene(arch=arch)
    scene.add_circle((0, 0), 1.0, name="a")
    before = scene.get_state()
    with pytest.raises(exc, match=word):
        call(scene)
    assert scene.n_bodies == 1
    after = scene.get_state()
    np.testing.assert_array_equal(before.position, after.position)


def test_constructor_validation(arch):
    with pytest.raises(ValueError, match="substeps"):
        fx.Scene(substeps=0, arch=arch)
    with pytest.raises(TypeError, match="n_worlds"):
        fx.Scene(n_worlds=2.5, arch=arch)
    with pytest.raises(ValueError, match="gravity"):
        fx.Scene(gravity=(0, 0, 1), arch=arch)
    with pytest.raises(ValueError, match="arch"):
        fx.Scene(arch="tpu")


def test_set_state_validates_shapes(arch):
    scene = fx.Scene(n_worlds=2, arch=arch)
    scene.add_circle((0, 0), 1.0)
    state = scene.get_state()
    state.position = np.zeros((1, 1, 2))
    with pytest.raises(ValueError, match="position"):
        scene.set_state(state)
    with pytest.raises(TypeError, match="State"):
        scene.set_state({"position": 0})


def test_names_and_indices(arch):
    scene = fx.Scene(arch=arch)
    assert scene.add_box((0, 0), (1, 1), name="ground", mass=0) == 0
    assert scene.add_circle((0, 2), 0.5, name="ball") == 1
    assert scene.body_index("ball") == 1 and scene.n_bodies == 2 and scene.n_worlds == 1


def test_bodies_added_after_stepping_keep_the_state(arch):
    scene = fx.Scene(gravity=(0, -10), substeps=1, arch=arch)
    scene.add_circle((0, 0), 0.5)
    scene.step(0.05)
    moved = scene.get_state().position[0, 0].copy()
    scene.add_circle((5, 0), 0.5)
    s = scene.get_state()
    np.testing.assert_array_equal(s.position[0, 0], moved)
    np.testing.assert_array_equal(s.position[0, 1], [5, 0])


def test_two_scenes_alternate_in_the_device_pool(arch):
    a = fx.Scene(gravity=(0, -10), substeps=1, arch=arch)
    a.add_circle((0, 0), 0.5)
    b = fx.Scene(gravity=(0, 10), substeps=1, arch=arch)
    b.add_circle((0, 0), 0.5)
    b.add_circle((3, 0), 0.5)
    for _ in range(3):
        a.step(0.05)
        b.step(0.05)
    ya, yb = a.get_state().position[0, 0, 1], b.get_state().position[0, :, 1]
    expected = -10 * 0.05**2 * (1 + 2 + 3)
    assert ya == pytest.approx(expected, abs=1e-6)
    np.testing.assert_allclose(yb, -expected, atol=1e-6)


def test_gravity_and_state_outside_float32_are_refused(arch):
    with pytest.raises(ValueError, match="gravity"):
        fx.Scene(gravity=(0.0, -1e39), arch=arch)
    scene = fx.Scene(arch=arch)
    scene.add_circle((0, 0), 1.0)
    state = scene.get_state()
    state.position[0, 0, 0] = 1e39
    with pytest.raises(ValueError, match="state.position"):
        scene.set_state(state)
    np.testing.assert_array_equal(scene.get_state().position[0, 0], (0.0, 0.0))


def test_a_refused_set_joint_mode_changes_nothing(arch):
    """set_joint_mode(..., max_effort=-1) is refused and the joint keeps its gains: the
    scene then runs exactly as one that never saw the call."""

    def arm():
        scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
        base = scene.add_box((0.0, 0.0), (0.4, 0.4), mass=0)
        link = scene.add_box((1.0, 0.0), (2.0, 0.25), mass=1.0, inertia=0.5)
        joint = scene.add_revolute_joint(
            base, link, control_mode="velocity", target=3.0, pid=(6.0, 0.0, 0.0)
        )
        return scene, link, joint

    refused, link, joint = arm()
    with pytest.raises(ValueError, match="max_effort"):
        refused.set_joint_mode(joint, "position", pid=(50.0, 5.0, 5.0), max_effort=-1.0)
    with pytest.raises(TypeError, match="pid"):
        refused.set_joint_mode(joint, "position", pid=("a", 0, 0))
    with pytest.raises(ValueError, match="control_mode"):
        refused.set_joint_mode(joint, "fast", pid=(50.0, 5.0, 5.0))
    reference, _, _ = arm()
    for _ in range(30):
        refused.step(1.0 / 60.0)
        reference.step(1.0 / 60.0)
    # The velocity motor still drives it: pinned, the link turns with I = 0.5 + 1 kg (1 m)^2
    # = 1.5 kg m^2 under 6 (3 - w), so in 0.5 s by 3 (0.5 - (1 - exp(-2)) / 4) = 0.852 rad;
    # 1 % for the substeps' Euler at dt = 1/60 (0.4 %). (The bound was > 0.5 rad.)
    expected = 3.0 * (0.5 - (1.0 - math.exp(-2.0)) / 4.0)
    assert refused.get_state().angle[0, link] == pytest.approx(expected, rel=0.01)
    np.testing.assert_array_equal(refused.get_state().angle, reference.get_state().angle)
