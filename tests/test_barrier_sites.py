"""The team's barriers counted at their call sites (device.COUNT_BARRIER_SITES,
python -m benchmarks.launches --barrier-sites): every barrier counted once, at the line that
called it, checked against the team's own generation counter and against the meetings its
colour passes must hold for the colours the step solved in."""

import json
import subprocess
import sys
import textwrap

import pytest

from .helpers import colours_in_small_runs

# A child process: the switch is read as the kernels compile, and this process's kernels
# may be compiled already.
_CHILD = textwrap.dedent("""
    import json
    import numpy as np
    from fx2d_gpu import device, scenes
    from fx2d_gpu.device import runtime
    runtime.ensure_initialized("cpu", kernel_profiler=True)
    device.COUNT_BARRIER_SITES = True
    from benchmarks.launches import PATHS, compiled_as_on_a_gpu, count
    from fx2d_gpu.physics.solver import team
    from tests.helpers import stacks_of_two, still_or_thrown

    with compiled_as_on_a_gpu():
        scene = scenes.pyramid(
            30, enable_sleep=False, solver="soft_step", substeps=4, arch="cpu",
            step_options=PATHS["gpu (team)"].replace(steps_in_flight=False),
        )
        for _ in range(90):  # settled: the steps keep their pairs and colours
            scene.step(1 / 60)
        steps = []
        for _ in range(6):
            counts, _ = count(scene, 1)
            starts = scene.step_context().pool.coloring.color_start.to_numpy()
            steps.append({
                "barriers": counts["barriers_per_step"],
                "sites": {
                    "|".join(map(str, site)): n for site, n in counts["barrier_sites"].items()
                },
                "sizes": np.diff(starts[: scene.n_colors + 1]).tolist(),
                "overflow": scene.n_overflow,
                "threads": team.status().step_threads,
            })
        # 260 stacks of two boxes asleep (still steps), and beside them a box thrown up
        # far away (idle steps: no pair, but a body moves).
        stacks = {}
        for thrown in (False, True):
            scene = scenes.build_scene(
                stacks_of_two(), solver="soft_step", substeps=4, arch="cpu",
                step_options=PATHS["gpu (team)"].replace(steps_in_flight=False),
            )
            still_or_thrown(scene, thrown)
            counts, _ = count(scene, 1)
            stacks[str(thrown)] = {
                "barriers": counts["barriers_per_step"],
                "sites": {
                    "|".join(map(str, site)): n for site, n in counts["barrier_sites"].items()
                },
                "pairs": len(scene.candidate_pairs()),
                "asleep": int(scene.get_state().sleeping[0].sum()),
            }
    print(json.dumps({"pyramid": steps, "stacks": stacks}))
""")


# Not marked own_processes, though its child process compiles apart from the suite's:
# .ci/run's main suite waits on it, where beside the suite it made the longer of CI's two
# lanes longer still (it took 78-89 s there, 2026-12-07).
def test_barrier_sites_add_up_to_the_barriers_and_the_colour_passes_meet_once_a_colour(arch):
    """A settled pyramid of 465 boxes (soft step, 4 substeps) on the CPU team, step by step:
    the sites' counts add up to the generation counter's barriers, and the colour pass's
    site (fused._member_pass) holds two passes (solve, relax) of every substep times the
    pass's meetings for the colours read back from the device: one after each colour, but
    after a small colour (team.SMALL_COLOR_ITEMS_CPU constraints or fewer) followed by
    another, which the first member solves on alone. Then 260 stacks of two boxes asleep:
    a still step's team meets after none of its stages, an idle one's (a box thrown far
    away moves) after those of its last substep."""
    if arch != "cpu":
        pytest.skip("barrier sites are counted on the CPU backend")
    out = subprocess.run(
        [sys.executable, "-c", _CHILD], capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0, out.stderr[-3000:]
    answer = json.loads(out.stdout.strip().splitlines()[-1])
    steps = answer["pyramid"]
    if min(step["threads"] for step in steps) < 2:
        pytest.skip("this machine gave the scene no team of several threads")
    for step in steps:
        assert step["overflow"] == 0
        assert sum(step["sites"].values()) == pytest.approx(step["barriers"])
        passes = {site: n for site, n in step["sites"].items() if site.endswith("|_member_pass")}
        assert len(passes) == 1, step["sites"]
        meetings = len(step["sizes"]) - colours_in_small_runs(step["sizes"])
        assert list(passes.values())[0] == 2 * 4 * meetings, step
    # A still step (stages.STILL: nothing to pair or join, nothing awake moves) meets after
    # no item stage; an idle one whose thrown box moves meets after those of its last
    # substep (fused._meets_after).
    still, idle = answer["stacks"]["False"], answer["stacks"]["True"]
    assert still["asleep"] == 520 and still["pairs"] == idle["pairs"] == 0, answer["stacks"]
    for step in (still, idle):
        assert sum(step["sites"].values()) == pytest.approx(step["barriers"])
    items = [
        {s: n for s, n in x["sites"].items() if s.endswith("|_member_items")} for x in (still, idle)
    ]
    assert not items[0] and sum(items[1].values()) > 0, items
