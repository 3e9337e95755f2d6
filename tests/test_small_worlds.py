"""Small worlds (at most solver/context.BY_WORLD_MAX_BODIES bodies) take their own path
through a step: the broad phase checks every body of a world instead of hashing, and all
substeps run in one launch, one world per thread. The general path (grid, one launch per
stage and group of colours) is the independent reference: the two must agree bit for bit,
because a colour's constraints share no dynamic body, so solving them in sequence or in
parallel is the same arithmetic."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.solver import context, step, team

STATE_FIELDS = ("position", "angle", "velocity", "angular_velocity", "sleeping")


def machine_scene(n_worlds: int, arch: str) -> fx.Scene:
    """One of every kind of constraint and body a small world may hold: a chain ground,
    a box stack, circles and a triangle thrown at it (a different throw in each world),
    a capsule, a motorised hinge (velocity mode), a slider driven to a position (with
    limits), a kinematic pusher, a sensor, a bouncy ball."""
    scene = fx.Scene(n_worlds=n_worlds, arch=arch)
    friction = dict(static_friction=0.6, dynamic_friction=0.5)
    scene.add_chain((0.0, 0.0), [(-12.0, 2.0), (-6.0, 0.0), (12.0, 0.0)], **friction)
    for level in range(4):
        scene.add_box((2.0, 0.25 + 0.5 * level), (0.5, 0.5), **friction)
    thrown = [scene.add_circle((-4.0 + i, 1.0 + 0.5 * i), 0.25, **friction) for i in range(3)]
    thrown.append(scene.add_polygon((-1.0, 3.0), [(-0.3, -0.2), (0.3, -0.2), (0.0, 0.3)],
                                    **friction))
    scene.add_capsule((5.0, 0.5), 0.8, 0.2, angle=0.3, **friction)
    base = scene.add_box((8.0, 3.0), (0.4, 0.4), mass=0.0)
    arm = scene.add_box((8.8, 3.0), (1.6, 0.1), **friction)
    scene.add_revolute_joint(base, arm, anchor=(0.0, 0.0), control_mode="velocity",
                             target=2.0, pid=(4.0, 0.0, 0.0), max_effort=40.0)
    rail = scene.add_box((-8.0, 4.0), (0.2, 0.2), mass=0.0)
    slider = scene.add_box((-8.0, 4.5), (0.6, 0.3), **friction)
    scene.add_prismatic_joint(rail, slider, axis=(1.0, 0.0), position_min=-2.0,
                              position_max=1.5, control_mode="position", target=3.0,
                              pid=(60.0, 0.0, 8.0), max_effort=200.0)
    scene.add_box((-10.0, 0.9), (0.5, 0.5), external_forces_enabled=False, gravity_scale=0.0,
                  velocity=(1.5, 0.0))
    scene.add_box((0.0, 1.0), (1.0, 1.0), sensor=True, mass=0.0)
    scene.add_circle((3.5, 4.0), 0.3, elasticity=0.8)
    state = scene.get_state()
    for world in range(n_worlds):  # world w's throw does not depend on n_worlds
        rng = np.random.default_rng([7, world])
        state.velocity[world, thrown] = rng.uniform([1.0, -1.0], [7.0, 4.0],
                                                    size=(len(thrown), 2))
    scene.set_state(state)
    return scene


def run(scene: fx.Scene, steps: int) -> dict:
    """What the steps produced: the state, and every step's touching pairs (with their
    impulses) and begin/end events."""
    contacts, events = [], []
    for _ in range(steps):
        scene.step(1 / 60)
        c = scene.contacts(world=None)
        contacts.append((c.world, c.body_a, c.body_b, c.normal_impulse, c.tangent_impulse))
        e = scene.contact_events()
        events.append((len(e.begin.world), len(e.end.world)))
    state = scene.get_state()
    return {"state": {name: getattr(state, name) for name in STATE_FIELDS},
            "contacts": contacts, "events": events}


def general_path(monkeypatch):
    """Every world counts as large: the grid broad phase and one launch per stage (no CPU
    team either, solver/team.py)."""
    monkeypatch.setattr(context, "BY_WORLD_MAX_BODIES", 0)
    monkeypatch.setattr(team, "ENABLED", False)


def assert_same(a: dict, b: dict):
    for name in STATE_FIELDS:
        np.testing.assert_array_equal(a["state"][name], b["state"][name], err_msg=name)
    assert a["events"] == b["events"]
    for step_a, step_b in zip(a["contacts"], b["contacts"], strict=True):
        for column_a, column_b in zip(step_a, step_b, strict=True):
            np.testing.assert_array_equal(column_a, column_b)


@pytest.mark.parametrize("n_worlds", [3, 40])  # serial loops on the CPU; parallel ones
def test_small_worlds_step_bitwise_like_the_general_path(arch, n_worlds, monkeypatch):
    scene = machine_scene(n_worlds, arch)
    launches = []
    original = step.substeps_by_world
    monkeypatch.setattr(step, "substeps_by_world",
                        lambda ctx: launches.append(1) or original(ctx))
    small = run(scene, 150)
    assert len(launches) == 150  # every step took the small-world path ...
    assert small["events"][0][0] > 0 and max(e[1] for e in small["events"]) > 0
    assert small["state"]["sleeping"].any()  # ... with contacts, events and sleep in it

    general_path(monkeypatch)
    launches.clear()
    general = run(machine_scene(n_worlds, arch), 150)
    assert not launches
    assert_same(small, general)


def test_a_world_alone_and_in_a_batch_agree_on_the_small_world_path(arch):
    batch = run(machine_scene(40, arch), 60)
    alone = run(machine_scene(1, arch), 60)
    for name in STATE_FIELDS:
        np.testing.assert_array_equal(batch["state"][name][:1], alone["state"][name],
                                      err_msg=name)


def test_an_overflowing_colouring_falls_back_to_the_general_path(arch, monkeypatch):
    """A hub touched by more circles than there are colours overflows; those steps are
    solved through the overflow's Jacobi pass, with the same results as the general
    path."""
    def hub():
        scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
        scene.add_circle((0.0, 0.0), 1.0)
        # 36 rim circles: more than MAX_COLORS (31), and a small world (37 bodies).
        for angle in np.linspace(0.0, 2.0 * np.pi, 36, endpoint=False):
            scene.add_circle((1.07 * np.cos(angle), 1.07 * np.sin(angle)), 0.08,
                             velocity=(-np.cos(angle), -np.sin(angle)))
        return scene

    launches = []
    original = step.substeps_by_world
    monkeypatch.setattr(step, "substeps_by_world",
                        lambda ctx: launches.append(1) or original(ctx))
    scene = hub()
    assert scene.n_bodies <= context.BY_WORLD_MAX_BODIES
    first = run(scene, 1)
    assert scene.n_overflow > 0 and not launches
    small = run(scene, 20)
    general_path(monkeypatch)
    general = hub()
    assert_same(first, run(general, 1))
    assert_same(small, run(general, 20))
