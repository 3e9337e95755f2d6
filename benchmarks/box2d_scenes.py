"""The benchmark scenes in Box2D v3 (pyb2d3), built from the same BodySpec lists as fx2d_gpu's.

Box2D v3 is the engine to beat (issue 46): its soft-step solver at 4 substeps, optionally
on a thread pool. The bodies, sizes, masses (1 kg each), frictions (0.6), restitution (0.1,
fx2d_gpu's default elasticity) and gravity (-9.81 m/s²) are fx2d_gpu's; Box2D's own
tuning (contact hertz, linear slop, speculative distance, continuous collision against
static bodies) stays at its defaults. pyb2d3 is optional: `available()` says whether it is
installed, and nothing here imports it before a world is built.
"""

import dataclasses
import importlib.util
import math

import numpy as np

from fx2d_gpu.scenes import (
    SMALL_WORLD,
    SMALL_WORLD_CIRCLE_ELASTICITY,
    SMALL_WORLD_CIRCLES,
    SMALL_WORLD_HINGE,
    BodySpec,
    small_world_velocities,
)

#: Box2D v3's default substep count (b2World_Step's subStepCount in its samples).
SUBSTEPS = 4
#: Solver passes of a Box2D v3 step over its contacts: each substep solves (with bias) and
#: relaxes (without), then one restitution pass: 4 x 2 + 1.
PASSES_PER_STEP = 2 * SUBSTEPS + 1
#: fx2d_gpu's default elasticity (Scene's `elasticity`), as Box2D's restitution.
RESTITUTION = 0.1
GRAVITY = (0.0, -9.81)


def available() -> bool:
    """Whether pyb2d3 (Box2D v3's Python bindings) is installed."""
    return importlib.util.find_spec("pyb2d3") is not None


def engine_name(threads: int, enable_sleep: bool = True) -> str:
    """The suite's engine column: "box2d (1 thread)", "box2d (2 threads, no sleep)"."""
    plural = "thread" if threads == 1 else "threads"
    return f"box2d ({threads} {plural}{'' if enable_sleep else ', no sleep'})"


class Box2DWorld:
    """A Box2D v3 world and its bodies (bodies[i] made from specs[i] or the i-th circle of
    the joint grid), stepped at dt with SUBSTEPS substeps.

    threads: 1 runs Box2D serially (no task system, its default); more gives the world a
    pyb2d3.ThreadPool of that many threads. contact_events: shapes report begin/end touch
    events, which `track_contacts` reads after each step (off for timing: reading them in
    Python costs time Box2D does not spend).
    """

    def __init__(
        self,
        threads: int = 1,
        enable_sleep: bool = True,
        contact_events: bool = False,
        gravity=GRAVITY,
    ):
        import pyb2d3

        self._b2 = pyb2d3
        self.threads = threads
        # The pool must outlive the world: the world's tasks run on its threads.
        self.thread_pool = pyb2d3.ThreadPool(threads) if threads > 1 else None
        self.world = pyb2d3.World(thread_pool=self.thread_pool, gravity=gravity)
        self.world.sleeping_enabled = enable_sleep
        self.enable_sleep = enable_sleep
        self.contact_events = contact_events
        self.bodies = []
        self.n_joints = 0
        # Touching shape pairs -> manifold points when they began touching (track_contacts).
        self._touching: dict[tuple[int, int], int] = {}

    def _shape_def(
        self, mass: float, area: float, friction: float, restitution: float = RESTITUTION
    ):
        """A shape definition giving a body of `mass` kg (density = mass / area, m²).
        Box2D mixes two shapes' frictions as the square root of their product and takes
        the larger restitution: equal values on every shape give the same coefficients as
        fx2d_gpu's (the smaller of the two), and the larger restitution is the soft step's
        rule too."""
        b2 = self._b2
        density = mass / area if mass > 0.0 else 0.0
        return b2.shape_def(
            density=density,
            enable_contact_events=self.contact_events,
            material=b2.surface_material(friction=friction, restitution=restitution),
        )

    def _rotation(self, angle: float):
        """Box2D's rotation of `angle` (rad) from exact cosine and sine: b2MakeRot's
        approximation is off by up to ~1e-3 rad, and the bodies start at the specs' angles."""
        rotation = self._b2.Rot()
        rotation.c, rotation.s = math.cos(angle), math.sin(angle)
        return rotation

    def add_spec(self, spec: BodySpec, offset=(0.0, 0.0), restitution: float = RESTITUTION):
        """Add one body as `spec` describes it (mass 0: static), moved by `offset` (m), its
        shape of `restitution`; returns the pyb2d3 Body."""
        b2 = self._b2
        position = (spec.position[0] + offset[0], spec.position[1] + offset[1])
        body_def = b2.body_def(
            type=b2.BodyType.DYNAMIC if spec.mass > 0.0 else b2.BodyType.STATIC,
            position=position,
            rotation=self._rotation(spec.angle),
        )
        if spec.mass > 0.0:
            body_def.linear_velocity = spec.velocity
        body = self.world.create_body(body_def)
        if spec.kind == "circle":
            radius = spec.size[0]
            shape_def = self._shape_def(
                spec.mass, math.pi * radius * radius, spec.friction, restitution
            )
            body.create_shape(shape_def, b2.circle(radius=radius))
        else:
            width, height = spec.size
            shape_def = self._shape_def(spec.mass, width * height, spec.friction, restitution)
            body.create_shape(shape_def, b2.box(0.5 * width, 0.5 * height))
        self.bodies.append(body)
        return body

    def add_revolute_joint(self, parent: int, child: int, anchor) -> None:
        """A free hinge between bodies[parent] and bodies[child] at `anchor` (m, in the
        parent's frame), as fx2d_gpu's Scene.add_revolute_joint: joined bodies do not
        collide, no limit, no motor."""
        body_a, body_b = self.bodies[parent], self.bodies[child]
        world_anchor = body_a.world_point(anchor)
        self.world.create_revolute_joint(
            body_a=body_a,
            body_b=body_b,
            local_anchor_a=tuple(anchor),
            local_anchor_b=body_b.local_point(world_anchor),
        )
        self.n_joints += 1

    def step(self, dt: float) -> None:
        self.world.step(dt, SUBSTEPS)

    def heights(self, indices) -> np.ndarray:
        """The y coordinates (m) of bodies[i] for i in `indices`."""
        return np.array([self.bodies[i].position.y for i in indices], np.float64)

    def positions(self) -> np.ndarray:
        """(n, 2) every body's position, m."""
        batch = self._b2.Bodies()
        for body in self.bodies:
            batch.append(body.id)
        return batch.get_positions().astype(np.float64)

    def track_contacts(self) -> None:
        """Read the last step's begin/end touch events (contact_events=True) into the set of
        touching shape pairs."""
        events = self.world.get_contact_events()
        for event in events.begin_events():
            key = (event.shape_a.id, event.shape_b.id)
            self._touching[key] = event.manifold.point_count
        for event in events.end_events():
            self._touching.pop((event.shape_a.id, event.shape_b.id), None)

    def touching(self) -> tuple[int, int]:
        """(touching contacts, their manifold points) from the events tracked so far: the
        contacts Box2D's solver solves. A manifold's points are counted when it began
        touching (Box2D exposes no later count through pyb2d3)."""
        return len(self._touching), sum(self._touching.values())


def build_world(
    specs: list[BodySpec], threads: int = 1, enable_sleep: bool = True, contact_events: bool = False
) -> Box2DWorld:
    """A Box2DWorld holding `specs` in order (bodies[i] = specs[i])."""
    world = Box2DWorld(threads, enable_sleep, contact_events)
    for spec in specs:
        world.add_spec(spec)
    return world


def joint_grid_world(
    rows: int = 100,
    columns: int = 100,
    spacing: float = 1.0,
    radius: float = 0.4,
    threads: int = 1,
    enable_sleep: bool = True,
    contact_events: bool = False,
) -> Box2DWorld:
    """fx2d_gpu.scenes.joint_grid in Box2D: rows x columns circles (1 kg, `radius` m,
    `spacing` m apart), each hinged to its left and upper neighbours, the top row static.
    Body index = row * columns + column, row 0 at the top; the joints in the same order."""
    world = Box2DWorld(threads, enable_sleep, contact_events)
    for row in range(rows):
        for column in range(columns):
            world.add_spec(
                BodySpec(
                    "circle",
                    (column * spacing, -row * spacing),
                    (radius, radius),
                    mass=0.0 if row == 0 else 1.0,
                )
            )
    for row in range(rows):
        for column in range(columns):
            body = row * columns + column
            if column > 0 and row > 0:  # the pinned row needs no joints among itself
                world.add_revolute_joint(body - 1, body, (0.5 * spacing, 0.0))
            if row > 0:
                world.add_revolute_joint(body - columns, body, (0.0, -0.5 * spacing))
    return world


#: Distance between neighbouring small worlds in small_worlds_world, m: each stays within
#: x in [-6, 6] m (its ground) and y in [-1, 4] m for the benchmark's second of simulated
#: time (the circles' throws peak below 3 m, the rod swings within 1 m of its hinge).
SMALL_WORLD_SPACING = (16.0, 8.0)


def small_worlds_world(
    n_worlds: int, threads: int = 1, seed: int = 0, enable_sleep: bool = True
) -> Box2DWorld:
    """fx2d_gpu.scenes.batched_small in Box2D v3: its n_worlds worlds side by side in one
    Box2D world, on a grid of SMALL_WORLD_SPACING around the origin (at 4,096 worlds,
    1 km x 0.5 km), each world's circles thrown as batched_small throws them. Box2D v3 has
    no batch of worlds (a process holds at most 128 of its worlds), so one world of
    n_worlds islands is how it steps them all at once, on its threads; no two of them
    meet within the benchmark's steps. bodies[8 w + i] is body i of world w."""
    world = Box2DWorld(threads, enable_sleep)
    columns = math.ceil(math.sqrt(n_worlds))
    rows = math.ceil(n_worlds / columns)
    velocities = small_world_velocities(n_worlds, seed)
    parent, child, anchor = SMALL_WORLD_HINGE
    for index in range(n_worlds):
        offset = (
            SMALL_WORLD_SPACING[0] * (index % columns - 0.5 * (columns - 1)),
            SMALL_WORLD_SPACING[1] * (index // columns - 0.5 * (rows - 1)),
        )
        first = len(world.bodies)
        for body, spec in enumerate(SMALL_WORLD):
            thrown = body in SMALL_WORLD_CIRCLES
            if thrown:
                velocity = velocities[index, SMALL_WORLD_CIRCLES.index(body)]
                spec = dataclasses.replace(spec, velocity=(float(velocity[0]), float(velocity[1])))
            world.add_spec(spec, offset, SMALL_WORLD_CIRCLE_ELASTICITY if thrown else RESTITUTION)
        world.add_revolute_joint(first + parent, first + child, anchor)
    return world
