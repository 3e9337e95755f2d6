"""`fx2d` refuses bad options with one argparse-style line (exit 2, `fx2d run: error: ...`)
or `fx2d: ...` (exit 1), never a traceback, and before anything is simulated; a scene file
is read as a file whatever its name (issue 76 findings 9 and 14)."""

import os
import shutil

import pytest

from fx2d_gpu import examples
from fx2d_gpu.cli import main

EXAMPLE = ["--example", "stacked_boxes", "--arch", "cpu", "--steps", "2"]


def _refusal(argv, capsys) -> str:
    """main(argv)'s one-line refusal (stderr's last line); nothing simulated."""
    with pytest.raises(SystemExit) as raised:
        main(argv)
    out, err = capsys.readouterr()
    assert raised.value.code not in (0, None)
    assert "Traceback" not in err and "steps," not in out  # no summary: nothing ran
    message = err.strip().splitlines()[-1] if err.strip() else str(raised.value.code)
    return message


@pytest.mark.parametrize(
    "command, dt",
    [("run", "0"), ("run", "nan"), ("run", "-1"), ("run", "inf"), ("run", "abc"), ("view", "0")],
)
def test_a_bad_step_length_is_an_argparse_error(command, dt, capsys):
    argv = [command, *EXAMPLE, "--dt", dt]
    if command == "view":
        argv = [
            "view",
            "--example",
            "stacked_boxes",
            "--arch",
            "cpu",
            "--offscreen",
            "--frames",
            "2",
            "--gif",
            "v.gif",
            "--dt",
            dt,
        ]
    assert "argument --dt: must be" in _refusal(argv, capsys)


@pytest.mark.parametrize(
    "option, value, message",
    [
        ("--worlds", "0", "argument --worlds: must be >= 1"),
        ("--worlds", "-3", "argument --worlds: must be >= 1"),
        ("--size", "1000000x1000000", "argument --size: size must be 16x16 to 8192x8192"),
        ("--size", "8x8", "argument --size: size must be 16x16"),
    ],
)
def test_worlds_and_size_are_bounded(option, value, message, capsys):
    assert message in _refusal(["run", *EXAMPLE, option, value], capsys)


@pytest.mark.parametrize("option", ["--gif", "--png", "--save"])
def test_an_output_into_a_missing_folder_is_refused_before_the_run(option, tmp_path, capsys):
    name = {"--gif": "x.gif", "--png": "x.png", "--save": "x.npz"}[option]
    target = str(tmp_path / "missing" / name)
    message = _refusal(["run", *EXAMPLE, option, target], capsys)
    assert f"{option} {target}: the folder" in message and "does not exist" in message
    message = _refusal(["run", *EXAMPLE, option, str(tmp_path)], capsys)
    assert f"{option} {tmp_path}: is a folder" in message


def test_a_gif_must_be_named_gif(tmp_path, capsys):
    assert "must end in .gif" in _refusal(
        ["run", *EXAMPLE, "--gif", str(tmp_path / "x.png")], capsys
    )


def test_a_scene_file_is_read_as_a_file_whatever_its_name(tmp_path, capsys):
    for name in ("scene.txt", "scene.YML"):
        shutil.copy(examples.path("stacked_boxes"), tmp_path / name)
        assert main(["run", str(tmp_path / name), "--arch", "cpu", "--steps", "2"]) == 0
        assert f"{name}: 2 steps" in capsys.readouterr().out
    os.mkdir(tmp_path / "a_folder")
    assert "is not a regular file (a folder)" in _refusal(
        ["run", str(tmp_path / "a_folder"), "--arch", "cpu"], capsys
    )
    assert "'/dev/zero' is not a regular file" in _refusal(
        ["run", "/dev/zero", "--arch", "cpu"], capsys
    )
