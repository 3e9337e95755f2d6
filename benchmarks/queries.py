"""Spatial queries: batched ray casts and overlap queries, beside pymunk's segment queries.

    python -m benchmarks.queries [--arch cpu] [--quick] [--no-pymunk] [--results DIR]

Cases (ms per call: the median of timed windows after a warm-up call; each call rebuilds
the grid at the current poses, then answers every query of every world):
    rays_batched    32 rays (a lidar fan) in each of 4,096 small worlds (a walled arena,
                    a few boxes and circles)
    points_batched  32 point queries in each of the 4,096 worlds
    aabb_batched    32 box queries (1 m) in each of the 4,096 worlds
    rays_pile       100,000 random rays (up to 20 m) in one 20,000-body pile, settled a few
                    steps; pymunk's space.segment_query_first on the same bodies at the same
                    poses, a Python loop over a subset of the rays, scaled to 100,000 (the
                    CSV's note says how many were timed)
--quick shrinks everything (for tests). Saves benchmarks/results/<device>/queries.csv.
"""

import argparse
import datetime
import time

import numpy as np

from fx2d_gpu.device import runtime
from fx2d_gpu.scene import Scene
from fx2d_gpu.scenes import BodySpec, random_pile

from .common import device_name, print_table, save_csv, timed

N_RAYS_FAN = 32


def arena_worlds(n_worlds: int, seed: int = 0, arch: str = "auto") -> Scene:
    """A 20 m walled arena with 3 boxes and 3 circles, placed differently in each world."""
    rng = np.random.default_rng(seed)
    scene = Scene(n_worlds=n_worlds, gravity=(0.0, 0.0), arch=arch)
    for x, y, w, h in ((0, -10, 20, 1), (0, 10, 20, 1), (-10, 0, 1, 20), (10, 0, 1, 20)):
        scene.add_box((x, y), (w, h), mass=0)
    for i in range(3):
        scene.add_box((0, 0), (1.0 + 0.3 * i, 0.8), mass=0)
        scene.add_circle((0, 0), 0.5 + 0.2 * i, mass=0)
    state = scene.get_state()
    state.position[:, 4:] = rng.uniform(-8, 8, (n_worlds, scene.n_bodies - 4, 2))
    state.angle[:, 4:] = rng.uniform(-np.pi, np.pi, (n_worlds, scene.n_bodies - 4))
    scene.set_state(state)
    return scene


def _pymunk_space(scene):
    """The pile's bodies, at the scene's current poses, in a pymunk space (static bodies
    are enough for queries)."""
    import pymunk

    from .pymunk_scenes import build_space

    state = scene.get_state()
    specs = []
    for b in range(scene.n_bodies):
        shape = scene.body_shape(b)
        position = tuple(state.position[0, b])
        angle = float(state.angle[0, b])
        if shape.kind == 1:  # a circle
            specs.append(BodySpec("circle", position, (shape.radius, shape.radius), angle, 0.0))
        else:
            specs.append(BodySpec("box", position, (1.0, 1.0), angle, 0.0))
    space, bodies = build_space(specs)
    # Non-box polygons: replace the placeholder boxes by the real vertices.
    for b, body in enumerate(bodies):
        shape = scene.body_shape(b)
        if shape.kind != 1:
            space.remove(*body.shapes)
            space.add(pymunk.Poly(body, [tuple(v) for v in shape.vertices]))
    space.reindex_static()
    return space


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="auto")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for tests)")
    parser.add_argument("--no-pymunk", action="store_true")
    parser.add_argument("--results", default=None, help="folder for the CSV (default: results/)")
    args = parser.parse_args(argv)
    backend = runtime.ensure_initialized(args.arch)
    device = device_name(backend)
    n_worlds = 16 if args.quick else 4096
    pile_bodies = 300 if args.quick else 20_000
    pile_rays = 1000 if args.quick else 100_000
    repeats = 2 if args.quick else 5
    rows = []

    def row(case, bodies, worlds, queries, ms, engine="fx2d_gpu", note=""):
        rows.append(
            {
                "date": datetime.date.today().isoformat(),
                "device": device,
                "backend": backend,
                "engine": engine,
                "case": case,
                "bodies": bodies,
                "worlds": worlds,
                "queries": queries,
                "ms_per_call": round(ms, 3),
                "us_per_query": round(1000.0 * ms / max(queries, 1), 4),
                "note": note,
            }
        )
        print_table(rows[-1:])

    # Batched small worlds: a lidar fan per world, point and box queries.
    scene = arena_worlds(n_worlds, arch=args.arch)
    rng = np.random.default_rng(1)
    angles = np.linspace(0.0, 2 * np.pi, N_RAYS_FAN, endpoint=False)
    fan = np.stack([np.cos(angles), np.sin(angles)], 1)
    origins = rng.uniform(-8, 8, (n_worlds, 1, 2))
    ms = timed(lambda: scene.ray_cast(origins, fan, 30.0), repeats)
    total = n_worlds * N_RAYS_FAN
    row("rays_batched", scene.n_bodies, n_worlds, total, ms)
    points = rng.uniform(-9, 9, (n_worlds, N_RAYS_FAN, 2))
    ms = timed(lambda: scene.query_point(points), repeats)
    row("points_batched", scene.n_bodies, n_worlds, total, ms)
    ms = timed(lambda: scene.query_aabb(points - 0.5, points + 0.5), repeats)
    row("aabb_batched", scene.n_bodies, n_worlds, total, ms)

    # One large settled pile, 10^5 rays.
    pile = random_pile(pile_bodies, arch=args.arch, density=0.6, seed=3)
    settle = 2 if args.quick else 5
    for _ in range(settle):
        pile.step(1 / 60)
    state = pile.get_state()
    lo, hi = state.position[0].min(0), state.position[0].max(0)
    ray_origins = rng.uniform(lo, hi, (pile_rays, 2))
    ray_angles = rng.uniform(0, 2 * np.pi, pile_rays)
    ray_directions = np.stack([np.cos(ray_angles), np.sin(ray_angles)], 1)
    reach = 20.0
    ms = timed(lambda: pile.ray_cast(ray_origins, ray_directions, reach), repeats)
    note = f"pile settled {settle} steps, rays up to {reach:g} m"
    row("rays_pile", pile.n_bodies, 1, pile_rays, ms, note=note)
    hits = pile.ray_cast(ray_origins, ray_directions, reach)
    if not args.no_pymunk:
        import pymunk

        space = _pymunk_space(pile)
        subset = min(pile_rays, 200 if args.quick else 10_000)
        ends = ray_origins + reach * ray_directions
        start = time.perf_counter()
        agree = 0
        for i in range(subset):
            found = space.segment_query_first(
                tuple(ray_origins[i]), tuple(ends[i]), 0.0, pymunk.ShapeFilter()
            )
            agree += (found is None) == (hits.body[0, i] < 0)
        elapsed = time.perf_counter() - start
        ms_pymunk = 1000.0 * elapsed * pile_rays / subset
        row(
            "rays_pile",
            pile.n_bodies,
            1,
            pile_rays,
            ms_pymunk,
            engine="pymunk",
            note=f"Python loop, {subset} rays timed and scaled to {pile_rays}; "
            f"hit/miss agrees with fx2d_gpu on {agree}/{subset}",
        )
    print()
    print_table(rows)
    print("saved", save_csv(backend, "queries", rows, args.results))
    return rows


if __name__ == "__main__":
    main()
