"""A hardened YAML reader for scene files: bounded cost, and errors that say where.

A scene file's cost is bounded: its size, YAML nodes, list lengths, nesting and polygon
vertices are checked before or while it is parsed (MAX_FILE_BYTES ... below), its aliases'
expansion before anything is built from it. Its mappings come back as dicts that remember
each key's line, and Where names a value's place in every error about it: "entity 'box',
key 'physics.mass' (line 7): ...".
"""

import errno
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from ..shapes import MAX_POLYGON_VERTICES

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
# A polygon's vertices (3 to MAX_POLYGON_VERTICES) are refused at the one too many,
# as the list is parsed.


@dataclass(frozen=True)
class SceneFileLimits:
    """What one read of a scene file may cost (load_scene(limits=...)); the defaults are the
    constants above, whose docstrings say why. A caller that reads files it trusts less (or
    a test that reaches a limit with a small file) passes tighter ones.

    Attributes:
        max_file_bytes: largest file or YAML text, bytes (MAX_FILE_BYTES).
        max_nodes: most YAML nodes (MAX_NODES).
        max_list_length: most items in one list (MAX_LIST_LENGTH).
        max_depth: deepest nesting of lists and mappings (MAX_DEPTH).
        max_expanded_values: most values with aliases expanded (MAX_EXPANDED_VALUES).
    """

    max_file_bytes: int = MAX_FILE_BYTES
    max_nodes: int = MAX_NODES
    max_list_length: int = MAX_LIST_LENGTH
    max_depth: int = MAX_DEPTH
    max_expanded_values: int = MAX_EXPANDED_VALUES

    def __post_init__(self):
        for name, value in vars(self).items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"SceneFileLimits.{name} must be an int >= 1, got {value!r}")


#: The limits a read has unless it asks for others.
DEFAULT_LIMITS = SceneFileLimits()


class YamlMapping(dict):
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

    def __init__(self, text, limits: SceneFileLimits = DEFAULT_LIMITS):
        super().__init__(text)
        self.limits = limits
        self.nodes = 0  # composed so far
        #: Per node being composed, outermost first, its index in its parent: None (the
        #: root, or a mapping's key), the key node (a mapping's value) or an int (a list's).
        self.path = []

    def descend_resolver(self, parent, index):
        """The limits, checked as the file is parsed: PyYAML's composer (its C one too) calls
        this before it composes each node (aliases excepted), with the node's parent and its
        index there."""
        self.nodes = nodes = self.nodes + 1
        path, limits = self.path, self.limits
        if (
            nodes > limits.max_nodes
            or len(path) >= limits.max_depth
            or index.__class__ is int
            and (
                index >= limits.max_list_length
                or (index == MAX_POLYGON_VERTICES and self._in_polygon())
            )
        ):
            raise self._limit_error(parent, index)
        path.append(index)

    def ascend_resolver(self):
        self.path.pop()

    def _in_polygon(self) -> bool:
        """Whether the list being composed is a geometry block's polygon."""
        path = self.path
        return (
            len(path) >= 2
            and isinstance(path[-1], yaml.ScalarNode)
            and path[-1].value == "polygon"
            and isinstance(path[-2], yaml.ScalarNode)
            and path[-2].value == "geometry"
        )

    def _limit_error(self, parent, index) -> ValueError:
        """The error for the limit that the `index`th node of `parent` breaks."""
        nodes, depth = self.limits.max_nodes, self.limits.max_depth
        if self.nodes > nodes or len(self.path) >= depth:  # named where it is
            message = (
                f"the file holds more than {nodes:,} YAML nodes (values, keys, "
                f"lists and mappings); a scene file may hold at most {nodes:,}"
                if self.nodes > nodes
                else f"values nested more than {depth} deep; a scene file may nest "
                f"them at most {depth} deep"
            )
            return located_error(
                _labels(self.path + [index]), _current_line(parent, index), message
            )
        # A list too long, named as a whole: on its key's line where it is a mapping's value.
        key = self.path[-1] if isinstance(self.path[-1], yaml.Node) else parent
        length = self.limits.max_list_length
        message = (
            f"a list of more than {length:,} items; at most {length:,}"
            if index >= length
            else f"a polygon of more than {MAX_POLYGON_VERTICES} vertices; it may "
            f"have 3 to {MAX_POLYGON_VERTICES}"
        )
        return located_error(_labels(self.path), key.start_mark.line + 1, message)

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
    return [
        index if isinstance(index, int) else _label(index) for index in path if index is not None
    ]


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


def located_error(labels, line, message, kind=ValueError):
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
    it (mappings as YamlMapping with their lines, repeated keys refused), without its per-node
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
        if (
            tag != _MAP_TAG
            or not isinstance(node, yaml.MappingNode)
            or any(k.tag == _MERGE_TAG for k, _ in node.value)
        ):
            value = built[key] = pyyaml(node)
            return value
        mapping = built[key] = YamlMapping()
        mapping.line = node.start_mark.line + 1
        mapping.key_lines, seen = {}, {}
        for key_node, value_node in node.value:
            name = build(key_node)
            try:
                hash(name)
            except TypeError:
                raise _NodeError(
                    key_node, "a key must be a plain value, not a list or a mapping", kind=TypeError
                ) from None
            _check_repeated(seen, name, key_node)
            seen[name] = key_node.start_mark.line + 1
            mapping[name] = build(value_node)
            mapping.key_lines[name] = key_node.start_mark.line + 1
        return mapping

    try:
        return build(root)
    except _NodeError as exc:
        raise located_error(_labels_to(root, exc.node), exc.line, exc.message, exc.kind) from None
    except RecursionError:  # MAX_DEPTH and _check_size stop such files before
        raise located_error(
            [],
            1,
            "values nested too deeply to build (past Python's recursion "
            f"limit); a scene file may nest them at most {loader.limits.max_depth} deep",
        ) from None


def _check_repeated(lines: dict, key, key_node):
    """PyYAML keeps the last of two equal keys; two entities named alike would silently
    become one body, so a repeated key is an error."""
    if key in lines:
        raise _NodeError(
            key_node,
            f"key {key!r} appears twice in one mapping (lines "
            f"{lines[key]} and {key_node.start_mark.line + 1})",
        )


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
            raise located_error(
                _labels_to(root, node),
                node.start_mark.line + 1,
                "an alias refers to a node that contains it (an endless value)",
            )
        on_path.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)
    return sizes, depths


def _check_size(root, limits: SceneFileLimits):
    """For a file with aliases, before anything is built from it: ValueError naming the
    entity and key where a list (aliases as items) passes limits.max_list_length or, aliases
    expanded, the file holds more than limits.max_expanded_values values or nests them
    deeper than limits.max_depth."""
    length, values, depth = limits.max_list_length, limits.max_expanded_values, limits.max_depth
    paths, queue = {id(root): []}, [root]  # each distinct node, with the first path to it
    for node in queue:
        if isinstance(node, yaml.SequenceNode) and len(node.value) > length:
            raise located_error(
                paths[id(node)],
                node.start_mark.line + 1,
                f"a list of {len(node.value):,} items; at most {length:,}",
            )
        for label, child in _labelled_children(node):
            if id(child) not in paths:
                paths[id(child)] = paths[id(node)] + [label]
                queue.append(child)
    sizes, depths = _graph_sizes(root)
    if sizes[id(root)] > values:
        node, path, line = _down(root, lambda value, level: sizes[id(value)] > values)
        raise located_error(
            path,
            line,
            f"{sizes[id(node)]:,} values once its "
            f"aliases are expanded; a scene file may hold at most "
            f"{values:,}",
        )
    if depths[id(root)] > depth:  # a level's nodes, plus the depth below each
        node, path, line = _down(root, lambda value, level: level + depths[id(value)] > depth)
        raise located_error(
            path,
            line,
            f"values nested {depths[id(root)]:,} "
            f"deep once its aliases are expanded; a scene file may nest them at "
            f"most {depth} deep",
        )


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


def parse_yaml(text: str, limits: SceneFileLimits = DEFAULT_LIMITS):
    """The YAML document of `text`, within `limits`. With aliases, its expanded size is
    checked before anything is built from it; without, the nodes counted as it was parsed
    already bound it."""
    loader = None
    try:
        loader = _Loader(text, limits)  # PyYAML's own reader checks every character here
        node = loader.get_single_node()
        if node is None:
            return None
        if "*" in text and _ALIAS.search(text):  # the regex alone: 0.7 s on 19 MB
            _check_size(node, limits)
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
        before = (
            text.encode("utf-8")[: exc.position].count(b"\n")
            if _LIBYAML
            else text.count("\n", 0, exc.position)
        )
        line = before + 1
    else:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark else 1
    return located_error(_labels(path), line, f"not valid YAML: {exc}")


def _construct_mapping(loader, node):
    # PyYAML's route (mappings with merge keys, or under an explicit tag).
    lines = {}
    for key_node, _ in node.value:
        key = getattr(key_node, "value", None)
        _check_repeated(lines, key, key_node)
        lines[key] = key_node.start_mark.line + 1
    mapping = YamlMapping(loader.construct_mapping(node, deep=True))
    mapping.line = node.start_mark.line + 1
    mapping.key_lines = {
        loader.construct_object(k, deep=True): k.start_mark.line + 1 for k, _ in node.value
    }  # built already: cached
    return mapping


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


class Where:
    """Builds error messages that name where in the file a value came from."""

    def __init__(self, what: str, node=None, prefix: str = "", line=None):
        """what: the entity or joint ("entity 'box'"); node: the mapping whose keys are
        checked (for line numbers); prefix: its path inside the entity ("physics."); line:
        the line named for a key the mapping does not have (default: the mapping's)."""
        self.what, self.node, self.prefix = what, node, prefix
        self.line = line if line is not None else getattr(node, "line", None)

    def sub(self, mapping, key: str) -> "Where":
        """The Where of `mapping`, the value of this one's `key` ("physics")."""
        return Where(self.what, mapping, f"{self.prefix}{key}.", self.line_of(key))

    def line_of(self, key):
        """The line of `key`: a key of this mapping, or a dotted path below it
        ("geometry.polygon": of its innermost part the file has); else the fallback line."""
        node, line = self.node, None
        if isinstance(node, YamlMapping) and key in node.key_lines:
            return node.key_lines[key]
        for part in key.split(".") if isinstance(key, str) else ():
            if not isinstance(node, YamlMapping) or part not in node.key_lines:
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
            raise self.error(
                key, f"must be finite, got an integer of {len(str(value))} digits"
            ) from None
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
        if (
            not isinstance(value, list)
            or len(value) != size
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
        ):
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
            return YamlMapping()
        value = parent[key]
        if not isinstance(value, dict):
            raise self.error(key, f"must be a mapping, got {value!r}", TypeError)
        return value

    def known(self, mapping, allowed):
        for key in mapping:
            if key not in allowed:
                raise self.error(key, f"unknown key (expected one of {sorted(allowed)})")


def _too_big(what: str, size: int, limit: int) -> ValueError:
    return ValueError(
        f"{what}: {size:,} bytes; a scene file may have at most {limit:,} ({limit / 2**20:g} MiB)"
    )


class SceneFileNotFoundError(FileNotFoundError, ValueError):
    """A scene file that does not exist: a FileNotFoundError, as open() raises (errno
    ENOENT, filename the path), and still a ValueError, as load_scene raised for it before
    (so existing handlers keep working)."""

    def __str__(self) -> str:
        return f"scene file {self.filename!r} does not exist"


def read_source(source, limits: SceneFileLimits = DEFAULT_LIMITS) -> tuple[str, Path | None]:
    """(the YAML text, the folder image paths are relative to) of a path or of the text
    itself, no more than limits.max_file_bytes read: ValueError past it, before parsing."""
    limit = limits.max_file_bytes
    if isinstance(source, Path) or (
        isinstance(source, str)
        and "\n" not in source
        and source.strip().endswith((".yml", ".yaml"))
    ):
        path = Path(source)
        if not path.exists():
            raise SceneFileNotFoundError(errno.ENOENT, "scene file does not exist", str(path))
        what = f"scene file {str(path)!r}"
        try:
            size = path.stat().st_size
            if size > limit:
                raise _too_big(what, size, limit)
            with path.open("rb") as file:  # a device or a growing file: no more than this
                data = file.read(limit + 1)
        except OSError as exc:
            raise ValueError(f"{what} cannot be read: {exc.strerror or exc}") from None
        if len(data) > limit:
            raise _too_big(what, len(data), limit)
        try:
            return data.decode("utf-8-sig"), path.parent
        except UnicodeDecodeError as exc:
            raise located_error(
                [],
                data.count(b"\n", 0, exc.start) + 1,
                f"not UTF-8 text ({exc.reason} at byte {exc.start:,})",
            ) from None
    if not isinstance(source, str):
        raise TypeError(
            f"path_or_yaml_text must be a path or YAML text, got {type(source).__name__}"
        )
    if len(source) > limit:  # at least as many bytes as characters
        raise _too_big("YAML text", len(source), limit)
    if not source.isascii():
        try:
            size = len(source.encode("utf-8"))
        except UnicodeEncodeError as exc:  # a lone surrogate
            raise located_error(
                [],
                source.count("\n", 0, exc.start) + 1,
                f"not text UTF-8 can hold ({exc.reason} at character {exc.start:,})",
            ) from None
        if size > limit:
            raise _too_big("YAML text", size, limit)
    return source, None


def limits_summary(limits: SceneFileLimits = DEFAULT_LIMITS) -> str:
    """`limits`, in words, for an error that ran out of memory or recursion."""
    return (
        f"a scene file may have at most {limits.max_file_bytes:,} bytes, "
        f"{limits.max_nodes:,} YAML nodes, {limits.max_expanded_values:,} values with its "
        f"aliases expanded, nested {limits.max_depth} deep"
    )
