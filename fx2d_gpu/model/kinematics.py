"""Joint coordinates and anchors from a state, on the host (NumPy, every world at once)."""

from __future__ import annotations

import numpy as np

from ..enums import JOINT_REVOLUTE
from ..shapes import rotation


def joint_anchors(joints, state) -> np.ndarray:
    """(n_worlds, n_joints, 2, 2) world positions (m) of each joint's parent anchor and
    child anchor. joints: builder.Joint list; state: a State."""
    out = np.zeros((state.angle.shape[0], len(joints), 2, 2))
    for j, joint in enumerate(joints):
        for k, (body, local) in enumerate(
            ((joint.parent, joint.anchor_parent), (joint.child, joint.anchor_child))
        ):
            out[:, j, k] = state.position[:, body] + rotation(state.angle[:, body]) @ local
    return out


def joint_coordinates(joints, state) -> tuple[np.ndarray, np.ndarray]:
    """(position, rate), each (n_worlds, n_joints): relative angle (rad) and its rate for a
    revolute joint, travel along the axis (m) and its rate for a prismatic one."""
    w = state.angle.shape[0]
    position, rate = np.zeros((w, len(joints))), np.zeros((w, len(joints)))
    for j, joint in enumerate(joints):
        pa, ca = state.angle[:, joint.parent], state.angle[:, joint.child]
        if joint.kind == JOINT_REVOLUTE:
            position[:, j] = ca - pa - joint.reference_angle
            rate[:, j] = (
                state.angular_velocity[:, joint.child] - state.angular_velocity[:, joint.parent]
            )
        else:
            axis = rotation(pa) @ joint.axis
            anchor = rotation(pa) @ joint.anchor_parent + state.position[:, joint.parent]
            position[:, j] = ((state.position[:, joint.child] - anchor) * axis).sum(1)
            rate[:, j] = (
                (state.velocity[:, joint.child] - state.velocity[:, joint.parent]) * axis
            ).sum(1)
    return position, rate


def joint_errors(joints, state) -> np.ndarray:
    """(n_worlds, n_joints) how far each joint is from holding, m: a revolute joint's anchors
    apart; a prismatic joint's child anchor off the parent's axis, plus its travel past a
    limit. joints: builder.Joint list; state: anything with position (n_worlds, n_bodies, 2)
    and angle (n_worlds, n_bodies)."""
    anchors = joint_anchors(joints, state)
    offset = anchors[:, :, 1] - anchors[:, :, 0]
    errors = np.hypot(offset[..., 0], offset[..., 1])
    for j, joint in enumerate(joints):
        if joint.kind != JOINT_REVOLUTE:
            axis = rotation(state.angle[:, joint.parent]) @ joint.axis
            travel = (offset[:, j] * axis).sum(1)
            across = np.abs(offset[:, j, 1] * axis[:, 0] - offset[:, j, 0] * axis[:, 1])
            errors[:, j] = across + np.maximum.reduce(
                [travel - joint.upper, joint.lower - travel, np.zeros_like(travel)]
            )
    return errors
