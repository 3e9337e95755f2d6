"""Where a step's device time goes, offloaded task by offloaded task: Taichi's kernel profiler
over a few steps of the scenes a GPU is measured on.

    python -m benchmarks.kernel_profile [--arch ARCH] [--scenes NAME ...] [--pile N]
        [--worlds W] [--warm STEPS] [--steps STEPS] [--results DIR]
        [--step-option NAME=VALUE ...]

Each top-level loop (or serial block) of a Taichi kernel is an offloaded task: on CUDA a
kernel launch of its own, which the profiler times on the device (CUDA events; on CUDA it
also reads each task's registers a thread, block size, grid size and the blocks a
multiprocessor holds at once). On the CPU backend it times each task on the host. The
scenes (SCENES): the awake large pyramid (Box2D's, 5,051 bodies) with each solver, a
poured pile (100,000 bodies; 1,000,000 on a GPU) after its warm-up steps, and W small
worlds (256; 65,536 on a GPU). Each is stepped `warm` steps, then `steps` profiled.

Saves benchmarks/results/<device>/kernel_profile.csv (then the step options, where any are
asked: _name-value each): per scene, solver and task, the
task's launches and device milliseconds a step, its share of the step's profiled time, and
(CUDA) its registers a thread, block and grid size and occupancy (blocks a multiprocessor
holds at once); prints each scene's costliest tasks. What it does not say: the host's time
between launches (python -m benchmarks.launches counts the launches and syncs; the
benchmark suite times whole steps).
"""

import argparse
import datetime
import re
from collections import defaultdict

import taichi as ti

from fx2d_gpu import scenes
from fx2d_gpu.device import runtime
from fx2d_gpu.physics.solver.plan import DEFAULT_OPTIONS

from .common import add_option_arguments, device_name, options_suffix, parsed_options, save_csv

DT = 1.0 / 60.0
SCENES = ("large_pyramid", "pile", "batched_small")
SOLVERS = ("xpbd", "soft_step")
#: Tasks printed a scene.
SHOWN = 12
#: A task's name is its kernel's, a compile counter and its task index and kind
#: (e.g. "_substeps_c80_0_range_for"): the kernel's is what is left before them.
_TASK_SUFFIX = re.compile(r"_c\d+_\d+_.*$")


def kernel_of(task: str) -> str:
    """The kernel a task's name belongs to."""
    return _TASK_SUFFIX.sub("", task)


def build_scene(
    name: str,
    arch: str,
    solver: str,
    pile: int = 100_000,
    worlds: int = 256,
    step_options: dict | None = None,
):
    """A scene the GPU is measured on (SCENES here, ptx_registers.SCENES): the large
    pyramid with sleep off (Box2D's, 5,051 bodies), a pile of `pile` bodies poured,
    `worlds` cart-poles (scenes.cart_poles: a step without contacts) or `worlds` small
    worlds; step_options: {StepOptions attribute: value} over the defaults."""
    common = dict(arch=arch, solver=solver)
    if step_options:
        common["step_options"] = DEFAULT_OPTIONS.replace(**step_options)
    if name == "cart_poles":
        return scenes.cart_poles(worlds, **common)
    if name == "large_pyramid":
        specs, _ = scenes.pyramid_layout(100)
        return scenes.build_scene(specs, enable_sleep=False, **common)
    if name == "pile":
        return scenes.build_scene(scenes.pile_layout(pile), **common)
    return scenes.batched_small(worlds, **common)


def _records():
    """The kernel profiler's records since it was last cleared (each a task's launch)."""
    profiler = ti.profiler.kernel_profiler.get_default_kernel_profiler()
    profiler._update_records()
    return list(profiler._traced_records)


def profile(scene, warm: int, steps: int) -> list[dict]:
    """Per task of `steps` steps of `scene` after `warm`: launches and milliseconds a step,
    share of the profiled time, and the launch's attributes where the backend gives them."""
    for _ in range(warm):
        scene.step(DT)
    ti.sync()
    ti.profiler.clear_kernel_profiler_info()
    for _ in range(steps):
        scene.step(DT)
    ti.sync()
    tasks = defaultdict(lambda: {"launches": 0, "ms": 0.0, "record": None})
    for record in _records():
        task = tasks[record.name]
        task["launches"] += 1
        task["ms"] += record.kernel_time
        task["record"] = record
    total = sum(task["ms"] for task in tasks.values()) or 1.0
    rows = []
    for name, task in sorted(tasks.items(), key=lambda item: -item[1]["ms"]):
        record = task["record"]
        rows.append(
            {
                "kernel": kernel_of(name),
                "task": name,
                "launches_per_step": round(task["launches"] / steps, 3),
                "ms_per_step": round(task["ms"] / steps, 4),
                "share": round(task["ms"] / total, 4),
                "registers": getattr(record, "register_per_thread", 0),
                "block_size": getattr(record, "block_size", 0),
                "grid_size": getattr(record, "grid_size", 0),
                "blocks_per_sm": getattr(record, "active_blocks_per_multiprocessor", 0),
            }
        )
    return rows


def run(
    arch="cpu",
    names=None,
    pile=None,
    worlds=None,
    warm=30,
    steps=10,
    results=None,
    step_options=None,
):
    backend = runtime.ensure_initialized(arch, kernel_profiler=True)
    gpu = not runtime.on_cpu()
    pile = pile or (1_000_000 if gpu else 100_000)
    worlds = worlds or (65_536 if gpu else 256)
    date = datetime.date.today().isoformat()
    rows = []
    for name in names or SCENES:
        for solver in SOLVERS:
            scene = build_scene(name, arch, solver, pile, worlds, step_options)
            base = {
                "date": date,
                "device": device_name(backend),
                "backend": backend,
                "solver": solver,
                "scene": name,
                "bodies": scene.n_bodies * scene.n_worlds,
                "worlds": scene.n_worlds,
                "substeps": scene.substeps,
                "steps": steps,
            }
            tasks = profile(scene, warm, steps)
            del scene
            rows += [{**base, **task} for task in tasks]
            step_ms = sum(task["ms_per_step"] for task in tasks)
            launches = sum(task["launches_per_step"] for task in tasks)
            print(
                f"  {name} ({base['bodies']:,} bodies, {solver}): {step_ms:.3f} ms of tasks "
                f"a step in {launches:.1f} task launches",
                flush=True,
            )
            for task in tasks[:SHOWN]:
                regs = f", {task['registers']} regs" if task["registers"] else ""
                print(
                    f"    {task['ms_per_step']:9.4f} ms {100 * task['share']:5.1f} % "
                    f"x{task['launches_per_step']:<6g} {task['task']}{regs}",
                    flush=True,
                )
    table = "kernel_profile" + options_suffix(step_options or {})
    print("  saved", save_csv(backend, table, rows, results))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.kernel_profile", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--arch", default="cpu", help="cpu | cuda | vulkan | ... (default cpu)")
    parser.add_argument(
        "--scenes", nargs="*", choices=SCENES, default=None, help="only these (default: all)"
    )
    parser.add_argument("--pile", type=int, default=None, help="pile bodies (100k; 1M on GPU)")
    parser.add_argument("--worlds", type=int, default=None, help="small worlds (256; 65,536 GPU)")
    parser.add_argument("--warm", type=int, default=30, help="steps before profiling (30)")
    parser.add_argument("--steps", type=int, default=10, help="steps profiled (10)")
    parser.add_argument("--results", default=None, help="results folder")
    add_option_arguments(parser, "small_worlds_by_block=true")
    args = parser.parse_args(argv)
    step_options, compile_options = parsed_options(parser, args)
    if compile_options:
        parser.error("--taichi-option: not here (python -m benchmarks takes them)")
    for name in ("pile", "worlds"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            parser.error(f"--{name} must be positive")
    if args.warm < 0 or args.steps < 1:
        parser.error("--warm must be >= 0 and --steps >= 1")
    run(
        args.arch,
        args.scenes,
        args.pile,
        args.worlds,
        args.warm,
        args.steps,
        args.results,
        step_options,
    )


if __name__ == "__main__":
    main()
