"""Scenes shared by demos, tests and benchmarks (defined once here).

The benchmark scenes (Box2D's large pyramid and many pyramids, a joint grid, poured piles,
small batched worlds) are described as lists of `BodySpec` first, so the benchmarks can
build the very same bodies in another engine (pymunk) for a side-by-side run.
"""

import math
from dataclasses import dataclass

import numpy as np

from . import shapes
from .scene import Scene

#: Friction of the benchmark scenes (Box2D's samples use 0.6).
FRICTION = 0.6


@dataclass(frozen=True)
class BodySpec:
    """One body of a benchmark scene, engine-neutral.

    kind "box": size = (width, height) m; kind "circle": size = (radius, radius) m.
    position (m), angle (rad), velocity (m/s); mass 0 makes it static.
    """

    kind: str
    position: tuple[float, float]
    size: tuple[float, float]
    angle: float = 0.0
    mass: float = 1.0
    velocity: tuple[float, float] = (0.0, 0.0)
    friction: float = FRICTION


def build_scene(specs: list[BodySpec], **scene_kwargs) -> Scene:
    """A Scene holding `specs` in order (body i = specs[i]), added in bulk
    (Scene.add_shapes): the same bodies as an add_circle or add_box call each."""
    scene = Scene(**scene_kwargs)
    n = len(specs)
    is_circle = np.array([spec.kind == "circle" for spec in specs], bool)
    sizes = np.array([spec.size for spec in specs], np.float64).reshape(n, 2)
    body_shapes = [None] * n
    for where, made in (
        (np.flatnonzero(is_circle), shapes.circles(sizes[is_circle, 0], int(is_circle.sum()))),
        (np.flatnonzero(~is_circle), shapes.boxes(sizes[~is_circle], int((~is_circle).sum()))),
    ):
        for i, shape in zip(where.tolist(), made, strict=True):
            body_shapes[i] = shape
    friction = np.array([spec.friction for spec in specs], np.float64)
    scene.add_shapes(
        np.array([spec.position for spec in specs], np.float64).reshape(n, 2),
        body_shapes,
        angle=np.array([spec.angle for spec in specs], np.float64),
        mass=np.array([spec.mass for spec in specs], np.float64),
        velocity=np.array([spec.velocity for spec in specs], np.float64).reshape(n, 2),
        static_friction=friction,
        dynamic_friction=friction,
    )
    return scene


def pyramid_specs(
    base: int, box_size: float = 1.0, x: float = 0.0, y: float = 0.0
) -> list[BodySpec]:
    """Rows of base, base - 1, ..., 1 boxes of box_size (m), the bottom row centred on x
    and resting on height y; the last box is the top one."""
    specs = []
    for row in range(base):
        count = base - row
        for i in range(count):
            specs.append(
                BodySpec(
                    "box",
                    (x + (i - (count - 1) / 2) * box_size, y + (row + 0.5) * box_size),
                    (box_size, box_size),
                )
            )
    return specs


def pyramid_layout(base: int, box_size: float = 1.0) -> tuple[list[BodySpec], list[int]]:
    """Box2D's pyramid on a static ground (body 0): (specs, [index of the top box])."""
    ground = BodySpec("box", (0.0, -0.5), (max(40.0, 2.0 * base * box_size), 1.0), mass=0.0)
    specs = [ground] + pyramid_specs(base, box_size)
    return specs, [len(specs) - 1]


def many_pyramids_layout(
    grid: int = 20, base: int = 10, box_size: float = 1.0
) -> tuple[list[BodySpec], list[int]]:
    """Box2D's "many pyramids": grid x grid pyramids of `base`, each row of pyramids on its
    own static ground slab (one body per row). Returns (specs, top box of each pyramid).

    grid 20, base 10: 400 pyramids, 22,000 boxes (+ 20 grounds).
    """
    pitch_x = (base + 2) * box_size
    pitch_y = (base + 3) * box_size
    width = grid * pitch_x
    specs, tops = [], []
    for row in range(grid):
        y = row * pitch_y
        specs.append(BodySpec("box", (0.0, y - 0.5 * box_size), (width, box_size), mass=0.0))
        for column in range(grid):
            x = (column - (grid - 1) / 2) * pitch_x
            specs += pyramid_specs(base, box_size, x, y)
            tops.append(len(specs) - 1)
    return specs, tops


def pile_layout(n_bodies: int, seed: int = 0, spacing: float = 0.75) -> list[BodySpec]:
    """`n_bodies` mixed circles (radius 0.15-0.3 m) and boxes (0.25-0.45 m, any angle) on a
    jittered grid above a static container (bodies 0-2: floor and walls), poured in by
    gravity. The grid is four times as wide as it is tall (10k bodies: 200 x 50, 37 m
    high), so the pour lands within a few seconds."""
    rng = np.random.default_rng(seed)
    columns = max(2, math.ceil(2.0 * math.sqrt(n_bodies)))
    rows = math.ceil(n_bodies / columns)
    width = columns * spacing
    height = rows * spacing + 2.0
    specs = [BodySpec("box", (0.0, -0.5), (width + 4.0, 1.0), mass=0.0)]
    for side in (-1, 1):
        specs.append(
            BodySpec(
                "box", (side * (width / 2 + 0.5), height / 2 - 1.0), (1.0, height + 2.0), mass=0.0
            )
        )
    jitter = rng.uniform(-0.05, 0.05, size=(n_bodies, 2))
    radii = rng.uniform(0.15, 0.3, size=n_bodies)
    sides = rng.uniform(0.25, 0.45, size=(n_bodies, 2))
    angles = rng.uniform(-math.pi, math.pi, size=n_bodies)
    for i in range(n_bodies):
        row, column = divmod(i, columns)
        position = (
            float((column + 0.5) * spacing - width / 2 + jitter[i, 0]),
            float(0.5 + (row + 0.5) * spacing + jitter[i, 1]),
        )
        if i % 2 == 0:
            r = float(radii[i])
            specs.append(BodySpec("circle", position, (r, r), float(angles[i])))
        else:
            specs.append(
                BodySpec(
                    "box", position, (float(sides[i, 0]), float(sides[i, 1])), float(angles[i])
                )
            )
    return specs


def pyramid(
    base: int,
    *,
    box_size: float = 1.0,
    n_worlds: int = 1,
    arch: str = "auto",
    substeps: int = 11,
    friction: float = FRICTION,
    **scene_kwargs,
) -> Scene:
    """Box2D's pyramid: rows of `base`, `base`-1, ... boxes of `box_size` (m) on a ground.

    base 100 is Box2D's "large pyramid" (5,050 boxes). Body 0 is the ground; the last body is
    the top box.
    """
    specs, _ = pyramid_layout(base, box_size)
    specs = [BodySpec(s.kind, s.position, s.size, mass=s.mass, friction=friction) for s in specs]
    return build_scene(specs, n_worlds=n_worlds, arch=arch, substeps=substeps, **scene_kwargs)


def many_pyramids(grid: int = 20, base: int = 10, **scene_kwargs) -> Scene:
    """Box2D's many-pyramids scene (see many_pyramids_layout)."""
    return build_scene(many_pyramids_layout(grid, base)[0], **scene_kwargs)


def pile(n_bodies: int, seed: int = 0, **scene_kwargs) -> Scene:
    """A poured pile of `n_bodies` circles and boxes in a container (see pile_layout)."""
    return build_scene(pile_layout(n_bodies, seed), **scene_kwargs)


def joint_grid(
    rows: int = 100, columns: int = 100, spacing: float = 1.0, radius: float = 0.4, **scene_kwargs
) -> Scene:
    """rows x columns circles, each joined by a revolute joint to its left and upper
    neighbours; the top row is pinned (static). 100 x 100: 10,000 bodies, 19,701 joints.

    Body index = row * columns + column, row 0 at the top.
    """
    scene = Scene(**scene_kwargs)
    for row in range(rows):
        for column in range(columns):
            scene.add_circle(
                (column * spacing, -row * spacing),
                radius,
                mass=0.0 if row == 0 else 1.0,
                static_friction=FRICTION,
                dynamic_friction=FRICTION,
            )
    for row in range(rows):
        for column in range(columns):
            body = row * columns + column
            if column > 0 and row > 0:  # the pinned row needs no joints among itself
                scene.add_revolute_joint(body - 1, body, anchor=(0.5 * spacing, 0.0))
            if row > 0:
                scene.add_revolute_joint(body - columns, body, anchor=(0.0, -0.5 * spacing))
    return scene


#: batched_small's world, body by body: a ground, a stack of 3 boxes, 3 circles (thrown at
#: the stack: small_world_velocities) and a rod, hinged to the ground (SMALL_WORLD_HINGE).
SMALL_WORLD = (
    [BodySpec("box", (0.0, -0.5), (12.0, 1.0), mass=0.0)]
    + [BodySpec("box", (1.5, 0.25 + 0.5 * level), (0.5, 0.5)) for level in range(3)]
    + [BodySpec("circle", (-3.0 + 0.8 * i, 0.5 + 0.6 * i), (0.25, 0.25)) for i in range(3)]
    + [BodySpec("box", (4.0, 2.0), (1.0, 0.1))]
)
#: The thrown circles' bodies in SMALL_WORLD (all of its circles), and their elasticity
#: (the boxes': Scene's default, 0.1).
SMALL_WORLD_CIRCLES = (4, 5, 6)
SMALL_WORLD_CIRCLE_ELASTICITY = 0.3
#: (parent, child, anchor in the parent's frame m): the rod's hinge, at its left end.
SMALL_WORLD_HINGE = (0, 7, (3.5, 2.5))


def small_world_velocities(n_worlds: int, seed: int = 0) -> np.ndarray:
    """(n_worlds, 3, 2) the thrown circles' velocities, m/s, world by world: x uniform in
    [1, 6], y in [0, 4] (a parameter sweep's worth of worlds)."""
    rng = np.random.default_rng(seed)
    velocities = np.empty((n_worlds, len(SMALL_WORLD_CIRCLES), 2), np.float64)
    velocities[..., 0] = rng.uniform(1.0, 6.0, size=(n_worlds, len(SMALL_WORLD_CIRCLES)))
    velocities[..., 1] = rng.uniform(0.0, 4.0, size=(n_worlds, len(SMALL_WORLD_CIRCLES)))
    return velocities


def batched_small(n_worlds: int, seed: int = 0, **scene_kwargs) -> Scene:
    """`n_worlds` copies of SMALL_WORLD (8 bodies, a hinge), each world's circles thrown at
    its own speeds (small_world_velocities)."""
    scene = Scene(n_worlds=n_worlds, **scene_kwargs)
    for spec in SMALL_WORLD:
        body = dict(
            mass=spec.mass,
            angle=spec.angle,
            static_friction=spec.friction,
            dynamic_friction=spec.friction,
        )
        if spec.kind == "circle":  # (every circle is a thrown one)
            scene.add_circle(
                spec.position, spec.size[0], elasticity=SMALL_WORLD_CIRCLE_ELASTICITY, **body
            )
        else:
            scene.add_box(spec.position, spec.size, **body)
    parent, child, anchor = SMALL_WORLD_HINGE
    scene.add_revolute_joint(parent, child, anchor=anchor)
    state = scene.get_state()
    state.velocity[:, list(SMALL_WORLD_CIRCLES)] = small_world_velocities(n_worlds, seed)
    scene.set_state(state)
    return scene


def cart_poles(n_worlds: int, **scene_kwargs) -> Scene:
    """`n_worlds` cart-poles whose bodies never touch, sleep off (a task of the learning
    agents' kind): a track colliding with nothing (mask_bits 0), a 1 kg cart on it along a
    prismatic joint (travel +-1 m, a velocity motor driving it at 0.5 m/s), a 1 m pole of
    0.1 kg hinged at the cart's centre, leaning -0.2 to 0.2 rad from world to world. It steps
    without contacts (StepOptions.contactless_step)."""
    scene = Scene(n_worlds=n_worlds, **{"enable_sleep": False, **scene_kwargs})
    track = scene.add_box((0.0, -0.3), (5.0, 0.05), mass=0, mask_bits=0)
    cart = scene.add_box((0.0, 0.0), (0.5, 0.3), mass=1.0)
    pole = scene.add_box((0.0, 0.5), (0.06, 1.0), mass=0.1)
    scene.add_prismatic_joint(
        track,
        cart,
        position_min=-1.0,
        position_max=1.0,
        control_mode="velocity",
        target=0.5,
        pid=(2.0, 0.0, 0.0),
    )
    scene.add_revolute_joint(cart, pole)
    state = scene.get_state()
    state.angle[:, pole] = np.linspace(-0.2, 0.2, n_worlds)
    scene.set_state(state)
    return scene


def random_pile(
    n_bodies: int,
    *,
    n_worlds: int = 1,
    density: float = 0.9,
    seed: int = 0,
    arch: str = "auto",
    substeps: int = 11,
    **scene_kwargs,
) -> Scene:
    """`n_bodies` mixed circles, boxes and triangles scattered densely in a static container.

    Sizes 0.2-0.6 m; `density` is the fraction of the pile's area the shapes would fill, so
    many of them overlap (a stress case for collision detection). Bodies 0-2 are the
    container's floor and walls.
    """
    rng = np.random.default_rng(seed)
    scene = Scene(n_worlds=n_worlds, arch=arch, substeps=substeps, **scene_kwargs)
    mean_area = 0.16
    width = max(4.0, np.sqrt(n_bodies * mean_area / density) * 1.5)
    height = n_bodies * mean_area / density / width
    scene.add_box((0.0, -0.5), (width + 2.0, 1.0), mass=0, name="ground")
    for side in (-1, 1):
        scene.add_box((side * (width / 2 + 0.5), height / 2), (1.0, height + 2.0), mass=0)
    for i in range(n_bodies):
        position = (rng.uniform(-width / 2, width / 2), rng.uniform(0.0, height))
        angle = rng.uniform(-np.pi, np.pi)
        kind = i % 3
        if kind == 0:
            scene.add_circle(position, rng.uniform(0.1, 0.3), angle=angle)
        elif kind == 1:
            scene.add_box(position, rng.uniform(0.2, 0.6, size=2), angle=angle)
        else:
            s = rng.uniform(0.25, 0.6)
            scene.add_polygon(position, [[0, 0], [s, 0], [0.5 * s, 0.8 * s]], angle=angle)
    return scene
