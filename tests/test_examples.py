"""The shipped examples do what their descriptions say, run as `fx2d run --example NAME`
runs them: examples.load(name) (the scene file and its driver), dt 1/60 s, the solver's
default substeps. Each bound is derived from the scene's geometry and physics (in the
test); what the engine gave when they were written is noted beside it."""

import math

import numpy as np
import pytest

from fx2d_gpu import examples
from fx2d_gpu.draw.viewer import controller_of
from fx2d_gpu.examples import bucket_fill, chain_terrain, truck

DT = 1 / 60


def _rotate(angle, vector):
    """(2,) vector turned by angle rad."""
    c, s = math.cos(angle), math.sin(angle)
    return np.array([c * vector[0] - s * vector[1], s * vector[0] + c * vector[1]])


def test_load_gives_each_example_its_scene_and_driver(arch):
    assert examples.names() == [
        "angry_boxes",
        "bucket_fill",
        "chain_terrain",
        "joint_control_demo",
        "stacked_boxes",
        "truck",
    ]
    for name in examples.names():
        scene, driver = examples.load(name, arch=arch)
        assert isinstance(driver, examples.ExampleDriver)
        assert controller_of(scene) is driver  # what fx2d run and the viewer step with
        assert scene.body_index(scene.body_name(0)) == 0
    with pytest.raises(ValueError, match="no example scene named 'lorry'"):
        examples.load("lorry", arch=arch)
    with pytest.raises(TypeError):
        examples.driver("truck", gears=3)


def test_truck_drives_forward_on_wheels_that_stay_attached(arch):
    """The cab faces -x. Motored wheels (4 rad/s on 0.4 m wheels: 1.6 m/s) take it down the
    ramp and along the ground until its cab meets the crate, whose right face is at
    x = 2.5 m: the cab's centre (0.625 m behind its front) stops at about x = 3.1 m, 5.9 m
    from where it starts (x = 9 m). The joints: each wheel's centre stays at its anchor in
    its parent's frame, and the bed where it started in the cab's frame, within 1 cm."""
    scene, driver = examples.load("truck", arch=arch)
    head, back = driver.head, driver.back
    start = scene.get_state()
    weld = _rotate(-start.angle[0, head], start.position[0, back] - start.position[0, head])
    worst_gap = 0.0
    for _ in range(240):  # 4 s
        driver.step(scene, DT)
        s = scene.get_state()
        p, a = s.position[0], s.angle[0]
        gaps = [
            np.linalg.norm(
                p[head] + _rotate(a[head], truck.FRONT_WHEEL_ANCHOR) - p[driver.front_wheel]
            ),
            np.linalg.norm(
                p[back] + _rotate(a[back], truck.REAR_WHEEL_ANCHOR) - p[driver.rear_wheel]
            ),
            np.linalg.norm(p[head] + _rotate(a[head], weld) - p[back]),
        ]
        worst_gap = max(worst_gap, *gaps)
    assert worst_gap < 0.01  # m (joint_errors gave 0.0 at mm precision)
    travelled = start.position[0, head, 0] - s.position[0, head, 0]
    assert 4.0 < travelled < 9.0 - (2.5 + 0.625) + 0.1  # m: several metres, not through
    assert s.position[0, head, 1] < 3.25  # m: down from where it was dropped, upright
    assert abs(s.angle[0, head]) < 0.5  # rad: on its wheels
    assert (s.angular_velocity[0, [driver.front_wheel, driver.rear_wheel]] > 0).all()


def test_truck_without_motors_is_fx2ds_free_rolling_rig(arch):
    scene, driver = examples.load("truck", arch=arch, driver_options={"wheel_speed": None})
    assert scene.n_joints == 3
    assert (scene.joint_state().rate == 0).all()
    for _ in range(30):
        driver.step(scene, DT)
    assert scene.joint_errors().max() < 0.01


def test_bucket_fills_with_the_balls_dropped_into_it(arch):
    """One ball every 6 steps: 49 balls in 300 steps (5 s). A ball whose drop line clears
    the walls (|x - 8| + r < 1.2 m, the interior's half width) falls 3.2 m (1.1 s, 66
    steps) onto the bucket's bottom or the pile in it: those spawned by step 230 are
    inside at the end, whatever the others do (some bounce off a wall's top into it;
    the test's run counted 28)."""
    scene, driver = examples.load("bucket_fill", arch=arch)
    steps = 300
    for _ in range(steps):
        driver.step(scene, DT)
    spawned = steps // bucket_fill.STEPS_PER_SPAWN - 1  # the first after step 6
    assert len(driver.balls) == spawned == 49
    clear_drops = [
        n
        for n in range(spawned)
        if abs(bucket_fill.spawn_point(n)[0][0] - bucket_fill.CENTRE_X)
        + bucket_fill.spawn_point(n)[1]
        < 1.2
        and (n + 1) * bucket_fill.STEPS_PER_SPAWN <= steps - 70
    ]
    assert len(clear_drops) == 15
    inside = driver.count_inside(scene)
    assert len(clear_drops) <= inside <= spawned
    # None fell through the bucket's bottom: every ball is above the floor's top (0.8 m).
    position = scene.get_state(bodies=driver.balls).position[0]
    assert (position[:, 1] - np.asarray(driver.radii) > 0.8 - 0.02).all()


def test_bodies_dropped_on_the_chain_terrain_roll_along_it_without_passing_through(arch):
    """Bodies dropped 1.1-1.4 m above the first slope (42 degrees) roll down into the
    valley at x = 10 m and up the far hills. Checked every 5 steps: every body over the
    terrain has its centre above the chain (by at least half its bounding radius: a
    crate lying flat on a slope is 0.62 of it above); the first four (three balls and a
    crate), dropped in the first 2 s, have gone at least 5 m to the right by 6 s (the
    test's run: 11.5-15 m)."""
    scene, driver = examples.load("chain_terrain", arch=arch)
    lowest = math.inf
    for i in range(360):
        driver.step(scene, DT)
        if i % 5 == 4 and driver.bodies:
            p = scene.get_state(bodies=driver.bodies).position[0]
            reach = np.asarray(driver.reach)
            over = (p[:, 0] > chain_terrain.TERRAIN[0, 0] + reach) & (
                p[:, 0] < chain_terrain.TERRAIN[-1, 0] - reach
            )
            clearance = (p[:, 1] - chain_terrain.terrain_height(p[:, 0])) / reach
            lowest = min(lowest, clearance[over].min(initial=math.inf))
    assert len(driver.bodies) == 11  # one every 30 steps, the first after 30
    assert lowest > 0.5
    x = scene.get_state(bodies=driver.bodies[:4]).position[0, :, 0]
    assert (x - chain_terrain.DROP_X > 5.0).all(), x


def test_angry_boxes_slingshot_holds_the_ball_then_knocks_the_tower_over(arch):
    """The ball waits at the slingshot's anchor (3, 3) for 1 s, is fired level at 18 m/s
    from (1, 3) and knocks the tower over: of its seven pieces, at least four fall more
    than 0.35 m or tip more than 0.6 rad (Fx2D's engine and this one: 5)."""
    scene, driver = examples.load("angry_boxes", arch=arch)
    names = ("box_l1", "box_r1", "lintel1", "box_l2", "box_r2", "lintel2", "target")
    tower = [scene.body_index(name) for name in names]
    start = scene.get_state()
    for _ in range(driver.launch_step):
        driver.step(scene, DT)
    held = scene.get_state()
    assert np.linalg.norm(held.position[0, driver.ball] - (3.0, 3.0)) < 0.01
    assert np.allclose(held.position[0, tower], start.position[0, tower], atol=0.02)
    for _ in range(240):
        driver.step(scene, DT)
    end = scene.get_state()
    fell = start.position[0, tower, 1] - end.position[0, tower, 1] > 0.35
    tipped = np.abs((end.angle[0, tower] + np.pi) % (2 * np.pi) - np.pi) > 0.6
    assert np.count_nonzero(fell | tipped) >= 4
    assert end.position[0, driver.ball, 0] > 10.0  # it went through the tower's place


def test_stacked_boxes_ball_hits_the_pyramid(arch):
    """The 5 kg ball, thrown left at 5 m/s from (10, 6), reaches the pyramid (its right
    edge at x = 7.625 m) within a second and knocks boxes off their places: at least one
    moves more than 0.5 m (the test's run: all but one, by 1-6 m; Fx2D: 3 off the block)."""
    scene, driver = examples.load("stacked_boxes", arch=arch)
    ball = scene.body_index("ball")
    boxes = [scene.body_index(f"box{i}") for i in range(1, 7)]
    start = scene.get_state()
    touched = False
    for _ in range(120):
        driver.step(scene, DT)
        pairs = scene.contacts(world=0).pairs()
        touched |= any((min(ball, b), max(ball, b)) in pairs for b in boxes)
    assert touched
    moved = np.linalg.norm(scene.get_state().position[0, boxes] - start.position[0, boxes], axis=1)
    assert moved.max() > 0.5


def test_joint_control_demo_runs_each_motor_mode_for_two_seconds(arch):
    """At the end of each 2 s phase: POSITION holds the arm near 1 rad (PID (6, 0.05, 3)
    overshoots: Fx2D 1.158) and the slider at 1 m; VELOCITY turns the arm at 3.14 rad/s and
    slides at 0.5 m/s; EFFORT's 15 N m on the arm (1.5 kg m^2 about the pivot: 10 rad/s^2)
    and -2 N on the 1 kg slider reach about 23 rad/s and 0.5 - 4 = -3.5 m/s."""
    scene, driver = examples.load("joint_control_demo", arch=arch)
    arm, slider = driver.arm, driver.slider
    seen = []
    for _ in range(3):
        for _ in range(120):
            driver.step(scene, DT)
        js = scene.joint_state()
        seen.append(
            (js.position[0, arm], js.rate[0, arm], js.position[0, slider], js.rate[0, slider])
        )
    (theta, _, pos, _), (_, omega, _, vel), (_, omega_end, _, vel_end) = seen
    assert abs(theta - 1.0) < 0.25 and abs(pos - 1.0) < 0.05
    assert abs(omega - 3.14) < 0.3 and abs(vel - 0.5) < 0.05
    assert omega_end > 15.0 and vel_end < -3.0


def test_fx2d_run_example_steps_the_scene_with_its_driver(tmp_path, arch, capsys):
    """fx2d run --example: the truck's wheels stay on (the saved state's wheel centres at
    their anchors), the bucket gets balls (the summary's body count grows)."""
    from fx2d_gpu.cli import main

    saved = tmp_path / "truck.npz"
    assert (
        main(["run", "--example", "truck", "--steps", "90", "--arch", arch, "--save", str(saved)])
        == 0
    )
    scene, driver = examples.load("truck", arch=arch)
    with np.load(saved) as state:
        p, a = state["position"][0], state["angle"][0]
    gap = np.linalg.norm(
        p[driver.head] + _rotate(a[driver.head], truck.FRONT_WHEEL_ANCHOR) - p[driver.front_wheel]
    )
    assert gap < 0.01
    assert p[driver.head, 0] < 9.0 - 1.0
    capsys.readouterr()
    assert main(["run", "--example", "bucket_fill", "--steps", "60", "--arch", arch]) == 0
    # 4 bodies and 4 boundary walls, and a ball after each 6th step but the last.
    assert "example bucket_fill: 60 steps, 17 bodies" in capsys.readouterr().out


def test_fx2d_view_example_builds_the_scene_with_its_driver(arch, monkeypatch):
    from fx2d_gpu import cli
    from fx2d_gpu.draw import viewer

    built = []

    def fake_run_viewer(scene_factory, **_):
        built.append(scene_factory())
        return []

    monkeypatch.setattr(viewer, "run_viewer", fake_run_viewer)
    assert cli.main(["view", "--example", "truck", "--arch", arch]) == 0
    (scene,) = built
    assert scene.n_joints == 3 and isinstance(controller_of(scene), truck.Driver)
