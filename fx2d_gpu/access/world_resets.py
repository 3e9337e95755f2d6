"""Writing some worlds of a batch and no others: Scene.reset_worlds (an episode's end),
Scene.set_state(state, worlds=...), and the reset of faulty worlds (solver/faults.py).

One launch writes the chosen worlds' rows; every other world's device state is left as it
was, bit for bit, so the other worlds step on exactly as if nothing had happened. A world is
addressed by its row in the source arrays (`source_row`, (n_worlds,) int32, -1: not
written): the source holds one row of n_bodies bodies (and n_joints joints) per row, so one
row (a scene's built initial state) can serve every reset world.
"""

from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from ..model.builder import check_state
from ..records import State

if TYPE_CHECKING:
    from ..model.builder import ModelBuilder
    from ..physics.solver.context import StepContext

vec2 = ti.math.vec2
_I32 = ti.types.ndarray(dtype=ti.i32, ndim=1)
_F32 = ti.types.ndarray(dtype=ti.f32, ndim=1)
_VEC2 = ti.types.ndarray(dtype=vec2, ndim=1)
_NO_TARGETS = np.zeros(1, np.float32)  # an ndarray argument must not be empty


@ti.kernel
def _write_worlds(
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    serial: ti.template(),
    reset: ti.template(),
    source_row: _I32,
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_joints: ti.i32,
    n_pairs: ti.i32,
    position: _VEC2,
    angle: _F32,
    velocity: _VEC2,
    angular_velocity: _F32,
    sleeping: _I32,
    target: _F32,
):
    """The worlds with source_row >= 0 take their source row's poses, velocities and sleep
    flags (sleep timers, islands and support restart); with `reset` (compiled in) also no pending
    force, their motors' targets restarted (the source's) with their PID state, and their
    contacts forgotten (no points, no warm-start impulses)."""
    ti.loop_config(serialize=serial)
    for slot in range(n_worlds * n_bodies):
        row = source_row[slot // n_bodies]
        if row >= 0:
            source = row * n_bodies + slot % n_bodies
            bodies.position[slot] = position[source]
            bodies.angle[slot] = angle[source]
            bodies.velocity[slot] = velocity[source]
            bodies.angular_velocity[slot] = angular_velocity[source]
            bodies.sleeping[slot] = sleeping[source]
            bodies.sleep_time[slot] = 0.0
            bodies.island[slot] = slot
            bodies.support[slot] = 0  # (contacts.UNSUPPORTED: counted again, as in a new scene)
            if ti.static(reset):
                bodies.force[slot] = vec2(0.0, 0.0)
                bodies.torque[slot] = 0.0
    if ti.static(reset):
        ti.loop_config(serialize=serial)
        for joint_slot in range(n_worlds * n_joints):
            row = source_row[joint_slot // n_joints]
            if row >= 0:
                joints.target[joint_slot] = target[row * n_joints + joint_slot % n_joints]
                joints.integral[joint_slot] = 0.0
                joints.prev_error[joint_slot] = 0.0
                joints.pid_started[joint_slot] = 0
                joints.soft_impulse[joint_slot] = ti.math.vec4(0.0)
        ti.loop_config(serialize=serial)
        for pair in range(n_pairs):  # the world's contacts and their (maybe NaN) impulses go
            if source_row[manifolds.body_a[pair] // n_bodies] >= 0:
                manifolds.point_count[pair] = 0
                manifolds.found_margin[pair] = 0.0  # found afresh, not kept
                for i in ti.static(range(2)):
                    manifolds.normal_impulse[pair, i] = 0.0
                    manifolds.tangent_impulse[pair, i] = 0.0


def _rows(worlds: np.ndarray, n_worlds: int, one_source: bool) -> np.ndarray:
    """source_row: (n_worlds,) int32, world worlds[i]'s row i (0 for all with one_source),
    -1 for the other worlds."""
    source_row = np.full(n_worlds, -1, np.int32)
    source_row[worlds] = 0 if one_source else np.arange(len(worlds), dtype=np.int32)
    return source_row


def write_worlds(
    ctx: "StepContext",
    worlds: np.ndarray,
    arrays: dict[str, np.ndarray],
    *,
    reset: bool,
    targets: np.ndarray | None = None,
):
    """Write `worlds` ((k,) int64, unique) from `arrays` (position (r, n_bodies, 2), angle,
    velocity, angular_velocity, sleeping (r, n_bodies); r = 1 (every world that row) or k);
    with `reset` also targets ((r, n_joints) float32) and PID state, no pending force, the
    contacts forgotten. One launch; the other worlds are not touched. (The step cache is the
    caller's: Scene's calls look at the contacts afresh, as after set_state.)"""
    rows, nb, nj = len(arrays["angle"]), ctx.n_bodies, ctx.n_joints
    source_row = _rows(worlds, ctx.n_worlds, rows == 1)
    if targets is None or targets.size == 0:
        targets = _NO_TARGETS
    pool = ctx.pool
    _write_worlds(
        pool.bodies,
        pool.joints,
        pool.manifolds,
        ctx.serial,
        reset,
        source_row,
        ctx.n_worlds,
        nb,
        nj,
        ctx.n_pairs,
        np.ascontiguousarray(arrays["position"].reshape(rows * nb, 2), np.float32),
        np.ascontiguousarray(arrays["angle"].reshape(-1), np.float32),
        np.ascontiguousarray(arrays["velocity"].reshape(rows * nb, 2), np.float32),
        np.ascontiguousarray(arrays["angular_velocity"].reshape(-1), np.float32),
        np.ascontiguousarray(arrays["sleeping"].reshape(-1), np.int32),
        np.ascontiguousarray(targets.reshape(-1), np.float32),
    )


def state_rows(
    state: State, worlds: np.ndarray, n_worlds: int, n_bodies: int, name: str = "state"
) -> dict[str, np.ndarray]:
    """The rows of `state` for `worlds` ((k,) indices), checked as set_state checks a State
    (builder.check_state): a State of n_worlds rows (the worlds' own rows are taken) or of
    k rows (one per world, in order).

    Raises:
        TypeError: `state` is not a fx2d_gpu.State, or an array not of real numbers.
        ValueError: arrays of neither n_worlds nor k rows, or values check_state refuses.
    """
    if not isinstance(state, State):
        raise TypeError(f"{name} must be a fx2d_gpu.State, got {type(state).__name__}")
    rows = np.shape(state.angle)[0] if np.ndim(state.angle) == 2 else None
    if rows == n_worlds:
        arrays = check_state(state, n_worlds, n_bodies)
        return {key: value[worlds] for key, value in arrays.items()}
    if rows != len(worlds):
        raise ValueError(
            f"{name} must hold {n_worlds} worlds (n_worlds) or {len(worlds)} "
            f"(one per world given), got {name}.angle of shape "
            f"{np.shape(state.angle)}"
        )
    return check_state(state, len(worlds), n_bodies)


def reset_rows(
    state, worlds: np.ndarray, ctx: "StepContext", builder: "ModelBuilder", binding
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Scene.reset_worlds' source: (rows of a State, awake; motor targets (rows, n_joints)
    float32) for `worlds` from `state` (None: the builder's initial state, one row for
    all; a State; a SceneSnapshot of this scene), checked whole.

    Raises:
        TypeError: `state` of another type.
        ValueError: a State or snapshot that does not fit this scene (naming it).
    """
    from .snapshots import SceneSnapshot  # (snapshots imports the scene's modules)
    from .state_files import scene_fingerprint

    nb, nj, n_worlds = ctx.n_bodies, ctx.n_joints, ctx.n_worlds
    if state is None:
        initial = builder.initial_state(1)
        bodies = initial["bodies"]
        rows = {
            "position": bodies["position"].reshape(1, nb, 2),
            "angle": bodies["angle"].reshape(1, nb),
            "velocity": bodies["velocity"].reshape(1, nb, 2),
            "angular_velocity": bodies["angular_velocity"].reshape(1, nb),
        }
        targets = initial["joints"]["target"].reshape(1, nj)
    elif isinstance(state, SceneSnapshot):
        if (
            state.fingerprint != scene_fingerprint(binding)
            or state.n_worlds != n_worlds
            or state.n_bodies != nb
            or state.n_joints != nj
        ):
            raise ValueError(
                "state: a snapshot of another scene (other bodies, joints or n_worlds)"
            )
        try:
            bodies = state.device["bodies"]
            snapshot_state = State(
                position=np.asarray(bodies["position"]).reshape(n_worlds, nb, 2),
                angle=np.asarray(bodies["angle"]).reshape(n_worlds, nb),
                velocity=np.asarray(bodies["velocity"]).reshape(n_worlds, nb, 2),
                angular_velocity=np.asarray(bodies["angular_velocity"]).reshape(n_worlds, nb),
                sleeping=np.zeros((n_worlds, nb), bool),
            )
            targets = np.asarray(state.device["joints"]["target"], np.float64).reshape(
                n_worlds, nj
            )[worlds]
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(
                f"state: a snapshot whose poses or targets do not fit this scene ({error})"
            ) from None
        rows = state_rows(snapshot_state, worlds, n_worlds, nb, "state")
        _check_targets(targets, builder)
    else:
        rows = state_rows(state, worlds, n_worlds, nb, "state")
        targets = np.tile(builder.initial_state(1)["joints"]["target"], (len(worlds), 1))
    rows = {key: value for key, value in rows.items() if key != "sleeping"}
    rows["sleeping"] = np.zeros(rows["angle"].shape, np.int32)  # awake
    return rows, np.asarray(targets, np.float32).reshape(len(rows["angle"]), nj)


def _check_targets(targets: np.ndarray, builder: "ModelBuilder"):
    """Motor targets ((k, n_joints)) within what each joint's motor may be given now."""
    from ..model.builder import TARGET_LIMITS

    for joint, spec in enumerate(builder.joints):
        column = targets[:, joint]
        limit = TARGET_LIMITS[spec.mode]
        if not (np.isfinite(column).all() and (np.abs(column) < limit).all()):
            raise ValueError(
                f"state: joint {joint}'s targets in the snapshot are not finite "
                f"or beyond +-{limit:g} (its motor's mode)"
            )


def reset_faulty_worlds(ctx: "StepContext", worlds: np.ndarray, initial: dict):
    """Worlds `worlds` ((k,) indices) back to their initial state (`initial`: one world's
    rows of the builder's initial state): poses, velocities, motor targets and PID state,
    no forces, awake, its contacts forgotten. The other worlds are not touched."""
    bodies, nb = initial["bodies"], ctx.n_bodies
    rows = {
        "position": bodies["position"].reshape(1, nb, 2),
        "angle": bodies["angle"].reshape(1, nb),
        "velocity": bodies["velocity"].reshape(1, nb, 2),
        "angular_velocity": bodies["angular_velocity"].reshape(1, nb),
        "sleeping": np.zeros((1, nb), np.int32),
    }
    write_worlds(ctx, worlds, rows, reset=True, targets=initial["joints"]["target"].reshape(1, -1))
