"""The one rule for a body's mass and moment of inertia, wherever they come from: the add_*
methods (builder.py), per-world values (world_params.py: set_body_params) and snapshots and
state files (world_params.WorldParams.from_arrays).

A static body has mass 0 and inertia inf. A dynamic body's mass lies in [MIN_MASS, MAX_MASS]
kg and its inertia (given, or mass x the shape's unit inertia) in [MIN_INERTIA,
MAX_INERTIA] kg m^2: the device holds their inverses in float32 (valid_masses,
valid_inertias). check_masses and check_inertias raise for values that break it, naming
the argument.
"""

from __future__ import annotations

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


def valid_masses(mass: np.ndarray, static: np.ndarray | bool) -> np.ndarray:
    """The rule for masses: bool, of mass's shape, True where a mass (kg) is 0 for a static
    body (`static`: bool, broadcast with mass) or in [MIN_MASS, MAX_MASS] for a dynamic
    one. NaN is never valid."""
    return np.where(static, mass == 0.0, (mass >= MIN_MASS) & (mass <= MAX_MASS))


def valid_inertias(inertia: np.ndarray, static: np.ndarray | bool) -> np.ndarray:
    """The rule for moments of inertia: bool, of inertia's shape, True where an inertia (kg
    m^2) is inf for a static body (`static` as valid_masses') or in [MIN_INERTIA,
    MAX_INERTIA] for a dynamic one. NaN is never valid."""
    return np.where(static, inertia == np.inf, (inertia >= MIN_INERTIA) & (inertia <= MAX_INERTIA))


def is_zero(mass: np.ndarray) -> np.ndarray:
    """bool, of mass's shape: the masses that are 0 (or -0), judged by their bits: once
    Taichi's kernels have run, the CPU may treat subnormal floats as zero (DAZ), and
    1e-320 == 0 is then True."""
    return np.asarray(mass, np.float64).view(np.uint64) & ~np.uint64(1 << 63) == 0


def check_masses(
    mass: np.ndarray, name: str, *, static_allowed: bool = True, indexed: bool = True
) -> np.ndarray:
    """Hold masses to the rule (valid_masses), the first that breaks it raising.

    Args:
        mass: float64 kg, any shape, already finite and >= 0 (as_real(s) checked them).
        name: the argument's name; `name[i]` for the first bad one (i its flat index) if
            `indexed`, else `name`.
        static_allowed: a mass of 0 makes a static body (add_*); else every body is dynamic
            (set_body_params: a body is static or dynamic in every world).

    Returns:
        `mass`, unchanged.

    Raises:
        ValueError: a mass between 0 and MIN_MASS, or above MAX_MASS.
    """
    static = is_zero(mass) if static_allowed else False
    for i in np.flatnonzero(~valid_masses(mass, static))[:1]:
        value = float(np.reshape(mass, -1)[i])
        label = f"{name}[{i}]" if indexed else name
        if value > MAX_MASS:
            raise ValueError(too_heavy(label, value))
        allowed = (
            f"0 (static) or >= {MIN_MASS} kg"
            if static_allowed
            else f">= {MIN_MASS} kg (a body is static or dynamic in every world)"
        )
        raise ValueError(f"{label} must be {allowed}, got {value}")
    return mass


def check_inertias(
    inertia: np.ndarray,
    mass: np.ndarray | None = None,
    *,
    derived: bool = False,
    arealess: np.ndarray | None = None,
    indexed: bool = True,
) -> np.ndarray:
    """Hold the inertias of bodies to the rule (valid_inertias): the inertias bodies of
    masses `mass` store.

    Args:
        inertia: float64 kg m^2, any shape: given, or derived from the mass (`derived`);
            a static body's is not read.
        mass: float64 kg of inertia's shape, 0 for a static body (checked by check_masses);
            None: every body is dynamic.
        derived: the inertias follow from the masses (mass x the shape's unit inertia): one
            too large blames the mass.
        arealess: bool of mass's shape, the bodies whose shapes have no area (edges and
            chains: static only), or None.
        indexed: name the first bad value `mass[i]` / `inertia[i]` (i its flat index), else
            `mass` / `inertia`.

    Returns:
        float64 of inertia's shape: the inertias, inf for static bodies.

    Raises:
        ValueError: a dynamic body of an arealess shape, an inertia beyond float32's range or
            below MIN_INERTIA; its `body_keyword` (see builder.blamed_on) names the keyword
            to blame, mass or inertia.
    """
    dynamic = np.ones(np.shape(inertia), bool) if mass is None else mass > 0.0
    flat_mass = None if mass is None else np.reshape(mass, -1)

    def label(keyword: str, i: int) -> str:
        return f"{keyword}[{i}]" if indexed else keyword

    if arealess is not None:
        for i in np.flatnonzero(arealess & dynamic)[:1]:
            raise _blamed(
                f"{label('mass', i)} must be 0: edges and chains have no area and are "
                f"static only, got {flat_mass[i]}",
                "mass",
            )
    flat = np.reshape(inertia, -1)
    bad = np.reshape(dynamic & ~valid_inertias(inertia, False), -1)
    # Too large first: it names the mass that made it, where it was derived.
    for i in np.flatnonzero(bad & (flat > MAX_INERTIA))[:1]:
        keyword = "mass" if derived else "inertia"
        source = float(flat_mass[i]) if derived else None
        raise _blamed(inertia_too_large(label(keyword, i), flat[i], source), keyword)
    for i in np.flatnonzero(bad)[:1]:
        raise _blamed(
            f"{label('inertia', i)} must be >= {MIN_INERTIA} kg m^2, got {flat[i]}", "inertia"
        )
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
