"""Small worlds' substeps by stage (StepOptions.small_worlds_by_stage, fused.BY_STAGE): the
small worlds' step in one launch keeps its broad phase, colouring and report a world a
thread, and hands its substeps to the step's team, whose threads share every stage over all
the worlds' items, colour after colour, meeting at the team's barrier (on CUDA the grid
team; here a CPU team of threads, the same kernel's loops). A colour's constraints share no
moving body, so solving them together in any order is solving them a world at a time in
colour order: every step must be bit for bit what a world a thread gives with the same
colours (StepOptions.color_small_worlds), which is the independent reference here."""

import subprocess
import sys

import numpy as np
import pytest

from fx2d_gpu import device, scenes
from fx2d_gpu.physics.solver import team

from .helpers import COLORED_LIKE_GENERAL
from .test_small_worlds_one_launch import _assert_same_steps, _piles, _run

#: A team of the threads the probe gives on every step (no duel trying a team of one, no
#: probe again): each step's substeps by stage.
ALWAYS_THE_TEAM = team.TeamTimings(
    reprobe_requests=10**9,
    reprobe_failed_requests=10**9,
    duel_slow=float("inf"),
    duel_steps=10**9,
    max_barrier_s=1.0,
)


def _chained_piles(arch, solver, **options):
    """_piles with a second bar hinged to the tip of the first: two joints a world at one
    body, of two colours, so the order their sweeps take matters."""
    scene = _piles(arch, solver, **options)
    bar = scene.n_bodies - 1
    tip = scene.add_box((6.9, 3.0), (1.2, 0.2), static_friction=0.6, dynamic_friction=0.5)
    scene.add_revolute_joint(bar, tip, anchor=(0.6, 0.0))
    return scene


@pytest.fixture(autouse=True)
def _cpu_only(arch):
    if arch != "cpu":
        pytest.skip("a CPU team's side; a GPU's grid team runs it in benchmarks/device_run.sh")


# XPBD (its joints' later sweep a world at a time, fused._world_joints) and the soft step
# with its colours by turns (StepOptions.colors_by_turns): a kernel each, for the suite's
# time; both solvers with and without turns stepped the same by hand (2026-12-05).
@pytest.mark.parametrize("solver, turns", [("xpbd", False), ("soft_step", True)])
def test_small_worlds_by_stage_step_bit_for_bit_as_a_world_a_thread(arch, solver, turns):
    """64 piling worlds (stacks, thrown circles, two bars hinged in a chain; they sleep, and
    a third are pushed awake at step 70), 100 steps in one launch each: states, contacts
    and events the same every step by stage as a world a thread, and the team met at its
    barrier at least once a colour pass of every substep. The team takes its body and
    joint slots as a GPU's does (device.team_items_taken("turns"): member, member + n_members,
    ...; the CPU's consecutive shares are every large world's team's, tested throughout)."""
    from benchmarks.launches import barrier_generation

    by_stage = _chained_piles(
        arch,
        solver,
        **COLORED_LIKE_GENERAL,
        small_worlds_by_stage=True,
        colors_by_turns=turns,
        team_timings=ALWAYS_THE_TEAM,
    )
    by_stage.step_context()  # (the pool, whose barrier counter is read)
    before = barrier_generation(by_stage)
    with device.team_items_taken("turns"):  # (read as the kernel compiles: its first step)
        stepped, _ = _run(by_stage)
    if team.status().step_threads < 2:  # (the last step's substeps' team)
        pytest.skip("this machine gave the scene no team of several threads")
    met = barrier_generation(by_stage) - before
    a_world_a_thread, _ = _run(_chained_piles(arch, solver, **COLORED_LIKE_GENERAL))
    _assert_same_steps(stepped, a_world_a_thread)
    # At least a barrier a colour pass of every substep (two passes a substep; asleep, a
    # world's step solves nothing but the team still meets).
    assert met >= 2 * len(stepped) * by_stage.substeps, met


def _cart_poles(arch):
    """8 cart-poles (no two bodies may touch: a step without contacts), their poles set
    swinging, 60 steps; their state."""
    scene = scenes.cart_poles(8, arch=arch, solver="xpbd")
    state = scene.get_state()
    state.angular_velocity[:, 2] = np.linspace(-2.0, 2.0, 8)
    scene.set_state(state)
    for _ in range(60):
        scene.step(1.0 / 60.0)
    return scene.get_state()


_CART_POLES_BY_TURNS = """
import sys
import numpy as np
from fx2d_gpu import device
from fx2d_gpu.device import runtime
runtime.ensure_initialized("cpu")
from tests.test_small_worlds_by_stage import _cart_poles
with device.team_items_taken("turns"):  # (the kernels compile at the first step)
    state = _cart_poles("cpu")
np.savez(sys.argv[1], **{name: getattr(state, name) for name in sys.argv[2:]})
"""


def test_a_world_a_thread_keeps_its_own_slots_whatever_way_a_team_takes_them(arch, tmp_path):
    """A step without contacts is a world a thread, its bodies and joints its world's own:
    cart-poles stepped the same with a team's slots taken in turn (a GPU's way, which a
    world's thread must not take: on software Vulkan it tore the poles off their carts) as
    here (a CPU's shares), 60 steps, the poles swinging; in turn in a process of its own (a
    kernel keeps the build of its first call in a process)."""
    fields = ("position", "angle", "velocity", "angular_velocity")
    path = tmp_path / "turns.npz"
    run = subprocess.run(
        [sys.executable, "-c", _CART_POLES_BY_TURNS, str(path), *fields],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    by_turns, shares = np.load(path), _cart_poles(arch)
    for name in fields:
        np.testing.assert_array_equal(by_turns[name], getattr(shares, name), err_msg=name)
    assert np.abs(shares.angle[:, 2]).max() > 0.1
