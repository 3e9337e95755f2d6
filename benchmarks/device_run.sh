#!/usr/bin/env bash
# What a lent GPU machine runs, in parts that each fit one device command (10 minutes):
#
#   check          the GPU against the CPU backend: tests/test_vulkan.py's scenes on CUDA
#                  compared with the CPU (float tolerance), then the backend tests (those
#                  taking the arch fixture, `-m backend`; not the serial variants, which a
#                  GPU never runs) of the CI's Vulkan subset's files,
#                  contacts, small worlds, kept pairs and the solver (repeatability, batch =
#                  single, colouring) with FX2D_TEST_ARCH=$FX2D_DEVICE_ARCH
#   tests          every backend test with FX2D_TEST_ARCH=$FX2D_DEVICE_ARCH (pytest-xdist
#                  where it is installed), stopped at 9 minutes, each result in the log
#   bench [SCENE... OPTION...]
#                  python -m benchmarks --arch $FX2D_DEVICE_ARCH --no-pymunk SCENE...
#                  (none: all), its CSVs and plots packed into one archive named after the
#                  arguments; e.g. `bench large_pyramid --colors-per-launch 8` measures
#                  fewer launches a pass (StepOptions.colors_per_launch, default 2)
#   envs           python -m benchmarks.envs --arch $FX2D_DEVICE_ARCH: env-steps/s of
#                  fx2d_gpu.envs beside Gymnasium's CartPole (LunarLander needs Box2D, which
#                  the machine lacks), then the per-world values' and resets' backend tests;
#                  its CSV and plot packed into results_envs.tgz
#   viewer         python -m benchmarks.viewer on $FX2D_DEVICE_ARCH and on Vulkan (where
#                  GGUI takes the frame on the device, timed beside the host hand-off;
#                  carry .gl), its CSVs packed into results_viewer.tgz
#   compare [SCENE... OPTION...]
#                  the scenes benchmarked at before/ (a git worktree of an older revision,
#                  carried) and at this tree, in turn, twice: a change's cost on one GPU
#   grid           the grid team (CUDA: scenes over StepOptions.gpu_team_slots on a block per
#                  multiprocessor, meeting at a grid-wide barrier): its bitwise test against
#                  one block (tests/test_gpu_team.py) and the steps in flight's (small
#                  worlds', the GPU team's: tests/test_vulkan.py), 280 s at most, then the
#                  piles of 100k and 1M bodies with each solver on it, 130 s each (the per-stage figures: the committed pile CSVs,
#                  or `bench pile --step-option gpu_grid_team=false`); results_grid.tgz.
#                  Never run on a GPU yet: run it first in a session whose lease allows
#                  (at most 9 min)
#   profile        python -m benchmarks.kernel_profile --arch $FX2D_DEVICE_ARCH: Taichi's
#                  kernel profiler per offloaded task (device ms, registers a thread,
#                  block and grid size, occupancy) of the large pyramid, the 1M pile after
#                  30 steps and 65,536 small worlds, each solver; results_profile.tgz
#   lease          issue 74's figures in one command of $LEASE_S seconds (default 560), each
#                  part capped by what is left of it and its CSVs packed at once: for its
#                  first 240 s the GPU's own checks in the background (the team's steps in
#                  flight, the small worlds' interleaved state and their substeps by block
#                  and by stage bitwise in a process of their own: tests_team_in_flight.log; the backend
#                  tests of the team's and
#                  the solver's files: tests.log), meanwhile the small worlds' and
#                  cart-poles' registers and spills (benchmarks/ptx_registers.py); then
#                  alone the team's barrier, a turn's handoff and a barrier with every
#                  member's atomic or plain read after it, with no work
#                  (benchmarks/grid_sync.py), the device prefix sum's GPU and CPU passes
#                  (benchmarks/scan.py), the soft step's small worlds on the defaults,
#                  the small worlds' paths side by side at 65,536 worlds (a world a
#                  thread, coloured or not; a block of worlds at a time; by stage on the
#                  grid team, by turns or not:
#                  benchmarks/small_worlds_paths.py; the soft step first, XPBD after the
#                  pyramid's first two),
#                  with their first substep begun a world a thread
#                  (StepOptions.small_worlds_begin_by_item=false), and not interleaved
#                  (StepOptions.interleave_small_worlds),
#                  the large pyramid with and without colours by turns
#                  (StepOptions.colors_by_turns; and by turns without its body stages:
#                  stages_by_turns), the 100k pile on the grid team;
#                  results_lease.tgz.
#   lease_more     right after it, in the rest of the 15 minutes (LEASE_S=what is left): the
#                  1M pile on its default path (soft step), the cart-pole envs and their host side
#                  (benchmarks/env_host.py), XPBD's
#                  small worlds (begun by item and not) and pyramid (by turns and not),
#                  the kernel profiles of the small worlds by block and of the 1M pile,
#                  XPBD's small worlds not interleaved, Nsight Compute on the small
#                  worlds' step kernel (occupancy, warp stalls, memory:
#                  benchmarks/step_loop.py), then as far as it goes: the pyramid on 32 blocks
#                  (StepOptions.gpu_grid_blocks), the small worlds at blocks of 512 and with
#                  Taichi's advanced_optimization, the 100k pile per stage, the 1M pile on
#                  the grid team, the piles with XPBD, the levels env (issue 78);
#                  results_lease_more.tgz.
#                  Earlier leases' logs: results/NVIDIA_H200/session_2026-12-04*.txt
#   session        for a 15-minute lease, one 10-minute command: the GPU against the CPU
#                  beside every backend test (4 min, pytest-xdist), three benchmark
#                  scenes with each solver (1.7 min each; large worlds on the GPU team),
#                  the large pyramid with each solver launching per stage (the GPU team
#                  off: --step-option team=false) and the large pyramid's stage profile
#                  (the viewer benchmark: `viewer`)
#
# Logs and results go to $OUT (the device tool brings back at most 8 files): <part>.log,
# gpu.txt (nvidia-smi), results<_arguments>.tgz (bench: benchmarks/results/<device>/).
# Unpack with `tar -xzf results.tgz -C benchmarks/results` and commit the CSVs.
#
# Everything it reads is in the repository (the scene files are fx2d_gpu/examples/). Here,
# once, the wheels the machine lacks (it has no network), into .whl/ (git-ignored):
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#       --platform manylinux_2_27_x86_64 --platform manylinux2014_x86_64 -d .whl \
#       taichi==1.7.4 dill gymnasium cloudpickle farama-notifications typing_extensions
# Then each device run: carry [".whl"], command
#   python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl &&
#   export PYTHONPATH=/tmp/site:$PWD && bash benchmarks/device_run.sh check
# Where the session's time allows (the lease's parts compile on the CUDA stand-in driver:
# ~18 minutes on the 2-core VM), a kernel cache first, so that the lent machine's minutes go
# to measuring rather than compiling (benchmarks/device_cache.py; --slim-wheels makes room
# for it in the 64 MiB that travel):
#   python -m benchmarks.device_cache --slim-wheels
# then carry [".whl", ".ticache"]; kernel_cache.txt in $OUT says what was found.
set -uo pipefail
cd "$(dirname "$0")/.."
part=${1:?usage: bash benchmarks/device_run.sh check | tests | bench [SCENE ...] | envs | lease | lease_more | grid | profile | session | viewer | compare [SCENE ...]}
shift
arch=${FX2D_DEVICE_ARCH:-cuda}
out=${OUT:-/tmp/fx2d_device_run}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
nvidia-smi >"$out/gpu.txt" 2>&1 || echo "no nvidia-smi" >"$out/gpu.txt"
log="$out/$part.log"

# A kernel cache made without a GPU (`python -m benchmarks.device_cache`, then carry
# .ticache beside .whl): Taichi's offline cache of the kernels these parts compile, keyed
# as an H100 or H200 keys them (sm_90, 132 multiprocessors). Unpacked where Taichi looks,
# a kernel found there skips Taichi's own passes (about half of a cold first step; LLVM's
# code generation and the driver's assembly still run). A changed engine gives other keys:
# nothing breaks, less is found. Unpacked once a machine: a later part on the same warm
# machine (lease_more after lease) keeps what the earlier ones added, which the archive's
# index would hide again. At the end, kernel_cache.txt says how many kernels were at hand
# and how many this part compiled anew (misses, and kernels the cache never held). Not
# while device_cache.py makes the cache (FX2D_DEVICE_WARMING).
carried_cache=$(ls .ticache/cuda-*.txz 2>/dev/null | head -1)
if [[ -n $carried_cache && $arch == cuda && -z ${FX2D_DEVICE_WARMING:-} ]]; then
    export TI_OFFLINE_CACHE_FILE_PATH=${TI_OFFLINE_CACHE_FILE_PATH:-/tmp/fx2d_ticache_cuda}
    if [[ ! -e $TI_OFFLINE_CACHE_FILE_PATH/ticache.tcb ]]; then
        mkdir -p "$TI_OFFLINE_CACHE_FILE_PATH"
        # (Python's tarfile where tar has no xz at hand.)
        tar -xJf "$carried_cache" -C "$TI_OFFLINE_CACHE_FILE_PATH" 2>/dev/null \
            || python3 -c 'import sys, tarfile
tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
                "$carried_cache" "$TI_OFFLINE_CACHE_FILE_PATH"
    fi
    cache_mark=$(mktemp)
    # The engine's sources as benchmarks/device_cache.py hashes them (engine_sources_hash).
    sources=$(find fx2d_gpu -name '*.py' -print0 | LC_ALL=C sort -z | xargs -0 cat \
        | sha256sum | cut -c1-12)
    cache_report() {
        local found new
        found=$(find "$TI_OFFLINE_CACHE_FILE_PATH" -name '*.tic' ! -newer "$cache_mark" | wc -l)
        new=$(find "$TI_OFFLINE_CACHE_FILE_PATH" -name '*.tic' -newer "$cache_mark" | wc -l)
        echo "$(date +%T) $part: $found kernels at hand from $(basename "$carried_cache")" \
            "and earlier parts (this tree's engine: cuda-$sources.txz), $new compiled here" \
            >>"$out/kernel_cache.txt"
        if (( new > 0 )); then
            # What Taichi made of this device, which enters the keys: were these not the
            # CUDA stand-in's (grid 8448, blocks 1024), its kernels are keyed apart.
            "$python" -c 'import taichi as ti
ti.init(arch=ti.cuda, offline_cache=False, log_level=ti.ERROR)
config = ti.lang.impl.current_cfg()
print("  Taichi here: grid", config.saturating_grid_dim, "blocks", config.max_block_dim)' \
                >>"$out/kernel_cache.txt" 2>&1
        fi
    }
    trap cache_report EXIT
fi

case "$part" in
check)
    {
        echo "== $arch against the CPU backend (tests/test_vulkan.py)"
        timeout 240 "$python" -m pytest -q -rs -p no:cacheprovider \
            "tests/test_vulkan.py::test_scenes_on_${arch}_match_the_cpu_backend"
        echo "== the CI's Vulkan subset, repeatability, batch = single (FX2D_TEST_ARCH=$arch)"
        FX2D_TEST_ARCH=$arch timeout 300 "$python" -m pytest -v -rs -p no:cacheprovider \
            -m backend -k "not serial" tests/test_stages.py tests/test_narrow_phase.py \
            tests/test_broad_phase.py tests/test_chains.py tests/test_contact_events.py \
            tests/test_small_worlds.py tests/test_residency.py tests/test_pair_reuse.py \
            tests/test_solver.py tests/test_gpu_team.py \
            tests/test_sleep_islands.py::test_sleep_in_the_teams_launch_is_its_own_launches \
            tests/test_sleep_islands.py::test_the_wake_in_the_teams_kept_launch_is_its_own_launch
    } 2>&1 | tee "$log"
    ;;
tests)
    workers=()
    "$python" -c "import xdist" 2>/dev/null && workers=(-n 8)
    FX2D_TEST_ARCH=$arch timeout 540 "$python" -m pytest -v -rs -p no:cacheprovider \
        -m backend "${workers[@]}" --durations=20 2>&1 | tee "$log"
    ;;
bench)
    results=$(mktemp -d)
    tag=$(printf '_%s' "$@" | tr -c 'A-Za-z0-9._\n-' '_')
    log="$out/bench$tag.log"
    timeout 560 "$python" -m benchmarks --arch "$arch" --no-pymunk --results "$results" "$@" \
        2>&1 | tee "$log"
    tar -czf "$out/results$tag.tgz" -C "$results" .
    ;;
envs)
    results=$(mktemp -d)
    timeout 420 "$python" -m benchmarks.envs --arch "$arch" --results "$results" 2>&1 \
        | tee "$log"
    FX2D_TEST_ARCH=$arch timeout 120 "$python" -m pytest -q -rs -p no:cacheprovider \
        -m backend tests/test_world_params.py tests/test_world_resets.py 2>&1 | tee -a "$log"
    tar -czf "$out/results_envs.tgz" -C "$results" .
    ;;
lease | lease_more)
    deadline=$(( $(date +%s) + ${LEASE_S:-560} ))
    # A part's cap: what it asks for (times FX2D_DEVICE_CAP_SCALE, where a slower machine
    # runs the parts: benchmarks/device_cache.py on the CUDA stub), or what is left of the
    # lease where that is less. A capped part is interrupted (SIGINT), not terminated: its
    # process exits as after Ctrl-C, and Taichi writes the kernels it compiled to its
    # offline cache, where a later part finds them.
    cap() {
        local want=$(( $1 * ${FX2D_DEVICE_CAP_SCALE:-1} )) left=$(( deadline - $(date +%s) ))
        (( left < want )) && echo $(( left > 1 ? left : 1 )) || echo "$want"
    }
    capped() { local want=$1; shift; timeout -s INT -k 20 "$(cap "$want")" "$@"; }
    results=$(mktemp -d)
    pack() { tar -czf "$out/results_$part.tgz" -C "$results" .; }
    bench() {
        local want=$1; shift
        echo "== $(date +%T) benchmarks $* (cap $(cap "$want") s)"
        capped "$want" "$python" -m benchmarks --arch "$arch" --no-pymunk --no-box2d \
            --no-plot --results "$results" "$@"
        echo "== rc $?"; pack
    }
    paths() {  # the small worlds' paths side by side (benchmarks/small_worlds_paths.py)
        echo "== $(date +%T) small worlds' paths: $1 (cap $(cap "$2") s)"
        capped "$2" "$python" -m benchmarks.small_worlds_paths --arch "$arch" \
            --solver "$1" --results "$results"
        echo "== rc $?"; pack
    }
    profile() {  # scene, cap, then kernel_profile's other arguments (--step-option ...)
        echo "== $(date +%T) kernel profile: $*"
        capped "$2" "$python" -m benchmarks.kernel_profile --arch "$arch" \
            --scenes "$1" --results "$results/profile_$1" "${@:3}"
        echo "== rc $?"; pack
    }
    # On the CUDA stub (benchmarks/device_cache.py sets FX2D_DEVICE_WARMING: the parts run
    # there only to compile their kernels), neither the checks, whose answers would be the
    # stub's zeros, nor the registers, which compile past the cache.
    checks=yes
    [[ -n ${FX2D_DEVICE_WARMING:-} ]] && checks=no
    if [[ $part == lease && $checks == yes ]]; then
        workers=()
        "$python" -c "import xdist" 2>/dev/null && workers=(-n 6)
        # SIGINT at the cap: pytest then still prints why each failure failed. The small
        # worlds' substeps a block of worlds at a time (2026-12-06: blocks of 256 threads
        # at the block's barrier) and by stage (2026-12-05, eleventh session; the benchmarks below
        # measure them) bit for bit as a world a thread on the grid team; the team's
        # steps in flight alone in a process of their own: twice they failed (2026-12-04,
        # second session) or never started (third) among the others; then the small
        # worlds' interleaved state (a GPU's default since 2026-12-05) bit for bit as not.
        FX2D_TEST_ARCH=$arch capped 240 "$python" -m pytest -v -rfs \
            -p no:cacheprovider --durations=5 \
            "tests/test_vulkan.py::test_small_worlds_by_block_on_cuda_bitwise_as_a_world_a_thread" \
            "tests/test_vulkan.py::test_small_worlds_by_stage_on_cuda_bitwise_as_a_world_a_thread" \
            "tests/test_vulkan.py::test_team_steps_in_flight_on_${arch}_bitwise_as_one_by_one" \
            "tests/test_vulkan.py::test_small_worlds_interleaved_on_${arch}_bitwise_as_not" \
            >"$out/tests_team_in_flight.log" 2>&1 &
        in_flight=$!
        # The backend tests of the files the grid team's default (gpu_grid_team on, up to
        # gpu_grid_team_slots) and the team's stages touch.
        FX2D_TEST_ARCH=$arch capped 240 "$python" -m pytest -v -rfs \
            -p no:cacheprovider "${workers[@]}" --durations=15 -m backend -k "not serial" \
            tests/test_gpu_team.py tests/test_solver.py tests/test_pair_reuse.py \
            tests/test_sleep_islands.py tests/test_small_worlds.py tests/test_stages.py \
            tests/test_env_device_step.py >"$out/tests.log" 2>&1 &
        tests=$!
    fi
    {
        if [[ $part == lease && $checks == yes ]]; then
            # Mostly host work (compiling, ptxas) while the tests hold the GPU: registers
            # and spills of the small worlds' kernels on the device's own driver, beside
            # what the CUDA stub gave without a GPU (results/CUDA_stub-sm_90: 128 registers
            # at StepOptions.gpu_world_block=256, 168 at Taichi's block of 128).
            echo "== $(date +%T) registers and spills (ptxas -v on Taichi's PTX)"
            PATH=$PATH:/usr/local/cuda/bin capped 80 "$python" \
                -m benchmarks.ptx_registers --scenes batched_small cart_poles \
                --results "$results"
            echo "== rc $?"; pack
            while kill -0 "$tests" 2>/dev/null || kill -0 "$in_flight" 2>/dev/null; do
                sleep 1
            done  # (not this subshell's children)
            echo "== $(date +%T) tests done; the GPU is the benchmarks' alone from here"
        fi
        if [[ $part == lease ]]; then
            # A barrier and a turn's handoff alone, no work between (a block, grid teams of
            # 2, 8, 32 and 132 blocks): how much of the grid team's 7.7-10.4 us a barrier
            # in the pyramid's step (2026-12-04) is the meeting itself.
            echo "== $(date +%T) the team's meetings alone"
            capped 40 "$python" -m benchmarks.grid_sync --arch "$arch" \
                --results "$results"
            echo "== rc $?"; pack
            # The device prefix sum (a small worlds' step scans three times, a pile's more):
            # its GPU passes, a thread a number since 2026-12-05, beside the CPU's blocked
            # passes (a thread walking 256 numbers, as a GPU's did before), each checked
            # against NumPy.
            echo "== $(date +%T) the prefix sums"
            capped 40 "$python" -m benchmarks.scan --arch "$arch" --results "$results"
            echo "== rc $?"; pack
            # Each part's first measurement, most wanted first (the lease runs out before
            # its tail: 2026-12-04's never reached the 1M pile). The small worlds with
            # their state interleaved (StepOptions.interleave_small_worlds, a GPU's
            # default since 2026-12-05: a warp's worlds read neighbouring addresses) and
            # not (7.90 M world-steps/s on 2026-12-04, soft step, 65,536 worlds, at
            # Taichi's block of 128 and 168 registers; 128 registers at the block of 256,
            # StepOptions.gpu_world_block, the default since); and with their first
            # substep up to the narrow phase a thread a world, not a thread an item
            # (StepOptions.small_worlds_begin_by_item, CUDA's default since 2026-12-05's
            # tenth session: the narrow phase on a thread a pair).
            # Their substeps by stage on the grid team (StepOptions.small_worlds_by_stage,
            # 2026-12-05's eleventh session: every stage's items shared by 33,792 threads,
            # colour after colour, where a world a thread gives an SM ~16 warps, each
            # load waiting on the last) and by turns, beside a world a thread with and
            # without their colours (color_small_worlds, which by stage needs): 65,536
            # worlds, one process, one pool (benchmarks/small_worlds_paths.py; the first
            # path is the defaults', as `bench batched_small` measured them at 65,536).
            # A block of worlds at a time (StepOptions.small_worlds_by_block, 2026-12-06:
            # 28 worlds of 8 bodies on a block of 256 threads sharing each stage, meeting
            # at the block's barrier) is the third path, before by stage.
            paths soft_step 180
            # The large pyramid on the grid team (1.62 ms on 2026-12-04 at 122 barriers a
            # step; 85 a kept step now), and with a pass's colours by turns
            # (StepOptions.colors_by_turns: a counter and two fences a constraint where the
            # team met after each colour), its body stages by turns too (stages_by_turns,
            # colors_by_turns' default: ~3 barriers a kept step) and not (29); the tests
            # above check both bit for bit on CUDA first.
            bench 45 --solver soft_step large_pyramid
            bench 45 --solver soft_step large_pyramid --step-option colors_by_turns=true
            paths xpbd 180
            # (Then the halves of the A/Bs that say what an earlier change gave.)
            bench 50 --solver soft_step batched_small --step-option small_worlds_begin_by_item=false
            bench 50 --solver soft_step batched_small --step-option interleave_small_worlds=false
            bench 45 --solver soft_step large_pyramid --step-option colors_by_turns=true \
                --step-option stages_by_turns=false
            # The grid team at scale (the default up to 200,000 body slots): 100k, soft step.
            bench 90 --solver soft_step pile --piles 100000
        else
            # The 1M pile on its default path (a launch per stage group: over
            # gpu_grid_team_slots; never measured since 2026-11's 405 ms), the cart-pole
            # envs (7.12 M env-steps/s at 65,536 on 2026-12-04; interleaved now), XPBD's
            # small worlds and pyramid on the defaults and by turns, the pile's kernel
            # profile (issue 74's "know before changing"), then XPBD's other halves of the
            # A/Bs (lease tells the direction with the soft step).
            bench 120 --solver soft_step pile --piles 1000000
            echo "== $(date +%T) cart-pole envs"
            capped 90 "$python" -m benchmarks.envs --arch "$arch" --results "$results"
            echo "== rc $?"; pack
            # The CartPole vector step's phases at 65,536 envs, the device's tasks taken off
            # (env_host.csv: what the host, its copies and waits cost), on the env's device
            # path (envs/device_step.py, 2026-12-05: 3 host arrays a step) and its host path
            # (6; 16 before that day).
            echo "== $(date +%T) the CartPole env's host side"
            capped 70 "$python" -m benchmarks.env_host --arch "$arch" --envs 65536 \
                --steps 10 --results "$results"
            echo "== rc $?"; pack
            bench 60 --solver xpbd batched_small
            bench 60 --solver xpbd batched_small --step-option small_worlds_begin_by_item=false
            bench 60 --solver xpbd large_pyramid --step-option colors_by_turns=true
            bench 60 --solver xpbd large_pyramid
            bench 60 --solver xpbd large_pyramid --step-option colors_by_turns=true \
                --step-option stages_by_turns=false
            # The small worlds a block of worlds at a time (2026-12-06), task by task: its
            # blocks' loop's device ms, registers and blocks a multiprocessor.
            profile batched_small 90 --step-option color_small_worlds=true \
                --step-option small_worlds_by_block=true
            profile pile 90
            bench 60 --solver xpbd batched_small --step-option interleave_small_worlds=false
            echo "== $(date +%T) Nsight Compute: the small worlds' step kernel (XPBD, 65,536 worlds)"
            ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
            if [[ -n $ncu && $checks == yes ]]; then
                # The one kernel that took 90 % of the step (168 registers, 15.2 ms of 16.9
                # on 2026-12-04), in a step in flight (the first step takes _substeps): its
                # task 37 with the GPU's defaults of 2026-12-05's tenth session (the entry
                # with the most registers among _worlds_in_flight's on the CUDA stub,
                # ptx_registers --no-gpu; 35 before that session, not 27 as written here).
                # Sections, not --set full: each pass replays the kernel.
                timeout "$(cap 120)" "$ncu" -f -c 1 \
                    -k "regex:_worlds_in_flight_c[0-9]+_0_kernel_37_range_for" \
                    --section SpeedOfLight --section Occupancy --section LaunchStats \
                    --section WarpStateStats --section SchedulerStats \
                    --section MemoryWorkloadAnalysis \
                    -o "$out/ncu_small_worlds" "$python" -m benchmarks.step_loop --worlds 65536 \
                    --steps 3
                echo "== rc $?"
                # (The table in the results' archive, which the lease's unpacking commits;
                # 2026-12-04's, beside the report, never came back.)
                "$ncu" --import "$out/ncu_small_worlds.ncu-rep" --page details --csv \
                    >"$results/ncu_small_worlds.csv" 2>&1
                pack
            else
                echo "no ncu on this machine"
            fi
            # Then, as far as the lease goes: the pyramid on fewer blocks (a barrier's round
            # trip grows with the blocks that arrive and spin; 32 blocks, 8,192 threads,
            # still give each of the pyramid's 5,051 bodies and 2,266 constraints of a
            # colour a thread), the small worlds' other blocks and Taichi's
            # advanced_optimization, 100k per stage, 1M on the grid team.
            bench 45 --solver soft_step large_pyramid --step-option gpu_grid_blocks=32
            bench 60 --solver xpbd large_pyramid --step-option gpu_grid_blocks=32
            bench 50 --solver soft_step batched_small --step-option gpu_world_block=512
            bench 50 --solver soft_step batched_small --taichi-option advanced_optimization=true
            bench 90 --solver soft_step pile --piles 100000 --step-option gpu_grid_team=false
            bench 120 --solver soft_step pile --piles 1000000 \
                --step-option gpu_grid_team_slots=2000000
            bench 60 --solver xpbd batched_small --step-option gpu_world_block=512
            bench 150 --solver xpbd pile --piles 100000 1000000 \
                --step-option gpu_grid_team_slots=2000000
            echo "== $(date +%T) levels env (issue 78; jax2d where installed)"
            capped 60 "$python" -m benchmarks.levels --arch "$arch" \
                --envs 1024,16384 --results "$results"
            echo "== rc $?"; pack
            # The lander's and the car's vector steps phase by phase (2026-12-06, seventeenth
            # session: both on the device's path; the lander's host path took 259 ms a
            # vector step of 65,536 on the H200), in a folder of their own (env_host.csv
            # above is CartPole's).
            echo "== $(date +%T) the Lander and Levels envs' host side"
            capped 90 "$python" -m benchmarks.env_host --arch "$arch" \
                --env fx2d/Lander-v0,fx2d/Levels-v0 --envs 16384 --steps 10 \
                --results "$results/lidar_envs"
            echo "== rc $?"; pack
        fi
    } 2>&1 | tee "$log"
    ;;
session)
    # Everything at once on a 16-core machine, in one 10-minute command: the CUDA-vs-CPU
    # scenes beside every backend test (pytest-xdist, -v: each result is in the log even
    # where the cap stops the run), then the large pyramid, many pyramids and small worlds
    # for both solvers, the viewer's frame geometry and offscreen GGUI frames (GGUI needs
    # the Vulkan loader: carry .gl, see the device tool's README), and the large pyramid's
    # stage profile, each capped so the whole fits; results.tgz is packed after each part.
    # (Measured on an H200: the backend tests take 3.5 min at -n 14, more than 240 s on
    # 2026-11-27 (487 of them, the last one cut), the benchmarks 1.3 min a solver, the
    # viewer 35 s; the whole command 7.6 min of the 10.)
    workers=()
    "$python" -c "import xdist" 2>/dev/null && workers=(-n 14)
    timeout 240 "$python" -m pytest -q -rs -p no:cacheprovider \
        "tests/test_vulkan.py::test_scenes_on_${arch}_match_the_cpu_backend" \
        >"$out/check.log" 2>&1 &
    FX2D_TEST_ARCH=$arch timeout 280 "$python" -m pytest -v -rfs -p no:cacheprovider \
        -m backend -k "not serial" "${workers[@]}" --durations=15 tests/ >"$log" 2>&1
    wait
    results=$(mktemp -d)
    pack() { tar -czf "$out/results.tgz" -C "$results" .; }
    for solver in xpbd soft_step; do
        timeout 100 "$python" -m benchmarks --arch "$arch" --no-pymunk --no-plot \
            --solver $solver --results "$results" large_pyramid many_pyramids \
            batched_small >>"$out/bench.log" 2>&1
        pack
    done
    # Steps waiting for each answer, beside the default's steps in flight (solver/
    # in_flight.py: small worlds', and the GPU team's large ones; CSVs named
    # *_steps_in_flight-False*).
    for solver in xpbd soft_step; do
        timeout 60 "$python" -m benchmarks --arch "$arch" --no-pymunk --no-box2d --no-plot \
            --solver $solver --step-option steps_in_flight=false --results "$results" \
            large_pyramid batched_small >>"$out/bench.log" 2>&1
        pack
    done
    # The GPU team against a launch per stage group (issue 74): the same scenes with the
    # team off (their CSVs are named *_team-False*).
    for solver in xpbd soft_step; do
        timeout 60 "$python" -m benchmarks --arch "$arch" --no-pymunk --no-box2d --no-plot \
            --solver $solver --step-option team=false --results "$results" large_pyramid \
            >>"$out/bench.log" 2>&1
        pack
    done
    timeout 30 "$python" -m benchmarks --arch "$arch" --profile --results "$results" \
        large_pyramid >"$out/profile.log" 2>&1
    pack
    ;;
grid)
    FX2D_TEST_ARCH=$arch timeout 280 "$python" -m pytest -v -rs -p no:cacheprovider \
        --durations=10 tests/test_gpu_team.py \
        "tests/test_vulkan.py::test_steps_in_flight_on_${arch}_bitwise_as_one_by_one" \
        "tests/test_vulkan.py::test_team_steps_in_flight_on_${arch}_bitwise_as_one_by_one" \
        2>&1 | tee "$log"
    results=$(mktemp -d)
    for solver in soft_step xpbd; do
        timeout 130 "$python" -m benchmarks --arch "$arch" --no-pymunk --no-box2d --no-plot \
            --solver $solver --results "$results" pile --piles 100000 1000000 2>&1 \
            | tee -a "$log"
        tar -czf "$out/results_grid.tgz" -C "$results" .
    done
    ;;
profile)
    results=$(mktemp -d)
    timeout 420 "$python" -m benchmarks.kernel_profile --arch "$arch" --results "$results" \
        2>&1 | tee "$log"
    tar -czf "$out/results_profile.tgz" -C "$results" .
    ;;
viewer)
    results=$(mktemp -d)
    for viewer_arch in "$arch" vulkan; do
        timeout 200 "$python" -m benchmarks.viewer --arch "$viewer_arch" --legacy-max 1000 \
            --results "$results" 2>&1 | tee -a "$log"
    done
    tar -czf "$out/results_viewer.tgz" -C "$results" .
    ;;
compare)
    # The named scenes (after --: benchmark options) at an older revision and at this
    # tree, in turn, twice: a change's cost measured on one machine. Here, first:
    #   git worktree add before REV    (before/ is git-ignored: carry ["before", ".whl"])
    results=$(mktemp -d)
    for round in 1 2; do
        for tree in before .; do
            echo "== ${tree/./this tree} (round $round)" | tee -a "$log"
            (cd "$tree" && PYTHONPATH="$PWD:${PYTHONPATH:-}" timeout 150 "$python" -m benchmarks \
                --arch "$arch" --no-pymunk --no-plot --results "$results/${tree/./after}_$round" \
                "$@") 2>&1 | tee -a "$log"
        done
    done
    tar -czf "$out/results_compare.tgz" -C "$results" .
    ;;
*)
    echo "unknown part: $part (check | tests | bench | envs | lease | lease_more | grid | profile | session | viewer | compare)" >&2
    exit 2
    ;;
esac
