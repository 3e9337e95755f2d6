"""Semi-implicit Euler against its own discrete closed form (no contacts involved), under
both solvers (their substeps integrate bodies alike)."""

import math

import numpy as np
import pytest

import fx2d_gpu as fx

DT = 1.0 / 60.0


def discrete_free_flight(x0, v0, accel, h, n):
    """Semi-implicit Euler after n steps of h: v_k = v0 + k h a, x_n = x0 + h sum_k v_k."""
    x0, v0, accel = map(np.asarray, (x0, v0, accel))
    return x0 + n * h * v0 + h * h * accel * n * (n + 1) / 2, v0 + n * h * accel


def test_free_fall_matches_discrete_formula(arch, solver):
    scene = fx.Scene(gravity=(0.0, -9.81), arch=arch, solver=solver)
    scene.add_circle((0.0, 2.0), 0.1)
    for _ in range(60):
        scene.step(DT)
    n, h = 60 * scene.substeps, DT / scene.substeps
    x, v = discrete_free_flight((0.0, 2.0), (0.0, 0.0), (0.0, -9.81), h, n)
    s = scene.get_state()
    np.testing.assert_allclose(s.position[0, 0], x, atol=1e-5)
    np.testing.assert_allclose(s.velocity[0, 0], v, atol=5e-5)
    # Symplectic Euler summed in closed form, apart from the step-by-step reference above:
    # y_n = y_0 - g h^2 n (n + 1) / 2 = y_0 - g t^2 / 2 - g t h / 2, the continuous answer
    # less g t h / 2 = 7.4 mm: explicit Euler (positions from the old velocity) would end
    # g t h = 15 mm above it and the exact parabola 7.4 mm above it; both fail.
    t = n * h
    assert abs(s.position[0, 0, 1] - (2.0 - 0.5 * 9.81 * t * t - 0.5 * 9.81 * t * h)) < 1e-5


def test_projectile_with_gravity_scale_and_spin(arch, solver):
    scene = fx.Scene(gravity=(0.0, -9.81), substeps=7, arch=arch, solver=solver)
    scene.add_box(
        (-1.0, 0.5), (0.2, 0.1), velocity=(3.0, 4.0), angular_velocity=2.0, gravity_scale=0.5
    )
    for _ in range(45):
        scene.step(DT)
    n, h = 45 * 7, DT / 7
    x, v = discrete_free_flight((-1.0, 0.5), (3.0, 4.0), (0.0, -9.81 * 0.5), h, n)
    s = scene.get_state()
    # float32 position: each of the 315 substeps rounds the pose once (half an ulp of 2 m is
    # 1.2e-7 m, 3.8e-5 m in all at worst).
    np.testing.assert_allclose(s.position[0, 0], x, atol=4e-5)
    # float32 velocity: hundreds of additions of h*g, each rounded to ~2e-8 relative.
    np.testing.assert_allclose(s.velocity[0, 0], v, atol=5e-5)
    np.testing.assert_allclose(s.angle[0, 0], 2.0 * 45 * DT, atol=1e-5)


def test_damping_force_and_torque(arch, solver):
    scene = fx.Scene(gravity=(0.0, 0.0), substeps=4, arch=arch, solver=solver)
    body = scene.add_box((0.0, 0.0), (1.0, 2.0), mass=2.0, vel_damping=0.5)
    inertia = 2.0 * (1.0 + 4.0) / 12.0
    assert scene.body_inertia(body) == pytest.approx(inertia)
    scene.apply_force(body, (4.0, 0.0), torque=1.0)
    scene.step(DT)
    h, c = DT / 4, 1.0 / (1.0 + DT / 4 * 0.5)
    v = omega = x = theta = 0.0
    for _ in range(4):  # the same recursion, in float64
        v = (v + h * 4.0 / 2.0) * c
        omega = (omega + h * 1.0 / inertia) * c
        x += h * v
        theta += h * omega
    s = scene.get_state()
    np.testing.assert_allclose(s.velocity[0, 0], [v, 0.0], atol=1e-6)
    np.testing.assert_allclose(s.position[0, 0], [x, 0.0], atol=1e-6)
    np.testing.assert_allclose(s.angular_velocity[0, 0], omega, atol=1e-6)
    np.testing.assert_allclose(s.angle[0, 0], theta, atol=1e-6)
    # The force lasted one step only; damping then decays the velocity geometrically.
    scene.step(DT)
    np.testing.assert_allclose(scene.get_state().velocity[0, 0, 0], v * c**4, rtol=1e-5)


def test_static_bodies_never_move(arch, solver):
    scene = fx.Scene(arch=arch, solver=solver)
    ground = scene.add_box((0.0, 0.0), (5.0, 1.0), mass=0, velocity=(1.0, 0.0))
    scene.apply_force(ground, (100.0, 100.0))
    scene.step(DT)
    np.testing.assert_array_equal(scene.get_state().position[0, ground], [0.0, 0.0])


def test_per_world_forces_and_states_are_independent(arch, solver):
    scene = fx.Scene(gravity=(0.0, 0.0), n_worlds=3, substeps=2, arch=arch, solver=solver)
    b = scene.add_circle((0.0, 0.0), 0.5, mass=1.0)
    state = scene.get_state()
    state.velocity[:, 0] = [[1.0, 0.0], [0.0, 2.0], [-1.0, -1.0]]
    scene.set_state(state)
    scene.apply_force(b, np.array([[0.0, 0.0], [6.0, 0.0], [0.0, 0.0]]))
    scene.step(0.02)
    s = scene.get_state()
    np.testing.assert_allclose(s.position[0, 0], [0.02, 0.0], atol=1e-6)
    # World 1: v after substep k is (6 h k, 2): x = h^2 6 (1 + 2) = 6 * 3 h^2.
    np.testing.assert_allclose(s.position[1, 0], [6.0 * 3 * 0.01**2, 0.04], atol=1e-6)
    np.testing.assert_allclose(s.position[2, 0], [-0.02, -0.02], atol=1e-6)


def test_dt_validation_and_clamping(arch):
    scene = fx.Scene(gravity=(0.0, -10.0), substeps=1, arch=arch)
    scene.add_circle((0.0, 0.0), 0.5)
    for bad in (0.0, 5e-4, -1.0, math.nan, math.inf):
        with pytest.raises(ValueError, match="dt"):
            scene.step(bad)
    with pytest.raises(TypeError, match="dt"):
        scene.step("0.1")
    scene.step(0.5)  # clamped to 0.06 s
    np.testing.assert_allclose(scene.get_state().velocity[0, 0, 1], -0.6, atol=1e-6)
    assert scene.time == pytest.approx(0.06)
