"""Semi-implicit Euler integration (Fx2D's FxEntity::step): velocity first, then position."""

import taichi as ti

from .launching import quick

vec2 = ti.math.vec2


@ti.func
def moves(p: ti.template(), slot, body):
    """True for an awake body that integration moves: dynamic or kinematic."""
    return (p.body_inv_mass[body] > 0.0 or p.body_kinematic[body] == 1) and \
        p.body_sleeping[slot] == 0


@ti.func
def awake_dynamic(p: ti.template(), slot, n_bodies):
    """True for a dynamic body that is awake: contacts and joints can move it (static,
    kinematic and sleeping bodies act as fixed)."""
    return p.body_inv_mass[slot % n_bodies] > 0.0 and p.body_sleeping[slot] == 0


@ti.func
def integrate_velocity(p: ti.template(), slot, body, gravity, h, extra_force, extra_torque):
    """v += h (g * gravity_scale + F/m), w += h tau/I, both divided by (1 + h c) for damping c.

    F and tau are the applied force and torque plus extra_force / extra_torque (motors).
    """
    damping = 1.0 / (1.0 + h * p.body_damping[body])
    inv_mass = p.body_inv_mass[body]
    force = p.body_force[slot] + extra_force
    torque = p.body_torque[slot] + extra_torque
    accel = gravity * p.body_gravity_scale[body] + force * inv_mass
    p.body_velocity[slot] = (p.body_velocity[slot] + h * accel) * damping
    p.body_angular_velocity[slot] = (
        p.body_angular_velocity[slot] + h * torque * p.body_inv_inertia[body]
    ) * damping


@ti.func
def begin_step_pose(p: ti.template(), slot):
    """The step's displacements start from the current pose (body_anchor_*)."""
    p.body_anchor_position[slot] = p.body_position[slot]
    p.body_anchor_angle[slot] = p.body_angle[slot]
    p.body_delta_position[slot] = vec2(0.0, 0.0)
    p.body_delta_angle[slot] = 0.0
    p.body_prev_delta_position[slot] = vec2(0.0, 0.0)
    p.body_prev_delta_angle[slot] = 0.0


@ti.func
def displace(p: ti.template(), slot, shift, turn):
    """Move a body by shift (m) and turn (rad) within the step.

    The displacement since the step began is accumulated on its own and the pose is rebuilt
    from it, so the small numbers the solver works with never round against a large
    coordinate (see body_delta_position).
    """
    delta = p.body_delta_position[slot] + shift
    p.body_delta_position[slot] = delta
    p.body_position[slot] = p.body_anchor_position[slot] + delta
    delta_angle = p.body_delta_angle[slot] + turn
    p.body_delta_angle[slot] = delta_angle
    p.body_angle[slot] = p.body_anchor_angle[slot] + delta_angle


@ti.func
def integrate_position(p: ti.template(), slot, h):
    """x += h v, theta += h w; the displacement before the move becomes the previous one."""
    p.body_prev_delta_position[slot] = p.body_delta_position[slot]
    p.body_prev_delta_angle[slot] = p.body_delta_angle[slot]
    displace(p, slot, h * p.body_velocity[slot], h * p.body_angular_velocity[slot])


@quick
@ti.kernel
def clear_forces(p: ti.template(), n_slots: ti.i32):
    ti.loop_config(serialize=p.serial)
    for slot in range(n_slots):
        p.body_force[slot] = vec2(0.0, 0.0)
        p.body_torque[slot] = 0.0
