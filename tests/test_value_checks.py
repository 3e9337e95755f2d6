"""No value slips through (issue 42, item 5): a flag that is not a bool, a number float32
cannot hold, a running sum that leaves float32, a complex or string query input, an index
past a record's worlds or queries, and a far ray's float32 hit point are each refused (or,
for the ray, answered exactly), naming the argument; a refused call changes nothing."""

import warnings

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import shapes
from fx2d_gpu.checks import FLOAT32_MAX, all_within, as_reals, as_vectors2
from fx2d_gpu.enums import MOTOR_EFFORT


def assert_same_state(a: fx.State, b: fx.State):
    for key in ("position", "angle", "velocity", "angular_velocity", "sleeping"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)


def box_on_ground(arch, n_worlds=1):
    scene = fx.Scene(arch=arch, n_worlds=n_worlds)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0)
    scene.add_box((0.0, 0.6), (1.0, 1.0))
    return scene


def arm(arch, control_mode="position"):
    scene = fx.Scene(arch=arch)
    base = scene.add_box((0.0, 3.0), (0.2, 0.2), mass=0)
    link = scene.add_box((0.5, 3.0), (1.0, 0.1))
    joint = scene.add_revolute_joint(
        base, link, control_mode=control_mode, pid=(20, 0, 6), max_effort=50.0
    )
    return scene, joint


def test_sleeping_must_be_bools_or_integers_0_and_1(arch):
    """A sleeping flag of 7 (or 2, -1, NaN) was neither asleep nor awake to the kernels
    (== 1 / == 0): the body hung in mid-air for good."""
    scene = box_on_ground(arch)
    scene.add_box((0.0, 3.0), (1.0, 1.0))
    before = scene.get_state()
    for flag, error in (
        (7, ValueError),
        (2, ValueError),
        (-1, ValueError),
        (np.nan, TypeError),
        (1.0, TypeError),
        ("1", TypeError),
    ):
        state = before.copy()
        state.sleeping = state.sleeping.astype(np.asarray(flag).dtype)
        state.sleeping[0, 2] = flag
        with pytest.raises(error, match="state.sleeping"):
            scene.set_state(state)
        assert_same_state(scene.get_state(), before)
    # Integers 0 and 1 are the device's own encoding: accepted, read as bools.
    state = before.copy()
    state.sleeping = state.sleeping.astype(np.int64)
    state.sleeping[0, 2] = 1
    scene.set_state(state)
    assert scene.get_state().sleeping.tolist() == [[False, False, True]]


def test_joint_target_must_fit_float32_and_its_mode(arch):
    """set_joint_target(j, 1e39) was stored as float32 inf."""
    refused, joint = arm(arch)
    control, _ = arm(arch)
    with pytest.raises(ValueError, match="target"):
        refused.set_joint_target(joint, 1e39)
    # A position motor's target is a coordinate (MAX_COORDINATE); a velocity motor's a
    # speed (MAX_SPEED): beyond them the motor drives toward what the engine cannot
    # simulate, and its PID integral toward float32's end.
    with pytest.raises(ValueError, match="target"):
        refused.set_joint_target(joint, [2e15])
    for _ in range(3):
        refused.step(1 / 60)
        control.step(1 / 60)
    assert_same_state(refused.get_state(), control.get_state())
    with pytest.raises(ValueError, match="target"):
        refused.set_joint_target(joint, 1e38)
    refused.set_joint_mode(joint, "velocity")
    with pytest.raises(ValueError, match="target"):
        refused.set_joint_target(joint, -2e10)
    with pytest.raises(TypeError, match="target"):
        refused.set_joint_target(joint, "1")
    with pytest.raises(TypeError, match="target"):
        refused.set_joint_target(joint, np.array([1 + 1j]))
    refused.set_joint_mode(joint, "effort")
    refused.set_joint_target(joint, 1e30)  # an effort is clamped by max_effort
    # A mode change keeps each world's target: 1e30 N m is no position (it was taken as
    # one, unchecked); the refused change leaves the effort motor as it was.
    with pytest.raises(ValueError, match=r"target 1e\+30 is beyond what a position motor"):
        refused.set_joint_mode(joint, "position")
    # Every world's slot of the joint on the device (slot world * n_joints + joint).
    modes = refused.step_context().pool.joints.mode.to_numpy()
    assert (modes[joint :: refused.n_joints][: refused.n_worlds] == MOTOR_EFFORT).all()
    refused.set_joint_target(joint, 0.5)
    refused.set_joint_mode(joint, "position")
    a, b = refused.joint_bodies(joint)
    with pytest.raises(ValueError, match="target"):
        refused.add_revolute_joint(a, b, control_mode="position", target=1e20)
    assert refused.n_joints == 1


def test_apply_force_running_sum_stays_within_float32(arch):
    """10 x apply_force(1e38) was accepted and the step faulted."""

    def ball():
        scene = fx.Scene(arch=arch)
        return scene, scene.add_circle((0.0, 1.0), 0.5)

    refused, body = ball()
    refused.apply_force(body, (2e38, 0.0), torque=3e38)
    with pytest.raises(ValueError, match="force"):
        refused.apply_force(body, (2e38, 0.0))
    with pytest.raises(ValueError, match="torque"):
        refused.apply_force(body, (0.0, 0.0), torque=1e38)
    # The refused calls left the pending sums as they were: these bring them back to
    # (5, 0) N and 0.5 N m exactly, as the control scene's one call.
    refused.apply_force(body, (-2e38, 0.0), torque=-3e38)
    refused.apply_force(body, (5.0, 0.0), torque=0.5)
    control, _ = ball()
    control.apply_force(body, (5.0, 0.0), torque=0.5)
    refused.step(1 / 60)
    control.step(1 / 60)
    assert_same_state(refused.get_state(), control.get_state())
    with pytest.raises(TypeError, match="torque"):
        refused.apply_force(body, (0.0, 0.0), torque="1")
    with pytest.raises(TypeError, match="force"):
        refused.apply_force(body, np.array([1j, 0.0]))


def test_queries_refuse_inputs_that_are_not_real_numbers(arch):
    """Complex inputs lost their imaginary part (a ComplexWarning); strings were parsed."""
    scene = box_on_ground(arch, n_worlds=2)
    before = scene.get_state()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the old code warned and went on: fail on that
        calls = [
            ("origins", lambda: scene.ray_cast(np.array([0 + 5j, 5.0]), (0, -1), 10.0)),
            ("max_distance", lambda: scene.ray_cast((0.0, 5.0), (0, -1), "10")),
            ("directions", lambda: scene.ray_cast_all((0.0, 5.0), ("0", "-1"), 10.0)),
            ("origins", lambda: scene.ray_cast(np.array([True, False]), (0, -1), 10.0)),
            ("points", lambda: scene.query_point(np.array([[0.0, 0.6j]]))),
            ("upper", lambda: scene.query_aabb((0.0, 0.0), ("1", "1"))),
            ("position", lambda: scene.overlap_shape(shapes.circle(1.0), np.array([0.0, 1j]))),
            ("angle", lambda: scene.overlap_shape(shapes.circle(1.0), (0.0, 0.6), "1")),
        ]
        for name, call in calls:
            with pytest.raises(TypeError, match=name):
                call()
    assert_same_state(scene.get_state(), before)
    assert scene.ray_cast((0.0, 5.0), (0, -1), 10.0).body.tolist() == [[1], [1]]


def test_record_indices_out_of_range_are_refused(arch):
    """Overlaps.bodies(world=99) and RayHitList.bodies(world=99) returned nothing."""
    scene = box_on_ground(arch, n_worlds=2)
    found = scene.query_point([(0.0, 0.6), (5.0, 5.0)])
    assert found.bodies(world=1, query=0).tolist() == [1]
    assert found.bodies(world=1, query=1).tolist() == []
    with pytest.raises(ValueError, match="world"):
        found.bodies(world=99)
    with pytest.raises(ValueError, match="query"):
        found.bodies(query=2)
    with pytest.raises(TypeError, match="world"):
        found.bodies(world=1.0)
    hits = scene.ray_cast_all((0.0, 5.0), (0.0, -1.0), 10.0)
    assert hits.bodies(world=1).tolist() == [1, 0]
    with pytest.raises(ValueError, match="world"):
        hits.bodies(world=2)
    with pytest.raises(ValueError, match="ray"):
        hits.bodies(ray=1)
    with pytest.raises(ValueError, match="world"):
        scene.contacts(world=None).pairs(world=-1)
    scene.step(1 / 60)
    with pytest.raises(ValueError, match="world"):
        scene.contacts(world=None).pairs(world=2)
    with pytest.raises(ValueError, match="world"):
        scene.contact_events().begin.pairs(world=2)


def test_far_rays_hit_where_the_body_is(arch):
    """A ray from x = 9.9e14 reported its hit 28,000 km past the box (its origin rounded
    to float32); origins beyond MAX_COORDINATE are refused."""
    scene = box_on_ground(arch)
    for origin, limit in (((9.9e14, 0.6), 9.99e14), ((-4e14, 0.6), 1e30)):
        direction = -np.sign(origin[0])
        hits = scene.ray_cast(origin, (direction, 0.0), limit)
        assert hits.body[0, 0] == 1
        np.testing.assert_allclose(hits.point[0, 0], (0.5 * -direction, 0.6), atol=1e-3)
        np.testing.assert_allclose(hits.normal[0, 0], (-direction, 0.0), atol=1e-6)
        assert abs(hits.distance[0, 0] - (abs(origin[0]) - 0.5)) < 1e-3
        every = scene.ray_cast_all(origin, (direction, 0.0), limit)
        assert every.body.tolist() == [1]
        np.testing.assert_allclose(every.point[0], hits.point[0, 0], atol=1e-3)
    # A far ray that stops short of the scene misses.
    assert scene.ray_cast((9.9e14, 0.6), (-1.0, 0.0), 9.8e14).body[0, 0] == -1
    with pytest.raises(ValueError, match="origins"):
        scene.ray_cast((1e15, 0.6), (-1.0, 0.0), 2e15)


def test_other_inputs_with_the_same_holes(arch):
    """The walk of the public API: motor gains and effort, and State's float arrays."""
    scene, joint = arm(arch)
    a, b = scene.joint_bodies(joint)
    with pytest.raises(TypeError, match="pid"):
        scene.add_revolute_joint(a, b, pid=("20", "0", "6"))
    with pytest.raises(ValueError, match="pid"):
        scene.add_revolute_joint(a, b, pid=(1e39, 0.0, 0.0))  # float32 inf on the device
    with pytest.raises(TypeError, match="max_effort"):
        scene.set_joint_mode(joint, "position", max_effort=np.complex128(5.0))
    assert scene.n_joints == 1
    before = scene.get_state()
    state = before.copy()
    state.position = state.position.astype(complex)
    with pytest.raises(TypeError, match="state.position"):
        scene.set_state(state)
    state = before.copy()
    state.angle = state.angle.astype(str)
    with pytest.raises(TypeError, match="state.angle"):
        scene.set_state(state)
    assert_same_state(scene.get_state(), before)


def test_cpu_threads_variable_is_an_int_of_at_least_one():
    from fx2d_gpu.device import runtime

    assert runtime.cpu_threads_setting({}) is None
    assert runtime.cpu_threads_setting({"FX2D_CPU_THREADS": ""}) is None
    assert runtime.cpu_threads_setting({"FX2D_CPU_THREADS": "3"}) == 3
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(ValueError, match="FX2D_CPU_THREADS"):
            runtime.cpu_threads_setting({"FX2D_CPU_THREADS": bad})


def _within_elementwise(array, limit, minimum=None, positive=False):
    """all_within's rule, element by element (the slow obvious version)."""
    ok = np.isfinite(array) & (np.abs(array) <= FLOAT32_MAX) & (np.abs(array) < limit)
    if minimum is not None:
        ok &= array >= minimum
    if positive:
        ok &= array > 0.0
    return bool(ok.all())


def test_all_within_agrees_with_the_elementwise_rule():
    """The two-reduction check of large arrays (checks.all_within) against the element-wise
    rule, on arrays holding each kind of bad value at a random place, and values on each
    side of every bound."""
    rng = np.random.default_rng(3)
    specials = [
        np.nan, np.inf, -np.inf, FLOAT32_MAX, -FLOAT32_MAX, 3.5e38, -3.5e38,
        99.0, 100.0, -100.0, 0.0, -0.0, 1e-300, -1e-300, -5.0,
    ]  # fmt: skip
    for _ in range(300):
        positive = bool(rng.random() < 0.3)
        minimum = rng.choice([None, -5.0, 0.0])
        # Positive ones drawn above 0, so that a single special value decides.
        low = 0.5 if positive or minimum == 0.0 else -50.0
        array = rng.uniform(low, 50.0, (int(rng.integers(0, 40)), 2))
        if array.size and rng.random() < 0.8:
            array.flat[rng.integers(0, array.size)] = rng.choice(specials)
        limit = rng.choice([FLOAT32_MAX, 100.0, 1e39])
        assert all_within(array, limit, minimum=minimum, positive=positive) == (
            _within_elementwise(array, limit, minimum, positive)
        ), (array, limit, minimum, positive)


def test_large_per_world_values_name_their_first_bad_entry():
    """A per-world array checked in two reductions still names the first bad entry, with
    the element-wise rule's words (as_vectors2, as_reals)."""
    n = 65_536
    forces = np.zeros((n, 2))
    forces[40_000, 1] = np.nan
    forces[50_000, 0] = np.inf
    with pytest.raises(ValueError, match=r"force\[40000\] must be finite"):
        as_vectors2(forces, "force", n)
    masses = np.ones(n)
    masses[7] = 0.0
    with pytest.raises(ValueError, match=r"mass\[7\] must be positive"):
        as_reals(masses, "mass", n, positive=True)
    np.testing.assert_array_equal(as_vectors2(np.ones((n, 2)), "force", n), np.ones((n, 2)))
