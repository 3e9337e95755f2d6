"""Which scene's state is in the shared pool, and where the other scenes' state waits.

One DevicePool serves every scene of a process (device.py). One scene is *resident* in it at
a time; switching saves the resident scene's saved fields (FieldGroup.saved_fields: poses,
velocities, forces, sleep timers and islands, PID state, the step's pairs and manifolds with
their warm-start impulses, the colouring) to the host as a Snapshot and loads the next
scene's. Everything a later step reads is in the snapshot, so any interleaving of scenes,
and any reads between their steps, leave every scene's results bitwise as if it ran alone.

A scene talks to this module through its Binding (no calls back into the scene): the
Binding builds the scene's host model and state anew when bodies or joints are added
(rebuild, keeping the state of those that existed) and is the one writer of the host
model's fields (edit). When a scene outgrows the pool, a bigger pool is made (with
headroom, so growth compiles rarely: _grown_capacities) and the resident scene's fields
are copied into it whole, which is exact even in the middle of a step.
"""

from __future__ import annotations

import functools
import threading
import weakref
from typing import TYPE_CHECKING

import numpy as np

from ..model.builder import SHAPE_FIELDS
from ..model.pairing import never_pairs
from ..model.world_params import DERIVED_FIELDS, WorldParams
from ..model.world_shapes import WORLD_SHAPE_FIELDS, WorldShapes
from . import MIN_CAPACITIES, DevicePool, next_pow2, runtime
from .transfer import read_groups, write_groups

if TYPE_CHECKING:
    from ..model.builder import ModelBuilder


class Snapshot:
    """Host copies of a scene's saved fields: arrays[group][field], each the first
    `extent` entries of the field (see device.EXTENTS)."""

    def __init__(self, arrays: dict[str, dict[str, np.ndarray]]):
        self.arrays = arrays

    @classmethod
    def take(cls, pool: DevicePool, extents: dict[str, int]) -> Snapshot:
        wanted = {
            name: {field: extents.get(extent) for field, extent in saved.items()}
            for name, group in pool.groups().items()
            if (saved := group.saved_fields())
        }
        read = read_groups([(pool.group(name), fields) for name, fields in wanted.items()])
        return cls(dict(zip(wanted, read, strict=True)))

    def restore(self, pool: DevicePool):
        write_groups([(pool.group(name), fields) for name, fields in self.arrays.items()])


class Binding:
    """A scene's claim on the pool: the layout its device arrays were built for, its
    StepCache (for the pair count), its model and, while it is not resident, its state.

    n_worlds, n_bodies, n_joints (per world), n_filters (disable_collision pairs): the
    layout (n_bodies 0: not built yet); model: {group: {field: array}} of the model's
    fields (groups `model` and `joints`, built on the host, uploaded on every load);
    saved: the scene's state while it is not resident (a Snapshot).
    """

    def __init__(self, cache, n_worlds: int):
        self.cache = cache
        self.n_worlds = n_worlds
        self.n_bodies = 0
        self.n_joints = 0
        self.n_filters = 0
        self.model: dict[str, dict[str, np.ndarray]] | None = None
        self.saved: Snapshot | None = None
        self.fingerprint: str | None = None  # of the model, for snapshots (snapshots.py)
        # The model as built, before per-world values (world_params.DERIVED_FIELDS) went
        # in: what the fingerprint hashes, and where apply_params starts from.
        self.base_model: dict[str, dict[str, np.ndarray]] | None = None
        self.solver_flags: dict = {}  # StepContext's flags from the model (solver_flags)

    def needs(
        self, n_bodies: int | None = None, n_joints: int | None = None, n_filters: int | None = None
    ) -> dict:
        """Capacities (keys of device.MIN_CAPACITIES) the scene needs as built, or for the
        layout given (a build about to happen)."""
        n_bodies = self.n_bodies if n_bodies is None else n_bodies
        n_joints = self.n_joints if n_joints is None else n_joints
        n_filters = self.n_filters if n_filters is None else n_filters
        slots, cache = self.n_worlds * n_bodies, self.cache
        return {
            "bodies": slots,
            "models": max(n_bodies, 1),
            "worlds": self.n_worlds,
            "pairs": max(cache.pair_need, cache.n_pairs, cache.n_reported),
            "entries": max(4 * slots, cache.entry_need),
            "joints": n_joints,
            "joint_slots": self.n_worlds * n_joints,
            "filters": 2 * n_filters,
        }

    def extents(self) -> dict:
        """Entries of the scene's saved fields, by extent name (device.EXTENTS)."""
        slots, joint_slots = self.n_worlds * self.n_bodies, self.n_worlds * self.n_joints
        cache = self.cache
        return {
            "slots": slots,
            "slots+1": slots + 1,
            "pairs": cache.n_pairs,
            "joint_slots": joint_slots,
            "constraints": cache.n_pairs + joint_slots,
            "reported": cache.n_reported,
            "begin_events": cache.n_begin_events,
            "end_events": cache.n_end_events,
        }

    def matches(self, builder: ModelBuilder) -> bool:
        """Whether the device arrays were built for `builder`'s model as it is now (its
        bodies, joints and disabled pairs; a body or joint added since needs a rebuild)."""
        return (
            self.n_bodies == len(builder.bodies)
            and self.n_joints == len(builder.joints)
            and self.n_filters == len(builder.no_collision)
        )

    def edit(self, group: str, rows, **values: np.ndarray):
        """Write `values` (field: one value per row) into `rows` of the model as built
        (base_model; group "model": per body, "joints": per joint), and so into the arrays
        every load uploads, which share them, except the fields that follow from per-world
        values (world_params.DERIVED_FIELDS: apply_params recomputes those). The device's
        copy is the caller's to write. The model must be built for the current layout
        (matches)."""
        fields = self.base_model[group]
        for field, value in values.items():
            fields[field][rows] = value
        self.solver_flags = solver_flags(self.model)  # (a filter may have changed)

    def apply_params(
        self, builder: ModelBuilder, params: WorldParams
    ) -> tuple[dict[str, dict[str, np.ndarray]], dict | None]:
        """Recompute the model's fields that follow from the per-world values `params`
        (world_params.DERIVED_FIELDS) from the model as built; returns them ({group: {field:
        array}}), for the caller to write to the device if the scene is resident (every load
        uploads them), and the rows that alone changed since they were last made
        (WorldParams.device_rows; None: any may have)."""
        model = self.model
        for group, fields in DERIVED_FIELDS.items():
            for name in fields:
                if name in self.base_model[group]:
                    model[group][name] = self.base_model[group][name]
        changed = params.device_rows(builder, model)
        self.solver_flags = solver_flags(model)
        arrays = {
            group: {name: model[group][name] for name in fields}
            for group, fields in DERIVED_FIELDS.items()
        }
        return arrays, changed

    def apply_shapes(
        self, builder: ModelBuilder, world_shapes: WorldShapes
    ) -> tuple[dict[str, dict[str, np.ndarray]], tuple | None]:
        """Recompute the model's shape fields (builder.SHAPE_FIELDS, by shape row) and the
        worlds' grid cells from the per-world shapes `world_shapes`, starting from the
        model as built; returns them ({group: {field: array}}), for the caller to write to
        the device if the scene is resident (every load uploads them), and the (shape rows,
        worlds) that alone changed since they were last made (WorldShapes.device_rows;
        None: any may have)."""
        model = self.model["model"]
        for name in SHAPE_FIELDS:
            model[name] = self.base_model["model"][name]
        changed = world_shapes.device_rows(builder, self.model)
        fields = {name: model[name] for name in SHAPE_FIELDS + WORLD_SHAPE_FIELDS}
        return {"model": fields}, changed

    def rebuild(
        self,
        builder: ModelBuilder,
        pending_targets: dict[int, np.ndarray],
        params: WorldParams,
        world_shapes: WorldShapes | None = None,
    ):
        """Build the host model and initial state of `builder`'s current model, keeping, in
        every world, the state of the bodies and joints that existed (pairs and colours start
        over) and the contacts reported between them; motor targets `pending_targets` (joint:
        (n_worlds,)) set before the build go in, the per-world values `params` and the per-world
        shapes `world_shapes` (None: none). Loaded on
        the next acquire.

        Raises:
            CapacityError: the device cannot hold the new layout; nothing changes.
        """
        n_bodies, n_joints, w = len(builder.bodies), len(builder.joints), self.n_worlds
        # Refuse a layout the device cannot hold before building its host arrays (a scene of
        # 10**8 worlds would fill the host first); a refused build changes nothing.
        check_fits(w, self.needs(n_bodies, n_joints, len(builder.no_collision)))
        old = current_state(self).arrays if self.n_bodies else None
        self.model = builder.build_model()
        self.base_model = {group: dict(fields) for group, fields in self.model.items()}
        self.apply_params(builder, params)
        world_shapes = world_shapes or WorldShapes(w)
        self.apply_shapes(builder, world_shapes)
        state = world_shapes.initial_state(builder, np.arange(w))
        if old is not None:
            _keep_old_rows(state["bodies"], old["bodies"], w, self.n_bodies, n_bodies)
            _keep_old_rows(state["joints"], old["joints"], w, self.n_joints, n_joints)
        targets = state["joints"]["target"].reshape(w, n_joints)
        for joint, values in pending_targets.items():
            targets[:, joint] = values
        n_reported = 0
        if old is not None and "reported" in old:
            state["reported"] = _renumbered_reported(old["reported"], w, self.n_bodies, n_bodies)
            n_reported = len(state["reported"]["body_a"])
        self.saved = Snapshot(state)
        self.n_bodies, self.n_joints = n_bodies, n_joints
        self.n_filters = len(builder.no_collision)
        self.fingerprint = None
        self.cache.forget_pairs()
        self.cache.n_reported = n_reported  # sleeping bodies keep their contacts
        release(self)


def solver_flags(model: dict) -> dict:
    """StepContext's flags that follow from the model (the groups of build_model, with the
    per-world rows): has_bullets, has_kinematic (a body is kinematic), immovable_sweep (in
    some world the dynamic bodies' masses differ by more than
    contacts.IMMOVABLE_SWEEP_RATIO: BodyModel.uneven) and contact_free (no two bodies of a
    world may ever pair: pairing.never_pairs)."""
    bodies = model["model"]
    return {
        "has_bullets": bool(bodies["bullet"].any()),
        "has_kinematic": bool(bodies["kinematic"].any()),
        "immovable_sweep": bool(bodies["uneven"].any()),
        "contact_free": never_pairs(model),
    }


def _keep_old_rows(new: dict, old: dict, n_worlds: int, old_rows: int, rows: int):
    """Copy each world's first old_rows rows (bodies or joints) of the old arrays into the
    new layout of `rows` per world (island labels are slots: renumbered to the new layout)."""
    for key, value in old.items():
        if key == "island":
            value = (
                value.reshape(n_worlds, old_rows) % max(old_rows, 1)
                + rows * np.arange(n_worlds)[:, None]
            ).ravel()
        target = new[key].reshape(n_worlds, rows, *new[key].shape[1:])
        target[:, :old_rows] = value.reshape(n_worlds, old_rows, *value.shape[1:])


def _renumbered_reported(old: dict, n_worlds: int, old_rows: int, rows: int) -> dict:
    """The reported contacts (saved fields of pool.reported) in a layout of `rows` bodies
    per world instead of old_rows: body slots renumbered (the order stays sorted), each
    lower slot's range counted again."""
    new = {key: value.copy() for key, value in old.items() if key != "pair_start"}
    for key in ("body_a", "body_b"):
        slots = old[key].astype(np.int64)
        new[key] = (slots // old_rows * rows + slots % old_rows).astype(np.int32)
    counts = np.bincount(new["body_a"], minlength=n_worlds * rows)
    new["pair_start"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return new


#: pool: the shared DevicePool; resident: a weakref to the Binding whose scene is in it;
#: written: {capacity key: entries} as far as the scenes resident since the last load (that
#: one included) may have written into each capacity; past it the saved and model fields
#: hold 0 (_load clears them that far).
_state: dict = {"pool": None, "resident": None, "written": None}

#: Taichi runs one program per process and is not thread-safe: every Scene call that
#: touches the device holds this lock, so scenes used from several threads take turns
#: (correct, not parallel). Reentrant: a Scene method may call another.
DEVICE_LOCK = threading.RLock()


def serialized(method):
    """Decorator: run a Scene method holding DEVICE_LOCK, after reading the answers of the
    scene's steps in flight (Scene._settle, solver/in_flight.py): what the method reads or
    changes is the scene after its steps, each finished."""

    @functools.wraps(method)
    def locked(scene, *args, **kwargs):
        with DEVICE_LOCK:
            scene._settle()
            return method(scene, *args, **kwargs)

    return locked


def locked(method):
    """Decorator: run a Scene method holding DEVICE_LOCK (serialized without reading the
    answers of steps in flight: Scene.step, which may launch another)."""

    @functools.wraps(method)
    def run(*args, **kwargs):
        with DEVICE_LOCK:
            return method(*args, **kwargs)

    return run


def _resident() -> Binding | None:
    ref = _state["resident"]
    return ref() if ref is not None else None


def is_resident(binding: Binding) -> bool:
    return _resident() is binding


def current_pool() -> DevicePool | None:
    return _state["pool"]


def acquire(binding: Binding) -> DevicePool:
    """The shared pool with `binding`'s scene resident in it, grown if its needs exceed it
    (ValueError first if the grown pool cannot be had, see check_fits); the previously
    resident scene, if another, is saved to the host first."""
    pool, resident = _state["pool"], _resident()
    needs = binding.needs()
    if pool is not None and pool.fits(needs):
        if resident is not binding:
            if resident is not None:
                _evict(resident, pool)
            _load(binding, pool)
        _note_written(needs)
        return pool
    capacities = _grown_capacities(pool, needs)
    check_fits(binding.n_worlds, needs, capacities)
    grown = DevicePool(capacities)
    if pool is not None and resident is binding:
        _copy_pool(pool, grown)  # exact even in the middle of a step
        _state["written"] = dict(pool.capacities)
    else:
        if resident is not None:
            _evict(resident, pool)
        _state["written"] = dict.fromkeys(capacities, 0)  # a new pool's fields are 0
        _load(binding, grown)
    if pool is not None:
        pool.destroy()
    _state["pool"] = grown
    _state["resident"] = weakref.ref(binding)
    _note_written(needs)
    return grown


def _note_written(needs: dict):
    """Count the resident scene's needs (Binding.needs: what its steps and writes reach in
    each capacity) in what scenes have written into the pool since the last load."""
    written = _state["written"]
    for key, need in needs.items():
        written[key] = max(written[key], need)


def current_state(binding: Binding) -> Snapshot:
    """The scene's saved state now: taken from the pool if it is resident."""
    if is_resident(binding):
        return Snapshot.take(_state["pool"], binding.extents())
    return binding.saved


def _grown_capacities(pool: DevicePool | None, needs: dict) -> dict:
    """Capacities of the pool that replaces `pool` for `needs` (the first pool where `pool`
    is None): every capacity that must grow, and every capacity of a first pool, takes
    GROWTH_HEADROOM times what is needed (powers of two, at least MIN_CAPACITIES), so that a
    process whose scenes keep growing recompiles rarely, unless that pool would pass
    GROWTH_BUDGET_BYTES (then a smaller headroom, down to the fit); room for PAIRS_PER_SLOT
    pairs a body slot."""
    current = pool.capacities if pool is not None else MIN_CAPACITIES
    headroom = GROWTH_HEADROOM
    while True:
        capacities = {}
        for key, floor in MIN_CAPACITIES.items():
            need = needs.get(key, 0)
            if pool is not None and need <= current[key]:
                capacities[key] = max(current[key], floor)
            else:
                capacities[key] = max(floor, next_pow2(need * headroom))
        capacities["pairs"] = max(capacities["pairs"], PAIRS_PER_SLOT * capacities["bodies"])
        if headroom == 1 or DevicePool.bytes_needed(capacities) <= _growth_budget():
            return capacities
        headroom //= 2


#: A pool takes this many times the needs that made it (the first scene's, or those that
#: made it grow): growing compiles every kernel again (a field's size is compiled in),
#: 4-10 s for a large scene's kernels on the 2-core CPU (warm and cold offline cache). With
#: 10, a scene up to 10x the one that made the pool fits without a compile (measured: a
#: 2,000-body pile, then a 20,000-body one, first step 10.4 s cold / 4.3 s warm with 4,
#: 0.36-0.58 s with 10), as long as the pool stays within GROWTH_BUDGET_BYTES. A step's cost
#: does not depend on the pool's size (2,000-body pile: 17.0-18.4 ms a step in pools of
#: 16,384, 32,768 and 131,072 body slots): the kernels loop over the scene, not the pool.
GROWTH_HEADROOM = 10
#: The most device memory a pool takes for headroom (bytes): past it, a pool grows to fit.
GROWTH_BUDGET_BYTES = 1 << 30


def _growth_budget() -> int:
    """GROWTH_BUDGET_BYTES, or a quarter of the memory available if that is less."""
    available = runtime.available_memory()
    return GROWTH_BUDGET_BYTES if available is None else min(GROWTH_BUDGET_BYTES, available // 4)


#: Candidate pairs a pool holds per body slot before it must grow. A growing pool compiles
#: every kernel again (their fields' sizes are compiled in: ~30 s on the 2-core CPU with an
#: empty offline cache), and a pile being poured gains pairs as it packs: a 30,000-body pour
#: went from 65,536 to 131,072 pairs at step 57 (a 28.6 s step). Piles pack to ~2-4
#: candidate pairs a body (the 100k pour: 362,964 at step 240), so 4 a slot leaves them
#: room; each pair costs ~400 bytes of device memory (a body slot ~290).
PAIRS_PER_SLOT = 4


#: Most body slots (n_worlds * n_bodies) and candidate pairs a pool holds: every index
#: on the device is a 32-bit integer (the grid's hash table has 4 slots per body).
MAX_SLOTS = 1 << 28
MAX_PAIRS = 1 << 30


class CapacityError(ValueError):
    """A scene needs more than the device can give it: more memory than is available, more
    slots than 32-bit indices reach, or (collision/broad_phase.MAX_PAIRS_PER_BODY) more
    candidate pairs than its bodies can sensibly have. Raised before anything is allocated;
    a step refused for it leaves the scene as it was (Scene.step)."""


def check_fits(n_worlds: int, needs: dict, capacities: dict | None = None):
    """CapacityError, before anything is allocated, if a scene of n_worlds worlds and these
    needs (Binding.needs) is past the 32-bit index range, or if the pool it would take
    (`capacities`; by default what the current pool would grow to) is larger than the
    memory available (runtime.available_memory)."""
    layout = (
        f"n_worlds={n_worlds} x n_bodies={needs['bodies'] // n_worlds} = "
        f"{needs['bodies']:,} body slots"
    )
    if needs["bodies"] > MAX_SLOTS or needs["pairs"] > MAX_PAIRS:
        raise CapacityError(
            f"{layout}: more than the {MAX_SLOTS:,} body slots (or "
            f"{MAX_PAIRS:,} pairs) one scene can index; use fewer worlds"
        )
    pool = _state["pool"]
    if capacities is None:
        if pool is not None and pool.fits(needs):
            return
        capacities = _grown_capacities(pool, needs)
    needed = DevicePool.bytes_needed(capacities)
    available_bytes = runtime.available_memory()
    if available_bytes is not None and needed > available_bytes:
        raise CapacityError(
            f"{layout}: the device arrays would need {needed / 2**30:.1f} GiB, "
            f"{available_bytes / 2**30:.1f} GiB of memory are available; use "
            "fewer worlds or bodies"
        )


def release(binding: Binding):
    """Forget `binding` as the resident one, without saving: the scene has replaced its
    state (binding.saved) and the next acquire loads it."""
    if _resident() is binding:
        _state["resident"] = None


def _evict(binding: Binding, pool: DevicePool):
    _note_written(binding.needs())  # its last step's pairs and reports
    binding.saved = Snapshot.take(pool, binding.extents())
    _state["resident"] = None


def _load(binding: Binding, pool: DevicePool):
    # The model and the saved state in one launch (write_groups).
    arrays = list((binding.model or {}).items())
    if binding.saved is not None:
        arrays += list(binding.saved.arrays.items())
    needs = binding.needs()
    write_resident(pool, arrays, needs)
    _state["written"] = dict.fromkeys(_state["written"], 0)
    _note_written(needs)
    pool.body_lists_of = None  # the loaded pairs may not be the ones the lists were made of
    binding.saved = None
    _state["resident"] = weakref.ref(binding)


def write_resident(
    pool: DevicePool, arrays: list[tuple[str, dict[str, np.ndarray]]], needs: dict | None = None
):
    """[(group name, {field: value})] into the pool (one launch, transfer.write_groups),
    each field 0 past its value as far as the scenes resident since the last load wrote
    (and, with `needs`, a scene about to be resident: Binding.needs), and no further: past
    that the pool's fields are 0 already, and clearing them whole made a switch between two
    81-body scenes cost ~11 ms in a fresh pool and 65-74 ms in one sized by a 20,000-body
    pile (benchmarks.scene_switch), where such a scene steps in 0.5 ms."""
    written = _state["written"]
    if needs is not None:
        written = {key: max(value, needs.get(key, 0)) for key, value in written.items()}
    # Rounded up to powers of two (clearing up to twice as far): the reach of a few sizes,
    # cached, instead of a dry-run pool (~0.9 ms) for every count of pairs a pile passes.
    reach = _field_entries(tuple(sorted((key, next_pow2(value)) for key, value in written.items())))
    write_groups(
        [(pool.group(name), fields) for name, fields in arrays],
        clear_to=[{field: reach[name][field] for field in fields} for name, fields in arrays],
    )


@functools.lru_cache(maxsize=64)
def _field_entries(capacities: tuple) -> dict[str, dict[str, int]]:
    """{group: {field: entries along its first dimension}} of a pool of `capacities`
    ((key, capacity) pairs), without allocating it: how far a field reaches in the pool
    when a scene's needs are those capacities."""
    pool = DevicePool(dict(capacities), dry_run=True)
    return {
        name: {d.name: d.entries for d in group.declarations()}
        for name, group in pool.groups().items()
    }


def _copy_pool(old: DevicePool, new: DevicePool):
    """Every field of `old` into the start of the same field of `new` (capacities only
    grow, and a slot's index does not depend on them)."""
    groups = old.groups()
    values = read_groups([(group, dict.fromkeys(group.field_names())) for group in groups.values()])
    write_groups([(new.group(name), fields) for name, fields in zip(groups, values, strict=True)])
