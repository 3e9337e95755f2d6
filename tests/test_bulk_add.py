"""Bodies added in bulk (Scene.add_circles, add_boxes, add_shapes) against the same bodies
added one call each: the same model to the bit, the same motion to the bit, the same
refusals (named by keyword and index) with the scene left as it was."""

import dataclasses

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu import checks, shapes
from fx2d_gpu.model.builder import Body

N = 60


def _per_body_keywords(rng, n):
    """Every keyword add_circle takes (but name), one value per body, mixed."""
    mass = rng.uniform(0.5, 3.0, n)
    mass[::9] = 0.0  # some static bodies
    return dict(
        angle=rng.uniform(-3.0, 3.0, n),
        velocity=rng.uniform(-2.0, 2.0, (n, 2)),
        angular_velocity=rng.uniform(-1.0, 1.0, n),
        mass=mass,
        elasticity=rng.uniform(0.0, 0.8, n),
        static_friction=rng.uniform(0.0, 1.0, n),
        dynamic_friction=rng.uniform(0.0, 0.8, n),
        gravity_scale=rng.uniform(0.5, 1.5, n),
        vel_damping=rng.uniform(0.0, 0.2, n),
        external_forces_enabled=rng.uniform(size=n) > 0.1,
        sensor=rng.uniform(size=n) > 0.9,
        collision_group=rng.integers(-2, 3, n),
        category_bits=rng.integers(1, 4, n),
        mask_bits=np.where(rng.uniform(size=n) > 0.2, 0xFFFFFFFF, 0x3).astype(np.int64),
        enabled=rng.uniform(size=n) > 0.05,
    )


def _one_body(keywords, i):
    return {key: (value[i] if np.ndim(value) else value) for key, value in keywords.items()}


def _pile(rng, n):
    positions = np.stack([rng.uniform(-4.0, 4.0, n), rng.uniform(0.5, 6.0, n)], 1)
    radii = rng.uniform(0.1, 0.3, n)
    sizes = rng.uniform(0.2, 0.6, (n, 2))
    rounding = np.where(np.arange(n) % 4 == 0, 0.05, 0.0)  # some rounded boxes among them
    return positions, radii, sizes, rounding


def positions_at_start(scene):
    return np.array([b.position for b in scene._builder.bodies[1:]])


def _ground(scene):
    scene.add_box((0.0, -0.5), (12.0, 1.0), mass=0)


def _same_model(a, b):
    for body_a, body_b in zip(a._builder.bodies, b._builder.bodies, strict=True):
        for field in dataclasses.fields(Body):
            x, y = getattr(body_a, field.name), getattr(body_b, field.name)
            if isinstance(x, np.ndarray):
                assert x.tobytes() == y.tobytes(), field.name
            elif field.name == "shape":
                assert x.kind == y.kind and x.radius == y.radius
                for array in ("center", "vertices", "normals", "cones"):
                    assert getattr(x, array).tobytes() == getattr(y, array).tobytes()
            else:
                assert x == y and type(x) is type(y), field.name
    model_a, model_b = a._builder.build_model(), b._builder.build_model()
    for group in model_a:
        for key, array in model_a[group].items():
            assert array.tobytes() == model_b[group][key].tobytes(), (group, key)


def test_bulk_bodies_are_the_one_by_one_bodies_to_the_bit():
    rng = np.random.default_rng(7)
    positions, radii, sizes, rounding = _pile(rng, N)
    circle_keywords = _per_body_keywords(rng, N)
    box_keywords = _per_body_keywords(rng, N)
    bulk = fx.Scene(arch="cpu", n_worlds=2)
    single = fx.Scene(arch="cpu", n_worlds=2)
    for scene in (bulk, single):
        _ground(scene)
    circles = bulk.add_circles(positions, radii, **circle_keywords)
    boxes = bulk.add_boxes(positions + (0.0, 7.0), sizes, radius=rounding, **box_keywords)
    for i in range(N):
        single.add_circle(positions[i], radii[i], **_one_body(circle_keywords, i))
    for i in range(N):
        single.add_box(
            positions[i] + (0.0, 7.0), sizes[i], radius=rounding[i], **_one_body(box_keywords, i)
        )
    assert circles.tolist() == list(range(1, N + 1))
    assert boxes.tolist() == list(range(N + 1, 2 * N + 1))
    _same_model(bulk, single)
    for _ in range(20):
        bulk.step(1 / 60)
        single.step(1 / 60)
    a, b = bulk.get_state(), single.get_state()
    for key in ("position", "angle", "velocity", "angular_velocity", "sleeping"):
        assert getattr(a, key).tobytes() == getattr(b, key).tobytes(), key
    # Something happened: bodies moved and collided (the comparison is not of a still pile).
    assert np.abs(a.position[0, 1:] - positions_at_start(bulk)).max() > 0.5
    assert len(bulk.contacts(world=0)) > 10


def test_one_value_serves_every_body():
    rng = np.random.default_rng(3)
    positions, radii, sizes, _ = _pile(rng, 10)
    bulk, single = fx.Scene(arch="cpu"), fx.Scene(arch="cpu")
    keywords = dict(
        angle=0.4,
        velocity=(1.0, -0.5),
        mass=2.0,
        static_friction=0.6,
        sensor=False,
        collision_group=-1,
        enabled=True,
        inertia=0.3,
    )
    bulk.add_circles(positions, 0.25, **keywords)
    bulk.add_boxes(positions, (0.5, 0.3), **keywords)
    for i in range(10):
        single.add_circle(positions[i], 0.25, **keywords)
    for i in range(10):
        single.add_box(positions[i], (0.5, 0.3), **keywords)
    _same_model(bulk, single)


def test_add_shapes_takes_any_prepared_shape_and_shares_one():
    triangle, _ = shapes.polygon([(0, 0), (1, 0), (0.5, 0.8)])
    pill = shapes.capsule(1.0, 0.2)
    disc = shapes.circle(0.3)
    order = [triangle, pill, disc, triangle, triangle, disc]
    positions = np.arange(12, dtype=float).reshape(6, 2)
    collides = np.array([True, True, False, True, True, True])
    bulk, single = fx.Scene(arch="cpu"), fx.Scene(arch="cpu")
    bulk.add_shapes(positions, order, collides=collides, mass=1.5)
    for i, shape in enumerate(order):
        single.add_shape(positions[i], shape, collides=bool(collides[i]), mass=1.5)
    _same_model(bulk, single)
    assert bulk.body_shape(0) is bulk.body_shape(3)  # shared, as given


def test_bulk_shapes_match_their_one_shape_constructors():
    """shapes.circles / shapes.boxes / shapes.capsule_arrays against circle() / box() /
    capsule() over many random sizes (rounded boxes and capsules: their moments summed for
    all rows at once, rounded_moments_rows): the arrays and the cached properties (bounding
    radius, unit inertia) to the bit."""
    rng = np.random.default_rng(11)
    n = 4000
    sizes = np.exp(rng.uniform(np.log(1e-4), np.log(100.0), (n, 2)))
    radii = np.exp(rng.uniform(np.log(1e-4), np.log(100.0), n))
    rounding = np.where(rng.uniform(size=n) > 0.7, rng.uniform(1e-3, 0.5, n), 0.0)
    capsules = shapes.capsule_arrays(sizes[:, 0] + 1e-5, radii, n).shapes()
    for made, alone in (
        (shapes.boxes(sizes, n, rounding), [shapes.box(sizes[i], rounding[i]) for i in range(n)]),
        (shapes.circles(radii, n), [shapes.circle(r) for r in radii]),
        (capsules, [shapes.capsule(sizes[i, 0] + 1e-5, radii[i]) for i in range(n)]),
    ):
        for x, y in zip(made, alone, strict=True):
            assert x.kind == y.kind and x.radius == y.radius
            for array in ("center", "vertices", "normals", "cones"):
                assert getattr(x, array).tobytes() == getattr(y, array).tobytes()
                assert not getattr(x, array).flags.writeable
            assert x.bounding_radius == y.bounding_radius
            assert x.diameter == y.diameter
            assert x.unit_inertia == shapes.unit_inertia(y)


def test_bulk_polygons_match_polygon_to_the_bit():
    """shapes.polygons against polygon() (a vector env's resets make thousands a second):
    random convex outlines of 3 to 8 vertices over six orders of magnitude, either winding,
    off the origin, some rounded: the re-centred vertices, the normals and the cached
    properties to the bit; a bad outline is refused with polygon()'s error, named."""
    rng = np.random.default_rng(12)
    for k in range(3, shapes.MAX_POLYGON_VERTICES + 1):
        n = 500
        turns = np.sort(rng.uniform(0.0, 2.0 * np.pi, (n, k)), axis=1)
        # Points on an ellipse are in convex position; spread so that no two coincide.
        turns += np.linspace(0.0, 2.0 * np.pi, k, endpoint=False) * 0.5
        scale = np.exp(rng.uniform(np.log(1e-3), np.log(1e3), (n, 1)))
        outlines = np.stack(
            [np.cos(turns) * scale * rng.uniform(0.5, 2.0, (n, 1)), np.sin(turns) * scale], 2
        ) + rng.uniform(-5.0, 5.0, (n, 1, 2))
        clockwise = rng.uniform(size=n) < 0.5
        outlines[clockwise] = outlines[clockwise, ::-1]
        fine = []
        for i in range(n):
            try:
                shapes.polygon(outlines[i])
                fine.append(i)
            except ValueError:  # (a rare near-collinear draw)
                pass
        outlines = outlines[fine]
        rounding = np.where(rng.uniform(size=len(outlines)) < 0.1, 0.01, 0.0)
        made = shapes.polygons(outlines, rounding)
        for x, outline, r in zip(made, outlines, rounding, strict=True):
            y = shapes.polygon(outline, radius=r)[0]
            assert x.kind == y.kind and x.radius == y.radius
            for array in ("center", "vertices", "normals", "cones"):
                assert getattr(x, array).tobytes() == getattr(y, array).tobytes(), (k, array)
                assert not getattr(x, array).flags.writeable
            assert x.bounding_radius == y.bounding_radius
            assert x.diameter == y.diameter
            assert x.unit_inertia == shapes.unit_inertia(y)
    square = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    dented = square.copy()
    dented[2] = (0.5, 0.5)
    with pytest.raises(ValueError, match=r"vertices\[2\] must be strictly convex"):
        shapes.polygons(np.stack([square, square, dented, square]))
    with pytest.raises(ValueError, match=r"vertices\[1\] has repeated vertices"):
        shapes.polygons(np.stack([square, square[[0, 0, 2, 3]]]))
    with pytest.raises(ValueError, match=r"vertices\[0\] must be finite"):
        shapes.polygons(np.stack([square * np.nan]))
    with pytest.raises(TypeError, match="vertices"):
        shapes.polygons([[["a", "b"]] * 4])
    assert shapes.polygons(np.zeros((0, 4, 2))) == []


#: (keyword, a bad value): each is refused by add_circle, so add_circles must refuse it at
#: the body it is given to.
BAD_VALUES = [
    ("mass", -1.0),
    ("mass", 1e-20),
    ("mass", np.nan),
    ("angle", np.inf),
    ("angle", 2e15),
    ("elasticity", -0.1),
    ("static_friction", -1.0),
    ("dynamic_friction", np.nan),
    ("vel_damping", -0.5),
    ("gravity_scale", 1e39),
    ("angular_velocity", 2e10),
    ("inertia", 0.0),
    ("inertia", 1e-40),
    ("velocity", (np.nan, 0.0)),
    ("velocity", (2e10, 0.0)),
    ("collision_group", 1 << 31),
    ("category_bits", -1),
    ("mask_bits", 1 << 32),
    ("sensor", 1),
    ("enabled", "yes"),
]


@pytest.mark.parametrize("keyword, bad", BAD_VALUES)
def test_a_bad_value_is_refused_naming_keyword_and_body_scene_unchanged(keyword, bad):
    scene = fx.Scene(arch="cpu")
    _ground(scene)
    scene.step(1 / 60)
    before = scene.get_state()
    n = 5
    with pytest.raises((TypeError, ValueError)) as alone:
        scene.add_circle((0.0, 1.0), 0.2, **{keyword: bad})
    good = {"velocity": np.zeros((n, 2))}.get(keyword, np.ones(n))
    if keyword in ("collision_group", "category_bits", "mask_bits"):
        good = np.ones(n, np.int64)
    if keyword in ("sensor", "enabled"):
        good = np.zeros(n, bool)
    values = list(good)
    values[3] = bad
    column = np.array(values, dtype=object)
    if keyword == "velocity":
        column = np.array(values, dtype=float)
    elif keyword in ("collision_group", "category_bits", "mask_bits"):
        column = np.array(values, dtype=np.int64)
    elif keyword not in ("sensor", "enabled"):
        column = np.array(values, dtype=float)
    positions = np.stack([np.arange(n, dtype=float), np.ones(n)], 1)
    for arguments in ({keyword: column}, {keyword: bad}):
        with pytest.raises(type(alone.value)) as together:
            scene.add_circles(positions, 0.2, **arguments)
        assert keyword in str(together.value)
    if keyword not in ("sensor", "enabled"):  # an array of non-bools is a TypeError itself
        with pytest.raises(type(alone.value), match=rf"{keyword}\[3\]"):
            scene.add_circles(positions, 0.2, **{keyword: column})
    assert scene.n_bodies == 1
    scene.step(1 / 60)
    assert scene.get_state().position.shape == before.position.shape


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda s: s.add_circles(np.zeros((3, 2)), [0.1, 0.2, -0.1]), r"radii\[2\]"),
        (lambda s: s.add_circles(np.zeros((3, 2)), [0.1, 0.2]), "radii"),
        (lambda s: s.add_circles(np.zeros((3, 3)), 0.1), "positions"),
        (lambda s: s.add_circles([[0.0, 0.0], [np.nan, 1.0]], 0.1), r"positions\[1\]"),
        (lambda s: s.add_circles([[0.0, 0.0], [2e15, 1.0]], 0.1), r"positions\[1\]"),
        (lambda s: s.add_boxes(np.zeros((2, 2)), [(1.0, 1.0), (0.0, 1.0)]), r"sizes\[1\]"),
        (lambda s: s.add_boxes(np.zeros((2, 2)), (1.0, 1.0), radius=[0.0, -0.1]), r"radius\[1\]"),
        (lambda s: s.add_shapes(np.zeros((2, 2)), [shapes.circle(0.1)]), "body_shapes"),
        (
            lambda s: s.add_shapes(np.zeros((2, 2)), [shapes.circle(0.1), "disc"]),
            r"body_shapes\[1\]",
        ),
        (
            lambda s: s.add_shapes(np.zeros((1, 2)), [shapes.edge((0, 0), (1, 0))], mass=1.0),
            r"mass\[0\]",
        ),
        (lambda s: s.add_circles(np.zeros((2, 2)), 0.1, name="a"), "name"),
        (lambda s: s.add_circles(np.zeros((2, 2)), 0.1, colour="red"), "colour"),
        (lambda s: s.add_circles(np.zeros((2, 2)), 0.1, mass=np.array([True, False])), "mass"),
        (lambda s: s.add_circles(np.zeros((2, 2)), 0.1, mass=[[1.0, 1.0]]), "mass"),
    ],
)
def test_bad_shapes_and_arguments_are_refused_scene_unchanged(call, message):
    scene = fx.Scene(arch="cpu")
    _ground(scene)
    with pytest.raises((TypeError, ValueError), match=message):
        call(scene)
    assert scene.n_bodies == 1


def test_vector_checks_hold_the_one_value_rules():
    """as_reals / as_vectors2 refuse exactly what as_real / as_vector2 refuse."""
    values = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        1e-30,
        np.nan,
        np.inf,
        -np.inf,
        3.5e38,
        1e15,
        2e15,
        1e10 - 1.0,
        1e10,
        0.5e-5,
    ]
    rules = [
        dict(),
        dict(minimum=0.0),
        dict(positive=True),
        dict(limit=1e15),
        dict(limit=1e10),
        dict(minimum=1e-5),
    ]
    for rule in rules:
        for value in values:
            try:
                checks.as_real(value, "x", **rule)
                alone = True
            except ValueError:
                alone = False
            try:
                checks.as_reals(
                    np.array([1e-3, value])
                    if rule.get("minimum") != 1e-5
                    else np.array([1.0, value]),
                    "x",
                    2,
                    **rule,
                )
                together = True
            except ValueError:
                together = False
            assert alone == together, (rule, value)
    for limit in (checks.FLOAT32_MAX, 1e10):
        for value in values:
            try:
                checks.as_vector2((0.0, value), "v", limit)
                alone = True
            except ValueError:
                alone = False
            try:
                checks.as_vectors2(np.array([[0.0, 0.0], [0.0, value]]), "v", 2, limit)
                together = True
            except ValueError:
                together = False
            assert alone == together, (limit, value)
