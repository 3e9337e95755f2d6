"""Small worlds' bodies interleaved (StepOptions.interleave_small_worlds,
solver/interleaved.py): the substeps work on a body-major copy of the hot state, slot b of
world w at b * n_worlds + w, so that a GPU warp's worlds read neighbouring addresses. The
same arithmetic on the same values: every step bit for bit as without, on the small worlds'
one launch (the GPU's path, counted on the CPU with fold_on_cpu) and on a step without
contacts; and the copy is laid out as it says (a layout that is not the one the option
claims would still step bit for bit). On GPU backends it is on by default; test_vulkan's
scenes run it there against the CPU backend's layout."""

import numpy as np
import pytest

from fx2d_gpu import scenes
from fx2d_gpu.device import INTERLEAVED_BODY_FIELDS

from .helpers import DT
from .test_small_worlds_one_launch import _assert_same_steps, _piles, _run


@pytest.fixture(autouse=True)
def _cpu_only(arch):
    if arch != "cpu":
        pytest.skip("the option's CPU side; test_vulkan runs it on the SPIR-V path")


def _interleaved_copy(scene, name: str) -> np.ndarray:
    """The interleaved copy of BodyState field `name` as (n_worlds, n_bodies[, 2]), read
    back from its body-major layout."""
    bodies = scene.step_context().pool.bodies
    n_worlds, n_bodies = scene.n_worlds, scene.n_bodies
    copy = getattr(bodies, "interleaved_" + name).to_numpy()[: n_worlds * n_bodies]
    by_body = copy.reshape(n_bodies, n_worlds, *copy.shape[1:])
    return np.swapaxes(by_body, 0, 1)


def test_small_worlds_step_bit_for_bit_with_their_bodies_interleaved(arch, solver):
    """16 piling worlds (stacks, thrown circles, a hinged bar; they fall asleep and a third
    are woken), 100 steps in one launch each: states, contacts and events the same every
    step with and without; after the last step the copy holds the state body-major."""
    steps = []
    for interleave in (False, True):
        scene = _piles(arch, solver, n_worlds=16, interleave_small_worlds=interleave)
        steps.append(_run(scene)[0])
    _assert_same_steps(*steps)
    state = scene.get_state()
    assert np.abs(state.velocity).max() > 0.1  # (the pushed stacks still move)
    for name, _, _ in INTERLEAVED_BODY_FIELDS:
        if name in ("position", "angle", "velocity", "angular_velocity"):
            np.testing.assert_array_equal(_interleaved_copy(scene, name), getattr(state, name))


def test_a_step_without_contacts_bit_for_bit_with_its_bodies_interleaved(arch):
    """Cart-poles (no two bodies may touch: the contactless step), 60 steps, the poles
    swinging: the same states with and without."""
    states = []
    for interleave in (False, True):
        scene = scenes.cart_poles(
            8, arch=arch, solver="xpbd", step_options={"interleave_small_worlds": interleave}
        )
        state = scene.get_state()
        state.angular_velocity[:, 2] = np.linspace(-2.0, 2.0, 8)
        scene.set_state(state)
        for _ in range(60):
            scene.step(DT)
        states.append(scene.get_state())
    for name in ("position", "angle", "velocity", "angular_velocity"):
        np.testing.assert_array_equal(getattr(states[0], name), getattr(states[1], name))
    assert np.abs(states[1].angle[:, 2]).max() > 0.1
    np.testing.assert_array_equal(_interleaved_copy(scene, "angle"), states[1].angle)
