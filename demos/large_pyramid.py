"""Box2D's large pyramid (5,050 boxes) for 10 s; reports whether it stands, renders a PNG.

python demos/large_pyramid.py [--base 100] [--seconds 10] [--png pyramid.png]
"""

import argparse
import time

from fx2d_gpu.draw.render import render, write_png
from fx2d_gpu.scenes import pyramid


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--arch", default="auto")
    parser.add_argument("--png", default="large_pyramid.png")
    args = parser.parse_args(argv)
    scene = pyramid(args.base, arch=args.arch)
    top = scene.n_bodies - 1
    y0 = scene.get_state().position[0, top, 1]
    steps = round(args.seconds * 60)
    start = time.perf_counter()
    for _ in range(steps):
        scene.step(1 / 60)
    elapsed = time.perf_counter() - start
    drop = y0 - scene.get_state().position[0, top, 1]
    print(
        f"{scene.n_bodies - 1} boxes, {steps} steps, {elapsed / steps * 1000:.1f} ms/step "
        f"(backend {scene.backend}); top box dropped {drop * 100:.1f} cm: "
        f"{'stands' if drop < 0.5 else 'collapsed'}"
    )
    write_png(args.png, render(scene, size=(1200, 700), contacts=False))
    print("wrote", args.png)


if __name__ == "__main__":
    main()
