"""The angry_boxes example's driver: the slingshot, held, then fired at the tower.

Fx2D's examples/angry_boxes/main.cpp parks the ball at the slingshot's anchor, (3, 3) m,
until the mouse drags it back and lets go; the shot leaves at (anchor - ball) x 9 m/s.
Here the shot is the one Fx2D's test_slingshot.cpp takes: after the first step and
`hold_steps` more (1 s at 1/60 s) with the ball held in place (a force cancelling its
weight), the ball is pulled straight back 2 m, to (1, 3) m, and fired level at 18 m/s. It
knocks the tower of crates and lintels over.
"""

from __future__ import annotations

import numpy as np

from ._driver import ExampleDriver

#: The slingshot's anchor, the pull, m, and its power, 1/s (main.cpp's FxSlingshot).
ANCHOR, PULL, POWER = np.array([3.0, 3.0]), np.array([-2.0, 0.0]), 9.0


class Driver(ExampleDriver):
    """Holds the ball at the slingshot, then fires it.

    Args:
        hold_steps: steps after the first during which the ball is held (60: 1 s at 1/60 s);
            it is fired before the step after them.

    Attributes (after setup): ball (body index), launch_step (the scene.step_count at
    which it is fired).
    """

    def __init__(self, hold_steps: int = 60):
        self.hold_steps = hold_steps

    def setup(self, scene) -> None:
        self.ball = scene.body_index("ball")
        self.launch_step = self.hold_steps + 1
        # The parked ball's weight, undone (main.cpp turns its gravity off until the shot).
        self.hold_force = -scene.body_mass(self.ball) * np.asarray(scene.gravity, float)

    def before_step(self, scene) -> None:
        if scene.step_count < self.launch_step:
            scene.apply_force(self.ball, self.hold_force)
        elif scene.step_count == self.launch_step:
            # Release: the slingshot holds the ball at the pull point, then sets its velocity.
            state = scene.get_state()
            state.position[:, self.ball] = ANCHOR + PULL
            state.velocity[:, self.ball] = -PULL * POWER
            state.angular_velocity[:, self.ball] = 0.0
            state.sleeping[:, self.ball] = False
            scene.set_state(state)
