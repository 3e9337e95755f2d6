"""Exact snapshots of a scene: everything that affects its future, in memory or in a file.

A SceneSnapshot holds the scene's saved device fields (residency.Snapshot: poses, previous
pairs and their warm-start impulses, colours, sleep timers and islands, PID state and
motor targets), its motor settings (set_joint_mode changes them), its host-side step cache
(pair counts, colouring state), the forces applied for the next step, and its clock.
Restoring one and stepping reproduces the original run bitwise.

A snapshot belongs to one scene model: its fingerprint is a hash of the model's device
arrays (bodies, shapes, joints, disabled pairs) and layout; restoring it into a scene with
another fingerprint is refused.

A snapshot, and above all a state file, is untrusted input: restore_snapshot and
read_state_file check it whole (state_files.py) before anything in the scene changes.
"""

from __future__ import annotations

import dataclasses
import json
from copy import deepcopy
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from ..checks import as_count
from ..device import residency
from ..device.residency import Snapshot, serialized
from ..model.world_params import WorldParams
from ..model.world_shapes import GEOMETRY_ARRAYS, WorldShapes
from ..physics.solver.context import StepCache
from ..records import State
from . import state_files
from .state_files import (
    FORMAT_VERSION,
    MOTOR_FIELDS,
    check_containers,
    check_snapshot,
    plainly,
    scene_fingerprint,
)

if TYPE_CHECKING:
    from ..model.builder import ModelBuilder


@dataclass
class SceneSnapshot:
    """An exact snapshot of a scene: everything that affects its future (Scene.snapshot).

    Restore it (Scene.restore) and step, and the original run repeats bitwise. It holds the
    scene's saved device fields (poses, previous pairs and their warm-start impulses, colours,
    sleep timers and islands, PID state, motor targets), its motor settings, its host-side
    step cache, the forces applied for the next step, and its clock. A snapshot belongs to one
    scene model: restoring it into a scene with other bodies, joints, disabled pairs or
    n_worlds is refused, and so is one whose contents do not hold together (see
    state_files.check_snapshot: a snapshot is checked whole before the scene changes).
    save writes it to a file, load reads it back.

    Attributes:
        fingerprint: a hash of the model's device arrays and layout, which restoring checks.
        n_worlds: the scene's number of worlds.
        n_bodies: its number of bodies.
        n_joints: its number of joints.
        device: {group: {field: array}}, the saved device fields: float32 or int32, the
            first axis the field's extent (device.EXTENTS: n_worlds * n_bodies body slots,
            the cache's n_pairs pairs, ...).
        motors: {field: array} of the motor settings set_joint_mode changes (MOTOR_FIELDS):
            mode (n_joints,) int32 (enums.MOTOR_*), pid (n_joints, 3) float32
            gains, max_effort (n_joints,) float32, N m or N.
        params: {name: float64 array} of the per-world values (Scene.set_body_params,
            set_gravity, set_joint_params; world_params.WorldParams.arrays): gravity
            (n_worlds, 2) m/s^2; where some world has its own, each body parameter
            (n_worlds, n_bodies) and pid (n_worlds, n_joints, 3); where some world has
            geometry of its own (Scene.set_shape_params; world_shapes.WorldShapes.arrays),
            shape_radius, shape_size, shape_length, shape_vertices and static_pose. Empty
            (a format 3 file): the scene's own values in every world.
        cache: the host-side step cache's fields (solver/context.StepCache: pair counts,
            colouring state), {name: int or bool}.
        forces: {body: (force (n_worlds, 2) float64 N, torque (n_worlds,) float64 N m)}
            applied for the next step.
        time: the scene's clock, s.
        step_count: the steps it had taken.
    """

    fingerprint: str
    n_worlds: int
    n_bodies: int
    n_joints: int
    device: dict
    motors: dict
    params: dict
    cache: dict
    forces: dict
    time: float
    step_count: int

    def copy(self) -> SceneSnapshot:
        """A deep copy: every array copied, so neither changes the other."""
        return dataclasses.replace(
            self,
            device={g: {k: v.copy() for k, v in f.items()} for g, f in self.device.items()},
            motors={k: v.copy() for k, v in self.motors.items()},
            params={k: v.copy() for k, v in self.params.items()},
            cache=dict(self.cache),
            forces={b: (f.copy(), t.copy()) for b, (f, t) in self.forces.items()},
        )

    def device_snapshot(self) -> Snapshot:
        """A copy of the saved device fields, as the residency.Snapshot the device pool loads."""
        return Snapshot(self.copy().device)

    def save(self, path):
        """Write the snapshot to a compressed NumPy .npz file (format FORMAT_VERSION).

        Members: meta (a JSON string: format_version, fingerprint, n_worlds, n_bodies,
        n_joints, cache, time, step_count), device/<group>/<field>, motors/<field>,
        params/<name>, and forces/<body>/force and forces/<body>/torque.

        Args:
            path (str | os.PathLike): the file to write (replaced if it exists).

        Raises:
            OSError: the file cannot be written.
        """
        arrays = {
            f"device/{g}/{k}": v for g, fields in self.device.items() for k, v in fields.items()
        }
        arrays.update({f"motors/{k}": v for k, v in self.motors.items()})
        arrays.update({f"params/{k}": v for k, v in self.params.items()})
        for body, (force, torque) in self.forces.items():
            arrays[f"forces/{body}/force"], arrays[f"forces/{body}/torque"] = force, torque
        meta = {
            "format_version": FORMAT_VERSION,
            "fingerprint": self.fingerprint,
            "n_worlds": self.n_worlds,
            "n_bodies": self.n_bodies,
            "n_joints": self.n_joints,
            "cache": self.cache,
            "time": self.time,
            "step_count": self.step_count,
        }
        with open(Path(path), "wb") as f:
            np.savez_compressed(f, meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path) -> SceneSnapshot:
        """Read a snapshot from a file written by save.

        The file is checked on its own: a readable archive of .npy arrays (never pickles),
        the format version, the meta's fields and types, every member's name, dtype and
        shape (a device array's only within the largest extent of the layout the meta
        declares), and member sizes within what that layout can need. What depends on the
        scene (the model, the device arrays' exact shapes, every value) is checked when the
        snapshot is restored. Scene.load_state checks both, and bounds the file by the
        scene's own size before reading it: prefer it for files from elsewhere.

        Args:
            path (str | os.PathLike): the file to read.

        Returns:
            The snapshot, to pass to Scene.restore.

        Raises:
            ValueError: the file is missing, not a fx2d_gpu state file (damaged, truncated,
                not a zip of .npy arrays), of another format version, or holds a field
                that does not fit its layout (named in the message).
        """
        return read_state_file(path)


def take_snapshot(
    binding,
    cache: StepCache,
    params: WorldParams,
    forces: dict,
    time: float,
    step_count: int,
    geometry: dict | None = None,
) -> SceneSnapshot:
    """A SceneSnapshot of a built scene: its binding (residency.Binding), step cache,
    per-world values, pending forces {body: (force, torque)}, clock and per-world geometry
    (`geometry`: WorldShapes.arrays, among the params)."""
    device = residency.current_state(binding).arrays
    return SceneSnapshot(
        scene_fingerprint(binding),
        binding.n_worlds,
        binding.n_bodies,
        binding.n_joints,
        {group: {k: v.copy() for k, v in fields.items()} for group, fields in device.items()},
        {k: binding.base_model["joints"][k].copy() for k in MOTOR_FIELDS},
        {**params.arrays(), **(geometry or {})},
        dataclasses.asdict(cache),
        {b: (np.array(f), np.array(t)) for b, (f, t) in forces.items()},
        time,
        step_count,
    )


def snapshot_values(
    arrays: dict, builder: ModelBuilder, n_worlds: int, gravity
) -> tuple[WorldParams, WorldShapes]:
    """A snapshot's `params` arrays (per-world values and per-world geometry) back as
    (WorldParams, WorldShapes) of n_worlds worlds, checked (WorldParams.from_arrays,
    WorldShapes.from_arrays: untrusted input); `gravity` (2,): every world's where the
    snapshot holds no per-world values.

    Raises:
        ValueError: a missing, extra or misshapen array, or a value that breaks a rule,
            naming it.
    """
    values = {k: v for k, v in arrays.items() if k not in GEOMETRY_ARRAYS}
    if values:
        params = WorldParams.from_arrays(values, builder, n_worlds)
    else:
        params = WorldParams(n_worlds, gravity)
    geometry = {k: v for k, v in arrays.items() if k in GEOMETRY_ARRAYS}
    return params, WorldShapes.from_arrays(geometry, builder, n_worlds)


def restore_snapshot(
    snapshot, binding, cache: StepCache, builder: ModelBuilder, gravity, *, checked: bool = False
):
    """Put a snapshot back into a built scene (its binding, built for the model as it is and
    resident or not: the next acquire loads the snapshot; its step cache, its
    builder.ModelBuilder, and its own gravity (2,), for a snapshot without per-world
    values); returns (pending forces, time, step_count, WorldParams, WorldShapes: the
    snapshot's per-world geometry, none without).

    The snapshot is copied and checked whole first (check_snapshot, and its per-world
    values by WorldParams.from_arrays; `checked`: the caller has just checked this very
    copy's arrays, read_state_file), so a refusal changes nothing.

    Raises:
        TypeError: `snapshot` is not a SceneSnapshot.
        ValueError: it is of another scene, or does not hold together (naming the field).
    """
    if not isinstance(snapshot, SceneSnapshot):
        raise TypeError(f"snapshot must be a fx2d_gpu.SceneSnapshot, got {type(snapshot).__name__}")
    if not checked:
        plainly(check_containers, vars(snapshot), "snapshot")
        # Checked after copying: what is applied is what was checked, even if the caller's
        # arrays change later.
        snapshot = snapshot.copy()
        plainly(check_snapshot, vars(snapshot), binding, "snapshot")
    params, world_shapes = snapshot_values(snapshot.params, builder, binding.n_worlds, gravity)
    binding.edit("joints", slice(None), **{key: snapshot.motors[key] for key in MOTOR_FIELDS})
    model = binding.base_model["joints"]
    for j, joint in enumerate(builder.joints):
        joint.mode = int(model["mode"][j])
        joint.pid = tuple(float(g) for g in model["pid"][j])
        joint.max_effort = float(model["max_effort"][j])
    binding.apply_params(builder, params)
    binding.apply_shapes(builder, world_shapes)
    binding.saved = Snapshot(snapshot.device)
    defaults = StepCache()
    for key, value in snapshot.cache.items():
        # Python ints and bools, as the step sets them (a file's are; a snapshot made by
        # hand may hold NumPy scalars).
        setattr(cache, key, type(getattr(defaults, key))(value))
    residency.release(binding)  # the next use loads the snapshot and the motor settings
    forces = {int(b): (f, t) for b, (f, t) in snapshot.forces.items()}
    return forces, float(snapshot.time), int(snapshot.step_count), params, world_shapes


def read_state_file(path, binding=None) -> SceneSnapshot:
    """The snapshot in the state file at `path`, checked (state_files.read_state_file): on
    its own, or, with `binding` (a built scene's residency.Binding, resident in the pool:
    Scene.load_state), whole against that scene, reading no more than its state can need.

    Raises:
        ValueError: the file is missing, damaged or not a state file, of another format
            version, or holds a field that does not fit (named in the message).
    """
    return SceneSnapshot(**state_files.read_state_file(path, binding))


class SceneCopies:
    """Scene's copies (a mixin of fx2d_gpu.Scene, which holds the state they copy): snapshots
    in memory and in state files, replicate for a batch of one world's copies, and what
    copy.deepcopy and pickle keep."""

    @serialized
    def snapshot(self) -> SceneSnapshot:
        """Everything that affects this scene's future, as a SceneSnapshot: poses, velocities,
        warm-start impulses and pairs, colours, sleep timers and islands, PID state, motor targets
        and settings, forces pending, the clock. restore() it and the run repeats bitwise.
        """
        self._context()
        return take_snapshot(
            self._binding,
            self._cache,
            self._params,
            self._pending_forces,
            self.time,
            self.step_count,
            self._shapes.arrays(self._builder),
        )

    @serialized
    def restore(self, snapshot: SceneSnapshot):
        """Return to `snapshot` (snapshot() or SceneSnapshot.load), clock included.

        The scene's bodies, joints, disabled pairs and n_worlds must be the snapshot's. It is
        untrusted input, checked whole before anything changes (state_files.check_snapshot):
        layout and fingerprint, step cache, clock, every array's dtype, shape and values, forces.

        Raises:
            ValueError: the snapshot is of another scene.
        """
        # Built, not loaded: the snapshot replaces the state a load would bring in (and the
        # save of the scene resident before).
        self._built()
        forces, self.time, self.step_count, self._params, self._shapes = restore_snapshot(
            snapshot, self._binding, self._cache, self._builder, self._gravity
        )
        self._unwritten = None  # (edits not written yet: the snapshot replaces what they wrote)
        self._cell = self._world_cell()
        self._pending_forces = forces

    @serialized
    def save_state(self, path):
        """Write snapshot() to a NumPy .npz file at `path` (with a format version).

        Raises:
            OSError: the file cannot be written.
        """
        self.snapshot().save(path)

    @serialized
    def load_state(self, path):
        """Restore the snapshot in the file at `path` (written by save_state).

        The file is untrusted input, checked whole against this scene before anything changes
        (see restore, docs/batched-worlds.md) and read no further than this scene's state can
        need (a file, member count or member larger is refused from its headers).

        Raises:
            ValueError: the file is missing, not a fx2d_gpu state file (damaged, truncated), of
                another format version or of another scene.
        """
        self._context()  # built and resident: the file is read against its layout
        forces, self.time, self.step_count, self._params, self._shapes = restore_snapshot(
            read_state_file(path, self._binding),
            self._binding,
            self._cache,
            self._builder,
            self._gravity,
            checked=True,
        )
        self._cell = self._world_cell()
        self._pending_forces = forces

    @serialized
    def _settings(self) -> dict:
        """Scene()'s arguments that make a scene like this one (the backend this process
        runs: "cpu", or "auto" for the GPU it found): what replicate, pickling and
        distributed's shards build a copy with."""
        return dict(
            gravity=self.gravity,
            substeps=self.substeps,
            n_worlds=self._n_worlds,
            enable_sleep=self.enable_sleep,
            on_fault=self.on_fault,
            solver=self.solver,
            step_options=self._step_options,
            friction_mixing=self.friction_mixing,
            restitution_mixing=self.restitution_mixing,
            arch="cpu" if self.backend in ("x64", "arm64") else "auto",
        )

    def replicate(self, n_worlds: int):
        """A new scene of `n_worlds` copies of this one-world scene: the template of a batch or of
        distributed.ShardedScene's shards. It has this scene's bodies, joints, settings,
        per-world values and shapes and clock; each of its worlds starts from this world's poses,
        velocities, sleep and enabled flags and motor targets, with its pending forces; contacts,
        warm-start impulses, sleep timers and PID state start over, as after set_state. Every
        world steps bit for bit as the others, and as any other copy made the same way.

        Raises:
            ValueError: this scene has more than one world.
        """
        n_worlds = as_count(n_worlds, "n_worlds")
        if self._n_worlds != 1:
            raise ValueError(
                f"replicate copies a one-world scene; this one has {self._n_worlds} worlds"
            )
        copy = type(self)(**dict(self._settings(), n_worlds=n_worlds))
        copy._builder = deepcopy(self._builder)
        copy._params = self._params.repeated(n_worlds)
        copy._shapes = self._shapes.repeated(n_worlds)
        copy.meta, copy.visuals = deepcopy(self.meta), deepcopy(self.visuals)
        copy.time, copy.step_count = self.time, self.step_count
        for joint, values in self._pending_targets.items():
            copy._pending_targets[joint] = np.repeat(values[:1], n_worlds)
        if self._is_built():
            state = self.get_state()
            copy.set_state(
                State(
                    *(
                        np.repeat(a, n_worlds, axis=0)
                        for a in (
                            state.position,
                            state.angle,
                            state.velocity,
                            state.angular_velocity,
                            state.sleeping,
                        )
                    )
                )
            )
            for joint in range(self.n_joints):
                copy.set_joint_target(joint, float(self._joint_targets(joint)[0]))
            disabled = np.flatnonzero(~self.enabled()[0])
            if len(disabled):
                copy.set_enabled(disabled, False)
        copy._pending_forces = {
            body: (np.repeat(force[:1], n_worlds, axis=0), np.repeat(torque[:1], n_worlds))
            for body, (force, torque) in self._pending_forces.items()
        }
        return copy

    @serialized
    def __getstate__(self) -> dict:
        """What copy.deepcopy and pickle keep: the settings, the model, the pending inputs,
        and (once built) a snapshot; the copy continues bitwise like the original."""
        self._settle()  # (the clock below is the one after the steps in flight)
        return {
            "settings": self._settings(),
            "builder": self._builder,
            "pending_targets": self._pending_targets,
            "meta": self.meta,
            "visuals": self.visuals,
            "time": self.time,
            "step_count": self.step_count,
            "params": self._params.copy(),
            "shapes": self._shapes.copy(),
            "snapshot": self.snapshot() if self._binding.n_bodies else None,
            "pending_forces": self._pending_forces,
        }

    def __setstate__(self, state: dict):
        self.__init__(**state["settings"])
        self._builder = state["builder"]
        self._pending_targets = state["pending_targets"]
        if "params" in state:  # (a pickle from before per-world values has none)
            self._params = state["params"]
        if "shapes" in state:  # (nor one from before per-world geometry any shapes)
            self._shapes = state["shapes"]
        self.meta, self.visuals = state["meta"], state["visuals"]
        if state["snapshot"] is not None:
            # Not restore(): a copy's own snapshot is not checked as a state file from
            # elsewhere would be (unpickling runs code anyway), so that a scene kept in the
            # state a fault left it (on_fault="raise") can still be copied and looked at.
            self._context()  # builds the arrays of the same model first
            *_, self._params, self._shapes = restore_snapshot(
                state["snapshot"],
                self._binding,
                self._cache,
                self._builder,
                self._gravity,
                checked=True,
            )
            self._cell = self._world_cell()
        self._pending_forces = state["pending_forces"]
        self.time, self.step_count = state["time"], state["step_count"]
