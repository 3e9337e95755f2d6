"""Small worlds' state interleaved for a GPU's warps (StepOptions.interleave_small_worlds).

A small worlds' step runs a world per thread (fused.step_by_world), and a world's body
slots (`world * n_bodies + body`) and pairs (its range of the pair list) lie together, so a
warp's 32 threads (32 worlds) reading their body b, or their pair j, read addresses a
world's worth apart: 32 separate 32-byte sectors for one velocity, where 32 neighbouring
entries would take 8 (a float2 each), or 4 for a scalar. Every constraint of every substep
reads and writes its bodies' pose, velocity and displacements and reads its prepared
contact (arms, masses, friction), so in the substeps each world works on them laid out
world-minor, as batched GPU engines lay out their state:

- bodies: a copy of the hot state (BodyState's `interleaved_*` fields), slot b of world w
  at `b * stride + w` (body_stride), copied in before the world's substeps and out after
  them (copy_bodies);
- pairs, where every world's pairs fit world-minor (the most pairs a world has, times the
  stride, at most the pool's pair capacity: pair_layout), pair j of world w at
  `j * stride + w`; else in the pair list's own order:
  - manifolds (the fields a step carries, pairs.ORDERED_PAIR_FIELDS and
    ORDERED_POINT_FIELDS): a copy in `staging` (the step's scratch manifolds, which nothing
    else uses during the substeps), copied in and out as the bodies are (copy_pairs);
  - prepared contacts (PreparedContacts' per-pair fields, which substep 0 writes and only
    the substeps read: scratch of the step): in place.

A stride is n_worlds + PAD where that fits the copies, else n_worlds: with a power of two
of worlds (65,536) the entries of a world's bodies would lie a power of two of bytes apart,
all in the same set of a cache that picks its set from the address's low bits (on the
2-core CPU, 4,096 worlds interleaved with the pad stepped in ~19 ms against ~23 without,
noisy; on a GPU untried).

The stages see them through InterleavedView, which has the group's attributes and maps an
index of its world to the layout's; a field it does not name is read and written where it
lies (consistent, only not interleaved: a field added to a group needs no change here to
stay right). The same arithmetic on the same values in the same order: the same results
bit for bit (tests/test_interleaved.py).
"""

import taichi as ti
from taichi.lang import impl

from ...device import INTERLEAVED_BODY_FIELDS, PREPARED_PAIR_FIELDS
from .pairs import ORDERED_PAIR_FIELDS, ORDERED_POINT_FIELDS, copy_pair_fields

#: The interleaved body fields' names (device.INTERLEAVED_BODY_FIELDS).
HOT_FIELDS = tuple(name for name, _, _ in INTERLEAVED_BODY_FIELDS)


def _built_at_compile_time(function):
    """Mark `function` so that a kernel may call it without Taichi's warning about a call of
    a Python function: Taichi 1.7.4 skips the warning for a callable with this attribute
    (its own functions'); these run while the kernel compiles, only storing expressions."""
    function._is_taichi_function = False
    return function


class _Interleaved:
    """One field as a world's stages index it ([i] or [i, point]): entry (i - first) *
    stride + base of `copy` (a field of the original's shape)."""

    def __init__(self, copy, first, stride, base):
        self.copy, self.first, self.stride, self.base = copy, first, stride, base

    def __getitem__(self, index):
        # (At compile time: the index expression and the copy's element, a field entry that
        # reads, assigns and takes atomics as the original's does.)
        rest = ()
        if isinstance(index, tuple):
            index, rest = index[0], index[1:]
        at = (index - self.first) * self.stride + self.base
        return impl.subscript(None, self.copy, at, *rest)


class InterleavedView:
    """A field group as a world's stages see it inside its substeps (a ti.template() for
    their functions): where `interleave`, the fields named in `copies` ({name: field}) are
    read and written at entry (i - first) * stride + base of that field, and every other
    attribute is the group's own; else every attribute is the group's own (no cost at all).
    Only the world's own entries may be indexed through it (a small world's constraints
    join bodies of one world)."""

    # Taichi keeps an object with this attribute as it is (expr_init), as its own data.
    _data_oriented = True

    def __init__(self, group, copies: dict, interleave: bool, first, stride, base):
        self._group = group
        if interleave:
            for name, copy in copies.items():
                setattr(self, name, _Interleaved(copy, first, stride, base))

    def __getattr__(self, name):
        # (Only for attributes __init__ did not set.)
        return getattr(self._group, name)


@_built_at_compile_time
def body_view(bodies, interleave: bool, world, n_bodies, stride) -> InterleavedView:
    """BodyState as world `world`'s substeps see it: its HOT_FIELDS at their interleaved
    copies (slot b of the world at b * stride + world, body_stride) where `interleave`."""
    copies = {name: getattr(bodies, "interleaved_" + name) for name in HOT_FIELDS}
    return InterleavedView(bodies, copies, interleave, world * n_bodies, stride, world)


@_built_at_compile_time
def prepared_view(prepared, interleave: bool, first_pair, stride, base) -> InterleavedView:
    """PreparedContacts as a world's substeps see it (its pairs from first_pair on):
    PREPARED_PAIR_FIELDS in place at pair_layout's (stride, base) where `interleave`."""
    copies = {name: getattr(prepared, name) for name in PREPARED_PAIR_FIELDS}
    return InterleavedView(prepared, copies, interleave, first_pair, stride, base)


@_built_at_compile_time
def manifold_view(
    manifolds, staging, interleave: bool, first_pair, stride, base
) -> InterleavedView:
    """Manifolds as a world's substeps see them (its pairs from first_pair on): the carried
    fields at their copies in `staging`, at pair_layout's (stride, base), where
    `interleave`."""
    names = ORDERED_PAIR_FIELDS + ORDERED_POINT_FIELDS
    copies = {name: getattr(staging, name) for name in names}
    return InterleavedView(manifolds, copies, interleave, first_pair, stride, base)


#: Entries a stride adds to n_worlds where the copies have room (a 128-byte line of f32).
PAD = 32


@ti.func
def _fits(stride, n_worlds, entries, capacity):
    """Whether entry i of world w at i * stride + w stays inside `capacity` for each of
    `entries` entries of each of n_worlds worlds: the last, (entries - 1) * stride +
    n_worlds - 1, is below it (in a division: the product may pass 32 bits)."""
    return entries == 0 or (capacity >= n_worlds and entries - 1 <= (capacity - n_worlds) // stride)


@ti.func
def _padded(n_worlds, entries, capacity):
    """The stride of `entries` entries a world (the most it has) in `capacity`: n_worlds +
    PAD where that fits, else n_worlds where that does, else 0."""
    stride = 0
    if _fits(n_worlds + PAD, n_worlds, entries, capacity):
        stride = n_worlds + PAD
    elif _fits(ti.max(n_worlds, 1), n_worlds, entries, capacity):
        stride = n_worlds
    return stride


@ti.func
def body_stride(n_worlds, n_bodies, capacity):
    """The interleaved bodies' stride: n_worlds + PAD where the copies' `capacity` (the
    pool's body slots) has room for it, else n_worlds (n_worlds * n_bodies slots fit)."""
    return ti.max(_padded(n_worlds, n_bodies, capacity), n_worlds)


@ti.func
def pair_layout(most_pairs, n_worlds, pair_capacity, world, first_pair):
    """(stride, base) of a world's pairs in the prepared contacts: (stride, world), pair j
    at j * stride + world, where every world's pairs fit in pair_capacity that way
    (most_pairs, the most a world has; the stride n_worlds + PAD, else n_worlds); else
    (1, first_pair), the list's own order."""
    layout = ti.Vector([1, first_pair])
    stride = _padded(n_worlds, most_pairs, pair_capacity)
    if stride > 0:
        layout = ti.Vector([stride, world])
    return layout


@ti.func
def copy_bodies(bodies: ti.template(), world, n_bodies, stride, into_copy: ti.template()):
    """World `world`'s bodies' HOT_FIELDS into their interleaved copies at body_stride's
    `stride` (`into_copy`), or back (before and after its substeps)."""
    for body in range(n_bodies):
        slot = world * n_bodies + body
        at = body * stride + world
        for name in ti.static(HOT_FIELDS):
            original = ti.static(getattr(bodies, name))
            copy = ti.static(getattr(bodies, "interleaved_" + name))
            if ti.static(into_copy):
                copy[at] = original[slot]
            else:
                original[slot] = copy[at]


@ti.func
def copy_pairs(
    manifolds: ti.template(),
    staging: ti.template(),
    first_pair,
    n_pairs,
    stride,
    base,
    into_copy: ti.template(),
):
    """A world's n_pairs pairs (from first_pair on) into their copies in `staging` at
    pair_layout's (stride, base) (`into_copy`), or back (before and after its substeps)."""
    for j in range(n_pairs):
        at = j * stride + base
        if ti.static(into_copy):
            copy_pair_fields(
                staging, manifolds, at, first_pair + j, ORDERED_PAIR_FIELDS, ORDERED_POINT_FIELDS
            )
        else:
            copy_pair_fields(
                manifolds, staging, first_pair + j, at, ORDERED_PAIR_FIELDS, ORDERED_POINT_FIELDS
            )


@ti.func
def copy_world(
    bodies: ti.template(),
    manifolds: ti.template(),
    staging: ti.template(),
    world,
    n_bodies,
    stride,
    pair_range,
    layout,
    pairs: ti.template(),
    into_copy: ti.template(),
):
    """World `world`'s interleaved state in (`into_copy`) or back out: its bodies
    (copy_bodies, at body_stride's `stride`) and, where `pairs`, its pairs (copy_pairs;
    pair_range: [first, end) of the list; layout: pair_layout's)."""
    copy_bodies(bodies, world, n_bodies, stride, into_copy)
    if ti.static(pairs):
        copy_pairs(
            manifolds,
            staging,
            pair_range[0],
            pair_range[1] - pair_range[0],
            layout[0],
            layout[1],
            into_copy,
        )


@ti.func
def note_most_pairs(manifolds: ti.template(), counts: ti.template(), n_worlds, n_bodies):
    """The most pairs a world has into counts.most_world_pairs (pair_layout reads it).
    Called at a kernel's top level: its loop is the kernel's; most worlds read the running
    most and skip the atomic."""
    counts.most_world_pairs[None] = 0
    for world in range(n_worlds):
        found = (
            manifolds.pair_start[(world + 1) * n_bodies] - manifolds.pair_start[world * n_bodies]
        )
        if found > counts.most_world_pairs[None]:
            ti.atomic_max(counts.most_world_pairs[None], found)
