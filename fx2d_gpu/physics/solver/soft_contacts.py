"""The soft step's contact constraint (Scene(solver="soft_step")): Box2D v3's scheme of soft
constraints and relaxation (Erin Catto, "Solver2D", 2024), written for this engine.

XPBD (solver/contacts.py) corrects penetration with a position pass and then solves
velocities: 2 passes over the constraints a substep, and its stacks need many substeps (11)
to stand. The soft step makes 2 passes a substep as well, but needs fewer substeps (4): each
contact is a stiff, heavily damped spring, solved at the velocity level.

Per substep (solver/stages.py's SOFT_STEP_STAGES):

- warm start: each body takes its contacts' accumulated impulses (contacts.warm_start_body);
- solve (solve_soft_contact with bias): a penetrating point pushes its bodies apart at the
  speed of a spring of CONTACT_HERTZ and damping ratio CONTACT_DAMPING_RATIO (softness),
  at most MAX_PUSHOUT_SPEED; a point still apart lets them close the gap but no more (a
  speculative contact);
- integrate positions with the biased velocities;
- relax (solve_soft_contact without bias): the velocities the bias added are taken out
  again, so no push-out survives as velocity (no bounce from overlap);
- after the last substep, restitution (apply_restitution): a point that closed faster than
  RESTITUTION_THRESHOLD when the step began and pushed is given the separation speed its
  restitution asks for.

The depth of a point is tracked through the bodies' displacements since the step's narrow
phase (contacts.moved_depth), so no position pass is needed. The soft constraint, for a
spring of angular frequency w = 2 pi hertz and damping ratio z over a substep h (implicit):
with a1 = 2 z + h w, a2 = h w a1, a3 = 1 / (1 + a2), the impulse is

    d lambda = -m_eff mass_scale (v_n + bias_rate C) - impulse_scale lambda,
    bias_rate = w / a1, mass_scale = a2 a3, impulse_scale = a3,

where C < 0 is the penetration. At rest under a load, lambda = m_eff g h a substep and the
impulse change is 0: C = -g / w^2, the spring's static deflection (tests/test_soft_step.py
checks a disc's rest depth against it).
"""

import math

import taichi as ti

from ...enums import HELD, TOUCHED
from .contacts import (
    HOLD_FRACTION,
    MAX_CONDITION_NUMBER,
    MAX_PUSHOUT_SPEED,
    TOUCH_FRACTION,
    against_immovable,
    block_normal_impulses,
    count_support,
    exchange,
    exchange_normal,
    lever_arms,
    moved_since,
    normal_block,
    point_velocity,
    row_arms,
    row_coupling,
    store_velocities,
    take_row_impulses,
    tangent_of,
    tracked_depth,
)

vec2 = ti.math.vec2
vec3 = ti.math.vec3

#: Contact stiffness, Hz, and damping ratio (Box2D v3's defaults: b2WorldDef.contactHertz
#: and contactDampingRatio). A resting body sinks g / (2 pi hertz)^2 per unit of effective
#: mass ratio (softness): 0.28 mm at 30 Hz, 0.07 mm against an immovable body.
CONTACT_HERTZ = 30.0
CONTACT_DAMPING_RATIO = 10.0
#: A spring is at most this fraction of the substep rate (1 / h) stiff: stiffer ones are
#: not resolved by the substep and would ring (Box2D's rule: a quarter).
STIFFEST_FRACTION = 0.25
#: Contacts with an immovable body (static, kinematic, asleep) are this many times stiffer:
#: nothing on the other side gives way (Box2D's static softness: twice the hertz).
IMMOVABLE_STIFFNESS = 2.0
#: Restitution applies to points that closed faster than this when the step began, m/s
#: (Box2D v3's restitutionThreshold).
RESTITUTION_THRESHOLD = 1.0
#: A 2-point manifold with friction whose point pushes out faster than this fraction of
#: MAX_PUSHOUT_SPEED is checked against the cap as a block (_block_normal): its other
#: point's push, through K's coupling, may add to it (at most k12 / k22 of it, under
#: 1 for the shapes measured). Resting contacts push at well under 1 mm/s and never come.
PUSH_BLOCK_FRACTION = 0.25


@ti.func
def softness(hertz, damping_ratio, h):
    """(bias_rate 1/s, mass_scale, impulse_scale) of a soft constraint of `hertz` (Hz;
    0: rigid, (0, 1, 0)) and `damping_ratio` over a substep of h s (see the module
    docstring)."""
    result = vec3(0.0, 1.0, 0.0)
    if hertz > 0.0:
        omega = 2.0 * math.pi * hertz
        a1 = 2.0 * damping_ratio + h * omega
        a2 = h * omega * a1
        a3 = 1.0 / (1.0 + a2)
        result = vec3(omega / a1, a2 * a3, a3)
    return result


@ti.func
def contact_hertz(immovable, h):
    """The contact spring's frequency, Hz: CONTACT_HERTZ, at most STIFFEST_FRACTION of the
    substep rate, times IMMOVABLE_STIFFNESS against an immovable body."""
    hertz = ti.min(CONTACT_HERTZ, STIFFEST_FRACTION / h)
    if immovable:
        hertz *= IMMOVABLE_STIFFNESS
    return hertz


@ti.func
def solve_soft_contact(
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    pair,
    n_bodies,
    h,
    jacobi_entry,
    use_bias: ti.template(),
):
    """One Gauss-Seidel sweep over `pair`'s points: normal impulses (accumulated, >= 0),
    soft where `use_bias` (the solve) and rigid without (the relax), then each point's
    Coulomb friction (mu_s while it sticks, mu_k once it slides: prepared.friction).

    The relax, the substep's last word on the contact, reports it: touching, the impulses
    it applied in the substep added to the step's totals, and the bodies' support (shock
    propagation, contacts.SHOCK_RATIO). jacobi_entry >= 0: an overflow pair
    (solver/overflow.py), whose velocity changes go to prepared.jacobi_delta."""
    count = manifolds.point_count[pair]
    if count > 0:
        slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
        masses = prepared.solver_mass[pair]
        normal = manifolds.normal[pair]
        tangent = tangent_of(normal)
        velocity_a, spin_a = bodies.velocity[slot_a], bodies.angular_velocity[slot_a]
        velocity_b, spin_b = bodies.velocity[slot_b], bodies.angular_velocity[slot_b]
        delta_a, turn_a = bodies.delta_position[slot_a], bodies.delta_angle[slot_a]
        delta_b, turn_b = bodies.delta_position[slot_b], bodies.delta_angle[slot_b]
        soft = softness(
            contact_hertz(against_immovable(prepared, pair), h), CONTACT_DAMPING_RATIO, h
        )
        slop = prepared.slop[pair]
        touched, held = False, False
        # A point pushed out at more than PUSH_BLOCK_FRACTION of the cap
        # (MAX_PUSHOUT_SPEED): its pair's normals are solved as a block (_block_normal),
        # which keeps the other point's push from adding to it past the cap.
        pushing = False
        # Each point's bias velocity (m/s) and soft scales, and its depth.
        bias, mass_scale, impulse_scale = vec2(0.0), vec2(1.0), vec2(0.0)
        # The points' depths (contacts.moved_depth, sharing its terms across the points and
        # the rows' arms below).
        arm_a, arm_b = lever_arms(prepared, pair, count)
        arm_na, arm_nb, arm_ta, arm_tb = row_arms(arm_a, arm_b, normal, tangent)
        apart, turn_a_since, turn_b_since = moved_since(
            prepared, pair, normal, delta_a, turn_a, delta_b, turn_b
        )
        depth = vec2(0.0)
        for i in ti.static(range(2)):
            if i < count:
                ra, rb = vec2(arm_a[i, 0], arm_a[i, 1]), vec2(arm_b[i, 0], arm_b[i, 1])
                depth[i] = tracked_depth(
                    manifolds.depth[pair, i],
                    normal,
                    apart,
                    turn_a_since,
                    turn_b_since,
                    ra,
                    rb,
                    arm_na[i],
                    arm_nb[i],
                )
                if depth[i] < 0.0:  # apart: close the gap in this substep, no more
                    bias[i] = -depth[i] / h
                elif ti.static(use_bias):
                    bias[i] = ti.max(-soft[0] * depth[i], -MAX_PUSHOUT_SPEED)
                    mass_scale[i], impulse_scale[i] = soft[1], soft[2]
                    if bias[i] < -PUSH_BLOCK_FRACTION * MAX_PUSHOUT_SPEED:
                        pushing = True
                if ti.static(not use_bias):
                    if depth[i] > -TOUCH_FRACTION * slop:
                        touched = True
                    elif depth[i] > -HOLD_FRACTION * slop:
                        held = True
        # A manifold's two normal impulses are solved together where solving one point
        # after the other would decide the outcome:
        # - both points apart (a speculative catch) and, in the relax, an impact (both
        #   points closed faster than RESTITUTION_THRESHOLD when they were found): the
        #   exact 2-point answer (contacts.block_normal_impulses). One after the other, the
        #   first point stops the body's near side and sets it turning: a 1 m box dropped
        #   flat onto the seam of two static boxes left its landing at up to 1 m/s and
        #   rested up to 72 mm aside (e = 0, friction 0.55, drops of 0.1-4 m), where Box2D
        #   v3, which happens to find the point under the centre first, rests within
        #   0.01 mm. Resting contacts are not impacts: they stay point by point (below).
        # - two overlapping frictionless points (_block_normal), so that neither pushes
        #   first: one after the other tilts the upper body every substep, nothing holds
        #   the tilt's slide, and a frictionless column of ten boxes walked sideways and
        #   fell, as it does in Box2D v3.
        # Otherwise one point after the other, as Box2D v3 solves every manifold: with the
        # relax's touching points solved as blocks, a loaded pyramid's contacts kept it
        # swaying (100 rows: 2-5 cm/s after 10 s, where the point-by-point solve and
        # Box2D both settle below 1 mm/s in 10 s).
        blocked = False
        impact = (
            ti.static(not use_bias)
            and prepared.approach[pair, 0] < -RESTITUTION_THRESHOLD
            and prepared.approach[pair, 1] < -RESTITUTION_THRESHOLD
        )
        if count == 2 and ((depth[0] < 0.0 and depth[1] < 0.0) or impact):
            if _neither_pushes(
                manifolds, prepared, pair, normal, velocity_a, spin_a, velocity_b, spin_b, bias
            ):
                blocked = True  # the 2-point answer is no impulse: nothing changes
            else:
                (blocked, velocity_a, spin_a, velocity_b, spin_b) = _block_catch(
                    manifolds,
                    prepared,
                    pair,
                    masses,
                    normal,
                    velocity_a,
                    spin_a,
                    velocity_b,
                    spin_b,
                    bias,
                )
        elif (
            count == 2
            and depth[0] >= 0.0
            and depth[1] >= 0.0
            and (
                pushing or (prepared.friction[pair, 0] == 0.0 and prepared.friction[pair, 1] == 0.0)
            )
        ):
            (blocked, velocity_a, spin_a, velocity_b, spin_b) = _block_normal(
                manifolds,
                prepared,
                pair,
                masses,
                normal,
                velocity_a,
                spin_a,
                velocity_b,
                spin_b,
                bias,
                mass_scale,
                impulse_scale,
            )
        # The rows (each point's normal, then each point's friction) one after the other,
        # Gauss-Seidel as before, but each row's relative velocity is carried to the later
        # rows through their coupling (contacts.row_coupling) instead of through the bodies'
        # velocities, which take the manifold's impulses once, at the end. The same
        # arithmetic up to rounding; what it changes is the chain of dependent operations a
        # row waits on (the pass is bound by it, not by the operations' number): the
        # awake large pyramid's solve 63.0 -> 47.7 ns a pair on one thread, the relax
        # 65.5 -> 51.2 (2-core CPU, the same saved state, both compiled in one process).
        change_n, change_t = vec2(0.0), vec2(0.0)  # the rows' impulses in this pass, N s
        relative = velocity_b - velocity_a
        closing_t = relative.dot(tangent) + spin_b * arm_tb - spin_a * arm_ta
        if not blocked:  # (a block solve changed the velocities itself)
            closing_n = relative.dot(normal) + spin_b * arm_nb - spin_a * arm_na
            for i in ti.static(range(2)):
                if i < count:
                    old = manifolds.normal_impulse[pair, i]
                    new = ti.max(
                        old
                        - prepared.normal_mass[pair, i] * mass_scale[i] * (closing_n[i] + bias[i])
                        - impulse_scale[i] * old,
                        0.0,
                    )
                    manifolds.normal_impulse[pair, i] = new
                    change_n[i] = new - old
                    if ti.static(i == 0):
                        closing_n[1] += change_n[0] * row_coupling(
                            masses, True, arm_na[0], arm_nb[0], arm_na[1], arm_nb[1]
                        )
                    closing_t += change_n[i] * vec2(
                        row_coupling(masses, False, arm_na[i], arm_nb[i], arm_ta[0], arm_tb[0]),
                        row_coupling(masses, False, arm_na[i], arm_nb[i], arm_ta[1], arm_tb[1]),
                    )
        if ti.static(not use_bias):
            for i in ti.static(range(2)):
                if i < count and manifolds.normal_impulse[pair, i] > 0.0:
                    touched = True
        # Friction with no normal impulse and none of its own to undo changes nothing (a
        # speculative pair still apart: 12 % of a settled large pyramid's pairs).
        idle = True
        for i in ti.static(range(2)):
            if i < count and (
                manifolds.normal_impulse[pair, i] != 0.0
                or manifolds.tangent_impulse[pair, i] != 0.0
            ):
                idle = False
        for i in ti.static(range(2)):
            if i < count and not idle:
                old = manifolds.tangent_impulse[pair, i]
                limit = prepared.friction[pair, i] * manifolds.normal_impulse[pair, i]
                new = ti.math.clamp(
                    old - closing_t[i] * prepared.tangent_mass[pair, i], -limit, limit
                )
                manifolds.tangent_impulse[pair, i] = new
                change_t[i] = new - old
                if ti.static(i == 0):
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
        if ti.static(not use_bias):
            # What the points applied in this substep: the warm start gave last substep's
            # impulses, solve and relax brought them to these.
            for i in ti.static(range(2)):
                if i < count:
                    # Not `+=` (an atomic add in a parallel loop): one thread owns the pair.
                    manifolds.total_normal_impulse[pair, i] = (
                        manifolds.total_normal_impulse[pair, i] + manifolds.normal_impulse[pair, i]
                    )
                    manifolds.total_tangent_impulse[pair, i] = (
                        manifolds.total_tangent_impulse[pair, i]
                        + manifolds.tangent_impulse[pair, i]
                    )
            if touched:
                manifolds.touching[pair] = TOUCHED
                if prepared.held[pair] >= 0 and jacobi_entry < 0:
                    count_support(bodies, prepared, pair, slot_a, slot_b, masses)
            elif held and manifolds.touching[pair] == 0:  # TOUCHED earlier stays
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
def _neither_pushes(
    manifolds: ti.template(),
    prepared: ti.template(),
    pair,
    normal,
    velocity_a,
    spin_a,
    velocity_b,
    spin_b,
    bias,
):
    """Whether _block_catch's answer is no impulse at either point, known without solving:
    neither point holds an impulse and neither closes faster than -bias_i (its gap in the
    substep), so x = 0 meets every condition of the 2-point problem (the same answer,
    up to the sign of a zero)."""
    neither = manifolds.normal_impulse[pair, 0] == 0.0 and manifolds.normal_impulse[pair, 1] == 0.0
    if neither:
        for i in ti.static(range(2)):
            ra, rb = prepared.arm_a[pair, i], prepared.arm_b[pair, i]
            vn = point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra, rb).dot(normal)
            if vn + bias[i] < 0.0:
                neither = False
    return neither


@ti.func
def _block_catch(
    manifolds: ti.template(),
    prepared: ti.template(),
    pair,
    masses,
    normal,
    velocity_a,
    spin_a,
    velocity_b,
    spin_b,
    bias,
):
    """Both normal impulses of a 2-point manifold at once, rigid (no softness): each point's
    normal velocity brought to -bias_i (closing its gap, or 0 where it touches) or left
    faster apart with no impulse, the exact answer of the 2 x 2 linear complementarity
    problem (contacts.block_normal_impulses). Returns (taken: it had an answer, the
    bodies' velocities after it)."""
    ra0, rb0 = prepared.arm_a[pair, 0], prepared.arm_b[pair, 0]
    ra1, rb1 = prepared.arm_a[pair, 1], prepared.arm_b[pair, 1]
    old = vec2(manifolds.normal_impulse[pair, 0], manifolds.normal_impulse[pair, 1])
    new, taken = block_normal_impulses(
        masses,
        normal,
        ra0,
        rb0,
        ra1,
        rb1,
        point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra0, rb0).dot(normal),
        point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra1, rb1).dot(normal),
        -bias,
        old,
    )
    if taken:
        velocity_a, spin_a, velocity_b, spin_b = _take_block(
            manifolds,
            pair,
            masses,
            normal,
            velocity_a,
            spin_a,
            velocity_b,
            spin_b,
            ra0,
            rb0,
            ra1,
            rb1,
            old,
            new,
        )
    return taken, velocity_a, spin_a, velocity_b, spin_b


@ti.func
def _take_block(
    manifolds: ti.template(),
    pair,
    masses,
    normal,
    velocity_a,
    spin_a,
    velocity_b,
    spin_b,
    ra0,
    rb0,
    ra1,
    rb1,
    old,
    new,
):
    """A block solve's answer taken: the manifold's two normal impulses old -> new (N s),
    and the bodies' velocities after that change (returned)."""
    manifolds.normal_impulse[pair, 0] = new[0]
    manifolds.normal_impulse[pair, 1] = new[1]
    return exchange_normal(
        velocity_a, spin_a, velocity_b, spin_b, masses, ra0, rb0, ra1, rb1, normal, new - old
    )


@ti.func
def _block_normal(
    manifolds: ti.template(),
    prepared: ti.template(),
    pair,
    masses,
    normal,
    velocity_a,
    spin_a,
    velocity_b,
    spin_b,
    bias,
    mass_scale,
    impulse_scale,
):
    """Both normal impulses of a 2-point manifold whose points overlap, at once: the normal
    velocities solved as a block with the 2 x 2 effective-mass matrix K, the springs' bias
    point by point with each point's own effective mass m_i (prepared.normal_mass),
    lambda_new = lambda - mass_scale (K^-1 v_n + m_i bias_i) - impulse_scale lambda. At
    rest (v_n = 0) each point then sits where Box2D's sequential solve leaves it
    (lambda_i / (m_i h w^2) deep: a 20-row pyramid's top drops 30 mm in both; with the bias
    through K^-1 too it dropped 45 mm), while the velocities come out symmetric. The bias
    moves a point by a few per cent of its depth a substep (bias_rate h = 0.04 at 30 Hz and
    4 substeps), so applying both points' at once does not overshoot. Taken where both
    results push (>= 0) and K is well conditioned (contacts.MAX_CONDITION_NUMBER); returns
    (taken, the bodies' velocities after it).

    The push-out cap: where the biases pushed through each point's own mass would move a
    point apart faster than MAX_PUSHOUT_SPEED (K diag(m_i) bias: the other point's push
    adds to a point's through K's coupling), the bias goes through K^-1 as well,
    lambda_new = lambda - mass_scale K^-1 (v_n + bias) - impulse_scale lambda, so that
    each point's normal velocity comes out (1 - mass_scale) of its own before the warm
    start plus mass_scale (-bias_i): at most the cap. Pushed through the own masses, a
    0.1 x 2 m box created 0.3 m deep in the ground left at 5.8 m/s (frictionless; 3.0-3.2
    m/s with friction, one point after the other), where Box2D's cap is 3 m/s. A pair
    with friction comes here only then (solve_soft_contact's PUSH_BLOCK_FRACTION), and
    is otherwise left to the point-by-point solve (not taken)."""
    ra0, rb0 = prepared.arm_a[pair, 0], prepared.arm_b[pair, 0]
    ra1, rb1 = prepared.arm_a[pair, 1], prepared.arm_b[pair, 1]
    k11, k12, k22 = normal_block(masses, normal, ra0, rb0, ra1, rb1)
    det = k11 * k22 - k12 * k12
    taken = False
    if k11 > 0.0 and k22 > 0.0 and k11 * k11 < MAX_CONDITION_NUMBER * det:
        old = vec2(manifolds.normal_impulse[pair, 0], manifolds.normal_impulse[pair, 1])
        vn = vec2(
            point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra0, rb0).dot(normal),
            point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra1, rb1).dot(normal),
        )
        solved = vec2(k22 * vn[0] - k12 * vn[1], k11 * vn[1] - k12 * vn[0]) / det
        push = vec2(prepared.normal_mass[pair, 0], prepared.normal_mass[pair, 1]) * bias
        frictionless = prepared.friction[pair, 0] == 0.0 and prepared.friction[pair, 1] == 0.0
        over_cap = (
            ti.min(k11 * push[0] + k12 * push[1], k12 * push[0] + k22 * push[1])
            < -MAX_PUSHOUT_SPEED
        )
        if over_cap:
            push = vec2(k22 * bias[0] - k12 * bias[1], k11 * bias[1] - k12 * bias[0]) / det
        new = old - mass_scale * (solved + push) - impulse_scale * old
        if (frictionless or over_cap) and new[0] >= 0.0 and new[1] >= 0.0:
            taken = True
            velocity_a, spin_a, velocity_b, spin_b = _take_block(
                manifolds,
                pair,
                masses,
                normal,
                velocity_a,
                spin_a,
                velocity_b,
                spin_b,
                ra0,
                rb0,
                ra1,
                rb1,
                old,
                new,
            )
    return taken, velocity_a, spin_a, velocity_b, spin_b


@ti.func
def apply_restitution(
    bodies: ti.template(),
    manifolds: ti.template(),
    prepared: ti.template(),
    pair,
    n_bodies,
    h,
    jacobi_entry,
):
    """After the step's last relax (Box2D v3's restitution pass): each point that closed
    faster than RESTITUTION_THRESHOLD when the step began (prepared.approach) and pushed in
    the step is given a normal velocity of -restitution times that approach, by an impulse
    that keeps its accumulated impulse >= 0 (a point already leaving fast enough gets
    none); both points of a manifold together where both bounce. The impulse counts in the
    step's totals and is warm started, as Box2D does."""
    count = manifolds.point_count[pair]
    restitution = prepared.restitution[pair]
    if count > 0 and restitution > 0.0:
        slot_a, slot_b = manifolds.body_a[pair], manifolds.body_b[pair]
        masses = prepared.solver_mass[pair]
        normal = manifolds.normal[pair]
        velocity_a, spin_a = bodies.velocity[slot_a], bodies.angular_velocity[slot_a]
        velocity_b, spin_b = bodies.velocity[slot_b], bodies.angular_velocity[slot_b]
        bounces = ti.Vector([0, 0])
        for i in ti.static(range(2)):
            if (
                i < count
                and prepared.approach[pair, i] < -RESTITUTION_THRESHOLD
                and manifolds.total_normal_impulse[pair, i] > 0.0
            ):
                bounces[i] = 1
        # Both points of a manifold bounce together (contacts.block_normal_impulses, the
        # exact 2-point answer): one after the other, the first point's bounce turns the
        # body and the second's undoes part of it (a box landing flat across two chain
        # links left turning and drifted 4 cm sideways).
        paired = False
        if count == 2 and bounces[0] == 1 and bounces[1] == 1:
            ra0, rb0 = prepared.arm_a[pair, 0], prepared.arm_b[pair, 0]
            ra1, rb1 = prepared.arm_a[pair, 1], prepared.arm_b[pair, 1]
            old = vec2(manifolds.normal_impulse[pair, 0], manifolds.normal_impulse[pair, 1])
            target = -restitution * vec2(prepared.approach[pair, 0], prepared.approach[pair, 1])
            new, paired = block_normal_impulses(
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
            if paired:
                for i in ti.static(range(2)):
                    manifolds.normal_impulse[pair, i] = new[i]
                    manifolds.total_normal_impulse[pair, i] = (
                        manifolds.total_normal_impulse[pair, i] + new[i] - old[i]
                    )
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
        for i in ti.static(range(2)):
            if i < count and not paired:
                approach = prepared.approach[pair, i]
                if bounces[i] == 1:
                    ra, rb = prepared.arm_a[pair, i], prepared.arm_b[pair, i]
                    vn = point_velocity(velocity_a, spin_a, velocity_b, spin_b, ra, rb).dot(normal)
                    old = manifolds.normal_impulse[pair, i]
                    new = ti.max(
                        old - prepared.normal_mass[pair, i] * (vn + restitution * approach), 0.0
                    )
                    manifolds.normal_impulse[pair, i] = new
                    manifolds.total_normal_impulse[pair, i] = (
                        manifolds.total_normal_impulse[pair, i] + new - old
                    )
                    velocity_a, spin_a, velocity_b, spin_b = exchange(
                        velocity_a, spin_a, velocity_b, spin_b, masses, ra, rb, (new - old) * normal
                    )
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
