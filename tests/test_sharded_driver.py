"""ShardedScene's driver-side rules without a Ray cluster (issue 76 findings 2, 3, 4, 5, 8, 12).

The shards here are ShardWorker objects in this process behind a stand-in for Ray
(`InProcessRay`): a task runs when it is submitted, as a Ray actor would run it whether or
not the driver waits, and its arguments and result are deep copies, as Ray's pickling makes
them. What a test needs from the cluster (a Ctrl-C while the driver waits, close() from
another thread, a shard's process dying) is injected where Ray would show it: in ray.get.
The driver code under test is ShardedScene's own, unchanged; tests/test_sharded_reliability.py
runs what needs real processes on a local Ray cluster.
"""

import copy
import dataclasses
import inspect

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.distributed import ShardedScene, sharded_scene
from fx2d_gpu.distributed.worker import ShardWorker
from fx2d_gpu.model.model_queries import ModelQueries

DT = 1.0 / 60.0


class RayTaskError(Exception):
    """A task's own exception, as Ray wraps it (its `cause`)."""

    def __init__(self, cause: Exception):
        super().__init__(str(cause))
        self.cause = cause


class RayActorError(Exception):
    """An actor's process is gone."""


class ActorDiedError(RayActorError):
    """An actor gone for good (killed, or past max_restarts)."""


class ActorUnavailableError(RayActorError):
    """An actor restarting."""


class GetTimeoutError(Exception):
    """ray.get's timeout."""


class _Ref:
    """A finished task: its result, or the exception ray.get raises for it."""

    def __init__(self, actor, method: str, value=None, error=None):
        self.actor, self.method, self.value, self.error = actor, method, value, error


class _Method:
    def __init__(self, actor, name: str):
        self.actor, self.name = actor, name

    def remote(self, *args, **kwargs) -> _Ref:
        if self.actor.killed:
            return _Ref(self.actor, self.name, error=ActorDiedError("the actor was killed"))
        args, kwargs = copy.deepcopy((args, kwargs))  # Ray pickles them
        try:
            value = getattr(self.actor.worker, self.name)(*args, **kwargs)
        except Exception as error:  # noqa: BLE001 (handed back as Ray does)
            return _Ref(self.actor, self.name, error=RayTaskError(error))
        return _Ref(self.actor, self.name, value=copy.deepcopy(value))


class _Actor:
    def __init__(self, worker: ShardWorker):
        self.worker, self.killed = worker, False

    def __getattr__(self, name: str) -> _Method:
        return _Method(self, name)


class InProcessRay:
    """The part of Ray's API ShardedScene uses, with its shards in this process.

    Attributes:
        started (int): actors started.
        on_get (Callable[[_Ref], None] | None): called by ray.get before it answers a ref
            (a test raises from it what Ray would raise there); None: answer.
    """

    exceptions = type(
        "exceptions",
        (),
        dict(
            RayTaskError=RayTaskError,
            RayActorError=RayActorError,
            ActorDiedError=ActorDiedError,
            ActorUnavailableError=ActorUnavailableError,
            GetTimeoutError=GetTimeoutError,
        ),
    )

    def __init__(self):
        self.started = 0
        self.on_get = None

    def remote(self, cls):
        ray = self

        class ActorClass:
            def options(self, **_):
                return self

            def remote(self, source, n_worlds):
                ray.started += 1
                worker = ShardWorker.__new__(ShardWorker)  # its __init__ asks Ray for GPUs
                worker.gpu_ids, worker._source, worker._n_worlds = [], source, n_worlds
                worker.scene, worker.failure = None, None
                return _Actor(worker)

        assert cls is ShardWorker
        return ActorClass()

    def get(self, refs, timeout=None):
        if isinstance(refs, list):
            return [self.get(ref) for ref in refs]
        if self.on_get is not None:
            self.on_get(refs)
        if refs.error is not None:
            raise refs.error
        return refs.value

    def wait(self, refs, num_returns=1, timeout=None):
        return refs, []  # (every task here has finished when it is sent)

    def kill(self, actor, no_restart=True):
        actor.killed = True


def build(n_worlds: int) -> fx.Scene:
    """A ground, two boxes that fall and settle, a ball."""
    scene = fx.Scene(n_worlds=n_worlds, arch="cpu", enable_sleep=False)
    scene.add_box((0.0, -0.5), (10.0, 1.0), mass=0)
    scene.add_box((0.0, 0.5), (0.5, 0.5))
    scene.add_box((0.2, 1.2), (0.5, 0.5))
    scene.add_circle((-2.0, 1.0), 0.25)
    return scene


def build_other(n_worlds: int) -> fx.Scene:
    """Another model: one circle."""
    scene = fx.Scene(n_worlds=n_worlds, arch="cpu")
    scene.add_circle((0.0, 0.0), 0.5)
    return scene


@pytest.fixture
def fake_ray():
    """InProcessRay, to give ShardedScene as its `ray`."""
    return InProcessRay()


@pytest.fixture
def sharded(fake_ray):
    """4 worlds in 2 in-process shards of `build`."""
    scene = ShardedScene(4, build, n_shards=2, snapshot_every=None, ray=fake_ray)
    yield scene
    scene.close()


def shard_steps(scene: ShardedScene) -> list[int]:
    """Each shard's own step count."""
    return [scene.inspect(lambda s: s.step_count, shard=k) for k in range(scene.n_shards)]


def once(error: BaseException, method: str = "run"):
    """An on_get that raises `error` the first time the driver waits for a `method` task."""
    fired = []

    def on_get(ref):
        if ref.method == method and not fired:
            fired.append(ref)
            raise error

    return on_get


def test_interrupted_step_refuses_to_step_until_restore(sharded, fake_ray):
    """Finding 2: Ctrl-C while the driver waits for step(n)'s shards: the shards did the
    steps, the driver cannot know; the scene refuses to step (or snapshot, or rebuild a lost
    shard from a log that may lack them) until restore(), after which all agree again."""
    sharded.step(DT, n=2)
    start = sharded.snapshot()
    fake_ray.on_get = once(KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        sharded.step(DT, n=30)
    assert shard_steps(sharded) == [32, 32] and sharded.step_count == 2  # split, and known
    with pytest.raises(RuntimeError, match="interrupted by KeyboardInterrupt.*restore()"):
        sharded.step(DT)
    with pytest.raises(RuntimeError, match="restore()"):
        sharded.snapshot()
    sharded._shards[1].lost = True  # a shard lost now: its log may lack the 30 steps
    with pytest.raises(fx.distributed.ShardLostError, match="interrupted call"):
        sharded.recover()
    sharded.restore(start)
    sharded.step(DT, n=3)
    assert shard_steps(sharded) == [5, 5] and sharded.step_count == 5

    # A Ctrl-C after the shards answered, before the driver counted the steps.
    def interrupted_clock(dt, n):
        raise KeyboardInterrupt

    sharded._advance_clock = interrupted_clock
    with pytest.raises(KeyboardInterrupt):
        sharded.step(DT)
    del sharded._advance_clock
    with pytest.raises(RuntimeError, match="before the driver counted its steps"):
        sharded.step(DT)
    sharded.restore(start)
    sharded.step(DT)
    assert shard_steps(sharded) == [3, 3] and sharded.step_count == 3


def test_restore_checks_every_part_before_any_shard_changes(sharded):
    """Finding 3: one shard's part damaged: a ValueError naming that shard and the field,
    and no shard, nor the driver, changed; a good restore then works."""
    sharded.step(DT, n=3)
    snap = sharded.snapshot()
    sharded.step(DT, n=10)
    before = sharded.get_state()
    bad = copy.deepcopy(snap)
    bad.shards[1].device["bodies"]["position"] = np.full_like(
        bad.shards[1].device["bodies"]["position"], np.nan
    )
    with pytest.raises(ValueError, match=r"shard 1 \(worlds 2-3.*position"):
        sharded.restore(bad)
    assert shard_steps(sharded) == [13, 13] and sharded.step_count == 13
    after = sharded.get_state()
    assert np.array_equal(after.position, before.position)
    sharded.step(DT)  # not refused: nothing changed
    sharded.restore(snap)
    assert shard_steps(sharded) == [3, 3] and sharded.step_count == 3


def test_reset_worlds_refuses_another_scenes_snapshot(sharded, fake_ray):
    """Finding 4: a ShardedSnapshot of another model with the same shard ranges is refused
    by the driver, naming the argument; the scene steps on."""
    other = ShardedScene(4, build_other, n_shards=2, ray=fake_ray)
    foreign = other.snapshot()
    other.close()
    with pytest.raises(ValueError, match=r"state: shard 0's part is a snapshot of another"):
        sharded.reset_worlds([1], foreign)
    with pytest.raises(ValueError, match=r"snapshot: shard 0's part is a snapshot of another"):
        sharded.restore(foreign)
    sharded.step(DT)
    sharded.reset_worlds([1], sharded.snapshot())  # its own is taken
    sharded.step(DT)


def _out_cases(n_worlds: int, n_bodies: int) -> dict:
    nb = n_bodies
    shared = np.zeros((n_worlds, nb, 2), np.float32)
    return {
        "twice the worlds": dict(position=np.zeros((2 * n_worlds, nb, 2), np.float32)),
        "int8": dict(angle=np.zeros((n_worlds, nb), np.int8)),
        "float16": dict(position=np.zeros((n_worlds, nb, 2), np.float16)),
        "float sleeping": dict(sleeping=np.zeros((n_worlds, nb), np.float32)),
        "non-contiguous": dict(position=np.zeros((n_worlds, nb, 4), np.float32)[..., ::2]),
        "too few bodies": dict(position=np.zeros((n_worlds, 1, 2), np.float32)),
        "a list": dict(position=[[[0.0, 0.0]] * nb] * n_worlds),
        "mixed floats": dict(
            position=np.zeros((n_worlds, nb, 2), np.float32),
            angle=np.zeros((n_worlds, nb), np.float64),
        ),
        "aliased": dict(position=shared, velocity=shared),
        "not a State": None,
    }


def test_get_state_out_is_checked_as_scenes(sharded):
    """Finding 5: ShardedScene.get_state(out=) refuses what Scene.get_state(out=) refuses,
    with the same error (one check: readout.check_state_out), before any shard is asked;
    two fields of one array are refused by both (a judgment call of finding 19)."""
    local = build(4)
    read_only = np.zeros((4, local.n_bodies))
    read_only.setflags(write=False)
    cases = _out_cases(4, local.n_bodies)
    cases["read only"] = dict(angle=read_only)
    for label, fields in cases.items():
        out = (
            np.zeros(3)
            if fields is None
            else fx.State(**{f.name: fields.get(f.name) for f in dataclasses.fields(fx.State)})
        )
        errors = []
        for scene in (local, sharded):
            with pytest.raises((TypeError, ValueError)) as caught:
                scene.get_state(out=out)
            errors.append((type(caught.value), str(caught.value)))
        assert errors[0] == errors[1], label
    good = fx.State(
        np.zeros((4, local.n_bodies, 2), np.float32),
        None,
        None,
        None,
        np.zeros((4, local.n_bodies), bool),
    )
    sharded.get_state(out=good)
    assert np.array_equal(good.position, sharded.get_state(dtype=np.float32).position)


def test_close_while_waiting_raises_and_starts_no_actor(sharded, fake_ray):
    """Finding 8: close() from another thread while step() waits: the waiting call raises
    RuntimeError at once (Ray reports the killed actors as lost) and starts no new actor;
    n is bounded."""
    with pytest.raises(ValueError, match=f"at most {sharded_scene.MAX_STEPS_PER_CALL}"):
        sharded.step(DT, n=sharded_scene.MAX_STEPS_PER_CALL + 1)
    started = fake_ray.started

    def closed_meanwhile(ref):
        if ref.method == "run":
            sharded.close()  # (what another thread does while this call waits)
            raise ActorDiedError("killed")

    fake_ray.on_get = closed_meanwhile
    with pytest.raises(RuntimeError, match="closed while this call waited"):
        sharded.step(DT, n=5)
    assert fake_ray.started == started


#: The calls that still answer after close(): the model's questions and the layout, facts
#: the driver holds.
ANSWERED_AFTER_CLOSE = {
    "close",
    "n_worlds",
    "n_shards",
    "shard_worlds",
    *(n for n in dir(ModelQueries) if not n.startswith("_")),
}


def test_every_call_after_close_refuses(sharded):
    """Finding 12: after close(), every method refuses with RuntimeError (those that only
    queue a change too), whatever its arguments."""
    sharded.close()
    names = [
        n for n in dir(ShardedScene) if not n.startswith("_") and n not in ANSWERED_AFTER_CLOSE
    ]
    assert {
        "apply_force",
        "set_gravity",
        "set_state",
        "reset_worlds",
        "step",
        "faulted_worlds",
        "snapshot",
        "restore",
    } <= set(names)
    for name in names:
        attribute = inspect.getattr_static(ShardedScene, name)
        with pytest.raises(RuntimeError, match="closed"):
            if isinstance(attribute, property):
                getattr(sharded, name)
            else:
                parameters = [
                    p
                    for p in inspect.signature(attribute).parameters.values()
                    if p.default is p.empty and p.kind is p.POSITIONAL_OR_KEYWORD
                ]
                getattr(sharded, name)(*[None] * (len(parameters) - 1))
    sharded.close()  # twice is allowed


def test_collision_matrix_is_the_scenes_and_follows_a_filter(sharded):
    # Every shard holds the same model: shard 0's answer is the scene's, a queued filter
    # change included.
    alone = build(4)
    np.testing.assert_array_equal(sharded.collision_matrix(), alone.collision_matrix())
    assert sharded.collision_matrix()[1, 2]  # the two boxes may collide
    sharded.set_collision_filter(2, mask_bits=0)
    alone.set_collision_filter(2, mask_bits=0)
    np.testing.assert_array_equal(sharded.collision_matrix(), alone.collision_matrix())
    assert not sharded.collision_matrix()[:, 2].any()


def test_per_world_geometry_is_the_scenes_across_shards(sharded):
    # Sizes given per world across the shards' boundary (worlds 1-2: one in each shard), one
    # for all, and per world and body; the ground placed per world; then the scene steps as
    # one in-process Scene given the same calls, bit for bit, and answers the same shapes.
    alone = build(4)
    calls = [
        dict(bodies=[1], size=[[0.4, 0.6], [0.7, 0.3]], world=[1, 2]),
        dict(bodies=[3], radius=0.35),
        dict(bodies=[1, 2], size=[[[0.5, 0.5], [0.3, 0.9]]], world=3),
        dict(bodies=[0], position=[[0.0, -0.6], [0.1, -0.4]], angle=[0.0, 0.05], world=[0, 3]),
    ]
    for call in calls:
        sharded.set_shape_params(**call)
        alone.set_shape_params(**call)
    for _ in range(30):
        sharded.step(DT)
        alone.step(DT)
    a, b = sharded.get_state(), alone.get_state()
    for name in ("position", "angle", "velocity", "angular_velocity"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    mine, theirs = sharded.get_shape_params(), alone.get_shape_params()
    for name in mine:
        np.testing.assert_array_equal(mine[name], theirs[name], err_msg=name)
    np.testing.assert_array_equal(
        sharded.get_body_params()["inertia"], alone.get_body_params()["inertia"]
    )
    np.testing.assert_array_equal(
        sharded.body_shape(1, world=2).vertices, alone.body_shape(1, world=2).vertices
    )
    assert mine["size"][2, 1].tolist() == [0.7, 0.3]  # the second shard's first world
    # The shards' own scenes hold their worlds' shapes (global world 2 is shard 1's 0).
    shard_size = sharded.inspect(lambda s: s.get_shape_params([1])["size"], shard=1)
    np.testing.assert_array_equal(shard_size[:, 0], theirs["size"][2:, 1])


def test_bad_geometry_is_refused_before_any_shard_changes(sharded):
    before = sharded.get_shape_params()
    steps = shard_steps(sharded)
    with pytest.raises(ValueError, match="size"):
        sharded.set_shape_params([1, 3], size=(0.5, 0.5))  # body 3 is a circle
    with pytest.raises(ValueError, match="not static"):
        sharded.set_shape_params([1], position=(0.0, 1.0))
    with pytest.raises(ValueError, match="size must have shape"):
        sharded.set_shape_params([1], size=[[0.5, 0.5]] * 3, world=[0, 1])
    after = sharded.get_shape_params()
    for name in before:
        np.testing.assert_array_equal(before[name], after[name])
    assert shard_steps(sharded) == steps
    sizes = sharded.inspect(lambda s: s.get_shape_params([1])["size"], shard=0)
    np.testing.assert_array_equal(sizes[:, 0], before["size"][:2, 1])


def test_a_snapshot_restores_the_shapes(sharded):
    snapshot = sharded.snapshot()
    sharded.set_shape_params([2], size=(0.9, 0.2), world=3)
    sharded.restore(snapshot)
    assert sharded.get_shape_params()["size"][3, 2].tolist() == [0.5, 0.5]
    size = sharded.inspect(lambda s: s.get_shape_params([2])["size"], shard=1)
    assert size[1, 0].tolist() == [0.5, 0.5]
    # A snapshot pickled before the shapes were sharded holds none: the shards' are read.
    sharded.set_shape_params([2], size=(0.9, 0.2), world=3)
    older = dataclasses.replace(sharded.snapshot(), shapes=None)
    sharded.set_shape_params([2], size=(0.4, 0.4), world=3)
    sharded.restore(older)
    assert sharded.get_shape_params()["size"][3, 2].tolist() == [0.9, 0.2]


def test_close_leaves_taichi_running_where_the_shards_share_the_drivers_process(fake_ray):
    """close() has each shard write its kernels into Taichi's offline cache, which stops
    Taichi in the shard's process (ShardWorker.finish): not where that process is the
    driver's (Ray's local mode, this stand-in), whose scenes go on using it."""
    sharded = ShardedScene(4, build, n_shards=2, ray=fake_ray)
    sharded.step(DT)
    sharded.close()
    scene = build(1)
    scene.step(DT)
    assert scene.step_count == 1 and scene.get_state().position[0, 1, 1] < 0.5


def test_get_columns_are_a_scenes(sharded):
    """ShardedScene.get_columns gives what Scene.get_columns gives for the same worlds (each
    product in float32), and refuses by the same checks before asking a shard."""
    reference = build(4)
    for scene in (sharded, reference):
        for _ in range(12):
            scene.step(1 / 60)
    columns = [(1, "x"), (2, "vy", -1.0), (3, "angle", 0.5), (1, "angular_velocity", 1 / 3)]
    for dtype in (np.float32, np.float64):
        np.testing.assert_array_equal(
            sharded.get_columns(columns, dtype=dtype), reference.get_columns(columns, dtype=dtype)
        )
    out = np.zeros((4, len(columns)), np.float32)
    assert sharded.get_columns(columns, out=out) is out
    np.testing.assert_array_equal(out, reference.get_columns(columns, dtype=np.float32))
    with pytest.raises(ValueError, match=r"columns\[0\]'s quantity must be one of"):
        sharded.get_columns([(1, "speed")])
    with pytest.raises(ValueError, match=r"out must have shape \(4, 4\)"):
        sharded.get_columns(columns, out=np.zeros((4, 3)))


def test_touching_is_a_scenes(sharded):
    """ShardedScene.touching gives what Scene.touching gives for the same worlds, the shards'
    rows in world order, and refuses bad bodies before asking a shard."""
    reference = build(4)
    for scene in (sharded, reference):
        for _ in range(20):
            scene.step(1 / 60)
    expected = reference.touching()
    assert expected[:, 0].all() and not expected.all()  # the ground, the ball in the air
    np.testing.assert_array_equal(sharded.touching(), expected)
    np.testing.assert_array_equal(sharded.touching([2, 0]), reference.touching([2, 0]))
    with pytest.raises(ValueError, match="bodies"):
        sharded.touching(7)
