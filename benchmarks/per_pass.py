"""What a solver pass costs a contact: fx2d_gpu's against Box2D v3's, awake large pyramid.

    python -m benchmarks.per_pass [--arch cpu] [--rounds 3] [--quick] [--results DIR]

Box2D's large pyramid (base 100, 5,050 boxes on a ground, sleep off), on the CPU backend
by default. The two engines solve different numbers of passes a step, so their step times
do not compare per contact directly:

- fx2d_gpu, XPBD: 11 substeps, each a position pass and a velocity pass over the coloured
  contacts: 22 passes a step; the soft step (Scene(solver="soft_step")): 4 substeps, each
  a solve and a relax, and one restitution pass: 9, as Box2D. Their times are the pass
  stages ("position pass", "velocity pass"; "solve", "relax", "restitution") of
  Scene.profile (benchmarks/profile.py: 30 warm-up steps, then profiled steps;
  each stage its own launches with a device sync around it, so a pass's figure includes
  its kernel launches, a few per pass).
- Box2D v3 (pyb2d3): 4 substeps, each a solve (with bias) and a relax (without), and one
  restitution pass: 9 passes a step. pyb2d3 does not expose b2World_GetProfile (its
  b2Profile type is bound, nothing returns one), so its figures come from whole steps:
  the step's time over its 9 passes (an upper bound: it includes the broad phase, the
  narrow phase and the body updates), and a substep's marginal cost over its 2 passes (the
  slope of ms/step against 4, 8, 16 and 32 substeps, worlds stepped side by side: it
  includes the substep's body integration and warm start, not the collision; the range is
  wide because a substep costs a fraction of a millisecond, less than this machine's noise
  between windows).

Contacts: fx2d_gpu's contact points (Scene.contacts) after the profiled steps; Box2D's
touching manifolds and their points from its begin/end touch events, counted on a world of
its own stepped as the timed ones (Box2D is deterministic). The engines take turns over
`rounds` rounds (this machine's speed drifts by +-30 % over minutes); each figure is the
median of its rounds. Prints a table and saves benchmarks/results/<device>/per_pass.csv.
"""

import argparse
import datetime
import statistics
import time

import numpy as np
import taichi as ti

from fx2d_gpu import scenes
from fx2d_gpu.device import runtime
from fx2d_gpu.physics.solver.stages import LAST_SUBSTEP, STAGES

from . import box2d_scenes
from .common import device_name, print_table, save_csv, time_windows_side_by_side
from .profile import WARMUP_STEPS

DT = 1.0 / 60.0
#: Box2D's substep counts whose step times give the marginal cost of a substep (a fit's
#: slope; Box2D's default, box2d_scenes.SUBSTEPS, must be one of them).
BOX2D_SUBSTEP_COUNTS = (4, 8, 16, 32)
#: Box2D's passes over the contacts a substep: a solve and a relax.
BOX2D_PASSES_PER_SUBSTEP = 2
BOX2D_THREADS = (1, 2)

COLUMNS = (
    "date",
    "device",
    "backend",
    "engine",
    "measure",
    "bodies",
    "substeps",
    "passes_per_step",
    "manifolds",
    "contact_points",
    "rounds",
    "ms_per_step",
    "ms_passes_per_step",
    "ns_per_point_per_pass",
    "ns_per_manifold_per_pass",
)


def _per_pass_ns(ms: float, passes: int, count: int) -> float:
    """ms of `passes` passes over `count` contacts -> ns per contact per pass."""
    return round(ms * 1e6 / (passes * count), 2) if count else float("nan")


class Fx2dPasses:
    """The awake large pyramid in fx2d_gpu with `solver`, warmed up; measure() profiles
    `steps` steps."""

    def __init__(self, base: int, quick: bool, solver: str = "xpbd"):
        self.solver = solver
        self.scene = scenes.pyramid(base, enable_sleep=False, solver=solver, substeps=None)
        for _ in range(2 if quick else WARMUP_STEPS):
            self.scene.step(DT)
        self.scene.profile(DT, 1)  # compiles the kernels a profiled step launches
        self.substeps = self.scene.substeps

    def passes(self) -> dict[str, int]:
        """{colour pass stage: passes a step}: each stage's passes (every substep, or the
        last one's)."""
        return {
            stage.name: 1 if stage.when == LAST_SUBSTEP else self.substeps
            for stage in STAGES[self.solver]
            if stage.is_pass
        }

    def measure(self, steps: int) -> dict:
        """{stage: ms per step} of `steps` profiled steps and "step", a normal step's ms
        over as many steps right after."""
        profile = self.scene.profile(DT, steps)
        ti.sync()
        start = time.perf_counter()
        for _ in range(steps):
            self.scene.step(DT)
        ti.sync()
        step_ms = (time.perf_counter() - start) * 1e3 / steps
        return {**{name: profile.stages[name] for name in self.passes()}, "step": step_ms}

    def contacts(self) -> tuple[int, int]:
        """(touching pairs with points, contact points) now."""
        points = self.scene.contacts(None).point_count
        return int((points > 0).sum()), int(points.sum())


class Box2DPasses:
    """The awake large pyramid in Box2D v3 at each of BOX2D_THREADS and
    BOX2D_SUBSTEP_COUNTS, warmed up as fx2d_gpu's; measure() times them side by side."""

    def __init__(self, specs, quick: bool):
        warmup = 2 if quick else WARMUP_STEPS
        self.worlds = {}
        for threads in BOX2D_THREADS:
            for substeps in BOX2D_SUBSTEP_COUNTS:
                world = box2d_scenes.build_world(specs, threads, enable_sleep=False)
                for _ in range(warmup):
                    world.world.step(DT, substeps)
                self.worlds[threads, substeps] = world
        # The contacts of the timed worlds at Box2D's default substeps, from the events of
        # one stepped alongside (reading events in the timed loop would time Python).
        self.counter = box2d_scenes.build_world(specs, 1, enable_sleep=False, contact_events=True)
        for _ in range(warmup):
            self._count_step()

    def _count_step(self):
        self.counter.step(DT)
        self.counter.track_contacts()

    def measure(self, steps: int, window: int) -> dict:
        """{(threads, substeps): median ms per step} over windows of `window` steps, the
        worlds taking turns (time_windows_side_by_side); the counting world keeps up."""
        keys = list(self.worlds)
        runs = [
            (lambda world=self.worlds[key], n=key[1]: world.world.step(DT, n), lambda: None)
            for key in keys
        ]
        timings = time_windows_side_by_side(runs, steps, window)
        for _ in range(steps):
            self._count_step()
        return {
            key: statistics.median(times) for key, (_, times) in zip(keys, timings, strict=True)
        }

    def contacts(self) -> tuple[int, int]:
        return self.counter.touching()


def run(arch: str = "cpu", rounds: int = 3, quick: bool = False, results=None) -> list[dict]:
    """Measure both engines over `rounds` rounds; returns the table's rows and saves them."""
    backend = runtime.ensure_initialized(arch)
    device = device_name(backend)
    base = 5 if quick else 100
    steps, window = (3, 1) if quick else (20, 5)
    specs, _ = scenes.pyramid_layout(base)
    print(
        f"per-pass cost, large pyramid of base {base} awake, on {device} ({backend}), "
        f"{rounds} round(s)",
        flush=True,
    )
    ours = [Fx2dPasses(base, quick, solver) for solver in STAGES]
    theirs = Box2DPasses(specs, quick) if box2d_scenes.available() else None
    if theirs is None:
        print("  pyb2d3 is not installed: Box2D's rows are left out (pip install pyb2d3)")
    ours_rounds, theirs_rounds = [[] for _ in ours], []
    for index in range(rounds):
        for solver, measured in zip(ours, ours_rounds, strict=True):
            measured.append(solver.measure(steps))
        if theirs is not None:
            theirs_rounds.append(theirs.measure(1 + 2 * steps, window))  # 8 windows
        print(
            f"  round {index + 1}: fx2d_gpu step "
            + ", ".join(
                f"{solver.solver} {measured[-1]['step']:.2f} ms"
                for solver, measured in zip(ours, ours_rounds, strict=True)
            )
            + (
                f", Box2D 1 thread {theirs_rounds[-1][1, box2d_scenes.SUBSTEPS]:.2f} ms"
                if theirs is not None
                else ""
            ),
            flush=True,
        )
    date = datetime.date.today().isoformat()
    common = {"date": date, "device": device, "bodies": len(specs), "rounds": rounds}
    rows = [
        row
        for solver, measured in zip(ours, ours_rounds, strict=True)
        for row in _fx2d_rows(solver, measured, common, backend)
    ]
    if theirs is not None:
        rows += _box2d_rows(theirs, theirs_rounds, common)
    rows = [{c: row.get(c, "") for c in COLUMNS} for row in rows]
    print_table(
        [
            {
                k: r[k]
                for k in (
                    "engine",
                    "measure",
                    "passes_per_step",
                    "manifolds",
                    "contact_points",
                    "ms_per_step",
                    "ms_passes_per_step",
                    "ns_per_point_per_pass",
                    "ns_per_manifold_per_pass",
                )
            }
            for r in rows
        ]
    )
    print("  saved", save_csv(backend, "per_pass", rows, results), flush=True)
    return rows


def _fx2d_rows(ours: Fx2dPasses, measured: list[dict], common: dict, backend: str):
    manifolds, points = ours.contacts()
    median = {key: statistics.median(m[key] for m in measured) for key in measured[0]}
    stage_passes = ours.passes()
    passes = sum(stage_passes.values())
    engine = "fx2d_gpu" if ours.solver == "xpbd" else f"fx2d_gpu {ours.solver}"
    base = dict(
        common,
        engine=engine,
        backend=backend,
        substeps=ours.substeps,
        manifolds=manifolds,
        contact_points=points,
        ms_per_step=round(median["step"], 6),
    )
    rows = []
    # Milliseconds saved to 1e-6 (a nanosecond): at --quick sizes a pass takes ~0.05 ms,
    # and three decimals would be 1 % off the ns figures derived from them.
    for measure, ms, count in (
        *((f"{name} (profiled)", median[name], count) for name, count in stage_passes.items()),
        ("all passes (profiled)", sum(median[name] for name in stage_passes), passes),
        ("whole step / passes", median["step"], passes),
    ):
        rows.append(
            dict(
                base,
                measure=measure,
                passes_per_step=count,
                ms_passes_per_step=round(ms, 6),
                ns_per_point_per_pass=_per_pass_ns(ms, count, points),
                ns_per_manifold_per_pass=_per_pass_ns(ms, count, manifolds),
            )
        )
    return rows


def _box2d_rows(theirs: Box2DPasses, measured: list[dict], common: dict):
    manifolds, points = theirs.contacts()
    rows = []
    for threads in BOX2D_THREADS:
        ms = [statistics.median(m[threads, n] for m in measured) for n in BOX2D_SUBSTEP_COUNTS]
        default_ms = ms[BOX2D_SUBSTEP_COUNTS.index(box2d_scenes.SUBSTEPS)]
        slope = float(np.polyfit(BOX2D_SUBSTEP_COUNTS, ms, 1)[0])  # ms a substep
        base = dict(
            common,
            engine=box2d_scenes.engine_name(threads),
            backend="cpu",
            substeps=box2d_scenes.SUBSTEPS,
            manifolds=manifolds,
            contact_points=points,
            ms_per_step=round(default_ms, 6),
        )
        passes = box2d_scenes.PASSES_PER_STEP
        rows.append(
            dict(
                base,
                measure="whole step / passes",
                passes_per_step=passes,
                ms_passes_per_step=round(default_ms, 6),
                ns_per_point_per_pass=_per_pass_ns(default_ms, passes, points),
                ns_per_manifold_per_pass=_per_pass_ns(default_ms, passes, manifolds),
            )
        )
        passes = BOX2D_PASSES_PER_SUBSTEP * box2d_scenes.SUBSTEPS
        substep_ms = slope * box2d_scenes.SUBSTEPS
        rows.append(
            dict(
                base,
                measure="marginal substep / 2 passes",
                passes_per_step=passes,
                ms_passes_per_step=round(substep_ms, 6),
                ns_per_point_per_pass=_per_pass_ns(substep_ms, passes, points),
                ns_per_manifold_per_pass=_per_pass_ns(substep_ms, passes, manifolds),
            )
        )
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.per_pass", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--arch", default="cpu", help="cpu (default) | auto | cuda | ...")
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of both engines in turn (default 3)"
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument("--results", default=None, help="folder for <device>/per_pass.csv")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be positive")
    return run(args.arch, args.rounds, args.quick, args.results)


if __name__ == "__main__":
    main()
