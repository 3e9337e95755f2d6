"""Inputs the engine cannot honour are refused at once, naming the argument, and change
nothing (issue 76): masses whose inverse or inertia float32 cannot hold, state files that
are not regular files, get_state dtypes that are not float32 or float64."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.model.masses import MAX_INERTIA, MAX_MASS


def test_the_mass_limit_is_where_the_inverse_stops_being_a_normal_float32():
    assert np.float32(1.0 / MAX_MASS) == np.finfo(np.float32).tiny  # normal
    # A float32 step further (float64's inverse then rounds below 2**-126): subnormal.
    assert np.float32(1.0 / (MAX_MASS * (1.0 + 2.0**-23))) < np.finfo(np.float32).tiny
    assert np.isfinite(np.float32(MAX_INERTIA))


@pytest.mark.parametrize("add", ["add_circle", "add_circles"])
def test_a_mass_whose_inverse_float32_cannot_hold_is_refused_by_add(add):
    scene = fx.Scene(arch="cpu")
    with pytest.raises(ValueError, match=r"^mass.* must be <= 8\.507e\+37 kg"):
        if add == "add_circle":
            scene.add_circle((0.0, 5.0), 0.3, mass=1e38)
        else:
            scene.add_circles([(0.0, 5.0), (1.0, 5.0)], 0.3, mass=[1.0, 1e38])
    assert scene.n_bodies == 0


def test_a_mass_whose_derived_inertia_float32_cannot_hold_is_refused():
    scene = fx.Scene(n_worlds=2, arch="cpu")
    with pytest.raises(ValueError, match="^mass: the inertia must be finite in float32"):
        scene.add_box((0.0, 6.0), (10.0, 10.0), mass=8e37)  # inertia 1.3e39 kg m^2
    big = scene.add_box((0.0, 6.0), (10.0, 10.0))
    before = scene.get_body_params([big])
    for mass in (1e38, 8e37, [1.0, 8e37]):
        with pytest.raises(ValueError, match="^mass"):
            scene.set_body_params(big, mass=mass)
    after = scene.get_body_params([big])
    assert all(np.array_equal(before[k], after[k]) for k in before)
    scene.set_body_params(big, mass=8e37, inertia=1e38)  # given by hand: it fits
    scene.restore(scene.snapshot())  # and the scene restores itself


def test_a_huge_but_allowed_mass_falls_as_any_other():
    scene = fx.Scene(arch="cpu", enable_sleep=False)
    heavy = scene.add_circle((0.0, 5.0), 0.3, mass=MAX_MASS)
    light = scene.add_circle((2.0, 5.0), 0.3)
    for _ in range(30):
        scene.step(1 / 60)
    y = scene.get_state().position[0, :, 1]
    assert y[heavy] < 4.0 and y[heavy] == pytest.approx(y[light])


@pytest.mark.parametrize("dtype", ["garbage", "float33", [1, 2], 3.5, np.int32, "float16"])
def test_get_state_refuses_a_dtype_other_than_float32_and_float64(dtype):
    scene = fx.Scene(arch="cpu")
    scene.add_circle((0.0, 1.0), 0.5)
    with pytest.raises(TypeError, match="^dtype must be np.float32 or np.float64"):
        scene.get_state(dtype=dtype)
    assert scene.get_state(dtype="float32").position.dtype == np.float32


@pytest.mark.parametrize("path", ["/dev/zero", "/dev/urandom", "a directory", "a fifo"])
def test_a_state_file_that_is_not_a_regular_file_is_refused_at_once(path, tmp_path):
    import os

    scene = fx.Scene(arch="cpu")
    scene.add_circle((0.0, 1.0), 0.5)
    scene.step(1 / 60)
    if path == "a directory":
        path = str(tmp_path)
    elif path == "a fifo":
        path = str(tmp_path / "fifo.npz")
        os.mkfifo(path)  # no writer: a blocking open() would never return
    before = scene.get_state()
    for load in (scene.load_state, fx.SceneSnapshot.load):
        with pytest.raises(ValueError, match="not a fx2d_gpu state file \\(not a regular"):
            load(path)
    assert np.array_equal(scene.get_state().position, before.position)
    assert scene.step_count == 1


def test_render_settings_are_checked_by_the_constructor():
    from fx2d_gpu.envs import CartPoleVectorEnv

    with pytest.raises(ValueError, match="^render_tiles: 289 tiles do not fit render_size"):
        CartPoleVectorEnv(
            289, arch="cpu", render_mode="rgb_array", render_size=(16, 16), render_tiles=289
        )
    with pytest.raises(ValueError, match="^render_size must be 16 to 8192 pixels a side"):
        CartPoleVectorEnv(1, arch="cpu", render_mode="rgb_array", render_size=(10**6, 10**6))
    env = CartPoleVectorEnv(
        16, arch="cpu", render_mode="rgb_array", render_size=(32, 32), render_tiles=16
    )  # 16 tiles of 8 x 8 pixels: they fit
    env.reset(seed=0)
    assert env.render().shape == (32, 32, 3)
    env.close()


def test_render_worlds_draws_no_more_tiles_than_fit():
    from fx2d_gpu.draw.render import render_worlds

    scene = fx.Scene(n_worlds=289, arch="cpu")
    scene.add_circle((0.0, 1.0), 0.5)
    assert render_worlds(scene, (16, 16), max_tiles=289).shape == (16, 16, 3)
    with pytest.raises(ValueError, match="^size must be 16 to 8192"):
        render_worlds(scene, (10**6, 10**6))


def test_ragged_gravity_is_refused_naming_gravity():
    scene = fx.Scene(n_worlds=2, arch="cpu")
    scene.add_circle((0.0, 1.0), 0.5)
    before = scene.get_gravity()
    with pytest.raises(TypeError, match="^gravity must be .* got a ragged sequence"):
        scene.set_gravity([[0.0, 1.0], [2.0]])
    assert np.array_equal(scene.get_gravity(), before)


def test_the_envs_name_ragged_actions_and_options_that_are_not_a_dict():
    from fx2d_gpu.envs import CartPoleVectorEnv, LanderVectorEnv

    for env, ragged in (
        (CartPoleVectorEnv(2, arch="cpu"), [[0], [1, 2]]),
        (LanderVectorEnv(2, arch="cpu"), [[0.0, 1.0], [1.0]]),
    ):
        env.reset(seed=0)
        with pytest.raises(TypeError, match="^actions must be an array of shape .* ragged"):
            env.step(ragged)
        for options in (5, [("reset_mask", np.ones(2, bool))]):
            with pytest.raises(TypeError, match="^options must be None or a dict"):
                env.reset(options=options)
        env.close()
