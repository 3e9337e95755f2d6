"""Where a step's time goes: StepProfile, milliseconds per stage (Box2D's b2Profile).

A profiled step (Scene.profile) runs the same stages in the same order with the same results
bit for bit, but each stage as launches of its own with the device synchronised before and
after, so each stage's wall time is its own. The step's executor changes with it: scenes
whose substeps run in one launch (small worlds, one per thread; a CPU team) are profiled
with a launch per stage, and their stage times add up to more than their normal step's
time (StepProfile.total_ms is the profiled steps' own time, `step_ms` the time of the same
number of normal steps, both measured by Scene.profile).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import taichi as ti

from ...device import launching


@dataclass
class StepProfile:
    """Milliseconds per step spent in each stage, averaged over `steps` profiled steps.

    Attributes:
        stages: {stage name: ms per step}, in the order the stages first ran: the step's
            own stages ("find pairs", "colour", "report", ...) and the substep's
            (solver/stages.py: "motors", "narrow phase", "position pass", ..., summed over
            the step's substeps).
        steps: how many steps were profiled.
        total_ms: wall time of a profiled step, ms (its stages' sum plus Python between
            them).
        step_ms: wall time of a normal (unprofiled) step of the same scene, ms, measured
            over as many steps right after; None if not measured.
    """

    stages: dict[str, float] = field(default_factory=dict)
    steps: int = 0
    total_ms: float = 0.0
    step_ms: float | None = None

    def table(self) -> str:
        """The profile as aligned text: a line per stage (ms per step, share of the
        profiled step), then the totals."""
        width = max([len(name) for name in self.stages] + [20])
        lines = [f"{'stage':{width}s}  ms/step   share"]
        for name, ms in self.stages.items():
            share = ms / self.total_ms if self.total_ms > 0.0 else 0.0
            lines.append(f"{name:{width}s}  {ms:7.3f}  {share:6.1%}")
        lines.append(f"{'profiled step':{width}s}  {self.total_ms:7.3f}")
        if self.step_ms is not None:
            lines.append(f"{'normal step':{width}s}  {self.step_ms:7.3f}")
        return "\n".join(lines)


class _Silent:
    """The profile of an unprofiled step: times nothing; names the stage whose launches the
    launch counter counts (launching.set_stage), a method call and a list's push and pop."""

    records = False

    def __init__(self):
        self._name = None
        self._outer: list = []

    def stage(self, name):
        self._name = name
        return self

    def __enter__(self):
        name = self._name
        self._outer.append(_UNNAMED if name is None else launching.set_stage(name))
        return self

    def __exit__(self, *exc):
        outer = self._outer.pop()
        if outer is not _UNNAMED:
            launching.set_stage(outer)
        return False


#: A block that names no stage of its own: its launches count under the enclosing one.
_UNNAMED = object()


#: What step() records into when nobody asked for a profile.
NO_PROFILE = _Silent()


class StageTimer:
    """Records a profiled step's stages: `with timer.stage(name): ...` syncs the device,
    times the block and adds it to `name` (None: a block that is not a stage of its own,
    not timed). Stages nested in a timed one are timed on their own and subtracted from it
    (begin_step inside "find pairs" counts once)."""

    records = True

    def __init__(self):
        self.seconds: dict[str, float] = {}
        # [name, start, seconds of nested stages, the launch counter's stage before]
        self._open: list[list] = []

    def stage(self, name: str | None):
        self._name = name
        return self

    def __enter__(self):
        name = self._name
        if name is not None:
            self.seconds.setdefault(name, 0.0)  # listed in the order the stages begin
            ti.sync()
            self._open.append([name, time.perf_counter(), 0.0, launching.set_stage(name)])
        else:
            self._open.append(None)
        return self

    def __exit__(self, *exc):
        entry = self._open.pop()
        if entry is not None:
            ti.sync()
            name, start, nested, enclosing_stage = entry
            launching.set_stage(enclosing_stage)
            elapsed = time.perf_counter() - start
            self.seconds[name] = self.seconds.get(name, 0.0) + elapsed - nested
            for outer in reversed(self._open):
                if outer is not None:
                    outer[2] += elapsed
                    break
        return False

    def profile(self, steps: int, total_s: float) -> StepProfile:
        """The StepProfile of `steps` profiled steps that took total_s seconds."""
        per_step = 1e3 / max(steps, 1)
        return StepProfile(
            {name: s * per_step for name, s in self.seconds.items()}, steps, total_s * per_step
        )
