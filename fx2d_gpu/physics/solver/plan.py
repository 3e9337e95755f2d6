"""The step's plan: its step-level stages declared as data, the options that choose how they
run, and the plan chosen once per step that says which executor runs which stages.

A step is the same physics whichever way it runs; what changes is how many launches it
takes and where the host waits. Three things decide that, and they live here:

- STEP_STAGES: the stages of a step, in order, beside the substep's (solver/stages.py).
- StepOptions: a scene's choices among ways that give bitwise the same results (a CPU team
  or a launch per stage, stages folded into another's launch or run alone, caches kept or
  rebuilt). Scene(step_options=...) or Scene.step_options sets them per scene; tests reach
  a path by asking for it, and measurements compare two ways in one process.
- StepPlan: chosen at the start of each step (plan_step) from the options, the scene's
  layout and the backend: the executor of the substeps, the CPU team's threads, and which
  stages share a launch. The step (solver/step.py) walks it; Scene.profile times each of
  its stages and the launch counter (launching.stage_launches) counts each stage's
  launches.

The executors it chooses between (`Executor`):

- PER_STAGE (solver/staged.py): a launch per stage group; GPU backends, CPU scenes without
  a team, and profiled steps (a launch per stage there, timed).
- TEAM (solver/fused.py on solver/team.py): the substeps, and where the pairs are kept most
  of the step, in one launch on a team of CPU threads meeting at barriers.
- BY_WORLD (fused.substeps_by_world): small worlds, all substeps in one launch, a world per
  thread; on a GPU (StepPlan.worlds_launch) the whole step in that launch
  (fused.step_by_world).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from ...device import MAX_COLORS
from . import gpu_team, team
from .team import TeamTimings

if TYPE_CHECKING:
    from .context import StepContext


class Executor(str, Enum):
    """Who runs a step's substeps (see the module docstring)."""

    PER_STAGE = "per_stage"
    TEAM = "team"
    BY_WORLD = "by_world"


@dataclass(frozen=True)
class StepStage:
    """One step-level stage: its name (as Scene.profile and the launch counter report it)
    and what it does."""

    name: str
    does: str


#: The stages of a step, in the order they run (the substep's own stages are
#: solver/stages.py's STAGES, run `substeps` times inside "substeps").
STEP_STAGES = (
    StepStage(
        "upload",
        "the forces applied since the last step sent to the device, and the scene's state "
        "moved into the device pool where another scene held it",
    ),
    StepStage(
        "find pairs",
        "the fat boxes refitted; the broad phase (or last step's pairs kept where no "
        "box moved); last step's pairs saved and matched; islands the new pairs push "
        "woken; impulses and colours carried to the new pairs",
    ),
    StepStage(
        "begin step",
        "worlds of more than 40 bodies: the first substep's motors and velocities, "
        "and the step's narrow phase, which tells the colouring which pairs touch",
    ),
    StepStage(
        "colour",
        "the pairs and joints coloured so that no two of a colour share a dynamic "
        "body (or last step's colouring kept where it still holds)",
    ),
    StepStage("order", "a colour's pairs moved to consecutive memory"),
    StepStage("body lists", "each body's constraints listed, for warm starting in a fixed order"),
    StepStage("substeps", "the substep's stages (solver/stages.py), `substeps` times"),
    StepStage("report", "the touching pairs listed, begin and end events"),
    StepStage("sleep", "sleep timers, islands, whole islands put to sleep or woken"),
    StepStage("clear forces", "the applied forces zeroed for the next step"),
    StepStage(
        "faults",
        "worlds whose bodies or joints went non-finite or absurd found and "
        "raised or reset (Scene's on_fault); marked in the substeps' launch where a "
        "team or small worlds run them",
    ),
)
STEP_STAGE_NAMES = tuple(stage.name for stage in STEP_STAGES)


@dataclass(frozen=True)
class StepOptions:
    """How a scene's steps run, among ways that give bitwise the same results.

    The defaults are the fastest measured; each option turned off runs the stage it names
    the plain way, which the tests compare against and measurements time beside it.

    Attributes:
        team: run the substeps (and where pairs are kept, most of the step) in one launch
            on a team of threads meeting at barriers: on a CPU backend the CPU's threads
            (solver/team.py), on a GPU one block of threads (solver/gpu_team.py, scenes of
            at most gpu_team_slots body slots) or on CUDA the grid team (gpu_grid_team);
            off: a launch per stage group.
        small_world_path: worlds of at most 40 bodies (context.BY_WORLD_MAX_BODIES) are
            stepped a world per thread; off: every world takes the general path (the grid
            broad phase, colour passes across worlds).
        kept_in_one_launch: a step of large worlds that keeps last step's pairs and
            colouring runs in one team launch (fused.kept_step_by_team).
        found_in_one_launch: a step of large worlds whose broad phase found its pairs
            runs begin_step, the colouring's check and, where last step's colouring holds,
            the move to colour order, the per-body lists and the substeps in one team
            launch (fused.found_step_by_team).
        broad_phase_in_launch: a kept step's team launch whose refit moved boxes (nothing
            asleep) saves last step's pairs, runs the broad phase and goes on as the found
            step's launch (with found_in_one_launch), instead of stopping for the host to
            launch them.
        color_in_launch: a found step's team launch (found_in_one_launch, or a kept step's
            launch that found its pairs: broad_phase_in_launch) colours the constraints
            itself where last step's colouring does not hold or may not be reused (it is
            due to be made from scratch, or the pairs are not as many as it coloured): the
            colouring's start, rounds and colour lists on the team (fused._color_by_team),
            then the move to colour order, the per-body lists, the substeps, the report and
            the sleep pass as where it held; where the colouring overflowed, the launch
            stops after the colour lists and the host goes on. Off: the launch stops after
            the check (or does not run) and the host colours in launches of its own, three
            of them host syncs. A poured pile of 100,000 bodies (soft step, counted on the
            CPU team with fold_on_cpu) went from 10.2 launches and 5.1 host syncs a step to
            1.3 and 1.2.
        wake_in_launch: a kept step's team launch whose refit found bodies asleep runs
            the wake pass the host would launch (sleep.wake_islands_by_team) and goes on
            where nothing woke: where nothing was refitted and no awake body that can move
            is beside the sleepers (a pile asleep), the pass a force or a joint may wake
            them by, then on as a kept step; where the pairs are found (with
            broad_phase_in_launch: boxes refitted, or a body that moves beside sleepers, a
            pile settling), after the launch's broad phase, then on as the found step.
            Where bodies woke it stops (the host pairs them). Off: the launch stops after
            its refit, for the host's wake launch and a second kept launch, or its broad
            phase, wake and found launch (each waited for). Such steps then fly
            (steps_in_flight). Counted on the CPU team with fold_on_cpu and steps in
            flight (XPBD), a pyramid of 210 boxes asleep: 3.0 launches and 3.0 host syncs
            a step off, 1.0 and 0.03 on; the same with a ball drifting in its world: 4.9
            and 4.0 off, 1.0 and 0.03 on (launches_per_step.csv).
        sleep_in_launch: a team's launch that built or refreshed the reported list runs
            the step's sleep pass after it (sleep.update_sleep_by_team), its labelling's
            rounds inside the launch, instead of update_sleep's launches after it.
        small_worlds_in_one_launch: a step of small worlds (small_world_path) runs in one
            launch (fused.step_by_world): the broad phase with last step's pairs saved and
            the wakes it brings, the colouring with the carry, the substeps a world per
            thread, the faults, the report and the sleep pass, as successive loops of the
            substeps' kernel, each going on only where the one before allows (the pairs fit
            the pool, nothing overflowed its colours; else the host finishes the step as
            the stages' own launches would). Compiled in on GPU backends, and on a CPU
            backend with fold_on_cpu; else (and off) four launches, each a host sync: the
            broad phase's, the colouring's, the substeps', the report's.
        steps_in_flight: a step in one launch (small worlds', one without contacts, or a
            team's kept step of large worlds with the stages after it folded in) called
            right after another step is launched without the host waiting for its answer
            (solver/in_flight.py): the answers wait on the device until the caller reads
            the scene, edits it, applies a force, or 64 steps have flown
            (device.STEPS_IN_FLIGHT), so the host launches steps back to back; a step
            that stopped short (pool growth, an overflowing colour, sleepers, a fault) is
            finished then and the steps after it taken again, bit for bit, but its error
            is raised by that later call. None (the default): on GPU backends (a CPU's
            launch returns when it is done: nothing to wait less for); True: also on a
            CPU backend, where such steps run in one launch (fold_on_cpu); False: never.
        fold_on_cpu: on a CPU backend too, compile the stages of found_in_one_launch,
            report_in_launch, broad_phase_in_launch, color_in_launch, wake_in_launch,
            sleep_in_launch and small_worlds_in_one_launch into the team's (or the small
            worlds') kernel (on GPU backends they always are, where those options ask).
            Off by default: they cut a CPU team's step by a launch or two (~65 us each
            on the 2-core CPU VM, of steps of milliseconds), and the kernel with them
            takes ~3.5 times as long to compile the first time (pyramid_20, XPBD, empty
            offline cache, 2-core VM under load: 28.7 s without, 99.9 s with);
            `python -m benchmarks.launches` turns it on to count a GPU team's launches on
            a CPU.
        carry_in_coloring: small worlds carry last step's contacts and plan their solve
            order in the colouring's launch.
        contactless_step: a step of small worlds in which no two bodies may ever pair (their
            filters, joints and disabled pairs keep every two apart: model/pairing.py; a
            cart-pole, a chain, an arm), none paired last step and sleep is off (its
            islands' pass reads the step's pairs) runs the substeps' kernel compiled
            without the contact stages (stages.CONTACTLESS_STAGES), which clears the
            forces too: one launch, no broad phase, colouring, report or sleep pass, and a
            process that steps only such scenes never compiles them (CartPoleVectorEnv(64),
            2-core CPU: its first step 11.05 s -> 1.26 s with an empty kernel cache,
            4.46 s -> 0.47 s with a warm one; docs/learning-agents.md). Off: the full step
            (nothing pairs there either).
        sleep_in_report: small worlds' sleep runs in the report's launch.
        save_in_broad_phase: small worlds save last step's pairs in their broad phase's
            launch.
        refresh_report: a step whose pairs stayed in place may refresh the last reported
            list instead of building it (reporting.refresh_report).
        refresh_in_launch: the team's launch of the substeps refreshes that list.
        report_in_launch: the team's launch of the substeps builds the reported list
            where it was not refreshed (reporting.report_by_team).
        report_by_world: small worlds build the reported list a world per thread.
        reuse_pairs: large worlds keep last step's pairs when no fat box moved.
        keep_fresh_coloring: a colouring from scratch that falls due keeps the colouring
            where it holds and is the one it would give (StepCache.colors_fresh).
        color_small_worlds: small worlds colour their constraints as the general path does
            (several colours) instead of all in colour 0; they then solve in the general
            path's order, which the tests comparing the two paths need.
        colors_per_launch: colours solved per launch of a colour pass on the per-stage
            path, 1 to MAX_COLORS. More means fewer launches and a longer first compile
            (see solver/staged.py).
        noted_partners: partners a body notes while the broad phase counts its pairs
            (collision/broad_phase.py), 0 or more; a body with more searches again.
        gpu_team_slots: the most body slots (worlds x bodies) a scene may have for the
            GPU team to run its steps on one block (solver/gpu_team.py: one
            multiprocessor of the GPU); larger scenes run on the grid team
            (gpu_grid_team) or launch a kernel per stage group across the whole GPU.
            2,048: on an H200 one block stepped the awake large pyramid (5,051 bodies, soft
            step) in 7.5-7.8 ms against 3.0-3.4 ms launching per stage and 1.6 ms on the
            grid team (docs/performance.md); a block's time grows with the bodies.
        gpu_grid_team: on CUDA, scenes over gpu_team_slots and up to gpu_grid_team_slots
            run on a team of a block per multiprocessor whose blocks meet at a grid-wide
            barrier (solver/gpu_team.py): the team's launches across the whole GPU, one a
            step. On an H200 it stepped the large pyramid (5,051 bodies, no sleep) in
            1.62 ms (soft step) and 2.40 ms (XPBD) against 3.04 and 10.68 ms launching
            per stage. Off (always on Vulkan or Metal, which promise no such barrier): a
            launch per stage group.
        gpu_grid_team_slots: the most body slots a scene may have for the grid team;
            larger scenes launch per stage, which fills the GPU with a thread an item where
            the grid team's one block a multiprocessor (33,792 threads on an H200) loops
            over several. 200,000: the grid team is measured faster at 5,051 bodies and
            not yet measured above; a 1M pile stays per stage until it is.
        gpu_grid_blocks: blocks of the grid team; 0 (the default): the GPU's
            multiprocessors, a block each (more than can be resident at once would make
            its barrier wait out its limit, and the step raise).
        gpu_world_block: threads a block of the small worlds' step on CUDA (a world a
            thread), a multiple of 32 from 32 to 1,024. Taichi bounds a CUDA kernel to two
            resident blocks a multiprocessor, so a block of B threads caps a thread at
            65,536 / (2 B) registers: 256 (the default) gives the world's step 128
            registers, 4-12 bytes spilled (at Taichi's own block of 128 it takes 168, as
            the H200's kernel profile said too: 384 threads a multiprocessor, so 65,536
            worlds took 1.3 waves of an H200, the last 0.3 as long as a whole one; at 256,
            512 threads, one wave), 512 gives 64 (`python -m benchmarks.ptx_registers
            --no-gpu` counts them on any machine). Other backends ignore it.
        colors_by_turns: a team's colour passes run their colours without the team's
            barriers between them: each member goes through the colours' list strided,
            and a constraint waits for its turn at each body it moves (its constraints of
            lower colours solved: coloring.take_turns), so every body sees its constraints
            in colour order and the results are the same bit for bit; the team meets once
            a pass instead of once a colour. For CUDA's grid team, whose barrier is a round
            trip of every block through the L2 cache (the large pyramid's 8 colours: 16 of
            a substep's ~20 barriers), at a fence and a counter a constraint. Off by
            default until measured on a GPU; on a CPU team it is slower (the large pyramid,
            XPBD, 2-core CPU: 47-55 ms a step against 12-16 ms, four locked atomics a
            constraint where a barrier costs microseconds). CPU teams and CUDA (compute
            capability 7.0 on, whose threads progress while others of their warp wait)
            only: Vulkan and Metal promise no progress to a waiting invocation's neighbours
            and ignore it. Small worlds whose substeps run by stage
            (small_worlds_by_stage) take it too.
        stages_by_turns: with colors_by_turns, the body stages between a substep's two
            colour passes and between substeps (integrate velocities and positions, the
            warm start, the continuous sweep) take turns too (coloring.take_turns' chain):
            a body's stages wait for its last constraint of the pass before, and its first
            constraint of the next pass waits for its stages, so the team meets at no
            barrier from the first substep's narrow phase to the last pass (the awake
            large pyramid's kept step, counted on the CPU team: 15 barriers where
            colours by turns alone meet at 34, soft step, or 58, XPBD). The same results
            bit for bit. Where a stage would read another body that moves, the team
            meets as without it: scenes with joints, kinematic bodies, bullets, or in
            XPBD worlds of uneven masses, and a step with a fast pair or an overflow
            colour. On a CPU team it is slower still (the large pyramid, 2-core VM, sleep
            off: soft step 19.8 -> 28.1 ms a step, XPBD 44.1 -> 48.4; 9.3 and 12.5 without
            turns).
        interleave_small_worlds: a small worlds' step (a world a thread) works in its
            substeps on its state laid out world-minor (solver/interleaved.py): its
            bodies' pose, velocity and displacements (slot b of world w at b * n_worlds +
            w), its pairs' manifolds and prepared contacts (pair j at j * n_worlds + w,
            where every world's pairs fit the pool's pair capacity so; else in the pair
            list's order), so that a GPU warp's 32 worlds read and write neighbouring
            addresses (coalesced) where the slots' and the pair list's layout put them a
            world apart; copied in before the substeps and out after them (the prepared
            contacts, the substeps' own, in place). The same results bit for bit. None
            (the default): on GPU backends; True: on a CPU backend too, where a thread
            steps one world at a time and it is slower (4,096 worlds, 2-core CPU: soft
            step 12-15 -> 22-25 ms a step); False: never.
        small_worlds_begin_by_item: a small worlds' step in one launch (a world a thread
            for its substeps) runs its first substep's motors, velocities and narrow phase
            first with a thread a joint, a body slot and a pair (fused._begin_by_item),
            then its substeps a world a thread from there: the narrow phase (SAT and
            clipping, the step's longest stage for a thread) of 65,536 worlds' half a
            million pairs on half a million threads, not 65,536 threads walking each
            world's pairs. The same results bit for bit. None (the default): on CUDA;
            True: on a CPU backend too (where the step folds: fold_on_cpu); False: never.
            Never on Vulkan or Metal, whose SPIR-V code generator (Taichi 1.7.4) fails on
            the kernel.
        small_worlds_by_stage: a small worlds' step in one launch solves its substeps with
            the step's team (a CPU's threads, CUDA's grid team: a block a multiprocessor,
            whatever the scene's slots) sharing every stage over all the worlds' items,
            colour after colour, meeting at the team's barrier, as a large world's team
            does (fused.BY_STAGE); its other loops (the broad phase, the colouring, the
            report) stay a world a thread. A world a thread runs each world's stages one
            after another on one of 65,536 threads, a few warps a multiprocessor, each
            load waiting on the last; by stage, each stage's items are shared by the whole
            team (XPBD's later sweep over the joints a world a member, the team meeting
            once after it). Needs color_small_worlds (several colours: a world's
            constraints all in colour 0 share bodies, and only one thread may solve them);
            takes colors_by_turns where it is on. The same results bit for bit as a world
            a thread with color_small_worlds, which takes its place where the step has no
            team of several threads (Vulkan and Metal beyond one block). The team meets at
            66 barriers a step (soft step; 32 by turns) and 182 (XPBD; 98), 256 worlds
            counted on the CPU team. Off by default until a GPU measures it
            (benchmarks/device_run.sh).
        small_worlds_by_block: small worlds' substeps (in their step's one launch, or a
            launch of their own) run a block of worlds at a time (fused.BY_BLOCK): on a
            GPU a block of gpu_team.BLOCK_THREADS threads takes as many worlds as give
            each thread a body slot and a constraint (28 of batched_small's worlds:
            fused.block_members), shares each stage over their items and each colour over
            their constraints of that colour, and meets at the block's own barrier (tens of
            nanoseconds, where a grid team's is microseconds and a world a thread meets
            none but runs its world's stages one after another). A CPU's block is one
            thread stepping its worlds stage by stage. The step's other loops (the broad
            phase, the colouring, the report) stay a world a thread. Needs color_small_worlds, as
            small_worlds_by_stage does, and not with it. The same results bit for bit as
            a world a thread with color_small_worlds. Off by default until a GPU measures
            it (benchmarks/device_run.sh).
        team_timings: when the CPU team's barriers are probed again and how its duel
            chooses between a team of several threads and one, with the clock it times
            steps by (solver/team.py's TeamTimings; the defaults are the measured ones).

    Raises:
        TypeError: a flag is not a bool (steps_in_flight, interleave_small_worlds,
            small_worlds_begin_by_item: a bool or None), a count not an int,
            team_timings not a TeamTimings.
        ValueError: colors_per_launch outside [1, MAX_COLORS], noted_partners or
            gpu_team_slots, gpu_grid_team_slots or gpu_grid_blocks below 0,
            gpu_grid_blocks above gpu_team.MAX_GRID_BLOCKS (181), gpu_world_block not a
            multiple of 32 from 32 to 1,024, small_worlds_by_stage or
            small_worlds_by_block without color_small_worlds, or both of them.
    """

    team: bool = True
    small_world_path: bool = True
    kept_in_one_launch: bool = True
    found_in_one_launch: bool = True
    broad_phase_in_launch: bool = True
    color_in_launch: bool = True
    wake_in_launch: bool = True
    sleep_in_launch: bool = True
    small_worlds_in_one_launch: bool = True
    steps_in_flight: bool | None = None
    fold_on_cpu: bool = False
    carry_in_coloring: bool = True
    contactless_step: bool = True
    sleep_in_report: bool = True
    save_in_broad_phase: bool = True
    refresh_report: bool = True
    refresh_in_launch: bool = True
    report_in_launch: bool = True
    report_by_world: bool = True
    reuse_pairs: bool = True
    keep_fresh_coloring: bool = True
    color_small_worlds: bool = False
    colors_per_launch: int = 2
    noted_partners: int = 8
    gpu_team_slots: int = 2_048
    gpu_grid_team: bool = True
    gpu_grid_team_slots: int = 200_000
    gpu_grid_blocks: int = 0
    gpu_world_block: int = 256
    colors_by_turns: bool = False
    stages_by_turns: bool = True
    interleave_small_worlds: bool | None = None
    small_worlds_begin_by_item: bool | None = None
    small_worlds_by_stage: bool = False
    small_worlds_by_block: bool = False
    team_timings: TeamTimings = TeamTimings()

    def __post_init__(self):
        for option in dataclasses.fields(self):
            value = getattr(self, option.name)
            kind = str(option.type)
            if kind == "bool | None":
                if value is not None and not isinstance(value, bool):
                    raise TypeError(
                        f"StepOptions.{option.name} must be bool or None, got "
                        f"{type(value).__name__}"
                    )
                continue
            wanted = {"bool": bool, "int": int, "TeamTimings": TeamTimings}[kind]
            if not isinstance(value, wanted) or (wanted is int and isinstance(value, bool)):
                raise TypeError(
                    f"StepOptions.{option.name} must be {wanted.__name__}, got "
                    f"{type(value).__name__}"
                )
        if not 1 <= self.colors_per_launch <= MAX_COLORS:
            raise ValueError(
                f"StepOptions.colors_per_launch must be in [1, {MAX_COLORS}], "
                f"got {self.colors_per_launch}"
            )
        for count in ("gpu_team_slots", "gpu_grid_team_slots", "gpu_grid_blocks"):
            if getattr(self, count) < 0:
                raise ValueError(f"StepOptions.{count} must be >= 0, got {getattr(self, count)}")
        if self.gpu_grid_blocks > gpu_team.MAX_GRID_BLOCKS:
            raise ValueError(
                f"StepOptions.gpu_grid_blocks must be at most {gpu_team.MAX_GRID_BLOCKS} (a "
                f"grid team's threads share items in 32-bit arithmetic), got "
                f"{self.gpu_grid_blocks}"
            )
        if not (32 <= self.gpu_world_block <= 1024 and self.gpu_world_block % 32 == 0):
            raise ValueError(
                f"StepOptions.gpu_world_block must be a multiple of 32 (a warp) from 32 to "
                f"1024 (CUDA's most threads a block), got {self.gpu_world_block}"
            )
        if self.noted_partners < 0:
            raise ValueError(f"StepOptions.noted_partners must be >= 0, got {self.noted_partners}")
        if self.small_worlds_by_stage and not self.color_small_worlds:
            raise ValueError(
                "StepOptions.small_worlds_by_stage needs color_small_worlds=True: in one "
                "colour a world's constraints share bodies, so a team cannot share them"
            )
        if self.small_worlds_by_block and not self.color_small_worlds:
            raise ValueError(
                "StepOptions.small_worlds_by_block needs color_small_worlds=True: in one "
                "colour a world's constraints share bodies, so a block cannot share them"
            )
        if self.small_worlds_by_block and self.small_worlds_by_stage:
            raise ValueError(
                "StepOptions.small_worlds_by_block and small_worlds_by_stage are two ways "
                "to solve the same substeps: ask for one"
            )

    def folds_stages(self, on_gpu: bool) -> bool:
        """Whether the team's kernel holds stages from outside the substeps (the found step's,
        the report, the broad phase, the colouring, the wake and sleep passes:
        found_in_one_launch, report_in_launch, broad_phase_in_launch, color_in_launch,
        wake_in_launch, sleep_in_launch), on a GPU
        backend (`on_gpu`) or where fold_on_cpu asks; else it is compiled without them,
        smaller."""
        asked = (
            self.found_in_one_launch
            or self.report_in_launch
            or self.broad_phase_in_launch
            or self.color_in_launch
            or self.sleep_in_launch
            or self.wake_in_launch
        )
        return asked and (on_gpu or self.fold_on_cpu)

    def folds_small_worlds(self, on_gpu: bool) -> bool:
        """Whether a small worlds' step runs in one launch (small_worlds_in_one_launch), on a
        GPU backend (`on_gpu`) or where fold_on_cpu asks; else each of its stages launches
        its own kernel, and the substeps' kernel is compiled without them."""
        return self.small_worlds_in_one_launch and (on_gpu or self.fold_on_cpu)

    def replace(self, **changes) -> StepOptions:
        """These options with `changes` (keyword per attribute), checked."""
        return dataclasses.replace(self, **changes)


#: The options a scene starts with.
DEFAULT_OPTIONS = StepOptions()


def as_step_options(options, name: str = "step_options") -> StepOptions:
    """`options` checked: a StepOptions, None (the defaults) or a dict of its attributes."""
    if options is None:
        return DEFAULT_OPTIONS
    if isinstance(options, StepOptions):
        return options
    if isinstance(options, dict):
        unknown = sorted(set(options) - {f.name for f in dataclasses.fields(StepOptions)})
        if unknown:
            raise ValueError(f"{name} has no option {unknown[0]!r}")
        return StepOptions(**options)
    raise TypeError(f"{name} must be a StepOptions, a dict or None, got {type(options).__name__}")


@dataclass(frozen=True)
class StepPlan:
    """How one step runs, chosen at its start (plan_step).

    Attributes (the stages read the scene's StepOptions from their StepContext):
        profiled: every stage runs as launches of its own, timed (Scene.profile).
        team_threads: threads of the team that runs the team's launches: on a CPU its
            threads (1: a team of one, where the duel chose it or the loops run serially),
            on a GPU one block's (gpu_team.BLOCK_THREADS) or a grid team's; 0: no team
            (a launch per stage: StepOptions.team off, a profiled step, a team that timed
            out, a GPU scene over gpu_team_slots without a grid team).
        small_worlds: worlds of at most 40 bodies, stepped a world per thread.
        kept_launch: a step that keeps last step's pairs and colouring may run in one team
            launch (fused.kept_step_by_team); where they are not kept it goes on as planned.
        save_in_broad_phase, carry_in_coloring, sleep_in_report: the small worlds' folded
            stages of StepOptions, where they apply this step.
        worlds_launch: the small worlds' whole step runs in one launch
            (StepOptions.small_worlds_in_one_launch, fused.step_by_world), not profiled.
        worlds_by_stage: that launch's substeps run on the team (team_threads, several),
            stage by stage over every world (StepOptions.small_worlds_by_stage).
        worlds_by_block: small worlds' substeps (in that launch, or a launch of their
            own) run a block of worlds at a time (StepOptions.small_worlds_by_block,
            fused.BY_BLOCK).
        contactless: the step has no contacts (StepOptions.contactless_step): one launch,
            the substeps without the contact stages and the forces cleared, nothing else
            (step.contactless_step), not profiled.
    """

    profiled: bool
    team_threads: int
    small_worlds: bool
    kept_launch: bool
    save_in_broad_phase: bool
    carry_in_coloring: bool
    sleep_in_report: bool
    worlds_launch: bool = False
    worlds_by_stage: bool = False
    worlds_by_block: bool = False
    contactless: bool = False

    def substep_executor(self, solves_by_world: bool) -> Executor:
        """Who runs the substeps, once the colouring has said whether the small worlds are
        solved a world per thread (StepContext.solves_by_world: no constraint in the
        overflow colour, which is solved across worlds)."""
        if self.profiled:
            return Executor.PER_STAGE
        if solves_by_world:
            return Executor.TEAM if self.worlds_by_stage else Executor.BY_WORLD
        return Executor.TEAM if self.team_threads else Executor.PER_STAGE

    def launches(self) -> dict[str, str]:
        """{stage name: where it runs}: "own" for launches of its own, the name of the
        stage whose launch it shares, or "none" (a step without contacts leaves it out). A
        plan's summary for the docs and diagnostics (the kept launch, which runs only where
        the pairs are kept, is shown as planned)."""
        where = {name: "own" for name in STEP_STAGE_NAMES}
        if self.profiled:
            return where
        if self.small_worlds:
            where["begin step"] = "substeps"  # small worlds' narrow phase is a substep's
            if self.save_in_broad_phase:
                where["find pairs"] = "own"
            if self.carry_in_coloring:
                where["order"] = "colour"
            if self.sleep_in_report:
                where["sleep"] = "report"
        if self.small_worlds or self.team_threads:
            where["faults"] = "substeps"
        if self.kept_launch:
            for name in ("begin step", "colour", "substeps"):
                where[name] = "find pairs"
            where["faults"] = "find pairs"
        if self.worlds_launch:
            for name in STEP_STAGE_NAMES:
                if name not in ("find pairs", "clear forces"):
                    where[name] = "find pairs"
        if self.contactless:
            where = {name: "none" for name in STEP_STAGE_NAMES}
            where["substeps"] = "own"
            where["faults"] = where["clear forces"] = "substeps"
        return where


def plan_step(ctx: StepContext, profiled: bool, team_threads: int) -> StepPlan:
    """The plan of a step of ctx's scene (`team_threads`: team.threads_for's answer at the
    step's start, inside the team's duel)."""
    options = ctx.options
    threads = 0 if profiled else team_threads
    small = ctx.small_worlds
    worlds_launch = small and not profiled and options.folds_small_worlds(gpu_team.on_gpu())
    return StepPlan(
        profiled=profiled,
        team_threads=threads,
        small_worlds=small,
        kept_launch=bool(threads and options.kept_in_one_launch and ctx.fat_boxes),
        save_in_broad_phase=small and options.save_in_broad_phase,
        carry_in_coloring=options.carry_in_coloring,
        sleep_in_report=options.sleep_in_report and not profiled,
        worlds_launch=worlds_launch,
        worlds_by_stage=worlds_launch and options.small_worlds_by_stage and threads > 1,
        worlds_by_block=small and not profiled and options.small_worlds_by_block,
        contactless=not profiled and steps_without_contacts(ctx),
    )


def current_plan(ctx: StepContext) -> StepPlan:
    """ctx's step's plan; outside a step (a stage a test drives alone) the plan an
    unprofiled step would have now, noted on ctx."""
    if ctx.plan is None:
        ctx.plan = plan_step(ctx, False, team.threads_for(ctx))
    return ctx.plan


def steps_without_contacts(ctx: StepContext) -> bool:
    """Whether ctx's step, unprofiled, runs without contacts (StepPlan.contactless): small
    worlds (a world per thread: no team, whose barriers the step then need not probe), no
    two bodies may pair, none did last step (nothing to carry, report or end), the worlds take
    one colour (StepOptions.color_small_worlds off), none overflowed, and sleep is off."""
    cache = ctx.cache
    return (
        ctx.options.contactless_step
        and ctx.small_worlds
        and ctx.contact_free
        and not ctx.enable_sleep
        and not ctx.options.color_small_worlds
        and cache.n_pairs == 0
        and cache.n_reported == 0
        and cache.n_overflow == 0
    )
