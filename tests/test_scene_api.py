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


def test_clockwise_polygon_is_reoriented():
    shape, centroid = shapes.polygon([[0, 0], [0, 1], [1, 1], [1, 0]])
    assert np.allclose(centroid, [0.5, 0.5])
    area, _ = shapes.polygon_area_centroid(shape.vertices)
    assert area > 0
    np.testing.assert_allclose(np.linalg.norm(shape.normals, axis=1), 1.0)


@pytest.mark.parametrize("call,exc,word", [
    (lambda s: s.add_circle((0, 0), -1.0), ValueError, "radius"),
    (lambda s: s.add_circle((0, 0), "big"), TypeError, "radius"),
    (lambda s: s.add_circle((0, 0, 0), 1.0), ValueError, "position"),
    (lambda s: s.add_box((0, 0), (1.0, 0.0)), ValueError, "size"),
    (lambda s: s.add_polygon((0, 0), [[0, 0], [1, 0]]), ValueError, "vertices"),
    (lambda s: s.add_polygon((0, 0), [[0, 0], [2, 0], [1, 0.2], [2, 2], [0, 2]]), ValueError,
     "convex"),
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
    (lambda s: s.add_circle((0, 0), 1.0, mass=np.uint64(2024).view(np.float64)), ValueError,
     "mass"),
    (lambda s: s.add_circle((0, 0), 1.0, mass=1e-20), ValueError, "mass"),
    (lambda s: s.add_circle((0, 0), 1.0, inertia=1e-35), ValueError, "inertia"),
    (lambda s: s.add_circle((1e39, 0), 1.0), ValueError, "position"),
    (lambda s: s.add_circle((0, 0), 1.0, velocity=(0.0, -1e39)), ValueError, "velocity"),
    (lambda s: s.apply_force(0, (1e39, 0.0)), ValueError, "force"),
])
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
        joint = scene.add_revolute_joint(base, link, control_mode="velocity", target=3.0,
                                         pid=(6.0, 0.0, 0.0))
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
    assert refused.get_state().angle[0, link] > 0.5  # the velocity motor still drives it
    np.testing.assert_array_equal(refused.get_state().angle, reference.get_state().angle)
