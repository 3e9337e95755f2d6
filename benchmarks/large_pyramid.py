"""Box2D's "large pyramid" (base 100: 5,050 boxes of 1 m), fx2d_gpu beside pymunk.

    python -m benchmarks.large_pyramid [--arch cpu] [--base 100] [--seconds 10]

Both engines simulate the same pyramid at dt 1/60 for --seconds of simulated time; the
script prints ms/step (median of 20-step windows after the first; fx2d_gpu's boxes fall
asleep as the pyramid settles, so ms_per_step_awake gives steps 21-80 too), whether each
pyramid still
stands (how far its top box dropped) and saves benchmarks/results/<device>/large_pyramid.csv.
"""

import argparse
import datetime
import statistics
import time

import numpy as np

from fx2d_gpu import runtime
from fx2d_gpu.scenes import pyramid

from .common import device_name, print_table, save_csv

DT = 1.0 / 60.0


def run_fx2d(base, seconds, arch, substeps):
    scene = pyramid(base, arch=arch, substeps=substeps)
    top = scene.n_bodies - 1
    top0 = scene.get_state().position[0, top].copy()
    start = time.perf_counter()
    scene.step(DT)
    first = time.perf_counter() - start
    times = []
    steps = round(seconds / DT) - 1
    window = 20
    for i in range(0, steps, window):
        start = time.perf_counter()
        for _ in range(min(window, steps - i)):
            scene.step(DT)
        scene.get_state()  # includes the device sync
        times.append((time.perf_counter() - start) * 1000 / min(window, steps - i))
    drop = top0[1] - scene.get_state().position[0, top, 1]
    # Windows 1-3 (steps 21-80): before any box sleeps, the fully awake cost.
    awake = statistics.mean(times[1:4]) if len(times) > 3 else times[-1]
    return {"ms_per_step": statistics.median(times[1:] or times), "first_step_s": first,
            "ms_per_step_awake": awake,
            "top_drop_m": drop, "colors": scene.n_colors, "bodies": scene.n_bodies,
            "substeps": substeps}


def run_pymunk(base, seconds, iterations=10):
    import pymunk

    space = pymunk.Space()
    space.gravity = (0.0, -9.81)
    space.iterations = iterations
    space.use_spatial_hash(1.0, 20000)
    ground = pymunk.Segment(space.static_body, (-base, 0.0), (base, 0.0), 0.0)
    ground.friction = 0.6
    space.add(ground)
    top = None
    for row in range(base):
        count = base - row
        for i in range(count):
            body = pymunk.Body(1.0, pymunk.moment_for_box(1.0, (1.0, 1.0)))
            body.position = ((i - (count - 1) / 2), row + 0.5)
            shape = pymunk.Poly.create_box(body, (1.0, 1.0))
            shape.friction = 0.6
            space.add(body, shape)
            top = body
    y0 = top.position.y
    times = []
    steps = round(seconds / DT)
    window = 20
    for i in range(0, steps, window):
        start = time.perf_counter()
        for _ in range(min(window, steps - i)):
            space.step(DT)
        times.append((time.perf_counter() - start) * 1000 / min(window, steps - i))
    return {"ms_per_step": statistics.median(times[1:] or times), "top_drop_m": y0 - top.position.y,
            "iterations": iterations}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="auto")
    parser.add_argument("--base", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--substeps", type=int, default=11)
    parser.add_argument("--no-pymunk", action="store_true")
    parser.add_argument("--results", default=None)
    args = parser.parse_args(argv)
    backend = runtime.ensure_initialized(args.arch)
    date = datetime.date.today().isoformat()
    device = device_name(backend)
    ours = run_fx2d(args.base, args.seconds, args.arch, args.substeps)
    rows = [{"date": date, "device": device, "engine": "fx2d_gpu", "backend": backend,
             "bodies": ours["bodies"], "substeps/iterations": ours["substeps"],
             "ms_per_step": round(ours["ms_per_step"], 2),
             "ms_per_step_awake": round(ours["ms_per_step_awake"], 2),
             "top_drop_m": round(float(ours["top_drop_m"]), 3),
             "stands": bool(ours["top_drop_m"] < 0.5), "colors": ours["colors"],
             "first_step_s": round(ours["first_step_s"], 2)}]
    if not args.no_pymunk:
        theirs = run_pymunk(args.base, args.seconds)
        rows.append({"date": date, "device": device, "engine": "pymunk", "backend": "cpu",
                     "bodies": rows[0]["bodies"], "substeps/iterations": theirs["iterations"],
                     "ms_per_step": round(theirs["ms_per_step"], 2),
                     "ms_per_step_awake": round(theirs["ms_per_step"], 2),
                     "top_drop_m": round(float(theirs["top_drop_m"]), 3),
                     "stands": bool(theirs["top_drop_m"] < 0.5), "colors": "",
                     "first_step_s": ""})
    print_table(rows)
    if len(rows) == 2:
        ratio = rows[0]["ms_per_step"] / rows[1]["ms_per_step"]
        print(f"fx2d_gpu / pymunk time ratio: {ratio:.2f}")
    print("saved", save_csv(backend, "large_pyramid", rows, args.results))
    return rows


if __name__ == "__main__":
    np.set_printoptions(precision=3)
    main()
