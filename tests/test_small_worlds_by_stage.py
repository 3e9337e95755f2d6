"""Small worlds' substeps by stage (StepOptions.small_worlds_by_stage, fused.BY_STAGE): the
small worlds' step in one launch keeps its broad phase, colouring and report a world a
thread, and hands its substeps to the step's team, whose threads share every stage over all
the worlds' items, colour after colour, meeting at the team's barrier (on CUDA the grid
team; here a CPU team of threads, the same kernel's loops). A colour's constraints share no
moving body, so solving them together in any order is solving them a world at a time in
colour order: every step must be bit for bit what a world a thread gives with the same
colours (StepOptions.color_small_worlds), which is the independent reference here."""

import pytest

from fx2d_gpu import device
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
def test_small_worlds_by_stage_step_bit_for_bit_as_a_world_a_thread(
    arch, solver, turns, monkeypatch
):
    """64 piling worlds (stacks, thrown circles, two bars hinged in a chain; they sleep, and
    a third are pushed awake at step 70), 100 steps in one launch each: states, contacts
    and events the same every step by stage as a world a thread, and the team met at its
    barrier at least once a colour pass of every substep. The team takes its body and
    joint slots as a GPU's does (device.TEAM_ITEMS "turns": member, member + n_members,
    ...; the CPU's consecutive shares are every large world's team's, tested throughout)."""
    from benchmarks.launches import barrier_generation

    monkeypatch.setattr(device, "TEAM_ITEMS", "turns")  # (read as the kernel compiles)

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
    stepped, _ = _run(by_stage)
    if team.status().step_threads < 2:  # (the last step's substeps' team)
        pytest.skip("this machine gave the scene no team of several threads")
    met = barrier_generation(by_stage) - before
    a_world_a_thread, _ = _run(_chained_piles(arch, solver, **COLORED_LIKE_GENERAL))
    _assert_same_steps(stepped, a_world_a_thread)
    # At least a barrier a colour pass of every substep (two passes a substep; asleep, a
    # world's step solves nothing but the team still meets).
    assert met >= 2 * len(stepped) * by_stage.substeps, met
