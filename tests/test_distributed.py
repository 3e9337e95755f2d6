"""fx2d_gpu.distributed on a local Ray cluster: a scene's worlds sharded over Ray actors.

Every check compares the ShardedScene against one in-process Scene built the same way, bit for
bit: worlds never interact, so world w of 2 shards must step exactly as world w of one scene,
with a shard's actor killed in between or not. Skipped where Ray is not installed (the
`distributed` extra; .ci/run installs it with `dev`).
"""

import dataclasses
import os
import signal
import sys
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

#: The slow tier (pytest -m slow): a real Ray cluster and its actors, each a process with its
#: own Taichi (~3 min, ~2 GB beside the test process); marked `ray`, which .ci/run runs in a
#: process of its own beside the main suite. The driver's rules are in the default tier:
#: tests/test_sharded_driver.py.
pytestmark = [pytest.mark.slow, pytest.mark.ray]

import fx2d_gpu as fx  # noqa: E402
from fx2d_gpu.distributed import (  # noqa: E402
    ShardedScene,
    ShardedSnapshot,
    ShardLostError,
    cpu_threads_env,
    shard_ranges,
    visible_device_env,
)

DT = 1.0 / 60.0
N_WORLDS = 6

# The builders below travel to the actors by value: the actors' processes need not import
# the tests package.
ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module", autouse=True)
def local_cluster():
    """A local Ray cluster of 2 CPUs and 2 declared (absent) GPUs, for this module."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(
        num_cpus=2,
        num_gpus=2,
        include_dashboard=False,
        log_to_driver=False,
        object_store_memory=150 * 2**20,
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def shared_start():
    """One 2-shard scene of `build` for the tests below, and its snapshot at the start:
    starting shards (processes, imports, kernels) is what such a test spends most on. Its
    actors hold no CPU of Ray's (num_cpus 0), so that the other tests' shards find both."""
    with ShardedScene(N_WORLDS, build, n_shards=2, shard_options={"num_cpus": 0}) as sharded:
        yield sharded, sharded.snapshot()


@pytest.fixture
def two_shards(shared_start):
    """The shared 2-shard scene as it started (restore), with the given recovery options."""
    sharded, start = shared_start

    def at_start(snapshot_every=100, on_worker_loss="recover"):
        sharded.restore(start)
        sharded.snapshot_every, sharded.on_worker_loss = snapshot_every, on_worker_loss
        return sharded

    return at_start


def build(n_worlds: int) -> fx.Scene:
    """Boxes stacked on a ground, a ball thrown at them, a motorised rod on a hinge."""
    scene = fx.Scene(n_worlds=n_worlds, arch="cpu")
    friction = dict(static_friction=0.6, dynamic_friction=0.5)
    ground = scene.add_box((0.0, -0.5), (12.0, 1.0), mass=0, **friction)
    for level in range(3):
        scene.add_box((0.1 * level, 0.3 + 0.55 * level), (0.5, 0.5), **friction)
    scene.add_circle((-2.0, 1.0), 0.3, elasticity=0.4, name="ball")
    rod = scene.add_box((3.0, 2.0), (1.0, 0.1))
    scene.add_revolute_joint(ground, rod, anchor=(2.5, 2.5), control_mode="velocity", target=0.5)
    return scene


def taichi_threads(scene: fx.Scene) -> int:
    """The CPU threads Taichi runs with in the scene's process."""
    import taichi as ti

    return ti.lang.impl.current_cfg().cpu_max_num_threads


def build_wrong_count(n_worlds: int) -> fx.Scene:
    return build(n_worlds + 1)


def same_state(a: fx.State, b: fx.State) -> bool:
    return all(
        np.array_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(fx.State)
    )


def same_record(a, b) -> bool:
    return all(
        np.array_equal(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a)
    )


def drive(scenes, steps: int, seed: int = 1, on_step=None):
    """The same inputs to every scene of `scenes`: per-world forces and motor targets each
    step, a reset of two worlds at step 30; on_step(k) after each step."""
    rng = np.random.default_rng(seed)
    ball = scenes[0].body_index("ball")
    for k in range(steps):
        force, target = rng.normal(size=(N_WORLDS, 2)), rng.normal(size=N_WORLDS)
        for scene in scenes:
            scene.apply_force(ball, force)
            scene.set_joint_target(0, target)
            if k == 30:
                scene.reset_worlds([1, 4])
            scene.step(DT)
        if on_step is not None:
            on_step(k)


def throw(scenes, seed: int = 2):
    """Every world's ball thrown at its own speed (set_state on each scene)."""
    state = scenes[0].get_state()
    rng = np.random.default_rng(seed)
    state.velocity[:, scenes[0].body_index("ball"), 0] = rng.uniform(1.0, 5.0, N_WORLDS)
    for scene in scenes:
        scene.set_state(state)


def wait_gone(pid: int, timeout: float = 30.0) -> bool:
    """True once process `pid` has exited (within `timeout` s)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_shard_ranges_are_contiguous_and_even():
    assert shard_ranges(10, 3) == [range(0, 4), range(4, 7), range(7, 10)]
    assert shard_ranges(4, 4) == [range(i, i + 1) for i in range(4)]
    with pytest.raises(ValueError, match="n_shards"):
        shard_ranges(2, 3)


def test_visible_device_env_points_vulkan_at_rays_gpu():
    # Ray set CUDA_VISIBLE_DEVICES already: only Taichi's Vulkan index is missing.
    assert visible_device_env(["3"], {"CUDA_VISIBLE_DEVICES": "3"}) == {"TI_VISIBLE_DEVICE": "3"}
    assert visible_device_env([1, 2], {}) == {
        "CUDA_VISIBLE_DEVICES": "1,2",
        "TI_VISIBLE_DEVICE": "1",
    }
    # The user's own TI_VISIBLE_DEVICE stands; a CPU shard changes nothing.
    assert visible_device_env(["0"], {"CUDA_VISIBLE_DEVICES": "0", "TI_VISIBLE_DEVICE": "2"}) == {}
    assert visible_device_env([], {}) == {}


def test_cpu_threads_follow_the_cpus_ray_gave():
    assert cpu_threads_env(1.0, {}) == {"FX2D_CPU_THREADS": "1"}
    assert cpu_threads_env(0.5, {}) == {"FX2D_CPU_THREADS": "1"}
    assert cpu_threads_env(3.0, {}) == {"FX2D_CPU_THREADS": "3"}
    assert cpu_threads_env(0.0, {}) == {}  # no CPUs asked: Taichi's default
    assert cpu_threads_env(2.0, {"FX2D_CPU_THREADS": "8"}) == {}  # the user's stands


def test_two_shards_step_as_one_scene_bitwise(two_shards):
    """100 steps of per-world forces, targets, values and resets: state, contacts, events,
    ray casts and overlap queries equal one Scene's bit for bit."""
    reference = build(N_WORLDS)
    sharded = two_shards(snapshot_every=30)
    assert sharded.shard_worlds == [range(0, 3), range(3, 6)]
    assert (sharded.n_bodies, sharded.n_joints) == (reference.n_bodies, 1)
    assert sharded.body_mass(sharded.body_index("ball")) == 1.0
    throw([reference, sharded])
    masses = np.linspace(0.5, 3.0, N_WORLDS)
    gravity = np.stack([np.zeros(N_WORLDS), -np.linspace(8.0, 11.0, N_WORLDS)], axis=1)
    for scene in (reference, sharded):
        scene.set_body_params([1, 2], mass=masses[[0, 2, 5]][:, None].repeat(2, 1), world=[0, 2, 5])
        scene.set_gravity(gravity)
        # A row of flags per world, in the order given: each shard takes its worlds' rows.
        scene.set_enabled(
            [2, 3], np.array([[False, True], [True, False], [False, False]]), [4, 1, 3]
        )
    np.testing.assert_array_equal(
        sharded.get_body_params()["mass"], reference.get_body_params()["mass"]
    )
    assert sharded.enabled()[[4, 1, 3]][:, [2, 3]].tolist() == [[0, 1], [1, 0], [0, 0]]
    checked = []

    def compare(k):
        if k % 10 == 9:
            assert same_state(reference.get_state(), sharded.get_state()), k
            assert same_record(reference.contact_events().begin, sharded.contact_events().begin), k
            checked.append(k)

    drive([reference, sharded], 100, on_step=compare)
    assert len(checked) == 10
    assert sharded.step_count == reference.step_count == 100
    assert sharded.time == reference.time
    contacts = reference.contacts(None)
    assert len(contacts) > N_WORLDS  # the stacks stand on the ground in every world
    assert same_record(contacts, sharded.contacts(None))
    assert same_record(reference.contacts(4), sharded.contacts(4))
    assert set(sharded.contacts(4).world.tolist()) == {4}
    rng = np.random.default_rng(3)
    origins = np.stack([rng.uniform(-3, 3, (N_WORLDS, 5)), np.full((N_WORLDS, 5), 4.0)], axis=2)
    down = np.array([0.0, -1.0])
    hits = reference.ray_cast(origins, down, 10.0)
    assert hits.hit.all()
    assert same_record(hits, sharded.ray_cast(origins, down, 10.0))
    assert same_record(
        reference.ray_cast_all(origins, down, 10.0), sharded.ray_cast_all(origins, down, 10.0)
    )
    points = reference.get_state().position[:, :4]  # (n_worlds, 4, 2): per world
    assert same_record(reference.query_point(points), sharded.query_point(points))
    assert same_record(reference.joint_state(), sharded.joint_state())
    np.testing.assert_array_equal(reference.joint_errors(), sharded.joint_errors())


def test_killed_actor_is_rebuilt_and_the_run_goes_on_bitwise(two_shards):
    """SIGKILL one shard's process mid-run: Ray restarts the actor, the driver restores the
    shard's last snapshot and replays the steps since; the run equals an uninterrupted one."""
    reference = build(N_WORLDS)
    sharded = two_shards(snapshot_every=10)
    throw([reference, sharded])
    killed = []

    def kill(k):
        if k == 26:  # 7 steps after the snapshot at 20: those are replayed
            pid = sharded.shard_info()[1]["pid"]
            os.kill(pid, signal.SIGKILL)
            assert wait_gone(pid)
            killed.append(pid)

    drive([reference, sharded], 35, on_step=kill)  # the reset at step 30 replayed too
    assert same_state(reference.get_state(), sharded.get_state())
    assert same_record(reference.contacts(None), sharded.contacts(None))
    new_pid = sharded.shard_info()[1]["pid"]
    assert killed and new_pid != killed[0]


def test_lost_shard_raises_naming_it_then_recovers(two_shards):
    reference = build(N_WORLDS)
    sharded = two_shards(snapshot_every=None, on_worker_loss="raise")
    throw([reference, sharded])
    drive([reference, sharded], 20)
    pid = sharded.shard_info()[0]["pid"]
    os.kill(pid, signal.SIGKILL)
    assert wait_gone(pid)
    reference.step(DT)
    with pytest.raises(ShardLostError, match=r"shard 0 \(worlds 0-2\)") as lost:
        sharded.step(DT)  # shard 1 took the step; shard 0 is to replay it
    assert lost.value.shard == 0 and lost.value.worlds == range(0, 3)
    with pytest.raises(ShardLostError, match="recover"):
        sharded.get_state()
    sharded.recover()
    assert same_state(reference.get_state(), sharded.get_state())
    assert (sharded.step_count, sharded.time) == (reference.step_count, reference.time)
    drive([reference, sharded], 10, seed=5)
    assert same_state(reference.get_state(), sharded.get_state())


def test_close_leaves_no_actor_or_process():
    sharded = ShardedScene(N_WORLDS, build, n_shards=2)
    pids = [info["pid"] for info in sharded.shard_info()]
    assert ray.available_resources().get("CPU", 0) == 0  # one CPU per shard
    sharded.close()
    sharded.close()  # twice is allowed
    assert all(wait_gone(pid) for pid in pids)
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.available_resources().get("CPU", 0) == 2
    with pytest.raises(RuntimeError, match="closed"):
        sharded.step(DT)


def build_falling_ball(n_worlds: int) -> fx.Scene:
    """A ball falling alone (a step without contacts: few kernels to compile)."""
    scene = fx.Scene(n_worlds=n_worlds, arch="cpu")
    scene.add_circle((0.0, 1.0), 0.3)
    return scene


def test_close_has_the_shards_write_their_kernels_into_taichis_offline_cache(tmp_path):
    """A shard's process ends with SIGKILL (Ray's kill), and Taichi writes the kernels it
    compiled into its offline cache only as its process ends normally: close() has each
    shard write them first (ShardWorker.finish), so that the next shards load them. Here a
    shard with an empty cache folder of its own: nothing in it while the shard runs, its
    kernels after close."""
    cache = tmp_path / "ticache"
    env = {"env_vars": {"TI_OFFLINE_CACHE_FILE_PATH": str(cache)}}
    sharded = ShardedScene(2, build_falling_ball, n_shards=1, shard_options={"runtime_env": env})
    (pid,) = [info["pid"] for info in sharded.shard_info()]
    sharded.step(DT, n=3)
    assert sharded.get_state().position[0, 0, 1] < 1.0  # it fell: its kernels ran
    assert not list(cache.glob("*.tic"))
    sharded.close()
    assert wait_gone(pid)
    assert len(list(cache.glob("*.tic"))) >= 3, sorted(p.name for p in cache.iterdir())


def test_template_snapshot_and_restore_repeat_bitwise():
    """A one-world template replicated into the shards; snapshot, run, restore, run again."""
    template = build(1)
    template.set_body_params([4], elasticity=0.7)
    reference = template.replicate(N_WORLDS)
    # Three shards on two CPUs: half a CPU each (Ray's resources are bookkeeping).
    with ShardedScene(
        N_WORLDS, template=template, n_shards=3, shard_options={"num_cpus": 0.5}
    ) as sharded:
        throw([reference, sharded])
        drive([reference, sharded], 15)
        assert same_state(reference.get_state(), sharded.get_state())
        saved = sharded.snapshot()
        assert isinstance(saved, ShardedSnapshot) and len(saved.shards) == 3
        sharded.apply_force(1, (5.0, 0.0))  # a push the snapshot does not hold
        drive([sharded], 20, seed=7)
        first = sharded.get_state()
        sharded.restore(saved)
        assert sharded.step_count == 15
        drive([sharded], 20, seed=7)
        assert not same_state(first, sharded.get_state())  # the extra force acted once
        sharded.restore(saved)
        sharded.apply_force(1, (5.0, 0.0))
        drive([sharded], 20, seed=7)
        assert same_state(first, sharded.get_state())
        # reset_worlds from the snapshot puts worlds 2 and 3 (two shards) back to step 15.
        sharded.reset_worlds([2, 3], saved)
        back = sharded.get_state()
        sharded.restore(saved)
        at_snapshot = sharded.get_state()
        for key in ("position", "angle"):
            np.testing.assert_array_equal(getattr(back, key)[2:4], getattr(at_snapshot, key)[2:4])


def test_bad_input_is_refused_before_any_shard_changes(two_shards):
    reference = build(N_WORLDS)
    sharded = two_shards()
    with pytest.raises(ValueError, match="force"):
        sharded.apply_force(1, np.ones((N_WORLDS + 1, 2)))
    with pytest.raises(ValueError, match="force"):
        sharded.apply_force(1, [[np.nan, 0.0]] * N_WORLDS)
    with pytest.raises(TypeError, match="body"):
        sharded.apply_force("ball", (1.0, 0.0))
    with pytest.raises(ValueError, match="world"):
        sharded.set_body_params([1], mass=2.0, world=[0, N_WORLDS])
    with pytest.raises(ValueError, match="mass"):
        sharded.set_body_params([1], mass=[1.0, 1.0, 1.0, -1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="target"):
        sharded.set_joint_target(0, np.zeros(N_WORLDS - 1))
    with pytest.raises(ValueError, match="state"):
        sharded.reset_worlds(
            [0, 5], fx.State(*(a[:3] for a in dataclasses.astuple(reference.get_state())))
        )
    with pytest.raises(ValueError, match="origins"):
        sharded.ray_cast(np.zeros((N_WORLDS - 1, 2, 2)), (0.0, -1.0), 1.0)
    with pytest.raises(ValueError, match="dt"):
        sharded.step(0.0)
    # Nothing of the refused calls reached a shard: the two still step alike.
    drive([reference, sharded], 10)
    assert same_state(reference.get_state(), sharded.get_state())
    # Several steps a round trip: the same states and clock as step by step.
    sharded.step(DT, n=5)
    for _ in range(5):
        reference.step(DT)
    assert same_state(reference.get_state(), sharded.get_state())
    assert sharded.time == reference.time
    # A world that faults (its ball pushed with 3e38 N, past the speeds the engine
    # simulates) is named by its global index and its shard; the shards no longer
    # agree, so stepping is refused.
    push = np.zeros((N_WORLDS, 2))
    push[4] = (3e38, 0.0)
    sharded.apply_force(sharded.body_index("ball"), push)
    with pytest.raises(fx.SimulationError, match=r"shard 1 \(worlds 3-5") as fault:
        sharded.step(DT)
    assert fault.value.worlds.tolist() == [4]
    assert fault.value.bodies.tolist() == [sharded.body_index("ball")]
    with pytest.raises(RuntimeError, match="restore"):
        sharded.step(DT)
    assert sharded.get_state().position.shape == (N_WORLDS, reference.n_bodies, 2)


def test_bad_sources_are_refused():
    with pytest.raises(TimeoutError, match="did not start"):  # 3 CPUs asked of 2
        ShardedScene(N_WORLDS, build, n_shards=3, timeout=5.0)
    with pytest.raises(TypeError, match="exactly one"):
        ShardedScene(N_WORLDS)
    with pytest.raises(ValueError, match="one-world"):
        ShardedScene(N_WORLDS, template=build(2))
    with pytest.raises(ValueError, match="on_worker_loss"):
        ShardedScene(N_WORLDS, build, on_worker_loss="ignore")
    with pytest.raises(ValueError, match="returned a scene of 4 worlds"):
        ShardedScene(N_WORLDS, build_wrong_count, n_shards=2)
    deadline = time.monotonic() + 30  # the refused scene's actors are gone
    while ray.available_resources().get("CPU", 0) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ray.available_resources().get("CPU", 0) == 2


def test_each_shard_sees_the_gpu_ray_gave_it():
    """With one (declared) GPU per shard, Ray hands each actor its own id: CUDA_VISIBLE_DEVICES
    is that id, and TI_VISIBLE_DEVICE (Taichi's Vulkan device) follows it."""
    with ShardedScene(
        4, build, n_shards=2, shard_options={"num_gpus": 1, "num_cpus": 1}
    ) as sharded:
        info = sharded.shard_info()
        threads = [sharded.inspect(taichi_threads, shard=k) for k in range(2)]
    assert threads == [1, 1]  # Taichi's CPU threads: the one CPU each shard was given
    ids = sorted(i["gpu_ids"][0] for i in info)
    assert ids == ["0", "1"]
    for shard in info:
        (gpu,) = shard["gpu_ids"]
        assert shard["env"] == {
            "CUDA_VISIBLE_DEVICES": gpu,
            "TI_VISIBLE_DEVICE": gpu,
            "FX2D_CPU_THREADS": "1",
        }  # the one CPU it was given


def test_vector_env_on_shards_runs_the_same_episodes():
    """CartPole's vector env over 2 shards: observations, rewards, terminations and
    truncations equal the in-process env's bit for bit, autoresets and randomisation
    included; render() draws the same first worlds."""
    from fx2d_gpu.envs import CartPoleVectorEnv

    options = dict(
        arch="cpu", randomize=True, max_episode_steps=30, render_mode="rgb_array", render_tiles=2
    )
    local = CartPoleVectorEnv(N_WORLDS, **options)
    sharded = CartPoleVectorEnv(N_WORLDS, shards=2, **options)
    try:
        first, _ = local.reset(seed=3)
        np.testing.assert_array_equal(first, sharded.reset(seed=3)[0])
        local.action_space.seed(0)
        ended = 0
        for _ in range(60):
            actions = local.action_space.sample()
            expected, got = local.step(actions), sharded.step(actions)
            for a, b in zip(expected[:4], got[:4], strict=True):
                np.testing.assert_array_equal(a, b)
            ended += int(expected[2].sum() + expected[3].sum())
        assert ended >= N_WORLDS  # episodes ended and were reset along the way
        np.testing.assert_array_equal(local.render(), sharded.render())
    finally:
        local.close()
        sharded.close()


def test_levels_env_on_shards_runs_the_same_episodes():
    """fx2d/Levels-v0 over 2 shards: each world's own generated level (per-world shapes,
    placements, masses, enabled bodies) written through the shards, and the episodes equal
    the in-process env's bit for bit, resets included."""
    from fx2d_gpu.envs import LevelsVectorEnv

    options = dict(arch="cpu", max_episode_steps=20)
    local = LevelsVectorEnv(4, **options)
    sharded = LevelsVectorEnv(4, shards=2, **options)
    try:
        first, _ = local.reset(seed=5)
        np.testing.assert_array_equal(first, sharded.reset(seed=5)[0])
        shapes = local.scene.get_shape_params(), sharded.scene.get_shape_params()
        for name in shapes[0]:
            np.testing.assert_array_equal(shapes[0][name], shapes[1][name], err_msg=name)
        local.action_space.seed(0)
        for _ in range(25):  # past max_episode_steps: every world resets to a new level
            actions = local.action_space.sample()
            expected, got = local.step(actions), sharded.step(actions)
            for a, b in zip(expected[:4], got[:4], strict=True):
                np.testing.assert_array_equal(a, b)
    finally:
        local.close()
        sharded.close()
