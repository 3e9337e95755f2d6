"""Where a CPU scene's loops should stop running serially: the same scenes stepped with
loops serial up to two thresholds of body slots (device.SERIAL_SLOTS), in turns.

    python -m benchmarks.serial_loops [--piles N ...] [--pyramids ROWS ...]
        [--solvers xpbd soft_step] [--slots OLD NEW] [--rounds R] [--warm STEPS]
        [--steps STEPS] [--results DIR]

On Taichi's CPU backend a kernel's parallel loop is handed to its thread pool and waited
for (~0.1 ms on the 2-core VM on 2026-12-07), however little it does; a serial loop runs
on the launching thread. Scenes of at most SERIAL_SLOTS body slots run the loops outside
a CPU team's launch serially (the team's substeps keep their threads above
device.TEAM_OF_ONE_SLOTS). Each scene (the `fx2d demo` pile of N bodies poured into its
container, or its pyramid of ROWS rows) is built afresh for each threshold, stepped
`warm` steps (the kernels compile, the pile falls, the team's duel settles), then
`steps` steps timed one by one; the thresholds take turns, `rounds` times, so that a
busy machine's slow spell falls on both. The results are bitwise the same either way (the
refactor check's scenes; tests/test_solver.py's batch against single worlds): only the
time differs.

Saves benchmarks/results/<device>/serial_loops.csv: per scene, solver, threshold and
round, whether the loops ran serially, the CPU team's threads, the median and the 10th
percentile ms a step. CPU only: a GPU backend never runs a kernel's loops serially.
"""

import argparse
import datetime
import time

from fx2d_gpu import demos, device
from fx2d_gpu.device import runtime
from fx2d_gpu.physics.solver import team
from fx2d_gpu.physics.solver.stages import DEFAULT_SUBSTEPS

from .common import device_name, print_table, save_csv

DT = 1.0 / 60.0


def build(kind: str, size: int, solver: str):
    """The demo pile of `size` bodies or the demo pyramid of `size` rows, on the CPU."""
    if kind == "pile":
        scene = demos.demo_pile(arch="cpu", bodies=size)
    else:
        scene = demos.demo_pyramid(arch="cpu", base=size)
    scene.solver = solver  # before its first step: nothing solved yet
    scene.substeps = DEFAULT_SUBSTEPS[solver]
    return scene


def measure(kind: str, size: int, solver: str, slots: int, warm: int, steps: int) -> dict:
    """One scene stepped with device.SERIAL_SLOTS = slots (restored after): what it ran on
    and its ms a step (median, 10th percentile) over `steps` steps after `warm`."""
    saved = device.SERIAL_SLOTS
    device.SERIAL_SLOTS = slots
    try:
        scene = build(kind, size, solver)
        for _ in range(warm):
            scene.step(DT)
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            scene.step(DT)
            times.append(time.perf_counter() - start)
        ctx = scene.step_context()
        serial, threads = ctx.serial, team.threads_for(ctx)
    finally:
        device.SERIAL_SLOTS = saved
    times.sort()
    return {
        "bodies": scene.n_bodies,
        "serial": serial,
        "team_threads": threads,
        "ms_per_step": round(times[len(times) // 2] * 1e3, 3),
        "ms_p10": round(times[len(times) // 10] * 1e3, 3),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.serial_loops", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--piles", type=int, nargs="*", default=[600, 1000, 1600, 2000, 3000])
    parser.add_argument("--pyramids", type=int, nargs="*", default=[40, 60])
    parser.add_argument("--solvers", nargs="+", default=["xpbd"], choices=list(DEFAULT_SUBSTEPS))
    parser.add_argument("--slots", type=int, nargs=2, default=[512, device.SERIAL_SLOTS])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--warm", type=int, default=120)
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--results", default=None)
    args = parser.parse_args(argv)
    if min(args.rounds, args.warm, args.steps) < 1:
        parser.error("--rounds, --warm and --steps must be at least 1")
    backend = runtime.ensure_initialized("cpu")
    scenes = [("pile", n) for n in args.piles] + [("pyramid", n) for n in args.pyramids]
    rows = []
    for round_ in range(args.rounds):
        for kind, size in scenes:
            for solver in args.solvers:
                for slots in args.slots:
                    found = measure(kind, size, solver, slots, args.warm, args.steps)
                    row = {
                        "date": datetime.date.today().isoformat(),
                        "device": device_name(backend),
                        "backend": backend,
                        "scene": f"{kind}_{size}",
                        "solver": solver,
                        "substeps": DEFAULT_SUBSTEPS[solver],
                        "serial_slots": slots,
                        "round": round_ + 1,
                        **found,
                    }
                    rows.append(row)
                    print(row, flush=True)
    print_table(rows)
    path = save_csv(backend, "serial_loops", rows, args.results)
    print(f"saved {path}")
    return rows


if __name__ == "__main__":
    main()
