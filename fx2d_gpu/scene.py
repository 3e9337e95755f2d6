"""Scene, the user's entry point: build a scene, step it, read and write its state.

The API reference (docs/api.md) documents Scene's methods. Inside the package, the model and
its checks live in model/builder.py, the argument checks in checks.py, the step in
physics/solver/step.py, the device state in device/ (residency.py: a scene in the pool), the
reads and writes of state in access/; Scene ties them together. Some of its methods come from
the modules that own them: ModelQueries (model/model_queries.py), SceneCopies (snapshots,
state files, replicate, pickling: access/snapshots.py) and StepDiagnostics (the step cache's
counters: physics/solver/context.py).
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np

from . import shapes
from .access import edits, gather, readout, spatial_queries, world_resets
from .access.snapshots import SceneCopies
from .access.world_resets import state_rows
from .checks import (
    as_bool,
    as_bool_table,
    as_count,
    as_index,
    as_instance,
    as_name,
    as_one_of,
    as_row_count,
    as_step_length,
    as_vector2,
)
from .device import residency, runtime, transfer
from .device.residency import DEVICE_LOCK, Binding, locked, serialized
from .enums import DEFAULT_MIXING
from .model import kinematics, pairing
from .model.builder import (
    ModelBuilder,
    add_forces,
    check_forces,
    check_mixing,
    check_mode_targets,
    check_state,
    check_targets,
)
from .model.model_queries import ModelQueries
from .model.world_params import BODY_PARAMS, WorldParams, world_selection
from .model.world_shapes import WorldShapes, check_shape_change
from .physics.solver import in_flight
from .physics.solver.context import (
    EditedWorlds,
    StepCache,
    StepContext,
    StepDiagnostics,
    loops_run_serially,
)
from .physics.solver.faults import ON_FAULT, contain_faults
from .physics.solver.plan import StepOptions, as_step_options
from .physics.solver.profile import NO_PROFILE, StageTimer, StepProfile
from .physics.solver.stages import DEFAULT_SUBSTEPS
from .physics.solver.stages import STAGES as SOLVERS
from .physics.solver.step import step as run_step
from .records import ContactEvents, Contacts, JointState, Overlaps, RayHitList, RayHits, State
from .shapes import MAX_COORDINATE


class Scene(ModelQueries, SceneCopies, StepDiagnostics):
    """A 2D rigid-body scene, simulated as `n_worlds` independent copies on one device.

    Every world holds the same bodies and joints, at the same indices (0, 1, 2 ... in the order
    added), with its own state and, if given (set_body_params, set_gravity, set_joint_params),
    its own physical values: world `w` evolves exactly as a one-world scene given its state and
    values. A `world` (or `worlds`) argument is None (every world), an index (negative ones
    count from the end), a bool mask (n_worlds,) or a sequence of indices, each world once, in
    the order the rows of per-world values follow; empty, it changes nothing.

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

    Errors:
        Every method checks all its arguments before it changes anything: a refused call leaves
        the scene unchanged. A wrong type (a string, bool or complex number for a real number, a
        float for an index ...) or an unknown keyword is a TypeError; a bad value (out of range,
        not finite, of the wrong shape, a name already used or unknown) a ValueError. Each names
        the argument, or `keyword[i]` for the i-th body of a bulk add. Methods that need the
        device arrays (step, state, contacts, queries, snapshots) raise RuntimeError on a scene
        with no bodies, and CapacityError (a ValueError, before anything is allocated) where the
        device cannot hold the scene or a step's needs. A method's Raises lists only the rest.

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
        on_fault: what step() does with a world whose state went non-finite or absurd (beyond
            shapes.MAX_COORDINATE or MAX_SPEED, or a torn joint): "raise" a SimulationError
            naming worlds and bodies, or "reset" them to their initial state (faulted_worlds).
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
        backend (str): the Taichi backend this process runs on, e.g. "x64", "cuda" or "vulkan".
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
    """

    def __init__(
        self,
        gravity=(0.0, -9.81),
        substeps: int | None = None,
        n_worlds: int = 1,
        arch: str = "auto",
        enable_sleep: bool = True,
        on_fault: str = "raise",
        solver: str = "xpbd",
        step_options=None,
        friction_mixing: str = DEFAULT_MIXING,
        restitution_mixing: str = DEFAULT_MIXING,
    ):
        self._step_options = as_step_options(step_options)
        self._gravity = as_vector2(gravity, "gravity")
        self.enable_sleep = as_bool(enable_sleep, "enable_sleep")  # False: never sleep
        self.solver = as_name(solver, "solver", SOLVERS)
        # How pairs mix their bodies' materials: the model's (ModelBuilder), checked here.
        self.friction_mixing = check_mixing(friction_mixing, "friction_mixing")
        self.restitution_mixing = check_mixing(restitution_mixing, "restitution_mixing")
        substeps = as_count(DEFAULT_SUBSTEPS[solver] if substeps is None else substeps, "substeps")
        n_worlds = as_count(n_worlds, "n_worlds")
        # What step() does when a world's state goes non-finite or absurd (solver/faults.py):
        # "raise" a SimulationError naming worlds and bodies, or "reset" those worlds.
        self.on_fault = as_one_of(on_fault, "on_fault", ON_FAULT)
        self._faulted_worlds = np.zeros(0, np.int64)
        self.backend = runtime.ensure_initialized(arch)
        self.substeps = substeps
        self._n_worlds = n_worlds
        self._builder = ModelBuilder(self.friction_mixing, self.restitution_mixing)
        self._cache = StepCache()
        self._edited = EditedWorlds()  # worlds set by hand since the last step
        self._flight = in_flight.Flight()  # steps launched, their answers not read yet
        self._binding = Binding(self._cache, self._n_worlds)
        self._cell = 1.0
        self._pending_targets: dict[int, np.ndarray] = {}  # set before the arrays exist
        self._pending_forces: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # Edits stored on the host whose device writes wait for the next _context.
        self._unwritten: edits.UnwrittenEdits | None = None
        self._params = WorldParams(n_worlds, self._gravity)  # per-world values
        self._shapes = WorldShapes(n_worlds)  # per-world geometry (set_shape_params)
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

    @serialized
    def add_circle(self, position, radius, **body) -> int:
        """Add a solid disc of `radius` (m, >= 1e-5) centred at `position` ((2,), m), with the body
        keywords `**body` (see Scene); returns the new body's index."""
        return self._builder.add_body(shapes.circle(radius), _position(position), **body)

    @serialized
    def add_box(self, position, size, radius=0.0, **body) -> int:
        """Add a box (4-vertex polygon) of core `size` ((width, height), m, each >= 1e-5) centred at
        `position` ((2,), m), with the body keywords `**body` (see Scene); returns its index.
        `radius` (m, >= 0) rounds its corners and adds to its outside, as Fx2D's rounded rectangles
        do: the outer size is size + 2 radius.
        """
        return self._builder.add_body(shapes.box(size, radius), _position(position), **body)

    @serialized
    def add_polygon(self, position, vertices, radius=0.0, **body) -> int:
        """Add a convex polygon, its centroid (the body frame's origin and centre of mass, of the
        rounded shape if radius > 0) at `position` ((2,), m); returns the new body's index.

        Args:
            vertices (array_like): (k, 2) in the body frame, m, either winding; 3 <= k <= 8
                (MAX_POLYGON_VERTICES), strictly convex (no reflex or collinear vertices).
            radius (float): m, >= 0: rounds the polygon (every point within `radius` of it).
            **body (Any): body keywords (see Scene).
        """
        shape, _ = shapes.polygon(vertices, radius=radius)
        return self._builder.add_body(shape, _position(position), **body)

    @serialized
    def add_capsule(self, position, length, radius, **body) -> int:
        """Add a capsule centred at `position` ((2,), m), along the body's x axis: a segment of
        `length` (m, >= 0, between the cap centres) inflated by `radius` (m, >= 1e-5), with the
        body keywords `**body` (see Scene); returns its index. Its mass and inertia come from its
        true area (a rectangle and two half discs); length 0 makes a circle, as in Fx2D.
        """
        return self._builder.add_body(shapes.capsule(length, radius), _position(position), **body)

    @serialized
    def add_edge(self, position, a, b, **body) -> int:
        """Add a static segment (level geometry, no thickness) from `a` to `b` ((2,) each, m, in the
        body frame, at least 1e-5 m apart), the frame's origin at `position` ((2,), m; not moved
        to the middle); returns its index. Bodies collide with it from either side; edges never
        collide with each other. `**body`: body keywords (see Scene); mass must be 0 (the default).
        """
        body.setdefault("mass", 0.0)
        shape = shapes.edge(a, b)
        return self._builder.add_body(shape, _position(position), **body)

    @serialized
    def add_chain(self, position, points, loop=False, **body) -> int:
        """Add static terrain, a chain of segments through `points` ((n, 2) in the body frame, m;
        n >= 3, consecutive ones at least 1e-5 m apart), the frame's origin at `position` ((2,),
        m); returns the first link's index.

        One-sided: its front is the left of each link's direction (points written left to right
        hold bodies above). Bodies slide over its joints without catching (shapes.chain). Each
        link is a body, at consecutive indices: n - 1 links, n with `loop` (the last point joined
        to the first). Every link takes the body keywords `**body` (see Scene) but `name` (the
        first link's); mass must be 0 (the default here).
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

    @serialized
    def add_shape(self, position, shape: shapes.Shape, *, collides: bool = True, **body) -> int:
        """Add a body of a prepared `shape` (a fx2d_gpu.shapes.Shape; one may serve several bodies),
        its body-frame origin (the centre of mass of a shape with area; edges and chain links stay
        where given) at `position` ((2,), m), with the body keywords `**body` (see Scene); returns
        its index. `collides` False: drawn but never collides or answers a query (as some bodies
        of Fx2D's scene files).
        """
        as_instance(shape, "shape", shapes.Shape, "fx2d_gpu.shapes.Shape")
        return self._builder.add_body(
            shape, _position(position), collides=as_bool(collides, "collides"), **body
        )

    @serialized
    def add_circles(self, positions, radii, **body) -> np.ndarray:
        """Add n discs at once, the same bodies as n add_circle calls to the bit, built as arrays (a
        million take seconds); returns their indices, (n,) int64, consecutive.

        Args:
            positions (array_like): (n, 2) centres, m.
            radii (float | array_like): m, one for all or (n,).
            **body (Any): every body keyword of Scene but `name` (a TypeError), each one value
                for all bodies or one per body ((n,); velocity (2,) or (n, 2)).
        """
        n = as_row_count(positions, "positions")
        return self._builder.add_bodies(shapes.circles(radii, n), positions, **body)

    @serialized
    def add_boxes(self, positions, sizes, radius=0.0, **body) -> np.ndarray:
        """Add n boxes at once, the same bodies as n add_box calls to the bit (sharp ones built as
        arrays, a million in seconds); returns their indices, (n,) int64, consecutive.

        Args:
            positions (array_like): (n, 2) centres, m.
            sizes (array_like): (width, height), m, one for all or (n, 2).
            radius (float | array_like): corner rounding, m, one for all or (n,).
            **body (Any): body keywords, as add_circles takes them.
        """
        n = as_row_count(positions, "positions")
        return self._builder.add_bodies(shapes.boxes(sizes, n, radius), positions, **body)

    @serialized
    def add_shapes(self, positions, body_shapes, **body) -> np.ndarray:
        """Add n bodies of prepared shapes at once: body i has shape body_shapes[i] at positions[i],
        as add_shape would place it; returns their indices, (n,) int64, consecutive.

        Args:
            positions (array_like): (n, 2) where each shape's body-frame origin goes, m.
            body_shapes (Sequence[Shape]): n fx2d_gpu.shapes.Shape (shapes.circles and boxes
                build many at once; one Shape may serve several bodies).
            **body (Any): body keywords, as add_circles takes them, and `collides` (one bool or
                (n,)) as add_shape takes it.
        """
        n = as_row_count(positions, "positions")
        body_shapes = list(body_shapes)
        if len(body_shapes) != n:
            raise ValueError(
                f"body_shapes must have one shape per position ({n}), got {len(body_shapes)}"
            )
        for i, shape in enumerate(body_shapes):
            as_instance(shape, f"body_shapes[{i}]", shapes.Shape, "fx2d_gpu.shapes.Shape")
        return self._builder.add_bodies(body_shapes, positions, **body)

    @serialized
    def disable_collision(self, body_a: int, body_b: int):
        """Never let `body_a` and `body_b` collide, in every world, as joined bodies do not: for
        rigs whose parts overlap or touch by design. From the next step().

        Raises:
            ValueError: body_a and body_b the same body.
        """
        self._builder.disable_collision(body_a, body_b)

    # ------------------------------------------------------------------ joints
    @serialized
    def add_revolute_joint(
        self,
        parent,
        child,
        anchor=(0.0, 0.0),
        angle_min=-math.pi,
        angle_max=math.pi,
        control_mode=None,
        target=0.0,
        pid=(1.0, 0.0, 0.0),
        max_effort=math.inf,
        name=None,
        collide_connected=False,
    ) -> int:
        """Join `child` to `parent` with a hinge at `anchor`, optionally driven by a motor.

        The child turns about the anchor relative to the parent. A motor drives its relative
        angle: "position" or "velocity" runs a PID on the error, its torque clamped to
        max_effort; "effort" applies the target (clamped to max_effort) directly. Returns the new
        joint's index (0, 1, 2 ... in the order added).

        Args:
            parent (int): a body index.
            child (int): another body index.
            anchor (array_like): (2,) the hinge in the parent's body frame, m.
            angle_min (float): the relative angle's lower limit, rad (0 where the bodies start).
            angle_max (float): its upper limit, rad, >= angle_min (+-pi: free rotation).
            control_mode (str | None): None (no motor), "position", "velocity" or "effort".
            target (float): the motor's target, rad, rad/s or N m (set_joint_target: per world).
            pid (tuple[float, float, float]): (p, i, d) gains of the position and velocity modes.
            max_effort (float): the most torque the motor applies, N m, > 0 (inf: no limit).
            name (str | None): a unique name, for joint_index(name).
            collide_connected (bool): let the two bodies collide with each other.

        Raises:
            ValueError: parent and child the same body or both static, or a lower limit above
                the upper.
        """
        return self._builder.add_revolute(
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
        )

    @serialized
    def add_prismatic_joint(
        self,
        parent,
        child,
        axis=(1.0, 0.0),
        position_min=-1000.0,
        position_max=1000.0,
        control_mode=None,
        target=0.0,
        pid=(1.0, 0.0, 0.0),
        max_effort=math.inf,
        name=None,
        collide_connected=False,
    ) -> int:
        """Join `child` to `parent` with a slider along `axis`, optionally driven by a motor.

        As add_revolute_joint (parent, child, control_mode, pid, name, collide_connected), but
        the child moves along the axis without turning relative to the parent, and the motor
        drives its travel with a force. Returns the new joint's index.

        Args:
            axis (array_like): (2,) the direction of travel in the parent's body frame, not zero
                (its length does not matter).
            position_min (float): the travel's lower limit, m (0 where the child starts).
            position_max (float): its upper limit, m, >= position_min.
            target (float): the motor's target, m, m/s or N (set_joint_target: per world).
            max_effort (float): the most force the motor applies, N, > 0 (inf: no limit).

        Raises:
            ValueError: parent and child the same body or both static, or a lower limit above
                the upper.
        """
        return self._builder.add_prismatic(
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
        )

    @serialized
    def set_joint_target(self, joint: int, target):
        """Set the `target` of `joint`'s motor: a scalar for every world, or (n_worlds,); rad, rad/s
        or N m (revolute), m, m/s or N (prismatic), as its control_mode reads it, within its
        bound (builder.TARGET_LIMITS): a position within shapes.MAX_COORDINATE (1e15), a velocity
        within shapes.MAX_SPEED (1e10), an effort (or no motor's) within float32's range.
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
        """Change `joint`'s motor to `control_mode` (None, "position", "velocity" or "effort") and,
        optionally, its gains and effort limit; the PID state restarts in every world.

        Args:
            pid (tuple[float, float, float] | None): new (p, i, d) gains; None keeps them.
            max_effort (float | None): the new limit, N m or N, > 0; None keeps it.

        Raises:
            ValueError: the joint's target (kept) beyond what the new mode's motor may be given
                (builder.TARGET_LIMITS: a 1e30 N m effort is no position); set_joint_target first.
        """
        joint = self._builder.check_joint(joint)
        check_mode_targets(joint, control_mode, self._joint_targets(joint))
        motor = self._builder.set_motor(joint, control_mode, pid, max_effort)
        if pid is not None and self._params.pid is not None:  # new gains in every world
            self._params.joint_gains(self._builder)[:, joint] = motor.pid
        if self._is_built():  # else the build takes the builder's motor
            edits.upload_motor(
                self._context(), self._binding, self._builder, self._params, joint, motor
            )

    @serialized
    def joint_anchors(self) -> np.ndarray:
        """World positions of every joint's two anchors, m, (n_worlds, n_joints, 2, 2): the
        parent's, then the child's; they coincide while a revolute joint holds."""
        return kinematics.joint_anchors(self._builder.joints, self.get_state())

    @serialized
    def joint_errors(self) -> np.ndarray:
        """How far every joint is from holding, (n_worlds, n_joints) float64, m: a revolute joint's
        anchors apart, a prismatic joint's child anchor off the parent's axis plus its travel past
        a limit. Joints that hold are off by micrometres to millimetres; one left beyond the
        smaller bounding radius of its bodies is torn: a fault.
        """
        return kinematics.joint_errors(self._builder.joints, self.get_state())

    @serialized
    def joint_state(self) -> JointState:
        """Joint coordinates and their rates, in every world (see JointState)."""
        return JointState(*kinematics.joint_coordinates(self._builder.joints, self.get_state()))

    # ------------------------------------------------------------------ stepping
    @locked
    def step(self, dt: float):
        """Advance every world by `dt` seconds (>= 1e-3; above 0.06 s, clamped to 0.06 s: Fx2D's
        bounds), in `substeps` substeps, with the forces given to apply_force since the last step;
        then check each world for faults (see on_fault).

        Raises:
            CapacityError: also where bodies overlap so much that they would make more than
                broad_phase.MAX_PAIRS_PER_BODY candidate pairs a body (thousands spawned at one
                point): spread them (set_state) or remove some, and step again.
            SimulationError: with on_fault="raise", a world's state went non-finite or absurd;
                the scene keeps that state (restore a snapshot to go on).

        A step called right after another step may be launched in flight (small worlds, or
        large ones on the GPU team: StepOptions.steps_in_flight, a GPU backend's default):
        then both errors are raised by the next call that reads or changes the scene, with
        the scene at the step that raised them (step_count), the steps after it not taken.
        """
        self._advance(dt, NO_PROFILE)
        self._flight.after_step = True  # (the next step may fly: in_flight.Flight)

    @serialized
    def profile(self, dt: float, steps: int = 1) -> StepProfile:
        """Take `steps` (>= 1) steps of `dt` seconds as step() does, timing each stage: where a
        step's time goes (Box2D's b2Profile; `fx2d bench --profile`).

        Returns a StepProfile: ms per step of each stage ("find pairs", "colour", the substep's
        stages summed over the substeps, "report", ...), averaged over the steps, and their wall
        time. The stages run as step()'s, bit for bit, but each as launches of its own with the
        device synchronised around them: scenes whose substeps run in one launch (small worlds,
        a CPU team) add up to more than their normal step's time.
        """
        steps = as_count(steps, "steps")
        timer = StageTimer()
        start = time.perf_counter()
        for _ in range(steps):
            self._advance(dt, timer)
        return timer.profile(steps, time.perf_counter() - start)

    def _advance(self, dt, profile, fly: bool = True):
        """step(dt), its stages timed into `profile` (solver/profile.py); where it may fly
        (`fly`, solver/in_flight.py), launched without waiting for its answer."""
        dt = as_step_length(dt)
        runtime.check_mapping_headroom()  # software Vulkan: a clear error, not a crash
        if fly and self._fly(dt, profile):
            return
        with profile.stage("upload"):  # (the step's plan's first stage: solver/plan.py)
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
        self._after_step(ctx, profile)

    def _after_step(self, ctx: StepContext, profile):
        """The clock moved on by ctx's step, and its faults contained (on_fault)."""
        self.time += ctx.dt
        self.step_count += 1
        with profile.stage("faults"):  # (the step's plan's last stage: solver/plan.py)
            try:
                self._faulted_worlds = contain_faults(
                    ctx, self.on_fault, self._builder, self.step_count
                )
            finally:
                self._edited.clear()  # (a step has run since the edits)
            if len(self._faulted_worlds):  # (on_fault="reset": contain_faults raises else)
                world_resets.reset_faulty_worlds(
                    ctx,
                    self._faulted_worlds,
                    self._shapes.initial_state(self._builder, self._faulted_worlds)
                    if self._shapes.poses
                    else self._builder.initial_state(1),
                )

    def _fly(self, dt: float, profile) -> bool:
        """Launch this step in flight where it may (solver/in_flight.py: nothing of the
        scene changed since the steps in flight before it); returns whether it did."""
        flight = self._flight
        settings = self._step_settings()
        if (
            not flight.after_step
            or profile.records
            or self._pending_forces
            or not self._is_built()
            or (flight.steps and flight.steps[-1].settings != settings)
        ):
            return False
        if in_flight.full(flight):
            self._settle()  # (one wait for up to STEPS_IN_FLIGHT steps)
        with profile.stage("upload"):
            ctx = self._context(dt, settle=False)
        if not in_flight.launch(ctx, flight, self.time, self.step_count, settings):
            return False
        in_flight.note_flying(self)
        self.time += dt
        self.step_count += 1
        self._faulted_worlds = np.zeros(0, np.int64)
        return True

    def _step_settings(self) -> tuple:
        """What a step reads of the scene's settings (in_flight.FlightStep.settings)."""
        return (self.substeps, self.enable_sleep, self.solver, self.on_fault, self._step_options)

    def _set_step_settings(self, settings: tuple):
        """The scene's settings set to `settings` (_step_settings's)."""
        self.substeps, self.enable_sleep, self.solver, self.on_fault, self._step_options = settings

    def _settle(self):
        """Read the answers of the steps in flight, if any (solver/in_flight.py: one wait);
        where one stopped short, finish it as step() would have, with the settings it was
        launched with, and take the steps after it again (their errors raised here)."""
        self._flight.after_step = False  # (a call that reads or changes the scene)
        if not self._flight.steps:
            return
        with DEVICE_LOCK:
            self._settle_flight()

    def _settle_flight(self):
        """_settle, holding DEVICE_LOCK."""
        in_flight.settle_resident(self)
        stopped = in_flight.settle(self._bound_context(self._binding, 0.0), self._flight)
        if stopped is None:
            return
        now = self._step_settings()
        step = stopped.step
        self._set_step_settings(step.settings)
        try:
            self.time, self.step_count = step.time, step.step_count
            ctx = self._bound_context(self._binding, step.dt)
            before = dataclasses.replace(self._cache)
            try:
                in_flight.finish(ctx, step, stopped.answer)
            except residency.CapacityError:
                self._cache.refuse_step(before)
                raise
            self._after_step(ctx, NO_PROFILE)
            for later in stopped.after:
                self._advance(later.dt, NO_PROFILE, fly=False)
        finally:
            self._set_step_settings(now)

    @property
    def steps_in_flight(self) -> int:
        """Steps launched whose answers the host has not read yet (a diagnostic; reading it
        reads nothing: StepOptions.steps_in_flight, solver/in_flight.py). Any other call that
        reads or changes the scene reads them first."""
        return len(self._flight.steps)

    @property
    def faulted_worlds(self) -> np.ndarray:
        """(k,) int64: the worlds the last step found faulty (with on_fault="reset", and reset)."""
        self._settle()
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
        """This scene resident in the device pool and up to date, as a solver StepContext for a
        step of `dt` seconds (0: a query). For tools and tests that drive one stage of
        solver/step.py; what a stage writes into the pool changes this scene.
        """
        return self._context(dt)

    def _context(self, dt: float = 0.0, settle: bool = True) -> StepContext:
        """This scene resident in the pool and up to date (built on first use), as a
        StepContext for a step of dt (s) or for a query; with `settle`, its steps in flight
        read first (and those of the scene resident before it: in_flight.settle_resident)."""
        in_flight.settle_resident(self)
        if settle:
            self._settle()
        if self._unwritten is not None:
            self._write_unwritten()
        return self._bound_context(self._built(), dt)

    def _unwritten_edits(self) -> edits.UnwrittenEdits:
        """The edits waiting for their device writes, to add one to (the scene is built)."""
        if self._unwritten is None:
            self._unwritten = edits.UnwrittenEdits()
        return self._unwritten

    def _write_unwritten(self):
        """The device writes of the edits stored since the last context, together
        (edits.write_unwritten), in the arrays they were made for: where bodies or joints
        were added since, the build that follows takes the values, and the wakes are written
        before it."""
        unwritten, self._unwritten = self._unwritten, None
        built = self._is_built()
        if built and unwritten.shapes:
            self._cell = self._world_cell()
        edits.write_unwritten(
            self._bound_context(self._binding, 0.0),
            self._binding,
            self._builder,
            self._params,
            self._shapes,
            unwritten,
            upload=built,
        )

    def _bound_context(self, binding: Binding, dt: float) -> StepContext:
        """_context for `binding` as it is built (steps in flight read their answers through
        it before the scene's model, changed since, is built again)."""
        pool = residency.acquire(binding)
        cpu = runtime.on_cpu()
        n_bodies = binding.n_bodies
        return StepContext(
            pool=pool,
            serial=cpu and loops_run_serially(self._n_worlds, n_bodies, self._step_options),
            cpu=cpu,
            n_worlds=self._n_worlds,
            n_bodies=n_bodies,
            n_joints=binding.n_joints,
            cell_size=self._cell,
            cache=self._cache,
            grow=lambda: residency.acquire(binding),
            dt=dt,
            substeps=self.substeps,
            enable_sleep=self.enable_sleep,
            solver=self.solver,
            options=self._step_options,
            edited=self._edited,
            **binding.solver_flags,
        )

    def _built(self) -> Binding:
        """The scene's Binding, built for its model as it is now (on first use, and after
        bodies or joints were added), without loading it into the pool."""
        if self.n_bodies == 0:
            raise RuntimeError("the scene has no bodies")
        if not self._is_built():
            if self._unwritten is not None:  # (written in the layout they were made for)
                self._write_unwritten()
            # Bodies and joints that existed keep their state in every world.
            self._binding.rebuild(self._builder, self._pending_targets, self._params, self._shapes)
            self._pending_targets = {}
            self._cell = self._world_cell()
        return self._binding

    def _world_cell(self) -> float:
        """The step's level-0 grid cell, m (StepContext.cell_size): world 0's, every world's
        while they hold the same shapes (else each world reads its own on the device,
        BodyModel.world_cell)."""
        return float(self._shapes.cell_sizes(self._builder)[0])

    def _is_built(self) -> bool:
        return self._binding.matches(self._builder)

    # ------------------------------------------------------------------ forces
    @serialized
    def apply_force(self, body: int, force, torque=0.0):
        """Add a `force` (N, (2,) for every world or (n_worlds, 2)) at `body`'s centre of mass, and
        a `torque` (N m, counter-clockwise, a scalar or (n_worlds,)), for the next step() only.
        Calls before one step add up; their sum must stay within float32's range (|x| <= 3.4e38).
        Static bodies and bodies with `external_forces_enabled=False` are unaffected.
        """
        body = self._builder.check_body(body)
        f, t = check_forces(force, torque, self._n_worlds)
        self._pending_forces[body] = add_forces(self._pending_forces.get(body), f, t, body)

    # ------------------------------------------------------------------ per-world values
    @serialized
    def set_body_params(
        self,
        bodies,
        *,
        mass=None,
        inertia=None,
        static_friction=None,
        dynamic_friction=None,
        elasticity=None,
        vel_damping=None,
        gravity_scale=None,
        world=None,
    ):
        """Give `bodies` new physical values, in every world or per world (domain randomisation,
        parameter sweeps).

        Each value is None (kept), a scalar (every addressed world), (k_worlds,) or (k_worlds,
        k_bodies), in the body keywords' units (see Scene): mass (kg) > 0, at most
        masses.MAX_MASS; inertia (kg m²) > 0 (left None while the mass changes, one from the
        shape follows the new mass, one given by hand stays); static_friction, dynamic_friction,
        elasticity and vel_damping (1/s) >= 0; gravity_scale finite. A static body (mass 0) takes
        no mass or inertia, a dynamic one no mass 0. World w then steps bit for bit as a one-world
        scene built with its values. Sleeping bodies stay asleep until woken. Snapshots, state
        files and pickles carry the values. `world`: the worlds (see Scene). As with
        set_shape_params, the device is written at the scene's next use of it, with the other
        edits since.
        """
        keywords = locals()  # the values by name: BODY_PARAMS's keys, in their order
        given = {name: keywords[name] for name in BODY_PARAMS if keywords[name] is not None}
        rows = spatial_queries.body_indices(bodies, self.n_bodies)
        worlds = world_selection(world, self._n_worlds)
        unit = self._shapes.unit_inertia(self._builder, worlds, rows)  # each world's shapes'
        checked = self._params.check_body_values(self._builder, rows, worlds, given, unit)
        if given and len(worlds):
            self._params.set_body_values(self._builder, rows, worlds, checked, unit)
            self._upload_params()

    @serialized
    def get_body_params(self, bodies=None) -> dict[str, np.ndarray]:
        """Every world's values of `bodies` (None: all), as set_body_params takes them: {name:
        (n_worlds, k) float64} copies, for mass (kg), inertia (kg m², inf for a static body),
        static_friction, dynamic_friction, elasticity, vel_damping (1/s) and gravity_scale.
        """
        rows = (
            np.arange(self.n_bodies)
            if bodies is None
            else spatial_queries.body_indices(bodies, self.n_bodies)
        )
        values = self._params.body_values(self._builder)
        return {name: values[name][:, rows].copy() for name in BODY_PARAMS}

    @serialized
    def set_shape_params(
        self,
        bodies,
        *,
        size=None,
        radius=None,
        length=None,
        vertices=None,
        inertia=None,
        position=None,
        angle=None,
        world=None,
    ):
        """Give `bodies` new shape sizes, in every world or per world (domain randomisation of
        geometry, parameter sweeps), keywords named as the add_* methods name them.

        Each value is None (kept), one value for every addressed world, one per world
        (k_worlds, ...) or one per world and body (k_worlds, k_bodies, ...), checked as the
        add_* methods check theirs: `size` (width, height), m, of boxes (add_box; (2,),
        (k_worlds, 2) or (k_worlds, k_bodies, 2)); `radius`, m: a circle's or a capsule's
        radius, a box's or a polygon's rounding (a scalar, (k_worlds,) or (k_worlds,
        k_bodies)); `length`, m, of capsules (>= shapes.MIN_SIZE: a body stays a capsule);
        `vertices` of polygons and boxes ((m, 2), (k_worlds, m, 2) or (k_worlds, k_bodies,
        m, 2), body frame, as add_polygon takes them: re-centred on the centroid, the same
        vertex count m as the body's). A keyword left None keeps each world's current value.
        A body keeps its kind in every world: a circle takes radius, a box size, radius or
        vertices (not both size and vertices), a polygon vertices and radius, a capsule
        length and radius; edges and chain links are not resized (a ValueError).

        Static bodies (mass 0: terrain, walls, obstacles, edges and chains included) are
        placed per world with `position` (m: (2,), (k_worlds, 2) or (k_worlds, k_bodies, 2))
        and `angle` (rad, shaped as `radius`; None keeps each world's): the world's state
        takes the pose now (as set_state(worlds=) writes it: the world wakes, its contacts
        are found afresh) and a reset starts from it (reset_worlds without a state,
        on_fault="reset"). World w then steps as a one-world scene that added the body there.

        The mass stays (the add_* keyword's, or set_body_params'); the inertia follows the new
        shape (mass x Shape.unit_inertia, as add_* computes it) where it was the shape's, one
        given by hand stays, and `inertia` (kg m², > 0, dynamic bodies only; shaped as
        `radius`) sets it. World w then steps bit for bit as a one-world scene built with
        add_* of its shapes (its grid cell is that scene's too). The addressed worlds wake,
        and their contacts are found afresh at the new sizes. Snapshots, state files, pickles
        and replicate carry the shapes and placements. `world`: the worlds (see Scene).

        The values are checked and stored at once; the device is written at the scene's next
        use of it (a step, a read, an edit that writes the device), together with the other
        edits of per-world values since: one upload and one wake for all of them, the same
        scene as each written alone (access/edits.py's UnwrittenEdits).
        """
        keywords = {"size": size, "radius": radius, "length": length, "vertices": vertices}
        given = {name: value for name, value in keywords.items() if value is not None}
        arguments = dict(given, inertia=inertia, position=position, angle=angle)
        arguments = {name: value for name, value in arguments.items() if value is not None}
        rows = spatial_queries.body_indices(bodies, self.n_bodies)
        worlds = world_selection(world, self._n_worlds)
        new, placed, masses = check_shape_change(
            self._builder, self._params, self._shapes, rows, worlds, arguments
        )
        placing = position is not None or angle is not None
        if not len(worlds) or not (given or inertia is not None or placing):
            return
        if placing:  # kept for resets; the build takes them (WorldShapes.initial_state)
            self._shapes.store_poses(self._builder, rows, worlds, placed)
        if given or inertia is not None:
            self._shapes.store(self._builder, rows, worlds, new)
            self._params.set_body_values(self._builder, rows, worlds, masses)
        if not self._is_built():
            return  # (the build takes them)
        # The device writes wait for the scene's next use of the device, where the edits
        # since are written together (edits.UnwrittenEdits).
        unwritten = self._unwritten_edits()
        if given or inertia is not None:
            unwritten.values = unwritten.shapes = True
            # (a resize or a placement wakes them, below)
            unwritten.recheck |= not (given or placing)
        if given or placing:
            unwritten.wakes.append((worlds, bool(given), rows, placed if placing else None))

    @serialized
    def get_shape_params(self, bodies=None) -> dict[str, np.ndarray]:
        """Every world's shape sizes of `bodies` (None: all), as set_shape_params takes them:
        {name: float64 copies}: "size" (n_worlds, k, 2) of boxes, "radius" (n_worlds, k) (a
        circle's or capsule's radius, a polygon's rounding; 0 for edges), "length"
        (n_worlds, k) of capsules, "vertices" (n_worlds, k, MAX_POLYGON_VERTICES, 2) of
        polygons and boxes (body frame, counter-clockwise, centred on the centroid; rows
        past a body's vertex count NaN); NaN where a body's shape has no such value."""
        rows = (
            np.arange(self.n_bodies)
            if bodies is None
            else spatial_queries.body_indices(bodies, self.n_bodies)
        )
        return self._shapes.params(self._builder, rows.tolist())

    @serialized
    def set_gravity(self, gravity):
        """Set the `gravity` of every world, m/s²: (2,) for every world (scene.gravity becomes it)
        or (n_worlds, 2). Bodies asleep stay asleep until something wakes them."""
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
        """Give `joints`' motors new PID gains per world (set_joint_mode: in every world); the
        PID's integral and derivative state go on (reset_worlds restarts them).

        Args:
            pid (array_like | None): (p, i, d) gains: (3,) for every addressed world, (k_worlds, 3)
                one set per world, or (k_worlds, k_joints, 3); None changes nothing.
            world (int | array_like | None): the worlds (see Scene).
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
        rows = (
            np.arange(self.n_joints)
            if joints is None
            else spatial_queries.joint_indices(joints, self.n_joints)
        )
        return {"pid": self._params.joint_gains(self._builder)[:, rows].copy()}

    def _upload_params(self):
        """The per-world values into the model rows, and onto the device if the arrays are
        built (else the build takes them): at the scene's next use of the device, with the
        other edits since (edits.UnwrittenEdits)."""
        if self.n_bodies and self._is_built():
            self._unwritten_edits().values = True

    # ------------------------------------------------------------------ state
    @serialized
    def get_state(self, bodies=None, dtype=np.float64, out: State | None = None) -> State:
        """Every world's state, or that of some bodies: poses, velocities, sleep flags.

        For observations: `bodies` (None: all) gathers k of them, `dtype` np.float32 (or the
        default np.float64) halves the float arrays' bytes, and `out` writes in one kernel launch
        into a State the caller keeps (returned filled in; else a State of new NumPy arrays): of
        C-contiguous, writable NumPy arrays or torch tensors (CPU ones, or CUDA ones on Taichi's
        CUDA backend), of shapes (n_worlds, k, 2), (n_worlds, k), (n_worlds, k, 2), (n_worlds, k)
        and (n_worlds, k), sleeping bool and the others one float dtype (which `dtype` then
        follows); a field left None is not gathered.
        """
        rows = None if bodies is None else spatial_queries.body_indices(bodies, self.n_bodies)
        if out is not None:
            return readout.gather_state(self._context(), rows, out)
        return readout.body_state(self._context(), rows, readout.float_dtype(dtype))

    @serialized
    def get_columns(self, columns, dtype=np.float64, out=None) -> np.ndarray:
        """Chosen quantities of chosen bodies, every world's, as the columns of one
        (n_worlds, m) array: a learning task's observations in one kernel launch.

        Args:
            columns (sequence): m tuples (body, quantity) or (body, quantity, scale): a
                body index, one of "x", "y" (m), "angle" (rad), "vx", "vy" (m/s),
                "angular_velocity" (rad/s), and a number the value is multiplied by (1.0
                by default; -1.0 flips a sign convention, 1 / range normalises). The
                product is taken in float32, the device's type, and stored in the array's
                dtype.
            dtype (numpy dtype): np.float64 (default) or np.float32 of a new array; with
                `out`, its dtype.
            out (np.ndarray | None): a C-contiguous, writable (n_worlds, m) float32 or
                float64 NumPy array (or torch tensor, as get_state's `out`) to fill and
                return; else a new array.

        Raises:
            TypeError, ValueError: a column, dtype or `out` that breaks these rules, naming
                it (columns[i]'s quantity ...).
        """
        spec, scales, out = gather.columns_target(
            columns, self.n_bodies, self._n_worlds, readout.float_dtype(dtype), out
        )
        gather.gather_columns(self._context(), spec, scales, out)
        return out

    @serialized
    def set_state(self, state: State, worlds=None):
        """Put `state` (a State of this scene's shapes: (n_worlds, n_bodies, ...), or with `worlds`
        also one of k rows, row i to worlds[i]) into every world, or into `worlds` only (the
        others bitwise untouched).

        The way to give each world its own initial conditions: take get_state(), change it, set
        it. The previous pose becomes the new pose, contacts are found afresh, and the last
        step's contact events are forgotten. state.sleeping holds bools or integers 0 and 1; the
        other arrays finite real numbers, within the coordinates and speeds the engine simulates.
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
        """Start the given `worlds` (not None) over on the device; other worlds stay bitwise as they
        were.

        Each takes the built initial state (the add_* poses and velocities, the joints' targets),
        or its rows of `state`: a State of n_worlds rows (each world its own) or of one row per
        given world (row i to worlds[i]), or a SceneSnapshot of this scene (its poses, velocities
        and motor targets). It is awake, its pending forces are dropped, its motors' targets start
        over with their PID state, and its contacts are forgotten. Enabled flags and per-world
        values stay.
        """
        if worlds is None:
            raise TypeError("worlds must be a world index, a bool mask or indices, got None")
        chosen = world_selection(worlds, self._n_worlds, "worlds")
        ctx = self._context()
        rows, targets = world_resets.reset_rows(
            state, chosen, ctx, self._builder, self._binding, self._shapes
        )
        if len(chosen) == 0:
            return
        self._drop_pending_forces(chosen)
        # The built initial state holds every joint (unless static bodies were placed per
        # world: a joint to one may not).
        in_place = state is None and not self._shapes.poses
        edits.write_world_rows(ctx, chosen, rows, targets=targets, joints_in_place=in_place)

    @serialized
    def _on_device(self, work, reset: np.ndarray | None = None):
        """work(ctx): the engine's own work on this scene's device state (a vector env's
        step, envs/device_step.py), with the scene resident, its steps in flight read,
        holding the device lock; returns what work returns.

        Args:
            work: a callable of a StepContext.
            reset: (k,) indices of the worlds `work` starts over as reset_worlds(worlds,
                state) does (transfer.write_body_row with reset, restart_joint,
                forget_contact): the host's side of that reset follows (their pending
                forces dropped, their contacts found afresh, their joints rejoined).
        """
        ctx = self._context()
        result = work(ctx)
        if reset is not None and len(reset):
            self._drop_pending_forces(reset)
            edits.note_world_rows_written(ctx, reset, joints_in_place=False)
        return result

    def _drop_pending_forces(self, worlds: np.ndarray):
        """The forces applied to `worlds` ((k,) indices) and not yet stepped, dropped (a
        reset's)."""
        for force, torque in self._pending_forces.values():
            force[worlds], torque[worlds] = 0.0, 0.0

    def _reset_targets(self) -> np.ndarray:
        """(n_joints,) float32: the motor targets reset_worlds(worlds, state) restarts every
        joint with, the built ones (world_resets.reset_rows' for a State)."""
        return np.asarray(self._builder.initial_state(1)["joints"]["target"], np.float32)

    # ------------------------------------------------------------------ contacts
    @serialized
    def contacts(self, world: int | None = 0) -> Contacts:
        """The pairs of bodies touching in `world` (None: every world), one row per pair, sorted by
        (world, body_a, body_b), with the impulses the last step applied (see Contacts).

        After a step: every pair that touched in one of its substeps (a point within a quarter of
        the slop, or pushing; once reported, within a slop: solver/contacts.HOLD_FRACTION) and the
        contacts of sleeping bodies. Before the first step or after set_state: the overlaps at
        the current poses, with zero impulses.
        """
        if world is not None:
            world = as_index(world, "world", self._n_worlds, "worlds")
        return readout.contacts(self._context(), self._sensors(), world)

    @serialized
    def touching(self, bodies=None) -> np.ndarray:
        """Which bodies touch another in each world: a task's contact flags (a foot on the
        ground, a hull on the rocks) in one kernel launch, without reading every contact.

        Args:
            bodies (int | sequence | None): body indices (k of them; None: every body, in
                index order).

        Returns:
            (n_worlds, k) bool: [w, i] True where bodies[i] is in one of world w's pairs
            that contacts(world=None) lists (sensors' pairs too).

        Raises:
            TypeError, ValueError: `bodies` not body indices (naming it).
        """
        rows = (
            np.arange(self.n_bodies)
            if bodies is None
            else spatial_queries.body_indices(bodies, self.n_bodies)
        )
        return readout.touching(self._context(), rows)

    @serialized
    def contact_events(self) -> ContactEvents:
        """The last step's begin and end contact events of every world (see ContactEvents), each
        list sorted by (world, body_a, body_b). A pair that stays in contact, asleep or awake,
        begins once. Empty before the first step and after set_state.
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
    def collision_matrix(self) -> np.ndarray:
        """Which two bodies of a world may ever collide: an (n_bodies, n_bodies) bool array,
        symmetric, False on the diagonal. True where both bodies have a collision shape and
        nothing keeps them apart: the collision filter (set_collision_filter), a joint
        without collide_connected, disable_collision. Whether either moves is not read (two
        static bodies count), nor the per-world `enabled` flags. A scene of small worlds
        where it holds nowhere steps without the contact stages (StepOptions.contactless_step).
        """
        return pairing.may_pair(self._built().model)

    @serialized
    def set_collision_filter(
        self, body: int, collision_group=None, category_bits=None, mask_bits=None
    ):
        """Change `body`'s filter in every world (None keeps a setting), from the next step; the
        body wakes. Two bodies sharing a negative collision_group (within int32's range; 0: none)
        never collide, and sharing a positive one always do (Fx2D's rule); otherwise each one's
        category_bits (the categories it is in, a 32-bit mask) must meet the other's mask_bits
        (the categories it collides with; Box2D's rule).
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
    def set_enabled(self, bodies, enabled, world=None):
        """Take `bodies` (an index or a non-empty sequence) out of the simulation (enabled=False) or
        put them back, in `world` (see Scene).

        `enabled` is one bool for every addressed world and body, or a (k_worlds, k_bodies)
        bool array, one per addressed world (in `world`'s order) and body: a vector env's
        restarts set which of a level's optional bodies take part in one call.

        A disabled body keeps its index and state but never moves, collides, joins a joint's
        constraints or answers a query, as if removed; enabled again, it goes on awake from where
        it was. Sleeping bodies that touched it or were jointed to it wake.
        """
        indices = spatial_queries.body_indices(bodies, self.n_bodies)
        worlds = world_selection(world, self._n_worlds)
        flags = as_bool_table(enabled, "enabled", len(worlds), len(indices))
        if len(worlds):
            edits.write_enabled(self._context(), indices, worlds, flags)

    @serialized
    def remove_body(self, body: int):
        """Remove `body` from every world: set_enabled(body, False). Its index stays (the batch
        layout does not change)."""
        self.set_enabled(self._builder.check_body(body), False)

    @serialized
    def enabled(self) -> np.ndarray:
        """(n_worlds, n_bodies) bool: which bodies take part in each world (see set_enabled)."""
        return readout.enabled_flags(self._context())

    @serialized
    def add_group(self, name: str, bodies, self_collide: bool = False):
        """Make a group `name` (unique among groups) of `bodies` (an index or a non-empty sequence):
        Fx2D's entity groups. Unless self_collide, its members share a new negative
        collision_group (replacing their own): they never collide with one another.
        set_group_enabled and remove_group act on them together.
        """
        members = spatial_queries.body_indices(bodies, self.n_bodies)
        group = self._builder.add_group(name, members, as_bool(self_collide, "self_collide"))
        if group is not None:
            for body in members:
                self._builder.set_filter(int(body), collision_group=group)
            self._upload_filters(members)

    @serialized
    def group_bodies(self, name: str) -> np.ndarray:
        """The body indices of group `name`, (k,) int64, in the order given.

        Raises:
            ValueError: no group has this name.
        """
        return np.array(self._builder.group(name), np.int64)

    @serialized
    def set_group_enabled(self, name: str, enabled: bool, world=None):
        """set_enabled(group_bodies(name), enabled, world): take every member of group `name` out of
        the simulation (enabled False) or put them back.

        Raises:
            ValueError: no group has this name.
        """
        self.set_enabled(self.group_bodies(name), enabled, world)

    @serialized
    def remove_group(self, name: str):
        """Remove every member of group `name` from every world (remove_body); forget the group.

        Raises:
            ValueError: no group has this name.
        """
        members = self.group_bodies(name)
        self.set_enabled(members, False)
        self._builder.forget_group(name)

    # ------------------------------------------------------------------ queries
    @serialized
    def ray_cast(self, origins, directions, max_distance, *, sensors: bool = False) -> RayHits:
        """The nearest body each ray hits, in every world (see RayHits); ties go to the lowest body
        index. Disabled and shape-less bodies are never hit. Changes nothing a step reads.

        Args:
            origins (array_like): ray starts, m, within +-shapes.MAX_COORDINATE: (2,) one ray for
                every world, (n_rays, 2) the same rays in every world, or (n_worlds, n_rays, 2);
                from far away as exact as from beside the bodies.
            directions (array_like): as origins; need not be unit length, must not be zero.
            max_distance (float | array_like): m, > 0, within float32's range: a scalar or
                broadcastable to (n_worlds, n_rays).
            sensors: also hit sensors (skipped by default).
        """
        return spatial_queries.ray_cast(
            self._context, self._n_worlds, origins, directions, max_distance, sensors
        )

    @serialized
    def ray_cast_all(
        self, origins, directions, max_distance, *, sensors: bool = False
    ) -> RayHitList:
        """Every body each ray crosses, nearest first, once per ray where it enters, in every world
        (see RayHitList). origins, directions, max_distance and sensors: as ray_cast."""
        return spatial_queries.ray_cast_all(
            self._context, self._n_worlds, origins, directions, max_distance, sensors
        )

    @serialized
    def query_point(self, points, *, sensors: bool = False) -> Overlaps:
        """The bodies containing each point (boundary included), in every world (see Overlaps).
        `points`, m: (2,), (n_points, 2) or (n_worlds, n_points, 2), as ray_cast's origins;
        `sensors`: also report sensors. Disabled and shape-less bodies never count.
        """
        return spatial_queries.query_point(self._context, self._n_worlds, points, sensors)

    @serialized
    def query_aabb(self, lower, upper, *, sensors: bool = False) -> Overlaps:
        """The bodies whose shape (not merely its bounding box) overlaps or touches each
        axis-aligned box, in every world: one row per (box, body) (see Overlaps). `lower` and
        `upper` corners, m, lower <= upper: (2,), (n_boxes, 2) or (n_worlds, n_boxes, 2), as
        ray_cast's origins; `sensors`: also report sensors. Disabled and shape-less bodies never
        count.
        """
        return spatial_queries.query_aabb(self._context, self._n_worlds, lower, upper, sensors)

    @serialized
    def overlap_shape(
        self, shape: shapes.Shape, position, angle=0.0, *, sensors: bool = False
    ) -> Overlaps:
        """The bodies each placed copy of `shape` (a fx2d_gpu.shapes.Shape; edges two-sided here)
        overlaps, touches or contains, in every world: one row per (query, body) (see Overlaps).
        `position` (m: (2,), (n_queries, 2) or (n_worlds, n_queries, 2), as ray_cast's origins)
        places its body-frame origin, rotated by `angle` (rad: a scalar or broadcastable to
        (n_worlds, n_queries)); `sensors`: also report sensors. Disabled and shape-less bodies
        never count.
        """
        return spatial_queries.overlap_shape(
            self._context, self._n_worlds, shape, position, angle, sensors
        )

    def __repr__(self) -> str:
        return (
            f"Scene(n_bodies={self.n_bodies}, n_worlds={self._n_worlds}, "
            f"substeps={self.substeps}, solver={self.solver!r}, "
            f"backend={self.backend!r})"
        )


def _position(position) -> np.ndarray:
    return as_vector2(position, "position", MAX_COORDINATE)
