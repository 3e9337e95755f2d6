"""Per-world geometry (Scene.set_shape_params): a batch of worlds that differ in their shapes'
sizes steps each world bit for bit as a one-world scene built with add_* of that world's
shapes, for every shape kind and both solvers; static bodies placed per world (set_state)
likewise; the inertia follows the new shape unless given; queries see each world's shapes;
bad input is refused by name and changes nothing."""

import copy
import pickle

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import shapes
from fx2d_gpu.device import launching
from tests.helpers import DT, GENERAL_PATH

N_WORLDS = 4
STEPS = 60
PENTAGON = np.array([[0.0, -0.3], [0.3, -0.1], [0.2, 0.25], [-0.2, 0.25], [-0.3, -0.1]])

#: Per kind: world w's keywords of the add_* method (the batch's set_shape_params takes
#: them as rows), and how a body of that kind is added.
WORLD_SHAPES = {
    "circle": {"radius": [0.25, 0.35, 0.15, 0.3]},
    "box": {"size": [(0.5, 0.4), (0.8, 0.3), (0.3, 0.3), (1.0, 0.6)]},
    "rounded_box": {
        "size": [(0.5, 0.4), (0.7, 0.25), (0.3, 0.35), (0.9, 0.5)],
        "radius": [0.05, 0.02, 0.1, 0.0],
    },
    "capsule": {"length": [0.5, 0.8, 0.2, 0.6], "radius": [0.15, 0.1, 0.2, 0.12]},
    "polygon": {
        "vertices": [PENTAGON, 1.4 * PENTAGON, 0.7 * PENTAGON, PENTAGON * (1.2, 0.8)],
        "radius": [0.0, 0.03, 0.0, 0.05],
    },
}


def _add(scene, kind: str, position, values: dict, **body) -> int:
    if kind == "circle":
        return scene.add_circle(position, values["radius"], **body)
    if kind in ("box", "rounded_box"):
        return scene.add_box(position, values["size"], values.get("radius", 0.0), **body)
    if kind == "capsule":
        return scene.add_capsule(position, values["length"], values["radius"], **body)
    return scene.add_polygon(position, values["vertices"], values["radius"], **body)


def _world_values(kind: str, world: int) -> dict:
    return {key: rows[world] for key, rows in WORLD_SHAPES[kind].items()}


def _scene(kind: str, values: dict, n_worlds: int = 1, **scene_kwargs) -> fx.Scene:
    """A ground, three bodies of `kind` dropped onto it and each other, a ball on top."""
    scene = fx.Scene(n_worlds=n_worlds, arch="cpu", **scene_kwargs)
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0, static_friction=0.6, dynamic_friction=0.4)
    for i in range(3):
        _add(
            scene,
            kind,
            (0.25 * i - 0.3, 0.5 + 0.8 * i),
            values,
            angle=0.15 * i,
            mass=1.0 + 0.5 * i,
            static_friction=0.5,
            dynamic_friction=0.3,
        )
    scene.add_circle((0.1, 3.2), 0.2, mass=0.5)
    return scene


def _state(scene) -> list[np.ndarray]:
    state = scene.get_state()
    return [state.position, state.angle, state.velocity, state.angular_velocity]


def _run(scene, steps: int = STEPS) -> list[np.ndarray]:
    for _ in range(steps):
        scene.step(DT)
    return _state(scene)


def _assert_world_is(batch_state, world: int, single_state, label: str):
    for got, expected in zip(batch_state, single_state, strict=True):
        assert np.array_equal(got[world], expected[0]), (
            f"{label}: world {world} differs from its one-world scene by up to "
            f"{np.abs(got[world] - expected[0]).max()}"
        )


def _batch(kind: str, **scene_kwargs) -> fx.Scene:
    """_scene of world 0's shapes in N_WORLDS worlds, each world given its own by
    set_shape_params (bodies 1 .. 3, one row per world)."""
    batch = _scene(kind, _world_values(kind, 0), N_WORLDS, **scene_kwargs)
    rows = {key: np.asarray(values) for key, values in WORLD_SHAPES[kind].items()}
    batch.set_shape_params([1, 2, 3], **rows)
    return batch


@pytest.mark.parametrize("solver", ["xpbd", "soft_step"])
@pytest.mark.parametrize("kind", list(WORLD_SHAPES))
def test_each_world_steps_as_a_scene_built_with_its_shapes(kind, solver):
    batch = _batch(kind, solver=solver)
    got = _run(batch)
    # Something happened: the bodies fell and landed on the ground and on each other.
    assert (got[0][:, 1:4, 1] < 1.8).all() and np.abs(got[2]).max() < 5.0
    for world in range(N_WORLDS):
        single = _scene(kind, _world_values(kind, world), solver=solver)
        _assert_world_is(got, world, _run(single), f"{kind}, {solver}")
    # The worlds do differ.
    assert not np.array_equal(got[0][0], got[0][1])


@pytest.mark.parametrize("kind", list(WORLD_SHAPES))
def test_shapes_set_a_few_worlds_at_a_time_step_as_scenes_built_with_them(kind):
    """set_shape_params on a built batch, a few worlds at a time (as a vector env's resets
    write new levels: the model redoes those worlds' shape rows and grid cells alone,
    store_log.stored_since, the shapes of a kind made as a whole, and the device takes
    those rows alone, transfer.write_group_rows): each world then steps bit for bit as a
    one-world scene built with its last shapes."""
    batch = _scene(kind, _world_values(kind, 0), N_WORLDS)
    batch.get_state()  # (built: each call below updates the built rows)
    rows = {key: np.asarray(values) for key, values in WORLD_SHAPES[kind].items()}
    batch.set_shape_params([1, 2, 3], **{k: v[2] for k, v in rows.items()}, world=[1, 2, 3])
    # Two worlds, out of order, one row each; then one world, some bodies.
    batch.set_shape_params([1, 2, 3], **{k: v[[3, 1]] for k, v in rows.items()}, world=[3, 1])
    batch.set_shape_params([2, 3], **{k: v[1] for k, v in rows.items()}, world=[2])
    batch.set_shape_params([2, 3], **{k: v[2] for k, v in rows.items()}, world=[2])
    got = _run(batch)
    for world in range(N_WORLDS):
        _assert_world_is(got, world, _run(_scene(kind, _world_values(kind, world))), kind)
    assert not np.array_equal(got[0][1], got[0][2])


def test_one_world_resized_steps_as_one_built_with_the_new_size():
    scene = _scene("rounded_box", _world_values("rounded_box", 0))
    sizes = WORLD_SHAPES["rounded_box"]
    scene.set_shape_params([1, 2, 3], size=sizes["size"][2], radius=sizes["radius"][2])
    got = _run(scene)
    _assert_world_is(got, 0, _run(_scene("rounded_box", _world_values("rounded_box", 2))), "one")
    assert int(scene.step_context().pool.model.shape_per_world[None]) == 0  # model rows


def test_the_general_path_and_a_large_world_too():
    """Worlds of more than 40 bodies (fat boxes, the grid: each world's own cell) and the
    general path (no world per thread, a launch per stage)."""
    radii = np.array([0.1, 0.16, 0.07])

    def pile(n_worlds: int, radius: float, **kwargs) -> fx.Scene:
        scene = fx.Scene(n_worlds=n_worlds, arch="cpu", **kwargs)
        scene.add_box((0.0, -0.5), (6.0, 1.0), mass=0.0)
        positions = np.stack(
            [np.tile(np.arange(8) * 0.45 - 1.6, 6), np.repeat(np.arange(6) * 0.45 + 0.3, 8)], 1
        )
        scene.add_circles(positions, radius)
        return scene

    for options in ({}, GENERAL_PATH):
        batch = pile(3, radii[0], step_options=options)
        batch.set_shape_params(np.arange(1, 49), radius=radii)
        got = _run(batch, 40)
        for world, radius in enumerate(radii):
            _assert_world_is(got, world, _run(pile(1, radius), 40), f"pile {options}")


RAMPS = [(-0.5, 1.0, 0.3), (0.4, 0.8, -0.25), (0.0, 1.4, 0.0), (-1.0, 0.6, 0.5)]


def _ramp_scene(n_worlds: int, ramp) -> fx.Scene:
    """A ground, a static ramp and wall (where `ramp` (x, y, angle) puts them), a box and a
    ball falling onto them."""
    s = fx.Scene(n_worlds=n_worlds, arch="cpu")
    s.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)
    s.add_box(ramp[:2], (2.0, 0.2), angle=ramp[2], mass=0.0)
    s.add_edge((1.6 + 0.1 * ramp[0], 0.0), (0.0, 0.0), (0.0, 2.0))
    s.add_box((-0.3, 2.5), (0.3, 0.3), mass=1.0)
    s.add_circle((0.2, 3.0), 0.15)
    return s


def _place_ramps(batch: fx.Scene):
    ramps = np.array(RAMPS)
    batch.set_shape_params(1, position=ramps[:, :2], angle=ramps[:, 2])
    batch.set_shape_params(2, position=np.stack([1.6 + 0.1 * ramps[:, 0], 0 * ramps[:, 0]], 1))


@pytest.mark.parametrize("built", [False, True])
def test_static_bodies_placed_per_world(built):
    """A ramp and a wall placed per world (set_shape_params position and angle) step as
    scenes built with them there; a reset starts from the placement."""
    batch = _ramp_scene(N_WORLDS, RAMPS[0])
    if built:
        batch.get_state()
    _place_ramps(batch)
    assert np.array_equal(batch.get_state().position[:, 1], np.float32(RAMPS)[:, :2])
    got = _run(batch)
    singles = [_run(_ramp_scene(1, ramp)) for ramp in RAMPS]
    for world in range(N_WORLDS):
        _assert_world_is(got, world, singles[world], "static placement")
    # A reset (no state given) starts the worlds over where their static bodies were placed.
    batch.reset_worlds([3, 1])
    again = _run(batch)
    for world in (1, 3):
        _assert_world_is(again, world, singles[world], "static placement after reset_worlds")


def test_a_faulty_world_resets_to_its_placement():
    scene = _ramp_scene(2, RAMPS[0])
    scene.on_fault = "reset"
    scene.set_shape_params(1, position=[RAMPS[0][:2], RAMPS[1][:2]], angle=[0.0, RAMPS[1][2]])
    scene.step(DT)
    scene.set_state(scene.get_state())  # (any state: the reset replaces world 1's)
    scene.apply_force(3, [(0.0, 0.0), (1e37, 0.0)])  # world 1's box leaves for infinity
    scene.step(DT)
    assert scene.faulted_worlds.tolist() == [1]
    state = scene.get_state()
    assert np.array_equal(state.position[1, 1], np.float32(RAMPS[1][:2]))
    assert state.angle[1, 1] == np.float32(RAMPS[1][2])
    assert np.array_equal(state.position[1, 3], np.float32([-0.3, 2.5]))  # the box's start


def test_static_placement_refuses_dynamic_bodies_and_bad_values():
    batch = _ramp_scene(2, RAMPS[0])
    before = _everything(batch)
    with pytest.raises(ValueError, match="position: body 3 is not static"):
        batch.set_shape_params([1, 3], position=(0.0, 1.0))
    with pytest.raises(ValueError, match="angle must be finite"):
        batch.set_shape_params(1, angle=[0.0, np.inf])
    with pytest.raises(TypeError, match="position"):
        batch.set_shape_params(1, position="here")
    _unchanged(before, _everything(batch))


def test_a_scene_that_never_resizes_keeps_its_model_rows():
    scene = _scene("box", _world_values("box", 0), 2)
    scene.step(DT)
    pool = scene.step_context().pool
    assert int(pool.model.shape_per_world[None]) == 0
    scene.set_shape_params(1, size=(0.5, 0.4))  # the same size in every world: still 0
    assert int(scene.step_context().pool.model.shape_per_world[None]) == 0
    scene.set_shape_params(1, size=(0.6, 0.4), world=1)
    assert int(scene.step_context().pool.model.shape_per_world[None]) == 1


def test_get_shape_params_round_trip():
    scene = fx.Scene(n_worlds=2, arch="cpu")
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)
    box = scene.add_box((0.0, 1.0), (0.5, 0.4), 0.05)
    ball = scene.add_circle((1.0, 1.0), 0.2)
    pill = scene.add_capsule((2.0, 1.0), 0.6, 0.1)
    gem = scene.add_polygon((3.0, 1.0), PENTAGON)
    edge = scene.add_edge((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0))
    before = scene.get_shape_params()
    assert np.array_equal(before["size"][:, box], [(0.5, 0.4)] * 2)
    assert np.array_equal(before["radius"][:, [box, ball, pill, edge]], [[0.05, 0.2, 0.1, 0.0]] * 2)
    assert np.isnan(before["size"][:, ball]).all() and np.isnan(before["length"][:, box]).all()
    scene.set_shape_params(box, size=[(0.7, 0.3), (0.2, 0.9)], radius=[0.0, 0.1])
    scene.set_shape_params(ball, radius=0.33, world=1)
    scene.set_shape_params(pill, length=[0.9, 0.4], radius=0.05)
    scene.set_shape_params(gem, vertices=[PENTAGON * 2.0, PENTAGON], world=[1, 0])
    got = scene.get_shape_params([box, ball, pill, gem])
    assert np.array_equal(got["size"][:, 0], [(0.7, 0.3), (0.2, 0.9)])
    assert np.array_equal(got["radius"][:, :3], [[0.0, 0.2, 0.05], [0.1, 0.33, 0.05]])
    assert np.array_equal(got["length"][:, 2], [0.9, 0.4])
    polygon = shapes.polygon(PENTAGON * 2.0)[0]
    assert np.array_equal(got["vertices"][1, 3, :5], polygon.vertices)
    assert np.isnan(got["vertices"][1, 3, 5:]).all()
    assert np.array_equal(scene.body_shape(gem, world=1).vertices, polygon.vertices)
    assert np.array_equal(scene.body_shape(gem, world=0).vertices, scene.body_shape(gem).vertices)
    assert scene.body_shape(box).radius == 0.05  # as added
    # Set back, as read: the same shapes.
    scene.set_shape_params(box, size=got["size"][:, 0], radius=got["radius"][:, 0])
    assert np.array_equal(scene.get_shape_params(box)["size"], got["size"][:, :1])


def test_the_inertia_follows_the_shape_unless_given():
    scene = fx.Scene(n_worlds=3, arch="cpu")
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)
    box = scene.add_box((0.0, 1.0), (0.5, 0.4), mass=2.0)
    by_hand = scene.add_box((1.0, 1.0), (0.5, 0.4), mass=2.0, inertia=0.7)
    scene.set_shape_params([box, by_hand], size=[(1.0, 0.2), (0.3, 0.3), (0.5, 0.4)])
    inertia = scene.get_body_params([box, by_hand])["inertia"]
    for world, size in enumerate([(1.0, 0.2), (0.3, 0.3), (0.5, 0.4)]):
        single = fx.Scene(arch="cpu")
        single.add_box((0.0, 1.0), size, mass=2.0)
        assert inertia[world, 0] == single.body_inertia(0)  # as add_box computes it
    assert (inertia[:, 1] == 0.7).all()  # given by hand: kept
    # The mass stays; a new mass moves the inertia with each world's shape.
    assert (scene.get_body_params([box])["mass"] == 2.0).all()
    scene.set_body_params(box, mass=3.0, world=0)
    assert (
        scene.get_body_params([box])["inertia"][0, 0] == 3.0 * shapes.box((1.0, 0.2)).unit_inertia
    )
    # An inertia given with the shape is taken.
    scene.set_shape_params(box, size=(0.4, 0.4), inertia=[0.5, 0.6, 0.7])
    assert np.array_equal(scene.get_body_params([box])["inertia"][:, 0], [0.5, 0.6, 0.7])


def test_queries_see_each_worlds_shapes():
    scene = fx.Scene(n_worlds=2, arch="cpu", gravity=(0.0, 0.0))
    ball = scene.add_circle((0.0, 0.0), 0.2, mass=0.0)
    scene.set_shape_params(ball, radius=[0.2, 0.5])
    hits = scene.ray_cast((-2.0, 0.35), (1.0, 0.0), 5.0)
    assert hits.body[:, 0].tolist() == [-1, ball]
    inside = scene.query_point((0.0, 0.4))
    assert inside.world.tolist() == [1]


@pytest.mark.parametrize("sleep", [True, False])
@pytest.mark.parametrize("n_columns", [1, 14])
def test_a_resize_mid_run_finds_the_contacts_afresh(n_columns, sleep):
    """Boxes at rest (asleep, or awake: their pairs and manifolds kept from step to step)
    grow in world 1 (worlds of 4 bodies, and of 43: fat boxes, kept pairs): the contacts at
    the new size are found at once, the stack rises to rest on its new sizes; a snapshot
    taken after it repeats bitwise; world 0 goes on resting. World 2 was given its own
    size before the build, so world 1's resize is a store of a few rows (the device takes
    world 1's rows alone and finds its contacts afresh there: edits.write_resized)."""
    scene = fx.Scene(n_worlds=3, arch="cpu", enable_sleep=sleep)
    scene.add_box((0.0, -0.5), (40.0, 1.0), mass=0.0)
    boxes = []
    for column in range(n_columns):
        for row in range(3):
            x = 1.5 * (column - n_columns // 2)
            boxes.append(scene.add_box((x, 0.2 + 0.4 * row), (0.4, 0.4)))
    scene.set_shape_params(boxes, size=(0.5, 0.5), world=2)
    _run(scene, 90)
    before = scene.get_state().position
    scene.set_shape_params(boxes, size=(0.6, 0.6), world=1)
    depths = scene.contacts(1).depths
    assert depths.max() > 0.05  # the grown boxes overlap where they stood
    snap = scene.snapshot()
    after = _run(scene, 90)
    heights = after[0][1, boxes, 1].reshape(n_columns, 3)
    assert np.allclose(heights, [0.3, 0.9, 1.5], atol=0.02)  # resting on the new sizes
    assert np.allclose(after[0][0], before[0], atol=1e-3)  # world 0 rests where it was
    assert np.allclose(after[0][2], before[2], atol=1e-3)  # and world 2 where it was
    assert np.allclose(after[0][2, boxes, 1].reshape(n_columns, 3), [0.25, 0.75, 1.25], atol=0.02)
    assert np.abs(after[2]).max() < 0.05
    scene.restore(snap)
    again = _run(scene, 90)
    for x, y in zip(again, after, strict=True):
        assert np.array_equal(x, y)


def test_render_draws_each_worlds_shapes():
    from fx2d_gpu.draw.render import render

    batch = _batch("capsule")
    for world in (0, 2):
        single = _scene("capsule", _world_values("capsule", world))
        image = render(single, 0, size=(64, 48))
        assert np.array_equal(render(batch, world, size=(64, 48)), image)
    assert not np.array_equal(render(batch, 0, size=(64, 48)), render(batch, 1, size=(64, 48)))


@pytest.mark.parametrize("kind", ["box", "capsule", "circle", "polygon"])
def test_the_viewers_geometry_draws_each_worlds_shapes(kind):
    """FrameGeometry (the GGUI viewer's): world w of a batch drawn as a one-world scene of
    its shapes draws (a polygon rounded in some worlds only is drawn rounded in all: the
    others' arcs of radius 0, the same outline)."""
    from fx2d_gpu.draw.frame_geometry import FrameGeometry, FrameView, tile_views

    bounds, rect = (-3.0, -1.0, 3.0, 4.0), (0.0, 0.0, 1.0, 1.0)
    batch = _batch(kind)
    geometry = FrameGeometry(batch)
    for world in range(N_WORLDS):
        got = geometry.update([FrameView(world, rect, bounds)]).arrays()
        single = _scene(kind, _world_values(kind, world))
        expected = FrameGeometry(single).update([FrameView(0, rect, bounds)]).arrays()
        if kind == "polygon":  # rounded in worlds 1 and 3: the same outline in all
            assert got[0].shape == geometry.update([FrameView(1, rect, bounds)]).arrays()[0].shape
            continue
        for mine, theirs in zip(got, expected, strict=True):
            np.testing.assert_allclose(mine, theirs, atol=2e-6, rtol=0)
    assert len(geometry.update(tile_views(batch, bounds)).arrays()[0])
    before = geometry.update([FrameView(0, rect, bounds)]).arrays()[0]
    batch.set_shape_params(1, world=0, **{k: v[2] for k, v in WORLD_SHAPES[kind].items()})
    after = geometry.update([FrameView(0, rect, bounds)]).arrays()[0]  # drawn afresh
    assert before.shape == after.shape and not np.array_equal(before, after)


def test_the_viewers_aabbs_are_each_worlds():
    from fx2d_gpu.draw.viewer import _LocalOutlines

    batch = _batch("circle")
    state = batch.get_state()
    outlines = _LocalOutlines(batch)
    for world, radius in enumerate(WORLD_SHAPES["circle"]["radius"]):
        lower, upper = outlines.for_world(world).aabbs(state.position[world], state.angle[world])
        assert np.allclose(upper[1] - lower[1], 2 * radius)  # body 1, a circle


def test_copies_carry_the_shapes():
    """Pickles, deep copies and replicate carry the shapes."""
    batch = _batch("box")
    batch.step(DT)
    copies = [copy.deepcopy(batch), pickle.loads(pickle.dumps(batch))]
    expected = _run(batch, 10)
    for copied in copies:
        assert np.array_equal(
            copied.get_shape_params()["size"], batch.get_shape_params()["size"], equal_nan=True
        )
        for x, y in zip(_run(copied, 10), expected, strict=True):
            assert np.array_equal(x, y)
    single = _scene("capsule", _world_values("capsule", 0))
    single.set_shape_params([1, 2, 3], length=0.9)
    many = single.replicate(3)
    assert (many.get_shape_params([1])["length"] == 0.9).all()


def test_snapshots_and_state_files_carry_the_shapes_and_placements(tmp_path):
    batch = _batch("polygon")
    batch.set_shape_params(0, position=[(0.0, -0.5), (0.1, -0.45), (-0.1, -0.55), (0.0, -0.4)])
    _run(batch, 10)
    snap = batch.snapshot()
    path = tmp_path / "shapes.npz"
    batch.save_state(path)
    expected = _run(batch, 20)
    # Changed since: restore brings the snapshot's shapes, placements and inertias back.
    batch.set_shape_params([1, 2], vertices=PENTAGON * 0.5, position=None)
    batch.set_shape_params(0, position=(0.0, -1.0))
    batch.restore(snap)
    for x, y in zip(_run(batch, 20), expected, strict=True):
        assert np.array_equal(x, y)
    # A scene built the same way, never resized, takes them from the file.
    fresh = _scene("polygon", _world_values("polygon", 0), N_WORLDS)
    fresh.load_state(path)
    for x, y in zip(_run(fresh, 20), expected, strict=True):
        assert np.array_equal(x, y)
    assert np.array_equal(
        fresh.get_shape_params()["vertices"], batch.get_shape_params()["vertices"], equal_nan=True
    )
    fresh.reset_worlds([2])  # its placement came too
    assert np.array_equal(fresh.get_state().position[2, 0], np.float32([-0.1, -0.55]))
    # A snapshot without geometry takes it away again.
    plain = _scene("polygon", _world_values("polygon", 0), N_WORLDS)
    fresh.restore(plain.snapshot())
    assert np.array_equal(
        fresh.get_shape_params()["vertices"], plain.get_shape_params()["vertices"], equal_nan=True
    )


@pytest.mark.parametrize(
    "key, change, match",
    [
        ("shape_radius", lambda a: a.__setitem__((1, 2), -0.5), r"shape_\*\[1, 2\].*radius"),
        ("shape_vertices", lambda a: a.__setitem__((0, 1, 2), (0.0, 0.0)), r"shape_\*\[0, 1\]"),
        ("shape_length", lambda a: a.__setitem__((0, 1), 0.5), r"not made from"),
        ("static_pose", lambda a: a.__setitem__((0, 1), (1.0, 1.0, 0.0)), r"static_pose"),
    ],
)
def test_bad_geometry_in_a_snapshot_is_refused(key, change, match):
    batch = _batch("polygon")
    batch.set_shape_params(0, position=(0.0, -0.5))
    batch.step(DT)
    snap = batch.snapshot()
    bad = snap.copy()
    change(bad.params[key])
    before = _everything(batch)
    with pytest.raises(ValueError, match=match):
        batch.restore(bad)
    _unchanged(before, _everything(batch))


def _everything(scene) -> tuple:
    return (scene.get_shape_params(), scene.get_body_params(), [s.copy() for s in _state(scene)])


def _unchanged(before, after):
    for x, y in zip(before[:2], after[:2], strict=True):
        for key in x:
            assert np.array_equal(x[key], y[key], equal_nan=True), key
    for x, y in zip(before[2], after[2], strict=True):
        assert np.array_equal(x, y)


@pytest.mark.parametrize(
    "call, error, match",
    [
        ({"bodies": [1], "size": (0.5, 0.5)}, ValueError, "size: body 1 is a circle"),
        ({"bodies": [2], "length": 0.5}, ValueError, "length: body 2 is a box"),
        ({"bodies": [4], "radius": 0.1}, ValueError, "radius: body 4 is an edge"),
        ({"bodies": [3], "vertices": PENTAGON[:4]}, ValueError, "vertices: body 3 has 5"),
        ({"bodies": [5], "length": 0.0}, ValueError, "length must be >="),
        ({"bodies": [1], "radius": -0.1}, ValueError, "radius"),
        ({"bodies": [1], "radius": "big"}, TypeError, "radius"),
        ({"bodies": [2], "size": [(1.0, 1.0)] * 3}, ValueError, "size must have shape"),
        ({"bodies": [2], "size": (1.0, 1.0), "vertices": PENTAGON[:4]}, ValueError, "not both"),
        ({"bodies": [3], "vertices": PENTAGON[::-1] * (1, 0)}, ValueError, "vertices"),
        ({"bodies": [0], "inertia": 1.0}, ValueError, "static"),
        ({"bodies": [1], "radius": 0.3, "world": [0, 0]}, ValueError, "given twice"),
        ({"bodies": [9], "radius": 0.3}, ValueError, "bodies 9"),
        ({"bodies": [2], "size": (1e14, 1e14)}, ValueError, "size: the new shapes' inertia"),
    ],
)
def test_bad_input_is_refused_by_name_and_changes_nothing(call, error, match):
    scene = fx.Scene(n_worlds=2, arch="cpu")
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)  # 0
    scene.add_circle((0.0, 1.0), 0.2)  # 1
    scene.add_box((1.0, 1.0), (0.3, 0.3))  # 2
    scene.add_polygon((2.0, 1.0), PENTAGON)  # 3
    scene.add_edge((0.0, 0.0), (-1.0, 0.0), (1.0, 0.0))  # 4
    scene.add_capsule((3.0, 1.0), 0.5, 0.1)  # 5
    scene.set_body_params(2, mass=1e12)  # a box whose inertia a huge size would overflow
    scene.step(DT)
    before = _everything(scene)
    with pytest.raises(error, match=match):
        scene.set_shape_params(**call)
    _unchanged(before, _everything(scene))
    # An empty selection of worlds changes nothing either.
    scene.set_shape_params(1, radius=0.4, world=[])
    _unchanged(before, _everything(scene))


def _made_by_hand(kind: str, args: dict) -> shapes.Shape:
    """The shape the add_* method of `kind` makes from `args` (the reference)."""
    if kind == "circle":
        return shapes.circle(args["radius"])
    if kind == "offset_circle":
        return shapes.circle(args["radius"], (0.1, -0.05))
    if kind == "capsule":
        return shapes.capsule(args["length"], args["radius"])
    if kind == "polygon":
        return shapes.polygon(args["vertices"], radius=args["radius"])[0]
    return shapes.box(args["size"], args["radius"])


def _same_shape(got: shapes.Shape, expected: shapes.Shape) -> bool:
    """Whether two shapes agree to the bit, their derived values included."""
    return (
        got.kind == expected.kind
        and got.radius == expected.radius
        and all(
            np.array_equal(getattr(got, name), getattr(expected, name))
            for name in ("center", "vertices", "normals")
        )
        and all(
            getattr(got, name) == getattr(expected, name)
            for name in ("bounding_radius", "diameter", "unit_inertia")
        )
    )


def test_shapes_stored_a_few_worlds_at_a_time_are_those_the_add_methods_make():
    """Random stores of random worlds and keywords (the keywords a kind takes, the others
    kept), against a reference that keeps each world's add_* arguments and makes each shape
    by hand with the single constructors: every world's shape, its derived values, its
    inertia (mass x unit inertia) and get_shape_params agree to the bit, and a snapshot
    brings them back into a scene never resized."""
    rng = np.random.default_rng(7)
    n_worlds = 48
    kinds = ("circle", "offset_circle", "box", "rounded_box", "capsule", "polygon")
    added = {
        "circle": {"radius": 0.2},
        "offset_circle": {"radius": 0.2},
        "box": {"size": np.array([0.5, 0.4]), "radius": 0.0},
        "rounded_box": {"size": np.array([0.5, 0.4]), "radius": 0.05},
        "capsule": {"length": 0.6, "radius": 0.1},
        "polygon": {"vertices": PENTAGON, "radius": 0.0},
    }

    def build() -> fx.Scene:
        scene = fx.Scene(n_worlds=n_worlds, arch="cpu")
        scene.add_box((0.0, -0.5), (20.0, 1.0), mass=0.0)
        for i, kind in enumerate(kinds):
            scene.add_shape((2.0 * i - 5.0, 1.0), _made_by_hand(kind, added[kind]), mass=1.5)
        return scene

    scene = build()
    scene.get_state()  # built: the stores below redo their worlds' rows alone
    reference = [[dict(added[kind]) for kind in kinds] for _ in range(n_worlds)]
    takes = {
        "circle": ("radius",),
        "offset_circle": ("radius",),
        "box": ("size", "radius"),
        "rounded_box": ("size", "radius"),
        "capsule": ("length", "radius"),
        "polygon": ("vertices", "radius"),
    }
    for _ in range(12):
        j = int(rng.integers(len(kinds)))
        kind, body = kinds[j], j + 1
        worlds = np.sort(rng.choice(n_worlds, int(rng.integers(1, 9)), replace=False))
        given = {}
        for key in takes[kind]:
            if rng.random() < 0.6 or not given:
                k = len(worlds)
                given[key] = {
                    "radius": rng.uniform(0.02, 0.3, k) * (kind != "box"),
                    "size": rng.uniform(0.2, 1.0, (k, 2)),
                    "length": rng.uniform(0.2, 1.0, k),
                    "vertices": PENTAGON * rng.uniform(0.5, 1.5, (k, 1, 2)),
                }[key]
        scene.set_shape_params(body, world=worlds, **given)
        for i, world in enumerate(worlds.tolist()):
            if kind == "polygon" and "vertices" not in given:
                # (A polygon's outline kept is its current one: re-centred, as made.)
                current = _made_by_hand(kind, reference[world][j])
                reference[world][j]["vertices"] = current.vertices
            reference[world][j].update({key: value[i] for key, value in given.items()})

    params = scene.get_shape_params()
    inertia = scene.get_body_params()["inertia"]
    for world in range(n_worlds):
        for j, kind in enumerate(kinds):
            expected = _made_by_hand(kind, reference[world][j])
            assert _same_shape(scene.body_shape(j + 1, world=world), expected), (world, kind)
            assert inertia[world, j + 1] == 1.5 * expected.unit_inertia
            assert params["radius"][world, j + 1] == expected.radius
        assert np.array_equal(params["size"][world, 3], reference[world][2]["size"])
        assert np.array_equal(params["length"][world, 5], reference[world][4]["length"])
    # A box given vertices in some worlds (a quadrilateral there): the snapshot's box
    # rows are made from sizes in some worlds and from vertices in others.
    quad = np.array([[-0.3, -0.2], [0.35, -0.25], [0.3, 0.2], [-0.25, 0.3]])
    scene.set_shape_params(3, vertices=quad * rng.uniform(0.5, 1.5, (5, 1, 1)), world=range(5))
    restored = build()
    restored.restore(scene.snapshot())
    for world in range(n_worlds):
        for body in range(1, len(kinds) + 1):
            assert _same_shape(
                restored.body_shape(body, world=world), scene.body_shape(body, world=world)
            )


def test_a_store_keeps_no_shape_object_per_world():
    """A body's per-world shapes are arrays, a row a world (world_shapes.ShapeColumn): a
    store of 4 boxes in 2,000 worlds leaves no Shape per world and body alive (8,000 where
    the scene kept a Shape each), and a Shape is made where one is asked for."""
    import gc

    def live_shapes() -> int:
        gc.collect()
        return sum(isinstance(item, shapes.Shape) for item in gc.get_objects())

    n_worlds = 2_000
    scene = fx.Scene(n_worlds=n_worlds, arch="cpu")
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)
    boxes = [scene.add_box((0.0, 1.0 + i), (0.5, 0.5)) for i in range(4)]
    scene.step(DT)
    before = live_shapes()
    sizes = np.random.default_rng(0).uniform(0.3, 0.9, (n_worlds, len(boxes), 2))
    scene.set_shape_params(boxes, size=sizes)
    scene.step(DT)
    assert live_shapes() - before < 50
    assert np.array_equal(scene.body_shape(boxes[2], world=1234).vertices[2], sizes[1234, 2] / 2)


def test_a_pickle_from_before_the_columns_keeps_its_shapes():
    """A WorldShapes pickled before the per-world shapes were columns held a Shape per
    world and body and the arguments each was made from (None: the add_* shape): it
    unpickles into columns of the same shapes and arguments, none dropped."""
    from fx2d_gpu.model.world_shapes import WorldShapes

    scene = fx.Scene(n_worlds=3, arch="cpu")
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0.0)
    box = scene.add_box((0.0, 1.0), (0.5, 0.4))
    added = scene.body_shape(box)
    sizes = [None, np.array([0.7, 0.3]), np.array([0.2, 0.9])]
    old = WorldShapes.__new__(WorldShapes)
    old.__setstate__(
        {
            "n_worlds": 3,
            "shapes": {box: [added if s is None else shapes.box(s) for s in sizes]},
            "args": {box: [None if s is None else {"radius": 0.0, "size": s} for s in sizes]},
            "poses": {},
            "version": 0,
        }
    )
    for world, size in enumerate(sizes):
        expected = added if size is None else shapes.box(size)
        assert _same_shape(old.columns[box].geometry.shape(world), expected)
    assert np.isnan(old.columns[box].radius[0]) and np.isnan(old.columns[box].size[0]).all()
    assert np.array_equal(old.columns[box].size[1:], sizes[1:])


WAKE = "fx2d_gpu.device.transfer._wake_slots"
UPLOAD = "fx2d_gpu.device.transfer._scatter_fields"


def _edit_mid_run(scene, read_after_each: bool) -> dict[str, int]:
    """Edits of overlapping worlds of a built, stepped polygon batch: resizes, placements
    (static body 0 placed twice in world 2: the later pose stays), body values, an inertia
    alone, a gravity; with `read_after_each`, a get_state after each edit (each written on
    its own, as the scene's next use of the device writes what waits). Returns the wake and
    upload launches of the edits and one read after them."""
    edits = [
        lambda: scene.set_shape_params([1, 2], vertices=PENTAGON * 0.8, world=[0, 2]),
        lambda: scene.set_shape_params(0, position=(0.2, -0.45), angle=0.05, world=[1, 2]),
        lambda: scene.set_body_params(3, mass=2.5, static_friction=0.9, world=[3]),
        lambda: scene.set_shape_params(0, position=(-0.1, -0.5), world=2),
        lambda: scene.set_shape_params(3, inertia=0.4, world=[1]),
        lambda: scene.set_shape_params(2, radius=0.04, world=[3]),
        lambda: scene.set_gravity([(0.0, -9.81), (0.5, -9.0), (0.0, -12.0), (-0.3, -9.81)]),
    ]
    before = launching.kernel_launches()
    for edit in edits:
        edit()
        if read_after_each:
            scene.get_state()
    scene.get_state()
    after = launching.kernel_launches()
    return {name: after[name] - before[name] for name in (WAKE, UPLOAD)}


def test_edits_are_written_together_as_each_alone_would_leave_them():
    """set_shape_params, set_body_params and set_gravity of a built scene store their
    values at once and write the device at its next use, all together (one upload, one
    wake: edits.UnwrittenEdits): bit for bit the scene each edit written on its own leaves
    (a read after each), at once and over the steps after, a static placed twice at its
    later pose."""
    together, alone = _batch("polygon"), _batch("polygon")
    for scene in (together, alone):
        _run(scene, 15)
    assert _edit_mid_run(together, False) == {WAKE: 1, UPLOAD: 1}
    # (one by one: the three resizes', the values' and the inertia's; the gravity whole)
    assert _edit_mid_run(alone, True) == {WAKE: 4, UPLOAD: 4}
    for step in range(30):
        for x, y in zip(_state(together), _state(alone), strict=True):
            assert np.array_equal(x, y), step
        for scene in (together, alone):
            scene.step(DT)
    ground = together.get_state().position[:, 0]  # (static: where the later edit put it)
    assert np.array_equal(ground[1:3], np.float32([(0.2, -0.45), (-0.1, -0.5)]))
    fresh = _batch("polygon")
    fresh.set_shape_params(0, position=(-0.1, -0.5), world=2)
    fresh.reset_worlds([2])
    together.reset_worlds([2])  # (a reset starts from the later placement)
    assert np.array_equal(together.get_state().position[2, 0], fresh.get_state().position[2, 0])


def test_edits_waiting_for_the_device_survive_a_body_added_after_them():
    """A body added after edits of a built scene, before its next use of the device: the
    waiting writes are made in the layout they were made for, and the build that follows
    keeps them (the same scene as with a read between)."""
    scenes = [_batch("polygon"), _batch("polygon")]
    for scene in scenes:
        _run(scene, 10)
    for read_between, scene in zip((False, True), scenes, strict=True):
        scene.set_shape_params(0, position=(0.3, -0.4), angle=-0.1, world=[0, 3])
        scene.set_shape_params(2, vertices=PENTAGON * 1.3, world=1)
        if read_between:
            scene.get_state()
        scene.add_circle((0.0, 4.0), 0.15, mass=0.2)
    for _ in range(20):
        for x, y in zip(*(_state(scene) for scene in scenes), strict=True):
            assert np.array_equal(x, y)
        for scene in scenes:
            scene.step(DT)
    assert np.allclose(scenes[0].get_state().position[[0, 3], 0], (0.3, -0.4))


@pytest.mark.parametrize("kind", ["box", "polygon", "capsule", "circle"])
def test_bodies_resized_in_one_call_are_made_as_each_alone(kind):
    """Bodies of one kind resized in one call, each its own value a world (their rows made
    in one call of the kind's maker, WorldShapes._made_columns): the shapes and the steps
    after, bit for bit, of a call a body."""
    rng = np.random.default_rng(7)
    base = {key: np.asarray(rows) for key, rows in WORLD_SHAPES[kind].items()}
    # (N_WORLDS, 3 bodies, ...): world w's values scaled apart per body
    values = {
        key: rows[:, None] * rng.uniform(0.8, 1.2, (N_WORLDS, 3) + (1,) * (rows.ndim - 1))
        for key, rows in base.items()
    }
    together, alone = _batch(kind), _batch(kind)
    together.set_shape_params([1, 2, 3], **values)
    for j, body in enumerate((1, 2, 3)):
        alone.set_shape_params(body, **{key: v[:, j] for key, v in values.items()})
    made = together.get_shape_params()
    for key, array in made.items():
        assert np.array_equal(array, alone.get_shape_params()[key], equal_nan=True), key
    assert any(not np.array_equal(a[:, 1], a[:, 2], equal_nan=True) for a in made.values())
    for x, y in zip(_run(together, 20), _run(alone, 20), strict=True):
        assert np.array_equal(x, y)
