"""Scene.touching: which bodies touch another in each world, one launch, against the bodies
of the pairs contacts(world=None) lists (read whole and flagged in NumPy): after steps
(the step's reported contacts), after set_state (the manifolds at the current poses),
sensors' pairs included, for every body and for chosen ones; bad bodies refused by name."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.device.launching import host_array_count, launch_count


def _poured(arch, n_worlds=3):
    """A ground, a sensor strip, and boxes and balls dropped each world its own way."""
    scene = fx.Scene(arch=arch, n_worlds=n_worlds, enable_sleep=False)
    scene.add_box((0.0, -0.5), (12.0, 1.0), mass=0)
    scene.add_box((3.0, 0.6), (1.0, 1.2), mass=0, gravity_scale=0.0, sensor=True)
    for i in range(10):
        if i % 2:
            scene.add_circle((-4.0 + 0.9 * i, 0.6 + 0.7 * i), 0.3)
        else:
            scene.add_box((-4.0 + 0.9 * i, 0.6 + 0.7 * i), (0.5, 0.4), angle=0.3 * i)
    state = scene.get_state()
    rng = np.random.default_rng(2)
    state.position[:, 2:, 0] += rng.uniform(-1.0, 1.0, (n_worlds, 10))
    scene.set_state(state)
    return scene


def _flags_from_contacts(scene, bodies):
    """The reference: every pair contacts(world=None) lists flags both its bodies."""
    contacts = scene.contacts(world=None)
    flags = np.zeros((scene.n_worlds, scene.n_bodies), bool)
    flags[contacts.world, contacts.body_a] = True
    flags[contacts.world, contacts.body_b] = True
    return flags[:, bodies]


def test_touching_is_the_bodies_of_the_contacts(arch):
    scene = _poured(arch)
    every = np.arange(scene.n_bodies)
    chosen = [5, 1, 0, 5, 11]  # out of order, a body twice, the sensor, the ground
    seen = 0
    for step in range(90):
        if step % 10 == 0:
            for bodies in (None, chosen):
                got = scene.touching(bodies)
                expected = _flags_from_contacts(scene, every if bodies is None else bodies)
                assert got.dtype == bool and got.shape == expected.shape
                np.testing.assert_array_equal(got, expected, err_msg=f"step {step}")
                seen += int(expected.sum())
        scene.step(1 / 60)
    assert seen > 100  # bodies on the ground, on each other, in the sensor
    assert _flags_from_contacts(scene, [1]).any()  # the sensor's pairs count
    # Not stepped since: the manifolds at the poses set, exact.
    state = scene.get_state()
    state.position[:, 2:, 1] += 0.05
    scene.set_state(state)
    np.testing.assert_array_equal(scene.touching(), _flags_from_contacts(scene, every))


def test_touching_is_one_launch_given_one_array(arch):
    scene = _poured(arch)
    for _ in range(30):
        scene.step(1 / 60)
    scene.touching([2, 3])  # (its columns go to the device once)
    scene.get_state()  # (steps in flight read: their reads are not the query's)
    launches, arrays = launch_count(), host_array_count()
    scene.touching([2, 3])
    assert launch_count() - launches == 1
    assert tuple(np.subtract(host_array_count(), arrays)) == (1, 1)


@pytest.mark.parametrize(
    "bodies, error, words",
    [
        (12, ValueError, "bodies"),
        ([], ValueError, "bodies must be a body index or a non-empty sequence"),
        ([1, -1], ValueError, "bodies"),
        ("ground", TypeError, "bodies"),
    ],
)
def test_touching_refuses_bad_bodies_by_name(bodies, error, words):
    scene = _poured("cpu", n_worlds=1)
    with pytest.raises(error, match=words):
        scene.touching(bodies)
