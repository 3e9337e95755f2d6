"""Scene's spatial queries on the host: check and shape the arguments (one query for every
world, the same queries in every world, or per world), cast them on the device
(collision/ray_casts.py, collision/overlaps.py) and wrap the results in records (RayHits,
RayHitList, Overlaps). Also the body and world selections of Scene.set_enabled.

A query builds the scene only when it has something to ask: `context` (Scene._context, a
StepContext at the current poses) is called once the arguments are checked, and not at all
for zero queries.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..checks import as_bool, as_index, as_real_array
from ..physics.collision.overlaps import overlap
from ..physics.collision.ray_casts import every_hit, nearest_hits
from ..physics.solver.context import StepContext
from ..records import Overlaps, RayHitList, RayHits
from ..shapes import (
    FLOAT32_MAX,
    MAX_COORDINATE,
    MAX_POLYGON_VERTICES,
    SHAPE_CIRCLE,
    Shape,
    rotation,
)

Context = Callable[[], StepContext]


def ray_cast(
    context: Context, n_worlds: int, origins, directions, max_distance, sensors
) -> RayHits:
    """Scene.ray_cast: the nearest body each ray hits, (n_worlds, n_rays) records."""
    sensors = as_bool(sensors, "sensors")
    n, origins, directions, limits = _rays(n_worlds, origins, directions, max_distance)
    if n == 0:
        return RayHits(
            np.zeros((n_worlds, 0), np.int64),
            np.zeros((n_worlds, 0)),
            np.zeros((n_worlds, 0, 2)),
            np.zeros((n_worlds, 0, 2)),
        )
    body, distance, normal = nearest_hits(context(), origins, directions, limits, sensors)
    miss = body < 0
    point = origins + np.where(miss, 0.0, distance)[:, None] * directions
    point[miss] = np.nan
    normal[miss] = np.nan
    return RayHits(
        body.reshape(n_worlds, n),
        distance.reshape(n_worlds, n),
        point.reshape(n_worlds, n, 2),
        normal.reshape(n_worlds, n, 2),
    )


def ray_cast_all(
    context: Context, n_worlds: int, origins, directions, max_distance, sensors
) -> RayHitList:
    """Scene.ray_cast_all: every body each ray crosses, nearest first."""
    sensors = as_bool(sensors, "sensors")
    n, origins, directions, limits = _rays(n_worlds, origins, directions, max_distance)
    if n == 0:
        empty = np.zeros(0, np.int64)
        return RayHitList(
            empty, empty, empty, np.zeros(0), np.zeros((0, 2)), np.zeros((0, 2)), n_worlds, 0
        )
    ray, body, distance, normal = every_hit(context(), origins, directions, limits, sensors)
    point = origins[ray] + distance[:, None] * directions[ray]
    return RayHitList(ray // n, ray % n, body, distance, point, normal, n_worlds, n)


def query_point(context: Context, n_worlds: int, points, sensors) -> Overlaps:
    """Scene.query_point: the bodies containing each point."""
    sensors = as_bool(sensors, "sensors")
    n, (points,) = broadcast(n_worlds, points=batch_vectors(points, "points", n_worlds))
    return _overlaps(
        context, n_worlds, points[:, :, None, :], 1, np.zeros((n_worlds, n)), n, sensors
    )


def query_aabb(context: Context, n_worlds: int, lower, upper, sensors) -> Overlaps:
    """Scene.query_aabb: the bodies overlapping each axis-aligned box."""
    sensors = as_bool(sensors, "sensors")
    n, (lower, upper) = broadcast(
        n_worlds,
        lower=batch_vectors(lower, "lower", n_worlds),
        upper=batch_vectors(upper, "upper", n_worlds),
    )
    if np.any(lower > upper):
        raise ValueError("lower must be <= upper on both axes")
    corners = np.stack(
        [
            lower,
            np.stack([upper[..., 0], lower[..., 1]], -1),
            upper,
            np.stack([lower[..., 0], upper[..., 1]], -1),
        ],
        axis=2,
    )
    return _overlaps(context, n_worlds, corners, 4, np.zeros((n_worlds, n)), n, sensors)


def overlap_shape(context: Context, n_worlds: int, shape, position, angle, sensors) -> Overlaps:
    """Scene.overlap_shape: the bodies each placed copy of `shape` overlaps."""
    if not isinstance(shape, Shape):
        raise TypeError(f"shape must be a fx2d_gpu.shapes.Shape, got {type(shape).__name__}")
    sensors = as_bool(sensors, "sensors")
    n, (position, angle) = broadcast(
        n_worlds,
        position=batch_vectors(position, "position", n_worlds),
        angle=batch_scalars(angle, "angle", n_worlds),
    )
    vertices, count, skin = shape_cores(shape, position, angle)
    return _overlaps(context, n_worlds, vertices, count, np.full((n_worlds, n), skin), n, sensors)


def _rays(n_worlds: int, origins, directions, max_distance):
    """Checked rays: (n_rays, flat origins, unit directions (n_worlds * n_rays, 2),
    limits (n_worlds * n_rays,)), float64, m."""
    origins = batch_vectors(origins, "origins", n_worlds)
    directions = batch_vectors(directions, "directions", n_worlds)
    limits = batch_scalars(max_distance, "max_distance", n_worlds)
    if np.any(limits <= 0.0) or np.any(limits > FLOAT32_MAX):
        raise ValueError("max_distance must be > 0 (and within float32's range)")
    length = np.hypot(directions[..., 0], directions[..., 1])
    if np.any(length == 0.0):
        raise ValueError("directions must not be zero")
    n, (origins, directions, limits) = broadcast(
        n_worlds, origins=origins, directions=directions / length[..., None], max_distance=limits
    )
    return n, origins.reshape(-1, 2), directions.reshape(-1, 2), limits.reshape(-1)


def _overlaps(
    context: Context, n_worlds: int, vertices, count: int, skins, n: int, sensors: bool
) -> Overlaps:
    """Overlaps of n queries per world: cores `vertices` (n_worlds, n, k, 2) m of `count`
    vertices, skins (n_worlds, n) m."""
    if n == 0:
        empty = np.zeros(0, np.int64)
        return Overlaps(empty, empty, empty, n_worlds, 0)
    query, body = overlap(
        context(),
        vertices.reshape(n_worlds * n, -1, 2),
        np.full(n_worlds * n, count),
        skins.reshape(-1),
        sensors,
    )
    return Overlaps(query // n, query % n, body, n_worlds, n)


def batch_vectors(value, name: str, n_worlds: int) -> np.ndarray:
    """(1 or n_worlds, 1 or n, 2) float64 from (2,), (n, 2) or (n_worlds, n, 2): finite,
    within +-MAX_COORDINATE m; TypeError/ValueError naming `name` otherwise (TypeError for
    anything but real numbers: checks.as_real_array)."""
    array = as_real_array(value, name)
    if not 1 <= array.ndim <= 3 or array.shape[-1] != 2:
        raise ValueError(
            f"{name} must have shape (2,), (n, 2) or (n_worlds, n, 2), got {array.shape}"
        )
    array = array.reshape((1,) * (3 - array.ndim) + array.shape)
    if array.shape[0] not in (1, n_worlds):
        raise ValueError(
            f"{name}: the first of 3 axes must be n_worlds ({n_worlds}) or 1, "
            f"got shape {array.shape}"
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    if array.size and np.abs(array).max() >= MAX_COORDINATE:
        raise ValueError(f"{name} must be within +-{MAX_COORDINATE:g} m")
    return array


def batch_scalars(value, name: str, n_worlds: int) -> np.ndarray:
    """(1 or n_worlds, 1 or n) float64 from a scalar, (n,) or (n_worlds, n), finite;
    TypeError/ValueError naming `name` otherwise (TypeError for anything but real numbers:
    checks.as_real_array)."""
    array = as_real_array(value, name)
    if array.ndim > 2:
        raise ValueError(f"{name} must be a scalar, (n,) or (n_worlds, n), got {array.shape}")
    array = array.reshape((1,) * (2 - array.ndim) + array.shape)
    if array.shape[0] not in (1, n_worlds):
        raise ValueError(
            f"{name}: the first of 2 axes must be n_worlds ({n_worlds}) or 1, "
            f"got shape {array.shape}"
        )
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite")
    return array


def broadcast(n_worlds: int, **arrays) -> tuple[int, list[np.ndarray]]:
    """(n, the arrays broadcast to (n_worlds, n, ...)); ValueError naming them if their
    query counts (axis 1) disagree."""
    try:
        n = np.broadcast_shapes(*((1, a.shape[1]) for a in arrays.values()))[1]
    except ValueError:
        shapes = ", ".join(f"{name} {a.shape}" for name, a in arrays.items())
        raise ValueError(f"{' and '.join(arrays)} must broadcast together, got {shapes}") from None
    return n, [np.broadcast_to(a, (n_worlds, n) + a.shape[2:]) for a in arrays.values()]


def shape_cores(shape: Shape, position: np.ndarray, angle: np.ndarray):
    """World-space cores of `shape` at poses position (w, n, 2) m and angle (w, n) rad:
    (vertices (w, n, k, 2), k, skin m) (a circle's core is its centre, k = 1)."""
    local = shape.center[None, :] if shape.kind == SHAPE_CIRCLE else shape.vertices
    assert 1 <= len(local) <= MAX_POLYGON_VERTICES
    turn = rotation(angle)[..., None, :, :]  # (w, n, 1, 2, 2): its columns times x and y
    vertices = (
        turn[..., 0] * local[:, 0, None] + turn[..., 1] * local[:, 1, None] + position[..., None, :]
    )
    return vertices, len(local), float(shape.radius)


def _indices(values, count: int, singular: str, plural: str) -> np.ndarray:
    """(k,) int64 from an index or a non-empty sequence of them, each below `count`;
    TypeError/ValueError naming `plural` (the argument: "bodies", "joints") otherwise."""
    array = np.atleast_1d(np.asarray(values))
    if array.ndim != 1 or array.size == 0:
        raise ValueError(
            f"{plural} must be a {singular} index or a non-empty sequence of them, got {values!r}"
        )
    return np.array(
        [as_index(v.item() if hasattr(v, "item") else v, plural, count, plural) for v in array],
        np.int64,
    )


def body_indices(bodies, n_bodies: int) -> np.ndarray:
    """(k,) int64 body indices (see _indices), each below n_bodies."""
    return _indices(bodies, n_bodies, "body", "bodies")


def joint_indices(joints, n_joints: int) -> np.ndarray:
    """(k,) int64 joint indices (see _indices), each below n_joints."""
    return _indices(joints, n_joints, "joint", "joints")
