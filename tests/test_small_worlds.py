"""Small worlds (at most solver/context.BY_WORLD_MAX_BODIES bodies) take their own path
through a step: the broad phase checks every body of a world instead of hashing, and all
substeps run in one launch, one world per thread. The general path (grid, one launch per
stage and group of colours) is the independent reference: the two must agree bit for bit,
because a colour's constraints share no dynamic body, so solving them in sequence or in
parallel is the same arithmetic."""

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.solver import context, fused

from .helpers import TRACE_FIELDS, assert_same_trace, general_path, machine_scene, trace


@pytest.mark.parametrize("n_worlds", [3, 40])  # serial loops on the CPU; parallel ones
def test_small_worlds_step_bitwise_like_the_general_path(arch, n_worlds, monkeypatch):
    scene = machine_scene(n_worlds, arch)
    launches = []
    original = fused.substeps_by_world
    monkeypatch.setattr(fused, "substeps_by_world",
                        lambda ctx: launches.append(1) or original(ctx))
    small = trace(scene, 150)
    assert len(launches) == 150  # every step took the small-world path ...
    assert small["events"][0][0] > 0 and max(e[1] for e in small["events"]) > 0
    assert small["state"]["sleeping"].any()  # ... with contacts, events and sleep in it

    general_path(monkeypatch)
    launches.clear()
    general = trace(machine_scene(n_worlds, arch), 150)
    assert not launches
    assert_same_trace(small, general)


def test_a_world_alone_and_in_a_batch_agree_on_the_small_world_path(arch):
    batch = trace(machine_scene(40, arch), 60)
    alone = trace(machine_scene(1, arch), 60)
    for name in TRACE_FIELDS:
        np.testing.assert_array_equal(batch["state"][name][:1], alone["state"][name],
                                      err_msg=name)


def test_an_overflowing_colouring_falls_back_to_the_general_path(arch, monkeypatch):
    """A hub touched by more circles than there are colours overflows; those steps are
    solved through the overflow's Jacobi pass, with the same results as the general
    path."""
    def hub():
        scene = fx.Scene(gravity=(0.0, 0.0), arch=arch)
        scene.add_circle((0.0, 0.0), 1.0)
        # 36 rim circles: more than MAX_COLORS (31), and a small world (37 bodies).
        for angle in np.linspace(0.0, 2.0 * np.pi, 36, endpoint=False):
            scene.add_circle((1.07 * np.cos(angle), 1.07 * np.sin(angle)), 0.08,
                             velocity=(-np.cos(angle), -np.sin(angle)))
        return scene

    launches = []
    original = fused.substeps_by_world
    monkeypatch.setattr(fused, "substeps_by_world",
                        lambda ctx: launches.append(1) or original(ctx))
    scene = hub()
    assert scene.n_bodies <= context.BY_WORLD_MAX_BODIES
    first = trace(scene, 1)
    assert scene.n_overflow > 0 and not launches
    small = trace(scene, 20)
    general_path(monkeypatch)
    general = hub()
    assert_same_trace(first, trace(general, 1))
    assert_same_trace(small, trace(general, 20))
