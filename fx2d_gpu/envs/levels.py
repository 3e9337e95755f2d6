"""fx2d/Levels-v0: a car drives to a goal through a procedurally generated level per world.

Every world of the scene holds its own level, as Jax2D's and Kinetix's environments do: the
model is built once with room for the largest level (MAX_TERRAIN static boxes, MAX_BOXES
loose boxes, MAX_CIRCLES loose circles, MAX_POLYGONS loose polygons of POLYGON_VERTICES
vertices, and the car), and each level resizes, places and masses those bodies in its world
(`Scene.set_shape_params`, `set_body_params`) and disables the ones it does not use
(`Scene.set_enabled`). A reset draws a new level for every world being reset, from each
world's own random stream, all at once in NumPy, and writes them all with a fixed number of
scene calls, whatever the number of worlds (see LevelsVectorEnv).

A generated level, along x in [-COURSE_HALF_WIDTH, COURSE_HALF_WIDTH] m:

- ground: 2 to MAX_GROUND static boxes side by side, each GROUND_DEPTH deep, their tops
  stepping up or down by up to MAX_STEP between neighbours, with gaps of up to MAX_GAP;
- platforms: 0 to MAX_PLATFORMS thin static boxes, 1 m to 3 m wide, each over its own
  stretch of the course, tilted by up to MAX_PLATFORM_TILT, floating 1.3 m to 2 m above
  the highest ground (over everything else: nothing starts under a platform's lowest
  point);
- loose bodies: 0 to MAX_BOXES boxes, 0 to MAX_CIRCLES circles and 0 to MAX_POLYGONS convex
  polygons (dynamic, DENSITY kg/m^2, random sizes and angles), each alone in a CELL_WIDTH
  wide cell of the course and resting just above the ground below it;
- the car: a chassis box and two wheels on revolute joints with velocity motors, starting
  on the ground near x = 0, its cells left free of loose bodies;
- the goal: a point 4 m to 9 m to the left or right of the car's start, at the car's
  height above the ground there.

No generated level starts with bodies overlapping: every loose body's bounding circle lies
inside its own cell, above the ground under that cell, and below the platforms; the car's
cells hold no loose body.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import taichi as ti
from gymnasium import spaces

from .base import AutoresetMode, Fx2DEnv, Fx2DVectorEnv, WorldStreams, cast_lidar
from .device_step import DeviceStep, DeviceTask, clipped

__all__ = ["Level", "LevelsEnv", "LevelsVectorEnv", "generate_levels"]

#: m: the course spans x in [-COURSE_HALF_WIDTH, COURSE_HALF_WIDTH].
COURSE_HALF_WIDTH = 12.0
#: The most static boxes a level holds (ground pieces and platforms together).
MAX_GROUND, MAX_PLATFORMS = 4, 2
MAX_TERRAIN = MAX_GROUND + MAX_PLATFORMS
#: The most loose (dynamic) bodies of each kind a level holds.
MAX_BOXES, MAX_CIRCLES, MAX_POLYGONS = 3, 3, 3
#: The vertex count of every loose polygon (the scene keeps a body's vertex count).
POLYGON_VERTICES = 5
#: m: a ground piece's depth, the largest step between neighbouring pieces' tops, the
#: widest gap between them (narrower than the car's wheelbase).
GROUND_DEPTH, MAX_STEP, MAX_GAP = 1.0, 0.15, 0.3
#: A platform's thickness (m) and largest tilt (rad).
PLATFORM_THICKNESS, MAX_PLATFORM_TILT = 0.2, 0.25
#: m: the width of a loose body's cell, and the largest bounding radius of a loose body
#: (below half a cell: bodies in different cells cannot touch).
CELL_WIDTH, MAX_BODY_RADIUS = 1.0, 0.45
#: kg/m^2: the loose bodies' mass per area.
DENSITY = 4.0
#: m: the chassis (width, height), the wheels' radius, and the wheels' axles in the
#: chassis frame (x = +-WHEEL_X, y = WHEEL_Y).
CHASSIS_SIZE, WHEEL_RADIUS, WHEEL_X, WHEEL_Y = (1.0, 0.25), 0.2, 0.35, -0.15
#: m: the chassis centre's height above flat ground with the car on its wheels.
RIDE_HEIGHT = WHEEL_RADIUS - WHEEL_Y
#: m: half the car's width (the wheels' outer edge).
CAR_HALF_WIDTH = WHEEL_X + WHEEL_RADIUS
#: m: bodies start this far above the ground below them (none touches at the start).
CLEARANCE = 0.02
#: Where unused bodies wait (disabled, out of the picture), m.
PARKING = (-100.0, -100.0)

#: The uniform draws one generated level takes from its world's stream.
LEVEL_DRAWS = (
    5  # counts: ground pieces, platforms, boxes, circles, polygons
    + MAX_GROUND * 2
    + (MAX_GROUND - 1)  # ground: widths, steps, gaps
    + MAX_PLATFORMS * 4  # platforms: x, width, height, tilt
    + 3  # the car's start, the goal's distance and side
    + int(2 * COURSE_HALF_WIDTH / CELL_WIDTH)  # the cells' order
    + MAX_BOXES * 3  # boxes: width, height, angle
    + MAX_CIRCLES  # circles: radius
    + MAX_POLYGONS * (3 + POLYGON_VERTICES)  # polygons: two scales, angle, corners
)


def _as_rows(value, name: str, columns: tuple[int, ...], maximum: int) -> np.ndarray:
    """`value` as a float64 array (k, *columns) with k <= maximum, or TypeError/ValueError
    naming `name`."""
    try:
        array = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise TypeError(f"Level.{name} must be an array of real numbers") from None
    if array.size == 0:
        array = array.reshape(0, *columns)
    if array.ndim != 1 + len(columns) or array.shape[1:] != columns:
        raise ValueError(
            f"Level.{name} must have shape (k, {', '.join(map(str, columns))}), got {array.shape}"
        )
    if len(array) > maximum:
        raise ValueError(f"Level.{name}: a level holds at most {maximum}, got {len(array)}")
    if not np.isfinite(array).all():
        raise ValueError(f"Level.{name} must be finite")
    if np.abs(array).max(initial=0.0) > 1e4:
        raise ValueError(f"Level.{name}: values must lie within +-1e4 m")
    return array


@dataclass(eq=False)
class Level:
    """One level: what a world of LevelsVectorEnv holds, as given by hand or read back
    (LevelsVectorEnv.current_levels).

    Every length is in m and every angle in rad; positions are centres (a polygon's is its
    centroid), in the world frame. The counts may be anything up to the maxima; the bodies a
    level leaves out are disabled in its world.

    Attributes:
        terrain: (t, 5), t <= MAX_TERRAIN: static boxes (x, y, width, height, angle).
        boxes: (b, 5), b <= MAX_BOXES: loose boxes (x, y, width, height, angle).
        circles: (c, 3), c <= MAX_CIRCLES: loose circles (x, y, radius).
        polygons: (p, 3), p <= MAX_POLYGONS: loose polygons' poses (x, y, angle).
        polygon_vertices: (p, POLYGON_VERTICES, 2): their outlines in the body frame,
            convex, counter-clockwise, centred on their centroid (as set_shape_params keeps
            them).
        start: (2,) the chassis centre at the start (the wheels hang below it at
            (+-WHEEL_X, WHEEL_Y)).
        goal: (2,) the point the car must reach.

    Raises:
        TypeError: a field that is not real numbers.
        ValueError: a field of the wrong shape, with more bodies than the maximum, not
            finite or beyond +-1e4 m, or a size or radius below 1e-3 m, naming the field
            (whether the bodies overlap is the caller's to ensure).
    """

    terrain: np.ndarray
    boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 5)))
    circles: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    polygons: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    polygon_vertices: np.ndarray = field(default_factory=lambda: np.zeros((0, POLYGON_VERTICES, 2)))
    start: np.ndarray = field(default_factory=lambda: np.array([0.0, RIDE_HEIGHT]))
    goal: np.ndarray = field(default_factory=lambda: np.array([5.0, RIDE_HEIGHT]))

    def __post_init__(self):
        self.terrain = _as_rows(self.terrain, "terrain", (5,), MAX_TERRAIN)
        self.boxes = _as_rows(self.boxes, "boxes", (5,), MAX_BOXES)
        self.circles = _as_rows(self.circles, "circles", (3,), MAX_CIRCLES)
        self.polygons = _as_rows(self.polygons, "polygons", (3,), MAX_POLYGONS)
        self.polygon_vertices = _as_rows(
            self.polygon_vertices, "polygon_vertices", (POLYGON_VERTICES, 2), MAX_POLYGONS
        )
        if len(self.polygon_vertices) != len(self.polygons):
            raise ValueError(
                f"Level.polygon_vertices: one outline per polygon, got "
                f"{len(self.polygon_vertices)} outlines for {len(self.polygons)} polygons"
            )
        for name, sizes in (
            ("terrain", self.terrain[:, 2:4]),
            ("boxes", self.boxes[:, 2:4]),
            ("circles", self.circles[:, 2]),
        ):
            if (sizes < 1e-3).any():
                raise ValueError(f"Level.{name}: sizes and radii must be >= 1e-3 m")
        for name in ("start", "goal"):
            point = _as_rows(np.reshape(getattr(self, name), (1, -1)), name, (2,), 1)
            setattr(self, name, point[0])

    def same_as(self, other: "Level") -> bool:
        """Whether `other` holds the same values bit for bit."""
        return all(
            np.array_equal(getattr(self, name), getattr(other, name))
            for name in (
                "terrain",
                "boxes",
                "circles",
                "polygons",
                "polygon_vertices",
                "start",
                "goal",
            )
        )


@dataclass
class LevelBatch:
    """k levels padded to the maxima, world first: Level's fields with a leading k and
    every slot present, and which slots each level uses.

    Attributes:
        terrain: (k, MAX_TERRAIN, 5); boxes: (k, MAX_BOXES, 5); circles: (k, MAX_CIRCLES,
            3); polygons: (k, MAX_POLYGONS, 3); polygon_vertices: (k, MAX_POLYGONS,
            POLYGON_VERTICES, 2); start, goal: (k, 2). Values in unused slots are ignored.
        terrain_used, boxes_used, circles_used, polygons_used: (k, slots) bool.
    """

    terrain: np.ndarray
    terrain_used: np.ndarray
    boxes: np.ndarray
    boxes_used: np.ndarray
    circles: np.ndarray
    circles_used: np.ndarray
    polygons: np.ndarray
    polygon_vertices: np.ndarray
    polygons_used: np.ndarray
    start: np.ndarray
    goal: np.ndarray

    def take(self, rows: np.ndarray) -> "LevelBatch":
        """The levels at `rows` ((m,) indices), as a new batch."""
        return LevelBatch(**{name: value[rows] for name, value in vars(self).items()})

    @classmethod
    def stack(cls, levels: Sequence[Level]) -> "LevelBatch":
        """Given levels, padded: a level's unused slots hold valid stand-ins (unit boxes,
        the built bodies' sizes), never drawn or simulated (their bodies are disabled)."""
        k = len(levels)
        corner = 2.0 * math.pi * np.arange(POLYGON_VERTICES) / POLYGON_VERTICES
        stand_ins = {
            "terrain": np.array([0.0, 0.0, 1.0, 1.0, 0.0]),
            "boxes": np.array([0.0, 0.0, 0.3, 0.3, 0.0]),
            "circles": np.array([0.0, 0.0, 0.15]),
            "polygons": np.zeros(3),
            "polygon_vertices": 0.2 * np.stack([np.cos(corner), np.sin(corner)], axis=1),
        }

        def padded(name, slots, columns):
            values = np.broadcast_to(stand_ins[name], (k, slots, *columns)).copy()
            used = np.zeros((k, slots), bool)
            for i, level in enumerate(levels):  # given levels: a few, stacked once
                rows = getattr(level, name)
                values[i, : len(rows)] = rows
                used[i, : len(rows)] = True
            return values, used

        terrain, terrain_used = padded("terrain", MAX_TERRAIN, (5,))
        boxes, boxes_used = padded("boxes", MAX_BOXES, (5,))
        circles, circles_used = padded("circles", MAX_CIRCLES, (3,))
        polygons, polygons_used = padded("polygons", MAX_POLYGONS, (3,))
        vertices, _ = padded("polygon_vertices", MAX_POLYGONS, (POLYGON_VERTICES, 2))
        return cls(
            terrain,
            terrain_used,
            boxes,
            boxes_used,
            circles,
            circles_used,
            polygons,
            vertices,
            polygons_used,
            np.array([level.start for level in levels]).reshape(k, 2),
            np.array([level.goal for level in levels]).reshape(k, 2),
        )

    def level(self, i: int) -> Level:
        """Level i of the batch, its used slots only (in slot order)."""
        return Level(
            terrain=self.terrain[i, self.terrain_used[i]],
            boxes=self.boxes[i, self.boxes_used[i]],
            circles=self.circles[i, self.circles_used[i]],
            polygons=self.polygons[i, self.polygons_used[i]],
            polygon_vertices=self.polygon_vertices[i, self.polygons_used[i]],
            start=self.start[i].copy(),
            goal=self.goal[i].copy(),
        )


class _Columns:
    """Hands out consecutive columns of a (k, n) array of uniform draws."""

    def __init__(self, draws: np.ndarray):
        self.draws, self.used = draws, 0

    def take(self, n: int) -> np.ndarray:
        """(k, n): the next n columns."""
        columns = self.draws[:, self.used : self.used + n]
        self.used += n
        return columns


def _polygon_area_centroid(vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(area (...,) m^2, centroid (..., 2) m) of counter-clockwise polygons (..., m, 2)."""
    x, y = vertices[..., 0], vertices[..., 1]
    xn, yn = np.roll(x, -1, axis=-1), np.roll(y, -1, axis=-1)
    cross = x * yn - xn * y
    area = 0.5 * cross.sum(-1)
    cx = ((x + xn) * cross).sum(-1) / (6.0 * area)
    cy = ((y + yn) * cross).sum(-1) / (6.0 * area)
    return area, np.stack([cx, cy], axis=-1)


def _support(lefts, rights, tops, used, low, high):
    """(k, q) m: the highest ground top under each interval [low, high] ((k, q) m), over
    the ground pieces [lefts, rights] ((k, g) m) that are used, widened by MAX_GAP plus a
    margin so that an interval over a gap sees both sides (a body is never placed lower)."""
    pad = MAX_GAP + 0.05
    over = (
        used[:, None, :]
        & (lefts[:, None, :] < high[..., None] + pad)
        & (rights[:, None, :] > low[..., None] - pad)
    )
    return np.where(over, tops[:, None, :], -np.inf).max(axis=-1)


def _terrain(u: _Columns, k: int, n_ground: np.ndarray, n_platforms: np.ndarray):
    """The terrain of k levels (generate_levels' next draws): ground pieces from x = -half
    to x = half with gaps between them and stepping tops, then platforms above them.
    Returns (terrain (k, MAX_TERRAIN, 5): x, y, width, height m and angle rad; terrain_used
    (k, MAX_TERRAIN) bool; support(low, high): the highest ground top under intervals)."""
    half = COURSE_HALF_WIDTH
    # Ground: pieces from x = -half to x = half, gaps between them, tops stepping.
    slot = np.arange(MAX_GROUND)
    ground_used = slot[None, :] < n_ground[:, None]
    weights = np.where(ground_used, 0.5 + u.take(MAX_GROUND), 0.0)
    steps = MAX_STEP * (2.0 * u.take(MAX_GROUND) - 1.0)
    steps[:, 0] = 0.0
    gaps = MAX_GAP * u.take(MAX_GROUND - 1)
    gaps = np.where(slot[None, 1:] < n_ground[:, None], gaps, 0.0)  # only between pieces
    widths = (2.0 * half - gaps.sum(1))[:, None] * weights / weights.sum(1, keepdims=True)
    lefts = -half + np.concatenate(
        [np.zeros((k, 1)), np.cumsum(widths[:, :-1] + gaps, axis=1)], axis=1
    )
    rights = lefts + widths
    tops = np.cumsum(steps, axis=1)
    highest = np.where(ground_used, tops, -np.inf).max(axis=1)

    terrain = np.zeros((k, MAX_TERRAIN, 5))
    terrain[:, :MAX_GROUND, 0] = (lefts + rights) / 2
    terrain[:, :MAX_GROUND, 1] = tops - GROUND_DEPTH / 2
    terrain[:, :MAX_GROUND, 2] = np.where(ground_used, widths, 1.0)
    terrain[:, :MAX_GROUND, 3] = GROUND_DEPTH

    # Platforms: their lowest point 1.3 m to 2 m above the highest ground.
    platform = u.take(MAX_PLATFORMS * 4).reshape(k, MAX_PLATFORMS, 4)
    p_width = 1.0 + 2.0 * platform[..., 1]
    p_tilt = MAX_PLATFORM_TILT * (2.0 * platform[..., 3] - 1.0)
    lowest = highest[:, None] + 1.3 + 0.7 * platform[..., 2]
    # Each platform over its own stretch of the course (platforms never overlap), 1.6 m
    # (more than half the widest one) from the stretch's ends.
    stretch = (2.0 * half - 4.0) / MAX_PLATFORMS
    stretch_left = -half + 2.0 + stretch * np.arange(MAX_PLATFORMS)
    terrain[:, MAX_GROUND:, 0] = stretch_left + 1.6 + (stretch - 3.2) * platform[..., 0]
    terrain[:, MAX_GROUND:, 1] = (
        lowest + np.abs(np.sin(p_tilt)) * p_width / 2 + np.cos(p_tilt) * PLATFORM_THICKNESS / 2
    )
    terrain[:, MAX_GROUND:, 2] = p_width
    terrain[:, MAX_GROUND:, 3] = PLATFORM_THICKNESS
    terrain[:, MAX_GROUND:, 4] = p_tilt
    terrain_used = np.concatenate(
        [ground_used, np.arange(MAX_PLATFORMS)[None, :] < n_platforms[:, None]], axis=1
    )

    def support(low, high):
        return _support(lefts, rights, tops, ground_used, low, high)

    return terrain, terrain_used, support


def _loose_bodies(u: _Columns, cell_x: np.ndarray, support):
    """The loose bodies of k levels (generate_levels' next draws): sizes, then each resting in
    its cell (cell_x (k, bodies) m) just above the ground (support). Returns (boxes (k,
    MAX_BOXES, 5), circles (k, MAX_CIRCLES, 3), polygons (k, MAX_POLYGONS, 3), polygon
    vertices (k, MAX_POLYGONS, POLYGON_VERTICES, 2) m)."""
    k = len(cell_x)
    # Loose bodies: sizes, then each rests in its cell just above the ground.
    box = u.take(MAX_BOXES * 3).reshape(k, MAX_BOXES, 3)
    box_size = 0.15 + 0.35 * box[..., :2]
    box_radius = np.hypot(box_size[..., 0], box_size[..., 1]) / 2
    circle_radius = 0.08 + 0.22 * u.take(MAX_CIRCLES)
    poly = u.take(MAX_POLYGONS * (3 + POLYGON_VERTICES)).reshape(
        k, MAX_POLYGONS, 3 + POLYGON_VERTICES
    )
    sector = 2.0 * math.pi / POLYGON_VERTICES
    # Points on an ellipse, in angle order: always a convex polygon (an affine image of a
    # polygon inscribed in a circle); corners at least 0.4 sector apart.
    corner = sector * (np.arange(POLYGON_VERTICES) + 0.6 * (poly[..., 3:] - 0.5))
    scale = 0.12 + 0.18 * poly[..., :2]
    vertices = np.stack(
        [scale[..., :1] * np.cos(corner), scale[..., 1:2] * np.sin(corner)], axis=-1
    )
    area, centroid = _polygon_area_centroid(vertices)
    vertices = vertices - centroid[..., None, :]
    poly_radius = np.linalg.norm(vertices, axis=-1).max(-1)
    assert (poly_radius <= MAX_BODY_RADIUS).all()  # 0.3 + a centroid inside the ellipse
    assert (box_radius <= MAX_BODY_RADIUS).all() and (circle_radius <= MAX_BODY_RADIUS).all()

    radius = np.concatenate([box_radius, circle_radius, poly_radius], axis=1)
    y = support(cell_x - radius, cell_x + radius) + radius + CLEARANCE
    b, c = MAX_BOXES, MAX_BOXES + MAX_CIRCLES
    boxes = np.stack(
        [cell_x[:, :b], y[:, :b], *np.moveaxis(box_size, -1, 0), math.pi * (2 * box[..., 2] - 1)],
        axis=-1,
    )
    circles = np.stack([cell_x[:, b:c], y[:, b:c], circle_radius], axis=-1)
    polygons = np.stack([cell_x[:, c:], y[:, c:], math.pi * (2 * poly[..., 2] - 1)], axis=-1)

    return boxes, circles, polygons, vertices


def generate_levels(draws: np.ndarray) -> LevelBatch:
    """k random levels from k rows of uniform draws, computed together (no loop over levels).

    Args:
        draws: (k, LEVEL_DRAWS) float64 in [0, 1), one row per level (a world's stream).

    Returns:
        The levels, padded to the maxima (see the module docstring for what they hold).
    """
    draws = np.asarray(draws, np.float64)
    if draws.ndim != 2 or draws.shape[1] != LEVEL_DRAWS:
        raise ValueError(f"draws must have shape (k, {LEVEL_DRAWS}), got {draws.shape}")
    k = len(draws)
    u = _Columns(draws)
    half = COURSE_HALF_WIDTH
    counts = u.take(5)
    n_ground = 2 + np.floor(counts[:, 0] * (MAX_GROUND - 1)).astype(np.int64)
    n_platforms = np.floor(counts[:, 1] * (MAX_PLATFORMS + 1)).astype(np.int64)
    n_boxes = np.floor(counts[:, 2] * (MAX_BOXES + 1)).astype(np.int64)
    n_circles = np.floor(counts[:, 3] * (MAX_CIRCLES + 1)).astype(np.int64)
    n_polygons = np.floor(counts[:, 4] * (MAX_POLYGONS + 1)).astype(np.int64)

    terrain, terrain_used, support = _terrain(u, k, n_ground, n_platforms)

    # The car's start, then the cells' order: the loose bodies take the first cells of a
    # random permutation, the cells under the car coming last (never taken: there are
    # enough others).
    car = u.take(3)
    start_x = -2.0 + 4.0 * car[:, 0]
    n_cells = int(2 * half / CELL_WIDTH)
    centres = -half + CELL_WIDTH * (np.arange(n_cells) + 0.5)
    under_car = np.abs(centres[None, :] - start_x[:, None]) < CELL_WIDTH / 2 + CAR_HALF_WIDTH
    cells = np.argsort(np.where(under_car, 2.0, u.take(n_cells)), axis=1, kind="stable")
    cell_x = centres[cells[:, : MAX_BOXES + MAX_CIRCLES + MAX_POLYGONS]]

    boxes, circles, polygons, vertices = _loose_bodies(u, cell_x, support)

    # The car on the ground, the goal 4 m to 9 m to one side.
    start = np.stack(
        [
            start_x,
            support(start_x[:, None] - CAR_HALF_WIDTH, start_x[:, None] + CAR_HALF_WIDTH)[:, 0]
            + RIDE_HEIGHT
            + CLEARANCE,
        ],
        axis=1,
    )
    goal_x = start_x + np.where(car[:, 2] < 0.5, -1.0, 1.0) * (4.0 + 5.0 * car[:, 1])
    goal = np.stack(
        [goal_x, support(goal_x[:, None] - 0.3, goal_x[:, None] + 0.3)[:, 0] + RIDE_HEIGHT], axis=1
    )
    assert u.used == LEVEL_DRAWS
    return LevelBatch(
        terrain=terrain,
        terrain_used=terrain_used,
        boxes=boxes,
        boxes_used=np.arange(MAX_BOXES)[None, :] < n_boxes[:, None],
        circles=circles,
        circles_used=np.arange(MAX_CIRCLES)[None, :] < n_circles[:, None],
        polygons=polygons,
        polygon_vertices=vertices,
        polygons_used=np.arange(MAX_POLYGONS)[None, :] < n_polygons[:, None],
        start=start,
        goal=goal,
    )


class _LevelStreams(WorldStreams):
    """WorldStreams that also keep, per world, which given level its next episode plays:
    seeding a world with s points it at level s (modulo the number of levels)."""

    def __init__(self, n_worlds: int):
        super().__init__(n_worlds)
        self.next_level = np.arange(n_worlds, dtype=np.uint64)

    def seed(self, worlds: np.ndarray, seeds: np.ndarray) -> None:
        super().seed(worlds, seeds)
        self.next_level[worlds] = np.asarray(seeds, np.uint64)


class LevelsVectorEnv(Fx2DVectorEnv):
    """Cars in procedurally generated levels, one level per world of one scene:
    `gymnasium.make_vec("fx2d/Levels-v0", ...)`.

    A level (module docstring, Level) holds at most MAX_TERRAIN = 6 static boxes (MAX_GROUND
    = 4 ground pieces and MAX_PLATFORMS = 2 platforms when generated), MAX_BOXES = 3 loose
    boxes, MAX_CIRCLES = 3 loose circles and MAX_POLYGONS = 3 loose polygons of
    POLYGON_VERTICES = 5 vertices, plus the car (a chassis and two wheels): 18 bodies and 2
    joints in every world. A level that holds fewer disables the rest in its world.

    At each reset of a world it gets a new level: generated from its stream (generate_levels;
    a world of a vector env seeded s draws the level the one-world env seeded s + w draws),
    or, with `levels` given, the next of them: a world seeded s plays levels[s % L] first,
    then levels[(s + 1) % L] and so on (so reset(seed=0) gives world w level w; unseeded,
    world w starts at level w). The reset worlds' levels are written together in a fixed
    number of scene calls, however many worlds reset: four set_shape_params (the terrain's
    sizes and placements, the boxes' sizes, the circles' radii, the polygons' vertices: the
    scene takes one keyword set per call, and places static bodies only), one
    set_body_params (the loose bodies' masses, DENSITY times their areas), one set_enabled
    (each world's used optional bodies on, the others off: a table of flags) and one
    reset_worlds with their starting state: 7 calls. Each writes the reset worlds' rows on
    the device and leaves the others' as they are (the host's caches, WorldShapes' and
    WorldParams', redo those worlds alone: store_log); the first five's device writes wait
    for set_enabled's and are made with them, one upload and one wake (access/edits.py's
    UnwrittenEdits): 5 launches a restart.

    Observation (float32, (9 + n_rays,)):

    | index | value |
    |---|---|
    | 0, 1 | the goal relative to the chassis, x / 10 m, y / 10 m (world frame) |
    | 2, 3 | the chassis' cos and sin of its angle |
    | 4, 5 | the chassis' velocity, vx / 5 m/s, vy / 5 m/s |
    | 6 | its angular velocity / 5 rad/s |
    | 7, 8 | the left and right wheels' speeds relative to the chassis / max_wheel_speed |
    | 9.. | lidar: distance / lidar_range of n_rays rays (1.0: nothing in range) |

    The lidar's rays fan in the chassis frame from 30 degrees below its front, over its
    top, to 30 degrees below its back.

    Action: Box(-1, 1, (2,)), the left and right wheel motors' target speeds as fractions of
    max_wheel_speed (rad/s, positive turns a wheel counter-clockwise: the car rolls left).

    Reward: the progress towards the goal at each step (the decrease of the chassis'
    distance to it, m), plus goal_bonus (10) on reaching it (within goal_radius, 0.6 m:
    terminated), fall_penalty (-10) on falling off the level (the chassis 1 m below the
    lowest terrain box's bottom: terminated). Truncated after max_episode_steps (500, 10 s).
    A world that reaches its goal gets about its start distance (4 m to 9 m) + 10.

    Domain randomisation (randomize=True or a dict): "friction" (the car's and the loose
    bodies', default (0.5, 1.0)) and "gravity" (magnitude, m/s^2, default (8.0, 12.0)). The
    loose bodies' masses follow their sizes.

    Args:
        num_envs: the number of worlds, >= 1.
        levels (Sequence[Level] | None): None: generated levels; else the levels to play,
            at least one.
        autoreset_mode (AutoresetMode | str): see Fx2DVectorEnv.
        max_episode_steps (int | None): see Fx2DVectorEnv.
        randomize (bool | dict): see Fx2DVectorEnv.
        render_mode (str | None): see Fx2DVectorEnv.
        render_size (tuple[int, int]): see Fx2DVectorEnv.
        render_tiles (int): see Fx2DVectorEnv.
        arch (str): see Fx2DVectorEnv.
        substeps (int): see Fx2DVectorEnv.
        shards (int | None): see Fx2DVectorEnv (worlds over Ray actors: each shard's worlds
            take their levels through ShardedScene.set_shape_params).
        shard_options (dict | None): see Fx2DVectorEnv.
        device_step (bool): True: each world's wheel targets and observation (its lidar
            included) worked out on the device (envs/device_step.py) where the env can (a
            Scene in this process, no randomisation, the CPU or CUDA backend; a new level
            is written by the host either way); False: in NumPy and the scene's queries on
            the host. The same numbers either way.

    Attributes:
        levels (list[Level] | None): the given levels.
        terrain, boxes, circles, polygons (np.ndarray): the slots' body indices.
        chassis, left_wheel, right_wheel (int): the car's bodies.
        wheel_joints (tuple[int, int]): the wheels' revolute joints (velocity motors).
    """

    dt = 1.0 / 50.0
    randomization_defaults = {"friction": (0.5, 1.0), "gravity": (8.0, 12.0)}
    n_state_draws = LEVEL_DRAWS
    render_bounds = (-COURSE_HALF_WIDTH - 0.5, -2.0, COURSE_HALF_WIDTH + 0.5, 4.5)

    #: rad/s: the wheels' top speed (an action of 1); N m: the motors' most torque; kg.
    max_wheel_speed, wheel_torque = 15.0, 4.0
    chassis_mass, wheel_mass = 2.0, 0.3
    #: m: reaching the goal; reward on reaching it and on falling off.
    goal_radius, goal_bonus, fall_penalty = 0.6, 10.0, -10.0
    #: lidar: rays and range (m).
    n_rays, lidar_range = 8, 5.0

    def __init__(
        self,
        num_envs: int = 1,
        *,
        levels: Sequence[Level] | None = None,
        autoreset_mode=AutoresetMode.NEXT_STEP,
        max_episode_steps: int | None = 500,
        randomize=False,
        render_mode: str | None = None,
        render_size=(800, 240),
        render_tiles: int = 4,
        arch: str = "auto",
        substeps: int = 8,
        shards: int | None = None,
        shard_options: dict | None = None,
        device_step: bool = True,
    ):
        if not isinstance(device_step, bool):
            raise TypeError(f"device_step must be a bool, got {type(device_step).__name__}")
        if levels is not None:
            if isinstance(levels, Level) or not isinstance(levels, Sequence):
                raise TypeError(
                    f"levels must be None or a sequence of Level, got {type(levels).__name__}"
                )
            if not levels:
                raise ValueError("levels must hold at least one Level")
            for i, level in enumerate(levels):
                if not isinstance(level, Level):
                    raise TypeError(f"levels[{i}] must be a Level, got {type(level).__name__}")
            self.levels = list(levels)
            self._given = LevelBatch.stack(self.levels)
        else:
            self.levels = None
            self._given = None
        super().__init__(
            num_envs,
            autoreset_mode=autoreset_mode,
            max_episode_steps=max_episode_steps,
            randomize=randomize,
            render_mode=render_mode,
            render_size=render_size,
            render_tiles=render_tiles,
            arch=arch,
            substeps=substeps,
            shards=shards,
            shard_options=shard_options,
        )
        n = self.num_envs
        self._streams = _LevelStreams(n)
        self._current = None  # LevelBatch of every world, set by the first reset
        self._previous_distance = np.zeros(n)
        self._fall_height = np.full(n, -np.inf)
        self._goal = np.zeros((n, 2))
        self._targets = np.zeros((n, 2))
        # From 30 degrees below the front to 30 degrees below the back, over the top: the
        # lowest rays see the ground ahead and behind (gaps, steps), the others what stands
        # or hangs in the way; none starts inside the ground under the car.
        fan = np.linspace(-math.pi / 6, 7 * math.pi / 6, self.n_rays)
        self._ray_directions = np.stack([np.cos(fan), np.sin(fan)], axis=1)
        # Rays start outside the car (else they would hit the chassis or a wheel).
        self._lidar_start = math.hypot(WHEEL_X, WHEEL_Y) + WHEEL_RADIUS + 0.05
        self._rays = None
        if device_step and DeviceStep.usable(self):
            self._device = DeviceStep(self, self._device_task())

    # ------------------------------------------------------------------ the scene
    def _build_scene(self):
        scene = self.scene
        ground = {"mass": 0, "static_friction": 1.0, "dynamic_friction": 1.0}
        loose = {"mass": 0.5, "static_friction": 0.6, "dynamic_friction": 0.5}
        # Every slot is built where it waits unused, each its own place (PARKING, spaced).
        park = np.array(PARKING)

        def parked(i):
            return park + (3.0 * i, 0.0)

        self.terrain = np.array(
            [scene.add_box(parked(i), (1.0, 1.0), **ground) for i in range(MAX_TERRAIN)]
        )
        slot = MAX_TERRAIN
        self.boxes = np.array(
            [scene.add_box(parked(slot + i), (0.3, 0.3), **loose) for i in range(MAX_BOXES)]
        )
        slot += MAX_BOXES
        self.circles = np.array(
            [scene.add_circle(parked(slot + i), 0.15, **loose) for i in range(MAX_CIRCLES)]
        )
        slot += MAX_CIRCLES
        corner = 2.0 * math.pi * np.arange(POLYGON_VERTICES) / POLYGON_VERTICES
        outline = 0.2 * np.stack([np.cos(corner), np.sin(corner)], axis=1)
        self.polygons = np.array(
            [scene.add_polygon(parked(slot + i), outline, **loose) for i in range(MAX_POLYGONS)]
        )
        car = {"collision_group": -1}  # the chassis and its wheels never collide
        self.chassis = scene.add_box(
            (0.0, RIDE_HEIGHT),
            CHASSIS_SIZE,
            mass=self.chassis_mass,
            static_friction=0.5,
            dynamic_friction=0.4,
            name="chassis",
            **car,
        )
        wheels, joints = [], []
        for side in (-1.0, 1.0):
            wheel = scene.add_circle(
                (side * WHEEL_X, RIDE_HEIGHT + WHEEL_Y),
                WHEEL_RADIUS,
                mass=self.wheel_mass,
                static_friction=1.0,
                dynamic_friction=0.9,
                **car,
            )
            joints.append(
                scene.add_revolute_joint(
                    self.chassis,
                    wheel,
                    anchor=(side * WHEEL_X, WHEEL_Y),
                    control_mode="velocity",
                    pid=(1.0, 0.0, 0.0),
                    max_effort=self.wheel_torque,
                )
            )
            wheels.append(wheel)
        self.left_wheel, self.right_wheel = wheels
        self.wheel_joints = tuple(joints)
        self._optional = np.concatenate([self.terrain, self.boxes, self.circles, self.polygons])

    def _make_spaces(self):
        low = np.array(
            [-3.0, -3.0, -1.0, -1.0, -10.0, -10.0, -10.0, -3.0, -3.0] + [0.0] * self.n_rays,
            np.float32,
        )
        high = np.array(
            [3.0, 3.0, 1.0, 1.0, 10.0, 10.0, 10.0, 3.0, 3.0] + [1.0] * self.n_rays, np.float32
        )
        return spaces.Box(low, high, dtype=np.float32), spaces.Box(-1.0, 1.0, (2,), np.float32)

    def mass_bodies(self):
        """The bodies whose nominal masses the base class reads: the car's (the loose
        bodies' masses follow their sizes; "mass_scale" is not offered)."""
        return [self.chassis, self.left_wheel, self.right_wheel]

    def friction_bodies(self):
        """The bodies "friction" randomises: the car and the loose bodies."""
        return [*self.mass_bodies(), *self.boxes, *self.circles, *self.polygons]

    # ------------------------------------------------------------------ levels
    def current_levels(self, worlds=None) -> list[Level]:
        """The levels the worlds play now (None: every world), as Level values.

        Raises:
            RuntimeError: before the first reset.
        """
        self._check_open()
        if self._current is None:
            raise RuntimeError("call reset() before current_levels()")
        indices = np.arange(self.num_envs) if worlds is None else np.atleast_1d(worlds)
        return [self._current.level(int(w)) for w in indices]

    def _place_worlds(self, worlds: np.ndarray, draws: np.ndarray) -> None:
        """Give `worlds` ((num_envs,) bool) new levels (drawn from `draws`, (k,
        LEVEL_DRAWS), or the next given ones) and start their episodes on them: the scene
        calls the class docstring counts."""
        indices = np.flatnonzero(worlds)
        if self._given is None:
            batch = generate_levels(draws)
        else:
            count = np.uint64(len(self.levels))
            rows = (self._streams.next_level[indices] % count).astype(np.int64)
            self._streams.next_level[indices] += np.uint64(1)
            batch = self._given.take(rows)
        self._write_levels(indices, batch)
        if self._current is None:  # every world is reset first: take the batch as it is
            self._current = batch
        else:
            for name, value in vars(batch).items():
                getattr(self._current, name)[indices] = value
        self._goal[indices] = batch.goal
        if self._device is not None:
            self._device.set_world_values(self._goal)  # (the observation's, on the device)
        used_terrain = np.where(
            batch.terrain_used, batch.terrain[..., 1] - batch.terrain[..., 3] / 2, np.inf
        )
        self._fall_height[indices] = used_terrain.min(axis=1) - 1.0

    def _write_levels(self, indices: np.ndarray, batch: LevelBatch) -> None:
        """Write `batch` (one level per world of `indices`) into the scene."""
        scene = self.scene
        k = len(indices)
        park = np.array(PARKING)
        terrain_park = park + np.stack([3.0 * np.arange(MAX_TERRAIN), np.zeros(MAX_TERRAIN)], 1)
        terrain = np.where(batch.terrain_used[..., None], batch.terrain, 0.0)
        terrain[..., :2] = np.where(batch.terrain_used[..., None], terrain[..., :2], terrain_park)
        terrain[..., 2:4] = np.where(batch.terrain_used[..., None], terrain[..., 2:4], 1.0)
        scene.set_shape_params(
            self.terrain,
            size=terrain[..., 2:4],
            position=terrain[..., :2],
            angle=terrain[..., 4],
            world=indices,
        )
        scene.set_shape_params(self.boxes, size=batch.boxes[..., 2:4], world=indices)
        scene.set_shape_params(self.circles, radius=batch.circles[..., 2], world=indices)
        scene.set_shape_params(self.polygons, vertices=batch.polygon_vertices, world=indices)
        areas = np.concatenate(
            [
                batch.boxes[..., 2] * batch.boxes[..., 3],
                math.pi * batch.circles[..., 2] ** 2,
                _polygon_area_centroid(batch.polygon_vertices)[0],
            ],
            axis=1,
        )
        loose = np.concatenate([self.boxes, self.circles, self.polygons])
        scene.set_body_params(loose, mass=DENSITY * areas, world=indices)

        used = np.concatenate(
            [batch.terrain_used, batch.boxes_used, batch.circles_used, batch.polygons_used], 1
        )
        scene.set_enabled(self._optional, used, world=indices)  # (one launch)

        state = self._rows(k)
        order = np.arange(k)[:, None]
        state.position[order, self.terrain] = terrain[..., :2]
        state.angle[order, self.terrain] = terrain[..., 4]
        slot = MAX_TERRAIN
        for bodies, values, used_slots, angle_column in (
            (self.boxes, batch.boxes, batch.boxes_used, 4),
            (self.circles, batch.circles, batch.circles_used, None),
            (self.polygons, batch.polygons, batch.polygons_used, 2),
        ):
            spots = 3.0 * (slot + np.arange(len(bodies)))
            parking = park + np.stack([spots, np.zeros(len(bodies))], 1)
            state.position[order, bodies] = np.where(
                used_slots[..., None], values[..., :2], parking
            )
            if angle_column is not None:
                state.angle[order, bodies] = np.where(used_slots, values[..., angle_column], 0.0)
            slot += len(bodies)
        state.position[:, self.chassis] = batch.start
        for wheel, side in ((self.left_wheel, -1.0), (self.right_wheel, 1.0)):
            state.position[:, wheel] = batch.start + (side * WHEEL_X, WHEEL_Y)
        scene.reset_worlds(indices, state)

    # ------------------------------------------------------------------ a step
    def _apply_actions(self, actions, active):
        # (_LevelsOnDevice.drive: the same arithmetic, a world a thread)
        self._targets[:] = self.max_wheel_speed * actions * active[:, None]
        for column, joint in enumerate(self.wheel_joints):
            self.scene.set_joint_target(joint, self._targets[:, column])

    def _observe(self):
        car = self.scene.get_state(bodies=[self.chassis, self.left_wheel, self.right_wheel])
        position, angle = car.position[:, 0], car.angle[:, 0]
        spin = car.angular_velocity
        origins, directions, reach, hit = self._lidar(position, angle)
        self._rays = (origins, origins + reach[..., None] * directions, hit)

        to_goal = self._note_chassis(position)
        observations = np.empty((self.num_envs, 9 + self.n_rays), np.float64)
        observations[:, 0:2] = to_goal / 10.0
        observations[:, 2:4] = np.stack([np.cos(angle), np.sin(angle)], axis=1)
        observations[:, 4:6] = car.velocity[:, 0] / 5.0
        observations[:, 6] = spin[:, 0] / 5.0
        observations[:, 7:9] = (spin[:, 1:] - spin[:, :1]) / self.max_wheel_speed
        observations[:, 9:] = reach / self.lidar_range
        space = self.single_observation_space
        return np.clip(observations, space.low, space.high).astype(np.float32)

    def _lidar(self, position, angle):
        """base.cast_lidar of every world's chassis at `position` ((n, 2) m) and `angle`
        ((n,) rad)."""
        return cast_lidar(
            self.scene, position, angle, self._ray_directions, self._lidar_start, self.lidar_range
        )

    def _note_chassis(self, position):
        """Keep what _score reads besides the observation: every world's chassis position
        ((n, 2) m, float64 of the scene's float32) and its distance to the goal; returns
        the goal relative to it ((n, 2) m)."""
        self._position = position
        to_goal = self._goal - position
        self._distance = np.hypot(to_goal[:, 0], to_goal[:, 1])
        return to_goal

    def _take_device_extras(self, extras):
        # _LevelsOnDevice's extra columns: the chassis' x and y.
        self._note_chassis(extras[:, 0:2].astype(np.float64))
        self._rays = None  # (cast again if render() asks: _render_rays)

    def _device_task(self) -> "_LevelsOnDevice":
        """This env's _LevelsOnDevice: its car, wheel motors, lidar and observation bounds."""
        space = self.single_observation_space
        n_observed = space.shape[0]
        rays = 9 + np.arange(self.n_rays)
        # (one bound for every ray's column: _LevelsOnDevice.observe clips them alike)
        assert (space.low[rays] == space.low[9]).all() and (space.high[rays] == space.high[9]).all()
        return _LevelsOnDevice.of(
            restarts_on_host=True,
            drives=True,
            driven_joints=tuple(int(joint) for joint in self.wheel_joints),
            observes=True,
            n_observed=n_observed,
            n_extra=2,
            n_world_values=2,
            chassis=self.chassis,
            wheels=(self.left_wheel, self.right_wheel),
            max_wheel_speed=self.max_wheel_speed,
            lidar_start=self._lidar_start,
            lidar_range=self.lidar_range,
            n_rays=self.n_rays,
            observed_body=self.chassis,
            lidar_column=9,
            ray_x=tuple(float(x) for x in self._ray_directions[:, 0]),
            ray_y=tuple(float(y) for y in self._ray_directions[:, 1]),
            low=tuple(float(v) for v in space.low),
            high=tuple(float(v) for v in space.high),
        )

    def _start_episodes(self, worlds, observations):
        self._previous_distance[worlds] = self._distance[worlds]

    def _score(self, observations, actions, active):
        rewards = self._previous_distance - self._distance
        self._previous_distance = self._distance.copy()
        reached = self._distance < self.goal_radius
        fell = self._position[:, 1] < self._fall_height
        rewards = np.where(
            reached, rewards + self.goal_bonus, np.where(fell, self.fall_penalty, rewards)
        )
        return rewards, reached | fell

    def _render_rays(self):
        """The lidar's rays, and the goal as a cross of two red segments."""
        if self._rays is None:
            if self._device is None or self._observations is None:
                return None
            # The device's path: the last observation's lidar, cast again on the host.
            car = self.scene.get_state(bodies=[self.chassis])
            origins, directions, reach, hit = self._lidar(car.position[:, 0], car.angle[:, 0])
            self._rays = (origins, origins + reach[..., None] * directions, hit)
        starts, ends, hit = self._rays
        arm = 0.3
        cross_starts = np.stack([self._goal - (arm, arm), self._goal - (arm, -arm)], axis=1)
        cross_ends = np.stack([self._goal + (arm, arm), self._goal + (arm, -arm)], axis=1)
        return (
            np.concatenate([starts, cross_starts], axis=1),
            np.concatenate([ends, cross_ends], axis=1),
            np.concatenate([hit, np.ones((self.num_envs, 2), bool)], axis=1),
        )


class _LevelsOnDevice(DeviceTask):
    """A car's wheel targets and observation on the device (envs/device_step.py): the
    arithmetic of LevelsVectorEnv._apply_actions and _observe, in the same order and in
    float64, stored in float32 as the host's path stores them; a level is written by the
    host (restarts_on_host), its goal handed over as the world values. The lidar
    (device_step.lidar_reach, a thread a ray) starts lidar_start beyond the car; observe
    writes the other columns and the chassis' x and y (_take_device_extras)."""

    @staticmethod
    @ti.func
    def drive(task: ti.template(), actions: ti.template(), world, i: ti.template()):
        action = ti.cast(actions[world, i], ti.f64)
        return ti.cast(ti.f64(task.max_wheel_speed) * action, ti.f32)

    @staticmethod
    @ti.func
    def observe(
        task: ti.template(),
        bodies: ti.template(),
        world,
        slot,
        x,
        y,
        angle,
        world_values: ti.template(),
        out: ti.template(),
    ):
        out[world, 0] = clipped((world_values[world, 0] - x) / ti.f64(10.0), task, 0)
        out[world, 1] = clipped((world_values[world, 1] - y) / ti.f64(10.0), task, 1)
        out[world, 2] = clipped(ti.cos(angle), task, 2)
        out[world, 3] = clipped(ti.sin(angle), task, 3)
        velocity = bodies.velocity[slot]
        out[world, 4] = clipped(ti.cast(velocity.x, ti.f64) / ti.f64(5.0), task, 4)
        out[world, 5] = clipped(ti.cast(velocity.y, ti.f64) / ti.f64(5.0), task, 5)
        spin = ti.cast(bodies.angular_velocity[slot], ti.f64)
        out[world, 6] = clipped(spin / ti.f64(5.0), task, 6)
        for i in ti.static(range(2)):
            wheel = slot - task.chassis + task.wheels[i]  # (the same world's slots)
            relative = ti.cast(bodies.angular_velocity[wheel], ti.f64) - spin
            out[world, 7 + i] = clipped(relative / ti.f64(task.max_wheel_speed), task, 7 + i)
        out[world, task.n_observed] = bodies.position[slot].x
        out[world, task.n_observed + 1] = bodies.position[slot].y


class LevelsEnv(Fx2DEnv):
    """One car in one level: `gymnasium.make("fx2d/Levels-v0")`. See LevelsVectorEnv.

    Args:
        render_mode: None or "rgb_array".
        levels (Sequence[Level] | None): None: generated levels; else the levels to play.
        randomize (bool | dict): domain randomisation (see LevelsVectorEnv).
        render_size (tuple[int, int]): (width, height) of render()'s image, pixels.
        arch: the Taichi backend (see fx2d_gpu.Scene).
        substeps: XPBD substeps per step, >= 1.
        device_step (bool): see LevelsVectorEnv.
    """

    vector_class = LevelsVectorEnv

    def __init__(
        self,
        render_mode: str | None = None,
        *,
        levels: Sequence[Level] | None = None,
        randomize=False,
        render_size=(800, 240),
        arch: str = "auto",
        substeps: int = 8,
        device_step: bool = True,
    ):
        super().__init__(
            render_mode,
            levels=levels,
            randomize=randomize,
            render_size=render_size,
            arch=arch,
            substeps=substeps,
            device_step=device_step,
        )
