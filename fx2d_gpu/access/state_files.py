"""State files and snapshots from elsewhere: reading and checking them whole.

A snapshot, and above all a state file, is untrusted input: a file can copy a fingerprint,
and the kernels index the device fields with the integers it holds, unchecked (a body
index past the end is a write past the end of a field: a crash). So restore_snapshot and
read_state_file check everything (check_snapshot) before anything in the scene changes:
the layout and clock, the step cache, every array's name, dtype and shape, every float
finite, every index within the range the kernels read it in, and the structures the step
walks (pair lists, the colour lists it reuses). A refusal is a ValueError naming the field
and leaves the scene as it was. Reading a file is bounded by what the scene's state can
take: an archive with more members, or members larger, than the scene's state could need
is refused from its zip and .npy headers, before anything is decompressed.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import stat
import struct
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..device import (
    MAX_COLORS,
    MAX_MANIFOLD_POINTS,
    MIN_CAPACITIES,
    UNSOLVED_COLOR,
    DevicePool,
    f32,
    residency,
)
from ..enums import MOTOR_MODES
from ..model.builder import TARGET_LIMITS
from ..model.world_params import BODY_PARAMS
from ..model.world_shapes import GEOMETRY_ARRAYS
from ..physics.solver.context import StepCache
from ..physics.solver.reporting import MAX_REFRESH_BACKOFF
from ..shapes import FLOAT32_MAX, MAX_COORDINATE, MAX_POLYGON_VERTICES, MAX_SPEED

#: Version of the .npz layout written by save; load refuses others. 2: enabled flags,
#: reported contacts and events; 3: the colour lists end with the pairs left unsolved
#: (device.UNSOLVED_COLOR: color_start has one entry more); 4: per-world values
#: (params/<name>, world_params.WorldParams.arrays); 5: the bodies' support
#: (device.BodyState.support); 6: the soft-step solver's joint impulses
#: (device.Joints.soft_impulse); 7: what the narrow phase needs to keep a manifold
#: (device.Manifolds.found_pose, found_margin, drift). Format 3 files load, with the
#: scene's own values in every world; format 3 and 4 files with no support counted (as
#: before a scene's first step); format 3 to 5 files with no joint impulses carried;
#: format 3 to 6 files with every manifold found afresh in the next step (found_margin 0).
#: 9: per-world geometry (params/shape_radius, shape_size, shape_length, shape_vertices,
#: static_pose: world_shapes.WorldShapes.arrays), where a scene has any; older files have
#: none (the add_* shapes in every world).
FORMAT_VERSION = 9
READABLE_VERSIONS = (3, 4, 5, 6, 7, 8, 9)
#: Saved fields that older formats lack, the format that added each and the shape of one
#: entry and its extent: such a file loads with the field zero.
_ADDED_FIELDS = {
    "device/bodies/support": (5, "slots", (), np.int32),
    "device/joints/soft_impulse": (6, "joint_slots", (4,), np.float32),
    "device/contacts/found_pose": (7, "pairs", (6,), np.float32),
    "device/contacts/found_margin": (7, "pairs", (), np.float32),
    "device/contacts/drift": (7, "pairs", (), np.float32),
}
#: Step cache fields that older formats lack, the format that added each and the value such
#: a file loads with (colors_fresh False: the next colouring from scratch that falls due is
#: made, which gives the colours a format 8 file would have kept).
_ADDED_CACHE_FIELDS = {"colors_fresh": (8, False)}
#: Joint fields that set_joint_mode changes: state of a snapshot, not part of the model.
MOTOR_FIELDS = ("mode", "pid", "max_effort")

#: Most characters of a state file's meta (JSON). Save writes ~750 (the step cache's ~26
#: fields most of them); the bound keeps a hostile file from making json parse megabytes.
MAX_META_CHARS = 16384
#: Deepest nesting of brackets the meta may have: an object holding the cache object. Deeper
#: JSON is refused before json.loads, whose recursion would end in a RecursionError.
_MAX_META_DEPTH = 2
#: Most bytes of a .npy member's header (magic, version, length, the dict): np.save writes
#: 128 for the arrays of a state file; NumPy reads up to 10,000.
_NPY_HEADER_MAX = 4096
#: Bytes a member of a state file may take in the zip besides its .npy data: its local
#: header and central-directory entry (with their names and zip64 fields), and deflate's
#: worst-case growth of incompressible data (~5 bytes a 16 KiB block, see _file_bound).
_ZIP_MEMBER_OVERHEAD = 1024
_META_KEYS = (
    "format_version",
    "fingerprint",
    "n_worlds",
    "n_bodies",
    "n_joints",
    "cache",
    "time",
    "step_count",
)
#: Largest counter a file's cache or step_count may hold (they are Python ints, which JSON
#: would let grow without bound).
_MAX_COUNTER = (1 << 63) - 1
#: Names of a state file's members: meta, device/<group>/<field>, motors/<field>,
#: forces/<body>/force and forces/<body>/torque (each with np.savez's ".npy").
_FORCE_KEY = re.compile(r"forces/(0|[1-9][0-9]{0,9})/(force|torque)")
_DEVICE_KEY = re.compile(r"device/([a-z_][a-z0-9_]*)/([a-z_][a-z0-9_]*)")
_PARAMS_KEY = re.compile(r"params/(gravity|pid|" + "|".join((*BODY_PARAMS, *GEOMETRY_ARRAYS)) + ")")


def model_fingerprint(model: dict, n_worlds: int) -> str:
    """A hash of the model's device arrays as built (Binding.base_model: the bodies' own
    materials, not the per-world values, which a snapshot carries; motor settings left
    out) and the world count."""
    digest = hashlib.sha1(str(n_worlds).encode())
    for group in sorted(model):
        for name in sorted(model[group]):
            if group == "joints" and name in MOTOR_FIELDS:
                continue
            value = np.ascontiguousarray(model[group][name])
            digest.update(f"{group}/{name}/{value.dtype}/{value.shape}".encode())
            digest.update(value.tobytes())
    return digest.hexdigest()


def scene_fingerprint(binding) -> str:
    """The fingerprint of a built scene's model (its residency.Binding), computed once."""
    if binding.fingerprint is None:
        binding.fingerprint = model_fingerprint(binding.base_model, binding.n_worlds)
    return binding.fingerprint


# ---------------------------------------------------------------------------- checks


class _Refused(ValueError):
    """A state file or snapshot refused for its contents (the message names the field)."""


class _Damaged(Exception):
    """A file that is not a readable state file (reported as "not a fx2d_gpu state file")."""


def plainly(check, *args):
    """check(*args), its refusal raised as a plain ValueError (the class is an internal
    marker that tells refusals from the readers' errors)."""
    try:
        check(*args)
    except _Refused as error:
        raise ValueError(str(error)) from None


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_real(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not _is_bool(value)


def _finite(value) -> bool:
    """A real number that is finite as a float (JSON ints have no bound)."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


@dataclass
class _Layout:
    """What a snapshot's arrays are sized by: the scene's layout and the step cache's
    counts. n_slots = n_worlds * n_bodies body slots; joint_slots = n_worlds * n_joints;
    max_pairs: the most candidate pairs the layout can have (every pair of bodies of a
    world: pairs never cross worlds)."""

    n_worlds: int
    n_bodies: int
    n_joints: int

    @property
    def n_slots(self) -> int:
        return self.n_worlds * self.n_bodies

    @property
    def joint_slots(self) -> int:
        return self.n_worlds * self.n_joints

    @property
    def max_pairs(self) -> int:
        return self.n_worlds * (self.n_bodies * (self.n_bodies - 1) // 2)


def _check_layout(values: dict, where: str, prefix: str, binding=None) -> _Layout:
    """The layout (n_worlds, n_bodies, n_joints) of a snapshot or file's meta, ints; with a
    binding, the scene's."""
    for key in ("n_worlds", "n_bodies", "n_joints"):
        value = values[key]
        if not _is_int(value):
            raise _Refused(f"{where}: {prefix}{key} must be an int, got {value!r}")
        if binding is not None and value != getattr(binding, key):
            raise _Refused(
                f"{where}: {prefix}{key} is {value}, this scene has "
                f"{getattr(binding, key)} (the snapshot is of another scene)"
            )
    layout = _Layout(int(values["n_worlds"]), int(values["n_bodies"]), int(values["n_joints"]))
    if (
        layout.n_worlds < 1
        or layout.n_bodies < 1
        or layout.n_joints < 0
        or layout.n_slots > residency.MAX_SLOTS
        or layout.joint_slots > residency.MAX_SLOTS
    ):
        raise _Refused(
            f"{where}: {prefix}n_worlds, n_bodies, n_joints = {layout.n_worlds}, "
            f"{layout.n_bodies}, {layout.n_joints}: not a layout a scene can have"
        )
    return layout


def _cache_bounds(layout: _Layout, cache: dict) -> dict:
    """{field: (lowest, highest)} each int field of the step cache may hold in a scene of
    this layout (fields not named: any count from 0); `cache` has been type-checked."""
    pairs = layout.max_pairs
    return {
        "n_pairs": (0, pairs),
        "colored_pairs": (0, pairs),
        "n_reported": (0, pairs),
        # The broad phase and the report ask for a quarter more than they found.
        "pair_need": (0, pairs + pairs // 4),
        # A box covers at most 3 x 3 cells of its level (2 x 2, and a row more where
        # rounding far from the origin adds one).
        "entry_need": (0, 9 * layout.n_slots),
        "n_colors": (0, MAX_COLORS),
        "n_overflow": (0, pairs + layout.joint_slots),
        "lost_bodies": (0, layout.n_slots),
        # Begin events are pairs of the reported list; end events pairs of the list before
        # (in a pool that held it: at least MIN_CAPACITIES' pairs, see _check_fits).
        "n_begin_events": (0, cache["n_reported"]),
        "n_end_events": (0, pairs),
        "refresh_backoff": (0, MAX_REFRESH_BACKOFF),
        "refresh_skips": (0, MAX_REFRESH_BACKOFF),
    }


def _check_cache(cache, layout: _Layout, where: str, prefix: str) -> dict:
    """The step cache of a snapshot: exactly StepCache's fields, each of its field's type
    (bool, or an int within _cache_bounds)."""
    name = f"{prefix}cache"
    if not isinstance(cache, dict):
        raise _Refused(
            f"{where}: {name} must be a dict of StepCache's fields, got {type(cache).__name__}"
        )
    defaults = {field.name: field.default for field in dataclasses.fields(StepCache)}
    for key in cache:
        if key not in defaults:
            raise _Refused(f"{where}: {name} has an unknown field {key!r}")
    for key, default in defaults.items():
        if key not in cache:
            raise _Refused(f"{where}: {name}.{key} is missing")
        value = cache[key]
        if isinstance(default, bool):
            if not _is_bool(value):
                raise _Refused(f"{where}: {name}.{key} must be a bool, got {value!r}")
        elif not _is_int(value):
            raise _Refused(f"{where}: {name}.{key} must be an int, got {value!r}")
    bounds = _cache_bounds(layout, cache)
    for key, default in defaults.items():
        if isinstance(default, bool):
            continue
        low, high = bounds.get(key, (0, _MAX_COUNTER))
        if not low <= cache[key] <= high:
            raise _Refused(
                f"{where}: {name}.{key} is {cache[key]}, expected {low} to {high} in this scene"
            )
    return cache


def _check_meta(values: dict, where: str, prefix: str, binding=None) -> _Layout:
    """fingerprint, layout, cache, time and step_count of a snapshot (or a file's meta)."""
    layout = _check_layout(values, where, prefix, binding)
    fingerprint = values["fingerprint"]
    if not isinstance(fingerprint, str):
        raise _Refused(f"{where}: {prefix}fingerprint must be a str, got {fingerprint!r}")
    if binding is not None and fingerprint != scene_fingerprint(binding):
        raise _Refused(
            f"{where}: the snapshot is of another scene (its bodies, joints, "
            "disabled pairs or n_worlds differ)"
        )
    time = values["time"]
    if not _is_real(time) or not _finite(time) or time < 0:
        raise _Refused(f"{where}: {prefix}time must be a finite number >= 0 (s), got {time!r}")
    steps = values["step_count"]
    if not _is_int(steps) or not 0 <= steps <= _MAX_COUNTER:
        raise _Refused(f"{where}: {prefix}step_count must be an int >= 0, got {steps!r}")
    _check_cache(values["cache"], layout, where, prefix)
    return layout


@functools.cache
def _saved_fields() -> dict[str, dict[str, tuple]]:
    """{group: {field: (dtype, element shape, extent name, entries)}} of the fields a scene
    saves (device.FieldGroup.saved_fields), from the fields' declarations (a pool counted,
    not allocated: no pool need exist, and Taichi's field.shape costs ~4 us a call). Every
    pool has the same fields, of capacities that only size their first axis (entries: that
    size, which an extent "all" field saves whole: a fixed one)."""
    pool = DevicePool(MIN_CAPACITIES, dry_run=True)
    spec = {}
    for name, group in pool.groups().items():
        for d in group.declarations():
            if d.saved is not None:
                dtype = np.dtype(np.float32 if d.dtype == f32 else np.int32)
                spec.setdefault(name, {})[d.name] = (dtype, d.element_shape, d.saved, d.entries)
    return spec


def _expected_arrays(layout: _Layout, cache: dict, spec: dict) -> dict[str, tuple]:
    """{key: (dtype, shape)} of every device and motor array of a snapshot of this layout
    and cache (keys as in a file: device/<group>/<field>, motors/<field>)."""
    extents = _extents(layout, cache)
    expected = {}
    for group, fields in spec.items():
        for name, (dtype, element, extent, whole) in fields.items():
            count = whole if extent == "all" else extents[extent]
            expected[f"device/{group}/{name}"] = (dtype, (count,) + element)
    J = layout.n_joints
    expected["motors/mode"] = (np.dtype(np.int32), (J,))
    expected["motors/pid"] = (np.dtype(np.float32), (J, 3))
    expected["motors/max_effort"] = (np.dtype(np.float32), (J,))
    return expected


def _extents(layout: _Layout, cache: dict) -> dict[str, int]:
    """Entries of each extent (device.EXTENTS) for this layout and cache (as
    residency.Binding.extents gives them for the scene's own)."""
    binding = residency.Binding(StepCache(**cache), layout.n_worlds)
    binding.n_bodies, binding.n_joints = layout.n_bodies, layout.n_joints
    return binding.extents()


def check_containers(snapshot: dict, where: str):
    """The types of a snapshot's containers (`snapshot`: its fields, vars(SceneSnapshot)):
    device {str: {str: ndarray}}, motors and params {str: ndarray}, cache a dict, forces {int:
    (ndarray, ndarray)}; what copy() needs."""
    if not isinstance(snapshot["device"], dict) or not all(
        isinstance(fields, dict) for fields in snapshot["device"].values()
    ):
        raise _Refused(f"{where}: device must be a dict of dicts of arrays")
    for group, fields in snapshot["device"].items():
        for name, value in fields.items():
            if not isinstance(value, np.ndarray):
                raise _Refused(
                    f"{where}: device/{group}/{name} must be a NumPy array, got "
                    f"{type(value).__name__}"
                )
    for section in ("motors", "params"):
        if not isinstance(snapshot[section], dict):
            raise _Refused(f"{where}: {section} must be a dict of arrays")
        for name, value in snapshot[section].items():
            if not isinstance(value, np.ndarray):
                raise _Refused(
                    f"{where}: {section}/{name} must be a NumPy array, got {type(value).__name__}"
                )
    if not isinstance(snapshot["cache"], dict):
        raise _Refused(
            f"{where}: cache must be a dict of StepCache's fields, got "
            f"{type(snapshot['cache']).__name__}"
        )
    if not isinstance(snapshot["forces"], dict):
        raise _Refused(f"{where}: forces must be a dict {{body: (force, torque)}}")
    for body, value in snapshot["forces"].items():
        if not (
            isinstance(value, (tuple, list))
            and len(value) == 2
            and all(isinstance(v, np.ndarray) for v in value)
        ):
            raise _Refused(f"{where}: forces/{body} must be (force, torque), two NumPy arrays")


def check_snapshot(snapshot: dict, binding, where: str, prefix: str = ""):
    """Everything in `snapshot` (its fields, vars(SceneSnapshot)) fits the built scene of
    `binding` (resident in the pool), else _Refused (a ValueError) naming the field,
    "<where>: <field> ...": the meta (layout, fingerprint, cache, clock, `prefix` before
    their names: "meta." in a file), the set of device and motor arrays, each one's dtype
    and shape (from the cache's counts), their values (_check_values) and the forces. The
    containers' types were checked (check_containers). Reads no device data."""
    meta = {key: snapshot[key] for key in _META_KEYS if key != "format_version"}
    layout = _check_meta(meta, where, prefix, binding)
    expected = _expected_arrays(layout, snapshot["cache"], _saved_fields())
    arrays = {
        f"device/{g}/{k}": v for g, fields in snapshot["device"].items() for k, v in fields.items()
    }
    arrays.update({f"motors/{k}": v for k, v in snapshot["motors"].items()})
    for key in arrays:
        if key not in expected:
            raise _Refused(f"{where}: {key} is not a field this scene saves")
    for key, (dtype, shape) in expected.items():
        if key not in arrays:
            raise _Refused(f"{where}: {key} is missing")
        _check_array(arrays[key], dtype, shape, where, key)
    _check_forces(snapshot["forces"], layout, where)
    _check_values(arrays, layout, snapshot["cache"], where)
    _check_fits(layout, snapshot["cache"], binding, where, prefix)


def _check_array(value: np.ndarray, dtype, shape: tuple, where: str, key: str):
    if value.dtype != dtype:
        raise _Refused(f"{where}: {key} has dtype {value.dtype}, expected {dtype}")
    if value.shape != shape:
        raise _Refused(f"{where}: {key} has shape {value.shape}, expected {shape}")


def _check_forces(forces: dict, layout: _Layout, where: str):
    """Pending forces: {body in [0, n_bodies): (force (n_worlds, 2), torque (n_worlds,))},
    float64 (as apply_force keeps them), finite and within float32's range (the device
    takes them as float32)."""
    w = layout.n_worlds
    for body, (force, torque) in forces.items():
        if not _is_int(body) or not 0 <= body < layout.n_bodies:
            raise _Refused(
                f"{where}: forces/{body}: a force on body {body!r}, this scene has "
                f"bodies 0 to {layout.n_bodies - 1}"
            )
        for name, value, shape in (("force", force, (w, 2)), ("torque", torque, (w,))):
            key = f"forces/{body}/{name}"
            _check_array(value, np.dtype(np.float64), shape, where, key)
            if not np.isfinite(value).all() or np.abs(value).max(initial=0.0) > FLOAT32_MAX:
                raise _Refused(
                    f"{where}: {key} must be finite and within float32's range "
                    f"(|x| <= {FLOAT32_MAX:g})"
                )


#: Float fields bounded beyond finite: as set_state bounds them (shapes.MAX_COORDINATE,
#: MAX_SPEED); past them a step would only report a fault.
_FLOAT_LIMITS = {
    "device/bodies/position": MAX_COORDINATE,
    "device/bodies/angle": MAX_COORDINATE,
    "device/bodies/velocity": MAX_SPEED,
    "device/bodies/angular_velocity": MAX_SPEED,
}


def _refuse(where: str, key: str, index, value, expected: str):
    at = "" if index is None else f"[{', '.join(str(int(i)) for i in np.atleast_1d(index))}]"
    raise _Refused(f"{where}: {key}{at} is {value}, expected {expected}")


def _check_range(values: np.ndarray, low: int, high: int, where: str, key: str):
    """Every entry in [low, high] (an index range the kernels read)."""
    bad = np.flatnonzero((values < low) | (values > high))
    if bad.size:
        i = np.unravel_index(bad[0], values.shape)
        _refuse(where, key, i, values[i], f"{low} to {high}")


def _int_rules(layout: _Layout, cache: dict) -> dict[str, tuple[int, int]]:
    """{key: (lowest, highest)} of each saved int field and the motor modes, for this
    layout and cache (_check_structures checks the structures on top). Every saved int
    field must have a rule: a field added to device.py without one is refused until it
    has one, rather than trusted."""
    N, P = layout.n_slots, cache["n_pairs"]
    top = np.iinfo(np.int32).max
    slot, flag, colour = (0, N - 1), (0, 1), (0, UNSOLVED_COLOR)
    return {
        "device/bodies/sleeping": flag,
        "device/bodies/enabled": flag,
        "device/bodies/island": slot,  # and in the slot's world (_check_structures)
        "device/bodies/support": (0, N),  # contacts to an immovable body: fewer than bodies
        "device/joints/pid_started": flag,
        # Pair lists: body slots; pair_start ranges (_check_structures). A list that is
        # empty may keep the ranges of an earlier one: no kernel reads them then.
        "device/contacts/pair_start": (0, top),
        "device/contacts/body_a": slot,
        "device/contacts/body_b": slot,
        "device/contacts/point_count": (0, MAX_MANIFOLD_POINTS),
        "device/contacts/feature": (-top - 1, top),  # ids, only compared
        "device/reported/pair_start": (0, top),
        "device/reported/body_a": slot,
        "device/reported/body_b": slot,
        "device/reported/point_count": (0, MAX_MANIFOLD_POINTS),
        "device/reported/feature": (-top - 1, top),
        # The step's pair each entry came from (-1: a resting pair from the list before);
        # read as an index (when >= 0) only where report_mapped (reporting.refresh_report).
        "device/reported/origin": (-1, P - 1) if cache["report_mapped"] else (-1, top),
        "device/events/begin_a": slot,
        "device/events/begin_b": slot,
        "device/events/end_a": slot,
        "device/events/end_b": slot,
        # Colours: MAX_COLORS is the overflow, UNSOLVED_COLOR a pair not solved. The lists
        # are checked whole where a step may reuse them (_check_coloring); elsewhere they
        # may be an earlier colouring's (of another layout), which no kernel reads.
        "device/coloring/color": colour,
        "device/coloring/joint_color": colour,
        "device/coloring/color_start": (0, top),
        "device/coloring/color_list": (0, top),
        "device/coloring/pair_origin": (0, P - 1),
        "device/coloring/body_colored_dynamic": flag,
        # broad_phase.pairing_key: placed (1) | asleep (2).
        "device/broad/fat_key": (0, 3),
        "motors/mode": (min(MOTOR_MODES.values()), max(MOTOR_MODES.values())),
    }


def _check_values(arrays: dict, layout: _Layout, cache: dict, where: str):
    """Every float finite (some bounded further: _FLOAT_LIMITS, motor gains and effort
    limits), every int within its rule's range (_int_rules), and the structures the step
    walks (_check_structures)."""
    rules = _int_rules(layout, cache)
    for key, value in arrays.items():
        if value.dtype.kind == "f":
            finite = np.isfinite(value)
            if not finite.all():
                i = np.unravel_index(np.flatnonzero(~finite)[0], value.shape)
                _refuse(where, key, i, value[i], "a finite number")
            limit = _FLOAT_LIMITS.get(key)
            if limit is not None and value.size and np.abs(value).max() >= limit:
                i = np.unravel_index(np.argmax(np.abs(value)), value.shape)
                _refuse(where, key, i, value[i], f"within +-{limit:g}")
        else:
            if key not in rules:
                raise _Refused(
                    f"{where}: {key}: no check is known for this int field "
                    "(snapshots._int_rules), so it cannot be trusted"
                )
            _check_range(value, *rules[key], where, key)
    effort = arrays["motors/max_effort"]
    if (effort <= 0).any():
        i = np.flatnonzero(effort <= 0)[0]
        _refuse(where, "motors/max_effort", i, effort[i], "> 0 (N m or N)")
    # Each joint's targets within what its mode's motor may be given, as set_joint_target
    # holds them (builder.TARGET_LIMITS; the modes were range-checked above).
    target = arrays["device/joints/target"].reshape(layout.n_worlds, -1)
    limits = np.array([TARGET_LIMITS[int(mode)] for mode in arrays["motors/mode"]])
    beyond = np.argwhere(np.abs(target) >= limits[None, :])
    if beyond.size:
        world, joint = beyond[0]
        _refuse(
            where,
            "device/joints/target",
            world * target.shape[1] + joint,
            target[world, joint],
            f"within +-{limits[joint]:g} (its motor's mode)",
        )
    _check_structures(arrays, layout, cache, where)


def _check_structures(arrays: dict, layout: _Layout, cache: dict, where: str):
    """What the step walks, as the step leaves it: island labels in the slot's world; the
    candidate pairs (contacts) and the reported ones as the broad phase and the report
    list them (each body's range in pair_start, sorted, within a world), the events'
    pairs, and the colouring where the next step may reuse it."""
    nb, N = layout.n_bodies, layout.n_slots
    d = "device/"
    island = arrays[d + "bodies/island"]
    other = np.flatnonzero(island // nb != np.arange(N) // nb)
    if other.size:
        _refuse(
            where,
            d + "bodies/island",
            other[0],
            island[other[0]],
            f"a slot of the body's world ({other[0] // nb * nb} to {other[0] // nb * nb + nb - 1})",
        )
    P = cache["n_pairs"]
    a, b = arrays[d + "contacts/body_a"], arrays[d + "contacts/body_b"]
    _check_pairs(a, b, nb, where, d + "contacts")
    if cache["pairs_ordered"]:
        # Stored in colour order: pair_origin[n] is the broad-phase index of pair n.
        origin = arrays[d + "coloring/pair_origin"]
        _check_permutation(origin, P, where, d + "coloring/pair_origin")
        a, b = a.copy(), b.copy()
        a[origin], b[origin] = arrays[d + "contacts/body_a"], arrays[d + "contacts/body_b"]
    if P:
        _check_lists(
            arrays[d + "contacts/pair_start"], a, b, N, where, d + "contacts", lower_owns=False
        )
    R = cache["n_reported"]
    a, b = arrays[d + "reported/body_a"], arrays[d + "reported/body_b"]
    _check_pairs(a, b, nb, where, d + "reported")
    if R:
        _check_lists(
            arrays[d + "reported/pair_start"], a, b, N, where, d + "reported", lower_owns=True
        )
    for kind in ("begin", "end"):
        _check_pairs(
            arrays[f"{d}events/{kind}_a"],
            arrays[f"{d}events/{kind}_b"],
            nb,
            where,
            f"{d}events/{kind}",
        )
    if cache["coloring_valid"] and cache["colored_pairs"] == P and cache["n_overflow"] == 0:
        # coloring.may_reuse_coloring: the next step may solve with these lists as they are.
        _check_coloring(arrays, P + layout.joint_slots, P, cache["n_colors"], where)


def _check_pairs(a: np.ndarray, b: np.ndarray, nb: int, where: str, key: str):
    """Pairs of body slots (a, b): a < b, in one world."""
    bad = np.flatnonzero((a >= b) | (a // nb != b // nb))
    if bad.size:
        i = bad[0]
        raise _Refused(
            f"{where}: {key} pair {i} is slots ({a[i]}, {b[i]}), expected a < b in one world"
        )


def _check_permutation(values: np.ndarray, n: int, where: str, key: str):
    """values holds each of 0 .. n - 1 once (the range is checked already)."""
    counts = np.bincount(values, minlength=n)
    if (counts != 1).any():
        i = np.flatnonzero(counts != 1)[0]
        raise _Refused(
            f"{where}: {key} holds {i} {counts[i]} times, expected each of 0 to {n - 1} once"
        )


def _check_lists(
    start: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    n_slots: int,
    where: str,
    key: str,
    lower_owns: bool,
):
    """Pairs listed by owner slot: pair_start[g]:pair_start[g + 1] are slot g's, the ranges
    covering the list in order; each pair's owner is one of its slots (`lower_owns`: its
    lower one, a: the report; else either: the broad phase gives a pair to the body on the
    finer grid level, on one level to the lower slot) and within an owner's range the
    partners increase (the broad phase's per-body sort, the report's (a, b) order)."""
    n = len(a)
    steps = np.diff(start)
    if start[0] != 0 or start[-1] != n or (steps < 0).any():
        i = 0 if start[0] != 0 else n_slots if start[-1] != n else np.flatnonzero(steps < 0)[0]
        _refuse(where, f"{key}/pair_start", i, start[i], f"ranges from 0 to {n} in order")
    owner = np.repeat(np.arange(n_slots), steps)
    owned = (a == owner) if lower_owns else (a == owner) | (b == owner)
    if not owned.all():
        i = np.flatnonzero(~owned)[0]
        raise _Refused(
            f"{where}: {key} pair {i} ({a[i]}, {b[i]}) lies in slot {owner[i]}'s "
            f"range of {key}/pair_start"
        )
    partner = a + b - owner
    bad = np.flatnonzero((owner[1:] == owner[:-1]) & (partner[1:] <= partner[:-1]))
    if bad.size:
        i = bad[0] + 1
        raise _Refused(
            f"{where}: {key} pair {i} ({a[i]}, {b[i]}) is out of order after "
            f"({a[i - 1]}, {b[i - 1]})"
        )


def _check_coloring(arrays: dict, n_constraints: int, n_pairs: int, n_colors: int, where: str):
    """A colouring the next step may reuse without colouring again: each constraint's colour
    below n_colors (pairs may be UNSOLVED_COLOR; nothing in the overflow colour),
    color_start the prefix sums of the colours' counts, color_list each constraint once,
    grouped by colour. The step reads these ranges and lists as indices."""
    key = "device/coloring/"
    color = arrays[key + "color"]
    pairs, joints = color[:n_pairs], color[n_pairs:]
    bad = np.flatnonzero((pairs >= n_colors) & (pairs != UNSOLVED_COLOR))
    if bad.size:
        _refuse(
            where,
            key + "color",
            bad[0],
            pairs[bad[0]],
            f"below n_colors ({n_colors}) or {UNSOLVED_COLOR} (unsolved)",
        )
    bad = np.flatnonzero(joints >= n_colors)
    if bad.size:
        i = n_pairs + bad[0]
        _refuse(where, key + "color", i, color[i], f"below n_colors ({n_colors})")
    used = color[color < MAX_COLORS]
    if n_colors != (int(used.max()) + 1 if used.size else 0):
        raise _Refused(
            f"{where}: the cache's n_colors is {n_colors}, the colouring uses "
            f"{int(used.max()) + 1 if used.size else 0}"
        )
    if n_constraints == 0:
        return  # nothing to colour: the lists were left as they were, and nothing reads them
    counts = np.bincount(color, minlength=UNSOLVED_COLOR + 1)
    expected = np.concatenate([[0], np.cumsum(counts)])
    start = arrays[key + "color_start"]
    if not np.array_equal(start, expected):
        i = np.flatnonzero(start != expected)[0]
        _refuse(
            where,
            key + "color_start",
            i,
            start[i],
            f"{expected[i]} (the constraints of the colours before it)",
        )
    order = arrays[key + "color_list"]
    _check_range(order, 0, n_constraints - 1, where, key + "color_list")
    _check_permutation(order, n_constraints, where, key + "color_list")
    listed = color[order]
    wanted = np.repeat(np.arange(UNSOLVED_COLOR + 1), counts)
    if not np.array_equal(listed, wanted):
        i = np.flatnonzero(listed != wanted)[0]
        _refuse(
            where,
            key + "color_list",
            i,
            order[i],
            f"a constraint of colour {wanted[i]} (it has colour {listed[i]})",
        )


def _check_fits(layout: _Layout, cache: dict, binding, where: str, prefix: str):
    """The pool the restored scene will load into can hold it: the cache's needs
    (residency.Binding.needs) are refused now if the device cannot give them
    (residency.check_fits), and the events' lists fit any pool that holds those needs (one
    has at least MIN_CAPACITIES' pairs)."""
    probe = residency.Binding(StepCache(**cache), layout.n_worlds)
    probe.n_bodies, probe.n_joints = layout.n_bodies, layout.n_joints
    probe.n_filters = binding.n_filters
    needs = probe.needs()
    room = max(needs["pairs"], MIN_CAPACITIES["pairs"])
    for key in ("n_begin_events", "n_end_events"):
        if cache[key] > room:
            raise _Refused(
                f"{where}: {prefix}cache.{key} is {cache[key]}, more than the pool "
                f"restored into holds ({room})"
            )
    try:
        residency.check_fits(layout.n_worlds, needs)
    except ValueError as error:
        raise type(error)(f"{where}: {error}") from None


# ---------------------------------------------------------------------------- files


def read_state_file(path, binding=None) -> dict:
    """The fields of the snapshot in the state file at `path` (SceneSnapshot's keyword
    arguments), checked.

    With `binding` (a built scene's residency.Binding, resident in the pool: Scene.load_state),
    checked whole against that scene (check_snapshot, "state file <path>: ..."), and read
    within what its state can need: the file's size, its member count, and each member's
    size (from its zip header) are refused past that before anything is decompressed, and
    each array's dtype and shape from its .npy header before its data is read. Without, the
    file is checked on its own (the bound is the layout its meta declares), the rest when
    it is restored. Never loads a pickle (no np.load: .npy headers are read here, object
    dtypes refused).

    Raises:
        ValueError: "<path>: not a fx2d_gpu state file (...)" for a missing, damaged or
            truncated file, not a zip of .npy arrays, with a bad CRC or meta that is not a
            JSON object; "<path>: state file format ..." for another format version;
            "state file <path>: <field> ..." for a field that does not fit.
    """
    where = f"state file {path}"
    try:
        fields = _read_archive(Path(path), where, binding)
    except _Refused as error:
        raise ValueError(str(error)) from None
    except (
        _Damaged,
        OSError,
        EOFError,
        zipfile.BadZipFile,
        zlib.error,
        struct.error,
        ValueError,
        LookupError,
        OverflowError,
        RuntimeError,
        TypeError,
    ) as error:
        # Anything the zip, zlib or NumPy header readers raise is damage (RuntimeError:
        # an encrypted member, or a compression method zipfile cannot read).
        raise ValueError(f"{path}: not a fx2d_gpu state file ({error})") from None
    if binding is not None:
        plainly(check_snapshot, fields, binding, where, "meta.")
    return fields


def _read_archive(path: Path, where: str, binding) -> dict:
    """read_state_file's reading: _Damaged or the readers' errors for a file that is not a
    state file, _Refused for one whose contents do not fit."""
    spec = _saved_fields() if binding is not None else None
    with _open_regular_file(path) as file:
        if binding is not None:
            layout = _Layout(binding.n_worlds, binding.n_bodies, binding.n_joints)
            most = _file_bound(layout, spec)
            size = os.fstat(file.fileno()).st_size
            if size > most:
                raise _Refused(
                    f"{where}: {size:,} bytes, more than a state of this scene can take ({most:,})"
                )
        return _read_members(file, path, where, binding, spec)


def _open_regular_file(path: Path):
    """`path` opened for reading in binary, if it is a regular file; _Damaged otherwise.

    A device (/dev/zero: st_size 0, endless data) would defeat the size bounds, a FIFO
    would block open() or the reads, and a directory cannot be read: the file is opened
    without blocking (a FIFO then opens at once) and its type checked on the open file
    descriptor, so that what is read is what was checked."""
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            raise _Damaged("not a regular file")
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def _read_members(file, path: Path, where: str, binding, spec) -> dict:
    """_read_archive's reading of the open regular file `file`."""
    if binding is not None:
        layout = _Layout(binding.n_worlds, binding.n_bodies, binding.n_joints)
    with zipfile.ZipFile(file) as archive:
        infos = archive.infolist()
        if binding is not None and len(infos) > _most_members(layout, spec):
            raise _Refused(
                f"{where}: {len(infos):,} members, more than a state of this "
                f"scene has ({_most_members(layout, spec):,})"
            )
        members = {}
        for info in infos:
            if not info.filename.endswith(".npy") or info.filename[:-4] in members:
                raise _Damaged(f"member {info.filename!r} is not a .npy array of its own")
            members[info.filename[:-4]] = info
        if "meta" not in members:
            raise _Damaged("no meta")
        meta = _read_meta(archive, members.pop("meta"))
        version = meta.get("format_version")
        if type(version) is not int or version not in READABLE_VERSIONS:
            raise _Refused(
                f"{path}: state file format {version!r}, this fx2d_gpu reads "
                f"formats {READABLE_VERSIONS[0]} to {READABLE_VERSIONS[-1]}"
            )
        for key in meta:
            if key not in _META_KEYS:
                raise _Refused(f"{where}: meta has an unknown field {key!r}")
        for key in _META_KEYS:
            if key not in meta:
                raise _Refused(f"{where}: meta.{key} is missing")
        if isinstance(meta["cache"], dict):
            for key, (added, value) in _ADDED_CACHE_FIELDS.items():
                if version < added and key not in meta["cache"]:
                    meta["cache"][key] = value
        layout = _check_meta(meta, where, "meta.", binding)
        expected = _member_shapes(members, layout, meta["cache"], spec, where, version)
        # Every member's size from its header, before any is decompressed: the reads below
        # then stop at these sizes (zipfile reads no more than a header's file_size).
        for key, info in members.items():
            if info.file_size > expected[key][2]:
                raise _Refused(
                    f"{where}: {key} is {info.file_size:,} bytes, more than its "
                    f"array can take ({expected[key][2]:,})"
                )
        arrays = {
            key: _read_array(archive, info, expected[key], where, key)
            for key, info in members.items()
        }
    for key, (added, extent, entry, dtype) in _ADDED_FIELDS.items():
        if version < added:
            if extent == "pairs":  # _check_meta checked the count
                length = meta["cache"]["n_pairs"]
            else:
                length = layout.n_worlds * (
                    layout.n_bodies if extent == "slots" else layout.n_joints
                )
            arrays[key] = np.zeros((length,) + entry, dtype)
    device, motors, params, forces = {}, {}, {}, {}
    for key, value in arrays.items():
        kind, *rest = key.split("/")
        if kind == "device":
            device.setdefault(rest[0], {})[rest[1]] = value
        elif kind == "motors":
            motors[rest[0]] = value
        elif kind == "params":
            params[rest[0]] = value
        else:
            forces.setdefault(int(rest[0]), [None, None])[rest[1] == "torque"] = value
    return {
        "fingerprint": meta["fingerprint"],
        "n_worlds": layout.n_worlds,
        "n_bodies": layout.n_bodies,
        "n_joints": layout.n_joints,
        "device": device,
        "motors": motors,
        "params": params,
        "cache": dict(meta["cache"]),
        "forces": {b: tuple(v) for b, v in forces.items()},
        "time": float(meta["time"]),
        "step_count": int(meta["step_count"]),
    }


def _read_meta(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> dict:
    """The meta member: a 0-d unicode array of at most MAX_META_CHARS characters holding a
    JSON object nested at most _MAX_META_DEPTH deep (checked before json.loads)."""
    if info.file_size > _NPY_HEADER_MAX + 4 * MAX_META_CHARS:
        raise _Damaged(f"meta of {info.file_size:,} bytes, more than {MAX_META_CHARS:,} characters")
    with archive.open(info) as fp:
        dtype, shape, fortran = _read_header(fp)
        if dtype.kind != "U" or shape != () or dtype.itemsize > 4 * MAX_META_CHARS:
            raise _Damaged(
                f"meta is a {dtype} array of shape {shape}, not a string of at "
                f"most {MAX_META_CHARS:,} characters"
            )
        text = str(_read_data(fp, dtype, shape, fortran)[()])
        if fp.read(1):  # (and at its end, zipfile checks the CRC)
            raise _Damaged("meta has data after its string")
    if len(text) > MAX_META_CHARS or _json_depth(text) > _MAX_META_DEPTH:
        raise _Damaged(
            f"meta of {len(text):,} characters nested {_json_depth(text)} deep, "
            f"more than {MAX_META_CHARS:,} and {_MAX_META_DEPTH}"
        )
    try:
        meta = json.loads(text)
    except RecursionError:  # (the depth check stops this first; belt and braces)
        raise _Damaged("meta nested too deep") from None
    if not isinstance(meta, dict):
        raise _Damaged(f"meta is a JSON {type(meta).__name__}, not an object")
    return meta


def _json_depth(text: str) -> int:
    """How deep brackets nest in `text` (JSON), strings skipped."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def _member_shapes(
    members: dict,
    layout: _Layout,
    cache: dict,
    spec: dict | None,
    where: str,
    version: int = FORMAT_VERSION,
) -> dict[str, tuple]:
    """{key: (dtype, shape, most bytes)} of each member of a state file (meta excepted),
    _Refused for one missing or not expected (a field added after the file's format
    `version` may be missing, _ADDED_FIELDS). With the scene's field spec, exact; without,
    a device array's dtype is float32 or int32 and its shape the most first-axis entries of
    any extent (restoring checks the rest)."""
    expected = {}
    for key in members:
        match = _FORCE_KEY.fullmatch(key)
        if match:
            body, name = int(match[1]), match[2]
            if body >= layout.n_bodies:
                raise _Refused(
                    f"{where}: {key}: a force on body {body}, this scene has "
                    f"bodies 0 to {layout.n_bodies - 1}"
                )
            other = f"forces/{body}/{'torque' if name == 'force' else 'force'}"
            if other not in members:
                raise _Refused(f"{where}: {key} without {other}")
            shape = (layout.n_worlds, 2) if name == "force" else (layout.n_worlds,)
            expected[key] = (np.dtype(np.float64), shape)
        elif _PARAMS_KEY.fullmatch(key):  # checked whole by WorldParams.from_arrays
            expected[key] = (np.dtype(np.float64), _params_shapes(layout)[key])
    required = _expected_arrays(layout, cache, spec or {})
    expected.update(required)
    # (color_start, of extent "all", is of a fixed size.)
    most = max(*_extents(layout, cache).values(), UNSOLVED_COLOR + 2)
    for key in members:
        if key in expected:
            continue
        if spec is None and _DEVICE_KEY.fullmatch(key):
            expected[key] = ((np.dtype(np.float32), np.dtype(np.int32)), most)
        else:
            raise _Refused(f"{where}: {key} is not a field this scene saves")
    for key in required:
        if key not in members and version >= _ADDED_FIELDS.get(key, (0,))[0]:
            raise _Refused(f"{where}: {key} is missing")
    sized = {}
    for key, (dtype, shape) in expected.items():
        if isinstance(shape, tuple):
            data = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        else:  # a device array of unknown shape: at most `shape` entries of 16 numbers
            data = shape * 16 * 4
        sized[key] = (dtype, shape, _NPY_HEADER_MAX + data)
    return sized


def _read_array(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, expected: tuple, where: str, key: str
) -> np.ndarray:
    """A member's array: its header's dtype and shape checked against `expected` (dtype or
    dtypes, shape or most first-axis entries, bytes) before its data is read, all of which
    must be there (and nothing after it: the CRC is checked at the end)."""
    dtypes, shape, _ = expected
    with archive.open(info) as fp:
        dtype, found, fortran = _read_header(fp)
        dtypes = dtypes if isinstance(dtypes, tuple) else (dtypes,)
        if dtype not in dtypes:
            raise _Refused(
                f"{where}: {key} has dtype {dtype}, expected {' or '.join(map(str, dtypes))}"
            )
        if isinstance(shape, tuple):
            if found != shape:
                raise _Refused(f"{where}: {key} has shape {found}, expected {shape}")
        elif not (
            1 <= len(found) <= 3
            and min(found) >= 0
            and found[0] <= shape
            and int(np.prod(found[1:], dtype=np.int64)) <= 16
        ):
            raise _Refused(f"{where}: {key} has shape {found}, not that of a saved field")
        value = _read_data(fp, dtype, found, fortran)
        if fp.read(1):
            raise _Damaged(f"{key} has data after its array")
    return value


def _read_header(fp) -> tuple[np.dtype, tuple, bool]:
    """(dtype, shape, fortran_order) of a .npy stream; object dtypes (pickles) refused."""
    version = np.lib.format.read_magic(fp)
    if version == (1, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_1_0(
            fp, max_header_size=_NPY_HEADER_MAX
        )
    elif version == (2, 0):
        shape, fortran, dtype = np.lib.format.read_array_header_2_0(
            fp, max_header_size=_NPY_HEADER_MAX
        )
    else:
        raise _Damaged(f".npy format {version}")
    if dtype.hasobject:
        raise _Damaged("an array of Python objects (pickles are never loaded)")
    return dtype, tuple(shape), bool(fortran)


def _read_data(fp, dtype: np.dtype, shape: tuple, fortran: bool) -> np.ndarray:
    """The array data after a .npy header, all of it (a C-ordered, writable copy)."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    data = fp.read(nbytes)
    if len(data) != nbytes:
        raise _Damaged(f"truncated: {len(data):,} of {nbytes:,} bytes of an array")
    value = np.frombuffer(data, dtype).reshape(shape, order="F" if fortran else "C")
    return np.array(value, order="C")


def _params_shapes(layout: _Layout) -> dict[str, tuple]:
    """{member: shape} of the per-world values a state file may hold (float64 each)."""
    w = layout.n_worlds
    shapes = {f"params/{name}": (w, layout.n_bodies) for name in BODY_PARAMS}
    shapes.update({"params/gravity": (w, 2), "params/pid": (w, layout.n_joints, 3)})
    n = layout.n_bodies
    shapes.update(
        {
            "params/shape_radius": (w, n),
            "params/shape_size": (w, n, 2),
            "params/shape_length": (w, n),
            "params/shape_vertices": (w, n, MAX_POLYGON_VERTICES, 2),
            "params/static_pose": (w, n, 3),
        }
    )
    return shapes


def _most_members(layout: _Layout, spec: dict) -> int:
    """Members of the largest state file of this scene: meta, its saved fields, the motor
    settings, the per-world values, and a force and a torque per body."""
    return (
        1
        + sum(len(fields) for fields in spec.values())
        + len(MOTOR_FIELDS)
        + len(_params_shapes(layout))
        + 2 * layout.n_bodies
    )


def _file_bound(layout: _Layout, spec: dict) -> int:
    """The most bytes a state file of this scene can take: every member at its largest (the
    pair lists at layout.max_pairs) with its .npy header and zip overhead, the meta, and
    the end records; compressed data can exceed its size by ~0.1 %."""
    cache = {field.name: field.default for field in dataclasses.fields(StepCache)}
    cache.update(
        n_pairs=layout.max_pairs,
        n_reported=layout.max_pairs,
        n_begin_events=layout.max_pairs,
        n_end_events=layout.max_pairs,
    )
    data = sum(
        int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        for dtype, shape in _expected_arrays(layout, cache, spec).values()
    )
    data += 2 * layout.n_bodies * layout.n_worlds * 3 * 8  # forces and torques, float64
    data += sum(8 * int(np.prod(shape)) for shape in _params_shapes(layout).values())
    data += 4 * MAX_META_CHARS
    members = _most_members(layout, spec)
    return data + data // 512 + members * (_NPY_HEADER_MAX + _ZIP_MEMBER_OVERHEAD) + (1 << 17)
