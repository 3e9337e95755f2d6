"""What one sweep over a scene's contacts costs a pair, on one thread, from one saved state.

    python -m benchmarks.contact_sweep [--scene large_pyramid] [--rounds 11] [--quick]
                                       [--results DIR]

Whole steps on the 2-core CPU machine drift by +-30 % between processes and minutes, more
than most changes to a contact pass. This times the passes alone: each solver's contact
functions (soft_contacts.solve_soft_contact with and without bias, contacts.solve_velocity,
contacts.warm_start_body) in a serial loop over every pair (every body slot for the warm
start) of the scene after its warm-up steps, the state they change restored before each
run, the best of `rounds` runs: steady to a few per cent from one process to the next.
The loop runs the pairs in the step's colour order, as the substeps do, but on one thread
and without the colours' barriers. Each solver's own scene (the soft step's manifolds are
prepared by its rules). Prints a table and saves benchmarks/results/<device>/
contact_sweep.csv: ns a pair and a contact point of each sweep.
"""

import argparse
import datetime
import time

import numpy as np
import taichi as ti

from fx2d_gpu import scenes
from fx2d_gpu.device import runtime
from fx2d_gpu.physics.solver.contacts import solve_velocity, warm_start_body
from fx2d_gpu.physics.solver.soft_contacts import solve_soft_contact

from .common import device_name, print_table, save_csv

DT = 1.0 / 60.0
WARMUP_STEPS = 150
#: The fields a sweep writes, {group: names}: restored before every timed run.
WRITTEN = {
    "bodies": ("velocity", "angular_velocity", "support"),
    "manifolds": (
        "normal_impulse",
        "tangent_impulse",
        "total_normal_impulse",
        "total_tangent_impulse",
        "touching",
    ),
    "prepared": ("bounced",),
}


@ti.kernel
def _soft_sweep(
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    n_pairs: ti.i32,
    n_bodies: ti.i32,
    h: ti.f32,
    use_bias: ti.template(),
):
    ti.loop_config(serialize=True)
    for pair in range(n_pairs):
        solve_soft_contact(bodies, manifolds, prepared, pair, n_bodies, h, -1, use_bias)


@ti.kernel
def _velocity_sweep(
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    n_pairs: ti.i32,
    n_bodies: ti.i32,
    h: ti.f32,
):
    ti.loop_config(serialize=True)
    for pair in range(n_pairs):
        solve_velocity(bodies, manifolds, prepared, pair, n_bodies, h, -1)


@ti.kernel
def _warm_start(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    n_slots: ti.i32,
    n_bodies: ti.i32,
):
    ti.loop_config(serialize=True)
    for slot in range(n_slots):
        warm_start_body(model, bodies, manifolds, prepared, slot, n_bodies)


def build(scene_name: str, solver: str, quick: bool):
    """The scene with `solver`, sleep off, stepped its warm-up steps."""
    if scene_name == "many_pyramids":
        scene = scenes.many_pyramids(
            2 if quick else 20, 3 if quick else 10, enable_sleep=False, solver=solver, substeps=None
        )
    else:
        scene = scenes.pyramid(
            8 if quick else 100, enable_sleep=False, solver=solver, substeps=None
        )
    for _ in range(3 if quick else WARMUP_STEPS):
        scene.step(DT)
    return scene


def measure(scene, scene_name: str, rounds: int) -> list[dict]:
    """Rows of ns a pair (and a point) of each sweep of the scene's solver, its best of
    `rounds` runs; the scene's state is left as it was."""
    solver = scene.solver
    ctx = scene.step_context(DT)
    pool = ctx.pool
    groups = {name: getattr(pool, name) for name in WRITTEN}
    saved = {
        (group, name): getattr(groups[group], name).to_numpy()
        for group, names in WRITTEN.items()
        for name in names
    }

    def restore():
        for (group, name), values in saved.items():
            getattr(groups[group], name).from_numpy(values)

    args = (pool.bodies, pool.manifolds, pool.prepared, ctx.n_pairs, ctx.n_bodies, ctx.h)
    sweeps = {
        "warm start (a body's pairs)": lambda: _warm_start(
            pool.model, pool.bodies, pool.manifolds, pool.prepared, ctx.n_slots, ctx.n_bodies
        )
    }
    if solver == "soft_step":
        sweeps["solve"] = lambda: _soft_sweep(*args, True)
        sweeps["relax"] = lambda: _soft_sweep(*args, False)
    else:
        sweeps["velocity pass"] = lambda: _velocity_sweep(*args)
    best = {name: float("inf") for name in sweeps}
    for sweep in sweeps.values():  # compiled before the timing
        restore()
        sweep()
    for _ in range(rounds):
        for name, sweep in sweeps.items():
            restore()
            ti.sync()
            start = time.perf_counter()
            sweep()
            ti.sync()
            best[name] = min(best[name], time.perf_counter() - start)
    restore()
    backend = runtime.ensure_initialized()
    pairs = ctx.n_pairs
    points = int(np.asarray(pool.manifolds.point_count.to_numpy()[:pairs]).sum())
    return [
        {
            "date": datetime.date.today().isoformat(),
            "device": device_name(backend),
            "backend": backend,
            "scene": scene_name,
            "solver": solver,
            "bodies": ctx.n_slots,
            "pairs": pairs,
            "contact_points": points,
            "sweep": name,
            "rounds": rounds,
            "best_ms": round(seconds * 1e3, 4),
            "ns_per_pair": round(seconds * 1e9 / max(pairs, 1), 1),
            "ns_per_point": round(seconds * 1e9 / max(points, 1), 1),
        }
        for name, seconds in best.items()
    ]


def main(argv=None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scene", choices=("large_pyramid", "many_pyramids"), default="large_pyramid"
    )
    parser.add_argument("--arch", default="cpu")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--quick", action="store_true", help="a tiny pyramid, 2 rounds")
    parser.add_argument("--results", default=None, help="folder for the CSV")
    args = parser.parse_args(argv)
    runtime.ensure_initialized(args.arch)
    rounds = 2 if args.quick else args.rounds
    rows = []
    for solver in ("soft_step", "xpbd"):
        rows += measure(build(args.scene, solver, args.quick), args.scene, rounds)
    print(
        f"one sweep over the contacts, one thread, best of {rounds}, on "
        f"{rows[0]['device']} ({rows[0]['backend']})"
    )
    print_table(
        [
            {
                key: row[key]
                for key in (
                    "scene",
                    "solver",
                    "sweep",
                    "pairs",
                    "contact_points",
                    "best_ms",
                    "ns_per_pair",
                    "ns_per_point",
                )
            }
            for row in rows
        ]
    )
    save_csv(rows[0]["backend"], "contact_sweep", rows, args.results)
    return rows


if __name__ == "__main__":
    main()
