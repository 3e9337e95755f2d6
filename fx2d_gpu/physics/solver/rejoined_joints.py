"""Joints of a body put back (set_enabled) closed in position before an XPBD step.

XPBD closes a joint's gap in the substep that finds it and derives the bodies' velocities
from the move, so a gap g becomes a relative speed of about g / h. Loads never open such
gaps (a joint that holds is off by micrometres to millimetres), but set_enabled can: a body
taken out of the simulation leaves its joints' other bodies free to move on, and put back it
finds them elsewhere. Two 0.2 m boxes hinged together, one taken out while the other fell
0.1 s, were 6.6 cm apart at the hinge when it came back: they flew apart at ~40 m/s and tore
the joint (0.35 m) in the next step.

So before an XPBD step, every world where set_enabled put bodies back since the last step
(StepContext.edited.rejoined) and a joint is farther out of place than XPBD would close at
MAX_PUSHOUT_SPEED in a substep (the speed contacts push out at, 4.5 mm at 60 Hz and 11
substeps) has its joints put back in place by moving its bodies, PROJECTION_SWEEPS sweeps
over its joints in order, each joint's gap shared by its bodies' inverse masses (a static,
kinematic, sleeping or disabled body stays). The bodies are moved, not turned: the poses'
angles and every velocity are left as they were, so nothing the step does next carries the
gap as speed. (Closing it by turning as well, as the solver's own update does, turned two
hinged boxes 64 degrees each to close a 44 cm gap across their 0.15 m arms, and still left
18 cm.) Worlds without such a gap are left bit for bit alone.

A state set by hand (set_state, reset_worlds with a state) is the caller's, taken as given:
a joint it leaves out of place is not moved, and if the step tears it, the fault names the
edit (faults.describe_torn_joint). Checking every such edit would cost an env that resets
worlds every step a launch a step (97 us of its 1.85 ms at 64 cart-poles, 2-core CPU). The
soft step needs none of this: its joints pull a gap shut softly over several steps, as
Box2D v3's do.
"""

from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from ...device.launching import quick
from ...enums import JOINT_REVOLUTE
from ..bodies import solver_mass
from ..math2d import rotate
from .contacts import MAX_PUSHOUT_SPEED
from .joints import joint_error, joint_frame

if TYPE_CHECKING:
    from .context import StepContext


#: Sweeps over a projected world's joints. One closes a lone joint (the gap is linear in
#: the moves); along a chain, each sweep passes a gap on to the next link.
PROJECTION_SWEEPS = 8


@ti.func
def _gap(bodies: ti.template(), joints: ti.template(), slot1, slot2, joint):
    """The move (m) of the child's anchor that puts joint `joint` back in place at the current
    poses: onto the parent's anchor (revolute); onto the parent's axis, and back within its
    travel limits (prismatic). Zero exactly where joint_error is."""
    r1, r2, c1, s1 = joint_frame(bodies, joints, slot1, slot2, joint)
    offset = bodies.position[slot2] + r2 - bodies.position[slot1] - r1
    gap = offset
    if joints.kind[joint] != JOINT_REVOLUTE:
        axis = rotate(joints.axis[joint], c1, s1)
        travel = axis.dot(offset)
        gap = offset - ti.math.clamp(travel, joints.lower[joint], joints.upper[joint]) * axis
    return gap


@quick
@ti.kernel
def _close_rejoined_joints(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    serial: ti.template(),
    rejoined: ti.types.ndarray(dtype=ti.i32, ndim=1),
    n_bodies: ti.i32,
    n_joints: ti.i32,
    gap: ti.f32,
):
    """A world per thread: where rejoined[world] and a joint of both bodies enabled is more
    than `gap` (m) out of place, PROJECTION_SWEEPS sweeps over the world's joints in order
    move each joint's bodies (their positions only) to close it."""
    ti.loop_config(serialize=serial)
    for world in range(rejoined.shape[0]):
        if rejoined[world] == 1:
            far = 0
            for joint in range(n_joints):
                slot1 = world * n_bodies + joints.parent[joint]
                slot2 = world * n_bodies + joints.child[joint]
                if bodies.enabled[slot1] == 1 and bodies.enabled[slot2] == 1:
                    if joint_error(bodies, joints, slot1, slot2, joint) > gap:
                        far = 1
            for _sweep in range(PROJECTION_SWEEPS * far):
                for joint in range(n_joints):
                    body1, body2 = joints.parent[joint], joints.child[joint]
                    slot1, slot2 = world * n_bodies + body1, world * n_bodies + body2
                    # A joint with a disabled body is out of the simulation with it.
                    if bodies.enabled[slot1] == 1 and bodies.enabled[slot2] == 1:
                        w1 = solver_mass(model, bodies, slot1, body1)[0]
                        w2 = solver_mass(model, bodies, slot2, body2)[0]
                        if w1 + w2 > 0.0:
                            move = _gap(bodies, joints, slot1, slot2, joint) / (w1 + w2)
                            bodies.position[slot1] += w1 * move
                            bodies.position[slot2] -= w2 * move


def close_rejoined_joints(ctx: "StepContext"):
    """Before an XPBD step of a scene with joints: the joints of the worlds where set_enabled
    put bodies back since the last step put back in place where XPBD would close them
    faster than MAX_PUSHOUT_SPEED (see the module docstring). One launch, none where no body
    was put back."""
    mask = ctx.edited.rejoined
    if ctx.solver != "xpbd" or ctx.n_joints == 0 or mask is None:
        return
    pool = ctx.pool
    _close_rejoined_joints(
        pool.model,
        pool.bodies,
        pool.joints,
        ctx.serial,
        mask.astype(np.int32),
        ctx.n_bodies,
        ctx.n_joints,
        MAX_PUSHOUT_SPEED * ctx.h,
    )
