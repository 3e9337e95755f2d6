"""Where a step's time goes: milliseconds per stage of the benchmark scenes (Scene.profile).

    python -m benchmarks large_pyramid --profile
    fx2d bench --profile [SCENE ...] [--arch ...] [--quick]

Each scene is stepped WARMUP_STEPS steps (compilation, and a pyramid's first contacts) and
one profiled step (the profile's own kernels compile), then PROFILED_STEPS steps with every
stage timed (solver/profile.py: each stage its own
launches, the device synchronised around it), then as many normal steps, timed together,
for the step's true cost beside the profile. Prints a table per scene and saves
benchmarks/results/<device>/profile_<scene>.csv (a row per stage).
"""

import datetime
import time

import taichi as ti

from fx2d_gpu import scenes
from fx2d_gpu.device import runtime
from fx2d_gpu.physics.solver.stages import DEFAULT_SUBSTEPS

from .common import device_name, save_csv

DT = 1.0 / 60.0
WARMUP_STEPS = 30
PROFILED_STEPS = 20


def _builders(quick: bool, solver: str = "xpbd") -> dict:
    """scene name -> builder at the benchmark's size (--quick: tiny), with `solver` at its
    default substeps."""
    run_with = {"solver": solver, "substeps": DEFAULT_SUBSTEPS[solver]}
    return {
        "large_pyramid": lambda: scenes.pyramid(
            5 if quick else 100, enable_sleep=False, **run_with
        ),
        "many_pyramids": lambda: scenes.many_pyramids(
            2 if quick else 20, 3 if quick else 10, enable_sleep=False, **run_with
        ),
        "joint_grid": lambda: scenes.joint_grid(*((4, 5) if quick else (100, 100)), **run_with),
        "pile": lambda: scenes.pile(60 if quick else 10_000, **run_with),
        "batched_small": lambda: scenes.batched_small(4 if quick else 4096, **run_with),
    }


SCENES = tuple(_builders(False))


def profile_scene(
    name: str, quick: bool = False, steps: int = PROFILED_STEPS, solver: str = "xpbd"
):
    """(StepProfile, scene) of the named scene after WARMUP_STEPS steps (2 with --quick);
    the profile's step_ms is the normal step's time over as many steps after it."""
    scene = _builders(quick, solver)[name]()
    for _ in range(2 if quick else WARMUP_STEPS):
        scene.step(DT)
    scene.profile(DT, 1)  # compiles the kernels a profiled step launches
    profile = scene.profile(DT, steps)
    ti.sync()
    start = time.perf_counter()
    for _ in range(steps):
        scene.step(DT)
    ti.sync()
    profile.step_ms = (time.perf_counter() - start) * 1e3 / steps
    return profile, scene


def run(names, arch: str = "auto", quick: bool = False, results=None, solver: str = "xpbd") -> dict:
    """Profile the named scenes with `solver`; returns {name: StepProfile} and writes a CSV
    for each (profile_<scene>.csv, profile_<scene>_soft_step.csv for the soft step)."""
    backend = runtime.ensure_initialized(arch)
    device = device_name(backend)
    date = datetime.date.today().isoformat()
    out = {}
    for name in names:
        profile, scene = profile_scene(name, quick, solver=solver)
        print(
            f"- {name}: {scene.n_worlds} world(s) of {scene.n_bodies} bodies, "
            f"{scene.n_joints} joints, {scene.substeps} substeps, on {device} ({backend}),"
            f" {profile.steps} profiled steps after {2 if quick else WARMUP_STEPS}"
        )
        print(profile.table(), flush=True)
        rows = [
            {
                "date": date,
                "device": device,
                "backend": backend,
                "scene": name,
                "bodies": scene.n_bodies,
                "worlds": scene.n_worlds,
                "substeps": scene.substeps,
                "solver": solver,
                "stage": stage,
                "ms_per_step": round(ms, 4),
                "share": round(ms / profile.total_ms, 4) if profile.total_ms else 0.0,
                "profiled_step_ms": round(profile.total_ms, 3),
                "normal_step_ms": round(profile.step_ms, 3),
            }
            for stage, ms in profile.stages.items()
        ]
        csv_name = f"profile_{name}" if solver == "xpbd" else f"profile_{name}_{solver}"
        print("  saved", save_csv(backend, csv_name, rows, results), flush=True)
        out[name] = profile
    return out
