"""Small worlds' state interleaved (StepOptions.interleave_small_worlds,
solver/interleaved.py): the substeps work on their bodies and pairs laid out world-minor,
entry i of world w at i * stride + w (stride n_worlds + interleaved.PAD where the pool has
room), so that a GPU warp's worlds read neighbouring addresses. The same arithmetic on the
same values: every step bit for bit as without, on the small worlds' one launch (the GPU's
path, counted on the CPU with fold_on_cpu) and on a step without contacts; and the state is
laid out as it says (a layout that is not the one the option claims, even one where two
worlds share entries, would still step bit for bit on a CPU, a world at a time). On GPU
backends it is on by default; test_vulkan runs it there."""

import numpy as np
import pytest
import taichi as ti

from fx2d_gpu import scenes
from fx2d_gpu.device import INTERLEAVED_BODY_FIELDS
from fx2d_gpu.physics.solver import interleaved

from .helpers import DT
from .test_small_worlds_one_launch import _assert_same_steps, _piles, _run


@pytest.fixture(autouse=True)
def _cpu_only(arch):
    if arch != "cpu":
        pytest.skip("the option's CPU side; test_vulkan runs it on the SPIR-V path")


def _stride(scene, entries: int, capacity: int) -> int:
    """The stride the interleaved layout should take for `entries` entries a world in
    `capacity` (the test's pools have room for the pad: checked here)."""
    stride = scene.n_worlds + interleaved.PAD
    assert entries * stride <= capacity
    return stride


def _interleaved_copy(scene, name: str) -> np.ndarray:
    """The interleaved copy of BodyState field `name` as (n_worlds, n_bodies[, 2]), read
    back from its body-major layout."""
    bodies = scene.step_context().pool.bodies
    n_worlds, n_bodies = scene.n_worlds, scene.n_bodies
    copy = getattr(bodies, "interleaved_" + name).to_numpy()
    stride = _stride(scene, n_bodies, len(copy))
    by_body = copy[: n_bodies * stride].reshape(n_bodies, stride, *copy.shape[1:])
    return np.swapaxes(by_body[:, :n_worlds], 0, 1)


def _prepared_by_world(scene, interleaved: bool) -> list[np.ndarray]:
    """Each world's prepared contacts of the last step, a row a pair: PreparedContacts'
    solver_mass and arm_a (its points past the pair's point count hold stale values: NaN
    there), read at pair j of world w: j * stride + w where `interleaved`, else the
    world's range of the pair list."""
    pool = scene.step_context().pool
    n_worlds, n_bodies = scene.n_worlds, scene.n_bodies
    starts = pool.manifolds.pair_start.to_numpy()[: n_worlds * n_bodies + 1 : n_bodies]
    points = pool.manifolds.point_count.to_numpy()
    masses = pool.prepared.solver_mass.to_numpy()
    arms = pool.prepared.arm_a.to_numpy()  # (pairs, points, 2)
    stride = _stride(scene, int(np.diff(starts).max()), len(masses))
    rows = []
    for world in range(n_worlds):
        listed = np.arange(starts[world], starts[world + 1])
        at = (listed - starts[world]) * stride + world if interleaved else listed
        world_arms = arms[at].copy()
        world_arms[np.arange(arms.shape[1])[None, :] >= points[listed][:, None]] = np.nan
        rows.append(
            np.concatenate([masses[at], world_arms.reshape(len(at), 2 * arms.shape[1])], axis=1)
        )
    return rows


def test_small_worlds_step_bit_for_bit_with_their_bodies_interleaved(arch, solver):
    """16 piling worlds (stacks, thrown circles, a hinged bar; they fall asleep and a third
    are woken), 100 steps in one launch each: states, contacts and events the same every
    step with and without; after the last step the bodies' copy holds the state
    body-major, and the prepared contacts are those of the list's order, world-minor.
    Interleaved as CUDA steps them, their first substep up to the narrow phase run first
    a thread an item (StepOptions.small_worlds_begin_by_item: the prepared contacts
    written at their world-minor places from a pair's thread; one kernel build, not two,
    for the suite's time)."""
    steps, prepared = [], []
    for interleave in (False, True):
        scene = _piles(
            arch,
            solver,
            n_worlds=16,
            interleave_small_worlds=interleave,
            small_worlds_begin_by_item=interleave,
        )
        steps.append(_run(scene)[0])
        prepared.append(_prepared_by_world(scene, interleave))
    _assert_same_steps(*steps)
    assert sum(len(rows) for rows in prepared[0]) > 16  # (the worlds touch)
    for world, (listed, world_minor) in enumerate(zip(*prepared, strict=True)):
        np.testing.assert_array_equal(world_minor, listed, err_msg=f"world {world}")
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


@ti.kernel
def _pair_layout(
    most: ti.i32, n_worlds: ti.i32, capacity: ti.i32, world: ti.i32, first: ti.i32
) -> ti.math.ivec2:
    return interleaved.pair_layout(most, n_worlds, capacity, world, first)


@ti.kernel
def _body_stride(n_worlds: ti.i32, n_bodies: ti.i32, capacity: ti.i32) -> ti.i32:
    return interleaved.body_stride(n_worlds, n_bodies, capacity)


def _fits(stride: int, n_worlds: int, entries: int, capacity: int) -> bool:
    """Whether entry i of world w at i * stride + w stays in `capacity` for every one of
    `entries` entries of every world (brute force)."""
    return all(0 <= i * stride + w < capacity for w in range(n_worlds) for i in range(entries))


def test_pairs_interleave_only_where_every_worlds_fit(arch):
    """pair_layout against brute force: (n_worlds + PAD, world) where every world's pairs
    (the most a world has, `most`) fit the capacity at that stride, else (n_worlds, world)
    where they fit at that one, else the list's own order (1, first pair); body_stride the
    same for a world's bodies, never below n_worlds (the copies hold n_worlds * n_bodies)."""
    pad, first = interleaved.PAD, 37
    for capacity in (64, 300, 4096):
        for n_worlds in (1, 3, 16, 64, 65):
            for most in (0, 1, 3, 4, 5, 64, 65):
                expected = (1, first)
                if _fits(n_worlds, n_worlds, most, capacity):
                    expected = (n_worlds, n_worlds - 1)
                if _fits(n_worlds + pad, n_worlds, most, capacity):
                    expected = (n_worlds + pad, n_worlds - 1)
                got = tuple(_pair_layout(most, n_worlds, capacity, n_worlds - 1, first))
                assert got == expected, (capacity, n_worlds, most)
                if most * n_worlds <= capacity:  # (a pool holds its bodies)
                    body = (
                        n_worlds + pad
                        if _fits(n_worlds + pad, n_worlds, most, capacity)
                        else n_worlds
                    )
                    assert _body_stride(n_worlds, most, capacity) == body, (capacity, n_worlds)
