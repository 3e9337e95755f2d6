"""Host-side shape geometry: validation, re-centring and mass properties.

Everything here runs once per added body, in NumPy float64; the results are uploaded to the
device when the scene is built. Shapes are described in the body frame (metres), with the
body's origin at its centre of mass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Smallest circle radius or box side, m: below it float32 contact geometry and inertia
#: (m r^2, ~1e-23 kg m^2 here) lose their meaning.
MIN_SIZE = 1e-5
#: Largest magnitude of any input number: float32's range on the device.
FLOAT32_MAX = 3.4e38
#: Largest coordinate (m) and speed (m/s, rad/s) the engine simulates: beyond them a body
#: would leave collision (its grid cells past 32-bit range) or cross the world in a
#: substep. Inputs beyond them are refused; a state beyond them after a step is a fault.
MAX_COORDINATE = 1e15
MAX_SPEED = 1e10
#: Most vertices a convex polygon may have (Box2D uses the same bound).
MAX_POLYGON_VERTICES = 8

SHAPE_NONE = 0
SHAPE_CIRCLE = 1
SHAPE_POLYGON = 2

# Edges shorter than this (m) make a polygon degenerate.
_MIN_EDGE_LENGTH = 1e-6


@dataclass(frozen=True)
class Shape:
    """One collision shape in the body frame.

    kind: SHAPE_CIRCLE or SHAPE_POLYGON.
    radius: circle radius, m (0 for polygons).
    center: (2,) circle centre in the body frame, m.
    vertices: (k, 2) counter-clockwise polygon vertices in the body frame, m (empty for circles).
    normals: (k, 2) outward unit normal of edge i = (v[i], v[i+1]).
    """

    kind: int
    radius: float
    center: np.ndarray
    vertices: np.ndarray
    normals: np.ndarray

    def __post_init__(self):
        # Frozen all the way down: one Shape may be shared by many bodies (a scene file's
        # identical boxes), so its arrays cannot be edited in place.
        for name in ("center", "vertices", "normals"):
            array = np.array(getattr(self, name), dtype=np.float64)
            array.setflags(write=False)
            object.__setattr__(self, name, array)

    def __setstate__(self, state: dict):
        # Unpickled arrays come back writeable: freeze them again.
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    @property
    def bounding_radius(self) -> float:
        """Largest distance from the body origin to the shape's surface, m."""
        if self.kind == SHAPE_CIRCLE:
            return float(np.hypot(*self.center) + self.radius)
        return float(np.max(np.hypot(self.vertices[:, 0], self.vertices[:, 1])))


def as_vector2(value, name: str, limit: float = FLOAT32_MAX) -> np.ndarray:
    """(2,) float64 from any 2-sequence with components within +-limit; TypeError or
    ValueError naming `name` otherwise."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a pair of numbers, got {value!r}") from None
    if arr.shape != (2,):
        raise ValueError(f"{name} must have 2 components, got shape {arr.shape}")
    # Two Python floats: a scene file calls this for every body, and NumPy's reductions
    # cost microseconds each on two numbers.
    x, y = float(arr[0]), float(arr[1])
    if not (math.isfinite(x) and math.isfinite(y)):
        raise ValueError(f"{name} must be finite, got {value!r}")
    if max(abs(x), abs(y)) > FLOAT32_MAX:
        raise ValueError(f"{name} must be within float32's range (|x| <= {FLOAT32_MAX:g}), "
                         f"got {value!r}")
    if max(abs(x), abs(y)) >= limit:
        raise ValueError(f"{name} must be within +-{limit:g}, got {value!r}")
    return arr


def as_real(value, name: str, *, minimum: float | None = None, positive: bool = False,
            limit: float = FLOAT32_MAX) -> float:
    """A finite float within +-limit; TypeError/ValueError naming `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value}")
    if abs(value) > FLOAT32_MAX:
        raise ValueError(f"{name} must be within float32's range (|x| <= {FLOAT32_MAX:g}), "
                         f"got {value}")
    if abs(value) >= limit:
        raise ValueError(f"{name} must be within +-{limit:g}, got {value}")
    if positive and value <= 0.0:
        raise ValueError(f"{name} must be positive, got {value}")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def circle(radius: float, center=(0.0, 0.0)) -> Shape:
    radius = as_real(radius, "radius", minimum=MIN_SIZE)
    empty = np.zeros((0, 2))
    return Shape(SHAPE_CIRCLE, radius, as_vector2(center, "center"), empty, empty)


def _next(values: np.ndarray) -> np.ndarray:
    """values[i + 1] at i, cyclically (np.roll(values, -1, axis=0), without its overhead)."""
    return np.concatenate([values[1:], values[:1]])


def polygon_area_centroid(vertices: np.ndarray) -> tuple[float, np.ndarray]:
    """Signed area (positive for counter-clockwise) and centroid of a simple polygon."""
    x, y = vertices[:, 0], vertices[:, 1]
    xn, yn = _next(x), _next(y)
    cross = x * yn - xn * y
    area = 0.5 * cross.sum()
    if area == 0.0:
        return 0.0, vertices.mean(axis=0)
    centroid = np.array([((x + xn) * cross).sum(), ((y + yn) * cross).sum()]) / (6.0 * area)
    return float(area), centroid


def polygon(vertices, name: str = "vertices") -> tuple[Shape, np.ndarray]:
    """Validate a convex polygon, make it counter-clockwise and re-centre it on its centroid.

    Returns the shape and the centroid (in the frame the vertices were given in), so that the
    caller can place the body's centre of mass where the user asked.
    """
    try:
        verts = np.asarray(vertices, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a sequence of (x, y) pairs") from None
    if verts.ndim != 2 or verts.shape[1] != 2:
        raise ValueError(f"{name} must have shape (k, 2), got {verts.shape}")
    k = verts.shape[0]
    if not 3 <= k <= MAX_POLYGON_VERTICES:
        raise ValueError(f"{name} must have 3 to {MAX_POLYGON_VERTICES} vertices, got {k}")
    if not np.all(np.isfinite(verts)):
        raise ValueError(f"{name} must be finite")
    if np.abs(verts).max() >= MAX_COORDINATE:
        raise ValueError(f"{name} must be within +-{MAX_COORDINATE:g}")
    area, centroid = polygon_area_centroid(verts)
    if abs(area) < 1e-12:
        raise ValueError(f"{name} encloses no area")
    if area < 0.0:
        verts = verts[::-1].copy()
    edges = _next(verts) - verts
    lengths = np.hypot(edges[:, 0], edges[:, 1])
    if np.any(lengths < _MIN_EDGE_LENGTH):
        raise ValueError(f"{name} has repeated vertices")
    turn = edges[:, 0] * _next(edges[:, 1]) - edges[:, 1] * _next(edges[:, 0])
    if np.any(turn <= 1e-12 * lengths * _next(lengths)):
        raise ValueError(f"{name} must be strictly convex (no reflex or collinear vertices)")
    local = verts - centroid
    normals = np.stack([edges[:, 1], -edges[:, 0]], axis=1) / lengths[:, None]
    shape = Shape(SHAPE_POLYGON, 0.0, np.zeros(2), local, normals)
    return shape, centroid


def box(size) -> Shape:
    size = as_vector2(size, "size")
    if np.any(size < MIN_SIZE):
        raise ValueError(f"size must be >= {MIN_SIZE} m on both axes, got {tuple(size)}")
    hw, hh = 0.5 * size
    shape, _ = polygon([[-hw, -hh], [hw, -hh], [hw, hh], [-hw, hh]], "size")
    return shape


def unit_inertia(shape: Shape) -> float:
    """Moment of inertia about the body origin per unit mass, m² (uniform density)."""
    if shape.kind == SHAPE_CIRCLE:
        return 0.5 * shape.radius**2 + float(shape.center @ shape.center)
    # Second moment of a polygon about the origin, by triangles (origin, v_i, v_i+1).
    v, vn = shape.vertices, _next(shape.vertices)
    cross = v[:, 0] * vn[:, 1] - vn[:, 0] * v[:, 1]
    second = (cross * ((v * v).sum(1) + (v * vn).sum(1) + (vn * vn).sum(1))).sum() / 12.0
    area = 0.5 * cross.sum()
    return float(second / area)
