"""Semi-implicit Euler integration (Fx2D's FxEntity::step): velocity first, then position."""

from typing import TYPE_CHECKING

import taichi as ti

from ..device.launching import quick
from ..shapes import MAX_SPEED
from .bodies import material_row

if TYPE_CHECKING:
    from .solver.context import StepContext

vec2 = ti.math.vec2

#: Most a body turns in one substep, rad (Box2D's b2_maxRotation): its angular velocity is
#: held to MAX_ROTATION / h. A contact is a linearisation about the pose where it was found;
#: a capsule hitting a wall at 1,000 m/s at a slant is spun up (rightly: its contact point
#: rolls) to 7,500 rad/s, 11 rad a substep, and passed through the wall.
MAX_ROTATION = 0.25 * 3.141592653589793


@ti.func
def integrate_velocity(
    model: ti.template(), bodies: ti.template(), slot, body, gravity, h, extra_force, extra_torque
):
    """v += h (g * gravity_scale + F/m), w += h tau/I, both divided by (1 + h c) for damping c,
    |w| then held to MAX_ROTATION / h (unless beyond shapes.MAX_SPEED or not finite: a
    fault, solver/faults.py).

    F and tau are the applied force and torque plus extra_force / extra_torque (motors);
    gravity is the body's world's (m/s^2).
    """
    row = material_row(model, slot, body)
    damping = 1.0 / (1.0 + h * model.damping[row])
    inv_mass = model.inv_mass[row]
    force = bodies.force[slot] + extra_force
    torque = bodies.torque[slot] + extra_torque
    accel = gravity * model.gravity_scale[row] + force * inv_mass
    bodies.velocity[slot] = (bodies.velocity[slot] + h * accel) * damping
    spin = (bodies.angular_velocity[slot] + h * torque * model.inv_inertia[row]) * damping
    if ti.abs(spin) < MAX_SPEED:  # beyond (or NaN): left for the fault check to report
        spin = ti.math.clamp(spin, -MAX_ROTATION / h, MAX_ROTATION / h)
    bodies.angular_velocity[slot] = spin


@ti.func
def begin_step_pose(bodies: ti.template(), slot):
    """The step's displacements start from the current pose (bodies.anchor_*)."""
    bodies.anchor_position[slot] = bodies.position[slot]
    bodies.anchor_angle[slot] = bodies.angle[slot]
    bodies.delta_position[slot] = vec2(0.0, 0.0)
    bodies.delta_angle[slot] = 0.0
    bodies.prev_delta_position[slot] = vec2(0.0, 0.0)
    bodies.prev_delta_angle[slot] = 0.0


@ti.func
def displace(bodies: ti.template(), slot, shift, turn):
    """Move a body by shift (m) and turn (rad) within the step.

    The displacement since the step began is accumulated on its own and the pose is rebuilt
    from it, so the small numbers the solver works with never round against a large
    coordinate (see device.BodyState).
    """
    delta = bodies.delta_position[slot] + shift
    bodies.delta_position[slot] = delta
    bodies.position[slot] = bodies.anchor_position[slot] + delta
    delta_angle = bodies.delta_angle[slot] + turn
    bodies.delta_angle[slot] = delta_angle
    bodies.angle[slot] = bodies.anchor_angle[slot] + delta_angle


@ti.func
def integrate_position(bodies: ti.template(), slot, h):
    """x += h v, theta += h w; the displacement before the move becomes the previous one."""
    bodies.prev_delta_position[slot] = bodies.delta_position[slot]
    bodies.prev_delta_angle[slot] = bodies.delta_angle[slot]
    displace(bodies, slot, h * bodies.velocity[slot], h * bodies.angular_velocity[slot])


@quick
@ti.kernel
def _clear_forces(bodies: ti.template(), serial: ti.template(), n_slots: ti.i32):
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        clear_force(bodies, slot)


@ti.func
def clear_force(bodies: ti.template(), slot):
    """Body slot's applied force and torque zeroed (a step used them)."""
    bodies.force[slot] = vec2(0.0, 0.0)
    bodies.torque[slot] = 0.0


def clear_forces(ctx: "StepContext"):
    """Forget the applied forces and torques once a step has used them (only if
    apply_force put some on the device: ctx.cache.forces_on_device)."""
    if ctx.cache.forces_on_device:
        _clear_forces(ctx.pool.bodies, ctx.serial, ctx.n_slots)
        ctx.cache.forces_on_device = False
