"""Scene.get_columns: chosen quantities of chosen bodies, every world's, as the columns of one
array (a learning task's observation in one launch), against the same values read from
get_state and combined in NumPy; bad columns and arrays refused by name."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.device.launching import host_array_count


def _worlds(arch, n_worlds=3):
    """A ground, a box and a ball in each world, each world started in its own state."""
    scene = fx.Scene(arch=arch, n_worlds=n_worlds, enable_sleep=False)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0)
    box = scene.add_box((0.3, 2.0), (1.0, 0.6), angle=0.2)
    ball = scene.add_circle((2.0, 3.0), 0.5)
    state = scene.get_state()
    rng = np.random.default_rng(5)
    state.position[:, 1:] += rng.uniform(-0.5, 0.5, (n_worlds, 2, 2))
    state.velocity[:, 1:] = rng.uniform(-3.0, 3.0, (n_worlds, 2, 2))
    state.angular_velocity[:, 1:] = rng.uniform(-2.0, 2.0, (n_worlds, 2))
    scene.set_state(state)
    for _ in range(7):
        scene.step(1 / 60)
    return scene, box, ball


def _reference(scene, columns, dtype):
    """The columns from get_state's float32 values, each product in float32, then dtype."""
    state = scene.get_state(dtype=np.float32)
    read = {
        "x": lambda b: state.position[:, b, 0],
        "y": lambda b: state.position[:, b, 1],
        "angle": lambda b: state.angle[:, b],
        "vx": lambda b: state.velocity[:, b, 0],
        "vy": lambda b: state.velocity[:, b, 1],
        "angular_velocity": lambda b: state.angular_velocity[:, b],
    }
    values = [np.float32(c[2] if len(c) == 3 else 1.0) * read[c[1]](c[0]) for c in columns]
    return np.stack(values, axis=1).astype(dtype)


def test_columns_are_the_state_they_are_read_from(arch):
    scene, box, ball = _worlds(arch)
    columns = [
        (box, "x"),
        (ball, "vy", -1.0),
        (box, "angle", 0.5),
        (ball, "angular_velocity"),
        (ball, "y", 1 / 3),
        (box, "vx", 3.0),
        (box, "x", -2.0),  # a body's quantity twice
        (0, "y"),  # the static ground
    ]
    for dtype in (np.float32, np.float64):
        got = scene.get_columns(columns, dtype=dtype)
        assert got.dtype == dtype and got.shape == (3, len(columns))
        np.testing.assert_array_equal(got, _reference(scene, columns, dtype))
    # Into the caller's array, its dtype over `dtype`: filled in place and returned.
    out = np.full((3, len(columns)), np.nan, np.float32)
    assert scene.get_columns(columns, dtype=np.float64, out=out) is out
    np.testing.assert_array_equal(out, _reference(scene, columns, np.float32))
    # Read from the device each time: the next step's values.
    scene.step(1 / 60)
    np.testing.assert_array_equal(
        scene.get_columns(columns, out=out), _reference(scene, columns, np.float32)
    )


def test_columns_of_a_state_set_by_hand(arch):
    """No step (the GPU code path's check on software Vulkan compiles no step): the columns
    of a state given with set_state, against that state rounded to float32."""
    scene = fx.Scene(arch=arch, n_worlds=4)
    for x in (0.0, 2.0, 4.0):
        scene.add_box((x, 1.0), (0.5, 0.5))
    state = scene.get_state()
    rng = np.random.default_rng(11)
    state.position[:] = rng.uniform(-9.0, 9.0, state.position.shape)
    state.angle[:] = rng.uniform(-3.0, 3.0, state.angle.shape)
    state.velocity[:] = rng.uniform(-5.0, 5.0, state.velocity.shape)
    state.angular_velocity[:] = rng.uniform(-5.0, 5.0, state.angular_velocity.shape)
    scene.set_state(state)
    columns = [(2, "vx", -1.0), (0, "x"), (1, "angular_velocity", 0.25), (2, "angle")]
    expected = np.stack(
        [
            -state.velocity[:, 2, 0].astype(np.float32),
            state.position[:, 0, 0].astype(np.float32),
            np.float32(0.25) * state.angular_velocity[:, 1].astype(np.float32),
            state.angle[:, 2].astype(np.float32),
        ],
        axis=1,
    )
    np.testing.assert_array_equal(scene.get_columns(columns, dtype=np.float32), expected)


def test_columns_move_one_host_array_a_call(arch):
    """The column list goes to the device once (kept for the scene's pool): a call's launch
    is given `out` alone, the one array a GPU copies there and back around it."""
    scene, box, ball = _worlds(arch, n_worlds=2)
    columns = [(box, "x"), (ball, "vy", -1.0)]
    out = scene.get_columns(columns)
    before = host_array_count()
    scene.get_columns(columns, out=out)
    scene.get_columns(columns, out=out)
    launches, arrays = np.subtract(host_array_count(), before)
    assert (launches, arrays) == (2, 2)


@pytest.mark.parametrize(
    ("columns", "error", "words"),
    [
        ([(1, "speed")], ValueError, r"columns\[0\]'s quantity must be one of"),
        ([(1, "x"), (9, "y")], ValueError, r"columns\[1\]'s body 9 out of range"),
        ([(1, "x", float("nan"))], ValueError, r"columns\[0\]'s scale must be finite"),
        ([(1, "x", "2")], TypeError, r"columns\[0\]'s scale must be a number"),
        ([(1.0, "x")], TypeError, r"columns\[0\]'s body must be an int"),
        ([(1, 0)], TypeError, r"columns\[0\]'s quantity must be a string"),
        ([1], TypeError, r"columns\[0\] must be \(body, quantity\)"),
        ([(1, "x", 1.0, 2.0)], TypeError, r"columns\[0\] must be \(body, quantity\)"),
        ([], ValueError, "at least one"),
        ("x", TypeError, "columns must be a sequence"),
    ],
)
def test_bad_columns_are_refused_by_name(columns, error, words):
    scene, _, _ = _worlds("cpu", n_worlds=2)
    with pytest.raises(error, match=words):
        scene.get_columns(columns)


def test_bad_out_and_dtype_are_refused_by_name():
    scene, box, _ = _worlds("cpu", n_worlds=2)
    columns = [(box, "x"), (box, "y")]
    cases = [
        (np.zeros((2, 3), np.float32), ValueError, r"out must have shape \(2, 2\)"),
        (np.zeros((2, 2), np.int32), ValueError, "out must be float32 or float64"),
        (np.zeros((2, 4), np.float32)[:, ::2], ValueError, "C-contiguous"),
        ([[0.0, 0.0], [0.0, 0.0]], TypeError, "out must be a NumPy array or a torch tensor"),
    ]
    for out, error, words in cases:
        with pytest.raises(error, match=words):
            scene.get_columns(columns, out=out)
    frozen = np.zeros((2, 2))
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="out must be writable"):
        scene.get_columns(columns, out=frozen)
    with pytest.raises(TypeError, match="dtype must be np.float32 or np.float64"):
        scene.get_columns(columns, dtype=np.int64)
