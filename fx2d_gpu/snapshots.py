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

from .residency import Snapshot
from .solver.context import StepCache

#: Version of the .npz layout written by save; load refuses others.
FORMAT_VERSION = 1
#: Joint fields that set_joint_mode changes: state of a snapshot, not part of the model.
MOTOR_FIELDS = ("mode", "pid", "max_effort")


@dataclass
class SceneSnapshot:
    """See the module docstring. device: {group: {field: array}}; motors: {field: array}
    (MOTOR_FIELDS); forces: {body: (force (n_worlds, 2), torque (n_worlds,))} applied for
    the next step; cache: StepCache fields; time (s), step_count."""

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
        return dataclasses.replace(
            self, device={g: {k: v.copy() for k, v in f.items()} for g, f in self.device.items()},
            motors={k: v.copy() for k, v in self.motors.items()}, cache=dict(self.cache),
            forces={b: (f.copy(), t.copy()) for b, (f, t) in self.forces.items()})

    def device_snapshot(self) -> Snapshot:
        return Snapshot(self.copy().device)

    def step_cache(self) -> StepCache:
        return StepCache(**self.cache)

    def save(self, path):
        """Write the snapshot as a NumPy .npz file (format FORMAT_VERSION)."""
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
        """Read a file written by save; ValueError if it is not one, or of another version."""
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


def cache_fields(cache: StepCache) -> dict:
    return dataclasses.asdict(cache)
