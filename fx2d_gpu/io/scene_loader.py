"""Load scenes written in Fx2D's YAML scene format (see docs/scene-files.md) as a Scene.

Poses are [x, y, theta] with theta in degrees; joint angles are in radians. Shapes land
where Fx2D's loader puts them (fx2d_geometry), and load_scene(boundary=True) keeps bodies
inside the scene rectangle as Fx2D does (fx2d_geometry.add_boundary).

A scene file's cost is bounded (yaml_reader: MAX_FILE_BYTES, MAX_NODES ...). Every error
about a file's content is a ValueError (TypeError for a wrong type) naming the entity or
joint, the key and the line: "entity 'box', key 'physics.mass' (line 7): ...", the scene
builder's included. A body's keywords are read by the builder's own rules (BODY_RULES), so
a value a file may hold is one Scene.add_shape takes, with the same message.

The load runs in named steps: the scene block (_scene_settings), each entity
(_read_entity), each joint (_read_joint), and only once all of it is read and checked, the
scene built (_add_bodies, _add_joints, _finish).
"""

import functools
import gc
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .. import shapes
from ..checks import as_vector2
from ..model.builder import BODY_RULES, check_mixing
from ..scene import Scene
from ..shapes import MAX_COORDINATE, rotation
from .fx2d_geometry import GeometryBlocks, add_boundary
from .yaml_reader import (
    DEFAULT_LIMITS,
    SceneFileLimits,
    Where,
    limits_summary,
    located_error,
    parse_yaml,
    read_source,
)

_ENTITY_KEYS = {"pose", "init_velocity", "physics", "visual", "collision"}
#: An entity's physics keys and the body keyword (BODY_RULES) each gives, in the order
#: they are read: vel_damping before Fx2D's older velocity_damping, which it overrides.
_PHYSICS_KEYWORDS = {
    "mass": "mass",
    "inertia": "inertia",
    "elasticity": "elasticity",
    "static_friction": "static_friction",
    "dynamic_friction": "dynamic_friction",
    "gravity_scale": "gravity_scale",
    "vel_damping": "vel_damping",
    "velocity_damping": "vel_damping",
    "external_forces_enabled": "external_forces_enabled",
    "sensor": "sensor",
}
#: ccd: read and checked, but always on here (speculative contacts, swept AABBs).
_PHYSICS_KEYS = {*_PHYSICS_KEYWORDS, "ccd"}
#: The file key of each body keyword an entity gives outside its physics block.
_POSE_KEYS = {
    "angle": "pose",
    "velocity": "init_velocity",
    "angular_velocity": "init_velocity",
    "name": "(name)",
    "mass": "physics.mass",
}
_VISUAL_KEYS = {"pose", "geometry", "texture", "border_color", "border_thickness"}
_COLLISION_KEYS = {"pose", "geometry"}
#: fx2d_gpu's top-level keys beside Fx2D's blocks: how pairs mix their bodies' materials,
#: each a Scene keyword of the same name (Fx2D has no such key: its rule is "min").
_MIXING_KEYS = ("friction_mixing", "restitution_mixing")
_JOINT_KEYS = {
    "type",
    "parent",
    "child",
    "anchor",
    "angle_min",
    "angle_max",
    "axis",
    "position_min",
    "position_max",
    "control_mode",
    "target",
    "pid",
    "max_effort",
    "max_torque",
    "max_force",
    "entities_collide",
}
#: The file key each keyword of Scene.add_revolute_joint / add_prismatic_joint comes from:
#: the builder names the argument first in its messages. Others: "(joint)".
_JOINT_ARGUMENT_KEYS = {
    "parent": "parent",
    "child": "child",
    "anchor": "anchor",
    "angle_min": "angle_min",
    "angle_max": "angle_max",
    "axis": "axis",
    "position_min": "position_min",
    "position_max": "position_max",
    "control_mode": "control_mode",
    "target": "target",
    "pid": "pid",
    "collide_connected": "entities_collide",
    "name": "(name)",
    "joint": "(name)",
}
DEFAULT_COLOR = (150, 150, 160, 255)
#: A colour component's range (Fx2D's RGBA: 0 to 255).
_COLOR_RANGE = (0, 255)


class _Settings(NamedTuple):
    """The scene block, read: size (2,) m, gravity (2,) m/s², background colour; where
    names the block in errors."""

    where: Where
    size: np.ndarray
    gravity: np.ndarray
    background: tuple


@dataclass
class _EntityBody:
    """An entity read and checked, as Scene.add_shape (add_chain for a chain) takes it."""

    name: str
    where: Where  # names the entity in errors
    position: np.ndarray  # (2,) the centre of mass in the world, m
    angle: float  # rad
    velocity: np.ndarray  # (2,) m/s
    angular_velocity: float  # rad/s
    keywords: dict  # the body keywords of its physics block, checked by BODY_RULES
    physics_keys: dict  # body keyword -> the physics key it came from
    com: np.ndarray  # (2,) the centre of mass in the entity frame, m (joint anchors')
    shape: shapes.Shape | None  # None for a chain
    chain: np.ndarray | None  # a chain's (n, 2) points in the entity frame, m
    collides: bool  # False: a visual geometry alone
    geometry_key: str  # the key of the geometry its shape comes from
    inertia_key: str  # ... and of the one its inertia comes from (Fx2D's: the visual)

    @property
    def mass(self) -> float:
        return self.keywords.get("mass", BODY_RULES["mass"].default)


class _ParsedJoint(NamedTuple):
    """A joint read and checked: its kind ("revolute" or "prismatic"), its entities'
    indices, its kind's keywords and the common ones of Scene.add_*_joint, the Where that
    names it and the file key of each argument."""

    kind: str
    ends: tuple
    specific: dict
    common: dict
    where: Where
    keys: dict


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
def load_scene(
    path_or_yaml_text,
    n_worlds: int = 1,
    arch: str = "auto",
    substeps=None,
    boundary: bool = True,
    solver: str = "xpbd",
    limits: SceneFileLimits | None = None,
):
    """A Scene from an Fx2D YAML scene file (a path) or YAML text.

    Entity names become body names and joint names joint names; entity i is body i (a chain
    entity takes one body per link). The file's `scene.size`, background and per-entity
    visual keys are kept on `scene.meta` and `scene.visuals` for the viewer.

    Args:
        path_or_yaml_text (str | pathlib.Path): a path to a .yml or .yaml file, or the YAML
            text itself (a string with a newline, or not ending in .yml / .yaml).
        n_worlds (int): independent copies of the scene (see Scene).
        arch (str): the Taichi backend (see Scene).
        substeps (int | None): substeps per step; None: the solver's default (Scene).
        boundary (bool): True (the default, as in Fx2D): bodies are kept inside the scene
            rectangle [0, int(W)] x [0, int(H)] by four unnamed static walls (elasticity 0,
            no friction) added after the entities' bodies, so `n_bodies` is the entity
            count + 4, and `scene.meta["boundary"]` holds the rectangle, the walls' body
            indices and thickness. False: no walls, and `scene.meta["boundary"]` is None.
        solver (str): "xpbd" (Fx2D's, the default) or "soft_step" (see Scene).
        limits (SceneFileLimits | None): what reading the file may cost (its bytes, YAML
            nodes, list lengths, nesting, values with aliases expanded); None: the
            defaults (yaml_reader's MAX_FILE_BYTES ...).

    Returns:
        scene (Scene): the new scene, ready to step.

    Raises:
        TypeError: path_or_yaml_text is neither a path nor a string, boundary not a bool, or
            a value in the file of the wrong type.
        FileNotFoundError: the file does not exist (an error that is also a ValueError).
        ValueError: the file cannot be read, is larger than the limits
            (MAX_FILE_BYTES, MAX_NODES, MAX_LIST_LENGTH, MAX_DEPTH, MAX_EXPANDED_VALUES, or
            `limits`'),
            is not valid YAML, or breaks the format: an unknown key, a missing or
            out-of-range value, a joint naming no entity ... The errors about the file's
            content name the entity or joint, the key and the line: "entity 'box', key
            'physics.mass' (line 7): ...". n_worlds, substeps, solver and arch raise as Scene's.
    """
    if not isinstance(boundary, bool):
        raise TypeError(f"boundary must be True or False, got {boundary!r}")
    if limits is None:
        limits = DEFAULT_LIMITS
    elif not isinstance(limits, SceneFileLimits):
        raise TypeError(f"limits must be a SceneFileLimits or None, got {type(limits).__name__}")
    try:
        text, base_dir = read_source(path_or_yaml_text, limits)
        return _load(text, base_dir, n_worlds, arch, substeps, boundary, solver, limits)
    except MemoryError:
        raise located_error(
            [], 1, f"this machine ran out of memory loading it ({limits_summary(limits)})"
        ) from None
    except RecursionError:
        raise located_error(
            [], 1, f"nested too deeply to load ({limits_summary(limits)})"
        ) from None


def _load(text, base_dir, n_worlds, arch, substeps, boundary, solver, limits):
    """load_scene's work on the file's text (base_dir: image paths are relative to it;
    limits: the SceneFileLimits it is parsed within)."""
    document = parse_yaml(text, limits)
    if not isinstance(document, dict):
        raise Where("scene file", line=1).error(
            "(document)",
            "must be a mapping with a 'scene' block, got "
            + ("an empty file" if document is None else type(document).__name__),
        )
    top = Where("scene file", document)
    top.known(document, {"scene", "entities", "joints", *_MIXING_KEYS})
    settings = _scene_settings(top, document, base_dir, boundary)
    mixing = _mixing_rules(top, document)
    entities = top.mapping(document, "entities")
    joints = top.mapping(document, "joints")
    bodies, visuals, geometry = [], [], GeometryBlocks()
    for name, entity in entities.items():
        where = Where(
            f"entity '{name}'",
            entity if isinstance(entity, dict) else None,
            line=top.sub(entities, "entities").line_of(name),
        )
        body, looks = _read_entity(where, name, entity, geometry, base_dir)
        bodies.append(body)
        visuals.extend(looks)
    index = {body.name: i for i, body in enumerate(bodies)}
    parsed_joints = [
        _read_joint(
            Where(
                f"joint '{name}'",
                joint if isinstance(joint, dict) else None,
                line=top.sub(joints, "joints").line_of(name),
            ),
            name,
            joint,
            index,
            bodies,
        )
        for name, joint in joints.items()
    ]
    # Everything parsed and checked: only now build the scene. The builder's own checks
    # (float32's range, the largest coordinate and speed ...) raise naming their argument,
    # told here as the entity or joint, the key it came from and its line.
    scene = Scene(
        gravity=tuple(settings.gravity),
        n_worlds=n_worlds,
        arch=arch,
        substeps=substeps,
        solver=solver,
        **mixing,
    )
    first_body = _add_bodies(scene, bodies)
    _add_joints(scene, parsed_joints, bodies, first_body)
    _finish(scene, settings, visuals, boundary)
    return scene


def _mixing_rules(top: Where, document) -> dict[str, str]:
    """The file's friction_mixing and restitution_mixing (top-level keys, an fx2d_gpu
    extension), checked by Scene's rule (builder.check_mixing): {Scene keyword: rule} of
    those it gives."""
    rules = {}
    for key in _MIXING_KEYS:
        if key in document:
            try:
                rules[key] = check_mixing(document[key], key)
            except (TypeError, ValueError) as exc:
                raise top.error(key, str(exc), type(exc)) from None
    return rules


def _scene_settings(top: Where, document, base_dir, boundary: bool) -> _Settings:
    """The file's scene block: its size, gravity and background, checked."""
    block = top.mapping(document, "scene", required=True)
    where = Where("scene", block, line=top.line_of("scene"))
    # Fx2D's loader ignores other keys here; a typo (graviti:) would then silently run with
    # the default, so they are refused as everywhere else in the file.
    where.known(block, {"size", "gravity", "background"})
    size = where.vector(block, "size", 2)
    if np.any(size <= 0):
        raise where.error("size", f"must be positive, got {size.tolist()}")
    if boundary and np.any(size < 1):
        raise where.error(
            "size",
            "Fx2D keeps bodies inside [0, int(width)] x [0, "
            f"int(height)], which is empty for {size.tolist()}: use a size "
            "of at least 1 m, or load_scene(..., boundary=False)",
        )
    gravity = where.vector(block, "gravity", 2, [0.0, 0.0])
    try:
        as_vector2(gravity, "gravity")  # Scene's rule, checked before it is made
    except (ValueError, TypeError) as exc:
        raise where.error("gravity", str(exc)) from None
    background = _color(where, block, "background", base_dir) or (255, 255, 255, 255)
    return _Settings(where, size, gravity, background)


def _check_entry(where: Where, name, entry, label: str, keys):
    """An entity's or joint's name (a string) and body (a mapping of known `keys`), else
    the error naming where they are (`label`: "(entity)" or "(joint)")."""
    if not isinstance(name, str):
        raise where.error(
            "(name)",
            f"must be a string, got the {type(name).__name__} {name!r} (write it in quotes)",
            TypeError,
        )
    if not isinstance(entry, dict):
        raise where.error(label, "must be a mapping", TypeError)
    where.known(entry, keys)


def _read_entity(where: Where, name, entity, geometry: GeometryBlocks, base_dir):
    """(the _EntityBody of entity `name`, its visuals entries: one, or one per chain link)."""
    _check_entry(where, name, entity, "(entity)", _ENTITY_KEYS)
    pose = where.vector(entity, "pose", 3, [0.0, 0.0, 0.0])
    velocity = where.vector(entity, "init_velocity", 3, [0.0, 0.0, 0.0])
    physics = where.mapping(entity, "physics")
    pw = where.sub(physics, "physics")
    pw.known(physics, _PHYSICS_KEYS)
    keywords, physics_keys = _physics(pw, physics)
    pw.boolean(physics, "ccd", False)
    visual, vw = _block(where, entity, "visual", _VISUAL_KEYS)
    collision, cw = _block(where, entity, "collision", _COLLISION_KEYS)
    visual_geometry = geometry.of(vw, visual) if "geometry" in visual else None
    collision_geometry = geometry.of(cw, collision) if "geometry" in collision else None
    reference = collision_geometry or visual_geometry
    if reference is None:
        raise where.error("visual.geometry", "an entity needs a visual or collision geometry")
    mass = keywords.get("mass", BODY_RULES["mass"].default)
    if mass > 0 and reference.kind in ("edge", "chain"):
        raise pw.error(
            "mass",
            f"must be 0: {'an' if reference.kind == 'edge' else 'a'} "
            f"{reference.kind} is static level geometry, got {mass}",
        )
    kinds = {g.kind for g in (visual_geometry, collision_geometry) if g is not None}
    if "chain" in kinds and len(kinds) > 1:
        raise where.error(
            "visual.geometry",
            "a chain entity's visual and collision "
            "geometry must both be chains (or one of them left out)",
        )
    com = reference.centroid  # body frame (the entity pose)
    # Fx2D takes the inertia from the visual geometry.
    inertia_where, inertia_source = (
        (vw, visual_geometry) if visual_geometry else (cw, collision_geometry)
    )
    if "inertia" not in keywords and mass > 0:
        keywords["inertia"] = mass * geometry.shape(inertia_where, inertia_source, com).unit_inertia
    chain = reference.data if reference.kind == "chain" else None
    shape_where = cw if collision_geometry else vw
    body = _EntityBody(
        name=name,
        where=where,
        position=_position(where, pose, com),
        angle=math.radians(pose[2]),
        velocity=velocity[:2],
        angular_velocity=math.radians(velocity[2]),
        keywords=keywords,
        physics_keys=physics_keys,
        com=com,
        shape=None if chain is not None else geometry.shape(shape_where, reference, com),
        chain=chain,
        collides=collision_geometry is not None,
        geometry_key=f"{shape_where.prefix}geometry.{reference.key}",
        inertia_key=f"{inertia_where.prefix}geometry.{inertia_source.key}",
    )
    look = _look(vw, visual, base_dir)
    if chain is not None:  # one entry per link, each drawn as itself
        return body, [dict(shape=None, **look) for _ in range(len(chain) - 1)]
    visual_shape = geometry.shape(vw, visual_geometry, com) if visual_geometry else None
    return body, [dict(shape=visual_shape, **look)]


def _physics(where: Where, physics) -> tuple[dict, dict]:
    """(body keyword -> value, body keyword -> physics key) of an entity's physics block:
    each value checked by the builder's own rule (BODY_RULES), its error naming the key."""
    keywords, keys = {}, {}
    for key, keyword in _PHYSICS_KEYWORDS.items():
        if key not in physics:
            continue
        # A plain dict for a mapping: the rule's message names the value's type.
        value = dict(physics[key]) if isinstance(physics[key], dict) else physics[key]
        try:
            value = BODY_RULES[keyword].check_one(value, keyword)
        except (TypeError, ValueError) as exc:
            raise where.error(key, str(exc), _kind(exc)) from None
        keywords.setdefault(keyword, value)
        keys.setdefault(keyword, key)
    return keywords, keys


def _block(where: Where, entity, key: str, allowed: set) -> tuple[dict, Where]:
    """An entity's visual or collision block (empty where it has none) and its Where."""
    block = where.mapping(entity, key)
    block_where = where.sub(block, key)
    block_where.known(block, allowed)
    return block, block_where


def _position(where: Where, pose, com) -> np.ndarray:
    """The world position (2,) m of an entity's centre of mass, `com` in its frame: within
    the coordinates simulated (Scene's rule), else an error naming its pose."""
    position = pose[:2] + rotation(math.radians(pose[2])) @ com
    try:
        as_vector2(position, "position", MAX_COORDINATE)
    except (ValueError, TypeError) as exc:
        raise where.error("pose", str(exc), _kind(exc)) from None
    return position


def _look(where: Where, visual, base_dir) -> dict:
    """How the viewer draws an entity: fill, border and border_thickness of its visual."""
    return dict(
        fill=_color(where, visual, "texture", base_dir),
        border=_color(where, visual, "border_color", base_dir),
        border_thickness=where.number(visual, "border_thickness", 0.0, minimum=0.0),
    )


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
    if (
        not isinstance(value, list)
        or len(value) not in (3, 4)
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        raise where.error(
            key, f"must be RGB or RGBA, {low}-{high}, or an image path, got {value!r}", TypeError
        )
    if not all(low <= v <= high for v in value):  # NaN is not, nor an int of any size
        raise where.error(
            key, f"must be RGB or RGBA components from {low} to {high}, got {value!r}"
        )
    return tuple(int(v) for v in value) + ((255,) if len(value) == 3 else ())


def _read_joint(where: Where, name, joint, index: dict, bodies: list) -> _ParsedJoint:
    """Joint `name`, read and checked (index: entity name -> its position in `bodies`)."""
    _check_entry(where, name, joint, "(joint)", _JOINT_KEYS)
    kind = joint.get("type")
    if kind not in ("revolute", "prismatic"):
        raise where.error("type", f"must be 'revolute' or 'prismatic', got {kind!r}")
    ends = _joint_ends(where, joint, index, bodies)
    mode = joint.get("control_mode")
    if mode not in (None, "position", "velocity", "effort"):
        raise where.error("control_mode", f"must be position, velocity or effort, got {mode!r}")
    effort_key = next((k for k in ("max_effort", "max_torque", "max_force") if k in joint), None)
    common = dict(
        control_mode=mode,
        target=where.number(joint, "target", 0.0),
        pid=tuple(where.vector(joint, "pid", 3, [1.0, 0.0, 0.0])),
        max_effort=where.number(joint, effort_key, positive=True) if effort_key else math.inf,
        collide_connected=where.boolean(joint, "entities_collide", False),
        name=name,
    )
    if kind == "revolute":
        specific = dict(
            anchor=where.vector(joint, "anchor", 2, [0.0, 0.0]),
            angle_min=where.number(joint, "angle_min", -math.pi),
            angle_max=where.number(joint, "angle_max", math.pi),
        )
    else:
        specific = dict(
            axis=where.vector(joint, "axis", 2, [1.0, 0.0]),
            position_min=where.number(joint, "position_min", -1000.0),
            position_max=where.number(joint, "position_max", 1000.0),
        )
    keys = dict(_JOINT_ARGUMENT_KEYS, max_effort=effort_key or "max_effort")
    return _ParsedJoint(kind, ends, specific, common, where, keys)


def _joint_ends(where: Where, joint, index: dict, bodies: list) -> tuple[int, int]:
    """(parent, child): the indices of the two entities a joint names, checked."""
    ends = []
    for key in ("parent", "child"):
        if key not in joint:
            raise where.error(key, "is required")
        if not isinstance(joint[key], str):
            raise where.error(key, f"must be an entity's name, got {joint[key]!r}", TypeError)
        if joint[key] not in index:
            raise where.error(key, f"no entity is named {joint[key]!r}")
        ends.append(index[joint[key]])
    if ends[0] == ends[1]:
        raise where.error(
            "child", f"must be another entity than the parent, got {joint['child']!r} twice"
        )
    if bodies[ends[0]].mass == 0 and bodies[ends[1]].mass == 0:
        raise where.error(
            "child",
            f"{joint['parent']!r} and {joint['child']!r} are both "
            "static (mass 0): a joint needs one body that moves",
        )
    return ends[0], ends[1]


def _add_bodies(scene: Scene, bodies: list) -> list[int]:
    """Adds each entity's body (a chain's: a body per link); returns, per entity, its
    (first) body's index. A builder error names the entity and the file key its value came
    from (_body_key)."""
    first_body = []
    for body in bodies:
        keywords = dict(
            body.keywords,
            name=body.name,
            angle=body.angle,
            velocity=body.velocity,
            angular_velocity=body.angular_velocity,
        )
        try:
            if body.chain is not None:
                keywords.pop("inertia", None)  # a chain is static: it has none
                first_body.append(
                    scene.add_chain(body.position, body.chain, collides=body.collides, **keywords)
                )
            else:
                first_body.append(
                    scene.add_shape(body.position, body.shape, collides=body.collides, **keywords)
                )
        except (ValueError, TypeError) as exc:
            raise body.where.error(_body_key(exc, body), str(exc), _kind(exc)) from None
    return first_body


def _body_key(exc: Exception, body: _EntityBody) -> str:
    """The file key of the body keyword the builder's error `exc` blames (its
    body_keyword: see builder.blamed_on); the geometry's key for an error about the shape."""
    keyword = getattr(exc, "body_keyword", None)
    if keyword in body.physics_keys:
        return f"physics.{body.physics_keys[keyword]}"
    if keyword == "inertia":  # not in the file: mass x its visual geometry's
        return "physics.mass" if "mass" in body.physics_keys else body.inertia_key
    return _POSE_KEYS.get(keyword, body.geometry_key)


def _add_joints(scene: Scene, joints: list, bodies: list, first_body: list):
    """Adds the parsed joints; a builder error names the joint and the file key."""
    for kind, (parent, child), specific, common, where, keys in joints:
        try:
            if kind == "revolute":
                # The anchor is in the parent's entity frame; the body frame is at the COM.
                specific["anchor"] = specific["anchor"] - bodies[parent].com
                scene.add_revolute_joint(
                    first_body[parent], first_body[child], **specific, **common
                )
            else:
                scene.add_prismatic_joint(
                    first_body[parent], first_body[child], **specific, **common
                )
        except (ValueError, TypeError) as exc:
            # The builder names the argument first in its messages ("angle_min must ...").
            argument = re.match(r"[A-Za-z_]*", str(exc)).group()
            raise where.error(keys.get(argument, "(joint)"), str(exc), _kind(exc)) from None


def _finish(scene: Scene, settings: _Settings, visuals: list, boundary: bool):
    """Adds the boundary walls (with `boundary`) and gives the scene its meta and visuals."""
    for visual in visuals:
        if isinstance(visual["fill"], dict):  # an image: the viewer shows a plain colour
            visual["fill"] = DEFAULT_COLOR
    try:
        walls = (
            add_boundary(scene, settings.size, settings.background, visuals) if boundary else None
        )
    except (ValueError, TypeError) as exc:  # a size past the coordinates simulated
        raise settings.where.error("size", f"the boundary walls around it: {exc}") from None
    scene.meta = {
        "size": tuple(settings.size),
        "background": settings.background,
        "boundary": walls,
    }
    scene.visuals = visuals


def _kind(exc: Exception) -> type:
    """The class of error the loader raises for `exc`: TypeError or ValueError."""
    return TypeError if isinstance(exc, TypeError) else ValueError


__all__ = ["load_scene"]
