"""Per-world physical parameters of a batched scene: each body's mass, inertia, friction,
restitution, damping and gravity scale, each world's gravity and each joint's PID gains,
set per world (Scene.set_body_params, set_gravity, set_joint_params) for domain
randomisation and parameter sweeps.

The host keeps them in the user's units (float64, WorldParams); the device reads them by
*material row* (device.BodyModel, bodies.material_row). While every world holds the same
values for its bodies, the device holds one row per body, as a scene without per-world
values always has (the same upload, the same reads, cache-friendly on a GPU); once a world
differs, one row per body slot. Gravity (a row per world) and PID gains (a row per joint
slot) are few and always per world. The rows are computed as the builder computes a
one-world scene's (builder.material_rows), so world w of a batch steps bit for bit as a
one-world scene given world w's values.

A body is static or dynamic in every world: a world may not make a dynamic body static
(mass 0) or a static one dynamic, so the kernels' test of a dynamic body (`inv_mass[body]
> 0`, world 0's row) holds in every world.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from ..checks import FLOAT32_MAX, as_real_array, as_reals, as_vector2, as_vectors2
from . import store_log
from .builder import MATERIAL_FIELDS, material_rows
from .masses import bad_inertias, bad_masses, check_inertias, check_masses

if TYPE_CHECKING:
    from .builder import ModelBuilder

#: The body parameters a world may hold values of its own for: {name: (Body field, check
#: bounds for as_reals)}. `vel_damping` damps linear and angular velocity alike (Fx2D's).
BODY_PARAMS = {
    "mass": ("mass", {"positive": True}),
    "inertia": ("inertia", {"positive": True}),
    "static_friction": ("static_friction", {"minimum": 0.0}),
    "dynamic_friction": ("dynamic_friction", {"minimum": 0.0}),
    "elasticity": ("elasticity", {"minimum": 0.0}),
    "vel_damping": ("vel_damping", {"minimum": 0.0}),
    "gravity_scale": ("gravity_scale", {}),
}
#: Fields of the device model that follow from the per-world values (not the scene's
#: model as built: snapshots carry the values instead, and the fingerprint leaves these
#: out, see state_files.model_fingerprint).
DERIVED_FIELDS = {"model": (*MATERIAL_FIELDS, "per_world", "gravity", "uneven"), "joints": ("pid",)}


def world_selection(world, n_worlds: int, name: str = "world") -> np.ndarray:
    """The one rule for which worlds a `world=` / `worlds=` argument addresses.

    (k,) int64 world indices, in the caller's order (row i of per-world values goes to
    world result[i]), from:
      - None: every world, 0 .. n_worlds - 1;
      - an int (Python or NumPy, signed or unsigned): that one world;
      - a bool mask of shape (n_worlds,): the worlds where it is True, ascending;
      - a sequence or 1-D array of ints: those worlds, in that order; empty: no world.
    Negative indices count from the end, as NumPy's (-1 is the last world): an index must lie
    in [-n_worlds, n_worlds), judged on the value given (np.uint64(2**64 - 1) is out of
    range, not -1). Each world may be given once: a duplicate, also one given as i and
    i - n_worlds, is refused, since two values for one world would silently drop one.

    Raises:
        TypeError: a bool (not a mask), floats, strings or anything else not indices, or an
            array of more than one dimension, naming `name`.
        ValueError: a mask of another length, an index out of range or a world given twice,
            naming `name` and the index as given.
    """
    if world is None:
        return np.arange(n_worlds, dtype=np.int64)
    if isinstance(world, (bool, np.bool_)):
        raise TypeError(f"{name} must be a world index, a bool mask or indices, got a bool")
    values = np.asarray(world)
    if values.dtype.kind == "b":
        if values.shape != (n_worlds,):
            raise ValueError(f"{name}: a mask must have shape ({n_worlds},), got {values.shape}")
        return np.flatnonzero(values).astype(np.int64)
    if values.size == 0 and values.ndim == 1:  # [] is float64 to NumPy: no world, not floats
        return np.zeros(0, np.int64)
    if values.ndim > 1 or not (
        values.dtype.kind in "iu"
        or (values.dtype.kind == "O" and all(_is_int(v) for v in values.reshape(-1)))
    ):
        raise TypeError(
            f"{name} must be a world index, a bool mask or a sequence of indices, got {world!r}"[
                :200
            ]
        )
    given = values.reshape(-1)
    # The range is judged in the dtype given (Python ints for an object array): a cast to
    # int64 first would wrap np.uint64(2**64 - 1) to -1, the last world.
    if given.dtype.kind == "u":
        bad = given >= np.uint64(n_worlds)
    elif given.dtype.kind == "O":
        bad = np.array([not -n_worlds <= v < n_worlds for v in given.tolist()], bool)
    else:
        bad = (given < -n_worlds) | (given >= n_worlds)
    if bad.any():
        raise ValueError(
            f"{name}: world {given[bad][0]} out of range for {n_worlds} worlds "
            f"(valid: {-n_worlds} to {n_worlds - 1})"
        )
    chosen = given.astype(np.int64) % n_worlds
    _, first = np.unique(chosen, return_index=True)
    if len(first) < len(chosen):
        again = int(np.setdiff1d(np.arange(len(chosen)), first)[0])
        before = int(np.flatnonzero(chosen == chosen[again])[0])
        raise ValueError(
            f"{name}: world {int(chosen[again])} given twice (as {given[before]} "
            f"and {given[again]}); each world may be given once"
        )
    return chosen


def _is_int(value) -> bool:
    """An int or NumPy integer, not a bool (NumPy's object arrays hold big Python ints)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _per_world_values(value, name: str, n_worlds: int, n_items: int, bounds: dict) -> np.ndarray:
    """(n_worlds, n_items) float64 from a scalar, one value per addressed world (n_worlds,),
    or (n_worlds, n_items); each held to as_real's `bounds` (the first bad one named
    `name[i]`, i its flat index)."""
    array = as_real_array(value, name)
    if array.ndim == 1 and array.shape[0] == n_worlds:
        array = array[:, None]
    try:
        array = np.broadcast_to(array, (n_worlds, n_items))
    except ValueError:
        raise ValueError(
            f"{name} must be a scalar, one value per addressed world "
            f"({n_worlds},) or ({n_worlds}, {n_items}), got shape "
            f"{array.shape}"
        ) from None
    flat = as_reals(array.reshape(-1), name, n_worlds * n_items, **bounds)
    return flat.reshape(n_worlds, n_items)


#: Dynamic bodies' masses in one world differing by more than this factor make the world
#: "uneven": its velocity pass sweeps the contacts with an immovable body again, and shock
#: propagation holds the lighter body (solver/contacts.py says why and what it cost).
IMMOVABLE_SWEEP_RATIO = 10.0


def uneven_worlds(inv_mass: np.ndarray) -> np.ndarray:
    """(n_worlds,) int32: 1 where a world's dynamic bodies' inverse masses ((n_worlds,
    n_bodies) float32) differ by more than IMMOVABLE_SWEEP_RATIO (its velocity pass sweeps
    the contacts with an immovable body again)."""
    inverse = inv_mass.astype(np.float64)
    dynamic = inverse > 0.0
    highest = np.where(dynamic, inverse, -np.inf).max(axis=1, initial=-np.inf)
    lowest = np.where(dynamic, inverse, np.inf).min(axis=1, initial=np.inf)
    return (dynamic.any(axis=1) & (highest > IMMOVABLE_SWEEP_RATIO * lowest)).astype(np.int32)


def _base_values(builder: ModelBuilder) -> dict[str, np.ndarray]:
    """{param: (n_bodies,) float64}: the builder's values (every world's until set)."""
    return {
        name: np.array([getattr(b, field) for b in builder.bodies], np.float64)
        for name, (field, _) in BODY_PARAMS.items()
    }


#: WorldParams' caches (the device rows it last made, and its log), left out of pickles.
_CACHES = ("_kept_rows", "_kept_uneven", store_log.LOG)


class _KeptRows(NamedTuple):
    """The per-world device rows WorldParams.device_rows last made (arrays the model holds),
    and what they were made from: the model as built (its base inv_mass array), the body
    count and the values' version."""

    base: np.ndarray
    n: int
    version: int
    rows: dict
    uneven: np.ndarray
    gravity: np.ndarray
    pid: np.ndarray


class WorldParams:
    """The per-world values of one scene, in the user's units.

    bodies: None (every world takes the builder's values: the bodies' add_* keywords) or
    {param: (n_worlds, n_bodies) float64} (BODY_PARAMS; inertia kg m^2 about the centre of
    mass, inf for a static body); gravity: (n_worlds, 2) float64, m/s^2; pid: None (the
    joints' own gains in every world) or (n_worlds, n_joints, 3) float64. Bodies and joints
    added after a world took values of its own take their own values in every world.
    """

    def __init__(self, n_worlds: int, gravity):
        self.n_worlds = n_worlds
        self.bodies: dict[str, np.ndarray] | None = None
        # Every world's gravity is tiled when first read: a scene of 10**8 worlds is refused
        # (residency.check_fits, at its first step) before any per-world array is made,
        # rather than after a minute of filling gigabytes of the host's memory.
        self._every_world_gravity: np.ndarray | None = None
        self._gravity = np.array(gravity, np.float64)
        self.pid: np.ndarray | None = None
        # Changes with every edit (store_log): the device rows made at a version redo the
        # worlds stored since alone.
        self.version = next(store_log.VERSIONS)

    def __getstate__(self) -> dict:
        # The device rows kept (a copy of the model's) stay behind: a copy rebuilds them.
        return {k: v for k, v in self.__dict__.items() if k not in _CACHES}

    def __setstate__(self, state: dict):
        self.__dict__.update(state)
        self.version = next(store_log.VERSIONS)

    @property
    def gravity(self) -> np.ndarray:
        """(n_worlds, 2) float64, m/s^2: every world's gravity."""
        if self._every_world_gravity is None:
            self._every_world_gravity = np.tile(self._gravity, (self.n_worlds, 1))
        return self._every_world_gravity

    @gravity.setter
    def gravity(self, values: np.ndarray):
        self._every_world_gravity = values
        store_log.note_change(self)

    def copy(self) -> WorldParams:
        params = WorldParams(self.n_worlds, self._gravity)
        if self._every_world_gravity is not None:
            params.gravity = self._every_world_gravity.copy()
        params.bodies = (
            None if self.bodies is None else {k: v.copy() for k, v in self.bodies.items()}
        )
        params.pid = None if self.pid is None else self.pid.copy()
        return params

    def repeated(self, n_worlds: int) -> WorldParams:
        """World 0's values in `n_worlds` worlds (Scene.replicate)."""
        tiled = self._every_world_gravity
        params = WorldParams(n_worlds, self._gravity if tiled is None else tiled[0])
        params.bodies = (
            None
            if self.bodies is None
            else {k: np.repeat(v[:1], n_worlds, axis=0) for k, v in self.bodies.items()}
        )
        params.pid = None if self.pid is None else np.repeat(self.pid[:1], n_worlds, axis=0)
        return params

    @classmethod
    def stacked(cls, parts: list[WorldParams], builder: ModelBuilder) -> WorldParams:
        """The values of several scenes' worlds, one after another (distributed: the
        shards' worlds as one scene's)."""
        params = cls(sum(p.n_worlds for p in parts), (0.0, 0.0))
        params.gravity = np.concatenate([p.gravity for p in parts])
        if any(p.bodies is not None for p in parts):
            values = [p.body_values(builder) for p in parts]
            params.bodies = {k: np.concatenate([v[k] for v in values]) for k in values[0]}
        if any(p.pid is not None for p in parts):
            params.pid = np.concatenate([p.joint_gains(builder) for p in parts])
        return params

    def rows(self, worlds: np.ndarray) -> WorldParams:
        """The values of `worlds` ((k,) indices) as a k-world WorldParams (a copy)."""
        params = WorldParams(len(worlds), (0.0, 0.0))
        params.gravity = self.gravity[worlds]
        params.bodies = (
            None if self.bodies is None else {k: v[worlds] for k, v in self.bodies.items()}
        )
        params.pid = None if self.pid is None else self.pid[worlds]
        return params

    # ------------------------------------------------------------------ reading
    def body_values(self, builder: ModelBuilder) -> dict[str, np.ndarray]:
        """{param: (n_worlds, n_bodies) float64}, every body's value in every world (a
        fresh array where no world has its own, else the stored one, grown by the bodies
        added since)."""
        base = _base_values(builder)
        n = len(builder.bodies)
        if self.bodies is None:
            return {k: np.tile(v, (self.n_worlds, 1)) for k, v in base.items()}
        have = self.bodies["mass"].shape[1]
        if have < n:
            store_log.note_change(self)
            self.bodies = {
                k: np.concatenate([v, np.tile(base[k][have:], (self.n_worlds, 1))], axis=1)
                for k, v in self.bodies.items()
            }
        return self.bodies

    def joint_gains(self, builder: ModelBuilder) -> np.ndarray:
        """(n_worlds, n_joints, 3) float64: every joint's PID gains in every world."""
        base = np.array([j.pid for j in builder.joints], np.float64).reshape(-1, 3)
        if self.pid is None:
            return np.tile(base[None], (self.n_worlds, 1, 1))
        have = self.pid.shape[1]
        if have < len(base):
            self.pid = np.concatenate(
                [self.pid, np.tile(base[None, have:], (self.n_worlds, 1, 1))], axis=1
            )
        return self.pid

    # ------------------------------------------------------------------ checks and edits
    def check_body_values(
        self,
        builder: ModelBuilder,
        bodies: np.ndarray,
        worlds: np.ndarray,
        values: dict,
        unit: np.ndarray | None = None,
    ) -> dict[str, np.ndarray]:
        """The given values (param: scalar, (k_worlds,) or (k_worlds, k_bodies)), checked
        whole, as {param: (k_worlds, k_bodies) float64}; mass and inertia only for bodies
        that are dynamic (or kinematic) in every world. `unit`: (k_worlds, k_bodies) the
        bodies' Shape.unit_inertia in those worlds (None: their add_* shapes'; per-world
        shapes, world_shapes.py, have their own).

        Raises:
            TypeError: a value that is not real numbers, naming the parameter.
            ValueError: a value of another shape, not finite or out of its range, or a mass
                or inertia for a static body (naming the body).
        """
        checked = {}
        for name, value in values.items():
            checked[name] = _per_world_values(
                value, name, len(worlds), len(bodies), BODY_PARAMS[name][1]
            )
        if "mass" in checked or "inertia" in checked:
            for body in bodies.tolist():
                if builder.bodies[body].mass == 0.0:
                    key = "mass" if "mass" in checked else "inertia"
                    raise ValueError(
                        f"{key}: body {body} is static in every world (mass 0); a body is "
                        "static or dynamic in every world"
                    )
        # The add_* rule (masses.py), every body dynamic: the first bad value in
        # (world, body) order named unindexed.
        if "mass" in checked:
            check_masses(checked["mass"], "mass", static_allowed=False, indexed=False)
        if "inertia" in checked:
            check_inertias(checked["inertia"], indexed=False)
        elif "mass" in checked:
            inertia = self._inertia_after(builder, bodies, worlds, checked["mass"], unit)
            check_inertias(inertia, checked["mass"], derived=True, indexed=False)
        return checked

    def _inertia_after(
        self,
        builder: ModelBuilder,
        bodies: np.ndarray,
        worlds: np.ndarray,
        mass: np.ndarray,
        unit: np.ndarray | None = None,
    ) -> np.ndarray:
        """(k_worlds, k_bodies) float64, kg m^2: the inertias of `bodies` in `worlds` once
        they take `mass` (same shape, kg) without an inertia: mass x Shape.unit_inertia
        (`unit`, check_body_values') where the inertia is the shape's (as add_* computes
        it), the one given by hand elsewhere."""
        current = self.body_values(builder)
        cells = np.ix_(worlds, bodies)
        if unit is None:
            unit = np.array([builder.bodies[b].shape.unit_inertia for b in bodies.tolist()])
        old_mass, old_inertia = current["mass"][cells], current["inertia"][cells]
        return np.where(old_inertia == old_mass * unit, mass * unit, old_inertia)

    def set_body_values(
        self,
        builder: ModelBuilder,
        bodies: np.ndarray,
        worlds: np.ndarray,
        checked: dict[str, np.ndarray],
        unit: np.ndarray | None = None,
    ):
        """Store checked values (check_body_values, with its `unit`) for `bodies` in
        `worlds`. A mass given without an inertia moves the inertia with it where the
        inertia is the shape's (_inertia_after), and keeps one given by hand."""
        if "mass" in checked and "inertia" not in checked:
            inertia = self._inertia_after(builder, bodies, worlds, checked["mass"], unit)
        else:
            inertia = None
        current = self.body_values(builder)
        self.bodies = current
        cells = np.ix_(worlds, bodies)
        if inertia is not None:
            current["inertia"][cells] = inertia
        for name, value in checked.items():
            current[name][cells] = value
        store_log.note_store(self, bodies, worlds)

    def check_gravity(self, gravity) -> np.ndarray:
        """(n_worlds, 2) float64 from (2,) (every world) or (n_worlds, 2), finite."""
        try:
            ndim = np.ndim(gravity)
        except ValueError:  # NumPy's "inhomogeneous shape" names nothing
            raise TypeError(
                f"gravity must be (2,) or ({self.n_worlds}, 2) real numbers, got a ragged sequence"
            ) from None
        if ndim <= 1:
            return np.tile(as_vector2(gravity, "gravity"), (self.n_worlds, 1))
        return np.array(as_vectors2(gravity, "gravity", self.n_worlds), np.float64)

    def check_gains(self, joints: np.ndarray, worlds: np.ndarray, pid) -> np.ndarray:
        """(k_worlds, k_joints, 3) float64 from (3,), (k_worlds, 3) or (k_worlds, k_joints,
        3) finite gains."""
        array = as_real_array(pid, "pid")
        if array.ndim == 2 and array.shape[0] == len(worlds):
            array = array[:, None, :]
        try:
            array = np.broadcast_to(array, (len(worlds), len(joints), 3))
        except ValueError:
            raise ValueError(
                f"pid must be (3,) gains (p, i, d), ({len(worlds)}, 3) or "
                f"({len(worlds)}, {len(joints)}, 3), got shape "
                f"{np.shape(pid)}"
            ) from None
        flat = as_reals(array.reshape(-1), "pid", array.size)
        return flat.reshape(array.shape)

    def set_gains(
        self, builder: ModelBuilder, joints: np.ndarray, worlds: np.ndarray, gains: np.ndarray
    ):
        current = self.joint_gains(builder)
        self.pid = current
        current[np.ix_(worlds, joints)] = gains
        store_log.note_change(self)

    # ------------------------------------------------------------------ the device rows
    def device_rows(self, builder: ModelBuilder, model: dict) -> dict | None:
        """Put the per-world rows into `model` (builder.build_model's arrays, in place, the
        base model's derived fields in it): the material fields by material row (n_bodies
        rows while every world holds the same values, else n_slots), per_world, gravity
        (n_worlds, 2), uneven (n_worlds,) and the joints' pid (n_joint_slots, 3).

        Returns, where only some rows changed since the rows were last made (stores of a
        few worlds' values: the device takes those alone), {"slots": material rows,
        "worlds": uneven's rows, (k,) int64 indices, "whole": the other fields that changed,
        of gravity and pid}; else None (anything may have changed).
        """
        body, w = model["model"], self.n_worlds
        n = len(builder.bodies)
        per_world = False
        if self.bodies is not None:
            values = self.body_values(builder)  # (grown by the bodies added since, first)
            differing = store_log.uneven_since(self, "_kept_uneven", {None: values.values})
            per_world = differing[None] is not None
        gravity = self.gravity.astype(np.float32)
        pid = self.joint_gains(builder).reshape(-1, 3).astype(np.float32)
        kept = self.__dict__.get("_kept_rows")
        stores = None
        if per_world and kept is not None and kept.base is body["inv_mass"] and kept.n == n:
            stores = store_log.stored_since(self, kept.version)
        changed = None
        if stores is not None:  # the worlds stored since, alone
            rows, uneven = kept.rows, kept.uneven
            slots = store_log.distinct(
                [(ws[:, None] * n + bs).reshape(-1) for bs, ws in stores], self.n_worlds * n
            )
            worlds = store_log.distinct([ws for _, ws in stores], self.n_worlds)
            values = {k: v.reshape(-1)[slots] for k, v in self.bodies.items()}
            driven = np.array([b.external_forces for b in builder.bodies], bool)[slots % n]
            for name, value in material_rows(values, driven).items():
                rows[name][slots] = value
            uneven[worlds] = uneven_worlds(rows["inv_mass"].reshape(w, n)[worlds])
            whole = (("gravity", gravity, kept.gravity), ("pid", pid, kept.pid))
            changed = {
                "slots": slots,
                "worlds": worlds,
                "whole": tuple(name for name, new, old in whole if not np.array_equal(new, old)),
            }
        elif per_world:
            values = {k: v.reshape(-1) for k, v in self.bodies.items()}
            driven = np.tile([b.external_forces for b in builder.bodies], w)
            rows = material_rows(values, driven)
            uneven = uneven_worlds(rows["inv_mass"].reshape(w, n))
        else:
            rows = {}
            if self.bodies is not None:  # the same in every world: world 0's, n_bodies rows
                values = {k: v[0].copy() for k, v in self.bodies.items()}
                driven = np.array([b.external_forces for b in builder.bodies], bool)
                rows = material_rows(values, driven)
            inverse = rows.get("inv_mass", body["inv_mass"])[None, :]
            uneven = np.broadcast_to(uneven_worlds(inverse), (w,)).copy()
        if per_world:
            # (The model holds these arrays: the next stores' rows are written in place.)
            self._kept_rows = _KeptRows(
                body["inv_mass"], n, self.version, rows, uneven, gravity, pid
            )
        body.update(rows)
        body["per_world"] = np.array(int(per_world), np.int32)
        body["uneven"] = uneven
        body["gravity"] = gravity
        model["joints"]["pid"] = pid
        return changed

    # ------------------------------------------------------------------ snapshots
    def arrays(self) -> dict[str, np.ndarray]:
        """The values as arrays, for snapshots and state files: gravity always, body
        parameters and pid where some world has its own."""
        arrays = {"gravity": self.gravity.copy()}
        if self.bodies is not None:
            arrays.update({k: v.copy() for k, v in self.bodies.items()})
        if self.pid is not None:
            arrays["pid"] = self.pid.copy()
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict, builder: ModelBuilder, n_worlds: int) -> WorldParams:
        """The values of arrays() back, checked as set_body_params, set_gravity and
        set_joint_params check them (a snapshot is untrusted input).

        Raises:
            ValueError: a missing, extra or misshapen array, or a value that breaks a rule,
                naming it.
        """
        nb, nj = len(builder.bodies), len(builder.joints)
        names = set(arrays)
        allowed = {"gravity", "pid", *BODY_PARAMS}
        if not names <= allowed:
            raise ValueError(f"params/{sorted(names - allowed)[0]} is not a per-world value")
        if "gravity" not in names:
            raise ValueError("params/gravity is missing")
        given = names & set(BODY_PARAMS)
        if given and given != set(BODY_PARAMS):
            raise ValueError(f"params/{sorted(set(BODY_PARAMS) - given)[0]} is missing")
        params = cls(n_worlds, (0.0, 0.0))
        for key, shape in (
            ("gravity", (n_worlds, 2)),
            ("pid", (n_worlds, nj, 3)),
            *((name, (n_worlds, nb)) for name in given),
        ):
            if key in arrays and (
                not isinstance(arrays[key], np.ndarray)
                or arrays[key].dtype != np.float64
                or arrays[key].shape != shape
            ):
                raise ValueError(f"params/{key} must be a float64 array of shape {shape}")
        params.gravity = params.check_gravity(arrays["gravity"])
        if "pid" in arrays:
            params.pid = as_reals(
                arrays["pid"].reshape(-1), "params/pid", arrays["pid"].size
            ).reshape(n_worlds, nj, 3)
        if given:
            bodies = {name: arrays[name].copy() for name in BODY_PARAMS}
            static = np.array([b.mass == 0.0 for b in builder.bodies], bool)
            # A NaN breaks the rule too (as_reals is not used: a static body's inertia is inf).
            for name, bad in (
                ("mass", bad_masses(bodies["mass"], static)),
                ("inertia", bad_inertias(bodies["inertia"], static)),
            ):
                if bad.any():
                    world, body = np.argwhere(bad)[0].tolist()
                    raise ValueError(
                        f"params/{name}[{world}, {body}]: body {body} is "
                        f"{'static' if static[body] else 'dynamic'} in every "
                        f"world, got {float(bodies[name][world, body])}"
                    )
            for name, (_, bounds) in BODY_PARAMS.items():
                if name not in ("mass", "inertia"):
                    as_reals(
                        bodies[name].reshape(-1),
                        f"params/{name}",
                        n_worlds * nb,
                        limit=FLOAT32_MAX,
                        **bounds,
                    )
            params.bodies = bodies
        return params
