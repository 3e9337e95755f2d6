"""Env-steps per second of fx2d/Levels-v0 beside Jax2D (the engine Kinetix runs on).

    python -m benchmarks.levels [--arch cpu] [--envs 16,256,1024] [--steps 50] [--results DIR]

Columns, for each env count:

- fx2d env: LevelsVectorEnv.step with random actions: the motors' targets, one
  scene.step, the observation (state readback, an 8-ray lidar per world), rewards and the
  autoresets that come due (new levels written into the scene);
- fx2d physics: scene.step alone, the same scene;
- jax2d physics: Jax2D's PhysicsEngine.step, vmapped over the envs and jitted, on jax's CPU
  backend, timed after a warm-up (its compile), over levels of the same size built with
  Jax2D's own scene API: the first 16 of fx2d's generated levels (seed 0), repeated over
  the envs, each with its 6 static boxes (fixated), loose boxes, circles and pentagons, a
  chassis and two motored wheels (13 polygon slots of up to 5 vertices, 5 circle slots, 2
  joints; slots a level leaves out inactive, as Kinetix pads its levels).

What differs: Jax2D steps once per dt with num_solver_iterations impulse iterations (set
here to fx2d's substeps); fx2d takes `substeps` XPBD substeps per step. The Jax2D column is
physics only (no observation, lidar, reward or reset); compare it with the fx2d physics
column, and the fx2d env column for what a learning agent gets. Without jax2d installed
(the `bench` extra) the Jax2D column is skipped, and the run says so. Saves
benchmarks/results/<device>/levels.csv (device, backend, engine, bodies, substeps, envs,
env_steps_per_s).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import taichi as ti

from .common import RESULTS, device_name, print_table, save_csv

ENV_COUNTS = (16, 256, 1024)
#: Distinct levels built in Jax2D (repeated over the envs).
JAX2D_LEVELS = 16


def time_fx2d(num_envs: int, arch: str, steps: int, substeps: int) -> tuple[float, float, int]:
    """(env-steps/s of the env, env-steps/s of scene.step alone, bodies per world)."""
    from fx2d_gpu.envs.levels import LevelsVectorEnv

    env = LevelsVectorEnv(num_envs, arch=arch, substeps=substeps)
    env.reset(seed=0)
    actions = np.random.default_rng(0).uniform(-1.0, 1.0, (steps + 5, num_envs, 2))
    for a in actions[:5]:  # warm-up: compiles, first resets
        env.step(a)
    start = time.perf_counter()
    for a in actions[5:]:
        env.step(a)
    ti.sync()
    env_rate = steps * num_envs / (time.perf_counter() - start)
    start = time.perf_counter()
    for _ in range(steps):
        env.scene.step(env.dt)
    ti.sync()
    physics_rate = steps * num_envs / (time.perf_counter() - start)
    bodies = env.scene.n_bodies
    env.close()
    return env_rate, physics_rate, bodies


def jax2d_available() -> bool:
    try:
        import jax  # noqa: F401
        import jax2d.engine  # noqa: F401  (jax2d needs chex too)
    except ImportError:
        return False
    return True


def _jax2d_levels(substeps: int):
    """(engine, params, a batch of JAX2D_LEVELS states): fx2d's generated levels built with
    Jax2D's scene API."""
    import jax
    import jax.numpy as jnp
    from jax2d.engine import PhysicsEngine, create_empty_sim
    from jax2d.scene import (
        add_circle_to_scene,
        add_polygon_to_scene,
        add_rectangle_to_scene,
        add_revolute_joint_to_scene,
    )
    from jax2d.sim_state import SimParams, StaticSimParams

    from fx2d_gpu.envs import levels as lv

    static = StaticSimParams(
        num_polygons=lv.MAX_TERRAIN + lv.MAX_BOXES + lv.MAX_POLYGONS + 1,
        num_circles=lv.MAX_CIRCLES + 2,
        num_joints=2,
        num_thrusters=1,
        max_polygon_vertices=lv.POLYGON_VERTICES,
        num_solver_iterations=substeps,
        num_static_fixated_polys=lv.MAX_TERRAIN,
    )
    params = SimParams(dt=1.0 / 50.0, clip_position=100.0)
    engine = PhysicsEngine(static)
    streams = lv.WorldStreams(JAX2D_LEVELS)  # the worlds of an fx2d env reset with seed=0
    worlds = np.arange(JAX2D_LEVELS)
    streams.seed(worlds, worlds.astype(np.uint64))
    draws = streams.uniform(worlds, lv.LEVEL_DRAWS)
    batch = lv.generate_levels(draws)
    states = []
    for i in range(JAX2D_LEVELS):  # a few levels, built once
        level = batch.level(i)
        state = create_empty_sim(static, add_floor=False, add_walls_and_ceiling=False)
        for x, y, w, h, angle in level.terrain:
            state, _ = add_rectangle_to_scene(
                state, static, jnp.array([x, y]), jnp.array([w, h]), angle, fixated=True
            )
        for x, y, w, h, angle in level.boxes:
            state, _ = add_rectangle_to_scene(
                state, static, jnp.array([x, y]), jnp.array([w, h]), angle, density=lv.DENSITY
            )
        for (x, y, angle), outline in zip(level.polygons, level.polygon_vertices, strict=True):
            state, _ = add_polygon_to_scene(
                state,
                static,
                jnp.array([x, y]),
                jnp.array(outline),
                lv.POLYGON_VERTICES,
                angle,
                density=lv.DENSITY,
            )
        for x, y, radius in level.circles:
            state, _ = add_circle_to_scene(
                state, static, jnp.array([x, y]), radius, density=lv.DENSITY
            )
        start = level.start
        state, (_, chassis) = add_rectangle_to_scene(
            state, static, jnp.array(start), jnp.array(lv.CHASSIS_SIZE), density=8.0
        )
        for side in (-1.0, 1.0):
            axle = np.array([side * lv.WHEEL_X, lv.WHEEL_Y])
            state, (_, wheel) = add_circle_to_scene(
                state, static, jnp.array(start + axle), lv.WHEEL_RADIUS, density=2.4
            )
            state, _ = add_revolute_joint_to_scene(
                state, static, chassis, wheel, jnp.array(axle), jnp.zeros(2), motor_on=True
            )
        states.append(state)
    stacked = jax.tree.map(lambda *leaves: jnp.stack(leaves), *states)
    return engine, params, stacked, static


def time_jax2d(num_envs: int, steps: int, substeps: int) -> float:
    """Env-steps/s of Jax2D's physics step over num_envs levels (vmap, jit)."""
    import jax
    import jax.numpy as jnp

    engine, params, levels, static = _jax2d_levels(substeps)
    rows = jnp.arange(num_envs) % JAX2D_LEVELS
    states = jax.tree.map(lambda leaf: leaf[rows], levels)
    step = jax.jit(jax.vmap(lambda s, a: engine.step(s, params, a)[0]))
    rng = np.random.default_rng(0)
    n_actions = static.num_joints + static.num_thrusters
    actions = [
        jnp.asarray(rng.uniform(-1.0, 1.0, (num_envs, n_actions)), jnp.float32) for _ in range(8)
    ]
    for a in actions[:3]:  # warm-up: the compile
        states = step(states, a)
    jax.block_until_ready(states)
    start = time.perf_counter()
    for i in range(steps):
        states = step(states, actions[i % len(actions)])
    jax.block_until_ready(states)
    return steps * num_envs / (time.perf_counter() - start)


def run(counts=ENV_COUNTS, arch: str = "cpu", steps: int = 50, substeps: int = 8, results=None):
    """Time every engine at every env count; print the table and save the CSV."""
    from fx2d_gpu.device import runtime

    have_jax2d = jax2d_available()
    if not have_jax2d:
        print(
            "jax2d is not installed (pip install jax2d jax, or the bench extra): "
            "the Jax2D column is skipped"
        )
    rows = []
    for n in counts:
        env_rate, physics_rate, bodies = time_fx2d(n, arch, steps, substeps)
        backend = runtime.backend_name() or arch
        device = device_name(backend)
        common = {"device": device, "backend": backend, "bodies": bodies, "substeps": substeps}
        rows.append({**common, "engine": "fx2d env", "envs": n, "env_steps_per_s": round(env_rate)})
        rows.append(
            {**common, "engine": "fx2d physics", "envs": n, "env_steps_per_s": round(physics_rate)}
        )
        if have_jax2d:
            import jax

            rate = time_jax2d(n, steps, substeps)
            rows.append(
                {
                    **common,
                    "backend": f"jax-{jax.default_backend()}",
                    "engine": "jax2d physics",
                    "envs": n,
                    "env_steps_per_s": round(rate),
                }
            )
    print_table(rows)
    path = save_csv(rows[0]["backend"], "levels", rows, results)
    print(f"saved {path}")
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="cpu", help="fx2d's Taichi backend (default cpu)")
    parser.add_argument("--envs", default=",".join(map(str, ENV_COUNTS)), help="env counts")
    parser.add_argument("--steps", type=int, default=50, help="timed steps per count")
    parser.add_argument("--substeps", type=int, default=8, help="fx2d substeps = jax2d iterations")
    parser.add_argument("--results", default=None, help=f"results folder (default {RESULTS})")
    args = parser.parse_args(argv)
    run([int(n) for n in args.envs.split(",")], args.arch, args.steps, args.substeps, args.results)


if __name__ == "__main__":
    main()
