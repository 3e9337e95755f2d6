"""Joints from Fx2D's five XPBD constraints (seed 003), and their PID motors.

A revolute joint is an anchor constraint plus an angular limit; a prismatic joint is motion
along an axis plus an angle lock plus separation limits. Each constraint is one XPBD update
(compliance alpha = compliance / h^2, denominator from inverse masses and gradients,
dlambda = -C / denominator), with gradients evaluated in world space at every substep.
Body 1 is the joint's parent, body 2 its child. Inequality constraints act only when violated.
"""

import math

import taichi as ti

from ..integrate import displace
from ..math2d import cross, rotate

vec2 = ti.math.vec2

JOINT_REVOLUTE = 0
JOINT_PRISMATIC = 1
MOTOR_NONE = 0
MOTOR_POSITION = 1
MOTOR_VELOCITY = 2
MOTOR_EFFORT = 3
MOTOR_MODES = {None: MOTOR_NONE, "position": MOTOR_POSITION, "velocity": MOTOR_VELOCITY,
               "effort": MOTOR_EFFORT}

#: Joints are rigid (Fx2D's default compliance 0).
JOINT_COMPLIANCE = 0.0
#: Passes over a joint's constraints per substep. The anchor constraint is linearised, and
#: with a light body far from its anchor (a small pendulum bob) one pass leaves a
#: second-order error that the velocity derivation turns into spin; a few passes remove it.
JOINT_ITERATIONS = 4


@ti.func
def wrap_angle(angle):
    """angle wrapped to [-pi, pi)."""
    return angle - 2.0 * math.pi * ti.floor((angle + math.pi) / (2.0 * math.pi))


@ti.func
def joint_masses(p: ti.template(), slot, body):
    inv_mass, inv_inertia = 0.0, 0.0
    if p.body_sleeping[slot] == 0:
        inv_mass, inv_inertia = p.body_inv_mass[body], p.body_inv_inertia[body]
    return inv_mass, inv_inertia


@ti.func
def xpbd_update(p: ti.template(), slot1, body1, slot2, body2, violation, grad1, grad2,
                angular1, angular2, h):
    """One XPBD step for constraint C = violation with the given gradients.

    denom = w1 |g1|^2 + w2 |g2|^2 + I1 g_theta1^2 + I2 g_theta2^2 + compliance / h^2;
    dlambda = -C / denom; x_i += w_i dlambda g_i; theta_i += I_i dlambda g_theta_i.
    The previous pose is left alone: the correction becomes velocity when it is derived.
    """
    w1, i1 = joint_masses(p, slot1, body1)
    w2, i2 = joint_masses(p, slot2, body2)
    denom = (w1 * grad1.norm_sqr() + w2 * grad2.norm_sqr() + i1 * angular1 * angular1
             + i2 * angular2 * angular2 + JOINT_COMPLIANCE / (h * h))
    if denom > 0.0:
        dlambda = -violation / denom
        displace(p, slot1, w1 * dlambda * grad1, i1 * dlambda * angular1)
        displace(p, slot2, w2 * dlambda * grad2, i2 * dlambda * angular2)


@ti.func
def joint_frame(p: ti.template(), slot1, slot2, joint):
    """World anchors of parent and child, and the parent's rotation (c, s)."""
    c1, s1 = ti.cos(p.body_angle[slot1]), ti.sin(p.body_angle[slot1])
    c2, s2 = ti.cos(p.body_angle[slot2]), ti.sin(p.body_angle[slot2])
    r1 = rotate(p.joint_anchor_parent[joint], c1, s1)
    r2 = rotate(p.joint_anchor_child[joint], c2, s2)
    return r1, r2, c1, s1


@ti.func
def relative_angle(p: ti.template(), slot1, slot2, joint):
    """Child angle minus parent angle minus the angle they started at (unwrapped), rad."""
    return p.body_angle[slot2] - p.body_angle[slot1] - p.joint_reference_angle[joint]


@ti.func
def centre_offset(p: ti.template(), slot1, slot2):
    """Child centre minus parent centre (m), from the step's starting poses and the small
    displacements since: differences of large coordinates are exact once per step, and the
    substeps' corrections never round against a coordinate like 300 m."""
    return ((p.body_anchor_position[slot2] - p.body_anchor_position[slot1])
            + (p.body_delta_position[slot2] - p.body_delta_position[slot1]))


@ti.func
def solver_relative_angle(p: ti.template(), slot1, slot2, joint):
    """relative_angle inside a step, from the step's starting angles and the small turns
    since (a wheel that has turned 1000 rad keeps its joint's precision)."""
    return ((p.body_anchor_angle[slot2] - p.body_anchor_angle[slot1])
            + (p.body_delta_angle[slot2] - p.body_delta_angle[slot1])
            - p.joint_reference_angle[joint])


@ti.func
def anchor_constraint(p: ti.template(), slot1, body1, slot2, body2, joint, h):
    """C = |a1 - a2| with n = (a1 - a2)/|a1 - a2|: g1 = n, g2 = -n, g_theta = r x n."""
    r1, r2, _, _ = joint_frame(p, slot1, slot2, joint)
    gap = r1 - r2 - centre_offset(p, slot1, slot2)
    length = gap.norm()
    if length > 1e-9:
        n = gap / length
        xpbd_update(p, slot1, body1, slot2, body2, length, n, -n, cross(r1, n), -cross(r2, n), h)


@ti.func
def angle_constraint(p: ti.template(), slot1, body1, slot2, body2, joint, lower, upper, h):
    """Angle lock (lower == upper == 0) or angular limit on the wrapped relative angle."""
    angle = wrap_angle(solver_relative_angle(p, slot1, slot2, joint))
    violation = 0.0
    if angle > upper:
        violation = angle - upper
    elif angle < lower:
        violation = angle - lower
    if violation != 0.0:
        xpbd_update(p, slot1, body1, slot2, body2, violation, vec2(0.0, 0.0), vec2(0.0, 0.0),
                    -1.0, 1.0, h)


@ti.func
def axis_constraints(p: ti.template(), slot1, body1, slot2, body2, joint, h):
    """Prismatic: no motion across the axis, separation along it within [lower, upper].

    For C = g . d, with d = child anchor - parent anchor and g the axis or its normal (both
    turning with the parent): dC/dtheta1 = -(d + r1) x g (g turns, and the parent's anchor
    moves), dC/dtheta2 = r2 x g. Without the angular terms a correction pushes the parent at
    its centre and the child at its own, a couple that creates spin (Fx2D's truck rig
    pitched onto its back on flat ground, +48 J in 2 s).
    """
    r1, r2, c1, s1 = joint_frame(p, slot1, slot2, joint)
    axis = rotate(p.joint_axis[joint], c1, s1)
    across = vec2(-axis.y, axis.x)
    offset = centre_offset(p, slot1, slot2) + r2 - r1
    xpbd_update(p, slot1, body1, slot2, body2, across.dot(offset), -across, across,
                -cross(offset + r1, across), cross(r2, across), h)
    r1, r2, c1, s1 = joint_frame(p, slot1, slot2, joint)
    axis = rotate(p.joint_axis[joint], c1, s1)
    offset = centre_offset(p, slot1, slot2) + r2 - r1
    travel = axis.dot(offset)
    violation = 0.0
    if travel > p.joint_upper[joint]:
        violation = travel - p.joint_upper[joint]
    elif travel < p.joint_lower[joint]:
        violation = travel - p.joint_lower[joint]
    if violation != 0.0:
        xpbd_update(p, slot1, body1, slot2, body2, violation, -axis, axis,
                    -cross(offset + r1, axis), cross(r2, axis), h)


@ti.func
def solve_joint(p: ti.template(), joint_slot, n_bodies, h):
    """All constraints of one joint in one world (joint_slot = world * n_joints + joint)."""
    n_joints = p.step_counts[1]
    world, joint = joint_slot // n_joints, joint_slot % n_joints
    body1, body2 = p.joint_parent[joint], p.joint_child[joint]
    slot1, slot2 = world * n_bodies + body1, world * n_bodies + body2
    for _ in range(JOINT_ITERATIONS):
        if p.joint_type[joint] == JOINT_REVOLUTE:
            anchor_constraint(p, slot1, body1, slot2, body2, joint, h)
            if p.joint_lower[joint] > -math.pi or p.joint_upper[joint] < math.pi:
                angle_constraint(p, slot1, body1, slot2, body2, joint, p.joint_lower[joint],
                                 p.joint_upper[joint], h)
        else:
            angle_constraint(p, slot1, body1, slot2, body2, joint, 0.0, 0.0, h)
            axis_constraints(p, slot1, body1, slot2, body2, joint, h)


@ti.func
def joint_coordinate(p: ti.template(), slot1, slot2, joint):
    """(position, rate): relative angle and its rate (revolute) or travel along the axis and
    its rate (prismatic)."""
    position, rate = 0.0, 0.0
    if p.joint_type[joint] == JOINT_REVOLUTE:
        position = relative_angle(p, slot1, slot2, joint)
        rate = p.body_angular_velocity[slot2] - p.body_angular_velocity[slot1]
    else:
        r1, r2, c1, s1 = joint_frame(p, slot1, slot2, joint)
        axis = rotate(p.joint_axis[joint], c1, s1)
        position = axis.dot((p.body_position[slot2] + r2) - (p.body_position[slot1] + r1))
        rate = axis.dot(p.body_velocity[slot2] - p.body_velocity[slot1])
    return position, rate


@ti.func
def update_motor(p: ti.template(), joint_slot, n_joints, n_bodies, h):
    """PID output of one motor for this substep, clamped to its max effort (N m or N)."""
    world, joint = joint_slot // n_joints, joint_slot % n_joints
    mode = p.joint_mode[joint]
    effort = 0.0
    if mode != MOTOR_NONE:
        slot1 = world * n_bodies + p.joint_parent[joint]
        slot2 = world * n_bodies + p.joint_child[joint]
        position, rate = joint_coordinate(p, slot1, slot2, joint)
        target = p.joint_target[joint_slot]
        if mode == MOTOR_EFFORT:
            effort = target
        else:
            error = target - (position if mode == MOTOR_POSITION else rate)
            if p.joint_pid_started[joint_slot] == 0:
                p.joint_prev_error[joint_slot] = error
                p.joint_integral[joint_slot] = 0.0
                p.joint_pid_started[joint_slot] = 1
            p.joint_integral[joint_slot] += error * h
            derivative = (error - p.joint_prev_error[joint_slot]) / h
            p.joint_prev_error[joint_slot] = error
            gains = p.joint_pid[joint]
            effort = (gains[0] * error + gains[1] * p.joint_integral[joint_slot]
                      + gains[2] * derivative)
        limit = p.joint_max_effort[joint]
        effort = ti.math.clamp(effort, -limit, limit)
    p.joint_effort[joint_slot] = effort


@ti.func
def motor_load(p: ti.template(), slot, body, n_joints, n_bodies):
    """(force, torque) the motors of the body's joints put on it this substep."""
    world = slot // n_bodies
    force = vec2(0.0, 0.0)
    torque = 0.0
    for k in range(p.body_joint_start[body], p.body_joint_start[body + 1]):
        joint = p.body_joints[k]
        effort = p.joint_effort[world * n_joints + joint]
        sign = 1.0 if p.joint_child[joint] == body else -1.0  # reaction on the parent
        if p.joint_type[joint] == JOINT_REVOLUTE:
            torque += sign * effort
        else:
            parent_angle = p.body_angle[world * n_bodies + p.joint_parent[joint]]
            axis = rotate(p.joint_axis[joint], ti.cos(parent_angle), ti.sin(parent_angle))
            force += sign * effort * axis
    return force, torque
