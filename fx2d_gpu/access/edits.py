"""Scene's edits of a built scene: written onto the device (transfer.py) and, for the
model's fields, into the host model every load uploads (Binding.edit), so that an edit
survives the scene leaving the pool and coming back.

Body slots are world-major: slot = world * n_bodies + body.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..device import residency, transfer
from ..device.residency import Binding
from ..model.builder import MATERIAL_FIELDS
from ..model.world_params import WorldParams
from ..model.world_shapes import WorldShapes
from ..physics.solver.context import StepContext
from ..physics.solver.sleep import wake_what_disabled_bodies_held
from . import world_resets

if TYPE_CHECKING:
    from ..model.builder import ModelBuilder


def upload_filters(ctx: StepContext, binding: Binding, builder: ModelBuilder, rows):
    """The builder's collision filters of bodies `rows` ((k,) indices) into the host model
    and onto the device (one launch for all of them); the candidate pairs are found afresh,
    as the filter decides them."""
    rows = np.asarray(rows, np.int64)
    bodies = [builder.bodies[r] for r in rows]
    groups = np.array([b.collision_group for b in bodies], np.int32)
    categories = np.array([b.category_bits for b in bodies], np.uint32).view(np.int32)
    masks = np.array([b.mask_bits for b in bodies], np.uint32).view(np.int32)
    binding.edit("model", rows, collision_group=groups, category_bits=categories, mask_bits=masks)
    transfer.write_filters(ctx, rows.astype(np.int32), groups, categories, masks)
    ctx.cache.pairs_fat = False


def upload_motor(
    ctx: StepContext,
    binding: Binding,
    builder: ModelBuilder,
    params: WorldParams,
    joint: int,
    motor,
):
    """`motor` (a builder.Joint's mode, pid and max_effort) as joint `joint`'s, in the host
    model and on the device (its gains, per joint slot, with the per-world values
    `params`)."""
    binding.edit("joints", joint, mode=motor.mode, pid=motor.pid, max_effort=motor.max_effort)
    upload_params(ctx, binding, builder, params)
    transfer.write_joint_mode(ctx, joint, motor.mode, motor.max_effort)


def upload_params(
    ctx: StepContext,
    binding: Binding,
    builder: ModelBuilder,
    params: WorldParams,
    world_shapes: WorldShapes | None = None,
):
    """The model rows that follow from the per-world values `params` (materials, gravity,
    PID gains) and, with `world_shapes`, from the per-world shapes (shape rows, grid
    cells), into the host model and onto the device: fields whole where any row may have
    changed (residency.write_resident), and where only a few worlds' rows changed (a vector
    env's restarts: WorldParams.device_rows, WorldShapes.device_rows) those rows alone, all
    of them in one launch (transfer.write_group_rows)."""
    entries = _params_rows(ctx, *binding.apply_params(builder, params))
    if world_shapes is not None:
        entries += _shape_rows(ctx, *binding.apply_shapes(builder, world_shapes))
    if entries:
        transfer.write_group_rows(entries)


def _params_rows(ctx: StepContext, arrays: dict, changed: dict | None) -> list:
    """Binding.apply_params' `arrays` onto the device: whole here where `changed` is None,
    else the changed rows' entries for transfer.write_group_rows."""
    if changed is None:
        residency.write_resident(ctx.pool, list(arrays.items()))
        return []
    slots, worlds = changed["slots"], changed["worlds"]
    model = arrays["model"]
    rows = {name: (slots, model[name][slots]) for name in MATERIAL_FIELDS}
    rows["uneven"] = (worlds, model["uneven"][worlds])
    rows["per_world"] = (np.zeros(1, np.int64), model["per_world"])
    entries = [(ctx.pool.group("model"), rows)]
    for group, name in (("model", "gravity"), ("joints", "pid")):
        if name in changed["whole"]:
            value = arrays[group][name]
            entries.append((ctx.pool.group(group), {name: (np.arange(len(value)), value)}))
    return entries


def _shape_rows(ctx: StepContext, arrays: dict, changed: tuple | None) -> list:
    """Binding.apply_shapes' `arrays` onto the device: whole here where `changed` is None,
    else the changed shape rows' and cells' entries for transfer.write_group_rows."""
    if changed is None:
        residency.write_resident(ctx.pool, list(arrays.items()))
        return []
    rows, cells = changed
    model = arrays["model"]
    fields = {
        name: (cells, value[cells]) if name == "world_cell" else (rows, value[rows])
        for name, value in model.items()
        if name != "shape_per_world"
    }
    fields["shape_per_world"] = (np.zeros(1, np.int64), model["shape_per_world"])
    return [(ctx.pool.group("model"), fields)]


@dataclass
class UnwrittenEdits:
    """Edits a scene stored on the host (per-world values, shapes, static placements) whose
    device writes wait for its next use of the device (Scene._context), where they are made
    together (write_unwritten): one upload of every row changed since and one wake launch,
    where each edit made its own. A vector env's restarts (fx2d/Levels-v0: four
    set_shape_params and a set_body_params) so pay one upload and one wake. Nothing reads
    the device without a context, so no reader sees the edits missing; the writes are the
    same ones, so the state after them is bit for bit the same.

    Attributes:
        values: per-world values changed (materials, masses, gravity, gains): upload_params.
        shapes: shapes changed: their rows and grid cells too, contacts not current.
        recheck: a change of inertia alone: resting contacts are checked again.
        wakes: (worlds (k,) indices, resized, statics (m,) indices | None, placed (k, m, 3)
            | None) of each set_shape_params that resized or placed (write_resized's).
    """

    values: bool = False
    shapes: bool = False
    recheck: bool = False
    wakes: list = field(default_factory=list)


def write_unwritten(
    ctx: StepContext,
    binding: Binding,
    builder: ModelBuilder,
    params: WorldParams,
    world_shapes: WorldShapes,
    unwritten: UnwrittenEdits,
    upload: bool = True,
):
    """`unwritten`'s device writes, together (see UnwrittenEdits): with `upload` (False
    where the model changed since and its build takes the values) the changed rows of
    `params` and `world_shapes` in one launch, then the wakes in one."""
    if upload and (unwritten.values or unwritten.shapes):
        upload_params(ctx, binding, builder, params, world_shapes if unwritten.shapes else None)
    if unwritten.shapes:
        ctx.cache.contacts_current = False  # a query runs the narrow phase first
    if unwritten.recheck:
        note_state_set(ctx.cache)  # resting contacts checked again
    if unwritten.wakes:
        write_resized(ctx, unwritten.wakes)


def write_resized(ctx: StepContext, wakes: list):
    """After set_shape_params, for each of `wakes` (worlds (k,) indices, resized, statics
    (m,) indices | None, placed (k, m, 3) | None: x, y, angle): every body of its worlds
    awake (nothing may sleep where it no longer rests), written as set_state(worlds=)
    writes a state, with its static bodies `statics` at `placed` (None: where they are);
    where `resized` their contacts are found afresh at the new sizes: no manifold of theirs
    is kept from before (contacts.reuse_manifold: found_margin 0) and their fat boxes are
    refitted (broad_phase.refit_fat_boxes). Warm starting goes on (the pairs are matched by
    their features). One launch for all of them (transfer.wake_slots), as the calls one by
    one would leave it: a static placed twice takes its later pose."""
    n = ctx.n_bodies
    woken = np.zeros(ctx.n_worlds, bool)
    refound = np.zeros(ctx.n_worlds, bool)
    slots, poses = [], []
    for worlds, resized, statics, placed in wakes:
        woken[worlds] = True
        refound[worlds] |= resized
        if placed is not None:
            slots.append((worlds[:, None] * n + statics[None, :]).reshape(-1))
            poses.append(np.reshape(placed, (-1, 3)))
    placed_slots = placed_poses = None
    if slots:
        later_first = np.concatenate(slots)[::-1]
        placed_slots, at = np.unique(later_first, return_index=True)
        placed_poses = np.concatenate(poses)[::-1][at]
    worlds = np.flatnonzero(woken)
    refind = np.flatnonzero(refound)
    transfer.wake_slots(
        ctx,
        (worlds[:, None] * n + np.arange(n)).reshape(-1),
        placed_slots,
        placed_poses,
        refind=refind if len(refind) else None,
    )
    note_world_rows_written(ctx, worlds, joints_in_place=False)


def upload_forces(ctx: StepContext, pending: dict[int, tuple[np.ndarray, np.ndarray]]):
    """The forces applied since the last step (body: (force (n_worlds, 2) N, torque
    (n_worlds,) N m)) onto the device, for the next step; `pending` is emptied."""
    if not pending:
        return
    bodies = sorted(pending)
    # One float32 table, world-major ((world, body) rows of force x, force y, torque): the
    # launch's one large array.
    pushes = np.empty((ctx.n_worlds, len(bodies), 3), np.float32)
    for column, body in enumerate(bodies):
        force, torque = pending[body]
        pushes[:, column, :2] = force
        pushes[:, column, 2] = torque
    transfer.scatter_forces(ctx, np.array(bodies, np.int32), pushes.reshape(-1, 3))
    pending.clear()


def write_state(ctx: StepContext, arrays: dict[str, np.ndarray]):
    """A checked State's arrays (builder.check_state) onto the device: poses (the previous
    pose too), velocities and sleep flags; contacts are found afresh at the new poses and
    the last step's events are forgotten."""
    transfer.write_state(
        ctx,
        arrays["position"],
        arrays["angle"],
        arrays["velocity"],
        arrays["angular_velocity"],
        arrays["sleeping"],
    )
    ctx.cache.contacts_current = False
    ctx.cache.forget_events()
    note_state_set(ctx.cache, asleep=bool(arrays["sleeping"].any()))
    ctx.edited.note(ctx.n_worlds)


def write_world_rows(
    ctx: StepContext,
    worlds: np.ndarray,
    arrays: dict[str, np.ndarray],
    targets: np.ndarray | None = None,
    joints_in_place: bool = False,
):
    """Checked rows of a State (world_resets.state_rows: k or 1 rows) into `worlds` only;
    with `targets` ((rows, n_joints) float32) a reset (Scene.reset_worlds: no pending
    forces, targets and PID state restarted, contacts forgotten). Contacts are then found
    afresh at the new poses and the last step's events are forgotten, as after set_state.
    An edit of those worlds (StepContext.edited), unless `joints_in_place`: the rows are the
    built initial state, where every joint holds."""
    if len(worlds) == 0:
        return
    world_resets.write_worlds(ctx, worlds, arrays, reset=targets is not None, targets=targets)
    asleep = bool(arrays["sleeping"].any())
    note_world_rows_written(ctx, worlds, joints_in_place, asleep=asleep)


def note_world_rows_written(
    ctx: StepContext, worlds: np.ndarray, joints_in_place: bool, asleep: bool = False
):
    """The host's side of writing the rows of `worlds` ((k,) indices, k > 0) on the device
    (write_world_rows, write_resized, and a vector env's restarts written by its own kernel:
    envs/device_step.py; `asleep`: some body was written asleep): their contacts are found
    afresh, the last step's events are forgotten, and, unless `joints_in_place`, they are
    noted as edited (their joints rejoined from where the bodies are)."""
    ctx.cache.contacts_current = False
    ctx.cache.forget_events()
    note_state_set(ctx.cache, asleep)
    if not joints_in_place:
        ctx.edited.note(ctx.n_worlds, worlds)


def note_state_set(cache, asleep: bool = True):
    """A StepCache's note that rows of the state were written by hand (`asleep`: some body
    was written asleep): the next report holds no pair by last step's list, and where a body
    was written asleep it first checks last step's resting pairs at the new poses
    (StepCache.resting_recheck; solver/reporting.py)."""
    cache.state_set = True
    cache.resting_recheck = cache.resting_recheck or asleep


def write_enabled(ctx: StepContext, bodies: np.ndarray, worlds: np.ndarray, enabled: np.ndarray):
    """Bodies `bodies` ((k,) indices) in worlds `worlds` ((m,) indices) in or out of the
    simulation, as `enabled` ((m, k) bool) says, in one launch. Put back, a body's joints
    hold again from wherever it and its partners are: those worlds are rejoined
    (StepContext.edited; solver/rejoined_joints.py)."""
    slots = (worlds[:, None] * ctx.n_bodies + bodies[None, :]).reshape(-1)
    transfer.write_enabled(ctx, slots.astype(np.int32), enabled.reshape(-1).astype(np.int32))
    if not enabled.all():
        wake_what_disabled_bodies_held(ctx)
    if enabled.any():
        ctx.edited.note(ctx.n_worlds, worlds[enabled.any(axis=1)], rejoined=True)
