"""An opt-in pytest plugin that finds tests whose leftovers change a later scene's results.

Scenes share one device pool per process (device/residency.py), and the engine keeps a
little state between steps outside a scene (the team's probe and duel, the step counters).
A kernel that reads a slot it did not write this step sees what an earlier scene left
there, and the result then depends on which tests ran before in the same pytest-xdist
worker: a failure that shows once in several runs of the README's command. Two such bugs
were found with this plugin (CHANGELOG: the overflow colour's Jacobi entries, the small
worlds' step counters).

After every test it steps canary scenes that such leftovers have reached (a hub whose
circles overflow the colours, stepped in flight and one by one, as the GPU path steps it;
a box landing and falling asleep; a batch of motor-driven chains with contact events) and
compares them bit for bit with the same scenes stepped when the session began. Each test
after which a canary differs is written to $FX2D_HISTORY_LOG (default: history_probe.log
in the working folder) and listed at the end. Usage (~0.1 s a test):

    python -m pytest -p tests.history_probe -n 2 --dist loadfile

Replay what it names in one process (`pytest -p no:xdist <that test> <the failing test>`)
to reproduce the failure, then look for the field it reads (fill a pool group with zeros
after the earlier test: the group whose zeros make the failure go away holds it).
"""

import os

import numpy as np
import pytest

import fx2d_gpu as fx
from fx2d_gpu.device import runtime

from .helpers import COLORED_LIKE_GENERAL, DT

_LOG = os.environ.get("FX2D_HISTORY_LOG", "history_probe.log")
_reference: dict[str, list[np.ndarray]] = {}
_found: list[str] = []


def _hub(options: dict) -> list[np.ndarray]:
    """36 circles thrown at a hub, coloured as the general path colours: from ~step 20
    more of them touch the hub than there are colours (the overflow colour's Jacobi
    passes); 24 steps with `options`; the final state."""
    scene = fx.Scene(gravity=(0.0, 0.0), step_options={**COLORED_LIKE_GENERAL, **options})
    scene.add_circle((0.0, 0.0), 1.0)
    for angle in np.linspace(0.0, 2.0 * np.pi, 36, endpoint=False):
        direction = np.array([np.cos(angle), np.sin(angle)])
        scene.add_circle(1.4 * direction, 0.08, velocity=-direction)
    for _ in range(24):
        scene.step(DT)
    state = scene.get_state()
    return [state.position, state.angle, state.velocity, state.angular_velocity]


def _landing() -> list[np.ndarray]:
    """A box dropped onto the ground, stepped 120 steps (it sleeps at ~45): its state and
    sleep flags (a small world: one launch a step)."""
    scene = fx.Scene()
    scene.add_box((6.0, 1.0), (8.0, 0.5), mass=0.0)
    scene.add_box((6.0, 1.75), (0.5, 0.5))
    for _ in range(120):
        scene.step(DT)
    state = scene.get_state()
    return [state.position, state.velocity, state.sleeping]


def _motor_chain() -> list[np.ndarray]:
    """Four worlds of a five-box chain hung from a static post, its first hinge driven by a
    position motor to a per-world target, swinging onto the ground, 60 steps (one by one:
    each step's events are read, which would settle steps in flight anyway; the hub
    canaries fly): joints, contacts and contact events of small worlds stepped as a batch
    (the state, and every step's begin and end events as (step, 0 begin / 1 end, world,
    body_a, body_b))."""
    scene = fx.Scene(n_worlds=4)
    scene.add_box((0.0, -0.25), (8.0, 0.5), mass=0.0)
    previous = scene.add_box((0.0, 1.8), (0.2, 0.2), mass=0.0)
    for i in range(5):
        link = scene.add_box((0.3 + 0.5 * i, 1.8), (0.45, 0.15))
        scene.add_revolute_joint(
            previous,
            link,
            anchor=(0.0, 0.0) if i == 0 else (0.25, 0.0),
            control_mode="position" if i == 0 else None,
            pid=(40.0, 0.0, 4.0),
            max_effort=60.0,
        )
        previous = link
    scene.set_joint_target(0, np.array([-1.2, -0.6, 0.0, 0.6]))
    events = []
    for step in range(60):
        scene.step(DT)
        happened = scene.contact_events()
        for kind, pairs in enumerate((happened.begin, happened.end)):
            rows = np.stack([pairs.world, pairs.body_a, pairs.body_b], axis=1)
            events.append(np.column_stack([np.full((len(rows), 2), (step, kind)), rows]))
    state = scene.get_state()
    return [state.position, state.angle, state.velocity, np.concatenate(events)]


#: In this order: each canary's reference is stepped before the canaries after it, so a
#: canary that leaves state another one reads (the hubs' team launches left the sleep
#: pass's note that the landing box's launch read) shows at the first test.
_CANARIES = {
    "landing box": _landing,
    "motor chain": _motor_chain,
    "hub in flight": lambda: _hub({"fold_on_cpu": True, "steps_in_flight": True}),
    "hub one by one": lambda: _hub({"fold_on_cpu": True, "steps_in_flight": False}),
}


def _differing() -> list[str]:
    """The canaries whose results differ from the session's first."""
    differing = []
    for name, run in _CANARIES.items():
        seen = run()
        expected = _reference.setdefault(name, seen)
        if any(not np.array_equal(a, b) for a, b in zip(seen, expected, strict=True)):
            differing.append(name)
    return differing


def pytest_sessionstart(session):
    if runtime.on_cpu():
        _differing()  # the reference: the canaries stepped before any test


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if not runtime.on_cpu() or not _reference:
        return
    differing = _differing()
    if differing:
        line = f"{item.nodeid}: {', '.join(differing)}"
        _found.append(line)
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(_LOG, "a") as log:
            log.write(f"{worker}\t{line}\n")


def pytest_terminal_summary(terminalreporter):
    if _found:
        terminalreporter.section("history probe: canaries that differed after these tests")
        for line in _found:
            terminalreporter.write_line(line)
