"""Steps in flight: steps the host launches without waiting for their answers.

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

So does a team's kept step of large worlds (step._find_or_keep_pairs' one launch on the
GPU team, with the broad phase, the colouring, the report and the sleep pass folded in:
fused.kept_step_in_flight). What its host tells it and notes after it depends on the step
before (whether the pairs were kept or found, how many, whether the colouring held or was
made again, whether the reported list was refreshed, its backoff), so the host notes
nothing: each launch takes what it is told from the StepCache the step before it left on
the device (counts.flight_caches; fused._flight_launch, as the host would tell it), and
leaves its own there as the host would note the step (fused._cache_after). The read notes
the last one (settle). A step whose launch did not go all the way (bodies its wake pass
woke, or with StepOptions.wake_in_launch off sleepers found by its refit; pairs that
outgrow the pool, a colouring that overflows or fails, a fault) stops
the flight as above, and the read finishes it from its answer (step.finish_kept_step).
Where steps stop short often (with wake_in_launch off, sleepers stop each step's launch at
its refit), the
flights hold fewer steps and wait longer between them (Flight.budget, adapt).

StepOptions.steps_in_flight says where steps fly: on GPU backends by default, on the CPU
(where a launch returns when it is done, so there is no wait to save) only when asked.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...device import STEPS_IN_FLIGHT, launching
from . import fused, team
from .coloring import colored_in_launch, keeps_colors
from .pairs import store_in_color_order
from .reporting import note_report
from .step import (
    finish_kept_step,
    finish_world_step,
    kept_launch_refit,
    kept_launch_threads,
    note_contactless,
    plan_for,
    world_launch,
)

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
    team: bool = False

    @property
    def kind(self) -> str:
        """What the step is: a small worlds' step, one without contacts, or a team's kept
        step (a flight's steps are of one kind: their answers are read alike)."""
        return "team" if self.team else "contactless" if self.contactless else "worlds"


@dataclass
class Flight:
    """A scene's steps in flight, oldest first (the answer of steps[i] is in slot i); whether
    the scene's last call was a step (`after_step`: only a step called right after another
    flies, so that a caller that reads or edits the scene between its steps, a vector env,
    never compiles nor pays for the flight's kernel); and how many reads in a row found a
    single step in flight (`lone_reads`: a caller that reads after every other step, where
    flying costs a read of the answers more than waiting does). Where steps in flight stop
    short (sleepers stop each step's launch at its refit, wake_in_launch off), the launches
    after the stop ran nothing and are launched again: the steps a flight may hold
    (`budget`) become twice those that went before a stop (at least 2), and double back
    up to STEPS_IN_FLIGHT where none stops; where the first stops, no step flies before
    step `resume_at`, the wait (`hold_span` steps: PROBE_STEPS, then twice as many each
    time, up to STEPS_IN_FLIGHT) growing while it goes on (adapt)."""

    steps: list[FlightStep] = field(default_factory=list)
    after_step: bool = False
    lone_reads: int = 0
    budget: int = STEPS_IN_FLIGHT
    resume_at: int = 0
    hold_span: int = 0


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
    (fused.WorldStep; a team's step: fused.held_raw_answers', None where its launch ran
    nothing), and the steps launched after it (which did nothing)."""

    step: FlightStep
    answer: fused.WorldStep | list[int] | None
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
    kind = _kind(ctx)
    if not flies(ctx, flight, step_count, kind):
        return False
    contactless = kind == "contactless"
    step = FlightStep(
        dt=ctx.dt,
        launch=world_launch(ctx) if kind == "worlds" else None,
        keep=keeps_colors(ctx),
        time=time,
        step_count=step_count,
        cache=dataclasses.replace(ctx.cache),
        settings=settings,
        contactless=contactless,
        team=kind == "team",
    )
    slot = len(flight.steps)
    if step.team:
        # The host notes nothing: the StepCache each step leaves is on the device
        # (counts.flight_caches), and settle notes the last one.
        threads = kept_launch_threads(ctx)
        stage = launching.set_stage("find pairs")  # (as step._find_or_keep_pairs' launch)
        fused.kept_step_in_flight(ctx, threads, kept_launch_refit(ctx), slot, late=slot)
        launching.set_stage(stage)
        team.check(ctx.pool.counts, 0)  # (its timeouts: in its answer, settle reads them)
    elif contactless:
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


def flies(ctx: StepContext, flight: Flight, step_count: int, kind: str | None) -> bool:
    """Whether ctx's planned step (the scene's step_count-th, from 0), of `kind` (_kind),
    may be launched in flight: its scene's steps may (wanted), there is room
    (STEPS_IN_FLIGHT), its caller does not read after every step (LONE_READS), it is of a
    kind that flies, as the flight's steps are, nothing is left to the host after it (no
    applied forces to clear) and nothing was set by hand since the last step."""
    return (
        wanted(ctx)
        and not full(flight)
        and (flight.steps or flight.lone_reads < LONE_READS or step_count % PROBE_STEPS == 0)
        and (flight.steps or step_count >= flight.resume_at)
        and not ctx.plan.profiled
        and kind is not None
        # (A flight's steps are of one kind: their answers are read alike.)
        and (not flight.steps or flight.steps[0].kind == kind)
        and not ctx.cache.forces_on_device
        and ctx.edited.set is None
    )


def _kind(ctx: StepContext) -> str | None:
    """What kind of step in flight ctx's planned step would be (FlightStep.kind), or None
    where it does not fly."""
    if ctx.plan.contactless:
        return "contactless"
    if _world_step_flies(ctx):
        return "worlds"
    if _team_step_flies(ctx):
        return "team"
    return None


def _team_step_flies(ctx: StepContext) -> bool:
    """flies for a step of large worlds: a team's kept step in one launch
    (step.kept_launch_threads) with every stage after it folded in (the broad phase, the
    colouring, the report's refresh and build, the sleep pass: fused.kept_step_in_flight
    takes its arguments as the host does for those), its colouring checked on the device
    (worlds of more than SMALL_COLORING_MAX_BODIES bodies), no state set by hand since the
    last step (the report checks its resting pairs on the host first)."""
    options = ctx.options
    return (
        fused.folds(ctx)
        and fused.finds_in_launch(ctx)
        and options.color_in_launch
        and options.refresh_in_launch
        and options.report_in_launch
        and (options.sleep_in_launch or not ctx.enable_sleep)
        and not ctx.cache.state_set
        # (a team's kept launch: large worlds, colouring checked on the device)
        and kept_launch_threads(ctx) > 0
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
    stopped = _settle_team(ctx, steps) if steps[0].team else _settle_worlds(ctx, steps)
    adapt(flight, steps, stopped)
    return stopped


def full(flight: Flight) -> bool:
    """Whether `flight` holds as many steps as it may (Flight.budget): the next step reads
    them first."""
    return len(flight.steps) >= flight.budget


def adapt(flight: Flight, steps: list[FlightStep], stopped: Stopped | None):
    """After reading the flight `steps` (`stopped`: settle's answer): its budget and wait
    (Flight.budget, resume_at)."""
    if stopped is None:
        flight.budget, flight.hold_span = min(2 * flight.budget, STEPS_IN_FLIGHT), 0
        return
    gained = steps.index(stopped.step)
    flight.budget = max(2, min(2 * gained, STEPS_IN_FLIGHT))
    if gained == 0:
        flight.hold_span = min(2 * flight.hold_span or PROBE_STEPS, STEPS_IN_FLIGHT)
        flight.resume_at = stopped.step.step_count + flight.hold_span


def _settle_worlds(ctx: StepContext, steps: list[FlightStep]) -> Stopped | None:
    """settle for a flight of small worlds' steps, or steps without contacts."""
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


def _settle_team(ctx: StepContext, steps: list[FlightStep]) -> Stopped | None:
    """settle for a flight of team's kept steps: the StepCache the last one left noted
    (fused.held_flight_caches), or that of the step before the one that stopped short."""
    held = fused.held_flight_caches(ctx, len(steps))
    for i, (step, (_, taken)) in enumerate(zip(steps, held, strict=True)):
        if taken != 1:
            if i > 0:
                _note_fields(ctx.cache, held[i - 1][0])
            else:
                _copy_into(ctx.cache, step.cache)
            answer = None if taken == fused.NOT_RUN else fused.held_raw_answers(ctx, i + 1)[i]
            return Stopped(step, answer, steps[i + 1 :])
    _note_fields(ctx.cache, held[-1][0])
    ctx.pool.body_lists_of = ctx.cache  # (the launches built or kept them: build_body_lists)
    return None


def _note_fields(cache: StepCache, fields: dict):
    """The StepCache fields a team's step in flight left (fused.FLIGHT_CACHE_FIELDS) noted
    on `cache`, each of its own type."""
    for name, value in fields.items():
        setattr(cache, name, type(getattr(cache, name))(value))


def finish(ctx: StepContext, step: FlightStep, answer):
    """Finish `step`, a step in flight that stopped short and answered `answer`, as step()
    would have (step.finish_world_step, finish_kept_step); ctx: its scene's, as the step
    found it."""
    if step.team:
        finish_kept_step(ctx, answer)
        return
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
