"""The benchmark suite on tiny sizes, so its code cannot rot (no timing is asserted), and the
benchmark scenes against their definitions."""

import csv
import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import fx2d_gpu
from benchmarks import box2d_native, box2d_scenes, common, suite
from benchmarks.common import paired_ratio, time_windows_side_by_side
from benchmarks.pymunk_scenes import build_space
from fx2d_gpu import load_scene, scenes


@pytest.mark.slow  # every benchmark scene beside pymunk and Box2D (~15-35 s)
def test_quick_suite_runs_every_scene_and_writes_csv_and_plots(tmp_path, arch):
    names = [name for name in suite.SCENES if name != "compile"]
    out = suite.run(names, arch=arch, quick=True, results=tmp_path)
    sizes = suite.Sizes(quick=True, gpu=False)
    by_scene = {name: {r["engine"]: r for r in rows} for name, rows in out.items()}
    base = sizes.pyramid_base
    pyramid = by_scene["large_pyramid"]
    assert pyramid["fx2d_gpu"]["bodies"] == base * (base + 1) // 2 + 1
    assert pyramid["fx2d_gpu"]["stands"] is True  # 7 steps: nothing can have fallen yet
    assert pyramid["fx2d_gpu"]["contact_points"] > 0
    assert pyramid["fx2d_gpu (no sleep)"]["bodies"] == pyramid["fx2d_gpu"]["bodies"]
    # pymunk is the dev and bench extras' (a GPU machine may lack it): its column where
    # it is installed, as Box2D's below.
    with_pymunk = importlib.util.find_spec("pymunk") is not None
    if with_pymunk:
        assert pyramid["pymunk"]["bodies"] == pyramid["fx2d_gpu"]["bodies"]
        assert pyramid["fx2d_gpu"]["ratio_to_pymunk"] > 0
        assert pyramid["fx2d_gpu (no sleep)"]["ratio_to_pymunk"] > 0
    grid, grid_base = sizes.grid, sizes.grid_base
    assert by_scene["many_pyramids"]["fx2d_gpu"]["bodies"] == (
        grid * grid * grid_base * (grid_base + 1) // 2 + grid
    )
    rows, columns = sizes.joint_grid
    assert by_scene["joint_grid"]["fx2d_gpu"]["joints"] == (
        (rows - 1) * columns + (rows - 1) * (columns - 1)
    )
    piles = out["pile"]
    engines = {r["engine"] for r in piles}
    assert "fx2d_gpu" in engines and ("pymunk" in engines) == with_pymunk
    assert piles[0]["bodies"] == sizes.piles[0] + 3
    if box2d_scenes.available():
        _check_box2d_column(by_scene, sizes, out["batched_small"])
    batched = [r for r in out["batched_small"] if r["engine"] == "fx2d_gpu"]
    assert [r["worlds"] for r in batched] == sizes.worlds
    for r in batched:
        assert r["bodies"] == 8 * r["worlds"] and r["joints"] == r["worlds"]
        assert r["world_steps_per_s"] > 0
    for name in names:
        (path,) = tmp_path.rglob(f"{name}.csv")
        with open(path) as f:
            assert len(list(csv.DictReader(f))) == len(out[name])
    assert next(tmp_path.rglob("scaling.png")).stat().st_size > 0
    assert next(tmp_path.rglob("batched.png")).stat().st_size > 0


def _check_box2d_column(by_scene: dict, sizes: suite.Sizes, batched_rows: list[dict]):
    """The quick suite's Box2D v3 rows: every thread count beside every fx2d_gpu run of the
    four comparison scenes, the same bodies, a paired ratio on fx2d_gpu's row, and the
    pyramids' apex drop; beside the largest batch of small worlds (batched_rows) only."""
    for threads in suite.BOX2D_THREADS:
        column = suite.box2d_ratio_column(threads)
        runs = [
            ("large_pyramid", "fx2d_gpu", True),
            ("large_pyramid", "fx2d_gpu (no sleep)", False),
            ("many_pyramids", "fx2d_gpu", True),
            ("joint_grid", "fx2d_gpu", True),
            ("pile", "fx2d_gpu", True),
        ]
        for scene, ours, enable_sleep in runs:
            rows = by_scene[scene]
            theirs = rows[box2d_scenes.engine_name(threads, enable_sleep)]
            assert theirs["bodies"] == rows[ours]["bodies"], (scene, threads)
            assert theirs["joints"] == rows[ours]["joints"], (scene, threads)
            assert theirs["substeps"] == box2d_scenes.SUBSTEPS
            assert theirs["ms_per_step"] > 0 and rows[ours][column] > 0, (scene, column)
            if "pyramid" in scene:
                assert theirs["stands"] is True  # 7 steps: nothing can have fallen yet
                assert 0.0 <= theirs["top_drop_m"] < suite.STANDING_DROP
        # The small worlds: beside fx2d_gpu's largest batch only, as many bodies and joints.
        batched = [r for r in batched_rows if r["engine"] == "fx2d_gpu" and r[column] != ""]
        assert [r["worlds"] for r in batched] == [sizes.box2d_worlds]
        assert batched[0][column] > 0
        theirs = by_scene["batched_small"][box2d_scenes.engine_name(threads)]
        assert (theirs["bodies"], theirs["joints"], theirs["worlds"]) == (
            8 * sizes.box2d_worlds,
            sizes.box2d_worlds,
            sizes.box2d_worlds,
        )
        assert theirs["world_steps_per_s"] > 0


def test_quick_suite_leaves_out_what_is_not_asked_for(tmp_path, arch, capsys):
    (rows,) = suite.run(
        ["large_pyramid"],
        arch=arch,
        quick=True,
        results=tmp_path,
        plot=False,
        with_pymunk=False,
        with_box2d=False,
    ).values()
    assert [r["engine"] for r in rows] == ["fx2d_gpu", "fx2d_gpu (no sleep)"]
    assert all(r["ratio_to_box2d_1_thread"] == "" for r in rows)
    assert all(r["ratio_to_box2d_native_1_worker"] == "" for r in rows)
    # No Box2D benchmark program given: one line says its rows are left out.
    notes = [line for line in capsys.readouterr().out.splitlines() if "box2d native" in line]
    assert notes == [
        "  box2d native: no --box2d-benchmark PATH (nor $FX2D_BOX2D_BENCHMARK): "
        "its rows are left out"
    ]


#: What Box2D v3's own benchmark program (commit 617d32ab, Release, SSE2) printed on the
#: 2-core Intel Xeon VM: <scene>_w<workers>.txt, one invocation each.
NATIVE_SAMPLES = Path(__file__).parent / "data" / "box2d_native"


def _fake_box2d_benchmark(folder: Path, status: int = 0) -> Path:
    """A stand-in for Box2D's benchmark program: prints the recorded sample of the scene
    and worker count it is asked for (--benchmark=, --workers=), and exits with
    `status`."""
    program = folder / "benchmark"
    program.write_text(
        f"#!{sys.executable}\n"
        "import pathlib, sys\n"
        "args = dict(a.lstrip('-').split('=') for a in sys.argv[1:])\n"
        "name = args['benchmark'] + '_w' + args['workers'] + '.txt'\n"
        f"print((pathlib.Path({str(NATIVE_SAMPLES)!r}) / name).read_text(), end='')\n"
        f"sys.exit({status})\n"
    )
    program.chmod(0o755)
    return program


def test_box2d_native_output_becomes_rows_and_ratios():
    """The recorded output of Box2D's program: its best run's timed steps (all but the
    first) give ms_per_step; fx2d_gpu's sleep-off rows get their ratio to it (Box2D's
    scenes run with sleep off), its sleep-on rows none."""
    text = (NATIVE_SAMPLES / "large_pyramid_w1.txt").read_text()
    parsed = box2d_native.parse_output(text)
    assert parsed == {
        "scene": "large_pyramid",
        "steps": 500,
        "workers": 1,
        "runs_ms": [7001.47, 6027.77, 6365.04, 6153.71],
        "bodies": 5051,
        "shapes": 5051,
        "contacts": 14950,
        "joints": 0,
    }
    one = box2d_native.to_row(parsed)
    assert one["engine"] == "box2d native (1 worker)"
    assert (one["scene"], one["bodies"], one["joints"], one["substeps"]) == (
        "large_pyramid",
        5051,
        0,
        4,
    )
    assert one["ms_per_step"] == round(6027.77 / 499, 3)
    two = box2d_native.to_row(
        box2d_native.parse_output((NATIVE_SAMPLES / "many_pyramids_w2.txt").read_text())
    )
    assert two["engine"] == "box2d native (2 workers)"
    assert (two["scene"], two["steps"]) == ("many_pyramids", 200)
    # One static body holds its 20 grounds: 22,000 boxes and 1 ground.
    assert two["bodies"] == 22001
    ours = [
        {"engine": "fx2d_gpu soft_step", "ms_per_step": 1.5},
        {"engine": "fx2d_gpu soft_step (no sleep)", "ms_per_step": 6.0},
    ]
    box2d_native.add_ratios(ours, [one, {**one, "engine": "box2d native (2 workers)"}])
    assert "ratio_to_box2d_native_1_worker" not in ours[0]
    assert ours[1]["ratio_to_box2d_native_1_worker"] == round(6.0 / one["ms_per_step"], 3)
    assert ours[1]["ratio_to_box2d_native_2_workers"] == round(6.0 / one["ms_per_step"], 3)


def test_box2d_native_failures_are_one_line_not_a_traceback(tmp_path, capsys):
    missing = tmp_path / "no_such_benchmark"
    with pytest.raises(SystemExit) as exit_:
        suite.main(["--box2d-benchmark", str(missing), "large_pyramid"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert f"--box2d-benchmark: {missing} does not exist" in err
    assert "Traceback" not in err
    lines = []
    failing = _fake_box2d_benchmark(tmp_path, status=3)
    assert box2d_native.scene_rows(failing, "large_pyramid", log=lines.append) == []
    assert len(lines) == 2
    assert "box2d native (1 worker) left out of large_pyramid" in lines[0]
    assert "exited with status 3" in lines[0]
    with pytest.raises(box2d_native.NativeBenchmarkError, match="expected one scene"):
        box2d_native.parse_output("Unknown option\n")
    assert box2d_native.program_path(None, {box2d_native.ENV_VAR: "/x/benchmark"}) == Path(
        "/x/benchmark"
    )
    assert box2d_native.program_path("/y", {box2d_native.ENV_VAR: "/x"}) == Path("/y")
    assert box2d_native.program_path(None, {}) is None


def test_quick_suite_runs_the_box2d_benchmark_program_given(tmp_path, arch, capsys):
    """The suite with a Box2D benchmark program (here the stand-in): its rows for 1 and 2
    workers after fx2d_gpu's, in the CSV; no ratio at --quick sizes, said in one line."""
    program = _fake_box2d_benchmark(tmp_path)
    (rows,) = suite.run(
        ["large_pyramid"],
        arch=arch,
        quick=True,
        results=tmp_path / "results",
        plot=False,
        with_pymunk=False,
        with_box2d=False,
        box2d_benchmark=program,
    ).values()
    engines = [r["engine"] for r in rows]
    assert engines == [
        "fx2d_gpu",
        "fx2d_gpu (no sleep)",
        "box2d native (1 worker)",
        "box2d native (2 workers)",
    ]
    assert [r["bodies"] for r in rows[2:]] == [5051, 5051]
    assert all(r["ratio_to_box2d_native_1_worker"] == "" for r in rows)
    assert "no ratio at --quick sizes" in capsys.readouterr().out
    (path,) = (tmp_path / "results").rglob("large_pyramid.csv")
    with open(path) as f:
        saved = list(csv.DictReader(f))
    assert [r["engine"] for r in saved] == engines
    assert "ratio_to_box2d_native_2_workers" in saved[0]


def test_step_options_run_the_scenes_and_name_their_csv(tmp_path, arch):
    """--step-option: the scenes step with those StepOptions (here the quick pyramid's 16
    bodies on the general path, without a team: a launch per stage group, a handful a
    substep), say so in their rows and are saved beside the default run's CSV, not over
    it."""
    (rows,) = suite.run(
        ["large_pyramid"],
        arch=arch,
        quick=True,
        results=tmp_path,
        plot=False,
        with_pymunk=False,
        with_box2d=False,
        step_options={"team": False, "small_world_path": False},
    ).values()
    assert {r["step_options"] for r in rows} == {"team=False,small_world_path=False"}
    assert all(float(r["launches_per_step"]) >= 2 * suite.SUBSTEPS for r in rows)
    assert [p.name for p in tmp_path.rglob("*.csv")] == [
        "large_pyramid_team-False_small_world_path-False.csv"
    ]


def test_bad_step_options_are_refused_by_name(capsys):
    for bad in ("team=2", "no_such_option=1", "gpu_team_slots=-3"):
        with pytest.raises(SystemExit):
            suite.main(["--step-option", bad, "large_pyramid"])
        assert "--step-option" in capsys.readouterr().err


def test_bad_taichi_options_are_refused_by_name(capsys):
    for bad in ("gpu_max_reg=lots", "advanced_optimization=1", "print_ir=true", "fast_math"):
        with pytest.raises(SystemExit):
            suite.main(["--taichi-option", bad, "large_pyramid"])
        assert "--taichi-option" in capsys.readouterr().err
    assert common.taichi_options(["gpu_max_reg=128", "advanced_optimization=True"]) == {
        "gpu_max_reg": 128,
        "advanced_optimization": True,
    }


def test_taichi_options_go_over_the_engines_own_where_taichi_starts():
    """runtime.ensure_initialized(taichi_options=) starts Taichi with the engine's settings
    and the measurement's options over them (a fresh process: this one's Taichi has
    started already)."""
    program = (
        "from fx2d_gpu.device import runtime; import taichi as ti; "
        "runtime.ensure_initialized('cpu', taichi_options=dict(gpu_max_reg=96, fast_math=True)); "
        "c = ti.lang.impl.current_cfg(); "
        "print(c.gpu_max_reg, c.fast_math, c.advanced_optimization, c.offline_cache)"
    )
    out = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    ).stdout
    # gpu_max_reg and fast_math as asked; advanced_optimization off and the offline cache on,
    # as the engine sets them (runtime.ensure_initialized).
    assert out.split()[-4:] == ["96", "True", "False", "True"]


def test_an_engine_not_installed_is_left_out_with_a_note(capsys):
    def find_spec(name):
        return None if name == "pyb2d3" else importlib.util.find_spec(name)

    assert suite.other_engines(with_pymunk=True, with_box2d=True, find_spec=find_spec) == {"pymunk"}
    assert "pyb2d3 is not installed: the box2d column is left out" in capsys.readouterr().out


def test_box2d_world_matches_the_specs():
    pytest.importorskip("pyb2d3")
    specs = scenes.pile_layout(40, seed=2)
    world = box2d_scenes.build_world(specs)
    assert len(world.bodies) == len(specs)
    np.testing.assert_allclose(
        world.positions(), [spec.position for spec in specs], atol=1e-5
    )  # Box2D keeps float32
    for spec, body in zip(specs, world.bodies, strict=True):
        assert body.angle == pytest.approx(spec.angle, abs=1e-4)
        if spec.mass > 0:
            assert body.mass == pytest.approx(spec.mass, rel=1e-5)
    grid = box2d_scenes.joint_grid_world(4, 5)
    assert len(grid.bodies) == 20 and grid.n_joints == 3 * 5 + 3 * 4


def test_box2d_small_worlds_are_batched_smalls_worlds_side_by_side(arch):
    """box2d_scenes.small_worlds_world: each world's bodies where batched_small puts them,
    moved by the world's place on the grid (SMALL_WORLD_SPACING apart, no two worlds'
    boxes within 4 m of each other), its circles thrown as fx2d_gpu's world throws them,
    masses alike, one hinge a world."""
    pytest.importorskip("pyb2d3")
    n_worlds = 7  # a 3 x 3 grid with two places empty
    world = box2d_scenes.small_worlds_world(n_worlds)
    scene = scenes.batched_small(n_worlds, arch=arch)
    state = scene.get_state()
    assert len(world.bodies) == 8 * n_worlds and world.n_joints == n_worlds
    theirs = world.positions().reshape(n_worlds, 8, 2)
    offsets = theirs[:, 0] - state.position[:, 0]  # the grounds' places
    np.testing.assert_allclose(theirs, state.position + offsets[:, None], atol=1e-4)
    spacing = np.array(box2d_scenes.SMALL_WORLD_SPACING)
    steps = np.round(offsets / spacing)
    np.testing.assert_allclose(offsets, steps * spacing, atol=1e-4)
    assert len({tuple(place) for place in steps}) == n_worlds  # each world its own place
    velocities = np.array(
        [
            [tuple(body.linear_velocity) for body in world.bodies[8 * w : 8 * w + 8]]
            for w in range(n_worlds)
        ]
    )
    np.testing.assert_allclose(velocities, state.velocity, atol=1e-5)
    masses = [body.mass for body in world.bodies[:8]]
    assert masses[0] == 0.0 and masses[1:] == pytest.approx([1.0] * 7, rel=1e-5)


def test_box2d_counts_a_pyramids_contacts_from_its_events():
    """Box2D's contacts touching in a resting pyramid of base 4 (10 boxes on a ground): 4
    on the ground, 2 under each of the 6 upper boxes, 3 + 2 + 1 side by side, 2 points
    each."""
    pytest.importorskip("pyb2d3")
    specs, _ = scenes.pyramid_layout(4)
    world = box2d_scenes.build_world(specs, enable_sleep=False, contact_events=True)
    for _ in range(3):
        world.step(1 / 60)
        world.track_contacts()
    assert world.touching() == (4 + 12 + 6, 2 * (4 + 12 + 6))


@pytest.mark.slow  # profiled steps of both solvers and Box2D's (~10-30 s)
def test_per_pass_benchmark_divides_the_passes_by_the_contacts(arch, tmp_path):
    """benchmarks/per_pass.py on a pyramid of base 5: fx2d_gpu's passes (XPBD: 11 substeps x
    2; the soft step: 4 x 2 + 1) and Box2D's (4 x 2 + 1, where pyb2d3 is installed) over the
    same pyramid's contacts."""
    from benchmarks import per_pass

    rows = per_pass.main(["--quick", "--rounds", "1", "--arch", arch, "--results", str(tmp_path)])
    ours = [r for r in rows if r["engine"] == "fx2d_gpu"]
    assert [r["measure"] for r in ours] == [
        "position pass (profiled)",
        "velocity pass (profiled)",
        "all passes (profiled)",
        "whole step / passes",
    ]
    assert [r["passes_per_step"] for r in ours] == [11, 11, 22, 22]
    soft = [r for r in rows if r["engine"] == "fx2d_gpu soft_step"]
    assert [r["measure"] for r in soft] == [
        "solve (profiled)",
        "relax (profiled)",
        "restitution (profiled)",
        "all passes (profiled)",
        "whole step / passes",
    ]
    assert [r["passes_per_step"] for r in soft] == [4, 4, 1, 9, 9]
    # Base 5: 15 boxes, 5 on the ground, 2 under each of the 10 upper ones, 10 side by side.
    assert ours[0]["manifolds"] == 35 and ours[0]["contact_points"] >= 35
    assert soft[0]["contact_points"] >= 35
    for r in ours + soft:
        assert r["ns_per_point_per_pass"] == pytest.approx(
            r["ms_passes_per_step"] * 1e6 / (r["passes_per_step"] * r["contact_points"]), rel=1e-2
        )
    theirs = [r for r in rows if r["engine"].startswith("box2d")]
    if box2d_scenes.available():
        assert [r["passes_per_step"] for r in theirs] == [9, 8, 9, 8]
        assert all(r["manifolds"] == 35 and r["contact_points"] == 70 for r in theirs)
        assert all(r["ms_per_step"] > 0 for r in theirs)
    else:
        assert theirs == []
    assert next(tmp_path.rglob("per_pass.csv")).stat().st_size > 0


def test_engines_side_by_side_take_turns_a_window_each():
    calls = []
    runs = [(lambda name=name: calls.append(name), lambda: None) for name in "ab"]
    (first_a, times_a), (first_b, times_b) = time_windows_side_by_side(runs, 8, 3)
    # First calls, then windows of 3, 3 and the last 1 (8 calls each), the engine that
    # starts a round alternating.
    assert "".join(calls) == "ab" + "aaabbb" + "bbbaaa" + "ab"
    assert len(times_a) == len(times_b) == 3 and first_a >= 0 and first_b >= 0


def test_paired_ratio_is_the_median_of_the_windows_ratios_after_the_first():
    ours, theirs = [50.0, 10.0, 30.0, 12.0, 9.0], [1.0, 20.0, 20.0, 8.0, 10.0]
    assert paired_ratio(ours, theirs) == pytest.approx(
        np.median(np.array(ours[1:]) / np.array(theirs[1:]))
    )  # 0.5, 1.5, 1.5, 0.9


def test_compile_benchmark_runs_its_probes(arch, tmp_path):
    (rows,) = suite.run(["compile"], arch=arch, quick=True, results=tmp_path, plot=False).values()
    # --quick runs the probes warm only (the full run times a cold cache too).
    assert [r["scene"] for r in rows] == ["compile_warm_cache", "grow_10x_warm_cache"]
    assert rows[0]["ms_per_step"] > 0 and rows[0]["first_step_s"] >= 0
    assert rows[1]["bodies"] == 160 and rows[1]["worlds"] == 20
    assert rows[1]["first_step_s"] >= 0


def test_pile_layout_starts_without_overlaps(arch):
    scene = scenes.pile(300, arch=arch)
    assert scene.n_bodies == 303
    contacts = scene.contacts(None)
    assert len(contacts) == 0 or contacts.depth.max() <= 0.0
    kinds = [scene.body_shape(i).kind for i in range(3, 303)]
    assert len(set(kinds)) == 2  # circles and boxes


def test_many_pyramids_layout_keeps_rows_apart():
    specs, tops = scenes.many_pyramids_layout(3, 4)
    assert len(tops) == 9 and len(specs) == 9 * 10 + 3
    grounds = [s for s in specs if s.mass == 0.0]
    boxes = [s for s in specs if s.mass > 0.0]
    # Each pyramid's top box is the highest of its pyramid, one row of boxes per level.
    assert all(
        specs[t].position[1] == pytest.approx(3.5 + 7.0 * (i // 3)) for i, t in enumerate(tops)
    )
    # No box reaches the slab of the row above.
    slab_bottoms = sorted(g.position[1] - 0.5 for g in grounds)
    for box in boxes:
        top = box.position[1] + 0.5
        above = [y for y in slab_bottoms if y > box.position[1]]
        assert not above or top < above[0]


def test_pymunk_space_matches_the_specs():
    specs = scenes.pile_layout(40, seed=2)
    space, bodies = build_space(specs)
    assert len(bodies) == len(specs)
    for spec, body in zip(specs, bodies, strict=True):
        np.testing.assert_allclose(tuple(body.position), spec.position)
        assert body.angle == pytest.approx(spec.angle)
        if spec.mass > 0:
            assert body.mass == pytest.approx(spec.mass)


def test_scene_load_benchmark_runs_and_its_bodies_get_their_own_shapes(tmp_path):
    from benchmarks import scene_load

    rows = scene_load.main(["--bodies", "30", "--arch", "cpu", "--results", str(tmp_path)])
    assert [r["scene"] for r in rows] == ["repeated", "repeated_no_visual", "distinct"]
    assert all(r["bodies"] == 34 and r["bodies_per_s"] > 0 for r in rows)
    assert next(tmp_path.rglob("scene_load.csv")).stat().st_size > 0
    # The loader shares one Shape among identical blocks: each body must still get the
    # inertia of its own size and kind (mass 1 kg): box s²/6, disc s²/8 (radius s/2),
    # right triangle with legs s: s²/9 about its centroid.
    scene = load_scene(scene_load.scene_text(30, distinct=False), arch="cpu")
    for i in range(30):
        side = (0.3, 0.4, 0.5)[i // 3 % 3]
        expected = (side**2 / 6, side**2 / 8, side**2 / 9)[i % 3]
        assert scene.body_inertia(i) == pytest.approx(expected, rel=1e-9), i


def test_scene_switch_benchmark_runs_scenes_in_turn(tmp_path):
    # What it times is tests/test_residency.py's to check (scenes in turn step as alone);
    # here: it runs, writes its CSV, and its stack is the 81 bodies it says.
    from benchmarks import scene_switch

    rows = scene_switch.main(
        [
            "stack_81",
            "--rounds",
            "1",
            "--steps",
            "2",
            "--sizing-bodies",
            "0",
            "--results",
            str(tmp_path),
        ]
    )
    assert [(r["scene"], r["bodies"]) for r in rows] == [("stack_81", 81)]
    assert rows[0]["alone_ms_per_step"] > 0 and rows[0]["in_turn_ms_per_step"] > 0
    assert next(tmp_path.rglob("scene_switch.csv")).stat().st_size > 0


def test_scene_build_benchmark_builds_the_same_bodies_both_ways(tmp_path):
    from benchmarks import scene_build

    rows = scene_build.main(["--sizes", "40", "--arch", "cpu", "--results", str(tmp_path)])
    assert [(r["way"], r["bodies"]) for r in rows] == [("one_by_one", 40), ("bulk", 40)]
    assert next(tmp_path.rglob("scene_build.csv")).stat().st_size > 0
    pile = scene_build.pile_arrays(40)
    scenes_built = []
    for add in (scene_build.add_one_by_one, scene_build.add_in_bulk):
        scene = fx2d_gpu.Scene(arch="cpu")
        add(scene, pile)
        scenes_built.append(scene._builder.build_model()["model"])
    for key, array in scenes_built[0].items():
        assert array.tobytes() == scenes_built[1][key].tobytes(), key
    # Half discs (inertia m r^2 / 2), half boxes (m (w^2 + h^2) / 12), 1 kg each.
    model = scenes_built[1]
    radii, sizes = pile["radii"], pile["sizes"]
    assert np.allclose(1.0 / model["inv_inertia"][:20], radii**2 / 2, rtol=1e-6)
    assert np.allclose(1.0 / model["inv_inertia"][20:], (sizes**2).sum(1) / 12, rtol=1e-6)


def test_queries_benchmark_runs_quick(tmp_path):
    from benchmarks import queries

    rows = queries.main(["--arch", "cpu", "--quick", "--results", str(tmp_path)])
    assert [(r["engine"], r["case"]) for r in rows] == [
        ("fx2d_gpu", "rays_batched"),
        ("fx2d_gpu", "points_batched"),
        ("fx2d_gpu", "aabb_batched"),
        ("fx2d_gpu", "rays_pile"),
        ("pymunk", "rays_pile"),
    ]
    assert all(r["ms_per_call"] > 0 for r in rows)
    assert next(tmp_path.rglob("queries.csv")).stat().st_size > 0


@pytest.mark.parametrize("solver", ["xpbd", "soft_step"])
def test_profile_benchmark_writes_a_row_per_stage(arch, tmp_path, capsys, solver):
    """fx2d bench --profile [--solver soft_step] (suite.main): the stage table printed and
    a CSV of a row per stage; every substep stage of the solver's list is there, its times
    add up to at most the profiled step."""
    from fx2d_gpu.physics.solver.stages import DEFAULT_SUBSTEPS, STAGES

    out = suite.main(
        [
            "batched_small",
            "--profile",
            "--quick",
            "--arch",
            arch,
            "--results",
            str(tmp_path),
            "--solver",
            solver,
        ]
    )
    profile = out["batched_small"]
    assert STAGES[solver][-2].name in capsys.readouterr().out
    suffix = "" if solver == "xpbd" else f"_{solver}"
    (path,) = tmp_path.rglob(f"profile_batched_small{suffix}.csv")
    with open(path) as f:
        rows = list(csv.DictReader(f))
    assert [row["stage"] for row in rows] == list(profile.stages)
    assert {row["solver"] for row in rows} == {solver}
    assert {int(row["substeps"]) for row in rows} == {DEFAULT_SUBSTEPS[solver]}
    assert {stage.name for stage in STAGES[solver]} <= set(profile.stages)
    total = sum(float(row["ms_per_step"]) for row in rows)
    assert 0.0 < total <= float(rows[0]["profiled_step_ms"]) * 1.01
    assert float(rows[0]["normal_step_ms"]) > 0.0


def test_quick_env_benchmark_writes_every_env_side_by_side(tmp_path, arch):
    """benchmarks/envs.py on tiny sizes: fx2d's vector envs beside Gymnasium's own (its
    LunarLander where Box2D is installed), env-steps/s consistent with the step times."""
    pytest.importorskip("gymnasium")
    from benchmarks import envs

    rows = envs.run((1, 4), arch=arch, quick=True, results=tmp_path)
    found = {(r["env"], r["envs"]) for r in rows}
    expected = {"fx2d/CartPole-v0", "CartPole-v1", "fx2d/Lander-v0"}
    if envs.box2d_available():
        expected.add("LunarLander-v3")
    assert found == {(env, n) for env in expected for n in (1, 4)}
    for r in rows:
        assert r["env_steps_per_s"] == pytest.approx(
            r["envs"] * 1000.0 / r["ms_per_vector_step"], rel=1e-3
        )
    (path,) = tmp_path.rglob("envs.csv")
    with open(path) as f:
        assert len(list(csv.DictReader(f))) == len(rows)
    assert next(tmp_path.rglob("envs.png")).stat().st_size > 0


def test_contact_sweep_benchmark_times_each_solvers_sweeps_and_restores_the_state(tmp_path):
    # What the sweeps compute is the solver tests'; here: every sweep of both solvers is
    # timed, and the state the sweeps change is put back: a scene measured steps on bit for
    # bit as its twin that was not.
    from benchmarks import contact_sweep

    rows = contact_sweep.main(["--quick", "--results", str(tmp_path)])
    assert [(r["solver"], r["sweep"]) for r in rows] == [
        ("soft_step", "warm start (a body's pairs)"),
        ("soft_step", "solve"),
        ("soft_step", "relax"),
        ("xpbd", "warm start (a body's pairs)"),
        ("xpbd", "velocity pass"),
    ]
    assert all(r["pairs"] > 0 and r["ns_per_pair"] > 0 for r in rows)
    assert next(tmp_path.rglob("contact_sweep.csv")).stat().st_size > 0
    for solver in ("soft_step", "xpbd"):
        measured, twin = (
            contact_sweep.build("large_pyramid", solver, quick=True) for _ in range(2)
        )
        contact_sweep.measure(measured, "large_pyramid", rounds=1)
        for _ in range(5):
            measured.step(contact_sweep.DT)
            twin.step(contact_sweep.DT)
        a, b = measured.get_state(), twin.get_state()
        for name in ("position", "angle", "velocity", "angular_velocity"):
            assert getattr(a, name).tobytes() == getattr(b, name).tobytes(), (solver, name)


@pytest.mark.slow
@pytest.mark.own_processes
def test_kernel_profile_splits_a_step_into_its_tasks(tmp_path):
    """benchmarks.kernel_profile in a process of its own (Taichi's kernel profiler is turned
    on as Taichi starts): four small worlds, each solver. Every task row names its kernel,
    the shares of a scene's tasks add up to its profiled time, and the small worlds'
    substeps are one launch of their kernel a step (each of its tasks once)."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-m", "benchmarks.kernel_profile", "--scenes", "batched_small"]
    command += ["--worlds", "4", "--warm", "2", "--steps", "3", "--results", str(tmp_path)]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = tmp_path.glob("*/kernel_profile.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    for solver in ("xpbd", "soft_step"):
        tasks = [r for r in rows if r["solver"] == solver]
        assert tasks and all(r["task"].startswith(r["kernel"] + "_c") for r in tasks)
        assert sum(float(r["share"]) for r in tasks) == pytest.approx(1.0, abs=0.01)
        assert sum(float(r["ms_per_step"]) for r in tasks) > 0
        substeps = [r for r in tasks if r["kernel"] == "_substeps"]
        assert substeps and {float(r["launches_per_step"]) for r in substeps} == {1.0}
    assert "_substeps" in done.stdout


@pytest.mark.slow
@pytest.mark.own_processes
def test_solve_lanes_checks_each_layout_against_one_manifold_a_work_item(tmp_path):
    """benchmarks.solve_lanes in a process of its own (it starts Taichi afresh a layout, to
    read each layout's optimised IR): 2 manifolds a work item leave the bodies and impulses
    one manifold a work item leaves, or the run fails; the rows say what was timed."""
    import subprocess

    root = Path(__file__).resolve().parents[1]
    command = [sys.executable, "-m", "benchmarks.solve_lanes", "--lanes", "1", "2"]
    command += ["--repeats", "1", "--results", str(tmp_path)]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    (path,) = tmp_path.glob("*/solve_lanes.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    assert [r["layout"] for r in rows] == ["one a work item", "2 interleaved"]
    assert all(float(r["ns_per_manifold"]) > 0 for r in rows)
    assert all(int(r["vector_instructions_in_ir"]) >= 0 for r in rows)


def test_ptxas_reports_become_a_row_per_entry():
    """benchmarks.ptx_registers reads ptxas -v's report (its lines as ptxas 13.0 prints them
    for a hand-written kernel): each entry's registers, stack frame and spills, 0 where a
    line is missing, in the report's order; a device function's properties after an
    entry's lines are not the entry's."""
    from benchmarks.ptx_registers import parse_ptxas_report

    report = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_substeps_c80_0_range_for' for 'sm_90'
ptxas info    : Function properties for _substeps_c80_0_range_for
    184 bytes stack frame, 96 bytes spill stores, 104 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 568 bytes cmem[0]
ptxas info    : Compiling entry function '_write_rows_c12_0_range_for' for 'sm_90'
ptxas info    : Function properties for _write_rows_c12_0_range_for
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 400 bytes cmem[0]
ptxas info    : Compile time = 23.791 ms
ptxas info    : Function properties for taichi_assert_format
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'no_lines' for 'sm_90'
"""
    assert parse_ptxas_report(report) == [
        {
            "entry": "_substeps_c80_0_range_for",
            "arch": "sm_90",
            "registers": 255,
            "stack_frame_bytes": 184,
            "spill_store_bytes": 96,
            "spill_load_bytes": 104,
        },
        {
            "entry": "_write_rows_c12_0_range_for",
            "arch": "sm_90",
            "registers": 24,
            "stack_frame_bytes": 0,
            "spill_store_bytes": 0,
            "spill_load_bytes": 0,
        },
        {
            "entry": "no_lines",
            "arch": "sm_90",
            "registers": 0,
            "stack_frame_bytes": 0,
            "spill_store_bytes": 0,
            "spill_load_bytes": 0,
        },
    ]
    assert parse_ptxas_report("ptxas info    : 0 bytes gmem\n") == []


def test_a_ptx_file_ptxas_refuses_is_named_and_tried_as_relocatable_code(tmp_path):
    """benchmarks.ptx_registers.assemble: where ptxas fails, again with -c; where that
    assembles, its entries; where not, none and the first lines ptxas wrote (a fake ptxas
    that fails without -c, then one that always fails)."""
    from benchmarks.ptx_registers import assemble

    ptx = tmp_path / "kernel.ptx"
    ptx.write_text(".version 7.4\n.target sm_86\n.address_size 64\n")
    fake = tmp_path / "ptxas"
    fake.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" -c "*)'
        " echo \"ptxas info    : Compiling entry function 'k' for 'sm_86'\" >&2;"
        ' echo "ptxas info    : Used 40 registers, used 0 barriers" >&2; exit 0;; esac\n'
        'echo "ptxas fatal   : Unresolved extern function vprintf" >&2\nexit 255\n'
    )
    fake.chmod(0o755)
    entries, failure = assemble(ptx, str(fake))
    assert failure == "" and [(e["entry"], e["registers"]) for e in entries] == [("k", 40)]
    fake.write_text('#!/bin/sh\necho "ptxas fatal   : Unresolved extern function" >&2\nexit 255\n')
    assert assemble(ptx, str(fake)) == (
        [],
        "status 255: ptxas fatal   : Unresolved extern function",
    )


def test_a_ptx_file_ending_in_taichis_nul_is_assembled_without_it(tmp_path):
    """Taichi writes a module's PTX with the C string's terminating NUL, which ptxas rejects
    ("Unexpected EOF", status 255: the H200 of 2026-12-04): assemble strips it first (a
    fake ptxas that fails where the file has a NUL byte), and assembles for the `arch`
    given rather than the file's .target."""
    from benchmarks.ptx_registers import assemble

    ptx = tmp_path / "kernel.ptx"
    ptx.write_bytes(b".version 7.1\n.target sm_86\n.address_size 64\n\0")
    fake = tmp_path / "ptxas"
    fake.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in -arch=*) arch=${a#-arch=};; *.ptx) file=$a;; esac; done\n'
        'if [ "$(tr -d \'\\000\' < "$file" | wc -c)" != "$(wc -c < "$file")" ]; then\n'
        ' echo "ptxas fatal   : Unexpected EOF encountered" >&2; exit 255; fi\n'
        "echo \"ptxas info    : Compiling entry function 'k' for '$arch'\" >&2\n"
        'echo "ptxas info    : Used 40 registers, used 0 barriers" >&2\n'
    )
    fake.chmod(0o755)
    entries, failure = assemble(ptx, str(fake), "sm_90")
    assert failure == "" and [(e["entry"], e["arch"]) for e in entries] == [("k", "sm_90")]
    assert not ptx.read_bytes().endswith(b"\0")
    ptx.write_bytes(b".target sm_86\n\0\0")  # the file's own .target where none is given
    entries, failure = assemble(ptx, str(fake))
    assert failure == "" and [e["arch"] for e in entries] == ["sm_86"]


def test_ptx_launch_bounds_are_read_per_entry():
    """benchmarks.ptx_registers.launch_bounds: each entry's .maxntid (Taichi's block_dim),
    in PTX as Taichi 1.7.4 writes it."""
    from benchmarks.ptx_registers import launch_bounds

    text = (
        ".visible .entry a_kernel_0_range_for(\n\t.param .align 8 .b8 a_param_0[32]\n)\n"
        ".maxntid 256, 1, 1\n.minnctapersm 2\n{\n}\n"
        ".visible .entry b_kernel_1_serial(\n\t.param .align 8 .b8 b_param_0[32]\n)\n"
        ".maxntid 1, 1, 1\n{\n}\n.visible .entry unbounded(\n)\n{\n}\n"
    )
    assert launch_bounds(text) == {"a_kernel_0_range_for": 256, "b_kernel_1_serial": 1}


_SMALL_WORLDS_ON_THE_STUB = """
import glob, os, sys
from benchmarks.kernel_profile import build_scene
from benchmarks.ptx_registers import launch_bounds
from fx2d_gpu.device import runtime
from fx2d_gpu.physics.solver.plan import StepOptions
os.chdir(sys.argv[1])
backend = runtime.ensure_initialized(
    "cuda", taichi_options={"offline_cache": False, "print_kernel_asm": True}
)
scene = build_scene("batched_small", "cuda", "soft_step", worlds=4)
scene.step(1 / 60)
bounds = {}
for path in glob.glob("taichi_kernel_nvptx_*.ptx"):
    bounds.update(launch_bounds(open(path, "rb").read().decode().rstrip(chr(0))))
import taichi as ti
print(backend, runtime.cuda_multiprocessors(), StepOptions().gpu_world_block,
      ti.lang.impl.current_cfg().saturating_grid_dim)
print(" ".join(f"{name}={threads}" for name, threads in sorted(bounds.items())))
"""


@pytest.mark.slow
@pytest.mark.own_processes
def test_the_cuda_stub_compiles_the_small_worlds_step_for_a_gpu_that_is_not_here(tmp_path):
    """benchmarks/cuda_stub.c (ptx_registers --no-gpu): Taichi starts on arch="cuda" over the
    stand-in driver, which says 132 multiprocessors, and the small worlds' step compiles to
    PTX whose world-per-thread substeps are bounded to StepOptions.gpu_world_block a block
    (the registers' cap: 65,536 / (2 * 256) = 128) where Taichi's other loops keep its
    default of 128. With ptxas at hand, the kernels assemble and that entry fits the cap.
    Taichi configures itself as on an H100 or H200 (the stub answers its start-up queries
    as they do): its loops' grid is the one the H200's kernel profile read, so the kernels
    and their offline cache keys are the GPU's (benchmarks/device_cache.py)."""
    import os
    import shutil

    if not any(shutil.which(c) for c in ("cc", "gcc", "clang")):
        pytest.skip("no C compiler to build the CUDA stub")
    from benchmarks.ptx_registers import assemble, build_stub, find_ptxas

    stub = tmp_path / "stub"
    stub.mkdir()
    build_stub(stub)
    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "LD_LIBRARY_PATH": str(stub),
        "PYTHONPATH": str(root),
        "FX2D_STUB_MULTIPROCESSORS": "132",
    }
    done = subprocess.run(
        [sys.executable, "-c", _SMALL_WORLDS_ON_THE_STUB, str(tmp_path)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    said, listed = done.stdout.strip().splitlines()[-2:]
    backend, multiprocessors, world_block, grid = said.split()
    assert (backend, multiprocessors, world_block) == ("cuda", "132", "256")
    profiled = root / "benchmarks/results/NVIDIA_H200/profile_batched_small.csv"
    with open(profiled) as f:
        grids = {int(row["grid_size"]) for row in csv.DictReader(f)} - {1}
    assert grids == {int(grid)}  # 8,448: 132 multiprocessors x 32 blocks x 2
    bounds = dict(item.split("=") for item in listed.split())
    # The step's kernels (_substeps by world: the whole step in one launch, and the
    # substeps alone), a world-per-thread loop of substeps each.
    step = {n: int(t) for n, t in bounds.items() if n.startswith("_substeps")}
    world_loops = [n for n, t in step.items() if t == int(world_block)]
    assert 1 <= len(world_loops) <= 2, step
    assert 128 in step.values()  # the step's broad phase and colouring: Taichi's default
    ptxas = find_ptxas()
    if ptxas is None:
        return
    registers = {}
    for path in tmp_path.glob("taichi_kernel_nvptx_*.ptx"):
        entries, failure = assemble(path, ptxas, "sm_90")
        assert failure == ""
        registers.update({e["entry"]: e["registers"] for e in entries})
    assert all(0 < registers[name] <= 128 for name in world_loops)


def test_env_faults_steps_each_variant_and_names_its_outcome(arch):
    """benchmarks.env_faults on a few envs: the defaults and a variant both step clean and
    start from the same observation (seed 0), each reported in one line."""
    pytest.importorskip("gymnasium", reason="the rl extra is not installed")
    from benchmarks.env_faults import VARIANTS, step_clean

    first = step_clean("fx2d/CartPole-v0", 4, 3, arch, VARIANTS["defaults"])
    other = step_clean("fx2d/CartPole-v0", 4, 3, arch, VARIANTS["steps_in_flight=False"])
    assert first.startswith("clean [") and first == other


def test_step_loop_steps_a_suite_scene_and_says_so(arch, capsys):
    """benchmarks.step_loop (what a GPU profiler runs): the suite's small worlds, stepped
    and read back, in one line."""
    from benchmarks import step_loop

    step_loop.main(["--arch", arch, "--worlds", "4", "--steps", "2"])
    out = capsys.readouterr().out
    assert "batched_small (4 worlds, 8 bodies a world, xpbd)" in out and "2 steps" in out


def test_grid_sync_times_the_teams_meetings_and_checks_the_token_went_round(arch, tmp_path):
    """benchmarks.grid_sync on this backend's team (on a CPU its threads): a row a team, a
    barrier, a handoff and a barrier with every member's read after it timed, the token
    passed on by every holder every round (it raises otherwise), no wait run out."""
    from benchmarks import grid_sync

    rows = grid_sync.run(arch, rounds=50, results=tmp_path)
    assert rows and all(r["timeouts"] == 0 for r in rows)
    for row in rows:
        assert row["barrier_us"] > 0 and row["handoff_us"] > 0
        assert row["atomic_read_us"] > 0 and row["plain_read_us"] > 0
        assert row["handoffs"] >= 50
    assert list(tmp_path.glob("*/grid_sync.csv"))


def test_scan_benchmark_checks_both_passes_against_numpy(arch, tmp_path):
    """benchmarks.scan on this backend: each size scanned by the GPU's passes and the CPU's,
    each checked against NumPy's cumulative sum (a size over a GPU pass's chunk of
    SCAN_BLOCK**2 numbers among them) and timed, a row each, in scan.csv."""
    from benchmarks import scan as scan_benchmark
    from fx2d_gpu.device import SCAN_BLOCK

    sizes = [1000, SCAN_BLOCK**2 + 3 * SCAN_BLOCK + 5]
    rows = scan_benchmark.run(arch, sizes=sizes, repeats=2, results=tmp_path)
    assert [(r["passes"], r["numbers"]) for r in rows] == [
        (passes, n) for n in sizes for passes in ("gpu", "cpu")
    ]
    assert all(r["matches_numpy"] and r["ms_per_scan"] > 0 for r in rows)
    assert list(tmp_path.glob("*/scan.csv"))


def test_serial_loops_steps_each_scene_with_each_threshold_in_turns(tmp_path):
    """benchmarks.serial_loops on the CPU: the demo pile of 50 bodies (53 with its
    container) with its loops parallel (a threshold of 40 body slots) and serial (512), a
    row each, in serial_loops.csv."""
    from benchmarks import serial_loops

    rows = serial_loops.main(
        ["--piles", "50", "--pyramids", "--slots", "40", "512", "--rounds", "1"]
        + ["--warm", "1", "--steps", "2", "--results", str(tmp_path)]
    )
    assert [(r["scene"], r["serial_slots"], r["serial"]) for r in rows] == [
        ("pile_50", 40, False),
        ("pile_50", 512, True),
    ]
    assert all(r["bodies"] == 53 and r["ms_per_step"] > 0 for r in rows)
    assert rows[1]["team_threads"] == 1  # a team of one: serial and at most 512 slots
    assert list(tmp_path.glob("*/serial_loops.csv"))


def test_warp_lanes_counts_what_a_warps_worlds_walk(tmp_path):
    """benchmarks.warp_lanes: by hand, two warps (32 worlds each) whose worlds hold 1 to 3
    pairs: each warp's longest world, the pairs its worlds hold in all, the different pairs
    at each place of the order, the touching share; then a run of 64 small worlds that
    writes its row (a world's pairs within what a warp walks, a warp's union at least its
    longest world)."""
    from benchmarks import warp_lanes

    first = [[(0, 1, True)]] * 16 + [[(0, 1, True), (1, 2, False), (2, 3, False)]] * 16
    second = [[(4, 5, True), (0, 1, True)]] * 32
    counts = warp_lanes.lane_counts(first + second)
    assert counts["pairs_a_world"] == (16 * 1 + 16 * 3 + 32 * 2) / 64
    assert counts["warp_longest"] == (3 + 2) / 2
    assert counts["warp_union"] == (3 + 2) / 2
    assert counts["pairs_a_place"] == (1 + 1 + 1 + 1 + 1) / 5  # every place one pair
    assert counts["touching_share"] == round((16 + 16 + 64) / (16 + 48 + 64), 3)
    mixed = warp_lanes.lane_counts([[(0, 1, True)], [(1, 2, True)]] * 16)
    assert mixed["pairs_a_place"] == 2 and mixed["warp_union"] == 2

    (row,) = warp_lanes.run(worlds=64, steps=20, results=tmp_path)
    assert 0 < row["pairs_a_world"] <= row["warp_longest"] <= row["warp_union"]
    assert list(tmp_path.glob("*/warp_lanes.csv"))


@pytest.mark.slow  # a step kernel a path, compiled anew (~25 s)
def test_small_worlds_paths_time_the_paths_asked_in_one_process(arch, tmp_path):
    """benchmarks.small_worlds_paths, the lease's first small-worlds measurement, on two of
    its paths (each compiles a step kernel of its own: all five took 60 s of CI): a world a
    thread in its colours and by block step the same worlds in one process, a row each in
    the order asked, every state finite, a positive time, neither meeting a team's barrier
    (a CPU's block is one thread), the solver in the CSV's name; a path it does not know
    is refused by name."""
    from benchmarks import small_worlds_paths

    asked = ["a world a thread, coloured", "by block"]
    rows = small_worlds_paths.run(
        arch, worlds=[8], solvers=("soft_step",), steps=3, window=1, results=tmp_path, paths=asked
    )
    assert [row["path"] for row in rows] == asked and set(asked) < set(small_worlds_paths.PATHS)
    assert all(row["finite"] and row["ms_per_step"] > 0 for row in rows)
    assert all(row["barriers_per_step"] == 0 for row in rows)
    assert list(tmp_path.glob("*/small_worlds_paths_soft_step.csv"))
    with pytest.raises(SystemExit):
        small_worlds_paths.main(["--path", "by committee"])
