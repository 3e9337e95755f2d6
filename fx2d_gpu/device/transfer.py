"""Moving data between NumPy arrays on the host and the pool's fields on the device.

Group transfers (write_groups, read_groups): any named fields of any groups (device.py)
written or read in one kernel launch, for residency's loads and saves and Scene's reads;
a row transfer (write_group_rows) the same for given entries alone, for a few worlds' rows
of thousands (a vector env's restarts).
Scatter kernels: NumPy arrays taken as ndarray arguments (compiled once), for Scene's writes
between steps: applied forces, a new state, motor targets and modes, enabled flags, filters.
write_rows is the one kernel that writes bodies' state rows: set_state's (write_state), and
some worlds' (access/world_resets.py: reset_worlds, set_state(worlds=), faulty worlds).
"""

import math
import weakref
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
import taichi as ti

from .launching import quick

if TYPE_CHECKING:
    from ..physics.solver.context import StepContext

if TYPE_CHECKING:
    from . import FieldGroup

_F32_ARRAY = ti.types.ndarray(dtype=ti.f32, ndim=1)
_I32_ARRAY = ti.types.ndarray(dtype=ti.i32, ndim=1)
_F32_TABLE = ti.types.ndarray(dtype=ti.f32, ndim=2)


def write_groups(
    arrays: list[tuple["FieldGroup", dict[str, np.ndarray]]],
    clear_to: list[dict[str, int]] | None = None,
):
    """For each (group, {name: value}): the group's field name [:len(value)] = value and 0 in
    the rest of it (a 0-d field takes one value); with clear_to (per entry of arrays,
    {name: entries}), 0 only up to that many entries of the field, the rest left as it is
    (residency's loads: beyond what any scene wrote, the pool's fields are still 0, and
    clearing a whole field costs its capacity, not the scene's size). One kernel launch for
    all of them, compiled once per set of groups and names: Taichi's from_numpy compiles a
    kernel for every field it fills (~50 ms each with an empty offline cache, 40 of them in
    a small scene's first step), and every kernel instance costs its compile."""
    fields, values, clears = [], [], []
    for k, (group, named) in enumerate(arrays):
        for name, value in named.items():
            field, value = getattr(group, name), np.asarray(value)
            shape = _shape(field)
            count = len(value) if shape.dims else 1
            if count > shape.entries or value.size != count * shape.width:
                raise ValueError(
                    f"{type(group).__name__}.{name}: a value of shape "
                    f"{value.shape} does not fit the field's "
                    f"{(shape.entries,) + shape.element_shape}"
                )
            fields.append(field)
            values.append(value)
            clear = shape.entries if clear_to is None else clear_to[k][name]
            clears.append(min(max(int(clear), count), shape.entries))
    if not fields:
        return
    floats, ints, layout = _pack(fields, values, None, clears)
    _move_fields(*_template_of(arrays), floats, ints, layout, max(clears), True)


def read_groups(
    extents: list[tuple["FieldGroup", dict[str, int | None]]],
) -> list[dict[str, np.ndarray]]:
    """For each (group, {name: extent}): {name: a copy of the field's [:extent]} (the whole
    field for None; a 0-d field's value as a 0-d array), NumPy arrays of the fields'
    dtypes; one kernel launch for all of them (see write_groups)."""
    fields, counts = [], []
    for group, named in extents:
        for name, extent in named.items():
            field = getattr(group, name)
            fields.append(field)
            counts.append(
                _shape(field).entries if extent is None else min(int(extent), _shape(field).entries)
            )
    if not fields:
        return [{} for _ in extents]
    floats, ints, layout = _pack(fields, None, counts, counts)
    _move_fields(*_template_of(extents), floats, ints, layout, max(counts), False)
    out, f = [], 0
    for _, named in extents:
        values = {}
        for name in named:
            shape = _shape(fields[f])
            flat = floats if shape.floating else ints
            start, count = int(layout[_LAYOUT * f]), int(layout[_LAYOUT * f + 1])
            value = flat[start : start + count * shape.width]
            values[name] = (
                value.reshape((count,) + shape.element_shape).copy()
                if shape.dims
                else np.array(value.reshape(shape.element_shape))
            )
            f += 1
        out.append(values)
    return out


def write_group_rows(arrays: list[tuple["FieldGroup", dict[str, tuple[np.ndarray, np.ndarray]]]]):
    """For each (group, {name: (rows, value)}): the group's field name takes value[i] at
    entry rows[i] (rows: (k,) indices along its first dimension; value: (k, *element); a
    0-d field: rows [0]) and is left as it is elsewhere: a few worlds' rows written, not
    the field whole (write_groups). One kernel launch for all of them."""
    fields, values, rows = [], [], []
    for group, named in arrays:
        for name, (at, value) in named.items():
            field = getattr(group, name)
            fields.append(field)
            values.append(np.asarray(value))
            count = len(values[-1]) if _shape(field).dims else 1
            rows.append(_checked_rows(group, name, at, count))
    if fields:
        floats, ints, layout = _pack(fields, values, None, _row_starts(rows))
        all_rows = np.concatenate(rows + [np.zeros(1, np.int32)])
        most = max(len(r) for r in rows)
        _scatter_fields(*_template_of(arrays), floats, ints, all_rows, layout, most)


def _checked_rows(group, name: str, rows, count: int) -> np.ndarray:
    """`rows` as int32 indices of field `name`'s entries, one per value (count)."""
    rows = np.asarray(rows, np.int64).reshape(-1)
    entries = _shape(getattr(group, name)).entries
    if len(rows) != count or (len(rows) and (rows.min() < 0 or rows.max() >= entries)):
        raise ValueError(
            f"{type(group).__name__}.{name}: {len(rows)} rows for {count} values, each "
            f"in [0, {entries})"
        )
    return rows.astype(np.int32)


def _row_starts(rows: list[np.ndarray]) -> list[int]:
    """Where each field's rows start in the rows the kernel takes (_pack's third column)."""
    return np.concatenate([[0], np.cumsum([len(r) for r in rows])[:-1]]).astype(int).tolist()


def _template_of(entries) -> tuple[tuple, tuple]:
    """The kernels' template arguments for [(group, {name: ...})]: the groups and, per
    group, its names."""
    return (tuple(group for group, _ in entries), tuple(tuple(named) for _, named in entries))


class _Shape(NamedTuple):
    """A field's layout as the transfers see it (see _shape)."""

    entries: int  # along its first dimension (1 for a 0-d field)
    element_shape: tuple  # of one first-dimension entry, as NumPy sees it
    components: int  # numbers in one element (a vector field's n, else 1)
    columns: int  # a 2-D field's second dimension (1 otherwise)
    width: int  # numbers in one first-dimension entry
    floating: bool  # f32 (else i32)
    dims: int  # 0 for a 0-d field


#: Each field's _Shape: Taichi's field.shape and dtype cost ~4 us a call, and a scene's
#: load or save asks them of ~80 fields several times (~4 ms a switch of a small scene).
_SHAPES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _shape(field) -> _Shape:
    """The field's _Shape, looked up once."""
    known = _SHAPES.get(field)
    if known is None:
        shape = tuple(field.shape)
        components = field.n if hasattr(field, "n") else 1
        element = shape[1:] + ((components,) if hasattr(field, "n") else ())
        known = _Shape(
            entries=shape[0] if shape else 1,
            element_shape=element,
            components=components,
            columns=shape[1] if len(shape) == 2 else 1,
            width=math.prod(element),
            floating=field.dtype == ti.f32,
            dims=len(shape),
        )
        _SHAPES[field] = known
    return known


#: Numbers per field in _pack's layout: offset in its flat array, entries, entries to reach.
_LAYOUT = 3


def _pack(fields, values, counts, reach):
    """Flat float32 and int32 host arrays holding each field's value (values[f]; with
    values None, zeros with room for counts[f] entries), each field in the array of its
    dtype, one after the other, and layout: per field its offset in that array, its entries
    and reach[f], the entries the kernel visits (written: value, then 0)."""
    chunks = {np.float32: [], np.int32: []}
    filled = {np.float32: 0, np.int32: 0}
    layout = np.zeros(_LAYOUT * len(fields), np.int32)
    for f, field in enumerate(fields):
        dtype = np.float32 if _shape(field).floating else np.int32
        if values is None:
            count = counts[f]
            chunk = np.zeros(count * _shape(field).width, dtype)
        else:
            value = np.asarray(values[f])
            count = len(value) if _shape(field).dims else 1
            chunk = value.astype(dtype, copy=False).reshape(-1)
        chunks[dtype].append(chunk)
        layout[_LAYOUT * f], layout[_LAYOUT * f + 1] = filled[dtype], count
        layout[_LAYOUT * f + 2] = reach[f]
        filled[dtype] += chunk.size
    # Taichi refuses an empty array argument: each holds at least one number.
    floats = np.concatenate(chunks[np.float32] + [np.zeros(1, np.float32)])
    ints = np.concatenate(chunks[np.int32] + [np.zeros(1, np.int32)])
    return floats, ints, layout


@ti.func
def _fill_entry(field: ti.template(), flat: ti.template(), start, count, i):
    """field's entry i (0-d: its value) = flat[start:...] if i < count (row-major,
    components last), else 0."""
    columns, components = ti.static(_shape(field).columns, _shape(field).components)
    inside = i < count
    for j in ti.static(range(columns)):
        at = start + (i * columns + j) * components
        for c in ti.static(range(components)):
            value = ti.cast(0, field.dtype)
            if inside:
                value = flat[at + c]
            _set(field, (i, j), c, value)


@ti.func
def _copy_entry(field: ti.template(), flat: ti.template(), start, count, i):
    """flat[start:...] = field's entry i (0-d: its value) if i < count."""
    columns, components = ti.static(_shape(field).columns, _shape(field).components)
    if i < count:
        for j in ti.static(range(columns)):
            at = start + (i * columns + j) * components
            for c in ti.static(range(components)):
                flat[at + c] = _get(field, (i, j), c)


@ti.func
def _get(field: ti.template(), index: ti.template(), c: ti.template()):
    """Component c of field's element `index` ((), (i, j) of which j is dropped for a 1-D
    field)."""
    value = ti.cast(0, field.dtype)
    if ti.static(len(field.shape) == 0):
        if ti.static(hasattr(field, "n")):
            value = field[None][c]
        else:
            value = field[None]
    elif ti.static(len(field.shape) == 1):
        if ti.static(hasattr(field, "n")):
            value = field[index[0]][c]
        else:
            value = field[index[0]]
    else:
        if ti.static(hasattr(field, "n")):
            value = field[index][c]
        else:
            value = field[index]
    return value


@ti.func
def _set(field: ti.template(), index: ti.template(), c: ti.template(), value):
    """Component c of field's element `index` = value (index as in _get)."""
    if ti.static(len(field.shape) == 0):
        if ti.static(hasattr(field, "n")):
            field[None][c] = value
        else:
            field[None] = value
    elif ti.static(len(field.shape) == 1):
        if ti.static(hasattr(field, "n")):
            field[index[0]][c] = value
        else:
            field[index[0]] = value
    else:
        if ti.static(hasattr(field, "n")):
            field[index][c] = value
        else:
            field[index] = value


def _fields_of(groups, names) -> tuple:
    """The named fields of the groups, in order (the order of _pack's layout)."""
    return tuple(
        getattr(group, name)
        for group, group_names in zip(groups, names, strict=True)
        for name in group_names
    )


# One loop over the entries any field needs, every field's entry in its body: on the CPU
# each top-level loop is compiled as a function of its own, ~10 ms apiece even from the
# offline cache, and a group has up to 24 fields.
@quick
@ti.kernel
def _move_fields(
    groups: ti.template(),
    names: ti.template(),
    floats: _F32_ARRAY,
    ints: _I32_ARRAY,
    layout: _I32_ARRAY,
    n_entries: ti.i32,
    to_device: ti.template(),
):
    """The named fields of the groups from the flat arrays (to_device: write_groups) or into
    them (read_groups); layout as _pack makes it; n_entries: the most entries any field's
    layout reaches."""
    fields = ti.static(_fields_of(groups, names))
    for i in range(n_entries):
        for f in ti.static(range(len(fields))):
            field = ti.static(fields[f])
            flat = ti.static(floats if field.dtype == ti.f32 else ints)
            if i < ti.static(_shape(field).entries) and i < layout[_LAYOUT * f + 2]:
                if ti.static(to_device):
                    _fill_entry(field, flat, layout[_LAYOUT * f], layout[_LAYOUT * f + 1], i)
                else:
                    _copy_entry(field, flat, layout[_LAYOUT * f], layout[_LAYOUT * f + 1], i)


@quick
@ti.kernel
def _scatter_fields(
    groups: ti.template(),
    names: ti.template(),
    floats: _F32_ARRAY,
    ints: _I32_ARRAY,
    rows: _I32_ARRAY,
    layout: _I32_ARRAY,
    n_rows: ti.i32,
):
    """The named fields' entries at their rows from the flat arrays (write_group_rows);
    layout as _pack makes it, its third column where each field's rows start in `rows`;
    n_rows: the most rows of a field."""
    fields = ti.static(_fields_of(groups, names))
    for i in range(n_rows):
        for f in ti.static(range(len(fields))):
            field = ti.static(fields[f])
            flat = ti.static(floats if field.dtype == ti.f32 else ints)
            if i < layout[_LAYOUT * f + 1]:
                entry = rows[layout[_LAYOUT * f + 2] + i]
                at = layout[_LAYOUT * f] + i * ti.static(_shape(field).width)
                columns, components = ti.static(_shape(field).columns, _shape(field).components)
                for j in ti.static(range(columns)):
                    for c in ti.static(range(components)):
                        _set(field, (entry, j), c, flat[at + j * components + c])


@quick
@ti.kernel
def _scatter_forces(
    bodies: ti.template(),
    serial: ti.template(),
    rows: _I32_ARRAY,
    pushes: _F32_TABLE,
    n_bodies: ti.i32,
):
    ti.loop_config(serialize=serial)
    for i in range(pushes.shape[0]):
        slot = i // rows.shape[0] * n_bodies + rows[i % rows.shape[0]]
        add_push(bodies, slot, ti.math.vec2(pushes[i, 0], pushes[i, 1]), pushes[i, 2])


@ti.func
def add_push(bodies: ti.template(), slot, force, torque):
    """Force (N, float32 vec2) and torque (N m) added to body slot's applied ones for the
    next step; a push wakes a sleeping body. The one place a push lands (_scatter_forces,
    and a vector env's actions on the device: envs/device_step.py)."""
    bodies.force[slot] += force
    bodies.torque[slot] += torque
    if force.norm() > 0.0 or torque != 0.0:
        bodies.sleeping[slot] = 0
        bodies.sleep_time[slot] = 0.0


def scatter_forces(ctx: "StepContext", rows: np.ndarray, pushes: np.ndarray):
    """Add forces and torques to the bodies `rows` ((k,) int32 model rows) of every world for
    the next step: pushes (n_worlds * k, 3) float32, world-major, each (force x, force y
    (N), torque (N m)). A push wakes a sleeping body. One launch of two host arrays (on a
    GPU each is copied there and back: launching.host_array_count), the slots worked out on
    the device."""
    _scatter_forces(ctx.pool.bodies, ctx.serial, rows, pushes, ctx.n_bodies)
    ctx.cache.forces_on_device = True


@quick
@ti.kernel
def _write_rows(
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    serial: ti.template(),
    restart_islands: ti.template(),
    reset: ti.template(),
    source_row: _I32_ARRAY,
    n_bodies: ti.i32,
    n_joints: ti.i32,
    n_pairs: ti.i32,
    rows: _F32_TABLE,
    target: _F32_ARRAY,
):
    """The worlds with source_row >= 0 (source_row: (n_worlds,)) take their source row's
    poses, velocities and sleep flags, sleep timers restarting; with `restart_islands`
    (compiled in) their islands and support restart too; with `reset` (compiled in) also no
    pending force, their motors' targets restarted (the source's) with their PID state, and
    their contacts forgotten (no points, no warm-start impulses). See write_rows."""
    ti.loop_config(serialize=serial)
    for slot in range(source_row.shape[0] * n_bodies):
        row = source_row[slot // n_bodies]
        if row >= 0:
            source = row * n_bodies + slot % n_bodies
            write_body_row(
                bodies,
                slot,
                ti.math.vec2(rows[source, 0], rows[source, 1]),
                rows[source, 2],
                ti.math.vec2(rows[source, 3], rows[source, 4]),
                rows[source, 5],
                ti.cast(rows[source, 6], ti.i32),
                restart_islands,
                reset,
            )
    if ti.static(reset):
        ti.loop_config(serialize=serial)
        for joint_slot in range(source_row.shape[0] * n_joints):
            row = source_row[joint_slot // n_joints]
            if row >= 0:
                restart_joint(joints, joint_slot, target[row * n_joints + joint_slot % n_joints])
        ti.loop_config(serialize=serial)
        for pair in range(n_pairs):
            if source_row[manifolds.body_a[pair] // n_bodies] >= 0:
                forget_contact(manifolds, pair)


@ti.func
def write_body_row(
    bodies: ti.template(),
    slot,
    position,
    angle,
    velocity,
    angular_velocity,
    sleeping,
    restart_islands: ti.template(),
    reset: ti.template(),
):
    """Body slot's pose (m, rad), velocity (m/s, rad/s) and sleep flag written, its sleep
    timer restarting; with `restart_islands` (compiled in) its island and support restart,
    as in a new scene; with `reset` (compiled in) also no pending force. The one write of a
    body's state row (_write_rows, and a vector env's restarts on the device:
    envs/device_step.py)."""
    bodies.position[slot] = position
    bodies.angle[slot] = angle
    bodies.velocity[slot] = velocity
    bodies.angular_velocity[slot] = angular_velocity
    bodies.sleeping[slot] = sleeping
    bodies.sleep_time[slot] = 0.0
    if ti.static(restart_islands):
        bodies.island[slot] = slot
        bodies.support[slot] = 0  # (contacts.UNSUPPORTED: counted again, as in a new scene)
    if ti.static(reset):
        bodies.force[slot] = ti.math.vec2(0.0, 0.0)
        bodies.torque[slot] = 0.0


@ti.func
def restart_joint(joints: ti.template(), joint_slot, target):
    """Joint slot's motor target set (a reset's) and its PID state and warm start restarted."""
    joints.target[joint_slot] = target
    joints.integral[joint_slot] = 0.0
    joints.prev_error[joint_slot] = 0.0
    joints.pid_started[joint_slot] = 0
    joints.soft_impulse[joint_slot] = ti.math.vec4(0.0)


@ti.func
def forget_contact(manifolds: ti.template(), pair):
    """Pair's contact forgotten by a reset of its world: no points, no warm-start impulses
    (maybe NaN after a fault), found afresh next step, not kept."""
    manifolds.point_count[pair] = 0
    manifolds.found_margin[pair] = 0.0
    for i in ti.static(range(2)):
        manifolds.normal_impulse[pair, i] = 0.0
        manifolds.tangent_impulse[pair, i] = 0.0


@quick
@ti.kernel
def _wake_slots(
    bodies: ti.template(),
    manifolds: ti.template(),
    grid: ti.template(),
    serial: ti.template(),
    slots: _I32_ARRAY,
    placed_slots: _I32_ARRAY,
    placed: _F32_TABLE,
    n_placed: ti.i32,
    refind: ti.i32,
    resized: _I32_ARRAY,
    n_pairs: ti.i32,
    n_bodies: ti.i32,
):
    ti.loop_config(serialize=serial)
    for pair in range(n_pairs):
        if resized[manifolds.body_a[pair] // n_bodies] != 0:
            manifolds.found_margin[pair] = 0.0  # found afresh: no manifold kept
    ti.loop_config(serialize=serial)
    for i in range(slots.shape[0]):
        slot = slots[i]
        write_body_row(
            bodies,
            slot,
            bodies.position[slot],
            bodies.angle[slot],
            bodies.velocity[slot],
            bodies.angular_velocity[slot],
            0,
            True,
            False,
        )
        if refind != 0:
            if resized[slot // n_bodies] != 0:
                # Asleep and not colliding (broad_phase.pairing_key's bits 2 and 1): a key
                # no awake body has, so the next broad phase refits the fat box.
                grid.fat_key[slot] = 2
    ti.loop_config(serialize=serial)
    for i in range(n_placed):  # (after the loop above: a kernel's loops run in turn)
        slot = placed_slots[i]
        bodies.position[slot] = ti.math.vec2(placed[i, 0], placed[i, 1])
        bodies.angle[slot] = placed[i, 2]


def wake_slots(
    ctx: "StepContext",
    slots: np.ndarray,
    placed_slots: np.ndarray | None = None,
    placed: np.ndarray | None = None,
    refind: np.ndarray | None = None,
):
    """Body slots `slots` ((k,) indices) written as they are but awake, their sleep timers,
    islands and support restarting, as write_rows writes a state read from them (the same
    floats, without the read: no sync on a GPU); with `placed_slots` ((m,) indices) those
    static bodies at the poses `placed` ((m, 3): x m, y m, angle rad, as float32 takes
    them); with `refind` ((w,) world indices, some or all of the worlds of `slots`) those
    worlds' pairs keep no manifold (found_margin 0) and their slots' fat boxes are refitted
    by the next broad phase. One launch."""
    n_placed = 0 if placed_slots is None else len(placed_slots)
    if n_placed == 0:
        placed_slots, placed = np.zeros(1, np.int32), np.zeros((1, 3), np.float32)
    flags, n_pairs = np.zeros(1, np.int32), 0
    if refind is not None:
        flags = np.zeros(ctx.n_worlds, np.int32)
        flags[refind] = 1
        n_pairs = ctx.cache.n_pairs
    pool = ctx.pool
    _wake_slots(
        pool.bodies,
        pool.manifolds,
        pool.grid,
        ctx.serial,
        np.ascontiguousarray(slots, np.int32),
        np.ascontiguousarray(placed_slots, np.int32),
        np.ascontiguousarray(placed, np.float32).reshape(-1, 3),
        n_placed,
        int(refind is not None),
        flags,
        n_pairs,
        ctx.n_bodies,
    )


#: The targets of a write that restarts no motor: an ndarray argument must not be empty.
_NO_TARGETS = np.zeros(1, np.float32)


#: write_rows' table: a body's state in ROW_COLUMNS float32 numbers, in this order.
ROW_COLUMNS = ("x", "y", "angle", "vx", "vy", "angular_velocity", "sleeping")


def state_table(position, angle, velocity, angular_velocity, sleeping) -> np.ndarray:
    """write_rows' table from the arrays of r rows of n_bodies bodies each (position and
    velocity (r, n_bodies, 2) or (r * n_bodies, 2), the others (r, n_bodies) or
    (r * n_bodies,); sleeping 0 or 1): (r * n_bodies, 7) float32, ROW_COLUMNS' order, each
    value as float32 takes it (sleeping's 0 and 1 exactly). One array where five went to the
    device (on a GPU each is copied there and back around the launch)."""
    n = np.size(angle)
    table = np.empty((n, len(ROW_COLUMNS)), np.float32)
    table[:, 0:2] = np.reshape(position, (n, 2))
    table[:, 2] = np.reshape(angle, n)
    table[:, 3:5] = np.reshape(velocity, (n, 2))
    table[:, 5] = np.reshape(angular_velocity, n)
    table[:, 6] = np.reshape(sleeping, n)
    return table


def write_rows(
    ctx: "StepContext",
    source_row: np.ndarray,
    table: np.ndarray,
    *,
    restart_islands: bool,
    reset: bool = False,
    targets: np.ndarray | None = None,
):
    """The one kernel that writes bodies' state rows: world w takes row source_row[w] of
    `table` (source_row: (n_worlds,) int32, -1: the world is not touched).

    Args:
        table: r rows of n_bodies bodies each, (r * n_bodies, 7) float32 (state_table).
        restart_islands: the written bodies' islands and support restart, as in a new scene
            (world_resets' writes); else they stay as the last step left them (write_state).
        reset: also no pending force, motor targets from `targets` ((r * n_joints,) float32)
            with their PID state restarted, and the worlds' contacts forgotten.
    """
    if targets is None or targets.size == 0:
        targets = _NO_TARGETS
    pool = ctx.pool
    _write_rows(
        pool.bodies,
        pool.joints,
        pool.manifolds,
        ctx.serial,
        restart_islands,
        reset,
        source_row,
        ctx.n_bodies,
        ctx.n_joints,
        ctx.n_pairs,
        table,
        targets,
    )


def write_state(ctx: "StepContext", position, angle, velocity, angular_velocity, sleeping):
    """Poses, velocities and sleep flags of every slot (arrays of n_slots rows; sleeping 0
    or 1); sleep timers restart (write_rows, each world its own row)."""
    table = state_table(position, angle, velocity, angular_velocity, sleeping)
    source_row = np.arange(ctx.n_worlds, dtype=np.int32)
    write_rows(ctx, source_row, table, restart_islands=False)


@ti.func
def _wake_joint_bodies(joints: ti.template(), bodies: ti.template(), joint, world, n_bodies):
    for end in ti.static(range(2)):
        slot = world * n_bodies + (joints.parent[joint] if end == 0 else joints.child[joint])
        bodies.sleeping[slot] = 0
        bodies.sleep_time[slot] = 0.0


@ti.func
def write_target(
    joints: ti.template(), bodies: ti.template(), joint, world, n_joints, n_bodies, target
):
    """Joint `joint`'s motor target in `world` (float32), its bodies woken: the one place a
    target lands (set_joint_target, and a vector env's actions on the device:
    envs/device_step.py)."""
    joints.target[world * n_joints + joint] = target
    _wake_joint_bodies(joints, bodies, joint, world, n_bodies)


@quick
@ti.kernel
def _write_joint_target(
    joints: ti.template(),
    bodies: ti.template(),
    serial: ti.template(),
    joint: ti.i32,
    n_joints: ti.i32,
    n_bodies: ti.i32,
    values: _F32_ARRAY,
):
    ti.loop_config(serialize=serial)
    for world in range(values.shape[0]):
        write_target(joints, bodies, joint, world, n_joints, n_bodies, values[world])


def write_joint_target(ctx: "StepContext", joint: int, values):
    """New motor targets of one joint, (n_worlds,) float32; a new target wakes its bodies."""
    _write_joint_target(
        ctx.pool.joints, ctx.pool.bodies, ctx.serial, joint, ctx.n_joints, ctx.n_bodies, values
    )


@quick
@ti.kernel
def _write_joint_mode(
    joints: ti.template(),
    bodies: ti.template(),
    serial: ti.template(),
    joint: ti.i32,
    n_joints: ti.i32,
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    mode: ti.i32,
    max_effort: ti.f32,
):
    joints.mode[joint] = mode
    joints.max_effort[joint] = max_effort
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        joints.pid_started[world * n_joints + joint] = 0  # restart integral and derivative
        _wake_joint_bodies(joints, bodies, joint, world, n_bodies)


def write_joint_mode(ctx: "StepContext", joint: int, mode: int, max_effort: float):
    """A motor's mode and effort limit; its PID restarts and its bodies wake in every world
    (its gains, per joint slot, are written with the other model rows: edits.py)."""
    _write_joint_mode(
        joints=ctx.pool.joints,
        bodies=ctx.pool.bodies,
        serial=ctx.serial,
        joint=joint,
        n_joints=ctx.n_joints,
        n_worlds=ctx.n_worlds,
        n_bodies=ctx.n_bodies,
        mode=mode,
        max_effort=max_effort,
    )


@quick
@ti.kernel
def _write_enabled(
    bodies: ti.template(), serial: ti.template(), slots: _I32_ARRAY, values: _I32_ARRAY
):
    ti.loop_config(serialize=serial)
    for i in range(slots.shape[0]):
        slot, enabled = slots[i], values[i]
        if bodies.enabled[slot] != enabled:
            bodies.enabled[slot] = enabled
            bodies.sleeping[slot] = 0  # a body comes back awake
            bodies.sleep_time[slot] = 0.0


def write_enabled(ctx: "StepContext", slots, enabled):
    """Enable or disable body slots (k,) int32, each as `enabled` says ((k,) 0 or 1
    int32); a body whose flag changes is awake (the colouring then sees a woken body, and
    a disabled one's pairs are gone)."""
    _write_enabled(ctx.pool.bodies, ctx.serial, slots, enabled)


@quick
@ti.kernel
def _write_filters(
    model: ti.template(),
    bodies: ti.template(),
    serial: ti.template(),
    rows: _I32_ARRAY,
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    groups: _I32_ARRAY,
    categories: _I32_ARRAY,
    masks: _I32_ARRAY,
):
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


def write_filters(ctx: "StepContext", rows, groups, categories, masks):
    """The collision filters of model rows (k,) in every world (int32 arrays, the bits as
    int32); the bodies wake."""
    _write_filters(
        model=ctx.pool.model,
        bodies=ctx.pool.bodies,
        serial=ctx.serial,
        rows=rows,
        n_worlds=ctx.n_worlds,
        n_bodies=ctx.n_bodies,
        groups=groups,
        categories=categories,
        masks=masks,
    )
