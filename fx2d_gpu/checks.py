"""Argument checks: the one home of the as_* rules every public entry point applies.

Each as_* function takes a value and the argument's name and returns the value in the form
the engine stores (a float, a float64 array, an int, a bool ...), or raises TypeError (a
value of the wrong type) or ValueError (the wrong shape, not finite, out of range), the
message naming the argument: "mass must be >= 0.0, got -1.0". A function that checks n
values at once names the first bad one `name[i]` and raises what its one-value form raises.

Real numbers are ints and floats (NumPy's too), never bools, complex numbers or strings,
which NumPy's float conversion would silently accept ("1" -> 1.0, 1+5j -> 1.0). Every
number must fit float32, the device's type (FLOAT32_MAX).
"""

from __future__ import annotations

import math

import numpy as np

FLOAT32_MAX = 3.4e38
"""Largest magnitude of any input number: float32's range on the device."""


def _real_array(value, name: str, what: str) -> np.ndarray:
    """`value` as a new float64 array, if it holds ints or floats: TypeError (saying `what`
    was expected) for strings, complex numbers, bools, objects and ragged sequences, which
    a float conversion would turn into numbers (\"1\" -> 1.0) or truncate (1+5j -> 1.0)."""
    try:
        raw = np.asarray(value)
    except ValueError:
        raise TypeError(f"{name} must be {what}, got a ragged sequence") from None
    if raw.dtype.kind not in "iuf":
        # An array's dtype, not its repr: a million strings would fill the message.
        got = (
            f"an array of dtype {raw.dtype}"
            if isinstance(value, np.ndarray) or raw.size > 8
            else repr(value)
        )
        raise TypeError(f"{name} must be {what}, got {got}")
    return raw.astype(np.float64)


def as_real(
    value,
    name: str,
    *,
    minimum: float | None = None,
    positive: bool = False,
    limit: float = FLOAT32_MAX,
) -> float:
    """Check a number: `value` as a finite float within +-limit.

    Args:
        value (float): a number (a bool is not one).
        name: the argument's name, for the error messages.
        minimum: if given, the least value allowed.
        positive: require value > 0.
        limit: the bound on its magnitude (float32's range by default).

    Raises:
        TypeError: `value` is not a number.
        ValueError: `value` is not finite, beyond the limit (an int past float64's range
            too), not positive (if required) or below the minimum.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    try:
        value = float(value)
    except OverflowError:  # a Python int past float64's range (a scene file can hold one)
        raise ValueError(
            f"{name} must be within float32's range (|x| <= {FLOAT32_MAX:g}), "
            f"got an integer of {value.bit_length()} bits"
        ) from None
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if abs(value) > FLOAT32_MAX:
        raise ValueError(
            f"{name} must be within float32's range (|x| <= {FLOAT32_MAX:g}), got {value}"
        )
    if abs(value) >= limit:
        raise ValueError(f"{name} must be within +-{limit:g}, got {value}")
    if positive and value <= 0.0:
        raise ValueError(f"{name} must be positive, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def as_reals(
    values,
    name: str,
    n: int,
    *,
    minimum: float | None = None,
    positive: bool = False,
    limit: float = FLOAT32_MAX,
) -> np.ndarray:
    """Check n numbers: (n,) float64 from one number (for all n) or n numbers.

    Each is held to as_real's rules (`minimum`, `positive`, `limit`); the first that breaks
    one raises as_real's error, named `name[i]`.

    Args:
        values (float | array_like): one number or (n,).
        name: the argument's name, for the error messages.
        n: how many numbers.
        minimum: if given, the least value allowed.
        positive: require every value > 0.
        limit: the bound on their magnitude.

    Raises:
        TypeError: values are not numbers.
        ValueError: values of another shape, or a value that breaks a rule.
    """
    if np.ndim(values) == 0:
        return np.full(n, as_real(values, name, minimum=minimum, positive=positive, limit=limit))
    array = as_numbers(values, name, (n,))
    if all_within(array, limit, minimum=minimum, positive=positive):
        return array
    ok = np.isfinite(array) & (np.abs(array) <= FLOAT32_MAX) & (np.abs(array) < limit)
    if positive:
        ok &= array > 0.0
    if minimum is not None:
        ok &= array >= minimum
    for i in np.flatnonzero(~ok)[:1]:
        as_real(float(array[i]), f"{name}[{i}]", minimum=minimum, positive=positive, limit=limit)
    return array


def all_within(
    array: np.ndarray,
    limit: float = FLOAT32_MAX,
    *,
    minimum: float | None = None,
    positive: bool = False,
) -> bool:
    """Whether every number of a float array is finite, within float32's range and +-limit,
    at least `minimum` (if given) and above 0 (if `positive`): a large array's common case
    in two reductions (its least and greatest value; NaN makes both NaN, and every
    comparison with NaN is False), where an element-wise test allocates a temporary array
    per rule. False sends the caller to its element-wise test, which names the first bad
    element."""
    if array.size == 0:
        return True
    bound = min(limit, math.nextafter(FLOAT32_MAX, math.inf))  # |x| < bound
    lowest, highest = float(array.min()), float(array.max())
    within = -bound < lowest and highest < bound
    if minimum is not None:
        within = within and lowest >= minimum
    if positive:
        within = within and lowest > 0.0
    return within


def as_vector2(value, name: str, limit: float = FLOAT32_MAX) -> np.ndarray:
    """Check a 2-vector: `value` as a (2,) float64 array, components finite and within +-limit.

    Args:
        value (array_like): two numbers.
        name: the argument's name, for the error messages.
        limit: the bound on each component's magnitude (float32's range by default).

    Returns:
        A new (2,) float64 array.

    Raises:
        TypeError: `value` is not a pair of numbers.
        ValueError: `value` has another shape, is not finite, or is beyond the limit.
    """
    arr = _real_array(value, name, "a pair of numbers")
    if arr.shape != (2,):
        raise ValueError(f"{name} must have 2 components, got shape {arr.shape}")
    # Two Python floats: a scene file calls this for every body, and NumPy's reductions
    # cost microseconds each on two numbers.
    x, y = float(arr[0]), float(arr[1])
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if max(abs(x), abs(y)) > FLOAT32_MAX:
        raise ValueError(
            f"{name} must be within float32's range (|x| <= {FLOAT32_MAX:g}), got {value!r}"
        )
    if max(abs(x), abs(y)) >= limit:
        raise ValueError(f"{name} must be within +-{limit:g}, got {value!r}")
    return arr


def as_vectors2(values, name: str, n: int, limit: float = FLOAT32_MAX) -> np.ndarray:
    """Check n 2-vectors: (n, 2) float64 from one pair (for all n) or n pairs.

    Each is held to as_vector2's rules; the first that breaks one raises as_vector2's error,
    named `name[i]`.

    Args:
        values (array_like): one pair, (2,), or (n, 2).
        name: the argument's name, for the error messages.
        n: how many pairs.
        limit: the bound on each component's magnitude.

    Raises:
        TypeError: values are not numbers, or ragged.
        ValueError: values of another shape, or a pair that breaks a rule.
    """
    try:
        shape = np.shape(values)
    except ValueError:
        raise TypeError(f"{name} must be a pair of numbers or ({n}, 2) numbers") from None
    if shape == (2,):
        return np.tile(as_vector2(values, name, limit), (n, 1))
    array = as_numbers(values, name, (n, 2))
    if all_within(array, limit):
        return array
    ok = (np.isfinite(array) & (np.abs(array) <= FLOAT32_MAX) & (np.abs(array) < limit)).all(1)
    for i in np.flatnonzero(~ok)[:1]:
        as_vector2(array[i], f"{name}[{i}]", limit)
    return array


def as_points(points, name: str, limit: float = FLOAT32_MAX) -> np.ndarray:
    """Check a list of points: (k, 2) float64, finite and within +-limit.

    Args:
        points (array_like): a sequence of (x, y) pairs.
        name: the argument's name, for the error messages.
        limit: the bound on each coordinate's magnitude.

    Raises:
        TypeError: points are not numbers.
        ValueError: points not of shape (k, 2), not finite, or beyond the limit.
    """
    array = _real_array(points, name, "a sequence of (x, y) pairs")
    if array.ndim != 2 or array.shape[1] != 2:
        raise ValueError(f"{name} must have shape (k, 2), got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    if len(array) and np.abs(array).max() >= limit:
        raise ValueError(f"{name} must be within +-{limit:g}")
    return array


def as_numbers(values, name: str, shape: tuple) -> np.ndarray:
    """Check an array of numbers: a float64 copy of `values`, of exactly `shape`.

    Args:
        values (array_like): ints or floats (not bools).
        name: the argument's name, for the error messages.
        shape: the shape required.

    Raises:
        TypeError: values are not numbers, or ragged.
        ValueError: values of another shape.
    """
    array = _real_array(values, name, "numbers")
    if array.shape != shape:
        raise ValueError(f"{name} must be one value or have shape {shape}, got {array.shape}")
    return array


def as_real_array(values, name: str) -> np.ndarray:
    """`values` as a float64 array of any shape, of real numbers (as_numbers' rule).

    Raises:
        TypeError: values not real numbers, or ragged, naming `name`.
    """
    try:
        shape = np.shape(values)
    except ValueError:
        raise TypeError(f"{name} must be numbers, got a ragged sequence") from None
    return as_numbers(values, name, shape)


def as_bool(value, name: str) -> bool:
    """A bool (Python's or NumPy's), else TypeError naming `name`: 0 and 1 are not bools."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def as_bools(values, name: str, n: int) -> list[bool]:
    """n bools from one bool (for all) or n (an array of bools), as as_bool takes them."""
    if np.ndim(values) == 0:
        return [as_bool(values, name)] * n
    array = np.asarray(values)
    if array.dtype.kind != "b":
        raise TypeError(f"{name} must be bools, got an array of dtype {array.dtype}")
    if array.shape != (n,):
        raise ValueError(f"{name} must be one value or have shape ({n},), got {array.shape}")
    return array.tolist()


def as_bool_table(values, name: str, rows: int, columns: int) -> np.ndarray:
    """(rows, columns) bool from one bool (for all) or a (rows, columns) array of bools.

    Raises:
        TypeError: a value that is not a bool (0 and 1 are not), naming `name`.
        ValueError: an array of another shape, naming `name`.
    """
    if np.ndim(values) == 0:
        return np.full((rows, columns), as_bool(values, name))
    array = np.asarray(values)
    if array.dtype.kind != "b":
        raise TypeError(f"{name} must be a bool or bools, got an array of dtype {array.dtype}")
    if array.shape != (rows, columns):
        raise ValueError(
            f"{name} must be one bool or have shape ({rows}, {columns}) (worlds, bodies), "
            f"got {array.shape}"
        )
    return array.copy()


def as_flags(values, name: str) -> np.ndarray:
    """`values` as a bool array of the same shape: bools, or integers that are all 0 or 1
    (the device's own encoding, as a flag read back as int would arrive).

    Any other value is refused: the kernels test a flag == 1 and == 0, so a 7 (or a NaN)
    would be neither, e.g. a body neither asleep nor awake that never moves again.

    Raises:
        TypeError: values neither bools nor integers (floats, NaN, strings ...).
        ValueError: an integer other than 0 and 1.
    """
    try:
        array = np.asarray(values)
    except ValueError:
        raise TypeError(f"{name} must be bools, got a ragged sequence") from None
    if array.dtype.kind == "b":
        return array.astype(bool)
    if array.dtype.kind not in "iu":
        raise TypeError(
            f"{name} must be bools (or integers 0 and 1), got an array of dtype {array.dtype}"
        )
    wrong = np.flatnonzero((array != 0) & (array != 1))
    if len(wrong):
        raise ValueError(
            f"{name} must be bools (or integers 0 and 1), got {array.reshape(-1)[wrong[0]]}"
        )
    return array.astype(bool)


def as_int32(value, name: str) -> int:
    """An int within int32's range, else TypeError / ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"{name} must be within int32's range, got {value}")
    return int(value)


def as_bits(value, name: str) -> int:
    """A 32-bit mask (an int in [0, 2**32)), else TypeError / ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int bit mask, got {type(value).__name__}")
    if not 0 <= value < (1 << 32):
        raise ValueError(f"{name} must be a 32-bit mask in [0, 2**32), got {value}")
    return int(value)


#: The range [low, high) of each integer check, for checking n values as arrays.
_INTEGER_RANGES = {as_int32: (-(1 << 31), 1 << 31), as_bits: (0, 1 << 32)}


def as_integers(values, name: str, n: int, check) -> list[int]:
    """n ints from one (for all) or n, held to `check`'s rules (as_int32 or as_bits): the
    first that breaks them raises its error, named `name[i]`."""
    if np.ndim(values) == 0:
        return [check(values, name)] * n
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{name} must be ints, got an array of dtype {array.dtype}")
    if array.shape != (n,):
        raise ValueError(f"{name} must be one value or have shape ({n},), got {array.shape}")
    low, high = _INTEGER_RANGES[check]
    for i in np.flatnonzero((array < low) | (array >= high))[:1]:
        check(int(array[i]), f"{name}[{i}]")
    return array.astype(np.int64).tolist()


def as_count(value, name: str) -> int:
    """`value` as an int >= 1 (a count: substeps, worlds, steps), else TypeError /
    ValueError naming `name`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{name} must be >= 1, got {value}")
    return int(value)


#: Fx2D's time-step bounds, s: a step below MIN_DT is refused, one above MAX_DT clamped.
MIN_DT = 1e-3
MAX_DT = 0.06


def as_step_length(dt, name: str = "dt") -> float:
    """The seconds a step of `dt` advances: dt, a number >= MIN_DT (Scene.step and
    ShardedScene.step refuse a shorter one), clamped to MAX_DT.

    Raises:
        TypeError: dt is not a number.
        ValueError: dt is not finite, beyond float32's range or below MIN_DT.
    """
    dt = as_real(dt, name)
    if dt < MIN_DT:
        raise ValueError(f"{name} must be >= {MIN_DT} s, got {dt}")
    return min(dt, MAX_DT)


def as_step_count(value, name: str, most: int) -> int:
    """`value` as a count of steps taken in one call, 1 to `most` (as_count's rule, and a
    bound for longer runs: step in a loop).

    Raises:
        TypeError: value is not an int.
        ValueError: value below 1 or above `most`.
    """
    count = as_count(value, name)
    if count > most:
        raise ValueError(
            f"{name} must be at most {most} steps a call, got {count}: "
            "step in a loop for a longer run"
        )
    return count


def as_index(value, label: str, count: int, plural: str, owner: str = "scene") -> int:
    """`value` as an index below `count`, else TypeError / ValueError naming `label`
    ("{label} 9 out of range ({owner} has {count} {plural})")."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{label} must be an int index, got {type(value).__name__}")
    if not 0 <= value < count:
        raise ValueError(f"{label} {value} out of range ({owner} has {count} {plural})")
    return int(value)


def as_scalar(value):
    """A 0-d array's element (as_real takes numbers, not arrays); anything else as it is."""
    return value[()] if isinstance(value, np.ndarray) and value.ndim == 0 else value


def as_one_of(value, name: str, choices):
    """`value` if it is one of `choices` (a setting's names: Scene(on_fault=)), else
    ValueError naming `name` and the choices."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def as_name(value, name: str, choices) -> str:
    """`value`, a string and one of `choices` (Scene(solver=)), else TypeError (not a
    string) or ValueError (another string) naming `name`."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    return as_one_of(value, name, choices)


def as_instance(value, name: str, kind: type, what: str):
    """`value` if it is a `kind` (`what`: the type as the message names it, e.g.
    "fx2d_gpu.shapes.Shape"), else TypeError naming `name`."""
    if not isinstance(value, kind):
        raise TypeError(f"{name} must be a {what}, got {type(value).__name__}")
    return value


def as_row_count(values, name: str) -> int:
    """n, the rows of `values`, an (n, 2) array (a bulk add's positions, m), else
    TypeError (not numbers) or ValueError (another shape) naming `name`."""
    try:
        shape = np.shape(values)
    except ValueError:
        raise TypeError(f"{name} must be (n, 2) numbers") from None
    if len(shape) != 2 or shape[1] != 2:
        raise ValueError(f"{name} must have shape (n, 2), got {shape}")
    return shape[0]
