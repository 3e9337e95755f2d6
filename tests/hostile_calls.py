"""Random valid and invalid scenes and calls thrown at the API (run by test_hostile.py in a
child process, so that a crash fails the test instead of killing pytest).

Every call must either raise a clear error (TypeError, ValueError; SimulationError from a
step; RuntimeError for a scene without bodies) or leave a usable scene whose state is
finite. Anything else (ZeroDivisionError, IndexError, a Taichi error, a crash) is a bug.
"""

import math
import sys

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fx2d_gpu as fx

CLEAR = (TypeError, ValueError, fx.SimulationError)
#: How many examples reached a final step with bodies, and how many steps ran in all (the
#: test asserts the examples were not all refused early).
counts = {"stepped scenes": 0, "steps": 0}

wild = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.sampled_from(
        [0.0, -1.0, 1e-320, 1e-200, 1e-6, 0.5, 3.0, 1e9, 1e15, 1e30, 1e39, math.nan, math.inf]
    ),
    st.integers(-5, 5),
    st.just(None),
    st.just("x"),
    st.booleans(),
)
sane = st.floats(-5.0, 5.0)
pair = st.one_of(
    st.tuples(sane, sane), st.tuples(wild, wild), wild, st.lists(sane, min_size=0, max_size=3)
)


@st.composite
def body(draw):
    kind = draw(st.sampled_from(["circle", "box", "polygon"]))
    size = draw(st.one_of(st.floats(0.05, 2.0), wild))
    kwargs = draw(
        st.dictionaries(
            st.sampled_from(
                [
                    "mass",
                    "elasticity",
                    "static_friction",
                    "dynamic_friction",
                    "angle",
                    "angular_velocity",
                    "gravity_scale",
                    "vel_damping",
                    "inertia",
                    "velocity",
                    "name",
                ]
            ),
            st.one_of(wild, st.floats(0.0, 3.0), pair),
            max_size=3,
        )
    )
    position = draw(st.one_of(st.tuples(sane, sane), pair))
    return kind, size, position, kwargs


@st.composite
def valid_body(draw):
    kind = draw(st.sampled_from(["circle", "box", "polygon"]))
    kwargs = {
        "mass": draw(st.sampled_from([0.0, 0.01, 1.0, 50.0])),
        "velocity": (draw(st.floats(-20, 20)), draw(st.floats(-20, 20))),
        "elasticity": draw(st.floats(0.0, 1.0)),
        "static_friction": draw(st.floats(0.0, 1.0)),
    }
    return kind, draw(st.floats(0.05, 2.0)), (draw(sane), draw(sane)), kwargs


def add(scene, kind, size, position, kwargs):
    if kind == "circle":
        return scene.add_circle(position, size, **kwargs)
    if kind == "box":
        return scene.add_box(
            position, (size, size) if not isinstance(size, tuple) else size, **kwargs
        )
    vertices = [(0.0, 0.0), (size, 0.0), (0.0, size)] if isinstance(size, float) else size
    return scene.add_polygon(position, vertices, **kwargs)


call = st.one_of(
    st.tuples(st.just("step"), st.one_of(st.floats(1e-3, 0.06), wild)),
    st.tuples(st.just("force"), st.tuples(st.integers(-1, 6), pair, wild)),
    st.tuples(st.just("target"), st.tuples(st.integers(-1, 2), wild)),
    st.tuples(
        st.just("mode"),
        st.tuples(
            st.integers(-1, 2),
            st.sampled_from([None, "position", "velocity", "effort", "bogus"]),
            st.one_of(st.just(None), st.tuples(wild, wild, wild)),
            st.one_of(st.just(None), wild),
        ),
    ),
    st.tuples(st.just("nudge"), st.tuples(st.integers(0, 6), wild)),
    st.tuples(
        st.just("read"),
        st.sampled_from(["contacts", "candidate_pairs", "joint_state", "get_state", "snapshot"]),
    ),
)


@settings(
    max_examples=int(sys.argv[1]),
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
    database=None,
)
@given(
    st.tuples(st.one_of(st.just((0.0, -9.81)), st.just((0.0, -9.81)), pair), st.integers(1, 3)),
    st.lists(st.one_of(valid_body(), valid_body(), body()), min_size=1, max_size=7),
    st.lists(
        st.tuples(
            st.integers(0, 6),
            st.integers(0, 6),
            st.sampled_from(["revolute", "prismatic"]),
            st.one_of(wild, st.floats(-1, 1)),
        ),
        max_size=2,
    ),
    st.lists(call, min_size=1, max_size=8),
)
def hostile(settings_, bodies, joints, calls):
    (gravity, n_worlds) = settings_
    try:
        scene = fx.Scene(gravity=gravity, n_worlds=n_worlds, arch="cpu")
    except CLEAR:
        return
    for spec in bodies:
        try:
            add(scene, *spec)
        except CLEAR:
            pass
    for parent, child, kind, value in joints:
        try:
            if kind == "revolute":
                scene.add_revolute_joint(
                    parent,
                    child,
                    anchor=(value, 0.0),
                    control_mode="velocity",
                    pid=(value, 0.0, 0.0),
                )
            else:
                scene.add_prismatic_joint(parent, child, axis=(1.0, value))
        except CLEAR:
            pass
    for name, args in calls:
        try:
            if name == "step":
                scene.step(args)
                counts["steps"] += 1
            elif name == "force":
                scene.apply_force(args[0], args[1], args[2])
            elif name == "target":
                scene.set_joint_target(args[0], args[1])
            elif name == "mode":
                scene.set_joint_mode(*args)
            elif name == "nudge":
                state = scene.get_state()
                state.position[:, args[0] % max(scene.n_bodies, 1)] += args[1]
                scene.set_state(state)
            else:
                getattr(scene, args)()
        except CLEAR:
            pass
        except RuntimeError as error:
            assert scene.n_bodies == 0 and "no bodies" in str(error), error
    if scene.n_bodies:
        counts["stepped scenes"] += 1
        try:
            scene.step(1 / 60)
        except fx.SimulationError:
            return
        state = scene.get_state()
        assert np.isfinite(state.position).all() and np.isfinite(state.velocity).all()


if __name__ == "__main__":
    hostile()
    print("hostile: ok", counts["stepped scenes"], counts["steps"])
