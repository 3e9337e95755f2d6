"""A refactor's check: bitwise state hashes of 15 scenes, and the first step's compile time.

A change that means to leave the physics alone (a restructuring) must leave every hash as it
was, on both CPU executors: the substeps on a team of threads in one launch
(solver/team.py) and one launch per stage (StepOptions.team off, the GPU backends' path).
Each scene is stepped 90 steps of 1/60 s; the hash covers poses, velocities, sleep flags
and joint coordinates and rates, as float64 bytes.

    python -m benchmarks.refactor_check            # hashes, compared with the stored ones
    python -m benchmarks.refactor_check --update   # store this machine's hashes
    python -m benchmarks.refactor_check --compile  # + first-step compile times, empty cache

The stored hashes (refactor_hashes.json beside this file) are kept per CPU model
(machine_key): Taichi compiles for the CPU it runs on, and another instruction set may
round differently. tests/test_refactor_hashes.py compares them; they change only on
purpose, with the reason in the commit that stores them (--update).

Compile times are wall-clock seconds of a fresh process's first step with an empty offline
cache (noisy on a shared machine: compare medians of a few runs).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

STEPS = 90
DT = 1.0 / 60.0
#: The stored hashes: {machine_key: {scene name: hash}}.
STORED = Path(__file__).with_name("refactor_hashes.json")


def _scenes():
    """name -> builder of the 15 scenes (each a different mix of the solver's paths; the
    soft step's four after XPBD's eleven)."""
    import fx2d_gpu as fx
    from fx2d_gpu import examples, scenes

    def bullets():
        scene = fx.Scene(substeps=11)
        scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0)
        for level in range(5):
            scene.add_box((3.0, 0.5 + level), (1.0, 1.0))
        scene.add_circle((-5.0, 2.0), 0.05, mass=0.05, velocity=(300.0, 0.0), bullet=True)
        scene.add_box((-2.0, 10.0), (0.05, 0.05), velocity=(0.0, -200.0))
        return scene

    def sleepy_joints():
        return scenes.joint_grid(6, 8)

    built = {
        f"example:{name}": (lambda name=name: fx.load_scene(examples.path(name)))
        for name in examples.names()
    }
    built.update(
        {
            "pyramid_20": lambda: scenes.pyramid(20),
            "batched_small_64": lambda: scenes.batched_small(64),
            "random_pile_600": lambda: scenes.random_pile(600),
            "joint_grid_6x8": sleepy_joints,
            "bullets": bullets,
            "soft:pyramid_20": lambda: scenes.pyramid(20, solver="soft_step", substeps=4),
            "soft:batched_small_64": lambda: scenes.batched_small(64, solver="soft_step"),
            "soft:joint_grid_6x8": lambda: scenes.joint_grid(6, 8, solver="soft_step"),
            "soft:random_pile_600": lambda: scenes.random_pile(600, solver="soft_step"),
        }
    )
    return built


def state_hash(scene) -> str:
    """sha256 (16 hex digits) of the scene's poses, velocities, sleep flags and joints."""
    state = scene.get_state()
    digest = hashlib.sha256()
    for array in (
        state.position,
        state.angle,
        state.velocity,
        state.angular_velocity,
        state.sleeping.astype(np.int8),
    ):
        digest.update(np.ascontiguousarray(array).tobytes())
    if scene.n_joints:
        joints = scene.joint_state()
        digest.update(np.ascontiguousarray(joints.position).tobytes())
        digest.update(np.ascontiguousarray(joints.rate).tobytes())
    return digest.hexdigest()[:16]


def hashes() -> dict[str, tuple[str, str]]:
    """name -> (hash with the CPU team, hash with a launch per stage)."""
    results = {}
    for name, build in _scenes().items():
        row = []
        for team in (True, False):
            scene = build()
            scene.step_options = {"team": team}
            for _ in range(STEPS):
                scene.step(DT)
            row.append(state_hash(scene))
        results[name] = tuple(row)
    return results


#: CPU features that change the code LLVM generates for Taichi's kernels here, and so may
#: change rounding (fused multiply-adds, vector widths).
_CODEGEN_FLAGS = ("avx2", "avx512f", "fma")


def machine_key() -> str:
    """The CPU model this process runs on and its code-generation features (the stored
    hashes' key): one model name can come with or without AVX-512 on virtual machines."""
    model, flags = platform.processor() or platform.machine(), set()
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                elif line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return " ".join([model, *(flag for flag in _CODEGEN_FLAGS if flag in flags)])


def stored_hashes() -> dict[str, str] | None:
    """{scene name: hash} stored for this machine's CPU model, None if none are."""
    if not STORED.exists():
        return None
    return json.loads(STORED.read_text()).get(machine_key())


def store_hashes(hashes_now: dict[str, str]):
    """Store `hashes_now` as this machine's CPU model's hashes (the others' kept)."""
    table = json.loads(STORED.read_text()) if STORED.exists() else {}
    table[machine_key()] = dict(sorted(hashes_now.items()))
    STORED.write_text(json.dumps(table, indent=2, sort_keys=True) + "\n")


_COMPILE_PROBE = """
import time
from fx2d_gpu import scenes
for name, build in (("small", lambda: scenes.batched_small(4, arch="cpu")),
                    ("pyramid_20", lambda: scenes.pyramid(20, arch="cpu"))):
    scene = build()
    start = time.perf_counter()
    scene.step(1 / 60)
    print(name, round(time.perf_counter() - start, 2), flush=True)
"""


def compile_times() -> dict[str, float]:
    """Seconds of the first step of a small batched scene and of pyramid_20 in a fresh
    process with an empty offline cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=cache)
        out = subprocess.run(
            [sys.executable, "-c", _COMPILE_PROBE],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
    return {
        line.split()[0]: float(line.split()[1])
        for line in out.splitlines()
        if line.split()[:1] and line.split()[0] in ("small", "pyramid_20")
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--compile",
        action="store_true",
        help="also time the first step with an empty offline cache",
    )
    parser.add_argument(
        "--update", action="store_true", help="store this machine's hashes (refactor_hashes.json)"
    )
    args = parser.parse_args(argv)
    from fx2d_gpu.device.runtime import ensure_initialized

    ensure_initialized("cpu")
    stored = stored_hashes() or {}
    now = {}
    for name, (team_hash, staged_hash) in hashes().items():
        same = "same" if team_hash == staged_hash else "DIFFERENT"
        was = stored.get(name)
        verdict = (
            "none stored"
            if was is None
            else ("as stored" if was == team_hash else f"CHANGED (stored {was})")
        )
        print(
            f"{name:32s} team {team_hash}  per-stage {staged_hash}  ({same}; {verdict})", flush=True
        )
        if team_hash == staged_hash:
            now[name] = team_hash
    if args.update:
        if len(now) != len(_scenes()):
            sys.exit("not stored: the two executors disagree on a scene")
        store_hashes(now)
        print(f"stored for {machine_key()!r} in {STORED}")
    if args.compile:
        for name, seconds in compile_times().items():
            print(f"first step, empty cache, {name}: {seconds:.2f} s")


if __name__ == "__main__":
    main()
