"""What the stages of a step share: StepContext (built once per step) and StepCache (what
survives on the host from one step to the next)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ... import device
from ...device import DevicePool
from .plan import DEFAULT_OPTIONS, StepOptions, StepPlan

#: Worlds of at most this many bodies are "small" (StepContext.small_worlds). Measured on
#: the 2-core CPU, pyramids stepped one world per thread against the general path: 29 bodies
#: (1,024 worlds) 73 vs 116 ms/step, 37 bodies (768 worlds) 91 vs 101, 56 bodies (512
#: worlds) 142 vs 102.
BY_WORLD_MAX_BODIES = 40
# The small worlds' broad phase keeps a bit per body of the world (broad_phase.world_partners).
assert BY_WORLD_MAX_BODIES <= 64
#: Worlds of at most this many bodies colour as small worlds (StepContext.small_coloring):
#: every candidate pair takes a colour (larger worlds run the step's narrow phase before
#: the colouring and colour only the pairs with points, step.begin_step), and they keep
#: their colours from step to step (larger ones colour from scratch every
#: coloring.FRESH_COLORING_STEPS). Most such worlds are solved one per thread, where a pair
#: without points costs a check and colours bring no parallelism: a fresh colouring made
#: 4,096 of them ~5 % slower, and begin_step would compile a second kernel holding the
#: narrow phase. A constant of its own, not the solve path's: both paths must colour alike
#: (they give the same results).
SMALL_COLORING_MAX_BODIES = 40
#: Worlds of more than this many bodies pair fat boxes and keep last step's pairs when no
#: box moved (StepContext.fat_boxes, pairs.find_step_pairs); smaller ones pair the step's
#: swept boxes every step (a batch of small worlds nearly always has one in motion, and
#: their broad phase is cheap). A constant of its own, not the solve path's: both paths
#: must find the same pairs (they give the same results).
EXACT_PAIRS_MAX_BODIES = 40


def loops_run_serially(
    n_worlds: int, n_bodies: int, options: StepOptions = DEFAULT_OPTIONS
) -> bool:
    """Whether a scene's kernels run their loops serially on a CPU backend: small worlds
    (small_world_path) at most device.SERIAL_WORLDS of them (their loops mostly go a world
    per item), other scenes at most device.SERIAL_SLOTS body slots."""
    if small_world_path(n_bodies, options):
        return n_worlds <= device.SERIAL_WORLDS
    return n_worlds * n_bodies <= device.SERIAL_SLOTS


def small_world_path(n_bodies: int, options: StepOptions) -> bool:
    """Whether worlds of n_bodies bodies are stepped a world per thread: at most
    BY_WORLD_MAX_BODIES, where the scene's StepOptions.small_world_path lets them."""
    return options.small_world_path and n_bodies <= BY_WORLD_MAX_BODIES


@dataclass
class StepCache:
    """Host-side facts that outlive a step (the device side is the pool's saved fields).

    n_pairs: candidate pairs of the last broad phase (the pairs in `contacts`);
    pairs_ordered: they are stored in colour order (coloring.pair_origin maps them back to
    the broad phase's order); coloring_valid: the last colouring may be reused or kept pair
    by pair; colored_pairs: n_pairs when it was made; n_colors, n_overflow: its parallel
    colours and the constraints in its overflow colour; contacts_current: the manifolds
    match the current poses (else a query runs the narrow phase first); pair_need,
    entry_need: the largest pair list and grid the scene has needed (pool capacities);
    lost_bodies: bodies the last broad phase left out of collision; colorings: steps that
    coloured (the others reused the last colouring); scratch_colorings: of those, the ones
    that did not start from the last colours; steps_since_fresh_coloring: steps since the
    last colouring from scratch (coloring.FRESH_COLORING_STEPS); colors_fresh: the
    colouring is the one a colouring from scratch would give now (the last colouring was
    one, and since then no step coloured and no body it counted moving became fixed), so
    a colouring from scratch that falls due while it holds keeps it; forces_on_device: applied
    forces wait on the device for the next step; n_reported, n_begin_events, n_end_events:
    the touching pairs and the contact events the last step reported
    (solver/reporting.py); state_set: the state was set by hand since (Scene.set_state);
    resting_recheck: and a body was written asleep, so last step's resting pairs may still
    rest at the new poses and are checked there first (reporting._recheck_resting; without
    one, no pair of a written world rests: every body it could rest on was written awake);
    pairs_fat: the pairs in `contacts` are those of the bodies' fat boxes (large worlds,
    pairs.find_step_pairs; else every fat box is refitted before the next broad phase);
    pair_reuses: steps that kept the last step's pairs (no fat box moved); pairs_kept: this
    step kept them; pairs_in_place: kept where they lie, with their colouring (nothing
    moved them); report_mapped: each entry of the reported list names the step's pair
    it came from, or -1 for a resting pair (reported.origin, solver/reporting.py);
    report_refreshes: steps whose report only refreshed the last list
    (reporting.refresh_report); refresh_backoff, refresh_skips: steps between its tries
    while they fail, and those left to skip.
    """

    n_pairs: int = 0
    pairs_ordered: bool = False
    coloring_valid: bool = False
    colored_pairs: int = 0
    n_colors: int = 0
    n_overflow: int = 0
    contacts_current: bool = False
    pair_need: int = 0
    entry_need: int = 0
    lost_bodies: int = 0
    colorings: int = 0
    scratch_colorings: int = 0
    steps_since_fresh_coloring: int = 0
    colors_fresh: bool = False
    forces_on_device: bool = False
    n_reported: int = 0
    n_begin_events: int = 0
    n_end_events: int = 0
    state_set: bool = False
    resting_recheck: bool = False
    pairs_fat: bool = False
    pair_reuses: int = 0
    pairs_kept: bool = False
    pairs_in_place: bool = False
    report_mapped: bool = False
    report_refreshes: int = 0
    refresh_backoff: int = 0
    refresh_skips: int = 0

    def forget_pairs(self):
        """No candidate pairs, contacts, reported pairs, events or colouring (a new scene,
        or rebuilt arrays)."""
        self.forget_events()
        self.n_reported = 0
        self.forget_candidates()

    def refuse_step(self, before: StepCache):
        """Back to `before`, this cache as a step found it, after the step was refused
        (residency.CapacityError: its broad phase needed more than the pool could grow to).
        The candidate pairs go too: the refused broad phase may have written over them on
        the device, so the next step finds them afresh (its warm starts are lost); the
        reported pairs and events, which come later in a step, are kept."""
        for name in dataclasses.fields(self):
            setattr(self, name.name, getattr(before, name.name))
        self.forget_candidates()

    def forget_candidates(self):
        """No candidate pairs, contacts or colouring (forget_pairs without the reported
        list)."""
        self.n_pairs = 0
        self.pairs_ordered = False
        self.pairs_fat = False
        self.pairs_kept = False
        self.pairs_in_place = False
        self.report_mapped = False
        self.coloring_valid = False
        self.colored_pairs = 0
        self.contacts_current = False

    def forget_events(self):
        """No contact events (the state was set by hand: no step led to it)."""
        self.n_begin_events = 0
        self.n_end_events = 0


class StepDiagnostics:
    """Scene's diagnostics of its steps, read from its StepCache (a mixin of fx2d_gpu.Scene,
    which holds the cache as `_cache`)."""

    _cache: StepCache

    def _settle(self):
        """Read the answers of steps in flight first (Scene._settle: the cache's counts wait
        for them)."""

    @property
    def n_colors(self) -> int:
        """The parallel colours the last step's constraint solve used (a diagnostic); at most 1 in
        worlds of at most 40 bodies, each solved on one thread (StepOptions.color_small_worlds
        off).
        """
        self._settle()
        return self._cache.n_colors

    @property
    def n_overflow(self) -> int:
        """Constraints the last step left to the overflow colour (a diagnostic): those on a body
        with more than MAX_COLORS of them, solved after the colours one at a time."""
        self._settle()
        return self._cache.n_overflow

    @property
    def colorings(self) -> int:
        """Steps that coloured their constraints; the others reused the last colouring (a
        diagnostic)."""
        self._settle()
        return self._cache.colorings

    @property
    def scratch_colorings(self) -> int:
        """Colourings that did not start from the last step's colours (a diagnostic)."""
        self._settle()
        return self._cache.scratch_colorings

    @property
    def pair_reuses(self) -> int:
        """Steps that kept the last step's candidate pairs, no body having left its fat box (a
        diagnostic; worlds of more than 40 bodies)."""
        self._settle()
        return self._cache.pair_reuses

    @property
    def report_refreshes(self) -> int:
        """Steps whose contact report only refreshed the last step's list, its pairs unmoved and
        the same pairs touching (a diagnostic)."""
        self._settle()
        return self._cache.report_refreshes

    @property
    def lost_bodies(self) -> int:
        """Bodies the last broad phase left out for a non-finite pose (a diagnostic)."""
        self._settle()
        return self._cache.lost_bodies


@dataclass
class EditedWorlds:
    """What was set by hand since the last step (the Scene's, cleared after each step).

    set: (n_worlds,) bool, the worlds whose state was set (set_state, reset_worlds with a
    state, set_enabled putting bodies back), or None: a joint torn in the next step there is
    named as the edit's, not a load's (faults.describe_torn_joint). rejoined: (n_worlds,)
    bool, of those the worlds where set_enabled put bodies back, or None: their joints'
    gaps (the partners moved on meanwhile) are closed before an XPBD step
    (solver/rejoined_joints.py). Not a fact a snapshot keeps: a step clears it."""

    set: np.ndarray | None = None
    rejoined: np.ndarray | None = None

    def note(self, n_worlds: int, worlds: np.ndarray | None = None, rejoined: bool = False):
        """The state of `worlds` ((k,) indices; None: every one of the n_worlds) was set;
        `rejoined`: by set_enabled putting bodies back."""
        chosen = slice(None) if worlds is None else worlds
        self.set = _marked(self.set, n_worlds, chosen)
        if rejoined:
            self.rejoined = _marked(self.rejoined, n_worlds, chosen)

    def __contains__(self, world: int) -> bool:
        return self.set is not None and bool(self.set[world])

    def clear(self):
        self.set = self.rejoined = None


def _marked(mask: np.ndarray | None, n_worlds: int, chosen) -> np.ndarray:
    """`mask` ((n_worlds,) bool; None or another length: a new one) with `chosen` marked."""
    if mask is None or len(mask) != n_worlds:
        mask = np.zeros(n_worlds, bool)
    mask[chosen] = True
    return mask


@dataclass
class StepContext:
    """One scene's view of the pool for a step (or a query).

    pool: the device groups (a bigger pool replaces it if a buffer must grow, see grow);
    serial: kernels run their loops on one thread (loops_run_serially); cpu: Taichi
    runs on a CPU backend (a CPU team may run the substeps, solver/team.py); n_worlds,
    n_bodies, n_joints: the layout (n_joints per world); cell_size: the broad phase's
    level-0 cell, m; cache: the scene's StepCache; grow: returns a pool with room for what
    the cache says the scene needs (pair_need, entry_need), this scene's state in it
    bitwise unchanged. dt (s), substeps and enable_sleep are the step's settings
    (unused by queries; gravity is per world, device.BodyModel.gravity); has_bullets: a
    body is a bullet (collision/continuous.py's second pass runs); has_kinematic: a body is
    kinematic (it moves whatever it meets; StepOptions.stages_by_turns); immovable_sweep: in some
    world the dynamic bodies' masses differ by more than contacts.IMMOVABLE_SWEEP_RATIO
    (BodyModel.uneven; that world's velocity pass sweeps
    the contacts with immovable bodies again); contact_free: no two bodies of a world may
    ever pair (model/pairing.py: their filters, joints and disabled pairs keep every two
    apart; step.contactless_step); solver: "xpbd" or "soft_step", the
    substep's stage list (solver/stages.py's STAGES). Set by the step as it runs:
    faults_found, the faulty worlds its substeps' launch found (solver/fused.py; None:
    faults.contain_faults looks after the step); barrier_timeouts, the team's timed-out
    waits as that launch read them (None: team.check reads them); report_refreshed,
    whether that launch refreshed the reported list (reporting.refresh_due; None: it did
    not try); report_built, the reported list's counts (pairs, begin events, end events)
    where that launch built it (reporting.report_by_team; a list too large for the pool
    was not written: report_contacts grows the pool and builds it again), None where it
    did not; slept_in_launch, that launch ran the step's sleep pass (sleep.
    update_sleep_by_team); still_bodies, the host's refit of the fat boxes found bodies
    asleep and none that moves (pairs.refit_step_boxes; step.substeps_to_run). options:
    the scene's StepOptions (how its stages run); plan: the step's StepPlan
    (solver/plan.py), set by the step as it begins (None outside a step: a query, or a
    stage a test drives alone). edited: the scene's EditedWorlds.
    """

    pool: DevicePool
    serial: bool
    cpu: bool
    n_worlds: int
    n_bodies: int
    n_joints: int
    cell_size: float
    cache: StepCache
    grow: Callable[[], DevicePool]
    dt: float = 0.0
    substeps: int = 1
    enable_sleep: bool = True
    has_bullets: bool = False
    has_kinematic: bool = False
    immovable_sweep: bool = False
    contact_free: bool = False
    solver: str = "xpbd"
    faults_found: int | None = None
    barrier_timeouts: int | None = None
    report_refreshed: bool | None = None
    report_built: tuple[int, int, int] | None = None
    slept_in_launch: bool = False
    still_bodies: bool = False
    options: StepOptions = DEFAULT_OPTIONS
    plan: StepPlan | None = None
    edited: EditedWorlds = field(default_factory=EditedWorlds)

    @property
    def n_slots(self) -> int:
        return self.n_worlds * self.n_bodies

    @property
    def small_worlds(self) -> bool:
        """Worlds of at most BY_WORLD_MAX_BODIES bodies (small_world_path): the broad phase
        checks every body of a world instead of hashing, and the substeps run one world per
        thread (each giving the same results bit for bit)."""
        return small_world_path(self.n_bodies, self.options)

    @property
    def small_coloring(self) -> bool:
        """Worlds of at most SMALL_COLORING_MAX_BODIES bodies: every candidate pair takes a
        colour (step.begin_step does not run), and colours are kept between steps."""
        return self.n_bodies <= SMALL_COLORING_MAX_BODIES

    @property
    def fat_boxes(self) -> bool:
        """Worlds of more than EXACT_PAIRS_MAX_BODIES bodies: the step's pairs are those of
        fat boxes (pairs.find_step_pairs)."""
        return self.n_bodies > EXACT_PAIRS_MAX_BODIES

    @property
    def solves_by_world(self) -> bool:
        """Whether the step's substeps run one world per thread (step.substeps_by_world):
        small worlds with no constraint in the overflow colour (whose Jacobi pass is
        solved across worlds, solver/overflow.py). Their pairs are stored world by world,
        each world's in colour order (pairs.store_in_color_order)."""
        return self.small_worlds and self.cache.n_overflow == 0

    @property
    def n_joint_slots(self) -> int:
        return self.n_worlds * self.n_joints

    @property
    def n_pairs(self) -> int:
        return self.cache.n_pairs

    @property
    def n_constraints(self) -> int:
        return self.cache.n_pairs + self.n_joint_slots

    @property
    def h(self) -> float:
        """Substep length, s."""
        return self.dt / self.substeps
