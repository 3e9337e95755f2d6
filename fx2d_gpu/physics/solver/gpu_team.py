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
stages are latency-bound anyway; a pile of a million bodies would run on 1/132 of the GPU, so
scenes above StepOptions.gpu_team_slots body slots keep the per-stage executor (a team over
the whole GPU, its blocks meeting at a grid-wide barrier, is the next step:
../docs/performance.md, "GPU step").

Memory order. CUDA's __syncthreads orders every thread's global-memory writes before the
barrier ahead of every read after it. A SPIR-V workgroup barrier as Taichi 1.7.4 emits it
covers workgroup memory only (OpControlBarrier with WorkgroupMemory | AcquireRelease
semantics), not the storage buffers that hold the engine's fields; an integer atomic there
is preceded by a device-scope acquire-release fence on storage buffers (OpMemoryBarrier,
UniformMemory), so the barrier is fenced by an atomic on each side.
"""

import taichi as ti

#: Threads of the GPU team: one block. 256 keeps the team's kernel (fused._substeps, every
#: stage inlined) under 255 registers a thread on CUDA, where a block of 1,024 would allow
#: 64 and fail to launch; a multiple of the 32-wide warp and Vulkan's usual 64-wide waves.
BLOCK_THREADS = 256

#: counts.barrier's slot the SPIR-V barrier's fences touch (team.py's slots are 0, 16, 48).
FENCE_SLOT = 32

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


def on_spirv() -> bool:
    """Whether Taichi's current backend compiles to SPIR-V (Vulkan, Metal, OpenGL)."""
    return _arch_name() in _SPIRV_ARCHS


@ti.func
def barrier(counts: ti.template()):
    """Wait until every thread of the block arrives, every write of theirs before it seen by
    every read after it (see the module's docstring: on SPIR-V an atomic's fence on each
    side)."""
    if ti.static(on_spirv()):
        ti.atomic_add(counts.barrier[FENCE_SLOT], 0)
    ti.simt.block.sync()
    if ti.static(on_spirv()):
        ti.atomic_add(counts.barrier[FENCE_SLOT], 0)


def threads_for(
    n_slots: int, serial: bool, enabled: bool, max_slots: int, software: bool = False
) -> int:
    """Threads of the GPU team for a scene of n_slots body slots: BLOCK_THREADS where the
    team is `enabled` (StepOptions.team) and the scene has at most `max_slots` slots
    (StepOptions.gpu_team_slots), else 0 (a launch per stage). `serial`: the scene's loops
    run serially (a CPU's choice; never on a GPU). `software`: Vulkan through a software
    driver (runtime.on_software_vulkan): no team, since Mesa's lavapipe compiles the
    team's kernel (every stage inlined, as one shader) for 7 minutes (the soft step's, on
    the 2-core CPU VM) to over 20 (XPBD's with the found step and the report in it), where
    a launch per stage compiles in seconds; a CPU runs faster on arch="cpu" anyway."""
    if not enabled or serial or software or n_slots > max_slots:
        return 0
    return BLOCK_THREADS
