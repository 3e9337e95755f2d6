"""Exact snapshots (Scene.snapshot / restore / save_state / load_state): a restored scene
repeats its run bitwise; a snapshot of another scene, or a file that is not one, is refused
and changes nothing."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.access.snapshots import FORMAT_VERSION
from fx2d_gpu.demos import demo_rain

from .helpers import Push, assert_bitwise_equal, fingerprint, rig, run


def push_up(body):
    """The push of a repeated run: 40 N up and 3 N m on `body` before its sixth step."""
    return Push(body, (0.0, 40.0), torque=3.0, at_step=5)


@pytest.mark.parametrize("build", ["rain", "rig"])
def test_restore_then_step_repeats_the_run_bitwise(arch, build):
    """The rain has sleeping bodies and a pile in contact (warm-start impulses, colours,
    islands); the rig has motors (PID integrators and targets)."""
    scene = demo_rain(arch=arch, bodies=30) if build == "rain" else rig(arch)
    run(scene, 300 if build == "rain" else 100)
    if build == "rain":
        assert scene.get_state().sleeping.any()
    else:
        scene.set_joint_target(0, 3.0)
    scene.apply_force(1 if build == "rig" else 10, (5.0, 0.0))  # pending: part of the state
    snap = scene.snapshot()
    push = push_up(scene.n_bodies - 1)
    first = fingerprint(run(scene, 100, push=push))
    time, steps = scene.time, scene.step_count
    scene.restore(snap)
    assert scene.step_count == steps - 100
    assert_bitwise_equal(fingerprint(run(scene, 100, push=push)), first, build)
    assert (scene.time, scene.step_count) == (time, steps)


def test_restore_undoes_motor_changes(arch):
    scene = rig(arch)
    run(scene, 30)
    snap = scene.snapshot()
    expected = fingerprint(run(scene, 40))
    scene.restore(snap)
    scene.set_joint_mode(0, "position", pid=(50.0, 0.0, 5.0), max_effort=5.0)
    scene.set_joint_target(1, 0.5)
    run(scene, 20)
    scene.restore(snap)
    assert_bitwise_equal(fingerprint(run(scene, 40)), expected, "motors")


def test_a_state_file_restores_into_a_new_scene(arch, tmp_path):
    scene = rig(arch)
    run(scene, 50)
    path = tmp_path / "rig.npz"
    scene.save_state(path)
    expected = fingerprint(run(scene, 50))
    other = rig(arch)  # a new scene of the same model, never stepped
    other.load_state(path)
    assert other.step_count == 50
    assert_bitwise_equal(fingerprint(run(other, 50)), expected, "file")


def test_another_scenes_snapshot_or_file_is_refused(arch, tmp_path):
    scene = rig(arch)
    run(scene, 10)
    before = fingerprint(scene)
    other = rig(arch)
    other.add_circle((9.0, 9.0), 0.2)  # one more body: another model
    with pytest.raises(ValueError, match="another scene"):
        scene.restore(other.snapshot())
    batch = fx.Scene(n_worlds=2, arch=arch)
    batch.add_circle((0.0, 0.0), 1.0)
    with pytest.raises(ValueError, match="another scene"):
        scene.restore(batch.snapshot())
    with pytest.raises(TypeError, match="snapshot"):
        scene.restore(scene.get_state())
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a state file")
    with pytest.raises(ValueError, match="not a fx2d_gpu state file"):
        scene.load_state(bad)
    old = tmp_path / "old.npz"
    snap = scene.snapshot()
    snap.save(old)
    data = dict(np.load(old))
    data["meta"] = np.array(
        str(data["meta"]).replace(f'"format_version": {FORMAT_VERSION}', '"format_version": 99')
    )
    np.savez(old, **data)
    with pytest.raises(ValueError, match="format 99"):
        scene.load_state(old)
    assert_bitwise_equal(fingerprint(scene), before, "refused calls")
    run(scene, 5)  # and it still steps
