"""Faults: worlds whose state went non-finite or absurd, found after every step and
contained per world.

A body is faulty when its pose or velocity is not finite, or past what the engine can
simulate: a coordinate beyond shapes.MAX_COORDINATE (the broad phase would leave it out of
collision) or a speed beyond shapes.MAX_SPEED. A joint is faulty when it is torn, out of
place by more than its bodies' size (joints.torn): a load no solver holds (a chain pulled
by 1e6 N) would otherwise go on as a stretched chain, silently. One kernel finds, per
world, the first faulty body slot (faults.first_slot) and torn joint (first_joint);
Scene.step then raises naming them (the default) or resets only those worlds to their
initial state (on_fault="reset"), so one bad world of a batch of thousands leaves the
others exactly as they would have run.
"""

from typing import TYPE_CHECKING

import numpy as np
import taichi as ti

from ...device.launching import quick
from ...enums import NO_FAULT
from ...shapes import MAX_COORDINATE, MAX_SPEED
from .joints import JOINT_TORN_FRACTION, torn

if TYPE_CHECKING:
    from ...model.builder import ModelBuilder
    from .context import StepContext

#: What Scene.step does with faulty worlds (Scene's on_fault).
ON_FAULT = ("raise", "reset")


class SimulationError(RuntimeError):
    """A step left worlds with non-finite or absurd state (raised by Scene.step).

    A body is faulty when its pose or velocity is not finite, or beyond what the engine
    simulates: a coordinate past shapes.MAX_COORDINATE or a speed past shapes.MAX_SPEED.
    Raised after the step, with on_fault="raise" (the default); the scene keeps the faulty
    state (restore a snapshot to go on). With on_fault="reset" the step instead puts only
    those worlds back to their initial state (Scene.faulted_worlds).

    Args:
        message: what went wrong: the step, the first faulty world and body, and the fault.
        worlds: (k,) the faulty worlds.
        bodies: (k,) the first faulty body of each.

    Attributes:
        worlds (numpy.ndarray): (k,) int64, the faulty worlds.
        bodies (numpy.ndarray): (k,) int64, the first faulty body of each, a body index
            within its world.
    """

    def __init__(self, message: str, worlds: np.ndarray, bodies: np.ndarray):
        super().__init__(message)
        self.worlds = worlds
        self.bodies = bodies

    def __reduce__(self):
        # Pickled with its worlds and bodies (by default only the message would travel,
        # and unpickling would fail): it crosses processes, e.g. from a Ray shard.
        return type(self), (self.args[0], self.worlds, self.bodies)


def describe_fault(position, angle, velocity, angular_velocity) -> str:
    """What is wrong with one body's state (host values)."""
    values = {
        "position": (position, MAX_COORDINATE),
        "angle": (angle, MAX_COORDINATE),
        "velocity": (velocity, MAX_SPEED),
        "angular velocity": (angular_velocity, MAX_SPEED),
    }
    for name, (value, _) in values.items():
        if not np.all(np.isfinite(value)):
            return f"non-finite {name} {np.asarray(value).tolist()}"
    for name, (value, limit) in values.items():
        if np.any(np.abs(value) >= limit):
            return f"{name} {np.asarray(value).tolist()} beyond +-{limit:g}"
    return "no fault"


@ti.func
def _faulty(bodies: ti.template(), slot):
    position, velocity = bodies.position[slot], bodies.velocity[slot]
    # NaN fails every comparison, so "not below the limit" also catches NaN and infinities.
    within = (
        ti.abs(position.x) < MAX_COORDINATE
        and ti.abs(position.y) < MAX_COORDINATE
        and ti.abs(bodies.angle[slot]) < MAX_COORDINATE
        and ti.abs(velocity.x) < MAX_SPEED
        and ti.abs(velocity.y) < MAX_SPEED
        and ti.abs(bodies.angular_velocity[slot]) < MAX_SPEED
    )
    return not within


@ti.func
def _mark(first: ti.template(), faults: ti.template(), world, value, counted: ti.template()):
    """first[world] (faults.first_slot or first_joint) lowered to value; `counted` (the
    first_slot): a world's first mark counts it (faults.count)."""
    before = ti.atomic_min(first[world], value)
    if ti.static(counted):
        if before == NO_FAULT:
            ti.atomic_add(faults.count[None], 1)


@ti.func
def clear_faults(faults: ti.template(), world):
    """World `world`'s marks cleared (before mark_faults looks at it)."""
    faults.first_slot[world] = NO_FAULT
    faults.first_joint[world] = NO_FAULT


@ti.func
def mark_faults(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    faults: ti.template(),
    slots,
    joint_slots,
    n_bodies,
    n_joints,
):
    """Mark the faulty body slots slots[0], slots[0] + slots[2], ... below slots[1] and the
    torn joints of joint_slots (the same; team.slots_of): each world's first of each in
    faults.first_slot and first_joint (a torn joint marks its child body too), counting
    each world marked in faults.count. Any thread may mark any world: the marks are atomic
    minima; the worlds' marks and the count must be cleared before (clear_faults)."""
    slot = slots[0]
    while slot < slots[1]:
        _mark_slot(bodies, faults, slot, n_bodies)
        slot += slots[2]
    joint_slot = joint_slots[0]
    while joint_slot < joint_slots[1]:
        _mark_joint(model, bodies, joints, faults, joint_slot, n_bodies, n_joints)
        joint_slot += joint_slots[2]


@ti.func
def _mark_slot(bodies: ti.template(), faults: ti.template(), slot, n_bodies):
    """mark_faults of one body slot."""
    if _faulty(bodies, slot):
        _mark(faults.first_slot, faults, slot // n_bodies, slot, True)


@ti.func
def _mark_joint(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    faults: ti.template(),
    joint_slot,
    n_bodies,
    n_joints,
):
    """mark_faults of one joint slot."""
    if torn(model, bodies, joints, joint_slot, n_joints, n_bodies):
        world, joint = joint_slot // n_joints, joint_slot % n_joints
        _mark(faults.first_joint, faults, world, joint, False)
        _mark(faults.first_slot, faults, world, world * n_bodies + joints.child[joint], True)


@quick
@ti.kernel
def _find_faults(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    faults: ti.template(),
    serial: ti.template(),
    n_worlds: ti.i32,
    n_bodies: ti.i32,
    n_joints: ti.i32,
) -> ti.i32:
    ti.loop_config(serialize=serial)
    for world in range(n_worlds):
        clear_faults(faults, world)
    faults.count[None] = 0
    ti.loop_config(serialize=serial)
    for slot in range(n_worlds * n_bodies):
        _mark_slot(bodies, faults, slot, n_bodies)
    ti.loop_config(serialize=serial)
    for joint_slot in range(n_worlds * n_joints):
        _mark_joint(model, bodies, joints, faults, joint_slot, n_bodies, n_joints)
    return faults.count[None]


def find_faults(ctx: "StepContext") -> int:
    """Mark, per world, its first faulty body slot (pool.faults.first_slot, NO_FAULT if
    none); returns how many worlds have one."""
    pool = ctx.pool
    return _find_faults(
        pool.model,
        pool.bodies,
        pool.joints,
        pool.faults,
        ctx.serial,
        ctx.n_worlds,
        ctx.n_bodies,
        ctx.n_joints,
    )


def describe_torn_joint(builder: "ModelBuilder", joint: int, world: int, ctx: "StepContext") -> str:
    """What is wrong with torn joint `joint` of `world` (host values)."""
    from types import SimpleNamespace

    from ...model.kinematics import joint_errors

    rows = slice(world * ctx.n_bodies, (world + 1) * ctx.n_bodies)
    poses = ctx.pool.bodies.read({"position": rows.stop, "angle": rows.stop})
    state = SimpleNamespace(
        position=poses["position"][rows][None], angle=poses["angle"][rows][None]
    )
    error = float(joint_errors(builder.joints, state)[0, joint])
    spec = builder.joints[joint]
    # The bodies' bounding radii in this world (their shape rows: bodies.shape_row).
    model = ctx.pool.model.read({"shape_per_world": None, "bounding_radius": ctx.n_slots})
    first = world * ctx.n_bodies if int(model["shape_per_world"]) == 1 else 0
    radii = model["bounding_radius"].astype(np.float64)
    size = min(radii[first + spec.parent], radii[first + spec.child])
    name = f" ({spec.name!r})" if spec.name else ""
    if world in ctx.edited:
        # Not a load: an edit (set_state, reset_worlds, set_enabled) left the joint out of
        # place, and the step did not close it.
        cause = (
            "this world's state was set since the last step (set_state, reset_worlds or "
            "set_enabled), leaving the joint out of place, and "
            + (
                "XPBD closes such a gap in one substep, with the velocity that takes: set "
                "the joint's bodies where it holds, or use solver='soft_step', which closes "
                "it over several steps"
                if ctx.solver == "xpbd"
                else "the step did not close it: set the joint's bodies where it holds"
            )
        )
    else:
        cause = "a load the solver does not hold at this step size"
    return (
        f"joint {joint}{name} torn: {error:.4g} m out of place, beyond "
        f"{JOINT_TORN_FRACTION * size:.4g} m (the smaller bounding radius of its bodies): "
        f"{cause}"
    )


def contain_faults(
    ctx: "StepContext", on_fault: str, builder: "ModelBuilder", step_count: int
) -> np.ndarray:
    """After a step: find the faulty worlds (or take those its substeps' launch found,
    ctx.faults_found) and raise a SimulationError naming the first (on_fault "raise"), or
    return them (k,) for the caller to reset (on_fault "reset":
    world_resets.reset_faulty_worlds)."""
    found = find_faults(ctx) if ctx.faults_found is None else ctx.faults_found
    if found == 0:
        return np.zeros(0, np.int64)
    # The substeps' launch counts from 0 (fused._substeps).
    ctx.pool.faults.count[None] = 0
    # Copies of the scene's entries only (FieldGroup.read): to_numpy copies a field's whole
    # capacity, which the pool's largest scene set.
    faults = ctx.pool.faults.read({"first_slot": ctx.n_worlds, "first_joint": ctx.n_worlds})
    first = faults["first_slot"]
    worlds = np.nonzero(first != NO_FAULT)[0].astype(np.int64)
    slots = first[worlds]
    if on_fault == "reset":
        return worlds
    slot = int(slots[0])
    state = ctx.pool.bodies.read(
        dict.fromkeys(("position", "angle", "velocity", "angular_velocity"), slot + 1)
    )
    what = describe_fault(
        *(state[name][slot] for name in ("position", "angle", "velocity", "angular_velocity"))
    )
    body = slot % ctx.n_bodies
    name = builder.bodies[body].name
    joint = int(faults["first_joint"][worlds[0]])
    if what == "no fault" and joint != NO_FAULT:
        what = describe_torn_joint(builder, joint, int(worlds[0]), ctx)
    more = f" (and {len(worlds) - 1} more worlds)" if len(worlds) > 1 else ""
    raise SimulationError(
        f"step {step_count}: world {worlds[0]}, body {body}{f' ({name!r})' if name else ''}: "
        f"{what}{more}; the scene keeps this state (restore a snapshot, or use "
        "on_fault='reset')",
        worlds,
        (slots % ctx.n_bodies).astype(np.int64),
    )
