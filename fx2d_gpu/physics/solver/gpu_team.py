"""The CPU team's algorithm on a GPU: one block of threads runs a step's team launches.

Why: on a GPU backend the per-stage executor (solver/staged.py) launches a kernel for every
stage group and every few colours of a pass: 141 launches a step in the awake large pyramid
(XPBD, 11 substeps, 10 colours; `python -m benchmarks.launches`), and each launch costs tens
of microseconds of host time (Taichi 1.7.4 on CUDA: ~40 us; docs/performance.md), while the
GPU does microseconds of work in each. The CPU team (solver/team.py, solver/fused.py) already
runs a step's substeps, and where last step's pairs are kept most of the step, in one launch
whose members meet at barriers between stages. On a GPU its members are the threads of one
block (a CUDA thread block, a Vulkan or Metal workgroup), and its barrier is the block's
(ti.simt.block.sync): every thread of a block runs at once by definition, so nothing has to
be probed, no wait can run out, and a barrier costs tens of nanoseconds, not a launch. The
same stages, items and colours in the same order as the CPU team: on one backend, the same
results bit for bit as the per-stage executor.

What it costs: one block uses one of the GPU's multiprocessors (an H200 has 132). A scene of
a few thousand bodies gives each of the block's threads a handful of items a stage, and its
stages are latency-bound anyway; a pile of a million bodies would run on 1/132 of the GPU.

The grid team (CUDA, StepOptions.gpu_grid_team). Scenes above StepOptions.gpu_team_slots
body slots, up to StepOptions.gpu_grid_team_slots, run on a team of a block per
multiprocessor (grid_blocks), whose blocks meet at a
grid-wide barrier (team.barrier): the block's barrier, then its first thread (leads_block)
fences, arrives at a generation counter in global memory and spins until the last block
arrives, fences again, and the block's barrier once more, which is how CUDA's cooperative
groups synchronise a grid. It relies on every block of the launch being resident at once:
a block per multiprocessor is, as a block of BLOCK_THREADS threads of at most 128 registers
(Taichi's launch bound) fits one twice over (65,536 registers), and the launch's stream
runs nothing beside it. Were a
block not resident (another process's kernels on the same GPU at the same moment), the
others' wait runs out (GRID_SPIN_LIMIT), the step raises (team.check) and later steps launch
per stage. Vulkan and Metal promise no such residency across workgroups: there large scenes
keep the per-stage executor.

Memory order. CUDA's __syncthreads orders every thread's global-memory writes before the
barrier ahead of every read after it. A SPIR-V workgroup barrier as Taichi 1.7.4 emits it
covers workgroup memory only (OpControlBarrier with WorkgroupMemory | AcquireRelease
semantics), not the storage buffers that hold the engine's fields; an integer atomic there
is preceded by a device-scope acquire-release fence on storage buffers (OpMemoryBarrier,
UniformMemory), so the barrier is fenced by an atomic on each side (on Vulkan at a slot for
each subgroup lane: device.FENCE_SLOTS).
"""

import taichi as ti

from ...device import BARRIER_SLOTS, FENCE_SLOTS, runtime

#: Threads of the GPU team: one block. Taichi 1.7.4 bounds a CUDA kernel to two resident
#: blocks a multiprocessor (.minnctapersm 2), so 256 caps a thread of the team's kernel
#: (fused._substeps, every stage inlined) at 128 registers: ptxas fits the soft step's in
#: them with 12 bytes spilled and XPBD's with 32 (benchmarks.ptx_registers --no-gpu,
#: 2026-12-04), where a block of 1,024 would allow 32; a multiple of the 32-wide warp and
#: Vulkan's usual 64-wide waves.
BLOCK_THREADS = 256

#: Most blocks of a grid team: its BLOCK_THREADS * blocks members keep team.share's
#: r * member (below members**2) within 32 bits (46,340 = floor(sqrt(2**31 - 1))). An H200
#: has 132 multiprocessors; a GPU with more runs its grid team on this many.
MAX_GRID_BLOCKS = 46_340 // BLOCK_THREADS

#: counts.barrier's first slot the SPIR-V barrier's fences touch (team.py's slots are 0, 16,
#: 48): on Vulkan a thread's is FENCE_SLOT + its lane in its subgroup, modulo
#: device.FENCE_SLOTS; elsewhere FENCE_SLOT.
FENCE_SLOT = BARRIER_SLOTS - FENCE_SLOTS
#: Most spins of a grid team block's wait at the grid barrier (team.barrier): an L2 atomic
#: a spin, ~0.3-1 us, so 1-4 s. A legitimate wait is one stage of one block's share
#: (microseconds to milliseconds); a block that is not resident never arrives, and the
#: CPU's SPIN_LIMIT (200 million) would hang the GPU for minutes.
GRID_SPIN_LIMIT = 4_000_000

#: Taichi's CPU architectures: the CPU team runs there (solver/team.py).
_CPU_ARCHS = ("x64", "arm64")
#: Taichi's SPIR-V architectures (Vulkan, Metal, OpenGL): their block barrier needs fences.
_SPIRV_ARCHS = ("vulkan", "metal", "opengl", "gles")


def _arch_name() -> str:
    return ti.lang.impl.current_cfg().arch.name


def on_gpu() -> bool:
    """Whether Taichi's current backend is a GPU's (compile-time: kernels branch on it with
    ti.static)."""
    return _arch_name() not in _CPU_ARCHS


def on_cuda() -> bool:
    """Whether Taichi's current backend is CUDA, where a grid team may run (compile-time)."""
    return _arch_name() == "cuda"


def on_spirv() -> bool:
    """Whether Taichi's current backend compiles to SPIR-V (Vulkan, Metal, OpenGL)."""
    return _arch_name() in _SPIRV_ARCHS


@ti.func
def barrier(counts: ti.template()):
    """Wait until every thread of the block arrives, every write of theirs before it seen by
    every read after it (see the module's docstring: on SPIR-V an atomic's fence on each
    side)."""
    fence = FENCE_SLOT
    if ti.static(on_spirv()):
        # (An atomic's fence covers the thread's own writes wherever it lands: a subgroup's
        # lanes at slots of their own, not every thread queued on one. Taichi 1.7.4's
        # ti.simt.block.thread_idx fails to build on Vulkan: vkCreateComputePipelines.
        # Not on Metal, whose build of the subgroup's lane is untried here.)
        if ti.static(_arch_name() == "vulkan"):
            fence += ti.simt.subgroup.invocation_id() % FENCE_SLOTS
        ti.atomic_add(counts.barrier[fence], 0)
    ti.simt.block.sync()
    if ti.static(on_spirv()):
        ti.atomic_add(counts.barrier[fence], 0)


@ti.func
def leads_block():
    """Whether this thread is its block's first (CUDA): the one that meets the other blocks
    at a grid team's barrier. A team's loop has one item a thread, its blocks of
    BLOCK_THREADS items (the loop's block_dim), so the thread's index in the grid tells.
    (Taichi 1.7.4's ti.simt.block.global_thread_idx hands back its compiler's bare
    expression on CUDA, which takes no arithmetic until wrapped.)"""
    return ti.lang.expr.Expr(ti.simt.block.global_thread_idx()) % BLOCK_THREADS == 0


def threads_for(
    n_slots: int,
    serial: bool,
    enabled: bool,
    max_slots: int,
    software: bool = False,
    grid_blocks: int = 0,
    max_grid_slots: int = 0,
) -> int:
    """Threads of the GPU team for a scene of n_slots body slots: BLOCK_THREADS where the
    team is `enabled` (StepOptions.team) and the scene has at most `max_slots` slots
    (StepOptions.gpu_team_slots); above them and up to `max_grid_slots`
    (StepOptions.gpu_grid_team_slots), a grid team of `grid_blocks` blocks where that is
    more than one (CUDA: the multiprocessors, grid_blocks); else 0 (a launch per stage).
    `serial`: the scene's loops run serially (a CPU's choice; never on a GPU). `software`:
    Vulkan through a software driver (runtime.on_software_vulkan): no team, since Mesa's
    lavapipe compiles the team's kernel (every stage inlined, as one shader) for 7 minutes
    (the soft step's, on the 2-core CPU VM) to over 20 (XPBD's with the found step and the
    report in it), where a launch per stage compiles in seconds; a CPU runs
    faster on arch="cpu" anyway."""
    if not enabled or serial or software:
        return 0
    if n_slots <= max_slots:
        return BLOCK_THREADS
    if grid_blocks > 1 and n_slots <= max_grid_slots:
        return grid_blocks * BLOCK_THREADS
    return 0


def grid_blocks(asked: int) -> int:
    """Blocks of a grid team on this backend: `asked` (StepOptions.gpu_grid_blocks) where it
    is more than 0, else the GPU's multiprocessors (a block each: see the module's
    docstring), at most MAX_GRID_BLOCKS; 0 (no grid team) off CUDA or where the driver
    cannot say."""
    if not on_cuda():
        return 0
    if asked > 0:
        return asked
    return min(runtime.cuda_multiprocessors() or 0, MAX_GRID_BLOCKS)
