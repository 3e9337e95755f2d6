"""Physics users can trust (issue 12): rolling, precision far from the origin, contacts of
bodies that move together, bounded push-out, motors at small steps, spinning and impacts.

Each test is a scenario from the issue with its "right" figure as the bound, checked against
an analytic answer or a conservation law.
"""

import math

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.physics.solver.contacts import (
    CONTACT_COMPLIANCE,
    LINEAR_SLOP,
    MAX_PUSHOUT_SPEED,
    SLOP_FRACTION,
)

from .helpers import G, mechanical_energy, soft_column_drop, soft_contact_hertz, soft_deflection

DT = 1.0 / 60.0


def incline(scene, theta, origin, mu):
    """A long static ramp going down towards +x at theta (rad) whose surface passes through
    origin; returns (unit normal, unit downhill direction)."""
    normal = np.array([math.sin(theta), math.cos(theta)])
    downhill = np.array([math.cos(theta), -math.sin(theta)])
    centre = np.asarray(origin, float) - 0.5 * normal
    scene.add_box(
        tuple(centre), (200.0, 1.0), angle=-theta, mass=0, static_friction=mu, dynamic_friction=mu
    )
    return normal, downhill


# --- 1. rolling ------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", [(0.0, 0.0), (50.0, 50.0)])
def test_disk_rolls_down_an_incline_at_the_textbook_acceleration(arch, origin, solver):
    """a = g sin(theta) / (1 + I / (m r^2)) = 2.237 m/s^2 for a disk on 20 degrees, rolling
    without slipping, wherever the scene sits in the plane."""
    theta, radius = math.radians(20.0), 0.5
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    normal, downhill = incline(scene, theta, origin, 0.6)
    start = np.asarray(origin) + radius * normal - 20.0 * downhill
    disk = scene.add_circle(
        tuple(start), radius, static_friction=0.6, dynamic_friction=0.6, elasticity=0.0
    )
    times, travel = [], []
    for step in range(120):
        scene.step(DT)
        state = scene.get_state()
        times.append((step + 1) * DT)
        travel.append(float((state.position[0, disk] - start) @ downhill))
    accel = 2.0 * np.polyfit(times[30:], travel[30:], 2)[0]
    expected = G * math.sin(theta) / 1.5
    assert accel == pytest.approx(expected, rel=0.01)
    state = scene.get_state()
    speed = float(state.velocity[0, disk] @ downhill)
    assert abs(state.angular_velocity[0, disk]) * radius == pytest.approx(speed, rel=0.01)


def wheel_cart(arch, origin, substeps, cart, solver="xpbd"):
    """A wheel (r 0.4, 0.25 kg) or a 2 kg cart on two such wheels (revolute joints) rolling
    from rest down a 6 degree ramp for 3 s. Returns (speed along the ramp / the rolling
    speed g sin(theta) t / (1 + sum I / (M r^2)), largest rise of the mechanical energy
    as a fraction of the final kinetic energy)."""
    theta, radius, wheel_mass = math.radians(6.0), 0.4, 0.25
    scene = fx.Scene(gravity=(0.0, -G), substeps=substeps, arch=arch, solver=solver)
    normal, downhill = incline(scene, theta, origin, 0.9)
    o = np.asarray(origin, float)
    wheel = dict(mass=wheel_mass, static_friction=0.9, dynamic_friction=0.9, elasticity=0.0)
    if cart:
        chassis = scene.add_box(
            tuple(o + (radius + 0.5) * normal), (2.0, 0.3), angle=-theta, mass=2.0, elasticity=0.0
        )
        wheels = [
            scene.add_circle(tuple(o + radius * normal + side * 0.8 * downhill), radius, **wheel)
            for side in (-1, 1)
        ]
        for w, side in zip(wheels, (-1, 1), strict=True):
            scene.add_revolute_joint(chassis, w, anchor=(side * 0.8, -0.5))
        bodies = [chassis, *wheels]
        mass, inertia = 2.0 + 2 * wheel_mass, 2 * 0.5 * wheel_mass * radius**2
    else:
        bodies = [scene.add_circle(tuple(o + radius * normal), radius, **wheel)]
        mass, inertia = wheel_mass, 0.5 * wheel_mass * radius**2
    energy_start = mechanical_energy(scene, bodies, scene.get_state())
    rise = 0.0
    for _ in range(180):
        scene.step(DT)
        state = scene.get_state()
        rise = max(rise, mechanical_energy(scene, bodies, state) - energy_start)
    accel = G * math.sin(theta) / (1.0 + inertia / (mass * radius**2))
    speed = float(state.velocity[0, bodies[0]] @ downhill)
    kinetic = sum(
        0.5 * scene.body_mass(b) * float(np.sum(state.velocity[0, b] ** 2))
        + 0.5 * scene.body_inertia(b) * float(state.angular_velocity[0, b]) ** 2
        for b in bodies
    )
    return speed / (accel * 3.0), rise / kinetic


@pytest.mark.parametrize("cart", [False, True], ids=["wheel", "cart"])
@pytest.mark.parametrize("origin", [(0.0, 0.0), (50.0, 50.0)])
@pytest.mark.parametrize(
    "solver, substeps", [("xpbd", 4), ("xpbd", 11), ("xpbd", 22), ("soft_step", 4)]
)
def test_wheel_and_cart_roll_at_the_rolling_speed(arch, cart, origin, solver, substeps):
    ratio, rise = wheel_cart(arch, origin, substeps, cart, solver)
    assert ratio == pytest.approx(1.0, abs=0.01)
    assert rise <= 0.01


# --- 3. contacts of bodies that move together, bounded push-out -----------------------------


def test_falling_pile_of_circles_finds_its_contacts_in_time(arch, solver):
    """5,000 circles (r 0.095 on a 0.2 m grid: 1 cm gaps, 200 columns of 25) dropped into a
    40 m bin: no two circles ever overlap by more than an impact allows (contacts found a
    step late let whole rows interpenetrate once the bottom row lands). The bottom row
    lands after 0.29 s, and the 24 rows above it on it within the 0.5 s: every row's
    contacts are found while it lands. (It was 100 rows, 20,000 circles and 47 s; the
    rows above the 25th were still falling at the end.)

    Bound: a resting pair is at most a slop (2 mm) deep; an impact may sink a pair by one
    substep's closing before its contact acts. Within these 0.5 s nothing falls faster than
    g t = 4.9 m/s, and a circle rebounding (e = 0.1) meets one still falling at most at
    (1 + e) g t = 5.4 m/s: 5.4 m/s * 1/660 s = 8.2 mm more. A contact found a step late
    would let a pair sink 5.4 / 60 = 9 cm. (The bound was r / 2, 4.75 cm.)

    The soft step: the same slop and one of its own substeps' closing (1/240 s: 22.5 mm;
    its relax leaves no closing speed at the end of a substep, and a contact found ahead
    stops its pair where they touch), plus its springs' static deflection under the column
    they carry (a contact's spring is not stiff): the circles stand in vertical columns,
    so the pair under k circles closes k m g (1/m + 1/m) / w^2 = 2 k g / w^2 at 30 Hz
    (soft_deflection), 13.2 mm under the 24 circles over the bottom pair. Measured: 18.2 mm
    (XPBD 5.8 mm)."""
    radius, rows = 0.095, 25
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_box((0.0, -0.5), (40.0, 1.0), mass=0)
    scene.add_box((-20.5, 20.0), (1.0, 42.0), mass=0)
    scene.add_box((20.5, 20.0), (1.0, 42.0), mass=0)
    for i in range(200):
        for j in range(rows):
            scene.add_circle((-19.9 + 0.2 * i, 1.0 + 0.2 * j), radius)
    worst = 0.0
    for _ in range(30):
        scene.step(DT)
        contacts = scene.contacts(world=0)
        circles = (contacts.body_a >= 3) & (contacts.body_b >= 3)
        if circles.any():
            worst = max(worst, float(contacts.depth[circles].max()))
    column = 0.0
    if solver == "soft_step":
        column = 2.0 * (rows - 1) * soft_deflection(soft_contact_hertz(scene.substeps, False))
    assert worst <= LINEAR_SLOP + 1.1 * G * (30 * DT) * DT / scene.substeps + column


def test_overlapping_circles_in_a_closed_box_stay_inside(arch, solver, request):
    """625 circles (r 0.5 on a 0.72 m grid, so they start overlapping) in a closed 20 x 19.5 m
    box of 1 m thick static walls, no gravity: every circle stays inside, no speed above the
    push-out's cap (deep overlap is pushed out at a bounded speed, not through a wall).

    Bounds: a circle against a wall has its centre r = 0.5 from it, less the slop, less
    what its inner neighbours push it in by in a substep before the wall's contact takes it
    back: the box is overfull (625 circles of 1 m need 541 m^2 packed hexagonally, the box
    has 390), so the overlaps never resolve, the circles stay awake (sleep.OVERLAP_DEPTH)
    and the jam presses on the walls for good. Each contact's correction is capped at
    MAX_PUSHOUT_SPEED * h, and a circle touches at most three equal circles on its inner
    side: at most three caps past the slop (15.6 mm; measured 11 mm; 2 mm while the jam
    fell asleep half-resolved, before the overlap rule). Nothing moves at the start
    and nothing pulls: the push-out, at most MAX_PUSHOUT_SPEED (3 m/s) a contact, is all
    that moves them, so no circle may be faster (the position pass moves poses, not
    velocities: measured 0; the bound was 10 m/s).

    The soft step does not hold this, and Box2D v3 does not either (issue 77;
    docs/solvers.md); both bounds are XPBD's, and the soft step's design cannot meet them:
    - The push-out cap (Box2D's contactSpeed, b2WorldDef.maxContactPushSpeed) caps each
      point's bias velocity in the solve, so each contact's parting speed, not a body's:
      one Gauss-Seidel sweep down a row of overlapping circles parts each from the one
      solved before it at up to the cap, and the speeds add along the row; the relax, one
      rigid sweep without bias, takes back only what its one sweep reaches. A corner
      circle leaves the first step at 7.41 m/s (Box2D v3, pyb2d3, 4 substeps, the same
      jam: 7.38), and within 2 s the fastest reach 19.4 m/s (Box2D: 22.0).
    - The walls' contacts are springs (soft_contacts.contact_hertz: 60 Hz against an
      immovable body) under a jam that never unloads: at rest (every circle below 5 mm/s
      after 5 s) they carry its pressure at a spring's deflection, and no cap enters a
      state at rest. Measured: 49.8 mm into the walls at rest, 50.6 mm at most (Box2D:
      59.2 mm, from 0.2 s on). XPBD's wall contact is rigid (compliance 1e-8 m/N).
    Meeting them would take another contact model (the push-out apart from the velocities,
    as split impulses do, and rigid walls), not a fix of this one."""
    if solver == "soft_step":
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="soft step, as Box2D v3: its push-out cap caps each contact's parting "
                "speed, which add along a row of overlapping circles (7.4 m/s after the first "
                "step, 19.4 within 2 s; Box2D 7.4 and 22.0; 3 m/s allowed), and its soft "
                "walls hold the jam's pressure 50 mm deep at rest (Box2D 59 mm; 15.6 mm "
                "allowed)",
            )
        )
    width, height = 20.0, 19.5
    jam_give = LINEAR_SLOP + 3 * MAX_PUSHOUT_SPEED * DT / 11
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver)
    scene.add_box((0.0, -height / 2 - 0.5), (width + 2, 1.0), mass=0)
    scene.add_box((0.0, height / 2 + 0.5), (width + 2, 1.0), mass=0)
    scene.add_box((-width / 2 - 0.5, 0.0), (1.0, height + 2), mass=0)
    scene.add_box((width / 2 + 0.5, 0.0), (1.0, height + 2), mass=0)
    for i in range(25):
        for j in range(25):
            scene.add_circle((-8.64 + 0.72 * i, -8.64 + 0.72 * j), 0.5)
    for _ in range(600):
        scene.step(DT)
        state = scene.get_state()
        centres = state.position[0, 4:]
        assert np.all(np.abs(centres[:, 0]) <= width / 2 - 0.5 + jam_give)
        assert np.all(np.abs(centres[:, 1]) <= height / 2 - 0.5 + jam_give)
        assert np.linalg.norm(state.velocity[0, 4:], axis=1).max() <= MAX_PUSHOUT_SPEED


@pytest.mark.parametrize(
    "size, friction",
    [((0.1, 2.0), 0.0), ((0.1, 2.0), 0.5), ((0.5, 1.0), 0.5), ((1.0, 1.0), 0.0)],
    ids=["thin-frictionless", "thin", "tall", "square-frictionless"],
)
def test_a_box_created_deep_in_the_ground_is_pushed_out_at_most_at_the_cap(
    arch, solver, size, friction
):
    """A box (w x h, 1 kg) created 0.3 m deep in a static ground, no gravity: it rises
    at no more than MAX_PUSHOUT_SPEED (3 m/s, Box2D's contactPushMaxVelocity), under
    either solver (issue 77: the soft step pushed a 0.1 x 2 m box out at 5.8 m/s).

    Bound: the box does not turn (symmetric) and nothing else moves it, so its rise in a
    step is each contact point's. XPBD moves a point at most MAX_PUSHOUT_SPEED * h a
    substep; the soft step's solve leaves a point's normal velocity at (1 - mass_scale)
    of the one before the warm start (0 at the start, and the relax takes the push back
    each substep) plus mass_scale times the capped bias, 3 m/s at most, and positions move
    by that velocity times h. So rise / dt <= 3 m/s, plus float32 rounding of a position
    near 1 m (6e-8 m a step: 4e-6 m/s)."""
    width, height = size
    depth = 0.3
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver, enable_sleep=False)
    scene.add_box(
        (0.0, -0.5), (20.0, 1.0), mass=0.0, static_friction=friction, dynamic_friction=friction
    )
    box = scene.add_box(
        (0.0, height / 2 - depth),
        (width, height),
        static_friction=friction,
        dynamic_friction=friction,
    )
    heights = [float(scene.get_state().position[0, box, 1])]
    for _ in range(30):
        scene.step(DT)
        heights.append(float(scene.get_state().position[0, box, 1]))
    rise = np.diff(heights) / DT
    assert heights[-1] >= height / 2 - LINEAR_SLOP - 1e-6  # pushed out to the slop
    assert rise.max() <= MAX_PUSHOUT_SPEED + 1e-5


# --- 4. motors at small steps and far from the origin ----------------------------------------


def motor_arm_rotation(arch, dt, base_x, solver="xpbd"):
    """An arm (2 x 0.25 box, 1 kg, inertia 0.5) on a revolute joint to a static base, velocity
    motor target 3 rad/s, PID (6, 0, 0), no gravity: its rotation (rad) after 1 s."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver)
    base = scene.add_box((base_x, 0.0), (0.2, 0.2), mass=0)
    arm = scene.add_box((base_x + 1.0, 0.0), (2.0, 0.25), mass=1.0, inertia=0.5)
    scene.add_revolute_joint(
        base, arm, anchor=(0.0, 0.0), control_mode="velocity", target=3.0, pid=(6.0, 0.0, 0.0)
    )
    for _ in range(round(1.0 / dt)):
        scene.step(dt)
    return float(scene.get_state().angle[0, arm])


def test_motor_keeps_its_authority_at_small_steps_and_far_from_the_origin(arch, solver):
    """Pinned at the base, the arm turns with I = 0.5 + 1 kg (1 m)^2 = 1.5 kg m^2 under the
    torque 6 (3 - w): w = 3 (1 - exp(-4 t)), so in 1 s it turns 3 (1 - (1 - exp(-4)) / 4)
    = 2.264 rad, whatever the step and wherever the base; 0.5 % for the substeps' Euler
    (0.12 % at dt = 1e-2). (The bounds were > 1 rad, all within 25 %.)"""
    rotations = [
        motor_arm_rotation(arch, dt, x, solver) for dt in (1e-2, 1e-3) for x in (0.5, 7.0, 300.0)
    ]
    expected = 3.0 * (1.0 - (1.0 - math.exp(-4.0)) / 4.0)
    np.testing.assert_allclose(rotations, expected, rtol=5e-3)


# --- 5. a spinning box does not hop ----------------------------------------------------------


def spinning_box(arch, spin, gravity=G, ground_top=0.0, solver="xpbd", **material):
    """A 1 m box of 1 kg set on the ground (top at ground_top) spinning at `spin` rad/s:
    (highest centre, m; largest rise of its mechanical energy over the start, J) in 3 s."""
    scene = fx.Scene(gravity=(0.0, -gravity), arch=arch, solver=solver)
    scene.add_box((0.0, ground_top - 0.5), (40.0, 1.0), mass=0, **material)
    box = scene.add_box((0.0, ground_top + 0.5), (1.0, 1.0), angular_velocity=spin, **material)
    start = mechanical_energy(scene, [box], scene.get_state(), gravity)
    highest, rise = ground_top + 0.5, -math.inf
    for _ in range(180):
        scene.step(DT)
        state = scene.get_state()
        highest = max(highest, float(state.position[0, box, 1]))
        rise = max(rise, mechanical_energy(scene, [box], state, gravity) - start)
    return highest, rise


#: Fx2D's spinning-box scene (its tests' test_spinning_box): g = 10, the ground's top at
#: y = 1.5, elasticity 0, static friction 0.6, kinetic 0.5.
FX2D_SPIN_GRAVITY, FX2D_GROUND_TOP = 10.0, 1.5
FX2D_SPIN_MATERIAL = dict(elasticity=0.0, static_friction=0.6, dynamic_friction=0.5)


def spinning_box_bound(spin, gravity, ground_top, mu_kinetic):
    """The highest the centre of a 1 m, 1 kg box (I = 1/6 kg m^2) set flat on the ground
    spinning at `spin` rad/s can rise, m, derived for the test's scene:

    - pivoting on a corner, the centre is at most sqrt(2)/2 above the ground's top;
    - the spin drives a bottom corner into the ground at spin/2 m/s. Sticking there would
      take a friction impulse as large as the normal one (ratio 1 > mu_s = 0.6), so the
      corner slides, the friction at most mu_k J_n. With e = 0 the impulse J_n stops the
      corner: J_n + (spin - 6 * 0.5 (1 + mu) J_n) (-0.5) = 0, J_n = (spin/2) / (1 + 1.5
      (1 + mu)), largest for the least friction, mu_k; the centre leaves upwards at
      v = J_n / m with the box turning at spin - 3 (1 + mu) J_n. The corner lifts off only
      if that turn exceeds sqrt(2 g) (the corner's height over the ground grows as
      (w^2 / 4 - g / 2) t^2); then the centre flies at most v^2 / (2 g) above its resting
      height. At 15 rad/s in Fx2D's scene: v = 2.31 m/s, w = 4.62 > 4.47 rad/s, apex
      2.266 m: the box hops, and Fx2D's 2.257 (the pivot bound plus 5 cm) is below what
      the physics allows. At 5 and 10 rad/s it does not lift off (w = 1.54, 3.08).

    Energy gives nothing tighter: it never rises (test_spinning_box_never_gains_energy)."""
    rest = ground_top + 0.5
    pivot = ground_top + math.sqrt(2.0) / 2.0
    normal_impulse = 0.5 * spin / (1.0 + 1.5 * (1.0 + mu_kinetic))
    turn = spin - 3.0 * (1.0 + mu_kinetic) * normal_impulse
    hop = rest + normal_impulse**2 / (2.0 * gravity) if turn > math.sqrt(2.0 * gravity) else rest
    return max(pivot, hop)


@pytest.mark.parametrize(
    "spin, solver",
    [(5.0, "xpbd"), (10.0, "xpbd"), (15.0, "xpbd"), (5.0, "soft_step"), (10.0, "soft_step")],
)
def test_spinning_box_stays_below_its_derived_bound(arch, spin, solver):
    """Fx2D's own scene, the bound derived for it (spinning_box_bound) plus 1 cm (the
    contact slop and the substep's discretisation of the impact). The engine went to 2.45
    at 15 rad/s (friction missing at the impact: the frictionless hop's apex, 2.0 +
    3^2 / 20); it reaches 2.261 against 2.266, and 2.207 at 10 rad/s against 2.207. The
    soft step hops 4 cm higher than the bound allows at 15 rad/s (2.316), as Box2D v3 does
    in this scene (2.3175; docs/solvers.md), so it runs the two spins at which the box must
    not lift off."""
    highest, rise = spinning_box(
        arch, spin, FX2D_SPIN_GRAVITY, FX2D_GROUND_TOP, solver, **FX2D_SPIN_MATERIAL
    )
    bound = spinning_box_bound(
        spin, FX2D_SPIN_GRAVITY, FX2D_GROUND_TOP, FX2D_SPIN_MATERIAL["dynamic_friction"]
    )
    assert highest < bound + 0.01
    assert rise <= 1e-3 * 0.5 * (1.0 / 6.0) * spin**2


@pytest.mark.parametrize("spin", [5.0, 25.0, 100.0])
def test_spinning_box_never_gains_energy(arch, spin, solver):
    _, rise = spinning_box(arch, spin, solver=solver)
    assert rise <= 0.01 * 0.5 * (1.0 / 6.0) * spin**2


# --- 7. impacts ------------------------------------------------------------------------------


def test_box_thrown_at_the_ground_does_not_gain_energy(arch, solver):
    """A 0.2 m box of 1 kg thrown at (20, -20) m/s from 1 m (410 J): its impacts are
    inelastic (e = 0.1) and frictionless, so its energy can only fall; the one gain the
    solver may make is lifting it out of the ground by the slop it lets it sink, m g
    LINEAR_SLOP = 0.02 J. (The bound was 1 % of the start, 4.1 J.)"""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_box((0.0, -0.5), (400.0, 1.0), mass=0)
    box = scene.add_box((0.0, 1.0), (0.2, 0.2), velocity=(20.0, -20.0))
    start = mechanical_energy(scene, [box], scene.get_state())
    for _ in range(180):
        scene.step(DT)
        energy = mechanical_energy(scene, [box], scene.get_state())
        assert energy <= start + 1.0 * G * LINEAR_SLOP


def test_box_rebounds_at_its_restitution(arch, solver):
    """A 1 m box at (40, -40) m/s, elasticity 0.1, no friction: it leaves the ground at e
    times its impact speed (26.7 m/s before the fix).

    Its bottom, 0.3 m up, hits within the first step (7.5 ms) at no more than 40 + g dt
    m/s, and it leaves at e = min(0.1, 0.1) of that; by the end of the step gravity has
    taken at most g dt off: e 40 - g dt < highest <= e (40 + g dt), 3.84 .. 4.02 m/s. (The
    bounds were 2 .. 4.2 m/s.)"""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_box((0.0, -0.5), (400.0, 1.0), mass=0)
    box = scene.add_box((0.0, 0.8), (1.0, 1.0), velocity=(40.0, -40.0), elasticity=0.1)
    highest = -math.inf
    for _ in range(30):
        scene.step(DT)
        highest = max(highest, float(scene.get_state().velocity[0, box, 1]))
    e = 0.1
    assert e * 40.0 - G * DT < highest <= e * (40.0 + G * DT)


def test_box_landing_flat_across_two_grounds_lands_square(arch, solver):
    """A 1 m box dropped flat onto the seam of two static boxes, its centre over the seam,
    from 40 heights (0.1 to 4 m, a world each; e = 0, friction 0.55). Nothing in the scene
    pushes it sideways or turns it (it is symmetric about the seam), and e = 0: it lands
    square, never leaves the ground again and rests on both tops, its centre over the
    seam. Allowed: 1 mm aside and 1 mrad (rounding and the landing's substep), an upward
    0.05 m/s once landed (the soft contact pushing out what it let sink). Solved one point
    after the other, the first manifold's outer corner stopped the box's near side first
    and set it turning: the soft step left the ground at up to 1 m/s and rested up to
    72 mm aside."""
    drops = 5.6 + 0.1 * np.arange(40)
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver, n_worlds=len(drops))
    for centre in (7.0, 17.0):  # tops at y = 5, the seam at x = 12
        scene.add_box(
            (centre, 4.5),
            (10.0, 1.0),
            mass=0,
            elasticity=0.0,
            static_friction=0.55,
            dynamic_friction=0.55,
        )
    box = scene.add_box(
        (12.0, 8.0), (1.0, 1.0), elasticity=0.0, static_friction=0.55, dynamic_friction=0.55
    )
    state = scene.get_state()
    state.position[:, box, 1] = drops
    scene.set_state(state)
    rising = np.zeros(len(drops))
    for _ in range(240):
        scene.step(DT)
        state = scene.get_state()
        landed = state.position[:, box, 1] < 5.5 + 0.01
        rising = np.maximum(rising, np.where(landed, state.velocity[:, box, 1], 0.0))
    assert np.abs(state.position[:, box, 0] - 12.0).max() < 1e-3
    assert np.abs(state.angle[:, box]).max() < 1e-3
    assert rising.max() < 0.05
    assert np.abs(state.position[:, box, 1] - 5.5).max() < LINEAR_SLOP


def test_box_landing_flat_on_two_boxes_throws_neither_up_soft_step(arch):
    """The soft step: a 1 m box dropped flat (e = 0, friction 0.55) from 40 heights (a world
    each: it hits at 5.4 to 10.3 m/s) onto two 1 m boxes standing side by side on the
    ground, its centre over their seam. e = 0: nothing bounces. Allowed, once it has
    landed: any of the three boxes rising at 0.15 of the impact speed (the impact's
    Gauss-Seidel over the three contacts does not finish in one pass; Box2D v3 in this
    scene: 0.17; the soft step 0.07), the two boxes pushed apart 5 cm at most, the top one
    resting on them. XPBD does not meet this yet (docs/solvers.md): it warm starts the
    impact's impulse into the next substep and throws the boxes up at up to 0.51 of the
    impact speed."""
    drops = 3.0 + 0.1 * np.arange(40)  # the top box's centre; it touches at y = 1.5
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver="soft_step", n_worlds=len(drops))
    material = dict(elasticity=0.0, static_friction=0.55, dynamic_friction=0.55)
    scene.add_box((0.0, -0.5), (40.0, 1.0), mass=0, **material)
    left = scene.add_box((-0.5, 0.5), (1.0, 1.0), **material)
    right = scene.add_box((0.5, 0.5), (1.0, 1.0), **material)
    top = scene.add_box((0.0, 3.0), (1.0, 1.0), **material)
    state = scene.get_state()
    state.position[:, top, 1] = drops
    scene.set_state(state)
    impact = np.sqrt(2.0 * G * (drops - 1.5))
    rising = np.zeros(len(drops))
    for _ in range(300):
        scene.step(DT)
        state = scene.get_state()
        landed = state.position[:, top, 1] < 1.5 + 0.1
        up = state.velocity[:, [left, right, top], 1].max(axis=1)
        rising = np.maximum(rising, np.where(landed, up, 0.0))
    assert (rising / impact).max() < 0.15
    assert np.abs(state.position[:, left, 0] + 0.5).max() < 0.05
    assert np.abs(state.position[:, right, 0] - 0.5).max() < 0.05
    assert np.abs(state.position[:, top, 1] - 1.5).max() < 2 * LINEAR_SLOP


@pytest.mark.parametrize("speed", [500.0, 1000.0])
def test_fast_circle_passing_over_boxes_moves_none_of_them(arch, speed, solver):
    """A circle at 500 or 1,000 m/s passing 3.5 m above ten boxes touches nothing and moves
    nothing (speculative contacts on a stale normal kicked them to ~3,000 m/s at 500 m/s; at
    1,000 m/s the process crashed)."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, enable_sleep=False, solver=solver)
    scene.add_box((0.0, -0.5), (100.0, 1.0), mass=0)
    boxes = [scene.add_box((-5.0 + 1.1 * i, 0.5), (1.0, 1.0)) for i in range(10)]
    scene.add_circle((-30.0, 4.75), 0.25, velocity=(speed, 0.0), gravity_scale=0.0)
    # The same boxes without the circle.
    still = fx.Scene(gravity=(0.0, -G), arch=arch, enable_sleep=False, solver=solver)
    still.add_box((0.0, -0.5), (100.0, 1.0), mass=0)
    for i in range(10):
        still.add_box((-5.0 + 1.1 * i, 0.5), (1.0, 1.0))
    for _ in range(30):
        scene.step(DT)
        still.step(DT)
    moved = scene.get_state().position[0, boxes] - still.get_state().position[0, boxes]
    assert np.abs(moved).max() < 1e-4


def test_box_at_300_m_s_does_not_pass_through_a_thin_wall(arch, solver):
    """A 0.2 m box at 300 m/s (3.5 m a step along x) at a 5 cm wall: at the end of every step
    its right face (centre + 0.1) is left of the wall's left face (-0.025), but for the
    slop it may sink. (The bound was the wall's centre line, at the end only.)"""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver)
    scene.add_box((0.0, 0.0), (0.05, 20.0), mass=0)
    speed = 300.0 / math.sqrt(2.0)
    box = scene.add_box((-3.0, -3.0), (0.2, 0.2), velocity=(speed, speed))
    farthest = -math.inf
    for _ in range(30):
        scene.step(DT)
        farthest = max(farthest, float(scene.get_state().position[0, box, 0]))
    assert farthest <= -0.025 - 0.1 + LINEAR_SLOP


def gauss_seidel_sink(ratio, duration, substeps=11, dt=DT, gravity=G):
    """How deep (m) a body `ratio` times heavier than the one it rests on sinks into it over
    `duration` (s), by the solver's velocity pass alone, in one dimension: warm-started
    accumulated impulses, one Gauss-Seidel sweep a substep over the two contacts, the
    ground's solved again last (the immovable sweep of scenes of uneven masses). A sweep
    moves the light body, not the heavy one, so the pair's impulse grows towards the heavy
    body's weight only over ~ratio substeps: the slow, obvious loop of what the kernels do,
    without their position correction (which only takes overlap back). The largest sink."""
    h = dt / substeps
    w_heavy, w_light = 1.0 / ratio, 1.0
    v_heavy = v_light = upper = lower = sink = deepest = 0.0
    for _ in range(int(round(duration / h))):
        v_heavy -= gravity * h
        v_light -= gravity * h
        v_heavy += w_heavy * upper  # warm start
        v_light += w_light * (lower - upper)
        change = max(upper - (v_heavy - v_light) / (w_heavy + w_light), 0.0) - upper
        upper += change
        v_heavy += w_heavy * change
        v_light -= w_light * change
        for _ in range(2):  # the ground's contact, in its colour and again last
            change = max(lower - v_light / w_light, 0.0) - lower
            lower += change
            v_light += w_light * change
        sink += (v_light - v_heavy) * h
        deepest = max(deepest, sink)
    return deepest


def contact_give(load):
    """How deep (m) a resting contact may sit at any moment: a slop (LINEAR_SLOP), its
    compliance under `load` (N; CONTACT_COMPLIANCE), and one substep's capped push-out
    (MAX_PUSHOUT_SPEED * h): a contact solved before the one above it in a substep is
    pushed that much deeper by it, and takes it back in the next substep."""
    return LINEAR_SLOP + CONTACT_COMPLIANCE * load + MAX_PUSHOUT_SPEED * DT / 11


def test_heavy_box_on_a_light_box_rests_on_the_ground(arch, solver):
    """1,000 kg on 1 kg on the static ground, at rest and touching at the start, 10 s: the
    light box stays on the ground (it was pushed through it to y = -400 m), never deeper
    than a contact's give (contact_give under both weights; the heavy box's contact pushes
    it that deep every substep: it stays 6.5 mm deep). The heavy
    box sinks into the light one (the solver's known limit at such ratios), no deeper than
    the velocity pass's Gauss-Seidel drift (gauss_seidel_sink: 2.6 cm at 1,000:1) past a
    contact's give. Nothing pushes sideways: the light box stays at x = 0. (XPBD's bounds;
    the soft step keeps within them too.)"""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0)
    light = scene.add_box((0.0, 0.5), (1.0, 1.0), mass=1.0)
    heavy = scene.add_box((0.0, 1.5), (1.0, 1.0), mass=1000.0)
    lowest, deepest = math.inf, 0.0
    for _ in range(600):
        scene.step(DT)
        state = scene.get_state()
        light_y, heavy_y = state.position[0, [light, heavy], 1]
        lowest = min(lowest, float(light_y))
        deepest = max(deepest, 1.0 - float(heavy_y - light_y))
    assert lowest >= 0.5 - contact_give(1001.0 * G)
    assert deepest <= contact_give(1000.0 * G) + gauss_seidel_sink(1000.0, 600 * DT)
    assert abs(state.position[0, light, 0]) < 0.01


@pytest.mark.parametrize("size, friction, dt", [(0.001, 0.5, 1 / 600), (0.01, 0.0, DT)])
def test_a_stack_of_tiny_boxes_rests(arch, size, friction, dt, solver, request):
    """Five 1 mm (and 1 cm) boxes stacked on the ground, every other one 1e-4 of its size
    off centre: they stay stacked, level and still for 2 s (10 s) (they reached ~1e9 m/s at
    first, then toppled and slid apart: one sweep over a manifold's two points left a tilt
    growing as 1 / size).

    The 1 mm stack steps at dt = 1/600 s, with friction (mu 0.5): a box's rocking time
    scale, sqrt(size / g), is 10 ms at 1 mm, less than a 1/60 s step, and there its rocking
    grows: measured, five 1 mm boxes 1e-7 m off centre at 1/60 s toppled (0.46 m apart in
    5 s, with friction or without; perfectly centred they stood, which hid it on the CPU
    until CUDA's rounding broke the symmetry); at 1/600 s without friction they drift 6 % of
    their size in 2 s. The 1 cm stack (time scale 32 ms) stands at 1/60 s, frictionless.

    The soft step does not hold this, and Box2D v3 does not either (issue 77;
    docs/solvers.md): a soft contact's static deflection does not shrink with the bodies
    (g / w^2 = 0.28 mm at 30 Hz, Box2D's contactHertz), and the contact under box k of a
    column closes 2.5 k g / w^2 (soft_column_drop: 7.3 mm for the five, more than the 1 mm
    boxes and most of the 1 cm ones). Measured: both stacks topple, their boxes turned 90
    degrees; the 1 mm boxes up to 2.5 sizes aside, at up to 0.16 m/s; the 1 cm boxes 1.95
    m aside, at up to 0.43 m/s. Box2D v3 (pyb2d3, 4 substeps, the same stacks) topples
    both, turned 90 degrees: the 1 mm boxes 2.5 sizes aside at up to 0.15 m/s, the 1 cm
    boxes 5 m aside at up to 0.53 m/s (Box2D is tuned for bodies of 0.1 to 10 m). Stiffer
    contacts do not fit the 1 cm stack's step: a spring stiffer than a quarter of the
    substep rate rings (STIFFEST_FRACTION: 60 Hz at 1/60 s), and at 60 Hz the column
    still closes 1.8 mm, past the 1.77 mm allowed below."""
    if solver == "soft_step":
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason=f"soft step, as Box2D v3: five {size * 1000:g} mm boxes topple (turned "
                "90 degrees; Box2D's too): its contacts' static deflection (0.28 mm at 30 Hz, "
                "7.3 mm summed over the column) does not shrink with the boxes",
            )
        )
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_box(
        (0.0, -0.5), (10.0, 1.0), mass=0, static_friction=friction, dynamic_friction=friction
    )
    boxes = [
        scene.add_box(
            (1e-4 * size * (i % 2), size * (i + 0.5)),
            (size, size),
            static_friction=friction,
            dynamic_friction=friction,
        )
        for i in range(5)
    ]
    resting = size * (np.arange(5) + 0.5)
    fastest = 0.0
    for _ in range(600 if dt == DT else 1200):
        scene.step(dt)
        state = scene.get_state()
        fastest = max(fastest, float(np.abs(state.velocity[0, boxes]).max()))
    # At rest from the start: a substep's gravity, g h (9.81 / 660 = 0.015 m/s at 1/60 s),
    # is all a box gains before its contacts take it back (one falling its own height
    # would reach 0.14 m/s at 1 mm, 0.44 at 1 cm).
    assert fastest <= G * dt / scene.substeps
    assert np.abs(state.position[0, boxes, 0]).max() < 0.05 * size
    assert np.abs(state.angle[0, boxes]).max() < 0.01
    # Each of the 5 contacts rests at most its slop deep: SLOP_FRACTION of the box's bounding
    # radius (size / sqrt 2), 0.035 size, at both sizes; the top box at most 5 of them,
    # 0.177 size, down (plus the contacts' compliance under 5 + 4 + ... + 1 boxes' weight,
    # 1.5e-6 m). (The bound was 0.2 size.)
    slop = min(LINEAR_SLOP, SLOP_FRACTION * scene.body_shape(boxes[0]).bounding_radius)
    sink = 5 * slop + CONTACT_COMPLIANCE * 15 * G
    assert np.abs(state.position[0, boxes, 1] - resting).max() <= sink


# --- 6. rigs: pairs that never collide -------------------------------------------------------


def test_disable_collision_lets_two_overlapping_bodies_pass(arch, solver):
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver)
    a = scene.add_box((0.0, 0.0), (1.0, 1.0))
    b = scene.add_box((0.5, 0.0), (1.0, 1.0))
    c = scene.add_box((3.0, 0.0), (1.0, 1.0))
    d = scene.add_box((3.5, 0.0), (1.0, 1.0))
    scene.disable_collision(b, a)
    for _ in range(30):
        scene.step(DT)
    state = scene.get_state()
    # a and b overlap half their width and stay put; c and d, the control, are pushed apart.
    np.testing.assert_allclose(state.position[0, b] - state.position[0, a], (0.5, 0.0), atol=1e-6)
    # c and d are pushed apart until a slop deep, where the position pass stops (it moves
    # poses, not velocities: they stay there); 1e-5 for float32. The soft step pushes
    # through velocities, each capped at 3 m/s, to the same slop: they reach it too
    # (measured: 1.005 m apart after 0.5 s, still parting at 0.12 m/s each: its relax does
    # not take all of the push-out back).
    assert state.position[0, d, 0] - state.position[0, c, 0] >= 1.0 - LINEAR_SLOP - 1e-5
    pairs = {(int(i), int(j)) for _, i, j in scene.candidate_pairs()}
    assert (a, b) not in pairs and (c, d) in pairs


def test_disable_collision_refuses_bad_bodies(arch):
    scene = fx.Scene(arch=arch)
    a = scene.add_circle((0.0, 0.0), 0.5)
    with pytest.raises(ValueError, match="body_a and body_b"):
        scene.disable_collision(a, a)
    with pytest.raises(ValueError, match="body_b"):
        scene.disable_collision(a, 5)
    with pytest.raises(TypeError, match="body_a"):
        scene.disable_collision("x", a)


def test_prismatic_weld_conserves_momentum_and_angular_momentum(arch, solver):
    """Two boxes welded by a prismatic joint of travel [0, 0], side by side, no gravity; the
    child starts moving across the axis. The joint's pushes act at the child's anchor on both
    bodies, so linear and angular momentum (about the origin) stay what they were, and the
    pair turns as one body (the weld's corrections pushed each body at its own centre, a
    couple that spun the rig)."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver)
    parent = scene.add_box((0.0, 0.0), (1.25, 1.5), mass=2.0)
    child = scene.add_box((1.72, -0.175), (2.25, 1.0), mass=3.0, velocity=(0.0, 1.0))
    scene.add_prismatic_joint(parent, child, axis=(1.0, 0.0), position_min=0.0, position_max=0.0)
    scene.disable_collision(parent, child)
    masses = np.array([2.0, 3.0])
    inertia = np.array([2.0 * (1.25**2 + 1.5**2) / 12.0, 3.0 * (2.25**2 + 1.0) / 12.0])

    def momenta(state):
        x, v = state.position[0, [parent, child]], state.velocity[0, [parent, child]]
        w = state.angular_velocity[0, [parent, child]]
        linear = (masses[:, None] * v).sum(axis=0)
        angular = np.sum(masses * (x[:, 0] * v[:, 1] - x[:, 1] * v[:, 0]) + inertia * w)
        return linear, angular

    for _ in range(5):  # the weld's first correction takes the child's velocity along
        scene.step(DT)
    linear0, angular0 = momenta(scene.get_state())
    np.testing.assert_allclose(linear0, (0.0, 3.0), atol=1e-3)
    for _ in range(120):
        scene.step(DT)
    state = scene.get_state()
    linear, angular = momenta(state)
    np.testing.assert_allclose(linear, linear0, atol=1e-3 * 3.0)
    assert angular == pytest.approx(angular0, rel=1e-2, abs=1e-3)
    assert state.angle[0, parent] == pytest.approx(state.angle[0, child], abs=1e-4)
    assert abs(state.angular_velocity[0, parent]) > 0.1  # the child's push turns the pair


def truck_rig(scene, head, back, wheel_front, wheel_back):
    """Fx2D's truck rig (examples/truck/main.cpp): head and back welded, a wheel hinged to
    each, and the front wheel never colliding with the back."""
    scene.add_prismatic_joint(head, back, axis=(1.0, 0.0), position_min=0.0, position_max=0.0)
    scene.add_revolute_joint(head, wheel_front, anchor=(0.1, -0.65))
    scene.add_revolute_joint(back, wheel_back, anchor=(0.48, -0.475))
    scene.disable_collision(wheel_front, back)


def test_truck_rig_rests_on_flat_ground(arch, solver):
    """The truck of Fx2D's example on flat ground, wheels touching it: it stays level and
    still (it pitched onto its back, gaining 48 J in 2 s)."""
    scene = fx.Scene(gravity=(0.0, -10.0), arch=arch, substeps=14, solver=solver)
    friction = {"static_friction": 0.3, "dynamic_friction": 0.2}
    scene.add_box((10.0, 1.7), (20.0, 1.0), mass=0, static_friction=0.55, dynamic_friction=0.4)
    head = scene.add_box((9.0, 3.25), (1.25, 1.5), mass=2.0, **friction)
    back = scene.add_box((10.72, 3.075), (2.25, 1.0), mass=2.0, **friction)
    front_wheel = scene.add_circle((9.1, 2.6), 0.4, mass=0.25, **friction)
    back_wheel = scene.add_circle((11.2, 2.6), 0.4, mass=0.25, **friction)
    truck_rig(scene, head, back, front_wheel, back_wheel)
    start = scene.get_state()
    for _ in range(400):
        scene.step(0.005)
    state = scene.get_state()
    # The wheels start touching the ground (centres 0.4 above its top, 2.2): each sinks at
    # most a slop (the compliance under the rig's 45 N: 0.5 um), so the rig settles by at
    # most a slop and tilts by at most a slop over the wheels' 2.1 m. (The bounds were
    # 1e-3 rad and 5 mm.)
    assert np.abs(state.angle[0, [head, back]]).max() <= LINEAR_SLOP / 2.1
    np.testing.assert_allclose(state.position[0, 1:], start.position[0, 1:], atol=LINEAR_SLOP)


def test_fx2d_truck_rolls_down_its_ramp_upright_as_in_fx2d(arch, solver):
    """Fx2D's truck example (fx2d_gpu/examples/truck.yml and main.cpp's rig, 600 steps of
    5 ms): it rolls down the ramp, stops against the box and stays upright. Fx2D's C++
    engine, built headless, gives head x = 4.539 m, y = 2.539 m at 3 s, chassis pitch at
    most 0.108 rad, no energy gained; fx2d_gpu tipped over (1.68 rad, +30 J)."""
    from benchmarks import fx2d_scenes
    from fx2d_gpu import examples

    substeps = fx2d_scenes.SUBSTEPS if solver == "xpbd" else None  # the solver's default
    figures = fx2d_scenes.truck(
        examples.path("truck"), arch=arch, substeps=substeps, solver=solver
    )["figures"]
    assert figures["head_x_end"] == pytest.approx(4.539, abs=0.3)
    assert figures["head_y_end"] == pytest.approx(2.539, abs=0.1)
    assert figures["head_theta_max"] < 0.2
    assert figures["energy_rise_max"] < 0.5  # J, of about 40 J of potential energy released


# --- regression guard: stacking did not get worse ---------------------------------------------


def test_fifteen_box_column_sinks_a_few_millimetres(arch, solver):
    """Fx2D's 15-box column sinks 185 mm; fx2d_gpu sank 3.3 mm before issue 12's changes.

    Both bounds guard this engine's own figures on this scene, not physical limits: each of
    the 15 contacts may rest a slop deep (15 x 2 mm = 30 mm), and its top sinks 3.3 mm
    (5 mm keeps it there); frictionless, nothing pushes the boxes sideways, but each
    contact may rest tilted by up to a slop over the box's 1 m, and the column settles
    with its top 1.9 cm aside (2 cm keeps it there).

    The soft step's column is springs: its top drops the summed static deflections of its
    contacts (soft_column_drop: 73.8 mm for 15 boxes; tests/test_soft_step.py checks the
    formula on ten), and no more at any moment (its contacts are overdamped, damping ratio
    10: they never sink past their rest). Measured 71.8 mm, top 0.0 mm aside."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0)
    boxes = [scene.add_box((0.0, 0.5 + i), (1.0, 1.0)) for i in range(15)]
    for _ in range(300):
        scene.step(DT)
    state = scene.get_state()
    sink = 0.005 if solver == "xpbd" else soft_column_drop(len(boxes), scene.substeps)
    assert 14.5 - state.position[0, boxes[-1], 1] < sink
    assert np.abs(state.position[0, boxes, 0]).max() < 0.02


def summed_soft_deflections(masses, substeps=4):
    """How deep (m) each box of a stack of 1 m boxes (masses bottom up, kg) rests on the
    soft step's contacts alone, with nothing held (Box2D v3 gives these): the contact under
    box k carries the boxes from k up on two corner points, 1/m_eff = 2.5 / m_k +
    2.5 / m_(k-1) each (a corner of a 1 m box: 1/m + 0.25 / (m / 6)), the ground's 2.5 / m_0;
    a point closes (load / m_eff) g / w^2 at the contact's hertz (Box2D's 30 Hz, at most a
    quarter of the substep rate, twice that against the static ground), and box k sinks by
    the sum of the closings below it."""
    rate = substeps / DT
    sinks, total = [], 0.0
    for k, mass in enumerate(masses):
        hertz = min(30.0, 0.25 * rate) * (2.0 if k == 0 else 1.0)
        inverse = 2.5 / mass + (2.5 / masses[k - 1] if k > 0 else 0.0)
        total += 0.5 * sum(masses[k:]) * inverse * G / (2.0 * math.pi * hertz) ** 2
        sinks.append(total)
    return np.array(sinks)


@pytest.mark.parametrize("masses", [(1.0, 10.0, 100.0), (100.0, 10.0, 1.0), (1.0, 100.0)])
def test_stacks_of_unequal_masses_hold(arch, masses, solver):
    """Boxes of very unequal masses, at rest and touching at the start: no box ever sinks
    deeper than the contacts below it allow (1:10:100 fell through the ground before).

    XPBD's bound: each contact at most its give deep at any moment (contact_give: a slop,
    its compliance under the load, one substep's push-out) and a slop plus its compliance
    once settled (the last second): the k-th box from the ground at most k of those below
    its resting height. (The bound was 2 cm for all.) The soft step's: the summed static
    deflections of its contacts (summed_soft_deflections), at any moment (its contacts are
    overdamped springs, damping ratio 10: they never sink past their rest). Shock
    propagation holds a light box under a heavy one still, so those sink less than that."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0)
    boxes = [scene.add_box((0.0, 0.5 + i), (1.0, 1.0), mass=m) for i, m in enumerate(masses)]
    resting = 0.5 + np.arange(len(boxes))
    below = np.arange(len(boxes)) + 1  # contacts under each box
    allowed = below * contact_give(sum(masses) * G)
    settled = below * (LINEAR_SLOP + CONTACT_COMPLIANCE * sum(masses) * G) + 1e-4
    if solver == "soft_step":
        allowed = settled = summed_soft_deflections(masses) + 1e-6  # + float32 rounding
    worst, worst_settled = np.zeros(len(boxes)), np.zeros(len(boxes))
    for step in range(300):
        scene.step(DT)
        sink = resting - scene.get_state().position[0, boxes, 1]
        worst = np.maximum(worst, sink)
        if step >= 240:
            worst_settled = np.maximum(worst_settled, sink)
    assert np.all(worst <= allowed), (worst, allowed)
    assert np.all(worst_settled <= settled), (worst_settled, settled)
