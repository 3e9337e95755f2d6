"""Joints from Fx2D's five XPBD constraints (seed 003), and their PID motors.

A revolute joint is an anchor constraint plus an angular limit; a prismatic joint is motion
along an axis plus an angle lock plus separation limits. Each constraint is one XPBD update
(compliance alpha = compliance / h^2, denominator from inverse masses and gradients,
dlambda = -C / denominator), with gradients evaluated in world space at every substep.
Body 1 is the joint's parent, body 2 its child. Inequality constraints act only when violated.
"""

import math

import taichi as ti

from ...enums import JOINT_REVOLUTE, MOTOR_EFFORT, MOTOR_NONE, MOTOR_POSITION
from ..bodies import bounding_radius, solver_mass
from ..integrate import displace
from ..math2d import cross, rotate

vec2 = ti.math.vec2

#: Joints are rigid (Fx2D's default compliance 0).
JOINT_COMPLIANCE = 0.0
#: Passes over a joint's constraints each time its colour is solved.
JOINT_ITERATIONS = 2
#: Sweeps over all the joints per substep (solver/step.py: the position pass's first sweep
#: solves the contacts and joints, the others the joints alone, colour after colour). A
#: body shared by many joints (a hub, a chain link) is moved by each in turn: solving each
#: joint 4 times in a row before the next leaves gaps that the next substep's correction
#: turns into velocity, which the anchor solve no longer drains (anchor_constraint): a hub
#: of 40 spokes blew up within 60 steps that way, and keeps its energy with 4 sweeps of 1
#: pass (the same work per joint). Joint-free scenes never sweep again.
JOINT_SWEEPS = 2
#: A joint is torn (a fault, solver/faults.py) once its error is beyond this fraction of the
#: smaller bounding radius of its bodies. Joints that hold are off by micrometres to
#: millimetres (a 500-link chain of 0.2 m links pulled by 1e3 N: 9 mm at most).
JOINT_TORN_FRACTION = 1.0


@ti.func
def wrap_angle(angle):
    """angle wrapped to [-pi, pi)."""
    return angle - 2.0 * math.pi * ti.floor((angle + math.pi) / (2.0 * math.pi))


@ti.func
def xpbd_update(
    model: ti.template(),
    bodies: ti.template(),
    slot1,
    body1,
    slot2,
    body2,
    violation,
    grad1,
    grad2,
    angular1,
    angular2,
    h,
):
    """One XPBD step for constraint C = violation with the given gradients.

    denom = w1 |g1|^2 + w2 |g2|^2 + I1 g_theta1^2 + I2 g_theta2^2 + compliance / h^2;
    dlambda = -C / denom; x_i += w_i dlambda g_i; theta_i += I_i dlambda g_theta_i.
    The previous pose is left alone: the correction becomes velocity when it is derived.
    """
    w1, i1 = solver_mass(model, bodies, slot1, body1)
    w2, i2 = solver_mass(model, bodies, slot2, body2)
    denom = (
        w1 * grad1.norm_sqr()
        + w2 * grad2.norm_sqr()
        + i1 * angular1 * angular1
        + i2 * angular2 * angular2
        + JOINT_COMPLIANCE / (h * h)
    )
    if denom > 0.0:
        dlambda = -violation / denom
        displace(bodies, slot1, w1 * dlambda * grad1, i1 * dlambda * angular1)
        displace(bodies, slot2, w2 * dlambda * grad2, i2 * dlambda * angular2)


@ti.func
def joint_frame(bodies: ti.template(), joints: ti.template(), slot1, slot2, joint):
    """World anchors of parent and child, and the parent's rotation (c, s)."""
    c1, s1 = ti.cos(bodies.angle[slot1]), ti.sin(bodies.angle[slot1])
    c2, s2 = ti.cos(bodies.angle[slot2]), ti.sin(bodies.angle[slot2])
    r1 = rotate(joints.anchor_parent[joint], c1, s1)
    r2 = rotate(joints.anchor_child[joint], c2, s2)
    return r1, r2, c1, s1


@ti.func
def relative_angle(bodies: ti.template(), joints: ti.template(), slot1, slot2, joint):
    """Child angle minus parent angle minus the angle they started at (unwrapped), rad."""
    return bodies.angle[slot2] - bodies.angle[slot1] - joints.reference_angle[joint]


@ti.func
def centre_offset(bodies: ti.template(), slot1, slot2):
    """Child centre minus parent centre (m), from the step's starting poses and the small
    displacements since: differences of large coordinates are exact once per step, and the
    substeps' corrections never round against a coordinate like 300 m."""
    return (bodies.anchor_position[slot2] - bodies.anchor_position[slot1]) + (
        bodies.delta_position[slot2] - bodies.delta_position[slot1]
    )


@ti.func
def solver_relative_angle(bodies: ti.template(), joints: ti.template(), slot1, slot2, joint):
    """relative_angle inside a step, from the step's starting angles and the small turns
    since (a wheel that has turned 1000 rad keeps its joint's precision)."""
    return (
        (bodies.anchor_angle[slot2] - bodies.anchor_angle[slot1])
        + (bodies.delta_angle[slot2] - bodies.delta_angle[slot1])
        - joints.reference_angle[joint]
    )


@ti.func
def substep_start_anchor(bodies: ti.template(), slot, anchor):
    """A body-frame anchor (m) rotated by the body's angle at the start of the substep."""
    angle = bodies.anchor_angle[slot] + bodies.prev_delta_angle[slot]
    return rotate(anchor, ti.cos(angle), ti.sin(angle))


@ti.func
def anchor_constraint(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    slot1,
    body1,
    slot2,
    body2,
    joint,
    h,
):
    """C = |a1 - a2| along n = (a1 - a2)/|a1 - a2| (g1 = n, g2 = -n), each body turning
    about the lever arm it had when the substep began.

    Fx2D turns them about the current arms (g_theta = r x n): that projection drains a
    swinging body's energy at a rate proportional to the substep (a free pendulum from 10
    degrees swung 9.41 degrees after 10 s at 11 substeps, 14 % of its energy gone; a double
    pendulum of two 1 m rods from 90 degrees lost 30 %). Turning about the start arms
    r_start (SHAKE's rule, the constraint's gradient where the substep began), with
    denominator w1 + w2 + i1 (r1 x n)(r1_start x n) + i2 (r2 x n)(r2_start x n) so that one
    update still closes the linearised gap, keeps it: 10.000 degrees, the rods' energy
    within 0.3 %. (Solving both rows of a1 = a2 as one 2x2 block along the start gradient
    keeps it as well, but a hub of 40 jointed spokes that collide with each other blew up
    with it; the update along the gap stays stable there.)
    """
    r1, r2, _, _ = joint_frame(bodies, joints, slot1, slot2, joint)
    gap = r1 - r2 - centre_offset(bodies, slot1, slot2)
    length = gap.norm()
    if length > 1e-9:
        n = gap / length
        start1 = substep_start_anchor(bodies, slot1, joints.anchor_parent[joint])
        start2 = substep_start_anchor(bodies, slot2, joints.anchor_child[joint])
        w1, i1 = solver_mass(model, bodies, slot1, body1)
        w2, i2 = solver_mass(model, bodies, slot2, body2)
        turn1, turn2 = cross(start1, n), -cross(start2, n)
        denom = (
            w1
            + w2
            + i1 * cross(r1, n) * turn1
            - i2 * cross(r2, n) * turn2
            + JOINT_COMPLIANCE / (h * h)
        )
        if denom > 0.0:
            dlambda = -length / denom
            displace(bodies, slot1, w1 * dlambda * n, i1 * dlambda * turn1)
            displace(bodies, slot2, -w2 * dlambda * n, i2 * dlambda * turn2)


@ti.func
def angle_constraint(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    slot1,
    body1,
    slot2,
    body2,
    joint,
    lower,
    upper,
    h,
):
    """Angle lock (lower == upper == 0) or angular limit on the wrapped relative angle."""
    angle = wrap_angle(solver_relative_angle(bodies, joints, slot1, slot2, joint))
    violation = 0.0
    if angle > upper:
        violation = angle - upper
    elif angle < lower:
        violation = angle - lower
    if violation != 0.0:
        xpbd_update(
            model,
            bodies,
            slot1,
            body1,
            slot2,
            body2,
            violation,
            vec2(0.0, 0.0),
            vec2(0.0, 0.0),
            -1.0,
            1.0,
            h,
        )


@ti.func
def axis_constraints(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    slot1,
    body1,
    slot2,
    body2,
    joint,
    h,
):
    """Prismatic: no motion across the axis, separation along it within [lower, upper].

    For C = g . d, with d = child anchor - parent anchor and g the axis or its normal (both
    turning with the parent): dC/dtheta1 = -(d + r1) x g (g turns, and the parent's anchor
    moves), dC/dtheta2 = r2 x g. Without the angular terms a correction pushes the parent at
    its centre and the child at its own, a couple that creates spin (Fx2D's truck rig
    pitched onto its back on flat ground, +48 J in 2 s).
    """
    r1, r2, c1, s1 = joint_frame(bodies, joints, slot1, slot2, joint)
    axis = rotate(joints.axis[joint], c1, s1)
    across = vec2(-axis.y, axis.x)
    offset = centre_offset(bodies, slot1, slot2) + r2 - r1
    xpbd_update(
        model,
        bodies,
        slot1,
        body1,
        slot2,
        body2,
        across.dot(offset),
        -across,
        across,
        -cross(offset + r1, across),
        cross(r2, across),
        h,
    )
    r1, r2, c1, s1 = joint_frame(bodies, joints, slot1, slot2, joint)
    axis = rotate(joints.axis[joint], c1, s1)
    offset = centre_offset(bodies, slot1, slot2) + r2 - r1
    travel = axis.dot(offset)
    violation = 0.0
    if travel > joints.upper[joint]:
        violation = travel - joints.upper[joint]
    elif travel < joints.lower[joint]:
        violation = travel - joints.lower[joint]
    if violation != 0.0:
        xpbd_update(
            model,
            bodies,
            slot1,
            body1,
            slot2,
            body2,
            violation,
            -axis,
            axis,
            -cross(offset + r1, axis),
            cross(r2, axis),
            h,
        )


@ti.func
def solve_joint(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    counts: ti.template(),
    joint_slot,
    n_bodies,
    h,
):
    """All constraints of one joint in one world (joint_slot = world * n_joints + joint)."""
    n_joints = counts.n_joints[None]
    world, joint = joint_slot // n_joints, joint_slot % n_joints
    body1, body2 = joints.parent[joint], joints.child[joint]
    slot1, slot2 = world * n_bodies + body1, world * n_bodies + body2
    # A joint with a disabled body is out of the simulation with it.
    for _ in range(JOINT_ITERATIONS * bodies.enabled[slot1] * bodies.enabled[slot2]):
        if joints.kind[joint] == JOINT_REVOLUTE:
            anchor_constraint(model, bodies, joints, slot1, body1, slot2, body2, joint, h)
            if joints.lower[joint] > -math.pi or joints.upper[joint] < math.pi:
                angle_constraint(
                    model,
                    bodies,
                    joints,
                    slot1,
                    body1,
                    slot2,
                    body2,
                    joint,
                    joints.lower[joint],
                    joints.upper[joint],
                    h,
                )
        else:
            angle_constraint(model, bodies, joints, slot1, body1, slot2, body2, joint, 0.0, 0.0, h)
            axis_constraints(model, bodies, joints, slot1, body1, slot2, body2, joint, h)


@ti.func
def joint_error(bodies: ti.template(), joints: ti.template(), slot1, slot2, joint):
    """How far joint `joint` is from holding at the current poses, m: a revolute joint's
    anchors apart; a prismatic one's child anchor off the parent's axis plus its travel
    past a limit (the same rule as kinematics.joint_errors, on the device)."""
    r1, r2, c1, s1 = joint_frame(bodies, joints, slot1, slot2, joint)
    offset = bodies.position[slot2] + r2 - bodies.position[slot1] - r1
    error = offset.norm()
    if joints.kind[joint] != JOINT_REVOLUTE:
        axis = rotate(joints.axis[joint], c1, s1)
        travel = axis.dot(offset)
        past = ti.max(travel - joints.upper[joint], joints.lower[joint] - travel, 0.0)
        error = ti.abs(vec2(-axis.y, axis.x).dot(offset)) + past
    return error


@ti.func
def torn(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    joint_slot,
    n_joints,
    n_bodies,
):
    """Whether the joint in slot joint_slot no longer holds: its error (joint_error) is
    beyond JOINT_TORN_FRACTION of the smaller bounding radius of its two bodies (a chain
    whose end is pulled by 1e6 N: gaps of 10 m, the chain 17 times its length). Joints of a
    disabled body are out of the simulation and never torn."""
    world, joint = joint_slot // n_joints, joint_slot % n_joints
    body1, body2 = joints.parent[joint], joints.child[joint]
    slot1, slot2 = world * n_bodies + body1, world * n_bodies + body2
    result = False
    if bodies.enabled[slot1] == 1 and bodies.enabled[slot2] == 1:
        size = ti.min(bounding_radius(model, slot1, body1), bounding_radius(model, slot2, body2))
        # "not <=": a NaN error is torn too.
        result = not (
            joint_error(bodies, joints, slot1, slot2, joint) <= JOINT_TORN_FRACTION * size
        )
    return result


@ti.func
def joint_coordinate(bodies: ti.template(), joints: ti.template(), slot1, slot2, joint):
    """(position, rate): relative angle and its rate (revolute) or travel along the axis and
    its rate (prismatic)."""
    position, rate = 0.0, 0.0
    if joints.kind[joint] == JOINT_REVOLUTE:
        position = relative_angle(bodies, joints, slot1, slot2, joint)
        rate = bodies.angular_velocity[slot2] - bodies.angular_velocity[slot1]
    else:
        r1, r2, c1, s1 = joint_frame(bodies, joints, slot1, slot2, joint)
        axis = rotate(joints.axis[joint], c1, s1)
        position = axis.dot((bodies.position[slot2] + r2) - (bodies.position[slot1] + r1))
        rate = axis.dot(bodies.velocity[slot2] - bodies.velocity[slot1])
    return position, rate


@ti.func
def update_motor(bodies: ti.template(), joints: ti.template(), joint_slot, n_joints, n_bodies, h):
    """PID output of one motor for this substep, clamped to its max effort (N m or N)."""
    world, joint = joint_slot // n_joints, joint_slot % n_joints
    mode = joints.mode[joint]
    effort = 0.0
    slot1 = world * n_bodies + joints.parent[joint]
    slot2 = world * n_bodies + joints.child[joint]
    if mode != MOTOR_NONE and bodies.enabled[slot1] == 1 and bodies.enabled[slot2] == 1:
        position, rate = joint_coordinate(bodies, joints, slot1, slot2, joint)
        target = joints.target[joint_slot]
        if mode == MOTOR_EFFORT:
            effort = target
        else:
            error = target - (position if mode == MOTOR_POSITION else rate)
            if joints.pid_started[joint_slot] == 0:
                joints.prev_error[joint_slot] = error
                joints.integral[joint_slot] = 0.0
                joints.pid_started[joint_slot] = 1
            joints.integral[joint_slot] = joints.integral[joint_slot] + error * h  # not atomic
            derivative = (error - joints.prev_error[joint_slot]) / h
            joints.prev_error[joint_slot] = error
            gains = joints.pid[joint_slot]
            effort = (
                gains[0] * error + gains[1] * joints.integral[joint_slot] + gains[2] * derivative
            )
        limit = joints.max_effort[joint]
        effort = ti.math.clamp(effort, -limit, limit)
    joints.effort[joint_slot] = effort


@ti.func
def motor_load(bodies: ti.template(), joints: ti.template(), slot, body, n_joints, n_bodies):
    """(force, torque) the motors of the body's joints put on it this substep."""
    world = slot // n_bodies
    force = vec2(0.0, 0.0)
    torque = 0.0
    for k in range(joints.body_joint_start[body], joints.body_joint_start[body + 1]):
        joint = joints.body_joints[k]
        effort = joints.effort[world * n_joints + joint]
        sign = 1.0 if joints.child[joint] == body else -1.0  # reaction on the parent
        if joints.kind[joint] == JOINT_REVOLUTE:
            torque += sign * effort
        else:
            parent_angle = bodies.angle[world * n_bodies + joints.parent[joint]]
            axis = rotate(joints.axis[joint], ti.cos(parent_angle), ti.sin(parent_angle))
            force += sign * effort * axis
    return force, torque
