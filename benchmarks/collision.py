"""Broad + narrow phase time on dense random piles (10k, 100k; 1M on a GPU).

    python -m benchmarks.collision [--arch cpu] [--sizes 10000 100000]

Prints ms per collision pass (grid-hash broad phase + all manifolds), candidate pairs and
touching manifolds, and saves benchmarks/results/<device>/collision.csv.
"""

import argparse
import datetime
import time

from fx2d_gpu.device import runtime
from fx2d_gpu.physics.collision.broad_phase import find_candidate_pairs
from fx2d_gpu.physics.collision.narrow_phase import compute_manifolds
from fx2d_gpu.scenes import random_pile

from .common import device_name, print_table, save_csv, timed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="auto")
    parser.add_argument("--sizes", type=int, nargs="*", default=None)
    parser.add_argument("--results", default=None, help="folder for the CSV (default: results/)")
    args = parser.parse_args(argv)
    backend = runtime.ensure_initialized(args.arch)
    gpu = not runtime.on_cpu()
    sizes = args.sizes or ([10_000, 100_000, 1_000_000] if gpu else [10_000, 100_000])
    rows = []
    for n in sizes:
        scene = random_pile(n, arch=args.arch, density=0.9, seed=1)
        start = time.perf_counter()
        scene.step(1 / 60)  # builds, uploads, compiles on first use, grows buffers
        first = time.perf_counter() - start
        repeats = max(1, min(50, 200_000 // n))
        ctx = scene.step_context()

        def collide(ctx=ctx):
            compute_manifolds(ctx, find_candidate_pairs(ctx, into="staging"), into="staging")

        ms = timed(collide, repeats)
        pairs = len(scene.candidate_pairs())
        contacts = scene.contacts()
        rows.append(
            {
                "date": datetime.date.today().isoformat(),
                "device": device_name(backend),
                "backend": backend,
                "bodies": scene.n_bodies,
                "pairs": pairs,
                "manifolds": len(contacts),
                "points": int(contacts.point_count.sum()),
                "ms_per_pass": round(ms, 3),
                "first_step_s": round(first, 2),
            }
        )
        print_table(rows[-1:])
    print()
    print_table(rows)
    print("saved", save_csv(backend, "collision", rows, args.results))


if __name__ == "__main__":
    main()
