"""What the 32 lanes of a GPU warp walk in a small worlds' step (a world a thread): each
world's pairs in its solve order, read back from the pool after some steps of the
`batched_small` scene, taken 32 consecutive worlds at a time.

    python -m benchmarks.warp_lanes [--worlds W] [--steps S] [--results DIR]

A warp walks as many pairs as its longest world holds (the lanes of shorter worlds wait);
walking every world's pairs in one fixed order with the absent ones masked (Jax2D's way,
so that the lanes take the same shapes' branch together) would walk every pair any of
its worlds holds. Runs on the CPU backend: the pairs and their order are the same on
every backend (tests/test_vulkan.py).

Saves benchmarks/results/<device>/warp_lanes.csv: worlds, steps, a world's pairs (mean),
a warp's longest world's (mean over warps), the different body pairs a warp's worlds hold
in all (mean over warps), the different body pairs its lanes hold at one place of the
order (mean over places), and the share of pairs with contact points.
"""

import argparse
import datetime

import numpy as np

from fx2d_gpu import scenes
from fx2d_gpu.device import runtime

from .common import device_name, print_table, save_csv

#: Lanes of a warp (a world each).
WARP = 32
DT = 1 / 60


def world_orders(scene) -> list[list[tuple[int, int, bool]]]:
    """Each world's pairs in the order its thread solves them: (body a, body b, touching)
    with bodies as model indices."""
    pool, n_bodies = scene.step_context().pool, scene.n_bodies
    n_pairs = int(pool.counts.n_pairs[None])
    starts = pool.manifolds.pair_start.to_numpy()[: scene.n_worlds * n_bodies + 1]
    body_a = pool.manifolds.body_a.to_numpy()[:n_pairs] % n_bodies
    body_b = pool.manifolds.body_b.to_numpy()[:n_pairs] % n_bodies
    touching = pool.manifolds.point_count.to_numpy()[:n_pairs] > 0
    origin = pool.coloring.pair_origin.to_numpy()[:n_pairs]
    orders = []
    for world in range(scene.n_worlds):
        solved = origin[starts[world * n_bodies] : starts[(world + 1) * n_bodies]]
        orders.append([(body_a[k], body_b[k], bool(touching[k])) for k in solved])
    return orders


def lane_counts(orders) -> dict:
    """The means of warp_lanes.csv's columns over `orders`' warps (WARP worlds each)."""
    longest, union, per_place = [], [], []
    for first in range(0, len(orders), WARP):
        warp = orders[first : first + WARP]
        longest.append(max(len(order) for order in warp))
        union.append(len({(a, b) for order in warp for a, b, _ in order}))
        for place in range(longest[-1]):
            per_place.append(len({order[place][:2] for order in warp if len(order) > place}))
    pairs = [pair for order in orders for pair in order]
    return {
        "pairs_a_world": round(float(np.mean([len(order) for order in orders])), 3),
        "warp_longest": round(float(np.mean(longest)), 3),
        "warp_union": round(float(np.mean(union)), 3),
        "pairs_a_place": round(float(np.mean(per_place)), 3),
        "touching_share": round(float(np.mean([t for _, _, t in pairs])), 3),
    }


def run(worlds=4096, steps=60, results=None) -> list[dict]:
    backend = runtime.ensure_initialized("cpu")
    scene = scenes.batched_small(worlds, arch="cpu")
    for _ in range(steps):
        scene.step(DT)
    scene.get_state()  # (steps in flight settled)
    row = {
        "date": datetime.date.today().isoformat(),
        "device": device_name(backend),
        "scene": "batched_small",
        "worlds": worlds,
        "steps": steps,
        **lane_counts(world_orders(scene)),
    }
    print_table([row])
    print("  saved", save_csv(backend, "warp_lanes", [row], results))
    return [row]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worlds", type=int, default=4096, help="small worlds (4,096)")
    parser.add_argument("--steps", type=int, default=60, help="steps before reading (60)")
    parser.add_argument("--results", default=None, help="results folder")
    args = parser.parse_args(argv)
    run(args.worlds, args.steps, args.results)


if __name__ == "__main__":
    main()
