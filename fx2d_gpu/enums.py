"""Integer codes shared by the host (NumPy, Python) and the kernels: the values stored in
device fields, in one place so that both sides read the same numbers.

Plain ints, not enum.Enum: Taichi kernels read module-level ints as compile-time constants.
"""

SHAPE_NONE = 0
"""Shape kind code (device side) of a body with no collision shape (added with
collides=False): it never collides or answers a query."""
SHAPE_CIRCLE = 1
"""Shape.kind of a circle: a point core and its radius."""
SHAPE_POLYGON = 2
"""Shape.kind of a convex polygon (a box is one), sharp or rounded by its radius."""
SHAPE_CAPSULE = 3
"""Shape.kind of a capsule: a segment core along local x and its radius."""
SHAPE_EDGE = 4
"""Shape.kind of an edge: a two-sided segment with no skin (static level geometry)."""
SHAPE_CHAIN = 5
"""Shape.kind of one link (segment) of a chain: one-sided static terrain (see
shapes.chain)."""

JOINT_REVOLUTE = 0
"""Joints.kind of a revolute joint: an anchor constraint plus an angular limit."""
JOINT_PRISMATIC = 1
"""Joints.kind of a prismatic joint: motion along an axis, an angle lock, separation
limits."""

MOTOR_NONE = 0
"""Joints.mode of a joint without a motor (its target is not read)."""
MOTOR_POSITION = 1
"""Joints.mode of a motor driving the joint's coordinate to its target, rad or m."""
MOTOR_VELOCITY = 2
"""Joints.mode of a motor driving the joint's rate to its target, rad/s or m/s."""
MOTOR_EFFORT = 3
"""Joints.mode of a motor applying its target as effort, N m or N (clamped by
max_effort)."""
MOTOR_MODES = {None: MOTOR_NONE, "position": MOTOR_POSITION, "velocity": MOTOR_VELOCITY,
               "effort": MOTOR_EFFORT}
"""{Scene's control_mode name: MOTOR_* code}."""

TOUCHED = 1
"""Manifolds.touching of a pair within TOUCH_FRACTION of its slop, or pushing, in a substep
of this step (set by the velocity pass, solver/contacts.py)."""
HELD = 2
"""Manifolds.touching of a pair within HOLD_FRACTION of its slop only: touching if the pair
was reported last step (solver/reporting.py). 0: neither."""

NO_FAULT = 2147483647
"""Faults.first_slot / first_joint of a world with no faulty body / torn joint (int32's
largest, so the first fault is the smallest slot found)."""
