"""Which bodies of a world may ever make a pair, read from the model on the host.

The broad phase pairs two bodies of a world only where nothing keeps them apart
(collision/broad_phase.py's never_collide: the collision filter, a joint without
collide_connected, Scene.disable_collision) and both have a collision shape. A scene in
which that holds for no two bodies (a cart-pole, a pendulum chain, a robot arm whose links
filter each other) never has a contact: its step can leave the contact stages out
(solver/step.py's contactless step), and a process that steps only such scenes never
compiles them.
"""

from __future__ import annotations

import numpy as np

from ..enums import SHAPE_NONE

#: Worlds of more bodies are not checked (the check is over every two bodies: n^2); the
#: step leaves contacts out only in worlds of at most 40 (solver/context.py's small worlds).
MAX_CHECKED_BODIES = 64


def may_pair(model: dict[str, dict[str, np.ndarray]]) -> np.ndarray:
    """(n, n) bool: whether bodies i and j of a world may pair (symmetric, False on the
    diagonal), from the built model's groups "model" and "joints" (builder.build_model).

    Either body may move or not: a pair of two static bodies counts too (the check is
    conservative where per-world masses could make one move). The bodies' per-world
    `enabled` flags are not read: a disabled body pairs with nothing, so the answer holds
    for every world."""
    bodies, joints = model["model"], model["joints"]
    n = len(bodies["collision_group"])
    has_shape = bodies["shape_kind"][:n] != SHAPE_NONE
    group = bodies["collision_group"]
    category = bodies["category_bits"].view(np.uint32)
    mask = bodies["mask_bits"].view(np.uint32)
    # Fx2D's collision_group first, else Box2D's category and mask bits (bodies.should_collide).
    shared_group = (group[:, None] == group[None, :]) & (group[:, None] != 0)
    filters_meet = ((category[:, None] & mask[None, :]) != 0) & (
        (category[None, :] & mask[:, None]) != 0
    )
    pairs = np.where(shared_group, group[:, None] > 0, filters_meet)
    pairs &= has_shape[:, None] & has_shape[None, :]
    np.fill_diagonal(pairs, False)
    linked = joints["collide"] == 0
    parents, children = joints["parent"][linked], joints["child"][linked]
    pairs[parents, children] = pairs[children, parents] = False
    owners = np.repeat(np.arange(n), np.diff(bodies["filter_start"]))
    pairs[owners, bodies["filters"]] = False  # disable_collision (both ends listed)
    return pairs


def never_pairs(model: dict[str, dict[str, np.ndarray]]) -> bool:
    """Whether no two bodies of a world may ever pair (may_pair is False throughout); False
    for worlds of more than MAX_CHECKED_BODIES bodies, which are not checked."""
    n = len(model["model"]["collision_group"])
    return n <= MAX_CHECKED_BODIES and not may_pair(model).any()
