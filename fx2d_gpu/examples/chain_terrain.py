"""The chain_terrain example's driver: things dropped on the hills, which roll along them.

Every `steps_per_drop` steps (half a second at 1/60 s) one more body, up to `max_bodies`,
is dropped just above the terrain's high left end: balls of three sizes, and every fourth
a crate that slides and tumbles. They roll down the first slope into the valley and on
over the hills; what leaves the terrain's right end lands on the catch floor.

`terrain_height(x)` is the chain's height under x, for checking that nothing passes
through it.
"""

from __future__ import annotations

import numpy as np

from ._driver import ExampleDriver

#: The terrain's chain points, m (chain_terrain.yml's `terrain`).
TERRAIN = np.array(
    [
        [0.5, 8.5],
        [3.0, 6.2],
        [5.5, 5.4],
        [7.5, 3.2],
        [10.0, 2.2],
        [12.5, 2.6],
        [14.5, 4.4],
        [16.0, 3.6],
        [17.5, 4.6],
        [19.5, 4.2],
    ]
)
#: Where the bodies are dropped, m: over the first slope, about 1 m above it.
DROP_X, DROP_HEIGHT = 1.3, 8.9
#: Ball radii, m, taken in turn; every fourth body is a crate of CRATE_SIZE (w, h) m.
BALL_RADII = (0.3, 0.22, 0.38)
CRATE_SIZE = (0.5, 0.4)


def terrain_height(x):
    """The chain's height, m, under x (m; array_like), inside [0.5, 19.5] m."""
    return np.interp(x, TERRAIN[:, 0], TERRAIN[:, 1])


class Driver(ExampleDriver):
    """Drops the bodies.

    Args:
        max_bodies: how many bodies in all.
        steps_per_drop: steps between two drops (the first falls after this many).

    Attributes:
        bodies: the dropped bodies' indices, in order.
        reach: each one's bounding radius, m (a ball's radius, a crate's half-diagonal).
    """

    def __init__(self, max_bodies: int = 12, steps_per_drop: int = 30):
        self.max_bodies, self.steps_per_drop = max_bodies, steps_per_drop
        self.bodies: list[int] = []
        self.reach: list[float] = []

    def before_step(self, scene) -> None:
        n = len(self.bodies)
        if n >= self.max_bodies or scene.step_count < (n + 1) * self.steps_per_drop:
            return
        # A little spread, so that the bodies do not land on one another.
        position = (DROP_X + 0.15 * (n % 3), DROP_HEIGHT)
        material = {
            "elasticity": 0.1,
            "static_friction": 0.6,
            "dynamic_friction": 0.5,
            "name": f"dropped_{n}",
        }
        if n % 4 == 3:
            body = scene.add_box(position, CRATE_SIZE, mass=0.5, **material)
            reach = 0.5 * float(np.hypot(*CRATE_SIZE))
        else:
            reach = BALL_RADII[n % len(BALL_RADII)]
            body = scene.add_circle(position, reach, mass=4.0 * reach**2, **material)
        self.bodies.append(body)
        self.reach.append(reach)
