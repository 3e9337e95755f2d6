"""The scene's model on the host: bodies, joints and collision filters, every argument
checked before anything changes, and the device arrays built from them."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import operator
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import shapes
from ..checks import (
    FLOAT32_MAX,
    all_within,
    as_bits,
    as_bool,
    as_bools,
    as_flags,
    as_index,
    as_int32,
    as_integers,
    as_real,
    as_real_array,
    as_reals,
    as_scalar,
    as_vector2,
    as_vectors2,
)
from ..enums import (
    DEFAULT_MIXING,
    JOINT_PRISMATIC,
    JOINT_REVOLUTE,
    MIXING_RULES,
    MOTOR_EFFORT,
    MOTOR_MODES,
    MOTOR_NONE,
    MOTOR_POSITION,
    MOTOR_VELOCITY,
)
from ..shapes import MAX_COORDINATE, MAX_POLYGON_VERTICES, MAX_SPEED, rotation
from .masses import check_inertias, check_masses

#: The largest motor target of each control mode (a target's magnitude must be below it).
#: A position target is a coordinate (rad or m) and a velocity target a speed: beyond
#: MAX_COORDINATE / MAX_SPEED the motor drives toward a state the engine refuses as a fault,
#: and its PID integral (error x time, float32) toward float32's end, where 0 x inf makes
#: the effort NaN. An effort target is clamped by max_effort, and an idle motor's target
#: is not read: float32's range is their only bound.
TARGET_LIMITS = {
    MOTOR_NONE: FLOAT32_MAX,
    MOTOR_POSITION: MAX_COORDINATE,
    MOTOR_VELOCITY: MAX_SPEED,
    MOTOR_EFFORT: FLOAT32_MAX,
}


@dataclass
class Body:
    shape: shapes.Shape
    position: np.ndarray
    angle: float
    velocity: np.ndarray
    angular_velocity: float
    mass: float
    inertia: float  # about the centre of mass, kg m²; inf for static bodies
    elasticity: float
    static_friction: float
    dynamic_friction: float
    gravity_scale: float
    vel_damping: float
    name: str | None
    external_forces: bool = True
    collides: bool = True  # False: a body with no collision shape (visual only)
    sensor: bool = False  # detects overlaps (events), exerts and feels no contact force
    collision_group: int = 0  # Fx2D's: a shared negative group never pairs, positive always
    category_bits: int = 1  # Box2D's filter: which categories the body is in (32 bits)
    mask_bits: int = 0xFFFFFFFF  # ... and which categories it collides with
    enabled: bool = True  # False: removed from the simulation in every world, from the start
    bullet: bool = False  # swept against dynamic bodies too (collision/continuous.py)


def _mass(value, name: str) -> float:
    """A body's mass, kg: 0 (static) or from MIN_MASS up (masses.check_masses)."""
    return check_masses(as_real(value, name, minimum=0.0), name, indexed=False)


def _masses(values, name: str, n: int) -> np.ndarray:
    """n masses (kg), each held to _mass's rule, from one (for all) or n."""
    if np.ndim(values) == 0:  # one for all: refused as add_body refuses it, unindexed
        return np.full(n, _mass(values, name))
    return check_masses(as_reals(values, name, n, minimum=0.0), name)


def _inertia(value, name: str) -> float | None:
    """A moment of inertia (kg m^2, positive) given by the user, or None: from the shape."""
    return None if value is None else as_real(value, name, positive=True)


def _inertias(values, name: str, n: int) -> np.ndarray | None:
    return None if values is None else as_reals(values, name, n, positive=True)


def _name(value, name: str) -> str | None:
    """A body's name: None or a string (whether another body has it is the builder's to say)."""
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {type(value).__name__}")
    return value


def _no_names(values, name: str, n: int):
    raise TypeError("bodies added together have no names: add a named body alone")


@dataclass(frozen=True)
class BodyRule:
    """How one body keyword (the table in Scene's docstring) is taken: its default, the Body
    field it sets, and its check, for one body and for n bodies at once.

    check_one(value, keyword) returns the value add_body stores; check_many(values,
    keyword, n) takes one value for all n bodies or one per body and returns what
    add_bodies stores for each (an array or list of n; None for inertia from the shapes),
    naming the first bad value `keyword[i]`. Both raise the same message for the same bad
    value, so that Scene's one-body and many-body methods and the scene-file loader (which
    checks a file's values with check_one before building anything) cannot drift apart.
    """

    default: object
    check_one: Callable
    check_many: Callable
    field: str | None = None  # the Body field: the keyword where None


def _real_rule(default, **bounds) -> BodyRule:
    """A number's rule: as_real's and as_reals' `bounds` (minimum, positive, limit)."""
    return BodyRule(
        default, functools.partial(as_real, **bounds), functools.partial(as_reals, **bounds)
    )


def _flag_rule(default) -> BodyRule:
    return BodyRule(default, as_bool, as_bools)


def _integer_rule(default, check) -> BodyRule:
    """An integer's rule: `check` (as_int32 or as_bits) for each."""
    return BodyRule(default, check, functools.partial(as_integers, check=check))


#: Every body keyword of ModelBuilder.add_body / add_bodies (and so of Scene's add_*
#: methods), in the order they are checked. Scene's docstring lists their meanings.
BODY_RULES = {
    "angle": _real_rule(0.0, limit=MAX_COORDINATE),
    "velocity": BodyRule(
        (0.0, 0.0),
        functools.partial(as_vector2, limit=MAX_SPEED),
        functools.partial(as_vectors2, limit=MAX_SPEED),
    ),
    "angular_velocity": _real_rule(0.0, limit=MAX_SPEED),
    "mass": BodyRule(1.0, _mass, _masses),
    "inertia": BodyRule(None, _inertia, _inertias),
    "elasticity": _real_rule(0.1, minimum=0.0),
    "static_friction": _real_rule(0.0, minimum=0.0),
    "dynamic_friction": _real_rule(0.0, minimum=0.0),
    "gravity_scale": _real_rule(1.0),
    "vel_damping": _real_rule(0.0, minimum=0.0),
    "name": BodyRule(None, _name, _no_names),
    "external_forces_enabled": dataclasses.replace(_flag_rule(True), field="external_forces"),
    "sensor": _flag_rule(False),
    "collision_group": _integer_rule(0, as_int32),
    "category_bits": _integer_rule(0x0001, as_bits),
    "mask_bits": _integer_rule(0xFFFFFFFF, as_bits),
    "enabled": _flag_rule(True),
    "bullet": _flag_rule(False),
    # Not in Scene's table: add_shape's and add_shapes' own argument.
    "collides": _flag_rule(True),
}


def _field(keyword: str) -> str:
    """The Body field body keyword `keyword` sets."""
    return BODY_RULES[keyword].field or keyword


@contextlib.contextmanager
def blamed_on(keyword: str):
    """Marks a TypeError or ValueError raised inside as caused by body keyword `keyword`:
    its `body_keyword` attribute, read by callers that name where a value came from (the
    scene-file loader names the file's key)."""
    try:
        yield
    except (TypeError, ValueError) as exc:
        exc.body_keyword = keyword
        raise


#: Body keywords of other engines and what fx2d_gpu calls them (Fx2D's names): the hint an
#: unknown keyword's TypeError gives.
_KEYWORD_HINTS = {
    "friction": "static_friction= and dynamic_friction= (Coulomb coefficients: the static "
    "one holds a resting contact, the kinetic one acts while sliding)",
    "restitution": "elasticity= (the coefficient of restitution)",
    "damping": "vel_damping= (linear and angular velocity damping, 1/s)",
    "linear_damping": "vel_damping= (linear and angular velocity damping, 1/s)",
}


def _keyword_values(body: dict, bulk: bool) -> dict:
    """Every body keyword's value, `body`'s or the default, in BODY_RULES' order; TypeError
    for an unknown keyword, or a name given to bodies added together (`bulk`)."""
    unknown = sorted(set(body) - set(BODY_RULES))
    if unknown:
        hint = _KEYWORD_HINTS.get(unknown[0])
        raise TypeError(
            f"unexpected keyword argument {unknown[0]!r}"
            + (f"; did you mean {hint}?" if hint else "")
        )
    if bulk and "name" in body:
        with blamed_on("name"):
            _no_names(body["name"], "name", 0)
    return {
        keyword: body.get(keyword, rule.default)
        for keyword, rule in BODY_RULES.items()
        if not (bulk and keyword == "name")
    }


@dataclass
class Joint:
    kind: int
    parent: int
    child: int
    anchor_parent: np.ndarray  # parent frame, m
    anchor_child: np.ndarray  # child frame, m
    axis: np.ndarray  # prismatic axis, parent frame
    reference_angle: float
    lower: float
    upper: float
    mode: int
    pid: tuple
    max_effort: float
    target: float
    name: str | None
    collide_connected: bool = False


def check_mixing(rule, argument: str) -> str:
    """`rule`, a name of enums.MIXING_RULES ("min", "max", "geometric_mean", "average",
    "product"), checked; `argument` names it in the errors (friction_mixing,
    restitution_mixing).

    Raises:
        TypeError: rule is not a string.
        ValueError: rule is not one of the names.
    """
    if not isinstance(rule, str):
        raise TypeError(
            f"{argument} must be a string, one of {tuple(MIXING_RULES)}, got {type(rule).__name__}"
        )
    if rule not in MIXING_RULES:
        raise ValueError(f"{argument} must be one of {tuple(MIXING_RULES)}, got {rule!r}")
    return rule


class ModelBuilder:
    """Bodies, joints and disabled pairs of a scene, in the order they were added, and how
    a pair mixes its bodies' friction and restitution (friction_mixing, restitution_mixing:
    names of enums.MIXING_RULES, checked by check_mixing; the same for both solvers)."""

    def __init__(
        self, friction_mixing: str = DEFAULT_MIXING, restitution_mixing: str = DEFAULT_MIXING
    ):
        self.friction_mixing = check_mixing(friction_mixing, "friction_mixing")
        self.restitution_mixing = check_mixing(restitution_mixing, "restitution_mixing")
        self.bodies: list[Body] = []
        self.joints: list[Joint] = []
        self.no_collision: set[tuple[int, int]] = set()  # pairs from disable_collision
        self._body_names: dict[str, int] = {}
        self._joint_names: dict[str, int] = {}
        self.groups: dict[str, tuple[int, ...]] = {}  # entity groups: name -> members

    # ------------------------------------------------------------------ bodies
    def add_body(self, shape, position, **body) -> int:
        """A body of `shape` at `position` ((2,) m, checked by the caller); `body`: the body
        keywords of BODY_RULES, each checked by its rule before anything is added.

        Returns the new body's index. Raises add_body's TypeError / ValueError naming the
        keyword (its `body_keyword` attribute too: see blamed_on)."""
        values = _keyword_values(body, bulk=False)
        for keyword, value in values.items():
            with blamed_on(keyword):
                values[keyword] = BODY_RULES[keyword].check_one(value, keyword)
        # The inertia given, or the shape's for the mass; inf for a static body.
        mass, inertia = values["mass"], values["inertia"]
        values["inertia"] = check_inertias(
            mass * shape.unit_inertia if inertia is None else inertia,
            mass,
            derived=inertia is None,
            arealess=shape.kind in shapes.AREALESS_KINDS,
            indexed=False,
        )
        with blamed_on("name"):
            _check_new_name(values["name"], self._body_names, "body")
        fields = {_field(keyword): value for keyword, value in values.items()}
        self.bodies.append(Body(shape=shape, position=position, **fields))
        if values["name"] is not None:
            self._body_names[values["name"]] = len(self.bodies) - 1
        return len(self.bodies) - 1

    def add_bodies(self, body_shapes: list, positions, **body) -> np.ndarray:
        """Bodies of the given shapes at positions ((n, 2) m), added in order as add_body
        would add them one by one, and what it stores for each the same to the bit; every
        keyword of add_body but `name`, each one value for all or one per body (velocity
        (2,) or (n, 2)). Everything is checked before anything is added: the first value
        that breaks add_body's rules raises add_body's error, named `keyword[i]`.

        Built as arrays: a million bodies take seconds where add_body took over a minute.
        Returns the new bodies' indices, (n,) int64."""
        n = len(body_shapes)
        values = _keyword_values(body, bulk=True)
        positions = as_vectors2(positions, "positions", n, MAX_COORDINATE)
        for keyword, value in values.items():
            with blamed_on(keyword):
                values[keyword] = BODY_RULES[keyword].check_many(value, keyword, n)
        mass, inertia = values["mass"], values["inertia"]
        kinds = np.fromiter((s.kind for s in body_shapes), np.int64, n)
        if inertia is None:  # the shapes'
            inertia = mass * np.fromiter((s.unit_inertia for s in body_shapes), np.float64, n)
        values["inertia"] = check_inertias(
            inertia,
            mass,
            derived=values["inertia"] is None,
            arealess=np.isin(kinds, shapes.AREALESS_KINDS),
        )
        # Rows of read-only arrays: one allocation, not two small arrays a body.
        positions.setflags(write=False)
        values["velocity"].setflags(write=False)
        # Python lists, as add_body stores Python floats (velocity stays (n, 2): its rows).
        columns = {
            _field(keyword): column.tolist()
            if isinstance(column, np.ndarray) and column.ndim == 1
            else column
            for keyword, column in values.items()
        }
        columns.update(shape=body_shapes, position=positions, name=[None] * n)
        first = len(self.bodies)
        # Positional, in Body's field order, through map: a body costs a microsecond or two.
        self.bodies.extend(map(Body, *(columns[f.name] for f in dataclasses.fields(Body))))
        return np.arange(first, first + n)

    def body_index(self, name: str) -> int:
        return _lookup_name(name, self._body_names, "body")

    def check_body(self, body, label: str = "body") -> int:
        return as_index(body, label, len(self.bodies), "bodies")

    def disable_collision(self, body_a, body_b):
        a = self.check_body(body_a, "body_a")
        b = self.check_body(body_b, "body_b")
        if a == b:
            raise ValueError(f"body_a and body_b must be different bodies, got {a} twice")
        self.no_collision.add((min(a, b), max(a, b)))

    def set_filter(
        self, body: int, collision_group=None, category_bits=None, mask_bits=None
    ) -> Body:
        """Change a body's collision filter (None keeps a setting; all checked first)."""
        b = self.bodies[body]
        group = (
            b.collision_group
            if collision_group is None
            else as_int32(collision_group, "collision_group")
        )
        category = (
            b.category_bits if category_bits is None else as_bits(category_bits, "category_bits")
        )
        mask = b.mask_bits if mask_bits is None else as_bits(mask_bits, "mask_bits")
        b.collision_group, b.category_bits, b.mask_bits = group, category, mask
        return b

    def add_group(self, name, members, self_collide: bool) -> int | None:
        """Register group `name`; returns the negative collision group its members share
        (None for a self-colliding group): one below every group a body has."""
        if not isinstance(name, str):
            raise TypeError(f"name must be a string, got {type(name).__name__}")
        if name in self.groups:
            raise ValueError(f"group name {name!r} is already used")
        self.groups[name] = tuple(int(m) for m in members)
        if self_collide:
            return None
        return min([b.collision_group for b in self.bodies] + [0]) - 1

    def group(self, name) -> tuple[int, ...]:
        if name not in self.groups:
            raise ValueError(f"group name {name!r}: no group has this name")
        return self.groups[name]

    def forget_group(self, name):
        self.group(name)
        del self.groups[name]

    # ------------------------------------------------------------------ joints
    def add_revolute(
        self,
        parent,
        child,
        anchor,
        angle_min,
        angle_max,
        control_mode,
        target,
        pid,
        max_effort,
        name,
        collide_connected,
    ) -> int:
        parent, child = self._check_joint_bodies(parent, child)
        anchor = as_vector2(anchor, "anchor")
        lower = as_real(angle_min, "angle_min")
        upper = as_real(angle_max, "angle_max")
        if lower > upper:
            raise ValueError(f"angle_min ({lower}) must be <= angle_max ({upper})")
        bp, bc = self.bodies[parent], self.bodies[child]
        world_anchor = bp.position + rotation(bp.angle) @ anchor
        anchor_child = rotation(bc.angle).T @ (world_anchor - bc.position)
        return self._add_joint(
            JOINT_REVOLUTE,
            parent,
            child,
            anchor,
            anchor_child,
            np.array([1.0, 0.0]),
            bc.angle - bp.angle,
            lower,
            upper,
            control_mode,
            target,
            pid,
            max_effort,
            name,
            collide_connected,
        )

    def add_prismatic(
        self,
        parent,
        child,
        axis,
        position_min,
        position_max,
        control_mode,
        target,
        pid,
        max_effort,
        name,
        collide_connected,
    ) -> int:
        parent, child = self._check_joint_bodies(parent, child)
        axis = as_vector2(axis, "axis")
        if np.hypot(*axis) < 1e-9:
            raise ValueError("axis must not be zero")
        lower = as_real(position_min, "position_min")
        upper = as_real(position_max, "position_max")
        if lower > upper:
            raise ValueError(f"position_min ({lower}) must be <= position_max ({upper})")
        bp, bc = self.bodies[parent], self.bodies[child]
        anchor_parent = rotation(bp.angle).T @ (bc.position - bp.position)
        return self._add_joint(
            JOINT_PRISMATIC,
            parent,
            child,
            anchor_parent,
            np.zeros(2),
            axis / np.hypot(*axis),
            bc.angle - bp.angle,
            lower,
            upper,
            control_mode,
            target,
            pid,
            max_effort,
            name,
            collide_connected,
        )

    def _check_joint_bodies(self, parent, child):
        parent = self.check_body(parent, "parent")
        child = self.check_body(child, "child")
        if parent == child:
            raise ValueError("parent and child must be different bodies")
        if self.bodies[parent].mass == 0 and self.bodies[child].mass == 0:
            raise ValueError("parent and child are both static")
        return parent, child

    def _add_joint(
        self,
        kind,
        parent,
        child,
        anchor_parent,
        anchor_child,
        axis,
        reference,
        lower,
        upper,
        control_mode,
        target,
        pid,
        max_effort,
        name,
        collide_connected,
    ) -> int:
        mode, gains, max_effort = motor_settings(control_mode, pid, max_effort)
        target = as_real(target, "target", limit=TARGET_LIMITS[mode])
        _check_new_name(name, self._joint_names, "joint")
        collide_connected = as_bool(collide_connected, "collide_connected")
        self.joints.append(
            Joint(
                kind,
                parent,
                child,
                np.asarray(anchor_parent, float),
                np.asarray(anchor_child, float),
                np.asarray(axis, float),
                float(reference),
                lower,
                upper,
                mode,
                gains,
                max_effort,
                target,
                name,
                collide_connected,
            )
        )
        if name is not None:
            self._joint_names[name] = len(self.joints) - 1
        return len(self.joints) - 1

    def joint_index(self, name: str) -> int:
        return _lookup_name(name, self._joint_names, "joint")

    def check_joint(self, joint) -> int:
        return as_index(joint, "joint", len(self.joints), "joints")

    def set_motor(self, joint: int, control_mode, pid=None, max_effort=None) -> Joint:
        """Change a joint's motor (checked whole first: a refused call changes nothing)."""
        j = self.joints[joint]
        mode, gains, effort = motor_settings(
            control_mode,
            j.pid if pid is None else pid,
            j.max_effort if max_effort is None else max_effort,
        )
        j.mode, j.pid, j.max_effort = mode, gains, effort
        return j

    # ------------------------------------------------------------------ device arrays
    def build_model(self) -> dict[str, dict[str, np.ndarray]]:
        """The model's device arrays by group and field (device.BodyModel, device.Joints)."""
        model = _empty_model(len(self.bodies))
        # Column by column from the bodies' attributes (a loop over bodies setting array
        # elements one by one took 5 us a body: 5 s for a million).
        _fill_materials(model, self.bodies)
        _fill_shapes(model, self.bodies)
        self._add_filters(model)
        return {"model": model, "joints": self._build_joints()}

    def _add_filters(self, model: dict[str, np.ndarray]):
        """The model's collision filters and mixing rules into `model` (build_model's, in
        place): sensor, bullet, collision_group, category_bits and mask_bits (n,) int32,
        the disabled pairs (filter_start (n + 1,), filters) and the two mixing rules (0-d)."""
        bodies, n = self.bodies, len(self.bodies)
        model["sensor"] = _column(bodies, "sensor", np.int32)
        model["bullet"] = _column(bodies, "bullet", np.int32)
        model["collision_group"] = _column(bodies, "collision_group", np.int32)
        for key in ("category_bits", "mask_bits"):  # the same 32 bits, as int32
            model[key] = _column(bodies, key, np.uint32).view(np.int32)
        # Per body, the bodies it never collides with (disable_collision), sorted.
        ends = sorted(
            [(a, b) for a, b in self.no_collision] + [(b, a) for a, b in self.no_collision]
        )
        model["filter_start"] = _starts([a for a, _ in ends], n)
        model["filters"] = np.array([b for _, b in ends], np.int32)
        # A builder pickled before the rules were settings has neither: Fx2D's rule.
        for key in ("friction_mixing", "restitution_mixing"):
            model[key] = np.array(MIXING_RULES[getattr(self, key, DEFAULT_MIXING)], np.int32)

    def _build_joints(self) -> dict[str, np.ndarray]:
        joints, n = self.joints, len(self.bodies)

        def column(attribute, dtype, width=None):
            values = np.array([getattr(j, attribute) for j in joints], dtype)
            return values if width is None else values.reshape(-1, width)

        arrays = {
            "kind": column("kind", np.int32),
            "parent": column("parent", np.int32),
            "child": column("child", np.int32),
            "anchor_parent": column("anchor_parent", np.float32, 2),
            "anchor_child": column("anchor_child", np.float32, 2),
            "axis": column("axis", np.float32, 2),
            "reference_angle": column("reference_angle", np.float32),
            "lower": column("lower", np.float32),
            "upper": column("upper", np.float32),
            "mode": column("mode", np.int32),
            "pid": column("pid", np.float32, 3),
            "max_effort": column("max_effort", np.float32),
            "collide": column("collide_connected", np.int32),
        }
        # Per body, its joints (for motor loads and for skipping joined pairs).
        ends = sorted(
            [(j.parent, k) for k, j in enumerate(joints)]
            + [(j.child, k) for k, j in enumerate(joints)]
        )
        arrays["body_joint_start"] = _starts([b for b, _ in ends], n)
        arrays["body_joints"] = np.array([k for _, k in ends], np.int32)
        arrays["body_has_joint"] = (np.diff(arrays["body_joint_start"]) > 0).astype(np.int32)
        return arrays

    def initial_state(self, n_worlds: int) -> dict[str, dict[str, np.ndarray]]:
        """Saved device state (device.BodyState, device.Joints) of every world at the bodies'
        and joints' initial values."""
        bodies, w = self.bodies, n_worlds
        pos = np.array([b.position for b in bodies], np.float32).reshape(-1, 2)
        ang = np.array([b.angle for b in bodies], np.float32)
        vel = np.array([b.velocity for b in bodies], np.float32).reshape(-1, 2)
        omega = np.array([b.angular_velocity for b in bodies], np.float32)
        n = w * len(bodies)
        state = {
            "position": np.tile(pos[None], (w, 1, 1)).reshape(-1, 2),
            "angle": np.tile(ang[None], (w, 1)).reshape(-1),
            "velocity": np.tile(vel[None], (w, 1, 1)).reshape(-1, 2),
            "angular_velocity": np.tile(omega[None], (w, 1)).reshape(-1),
            "force": np.zeros((n, 2), np.float32),
            "torque": np.zeros(n, np.float32),
            "sleeping": np.zeros(n, np.int32),
            "sleep_time": np.zeros(n, np.float32),
            "island": np.arange(n, dtype=np.int32),  # each body its own island
            "support": np.zeros(n, np.int32),  # none counted before the first step
            "enabled": np.tile(np.array([int(b.enabled) for b in bodies], np.int32), w),
        }
        nj = len(self.joints)
        targets = np.tile(np.array([j.target for j in self.joints], np.float32), (w, 1))
        joint_state = {
            "target": targets.reshape(-1),
            "integral": np.zeros(w * nj, np.float32),
            "prev_error": np.zeros(w * nj, np.float32),
            "pid_started": np.zeros(w * nj, np.int32),
            "soft_impulse": np.zeros((w * nj, 4), np.float32),
        }
        return {"bodies": state, "joints": joint_state}

    def cell_size(self) -> float:
        """Level-0 grid cell, m: the median shape diameter (Shape.diameter; sizes far from it
        go up levels)."""
        return cell_size_of([b.shape for b in self.bodies])


def cell_size_of(body_shapes: list) -> float:
    """The level-0 grid cell (m) of a world of these shapes: their median diameter
    (Shape.diameter), 1 for none. One rule for a scene's cell and each world's own
    (world_shapes.py), so that a world of a batch pairs as a one-world scene would."""
    diameters = [shape.diameter for shape in body_shapes]
    return float(np.median(diameters)) if diameters else 1.0


def _column(items, attribute: str, dtype) -> np.ndarray:
    """(len(items),) array of `dtype`: each item's `attribute`."""
    return np.fromiter(map(operator.attrgetter(attribute), items), dtype, len(items))


def _empty_model(n: int) -> dict[str, np.ndarray]:
    """The body model's material and shape fields for n bodies, zero (build_model fills
    them; the fields' order is the model's)."""
    model = {
        name: np.zeros(n, np.float32)
        for name in (*MATERIAL_FIELDS, "shape_radius", "bounding_radius")
    }
    model.update(
        kinematic=np.zeros(n, np.int32),
        shape_kind=np.zeros(n, np.int32),
        shape_center=np.zeros((n, 2), np.float32),
        shape_vertex_count=np.zeros(n, np.int32),
        shape_vertices=np.zeros((n, MAX_POLYGON_VERTICES, 2), np.float32),
        shape_normals=np.zeros((n, MAX_POLYGON_VERTICES, 2), np.float32),
    )
    return model


def _fill_materials(model: dict[str, np.ndarray], bodies: list[Body]):
    """`bodies`' kinematic flags and material rows (material_rows) into `model`
    (_empty_model's, in place)."""
    mass = _column(bodies, "mass", np.float64)
    driven = _column(bodies, "external_forces", bool)
    model["kinematic"][:] = (mass > 0.0) & ~driven
    keys = (
        "mass",
        "inertia",
        "gravity_scale",
        "vel_damping",
        "elasticity",
        "static_friction",
        "dynamic_friction",
    )
    model.update(material_rows({key: _column(bodies, key, np.float64) for key in keys}, driven))


def _fill_shapes(model: dict[str, np.ndarray], bodies: list[Body]):
    """`bodies`' shapes into `model` (_empty_model's, in place): shape_rows."""
    body_shapes = _column(bodies, "shape", object)
    _write_shape_rows(model, body_shapes, _column(bodies, "collides", bool))


#: The body model's material fields (material_rows'; by material row: world_params.py).
MATERIAL_FIELDS = (
    "inv_mass",
    "inv_inertia",
    "gravity_scale",
    "damping",
    "elasticity",
    "static_friction",
    "dynamic_friction",
)
#: The shape fields of device.BodyModel, by shape row (bodies.shape_row).
SHAPE_FIELDS = (
    "shape_radius",
    "bounding_radius",
    "shape_kind",
    "shape_center",
    "shape_vertex_count",
    "shape_vertices",
    "shape_normals",
)


def shape_rows(body_shapes, collides: np.ndarray) -> dict[str, np.ndarray]:
    """The shape fields (SHAPE_FIELDS) of one row per shape: kind (SHAPE_NONE where
    `collides` is False), radii (m), centre (m), vertices and normals, a chain link's
    contact-normal bounds after its normals. One rule for a built scene's model rows and
    for per-world rows (world_shapes.py), so that they agree to the bit."""
    n = len(body_shapes)
    model = {key: value for key, value in _empty_model(n).items() if key in SHAPE_FIELDS}
    _write_shape_rows(model, list(body_shapes), collides)
    return model


def shape_array_rows(geometry: shapes.ShapeArrays, collides: bool) -> dict[str, np.ndarray]:
    """shape_rows of the n shapes of one kind and vertex count in `geometry`
    (shapes.ShapeArrays: a body's shapes over a batch's worlds), the same fields and floats,
    without a Shape per row. Not chain links (a body resized per world is not one)."""
    n, k = len(geometry), geometry.vertices.shape[1]
    model = {key: value for key, value in _empty_model(n).items() if key in SHAPE_FIELDS}
    model["shape_kind"][:] = shapes.core_kind(geometry.kind) if collides else shapes.SHAPE_NONE
    model["shape_radius"][:] = geometry.radius
    model["bounding_radius"][:] = geometry.bounding_radius
    model["shape_center"][:] = geometry.center
    model["shape_vertex_count"][:] = k
    model["shape_vertices"][:, :k] = geometry.vertices
    model["shape_normals"][:, :k] = geometry.normals
    return model


def _write_shape_rows(model: dict[str, np.ndarray], body_shapes, collides):
    """shape_rows' fields of `body_shapes` (n Shapes, a sequence) into `model`'s arrays of
    n rows, in place."""
    n = len(body_shapes)
    model["shape_kind"][:] = np.where(
        collides, _column(body_shapes, "core_kind", np.int32), shapes.SHAPE_NONE
    )
    model["shape_radius"][:] = _column(body_shapes, "radius", np.float64)
    model["bounding_radius"][:] = _column(body_shapes, "bounding_radius", np.float64)
    model["shape_center"][:] = np.array([s.center for s in body_shapes]).reshape(n, 2)
    counts = np.fromiter((len(s.vertices) for s in body_shapes), np.int64, n)
    model["shape_vertex_count"][:] = counts
    for k in np.unique(counts[counts > 0]).tolist():
        rows = np.flatnonzero(counts == k)
        model["shape_vertices"][rows, :k] = [body_shapes[i].vertices for i in rows]
        model["shape_normals"][rows, :k] = [body_shapes[i].normals for i in rows]
    for i, s in enumerate(body_shapes):
        if len(s.cones):  # a chain link: its contact-normal bounds after its normals
            model["shape_normals"][i, counts[i] : counts[i] + 2] = s.cones


def material_rows(values: dict[str, np.ndarray], driven: np.ndarray) -> dict[str, np.ndarray]:
    """The material fields of device.BodyModel (float32 rows) from the bodies' values
    (`values`: mass, inertia, gravity_scale, vel_damping, elasticity, static_friction,
    dynamic_friction, each (rows,) float64 in the user's units; `driven`: (rows,) bool,
    external forces enabled). One rule for a built scene's model rows and for per-world
    rows (world_params.py), so that they agree to the bit."""
    mass = values["mass"]
    dynamic = (mass > 0.0) & driven
    rows = {key: np.zeros(len(mass), np.float32) for key in MATERIAL_FIELDS}
    rows["inv_mass"][dynamic] = 1.0 / mass[dynamic]
    rows["inv_inertia"][dynamic] = 1.0 / values["inertia"][dynamic]
    for key, param in (
        ("gravity_scale", "gravity_scale"),
        ("damping", "vel_damping"),
        ("elasticity", "elasticity"),
        ("static_friction", "static_friction"),
        ("dynamic_friction", "dynamic_friction"),
    ):
        rows[key][:] = values[param]
    return rows


def check_targets(target, n_worlds: int, mode: int = MOTOR_NONE) -> np.ndarray:
    """Motor targets (n_worlds,) float64 from one number (for every world) or (n_worlds,).

    Args:
        target (float | array_like): rad, rad/s, N m, m, m/s or N, as the motor reads it.
        n_worlds: the scene's worlds.
        mode: the joint's control mode (enums.MOTOR_*): the bound on the target's
            magnitude is TARGET_LIMITS[mode] (MAX_COORDINATE for position, MAX_SPEED for
            velocity, float32's range for effort and for no motor).

    Raises:
        TypeError: a target that is not a real number (a bool, complex number or string).
        ValueError: targets of another shape, not finite, or beyond the mode's bound; the
            first such world's value is named `target[i]`.
    """
    return as_reals(as_scalar(target), "target", n_worlds, limit=TARGET_LIMITS[mode])


def check_mode_targets(joint: int, control_mode, targets: np.ndarray):
    """Refuse a change of `joint`'s motor to `control_mode` while a world's target
    (targets: (n_worlds,)) is beyond what that mode's motor may be given (TARGET_LIMITS: a
    1e30 N m effort target is no position); a mode that is not one is left to set_motor.

    Raises:
        ValueError: naming the joint, its largest target and the mode's bound.
    """
    if control_mode not in MOTOR_MODES:
        return
    limit = TARGET_LIMITS[MOTOR_MODES[control_mode]]
    largest = float(np.abs(targets).max(initial=0.0))
    if largest >= limit:
        raise ValueError(
            f"joint {joint}'s target {largest:g} is beyond what a {control_mode} "
            f"motor may be given (+-{limit:g}); set_joint_target first"
        )


def check_forces(force, torque, n_worlds: int) -> tuple[np.ndarray, np.ndarray]:
    """(force (n_worlds, 2) N, torque (n_worlds,) N m) from one value for every world or one
    per world, real numbers, finite and within float32's range.

    Raises:
        TypeError: a value that is not a real number (a bool, complex number or string).
        ValueError: a value of another shape, not finite or beyond float32's range.
    """
    # as_real_array first: as_vectors2 takes one pair through NumPy's float conversion,
    # which parses strings and drops imaginary parts.
    f = as_vectors2(as_real_array(force, "force"), "force", n_worlds)
    return f, as_reals(as_scalar(torque), "torque", n_worlds)


def add_forces(
    pending: tuple | None, force: np.ndarray, torque: np.ndarray, body: int
) -> tuple[np.ndarray, np.ndarray]:
    """The sums of the forces and torques pending for `body` (pending: (force, torque), or
    None where none are) and these (from check_forces).

    The sum goes to the device as float32: beyond its range it would arrive as inf and
    the step fault, so the call whose sum would leave it is refused, and nothing is added.

    Raises:
        ValueError: a component of the sum beyond float32's range, naming force or torque.
    """
    if pending is None:
        return force, torque  # checked within float32's range (check_forces)
    total_f, total_t = pending[0] + force, pending[1] + torque
    for name, total in (("force", total_f), ("torque", total_t)):
        if not all_within(total):
            raise ValueError(
                f"{name}: the {name}s applied to body {body} before the next "
                f"step would add up beyond float32's range "
                f"(|x| <= {FLOAT32_MAX:g})"
            )
    return total_f, total_t


def check_state(state, n_worlds: int, n_bodies: int) -> dict[str, np.ndarray]:
    """The arrays of a State (see records.State) checked against the layout: shapes, real
    numbers (not complex, strings or bools), finite and within MAX_COORDINATE (position,
    angle) or MAX_SPEED (velocities); sleeping as bools (see as_flags).

    Raises:
        TypeError: an array that is not of real numbers, or sleeping not of flags.
        ValueError: an array of another shape, not finite or beyond its bound, or a
            sleeping flag other than 0 and 1; each named, e.g. state.position.
    """
    w, nb = n_worlds, n_bodies
    expected = {
        "position": (w, nb, 2),
        "angle": (w, nb),
        "velocity": (w, nb, 2),
        "angular_velocity": (w, nb),
        "sleeping": (w, nb),
    }
    limits = {
        "position": MAX_COORDINATE,
        "angle": MAX_COORDINATE,
        "velocity": MAX_SPEED,
        "angular_velocity": MAX_SPEED,
    }
    arrays = {}
    for key, shape in expected.items():
        name = f"state.{key}"
        try:
            value = np.asarray(getattr(state, key))
        except ValueError:
            raise TypeError(f"{name} must be an array, got a ragged sequence") from None
        if value.shape != shape:
            raise ValueError(f"{name} must have shape {shape}, got {value.shape}")
        if key == "sleeping":
            arrays[key] = as_flags(value, name)
            continue
        value = as_real_array(value, name)
        if not np.all(np.isfinite(value)):
            raise ValueError(f"{name} must be finite")
        if np.abs(value).max(initial=0.0) >= limits[key]:
            raise ValueError(f"{name} must be within +-{limits[key]:g}")
        arrays[key] = value
    return arrays


def _starts(owners: list[int], n: int) -> np.ndarray:
    """(n + 1,) exclusive prefix sum of how many entries each of n owners has (sorted)."""
    counts = np.bincount(np.asarray(owners, np.int64), minlength=n)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)


def motor_settings(control_mode, pid, max_effort) -> tuple[int, tuple, float]:
    """(mode, (p, i, d), max effort) of a motor, checked; TypeError/ValueError naming the
    argument otherwise. The gains are real numbers within float32's range (beyond it a
    gain is inf on the device, and inf x 0 error a NaN effort); max_effort (inf:
    unlimited) is capped at float32's range."""
    if control_mode not in MOTOR_MODES:
        raise ValueError(f"control_mode must be one of {list(MOTOR_MODES)}, got {control_mode!r}")
    try:
        gains = tuple(pid)
    except TypeError:
        raise TypeError(f"pid must be three numbers (p, i, d), got {pid!r}") from None
    if len(gains) != 3:
        raise ValueError(f"pid must be three numbers (p, i, d), got {pid!r}")
    gains = tuple(as_real(g, f"pid[{i}]") for i, g in enumerate(gains))
    if isinstance(max_effort, bool) or not isinstance(
        max_effort, (int, float, np.integer, np.floating)
    ):
        raise TypeError(f"max_effort must be a number, got {type(max_effort).__name__}")
    if not max_effort > 0:
        raise ValueError(f"max_effort must be positive, got {max_effort}")
    return MOTOR_MODES[control_mode], gains, float(min(max_effort, FLOAT32_MAX))


def _check_new_name(name, taken: dict, kind: str):
    """A new body or joint name: None, or a string no other `kind` uses."""
    if name is None:
        return
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    if name in taken:
        raise ValueError(f"{kind} name {name!r} is already used (by {kind} {taken[name]})")


def _lookup_name(name, taken: dict, kind: str) -> int:
    if name not in taken:
        raise ValueError(f"{kind} name {name!r}: no {kind} has this name")
    return taken[name]
