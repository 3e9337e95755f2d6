"""Mistakes a newcomer makes, answered with what to do: a keyword of another engine
(friction=), a scene file that is not there."""

import errno

import pytest

import fx2d_gpu as fx


def test_friction_keyword_points_to_static_and_dynamic_friction():
    scene = fx.Scene(arch="cpu")
    with pytest.raises(
        TypeError,
        match="unexpected keyword argument 'friction'; did you mean "
        "static_friction= and dynamic_friction=",
    ):
        scene.add_box((0.0, 0.0), (1.0, 1.0), friction=0.5)
    with pytest.raises(TypeError, match="'restitution'; did you mean elasticity="):
        scene.add_circle((0.0, 0.0), 0.5, restitution=0.5)
    with pytest.raises(TypeError, match="unexpected keyword argument 'colour'$"):
        scene.add_circle((0.0, 0.0), 0.5, colour="red")  # no hint where none fits
    assert scene.n_bodies == 0


def test_a_missing_scene_file_is_a_file_not_found_error(tmp_path):
    missing = tmp_path / "no_such_scene.yml"
    with pytest.raises(FileNotFoundError) as raised:
        fx.load_scene(missing, arch="cpu")
    error = raised.value
    assert error.errno == errno.ENOENT and error.filename == str(missing)
    assert str(error) == f"scene file {str(missing)!r} does not exist"
    assert isinstance(error, ValueError)  # as before: handlers of ValueError still see it
    with pytest.raises(FileNotFoundError):
        fx.load_scene(str(missing), arch="cpu")


def test_the_image_renderer_draws_joints_where_asked(arch):
    """A pendulum: a ball hung 2 m below a static bar on a revolute joint. With joints=True
    (what fx2d run's frames use) the string between the pivot and the ball is drawn; without,
    the ball floats, as before."""
    from fx2d_gpu.draw.render import _JOINT, render

    scene = fx.Scene(arch=arch)
    bar = scene.add_box((0.0, 2.0), (3.0, 0.2), mass=0)
    ball = scene.add_circle((0.0, 0.0), 0.3)
    scene.add_revolute_joint(bar, ball, anchor=(0.0, 0.0))
    bounds = (-2.0, -1.0, 2.0, 3.0)  # 100 px a metre in 400 x 400
    with_joints = render(scene, size=(400, 400), bounds=bounds, joints=True)
    plain = render(scene, size=(400, 400), bounds=bounds)
    mid_string = with_joints[400 - 100 * (1 + 1), 200]  # (0, 1) m: halfway down
    assert (mid_string == _JOINT).all()
    assert not (plain[200, 200] == _JOINT).all()
    differ = (with_joints != plain).any(axis=2)
    assert differ[:, 195:206].sum() == differ.sum() > 50  # the string alone, vertical
