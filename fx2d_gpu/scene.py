"""Scene, the user's entry point: build a scene, step it, read and write its state.

The API reference (docs/api.md) documents Scene's methods. Inside the package, the model and
its checks live in builder.py, the step in solver/step.py, the device state in device.py and
residency.py; Scene ties them together.
"""

from __future__ import annotations

import dataclasses
import math
import time
from copy import deepcopy

import numpy as np

from . import (
    edits,
    kinematics,
    readout,
    residency,
    runtime,
    shapes,
    spatial_queries,
    transfer,
    world_resets,
)
from .builder import (
    ModelBuilder,
    add_forces,
    check_forces,
    check_mixing,
    check_mode_targets,
    check_state,
    check_targets,
)
from .checks import as_bool, as_count, as_index, as_real, as_vector2
from .enums import DEFAULT_MIXING
from .model_queries import ModelQueries
from .records import ContactEvents, Contacts, JointState, Overlaps, RayHitList, RayHits, State
from .residency import Binding, serialized
from .shapes import MAX_COORDINATE
from .snapshots import SceneSnapshot, read_state_file, restore_snapshot, take_snapshot
from .solver.context import StepCache, StepContext, loops_run_serially
from .solver.faults import ON_FAULT, contain_faults
from .solver.plan import StepOptions, as_step_options
from .solver.profile import NO_PROFILE, StageTimer, StepProfile
from .solver.stages import DEFAULT_SUBSTEPS
from .solver.stages import STAGES as SOLVERS
from .solver.step import step as run_step
from .world_params import BODY_PARAMS, WorldParams, world_selection
from .world_resets import state_rows

#: Fx2D's time-step bounds, s: below MIN_DT step() raises, above MAX_DT it is clamped.
MIN_DT = 1e-3
MAX_DT = 0.06


class Scene(ModelQueries):
    """A 2D rigid-body scene, simulated as `n_worlds` independent copies on one device.

    Every world holds the same bodies and joints, at the same indices, each with its own
    state and, if given (set_body_params, set_gravity, set_joint_params), its own physical
    values. Bodies never interact across worlds: world `w` of a batch evolves exactly as the
    same scene built with `n_worlds=1` and given world `w`'s state and values. Add bodies
    one at a time (add_circle, add_box, add_polygon, add_capsule, add_edge, add_chain,
    add_shape) or many at once (add_circles, add_boxes, add_shapes). The device arrays are
    built from them on the first step or query; bodies added later rebuild them, keeping the
    state of those that existed.

    After every step each world is checked for non-finite or absurd state (a coordinate beyond
    shapes.MAX_COORDINATE, a speed beyond shapes.MAX_SPEED). With on_fault="raise" (the
    default) step() raises fx2d_gpu.SimulationError naming the worlds and bodies; with "reset"
    it puts only those worlds back to their initial state (see faulted_worlds).

    The add_* methods take these body keywords (`**body`), with Fx2D's defaults:

    | keyword | default | meaning |
    |---|---|---|
    | `angle` | `0.0` | initial orientation, rad (counter-clockwise) |
    | `velocity` | `(0.0, 0.0)` | initial linear velocity, m/s |
    | `angular_velocity` | `0.0` | initial angular velocity, rad/s |
    | `mass` | `1.0` | kg; 0 makes the body static (it never moves) |
    | `inertia` | `None` | kg m² about the centre of mass; None: from the shape and mass |
    | `elasticity` | `0.1` | restitution; a pair's mixes its bodies' (restitution_mixing) |
    | `static_friction` | `0.0` | Coulomb static coefficient; mixed by friction_mixing |
    | `dynamic_friction` | `0.0` | Coulomb kinetic coefficient; mixed by friction_mixing |
    | `gravity_scale` | `1.0` | multiplier on the scene's gravity |
    | `vel_damping` | `0.0` | linear and angular velocity damping, 1/s |
    | `name` | `None` | a unique name, for body_index(name) |
    | `external_forces_enabled` | `True` | False: moved by gravity alone (Fx2D's) |
    | `sensor` | `False` | reports contacts, exerts and feels no contact force |
    | `collision_group` | `0` | a shared negative group never collides, a positive one always |
    | `category_bits` | `0x0001` | the categories the body is in (32-bit mask) |
    | `mask_bits` | `0xFFFFFFFF` | the categories it collides with (32-bit mask) |
    | `enabled` | `True` | False: added out of the simulation (see set_enabled) |
    | `bullet` | `False` | swept against dynamic bodies too, not only immovable ones (Box2D's) |

    A body with `external_forces_enabled=False` is unaffected by contacts, joints and
    apply_force. Two bodies collide when neither's collision_group decides (see
    set_collision_filter) and each one's category_bits meet the other's mask_bits.

    Args:
        gravity (array_like): (2,) gravitational acceleration, m/s², the same in every world.
        substeps: substeps per step(), >= 1; None: the solver's default (XPBD: Fx2D's 11,
            the soft step: Box2D v3's 4).
        n_worlds: independent copies of the scene, simulated together, >= 1.
        arch: the Taichi backend: "auto" (the first GPU backend that starts, else the CPU
            with a one-line notice), "cpu", "gpu", "cuda", "vulkan" or "metal". Taichi runs
            one backend per process: a later Scene must name the same one, or "auto".
        enable_sleep: let bodies at rest fall asleep (the solver skips them until something
            wakes them); False: bodies never sleep.
        on_fault: what step() does with a faulty world: "raise" or "reset" (see above).
        solver: "xpbd" (the default: Fx2D's substeps of position-based contacts and joints,
            seed 003) or "soft_step" (Box2D v3's soft step: soft contacts and joints solved
            and relaxed at the velocity level, a restitution pass; see docs/solvers.md).
            Both mix materials by the rules below.
        friction_mixing: how a pair of bodies mixes their friction coefficients (static and
            kinetic alike), whichever the solver: "min" (the default: Fx2D's rule, seed
            000), "max", "geometric_mean" (Box2D's), "average" or "product" (pymunk's).
        restitution_mixing: how a pair mixes their elasticities, the same names: "min"
            (the default, Fx2D's), "max" (Box2D's), "geometric_mean", "average",
            "product" (pymunk's).
        step_options (StepOptions | dict | None): how the steps run among ways that give
            bitwise the same results (a CPU team or a launch per stage, stages folded into
            one launch or alone): a StepOptions, a dict of its attributes, or None for the
            defaults (see Scene.step_options).

    Attributes:
        backend (str): the Taichi backend this process runs on, e.g. "x64", "cuda" or
            "vulkan".
        substeps (int): substeps per step().
        solver (str): "xpbd" or "soft_step".
        friction_mixing (str): how pairs mix friction (Scene(friction_mixing=)).
        restitution_mixing (str): how pairs mix restitution (Scene(restitution_mixing=)).
        enable_sleep (bool): whether bodies at rest fall asleep.
        on_fault (str): "raise" or "reset": what step() does with a faulty world.
        time (float): simulated time, s: the sum of every step()'s (clamped) dt.
        step_count (int): the number of steps taken.
        meta (dict): a scene file's data for the viewer (see load_scene): its size (m),
            background colour and boundary walls; empty for a scene built in code.
        visuals (list | None): per body, how a scene file draws it (fill, border, visual
            shape); None for a scene built in code.

    Raises:
        TypeError: substeps or n_worlds is not an int, gravity not a pair of numbers,
            enable_sleep not a bool, or arch, friction_mixing or restitution_mixing not a
            string.
        ValueError: substeps or n_worlds below 1, gravity not finite, on_fault, solver,
            friction_mixing, restitution_mixing or arch not one of the names above, or
            arch other than the backend this process runs.
    """

    def __init__(self, gravity=(0.0, -9.81), substeps: int | None = None, n_worlds: int = 1,
                 arch: str = "auto", enable_sleep: bool = True, on_fault: str = "raise",
                 solver: str = "xpbd", step_options=None, friction_mixing: str = DEFAULT_MIXING,
                 restitution_mixing: str = DEFAULT_MIXING):
        self._step_options = as_step_options(step_options)
        self._gravity = as_vector2(gravity, "gravity")
        self.enable_sleep = as_bool(enable_sleep, "enable_sleep")  # False: never sleep
        if not isinstance(solver, str):
            raise TypeError(f"solver must be a string, got {type(solver).__name__}")
        if solver not in SOLVERS:
            raise ValueError(f"solver must be one of {tuple(SOLVERS)}, got {solver!r}")
        self.solver = solver
        # How pairs mix their bodies' materials: the model's (ModelBuilder), checked here.
        self.friction_mixing = check_mixing(friction_mixing, "friction_mixing")
        self.restitution_mixing = check_mixing(restitution_mixing, "restitution_mixing")
        substeps = as_count(DEFAULT_SUBSTEPS[solver] if substeps is None else substeps,
                            "substeps")
        n_worlds = as_count(n_worlds, "n_worlds")
        if on_fault not in ON_FAULT:
            raise ValueError(f"on_fault must be one of {ON_FAULT}, got {on_fault!r}")
        # What step() does when a world's state goes non-finite or absurd (solver/faults.py):
        # "raise" a SimulationError naming worlds and bodies, or "reset" those worlds.
        self.on_fault = on_fault
        self._faulted_worlds = np.zeros(0, np.int64)
        self.backend = runtime.ensure_initialized(arch)
        self.substeps = substeps
        self._n_worlds = n_worlds
        self._builder = ModelBuilder(self.friction_mixing, self.restitution_mixing)
        self._cache = StepCache()
        self._binding = Binding(self._cache, self._n_worlds)
        self._cell = 1.0
        self._pending_targets: dict[int, np.ndarray] = {}  # set before the arrays exist
        self._pending_forces: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._params = WorldParams(n_worlds, self._gravity)  # per-world values
        self.meta: dict = {}  # viewer data from a scene file: size (m), background
        self.visuals: list | None = None  # per body, from a scene file (see io.scene_loader)
        self.time = 0.0
        self.step_count = 0

    # ------------------------------------------------------------------ building
    @property
    def n_worlds(self) -> int:
        """The number of independent copies of the scene simulated together."""
        return self._n_worlds

    @property
    def gravity(self) -> tuple[float, float]:
        """(gx, gy) gravitational acceleration, m/s²: Scene(gravity=), or the last
        set_gravity of one value for every world (get_gravity: each world's)."""
        return (float(self._gravity[0]), float(self._gravity[1]))

    def add_circle(self, position, radius, **body) -> int:
        """Add a solid disc of `radius` centred at `position`.

        Args:
            position (array_like): (2,) centre, m.
            radius (float): m, >= 1e-5 (shapes.MIN_SIZE).
            **body (Any): body keywords (angle, velocity, mass, name, ...: see Scene).

        Returns:
            The new body's index (0, 1, 2 ... in the order added; the same in every world).

        Raises:
            TypeError: an argument or keyword of the wrong type, or an unknown keyword (each
                named in the message).
            ValueError: an argument or keyword out of range or not finite, or a name already
                used (each named in the message); nothing is added.
        """
        return self._builder.add_body(shapes.circle(radius), _position(position), **body)

    def add_box(self, position, size, radius=0.0, **body) -> int:
        """Add a box of core `size` (width, height) centred at `position`.

        A box is a 4-vertex polygon. `radius` > 0 rounds its corners and adds to its outside, as
        Fx2D's rounded rectangles do: the outer size is size + 2 radius.

        Args:
            position (array_like): (2,) centre, m.
            size (array_like): (width, height), m, each >= 1e-5.
            radius (float): corner rounding, m, >= 0.
            **body (Any): body keywords (angle, velocity, mass, name, ...: see Scene).

        Returns:
            The new body's index (0, 1, 2 ... in the order added; the same in every world).

        Raises:
            TypeError: an argument or keyword of the wrong type, or an unknown keyword (each
                named in the message).
            ValueError: an argument or keyword out of range or not finite, or a name already
                used (each named in the message); nothing is added.
        """
        return self._builder.add_body(shapes.box(size, radius), _position(position), **body)

    def add_polygon(self, position, vertices, radius=0.0, **body) -> int:
        """Add a convex polygon, its centroid (the body's centre of mass) at `position`.

        The vertices, in either winding, are re-centred on the shape's centroid (the rounded
        shape's when radius > 0); the body's frame has its origin there.

        Args:
            position (array_like): (2,) where the centroid goes, m.
            vertices (array_like): (k, 2) in the body frame, m; 3 <= k <= 8
                (MAX_POLYGON_VERTICES), strictly convex (no reflex or collinear vertices), either
                winding.
            radius (float): m, >= 0: rounds the polygon (the shape is every point within
                `radius` of it).
            **body (Any): body keywords (angle, velocity, mass, name, ...: see Scene).

        Returns:
            The new body's index (0, 1, 2 ... in the order added; the same in every world).

        Raises:
            TypeError: an argument or keyword of the wrong type, or an unknown keyword (each
                named in the message).
            ValueError: an argument or keyword out of range or not finite, or a name already
                used (each named in the message); nothing is added.
        """
        shape, _ = shapes.polygon(vertices, radius=radius)
        return self._builder.add_body(shape, _position(position), **body)

    def add_capsule(self, position, length, radius, **body) -> int:
        """Add a capsule centred at `position`, along the body's x axis.

        A capsule is a segment of `length` (between the two cap centres) inflated by `radius`.
        Its mass and inertia come from its true area (a rectangle and two half discs); length 0
        makes a circle, as in Fx2D.

        Args:
            position (array_like): (2,) centre, m.
            length (float): distance between the cap centres, m, >= 0.
            radius (float): m, >= 1e-5.
            **body (Any): body keywords (angle, velocity, mass, name, ...: see Scene).

        Returns:
            The new body's index (0, 1, 2 ... in the order added; the same in every world).

        Raises:
            TypeError: an argument or keyword of the wrong type, or an unknown keyword (each
                named in the message).
            ValueError: an argument or keyword out of range or not finite, or a name already
                used (each named in the message); nothing is added.
        """
        return self._builder.add_body(shapes.capsule(length, radius), _position(position),
                                      **body)

    def add_edge(self, position, a, b, **body) -> int:
        """Add a static segment from `a` to `b`: level geometry with no thickness.

        Bodies collide with an edge from either side; edges never collide with each other. Static
        only: mass must be 0 (the default here). The ends stay where they are given: the body's
        origin is not moved to the segment's middle.

        Args:
            position (array_like): (2,) where the body frame's origin goes, m.
            a (array_like): (2,) one end in the body frame, m.
            b (array_like): (2,) the other end in the body frame, m, at least 1e-5 m from `a`.
            **body (Any): body keywords (see Scene); mass must be 0.

        Returns:
            The new body's index (0, 1, 2 ... in the order added; the same in every world).

        Raises:
            TypeError: an argument or keyword of the wrong type, or an unknown keyword (each
                named in the message).
            ValueError: an argument or keyword out of range or not finite, or a name already
                used (each named in the message); nothing is added.
        """
        body.setdefault("mass", 0.0)
        shape = shapes.edge(a, b)
        return self._builder.add_body(shape, _position(position), **body)

    def add_chain(self, position, points, loop=False, **body) -> int:
        """Add static terrain: a chain of segments through `points`.

        A chain is one-sided: its front is the left of each link's direction, so points written
        left to right hold bodies above it. It is smooth: bodies slide over its joints without
        catching (see shapes.chain). Static only: mass must be 0 (the default here).

        Each link is a body of its own (one shape per body), at consecutive indices from the one
        returned: n - 1 links, n with `loop`. The `name` keyword names the first link; every link
        takes the other keywords.

        Args:
            position (array_like): (2,) where the body frame's origin goes, m.
            points (array_like): (n, 2) in the body frame, m; n >= 3, consecutive points at least
                1e-5 m apart.
            loop (bool): True joins the last point to the first.
            **body (Any): body keywords (see Scene); mass must be 0.

        Returns:
            The index of the first link's body.

        Raises:
            TypeError: an argument or keyword of the wrong type, or an unknown keyword.
            ValueError: too few points, points too close, a mass other than 0, or another value
                out of range (each named in the message); nothing is added.
        """
        body.setdefault("mass", 0.0)
        links = shapes.chain(points, as_bool(loop, "loop"))
        position = _position(position)
        builder = self._builder
        # The first link checks the keywords (and refuses before anything is added); the
        # others take the same ones, so they cannot fail.
        first = builder.add_body(links[0], position, **body)
        for link in links[1:]:
            builder.add_body(link, position, **dict(body, name=None))
        return first

    def add_shape(self, position, shape: shapes.Shape, *, collides: bool = True, **body) -> int:
        """Add a body of a prepared shape, the shape's body frame placed at `position`.

        Shapes with area (circle, box, polygon, capsule) have their frame's origin at their centre
        of mass; edges and chain links are kept where they were given.

        Args:
            position (array_like): (2,) where the shape's body-frame origin goes, m.
            shape: from fx2d_gpu.shapes (circle, box, polygon, capsule, edge, chain ...); one
                Shape may serve several bodies.
            collides: False: the shape is drawn but never collides or answers a query (Fx2D's
                scene files have such bodies).
            **body (Any): body keywords (angle, velocity, mass, name, ...: see Scene).

        Returns:
            The new body's index (0, 1, 2 ... in the order added; the same in every world).

        Raises:
            TypeError: `shape` is not a fx2d_gpu.shapes.Shape, or another argument or keyword
                is of the wrong type or unknown.
            ValueError: an argument or keyword out of range (named in the message); nothing is
                added.
        """
        if not isinstance(shape, shapes.Shape):
            raise TypeError(f"shape must be a fx2d_gpu.shapes.Shape, got {type(shape).__name__}")
        return self._builder.add_body(shape, _position(position),
                                      collides=as_bool(collides, "collides"), **body)

    def add_circles(self, positions, radii, **body) -> np.ndarray:
        """Add n discs at once: the same bodies as n add_circle calls, to the bit.

        Built as arrays, a million discs take seconds. Everything is checked before any body is
        added.

        Args:
            positions (array_like): (n, 2) centres, m.
            radii (float | array_like): m, one for all or (n,).
            **body (Any): every body keyword of Scene but `name`, each one value for all bodies
                or one per body ((n,); velocity (2,) or (n, 2)).

        Returns:
            The new bodies' indices, consecutive, (n,) int64.

        Raises:
            TypeError: an argument of the wrong type, an unknown keyword, or `name` (bodies
                added together have no names).
            ValueError: positions not of shape (n, 2), or a value out of range, named
                `keyword[i]` for the first body that breaks add_circle's rules; nothing is added.
        """
        n = _count_rows(positions)
        return self._builder.add_bodies(shapes.circles(radii, n), positions, **body)

    def add_boxes(self, positions, sizes, radius=0.0, **body) -> np.ndarray:
        """Add n boxes at once: the same bodies as n add_box calls, to the bit.

        Sharp boxes are built as arrays (a million take seconds), rounded ones one at a time.
        Everything is checked before any body is added.

        Args:
            positions (array_like): (n, 2) centres, m.
            sizes (array_like): (width, height), m, one for all or (n, 2).
            radius (float | array_like): corner rounding, m, one for all or (n,).
            **body (Any): body keywords, as add_circles takes them.

        Returns:
            The new bodies' indices, consecutive, (n,) int64.

        Raises:
            TypeError: an argument of the wrong type, an unknown keyword, or `name` (bodies
                added together have no names).
            ValueError: positions not of shape (n, 2), or a value out of range, named
                `keyword[i]` for the first body that breaks add_circle's rules; nothing is added.
        """
        n = _count_rows(positions)
        return self._builder.add_bodies(shapes.boxes(sizes, n, radius), positions, **body)

    def add_shapes(self, positions, body_shapes, **body) -> np.ndarray:
        """Add n bodies of prepared shapes at once, in the order given: a pile of mixed shapes.

        Body i has shape body_shapes[i] at positions[i], as add_shape would place it.
        fx2d_gpu.shapes.circles and boxes build many shapes at once; one Shape may serve
        several bodies.

        Args:
            positions (array_like): (n, 2) where each shape's body-frame origin goes, m.
            body_shapes (Sequence[Shape]): n fx2d_gpu.shapes.Shape.
            **body (Any): body keywords, as add_circles takes them, and `collides` (one bool
                or (n,)) as add_shape takes it.

        Returns:
            The new bodies' indices, consecutive, (n,) int64.

        Raises:
            TypeError: an entry of body_shapes that is not a Shape, or an argument of the
                wrong type, an unknown keyword or `name`.
            ValueError: body_shapes and positions of different lengths, or a value out of
                range (named `keyword[i]`); nothing is added.
        """
        n = _count_rows(positions)
        body_shapes = list(body_shapes)
        if len(body_shapes) != n:
            raise ValueError(f"body_shapes must have one shape per position ({n}), got "
                             f"{len(body_shapes)}")
        for i, shape in enumerate(body_shapes):
            if not isinstance(shape, shapes.Shape):
                raise TypeError(f"body_shapes[{i}] must be a fx2d_gpu.shapes.Shape, got "
                                f"{type(shape).__name__}")
        return self._builder.add_bodies(body_shapes, positions, **body)

    def disable_collision(self, body_a: int, body_b: int):
        """Never let `body_a` and `body_b` collide, in every world, as joined bodies do not.

        For rigs whose parts overlap or touch by design. Takes effect from the next step().

        Raises:
            TypeError: a body index that is not an int.
            ValueError: a body index out of range, or body_a and body_b the same body.
        """
        self._builder.disable_collision(body_a, body_b)

    # ------------------------------------------------------------------ joints
    def add_revolute_joint(self, parent, child, anchor=(0.0, 0.0), angle_min=-math.pi,
                           angle_max=math.pi, control_mode=None, target=0.0, pid=(1.0, 0.0, 0.0),
                           max_effort=math.inf, name=None, collide_connected=False) -> int:
        """Join `child` to `parent` with a hinge at `anchor`, optionally driven by a motor.

        The child turns about the anchor relative to the parent. Its relative angle (0 where the
        bodies start) is held within [angle_min, angle_max]; the default, +-pi, leaves the
        rotation free. A motor drives that angle: control_mode "position" (target in rad) or
        "velocity" (target in rad/s) runs a PID on the error, its torque clamped to max_effort;
        "effort" applies the target (N m, clamped to max_effort) directly. Joined bodies do not
        collide with each other unless collide_connected.

        Args:
            parent (int): a body index.
            child (int): another body index.
            anchor (array_like): (2,) the hinge in the parent's body frame, m.
            angle_min (float): the relative angle's lower limit, rad.
            angle_max (float): its upper limit, rad, >= angle_min.
            control_mode (str | None): None (no motor), "position", "velocity" or "effort".
            target (float): the motor's target, rad, rad/s or N m; set_joint_target changes it,
                per world.
            pid (tuple[float, float, float]): (p, i, d) gains of the position and velocity
                modes.
            max_effort (float): the most torque the motor applies, N m, > 0 (inf: no limit).
            name (str | None): a unique name, for joint_index(name).
            collide_connected (bool): let the two bodies collide with each other.

        Returns:
            The new joint's index (0, 1, 2 ... in the order added).

        Raises:
            TypeError: an argument of the wrong type (named in the message).
            ValueError: an argument out of range or not finite (named in the message), parent
                and child the same body or both static, a lower limit above the upper, or a
                name already used; nothing is added.
        """
        return self._builder.add_revolute(parent, child, anchor, angle_min, angle_max,
                                          control_mode, target, pid, max_effort, name,
                                          collide_connected)

    def add_prismatic_joint(self, parent, child, axis=(1.0, 0.0), position_min=-1000.0,
                            position_max=1000.0, control_mode=None, target=0.0, pid=(1.0, 0.0, 0.0),
                            max_effort=math.inf, name=None, collide_connected=False) -> int:
        """Join `child` to `parent` with a slider along `axis`, optionally driven by a motor.

        The child moves along the axis without turning relative to the parent. Its travel (m,
        0 where the child starts) is held within [position_min, position_max]. A motor drives the
        travel: control_mode "position" (target in m) or "velocity" (target in m/s) runs a PID on
        the error, its force clamped to max_effort; "effort" applies the target (N, clamped to
        max_effort) directly. Joined bodies do not collide with each other unless
        collide_connected.

        Args:
            parent (int): a body index.
            child (int): another body index.
            axis (array_like): (2,) the direction of travel in the parent's body frame, not
                zero (its length does not matter).
            position_min (float): the travel's lower limit, m.
            position_max (float): its upper limit, m, >= position_min.
            control_mode (str | None): None (no motor), "position", "velocity" or "effort".
            target (float): the motor's target, m, m/s or N; set_joint_target changes it, per
                world.
            pid (tuple[float, float, float]): (p, i, d) gains of the position and velocity
                modes.
            max_effort (float): the most force the motor applies, N, > 0 (inf: no limit).
            name (str | None): a unique name, for joint_index(name).
            collide_connected (bool): let the two bodies collide with each other.

        Returns:
            The new joint's index (0, 1, 2 ... in the order added).

        Raises:
            TypeError: an argument of the wrong type (named in the message).
            ValueError: an argument out of range or not finite (named in the message), parent
                and child the same body or both static, a lower limit above the upper, or a
                name already used; nothing is added.
        """
        return self._builder.add_prismatic(parent, child, axis, position_min, position_max,
                                           control_mode, target, pid, max_effort, name,
                                           collide_connected)

    @serialized
    def set_joint_target(self, joint: int, target):
        """Set the target of `joint`'s motor, in every world or per world.

        Each target's magnitude must be below the bound of the motor's current control_mode
        (builder.TARGET_LIMITS): a position target within +-shapes.MAX_COORDINATE (1e15 rad
        or m), a velocity target within +-shapes.MAX_SPEED (1e10 rad/s or m/s), an effort
        target (and that of a joint without a motor) within float32's range (3.4e38): the
        device holds targets as float32, and beyond the coordinates and speeds the engine
        simulates a motor would only drive its bodies into a fault.

        Args:
            joint: a joint index.
            target (float | array_like): rad, rad/s or N m (revolute); m, m/s or N
                (prismatic), as the motor's control_mode reads it: a scalar for every world, or
                (n_worlds,).

        Raises:
            TypeError: `joint` is not an int, or a target is not a real number (a bool,
                complex number or string).
            ValueError: `joint` out of range, or a target not finite, beyond its mode's
                bound, or of another shape; the scene is left unchanged.
        """
        joint = self._builder.check_joint(joint)
        mode = self._builder.joints[joint].mode
        values = check_targets(target, self._n_worlds, mode)
        if self._is_built():
            transfer.write_joint_target(self._context(), joint, values.astype(np.float32))
        else:
            self._pending_targets[joint] = values  # applied when the arrays are built

    def _joint_targets(self, joint: int) -> np.ndarray:
        """(n_worlds,) float64: `joint`'s motor target in every world, as the next step
        reads it (the device's, the one waiting for the build, or the joint's own)."""
        if self._is_built():
            return readout.joint_targets(self._context(), joint)
        if joint in self._pending_targets:
            return np.asarray(self._pending_targets[joint], np.float64)
        return np.full(self._n_worlds, float(self._builder.joints[joint].target))

    @serialized
    def set_joint_mode(self, joint: int, control_mode, pid=None, max_effort=None):
        """Change `joint`'s motor: its mode and, optionally, its gains and effort limit.

        The PID's integral and derivative state restart in every world. The call is checked
        whole first: a refused one changes nothing.

        Args:
            joint: a joint index.
            control_mode (str | None): None (no motor), "position", "velocity" or "effort".
            pid (tuple[float, float, float] | None): new (p, i, d) gains; None keeps them.
            max_effort (float | None): the new limit, N m or N, > 0; None keeps it.

        Raises:
            TypeError: `joint` is not an int, pid not three numbers or max_effort not a number.
            ValueError: `joint` out of range, control_mode not one of the modes, pid not finite
                or max_effort not positive, or the joint's target (kept) beyond what the new
                mode's motor may be given (builder.TARGET_LIMITS: a 1e30 N m effort target
                is no position); set_joint_target first.
        """
        joint = self._builder.check_joint(joint)
        check_mode_targets(joint, control_mode, self._joint_targets(joint))
        motor = self._builder.set_motor(joint, control_mode, pid, max_effort)
        if pid is not None and self._params.pid is not None:  # new gains in every world
            self._params.joint_gains(self._builder)[:, joint] = motor.pid
        if self._is_built():  # else the build takes the builder's motor
            edits.upload_motor(self._context(), self._binding, self._builder, self._params,
                               joint, motor)

    @serialized
    def joint_anchors(self) -> np.ndarray:
        """World positions of every joint's two anchors, in every world.

        Returns:
            Per world and joint, the parent's anchor and the child's, m, (n_worlds, n_joints,
                2, 2); they coincide while a revolute joint holds.
        """
        return kinematics.joint_anchors(self._builder.joints, self.get_state())

    @serialized
    def joint_errors(self) -> np.ndarray:
        """How far every joint is from holding, in every world: the solver's residual.

        Returns:
            (n_worlds, n_joints) float64, m: a revolute joint's two anchors apart; a
            prismatic joint's child anchor off the parent's axis, plus its travel past a
            limit. Joints that hold are off by micrometres to millimetres; a step that
            leaves one beyond the smaller bounding radius of its bodies is a fault (a torn
            joint: SimulationError, or the world reset with on_fault="reset").
        """
        return kinematics.joint_errors(self._builder.joints, self.get_state())

    @serialized
    def joint_state(self) -> JointState:
        """Joint coordinates and their rates, in every world (see JointState)."""
        return JointState(*kinematics.joint_coordinates(self._builder.joints, self.get_state()))

    # ------------------------------------------------------------------ stepping
    @property
    def n_colors(self) -> int:
        """The parallel colours the last step's constraint solve used (a diagnostic); at
        most 1 where worlds have at most 40 bodies: each is solved on one thread, in its
        own order (StepOptions.color_small_worlds off)."""
        return self._cache.n_colors

    @property
    def n_overflow(self) -> int:
        """Constraints the last step left to the overflow colour (a diagnostic).

        Those are constraints on a body that has more than MAX_COLORS of them; they are solved
        after the colours, one at a time (solver/overflow.py).
        """
        return self._cache.n_overflow

    @property
    def colorings(self) -> int:
        """Steps that coloured their constraints; the others reused the last colouring (a
        diagnostic).
        """
        return self._cache.colorings

    @property
    def scratch_colorings(self) -> int:
        """Colourings that did not start from the last step's colours (a diagnostic)."""
        return self._cache.scratch_colorings

    @property
    def pair_reuses(self) -> int:
        """Steps that kept the last step's candidate pairs, no body having left its fat box (a
        diagnostic; worlds of more than 40 bodies, solver/pairs.find_step_pairs).
        """
        return self._cache.pair_reuses

    @property
    def report_refreshes(self) -> int:
        """Steps whose contact report only refreshed the last step's list (a diagnostic).

        Those steps' pairs stayed where they were and the same pairs touched
        (solver/reporting.refresh_report).
        """
        return self._cache.report_refreshes

    @property
    def lost_bodies(self) -> int:
        """Bodies the last broad phase left out for a non-finite pose (a diagnostic)."""
        return self._cache.lost_bodies

    @serialized
    def step(self, dt: float):
        """Advance every world by `dt` seconds, in `substeps` substeps.

        Forces given to apply_force since the last step act over this one. After it each world is
        checked for faults (see Scene's on_fault).

        Args:
            dt: the step, s, >= 1e-3; above 0.06 s it is clamped to 0.06 s (Fx2D's bounds).

        Raises:
            TypeError: dt is not a number.
            ValueError: dt below 1e-3 s or not finite.
            CapacityError: (a ValueError) the step needs more device memory than is
                available, or its bodies overlap so much that they would make more candidate
                pairs than broad_phase.MAX_PAIRS_PER_BODY a body (thousands spawned at one
                point); the scene is left as it was (spread the bodies with set_state, or
                remove some, and step again).
            RuntimeError: the scene has no bodies.
            SimulationError: with on_fault="raise", a world's state went non-finite or absurd;
                the scene keeps that state (restore a snapshot to go on).
        """
        self._advance(dt, NO_PROFILE)

    def profile(self, dt: float, steps: int = 1) -> StepProfile:
        """Advance every world by `steps` steps of `dt` seconds as step() does, timing each
        stage of each step: where a step's time goes (Box2D's b2Profile).

        The stages run in the same order with the same results bit for bit as step()'s,
        but each as launches of its own with the device synchronised before and after:
        scenes whose substeps normally run in one launch (small worlds, a CPU team) add up
        to more than their normal step's time. `fx2d bench --profile` prints it for the
        benchmark scenes.

        Args:
            dt: the step, s, as in step().
            steps: how many steps to profile, >= 1.

        Returns:
            StepProfile: ms per step of each stage ("find pairs", "colour", the substep's
            stages of solver/stages.py summed over the substeps, "report", ...), averaged
            over the steps, and the profiled steps' wall time.

        Raises:
            TypeError, ValueError: as step(), or steps not an int >= 1.
        """
        steps = as_count(steps, "steps")
        timer = StageTimer()
        start = time.perf_counter()
        for _ in range(steps):
            self._advance(dt, timer)
        return timer.profile(steps, time.perf_counter() - start)

    def _advance(self, dt, profile):
        """step(dt), its stages timed into `profile` (solver/profile.py)."""
        dt = as_real(dt, "dt")
        if dt < MIN_DT:
            raise ValueError(f"dt must be >= {MIN_DT} s, got {dt}")
        dt = min(dt, MAX_DT)
        runtime.check_mapping_headroom()  # software Vulkan: a clear error, not a crash
        ctx = self._context(dt)
        edits.upload_forces(ctx, self._pending_forces)
        before = dataclasses.replace(self._cache)
        try:
            run_step(ctx, profile)
        except residency.CapacityError:
            # Refused in the broad phase, before the substeps: the poses, velocities and
            # forces (still pending on the device) are as they were; the cache goes back
            # too, so that the scene does not keep asking for the pool it could not have.
            self._cache.refuse_step(before)
            raise
        self.time += dt
        self.step_count += 1
        with profile.stage("faults"):  # (the step's plan's last stage: solver/plan.py)
            self._faulted_worlds = contain_faults(ctx, self.on_fault, self._builder,
                                                  self.step_count)
            if len(self._faulted_worlds):  # (on_fault="reset": contain_faults raises else)
                world_resets.reset_faulty_worlds(ctx, self._faulted_worlds,
                                                 self._builder.initial_state(1))

    @property
    def faulted_worlds(self) -> np.ndarray:
        """(k,) int64: the worlds the last step found faulty (with on_fault="reset", and reset)."""
        return self._faulted_worlds.copy()

    @property
    def step_options(self) -> StepOptions:
        """How this scene's steps run (solver/plan.py's StepOptions): the CPU team or a launch
        per stage, which stages fold into another's launch, which caches are kept. Every
        choice gives bitwise the same results; the defaults are the fastest measured. Set it
        to a StepOptions or a dict of its attributes (`scene.step_options = {"team":
        False}` runs the substeps with a launch per stage, the path a GPU takes); raises
        TypeError or ValueError for anything else, leaving the options as they were."""
        return self._step_options

    @step_options.setter
    def step_options(self, options):
        self._step_options = as_step_options(options)

    @serialized
    def step_context(self, dt: float = 0.0) -> StepContext:
        """This scene resident in the device pool and up to date, as a solver StepContext.

        For tools and tests that drive one stage of solver/step.py on their own data. The scene
        is built on first use. Its pool holds every scene's arrays: what a stage writes there
        changes this scene.

        Args:
            dt: the step length (s) the context is for; 0 for a query.

        Raises:
            RuntimeError: the scene has no bodies.
        """
        return self._context(dt)

    def _context(self, dt: float = 0.0) -> StepContext:
        """This scene resident in the pool and up to date (built on first use), as a
        StepContext for a step of dt (s) or for a query."""
        binding = self._built()
        pool = residency.acquire(binding)
        cpu = runtime.on_cpu()
        return StepContext(
            pool=pool,
            serial=cpu and loops_run_serially(self._n_worlds, self.n_bodies, self._step_options),
            cpu=cpu,
            n_worlds=self._n_worlds, n_bodies=self.n_bodies, n_joints=self.n_joints,
            cell_size=self._cell, cache=self._cache, grow=lambda: residency.acquire(binding),
            dt=dt, substeps=self.substeps, enable_sleep=self.enable_sleep, solver=self.solver,
            options=self._step_options, **binding.solver_flags)

    def _built(self) -> Binding:
        """The scene's Binding, built for its model as it is now (on first use, and after
        bodies or joints were added), without loading it into the pool."""
        if self.n_bodies == 0:
            raise RuntimeError("the scene has no bodies")
        if not self._is_built():
            # Bodies and joints that existed keep their state in every world.
            self._binding.rebuild(self._builder, self._pending_targets, self._params)
            self._pending_targets = {}
            self._cell = self._builder.cell_size()
        return self._binding

    def _is_built(self) -> bool:
        return self._binding.matches(self._builder)

    # ------------------------------------------------------------------ forces
    @serialized
    def apply_force(self, body: int, force, torque=0.0):
        """Add a force at `body`'s centre of mass, and a torque, for the next step() only.

        Calls before one step add up; their sum, like each call's values, must stay within
        float32's range (|x| <= 3.4e38, what the device holds): the call that would take it
        beyond is refused and leaves the sum as it was. Static bodies and bodies with
        `external_forces_enabled=False` are unaffected.

        Args:
            body: a body index.
            force (array_like): N, (2,) for every world or (n_worlds, 2).
            torque (float | array_like): N m, counter-clockwise positive, a scalar for every
                world or (n_worlds,).

        Raises:
            TypeError: `body` is not an int, or force or torque not real numbers (bools,
                complex numbers or strings).
            ValueError: `body` out of range, or force or torque of another shape, not finite or
                beyond float32's range, alone or summed with this body's earlier calls since
                the last step; nothing is added.
        """
        body = self._builder.check_body(body)
        f, t = check_forces(force, torque, self._n_worlds)
        self._pending_forces[body] = add_forces(self._pending_forces.get(body, (0.0, 0.0)),
                                                f, t, body)

    # ------------------------------------------------------------------ per-world values
    @serialized
    def set_body_params(self, bodies, *, mass=None, inertia=None, static_friction=None,
                        dynamic_friction=None, elasticity=None, vel_damping=None,
                        gravity_scale=None, world=None):
        """Give bodies new physical values, in every world or per world (domain
        randomisation, parameter sweeps). Parameters left None keep their values.

        Each value is a scalar (every addressed world), one value per addressed world
        ((k_worlds,)), or (k_worlds, k_bodies). The units and rules are the add_*
        keywords' (see the table above): mass kg, > 0; inertia kg m², > 0 (left None while
        mass changes, an inertia from the shape follows the new mass, as add_* computes it,
        and one given by hand stays); friction coefficients, elasticity and vel_damping
        (1/s) >= 0; gravity_scale any finite number. A body is static or dynamic in every
        world: a static body (mass 0) takes no mass or inertia, and a dynamic one no mass 0.
        World w then steps bit for bit as a one-world scene built with world w's values.
        Bodies asleep stay asleep until something wakes them (reset_worlds does).

        While every world holds the same values the device keeps one row per body, as a
        scene that never called this does; once a world differs, one per body slot.
        Snapshots, state files and pickles carry the values.

        Args:
            bodies (int | array_like): a body index or a sequence of them.
            mass (float | array_like | None): kg.
            inertia (float | array_like | None): kg m².
            static_friction (float | array_like | None): Coulomb static coefficient.
            dynamic_friction (float | array_like | None): Coulomb kinetic coefficient.
            elasticity (float | array_like | None): coefficient of restitution.
            vel_damping (float | array_like | None): 1/s.
            gravity_scale (float | array_like | None): factor on the world's gravity.
            world (int | array_like | None): None (every world), a world index, a bool mask
                (n_worlds,) or a sequence of indices, in the order the values' rows follow
                (world_params.world_selection: negative ones count from the end, each world at
                most once; empty: no change).

        Raises:
            TypeError: an index that is not an int, or a value that is not real numbers.
            ValueError: an index out of range, a world given twice, a value of another shape,
                not finite or out of its range (a mass whose inverse or whose inertia float32
                cannot hold: see builder.MAX_MASS), or a mass or inertia for a static body;
                nothing changes.
        """
        rows = spatial_queries.body_indices(bodies, self.n_bodies)
        worlds = world_selection(world, self._n_worlds)
        given = {name: value for name, value in (
            ("mass", mass), ("inertia", inertia), ("static_friction", static_friction),
            ("dynamic_friction", dynamic_friction), ("elasticity", elasticity),
            ("vel_damping", vel_damping), ("gravity_scale", gravity_scale))
            if value is not None}
        checked = self._params.check_body_values(self._builder, rows, worlds, given)
        if given and len(worlds):
            self._params.set_body_values(self._builder, rows, worlds, checked)
            self._upload_params()

    @serialized
    def get_body_params(self, bodies=None) -> dict[str, np.ndarray]:
        """Every world's values of `bodies` (None: all), as set_body_params takes them.

        Returns:
            {name: (n_worlds, k) float64} for mass (kg), inertia (kg m², inf for a static
            body), static_friction, dynamic_friction, elasticity, vel_damping (1/s) and
            gravity_scale: copies.
        """
        rows = (np.arange(self.n_bodies) if bodies is None
                else spatial_queries.body_indices(bodies, self.n_bodies))
        values = self._params.body_values(self._builder)
        return {name: values[name][:, rows].copy() for name in BODY_PARAMS}

    @serialized
    def set_gravity(self, gravity):
        """Set the gravity of every world, or of each world.

        Bodies asleep stay asleep until something wakes them.

        Args:
            gravity (array_like): m/s², (2,) for every world (scene.gravity becomes it) or
                (n_worlds, 2).

        Raises:
            TypeError: not real numbers, or a ragged sequence (naming gravity).
            ValueError: another shape, or not finite; nothing changes.
        """
        values = self._params.check_gravity(gravity)
        self._params.gravity = values
        if np.ndim(gravity) <= 1:
            self._gravity = values[0].copy()
        self._upload_params()

    @serialized
    def get_gravity(self) -> np.ndarray:
        """(n_worlds, 2) float64, m/s²: each world's gravity (a copy)."""
        return self._params.gravity.copy()

    @serialized
    def set_joint_params(self, joints, *, pid=None, world=None):
        """Give joints' motors new PID gains, in every world or per world.

        set_joint_mode(pid=...) sets a joint's gains in every world; this sets them per
        world. The PID's integral and derivative state go on (reset_worlds restarts them).

        Args:
            joints (int | array_like): a joint index or a sequence of them.
            pid (array_like | None): (p, i, d) gains: (3,) for every addressed world,
                (k_worlds, 3) one set per world, or (k_worlds, k_joints, 3).
            world (int | array_like | None): None (every world), a world index, a bool mask
                (n_worlds,) or a sequence of indices, in the order the values' rows follow
                (world_params.world_selection: negative ones count from the end, each world at
                most once; empty: no change).

        Raises:
            TypeError: an index that is not an int, or gains that are not real numbers.
            ValueError: an index out of range, a world given twice, gains of another shape
                or not finite.
        """
        rows = spatial_queries.joint_indices(joints, self.n_joints)
        worlds = world_selection(world, self._n_worlds)
        if pid is None:
            return
        gains = self._params.check_gains(rows, worlds, pid)
        if len(worlds):
            self._params.set_gains(self._builder, rows, worlds, gains)
            self._upload_params()

    @serialized
    def get_joint_params(self, joints=None) -> dict[str, np.ndarray]:
        """Every world's PID gains of `joints` (None: all): {"pid": (n_worlds, k, 3)
        float64}, a copy."""
        rows = (np.arange(self.n_joints) if joints is None
                else spatial_queries.joint_indices(joints, self.n_joints))
        return {"pid": self._params.joint_gains(self._builder)[:, rows].copy()}

    def _upload_params(self):
        """The per-world values into the model rows, and onto the device if the arrays are
        built (else the build takes them)."""
        if self.n_bodies and self._is_built():
            edits.upload_params(self._context(), self._binding, self._builder, self._params)

    # ------------------------------------------------------------------ state
    @serialized
    def get_state(self, bodies=None, dtype=np.float64, out: State | None = None) -> State:
        """Every world's state, or that of some bodies: poses, velocities, sleep flags.

        For observations: `bodies` gathers a subset, `dtype` float32 halves the bytes, and
        `out` writes into arrays the caller keeps (NumPy arrays, or torch tensors: CPU ones,
        or CUDA ones on Taichi's CUDA backend) in one kernel launch, with no new arrays.

        Args:
            bodies (int | array_like | None): None (every body) or body indices (k of them).
            dtype (numpy dtype): np.float64 (the default) or np.float32, of the float arrays
                (sleeping is bool either way); with `out`, its arrays' dtype rules.
            out (State | None): a State of C-contiguous, writable arrays of shapes
                (n_worlds, k, 2), (n_worlds, k), (n_worlds, k, 2), (n_worlds, k) and
                (n_worlds, k) (sleeping bool, the others one float dtype); a field left None
                is not gathered.

        Returns:
            A State: new NumPy arrays, or `out` filled in.

        Raises:
            RuntimeError: the scene has no bodies.
            TypeError: dtype neither float32 nor float64, out not a State or holding
                something other than NumPy arrays or torch tensors.
            ValueError: an index out of range, or an array of `out` of the wrong shape,
                dtype or device, not contiguous or not writable, or a torch tensor on a
                backend other than the CPU and CUDA (naming it).
        """
        rows = None if bodies is None else spatial_queries.body_indices(bodies, self.n_bodies)
        if out is not None:
            return readout.gather_state(self._context(), rows, out)
        return readout.body_state(self._context(), rows, readout.float_dtype(dtype))

    @serialized
    def set_state(self, state: State, worlds=None):
        """Put `state` into the scene: every body's pose, velocity and sleep flag, in every
        world or in the given worlds only (the others bitwise untouched).

        The way to give each world different initial conditions: take get_state(), change its
        arrays, set it. The previous pose is set to the new pose, contacts are found afresh at
        the new poses, and the last step's contact events are forgotten.

        state.sleeping must hold bools, or integers that are all 0 or 1 (read as False and
        True); the other arrays real numbers (ints or floats).

        Args:
            state: a State of this scene's shapes (n_worlds, n_bodies, ...); with `worlds`,
                also one of k rows, one per world given, in order.
            worlds (int | array_like | None): None (every world), a world index, a bool
                mask (n_worlds,) or a sequence of indices: only these worlds change; a State
                of k rows gives row i to worlds[i] (world_params.world_selection: negative
                indices count from the end, each world at most once; empty: no change).

        Raises:
            TypeError: `state` is not a fx2d_gpu.State, an array is not of real numbers
                (complex numbers, strings, bools), or state.sleeping is neither bools nor
                integers (e.g. floats or NaN); each named, e.g. state.sleeping.
            ValueError: an array of another shape, not finite, or beyond the coordinates and
                speeds the engine simulates, or state.sleeping holding an integer other than 0
                and 1 (naming it, e.g. state.position); the scene is left unchanged.
        """
        if worlds is not None:
            chosen = world_selection(worlds, self._n_worlds, "worlds")
            arrays = state_rows(state, chosen, self._n_worlds, self.n_bodies)
            edits.write_world_rows(self._context(), chosen, arrays)
            return
        if not isinstance(state, State):
            raise TypeError(f"state must be a fx2d_gpu.State, got {type(state).__name__}")
        arrays = check_state(state, self._n_worlds, self.n_bodies)
        edits.write_state(self._context(), arrays)

    @serialized
    def reset_worlds(self, worlds, state=None):
        """Start the given worlds over (an episode's end), on the device, leaving every other
        world bitwise untouched.

        Each given world takes the scene's built initial state (the bodies' add_* poses and
        velocities, the joints' targets), or its rows of `state`: poses and velocities,
        awake; its pending forces (apply_force since the last step) are dropped, its motors'
        targets start over (the joints' own, or the snapshot's) with their PID integral and
        derivative, and its contacts are forgotten (no warm start). Enabled flags
        (set_enabled) and per-world values (set_body_params) stay.

        Args:
            worlds (int | array_like): a world index, a bool mask (n_worlds,) or a sequence
                of indices (world_params.world_selection: negative ones count from the end,
                each world at most once); an empty mask or sequence resets nothing.
            state (State | SceneSnapshot | None): None (the built initial state), a State of
                n_worlds rows (each given world takes its own row, whatever the order given)
                or of one row per given world (row i to worlds[i]), or a SceneSnapshot of
                this scene (each given world takes its row of
                the snapshot's poses, velocities and motor targets).

        Raises:
            TypeError: worlds not indices or a bool mask, or state of another type.
            ValueError: an index out of range, a world given twice, or a state that does not
                fit (naming it); nothing changes.
        """
        if worlds is None:
            raise TypeError("worlds must be a world index, a bool mask or indices, got None")
        chosen = world_selection(worlds, self._n_worlds, "worlds")
        ctx = self._context()
        rows, targets = world_resets.reset_rows(state, chosen, ctx, self._builder,
                                                self._binding)
        if len(chosen) == 0:
            return
        for force, torque in self._pending_forces.values():
            force[chosen], torque[chosen] = 0.0, 0.0
        edits.write_world_rows(ctx, chosen, rows, targets=targets)

    # ------------------------------------------------------------------ snapshots
    @serialized
    def snapshot(self) -> SceneSnapshot:
        """Everything that affects this scene's future, as a SceneSnapshot.

        Poses, velocities, warm-start impulses and pairs, colours, sleep timers and islands, PID
        state, motor targets and settings, forces applied for the next step, and the clock.
        restore() it and step: the run from here repeats bitwise.

        Raises:
            RuntimeError: the scene has no bodies.
        """
        self._context()
        return take_snapshot(self._binding, self._cache, self._params, self._pending_forces,
                             self.time,
                             self.step_count)

    @serialized
    def restore(self, snapshot: SceneSnapshot):
        """Return to `snapshot`, taken from this scene or one with the same model.

        The scene's bodies, joints, disabled pairs and n_worlds must be the snapshot's; its clock
        (time, step_count) goes back too.

        Args:
            snapshot: from snapshot() or SceneSnapshot.load.

        The snapshot is checked whole before anything changes (a snapshot is untrusted input:
        see state_files.check_snapshot): its layout and fingerprint, step cache, clock, every
        array's dtype, shape and values, and the forces.

        Raises:
            TypeError: `snapshot` is not a SceneSnapshot.
            ValueError: the snapshot is of another scene, or a field of it does not fit this
                scene (named in the message); the scene is left unchanged.
        """
        # Built, not loaded: the snapshot replaces the state a load would bring in (and the
        # save of the scene resident before).
        self._built()
        forces, self.time, self.step_count, self._params = restore_snapshot(
            snapshot, self._binding, self._cache, self._builder, self._gravity)
        self._pending_forces = forces

    @serialized
    def save_state(self, path):
        """Write snapshot() to a NumPy .npz file at `path` (with a format version).

        Args:
            path (str | os.PathLike): the file to write.

        Raises:
            OSError: the file cannot be written.
        """
        self.snapshot().save(path)

    @serialized
    def load_state(self, path):
        """Restore the snapshot in the file at `path`, written by save_state.

        A state file is untrusted input: it is checked whole against this scene before anything
        changes (see restore, and docs/batched-worlds.md for the list), and read no further
        than this scene's state can need (a file, member count or member larger than that is
        refused from its headers, before anything is decompressed).

        Args:
            path (str | os.PathLike): the file to read.

        Raises:
            ValueError: the file is missing or not a fx2d_gpu state file (damaged, truncated),
                is of another format version, belongs to another scene, or holds a field that
                does not fit this scene (named in the message); the scene is left unchanged.
        """
        self._context()  # built and resident: the file is read against its layout
        forces, self.time, self.step_count, self._params = restore_snapshot(
            read_state_file(path, self._binding), self._binding, self._cache,
            self._builder, self._gravity, checked=True)
        self._pending_forces = forces

    # ------------------------------------------------------------------ contacts
    @serialized
    def contacts(self, world: int | None = 0) -> Contacts:
        """The pairs of bodies touching, one row per pair, sorted by (world, body_a, body_b).

        After a step: every pair that touched in one of its substeps (a point within a quarter of
        the slop, or pushing; once reported, within a slop: solver/contacts.HOLD_FRACTION) and
        the contacts of sleeping bodies, with the impulses the step applied (see Contacts).
        Before the first step or after set_state: the overlaps at the current poses, with zero
        impulses.

        Args:
            world: the world to report, or None for every world.

        Raises:
            TypeError: `world` is not an int or None.
            ValueError: `world` out of range.
        """
        if world is not None:
            world = as_index(world, "world", self._n_worlds, "worlds")
        return readout.contacts(self._context(), self._sensors(), world)

    @serialized
    def contact_events(self) -> ContactEvents:
        """The last step's begin and end contact events of every world (see ContactEvents).

        Begin: pairs that started touching; end: pairs that stopped; each list sorted by
        (world, body_a, body_b). A pair that stays in contact, asleep or awake, begins once.
        Empty before the first step and after set_state.
        """
        return readout.contact_events(self._context(), self._sensors())

    @serialized
    def candidate_pairs(self) -> np.ndarray:
        """The last broad phase's candidate pairs: a (k, 3) int64 array of (world, body_a, body_b),
        body_a < body_b.
        """
        return readout.candidate_pairs(self._context())

    def _sensors(self) -> np.ndarray:
        """(n_bodies,) bool: which bodies are sensors (of the built model)."""
        return self._binding.model["model"]["sensor"].astype(bool)

    # ------------------------------------------------------------------ filtering and removal
    @serialized
    def set_collision_filter(self, body: int, collision_group=None, category_bits=None,
                             mask_bits=None):
        """Change `body`'s collision filter, in every world; None keeps a setting.

        Two bodies sharing a negative collision_group never collide, and sharing a positive one
        always do (0: no group; Fx2D's rule). Otherwise each body's category_bits must meet the
        other's mask_bits (Box2D's rule). Takes effect from the next step; the body wakes.

        Args:
            body: a body index.
            collision_group (int | None): a group within int32's range.
            category_bits (int | None): the categories the body is in, a 32-bit mask.
            mask_bits (int | None): the categories it collides with, a 32-bit mask.

        Raises:
            TypeError: an argument that is not an int (or None).
            ValueError: `body` out of range, or a value beyond its range.
        """
        body = self._builder.check_body(body)
        self._builder.set_filter(body, collision_group, category_bits, mask_bits)
        self._upload_filters([body])

    def _upload_filters(self, rows):
        """The builder's collision filters of bodies `rows` onto a built scene (else the
        build takes them)."""
        if self._is_built():
            edits.upload_filters(self._context(), self._binding, self._builder, rows)

    @serialized
    def set_enabled(self, bodies, enabled: bool, world=None):
        """Take `bodies` out of the simulation (enabled=False) or put them back, in `world`.

        A disabled body keeps its index and state but never moves, collides, joins a joint's
        constraints or answers a query, as if removed; enabled again, it goes on awake from where
        it was. Sleeping bodies that touched it or were jointed to it wake (boxes asleep on a
        floor that is disabled fall).

        Args:
            bodies (int | array_like): a body index or a sequence of them.
            enabled: False takes the bodies out, True puts them back.
            world (int | array_like | None): None (every world), a world index, a bool mask
                (n_worlds,) or a sequence of indices (world_params.world_selection: negative
                ones count from the end, each world at most once; empty: no change).

        Raises:
            TypeError: enabled is not a bool, or an index is not an int.
            ValueError: no bodies given, an index out of range, or a world given twice.
        """
        enabled = as_bool(enabled, "enabled")
        indices = spatial_queries.body_indices(bodies, self.n_bodies)
        worlds = world_selection(world, self._n_worlds)
        if len(worlds):
            edits.write_enabled(self._context(), indices, worlds, enabled)

    @serialized
    def remove_body(self, body: int):
        """Remove `body` from every world: set_enabled(body, False).

        Its index stays (the batch layout does not change) and it never pairs again unless
        enabled again.

        Raises:
            TypeError: `body` is not an int.
            ValueError: `body` out of range.
        """
        self.set_enabled(self._builder.check_body(body), False)

    @serialized
    def enabled(self) -> np.ndarray:
        """(n_worlds, n_bodies) bool: which bodies take part in each world (see set_enabled)."""
        return readout.enabled_flags(self._context())

    @serialized
    def add_group(self, name: str, bodies, self_collide: bool = False):
        """Make a named group of `bodies` (Fx2D's entity groups).

        Unless self_collide, its members never collide with one another: they share a new
        negative collision_group (replacing their own). Enable, disable or remove them together
        with set_group_enabled and remove_group.

        Args:
            name: the group's name, unique among groups.
            bodies (int | array_like): a body index or a sequence of them.
            self_collide: let the members collide with one another.

        Raises:
            TypeError: name is not a str, self_collide not a bool, or an index not an int.
            ValueError: the name is already used, no bodies given, or an index out of range.
        """
        members = spatial_queries.body_indices(bodies, self.n_bodies)
        group = self._builder.add_group(name, members, as_bool(self_collide, "self_collide"))
        if group is not None:
            for body in members:
                self._builder.set_filter(int(body), collision_group=group)
            self._upload_filters(members)

    def group_bodies(self, name: str) -> np.ndarray:
        """The body indices of group `name`, (k,) int64, in the order they were given.

        Raises:
            ValueError: no group has this name.
        """
        return np.array(self._builder.group(name), np.int64)

    @serialized
    def set_group_enabled(self, name: str, enabled: bool, world=None):
        """Take every member of group `name` out of the simulation, or put them back.

        set_enabled(group_bodies(name), enabled, world).

        Args:
            name: the group's name.
            enabled: False takes the members out, True puts them back.
            world (int | array_like | None): as set_enabled's.

        Raises:
            ValueError: no group has this name, a world out of range or given twice.
        """
        self.set_enabled(self.group_bodies(name), enabled, world)

    @serialized
    def remove_group(self, name: str):
        """Remove every member of group `name` from every world (remove_body), and forget the group.

        Raises:
            ValueError: no group has this name.
        """
        members = self.group_bodies(name)
        self.set_enabled(members, False)
        self._builder.forget_group(name)

    # ------------------------------------------------------------------ queries
    @serialized
    def ray_cast(self, origins, directions, max_distance, *, sensors: bool = False) -> RayHits:
        """The nearest body each ray hits, in every world (see RayHits).

        Disabled and shape-less bodies are never hit; ties go to the lowest body index. A query
        changes nothing a later step reads.

        Args:
            origins (array_like): ray starts, m, within +-shapes.MAX_COORDINATE (1e15 m, the
                engine's coordinates): (2,) one ray for every world, (n_rays, 2) the same
                rays in every world, or (n_worlds, n_rays, 2). A ray from far away hits as
                exactly as one from beside the bodies (it is moved to them in float64).
            directions (array_like): as origins; need not be unit length, must not be zero.
            max_distance (float | array_like): how far each ray reaches, m, > 0 and within
                float32's range: a scalar or broadcastable to (n_worlds, n_rays).
            sensors: also hit sensors (skipped by default).

        Raises:
            TypeError: an argument that is not real numbers (complex numbers, strings and
                bools are not), or sensors not a bool; named in the message.
            ValueError: an argument of the wrong shape, not finite or out of range (named in
                the message).
        """
        return spatial_queries.ray_cast(self._context, self._n_worlds, origins, directions,
                                        max_distance, sensors)

    @serialized
    def ray_cast_all(self, origins, directions, max_distance, *,
                     sensors: bool = False) -> RayHitList:
        """Every body each ray crosses, nearest first, in every world (see RayHitList).

        Each body is reported once per ray, where the ray enters it. Disabled and shape-less
        bodies are never hit. A query changes nothing a later step reads.

        Args:
            origins (array_like): ray starts, m, within +-shapes.MAX_COORDINATE (1e15 m, the
                engine's coordinates): (2,) one ray for every world, (n_rays, 2) the same
                rays in every world, or (n_worlds, n_rays, 2). A ray from far away hits as
                exactly as one from beside the bodies (it is moved to them in float64).
            directions (array_like): as origins; need not be unit length, must not be zero.
            max_distance (float | array_like): how far each ray reaches, m, > 0 and within
                float32's range: a scalar or broadcastable to (n_worlds, n_rays).
            sensors: also hit sensors (skipped by default).

        Raises:
            TypeError: an argument that is not real numbers (complex numbers, strings and
                bools are not), or sensors not a bool; named in the message.
            ValueError: an argument of the wrong shape, not finite or out of range (named in
                the message).
        """
        return spatial_queries.ray_cast_all(self._context, self._n_worlds, origins, directions,
                                            max_distance, sensors)

    @serialized
    def query_point(self, points, *, sensors: bool = False) -> Overlaps:
        """The bodies containing each point (boundary included), in every world (see Overlaps).

        Disabled and shape-less bodies never count. A query changes nothing a later step reads.

        Args:
            points (array_like): m: (2,) one point for every world, (n_points, 2) the same
                points in every world, or (n_worlds, n_points, 2).
            sensors: also report sensors (left out by default).

        Raises:
            TypeError: an argument that is not real numbers (complex numbers, strings and
                bools are not), or sensors not a bool; named in the message.
            ValueError: an argument of the wrong shape, not finite or out of range (beyond
                +-shapes.MAX_COORDINATE for coordinates; named in the message).
        """
        return spatial_queries.query_point(self._context, self._n_worlds, points, sensors)

    @serialized
    def query_aabb(self, lower, upper, *, sensors: bool = False) -> Overlaps:
        """The bodies whose shape overlaps or touches each axis-aligned box, in every world.

        Exact: a body counts when its shape meets the box, not merely its bounding box. Disabled
        and shape-less bodies never count. A query changes nothing a later step reads.

        Args:
            lower (array_like): the boxes' lower corners, m: (2,), (n_boxes, 2) or
                (n_worlds, n_boxes, 2).
            upper (array_like): their upper corners, as lower; lower <= upper on both axes.
            sensors: also report sensors (left out by default).

        Returns:
            One row per (box, body) found (see Overlaps).

        Raises:
            TypeError: an argument that is not real numbers (complex numbers, strings and
                bools are not), or sensors not a bool; named in the message.
            ValueError: an argument of the wrong shape, not finite or out of range (beyond
                +-shapes.MAX_COORDINATE for coordinates; named in the message).
        """
        return spatial_queries.query_aabb(self._context, self._n_worlds, lower, upper, sensors)

    @serialized
    def overlap_shape(self, shape: shapes.Shape, position, angle=0.0, *,
                      sensors: bool = False) -> Overlaps:
        """The bodies each placed copy of `shape` overlaps or touches, in every world.

        Full containment counts. Edges and chain links are two-sided segments here. Disabled and
        shape-less bodies never count. A query changes nothing a later step reads.

        Args:
            shape: from fx2d_gpu.shapes (circle, box, polygon, capsule, edge ...).
            position (array_like): where the shape's body-frame origin goes, m: (2,),
                (n_queries, 2) or (n_worlds, n_queries, 2).
            angle (float | array_like): its rotation, rad: a scalar or broadcastable to
                (n_worlds, n_queries).
            sensors: also report sensors (left out by default).

        Returns:
            One row per (query, body) found (see Overlaps).

        Raises:
            TypeError: `shape` is not a fx2d_gpu.shapes.Shape, another argument not real
                numbers (complex numbers, strings and bools are not), or sensors not a bool;
                named in the message.
            ValueError: an argument of the wrong shape, not finite or out of range (beyond
                +-shapes.MAX_COORDINATE for position; named in the message).
        """
        return spatial_queries.overlap_shape(self._context, self._n_worlds, shape, position,
                                             angle, sensors)

    @serialized
    def replicate(self, n_worlds: int) -> Scene:
        """A new scene of `n_worlds` copies of this one-world scene (the template of a batch
        or of distributed.ShardedScene's shards).

        The copy has this scene's bodies, joints, settings, per-world values (set_body_params,
        set_gravity, set_joint_params) and clock; each of its worlds starts from this
        world's poses, velocities, sleep flags, enabled flags and motor targets, and takes
        its forces pending for the next step. Contacts, warm-start impulses, sleep timers
        and PID state are not copied: they start over, as after set_state. Every world of
        the copy steps bit for bit as the others, and as any other copy made the same way.

        Args:
            n_worlds: the copy's worlds, >= 1.

        Raises:
            TypeError: n_worlds is not an int.
            ValueError: n_worlds below 1, or this scene has more than one world.
        """
        n_worlds = as_count(n_worlds, "n_worlds")
        if self._n_worlds != 1:
            raise ValueError(f"replicate copies a one-world scene; this one has "
                             f"{self._n_worlds} worlds")
        copy = Scene(**dict(self._settings(), n_worlds=n_worlds))
        copy._builder = deepcopy(self._builder)
        copy._params = self._params.repeated(n_worlds)
        copy.meta, copy.visuals = deepcopy(self.meta), deepcopy(self.visuals)
        copy.time, copy.step_count = self.time, self.step_count
        for joint, values in self._pending_targets.items():
            copy._pending_targets[joint] = np.repeat(values[:1], n_worlds)
        if self._is_built():
            state = self.get_state()
            copy.set_state(State(*(np.repeat(a, n_worlds, axis=0) for a in (
                state.position, state.angle, state.velocity, state.angular_velocity,
                state.sleeping))))
            for joint in range(self.n_joints):
                copy.set_joint_target(joint, float(self._joint_targets(joint)[0]))
            disabled = np.flatnonzero(~self.enabled()[0])
            if len(disabled):
                copy.set_enabled(disabled, False)
        copy._pending_forces = {body: (np.repeat(force[:1], n_worlds, axis=0),
                                       np.repeat(torque[:1], n_worlds))
                                for body, (force, torque) in self._pending_forces.items()}
        return copy

    # ------------------------------------------------------------------ copies and pickling
    @serialized
    def __getstate__(self) -> dict:
        """What copy.deepcopy and pickle keep: the settings, the model, the pending inputs,
        and (once built) a snapshot; the copy continues bitwise like the original."""
        return {"settings": self._settings(),
                "builder": self._builder, "pending_targets": self._pending_targets,
                "meta": self.meta, "visuals": self.visuals, "time": self.time,
                "step_count": self.step_count, "params": self._params.copy(),
                "snapshot": self.snapshot() if self._binding.n_bodies else None,
                "pending_forces": self._pending_forces}

    def _settings(self) -> dict:
        """Scene()'s arguments that make a scene like this one (the backend this process
        runs: "cpu", or "auto" for the GPU it found)."""
        return dict(gravity=self.gravity, substeps=self.substeps, n_worlds=self._n_worlds,
                    enable_sleep=self.enable_sleep, on_fault=self.on_fault, solver=self.solver,
                    step_options=self._step_options, friction_mixing=self.friction_mixing,
                    restitution_mixing=self.restitution_mixing,
                    arch="cpu" if self.backend in ("x64", "arm64") else "auto")

    def __setstate__(self, state: dict):
        self.__init__(**state["settings"])
        self._builder = state["builder"]
        self._pending_targets = state["pending_targets"]
        if "params" in state:  # (a pickle from before per-world values has none)
            self._params = state["params"]
        self.meta, self.visuals = state["meta"], state["visuals"]
        if state["snapshot"] is not None:
            # Not restore(): a copy's own snapshot is not checked as a state file from
            # elsewhere would be (unpickling runs code anyway), so that a scene kept in the
            # state a fault left it (on_fault="raise") can still be copied and looked at.
            self._context()  # builds the arrays of the same model first
            *_, self._params = restore_snapshot(state["snapshot"], self._binding, self._cache,
                                                self._builder, self._gravity, checked=True)
        self._pending_forces = state["pending_forces"]
        self.time, self.step_count = state["time"], state["step_count"]

    def __repr__(self) -> str:
        return (f"Scene(n_bodies={self.n_bodies}, n_worlds={self._n_worlds}, "
                f"substeps={self.substeps}, solver={self.solver!r}, "
                f"backend={self.backend!r})")


def _count_rows(positions) -> int:
    """How many bodies a bulk add places: the rows of `positions` ((n, 2))."""
    try:
        shape = np.shape(positions)
    except ValueError:
        raise TypeError("positions must be (n, 2) numbers") from None
    if len(shape) != 2 or shape[1] != 2:
        raise ValueError(f"positions must have shape (n, 2), got {shape}")
    return shape[0]


def _position(position) -> np.ndarray:
    return as_vector2(position, "position", MAX_COORDINATE)
