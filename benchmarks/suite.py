"""fx2d_gpu's benchmark suite: Box2D's scenes beside Box2D v3 and pymunk, scaling, batching.

    python -m benchmarks [SCENE ...] [--arch auto|cpu|cuda|vulkan] [--quick] [--no-pymunk]
                         [--no-box2d] [--solver xpbd|soft_step] [--box2d-benchmark PATH]
    fx2d bench [same options]
    fx2d bench --profile [SCENE ...]    milliseconds per stage (benchmarks/profile.py)

Scenes (dt 1/60 s; XPBD at 11 substeps, or with --solver soft_step the soft step at 4; built
once in fx2d_gpu.scenes, shared with demos and tests):
    large_pyramid   Box2D's: base 100, 5,050 boxes of 1 m on a ground   (+ box2d, pymunk)
    many_pyramids   Box2D's: 20 x 20 pyramids of base 10, 22,000 boxes  (+ box2d, pymunk)
    joint_grid      100 x 100 circles, revolute joints to their neighbours, top row pinned
                                                                        (+ box2d)
    pile            N circles and boxes poured into a container, N = 10k, 100k (1M on a
                    GPU)                                                (+ box2d, pymunk 10k)
    batched_small   W worlds of 8 bodies and a joint, W = 1 ... 65,536 (4,096 on a CPU):
                    world-steps per second (Jax2D's measure)      (+ box2d at 4,096)
    compile         JIT time of a first step, cold (empty offline cache) and warm

ms/step is the median of timed windows after a warm-up window (each window ends with a
device sync); the first step (compilation) is timed on its own. The other engines run the
same bodies in the same process side by side with fx2d_gpu, taking turns a window each, and
each ratio fx2d_gpu/other is the median of the windows' ratios (this machine's speed drifts
by +-30 % over minutes): Box2D v3 (pyb2d3, 4 substeps, its default) on 1 and on 2 threads,
sleeping as the fx2d_gpu run beside it does, and pymunk (10 iterations, its spatial hash,
never sleeping) beside the sleep-off pyramids and the 10k pile. Where pyb2d3 or pymunk is
not installed its column is left out. With --box2d-benchmark PATH (or FX2D_BOX2D_BENCHMARK)
Box2D v3's own benchmark program, built natively, runs the two pyramid scenes on 1 and 2
workers after fx2d_gpu's runs (its protocol: best of 4 runs, sleep off), rows "box2d native
(N workers)" and fx2d_gpu's sleep-off rows' ratio_to_box2d_native_* (box2d_native.py).
launches_per_step: fx2d_gpu's kernel launches a step (launching.launch_count; the GPU's
cost in small and medium scenes). CSV per scene (the soft step's: <scene>_soft_step.csv)
and plots go to benchmarks/results/<device>/.
"""

import argparse
import contextlib
import datetime
import importlib.util
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from fx2d_gpu import scenes
from fx2d_gpu.device import MAX_COLORS, launching, residency, runtime
from fx2d_gpu.physics.solver.plan import DEFAULT_OPTIONS
from fx2d_gpu.physics.solver.stages import DEFAULT_SUBSTEPS

from . import box2d_native, box2d_scenes
from .common import (
    RESULTS,
    add_option_arguments,
    device_name,
    options_suffix,
    paired_ratio,
    parsed_options,
    print_table,
    save_csv,
    time_windows,
    time_windows_side_by_side,
)

DT = 1.0 / 60.0
SUBSTEPS = 11
#: The solver fx2d_gpu's scenes run ("xpbd" or "soft_step"; run(solver=...)), and its
#: substeps (SUBSTEPS for XPBD).
SOLVER = "xpbd"
#: The StepOptions of fx2d_gpu's scenes (run(colors_per_launch=...) changes them).
STEP_OPTIONS = DEFAULT_OPTIONS


def _solver_settings() -> dict:
    """The Scene keywords of SOLVER's scenes: the solver, its default substeps and
    STEP_OPTIONS."""
    return {
        "solver": SOLVER,
        "substeps": SUBSTEPS if SOLVER == "xpbd" else DEFAULT_SUBSTEPS[SOLVER],
        "step_options": STEP_OPTIONS,
    }


SCENES = ("large_pyramid", "many_pyramids", "joint_grid", "pile", "batched_small", "compile")
#: Windows ending by this step are "awake": before anything in a pyramid can fall asleep.
AWAKE_STEPS = 90
#: A pyramid stands when no top box dropped a box's height (1 m) or more in the run: a top
#: box that slid off its row, or a pyramid that collapsed, drops at least that. Contacts
#: that settle drop less: Box2D v3's large pyramid sinks 0.72 m in its first 200 steps,
#: ~7 mm at each of its 100 layers (its linear slop is 5 mm), then holds, no box 8 cm off
#: its place (2-core CPU, 2026-11-26).
STANDING_DROP = 1.0
#: The Box2D v3 thread counts run beside fx2d_gpu (engines "box2d (1 thread)", ...).
BOX2D_THREADS = (1, 2)

COLUMNS = (
    "date",
    "device",
    "backend",
    "engine",
    "scene",
    "bodies",
    "joints",
    "worlds",
    "substeps",
    "steps",
    "ms_per_step",
    "ms_per_step_awake",
    "world_steps_per_s",
    "ratio_to_pymunk",
    "ratio_to_box2d_1_thread",
    "ratio_to_box2d_2_threads",
    "ratio_to_box2d_native_1_worker",
    "ratio_to_box2d_native_2_workers",
    "first_step_s",
    "pairs",
    "contact_points",
    "colors",
    "overflow",
    "colors_max",
    "overflow_max",
    "pool_mb",
    "peak_rss_mb",
    "gpu_mem_mb",
    "top_drop_m",
    "stands",
    "colors_per_launch",
    "step_options",
    "taichi_options",
    "launches_per_step",
)


class Sizes:
    """Scene sizes and run lengths: the real benchmark, or tiny ones (--quick, for tests)."""

    def __init__(self, quick: bool, gpu: bool):
        self.quick = quick
        self.pyramid_base = 5 if quick else 100
        self.grid, self.grid_base = (2, 3) if quick else (20, 10)
        self.joint_grid = (4, 5) if quick else (100, 100)
        self.piles = [60] if quick else [10_000, 100_000] + ([1_000_000] if gpu else [])
        #: The pile the other engines (Box2D, pymunk) pour beside fx2d_gpu.
        self.reference_pile = 60 if quick else 10_000
        top = 4 if quick else (65536 if gpu else 4096)
        #: The worlds Box2D v3 steps beside fx2d_gpu's (bench_batched_small): the CPU's
        #: largest batch.
        self.box2d_worlds = 4 if quick else 4096
        self.worlds = [4**k for k in range(10) if 4**k <= top]
        if not quick and self.worlds[-1] != top:
            self.worlds.append(top)
        self.gpu = gpu

    def steps(self, scene: str, bodies: int) -> tuple[int, int]:
        """(steps, window) for a scene: pyramids 10 s of simulated time (to see them stand),
        others fewer as they grow."""
        if self.quick:
            return 7, 2
        if scene in ("large_pyramid", "many_pyramids"):
            return 600, 20
        if scene == "pile" and bodies > 20_000:
            return (180, 20) if self.gpu else (240, 20)
        if scene == "pile":
            return 300, 20
        if scene == "batched_small":
            return 61, 10
        return 180, 20


def _now_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _gpu_mem_mb(backend: str) -> str:
    """This process's GPU memory (MB) from nvidia-smi, when on CUDA."""
    if backend != "cuda":
        return ""
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
        for line in out.splitlines():
            pid, used = (v.strip() for v in line.split(","))
            if int(pid) == os.getpid():
                return used
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return ""


def _summaries(times: list[float], window: int) -> tuple[float, float]:
    """(median ms/step after the warm-up window, median over the awake windows)."""
    warm = times[1:] or times
    awake = [t for i, t in enumerate(times[1:], 1) if 1 + (i + 1) * window <= AWAKE_STEPS]
    return statistics.median(warm), statistics.median(awake or warm)


def run_fx2d(scene, steps: int, window: int, tops=()) -> dict:
    """Step `scene` `steps` times at DT; timings, sizes and (tops: top boxes) the drop."""
    step, sync, finish = _fx2d_runner(scene, tops)
    return finish(*time_windows(step, sync, steps, window), steps, window)


def _fx2d_runner(scene, tops=()):
    """(step, sync, finish) for `scene`: finish(first s, window times ms, steps, window)
    is run_fx2d's row (tops: top boxes, whose drop it measures)."""
    import taichi as ti

    tops = list(tops)
    y0 = scene.get_state().position[:, tops, 1] if tops else None
    peaks = {"colors": 0, "overflow": 0, "launches": 0, "steps": 0}

    def step():
        before = launching.launch_count()
        scene.step(DT)
        peaks["launches"] += launching.launch_count() - before
        peaks["steps"] += 1

    def sync():
        # The colours and overflow at each window's end, not after every step: reading
        # them settles the steps in flight (a GPU's: solver/in_flight.py), and a read after
        # every step made every step wait for its answer, the host launching the next
        # while the device idled.
        ti.sync()
        peaks["colors"] = max(peaks["colors"], scene.n_colors)
        peaks["overflow"] = max(peaks["overflow"], scene.n_overflow)

    def finish(first: float, times: list[float], steps: int, window: int) -> dict:
        ms, awake = _summaries(times, window)
        state = scene.get_state()
        if not np.isfinite(state.position).all():
            raise RuntimeError("the simulation produced non-finite positions")
        contacts = scene.contacts(None)
        engine = "fx2d_gpu" if scene.solver == "xpbd" else f"fx2d_gpu {scene.solver}"
        result = {
            "engine": engine,
            "bodies": scene.n_bodies * scene.n_worlds,
            "joints": scene.n_joints * scene.n_worlds,
            "worlds": scene.n_worlds,
            "substeps": scene.substeps,
            "steps": steps,
            "ms_per_step": round(ms, 3),
            "ms_per_step_awake": round(awake, 3),
            "first_step_s": round(first, 2),
            "pairs": len(scene.candidate_pairs()),
            "contact_points": int(contacts.point_count.sum()),
            "colors": scene.n_colors,
            "overflow": scene.n_overflow,
            "colors_max": peaks["colors"],  # (the most at a window's end)
            "overflow_max": peaks["overflow"],
            "launches_per_step": round(peaks["launches"] / max(peaks["steps"], 1), 1),
            "pool_mb": round(residency.current_pool().nbytes / 2**20, 1),
            "peak_rss_mb": round(_now_rss_mb()),
            "gpu_mem_mb": _gpu_mem_mb(scene.backend),
        }
        if tops:
            drop = float((y0 - state.position[:, tops, 1]).max())
            result.update(top_drop_m=round(drop, 3), stands=drop < STANDING_DROP)
        return result

    return step, sync, finish


def _pymunk_runner(specs, tops=(), cell_size: float = 1.0):
    """(step, sync, finish) for pymunk (10 iterations, its spatial hash) on `specs`, as
    _fx2d_runner."""
    from .pymunk_scenes import build_space

    space, bodies = build_space(specs, iterations=10, cell_size=cell_size)
    y0 = [bodies[i].position.y for i in tops]

    def finish(first: float, times: list[float], steps: int, window: int) -> dict:
        ms, awake = _summaries(times, window)
        result = {
            "engine": "pymunk",
            "backend": "cpu",
            "bodies": len(specs),
            "joints": 0,
            "worlds": 1,
            "substeps": "10 iterations",
            "steps": steps,
            "ms_per_step": round(ms, 3),
            "ms_per_step_awake": round(awake, 3),
            "first_step_s": round(first, 3),
            "contact_points": sum(len(a.contact_point_set.points) for a in _arbiters(space)),
        }
        if tops:
            drop = max(y - bodies[i].position.y for y, i in zip(y0, tops, strict=True))
            result.update(top_drop_m=round(drop, 3), stands=drop < STANDING_DROP)
        return result

    return lambda: space.step(DT), lambda: None, finish


def _box2d_runner(world: box2d_scenes.Box2DWorld, tops=()):
    """(step, sync, finish) for a Box2D v3 world (box2d_scenes), as _fx2d_runner: the top
    boxes' drop from their positions the same way."""
    tops = list(tops)
    y0 = world.heights(tops)

    def finish(first: float, times: list[float], steps: int, window: int) -> dict:
        ms, awake = _summaries(times, window)
        if not np.isfinite(world.positions()).all():
            raise RuntimeError("Box2D produced non-finite positions")
        result = {
            "engine": box2d_scenes.engine_name(world.threads, world.enable_sleep),
            "backend": "cpu",
            "bodies": len(world.bodies),
            "joints": world.n_joints,
            "worlds": 1,
            "substeps": box2d_scenes.SUBSTEPS,
            "steps": steps,
            "ms_per_step": round(ms, 3),
            "ms_per_step_awake": round(awake, 3),
            "first_step_s": round(first, 3),
        }
        if tops:
            drop = float((y0 - world.heights(tops)).max())
            result.update(top_drop_m=round(drop, 3), stands=drop < STANDING_DROP)
        return result

    return lambda: world.step(DT), lambda: None, finish


def box2d_ratio_column(threads: int) -> str:
    """fx2d_gpu's column of its paired ratio to Box2D v3 on `threads` threads."""
    return f"ratio_to_box2d_{threads}_thread{'' if threads == 1 else 's'}"


def _box2d_references(others, build, tops=()) -> list[tuple]:
    """[(ratio column, runner)] of Box2D v3 at each of BOX2D_THREADS, where `others` holds
    "box2d"; build(threads) makes the Box2DWorld."""
    if "box2d" not in others:
        return []
    return [
        (box2d_ratio_column(threads), _box2d_runner(build(threads), tops))
        for threads in BOX2D_THREADS
    ]


def _side_by_side(ours_runner, references, steps: int, window: int) -> list[dict]:
    """fx2d_gpu's row, then each reference engine's, run side by side
    (time_windows_side_by_side). references: [(ratio column, runner)]; fx2d_gpu's row gets
    each ratio column, the median of the windows' ratios (paired_ratio)."""
    runners = [ours_runner] + [runner for _, runner in references]
    timings = time_windows_side_by_side([runner[:2] for runner in runners], steps, window)
    rows = [
        runner[2](first, times, steps, window)
        for runner, (first, times) in zip(runners, timings, strict=True)
    ]
    ours_times = timings[0][1]
    for (column, _), (_, times) in zip(references, timings[1:], strict=True):
        rows[0][column] = round(paired_ratio(ours_times, times), 3)
    return rows


def _arbiters(space):
    arbiters = []
    for body in space.bodies:
        body.each_arbiter(arbiters.append)
    return arbiters


def _bench_pyramids(name, specs, tops, sizes, arch, others):
    """fx2d_gpu as it runs by default (bodies fall asleep once at rest) beside Box2D v3
    sleeping too, then fx2d_gpu with sleeping off (every box solved in every step, as
    pymunk does by default) beside pymunk and Box2D v3 with sleeping off (_side_by_side:
    each ratio is the median of the windows' ratios; the default run's ratio to pymunk is
    the ratio of its median to pymunk's, minutes apart)."""
    steps, window = sizes.steps(name, len(specs))
    rows = []
    for enable_sleep in (True, False):
        scene = scenes.build_scene(
            specs, arch=arch, enable_sleep=enable_sleep, **_solver_settings()
        )
        references = (
            []
            if enable_sleep or "pymunk" not in others
            else [("ratio_to_pymunk", _pymunk_runner(specs, tops))]
        )
        references += _box2d_references(
            others,
            lambda threads, sleep=enable_sleep: box2d_scenes.build_world(
                specs, threads, enable_sleep=sleep
            ),
            tops,
        )
        run_rows = _side_by_side(_fx2d_runner(scene, tops), references, steps, window)
        del scene, references  # free both engines' worlds before the next run
        if not enable_sleep:
            run_rows[0]["engine"] += " (no sleep)"
        rows += run_rows
    pymunk = [row for row in rows if row["engine"] == "pymunk"]
    if pymunk:
        rows[0]["ratio_to_pymunk"] = round(rows[0]["ms_per_step"] / pymunk[0]["ms_per_step"], 3)
    return rows


def bench_large_pyramid(sizes, arch, others):
    specs, tops = scenes.pyramid_layout(sizes.pyramid_base)
    return _bench_pyramids("large_pyramid", specs, tops, sizes, arch, others)


def bench_many_pyramids(sizes, arch, others):
    specs, tops = scenes.many_pyramids_layout(sizes.grid, sizes.grid_base)
    return _bench_pyramids("many_pyramids", specs, tops, sizes, arch, others)


def bench_joint_grid(sizes, arch, others):
    rows, columns = sizes.joint_grid
    scene = scenes.joint_grid(rows, columns, arch=arch, **_solver_settings())
    steps, window = sizes.steps("joint_grid", scene.n_bodies)
    references = _box2d_references(
        others, lambda threads: box2d_scenes.joint_grid_world(rows, columns, threads=threads)
    )
    return _side_by_side(_fx2d_runner(scene), references, steps, window)


def bench_pile(sizes, arch, others):
    rows = []
    for n in sizes.piles:
        specs = scenes.pile_layout(n)
        steps, window = sizes.steps("pile", n)
        scene = scenes.build_scene(specs, arch=arch, **_solver_settings())
        references = []
        if n == sizes.reference_pile:
            if "pymunk" in others:
                references.append(("ratio_to_pymunk", _pymunk_runner(specs, cell_size=0.75)))
            references += _box2d_references(
                others, lambda threads, specs=specs: box2d_scenes.build_world(specs, threads)
            )
        pile_rows = _side_by_side(_fx2d_runner(scene), references, steps, window)
        del scene, references
        for row in pile_rows:
            row["scene"] = f"pile_{_count(n)}"
        rows += pile_rows
    return rows


def bench_batched_small(sizes, arch, others):
    """W small worlds for each W of sizes.worlds; the largest on the CPU (sizes.box2d_worlds)
    side by side with Box2D v3 stepping the same worlds as islands of one world
    (box2d_scenes.small_worlds_world) on 1 and 2 threads: a ratio that this machine's
    drift moves less than the world-steps/s (the issue's target, 300,000 a second, is an
    absolute one)."""
    rows = []
    for worlds in sizes.worlds:
        scene = scenes.batched_small(worlds, arch=arch, **_solver_settings())
        steps, window = sizes.steps("batched_small", scene.n_bodies * worlds)
        references = []
        if worlds == sizes.box2d_worlds:
            references = _box2d_references(
                others,
                lambda threads, worlds=worlds: box2d_scenes.small_worlds_world(worlds, threads),
            )
        world_rows = _side_by_side(_fx2d_runner(scene), references, steps, window)
        del scene, references
        for row in world_rows:
            row["worlds"] = worlds
            row["world_steps_per_s"] = round(worlds * 1000.0 / row["ms_per_step"])
        rows += world_rows
        row = world_rows[0]
        ratios = "".join(
            f", {row[column]}x {box2d_scenes.engine_name(threads)}'s time"
            for threads in BOX2D_THREADS
            if (column := box2d_ratio_column(threads)) in row
        )
        print(
            f"  batched_small W={worlds}: {row['ms_per_step']:.2f} ms/step, "
            f"{row['world_steps_per_s']:,} world-steps/s{ratios}",
            flush=True,
        )
    return rows


_COMPILE_PROBE = """
import json, sys, time
start = time.perf_counter()
import taichi as ti
from fx2d_gpu import scenes
scene = scenes.batched_small(2, arch=sys.argv[1])
built = time.perf_counter()
scene.step(1 / 60); ti.sync()
first = time.perf_counter()
scene.step(1 / 60); ti.sync()
print(json.dumps({"import_build_s": built - start, "first_step_s": first - built,
                  "second_step_ms": (time.perf_counter() - first) * 1000}))
"""


_GROWTH_PROBE = """
import json, sys, time
import taichi as ti
from fx2d_gpu import scenes
small, large = int(sys.argv[2]), int(sys.argv[3])
if sys.argv[4] == "pile":
    first = scenes.random_pile(small, arch=sys.argv[1], seed=0)
    first.step(1 / 60); ti.sync()
    scene = scenes.random_pile(large, arch=sys.argv[1], seed=1)
else:  # worlds of batched_small, as the compile probe (--quick: its kernels, cached)
    first = scenes.batched_small(small, arch=sys.argv[1])
    first.step(1 / 60); ti.sync()
    scene = scenes.batched_small(large, arch=sys.argv[1])
start = time.perf_counter()
scene.step(1 / 60); ti.sync()
print(json.dumps({"first_step_s": time.perf_counter() - start}))
"""


def _run_probe(script: str, args: list[str], env: dict, in_process: bool) -> dict:
    """The JSON a probe script prints: from a fresh Python process (what the benchmark
    measures), or, for --quick (a smoke test of this code), in this process, whose kernels
    are compiled already: a fresh process would compile them all (~45 s on the CPU)."""
    if not in_process:
        out = subprocess.run(
            [sys.executable, "-c", script, *args],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])
    printed = io.StringIO()
    saved_argv = sys.argv
    sys.argv = ["probe", *args]
    try:
        with contextlib.redirect_stdout(printed):
            exec(compile(script, "<probe>", "exec"), {"__name__": "__probe__"})  # noqa: S102
    finally:
        sys.argv = saved_argv
    return json.loads(printed.getvalue().strip().splitlines()[-1])


def bench_compile(sizes, arch, others):
    """First step of a small scene with joints and contacts (every kernel of a step) in fresh
    processes: with an empty offline cache, then with the cache it filled. Then a scene 10x
    larger than the one before it in the same process (a pile of 2,000 bodies, then 20,000:
    the device pool grows, and its kernels compile for the new sizes)."""
    rows = []
    # --quick: 2 then 20 small worlds, warm and in this process: it checks the probes run.
    kind, small, large = ("batched", 2, 20) if sizes.quick else ("pile", 2000, 20000)
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TI_OFFLINE_CACHE_FILE_PATH=cache)
        for label in ("warm",) if sizes.quick else ("cold", "warm"):
            probe = _run_probe(_COMPILE_PROBE, [arch], env, in_process=sizes.quick)
            rows.append(
                {
                    "engine": "fx2d_gpu",
                    "scene": f"compile_{label}_cache",
                    "bodies": 8 * 2,
                    "joints": 2,
                    "worlds": 2,
                    "substeps": SUBSTEPS,
                    "steps": 2,
                    "first_step_s": round(probe["first_step_s"], 2),
                    "ms_per_step": round(probe["second_step_ms"], 3),
                    "import_build_s": round(probe["import_build_s"], 2),
                }
            )
            print(
                f"  compile ({label} cache): first step {probe['first_step_s']:.2f} s", flush=True
            )
        for label in ("warm",) if sizes.quick else ("cold", "warm"):
            probe = _run_probe(
                _GROWTH_PROBE, [arch, str(small), str(large), kind], env, in_process=sizes.quick
            )
            rows.append(
                {
                    "engine": "fx2d_gpu",
                    "scene": f"grow_10x_{label}_cache",
                    "bodies": large + 3 if kind == "pile" else 8 * large,
                    "worlds": 1 if kind == "pile" else large,
                    "substeps": SUBSTEPS,
                    "steps": 1,
                    "first_step_s": round(probe["first_step_s"], 2),
                }
            )
            print(
                f"  a scene 10x the last ({label} cache): first step {probe['first_step_s']:.2f} s",
                flush=True,
            )
    return rows


def _count(n: int) -> str:
    """10000 -> "10k", 1000000 -> "1M"."""
    for unit, suffix in ((1_000_000, "M"), (1000, "k")):
        if n >= unit and n % unit == 0:
            return f"{n // unit}{suffix}"
    return str(n)


BENCHES = {
    "large_pyramid": bench_large_pyramid,
    "many_pyramids": bench_many_pyramids,
    "joint_grid": bench_joint_grid,
    "pile": bench_pile,
    "batched_small": bench_batched_small,
    "compile": bench_compile,
}


def _native_program(path, names) -> Path | None:
    """Box2D's benchmark program (box2d_native.check_program) where `path` is given and
    `names` has a scene it runs; a missing path or program is said in one line."""
    if not set(names) & set(box2d_native.SCENES):
        return None
    if not path:
        print(
            "  box2d native: no --box2d-benchmark PATH (nor $FX2D_BOX2D_BENCHMARK): "
            "its rows are left out",
            flush=True,
        )
        return None
    try:
        return box2d_native.check_program(path)
    except box2d_native.NativeBenchmarkError as error:
        print(f"  box2d native: {error}: its rows are left out", flush=True)
        return None


def _native_rows(program: Path, name: str, rows: list[dict], quick: bool) -> list[dict]:
    """Box2D's program on scene `name` (box2d_native.scene_rows); fx2d_gpu's sleep-off rows
    among `rows` get their ratio to it, but not at --quick sizes: its scenes are full size."""
    native = box2d_native.scene_rows(program, name)
    if quick:
        print("  box2d native: no ratio at --quick sizes (its scenes are full size)", flush=True)
    else:
        box2d_native.add_ratios(rows, native)
    return native


def other_engines(
    with_pymunk: bool, with_box2d: bool, find_spec=importlib.util.find_spec
) -> frozenset[str]:
    """The engines to run beside fx2d_gpu ("pymunk", "box2d"): those asked for and
    installed; one asked for but missing is left out with a note. `find_spec`: how a
    module is looked for (importlib.util.find_spec's signature; None: not installed)."""
    others = set()
    for name, module, wanted, extra in (
        ("pymunk", "pymunk", with_pymunk, "pymunk"),
        ("box2d", "pyb2d3", with_box2d, "pyb2d3"),
    ):
        if not wanted:
            continue
        if find_spec(module) is None:
            print(
                f"  {module} is not installed: the {name} column is left out "
                f"(pip install {extra}, or the bench extra)",
                flush=True,
            )
        else:
            others.add(name)
    return frozenset(others)


def run(
    names,
    arch="auto",
    quick=False,
    with_pymunk=True,
    results=None,
    plot=True,
    colors_per_launch=None,
    piles=None,
    with_box2d=True,
    solver="xpbd",
    step_options=None,
    box2d_benchmark=None,
    compile_options=None,
):
    """Run the named benchmarks; returns {name: rows} and writes CSV (and plots).
    colors_per_launch: StepOptions.colors_per_launch for this process's scenes (None: the
    default; the compile probes' fresh processes keep it): the colours one kernel launch
    solves where the substeps launch a kernel per stage (GPU backends). piles: the pile
    sizes (bodies poured) instead of the default ones. with_pymunk, with_box2d: run those
    engines beside fx2d_gpu where installed. solver: fx2d_gpu's ("xpbd" or "soft_step", at
    its default substeps); the soft step's CSVs are <scene>_soft_step.csv. step_options:
    {StepOptions attribute: value} for this process's scenes (e.g. {"team": False}: a GPU
    launches per stage instead of running the GPU team); their CSVs are named with them
    (<scene>_team-False.csv) and say them in the step_options column. box2d_benchmark: the
    path of Box2D v3's own benchmark program (box2d_native.py), run on the pyramid scenes
    after fx2d_gpu's runs; None leaves its rows out, saying so in one line. compile_options:
    {Taichi option: value} (common.TAICHI_OPTIONS) over the engine's own where this call
    starts Taichi; the CSVs are named with them and say them in the taichi_options
    column."""
    global SOLVER, STEP_OPTIONS
    SOLVER = solver
    STEP_OPTIONS = DEFAULT_OPTIONS.replace(  # checked before anything runs
        colors_per_launch=(
            DEFAULT_OPTIONS.colors_per_launch if colors_per_launch is None else colors_per_launch
        ),
        **(step_options or {}),
    )
    options_tag = ",".join(f"{key}={value}" for key, value in (step_options or {}).items())
    taichi_tag = ",".join(f"{key}={value}" for key, value in (compile_options or {}).items())
    backend = runtime.ensure_initialized(arch, taichi_options=compile_options)
    gpu = not runtime.on_cpu()
    sizes = Sizes(quick, gpu)
    if piles:
        sizes.piles = list(piles)
    device = device_name(backend)
    date = datetime.date.today().isoformat()
    print(
        f"fx2d_gpu benchmarks on {device} ({backend}), dt {DT:.4f} s, solver {solver}, "
        f"{_solver_settings()['substeps']} substeps, "
        f"{STEP_OPTIONS.colors_per_launch} colours a launch where stages launch one by one"
        + (" [quick sizes]" if quick else ""),
        flush=True,
    )
    others = other_engines(with_pymunk, with_box2d)
    native = _native_program(box2d_benchmark, names)
    out = {}
    for name in names:
        print(f"- {name}", flush=True)
        rows = BENCHES[name](sizes, arch, others)
        if native and name in box2d_native.SCENES:
            rows += _native_rows(native, name, rows, quick)
        for row in rows:
            row.setdefault("scene", name)
            row.setdefault("backend", backend)
            row.update(date=date, device=device)
            if row.get("engine", "").startswith("fx2d_gpu"):
                row.setdefault("colors_per_launch", STEP_OPTIONS.colors_per_launch)
                row.setdefault("step_options", options_tag)
                row.setdefault("taichi_options", taichi_tag)
        columns = list(COLUMNS) + [k for k in rows[0] if k not in COLUMNS]
        rows = [{c: row.get(c, "") for c in columns} for row in rows]
        print_table(
            [
                {
                    k: r[k]
                    for k in (
                        "engine",
                        "scene",
                        "bodies",
                        "joints",
                        "worlds",
                        "ms_per_step",
                        "ms_per_step_awake",
                        "world_steps_per_s",
                        "ratio_to_pymunk",
                        "ratio_to_box2d_1_thread",
                        "ratio_to_box2d_2_threads",
                        "ratio_to_box2d_native_1_worker",
                        "ratio_to_box2d_native_2_workers",
                        "first_step_s",
                        "launches_per_step",
                        "colors_max",
                        "overflow_max",
                        "top_drop_m",
                        "stands",
                    )
                }
                for r in rows
            ]
        )
        csv_name = name if solver == "xpbd" else f"{name}_{solver}"
        csv_name += options_suffix(step_options or {}) + options_suffix(compile_options or {})
        print("  saved", save_csv(backend, csv_name, rows, results), flush=True)
        out[name] = rows
    if plot:
        from .plots import plot_results

        for path in plot_results(Path(results or RESULTS) / device):
            print("  plot", path)
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "scenes",
        nargs="*",
        default=[],
        metavar="SCENE",
        help=f"any of {', '.join(SCENES)} (default: all)",
    )
    parser.add_argument("--arch", default="auto", help="auto | cpu | gpu | cuda | vulkan | ...")
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--no-pymunk", action="store_true", help="skip the pymunk runs")
    parser.add_argument("--no-box2d", action="store_true", help="skip the Box2D v3 runs")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--solver",
        default="xpbd",
        choices=("xpbd", "soft_step"),
        help="fx2d_gpu's solver (default xpbd, 11 substeps; soft_step: 4)",
    )
    parser.add_argument("--results", default=None, help="folder for <device>/*.csv")
    parser.add_argument(
        "--colors-per-launch",
        type=int,
        default=None,
        metavar="N",
        help="colours solved per kernel launch where the substeps launch a "
        f"kernel per stage (GPU backends; default "
        f"{DEFAULT_OPTIONS.colors_per_launch})",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="milliseconds per stage of the named scenes instead (default: "
        "large_pyramid; benchmarks/profile.py)",
    )
    parser.add_argument(
        "--piles",
        type=int,
        nargs="+",
        default=None,
        metavar="N",
        help="pile sizes to pour (default: 10,000 and 100,000, and 1,000,000 on a GPU)",
    )
    parser.add_argument(
        "--box2d-benchmark",
        default=None,
        metavar="PATH",
        help="Box2D v3's own benchmark program, built natively (cmake -DBOX2D_BENCHMARKS=ON; "
        f"default ${box2d_native.ENV_VAR}): run on large_pyramid and many_pyramids with 1 "
        "and 2 workers (benchmarks/box2d_native.py)",
    )
    add_option_arguments(
        parser,
        "team=false (a GPU launches per stage instead of running the GPU team) or "
        "gpu_team_slots=100000",
    )
    args = parser.parse_args(argv)
    step_options, compile_options = parsed_options(parser, args)
    if args.profile:
        from . import profile

        bad = [s for s in args.scenes if s not in profile.SCENES]
        if bad:
            parser.error(f"--profile: unknown scene(s) {bad}; choose from {profile.SCENES}")
        return profile.run(
            args.scenes or ["large_pyramid"], args.arch, args.quick, args.results, args.solver
        )
    bad = [s for s in args.scenes if s not in SCENES]
    if bad:
        parser.error(f"unknown scene(s) {bad}; choose from {SCENES}")
    if args.colors_per_launch is not None and not 1 <= args.colors_per_launch <= MAX_COLORS:
        parser.error(f"--colors-per-launch must be in [1, {MAX_COLORS}]")
    if args.piles and min(args.piles) < 1:
        parser.error("--piles must be positive")
    native = box2d_native.program_path(args.box2d_benchmark)
    if native is not None:  # checked before the runs: they take minutes
        try:
            native = box2d_native.check_program(native)
        except box2d_native.NativeBenchmarkError as error:
            parser.error(f"--box2d-benchmark: {error}")
    return run(
        args.scenes or list(SCENES),
        args.arch,
        args.quick,
        not args.no_pymunk,
        args.results,
        not args.no_plot,
        args.colors_per_launch,
        args.piles,
        not args.no_box2d,
        args.solver,
        step_options,
        native,
        compile_options,
    )


if __name__ == "__main__":
    main()
