"""Scenes shared by demos, tests and benchmarks (defined once here)."""

import numpy as np

from .scene import Scene


def random_pile(n_bodies: int, *, n_worlds: int = 1, density: float = 0.9, seed: int = 0,
                arch: str = "auto", substeps: int = 11, **scene_kwargs) -> Scene:
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


def pyramid(base: int, *, box_size: float = 1.0, n_worlds: int = 1, arch: str = "auto",
            substeps: int = 11, friction: float = 0.6, **scene_kwargs) -> Scene:
    """Box2D's pyramid: rows of `base`, `base`-1, ... boxes of `box_size` (m) on a ground.

    base 100 is Box2D's "large pyramid" (5,050 boxes). Body 0 is the ground; the last body is
    the top box.
    """
    scene = Scene(n_worlds=n_worlds, arch=arch, substeps=substeps, **scene_kwargs)
    scene.add_box((0.0, -0.5), (max(40.0, 2.0 * base * box_size), 1.0), mass=0,
                  static_friction=friction, dynamic_friction=friction, name="ground")
    for row in range(base):
        count = base - row
        for i in range(count):
            x = (i - (count - 1) / 2) * box_size
            scene.add_box((x, (row + 0.5) * box_size), (box_size, box_size),
                          static_friction=friction, dynamic_friction=friction)
    return scene
