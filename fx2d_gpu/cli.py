"""`fx2d` command line."""

import argparse
import sys
import time


def _demo_pile(args):
    from .scenes import random_pile

    _run_and_render(random_pile(args.bodies, arch=args.arch, seed=args.seed, density=0.5),
                    args)


def _demo_pyramid(args):
    from .scenes import pyramid

    _run_and_render(pyramid(args.base, arch=args.arch), args)


def _run_and_render(scene, args):
    from .render import render, write_png

    start = time.perf_counter()
    for _ in range(args.steps):
        scene.step(args.dt)
    elapsed = time.perf_counter() - start
    contacts = scene.contacts()
    image = render(scene, contacts=args.contacts)
    write_png(args.png, image)
    asleep = int(scene.get_state().sleeping.sum())
    print(f"{scene.n_bodies} bodies, {args.steps} steps in {elapsed:.2f} s "
          f"(first step includes compilation), {len(contacts)} contact manifolds, "
          f"{asleep} bodies asleep, backend {scene.backend}; wrote {args.png}")


DEMOS = {
    "pile": (_demo_pile, "mixed circles, boxes and triangles poured onto the ground"),
    "pyramid": (_demo_pyramid, "Box2D's pyramid of boxes (--base 100: the large pyramid)"),
}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="fx2d", description="fx2d_gpu command line")
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run a built-in demo")
    demo.add_argument("name", nargs="?", choices=sorted(DEMOS))
    demo.add_argument("--list", action="store_true", help="list the demos")
    demo.add_argument("--bodies", type=int, default=400)
    demo.add_argument("--steps", type=int, default=180)
    demo.add_argument("--base", type=int, default=20, help="pyramid base (boxes)")
    demo.add_argument("--contacts", action="store_true", help="draw contact points")
    demo.add_argument("--dt", type=float, default=1 / 60)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--arch", default="auto")
    demo.add_argument("--png", default="fx2d_demo.png", help="image to write")
    args = parser.parse_args(argv)
    if args.command == "demo":
        if args.list or args.name is None:
            for name, (_, text) in DEMOS.items():
                print(f"{name:10s} {text}")
            return 0
        DEMOS[args.name][0](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
