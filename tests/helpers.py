"""What several test files share: stepping a scene (run, record, track), the scenes more
than one file builds, and bitwise comparisons of runs. The NumPy oracles the kernels are
tested against are in tests/reference/; writing device fields by hand, in tests/fields.py."""

import dataclasses
import math
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.device import launching
from fx2d_gpu.physics.solver import team

DT = 1.0 / 60.0  # the tests' frame, s
G = 9.81  # the tests' gravity, m/s^2
#: Box2D v3's contact hertz, the cap at a quarter of the substep rate, and the doubling
#: against immovable bodies, restated here (soft_contacts.contact_hertz).
SOFT_HERTZ, SOFT_RATE_FRACTION, SOFT_IMMOVABLE = 30.0, 0.25, 2.0
#: The position solver's contact slop, m, restated (contacts.LINEAR_SLOP): how deep a
#: resting XPBD contact may stay.
LINEAR_SLOP = 0.002


def mechanical_energy(scene, bodies, state=None, gravity: float = G, world: int = 0) -> float:
    """Kinetic (translation and rotation) plus gravitational energy, J, of `bodies` in
    `world` of `state` (the scene's state now if None), gravity pointing down -y."""
    state = scene.get_state() if state is None else state
    bodies = np.asarray(bodies, dtype=np.int64)
    mass = np.array([scene.body_mass(b) for b in bodies])
    inertia = np.array([scene.body_inertia(b) for b in bodies])
    velocity = state.velocity[world, bodies].astype(np.float64)
    spin = state.angular_velocity[world, bodies].astype(np.float64)
    height = state.position[world, bodies, 1].astype(np.float64)
    return float(
        (
            0.5 * mass * (velocity**2).sum(axis=1)
            + 0.5 * inertia * spin**2
            + mass * gravity * height
        ).sum()
    )


def soft_contact_hertz(substeps: int, immovable: bool) -> float:
    """The soft step's contact hertz at `substeps` a 1/60 s step (against an immovable body:
    doubled)."""
    h = DT / substeps
    return min(SOFT_HERTZ, SOFT_RATE_FRACTION / h) * (SOFT_IMMOVABLE if immovable else 1.0)


def soft_deflection(hertz: float) -> float:
    """A soft contact spring's static deflection under 1 g per unit of load over effective
    mass, m: g / w^2 (tests/test_soft_step.py derives the rest depth)."""
    return G / (2.0 * math.pi * hertz) ** 2


def soft_column_drop(n_boxes: int, substeps: int = 4) -> float:
    """The top box's drop, m, of a column of n_boxes 1 m, 1 kg boxes on the ground under the
    soft step: the contact under box k from the top carries k boxes on two corner points,
    each point's 1/m_eff = 2/m + 2 (0.5^2) / I = 5 per kg (I = 1/6 kg m^2), so it closes
    2.5 k g / w^2; the ground's points, 1/m_eff = 2.5, close 1.25 n g / w^2 at twice the
    hertz."""
    return sum(
        2.5 * k * soft_deflection(soft_contact_hertz(substeps, False)) for k in range(1, n_boxes)
    ) + 1.25 * n_boxes * soft_deflection(soft_contact_hertz(substeps, True))


# ----------------------------------------------------------------------------- stepping
@dataclass(frozen=True)
class Push:
    """scene.apply_force(body, force, torque=torque) just before step at_step (0-based) of
    a run."""

    body: int
    force: tuple = (0.0, 0.0)
    torque: float = 0.0
    at_step: int = 0


def _count(steps, seconds, dt):
    if (steps is None) == (seconds is None):
        raise TypeError("give steps or seconds, not both")
    return steps if seconds is None else round(seconds / dt)


def run(scene, steps=None, *, seconds=None, dt=DT, push=None, each=None):
    """Step `scene` `steps` times, or for `seconds` (round(seconds / dt) steps), at dt (s).
    push: a Push applied before its step; each: called (no arguments) after every step.
    Returns the scene, so that a reading can follow: run(scene, 60).get_state()."""
    for step in range(_count(steps, seconds, dt)):
        if push is not None and step == push.at_step:
            scene.apply_force(push.body, push.force, torque=push.torque)
        scene.step(dt)
        if each is not None:
            each()
    return scene


def record(scene, what, steps=None, *, seconds=None, dt=DT, push=None) -> list:
    """what(scene) after every step of run(scene, steps, seconds=, dt=, push=)."""
    out = []
    run(scene, steps, seconds=seconds, dt=dt, push=push, each=lambda: out.append(what(scene)))
    return out


def track(scene, body, steps=None, *, seconds=None, dt=DT):
    """Positions (frames, 2) and speeds (frames,) of `body` (world 0) after every step of
    run(scene, steps, seconds=, dt=)."""
    states = record(scene, lambda s: s.get_state(), steps, seconds=seconds, dt=dt)
    return (
        np.array([s.position[0, body].copy() for s in states]),
        np.array([np.linalg.norm(s.velocity[0, body]) for s in states]),
    )


# ----------------------------------------------------------------------------- scenes
def rig(arch):
    """A motor-driven pendulum chain over a static floor, with a box resting on the floor:
    joints, PID state and sleep timers all carry from step to step."""
    scene = fx.Scene(arch=arch)
    floor = scene.add_box(
        (0.0, -0.5), (20.0, 1.0), mass=0, static_friction=0.5, dynamic_friction=0.4
    )
    scene.add_box((4.0, 0.5), (1.0, 1.0))
    previous = scene.add_box((0.0, 4.0), (0.4, 0.4), mass=0)
    for i in range(4):
        link = scene.add_box((0.5 + i, 4.0), (0.8, 0.2))
        scene.add_revolute_joint(
            previous,
            link,
            anchor=(0.5 if i else 0.0, 0.0),
            control_mode="velocity" if i == 0 else None,
            target=2.0,
            pid=(5.0, 0.5, 0.0),
            max_effort=50.0,
        )
        previous = link
    assert floor == 0
    return scene


def joint_control_demo(arch, n_worlds=1, **scene_kwargs):
    """fx2d_gpu/examples/joint_control_demo.yml, built through the API: (scene, the arm's
    motor, the slider's motor). scene_kwargs: Scene's (solver)."""
    scene = fx.Scene(gravity=(0.0, -10.0), n_worlds=n_worlds, arch=arch, **scene_kwargs)
    base = scene.add_box((6.0, 4.0), (0.4, 0.4), mass=0, gravity_scale=0.0)
    arm = scene.add_box((7.0, 4.0), (2.0, 0.25), mass=1.0, inertia=0.5, gravity_scale=0.0)
    rail = scene.add_box((6.0, 1.5), (10.0, 0.4), mass=0, gravity_scale=0.0)
    slider = scene.add_box((6.0, 1.5), (0.8, 0.8), mass=1.0, inertia=0.1, gravity_scale=0.0)
    arm_motor = scene.add_revolute_joint(
        base,
        arm,
        anchor=(0.0, 0.0),
        angle_min=-3.14159,
        angle_max=3.14159,
        control_mode="position",
        target=1.0,
        max_effort=25.0,
        pid=(6.0, 0.05, 0.4),
    )
    slider_motor = scene.add_prismatic_joint(
        rail,
        slider,
        axis=(1.0, 0.0),
        position_min=-4.0,
        position_max=4.0,
        control_mode="position",
        target=0.0,
        max_effort=20.0,
        pid=(8.0, 0.2, 5.0),
    )
    return scene, arm_motor, slider_motor


def machine_scene(n_worlds: int, arch: str, **scene_kwargs) -> fx.Scene:
    """One of every kind of constraint and body a small world may hold: a chain ground,
    a box stack, circles and a triangle thrown at it (a different throw in each world),
    a capsule, a motorised hinge (velocity mode), a slider driven to a position (with
    limits), a kinematic pusher, a sensor, a bouncy ball. scene_kwargs: Scene's (solver)."""
    scene = fx.Scene(n_worlds=n_worlds, arch=arch, **scene_kwargs)
    friction = dict(static_friction=0.6, dynamic_friction=0.5)
    scene.add_chain((0.0, 0.0), [(-12.0, 2.0), (-6.0, 0.0), (12.0, 0.0)], **friction)
    for level in range(4):
        scene.add_box((2.0, 0.25 + 0.5 * level), (0.5, 0.5), **friction)
    thrown = [scene.add_circle((-4.0 + i, 1.0 + 0.5 * i), 0.25, **friction) for i in range(3)]
    thrown.append(
        scene.add_polygon((-1.0, 3.0), [(-0.3, -0.2), (0.3, -0.2), (0.0, 0.3)], **friction)
    )
    scene.add_capsule((5.0, 0.5), 0.8, 0.2, angle=0.3, **friction)
    base = scene.add_box((8.0, 3.0), (0.4, 0.4), mass=0.0)
    arm = scene.add_box((8.8, 3.0), (1.6, 0.1), **friction)
    scene.add_revolute_joint(
        base,
        arm,
        anchor=(0.0, 0.0),
        control_mode="velocity",
        target=2.0,
        pid=(4.0, 0.0, 0.0),
        max_effort=40.0,
    )
    rail = scene.add_box((-8.0, 4.0), (0.2, 0.2), mass=0.0)
    slider = scene.add_box((-8.0, 4.5), (0.6, 0.3), **friction)
    scene.add_prismatic_joint(
        rail,
        slider,
        axis=(1.0, 0.0),
        position_min=-2.0,
        position_max=1.5,
        control_mode="position",
        target=3.0,
        pid=(60.0, 0.0, 8.0),
        max_effort=200.0,
    )
    scene.add_box(
        (-10.0, 0.9),
        (0.5, 0.5),
        external_forces_enabled=False,
        gravity_scale=0.0,
        velocity=(1.5, 0.0),
    )
    scene.add_box((0.0, 1.0), (1.0, 1.0), sensor=True, mass=0.0)
    scene.add_circle((3.5, 4.0), 0.3, elasticity=0.8)
    state = scene.get_state()
    for world in range(n_worlds):  # world w's throw does not depend on n_worlds
        rng = np.random.default_rng([7, world])
        state.velocity[world, thrown] = rng.uniform([1.0, -1.0], [7.0, 4.0], size=(len(thrown), 2))
    scene.set_state(state)
    return scene


#: StepOptions under which small worlds colour their constraints as the general path does
#: (color_small_worlds): the two paths then solve in the same order and agree bit for bit.
COLORED_LIKE_GENERAL = {"color_small_worlds": True}
#: StepOptions under which every world counts as large: the grid broad phase and one launch
#: per stage (no CPU team either, solver/team.py), small worlds coloured as large ones.
GENERAL_PATH = {"color_small_worlds": True, "small_world_path": False, "team": False}
#: StepOptions of the path a GPU takes: one launch per stage group, no CPU team.
PER_STAGE = {"team": False}


def stacks_of_two(lower_mass: float = 1.0, upper_mass: float = 1.0) -> list:
    """260 stacks 2 m apart on a static ground (521 bodies: more than device.TEAM_OF_ONE_SLOTS, a
    team's scene), each of two 1 m boxes, the lower of lower_mass kg and the upper of
    upper_mass kg: scenes.BodySpec's, ground first."""
    from fx2d_gpu import scenes

    specs = [scenes.BodySpec("box", (260.0, -0.5), (530.0, 1.0), mass=0.0)]
    for stack in range(260):
        x = 2.0 * stack + 1.0
        specs.append(scenes.BodySpec("box", (x, 0.5), (1.0, 1.0), mass=lower_mass))
        specs.append(scenes.BodySpec("box", (x, 1.5), (1.0, 1.0), mass=upper_mass))
    return specs


def step_until_asleep(scene, limit: int = 400, end: int | None = None):
    """Step `scene` (1/60 s) until bodies 1 to `end` (None: all) of its first world sleep
    (body 0 is its ground), at most `limit` steps; asserts that they do."""
    for _ in range(limit):
        scene.step(1 / 60)
        if scene.get_state().sleeping[0, 1:end].all():
            return
    raise AssertionError(f"not asleep after {limit} steps")


def still_or_thrown(scene, thrown: bool, each=None):
    """`scene` (stacks_of_two's) stepped until asleep, then with `thrown` a box thrown up far
    from it (x 200 m), then 3 steps (the first after sleep or after a new body pair again;
    `each(scene)` is called after a body is added): its next step is still (stages.STILL:
    no pair, no joint, nothing moves), or with `thrown` idle with a body moving."""
    step_until_asleep(scene)
    if thrown:
        scene.add_box((200.0, 50.0), (1.0, 1.0), velocity=(0.0, 5.0))
        if each is not None:
            each(scene)
    for _ in range(3):
        scene.step(1 / 60)


def colours_in_small_runs(sizes) -> int:
    """Colours of a CPU team's pass followed by another small one (team.small_color: at most
    team.SMALL_COLOR_ITEMS_CPU constraints each), given the colours' sizes in order: the
    team's first member solves the run alone, and the team meets once after it, not after
    each (fused._in_small_run)."""
    small = np.asarray(sizes) <= team.SMALL_COLOR_ITEMS_CPU
    return int(np.sum(small[:-1] & small[1:]))


def with_options(scene, **options):
    """`scene` with its StepOptions changed by `options` (keyword per attribute)."""
    scene.step_options = scene.step_options.replace(**options)
    return scene


#: Marks a test of the team's folded kernel (the GPU path compiled on the CPU with
#: StepOptions.fold_on_cpu): 1-2.5 minutes a variant to compile with an empty offline cache
#: on 2 cores, so such tests run in the slow tier, which CI runs (pytest -m "").
FOLDED_TEAM = pytest.mark.slow


# ----------------------------------------------------------------------------- comparisons
def launches_of(*kernels: str) -> int:
    """Launches in this process so far of the solver's kernels `kernels`, together, each
    named "module.function" under fx2d_gpu/physics/solver (e.g. "fused._substeps";
    launching.kernel_launches). A name no kernel has raises KeyError."""
    counts = launching.kernel_launches()
    return sum(counts[f"fx2d_gpu.physics.solver.{kernel}"] for kernel in kernels)


class SubstepsByWorld:
    """Counts the steps whose substeps ran a world per thread (the small worlds' path,
    fused.substeps_by_world): the substeps' kernel launched once in the step and no CPU team
    ran it (team.status().step_threads 0; a launch per stage never launches it). Call it
    after each step (trace's `each`); it counts the steps since it was made."""

    def __init__(self):
        self.steps = 0
        self._launched = launches_of("fused._substeps")

    def __call__(self, scene=None):
        launched = launches_of("fused._substeps")
        if launched - self._launched == 1 and team.status().step_threads == 0:
            self.steps += 1
        self._launched = launched


def fingerprint(scene) -> list[np.ndarray]:
    """Copies of the scene's state arrays, and its joints' state if it has joints."""
    s = scene.get_state()
    arrays = [s.position, s.angle, s.velocity, s.angular_velocity, s.sleeping]
    if scene.n_joints:
        arrays += list(scene.joint_state().__dict__.values())
    return [a.copy() for a in arrays]


def xfail_where_paths_round_apart(request, arch: str):
    """Mark a test that compares the small-world path (a world per thread) bit for bit with
    another path as an expected failure on CUDA, where the two round differently in the
    last bits (docs/backends.md: Taichi's CUDA JIT lets LLVM fuse multiply-adds, wherever
    each kernel's code offers them). It still runs there (XFAIL, or XPASS should they
    agree); on the CPU and on Vulkan it must pass."""
    if arch == "cuda":
        request.applymarker(
            pytest.mark.xfail(
                reason="on CUDA the small-world and general paths round differently "
                "(docs/backends.md)",
                strict=False,
            )
        )


def assert_bitwise_equal(got, expected, label):
    """Two fingerprints are equal bit for bit."""
    for g, e in zip(got, expected, strict=True):
        assert np.array_equal(g, e), f"{label}: differs by up to {np.abs(g - e).max()}"


def records_equal(x, y) -> bool:
    """Two records (dataclasses of arrays, nested: Contacts, ContactEvents) are equal bit for
    bit."""
    if dataclasses.is_dataclass(x):
        return all(
            records_equal(getattr(x, f.name), getattr(y, f.name)) for f in dataclasses.fields(x)
        )
    return np.array_equal(x, y)


TRACE_FIELDS = ("position", "angle", "velocity", "angular_velocity", "sleeping")


def trace(scene: fx.Scene, steps: int, each=None) -> dict:
    """What `steps` steps produced: the state, and every step's touching pairs (with their
    impulses) and begin/end events. `each(scene)`, if given, is called after every step,
    before the step's contacts are read (to note what the step did)."""
    contacts, events = [], []
    for _ in range(steps):
        scene.step(DT)
        if each is not None:
            each(scene)
        c = scene.contacts(world=None)
        contacts.append((c.world, c.body_a, c.body_b, c.normal_impulse, c.tangent_impulse))
        e = scene.contact_events()
        events.append((len(e.begin.world), len(e.end.world)))
    state = scene.get_state()
    return {
        "state": {name: getattr(state, name) for name in TRACE_FIELDS},
        "contacts": contacts,
        "events": events,
    }


def assert_same_trace(a: dict, b: dict):
    """Two traces are equal bit for bit."""
    for name in TRACE_FIELDS:
        np.testing.assert_array_equal(a["state"][name], b["state"][name], err_msg=name)
    assert a["events"] == b["events"]
    for step_a, step_b in zip(a["contacts"], b["contacts"], strict=True):
        for column_a, column_b in zip(step_a, step_b, strict=True):
            np.testing.assert_array_equal(column_a, column_b)


def every_shape_kind(arch, n_worlds: int, joint: bool = False, steps: int = 0):
    """A static ground, one body of every shape kind (a circle off its body's origin, a
    turned box, a triangle, a rounded box, a capsule), a static edge and a 3-link chain,
    and with `joint` a revolute joint; each world's bodies thrown differently (poses differ
    by world), then `steps` steps of 1/60 s. For the frame geometry's and the renderer's
    tests."""
    from fx2d_gpu import shapes

    scene = fx.Scene(n_worlds=n_worlds, arch=arch)
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0)
    scene.add_shape((-4.0, 2.0), shapes.circle(0.4, center=(0.15, -0.1)), angle=0.4)
    scene.add_box((-2.0, 2.0), (1.0, 0.5), angle=0.3)
    scene.add_polygon((0.0, 2.0), [[0.0, 0.0], [1.0, 0.0], [0.3, 0.8]], angle=-0.2)
    scene.add_box((2.0, 2.0), (0.8, 0.6), radius=0.15, angle=0.7)
    scene.add_capsule((4.0, 2.0), 1.0, 0.25, angle=1.1)
    scene.add_edge((0.0, 0.0), (-9.0, 3.0), (-7.0, 0.2))
    scene.add_chain((0.0, 0.0), [[6.0, 0.3], [7.5, 0.8], [9.0, 0.2], [9.5, 2.0]])
    if joint:
        scene.add_revolute_joint(2, 3, anchor=(-1.0, 2.0))
    state = scene.get_state()
    for w in range(n_worlds):
        state.velocity[w, :, 0] += 1.5 * (w - 1)
        state.angular_velocity[w] += 2.0 * w
    scene.set_state(state)
    for _ in range(steps):
        scene.step(1 / 60)
    return scene


def collect_only(*paths, cwd) -> subprocess.CompletedProcess:
    """`python -m pytest --collect-only -q` of `paths` (files or node ids) in a child process
    run in the folder `cwd` (its pyproject's options and conftest apply), without pytest's
    cache folder: the run's stdout lists the tests the options select."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *paths],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
    )
