"""Small worlds' step by its paths, side by side in one process: a world a thread (the
defaults), a world a thread in the worlds' colours (StepOptions.color_small_worlds), their
substeps a block of worlds at a time (small_worlds_by_block: a GPU's block of threads, a
CPU's thread), by stage on the step's team (small_worlds_by_stage: CUDA's grid team, a
CPU's threads) and by stage with the colours by turns (colors_by_turns). The same worlds and
pool for each, so only the step's kernel is compiled anew.

    python -m benchmarks.small_worlds_paths [--arch cuda] [--worlds W ...]
        [--solver xpbd soft_step] [--steps N] [--window N] [--results DIR]
        [--path NAME ...] [--step-option NAME=VALUE ...]

`batched_small`'s worlds (8 bodies and a joint a world; 65,536 on a GPU, 4,096 on a CPU by
default), stepped without reading anything between steps (a GPU's steps fly: one read of
their answers every 64), the device synced at the end of each timed window. Saves
benchmarks/results/<device>/small_worlds_paths.csv (_<solver> where one is asked,
then the step options): solver, worlds, path, the first step
(s: the compile), ms a step (the median window), world-steps a second, the team's barriers
a step (its generation counter; 0 for a world a thread), and whether the worlds' state
stayed finite.
"""

import argparse
import datetime
import statistics
import time

import numpy as np
import taichi as ti

from fx2d_gpu import scenes
from fx2d_gpu.device import runtime

from .common import (
    add_option_arguments,
    device_name,
    options_suffix,
    parsed_options,
    print_table,
    save_csv,
    time_windows,
)
from .launches import PATHS as COUNTED_PATHS
from .launches import barrier_generation

DT = 1.0 / 60.0
#: The GPU team's path as benchmarks.launches counts it on a CPU: its team timings keep a
#: CPU team of several threads every step (no duel trying a team of one).
TEAM_PATH = COUNTED_PATHS["gpu (team)"]
#: The paths: {name: StepOptions over the defaults}.
PATHS = {
    "a world a thread": {},
    "a world a thread, coloured": {"color_small_worlds": True},
    "by block": {"color_small_worlds": True, "small_worlds_by_block": True},
    "by stage": {"color_small_worlds": True, "small_worlds_by_stage": True},
    "by stage, by turns": {
        "color_small_worlds": True,
        "small_worlds_by_stage": True,
        "colors_by_turns": True,
    },
}


def measure(
    arch: str, solver: str, worlds: int, path: str, steps: int, window: int, extra: dict
) -> dict:
    """One row: `worlds` small worlds of `solver` on `path` (its StepOptions, then `extra`'s),
    `steps` steps timed in windows of `window` after the first (its own, timed alone:
    first_step_s). On a CPU backend the step folds into one launch as a GPU's does
    (StepOptions.fold_on_cpu), on a team of several threads every step."""
    options = {**PATHS[path], **extra}
    if runtime.on_cpu():
        options.update(fold_on_cpu=True, team_timings=TEAM_PATH.team_timings)
    scene = scenes.batched_small(worlds, arch=arch, solver=solver, step_options=options)
    start = time.perf_counter()
    scene.step(DT)  # (compiles; on a CPU the team's barriers are probed, their count cleared)
    scene.get_state()
    first = time.perf_counter() - start
    before = barrier_generation(scene)
    _, times = time_windows(lambda: scene.step(DT), ti.sync, steps, window)
    state = scene.get_state()
    ms = statistics.median(times)
    return {
        "solver": solver,
        "worlds": worlds,
        "path": path,
        "substeps": scene.substeps,
        "first_step_s": round(first, 3),
        "ms_per_step": round(ms, 4),
        "world_steps_per_s": round(worlds * 1000.0 / ms),
        "barriers_per_step": round((barrier_generation(scene) - before) / steps, 1),
        "finite": bool(np.isfinite(state.position).all()),
    }


def run(
    arch="cuda",
    worlds=None,
    solvers=("soft_step", "xpbd"),
    steps=61,
    window=10,
    results=None,
    step_options=None,
    paths=None,
):
    """Every path (or those of `paths`, names of PATHS) of `solvers` at each of `worlds`;
    `step_options`: {StepOptions attribute: value} over every path's. The CSV:
    small_worlds_paths.csv, its name ending with the solver where one is asked and with the
    options (a lease runs each solver apart)."""
    step_options = step_options or {}
    name = "small_worlds_paths"
    if len(solvers) == 1:
        name += f"_{solvers[0]}"
    name += options_suffix(step_options)
    backend = runtime.ensure_initialized(arch)
    worlds = worlds or [4_096 if runtime.on_cpu() else 65_536]
    base = {
        "date": datetime.date.today().isoformat(),
        "device": device_name(backend),
        "backend": backend,
    }
    rows = []
    for solver in solvers:
        for count in worlds:
            for path in paths or PATHS:
                row = measure(arch, solver, count, path, steps, window, step_options)
                rows.append({**base, **row})
                print(
                    f"  {solver} {count} worlds, {path}: {rows[-1]['ms_per_step']} ms a step, "
                    f"{rows[-1]['world_steps_per_s']:,} world-steps/s",
                    flush=True,
                )
                # (Saved after each row: a run cut short keeps what it measured.)
                save_csv(backend, name, rows, results)
    print_table(rows)
    print("  saved", save_csv(backend, name, rows, results))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="cuda", help="cuda | vulkan | cpu | ... (default cuda)")
    parser.add_argument("--worlds", type=int, nargs="*", default=None, help="small worlds")
    parser.add_argument(
        "--solver", nargs="*", default=["soft_step", "xpbd"], choices=("soft_step", "xpbd")
    )
    parser.add_argument("--steps", type=int, default=61, help="steps a path (61)")
    parser.add_argument("--window", type=int, default=10, help="steps a timed window (10)")
    parser.add_argument("--results", default=None, help="results folder")
    parser.add_argument(
        "--path",
        action="append",
        choices=tuple(PATHS),
        default=None,
        help="only this path (repeatable; default: every one)",
    )
    add_option_arguments(parser, "gpu_grid_blocks=176")
    args = parser.parse_args(argv)
    if args.steps < 2 or args.window < 1 or any(w < 1 for w in args.worlds or []):
        parser.error("--steps must be at least 2, --window and --worlds positive")
    step_options, compile_options = parsed_options(parser, args)
    if compile_options:
        parser.error("--taichi-option: not here (python -m benchmarks takes them)")
    run(
        args.arch,
        args.worlds,
        args.solver,
        args.steps,
        args.window,
        args.results,
        step_options,
        args.path,
    )


if __name__ == "__main__":
    main()
