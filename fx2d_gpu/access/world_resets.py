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

from ..device import transfer
from ..model.builder import check_state
from ..records import State

if TYPE_CHECKING:
    from ..model.builder import ModelBuilder
    from ..model.world_shapes import WorldShapes
    from ..physics.solver.context import StepContext


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
    sleep timers, islands and support restart; with `reset` also targets ((r, n_joints)
    float32) and PID state, no pending force, the contacts forgotten. One launch
    (transfer.write_rows); the other worlds are not touched. (The step cache is the
    caller's: Scene's calls look at the contacts afresh, as after set_state.)"""
    source_row = _rows(worlds, ctx.n_worlds, len(arrays["angle"]) == 1)
    table = transfer.state_table(
        arrays["position"],
        arrays["angle"],
        arrays["velocity"],
        arrays["angular_velocity"],
        arrays["sleeping"],
    )
    if targets is not None:
        targets = np.ascontiguousarray(targets.reshape(-1), np.float32)
    transfer.write_rows(ctx, source_row, table, restart_islands=True, reset=reset, targets=targets)


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
    state,
    worlds: np.ndarray,
    ctx: "StepContext",
    builder: "ModelBuilder",
    binding,
    world_shapes: "WorldShapes | None" = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Scene.reset_worlds' source: (rows of a State, awake; motor targets (rows, n_joints)
    float32) for `worlds` from `state` (None: the builder's initial state, one row for
    all, or with static bodies placed per world (`world_shapes`' poses) one row per world;
    a State; a SceneSnapshot of this scene), checked whole.

    Raises:
        TypeError: `state` of another type.
        ValueError: a State or snapshot that does not fit this scene (naming it).
    """
    from .snapshots import SceneSnapshot  # (snapshots imports the scene's modules)
    from .state_files import scene_fingerprint

    nb, nj, n_worlds = ctx.n_bodies, ctx.n_joints, ctx.n_worlds
    if state is None:
        if world_shapes is not None and world_shapes.poses:
            initial = world_shapes.initial_state(builder, worlds)
        else:
            initial = builder.initial_state(1)
        bodies = initial["bodies"]
        k = len(bodies["angle"]) // max(nb, 1)
        rows = {
            "position": bodies["position"].reshape(k, nb, 2),
            "angle": bodies["angle"].reshape(k, nb),
            "velocity": bodies["velocity"].reshape(k, nb, 2),
            "angular_velocity": bodies["angular_velocity"].reshape(k, nb),
        }
        targets = initial["joints"]["target"].reshape(k, nj)
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
    """Worlds `worlds` ((k,) indices) back to their initial state (`initial`: the builder's
    initial state of one world, for all, or of k, one per world: WorldShapes.initial_state):
    poses, velocities, motor targets and PID state, no forces, awake, its contacts
    forgotten. The other worlds are not touched."""
    bodies, nb = initial["bodies"], ctx.n_bodies
    k = len(bodies["angle"]) // max(nb, 1)
    rows = {
        "position": bodies["position"].reshape(k, nb, 2),
        "angle": bodies["angle"].reshape(k, nb),
        "velocity": bodies["velocity"].reshape(k, nb, 2),
        "angular_velocity": bodies["angular_velocity"].reshape(k, nb),
        "sleeping": np.zeros((k, nb), np.int32),
    }
    write_worlds(ctx, worlds, rows, reset=True, targets=initial["joints"]["target"].reshape(k, -1))
