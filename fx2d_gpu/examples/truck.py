"""The truck example's driver: the rig that makes four bodies a truck, and its wheel motors.

truck.yml holds bodies only, as Fx2D's examples/truck/Scene.yml does; Fx2D's main.cpp
builds the rig in code, and so does `setup` here:

- the cab (`truck_head`) and the bed (`truck_back`) welded: a prismatic joint along the
  cab's x axis with travel [0, 0] (Fx2D: an axis, a separation and an angle-lock
  constraint, each of compliance 1e-5);
- the front wheel (`wheel2`) on a revolute joint to the cab at (0.1, -0.65) m, the rear
  wheel (`wheel1`) to the bed at (0.48, -0.475) m (each parent's body frame);
- wheel2 and the bed kept from colliding (they overlap where the joints hold them).

The truck faces left (-x: the cab is left of the bed). With `wheel_speed` set (the
default), both wheels get a velocity motor that turns them counter-clockwise, which drives
the truck forward down the ramp and along the ground towards the crate. `wheel_speed=None`
leaves the wheels free, as Fx2D's main_headless.cpp does: the truck then only rolls back
down the ramp it was dropped beside.
"""

from __future__ import annotations

from ._driver import ExampleDriver

#: Each wheel's joint anchor in its parent's body frame, m (Fx2D's main.cpp).
FRONT_WHEEL_ANCHOR = (0.1, -0.65)  # wheel2 on truck_head
REAR_WHEEL_ANCHOR = (0.48, -0.475)  # wheel1 on truck_back


class Driver(ExampleDriver):
    """Builds the truck's joints and drives its wheels.

    Args:
        wheel_speed: the wheels' motor target, rad/s, counter-clockwise relative to the
            chassis (forward: the truck faces -x); 4 rad/s on 0.4 m wheels is 1.6 m/s.
            None: no motors, free wheels (Fx2D's example).
        wheel_torque: the most torque each motor applies, N m. About what the wheels'
            grip can pass to the ground (friction 0.3 of ~22 N on each 0.4 m wheel: 2.6
            N m); more only spins them.
        wheel_gain: the velocity loop's proportional gain, N m per rad/s.

    Attributes (after setup): head, back, front_wheel, rear_wheel (body indices) and
    weld, front_axle, rear_axle (joint indices).
    """

    def __init__(
        self, wheel_speed: float | None = 4.0, wheel_torque: float = 3.0, wheel_gain: float = 5.0
    ):
        self.wheel_speed = wheel_speed
        self.wheel_torque = wheel_torque
        self.wheel_gain = wheel_gain

    def setup(self, scene) -> None:
        self.head, self.back = scene.body_index("truck_head"), scene.body_index("truck_back")
        self.front_wheel, self.rear_wheel = scene.body_index("wheel2"), scene.body_index("wheel1")
        self.weld = scene.add_prismatic_joint(
            self.head, self.back, axis=(1.0, 0.0), position_min=0.0, position_max=0.0
        )
        motor = {}
        if self.wheel_speed is not None:
            motor = {
                "control_mode": "velocity",
                "target": float(self.wheel_speed),
                "pid": (self.wheel_gain, 0.0, 0.0),
                "max_effort": self.wheel_torque,
            }
        self.front_axle = scene.add_revolute_joint(
            self.head, self.front_wheel, anchor=FRONT_WHEEL_ANCHOR, **motor
        )
        self.rear_axle = scene.add_revolute_joint(
            self.back, self.rear_wheel, anchor=REAR_WHEEL_ANCHOR, **motor
        )
        # The joints keep each jointed pair from colliding; wheel2 also overlaps the bed.
        scene.disable_collision(self.front_wheel, self.back)
