"""One step of the XPBD pipeline (seed 003): the step's stages, in order.

step() reads as the pipeline (Box2D v3's solver stage list, made batched), after the
plan's first stage, which Scene runs before it:

    upload          (Scene._advance)               the forces applied since the last step
                                                   sent to the device (and the scene's
                                                   state, where another scene held the pool)
    find pairs      find_pairs                     last step's manifolds kept aside
                                                   (pairs.save_previous_pairs; small
                                                   worlds: in the broad phase's launch),
                                                   the broad phase over AABBs grown by the
                                                   step's motion (large worlds: fat boxes,
                                                   and last step's pairs if none moved),
                                                   woken islands paired (small worlds:
                                                   woken in the broad phase's launch),
                                                   impulses and colours carried to the new
                                                   pairs (small worlds: in the colouring's
                                                   launch)
    begin step      begin_step                     (worlds of more than 40 bodies) the
                                                   first substep's motors and velocities,
                                                   the step's narrow phase: which pairs
                                                   the solver must see
    colour          coloring.color_constraints     those pairs and the joints, or keep
                                                   last step's colouring
    order           pairs.store_in_color_order     a colour's pairs in consecutive memory
                                                   (small worlds: each world's solve
                                                   order, its pairs left in place, planned
                                                   in the colouring's launch)
    (on a GPU, or a CPU with StepOptions.fold_on_cpu, a small worlds' step is one launch,
    fused.step_by_world: the broad phase, the colouring, the substeps, the report and the
    sleep as loops of the substeps' kernel, each going on where the one before allows;
    _step_by_world notes what it did, and finishes the step where it stopped.)
    (a step of worlds over 40 bodies that keeps last step's pairs, still stored in colour
    order, skips the broad phase, the carry and the order: _keep_pairs runs begin step and
    checks the colouring where the pairs lie. On a CPU team such a step is one launch
    where it can be, fused.kept_step_by_team: the fat boxes' refit, begin step, the
    colouring's check, the substeps and the report's refresh, each going on only where
    the one before allows; each launch saved is a wake of the CPU thread pool)
    body lists      contacts.build_body_lists      for warm starting in a fixed order
    substeps        solver/stages.py's SUBSTEP_STAGES, ctx.substeps times: motors,
                    integrate velocities, narrow phase, integrate positions, position
                    pass, continuous, derive velocities, velocity pass. Small worlds: all
                    substeps in one launch, a world per thread; other scenes on a CPU
                    backend: one launch on a team of CPU threads meeting at barriers
                    (solver/fused.py); GPU backends: a launch per stage group
                    (solver/staged.py). The same results bit for bit.
    report          reporting.report_contacts      touching pairs and begin/end events
    sleep           sleep.update_sleep             timers, islands, sleep or wake whole
                                                   (small worlds: a world per thread, in
                                                   the report's launch)
    clear forces    integrate.clear_forces

Every stage is a launcher taking the StepContext (solver/context.py); kernels are private.
The step's plan (solver/plan.py: StepPlan, chosen at the step's start from the scene's
StepOptions, its layout and the backend) says which executor runs the substeps, the CPU
team's threads and which stages fold into another's launch; this module walks it. A
profiled step (solver/profile.py) times each of the plan's stages, and each substep
stage; the launch counter (launching.stage_launches) counts each stage's launches.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from ..collision.broad_phase import pairs_fit
from ..integrate import clear_forces
from . import fused, staged, team
from .coloring import (
    color_constraints,
    colored_in_launch,
    coloring_holds_in_order,
    colors_by_world,
    keeps_colors,
    may_reuse_coloring,
    verdict_holds,
)
from .contacts import (
    FAST_MARGIN_SUBSTEPS,
    SPECULATIVE_DISTANCE,
    body_lists_current,
    build_body_lists,
)
from .pairs import (
    carry_contacts,
    count_kept_pairs,
    find_step_pairs,
    keeps_pairs,
    refit_step_boxes,
    restore_broad_order,
    save_previous_pairs,
    store_in_color_order,
)
from .plan import Executor, current_plan, plan_step, steps_without_contacts
from .profile import NO_PROFILE
from .rejoined_joints import close_rejoined_joints
from .reporting import note_empty_report, report_contacts
from .sleep import find_pairs_waking_by_world, update_sleep, wake_islands

if TYPE_CHECKING:
    from .context import StepContext


def step(ctx: StepContext, profile=NO_PROFILE):
    """Advance every world of ctx's scene by ctx.dt (s) in ctx.substeps substeps, as the
    step's plan says (solver/plan.py; on a CPU team of threads or with a launch per stage,
    as the team's duel chooses: team.duel). `profile`: a profile.StageTimer to time each
    stage into (the substeps then run a launch per stage)."""
    # Joints of bodies put back (set_enabled) go back in place first (XPBD would turn the
    # gap into velocity).
    close_rejoined_joints(ctx)
    with team.duel(ctx):
        plan_for(ctx, profiled=bool(profile.records))
        _step(ctx, profile)


def plan_for(ctx: StepContext, profiled: bool = False):
    """ctx.plan: the plan of ctx's step (solver/plan.py), `profiled` or not."""
    # (A step without contacts runs no team: its barriers are not probed.)
    no_team = profiled or steps_without_contacts(ctx)
    ctx.plan = plan_step(ctx, profiled, 0 if no_team else team.threads_for(ctx))


def _step(ctx: StepContext, profile):
    plan = ctx.plan
    if plan.contactless:
        contactless_step(ctx, profile)
        return
    with profile.stage("find pairs"):
        recolored, solved = _find_or_keep_pairs(ctx, profile)
    _after_pairs(ctx, profile, recolored, solved)


def _after_pairs(ctx: StepContext, profile, recolored: bool, solved: bool):
    """The step after its pairs were found or kept (`recolored`: it coloured them; `solved`:
    a launch ran the substeps too): the per-body lists, the substeps, the report, the sleep
    pass and the forces cleared."""
    plan = ctx.plan
    # Kept where they lie with their colouring: last step's per-body lists and reported
    # list still match them (build_body_lists, reporting.refresh_report).
    ctx.cache.pairs_in_place = ctx.cache.pairs_kept and not recolored
    with profile.stage("body lists"):
        build_body_lists(ctx, built=solved)  # a launch that ran the substeps built them
    executor = plan.substep_executor(ctx.solves_by_world)
    with profile.stage(None if solved or plan.profiled else "substeps"):
        if solved:
            pass  # a team's launch ran them (fused.kept_step_by_team, found_step_by_team)
        elif executor is Executor.BY_WORLD:
            fused.substeps_by_world(ctx)
        elif executor is Executor.TEAM:
            fused.substeps_by_team(ctx, plan.team_threads)
        else:
            for substep in range(substeps_to_run(ctx)):
                staged.substep(ctx, substep, profile)
    # Reads the device only if a team of several threads ran, and its launch did not.
    team.check(ctx.pool.counts, ctx.barrier_timeouts)
    with profile.stage("report"):
        # Small worlds' sleep may run in the report's launch (a profiled step times it
        # alone).
        slept = report_contacts(ctx, sleep=ctx.enable_sleep and plan.sleep_in_report)
    if ctx.enable_sleep and not slept and not ctx.slept_in_launch:
        with profile.stage("sleep"):
            update_sleep(ctx, by_world=ctx.solves_by_world)
    with profile.stage("clear forces"):
        clear_forces(ctx)
    ctx.cache.contacts_current = True


def substeps_to_run(ctx: StepContext) -> int:
    """The substeps a step launching a stage at a time runs: ctx.substeps, or 1 in a still
    step (stages.STILL: no pair, no joint slot, and no body that moves, as the host's refit
    counted them: StepContext.still_bodies), whose later substeps would change nothing (a
    team's launch finds the same on the device: fused._nothing_moves)."""
    if ctx.still_bodies and ctx.cache.n_pairs == 0 and ctx.n_joints == 0:
        return 1
    return ctx.substeps


def contactless_step(ctx: StepContext, profile=NO_PROFILE):
    """A step of small worlds in which no two bodies may pair and none did last step, sleep
    off (StepPlan.contactless): the substeps without the contact stages, a world per thread
    (fused.substeps_by_world(contacts=False): each world's joints in colour 0, in order),
    then the forces cleared, in one launch. Nothing pairs, so the full step's
    broad phase, colouring and report would find, colour and list nothing: the host notes
    what they would have (no pairs, one colour where there are joints, an empty report)."""
    note_contactless(ctx)  # (first: the launch solves in the colours it notes)
    with profile.stage("substeps"):
        fused.substeps_by_world(ctx, contacts=False)


def note_contactless(ctx: StepContext):
    """The host's side of a step without contacts (contactless_step): no pairs, one colour
    where there are joints, an empty report."""
    cache = ctx.cache
    cache.n_colors, cache.n_overflow = int(ctx.n_joints > 0), 0
    cache.coloring_valid = False  # the pool's colours were not written: the next colours afresh
    note_empty_report(cache)
    cache.contacts_current = True


def pair_window(ctx: StepContext) -> float:
    """How far ahead (s) the broad phase looks for pairs: the step, and as far beyond it as
    the fast pairs' speculative margin looks past one substep (contacts.FAST_MARGIN_SUBSTEPS),
    so that a body which will reach something early in the next step is paired in this
    one's last substeps."""
    return ctx.dt + (FAST_MARGIN_SUBSTEPS - 1.0) * ctx.h


def find_pairs(ctx: StepContext, refit=None, profile=NO_PROFILE, woken: bool = False) -> bool:
    """The step's pairs, matched to last step's, coloured and stored in colour order (the
    stages from "find pairs" to "order"; refit: pairs.refit_step_boxes's answer, None to
    ask it); returns whether it coloured. `woken`: sleep.wake_islands(kept=True) woke
    bodies on last step's pairs, which the broad phase would have found again: what
    follows a broad phase and a wake is left (the broad phase again, to pair the woken
    bodies). The stage tests run it before a substep's stages."""
    return _find_pairs(ctx, refit, profile, woken, solve=False)[0]


def _find_pairs(
    ctx: StepContext, refit, profile, woken: bool, solve: bool, saved: bool = False
) -> tuple[bool, bool]:
    """find_pairs; with `solve`, where a team may run them (_found_launch_team), the stages
    after the broad phase through the substeps in one launch (_found_step); `saved`: the
    kept step's launch saved last step's pairs (fused.saves_in_launch). Returns (whether it
    coloured, whether the substeps ran)."""
    if refit is None:
        refit = refit_step_boxes(ctx, SPECULATIVE_DISTANCE, pair_window(ctx))
    plan = current_plan(ctx)
    save_in_launch = plan.save_in_broad_phase and not woken
    if not (save_in_launch or saved):
        save_previous_pairs(ctx)
    if woken:
        # Their sleep changed their pairing keys: the boxes are refitted again.
        find_step_pairs(ctx, SPECULATIVE_DISTANCE, pair_window(ctx))
    elif ctx.small_worlds:
        # One launch finds the pairs and wakes the islands they push, between its halves
        # (first saving last step's pairs).
        find_step_pairs(
            ctx,
            SPECULATIVE_DISTANCE,
            pair_window(ctx),
            refit,
            by_world=(_saving_first_launch() if save_in_launch else find_pairs_waking_by_world),
        )
    else:
        _pair_woken(ctx, find_step_pairs(ctx, SPECULATIVE_DISTANCE, pair_window(ctx), refit))
    return _paired(ctx, profile, solve)


def _paired(ctx: StepContext, profile, solve: bool) -> tuple[bool, bool]:
    """find_pairs after the broad phase (and the islands it woke, paired): last step's
    contacts carried, begin_step, the colouring and the move to its order; with `solve`,
    where a team may run them, those and the substeps in one launch (_found_step). Returns
    (whether it coloured, whether the substeps ran)."""
    plan = current_plan(ctx)
    # Worlds coloured one per thread carry their contacts and plan their solve order in
    # the colouring's launch.
    by_world = plan.carry_in_coloring and colors_by_world(ctx)
    threads = _found_launch_team(ctx, by_world) if solve else 0
    if not by_world and not threads:  # (the found step's launch carries them first)
        carry_contacts(ctx)
    if threads:
        return _found_step(ctx, profile, threads)
    if not ctx.small_coloring:
        begin_step(ctx, profile)
    with profile.stage("colour"):
        recolored = color_constraints(ctx, carry=by_world)
    with profile.stage("order"):
        store_in_color_order(ctx, recolored, planned=by_world)
    return recolored, False


def _found_launch_team(ctx: StepContext, by_world: bool) -> int:
    """The team's threads where the stages after a broad phase run in one launch
    (fused.found_step_by_team), else 0: a team runs the step (StepPlan.team_threads), its
    worlds are large (begin_step runs before the colouring: not ctx.small_coloring, not
    coloured a world per thread), StepOptions.found_in_one_launch (compiled in:
    fused.folds), and last step's
    colouring may be reused (may_reuse_coloring: the launch checks whether it holds) or the
    launch colours the constraints itself (fused.colors_in_launch)."""
    if (
        by_world
        or ctx.small_coloring
        or not ctx.options.found_in_one_launch
        or not fused.folds(ctx)
        or not (may_reuse_coloring(ctx) or fused.colors_in_launch(ctx))
    ):
        return 0
    return current_plan(ctx).team_threads


def _found_step(ctx: StepContext, profile, threads: int) -> tuple[bool, bool]:
    """The carry, begin_step, the colouring's check and, where it holds, the move to colour
    order, the per-body lists and the substeps, in one team launch
    (fused.found_step_by_team; where it does not hold, or may not be reused, the launch may
    colour the constraints itself and go on: fused.colors_in_launch); then the host's side
    of keeping the colouring or of the launch's colouring, or a new colouring and the move
    to its order (the substeps still to run). Returns (whether it coloured, whether the
    substeps ran)."""
    return _after_found_launch(ctx, profile, *fused.found_step_by_team(ctx, threads))


def _after_found_launch(
    ctx: StepContext, profile, code: int, colored: fused.LaunchColoring | None
) -> tuple[bool, bool]:
    """The host's side of a found step's launch (fused.found_step_by_team, or a kept step's
    launch that found the pairs and went on as it does) whose check answered `code`: the
    colouring kept and the pairs' move to its order noted where it held; where the launch
    coloured the constraints itself (`colored`), the host's side of that colouring
    (coloring.colored_in_launch: where it overflowed, the overflow's order and Jacobi
    lists) and, where the launch stopped after its colour lists, the move to colour order
    (the substeps still to run); else a new colouring and the move to its order (the
    substeps still to run). Returns (whether it coloured, whether the substeps ran)."""
    held = verdict_holds(ctx, code)
    if colored is not None:
        colored_in_launch(ctx, colored.keep, colored.used, colored.overflow)
        store_in_color_order(ctx, recolored=True, moved=colored.went_on)
        return True, colored.went_on
    if held:
        color_constraints(ctx, holds=True)
        store_in_color_order(ctx, recolored=False, moved=True)
        return False, True
    with profile.stage("colour"):
        color_constraints(ctx, holds=False)
    with profile.stage("order"):
        store_in_color_order(ctx, recolored=True)
    return True, False


def _saving_first_launch():
    """sleep.find_pairs_waking_by_world as broad_phase.find_candidate_pairs calls it, its
    first launch saving last step's pairs (pairs.save_previous_pairs); a launch again after
    the pool grew (copied as it was) must not save them: the first one began to overwrite
    them."""
    launches = 0

    def launch(ctx: StepContext, groups, margin: float, motion_time: float, fat: bool):
        nonlocal launches
        launches += 1
        return find_pairs_waking_by_world(ctx, groups, margin, motion_time, fat, save=launches == 1)

    return launch


def _find_or_keep_pairs(ctx: StepContext, profile) -> tuple[bool, bool]:
    """The fat boxes refitted, then the step's pairs kept (_keep_pairs) or found
    (find_pairs). Where a step may keep its pairs in one launch (_kept_launch_team), that
    launch starts with the refit and goes on where the pairs are kept and nothing sleeps
    (fused.kept_step_by_team). Returns (whether it coloured, whether the substeps ran)."""
    if current_plan(ctx).worlds_launch:
        return _step_by_world(ctx)
    threads = _kept_launch_team(ctx)
    if threads:
        answer = fused.kept_step_by_team(ctx, threads, kept_launch_refit(ctx))
        return _after_kept_launch(ctx, profile, *answer)
    refit = refit_step_boxes(ctx, SPECULATIVE_DISTANCE, pair_window(ctx))
    return _after_refit(ctx, profile, refit, saved=False)


def kept_launch_refit(ctx: StepContext) -> tuple[float, float]:
    """The refit a kept step's team launch starts with (fused.kept_step_by_team's `refit`):
    the broad phase's margin (m) and window (s, pair_window)."""
    return SPECULATIVE_DISTANCE, pair_window(ctx)


def _after_kept_launch(
    ctx: StepContext, profile, code: int, refit, paired, colored, wake: int
) -> tuple[bool, bool]:
    """_find_or_keep_pairs after a kept step's team launch (fused.kept_step_by_team) answered
    (code, refit, paired, colored, wake): where it went on, the host's side of what it did;
    else the step goes on from its refit (and the wake pass the launch ran, if it ran one).
    Returns (whether it coloured, whether the substeps ran)."""
    if fused.kept_in_launch(refit, wake):
        # It went on: the pairs are kept, nothing sleeps or nothing woke.
        count_kept_pairs(ctx)
        return _after_check(ctx, profile, verdict_holds(ctx, code), solved=True)
    if paired is not None:  # it found the pairs itself
        return _found_in_launch(ctx, profile, refit, code, paired, colored, wake)
    saved = fused.saves_in_launch(ctx, refit)
    return _after_refit(ctx, profile, refit, saved=saved, wake=wake)


def finish_kept_step(ctx: StepContext, answer: list[int] | None):
    """A team's kept step in flight (solver/in_flight.py) that did not go as taken, finished
    as step() would have finished it after its launch answered `answer`
    (fused.held_raw_answers); None: the launch ran nothing (its step no longer took the
    kept launch), so the whole step is taken here. ctx: its scene's, as the step found
    it."""
    if answer is None:
        step(ctx)
        return
    with team.duel(ctx):
        plan_for(ctx)
        refit = kept_launch_refit(ctx)
        outcome = fused.kept_answer(ctx, answer, ctx.plan.team_threads, refit)
        _after_pairs(ctx, NO_PROFILE, *_after_kept_launch(ctx, NO_PROFILE, *outcome))


def kept_launch_threads(ctx: StepContext) -> int:
    """The team's threads where ctx's step (its plan made: plan_for) takes the kept step's
    one launch (_kept_launch_team), else 0."""
    return 0 if ctx.plan.worlds_launch else _kept_launch_team(ctx)


def _after_refit(
    ctx: StepContext, profile, refit, saved: bool, wake: int = fused.WAKE_NONE
) -> tuple[bool, bool]:
    """_find_or_keep_pairs after the fat boxes' refit answered `refit` (`saved`: a kept
    step's launch saved last step's pairs; `wake`: how the wake pass in that launch went,
    fused.WAKE_*): the pairs kept (_keep_pairs), or found."""
    keep, woken = _keeps_ordered_pairs(ctx, refit), False
    if keep and refit[1] != 0:
        # Where something sleeps, a force or a joint may wake it (the pairs cannot:
        # keeps_pairs leaves no awake body that moves in a world with a sleeper).
        woken = _woke(ctx, wake, kept=True)
    if keep and not woken:
        return _keep_pairs(ctx, profile)
    return _find_pairs(ctx, refit, profile, woken, solve=True, saved=saved)


def _step_by_world(ctx: StepContext) -> tuple[bool, bool]:
    """A small worlds' step in one launch (StepPlan.worlds_launch, fused.step_by_world): last
    step's pairs saved, the broad phase and its wakes, the colouring with the carry, the
    substeps, the faults, the report and the sleep pass, each where the one before allows;
    then the host's side of each, as their own launches' answers are noted. Where its pairs
    did not fit the pool, the pool grows and the launch runs again, without saving last
    step's pairs (the first launch began to overwrite them: _saving_first_launch); where
    the colouring overflowed, the step goes on as find_pairs leaves it (solved across
    worlds); where the report did not fit the pool, or was not asked (after set_state, it
    checks the resting pairs first), report_contacts builds it. Returns (whether it
    coloured: always, whether the substeps ran)."""
    launch, keep = world_launch(ctx), keeps_colors(ctx)
    ctx.cache.pairs_kept = False  # (find_step_pairs)
    return _after_world_launch(ctx, launch, keep, fused.step_by_world(ctx, launch))


def world_launch(ctx: StepContext) -> fused.WorldLaunch:
    """What ctx's small worlds' step in one launch is told (fused.WorldLaunch)."""
    # (A report after a state written with a sleeper checks the resting pairs first,
    # launching reporting._recheck_resting: not in the launch.)
    report = ctx.options.report_by_world and ctx.n_bodies >= 3 and not ctx.cache.resting_recheck
    sleep = ctx.enable_sleep and current_plan(ctx).sleep_in_report
    return fused.WorldLaunch(
        margin=SPECULATIVE_DISTANCE,
        motion_time=pair_window(ctx),
        save=True,
        report=report,
        sleep=sleep,
        # (after the last stage that reads them: the sleep pass, in the launch or none)
        clears_forces=ctx.cache.forces_on_device and report and (sleep or not ctx.enable_sleep),
    )


def finish_world_step(ctx: StepContext, launch: fused.WorldLaunch, keep: bool, done):
    """The rest of a small worlds' step whose one launch (told `launch`, colouring from
    last step's colours where `keep`) answered `done` (fused.WorldStep) and was not noted:
    a step in flight that stopped short (solver/in_flight.py), finished as step() would
    have finished it."""
    ctx.cache.pairs_kept = False
    _after_pairs(ctx, NO_PROFILE, *_after_world_launch(ctx, launch, keep, done))


def _after_world_launch(
    ctx: StepContext, launch: fused.WorldLaunch, keep: bool, done
) -> tuple[bool, bool]:
    """_step_by_world after its launch answered `done`: where the pairs did not fit, the
    pool grows and the launch runs again without saving last step's pairs; then the host's
    side of what it did."""
    while not pairs_fit(ctx, 0, done.pairs, done.lost, fat=False):
        launch = dataclasses.replace(launch, save=False)
        done = fused.step_by_world(ctx, launch)
    assert done.progress != fused.FIND_STOPPED, done
    colored_in_launch(ctx, keep, done.used, done.overflow)
    store_in_color_order(ctx, recolored=True, planned=True)
    if done.progress != fused.FIND_WENT_ON:
        return True, False  # it overflowed: the substeps are solved across worlds
    ctx.faults_found, ctx.barrier_timeouts = done.faults, done.timeouts
    if launch.report and done.listed[0] <= ctx.pool.pair_capacity:
        ctx.report_built = done.listed
        ctx.slept_in_launch = launch.sleep
        if launch.clears_forces:
            ctx.cache.forces_on_device = False  # (cleared after the sleep pass)
    return True, True


def _found_in_launch(
    ctx: StepContext, profile, refit, code: int, paired, colored, wake: int
) -> tuple[bool, bool]:
    """The rest of a step whose kept launch (fused.kept_step_by_team) found the pairs itself,
    as `paired` says (fused.Paired): where they did not fit the pool, the pool grows and the
    broad phase runs again (last step's pairs were saved); else the broad phase's answer is
    noted and the step goes on after its launch went as far as it went (as found_step_by_team
    where it went on, `colored` its colouring if it made one; else after the broad phase
    and the wake it brings, `wake` saying how the launch's went, fused.WAKE_*, as find_pairs
    goes). Returns (whether it coloured, whether the substeps ran)."""
    ctx.cache.pairs_kept = False  # (find_step_pairs)
    if not pairs_fit(ctx, paired.entries, paired.pairs, paired.lost):
        return _find_pairs(ctx, refit, profile, woken=False, solve=True, saved=True)
    if paired.went_on:
        return _after_found_launch(ctx, profile, code, colored)
    _pair_woken(ctx, refit[1], wake)
    return _paired(ctx, profile, solve=True)


def _pair_woken(ctx: StepContext, sleepers: int, wake: int = fused.WAKE_NONE):
    """After a broad phase that counted `sleepers` (find_step_pairs' answer): the sleepers
    that what moves pushes woken (sleep.wake_islands; `wake`: how the wake pass in a kept
    step's launch after its broad phase went, fused.WAKE_*, NONE where it ran none) and,
    where some woke, the broad phase again: it pairs no two sleeping bodies, and the woken
    ones must meet each other this step."""
    # (None counted: nothing to wake. A launch's wake pass ran only where it counted some.)
    if sleepers != 0 and _woke(ctx, wake):
        find_step_pairs(ctx, SPECULATIVE_DISTANCE, pair_window(ctx))


def _woke(ctx: StepContext, wake: int, kept: bool = False) -> bool:
    """Whether sleepers woke: as the wake pass in a kept step's launch answered (`wake`,
    fused.WAKE_*), or where it ran none (WAKE_NONE), as sleep.wake_islands(kept) wakes them
    now."""
    if wake == fused.WAKE_NONE:
        return wake_islands(ctx, kept=kept) > 0
    return wake == fused.WAKE_WOKE


def _kept_launch_team(ctx: StepContext) -> int:
    """The CPU team's threads where a step that keeps its pairs runs in one launch
    (fused.kept_step_by_team), else 0: the plan allows it (StepPlan.kept_launch: a team,
    not profiled, StepOptions.kept_in_one_launch, large worlds), the pairs are last step's
    fat boxes' pairs in colour order, the colouring may be reused or the launch colours
    itself where its broad phase finds the pairs (fused.colors_in_launch: a step due to
    colour from scratch, coloring.keeps_colors, then runs one launch, not four, where its
    boxes moved; where they did not, the launch stops after begin_step's stages and the
    host colours), and their per-body lists are in the pool."""
    # What keeps the pairs besides the refit's answer (_keeps_ordered_pairs of a refit
    # that changed nothing), so that the launch goes on exactly where they are kept.
    plan = current_plan(ctx)
    if (
        not plan.kept_launch
        or not _keeps_ordered_pairs(ctx, (0, 0, 0))
        or not (may_reuse_coloring(ctx) or fused.colors_in_launch(ctx))
        or not body_lists_current(ctx)
    ):
        return 0
    return plan.team_threads


def _after_check(ctx: StepContext, profile, held: bool, solved: bool) -> tuple[bool, bool]:
    """What follows the check of a kept step's colouring (`held`: whether it still holds;
    `solved`: the check's launch ran the substeps where it held, fused.kept_step_by_team):
    where it held, the host's side of keeping it; else the pairs go back to the broad
    phase's order for a new colouring. Returns (whether it coloured, whether the substeps
    ran)."""
    if held:
        return color_constraints(ctx, holds=True), solved
    with profile.stage("colour"):
        restore_broad_order(ctx)
        color_constraints(ctx, holds=False)
    with profile.stage("order"):
        store_in_color_order(ctx, recolored=True)
    return True, False


def _keeps_ordered_pairs(ctx: StepContext, refit) -> bool:
    """Whether the step keeps last step's pairs (pairs.keeps_pairs) where they lie, in last
    step's colour order (_keep_pairs): they are stored in colour order and the step's
    narrow phase runs before the colouring (not ctx.small_coloring)."""
    return keeps_pairs(ctx, refit) and ctx.cache.pairs_ordered and not ctx.small_coloring


def _keep_pairs(ctx: StepContext, profile) -> tuple[bool, bool]:
    """find_pairs for a step that keeps last step's pairs and their colour order: the
    step's narrow phase runs on the pairs where they lie, and where the colouring may be
    reused and still holds nothing moves. What it saves: last step's pairs copied aside,
    their bodies copied back, each pair's search for its old self, and the move to colour
    order, which would put every pair back where it was (2-core CPU, on and off in turns
    in one process: awake large pyramid 14.8 -> 13.9 ms a step, many pyramids awake
    51.0 -> 48.2 ms). Otherwise (the colouring fails, is due to start from scratch, or
    overflowed) the pairs go back to the broad phase's order for a new colouring. The
    results are bitwise those of find_pairs (the tests compare them).

    On a CPU team, where the colouring may be reused and the pool holds the pairs' per-body
    lists (_kept_launch_team), one launch runs begin_step, the colouring's check and,
    where it holds, the substeps (fused.kept_step_by_team). Returns (whether it coloured,
    whether the substeps ran)."""
    count_kept_pairs(ctx)
    if threads := _kept_launch_team(ctx):
        code, _, _, _, _ = fused.kept_step_by_team(ctx, threads)
        return _after_check(ctx, profile, verdict_holds(ctx, code), solved=True)
    begin_step(ctx, profile)
    with profile.stage("colour"):
        held = may_reuse_coloring(ctx) and coloring_holds_in_order(ctx)
    return _after_check(ctx, profile, held, solved=False)


def begin_step(ctx: StepContext, profile=NO_PROFILE):
    """Before the colouring (worlds of more than SMALL_COLORING_MAX_BODIES): the first
    substep's motors and velocity integration, and the step's narrow phase at the poses
    the step starts from, which tells the colouring the pairs the solver must see
    (coloring.solve: those with points, and fast ones). Box2D v3 colours touching
    constraints only: in a poured pile half the candidate pairs have no points. The
    velocities come first because the margins depend on them (the motion the step can
    bring).

    Small worlds colour every candidate pair instead (coloring.color_constraints): they are
    mostly solved one per thread (fused.substeps_by_world), where a pair without points
    costs a check, and that one launch a step does the step's narrow phase too, so
    begin_step's kernel, which holds the narrow phase as well, is not compiled for them.

    Where a CPU team will run the substeps (team.threads_for), the team's kernel does this
    too, so the narrow phase is compiled into one kernel, not two."""
    with profile.stage(None if profile.records else "begin step"):
        if not profile.records and (threads := current_plan(ctx).team_threads):
            fused.begin_step_by_team(ctx, threads)
        else:
            staged.begin_step(ctx, profile)
