"""Mistakes a newcomer makes, answered with what to do: a keyword of another engine
(friction=), a scene file that is not there."""

import errno

import pytest

import fx2d_gpu as fx


def test_friction_keyword_points_to_static_and_dynamic_friction():
    scene = fx.Scene(arch="cpu")
    with pytest.raises(TypeError, match="unexpected keyword argument 'friction'; did you mean "
                                        "static_friction= and dynamic_friction="):
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
