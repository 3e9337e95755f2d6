"""Steps in flight: small worlds' steps the host launches without waiting for their answers.

A small worlds' step is one launch (fused.step_by_world), whose answer the host reads: how
far it went (its pairs fit the pool, nothing overflowed), its faults, the counts it notes
(pairs, colours, the reported list's length and events). On a GPU that read makes the host
wait for the device every step, so the device idles while the host prepares the next
launch. Where the caller reads nothing between steps (a step called right after another:
Flight.after_step), none of that is needed at once: the next launch can read last step's
pairs and reported list on the device, and a step normally goes all the way. A step in
flight (fused.step_by_world_in_flight) holds its answer on the device; the host notes at
once what it knows a step that went all the way notes (note_launched), and reads the
answers when the caller reads anything of the scene, edits it, applies a force, or
STEPS_IN_FLIGHT steps have flown (settle: one wait for many steps).

Where a step in flight stopped short (its pairs outgrew the pool, a colouring overflowed,
a world faulted, the reported list outgrew the pool: fused.went_as_taken), every launch
after it did nothing (the device's counts.stopped). Reading the answers then finds it:
the scene goes back to the clock and the StepCache of that step's start (with the counts
of the step before), finishes the step as step() would have (step.finish_world_step: the
pool grown and the launch run again, the overflow solved across worlds, the faults
contained, the list built) and takes the steps after it again, waiting for each. The
results are those of steps taken one by one, bit for bit (tests/test_in_flight.py). What
changes is when a step's error is raised: a CapacityError or, with on_fault="raise", a
SimulationError of a step in flight is raised by the call that reads the answers, and the
steps after it were not taken (the clock says where the scene is).

A step without contacts (step.contactless_step) flies as well: its answer is only its
faults (fused.substeps_in_flight), and all else it notes is known before its launch.

StepOptions.steps_in_flight says where steps fly: on GPU backends by default, on the CPU
(where a launch returns when it is done, so there is no wait to save) only when asked.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...device import STEPS_IN_FLIGHT, launching
from . import fused
from .coloring import colored_in_launch, keeps_colors
from .pairs import store_in_color_order
from .reporting import note_report
from .step import finish_world_step, note_contactless, plan_for, world_launch

if TYPE_CHECKING:
    from .context import StepCache, StepContext


@dataclass(frozen=True)
class FlightStep:
    """A step launched in flight: its length (s), the launch it was (fused.WorldLaunch;
    None: a step without contacts, `contactless`), whether its colouring started from last
    step's colours (coloring.keeps_colors), the scene's clock (s, steps) and StepCache as
    the step found them (the counts a step in flight before it left unknown are still those
    of the step before that), and the scene's settings it ran with (Scene._step_settings:
    a step taken again after one stopped short runs with them)."""

    dt: float
    launch: fused.WorldLaunch | None
    keep: bool
    time: float
    step_count: int
    cache: StepCache
    settings: tuple
    contactless: bool = False


@dataclass
class Flight:
    """A scene's steps in flight, oldest first (the answer of steps[i] is in slot i); whether
    the scene's last call was a step (`after_step`: only a step called right after another
    flies, so that a caller that reads or edits the scene between its steps, a vector env,
    never compiles nor pays for the flight's kernel); and how many reads in a row found a
    single step in flight (`lone_reads`: a caller that reads after every other step, where
    flying costs a read of the answers more than waiting does)."""

    steps: list[FlightStep] = field(default_factory=list)
    after_step: bool = False
    lone_reads: int = 0


#: Reads in a row that found one step in flight after which steps launch in flight only
#: each PROBE_STEPS-th step (steps_in_flight): the caller reads after every other step,
#: and a step whose answer is read at once costs a read of the device more in flight (a
#: GPU's ~20-40 us) than waiting for its launch's answer.
LONE_READS = 2
#: See LONE_READS: a loop that stops reading flies again within this many steps.
PROBE_STEPS = 8


@dataclass(frozen=True)
class Stopped:
    """A step in flight that stopped short, as settle found it: the step, its answer
    (fused.WorldStep), and the steps launched after it (which did nothing)."""

    step: FlightStep
    answer: fused.WorldStep
    after: list[FlightStep]


#: The scene whose steps are in flight (at most one: the pool's resident scene), so that
#: a call on another scene reads them before the pool takes that one (settle_resident).
_flying: dict = {"scene": None}


def wanted(ctx: StepContext) -> bool:
    """Whether ctx's scene's steps may fly (StepOptions.steps_in_flight; None: on a GPU
    backend)."""
    option = ctx.options.steps_in_flight
    return (not ctx.cpu) if option is None else option


def launch(ctx: StepContext, flight: Flight, time: float, step_count: int, settings: tuple) -> bool:
    """Launch ctx's step in flight where it may fly (flies); returns whether it did. The
    scene's clock before the step: `time` (s), `step_count`; its `settings` (FlightStep)."""
    plan_for(ctx)
    if not flies(ctx, flight, step_count):
        return False
    contactless = ctx.plan.contactless
    step = FlightStep(
        dt=ctx.dt,
        launch=None if contactless else world_launch(ctx),
        keep=keeps_colors(ctx),
        time=time,
        step_count=step_count,
        cache=dataclasses.replace(ctx.cache),
        settings=settings,
        contactless=contactless,
    )
    slot = len(flight.steps)
    if contactless:
        note_contactless(ctx)  # (first: the launch solves in the colours it notes)
        stage = launching.set_stage("substeps")  # (as step.contactless_step's launch)
        fused.substeps_in_flight(ctx, slot)
        launching.set_stage(stage)
    else:
        stage = launching.set_stage("find pairs")  # (as step._step_by_world's launch)
        # The first step of a flight passes last step's counts, which the host knows.
        fused.step_by_world_in_flight(ctx, step.launch, slot, late=slot)
        launching.set_stage(stage)
        note_launched(ctx, step.keep)
    flight.steps.append(step)
    return True


def flies(ctx: StepContext, flight: Flight, step_count: int) -> bool:
    """Whether ctx's planned step (the scene's step_count-th, from 0) may be launched in
    flight: its scene's steps may (wanted), there is room (STEPS_IN_FLIGHT), its caller
    does not read after every step (LONE_READS), it is a small worlds' step in one launch
    (StepPlan.worlds_launch) that builds its reported list and runs its sleep pass in the
    launch, nothing is left to the host after it (no applied forces to clear, no
    overflow colour last step) and nothing was set by hand since the last step."""
    plan = ctx.plan
    return (
        wanted(ctx)
        and len(flight.steps) < STEPS_IN_FLIGHT
        and (flight.steps or flight.lone_reads < LONE_READS or step_count % PROBE_STEPS == 0)
        and not plan.profiled
        and (plan.contactless or _world_step_flies(ctx))
        # (A flight's steps are of one kind: their answers are read alike.)
        and (not flight.steps or flight.steps[0].contactless == plan.contactless)
        and not ctx.cache.forces_on_device
        and ctx.edited.set is None
    )


def _world_step_flies(ctx: StepContext) -> bool:
    """flies for a step with contacts: a small worlds' step in one launch that builds its
    reported list and runs its sleep pass in the launch, no overflow colour last step."""
    plan = ctx.plan
    return (
        plan.worlds_launch
        # Where no two bodies may pair, whether a step runs without contacts depends on
        # last step's pair count (plan.steps_without_contacts), which a flight leaves
        # unknown.
        and not ctx.contact_free
        and ctx.solves_by_world
        and world_launch(ctx).report
        and (plan.sleep_in_report or not ctx.enable_sleep)
    )


def note_launched(ctx: StepContext, keep: bool):
    """The host's side of a step in flight that goes all the way, all but the counts its
    answer holds (note_counts): as step._step_by_world and the step after it note it."""
    cache = ctx.cache
    cache.pairs_kept = cache.pairs_in_place = False
    cache.pairs_fat = False  # (broad_phase.pairs_fit)
    colored_in_launch(ctx, keep, cache.n_colors, 0)  # (n_colors and colored_pairs: later)
    store_in_color_order(ctx, recolored=True, planned=True)
    ctx.pool.body_lists_of = cache  # (contacts.build_body_lists)
    note_report(cache, cache.n_reported, cache.n_begin_events, cache.n_end_events)  # (flags)
    cache.contacts_current = True


def note_counts(cache: StepCache, answer: fused.WorldStep):
    """The counts of a step in flight that went all the way, from its answer: its pairs
    (broad_phase.pairs_fit), colours (coloring.colored_in_launch) and reported list."""
    cache.n_pairs = cache.colored_pairs = answer.pairs
    cache.lost_bodies = answer.lost
    cache.n_colors = answer.used
    note_report(cache, *answer.listed)


def settle(ctx: StepContext, flight: Flight) -> Stopped | None:
    """Read the answers of ctx's scene's steps in flight (one wait) and empty the flight.
    Where all went all the way, the last one's counts are noted; returns None. Else the
    scene's StepCache goes back to the stopped step's start (the counts of the step before
    it noted) and its Stopped is returned: the caller finishes that step and takes the
    ones after it again."""
    steps, flight.steps = flight.steps, []
    if _flying["scene"] is not None:
        _flying["scene"] = None
    if not steps:
        return None
    flight.lone_reads = flight.lone_reads + 1 if len(steps) == 1 else 0
    answers = fused.held_answers(ctx, len(steps))
    capacity, contacts = ctx.pool.pair_capacity, not steps[0].contactless
    for i, (step, answer) in enumerate(zip(steps, answers, strict=True)):
        if not fused.went_as_taken(answer, capacity, contacts):
            _copy_into(ctx.cache, step.cache)
            if i > 0 and contacts:
                note_counts(ctx.cache, answers[i - 1])
            return Stopped(step, answer, steps[i + 1 :])
    if contacts:  # (a step without contacts noted all it does)
        note_counts(ctx.cache, answers[-1])
    return None


def finish(ctx: StepContext, step: FlightStep, answer: fused.WorldStep):
    """Finish `step`, a step in flight that stopped short and answered `answer`, as step()
    would have (step.finish_world_step); ctx: its scene's, as the step found it."""
    plan_for(ctx)
    if step.contactless:  # it went all the way, and faulted
        note_contactless(ctx)
        ctx.faults_found, ctx.barrier_timeouts = answer.faults, answer.timeouts
        return
    finish_world_step(ctx, step.launch, step.keep, answer)


def _copy_into(cache: StepCache, other: StepCache):
    for name in dataclasses.fields(cache):
        setattr(cache, name.name, getattr(other, name.name))


def note_flying(scene):
    """`scene` has steps in flight now (settle_resident reads them first)."""
    _flying["scene"] = weakref.ref(scene)


def settle_resident(scene):
    """Before a call on `scene` uses the device: the steps in flight of the scene that has
    some, read (its settle) if it is another scene (the pool is about to take `scene`)."""
    ref = _flying["scene"]
    other = ref() if ref is not None else None
    if other is not None and other is not scene:
        other._settle()
