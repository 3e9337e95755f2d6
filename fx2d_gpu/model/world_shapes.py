"""Per-world geometry of a batched scene: each world's sizes of its bodies' shapes (box
sizes, circle radii, capsule lengths and radii, rounding radii, polygon vertices), set
by Scene.set_shape_params for domain randomisation and parameter sweeps.

The host keeps, for each body some world resized, its shape in every world as arrays, a row
a world (ShapeColumn: shapes.ShapeArrays and the arguments each row was made from); the
device reads the shapes by *shape row* (device.BodyModel, bodies.shape_row), as it reads
materials by material row (world_params.py): while every world holds the same shapes,
one row per body, as a scene that never resized anything has (the same upload, the same
reads); once a world differs, one row per body slot, and each world's own grid cell
(BodyModel.world_cell: the median diameter of its shapes, builder.cell_size_of). Every
shape is made by the functions the add_* methods make theirs with (shapes.circle, box,
capsule, polygon) and its rows by the builder's rules (builder.shape_rows, and
shape_array_rows for a column's, the same fields and floats), so world w of
a batch steps bit for bit as a one-world scene built with world w's shapes. A store of a
few worlds' shapes (a vector env's restarts) makes each body's new shapes of a kind as a
whole (shapes.circle_arrays, box_arrays, polygon_arrays), writes them into its column's
rows, and redoes those worlds' rows and cells alone, on the host and on the device
(store_log.py).

A body keeps its shape's kind in every world (a box stays a box, a polygon keeps its
vertex count); edges and chain links are not resized. Static bodies (level geometry:
terrain, walls, obstacles) are placed per world too (WorldShapes.poses): their poses in
each world's state, and in the state a reset starts the world from (initial_state).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .. import shapes
from ..checks import as_real_array
from ..enums import SHAPE_CAPSULE, SHAPE_CIRCLE, SHAPE_POLYGON
from ..shapes import MAX_COORDINATE, MAX_POLYGON_VERTICES, Shape, ShapeArrays
from . import store_log
from .builder import SHAPE_FIELDS, cell_size_of, shape_array_rows
from .masses import check_inertias

if TYPE_CHECKING:
    from .builder import ModelBuilder
    from .world_params import WorldParams

#: The keywords of Scene.set_shape_params that size a shape, in the order they are read.
SHAPE_PARAMS = ("size", "radius", "length", "vertices")
_VERSIONS = store_log.VERSIONS
#: WorldShapes' caches (and their log), left out of pickles and copies.
_CACHES = ("_kept_per_world", "_kept_cells", "_kept_rows", store_log.LOG)
#: The arrays of a snapshot's per-world shapes (WorldShapes.arrays), beside static_pose.
SHAPE_ARRAYS = ("shape_radius", "shape_size", "shape_length", "shape_vertices")
#: Every per-world geometry array a snapshot may hold.
GEOMETRY_ARRAYS = (*SHAPE_ARRAYS, "static_pose")
#: Device fields that follow from the per-world shapes (beside SHAPE_FIELDS).
WORLD_SHAPE_FIELDS = ("shape_per_world", "world_cell")


def is_box(shape: Shape) -> bool:
    """Whether `shape` is a box (shapes.box): a 4-vertex polygon, a rectangle about the body
    origin along the body's axes (a rounded box's centroid may lie an ulp off the origin)."""
    if shape.kind != SHAPE_POLYGON or len(shape.vertices) != 4:
        return False
    # Kept in the frozen shape's __dict__, as its cached properties are: a vector env's
    # restart asks each of its bodies' shapes twice (~15 us each).
    found = shape.__dict__.get("_is_box")
    if found is None:
        found = shape.__dict__["_is_box"] = bool(_box_rows(shape.vertices[None])[0])
    return found


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


#: The keyword (besides radius) a stored shape of each kind was made from: one of these
#: (none for a circle), what a snapshot's arrays may give for it.
_MADE_FROM = {
    "circle": (),
    "capsule": ("length",),
    "box": ("size", "vertices"),
    "polygon": ("vertices",),
}


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


#: Each of Scene.set_shape_params's per-world arguments and the shape of one value of it
#: (None: vertices, (m, 2) with the bodies' vertex count m).
PER_WORLD_ARGUMENTS = {
    "size": (2,),
    "radius": (),
    "length": (),
    "vertices": None,
    "inertia": (),
    "position": (2,),
    "angle": (),
}


def check_shape_change(
    builder: ModelBuilder,
    params: WorldParams,
    world_shapes: WorldShapes,
    bodies: np.ndarray,
    worlds: np.ndarray,
    arguments: dict,
):
    """Scene.set_shape_params's `arguments` (its keywords but `world`, None left out) for
    `bodies` in `worlds`, checked whole, changing nothing. Returns (new: the shapes,
    WorldShapes.resized's; placed: (k_worlds, k_bodies, 3) placements, WorldShapes.placed's;
    masses: {"inertia": (k_worlds, k_bodies) kg m^2}, the inertias after: given, or
    following the new shapes where they were the shapes' (mass x unit inertia), else kept).

    Raises:
        TypeError, ValueError: as resized, placed and WorldParams.check_body_values raise
            them, and a resize whose following inertia would break the inertia rule.
    """
    given = {name: arguments[name] for name in SHAPE_PARAMS if name in arguments}
    new = world_shapes.resized(builder, bodies, worlds, given)
    placed = world_shapes.placed(
        builder, bodies, worlds, arguments.get("position"), arguments.get("angle")
    )
    if "inertia" in arguments:
        masses = params.check_body_values(
            builder, bodies, worlds, {"inertia": arguments["inertia"]}
        )
        return new, placed, masses
    old_unit = world_shapes.unit_inertia(builder, worlds, bodies)
    new_unit = np.array([column.geometry.unit_inertia for column in new], np.float64).T.reshape(
        len(worlds), len(bodies)
    )
    values = params.body_values(builder)
    cells = np.ix_(worlds, bodies)
    mass, current = values["mass"][cells], values["inertia"][cells]
    follows = (current == mass * old_unit) & (mass > 0.0)
    masses = {"inertia": np.where(follows, mass * new_unit, current)}
    try:
        check_inertias(masses["inertia"], mass, indexed=False)
    except ValueError as error:
        raise ValueError(
            f"{', '.join(given)}: the new shapes' inertia (mass x the shape's unit "
            f"inertia) breaks the rule ({error}); give an inertia"
        ) from None
    return new, placed, masses


def per_world_arguments(arguments: dict, k_worlds: int, k_bodies: int) -> dict[str, np.ndarray]:
    """Scene.set_shape_params's checked `arguments` (None left out), each as one value per
    world and body: (k_worlds, k_bodies, *item) float64 (PER_WORLD_ARGUMENTS), the form a
    call for a subset of the worlds takes them in (a ShardedScene's shards)."""
    arrays = {}
    for name, value in arguments.items():
        item = PER_WORLD_ARGUMENTS[name]
        if item is None:
            item = np.shape(value)[-2:]
        arrays[name] = _per_world(value, name, k_worlds, k_bodies, item)
    return arrays


@dataclass
class ShapeColumn:
    """One body's shapes in n worlds (every world of a WorldShapes, or the k worlds a change
    makes shapes for): `geometry` (shapes.ShapeArrays, a row a world) and the arguments
    each row was made from (_make's), which snapshots and state files carry: radius (n,),
    size (n, 2), length (n,), vertices (n, k, 2) float64, NaN where the shape was not made
    from that keyword; a radius of NaN: the body's add_* shape."""

    geometry: ShapeArrays
    radius: np.ndarray
    size: np.ndarray
    length: np.ndarray
    vertices: np.ndarray

    ARGUMENTS = ("radius", "size", "length", "vertices")

    @classmethod
    def added(cls, shape: Shape, n: int) -> ShapeColumn:
        """The add_* `shape` in n worlds."""
        return cls(
            ShapeArrays.repeated(shape, n),
            np.full(n, np.nan),
            np.full((n, 2), np.nan),
            np.full(n, np.nan),
            np.full((n, len(shape.vertices), 2), np.nan),
        )

    @classmethod
    def of_made(cls, made: list[Shape], args: list[dict], vertex_count: int) -> ShapeColumn:
        """Shapes made one at a time (_make, at least one) from their arguments `args`."""
        none2, none_points = np.full(2, np.nan), np.full((vertex_count, 2), np.nan)
        return cls(
            ShapeArrays.of_shapes(made),
            np.array([a["radius"] for a in args], np.float64),
            np.array([a.get("size", none2) for a in args], np.float64).reshape(-1, 2),
            np.array([a.get("length", np.nan) for a in args], np.float64),
            np.array([a.get("vertices", none_points) for a in args], np.float64).reshape(
                len(args), vertex_count, 2
            ),
        )

    @classmethod
    def concatenated(cls, parts: list[ShapeColumn]) -> ShapeColumn:
        """The worlds of `parts` one after another."""
        return cls(
            ShapeArrays.concatenated([part.geometry for part in parts]),
            *(np.concatenate([getattr(part, name) for part in parts]) for name in cls.ARGUMENTS),
        )

    def take(self, rows) -> ShapeColumn:
        """The worlds `rows` ((k,) indices), copied."""
        rows = np.asarray(rows, np.int64)
        return ShapeColumn(
            self.geometry.take(rows), *(getattr(self, name)[rows] for name in self.ARGUMENTS)
        )

    def put(self, rows, other: ShapeColumn) -> None:
        """Worlds `rows` ((k,) indices) take `other`'s k shapes, in place."""
        self.geometry.put(rows, other.geometry)
        for name in self.ARGUMENTS:
            getattr(self, name)[rows] = getattr(other, name)

    def uneven_arrays(self) -> tuple:
        """The arrays whose rows are the same in every world where the shapes are (radius,
        centre, vertices, normals; the kind and vertex count are the column's)."""
        g = self.geometry
        return (g.radius, g.center, g.vertices, g.normals)

    def copy(self) -> ShapeColumn:
        """This column with arrays of its own."""
        return self.take(np.arange(len(self.radius)))


#: A box's corners in shapes.box's order, as signs of its half width and half height.
_BOX_CORNERS = np.array([(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)])


def _box_rows(vertices: np.ndarray) -> np.ndarray:
    """(n,) bool: which of n 4-vertex cores (n, 4, 2) are boxes (is_box's rule: a rectangle
    about the body origin along the body's axes, within 1e-12 of its size)."""
    v = vertices
    hw, hh = 0.5 * (v[:, 1, 0] - v[:, 0, 0]), 0.5 * (v[:, 2, 1] - v[:, 1, 1])
    pattern = _BOX_CORNERS * np.stack([hw, hh], axis=1)[:, None, :]  # (signs: exact)
    return (hw > 0.0) & (hh > 0.0) & (np.abs(v - pattern).max(axis=(1, 2)) <= 1e-12 * (hw + hh))


#: How resized makes a kind's shapes as a whole, from its rows' inputs ({name: (rows,
#: ...)}, WorldShapes._made_rows'): ShapeArrays of those rows.
_MAKERS = {
    "circle": lambda rows: shapes.circle_arrays(rows["radius"], len(rows["radius"])),
    "capsule": lambda rows: shapes.capsule_arrays(
        rows["length"], rows["radius"], len(rows["radius"])
    ),
    "box": lambda rows: shapes.box_arrays(rows["size"], len(rows["radius"]), rows["radius"]),
    "polygon": lambda rows: shapes.polygon_arrays(rows["vertices"], rows["radius"]),
}


class WorldShapes:
    """The per-world shapes of one scene.

    columns: {body: ShapeColumn of n_worlds rows}, for the bodies some world resized (the
    others take their add_* shape in every world). Bodies added after a world was resized
    take their own shape in every world. A body's shapes are arrays a world a row
    (shapes.ShapeArrays), not a Shape per world: a vector env's restarts rewrite a few rows
    (65,536 worlds of fx2d/Levels-v0: a Shape made and freed per world and body took ~0.25
    ms of host time per restarted world), and a Shape is made where one is asked for.
    """

    def __init__(self, n_worlds: int):
        self.n_worlds = n_worlds
        self.columns: dict[int, ShapeColumn] = {}
        self.poses: dict[int, np.ndarray] = {}
        # Changes with every store, unique among all WorldShapes: what draws the shapes (and
        # the caches below) builds again after one.
        self.version = next(_VERSIONS)

    def copy(self) -> WorldShapes:
        copy = WorldShapes(self.n_worlds)
        copy.columns = {body: column.copy() for body, column in self.columns.items()}
        copy.poses = {body: values.copy() for body, values in self.poses.items()}
        return copy

    @classmethod
    def stacked(cls, parts: list[WorldShapes], builder: ModelBuilder) -> WorldShapes:
        """The shapes and placements of several scenes' worlds, one after another
        (distributed: the shards' worlds as one scene's)."""
        stacked = cls(sum(part.n_worlds for part in parts))
        for body in sorted(set().union(*(part.columns for part in parts))):
            stacked.columns[body] = ShapeColumn.concatenated(
                [part.body_column(builder, body) for part in parts]
            )
        for body in sorted(set().union(*(part.poses for part in parts))):
            stacked.poses[body] = np.concatenate([part.body_poses(builder, body) for part in parts])
        return stacked

    def repeated(self, n_worlds: int) -> WorldShapes:
        """World 0's shapes and placements in `n_worlds` worlds (Scene.replicate)."""
        copy = WorldShapes(n_worlds)
        first = np.zeros(n_worlds, np.int64)
        copy.columns = {body: column.take(first) for body, column in self.columns.items()}
        copy.poses = {
            body: np.repeat(values[:1], n_worlds, axis=0) for body, values in self.poses.items()
        }
        return copy

    def __getstate__(self) -> dict:
        # The caches stay behind (the device rows alone are a copy of the model's): a copy
        # rebuilds them.
        return {name: value for name, value in self.__dict__.items() if name not in _CACHES}

    def __setstate__(self, state: dict):
        state = dict(state)
        # A pickle from before the columns: a Shape per world and the arguments each was
        # made from (None: the add_* shape), body by body.
        kept_shapes, kept_args = state.pop("shapes", {}), state.pop("args", {})
        self.__dict__.update(state)
        self.__dict__.setdefault("poses", {})
        self.__dict__.setdefault("columns", {})
        for body, values in kept_shapes.items():
            args = kept_args.get(body) or [None] * len(values)
            self.columns[body] = ShapeColumn.of_made(
                values,
                [{"radius": np.nan} if a is None else a for a in args],
                len(values[0].vertices),
            )
        self.version = next(_VERSIONS)  # (a copy's own: its caches start afresh)

    # ------------------------------------------------------------------ reading
    def body_column(self, builder: ModelBuilder, body: int) -> ShapeColumn:
        """Body `body`'s shapes in every world: its column, or (not resized) its add_*
        shape in each (a new column, not kept)."""
        column = self.columns.get(body)
        if column is None:
            column = ShapeColumn.added(builder.bodies[body].shape, self.n_worlds)
        return column

    def shape(self, builder: ModelBuilder, world: int, body: int) -> Shape:
        """Body `body`'s shape in world `world` (a Shape of its own where the body was
        resized)."""
        column = self.columns.get(body)
        return builder.bodies[body].shape if column is None else column.geometry.shape(world)

    def world_shapes(self, builder: ModelBuilder, world: int) -> list[Shape]:
        """Every body's shape in world `world`."""
        return [self.shape(builder, world, body) for body in range(len(builder.bodies))]

    def per_world(self) -> bool:
        """Whether some body's shape differs between worlds (the device then holds a shape
        row per body slot)."""
        rows = store_log.uneven_since(
            self,
            "_kept_per_world",
            {body: column.uneven_arrays for body, column in self.columns.items()},
        )
        return any(row is not None for row in rows.values())

    def cell_sizes(self, builder: ModelBuilder) -> np.ndarray:
        """(n_worlds,) float64, m: each world's level-0 grid cell (builder.cell_size_of of
        its shapes)."""
        if not self.columns:
            return np.full(self.n_worlds, builder.cell_size())
        key = (self.version, len(builder.bodies))
        kept = self.__dict__.get("_kept_cells")
        if kept is None or kept[0] != key:
            per_world = self.per_world()
            stores = None
            if per_world and kept is not None and kept[2] and kept[0][1] == key[1]:
                stores = store_log.stored_since(self, kept[0][0])
            diameters = None
            if stores is not None:  # the worlds stored since, alone: their stored bodies'
                cells, diameters = kept[1].copy(), kept[3]
                for bodies, worlds in stores:
                    for body in bodies.tolist():
                        diameters[worlds, body] = self.columns[body].geometry.diameter[worlds]
                changed = store_log.distinct([worlds for _, worlds in stores], self.n_worlds)
                cells[changed] = np.median(diameters[changed], axis=1)
            elif per_world:
                diameters = self._diameters(builder)
                cells = np.median(diameters, axis=1)
            else:
                cells = np.full(self.n_worlds, cell_size_of(self.world_shapes(builder, 0)))
            kept = self._kept_cells = (key, cells, per_world, diameters)
        return kept[1].copy()

    def _diameters(self, builder: ModelBuilder) -> np.ndarray:
        """(n_worlds, n_bodies) float64, m: every world's shapes' Shape.diameter, whose
        medians along each row are the worlds' cells (cell_size_of's, the same floats: a
        median's middle values and their mean do not depend on the axis)."""
        n = len(builder.bodies)
        diameters = np.empty((self.n_worlds, n))
        for body in range(n):
            column = self.columns.get(body)
            if column is None:
                diameters[:, body] = builder.bodies[body].shape.diameter
            else:
                diameters[:, body] = column.geometry.diameter
        return diameters

    def unit_inertia(self, builder: ModelBuilder, worlds, bodies) -> np.ndarray:
        """(k_worlds, k_bodies) float64, m^2: Shape.unit_inertia of `bodies` in `worlds`."""
        unit = np.empty((len(worlds), len(bodies)))
        worlds = np.asarray(worlds, np.int64)
        for j, body in enumerate(np.asarray(bodies).tolist()):
            column = self.columns.get(body)
            if column is None:
                unit[:, j] = builder.bodies[body].shape.unit_inertia
            else:
                unit[:, j] = column.geometry.unit_inertia[worlds]
        return unit

    def params(self, builder: ModelBuilder, bodies) -> dict[str, np.ndarray]:
        """Scene.get_shape_params' arrays of `bodies` ((k,) indices): radius (n_worlds, k),
        size (n_worlds, k, 2: boxes), length (n_worlds, k: capsules), vertices (n_worlds, k,
        MAX_POLYGON_VERTICES, 2: polygons and boxes, body frame), float64, NaN where a body's
        shape has no such value (a body's shape in a world is a box where it is one there:
        kind_name's rule)."""
        w, k = self.n_worlds, len(bodies)
        radius = np.full((w, k), np.nan)
        size = np.full((w, k, 2), np.nan)
        length = np.full((w, k), np.nan)
        vertices = np.full((w, k, MAX_POLYGON_VERTICES, 2), np.nan)
        for i, body in enumerate(bodies):
            geometry = self.body_column(builder, body).geometry
            v = geometry.vertices
            radius[:, i] = geometry.radius
            if geometry.kind == SHAPE_POLYGON:
                vertices[:, i, : v.shape[1]] = v
                if v.shape[1] == 4:
                    boxes = _box_rows(v)
                    size[boxes, i] = np.stack(
                        [v[boxes, 1, 0] - v[boxes, 0, 0], v[boxes, 2, 1] - v[boxes, 1, 1]], 1
                    )
            elif geometry.kind == SHAPE_CAPSULE:
                length[:, i] = v[:, 1, 0] - v[:, 0, 0]
        return {"size": size, "radius": radius, "length": length, "vertices": vertices}

    # ------------------------------------------------------------------ checks and edits
    def resized(
        self, builder: ModelBuilder, bodies: np.ndarray, worlds: np.ndarray, given: dict
    ) -> list[ShapeColumn]:
        """The new shapes of `bodies` in `worlds` (a ShapeColumn of k_worlds rows a body) from the
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
        try:
            return self._made_columns(builder, bodies, worlds, arrays)
        except (TypeError, ValueError) as error:
            failed = error
        # One shape at a time, in order: the first bad value raises its own error.
        for i, world in enumerate(worlds.tolist()):
            for j, body in enumerate(bodies.tolist()):
                values = {key: array[i, j] for key, array in arrays.items()}
                if values:
                    current = self.shape(builder, world, body)
                    name = kind_name(builder.bodies[body].shape)
                    _make(builder.bodies[body].shape, _args(current, name, values))
        raise failed

    def _made_columns(
        self, builder: ModelBuilder, bodies: np.ndarray, worlds: np.ndarray, arrays: dict
    ) -> list[ShapeColumn]:
        """resized's shapes of each of `bodies` in each of `worlds` from `arrays` (keyword:
        (k_worlds, k_bodies, *item) float64), the shapes of a kind made as a whole
        (shapes.circle_arrays, capsule_arrays, box_arrays, polygon_arrays: the same shapes as
        _make's, to the bit, each row's arithmetic its own): the rows of every body one
        maker makes in one call (a vector env's restart resizes six terrain boxes in one
        call: one box_arrays, not six). Raises where some value is bad, not necessarily
        resized's error: resized then makes them one at a time."""
        k = len(worlds)
        made: list = [None] * len(bodies)
        groups: dict[tuple, list] = {}
        for j, body in enumerate(bodies.tolist()):
            values = {key: array[:, j] for key, array in arrays.items()}
            found = self._made_rows(builder, body, worlds, values)
            if isinstance(found, ShapeColumn):
                made[j] = found
            else:
                maker, inputs, column_args = found
                groups.setdefault(maker, []).append((j, inputs, column_args))
        for (maker, _), members in groups.items():
            inputs = {
                name: np.concatenate([member[1][name] for member in members])
                for name in members[0][1]
            }
            geometry = _MAKERS[maker](inputs)
            for i, (j, _, column_args) in enumerate(members):
                rows = geometry if len(members) == 1 else geometry.take(np.arange(i * k, i * k + k))
                made[j] = ShapeColumn(rows, *column_args)
        return made

    def _made_rows(self, builder: ModelBuilder, body: int, worlds: np.ndarray, values: dict):
        """_made_columns' part for `body` in each of `worlds` from `values` (keyword:
        (k_worlds, *item) float64): its ShapeColumn where it is made on its own (kept as
        it is, or circles off their body's origin, one at a time), else ((maker, vertex
        count): its _MAKERS entry and key, {input: (k_worlds, ...) rows} for it, and the
        column's arguments (radius, size, length, vertices) its rows were made from)."""
        if not values:  # kept as they are
            return self.body_column(builder, body).take(worlds)
        added = builder.bodies[body].shape
        column = self.columns.get(body)
        # The current shapes' values a keyword not given keeps (read, not copied whole).
        current = ShapeArrays.of_shapes([added]) if column is None else column.geometry
        at = np.zeros(len(worlds), np.int64) if column is None else worlds
        name = kind_name(added)
        k = len(worlds)
        if "radius" in values:
            radii = np.array(values["radius"], np.float64).reshape(k)
        else:
            radii = current.radius[at]
        nan = np.full(k, np.nan)
        length = nan
        size = vertices = None
        if name == "circle" and not added.center.any() and not np.signbit(added.center).any():
            maker, inputs = ("circle", 0), {"radius": radii}
        elif name == "capsule":
            if "length" in values:
                length = np.array(values["length"], np.float64).reshape(k)
            else:
                v = current.vertices[at]
                length = v[:, 1, 0] - v[:, 0, 0]
            maker, inputs = ("capsule", 0), {"length": length, "radius": radii}
        elif name == "box" and "vertices" not in values:
            if "size" in values:
                size = np.array(values["size"], np.float64).reshape(k, 2)
            else:
                v = current.vertices[at]
                size = np.stack([v[:, 1, 0] - v[:, 0, 0], v[:, 2, 1] - v[:, 1, 1]], 1)
            maker, inputs = ("box", 0), {"size": size, "radius": radii}
        elif name in ("box", "polygon"):
            if "vertices" in values:
                vertices = np.array(values["vertices"], np.float64)
            else:
                vertices = current.vertices[at]
            maker = ("polygon", vertices.shape[1] if vertices.ndim == 3 else -1)
            inputs = {"vertices": vertices, "radius": radii}
        else:  # circles off their body's origin: one at a time
            args = [
                _args(current.shape(w), name, {key: v[i] for key, v in values.items()})
                for i, w in enumerate(at.tolist())
            ]
            return ShapeColumn.of_made([_make(added, a) for a in args], args, len(added.vertices))
        column_args = (
            radii,
            np.stack([nan, nan], 1) if size is None else size,
            length,
            np.full((k, len(added.vertices), 2), np.nan) if vertices is None else vertices,
        )
        return maker, inputs, column_args

    def store(self, builder: ModelBuilder, bodies: np.ndarray, worlds: np.ndarray, new):
        """Store checked shapes (resized's: a ShapeColumn of the worlds a body) of `bodies` in
        `worlds`, in place."""
        for j, body in enumerate(bodies.tolist()):
            if body not in self.columns:
                self.columns[body] = self.body_column(builder, body)
            self.columns[body].put(worlds, new[j])
        store_log.note_store(self, bodies, worlds)

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
        current = np.empty((kw, kb, 3))
        for j, body in enumerate(bodies.tolist()):
            if body in self.poses:
                current[:, j] = self.poses[body][worlds]
            else:  # (not every world's tiled: a vector env's restarts place a few)
                b = builder.bodies[body]
                current[:, j] = (b.position[0], b.position[1], b.angle)
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
            values = self.poses.get(body)
            if values is None:  # (every world's, the first time: body_poses makes them anew)
                values = self.poses[body] = self.body_poses(builder, body)
            values[worlds] = new[:, j]  # (in place: copies, snapshots and shards copy them)

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

    # ------------------------------------------------------------------ snapshots
    def arrays(self, builder: ModelBuilder) -> dict[str, np.ndarray]:
        """The shapes and placements as float64 arrays, for snapshots and state files (NaN:
        the add_* shape, a value the shape was not made from, or not placed): where some
        world has shapes of its own, shape_radius (n_worlds, n_bodies), shape_size (...,
        2), shape_length, shape_vertices (..., MAX_POLYGON_VERTICES, 2), the arguments each
        shape was made from (_make); where static bodies were placed, static_pose (n_worlds,
        n_bodies, 3): x, y, angle."""
        w, n = self.n_worlds, len(builder.bodies)
        arrays = {}
        if self.columns:
            radius, length = np.full((w, n), np.nan), np.full((w, n), np.nan)
            size = np.full((w, n, 2), np.nan)
            vertices = np.full((w, n, MAX_POLYGON_VERTICES, 2), np.nan)
            for body, column in self.columns.items():
                if body < n:
                    radius[:, body], length[:, body] = column.radius, column.length
                    size[:, body] = column.size
                    vertices[:, body, : column.vertices.shape[1]] = column.vertices
            arrays.update(
                shape_radius=radius, shape_size=size, shape_length=length, shape_vertices=vertices
            )
        if self.poses:
            pose = np.full((w, n, 3), np.nan)
            for body, values in self.poses.items():
                if body < n:
                    pose[:, body] = values
            arrays["static_pose"] = pose
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict, builder: ModelBuilder, n_worlds: int) -> WorldShapes:
        """The shapes and placements of arrays() back, each shape made again from its
        arguments by the add_* methods' shape functions and checked as set_shape_params
        checks them (a snapshot is untrusted input).

        Raises:
            ValueError: a missing or misshapen array, or a value that breaks a rule,
                naming it.
        """
        n = len(builder.bodies)
        world_shapes = cls(n_worlds)
        shaped = {
            "shape_radius": (n_worlds, n),
            "shape_size": (n_worlds, n, 2),
            "shape_length": (n_worlds, n),
            "shape_vertices": (n_worlds, n, MAX_POLYGON_VERTICES, 2),
            "static_pose": (n_worlds, n, 3),
        }
        for key, value in arrays.items():
            if key not in shaped:
                raise ValueError(f"params/{key} is not per-world geometry")
            if not isinstance(value, np.ndarray) or value.dtype != np.float64:
                raise ValueError(f"params/{key} must be a float64 array of shape {shaped[key]}")
            if value.shape != shaped[key]:
                raise ValueError(f"params/{key} must be a float64 array of shape {shaped[key]}")
        given = set(arrays) & set(SHAPE_ARRAYS)
        if given and given != set(SHAPE_ARRAYS):
            raise ValueError(f"params/{sorted(set(SHAPE_ARRAYS) - given)[0]} is missing")
        if given:
            world_shapes._take_args(arrays, builder)
        if "static_pose" in arrays:
            world_shapes._take_poses(arrays["static_pose"], builder)
        return world_shapes

    def _take_args(self, arrays: dict, builder: ModelBuilder):
        """from_arrays' shapes (shape_radius, shape_size, shape_length, shape_vertices)."""
        radius = arrays["shape_radius"]
        for body in range(len(builder.bodies)):
            column = np.isfinite(radius[:, body])
            others = [
                ~np.isnan(arrays[key][:, body].reshape(self.n_worlds, -1)).all(axis=1)
                for key in ("shape_size", "shape_length", "shape_vertices")
            ]
            if any((other & ~column).any() for other in others) or np.isinf(radius[:, body]).any():
                raise ValueError(
                    f"params/shape_radius[:, {body}]: a shape's values without its radius"
                )
            if not column.any():
                continue
            added = builder.bodies[body].shape
            worlds = np.flatnonzero(column)
            try:
                made = self._restored_column(builder, body, worlds, arrays)
            except (TypeError, ValueError):
                made = None
            if made is None:  # one world at a time: the first bad one raises, named
                made, args = [], []
                for world in worlds.tolist():
                    found = _stored_args(arrays, world, body, kind_name(added), len(added.vertices))
                    try:
                        made.append(_make(added, found))
                    except (TypeError, ValueError) as error:
                        raise ValueError(f"params/shape_*[{world}, {body}]: {error}") from None
                    args.append(found)
                made = ShapeColumn.of_made(made, args, len(added.vertices))
            self.columns[body] = ShapeColumn.added(added, self.n_worlds)
            self.columns[body].put(worlds, made)
        self.version = next(_VERSIONS)

    def _restored_column(
        self, builder: ModelBuilder, body: int, worlds: np.ndarray, arrays: dict
    ) -> ShapeColumn:
        """_take_args' shapes of `body` in `worlds` (those with a radius) from the arrays,
        each world's group of keywords made as a whole (_made_columns: the same shapes as
        _make's, to the bit; a snapshot of 16,384 worlds of 5 resized bodies took 6 s to
        restore a shape at a time). Raises where some world's values break a rule
        (_stored_args' or the shape's), not necessarily with _take_args' message."""
        added = builder.bodies[body].shape
        name, count = kind_name(added), len(added.vertices)
        radius = arrays["shape_radius"][worlds, body]
        size = arrays["shape_size"][worlds, body]
        length = arrays["shape_length"][worlds, body]
        vertices = arrays["shape_vertices"][worlds, body]
        kept = ~np.isnan(vertices).all(axis=2)
        given = {  # (each keyword: the worlds that give it)
            "size": ~np.isnan(size).all(axis=1),
            "length": ~np.isnan(length),
            "vertices": kept.any(axis=1),
        }
        takes = _MADE_FROM.get(name)
        if takes is None or (sum(given.values()) != (0 if name == "circle" else 1)).any():
            raise ValueError(f"a {name} is made from one of {takes}")
        if any(given[key].any() for key in given if key not in takes):
            raise ValueError(f"a {name} is made from one of {takes}")
        if given["vertices"].any():
            rows = kept[given["vertices"]]
            if (rows.sum(axis=1) != count).any() or not rows[:, :count].all():
                raise ValueError(f"a {name} of {count} vertices")
        made = ShapeColumn.added(added, len(worlds))
        values = {"size": size, "length": length, "vertices": vertices[:, :count]}
        for key in takes or (None,):
            rows = np.flatnonzero(given[key]) if key else np.arange(len(worlds))
            if len(rows):
                # (each keyword's values as _made_columns takes them: (k, 1 body, *item))
                group = {"radius": radius[rows, None]}
                if key:
                    group[key] = values[key][rows][:, None]
                (column,) = self._made_columns(builder, np.array([body]), worlds[rows], group)
                made.put(rows, column)
        return made

    def _take_poses(self, pose: np.ndarray, builder: ModelBuilder):
        """from_arrays' placements (static_pose)."""
        for body in range(len(builder.bodies)):
            rows = pose[:, body]
            placed = ~np.isnan(rows).all(axis=1)
            if not placed.any():
                continue
            if not placed.all() or not np.isfinite(rows).all():
                raise ValueError(
                    f"params/static_pose[:, {body}]: a placed body's pose in every world, finite"
                )
            if np.abs(rows).max() >= MAX_COORDINATE or builder.bodies[body].mass != 0.0:
                raise ValueError(
                    f"params/static_pose[:, {body}]: a static body's pose, within "
                    f"+-{MAX_COORDINATE:g}"
                )
            self.poses[body] = rows.copy()

    # ------------------------------------------------------------------ the device rows
    def device_rows(self, builder: ModelBuilder, model: dict) -> tuple | None:
        """Put the shape rows into `model` (builder.build_model's arrays, in place, the
        base model's shape fields in it): SHAPE_FIELDS by shape row (n_bodies rows while
        every world holds the same shapes, else n_slots), shape_per_world (0-d) and
        world_cell (n_worlds,) float32.

        Returns (shape rows, worlds), (k,) int64 indices, where only those rows and those
        worlds' cells changed since the rows were last made (stores of a few worlds: the
        device takes them alone), else None (anything may have changed)."""
        body_model = model["model"]
        n, w = len(builder.bodies), self.n_worlds
        per_world = self.per_world()
        cells = self.cell_sizes(builder)
        body_model["shape_per_world"] = np.array(int(per_world), np.int32)
        body_model["world_cell"] = cells.astype(np.float32)
        if not self.columns:
            return None
        collides = np.array([b.collides for b in builder.bodies], bool)
        # The rows last made, kept with the model rows they started from (the arrays as
        # built, alive while kept): stores since then redo their own rows alone.
        base = body_model[SHAPE_FIELDS[0]]
        kept = self.__dict__.get("_kept_rows")
        stores = None
        if per_world and kept is not None and kept[0] is base and kept[1] == n:
            stores = store_log.stored_since(self, kept[2])
        changed = None
        if stores is not None:
            rows = kept[3]
            changed_rows, changed_worlds = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
            for bodies, worlds in stores:
                changed_worlds.append(worlds)
                # A store's bodies of one kind, vertex count and filter in one call (a
                # Levels restart stores six terrain boxes at once): rows copied as they are.
                alike: dict[tuple, list[int]] = {}
                for body in bodies.tolist():
                    if body < n:
                        geometry = self.columns[body].geometry
                        key = (geometry.kind, geometry.vertices.shape[1], bool(collides[body]))
                        alike.setdefault(key, []).append(body)
                for (_, _, collide), members in alike.items():
                    chosen = ShapeArrays.concatenated(
                        [self.columns[body].geometry.take(worlds) for body in members]
                    )
                    found = shape_array_rows(chosen, collide)
                    slots = np.concatenate([worlds * n + body for body in members])
                    for name in SHAPE_FIELDS:
                        rows[name][slots] = found[name]
                    changed_rows.append(slots)
            changed = (
                store_log.distinct(changed_rows, w * n),
                store_log.distinct(changed_worlds, w),
            )
        else:
            rows = {}
            for name in SHAPE_FIELDS:
                start = body_model[name]
                rows[name] = (
                    np.tile(start, (w,) + (1,) * (start.ndim - 1)) if per_world else start.copy()
                )
            for body, column in self.columns.items():
                if body >= n:
                    continue
                chosen = column.geometry if per_world else column.geometry.take([0])
                found = shape_array_rows(chosen, collides[body])
                at = np.arange(len(chosen)) * n + body
                for name in SHAPE_FIELDS:
                    rows[name][at] = found[name]
        if per_world:
            # (The model holds these arrays: the next store's rows are written in place
            # there, the binding's model being the current one, uploaded whole on a load.)
            self._kept_rows = (base, n, self.version, rows)
        body_model.update(rows)
        return changed


def _stored_args(arrays: dict, world: int, body: int, name: str, count: int) -> dict:
    """The arguments (_make's) that arrays() stored for `body` (of kind `name`, `count`
    vertices) in `world`.

    Raises:
        ValueError: values the kind does not take, or a polygon's vertices other than its
            count, naming them.
    """
    args = {"radius": float(arrays["shape_radius"][world, body])}
    size = arrays["shape_size"][world, body]
    length = arrays["shape_length"][world, body]
    vertices = arrays["shape_vertices"][world, body]
    kept = ~np.isnan(vertices).all(axis=1)
    where = f"params/shape_*[{world}, {body}]"
    if not np.isnan(size).all():
        args["size"] = size.copy()
    if not np.isnan(length):
        args["length"] = float(length)
    if kept.any():
        if kept.sum() != count or not kept[:count].all():
            raise ValueError(f"{where}: a {name} of {count} vertices")
        args["vertices"] = vertices[:count].copy()
    takes = _MADE_FROM.get(name)
    made = [key for key in args if key != "radius"]
    if takes is None or len(made) != (0 if name == "circle" else 1) or not set(made) <= set(takes):
        raise ValueError(f"{where}: values a {name} is not made from ({', '.join(made)})")
    return args


def _args(current: Shape, name: str, values: dict) -> dict:
    """The arguments (_make's) of a shape of kind `name` (kind_name's) that is `current`
    with the given values (keyword: float64 array): a keyword not given keeps current's
    value; checked by _make."""
    args = {"radius": float(values["radius"]) if "radius" in values else current.radius}
    if name == "capsule":
        args["length"] = (
            float(values["length"])
            if "length" in values
            else float(current.vertices[1, 0] - current.vertices[0, 0])
        )
    elif name == "box" and "vertices" not in values:
        if "size" in values:
            args["size"] = np.array(values["size"], np.float64)
        else:
            v = current.vertices
            args["size"] = np.array([v[1, 0] - v[0, 0], v[2, 1] - v[1, 1]])
    elif name in ("box", "polygon"):
        vertices = values["vertices"] if "vertices" in values else current.vertices
        args["vertices"] = np.array(vertices, np.float64)
    return args


def _make(added: Shape, args: dict) -> Shape:
    """The shape a body added with shape `added` takes from `args` (_args': radius, and
    size, length or vertices), made by the add_* methods' shape functions, which check it.

    Raises:
        TypeError, ValueError: from the shape functions, naming the argument; a capsule's
            length below shapes.MIN_SIZE (it would be a circle).
    """
    radius = args["radius"]
    if added.kind == SHAPE_CIRCLE:
        return shapes.circle(radius, added.center)
    if "length" in args:
        if not args["length"] >= shapes.MIN_SIZE:
            raise ValueError(
                f"length must be >= {shapes.MIN_SIZE} m for a capsule (shorter, it would be "
                f"a circle), got {args['length']}"
            )
        return shapes.capsule(args["length"], radius)
    if "size" in args:
        return shapes.box(args["size"], radius)
    return shapes.polygon(args["vertices"], radius=radius)[0]
