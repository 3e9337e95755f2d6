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

A scene file's cost is bounded: its size, YAML nodes, list lengths, nesting and polygon
vertices are checked before or while it is parsed (MAX_FILE_BYTES ... below), its aliases'
expansion before anything is built from it. Every error about a file's content is a
ValueError (TypeError for a wrong type) naming the entity or joint, the key and the line:
"entity 'box', key 'physics.mass' (line 7): ...", the scene builder's included.
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


# ------------------------------------------------------------------ limits
# What a scene file may cost, checked before or while it is parsed (never after building
# what it holds), so that no file, however large or hostile, takes more time or memory than
# these allow. docs/scene-files.md lists them; the bytes of the text bound the parse's time,
# the YAML nodes its memory (about 0.6 KB a node, all told).
MAX_FILE_BYTES = 64 * 2**20
"""Largest scene file (or YAML text), bytes: 64 MiB. Checked before anything is read or
parsed (a path's size, then at most this many bytes read). 50,000 entities with visual
blocks and distinct polygons take 28 MB."""
MAX_NODES = 5_000_000
"""Most YAML nodes (each value, key, list and mapping) a scene file may hold, counted as
the file is parsed: about 3 GB of memory at most. 50,000 entities with visual blocks and
distinct polygons hold 3.25 million."""
MAX_LIST_LENGTH = 100_000
"""Most items in any one list (a chain's points, ...), checked as the list is parsed."""
MAX_DEPTH = 32
"""Deepest nesting of lists and mappings (a polygon's coordinate is at depth 8), checked as
the file is parsed; aliases expanded, checked before anything is built from it."""
MAX_EXPANDED_VALUES = 20_000_000
"""Most values a scene file may hold once its aliases are expanded: a few hundred bytes of
nested aliases would otherwise expand to billions (PyYAML builds each once, but every
check of the numbers walks them all). Checked before anything is built from the file."""
# A polygon's vertices (3 to shapes.MAX_POLYGON_VERTICES) are refused at the one too many,
# as the list is parsed.


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
_LIBYAML = hasattr(yaml, "CSafeLoader")


class _Loader(yaml.CSafeLoader if _LIBYAML else yaml.SafeLoader):
    #: Tags of plain scalars already resolved. A scalar's implicit tag depends only on its
    #: text, and a scene file repeats the same keys ("pose", "physics", ...) thousands of
    #: times: resolving each again by regular expressions was a fifth of a large load.
    _tags: dict = {}

    def __init__(self, text):
        super().__init__(text)
        self.nodes = 0  # composed so far
        #: Per node being composed, outermost first, its index in its parent: None (the
        #: root, or a mapping's key), the key node (a mapping's value) or an int (a list's).
        self.path = []

    def descend_resolver(self, parent, index):
        """The limits, checked as the file is parsed: PyYAML's composer (its C one too) calls
        this before it composes each node (aliases excepted), with the node's parent and its
        index there."""
        self.nodes = nodes = self.nodes + 1
        path = self.path
        if (nodes > MAX_NODES or len(path) >= MAX_DEPTH
                or index.__class__ is int and (index >= MAX_LIST_LENGTH or (
                    index == shapes.MAX_POLYGON_VERTICES and self._in_polygon()))):
            raise self._limit_error(parent, index)
        path.append(index)

    def ascend_resolver(self):
        self.path.pop()

    def _in_polygon(self) -> bool:
        """Whether the list being composed is a geometry block's polygon."""
        path = self.path
        return (len(path) >= 2 and isinstance(path[-1], yaml.ScalarNode)
                and path[-1].value == "polygon" and isinstance(path[-2], yaml.ScalarNode)
                and path[-2].value == "geometry")

    def _limit_error(self, parent, index) -> ValueError:
        """The error for the limit that the `index`th node of `parent` breaks."""
        if self.nodes > MAX_NODES or len(self.path) >= MAX_DEPTH:  # named where it is
            message = (f"the file holds more than {MAX_NODES:,} YAML nodes (values, keys, "
                       f"lists and mappings); a scene file may hold at most {MAX_NODES:,}"
                       if self.nodes > MAX_NODES else
                       f"values nested more than {MAX_DEPTH} deep; a scene file may nest "
                       f"them at most {MAX_DEPTH} deep")
            return _error(_labels(self.path + [index]), _current_line(parent, index), message)
        # A list too long, named as a whole: on its key's line where it is a mapping's value.
        key = self.path[-1] if isinstance(self.path[-1], yaml.Node) else parent
        message = (f"a list of more than {MAX_LIST_LENGTH:,} items; at most "
                   f"{MAX_LIST_LENGTH:,}" if index >= MAX_LIST_LENGTH else
                   f"a polygon of more than {shapes.MAX_POLYGON_VERTICES} vertices; it may "
                   f"have 3 to {shapes.MAX_POLYGON_VERTICES}")
        return _error(_labels(self.path), key.start_mark.line + 1, message)

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


def _current_line(parent, index) -> int:
    """The line the composer has reached where it is about to compose the `index`th node
    of `parent` (see _Loader.path)."""
    if isinstance(index, yaml.Node):  # a mapping's value: its key's line
        return index.start_mark.line + 1
    if parent is None:
        return 1
    if parent.value:  # the last item (or key and value) composed
        last = parent.value[-1]
        last = last[-1] if isinstance(last, tuple) else last
        if last.end_mark is not None:
            return last.end_mark.line + 1
    return parent.start_mark.line + 1


def _labels(path) -> list:
    """The keys (str) and list indices (int) of a composer path (see _Loader.path)."""
    return [index if isinstance(index, int) else _label(index)
            for index in path if index is not None]


def _label(key_node) -> str:
    return key_node.value if isinstance(key_node, yaml.ScalarNode) else "?"


def _describe(labels) -> str:
    """Where `labels` (keys and list indices from the document's root) point, as every
    error of the loader names it: "entity 'box', key 'collision.geometry.polygon'",
    "joint 'hinge', key 'anchor'", "scene, key 'size'", "scene file, key 'entities'"."""
    labels = list(labels)
    if len(labels) >= 2 and labels[0] in ("entities", "joints") and isinstance(labels[1], str):
        kind = "entity" if labels[0] == "entities" else "joint"
        what, rest, whole = f"{kind} '{labels[1]}'", labels[2:], f"({kind})"
    elif len(labels) >= 2 and labels[0] == "scene":
        what, rest, whole = "scene", labels[1:], "(scene)"
    else:
        what, rest, whole = "scene file", labels, "(document)"
    if not rest:
        return f"{what}, key '{whole}'"
    key = ""
    for label in rest[:12]:  # the first 12: nesting past the limit is longer
        key += f"[{label}]" if isinstance(label, int) else ("." if key else "") + label
    return f"{what}, key '{key}{'...' if len(rest) > 12 else ''}'"


def _error(labels, line, message, kind=ValueError):
    return kind(f"{_describe(labels)} (line {line}): {message}")


class _NodeError(Exception):
    """An error found while building the value of `node` (its line: `line`, or the node's
    own); _construct names where the node is in the file."""

    def __init__(self, node, message, line=None, kind=ValueError):
        super().__init__(message)
        self.node, self.message, self.kind = node, message, kind
        self.line = line or node.start_mark.line + 1


def _construct(loader, root):
    """The Python value of the node graph under `root`, as PyYAML's safe constructor gives
    it (mappings as _Map with their lines, repeated keys refused), without its per-node
    generator machinery: a third of a large file's load. Nodes it does not handle simply
    (merge keys, explicit tags, timestamps) are left to PyYAML."""
    built = {}  # id(node) -> value: an alias's node is built once, as PyYAML does

    def pyyaml(node):
        try:
            return loader.construct_object(node, deep=True)
        except _NodeError:
            raise
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark or node.start_mark
            raise _NodeError(node, exc.problem or str(exc), mark.line + 1) from None
        except (ValueError, TypeError, OverflowError) as exc:  # a bad date, !!int 'x' ...
            raise _NodeError(node, f"cannot be read ({exc})") from None

    def build(node):
        tag = node.tag
        if isinstance(node, yaml.ScalarNode):
            value = node.value
            if tag == _FLOAT_TAG and _DECIMAL_FLOAT.fullmatch(value):
                return float(value)
            if tag == _INT_TAG and _DECIMAL_INT.fullmatch(value):
                try:
                    return int(value)
                except ValueError as exc:  # past Python's 4,300 digits
                    raise _NodeError(node, f"cannot be read ({exc})") from None
            if tag == _STR_TAG:
                return value
            if tag == _NULL_TAG:
                return None
            return pyyaml(node)
        key = id(node)
        if key in built:
            return built[key]
        if tag == _SEQ_TAG and isinstance(node, yaml.SequenceNode):
            value = built[key] = [build(item) for item in node.value]
            return value
        if tag != _MAP_TAG or not isinstance(node, yaml.MappingNode) or any(
                k.tag == _MERGE_TAG for k, _ in node.value):
            value = built[key] = pyyaml(node)
            return value
        mapping = built[key] = _Map()
        mapping.line = node.start_mark.line + 1
        mapping.key_lines, seen = {}, {}
        for key_node, value_node in node.value:
            name = build(key_node)
            try:
                hash(name)
            except TypeError:
                raise _NodeError(key_node, "a key must be a plain value, not a list or "
                                 "a mapping", kind=TypeError) from None
            _check_repeated(seen, name, key_node)
            seen[name] = key_node.start_mark.line + 1
            mapping[name] = build(value_node)
            mapping.key_lines[name] = key_node.start_mark.line + 1
        return mapping

    try:
        return build(root)
    except _NodeError as exc:
        raise _error(_labels_to(root, exc.node), exc.line, exc.message, exc.kind) from None
    except RecursionError:  # MAX_DEPTH and _check_size stop such files before
        raise _error([], 1, "values nested too deeply to build (past Python's recursion "
                     f"limit); a scene file may nest them at most {MAX_DEPTH} deep") from None


def _check_repeated(lines: dict, key, key_node):
    """PyYAML keeps the last of two equal keys; two entities named alike would silently
    become one body, so a repeated key is an error."""
    if key in lines:
        raise _NodeError(key_node, f"key {key!r} appears twice in one mapping (lines "
                         f"{lines[key]} and {key_node.start_mark.line + 1})")


def _labels_to(root, target) -> list:
    """The labels (see _labels) of the first path from `root` to the node `target` (a
    mapping's key node: its key's); [] where there is none. Only for error messages: one
    pass over the graph."""
    paths, queue = {id(root): []}, [root]
    for node in queue:
        if node is target:
            return paths[id(node)]
        for label, child in _labelled_children(node, keys=True):
            if id(child) not in paths:
                paths[id(child)] = paths[id(node)] + [label]
                queue.append(child)
    return []


def _graph_sizes(root) -> tuple[dict, dict]:
    """({id(node): values under it with aliases expanded}, {id(node): its depth, aliases
    expanded}), in one pass over the node graph (each node's computed once); ValueError for
    an alias that contains itself."""
    sizes, depths, on_path = {}, {}, set()
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
            depths[key] = 1 + max((depths[id(child)] for child in children), default=0)
            continue
        if key in on_path:
            raise _error(_labels_to(root, node), node.start_mark.line + 1, "an alias refers "
                         "to a node that contains it (an endless value)")
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes, depths


def _check_size(root):
    """For a file with aliases, before anything is built from it: ValueError naming the
    entity and key where a list (aliases as items) passes MAX_LIST_LENGTH or, aliases
    expanded, the file holds more than MAX_EXPANDED_VALUES values or nests them deeper than
    MAX_DEPTH."""
    paths, queue = {id(root): []}, [root]  # each distinct node, with the first path to it
    for node in queue:
        if isinstance(node, yaml.SequenceNode) and len(node.value) > MAX_LIST_LENGTH:
            raise _error(paths[id(node)], node.start_mark.line + 1,
                         f"a list of {len(node.value):,} items; at most {MAX_LIST_LENGTH:,}")
        for label, child in _labelled_children(node):
            if id(child) not in paths:
                paths[id(child)] = paths[id(node)] + [label]
                queue.append(child)
    sizes, depths = _graph_sizes(root)
    if sizes[id(root)] > MAX_EXPANDED_VALUES:
        node, path, line = _down(root, lambda value, level: sizes[id(value)] >
                                 MAX_EXPANDED_VALUES)
        raise _error(path, line, f"{sizes[id(node)]:,} values once its "
                     f"aliases are expanded; a scene file may hold at most "
                     f"{MAX_EXPANDED_VALUES:,}")
    if depths[id(root)] > MAX_DEPTH:  # a level's nodes, plus the depth below each
        node, path, line = _down(root, lambda value, level: level + depths[id(value)] >
                                 MAX_DEPTH)
        raise _error(path, line, f"values nested {depths[id(root)]:,} "
                     f"deep once its aliases are expanded; a scene file may nest them at "
                     f"most {MAX_DEPTH} deep")


def _down(root, too_big):
    """(node, its labels, its key's line) where the aliases that make the value under `root`
    too big are used: down from `root` through mappings, each step into the last value
    still too big (too_big(value, its level); an anchor is defined before its aliases, so
    this names an entity's key rather than the anchors' home)."""
    node, path, line = root, [], root.start_mark.line + 1
    while isinstance(node, yaml.MappingNode):
        big = [(key, value) for key, value in node.value if too_big(value, len(path) + 1)]
        if not big:
            break
        key, node = big[-1]
        path, line = path + [_label(key)], key.start_mark.line + 1
    return node, path, line


def _children(node):
    """The nodes directly under `node`: a mapping's keys and values, a list's items."""
    if isinstance(node, yaml.MappingNode):
        return [child for pair in node.value for child in pair]
    return node.value if isinstance(node, yaml.SequenceNode) else []


def _labelled_children(node, keys=False):
    """(label, child) of the nodes under `node`: a mapping's values (its keys too with
    `keys`, under the same label), a list's items."""
    if isinstance(node, yaml.MappingNode):
        pairs = [(_label(key), value) for key, value in node.value]
        return pairs + [(_label(key), key) for key, _ in node.value] if keys else pairs
    if isinstance(node, yaml.SequenceNode):
        return list(enumerate(node.value))
    return []


#: An alias (*name) in YAML text: after a space, a bracket, a comma, a colon or a dash.
_ALIAS = re.compile(r"(?:^|[\s\[,{:-])\*[^\s\]},]", re.MULTILINE)


def _parse(text: str):
    """The YAML document of `text`, within the limits above. With aliases, its expanded
    size is checked before anything is built from it; without, the nodes counted as it was
    parsed already bound it."""
    loader = None
    try:
        loader = _Loader(text)  # PyYAML's own reader checks every character here
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text and _ALIAS.search(text):  # the regex alone: 0.7 s on 19 MB
            _check_size(node)
        return _construct(loader, node)
    except yaml.YAMLError as exc:  # named where the parser had got to
        raise _yaml_error(text, exc, loader.path if loader else []) from None
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_error(text, exc, path) -> ValueError:
    """PyYAML's error `exc` (the composer at `path`) as the loader's."""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow
        # Its position: a byte's in the UTF-8 text for libyaml, else a character's.
        before = (text.encode("utf-8")[:exc.position].count(b"\n") if _LIBYAML
                  else text.count("\n", 0, exc.position))
        line = before + 1
    else:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else 1
    return _error(_labels(path), line, f"not valid YAML: {exc}")


def _construct_mapping(loader, node):
    # PyYAML's route (mappings with merge keys, or under an explicit tag).
    lines = {}
    for key_node, _ in node.value:
        key = getattr(key_node, "value", None)
        _check_repeated(lines, key, key_node)
        lines[key] = key_node.start_mark.line + 1
    mapping = _Map(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    mapping.key_lines = {loader.construct_object(k, deep=True): k.start_mark.line + 1
                         for k, _ in node.value}  # built already: cached
    return mapping


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class _Where:
    """Builds error messages that name where in the file a value came from."""

    def __init__(self, what: str, node=None, prefix: str = "", line=None):
        """what: the entity or joint ("entity 'box'"); node: the mapping whose keys are
        checked (for line numbers); prefix: its path inside the entity ("physics."); line:
        the line named for a key the mapping does not have (default: the mapping's)."""
        self.what, self.node, self.prefix = what, node, prefix
        self.line = line if line is not None else getattr(node, "line", None)

    def sub(self, mapping, key: str) -> "_Where":
        """The _Where of `mapping`, the value of this one's `key` ("physics")."""
        return _Where(self.what, mapping, f"{self.prefix}{key}.", self.line_of(key))

    def line_of(self, key):
        """The line of `key`: a key of this mapping, or a dotted path below it
        ("geometry.polygon": of its innermost part the file has); else the fallback line."""
        node, line = self.node, None
        if isinstance(node, _Map) and key in node.key_lines:
            return node.key_lines[key]
        for part in key.split(".") if isinstance(key, str) else ():
            if not isinstance(node, _Map) or part not in node.key_lines:
                break
            line, node = node.key_lines[part], node.get(part)
        return line if line is not None else self.line

    def error(self, key, message, kind=ValueError):
        line = self.line_of(key)
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
        try:
            value = float(value)
        except OverflowError:  # an int past float's range
            raise self.error(key, f"must be finite, got an integer of {len(str(value))} "
                             "digits") from None
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
        try:
            array = np.array(value, float)
        except OverflowError:  # an int past float's range
            array = np.full(size, math.inf)
        if not np.all(np.isfinite(array)):
            raise self.error(key, f"must be finite, got {value!r}")
        return array

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
    "chain": data its (n, 2) points (a body per link, Scene.add_chain). key: the file's
    geometry key ("rectangle" for a polygon written as one), for error messages."""

    kind: str
    data: object
    centroid: np.ndarray
    key: str


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
            kind, data, name = _geometry(where, block, geometry)
            self._blocks[key] = _Block(kind, data, _centroid(where, kind, data, name), name)
        return self._blocks[key]

    def shape(self, where, block: _Block, origin) -> shapes.Shape:
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
        raise where.error(key, f"must be within +-{shapes.MAX_COORDINATE:g} m, got "
                          f"{largest:g}")
    return values


def _geometry(where: _Where, block, geometry):
    """(kind, data, the file's key) of a geometry block (see _Block; `where`: the visual or
    collision block's)."""
    sub = where.sub(geometry, "geometry")
    kind = next((k for k in GEOMETRY_KEYS if k in geometry), None)
    unknown = [k for k in geometry if k not in GEOMETRY_KEYS and k != "radius"]
    if kind is None or unknown:
        expected = f"unknown geometry (expected one of {list(GEOMETRY_KEYS)})"
        raise sub.error(unknown[0], expected) if unknown else where.error("geometry", expected)
    offset = where.vector(block, "pose", 3, [0.0, 0.0, 0.0])
    _bounded(where, "pose", offset[:2])
    rot = _rotation(math.radians(offset[2]))
    if kind == "circle":
        radius = _bounded(sub, kind, sub.number(geometry, "circle", positive=True))
        return "circle", (offset[:2], radius), kind
    if kind == "capsule":
        raw = geometry["capsule"]
        if isinstance(raw, dict):
            cw = sub.sub(raw, "capsule")
            cw.known(raw, {"length", "radius"})
            length = _bounded(cw, "length", cw.number(raw, "length", minimum=0.0))
            radius = _bounded(cw, "radius", cw.number(raw, "radius", positive=True))
        elif isinstance(raw, list) and len(raw) == 2:
            length, radius = _bounded(sub, kind, sub.vector(geometry, "capsule", 2))
            if length < 0 or radius <= 0:
                raise sub.error("capsule", f"needs length >= 0 and radius > 0, got {raw}")
        else:
            raise sub.error("capsule", "must be [length, radius] or {length:, radius:}",
                            TypeError)
        if length < shapes.MIN_SIZE:  # Fx2D: a capsule of length 0 is a circle
            return "circle", (offset[:2], radius), kind
        ends = np.array([[-length / 2, 0.0], [length / 2, 0.0]])
        return "capsule", (ends @ rot.T + offset[:2], radius), kind
    if kind == "chain":
        raw = geometry["chain"]
        if not (isinstance(raw, list) and len(raw) >= 3 and all(
                isinstance(v, list) and len(v) == 2 for v in raw)):
            raise sub.error("chain", "must be a list of at least 3 [x, y] points", TypeError)
        points = np.array([sub.vector({"chain": v}, "chain", 2) for v in raw])
        points = _bounded(sub, kind, points @ rot.T + offset[:2])
        try:
            shapes.chain(points)
        except ValueError as exc:
            raise sub.error("chain", str(exc)) from None
        return "chain", points, kind
    if kind == "edge":
        raw = geometry["edge"]
        if not (isinstance(raw, list) and len(raw) == 2 and all(
                isinstance(v, list) and len(v) == 2 for v in raw)):
            raise sub.error("edge", "must be [[x1, y1], [x2, y2]]", TypeError)
        ends = np.array([sub.vector({"edge": v}, "edge", 2) for v in raw])
        return "edge", _bounded(sub, kind, ends @ rot.T + offset[:2]), kind
    # Fx2D rounds rectangles and polygons by a sibling `radius:` (and ignores it elsewhere).
    skin = sub.number(geometry, "radius", 0.0, minimum=0.0) if "radius" in geometry else 0.0
    _bounded(sub, "radius", skin)
    if kind == "rectangle":
        size = _bounded(sub, kind, sub.vector(geometry, "rectangle", 2))
        if np.any(size <= 0):
            raise sub.error("rectangle", f"must be positive, got {size.tolist()}")
        hw, hh = size / 2
        verts = np.array([[-hw, -hh], [hw, -hh], [hw, hh], [-hw, hh]])
    else:
        raw = geometry["polygon"]
        if isinstance(raw, list) and len(raw) > shapes.MAX_POLYGON_VERTICES:
            raise sub.error("polygon", f"must have 3 to {shapes.MAX_POLYGON_VERTICES} "
                            f"vertices, got {len(raw)}")
        if not isinstance(raw, list) or not all(
                isinstance(v, list) and len(v) == 2
                and all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in v)
                for v in raw):
            raise sub.error("polygon", "must be a list of [x, y] points",
                            TypeError)
        if len(raw) < 3:
            raise sub.error("polygon",
                            f"needs at least 3 vertices, got {len(raw)}")
        try:
            verts = np.array(raw, float)
        except OverflowError:  # an int past float's range
            verts = np.full((len(raw), 2), math.inf)
        if not np.all(np.isfinite(verts)):
            raise sub.error("polygon", f"must be finite, got {raw!r}")
        verts = _bounded(sub, kind, verts)
        # Fx2D re-centres a polygon on its vertex mean: the mean is what sits at the pose.
        verts = verts - verts.mean(axis=0)
    return "polygon", (verts @ rot.T + offset[:2], skin), kind


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
        return _placed(capsule, _rotation(axis), (ends[0] + ends[1]) / 2 - origin)
    verts, skin = data
    shape, centroid = shapes.polygon(verts - origin, radius=skin)
    # polygon() re-centres on the centroid; shift back so the shape sits at its true offset.
    return _placed(shape, np.eye(2), centroid)


def _placed(shape, rotation, offset):
    """`shape` turned by `rotation` (2, 2) and moved by `offset` (m) in its body frame."""
    return shapes.Shape(shape.kind, shape.radius, rotation @ shape.center + offset,
                        shape.vertices @ rotation.T + offset, shape.normals @ rotation.T)


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


#: A colour component's range (Fx2D's RGBA: 0 to 255).
_COLOR_RANGE = (0, 255)


def _color(where, mapping, key, base_dir):
    """A colour ((r, g, b, a) ints) or an image ({"image": path, "exists": bool}) of
    mapping[key]; None where it is absent."""
    value = mapping.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        path = (base_dir / value) if base_dir else Path(value)
        try:
            exists = path.exists()
        except (OSError, ValueError):  # too long a name ...: no such image
            exists = False
        return {"image": str(path), "exists": exists}
    low, high = _COLOR_RANGE
    if (not isinstance(value, list) or len(value) not in (3, 4)
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise where.error(key, f"must be RGB or RGBA, {low}-{high}, or an image path, got "
                          f"{value!r}", TypeError)
    if not all(low <= v <= high for v in value):  # NaN is not, nor an int of any size
        raise where.error(key, f"must be RGB or RGBA components from {low} to {high}, got "
                          f"{value!r}")
    return tuple(int(v) for v in value) + ((255,) if len(value) == 3 else ())


def _boundary_walls(width, height):
    """(centre, size) of the four walls around [0, width] x [0, height] (left, right, bottom,
    top; the side walls run past the corners), and their thickness."""
    t = max(BOUNDARY_MIN_THICKNESS, BOUNDARY_THICKNESS_FRACTION * max(width, height))
    tall = height + 2 * t
    walls = [((-t / 2, height / 2), (t, tall)), ((width + t / 2, height / 2), (t, tall)),
             ((width / 2, -t / 2), (width, t)), ((width / 2, height + t / 2), (width, t))]
    return walls, t


def _add_boundary(scene, size, background, visuals):
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


#: The file key each keyword of Scene.add_shape / add_chain comes from: the builder names
#: the argument first in its messages ("mass must be ..."). Others: the geometry's key.
_BODY_ARGUMENT_KEYS = {
    "position": "pose", "angle": "pose", "velocity": "init_velocity",
    "angular_velocity": "init_velocity", "mass": "physics.mass", "inertia": "physics.inertia",
    "elasticity": "physics.elasticity", "static_friction": "physics.static_friction",
    "dynamic_friction": "physics.dynamic_friction", "gravity_scale": "physics.gravity_scale",
    "vel_damping": "physics.vel_damping", "sensor": "physics.sensor",
    "external_forces_enabled": "physics.external_forces_enabled", "name": "(name)",
    "body": "(name)"}
#: The same for Scene.add_revolute_joint / add_prismatic_joint. Others: "(joint)".
_JOINT_ARGUMENT_KEYS = {
    "parent": "parent", "child": "child", "anchor": "anchor", "angle_min": "angle_min",
    "angle_max": "angle_max", "axis": "axis", "position_min": "position_min",
    "position_max": "position_max", "control_mode": "control_mode", "target": "target",
    "pid": "pid", "collide_connected": "entities_collide", "name": "(name)",
    "joint": "(name)"}


def _builder_error(where: _Where, exc: Exception, key_of) -> Exception:
    """`exc`, raised by the scene builder, as an error naming the entity or joint, the file
    key its argument came from (key_of(the argument's name), the message's first word) and
    the line."""
    argument = re.match(r"[A-Za-z_]+", str(exc))
    key = key_of(argument.group() if argument else "")
    return where.error(key, str(exc), TypeError if isinstance(exc, TypeError) else ValueError)


def _body_key(argument: str, body: dict) -> str:
    """The file key of the builder argument `argument` of an entity's `body` (see _load)."""
    physics = body["physics"]
    if argument == "vel_damping" and "vel_damping" not in physics and (
            "velocity_damping" in physics):
        return "physics.velocity_damping"
    if argument == "inertia" and "inertia" not in physics:  # mass x the visual geometry's
        return "physics.mass" if "mass" in physics else body["inertia_key"]
    return _BODY_ARGUMENT_KEYS.get(argument, body["geometry_key"])


def _too_big(what: str, size: int) -> ValueError:
    return ValueError(f"{what}: {size:,} bytes; a scene file may have at most "
                      f"{MAX_FILE_BYTES:,} ({MAX_FILE_BYTES / 2**20:g} MiB)")


def _read(source) -> tuple[str, Path | None]:
    """(the YAML text, the folder image paths are relative to) of a path or of the text
    itself, no more than MAX_FILE_BYTES read: ValueError past it, before parsing."""
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source
                                    and source.strip().endswith((".yml", ".yaml"))):
        path = Path(source)
        if not path.exists():
            raise ValueError(f"scene file {str(path)!r} does not exist")
        what = f"scene file {str(path)!r}"
        try:
            size = path.stat().st_size
            if size > MAX_FILE_BYTES:
                raise _too_big(what, size)
            with path.open("rb") as file:  # a device or a growing file: no more than this
                data = file.read(MAX_FILE_BYTES + 1)
        except OSError as exc:
            raise ValueError(f"{what} cannot be read: {exc.strerror or exc}") from None
        if len(data) > MAX_FILE_BYTES:
            raise _too_big(what, len(data))
        try:
            return data.decode("utf-8-sig"), path.parent
        except UnicodeDecodeError as exc:
            raise _error([], data.count(b"\n", 0, exc.start) + 1, f"not UTF-8 text "
                         f"({exc.reason} at byte {exc.start:,})") from None
    if not isinstance(source, str):
        raise TypeError("path_or_yaml_text must be a path or YAML text, got "
                        f"{type(source).__name__}")
    if len(source) > MAX_FILE_BYTES:  # at least as many bytes as characters
        raise _too_big("YAML text", len(source))
    if not source.isascii():
        try:
            size = len(source.encode("utf-8"))
        except UnicodeEncodeError as exc:  # a lone surrogate
            raise _error([], source.count("\n", 0, exc.start) + 1, f"not text UTF-8 can "
                         f"hold ({exc.reason} at character {exc.start:,})") from None
        if size > MAX_FILE_BYTES:
            raise _too_big("YAML text", size)
    return source, None


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
            a value in the file of the wrong type.
        ValueError: the file does not exist or cannot be read, is larger than the limits
            (MAX_FILE_BYTES, MAX_NODES, MAX_LIST_LENGTH, MAX_DEPTH, MAX_EXPANDED_VALUES),
            is not valid YAML, or breaks the format: an unknown key, a missing or
            out-of-range value, a joint naming no entity ... The errors about the file's
            content name the entity or joint, the key and the line: "entity 'box', key
            'physics.mass' (line 7): ...". n_worlds, substeps and arch raise as Scene's.
    """
    if not isinstance(boundary, bool):
        raise TypeError(f"boundary must be True or False, got {boundary!r}")
    limits = (f"a scene file may have at most {MAX_FILE_BYTES:,} bytes, {MAX_NODES:,} YAML "
              f"nodes, {MAX_EXPANDED_VALUES:,} values with its aliases expanded, nested "
              f"{MAX_DEPTH} deep")
    try:
        text, base_dir = _read(path_or_yaml_text)
        return _load(text, base_dir, n_worlds, arch, substeps, boundary)
    except MemoryError:
        raise _error([], 1, f"this machine ran out of memory loading it ({limits})") from None
    except RecursionError:
        raise _error([], 1, f"nested too deeply to load ({limits})") from None


def _load(text, base_dir, n_worlds, arch, substeps, boundary):
    """load_scene's work on the file's text (base_dir: image paths are relative to it)."""
    document = _parse(text)
    if not isinstance(document, dict):
        raise _Where("scene file", line=1).error(
            "(document)", "must be a mapping with a 'scene' block, got "
            + ("an empty file" if document is None else type(document).__name__))
    top = _Where("scene file", document)
    top.known(document, {"scene", "entities", "joints"})
    block = top.mapping(document, "scene", required=True)
    scene_where = _Where("scene", block, line=top.line_of("scene"))
    # Fx2D's loader ignores other keys here; a typo (graviti:) would then silently run with
    # the default, so they are refused as everywhere else in the file.
    scene_where.known(block, {"size", "gravity", "background"})
    size = scene_where.vector(block, "size", 2)
    if np.any(size <= 0):
        raise scene_where.error("size", f"must be positive, got {size.tolist()}")
    if boundary and np.any(size < 1):
        raise scene_where.error("size", "Fx2D keeps bodies inside [0, int(width)] x [0, "
                                f"int(height)], which is empty for {size.tolist()}: use a size "
                                "of at least 1 m, or load_scene(..., boundary=False)")
    gravity = scene_where.vector(block, "gravity", 2, [0.0, 0.0])
    try:
        shapes.as_vector2(gravity, "gravity")  # Scene's rule, checked before it is made
    except (ValueError, TypeError) as exc:
        raise scene_where.error("gravity", str(exc)) from None
    background = _color(scene_where, block, "background", base_dir) or (255, 255, 255, 255)

    entities = top.mapping(document, "entities")
    joints = top.mapping(document, "joints")
    bodies, visuals, geometry = [], [], _Geometry()
    for name, entity in entities.items():
        where = _Where(f"entity '{name}'", entity if isinstance(entity, dict) else None,
                       line=top.sub(entities, "entities").line_of(name))
        if not isinstance(name, str):
            raise where.error("(name)", f"must be a string, got the {type(name).__name__} "
                              f"{name!r} (write it in quotes)", TypeError)
        if not isinstance(entity, dict):
            raise where.error("(entity)", "must be a mapping", TypeError)
        where.known(entity, _ENTITY_KEYS)
        pose = where.vector(entity, "pose", 3, [0.0, 0.0, 0.0])
        velocity = where.vector(entity, "init_velocity", 3, [0.0, 0.0, 0.0])
        physics = where.mapping(entity, "physics")
        pw = where.sub(physics, "physics")
        pw.known(physics, _PHYSICS_KEYS)
        mass = pw.number(physics, "mass", 1.0, minimum=0.0)
        pw.boolean(physics, "ccd", False)  # always on: speculative contacts, swept AABBs
        visual = where.mapping(entity, "visual")
        vw = where.sub(visual, "visual")
        vw.known(visual, _VISUAL_KEYS)
        collision = where.mapping(entity, "collision")
        cw = where.sub(collision, "collision")
        cw.known(collision, _COLLISION_KEYS)
        visual_geometry = geometry.of(vw, visual) if "geometry" in visual else None
        collision_geometry = (geometry.of(cw, collision)
                              if "geometry" in collision else None)
        reference = collision_geometry or visual_geometry
        if reference is None:
            raise where.error("visual.geometry", "an entity needs a visual or collision geometry")
        com = reference.centroid  # body frame (the entity pose)
        if mass > 0 and reference.kind in ("edge", "chain"):
            raise pw.error("mass", f"must be 0: {'an' if reference.kind == 'edge' else 'a'} "
                                   f"{reference.kind} is static level geometry, got {mass}")
        kinds = {g.kind for g in (visual_geometry, collision_geometry) if g is not None}
        if "chain" in kinds and len(kinds) > 1:
            raise where.error("visual.geometry", "a chain entity's visual and collision "
                              "geometry must both be chains (or one of them left out)")
        # Fx2D takes the inertia from the visual geometry.
        inertia_where, inertia_source = (vw, visual_geometry) if visual_geometry else (
            cw, collision_geometry)
        inertia = None
        if "inertia" in physics:
            inertia = pw.number(physics, "inertia", positive=True)
        elif mass > 0:
            inertia = mass * geometry.shape(inertia_where, inertia_source, com).unit_inertia
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
            origin=pose, com=com,
            # For the builder's errors (_body_key):
            where=where, physics=physics,
            geometry_key=f"{cw.prefix if collision_geometry else vw.prefix}geometry."
                         f"{reference.key}",
            inertia_key=f"{inertia_where.prefix}geometry.{inertia_source.key}"))
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
        where = _Where(f"joint '{name}'", joint if isinstance(joint, dict) else None,
                       line=top.sub(joints, "joints").line_of(name))
        if not isinstance(name, str):
            raise where.error("(name)", f"must be a string, got the {type(name).__name__} "
                              f"{name!r} (write it in quotes)", TypeError)
        if not isinstance(joint, dict):
            raise where.error("(joint)", "must be a mapping", TypeError)
        where.known(joint, _JOINT_KEYS)
        kind = joint.get("type")
        if kind not in ("revolute", "prismatic"):
            raise where.error("type", f"must be 'revolute' or 'prismatic', got {kind!r}")
        ends = []
        for key in ("parent", "child"):
            if key not in joint:
                raise where.error(key, "is required")
            if not isinstance(joint[key], str):
                raise where.error(key, f"must be an entity's name, got {joint[key]!r}",
                                  TypeError)
            if joint[key] not in index:
                raise where.error(key, f"no entity is named {joint[key]!r}")
            ends.append(index[joint[key]])
        if ends[0] == ends[1]:
            raise where.error("child", f"must be another entity than the parent, got "
                              f"{joint['child']!r} twice")
        if bodies[ends[0]]["mass"] == 0 and bodies[ends[1]]["mass"] == 0:
            raise where.error("child", f"{joint['parent']!r} and {joint['child']!r} are both "
                              "static (mass 0): a joint needs one body that moves")
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
        keys = dict(_JOINT_ARGUMENT_KEYS, max_effort=effort_key or "max_effort")
        parsed_joints.append((kind, ends, specific, common, where, keys))

    # Everything parsed and checked: only now build the scene. The builder's own checks
    # (float32's range, the largest coordinate and speed ...) raise naming their argument,
    # told here as the entity or joint, the key it came from and its line.
    scene = Scene(gravity=tuple(gravity), n_worlds=n_worlds, arch=arch,
                  **({} if substeps is None else {"substeps": substeps}))
    first_body = []  # per entity, its (first) body index: a chain has a body per link
    for b in bodies:
        kwargs = {k: b[k] for k in ("angle", "velocity", "angular_velocity", "mass", "inertia",
                                    "elasticity", "static_friction", "dynamic_friction",
                                    "gravity_scale", "vel_damping", "name",
                                    "external_forces_enabled", "sensor")}
        position = np.asarray(b["position"], float)
        try:
            if b["chain"] is not None:
                kwargs.pop("inertia")
                first_body.append(scene.add_chain(position, b["chain"],
                                                  collides=b["collides"], **kwargs))
            else:
                first_body.append(scene.add_shape(position, b["shape"],
                                                  collides=b["collides"], **kwargs))
        except (ValueError, TypeError) as exc:
            raise _builder_error(b["where"], exc,
                                 lambda argument, b=b: _body_key(argument, b)) from None
    for kind, (parent, child), specific, common, where, keys in parsed_joints:
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
            raise _builder_error(where, exc, lambda argument, keys=keys: keys.get(
                argument, "(joint)")) from None
    for v in visuals:
        if isinstance(v["fill"], dict):  # an image: the viewer shows a plain colour instead
            v["fill"] = DEFAULT_COLOR
    try:
        walls = _add_boundary(scene, size, background, visuals) if boundary else None
    except (ValueError, TypeError) as exc:  # a size past the coordinates simulated
        raise scene_where.error("size", f"the boundary walls around it: {exc}") from None
    scene.meta = {"size": tuple(size), "background": background, "boundary": walls}
    scene.visuals = visuals
    return scene


__all__ = ["load_scene"]
