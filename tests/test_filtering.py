"""Collision filtering (Fx2D's collision groups, Box2D's category and mask bits), entity
groups, and taking bodies out of the simulation (set_enabled, remove_body): Fx2D's
test_groups.cpp scenarios (with bounds derived for the scenes built here, not Fx2D's
figures), and the filter rule against a brute-force reference."""

import numpy as np
import pytest

import fx2d_gpu as fx

FRAME = 1.0 / 60.0


def overlapping_members(scene):
    """Fx2D's spawn_overlapping_pair: two 1 x 1 boxes overlapping by 0.4 m."""
    a = scene.add_box((10.0, 10.0), (1.0, 1.0), name="member_a")
    b = scene.add_box((10.6, 10.0), (1.0, 1.0), name="member_b")
    return a, b


def test_group_creation_and_lookup():
    scene = fx.Scene(gravity=(0.0, 0.0), arch="cpu")
    a, b = overlapping_members(scene)
    scene.add_group("rig", [a, b])
    with pytest.raises(ValueError, match="rig"):
        scene.add_group("rig", [a])
    assert scene.group_bodies("rig").tolist() == [a, b]
    with pytest.raises(ValueError, match="nothing"):
        scene.group_bodies("nothing")
    with pytest.raises(ValueError, match="bodies"):
        scene.add_group("bad", [a, 7])
    with pytest.raises(ValueError, match="bad"):
        scene.group_bodies("bad")  # a refused group is not registered


def test_group_members_do_not_collide_outsiders_do():
    scene = fx.Scene(gravity=(0.0, 0.0), arch="cpu")
    a, b = overlapping_members(scene)
    scene.add_group("rig", [a, b])
    outsider = scene.add_box((9.4, 10.0), (1.0, 1.0), name="outsider")
    scene.step(FRAME)
    pairs = scene.contacts().pairs()
    assert (a, b) not in pairs
    assert (a, outsider) in pairs


def test_self_colliding_group_members_collide():
    scene = fx.Scene(gravity=(0.0, 0.0), arch="cpu")
    a, b = overlapping_members(scene)
    scene.add_group("pile", [a, b], self_collide=True)
    scene.step(FRAME)
    assert (a, b) in scene.contacts().pairs()


def test_remove_group_removes_its_members():
    scene = fx.Scene(gravity=(0.0, 0.0), arch="cpu")
    a, b = overlapping_members(scene)
    outsider = scene.add_box((9.4, 10.0), (1.0, 1.0))
    scene.add_group("rig", [a, b])
    scene.remove_group("rig")
    with pytest.raises(ValueError, match="rig"):
        scene.remove_group("rig")
    assert scene.enabled()[0].tolist() == [False, False, True]
    scene.step(FRAME)
    assert len(scene.contacts()) == 0  # the outsider overlapped member_a
    assert outsider == 2


def test_disabled_group_freezes_and_falls_again():
    scene = fx.Scene(arch="cpu")
    scene.add_box((10.0, 1.0), (18.0, 1.0), mass=0.0)
    faller = scene.add_box((10.0, 8.0), (1.0, 1.0), name="faller")
    scene.add_group("rig", [faller], self_collide=True)
    scene.set_group_enabled("rig", False)
    for _ in range(30):
        scene.step(FRAME)
    assert scene.get_state().position[0, faller, 1] == pytest.approx(8.0, abs=1e-4)
    scene.set_group_enabled("rig", True)
    for _ in range(30):
        scene.step(FRAME)
    # Enabled again it falls freely from rest (its bottom, at 7.5, is 6 m above the ground's
    # top: nothing stops it in 0.5 s): n = 30 * 11 substeps of h give the Euler drop
    # g h^2 n (n + 1) / 2 = 1.230 m, y = 6.770. (Fx2D's figure, y < 7.5, only said it moved.)
    h, n = FRAME / scene.substeps, 30 * scene.substeps
    fallen = 8.0 - 9.81 * h * h * n * (n + 1) / 2
    assert scene.get_state().position[0, faller, 1] == pytest.approx(fallen, abs=1e-4)


def test_restoring_a_snapshot_brings_removed_bodies_back():
    scene = fx.Scene(gravity=(0.0, 0.0), arch="cpu")
    a, b = overlapping_members(scene)
    scene.add_group("rig", [a, b], self_collide=True)
    scene.step(FRAME)
    snap = scene.snapshot()
    scene.remove_group("rig")
    scene.step(FRAME)
    assert len(scene.contacts()) == 0
    scene.restore(snap)
    assert scene.enabled().all()
    scene.step(FRAME)
    assert (a, b) in scene.contacts().pairs()


def test_enabled_per_world_and_batch_equals_single():
    """A body disabled in world 1 only: world 0 runs as the scene alone, world 1 as the
    scene without that body."""

    def build(n_worlds, with_box=True):
        scene = fx.Scene(n_worlds=n_worlds, arch="cpu")
        scene.add_box((0.0, 0.0), (10.0, 1.0), mass=0.0)
        scene.add_circle((0.0, 3.0), 0.5)
        if with_box:
            scene.add_box((0.05, 1.5), (1.0, 1.0))
        return scene

    batch, alone = build(2), build(1)
    batch.set_enabled(2, False, world=1)
    without = build(1)
    without.set_enabled(2, False)
    for scene in (batch, alone, without):  # one after the other: no switching of scenes
        for _ in range(50):
            scene.step(FRAME)
    both = batch.get_state()
    np.testing.assert_array_equal(both.position[0], alone.get_state().position[0])
    np.testing.assert_array_equal(both.position[1], without.get_state().position[0])
    assert both.position[1, 2].tolist() == pytest.approx([0.05, 1.5])  # frozen
    # The ball (r 0.5, from y = 3) lands by 0.64 s and its hops (e = 0.1: 2 cm at most)
    # end by 0.78 s, before the 0.83 s: in world 1, through where the box was, it rests on
    # the ground (top 0.5), its centre at 1.0; in world 0 on the box resting on the ground
    # (top 1.5), at 2.0. Each contact rests at most a slop (LINEAR_SLOP, 2 mm) deep.
    from fx2d_gpu.physics.solver.contacts import LINEAR_SLOP

    assert both.position[1, 1, 1] == pytest.approx(1.0, abs=LINEAR_SLOP)
    assert both.position[0, 1, 1] == pytest.approx(2.0, abs=2 * LINEAR_SLOP)


def test_a_table_of_flags_equals_one_call_per_world_and_body():
    """set_enabled with a (k_worlds, k_bodies) table (a vector env's restarts, one launch)
    leaves every world as the same flags set one body and one world at a time would, bit
    for bit, 40 steps on; bodies off in one world and on in another, a world whose bodies
    all go back, and one left out of `world`."""

    def build():
        scene = fx.Scene(n_worlds=4, arch="cpu")
        scene.add_box((0.0, 0.0), (10.0, 1.0), mass=0.0)
        for i in range(3):
            scene.add_box((0.6 * i - 0.6, 1.0 + 0.9 * i), (0.5, 0.5))
        scene.add_circle((0.2, 4.0), 0.3)
        return scene

    table, one_by_one = build(), build()
    for scene in (table, one_by_one):
        scene.set_enabled([1, 3], False, world=[0, 2, 3])
        for _ in range(20):
            scene.step(FRAME)
    bodies, worlds = np.array([1, 2, 3, 4]), np.array([3, 0, 2])
    flags = np.array(
        [[True, True, True, True], [False, True, True, False], [True, False, False, True]]
    )
    table.set_enabled(bodies, flags, world=worlds)
    for row, world in enumerate(worlds.tolist()):
        for column, body in enumerate(bodies.tolist()):
            one_by_one.set_enabled(body, bool(flags[row, column]), world=world)
    expected = np.ones((4, 5), bool)
    expected[np.ix_(worlds, bodies)] = flags
    assert table.enabled().tolist() == expected.tolist()
    assert one_by_one.enabled().tolist() == expected.tolist()
    for scene in (table, one_by_one):
        for _ in range(40):
            scene.step(FRAME)
    a, b = table.get_state(), one_by_one.get_state()
    for name in ("position", "angle", "velocity", "angular_velocity", "sleeping"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.position[0], a.position[1])  # the worlds differ
    with pytest.raises(ValueError, match=r"enabled must be one bool or have shape \(3, 4\)"):
        table.set_enabled(bodies, flags[:2], world=worlds)
    with pytest.raises(TypeError, match="enabled"):
        table.set_enabled(bodies, flags.astype(int), world=worlds)
    assert table.enabled().tolist() == expected.tolist()  # refused: nothing changed


def test_a_disabled_body_takes_its_joints_with_it():
    """A pendulum whose bob is disabled: the arm swings free of it (no joint pull, no
    motor)."""
    scene = fx.Scene(gravity=(0.0, -9.81), arch="cpu")
    pivot = scene.add_circle((0.0, 0.0), 0.05, mass=0.0)
    arm = scene.add_box((0.5, 0.0), (1.0, 0.05))
    bob = scene.add_circle((1.0, 0.0), 0.1, mass=5.0)
    scene.add_revolute_joint(pivot, arm, anchor=(0.0, 0.0))
    scene.add_revolute_joint(
        arm, bob, anchor=(0.5, 0.0), control_mode="velocity", target=3.0, pid=(50.0, 0.0, 0.0)
    )
    scene.disable_collision(arm, bob)
    scene.set_enabled(bob, False)
    for _ in range(30):
        scene.step(FRAME)
    state = scene.get_state()
    assert state.position[0, bob].tolist() == pytest.approx([1.0, 0.0])
    # The arm alone: a uniform rod hinged at one end, released horizontal, turns by the
    # rod's own dynamics; with the 5 kg bob attached it would turn more slowly.
    alone = fx.Scene(gravity=(0.0, -9.81), arch="cpu")
    alone.add_circle((0.0, 0.0), 0.05, mass=0.0)
    alone.add_box((0.5, 0.0), (1.0, 0.05))
    alone.add_revolute_joint(0, 1, anchor=(0.0, 0.0))
    for _ in range(30):
        alone.step(FRAME)
    assert state.angle[0, arm] == pytest.approx(alone.get_state().angle[0, 1], abs=1e-5)


def reference_should_collide(group, category, mask, i, j):
    """Box2D's b2ShouldCollide with Fx2D's collision_group, in plain Python."""
    if group[i] != 0 and group[i] == group[j]:
        return group[i] > 0
    return bool(category[i] & mask[j]) and bool(category[j] & mask[i])


def test_filter_rule_against_brute_force():
    """60 overlapping circles with random groups, categories and masks (changed once
    after the first step): the candidate pairs are exactly the pairs whose boxes overlap
    and that the rule lets collide."""
    rng = np.random.default_rng(5)
    n = 60
    scene = fx.Scene(gravity=(0.0, 0.0), arch="cpu")
    positions = rng.uniform(0.0, 3.0, (n, 2))
    for p in positions:
        scene.add_circle(p, 0.4)

    def randomise():
        group = rng.choice([0, 0, -1, -2, 1, 2], n)
        category = rng.choice([1, 2, 4, 0x80000000, 3], n)
        mask = rng.choice([0xFFFFFFFF, 1, 2, 6, 0x80000001, 0], n)
        for body in range(n):
            scene.set_collision_filter(
                body,
                collision_group=int(group[body]),
                category_bits=int(category[body]),
                mask_bits=int(mask[body]),
            )
        return group, category, mask

    for _ in range(2):
        filters = randomise()
        state = scene.get_state()
        state.position[0] = positions  # the same overlaps each time
        state.velocity[:] = 0.0
        scene.set_state(state)
        pairs = {(int(a), int(b)) for _, a, b in scene.candidate_pairs()}
        expected = {
            (i, j)
            for i in range(n)
            for j in range(i + 1, n)
            if np.all(np.abs(positions[i] - positions[j]) <= 0.8)  # AABBs meet
            and reference_should_collide(*filters, i, j)
        }
        assert pairs == expected
        scene.step(FRAME)


@pytest.mark.parametrize(
    "keywords, error, word",
    [
        (dict(collision_group=1.5), TypeError, "collision_group"),
        (dict(collision_group=1 << 31), ValueError, "collision_group"),
        (dict(category_bits=-1), ValueError, "category_bits"),
        (dict(mask_bits=1 << 32), ValueError, "mask_bits"),
        (dict(mask_bits="all"), TypeError, "mask_bits"),
    ],
)
def test_bad_filters_are_refused_and_change_nothing(keywords, error, word):
    scene = fx.Scene(arch="cpu")
    body = scene.add_circle((0.0, 0.0), 1.0, collision_group=-3)
    with pytest.raises(error, match=word):
        scene.set_collision_filter(body, **keywords)
    with pytest.raises(error, match=word):
        scene.add_circle((5.0, 0.0), 1.0, **keywords)
    assert scene.n_bodies == 1
    scene.step(FRAME)
    with pytest.raises(error, match=word):
        scene.set_collision_filter(body, **{"collision_group": 5, **keywords})
    other = scene.add_circle((1.5, 0.0), 1.0, collision_group=-3)
    scene.step(FRAME)  # the filter is unchanged: same negative group, no contact
    assert len(scene.contacts()) == 0 and other == 1


def test_set_enabled_checks_its_arguments():
    scene = fx.Scene(n_worlds=2, arch="cpu")
    scene.add_circle((0.0, 0.0), 1.0)
    with pytest.raises(TypeError, match="enabled"):
        scene.set_enabled(0, 1)
    with pytest.raises(ValueError, match="bodies"):
        scene.set_enabled(3, False)
    with pytest.raises(ValueError, match="world"):
        scene.set_enabled(0, False, world=2)
    assert scene.enabled().all()


def test_yaml_sensor_loads_as_a_sensor():
    text = """
scene: {size: [10, 10], gravity: [0, -9.81]}
entities:
  trigger:
    pose: [5, 5, 0]
    physics: {mass: 0, gravity_scale: 0, sensor: true}
    collision: {geometry: {rectangle: [2, 2]}}
  ball:
    pose: [5, 8, 0]
    physics: {mass: 1}
    collision: {geometry: {circle: 0.2}}
"""
    scene = fx.load_scene(text, arch="cpu")
    began = False
    for _ in range(60):
        scene.step(FRAME)
        events = scene.contact_events()
        began |= bool(len(events.begin) and events.begin.is_trigger.all())
    assert began
    # It fell through the sensor as if it were not there: 1 s of free fall from y = 8,
    # n = 60 * 11 substeps of h: y = 8 - g h^2 n (n + 1) / 2 = 3.088.
    h, n = FRAME / scene.substeps, 60 * scene.substeps
    fallen = 8.0 - 9.81 * h * h * n * (n + 1) / 2
    assert scene.get_state().position[0, 1, 1] == pytest.approx(fallen, abs=1e-4)
