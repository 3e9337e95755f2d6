"""ShardedScene (fx2d_gpu.distributed) is a Scene whose worlds live in several processes: every
public method the two share takes the same parameters, in the same order, of the same kinds,
with the same defaults, so code written for one runs on the other. A Scene method that
ShardedScene lacks is listed here with the reason; a new one fails this test until it is
given to ShardedScene or listed."""

import inspect

import fx2d_gpu as fx
from fx2d_gpu.distributed import ShardedScene

#: Scene's public names that ShardedScene has not, and why.
SCENE_ONLY = {
    # A sharded scene's model comes whole from its builder function, run in each shard:
    # adding, removing or grouping bodies and joints changes the model, which the shards'
    # builders would no longer give.
    **dict.fromkeys(
        (
            "add_box",
            "add_boxes",
            "add_capsule",
            "add_chain",
            "add_circle",
            "add_circles",
            "add_edge",
            "add_group",
            "add_polygon",
            "add_prismatic_joint",
            "add_revolute_joint",
            "add_shape",
            "add_shapes",
            "disable_collision",
            "remove_body",
            "remove_group",
            "group_bodies",
            "set_group_enabled",
            "replicate",
        ),
        "the model comes from the builder",
    ),
    # The solver's diagnostics and tools of one process's pool.
    **dict.fromkeys(
        (
            "colorings",
            "lost_bodies",
            "n_colors",
            "n_overflow",
            "pair_reuses",
            "profile",
            "report_refreshes",
            "scratch_colorings",
            "step_context",
            "steps_in_flight",
            "step_options",
        ),
        "a diagnostic of one process's step",
    ),
    # Per-scene files and values a shard's builder sets for it.
    **dict.fromkeys(("load_state", "save_state"), "a sharded scene saves snapshots"),
    **dict.fromkeys(("gravity", "get_joint_params"), "read per shard"),
}
#: Methods whose ShardedScene version adds trailing parameters of its own (all with
#: defaults, so every call written for Scene works).
EXTENDED = {"step"}


def _public(cls) -> dict:
    return {name: value for name, value in inspect.getmembers(cls) if not name.startswith("_")}


def _parameters(method) -> list[tuple]:
    """(name, kind, default) of each parameter: annotations may differ (a ShardedSnapshot
    for a SceneSnapshot), names, kinds and defaults may not."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(method).parameters.values()]


def test_sharded_scene_has_every_scene_method_not_listed():
    scene, sharded = _public(fx.Scene), _public(ShardedScene)
    missing = sorted(set(scene) - set(sharded) - set(SCENE_ONLY))
    assert not missing, (
        f"Scene methods ShardedScene lacks (give them to it, or list them): {missing}"
    )
    stale = sorted(set(SCENE_ONLY) & set(sharded))
    assert not stale, f"listed as Scene-only but ShardedScene has them: {stale}"


def test_shared_methods_take_the_same_parameters_and_defaults():
    scene, sharded = _public(fx.Scene), _public(ShardedScene)
    checked = 0
    for name in sorted(set(scene) & set(sharded)):
        mine, theirs = scene[name], sharded[name]
        if isinstance(mine, property) or not callable(mine):
            assert isinstance(theirs, property) or not callable(theirs), name
            continue
        ours, others = _parameters(mine), _parameters(theirs)
        if name in EXTENDED:
            assert others[: len(ours)] == ours, name
            assert all(p[2] is not inspect.Parameter.empty for p in others[len(ours) :]), name
        else:
            assert others == ours, f"{name}: Scene {ours} vs ShardedScene {others}"
        checked += 1
    assert checked >= 25  # the state, per-world values, queries, snapshots, the step
