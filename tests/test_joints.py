"""Joints and motors against analytic results and their own limits (dt 1/60, 11 substeps)."""

import math

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.device import MAX_COLORS
from fx2d_gpu.physics.solver.joints import JOINT_COMPLIANCE
from fx2d_gpu.physics.solver.soft_joints import JOINT_HERTZ, JOINT_STIFFEST_FRACTION

from .helpers import DT, G, joint_control_demo, mechanical_energy, run, soft_deflection
from .reference.joints import pid_arm_angles


def test_pendulum_period(arch, solver):
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    pivot = scene.add_box((0.0, 0.0), (0.1, 0.1), mass=0)
    amplitude = 0.05  # rad: small, so the period is 2 pi sqrt(L / g)
    bob = scene.add_circle((math.sin(amplitude), -math.cos(amplitude)), 0.05, mass=1.0)
    scene.add_revolute_joint(pivot, bob)
    xs, lengths = [], []

    def record():
        s = scene.get_state()
        xs.append(s.position[0, bob, 0])
        lengths.append(np.linalg.norm(s.position[0, bob]))

    run(scene, seconds=10.0, each=record)
    xs = np.array(xs)
    # Downward zero crossings, interpolated between frames.
    crossings = [
        i - 1 + xs[i - 1] / (xs[i - 1] - xs[i]) for i in range(1, len(xs)) if xs[i - 1] > 0 >= xs[i]
    ]
    period = np.diff(crossings).mean() * DT
    assert period == pytest.approx(2 * math.pi * math.sqrt(1.0 / G), rel=0.01)
    assert np.abs(np.array(lengths) - 1.0).max() < 1e-3
    assert xs.max() == pytest.approx(math.sin(amplitude), rel=0.05)  # little damping


def test_revolute_limit_holds_under_strong_torque(arch, solver):
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver)
    base = scene.add_box((0.0, 0.0), (0.2, 0.2), mass=0)
    arm = scene.add_box((1.0, 0.0), (2.0, 0.2))
    joint = scene.add_revolute_joint(
        base, arm, angle_min=-math.radians(30), angle_max=math.radians(30)
    )
    worst = 0.0
    for torque in (80.0, -80.0):
        for _ in range(120):
            scene.apply_force(arm, (0.0, 0.0), torque=torque)
            scene.step(DT)
            angle = abs(scene.joint_state().position[0, joint])
            worst = max(worst, angle)
    assert math.radians(28) < worst < math.radians(32)
    gap = np.linalg.norm(np.diff(scene.joint_anchors()[0, joint], axis=0))
    assert gap < 0.01


def test_prismatic_travel_limits_hold(arch, solver):
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    rail = scene.add_box((0.0, 0.0), (10.0, 0.2), mass=0, angle=0.3)
    start = np.array([math.cos(0.3), math.sin(0.3)]) * 0.5
    slider = scene.add_box(tuple(start), (0.4, 0.4), angle=0.3)
    joint = scene.add_prismatic_joint(
        rail, slider, axis=(1.0, 0.0), position_min=-1.0, position_max=2.0
    )
    axis = np.array([math.cos(0.3), math.sin(0.3)])
    for force, end in ((60.0, 2.0), (-60.0, -1.0)):
        for _ in range(180):
            scene.apply_force(slider, tuple(force * axis))
            scene.step(DT)
        travel = scene.joint_state().position[0, joint]
        assert abs(travel - end) < 0.01
        s = scene.get_state()
        offset = s.position[0, slider] - start
        across = offset @ np.array([-axis[1], axis[0]])
        assert abs(across) < 0.01 and abs(s.angle[0, slider] - 0.3) < 0.01


def chain_peak_tension(n_links, mass, length, inertia, energy):
    """Bound, N, on the force in any joint of a chain of n_links links (mass kg each,
    length m between its joints, inertia kg m^2 about its centre) holding at most `energy`
    J of kinetic energy: the chain's weight plus the whip's pull.

    A part of the chain turning at w about a joint as one piece pulls on it with
    m_part w^2 d (d: its centre's distance from the joint), and its energy there is
    1/2 I_joint w^2: the pull is at most 2 energy m_part d / I_joint, the most for the
    shortest part, one link (d = l/2, I_joint = I + m (l/2)^2): the whip's crack, the
    energy gathered in the tip as the chain straightens behind it, and the straight chain
    carries that pull down to the root. The joints hold the links' weight on top, n m G at
    the root. (Links spinning against each other could pull harder with that energy; a
    chain released from rest does not: its joints open no further than under half of it.)"""
    half = 0.5 * length
    spin_squared = 2.0 * energy / (inertia + mass * half**2)  # all the energy in the tip
    return n_links * mass * G + mass * half * spin_squared


def xpbd_chain_gap(tension, mass, h):
    """Bound, m, on how far XPBD leaves a joint between two links of `mass` kg open under
    `tension` N along the chain, at a substep of h s.

    XPBD's multiplier is the joint's force times h^2: its corrections in a substep add up
    to K T h^2, K = 2/m the two links' inverse mass along the chain (no lever: the chain
    whips straight, the worst joint measured bent by 0 to 2 degrees). Each update closes
    the joint (joints.anchor_constraint, dlambda = -C / (K + compliance / h^2)); what is
    left is what a neighbour solved after it re-opens, moving the link they share by half
    its own correction, at most half of K T h^2 (the root's neighbour too: the anchor is
    static), and a compliance stretches it T * compliance more:
    gap <= T (h^2 / m + JOINT_COMPLIANCE)."""
    return tension * (h * h / mass + JOINT_COMPLIANCE)


def soft_chain_gap(tension, mass, hertz):
    """Bound, m, on how far the soft step's joint between two links of `mass` kg opens
    under `tension` N along the chain, its spring at `hertz`.

    Box2D v3's soft constraint is a spring k = m_eff w^2 (w = 2 pi hertz) and a damper
    2 zeta m_eff w across the anchors, m_eff = 1/K: K T = w^2 C + 2 zeta w dC/dt, so the
    gap C stays below the most K T / w^2 (the damper only delays the spring). K = 2/m
    between two links along the chain, as in xpbd_chain_gap (the root's, 1/m, opens half as
    far)."""
    return 2.0 * tension / (mass * (2.0 * math.pi * hertz) ** 2)


def test_hanging_chain_stays_connected(arch, solver):
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    anchor = scene.add_box((0.0, 0.0), (0.2, 0.2), mass=0)
    previous = anchor
    links = []
    for i in range(20):
        link = scene.add_box((0.25 + 0.5 * i, 0.0), (0.5, 0.1), mass=0.5)
        scene.add_revolute_joint(previous, link, anchor=(0.0, 0.0) if i == 0 else (0.25, 0.0))
        links.append(link)
        previous = link
    total_mass = sum(scene.body_mass(b) for b in links)

    def energy():
        return mechanical_energy(scene, links)

    start_energy = energy()
    worst_gap, most_energy = 0.0, -np.inf

    def record():
        nonlocal worst_gap, most_energy
        anchors = scene.joint_anchors()[0]
        worst_gap = max(worst_gap, np.linalg.norm(anchors[:, 0] - anchors[:, 1], axis=1).max())
        most_energy = max(most_energy, energy())

    run(scene, seconds=10.0, each=record)
    # The joints' pull peaks as the chain whips (chain_peak_tension): with at most the
    # energy it was released with (hanging straight down, its centre 5 m lower: 490.5 J)
    # plus the 2 % the energy check below allows (19.6 J), 3128 N. Under that XPBD's joints
    # stay within 14.4 mm (xpbd_chain_gap, 11 substeps), the soft step's 60 Hz springs
    # within 88.0 mm (soft_chain_gap). Measured (cpu): XPBD 3.57 mm, the root joint at
    # 4.4 s; the soft step 38.3 mm, the tip's joint as the tip cracks at 4.4 s (27 m/s, its
    # joint bent 2 degrees). Hanging at rest, joint j > 0 carries (n - j) m g: XPBD leaves
    # it about (n - j) g h^2 / 2 open (half its model's), the soft step 2 (n - j) g / w^2 (its
    # model's, to 0.1 %). Weakened on purpose, they fail: XPBD with one pass of one sweep
    # (JOINT_ITERATIONS, JOINT_SWEEPS) opened 32.8 mm, the soft step's springs solved at
    # 15 Hz 110 mm (at 30 Hz 51 mm, within).
    mass, inertia = scene.body_mass(links[0]), scene.body_inertia(links[0])
    released = total_mass * G * 0.5 * (0.5 * len(links))
    slack = 0.02 * total_mass * G * 10.0
    tension = chain_peak_tension(len(links), mass, 0.5, inertia, released + slack)
    if solver == "xpbd":
        bound = xpbd_chain_gap(tension, mass, DT / scene.substeps)
    else:
        hertz = min(JOINT_HERTZ, JOINT_STIFFEST_FRACTION * scene.substeps / DT)
        bound = soft_chain_gap(tension, mass, hertz)
    assert worst_gap < bound
    # No explosion: the chain never has more energy than it was released with (the tip may
    # whip faster than free fall, but energy only leaves the system).
    assert most_energy < start_energy + 0.02 * total_mass * G * 10.0
    assert scene.get_state().position[0, links[-1], 1] < -5.0  # it did swing down


def test_joint_control_demo_follows_its_pid(arch, solver):
    scene, arm_motor, slider_motor = joint_control_demo(arch, solver=solver)
    angles = []
    run(scene, seconds=30.0, each=lambda: angles.append(scene.joint_state().position[0, arm_motor]))
    # Pinned at the base, the arm turns with inertia I + m d^2 = 0.5 + 1 * 1^2 about it.
    expected = pid_arm_angles(30.0, 1.5, 1.0, (6.0, 0.05, 0.4), 25.0)
    np.testing.assert_allclose(angles[:300], expected[:300], atol=0.05)  # the first 5 s
    # These gains are far below critical damping (D = 0.4 vs 2 sqrt(P I) = 6): the arm rings
    # and is within 0.05 rad of its 1 rad target only after ~20 s, in both.
    assert np.abs(np.array(angles[-120:]) - 1.0).max() < 0.05
    assert np.abs(expected[-120:] - 1.0).max() < 0.05
    # The slider held its position target, and follows a new one.
    assert abs(scene.joint_state().position[0, slider_motor]) < 0.01
    scene.set_joint_target(slider_motor, 1.5)
    run(scene, seconds=5.0)
    assert abs(scene.joint_state().position[0, slider_motor] - 1.5) < 0.05


def test_motorised_cart_drives_at_its_wheel_speed(arch, solver):
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    grip = dict(static_friction=1.0, dynamic_friction=1.0)
    scene.add_box((0.0, -0.5), (200.0, 1.0), mass=0, **grip)
    radius = 0.3
    chassis = scene.add_box((0.0, 0.7), (2.0, 0.3), mass=4.0, **grip)
    omega = -6.0  # rad/s, clockwise: drives towards +x at -omega * r
    for x in (-0.8, 0.8):
        wheel = scene.add_circle((x, radius), radius, mass=1.0, **grip)
        scene.add_revolute_joint(
            chassis,
            wheel,
            anchor=(x, radius - 0.7),
            control_mode="velocity",
            target=omega,
            pid=(30.0, 0.0, 0.0),
            max_effort=60.0,
        )
    run(scene, seconds=2.0)
    x0 = scene.get_state().position[0, chassis, 0]
    run(scene, seconds=2.0)
    speed = (scene.get_state().position[0, chassis, 0] - x0) / 2.0
    # With mu = 1 the wheels roll without slipping, and on flat ground nothing loads the
    # motors once at speed, so their P control holds the target: the cart runs at
    # -omega r = 1.8 m/s. It gets there in ~0.01 s (each wheel's 30 N m s/rad against its
    # own 0.045 kg m^2 and half the 6 kg rig at r: 0.32 kg m^2), long before the timing
    # starts at 2 s. 1 % for the substeps. (The bound was 10 %.)
    assert speed == pytest.approx(-omega * radius, rel=0.01)


def test_batched_worlds_reach_their_own_targets(arch, solver):
    n = 64
    scene = fx.Scene(gravity=(0.0, 0.0), n_worlds=n, arch=arch, solver=solver)
    base = scene.add_box((0.0, 0.0), (0.2, 0.2), mass=0)
    arm = scene.add_box((0.5, 0.0), (1.0, 0.1), mass=1.0)
    joint = scene.add_revolute_joint(
        base, arm, control_mode="position", pid=(20.0, 0.0, 6.0), max_effort=50.0
    )
    targets = np.linspace(-1.5, 1.5, n)
    scene.set_joint_target(joint, targets)
    run(scene, seconds=5.0)
    np.testing.assert_allclose(scene.joint_state().position[:, joint], targets, atol=0.02)


def test_joint_validation(arch):
    scene = fx.Scene(arch=arch)
    a = scene.add_box((0, 0), (1, 1), mass=0)
    b = scene.add_box((1, 0), (1, 1))
    with pytest.raises(ValueError, match="child"):
        scene.add_revolute_joint(a, 7)
    with pytest.raises(ValueError, match="different"):
        scene.add_revolute_joint(b, b)
    with pytest.raises(ValueError, match="control_mode"):
        scene.add_revolute_joint(a, b, control_mode="torque")
    with pytest.raises(ValueError, match="angle_min"):
        scene.add_revolute_joint(a, b, angle_min=1.0, angle_max=0.0)
    with pytest.raises(ValueError, match="axis"):
        scene.add_prismatic_joint(a, b, axis=(0.0, 0.0))
    with pytest.raises(ValueError, match="target"):
        j = scene.add_revolute_joint(a, b)
        scene.set_joint_target(j, np.zeros(3))
    assert scene.n_joints == 1


def test_switching_motor_mode(arch, solver):
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver)
    base = scene.add_box((0.0, 0.0), (0.2, 0.2), mass=0)
    wheel = scene.add_circle((0.0, 0.0), 0.5, mass=1.0)
    joint = scene.add_revolute_joint(
        base, wheel, control_mode="position", target=0.5, pid=(20.0, 0.0, 4.0), max_effort=50.0
    )
    run(scene, seconds=3.0)
    assert abs(scene.joint_state().position[0, joint] - 0.5) < 0.02
    scene.set_joint_mode(joint, "velocity", pid=(10.0, 0.0, 0.0))
    scene.set_joint_target(joint, 3.0)
    run(scene, seconds=2.0)
    assert scene.joint_state().rate[0, joint] == pytest.approx(3.0, rel=0.02)
    scene.set_joint_mode(joint, "effort")
    scene.set_joint_target(joint, 1.0)  # N m on I = 0.125 kg m^2: 8 rad/s^2
    rate0 = scene.joint_state().rate[0, joint]
    run(scene, seconds=0.5)
    assert scene.joint_state().rate[0, joint] - rate0 == pytest.approx(4.0, rel=0.02)


def test_joined_bodies_do_not_collide(arch):
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
    a = scene.add_box((0.0, 0.0), (1.0, 1.0))
    b = scene.add_box((0.5, 0.0), (1.0, 1.0))  # overlapping a by half
    c = scene.add_box((1.2, 0.0), (1.0, 1.0))  # overlapping b, not joined to it
    scene.add_revolute_joint(a, b, anchor=(0.25, 0.0))
    pairs = {(int(x), int(y)) for _, x, y in scene.candidate_pairs()}
    assert (a, b) not in pairs and (b, c) in pairs


def test_hub_with_many_joints_solves_every_joint(arch, solver, request):
    """MAX_COLORS + 9 spokes on one dynamic hub: more constraints on one body than there are
    colours (10 go to the overflow colour).

    The soft step does not hold this scene, and Box2D v3 does not either (issue 77): the
    joints' impulses, warm started and swept once in the solve and once in the relax each
    substep, diverge on a hub this light for the joints it carries (0.09 kg m^2; the
    spokes weigh 0.025 kg m^2 each at the anchors' 0.5 m, 11 times the hub's in all),
    with or without an overflow colour. Measured (3 s, the same scene in Box2D v3, pyb2d3,
    4 substeps): Box2D's joints open 0.41 m (its hub spun past 75 rad/s); with MAX_COLORS
    - 2 spokes, none in the overflow colour, the soft step tears too (step 43, joint 4
    0.105 m out) and Box2D opens 0.37 m; with no gravity and the spokes not colliding,
    both hold 30 spokes solved in creation order (the soft step's small-world path: 0.5
    mm; Box2D 2.4 mm) and both tear at 32 (Box2D 0.53 m). The soft step's colour order
    (a permutation of the joints round the hub) tears there at 30 already (step 30), so
    it is a little less stable than creation order, not the cause. Without the joints'
    warm start (an experiment, not Box2D's design, against which the other joint tests
    are measured) the soft step holds this scene: 9.3 mm. A heavier hub holds its
    overflow joints (test_a_heavy_hub_holds_its_overflow_joints)."""
    if solver == "soft_step":
        request.applymarker(
            pytest.mark.xfail(
                strict=True,
                reason="soft step: the 2 kg hub's warm-started soft joints diverge (step 23 "
                "raises SimulationError, joint 4 0.137 m out; 1 cm allowed), as Box2D v3's "
                "do (pyb2d3: 0.41 m); not the overflow colour's doing: with MAX_COLORS - 2 "
                "spokes, none in it, the soft step tears too",
            )
        )
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, solver=solver)
    hub = scene.add_circle((0.0, 0.0), 0.3, mass=2.0)
    pin = scene.add_box((0.0, 0.0), (0.1, 0.1), mass=0)
    scene.add_revolute_joint(pin, hub)
    spokes = []
    for angle in np.linspace(0, 2 * np.pi, MAX_COLORS + 9, endpoint=False):
        direction = np.array([np.cos(angle), np.sin(angle)])
        spoke = scene.add_box(tuple(direction * 0.8), (0.2, 0.05), angle=angle, mass=0.1)
        scene.add_revolute_joint(hub, spoke, anchor=tuple(direction * 0.5))
        spokes.append(spoke)
    worst, overflow = 0.0, 0

    def record():
        nonlocal worst, overflow
        anchors = scene.joint_anchors()[0]
        worst = max(worst, np.linalg.norm(anchors[:, 0] - anchors[:, 1], axis=1).max())
        overflow = max(overflow, scene.n_overflow)

    state = scene.get_state()
    state.angular_velocity[0, hub] = 3.0  # spin it, so nothing sleeps for a while
    scene.set_state(state)
    run(scene, seconds=3.0, each=record)
    assert overflow > 0  # some joints were solved in the overflow colour (per world)
    assert worst < 0.01


@pytest.mark.parametrize("team", [True, False], ids=["team", "per-stage"])
def test_a_heavy_hub_holds_its_overflow_joints(arch, solver, team):
    """The hub above, MAX_COLORS + 9 spokes, 10 joints in the overflow colour, but 10 kg,
    no gravity, and its spokes not colliding with one another: only the joints act, and
    every joint holds within 1 mm for 3 s under either solver, its overflow joints solved
    world by world (solver/overflow.py's kernel on the per-stage path, team=False; the
    team's own launch, team=True). The 2 kg hub's joints diverge in the soft step and in
    Box2D v3 whatever the colouring (test_hub_with_many_joints_solves_every_joint); this
    one shows the soft step's overflow colour solved. Measured: 0.4 mm (Box2D v3, pyb2d3,
    4 substeps: 0.4 mm); with the soft step's passes leaving the overflow's joints
    unsolved (overflow.py, per stage), a joint tore at step 4 (SimulationError)."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch, solver=solver, step_options={"team": team})
    hub = scene.add_circle((0.0, 0.0), 0.3, mass=10.0)
    pin = scene.add_box((0.0, 0.0), (0.1, 0.1), mass=0)
    scene.add_revolute_joint(pin, hub)
    spokes = []
    for angle in np.linspace(0, 2 * np.pi, MAX_COLORS + 9, endpoint=False):
        direction = np.array([np.cos(angle), np.sin(angle)])
        spoke = scene.add_box(tuple(direction * 0.8), (0.2, 0.05), angle=angle, mass=0.1)
        scene.add_revolute_joint(hub, spoke, anchor=tuple(direction * 0.5))
        spokes.append(spoke)
    scene.add_group("spokes", spokes)  # they never collide with one another
    worst, overflow = 0.0, 0

    def record():
        nonlocal worst, overflow
        anchors = scene.joint_anchors()[0]
        worst = max(worst, np.linalg.norm(anchors[:, 0] - anchors[:, 1], axis=1).max())
        overflow = max(overflow, scene.n_overflow)

    state = scene.get_state()
    state.angular_velocity[0, hub] = 3.0
    scene.set_state(state)
    run(scene, seconds=3.0, each=record)
    assert overflow > 0
    assert worst < 0.001


def test_a_free_pendulum_keeps_its_swing_and_energy(arch, solver):
    """A 1 kg disc (r 0.1 m) on a revolute joint 1 m below a static pivot, released from 10
    degrees, no damping: a frictionless pendulum keeps its amplitude and its energy (the
    anchor solve drained them before: 9.41 degrees after 10 s, 14 % of the swing energy).
    Bounds: the swing energy is m g L (1 - cos 10 deg) = 0.149 J; 1 % of it over 10 s is
    the bar, and 0.05 degrees is half a percent of the amplitude: 1 % of the energy.

    The soft step's joint is a spring (soft_joints.JOINT_HERTZ, 60 Hz at 4 substeps): it
    stretches under the rod's tension T by T / (m w^2) (the anchor's lever is along the
    rod: 1/m_eff = 1/m), and the bob, lower by that, has less potential energy than a rigid
    pendulum's: at most m g T_max / (m w^2), T_max = m g (3 - 2 cos 10 deg) at the bottom:
    0.070 mm: the energy may read up to 0.70 mJ (0.47 % of the swing energy) lower.
    Measured: the stretch 0.047 to 0.079 mm, the energy 1.67 mJ low to 0.26 mJ high and no
    drift (the same range in the last 2 s), the amplitude 9.9999 degrees."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, enable_sleep=False, solver=solver)
    pivot = scene.add_circle((0.0, 0.0), 0.02, mass=0)
    start = math.radians(10.0)
    bob = scene.add_circle((math.sin(start), -math.cos(start)), 0.1, mass=1.0)
    scene.add_revolute_joint(pivot, bob, anchor=(0.0, 0.0))
    energy0 = mechanical_energy(scene, [bob], scene.get_state())
    swing = energy0 - (-1.0 * G * 1.0)  # above the bottom of the arc
    energies, angles = [], []

    def record():
        state = scene.get_state()
        energies.append(mechanical_energy(scene, [bob], state))
        x, y = state.position[0, bob]
        angles.append(math.degrees(math.atan2(x, -y)))

    run(scene, seconds=10.0, each=record)
    stretch = 0.0  # XPBD's joint is rigid
    if solver == "soft_step":
        hertz = min(JOINT_HERTZ, JOINT_STIFFEST_FRACTION * scene.substeps / DT)
        stretch = (3.0 - 2.0 * math.cos(start)) * soft_deflection(hertz)  # T_max / (m w^2)
    assert max(abs(e - energy0) for e in energies) < 0.01 * swing + 1.0 * G * stretch
    assert abs(max(abs(a) for a in angles[-120:]) - 10.0) < 0.05  # the last 2 s: a period


@pytest.mark.parametrize("start_degrees", [30.0, 90.0])
def test_a_double_pendulum_of_rods_keeps_its_energy(arch, start_degrees, solver):
    """Two 1 m rods of 1 kg (0.1 m wide), hinged end to end below a static pivot, released
    with both at start_degrees from the vertical: chaotic, but its energy is constant (it
    lost 12.5 % of its swing energy in 10 s from 30 degrees, 30 % from 90, before). Bound:
    1 % of the swing energy, the energy above both rods hanging straight down, with XPBD.
    The soft step's joints are springs (60 Hz, damping ratio 2) that stretch and give back
    energy: Box2D v3 (pyb2d3) with the same joints keeps this scene within 1.9 % from 90
    degrees; 3 % here (its joints warm started one by one before their own solve lost
    7.8 %, and 28 % at 30 Hz)."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, enable_sleep=False, solver=solver)
    pivot = scene.add_circle((0.0, 0.0), 0.02, mass=0)
    angle = math.radians(start_degrees)
    down = np.array([math.sin(angle), -math.cos(angle)])
    upper = scene.add_box(tuple(0.5 * down), (0.1, 1.0), angle=angle, mass=1.0)
    lower = scene.add_box(tuple(1.5 * down), (0.1, 1.0), angle=angle, mass=1.0)
    scene.add_revolute_joint(pivot, upper, anchor=(0.0, 0.0))
    scene.add_revolute_joint(upper, lower, anchor=(0.0, -0.5))  # the upper rod's lower end
    scene.disable_collision(pivot, lower)
    rods = [upper, lower]
    energy0 = mechanical_energy(scene, rods, scene.get_state())
    swing = energy0 - (-G * 0.5 - G * 1.5)
    energies = []
    run(
        scene,
        seconds=10.0,
        each=lambda: energies.append(mechanical_energy(scene, rods, scene.get_state())),
    )
    bound = 0.01 if solver == "xpbd" else 0.03
    assert max(abs(e - energy0) for e in energies) < bound * swing
    anchors = scene.joint_anchors()[0]
    assert np.linalg.norm(anchors[:, 0] - anchors[:, 1], axis=1).max() < 1e-3  # m
