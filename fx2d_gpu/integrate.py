"""Semi-implicit Euler integration (Fx2D's FxEntity::step): velocity first, then position."""

import taichi as ti

vec2 = ti.math.vec2


@ti.func
def integrate_body(p: ti.template(), slot, body, gravity, h):
    """Advance one awake dynamic body by one substep of length h (s).

    v += h (g * gravity_scale + F/m), ω += h τ/I, both divided by (1 + h c) for damping c,
    then x += h v, θ += h ω. The pose before the update is kept as the previous pose.
    """
    damping = 1.0 / (1.0 + h * p.body_damping[body])
    inv_mass = p.body_inv_mass[body]
    accel = gravity * p.body_gravity_scale[body] + p.body_force[slot] * inv_mass
    velocity = (p.body_velocity[slot] + h * accel) * damping
    angular_velocity = (
        p.body_angular_velocity[slot] + h * p.body_torque[slot] * p.body_inv_inertia[body]
    ) * damping
    p.body_prev_position[slot] = p.body_position[slot]
    p.body_prev_angle[slot] = p.body_angle[slot]
    p.body_velocity[slot] = velocity
    p.body_angular_velocity[slot] = angular_velocity
    p.body_position[slot] += h * velocity
    p.body_angle[slot] += h * angular_velocity


@ti.kernel
def integrate_free(p: ti.template(), n_slots: ti.i32, n_bodies: ti.i32, gravity: vec2,
                   h: ti.f32, substeps: ti.i32):
    """`substeps` substeps of free motion for every awake dynamic body (no constraints)."""
    for slot in range(n_slots):
        body = slot % n_bodies
        if p.body_inv_mass[body] > 0.0 and p.body_sleeping[slot] == 0:
            for _ in range(substeps):
                integrate_body(p, slot, body, gravity, h)


@ti.kernel
def clear_forces(p: ti.template(), n_slots: ti.i32):
    for slot in range(n_slots):
        p.body_force[slot] = vec2(0.0, 0.0)
        p.body_torque[slot] = 0.0
