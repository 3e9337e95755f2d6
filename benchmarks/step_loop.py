"""A scene stepped a few times and nothing else: the program a GPU profiler (Nsight Compute,
`ncu`) runs, so that its report holds only the step's kernels.

    python -m benchmarks.step_loop [--arch cuda] [--scene batched_small|large_pyramid]
        [--worlds W] [--solver xpbd|soft_step] [--steps N]

The scenes are the kernel profile's (`benchmarks/kernel_profile.build_scene`): W small
worlds of 8 bodies and a joint, or Box2D's large pyramid with sleep off. The steps are read
back at the end (get_state), so every launch has run when the program exits. For example,
the small worlds' step kernel on an H200 in a step in flight (the first step takes
_substeps' kernels instead; benchmarks/device_run.sh lease_more):

    ncu -k "regex:_worlds_in_flight_c[0-9]+_0_kernel_27_range_for" -c 1 \
        --section Occupancy -o small python -m benchmarks.step_loop --worlds 65536
"""

import argparse
import time

from .kernel_profile import build_scene

DT = 1.0 / 60.0


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.step_loop", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--arch", default="cuda")
    parser.add_argument(
        "--scene", choices=("batched_small", "large_pyramid"), default="batched_small"
    )
    parser.add_argument("--worlds", type=int, default=65_536, help="small worlds (65,536)")
    parser.add_argument("--solver", choices=("xpbd", "soft_step"), default="xpbd")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args(argv)
    if args.worlds < 1 or args.steps < 1:
        parser.error("--worlds and --steps must be positive")
    scene = build_scene(args.scene, args.arch, args.solver, worlds=args.worlds)
    start = time.perf_counter()
    for _ in range(args.steps):
        scene.step(DT)
    scene.get_state()
    seconds = time.perf_counter() - start
    print(
        f"{args.scene} ({scene.n_worlds} worlds, {scene.n_bodies} bodies "
        f"a world, {args.solver}) on {scene.backend}: {args.steps} steps in {seconds:.3f} s "
        "(the first compiles)",
        flush=True,
    )


if __name__ == "__main__":
    main()
