"""The soft-step solver (Scene(solver="soft_step"), solver/soft_contacts.py and
solver/soft_joints.py) against independent answers: the soft contact's static deflection in
closed form (a spring of the contact's hertz, g / w^2 per unit of effective-mass ratio), a
column's compression summed from it, a pendulum's period, a ball's bounce, Box2D's mixing
rules, and its executors against each other bit for bit.

The rest depth of a point carrying an impulse lambda a substep, with effective mass m_eff,
under a soft constraint of angular frequency w (soft_contacts' docstring): at rest the
solve changes no impulse, so m_eff mass_scale bias_rate C = -impulse_scale lambda, i.e.
C = -lambda / (m_eff h w^2); with lambda = (load) g h, C = -(load / m_eff) g / w^2. The damping
ratio drops out of the rest depth (it sets how fast the body gets there).
"""

import math

import numpy as np
import pytest

import fx2d_gpu as fx

from .helpers import (
    COLORED_LIKE_GENERAL,
    DT,
    GENERAL_PATH,
    G,
    assert_same_trace,
    machine_scene,
    run,
    soft_column_drop,
    soft_contact_hertz,
    soft_deflection,
    trace,
)


@pytest.mark.parametrize("substeps", [4, 1])  # 30 Hz; capped at 15 Hz by the substep
def test_discs_rest_at_the_soft_contacts_static_deflection(arch, substeps):
    """A disc on the ground sinks g / w^2 at twice the hertz (immovable ground); a 1 kg
    disc on a 4 kg box sinks (1 + 1/4) g / w^2 into it (1/m_eff = 1/1 + 1/4 kg: both lever
    arms along the normal)."""
    scene = fx.Scene(arch=arch, solver="soft_step", substeps=substeps, enable_sleep=False)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0)
    alone = scene.add_circle((4.0, 0.5), 0.5)
    box = scene.add_box((0.0, 0.5), (1.0, 1.0), mass=4.0)
    top = scene.add_circle((0.0, 1.5), 0.5, mass=1.0)
    run(scene, seconds=3.0)
    position = scene.get_state().position[0]
    on_ground = 0.5 - position[alone, 1]
    expected = soft_deflection(soft_contact_hertz(substeps, immovable=True))
    assert on_ground == pytest.approx(expected, rel=0.01)
    on_box = (position[box, 1] + 0.5) - (position[top, 1] - 0.5)
    expected = 1.25 * soft_deflection(soft_contact_hertz(substeps, immovable=False))
    assert on_box == pytest.approx(expected, rel=0.01)


def test_a_column_compresses_by_its_summed_deflections(arch):
    """Ten frictionless 1 m, 1 kg boxes: the contact under box k from the top carries k
    boxes on two corner points, each point's 1/m_eff = 2/m + 2 (0.5^2) / I = 5 per kg
    (I = 1/6 kg m^2), so it closes 2.5 k g / w^2 (30 Hz); the ground's points, 1/m_eff =
    2.5, close 1.25 n g / w^2 at 60 Hz. The top box's drop is their sum, 31.9 mm (Box2D v3
    gives 31.92 mm with friction; frictionless, its column walks sideways and falls: a point
    solved before the other tilts each box). Here it stays straight."""
    n = 10
    scene = fx.Scene(arch=arch, solver="soft_step", enable_sleep=False)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0)
    column = [scene.add_box((0.0, 0.5 + k), (1.0, 1.0)) for k in range(n)]
    run(scene, seconds=6.0)
    state = scene.get_state()
    drop = (n - 0.5) - state.position[0, column[-1], 1]
    expected = soft_column_drop(n)
    assert drop == pytest.approx(expected, rel=0.02)
    assert np.abs(state.angle[0, column]).max() < 1e-4
    assert np.abs(state.position[0, column, 0]).max() < 1e-4


@pytest.mark.parametrize("masses", [(100.0, 10.0, 1.0), (1000.0, 100.0, 10.0, 1.0)])
def test_lighter_boxes_on_heavier_ones_compress_by_their_summed_deflections(arch, masses):
    """Boxes of 1 m, lighter and lighter up the stack (a world of uneven masses: shock
    propagation holds nothing here, a lower box being the heavier), sleep off, 5 s, with
    friction (Box2D v3's defaults). The contact under box k carries the boxes from k up on
    two corner points, each point's 1/m_eff = 2.5 / m_k + 2.5 / m_(k-1) (a corner of a 1 m
    box: 1/m + 0.25 / (m / 6)), the ground's 2.5 / m_0 at twice the hertz; box k sinks by
    the sum of the deflections below it. Box2D v3 (pyb2d3, 4 substeps) gives these to
    1e-3 mm (100, 10, 1 kg: 0.096, 0.513, 0.892 mm). Before, each step started these pairs'
    impulses cold (the rule for a light body held under a heavy one) and the 1 kg box sank
    2.5 mm."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver="soft_step", enable_sleep=False)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0)
    boxes = [scene.add_box((0.0, 0.5 + k), (1.0, 1.0), mass=m) for k, m in enumerate(masses)]
    run(scene, seconds=5.0)
    sink = 0.5 + np.arange(len(masses)) - scene.get_state().position[0, boxes, 1]
    expected, total = [], 0.0
    for k, mass in enumerate(masses):
        per_point = 0.5 * sum(masses[k:])  # kg of load on each of the two points, in g
        inverse = 2.5 / mass + (2.5 / masses[k - 1] if k > 0 else 0.0)
        total += per_point * inverse * soft_deflection(soft_contact_hertz(4, immovable=k == 0))
        expected.append(total)
    np.testing.assert_allclose(sink, expected, rtol=0.02)


def test_a_30_row_pyramid_settles(arch):
    """Box2D's pyramid of 30 rows (465 boxes, sleep off): the soft contacts' slowest mode
    decays at w / (2 zeta) = 2 pi 30 / 20 = 9.4 per second, so 5 s after it is dropped
    into place the settling motion (~5 cm/s at 0.4 s) is gone many times over and no box
    may still move at 0.1 mm/s. It kept rocking at 1-2 mm/s while its stacked faces,
    nearly equal, traded the reference role and lost their warm-started impulses at every
    trade (collision/narrow_phase.vertex_pair_feature)."""
    from fx2d_gpu import scenes

    specs, _ = scenes.pyramid_layout(30)
    scene = scenes.build_scene(specs, arch=arch, enable_sleep=False, solver="soft_step")
    for _ in range(300):
        scene.step(DT)
    fastest = np.abs(scene.get_state().velocity[0, 1:]).max()
    assert fastest < 1e-4, fastest


def test_a_box_hangs_from_a_joint_at_the_joints_static_deflection(arch):
    """A 1 kg box hanging from a static pivot by a revolute joint at its centre (no turning
    lever): the soft joint is a spring of JOINT_HERTZ, at most a quarter of the substep rate
    (60 Hz at 4 substeps of 1/60 s), so it sags g / w^2 = 0.069 mm (Box2D v3 (pyb2d3),
    measured in the same scene: 0.0690 mm). At an eighth of the rate (30 Hz) it sagged
    0.276 mm."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver="soft_step", enable_sleep=False)
    pivot = scene.add_circle((0.0, 0.0), 0.02, mass=0.0)
    box = scene.add_box((0.0, 0.0), (0.5, 0.5), mass=1.0)
    scene.add_revolute_joint(pivot, box, anchor=(0.0, 0.0))
    run(scene, seconds=2.0)
    hertz = min(60.0, 0.25 * 4 / DT)
    sag = -scene.get_state().position[0, box, 1]
    assert sag == pytest.approx(soft_deflection(hertz), rel=0.01)


def test_a_pendulum_swings_at_its_period_and_keeps_its_swing(arch):
    """A 1 kg disc (r = 5 cm) on a 1 m arm, released from 10 degrees: T = 2 pi
    sqrt(I_pivot / (m g L)) (1 + theta^2 / 16), I_pivot = m r^2 / 2 + m L^2 (2.0101 s); the
    soft joint's damping must not drain the swing (>= 9.8 degrees after 10 s) and the anchor
    holds to a millimetre."""
    scene = fx.Scene(arch=arch, solver="soft_step", enable_sleep=False)
    pivot = scene.add_circle((0.0, 2.0), 0.05, mass=0.0)
    start = math.radians(10.0)
    bob = scene.add_circle((math.sin(start), 2.0 - math.cos(start)), 0.05)
    scene.add_revolute_joint(pivot, bob, anchor=(0.0, 0.0))
    scene.disable_collision(pivot, bob)
    xs, gaps = [], []
    for _ in range(600):
        scene.step(DT)
        p = scene.get_state().position[0]
        xs.append(p[bob, 0])
        gaps.append(abs(np.hypot(*(p[bob] - p[pivot])) - 1.0))
    xs = np.array(xs)
    crossings = [
        i + xs[i] / (xs[i] - xs[i + 1]) for i in range(len(xs) - 1) if xs[i] > 0.0 >= xs[i + 1]
    ]  # downward zero crossings, in steps
    period = np.mean(np.diff(crossings)) * DT
    inertia = 0.5 * 0.05**2 + 1.0
    expected = 2.0 * math.pi * math.sqrt(inertia / G) * (1.0 + start**2 / 16.0)
    assert period == pytest.approx(expected, rel=0.005)
    last_swing = np.abs(xs[-120:]).max()  # the last 2 s: about one period
    assert math.degrees(math.asin(last_swing)) >= 9.8
    assert max(gaps) < 1e-3


def test_a_slider_stops_at_its_limit_on_its_axis(arch):
    """A box on a vertical prismatic joint falls to position_min and rests there, on the
    axis and unturned, though it starts off centre on a tilted parent."""
    scene = fx.Scene(arch=arch, solver="soft_step", enable_sleep=False)
    rail = scene.add_box((0.0, 3.0), (0.2, 0.2), mass=0.0, angle=0.2)
    slider = scene.add_box((0.0, 3.0), (0.4, 0.4), mass=2.0, angle=0.2)
    axis = (math.sin(-0.2), math.cos(-0.2))  # the rail's local y, turned by 0.2 rad
    scene.add_prismatic_joint(rail, slider, axis=(0.0, 1.0), position_min=-1.5, position_max=1.0)
    scene.disable_collision(rail, slider)
    run(scene, seconds=2.0)
    state = scene.get_state()
    offset = state.position[0, slider] - state.position[0, rail]
    assert offset @ np.array(axis) == pytest.approx(-1.5, abs=2e-3)
    assert abs(offset @ np.array([axis[1], -axis[0]])) < 1e-3
    assert abs(state.angle[0, slider] - 0.2) < 1e-3
    assert np.abs(state.velocity[0, slider]).max() < 1e-2


@pytest.mark.parametrize("elasticity", [0.5, 0.8])
def test_a_ball_bounces_at_its_restitution(arch, elasticity):
    """Dropped from 3 m onto the ground, a ball leaves at e times its landing speed (Box2D's
    restitution pass, with Box2D's mixing: the pair takes the larger elasticity, the
    ground's 0), and rises to e^2 of its drop."""
    scene = fx.Scene(arch=arch, solver="soft_step", enable_sleep=False, restitution_mixing="max")
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0, elasticity=0.0)
    ball = scene.add_circle((0.0, 3.25), 0.25, elasticity=elasticity)
    heights, speeds = [], []
    for _ in range(150):
        scene.step(DT)
        state = scene.get_state()
        heights.append(state.position[0, ball, 1] - 0.25)
        speeds.append(state.velocity[0, ball, 1])
    landing = min(speeds)
    assert max(speeds) == pytest.approx(-elasticity * landing, rel=0.03)
    bounce = int(np.argmax(speeds))
    assert max(heights[bounce:]) == pytest.approx(elasticity**2 * 3.0, rel=0.05)


#: A pair of mu 0.8 and 0.2 under each rule (Scene(friction_mixing=)).
MIXED_FRICTION = {"min": 0.2, "max": 0.8, "geometric_mean": 0.4, "average": 0.5, "product": 0.16}


@pytest.mark.parametrize("rule", sorted(MIXED_FRICTION))
def test_friction_mixes_by_the_scenes_rule_under_both_solvers(arch, solver, rule):
    """On a 20 degree incline (tan 0.364), a box of mu 0.8 on a slope of mu 0.2 holds where
    the scene's rule mixes the pair above tan 20 degrees (the larger, 0.8; the average,
    0.5; Box2D's geometric mean, 0.4) and slides where below (Fx2D's smaller, 0.2; pymunk's
    product, 0.16), whichever the solver: a slide of g (sin - mu cos) t^2 / 2 in 1 s,
    0.76 m at 0.2 (0.84 m at 0.16); more than 0.5 m. Held, a box moves no more than its
    contact's give (soft: its static deflection, well under 1 cm)."""
    mixed = MIXED_FRICTION[rule]
    scene = fx.Scene(arch=arch, solver=solver, enable_sleep=False, friction_mixing=rule)
    angle = math.radians(20.0)
    scene.add_box(
        (0.0, 0.0), (20.0, 1.0), mass=0.0, angle=angle, static_friction=0.2, dynamic_friction=0.2
    )
    up = np.array([-math.sin(angle), math.cos(angle)])
    box = scene.add_box(
        tuple(0.5 * up + 0.5 * up),
        (1.0, 1.0),
        angle=angle,
        static_friction=0.8,
        dynamic_friction=0.8,
    )
    start = scene.get_state().position[0, box].copy()
    run(scene, seconds=1.0)
    moved = np.hypot(*(scene.get_state().position[0, box] - start))
    if mixed > math.tan(angle):
        assert moved < 0.01
    else:
        assert moved > 0.5


def test_the_soft_step_makes_fewer_passes_than_xpbd(arch):
    """The soft step's default substeps (Box2D's 4) and its stages: a solve and a relax
    over the colours each substep and one restitution pass, 9 passes a step to XPBD's 22."""
    from fx2d_gpu.physics.solver.stages import COLORS, STAGES

    for solver, substeps, passes in (("soft_step", 4, 9), ("xpbd", 11, 22)):
        scene = fx.Scene(arch=arch, solver=solver)
        assert scene.substeps == substeps
        per_substep = [s for s in STAGES[solver] if s.domain == COLORS and s.when == 0]
        last_only = [s for s in STAGES[solver] if s.domain == COLORS and s.when != 0]
        assert len(per_substep) * substeps + len(last_only) == passes


def test_soft_step_small_worlds_are_bitwise_the_general_path(arch, monkeypatch):
    """The machine scene (a chain ground, a stack, throws, a motorised hinge, a driven
    slider with limits, a kinematic pusher, a sensor, a bouncy ball) on the small-world path
    (a world per thread, coloured as the general path colours) and on the general one (a
    launch per stage): the same bits."""
    small = trace(machine_scene(3, arch, solver="soft_step", step_options=COLORED_LIKE_GENERAL), 90)
    assert small["state"]["velocity"].any()
    assert_same_trace(
        small, trace(machine_scene(3, arch, solver="soft_step", step_options=GENERAL_PATH), 90)
    )


def test_soft_step_team_and_profiled_steps_agree_bitwise(arch):
    """A large world (a 12-row pyramid, a jointed chain, a bouncy ball: past the small-world
    size) stepped by step() (a CPU team) and by profile() (a launch per stage): the same
    bits; and a batch of two worlds equals each alone."""

    def build(n_worlds=1):
        scene = fx.Scene(arch=arch, solver="soft_step", n_worlds=n_worlds)
        scene.add_box((0.0, -0.5), (40.0, 1.0), mass=0.0)
        for row in range(12):
            for i in range(12 - row):
                scene.add_box(
                    (i - 0.5 * (11 - row), 0.5 + row),
                    (0.95, 0.95),
                    static_friction=0.6,
                    dynamic_friction=0.5,
                )
        anchor = scene.add_box((10.0, 8.0), (0.2, 0.2), mass=0.0)
        previous = anchor
        for k in range(6):
            link = scene.add_box((10.5 + 0.5 * k, 8.0), (0.5, 0.1))
            scene.add_revolute_joint(previous, link, anchor=(0.25 if k else 0.0, 0.0))
            previous = link
        scene.add_circle((-3.0, 16.0), 0.3, elasticity=0.8)
        return scene

    stepped, profiled = build(), build()
    for _ in range(40):
        stepped.step(DT)
    profiled.profile(DT, steps=40)
    for a, b in zip(
        stepped.get_state().__dict__.values(), profiled.get_state().__dict__.values(), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    batch = build(2)
    run(batch, 40)
    for name in ("position", "angle", "velocity", "angular_velocity"):
        np.testing.assert_array_equal(
            getattr(batch.get_state(), name)[0], getattr(stepped.get_state(), name)[0], err_msg=name
        )


def test_solver_is_checked(arch):
    with pytest.raises(ValueError, match="solver must be one of"):
        fx.Scene(arch=arch, solver="pgs")
    with pytest.raises(TypeError, match="solver must be a string"):
        fx.Scene(arch=arch, solver=1)
    assert fx.Scene(arch=arch, solver="soft_step", substeps=6).substeps == 6
