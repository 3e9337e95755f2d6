"""One table of body rules (issue 43, item 3): builder.BODY_RULES declares each body keyword
once, and every way of giving one refuses a bad value alike, with the same message:

- one body (Scene.add_circle, add_box: builder.add_body),
- many bodies (Scene.add_circles, add_boxes: builder.add_bodies), one value for all or one
  per body (then named `keyword[i]`),
- a scene file (load_scene), which adds where the value came from: "entity 'b', key
  'physics.mass' (line 5): " before the same message.

A refused call adds nothing. The bad values are those the table's own checks refuse among
HOSTILE_VALUES, plus MUST_REFUSE's by hand, so a new rule brings its cases, and a check
removed from one path (or from the table) fails here.
"""

import ast
import math
import re
import struct

import numpy as np
import pytest
import yaml

import fx2d_gpu as fx
from fx2d_gpu.model.builder import BODY_RULES

#: 1e-320, a subnormal float, made from its bits: once Taichi has run, the CPU may flush
#: subnormals to zero (DAZ), and the literal 1e-320 may then read as 0.0.
SUBNORMAL = struct.unpack("<d", struct.pack("<Q", 2024))[0]
#: Values tried on every keyword: each one the keyword's rule refuses is a case.
HOSTILE_VALUES = [
    math.nan,
    math.inf,
    -math.inf,
    -1.0,
    -1,
    0,
    SUBNORMAL,
    1e-20,
    1e39,
    -1e39,
    2e15,
    2e10,
    10**400,
    2**31,
    2**32,
    -(2**31) - 1,
    1.5,
    "x",
    "1",
    True,
    None,
    b"x",
    (math.nan, 0.0),
    (2e10, 0.0),
    (1e39, 0.0),
    (1.0,),
    {},
]
#: Values each keyword must refuse, by hand (NaN, the wrong type, out of range): a check
#: dropped from the table fails here. Every keyword of the table has an entry.
MUST_REFUSE = {
    "angle": [math.nan, math.inf, 2e15, "x", True, None],
    "velocity": [(math.nan, 0.0), (2e10, 0.0), (1.0,), "xy", (True, False), None],
    "angular_velocity": [math.nan, 2e10, "x"],
    "mass": [-1.0, math.nan, 1e-20, SUBNORMAL, 1e39, 10**400, "1", True, None],
    "inertia": [0.0, -1.0, math.nan, 1e39, "x", True],
    "elasticity": [-0.1, math.nan, math.inf, 1e39, "x"],
    "static_friction": [-0.1, math.nan, "x"],
    "dynamic_friction": [-0.1, math.nan, "x"],
    "gravity_scale": [math.nan, 1e39, "x", False],
    "vel_damping": [-0.1, math.nan, 1e39],
    "name": [5, b"x"],
    "external_forces_enabled": [1, 0, "yes", None],
    "sensor": [1, "yes"],
    "collision_group": [2**31, -(2**31) - 1, 1.5, True, "1"],
    "category_bits": [-1, 2**32, 1.0, True],
    "mask_bits": [-1, 2**32, None],
    "enabled": [1, None],
    "bullet": [0, "no"],
    "collides": [1, None],
}
#: The scene-file key of each keyword a file gives as it is (physics); the others are not
#: in Fx2D's format (NOT_IN_FILES) or come in other units (pose, init_velocity in degrees).
FILE_KEYS = {
    "mass": "physics.mass",
    "inertia": "physics.inertia",
    "elasticity": "physics.elasticity",
    "static_friction": "physics.static_friction",
    "dynamic_friction": "physics.dynamic_friction",
    "gravity_scale": "physics.gravity_scale",
    "vel_damping": "physics.vel_damping",
    "external_forces_enabled": "physics.external_forces_enabled",
    "sensor": "physics.sensor",
}
NOT_IN_FILES = {
    "angle",
    "velocity",
    "angular_velocity",
    "name",
    "collision_group",
    "category_bits",
    "mask_bits",
    "enabled",
    "bullet",
    "collides",
}


def _refuses(keyword: str, value) -> bool:
    try:
        BODY_RULES[keyword].check_one(value, keyword)
    except (TypeError, ValueError):
        return True
    return False


def _cases() -> list:
    cases = []
    for keyword in BODY_RULES:
        values = list(MUST_REFUSE[keyword])
        values += [
            v
            for v in HOSTILE_VALUES
            if _refuses(keyword, v)
            and not any(v is w or (type(v) is type(w) and repr(v) == repr(w)) for w in values)
        ]
        cases += [pytest.param(keyword, value, id=f"{keyword}={value!r:.20}") for value in values]
    return cases


CASES = _cases()


def _error(call) -> Exception:
    with pytest.raises((TypeError, ValueError)) as info:
        call()
    return info.value


def _scene() -> fx.Scene:
    scene = fx.Scene(arch="cpu")
    scene.add_box((0.0, -1.0), (10.0, 1.0), mass=0.0)
    return scene


def _one_body_errors(scene, keyword, value) -> list[Exception]:
    """add_circle's and add_box's errors for `value` (the scene must stay as it was)."""
    before = scene.n_bodies
    errors = [
        _error(lambda: scene.add_circle((0.0, 1.0), 0.5, **{keyword: value})),
        _error(lambda: scene.add_box((0.0, 1.0), (1.0, 1.0), **{keyword: value})),
    ]
    assert scene.n_bodies == before
    return errors


def _many_body_errors(scene, keyword, value) -> list[Exception]:
    """add_circles' and add_boxes' errors for `value`, one value for all three bodies."""
    before = scene.n_bodies
    positions = np.array([[0.0, 1.0], [2.0, 1.0], [4.0, 1.0]])
    errors = [
        _error(lambda: scene.add_circles(positions, 0.5, **{keyword: value})),
        _error(lambda: scene.add_boxes(positions, (1.0, 1.0), **{keyword: value})),
    ]
    assert scene.n_bodies == before
    return errors


def test_every_keyword_has_hand_written_cases_and_a_place_in_files_or_not():
    assert set(MUST_REFUSE) == set(BODY_RULES)
    assert set(FILE_KEYS) | NOT_IN_FILES == set(BODY_RULES)
    assert not set(FILE_KEYS) & NOT_IN_FILES
    for keyword, values in MUST_REFUSE.items():
        for value in values:
            assert _refuses(keyword, value), (keyword, value)


def test_scene_documents_every_keyword_with_its_default():
    """The table in Scene's docstring lists the body keywords with BODY_RULES' defaults
    (collides is add_shape's own argument)."""
    rows = re.findall(r"^\s*\| `(\w+)` \| `([^`]*)` \|", fx.Scene.__doc__, re.M)
    documented = {keyword: ast.literal_eval(default) for keyword, default in rows}
    assert documented == {
        keyword: rule.default for keyword, rule in BODY_RULES.items() if keyword != "collides"
    }


def test_defaults_are_what_a_body_gets():
    scene = fx.Scene(arch="cpu")
    one = scene._builder.bodies[scene.add_box((0.0, 0.0), (1.0, 1.0))]
    many = scene._builder.bodies[scene.add_boxes(np.zeros((1, 2)), (1.0, 1.0))[0]]
    for keyword, rule in BODY_RULES.items():
        if keyword in ("inertia", "name"):  # None: from the shape; no name
            continue
        field = rule.field or keyword
        for body in (one, many):
            assert np.array_equal(getattr(body, field), rule.default), (keyword, body)


@pytest.mark.parametrize("keyword,value", CASES)
def test_one_and_many_bodies_refuse_alike(keyword, value):
    scene = _scene()
    one = _one_body_errors(scene, keyword, value)
    expected = (type(one[0]), str(one[0]))
    assert all((type(e), str(e)) == expected for e in one), one
    assert getattr(one[0], "body_keyword", None) == keyword
    rule = BODY_RULES[keyword]
    if _takes_many(rule):
        if np.shape(value) != np.shape(rule.default):
            return  # not one value for all bodies: (n,) or (n, 2) would be one per body
        many = _many_body_errors(scene, keyword, value)
        assert [(type(e), str(e)) for e in many] == [expected] * 2, many
    else:  # bodies added together have no names: any refused
        many = _many_body_errors(scene, keyword, value)
        assert all(isinstance(e, TypeError) and "no names" in str(e) for e in many), many


def _takes_many(rule) -> bool:
    try:
        rule.check_many(rule.default, "x", 2)
    except (TypeError, ValueError):
        return False
    return True


def _per_body_cases() -> list:
    """The cases a NumPy array can hold among good values: a number where the default is
    one (a float for a float's rule, an int for an int's), or inertia's."""
    cases = []
    for case in CASES:
        keyword, value = case.values
        default = BODY_RULES[keyword].default
        if default is None and keyword == "inertia":
            default = 1.0
        number = isinstance(value, float) or isinstance(value, int) and abs(value) < 2**63
        if (
            number
            and not isinstance(value, bool)
            and not isinstance(default, bool)
            and isinstance(default, float if isinstance(value, float) else (int, float))
        ):
            cases.append(pytest.param(keyword, value, default, id=case.id))
    return cases


@pytest.mark.parametrize("keyword,value,good", _per_body_cases())
def test_a_value_per_body_is_refused_as_one_body_refuses_it(keyword, value, good):
    """One bad number among good ones: the one-body message, named keyword[1]."""
    scene = _scene()
    [alone, _] = _one_body_errors(scene, keyword, value)
    many = _many_body_errors(scene, keyword, np.array([good, value, good]))
    for error in many:
        assert type(error) is type(alone)
        assert str(error) == str(alone).replace(keyword, f"{keyword}[1]", 1), (error, alone)
        assert error.body_keyword == keyword


def _yaml_value(value) -> str:
    return yaml.safe_dump({"v": value}, default_flow_style=True).strip()[4:-1]


def _scene_text(keyword, value) -> str:
    """A scene file of one circle whose physics key for `keyword` holds `value`."""
    key = FILE_KEYS[keyword].split(".")[1]
    return (
        "scene: {size: [10, 10]}\nentities:\n  b:\n    pose: [5, 5, 0]\n"
        f"    physics: {{{key}: {_yaml_value(value)}}}\n"
        "    collision: {geometry: {circle: 0.5}}\n"
    )


def _has_yaml_form(keyword, value) -> bool:
    """Whether a file can hold `value` itself (not a tuple, an array or a NumPy scalar,
    which YAML reads back as something else)."""
    key = FILE_KEYS[keyword].split(".")[1]
    read = yaml.safe_load(_scene_text(keyword, value))["entities"]["b"]["physics"][key]
    return type(read) is type(value) and (read == value or value != value)  # NaN != NaN


@pytest.mark.parametrize(
    "keyword,value",
    [case for case in CASES if case.values[0] in FILE_KEYS and _has_yaml_form(*case.values)],
)
def test_a_scene_file_refuses_as_the_scene_does(keyword, value):
    """The file's error: where the value is, then the builder's own message."""
    text = _scene_text(keyword, value)
    [alone, _] = _one_body_errors(_scene(), keyword, value)
    error = _error(lambda: fx.load_scene(text, arch="cpu"))
    assert type(error) is type(alone)
    assert str(error) == f"entity 'b', key '{FILE_KEYS[keyword]}' (line 5): {alone}"
