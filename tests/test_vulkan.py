"""The GPU code path on this machine: Taichi's SPIR-V backend (what Vulkan and Metal GPUs
run) on a software Vulkan driver (Mesa's lavapipe), against the CPU backend; on a machine
with an NVIDIA GPU, Taichi's CUDA backend against it too (skipped without one).

Taichi runs one backend per process, so each side runs in a child process. Skipped, with the
reason, where no Vulkan driver is installed (.ci/run installs Mesa's). Mesa 22.3 (Debian 12's
own) runs any atomic inside an inner loop wrong, so the broad phase finds no pairs there;
.ci/run installs Mesa 25 from bookworm-backports.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fx2d_gpu.device import runtime

from .helpers import collect_only

#: Whole scenes stepped on the Vulkan backend in child processes: where the only Vulkan
#: device is a software one (Mesa's lavapipe), minutes a test of compiling shaders on the
#: CPU, so there they join the slow tier (tests/conftest.py); .ci/run runs them in its
#: Vulkan lane.
VULKAN_SCENES = pytest.mark.vulkan_scenes

#: Steps of each scene, few: the software driver runs ~50 kernels a step at ~1-3 ms each.
#: Rain stops at 30, once all 48 bodies have landed: at step 31 a ball strikes a box of the
#: second world, which rocks on its edges for seven steps, and where the rocking ends
#: depends on the last bits of the first impacts (the two backends 0.6 mm apart at step 40
#: with one build of the velocity pass, 15 mm with an equivalent one; 7e-6 m at step 30).
STEPS = {
    "pyramid": 40,
    "rain": 30,
    "batched_small": 30,
    "joint_grid": 30,
    "pile": 30,
    "cart_poles": 30,
}

_CHILD = """
import json, sys
import numpy as np
import fx2d_gpu as fx
from fx2d_gpu import scenes
from fx2d_gpu.device import runtime

arch, steps = sys.argv[1], json.loads(sys.argv[2])
backend = runtime.ensure_initialized(arch)
if backend != {"vulkan": "vulkan", "cuda": "cuda"}.get(arch, "x64"):
    print("BACKEND", backend)
    sys.exit(3)


def rain(arch):
    scene = fx.Scene(n_worlds=2, arch=arch, gravity=(0.0, -9.81))
    scene.add_box((0.0, -0.5), (12.0, 1.0), mass=0.0, static_friction=0.5,
                  dynamic_friction=0.4)
    for i in range(24):
        x, y = -4.0 + 0.7 * (i % 12), 1.0 + 0.8 * (i // 12)
        if i % 2:
            scene.add_circle((x, y), 0.25, elasticity=0.3, static_friction=0.5,
                             dynamic_friction=0.4)
        else:
            scene.add_box((x, y), (0.4, 0.3), angle=0.1 * i, static_friction=0.5,
                          dynamic_friction=0.4)
    state = scene.get_state()
    state.velocity[1, 1:, 0] = 1.5  # the second world differs
    scene.set_state(state)
    return scene


builders = {
    "pyramid": lambda: scenes.pyramid(6, arch=arch),
    "rain": lambda: rain(arch),
    "batched_small": lambda: scenes.batched_small(5, arch=arch),
    "joint_grid": lambda: scenes.joint_grid(4, 4, arch=arch),
    "pile": lambda: scenes.pile(600, arch=arch),
    # No two bodies may touch: steps without contacts (StepOptions.contactless_step).
    "cart_poles": lambda: scenes.cart_poles(4, arch=arch),
}
out = {}
for name, n in steps.items():
    scene = builders[name]()
    for _ in range(n):
        scene.step(1.0 / 60.0)
    s = scene.get_state()
    out[name + ".position"] = s.position
    out[name + ".angle"] = s.angle
    out[name + ".velocity"] = s.velocity
    out[name + ".pairs"] = np.array([len(scene.candidate_pairs())])
    if scene.n_joints:
        out[name + ".joint_position"] = scene.joint_state().position
np.savez(sys.argv[3], **out)
"""


def _run(arch, path, steps=STEPS):
    return subprocess.run(
        [sys.executable, "-c", _CHILD, arch, json.dumps(steps), str(path)],
        capture_output=True,
        text=True,
        timeout=1500,
    )


@pytest.fixture(scope="module")
def vulkan_devices():
    devices = runtime.probe_vulkan_device_types()
    if not devices:
        pytest.skip(
            "no Vulkan driver on this machine (install Mesa's mesa-vulkan-drivers, "
            "as .ci/run does, to test the GPU code path)"
        )
    return devices


def _compare_with_cpu(arch, tmp_path):
    """The STEPS scenes stepped on `arch` and on the CPU backend, within float tolerance."""
    gpu = _run(arch, tmp_path / f"{arch}.npz")
    assert gpu.returncode == 0, gpu.stdout[-2000:] + gpu.stderr[-4000:]
    cpu = _run("cpu", tmp_path / "cpu.npz")
    assert cpu.returncode == 0, cpu.stderr[-4000:]
    got, expected = np.load(tmp_path / f"{arch}.npz"), np.load(tmp_path / "cpu.npz")
    assert sorted(got.files) == sorted(expected.files)
    for key in expected.files:
        name, what = key.split(".")
        # The same float32 arithmetic, compiled by different compilers (SPIR-V through
        # Mesa's LLVM, PTX with fused multiply-adds, x64 through Taichi's): rounding
        # differs, and impacts amplify it over a few dozen steps (measured on Vulkan: pile
        # 0.4 mm, 5.6e-4 rad, 1.9 cm/s; the others far less). A wrong stage is off by
        # centimetres and metres per second.
        tolerance = {"pairs": 0, "angle": 1e-2, "velocity": 5e-2}.get(what, 2e-3)
        difference = np.abs(got[key] - expected[key]).max()
        assert difference <= tolerance, f"{key}: {arch} and CPU differ by {difference}"
    # The scenes did something: bodies landed and touch.
    assert expected["rain.pairs"][0] > 0 and expected["pile.pairs"][0] > 0
    assert expected["rain.position"][:, 1:, 1].min() < 0.9


@VULKAN_SCENES
def test_scenes_on_vulkan_match_the_cpu_backend(vulkan_devices, tmp_path):
    _compare_with_cpu("vulkan", tmp_path)


_IN_FLIGHT = """
import sys
import numpy as np
from fx2d_gpu.device import launching, runtime
backend = runtime.ensure_initialized(sys.argv[1])
from tests.test_in_flight import FLYING, ONE_BY_ONE, _closing_hub, _seen, _steps
from tests.test_small_worlds_one_launch import _piles
from tests.helpers import COLORED_LIKE_GENERAL, DT
runs = []
for options in (FLYING, ONE_BY_ONE):
    seen = _steps(_piles(sys.argv[1], "xpbd", n_worlds=16, **options), 80)[-1]
    hub = _closing_hub({**COLORED_LIKE_GENERAL, **options}, arch=sys.argv[1])
    for _ in range(24):
        hub.step(DT)
    runs.append(seen + _seen(hub))
flown = launching.kernel_launches()["fx2d_gpu.physics.solver.fused._worlds_in_flight"]
same = all(np.array_equal(a, b) for a, b in zip(*runs, strict=True))
print(backend, flown, same)
"""


def _in_flight_bitwise(arch: str, child: str = _IN_FLIGHT, least_flown: int = 78 + 23):
    """A child (_IN_FLIGHT, _TEAM_IN_FLIGHT) on `arch`: steps in flight bitwise as one by
    one there, at least `least_flown` of them launched in flight."""
    run = subprocess.run(
        [sys.executable, "-c", child, arch], capture_output=True, text=True, timeout=1200
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    backend, flown, same = run.stdout.split()[-3:]
    assert backend == arch and int(flown) >= least_flown, run.stdout[-500:]
    assert same == "True", run.stdout[-2000:]


@VULKAN_SCENES
def test_steps_in_flight_on_vulkan_bitwise_as_one_by_one(vulkan_devices):
    """Steps in flight (solver/in_flight.py, a GPU backend's default) on the SPIR-V path:
    piling worlds read only at the end, and a flight that stops short on an overflowing
    colour, bit for bit as the same steps taken one by one on the same backend."""
    _in_flight_bitwise("vulkan")


def test_steps_in_flight_on_cuda_bitwise_as_one_by_one():
    if not runtime.gpu_backend_available("cuda"):
        pytest.skip("no CUDA GPU on this machine")
    _in_flight_bitwise("cuda")


_TEAM_IN_FLIGHT = """
import sys
import numpy as np
from fx2d_gpu.device import launching, runtime
backend = runtime.ensure_initialized(sys.argv[1])
import tests.test_team_in_flight as t
from fx2d_gpu import scenes
runs = []
for fly in (True, False):
    options = {"steps_in_flight": fly}
    hop = t._pyramid(options, arch=sys.argv[1])
    t._run(hop, 30)
    t._hop(hop)
    asleep = t._pyramid(options, base=9, sleep=True, arch=sys.argv[1])
    pile = scenes.build_scene(
        scenes.pile_layout(150), arch=sys.argv[1], solver="soft_step", step_options=options
    )
    runs.append([t._run(hop, 40), t._run(asleep, 300), t._run(pile, 200, read_every=50)])
flown = launching.kernel_launches()["fx2d_gpu.physics.solver.fused._team_in_flight"]
for name, a, b in zip(("hop", "asleep", "pile"), *runs, strict=True):
    apart = [i for i, (x, y) in enumerate(zip(a["seen"], b["seen"], strict=True))
             if not np.array_equal(x, y)]
    cache = {k: (v, b["cache"][k]) for k, v in a["cache"].items() if v != b["cache"][k]}
    if apart or cache:  # where flying and one by one part (test_in_flight._seen's items)
        print(name, "items apart:", apart, "of", len(a["seen"]), "cache apart:", cache)
same = all(
    all(np.array_equal(x, y) for x, y in zip(a["seen"], b["seen"], strict=True))
    and a["cache"] == b["cache"]
    for a, b in zip(*runs, strict=True)
)
print(backend, flown, same)
"""


def test_team_steps_in_flight_on_cuda_bitwise_as_one_by_one():
    """A team's kept steps in flight (solver/in_flight.py) on the GPU team:
    tests/test_team_in_flight.py's scenes (a hop through the report's backoff, a pyramid
    falling asleep, a pile poured), bit for bit as the same steps taken one by one."""
    if not runtime.gpu_backend_available("cuda"):
        pytest.skip("no CUDA GPU on this machine")
    _in_flight_bitwise("cuda", _TEAM_IN_FLIGHT, least_flown=100)


@VULKAN_SCENES
def test_team_steps_in_flight_on_vulkan_bitwise_as_one_by_one(vulkan_devices):
    """The same on a Vulkan GPU (software Vulkan runs no GPU team: gpu_team.threads_for)."""
    if not set(vulkan_devices) & runtime.VULKAN_GPU_TYPES:
        pytest.skip("no Vulkan GPU on this machine (software Vulkan runs no GPU team)")
    _in_flight_bitwise("vulkan", _TEAM_IN_FLIGHT, least_flown=100)


_INTERLEAVED = """
import sys
import numpy as np
from fx2d_gpu.device import launching, runtime
backend = runtime.ensure_initialized(sys.argv[1])
from tests.test_small_worlds_one_launch import _piles, _run
runs = []
for interleave in (True, False):
    scene = _piles(sys.argv[1], "xpbd", n_worlds=64, interleave_small_worlds=interleave)
    runs.append(_run(scene, read_each=False)[0])
flown = launching.kernel_launches()["fx2d_gpu.physics.solver.fused._worlds_in_flight"]
same = all(
    np.array_equal(x, y) for a, b in zip(*runs, strict=True) for x, y in zip(a, b, strict=True)
)
print(backend, flown, same)
"""


@VULKAN_SCENES
def test_small_worlds_interleaved_on_vulkan_bitwise_as_not(vulkan_devices):
    """Small worlds' state interleaved (StepOptions.interleave_small_worlds, a GPU
    backend's default: solver/interleaved.py) on the SPIR-V path: 64 piling worlds, 100
    steps in flight, the last step's state, contacts and events bit for bit as with the
    pair list's and the slots' own layout. (Mesa's lavapipe runs a workgroup's invocations
    a SIMD chunk after another, each to its end, so two worlds given the same entries
    would pass here, as they did when tried: tests/test_interleaved.py checks the layout;
    on a GPU, whose warps run side by side, the CUDA test would see them.)"""
    _in_flight_bitwise("vulkan", _INTERLEAVED, least_flown=2 * 90)


def test_small_worlds_interleaved_on_cuda_bitwise_as_not():
    if not runtime.gpu_backend_available("cuda"):
        pytest.skip("no CUDA GPU on this machine")
    _in_flight_bitwise("cuda", _INTERLEAVED, least_flown=2 * 90)


_BY_STAGE = """
import sys
import numpy as np
from fx2d_gpu.device import launching, runtime
backend = runtime.ensure_initialized(sys.argv[1])
from benchmarks.launches import barrier_generation
from tests.test_small_worlds_one_launch import _piles, _run
runs, met = [], []
# By stage, by stage with its colours by turns, a world a thread (the reference).
for by_stage, turns in ((True, False), (True, True), (False, False)):
    # gpu_team_slots 0: CUDA's grid team (a block a multiprocessor), not one block.
    scene = _piles(sys.argv[1], "xpbd", n_worlds=64, color_small_worlds=True,
                   small_worlds_by_stage=by_stage, colors_by_turns=turns, gpu_team_slots=0)
    scene.step_context()
    before = barrier_generation(scene)
    runs.append(_run(scene, read_each=False)[0])
    met.append(barrier_generation(scene) - before)
flown = launching.kernel_launches()["fx2d_gpu.physics.solver.fused._worlds_in_flight"]
# (each run's steps, each step's arrays: np.array_equal of two tuples of arrays of
# different shapes is False, whatever they hold)
same = [
    all(
        np.array_equal(x, y)
        for ours, theirs in zip(run, runs[-1], strict=True)
        for x, y in zip(ours, theirs, strict=True)
    )
    for run in runs
]
print("barriers met:", met, "bitwise as a world a thread:", same)
print(backend, flown, met[0] > 0 and met[1] > 0 and all(same))
"""


def test_small_worlds_by_stage_on_cuda_bitwise_as_a_world_a_thread():
    """Small worlds' substeps by stage (StepOptions.small_worlds_by_stage) on CUDA's grid
    team, and with their colours by turns (colors_by_turns): 64 piling worlds, 100 steps in
    flight, the last step's state, contacts and events bit for bit as a world a thread in
    the same colours, the team's barriers met (their counts printed: a grid team runs a
    colour of at most a block's threads on its first block, so at 64 worlds by turns may
    meet as often as not) (tests/test_small_worlds_by_stage.py: the same on a CPU team,
    every step)."""
    if not runtime.gpu_backend_available("cuda"):
        pytest.skip("no CUDA GPU on this machine")
    _in_flight_bitwise("cuda", _BY_STAGE, least_flown=3 * 90)


_BY_BLOCK = """
import sys
import numpy as np
from fx2d_gpu.device import launching, runtime
backend = runtime.ensure_initialized(sys.argv[1])
from fx2d_gpu.physics.solver.plan import current_plan
from tests.test_small_worlds_one_launch import _piles, _run
runs = []
# A block of worlds at a time (64 worlds of 10 body slots: blocks of 256 threads, as many
# worlds a block as give each thread a body slot and a constraint), then a world a thread
# (the reference).
for by_block in (True, False):
    scene = _piles(sys.argv[1], "xpbd", n_worlds=64, color_small_worlds=True,
                   small_worlds_by_block=by_block)
    assert current_plan(scene.step_context()).worlds_by_block == by_block
    runs.append(_run(scene, read_each=False)[0])
flown = launching.kernel_launches()["fx2d_gpu.physics.solver.fused._worlds_in_flight"]
same = all(
    np.array_equal(x, y) for a, b in zip(*runs, strict=True) for x, y in zip(a, b, strict=True)
)
print(backend, flown, same)
"""


@VULKAN_SCENES
def test_small_worlds_by_block_on_vulkan_bitwise_as_a_world_a_thread(vulkan_devices):
    """Small worlds' substeps a block of worlds at a time (StepOptions.small_worlds_by_block)
    on the SPIR-V path, where a block's threads meet at the workgroup's barrier: 64 piling
    worlds in 3 blocks, 100 steps in flight, the last step's state, contacts and events
    bit for bit as a world a thread in the same colours (tests/test_small_worlds_by_block.py:
    the same on a CPU, whose block is one thread)."""
    _in_flight_bitwise("vulkan", _BY_BLOCK, least_flown=2 * 90)


def test_small_worlds_by_block_on_cuda_bitwise_as_a_world_a_thread():
    if not runtime.gpu_backend_available("cuda"):
        pytest.skip("no CUDA GPU on this machine")
    _in_flight_bitwise("cuda", _BY_BLOCK, least_flown=2 * 90)


def test_scenes_on_cuda_match_the_cpu_backend(tmp_path):
    if not runtime.gpu_backend_available("cuda"):
        pytest.skip("no CUDA GPU on this machine")
    _compare_with_cpu("cuda", tmp_path)


def test_auto_never_takes_a_software_vulkan_device_for_a_gpu(vulkan_devices):
    if set(vulkan_devices) & runtime.VULKAN_GPU_TYPES:
        pytest.skip(f"this machine has a Vulkan GPU (device types {vulkan_devices})")
    code = (
        "from fx2d_gpu.device import runtime; print(runtime.ensure_initialized('auto')); "
        "print(runtime.on_cpu())"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split()[-2:] == ["x64", "True"], run.stdout
    assert "no GPU backend available" in run.stderr


def test_the_default_tier_leaves_the_scenes_out_only_on_software_vulkan():
    """The tests marked vulkan_scenes: out of the default tier (pyproject's -m "not slow")
    where the only Vulkan devices are software ones, in it elsewhere (a Vulkan GPU runs
    them in seconds; without any Vulkan driver they skip, saying why)."""
    marked = {
        name
        for name, test in globals().items()
        if name.startswith("test_")
        and any(mark.name == "vulkan_scenes" for mark in getattr(test, "pytestmark", []))
    }
    run = collect_only(__file__, cwd=Path(__file__).resolve().parents[1])
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    collected = {line.split("::")[1] for line in run.stdout.splitlines() if "::" in line}
    assert len(marked) == 5 and "test_mapping_counts_are_the_processs_own" in collected
    if runtime.software_vulkan_only():
        assert not marked & collected, marked & collected
    else:
        assert marked <= collected, marked - collected


def test_running_out_of_memory_mappings_raises_before_the_step():
    # Mesa's software Vulkan driver keeps a memory mapping per kernel launch; at Linux's
    # vm.max_map_count the process would crash (runtime.check_mapping_headroom). Here the
    # counts are given, on the CPU backend: the check must raise before the step runs,
    # leaving the scene as it was, and only on a software Vulkan device.
    from fx2d_gpu import scenes

    scene = scenes.pyramid(3, arch="cpu")
    scene.step(1 / 60)
    before = scene.get_state().position.copy()
    counts = iter([(40_000, 65_530), (60_000, 65_530)])  # +20,000 in MAPPING_CHECK_CALLS
    watch = runtime.MappingWatch(count=lambda: next(counts), software_vulkan=True)
    with runtime.watching_mappings(watch):
        assert runtime.mapping_watch() is watch
        for _ in range(runtime.MAPPING_CHECK_CALLS):  # the first count: room for twice as many
            scene.step(1 / 60)
        steps, positions = scene.step_count, scene.get_state().position.copy()
        with pytest.raises(RuntimeError, match="vm.max_map_count"):
            scene.step(1 / 60)
    assert scene.step_count == steps
    np.testing.assert_array_equal(scene.get_state().position, positions)
    assert not np.array_equal(positions, before)
    # Other backends never count (the counter, spent, would raise StopIteration).
    with runtime.watching_mappings(runtime.MappingWatch(count=lambda: next(counts))):
        scene.step(1 / 60)
    assert scene.step_count == steps + 1
    assert runtime.mapping_watch() is not watch  # the process's again


def test_mapping_counts_are_the_processs_own():
    counted = runtime.count_mappings()
    if counted is None:
        pytest.skip("no /proc on this system")
    held, limit = counted
    with open("/proc/self/maps") as maps:
        listed = len(maps.readlines())
    assert abs(held - listed) <= 8 and 0 < held < limit
