"""The substep's stages, declared once: SUBSTEP_STAGES.

Box2D v3 writes its solver as a list of stage types (b2SolverStageType) that every worker
walks; here the list is data both executors walk at compile time (ti.static):

- one launch per stage group (solver/staged.py): the consecutive item stages of the list
  in one kernel (each a parallel loop), the two colour passes a launch per colours;
- all substeps in one launch (solver/fused.py): a world per thread, or a CPU team of
  threads sharing every stage and meeting at a barrier after it.

A stage is an item stage (a function of one joint slot, body slot or pair, run for every
item of its domain) or a colour pass (a constraint function run colour after colour, the
overflow colour last). In order:

    motors                  PID output of every joint slot's motor
    integrate velocities    gravity, damping and motor loads; the step's anchor pose
    narrow phase            a pair's manifold (substep 0, or begin_step; fast pairs later)
                            and its solver constants (contacts.prepare_manifold)
    integrate positions     warm start (a body's contact impulses), then move by velocity
    position pass           penetration and joints, colour after colour (joints again,
                            joints.JOINT_SWEEPS)
    continuous              fast bodies swept against what they must not pass (bullets: a
                            second sweep against dynamic bodies)
    derive velocities       v = displacement / h for the bodies with joints
    velocity pass           contact impulses, friction, restitution, colour after colour
                            (contacts with an immovable body again where masses are uneven)

begin_step (the step's narrow phase before the colouring, step.begin_step) runs the stages
up to the narrow phase of substep 0 (BEGIN_STEP_STAGES). Adding a stage is one entry here:
both executors, the profile (solver/profile.py) and the stage tests follow.

Every item stage function takes (model, bodies, joints, manifolds, prepared, coloring,
counts, item, s, round): the pool's groups, the item's index, the substep's scalars `s`
(a Substep struct) and the round (0, or 1 for the second sweep of `continuous`).
"""

import itertools
from typing import NamedTuple

import taichi as ti

from ...device import PREPARED_PAIR_FIELDS
from ..bodies import moves, world_gravity
from ..collision.continuous import sweep_body
from ..integrate import begin_step_pose, integrate_position, integrate_velocity
from .contacts import (
    UNSUPPORTED,
    find_manifold,
    prepare_manifold,
    resolve_penetration,
    solve_velocity,
    warm_start_body,
)
from .joints import motor_load, solve_joint, update_motor
from .soft_contacts import RESTITUTION_THRESHOLD, apply_restitution, solve_soft_contact
from .soft_joints import solve_soft_joint, warm_start_joints_of_body

vec2 = ti.math.vec2

#: A stage's domain: what its items are.
JOINT_SLOTS, BODY_SLOTS, PAIRS, COLORS = "joint slots", "body slots", "pairs", "colours"
#: Stage.contactless's default: the stage runs as it is in a step without contacts.
SAME = "same"
#: When a stage runs (Stage.when): always; where the substep pushes velocities (not in
#: substep 0 when begin_step already did); in the substeps proper (not in begin_step); in
#: scenes with joints; in the step's last substep (a colour pass only: the soft step's
#: restitution).
ALWAYS, PUSH, AFTER_COLORING, JOINTED, LAST_SUBSTEP = 0, 1, 2, 3, 4

#: The substep's scalars, as every stage function reads them: the layout (n_bodies per
#: world, n_joints per world), substep length h s, step dt s, the substep's index, the
#: step's substeps, and the step's flags: before_coloring (begin_step: substep 0's stages up
#: to the narrow phase), begun (BEGUN_FOUND: begin_step ran, substep 0 does not push or
#: find again but prepares; BEGUN_PREPARED: substep 0's stages up to the narrow phase ran
#: before in the launch, a thread an item, and substep 0 runs none of them), bullets (the
#: scene has bullets), jointed (it has joints), chained (the launch's stages take turns at each
#: body from substep 0's narrow phase on: StepOptions.stages_by_turns, ChainRole), fast (a
#: team's launch: the step has a fast pair, fast_pairs_noted read once after substep 0's
#: narrow phase; 1 until then), idle (a team's launch: the step has no pair and no joint
#: slot, as a world fast asleep or in free fall, so that each item stage touches only the
#: member's own slots and the team meets after them in the last substep alone:
#: fused._meets_after; STILL, where besides no awake body moves: see below).
#: Substep.begun's values: substep 0 runs its stages up to the narrow phase; begin_step
#: found the pairs (before the colouring); those stages ran item by item in the launch
#: (fused._begin_by_item: StepOptions.small_worlds_begin_by_item).
NOT_BEGUN, BEGUN_FOUND, BEGUN_PREPARED = 0, 1, 2


#: Substep.idle's values: the step has pairs or joint slots; it has none (IDLE); it has
#: none and no body moves (bodies.moves: every body asleep, static or disabled), as its
#: launch's refit counted where it found sleepers and no wake followed, or as the launch
#: counted itself (fused._nothing_moves; the host's: step.substeps_to_run) (STILL). A still step
#: runs its first substep alone, and its team meets after none of its stages
#: (fused._meets_after): a stage writes only where a body moves, a pair or a joint slot
#: is, but on substep 0, where every body's anchor is set (begin_step_pose) and its
#: support reset (UNSUPPORTED). So later substeps would change nothing, and no stage of
#: the step reads what substep 0 writes: the anchor only the step's own substeps, the
#: support the next step's narrow phase (contacts.prepare_pair), after the launch.
NOT_IDLE, IDLE, STILL = 0, 1, 2


def begun_before(small_coloring: bool) -> int:
    """Substep.begun of the substeps the host launches: BEGUN_FOUND where begin_step found
    the pairs before the colouring (StepContext.small_coloring False), else NOT_BEGUN."""
    return NOT_BEGUN if small_coloring else BEGUN_FOUND


Substep = ti.types.struct(
    n_bodies=ti.i32,
    n_joints=ti.i32,
    h=ti.f32,
    dt=ti.f32,
    substep=ti.i32,
    substeps=ti.i32,
    before_coloring=ti.i32,
    begun=ti.i32,
    bullets=ti.i32,
    jointed=ti.i32,
    chained=ti.i32,
    fast=ti.i32,
    idle=ti.i32,
)


#: counts.tally's slot (device.TALLY_SLOTS; solver/fused.py lists the others) that the
#: substeps' narrow phase sets to 1 where a point prepared in the step may bounce (the soft
#: step's restitution: an approach faster than its RESTITUTION_THRESHOLD on a pair of some
#: restitution); a launch of the substeps clears it first and skips the restitution pass
#: where it stays 0 (bounce_possible).
BOUNCE_TALLY = 14
#: counts.tally's slot the narrow phase sets to 1 where it prepares a fast pair (one whose
#: narrow phase runs again every substep: contacts.fast_pair), cleared as BOUNCE_TALLY is:
#: without one, the narrow phase of a substep after the first does nothing
#: (fast_pairs_noted, Stage.own_bodies_after_first).
FAST_TALLY = 15


class Stage(NamedTuple):
    """One stage of the substep. name: the profile's label; domain: JOINT_SLOTS, BODY_SLOTS
    or PAIRS (an item stage) or COLORS (a colour pass); run: the ti.func (item stages: of
    one item; colour passes: of one constraint, see _position_constraint); when: ALWAYS,
    PUSH, AFTER_COLORING or JOINTED; sweeps_bullets: the stage runs a second round for
    bullets (Substep.bullets); position: a colour pass of the position pass (else the
    velocity pass); writes: the fields ("group.field" of the pool) the stage writes for
    every item of its domain on the step's first substep before anything reads them (the
    stage tests fill them with NaN first, so a stage that forgets one fails). A colour
    pass's flags: joints, its constraint function solves joints too (the overflow colour's
    joints are then solved after its pairs); joint_sweeps, JOINT_SWEEPS - 1 more sweeps over
    the joints alone follow (XPBD's position pass); immovable_sweep, the contacts with an
    immovable body are solved again in worlds of uneven masses (XPBD's velocity pass,
    contacts.IMMOVABLE_SWEEP_RATIO). contactless: what the stage runs in a step without
    contacts (CONTACTLESS_STAGES): SAME (`run` itself), None (left out: it only touches
    contacts) or a ti.func of run's signature without the contacts' part (a colour pass's:
    of joint slot k). own_bodies_after_first: in a substep after the first of a step
    without fast pairs (fast_pairs_noted) the stage writes nothing another member reads
    before the next barrier: it changes only its own bodies (integrate velocities) or
    nothing (the narrow phase), and the stage after it reads only the member's own bodies
    (an item stage over body slots, or another such stage: _check_declaration), so the
    team does not meet after it (fused._meets_after). bounces_only: a colour pass that
    changes only points that may bounce (the soft step's restitution), skipped where the
    step has none (bounce_possible, fused._pass_runs)."""

    name: str
    domain: str
    run: object
    when: int = ALWAYS
    sweeps_bullets: bool = False
    position: bool = False
    writes: tuple = ()
    joints: bool = False
    joint_sweeps: bool = False
    immovable_sweep: bool = False
    contactless: object = "same"
    own_bodies_after_first: bool = False
    bounces_only: bool = False

    @property
    def is_pass(self) -> bool:
        return self.domain == COLORS


@ti.func
def runs(when: ti.template(), s: ti.template()):
    """1 where a stage of this `when` runs in the substep `s`, else 0."""
    result = 1
    if ti.static(when == PUSH):
        result = 1 if s.before_coloring == 1 or s.substep > 0 or s.begun == NOT_BEGUN else 0
    elif ti.static(when == AFTER_COLORING):
        result = 1 - s.before_coloring
    elif ti.static(when == JOINTED):
        result = s.jointed
    elif ti.static(when == LAST_SUBSTEP):
        result = 1 if s.substep == s.substeps - 1 else 0
    return result


def runs_on_host(stage: "Stage", substep: int, substeps: int) -> bool:
    """runs() for a colour pass, read on the host (the per-stage executor's launches):
    whether `stage` runs in substep `substep` of `substeps`."""
    return stage.when != LAST_SUBSTEP or substep == substeps - 1


@ti.func
def _motors(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    joint_slot,
    s: ti.template(),
    round,
):
    update_motor(bodies, joints, joint_slot, s.n_joints, s.n_bodies, s.h)


@ti.func
def _integrate_velocity(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    slot,
    s: ti.template(),
    round,
):
    """Body slot's velocity integrated over the substep (gravity, damping, its motors'
    loads); on the step's first substep its pose becomes the step's anchor."""
    body = slot % s.n_bodies
    if moves(model, bodies, slot, body):
        force, torque = vec2(0.0, 0.0), 0.0
        if joints.body_has_joint[body]:
            force, torque = motor_load(bodies, joints, slot, body, s.n_joints, s.n_bodies)
        integrate_velocity(
            model, bodies, slot, body, world_gravity(model, slot, s.n_bodies), s.h, force, torque
        )
    if s.substep == 0:
        begin_step_pose(bodies, slot)


@ti.func
def _narrow_phase(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    pair,
    s: ti.template(),
    round,
):
    """_find_and_prepare (both solvers: the materials mix by the scene's rules,
    contacts.mix)."""
    if _find_and_prepare(model, bodies, joints, manifolds, prepared, coloring, pair, s):
        if _may_bounce(manifolds, prepared, pair):
            _note(counts, BOUNCE_TALLY)
        if prepared.refresh[pair] == 1:
            _note(counts, FAST_TALLY)


@ti.func
def _may_bounce(manifolds: ti.template(), prepared: ti.template(), pair):
    """Whether a point of the pair just prepared may bounce in the soft step's restitution
    pass (soft_contacts.apply_restitution bounces no other)."""
    bounces = False
    if prepared.restitution[pair] > 0.0:
        for i in range(manifolds.point_count[pair]):
            if prepared.approach[pair, i] < -RESTITUTION_THRESHOLD:
                bounces = True
    return bounces


@ti.func
def _note(counts: ti.template(), slot: ti.template()):
    """counts.tally[slot] set to 1, read first: a poured pile's thousands of fast pairs do
    not all queue an atomic on one address (a stale 0 read costs one more atomic; nothing
    sets it back to 0 before the launch's next clear)."""
    if counts.tally[slot] == 0:
        ti.atomic_max(counts.tally[slot], 1)


@ti.func
def fast_pairs_noted(counts: ti.template()):
    """Whether the narrow phase prepared a fast pair in this launch's substeps (FAST_TALLY;
    a pair is fast or not for the whole step, decided in substep 0): read after a barrier
    that follows substep 0's narrow phase, the same answer for every member of a team (a
    plain read: team.barrier). A team's launch reads it once a step (Substep.fast)."""
    return counts.tally[FAST_TALLY] != 0


@ti.func
def bounce_possible(counts: ti.template()):
    """Whether a point prepared in this launch's substeps may bounce (BOUNCE_TALLY), read
    after the relax pass's last barrier: the same answer for every member of a team (a
    plain read: team.barrier)."""
    return counts.tally[BOUNCE_TALLY] != 0


@ti.func
def _find_and_prepare(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    pair,
    s: ti.template(),
):
    """What `pair` needs at the start of the substep: its narrow phase (the step's first
    before the colouring where begin_step runs, else in substep 0; later, fast pairs again)
    and its solver constants (prepare_manifold: in substep 0 and after every later narrow
    phase). One call of each, so a kernel
    that runs this inlines the narrow phase once. Returns whether it prepared the pair."""
    first = s.substep == 0
    find, prepare = False, False
    if s.before_coloring == 1:
        find = True
    elif first:
        find, prepare = s.begun == NOT_BEGUN, s.begun != BEGUN_PREPARED
    elif prepared.refresh[pair] == 1:
        find, prepare = True, True
    matches = ti.Vector([-1, -1])
    if find:
        solve, found = find_manifold(
            model, bodies, joints, manifolds, pair, s.n_bodies, s.dt, s.h, first
        )
        matches = found
        if s.before_coloring == 1:
            coloring.solve[pair] = 1 if solve else 0
    if prepare:
        prepare_manifold(
            model, bodies, manifolds, prepared, pair, s.n_bodies, s.dt, s.h, first, matches
        )
    return prepare


@ti.func
def _integrate_position(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    slot,
    s: ti.template(),
    round,
):
    """Warm start body slot (its contacts' impulses) and move it by its velocity over h. On
    the step's first substep, after the pairs' constants read it (contacts.prepare_pair),
    the body's support is counted afresh (contacts.count_support)."""
    if moves(model, bodies, slot, slot % s.n_bodies):
        warm_start_body(model, bodies, manifolds, prepared, slot, s.n_bodies)
        integrate_position(bodies, slot, s.h)
    if s.substep == 0:
        bodies.support[slot] = UNSUPPORTED


@ti.func
def _sweep(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    slot,
    s: ti.template(),
    round,
):
    """Round 0: a fast body swept against immovable bodies; round 1: a bullet against
    dynamic ones (collision/continuous.py)."""
    sweep_body(model, bodies, manifolds, prepared, slot, s.n_bodies, round == 1)


@ti.func
def _derive_velocity(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    slot,
    s: ti.template(),
    round,
):
    """v = (x - x_prev) / h, w = (theta - theta_prev) / h for body slot if it has joints.

    Contacts move pose and previous pose together, so for other bodies this would return the
    integrated velocity plus rounding noise (|x| * 1e-7 / h); joint corrections move the pose
    alone, and this turns them into velocity.
    """
    body = slot % s.n_bodies
    if joints.body_has_joint[body] and moves(model, bodies, slot, body):
        bodies.velocity[slot] = (
            bodies.delta_position[slot] - bodies.prev_delta_position[slot]
        ) / s.h
        bodies.angular_velocity[slot] = (
            bodies.delta_angle[slot] - bodies.prev_delta_angle[slot]
        ) / s.h


@ti.func
def _position_constraint(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    h,
    jacobi_entry,
):
    """Position pass of constraint k: contact pairs first, then joint slots; jacobi_entry
    >= 0: an overflow pair, whose corrections go there (solver/overflow.py)."""
    if k < counts.n_pairs[None]:
        resolve_penetration(bodies, manifolds, prepared, k, n_bodies, h, jacobi_entry)
    else:
        solve_joint(model, bodies, joints, counts, k - counts.n_pairs[None], n_bodies, h)


@ti.func
def _velocity_constraint(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    h,
    jacobi_entry,
):
    """Velocity pass of constraint k (contacts only; jacobi_entry as in
    _position_constraint)."""
    if k < counts.n_pairs[None]:  # joints are position-level only (seed 003)
        solve_velocity(bodies, manifolds, prepared, k, n_bodies, h, jacobi_entry)


@ti.func
def _integrate_position_alone(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    slot,
    s: ti.template(),
    round,
):
    """_integrate_position in a step without contacts: no contact impulses to warm start."""
    if moves(model, bodies, slot, slot % s.n_bodies):
        integrate_position(bodies, slot, s.h)
    if s.substep == 0:
        bodies.support[slot] = UNSUPPORTED


@ti.func
def _joint_position(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    h,
    jacobi_entry,
):
    """_position_constraint in a step without contacts: k is a joint slot."""
    solve_joint(model, bodies, joints, counts, k, n_bodies, h)


SUBSTEP_STAGES = (
    Stage("motors", JOINT_SLOTS, _motors, when=PUSH, writes=("joints.effort",)),
    Stage(
        "integrate velocities",
        BODY_SLOTS,
        _integrate_velocity,
        when=PUSH,
        own_bodies_after_first=True,
        writes=tuple(
            f"bodies.{name}"
            for name in (
                "anchor_position",
                "anchor_angle",
                "delta_position",
                "delta_angle",
                "prev_delta_position",
                "prev_delta_angle",
            )
        ),
    ),
    Stage(
        "narrow phase",
        PAIRS,
        _narrow_phase,
        contactless=None,
        own_bodies_after_first=True,
        writes=("manifolds.touching",) + tuple(f"prepared.{name}" for name in PREPARED_PAIR_FIELDS),
    ),
    Stage(
        "integrate positions",
        BODY_SLOTS,
        _integrate_position,
        when=AFTER_COLORING,
        contactless=_integrate_position_alone,
    ),
    Stage(
        "position pass",
        COLORS,
        _position_constraint,
        position=True,
        joints=True,
        joint_sweeps=True,
        contactless=_joint_position,
    ),
    Stage("continuous", BODY_SLOTS, _sweep, sweeps_bullets=True, contactless=None),
    Stage("derive velocities", BODY_SLOTS, _derive_velocity, when=JOINTED),
    Stage("velocity pass", COLORS, _velocity_constraint, immovable_sweep=True, contactless=None),
)


# ---------------------------------------------------------------- the soft step
@ti.func
def _warm_start(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    slot,
    s: ti.template(),
    round,
):
    """Body slot takes its contacts' and its joints' accumulated impulses, before any
    constraint is solved; on the step's first substep, after the pairs' constants read it,
    its support is counted afresh (contacts.count_support)."""
    if moves(model, bodies, slot, slot % s.n_bodies):
        warm_start_body(model, bodies, manifolds, prepared, slot, s.n_bodies)
        if joints.body_has_joint[slot % s.n_bodies] == 1:
            warm_start_joints_of_body(model, bodies, joints, counts, slot, s.n_bodies)
    if s.substep == 0:
        bodies.support[slot] = UNSUPPORTED


@ti.func
def _move(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    slot,
    s: ti.template(),
    round,
):
    """Body slot moved by its (biased) velocity over h."""
    if moves(model, bodies, slot, slot % s.n_bodies):
        integrate_position(bodies, slot, s.h)


@ti.func
def _soft_solve(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    h,
    jacobi_entry,
):
    """The soft step's solve of constraint k (contact pairs, then joint slots): soft, with
    bias (soft_contacts.py, soft_joints.py)."""
    if k < counts.n_pairs[None]:
        solve_soft_contact(bodies, manifolds, prepared, k, n_bodies, h, jacobi_entry, True)
    else:
        solve_soft_joint(model, bodies, joints, counts, k - counts.n_pairs[None], n_bodies, h, True)


@ti.func
def _soft_relax(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    h,
    jacobi_entry,
):
    """The soft step's relax of constraint k: rigid, without bias."""
    if k < counts.n_pairs[None]:
        solve_soft_contact(bodies, manifolds, prepared, k, n_bodies, h, jacobi_entry, False)
    else:
        solve_soft_joint(
            model, bodies, joints, counts, k - counts.n_pairs[None], n_bodies, h, False
        )


@ti.func
def _restitution(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    h,
    jacobi_entry,
):
    """The soft step's restitution of constraint k (contacts only)."""
    if k < counts.n_pairs[None]:
        apply_restitution(bodies, manifolds, prepared, k, n_bodies, h, jacobi_entry)


@ti.func
def _warm_start_joints(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    counts: ti.template(),
    slot,
    s: ti.template(),
    round,
):
    """_warm_start in a step without contacts: the body's joints' impulses alone."""
    if moves(model, bodies, slot, slot % s.n_bodies):
        if joints.body_has_joint[slot % s.n_bodies] == 1:
            warm_start_joints_of_body(model, bodies, joints, counts, slot, s.n_bodies)
    if s.substep == 0:
        bodies.support[slot] = UNSUPPORTED


@ti.func
def _soft_solve_joint(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    h,
    jacobi_entry,
):
    """_soft_solve in a step without contacts: k is a joint slot."""
    solve_soft_joint(model, bodies, joints, counts, k, n_bodies, h, True)


@ti.func
def _soft_relax_joint(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    counts: ti.template(),
    k,
    n_bodies,
    h,
    jacobi_entry,
):
    """_soft_relax in a step without contacts: k is a joint slot."""
    solve_soft_joint(model, bodies, joints, counts, k, n_bodies, h, False)


#: The soft step's substep (Scene(solver="soft_step"), Box2D v3's scheme): the same first
#: stages, then warm start, a soft solve with bias, positions, the relax without bias, and
#: after the last substep the restitution pass: 2 passes a substep, at 4 substeps where XPBD
#: needs 11.
SOFT_STEP_STAGES = (
    SUBSTEP_STAGES[0],
    SUBSTEP_STAGES[1],
    SUBSTEP_STAGES[2],  # the narrow phase
    Stage(
        "warm start", BODY_SLOTS, _warm_start, when=AFTER_COLORING, contactless=_warm_start_joints
    ),
    Stage("solve", COLORS, _soft_solve, joints=True, contactless=_soft_solve_joint),
    Stage("integrate positions", BODY_SLOTS, _move, when=AFTER_COLORING),
    SUBSTEP_STAGES[5],  # continuous
    Stage("relax", COLORS, _soft_relax, joints=True, contactless=_soft_relax_joint),
    Stage(
        "restitution", COLORS, _restitution, when=LAST_SUBSTEP, contactless=None, bounces_only=True
    ),
)

#: Each solver's substep: Scene(solver=...) -> its stage list.
STAGES = {"xpbd": SUBSTEP_STAGES, "soft_step": SOFT_STEP_STAGES}


def _without_contacts(stages) -> tuple[Stage, ...]:
    """`stages` as a step without contacts runs them (Stage.contactless)."""
    return tuple(
        stage if stage.contactless is SAME else stage._replace(run=stage.contactless)
        for stage in stages
        if stage.contactless is not None
    )


#: Each solver's substep in a step without contacts (worlds where no two bodies may
#: collide: step.contactless_step): STAGES without the stages that only touch contacts,
#: the others without their contacts' part; the same results bit for bit where no pair
#: exists.
CONTACTLESS_STAGES = {solver: _without_contacts(stages) for solver, stages in STAGES.items()}
#: The substeps each solver takes by default (Scene(substeps=None)): Fx2D's 11 (seed 003)
#: and Box2D v3's 4.
DEFAULT_SUBSTEPS = {"xpbd": 11, "soft_step": 4}

#: begin_step's stages: SUBSTEP_STAGES up to the narrow phase, of substep 0 (the same in
#: every solver's list).
BEGIN_STEP_STAGES = 1 + [stage.name for stage in SUBSTEP_STAGES].index("narrow phase")


def stage_groups(stages=SUBSTEP_STAGES) -> list[tuple[int, int]]:
    """[first, last) index ranges of `stages` launched together by the per-stage
    executor: each colour pass alone, the item stages between two passes in one kernel."""
    groups, first = [], 0
    for index, stage in enumerate(stages):
        if stage.is_pass:
            if first < index:
                groups.append((first, index))
            groups.append((index, index + 1))
            first = index + 1
    if first < len(stages):
        groups.append((first, len(stages)))
    return groups


class ChainRole(NamedTuple):
    """A body stage's part in a chained launch (StepOptions.stages_by_turns: the team meets
    at no barrier from substep 0's narrow phase to the last colour pass; coloring.
    take_turns' chain). group: the colour passes before it in the substep (0 or 1);
    waits_first: the first of its group's stages that substep 0 runs after its narrow
    phase, where the chain starts (each body waits there for its turn:
    coloring.wait_for_stages); waits_later: the first of its group in a later substep;
    passes: the last of its group (each body's turn passes on after it:
    coloring.stages_taken)."""

    group: int
    waits_first: bool
    waits_later: bool
    passes: bool

    @property
    def waits(self) -> bool:
        return self.waits_first or self.waits_later


#: The ChainRole of a stage that takes no turn.
NO_ROLE = ChainRole(-1, False, False, False)


def passes_before(stages) -> tuple[int, ...]:
    """Each stage's colour passes before it in the substep."""
    return tuple(sum(before.is_pass for before in stages[:index]) for index in range(len(stages)))


def chain_roles(stages) -> tuple:
    """Each stage's ChainRole (NO_ROLE: a colour pass, a stage over joint slots or pairs, one
    that runs only with joints, which no chain has, or one after a substep's second pass:
    the soft step's restitution, after the chain's end). Two colour passes a substep, each
    group's stages before the pass of its number; the item stages in the chain that are
    not over body slots do nothing after substep 0 where a launch may chain (no joints,
    no fast pairs: they meet at no barrier then, fused._meets_after)."""
    names = [stage.name for stage in stages]
    if "narrow phase" not in names:  # (a step without contacts: its launches never chain)
        return (NO_ROLE,) * len(stages)
    narrow = names.index("narrow phase")
    members: dict[int, list[int]] = {0: [], 1: []}
    for (index, stage), group in zip(enumerate(stages), passes_before(stages), strict=True):
        if stage.domain == BODY_SLOTS and stage.when != JOINTED and group < 2:
            members[group].append(index)
        elif stage.domain in (JOINT_SLOTS, PAIRS) and group < 2:
            assert stage.domain == JOINT_SLOTS or stage.own_bodies_after_first, stage.name
    roles = [NO_ROLE] * len(stages)
    for group, indices in members.items():
        assert indices, f"no body stage before pass {group}"
        first = min(index for index in indices if index > narrow)
        for index in indices:
            roles[index] = ChainRole(
                group, index == first, index == indices[0], index == indices[-1]
            )
    return tuple(roles)


#: (solver, whether its launch may chain) -> each stage's ChainRole (all NO_ROLE where it may
#: not: its kernel compiles no turns at its body stages).
CHAIN_ROLES = {
    (solver, chains): chain_roles(stages) if chains else (NO_ROLE,) * len(stages)
    for solver, stages in STAGES.items()
    for chains in (False, True)
}
#: Each solver's stages: the colour passes before each in the substep (passes_before).
PASS_NUMBERS = {solver: passes_before(stages) for solver, stages in STAGES.items()}


def _check_declaration():
    """The list's own rules (checked at import): item stages before begin_step's end run
    in begin_step (their `when` must not be AFTER_COLORING), those after do not."""
    for stages in STAGES.values():
        assert [s.name for s in stages[:BEGIN_STEP_STAGES]] == [
            s.name for s in SUBSTEP_STAGES[:BEGIN_STEP_STAGES]
        ]
        for index, stage in enumerate(stages):
            if index < BEGIN_STEP_STAGES:
                assert not stage.is_pass and stage.when != AFTER_COLORING, stage.name
            assert stage.domain in (JOINT_SLOTS, BODY_SLOTS, PAIRS, COLORS), stage.name
            assert stage.when != LAST_SUBSTEP or stage.is_pass, stage.name
            assert not stage.bounces_only or stage.is_pass, stage.name
    # A stage the team does not always meet after is followed, in the same substep, by one
    # that reads only its own bodies (or by another such stage).
    for stages in (*STAGES.values(), *CONTACTLESS_STAGES.values()):
        assert not stages[-1].own_bodies_after_first, stages[-1].name
        for stage, after in itertools.pairwise(stages):
            if stage.own_bodies_after_first:
                assert not stage.is_pass, stage.name
                assert after.own_bodies_after_first or after.domain == BODY_SLOTS, after.name


_check_declaration()
