"""A step without contacts (StepOptions.contactless_step): scenes of small worlds in which no
two bodies may pair run the substeps' kernel compiled without the contact stages, the same
results bit for bit, and never compile the broad phase, the colouring or the report."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import device, scenes, shapes
from fx2d_gpu.device import launching

FULL_STEP = {"contactless_step": False}
BROAD_PHASE = "fx2d_gpu.physics.solver.sleep._find_pairs_waking_by_world"
SUBSTEPS = "fx2d_gpu.physics.solver.fused._substeps"
CLEAR_FORCES = "fx2d_gpu.physics.integrate._clear_forces"


def launched(scene, steps, force=None):
    """{kernel: launches} of `steps` steps of 1/60 s (a force on body 1 before each)."""
    before = launching.kernel_launches()
    for i in range(steps):
        if force is not None:
            scene.apply_force(1, (force * np.sin(i), 0.0))
        scene.step(1 / 60)
    after = launching.kernel_launches()
    return {
        name: after[name] - before.get(name, 0)
        for name in after
        if after[name] != before.get(name, 0)
    }


def cart_poles(n_worlds, solver, options=None, arch="cpu"):
    """scenes.cart_poles (a track colliding with nothing, a cart on a prismatic joint with
    limits and a velocity motor, a pole on a revolute joint), with a second pole on a
    position motor and a swinging chain of three links: jointed neighbours, no two bodies
    that may pair, the carts thrown at their own speeds."""
    scene = scenes.cart_poles(n_worlds, arch=arch, solver=solver, step_options=options)
    track, cart, pole = 0, 1, 2
    # Kept apart by every rule: the cart's category and mask bits, the poles' shared negative
    # group, the links' bits among themselves, the joints and a disabled pair.
    scene.set_collision_filter(cart, category_bits=2, mask_bits=2)
    scene.set_collision_filter(pole, collision_group=-1)
    tip = scene.add_box((0.0, 1.5), (0.06, 1.0), mass=0.05, collision_group=-1)
    scene.add_revolute_joint(
        pole, tip, anchor=(0.0, 1.0), control_mode="position", pid=(5.0, 0.0, 0.5)
    )
    links = [
        scene.add_circle((3.0 + 0.4 * k, 1.0), 0.2, mass=0.2, category_bits=4, mask_bits=4)
        for k in range(3)
    ]
    # (Anchors in the parent's body frame.)
    scene.add_revolute_joint(track, links[0], anchor=(3.0, 1.3))
    scene.add_revolute_joint(links[0], links[1], anchor=(0.2, 0.0))
    scene.add_revolute_joint(links[1], links[2], anchor=(0.2, 0.0))
    scene.disable_collision(links[0], links[2])
    state = scene.get_state()
    state.velocity[:, cart, 0] = np.linspace(-1.0, 1.0, n_worlds)
    scene.set_state(state)
    return scene


@pytest.mark.parametrize("solver", ["xpbd", "soft_step"])
@pytest.mark.parametrize("n_worlds", [3, device.SERIAL_WORLDS + 5])
def test_a_step_without_contacts_is_the_full_step_bit_for_bit(solver, n_worlds):
    # Few worlds run the kernels' serial variant, more the parallel one.
    fast, full = cart_poles(n_worlds, solver), cart_poles(n_worlds, solver, FULL_STEP)
    fast_kernels, full_kernels = launched(fast, 90, force=3.0), launched(full, 90, force=3.0)
    # One launch a step: the forces are cleared in it. Then steps without forces: a force
    # left on the device would push the carts on.
    assert BROAD_PHASE not in fast_kernels and fast_kernels[SUBSTEPS] == 90
    assert CLEAR_FORCES not in fast_kernels and full_kernels[CLEAR_FORCES] == 90
    assert full_kernels[BROAD_PHASE] == 90  # (the full step found no pair either)
    # The two scenes share a device pool: fast's state moves back into it first (two
    # launches of transfer._move_fields, the residency's, not the step's).
    fast.get_state()
    assert launched(fast, 20) == {SUBSTEPS: 20} and launched(full, 20)[BROAD_PHASE] == 20
    assert len(full.candidate_pairs()) == 0 and len(fast.contacts(None)) == 0
    a, b = fast.get_state(), full.get_state()
    for name in ("position", "angle", "velocity", "angular_velocity"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    np.testing.assert_array_equal(fast.joint_errors(), full.joint_errors())
    # The joints did work: the motors drove the cart and the chain swung.
    assert np.ptp(a.position[:, 1, 0]) > 0.5 and np.abs(a.velocity[:, 4:]).max() > 0.5


def random_filtered_bodies(rng, n):
    """A scene of n dynamic circles overlapping at the origin (gravity off), random filters:
    collision groups, category and mask bits, some without a collision shape, joints with
    and without collide_connected, disabled pairs."""
    scene = fx.Scene(gravity=(0.0, 0.0), enable_sleep=False, step_options=FULL_STEP)
    for _ in range(n):
        position = rng.uniform(-0.2, 0.2, size=2)
        keywords = dict(
            collision_group=int(rng.choice([0, 0, -1, -2, 1])),
            category_bits=int(rng.choice([1, 2, 4, 3])),
            mask_bits=int(rng.choice([0xFFFFFFFF, 1, 2, 6, 0])),
        )
        shape = shapes.circle(1.0)
        scene.add_shape(position, shape, collides=bool(rng.random() > 0.15), **keywords)
    for _ in range(n // 3):
        a, b = rng.choice(n, size=2, replace=False)
        collide = bool(rng.random() < 0.3)
        scene.add_revolute_joint(int(a), int(b), anchor=(0.0, 0.0), collide_connected=collide)
    for _ in range(n // 4):
        a, b = rng.choice(n, size=2, replace=False)
        scene.disable_collision(int(a), int(b))
    return scene


@pytest.mark.parametrize("seed", range(6))
def test_the_pairs_the_model_allows_are_those_the_broad_phase_finds(seed):
    # Every two bodies overlap, so the broad phase pairs exactly those the filter lets meet:
    # Scene.collision_matrix's answer, read from the model on the host, must be that set.
    rng = np.random.default_rng(seed)
    scene = random_filtered_bodies(rng, int(rng.integers(6, 14)))
    scene.step(1 / 60)
    found = {(int(a), int(b)) for _, a, b in scene.candidate_pairs()}
    allowed = scene.collision_matrix()
    assert found == {(a, b) for a, b in zip(*np.nonzero(allowed), strict=True) if a < b}
    assert np.array_equal(allowed, allowed.T) and not allowed.diagonal().any()


def test_a_filter_that_lets_bodies_meet_brings_the_contacts_back():
    # A box over a ground that collides with nothing falls through it, stepping without
    # contacts; once the ground's filter lets it, the box lands and rests on it (its centre
    # half its height above the ground's top), and stepping without contacts resumes one
    # step after they part again.
    scene = fx.Scene(enable_sleep=False)
    ground = scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0, mask_bits=0)
    box = scene.add_box((0.0, 3.0), (1.0, 0.4), mass=1.0)
    kernels = launched(scene, 10)
    assert BROAD_PHASE not in kernels
    scene.set_collision_filter(ground, mask_bits=0xFFFFFFFF)
    kernels = launched(scene, 120)
    assert kernels[BROAD_PHASE] == 120
    assert scene.get_state().position[0, box, 1] == pytest.approx(0.2, abs=0.01)
    assert len(scene.contacts()) == 1
    scene.set_collision_filter(ground, mask_bits=0)
    assert launched(scene, 1)[BROAD_PHASE] == 1  # the contact ends (its end event)
    assert len(scene.contact_events().end) == 1
    assert BROAD_PHASE not in launched(scene, 30)
    assert scene.get_state().position[0, box, 1] < -1.0  # fell through


def test_a_cart_pole_env_compiles_no_contact_stage():
    # fx2d's CartPole has no pair of bodies that may touch: its steps run the substeps'
    # kernel without the contact stages and nothing of the broad phase, colouring or report.
    gymnasium = pytest.importorskip("gymnasium")
    import fx2d_gpu.envs  # noqa: F401  (registers the ids)

    envs = gymnasium.make_vec(
        "fx2d/CartPole-v0", num_envs=4, vectorization_mode="vector_entry_point"
    )
    envs.reset(seed=0)
    before = launching.kernel_launches()
    for _ in range(5):
        envs.step(envs.action_space.sample())
    after = launching.kernel_launches()
    ran = {name.rsplit(".", 2)[-2] for name in after if after[name] > before.get(name, 0)}
    assert "fused" in ran and not ran & {"sleep", "coloring", "reporting", "broad_phase"}, ran
    envs.close()
