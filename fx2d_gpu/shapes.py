"""Shapes: collision geometry in the body frame, its checks, and its mass properties.

Build a Shape here (circle, box, polygon, capsule, edge, chain; circles and boxes build
many at once) to pass to Scene.add_shape, Scene.add_shapes or Scene.overlap_shape;
Scene.body_shape hands one back. Shapes are described in the body frame (m), with the body's
origin at the centre of mass of shapes with area; edges and chains stay where they were
given.

Everything here runs on the host in NumPy float64, once per added body; the results go to
the device when the scene is built. Inputs are checked by fx2d_gpu.checks' rules: a bad
one raises TypeError or ValueError naming the argument.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from . import checks
from .checks import as_points, as_real, as_reals, as_vector2, as_vectors2
from .enums import SHAPE_CAPSULE, SHAPE_CHAIN, SHAPE_CIRCLE, SHAPE_EDGE, SHAPE_POLYGON
from .enums import SHAPE_NONE as SHAPE_NONE  # public here with the other kinds (Shape.kind)

# (Each constant's docstring follows it: the API reference shows it.)
MIN_SIZE = 1e-5
"""Smallest circle radius, capsule radius or box side, m: below it float32 contact geometry
and inertia (m r², ~1e-23 kg m² here) lose their meaning."""
FLOAT32_MAX = checks.FLOAT32_MAX
"""Largest magnitude of any input number: float32's range on the device (the bound of
every number fx2d_gpu.checks takes)."""
MAX_COORDINATE = 1e15
"""Largest coordinate the engine simulates, m: beyond it a body would leave collision (its
grid cells past 32-bit range). Inputs beyond it are refused; a state beyond it after a step
is a fault (fx2d_gpu.SimulationError)."""
MAX_SPEED = 1e10
"""Largest speed the engine simulates, m/s or rad/s: beyond it a body would cross the world
in a substep. Inputs beyond it are refused; a state beyond it after a step is a fault."""
MAX_POLYGON_VERTICES = 8
"""Most vertices a convex polygon may have (Box2D uses the same bound)."""
MAX_MANIFOLD_POINTS = 2
"""Points per contact manifold (two shapes touch at one or two points, as in Box2D)."""

AREALESS_KINDS = (SHAPE_EDGE, SHAPE_CHAIN)
"""Shape kinds with no area: static level geometry only (no mass, no inertia)."""

# Edges shorter than this (m) make a polygon degenerate.
_MIN_EDGE_LENGTH = 1e-6


@dataclass(frozen=True)
class Shape:
    """One collision shape in the body frame: a core and a skin of `radius` around it.

    The core is a point, a segment or a convex polygon; the shape is every point within
    `radius` of it (Fx2D's and Box2D's "core + radius"). A Shape is frozen, its arrays
    read-only, so that one Shape may serve many bodies. Build one with circle, box, polygon,
    capsule, edge or chain rather than by hand.

    Attributes:
        kind: SHAPE_CIRCLE (a point core), SHAPE_POLYGON (k >= 3 vertices; radius > 0
            rounds it), SHAPE_CAPSULE (a segment along local x and its radius), SHAPE_EDGE
            (a segment with no skin: static level geometry) or SHAPE_CHAIN (one link of a
            chain: a one-sided segment, see chain).
        radius: the skin, m (a circle's radius; 0 for sharp polygons and edges).
        center: (2,) the circle's centre in the body frame, m.
        vertices: (k, 2) the core's vertices in the body frame, m, counter-clockwise (a
            segment's two ends; empty for circles).
        normals: (k, 2) the outward unit normal of core edge i = (v[i], v[i+1]) (a segment's
            two sides: edge 0 runs v0 -> v1, edge 1 back).
        cones: chain links only, (2, 2): at each end, the unit normal that bounds, with the
            link's front normal (normals[1]), the contact normals allowed there (see chain).
    """

    kind: int
    radius: float
    center: np.ndarray
    vertices: np.ndarray
    normals: np.ndarray
    cones: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))

    def __post_init__(self):
        # Frozen all the way down: one Shape may be shared by many bodies (a scene file's
        # identical boxes), so its arrays cannot be edited in place.
        for name in ("center", "vertices", "normals", "cones"):
            array = np.array(getattr(self, name), dtype=np.float64)
            array.setflags(write=False)
            object.__setattr__(self, name, array)

    def __setstate__(self, state: dict):
        # Unpickled arrays come back writeable: freeze them again.
        for name, value in state.items():
            object.__setattr__(self, name, value)
        self.__post_init__()

    # Cached (the instance's __dict__, which a frozen dataclass still has): a scene of a
    # million bodies asks each shape for these more than once while it is built, and the
    # bulk constructors (circles, boxes) fill them in for a whole array of shapes at once.
    @cached_property
    def bounding_radius(self) -> float:
        """The largest distance from the body origin to the shape's surface, m."""
        if self.kind == SHAPE_CIRCLE:
            return float(np.hypot(*self.center) + self.radius)
        return float(np.max(np.hypot(self.vertices[:, 0], self.vertices[:, 1])) + self.radius)

    @cached_property
    def diameter(self) -> float:
        """The shape's own size, m: the diameter of the smallest circle about its centre that
        holds it (2 radius for a circle, the length of an edge or chain link, 2
        bounding_radius for the other shapes, which are built about the body origin).

        Not bounding_radius: an edge or a chain link is kept where it was given, far from its
        body's origin, and the grid's cell size (builder.cell_size) must not take a 1 km
        terrain's offsets for its links' size (a chain of n links would share one cell: a
        broad phase of n^2 checks).
        """
        if self.kind == SHAPE_CIRCLE:
            return 2.0 * self.radius
        if self.kind in (SHAPE_EDGE, SHAPE_CHAIN):
            a, b = self.vertices
            return float(np.hypot(*(b - a)) + 2.0 * self.radius)
        return 2.0 * self.bounding_radius

    @cached_property
    def unit_inertia(self) -> float:
        """The moment of inertia about the body origin per unit mass, m² (see unit_inertia)."""
        return unit_inertia(self)

    @property
    def core_kind(self) -> int:
        """The kind the device's narrow phase sees.

        SHAPE_CIRCLE (a point core), SHAPE_CHAIN (a chain link) or SHAPE_POLYGON (any other core
        of 2 or more vertices, with this shape's radius).
        """
        return core_kind(self.kind)


def circle(radius: float, center=(0.0, 0.0)) -> Shape:
    """A circle of `radius`, its centre at `center` in the body frame.

    Args:
        radius (float): m, >= MIN_SIZE (1e-5 m).
        center (array_like): (2,) the centre in the body frame, m.

    Raises:
        TypeError: radius not a number, or center not a pair of numbers.
        ValueError: radius below MIN_SIZE, or a value not finite.
    """
    radius = as_real(radius, "radius", minimum=MIN_SIZE)
    empty = np.zeros((0, 2))
    return Shape(SHAPE_CIRCLE, radius, as_vector2(center, "center"), empty, empty)


def rotation(angle) -> np.ndarray:
    """The matrix that turns body-frame vectors by `angle` (rad, counter-clockwise) into the
    world frame: (2, 2) for one angle, (..., 2, 2) for an array of angles (shape (...)).

    One angle is computed in Python floats, so a body's pose is turned the same to the bit
    wherever the host does it (the builder's joint anchors, the scene-file loader).
    """
    if np.ndim(angle) == 0:
        c, s = math.cos(angle), math.sin(angle)
        return np.array([[c, -s], [s, c]])
    c, s = np.cos(angle), np.sin(angle)
    return np.stack([np.stack([c, -s], axis=-1), np.stack([s, c], axis=-1)], axis=-2)


def _next(values: np.ndarray) -> np.ndarray:
    """values[i + 1] at i, cyclically (np.roll(values, -1, axis=0), without its overhead)."""
    return np.concatenate([values[1:], values[:1]])


def polygon_area_centroid(vertices: np.ndarray) -> tuple[float, np.ndarray]:
    """The signed area (positive for counter-clockwise) and centroid of a simple polygon.

    Args:
        vertices: (k, 2) float64, m, in order, either winding.

    Returns:
        (area m², centroid (2,) m); for zero area, the vertices' mean as the centroid.
    """
    x, y = vertices[:, 0], vertices[:, 1]
    xn, yn = _next(x), _next(y)
    cross = x * yn - xn * y
    area = 0.5 * cross.sum()
    if area == 0.0:
        return 0.0, vertices.mean(axis=0)
    centroid = np.array([((x + xn) * cross).sum(), ((y + yn) * cross).sum()]) / (6.0 * area)
    return float(area), centroid


def polygon(vertices, name: str = "vertices", radius=0.0) -> tuple[Shape, np.ndarray]:
    """Check a convex polygon, make it counter-clockwise and re-centre it on its centroid.

    Args:
        vertices (array_like): (k, 2), m, 3 <= k <= MAX_POLYGON_VERTICES, strictly convex (no
            reflex or collinear vertices), either winding.
        name: the argument's name, for the error messages.
        radius (float): m, >= 0: rounds the polygon; the centroid is then the rounded
            shape's.

    Returns:
        The shape and the centroid (2,) m, in the frame the vertices were given in, so that
            the caller can place the body's centre of mass where the user asked.

    Raises:
        TypeError: vertices or radius not numbers.
        ValueError: the wrong number of vertices, no area, repeated vertices, a polygon not
            strictly convex, or a negative radius.
    """
    radius = as_real(radius, "radius", minimum=0.0)
    verts = as_points(vertices, name, MAX_COORDINATE)
    k = verts.shape[0]
    if not 3 <= k <= MAX_POLYGON_VERTICES:
        raise ValueError(f"{name} must have 3 to {MAX_POLYGON_VERTICES} vertices, got {k}")
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
    normals = np.stack([edges[:, 1], -edges[:, 0]], axis=1) / lengths[:, None]
    if radius > 0.0:
        area, first, _ = rounded_moments(verts, normals, radius)
        centroid = first / area
    shape = Shape(SHAPE_POLYGON, radius, np.zeros(2), verts - centroid, normals)
    return shape, centroid


def box(size, radius=0.0) -> Shape:
    """A box of core `size` (width, height) centred on the origin: a 4-vertex polygon.

    Args:
        size (array_like): (width, height), m, each >= MIN_SIZE.
        radius (float): m, >= 0: rounds the corners and adds to the outside (Fx2D's rounded
            rectangle: the outer size is size + 2 radius).

    Raises:
        TypeError: size or radius not numbers.
        ValueError: a side below MIN_SIZE, a negative radius, or a value not finite.
    """
    size = as_vector2(size, "size")
    if np.any(size < MIN_SIZE):
        raise ValueError(f"size must be >= {MIN_SIZE} m on both axes, got {tuple(size)}")
    hw, hh = 0.5 * size
    shape, _ = polygon([[-hw, -hh], [hw, -hh], [hw, hh], [-hw, hh]], "size", radius)
    return shape


def circles(radii, n: int) -> list[Shape]:
    """n circles centred on the origin, each what circle(radius) makes, built as a whole.

    A million circles take a second, not a minute.

    Args:
        radii (float | array_like): m, one for all or (n,), each >= MIN_SIZE; the first that
            breaks circle's rules raises, named radii[i].
        n: how many circles.

    Returns:
        A list of n Shapes.
    """
    return circle_arrays(radii, n).shapes()


def circle_arrays(radii, n: int) -> ShapeArrays:
    """circles' n circles as arrays (ShapeArrays), checked as circles checks them: `radii`
    (m, one for all or (n,)), `n` how many."""
    radii = as_reals(radii, "radii", n, minimum=MIN_SIZE)
    # A disc centred on the origin: Shape.bounding_radius is its radius, and unit_inertia's
    # r^2 / 2 + |centre|^2 is r^2 / 2, in Python's floats as unit_inertia takes it (the
    # same floats: tests/test_bulk_add.py).
    return ShapeArrays(
        SHAPE_CIRCLE,
        radii.copy(),
        np.zeros((n, 2)),
        np.zeros((n, 0, 2)),
        np.zeros((n, 0, 2)),
        radii.copy(),
        2.0 * radii,
        np.array([0.5 * r**2 for r in radii.tolist()], np.float64).reshape(n),
    )


def boxes(sizes, n: int, radius=0.0) -> list[Shape]:
    """n boxes centred on the origin, each what box(size, radius) makes.

    Sharp boxes are built as a whole (a million take seconds, not a minute), rounded ones one
    at a time. The first value that breaks box's rules raises, named sizes[i] or radius[i].

    Args:
        sizes (array_like): (width, height), m: one for all, (2,), or (n, 2).
        n: how many boxes.
        radius (float | array_like): m, one for all or (n,), each >= 0.

    Returns:
        A list of n Shapes.
    """
    return box_arrays(sizes, n, radius).shapes()


def box_arrays(sizes, n: int, radius=0.0) -> ShapeArrays:
    """boxes' n boxes as arrays (ShapeArrays), checked as boxes checks them: `sizes`
    ((width, height) m, (2,) or (n, 2)), `n` how many, `radius` (m, one for all or (n,))."""
    sizes = as_vectors2(sizes, "sizes", n)
    small = np.flatnonzero((sizes < MIN_SIZE).any(1))[:1]
    for i in small:
        raise ValueError(f"sizes[{i}] must be >= {MIN_SIZE} m on both axes, got {tuple(sizes[i])}")
    radii = as_reals(radius, "radius", n, minimum=0.0)
    half = 0.5 * sizes
    hw, hh = half[:, 0], half[:, 1]
    # polygon()'s steps for (-hw, -hh), (hw, -hh), (hw, hh), (-hw, hh), as arrays: the
    # centroid is exactly 0 (its terms cancel in pairs), so the vertices stay as given.
    vertices = np.stack(
        [
            np.stack([-hw, -hh], 1),
            np.stack([hw, -hh], 1),
            np.stack([hw, hh], 1),
            np.stack([-hw, hh], 1),
        ],
        1,
    )
    edges = np.roll(vertices, -1, axis=1) - vertices
    lengths = np.hypot(edges[..., 0], edges[..., 1])
    normals = np.stack([edges[..., 1], -edges[..., 0]], axis=2) / lengths[..., None]
    area, _, second = _polygon_moments(vertices)
    # (box makes a rounded box by polygon's rule, from the same corners)
    return _polygon_rows(vertices, normals, np.hypot(hw, hh) + 0.0, second / area, vertices, radii)


def polygons(vertices, radius=0.0) -> list[Shape]:
    """Polygons of one vertex count, each what polygon(vertices[i], radius=radius[i]) makes
    (counter-clockwise, re-centred on its centroid), built as a whole: a vector env's
    resets make thousands a second. Sharp polygons are built as arrays, rounded ones one at
    a time.

    Args:
        vertices (array_like): (n, k, 2), m: n outlines of k vertices each, as polygon()
            takes one.
        radius (float | array_like): m, one for all or (n,), each >= 0.

    Returns:
        A list of n Shapes (their centroids, polygon()'s second value, are not kept).

    Raises:
        TypeError: vertices or radius not numbers.
        ValueError: vertices not of shape (n, k, 2), or the first outline that breaks
            polygon()'s rules, named vertices[i] (its error, as polygon() raises it).
    """
    return polygon_arrays(vertices, radius).shapes()


def polygon_arrays(vertices, radius=0.0) -> ShapeArrays:
    """polygons' shapes as arrays (ShapeArrays), checked as polygons checks them:
    `vertices` ((n, k, 2) m, n outlines of k vertices), `radius` (m, one for all or (n,))."""
    verts = checks.as_real_array(vertices, "vertices")
    if verts.ndim != 3 or verts.shape[2] != 2:
        raise ValueError(f"vertices must have shape (n, k, 2), got {verts.shape}")
    n, k = verts.shape[:2]
    radii = as_reals(radius, "radius", n, minimum=0.0)
    if n == 0:
        return ShapeArrays.empty(SHAPE_POLYGON, k)
    # polygon()'s steps on every row at once: each row's arithmetic is the one polygon's
    # (sums along a row's own k numbers), so the arrays agree to the bit
    # (tests/test_bulk_add.py).
    x, y = verts[..., 0], verts[..., 1]
    xn = np.concatenate([x[:, 1:], x[:, :1]], axis=1)
    yn = np.concatenate([y[:, 1:], y[:, :1]], axis=1)
    cross = x * yn - xn * y
    area = 0.5 * cross.sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        centroid = np.stack([((x + xn) * cross).sum(axis=1), ((y + yn) * cross).sum(axis=1)], 1)
        centroid = centroid / (6.0 * area)[:, None]
    given = verts
    verts = np.where((area < 0.0)[:, None, None], verts[:, ::-1], verts)  # counter-clockwise
    edges = np.concatenate([verts[:, 1:], verts[:, :1]], axis=1) - verts
    lengths = np.hypot(edges[..., 0], edges[..., 1])
    ex, ey = edges[..., 0], edges[..., 1]
    next_ex = np.concatenate([ex[:, 1:], ex[:, :1]], axis=1)
    next_ey = np.concatenate([ey[:, 1:], ey[:, :1]], axis=1)
    next_lengths = np.concatenate([lengths[:, 1:], lengths[:, :1]], axis=1)
    turn = ex * next_ey - ey * next_ex
    with np.errstate(invalid="ignore"):
        bad = (
            ~np.isfinite(verts).all(axis=(1, 2))
            | (np.abs(verts).max(axis=(1, 2), initial=0.0) >= MAX_COORDINATE)
            | (np.abs(area) < 1e-12)
            | (lengths < _MIN_EDGE_LENGTH).any(axis=1)
            | (turn <= 1e-12 * lengths * next_lengths).any(axis=1)
        )
    if not 3 <= k <= MAX_POLYGON_VERTICES or bad.any():
        i = int(np.flatnonzero(bad)[0]) if bad.any() else 0
        polygon(given[i], f"vertices[{i}]", radii[i])  # raises its error
        raise ValueError(f"vertices[{i}] is not a polygon polygon() takes")  # (never reached)
    normals = np.stack([ey, -ex], axis=2) / lengths[..., None]
    cores = verts - centroid[:, None, :]
    reach = np.max(np.hypot(cores[..., 0], cores[..., 1]), axis=1) + 0.0
    moments_area, _, second = _polygon_moments(cores)
    return _polygon_rows(cores, normals, reach, second / moments_area, verts, radii)


def _polygon_rows(
    cores: np.ndarray,
    normals: np.ndarray,
    reach: np.ndarray,
    unit: np.ndarray,
    outlines: np.ndarray,
    radius: np.ndarray,
) -> ShapeArrays:
    """n polygons as arrays: sharp ones from their re-centred `cores` (n, k, 2), `normals`,
    `reach` (n,: bounding radius) and `unit` (n,: unit inertia, second moment / area);
    those of `radius` (n,) > 0 rounded from their counter-clockwise `outlines` (_rounded)."""
    n = len(radius)
    made = ShapeArrays(
        SHAPE_POLYGON, np.zeros(n), np.zeros((n, 2)), cores, normals, reach, 2.0 * reach, unit
    )
    rounded = np.flatnonzero(radius > 0.0)
    if len(rounded):
        made.put(rounded, _rounded(outlines[rounded], normals[rounded], radius[rounded]))
    return made


def _rounded(vertices: np.ndarray, normals: np.ndarray, radius: np.ndarray) -> ShapeArrays:
    """Rounded polygons as polygon() makes them from counter-clockwise `vertices` (n, k,
    2), their edges' `normals` and `radius` (n,) > 0: each core re-centred on its rounded
    shape's centroid (rounded_moments_rows: polygon's sums, row by row the same floats)."""
    area, first, _ = rounded_moments_rows(vertices, normals, radius)
    return _skinned(SHAPE_POLYGON, vertices - (first / area[:, None])[:, None, :], normals, radius)


def capsule_arrays(lengths, radii, n: int) -> ShapeArrays:
    """n capsules as arrays (ShapeArrays), each what capsule(lengths[i], radii[i]) makes,
    built as a whole: `lengths` (m, one for all or (n,), each >= MIN_SIZE: a capsule, not
    the circle capsule() makes of a shorter one) and `radii` (m, one for all or (n,), each
    >= MIN_SIZE), checked as capsule checks them (named lengths[i], radii[i])."""
    lengths = as_reals(lengths, "lengths", n, minimum=MIN_SIZE, limit=MAX_COORDINATE)
    radii = as_reals(radii, "radii", n, minimum=MIN_SIZE, limit=MAX_COORDINATE)
    half, zero = 0.5 * lengths, np.zeros(n)
    ends = np.stack([np.stack([-half, zero], 1), np.stack([half, zero], 1)], 1)
    return _skinned(SHAPE_CAPSULE, ends, _segment_normals_rows(ends[:, 0], ends[:, 1]), radii)


def _skinned(kind: int, cores: np.ndarray, normals: np.ndarray, radius: np.ndarray) -> ShapeArrays:
    """n shapes of `kind` with a skin: their `cores` (n, k, 2) where the body frame has
    them, the edges' `normals`, `radius` (n,) > 0, and the properties Shape computes for
    such a core (unit_inertia's rounded_moments, bounding_radius' farthest vertex)."""
    area, _, second = rounded_moments_rows(cores, normals, radius)
    reach = np.max(np.hypot(cores[..., 0], cores[..., 1]), axis=1) + radius
    n = len(radius)
    return ShapeArrays(
        kind, radius.copy(), np.zeros((n, 2)), cores, normals, reach, 2.0 * reach, second / area
    )


@dataclass
class ShapeArrays:
    """n shapes of one kind and vertex count as arrays, row i being shape i: what the bulk
    constructors build (circle_arrays, box_arrays, polygon_arrays), and a body's shapes
    over a batch's worlds (model/world_shapes.py), which a vector env's restarts rewrite a
    few rows at a time without a Shape object per world.

    Attributes:
        kind: the shapes' Shape.kind (SHAPE_CIRCLE, SHAPE_POLYGON or SHAPE_CAPSULE; a
            body resized per world keeps its kind).
        radius: (n,) float64, m (Shape.radius).
        center: (n, 2) float64, m (Shape.center).
        vertices, normals: (n, k, 2) float64, k the vertex count (0 for circles).
        bounding_radius, diameter: (n,) float64, m; unit_inertia: (n,) float64, m²: the
            Shape properties of each row, computed as Shape computes them.
    """

    kind: int
    radius: np.ndarray
    center: np.ndarray
    vertices: np.ndarray
    normals: np.ndarray
    bounding_radius: np.ndarray
    diameter: np.ndarray
    unit_inertia: np.ndarray

    #: The per-row arrays, in order.
    FIELDS = (
        "radius",
        "center",
        "vertices",
        "normals",
        "bounding_radius",
        "diameter",
        "unit_inertia",
    )

    def __len__(self) -> int:
        return len(self.radius)

    @classmethod
    def empty(cls, kind: int, vertex_count: int) -> ShapeArrays:
        """No shapes of `kind` with `vertex_count` vertices."""
        points = np.zeros((0, vertex_count, 2))
        return cls(kind, np.zeros(0), np.zeros((0, 2)), points, points.copy(), *np.zeros((3, 0)))

    @classmethod
    def of_shapes(cls, made: list[Shape]) -> ShapeArrays:
        """The shapes `made` (of one kind and vertex count, at least one) as arrays, row
        by row."""
        return cls(
            made[0].kind,
            np.array([s.radius for s in made], np.float64),
            np.array([s.center for s in made], np.float64).reshape(len(made), 2),
            np.array([s.vertices for s in made], np.float64).reshape(len(made), -1, 2),
            np.array([s.normals for s in made], np.float64).reshape(len(made), -1, 2),
            np.array([s.bounding_radius for s in made], np.float64),
            np.array([s.diameter for s in made], np.float64),
            np.array([s.unit_inertia for s in made], np.float64),
        )

    @classmethod
    def repeated(cls, shape: Shape, n: int) -> ShapeArrays:
        """`shape` in each of n rows."""
        return cls.of_shapes([shape]).take(np.zeros(n, np.int64))

    @classmethod
    def concatenated(cls, parts: list[ShapeArrays]) -> ShapeArrays:
        """The rows of `parts` (of one kind and vertex count, at least one) one after
        another."""
        return cls(
            parts[0].kind,
            *(np.concatenate([getattr(p, name) for p in parts]) for name in cls.FIELDS),
        )

    def take(self, rows) -> ShapeArrays:
        """The shapes at `rows` ((k,) indices), copied."""
        rows = np.asarray(rows, np.int64)
        return ShapeArrays(self.kind, *(getattr(self, name)[rows] for name in self.FIELDS))

    def put(self, rows, other: ShapeArrays) -> None:
        """Rows `rows` ((k,) indices) become `other`'s k shapes (of this kind and vertex
        count), in place."""
        for name in self.FIELDS:
            getattr(self, name)[rows] = getattr(other, name)

    def copy(self) -> ShapeArrays:
        """These shapes with arrays of their own."""
        return ShapeArrays(self.kind, *(getattr(self, name).copy() for name in self.FIELDS))

    def shape(self, i: int) -> Shape:
        """Row i as a Shape of its own (its arrays copied: the rows may be rewritten)."""
        return _prepared(
            self.kind,
            float(self.radius[i]),
            _frozen(self.center[i]),
            _frozen(self.vertices[i]),
            _frozen(self.normals[i]),
            bounding_radius=float(self.bounding_radius[i]),
            diameter=float(self.diameter[i]),
            unit_inertia=float(self.unit_inertia[i]),
        )

    def shapes(self) -> list[Shape]:
        """Every row as a Shape, sharing these arrays, which it makes read-only (a bulk
        constructor's own arrays: no copy of a million rows)."""
        for name in ("center", "vertices", "normals"):
            getattr(self, name).setflags(write=False)
        return [
            _prepared(
                self.kind,
                radius,
                center,
                corners,
                sides,
                bounding_radius=far,
                diameter=size,
                unit_inertia=inertia,
            )
            # Iterating the arrays gives each shape its rows as read-only views.
            for radius, center, corners, sides, far, size, inertia in zip(
                self.radius.tolist(),
                self.center,
                self.vertices,
                self.normals,
                self.bounding_radius.tolist(),
                self.diameter.tolist(),
                self.unit_inertia.tolist(),
                strict=True,
            )
        ]


def core_kind(kind: int) -> int:
    """The kind the device's narrow phase sees for a shape of `kind` (Shape.core_kind)."""
    if kind in (SHAPE_CIRCLE, SHAPE_CHAIN):
        return kind
    return SHAPE_POLYGON


def _prepared(
    kind: int,
    radius: float,
    center: np.ndarray,
    vertices: np.ndarray,
    normals: np.ndarray,
    **cached,
) -> Shape:
    """A Shape from arrays that are already float64 and read-only (not copied: a bulk
    constructor's rows), with its cached properties filled in."""
    shape = object.__new__(Shape)
    # Frozen: its fields are set in its __dict__, as dataclasses' own __init__ does.
    shape.__dict__.update(
        kind=kind,
        radius=radius,
        center=center,
        vertices=vertices,
        normals=normals,
        cones=_NO_POINTS,
        **cached,
    )
    return shape


def _frozen(array) -> np.ndarray:
    array = np.array(array, dtype=np.float64)
    array.setflags(write=False)
    return array


_ORIGIN = _frozen(np.zeros(2))
_NO_POINTS = _frozen(np.zeros((0, 2)))


def _segment_normals(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The two sides of segment a -> b as a 2-vertex core: edge 0 (a -> b) and edge 1 (b ->
    a), outward unit normals as for a counter-clockwise polygon."""
    return _segment_normals_rows(a[None], b[None])[0]


def _segment_normals_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, 2, 2): _segment_normals of n segments a[i] -> b[i] ((n, 2) each), row by row."""
    d = (b - a) / np.hypot(b[:, 0] - a[:, 0], b[:, 1] - a[:, 1])[:, None]
    return np.stack([np.stack([d[:, 1], -d[:, 0]], 1), np.stack([-d[:, 1], d[:, 0]], 1)], 1)


def capsule(length, radius) -> Shape:
    """A capsule along local x: a segment of `length` centred on the origin, inflated by `radius`.

    The segment runs from (-length/2, 0) to (length/2, 0) in the body frame.

    Args:
        length (float): m, >= 0; below MIN_SIZE the capsule is a circle (as in Fx2D).
        radius (float): m, >= MIN_SIZE.

    Raises:
        TypeError: length or radius not a number.
        ValueError: length negative, radius below MIN_SIZE, or a value not finite or beyond
            MAX_COORDINATE.
    """
    length = as_real(length, "length", minimum=0.0, limit=MAX_COORDINATE)
    radius = as_real(radius, "radius", minimum=MIN_SIZE, limit=MAX_COORDINATE)
    if length < MIN_SIZE:
        return circle(radius)
    ends = np.array([[-0.5 * length, 0.0], [0.5 * length, 0.0]])
    return Shape(SHAPE_CAPSULE, radius, np.zeros(2), ends, _segment_normals(*ends))


def edge(a, b) -> Shape:
    """A segment from `a` to `b` with no skin and no area: static level geometry.

    Its ends are kept where they were given (the body origin is not moved to its middle), as
    Fx2D does.

    Args:
        a (array_like): (2,) one end in the body frame, m.
        b (array_like): (2,) the other end, m, at least MIN_SIZE from `a`.

    Raises:
        TypeError: a or b not a pair of numbers.
        ValueError: the ends too close, or not finite or beyond MAX_COORDINATE.
    """
    a = as_vector2(a, "a", MAX_COORDINATE)
    b = as_vector2(b, "b", MAX_COORDINATE)
    if np.hypot(*(b - a)) < MIN_SIZE:
        raise ValueError(
            f"a and b must be at least {MIN_SIZE} m apart, got {tuple(a)} and {tuple(b)}"
        )
    ends = np.array([a, b])
    return Shape(SHAPE_EDGE, 0.0, np.zeros(2), ends, _segment_normals(a, b))


def chain(points, loop: bool = False, name: str = "points") -> list[Shape]:
    """The links of a chain through `points`: one-sided, smooth static terrain.

    The chain is kept where it was given, as Fx2D does.

    As in Fx2D (its docs/collision_resolution.md), a chain is one-sided: its front is the
    left of each link's direction, so a polyline written left to right holds bodies above it,
    and a body whose centre is behind a link does not touch that link.

    Each link knows its neighbours (Box2D's ghost vertices): a contact normal at a link's end
    must lie between the link's front normal and the bound stored in `cones` there. Where the
    chain bends away (a convex corner, whose rounded outside the link ending there holds) the
    bound is the next link's front normal; where it is flat or bends up (the neighbour's face
    holds the body) it is the front normal itself. So a body sliding over the joints of a
    flat chain never catches on them. An open end's bound is the link's own direction out of
    it.

    Args:
        points (array_like): (n, 2) in the body frame, m; n >= 3, consecutive points at least
            MIN_SIZE apart.
        loop: True joins the last point to the first (n links instead of n - 1).
        name: the argument's name, for the error messages.

    Returns:
        The links, one SHAPE_CHAIN Shape each, in order.

    Raises:
        TypeError: points are not numbers.
        ValueError: fewer than 3 points, consecutive points too close, or points not finite
            or beyond MAX_COORDINATE.
    """
    pts = as_points(points, name, MAX_COORDINATE)
    if len(pts) < 3:
        raise ValueError(f"{name} must have at least 3 points, got {len(pts)}")
    ends = np.concatenate([pts, pts[:1]]) if loop else pts
    directions = np.diff(ends, axis=0)
    lengths = np.hypot(directions[:, 0], directions[:, 1])
    if np.any(lengths < MIN_SIZE):
        raise ValueError(f"{name}: consecutive points must be at least {MIN_SIZE} m apart")
    directions = directions / lengths[:, None]
    fronts = np.stack([-directions[:, 1], directions[:, 0]], axis=1)  # left of each link
    n = len(directions)
    # The cached properties, for every link at once (each one's own NumPy calls took 2.5 s
    # of a 100,000-link chain's first step): no skin, no area.
    reach = np.hypot(ends[:, 0], ends[:, 1])
    far = np.maximum(reach[:-1], reach[1:]).tolist()
    sizes = lengths.tolist()
    links = []
    for i in range(n):
        bounds = []
        for side, neighbour in ((0, i - 1), (1, i + 1)):
            if not loop and not 0 <= neighbour < n:
                bounds.append(-directions[i] if side == 0 else directions[i])
                continue
            neighbour %= n
            first, second = (
                (directions[neighbour], directions[i])
                if side == 0
                else (directions[i], directions[neighbour])
            )
            turn = first[0] * second[1] - first[1] * second[0]
            # A right turn (clockwise) bends the chain away from its front: a convex corner,
            # whose rounded outside belongs to the link that ends there (one link per corner,
            # or both would report the same contact).
            convex = turn < -1e-9 and side == 1
            bounds.append(fronts[neighbour] if convex else fronts[i])
        a, b = ends[i], ends[i + 1]
        link = Shape(
            SHAPE_CHAIN,
            0.0,
            np.zeros(2),
            np.array([a, b]),
            _segment_normals(a, b),
            np.array(bounds),
        )
        link.__dict__.update(bounding_radius=far[i], diameter=sizes[i], unit_inertia=0.0)
        links.append(link)
    return links


def _polygon_moments(vertices: np.ndarray) -> tuple:
    """Signed area, first moment (2,) and polar second moment about the origin of a simple
    polygon (by triangles (origin, v_i, v_i+1)); 0 for fewer than 3 vertices. Vertices (k,
    2) give floats; (n, k, 2), n polygons of k vertices, give arrays (n,), (n, 2), (n,)
    (shapes.boxes: each row's sums come out as the one polygon's)."""
    if vertices.shape[-2] < 3:
        return 0.0, np.zeros(2), 0.0
    v = vertices
    vn = np.concatenate([v[..., 1:, :], v[..., :1, :]], axis=-2)  # v[i + 1], cyclically
    cross = v[..., 0] * vn[..., 1] - vn[..., 0] * v[..., 1]
    area = 0.5 * cross.sum(-1)
    first = (cross[..., None] * (v + vn)).sum(-2) / 6.0
    second = (cross * ((v * v).sum(-1) + (v * vn).sum(-1) + (vn * vn).sum(-1))).sum(-1) / 12.0
    if vertices.ndim == 2:
        return float(area), first, float(second)
    return area, first, second


def rounded_moments(
    vertices: np.ndarray, normals: np.ndarray, radius: float
) -> tuple[float, np.ndarray, float]:
    """Area, first moment and polar second moment about the origin of a rounded convex core.

    The shape is every point within `radius` of the core: the core, a rectangle of depth
    `radius` outside each edge, and a circular sector at each vertex between its two edges'
    normals (the sectors add up to one disc).

    Args:
        vertices: (k, 2) the core's vertices, m, counter-clockwise, k >= 2.
        normals: (k, 2) the outward unit normals of its edges (as Shape.normals).
        radius: the skin, m.

    Returns:
        (area m², first moment (2,) m³, polar second moment m⁴).
    """
    area, first, second = rounded_moments_rows(vertices[None], normals[None], np.array([radius]))
    return float(area[0]), first[0], float(second[0])


def rounded_moments_rows(
    vertices: np.ndarray, normals: np.ndarray, radius: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """rounded_moments of n rounded cores of k vertices at once, row by row the same floats
    (rounded_moments is this with n = 1; a vector env's restarts make thousands of rounded
    boxes and capsules, ~0.2 ms each a shape at a time). Each row's sums run over its
    edges in order; the angles are Python's math functions; a dot product is x x' + y y',
    never a BLAS call (whose fused multiply-adds would round differently on other CPUs).

    Args:
        vertices: (n, k, 2) the cores' vertices, m, counter-clockwise, k >= 2.
        normals: (n, k, 2) their edges' outward unit normals.
        radius: (n,) the skins, m.

    Returns:
        (area (n,) m², first moment (n, 2) m³, polar second moment (n,) m⁴).
    """
    n, k = vertices.shape[:2]
    radius = np.asarray(radius, np.float64).reshape(n)
    if k >= 3:
        area, first, second = _polygon_moments(vertices)
    else:
        area, first, second = np.zeros(n), np.zeros((n, 2)), np.zeros(n)
    skin = radius[:, None]
    radius_4 = np.array([r**4 for r in radius.tolist()])  # (Python's pow, as one shape's)

    def angles(directions: np.ndarray) -> np.ndarray:
        x, y = directions[:, 0].tolist(), directions[:, 1].tolist()
        return np.array([math.atan2(b, a) for a, b in zip(x, y, strict=True)]).reshape(n)

    for i in range(k):
        v, v_next, edge_normal = vertices[:, i], vertices[:, (i + 1) % k], normals[:, i]
        a, f, m = _polygon_moments(
            np.stack([v, v_next, v_next + skin * edge_normal, v + skin * edge_normal], axis=1)
        )
        sign = np.sign(a)
        area, first, second = area + np.abs(a), first + sign[:, None] * f, second + sign * m
        # The sector at v_next, from this edge's normal to the next edge's.
        start = angles(edge_normal)
        if k == 2:
            sweep = np.full(n, math.pi)  # a segment's ends: half discs
        else:
            sweep = (angles(normals[:, (i + 1) % k]) - start) % (2.0 * math.pi)
        sector = 0.5 * radius * radius * sweep
        turned = sector != 0.0
        # Centroid 4 r sin(s/2) / (3 s) from the apex along the bisector; J about the apex
        # r^4 s / 4; moved to the origin by the parallel-axis rule.
        bisector = (start + 0.5 * sweep).tolist()
        half_sines = np.array([math.sin(0.5 * x) for x in sweep.tolist()])
        bisectors = np.stack(
            [np.array([math.cos(x) for x in bisector]), np.array([math.sin(x) for x in bisector])],
            axis=1,
        ).reshape(n, 2)
        with np.errstate(divide="ignore", invalid="ignore"):
            reach = 4.0 * radius * half_sines / (3.0 * sweep)
        offset = reach[:, None] * bisectors
        area = np.where(turned, area + sector, area)
        first = np.where(turned[:, None], first + sector[:, None] * (v_next + offset), first)
        dot_offset = v_next[:, 0] * offset[:, 0] + v_next[:, 1] * offset[:, 1]
        dot_self = v_next[:, 0] * v_next[:, 0] + v_next[:, 1] * v_next[:, 1]
        added = radius_4 * sweep / 4.0 + 2.0 * sector * dot_offset + sector * dot_self
        second = np.where(turned, second + added, second)
    return area, first, second


def unit_inertia(shape: Shape) -> float:
    """The moment of inertia of `shape` about the body origin per unit mass, m².

    Uniform density; 0 for edges and chain links (no area).
    """
    if shape.kind == SHAPE_CIRCLE:
        return 0.5 * shape.radius**2 + float(shape.center @ shape.center)
    if shape.kind in AREALESS_KINDS:
        return 0.0
    if shape.radius > 0.0:
        area, _, second = rounded_moments(shape.vertices, shape.normals, shape.radius)
    else:
        area, _, second = _polygon_moments(shape.vertices)
    return float(second / area)


def outline(shape: Shape, arc_segments: int = 6) -> np.ndarray:
    """The boundary of a non-circle shape, for drawing: (m, 2), body frame, counter-clockwise.

    A sharp core gives its vertices; with a skin, an arc of `arc_segments` pieces around each
    vertex (a capsule's ends become half circles); an edge gives its two ends.

    Args:
        shape: any shape but a circle.
        arc_segments: pieces per rounded corner.

    Raises:
        ValueError: `shape` is a circle (a circle is its radius).
    """
    if shape.kind == SHAPE_CIRCLE:
        raise ValueError("outline is for cores of 2 or more vertices; a circle is its radius")
    if shape.radius == 0.0:
        return np.array(shape.vertices)
    points = []
    k = len(shape.vertices)
    for i in range(k):
        before, after = shape.normals[i - 1], shape.normals[i]
        start = math.atan2(before[1], before[0])
        sweep = (math.atan2(after[1], after[0]) - start) % (2.0 * math.pi)
        if k == 2:
            sweep = math.pi
        angles = start + sweep * np.linspace(0.0, 1.0, arc_segments + 1)
        points.append(
            shape.vertices[i] + shape.radius * np.stack([np.cos(angles), np.sin(angles)], 1)
        )
    return np.concatenate(points)
