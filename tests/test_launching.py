"""The short kernel-launch path gives what Taichi's own call gives."""

import gc

import numpy as np
import pytest
import taichi as ti

from fx2d_gpu.device.launching import QuickKernel, host_array_count, quick


class Holder:
    """Fields passed as one template argument, like the device pool."""

    def __init__(self, n):
        self.values = ti.field(ti.f32, n)
        self.count = ti.field(ti.i32, ())


@ti.func
def add_scaled(h: ti.template(), i, scale):
    h.values[i] += scale * i


@quick
@ti.kernel
def accumulate(
    h: ti.template(), stage: ti.template(), n: ti.i32, scale: ti.f32, offset: ti.math.vec2
) -> ti.f32:
    total = 0.0
    for i in range(n):
        stage(h, i, scale)
        total += h.values[i]
    h.count[None] += 1
    return total + offset.x + offset.y


@quick
@ti.kernel
def take_array(h: ti.template(), data: ti.types.ndarray(dtype=ti.f32, ndim=1)):
    for i in range(data.shape[0]):
        h.values[i] = data[i]


def reference(n, scales, size):
    values = np.zeros(size, np.float64)
    totals = []
    for scale in scales:
        values[:n] += scale * np.arange(n)
        totals.append(values[:n].sum())
    return values, totals


def test_repeated_calls_match_numpy():
    holder = Holder(64)
    scales = [0.5, 1.25, -2.0, 3.0]
    totals = [accumulate(holder, add_scaled, 40, s, ti.math.vec2(1.0, 2.0)) for s in scales]
    values, expected = reference(40, scales, 64)
    np.testing.assert_allclose(holder.values.to_numpy(), values, rtol=1e-6)
    np.testing.assert_allclose(totals, np.array(expected) + 3.0, rtol=1e-5)
    assert holder.count[None] == len(scales)
    assert isinstance(accumulate, QuickKernel) and accumulate.remembered  # short path ran


def test_keyword_calls_bind_like_positional_ones():
    """Launches by keyword (the solver's launchers pass 10-25 arguments so) take the same
    compiled kernel and the short path, give what positional calls give, in any keyword
    order, and a wrong name is Python's TypeError before anything runs."""
    positional, by_keyword = Holder(32), Holder(32)
    offset = ti.math.vec2(0.5, -1.0)
    totals = [accumulate(positional, add_scaled, 20, s, offset) for s in (1.5, -0.25)]
    remembered = accumulate.remembered
    keyword_totals = [
        accumulate(h=by_keyword, stage=add_scaled, n=20, scale=1.5, offset=offset),
        accumulate(offset=offset, scale=-0.25, n=20, stage=add_scaled, h=by_keyword),
    ]
    assert keyword_totals == totals
    np.testing.assert_array_equal(by_keyword.values.to_numpy(), positional.values.to_numpy())
    assert accumulate.remembered == remembered + 1  # the new holder's instance only
    count = by_keyword.count[None]
    with pytest.raises(TypeError):
        accumulate(h=by_keyword, stage=add_scaled, n=20, scale=1.0, shift=offset)
    assert by_keyword.count[None] == count


def test_new_template_objects_are_not_confused():
    """A new holder (even at a freed one's address) gets its own compiled kernel."""
    for size in (8, 16, 8, 32):
        holder = Holder(size)
        accumulate(holder, add_scaled, size, 1.0, ti.math.vec2(0.0, 0.0))
        accumulate(holder, add_scaled, size, 2.0, ti.math.vec2(0.0, 0.0))
        np.testing.assert_allclose(holder.values.to_numpy(), 3.0 * np.arange(size))
        del holder
        gc.collect()


@quick
@ti.kernel
def scatter_scaled(
    holders: ti.template(),
    names: ti.template(),
    values: ti.types.ndarray(dtype=ti.f32, ndim=1),
    rows: ti.types.ndarray(),
    scale: ti.f32,
):
    """holders[k].<names[k]>[rows[i]] = scale * values[i] for every holder (a transfer's
    shape: tuples of templates, a typed array and one whose dtype the call chooses)."""
    for i in range(values.shape[0]):
        for k in ti.static(range(len(holders))):
            field = ti.static(getattr(holders[k], names[k]))
            field[rows[i]] = scale * values[i]


def test_array_kernels_take_the_short_path_and_match_taichis_own():
    """Kernels given arrays launch through the short path once Taichi's has compiled the
    instance: NumPy arrays and Taichi ndarrays give what Taichi's call gives, an instance
    per dtype of an untyped array, and new tuples of the same templates (the transfers
    make them at every call) share one instance. An array Taichi refuses is refused at
    every call; one the short path does not set goes Taichi's way."""
    holders = [Holder(8) for _ in range(2)]
    rng = np.random.default_rng(0)
    expected = np.zeros(8)
    for step in range(6):
        values = rng.random(4).astype(np.float32)
        rows = rng.permutation(8)[:4].astype(np.int32 if step % 2 else np.int64)
        if step == 5:
            on_device = ti.ndarray(ti.f32, 4)
            on_device.from_numpy(values)
            given = on_device
        else:
            given = values
        scatter_scaled(tuple(holders), tuple(["values"] * 2), given, rows, 0.5 * step)
        expected[rows] = np.float32(0.5 * step) * values
        for holder in holders:
            np.testing.assert_array_equal(holder.values.to_numpy(), expected.astype(np.float32))
    assert scatter_scaled.short_path
    # One instance per rows dtype and per kind of array, though every call made new tuples.
    assert scatter_scaled.remembered == 3
    with pytest.raises(ValueError, match="dtype"):
        scatter_scaled(tuple(holders), ("values", "values"), values.astype(np.float64), rows, 1.0)
    with pytest.raises(ValueError, match="dtype"):
        scatter_scaled(tuple(holders), ("values", "values"), values.astype(np.float64), rows, 1.0)
    strided = np.zeros(8, np.float32)[::2]
    with pytest.raises(ValueError, match="contiguous"):  # Taichi's own refusal
        scatter_scaled(tuple(holders), ("values", "values"), strided, rows, 1.0)
    for holder in holders:
        np.testing.assert_array_equal(holder.values.to_numpy(), expected.astype(np.float32))


def test_a_short_path_launch_is_taichis_launch_bit_for_bit():
    """take_array through the short path and through Taichi's own call (the kernel
    unwrapped) leave the same values, over arrays of several sizes."""
    short, own = Holder(16), Holder(16)
    remembered = take_array.remembered
    for size in (16, 3, 9, 0, 16):
        data = np.random.default_rng(size).random(size).astype(np.float32)
        take_array(short, data)
        take_array.__wrapped__(own, data)
        np.testing.assert_array_equal(short.values.to_numpy(), own.values.to_numpy())
    assert take_array.remembered == remembered + 1


class Watched(Holder):
    """A Holder that counts the attribute lookups made on it (as a Taichi data_oriented
    object runs Python for each: the pool's groups)."""

    lookups = 0

    def __getattribute__(self, name):
        Watched.lookups += 1
        return object.__getattribute__(self, name)


def test_a_short_path_launch_asks_its_template_objects_nothing():
    """Once compiled, a launch keys and matches its template objects by their type and
    identity alone: no attribute of theirs is looked up (isinstance asked each one for its
    __class__, five times, which a data_oriented object answers in Python), and the
    launches still act on them."""
    holder = Watched(64)
    offset = ti.math.vec2(0.0, 0.0)
    accumulate(holder, add_scaled, 40, 1.0, offset)  # Taichi's path: compiles, reads fields
    before = Watched.lookups
    totals = [accumulate(holder, add_scaled, 40, 1.0, offset) for _ in range(5)]
    assert Watched.lookups == before
    np.testing.assert_allclose(totals, [780.0 * k for k in range(2, 7)], rtol=1e-6)


@quick
@ti.kernel
def answer_ints(h: ti.template(), shift: ti.i32) -> ti.types.vector(5, ti.i32):
    h.count[None] += 1
    return ti.Vector([shift, -shift, h.count[None], 2**31 - 1, -(2**31)], ti.i32)


@quick
@ti.kernel
def answer_unsigned(shift: ti.u32) -> ti.types.vector(2, ti.u32):
    return ti.Vector([shift, ti.u32(4294967295) - shift], ti.u32)


@quick
@ti.kernel
def answer_floats(h: ti.template(), scale: ti.f32) -> ti.math.vec3:
    return ti.math.vec3(scale * h.values[1], -scale, 1.0 / 3.0)


def test_returned_vectors_are_taichis_numbers():
    """A kernel that returns a vector gives, through the short path, the numbers Taichi's
    own call gives (the kernel unwrapped), entry for entry, of signed and unsigned
    integers at their extremes and of floats; as a tuple, which the engine's callers
    iterate over and unpack."""
    holder = Holder(4)
    holder.values[1] = 0.1
    for shift in (0, 7, -12345):
        answer_ints(holder, shift)  # (a first call takes Taichi's path)
        short = answer_ints(holder, shift)
        own = answer_ints.__wrapped__(holder, shift)
        assert isinstance(short, tuple) and len(short) == 5
        assert list(short[:2]) + list(short[3:]) == [int(v) for i, v in enumerate(own) if i != 2]
        assert short[2] + 1 == own[2]  # (the count went on by the own call)
    for shift in (0, 1, 2**31 + 5):
        answer_unsigned(shift)
        assert answer_unsigned(shift) == tuple(int(v) for v in answer_unsigned.__wrapped__(shift))
        assert answer_unsigned(shift) == (shift, 4294967295 - shift)
    for scale in (1.0, -2.5, 1e30):
        answer_floats(holder, scale)
        short = answer_floats(holder, scale)
        own = answer_floats.__wrapped__(holder, scale)
        assert short == tuple(float(v) for v in own)
        assert short[2] == float(np.float32(1.0) / np.float32(3.0))
    assert answer_ints.remembered and answer_unsigned.remembered and answer_floats.remembered


def test_host_arrays_are_counted_per_launch():
    """host_array_count: a launch given a NumPy array (copied to a GPU and back around it,
    with a wait on each side) counts once, with its arrays; a Taichi ndarray (on the device)
    and a launch without arrays count nothing."""
    holder = Holder(5)
    data = np.arange(5, dtype=np.float32)
    on_device = ti.ndarray(ti.f32, 5)
    launches, arrays = host_array_count()
    take_array(holder, data)
    take_array(holder, data)
    assert host_array_count() == (launches + 2, arrays + 2)
    take_array(holder, on_device)
    accumulate(holder, add_scaled, 5, 1.0, ti.math.vec2(0.0, 0.0))
    assert host_array_count() == (launches + 2, arrays + 2)


def undefined_name_here(i):
    return i + not_defined_first  # noqa: F821


def undefined_name_there(i):
    return i * 2 + not_defined_second  # noqa: F821


def test_source_positions_in_errors_are_each_nodes_own():
    """Taichi's source-position text is memoised per place (launching.cache_source_positions,
    installed with the backend): every error still points at its own line and column."""
    import inspect

    import pytest

    from fx2d_gpu.device import runtime

    runtime.ensure_initialized("cpu")
    messages = []
    for python_func, name in (
        (undefined_name_here, "not_defined_first"),
        (undefined_name_there, "not_defined_second"),
    ):
        func = ti.func(python_func)
        for _ in range(2):  # the second time from the memo

            @ti.kernel
            def broken(f: ti.template()) -> ti.i32:
                return f(3)

            with pytest.raises(ti.TaichiCompilationError) as error:
                broken(func)
            text = str(error.value)
            lines, first = inspect.getsourcelines(python_func)
            assert f"line {first + 1}, in {python_func.__name__}" in text
            source = lines[1].rstrip("\n")
            caret_line = text.split(source + "\n", 1)[1].splitlines()[0]
            column = source.index(name)
            assert caret_line[column : column + len(name)] == "^" * len(name)
            messages.append(text)
    assert messages[0] == messages[1] and messages[2] == messages[3]
