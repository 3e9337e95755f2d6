"""Small worlds' bodies interleaved for a GPU's warps (StepOptions.interleave_small_worlds).

A small worlds' step runs a world per thread (fused.step_by_world), and a body slot is
`world * n_bodies + body`, so a warp's 32 threads (32 worlds) reading body b read addresses
n_bodies slots apart: 32 separate 32-byte sectors for one velocity, where 32 neighbouring
slots would take 8 (a float2 each) and one 128-byte line of the L1 cache for a scalar field.
Every constraint of every substep reads and writes its two bodies' pose, velocity and
displacements, so in the substeps each world works on a copy of its bodies' hot state laid
out body-major: slot b of world w at `b * n_worlds + w` (BodyState's `interleaved_*`
fields), world-minor as batched GPU engines lay out their state. The world copies its
bodies in before its substeps and out after them (copy_bodies); in between the stages see
the copy through BodyView, which has BodyState's attributes and maps a slot of its world to
the copy's index. The same arithmetic on the same values in the same order: the same
results bit for bit (tests/test_interleaved.py).
"""

import taichi as ti
from taichi.lang import impl

from ...device import INTERLEAVED_BODY_FIELDS

#: The interleaved fields' names (device.INTERLEAVED_BODY_FIELDS).
HOT_FIELDS = tuple(name for name, _, _ in INTERLEAVED_BODY_FIELDS)


class _Interleaved:
    """One hot field as its world's stages index it: [slot] of the world's bodies, read or
    written at the interleaved copy's index (slot - first) * n_worlds + world."""

    def __init__(self, copy, first, n_worlds, world):
        self.copy, self.first, self.n_worlds, self.world = copy, first, n_worlds, world

    def __getitem__(self, slot):
        # (At compile time: this builds the index and the copy's element, a field entry
        # that reads, assigns and takes atomics as the original's does.)
        return impl.subscript(None, self.copy, (slot - self.first) * self.n_worlds + self.world)


class BodyView:
    """BodyState as world `world`'s stages see it inside its substeps (built at compile
    time in the kernel, a ti.template() for the stages' functions): where `interleave`,
    the HOT_FIELDS are their interleaved copies (_Interleaved), every other attribute is
    BodyState's own; else every attribute is BodyState's own (no cost at all). Only the
    world's own body slots may be indexed through it (a small world's constraints join
    bodies of one world)."""

    # Taichi treats an object with this attribute as its own data (expr_init keeps it as
    # it is) ...
    _data_oriented = True
    # ... and a callable with this one as its own function: calling the class inside a
    # kernel builds the view at compile time without Taichi's warning about a call of a
    # Python function (the constructor only stores expressions; it emits no code).
    _is_taichi_function = False

    def __init__(self, bodies, interleave: bool, world, n_bodies, n_worlds):
        self._bodies = bodies
        if interleave:
            first = world * n_bodies
            for name in HOT_FIELDS:
                copy = getattr(bodies, "interleaved_" + name)
                setattr(self, name, _Interleaved(copy, first, n_worlds, world))

    def __getattr__(self, name):
        # (Only for attributes __init__ did not set: the fields that are not copied.)
        return getattr(self._bodies, name)


@ti.func
def copy_bodies(bodies: ti.template(), world, n_bodies, n_worlds, into_copy: ti.template()):
    """World `world`'s bodies' HOT_FIELDS into their interleaved copies (`into_copy`), or
    back (before and after its substeps)."""
    for body in range(n_bodies):
        slot = world * n_bodies + body
        at = body * n_worlds + world
        for name in ti.static(HOT_FIELDS):
            original = ti.static(getattr(bodies, name))
            copy = ti.static(getattr(bodies, "interleaved_" + name))
            if ti.static(into_copy):
                copy[at] = original[slot]
            else:
                original[slot] = copy[at]
