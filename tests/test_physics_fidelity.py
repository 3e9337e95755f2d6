"""Physics users can trust (issue 12): rolling, precision far from the origin, contacts of
bodies that move together, bounded push-out, motors at small steps, spinning and impacts.

Each test is a scenario from the issue with its "right" figure as the bound, checked against
an analytic answer or a conservation law.
"""

import math

import numpy as np
import pytest

import fx2d_gpu as fx

G = 9.81
DT = 1.0 / 60.0


def incline(scene, theta, origin, mu):
    """A long static ramp going down towards +x at theta (rad) whose surface passes through
    origin; returns (unit normal, unit downhill direction)."""
    normal = np.array([math.sin(theta), math.cos(theta)])
    downhill = np.array([math.cos(theta), -math.sin(theta)])
    centre = np.asarray(origin, float) - 0.5 * normal
    scene.add_box(tuple(centre), (200.0, 1.0), angle=-theta, mass=0, static_friction=mu,
                  dynamic_friction=mu)
    return normal, downhill


def mechanical_energy(scene, state, bodies, gravity=G):
    """Kinetic plus potential energy (J) of the given bodies in world 0."""
    energy = 0.0
    for body in bodies:
        mass, inertia = scene.body_mass(body), scene.body_inertia(body)
        energy += (0.5 * mass * float(np.sum(state.velocity[0, body] ** 2))
                   + 0.5 * inertia * float(state.angular_velocity[0, body]) ** 2
                   + mass * gravity * float(state.position[0, body, 1]))
    return energy


# --- 1. rolling ------------------------------------------------------------------------------

@pytest.mark.parametrize("origin", [(0.0, 0.0), (50.0, 50.0)])
def test_disk_rolls_down_an_incline_at_the_textbook_acceleration(arch, origin):
    """a = g sin(theta) / (1 + I / (m r^2)) = 2.237 m/s^2 for a disk on 20 degrees, rolling
    without slipping, wherever the scene sits in the plane."""
    theta, radius = math.radians(20.0), 0.5
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    normal, downhill = incline(scene, theta, origin, 0.6)
    start = np.asarray(origin) + radius * normal - 20.0 * downhill
    disk = scene.add_circle(tuple(start), radius, static_friction=0.6, dynamic_friction=0.6,
                            elasticity=0.0)
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


def wheel_cart(arch, origin, substeps, cart):
    """A wheel (r 0.4, 0.25 kg) or a 2 kg cart on two such wheels (revolute joints) rolling
    from rest down a 6 degree ramp for 3 s. Returns (speed along the ramp / the rolling
    speed g sin(theta) t / (1 + sum I / (M r^2)), largest rise of the mechanical energy
    as a fraction of the final kinetic energy)."""
    theta, radius, wheel_mass = math.radians(6.0), 0.4, 0.25
    scene = fx.Scene(gravity=(0.0, -G), substeps=substeps, arch=arch)
    normal, downhill = incline(scene, theta, origin, 0.9)
    o = np.asarray(origin, float)
    wheel = dict(mass=wheel_mass, static_friction=0.9, dynamic_friction=0.9, elasticity=0.0)
    if cart:
        chassis = scene.add_box(tuple(o + (radius + 0.5) * normal), (2.0, 0.3), angle=-theta,
                                mass=2.0, elasticity=0.0)
        wheels = [scene.add_circle(tuple(o + radius * normal + side * 0.8 * downhill), radius,
                                   **wheel) for side in (-1, 1)]
        for w, side in zip(wheels, (-1, 1), strict=True):
            scene.add_revolute_joint(chassis, w, anchor=(side * 0.8, -0.5))
        bodies = [chassis, *wheels]
        mass, inertia = 2.0 + 2 * wheel_mass, 2 * 0.5 * wheel_mass * radius**2
    else:
        bodies = [scene.add_circle(tuple(o + radius * normal), radius, **wheel)]
        mass, inertia = wheel_mass, 0.5 * wheel_mass * radius**2
    energy_start = mechanical_energy(scene, scene.get_state(), bodies)
    rise = 0.0
    for _ in range(180):
        scene.step(DT)
        state = scene.get_state()
        rise = max(rise, mechanical_energy(scene, state, bodies) - energy_start)
    accel = G * math.sin(theta) / (1.0 + inertia / (mass * radius**2))
    speed = float(state.velocity[0, bodies[0]] @ downhill)
    kinetic = sum(0.5 * scene.body_mass(b) * float(np.sum(state.velocity[0, b] ** 2))
                  + 0.5 * scene.body_inertia(b) * float(state.angular_velocity[0, b]) ** 2
                  for b in bodies)
    return speed / (accel * 3.0), rise / kinetic


@pytest.mark.parametrize("cart", [False, True], ids=["wheel", "cart"])
@pytest.mark.parametrize("origin", [(0.0, 0.0), (50.0, 50.0)])
@pytest.mark.parametrize("substeps", [4, 11, 22])
def test_wheel_and_cart_roll_at_the_rolling_speed(arch, cart, origin, substeps):
    ratio, rise = wheel_cart(arch, origin, substeps, cart)
    assert ratio == pytest.approx(1.0, abs=0.01)
    assert rise <= 0.01


# --- 3. contacts of bodies that move together, bounded push-out -----------------------------

def test_falling_pile_of_circles_finds_its_contacts_in_time(arch):
    """20,000 circles (r 0.095 on a 0.2 m grid: 1 cm gaps) dropped into a 40 m bin: no two
    circles ever overlap by more than r/2 (contacts found a step late let whole rows
    interpenetrate once the bottom row lands)."""
    radius = 0.095
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    scene.add_box((0.0, -0.5), (40.0, 1.0), mass=0)
    scene.add_box((-20.5, 20.0), (1.0, 42.0), mass=0)
    scene.add_box((20.5, 20.0), (1.0, 42.0), mass=0)
    for i in range(200):
        for j in range(100):
            scene.add_circle((-19.9 + 0.2 * i, 1.0 + 0.2 * j), radius)
    worst = 0.0
    for _ in range(30):
        scene.step(DT)
        contacts = scene.contacts(world=0)
        circles = (contacts.body_a >= 3) & (contacts.body_b >= 3)
        if circles.any():
            worst = max(worst, float(contacts.depth[circles].max()))
    assert worst < radius / 2


def test_overlapping_circles_in_a_closed_box_stay_inside(arch):
    """625 circles (r 0.5 on a 0.72 m grid, so they start overlapping) in a closed 20 x 19.5 m
    box of 1 m thick static walls, no gravity: every centre stays inside, no speed above
    10 m/s (deep overlap is pushed out at a bounded speed, not through a wall)."""
    width, height = 20.0, 19.5
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
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
        assert np.all(np.abs(centres[:, 0]) < width / 2)
        assert np.all(np.abs(centres[:, 1]) < height / 2)
        assert np.linalg.norm(state.velocity[0, 4:], axis=1).max() <= 10.0


# --- 4. motors at small steps and far from the origin ----------------------------------------

def motor_arm_rotation(arch, dt, base_x):
    """An arm (2 x 0.25 box, 1 kg, inertia 0.5) on a revolute joint to a static base, velocity
    motor target 3 rad/s, PID (6, 0, 0), no gravity: its rotation (rad) after 1 s."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
    base = scene.add_box((base_x, 0.0), (0.2, 0.2), mass=0)
    arm = scene.add_box((base_x + 1.0, 0.0), (2.0, 0.25), mass=1.0, inertia=0.5)
    scene.add_revolute_joint(base, arm, anchor=(0.0, 0.0), control_mode="velocity",
                             target=3.0, pid=(6.0, 0.0, 0.0))
    for _ in range(round(1.0 / dt)):
        scene.step(dt)
    return float(scene.get_state().angle[0, arm])


def test_motor_keeps_its_authority_at_small_steps_and_far_from_the_origin(arch):
    rotations = [motor_arm_rotation(arch, dt, x) for dt in (1e-2, 1e-3) for x in (0.5, 7.0, 300.0)]
    assert min(rotations) > 1.0
    assert max(rotations) <= 1.25 * min(rotations)


# --- 5. a spinning box does not hop ----------------------------------------------------------

def spinning_box(arch, spin):
    """A 1 m box set on the ground spinning at `spin` rad/s: (highest centre, m; largest
    rise of its mechanical energy over the start, J) in 3 s."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    scene.add_box((0.0, -0.5), (40.0, 1.0), mass=0)
    box = scene.add_box((0.0, 0.5), (1.0, 1.0), angular_velocity=spin)
    start = mechanical_energy(scene, scene.get_state(), [box])
    highest, rise = 0.5, -math.inf
    for _ in range(180):
        scene.step(DT)
        state = scene.get_state()
        highest = max(highest, float(state.position[0, box, 1]))
        rise = max(rise, mechanical_energy(scene, state, [box]) - start)
    return highest, rise


@pytest.mark.parametrize("spin", [5.0, 10.0, 15.0])
def test_spinning_box_stays_below_the_corner_pivot_bound(arch, spin):
    # Fx2D's own test bound: the centre can rise no higher than the corner pivot allows.
    highest, _ = spinning_box(arch, spin)
    assert highest < 2.257


@pytest.mark.parametrize("spin", [5.0, 25.0, 100.0])
def test_spinning_box_never_gains_energy(arch, spin):
    _, rise = spinning_box(arch, spin)
    assert rise <= 0.01 * 0.5 * (1.0 / 6.0) * spin**2


# --- 7. impacts ------------------------------------------------------------------------------

def test_box_thrown_at_the_ground_does_not_gain_energy(arch):
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    scene.add_box((0.0, -0.5), (400.0, 1.0), mass=0)
    box = scene.add_box((0.0, 1.0), (0.2, 0.2), velocity=(20.0, -20.0))
    start = mechanical_energy(scene, scene.get_state(), [box])
    for _ in range(180):
        scene.step(DT)
        energy = mechanical_energy(scene, scene.get_state(), [box])
        assert energy <= 1.01 * start


def test_box_rebounds_at_its_restitution(arch):
    """A 1 m box at (40, -40) m/s, elasticity 0.1, no friction: it leaves the ground at no
    more than e * 40 = 4 m/s (26.7 m/s before the fix)."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    scene.add_box((0.0, -0.5), (400.0, 1.0), mass=0)
    box = scene.add_box((0.0, 0.8), (1.0, 1.0), velocity=(40.0, -40.0), elasticity=0.1)
    highest = -math.inf
    for _ in range(30):
        scene.step(DT)
        highest = max(highest, float(scene.get_state().velocity[0, box, 1]))
    assert 2.0 < highest <= 4.0 * 1.05


@pytest.mark.parametrize("speed", [500.0, 1000.0])
def test_fast_circle_passing_over_boxes_moves_none_of_them(arch, speed):
    """A circle at 500 or 1,000 m/s passing 3.5 m above ten boxes touches nothing and moves
    nothing (speculative contacts on a stale normal kicked them to ~3,000 m/s at 500 m/s; at
    1,000 m/s the process crashed)."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch, enable_sleep=False)
    scene.add_box((0.0, -0.5), (100.0, 1.0), mass=0)
    boxes = [scene.add_box((-5.0 + 1.1 * i, 0.5), (1.0, 1.0)) for i in range(10)]
    scene.add_circle((-30.0, 4.75), 0.25, velocity=(speed, 0.0), gravity_scale=0.0)
    # The same boxes without the circle.
    still = fx.Scene(gravity=(0.0, -G), arch=arch, enable_sleep=False)
    still.add_box((0.0, -0.5), (100.0, 1.0), mass=0)
    for i in range(10):
        still.add_box((-5.0 + 1.1 * i, 0.5), (1.0, 1.0))
    for _ in range(30):
        scene.step(DT)
        still.step(DT)
    moved = scene.get_state().position[0, boxes] - still.get_state().position[0, boxes]
    assert np.abs(moved).max() < 1e-4


def test_box_at_300_m_s_does_not_pass_through_a_thin_wall(arch):
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
    scene.add_box((0.0, 0.0), (0.05, 20.0), mass=0)
    speed = 300.0 / math.sqrt(2.0)
    box = scene.add_box((-3.0, -3.0), (0.2, 0.2), velocity=(speed, speed))
    for _ in range(30):
        scene.step(DT)
    assert scene.get_state().position[0, box, 0] < 0.0


def test_heavy_box_on_a_light_box_rests_on_the_ground(arch):
    """1,000 kg on 1 kg on the static ground: the light box stays above the ground, squeezed
    by at most a few cm (it was pushed through the ground to y = -400 m)."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0)
    light = scene.add_box((0.0, 0.5), (1.0, 1.0), mass=1.0)
    heavy = scene.add_box((0.0, 1.5), (1.0, 1.0), mass=1000.0)
    lowest = math.inf
    for _ in range(600):
        scene.step(DT)
        state = scene.get_state()
        lowest = min(lowest, float(state.position[0, light, 1]))
    assert lowest > 0.5 - 0.05
    assert state.position[0, heavy, 1] > 1.5 - 0.05
    assert abs(state.position[0, light, 0]) < 0.01



@pytest.mark.parametrize("size", [0.001, 0.01])
def test_a_stack_of_tiny_boxes_rests(arch, size):
    """Five 1 mm (and 1 cm) boxes stacked on the ground, engine defaults (no friction): they
    stay stacked, level and still for 10 s (they reached ~1e9 m/s at first, then toppled and
    slid apart: one sweep over a manifold's two points left a tilt growing as 1 / size)."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0)
    boxes = [scene.add_box((0.0, size * (i + 0.5)), (size, size)) for i in range(5)]
    resting = size * (np.arange(5) + 0.5)
    fastest = 0.0
    for _ in range(600):
        scene.step(DT)
        state = scene.get_state()
        fastest = max(fastest, float(np.abs(state.velocity[0, boxes]).max()))
    assert fastest < 0.02  # m/s: a box falling its own height would reach 0.14 at 1 mm
    assert np.abs(state.position[0, boxes, 0]).max() < 0.05 * size
    assert np.abs(state.angle[0, boxes]).max() < 0.01
    assert np.abs(state.position[0, boxes, 1] - resting).max() < 0.2 * size

# --- 6. rigs: pairs that never collide -------------------------------------------------------

def test_disable_collision_lets_two_overlapping_bodies_pass(arch):
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
    a = scene.add_box((0.0, 0.0), (1.0, 1.0))
    b = scene.add_box((0.5, 0.0), (1.0, 1.0))
    c = scene.add_box((3.0, 0.0), (1.0, 1.0))
    d = scene.add_box((3.5, 0.0), (1.0, 1.0))
    scene.disable_collision(b, a)
    for _ in range(30):
        scene.step(DT)
    state = scene.get_state()
    # a and b overlap half their width and stay put; c and d, the control, are pushed apart.
    np.testing.assert_allclose(state.position[0, b] - state.position[0, a], (0.5, 0.0),
                               atol=1e-6)
    assert state.position[0, d, 0] - state.position[0, c, 0] > 0.99
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



def test_prismatic_weld_conserves_momentum_and_angular_momentum(arch):
    """Two boxes welded by a prismatic joint of travel [0, 0], side by side, no gravity; the
    child starts moving across the axis. The joint's pushes act at the child's anchor on both
    bodies, so linear and angular momentum (about the origin) stay what they were, and the
    pair turns as one body (the weld's corrections pushed each body at its own centre, a
    couple that spun the rig)."""
    scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
    parent = scene.add_box((0.0, 0.0), (1.25, 1.5), mass=2.0)
    child = scene.add_box((1.72, -0.175), (2.25, 1.0), mass=3.0, velocity=(0.0, 1.0))
    scene.add_prismatic_joint(parent, child, axis=(1.0, 0.0), position_min=0.0,
                              position_max=0.0)
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


def test_truck_rig_rests_on_flat_ground(arch):
    """The truck of Fx2D's example on flat ground, wheels touching it: it stays level and
    still (it pitched onto its back, gaining 48 J in 2 s)."""
    scene = fx.Scene(gravity=(0.0, -10.0), arch=arch, substeps=14)
    friction = {"static_friction": 0.3, "dynamic_friction": 0.2}
    scene.add_box((10.0, 1.7), (20.0, 1.0), mass=0, static_friction=0.55,
                  dynamic_friction=0.4)
    head = scene.add_box((9.0, 3.25), (1.25, 1.5), mass=2.0, **friction)
    back = scene.add_box((10.72, 3.075), (2.25, 1.0), mass=2.0, **friction)
    front_wheel = scene.add_circle((9.1, 2.6), 0.4, mass=0.25, **friction)
    back_wheel = scene.add_circle((11.2, 2.6), 0.4, mass=0.25, **friction)
    truck_rig(scene, head, back, front_wheel, back_wheel)
    start = scene.get_state()
    for _ in range(400):
        scene.step(0.005)
    state = scene.get_state()
    assert np.abs(state.angle[0, [head, back]]).max() < 1e-3
    np.testing.assert_allclose(state.position[0, 1:], start.position[0, 1:], atol=5e-3)


def test_fx2d_truck_rolls_down_its_ramp_upright_as_in_fx2d(arch):
    """Fx2D's truck example (fx2d_gpu/examples/truck.yml and main.cpp's rig, 600 steps of
    5 ms): it rolls down the ramp, stops against the box and stays upright. Fx2D's C++
    engine, built headless, gives head x = 4.539 m, y = 2.539 m at 3 s, chassis pitch at
    most 0.108 rad, no energy gained; fx2d_gpu tipped over (1.68 rad, +30 J)."""
    from benchmarks import fx2d_scenes
    from fx2d_gpu import examples

    figures = fx2d_scenes.truck(examples.path("truck"), arch=arch)["figures"]
    assert figures["head_x_end"] == pytest.approx(4.539, abs=0.3)
    assert figures["head_y_end"] == pytest.approx(2.539, abs=0.1)
    assert figures["head_theta_max"] < 0.2
    assert figures["energy_rise_max"] < 0.5  # J, of about 40 J of potential energy released

# --- regression guard: stacking did not get worse ---------------------------------------------

def test_fifteen_box_column_sinks_a_few_millimetres(arch):
    """Fx2D's 15-box column sinks 185 mm; fx2d_gpu sank 3.3 mm before issue 12's changes."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0)
    boxes = [scene.add_box((0.0, 0.5 + i), (1.0, 1.0)) for i in range(15)]
    for _ in range(300):
        scene.step(DT)
    state = scene.get_state()
    assert 14.5 - state.position[0, boxes[-1], 1] < 0.005
    assert np.abs(state.position[0, boxes, 0]).max() < 0.02


@pytest.mark.parametrize("masses", [(1.0, 10.0, 100.0), (100.0, 10.0, 1.0), (1.0, 100.0)])
def test_stacks_of_unequal_masses_hold(arch, masses):
    """Heavier boxes on lighter ones: no box ever sinks more than 2 cm below its resting
    height (1:10:100 fell through the ground before)."""
    scene = fx.Scene(gravity=(0.0, -G), arch=arch)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0)
    boxes = [scene.add_box((0.0, 0.5 + i), (1.0, 1.0), mass=m) for i, m in enumerate(masses)]
    resting = 0.5 + np.arange(len(boxes))
    worst = 0.0
    for _ in range(300):
        scene.step(DT)
        worst = max(worst, float((resting - scene.get_state().position[0, boxes, 1]).max()))
    assert worst < 0.02
