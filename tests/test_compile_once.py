"""Many scenes in one process share compiled kernels (the device pool)."""

import json
import subprocess
import sys

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import device


def build_and_step(arch, n_bodies, n_worlds, seed):
    rng = np.random.default_rng(seed)
    scene = fx.Scene(n_worlds=n_worlds, arch=arch)
    scene.add_box((0, -1), (50, 1), mass=0)
    # Circles and boxes at random, added in bulk (the same bodies as one by one, to the bit:
    # tests/test_bulk_add.py), so that 49 scenes of up to 2,000 bodies build in seconds.
    positions = rng.uniform([-20, 0], [20, 20], size=(n_bodies, 2))
    circles = rng.random(n_bodies) < 0.5
    n_circles, n_boxes = int(circles.sum()), int((~circles).sum())
    if n_circles:
        scene.add_circles(positions[circles], rng.uniform(0.1, 0.5, size=n_circles))
    if n_boxes:
        scene.add_boxes(
            positions[~circles],
            rng.uniform(0.1, 1.0, size=(n_boxes, 2)),
            angle=rng.uniform(-3, 3, size=n_boxes),
        )
    scene.contacts()
    scene.set_state(scene.get_state())
    scene.apply_force(1, (1.0, 0.0))
    scene.step(1 / 60)
    scene.contacts()
    return scene


def hub_scene(arch, extra=0):
    """A scene that takes every path once: MAX_COLORS + 9 small circles touching one hub
    overflow the colours. `extra` apart circles make it large (on the CPU: the kernels'
    parallel variant)."""
    scene = fx.Scene(gravity=(0, 0), arch=arch)
    scene.add_circle((0, 0), 1.0)
    for angle in np.linspace(0, 2 * np.pi, device.MAX_COLORS + 9, endpoint=False):
        scene.add_circle((1.07 * np.cos(angle), 1.07 * np.sin(angle)), 0.08)
    for i in range(extra):
        scene.add_circle((10.0 + i % 40, 10.0 + i // 40), 0.2)
    scene.contacts()
    scene.set_state(scene.get_state())
    scene.apply_force(0, (1.0, 0.0))
    scene.step(1 / 60)
    assert scene.n_overflow > 0
    return scene


@pytest.mark.slow  # 55 scenes of up to 8,000 body slots (~15-45 s)
def test_fifty_scenes_compile_once(arch):
    # The first scenes may compile: one of each path. On the CPU, scenes of few body slots
    # or few small worlds run the kernels' serial variant (device.SERIAL_SLOTS,
    # SERIAL_WORLDS); worlds of few bodies take the small-world path
    # (solver/context.BY_WORLD_MAX_BODIES) unless their colouring overflows (the hubs).
    hub_scene(arch)
    hub_scene(arch, extra=device.SERIAL_SLOTS)
    build_and_step(arch, 20, 1, seed=100)  # small worlds, serial loops
    # Small worlds, parallel loops (more of them than device.SERIAL_WORLDS).
    build_and_step(arch, 20, device.SERIAL_WORLDS + 1, seed=101)
    build_and_step(arch, 100, 1, seed=102)  # a large world, serial loops
    # A large world, parallel loops (on the CPU: a team of threads, solver/team.py).
    build_and_step(arch, device.SERIAL_SLOTS + 100, 1, seed=103)
    # Two large worlds whose 42 bodies in the air have no pair: nothing to colour
    # (coloring._flag_bodies). A world of two bodies: too few for the report's sleep pass
    # by world (sleep._label_by_world on its own).
    build_and_step(arch, 42, 2, seed=1)
    build_and_step(arch, 1, 1, seed=0)
    compiled = device.compiled_kernel_count()
    assert compiled > 0
    sizes = np.linspace(1, 2000, 49).astype(int)
    for i, n in enumerate(sizes):
        build_and_step(arch, int(n), 1 + i % 4, seed=i)
    hub_scene(arch)
    assert device.compiled_kernel_count() == compiled


@pytest.mark.slow  # two child processes, the first compiling a step from an empty cache
@pytest.mark.own_processes
def test_second_process_starts_from_the_offline_cache(arch, tmp_path):
    # Same script twice with a fresh cache directory: the second run must reuse it.
    script = (
        "import time, taichi as ti, fx2d_gpu as fx\n"
        "import fx2d_gpu.device.runtime as rt\n"
        f"rt.ensure_initialized({arch!r})\n"
        "s = fx.Scene(arch=%r)\n"
        % arch
        + "s.add_box((0, -1), (10, 1), mass=0); s.add_circle((0, 1), 0.5)\n"
        "t = time.perf_counter(); s.step(1 / 60); print(time.perf_counter() - t)\n"
    )
    env = {"TI_OFFLINE_CACHE_FILE_PATH": str(tmp_path)}
    import os

    env = {**os.environ, **env}
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", script], env=env, check=True, capture_output=True, text=True
            ).stdout.split()[-1]
        )
        for _ in range(2)
    ]
    assert any(tmp_path.iterdir()), "nothing was written to the offline cache"
    assert times[1] < times[0], times


@pytest.mark.slow  # a scale test: 6,000 worlds in a fresh process (~70 s on 2 busy cores)
@pytest.mark.own_processes
def test_a_scene_ten_times_the_last_compiles_nothing(arch):
    # A fresh process: 600 small worlds (4,800 body slots; more than device.SERIAL_WORLDS,
    # so the kernels' parallel variant, as for the larger scene) make the first pool, with
    # headroom (residency.GROWTH_HEADROOM); a second such scene compiles what switching
    # scenes takes. 6,000 worlds (48,000 slots, 10x) then fit the pool: nothing compiles
    # again and the pool does not grow.
    script = (
        "import json, fx2d_gpu as fx\n"
        "from fx2d_gpu import device, scenes\n"
        "from fx2d_gpu.device import residency\n"
        f"first = scenes.batched_small(600, arch={arch!r}); first.step(1 / 60)\n"
        f"other = scenes.batched_small(600, arch={arch!r}); other.step(1 / 60)\n"
        "capacity = residency.current_pool().capacities['bodies']\n"
        "compiled = device.compiled_kernel_count()\n"
        f"second = scenes.batched_small(6000, arch={arch!r}); second.step(1 / 60)\n"
        "now = residency.current_pool().capacities['bodies']\n"
        "print(json.dumps({'capacity': capacity, 'compiled': compiled, 'now': now,\n"
        "                  'more': device.compiled_kernel_count() - compiled}))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], check=True, capture_output=True, text=True
    ).stdout
    result = json.loads(out.strip().splitlines()[-1])
    assert 600 > device.SERIAL_WORLDS and result["capacity"] >= 10 * 600 * 8
    assert result["now"] == result["capacity"] and result["compiled"] > 0
    assert result["more"] == 0, result


def test_a_stale_offline_cache_lock_is_cleared_and_the_cache_written(arch, tmp_path):
    # A lock file left by a process that ended while holding it makes Taichi skip writing
    # its offline cache in every later process; fx2d_gpu removes one older than
    # runtime.STALE_LOCK_SECONDS when it starts Taichi, and leaves a fresh one alone.
    import os
    import time

    from fx2d_gpu.device import runtime

    stale = tmp_path / "ticache.lock"
    stale.touch()
    old = time.time() - 2 * runtime.STALE_LOCK_SECONDS
    os.utime(stale, (old, old))
    # (One small kernel, get_state's gather, is enough to write a cache: a whole step would
    # compile every stage from an empty cache, 15 s here.)
    script = (
        "import fx2d_gpu as fx\n"
        f"s = fx.Scene(arch={arch!r}); s.add_circle((0, 0), 0.5); s.get_state()\n"
    )
    env = {**os.environ, "TI_OFFLINE_CACHE_FILE_PATH": str(tmp_path)}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True)
    assert not stale.exists()
    assert any(p.suffix != ".lock" for p in tmp_path.iterdir()), "no cache written"
    fresh = tmp_path / "other.lock"
    fresh.touch()
    assert runtime.clear_stale_cache_locks(str(tmp_path)) == []
    assert fresh.exists()


def test_the_offline_cache_holds_more_than_taichis_default_cap(arch):
    # Taichi's default cap (100 MB) is below what the two test tiers compile: at each
    # process's exit its LRU clean evicted kernels the next run compiled again. The engine
    # starts Taichi with a cap of runtime.OFFLINE_CACHE_MAX_BYTES instead.
    import taichi as ti
    from taichi._lib import core

    from fx2d_gpu.device import runtime

    runtime.ensure_initialized(arch)
    taichi_default = core.CompileConfig().offline_cache_max_size_of_files
    cap = ti.lang.impl.current_cfg().offline_cache_max_size_of_files
    assert cap == runtime.OFFLINE_CACHE_MAX_BYTES >= 10 * taichi_default


def test_the_cpu_backend_compiles_without_taichis_thread_local_pass(arch):
    # runtime._CPU_OPTIONS: Taichi's make_thread_local pass took 11.5 s of a folded team
    # kernel's cold compile and rewrote nothing but the fault count's integer increment
    # (same sums in any order); GPU backends keep Taichi's default.
    import taichi as ti
    from taichi._lib import core

    from fx2d_gpu.device import runtime

    runtime.ensure_initialized(arch)
    taichi_default = core.CompileConfig().make_thread_local
    ours = ti.lang.impl.current_cfg().make_thread_local
    assert taichi_default is True
    assert ours is (not runtime.on_cpu())
