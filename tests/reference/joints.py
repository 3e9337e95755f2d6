"""Reference joints in float64 NumPy: a 1-DOF rotor under the engine's discrete PID (one
update a substep, effort clamped to max_effort), and the XPBD anchor updates of a revolute
joint.

The references of solver/joints.py's motor control (a joint in "position" mode) and of
its anchor constraint (the position pass's joint stage)."""

import math

import numpy as np

from fx2d_gpu.physics.solver.joints import JOINT_ITERATIONS, JOINT_SWEEPS

from .contacts import cross


def pid_arm_angles(seconds, inertia, target, gains, max_effort, dt=1.0 / 60.0, substeps=11):
    """The angle after each step of dt, for `seconds`, of a rotor of `inertia` starting at
    rest at 0, driven to `target` by the PID gains (P, I, D) (NumPy, float64)."""
    h = dt / substeps
    theta = rate = integral = 0.0
    previous = target - theta
    angles = []
    for _ in range(round(seconds / dt)):
        for _ in range(substeps):
            error = target - theta
            integral += error * h
            torque = gains[0] * error + gains[1] * integral + gains[2] * (error - previous) / h
            previous = error
            rate += h * np.clip(torque, -max_effort, max_effort) / inertia
            theta += h * rate
        angles.append(theta)
    return np.array(angles)


def rotation(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


def reference_revolute(x1, a1, x2, a2, anchor1, anchor2, w1, i1, w2, i2):
    """JOINT_ITERATIONS x JOINT_SWEEPS XPBD updates of C = |a1 - a2|
    (joints.anchor_constraint, compliance 0), each from the poses the last one left:
    n = gap / |gap|, gradients n and -n; each body turns about its lever arm at the start
    of the substep (here the poses given: no velocity), s1 = r1_start x n and
    s2 = -(r2_start x n), dlambda = -C / (w1 + w2 + I1 (r1 x n) s1 + I2 (-(r2 x n)) s2).
    Returns the new (x1, a1, x2, a2)."""
    start1, start2 = rotation(a1) @ anchor1, rotation(a2) @ anchor2
    for _ in range(JOINT_ITERATIONS * JOINT_SWEEPS):
        r1, r2 = rotation(a1) @ anchor1, rotation(a2) @ anchor2
        gap = r1 - r2 - (x2 - x1)
        length = np.linalg.norm(gap)
        if length <= 1e-9:
            break
        n = gap / length
        s1, s2 = cross(start1, n), -cross(start2, n)
        dlam = -length / (w1 + w2 + i1 * cross(r1, n) * s1 - i2 * cross(r2, n) * s2)
        x1, a1 = x1 + w1 * dlam * n, a1 + i1 * dlam * s1
        x2, a2 = x2 - w2 * dlam * n, a2 + i2 * dlam * s2
    return x1, a1, x2, a2
