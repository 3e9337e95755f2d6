"""Kernel launches, host syncs and offloaded tasks per step of each solver, on the paths a GPU
takes, with the launches of each of the step's planned stages.

    python -m benchmarks.launches [--results DIR] [--scenes NAME ...] [--step-option NAME=VALUE]

On a GPU backend each launch costs microseconds of host time and each sync (a kernel that
returns a value, a read of the device) makes the host wait for the device to drain, so these
decide the step time of small and medium scenes there; a GPU is not always at hand, and
these are counted on any machine, on the CPU backend. The paths (PATHS):

- "gpu (per stage)": a launch per stage group and per StepOptions.colors_per_launch colours
  (the CPU team off): a GPU's path for scenes of more than StepOptions.gpu_team_slots body
  slots (and every scene's before the GPU team);
- "gpu (team)": the GPU team (solver/gpu_team.py), a GPU's path for large worlds: one block
  up to gpu_team_slots slots, on CUDA a grid team (a block per multiprocessor) above them
  (the pile), counted as the CPU team, which launches the same kernels for the same stages
  with the stages a GPU folds into them (StepOptions.fold_on_cpu), launched in flight as a
  GPU launches them (StepOptions.steps_in_flight: a team's kept step, solver/in_flight.py),
  over STEPS_IN_FLIGHT counted steps;
- small worlds take one path either way: the whole step in one launch (fused.step_by_world,
  StepOptions.small_worlds_in_one_launch), which a GPU compiles in and which is counted here
  with StepOptions.fold_on_cpu, launched in flight as a GPU launches it
  (StepOptions.steps_in_flight: the host reads the answers of STEPS_IN_FLIGHT steps at
  once, solver/in_flight.py), over STEPS_IN_FLIGHT counted steps so that one such read
  falls among them; so are the cart-poles' steps without contacts.

- launches_per_step: launches of the engine's kernels (launching.launch_count);
- syncs_per_step: the host's waits for the device inside step(): Taichi's runtime sync
  (which a launch of a kernel that returns a value makes, and to_numpy, from_numpy, ti.sync)
  and reads of a field's element from the host; returning_per_step: of those, the launches
  of kernels that return a value (launching.returning_count);
- tasks_per_step: offloaded tasks run (Taichi's kernel profiler on the CPU: each top-level
  loop or serial block of a kernel is a task, a kernel launch on a GPU), the kernels
  compiled as a GPU compiles them (compiled_as_on_a_gpu: no loop run serially, the scans'
  GPU passes; since 2026-12-05: the small worlds' step kernel then runs 51 tasks a step
  with the soft step, as its CUDA build on the stand-in driver has 51 entries
  (benchmarks/ptx_registers.py --no-gpu), where the CPU's serial build ran 11);
- host_array_launches_per_step, host_arrays_per_step: launches given NumPy arrays (as
  ndarray arguments: forces applied before the step, a get_state into `out` arrays, worlds
  reset) and those arrays (launching.host_array_count). On CUDA Taichi 1.7.4 copies each
  such array to the device before its launch and back after it, waiting for the device on
  both sides: each such launch is two syncs the host pays, besides syncs_per_step;
- barriers_per_step (the team's path): the team's barriers a step, where its members meet
  between stages (team.barrier: the generation counter's steps, where a team of several
  threads ran the step). A GPU's team meets at the same ones: a block's barrier is tens of
  nanoseconds, a grid team's a round trip of every block's first thread through the L2
  cache (microseconds), so on a grid team they price the step. Blank where no team of
  several threads ran: a launch per stage, small worlds, and scenes whose team is of one
  (solver/team.team_of_one: the asleep pyramids);
- launches_per_stage.csv: the launches of each planned stage (solver/plan.py's
  STEP_STAGES; the substep's stages count under "substeps", a kept step's launch under
  "find pairs").
- barriers_per_site.csv (--barrier-sites: the team's path alone, its kernels compiled with
  device.COUNT_BARRIER_SITES): the team's barriers a step at each call site of
  team.barrier (file, line, function: solver/team.barrier_site_slot), which add up to
  barriers_per_step: a colour pass's meetings, an item stage's, a prefix sum's, the
  report's, so that a change that saves barriers on a grid team shows where.

The scenes: the large pyramid (sleep off), a poured pile of 100,000 bodies, a 30x30 joint
grid, a pyramid of 20 boxes a side asleep (stepped until every box sleeps first: a pile at
rest, whose steps wake nothing) and the same beside a ball drifting in its world (each step
finds its pairs: a body moves beside sleepers); small worlds on the per-stage path, their
state interleaved and their first substep begun a thread an item as CUDA's defaults have
them (StepOptions.interleave_small_worlds, small_worlds_begin_by_item).

The vector environments (ENVS: fx2d/CartPole-v0, fx2d/Lander-v0 and fx2d/Levels-v0, 256
environments, random actions, the scene's step as a GPU takes it: StepOptions.fold_on_cpu,
steps_in_flight) are counted per vector step: the scene's step, and around it the forces
or motor targets of the actions, the worlds that restart and the observations read. Their
random steps seldom restart a world, so a restart is counted on its own too
(levels_restart_256, a row per reset call, not per step: reset with a reset_mask of
RESTARTED of the 256 worlds, new levels written and observed).

Each scene is stepped WARM_STEPS steps and read (steps in flight among them: read, not
counted), then COUNTED_STEPS (or STEPS_IN_FLIGHT) counted. Saves
benchmarks/results/<device>/launches_per_step.csv and launches_per_stage.csv.
"""

import argparse
import contextlib
import datetime
import itertools

import numpy as np
import taichi as ti
from taichi.lang import impl

from fx2d_gpu import device, scenes
from fx2d_gpu.device import STEPS_IN_FLIGHT, launching, runtime
from fx2d_gpu.physics.solver import team  # (team.GENERATION)
from fx2d_gpu.physics.solver.plan import STEP_STAGE_NAMES, StepOptions
from fx2d_gpu.physics.solver.stages import STAGES
from fx2d_gpu.physics.solver.team import TeamTimings

from .common import (
    add_option_arguments,
    device_name,
    options_suffix,
    parsed_options,
    print_table,
    save_csv,
)

WARM_STEPS, COUNTED_STEPS = 30, 10
ASLEEP_AFTER = 600
DT = 1.0 / 60.0
#: The GPU's two paths for large worlds, as StepOptions: a launch per stage group (the team
#: off; scenes over StepOptions.gpu_team_slots body slots off CUDA), and the GPU team
#: (solver/gpu_team.py: one block, or on CUDA a grid team, runs the team's launches). On
#: the CPU backend the second
#: is the CPU team, whose launches are the GPU team's (the same kernels and stages); its
#: barrier probe, which a GPU never runs, is probed once, while warming up, not again.
PATHS = {
    "gpu (per stage)": StepOptions(
        team=False, interleave_small_worlds=True, small_worlds_begin_by_item=True
    ),
    "gpu (team)": StepOptions(
        interleave_small_worlds=True,
        small_worlds_begin_by_item=True,
        fold_on_cpu=True,
        steps_in_flight=True,
        # Probed once; the duel never tries a team of one (not after slow steps either)
        # and a slow probe keeps the threads: a GPU's team is always its block's or its
        # grid's threads, and a team of one would meet at no barrier to count.
        team_timings=TeamTimings(
            reprobe_requests=10**9,
            reprobe_failed_requests=10**9,
            duel_steps=10**9,
            duel_max_steps=10**9,
            duel_slow=float("inf"),
            max_barrier_s=1.0,
        ),
    ),
}


def _scenes(solver: str, options: StepOptions):
    """{name: builder} of the counted scenes for `solver`, at its default substeps: all of
    them on the per-stage path; on the team's, those of at most gpu_team_slots body slots
    that are not small worlds (a world per thread either way), and the small worlds where
    their substeps are the team's (StepOptions.small_worlds_by_stage): the pile is over
    gpu_team_slots, a grid team's on CUDA, the same launches."""
    specs, _ = scenes.pyramid_layout(100)
    common = dict(arch="cpu", solver=solver, step_options=options)
    builders = {
        "large_pyramid": lambda: scenes.build_scene(specs, enable_sleep=False, **common),
        "pile_100k": lambda: scenes.build_scene(scenes.pile_layout(100_000), **common),
        "joint_grid_30x30": lambda: scenes.joint_grid(30, 30, **common),
        # A pile at rest: every body asleep before the counted steps (ASLEEP_AFTER); and
        # the same beside a ball drifting in its world (an awake body that moves beside
        # sleepers: each step finds its pairs and asks whether they wake a sleeper).
        "pyramid_20_asleep": lambda: _asleep(
            scenes.build_scene(scenes.pyramid_layout(20)[0], **common)
        ),
        "pyramid_20_asleep_ball": lambda: _asleep(
            _with_drifting_ball(scenes.build_scene(scenes.pyramid_layout(20)[0], **common)), awake=1
        ),
        # A GPU folds a small worlds' step into one launch and launches it in flight:
        # fold_on_cpu and steps_in_flight count it here.
        "batched_small_256": lambda: scenes.batched_small(
            256,
            **{**common, "step_options": options.replace(fold_on_cpu=True, steps_in_flight=True)},
        ),
        # Small worlds whose bodies never touch: a step without contacts, on every backend,
        # in flight as a GPU launches it.
        "cart_poles_256": lambda: scenes.cart_poles(
            256, **{**common, "step_options": options.replace(steps_in_flight=True)}
        ),
    }
    if options.team:
        # (Small worlds' substeps are the team's only by stage: StepOptions.small_worlds_by_stage.)
        del builders["cart_poles_256"]
        if not options.small_worlds_by_stage:
            del builders["batched_small_256"]
    return builders


def _asleep(scene, awake: int = 0):
    """`scene` stepped until every body sleeps but its last `awake` (at most ASLEEP_AFTER
    steps: a pyramid of 20 boxes a side sleeps by step ~100)."""
    for _ in range(ASLEEP_AFTER):
        scene.step(DT)
        # (body 0: the static ground)
        if scene.get_state().sleeping[:, 1 : scene.n_bodies - awake].all():
            return scene
    raise RuntimeError(f"the scene was not asleep after {ASLEEP_AFTER} steps")


def _with_drifting_ball(scene):
    """`scene` with a ball far to the left of its pyramid drifting up at 0.2 m/s, no gravity:
    it never sleeps."""
    scene.add_circle((-25.0, 1.0), 0.4, gravity_scale=0.0, velocity=(0.0, 0.2))
    return scene


@contextlib.contextmanager
def compiled_as_on_a_gpu():
    """While entered, the engine's kernels compile on the CPU backend as a GPU's do, where
    the two differ in their offloaded tasks: no kernel runs its loops serially
    (device.SERIAL_SLOTS and SERIAL_WORLDS 0: a GPU never serialises a kernel's loops, and
    Taichi runs serialised loops as one task) and scans take a GPU's passes
    (device.SCAN_PASSES "gpu"). The same results: both only change how the work is split.
    Entered before the kernels compile (a kernel keeps the build of its first call with the
    same arguments), as run enters it."""
    saved = device.SERIAL_SLOTS, device.SERIAL_WORLDS, device.SCAN_PASSES
    device.SERIAL_SLOTS = device.SERIAL_WORLDS = 0
    device.SCAN_PASSES = "gpu"
    try:
        yield
    finally:
        device.SERIAL_SLOTS, device.SERIAL_WORLDS, device.SCAN_PASSES = saved


class _HostWaits:
    """Counts the host's own waits for the device while it is entered: Taichi's runtime
    sync (to_numpy, from_numpy, ti.sync call it) and reads of a field element from the
    host (each a kernel whose result the host waits for)."""

    def __init__(self):
        self.count = 0

    @contextlib.contextmanager
    def counting(self):
        runtime_object = impl.get_runtime()
        sync = runtime_object.sync
        accessors = [(cls, cls.__getitem__) for cls in (ti.ScalarField, ti.MatrixField)]

        def counted_sync(*args, **kwargs):
            self.count += 1
            return sync(*args, **kwargs)

        def counted_read(original):
            def read(field, key):
                self.count += 1
                return original(field, key)

            return read

        runtime_object.sync = counted_sync
        for cls, original in accessors:
            cls.__getitem__ = counted_read(original)
        try:
            yield self
        finally:
            runtime_object.sync = sync
            for cls, original in accessors:
                cls.__getitem__ = original


def _tasks_run() -> int:
    """Offloaded tasks the kernel profiler recorded since it was last cleared."""
    profiler = ti.profiler.kernel_profiler.get_default_kernel_profiler()
    profiler._update_records()
    return len(profiler._traced_records)


def barrier_generation(scene) -> int:
    """The team's barrier generation counter (team.GENERATION): how many barriers its
    members have met at (read outside the counted steps: a read of the device)."""
    return int(scene.step_context().pool.counts.barrier[team.GENERATION])


def _site_counts(scene) -> list[int]:
    """Each barrier site's count so far, every member's arrivals (team.BARRIER_SITES'
    slots of counts.barrier; a read of the device)."""
    counted = scene.step_context().pool.counts.barrier.to_numpy()
    return [int(counted[team.SITE_SLOT + index]) for index in range(device.FENCE_SLOTS)]


def counted_steps(scene) -> int:
    """Steps counted of `scene`: STEPS_IN_FLIGHT where its steps fly (small worlds, the GPU
    team's large ones: one read of their answers among them), else COUNTED_STEPS."""
    return STEPS_IN_FLIGHT if scene.step_options.steps_in_flight else COUNTED_STEPS


def count(scene, steps: int = COUNTED_STEPS, advance=None) -> dict:
    """Launches, syncs, offloaded tasks, host arrays and the team's barriers per step of
    `scene` over `steps` steps (`advance()`: one step, scene.step(DT) by default; a vector
    env's step), and {stage: launches per step}."""
    advance = advance or (lambda: scene.step(DT))
    waits = _HostWaits()
    generation = barrier_generation(scene)
    sites_before = _site_counts(scene) if device.COUNT_BARRIER_SITES else None
    launches, returning = launching.launch_count(), launching.returning_count()
    host_launches, host_arrays = launching.host_array_count()
    by_stage = launching.stage_launches()
    ti.profiler.clear_kernel_profiler_info()
    with waits.counting():
        for _ in range(steps):
            advance()
    tasks = _tasks_run()
    host_after = launching.host_array_count()
    after = launching.stage_launches()
    per_stage = {
        name: (after[name] - by_stage.get(name, 0)) / steps
        for name in after
        if name is not None and after[name] != by_stage.get(name, 0)
    }
    counts = {
        "launches_per_step": (launching.launch_count() - launches) / steps,
        "syncs_per_step": waits.count / steps,
        "returning_per_step": (launching.returning_count() - returning) / steps,
        "tasks_per_step": tasks / steps,
        "host_array_launches_per_step": (host_after[0] - host_launches) / steps,
        "host_arrays_per_step": (host_after[1] - host_arrays) / steps,
    }
    # Read last: it settles steps in flight (a read of the device, not the steps').
    barriers = barrier_generation(scene) - generation
    if device.COUNT_BARRIER_SITES:
        threads = team.status().step_threads
        sites_after = _site_counts(scene)
        counts["barrier_sites"] = {
            site: (sites_after[index] - sites_before[index]) / max(threads, 1) / steps
            for site, index in team.BARRIER_SITES.items()
            if sites_after[index] != sites_before[index]
        }
    # None where no team of several threads ran (a launch per stage, small worlds, a team
    # of one: no barrier to count).
    counts["barriers_per_step"] = barriers / steps if barriers else ""
    return counts, per_stage


#: The vector environments counted (per vector step), ENV_COUNT environments each.
ENVS = {
    "cartpole_env_256": "fx2d/CartPole-v0",
    "lander_env_256": "fx2d/Lander-v0",
    "levels_env_256": "fx2d/Levels-v0",
}
ENV_COUNT = 256
#: Restarts counted on their own (per reset call): {name: env id}, RESTARTED worlds each.
RESTARTS = {"levels_restart_256": "fx2d/Levels-v0"}
RESTARTED = 13  # 5 % of ENV_COUNT


def _env_rows(names, options: StepOptions, base: dict) -> list[dict]:
    """ENVS' counts per vector step (random actions, seeded), and RESTARTS' per reset
    call, the scene stepping as a GPU steps small worlds (`options` with fold_on_cpu and
    steps_in_flight)."""
    import gymnasium

    import fx2d_gpu.envs  # noqa: F401 - registers the environments

    rows = []
    for name, env_id in {**ENVS, **RESTARTS}.items():
        if names and name not in names:
            continue
        env = gymnasium.make_vec(
            env_id, num_envs=ENV_COUNT, vectorization_mode="vector_entry_point", arch="cpu"
        )
        scene = env.unwrapped.scene
        scene.step_options = options.replace(fold_on_cpu=True, steps_in_flight=True)
        env.action_space.seed(0)
        env.reset(seed=0)

        def advance(env=env):
            env.step(env.action_space.sample())

        for _ in range(WARM_STEPS):
            advance()
        scene.get_state()
        if name in RESTARTS:
            masks = np.random.default_rng(0)

            def advance(env=env, masks=masks):
                mask = np.zeros(ENV_COUNT, bool)
                mask[masks.choice(ENV_COUNT, RESTARTED, replace=False)] = True
                env.reset(options={"reset_mask": mask})

        counts, _ = count(scene, STEPS_IN_FLIGHT, advance)
        env.close()
        row = {
            **base,
            "solver": scene.solver,
            "scene": name,
            "bodies": scene.n_bodies * scene.n_worlds,
            "worlds": scene.n_worlds,
            "substeps": scene.substeps,
            "colors": scene.n_colors,
            **counts,
        }
        rows.append(row)
        print(f"  {base['path']} {scene.solver} {name}: {counts}", flush=True)
    return rows


def run(results=None, names=None, step_options=None, barrier_sites=False) -> list[dict]:
    """Count every path's scenes (`names`: only those) with each solver, their StepOptions
    changed by `step_options` ({attribute: value}; the CSVs' names then end with them, as
    the suite's: launches_per_step_colors_by_turns-True.csv). `barrier_sites`: the team's
    path alone, its barriers counted at each call site (barriers_per_site.csv; this
    process's kernels compile with device.COUNT_BARRIER_SITES), not the other CSVs;
    returns the sites' rows."""
    backend = runtime.ensure_initialized("cpu", kernel_profiler=True)
    date = datetime.date.today().isoformat()
    step_options = step_options or {}
    tag = options_suffix(step_options)
    if barrier_sites:
        device.COUNT_BARRIER_SITES = True
    try:
        with compiled_as_on_a_gpu():
            rows, stage_rows, site_rows = _count_all(
                backend, date, names, step_options, barrier_sites
            )
    finally:
        device.COUNT_BARRIER_SITES = False
    if barrier_sites:
        print_table(site_rows)
        print("  saved", save_csv(backend, f"barriers_per_site{tag}", site_rows, results))
        return site_rows
    print_table(rows)
    print("  saved", save_csv(backend, f"launches_per_step{tag}", rows, results))
    if stage_rows:  # (none where only the environments were counted: --scenes)
        print("  saved", save_csv(backend, f"launches_per_stage{tag}", stage_rows, results))
    return rows


def _count_all(
    backend, date, names, step_options, barrier_sites=False
) -> tuple[list[dict], list[dict], list[dict]]:
    """run's rows: (launches_per_step's, launches_per_stage's, barriers_per_site's); with
    `barrier_sites` the team's path alone and no environments."""
    rows, stage_rows, site_rows = [], [], []
    paths = {"gpu (team)": PATHS["gpu (team)"]} if barrier_sites else PATHS
    for (path, options), solver in itertools.product(paths.items(), STAGES):
        for name, build in _scenes(solver, options.replace(**step_options)).items():
            if names and name not in names:
                continue
            scene = build()
            for _ in range(WARM_STEPS):
                scene.step(DT)
            scene.get_state()  # (the warm steps in flight read: not counted)
            counts, per_stage = count(scene, counted_steps(scene))
            base = {
                "date": date,
                "device": device_name(backend),
                "backend": backend,
                "path": path,
                "solver": solver,
                "scene": name,
                "bodies": scene.n_bodies * scene.n_worlds,
                "worlds": scene.n_worlds,
                "substeps": scene.substeps,
            }
            sites = counts.pop("barrier_sites", {})
            rows.append({**base, "colors": scene.n_colors, **counts})
            site_rows += [
                {
                    **base,
                    "colors": scene.n_colors,
                    "file": file,
                    "line": line,
                    "function": function,
                    "barriers_per_step": per_step,
                }
                for (file, line, function), per_step in sorted(
                    sites.items(), key=lambda item: -item[1]
                )
            ]
            order = [n for n in STEP_STAGE_NAMES if n in per_stage]
            order += sorted(n for n in per_stage if n not in STEP_STAGE_NAMES)
            stage_rows += [
                {**base, "stage": stage, "launches_per_step": per_stage[stage]} for stage in order
            ]
            print(f"  {path} {solver} {name}: {counts}", flush=True)
    if barrier_sites:
        return rows, stage_rows, site_rows
    # The environments' scenes: their task's solver, the small worlds' one path.
    env_base = {"date": date, "device": device_name(backend), "backend": backend}
    env_base.update(path="gpu (per stage)")
    rows += _env_rows(names, PATHS["gpu (per stage)"].replace(**step_options), env_base)
    return rows, stage_rows, site_rows


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.launches", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--results", default=None, help="results folder")
    parser.add_argument(
        "--scenes", nargs="*", default=None, help="only these scenes (default: all)"
    )
    parser.add_argument(
        "--barrier-sites",
        action="store_true",
        help="the team's path alone: its barriers a step at each call site "
        "(barriers_per_site.csv) instead of the other counts",
    )
    add_option_arguments(parser, "colors_by_turns=true")
    args = parser.parse_args(argv)
    step_options, compile_options = parsed_options(parser, args)
    if compile_options:
        parser.error("--taichi-option: the counts do not depend on Taichi's compile options")
    run(args.results, args.scenes, step_options, args.barrier_sites)


if __name__ == "__main__":
    main()
