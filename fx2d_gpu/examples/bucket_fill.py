"""The bucket_fill example's driver: balls rain into the bucket until it overflows.

As Fx2D's examples/bucket_fill/main.cpp does: every 6th step one more ball (at most 300)
appears at (8 + 1.7 sin(2.399 n), 11.4) m, ball n of radius 0.16 + 0.05 (n % 3) m, 0.6 kg,
elasticity 0.1, friction 0.4 / 0.3. The jitter spreads the drops 1.7 m either side of the
bucket's centre line, so most fall in and some bounce off the walls' tops; from about a
hundred balls on, the bucket overflows onto the floor.

`count_inside(scene)` counts the balls that are in the bucket (Fx2D's overlap box).
"""

from __future__ import annotations

import numpy as np

from ._driver import ExampleDriver

#: main.cpp's constants: at most 300 balls, one every 6th step.
MAX_BALLS, STEPS_PER_SPAWN = 300, 6
#: The bucket's interior, m: between the walls' inner faces (x), from the bottom's top
#: face to the walls' tops (y); Fx2D's overlap box, 2.4 x 2.8 m centred at (8, 6.6).
INTERIOR_LOWER, INTERIOR_UPPER = np.array([6.8, 5.2]), np.array([9.2, 8.0])
#: The balls' drop height, m, and the bucket's centre line (x), m.
SPAWN_HEIGHT, CENTRE_X = 11.4, 8.0


def spawn_point(n: int) -> tuple[tuple[float, float], float]:
    """((x, y) m, radius m) of ball n, in float32 as main.cpp computes them."""
    jitter = np.float32(1.7) * np.sin(np.float32(n) * np.float32(2.399))
    radius = np.float32(0.16) + np.float32(0.05) * np.float32(n % 3)
    return (CENTRE_X + float(jitter), SPAWN_HEIGHT), float(radius)


class Driver(ExampleDriver):
    """Spawns the balls.

    Args:
        max_balls: how many balls in all (main.cpp: 300).
        steps_per_spawn: steps between two balls (main.cpp: 6; at 1/60 s, 10 balls a second).

    Attributes:
        balls: the spawned balls' body indices, in order.
        radii: their radii, m.
    """

    def __init__(self, max_balls: int = MAX_BALLS, steps_per_spawn: int = STEPS_PER_SPAWN):
        self.max_balls, self.steps_per_spawn = max_balls, steps_per_spawn
        self.balls: list[int] = []
        self.radii: list[float] = []

    def before_step(self, scene) -> None:
        # Ball n appears once step (n + 1) * steps_per_spawn has been taken: main.cpp spawns
        # in the callback after that step, which is the same as before the next one.
        n = len(self.balls)
        if n < self.max_balls and scene.step_count >= (n + 1) * self.steps_per_spawn:
            position, radius = spawn_point(n)
            self.balls.append(
                scene.add_circle(
                    position,
                    radius,
                    mass=0.6,
                    elasticity=0.1,
                    static_friction=0.4,
                    dynamic_friction=0.3,
                    name=f"ball_{n}",
                )
            )
            self.radii.append(radius)

    def count_inside(self, scene, world: int = 0) -> int:
        """The balls of `world` that overlap the bucket's interior (main.cpp's count)."""
        if not self.balls:
            return 0
        centres = scene.get_state(bodies=self.balls).position[world]
        gap = np.clip(centres, INTERIOR_LOWER, INTERIOR_UPPER) - centres
        return int(np.count_nonzero((gap**2).sum(axis=1) < np.asarray(self.radii) ** 2))
