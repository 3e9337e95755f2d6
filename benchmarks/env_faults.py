"""Which step options let a vector env of many worlds step clean: a bisection for a fault
seen on one backend only.

    python -m benchmarks.env_faults [--arch ARCH] [--envs N] [--steps S] [--env ID]

On an H200 (CUDA, 2026-12-04) fx2d/CartPole-v0 at 65,536 envs raised SimulationError (a
hinge torn) at its first step after reset, while 16,384 envs stepped clean. The cause found
since on the CPU: the step without contacts shares its body slots among the worlds with
team.share, whose 32-bit product overflowed at 65,536 worlds (on the CPU the worlds moved
apart from a smaller batch's without a fault; fixed, tests/test_envs.py). On a GPU this
confirms it: every variant clean now; before, all but contactless_step=False (whose step
takes a world's slots directly) would have torn.

The env is made once per variant (the defaults, then each with one StepOptions switch
turned off: steps in flight, the step without contacts, the small worlds' step in one
launch), reset with seed 0 and stepped S times with random actions (the action space
seeded with 0); each variant prints "clean" with its first world's observation, or the
error's first line. A variant that steps clean where the others fail names the path at
fault.
"""

import argparse

import numpy as np

from .envs import make_vector_env

VARIANTS = {
    "defaults": {},
    "steps_in_flight=False": {"steps_in_flight": False},
    "contactless_step=False": {"contactless_step": False},
    "small_worlds_in_one_launch=False": {"small_worlds_in_one_launch": False},
}


def step_clean(env_id: str, envs: int, steps: int, arch: str, options: dict) -> str:
    """'clean <observation of world 0>' or 'FAILED <error type>: <its first line>'."""
    vector = make_vector_env(env_id, envs, arch)
    scene = vector.unwrapped.scene
    scene.step_options = scene.step_options.replace(**options)
    try:
        observations, _ = vector.reset(seed=0)
        vector.action_space.seed(0)
        for _ in range(steps):
            observations, *_ = vector.step(vector.action_space.sample())
        return f"clean {np.round(observations[0], 5).tolist()}"
    except Exception as error:  # noqa: BLE001 (the point is to name it)
        return f"FAILED {type(error).__name__}: {str(error).splitlines()[0][:300]}"
    finally:
        vector.close()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.env_faults", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--arch", default="cuda")
    parser.add_argument("--envs", type=int, default=65_536)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--env", default="fx2d/CartPole-v0", help="an fx2d env id")
    args = parser.parse_args(argv)
    if args.envs < 1 or args.steps < 1:
        parser.error("--envs and --steps must be positive")
    for name, options in VARIANTS.items():
        result = step_clean(args.env, args.envs, args.steps, args.arch, options)
        print(f"  {args.env} x {args.envs} on {args.arch}, {name}: {result}", flush=True)


if __name__ == "__main__":
    main()
