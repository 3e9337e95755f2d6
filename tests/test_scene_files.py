"""Fx2D scene files: the real ones in shared/fx2d-scenes, and bad input."""

import math

import numpy as np
import pytest

import fx2d_gpu as fx
from tests.conftest import shared_dir
from tests.test_joints import joint_control_demo

SCENES = shared_dir() / "fx2d-scenes"
UNSUPPORTED = {"chain_terrain.yml": "chain"}  # shapes of a later issue


def scene_files():
    files = sorted(SCENES.glob("*.yml"))
    assert files, f"no scene files under {SCENES}"
    return files


@pytest.mark.parametrize("path", scene_files(), ids=lambda p: p.name)
def test_shared_scene_files_load_and_run(arch, path):
    if path.name in UNSUPPORTED:
        with pytest.raises(ValueError, match=f"{UNSUPPORTED[path.name]}.*not supported yet"):
            fx.load_scene(path, arch=arch)
        return
    scene = fx.load_scene(path, arch=arch)
    width, height = scene.meta["size"]
    static = [b for b in range(scene.n_bodies) if scene.body_mass(b) == 0
              or scene._bodies[b].external_forces is False]
    start = scene.get_state()
    floor = min(start.position[0, b, 1] for b in static) if static else -math.inf
    for _ in range(600):
        scene.step(1 / 60)
    s = scene.get_state()
    assert np.all(np.isfinite(s.position)) and np.all(np.isfinite(s.velocity))
    for b in range(scene.n_bodies):
        x, y = s.position[0, b]
        inside = -width <= x <= 2 * width and -height <= y <= 2 * height
        # A body may leave only by falling off the end of the level (stacked_boxes' ball
        # rolls off its ground): then it is below every static body and still falling.
        fell_off = y < floor - 1.0 and s.velocity[0, b, 1] < -1.0
        assert inside or fell_off, f"{path.name}: {scene._bodies[b].name} at {(x, y)}"


def test_yaml_joint_demo_equals_the_api_scene(arch):
    from_file = fx.load_scene(SCENES / "joint_control_demo.yml", arch=arch)
    from_api, _, _ = joint_control_demo(arch)
    for _ in range(120):
        from_file.step(1 / 60)
        from_api.step(1 / 60)
    a, b = from_file.get_state(), from_api.get_state()
    np.testing.assert_allclose(a.position, b.position, atol=1e-6)
    np.testing.assert_allclose(a.angle, b.angle, atol=1e-6)
    assert from_file.body_index("arm") == 1 and from_file.joint_index("slider_motor") == 1


def test_degrees_offsets_and_defaults(arch):
    scene = fx.load_scene("""
scene:
  size: [10, 10]
entities:
  plank:
    pose: [1, 2, 90]
    init_velocity: [0.5, 0, 180]
    physics: {mass: 2, velocity_damping: 0.1}
    visual: {geometry: {rectangle: [2, 1]}, texture: missing/image.png}
    collision: {pose: [0.5, 0, 0], geometry: {rectangle: [1, 1]}}
""", arch=arch)
    s = scene.get_state()
    assert s.angle[0, 0] == pytest.approx(math.pi / 2)
    assert s.angular_velocity[0, 0] == pytest.approx(math.pi)
    # The centre of mass is the collision box's centre: 0.5 m along the rotated x axis.
    np.testing.assert_allclose(s.position[0, 0], [1.0, 2.5], atol=1e-6)
    assert scene.gravity == (0.0, 0.0)  # gravity defaults to zero in the format
    assert scene._bodies[0].vel_damping == pytest.approx(0.1)
    # Inertia from the visual 2 x 1 box about the centre of mass 0.5 m off its centre.
    assert scene.body_inertia(0) == pytest.approx(2 * ((4 + 1) / 12 + 0.25))
    assert scene.visuals[0]["fill"] == fx.io.scene_yaml.DEFAULT_COLOR  # missing image


BAD = [
    ("scene:\n  size: [1, 1]\nentities:\n  rock:\n    collision:\n      geometry:\n"
     "        blob: 3\n", "rock", "blob"),
    ("entities:\n  rock:\n    collision:\n      geometry: {circle: 1}\n", "scene file",
     "scene"),
    ("scene: {size: [1, 1]}\nentities:\n  rock:\n    collision:\n      geometry: "
     "{circle: -1}\n", "rock", "circle"),
    ("scene: {size: [1, 1]}\nentities:\n  a: {collision: {geometry: {circle: 1}}}\n"
     "joints:\n  hinge: {type: revolute, parent: a, child: ghost}\n", "hinge", "child"),
    ("scene: {size: [1, 1]}\nentities:\n  a: {pose: [0, 0], collision: {geometry: "
     "{circle: 1}}}\n", "'a'", "pose"),
    ("scene: {size: [1, 1]}\nentities:\n  a: {physics: {mass: heavy}, collision: "
     "{geometry: {circle: 1}}}\n", "'a'", "mass"),
]


@pytest.mark.parametrize("text,entity,key", BAD)
def test_bad_scene_files_name_entity_and_key(arch, text, entity, key):
    with pytest.raises((ValueError, TypeError)) as info:
        fx.load_scene(text, arch=arch)
    message = str(info.value)
    assert entity in message and key in message, message


def test_error_names_the_line(arch):
    text = "scene:\n  size: [4, 4]\nentities:\n  rock:\n    physics:\n      mass: -2\n" \
           "    collision: {geometry: {circle: 1}}\n"
    with pytest.raises(ValueError, match="line 6"):
        fx.load_scene(text, arch=arch)
