"""Per-world geometry of a batched scene: each world's sizes of its bodies' shapes (box
sizes, circle radii, capsule lengths and radii, rounding radii, polygon vertices), set
by Scene.set_shape_params for domain randomisation and parameter sweeps.

The host keeps, for each body some world resized, one Shape per world (WorldShapes); the
device reads the shapes by *shape row* (device.BodyModel, bodies.shape_row), as it reads
materials by material row (world_params.py): while every world holds the same shapes,
one row per body, as a scene that never resized anything has (the same upload, the same
reads); once a world differs, one row per body slot, and each world's own grid cell
(BodyModel.world_cell: the median diameter of its shapes, builder.cell_size_of). Every
shape is made by the functions the add_* methods make theirs with (shapes.circle, box,
capsule, polygon) and its rows by the builder's rule (builder.shape_rows), so world w of
a batch steps bit for bit as a one-world scene built with world w's shapes.

A body keeps its shape's kind in every world (a box stays a box, a polygon keeps its
vertex count); edges and chain links are not resized. Static bodies (level geometry:
terrain, walls, obstacles) are placed per world too (WorldShapes.poses): their poses in
each world's state, and in the state a reset starts the world from (initial_state).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .. import shapes
from ..checks import as_real_array
from ..enums import SHAPE_CAPSULE, SHAPE_CIRCLE, SHAPE_POLYGON
from ..shapes import MAX_COORDINATE, MAX_POLYGON_VERTICES, Shape
from .builder import SHAPE_FIELDS, cell_size_of, shape_rows

if TYPE_CHECKING:
    from .builder import ModelBuilder

#: The keywords of Scene.set_shape_params that size a shape, in the order they are read.
SHAPE_PARAMS = ("size", "radius", "length", "vertices")
#: Device fields that follow from the per-world shapes (beside SHAPE_FIELDS).
WORLD_SHAPE_FIELDS = ("shape_per_world", "world_cell")


def is_box(shape: Shape) -> bool:
    """Whether `shape` is a box (shapes.box): a 4-vertex polygon, a rectangle about the body
    origin along the body's axes (a rounded box's centroid may lie an ulp off the origin)."""
    if shape.kind != SHAPE_POLYGON or len(shape.vertices) != 4:
        return False
    v = shape.vertices
    hw, hh = 0.5 * (v[1, 0] - v[0, 0]), 0.5 * (v[2, 1] - v[1, 1])
    pattern = np.array([[-hw, -hh], [hw, -hh], [hw, hh], [-hw, hh]])
    return bool(hw > 0.0 and hh > 0.0 and np.abs(v - pattern).max() <= 1e-12 * (hw + hh))


def kind_name(shape: Shape) -> str:
    """What Scene.set_shape_params calls a shape: circle, box, polygon, capsule, edge or
    chain link."""
    if shape.kind == SHAPE_POLYGON:
        return "box" if is_box(shape) else "polygon"
    return {
        SHAPE_CIRCLE: "circle",
        SHAPE_CAPSULE: "capsule",
        shapes.SHAPE_EDGE: "edge",
        shapes.SHAPE_CHAIN: "chain link",
    }.get(shape.kind, "shape")


#: The keywords each kind of shape takes.
_TAKES = {
    "circle": ("radius",),
    "box": ("size", "radius", "vertices"),
    "polygon": ("vertices", "radius"),
    "capsule": ("length", "radius"),
}


def _same(a: Shape, b: Shape) -> bool:
    """Whether two shapes are the same geometry, to the bit."""
    return a is b or (
        a.kind == b.kind
        and a.radius == b.radius
        and np.array_equal(a.center, b.center)
        and np.array_equal(a.vertices, b.vertices)
        and np.array_equal(a.normals, b.normals)
    )


def _per_world(value, name: str, k_worlds: int, k_bodies: int, item: tuple) -> np.ndarray:
    """(k_worlds, k_bodies, *item) float64 from one value for all (shape `item`), one per
    addressed world (k_worlds, *item) or one per world and body (k_worlds, k_bodies,
    *item); a TypeError for values that are not real numbers, a ValueError for another
    shape, naming `name`."""
    array = as_real_array(value, name)
    extra = array.ndim - len(item)
    if extra == 1:
        array = array[:, None]
    elif extra == 0:
        array = array[None, None]
    try:
        if extra not in (0, 1, 2):
            raise ValueError
        return np.broadcast_to(array, (k_worlds, k_bodies, *item)).astype(np.float64)
    except ValueError:
        shapes_text = " or ".join(
            f"({', '.join(str(d) for d in dims)})"
            for dims in (item, (k_worlds, *item), (k_worlds, k_bodies, *item))
        )
        raise ValueError(f"{name} must have shape {shapes_text}, got {array.shape}") from None


class WorldShapes:
    """The per-world shapes of one scene.

    shapes: {body: [Shape] * n_worlds}, for the bodies some world resized (the others take
    their add_* shape in every world). Bodies added after a world was resized take their own
    shape in every world.
    """

    def __init__(self, n_worlds: int):
        self.n_worlds = n_worlds
        self.shapes: dict[int, list[Shape]] = {}
        self.poses: dict[int, np.ndarray] = {}
        self.version = 0  # counts the stores: what draws the shapes builds again after one

    def copy(self) -> WorldShapes:
        copy = WorldShapes(self.n_worlds)
        copy.shapes = {body: list(values) for body, values in self.shapes.items()}
        copy.poses = {body: values.copy() for body, values in self.poses.items()}
        return copy

    def repeated(self, n_worlds: int) -> WorldShapes:
        """World 0's shapes and placements in `n_worlds` worlds (Scene.replicate)."""
        copy = WorldShapes(n_worlds)
        copy.shapes = {body: [values[0]] * n_worlds for body, values in self.shapes.items()}
        copy.poses = {
            body: np.repeat(values[:1], n_worlds, axis=0) for body, values in self.poses.items()
        }
        return copy

    def __setstate__(self, state: dict):
        self.__dict__.update(state)
        self.__dict__.setdefault("poses", {})
        self.__dict__.setdefault("version", 0)

    # ------------------------------------------------------------------ reading
    def body_shapes(self, builder: ModelBuilder, body: int) -> list[Shape]:
        """Body `body`'s shape in every world (n_worlds Shapes)."""
        if body in self.shapes:
            return self.shapes[body]
        return [builder.bodies[body].shape] * self.n_worlds

    def shape(self, builder: ModelBuilder, world: int, body: int) -> Shape:
        """Body `body`'s shape in world `world`."""
        values = self.shapes.get(body)
        return builder.bodies[body].shape if values is None else values[world]

    def world_shapes(self, builder: ModelBuilder, world: int) -> list[Shape]:
        """Every body's shape in world `world`."""
        return [self.shape(builder, world, body) for body in range(len(builder.bodies))]

    def per_world(self) -> bool:
        """Whether some body's shape differs between worlds (the device then holds a shape
        row per body slot)."""
        return any(not all(_same(s, values[0]) for s in values) for values in self.shapes.values())

    def cell_sizes(self, builder: ModelBuilder) -> np.ndarray:
        """(n_worlds,) float64, m: each world's level-0 grid cell (builder.cell_size_of of
        its shapes)."""
        if not self.shapes:
            return np.full(self.n_worlds, builder.cell_size())
        if not self.per_world():
            return np.full(self.n_worlds, cell_size_of(self.world_shapes(builder, 0)))
        return np.array([cell_size_of(self.world_shapes(builder, w)) for w in range(self.n_worlds)])

    def unit_inertia(self, builder: ModelBuilder, worlds, bodies) -> np.ndarray:
        """(k_worlds, k_bodies) float64, m^2: Shape.unit_inertia of `bodies` in `worlds`."""
        return np.array(
            [[self.shape(builder, w, b).unit_inertia for b in bodies] for w in worlds], np.float64
        ).reshape(len(worlds), len(bodies))

    def bounding_radii(self, builder: ModelBuilder, body: int) -> np.ndarray:
        """(n_worlds,) float64, m: body `body`'s Shape.bounding_radius in every world."""
        return np.array([s.bounding_radius for s in self.body_shapes(builder, body)])

    def params(self, builder: ModelBuilder, bodies) -> dict[str, np.ndarray]:
        """Scene.get_shape_params' arrays of `bodies` ((k,) indices): radius (n_worlds, k),
        size (n_worlds, k, 2: boxes), length (n_worlds, k: capsules), vertices (n_worlds, k,
        MAX_POLYGON_VERTICES, 2: polygons and boxes, body frame), float64, NaN where a body's
        shape has no such value."""
        w, k = self.n_worlds, len(bodies)
        radius = np.full((w, k), np.nan)
        size = np.full((w, k, 2), np.nan)
        length = np.full((w, k), np.nan)
        vertices = np.full((w, k, MAX_POLYGON_VERTICES, 2), np.nan)
        for i, body in enumerate(bodies):
            for world, shape in enumerate(self.body_shapes(builder, body)):
                name = kind_name(shape)
                radius[world, i] = shape.radius
                if name == "box":
                    v = shape.vertices
                    size[world, i] = (v[1, 0] - v[0, 0], v[2, 1] - v[1, 1])
                if name in ("box", "polygon"):
                    vertices[world, i, : len(shape.vertices)] = shape.vertices
                if name == "capsule":
                    length[world, i] = shape.vertices[1, 0] - shape.vertices[0, 0]
        return {"size": size, "radius": radius, "length": length, "vertices": vertices}

    # ------------------------------------------------------------------ checks and edits
    def resized(
        self, builder: ModelBuilder, bodies: np.ndarray, worlds: np.ndarray, given: dict
    ) -> list[list[Shape]]:
        """The new shapes of `bodies` in `worlds` ([k_worlds][k_bodies] Shapes) from the
        given keywords (SHAPE_PARAMS: None left out), each made as the add_* methods make
        theirs (a keyword not given keeps the world's current value), checked whole.

        Raises:
            TypeError: a value that is not real numbers, naming the keyword.
            ValueError: a value of another shape or out of its range, a keyword the body's
                shape does not take (an edge, a chain link; size for a circle ...), a
                polygon's vertex count changed or a capsule's length below shapes.MIN_SIZE
                (it would be a circle), naming the keyword and the body.
        """
        kw, kb = len(worlds), len(bodies)
        items = {"size": (2,), "radius": (), "length": (), "vertices": None}
        arrays = {}
        for name, value in given.items():
            if name == "vertices":
                points = as_real_array(value, name)
                if points.ndim < 2 or points.shape[-1] != 2:
                    raise ValueError(
                        f"vertices must have shape (m, 2), (k_worlds, m, 2) or "
                        f"(k_worlds, k_bodies, m, 2), got {points.shape}"
                    )
                arrays[name] = _per_world(points, name, kw, kb, points.shape[-2:])
            else:
                arrays[name] = _per_world(value, name, kw, kb, items[name])
        if "size" in arrays and "vertices" in arrays:
            raise ValueError("size and vertices: give a box's size or its vertices, not both")
        for body in bodies.tolist():
            name = kind_name(builder.bodies[body].shape)
            for key in arrays:
                if key not in _TAKES.get(name, ()):
                    takes = _TAKES.get(name)
                    raise ValueError(
                        f"{key}: body {body} is {'an' if name[0] in 'aeiou' else 'a'} "
                        f"{name}, "
                        + (
                            f"which takes {', '.join(takes)}"
                            if takes
                            else "whose shape is not resized per world (place it per "
                            "world with set_state)"
                        )
                    )
            if "vertices" in arrays:
                want, got = len(builder.bodies[body].shape.vertices), arrays["vertices"].shape[2]
                if want != got:
                    raise ValueError(
                        f"vertices: body {body} has {want} vertices in every world, got {got}"
                    )
        new = []
        for i, world in enumerate(worlds.tolist()):
            row = []
            for j, body in enumerate(bodies.tolist()):
                current = self.shape(builder, world, body)
                values = {key: array[i, j] for key, array in arrays.items()}
                row.append(_resized(current, kind_name(builder.bodies[body].shape), values))
            new.append(row)
        return new

    def store(self, builder: ModelBuilder, bodies: np.ndarray, worlds: np.ndarray, new):
        """Store checked shapes (resized's) of `bodies` in `worlds`."""
        for j, body in enumerate(bodies.tolist()):
            values = list(self.body_shapes(builder, body))
            for i, world in enumerate(worlds.tolist()):
                values[world] = new[i][j]
            self.shapes[body] = values
        self.version += 1

    # ------------------------------------------------------------------ static placement
    def placed(
        self, builder: ModelBuilder, bodies: np.ndarray, worlds: np.ndarray, position, angle
    ) -> np.ndarray:
        """(k_worlds, k_bodies, 3) float64 (x m, y m, angle rad): the placements of static
        `bodies` in `worlds` from `position` ((2,), (k_worlds, 2) or (k_worlds, k_bodies, 2);
        None keeps each world's) and `angle` (a scalar, (k_worlds,) or (k_worlds,
        k_bodies); None keeps it), checked whole.

        Raises:
            TypeError: a value that is not real numbers, naming it.
            ValueError: a value of another shape, not finite or beyond
                shapes.MAX_COORDINATE, or a body that is not static (mass 0), naming it.
        """
        kw, kb = len(worlds), len(bodies)
        current = np.stack([self.body_poses(builder, b)[worlds] for b in bodies.tolist()], 1)
        current = current.reshape(kw, kb, 3)
        for name, value, item, columns in (
            ("position", position, (2,), slice(0, 2)),
            ("angle", angle, (), slice(2, 3)),
        ):
            if value is None:
                continue
            array = _per_world(value, name, kw, kb, item)
            if not np.isfinite(array).all() or np.abs(array).max(initial=0.0) >= MAX_COORDINATE:
                raise ValueError(f"{name} must be finite and within +-{MAX_COORDINATE:g}")
            for body in bodies.tolist():
                if builder.bodies[body].mass != 0.0:
                    raise ValueError(
                        f"{name}: body {body} is not static (mass 0); a dynamic or kinematic "
                        "body is placed per world with set_state"
                    )
            current[..., columns] = array.reshape(kw, kb, -1)
        return current

    def body_poses(self, builder: ModelBuilder, body: int) -> np.ndarray:
        """(n_worlds, 3) float64: body `body`'s placement (x, y, angle) in every world."""
        if body in self.poses:
            return self.poses[body]
        b = builder.bodies[body]
        return np.tile([b.position[0], b.position[1], b.angle], (self.n_worlds, 1))

    def store_poses(self, builder: ModelBuilder, bodies: np.ndarray, worlds: np.ndarray, new):
        """Store checked placements (placed's) of `bodies` in `worlds`."""
        for j, body in enumerate(bodies.tolist()):
            values = self.body_poses(builder, body).copy()
            values[worlds] = new[:, j]
            self.poses[body] = values

    def initial_state(self, builder: ModelBuilder, worlds) -> dict:
        """builder.initial_state of the worlds `worlds` ((k,) indices), one row each: the
        add_* state, with each world's static bodies where set_shape_params placed them
        (the state a reset starts `worlds` from)."""
        worlds = np.asarray(worlds, np.int64)
        state = builder.initial_state(len(worlds))
        bodies = state["bodies"]
        n = len(builder.bodies)
        position = bodies["position"].reshape(len(worlds), n, 2)
        angle = bodies["angle"].reshape(len(worlds), n)
        for body, values in self.poses.items():
            if body < n:
                position[:, body] = values[worlds, :2]
                angle[:, body] = values[worlds, 2]
        return state

    # ------------------------------------------------------------------ the device rows
    def device_rows(self, builder: ModelBuilder, model: dict):
        """Put the shape rows into `model` (builder.build_model's arrays, in place, the
        base model's shape fields in it): SHAPE_FIELDS by shape row (n_bodies rows while
        every world holds the same shapes, else n_slots), shape_per_world (0-d) and
        world_cell (n_worlds,) float32."""
        body_model = model["model"]
        n, w = len(builder.bodies), self.n_worlds
        per_world = self.per_world()
        cells = self.cell_sizes(builder)
        body_model["shape_per_world"] = np.array(int(per_world), np.int32)
        body_model["world_cell"] = cells.astype(np.float32)
        if not self.shapes:
            return
        collides = np.array([b.collides for b in builder.bodies], bool)
        rows = {}
        for name in SHAPE_FIELDS:
            base = body_model[name]
            rows[name] = np.tile(base, (w,) + (1,) * (base.ndim - 1)) if per_world else base.copy()
        for body, values in self.shapes.items():
            if body >= n:
                continue
            chosen = values if per_world else values[:1]
            found = shape_rows(chosen, np.full(len(chosen), collides[body]))
            at = np.arange(len(chosen)) * n + body
            for name in SHAPE_FIELDS:
                rows[name][at] = found[name]
        body_model.update(rows)


def _resized(current: Shape, name: str, values: dict) -> Shape:
    """`current` (a shape of kind `name`, kind_name's) with the given values (keyword:
    float64 array), made by the add_* methods' shape functions; `current` itself for none."""
    if not values:
        return current
    radius = float(values["radius"]) if "radius" in values else current.radius
    if name == "circle":
        return shapes.circle(radius, current.center)
    if name == "capsule":
        length = (
            float(values["length"])
            if "length" in values
            else float(current.vertices[1, 0] - current.vertices[0, 0])
        )
        if length < shapes.MIN_SIZE:
            raise ValueError(
                f"length must be >= {shapes.MIN_SIZE} m for a capsule (shorter, it would be "
                f"a circle), got {length}"
            )
        return shapes.capsule(length, radius)
    if name == "box" and "vertices" not in values:
        if "size" in values:
            size = values["size"]
        else:
            v = current.vertices
            size = (v[1, 0] - v[0, 0], v[2, 1] - v[1, 1])
        return shapes.box(size, radius)
    vertices = values["vertices"] if "vertices" in values else current.vertices
    return shapes.polygon(vertices, radius=radius)[0]
