"""Exact snapshots of a scene: everything that affects its future, in memory or in a file.

A SceneSnapshot holds the scene's saved device fields (residency.Snapshot: poses, previous
pairs and their warm-start impulses, colours, sleep timers and islands, PID state and
motor targets), its motor settings (set_joint_mode changes them), its host-side step cache
(pair counts, colouring state), the forces applied for the next step, and its clock.
Restoring one and stepping reproduces the original run bitwise.

A snapshot belongs to one scene model: its fingerprint is a hash of the model's device
arrays (bodies, shapes, joints, disabled pairs) and layout; restoring it into a scene with
another fingerprint is refused.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import residency
from .residency import Snapshot
from .solver.context import StepCache

#: Version of the .npz layout written by save; load refuses others. 2: enabled flags,
#: reported contacts and events; 3: the colour lists end with the pairs left unsolved
#: (device.UNSOLVED_COLOR: color_start has one entry more).
FORMAT_VERSION = 3
#: Joint fields that set_joint_mode changes: state of a snapshot, not part of the model.
MOTOR_FIELDS = ("mode", "pid", "max_effort")


@dataclass
class SceneSnapshot:
    """An exact snapshot of a scene: everything that affects its future (Scene.snapshot).

    Restore it (Scene.restore) and step, and the original run repeats bitwise. It holds the
    scene's saved device fields (poses, previous pairs and their warm-start impulses, colours,
    sleep timers and islands, PID state and motor targets), its motor settings, its host-side
    step cache, the forces applied for the next step, and its clock. A snapshot belongs to one
    scene model: restoring it into a scene with other bodies, joints, disabled pairs or
    n_worlds is refused. save writes it to a file, load reads it back.

    Attributes:
        fingerprint: a hash of the model's device arrays and layout, which restoring checks.
        n_worlds: the scene's number of worlds.
        n_bodies: its number of bodies.
        n_joints: its number of joints.
        device: {group: {field: array}}, the saved device fields.
        motors: {field: array} of the motor settings set_joint_mode changes (mode, pid,
            max_effort: MOTOR_FIELDS).
        cache: the host-side step cache's fields (pair counts, colouring state).
        forces: {body: (force (n_worlds, 2) N, torque (n_worlds,) N m)} applied for the next
            step.
        time: the scene's clock, s.
        step_count: the steps it had taken.
    """

    fingerprint: str
    n_worlds: int
    n_bodies: int
    n_joints: int
    device: dict
    motors: dict
    cache: dict
    forces: dict
    time: float
    step_count: int

    def copy(self) -> SceneSnapshot:
        """A deep copy: every array copied, so neither changes the other."""
        return dataclasses.replace(
            self, device={g: {k: v.copy() for k, v in f.items()} for g, f in self.device.items()},
            motors={k: v.copy() for k, v in self.motors.items()}, cache=dict(self.cache),
            forces={b: (f.copy(), t.copy()) for b, (f, t) in self.forces.items()})

    def device_snapshot(self) -> Snapshot:
        """A copy of the saved device fields, as the residency.Snapshot the device pool loads."""
        return Snapshot(self.copy().device)

    def save(self, path):
        """Write the snapshot to a compressed NumPy .npz file (format FORMAT_VERSION).

        Args:
            path (str | os.PathLike): the file to write (replaced if it exists).

        Raises:
            OSError: the file cannot be written.
        """
        arrays = {f"device/{g}/{k}": v for g, fields in self.device.items()
                  for k, v in fields.items()}
        arrays.update({f"motors/{k}": v for k, v in self.motors.items()})
        for body, (force, torque) in self.forces.items():
            arrays[f"forces/{body}/force"], arrays[f"forces/{body}/torque"] = force, torque
        meta = {"format_version": FORMAT_VERSION, "fingerprint": self.fingerprint,
                "n_worlds": self.n_worlds, "n_bodies": self.n_bodies,
                "n_joints": self.n_joints, "cache": self.cache, "time": self.time,
                "step_count": self.step_count}
        with open(Path(path), "wb") as f:
            np.savez_compressed(f, meta=np.array(json.dumps(meta)), **arrays)

    @classmethod
    def load(cls, path) -> SceneSnapshot:
        """Read a snapshot from a file written by save.

        Args:
            path (str | os.PathLike): the file to read.

        Returns:
            The snapshot, to pass to Scene.restore.

        Raises:
            ValueError: the file is missing, not a fx2d_gpu state file, or of another format
                version.
        """
        try:
            with np.load(Path(path), allow_pickle=False) as data:
                meta = json.loads(str(data["meta"]))
                arrays = {key: data[key] for key in data.files if key != "meta"}
        except (OSError, KeyError, ValueError, json.JSONDecodeError) as error:
            raise ValueError(f"{path}: not a fx2d_gpu state file ({error})") from None
        version = meta.get("format_version")
        if version != FORMAT_VERSION:
            raise ValueError(f"{path}: state file format {version}, this fx2d_gpu reads "
                             f"format {FORMAT_VERSION}")
        device, motors, forces = {}, {}, {}
        for key, value in arrays.items():
            kind, *rest = key.split("/")
            if kind == "device":
                device.setdefault(rest[0], {})[rest[1]] = value
            elif kind == "motors":
                motors[rest[0]] = value
            elif kind == "forces":
                pair = forces.setdefault(int(rest[0]), [None, None])
                pair[0 if rest[1] == "force" else 1] = value
        return cls(meta["fingerprint"], meta["n_worlds"], meta["n_bodies"], meta["n_joints"],
                   device, motors, meta["cache"], {b: tuple(v) for b, v in forces.items()},
                   float(meta["time"]), int(meta["step_count"]))


def model_fingerprint(model: dict, n_worlds: int) -> str:
    """A hash of the model's device arrays (motor settings left out) and the world count."""
    digest = hashlib.sha1(str(n_worlds).encode())
    for group in sorted(model):
        for name in sorted(model[group]):
            if group == "joints" and name in MOTOR_FIELDS:
                continue
            value = np.ascontiguousarray(model[group][name])
            digest.update(f"{group}/{name}/{value.dtype}/{value.shape}".encode())
            digest.update(value.tobytes())
    return digest.hexdigest()


def _fingerprint(binding) -> str:
    if binding.fingerprint is None:
        binding.fingerprint = model_fingerprint(binding.model, binding.n_worlds)
    return binding.fingerprint


def take_snapshot(binding, cache: StepCache, forces: dict, time: float,
                  step_count: int) -> SceneSnapshot:
    """A SceneSnapshot of a built scene: its binding (residency.Binding), step cache,
    pending forces {body: (force, torque)} and clock."""
    device = residency.current_state(binding).arrays
    return SceneSnapshot(
        _fingerprint(binding), binding.n_worlds, binding.n_bodies, binding.n_joints,
        {group: {k: v.copy() for k, v in fields.items()} for group, fields in device.items()},
        {k: binding.model["joints"][k].copy() for k in MOTOR_FIELDS},
        dataclasses.asdict(cache),
        {b: (np.array(f), np.array(t)) for b, (f, t) in forces.items()}, time, step_count)


def restore_snapshot(snapshot, binding, cache: StepCache, joints: list):
    """Put a snapshot back into a built scene (its binding, step cache and builder.Joint
    list); returns (pending forces, time, step_count). TypeError / ValueError, with nothing
    changed, for what is not a snapshot of this scene's model."""
    if not isinstance(snapshot, SceneSnapshot):
        raise TypeError(f"snapshot must be a fx2d_gpu.SceneSnapshot, got "
                        f"{type(snapshot).__name__}")
    if snapshot.fingerprint != _fingerprint(binding):
        raise ValueError("snapshot is of another scene (its bodies, joints, disabled pairs "
                         "or n_worlds differ)")
    snapshot = snapshot.copy()
    model = binding.model["joints"]
    for key in MOTOR_FIELDS:
        model[key][...] = snapshot.motors[key]
    for j, joint in enumerate(joints):
        joint.mode = int(model["mode"][j])
        joint.pid = tuple(float(g) for g in model["pid"][j])
        joint.max_effort = float(model["max_effort"][j])
    binding.saved = snapshot.device_snapshot()
    # A file from before fat boxes were saved has none: its pairs are found afresh.
    cache.pairs_fat = False
    cache.report_mapped = False  # (nor its reported list's origins)
    for key, value in snapshot.cache.items():
        setattr(cache, key, value)
    residency.release(binding)  # the next use loads the snapshot and the motor settings
    return dict(snapshot.forces), snapshot.time, snapshot.step_count
