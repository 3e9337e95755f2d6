"""First step of a scene of long static terrain: a chain of n points against n - 1 separate
static boxes in the same row, seconds.

    python -m benchmarks.static_terrain [--points 10000 30000 100000] [--label after]

Each scene is the terrain and one 0.3 m circle resting above it. The first step builds the
device arrays (the pool is made once, by a warm-up scene, so no size is charged a pool's
compile; a warm-up runs every kernel variant the steps take) and runs the first broad phase
over every link; the next steps reuse the pairs.
A terrain's first step should grow with n like the boxes' does: each link is a body of
its own, so a chain of n points is n - 1 static bodies. Rows are added to
benchmarks/results/<device>/static_terrain.csv under `label`, replacing that label's rows
(run it on two trees with two labels to compare them).
"""

import argparse
import csv
import datetime
import time

import numpy as np

import fx2d_gpu as fx
from fx2d_gpu.device import runtime

from .common import RESULTS, device_name, print_table, save_csv

LINK = 0.01  # m between consecutive points (and each box's width)


def terrain_scene(kind: str, n: int, arch: str) -> fx.Scene:
    """A flat terrain of n points along y = 0 (a chain, or n - 1 boxes of the links' size)
    and a circle above its middle."""
    scene = fx.Scene(arch=arch)
    xs = np.arange(n) * LINK
    if kind == "chain":
        scene.add_chain((0.0, 0.0), np.stack([xs, np.zeros(n)], 1))
    else:
        centres = np.stack([xs[:-1] + 0.5 * LINK, np.full(n - 1, -0.5 * LINK)], 1)
        scene.add_boxes(centres, (LINK, LINK), mass=0.0)
    scene.add_circle((0.5 * xs[-1], 0.31), 0.3)
    return scene


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--steps", type=int, default=5, help="later steps timed")
    parser.add_argument("--label", default="current")
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--results", default=None, help="folder for the CSV (default: results/)")
    args = parser.parse_args(argv)
    backend = runtime.ensure_initialized(args.arch)
    # A pool large enough for every size first, and every kernel variant the later steps
    # take compiled (a ball landing on many links makes a hub, whose overflow colour and
    # team of threads compile on first use): compiles are not the terrain's cost.
    for kind, n in (("boxes", max(args.points)), ("chain", min(args.points))):
        warm = terrain_scene(kind, n, args.arch)
        for _ in range(args.steps + 1):
            warm.step(1 / 60)
    rows = []
    for n in args.points:
        for kind in ("chain", "boxes"):
            scene = terrain_scene(kind, n, args.arch)
            start = time.perf_counter()
            scene.step(1 / 60)
            first = time.perf_counter() - start
            start = time.perf_counter()
            for _ in range(args.steps):
                scene.step(1 / 60)
            later = (time.perf_counter() - start) * 1000.0 / args.steps
            rows.append(
                {
                    "date": datetime.date.today().isoformat(),
                    "device": device_name(backend),
                    "backend": backend,
                    "label": args.label,
                    "terrain": kind,
                    "points": n,
                    "bodies": scene.n_bodies,
                    "substeps": scene.substeps,
                    "first_step_s": round(first, 3),
                    "later_ms_per_step": round(later, 2),
                }
            )
            print_table(rows[-1:])
    folder = args.results or RESULTS
    path = f"{folder}/{device_name(backend)}/static_terrain.csv"
    try:
        with open(path, newline="") as f:
            kept = [row for row in csv.DictReader(f) if row["label"] != args.label]
    except OSError:
        kept = []
    path = save_csv(backend, "static_terrain", kept + rows, args.results)
    print_table(kept + rows)
    print(f"saved {path}")


if __name__ == "__main__":
    main()
