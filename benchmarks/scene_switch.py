"""Scenes that take turns: what switching the shared device pool between them costs.

    python -m benchmarks.scene_switch [SCENE ...] [--arch cpu] [--rounds 5]

Every scene of a process shares one device pool (fx2d_gpu/device/residency.py); a step of a scene
that is not resident first saves the resident one's state to the host and loads its own.
Programs that hold several scenes (two environments, a scene and its reference, a test and
its expected run) pay that on every step they alternate. For a small stack (81 bodies) and
a pile (2,000 bodies), each in a pool first sized by a 20,000-body pile (as in a process
that ran a large scene before): ms per step of one scene stepped alone, of two copies
stepped in turn, and the switch: (in turn - alone), the save and load a step pays.
Saves benchmarks/results/<device>/scene_switch.csv.
"""

import argparse
import datetime
import statistics
import time

import fx2d_gpu as fx
from fx2d_gpu.device import runtime
from fx2d_gpu.scenes import random_pile

from .common import device_name, print_table, save_csv, wake_cores

DT = 1.0 / 60.0


def stack(arch: str) -> fx.Scene:
    """80 boxes resting in four rows of 20 on a ground box: 81 bodies."""
    scene = fx.Scene(arch=arch)
    scene.add_box((0.0, -0.5), (40.0, 1.0), mass=0.0)
    for i in range(80):
        scene.add_box((-10.0 + 1.05 * (i % 20), 0.5 + 1.01 * (i // 20)), (1.0, 1.0))
    return scene


SCENES = {"stack_81": stack, "pile_2000": lambda arch: random_pile(2000, arch=arch, seed=1)}


def _ms_per_step(scenes: list, steps: int) -> float:
    """Mean ms per step of `steps` rounds of one step of each scene, in turn, after an
    untimed round (alone: the scene is resident when the timing starts)."""
    for scene in scenes:
        scene.step(DT)
    wake_cores()
    start = time.perf_counter()
    for _ in range(steps):
        for scene in scenes:
            scene.step(DT)
    return (time.perf_counter() - start) * 1e3 / (steps * len(scenes))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=40, help="steps a round")
    parser.add_argument(
        "--sizing-bodies",
        type=int,
        default=20_000,
        help="bodies of the pile that sizes the pool first (0: none)",
    )
    parser.add_argument(
        "scenes",
        nargs="*",
        default=list(SCENES),
        metavar="SCENE",
        help=f"of {', '.join(SCENES)} (default: all)",
    )
    parser.add_argument("--results", default=None, help="folder for the CSV (default: results/)")
    args = parser.parse_args(argv)
    for name in args.scenes:
        if name not in SCENES:
            parser.error(f"no scene {name!r}; the scenes: {', '.join(SCENES)}")
    backend = runtime.ensure_initialized(args.arch)
    if args.sizing_bodies:
        random_pile(args.sizing_bodies, arch=args.arch, seed=0).step(DT)
    rows = []
    for name in args.scenes:
        build = SCENES[name]
        first, second = build(args.arch), build(args.arch)
        for _ in range(3):  # compiled, and each saved once
            first.step(DT)
            second.step(DT)
        alone, in_turn = [], []
        for _ in range(args.rounds):
            alone.append(_ms_per_step([first], args.steps))
            in_turn.append(_ms_per_step([first, second], args.steps))
        alone_ms, in_turn_ms = statistics.median(alone), statistics.median(in_turn)
        rows.append(
            {
                "date": datetime.date.today().isoformat(),
                "device": device_name(backend),
                "backend": backend,
                "scene": name,
                "bodies": first.n_bodies,
                "pool_body_slots": first.step_context().pool.body_capacity,
                "alone_ms_per_step": round(alone_ms, 3),
                "in_turn_ms_per_step": round(in_turn_ms, 3),
                "switch_ms": round(in_turn_ms - alone_ms, 3),
            }
        )
        print_table(rows[-1:])
    print_table(rows)
    print("saved", save_csv(backend, "scene_switch", rows, args.results))
    return rows


if __name__ == "__main__":
    main()
