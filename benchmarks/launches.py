"""Kernel launches per step of each solver, on the path a GPU takes (a launch per stage
group and per COLORS_PER_LAUNCH colours; small worlds: one launch for all substeps).

    python -m benchmarks.launches [--results DIR]

On a GPU backend each launch costs microseconds from Python and a device round of work,
so launches decide the step time of small and medium scenes there. This runs on the CPU
backend with the CPU team off (solver/team.py: a CPU runs the substeps in one launch
otherwise), which walks the GPU's path; the counts are those of any backend. Each scene is
stepped 30 steps, then 10 counted (launching.launch_count). Saves
benchmarks/results/<device>/launches_per_step.csv.
"""

import argparse
import datetime

from fx2d_gpu import launching, runtime, scenes
from fx2d_gpu.solver import team
from fx2d_gpu.solver.stages import STAGES

from .common import device_name, print_table, save_csv

WARM_STEPS, COUNTED_STEPS = 30, 10
DT = 1.0 / 60.0


def _scenes(solver: str):
    """(name, builder) of the counted scenes for `solver`, at its default substeps."""
    specs, _ = scenes.pyramid_layout(100)
    return (("large_pyramid", lambda: scenes.build_scene(specs, arch="cpu", solver=solver,
                                                         enable_sleep=False)),
            ("joint_grid_30x30", lambda: scenes.joint_grid(30, 30, arch="cpu", solver=solver)),
            ("batched_small_256", lambda: scenes.batched_small(256, arch="cpu",
                                                              solver=solver)))


def run(results=None) -> list[dict]:
    backend = runtime.ensure_initialized("cpu")
    team.ENABLED = False  # the per-stage path, as on a GPU
    rows = []
    date = datetime.date.today().isoformat()
    for solver in STAGES:
        for name, build in _scenes(solver):
            scene = build()
            for _ in range(WARM_STEPS):
                scene.step(DT)
            before = launching.launch_count()
            for _ in range(COUNTED_STEPS):
                scene.step(DT)
            rows.append({"date": date, "device": device_name(backend), "backend": backend,
                         "solver": solver, "scene": name, "substeps": scene.substeps,
                         "colors": scene.n_colors,
                         "launches_per_step": (launching.launch_count() - before)
                         / COUNTED_STEPS})
    print_table(rows)
    print("  saved", save_csv(backend, "launches_per_step", rows, results))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.launches",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--results", default=None, help="results folder")
    run(parser.parse_args(argv).results)


if __name__ == "__main__":
    main()
