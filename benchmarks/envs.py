"""Vector environments: env-steps per second of fx2d_gpu.envs beside Gymnasium's own.

    python -m benchmarks.envs [--arch cpu] [--quick] [--envs 1,16,256,4096] [--results DIR]

For each number of environments N, side by side in one run (time_windows_side_by_side:
the engines take turns, a window of steps each, so the machine's drift hits them alike):
    fx2d/CartPole-v0  gymnasium.make_vec(..., num_envs=N, vectorization_mode=
                      "vector_entry_point"): N worlds of one fx2d_gpu scene, one step()
    CartPole-v1       Gymnasium's own vectorised CartPole (NumPy, the same vector entry
                      point): the closed-form equations, no physics engine
    fx2d/Lander-v0    N landers (hull, legs on joints, chain terrain, lidar) in one scene
    LunarLander-v3    Gymnasium's LunarLander (Box2D 2.3) in a SyncVectorEnv: N Box2D
                      worlds stepped one after another (needs Box2D: pip install swig
                      "gymnasium[box2d]"; left out, with a note, where it is missing;
                      SyncVectorEnv of N > 256 landers is timed on fewer steps)
Random actions (seeded), NEXT_STEP autoreset; env-steps/s = N / (s per vector step), the
median over timed windows after a warm-up (the first step, the compile, is reported
apart). Saves benchmarks/results/<device>/envs.csv and envs.png.
"""

import argparse
import datetime
import importlib.util
import statistics
import time

from fx2d_gpu.device import runtime

from .common import RESULTS, device_name, print_table, save_csv, time_windows_side_by_side

ENV_COUNTS = (1, 4, 16, 64, 256, 1024, 4096)
QUICK_COUNTS = (1, 4)


def make_vector_env(env_id: str, num_envs: int, arch: str):
    """A vector env of `num_envs`: fx2d's on `arch` and Gymnasium's CartPole through their
    vector entry points, others (LunarLander) in a SyncVectorEnv."""
    import gymnasium

    import fx2d_gpu.envs  # noqa: F401  (registers fx2d/...)

    if env_id.startswith("fx2d/"):
        return gymnasium.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", arch=arch
        )
    if env_id == "CartPole-v1":
        return gymnasium.make_vec(
            env_id, num_envs=num_envs, vectorization_mode="vector_entry_point"
        )
    return gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync")


def _stepper(envs, seed: int):
    """(step, sync) for time_windows_side_by_side: one vector step of random actions."""
    envs.reset(seed=seed)
    envs.action_space.seed(seed)
    actions = [envs.action_space.sample() for _ in range(64)]  # sampled before timing
    count = [0]

    def step():
        envs.step(actions[count[0] % len(actions)])
        count[0] += 1

    return step, lambda: None  # observations come back to the host: the step has synced


def box2d_available() -> bool:
    """Whether Box2D (gymnasium's box2d extra: LunarLander) is installed."""
    return importlib.util.find_spec("Box2D") is not None


def measure(
    num_envs: int, pairs: list[tuple[str, str]], arch: str, steps: int, window: int
) -> list[dict]:
    """Every env id of `pairs` ((task, id)) at num_envs, side by side; one row each."""
    envs = {env_id: make_vector_env(env_id, num_envs, arch) for _, env_id in pairs}
    runs = [_stepper(envs[env_id], seed=0) for _, env_id in pairs]
    timings = time_windows_side_by_side(runs, steps, window)
    rows = []
    for (task, env_id), (first, times) in zip(pairs, timings, strict=True):
        ms = statistics.median(times[1:] or times)
        rows.append(
            {
                "task": task,
                "env": env_id,
                "envs": num_envs,
                "engine": "fx2d_gpu" if env_id.startswith("fx2d/") else "gymnasium",
                # Saved to 1e-6 ms and 1e-3 env-steps/s: one env on a slow backend
                # makes a few dozen a second, where 0.1 was a relative error of 0.2 %.
                "ms_per_vector_step": round(ms, 6),
                "env_steps_per_s": round(num_envs * 1000.0 / ms, 3),
                "first_step_s": round(first, 3),
            }
        )
    for env in envs.values():
        env.close()
    return rows


def run(
    counts=ENV_COUNTS, arch: str = "auto", quick: bool = False, results=None, plot: bool = True
) -> list[dict]:
    backend = runtime.ensure_initialized(arch)
    lunar = box2d_available()
    rows = []
    for n in counts:
        steps, window = (6, 2) if quick else (max(40, min(400, 40000 // n)), 10)
        pairs = [("cartpole", "fx2d/CartPole-v0"), ("cartpole", "CartPole-v1")]
        rows += measure(n, pairs, arch, steps, window)
        pairs = [("lander", "fx2d/Lander-v0")]
        if lunar:
            pairs.append(("lander", "LunarLander-v3"))
        # SyncVectorEnv steps its N Box2D worlds one after another (~0.1 ms each): fewer
        # steps where N is large keep the run in minutes (fx2d's alone takes them all:
        # its windows after the warm-up one then include the first restarts).
        lander_steps = steps if quick or not lunar else max(20, min(steps, 4000 // n))
        rows += measure(n, pairs, arch, lander_steps, min(window, lander_steps // 2))
    device = device_name(backend)
    note = (
        ""
        if lunar
        else "LunarLander-v3 left out: Box2D is not installed (pip install swig 'gymnasium[box2d]')"
    )
    for row in rows:
        row.update(
            device=device,
            backend=backend,
            substeps=11,
            date=datetime.date.today().isoformat(),
            note=note,
        )
    print_table(
        [
            {
                k: r[k]
                for k in (
                    "task",
                    "env",
                    "envs",
                    "ms_per_vector_step",
                    "env_steps_per_s",
                    "first_step_s",
                )
            }
            for r in rows
        ]
    )
    path = save_csv(backend, "envs", rows, results)
    print(f"saved {path}")
    if plot:
        _plot(rows, path.with_suffix(".png"), device, backend)
    return rows


def _plot(rows: list[dict], path, device: str, backend: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for ax, task in zip(axes, ("cartpole", "lander"), strict=True):
        for env_id in sorted({r["env"] for r in rows if r["task"] == task}):
            mine = sorted((r for r in rows if r["env"] == env_id), key=lambda r: r["envs"])
            ax.plot(
                [r["envs"] for r in mine],
                [r["env_steps_per_s"] for r in mine],
                marker="o",
                label=env_id,
            )
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("environments")
        ax.set_title(task)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    axes[0].set_ylabel("env-steps / s")
    figure.suptitle(f"vector envs, random actions: {device} ({backend})")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    print(f"saved {path}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="auto")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (for tests)")
    parser.add_argument(
        "--envs", default=None, help="comma-separated environment counts (default: 1 ... 4096)"
    )
    parser.add_argument("--results", default=None, help=f"results folder (default {RESULTS})")
    args = parser.parse_args(argv)
    counts = (
        (QUICK_COUNTS if args.quick else ENV_COUNTS)
        if args.envs is None
        else tuple(int(n) for n in args.envs.split(","))
    )
    start = time.perf_counter()
    run(counts, args.arch, args.quick, args.results)
    print(f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
