"""The joint_control_demo example's driver: the motors through their three control modes.

As Fx2D's examples/joint_control_demo/main.cpp does, 2 s in each phase: POSITION (the arm
to 1 rad, the slider to 1 m), VELOCITY (3.14 rad/s and 0.5 m/s), EFFORT (15 N m on the arm,
-2 N on the slider); then round again from POSITION. Every change of mode or gains starts
the PID afresh, as Fx2D's set_pid does.
"""

from __future__ import annotations

import math

from ._driver import ExampleDriver

#: (mode, arm pid, slider pid, arm target, slider target) of each phase (main.cpp); effort
#: mode ignores the gains (None: keep the last ones, as Fx2D's set_torque does).
PHASES = (
    ("position", (6.0, 0.05, 3.0), (8.0, 0.2, 5.0), 1.0, 1.0),
    ("velocity", (6.0, 0.2, 0.0), (8.0, 0.2, 0.0), 3.14, 0.5),
    ("effort", None, None, 15.0, -2.0),
)


class Driver(ExampleDriver):
    """Switches the motors `arm_motor` and `slider_motor` through PHASES.

    Args:
        phase_seconds: simulated time in each phase, s (main.cpp: 200 steps of 0.01 s).

    Attributes (after setup): arm, slider (joint indices), phase (the index into PHASES
    last set, None before the first step).
    """

    def __init__(self, phase_seconds: float = 2.0):
        self.phase_seconds = phase_seconds
        self.phase: int | None = None

    def setup(self, scene) -> None:
        self.arm, self.slider = scene.joint_index("arm_motor"), scene.joint_index("slider_motor")

    def set_phase(self, scene, phase: int) -> None:
        """Put both motors into PHASES[phase]."""
        mode, arm_pid, slider_pid, arm_target, slider_target = PHASES[phase]
        scene.set_joint_mode(self.arm, mode, pid=arm_pid)
        scene.set_joint_mode(self.slider, mode, pid=slider_pid)
        scene.set_joint_target(self.arm, arm_target)
        scene.set_joint_target(self.slider, slider_target)
        self.phase = phase

    def before_step(self, scene) -> None:
        # The phase follows simulated time; the 1e-9 keeps 200 x 0.01 s (1.99999...) in the
        # phase that it ends rather than one step short of the next.
        due = math.floor(scene.time / self.phase_seconds + 1e-9) % len(PHASES)
        if scene.step_count == 0 or due != self.phase:  # step 0: also after a reset
            self.set_phase(scene, due)
