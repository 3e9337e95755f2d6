"""The step's plan (solver/plan.py): StepOptions checked and kept per scene, the plan's
executor chosen from the options, the layout and the backend, and every launch of a step
counted under one of the plan's stages."""

import pickle

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import scenes
from fx2d_gpu.device import launching, runtime
from fx2d_gpu.physics.solver.plan import STEP_STAGE_NAMES, Executor, StepOptions, plan_step
from fx2d_gpu.physics.solver.stages import STAGES

DT = 1 / 60


def _launches_per_stage(scene, steps: int) -> tuple[dict, int]:
    """({stage: launches} over `steps` steps of `scene`, launches in all)."""
    before, total = launching.stage_launches(), launching.launch_count()
    for _ in range(steps):
        scene.step(DT)
    after = launching.stage_launches()
    return (
        {
            name: after[name] - before.get(name, 0)
            for name in after
            if after[name] != before.get(name, 0)
        },
        launching.launch_count() - total,
    )


def test_step_options_are_checked_and_name_the_option():
    with pytest.raises(TypeError, match="StepOptions.team"):
        StepOptions(team=1)
    with pytest.raises(TypeError, match="colors_per_launch"):
        StepOptions(colors_per_launch=True)
    with pytest.raises(ValueError, match="colors_per_launch"):
        StepOptions(colors_per_launch=0)
    with pytest.raises(ValueError, match="noted_partners"):
        StepOptions(noted_partners=-1)
    with pytest.raises(ValueError, match="small_worlds_by_stage needs color_small_worlds"):
        StepOptions(small_worlds_by_stage=True)
    with pytest.raises(TypeError, match="small_worlds_by_stage"):
        StepOptions(color_small_worlds=True, small_worlds_by_stage=1)
    scene = fx.Scene(arch="cpu", step_options={"team": False})
    with pytest.raises(ValueError, match="no option 'teams'"):
        scene.step_options = {"teams": False}
    with pytest.raises(TypeError, match="step_options"):
        scene.step_options = [("team", False)]
    with pytest.raises(TypeError, match="step_options"):
        fx.Scene(arch="cpu", step_options="fast")
    assert scene.step_options == StepOptions(team=False)  # unchanged by the refusals


def test_step_options_travel_with_copies_and_replicas():
    scene = fx.Scene(arch="cpu", step_options={"reuse_pairs": False, "colors_per_launch": 3})
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)
    scene.add_box((0.0, 1.0), (1.0, 1.0))
    scene.step(DT)
    for copy in (pickle.loads(pickle.dumps(scene)), scene.replicate(3)):
        assert copy.step_options == scene.step_options


def _large(step_options=None):
    specs, _ = scenes.pyramid_layout(12)  # 78 boxes: a large world
    return scenes.build_scene(specs, arch="cpu", enable_sleep=False, step_options=step_options)


def test_the_plan_chooses_the_executor_from_options_layout_and_backend():
    large = _large()
    ctx = large.step_context(DT)
    assert not ctx.small_worlds and ctx.cpu
    assert plan_step(ctx, False, 2).substep_executor(False) is Executor.TEAM
    assert plan_step(ctx, False, 0).substep_executor(False) is Executor.PER_STAGE
    assert plan_step(ctx, True, 2).substep_executor(False) is Executor.PER_STAGE
    assert plan_step(ctx, False, 2).kept_launch
    assert plan_step(ctx, True, 2).team_threads == 0  # a profiled step has no team
    large.step_options = {"kept_in_one_launch": False}
    assert not plan_step(large.step_context(DT), False, 2).kept_launch
    small = scenes.batched_small(8, arch="cpu")
    plan = plan_step(small.step_context(DT), False, 2)
    assert plan.substep_executor(True) is Executor.BY_WORLD
    assert plan.launches()["sleep"] == "report" and plan.launches()["order"] == "colour"
    assert not plan.kept_launch  # no fat boxes in small worlds
    assert not plan.worlds_launch  # compiled in on a GPU, or on a CPU with fold_on_cpu
    small.step_options = {"fold_on_cpu": True}
    plan = plan_step(small.step_context(DT), False, 2)
    assert plan.worlds_launch and not plan_step(small.step_context(DT), True, 2).worlds_launch
    assert {plan.launches()[name] for name in ("colour", "substeps", "report", "sleep")} == {
        "find pairs"
    }
    assert not plan.worlds_by_stage  # (StepOptions.small_worlds_by_stage off)
    small.step_options = {"fold_on_cpu": True, "small_worlds_in_one_launch": False}
    assert not plan_step(small.step_context(DT), False, 2).worlds_launch
    # Substeps by stage: the team's, where the step has a team of several threads and its
    # one launch; a world a thread otherwise.
    by_stage = {"color_small_worlds": True, "small_worlds_by_stage": True}
    small.step_options = {"fold_on_cpu": True, **by_stage}
    plan = plan_step(small.step_context(DT), False, 2)
    assert plan.worlds_by_stage and plan.substep_executor(True) is Executor.TEAM
    assert not plan_step(small.step_context(DT), False, 1).worlds_by_stage
    assert not plan_step(small.step_context(DT), True, 2).worlds_by_stage  # (profiled)
    small.step_options = by_stage  # (no fold_on_cpu: four launches, a world a thread)
    plan = plan_step(small.step_context(DT), False, 2)
    assert not plan.worlds_by_stage and plan.substep_executor(True) is Executor.BY_WORLD
    small.step_options = {"small_world_path": False}
    assert not small.step_context(DT).small_worlds


def test_small_worlds_by_block_at_any_team_size_never_profiled_nor_large():
    """Substeps a block of worlds at a time (StepOptions.small_worlds_by_block): small
    worlds' plan, in their one launch or not, whatever the team's threads (a block is not
    the team); the executor stays a world launch's (fused._world_members picks the blocks);
    never in a profiled step, nor for large worlds."""
    by_block = {"color_small_worlds": True, "small_worlds_by_block": True}
    small = scenes.batched_small(8, arch="cpu", step_options=by_block)
    for threads in (0, 1, 2):
        plan = plan_step(small.step_context(DT), False, threads)
        assert plan.worlds_by_block and not plan.worlds_by_stage
        assert plan.substep_executor(True) is Executor.BY_WORLD
    assert not plan_step(small.step_context(DT), True, 2).worlds_by_block  # (profiled)
    small.step_options = {"fold_on_cpu": True, **by_block}
    assert plan_step(small.step_context(DT), False, 2).worlds_by_block
    assert not plan_step(_large(by_block).step_context(DT), False, 2).worlds_by_block


def test_every_launch_of_a_step_counts_under_a_planned_stage():
    """On the per-stage path (a GPU's) the substeps launch each stage group of every
    substep (a colour pass under its own stage's name); on a CPU team they are one launch
    (or none of their own: a kept step's launch under "find pairs"); small worlds run all
    their substeps in one launch. Every launch of a step is counted under one of the plan's
    stages or the substep's, none outside them."""
    named = set(STEP_STAGE_NAMES) | {stage.name for stage in STAGES["xpbd"]}

    def substep_launches(counts):
        return sum(
            n for name, n in counts.items() if name not in STEP_STAGE_NAMES or name == "substeps"
        )

    scene = _large({"team": False})
    per_stage, total = _launches_per_stage(scene, 5)
    assert set(per_stage) <= named and sum(per_stage.values()) == total
    assert substep_launches(per_stage) >= 5 * scene.substeps * 2  # >= 2 groups a substep
    assert per_stage["position pass"] >= 5 * scene.substeps  # a launch a pass at least
    small, total = _launches_per_stage(scenes.batched_small(64, arch="cpu"), 5)
    assert set(small) <= named and sum(small.values()) == total
    assert small["substeps"] == 5  # one launch a step for every substep of every world
    if runtime.on_cpu():
        on_team, total = _launches_per_stage(_large(), 5)
        assert set(on_team) <= named and sum(on_team.values()) == total
        assert on_team.get("substeps", 0) + on_team.get("find pairs", 0) <= 5 * 3


def test_a_profile_times_the_planned_stages():
    profile = _large().profile(DT, steps=2)
    for stage in ("find pairs", "colour", "body lists", "report", "clear forces", "faults"):
        assert stage in profile.stages, stage
    assert np.isfinite(list(profile.stages.values())).all()
