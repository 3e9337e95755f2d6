"""The one world-selection rule (world_params.world_selection) of every method that takes
`world=` / `worlds=`: values follow the caller's order (row i goes to worlds[i]), a world
given twice is refused, an empty selection changes nothing, an index is judged as given
(np.uint64(2**64 - 1) is out of range, not -1). Fuzzed against a plain NumPy reference, and
checked end to end on set_body_params, set_state(worlds=), reset_worlds and set_enabled."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fx2d_gpu as fx
from fx2d_gpu.model.world_params import world_selection

N_WORLDS = 4


def _reference(world, n_worlds: int):
    """The rule written plainly: ("ok", indices) or ("TypeError" / "ValueError", None)."""
    if world is None:
        return "ok", list(range(n_worlds))
    if isinstance(world, (bool, np.bool_)):
        return "TypeError", None
    if isinstance(world, np.ndarray) and world.dtype == bool:
        if world.shape != (n_worlds,):
            return "ValueError", None
        return "ok", [i for i in range(n_worlds) if world[i]]
    items = list(world) if isinstance(world, (list, tuple, np.ndarray)) else [world]
    if not items and np.ndim(world) == 1:
        return "ok", []
    if (
        any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) for v in items)
        or np.ndim(world) > 1
    ):
        return "TypeError", None
    if isinstance(world, list) and np.asarray(world).dtype.kind == "f":
        return "TypeError", None  # NumPy holds np.uint64 beside a negative int as floats
    if any(not -n_worlds <= int(v) < n_worlds for v in items):
        return "ValueError", None
    chosen = [int(v) % n_worlds for v in items]
    if len(set(chosen)) < len(chosen):
        return "ValueError", None
    return "ok", chosen


def _outcome(world, n_worlds: int):
    try:
        chosen = world_selection(world, n_worlds, "worlds")
    except (TypeError, ValueError) as error:
        assert "worlds" in str(error), error  # names the argument
        return type(error).__name__, None
    assert chosen.dtype == np.int64 and chosen.ndim == 1
    return "ok", chosen.tolist()


_index = st.one_of(
    st.integers(-12, 12),  # in and out of range
    st.integers(-(2**70), 2**70),  # beyond int64
    st.integers(0, 2**64 - 1).map(np.uint64),  # wraps if cast first
    st.integers(-(2**63), 2**63 - 1).map(np.int64),
    st.integers(0, 255).map(np.uint8),
)


@st.composite
def _selections(draw):
    n_worlds = draw(st.integers(1, 9))
    kind = draw(
        st.sampled_from(
            ["permutation", "mask", "indices", "duplicate", "empty", "scalar", "array", "other"]
        )
    )
    if kind == "permutation":
        worlds = draw(st.permutations(range(n_worlds)))
        world = worlds[: draw(st.integers(0, n_worlds))]
    elif kind == "mask":
        length = draw(st.sampled_from([n_worlds, n_worlds, n_worlds + 1, max(n_worlds - 1, 0)]))
        world = np.array(draw(st.lists(st.booleans(), min_size=length, max_size=length)), bool)
    elif kind == "indices":
        world = draw(st.lists(_index, max_size=6))
    elif kind == "duplicate":
        first = draw(st.integers(0, n_worlds - 1))
        again = draw(st.sampled_from([first, first - n_worlds]))
        world = draw(
            st.permutations(
                [first, again, *draw(st.lists(st.integers(-n_worlds, n_worlds - 1), max_size=3))]
            )
        )
    elif kind == "empty":
        world = draw(
            st.sampled_from([[], (), np.array([], np.int64), np.array([], np.uint64), np.zeros(0)])
        )
    elif kind == "scalar":
        world = draw(_index)
    elif kind == "array":
        dtype = draw(st.sampled_from([np.int8, np.int32, np.int64, np.uint16, np.uint64]))
        info = np.iinfo(dtype)
        values = draw(st.lists(st.integers(max(info.min, -20), min(info.max, 20)), max_size=6))
        world = np.array(values, dtype)
    else:
        world = draw(
            st.sampled_from(
                [1.0, [0.0, 1.0], "0", True, np.bool_(False), [[0, 1]], np.zeros((2, 2), int)]
            )
        )
    return world, n_worlds


@settings(max_examples=600, deadline=None)
@given(_selections())
def test_world_selection_follows_the_numpy_reference(case):
    world, n_worlds = case
    assert _outcome(world, n_worlds) == _reference(world, n_worlds), world


@pytest.mark.parametrize(
    "world, message",
    [
        (np.uint64(2**64 - 1), "world 18446744073709551615 out of range"),
        (2**63, "world 9223372036854775808 out of range"),
        (2**64, "out of range"),
        (-5, "world -5 out of range"),
        (4, "world 4 out of range"),
        ([2, 2], "world 2 given twice"),
        ([3, -1], "world 3 given twice (as 3 and -1)"),
        (np.ones(3, bool), "a mask must have shape (4,)"),
    ],
)
def test_bad_worlds_are_refused_naming_the_argument(world, message):
    with pytest.raises(ValueError, match="^world: ") as raised:
        world_selection(world, N_WORLDS)
    assert message in str(raised.value)


def test_selection_keeps_the_callers_order_and_counts_negatives_from_the_end():
    assert world_selection([3, 1], N_WORLDS).tolist() == [3, 1]
    assert world_selection(-1, N_WORLDS).tolist() == [3]
    assert world_selection([-1, 0, -3], N_WORLDS).tolist() == [3, 0, 1]
    assert world_selection(np.uint8(2), N_WORLDS).tolist() == [2]
    assert world_selection(np.array([False, True, True, False]), N_WORLDS).tolist() == [1, 2]
    for empty in ([], (), np.zeros(0), np.zeros(4, bool)):
        assert world_selection(empty, N_WORLDS).tolist() == []


def _scene():
    scene = fx.Scene(n_worlds=N_WORLDS, arch="cpu")
    scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0)
    box = scene.add_box((0.0, 0.5), (1.0, 1.0))
    arm = scene.add_box((-3.0, 3.0), (1.0, 0.1))
    scene.add_revolute_joint(
        0, arm, anchor=(-3.5, 3.5), control_mode="velocity", pid=(50.0, 0.0, 0.0), max_effort=100.0
    )
    scene.step(1 / 60)
    return scene, box


def _rows(state: fx.State, rows: list) -> fx.State:
    return fx.State(
        *(
            np.array(getattr(state, f)[rows])
            for f in ("position", "angle", "velocity", "angular_velocity", "sleeping")
        )
    )


def test_per_world_rows_land_in_the_worlds_in_the_callers_order():
    scene, box = _scene()
    scene.set_body_params(box, mass=[5.0, 7.0], world=[3, 1])
    mass = scene.get_body_params([box])["mass"][:, 0]
    assert (mass[3], mass[1]) == (5.0, 7.0)
    scene.set_body_params(box, mass=[[2.0], [4.0], [6.0]], world=[-1, 0, 2])
    assert scene.get_body_params([box])["mass"][:, 0].tolist() == [4.0, 7.0, 6.0, 2.0]
    scene.set_joint_params(0, pid=[(1.0, 0.0, 0.0), (2.0, 0.0, 0.0)], world=[2, 0])
    assert scene.get_joint_params()["pid"][:, 0, 0].tolist() == [2.0, 50.0, 1.0, 50.0]

    two = _rows(scene.get_state(), [0, 1])
    two.position[:, box, 0] = [30.0, 10.0]  # row 0 for world 3, row 1 for world 1
    scene.set_state(two, worlds=[3, 1])
    x = scene.get_state().position[:, box, 0]
    assert (x[3], x[1]) == (30.0, 10.0)

    two.position[:, box, 0] = [-4.0, 8.0]
    scene.reset_worlds([1, 3], two)  # row 0 for world 1, row 1 for world 3
    x = scene.get_state().position[:, box, 0]
    assert (x[1], x[3]) == (-4.0, 8.0)


def test_a_state_of_n_worlds_rows_gives_each_world_its_own_row_in_any_order():
    scene, box = _scene()
    every = scene.get_state()
    every.position[:, box, 0] = [10.0, 11.0, 12.0, 13.0]
    scene.set_state(every, worlds=[2, 0])
    x = scene.get_state().position[:, box, 0]
    assert (x[2], x[0]) == (12.0, 10.0)
    scene.reset_worlds([3, 1], every)
    x = scene.get_state().position[:, box, 0]
    assert (x[3], x[1]) == (13.0, 11.0)


def test_duplicate_and_wrapped_worlds_are_refused_and_change_nothing():
    scene, box = _scene()
    before = scene.get_body_params([box])["mass"].copy()
    state = scene.get_state()
    for call in (
        lambda: scene.set_body_params(box, mass=[5.0, 7.0], world=[2, 2]),
        lambda: scene.set_body_params(box, mass=3.0, world=np.uint64(2**64 - 1)),
        lambda: scene.set_joint_params(0, pid=(1.0, 0.0, 0.0), world=[1, 1]),
        lambda: scene.set_enabled(box, False, world=[0, -4]),
    ):
        with pytest.raises((ValueError, TypeError), match="world"):
            call()
    with pytest.raises(ValueError, match="worlds: world 1 given twice"):
        scene.set_state(_rows(state, [0, 1]), worlds=[1, 1])
    with pytest.raises(ValueError, match="worlds: world 0 given twice"):
        scene.reset_worlds([0, -4], _rows(state, [0, 1]))
    assert np.array_equal(scene.get_body_params([box])["mass"], before)
    assert np.array_equal(scene.get_state().position, state.position)
    assert scene.enabled().all()


def test_an_empty_selection_is_accepted_and_changes_nothing():
    scene, box = _scene()
    state = scene.get_state()
    before = scene.get_body_params([box])["mass"].copy()
    for empty in ([], (), np.array([], int), np.zeros(N_WORLDS, bool)):
        scene.reset_worlds(empty)
        scene.set_body_params(box, mass=9.0, world=empty)
        scene.set_enabled(box, False, world=empty)
        scene.set_state(state, worlds=empty)
    assert np.array_equal(scene.get_state().position, state.position)
    assert np.array_equal(scene.get_body_params([box])["mass"], before)
    assert scene.enabled().all()


def test_set_enabled_takes_worlds_as_set_body_params_does():
    scene, box = _scene()
    scene.set_enabled(box, False, world=-1)  # the last world
    scene.set_enabled(box, False, world=np.array([True, False, False, False]))
    assert scene.enabled()[:, box].tolist() == [False, True, True, False]


def test_a_sharded_scene_sends_each_shard_its_rows_in_the_callers_order():
    """ShardedScene selects with world_selection and hands each shard its worlds sorted,
    with the rows that follow them (a shard's Scene reads a State of as many rows as it has
    worlds as each world's own row). Checked on the queueing alone: no Ray cluster."""
    from types import SimpleNamespace

    from fx2d_gpu.distributed.sharded_scene import ShardedScene

    driver = SimpleNamespace(
        _shards=[
            SimpleNamespace(worlds=range(0, 2), pending=[]),
            SimpleNamespace(worlds=range(2, 4), pending=[]),
        ]
    )
    worlds = world_selection([3, 1, 0], N_WORLDS)
    rows = np.array([30.0, 10.0, 0.0])  # row i for worlds[i]
    ShardedScene._queue_worlds(
        driver, worlds, lambda index, mine, local: (index, local.tolist(), rows[mine].tolist())
    )
    assert driver._shards[0].pending == [(0, [0, 1], [0.0, 10.0])]
    assert driver._shards[1].pending == [(1, [1], [30.0])]
