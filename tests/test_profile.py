"""Scene.profile: where a step's time goes, stage by stage (solver/profile.py), with the
same results bit for bit as Scene.step on every executor (solver/stages.py's list walked
stage by stage instead of in one launch)."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import scenes
from fx2d_gpu.physics.solver.stages import SUBSTEP_STAGES

from .helpers import launches_of, xfail_where_paths_round_apart

DT = 1.0 / 60.0


def _state(scene):
    s = scene.get_state()
    arrays = [s.position, s.angle, s.velocity, s.angular_velocity, s.sleeping]
    if scene.n_joints:
        joints = scene.joint_state()
        arrays += [joints.position, joints.rate]
    return arrays


@pytest.mark.parametrize(
    "build",
    [
        # 50 worlds of 8 bodies and a joint: the substeps in one launch, a world per thread.
        lambda arch: scenes.batched_small(50, arch=arch),
        # A pyramid of 55 boxes and a hinged rod: a CPU team (GPU: a launch per stage group),
        # begin_step before the colouring.
        lambda arch: _pyramid_with_a_joint(arch),
    ],
    ids=["small_worlds", "large_world"],
)
def test_profiled_steps_match_normal_steps_bitwise(arch, build, request):
    small = request.node.callspec.id == "small_worlds"
    if small:  # profiled: the general path's item stages
        xfail_where_paths_round_apart(request, arch)
    normal, profiled = build(arch), build(arch)
    for _ in range(40):
        normal.step(DT)
    for _ in range(20):
        profiled.step(DT)
    # Small worlds take one colour (StepOptions.color_small_worlds off): a constraint shares its
    # bodies with others of its colour, so their passes go a world per thread.
    before = launches_of("fused._pass_by_world"), launches_of("staged._solve_colors")
    profile = profiled.profile(DT, steps=20)
    by_world = launches_of("fused._pass_by_world") - before[0]
    by_colour = launches_of("staged._solve_colors") - before[1]
    assert (by_world > 0, by_colour > 0) == ((True, False) if small else (False, True))
    for a, b in zip(_state(normal), _state(profiled), strict=True):
        np.testing.assert_array_equal(a, b)
    assert profiled.step_count == 40 and profiled.time == pytest.approx(normal.time)
    # Every substep stage that ran is there (the large world has joints and contacts;
    # "continuous" runs every substep), besides the step's own stages.
    for stage in SUBSTEP_STAGES:
        assert stage.name in profile.stages, stage.name
    for name in ("find pairs", "colour", "report", "clear forces"):
        assert name in profile.stages, name
    times = np.array(list(profile.stages.values()))
    assert (times >= 0.0).all()
    # The stages are timed one after the other inside the profiled steps' wall time.
    assert times.sum() <= profile.total_ms * (1 + 1e-9)
    assert profile.steps == 20
    assert "position pass" in profile.table()


def _pyramid_with_a_joint(arch):
    scene = scenes.pyramid(10, arch=arch)
    rod = scene.add_box((-8.0, 3.0), (2.0, 0.2))
    scene.add_revolute_joint(0, rod, anchor=(-9.0, 3.0))
    return scene


def test_profile_checks_its_arguments(arch):
    scene = fx.Scene(arch=arch)
    scene.add_circle((0.0, 0.0), 0.5)
    with pytest.raises(TypeError, match="steps"):
        scene.profile(DT, steps=2.0)
    with pytest.raises(ValueError, match="steps"):
        scene.profile(DT, steps=0)
    with pytest.raises(ValueError, match="dt"):
        scene.profile(0.0)
    assert scene.step_count == 0
