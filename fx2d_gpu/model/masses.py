"""The one rule for a body's mass and moment of inertia, wherever they come from: the add_*
methods (builder.py), per-world values (world_params.py: set_body_params) and snapshots and
state files (world_params.WorldParams.from_arrays).

A static body has mass 0 and inertia inf. A dynamic body's mass lies in [MIN_MASS, MAX_MASS]
kg and its inertia (given, or mass x the shape's unit inertia) in [MIN_INERTIA,
MAX_INERTIA] kg m^2: the device holds their inverses in float32 (bad_masses,
bad_inertias). check_masses and check_inertias raise for values that break it, naming
the argument.
"""

from __future__ import annotations

import struct

import numpy as np

from ..checks import FLOAT32_MAX

#: Smallest mass (kg) and moment of inertia (kg m^2) of a dynamic body: their inverses, and
#: the impulses they scale, must stay inside float32 on the device.
MIN_MASS = 1e-12
MIN_INERTIA = 1e-30
#: Largest mass (kg) of a dynamic body. The device holds 1/mass in float32: past 2**126 kg
#: (~8.5e37) the inverse is below float32's smallest normal number (2**-126), a subnormal
#: the CPU reads as 0 once Taichi's kernels have run (DAZ), and the kernels then take the
#: body for a static one: it would hover. 1/MAX_MASS is 2**-126 exactly, a normal float32.
MAX_MASS = 2.0**126
#: Largest moment of inertia (kg m^2), given or derived from a mass (mass x the shape's
#: unit inertia): it must be finite in float32, as snapshots, state files and copies hold
#: it (checks.FLOAT32_MAX). Its inverse may then flush to 0: the body does not turn, which
#: no torque float32 holds could make it do measurably anyway.
MAX_INERTIA = FLOAT32_MAX


def bad_masses(mass, static):
    """The rule for masses: True where a mass (kg) is not 0 for a static body (`static`) or
    not in [MIN_MASS, MAX_MASS] for a dynamic one. NaN always breaks it.

    mass and static: arrays (a bool array, broadcast with mass; the result: of their shape)
    or one number and one bool (one body, the result one bool: Python's comparisons, where
    NumPy's cost add_body ~10 us a body)."""
    if not isinstance(mass, np.ndarray):
        return mass != 0.0 if static else not MIN_MASS <= mass <= MAX_MASS
    return np.where(static, mass != 0.0, ~((mass >= MIN_MASS) & (mass <= MAX_MASS)))


def bad_inertias(inertia, static):
    """The rule for moments of inertia: True where an inertia (kg m^2) is not inf for a
    static body or not in [MIN_INERTIA, MAX_INERTIA] for a dynamic one (arguments and
    result as bad_masses')."""
    if not isinstance(inertia, np.ndarray):
        return inertia != np.inf if static else not MIN_INERTIA <= inertia <= MAX_INERTIA
    return np.where(
        static, inertia != np.inf, ~((inertia >= MIN_INERTIA) & (inertia <= MAX_INERTIA))
    )


def is_zero(mass):
    """Whether masses are 0 (or -0), judged by their bits: once Taichi's kernels have run,
    the CPU may treat subnormal floats as zero (DAZ), and 1e-320 == 0 is then True. A bool
    array of mass's shape, or one bool for one number."""
    if not isinstance(mass, np.ndarray):
        return struct.unpack("<Q", struct.pack("<d", mass))[0] & ~(1 << 63) == 0
    return mass.astype(np.float64, copy=False).view(np.uint64) & ~np.uint64(1 << 63) == 0


def _first(bad) -> int | None:
    """The flat index of the first True of `bad` (an array, or one bool: index 0), or None."""
    if not isinstance(bad, np.ndarray):
        return 0 if bad else None
    found = np.flatnonzero(bad)
    return int(found[0]) if len(found) else None


def _item(values, i: int) -> float:
    """Flat element i of `values` (an array, or one number: itself) as a float."""
    return float(np.reshape(values, -1)[i] if isinstance(values, np.ndarray) else values)


def check_masses(mass, name: str, *, static_allowed: bool = True, indexed: bool = True):
    """Hold masses to the rule (bad_masses), the first that breaks it raising.

    Args:
        mass: float64 kg, an array of any shape or one number, already finite and >= 0
            (as_real(s) checked them).
        name: the argument's name; `name[i]` for the first bad one (i its flat index) if
            `indexed`, else `name`.
        static_allowed: a mass of 0 makes a static body (add_*); else every body is dynamic
            (set_body_params: a body is static or dynamic in every world).

    Returns:
        `mass`, unchanged.

    Raises:
        ValueError: a mass between 0 and MIN_MASS, or above MAX_MASS.
    """
    i = _first(bad_masses(mass, is_zero(mass) if static_allowed else False))
    if i is None:
        return mass
    value, label = _item(mass, i), f"{name}[{i}]" if indexed else name
    if value > MAX_MASS:
        raise ValueError(too_heavy(label, value))
    allowed = (
        f"0 (static) or >= {MIN_MASS} kg"
        if static_allowed
        else f">= {MIN_MASS} kg (a body is static or dynamic in every world)"
    )
    raise ValueError(f"{label} must be {allowed}, got {value}")


def check_inertias(inertia, mass=None, *, derived=False, arealess=None, indexed=True):
    """Hold the inertias of bodies to the rule (bad_inertias): the inertias bodies of
    masses `mass` store.

    Args:
        inertia: float64 kg m^2, an array of any shape or one number: given, or derived
            from the mass (`derived`); a static body's is not read.
        mass: float64 kg, as inertia (0 for a static body; checked by check_masses); None:
            every body is dynamic.
        derived: the inertias follow from the masses (mass x the shape's unit inertia): one
            too large blames the mass.
        arealess: bool, as inertia: the bodies whose shapes have no area (edges and
            chains: static only), or None.
        indexed: name the first bad value `mass[i]` / `inertia[i]` (i its flat index), else
            `mass` / `inertia`.

    Returns:
        The inertias (an array of inertia's shape, or one float), inf for static bodies.

    Raises:
        ValueError: a dynamic body of an arealess shape, an inertia beyond float32's range or
            below MIN_INERTIA; its `body_keyword` (see builder.blamed_on) names the keyword
            to blame, mass or inertia.
    """
    dynamic = True if mass is None else mass > 0.0

    def label(keyword: str, i: int) -> str:
        return f"{keyword}[{i}]" if indexed else keyword

    i = None if arealess is None else _first(arealess & dynamic)
    if i is not None:
        raise _blamed(
            f"{label('mass', i)} must be 0: edges and chains have no area and are static "
            f"only, got {_item(mass, i)}",
            "mass",
        )
    bad = dynamic & bad_inertias(inertia, False)
    # Too large first: it names the mass that made it, where it was derived.
    i = _first(bad & (inertia > MAX_INERTIA))
    if i is not None:
        keyword = "mass" if derived else "inertia"
        source = _item(mass, i) if derived else None
        raise _blamed(inertia_too_large(label(keyword, i), _item(inertia, i), source), keyword)
    i = _first(bad)
    if i is not None:
        raise _blamed(
            f"{label('inertia', i)} must be >= {MIN_INERTIA} kg m^2, got {_item(inertia, i)}",
            "inertia",
        )
    if not isinstance(inertia, np.ndarray):
        return float(inertia) if dynamic else np.inf
    return np.where(dynamic, inertia, np.inf)


def _blamed(message: str, keyword: str) -> ValueError:
    """A ValueError marked as caused by body keyword `keyword` (builder.blamed_on's mark,
    which the scene-file loader reads to name a file's key)."""
    error = ValueError(message)
    error.body_keyword = keyword
    return error


def too_heavy(name: str, mass: float) -> str:
    """The message refusing a mass above MAX_MASS, named `name`."""
    return (
        f"{name} must be <= {MAX_MASS:.4g} kg (2**126: the device holds 1/mass as a "
        f"normal float32), got {mass:g}"
    )


def inertia_too_large(name: str, inertia: float, mass: float | None = None) -> str:
    """The message refusing a moment of inertia above MAX_INERTIA, named `name`; `mass`:
    the mass it was derived from (mass x the shape's unit inertia), None if given."""
    source = "" if mass is None else f" (derived from mass {mass:g} kg and the shape)"
    return (
        f"{name}: the inertia must be finite in float32 (<= {MAX_INERTIA:g} kg m^2), got "
        f"{inertia:g}{source}; give a smaller mass or an inertia"
    )
