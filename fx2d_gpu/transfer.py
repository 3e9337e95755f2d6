"""Kernels that take NumPy arrays from the host (ndarray arguments: compiled once), for
Scene's writes between steps: applied forces, a new state, motor targets and modes."""

import taichi as ti

_vec2 = ti.types.ndarray(dtype=ti.math.vec2, ndim=1)
_f32 = ti.types.ndarray(dtype=ti.f32, ndim=1)
_i32 = ti.types.ndarray(dtype=ti.i32, ndim=1)


@ti.kernel
def _scatter_forces(bodies: ti.template(), serial: ti.template(), slots: _i32, forces: _vec2,
                    torques: _f32):
    ti.loop_config(serialize=serial)
    for i in range(slots.shape[0]):
        bodies.force[slots[i]] += forces[i]
        bodies.torque[slots[i]] += torques[i]
        if forces[i].norm() > 0.0 or torques[i] != 0.0:  # a push wakes a sleeping body
            bodies.sleeping[slots[i]] = 0
            bodies.sleep_time[slots[i]] = 0.0


def scatter_forces(ctx, slots, forces, torques):
    """Add forces (k, 2) N and torques (k,) N m to body slots (k,) for the next step; a
    push wakes a sleeping body."""
    _scatter_forces(ctx.pool.bodies, ctx.serial, slots, forces, torques)
    ctx.cache.forces_on_device = True


@ti.kernel
def _write_state(bodies: ti.template(), serial: ti.template(), position: _vec2, angle: _f32,
                 velocity: _vec2, angular_velocity: _f32, sleeping: _i32):
    ti.loop_config(serialize=serial)
    for slot in range(position.shape[0]):
        bodies.position[slot] = position[slot]
        bodies.angle[slot] = angle[slot]
        bodies.velocity[slot] = velocity[slot]
        bodies.angular_velocity[slot] = angular_velocity[slot]
        bodies.sleeping[slot] = sleeping[slot]
        bodies.sleep_time[slot] = 0.0


def write_state(ctx, position, angle, velocity, angular_velocity, sleeping):
    """Poses, velocities and sleep flags of every slot (arrays of n_slots rows, float32 /
    int32); sleep timers restart."""
    _write_state(ctx.pool.bodies, ctx.serial, position, angle, velocity, angular_velocity,
                 sleeping)


@ti.func
def _wake_joint_bodies(joints: ti.template(), bodies: ti.template(), joint, world, n_bodies):
    for end in ti.static(range(2)):
        slot = world * n_bodies + (joints.parent[joint] if end == 0 else joints.child[joint])
        bodies.sleeping[slot] = 0
        bodies.sleep_time[slot] = 0.0


@ti.kernel
def _write_joint_target(joints: ti.template(), bodies: ti.template(), serial: ti.template(),
                        joint: ti.i32, n_joints: ti.i32, n_bodies: ti.i32, values: _f32):
    ti.loop_config(serialize=serial)
    for world in range(values.shape[0]):
        joints.target[world * n_joints + joint] = values[world]
        _wake_joint_bodies(joints, bodies, joint, world, n_bodies)


def write_joint_target(ctx, joint: int, values):
    """New motor targets of one joint, (n_worlds,) float32; a new target wakes its bodies."""
    _write_joint_target(ctx.pool.joints, ctx.pool.bodies, ctx.serial, joint, ctx.n_joints,
                        ctx.n_bodies, values)


@ti.kernel
def _write_joint_mode(joints: ti.template(), bodies: ti.template(), serial: ti.template(),
                      joint: ti.i32, n_joints: ti.i32, n_worlds: ti.i32, n_bodies: ti.i32,
                      mode: ti.i32, pid: ti.math.vec3, max_effort: ti.f32):
    joints.mode[joint] = mode
    joints.pid[joint] = pid
    joints.max_effort[joint] = max_effort
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        joints.pid_started[world * n_joints + joint] = 0  # restart integral and derivative
        _wake_joint_bodies(joints, bodies, joint, world, n_bodies)


def write_joint_mode(ctx, joint: int, mode: int, pid, max_effort: float):
    """A motor's mode, gains and effort limit; its PID restarts and its bodies wake in
    every world."""
    _write_joint_mode(ctx.pool.joints, ctx.pool.bodies, ctx.serial, joint, ctx.n_joints,
                      ctx.n_worlds, ctx.n_bodies, mode, pid, max_effort)


@ti.kernel
def _write_enabled(bodies: ti.template(), serial: ti.template(), slots: _i32, enabled: ti.i32):
    ti.loop_config(serialize=serial)
    for i in range(slots.shape[0]):
        slot = slots[i]
        if bodies.enabled[slot] != enabled:
            bodies.enabled[slot] = enabled
            bodies.sleeping[slot] = 0  # a body comes back awake
            bodies.sleep_time[slot] = 0.0


def write_enabled(ctx, slots, enabled: bool):
    """Enable or disable body slots (k,) int32; a body whose flag changes is awake (the
    colouring then sees a woken body, and a disabled one's pairs are gone)."""
    _write_enabled(ctx.pool.bodies, ctx.serial, slots, int(enabled))


@ti.kernel
def _write_filters(model: ti.template(), bodies: ti.template(), serial: ti.template(),
                   rows: _i32, n_worlds: ti.i32, n_bodies: ti.i32, groups: _i32,
                   categories: _i32, masks: _i32):
    ti.loop_config(serialize=serial)
    for i in range(rows.shape[0]):
        body = rows[i]
        model.collision_group[body] = groups[i]
        model.category_bits[body] = categories[i]
        model.mask_bits[body] = masks[i]
    ti.loop_config(serialize=serial)
    for k in range(rows.shape[0] * n_worlds):  # a sleeping body meets what it may now touch
        slot = (k // rows.shape[0]) * n_bodies + rows[k % rows.shape[0]]
        bodies.sleeping[slot] = 0
        bodies.sleep_time[slot] = 0.0


def write_filters(ctx, rows, groups, categories, masks):
    """The collision filters of model rows (k,) in every world (int32 arrays, the bits as
    int32); the bodies wake."""
    _write_filters(ctx.pool.model, ctx.pool.bodies, ctx.serial, rows, ctx.n_worlds,
                   ctx.n_bodies, groups, categories, masks)
