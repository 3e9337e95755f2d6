"""All device state, as typed groups of Taichi fields owned by one pool shared by every Scene.

Taichi compiles a kernel once per distinct set of fields. A process builds many scenes (a test
suite, a parameter sweep), so scenes do not own fields: they share one `DevicePool` whose
capacities cover them, and the kernels compile once per pool. The pool's fields are split
into groups by concept (BodyModel, BodyState, Joints, Manifolds, PreparedContacts, Coloring,
BroadPhaseGrid, IslandScratch, StepCounts, ScanScratch); a kernel takes only the groups
it uses. Which scene is *resident* in the pool, and how the others wait on the host, is
residency.py's business.

Each group declares its fields in one place (`_field`), with their shape in capacities and
whether they are *saved*: saved fields carry a scene's state from one step to the next
(poses, warm-start impulses, colours, sleep timers); the others are rebuilt inside every
step (scratch). Adding a state field is one `_field` line.

Index conventions, world first (symbolic shapes in the groups' docstrings):
    body slot   g = world * n_bodies + body        (n_slots = n_worlds * n_bodies)
    model row   b = body                           (shared by all worlds)
    joint slot  s = world * n_joints + joint
    pair        k in [0, n_pairs)                  (candidate pairs of the step)
    constraint  c in [0, n_pairs + n_joint_slots)  (pairs, then joint slots)
"""

import numpy as np
import taichi as ti

from .shapes import MAX_POLYGON_VERTICES

#: Points per contact manifold.
MAX_MANIFOLD_POINTS = 2
#: Graph colours solved one after the other, each in parallel; constraints left over go to
#: the overflow colour (solver/overflow.py).
#: 31, the most a body's 32-bit colour mask holds: a pile's candidate pairs (~16 a body)
#: need ~25, and with 12 a 100,000-body pile put 46,280 pairs in the serial overflow.
MAX_COLORS = 31
#: The colour of a pair the solver does not look at this step (no points, not fast): after
#: the overflow colour in the colour lists, and never solved.
UNSOLVED_COLOR = MAX_COLORS + 1
#: Block length of the device prefix sum.
SCAN_BLOCK = 256
#: Slots of a CPU team's barrier (StepCounts.barrier, solver/team.py): room to keep its
#: counters in cache lines of their own.
BARRIER_SLOTS = 64

#: How many entries of a saved field hold a scene's state, by extent name (see
#: FieldGroup._field): "slots" n_slots, "slots+1" n_slots + 1, "pairs" n_pairs,
#: "joint_slots" n_worlds * n_joints, "constraints" n_pairs + joint slots, "reported" the
#: touching pairs the last step reported, "begin_events" / "end_events" its events, "all"
#: the whole field.
EXTENTS = ("slots", "slots+1", "pairs", "joint_slots", "constraints", "reported",
           "begin_events", "end_events", "all")


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


class _Builder:
    """Places fields in one FieldsBuilder (one SNode tree) and counts their bytes; with
    `dry_run` it only counts (to refuse a pool too big before allocating any of it)."""

    def __init__(self, dry_run: bool = False):
        self.fields_builder = None if dry_run else ti.FieldsBuilder()
        self.nbytes = 0

    def place(self, n: int, dtype, shape):
        elements = 1 if shape == () else shape if isinstance(shape, int) else shape[0] * shape[1]
        self.nbytes += elements * n * 4  # every field is 32-bit
        if self.fields_builder is None:
            return None
        f = ti.field(dtype) if n == 1 else ti.Vector.field(n, dtype)
        if shape == ():
            self.fields_builder.place(f)
        elif isinstance(shape, int):
            self.fields_builder.dense(ti.i, shape).place(f)
        else:
            self.fields_builder.dense(ti.ij, shape).place(f)
        return f


class FieldGroup:
    """Fields of one concept. Subclasses declare each field once with `_field`."""

    def __init__(self, builder: _Builder):
        self._builder = builder
        self._saved: dict[str, str] = {}
        self._names: list[str] = []

    def _field(self, name: str, dtype, shape, n: int = 1, saved: str | None = None):
        """Declare field `name` (n components of dtype, `shape` in capacities; () for a
        scalar); `saved`: its extent (EXTENTS) if it carries state between steps."""
        assert saved is None or saved in EXTENTS, saved
        field = self._builder.place(n, dtype, shape)
        setattr(self, name, field)
        self._names.append(name)
        if saved is not None:
            self._saved[name] = saved
        return field

    def field_names(self) -> tuple[str, ...]:
        return tuple(self._names)

    def saved_fields(self) -> dict[str, str]:
        """{field name: extent} of the fields that carry state between steps."""
        return dict(self._saved)

    def write(self, arrays: dict[str, np.ndarray]):
        """For each named field: field[:len(value)] = value and 0 in the rest of it (a 0-d
        field takes one value); one kernel launch (see write_groups)."""
        write_groups([(self, arrays)])

    def read(self, extents: dict[str, int | None]) -> dict[str, np.ndarray]:
        """{name: a copy of field[:extent]} (the whole field for None; a 0-d field's value
        as a 0-d array), NumPy arrays of the field's dtype; one kernel launch (see
        read_groups)."""
        return read_groups([(self, extents)])[0]


def write_groups(arrays: list[tuple[FieldGroup, dict[str, np.ndarray]]]):
    """For each (group, {name: value}): the group's field name [:len(value)] = value and 0 in
    the rest of it (a 0-d field takes one value). One kernel launch for all of them,
    compiled once per set of groups and names: Taichi's from_numpy compiles a kernel for
    every field it fills (~50 ms each with an empty offline cache, 40 of them in a small
    scene's first step), and every kernel instance costs its compile."""
    fields, values = [], []
    for group, named in arrays:
        for name, value in named.items():
            field, value = getattr(group, name), np.asarray(value)
            count = len(value) if field.shape else 1
            if count > _entries(field) or value.size != count * _width(field):
                raise ValueError(f"{type(group).__name__}.{name}: a value of shape "
                                 f"{value.shape} does not fit the field's "
                                 f"{(_entries(field),) + _element_shape(field)}")
            fields.append(field)
            values.append(value)
    if not fields:
        return
    floats, ints, layout = _pack(fields, values, None)
    _move_fields(*_template_of(arrays), floats, ints, layout, True)


def read_groups(extents: list[tuple[FieldGroup, dict[str, int | None]]]
                ) -> list[dict[str, np.ndarray]]:
    """For each (group, {name: extent}): {name: a copy of the field's [:extent]} (the whole
    field for None; a 0-d field's value as a 0-d array), NumPy arrays of the fields'
    dtypes; one kernel launch for all of them (see write_groups)."""
    fields, counts = [], []
    for group, named in extents:
        for name, extent in named.items():
            field = getattr(group, name)
            fields.append(field)
            counts.append(_entries(field) if extent is None
                          else min(int(extent), _entries(field)))
    if not fields:
        return [{} for _ in extents]
    floats, ints, layout = _pack(fields, None, counts)
    _move_fields(*_template_of(extents), floats, ints, layout, False)
    out, f = [], 0
    for _, named in extents:
        values = {}
        for name in named:
            field = fields[f]
            flat = floats if field.dtype == ti.f32 else ints
            start, count = int(layout[2 * f]), int(layout[2 * f + 1])
            value = flat[start:start + count * _width(field)]
            values[name] = (value.reshape((count,) + _element_shape(field)).copy()
                            if field.shape else np.array(value.reshape(_element_shape(field))))
            f += 1
        out.append(values)
    return out


def _template_of(entries) -> tuple[tuple, tuple]:
    """The kernels' template arguments for [(group, {name: ...})]: the groups and, per
    group, its names."""
    return (tuple(group for group, _ in entries),
            tuple(tuple(named) for _, named in entries))


def _entries(field) -> int:
    """Entries along a field's first dimension (1 for a 0-d field)."""
    return field.shape[0] if field.shape else 1


def _element_shape(field) -> tuple:
    """The shape of one first-dimension entry of a field, as NumPy sees it."""
    return tuple(field.shape[1:]) + ((field.n,) if hasattr(field, "n") else ())


def _components(field) -> int:
    """Numbers in one element of a field (a vector field's n, else 1)."""
    return field.n if hasattr(field, "n") else 1


def _columns(field) -> int:
    """A 2-D field's second dimension (1 otherwise)."""
    return field.shape[1] if len(field.shape) == 2 else 1


def _width(field) -> int:
    """Numbers in one first-dimension entry of a field."""
    return int(np.prod(_element_shape(field), dtype=np.int64))


def _pack(fields, values, counts):
    """Flat float32 and int32 host arrays holding each field's value (values[f]; with
    values None, zeros with room for counts[f] entries), each field in the array of its
    dtype, one after the other, and layout: per field its offset in that array and its
    entries."""
    chunks = {np.float32: [], np.int32: []}
    filled = {np.float32: 0, np.int32: 0}
    layout = np.zeros(2 * len(fields), np.int32)
    for f, field in enumerate(fields):
        dtype = np.float32 if field.dtype == ti.f32 else np.int32
        if values is None:
            count = counts[f]
            chunk = np.zeros(count * _width(field), dtype)
        else:
            value = np.asarray(values[f])
            count = len(value) if field.shape else 1
            chunk = value.astype(dtype, copy=False).reshape(-1)
        chunks[dtype].append(chunk)
        layout[2 * f], layout[2 * f + 1] = filled[dtype], count
        filled[dtype] += chunk.size
    # Taichi refuses an empty array argument: each holds at least one number.
    floats = np.concatenate(chunks[np.float32] + [np.zeros(1, np.float32)])
    ints = np.concatenate(chunks[np.int32] + [np.zeros(1, np.int32)])
    return floats, ints, layout


_F32_ARRAY = ti.types.ndarray(dtype=ti.f32, ndim=1)
_I32_ARRAY = ti.types.ndarray(dtype=ti.i32, ndim=1)


@ti.func
def _fill_entry(field: ti.template(), flat: ti.template(), start, count, i):
    """field's entry i (0-d: its value) = flat[start:...] if i < count (row-major,
    components last), else 0."""
    columns, components = ti.static(_columns(field), _components(field))
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
    columns, components = ti.static(_columns(field), _components(field))
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


def _longest(groups, names) -> int:
    """The most entries of the named fields of the groups."""
    return max(_entries(getattr(group, name))
               for group, group_names in zip(groups, names, strict=True)
               for name in group_names)


def _fields_of(groups, names) -> tuple:
    """The named fields of the groups, in order (the order of _pack's layout)."""
    return tuple(getattr(group, name) for group, group_names in zip(groups, names, strict=True)
                 for name in group_names)


# One loop over the longest field's entries, every field's entry in its body: on the CPU
# each top-level loop is compiled as a function of its own, ~10 ms apiece even from the
# offline cache, and a group has up to 24 fields.
@ti.kernel
def _move_fields(groups: ti.template(), names: ti.template(), floats: _F32_ARRAY,
                 ints: _I32_ARRAY, layout: _I32_ARRAY, to_device: ti.template()):
    """The named fields of the groups from the flat arrays (to_device: write_groups) or into
    them (read_groups); layout as _pack makes it."""
    fields = ti.static(_fields_of(groups, names))
    for i in range(ti.static(_longest(groups, names))):
        for f in ti.static(range(len(fields))):
            field = ti.static(fields[f])
            flat = ti.static(floats if field.dtype == ti.f32 else ints)
            if i < ti.static(_entries(field)):
                if ti.static(to_device):
                    _fill_entry(field, flat, layout[2 * f], layout[2 * f + 1], i)
                else:
                    _copy_entry(field, flat, layout[2 * f], layout[2 * f + 1], i)


f32, i32 = ti.f32, ti.i32


@ti.data_oriented
class BodyModel(FieldGroup):
    """Constant per body, shared by all worlds; shape (n_bodies,) unless noted.

    inv_mass 1/kg (0: static or kinematic), inv_inertia 1/(kg m^2), kinematic (1: moved by
    gravity alone, Fx2D's external_forces_enabled: false; 0 inverse mass for contacts,
    joints and forces), gravity_scale, damping 1/s (linear and angular), elasticity,
    static_friction, dynamic_friction; shape_kind (SHAPE_NONE / _CIRCLE / _POLYGON / _CHAIN),
    shape_radius m, bounding_radius m (Shape.bounding_radius: read by every pair's margins,
    where computing it took a square root per vertex), shape_center vec2 m (body frame),
    shape_vertex_count,
    shape_vertices (n_bodies, MAX_POLYGON_VERTICES) vec2 m (counter-clockwise, body frame),
    shape_normals (same) unit outward normal of edge (v_i, v_i+1) (a chain link, kind
    SHAPE_CHAIN: rows 2 and 3 hold its ends' contact-normal bounds, shapes.chain); filter_start
    (n_bodies + 1) and filters (n_filters): per body, the bodies it never collides with
    (Scene.disable_collision), sorted; collision filter (filtering.should_collide):
    collision_group (Fx2D's: bodies sharing a negative group never pair, a positive one
    always), category_bits and mask_bits (32-bit masks, Box2D's rule); sensor (1: detects
    overlaps, exerts no force, solver/contacts.py); bullet (1: swept against dynamic bodies
    too, collision/continuous.py).
    """

    def __init__(self, builder, n_bodies: int, n_filters: int):
        super().__init__(builder)
        B, V = n_bodies, MAX_POLYGON_VERTICES
        for name in ("inv_mass", "inv_inertia", "gravity_scale", "damping", "elasticity",
                     "static_friction", "dynamic_friction", "shape_radius",
                     "bounding_radius"):
            self._field(name, f32, B)
        self._field("kinematic", i32, B)
        self._field("shape_kind", i32, B)
        self._field("shape_center", f32, B, 2)
        self._field("shape_vertex_count", i32, B)
        self._field("shape_vertices", f32, (B, V), 2)
        self._field("shape_normals", f32, (B, V), 2)
        self._field("filter_start", i32, B + 1)
        self._field("filters", i32, n_filters)
        for name in ("collision_group", "category_bits", "mask_bits", "sensor", "bullet"):
            self._field(name, i32, B)


@ti.data_oriented
class BodyState(FieldGroup):
    """The hot per-slot state; shape (n_slots,).

    Saved: position vec2 m (centre of mass), angle rad, velocity vec2 m/s,
    angular_velocity rad/s, force vec2 N and torque N m (applied for the next step),
    sleeping (1 while asleep), sleep_time s (spent below the sleep thresholds), island (the
    smallest slot of the body's sleep island, solver/sleep.py; its own slot otherwise),
    enabled (0: disabled in this world: never moves, pairs, joins islands or answers a
    query; Scene.set_enabled).
    Per step: anchor_position m / anchor_angle rad (the pose when the step began);
    delta_position m / delta_angle rad (displacement since then, kept apart from the pose
    so that velocities derived from it and joint errors keep float32 precision far from
    the origin: at x = 300 m a pose holds 3e-5 m steps, a substep may move 1e-6 m);
    prev_delta_position / prev_delta_angle (the displacement when the substep began).
    """

    def __init__(self, builder, n_slots: int):
        super().__init__(builder)
        N = n_slots
        self._field("position", f32, N, 2, saved="slots")
        self._field("angle", f32, N, saved="slots")
        self._field("velocity", f32, N, 2, saved="slots")
        self._field("angular_velocity", f32, N, saved="slots")
        self._field("force", f32, N, 2, saved="slots")
        self._field("torque", f32, N, saved="slots")
        self._field("sleeping", i32, N, saved="slots")
        self._field("sleep_time", f32, N, saved="slots")
        self._field("island", i32, N, saved="slots")
        self._field("enabled", i32, N, saved="slots")
        self._field("anchor_position", f32, N, 2)
        self._field("anchor_angle", f32, N)
        self._field("delta_position", f32, N, 2)
        self._field("delta_angle", f32, N)
        self._field("prev_delta_position", f32, N, 2)
        self._field("prev_delta_angle", f32, N)


@ti.data_oriented
class Joints(FieldGroup):
    """Joint model, shape (n_joints,): kind (JOINT_REVOLUTE / JOINT_PRISMATIC), parent and
    child body indices, anchor_parent / anchor_child vec2 m (their body frames), axis vec2
    (prismatic, parent frame, unit), reference_angle rad (child minus parent angle at
    creation), lower / upper (rad or m), mode (MOTOR_*), pid vec3, max_effort (N m or N),
    collide (1: the joined bodies still collide); per body (n_bodies + 1, 2 n_joints): its
    joints in body_joints[body_joint_start[b]:body_joint_start[b + 1]]; body_has_joint.

    Per joint slot (n_joint_slots,), saved: target (rad, rad/s, N m; m, m/s, N), integral,
    prev_error, pid_started (PID state); per substep: effort (the motor's output).
    """

    def __init__(self, builder, n_bodies: int, n_joints: int, n_joint_slots: int):
        super().__init__(builder)
        J, JS = n_joints, n_joint_slots
        for name in ("kind", "parent", "child", "mode", "collide"):
            self._field(name, i32, J)
        for name in ("reference_angle", "lower", "upper", "max_effort"):
            self._field(name, f32, J)
        self._field("anchor_parent", f32, J, 2)
        self._field("anchor_child", f32, J, 2)
        self._field("axis", f32, J, 2)
        self._field("pid", f32, J, 3)
        self._field("body_joint_start", i32, n_bodies + 1)
        self._field("body_joints", i32, 2 * J)
        self._field("body_has_joint", i32, n_bodies)
        self._field("target", f32, JS, saved="joint_slots")
        self._field("integral", f32, JS, saved="joint_slots")
        self._field("prev_error", f32, JS, saved="joint_slots")
        self._field("pid_started", i32, JS, saved="joint_slots")
        self._field("effort", f32, JS)


@ti.data_oriented
class Manifolds(FieldGroup):
    """Candidate pairs and their contact manifolds; shape (n_pairs,), points
    (n_pairs, MAX_MANIFOLD_POINTS).

    pair_start (n_slots + 1): the pairs body slot g found as their lower slot are
    [pair_start[g], pair_start[g + 1]) in the broad phase's order; body_a < body_b slots;
    color (see the instance); point_count (0: the pair does not touch); normal vec2 unit
    from a to b; point vec2 m (world, halfway between the surfaces); depth m (> 0
    overlapping); feature (ids matching points across steps); normal_impulse and
    tangent_impulse N s (accumulated, tangent along (-n.y, n.x)); touching (1: the pair
    touched in a substep of this step, 2: came within the hold distance only, 0: neither;
    contacts.solve_velocity, TOUCHED / HELD); total_normal_impulse,
    total_tangent_impulse N s (applied over the step's substeps); origin (in `reported`:
    the step's pair each entry was copied from, -1 for a resting pair copied from the list
    before, solver/reporting.py).

    Four instances: `contacts` (the step's pairs, in colour order once coloured; saved;
    color: the colour the pair had last step, -1 if none), `previous` (last step's, in
    broad-phase order, for warm starting; color: its colour then), `staging` (scratch:
    the reorder by colour, the reported list being built, and queries between steps, which
    must not touch `contacts`) and `reported` (saved: the pairs touching at the end of the
    last step, solver/reporting.py; pair_start per lower slot, each slot's sorted by body_b).
    `saved`: the extent of the saved fields (None: scratch).
    """

    def __init__(self, builder, n_slots: int, n_pairs: int, saved: str | None):
        super().__init__(builder)
        P, M = n_pairs, MAX_MANIFOLD_POINTS
        pairs = saved
        self._field("pair_start", i32, n_slots + 1, saved="slots+1" if saved else None)
        self._field("body_a", i32, P, saved=pairs)
        self._field("body_b", i32, P, saved=pairs)
        self._field("color", i32, P)
        self._field("point_count", i32, P, saved=pairs)
        self._field("normal", f32, P, 2, saved=pairs)
        self._field("point", f32, (P, M), 2, saved=pairs)
        self._field("depth", f32, (P, M), saved=pairs)
        self._field("feature", i32, (P, M), saved=pairs)
        warm = "pairs" if saved == "pairs" else None  # warm starting: the step's pairs only
        self._field("normal_impulse", f32, (P, M), saved=warm)
        self._field("tangent_impulse", f32, (P, M), saved=warm)
        reported = "reported" if saved == "reported" else None
        self._field("touching", i32, P)
        self._field("total_normal_impulse", f32, (P, M), saved=reported)
        self._field("total_tangent_impulse", f32, (P, M), saved=reported)
        self._field("origin", i32, P, saved=reported)


@ti.data_oriented
class ContactEvents(FieldGroup):
    """The last step's begin and end contact events (solver/reporting.py), saved: body
    slots (begin_a, begin_b) of the pairs that started touching, sorted, and (end_a, end_b)
    of those that stopped; capacity n_pairs each (a list never outgrows the reported
    pairs it comes from)."""

    def __init__(self, builder, n_pairs: int):
        super().__init__(builder)
        for name in ("begin_a", "begin_b"):
            self._field(name, i32, n_pairs, saved="begin_events")
        for name in ("end_a", "end_b"):
            self._field(name, i32, n_pairs, saved="end_events")


@ti.data_oriented
class PreparedContacts(FieldGroup):
    """Per pair, what the solver prepares each step; shape (n_pairs,), points
    (n_pairs, MAX_MANIFOLD_POINTS).

    solver_mass vec4 (w_a, I_a, w_b, I_b) this step (contacts.solver_mass: sleep flags only
    change between steps); restitution; slop m (penetration the position pass leaves
    alone); refresh (1: the narrow phase runs again every substep); ref_shift vec4 m
    (delta a, delta b) and ref_turn vec2 rad at the last refresh; per point: arm_a / arm_b
    vec2 m (point minus the body's centre at refresh), normal_mass / tangent_mass (1 /
    effective mass), friction (mu_s if the point sticks, else mu_k), bounced (1: bounced
    this step). Per body (n_slots + 1, 2 n_pairs): its pairs, sorted, in
    body_contacts[body_contact_start[g]:body_contact_start[g + 1]]; body_contact_cursor:
    fill cursor (scratch). jacobi_delta (2 n_pairs,) vec3: what overflow pair i of a
    Jacobi pass (solver/overflow.py) would do to its body a (entry 2 i) and b (2 i + 1):
    (dx, dy, dtheta) m and rad in the position pass, (dvx, dvy, dw) m/s and rad/s in the
    velocity pass.
    """

    def __init__(self, builder, n_slots: int, n_pairs: int):
        super().__init__(builder)
        P, M = n_pairs, MAX_MANIFOLD_POINTS
        self._field("solver_mass", f32, P, 4)
        self._field("restitution", f32, P)
        self._field("slop", f32, P)
        self._field("refresh", i32, P)
        self._field("ref_shift", f32, P, 4)
        self._field("ref_turn", f32, P, 2)
        self._field("arm_a", f32, (P, M), 2)
        self._field("arm_b", f32, (P, M), 2)
        self._field("normal_mass", f32, (P, M))
        self._field("tangent_mass", f32, (P, M))
        self._field("friction", f32, (P, M))
        self._field("bounced", i32, (P, M))
        self._field("body_contact_start", i32, n_slots + 1)
        self._field("body_contacts", i32, 2 * P)
        self._field("body_contact_cursor", i32, n_slots)
        self._field("jacobi_delta", f32, 2 * n_pairs, 3)


@ti.data_oriented
class Coloring(FieldGroup):
    """Graph colouring of the constraints (pairs, then joint slots).

    Saved (a step may reuse the last colouring): color (n_constraints,) MAX_COLORS for the
    overflow, UNSOLVED_COLOR for a pair not solved this step; color_start (MAX_COLORS + 3):
    colour c is color_list[start[c]:start[c + 1]];
    color_list (n_constraints,) constraint indices by colour; pair_origin (n_pairs,) the
    broad-phase index of the pair stored at k; joint_color (n_joint_slots,);
    body_colored_dynamic (n_slots,) 1: dynamic and awake when last coloured.
    n_overflow_pairs: how many of the overflow colour's constraints are pairs (they come
    first). The overflow pairs' Jacobi lists (solver/overflow.py), rebuilt with every
    colouring (a colouring with an overflow is never reused, so none is saved):
    jacobi_bodies[:n_jacobi_bodies] the dynamic bodies in overflow pairs; per
    slot jacobi_count (overflow pairs of the body) and jacobi_start; jacobi_entries
    (2 n_pairs,) entries 2 i + side, each body's sorted, in
    jacobi_entries[jacobi_start[g]:jacobi_start[g] + jacobi_count[g]]; jacobi_ticket per
    entry and jacobi_cursor (scratch of the fill).
    solve (n_pairs,): 1 where the solver must look at the pair this step (it has points or
    is fast, step.begin_step); only those pairs take a colour.
    Scratch: color_cursor, rank (pairs before each color_list entry; while the lists are
    built, each constraint's place in the overflow colour), body_claim (lowest
    bid for the body this round), body_color_mask (bit c: a constraint of colour c has the
    body), uncolored (constraints that bid this step) and n_uncolored, round_left
    (MAX_COLORS,): constraints left uncoloured after each round of a CPU team's colouring.
    """

    def __init__(self, builder, n_slots: int, n_pairs: int, n_joint_slots: int):
        super().__init__(builder)
        C = n_pairs + n_joint_slots
        self._field("color", i32, C, saved="constraints")
        self._field("color_start", i32, UNSOLVED_COLOR + 2, saved="all")
        self._field("color_list", i32, C, saved="constraints")
        self._field("pair_origin", i32, n_pairs, saved="pairs")
        self._field("solve", i32, n_pairs)
        self._field("joint_color", i32, n_joint_slots, saved="joint_slots")
        self._field("body_colored_dynamic", i32, n_slots, saved="slots")
        self._field("color_cursor", i32, UNSOLVED_COLOR + 1)
        self._field("rank", i32, C + 1)
        self._field("body_claim", i32, n_slots)
        self._field("body_color_mask", i32, n_slots)
        self._field("uncolored", i32, C)
        self._field("n_uncolored", i32, ())
        self._field("round_left", i32, MAX_COLORS)
        for name in ("n_overflow_pairs", "n_jacobi_bodies", "jacobi_cursor"):
            self._field(name, i32, ())
        for name in ("jacobi_count", "jacobi_start", "jacobi_bodies"):
            self._field(name, i32, n_slots)
        for name in ("jacobi_entries", "jacobi_ticket"):
            self._field(name, i32, 2 * n_pairs)


@ti.data_oriented
class BroadPhaseGrid(FieldGroup):
    """The multi-level grid hash, rebuilt every step, and the fat boxes it is built from.

    Per slot (n_slots,): aabb_lower / aabb_upper vec2 m, level (-1: no shape);
    entry_start (n_slots + 1) counts, then exclusive prefix sum. world_level_mask
    (n_worlds,): bit L set when level L holds a body. Per grid entry (n_entries,):
    entry_body (slot), entry_cell ivec3 (cx, cy, level), entry_slot (hash-table slot);
    grid_start (table + 1) entries per table slot, then prefix sum; grid_cursor (table);
    grid_entries (n_entries,) entry ids grouped by table slot. world_lower / world_upper
    (n_worlds,) vec2 m: the box around a world's AABBs (spatial queries only,
    collision/queries.py, which clip rays to it).

    Saved, per slot: fat_lower / fat_upper vec2 m, the fat box the step's pairs are found
    with (broad_phase.refit_fat_boxes), and fat_key, the body's pairing state when it was
    made (broad_phase.pairing_key). Scratch, world_sleeps (n_worlds,): 1 where a body of
    the world sleeps (its pairs come from the swept boxes instead).
    """

    def __init__(self, builder, n_slots: int, n_worlds: int, n_entries: int, table_size: int):
        super().__init__(builder)
        N = n_slots
        self._field("aabb_lower", f32, N, 2)
        self._field("aabb_upper", f32, N, 2)
        self._field("level", i32, N)
        self._field("entry_start", i32, N + 1)
        self._field("world_level_mask", i32, n_worlds)
        self._field("entry_body", i32, n_entries)
        self._field("entry_cell", i32, n_entries, 3)
        self._field("entry_slot", i32, n_entries)
        self._field("grid_start", i32, table_size + 1)
        self._field("grid_cursor", i32, table_size)
        self._field("grid_entries", i32, n_entries)
        self._field("world_lower", f32, n_worlds, 2)
        self._field("world_upper", f32, n_worlds, 2)
        self._field("world_sleeps", i32, n_worlds)
        self._field("fat_lower", f32, N, 2, saved="slots")
        self._field("fat_upper", f32, N, 2, saved="slots")
        self._field("fat_key", i32, N, saved="slots")


@ti.data_oriented
class IslandScratch(FieldGroup):
    """Sleep-island labelling (solver/sleep.py), per slot (n_slots,): previous_label (a
    sleeping body's label before the labelling), parent (union-find parent, a key), wake
    (per island: a mark that it must wake). not_converged, woken (bodies woken) and stamp
    (wake_islands' mark of this call) are scalars."""

    def __init__(self, builder, n_slots: int):
        super().__init__(builder)
        for name in ("previous_label", "parent", "wake"):
            self._field(name, i32, n_slots)
        for name in ("not_converged", "woken", "stamp"):
            self._field(name, i32, ())


@ti.data_oriented
class StepCounts(FieldGroup):
    """Scalars of the step on the device: n_pairs and n_joints (joints per world) of the
    step's constraints; what the last broad phase needed (entries_needed, pairs_needed) and
    lost_bodies (bodies left out of collision for a non-finite or absurd pose); barrier
    (BARRIER_SLOTS,): a CPU team's barrier."""

    def __init__(self, builder):
        super().__init__(builder)
        for name in ("n_pairs", "n_joints", "entries_needed", "pairs_needed", "lost_bodies"):
            self._field(name, i32, ())
        self._field("barrier", i32, BARRIER_SLOTS)


@ti.data_oriented
class Faults(FieldGroup):
    """Per world (n_worlds,), after a step: first_slot, the first body slot found faulty
    (solver/faults.py; NO_FAULT if none; a torn joint's child counts), first_joint, its
    first torn joint (NO_FAULT if none); count: how many worlds have a fault."""

    def __init__(self, builder, n_worlds: int):
        super().__init__(builder)
        self._field("first_slot", i32, n_worlds)
        self._field("first_joint", i32, n_worlds)
        self._field("count", i32, ())


@ti.data_oriented
class ScanScratch(FieldGroup):
    """Block sums of the device prefix sum (scan.exclusive_scan), (n_scan_blocks,)."""

    def __init__(self, builder, n_blocks: int):
        super().__init__(builder)
        self._field("blocks", i32, n_blocks)


#: The groups of a pool, by attribute name, in the order kernels take them.
GROUP_NAMES = ("model", "bodies", "joints", "manifolds", "previous", "staging", "reported",
               "events", "prepared", "coloring", "grid", "islands", "counts", "faults", "scan")

#: The names state files and snapshots give a group where they differ from its attribute
#: (the file format is older than the attribute names, and files written before load).
FILE_NAMES = {"manifolds": "contacts", "grid": "broad"}


class DevicePool:
    """The groups, sized by capacities (keys of MIN_CAPACITIES):

    bodies: body slots (n_worlds * n_bodies); models: bodies per world; worlds; pairs:
    candidate pairs (and manifolds); entries: grid entries; joints: joints per world;
    joint_slots: n_worlds * joints; filters: disable_collision entries.
    """

    def __init__(self, capacities: dict, dry_run: bool = False):
        self.capacities = dict(capacities)
        self.body_capacity = capacities["bodies"]
        self.pair_capacity = capacities["pairs"]
        # A body registers in at most 4 grid cells, except when rounding far from the origin
        # adds a row; the broad phase reports that and the pool grows.
        self.entry_capacity = capacities["entries"]
        self.table_capacity = next_pow2(4 * self.body_capacity)
        N, P, JS = self.body_capacity, self.pair_capacity, capacities["joint_slots"]
        scan_len = max(self.table_capacity, N, P + JS) + 1
        builder = _Builder(dry_run)
        self.model = BodyModel(builder, capacities["models"], capacities["filters"])
        self.bodies = BodyState(builder, N)
        self.joints = Joints(builder, capacities["models"], capacities["joints"], JS)
        self.manifolds = Manifolds(builder, N, P, saved="pairs")
        self.previous = Manifolds(builder, N, P, saved=None)
        self.staging = Manifolds(builder, N, P, saved=None)
        self.reported = Manifolds(builder, N, P, saved="reported")
        self.events = ContactEvents(builder, P)
        self.prepared = PreparedContacts(builder, N, P)
        self.coloring = Coloring(builder, N, P, JS)
        self.grid = BroadPhaseGrid(builder, N, capacities["worlds"], self.entry_capacity,
                                       self.table_capacity)
        self.islands = IslandScratch(builder, N)
        self.counts = StepCounts(builder)
        self.faults = Faults(builder, capacities["worlds"])
        self.scan = ScanScratch(builder, (scan_len + SCAN_BLOCK - 1) // SCAN_BLOCK + 1)
        self.nbytes = builder.nbytes  # device memory of all the fields
        # The StepCache of the scene whose per-body contact lists (solver.body_contacts,
        # scratch) the pool holds; None after a load of saved fields, whose pairs may be
        # others (contacts.build_body_lists).
        self.body_lists_of = None
        self._tree = None if dry_run else builder.fields_builder.finalize()

    @classmethod
    def bytes_needed(cls, capacities: dict) -> int:
        """Device memory (bytes) a pool of these capacities takes; allocates nothing."""
        return cls(capacities, dry_run=True).nbytes

    def groups(self) -> dict[str, FieldGroup]:
        """{name in state files and snapshots (FILE_NAMES): group}, every group."""
        return {FILE_NAMES.get(name, name): getattr(self, name) for name in GROUP_NAMES}

    def group(self, file_name: str) -> FieldGroup:
        """The group that state files and snapshots name `file_name` (see groups)."""
        return self.groups()[file_name]

    def fits(self, needs: dict) -> bool:
        return all(needs[key] <= self.capacities[key] for key in needs)

    def destroy(self):
        self._tree.destroy()


#: Scenes of at most this many body slots (n_worlds * n_bodies) run their kernels' loops
#: serially on CPU backends.
#:
#: Why: on Taichi's CPU backend a parallel loop costs ~15-40 us to start, even when empty
#: (the thread pool hands it to its workers and waits for them), and a loop of up to 512
#: items runs on one thread anyway (measured, Taichi 1.7.4). A small scene's step starts
#: ~180 such loops: most of its time. A serial loop starts for free. (Their substeps run in
#: one launch on a team of one thread, solver/team.py.) Kernels take `serial` as a
#: compile-time (template) argument read by ti.loop_config, so each kernel has a serial
#: variant, compiled only if a small scene runs. The results are the same: no kernel's
#: result depends on the order of its loop's iterations (the step is bitwise deterministic).
SERIAL_SLOTS = 512

#: Smallest capacities of a pool: enough that typical scenes of a process share one compile.
#: Worlds and joint slots are cheap (65,536 worlds: 1.5 MiB; 65,536 joint slots: ~2.3 MiB)
#: and a batch's count of them grows fastest: with 1,024 worlds, the benchmark's 4,096
#: small worlds grew the pool (every kernel compiled again: an 8.5 s first step).
MIN_CAPACITIES = {"bodies": 16384, "models": 16384, "worlds": 65536, "pairs": 65536,
                  "entries": 65536, "joints": 1024, "joint_slots": 65536, "filters": 1024}


def compiled_kernel_count() -> int:
    """How many kernel instances fx2d_gpu has compiled in this process (for compile tests)."""
    import sys

    kernels = {}
    for name, module in list(sys.modules.items()):
        if not name.startswith("fx2d_gpu") or module is None:
            continue
        for obj in vars(module).values():
            primal = getattr(obj, "_primal", None)
            if primal is not None and hasattr(primal, "compiled_kernels"):
                kernels[id(primal)] = len(primal.compiled_kernels)
    return sum(kernels.values())
