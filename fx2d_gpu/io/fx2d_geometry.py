"""Fx2D's geometry blocks as shapes: where Fx2D's loader puts each, and the scene's walls.

A block's pose offset places it in its entity's frame; a polygon's vertices are first
re-centred on their vertex mean (Fx2D's FxShape does `verts - verts.mean()`), so the mean
sits at the entity pose plus the block's pose offset. The loader puts the body's centre of
mass at the area centroid of its collision shape (of its visual shape when it has none):
GeometryBlocks.shape gives a block relative to it, so every vertex keeps the world position
Fx2D gives it.

Fx2D keeps every entity inside the scene rectangle [0, W] x [0, H] (FxScene::step, with
W, H = scene.size truncated to whole metres, as Fx2D stores it): add_boundary gives a scene
that rectangle as four static, frictionless, non-bouncing walls just outside it (see
docs/fx2d-differences.md for how that differs).
"""

import math
from typing import NamedTuple

import numpy as np

from .. import shapes
from ..shapes import rotation
from .yaml_reader import Where

#: In the order Fx2D's loader tries them (buildShape: chain before edge; its docs list edge
#: first): the first present wins.
GEOMETRY_KEYS = ("circle", "capsule", "rectangle", "polygon", "chain", "edge")
#: The boundary walls' thickness: this fraction of the rectangle's larger side, at least
#: BOUNDARY_MIN_THICKNESS (m). Thick enough that a substep's motion cannot cross a wall.
BOUNDARY_THICKNESS_FRACTION = 0.25
BOUNDARY_MIN_THICKNESS = 1.0


class Block(NamedTuple):
    """A geometry block worked out, in the frame given by the block's pose: kind "circle"
    with data (centre, radius), "polygon" with data ((k, 2) vertices, skin radius),
    "capsule" ((2, 2) segment ends, radius) or "edge" ((2, 2) ends); centroid: its area
    centroid in that frame, m (an edge's: the frame's origin, where Fx2D keeps the body);
    "chain": data its (n, 2) points (a body per link, Scene.add_chain). key: the file's
    geometry key ("rectangle" for a polygon written as one), for error messages."""

    kind: str
    data: object
    centroid: np.ndarray
    key: str


class GeometryBlocks:
    """A scene file's geometry blocks as shapes, each distinct block worked out once.

    Large scene files repeat a handful of blocks (50,000 identical boxes): checking and
    measuring each again was most of their load. The results are immutable (Shape's
    arrays are read-only), so bodies share them.
    """

    def __init__(self):
        self._blocks = {}  # (repr(geometry), repr(pose)) -> Block
        self._shapes = {}  # (id(block), origin) -> Shape; blocks stay alive

    def of(self, where: "Where", block) -> Block:
        """The geometry block of a visual or collision mapping (`where` names it)."""
        geometry = where.mapping(block, "geometry", required=True)
        # repr tells True from 1 and 1 from 1.0 where a tuple's equality would not.
        key = (repr(geometry), repr(block.get("pose")))
        if key not in self._blocks:
            kind, data, name = _geometry(where, block, geometry)
            self._blocks[key] = Block(kind, data, _centroid(where, kind, data, name), name)
        return self._blocks[key]

    def shape(self, where, block: Block, origin) -> shapes.Shape:
        """The block's Shape relative to `origin` (the body's centre of mass in the entity
        frame; its moment of inertia per unit mass about it, m², is Shape.unit_inertia,
        computed once per shared Shape); `where`: the block's visual or collision mapping."""
        key = (id(block), origin.tobytes())
        if key not in self._shapes:
            try:
                self._shapes[key] = _shape(block.kind, block.data, origin)
            except (ValueError, TypeError) as exc:
                raise where.error(f"geometry.{block.key}", str(exc)) from None
        return self._shapes[key]


def _bounded(where, key, values):
    """`values` (numbers, m) as they are; ValueError naming `key` where one is beyond the
    coordinates the engine simulates (shapes.MAX_COORDINATE)."""
    largest = abs(values) if isinstance(values, float) else np.abs(values).max()
    if largest > shapes.MAX_COORDINATE:
        raise where.error(key, f"must be within +-{shapes.MAX_COORDINATE:g} m, got {largest:g}")
    return values


def _geometry(where: Where, block, geometry):
    """(kind, data, the file's key) of a geometry block (see Block; `where`: the visual or
    collision block's)."""
    sub = where.sub(geometry, "geometry")
    key = next((k for k in GEOMETRY_KEYS if k in geometry), None)
    unknown = [k for k in geometry if k not in GEOMETRY_KEYS and k != "radius"]
    if key is None or unknown:
        expected = f"unknown geometry (expected one of {list(GEOMETRY_KEYS)})"
        raise sub.error(unknown[0], expected) if unknown else where.error("geometry", expected)
    offset = where.vector(block, "pose", 3, [0.0, 0.0, 0.0])
    _bounded(where, "pose", offset[:2])
    # Each reader gives the block in its own frame: turned and moved by the block's pose.
    turn = rotation(math.radians(offset[2]))
    kind, data = _READERS[key](sub, geometry, lambda points: points @ turn.T + offset[:2])
    return kind, data, key


def _circle(sub: Where, geometry, place):
    radius = _bounded(sub, "circle", sub.number(geometry, "circle", positive=True))
    return "circle", (place(np.zeros(2)), radius)


def _capsule(sub: Where, geometry, place):
    """A capsule's block: [length, radius] or {length:, radius:}, along the block's x."""
    raw = geometry["capsule"]
    if isinstance(raw, dict):
        cw = sub.sub(raw, "capsule")
        cw.known(raw, {"length", "radius"})
        length = _bounded(cw, "length", cw.number(raw, "length", minimum=0.0))
        radius = _bounded(cw, "radius", cw.number(raw, "radius", positive=True))
    elif isinstance(raw, list) and len(raw) == 2:
        length, radius = _bounded(sub, "capsule", sub.vector(geometry, "capsule", 2))
        if length < 0 or radius <= 0:
            raise sub.error("capsule", f"needs length >= 0 and radius > 0, got {raw}")
    else:
        raise sub.error("capsule", "must be [length, radius] or {length:, radius:}", TypeError)
    if length < shapes.MIN_SIZE:  # Fx2D: a capsule of length 0 is a circle
        return "circle", (place(np.zeros(2)), radius)
    ends = np.array([[-length / 2, 0.0], [length / 2, 0.0]])
    return "capsule", (place(ends), radius)


def _chain(sub: Where, geometry, place):
    raw = geometry["chain"]
    if not (
        isinstance(raw, list)
        and len(raw) >= 3
        and all(isinstance(v, list) and len(v) == 2 for v in raw)
    ):
        raise sub.error("chain", "must be a list of at least 3 [x, y] points", TypeError)
    points = np.array([sub.vector({"chain": v}, "chain", 2) for v in raw])
    points = _bounded(sub, "chain", place(points))
    try:
        shapes.chain(points)
    except ValueError as exc:
        raise sub.error("chain", str(exc)) from None
    return "chain", points


def _edge(sub: Where, geometry, place):
    raw = geometry["edge"]
    if not (
        isinstance(raw, list)
        and len(raw) == 2
        and all(isinstance(v, list) and len(v) == 2 for v in raw)
    ):
        raise sub.error("edge", "must be [[x1, y1], [x2, y2]]", TypeError)
    ends = np.array([sub.vector({"edge": v}, "edge", 2) for v in raw])
    return "edge", _bounded(sub, "edge", place(ends))


def _polygon(sub: Where, geometry, place):
    """A rectangle's or a polygon's block, rounded by its sibling `radius:` (Fx2D reads it
    there, and ignores it beside other geometry)."""
    skin = sub.number(geometry, "radius", 0.0, minimum=0.0) if "radius" in geometry else 0.0
    _bounded(sub, "radius", skin)
    if "rectangle" in geometry:
        size = _bounded(sub, "rectangle", sub.vector(geometry, "rectangle", 2))
        if np.any(size <= 0):
            raise sub.error("rectangle", f"must be positive, got {size.tolist()}")
        hw, hh = size / 2
        verts = np.array([[-hw, -hh], [hw, -hh], [hw, hh], [-hw, hh]])
    else:
        verts = _polygon_vertices(sub, geometry["polygon"])
    return "polygon", (place(verts), skin)


def _polygon_vertices(sub: Where, raw) -> np.ndarray:
    """A polygon block's vertices (k, 2), re-centred on their mean as Fx2D does."""
    if isinstance(raw, list) and len(raw) > shapes.MAX_POLYGON_VERTICES:
        raise sub.error(
            "polygon", f"must have 3 to {shapes.MAX_POLYGON_VERTICES} vertices, got {len(raw)}"
        )
    if not isinstance(raw, list) or not all(
        isinstance(v, list)
        and len(v) == 2
        and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in v)
        for v in raw
    ):
        raise sub.error("polygon", "must be a list of [x, y] points", TypeError)
    if len(raw) < 3:
        raise sub.error("polygon", f"needs at least 3 vertices, got {len(raw)}")
    try:
        verts = np.array(raw, float)
    except OverflowError:  # an int past float's range
        verts = np.full((len(raw), 2), math.inf)
    if not np.all(np.isfinite(verts)):
        raise sub.error("polygon", f"must be finite, got {raw!r}")
    verts = _bounded(sub, "polygon", verts)
    # Fx2D re-centres a polygon on its vertex mean: the mean is what sits at the pose.
    return verts - verts.mean(axis=0)


#: The reader of each geometry key: (its Where, the geometry mapping, place: the block's
#: pose applied to points (k, 2) or (2,)) -> (kind, data) (see Block).
_READERS = {
    "circle": _circle,
    "capsule": _capsule,
    "chain": _chain,
    "edge": _edge,
    "rectangle": _polygon,
    "polygon": _polygon,
}


def _shape(kind, data, origin):
    """A Shape relative to `origin` (the centre of mass in the body frame)."""
    if kind == "circle":
        center, radius = data
        return shapes.circle(radius, center - origin)
    if kind == "edge":
        return shapes.edge(data[0] - origin, data[1] - origin)
    if kind == "capsule":
        ends, radius = data
        axis = np.arctan2(*(ends[1] - ends[0])[::-1])
        length = float(np.hypot(*(ends[1] - ends[0])))
        capsule = shapes.capsule(length, radius)
        return _placed(capsule, rotation(axis), (ends[0] + ends[1]) / 2 - origin)
    verts, skin = data
    shape, centroid = shapes.polygon(verts - origin, radius=skin)
    # polygon() re-centres on the centroid; shift back so the shape sits at its true offset.
    return _placed(shape, np.eye(2), centroid)


def _placed(shape, turn, offset):
    """`shape` turned by `turn` (2, 2) and moved by `offset` (m) in its body frame."""
    return shapes.Shape(
        shape.kind,
        shape.radius,
        turn @ shape.center + offset,
        shape.vertices @ turn.T + offset,
        shape.normals @ turn.T,
    )


def _centroid(where, kind, data, key):
    if kind == "circle":
        return data[0]
    if kind in ("edge", "chain"):
        return np.zeros(2)
    if kind == "capsule":
        return data[0].mean(axis=0)
    verts, skin = data
    try:
        if skin > 0.0:
            return shapes.polygon(verts, radius=skin)[1]  # the rounded shape's
        return shapes.polygon_area_centroid(verts)[1]
    except (ValueError, TypeError) as exc:
        raise where.error(f"geometry.{key}", str(exc)) from None


def _boundary_walls(width, height):
    """(centre, size) of the four walls around [0, width] x [0, height] (left, right, bottom,
    top; the side walls run past the corners), and their thickness."""
    t = max(BOUNDARY_MIN_THICKNESS, BOUNDARY_THICKNESS_FRACTION * max(width, height))
    tall = height + 2 * t
    walls = [
        ((-t / 2, height / 2), (t, tall)),
        ((width + t / 2, height / 2), (t, tall)),
        ((width / 2, -t / 2), (width, t)),
        ((width / 2, height + t / 2), (width, t)),
    ]
    return walls, t


def add_boundary(scene, size, background, visuals):
    """Fx2D's scene rectangle as four static walls appended after the entities' bodies.

    Fx2D (FxScene::step) stops an entity's pose at the rectangle [0, W] x [0, H], with the
    scene size stored as unsigned ints (truncated), and the velocity it derives from the
    pose afterwards leaves no bounce and no friction: hence walls of elasticity 0 and
    friction 0 (contacts mix both by min). The walls have no names (body_index does not see
    them); scene.meta["boundary"] lists their indices.
    """
    width, height = (float(int(v)) for v in size)  # Fx2D's FxVec2ui: whole metres
    walls, thickness = _boundary_walls(width, height)
    bodies = []
    for centre, wall_size in walls:
        bodies.append(
            scene.add_box(
                centre,
                wall_size,
                mass=0.0,
                elasticity=0.0,
                static_friction=0.0,
                dynamic_friction=0.0,
            )
        )
        # Not scene content: the renderer and the viewer skip it (render.drawn).
        visuals.append(
            dict(shape=None, fill=background, border=None, border_thickness=0.0, boundary=True)
        )
    return {"rectangle": (0.0, 0.0, width, height), "bodies": tuple(bodies), "thickness": thickness}
