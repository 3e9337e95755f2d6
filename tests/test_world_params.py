"""Per-world values (Scene.set_body_params, set_gravity, set_joint_params): each world steps
as a one-world scene given its values, bit for bit; a randomised mass moves a body as
Newton says; the values survive snapshots, state files and pickling; bad values are refused
by name and change nothing."""

import copy
import math
import pickle

import numpy as np
import pytest

import fx2d_gpu as fx
from tests.helpers import DT, GENERAL_PATH, assert_bitwise_equal, fingerprint, machine_scene

N_WORLDS = 4


def _randomised(n_worlds: int, seed: int = 3) -> dict:
    """Per-world values for machine_scene's dynamic bodies and joints: a mass scale per
    world (_give spreads it over the bodies: in odd worlds by more than
    contacts.IMMOVABLE_SWEEP_RATIO, whose contacts with immovable bodies are then swept
    again, in even ones not), frictions, elasticities, damping, gravity scales, gravity,
    PID gains."""
    rng = np.random.default_rng(seed)
    return {
        "mass": rng.uniform(0.5, 2.0, (n_worlds, 1)),
        "uneven": np.arange(n_worlds) % 2 == 1,
        "static_friction": rng.uniform(0.1, 0.9, n_worlds),
        "dynamic_friction": rng.uniform(0.05, 0.5, n_worlds),
        "elasticity": rng.uniform(0.0, 0.9, n_worlds),
        "vel_damping": rng.uniform(0.0, 0.5, n_worlds),
        "gravity_scale": rng.uniform(0.5, 1.5, n_worlds),
        "gravity": np.stack(
            [rng.uniform(-2.0, 2.0, n_worlds), rng.uniform(-15.0, -5.0, n_worlds)], axis=1
        ),
        "pid": np.stack(
            [rng.uniform(2.0, 8.0, n_worlds), np.zeros(n_worlds), rng.uniform(0.0, 1.0, n_worlds)],
            axis=1,
        ),
    }


def _dynamic_bodies(scene) -> np.ndarray:
    return np.flatnonzero(np.isfinite(scene.get_body_params()["inertia"][0]))


def _give(scene, values: dict, bodies, world=None):
    """The values of _randomised (rows: the addressed worlds) to `scene`."""
    _give_bodies(scene, values, bodies, world)
    if world is None:
        scene.set_gravity(values["gravity"] if scene.n_worlds > 1 else values["gravity"][0])
    scene.set_joint_params(np.arange(scene.n_joints), pid=values["pid"], world=world)


def _give_bodies(scene, values: dict, bodies, world=None):
    """_give's body values (set_body_params) alone."""
    # Masses per body too: body i of world w takes mass[w] * (1 + i / 10), times 30 for
    # every other body in odd worlds (uneven masses).
    spread = 1.0 + np.arange(len(bodies))[None, :] / 10.0
    every_other = np.arange(len(bodies))[None, :] % 2 == 1
    mass = values["mass"] * spread * np.where(values["uneven"][:, None] & every_other, 30, 1)
    scene.set_body_params(bodies, mass=mass, world=world)
    everyone = np.arange(scene.n_bodies)
    scene.set_body_params(
        everyone,
        **{
            k: values[k]
            for k in (
                "static_friction",
                "dynamic_friction",
                "elasticity",
                "vel_damping",
                "gravity_scale",
            )
        },
        world=world,
    )


@pytest.mark.parametrize("path", ["small worlds", "general"])
def test_each_world_steps_as_a_one_world_scene_given_its_values(path, arch):
    options = GENERAL_PATH if path == "general" else None
    batch = machine_scene(N_WORLDS, arch, step_options=options)
    bodies = _dynamic_bodies(batch)
    values = _randomised(N_WORLDS)
    _give(batch, values, bodies)
    start = batch.get_state()
    for _ in range(60):
        batch.step(DT)
    got = fingerprint(batch)
    assert batch.step_context().pool.model.per_world[None] == 1
    for world in range(N_WORLDS):
        alone = machine_scene(1, arch, step_options=options)
        alone.set_state(
            fx.State(
                *(
                    getattr(start, k)[world : world + 1]
                    for k in ("position", "angle", "velocity", "angular_velocity", "sleeping")
                )
            )
        )
        _give(alone, {k: v[world : world + 1] for k, v in values.items()}, bodies)
        for _ in range(60):
            alone.step(DT)
        assert alone.step_context().pool.model.per_world[None] == 0  # one row per body
        assert_bitwise_equal(
            [a[world : world + 1] for a in got], fingerprint(alone), f"world {world}"
        )


def test_values_set_a_few_worlds_at_a_time_step_as_one_world_scenes():
    """set_body_params on a built batch, a few worlds at a time, out of order, one world
    twice (a vector env's restarts: the device takes those worlds' material rows and
    uneven flags alone, WorldParams.device_rows, store_log): each world then steps bit for
    bit as a one-world scene given its last values, uneven masses included."""
    batch = machine_scene(N_WORLDS, "cpu")
    bodies = _dynamic_bodies(batch)
    values = _randomised(N_WORLDS)
    first = _randomised(N_WORLDS, seed=9)
    start = batch.get_state()  # (built: each call below writes the built rows)
    batch.set_gravity(values["gravity"])

    def rows(chosen, of=values):
        return {k: v[chosen] for k, v in of.items()}

    _give_bodies(batch, rows([2, 0], first), bodies, world=[2, 0])
    _give_bodies(batch, rows([3]), bodies, world=[3])
    _give_bodies(batch, rows([1, 2]), bodies, world=[1, 2])
    _give_bodies(batch, rows([0]), bodies, world=0)
    for _ in range(60):
        batch.step(DT)
    got = fingerprint(batch)
    for world in range(N_WORLDS):
        alone = machine_scene(1, "cpu")
        alone.set_state(
            fx.State(
                *(
                    getattr(start, k)[world : world + 1]
                    for k in ("position", "angle", "velocity", "angular_velocity", "sleeping")
                )
            )
        )
        alone.set_gravity(values["gravity"][world])
        _give_bodies(alone, rows([world]), bodies)
        for _ in range(60):
            alone.step(DT)
        assert_bitwise_equal(
            [a[world : world + 1] for a in got], fingerprint(alone), f"world {world}"
        )
    assert not np.array_equal(got[0][0], got[0][1])


def test_values_change_only_their_worlds():
    """Values for worlds 1 and 3 leave worlds 0 and 2 bitwise as a scene never given any,
    and a scene given the same value in every world keeps one device row per body."""
    plain, changed = machine_scene(N_WORLDS, "cpu"), machine_scene(N_WORLDS, "cpu")
    bodies = _dynamic_bodies(changed)
    changed.set_body_params(bodies, mass=5.0, elasticity=0.0, world=np.array([1, 3]))
    changed.set_body_params(bodies, static_friction=0.0, world=[False, True, False, False])
    gravity = np.tile([0.0, -9.81], (N_WORLDS, 1))
    gravity[3] = (3.0, -1.0)
    changed.set_gravity(gravity)
    for _ in range(45):
        plain.step(DT)
        changed.step(DT)
    a, b = fingerprint(plain), fingerprint(changed)
    for world in (0, 2):
        assert_bitwise_equal([x[world] for x in b], [x[world] for x in a], f"world {world}")
    for world in (1, 3):
        assert not np.array_equal(a[0][world], b[0][world])

    same = machine_scene(N_WORLDS, "cpu")
    same.set_body_params(bodies, mass=2.0)  # every world: still one row per body
    same.step(DT)
    assert same.step_context().pool.model.per_world[None] == 0
    assert (same.get_body_params(bodies)["mass"] == 2.0).all()


def _slope_scene(n_worlds: int, angle: float, friction: float, solver="xpbd", **box):
    """A box (1 m x 0.5 m) resting on a static slope of `angle` (rad), both of friction
    coefficient `friction`; returns (scene, box, unit vector up the slope)."""
    scene = fx.Scene(n_worlds=n_worlds, arch="cpu", enable_sleep=False, solver=solver)
    up = np.array([math.cos(angle), math.sin(angle)])
    normal = np.array([-math.sin(angle), math.cos(angle)])
    surface = dict(static_friction=friction, dynamic_friction=friction, elasticity=0.0)
    scene.add_box(tuple(-0.5 * normal), (40.0, 1.0), angle=angle, mass=0.0, **surface)
    box = scene.add_box(tuple(0.25 * normal), (1.0, 0.5), angle=angle, **surface, **box)
    return scene, box, up


def test_a_heavier_box_on_a_slope_accelerates_as_newton_says(solver):
    """A force F up a slope of angle theta on a box of mass m (kinetic friction mu):
    a = F / m - g (sin theta + mu cos theta) while it slides up. Per-world masses 1, 2, 3 kg
    (and a world of half gravity) give each world its own acceleration."""
    theta, mu, force, g = math.radians(20.0), 0.2, 20.0, 9.81
    masses = np.array([1.0, 2.0, 3.0, 2.0])
    gravity = np.array([[0.0, -g], [0.0, -g], [0.0, -g], [0.0, -g / 2]])
    scene, box, up = _slope_scene(4, theta, mu, solver=solver)
    scene.set_body_params(box, mass=masses)
    scene.set_gravity(gravity)

    def pushed(scene, box, steps, force):
        for _ in range(steps):
            scene.apply_force(box, force)
            scene.step(DT)
        return scene.get_state().velocity[:, box] @ up

    # The push starts at once: the box would slide down the slope on its own (tan 20 deg >
    # mu), and kinetic friction helps the push until it turns. Measured once every box
    # slides up (after 10 steps: the slowest turns within 0.05 s).
    pushes = force * up * np.ones((4, 1))
    v0 = pushed(scene, box, 10, pushes)
    assert (v0 > 0.0).all()
    seconds = 0.5
    measured = (pushed(scene, box, round(seconds / DT), pushes) - v0) / seconds
    g_world = -gravity[:, 1]
    expected = force / masses - g_world * (math.sin(theta) + mu * math.cos(theta))
    assert (expected > 0.5).all()  # every box slides up
    # Euler integration of a constant acceleration is exact, and a sliding contact's
    # kinetic friction is mu times its normal impulse: what is left is float32 rounding
    # and the contact's position correction (measured: 5e-6 of the acceleration).
    np.testing.assert_allclose(measured, expected, rtol=1e-3)
    # The one-world scene built with the mass as a keyword moves the same, bit for bit.
    alone, box_alone, _ = _slope_scene(1, theta, mu, solver=solver, mass=3.0)
    pushed(alone, box_alone, 10 + round(seconds / DT), force * up)
    assert np.array_equal(alone.get_state().velocity[0], scene.get_state().velocity[2])


def test_inertia_follows_the_mass_where_it_is_the_shapes():
    scene = fx.Scene(n_worlds=2, arch="cpu")
    free = scene.add_box((0.0, 0.0), (1.0, 2.0), mass=2.0)
    fixed = scene.add_circle((3.0, 0.0), 0.5, mass=2.0, inertia=7.0)
    scene.set_body_params([free, fixed], mass=4.0, world=1)
    inertia = scene.get_body_params()["inertia"]
    box_unit = (1.0 + 4.0) / 12.0  # (w^2 + h^2) / 12 per kg
    assert inertia[0, free] == pytest.approx(2.0 * box_unit)
    assert inertia[1, free] == pytest.approx(4.0 * box_unit)
    assert inertia[1, fixed] == 7.0 and inertia[0, fixed] == 7.0
    scene.set_body_params(free, inertia=1.5, world=0)
    scene.set_body_params(free, mass=8.0)  # an inertia given by hand stays
    inertia = scene.get_body_params()["inertia"]
    assert inertia[0, free] == 1.5 and inertia[1, free] == pytest.approx(8.0 * box_unit)


def test_per_world_pid_gains_drive_each_world_as_alone():
    """A motor driven to a position with different gains per world: stiffer gains get there
    faster, and world w equals the one-world scene given set_joint_mode(pid=world w's)."""

    def build(n):
        scene = fx.Scene(n_worlds=n, arch="cpu", gravity=(0.0, 0.0))
        base = scene.add_box((0.0, 0.0), (0.2, 0.2), mass=0.0)
        arm = scene.add_box((0.5, 0.0), (1.0, 0.1))
        joint = scene.add_revolute_joint(
            base, arm, control_mode="position", target=1.0, pid=(1.0, 0.0, 0.1), max_effort=100.0
        )
        return scene, joint

    gains = np.array([[1.0, 0.0, 0.1], [5.0, 0.0, 0.5], [20.0, 0.0, 2.0]])
    batch, joint = build(3)
    batch.set_joint_params(joint, pid=gains)
    np.testing.assert_array_equal(batch.get_joint_params()["pid"][:, joint], gains)
    for _ in range(20):
        batch.step(DT)
    angles = batch.joint_state().position[:, joint]
    assert angles[0] < angles[1] < angles[2]
    alone, joint = build(1)
    alone.set_joint_mode(joint, "position", pid=tuple(gains[2]))
    for _ in range(20):
        alone.step(DT)
    assert np.array_equal(alone.get_state().angle[0], batch.get_state().angle[2])


def test_snapshots_files_and_pickles_carry_the_values(tmp_path):
    scene = machine_scene(N_WORLDS, "cpu")
    bodies = _dynamic_bodies(scene)
    _give(scene, _randomised(N_WORLDS, seed=5), bodies)
    for _ in range(10):
        scene.step(DT)
    params = scene.get_body_params()
    snapshot = scene.snapshot()
    path = tmp_path / "run.npz"
    scene.save_state(path)
    copied = pickle.loads(pickle.dumps(scene))
    deep = copy.deepcopy(scene)
    for _ in range(20):
        scene.step(DT)
    expected = fingerprint(scene)

    scene.set_body_params(bodies, mass=1.0)  # changed after the snapshot
    scene.set_gravity((0.0, 0.0))
    scene.set_joint_params(0, pid=(0.0, 0.0, 0.0))
    for restore in (lambda: scene.restore(snapshot), lambda: scene.load_state(path)):
        restore()
        for name, value in params.items():
            np.testing.assert_array_equal(scene.get_body_params()[name], value, err_msg=name)
        for _ in range(20):
            scene.step(DT)
        assert_bitwise_equal(fingerprint(scene), expected, "restored")
    for other in (copied, deep):
        for _ in range(20):
            other.step(DT)
        assert_bitwise_equal(fingerprint(other), expected, "copied")


def test_a_state_file_with_bad_values_is_refused_and_changes_nothing(tmp_path):
    scene = machine_scene(2, "cpu")
    bodies = _dynamic_bodies(scene)
    scene.set_body_params(bodies, mass=[1.0, 3.0])
    scene.step(DT)
    good = scene.snapshot()
    before = scene.get_body_params()
    for name, change in (
        ("mass", lambda a: a.__setitem__((1, bodies[0]), 0.0)),
        ("mass", lambda a: a.__setitem__((0, bodies[1]), np.nan)),
        ("elasticity", lambda a: a.__setitem__((0, 0), -1.0)),
        ("inertia", lambda a: a.__setitem__((1, 0), 1.0)),
    ):  # body 0 static
        bad = good.copy()
        change(bad.params[name])
        bad.save(tmp_path / "bad.npz")
        with pytest.raises(ValueError, match=f"params/{name}"):
            scene.load_state(tmp_path / "bad.npz")
        with pytest.raises(ValueError, match=f"params/{name}"):
            scene.restore(bad)
        for key, value in before.items():
            np.testing.assert_array_equal(scene.get_body_params()[key], value)
    scene.step(DT)  # and the scene steps on


def test_bad_values_are_refused_by_name_and_change_nothing():
    scene = fx.Scene(n_worlds=3, arch="cpu")
    ground = scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)
    box = scene.add_box((0.0, 0.5), (1.0, 1.0))
    scene.step(DT)
    before = scene.get_body_params()
    cases = [
        (ValueError, "mass", dict(mass=[1.0, 0.0, 1.0])),  # static in one world only
        (ValueError, "mass", dict(mass=-1.0)),
        (ValueError, "elasticity", dict(elasticity=np.nan)),
        (ValueError, "static_friction", dict(static_friction=[0.1, -0.2, 0.3])),
        (ValueError, "vel_damping", dict(vel_damping=np.ones((2, 1)))),
        (TypeError, "gravity_scale", dict(gravity_scale="heavy")),
        (ValueError, "world", dict(mass=2.0, world=3)),
        (ValueError, "world", dict(mass=2.0, world=[True, False])),
        (TypeError, "world", dict(mass=2.0, world=1.5)),
    ]
    for error, name, kwargs in cases:
        with pytest.raises(error, match=name):
            scene.set_body_params(box, **kwargs)
    with pytest.raises(ValueError, match="static"):
        scene.set_body_params(ground, mass=1.0)
    with pytest.raises(ValueError, match="bodies"):
        scene.set_body_params(5, mass=1.0)
    with pytest.raises(ValueError, match="gravity"):
        scene.set_gravity(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="gravity"):
        scene.set_gravity((0.0, math.inf))
    with pytest.raises(ValueError, match="joints"):
        scene.set_joint_params(0, pid=(1.0, 0.0, 0.0))
    for key, value in before.items():
        np.testing.assert_array_equal(scene.get_body_params()[key], value)
    np.testing.assert_array_equal(scene.get_gravity(), np.tile([0.0, -9.81], (3, 1)))


def test_a_format_3_state_file_loads_with_the_scenes_own_values(tmp_path):
    """Files written before per-world values (format 3: no params members) still load; every
    world then takes the scene's own values."""
    import json
    import zipfile

    scene = machine_scene(2, "cpu")
    scene.step(DT)
    scene.save_state(tmp_path / "new.npz")
    with (
        zipfile.ZipFile(tmp_path / "new.npz") as new,
        zipfile.ZipFile(tmp_path / "old.npz", "w") as old,
    ):
        for info in new.infolist():
            if info.filename.startswith("params/"):
                continue
            data = new.read(info)
            if info.filename == "meta.npy":
                meta = json.loads(str(np.load(new.open(info))[()]))
                meta["format_version"] = 3
                path = tmp_path / "meta.npy"
                np.save(path, np.array(json.dumps(meta)))
                data = path.read_bytes()
            old.writestr(info.filename, data)
    bodies = _dynamic_bodies(scene)
    own = scene.get_body_params()
    scene.set_body_params(bodies, mass=[2.0, 3.0])
    scene.set_gravity((0.0, -1.0))
    scene.load_state(tmp_path / "old.npz")
    np.testing.assert_array_equal(scene.get_body_params()["mass"], own["mass"])
    np.testing.assert_array_equal(scene.get_gravity(), np.tile([0.0, -1.0], (2, 1)))
