"""benchmarks/fx2d_scenes.py, Fx2D's example scenes, on a few steps: its scenario functions
run on the package's example scene files and return finite figures (no physics is asserted
here), and its file handling."""

import json
import math

import pytest

from benchmarks import fx2d_scenes
from fx2d_gpu import examples

#: A few steps of each: bucket_fill's 2,100 frames shortened to 21 still spawn three balls.
SCALE = {"bucket_fill": 0.01}


@pytest.mark.parametrize("name", fx2d_scenes.SCENES)
def test_scenario_runs_a_few_steps_and_returns_finite_figures(name, arch):
    result = fx2d_scenes.SCENARIOS[name](
        examples.path(name), arch=arch, scale=SCALE.get(name, 0.03)
    )
    assert result["scene"] == name
    assert 0 < result["steps"] < 40
    assert result["figures"]
    for key, value in result["figures"].items():
        assert math.isfinite(value), f"{name}: {key} = {value}"


def test_every_scenario_takes_its_scene_file_from_the_package():
    assert set(fx2d_scenes.SCENES) == set(fx2d_scenes.SCENARIOS)
    assert set(fx2d_scenes.SCENES) <= set(examples.names())
    for name in fx2d_scenes.SCENES:
        path = fx2d_scenes.scene_path(name)
        assert path == examples.path(name) and path.is_file()
    with pytest.raises(ValueError, match="no scenario 'bucket'.*truck"):
        fx2d_scenes.scene_path("bucket")


def test_run_prints_and_returns_a_scenes_figures_beside_fx2ds(tmp_path, arch, capsys):
    """run() on one scene (shortened), with a --cpp-results file: a row per figure, each
    with Fx2D's value and the difference where the file has one."""
    cpp = tmp_path / "cpp.jsonl"
    cpp.write_text(json.dumps({"scene": "joint_control_demo", "figures": {"theta_2s": 1.0}}) + "\n")
    rows = fx2d_scenes.run(
        ["joint_control_demo"], arch=arch, cpp_results=cpp, save=False, scale=0.02
    )
    assert rows and {row["scene"] for row in rows} == {"joint_control_demo"}
    theta = next(row for row in rows if row["figure"] == "theta_2s")
    assert theta["fx2d_cpp"] == 1.0 and theta["diff"] == pytest.approx(theta["fx2d_gpu"] - 1.0)
    assert all(row["fx2d_cpp"] is None for row in rows if row["figure"] != "theta_2s")
    out = capsys.readouterr().out
    assert "joint_control_demo" in out and "joint_control_demo.yml" in out


def test_cpp_results_are_read_by_scene(tmp_path):
    lines = [
        {"scene": "truck", "figures": {"head_x_end": 4.5}},
        {"scene": "stacked_boxes", "figures": {"top_box_drop": None}},
    ]
    path = tmp_path / "cpp.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    read = fx2d_scenes.read_cpp_results(path)
    assert read["truck"]["figures"]["head_x_end"] == 4.5
    assert set(read) == {"truck", "stacked_boxes"}
