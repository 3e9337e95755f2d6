"""Building large scenes from Python: one add_circle / add_box call per body against the
bulk calls (add_circles, add_boxes), seconds and bodies per second.

    python -m benchmarks.scene_build [--sizes 10000 100000 1000000] [--one-by-one-max N]

Each size is a pile of n bodies, half discs and half boxes, every one of its own size and
angle (the benchmark pile's mix), added both ways (the same bodies, to the bit: tests/
test_bulk_add.py); then the host arrays the first step uploads are built once
(`model_s`: ModelBuilder.build_model and initial_state, the same for both). One call per
body is timed up to --one-by-one-max bodies (a million take over a minute). Saves
benchmarks/results/<device>/scene_build.csv.
"""

import argparse
import datetime
import time

import numpy as np

import fx2d_gpu as fx
from fx2d_gpu.device import runtime

from .common import device_name, print_table, save_csv


def pile_arrays(n: int, seed: int = 0) -> dict:
    """Positions (n, 2) m on a grid, disc radii (n/2,), box sizes (n/2, 2), angles (n,)."""
    rng = np.random.default_rng(seed)
    columns = int(np.ceil(2.0 * np.sqrt(n)))
    index = np.arange(n)
    positions = np.stack([(index % columns) * 0.75, 0.5 + (index // columns) * 0.75], 1)
    half = n // 2
    return dict(
        positions=positions,
        radii=rng.uniform(0.15, 0.3, half),
        sizes=rng.uniform(0.25, 0.45, (n - half, 2)),
        angles=rng.uniform(-np.pi, np.pi, n),
    )


def add_one_by_one(scene, pile: dict):
    positions, angles, half = pile["positions"], pile["angles"], len(pile["radii"])
    for i, radius in enumerate(pile["radii"]):
        scene.add_circle(positions[i], radius, angle=angles[i], static_friction=0.6)
    for j, size in enumerate(pile["sizes"]):
        scene.add_box(positions[half + j], size, angle=angles[half + j], static_friction=0.6)


def add_in_bulk(scene, pile: dict):
    positions, angles, half = pile["positions"], pile["angles"], len(pile["radii"])
    scene.add_circles(positions[:half], pile["radii"], angle=angles[:half], static_friction=0.6)
    scene.add_boxes(positions[half:], pile["sizes"], angle=angles[half:], static_friction=0.6)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--one-by-one-max", type=int, default=100_000)
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--results", default=None, help="folder for the CSV (default: results/)")
    args = parser.parse_args(argv)
    backend = runtime.ensure_initialized(args.arch)
    rows = []
    for n in args.sizes:
        pile = pile_arrays(n)
        ways = [("bulk", add_in_bulk)]
        if n <= args.one_by_one_max:
            ways.insert(0, ("one_by_one", add_one_by_one))
        for way, add in ways:
            scene = fx.Scene(arch=args.arch)
            start = time.perf_counter()
            add(scene, pile)
            seconds = time.perf_counter() - start
            start = time.perf_counter()
            scene._builder.build_model()
            scene._builder.initial_state(1)
            model = time.perf_counter() - start
            rows.append(
                {
                    "date": datetime.date.today().isoformat(),
                    "device": device_name(backend),
                    "backend": backend,
                    "way": way,
                    "bodies": scene.n_bodies,
                    "add_s": round(seconds, 3),
                    "bodies_per_s": round(n / seconds),
                    "model_s": round(model, 3),
                }
            )
            print_table(rows[-1:])
            del scene
    print_table(rows)
    print("saved", save_csv(backend, "scene_build", rows, args.results))
    return rows


if __name__ == "__main__":
    main()
