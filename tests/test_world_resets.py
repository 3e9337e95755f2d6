"""Resetting some worlds of a batch (Scene.reset_worlds, set_state(worlds=...)) and reading
observations into the caller's arrays (get_state(bodies=, dtype=, out=))."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.access.readout import joint_targets
from tests.helpers import DT, assert_bitwise_equal, fingerprint, machine_scene

N_WORLDS = 5
RESET = np.array([False, True, False, False, True])


def _stepped(steps: int, arch: str = "cpu") -> fx.Scene:
    scene = machine_scene(N_WORLDS, arch)
    for _ in range(steps):
        scene.step(DT)
    return scene


def _rows(state: fx.State, worlds) -> list[np.ndarray]:
    return [
        getattr(state, k)[worlds]
        for k in ("position", "angle", "velocity", "angular_velocity", "sleeping")
    ]


def test_reset_worlds_leaves_the_other_worlds_bitwise_untouched(arch):
    """The same run twice, once with worlds 1 and 4 reset at step 20 (after a push that
    the reset must drop in them and keep in the others): the other worlds step on bit for
    bit; the reset ones hold the built initial state, awake, with their motors' PID
    restarted."""
    plain, reset = _stepped(20, arch), _stepped(20, arch)
    push = np.zeros((N_WORLDS, 2))
    push[:, 0] = 50.0
    for scene in (plain, reset):
        scene.apply_force(3, push)
    initial = machine_scene(N_WORLDS, arch)  # its built state (before machine's throws)
    reset.reset_worlds(RESET)
    state = reset.get_state()
    for world in np.flatnonzero(RESET):
        np.testing.assert_array_equal(state.position[world], initial.get_state().position[0])
        np.testing.assert_array_equal(state.angle[world], initial.get_state().angle[0])
        assert not state.sleeping[world].any()
    # machine_scene throws bodies with set_state (another throw in each world): the built
    # state has them at rest, and the kinematic pusher at its built velocity.
    thrown_state = initial.get_state()
    thrown = (thrown_state.velocity[0] != thrown_state.velocity[1]).any(axis=1)
    built = np.where(thrown[:, None], 0.0, thrown_state.velocity[0])
    for world in np.flatnonzero(RESET):
        np.testing.assert_array_equal(state.velocity[world], built)
    for _ in range(25):
        plain.step(DT)
        reset.step(DT)
    a, b = fingerprint(plain), fingerprint(reset)
    for world in np.flatnonzero(~RESET):
        assert_bitwise_equal([x[world] for x in b], [x[world] for x in a], f"world {world}")


def test_a_reset_world_runs_as_a_fresh_scene():
    """After a reset, world 1 of the batch steps as a fresh one-world scene built the same
    way, given its reset state: no contact, impulse, force or PID state survives."""
    scene = _stepped(30)
    scene.reset_worlds([1])
    fresh = machine_scene(1, "cpu")
    fresh.set_state(fx.State(*(x[1:2] for x in _rows(scene.get_state(), slice(None)))))
    for _ in range(40):
        scene.step(DT)
        fresh.step(DT)
    a, b = fingerprint(scene), fingerprint(fresh)
    assert_bitwise_equal([x[1:2] for x in a], b, "world 1")


def test_reset_to_rows_of_a_state_or_a_snapshot():
    scene = _stepped(10)
    snapshot = scene.snapshot()
    earlier = scene.get_state()
    for _ in range(15):
        scene.step(DT)
    later = scene.get_state()
    # A State of n_worlds rows: each reset world takes its own row.
    scene.reset_worlds(RESET, earlier)
    now = scene.get_state()
    for got, was in zip(_rows(now, RESET)[:4], _rows(earlier, RESET)[:4], strict=True):
        np.testing.assert_array_equal(got, was)
    assert not now.sleeping[RESET].any()  # awake
    for got, kept in zip(_rows(now, ~RESET), _rows(later, ~RESET), strict=True):
        np.testing.assert_array_equal(got, kept)
    # One row per reset world, in order.
    rows = fx.State(*(x[[3, 0]] for x in _rows(earlier, slice(None))))
    scene.reset_worlds([0, 3], rows)
    np.testing.assert_array_equal(scene.get_state().position[3], earlier.position[0])
    # A snapshot: poses, velocities and motor targets of its rows.
    scene.set_joint_target(0, 9.0)
    scene.reset_worlds(2, snapshot)
    np.testing.assert_array_equal(scene.get_state().position[2], earlier.position[2])
    targets = joint_targets(scene.step_context(), 0)
    assert targets[2] == 2.0 and targets[1] == 9.0  # machine_scene's target, and the new one
    with pytest.raises(ValueError, match="state"):
        scene.reset_worlds([0, 1, 2], rows)  # two rows for three worlds
    with pytest.raises(TypeError, match="state"):
        scene.reset_worlds([0], "initial")
    with pytest.raises(ValueError, match="world"):
        scene.reset_worlds([N_WORLDS])
    with pytest.raises(TypeError, match="worlds"):
        scene.reset_worlds(None)
    other = fx.Scene(n_worlds=N_WORLDS, arch="cpu")
    other.add_circle((0.0, 0.0), 1.0)
    with pytest.raises(ValueError, match="another scene"):
        other.reset_worlds([0], snapshot)


def test_set_state_of_some_worlds_writes_their_rows_only():
    scene = _stepped(10)
    before = scene.get_state()
    wanted = before.copy()
    wanted.position[:, :, 1] += 1.0
    wanted.position[:] = wanted.position.astype(np.float32)  # as the device holds it
    scene.set_state(wanted, worlds=RESET)
    after = scene.get_state()
    np.testing.assert_array_equal(after.position[RESET], wanted.position[RESET])
    np.testing.assert_array_equal(after.position[~RESET], before.position[~RESET])
    one = fx.State(*(x[:1] for x in _rows(wanted, slice(None))))
    scene.set_state(one, worlds=3)
    np.testing.assert_array_equal(scene.get_state().position[3], wanted.position[0])
    with pytest.raises(ValueError, match="state.position"):
        bad = wanted.copy()
        bad.position[1, 0, 0] = np.nan
        scene.set_state(bad, worlds=[1])
    np.testing.assert_array_equal(scene.get_state().position[1], wanted.position[1])


def test_get_state_gathers_a_subset_in_the_dtype_asked():
    scene = _stepped(12)
    full = scene.get_state()
    bodies = [7, 2, 5]
    for dtype in (np.float32, np.float64):
        part = scene.get_state(bodies=bodies, dtype=dtype)
        assert part.position.dtype == dtype and part.sleeping.dtype == bool
        for got, want in zip(_rows(part, slice(None)), _rows(full, slice(None)), strict=True):
            np.testing.assert_array_equal(got, want[:, bodies].astype(got.dtype))
    with pytest.raises(TypeError, match="dtype"):
        scene.get_state(dtype=np.int32)


def _out(library, dtype, n_worlds, k):
    zeros = library.zeros
    return fx.State(
        zeros((n_worlds, k, 2), dtype=dtype),
        zeros((n_worlds, k), dtype=dtype),
        zeros((n_worlds, k, 2), dtype=dtype),
        zeros((n_worlds, k), dtype=dtype),
        zeros((n_worlds, k), dtype=library.bool if library is not np else bool),
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_get_state_fills_numpy_arrays_in_place(dtype, arch):
    scene = _stepped(12, arch)
    full = scene.get_state()
    out = _out(np, dtype, N_WORLDS, 3)
    kept = out.position
    assert scene.get_state(bodies=[1, 4, 0], out=out) is out
    assert out.position is kept
    for got, want in zip(_rows(out, slice(None)), _rows(full, slice(None)), strict=True):
        np.testing.assert_array_equal(got, want[:, [1, 4, 0]].astype(got.dtype))
    partial = fx.State(np.zeros((N_WORLDS, scene.n_bodies, 2), dtype), None, None, None, None)
    scene.get_state(out=partial)
    np.testing.assert_array_equal(partial.position, full.position.astype(dtype))


def test_get_state_refuses_arrays_it_cannot_fill():
    scene = _stepped(1)
    n, k = N_WORLDS, 2
    good = _out(np, np.float32, n, k)
    cases = {
        "out.position": dict(position=np.zeros((n, k + 1, 2), np.float32)),
        "out.angle": dict(angle=np.zeros((n, k), np.float64)),  # mixed float dtypes
        "out.velocity": dict(velocity=np.zeros((n, 2, k), np.float32).transpose(0, 2, 1)),
        "out.sleeping": dict(sleeping=np.zeros((n, k), np.int8)),
    }
    for name, change in cases.items():
        fields = {
            key: getattr(good, key)
            for key in ("position", "angle", "velocity", "angular_velocity", "sleeping")
        }
        fields.update(change)
        with pytest.raises(ValueError, match=name):
            scene.get_state(bodies=[0, 1], out=fx.State(**fields))
    read_only = _out(np, np.float32, n, k)
    read_only.angle.flags.writeable = False
    with pytest.raises(ValueError, match="writable"):
        scene.get_state(bodies=[0, 1], out=read_only)
    with pytest.raises(TypeError, match="out"):
        scene.get_state(out=[])
    with pytest.raises(TypeError, match="out.position"):
        scene.get_state(bodies=[0, 1], out=fx.State([[0.0]], None, None, None, None))


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_get_state_fills_torch_tensors_in_place(dtype_name, arch):
    """Into CPU tensors on a CPU backend, CUDA tensors on CUDA (the kernel writes the
    tensor's own memory: its data pointer stays)."""
    torch = pytest.importorskip("torch")
    dtype = getattr(torch, dtype_name)
    scene = _stepped(12, arch)
    device = "cuda" if scene.backend == "cuda" else "cpu"
    if device == "cpu" and scene.backend not in ("x64", "arm64"):  # Vulkan, Metal: refused
        with pytest.raises(ValueError, match="out.position: torch tensors"):
            scene.get_state(bodies=[3, 1], out=_out(torch, dtype, N_WORLDS, 2))
        return
    full = scene.get_state()
    out = fx.State(*(t.to(device) for t in _rows(_out(torch, dtype, N_WORLDS, 2), slice(None))))
    pointer = out.position.data_ptr()
    scene.get_state(bodies=[3, 1], out=out)
    assert out.position.data_ptr() == pointer
    for got, want in zip(_rows(out, slice(None)), _rows(full, slice(None)), strict=True):
        got = got.cpu().numpy()
        np.testing.assert_array_equal(got, want[:, [3, 1]].astype(got.dtype))
    if device == "cuda":  # a CPU tensor on the CUDA backend: refused by name
        with pytest.raises(ValueError, match="out.position"):
            scene.get_state(bodies=[3, 1], out=_out(torch, dtype, N_WORLDS, 2))
    bad = _out(torch, dtype, N_WORLDS, 2)
    bad.position = bad.position.transpose(0, 1)
    with pytest.raises(ValueError, match="out.position"):
        scene.get_state(bodies=[3, 1], out=bad)


def test_replicate_copies_a_one_world_scene_into_every_world():
    """replicate(4) of a one-world machine scene 10 steps in (per-world values, a motor
    target, a disabled body and a pending push carried over): every world of the copy steps
    bit for bit as a one-world copy does, and as a 4-world scene given the same values,
    state, targets and push by hand (no contacts remembered: as after set_state)."""
    one = machine_scene(1, "cpu")
    one.set_body_params([2], mass=3.0, elasticity=0.5)
    one.set_gravity((0.5, -9.0))
    one.set_joint_target(0, 1.25)
    for _ in range(10):
        one.step(DT)
    one.set_enabled(5, False)
    one.apply_force(4, (30.0, 0.0))
    copies, single = one.replicate(4), one.replicate(1)
    assert copies.n_worlds == 4 and copies.step_count == one.step_count == 10
    np.testing.assert_array_equal(copies.get_body_params()["mass"][:, 2], 3.0)
    np.testing.assert_array_equal(copies.get_gravity(), [[0.5, -9.0]] * 4)
    by_hand = machine_scene(4, "cpu")
    by_hand.set_body_params([2], mass=3.0, elasticity=0.5)
    by_hand.set_gravity((0.5, -9.0))
    by_hand.set_state(fx.State(*(np.repeat(a, 4, axis=0) for a in _rows(one.get_state(), [0]))))
    by_hand.set_joint_target(0, 1.25)
    by_hand.set_enabled(5, False)
    by_hand.apply_force(4, (30.0, 0.0))
    for _ in range(25):
        for scene in (copies, single, by_hand):
            scene.step(DT)
    final = copies.get_state()
    assert np.abs(final.position - _rows(one.get_state(), [0])[0]).max() > 0.01  # it moved
    for other in (_rows(final, w) for w in range(1, 4)):
        for a, b in zip(other, _rows(final, 0), strict=True):
            np.testing.assert_array_equal(a, b)
    for scene in (single, by_hand):
        for a, b in zip(_rows(final, [0]), _rows(scene.get_state(), [0]), strict=True):
            np.testing.assert_array_equal(a, b)
    with pytest.raises(ValueError, match="one-world"):
        copies.replicate(2)
    with pytest.raises(ValueError, match="n_worlds"):
        one.replicate(0)
