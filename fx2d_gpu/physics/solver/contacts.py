"""The whole contact constraint (seed 000), stage by stage:

- narrow phase with margins (find_manifold: the step's first before the colouring, which
  colours only pairs with points or fast ones; fast pairs again every substep), impulses
  carried by feature id;
- prepare (prepare_manifold, on the step's first substep and after each later narrow
  phase): the pair's solver masses, restitution and slop, each point's lever arms,
  effective masses and friction regime (mu_s while it sticks, mu_k once it slides;
  mixed_friction);
- per-body contact lists (build_body_lists, once per step) for warm starting;
- warm start (warm_start_body), before the substep's position integration;
- position pass (resolve_penetration): XPBD penetration resolution;
- velocity pass (solve_velocity): normal impulses (a 2-point block solve where it helps),
  Coulomb friction, restitution in the substep of an impact.

All functions handle one pair's manifold (up to 2 points) in one thread; the colouring
guarantees no other thread touches the same dynamic bodies meanwhile. Sleeping bodies act as
static ones (zero inverse mass).
"""

from typing import TYPE_CHECKING

import taichi as ti

from ...device import MAX_MANIFOLD_POINTS, UNSOLVED_COLOR
from ...device.launching import quick
from ...device.scan import exclusive_scan
from ...enums import (
    HELD,
    MIX_AVERAGE,
    MIX_GEOMETRIC_MEAN,
    MIX_MAX,
    MIX_PRODUCT,
    SHAPE_CHAIN,
    SHAPE_CIRCLE,
    TOUCHED,
)
from ...model.world_params import IMMOVABLE_SWEEP_RATIO
from ..bodies import (
    bounding_radius,
    is_sensor_pair,
    material_row,
    moves,
    solver_mass,
    world_gravity,
)
from ..collision.narrow_phase import collide_pair, shape_extent
from ..integrate import displace
from ..math2d import cross, cross_sv

if TYPE_CHECKING:
    from .context import StepContext

vec2 = ti.math.vec2
vec3 = ti.math.vec3

#: Penetration left alone by the position pass, m (avoids fighting contact noise); pairs
#: with a body smaller than LINEAR_SLOP / SLOP_FRACTION use SLOP_FRACTION of its radius
#: (a 2 mm slop let a stack of 1 mm boxes sink into each other and topple).
LINEAR_SLOP = 0.002
SLOP_FRACTION = 0.05
#: Fastest a substep's position pass pushes overlapping bodies apart, m/s (Box2D v3's
#: contact push-out limit is 3 m/s).
MAX_PUSHOUT_SPEED = 3.0
#: XPBD compliance of contacts (seed: 1e-8), m/N.
CONTACT_COMPLIANCE = 1e-8
#: Restitution applies only to contacts closing faster than this, m/s (no micro-bounces).
RESTITUTION_THRESHOLD = 0.5
#: Points this many slops apart are kept as speculative contacts (besides the distance the
#: bodies can travel, see find_manifold): the velocity pass lets the bodies close
#: the gap but no more, so they land without overshooting.
SPECULATIVE_SLOPS = 4.0
SPECULATIVE_DISTANCE = SPECULATIVE_SLOPS * LINEAR_SLOP
#: A pair whose bodies can move more than this fraction of the smaller one's bounding radius
#: in a step gets its manifold computed again every substep; slower pairs (settling piles)
#: keep the step's manifold, tracked through the bodies' rigid motion.
FAST_MOTION_FRACTION = 0.05
#: A fast pair's speculative margin covers this many substeps of motion. The narrow phase
#: runs before the substep's position integration and the velocity pass that limits the
#: closing speed to the gap after it, so the limit first acts on the next substep's motion:
#: with 2 (and the broad phase looking as far ahead, step.pair_window) a fast body is
#: stopped short of what it meets, dynamic bodies included, a substep earlier; but every
#: falling body's pairs grow, and the poured 100k pile took 604 -> 800 ms a step (2-core
#: CPU; its overflow colour 59 -> 1,033 constraints). Continuous collision
#: (collision/continuous.py) keeps fast bodies out of static ones, and bullets out of
#: dynamic ones, whatever this is.
FAST_MARGIN_SUBSTEPS = 1.0
#: A slow pair's manifold found at the start of a step is kept for the next steps
#: (reuse_manifold), its points and depths carried along with the bodies' rigid motion,
#: while the bodies' material points have moved by at most REUSE_DRIFT_SLOPS of the pair's
#: slop in all since it was found afresh: a settled stack creeps ~1e-5 m a step, so its
#: narrow phase runs once in tens of steps instead of every step. Found afresh, a slow
#: pair keeps points REUSE_PAD_SLOPS slops farther apart than its margin asks (speculative
#: points that do nothing unless the gap closes), so that a later step whose margin grew a
#: little may still reuse it.
REUSE_DRIFT_SLOPS = 0.25
REUSE_PAD_SLOPS = 0.5
#: Points slipping slower than this (m/s) when the substep starts are held by static
#: friction (mu_s); faster ones slide with kinetic friction (mu_k). It is above the speed
#: gravity adds in one substep, so a body at rest stays at rest while mu_s allows.
STICK_SPEED = 0.05
#: A pair touches (contacts(), contact events) in a substep where a point is deeper than
#: -TOUCH_FRACTION of its slop at the velocity pass, or pushes: resting contacts sit about
#: one slop deep, speculative points far apart do not count.
TOUCH_FRACTION = 0.25
#: A pair reported touching last step keeps touching while a point stays deeper than
#: -HOLD_FRACTION of its slop (hysteresis): neighbours resting about a quarter slop apart,
#: as in a pyramid's rows, would otherwise begin and end touching every few steps (the
#: awake large pyramid: 66 begin events a step with none, 24 with half a slop, 5 with one).
#: Box2D v3 counts a pair touching while its manifold has points, up to 4 slops apart.
HOLD_FRACTION = 1.0
#: Velocity iterations over a manifold's points per substep (multi-point convergence).
VELOCITY_ITERATIONS = 1
#: Iterations over a manifold with an immovable body (static, kinematic, asleep) in each
#: velocity sweep (solve_velocity). The friction row changes the normal velocities the
#: block solve left (through the body's turn), and a second iteration puts them right:
#: with one, a 1 m box set spinning at 15 rad/s on the ground (Fx2D's scene: mu_s 0.6,
#: mu_k 0.5) leapt to 2.45 m, the frictionless answer; with two, 2.261 against the 2.266
#: that friction allows. Such manifolds are few (a pile's floor and walls, a pyramid's
#: bottom row).
IMMOVABLE_ITERATIONS = 2
#: In scenes whose dynamic bodies' masses differ by more than this factor, the velocity
#: pass ends with a sweep over the contacts that have an immovable body (static, kinematic
#: or asleep: against_immovable), colour after colour, so the last word on a body resting
#: on the ground is the ground's. Between a heavy body and the ground a
#: light one is otherwise pushed through: a Gauss-Seidel sweep moves the light body, not
#: the heavy one, and the ground's contact, solved before, cannot answer (1 kg under
#: 10,000 kg: its centre at y = -0.77 after 5 s, 1.3 m down; 100,000 kg: -108 m; with the
#: sweep 0.493 for 1e3 to 1e6 kg). The position pass needs none: a contact's correction
#: is bounded (MAX_PUSHOUT_SPEED), and the ground's takes back what the heavy body's gave.
#: Overflow pairs (solver/overflow.py) are not swept again. Between bodies of about the same
#: mass the sweep changes little and costs a pass over the colours (on a GPU, a launch per
#: two colours: the awake large pyramid took 5.5 -> 7.9 ms a step on an H200 with it and
#: continuous collision's launch), so it runs where a scene needs it
#: (StepContext.immovable_sweep). The ratio itself lives where each world's fact is
#: derived from its masses (world_params.IMMOVABLE_SWEEP_RATIO, uneven_worlds).
#: solve_velocity's jacobi_entry for a pair's second solve in a pass (the immovable sweep).
REPEAT_SOLVE = -2
#: Shock propagation (Guendelman et al. 2003) in worlds of uneven masses: of two dynamic
#: bodies in contact, the one fewer touching contacts away from an immovable body (static,
#: kinematic, asleep; BodyState.support, counted in the last step's velocity passes) is
#: held still for the other one, as if immovable, where its inverse mass is more than
#: SHOCK_RATIO times the other's (it is the lighter by that factor). The immovable sweep
#: alone gives the ground the last word on the light body, but nothing stops the heavy one
#: above: a Gauss-Seidel sweep moves the light body, not the heavy one, and the heavy box
#: sank through the light one (a 1 kg box under 10,000 kg set 1e-5 m off centre: the heavy
#: box reached the ground in 0.4 s and the light one squirted out at 41 m/s; centred, the
#: symmetry hid it; on CUDA its rounding did not). Held, the light body neither feels the
#: heavy one's contact (its solve, position correction and warm start) nor passes its
#: weight on to the ground: the ground's contact reports the light body's own load.
SHOCK_RATIO = IMMOVABLE_SWEEP_RATIO
#: BodyState.support of a body with no touching path to an immovable body.
UNSUPPORTED = 0


@ti.func
def against_immovable(prepared: ti.template(), pair):
    """Whether one of the pair's bodies is immovable this step (zero inverse mass and
    inertia as the solver sees it: static, kinematic or asleep; prepare_pair)."""
    masses = prepared.solver_mass[pair]
    return (masses[0] == 0.0 and masses[1] == 0.0) or (masses[2] == 0.0 and masses[3] == 0.0)


@ti.func
def swept_again(
    model: ti.template(), manifolds: ti.template(), prepared: ti.template(), pair, n_bodies
):
    """Whether the immovable sweep (IMMOVABLE_SWEEP_RATIO) solves `pair` again: a contact
    with an immovable body in a world of uneven masses (BodyModel.uneven: per world, so that
    a world of a batch is solved as it would be alone)."""
    return (
        against_immovable(prepared, pair) and model.uneven[manifolds.body_a[pair] // n_bodies] == 1
    )


@ti.func
def tangent_of(normal):
    return vec2(-normal.y, normal.x)


@ti.func
def warm_start_body(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    slot,
    n_bodies,
):
    """Re-apply to one body the impulses its contacts carried at the end of the last substep.

    Gathered per body over its pairs in a fixed order (prepared.body_contacts), so the sum is
    the same on every run.
    """
    inv_mass, inv_inertia = solver_mass(model, bodies, slot, slot % n_bodies)
    # Summed in registers (from the stored value, in the same order: the same floats) and
    # stored once: `field[i] += x` in a parallel loop is an atomic add, a compare-and-swap
    # loop per component on a CPU, and the colouring already keeps other threads away.
    velocity, spin = bodies.velocity[slot], bodies.angular_velocity[slot]
    for j in range(prepared.body_contact_start[slot], prepared.body_contact_start[slot + 1]):
        pair = prepared.body_contacts[j]
        is_b = manifolds.body_b[pair] == slot
        if prepared.held[pair] == (2 if is_b else 1):
            continue  # held still for the other body this step (SHOCK_RATIO)
        sign = 1.0 if is_b else -1.0  # b receives +impulse
        normal = manifolds.normal[pair]
        tangent = tangent_of(normal)
        for i in range(manifolds.point_count[pair]):
            impulse = sign * (
                manifolds.normal_impulse[pair, i] * normal
                + manifolds.tangent_impulse[pair, i] * tangent
            )
            # The lever arms the velocity pass uses (fixed for the step): an arm to the
            # world point from the body's moving centre would turn normal impulses into
            # torque as the body travels (a rolling disk sped up by 12 %).
            r = prepared.arm_b[pair, i] if is_b else prepared.arm_a[pair, i]
            velocity += inv_mass * impulse
            spin += inv_inertia * cross(r, impulse)
    bodies.velocity[slot] = velocity
    bodies.angular_velocity[slot] = spin


@ti.func
def pair_masses(prepared: ti.template(), pair):
    """(w_a, I_a, w_b, I_b) of a pair for this step (see prepare_pair)."""
    masses = prepared.solver_mass[pair]
    return masses[0], masses[1], masses[2], masses[3]


@ti.func
def turned(angle, r):
    """How far the point at r (m, from the centre) moves when the body turns by angle (rad):
    R(angle) r - r to second order, angle perp(r) - angle^2 / 2 r. The first-order term alone
    moves a spinning corner along its tangent instead of its arc; the third-order error is
    below 2e-5 r for the turns a manifold is tracked over (fast pairs are refreshed every
    substep, slow ones move less than FAST_MOTION_FRACTION of their size in a step)."""
    return angle * vec2(-r.y, r.x) - 0.5 * angle * angle * r


@ti.func
def turned_along(angle, r, r_cross_normal, normal):
    """normal . turned(angle, r), m: how far the point at r moves along `normal` when its
    body turns by angle (rad), from r x normal (m) where the caller has it:
    angle (r x n) - angle^2 / 2 (n . r)."""
    return angle * r_cross_normal - 0.5 * angle * angle * normal.dot(r)


@ti.func
def moved_since(prepared: ti.template(), pair, normal, delta_a, turn_a, delta_b, turn_b):
    """(how far the centres of bodies a and b, displaced by (delta, turn) since the step
    began, moved apart along `normal` since the pair's manifold was found (m); a's turn
    since then, b's (rad)): the motion moved_depth tracks a point's depth through."""
    shift_ref = prepared.ref_shift[pair]
    turn_ref = prepared.ref_turn[pair]
    apart = normal.dot(
        (delta_b - vec2(shift_ref[2], shift_ref[3])) - (delta_a - vec2(shift_ref[0], shift_ref[1]))
    )
    return apart, turn_a - turn_ref[0], turn_b - turn_ref[1]


@ti.func
def moved_depth(
    manifolds: ti.template(), prepared: ti.template(), pair, i, delta_a, turn_a, delta_b, turn_b
):
    """A point's depth (m) once bodies a and b are displaced by (delta, turn) since the step
    began: the depth found at the last refresh, minus how far the two material points at the
    contact moved apart along the normal since then (rigid motion, Box2D v3's rule; the
    turns to second order, turned)."""
    normal = manifolds.normal[pair]
    apart, turn_a_since, turn_b_since = moved_since(
        prepared, pair, normal, delta_a, turn_a, delta_b, turn_b
    )
    ra, rb = prepared.arm_a[pair, i], prepared.arm_b[pair, i]
    return tracked_depth(
        manifolds.depth[pair, i],
        normal,
        apart,
        turn_a_since,
        turn_b_since,
        ra,
        rb,
        cross(ra, normal),
        cross(rb, normal),
    )


@ti.func
def tracked_depth(
    found_depth, normal, apart, turn_a_since, turn_b_since, ra, rb, ra_cross_normal, rb_cross_normal
):
    """moved_depth from its parts: the depth found (m), moved_since's answer, the point's
    arms and their r x n (where the caller has them)."""
    return found_depth - (
        apart
        + turned_along(turn_b_since, rb, rb_cross_normal, normal)
        - turned_along(turn_a_since, ra, ra_cross_normal, normal)
    )


@ti.func
def resolve_penetration(
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    pair,
    n_bodies,
    h,
    jacobi_entry,
):
    """XPBD position correction of each point deeper than the slop (seed 000).

    lambda = (d - slop) / (n_points K), K = w_a + w_b + I_a (r_a x n)^2 + I_b (r_b x n)^2
    + compliance / h^2; pose and previous pose move together, so no velocity is created.
    Both points of a manifold are corrected from the same poses (the seed's division by
    the point count): one after the other would tilt a box resting on two corners.
    A substep pushes out at most MAX_PUSHOUT_SPEED * h: deep overlap (bodies created inside
    each other, a contact found late) comes apart over several substeps instead of shooting
    a body through a wall.

    jacobi_entry >= 0 (an overflow pair, solver/overflow.py): the bodies are left alone and
    the corrections go to prepared.jacobi_delta[jacobi_entry] (a) and [jacobi_entry + 1] (b).
    """
    count = manifolds.point_count[pair]
    if count > 0:
        slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
        wa, ia, wb, ib = pair_masses(prepared, pair)
        normal = manifolds.normal[pair]
        delta_a, angle_a = bodies.delta_position[slot_a], bodies.delta_angle[slot_a]
        delta_b, angle_b = bodies.delta_position[slot_b], bodies.delta_angle[slot_b]
        shift_a, turn_a = vec2(0.0, 0.0), 0.0
        shift_b, turn_b = vec2(0.0, 0.0), 0.0
        slop = prepared.slop[pair]
        for i in ti.static(range(2)):
            if i < count:
                depth = moved_depth(
                    manifolds, prepared, pair, i, delta_a, angle_a, delta_b, angle_b
                )
                if depth > slop:
                    ra, rb = prepared.arm_a[pair, i], prepared.arm_b[pair, i]
                    rna, rnb = cross(ra, normal), cross(rb, normal)
                    k = wa + wb + ia * rna * rna + ib * rnb * rnb + CONTACT_COMPLIANCE / (h * h)
                    correction = ti.min(depth - slop, MAX_PUSHOUT_SPEED * h)
                    lam = correction / (count * k)
                    shift_a -= wa * lam * normal
                    turn_a -= ia * lam * rna
                    shift_b += wb * lam * normal
                    turn_b += ib * lam * rnb
        if jacobi_entry >= 0:
            prepared.jacobi_delta[jacobi_entry] = vec3(shift_a, turn_a)
            prepared.jacobi_delta[jacobi_entry + 1] = vec3(shift_b, turn_b)
        else:
            if wa > 0.0 or ia > 0.0:
                shift_body(bodies, slot_a, shift_a, turn_a)
            if wb > 0.0 or ib > 0.0:
                shift_body(bodies, slot_b, shift_b, turn_b)


@ti.func
def shift_body(bodies: ti.template(), slot, shift, turn):
    """Move a body's pose and previous pose together by shift (m) and turn (rad): a contact's
    position correction creates no velocity."""
    displace(bodies, slot, shift, turn)
    # Not `+=`: that is an atomic add in a parallel loop (see warm_start_body).
    bodies.prev_delta_position[slot] = bodies.prev_delta_position[slot] + shift
    bodies.prev_delta_angle[slot] = bodies.prev_delta_angle[slot] + turn


@ti.func
def rests_on(support_upper, support_lower):
    """Whether a body of support count support_upper (BodyState.support, last step's) rests
    on one of support_lower: the lower is nearer an immovable body."""
    return support_lower != UNSUPPORTED and (
        support_upper == UNSUPPORTED or support_lower < support_upper
    )


@ti.func
def prepare_pair(
    model: ti.template(),
    bodies: ti.template(),
    prepared: ti.template(),
    pair,
    slot_a,
    slot_b,
    n_bodies,
):
    """Per-step constants of a pair (sleep flags only change between steps): the bodies'
    inverse masses as the solver sees them, into prepared.solver_mass, the mixed restitution
    (the scene's restitution_mixing, mix) and the slop; returns the smaller bounding radius
    (m)."""
    wa, ia = solver_mass(model, bodies, slot_a, slot_a % n_bodies)
    wb, ib = solver_mass(model, bodies, slot_b, slot_b % n_bodies)
    body_a, body_b = slot_a % n_bodies, slot_b % n_bodies
    held = -1
    if model.sensor[body_a] == 1 or model.sensor[body_b] == 1:
        wa, ia, wb, ib = 0.0, 0.0, 0.0, 0.0  # a sensor pair moves nothing
    elif model.uneven[slot_a // n_bodies] == 1:
        held = 0
        if (wa > 0.0 or ia > 0.0) and (wb > 0.0 or ib > 0.0):
            support_a, support_b = bodies.support[slot_a], bodies.support[slot_b]
            if rests_on(support_b, support_a) and wa > SHOCK_RATIO * wb:
                wa, ia, held = 0.0, 0.0, 1
            elif rests_on(support_a, support_b) and wb > SHOCK_RATIO * wa:
                wb, ib, held = 0.0, 0.0, 2
    prepared.held[pair] = held
    prepared.solver_mass[pair] = ti.math.vec4(wa, ia, wb, ib)
    prepared.restitution[pair] = mix(
        model.elasticity[material_row(model, slot_a, body_a)],
        model.elasticity[material_row(model, slot_b, body_b)],
        model.restitution_mixing[None],
    )
    smallest = smaller_radius(model, slot_a, body_a, slot_b, body_b)
    prepared.slop[pair] = pair_slop(smallest)
    return smallest


@ti.func
def smaller_radius(model: ti.template(), slot_a, body_a, slot_b, body_b):
    """The smaller bounding radius of the pair's bodies (m): slots slot_a and slot_b, of
    model rows body_a and body_b."""
    return ti.min(bounding_radius(model, slot_a, body_a), bounding_radius(model, slot_b, body_b))


@ti.func
def pair_slop(smallest):
    """The pair's slop (m) from its smaller bounding radius (see LINEAR_SLOP)."""
    return ti.min(LINEAR_SLOP, SLOP_FRACTION * smallest)


@ti.func
def mix(value_a, value_b, rule):
    """A pair's coefficient (friction or restitution) from its bodies' two by `rule`, an
    enums.MIX_* code (BodyModel.friction_mixing, restitution_mixing: the scene's, the same
    for both solvers): the smaller (MIX_MIN, Fx2D's rule, seed 000, the default), the
    larger (MIX_MAX, Box2D's restitution), sqrt(a b) (MIX_GEOMETRIC_MEAN, Box2D's friction),
    (a + b) / 2 (MIX_AVERAGE) or a b (MIX_PRODUCT, pymunk's)."""
    result = ti.min(value_a, value_b)
    if rule == MIX_MAX:
        result = ti.max(value_a, value_b)
    elif rule == MIX_GEOMETRIC_MEAN:
        result = ti.sqrt(value_a * value_b)
    elif rule == MIX_AVERAGE:
        result = 0.5 * (value_a + value_b)
    elif rule == MIX_PRODUCT:
        result = value_a * value_b
    return result


@ti.func
def mixed_friction(model: ti.template(), slot_a, slot_b, n_bodies):
    """The (static, kinetic) friction coefficients of a pair of body slots, each mixed by
    the scene's friction_mixing (mix)."""
    row_a = material_row(model, slot_a, slot_a % n_bodies)
    row_b = material_row(model, slot_b, slot_b % n_bodies)
    rule = model.friction_mixing[None]
    return (
        mix(model.static_friction[row_a], model.static_friction[row_b], rule),
        mix(model.dynamic_friction[row_a], model.dynamic_friction[row_b], rule),
    )


@ti.func
def prepare_point(manifolds: ti.template(), prepared: ti.template(), pair, i, ra, rb):
    """Per-step constants of a point for the solver (Box2D's prepare stage): lever arms and
    the inverse effective masses along the normal and the tangent (after prepare_pair)."""
    wa, ia, wb, ib = pair_masses(prepared, pair)
    normal = manifolds.normal[pair]
    tangent = tangent_of(normal)
    prepared.arm_a[pair, i] = ra
    prepared.arm_b[pair, i] = rb
    rna, rnb = cross(ra, normal), cross(rb, normal)
    rta, rtb = cross(ra, tangent), cross(rb, tangent)
    k_normal = wa + wb + ia * rna * rna + ib * rnb * rnb
    k_tangent = wa + wb + ia * rta * rta + ib * rtb * rtb
    prepared.normal_mass[pair, i] = 1.0 / k_normal if k_normal > 0.0 else 0.0
    prepared.tangent_mass[pair, i] = 1.0 / k_tangent if k_tangent > 0.0 else 0.0


@ti.func
def point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra, rb):
    """Velocity (m/s) of b's material point at rb relative to a's at ra."""
    return velocity_b + cross_sv(spin_b, rb) - velocity_a - cross_sv(spin_a, ra)


@ti.func
def relative_velocity(bodies: ti.template(), slot_a, slot_b, ra, rb):
    return point_velocity(
        bodies.velocity[slot_a],
        bodies.angular_velocity[slot_a],
        bodies.velocity[slot_b],
        bodies.angular_velocity[slot_b],
        ra,
        rb,
    )


@ti.func
def exchange(velocity_a, spin_a, velocity_b, spin_b, masses, ra, rb, impulse):
    """The two bodies' velocities after an equal and opposite impulse (N s): -impulse on a
    at ra, +impulse on b at rb; masses = (w_a, I_a, w_b, I_b)."""
    return (
        velocity_a - masses[0] * impulse,
        spin_a - masses[1] * cross(ra, impulse),
        velocity_b + masses[2] * impulse,
        spin_b + masses[3] * cross(rb, impulse),
    )


@ti.func
def exchange_normal(
    velocity_a, spin_a, velocity_b, spin_b, masses, ra0, rb0, ra1, rb1, normal, change
):
    """exchange of both points of a 2-point manifold along `normal`, the first point's
    then the second's: normal impulses change[0] at (ra0, rb0) and change[1] at (ra1, rb1),
    N s."""
    velocity_a, spin_a, velocity_b, spin_b = exchange(
        velocity_a, spin_a, velocity_b, spin_b, masses, ra0, rb0, change[0] * normal
    )
    return exchange(velocity_a, spin_a, velocity_b, spin_b, masses, ra1, rb1, change[1] * normal)


@ti.func
def lever_arms(prepared: ti.template(), pair, count):
    """The pair's points' lever arms r_a, r_b (m, from each body's centre; fixed for the
    step): two 2 x 2 matrices, row i = point i (0 past `count`)."""
    arm_a = ti.Matrix.zero(ti.f32, 2, 2)
    arm_b = ti.Matrix.zero(ti.f32, 2, 2)
    for i in ti.static(range(2)):
        if i < count:
            ra, rb = prepared.arm_a[pair, i], prepared.arm_b[pair, i]
            arm_a[i, 0], arm_a[i, 1] = ra.x, ra.y
            arm_b[i, 0], arm_b[i, 1] = rb.x, rb.y
    return arm_a, arm_b


@ti.func
def row_arms(arm_a, arm_b, normal, tangent):
    """(r_a x n, r_b x n, r_a x t, r_b x t) of a pair's points (vec2 each, a component a
    point), m: how much each body turns a row's impulse into torque; arm_a, arm_b as
    lever_arms gives them."""
    arm_na, arm_nb, arm_ta, arm_tb = vec2(0.0), vec2(0.0), vec2(0.0), vec2(0.0)
    for i in ti.static(range(2)):
        ra, rb = vec2(arm_a[i, 0], arm_a[i, 1]), vec2(arm_b[i, 0], arm_b[i, 1])
        arm_na[i], arm_nb[i] = cross(ra, normal), cross(rb, normal)
        arm_ta[i], arm_tb[i] = cross(ra, tangent), cross(rb, tangent)
    return arm_na, arm_nb, arm_ta, arm_tb


@ti.func
def row_coupling(masses, same_direction: ti.template(), arm_a_j, arm_b_j, arm_a_k, arm_b_k):
    """How much an impulse of 1 N s on row j changes row k's relative velocity, m/s (the
    off-diagonal entry K_kj of the rows' effective-mass matrix): w_a + w_b where both rows
    push along one direction (0 for a normal and a tangent), plus
    I_a (r_aj x d_j)(r_ak x d_k) + I_b (r_bj x d_j)(r_bk x d_k); masses = (w_a, I_a, w_b,
    I_b), the arms as row_arms gives them."""
    linear = 0.0
    if ti.static(same_direction):
        linear = masses[0] + masses[2]
    return linear + masses[1] * arm_a_j * arm_a_k + masses[3] * arm_b_j * arm_b_k


@ti.func
def take_row_impulses(
    velocity_a,
    spin_a,
    velocity_b,
    spin_b,
    masses,
    normal,
    tangent,
    change_n,
    change_t,
    arm_na,
    arm_nb,
    arm_ta,
    arm_tb,
):
    """The bodies' velocities after a manifold's row impulses of one sweep (N s, a
    component a point: change_n along the normal, change_t along the tangent), -impulse on
    a, +impulse on b; masses = (w_a, I_a, w_b, I_b), the arms as row_arms gives them."""
    linear = (change_n[0] + change_n[1]) * normal + (change_t[0] + change_t[1]) * tangent
    return (
        velocity_a - masses[0] * linear,
        spin_a - masses[1] * (change_n.dot(arm_na) + change_t.dot(arm_ta)),
        velocity_b + masses[2] * linear,
        spin_b + masses[3] * (change_n.dot(arm_nb) + change_t.dot(arm_tb)),
    )


#: The block solver is used while its 2x2 matrix is this well conditioned (Box2D's bound);
#: two nearly coincident points fall back to one point after the other.
MAX_CONDITION_NUMBER = 1000.0
#: Manifolds whose bodies' inverse masses differ by more than this factor (a static body
#: included) use the block solver (see solve_velocity). At 10, a 1:10:100 stack kept awake
#: (sleep islands) let the 10 kg box sink through the 1 kg one.
BLOCK_MASS_RATIO = 2.0


@ti.func
def normal_block(masses, normal, ra0, rb0, ra1, rb1):
    """(K_11, K_12, K_22) of a 2-point manifold's normal rows, masses = (w_a, I_a, w_b,
    I_b): K_ij = w_a + w_b + I_a (r_ai x n)(r_aj x n) + I_b (r_bi x n)(r_bj x n)."""
    wa, ia, wb, ib = masses[0], masses[1], masses[2], masses[3]
    rna0, rnb0 = cross(ra0, normal), cross(rb0, normal)
    rna1, rnb1 = cross(ra1, normal), cross(rb1, normal)
    k11 = wa + wb + ia * rna0 * rna0 + ib * rnb0 * rnb0
    k22 = wa + wb + ia * rna1 * rna1 + ib * rnb1 * rnb1
    k12 = wa + wb + ia * rna0 * rna1 + ib * rnb0 * rnb1
    return k11, k12, k22


@ti.func
def block_normal_impulses(masses, normal, ra0, rb0, ra1, rb1, vn0, vn1, target, old):
    """New accumulated normal impulses (x0, x1) of a 2-point manifold, solved together.

    Finds x >= 0 with K (x - old) + vn - target >= 0 and complementarity (the 2x2 linear
    complementarity problem, by trying its four cases: both points push, only the first,
    only the second, neither). K_ij = w_a + w_b + I_a (r_ai x n)(r_aj x n)
    + I_b (r_bi x n)(r_bj x n); vn: normal relative velocities now, m/s; target: the
    normal velocities each point should reach (0 touching, gap / h apart).
    Returns (x, solved); solved is False when K is ill-conditioned or no case fits.
    """
    k11, k12, k22 = normal_block(masses, normal, ra0, rb0, ra1, rb1)
    det = k11 * k22 - k12 * k12
    x = old
    solved = False
    if k11 > 0.0 and k22 > 0.0 and k11 * k11 < MAX_CONDITION_NUMBER * det:
        # vn_new - target = K x + b
        b0 = vn0 - target[0] - (k11 * old[0] + k12 * old[1])
        b1 = vn1 - target[1] - (k12 * old[0] + k22 * old[1])
        # Both push: x = -K^-1 b.
        x0 = -(k22 * b0 - k12 * b1) / det
        x1 = -(k11 * b1 - k12 * b0) / det
        if x0 >= 0.0 and x1 >= 0.0:
            x, solved = vec2(x0, x1), True
        else:
            x0 = -b0 / k11  # the first alone
            if x0 >= 0.0 and k12 * x0 + b1 >= 0.0:
                x, solved = vec2(x0, 0.0), True
            else:
                x1 = -b1 / k22  # the second alone
                if x1 >= 0.0 and k12 * x1 + b0 >= 0.0:
                    x, solved = vec2(0.0, x1), True
                elif b0 >= 0.0 and b1 >= 0.0:  # neither
                    x, solved = vec2(0.0, 0.0), True
    return x, solved


@ti.func
def solve_velocity(
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    pair,
    n_bodies,
    h,
    jacobi_entry,
):
    """Normal impulses (accumulated, >= 0), Coulomb friction (mu_s while the point sticks,
    mu_k once it slides), then restitution for points that closed faster than
    RESTITUTION_THRESHOLD when the pass began and had to be pushed apart.

    Speculative points (still apart) only stop the bodies from closing more than the gap.
    The accumulated impulses are kept for the next substep's warm start (restitution is not:
    re-applying a bounce would bounce twice). The two bodies' velocities and the points'
    impulses live in registers for the whole solve (read once, written once): this pass is
    the hot loop of a step.

    jacobi_entry >= 0 (an overflow pair, solver/overflow.py): the bodies are left alone and
    the velocity changes go to prepared.jacobi_delta[jacobi_entry] (a) and [jacobi_entry + 1]
    (b). jacobi_entry == REPEAT_SOLVE: the pair's second solve in this pass (the sweep over
    contacts with an immovable body, IMMOVABLE_SWEEP_RATIO): the impulses it reports for the
    substep replace the first solve's.
    """
    count = manifolds.point_count[pair]
    if count > 0:
        slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
        masses = prepared.solver_mass[pair]
        normal = manifolds.normal[pair]
        velocity_a, spin_a = bodies.velocity[slot_a], bodies.angular_velocity[slot_a]
        velocity_b, spin_b = bodies.velocity[slot_b], bodies.angular_velocity[slot_b]
        (
            arm_a,
            arm_b,
            target,
            normal_mass,
            tangent_mass,
            normal_impulse,
            tangent_impulse,
            friction,
            touched,
            held,
        ) = _velocity_rows(bodies, manifolds, prepared, pair, count, h)
        # Each point's normal velocity before this pass, for restitution (_bounce).
        approach, carried, carried_tangent = vec2(0.0), normal_impulse, tangent_impulse
        for i in ti.static(range(2)):
            if i < count:
                approach[i] = point_velocity(
                    velocity_a,
                    spin_a,
                    velocity_b,
                    spin_b,
                    vec2(arm_a[i, 0], arm_a[i, 1]),
                    vec2(arm_b[i, 0], arm_b[i, 1]),
                ).dot(normal)
        # IMMOVABLE_ITERATIONS for a manifold with an immovable body: a runtime loop, the
        # solve inlined once (it is most of a kernel's compile time).
        iterations = (
            IMMOVABLE_ITERATIONS if against_immovable(prepared, pair) else VELOCITY_ITERATIONS
        )
        for _ in range(iterations):
            (velocity_a, spin_a, velocity_b, spin_b, normal_impulse, tangent_impulse) = (
                _sweep_points(
                    velocity_a,
                    spin_a,
                    velocity_b,
                    spin_b,
                    masses,
                    normal,
                    arm_a,
                    arm_b,
                    target,
                    normal_mass,
                    tangent_mass,
                    friction,
                    normal_impulse,
                    tangent_impulse,
                    count,
                    prepared.slop[pair],
                )
            )
        # What the points applied in this substep: a bounce's point keeps less for the next
        # substep's warm start (_bounce), but it did apply this.
        applied = normal_impulse
        bounce = vec2(0.0)
        restitution = prepared.restitution[pair]
        if restitution > 0.0:
            (velocity_a, spin_a, velocity_b, spin_b, normal_impulse, tangent_impulse, bounce) = (
                _bounce(
                    prepared,
                    pair,
                    velocity_a,
                    spin_a,
                    velocity_b,
                    spin_b,
                    masses,
                    normal,
                    arm_a,
                    arm_b,
                    normal_mass,
                    friction,
                    normal_impulse,
                    tangent_impulse,
                    approach,
                    carried,
                    restitution,
                    count,
                )
            )
        if _store_impulses(
            manifolds,
            pair,
            count,
            normal_impulse,
            tangent_impulse,
            applied,
            bounce,
            carried,
            carried_tangent,
            jacobi_entry,
        ):
            touched = True
        if touched:
            manifolds.touching[pair] = TOUCHED
            if prepared.held[pair] >= 0 and jacobi_entry < 0:
                count_support(bodies, prepared, pair, slot_a, slot_b, masses)
        elif held and manifolds.touching[pair] == 0:  # TOUCHED in an earlier substep stays
            manifolds.touching[pair] = HELD
        store_velocities(
            bodies,
            prepared,
            slot_a,
            slot_b,
            masses,
            velocity_a,
            spin_a,
            velocity_b,
            spin_b,
            jacobi_entry,
        )


@ti.func
def store_velocities(
    bodies: ti.template(),
    prepared: ti.template(),
    slot_a,
    slot_b,
    masses,
    velocity_a,
    spin_a,
    velocity_b,
    spin_b,
    jacobi_entry,
):
    """A pair's bodies take their new velocities (those that move), or (jacobi_entry >=
    0, an overflow pair, solver/overflow.py) the changes go to prepared.jacobi_delta."""
    if jacobi_entry >= 0:
        prepared.jacobi_delta[jacobi_entry] = vec3(
            velocity_a - bodies.velocity[slot_a], spin_a - bodies.angular_velocity[slot_a]
        )
        prepared.jacobi_delta[jacobi_entry + 1] = vec3(
            velocity_b - bodies.velocity[slot_b], spin_b - bodies.angular_velocity[slot_b]
        )
    else:
        if masses[0] > 0.0 or masses[1] > 0.0:
            bodies.velocity[slot_a] = velocity_a
            bodies.angular_velocity[slot_a] = spin_a
        if masses[2] > 0.0 or masses[3] > 0.0:
            bodies.velocity[slot_b] = velocity_b
            bodies.angular_velocity[slot_b] = spin_b


@ti.func
def count_support(bodies: ti.template(), prepared: ti.template(), pair, slot_a, slot_b, masses):
    """A pushing contact of a world of uneven masses passes on support (BodyState.support):
    a body touching an immovable one is 1 contact from it, one touching that 2, ... (the
    smallest count over the step's velocity passes). Its own thread owns both bodies (the
    colouring); overflow pairs (Jacobi, sharing bodies) pass none on."""
    held = prepared.held[pair]
    # Immovable as the solver sees it, not merely held still for this pair.
    still_a = masses[0] == 0.0 and masses[1] == 0.0 and held != 1
    still_b = masses[2] == 0.0 and masses[3] == 0.0 and held != 2
    reach_a = 0 if still_a else bodies.support[slot_a]
    reach_b = 0 if still_b else bodies.support[slot_b]
    if not still_b and (still_a or reach_a != UNSUPPORTED):
        if bodies.support[slot_b] == UNSUPPORTED or reach_a + 1 < bodies.support[slot_b]:
            bodies.support[slot_b] = reach_a + 1
    if not still_a and (still_b or reach_b != UNSUPPORTED):
        if bodies.support[slot_a] == UNSUPPORTED or reach_b + 1 < bodies.support[slot_a]:
            bodies.support[slot_a] = reach_b + 1


@ti.func
def _velocity_rows(
    bodies: ti.template(), manifolds: ti.template(), prepared: ti.template(), pair, count, h
):
    """The velocity solve's rows of `pair`'s points (row i = point i): lever arms arm_a,
    arm_b (2 x 2, m), target normal velocities (m/s: touching, stop closing; apart, close
    at most the gap in this substep), normal and tangent masses, the accumulated normal and
    tangent impulses (N s), friction coefficients; and whether a point touches or is
    held (manifolds.touching)."""
    slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
    delta_a, turn_a = bodies.delta_position[slot_a], bodies.delta_angle[slot_a]
    delta_b, turn_b = bodies.delta_position[slot_b], bodies.delta_angle[slot_b]
    touched, held = False, False
    arm_a, arm_b = lever_arms(prepared, pair, count)
    target, normal_mass, tangent_mass = vec2(0.0), vec2(0.0), vec2(0.0)
    normal_impulse, tangent_impulse = vec2(0.0), vec2(0.0)
    friction = vec2(0.0)
    for i in ti.static(range(2)):
        if i < count:
            depth = moved_depth(manifolds, prepared, pair, i, delta_a, turn_a, delta_b, turn_b)
            target[i] = ti.min(depth, 0.0) / h
            if depth > -TOUCH_FRACTION * prepared.slop[pair]:
                touched = True
            elif depth > -HOLD_FRACTION * prepared.slop[pair]:
                held = True
            normal_mass[i] = prepared.normal_mass[pair, i]
            tangent_mass[i] = prepared.tangent_mass[pair, i]
            normal_impulse[i] = manifolds.normal_impulse[pair, i]
            tangent_impulse[i] = manifolds.tangent_impulse[pair, i]
            friction[i] = prepared.friction[pair, i]
    return (
        arm_a,
        arm_b,
        target,
        normal_mass,
        tangent_mass,
        normal_impulse,
        tangent_impulse,
        friction,
        touched,
        held,
    )


@ti.func
def _sweep_points(
    velocity_a,
    spin_a,
    velocity_b,
    spin_b,
    masses,
    normal,
    arm_a,
    arm_b,
    target,
    normal_mass,
    tangent_mass,
    friction,
    normal_impulse,
    tangent_impulse,
    count,
    slop,
):
    """One Gauss-Seidel iteration over a manifold's points (rows as in _velocity_rows):
    normal impulses (the block solver where it applies), each point's friction; returns
    the bodies' velocities and the points' impulses after it.

    Where one body is heavier than the other (a static one included), both normal impulses
    of a 2-point manifold are solved at once (Box2D v2's block solver): one point after the
    other gives the first point most of the push and tilts the light body, and under a
    heavy load the tilt squeezes it out sideways (1,000 kg on 1 kg, 10 kg on 1 kg). Between
    equal bodies the points are solved one after the other, each with its friction: there
    the block solver rang through the 100 rows of the large pyramid (its top bobbed 5-14 cm
    for seconds). Small bodies (slop scaled down, below 4 cm) always get the block solver:
    the tilt one sweep leaves grows as 1 / size (0.21 rad in the first step for a 1 mm box,
    0.0002 rad for a 1 m one) and toppled stacks of 1 mm and 1 cm boxes."""
    tangent = tangent_of(normal)
    solved = False
    if count == 2 and (
        slop < LINEAR_SLOP
        or ti.max(masses[0], masses[2]) > BLOCK_MASS_RATIO * ti.min(masses[0], masses[2])
    ):
        ra0, rb0 = vec2(arm_a[0, 0], arm_a[0, 1]), vec2(arm_b[0, 0], arm_b[0, 1])
        ra1, rb1 = vec2(arm_a[1, 0], arm_a[1, 1]), vec2(arm_b[1, 0], arm_b[1, 1])
        old = normal_impulse
        new, solved = block_normal_impulses(
            masses,
            normal,
            ra0,
            rb0,
            ra1,
            rb1,
            point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra0, rb0).dot(normal),
            point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra1, rb1).dot(normal),
            target,
            old,
        )
        if solved:
            normal_impulse = new
            velocity_a, spin_a, velocity_b, spin_b = exchange_normal(
                velocity_a,
                spin_a,
                velocity_b,
                spin_b,
                masses,
                ra0,
                rb0,
                ra1,
                rb1,
                normal,
                new - old,
            )
    # Each point's normal row, then its friction row, point after point (Gauss-Seidel);
    # each row's relative velocity is carried to the later rows through their coupling
    # (row_coupling) and the bodies take the impulses once, at the end: the same sweep up
    # to rounding, with a shorter chain of dependent arithmetic, which bounds the pass
    # (awake large pyramid: 61.9 -> 55.1 ns a pair on one thread, the same saved state,
    # both compiled in one process; soft_contacts.solve_soft_contact does the same).
    arm_na, arm_nb, arm_ta, arm_tb = row_arms(arm_a, arm_b, normal, tangent)
    relative = velocity_b - velocity_a
    closing_n = relative.dot(normal) + spin_b * arm_nb - spin_a * arm_na
    closing_t = relative.dot(tangent) + spin_b * arm_tb - spin_a * arm_ta
    change_n, change_t = vec2(0.0), vec2(0.0)  # the rows' impulses in this sweep, N s
    for i in ti.static(range(2)):
        if i < count:
            if not solved:
                old_n = normal_impulse[i]
                new_n = ti.max(old_n + (target[i] - closing_n[i]) * normal_mass[i], 0.0)
                normal_impulse[i] = new_n
                change_n[i] = new_n - old_n
                closing_t[i] += change_n[i] * row_coupling(
                    masses, False, arm_na[i], arm_nb[i], arm_ta[i], arm_tb[i]
                )
                if ti.static(i == 0):
                    closing_n[1] += change_n[0] * row_coupling(
                        masses, True, arm_na[0], arm_nb[0], arm_na[1], arm_nb[1]
                    )
                    closing_t[1] += change_n[0] * row_coupling(
                        masses, False, arm_na[0], arm_nb[0], arm_ta[1], arm_tb[1]
                    )
            old_t = tangent_impulse[i]
            limit = friction[i] * normal_impulse[i]
            new_t = ti.math.clamp(old_t - closing_t[i] * tangent_mass[i], -limit, limit)
            tangent_impulse[i] = new_t
            change_t[i] = new_t - old_t
            if ti.static(i == 0):
                closing_n[1] += change_t[0] * row_coupling(
                    masses, False, arm_ta[0], arm_tb[0], arm_na[1], arm_nb[1]
                )
                closing_t[1] += change_t[0] * row_coupling(
                    masses, True, arm_ta[0], arm_tb[0], arm_ta[1], arm_tb[1]
                )
    velocity_a, spin_a, velocity_b, spin_b = take_row_impulses(
        velocity_a,
        spin_a,
        velocity_b,
        spin_b,
        masses,
        normal,
        tangent,
        change_n,
        change_t,
        arm_na,
        arm_nb,
        arm_ta,
        arm_tb,
    )
    return velocity_a, spin_a, velocity_b, spin_b, normal_impulse, tangent_impulse


@ti.func
def _bounce(
    prepared: ti.template(),
    pair,
    velocity_a,
    spin_a,
    velocity_b,
    spin_b,
    masses,
    normal,
    arm_a,
    arm_b,
    normal_mass,
    friction,
    normal_impulse,
    tangent_impulse,
    approach,
    carried,
    restitution,
    count,
):
    """Restitution in the substep where the impact happens (seed 000: per substep, on the
    normal velocity before the solve, `approach`), at most once per point and step
    (prepared.bounced); returns the velocities and impulses after it, and each point's
    bounce impulse (N s). A step-level bounce (Box2D v3, on the speed when the step began)
    misses impacts passed on within the step: a ball hitting a resting row of balls starts
    it with approach speed 0."""
    bounce = vec2(0.0)
    bounces = ti.Vector([0, 0])
    for i in ti.static(range(2)):
        if (
            i < count
            and approach[i] < -RESTITUTION_THRESHOLD
            and normal_impulse[i] > 0.0
            and prepared.bounced[pair, i] == 0
        ):
            bounces[i] = 1
    # Both points of a manifold bounce together (the block solver with the bounce
    # velocities as targets): one after the other, the first point's bounce turns the body
    # and the second's undoes the first's lift. That mattered little while points bounced
    # only once they touched (their normal velocity already ~0), but a speculative point
    # stops the approach a substep before the bodies meet, from the full speed: a 1 m box
    # landing flat at 40 m/s left at -1 m/s, spinning, instead of at e * 40 = 4 m/s.
    paired = False
    if count == 2 and bounces[0] == 1 and bounces[1] == 1:
        ra0, rb0 = vec2(arm_a[0, 0], arm_a[0, 1]), vec2(arm_b[0, 0], arm_b[0, 1])
        ra1, rb1 = vec2(arm_a[1, 0], arm_a[1, 1]), vec2(arm_b[1, 0], arm_b[1, 1])
        both, paired = block_normal_impulses(
            masses,
            normal,
            ra0,
            rb0,
            ra1,
            rb1,
            point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra0, rb0).dot(normal),
            point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra1, rb1).dot(normal),
            -restitution * approach,
            vec2(0.0),
        )
        if paired:
            bounce = both
            velocity_a, spin_a, velocity_b, spin_b = exchange_normal(
                velocity_a, spin_a, velocity_b, spin_b, masses, ra0, rb0, ra1, rb1, normal, both
            )
    for i in ti.static(range(2)):
        if bounces[i] == 1:
            ra, rb = vec2(arm_a[i, 0], arm_a[i, 1]), vec2(arm_b[i, 0], arm_b[i, 1])
            vn = point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra, rb).dot(normal)
            if not paired and vn < -restitution * approach[i]:
                bounce[i] = (-restitution * approach[i] - vn) * normal_mass[i]
                velocity_a, spin_a, velocity_b, spin_b = exchange(
                    velocity_a, spin_a, velocity_b, spin_b, masses, ra, rb, bounce[i] * normal
                )
            # A bounce is a one-off: warm starting the impulse that stopped the impact (or
            # the bounce) would push again next substep; only the load the point carried
            # into the substep is kept.
            normal_impulse[i] = ti.min(normal_impulse[i], carried[i])
            limit = friction[i] * normal_impulse[i]
            tangent_impulse[i] = ti.math.clamp(tangent_impulse[i], -limit, limit)
            prepared.bounced[pair, i] = 1
    return velocity_a, spin_a, velocity_b, spin_b, normal_impulse, tangent_impulse, bounce


@ti.func
def _store_impulses(
    manifolds: ti.template(),
    pair,
    count,
    normal_impulse,
    tangent_impulse,
    applied,
    bounce,
    carried,
    carried_tangent,
    jacobi_entry,
):
    """The points' accumulated impulses kept for the next substep's warm start, and what
    they applied in this substep added to the step's totals (the warm start included; a
    repeated solve, REPEAT_SOLVE, replaces what the first one added). Returns whether a
    point pushed or bounced: a bounce touches (a speculative point bounces its bodies apart
    a substep before they meet, and the landing's whole impulse would go unreported)."""
    touched = False
    for i in ti.static(range(2)):
        if i < count:
            manifolds.normal_impulse[pair, i] = normal_impulse[i]
            manifolds.tangent_impulse[pair, i] = tangent_impulse[i]
            # Not `+=` (an atomic add, see warm_start_body): one thread owns the pair.
            carried_n, carried_t = 0.0, 0.0
            if jacobi_entry == REPEAT_SOLVE:
                carried_n, carried_t = carried[i], carried_tangent[i]
            manifolds.total_normal_impulse[pair, i] = (
                manifolds.total_normal_impulse[pair, i] + applied[i] + bounce[i] - carried_n
            )
            manifolds.total_tangent_impulse[pair, i] = (
                manifolds.total_tangent_impulse[pair, i] + tangent_impulse[i] - carried_t
            )
            if normal_impulse[i] > 0.0 or bounce[i] > 0.0:
                touched = True
    return touched


@ti.func
def turning_speed(model: ti.template(), bodies: ti.template(), slot, n_bodies):
    """Fastest a point of the body moves about its centre, m/s."""
    return ti.abs(bodies.angular_velocity[slot]) * bounding_radius(model, slot, slot % n_bodies)


@ti.func
def closing_speed(v_a, v_b, e_a, e_b):
    """Fastest (m/s) two bodies of velocities v_a, v_b (m/s) can close on each other if
    each keeps its velocity, or is stopped or deflected by one impact with anything else of
    restitution at most e_a (e_b) (a pair's restitution is the smaller elasticity).

    An impact takes v to v - (1 + e)(v.m)m for the surface normal m: as m turns, that is the
    circle of centre (1 - e) v / 2 and radius (1 + e)|v| / 2 (m across v leaves v as it
    is; a stop lies inside). Two points of the two circles are at most
    |(1 - e_a) v_a - (1 - e_b) v_b| / 2 + ((1 + e_a)|v_a| + (1 + e_b)|v_b|) / 2 apart. With
    e = 1 that is |v_a| + |v_b|; bodies falling side by side (elasticity 0.1) get
    1.1 |v|, not 2 |v|."""
    return 0.5 * ((1.0 - e_a) * v_a - (1.0 - e_b) * v_b).norm() + 0.5 * (
        (1.0 + e_a) * v_a.norm() + (1.0 + e_b) * v_b.norm()
    )


@ti.func
def closing_bound(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    slot_a,
    slot_b,
    n_bodies,
    time,
):
    """How far (m) bodies a and b can close on each other in `time` (s): closing_speed plus
    both bodies' turning speeds in full. A body with joints may be swung anywhere at its
    speed (e = 1 for it: a hub's spokes found each other late and flew apart). Against the
    sum of the two speeds this took the solved pairs of a poured pile of 100k bodies from
    322k to 223k (speculative points far apart, solved every substep), the step from 457
    to 366 ms (2-core CPU)."""
    body_a, body_b = slot_a % n_bodies, slot_b % n_bodies
    e_a = (
        1.0
        if joints.body_has_joint[body_a]
        else model.elasticity[material_row(model, slot_a, body_a)]
    )
    e_b = (
        1.0
        if joints.body_has_joint[body_b]
        else model.elasticity[material_row(model, slot_b, body_b)]
    )
    speed = (
        closing_speed(bodies.velocity[slot_a], bodies.velocity[slot_b], e_a, e_b)
        + turning_speed(model, bodies, slot_a, n_bodies)
        + turning_speed(model, bodies, slot_b, n_bodies)
    )
    return time * speed


@ti.func
def relative_motion_bound(
    model: ti.template(), bodies: ti.template(), slot_a, slot_b, n_bodies, time
):
    """How far (m) a point of body a can move relative to body b in `time` (s) at their
    current speeds (their centres' relative motion plus both bodies' turning)."""
    return time * (
        (bodies.velocity[slot_a] - bodies.velocity[slot_b]).norm()
        + turning_speed(model, bodies, slot_a, n_bodies)
        + turning_speed(model, bodies, slot_b, n_bodies)
    )


@ti.func
def fast_pair(
    model: ti.template(), bodies: ti.template(), manifolds: ti.template(), pair, n_bodies, dt
):
    """Whether `pair` is fast this step (its narrow phase runs again every substep): its
    bodies can move against each other by more than FAST_MOTION_FRACTION of the smaller
    one's size in the step (dt, s), or it has a sensor, which is looked at exactly (no
    margin) every substep, as it reports overlaps."""
    slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
    smallest = smaller_radius(model, slot_a, slot_a % n_bodies, slot_b, slot_b % n_bodies)
    relative = relative_motion_bound(model, bodies, slot_a, slot_b, n_bodies, dt)
    return relative > FAST_MOTION_FRACTION * smallest or is_sensor_pair(
        model, manifolds, pair, n_bodies
    )


@ti.func
def acceleration(model: ti.template(), bodies: ti.template(), slot, body, n_bodies):
    """Body slot's acceleration from its world's gravity and its applied force, m/s^2 (0 if
    it does not move)."""
    result = vec2(0.0, 0.0)
    if moves(model, bodies, slot, body):
        row = material_row(model, slot, body)
        result = (
            world_gravity(model, slot, n_bodies) * model.gravity_scale[row]
            + bodies.force[slot] * model.inv_mass[row]
        )
    return result


@ti.func
def sweep_reaches(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    slot_a,
    slot_b,
    n_bodies,
    window,
    slack,
):
    """Whether bodies a and b can come within slack (m) of each other in the next `window`
    (s) on their present motion (velocities, gravity, applied forces): the smaller body's
    bounding circle swept along the relative motion, against the other's shape on two
    axes, along the motion and across it (a separating axis of the swept shapes proves
    they cannot meet). The other's turning is added to the slack. Bodies with joints are
    swung by them, so they always may.

    Speculative points of a pair that cannot meet are ghosts: built with the normal of the
    closest features, such a point reads a fast fly-by as closing along a slanted normal
    and throws bodies that the flier never comes near (a 0.25 m ball 3.75 m above a row of
    boxes at 3,000 m/s threw them at 1,116 m/s).

    Chain links always may: a link's points have its face normal wherever its neighbour
    continues it (shapes.chain), so they stand for the terrain's surface beyond the link's
    end, where the swept body will meet the neighbour. A bullet slanting onto a straight
    chain is in front of the next link while still above this one's end, where this link
    has no point (its end's cone forbids the corner's normal): without the neighbour's
    point it was first seen within one substep and passed through (3,000 m/s).
    """
    body_a, body_b = slot_a % n_bodies, slot_b % n_bodies
    reaches = True
    if not (
        joints.body_has_joint[body_a]
        or joints.body_has_joint[body_b]
        or model.shape_kind[body_a] == SHAPE_CHAIN
        or model.shape_kind[body_b] == SHAPE_CHAIN
    ):
        mover, other, mover_body, other_body = slot_a, slot_b, body_a, body_b
        if bounding_radius(model, slot_b, body_b) < bounding_radius(model, slot_a, body_a):
            mover, other, mover_body, other_body = slot_b, slot_a, body_b, body_a
        relative_acceleration = acceleration(
            model, bodies, mover, mover_body, n_bodies
        ) - acceleration(model, bodies, other, other_body, n_bodies)
        # The parabola's chord; the parabola strays from it by at most a T^2 / 8.
        motion = (
            bodies.velocity[mover] - bodies.velocity[other]
        ) * window + 0.5 * window * window * relative_acceleration
        grow = (
            slack
            + 0.125 * window * window * relative_acceleration.norm()
            + turning_speed(model, bodies, other, n_bodies) * window
        )
        length = motion.norm()
        radius = bounding_radius(model, mover, mover_body) + grow
        if length > radius:  # shorter: the swept circle is nearly the circle
            along = motion / length
            across = vec2(-along.y, along.x)
            centre = bodies.position[mover]
            low_across, high_across = shape_extent(model, bodies, other, other_body, across)
            low_along, high_along = shape_extent(model, bodies, other, other_body, along)
            centre_across, centre_along = centre.dot(across), centre.dot(along)
            reaches = not (
                centre_across - radius > high_across
                or centre_across + radius < low_across
                or centre_along - radius > high_along
                or centre_along + length + radius < low_along
            )
    return reaches


@ti.func
def narrow_margin(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    pair,
    n_bodies,
    dt,
    h,
    first,
):
    """(kept_apart m, fast) of a narrow phase of `pair`: points up to kept_apart apart are
    kept. In the step's first narrow phase (`first`) the pair is found fast or not
    (fast_pair): a fast pair's margin covers one substep's motion, a slow one's the whole
    step's (see find_manifold); the later ones are of fast pairs only (fast is returned
    True)."""
    slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
    smallest = smaller_radius(model, slot_a, slot_a % n_bodies, slot_b, slot_b % n_bodies)
    sensor = is_sensor_pair(model, manifolds, pair, n_bodies)
    fast = True
    if first:
        fast = fast_pair(model, bodies, manifolds, pair, n_bodies, dt)
    margin = closing_bound(
        model, bodies, joints, slot_a, slot_b, n_bodies, FAST_MARGIN_SUBSTEPS * h if fast else dt
    )
    kept_apart = SPECULATIVE_SLOPS * pair_slop(smallest) + margin
    if sensor:
        kept_apart = 0.0
    return kept_apart, fast


@ti.func
def find_manifold(
    model: ti.template(),
    bodies: ti.template(),
    joints: ti.template(),
    manifolds: ti.template(),
    pair,
    n_bodies,
    dt,
    h,
    first,
):
    """Narrow phase of `pair` at the current poses, carrying the impulses of points with
    the same feature id as before; returns (whether the solver must look at the pair this
    step: it has points or is fast, each new point's match among the old ones or -1).

    The step's first (`first`) runs before the colouring (step.begin_step), so only pairs
    with points take a colour; with it, a pair whose bodies can move against each other by
    less than FAST_MOTION_FRACTION of the smaller one's size in the step keeps that
    manifold for the whole step (each point's depth tracked through the bodies' rigid
    motion, as Box2D v3 does): its margin covers the step's motion. Faster pairs
    (prepared.refresh) run it again every substep with a margin that covers one substep, so
    a fast body's contacts follow its true geometry: points tracked over a whole step would
    slide off their faces and turn fast tangential motion into false, deep penetrations.
    Bodies moving together (a falling pile) are slow, whatever their speed: in a 100k pile
    in free fall, refreshing them every substep was 60 % of the step. The margin is not
    their relative motion alone: bodies falling side by side can close the gap once one of
    them is stopped or deflected by something else (closing_bound).
    """
    old_count = manifolds.point_count[pair]
    old_feature = ti.Vector([manifolds.feature[pair, 0], manifolds.feature[pair, 1]])
    old_normal = ti.Vector([manifolds.normal_impulse[pair, 0], manifolds.normal_impulse[pair, 1]])
    old_tangent = ti.Vector(
        [manifolds.tangent_impulse[pair, 0], manifolds.tangent_impulse[pair, 1]]
    )
    old_total_normal = ti.Vector(
        [manifolds.total_normal_impulse[pair, 0], manifolds.total_normal_impulse[pair, 1]]
    )
    old_total_tangent = ti.Vector(
        [manifolds.total_tangent_impulse[pair, 0], manifolds.total_tangent_impulse[pair, 1]]
    )
    kept_apart, fast = narrow_margin(model, bodies, joints, manifolds, pair, n_bodies, dt, h, first)
    if first:
        manifolds.touching[pair] = 0
    keepable = first and not fast and keeps_manifold(model, manifolds, pair, n_bodies)
    reused, drift = False, 0.0
    if keepable:
        reused, drift = reuse_manifold(model, bodies, manifolds, pair, n_bodies, kept_apart)
    if not reused:
        drift = 0.0
        margin, found_margin = kept_apart, 0.0
        if keepable:  # may be reused in the next steps
            margin += REUSE_PAD_SLOPS * pair_slop(
                smaller_radius(
                    model,
                    manifolds.body_a[pair],
                    manifolds.body_a[pair] % n_bodies,
                    manifolds.body_b[pair],
                    manifolds.body_b[pair] % n_bodies,
                )
            )
            found_margin = margin
        collide_pair(model, bodies, manifolds, pair, n_bodies, margin)
        manifolds.found_margin[pair] = found_margin
    # The poses the manifold is now of, and how far it was carried since found afresh.
    slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
    position_a, position_b = bodies.position[slot_a], bodies.position[slot_b]
    manifolds.found_pose[pair] = ti.Vector(
        [
            position_a.x,
            position_a.y,
            bodies.angle[slot_a],
            position_b.x,
            position_b.y,
            bodies.angle[slot_b],
        ]
    )
    manifolds.drift[pair] = drift
    # Only a margin wider than the smaller body can hold a ghost worth the check: a slanted
    # normal misleads the velocity pass by at most the margin's reach across the body.
    if (
        fast
        and manifolds.point_count[pair] > 0
        and kept_apart
        > smaller_radius(
            model,
            manifolds.body_a[pair],
            manifolds.body_a[pair] % n_bodies,
            manifolds.body_b[pair],
            manifolds.body_b[pair] % n_bodies,
        )
    ):
        apart = manifolds.depth[pair, 0] < 0.0
        if manifolds.point_count[pair] > 1:
            apart = apart and manifolds.depth[pair, 1] < 0.0
        if apart and not sweep_reaches(
            model,
            bodies,
            joints,
            manifolds.body_a[pair],
            manifolds.body_b[pair],
            n_bodies,
            FAST_MARGIN_SUBSTEPS * h,
            SPECULATIVE_SLOPS
            * pair_slop(
                smaller_radius(
                    model,
                    manifolds.body_a[pair],
                    manifolds.body_a[pair] % n_bodies,
                    manifolds.body_b[pair],
                    manifolds.body_b[pair] % n_bodies,
                )
            ),
        ):
            manifolds.point_count[pair] = 0  # a ghost (sweep_reaches)
    matches = ti.Vector([-1, -1])
    for i in range(manifolds.point_count[pair]):
        feature = manifolds.feature[pair, i]
        match = -1
        if reused:
            match = i
        elif old_count > 0 and old_feature[0] == feature:
            match = 0
        elif old_count > 1 and old_feature[1] == feature:
            match = 1
        matches[i] = match
        jn, jt = 0.0, 0.0
        total_n, total_t = 0.0, 0.0
        if match >= 0:
            jn, jt = old_normal[match], old_tangent[match]
            if not first:  # what the point received earlier in the step
                total_n, total_t = old_total_normal[match], old_total_tangent[match]
        manifolds.normal_impulse[pair, i] = jn
        manifolds.tangent_impulse[pair, i] = jt
        manifolds.total_normal_impulse[pair, i] = total_n
        manifolds.total_tangent_impulse[pair, i] = total_t
    return fast or manifolds.point_count[pair] > 0, matches


@ti.func
def keeps_manifold(model: ti.template(), manifolds: ti.template(), pair, n_bodies):
    """Whether `pair`'s manifold may be kept across steps (reuse_manifold): not where a
    circle takes part. A polygon's points are its vertices, or ends of a face, points of
    the bodies that a kept manifold carries along; a circle's point is wherever the line
    between the bodies meets its surface, whatever its turn. Carried with the circle's
    turn, the point left that line, the normal force turned the circle further, and 300
    frictionless circles poured into a box spun up to 0.23 rad/s and never slept (found
    afresh every step, they never turn and slept 11 s after the pour began). A circle's
    narrow phase is cheap."""
    return (
        model.shape_kind[manifolds.body_a[pair] % n_bodies] != SHAPE_CIRCLE
        and model.shape_kind[manifolds.body_b[pair] % n_bodies] != SHAPE_CIRCLE
    )


@ti.func
def reuse_manifold(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    pair,
    n_bodies,
    kept_apart,
):
    """(Whether the step's first narrow phase of slow `pair` (margin kept_apart m) may keep
    the manifold it found before (not where manifolds.found_margin is 0: new, refreshed
    within a step, or forgotten), the drift it then carries, m); if kept, its points and
    depths are carried to the bodies' present poses (find_manifold records the poses);
    see REUSE_DRIFT_SLOPS.

    Kept where the bodies' material points have moved at most REUSE_DRIFT_SLOPS slops since
    it was found afresh (manifolds.drift, bounded by each body's shift plus its turn times
    its bounding radius) and the margin it was found with (manifolds.found_margin) still
    covers this step's, less that drift: no point the narrow phase would find now was
    farther apart than that margin then. Each point then moves with the bodies (halfway
    between their material points at it) and its depth changes by how far they moved apart
    along the normal, to second order in the turns (contacts.turned, as moved_depth tracks
    a step's motion); the normal, features and impulses stay."""
    found_margin = manifolds.found_margin[pair]
    result, drift = False, 0.0
    if found_margin > 0.0:
        slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
        body_a, body_b = slot_a % n_bodies, slot_b % n_bodies
        pose = manifolds.found_pose[pair]
        origin_a, origin_b = vec2(pose[0], pose[1]), vec2(pose[3], pose[4])
        shift_a = bodies.position[slot_a] - origin_a
        shift_b = bodies.position[slot_b] - origin_b
        turn_a = bodies.angle[slot_a] - pose[2]
        turn_b = bodies.angle[slot_b] - pose[5]
        drift = (
            manifolds.drift[pair]
            + shift_a.norm()
            + shift_b.norm()
            + ti.abs(turn_a) * bounding_radius(model, slot_a, body_a)
            + ti.abs(turn_b) * bounding_radius(model, slot_b, body_b)
        )
        slop = pair_slop(smaller_radius(model, slot_a, body_a, slot_b, body_b))
        if drift <= REUSE_DRIFT_SLOPS * slop and kept_apart + drift <= found_margin:
            result = True
            normal = manifolds.normal[pair]
            count = manifolds.point_count[pair]
            for i in ti.static(range(MAX_MANIFOLD_POINTS)):
                if i < count:
                    point = manifolds.point[pair, i]
                    moved_a = shift_a + turned(turn_a, point - origin_a)
                    moved_b = shift_b + turned(turn_b, point - origin_b)
                    # Not `-=` (an atomic in a parallel loop): one thread owns the pair.
                    manifolds.depth[pair, i] = manifolds.depth[pair, i] - normal.dot(
                        moved_b - moved_a
                    )
                    manifolds.point[pair, i] = point + 0.5 * (moved_a + moved_b)
    return result, drift


@ti.func
def prepare_manifold(
    model: ti.template(),
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    pair,
    n_bodies,
    dt,
    h,
    first,
    matches,
):
    """The solver's constants of `pair` after find_manifold (matches: its result): masses,
    restitution, slop, whether the pair is fast (prepared.refresh, on the step's first
    substep, `first`), the poses of reference for moved_depth, each point's lever arms,
    effective masses and friction regime and its normal velocity (prepared.approach): those
    of the moment the point is first found in the step (every point on the first substep),
    kept while it persists. Friction and restitution are mixed by the scene's rules (mix),
    whichever the solver.

    Here and not in find_manifold, which on the step's first substep runs before the
    colouring stores the pairs in colour order: only the manifolds are moved then."""
    old_bounced = ti.Vector([prepared.bounced[pair, 0], prepared.bounced[pair, 1]])
    old_friction = ti.Vector([prepared.friction[pair, 0], prepared.friction[pair, 1]])
    old_approach = ti.Vector([prepared.approach[pair, 0], prepared.approach[pair, 1]])
    slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
    if first:
        # The step's constants (they read both bodies' model and shape): a fast pair's
        # refreshes on later substeps keep them.
        prepare_pair(model, bodies, prepared, pair, slot_a, slot_b, n_bodies)
        if prepared.held[pair] == 0:
            wa, _, wb, _ = pair_masses(prepared, pair)
            light, heavy = (slot_a, slot_b) if wa > wb else (slot_b, slot_a)
            if (wa > SHOCK_RATIO * wb > 0.0 or wb > SHOCK_RATIO * wa > 0.0) and not rests_on(
                bodies.support[light], bodies.support[heavy]
            ):
                # Two dynamic bodies of very uneven masses, neither held, the light one not
                # resting on the heavy one: their impulses start cold. Carried over from a
                # step where the light one was held (the heavy one's whole weight, which it
                # never felt), they would hit it with ratio * g * h (1e5 kg on 1 kg:
                # 1,500 m/s) once it is not. A light body on a heavy one is never held
                # (shock propagation holds the lower body) and keeps its warm start: started
                # cold every step, 1 kg on 10 kg on 100 kg sank 2.5 mm with the soft step
                # and 4.1 mm with XPBD (Box2D v3 and the summed static deflections: 0.89).
                for i in range(MAX_MANIFOLD_POINTS):
                    manifolds.normal_impulse[pair, i] = 0.0
                    manifolds.tangent_impulse[pair, i] = 0.0
        # Found again (cheap): find_manifold ran before the pairs were reordered.
        prepared.refresh[pair] = 1 if fast_pair(model, bodies, manifolds, pair, n_bodies, dt) else 0
    delta_a, delta_b = bodies.delta_position[slot_a], bodies.delta_position[slot_b]
    prepared.ref_shift[pair] = ti.math.vec4(delta_a.x, delta_a.y, delta_b.x, delta_b.y)
    prepared.ref_turn[pair] = vec2(bodies.delta_angle[slot_a], bodies.delta_angle[slot_b])
    normal = manifolds.normal[pair]
    for i in range(manifolds.point_count[pair]):
        point = manifolds.point[pair, i]
        ra = point - bodies.position[slot_a]
        rb = point - bodies.position[slot_b]
        # A circle's point lies on the line through its centre along the normal: its arm
        # is put back on that line. Rounding of the point and the centre (~1e-7 of their
        # coordinates, ~1e-6 of a small circle's radius) leaves it off, by the same amount
        # every substep, and a frictionless circle turned under it: 80 poured ones up to
        # 1.1e-3 rad/s before they slept, where their contacts apply no torque.
        if model.shape_kind[slot_a % n_bodies] == SHAPE_CIRCLE:
            ra = ra.dot(normal) * normal
        if model.shape_kind[slot_b % n_bodies] == SHAPE_CIRCLE:
            rb = rb.dot(normal) * normal
        match = matches[i]
        if first or match < 0:
            # Before the solver acts on it; it may bounce once in the step.
            mu_static, mu_kinetic = mixed_friction(model, slot_a, slot_b, n_bodies)
            velocity = relative_velocity(bodies, slot_a, slot_b, ra, rb)
            prepared.bounced[pair, i] = 0
            prepared.approach[pair, i] = velocity.dot(normal)
            # Not sliding when the step begins: static friction holds it.
            sliding = ti.abs(velocity.dot(vec2(-normal.y, normal.x))) >= STICK_SPEED
            prepared.friction[pair, i] = mu_kinetic if sliding else mu_static
        else:
            prepared.bounced[pair, i] = old_bounced[match]
            prepared.friction[pair, i] = old_friction[match]
            prepared.approach[pair, i] = old_approach[match]
        prepare_point(manifolds, prepared, pair, i, ra, rb)


@quick
@ti.kernel
def _build_body_contacts(
    manifolds: ti.template(),
    prepared: ti.template(),
    coloring: ti.template(),
    scan: ti.template(),
    serial: ti.template(),
    n_slots: ti.i32,
    n_pairs: ti.i32,
    ordered: ti.i32,
):
    """Per body, the pairs it belongs to (sorted), so warm starting can gather impulses per
    body in a fixed order instead of scattering them with floating-point atomics.
    `ordered`: the pairs are stored in colour order (pair_origin: their broad-phase
    indices), else in the broad phase's."""
    ti.loop_config(serialize=serial)
    for slot in range(n_slots + 1):
        prepared.body_contact_start[slot] = 0
    ti.loop_config(serialize=serial)
    for k in range(n_pairs):
        if coloring.color[k] != UNSOLVED_COLOR:  # no points all step: nothing to warm start
            ti.atomic_add(prepared.body_contact_start[manifolds.body_a[k]], 1)
            ti.atomic_add(prepared.body_contact_start[manifolds.body_b[k]], 1)
    exclusive_scan(scan, prepared.body_contact_start, n_slots, serial)
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        prepared.body_contact_cursor[slot] = prepared.body_contact_start[slot]
    ti.loop_config(serialize=serial)
    for k in range(n_pairs):
        if coloring.color[k] != UNSOLVED_COLOR:
            slot_a, slot_b = manifolds.body_a[k], manifolds.body_b[k]
            prepared.body_contacts[ti.atomic_add(prepared.body_contact_cursor[slot_a], 1)] = k
            prepared.body_contacts[ti.atomic_add(prepared.body_contact_cursor[slot_b], 1)] = k
    # Sorted by each pair's broad-phase index (deterministic), not by its storage index,
    # which follows the colouring's atomics within a colour.
    ti.loop_config(serialize=serial)
    for slot in range(n_slots):
        sort_body_contacts(prepared, coloring, slot, ordered)


@ti.func
def sort_body_contacts(prepared: ti.template(), coloring: ti.template(), slot, ordered):
    """Slot's listed pairs sorted by their broad-phase index (insertion sort; `ordered`: the
    pairs are stored in colour order, their broad-phase index in coloring.pair_origin)."""
    start, end = prepared.body_contact_start[slot], prepared.body_contact_start[slot + 1]
    for i in range(start + 1, end):
        key = prepared.body_contacts[i]
        key_origin = key  # (an if, not a select on a func's i32: pairs.save_pair, SPIR-V)
        if ordered:
            key_origin = coloring.pair_origin[key]
        j = i - 1
        while j >= start:
            before = prepared.body_contacts[j]
            if ordered:
                before = coloring.pair_origin[before]
            if before <= key_origin:
                break
            prepared.body_contacts[j + 1] = prepared.body_contacts[j]
            j -= 1
        prepared.body_contacts[j + 1] = key


@ti.func
def build_world_body_lists(
    manifolds: ti.template(), prepared: ti.template(), first_slot, end_slot, first_pair, end_pair
):
    """_build_body_contacts for one small world, on one thread: its pairs [first_pair,
    end_pair) stay in the broad phase's order and every one of them takes a colour (none
    is UNSOLVED_COLOR: StepContext.small_coloring), so the pairs of the worlds before it
    fill the first 2 first_pair entries, and each slot's list, filled in pair order, is
    sorted as it is filled."""
    for slot in range(first_slot, end_slot):
        prepared.body_contact_cursor[slot] = 0
    for k in range(first_pair, end_pair):  # each slot's count, in its cursor
        for slot in ti.static((manifolds.body_a[k], manifolds.body_b[k])):
            prepared.body_contact_cursor[slot] = prepared.body_contact_cursor[slot] + 1
    running = 2 * first_pair
    for slot in range(first_slot, end_slot):
        count = prepared.body_contact_cursor[slot]
        prepared.body_contact_start[slot] = running
        prepared.body_contact_cursor[slot] = running
        running += count
    prepared.body_contact_start[end_slot] = running  # the next world's first, or the end
    for k in range(first_pair, end_pair):
        for slot in ti.static((manifolds.body_a[k], manifolds.body_b[k])):
            prepared.body_contacts[prepared.body_contact_cursor[slot]] = k
            prepared.body_contact_cursor[slot] = prepared.body_contact_cursor[slot] + 1


def body_lists_current(ctx: "StepContext") -> bool:
    """Whether the pool holds the per-body lists of ctx's pairs where they lie now (last
    step's, built by this scene, no saved state loaded since: DevicePool.body_lists_of),
    so a step that keeps its pairs in place needs none built (build_body_lists)."""
    return ctx.pool.body_lists_of is ctx.cache


def build_body_lists(ctx: "StepContext", built: bool = False):
    """Per body, the pairs it belongs to (prepared.body_contacts), sorted by the pairs'
    broad-phase order, so warm starting can gather impulses per body in a fixed order
    instead of scattering them with floating-point atomics.

    Small worlds solved one per thread have theirs from the step's order
    (pairs.store_in_color_order). A step that kept last step's pairs and colouring where
    they lie (StepCache.pairs_in_place) has last step's lists, still in the pool if this
    scene built
    them there and no saved state was loaded since (DevicePool.body_lists_of). Then nothing
    runs (~4 % of an awake pyramid's step on the 2-core CPU). `built`: a team's launch that
    ran the substeps built them, or kept them (solver/fused.py)."""
    pool = ctx.pool
    if built:
        pool.body_lists_of = ctx.cache
        return
    if ctx.cache.pairs_in_place and body_lists_current(ctx):
        return
    if ctx.solves_by_world:  # the step's pairs.store_in_color_order built them
        pool.body_lists_of = ctx.cache
        return
    _build_body_contacts(
        pool.manifolds,
        pool.prepared,
        pool.coloring,
        pool.scan,
        ctx.serial,
        ctx.n_slots,
        ctx.n_pairs,
        int(ctx.cache.pairs_ordered),
    )
    pool.body_lists_of = ctx.cache
