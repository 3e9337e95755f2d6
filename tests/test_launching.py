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


def test_ndarray_kernel_falls_back_to_taichi():
    holder = Holder(5)
    data = np.arange(5, dtype=np.float32) * 2
    take_array(holder, data)
    take_array(holder, data + 1)
    np.testing.assert_array_equal(holder.values.to_numpy(), data + 1)
    assert not take_array.short_path


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
