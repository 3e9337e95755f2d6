"""The built-in demos (`fx2d demo NAME`): each a function returning a ready Scene.

Scenes also used by tests and benchmarks live in scenes.py; these reuse them where they can.
"""

import math

import numpy as np

from . import shapes
from .device import runtime
from .draw.viewer import attach_controller
from .scene import Scene
from .scenes import pyramid, random_pile


def _on_gpu() -> bool:
    return runtime.backend_name() is not None and not runtime.on_cpu()


def demo_pile(arch="auto", n_worlds=1, bodies=400, seed=0):
    """400 mixed circles, boxes and triangles poured into a container."""
    return random_pile(bodies, arch=arch, n_worlds=n_worlds, seed=seed, density=0.5)


def demo_pyramid(arch="auto", n_worlds=1, base=20, **_):
    """Box2D's pyramid (base 20 here; base 100 is the 5,050-box large pyramid)."""
    return pyramid(base, arch=arch, n_worlds=n_worlds)


def demo_dominoes(arch="auto", n_worlds=1, count=30, **_):
    """A run of dominoes; the first is tipped over."""
    scene = Scene(arch=arch, n_worlds=n_worlds)
    grip = dict(static_friction=0.6, dynamic_friction=0.5)
    scene.add_box((count * 0.6, -0.5), (count * 1.2 + 6.0, 1.0), mass=0, **grip)
    for i in range(count):
        scene.add_box(
            (1.0 + 1.2 * i, 1.0),
            (0.2, 2.0),
            mass=1.0,
            **grip,
            angular_velocity=-2.0 if i == 0 else 0.0,
        )
    scene.meta["size"] = (count * 1.2 + 3.0, 0.55 * (count * 1.2 + 3.0))
    return scene


def demo_newtons_cradle(arch="auto", n_worlds=1, balls=5, **_):
    """Balls on pendulums; the first one is released from the side."""
    scene = Scene(arch=arch, n_worlds=n_worlds)
    r, length = 0.25, 2.0
    bar = scene.add_box((0.0, 3.0), (4.0, 0.2), mass=0)
    for i in range(balls):
        x = (i - (balls - 1) / 2) * 2 * r
        if i == 0:  # pulled out 60 degrees
            a = math.radians(60)
            pos = (x - length * math.sin(a), 3.0 - length * math.cos(a))
        else:
            pos = (x, 3.0 - length)
        ball = scene.add_circle(pos, r, mass=1.0, elasticity=1.0)
        scene.add_revolute_joint(bar, ball, anchor=(x, 0.0))
    scene.meta["size"] = (6.0, 4.0)
    scene.meta["origin"] = (-3.0, 0.0)
    return scene


def demo_rain(arch="auto", n_worlds=1, bodies=300, seed=1, **_):
    """A rain of mixed circles and polygons into a bucket."""
    rng = np.random.default_rng(seed)
    scene = Scene(arch=arch, n_worlds=n_worlds)
    grip = dict(static_friction=0.4, dynamic_friction=0.3)
    scene.add_box((0.0, 0.0), (8.0, 0.5), mass=0, **grip)
    scene.add_box((-4.0, 2.5), (0.5, 5.0), mass=0, angle=-0.2, **grip)
    scene.add_box((4.0, 2.5), (0.5, 5.0), mass=0, angle=0.2, **grip)
    for i in range(bodies):
        pos = (rng.uniform(-3.0, 3.0), 6.0 + 0.35 * i)
        if i % 2:
            scene.add_circle(pos, rng.uniform(0.1, 0.25), elasticity=0.3, **grip)
        else:
            k = int(rng.integers(3, 7))
            angles = (
                np.sort(rng.uniform(0, 2 * np.pi, k))
                if k < 5
                else np.linspace(0, 2 * np.pi, k, endpoint=False)
            )
            size = rng.uniform(0.12, 0.3)
            verts = np.stack([np.cos(angles), np.sin(angles)], 1) * size
            try:
                scene.add_polygon(pos, verts, angle=rng.uniform(0, 6.28), **grip)
            except ValueError:  # a degenerate random polygon: use a box instead
                scene.add_box(pos, (size, size), **grip)
    scene.meta["size"] = (12.0, 12.0)
    scene.meta["origin"] = (-6.0, -1.0)
    return scene


def demo_car(arch="auto", n_worlds=1, speed=3.0, **_):
    """A car whose wheels are PID velocity motors, driving over bumpy ground."""
    scene = Scene(arch=arch, n_worlds=n_worlds)
    grip = dict(static_friction=0.9, dynamic_friction=0.8)
    scene.add_box((25.0, -0.5), (60.0, 1.0), mass=0, **grip)
    for i in range(12):  # bumps: half-buried discs
        scene.add_circle((6.0 + 3.5 * i, -0.3), 0.45, mass=0, **grip)
    r = 0.4
    chassis = scene.add_box((0.0, 1.0), (2.4, 0.4), mass=3.0, **grip)
    for x in (-0.9, 0.9):
        wheel = scene.add_circle((x, r), r, mass=0.8, **grip)
        scene.add_revolute_joint(
            chassis,
            wheel,
            anchor=(x, r - 1.0),
            control_mode="velocity",
            target=-speed / r,
            pid=(20.0, 0.0, 0.0),
            max_effort=40.0,
        )
    scene.meta["size"] = (24.0, 6.0)
    scene.meta["origin"] = (-2.0, -1.5)
    return scene


def demo_batched(arch="auto", n_worlds=16, seed=2, **_):
    """A grid of worlds: the same stack hit by a ball thrown at random speeds and angles."""
    scene = Scene(arch=arch, n_worlds=n_worlds)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0, static_friction=0.6, dynamic_friction=0.5)
    for i in range(5):
        scene.add_box((3.0, 0.5 + i), (1.0, 1.0), static_friction=0.6, dynamic_friction=0.5)
    ball = scene.add_circle((-4.0, 1.0), 0.3, mass=3.0)
    rng = np.random.default_rng(seed)
    state = scene.get_state()
    speed = rng.uniform(4.0, 14.0, n_worlds)
    angle = rng.uniform(0.1, 0.8, n_worlds)
    state.velocity[:, ball] = np.stack([speed * np.cos(angle), speed * np.sin(angle)], 1)
    scene.set_state(state)
    scene.meta["size"] = (12.0, 8.0)
    scene.meta["origin"] = (-5.0, -1.0)
    return scene


def demo_large_pile(arch="auto", n_worlds=1, bodies=None, seed=3, **_):
    """A large pile: 100,000 bodies on a GPU, 5,000 on the CPU."""
    if bodies is None:
        bodies = 100_000 if _on_gpu() else 5_000
    return random_pile(bodies, arch=arch, n_worlds=n_worlds, seed=seed, density=0.6)


def demo_shapes(arch="auto", n_worlds=1, seed=4, **_):
    """Every shape: capsules, rounded boxes and polygons, boxes, circles and triangles
    tumble down ramps made of edges into a bin with a wavy chain for a floor."""
    rng = np.random.default_rng(seed)
    scene = Scene(arch=arch, n_worlds=n_worlds)
    grip = dict(static_friction=0.5, dynamic_friction=0.4)
    # Level geometry: two edge ramps and a floor.
    scene.add_edge((0.0, 0.0), (-9.0, 9.0), (-1.0, 5.0), **grip)
    scene.add_edge((0.0, 0.0), (9.0, 6.0), (1.5, 2.5), **grip)
    floor = [[x, 0.25 + 0.25 * math.cos(1.2 * x)] for x in np.linspace(-9.0, 9.0, 25)]
    scene.add_chain((0.0, 0.0), floor, **grip)  # 24 links: bodies 2-25
    scene.add_edge((0.0, 0.0), (-9.0, 0.0), (-9.0, 12.0), **grip)
    scene.add_edge((0.0, 0.0), (9.0, 0.0), (9.0, 12.0), **grip)
    makers = (
        lambda p: scene.add_capsule(p, rng.uniform(0.4, 1.0), rng.uniform(0.15, 0.3), **grip),
        lambda p: scene.add_box(p, rng.uniform(0.3, 0.7, 2), radius=0.08, **grip),
        lambda p: scene.add_polygon(p, [[0, 0], [0.7, 0], [0.35, 0.6]], radius=0.06, **grip),
        lambda p: scene.add_box(p, rng.uniform(0.3, 0.7, 2), **grip),
        lambda p: scene.add_circle(p, rng.uniform(0.15, 0.35), **grip),
        lambda p: scene.add_polygon(p, [[0, 0], [0.8, 0], [0.4, 0.7]], **grip),
    )
    for i in range(36):
        x = -8.0 + 1.4 * (i % 6) + rng.uniform(-0.2, 0.2)
        y = 10.0 + 1.1 * (i // 6)
        makers[i % len(makers)]((x, y))
    state = scene.get_state()
    state.angle[:, 28:] = rng.uniform(-np.pi, np.pi, size=(n_worlds, scene.n_bodies - 28))
    scene.set_state(state)
    scene.meta["size"] = (19.0, 17.5)
    scene.meta["origin"] = (-9.5, -0.5)
    return scene


class LidarController:
    """Drives the lidar demo's agents and keeps each frame's lidar rays for drawing.

    Every step: one Scene.ray_cast for all worlds (a fan of `n_rays` rays from each agent's
    rim, `reach` m), then a force on each agent toward its next waypoint, pushed away from
    obstacles the lidar sees closer than 1.5 m. rays: (starts, ends, hit) of the last cast,
    (n_worlds, n_rays, 2), (n_worlds, n_rays, 2), (n_worlds, n_rays), for render_worlds."""

    def __init__(
        self,
        agent: int,
        radius: float,
        waypoints: np.ndarray,
        n_rays: int = 32,
        reach: float = 8.0,
        speed: float = 3.0,
    ):
        self.agent, self.radius, self.waypoints = agent, radius, waypoints  # (w, k, 2)
        self.target = np.zeros(len(waypoints), np.int64)
        angles = np.linspace(0.0, 2.0 * np.pi, n_rays, endpoint=False)
        self.fan = np.stack([np.cos(angles), np.sin(angles)], 1)
        self.reach, self.speed = reach, speed
        self.rays = None
        self.ranges = None  # (n_worlds, n_rays) m: the observation an RL agent would get

    def before_step(self, scene):
        state = scene.get_state()
        position = state.position[:, self.agent]  # (w, 2)
        origins = position[:, None, :] + (self.radius + 0.02) * self.fan[None]
        hits = scene.ray_cast(origins, self.fan, self.reach)  # all worlds, one call
        self.ranges = np.where(hits.hit, hits.distance, self.reach)
        ends = origins + self.ranges[..., None] * self.fan[None]
        self.rays = (origins, ends, hits.hit)
        worlds = np.arange(len(position))
        goal = self.waypoints[worlds, self.target]
        arrived = np.linalg.norm(goal - position, axis=1) < 0.8
        self.target = (self.target + arrived) % self.waypoints.shape[1]
        goal = self.waypoints[worlds, self.target]
        to_goal = goal - position
        desired = self.speed * to_goal / np.maximum(np.linalg.norm(to_goal, axis=1), 1e-6)[:, None]
        near = np.clip(1.5 - self.ranges, 0.0, None)  # (w, n_rays): closeness of obstacles
        desired -= 4.0 * (near[..., None] * self.fan[None]).sum(1)
        force = 6.0 * (desired - state.velocity[:, self.agent])
        scene.apply_force(self.agent, force)


def demo_lidar(arch="auto", n_worlds=16, seed=5, **_):
    """Batched lidar: in each world an agent drives to waypoints among random obstacles,
    seeing them through a 32-ray lidar fan (one ray_cast call for all worlds a frame)."""
    rng = np.random.default_rng(seed)
    scene = Scene(gravity=(0.0, 0.0), arch=arch, n_worlds=n_worlds)
    half = 10.0
    for x, y, w, h in (
        (0, -half, 2 * half + 1, 1),
        (0, half, 2 * half + 1, 1),
        (-half, 0, 1, 2 * half + 1),
        (half, 0, 1, 2 * half + 1),
    ):
        scene.add_box((x, y), (w, h), mass=0)
    n_obstacles = 10
    for i in range(n_obstacles):
        if i % 2:
            scene.add_circle((0.0, 0.0), rng.uniform(0.4, 1.0), mass=0)
        else:
            scene.add_box((0.0, 0.0), rng.uniform(0.6, 2.2, 2), mass=0)
    radius = 0.3
    agent = scene.add_circle((0.0, 0.0), radius, mass=1.0, vel_damping=0.5)
    state = scene.get_state()
    obstacles = slice(4, 4 + n_obstacles)
    state.position[:, obstacles] = rng.uniform(-half + 2, half - 2, (n_worlds, n_obstacles, 2))
    state.angle[:, obstacles] = rng.uniform(-np.pi, np.pi, (n_worlds, n_obstacles))
    state.position[:, agent] = rng.uniform(-half + 1.5, half - 1.5, (n_worlds, 2))
    scene.set_state(state)
    # Move agents that start inside an obstacle to a free spot.
    for _ in range(50):
        inside = scene.overlap_shape(shapes.circle(radius + 0.1), state.position[:, agent][:, None])
        blocked = np.unique(inside.world[inside.body != agent])
        if len(blocked) == 0:
            break
        state.position[blocked, agent] = rng.uniform(-half + 1.5, half - 1.5, (len(blocked), 2))
        scene.set_state(state)
    waypoints = rng.uniform(-half + 1.5, half - 1.5, (n_worlds, 4, 2))
    attach_controller(scene, LidarController(agent, radius, waypoints))
    scene.meta["size"] = (2 * half + 2, 2 * half + 2)
    scene.meta["origin"] = (-half - 1, -half - 1)
    return scene


DEMOS = {
    "pile": demo_pile,
    "pyramid": demo_pyramid,
    "dominoes": demo_dominoes,
    "newtons_cradle": demo_newtons_cradle,
    "rain": demo_rain,
    "car": demo_car,
    "batched": demo_batched,
    "large_pile": demo_large_pile,
    "shapes": demo_shapes,
    "lidar": demo_lidar,
}
