"""Material mixing is the scene's, not the solver's (issue 77, item 1): Scene(friction_mixing=,
restitution_mixing=), their scene-file keys, and the same default (Fx2D's rule, the smaller)
for XPBD and the soft step, checked against analytic answers under both solvers."""

import math
import pickle
from copy import deepcopy

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.enums import DEFAULT_MIXING, MIXING_RULES

from .helpers import run

DT = 1.0 / 60.0


def ramp_slide(arch, solver, seconds, **scene_kwargs):
    """Issue 77's ramp: a 1 m, 25 kg box of mu 0.141 (static and kinetic) set at rest on a
    long static ramp of mu 1.0 tilted 0.25 rad, g = 10 m/s^2, no sleep, elasticity 0.
    Returns (its travel down the ramp after `seconds`, m; the analytic travel under the
    pair's smaller mu, the default rule)."""
    g, theta, mu_box, mu_ramp = 10.0, 0.25, 0.141, 1.0
    scene = fx.Scene(
        gravity=(0.0, -g), arch=arch, solver=solver, enable_sleep=False, **scene_kwargs
    )
    normal = np.array([math.sin(theta), math.cos(theta)])
    downhill = np.array([math.cos(theta), -math.sin(theta)])
    scene.add_box(
        tuple(-0.5 * normal),
        (200.0, 1.0),
        angle=-theta,
        mass=0.0,
        static_friction=mu_ramp,
        dynamic_friction=mu_ramp,
        elasticity=0.0,
    )
    start = 0.5 * normal
    box = scene.add_box(
        tuple(start),
        (1.0, 1.0),
        angle=-theta,
        mass=25.0,
        static_friction=mu_box,
        dynamic_friction=mu_box,
        elasticity=0.0,
    )
    run(scene, seconds=seconds)
    travel = float((scene.get_state().position[0, box] - start) @ downhill)
    accel = g * (math.sin(theta) - min(mu_box, mu_ramp) * math.cos(theta))
    return travel, 0.5 * accel * seconds**2


def test_the_default_mixing_is_fx2ds_for_both_solvers():
    """Fx2D's solver docs (seed 000): mu = min(mu_a, mu_b), e = min(e_a, e_b)."""
    assert DEFAULT_MIXING == "min"
    for solver in ("xpbd", "soft_step"):
        scene = fx.Scene(arch="cpu", solver=solver)
        assert (scene.friction_mixing, scene.restitution_mixing) == ("min", "min")


def test_a_box_slides_down_issue_77s_ramp_at_the_textbook_rate(arch, solver):
    """The pair's mu under the default rule is the box's 0.141 < tan 0.25 = 0.255, so the box
    slides at a = g (sin theta - mu cos theta) = 1.108 m/s^2: 8.863 m in 4 s, whichever the
    solver. (Under Box2D's geometric mean, sqrt(0.141) = 0.375 > tan theta: the soft step
    held it still before the rule became the scene's.)

    Bound: 1 %, 9 cm. The box starts touching and at rest: the first step's static
    friction (mu_s = 0.141 too) changes nothing, and the soft contact's static deflection
    (g cos theta / (2 pi 60 Hz)^2 = 0.07 mm) is normal to the slide. Measured: XPBD
    8.867 m, the soft step 8.872 m."""
    travel, expected = ramp_slide(arch, solver, 4.0)
    assert expected == pytest.approx(8.863, abs=1e-3)
    assert travel == pytest.approx(expected, rel=0.01)


def test_box2ds_friction_rule_holds_the_box_on_the_ramp(arch, solver):
    """friction_mixing="geometric_mean" (Box2D's): mu = sqrt(0.141 * 1.0) = 0.375 >
    tan 0.25 = 0.255, so static friction holds the box, under either solver: it moves no
    more than a contact's give in 1 s (1 mm; a slide would be 8.863 / 16 m = 0.55 m)."""
    travel, _ = ramp_slide(arch, solver, 1.0, friction_mixing="geometric_mean")
    assert abs(travel) < 1e-3


#: A ball of e 0.8 on a ground of e 0.2 under each rule (Scene(restitution_mixing=)).
MIXED_RESTITUTION = {"min": 0.2, "max": 0.8, "geometric_mean": 0.4, "average": 0.5, "product": 0.16}


@pytest.mark.parametrize("rule", sorted(MIXED_RESTITUTION))
def test_a_ball_bounces_at_the_restitution_the_scenes_rule_mixes(arch, solver, rule):
    """A ball (e 0.8) dropped 2 m onto a ground of e 0.2 leaves at e_mixed times its impact
    speed, e_mixed the scene's rule's (0.16 to 0.8), under either solver.

    Bounds (as test_box_rebounds_at_its_restitution's): the impact speed is at least the
    landing step's start speed |v| (the last read before it) and at most |v| + g dt; the
    ball leaves at e_mixed of it, and gravity takes at most g dt off by the step's end:
    e_mixed |v| - g dt < rebound <= e_mixed (|v| + g dt)."""
    mixed = MIXED_RESTITUTION[rule]
    scene = fx.Scene(arch=arch, solver=solver, enable_sleep=False, restitution_mixing=rule)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0, elasticity=0.2)
    ball = scene.add_circle((0.0, 2.25), 0.25, elasticity=0.8)
    speeds = []
    for _ in range(50):
        scene.step(DT)
        speeds.append(float(scene.get_state().velocity[0, ball, 1]))
    landing = -min(speeds)
    assert mixed * landing - G_DT < max(speeds) <= mixed * (landing + G_DT)


G_DT = 9.81 * DT


@pytest.mark.parametrize("argument", ["friction_mixing", "restitution_mixing"])
def test_a_rule_that_is_not_one_is_refused_naming_its_argument(argument):
    with pytest.raises(ValueError, match=argument):
        fx.Scene(arch="cpu", **{argument: "median"})
    with pytest.raises(TypeError, match=argument):
        fx.Scene(arch="cpu", **{argument: 0})
    with pytest.raises(TypeError, match=argument):
        fx.Scene(arch="cpu", **{argument: None})
    assert set(MIXING_RULES) == {"min", "max", "geometric_mean", "average", "product"}


def test_the_rules_travel_with_replicate_pickling_and_deepcopy():
    """The rules are settings (Scene._settings): a pickled or deep-copied scene mixes as the
    original does, bit for bit; a replicate (which starts its contacts over) as the
    replicate of an identical scene does; and a scene of another rule does not."""

    def built(rule):
        scene = fx.Scene(arch="cpu", friction_mixing=rule, restitution_mixing="max")
        scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0, static_friction=1.0, dynamic_friction=1.0)
        scene.add_box(
            (0.0, 0.5), (1.0, 1.0), velocity=(3.0, 0.0), static_friction=0.1, dynamic_friction=0.1
        )
        scene.step(DT)
        return scene

    def after(scene):
        run(scene, 30)
        return scene.get_state().position

    original = built("geometric_mean")
    copies = [pickle.loads(pickle.dumps(original)), deepcopy(original)]
    replicas = [built("geometric_mean").replicate(2), original.replicate(2)]
    for copy in (*copies, *replicas):
        assert (copy.friction_mixing, copy.restitution_mixing) == ("geometric_mean", "max")
    expected = after(original)
    for copy in copies:
        np.testing.assert_array_equal(after(copy), expected)
    replicated = after(replicas[0])
    np.testing.assert_array_equal(after(replicas[1]), replicated)
    assert not np.array_equal(after(built("min").replicate(2)), replicated)
    assert not np.array_equal(after(built("min")), expected)


SCENE_FILE = """
friction_mixing: {friction}
restitution_mixing: {restitution}
scene: {{size: [8, 6], gravity: [0, -9.81]}}
entities:
  ball:
    pose: [4, 3, 0]
    collision: {{geometry: {{circle: 0.3}}}}
"""


def test_a_scene_file_gives_the_rules_as_top_level_keys():
    scene = fx.load_scene(
        SCENE_FILE.format(friction="geometric_mean", restitution="max"), arch="cpu"
    )
    assert (scene.friction_mixing, scene.restitution_mixing) == ("geometric_mean", "max")
    without_keys = SCENE_FILE.format(friction="", restitution="").splitlines()[3:]
    default = fx.load_scene("\n".join(without_keys), arch="cpu")
    assert (default.friction_mixing, default.restitution_mixing) == ("min", "min")
    with pytest.raises(ValueError, match=r"key 'friction_mixing' \(line 2\)"):
        fx.load_scene(SCENE_FILE.format(friction="median", restitution="max"), arch="cpu")
    with pytest.raises(TypeError, match=r"key 'restitution_mixing' \(line 3\)"):
        fx.load_scene(SCENE_FILE.format(friction="min", restitution="1"), arch="cpu")
