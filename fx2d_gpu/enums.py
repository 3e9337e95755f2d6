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
MOTOR_MODES = {
    None: MOTOR_NONE,
    "position": MOTOR_POSITION,
    "velocity": MOTOR_VELOCITY,
    "effort": MOTOR_EFFORT,
}
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

MIX_MIN = 0
"""BodyModel.friction_mixing / restitution_mixing: a pair takes the smaller of its bodies'
values (Fx2D's rule, seed 000: mu = min(mu_a, mu_b), e = min(e_a, e_b))."""
MIX_MAX = 1
"""... the larger (Box2D's restitution, b2MixRestitution)."""
MIX_GEOMETRIC_MEAN = 2
"""... sqrt(a b) (Box2D's friction, b2MixFriction)."""
MIX_AVERAGE = 3
"""... the arithmetic mean, (a + b) / 2."""
MIX_PRODUCT = 4
"""... a b (pymunk's, Chipmunk2D's rule for both friction and elasticity)."""
MIXING_RULES = {
    "min": MIX_MIN,
    "max": MIX_MAX,
    "geometric_mean": MIX_GEOMETRIC_MEAN,
    "average": MIX_AVERAGE,
    "product": MIX_PRODUCT,
}
"""{Scene's friction_mixing / restitution_mixing name: MIX_* code}."""
DEFAULT_MIXING = "min"
"""Scene's default friction_mixing and restitution_mixing, for both solvers: Fx2D's rule
(seed 000), the engine this one follows."""
