"""fx2d/Levels-v0: procedurally generated levels, one per world of one scene.

Gymnasium's check_env; seeding (the same seed repeats the levels and the episode, world w of
a vector env is the one-world env seeded seed + w); given levels read back exactly from the
scene; no generated level starts with bodies overlapping; a reset of some worlds leaves the
others' levels and states untouched; the reset's fixed number of scene calls; bad levels
refused, naming the field.
"""

import os
import warnings

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium", minversion="1.0")

from gymnasium.utils.env_checker import check_env  # noqa: E402

import fx2d_gpu.envs  # noqa: E402, F401  (registers the ids)
from fx2d_gpu.envs import levels as levels_module  # noqa: E402
from fx2d_gpu.envs.levels import (  # noqa: E402
    LEVEL_DRAWS,
    MAX_BOXES,
    MAX_TERRAIN,
    POLYGON_VERTICES,
    Level,
    LevelsEnv,
    LevelsVectorEnv,
    generate_levels,
)

ARCH = os.environ.get("FX2D_TEST_ARCH", "cpu")


def pentagon(radius):
    """A regular pentagon's outline (POLYGON_VERTICES, 2), counter-clockwise, centred."""
    corner = 2 * np.pi * np.arange(POLYGON_VERTICES) / POLYGON_VERTICES
    return radius * np.stack([np.cos(corner), np.sin(corner)], axis=1)


#: Two hand-made levels: different counts of everything.
GIVEN = [
    Level(
        terrain=[(0.0, -0.5, 20.0, 1.0, 0.0), (3.0, 2.0, 2.0, 0.2, 0.1)],
        boxes=[(2.0, 0.2, 0.3, 0.4, 0.5)],
        circles=[(-2.0, 0.25, 0.25), (4.0, 0.1, 0.1)],
        polygons=[(-4.0, 0.3, 0.2)],
        polygon_vertices=[pentagon(0.2)],
        start=(0.0, 0.4),
        goal=(6.0, 0.35),
    ),
    Level(
        terrain=[
            (-5.0, -0.5, 9.0, 1.0, 0.0),
            (5.0, -0.4, 9.0, 1.0, 0.0),
            (0.0, 3.0, 1.0, 0.2, 0.0),
        ],
        circles=[(6.0, 0.5, 0.3)],
        start=(-4.0, 0.4),
        goal=(-8.0, 0.35),
    ),
]


def random_actions(steps, num_envs, seed):
    return np.random.default_rng(seed).uniform(-1.0, 1.0, (steps, num_envs, 2))


def test_registered_and_one_world_env_passes_gymnasiums_env_checker():
    spec = gymnasium.spec("fx2d/Levels-v0")
    assert spec.max_episode_steps == 500 and spec.reward_threshold == 15.0
    vector = gymnasium.make_vec("fx2d/Levels-v0", num_envs=2, arch=ARCH)
    assert isinstance(vector, LevelsVectorEnv) and vector.max_episode_steps == 500
    vector.close()
    env = gymnasium.make("fx2d/Levels-v0", arch=ARCH)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert not [str(w.message) for w in caught]
    obs, _ = env.reset(seed=0)
    assert obs.shape == (17,) and obs.dtype == np.float32
    assert env.action_space.shape == (2,)
    env.close()


def test_reaching_the_goal_and_falling_off_end_the_episode():
    flat = [(0.0, -0.5, 8.0, 1.0, 0.0)]  # ground from x = -4 m to 4 m
    to_goal = Level(terrain=flat, start=(0.0, 0.37), goal=(2.0, 0.35))
    off_the_edge = Level(terrain=flat, start=(0.0, 0.37), goal=(-3.0, 0.35))
    env = LevelsEnv(arch=ARCH, levels=[to_goal, off_the_edge])
    for level, final in ((0, env.worlds.goal_bonus), (1, env.worlds.fall_penalty)):
        env.reset(seed=level)
        returns = 0.0
        for _ in range(200):  # a negative speed turns the wheels clockwise: the car goes right
            _, reward, terminated, _, _ = env.step(np.array([-1.0, -1.0], np.float32))
            returns += reward
            if terminated:
                break
        assert terminated and (reward > final if level == 0 else reward == final)
        assert returns > 11.0 if level == 0 else returns < -5.0
    env.close()


def test_the_same_seed_gives_the_same_levels_and_trajectory_other_seeds_other_levels():
    env = LevelsVectorEnv(3, arch=ARCH)
    actions = random_actions(15, 3, seed=1)
    runs = []
    for seed in (5, 5, 500):
        first, _ = env.reset(seed=seed)
        levels = env.current_levels()
        observations = [first] + [env.step(a)[0] for a in actions]
        runs.append((levels, np.array(observations)))
    (levels_a, obs_a), (levels_b, obs_b), (levels_c, _) = runs
    assert all(a.same_as(b) for a, b in zip(levels_a, levels_b, strict=True))
    np.testing.assert_array_equal(obs_a, obs_b)
    assert not any(a.same_as(c) for a, c in zip(levels_a, levels_c, strict=True))
    assert not levels_a[0].same_as(levels_a[1])  # each world its own level
    env.close()


def test_world_w_runs_the_episode_of_the_one_world_env_seeded_seed_plus_w():
    vector = LevelsVectorEnv(3, arch=ARCH, autoreset_mode="Disabled")
    single = LevelsEnv(arch=ARCH)
    actions = random_actions(20, 3, seed=2)
    first, _ = vector.reset(seed=40)
    levels = vector.current_levels()
    record = []
    for action in actions:
        obs, rewards, terminated, truncated, _ = vector.step(action)
        record.append((obs, rewards, terminated))
        if terminated.any():
            break
    for world in range(3):
        obs, _ = single.reset(seed=40 + world)
        np.testing.assert_array_equal(obs, first[world])
        assert single.worlds.current_levels()[0].same_as(levels[world])
        for step, (obs_v, rewards_v, terminated_v) in enumerate(record):
            obs, reward, terminated, _, _ = single.step(actions[step][world])
            np.testing.assert_array_equal(obs, obs_v[world], err_msg=f"world {world} step {step}")
            assert reward == rewards_v[world] and terminated == terminated_v[world]


def test_given_levels_come_back_exactly_from_the_scene():
    env = LevelsVectorEnv(3, arch=ARCH, levels=GIVEN)
    env.reset(seed=0)  # world w plays level w % 2
    scene = env.scene
    shapes = scene.get_shape_params()
    enabled = scene.enabled()
    state = scene.get_state()
    for world, level in enumerate([GIVEN[0], GIVEN[1], GIVEN[0]]):
        assert env.current_levels([world])[0].same_as(level)
        used = len(level.terrain)
        terrain = env.terrain
        np.testing.assert_array_equal(shapes["size"][world, terrain[:used]], level.terrain[:, 2:4])
        np.testing.assert_array_equal(
            state.position[world, terrain[:used]], level.terrain[:, :2].astype(np.float32)
        )
        np.testing.assert_array_equal(
            state.angle[world, terrain[:used]], level.terrain[:, 4].astype(np.float32)
        )
        np.testing.assert_array_equal(
            enabled[world, terrain], np.arange(MAX_TERRAIN) < used, err_msg=f"world {world}"
        )
        for bodies, rows in (
            (env.boxes, level.boxes),
            (env.circles, level.circles),
            (env.polygons, level.polygons),
        ):
            np.testing.assert_array_equal(
                enabled[world, bodies], np.arange(len(bodies)) < len(rows)
            )
            np.testing.assert_array_equal(
                state.position[world, bodies[: len(rows)]], rows[:, :2].astype(np.float32)
            )
        np.testing.assert_array_equal(
            shapes["size"][world, env.boxes[: len(level.boxes)]], level.boxes[:, 2:4]
        )
        np.testing.assert_array_equal(
            shapes["radius"][world, env.circles[: len(level.circles)]], level.circles[:, 2]
        )
        np.testing.assert_allclose(
            shapes["vertices"][world, env.polygons[: len(level.polygons)], :POLYGON_VERTICES],
            level.polygon_vertices,
            atol=1e-12,
        )
        np.testing.assert_array_equal(
            state.position[world, env.chassis], level.start.astype(np.float32)
        )
    env.reset()  # the next episode: the next level
    assert env.current_levels([0])[0].same_as(GIVEN[1])
    assert env.scene.enabled()[0, env.terrain[2]]  # the second level's third piece
    env.close()


def test_no_generated_level_starts_with_bodies_overlapping():
    env = LevelsVectorEnv(16, arch=ARCH)
    for seed in range(0, 64, 16):  # 64 levels, seeds 0 to 63
        env.reset(seed=seed)
        for moment in ("reset", "first step"):
            contacts = env.scene.contacts(world=None)
            depths = contacts.depths.max(axis=1, initial=0.0)
            overlapping = [
                (int(w), int(a), int(b), float(d))
                for w, a, b, d in zip(
                    contacts.world, contacts.body_a, contacts.body_b, depths, strict=True
                )
                if d > 0.0
            ]
            assert not overlapping, f"seed {seed}, {moment}: (world, a, b, depth) {overlapping}"
            env.step(np.zeros((16, 2)))
    # The generator alone, over many more levels: every loose body's bounding circle is
    # clear of the others'.
    batch = generate_levels(np.random.default_rng(0).random((5000, LEVEL_DRAWS)))
    centres = np.concatenate(
        [batch.boxes[..., :2], batch.circles[..., :2], batch.polygons[..., :2]], 1
    )
    radius = np.concatenate(
        [
            np.hypot(batch.boxes[..., 2], batch.boxes[..., 3]) / 2,
            batch.circles[..., 2],
            np.linalg.norm(batch.polygon_vertices, axis=-1).max(-1),
        ],
        1,
    )
    apart = np.linalg.norm(centres[:, :, None] - centres[:, None], axis=-1)
    gap = apart - radius[:, :, None] - radius[:, None]
    gap[:, np.arange(gap.shape[1]), np.arange(gap.shape[1])] = np.inf
    assert gap.min() > 0.0
    # Static boxes never overlap either: the platforms' extents along x are apart, and
    # their lowest points are above every ground piece.
    platforms = batch.terrain[:, -2:]
    reach = np.abs(np.cos(platforms[..., 4])) * platforms[..., 2] / 2 + 0.1
    both = batch.terrain_used[:, -2:].all(axis=1)
    apart = platforms[:, 1, 0] - reach[:, 1] - (platforms[:, 0, 0] + reach[:, 0])
    assert apart[both].min() > 0.0
    lowest = platforms[..., 1] - np.abs(np.sin(platforms[..., 4])) * platforms[..., 2] / 2 - 0.1
    ground_tops = batch.terrain[:, :-2, 1] + batch.terrain[:, :-2, 3] / 2
    highest = np.where(batch.terrain_used[:, :-2], ground_tops, -np.inf).max(axis=1)
    assert (lowest - highest[:, None]).min() > 1.0
    env.close()


def test_a_reset_of_some_worlds_leaves_the_others_levels_and_states_untouched():
    env = LevelsVectorEnv(4, arch=ARCH)
    env.reset(seed=3)
    for action in random_actions(5, 4, seed=3):
        env.step(action)
    scene = env.scene
    before = (scene.get_shape_params(), scene.get_body_params(), scene.enabled(), scene.get_state())
    levels = env.current_levels()
    mask = np.array([False, True, False, False])
    env.reset(options={"reset_mask": mask})
    after = (scene.get_shape_params(), scene.get_body_params(), scene.enabled(), scene.get_state())
    kept = ~mask
    for old, new in zip(before[:2], after[:2], strict=True):
        for name in old:
            np.testing.assert_array_equal(old[name][kept], new[name][kept], err_msg=name)
    np.testing.assert_array_equal(before[2][kept], after[2][kept])
    for name in ("position", "angle", "velocity", "angular_velocity"):
        np.testing.assert_array_equal(getattr(before[3], name)[kept], getattr(after[3], name)[kept])
    now = env.current_levels()
    assert [a.same_as(b) for a, b in zip(levels, now, strict=True)] == [True, False, True, True]
    env.close()


def test_a_reset_takes_a_fixed_number_of_scene_calls():
    env = LevelsVectorEnv(16, arch=ARCH)
    calls = []
    for name in ("set_shape_params", "set_body_params", "set_enabled", "reset_worlds"):
        method = getattr(env.scene, name)

        def counted(*args, _method=method, _name=name, **kwargs):
            calls.append(_name)
            return _method(*args, **kwargs)

        setattr(env.scene, name, counted)
    env.reset(seed=0)
    assert calls.count("set_shape_params") == 4
    assert calls.count("set_body_params") == calls.count("reset_worlds") == 1
    assert calls.count("set_enabled") == 1  # a table of flags, whatever the levels
    assert len(calls) == 7
    calls.clear()
    env.reset(options={"reset_mask": np.arange(16) == 7})
    assert len(calls) == 7
    env.close()


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"terrain": np.zeros((MAX_TERRAIN + 1, 5)) + 1}, "Level.terrain"),
        ({"boxes": np.ones((MAX_BOXES + 1, 5))}, "Level.boxes"),
        ({"boxes": [(0.0, 1.0, -0.3, 0.3, 0.0)]}, "Level.boxes"),
        ({"circles": [(0.0, 1.0, -0.2)]}, "Level.circles"),
        ({"circles": [(0.0, 1.0)]}, "Level.circles"),
        ({"polygons": [(0.0, 1.0, 0.0)]}, "Level.polygon_vertices"),
        ({"goal": (np.nan, 0.0)}, "Level.goal"),
    ],
)
def test_bad_levels_are_value_errors_naming_the_field(fields, match):
    with pytest.raises(ValueError, match=match):
        Level(**{"terrain": [(0.0, -0.5, 20.0, 1.0, 0.0)], **fields})


def test_bad_levels_arguments_are_refused_before_building_a_scene():
    with pytest.raises(ValueError, match="levels"):
        LevelsVectorEnv(2, arch=ARCH, levels=[])
    with pytest.raises(TypeError, match="levels"):
        LevelsVectorEnv(2, arch=ARCH, levels=GIVEN[0])
    with pytest.raises(TypeError, match=r"levels\[1\]"):
        LevelsVectorEnv(2, arch=ARCH, levels=[GIVEN[0], "level"])
    assert levels_module.LEVEL_DRAWS == LEVEL_DRAWS
