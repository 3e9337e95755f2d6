"""Load scenes written in Fx2D's YAML scene format (see docs/scene-files.md) as a Scene.

Poses are [x, y, theta] with theta in degrees; joint angles are in radians. Shapes land
where Fx2D's loader puts them: a polygon's vertices are first re-centred on their vertex
mean (Fx2D's FxShape does `verts - verts.mean()`), so the mean sits at the entity pose plus
the block's pose offset. The body's centre of mass then goes to the area centroid of its
collision shape (of its visual shape when it has none), and shapes are stored relative to
it, so every vertex keeps the world position Fx2D gives it.

Fx2D keeps every entity inside the scene rectangle [0, W] x [0, H] (FxScene::step, with
W, H = scene.size truncated to whole metres, as Fx2D stores it): load_scene(boundary=True)
gives the scene that rectangle as four static, frictionless, non-bouncing walls just
outside it (see docs/fx2d-differences.md for how that differs).

Every error is a ValueError (TypeError for a wrong type) naming the entity or joint, the key
and, when known, the line.
"""

import functools
import gc
import math
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np
import yaml

from .. import shapes
from ..scene import Scene

#: In the order Fx2D's loader tries them (buildShape: chain before edge; its docs list edge
#: first): the first present wins.
GEOMETRY_KEYS = ("circle", "capsule", "rectangle", "polygon", "chain", "edge")
_ENTITY_KEYS = {"pose", "init_velocity", "physics", "visual", "collision"}
_PHYSICS_KEYS = {"mass", "inertia", "gravity_scale", "vel_damping", "velocity_damping",
                 "elasticity", "static_friction", "dynamic_friction",
                 "external_forces_enabled", "ccd", "sensor"}
_VISUAL_KEYS = {"pose", "geometry", "texture", "border_color", "border_thickness"}
_COLLISION_KEYS = {"pose", "geometry"}
_JOINT_KEYS = {"type", "parent", "child", "anchor", "angle_min", "angle_max", "axis",
               "position_min", "position_max", "control_mode", "target", "pid", "max_effort",
               "max_torque", "max_force", "entities_collide"}
DEFAULT_COLOR = (150, 150, 160, 255)
#: The boundary walls' thickness: this fraction of the rectangle's larger side, at least
#: BOUNDARY_MIN_THICKNESS (m). Thick enough that a substep's motion cannot cross a wall.
BOUNDARY_THICKNESS_FRACTION = 0.25
BOUNDARY_MIN_THICKNESS = 1.0


class _Map(dict):
    """A YAML mapping that remembers its line (1-based) and each key's line."""

    line = None
    key_lines: dict = {}


#: Plain decimal numbers, the bulk of a scene file: YAML 1.1 (PyYAML's resolver) reads them
#: as these tags, and int()/float() read them as its constructor does. Anything else (octal,
#: hex, underscores, sexagesimal, .inf) goes through PyYAML's own rules.
_DECIMAL_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_DECIMAL_FLOAT = re.compile(r"[-+]?[0-9]+\.[0-9]*(?:[eE][-+][0-9]+)?")
_INT_TAG, _FLOAT_TAG = "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"
_STR_TAG, _NULL_TAG = "tag:yaml.org,2002:str", "tag:yaml.org,2002:null"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG, _MERGE_TAG = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:merge"


# libyaml's parser when PyYAML was built with it (10x faster on large files).
class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    #: Tags of plain scalars already resolved. A scalar's implicit tag depends only on its
    #: text, and a scene file repeats the same keys ("pose", "physics", ...) thousands of
    #: times: resolving each again by regular expressions was a fifth of a large load.
    _tags: dict = {}

    def resolve(self, kind, value, implicit):
        if kind is not yaml.ScalarNode:
            return super().resolve(kind, value, implicit)
        key = (value, implicit)
        tag = self._tags.get(key)
        if tag is not None:
            return tag
        # Numbers are mostly unique: told apart without PyYAML's dozen patterns, not cached.
        if implicit[0] and _DECIMAL_FLOAT.fullmatch(value):
            return _FLOAT_TAG
        if implicit[0] and _DECIMAL_INT.fullmatch(value):
            return _INT_TAG
        tag = super().resolve(kind, value, implicit)
        if len(self._tags) < 100_000:
            self._tags[key] = tag
        return tag


def _construct(loader, root):
    """The Python value of the node graph under `root`, as PyYAML's safe constructor gives
    it (mappings as _Map with their lines, repeated keys refused), without its per-node
    generator machinery: a third of a large file's load. Nodes it does not handle simply
    (merge keys, explicit tags, timestamps) are left to PyYAML."""
    built = {}  # id(node) -> value: an alias's node is built once, as PyYAML does

    def build(node):
        tag = node.tag
        if isinstance(node, yaml.ScalarNode):
            value = node.value
            if tag == _FLOAT_TAG and _DECIMAL_FLOAT.fullmatch(value):
                return float(value)
            if tag == _INT_TAG and _DECIMAL_INT.fullmatch(value):
                return int(value)
            if tag == _STR_TAG:
                return value
            if tag == _NULL_TAG:
                return None
            return loader.construct_object(node, deep=True)
        key = id(node)
        if key in built:
            return built[key]
        if tag == _SEQ_TAG and isinstance(node, yaml.SequenceNode):
            value = built[key] = [build(item) for item in node.value]
            return value
        if tag != _MAP_TAG or not isinstance(node, yaml.MappingNode) or any(
                k.tag == _MERGE_TAG for k, _ in node.value):
            value = built[key] = loader.construct_object(node, deep=True)
            return value
        mapping = built[key] = _Map()
        mapping.line = node.start_mark.line + 1
        mapping.key_lines, seen = {}, {}
        for key_node, value_node in node.value:
            name = build(key_node)
            try:
                hash(name)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    "found an unhashable key", key_node.start_mark) from None
            _check_repeated(seen, name, key_node)
            seen[name] = key_node.start_mark.line + 1
            mapping[name] = build(value_node)
            mapping.key_lines[key_node.value] = key_node.start_mark.line + 1
        return mapping

    try:
        return build(root)
    except RecursionError:
        raise ValueError("the file's values are nested too deeply") from None


def _check_repeated(lines: dict, key, key_node):
    """PyYAML keeps the last of two equal keys; two entities named alike would silently
    become one body, so a repeated key is an error."""
    if key in lines:
        raise yaml.constructor.ConstructorError(
            None, None, f"key {key!r} appears twice in one mapping (lines {lines[key]} and "
            f"{key_node.start_mark.line + 1})", key_node.start_mark)


#: Most values a scene file may hold once its aliases are expanded, and most items in any
#: one list: a few hundred bytes of nested aliases would otherwise expand to billions of
#: values (PyYAML builds them once, but every check of the numbers walks them all).
MAX_EXPANDED_VALUES = 20_000_000
MAX_LIST_LENGTH = 100_000


def _expanded_sizes(root) -> dict:
    """{id(node): values under it with aliases expanded}, in one pass over the node graph
    (each node's size is computed once); ValueError for an alias that contains itself."""
    sizes, on_path = {}, set()
    stack = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if key in sizes:
            continue
        children = _children(node)
        if children_done:
            on_path.discard(key)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            continue
        if key in on_path:
            raise ValueError(f"line {node.start_mark.line + 1}: an alias refers to a node "
                             "that contains it (an endless value)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes


def _check_size(root):
    """ValueError naming the entity and key where the file holds a list past
    MAX_LIST_LENGTH or, aliases expanded, more than MAX_EXPANDED_VALUES values."""
    paths, queue = {id(root): []}, [root]  # each distinct node, with the first path to it
    for node in queue:
        if isinstance(node, yaml.SequenceNode) and len(node.value) > MAX_LIST_LENGTH:
            raise ValueError(f"{_where(paths[id(node)])} (line {node.start_mark.line + 1}): a "
                             f"list of {len(node.value):,} items; at most {MAX_LIST_LENGTH:,}")
        for label, child in _labelled_children(node):
            if id(child) not in paths:
                paths[id(child)] = paths[id(node)] + [label]
                queue.append(child)
    sizes = _expanded_sizes(root)
    node, path = root, []
    while sizes[id(node)] > MAX_EXPANDED_VALUES:
        big = [(label, child) for label, child in _labelled_children(node)
               if sizes[id(child)] > MAX_EXPANDED_VALUES]
        if not big:
            raise ValueError(f"{_where(path)} (line {node.start_mark.line + 1}): "
                             f"{sizes[id(node)]:,} values once its aliases are expanded; a "
                             f"scene file may hold at most {MAX_EXPANDED_VALUES:,}")
        # The last: an anchor is defined before its aliases, so the last large child is
        # where the aliases are used (an entity's key rather than the anchors' home).
        label, node = big[-1]
        path = path + [label]


def _where(path) -> str:
    """'entities / box / collision' for a path of keys."""
    return " / ".join(path) or "the file"


def _children(node):
    """The nodes directly under `node`: a mapping's keys and values, a list's items."""
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return node.value if isinstance(node, yaml.SequenceNode) else []


def _labelled_children(node):
    if isinstance(node, yaml.MappingNode):
        return [(str(getattr(key, "value", "?")), value) for key, value in node.value]
    if isinstance(node, yaml.SequenceNode):
        return [(f"[{i}]", value) for i, value in enumerate(node.value)]
    return []


#: An alias (*name) in YAML text: after a space, a bracket, a comma, a colon or a dash.
_ALIAS = re.compile(r"(?:^|[\s\[,{:-])\*[^\s\]},]", re.MULTILINE)


def _parse(text: str):
    """The YAML document of `text`. With aliases, its expanded size is checked before
    anything is built from it; without, the text's length already bounds it."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text and _ALIAS.search(text):  # the regex alone: 0.7 s on 19 MB
            _check_size(node)
        return _construct(loader, node)
    finally:
        loader.dispose()


def _construct_mapping(loader, node):
    # PyYAML's route (mappings with merge keys, or under an explicit tag).
    lines = {}
    for key_node, _ in node.value:
        key = getattr(key_node, "value", None)
        _check_repeated(lines, key, key_node)
        lines[key] = key_node.start_mark.line + 1
    mapping = _Map(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    mapping.key_lines = {k.value: k.start_mark.line + 1 for k, _ in node.value
                         if hasattr(k, "value")}
    return mapping


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _Where:
    """Builds error messages that name where in the file a value came from."""

    def __init__(self, what: str, node=None, prefix: str = ""):
        """what: the entity or joint ("entity 'box'"); node: the mapping whose keys are
        checked (for line numbers); prefix: its path inside the entity ("physics.")."""
        self.what, self.node, self.prefix = what, node, prefix

    def error(self, key, message, kind=ValueError):
        line = None
        if isinstance(self.node, _Map):
            line = self.node.key_lines.get(str(key).split(".")[-1], self.node.line)
        where = f" (line {line})" if line else ""
        return kind(f"{self.what}, key '{self.prefix}{key}'{where}: {message}")

    def number(self, mapping, key, default=None, *, minimum=None, positive=False):
        if key not in mapping:
            if default is None:
                raise self.error(key, "is required")
            return default
        value = mapping[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.error(key, f"must be a number, got {value!r}", TypeError)
        value = float(value)
        if not math.isfinite(value):
            raise self.error(key, f"must be finite, got {value}")
        if positive and value <= 0:
            raise self.error(key, f"must be positive, got {value}")
        if minimum is not None and value < minimum:
            raise self.error(key, f"must be >= {minimum}, got {value}")
        return value

    def vector(self, mapping, key, size, default=None):
        if key not in mapping:
            if default is None:
                raise self.error(key, "is required")
            return np.array(default, float)
        value = mapping[key]
        if (not isinstance(value, list) or len(value) != size
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                           for v in value)):
            raise self.error(key, f"must be a list of {size} numbers, got {value!r}", TypeError)
        if not all(math.isfinite(v) for v in value):
            raise self.error(key, f"must be finite, got {value!r}")
        return np.array(value, float)

    def boolean(self, mapping, key, default):
        value = mapping.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be true or false, got {value!r}", TypeError)
        return value

    def mapping(self, parent, key, required=False):
        if key not in parent:
            if required:
                raise self.error(key, "is required")
            return _Map()
        value = parent[key]
        if not isinstance(value, dict):
            raise self.error(key, f"must be a mapping, got {value!r}", TypeError)
        return value

    def known(self, mapping, allowed):
        for key in mapping:
            if key not in allowed:
                raise self.error(key, f"unknown key (expected one of "
                                 f"{sorted(allowed)})")


def _rotation(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


class _Block(NamedTuple):
    """A geometry block worked out, in the frame given by the block's pose: kind "circle"
    with data (centre, radius), "polygon" with data ((k, 2) vertices, skin radius),
    "capsule" ((2, 2) segment ends, radius) or "edge" ((2, 2) ends); centroid: its area
    centroid in that frame, m (an edge's: the frame's origin, where Fx2D keeps the body);
    "chain": data its (n, 2) points (a body per link, Scene.add_chain)."""

    kind: str
    data: object
    centroid: np.ndarray


class _Geometry:
    """A scene file's geometry blocks as shapes, each distinct block worked out once.

    Large scene files repeat a handful of blocks (50,000 identical boxes): checking and
    measuring each again was most of their load. The results are immutable (Shape's
    arrays are read-only), so bodies share them.
    """

    def __init__(self):
        self._blocks = {}  # (repr(geometry), repr(pose)) -> _Block
        self._shapes = {}  # (id(block), origin) -> Shape; blocks stay alive

    def of(self, where: "_Where", block) -> _Block:
        """The geometry block of a visual or collision mapping (`where` names it)."""
        geometry = where.mapping(block, "geometry", required=True)
        # repr tells True from 1 and 1 from 1.0 where a tuple's equality would not.
        key = (repr(geometry), repr(block.get("pose")))
        if key not in self._blocks:
            kind, data = _geometry(where, block, geometry)
            self._blocks[key] = _Block(kind, data, _centroid(where, kind, data))
        return self._blocks[key]

    def shape(self, where, block: _Block, origin) -> shapes.Shape:
        """The block's Shape relative to `origin` (the body's centre of mass in the entity
        frame; its moment of inertia per unit mass about it, m², is Shape.unit_inertia,
        computed once per shared Shape)."""
        key = (id(block), origin.tobytes())
        if key not in self._shapes:
            self._shapes[key] = _shape(where, block.kind, block.data, origin)
        return self._shapes[key]


def _geometry(where: _Where, block, geometry):
    """(kind, data) of a geometry block (see _Block; `where`: the visual or collision
    block's)."""
    sub = _Where(where.what, geometry, where.prefix + "geometry.")
    kind = next((k for k in GEOMETRY_KEYS if k in geometry), None)
    unknown = [k for k in geometry if k not in GEOMETRY_KEYS and k != "radius"]
    if kind is None or unknown:
        expected = f"unknown geometry (expected one of {list(GEOMETRY_KEYS)})"
        raise sub.error(unknown[0], expected) if unknown else where.error("geometry", expected)
    offset = where.vector(block, "pose", 3, [0.0, 0.0, 0.0])
    rot = _rotation(math.radians(offset[2]))
    if kind == "circle":
        radius = sub.number(geometry, "circle", positive=True)
        return "circle", (offset[:2], radius)
    if kind == "capsule":
        raw = geometry["capsule"]
        if isinstance(raw, dict):
            cw = _Where(where.what, raw, sub.prefix + "capsule.")
            cw.known(raw, {"length", "radius"})
            length = cw.number(raw, "length", minimum=0.0)
            radius = cw.number(raw, "radius", positive=True)
        elif isinstance(raw, list) and len(raw) == 2:
            length, radius = sub.vector(geometry, "capsule", 2)
            if length < 0 or radius <= 0:
                raise sub.error("capsule", f"needs length >= 0 and radius > 0, got {raw}")
        else:
            raise sub.error("capsule", "must be [length, radius] or {length:, radius:}",
                            TypeError)
        if length < shapes.MIN_SIZE:  # Fx2D: a capsule of length 0 is a circle
            return "circle", (offset[:2], radius)
        ends = np.array([[-length / 2, 0.0], [length / 2, 0.0]])
        return "capsule", (ends @ rot.T + offset[:2], radius)
    if kind == "chain":
        raw = geometry["chain"]
        if not (isinstance(raw, list) and len(raw) >= 3 and all(
                isinstance(v, list) and len(v) == 2 for v in raw)):
            raise sub.error("chain", "must be a list of at least 3 [x, y] points", TypeError)
        points = np.array([sub.vector({"chain": v}, "chain", 2) for v in raw])
        points = points @ rot.T + offset[:2]
        try:
            shapes.chain(points)
        except ValueError as exc:
            raise sub.error("chain", str(exc)) from None
        return "chain", points
    if kind == "edge":
        raw = geometry["edge"]
        if not (isinstance(raw, list) and len(raw) == 2 and all(
                isinstance(v, list) and len(v) == 2 for v in raw)):
            raise sub.error("edge", "must be [[x1, y1], [x2, y2]]", TypeError)
        ends = np.array([sub.vector({"edge": v}, "edge", 2) for v in raw])
        return "edge", ends @ rot.T + offset[:2]
    # Fx2D rounds rectangles and polygons by a sibling `radius:` (and ignores it elsewhere).
    skin = sub.number(geometry, "radius", 0.0, minimum=0.0) if "radius" in geometry else 0.0
    if kind == "rectangle":
        size = sub.vector(geometry, "rectangle", 2)
        if np.any(size <= 0):
            raise sub.error("rectangle", f"must be positive, got {list(size)}")
        hw, hh = size / 2
        verts = np.array([[-hw, -hh], [hw, -hh], [hw, hh], [-hw, hh]])
    else:
        raw = geometry["polygon"]
        if not isinstance(raw, list) or not all(
                isinstance(v, list) and len(v) == 2
                and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in v)
                for v in raw):
            raise sub.error("polygon", "must be a list of [x, y] points",
                            TypeError)
        if len(raw) < 3:
            raise sub.error("polygon",
                            f"needs at least 3 vertices, got {len(raw)}")
        verts = np.array(raw, float)
        # Fx2D re-centres a polygon on its vertex mean: the mean is what sits at the pose.
        verts = verts - verts.mean(axis=0)
    return "polygon", (verts @ rot.T + offset[:2], skin)


def _shape(where, kind, data, origin):
    """A Shape relative to `origin` (the centre of mass in the body frame)."""
    if kind == "circle":
        center, radius = data
        return shapes.circle(radius, center - origin)
    if kind == "edge":
        try:
            return shapes.edge(data[0] - origin, data[1] - origin)
        except ValueError as exc:
            raise where.error("geometry.edge", str(exc)) from None
    if kind == "capsule":
        ends, radius = data
        axis = np.arctan2(*(ends[1] - ends[0])[::-1])
        length = float(np.hypot(*(ends[1] - ends[0])))
        capsule = shapes.capsule(length, radius)
        return _placed(capsule, _rotation(axis), (ends[0] + ends[1]) / 2 - origin)
    verts, skin = data
    try:
        shape, centroid = shapes.polygon(verts - origin, radius=skin)
    except ValueError as exc:
        raise where.error("geometry.polygon", str(exc)) from None
    # polygon() re-centres on the centroid; shift back so the shape sits at its true offset.
    return _placed(shape, np.eye(2), centroid)


def _placed(shape, rotation, offset):
    """`shape` turned by `rotation` (2, 2) and moved by `offset` (m) in its body frame."""
    return shapes.Shape(shape.kind, shape.radius, rotation @ shape.center + offset,
                        shape.vertices @ rotation.T + offset, shape.normals @ rotation.T)


def _centroid(where, kind, data):
    if kind == "circle":
        return data[0]
    if kind in ("edge", "chain"):
        return np.zeros(2)
    if kind == "capsule":
        return data[0].mean(axis=0)
    verts, skin = data
    if skin > 0.0:
        try:
            return shapes.polygon(verts, radius=skin)[1]  # the rounded shape's
        except ValueError as exc:
            raise where.error("geometry.polygon", str(exc)) from None
    return shapes.polygon_area_centroid(verts)[1]


def _color(where, mapping, key, base_dir):
    value = mapping.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        path = (base_dir / value) if base_dir else Path(value)
        return {"image": str(path), "exists": path.exists()}
    if (not isinstance(value, list) or len(value) not in (3, 4)
            or not all(isinstance(v, (int, float)) for v in value)):
        raise where.error(key, f"must be RGBA 0-255 or an image path, got {value!r}", TypeError)
    return tuple(int(v) for v in value) + ((255,) if len(value) == 3 else ())


def _boundary_walls(width, height):
    """(centre, size) of the four walls around [0, width] x [0, height] (left, right, bottom,
    top; the side walls run past the corners), and their thickness."""
    t = max(BOUNDARY_MIN_THICKNESS, BOUNDARY_THICKNESS_FRACTION * max(width, height))
    tall = height + 2 * t
    walls = [((-t / 2, height / 2), (t, tall)), ((width + t / 2, height / 2), (t, tall)),
             ((width / 2, -t / 2), (width, t)), ((width / 2, height + t / 2), (width, t))]
    return walls, t


def _add_boundary(scene, where, size, background, visuals):
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
        bodies.append(scene.add_box(centre, wall_size, mass=0.0, elasticity=0.0,
                                    static_friction=0.0, dynamic_friction=0.0))
        # Not scene content: the renderer and the viewer skip it (render.drawn).
        visuals.append(dict(shape=None, fill=background, border=None, border_thickness=0.0,
                            boundary=True))
    return {"rectangle": (0.0, 0.0, width, height), "bodies": tuple(bodies),
            "thickness": thickness}


def _without_cyclic_gc(function):
    """Runs `function` with Python's cyclic garbage collector paused. A scene file makes
    millions of small containers that live until the load ends; the collector walked them
    all again and again as they piled up (22 s of a 19 MB file's 31 s parse). Nothing a
    load makes is cyclic garbage, and reference counting still frees everything else."""

    @functools.wraps(function)
    def paused(*args, **kwargs):
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return function(*args, **kwargs)
        finally:
            if was_enabled:
                gc.enable()

    return paused


@_without_cyclic_gc
def load_scene(path_or_yaml_text, n_worlds: int = 1, arch: str = "auto", substeps=None,
               boundary: bool = True):
    """A Scene from an Fx2D YAML scene file (a path) or YAML text.

    Entity names become body names and joint names joint names; entity i is body i (a chain
    entity takes one body per link). The file's `scene.size`, background and per-entity
    visual keys are kept on `scene.meta` and `scene.visuals` for the viewer.

    Args:
        path_or_yaml_text (str | pathlib.Path): a path to a .yml or .yaml file, or the YAML
            text itself (a string with a newline, or not ending in .yml / .yaml).
        n_worlds (int): independent copies of the scene (see Scene).
        arch (str): the Taichi backend (see Scene).
        substeps (int | None): XPBD substeps per step; None: Scene's default (11).
        boundary (bool): True (the default, as in Fx2D): bodies are kept inside the scene
            rectangle [0, int(W)] x [0, int(H)] by four unnamed static walls (elasticity 0,
            no friction) added after the entities' bodies, so `n_bodies` is the entity
            count + 4, and `scene.meta["boundary"]` holds the rectangle, the walls' body
            indices and thickness. False: no walls, and `scene.meta["boundary"]` is None.

    Returns:
        scene (Scene): the new scene, ready to step.

    Raises:
        TypeError: path_or_yaml_text is neither a path nor a string, boundary not a bool, or
            a value in the file of the wrong type (naming the entity or joint and the key).
        ValueError: the file does not exist, is not valid YAML, or breaks the format: an
            unknown key, a missing or out-of-range value, a joint naming no entity ... (the
            message names the entity or joint, the key and, when known, the line).
    """
    if not isinstance(boundary, bool):
        raise TypeError(f"boundary must be True or False, got {boundary!r}")
    base_dir = None
    if isinstance(path_or_yaml_text, Path) or (
            isinstance(path_or_yaml_text, str) and "\n" not in path_or_yaml_text
            and path_or_yaml_text.strip().endswith((".yml", ".yaml"))):
        path = Path(path_or_yaml_text)
        if not path.exists():
            raise ValueError(f"scene file {str(path)!r} does not exist")
        text, base_dir = path.read_text(), path.parent
    elif isinstance(path_or_yaml_text, str):
        text = path_or_yaml_text
    else:
        raise TypeError("path_or_yaml_text must be a path or YAML text, got "
                        f"{type(path_or_yaml_text).__name__}")
    try:
        document = _parse(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError("a scene file must be a mapping with a 'scene' block")
    top = _Where("scene file", document)
    top.known(document, {"scene", "entities", "joints"})
    block = top.mapping(document, "scene", required=True)
    scene_where = _Where("scene", block)
    # Fx2D's loader ignores other keys here; a typo (graviti:) would then silently run with
    # the default, so they are refused as everywhere else in the file.
    scene_where.known(block, {"size", "gravity", "background"})
    size = scene_where.vector(block, "size", 2)
    if np.any(size <= 0):
        raise scene_where.error("size", f"must be positive, got {list(size)}")
    if boundary and np.any(size < 1):
        raise scene_where.error("size", "Fx2D keeps bodies inside [0, int(width)] x [0, "
                                f"int(height)], which is empty for {list(size)}: use a size "
                                "of at least 1 m, or load_scene(..., boundary=False)")
    gravity = scene_where.vector(block, "gravity", 2, [0.0, 0.0])
    background = _color(scene_where, block, "background", base_dir) or (255, 255, 255, 255)

    entities = top.mapping(document, "entities")
    joints = top.mapping(document, "joints")
    bodies, visuals, geometry = [], [], _Geometry()
    for name, entity in entities.items():
        where = _Where(f"entity '{name}'", entity)
        if not isinstance(entity, dict):
            raise _Where(f"entity '{name}'").error("(entity)", "must be a mapping", TypeError)
        where.known(entity, _ENTITY_KEYS)
        pose = where.vector(entity, "pose", 3, [0.0, 0.0, 0.0])
        velocity = where.vector(entity, "init_velocity", 3, [0.0, 0.0, 0.0])
        physics = where.mapping(entity, "physics")
        pw = _Where(f"entity '{name}'", physics, "physics.")
        pw.known(physics, _PHYSICS_KEYS)
        mass = pw.number(physics, "mass", 1.0, minimum=0.0)
        pw.boolean(physics, "ccd", False)  # always on: speculative contacts, swept AABBs
        visual = where.mapping(entity, "visual")
        vw = _Where(f"entity '{name}'", visual, "visual.")
        vw.known(visual, _VISUAL_KEYS)
        collision = where.mapping(entity, "collision")
        cw = _Where(f"entity '{name}'", collision, "collision.")
        cw.known(collision, _COLLISION_KEYS)
        visual_geometry = geometry.of(vw, visual) if "geometry" in visual else None
        collision_geometry = (geometry.of(cw, collision)
                              if "geometry" in collision else None)
        reference = collision_geometry or visual_geometry
        if reference is None:
            raise where.error("visual.geometry", "an entity needs a visual or collision geometry")
        com = reference.centroid  # body frame (the entity pose)
        if mass > 0 and reference.kind in ("edge", "chain"):
            raise pw.error("mass", f"must be 0: an {reference.kind} is static level geometry, "
                                   f"got {mass}")
        kinds = {g.kind for g in (visual_geometry, collision_geometry) if g is not None}
        if "chain" in kinds and len(kinds) > 1:
            raise where.error("visual.geometry", "a chain entity's visual and collision "
                              "geometry must both be chains (or one of them left out)")
        inertia = None
        if "inertia" in physics:
            inertia = pw.number(physics, "inertia", positive=True)
        elif mass > 0:
            source = visual_geometry or collision_geometry
            inertia = mass * geometry.shape(vw, source, com).unit_inertia
        rot = _rotation(math.radians(pose[2]))
        chain_points = reference.data if reference.kind == "chain" else None
        bodies.append(dict(
            name=name, chain=chain_points,
            shape=None if chain_points is not None else
            geometry.shape(cw if collision_geometry else vw, reference, com),
            collides=collision_geometry is not None,
            position=pose[:2] + rot @ com, angle=math.radians(pose[2]),
            velocity=velocity[:2], angular_velocity=math.radians(velocity[2]),
            mass=mass, inertia=inertia,
            elasticity=pw.number(physics, "elasticity", 0.1, minimum=0.0),
            static_friction=pw.number(physics, "static_friction", 0.0, minimum=0.0),
            dynamic_friction=pw.number(physics, "dynamic_friction", 0.0, minimum=0.0),
            gravity_scale=pw.number(physics, "gravity_scale", 1.0),
            vel_damping=pw.number(physics, "vel_damping",
                                  pw.number(physics, "velocity_damping", 0.0, minimum=0.0),
                                  minimum=0.0),
            external_forces_enabled=pw.boolean(physics, "external_forces_enabled", True),
            sensor=pw.boolean(physics, "sensor", False),
            origin=pose, com=com))
        look = dict(fill=_color(vw, visual, "texture", base_dir),
                    border=_color(vw, visual, "border_color", base_dir),
                    border_thickness=vw.number(visual, "border_thickness", 0.0, minimum=0.0))
        if chain_points is not None:  # one entry per link, each drawn as itself
            links = len(chain_points) - 1
            visuals.extend(dict(shape=None, **look) for _ in range(links))
        else:
            visuals.append(dict(
                shape=geometry.shape(vw, visual_geometry, com) if visual_geometry else None,
                **look))

    parsed_joints = []
    index = {b["name"]: i for i, b in enumerate(bodies)}
    for name, joint in joints.items():
        where = _Where(f"joint '{name}'", joint)
        if not isinstance(joint, dict):
            raise _Where(f"joint '{name}'").error("(joint)", "must be a mapping", TypeError)
        where.known(joint, _JOINT_KEYS)
        kind = joint.get("type")
        if kind not in ("revolute", "prismatic"):
            raise where.error("type", f"must be 'revolute' or 'prismatic', got {kind!r}")
        ends = []
        for key in ("parent", "child"):
            if key not in joint:
                raise where.error(key, "is required")
            if joint[key] not in index:
                raise where.error(key, f"no entity is named {joint[key]!r}")
            ends.append(index[joint[key]])
        mode = joint.get("control_mode")
        if mode not in (None, "position", "velocity", "effort"):
            raise where.error("control_mode", f"must be position, velocity or effort, got {mode!r}")
        effort_key = next((k for k in ("max_effort", "max_torque", "max_force") if k in joint),
                          None)
        common = dict(control_mode=mode, target=where.number(joint, "target", 0.0),
                      pid=tuple(where.vector(joint, "pid", 3, [1.0, 0.0, 0.0])),
                      max_effort=where.number(joint, effort_key, positive=True)
                      if effort_key else math.inf,
                      collide_connected=where.boolean(joint, "entities_collide", False),
                      name=name)
        if kind == "revolute":
            specific = dict(anchor=where.vector(joint, "anchor", 2, [0.0, 0.0]),
                            angle_min=where.number(joint, "angle_min", -math.pi),
                            angle_max=where.number(joint, "angle_max", math.pi))
        else:
            specific = dict(axis=where.vector(joint, "axis", 2, [1.0, 0.0]),
                            position_min=where.number(joint, "position_min", -1000.0),
                            position_max=where.number(joint, "position_max", 1000.0))
        parsed_joints.append((kind, ends, specific, common, where))

    # Everything parsed and checked: only now build the scene.
    scene = Scene(gravity=tuple(gravity), n_worlds=n_worlds, arch=arch,
                  **({} if substeps is None else {"substeps": substeps}))
    first_body = []  # per entity, its (first) body index: a chain has a body per link
    for b in bodies:
        kwargs = {k: b[k] for k in ("angle", "velocity", "angular_velocity", "mass", "inertia",
                                    "elasticity", "static_friction", "dynamic_friction",
                                    "gravity_scale", "vel_damping", "name",
                                    "external_forces_enabled", "sensor")}
        position = np.asarray(b["position"], float)
        if b["chain"] is not None:
            kwargs.pop("inertia")
            first_body.append(scene.add_chain(position, b["chain"], collides=b["collides"],
                                              **kwargs))
        else:
            first_body.append(scene.add_shape(position, b["shape"], collides=b["collides"],
                                              **kwargs))
    for kind, (parent, child), specific, common, where in parsed_joints:
        # The anchor is in the parent's entity frame; the engine's body frame is at the COM.
        try:
            if kind == "revolute":
                specific["anchor"] = specific["anchor"] - bodies[parent]["com"]
                scene.add_revolute_joint(first_body[parent], first_body[child], **specific,
                                         **common)
            else:
                scene.add_prismatic_joint(first_body[parent], first_body[child], **specific,
                                          **common)
        except (ValueError, TypeError) as exc:
            raise where.error("(joint)", str(exc)) from None
    for v in visuals:
        if isinstance(v["fill"], dict):  # an image: the viewer shows a plain colour instead
            v["fill"] = DEFAULT_COLOR
    scene.meta = {"size": tuple(size), "background": background,
                  "boundary": _add_boundary(scene, scene_where, size, background, visuals)
                  if boundary else None}
    scene.visuals = visuals
    return scene


__all__ = ["load_scene"]
