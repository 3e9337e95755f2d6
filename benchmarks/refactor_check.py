"""A refactor's check: bitwise state hashes of 11 scenes, and the first step's compile time.

A change that means to leave the physics alone (a restructuring) must leave every hash as it
was, on both CPU executors: the substeps on a team of threads in one launch
(solver/team.py) and one launch per stage (team.ENABLED off, the GPU backends' path).
Each scene is stepped 90 steps of 1/60 s; the hash covers poses, velocities, sleep flags
and joint coordinates and rates, as float64 bytes.

    python -m benchmarks.refactor_check            # hashes
    python -m benchmarks.refactor_check --compile  # + first-step compile times, empty cache

Compile times are wall-clock seconds of a fresh process's first step with an empty offline
cache (noisy on a shared machine: compare medians of a few runs).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile

import numpy as np

STEPS = 90
DT = 1.0 / 60.0


def _scenes():
    """name -> builder of the 11 scenes (each a different mix of the solver's paths)."""
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

    built = {f"example:{name}": (lambda name=name: fx.load_scene(examples.path(name)))
             for name in examples.names()}
    built.update({
        "pyramid_20": lambda: scenes.pyramid(20),
        "batched_small_64": lambda: scenes.batched_small(64),
        "random_pile_600": lambda: scenes.random_pile(600),
        "joint_grid_6x8": sleepy_joints,
        "bullets": bullets,
    })
    return built


def state_hash(scene) -> str:
    """sha256 (16 hex digits) of the scene's poses, velocities, sleep flags and joints."""
    state = scene.get_state()
    digest = hashlib.sha256()
    for array in (state.position, state.angle, state.velocity, state.angular_velocity,
                  state.sleeping.astype(np.int8)):
        digest.update(np.ascontiguousarray(array).tobytes())
    if scene.n_joints:
        joints = scene.joint_state()
        digest.update(np.ascontiguousarray(joints.position).tobytes())
        digest.update(np.ascontiguousarray(joints.rate).tobytes())
    return digest.hexdigest()[:16]


def hashes() -> dict[str, tuple[str, str]]:
    """name -> (hash with the CPU team, hash with a launch per stage)."""
    from fx2d_gpu.solver import team

    results = {}
    for name, build in _scenes().items():
        row = []
        for enabled in (True, False):
            team.ENABLED = enabled
            scene = build()
            for _ in range(STEPS):
                scene.step(DT)
            row.append(state_hash(scene))
        team.ENABLED = True
        results[name] = tuple(row)
    return results


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
        out = subprocess.run([sys.executable, "-c", _COMPILE_PROBE], env=env, check=True,
                             capture_output=True, text=True).stdout
    return {line.split()[0]: float(line.split()[1]) for line in out.splitlines()
            if line.split()[:1] and line.split()[0] in ("small", "pyramid_20")}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compile", action="store_true",
                        help="also time the first step with an empty offline cache")
    args = parser.parse_args(argv)
    from fx2d_gpu.runtime import ensure_initialized

    ensure_initialized("cpu")
    for name, (team_hash, staged_hash) in hashes().items():
        same = "same" if team_hash == staged_hash else "DIFFERENT"
        print(f"{name:32s} team {team_hash}  per-stage {staged_hash}  ({same})", flush=True)
    if args.compile:
        for name, seconds in compile_times().items():
            print(f"first step, empty cache, {name}: {seconds:.2f} s")


if __name__ == "__main__":
    main()
