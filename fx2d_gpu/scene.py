"""Scene: the user's entry point (builder, stepping, state in and out)."""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np

from . import device, runtime, shapes
from .collision.broad_phase import find_pairs
from .collision.narrow_phase import compute_manifolds
from .device import MAX_MANIFOLD_POINTS
from .integrate import clear_forces
from .shapes import MAX_POLYGON_VERTICES, as_real, as_vector2
from .solver.coloring import color_constraints, coloring_still_valid
from .solver.contacts import SPECULATIVE_DISTANCE
from .solver.joints import JOINT_PRISMATIC, JOINT_REVOLUTE, MOTOR_MODES
from .solver.sleep import update_sleep, wake_islands
from .solver.step import (
    build_body_contacts,
    carry_contacts,
    gather_pairs,
    order_pairs_by_color,
    run_substep,
    save_previous_pairs,
)

#: Fx2D's time-step bounds, s: below MIN_DT step() raises, above MAX_DT it is clamped.
MIN_DT = 1e-3
MAX_DT = 0.06

# Device fields that make up a scene's dynamic state, saved when another scene takes the pool.
_STATE_FIELDS = ("body_position", "body_angle", "body_velocity", "body_angular_velocity",
                 "body_force", "body_torque", "body_sleeping", "body_sleep_time", "body_island")
_JOINT_STATE_FIELDS = ("joint_target", "joint_integral", "joint_prev_error",
                       "joint_pid_started")
_PAIR_FIELDS = ("pair_origin", "pair_body_a", "pair_body_b", "contact_point_count",
                "contact_normal", "contact_point", "contact_depth", "contact_feature",
                "contact_normal_impulse", "contact_tangent_impulse")


#: Smallest mass (kg) and moment of inertia (kg m^2) of a dynamic body: their inverses, and
#: the impulses they scale, must stay inside float32 on the device.
MIN_MASS = 1e-12
MIN_INERTIA = 1e-30


@dataclass
class State:
    """A copy of the scene's dynamic state, world first.

    position: (n_worlds, n_bodies, 2) centre of mass, m. angle: (n_worlds, n_bodies), rad.
    velocity: (n_worlds, n_bodies, 2), m/s. angular_velocity: (n_worlds, n_bodies), rad/s.
    sleeping: (n_worlds, n_bodies) bool.
    """

    position: np.ndarray
    angle: np.ndarray
    velocity: np.ndarray
    angular_velocity: np.ndarray
    sleeping: np.ndarray

    def copy(self) -> State:
        return State(*(np.array(a, copy=True) for a in
                       (self.position, self.angle, self.velocity, self.angular_velocity,
                        self.sleeping)))


@dataclass
class Contacts:
    """Contact manifolds of one world, one row per touching pair.

    body_a, body_b: (m,) body indices, body_a < body_b. normal: (m, 2) unit, from a to b.
    point_count: (m,) 1 or 2. points: (m, 2, 2) world points, m (rows past point_count are
    unused). depths: (m, 2) penetration per point, m. features: (m, 2) feature ids.
    """

    world: np.ndarray
    body_a: np.ndarray
    body_b: np.ndarray
    normal: np.ndarray
    point_count: np.ndarray
    points: np.ndarray
    depths: np.ndarray
    features: np.ndarray

    def __len__(self) -> int:
        return len(self.body_a)

    @property
    def depth(self) -> np.ndarray:
        """(m,) deepest penetration of each manifold, m."""
        masked = np.where(np.arange(MAX_MANIFOLD_POINTS)[None, :] < self.point_count[:, None],
                          self.depths, -np.inf)
        return masked.max(axis=1) if len(self) else np.zeros(0)


@dataclass
class _Body:
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


@dataclass
class _Joint:
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


@dataclass
class JointState:
    """Joint coordinates per world: position (n_worlds, n_joints) is the relative angle (rad,
    revolute) or the travel along the axis (m, prismatic); rate is its time derivative."""

    position: np.ndarray
    rate: np.ndarray


class Scene:
    """A 2D rigid-body scene, simulated as `n_worlds` independent copies on one device.

    Bodies are added with add_circle / add_box / add_polygon; the device arrays are built
    from them on the first step (bodies added later rebuild them, keeping the state).
    """

    def __init__(self, gravity=(0.0, -9.81), substeps: int = 11, n_worlds: int = 1,
                 arch: str = "auto", enable_sleep: bool = True):
        self._gravity = as_vector2(gravity, "gravity")
        self.enable_sleep = _as_bool(enable_sleep, "enable_sleep")  # False: never sleep
        if isinstance(substeps, bool) or not isinstance(substeps, (int, np.integer)):
            raise TypeError(f"substeps must be an int, got {type(substeps).__name__}")
        if substeps < 1:
            raise ValueError(f"substeps must be >= 1, got {substeps}")
        if isinstance(n_worlds, bool) or not isinstance(n_worlds, (int, np.integer)):
            raise TypeError(f"n_worlds must be an int, got {type(n_worlds).__name__}")
        if n_worlds < 1:
            raise ValueError(f"n_worlds must be >= 1, got {n_worlds}")
        self.backend = runtime.ensure_initialized(arch)
        self.substeps = int(substeps)
        self._n_worlds = int(n_worlds)
        self._bodies: list[_Body] = []
        self._names: dict[str, int] = {}
        self._joints: list[_Joint] = []
        self._joint_names: dict[str, int] = {}
        self._built_joints = 0
        self._no_collision: set[tuple[int, int]] = set()  # pairs from disable_collision
        self._built_no_collision = 0  # of those, how many the device arrays hold
        self._pending_targets: dict[int, np.ndarray] = {}  # set before the arrays exist
        self.meta: dict = {}  # viewer data from a scene file: size (m), background
        self.visuals: list | None = None  # per body, from a scene file (see io.scene_yaml)
        self._host_joint_state: dict[str, np.ndarray] | None = None
        self._weakref = weakref.ref(self, lambda _: None)
        self._built_bodies = 0  # bodies present in the device arrays (0: not built)
        self._host_state: dict[str, np.ndarray] | None = None  # state while not resident
        self._model: dict[str, np.ndarray] | None = None
        self._forget_pairs()
        self._pending_forces: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._forces_on_device = False
        self._pair_need = 0
        self._entry_need = 0
        self.time = 0.0
        self.step_count = 0
        self.n_colors = 0  # parallel colours used by the last step
        self.n_overflow = 0  # constraints the last step solved serially (overflow colour)
        self.colorings = 0  # steps that coloured their constraints (others reused the last)
        self.scratch_colorings = 0  # of those, the ones that did not start from the last
        self.lost_bodies = 0  # bodies left out of collision for a non-finite pose

    # ------------------------------------------------------------------ building
    @property
    def n_bodies(self) -> int:
        return len(self._bodies)

    @property
    def n_worlds(self) -> int:
        return self._n_worlds

    @property
    def gravity(self) -> tuple[float, float]:
        return (float(self._gravity[0]), float(self._gravity[1]))

    def add_circle(self, position, radius, **body) -> int:
        """A solid disc of `radius` (m) centred at `position` (m). Returns its body index."""
        return self._add(shapes.circle(radius), as_vector2(position, "position"), **body)

    def add_box(self, position, size, **body) -> int:
        """A box of size (width, height) (m) centred at `position`. Returns its body index."""
        return self._add(shapes.box(size), as_vector2(position, "position"), **body)

    def add_polygon(self, position, vertices, **body) -> int:
        """A convex polygon; `vertices` (k, 2) in the body frame, 3 <= k <= 8, either winding.

        The vertices are re-centred on the polygon's centroid, which goes to `position`.
        """
        shape, _ = shapes.polygon(vertices)
        return self._add(shape, as_vector2(position, "position"), **body)

    def _add(self, shape, position, *, collides=True, angle=0.0, velocity=(0.0, 0.0),
             angular_velocity=0.0,
             mass=1.0, inertia=None, elasticity=0.1, static_friction=0.0,
             dynamic_friction=0.0, gravity_scale=1.0, vel_damping=0.0, name=None,
             external_forces_enabled=True) -> int:
        mass = as_real(mass, "mass", minimum=0.0)
        # By its bits: once Taichi's kernels have run, the CPU may treat subnormal floats
        # as zero (DAZ), and 1e-320 > 0 is then False.
        if mass < MIN_MASS and np.float64(mass).view(np.uint64) & ~np.uint64(1 << 63):
            raise ValueError(f"mass must be 0 (static) or >= {MIN_MASS} kg, got {mass}")
        if inertia is None:
            inertia = mass * shapes.unit_inertia(shape)
        else:
            inertia = as_real(inertia, "inertia", positive=True)
        if mass > 0.0 and inertia < MIN_INERTIA:
            raise ValueError(f"inertia must be >= {MIN_INERTIA} kg m^2, got {inertia}")
        _check_new_name(name, self._names, "body")
        body = _Body(
            shape=shape, position=position, angle=as_real(angle, "angle"),
            velocity=as_vector2(velocity, "velocity"),
            angular_velocity=as_real(angular_velocity, "angular_velocity"),
            mass=mass, inertia=inertia if mass > 0.0 else math.inf,
            elasticity=as_real(elasticity, "elasticity", minimum=0.0),
            static_friction=as_real(static_friction, "static_friction", minimum=0.0),
            dynamic_friction=as_real(dynamic_friction, "dynamic_friction", minimum=0.0),
            gravity_scale=as_real(gravity_scale, "gravity_scale"),
            vel_damping=as_real(vel_damping, "vel_damping", minimum=0.0),
            name=name, external_forces=_as_bool(external_forces_enabled,
                                                "external_forces_enabled"),
            collides=collides,
        )
        self._bodies.append(body)
        if name is not None:
            self._names[name] = len(self._bodies) - 1
        return len(self._bodies) - 1

    def body_index(self, name: str) -> int:
        """Index of the body added with `name`."""
        return _lookup_name(name, self._names, "body")

    def body_inertia(self, body: int) -> float:
        """Moment of inertia about the centre of mass, kg m² (inf for static bodies)."""
        return self._bodies[self._check_body(body)].inertia

    def body_shape(self, body: int) -> shapes.Shape:
        """The body's collision shape in its body frame (see fx2d_gpu.shapes.Shape)."""
        return self._bodies[self._check_body(body)].shape

    def body_mass(self, body: int) -> float:
        """Mass, kg (0 for static bodies)."""
        return self._bodies[self._check_body(body)].mass

    # ------------------------------------------------------------------ joints
    @property
    def n_joints(self) -> int:
        return len(self._joints)

    def add_revolute_joint(self, parent, child, anchor=(0.0, 0.0), angle_min=-math.pi,
                           angle_max=math.pi, control_mode=None, target=0.0,
                           pid=(1.0, 0.0, 0.0), max_effort=math.inf, name=None,
                           collide_connected=False) -> int:
        """A hinge at `anchor` (parent frame, m); relative angle limited to [min, max] (rad).

        Limits of +-pi (the default) leave the rotation free. A motor (control_mode
        "position" | "velocity" | "effort") drives the child's angle relative to the parent.
        """
        parent, child = self._check_joint_bodies(parent, child)
        anchor = as_vector2(anchor, "anchor")
        lower = as_real(angle_min, "angle_min")
        upper = as_real(angle_max, "angle_max")
        if lower > upper:
            raise ValueError(f"angle_min ({lower}) must be <= angle_max ({upper})")
        bp, bc = self._bodies[parent], self._bodies[child]
        world_anchor = bp.position + _rotation(bp.angle) @ anchor
        anchor_child = _rotation(bc.angle).T @ (world_anchor - bc.position)
        return self._add_joint(JOINT_REVOLUTE, parent, child, anchor, anchor_child,
                               np.array([1.0, 0.0]), bc.angle - bp.angle, lower, upper,
                               control_mode, target, pid, max_effort, name, collide_connected)

    def add_prismatic_joint(self, parent, child, axis=(1.0, 0.0), position_min=-1000.0,
                            position_max=1000.0, control_mode=None, target=0.0,
                            pid=(1.0, 0.0, 0.0), max_effort=math.inf, name=None,
                            collide_connected=False) -> int:
        """A slider: the child moves along `axis` (parent frame) without turning relative to
        the parent; travel (m, 0 where the child starts) limited to [min, max]."""
        parent, child = self._check_joint_bodies(parent, child)
        axis = as_vector2(axis, "axis")
        if np.hypot(*axis) < 1e-9:
            raise ValueError("axis must not be zero")
        lower = as_real(position_min, "position_min")
        upper = as_real(position_max, "position_max")
        if lower > upper:
            raise ValueError(f"position_min ({lower}) must be <= position_max ({upper})")
        bp, bc = self._bodies[parent], self._bodies[child]
        anchor_parent = _rotation(bp.angle).T @ (bc.position - bp.position)
        return self._add_joint(JOINT_PRISMATIC, parent, child, anchor_parent, np.zeros(2),
                               axis / np.hypot(*axis), bc.angle - bp.angle, lower, upper,
                               control_mode, target, pid, max_effort, name, collide_connected)

    def disable_collision(self, body_a: int, body_b: int):
        """The two bodies never collide (in every world), as joined bodies do not; for rigs
        whose parts overlap or touch by design. Takes effect from the next step()."""
        a = _as_index(body_a, "body_a", self.n_bodies, "bodies")
        b = _as_index(body_b, "body_b", self.n_bodies, "bodies")
        if a == b:
            raise ValueError(f"body_a and body_b must be different bodies, got {a} twice")
        self._no_collision.add((min(a, b), max(a, b)))

    def _check_joint_bodies(self, parent, child):
        parent = _as_index(parent, "parent", self.n_bodies, "bodies")
        child = _as_index(child, "child", self.n_bodies, "bodies")
        if parent == child:
            raise ValueError("parent and child must be different bodies")
        if self._bodies[parent].mass == 0 and self._bodies[child].mass == 0:
            raise ValueError("parent and child are both static")
        return parent, child

    def _add_joint(self, kind, parent, child, anchor_parent, anchor_child, axis, reference,
                   lower, upper, control_mode, target, pid, max_effort, name,
                   collide_connected) -> int:
        mode, gains, max_effort = _motor_settings(control_mode, pid, max_effort)
        target = as_real(target, "target")
        _check_new_name(name, self._joint_names, "joint")
        self._joints.append(_Joint(kind, parent, child, np.asarray(anchor_parent, float),
                                   np.asarray(anchor_child, float), np.asarray(axis, float),
                                   float(reference), lower, upper, mode, gains, max_effort,
                                   target, name,
                                   _as_bool(collide_connected, "collide_connected")))
        if name is not None:
            self._joint_names[name] = len(self._joints) - 1
        return len(self._joints) - 1

    def joint_index(self, name: str) -> int:
        """Index of the joint added with `name`."""
        return _lookup_name(name, self._joint_names, "joint")

    def _check_joint(self, joint) -> int:
        return _as_index(joint, "joint", self.n_joints, "joints")

    def set_joint_target(self, joint: int, target):
        """The motor's target: rad, rad/s or N m (revolute); m, m/s or N (prismatic).

        target: a scalar for every world, or an array of shape (n_worlds,).
        """
        joint = self._check_joint(joint)
        values = np.asarray(target, dtype=np.float64)
        if values.shape == ():
            values = np.full(self._n_worlds, float(values))
        if values.shape != (self._n_worlds,):
            raise ValueError(f"target must be a scalar or have shape ({self._n_worlds},), "
                             f"got {values.shape}")
        if not np.all(np.isfinite(values)):
            raise ValueError("target must be finite")
        if self._built_joints != self.n_joints or self._built_bodies != self.n_bodies:
            self._pending_targets[joint] = values  # applied when the arrays are built
            return
        pool = self._device()
        device.write_joint_target(pool, joint, self.n_joints, self.n_bodies,
                                  values.astype(np.float32))

    def set_joint_mode(self, joint: int, control_mode, pid=None, max_effort=None):
        """Change a motor's mode (None | "position" | "velocity" | "effort") and optionally its
        gains; the PID's integral and derivative state restart in every world."""
        joint = self._check_joint(joint)
        j = self._joints[joint]
        # Everything is checked before anything changes: a refused call leaves the joint as
        # it was.
        mode, gains, effort = _motor_settings(control_mode, j.pid if pid is None else pid,
                                              j.max_effort if max_effort is None else max_effort)
        j.mode, j.pid, j.max_effort = mode, gains, effort
        if self._model is not None and self._built_joints == self.n_joints:
            self._model["joint_mode"][joint] = j.mode  # what a reload of the model uploads
            self._model["joint_pid"][joint] = j.pid
            self._model["joint_max_effort"][joint] = j.max_effort
        if self._built_joints == self.n_joints and self._built_bodies == self.n_bodies:
            pool = self._device()
            device.write_joint_mode(pool, joint, self.n_joints, self._n_worlds, self.n_bodies,
                                    j.mode, list(j.pid), j.max_effort)

    def joint_anchors(self) -> np.ndarray:
        """(n_worlds, n_joints, 2, 2) world positions (m) of each joint's parent anchor and
        child anchor; they coincide while a revolute joint holds."""
        s = self.get_state()
        out = np.zeros((self._n_worlds, self.n_joints, 2, 2))
        for j, joint in enumerate(self._joints):
            for k, (body, local) in enumerate(((joint.parent, joint.anchor_parent),
                                               (joint.child, joint.anchor_child))):
                c, sn = np.cos(s.angle[:, body]), np.sin(s.angle[:, body])
                out[:, j, k, 0] = s.position[:, body, 0] + c * local[0] - sn * local[1]
                out[:, j, k, 1] = s.position[:, body, 1] + sn * local[0] + c * local[1]
        return out

    def joint_state(self) -> JointState:
        """Joint coordinates and rates of every world (see JointState)."""
        s = self.get_state()
        w, nj = self._n_worlds, self.n_joints
        position, rate = np.zeros((w, nj)), np.zeros((w, nj))
        for j, joint in enumerate(self._joints):
            pa, ca = s.angle[:, joint.parent], s.angle[:, joint.child]
            if joint.kind == JOINT_REVOLUTE:
                position[:, j] = ca - pa - joint.reference_angle
                rate[:, j] = (s.angular_velocity[:, joint.child]
                              - s.angular_velocity[:, joint.parent])
            else:
                c, sn = np.cos(pa), np.sin(pa)
                axis = np.stack([c * joint.axis[0] - sn * joint.axis[1],
                                 sn * joint.axis[0] + c * joint.axis[1]], axis=1)
                anchor = np.stack([c * joint.anchor_parent[0] - sn * joint.anchor_parent[1],
                                   sn * joint.anchor_parent[0] + c * joint.anchor_parent[1]],
                                  axis=1) + s.position[:, joint.parent]
                position[:, j] = ((s.position[:, joint.child] - anchor) * axis).sum(1)
                rate[:, j] = ((s.velocity[:, joint.child] - s.velocity[:, joint.parent])
                              * axis).sum(1)
        return JointState(position, rate)

    # ------------------------------------------------------------------ device arrays
    def _build_model(self) -> dict[str, np.ndarray]:
        n = self.n_bodies
        model = {
            "body_inv_mass": np.zeros(n, np.float32),
            "body_inv_inertia": np.zeros(n, np.float32),
            "body_kinematic": np.zeros(n, np.int32),
            "body_gravity_scale": np.zeros(n, np.float32),
            "body_damping": np.zeros(n, np.float32),
            "body_elasticity": np.zeros(n, np.float32),
            "body_static_friction": np.zeros(n, np.float32),
            "body_dynamic_friction": np.zeros(n, np.float32),
            "shape_kind": np.zeros(n, np.int32),
            "shape_radius": np.zeros(n, np.float32),
            "shape_center": np.zeros((n, 2), np.float32),
            "shape_vertex_count": np.zeros(n, np.int32),
            "shape_vertices": np.zeros((n, MAX_POLYGON_VERTICES, 2), np.float32),
            "shape_normals": np.zeros((n, MAX_POLYGON_VERTICES, 2), np.float32),
        }
        self._build_joint_model(model)
        for i, b in enumerate(self._bodies):
            if b.mass > 0.0 and b.external_forces:
                model["body_inv_mass"][i] = 1.0 / b.mass
                model["body_inv_inertia"][i] = 1.0 / b.inertia
            model["body_kinematic"][i] = int(b.mass > 0.0 and not b.external_forces)
            model["body_gravity_scale"][i] = b.gravity_scale
            model["body_damping"][i] = b.vel_damping
            model["body_elasticity"][i] = b.elasticity
            model["body_static_friction"][i] = b.static_friction
            model["body_dynamic_friction"][i] = b.dynamic_friction
            s = b.shape
            model["shape_kind"][i] = s.kind if b.collides else shapes.SHAPE_NONE
            model["shape_radius"][i] = s.radius
            model["shape_center"][i] = s.center
            k = len(s.vertices)
            model["shape_vertex_count"][i] = k
            model["shape_vertices"][i, :k] = s.vertices
            model["shape_normals"][i, :k] = s.normals
        return model

    def _build_joint_model(self, model: dict):
        joints, n = self._joints, self.n_bodies
        model["joint_type"] = np.array([j.kind for j in joints], np.int32)
        model["joint_parent"] = np.array([j.parent for j in joints], np.int32)
        model["joint_child"] = np.array([j.child for j in joints], np.int32)
        model["joint_anchor_parent"] = np.array([j.anchor_parent for j in joints],
                                                np.float32).reshape(-1, 2)
        model["joint_anchor_child"] = np.array([j.anchor_child for j in joints],
                                               np.float32).reshape(-1, 2)
        model["joint_axis"] = np.array([j.axis for j in joints], np.float32).reshape(-1, 2)
        model["joint_reference_angle"] = np.array([j.reference_angle for j in joints],
                                                  np.float32)
        model["joint_lower"] = np.array([j.lower for j in joints], np.float32)
        model["joint_upper"] = np.array([j.upper for j in joints], np.float32)
        model["joint_mode"] = np.array([j.mode for j in joints], np.int32)
        model["joint_pid"] = np.array([j.pid for j in joints], np.float32).reshape(-1, 3)
        model["joint_max_effort"] = np.array([j.max_effort for j in joints], np.float32)
        model["joint_collide"] = np.array([j.collide_connected for j in joints], np.int32)
        # Per body, its joints (for motor loads and for skipping joined pairs).
        ends = [(j.parent, k) for k, j in enumerate(joints)] + \
               [(j.child, k) for k, j in enumerate(joints)]
        ends.sort()
        counts = np.bincount([b for b, _ in ends], minlength=n)
        model["body_joint_start"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        model["body_joints"] = np.array([k for _, k in ends], np.int32)
        model["body_has_joint"] = (counts > 0).astype(np.int32)
        # Per body, the bodies it never collides with (disable_collision), sorted.
        ends = sorted([(a, b) for a, b in self._no_collision]
                      + [(b, a) for a, b in self._no_collision])
        counts = np.bincount([a for a, _ in ends], minlength=n)
        model["body_filter_start"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        model["body_filters"] = np.array([b for _, b in ends], np.int32)

    def _initial_state(self, bodies: list[_Body]) -> dict[str, np.ndarray]:
        """Host state arrays (n_worlds * len(bodies) slots) from the bodies' initial values."""
        w = self._n_worlds
        pos = np.array([b.position for b in bodies], np.float32).reshape(-1, 2)
        ang = np.array([b.angle for b in bodies], np.float32)
        vel = np.array([b.velocity for b in bodies], np.float32).reshape(-1, 2)
        omega = np.array([b.angular_velocity for b in bodies], np.float32)
        tile2 = lambda a: np.tile(a[None], (w, 1, 1)).reshape(-1, 2)  # noqa: E731
        tile1 = lambda a: np.tile(a[None], (w, 1)).reshape(-1)  # noqa: E731
        n = w * len(bodies)
        return {
            "body_position": tile2(pos), "body_angle": tile1(ang),
            "body_velocity": tile2(vel), "body_angular_velocity": tile1(omega),
            "body_force": np.zeros((n, 2), np.float32), "body_torque": np.zeros(n, np.float32),
            "body_sleeping": np.zeros(n, np.int32), "body_sleep_time": np.zeros(n, np.float32),
            "body_island": np.arange(n, dtype=np.int32),  # each body its own island
        }

    def _cell_size(self) -> float:
        """Level-0 grid cell, m: the median shape diameter (sizes far from it go up levels)."""
        diameters = [2.0 * b.shape.bounding_radius for b in self._bodies]
        return float(np.median(diameters)) if diameters else 1.0

    def _needs(self) -> dict:
        slots = self._n_worlds * self.n_bodies
        return {"bodies": slots, "models": max(self.n_bodies, 1), "worlds": self._n_worlds,
                "pairs": max(self._pair_need, self._n_pairs),
                "entries": max(4 * slots, self._entry_need),
                "joints": self.n_joints, "joint_slots": self._n_worlds * self.n_joints,
                "filters": 2 * len(self._no_collision)}

    def _device(self) -> device.DevicePool:
        """The pool with this scene resident and up to date (built on first use)."""
        if self.n_bodies == 0:
            raise RuntimeError("the scene has no bodies")
        if (self._built_bodies != self.n_bodies or self._built_joints != self.n_joints
                or self._built_no_collision != len(self._no_collision)):
            self._rebuild()
        return device.acquire_pool(self, self._needs())

    def _rebuild(self):
        old_state = None
        if self._built_bodies:
            old_state = self._read_state_arrays()
        self._model = self._build_model()
        state = self._initial_state(self._bodies)
        if old_state is not None:
            # Keep the simulated state of the bodies that already existed.
            w, nb_old, nb = self._n_worlds, self._built_bodies, self.n_bodies
            for key, old in old_state.items():
                if key == "body_island":  # labels are slots: renumber them to the new layout
                    old = (old.reshape(w, nb_old) % nb_old + nb * np.arange(w)[:, None]).ravel()
                new = state[key].reshape(w, nb, *state[key].shape[1:])
                new[:, :nb_old] = old.reshape(w, nb_old, *old.shape[1:])
                state[key] = new.reshape(state[key].shape)
        self._cell = self._cell_size()
        w, nj = self._n_worlds, self.n_joints
        targets = np.tile(np.array([j.target for j in self._joints], np.float32), (w, 1))
        old_joint = None
        if old_state is not None and self._built_joints:
            # Keep the targets (and motor state) of the joints that already existed.
            old_joint = self._read_joint_arrays()
        for joint, values in self._pending_targets.items():
            targets[:, joint] = values
        self._pending_targets = {}
        joint_state = {"joint_target": targets.reshape(-1),
                       "joint_integral": np.zeros(w * nj, np.float32),
                       "joint_prev_error": np.zeros(w * nj, np.float32),
                       "joint_pid_started": np.zeros(w * nj, np.int32)}
        if old_joint is not None and self._built_joints:
            nj_old = self._built_joints
            for key, old in old_joint.items():
                new = joint_state[key].reshape(w, nj)
                new[:, :nj_old] = old.reshape(w, nj_old)
                joint_state[key] = new.reshape(-1)
        self._host_joint_state = joint_state
        self._built_joints = nj
        self._built_no_collision = len(self._no_collision)
        self._host_state = state
        self._forget_pairs()
        self._built_bodies = self.n_bodies
        device.release(self)

    def _forget_pairs(self):
        """No candidate pairs, contacts or colouring yet (a new scene or rebuilt arrays)."""
        self._host_pairs: dict[str, np.ndarray] | None = None  # pairs while not resident
        self._n_pairs = 0
        self._pairs_ordered = False  # pairs in colour order (pair_origin maps them back)
        self._coloring_valid = False  # the last colouring may be reused
        self._colored_pairs = 0  # pairs when it was made
        self._contacts_current = False

    def _read_joint_arrays(self) -> dict[str, np.ndarray]:
        if device.is_resident(self):
            pool = device.current_pool()
            n = self._n_worlds * self._built_joints
            return {key: getattr(pool, key).to_numpy()[:n] for key in _JOINT_STATE_FIELDS}
        return {key: value.copy() for key, value in self._host_joint_state.items()}

    def _read_state_arrays(self) -> dict[str, np.ndarray]:
        if device.is_resident(self):
            pool = device.current_pool()
            n = self._n_worlds * self._built_bodies
            return {key: getattr(pool, key).to_numpy()[:n] for key in _STATE_FIELDS}
        return {key: value.copy() for key, value in self._host_state.items()}

    def _load_into(self, pool: device.DevicePool):
        """Copy the model and the host-side state into `pool` (the scene becomes resident)."""
        self._coloring_valid = False  # colour lists are not saved on eviction
        for key, value in self._model.items():
            _upload(getattr(pool, key), value)
        for key, value in self._host_state.items():
            _upload(getattr(pool, key), value)
        for key, value in self._host_joint_state.items():
            _upload(getattr(pool, key), value)
        if self._host_pairs is not None:
            for key, value in self._host_pairs.items():
                _upload(getattr(pool, key), value)
        self._host_state = None
        self._host_pairs = None
        self._host_joint_state = None

    def _evict(self):
        """Save this scene's device state to the host before another scene takes the pool."""
        pool = device.current_pool()
        self._host_state = self._read_state_arrays()
        self._host_joint_state = self._read_joint_arrays()
        n = self._n_pairs
        self._host_pairs = {key: getattr(pool, key).to_numpy()[:n] for key in _PAIR_FIELDS}
        n_slots = self._n_worlds * self._built_bodies
        self._host_pairs["body_pair_start"] = pool.body_pair_start.to_numpy()[: n_slots + 1]
        device.release(self)

    # ------------------------------------------------------------------ stepping
    def step(self, dt: float):
        """Advance every world by dt seconds (`substeps` substeps); dt > 0.06 s is clamped."""
        dt = as_real(dt, "dt")
        if dt < MIN_DT:
            raise ValueError(f"dt must be >= {MIN_DT} s, got {dt}")
        dt = min(dt, MAX_DT)
        pool = self._device()
        n_slots, n_bodies = self._n_worlds * self.n_bodies, self.n_bodies
        self._upload_forces(pool)
        save_previous_pairs(pool, n_slots, self._n_pairs, int(self._pairs_ordered),
                            int(self._coloring_valid))
        # Pairs for the whole step: AABBs grown by what each body can cover in dt.
        pool = self._broad_phase(SPECULATIVE_DISTANCE, dt)
        if wake_islands(pool, n_slots, n_bodies, self._n_pairs, self.n_joints):
            # The broad phase pairs no two sleeping bodies: pair the woken ones now, so they
            # meet each other this step.
            pool = self._broad_phase(SPECULATIVE_DISTANCE, dt)
        n_pairs = self._n_pairs
        n_joints = self.n_joints
        carry_contacts(pool, n_slots, n_pairs, n_bodies, n_joints)
        n_constraints = n_pairs + self._n_worlds * n_joints
        # Keep last step's colouring while the broad phase finds the same pairs, no fixed
        # body started to move and nothing overflowed (a pile at rest keeps its pairs for
        # many steps); otherwise colour again, starting from last step's colours pair by
        # pair. Then store the pairs in colour order.
        reuse = (self._coloring_valid and n_pairs == self._colored_pairs
                 and self.n_overflow == 0
                 and coloring_still_valid(pool, n_slots, n_pairs, n_bodies) == 1)
        if not reuse:
            self.n_colors, self.n_overflow = color_constraints(
                pool, n_slots, n_constraints, n_bodies, keep=self._coloring_valid)
            self.scratch_colorings += 0 if self._coloring_valid else 1
            if n_pairs:
                order_pairs_by_color(pool, n_pairs, n_constraints)
        self.colorings += 0 if reuse else 1
        self._coloring_valid, self._colored_pairs = True, n_pairs
        if n_pairs:
            gather_pairs(pool, n_pairs)
        self._pairs_ordered = True
        build_body_contacts(pool, n_slots, n_pairs)
        gravity = self._gravity.astype(np.float32).tolist()
        h = dt / self.substeps
        for i in range(self.substeps):
            run_substep(pool, n_slots, n_bodies, n_pairs, n_joints, gravity, h, dt, i,
                        self.n_colors, self.n_overflow)
        if self.enable_sleep:
            update_sleep(pool, n_slots, n_bodies, n_pairs, n_joints, dt)
        if self._forces_on_device:
            clear_forces(pool, n_slots)
            self._forces_on_device = False
        self._contacts_current = True
        self.time += dt
        self.step_count += 1

    def _broad_phase(self, margin: float = 0.0, motion_time: float = 0.0) -> device.DevicePool:
        """Candidate pairs at the current poses (AABBs grown by margin + speed * motion_time).

        Returns the pool, which is a new one if a buffer had to grow.
        """
        pool = self._device()
        n_slots = self._n_worlds * self.n_bodies
        while True:
            table_size = min(device.next_pow2(max(4 * n_slots, 1024)), pool.table_capacity)
            status = find_pairs(pool, self._n_worlds, self.n_bodies, self._cell,
                                table_size - 1, margin, motion_time)
            entries, pairs, lost = (int(v) for v in status)
            if entries <= pool.entry_capacity and pairs <= pool.pair_capacity:
                break
            # A buffer is too small: grow the pool (keeping this scene's state) and redo.
            self._entry_need = max(self._entry_need, entries)
            self._pair_need = max(self._pair_need, pairs + pairs // 4)
            self._n_pairs = 0
            pool = device.acquire_pool(self, self._needs())
        self.lost_bodies = lost
        self._n_pairs = pairs
        return pool

    def _collide(self) -> device.DevicePool:
        """Broad and narrow phase at the current poses, exact (no margins)."""
        pool = self._broad_phase()
        compute_manifolds(pool, self._n_pairs, self.n_bodies, 0.0)
        self._pairs_ordered = self._coloring_valid = False
        self._contacts_current = True
        return pool

    # ------------------------------------------------------------------ forces
    def _check_body(self, body) -> int:
        return _as_index(body, "body", self.n_bodies, "bodies")

    def apply_force(self, body: int, force, torque=0.0):
        """Add a force (N, at the centre of mass) and a torque (N m) for the next step().

        force: (2,) for every world or (n_worlds, 2); torque: scalar or (n_worlds,).
        """
        body = self._check_body(body)
        w = self._n_worlds
        f = np.asarray(force, dtype=np.float64)
        if f.shape == (2,):
            f = np.broadcast_to(f, (w, 2))
        if f.shape != (w, 2):
            raise ValueError(f"force must have shape (2,) or ({w}, 2), got {f.shape}")
        t = np.asarray(torque, dtype=np.float64)
        if t.shape == ():
            t = np.broadcast_to(t, (w,))
        if t.shape != (w,):
            raise ValueError(f"torque must be a scalar or have shape ({w},), got {t.shape}")
        if not (np.all(np.isfinite(f)) and np.all(np.isfinite(t))):
            raise ValueError("force and torque must be finite")
        if max(np.abs(f).max(initial=0.0), np.abs(t).max(initial=0.0)) > shapes.FLOAT32_MAX:
            raise ValueError("force and torque must be within float32's range "
                             f"(|x| <= {shapes.FLOAT32_MAX:g})")
        old_f, old_t = self._pending_forces.get(body, (0.0, 0.0))
        self._pending_forces[body] = (old_f + f, old_t + t)

    def _upload_forces(self, pool):
        if not self._pending_forces:
            return
        bodies = np.array(sorted(self._pending_forces), np.int32)
        w, nb = self._n_worlds, self.n_bodies
        slots = (np.arange(w, dtype=np.int32)[:, None] * nb + bodies[None, :]).reshape(-1)
        forces = np.stack([self._pending_forces[b][0] for b in bodies], axis=1).reshape(-1, 2)
        torques = np.stack([self._pending_forces[b][1] for b in bodies], axis=1).reshape(-1)
        device.scatter_forces(pool, slots, forces.astype(np.float32), torques.astype(np.float32))
        self._pending_forces.clear()
        self._forces_on_device = True

    # ------------------------------------------------------------------ state
    def get_state(self) -> State:
        """A copy of all worlds' state (see State for shapes and units)."""
        self._device()
        w, nb = self._n_worlds, self.n_bodies
        arrays = self._read_state_arrays()
        return State(
            position=arrays["body_position"].reshape(w, nb, 2).astype(np.float64),
            angle=arrays["body_angle"].reshape(w, nb).astype(np.float64),
            velocity=arrays["body_velocity"].reshape(w, nb, 2).astype(np.float64),
            angular_velocity=arrays["body_angular_velocity"].reshape(w, nb).astype(np.float64),
            sleeping=arrays["body_sleeping"].reshape(w, nb).astype(bool),
        )

    def set_state(self, state: State):
        """Restore a state taken from this scene (shapes must match); previous pose = pose."""
        if not isinstance(state, State):
            raise TypeError(f"state must be a fx2d_gpu.State, got {type(state).__name__}")
        w, nb = self._n_worlds, self.n_bodies
        expected = {"position": (w, nb, 2), "angle": (w, nb), "velocity": (w, nb, 2),
                    "angular_velocity": (w, nb), "sleeping": (w, nb)}
        arrays = {}
        for key, shape in expected.items():
            value = np.asarray(getattr(state, key))
            if value.shape != shape:
                raise ValueError(f"state.{key} must have shape {shape}, got {value.shape}")
            if key != "sleeping" and not np.all(np.isfinite(value)):
                raise ValueError(f"state.{key} must be finite")
            if key != "sleeping" and np.abs(value).max(initial=0.0) > shapes.FLOAT32_MAX:
                raise ValueError(f"state.{key} must be within float32's range "
                                 f"(|x| <= {shapes.FLOAT32_MAX:g})")
            arrays[key] = value
        pool = self._device()
        n = w * nb
        pos = arrays["position"].reshape(n, 2).astype(np.float32)
        ang = arrays["angle"].reshape(n).astype(np.float32)
        device.write_state(pool, pos, ang, arrays["velocity"].reshape(n, 2).astype(np.float32),
                   arrays["angular_velocity"].reshape(n).astype(np.float32),
                   arrays["sleeping"].reshape(n).astype(np.int32))
        self._contacts_current = False

    # ------------------------------------------------------------------ contacts
    def contacts(self, world: int | None = 0) -> Contacts:
        """Contact manifolds of `world` (None: all worlds) at the current state."""
        if world is not None:
            world = self._check_world(world)
        pool = self._device() if self._contacts_current else self._collide()
        n = self._n_pairs
        count = pool.contact_point_count.to_numpy()[:n]
        a = pool.pair_body_a.to_numpy()[:n]
        b = pool.pair_body_b.to_numpy()[:n]
        nb = self.n_bodies
        touching = count > 0
        if world is not None:
            touching &= a // nb == world
        keep = np.nonzero(touching)[0]
        return Contacts(
            world=(a[keep] // nb).astype(np.int64),
            body_a=(a[keep] % nb).astype(np.int64), body_b=(b[keep] % nb).astype(np.int64),
            normal=pool.contact_normal.to_numpy()[:n][keep].astype(np.float64),
            point_count=count[keep].astype(np.int64),
            points=pool.contact_point.to_numpy()[:n][keep].astype(np.float64),
            depths=pool.contact_depth.to_numpy()[:n][keep].astype(np.float64),
            features=pool.contact_feature.to_numpy()[:n][keep].astype(np.int64),
        )

    def candidate_pairs(self) -> np.ndarray:
        """(k, 3) int array of (world, body_a, body_b) from the last broad phase, a < b."""
        pool = self._device() if self._contacts_current else self._collide()
        n = self._n_pairs
        a = pool.pair_body_a.to_numpy()[:n].astype(np.int64)
        b = pool.pair_body_b.to_numpy()[:n].astype(np.int64)
        nb = self.n_bodies
        return np.stack([a // nb, a % nb, b % nb], axis=1)

    def _check_world(self, world) -> int:
        if isinstance(world, bool) or not isinstance(world, (int, np.integer)):
            raise TypeError(f"world must be an int, got {type(world).__name__}")
        if not 0 <= world < self._n_worlds:
            raise ValueError(f"world {world} out of range (n_worlds={self._n_worlds})")
        return int(world)

    def __repr__(self) -> str:
        return (f"Scene(n_bodies={self.n_bodies}, n_worlds={self._n_worlds}, "
                f"substeps={self.substeps}, backend={self.backend!r})")


def _as_index(value, label: str, count: int, plural: str) -> int:
    """`value` as an index below `count`, else TypeError / ValueError naming `label`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{label} must be an int index, got {type(value).__name__}")
    if not 0 <= value < count:
        raise ValueError(f"{label} {value} out of range (scene has {count} {plural})")
    return int(value)


def _motor_settings(control_mode, pid, max_effort) -> tuple[int, tuple, float]:
    """(mode, (p, i, d), max effort) of a motor, checked; TypeError/ValueError naming the
    argument otherwise. max_effort (inf: unlimited) is capped at float32's range."""
    if control_mode not in MOTOR_MODES:
        raise ValueError(f"control_mode must be one of {list(MOTOR_MODES)}, "
                         f"got {control_mode!r}")
    try:
        gains = tuple(float(g) for g in pid)
    except (TypeError, ValueError):
        raise TypeError(f"pid must be three numbers (p, i, d), got {pid!r}") from None
    if len(gains) != 3 or not all(np.isfinite(gains)):
        raise ValueError(f"pid must be three finite numbers (p, i, d), got {pid!r}")
    if isinstance(max_effort, bool) or not isinstance(max_effort, (int, float, np.number)):
        raise TypeError(f"max_effort must be a number, got {type(max_effort).__name__}")
    if not max_effort > 0:
        raise ValueError(f"max_effort must be positive, got {max_effort}")
    return MOTOR_MODES[control_mode], gains, float(min(max_effort, shapes.FLOAT32_MAX))


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


def _as_bool(value, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {type(value).__name__}")
    return bool(value)


def _rotation(angle: float) -> np.ndarray:
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


def _upload(field, value: np.ndarray):
    """field[:len(value)] = value (from_numpy needs the field's whole shape)."""
    full = np.zeros(field.shape + ((field.n,) if hasattr(field, "n") else ()), value.dtype)
    full[: len(value)] = value
    field.from_numpy(full)
