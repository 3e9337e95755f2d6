"""The soft step's joints (Scene(solver="soft_step")): Fx2D's joint constraints as soft
velocity constraints with accumulated, warm-started impulses (Box2D v3's revolute and
prismatic joints' scheme, written for this engine).

The constraints are those of solver/joints.py (seed 003), each now a row (or a 2 x 2 block)
of a velocity solve:

- revolute: the anchors together (a 2 x 2 block: the point's x and y), the relative angle
  within [lower, upper] when limited (two one-sided rows);
- prismatic: no motion across the axis and no relative turn (a 2 x 2 block), the travel
  along the axis within [lower, upper] (two one-sided rows).

A row's error C (m or rad) becomes a bias velocity through the soft constraint of
soft_contacts.softness at JOINT_HERTZ and JOINT_DAMPING_RATIO in the solve, and none in the
relax; a limit not yet reached lets the joint close on it in this substep but no further (a
speculative row, as contacts do). The motors' PID efforts are loads applied with gravity
(joints.motor_load), as in XPBD. The accumulated impulses (device.Joints.soft_impulse) are
warm started with the contacts' at the start of each substep, body by body
(warm_start_joints_of_body), before any constraint is solved: a joint warm started just
before its own solve met bodies that the joints solved before it had corrected without
the impulses still to come, and a double pendulum lost 7 % of its swing energy in 10 s at
Box2D's stiffness (Box2D, which warm starts everything first: 1 %).
"""

import math

import taichi as ti

from ...enums import JOINT_REVOLUTE
from ..bodies import solver_mass
from ..math2d import cross, cross_sv, rotate
from .joints import centre_offset, solver_relative_angle, wrap_angle
from .soft_contacts import softness

vec2 = ti.math.vec2
vec4 = ti.math.vec4

#: Joint stiffness, Hz, and damping ratio (Box2D v3's jointHertz and jointDampingRatio),
#: the stiffness at most JOINT_STIFFEST_FRACTION of the substep rate (60 Hz at 4 substeps
#: of 1/60 s). Box2D v3 3.1 (pyb2d3) measured here: a box hanging from a joint at its
#: centre sags 0.0690 mm, g / (2 pi 60 Hz)^2, and a kicked one comes back along the same
#: positions as with these values, step for step (Box2D 3.0's cap was an eighth: 30 Hz).
JOINT_HERTZ = 60.0
JOINT_DAMPING_RATIO = 2.0
JOINT_STIFFEST_FRACTION = 0.25


@ti.func
def _row(error, rate, inv_k, accumulated, soft, h, use_bias: ti.template()):
    """New accumulated impulse (>= 0) of a one-sided row (a limit): error C >= 0 holds
    (C > 0: apart by C, closing at most C in this substep); rate = dC/dt now; inv_k: the
    row's effective mass."""
    bias, mass_scale, impulse_scale = 0.0, 1.0, 0.0
    if error > 0.0:
        bias = error / h
    elif ti.static(use_bias):
        bias, mass_scale, impulse_scale = soft[0] * error, soft[1], soft[2]
    return ti.max(
        accumulated - inv_k * mass_scale * (rate + bias) - impulse_scale * accumulated, 0.0
    )


@ti.func
def _solve_block(k11, k12, k22, rate, error, accumulated, soft, use_bias: ti.template()):
    """Impulse change of a 2 x 2 equality block (K, rates, errors, accumulated impulses: 2
    vectors), soft in the solve, rigid in the relax; 0 where K is singular."""
    det = k11 * k22 - k12 * k12
    change = vec2(0.0, 0.0)
    if det != 0.0:
        target = rate
        mass_scale, impulse_scale = 1.0, 0.0
        if ti.static(use_bias):
            target = rate + soft[0] * error
            mass_scale, impulse_scale = soft[1], soft[2]
        solved = vec2(k22 * target[0] - k12 * target[1], k11 * target[1] - k12 * target[0]) / det
        change = -mass_scale * solved - impulse_scale * accumulated
    return change


@ti.func
def _joint_frame(bodies: ti.template(), joints: ti.template(), joint, slot1, slot2):
    """The joint's geometry at the bodies' current poses: the lever arms r1 (parent) and r2
    (child) of its anchors, m; d, the child's anchor minus the parent's, m; and the axis a
    prismatic joint slides along (unit, turned with the parent)."""
    c1, n1 = ti.cos(bodies.angle[slot1]), ti.sin(bodies.angle[slot1])
    c2, n2 = ti.cos(bodies.angle[slot2]), ti.sin(bodies.angle[slot2])
    r1 = rotate(joints.anchor_parent[joint], c1, n1)
    r2 = rotate(joints.anchor_child[joint], c2, n2)
    d = centre_offset(bodies, slot1, slot2) + r2 - r1
    return r1, r2, d, rotate(joints.axis[joint], c1, n1)


@ti.func
def solve_soft_joint(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    counts: ti.template(),
    joint_slot,
    n_bodies,
    h,
    use_bias: ti.template(),
):
    """One sweep over the rows of the joint in slot joint_slot (= world * n_joints + joint):
    soft with `use_bias` (the substep's solve), rigid and unbiased without (the relax)."""
    n_joints = counts.n_joints[None]
    world, joint = joint_slot // n_joints, joint_slot % n_joints
    body1, body2 = joints.parent[joint], joints.child[joint]
    slot1, slot2 = world * n_bodies + body1, world * n_bodies + body2
    if bodies.enabled[slot1] == 1 and bodies.enabled[slot2] == 1:
        w1, i1 = solver_mass(model, bodies, slot1, body1)
        w2, i2 = solver_mass(model, bodies, slot2, body2)
        v1, s1 = bodies.velocity[slot1], bodies.angular_velocity[slot1]
        v2, s2 = bodies.velocity[slot2], bodies.angular_velocity[slot2]
        r1, r2, d, axis = _joint_frame(bodies, joints, joint, slot1, slot2)
        impulse = joints.soft_impulse[joint_slot]
        soft = softness(ti.min(JOINT_HERTZ, JOINT_STIFFEST_FRACTION / h), JOINT_DAMPING_RATIO, h)
        if joints.kind[joint] == JOINT_REVOLUTE:
            lower, upper = joints.lower[joint], joints.upper[joint]
            if (lower > -math.pi or upper < math.pi) and i1 + i2 > 0.0:
                angle = wrap_angle(solver_relative_angle(bodies, joints, slot1, slot2, joint))
                axial_mass = 1.0 / (i1 + i2)
                new = _row(angle - lower, s2 - s1, axial_mass, impulse[2], soft, h, use_bias)
                change = new - impulse[2]
                impulse[2] = new
                s1 -= i1 * change
                s2 += i2 * change
                new = _row(upper - angle, s1 - s2, axial_mass, impulse[3], soft, h, use_bias)
                change = new - impulse[3]
                impulse[3] = new
                s1 += i1 * change
                s2 -= i2 * change
            rate = v2 + cross_sv(s2, r2) - v1 - cross_sv(s1, r1)
            k11 = w1 + w2 + i1 * r1.y * r1.y + i2 * r2.y * r2.y
            k12 = -i1 * r1.x * r1.y - i2 * r2.x * r2.y
            k22 = w1 + w2 + i1 * r1.x * r1.x + i2 * r2.x * r2.x
            change = _solve_block(
                k11, k12, k22, rate, d, vec2(impulse[0], impulse[1]), soft, use_bias
            )
            impulse[0] += change[0]
            impulse[1] += change[1]
            v1 -= w1 * change
            s1 -= i1 * cross(r1, change)
            v2 += w2 * change
            s2 += i2 * cross(r2, change)
        else:
            across = vec2(-axis.y, axis.x)
            # Each row's angular terms: the parent turns the axis and moves its anchor.
            a1, a2 = cross(d + r1, axis), cross(r2, axis)
            b1, b2 = cross(d + r1, across), cross(r2, across)
            travel = axis.dot(d)
            axial_k = w1 + w2 + i1 * a1 * a1 + i2 * a2 * a2
            if axial_k > 0.0:
                axial_mass = 1.0 / axial_k
                rate = axis.dot(v2 - v1) + a2 * s2 - a1 * s1
                new = _row(
                    travel - joints.lower[joint], rate, axial_mass, impulse[2], soft, h, use_bias
                )
                change = new - impulse[2]
                impulse[2] = new
                v1 -= w1 * change * axis
                s1 -= i1 * change * a1
                v2 += w2 * change * axis
                s2 += i2 * change * a2
                rate = axis.dot(v2 - v1) + a2 * s2 - a1 * s1
                new = _row(
                    joints.upper[joint] - travel, -rate, axial_mass, impulse[3], soft, h, use_bias
                )
                change = new - impulse[3]
                impulse[3] = new
                v1 += w1 * change * axis
                s1 += i1 * change * a1
                v2 -= w2 * change * axis
                s2 -= i2 * change * a2
            rate = vec2(across.dot(v2 - v1) + b2 * s2 - b1 * s1, s2 - s1)
            error = vec2(
                across.dot(d),
                wrap_angle(solver_relative_angle(bodies, joints, slot1, slot2, joint)),
            )
            k11 = w1 + w2 + i1 * b1 * b1 + i2 * b2 * b2
            k12 = i1 * b1 + i2 * b2
            k22 = i1 + i2
            if k22 == 0.0:
                k22 = 1.0  # both bodies' turns fixed: the row is inert
            change = _solve_block(
                k11, k12, k22, rate, error, vec2(impulse[0], impulse[1]), soft, use_bias
            )
            impulse[0] += change[0]
            impulse[1] += change[1]
            v1 -= w1 * change[0] * across
            s1 -= i1 * (change[0] * b1 + change[1])
            v2 += w2 * change[0] * across
            s2 += i2 * (change[0] * b2 + change[1])
        joints.soft_impulse[joint_slot] = impulse
        if w1 > 0.0 or i1 > 0.0:
            bodies.velocity[slot1] = v1
            bodies.angular_velocity[slot1] = s1
        if w2 > 0.0 or i2 > 0.0:
            bodies.velocity[slot2] = v2
            bodies.angular_velocity[slot2] = s2


@ti.func
def _warm_impulse(bodies: ti.template(), joints: ti.template(), joint, joint_slot, slot1, slot2):
    """The joint's accumulated impulses as (linear impulse on the child (the parent takes
    minus it), N s; angular impulse on the parent, to subtract; on the child, to add, N m
    s), with the lever arms of the bodies' current poses, as the solve applies them."""
    impulse = joints.soft_impulse[joint_slot]
    r1, r2, d, axis = _joint_frame(bodies, joints, joint, slot1, slot2)
    axial = impulse[2] - impulse[3]
    linear = vec2(0.0, 0.0)
    turn_parent, turn_child = 0.0, 0.0
    if joints.kind[joint] == JOINT_REVOLUTE:
        linear = vec2(impulse[0], impulse[1])
        turn_parent = cross(r1, linear) + axial
        turn_child = cross(r2, linear) + axial
    else:
        across = vec2(-axis.y, axis.x)
        linear = impulse[0] * across + axial * axis
        turn_parent = impulse[0] * cross(d + r1, across) + impulse[1] + axial * cross(d + r1, axis)
        turn_child = impulse[0] * cross(r2, across) + impulse[1] + axial * cross(r2, axis)
    return linear, turn_parent, turn_child


@ti.func
def warm_start_joints_of_body(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    counts: ti.template(),
    slot,
    n_bodies,
):
    """Re-apply to body `slot` the impulses its joints carried at the end of the last
    substep (the soft step's warm start), gathered over its joints in a fixed order
    (joints.body_joints), so the sum is the same on every run."""
    n_joints = counts.n_joints[None]
    world, body = slot // n_bodies, slot % n_bodies
    inv_mass, inv_inertia = solver_mass(model, bodies, slot, body)
    velocity, spin = bodies.velocity[slot], bodies.angular_velocity[slot]
    for k in range(joints.body_joint_start[body], joints.body_joint_start[body + 1]):
        joint = joints.body_joints[k]
        slot1 = world * n_bodies + joints.parent[joint]
        slot2 = world * n_bodies + joints.child[joint]
        if bodies.enabled[slot1] == 1 and bodies.enabled[slot2] == 1:
            linear, turn_parent, turn_child = _warm_impulse(
                bodies, joints, joint, world * n_joints + joint, slot1, slot2
            )
            if joints.child[joint] == body:
                velocity += inv_mass * linear
                spin += inv_inertia * turn_child
            else:
                velocity -= inv_mass * linear
                spin -= inv_inertia * turn_parent
    bodies.velocity[slot] = velocity
    bodies.angular_velocity[slot] = spin
