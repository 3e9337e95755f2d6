"""All device state, as typed groups of Taichi fields owned by one pool shared by every Scene.

Taichi compiles a kernel once per distinct set of fields. A process builds many scenes (a test
suite, a parameter sweep), so scenes do not own fields: they share one `DevicePool` whose
capacities cover them, and the kernels compile once per pool. The pool's fields are split
into groups by concept (BodyModel, BodyState, Joints, Manifolds, PreparedContacts, Coloring,
BroadPhaseGrid, IslandScratch, StepCounts, ScanScratch); a kernel takes only the groups
it uses. Which scene is *resident* in the pool, and how the others wait on the host, is
residency.py's business; moving data between the host and the fields is transfer.py's.

This module holds declarations only. Each group declares each of its fields in one line
(`_field`): dtype, shape in symbolic sizes (`Dim`, SIZES), components, whether it is
*saved*, and a one-line doc (unit and meaning). Saved fields carry a scene's state from one
step to the next (poses, warm-start impulses, colours, sleep timers); the others are rebuilt
inside every step (scratch). Adding a state field is one `_field` line; docs/device-data.md
is generated from these declarations (`field_table`).

Index conventions, world first:
    body slot   g = world * n_bodies + body        (n_slots = n_worlds * n_bodies)
    model row   b = body                           (shared by all worlds)
    material    b, or g once a world has values of its own (bodies.material_row)
    shape       b, or g once a world has geometry of its own (bodies.shape_row)
    joint slot  s = world * n_joints + joint
    pair        k in [0, n_pairs)                  (candidate pairs of the step)
    constraint  c in [0, n_pairs + n_joint_slots)  (pairs, then joint slots)
"""

import contextlib
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from ..shapes import MAX_MANIFOLD_POINTS, MAX_POLYGON_VERTICES
from .transfer import read_groups, write_groups

if TYPE_CHECKING:
    from ..model.builder import ModelBuilder

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
#: The passes the device prefix sum (scan.exclusive_scan) and a team's compile with on any
#: backend: "gpu" or "cpu"; None: the backend's. A tool's switch: benchmarks/launches.py
#: counts a GPU's offloaded tasks on the CPU with "gpu", benchmarks/scan.py times the CPU's
#: passes on a GPU with "cpu"; the sums are the same either way (integers). Read as a kernel
#: compiles (at its first call) and as a pool is made (a GPU's passes keep a sum a number).
SCAN_PASSES = None
#: How a team's members take the body and joint slots of an item stage, on any backend:
#: "turns" (member, member + n_members, ...: a GPU's, whose warp's lanes then read
#: neighbouring slots) or "shares" (a consecutive share each: a CPU's, whose threads then
#: write lines of their own); None: the backend's. The items are independent, so the
#: results are the same either way; a test's switch (team_items_taken:
#: tests/test_small_worlds_by_stage.py steps a CPU team the GPU's way). Read as a kernel
#: compiles.
TEAM_ITEMS = None
#: Taichi's CPU architectures (the others are GPUs').
_CPU_ARCHS = ("x64", "arm64")


@contextlib.contextmanager
def team_items_taken(way: str):
    """While entered, kernels that compile take a team's slots `way` (TEAM_ITEMS: "turns"
    or "shares"); a kernel keeps the build of its first call."""
    if way not in ("turns", "shares"):
        raise ValueError(f"team_items_taken: way must be 'turns' or 'shares', got {way!r}")
    global TEAM_ITEMS
    saved, TEAM_ITEMS = TEAM_ITEMS, way
    try:
        yield
    finally:
        TEAM_ITEMS = saved


def team_items_by_turns() -> bool:
    """Whether a team's members take an item stage's slots in turn: TEAM_ITEMS says so, or
    else Taichi's current backend is a GPU's (compile-time: ti.static)."""
    if TEAM_ITEMS is not None:
        return TEAM_ITEMS == "turns"
    return _backend_on_gpu()


def _backend_on_gpu() -> bool:
    """Whether Taichi's current backend is a GPU's (scans_on_gpu, team_items_by_turns: the
    device package cannot ask solver/gpu_team.py, which imports it)."""
    return ti.lang.impl.current_cfg().arch.name not in _CPU_ARCHS


def scans_on_gpu() -> bool:
    """Whether prefix sums take a GPU's passes: SCAN_PASSES says so, or else Taichi's
    current backend is a GPU's (compile-time: scans branch on it with ti.static)."""
    if SCAN_PASSES is not None:
        return SCAN_PASSES == "gpu"
    return _backend_on_gpu()


def _scans_keep_items() -> bool:
    """Whether a pool's prefix sums need ScanScratch.items (a sum a number): they take a
    GPU's passes, or Taichi has not started (a pool's size reckoned before: the larger)."""
    return ti.lang.impl.get_runtime().prog is None or scans_on_gpu()


#: Block sums per chunk of a CPU team's prefix sum (solver/team_stages._scan_by_block): the
#: block sums are scanned a chunk per thread, then one thread scans the chunks' totals
#: (n / 16,384 of them) rather than every block sum (a 1M pile's pairs are ~12,000
#: blocks).
SCAN_CHUNK = 64
#: Items a thread counts and lists where indices are listed by a small key (device.buckets:
#: the colour lists): each chunk counts its keys into counters of its own, so no counter is
#: shared by every thread (65,536 small worlds' half a million constraints in one colour:
#: two loops of as many atomics on one address, 0.22 ms each a step on an H200). 64 on
#: every backend: 1,024 took the CPU's lists longer (100k pile, 0.7 -> 1.3 ms).
LIST_CHUNK = 64
#: Keys a constraint may be listed by: its colour, the overflow colour, UNSOLVED_COLOR.
LIST_KEYS = UNSOLVED_COLOR + 1
#: Slots of a GPU block's fences on SPIR-V (gpu_team.barrier: a thread's atomic at its
#: subgroup lane's slot, so that a barrier's fences do not all queue on one address: 256
#: threads of a block, and every block of a small worlds' launch by block); subgroups
#: are 32 or 64 lanes wide on GPUs.
FENCE_SLOTS = 128
#: Slots of a team's barrier (StepCounts.barrier, solver/team.py): a CPU team's counters in
#: cache lines of their own (the first 64), then FENCE_SLOTS.
BARRIER_SLOTS = 64 + FENCE_SLOTS
#: Counters of a CPU team's checks (StepCounts.tally, solver/fused.py): a kept colouring's
#: two, the reported list's refresh_tally's three, the fat boxes' refit's three, how far a
#: broad phase in the team's launch went, whether its sleep pass converged, how a
#: colouring in the launch went with its colours used and overflow, how its wake pass
#: went, whether a point of the step may bounce and whether it has a fast pair
#: (solver/stages.py's BOUNCE_TALLY and FAST_TALLY), and the refit's awake bodies that move
#: where some sleep.
TALLY_SLOTS = 17
#: Steps of small worlds the host may launch without reading their answers (steps in
#: flight, solver/in_flight.py): each answer is held on the device (StepCounts.answers)
#: until the host reads them all at once.
STEPS_IN_FLIGHT = 64
#: Entries of a fused launch's answer (solver/fused.py's _Answer).
ANSWER_ENTRIES = 19
#: Entries of the StepCache a team's step in flight leaves on the device (StepCounts.
#: flight_caches; solver/fused.py's FLIGHT_CACHE_FIELDS, and whether the step went as taken).
FLIGHT_CACHE_ENTRIES = 25

#: The symbols of field shapes: {symbol: meaning}. The capacities' symbols (the pool's
#: capacity key in brackets) come first, then the constants (see each constant).
SIZES = {
    "n_slots": "body slots, n_worlds * n_bodies [bodies]",
    "n_bodies": "bodies per world, model rows shared by all worlds [models]",
    "n_worlds": "worlds [worlds]",
    "n_pairs": "candidate pairs of a step, and their manifolds [pairs]",
    "n_joints": "joints per world [joints]",
    "n_joint_slots": "n_worlds * n_joints [joint_slots]",
    "n_filters": "Scene.disable_collision entries [filters]",
    "n_entries": "grid entries of the broad phase [entries]",
    "n_table_slots": "slots of the broad phase's hash table, next_pow2(4 * n_slots)",
    "n_scan_blocks": "blocks of the device prefix sum (SCAN_BLOCK numbers each)",
    "n_scan_chunks": "chunks of the prefix sums' block sums (SCAN_CHUNK each; a GPU's "
    "scan.exclusive_scan: SCAN_BLOCK each, fewer)",
    "n_scan_items": "numbers a GPU's prefix sum scans at most (scan.exclusive_scan; 1 on "
    "the CPU, whose passes need no such scratch)",
    "n_list_chunks": "chunks of LIST_CHUNK constraints, the colour lists' counting units",
    "MAX_MANIFOLD_POINTS": f"{MAX_MANIFOLD_POINTS}, points per contact manifold",
    "MAX_POLYGON_VERTICES": f"{MAX_POLYGON_VERTICES}, most vertices of a polygon",
    "MAX_COLORS": f"{MAX_COLORS}, graph colours; colour MAX_COLORS is the overflow",
    "UNSOLVED_COLOR": f"{UNSOLVED_COLOR}, the colour of a pair not solved this step",
    "BARRIER_SLOTS": f"{BARRIER_SLOTS}, slots of a team's barrier and a GPU block's fences",
    "STEPS_IN_FLIGHT": f"{STEPS_IN_FLIGHT}, steps launched before the host reads their answers",
    "ANSWER_ENTRIES": f"{ANSWER_ENTRIES}, entries of a fused launch's answer",
    "FLIGHT_CACHE_ENTRIES": f"{FLIGHT_CACHE_ENTRIES}, entries of a step in flight's StepCache",
}

#: How many entries of a saved field hold a scene's state, by extent name: {extent: meaning}.
EXTENTS = {
    "slots": "n_slots",
    "slots+1": "n_slots + 1",
    "pairs": "the step's pairs",
    "joint_slots": "n_worlds * n_joints",
    "constraints": "the step's pairs + joint slots",
    "reported": "the touching pairs the last step reported",
    "begin_events": "the last step's begin events",
    "end_events": "the last step's end events",
    "all": "the whole field",
}


def list_counts_length(n_constraints: int) -> int:
    """Entries of Coloring.list_counts for n_constraints constraints: a counter for each key
    (LIST_KEYS) of each chunk of LIST_CHUNK, and the total after them (device.buckets)."""
    return LIST_KEYS * -(-n_constraints // LIST_CHUNK) + 1


def next_pow2(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


@dataclass(frozen=True)
class Dim:
    """One dimension of a field: its length and the symbol the docs give it (a key of SIZES,
    or arithmetic on them: `n_slots + 1`, `2 * n_pairs`, built with + and *)."""

    symbol: str
    length: int

    def __add__(self, other: "Dim | int") -> "Dim":
        if isinstance(other, Dim):
            return Dim(f"{self.symbol} + {other.symbol}", self.length + other.length)
        return Dim(f"{self.symbol} + {other}", self.length + other)

    def __rmul__(self, factor: int) -> "Dim":
        symbol = f"({self.symbol})" if " " in self.symbol else self.symbol
        return Dim(f"{factor} * {symbol}", factor * self.length)


_POINTS = Dim("MAX_MANIFOLD_POINTS", MAX_MANIFOLD_POINTS)
_VERTICES = Dim("MAX_POLYGON_VERTICES", MAX_POLYGON_VERTICES)
_COLORS = Dim("MAX_COLORS", MAX_COLORS)
_UNSOLVED = Dim("UNSOLVED_COLOR", UNSOLVED_COLOR)
_BARRIER = Dim("BARRIER_SLOTS", BARRIER_SLOTS)
_TALLY = Dim("TALLY_SLOTS", TALLY_SLOTS)
_IN_FLIGHT = Dim("STEPS_IN_FLIGHT", STEPS_IN_FLIGHT)


@dataclass(frozen=True)
class FieldDeclaration:
    """One field of a group: name, dtype (ti.f32 or ti.i32), dims (() for a scalar),
    components (1: a scalar element, n: a vector of n), saved (its extent, a key of EXTENTS,
    or None: scratch) and doc (unit, frame and meaning, one line)."""

    name: str
    dtype: object
    dims: tuple[Dim, ...]
    components: int
    saved: str | None
    doc: str

    @property
    def entries(self) -> int:
        """Entries along the first dimension (1 for a 0-d field)."""
        return self.dims[0].length if self.dims else 1

    @property
    def element_shape(self) -> tuple[int, ...]:
        """The shape of one first-dimension entry, as NumPy sees it."""
        return tuple(dim.length for dim in self.dims[1:]) + (
            (self.components,) if self.components > 1 else ()
        )

    def shape_symbols(self) -> str:
        """The field's shape as NumPy sees it, in symbols: "(n_slots, 2)", "()"."""
        symbols = [dim.symbol for dim in self.dims]
        if self.components > 1:
            symbols.append(str(self.components))
        return f"({symbols[0]},)" if len(symbols) == 1 else f"({', '.join(symbols)})"


class _Builder:
    """Places fields in one FieldsBuilder (one SNode tree) and counts their bytes; with
    `dry_run` it only counts (to refuse a pool too big before allocating any of it)."""

    def __init__(self, dry_run: bool = False):
        self.fields_builder = None if dry_run else ti.FieldsBuilder()
        self.nbytes = 0

    def place(self, n: int, dtype, shape: tuple[int, ...]):
        self.nbytes += math.prod(shape) * n * 4  # every field is 32-bit
        if self.fields_builder is None:
            return None
        f = ti.field(dtype) if n == 1 else ti.Vector.field(n, dtype)
        if shape == ():
            self.fields_builder.place(f)
        elif len(shape) == 1:
            self.fields_builder.dense(ti.i, shape[0]).place(f)
        else:
            self.fields_builder.dense(ti.ij, shape).place(f)
        return f


class FieldGroup:
    """Fields of one concept. Subclasses declare each field once with `_field`."""

    def __init__(self, builder: _Builder):
        self._builder = builder
        self._declarations: list[FieldDeclaration] = []

    def _field(
        self,
        name: str,
        dtype,
        dims: "Dim | tuple[Dim, ...]",
        n: int = 1,
        *,
        saved: str | None = None,
        doc: str,
    ):
        """Declare field `name`: n components of dtype, shape `dims` (one Dim, a pair of
        them, or () for a scalar); `saved`: its extent (EXTENTS) if it carries state between
        steps; `doc`: unit and meaning, one line."""
        assert saved is None or saved in EXTENTS, saved
        dims = (dims,) if isinstance(dims, Dim) else tuple(dims)
        assert all(isinstance(dim, Dim) for dim in dims), (name, dims)  # shapes in symbols
        field = self._builder.place(n, dtype, tuple(dim.length for dim in dims))
        setattr(self, name, field)
        self._declarations.append(FieldDeclaration(name, dtype, dims, n, saved, doc))
        return field

    def declarations(self) -> tuple[FieldDeclaration, ...]:
        """The group's fields, in declaration order."""
        return tuple(self._declarations)

    def field_names(self) -> tuple[str, ...]:
        return tuple(d.name for d in self._declarations)

    def saved_fields(self) -> dict[str, str]:
        """{field name: extent} of the fields that carry state between steps."""
        return {d.name: d.saved for d in self._declarations if d.saved is not None}

    def write(self, arrays: dict[str, np.ndarray]):
        """For each named field: field[:len(value)] = value and 0 in the rest of it (a 0-d
        field takes one value); one kernel launch (transfer.write_groups)."""
        write_groups([(self, arrays)])

    def read(self, extents: dict[str, int | None]) -> dict[str, np.ndarray]:
        """{name: a copy of field[:extent]} (the whole field for None; a 0-d field's value
        as a 0-d array), NumPy arrays of the field's dtype; one kernel launch
        (transfer.read_groups)."""
        return read_groups([(self, extents)])[0]


f32, i32 = ti.f32, ti.i32


@ti.data_oriented
class BodyModel(FieldGroup):
    """Constant per body (model row), shared by all worlds: collision filters,
    (n_bodies,); mass and material by *material row* (bodies.material_row: the model row,
    or the body slot once Scene.set_body_params gave a world values of its own, so that a
    scene without per-world values reads and uploads n_bodies rows, as before); collision
    shape by *shape row* alike (bodies.shape_row: the body slot once
    Scene.set_shape_params gave a world geometry of its own); gravity and grid cell per
    world. Written when a scene is loaded (residency.py) and by Scene's edits (edits.py).
    Rows 0 .. n_bodies - 1 hold world 0's materials and shapes either way, and a body is
    static or dynamic, and of one shape kind and vertex count, in every world:
    `inv_mass[body] > 0` tells a dynamic body in any world, `shape_kind[body]` its kind."""

    def __init__(
        self, builder: "ModelBuilder", n_bodies: Dim, n_slots: Dim, n_worlds: Dim, n_filters: Dim
    ):
        super().__init__(builder)
        self._declare_materials(n_slots)
        self._declare_scene_and_worlds(n_worlds)
        self._declare_shapes(n_bodies, n_slots)
        self._declare_filters(n_bodies, n_filters)

    def _declare_materials(self, R: Dim):
        """Mass and material of each material row (R: as many as body slots)."""
        self._field("inv_mass", f32, R, doc="1/kg, by material row; 0: static or kinematic")
        self._field(
            "inv_inertia", f32, R, doc="1/(kg m^2), about the centre of mass, by material row"
        )
        self._field("gravity_scale", f32, R, doc="factor on the world's gravity, by material row")
        self._field("damping", f32, R, doc="1/s, of linear and angular velocity, by material row")
        self._field(
            "elasticity",
            f32,
            R,
            doc="by material row; a pair's restitution mixes its bodies' (restitution_mixing)",
        )
        self._field(
            "static_friction", f32, R, doc="mu_s, held while a point sticks, by material row"
        )
        self._field("dynamic_friction", f32, R, doc="mu_k, while a point slides, by material row")

    def _declare_scene_and_worlds(self, n_worlds: Dim):
        """The scene's mixing rules and material-row switch (0-d), each world's gravity and
        mass spread (n_worlds,)."""
        self._field(
            "friction_mixing",
            i32,
            (),
            doc="enums.MIX_*: how a pair mixes its bodies' friction coefficients "
            "(Scene(friction_mixing=); both solvers)",
        )
        self._field(
            "restitution_mixing",
            i32,
            (),
            doc="enums.MIX_*: how a pair mixes its bodies' elasticities "
            "(Scene(restitution_mixing=); both solvers)",
        )
        self._field(
            "per_world",
            i32,
            (),
            doc="1: material rows are body slots (per-world values); 0: model rows",
        )
        self._field(
            "shape_per_world",
            i32,
            (),
            doc="1: shape rows are body slots (per-world geometry, Scene.set_shape_params); "
            "0: model rows (bodies.shape_row)",
        )
        self._field(
            "world_cell",
            f32,
            n_worlds,
            doc="m, each world's level-0 grid cell (the median of its shapes' diameters, "
            "builder.cell_size), read where shape_per_world is 1 (bodies.world_cell_size)",
        )
        self._field(
            "gravity", f32, n_worlds, 2, doc="m/s^2, each world's gravity (Scene.set_gravity)"
        )
        self._field(
            "uneven",
            i32,
            n_worlds,
            doc="1: the world's dynamic masses differ by more than "
            "contacts.IMMOVABLE_SWEEP_RATIO (its contacts with an immovable body "
            "are swept again)",
        )

    def _declare_shapes(self, B: Dim, S: Dim):
        """Each shape row's collision shape (S: as many as body slots; bodies.shape_row:
        the model row, or the body slot once a world has geometry of its own), and whether
        each model row (B: n_bodies) is kinematic. A body's shape kind and vertex count are
        the same in every world: rows 0 .. n_bodies - 1 tell them either way."""
        self._field(
            "shape_radius", f32, S, doc="m, of a circle or capsule, or a polygon's rounding"
        )
        self._field(
            "bounding_radius",
            f32,
            S,
            doc="m, Shape.bounding_radius: read by every pair's margins, where "
            "computing it took a square root per vertex",
        )
        self._field(
            "kinematic",
            i32,
            B,
            doc="1: moved by gravity alone (Fx2D's external_forces_enabled: false), "
            "0 inverse mass for contacts, joints and forces",
        )
        self._field("shape_kind", i32, S, doc="enums.SHAPE_* (SHAPE_NONE: no shape)")
        self._field("shape_center", f32, S, 2, doc="m, the shape's centre, body frame")
        self._field("shape_vertex_count", i32, S, doc="vertices of a polygon or chain link")
        self._field(
            "shape_vertices", f32, (S, _VERTICES), 2, doc="m, body frame, counter-clockwise"
        )
        self._field(
            "shape_normals",
            f32,
            (S, _VERTICES),
            2,
            doc="unit outward normal of edge (v_i, v_i+1); a chain link (SHAPE_CHAIN): "
            "rows 2 and 3 hold its ends' contact-normal bounds (shapes.chain)",
        )

    def _declare_filters(self, B: Dim, n_filters: Dim):
        """What each model row (B: n_bodies) collides with, and how: its filters, disabled
        pairs, sensor and bullet flags."""
        self._field(
            "filter_start",
            i32,
            B + 1,
            doc="model row b's filters are filters[filter_start[b]:filter_start[b + 1]]",
        )
        self._field(
            "filters",
            i32,
            n_filters,
            doc="per body, sorted: the bodies it never collides with (Scene.disable_collision)",
        )
        self._field(
            "collision_group",
            i32,
            B,
            doc="Fx2D's: bodies sharing a negative group never pair, a positive one "
            "always (filtering.should_collide)",
        )
        self._field(
            "category_bits", i32, B, doc="32-bit mask: the body's categories (Box2D's rule)"
        )
        self._field(
            "mask_bits", i32, B, doc="32-bit mask: the categories it collides with (Box2D's rule)"
        )
        self._field(
            "sensor", i32, B, doc="1: detects overlaps, exerts no force (solver/contacts.py)"
        )
        self._field(
            "bullet", i32, B, doc="1: swept against dynamic bodies too (collision/continuous.py)"
        )


#: BodyState's fields a small worlds' substep reads or writes for every constraint or body,
#: (name, components, unit): its interleaved copies (`interleaved_<name>`,
#: solver/interleaved.py); the other fields (flags, loads, sleep state) are read in place.
INTERLEAVED_BODY_FIELDS = (
    ("position", 2, "m"),
    ("angle", 1, "rad"),
    ("velocity", 2, "m/s"),
    ("angular_velocity", 1, "rad/s"),
    ("anchor_position", 2, "m"),
    ("anchor_angle", 1, "rad"),
    ("delta_position", 2, "m"),
    ("delta_angle", 1, "rad"),
    ("prev_delta_position", 2, "m"),
    ("prev_delta_angle", 1, "rad"),
)


@ti.data_oriented
class BodyState(FieldGroup):
    """The hot per-slot state, (n_slots,): the saved pose, velocity, applied load and sleep
    state, and the step's displacements. Written by the step and by Scene between steps
    (transfer.py)."""

    def __init__(self, builder: "ModelBuilder", n_slots: Dim):
        super().__init__(builder)
        N = n_slots
        self._field("position", f32, N, 2, saved="slots", doc="m, centre of mass, world frame")
        self._field("angle", f32, N, saved="slots", doc="rad")
        self._field(
            "velocity", f32, N, 2, saved="slots", doc="m/s, of the centre of mass, world frame"
        )
        self._field("angular_velocity", f32, N, saved="slots", doc="rad/s")
        self._field(
            "force", f32, N, 2, saved="slots", doc="N, world frame, applied for the next step"
        )
        self._field("torque", f32, N, saved="slots", doc="N m, applied for the next step")
        self._field("sleeping", i32, N, saved="slots", doc="1 while asleep")
        self._field("sleep_time", f32, N, saved="slots", doc="s, spent below the sleep thresholds")
        self._field(
            "island",
            i32,
            N,
            saved="slots",
            doc="the smallest slot of the body's sleep island (solver/sleep.py); its "
            "own slot otherwise",
        )
        self._field(
            "support",
            i32,
            N,
            saved="slots",
            doc="in a world of uneven masses, how many touching contacts the body "
            "was from an immovable body in the last step (1: on one; 0: none "
            "found): contacts.prepare_pair holds the lower of two bodies still "
            "for the upper one where it is much lighter (SHOCK_RATIO)",
        )
        self._field(
            "enabled",
            i32,
            N,
            saved="slots",
            doc="0: disabled in this world: never moves, pairs, joins islands or "
            "answers a query (Scene.set_enabled)",
        )
        self._field("anchor_position", f32, N, 2, doc="m, the position when the step began")
        self._field("anchor_angle", f32, N, doc="rad, the angle when the step began")
        self._field(
            "delta_position",
            f32,
            N,
            2,
            doc="m, displacement since the step began, kept apart from the pose so "
            "that velocities derived from it and joint errors keep float32 "
            "precision far from the origin (at x = 300 m a pose holds 3e-5 m "
            "steps, a substep may move 1e-6 m)",
        )
        self._field(
            "delta_angle",
            f32,
            N,
            doc="rad, rotation since the step began (apart from the pose, as delta_position)",
        )
        self._field(
            "prev_delta_position", f32, N, 2, doc="m, delta_position when the substep began"
        )
        self._field("prev_delta_angle", f32, N, doc="rad, delta_angle when the substep began")
        # The small worlds' substeps work on a copy of the hot state laid out body-major
        # (solver/interleaved.py): slot b of world w at b * n_worlds + w, scratch.
        for name, n, unit in INTERLEAVED_BODY_FIELDS:
            self._field(
                "interleaved_" + name,
                f32,
                N,
                n,
                doc=f"{unit}, {name} in a small worlds' step, body-major: slot b of world w "
                "at b * n_worlds + w (solver/interleaved.py)",
            )


@ti.data_oriented
class Joints(FieldGroup):
    """The joint model, (n_joints,), shared by all worlds, and each joint slot's motor
    state, (n_joint_slots,). The model is written when a scene is loaded, motor settings
    and targets by Scene (transfer.py), the motor state by the step (solver/joints.py)."""

    def __init__(self, builder: "ModelBuilder", n_bodies: Dim, n_joints: Dim, n_joint_slots: Dim):
        super().__init__(builder)
        J, JS = n_joints, n_joint_slots
        self._field("kind", i32, J, doc="enums.JOINT_REVOLUTE / JOINT_PRISMATIC")
        self._field("parent", i32, J, doc="model row of the parent (body 1)")
        self._field("child", i32, J, doc="model row of the child (body 2)")
        self._field("mode", i32, J, doc="the motor's mode, enums.MOTOR_*")
        self._field("collide", i32, J, doc="1: the joined bodies still collide")
        self._field("reference_angle", f32, J, doc="rad, child minus parent angle at creation")
        self._field("lower", f32, J, doc="lower limit, rad (revolute) or m (prismatic)")
        self._field("upper", f32, J, doc="upper limit, rad (revolute) or m (prismatic)")
        self._field(
            "max_effort", f32, J, doc="the motor's effort limit, N m (revolute) or N (prismatic)"
        )
        self._field("anchor_parent", f32, J, 2, doc="m, the anchor in the parent's frame")
        self._field("anchor_child", f32, J, 2, doc="m, the anchor in the child's frame")
        self._field("axis", f32, J, 2, doc="unit, parent frame (prismatic)")
        self._field(
            "pid", f32, JS, 3, doc="the motor's PID gains, by joint slot (Scene.set_joint_params)"
        )
        self._field(
            "body_joint_start",
            i32,
            n_bodies + 1,
            doc="model row b's joints are body_joints[body_joint_start[b]:body_joint_start[b + 1]]",
        )
        self._field("body_joints", i32, 2 * J, doc="joint indices, grouped by body")
        self._field("body_has_joint", i32, n_bodies, doc="1: the body has a joint")
        self._field(
            "target",
            f32,
            JS,
            saved="joint_slots",
            doc="motor target by mode: rad, rad/s, N m (revolute); m, m/s, N (prismatic)",
        )
        self._field("integral", f32, JS, saved="joint_slots", doc="PID state: the error's integral")
        self._field("prev_error", f32, JS, saved="joint_slots", doc="PID state: the last error")
        self._field(
            "pid_started",
            i32,
            JS,
            saved="joint_slots",
            doc="PID state: 0 until its first update (integral and derivative restart)",
        )
        self._field("effort", f32, JS, doc="the motor's output this substep, N m or N")
        self._field(
            "soft_impulse",
            f32,
            JS,
            4,
            saved="joint_slots",
            doc="the soft-step solver's accumulated impulses (solver/soft_joints.py), "
            "warm started: revolute (anchor x, anchor y, lower, upper limit), N s "
            "and N m s; prismatic (across the axis, angle lock, lower, upper)",
        )


@ti.data_oriented
class Manifolds(FieldGroup):
    """Candidate pairs and their contact manifolds, (n_pairs,), points
    (n_pairs, MAX_MANIFOLD_POINTS).

    Four instances: `manifolds` (the step's pairs, in colour order once coloured; saved),
    `previous` (last step's, in broad-phase order, for warm starting), `staging` (scratch:
    the partners the step's broad phase notes, the reorder by colour, the reported list
    being built, and queries between steps, which must not touch `manifolds`) and
    `reported` (saved: the pairs touching at the end of the
    last step, solver/reporting.py; without the fields that keep a manifold across steps,
    contacts.reuse_manifold). `saved`: the extent of the saved fields (None: scratch).
    """

    def __init__(self, builder: "ModelBuilder", n_slots: Dim, n_pairs: Dim, saved: str | None):
        super().__init__(builder)
        self._declare_pairs(n_slots, n_pairs, saved)
        self._declare_points(n_pairs, saved)
        self._declare_impulses(n_pairs, saved)
        if saved != "reported":
            self._declare_reuse(n_pairs, saved)
        self._field(
            "origin",
            i32,
            n_pairs,
            saved="reported" if saved == "reported" else None,
            doc="reported: the step's pair each entry was copied from, -1 for a "
            "resting pair copied from the list before (solver/reporting.py)",
        )

    def _declare_pairs(self, n_slots: Dim, P: Dim, pairs: str | None):
        """The pairs (P: n_pairs) and each body slot's range of them; `pairs`: their saved
        extent (None: scratch)."""
        self._field(
            "pair_start",
            i32,
            n_slots + 1,
            saved="slots+1" if pairs else None,
            doc="the pairs body slot g found as their lower slot are "
            "[pair_start[g], pair_start[g + 1]) in the broad phase's order "
            "(reported: each slot's sorted by body_b)",
        )
        self._field("body_a", i32, P, saved=pairs, doc="body slot, the lower (body_a < body_b)")
        self._field("body_b", i32, P, saved=pairs, doc="body slot, the higher")
        self._field(
            "color",
            i32,
            P,
            doc="manifolds: the colour the pair had last step, -1 if none; "
            "previous: its colour then",
        )

    def _declare_points(self, P: Dim, pairs: str | None):
        """Each pair's manifold: its points (P: n_pairs, by MAX_MANIFOLD_POINTS), saved with
        extent `pairs` (None: scratch)."""
        M = _POINTS
        self._field("point_count", i32, P, saved=pairs, doc="0: the pair does not touch")
        self._field("normal", f32, P, 2, saved=pairs, doc="unit, from a to b, world frame")
        self._field(
            "point", f32, (P, M), 2, saved=pairs, doc="m, world frame, halfway between the surfaces"
        )
        self._field("depth", f32, (P, M), saved=pairs, doc="m, > 0 overlapping")
        self._field("feature", i32, (P, M), saved=pairs, doc="ids matching points across steps")

    def _declare_impulses(self, P: Dim, saved: str | None):
        """Each pair's impulses (P: n_pairs, by MAX_MANIFOLD_POINTS): accumulated for warm
        starting (saved in the step's pairs) and summed over the step (saved reported)."""
        M = _POINTS
        warm = "pairs" if saved == "pairs" else None  # warm starting: the step's pairs only
        self._field("normal_impulse", f32, (P, M), saved=warm, doc="N s, accumulated")
        self._field(
            "tangent_impulse", f32, (P, M), saved=warm, doc="N s, accumulated, along (-n.y, n.x)"
        )
        reported = "reported" if saved == "reported" else None
        self._field(
            "touching",
            i32,
            P,
            doc="enums.TOUCHED: touched in a substep of this step, enums.HELD: came "
            "within the hold distance only, 0: neither (contacts.solve_velocity)",
        )
        self._field(
            "total_normal_impulse",
            f32,
            (P, M),
            saved=reported,
            doc="N s, applied over the step's substeps",
        )
        self._field(
            "total_tangent_impulse",
            f32,
            (P, M),
            saved=reported,
            doc="N s, applied over the step's substeps",
        )

    def _declare_reuse(self, P: Dim, pairs: str | None):
        """What lets a later narrow phase reuse a pair's manifold (P: n_pairs; not in
        `reported`), saved with extent `pairs` (contacts.reuse_manifold)."""
        self._field(
            "found_pose",
            f32,
            P,
            6,
            saved=pairs,
            doc="(x_a, y_a, angle_a, x_b, y_b, angle_b) m and rad: the bodies' "
            "poses at the pair's last narrow phase (contacts.reuse_manifold; "
            "not in reported)",
        )
        self._field(
            "found_margin",
            f32,
            P,
            saved=pairs,
            doc="m, the margin that narrow phase kept points within; 0: the "
            "manifold may not be reused (new, refreshed or forgotten)",
        )
        self._field(
            "drift",
            f32,
            P,
            saved=pairs,
            doc="m, how far the bodies' material points may have moved since "
            "the manifold was last found afresh (tracked since)",
        )


@ti.data_oriented
class ContactEvents(FieldGroup):
    """The last step's begin and end contact events, saved, written by solver/reporting.py;
    capacity n_pairs each (a list never outgrows the reported pairs it comes from)."""

    def __init__(self, builder: "ModelBuilder", n_pairs: Dim):
        super().__init__(builder)
        self._field(
            "begin_a",
            i32,
            n_pairs,
            saved="begin_events",
            doc="body slot a of each pair that started touching, sorted",
        )
        self._field(
            "begin_b",
            i32,
            n_pairs,
            saved="begin_events",
            doc="body slot b of each pair that started touching",
        )
        self._field(
            "end_a",
            i32,
            n_pairs,
            saved="end_events",
            doc="body slot a of each pair that stopped touching, sorted",
        )
        self._field(
            "end_b",
            i32,
            n_pairs,
            saved="end_events",
            doc="body slot b of each pair that stopped touching",
        )


#: PreparedContacts' fields of one entry a pair (or a (pair, point)): what the narrow phase
#: prepares for every pair on a step's first substep (stages.SUBSTEP_STAGES) and a small
#: world's substeps read interleaved (solver/interleaved.py); the per-body lists and the
#: overflow's entries are the others.
PREPARED_PAIR_FIELDS = (
    "solver_mass",
    "held",
    "restitution",
    "slop",
    "refresh",
    "ref_shift",
    "ref_turn",
    "arm_a",
    "arm_b",
    "normal_mass",
    "tangent_mass",
    "friction",
    "bounced",
    "approach",
)


@ti.data_oriented
class PreparedContacts(FieldGroup):
    """Per pair, what the solver prepares each step (solver/contacts.py), (n_pairs,), points
    (n_pairs, MAX_MANIFOLD_POINTS); each body's pairs; the overflow's Jacobi deltas.
    Scratch."""

    def __init__(self, builder: "ModelBuilder", n_slots: Dim, n_pairs: Dim):
        super().__init__(builder)
        P, M = n_pairs, _POINTS
        self._field(
            "solver_mass",
            f32,
            P,
            4,
            doc="(w_a, I_a, w_b, I_b) this step, 1/kg and 1/(kg m^2) "
            "(contacts.solver_mass: sleep flags only change between steps)",
        )
        self._field("restitution", f32, P, doc="the smaller of the bodies' elasticity")
        self._field("slop", f32, P, doc="m, penetration the position pass leaves alone")
        self._field("refresh", i32, P, doc="1: the narrow phase runs again every substep")
        self._field(
            "held",
            i32,
            P,
            doc="-1: not a world of uneven masses; 0: both bodies as they are; 1 (2): "
            "body a (b) held still for the other this step (contacts.prepare_pair)",
        )
        self._field(
            "ref_shift",
            f32,
            P,
            4,
            doc="m, (delta a, delta b): the bodies' displacement at the last refresh",
        )
        self._field(
            "ref_turn", f32, P, 2, doc="rad, (a, b): the bodies' rotation at the last refresh"
        )
        self._field("arm_a", f32, (P, M), 2, doc="m, the point minus body a's centre at refresh")
        self._field("arm_b", f32, (P, M), 2, doc="m, the point minus body b's centre at refresh")
        self._field("normal_mass", f32, (P, M), doc="1 / effective mass along the normal")
        self._field("tangent_mass", f32, (P, M), doc="1 / effective mass along the tangent")
        self._field("friction", f32, (P, M), doc="mu_s if the point sticks, else mu_k")
        self._field("bounced", i32, (P, M), doc="1: bounced this step")
        self._field(
            "approach",
            f32,
            (P, M),
            doc="m/s, the point's normal velocity when first found in the step "
            "(< 0 closing; the soft step's restitution)",
        )
        self._field(
            "body_contact_start",
            i32,
            n_slots + 1,
            doc="slot g's pairs are body_contacts[body_contact_start[g]:body_contact_start[g + 1]]",
        )
        self._field("body_contacts", i32, 2 * P, doc="pairs, grouped by body, sorted")
        self._field("body_contact_cursor", i32, n_slots, doc="fill cursor of body_contacts")
        self._field(
            "jacobi_delta",
            f32,
            2 * P,
            3,
            doc="what overflow pair i of a Jacobi pass (solver/overflow.py) would do "
            "to its body a (entry 2 i) and b (2 i + 1): (dx, dy, dtheta) m and rad "
            "in the position pass, (dvx, dvy, dw) m/s and rad/s in the velocity "
            "pass",
        )


@ti.data_oriented
class Coloring(FieldGroup):
    """Graph colouring of the constraints (pairs, then joint slots; n_pairs + n_joint_slots
    of them), solver/coloring.py. The saved fields let a step reuse the last colouring; the
    overflow pairs' Jacobi lists (solver/overflow.py) are rebuilt with every colouring (one
    with an overflow is never reused, so none is saved); the rest is scratch."""

    def __init__(self, builder: "ModelBuilder", n_slots: Dim, n_pairs: Dim, n_joint_slots: Dim):
        super().__init__(builder)
        self._declare_colors(n_slots, n_pairs, n_joint_slots)
        self._declare_bidding(n_slots, n_pairs + n_joint_slots)
        self._declare_overflow(n_slots, n_pairs)

    def _declare_colors(self, N: Dim, P: Dim, n_joint_slots: Dim):
        """The colouring itself: each constraint's colour and the lists by colour (N:
        n_slots, P: n_pairs; constraints: P + n_joint_slots)."""
        C = P + n_joint_slots
        self._field(
            "color",
            i32,
            C,
            saved="constraints",
            doc="the constraint's colour; MAX_COLORS: the overflow; UNSOLVED_COLOR: "
            "a pair not solved this step",
        )
        self._field(
            "color_start",
            i32,
            _UNSOLVED + 2,
            saved="all",
            doc="colour c is color_list[color_start[c]:color_start[c + 1]]",
        )
        self._field("color_list", i32, C, saved="constraints", doc="constraint indices by colour")
        self._field(
            "pair_origin",
            i32,
            P,
            saved="pairs",
            doc="the broad-phase index of the pair stored at k",
        )
        self._field(
            "solve",
            i32,
            P,
            doc="1: the solver must look at the pair this step (it has points or is "
            "fast, step.begin_step); only those pairs take a colour",
        )
        self._field(
            "joint_color", i32, n_joint_slots, saved="joint_slots", doc="the joint slot's colour"
        )
        self._field(
            "body_colored_dynamic",
            i32,
            N,
            saved="slots",
            doc="1: dynamic and awake when last coloured",
        )
        self._field(
            "list_counts",
            i32,
            Dim("(UNSOLVED_COLOR + 1) * n_list_chunks + 1", list_counts_length(C.length)),
            doc="entry c * n_list_chunks + chunk: the chunk's constraints of colour c while "
            "the colour lists are built (device.buckets); then their place in color_list",
        )
        self._field(
            "rank",
            i32,
            C + 1,
            doc="pairs before each color_list entry; while the lists are built, each "
            "constraint's place in the overflow colour",
        )

    def _declare_bidding(self, N: Dim, C: Dim):
        """The rounds' scratch: bodies' claims (N: n_slots) and the constraints (C) bidding."""
        self._field(
            "body_claim",
            i32,
            2 * N,
            doc="entry 2 * slot + s % 2: the lowest bid for the body in sub-round s",
        )
        self._field("body_color_mask", i32, N, doc="bit c: a constraint of colour c has the body")
        self._field(
            "body_turn",
            i32,
            N,
            doc="the body's constraints solved so far in a colour pass whose colours run "
            "by turns (StepOptions.colors_by_turns); in a chained launch "
            "(StepOptions.stages_by_turns) its stages and constraints since substep 0's "
            "narrow phase (coloring.chain_event); 0 between passes",
        )
        self._field(
            "body_left",
            i32,
            2 * N,
            doc="entry 2 * slot + c % 2: the body's constraints still uncoloured when the "
            "round of colour c starts (their bids' rank)",
        )
        self._field("uncolored", i32, C, doc="the constraints that bid this step")
        self._field("n_uncolored", i32, (), doc="entries of uncolored")
        self._field(
            "round_left",
            i32,
            _COLORS,
            doc="constraints left uncoloured after each round of a CPU team's colouring",
        )

    def _declare_overflow(self, N: Dim, P: Dim):
        """The overflow pairs' Jacobi lists, by body (N: n_slots; P: n_pairs, two entries
        each), solver/overflow.py."""
        self._field(
            "n_overflow_pairs",
            i32,
            (),
            doc="how many of the overflow colour's constraints are pairs (they come first)",
        )
        self._field("n_jacobi_bodies", i32, (), doc="entries of jacobi_bodies")
        self._field("jacobi_cursor", i32, (), doc="fill cursor of jacobi_bodies")
        self._field("jacobi_count", i32, N, doc="overflow pairs of the body")
        self._field("jacobi_start", i32, N, doc="the body's first entry in jacobi_entries")
        self._field("jacobi_bodies", i32, N, doc="the dynamic bodies in overflow pairs")
        self._field(
            "jacobi_entries",
            i32,
            2 * P,
            doc="entries 2 i + side of overflow pair i, each body's sorted, in "
            "jacobi_entries[jacobi_start[g]:jacobi_start[g] + jacobi_count[g]]",
        )
        self._field(
            "jacobi_ticket", i32, 2 * P, doc="each entry's place among its body's (fill scratch)"
        )


@ti.data_oriented
class BroadPhaseGrid(FieldGroup):
    """The multi-level grid hash of collision/broad_phase.py, rebuilt every step, and the
    fat boxes it is built from (saved); per slot (n_slots,), world (n_worlds,), grid entry
    (n_entries,) or hash-table slot (n_table_slots,)."""

    def __init__(
        self,
        builder: "ModelBuilder",
        n_slots: Dim,
        n_worlds: Dim,
        n_entries: Dim,
        n_table_slots: Dim,
    ):
        super().__init__(builder)
        N, W, E, T = n_slots, n_worlds, n_entries, n_table_slots
        self._field("aabb_lower", f32, N, 2, doc="m, world frame, the body's box")
        self._field("aabb_upper", f32, N, 2, doc="m, world frame, the body's box")
        self._field("level", i32, N, doc="the body's grid level; -1: no shape")
        self._field(
            "partner_mask",
            i32,
            N,
            2,
            doc="small worlds: the bodies of its world the slot owns a pair with, "
            "a bit each (broad_phase.world_partners)",
        )
        self._field(
            "entry_start", i32, N + 1, doc="grid entries per slot, then their exclusive prefix sum"
        )
        self._field("world_level_mask", i32, W, doc="bit L set when level L holds a body")
        self._field("entry_body", i32, E, doc="the entry's body slot")
        self._field("entry_cell", i32, E, 3, doc="the entry's cell (cx, cy, level)")
        self._field("entry_slot", i32, E, doc="the entry's hash-table slot")
        self._field("grid_start", i32, T + 1, doc="entries per table slot, then their prefix sum")
        self._field("grid_cursor", i32, T, doc="fill cursor of each table slot")
        self._field("grid_body", i32, E, doc="each entry's body slot, grouped by table slot")
        self._field(
            "grid_cell", i32, E, 3, doc="each entry's cell (cx, cy, level), grouped by table slot"
        )
        self._field(
            "world_lower",
            f32,
            W,
            2,
            doc="m, the box around the world's AABBs (spatial queries only, "
            "collision/query_grid.py; ray casts clip rays to it)",
        )
        self._field("world_upper", f32, W, 2, doc="m, the box around the world's AABBs")
        self._field(
            "world_sleeps",
            i32,
            W,
            doc="1: a body of the world sleeps (its pairs come from the swept boxes instead)",
        )
        self._field(
            "fat_lower",
            f32,
            N,
            2,
            saved="slots",
            doc="m, the fat box the step's pairs are found with (broad_phase.refit_fat_boxes)",
        )
        self._field("fat_upper", f32, N, 2, saved="slots", doc="m, the fat box")
        self._field(
            "fat_key",
            i32,
            N,
            saved="slots",
            doc="the body's pairing state when its fat box was made (broad_phase.pairing_key)",
        )


@ti.data_oriented
class IslandScratch(FieldGroup):
    """Sleep-island labelling (solver/sleep.py), scratch; per slot (n_slots,) and
    scalars."""

    def __init__(self, builder: "ModelBuilder", n_slots: Dim):
        super().__init__(builder)
        N = n_slots
        self._field("previous_label", i32, N, doc="a sleeping body's label before the labelling")
        self._field("parent", i32, N, doc="union-find parent, a key")
        self._field("wake", i32, N, doc="per island: a mark that it must wake")
        self._field("not_converged", i32, (), doc="1: a labelling round changed a label")
        self._field("woken", i32, (), doc="bodies woken")
        self._field("stamp", i32, (), doc="wake_islands' mark of this call")


@ti.data_oriented
class StepCounts(FieldGroup):
    """Scalars of the step on the device, and a CPU team's barrier (solver/team.py)."""

    def __init__(self, builder: "ModelBuilder"):
        super().__init__(builder)
        self._field("n_pairs", i32, (), doc="pairs among the step's constraints")
        self._field("n_joints", i32, (), doc="joints per world among the step's constraints")
        self._field("entries_needed", i32, (), doc="grid entries the last broad phase needed")
        self._field("pairs_needed", i32, (), doc="pairs the last broad phase needed")
        self._field(
            "most_world_pairs",
            i32,
            (),
            doc="the most pairs a small world has in the step (solver/interleaved.py)",
        )
        self._field(
            "lost_bodies",
            i32,
            (),
            doc="bodies left out of collision for a non-finite or absurd pose",
        )
        self._field("barrier", i32, _BARRIER, doc="a CPU team's barrier, then a GPU block's fences")
        self._field(
            "tally",
            i32,
            _TALLY,
            doc="a CPU team's checks (solver/fused.py): of a kept colouring, the "
            "constraints it no longer fits and the bodies marked fixed; of the "
            "reported list, refresh_tally's three sums; of the fat boxes' refit, "
            "the slots refitted, asleep and restless (and where some sleep, the awake "
            "ones that move); the launch's broad phase and sleep",
        )
        self._field(
            "answers",
            i32,
            _IN_FLIGHT,
            ANSWER_ENTRIES,
            doc="the answers of steps in flight (solver/in_flight.py), by slot, until the "
            "host reads them",
        )
        self._field(
            "flight_caches",
            i32,
            _IN_FLIGHT,
            FLIGHT_CACHE_ENTRIES,
            doc="the StepCache each team's step in flight left (solver/fused.py's "
            "FLIGHT_CACHE_FIELDS; the next launch takes its arguments from it), by slot",
        )
        self._field(
            "stopped",
            i32,
            (),
            doc="1: a step in flight stopped short; the launches after it in its flight "
            "do nothing (the next flight's first launch clears it)",
        )


@ti.data_oriented
class Faults(FieldGroup):
    """Per world (n_worlds,), after a step: its first fault (solver/faults.py)."""

    def __init__(self, builder: "ModelBuilder", n_worlds: Dim):
        super().__init__(builder)
        self._field(
            "first_slot",
            i32,
            n_worlds,
            doc="the first body slot found faulty (a torn joint's child counts); "
            "enums.NO_FAULT if none",
        )
        self._field(
            "first_joint", i32, n_worlds, doc="the first torn joint; enums.NO_FAULT if none"
        )
        self._field("count", i32, (), doc="how many worlds have a fault")


@ti.data_oriented
class ScanScratch(FieldGroup):
    """Scratch of the device prefix sum (scan.exclusive_scan)."""

    def __init__(
        self, builder: "ModelBuilder", n_scan_blocks: Dim, n_scan_chunks: Dim, n_scan_items: Dim
    ):
        super().__init__(builder)
        self._field("blocks", i32, n_scan_blocks, doc="block sums")
        self._field("chunks", i32, n_scan_chunks, doc="chunk sums of the block sums")
        self._field(
            "items",
            i32,
            n_scan_items,
            doc="a number's sum of those before it in its block (GPU: numbers at their "
            "blocks' places)",
        )
        self._field(
            "block_prefix",
            i32,
            n_scan_blocks,
            doc="a block's sum of the blocks before it in its chunk (GPU)",
        )


#: The groups of a pool, by attribute name, in the order kernels take them.
GROUP_NAMES = (
    "model",
    "bodies",
    "joints",
    "manifolds",
    "previous",
    "staging",
    "reported",
    "events",
    "prepared",
    "coloring",
    "grid",
    "islands",
    "counts",
    "faults",
    "scan",
)

#: The names state files and snapshots give a group where they differ from its attribute
#: (the file format is older than the attribute names, and files written before load).
FILE_NAMES = {"manifolds": "contacts", "grid": "broad"}


class DevicePool:
    """The groups, sized by capacities (keys of MIN_CAPACITIES, whose symbols SIZES lists):

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
        N = Dim("n_slots", self.body_capacity)
        P = Dim("n_pairs", self.pair_capacity)
        JS = Dim("n_joint_slots", capacities["joint_slots"])
        models = Dim("n_bodies", capacities["models"])
        worlds = Dim("n_worlds", capacities["worlds"])
        # (Two lists of pairs at once: a team's report scans its begin and end events'
        # flags together, solver/team_stages.exclusive_scans.)
        # (The colour lists scan their chunks' counts, device.buckets.)
        list_counts = list_counts_length(P.length + JS.length)
        scan_len = (
            max(
                self.table_capacity,
                N.length,
                P.length + JS.length,
                2 * (P.length + SCAN_BLOCK),
                list_counts,
            )
            + 1
        )
        builder = _Builder(dry_run)
        self.model = BodyModel(builder, models, N, worlds, Dim("n_filters", capacities["filters"]))
        self.bodies = BodyState(builder, N)
        self.joints = Joints(builder, models, Dim("n_joints", capacities["joints"]), JS)
        self.manifolds = Manifolds(builder, N, P, saved="pairs")
        self.previous = Manifolds(builder, N, P, saved=None)
        self.staging = Manifolds(builder, N, P, saved=None)
        self.reported = Manifolds(builder, N, P, saved="reported")
        self.events = ContactEvents(builder, P)
        self.prepared = PreparedContacts(builder, N, P)
        self.coloring = Coloring(builder, N, P, JS)
        self.grid = BroadPhaseGrid(
            builder,
            N,
            worlds,
            Dim("n_entries", self.entry_capacity),
            Dim("n_table_slots", self.table_capacity),
        )
        self.islands = IslandScratch(builder, N)
        self.counts = StepCounts(builder)
        self.faults = Faults(builder, worlds)
        scan_blocks = (scan_len + SCAN_BLOCK - 1) // SCAN_BLOCK + 1
        self.scan = ScanScratch(
            builder,
            Dim("n_scan_blocks", scan_blocks),
            Dim("n_scan_chunks", (scan_blocks + SCAN_CHUNK - 1) // SCAN_CHUNK + 1),
            # (A GPU's scan keeps a sum a number: scan.exclusive_scan.)
            Dim("n_scan_items", scan_len if _scans_keep_items() else 1),
        )
        self.nbytes = builder.nbytes  # device memory of all the fields
        # The StepCache of the scene whose per-body contact lists (prepared.body_contacts,
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


def field_table() -> str:
    """The text of docs/device-data.md: every group's fields (dtype, shape in SIZES'
    symbols, saved extent, doc), generated from the declarations;
    tests/test_device_data.py checks that the page is current."""
    pool = DevicePool(MIN_CAPACITIES, dry_run=True)
    instances: dict[type, list[str]] = {}  # a class may back several groups (Manifolds)
    for name in GROUP_NAMES:
        instances.setdefault(type(getattr(pool, name)), []).append(name)
    lines = _field_table_intro()
    for cls, names in instances.items():
        lines += _group_table(cls, names, [getattr(pool, name) for name in names])
    return "\n".join(lines) + "\n"


def _field_table_intro() -> list[str]:
    """field_table's lines before the groups: what the pool is, how to read a field, the
    sizes' symbols and the saved extents."""
    return [
        "# Device data",
        "",
        "Generated from the field declarations in `fx2d_gpu/device/__init__.py` "
        "(`device.field_table()`): edit those, then run `python -m tests.test_device_data` "
        "to write this page again.",
        "",
        "All device state lives in the fields of one `DevicePool`, shared by every scene and "
        "split into groups by concept; a kernel takes the groups it uses. *Saved* fields "
        "carry a scene's state from one step to the next (snapshots and state files hold "
        "them; the extent says how many entries); the others (—) are the model, which a scene "
        "loads from its host copy (BodyModel, the joint model), or scratch, rebuilt inside "
        "every step. Shapes are as NumPy sees them (vector components last), in the sizes below; "
        "units are SI, angles radians. A body slot is `world * n_bodies + body`, a joint "
        "slot `world * n_joints + joint`, a constraint a pair then a joint slot.",
        "",
        "A tool or a test reads a field through the scene's step context (the scene is "
        "resident in the pool while it is used; rows past the scene's extent belong to no "
        "one):",
        "",
        "```python",
        "import fx2d_gpu as fx",
        "",
        'scene = fx.Scene(n_worlds=2, arch="auto")',
        "scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)",
        "scene.add_circle((0.0, 1.0), 0.25)",
        "scene.step(1 / 60)",
        "pool = scene.step_context().pool",
        "n_slots = scene.n_worlds * scene.n_bodies",
        "inv_mass = pool.model.inv_mass.to_numpy()[: scene.n_bodies]  # (n_bodies,) 1/kg",
        "position = pool.bodies.position.to_numpy()[:n_slots]  # (n_slots, 2) m",
        "assert inv_mass[0] == 0.0 and inv_mass[1] == 1.0",
        "assert (position.reshape(2, 2, 2) == scene.get_state().position).all()",
        "```",
        "",
        "## Sizes",
        "",
        "| symbol | meaning |",
        "| --- | --- |",
        *(f"| `{symbol}` | {meaning} |" for symbol, meaning in SIZES.items()),
        "",
        "## Saved extents",
        "",
        "| extent | entries saved |",
        "| --- | --- |",
        *(f"| `{extent}` | {meaning} |" for extent, meaning in EXTENTS.items()),
    ]


def _group_table(cls: type, names: list[str], groups: list[FieldGroup]) -> list[str]:
    """field_table's section of group class `cls`: its instances `groups` (the pool's
    `names`), its docstring and a row per field."""
    where = ", ".join(
        f"`pool.{name}`" + (f" (files: `{FILE_NAMES[name]}`)" if name in FILE_NAMES else "")
        for name in names
    )
    summary = " ".join(line.strip() for line in cls.__doc__.splitlines() if line.strip())
    lines = [
        "",
        f"## {cls.__name__}",
        "",
        f"{where}: {summary}",
        "",
        "| field | dtype | shape | saved | doc |",
        "| --- | --- | --- | --- | --- |",
    ]
    for declaration in groups[0].declarations():
        # An instance may lack a field (Manifolds: `reported` keeps no reuse data).
        extents = [
            (name, saved_by_name[declaration.name])
            for name, group in zip(names, groups, strict=True)
            if declaration.name
            in (saved_by_name := {d.name: d.saved for d in group.declarations()})
        ]
        if len(groups) == 1:
            saved = extents[0][1] or "—"
        else:
            saved = ", ".join(f"{name}: {extent}" for name, extent in extents if extent) or "—"
        dtype = "f32" if declaration.dtype == f32 else "i32"
        lines.append(
            f"| `{declaration.name}` | {dtype} | `{declaration.shape_symbols()}` "
            f"| {saved} | {declaration.doc.replace('|', chr(92) + '|')} |"
        )
    return lines


#: Scenes of at most this many body slots (n_worlds * n_bodies) run their kernels' loops
#: serially on CPU backends (scenes of small worlds: SERIAL_WORLDS).
#:
#: Why: on Taichi's CPU backend a parallel loop costs ~15-40 us to start, even when empty
#: (the thread pool hands it to its workers and waits for them: ~0.1 ms on the 2-core VM on
#: 2026-12-07), and a loop of up to 512 items runs on one thread anyway (measured, Taichi
#: 1.7.4). A small scene's step starts ~180 such loops: most of its time. A serial loop
#: starts for free, and the loops outside a CPU team's launch do a few ns of work an item,
#: so up to a few thousand items one thread beats the hand-over. Kernels take `serial` as a
#: compile-time (template) argument read by ti.loop_config, so each kernel has a serial
#: variant, compiled only if such a scene runs. The results are the same: no kernel's
#: result depends on the order of its loop's iterations (the step is bitwise deterministic).
#: Raised from 512 (2026-12-07, 2-core VM, `python -m benchmarks.serial_loops`: median ms a
#: step over 150 steps after 120, 512 and 2048 in turns, two rounds, the CPU team's threads
#: as its duel chose them; serial_loops.csv): demo piles of 600 bodies 7.0-8.0 -> 4.8-6.5
#: (soft step 6.4-6.9 -> 3.7-5.1), 1,000 9.3-10.2 -> 8.7-10.0 (soft 8.1-9.2 -> 6.1-7.3),
#: 1,600 12.5-14.0 -> 12.0-13.5 (soft 10.0-10.1 -> 7.1-9.0), 2,000 18.5-20.7 -> 12.8-13.3
#: (soft 11.3-12.6 -> 11.7-12.1); pyramids of 41 rows (821 bodies) 1.1-2.3 -> 0.7-1.1 (soft
#: 1.3-2.1 -> 0.7-1.0) and 61 rows 6.3-15.0 -> 5.5-7.8 (soft 1.4-1.9 -> 0.9-1.4). A pile of
#: 3,000, over both thresholds, took 21.4-29.4 and 22.6-26.5: the machine's noise.
SERIAL_SLOTS = 2048
#: Scenes of at most this many body slots (whose loops run serially: SERIAL_SLOTS) run a
#: CPU team's launches on a team of one thread (solver/team.team_of_one); larger ones on
#: the threads the team's probe and duel choose. (Small scenes' barriers cost more than a
#: second thread saves.)
TEAM_OF_ONE_SLOTS = 512
#: Queries (ray casts, point and box queries) of a scene whose loops run serially run
#: serially up to this many (collision/queries.py): a query does far more than a step's
#: loop does an item.
SERIAL_QUERIES = 512
#: Scenes of small worlds (solver/context.BY_WORLD_MAX_BODIES) run their loops serially up
#: to this many worlds, whatever their body slots (solver/context.loops_run_serially).
#:
#: Why: most of their loops go a world per item, and those of at most 512 worlds run on one
#: thread anyway, while the ~10-20 parallel loops a step starts cost ~15-40 us each, plus
#: the loops over slots and pairs, whose work per item is a few ns. Measured on the 2-core
#: CPU (soft step, batched_small, parallel against serial loops, medians of 50 steps, two
#: rounds): 256 worlds 3.6-4.9 -> 2.6-2.9 ms a step. The substeps, the heavy per-world
#: loop, still spread over the CPU's threads (solver/team.world_stride).
SERIAL_WORLDS = 512
#: Whether a CPU team's barriers also count their call sites (solver/team.barrier_site_slot:
#: an atomic a member a barrier, in counts.barrier's slots the fences of SPIR-V GPUs use):
#: off but where `python -m benchmarks.launches --barrier-sites` asks, before the kernels
#: compile (they read it at compile time, as SERIAL_SLOTS), to say where a GPU team's
#: barriers go (a grid team's cost a step, on CUDA, is mostly its barriers).
COUNT_BARRIER_SITES = False

#: Smallest capacities of a pool: enough that typical scenes of a process share one compile.
#: Worlds and joint slots are cheap (65,536 worlds: 1.5 MiB; 65,536 joint slots: ~2.3 MiB)
#: and a batch's count of them grows fastest: with 1,024 worlds, the benchmark's 4,096
#: small worlds grew the pool (every kernel compiled again: an 8.5 s first step).
MIN_CAPACITIES = {
    "bodies": 16384,
    "models": 16384,
    "worlds": 65536,
    "pairs": 65536,
    "entries": 65536,
    "joints": 1024,
    "joint_slots": 65536,
    "filters": 1024,
}


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
