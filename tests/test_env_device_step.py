"""A vector env's per-world work on the device (fx2d_gpu/envs/device_step.py, issue 74).

The device's path of fx2d/CartPole-v0, fx2d/Lander-v0 and fx2d/Levels-v0 (their pushes
or wheel targets, their restarts' draws and initial states, their observations, each world
a thread; the lander's contact flags and the lidars too) against the host's path (NumPy's
apply_force or set_joint_target, WorldStreams, _initial_states, reset_worlds, get_columns,
and touching, get_state and ray_cast), which stays the path of sharded scenes, randomised
tasks and backends without 64-bit numbers: step for step bit for bit in every autoreset
mode, both action spaces, through seeded and masked resets; the device's draws against the
streams' host arithmetic; and what a vector step launches and hands the device.
"""

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium", minversion="1.0")

import taichi as ti  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from fx2d_gpu.device import launching  # noqa: E402
from fx2d_gpu.envs import (  # noqa: E402
    CartPoleVectorEnv,
    LanderVectorEnv,
    LevelsVectorEnv,
    WorldStreams,  # noqa: E402
)
from fx2d_gpu.envs.device_step import DeviceStep, stream_draws  # noqa: E402
from fx2d_gpu.envs.levels import LEVEL_DRAWS, generate_levels  # noqa: E402


def _pair(arch, num_envs, env_class=CartPoleVectorEnv, **options):
    """(device path, host path): two vector envs of env_class alike but for the path."""
    device = env_class(num_envs, arch=arch, **options)
    if not device.device_step:
        pytest.skip(f"no device step on {arch}: Vulkan's SPIR-V has no 64-bit sine")
    host = env_class(num_envs, arch=arch, device_step=False, **options)
    assert not host.device_step
    return device, host


def _assert_same(a, b, what):
    if isinstance(a, dict):
        assert a.keys() == b.keys(), what
        for key in a:
            _assert_same(a[key], b[key], f"{what}[{key!r}]")
    elif isinstance(a, np.ndarray) and a.dtype == object:
        assert a.shape == b.shape, what
        for x, y in zip(a, b, strict=True):
            _assert_same(x, y, what)
    elif a is None or isinstance(a, np.ndarray | np.generic | bool | int | float):
        np.testing.assert_array_equal(a, b, err_msg=what, strict=True)
    else:  # pragma: no cover - a new kind of info
        raise AssertionError(f"{what}: unexpected {type(a).__name__}")


def _assert_same_reset(device, host, mask, seed):
    """Both envs reset the worlds of `mask` from `seed` to the same observation."""
    options = {"reset_mask": mask}
    _assert_same(
        device.reset(seed=seed, options=options)[0],
        host.reset(seed=seed, options=options)[0],
        "masked reset",
    )


def _assert_same_bodies(device, host):
    """The two envs' scenes hold the same bodies' poses and velocities, bit for bit."""
    a, b = device.scene.get_state(), host.scene.get_state()
    for key in ("position", "angle", "velocity", "angular_velocity"):
        np.testing.assert_array_equal(getattr(a, key), getattr(b, key), err_msg=key)


@pytest.mark.parametrize(
    "mode, continuous",
    [
        (AutoresetMode.NEXT_STEP, False),
        (AutoresetMode.NEXT_STEP, True),
        (AutoresetMode.SAME_STEP, False),
    ],
)
def test_device_steps_match_the_host_path_bit_for_bit(arch, mode, continuous):
    """Random play over many episodes (a random cart-pole falls in ~20 steps, truncation at
    30 ends the rest): every observation, reward, termination, truncation and info equal,
    and at the end the bodies' whole state, the episodes' lengths, and the streams' counts
    (a last reset that goes on drawing from each stream draws the same)."""
    device, host = _pair(arch, 48, autoreset_mode=mode, continuous=continuous, max_episode_steps=30)
    seeds = [1000 + 7 * w for w in range(48)]
    _assert_same(device.reset(seed=seeds)[0], host.reset(seed=seeds)[0], "reset")
    rng = np.random.default_rng(7)
    restarts = 0
    for step in range(120):
        if continuous:
            actions = rng.uniform(-1.5, 1.5, (48, 1))  # float64, clipped to the box
        else:
            actions = rng.integers(0, 2, 48)
        a = device.step(actions)
        b = host.step(actions)
        names = ("obs", "rewards", "terminated", "truncated", "infos")
        for name, x, y in zip(names, a, b, strict=True):
            _assert_same(x, y, f"step {step} {name}")
        restarts += int(np.sum(a[2] | a[3]))
        if step == 60:  # a masked, seeded reset halfway
            mask = np.arange(48) % 3 == 0
            _assert_same_reset(device, host, mask, seed=5)
    assert restarts > 150  # every world started over several times
    _assert_same_bodies(device, host)
    np.testing.assert_array_equal(device.episode_steps, host.episode_steps)
    _assert_same(device.reset()[0], host.reset()[0], "a reset drawing on from the streams")


@pytest.mark.parametrize("continuous", [False, True])
def test_lander_device_steps_match_the_host_path_bit_for_bit(arch, continuous):
    """Random landers, 10 m up with random speeds, over episodes of at most 90 steps, and
    landers firing one side engine only (turning past +-pi: the angle's wrap either way):
    legs and hulls touch the terrain (the contact flags), lidar rays hit it and miss it
    (nearest_in_world against the scene's grid walk), hulls crash (terminated); every
    observation, reward, termination and truncation equal step for step, through a masked,
    seeded reset, then the bodies' whole state."""
    n = 32
    device, host = _pair(arch, n, LanderVectorEnv, continuous=continuous, max_episode_steps=90)
    _assert_same(device.reset(seed=11)[0], host.reset(seed=11)[0], "reset")
    rng = np.random.default_rng(5)
    seen = dict(legs=0, crashes=0, ray_hits=0, ray_misses=0, above_pi=0, below_minus_pi=0)
    for step in range(150):
        if continuous:
            actions = rng.uniform(-1.2, 1.2, (n, 2))
            actions[:4] = (-1.0, -1.0)  # the left engine only: turning counter-clockwise
            actions[4:8] = (-1.0, 1.0)
        else:
            actions = rng.choice(4, n, p=[0.2, 0.2, 0.4, 0.2])  # the main engine often
            actions[:4], actions[4:8] = 1, 3
        a = device.step(actions)
        b = host.step(actions)
        for name, x, y in zip(("obs", "rewards", "terminated", "truncated"), a, b, strict=False):
            _assert_same(x, y, f"step {step} {name}")
        obs = a[0]
        seen["legs"] += int((obs[:, 6:8] == 1.0).sum())
        seen["crashes"] += int((a[2] & (a[1] == -100.0)).sum())
        seen["ray_hits"] += int((obs[:, 8:] < 1.0).sum())
        seen["ray_misses"] += int((obs[:, 8:] == 1.0).sum())
        angle = device.scene.get_state(bodies=[device.hull]).angle[:, 0]
        seen["above_pi"] += int((angle > np.pi).sum())
        seen["below_minus_pi"] += int((angle < -np.pi).sum())
        if step == 75:
            mask = np.arange(n) % 4 == 1
            _assert_same_reset(device, host, mask, seed=9)
    assert all(count > 0 for count in seen.values()), seen
    _assert_same_bodies(device, host)


@pytest.mark.parametrize("given", [False, True])
def test_levels_device_steps_match_the_host_path_bit_for_bit(arch, given):
    """Cars driven at random through generated levels (or given ones, taken in turn: new
    ones written by the host at each restart, their goals handed to the device), episodes
    of at most 50 steps: the wheel targets set on the device, the lidar hitting and
    missing; every observation, reward, termination and truncation equal step for step
    (each step's state follows from the targets set before it), through a masked, seeded
    reset, then the bodies' whole state; render() draws the same image."""
    n = 16
    options = dict(max_episode_steps=50, render_mode="rgb_array")
    if given:
        options["levels"] = [
            generate_levels(np.random.default_rng(seed).random((1, LEVEL_DRAWS))).level(0)
            for seed in range(3)
        ]
    device, host = _pair(arch, n, LevelsVectorEnv, **options)
    _assert_same(device.reset(seed=21)[0], host.reset(seed=21)[0], "reset")
    rng = np.random.default_rng(8)
    restarts = hits = misses = 0
    for step in range(120):
        actions = rng.uniform(-1.2, 1.2, (n, 2))
        a = device.step(actions)
        b = host.step(actions)
        for name, x, y in zip(("obs", "rewards", "terminated", "truncated"), a, b, strict=False):
            _assert_same(x, y, f"step {step} {name}")
        restarts += int((a[2] | a[3]).sum())
        hits += int((a[0][:, 9:] < 1.0).sum())
        misses += int((a[0][:, 9:] == 1.0).sum())
        if step == 70:
            mask = np.arange(n) % 3 == 2
            _assert_same_reset(device, host, mask, seed=2)
    assert restarts > n and hits > 0 and misses > 0  # (episodes of at most 50 steps)
    _assert_same_bodies(device, host)
    np.testing.assert_array_equal(device.render(), host.render())


def test_a_lander_on_the_devices_path_draws_its_lidar(arch):
    """render() on the device's path casts the last observation's lidar again on the host:
    the same image as the host's path, whose observation cast it."""
    device, host = _pair(arch, 2, LanderVectorEnv, render_mode="rgb_array", render_tiles=2)
    device.reset(seed=4)
    host.reset(seed=4)
    for _ in range(20):  # falling: the terrain comes in range
        observations = device.step(np.zeros(2, np.int64))[0]
        host.step(np.zeros(2, np.int64))
    assert (observations[:, 8:] < 1.0).any()  # rays that hit: drawn to the terrain
    np.testing.assert_array_equal(device.render(), host.render())


def test_the_devices_draws_are_the_streams_draws(arch):
    """stream_draws on the device against WorldStreams.uniform's NumPy arithmetic: keys
    and counts anywhere in 64 bits (the wrap of key + count * gamma included)."""
    n_worlds, n = 4096, 5
    streams = WorldStreams(n_worlds)
    rng = np.random.default_rng(3)
    streams.keys[:] = rng.integers(0, 2**64, n_worlds, dtype=np.uint64, endpoint=False)
    streams.counts[:] = rng.integers(0, 2**64, n_worlds, dtype=np.uint64, endpoint=False)
    streams.counts[:4] = [0, 2**64 - 1, 2**64 - 3, 1]
    keys, counts = ti.ndarray(ti.u64, n_worlds), ti.ndarray(ti.u64, n_worlds)
    keys.from_numpy(streams.keys)
    counts.from_numpy(streams.counts)
    out = np.zeros((n_worlds, n))

    @ti.kernel
    def draw(
        keys: ti.types.ndarray(dtype=ti.u64, ndim=1),
        counts: ti.types.ndarray(dtype=ti.u64, ndim=1),
        out: ti.types.ndarray(dtype=ti.f64, ndim=2),
    ):
        for world in range(out.shape[0]):
            draws = stream_draws(keys, counts, world, n)
            for i in ti.static(range(n)):
                out[world, i] = draws[i]

    draw(keys, counts, out)
    expected = streams.uniform(np.arange(n_worlds), n)
    np.testing.assert_array_equal(out, expected)
    assert ((0 <= out) & (out < 1)).all() and len(np.unique(out)) == out.size


def test_a_vector_step_launches_twice_around_the_scenes_step(arch):
    """The device's path: the push (the actions) and the restarts with the observation
    (the observation's array; the restart flags where a world restarts), against the host
    path's scatter of forces, reset rows and columns: launches and the NumPy arrays handed
    to them, counted step by step."""
    counted = {}
    for path, env in zip(("device", "host"), _pair(arch, 32, max_episode_steps=25), strict=True):
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(40):  # episodes under way, some ending each step
            _, _, terminated, truncated, _ = env.step(rng.integers(0, 2, 32))
        counted[path] = []
        for _ in range(20):
            restarting = bool((terminated | truncated).any())  # (NEXT_STEP: they restart now)
            launches, arrays = launching.launch_count(), launching.host_array_count()
            _, _, terminated, truncated, _ = env.step(rng.integers(0, 2, 32))
            given = np.subtract(launching.host_array_count(), arrays)
            counted[path].append((restarting, launching.launch_count() - launches, *given))
    restarts = [row[0] for row in counted["device"]]
    assert any(restarts) and not all(restarts)  # steps with restarts and steps without
    scene_step = 1  # (a cart-pole's step: one launch, alike on both paths)
    for restarting, launches, launches_given, arrays in counted["device"]:
        assert (launches, launches_given, arrays) == (2 + scene_step, 2, 2 + restarting)
    for (restarting, *device), (_, *host) in zip(counted["device"], counted["host"], strict=True):
        # The host's: two arrays for the forces, three for a reset's rows, one for the
        # columns, in as many launches.
        assert host[0] == device[0] + restarting and host[2] == 3 + 3 * restarting


def _random_actions(env, rng):
    """A batch of `env`'s actions, drawn from `rng`: Discrete(4) or Box(-1, 1, (2,))."""
    if isinstance(env, LanderVectorEnv) and not env.continuous:
        return rng.integers(0, 4, env.num_envs)
    return rng.uniform(-1.0, 1.0, (env.num_envs, 2))


@pytest.mark.parametrize("env_class", [LanderVectorEnv, LevelsVectorEnv])
def test_a_lidar_task_launches_twice_around_the_scenes_step(arch, env_class):
    """The device's path of the lander and the car: the push or the wheel targets (the
    actions) and one launch for the contact flags, the restarts and the observation with
    its lidar (the observation's array; the lander's restart flags where a world
    restarts; a new level is written by the host on both paths), where the host's path
    launches the touching flags, get_state, the query grid and the cast (the car's two
    set_joint_target, and the lander's reset_worlds)."""
    counted = {}
    for path, env in zip(
        ("device", "host"), _pair(arch, 32, env_class, max_episode_steps=25), strict=True
    ):
        env.reset(seed=0)
        rng = np.random.default_rng(0)
        for _ in range(40):
            _, _, terminated, truncated, _ = env.step(_random_actions(env, rng))
        counted[path] = []
        for _ in range(20):
            restarting = bool((terminated | truncated).any())
            launches, arrays = launching.launch_count(), launching.host_array_count()
            _, _, terminated, truncated, _ = env.step(_random_actions(env, rng))
            given = np.subtract(launching.host_array_count(), arrays)
            counted[path].append((restarting, launching.launch_count() - launches, *given))
    restarts = [row[0] for row in counted["device"]]
    assert any(restarts) and not all(restarts)
    # (The scene's own launches are the same on both paths: a step after a new level also
    # closes the joints set_enabled put back, given their rows.)
    lander = env_class is LanderVectorEnv
    for (restarting, *device), (_, *host) in zip(counted["device"], counted["host"], strict=True):
        lander_restart = restarting and lander  # (the host path's reset_worlds)
        assert host[0] - device[0] == 3 + lander_restart
        assert host[1] - device[1] == 2 + lander_restart
        assert host[2] - device[2] == (7 + 2 * restarting if lander else 6)


def test_randomised_tasks_keep_the_host_path(arch):
    """Domain randomisation draws masses and gravity through the host's scene calls: such
    an env steps on the host's path (and steps)."""
    env = CartPoleVectorEnv(4, arch=arch, randomize=True)
    assert not DeviceStep.usable(env) and not env.device_step
    env.reset(seed=0)
    assert env.step(np.ones(4, np.int64))[0].shape == (4, 4)


def test_a_lander_vector_step_is_three_launches_on_a_gpus_path(arch):
    """On the path a GPU takes (the scene's step folded into one launch, counted on the
    CPU: fold_on_cpu), a lander's vector step is three launches, a step after restarts
    too: the push, the scene's step (its contact report built in it, the pushes' forces
    cleared in it after the sleep pass; no body restarts asleep, so no resting pair is
    checked apart) and the restarts with the observation. The same kernels in every step:
    none compiles for the first restart, minutes into a GPU run."""
    if arch != "cpu":
        pytest.skip("the GPU's path is counted on the CPU (fold_on_cpu)")
    env = LanderVectorEnv(32, arch=arch, max_episode_steps=25)
    scene = env.scene
    scene.step_options = scene.step_options.replace(fold_on_cpu=True, steps_in_flight=True)
    env.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(40):
        _, _, terminated, truncated, _ = env.step(_random_actions(env, rng))
    counted = []
    for _ in range(20):
        restarting = bool((terminated | truncated).any())
        before = launching.kernel_launches()
        _, _, terminated, truncated, _ = env.step(_random_actions(env, rng))
        after = launching.kernel_launches()
        launched = {name: after[name] - before.get(name, 0) for name in after}
        counted.append((restarting, {name: n for name, n in launched.items() if n}))
    restarts = [restarting for restarting, _ in counted]
    assert any(restarts) and not all(restarts)
    kernels = {
        "fx2d_gpu.envs.device_step._push": 1,
        "fx2d_gpu.physics.solver.fused._substeps": 1,
        "fx2d_gpu.envs.device_step._restart_and_observe": 1,
    }
    for restarting, launched in counted:
        assert launched == kernels, (restarting, launched)
