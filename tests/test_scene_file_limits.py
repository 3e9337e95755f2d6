"""Scene files of bounded cost, and errors that say where (issue 42, items 3 and 6).

Limits (fx2d_gpu.io.yaml_reader: MAX_FILE_BYTES, MAX_NODES, MAX_LIST_LENGTH, MAX_DEPTH,
MAX_EXPANDED_VALUES, and a polygon's 3 to 8 vertices) are checked before or while the file is
parsed, whatever its aliases: a file past them is refused at once, not after gigabytes. Every
error about a file's content is a ValueError (TypeError for a value of the wrong type) naming
the entity or joint, the key and the line: `entity 'b', key 'physics.mass' (line 4): ...`,
the builder's own checks (float32's range, the largest coordinate ...) included.
"""

import random
import re
import subprocess
import sys
import tracemalloc

import pytest

import fx2d_gpu as fx
from fx2d_gpu.io import scene_loader, yaml_reader
from fx2d_gpu.io.yaml_reader import SceneFileLimits

V, T = ValueError, TypeError
HEAD = "scene:\n  size: [20, 20]\nentities:\n"  # entities from line 4
BALL = "collision: {geometry: {circle: 0.5}}"


def entity(body: str, name: str = "b") -> str:
    """A file whose one entity (line 4) is the flow mapping {body}."""
    return HEAD + f"  {name}: {{{body}}}\n"


def shape(geometry: str, block: str = "collision", extra: str = "") -> str:
    return entity(f"pose: [5, 5, 0], {extra}{block}: {{geometry: {{{geometry}}}}}")


#: a static, b dynamic, s static (lines 4 to 6); joints from line 8.
JOINTED = (
    HEAD + "  a: {pose: [5, 5, 0], physics: {mass: 0}, " + BALL + "}\n"
    "  b: {pose: [6, 5, 0], " + BALL + "}\n"
    "  s: {pose: [9, 5, 0], physics: {mass: 0}, " + BALL + "}\njoints:\n"
)
REVOLUTE = "type: revolute, parent: a, child: b"
PRISMATIC = "type: prismatic, parent: a, child: b"


def joint(body: str, name: str = "j") -> str:
    """A file whose one joint (line 8) is the flow mapping {body}."""
    return JOINTED + f"  {name}: {{{body}}}\n"


BLOCK = """scene:
  size: [20, 20]
entities:
  b:
    pose: [5, 3, 0]
    physics:
      mass: {mass}
    collision:
      geometry:
        polygon:
{vertices}
"""
SQUARE = "\n".join(f"          - [{x}, {y}]" for x, y in ((0, 0), (1, 0), (1, 1), (0, 1)))
NONAGON = "\n".join(f"          - [{i}, {i * i}]" for i in range(9))
ANCHORED = (
    HEAD + "  a: {pose: [5, 5, 0], collision: &c {geometry: {polygon: &p "
    "[[0, 0], [1, 0], [0, 1]]}}}\n"
)
NODES = HEAD + "".join(f"  b{i}: {{{BALL}}}\n" for i in range(6))  # 8 nodes an entity

#: (id, broken YAML, error type, entity or joint, key, line[, limits to set]). The message
#: must contain f"{what}, key '{key}' (line {line}): ".
#: A CORPUS case's limit that is no constant of yaml_reader: the frames of recursion left to
#: the load (sys.setrecursionlimit, from the test's own depth).
RECURSION_HEADROOM = "recursion headroom"

CORPUS = [
    # The scene file and its scene: block.
    (
        "unknown top key",
        "scene: {size: [20, 20]}\nentitis:\n  b: {" + BALL + "}\n",
        V,
        "scene file",
        "entitis",
        2,
    ),
    ("no scene block", "entities:\n  b: {" + BALL + "}\n", V, "scene file", "scene", 1),
    ("scene a list", "scene: [20, 20]\n", T, "scene file", "scene", 1),
    (
        "scene unknown key",
        "scene:\n  size: [20, 20]\n  graviti: [0, -10]\n",
        V,
        "scene",
        "graviti",
        3,
    ),
    ("no size", "scene:\n  gravity: [0, -10]\n", V, "scene", "size", 1),
    ("size negative", "scene:\n  size: [-4, 4]\n", V, "scene", "size", 2),
    ("size below 1 m", "scene:\n  size: [0.5, 4]\n", V, "scene", "size", 2),
    ("size text", "scene:\n  size: big\n", T, "scene", "size", 2),
    ("size past the coordinates", "scene:\n  size: [1.0e+16, 10]\n", V, "scene", "size", 2),
    (
        "gravity past float32",
        "scene:\n  size: [20, 20]\n  gravity: [0, -1.0e+39]\n",
        V,
        "scene",
        "gravity",
        3,
    ),
    ("gravity nan", "scene:\n  size: [20, 20]\n  gravity: [.nan, 0]\n", V, "scene", "gravity", 3),
    (
        "background 300",
        "scene:\n  size: [20, 20]\n  background: [300, 0, 0]\n",
        V,
        "scene",
        "background",
        3,
    ),
    (
        "background bools",
        "scene:\n  size: [20, 20]\n  background: [true, 0, 0]\n",
        T,
        "scene",
        "background",
        3,
    ),
    ("document a list", "- scene\n- entities\n", V, "scene file", "(document)", 1),
    ("empty document", "", V, "scene file", "(document)", 1),
    (
        "entities a list",
        "scene: {size: [20, 20]}\nentities: [a, b]\n",
        T,
        "scene file",
        "entities",
        2,
    ),
    ("joints a list", "scene: {size: [20, 20]}\njoints: [a, b]\n", T, "scene file", "joints", 2),
    # YAML itself: syntax, aliases, repeated keys, scalars PyYAML cannot read.
    ("unclosed list", HEAD + "  b: {pose: [5, 3, 0}\n", V, "entity 'b'", "pose", 4),
    ("undefined alias", entity("pose: *nowhere, " + BALL), V, "entity 'b'", "(entity)", 4),
    (
        "two documents",
        "scene: {size: [20, 20]}\n---\nscene: {size: [5, 5]}\n",
        V,
        "scene file",
        "(document)",
        2,
    ),
    (
        "repeated key",
        BLOCK.replace("      mass: {mass}", "      mass: 1\n      mass: 2").format(vertices=SQUARE),
        V,
        "entity 'b'",
        "physics.mass",
        8,
    ),
    (
        "repeated entity",
        HEAD + "  a: {" + BALL + "}\n  a: {" + BALL + "}\n",
        V,
        "entity 'a'",
        "(entity)",
        5,
    ),
    (
        "repeated merged key",
        entity("physics: {<<: {mass: 1}, mass: 2, mass: 3}, " + BALL),
        V,
        "entity 'b'",
        "physics.mass",
        4,
    ),
    ("list as a key", entity("[1, 2]: 3, " + BALL), T, "entity 'b'", "?", 4),
    (
        "bad date",
        entity("physics: {mass: 2020-13-45}, " + BALL),
        V,
        "entity 'b'",
        "physics.mass",
        4,
    ),
    (
        "python tag",
        entity("physics: {mass: !!python/name:os.system ''}, " + BALL),
        V,
        "entity 'b'",
        "physics.mass",
        4,
    ),
    (
        "int tag on text",
        entity("physics: {mass: !!int 'heavy'}, " + BALL),
        V,
        "entity 'b'",
        "physics.mass",
        4,
    ),
    ("control character", HEAD + "  b: {pose: [1, \x07 2, 0]}\n", V, "scene file", "(document)", 4),
    (
        "5000 digits",
        entity("physics: {mass: " + "1" * 5000 + "}, " + BALL),
        V,
        "entity 'b'",
        "physics.mass",
        4,
    ),
    # Entities.
    ("entity named 1", HEAD + "  1: {" + BALL + "}\n", T, "entity '1'", "(name)", 4),
    ("entity named null", HEAD + "  ~: {" + BALL + "}\n", T, "entity 'None'", "(name)", 4),
    ("entity a number", HEAD + "  b: 5\n", T, "entity 'b'", "(entity)", 4),
    ("unknown entity key", entity("pos: [1, 2, 0], " + BALL), V, "entity 'b'", "pos", 4),
    ("pose of 2", entity("pose: [1, 2], " + BALL), T, "entity 'b'", "pose", 4),
    ("pose nan", entity("pose: [.nan, 2, 0], " + BALL), V, "entity 'b'", "pose", 4),
    ("pose x 1e16", entity("pose: [1.0e+16, 3, 0], " + BALL), V, "entity 'b'", "pose", 4),
    ("pose angle 1e20", entity("pose: [1, 3, 1.0e+20], " + BALL), V, "entity 'b'", "pose", 4),
    (
        "velocity 1e11",
        entity("init_velocity: [1.0e+11, 0, 0], " + BALL),
        V,
        "entity 'b'",
        "init_velocity",
        4,
    ),
    (
        "spin 1e13",
        entity("init_velocity: [0, 0, 1.0e+13], " + BALL),
        V,
        "entity 'b'",
        "init_velocity",
        4,
    ),
    ("velocity text", entity("init_velocity: fast, " + BALL), T, "entity 'b'", "init_velocity", 4),
    ("physics a number", entity("physics: 5, " + BALL), T, "entity 'b'", "physics", 4),
    (
        "unknown physics key",
        entity("physics: {masss: 1}, " + BALL),
        V,
        "entity 'b'",
        "physics.masss",
        4,
    ),
    ("mass text", entity("physics: {mass: heavy}, " + BALL), T, "entity 'b'", "physics.mass", 4),
    ("mass negative", BLOCK.format(mass=-1, vertices=SQUARE), V, "entity 'b'", "physics.mass", 7),
    (
        "mass 1e300",
        BLOCK.format(mass="1.0e+300", vertices=SQUARE),
        V,
        "entity 'b'",
        "physics.mass",
        7,
    ),
    (
        "mass of 400 digits",
        BLOCK.format(mass="1" + "0" * 400, vertices=SQUARE),
        V,
        "entity 'b'",
        "physics.mass",
        7,
    ),
    (
        "pose of 400 digits",
        entity("pose: [1" + "0" * 400 + ", 0, 0], " + BALL),
        V,
        "entity 'b'",
        "pose",
        4,
    ),
    (
        "polygon of 400 digits",
        shape("polygon: [[0, 0], [1" + "0" * 400 + ", 0], [0, 1]]"),
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        4,
    ),
    (
        "mass 1e-20",
        BLOCK.format(mass="1.0e-20", vertices=SQUARE),
        V,
        "entity 'b'",
        "physics.mass",
        7,
    ),
    ("inertia 0", entity("physics: {inertia: 0}, " + BALL), V, "entity 'b'", "physics.inertia", 4),
    (
        "inertia past float32",
        entity("physics: {inertia: 1.0e+39}, " + BALL),
        V,
        "entity 'b'",
        "physics.inertia",
        4,
    ),
    (
        "inertia from mass past float32",
        entity("physics: {mass: 1.0e+30}, collision: {geometry: {circle: 1.0e+5}}"),
        V,
        "entity 'b'",
        "physics.mass",
        4,
    ),
    (
        "elasticity negative",
        entity("physics: {elasticity: -1}, " + BALL),
        V,
        "entity 'b'",
        "physics.elasticity",
        4,
    ),
    (
        "elasticity past float32",
        entity("physics: {elasticity: 1.0e+39}, " + BALL),
        V,
        "entity 'b'",
        "physics.elasticity",
        4,
    ),
    (
        "static friction past float32",
        entity("physics: {static_friction: 1.0e+39}, " + BALL),
        V,
        "entity 'b'",
        "physics.static_friction",
        4,
    ),
    (
        "dynamic friction text",
        entity("physics: {dynamic_friction: x}, " + BALL),
        T,
        "entity 'b'",
        "physics.dynamic_friction",
        4,
    ),
    (
        "gravity scale past float32",
        entity("physics: {gravity_scale: 1.0e+39}, " + BALL),
        V,
        "entity 'b'",
        "physics.gravity_scale",
        4,
    ),
    (
        "vel_damping negative",
        entity("physics: {vel_damping: -1}, " + BALL),
        V,
        "entity 'b'",
        "physics.vel_damping",
        4,
    ),
    (
        "velocity_damping past float32",
        entity("physics: {velocity_damping: 1.0e+39}, " + BALL),
        V,
        "entity 'b'",
        "physics.velocity_damping",
        4,
    ),
    (
        "external forces 1",
        entity("physics: {external_forces_enabled: 1}, " + BALL),
        T,
        "entity 'b'",
        "physics.external_forces_enabled",
        4,
    ),
    ("sensor 2", entity("physics: {sensor: 2}, " + BALL), T, "entity 'b'", "physics.sensor", 4),
    ("ccd 3", entity("physics: {ccd: 3}, " + BALL), T, "entity 'b'", "physics.ccd", 4),
    # Geometry.
    ("no geometry", entity("pose: [1, 1, 0]"), V, "entity 'b'", "visual.geometry", 4),
    ("visual a number", entity("visual: 5, " + BALL), T, "entity 'b'", "visual", 4),
    (
        "unknown visual key",
        entity("visual: {colour: [1, 2, 3]}, " + BALL),
        V,
        "entity 'b'",
        "visual.colour",
        4,
    ),
    (
        "texture under collision",
        entity("collision: {geometry: {circle: 1}, texture: [1, 2, 3]}"),
        V,
        "entity 'b'",
        "collision.texture",
        4,
    ),
    (
        "geometry a number",
        entity("collision: {geometry: 5}"),
        T,
        "entity 'b'",
        "collision.geometry",
        4,
    ),
    ("unknown geometry", shape("blob: 3"), V, "entity 'b'", "collision.geometry.blob", 4),
    (
        "empty geometry",
        entity("collision: {geometry: {}}"),
        V,
        "entity 'b'",
        "collision.geometry",
        4,
    ),
    ("circle negative", shape("circle: -1"), V, "entity 'b'", "collision.geometry.circle", 4),
    ("circle 1e-9", shape("circle: 1.0e-9"), V, "entity 'b'", "collision.geometry.circle", 4),
    ("circle 1e16", shape("circle: 1.0e+16"), V, "entity 'b'", "collision.geometry.circle", 4),
    ("circle text", shape("circle: big"), T, "entity 'b'", "collision.geometry.circle", 4),
    ("capsule of 1", shape("capsule: [1.0]"), T, "entity 'b'", "collision.geometry.capsule", 4),
    (
        "capsule negative",
        shape("capsule: [-1, 0.5]"),
        V,
        "entity 'b'",
        "collision.geometry.capsule",
        4,
    ),
    (
        "capsule no radius",
        shape("capsule: {length: 1}"),
        V,
        "entity 'b'",
        "collision.geometry.capsule.radius",
        4,
    ),
    (
        "capsule unknown key",
        shape("capsule: {length: 1, radius: 0.2, width: 3}"),
        V,
        "entity 'b'",
        "collision.geometry.capsule.width",
        4,
    ),
    (
        "capsule radius 1e-9",
        shape("capsule: [1, 1.0e-9]"),
        V,
        "entity 'b'",
        "collision.geometry.capsule",
        4,
    ),
    (
        "rectangle negative",
        shape("rectangle: [1, -1]"),
        V,
        "entity 'b'",
        "collision.geometry.rectangle",
        4,
    ),
    (
        "rectangle 1e-9",
        shape("rectangle: [1.0e-9, 1]"),
        V,
        "entity 'b'",
        "collision.geometry.rectangle",
        4,
    ),
    (
        "rounding negative",
        shape("rectangle: [1, 1], radius: -0.1"),
        V,
        "entity 'b'",
        "collision.geometry.radius",
        4,
    ),
    (
        "polygon of 2",
        shape("polygon: [[0, 0], [1, 0]]"),
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        4,
    ),
    (
        "polygon of 9",
        BLOCK.format(mass=1, vertices=NONAGON),
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        10,
    ),
    (
        "polygon of 9 (flow)",
        shape("polygon: [" + ", ".join(f"[{i}, {i * i}]" for i in range(9)) + "]"),
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        4,
    ),
    (
        "polygon text vertex",
        shape("polygon: [[0, 0], [1, x], [0, 1]]"),
        T,
        "entity 'b'",
        "collision.geometry.polygon",
        4,
    ),
    (
        "polygon nan",
        shape("polygon: [[0, 0], [1, .nan], [0, 1]]"),
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        4,
    ),
    (
        "rounded polygon collinear",
        shape("polygon: [[0, 0], [1, 0], [2, 0], [1, 1]], radius: 0.1"),
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        4,
    ),
    (
        "aliased polygon of 9",
        HEAD + "  a: {collision: {geometry: {polygon: [&v [0, 0], [1, 0], "
        "[0, 1]]}}}\n  b: {collision: {geometry: {polygon: [" + ", ".join(["*v"] * 9) + "]}}}\n",
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        5,
    ),
    (
        "polygon collinear",
        shape("polygon: [[0, 0], [1, 0], [2, 0], [1, 1]]"),
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        4,
    ),
    (
        "visual polygon collinear",
        shape("polygon: [[0, 0], [1, 0], [2, 0], [1, 1]]", "visual"),
        V,
        "entity 'b'",
        "visual.geometry.polygon",
        4,
    ),
    (
        "polygon 1e16",
        shape("polygon: [[0, 0], [1.0e+16, 0], [0, 1]]"),
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        4,
    ),
    (
        "chain of 2",
        shape("chain: [[0, 0], [1, 0]]", extra="physics: {mass: 0}, "),
        T,
        "entity 'b'",
        "collision.geometry.chain",
        4,
    ),
    (
        "chain repeated point",
        shape("chain: [[0, 0], [0, 0], [1, 0]]", extra="physics: {mass: 0}, "),
        V,
        "entity 'b'",
        "collision.geometry.chain",
        4,
    ),
    (
        "chain with mass",
        shape("chain: [[0, 0], [1, 0], [2, 0]]"),
        V,
        "entity 'b'",
        "physics.mass",
        4,
    ),
    (
        "chain and circle",
        entity(
            "physics: {mass: 0}, visual: {geometry: {circle: 1}}, "
            "collision: {geometry: {chain: [[0, 0], [1, 0], [2, 0]]}}"
        ),
        V,
        "entity 'b'",
        "visual.geometry",
        4,
    ),
    (
        "edge of 1",
        shape("edge: [[0, 0]]", extra="physics: {mass: 0}, "),
        T,
        "entity 'b'",
        "collision.geometry.edge",
        4,
    ),
    (
        "edge of length 0",
        shape("edge: [[1, 1], [1, 1]]", extra="physics: {mass: 0}, "),
        V,
        "entity 'b'",
        "collision.geometry.edge",
        4,
    ),
    (
        "block pose 1e16",
        entity("collision: {pose: [1.0e+16, 0, 0], geometry: {circle: 1}}"),
        V,
        "entity 'b'",
        "collision.pose",
        4,
    ),
    (
        "block pose of 2",
        entity("collision: {pose: [1, 0], geometry: {circle: 1}}"),
        T,
        "entity 'b'",
        "collision.pose",
        4,
    ),
    # Colours and drawing.
    (
        "texture nan",
        entity("visual: {geometry: {circle: 0.5}, texture: [.nan, 0, 0]}"),
        V,
        "entity 'b'",
        "visual.texture",
        4,
    ),
    (
        "texture 1e400",
        entity("visual: {geometry: {circle: 0.5}, texture: [1.0e+400, 0, 0]}"),
        V,
        "entity 'b'",
        "visual.texture",
        4,
    ),
    (
        "texture out of range",
        entity("visual: {geometry: {circle: 0.5}, texture: [-5, 999, 3]}"),
        V,
        "entity 'b'",
        "visual.texture",
        4,
    ),
    (
        "texture of 2",
        entity("visual: {geometry: {circle: 0.5}, texture: [1, 2]}"),
        T,
        "entity 'b'",
        "visual.texture",
        4,
    ),
    (
        "texture a number",
        entity("visual: {geometry: {circle: 0.5}, texture: 5}"),
        T,
        "entity 'b'",
        "visual.texture",
        4,
    ),
    (
        "border 256",
        entity("visual: {geometry: {circle: 0.5}, border_color: [0, 0, 256]}"),
        V,
        "entity 'b'",
        "visual.border_color",
        4,
    ),
    (
        "border thickness negative",
        entity("visual: {geometry: {circle: 0.5}, border_thickness: -1}"),
        V,
        "entity 'b'",
        "visual.border_thickness",
        4,
    ),
    # Joints.
    ("joint named 1", JOINTED + "  1: {" + REVOLUTE + "}\n", T, "joint '1'", "(name)", 8),
    ("joint a number", JOINTED + "  j: 5\n", T, "joint 'j'", "(joint)", 8),
    ("unknown joint key", joint(REVOLUTE + ", parnt: a"), V, "joint 'j'", "parnt", 8),
    ("no type", joint("parent: a, child: b"), V, "joint 'j'", "type", 8),
    ("type weld", joint("type: weld, parent: a, child: b"), V, "joint 'j'", "type", 8),
    ("no parent", joint("type: revolute, child: b"), V, "joint 'j'", "parent", 8),
    (
        "parent missing",
        joint("type: revolute, parent: ghost, child: b"),
        V,
        "joint 'j'",
        "parent",
        8,
    ),
    ("child a list", joint("type: revolute, parent: a, child: [b]"), T, "joint 'j'", "child", 8),
    ("child is parent", joint("type: revolute, parent: b, child: b"), V, "joint 'j'", "child", 8),
    ("both static", joint("type: revolute, parent: a, child: s"), V, "joint 'j'", "child", 8),
    (
        "control mode torque",
        joint(REVOLUTE + ", control_mode: torque"),
        V,
        "joint 'j'",
        "control_mode",
        8,
    ),
    ("target text", joint(REVOLUTE + ", target: x"), T, "joint 'j'", "target", 8),
    (
        "target past float32",
        joint(REVOLUTE + ", control_mode: velocity, target: 1.0e+39"),
        V,
        "joint 'j'",
        "target",
        8,
    ),
    ("pid of 2", joint(REVOLUTE + ", pid: [1, 2]"), T, "joint 'j'", "pid", 8),
    ("pid nan", joint(REVOLUTE + ", pid: [.nan, 0, 0]"), V, "joint 'j'", "pid", 8),
    ("max_effort negative", joint(REVOLUTE + ", max_effort: -1"), V, "joint 'j'", "max_effort", 8),
    ("max_torque 0", joint(REVOLUTE + ", max_torque: 0"), V, "joint 'j'", "max_torque", 8),
    ("max_force text", joint(PRISMATIC + ", max_force: strong"), T, "joint 'j'", "max_force", 8),
    (
        "angle limits crossed",
        joint(REVOLUTE + ", angle_min: 1, angle_max: -1"),
        V,
        "joint 'j'",
        "angle_min",
        8,
    ),
    (
        "angle_max past float32",
        joint(REVOLUTE + ", angle_max: 1.0e+39"),
        V,
        "joint 'j'",
        "angle_max",
        8,
    ),
    (
        "position limits crossed",
        joint(PRISMATIC + ", position_min: 1, position_max: -1"),
        V,
        "joint 'j'",
        "position_min",
        8,
    ),
    ("axis zero", joint(PRISMATIC + ", axis: [0, 0]"), V, "joint 'j'", "axis", 8),
    (
        "anchor past float32",
        joint(REVOLUTE + ", anchor: [1.0e+39, 0]"),
        V,
        "joint 'j'",
        "anchor",
        8,
    ),
    (
        "entities_collide 1",
        joint(REVOLUTE + ", entities_collide: 1"),
        T,
        "joint 'j'",
        "entities_collide",
        8,
    ),
    # Limits, checked as the file is parsed (some set small here).
    (
        "list too long",
        shape(
            "chain: [" + ", ".join(f"[{i}, 0]" for i in range(11)) + "]",
            extra="physics: {mass: 0}, ",
        ),
        V,
        "entity 'b'",
        "collision.geometry.chain",
        4,
        {"max_list_length": 10},
    ),
    ("too many nodes", NODES, V, "entity 'b3'", "collision.geometry.circle", 7, {"max_nodes": 40}),
    (
        "too many nodes in a list",
        HEAD + "  b:\n    pose:\n      - 1\n      - 2\n      - 0\n",
        V,
        "entity 'b'",
        "pose[1]",
        6,
        {"max_nodes": 14},
    ),
    (
        "scene list too long",
        "scene:\n  size: [" + ", ".join(["1"] * 11) + "]\n",
        V,
        "scene",
        "size",
        2,
        {"max_list_length": 10},
    ),
    (
        "nested too deep",
        entity("pose: " + "[" * 40 + "]" * 40 + ", " + BALL),
        V,
        "entity 'b'",
        "pose" + "[0]" * 11 + "...",
        4,
    ),
    (
        "aliases past the values",
        ANCHORED + "".join(f"  b{i}: {{collision: *c}}\n" for i in range(5)),
        V,
        "scene file",
        "entities",
        3,
        {"max_expanded_values": 60},
    ),
    (
        "aliases past the depth",
        ANCHORED + "  b: {collision: {geometry: {polygon: [*p, *p, *p]}}}\n",
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        5,
        {"max_depth": 8},
    ),
    (
        "list of aliases too long",
        ANCHORED + "  b: {collision: {geometry: {polygon: [" + ", ".join(["*p"] * 11) + "]}}}\n",
        V,
        "entity 'b'",
        "collision.geometry.polygon",
        5,
        {"max_list_length": 10},
    ),
    # 600 levels: within libyaml's own nesting limit (1,000 in PyYAML 6.0.4's), past the
    # recursion left to the loader (RECURSION_HEADROOM frames above the test's own).
    (
        "past the recursion limit",
        entity("pose: " + "[" * 600 + "]" * 600 + ", " + BALL),
        V,
        "scene file",
        "(document)",
        1,
        {"max_depth": 5000, RECURSION_HEADROOM: 300},
    ),
    (
        "endless alias",
        entity("collision: &c {geometry: {polygon: [*c]}}"),
        V,
        "entity 'b'",
        "collision",
        4,
    ),
]


def _load_error(text: str, limits: dict) -> Exception:
    """The error loading `text` raises within `limits` (SceneFileLimits' attributes, and
    RECURSION_HEADROOM: frames Python may go above this one)."""
    limits = dict(limits)
    headroom = limits.pop(RECURSION_HEADROOM, None)
    old_limit = sys.getrecursionlimit()
    if headroom is not None:
        sys.setrecursionlimit(_stack_depth() + headroom)
    try:
        with pytest.raises((ValueError, TypeError)) as info:
            fx.load_scene(text, arch="cpu", limits=SceneFileLimits(**limits))
    finally:
        sys.setrecursionlimit(old_limit)
    return info.value


def _stack_depth() -> int:
    frame, depth = sys._getframe(), 0
    while frame is not None:
        frame, depth = frame.f_back, depth + 1
    return depth


def test_the_corpus_is_large_and_its_cases_distinct():
    assert len(CORPUS) >= 40
    assert len({case[0] for case in CORPUS}) == len(CORPUS)
    assert len({case[1] for case in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("case", CORPUS, ids=[case[0] for case in CORPUS])
def test_every_error_names_the_entity_the_key_and_the_line(case):
    name, text, kind, what, key, line, *limits = case
    error = _load_error(text, limits[0] if limits else {})
    message = str(error)
    assert type(error) is kind, f"{type(error).__name__}: {message}"
    assert f"{what}, key '{key}' (line {line}): " in message, message
    if name == "past the recursion limit":
        assert "past Python's recursion limit" in message, message


def test_the_reproduction_messages():
    """Issue 42's examples, word for word where the builder speaks."""
    cases = {
        "physics: {mass: 1.0e+300}": "entity 'b', key 'physics.mass' (line 4): mass must be "
        "within float32's range",
        "pose: [1.0e+16, 3, 0]": "entity 'b', key 'pose' (line 4): position must be within +-1e+15",
        "init_velocity: [1.0e+11, 0, 0]": "entity 'b', key 'init_velocity' (line 4): velocity "
        "must be within +-1e+10",
    }
    for body, expected in cases.items():
        with pytest.raises(ValueError) as info:
            fx.load_scene(entity(body + ", " + BALL), arch="cpu")
        assert str(info.value).startswith(expected), str(info.value)


def test_colours_in_range_load():
    scene = fx.load_scene(
        entity(
            "visual: {geometry: {circle: 0.5}, texture: [0, 127.5, 255], "
            "border_color: [1, 2, 3, 4]}"
        ),
        arch="cpu",
        boundary=False,
    )
    assert scene.visuals[0]["fill"] == (0, 127, 255, 255)
    assert scene.visuals[0]["border"] == (1, 2, 3, 4)
    name_too_long = "x" * 5000 + ".png"  # the file system refuses to look: no such image
    scene = fx.load_scene(
        entity("visual: {geometry: {circle: 0.5}, texture: " + name_too_long + "}"),
        arch="cpu",
        boundary=False,
    )
    assert scene.visuals[0]["fill"] == scene_loader.DEFAULT_COLOR


# ------------------------------------------------------------------ bounded cost
def test_the_limits_are_named_constants():
    assert yaml_reader.MAX_FILE_BYTES == 64 * 2**20
    assert yaml_reader.MAX_LIST_LENGTH == 100_000
    assert yaml_reader.MAX_NODES >= 4_000_000  # 50,000 entities with distinct polygons: 3.25M
    assert 8 < yaml_reader.MAX_DEPTH <= 64
    assert yaml_reader.MAX_EXPANDED_VALUES >= yaml_reader.MAX_NODES


def test_a_chain_of_100001_points_is_refused_as_it_is_parsed():
    text = (
        HEAD
        + "  c: {pose: [0, 0, 0], physics: {mass: 0}, collision: {geometry: {chain: "
        + str([[i * 0.01, 1.0] for i in range(100_001)])
        + "}}}\n"
    )
    with pytest.raises(
        ValueError,
        match=r"entity 'c', key 'collision.geometry.chain' "
        r"\(line 4\): a list of more than 100,000 items",
    ):
        fx.load_scene(text, arch="cpu", boundary=False)


#: Memory (bytes) Python may allocate, past one UTF-8 copy of a text (counting its bytes
#: takes one), while a file past a limit is refused: the refusal comes before the file is
#: read (a path) or the rest of it composed (a list past its limit): a few kilobytes are
#: measured, where the 11 MB polygon took 1.6 GB (and 15 s). Memory, not time: tests
#: assert no timings.
REFUSAL_PEAK = 4 * 2**20


def loading_peak(source):
    """load_scene(source), which must raise; asserts that Python's allocations while it
    ran stayed within REFUSAL_PEAK and a copy of the text (tracemalloc), and lets the
    error through."""
    budget = REFUSAL_PEAK + (len(source.encode()) if isinstance(source, str) else 0)
    tracemalloc.start()
    try:
        fx.load_scene(source, arch="cpu")
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < budget, f"{peak:,} bytes allocated before the refusal"


def test_a_polygon_of_a_million_vertices_is_refused_at_the_ninth():
    text = (
        HEAD
        + "  b: {pose: [5, 3, 0], collision: {geometry: {polygon: ["
        + "[0.5, 0.5]," * 1_000_000
        + "[0, 1]]}}}\n"
    )  # 11 MB: 15 s and 1.6 GB before
    with pytest.raises(
        ValueError,
        match=r"entity 'b', key 'collision.geometry.polygon' "
        r"\(line 4\): a polygon of more than 8 vertices",
    ):
        loading_peak(text)


def test_text_past_the_byte_limit_is_refused_before_parsing():
    text = HEAD + "  b: {" + BALL + "}\n" + "#" * (70 * 10**6) + "\n"  # 70 MB
    with pytest.raises(
        ValueError,
        match=r"YAML text: 70,000,0\d\d bytes; a scene file may "
        r"have at most 67,108,864 \(64 MiB\)",
    ):
        loading_peak(text)


def test_bytes_not_characters_are_counted():
    text = entity(BALL) + "# " + "é" * 60 + "\n"
    size = len(text.encode())
    assert size == len(text) + 60
    assert fx.load_scene(text, arch="cpu", limits=SceneFileLimits(size)).n_bodies == 5
    with pytest.raises(
        ValueError, match=f"YAML text: {size} bytes; a scene file may have at most {size - 1}"
    ):
        fx.load_scene(text, arch="cpu", limits=SceneFileLimits(size - 1))


def test_a_file_past_the_byte_limit_is_refused_unread(tmp_path):
    huge = tmp_path / "huge.yml"
    with huge.open("wb") as file:
        file.truncate(2**30)  # 1 GiB, sparse: no disk used
    with pytest.raises(
        ValueError,
        match=r"huge.yml': 1,073,741,824 bytes; a scene file may "
        r"have at most 67,108,864",
    ):
        loading_peak(huge)


def test_files_that_cannot_be_read(tmp_path):
    (tmp_path / "folder.yml").mkdir()
    with pytest.raises(ValueError, match="folder.yml' cannot be read"):
        fx.load_scene(tmp_path / "folder.yml", arch="cpu")
    latin = tmp_path / "latin.yml"
    latin.write_bytes(entity(BALL).encode() + "# caf\xe9\n".encode("latin-1"))
    with pytest.raises(
        ValueError,
        match=r"scene file, key '\(document\)' \(line 5\): not "
        "UTF-8 text",
    ):
        fx.load_scene(latin, arch="cpu")
    with pytest.raises(
        ValueError,
        match=r"scene file, key '\(document\)' \(line 5\): not "
        "text UTF-8 can hold",
    ):
        fx.load_scene(entity(BALL) + "# \ud800\n", arch="cpu")
    with pytest.raises(ValueError, match="does not exist"):
        fx.load_scene(tmp_path / "missing.yml", arch="cpu")


def test_a_device_is_read_no_further_than_the_limit(tmp_path):
    zeros = tmp_path / "zeros.yml"
    zeros.symlink_to("/dev/zero")  # its size says 0
    with pytest.raises(
        ValueError, match="zeros.yml': 1,001 bytes; a scene file may have at most 1,000"
    ):
        fx.load_scene(zeros, arch="cpu", limits=SceneFileLimits(max_file_bytes=1000))


def test_neither_a_path_nor_text():
    with pytest.raises(TypeError, match="path_or_yaml_text must be a path or YAML text, got int"):
        fx.load_scene(5, arch="cpu")


def test_a_file_within_the_limits_loads_from_a_path(tmp_path):
    path = tmp_path / "ok.yml"
    path.write_text(entity(BALL))
    size = path.stat().st_size
    assert fx.load_scene(path, arch="cpu", limits=SceneFileLimits(size)).n_bodies == 5
    with pytest.raises(ValueError, match="ok.yml'.*a scene file may have at most"):
        fx.load_scene(path, arch="cpu", limits=SceneFileLimits(size - 1))


def test_the_node_and_depth_limits_hold_exactly():
    # 17 nodes: the scene block and one entity.
    assert (
        fx.load_scene(entity(BALL), arch="cpu", limits=SceneFileLimits(max_nodes=17)).n_bodies == 5
    )
    with pytest.raises(ValueError, match="more than 16 YAML nodes"):
        fx.load_scene(entity(BALL), arch="cpu", limits=SceneFileLimits(max_nodes=16))
    deepest = shape("polygon: [[0, 0], [1, 0], [0, 1]]")  # a coordinate is at depth 8
    assert fx.load_scene(deepest, arch="cpu", limits=SceneFileLimits(max_depth=8)).n_bodies == 5
    with pytest.raises(
        ValueError,
        match=r"key 'collision.geometry.polygon\[0\]\[0\]' "
        r"\(line 4\): values nested more than 7 deep",
    ):
        fx.load_scene(deepest, arch="cpu", limits=SceneFileLimits(max_depth=7))


def test_limits_must_be_scene_file_limits():
    with pytest.raises(TypeError, match="limits must be a SceneFileLimits"):
        fx.load_scene(entity(BALL), arch="cpu", limits={"max_nodes": 17})
    with pytest.raises(ValueError, match="max_depth must be an int >= 1"):
        SceneFileLimits(max_depth=0)


_DEEP = """
import fx2d_gpu as fx
n = 100_000
text = "scene: {size: [4, 4]}\\nentities:\\n  b: {pose: " + "[" * n + "]" * n + "}\\n"
try:
    fx.load_scene(text, arch="cpu")
except ValueError as error:
    print(error)
"""


def test_deep_nesting_is_refused_not_a_crash():
    """100,000 nested lists (200 KB) crashed PyYAML's C composer (a segfault: it recurses
    in C); the depth limit stops it at the 33rd. In a child process, so a crash fails the
    test instead of the run. PyYAML 6.0.4's libyaml refuses past 1,000 levels itself, as
    it scans ahead of the composer: then its own message, named the same way."""
    run = subprocess.run([sys.executable, "-c", _DEEP], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert re.search(r"entity 'b', key 'pose[\][0.]*' \(line 3\): ", run.stdout), run.stdout
    assert (
        "values nested more than 32 deep" in run.stdout
        or "exceeded maximum nesting depth" in run.stdout
    ), run.stdout


@pytest.mark.parametrize("failure", [MemoryError, RecursionError])
def test_memory_and_recursion_errors_become_value_errors(failure, monkeypatch):
    def fail(text, limits):
        raise failure()

    monkeypatch.setattr(scene_loader, "parse_yaml", fail)
    with pytest.raises(
        ValueError,
        match=r"scene file, key '\(document\)' \(line 1\): .*at "
        r"most 67,108,864 bytes, 5,000,000 YAML nodes",
    ):
        fx.load_scene(entity(BALL), arch="cpu")


#: Replacements for a value of a valid file: each load must succeed or raise ValueError or
#: TypeError in the loader's form.
HOSTILE_VALUES = [
    "-1",
    "0",
    "1.0e+39",
    "-1.0e+300",
    "1" + "0" * 400,
    ".nan",
    "-.inf",
    "x",
    "true",
    "~",
    "[]",
    "{}",
    "[1, 2]",
    "[1, 2, 3, 4]",
    "[[0, 0], [1, 0]]",
    "{a: 1}",
    "2020-01-01",
    "!!binary aGk=",
    "1.0e-320",
    "[.nan, 0]",
    "[1.0e+16, 0]",
    "'x'",
]
VALID = """scene: {size: [20, 20], gravity: [0, -9.8], background: [1, 2, 3, 255]}
entities:
  ground: {pose: [10, 1, 0], physics: {mass: 0}, visual: {geometry: {rectangle: [20, 1]}, texture: [1, 2, 3]}, collision: {geometry: {rectangle: [20, 1]}}}
  box: {pose: [5, 3, 15], init_velocity: [1, 0, 10], physics: {mass: 2, inertia: 0.5, elasticity: 0.2, static_friction: 0.5, dynamic_friction: 0.4, gravity_scale: 1, vel_damping: 0.1}, collision: {pose: [0, 0, 0], geometry: {polygon: [[0, 0], [1, 0], [1, 1], [0, 1]], radius: 0.01}}}
  pill: {pose: [8, 3, 0], collision: {geometry: {capsule: {length: 1, radius: 0.2}}}, visual: {geometry: {capsule: [1, 0.2]}, border_color: [0, 0, 0], border_thickness: 1}}
  floor: {pose: [0, 0, 0], physics: {mass: 0}, collision: {geometry: {chain: [[1, 1], [5, 1], [9, 1]]}}}
  rail: {pose: [0, 0, 0], physics: {mass: 0}, collision: {geometry: {edge: [[1, 9], [5, 9]]}}}
joints:
  hinge: {type: revolute, parent: ground, child: box, anchor: [0, 1], angle_min: -1, angle_max: 1, control_mode: velocity, target: 1, pid: [1, 0, 0], max_effort: 10, entities_collide: false}
  slide: {type: prismatic, parent: ground, child: pill, axis: [1, 0], position_min: -1, position_max: 1, control_mode: position, max_force: 5}
"""  # noqa: E501
_FORM = re.compile(r"^(entity '.*'|joint '.*'|scene|scene file), key '.*' \(line \d+\): ")
_VALUE = re.compile(
    r"(?<=[:\[,] )(-?[0-9.]+|\[[^\[\]]*\]|\[\[[^\]]*\](?:, \[[^\]]*\])*\]|"
    r"true|false|[a-z]+)(?=[,\]}])"
)


def test_hostile_values_raise_only_the_loaders_errors():
    """Every value of a file with every kind of entity and joint, replaced in turn by a
    hostile one: a load succeeds or raises ValueError or TypeError naming where."""
    assert fx.load_scene(VALID, arch="cpu").n_bodies == 6 + 4  # a chain of 2 links
    spots = [m.span() for m in _VALUE.finditer(VALID)]
    assert len(spots) > 40
    rng = random.Random(42)
    for start, end in spots:
        for value in rng.sample(HOSTILE_VALUES, 3):
            text = VALID[:start] + value + VALID[end:]
            try:
                fx.load_scene(text, arch="cpu")
            except (ValueError, TypeError) as error:
                assert _FORM.match(str(error)), (VALID[start:end], value, str(error))
