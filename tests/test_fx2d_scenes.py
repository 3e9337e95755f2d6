"""benchmarks/fx2d_scenes.py, Fx2D's example scenes, on a few steps: its scenario functions
run and return finite figures (no physics is asserted here), and its file handling."""

import json
import math

import pytest

from benchmarks import fx2d_scenes
from tests.conftest import shared_dir

SCENES = shared_dir() / "fx2d-scenes"
SHIPPED = [name for name in fx2d_scenes.SCENES if (SCENES / f"{name}.yml").is_file()]


@pytest.mark.parametrize("name", SHIPPED)
def test_scenario_runs_a_few_steps_and_returns_finite_figures(name, arch):
    result = fx2d_scenes.SCENARIOS[name](SCENES / f"{name}.yml", arch=arch, scale=0.03)
    assert result["scene"] == name
    assert 0 < result["steps"] < 40
    assert result["figures"]
    for key, value in result["figures"].items():
        assert math.isfinite(value), f"{name}: {key} = {value}"


def test_shipped_scenes_include_the_three_of_shared():
    assert {"truck", "joint_control_demo", "stacked_boxes"} <= set(SHIPPED)


def test_a_scene_without_a_file_is_skipped_with_a_message(tmp_path, arch, capsys):
    assert fx2d_scenes.scene_path("bucket_fill", tmp_path) in (
        None, fx2d_scenes.shared_scenes_dir() / "bucket_fill.yml")
    if fx2d_scenes.scene_path("bucket_fill", tmp_path) is None:
        rows = fx2d_scenes.run(["bucket_fill"], arch=arch, fx2d_root=tmp_path, save=False)
        assert rows == []
        assert "bucket_fill: skipped" in capsys.readouterr().err


def test_cpp_results_are_read_by_scene(tmp_path):
    lines = [{"scene": "truck", "figures": {"head_x_end": 4.5}},
             {"scene": "stacked_boxes", "figures": {"top_box_drop": None}}]
    path = tmp_path / "cpp.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    read = fx2d_scenes.read_cpp_results(path)
    assert read["truck"]["figures"]["head_x_end"] == 4.5
    assert set(read) == {"truck", "stacked_boxes"}
