"""The package as a newcomer gets it: the installed `fx2d` command (--version, bench, what a
run says on stderr and keeps off stdout), the release metadata and the sdist."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

import fx2d_gpu

from .helpers import collect_only

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself needs tomli before Python 3.11
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def installed_fx2d(*args, cwd, timeout=300, env=None):
    """The `fx2d` console script pip installed (not python -m): what a user types."""
    command = shutil.which("fx2d")
    assert command is not None, "the fx2d command is not on PATH: pip install -e ."
    return subprocess.run(
        [command, *args], capture_output=True, text=True, cwd=cwd, timeout=timeout, env=env
    )


def without_checkouts_on_pythonpath() -> dict[str, str]:
    """This environment, less any PYTHONPATH folder holding a `benchmarks` package (a
    checkout run from elsewhere, as a worktree's tests are): a user's folder outside a
    checkout sees no benchmarks."""
    kept = [
        folder
        for folder in os.environ.get("PYTHONPATH", "").split(os.pathsep)
        if folder and not (Path(folder) / "benchmarks" / "__init__.py").is_file()
    ]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if kept:
        env["PYTHONPATH"] = os.pathsep.join(kept)
    return env


def test_version_has_one_place_and_fx2d_prints_it(tmp_path):
    assert re.fullmatch(r"\d+\.\d+\.\d+", fx2d_gpu.__version__)
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "fx2d_gpu.__version__"}
    result = installed_fx2d("--version", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"fx2d_gpu {fx2d_gpu.__version__}\n"
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## {fx2d_gpu.__version__}" in changelog


def test_licence_and_metadata_are_there():
    licence = (ROOT / "LICENSE").read_text()
    assert licence.startswith("MIT License") and "fx2d_gpu contributors" in licence
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "MIT" and project["license-files"] == ["LICENSE"]
    assert project["authors"] and project["keywords"]
    assert any(
        c.startswith("Programming Language :: Python :: 3.1") for c in project["classifiers"]
    )
    assert (ROOT / "fx2d_gpu" / "py.typed").is_file()


def test_fx2d_bench_runs_from_a_checkout_and_says_what_to_do_elsewhere(tmp_path):
    """The installed command, not python -m: it finds benchmarks/ in the current folder (the
    lightest run: 1 and 4 small worlds, no other engines, results into tmp_path)."""
    result = installed_fx2d(
        "bench",
        "--quick",
        "batched_small",
        "--no-pymunk",
        "--no-box2d",
        "--no-plot",
        "--arch",
        "cpu",
        "--results",
        str(tmp_path),
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "batched_small W=4" in result.stdout
    assert list(tmp_path.glob("*/batched_small.csv"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    result = installed_fx2d(
        "bench", "--quick", cwd=elsewhere, env=without_checkouts_on_pythonpath()
    )
    assert result.returncode != 0
    assert "benchmarks come with a source checkout" in result.stderr
    assert 'pip install -e ".[bench]"' in result.stderr and "root folder" in result.stderr


def test_a_run_says_it_compiles_on_stderr_and_keeps_stdout_for_its_summary(tmp_path):
    result = installed_fx2d(
        "run", "--example", "stacked_boxes", "--steps", "3", "--arch", "cpu", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("example stacked_boxes: 3 steps"), result.stdout
    assert "[Taichi]" not in result.stdout  # the banner and "Starting on arch" on stderr
    assert "[Taichi] version" in result.stderr
    assert re.search(
        r"fx2d: first step: compiling the kernels .* done in \d+\.\d s\n", result.stderr
    )


# Counts, in a fresh interpreter, the lookups of a frame's module by a file that is on no
# disk (importlib's frozen frames) while fx2d_gpu imports, and those that went through every
# loaded module for it (the file not in inspect's table).
_FROZEN_LOOKUPS = """
import inspect

frozen, searched = 0, 0
original = inspect.getmodule


def getmodule(object, _filename=None):
    global frozen, searched
    if _filename is not None and _filename.startswith("<frozen"):
        frozen += 1
        searched += _filename not in inspect.modulesbyfile
    return original(object, _filename)


inspect.getmodule = getmodule
import fx2d_gpu  # noqa: E402,F401

print(frozen, searched)
"""


def test_importing_fx2d_gpu_searches_the_loaded_modules_for_no_frame():
    """Taichi's decorators look up the frame three levels up (at a module's top level,
    importlib's frozen one) for a class statement: fx2d_gpu names those frames' module for
    inspect first (_quiet_taichi.know_import_frames), so none of the ~1,700 lookups of its
    and Taichi's decorators goes through every loaded module (half of the import's time)."""
    result = subprocess.run(
        [sys.executable, "-c", _FROZEN_LOOKUPS], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    frozen, searched = map(int, result.stdout.split()[-2:])
    assert frozen >= 3 * 480 and searched == 0, (frozen, searched)


def test_progress_rate_counts_from_after_the_compile(capsys):
    from fx2d_gpu import cli

    clock = iter([0.0, 100.0, 101.0])  # created; restarted after a 100 s first step; 1 s on
    progress = cli.Progress(21, clock=lambda: next(clock))
    progress.restart(1)
    progress.update(21)  # 20 steps in the 1 s after the compile
    assert "21/21 steps, 20.0 steps/s" in capsys.readouterr().err


@pytest.mark.skipif(
    importlib.util.find_spec("build") is None, reason="needs the build package (in the dev extra)"
)
def test_the_sdist_holds_what_the_tests_need(tmp_path):
    """python -m build --sdist (no isolation: the installed setuptools, no network): the
    package with its examples and py.typed, the tests, the benchmarks they import (not
    their recorded results), the licence and the changelog; then the unpacked sdist's tests
    collect, their imports found in it."""
    result = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (sdist,) = tmp_path.glob("fx2d_gpu-*.tar.gz")
    assert sdist.name == f"fx2d_gpu-{fx2d_gpu.__version__}.tar.gz"
    with tarfile.open(sdist) as archive:
        top = f"fx2d_gpu-{fx2d_gpu.__version__}/"
        names = {name.removeprefix(top) for name in archive.getnames()}
        for needed in (
            "LICENSE",
            "CHANGELOG.md",
            "README.md",
            "pyproject.toml",
            "fx2d_gpu/py.typed",
            "fx2d_gpu/examples/truck.yml",
            "fx2d_gpu/examples/truck.py",
            "tests/conftest.py",
            "tests/test_fx2d_scenes.py",
            "benchmarks/__init__.py",
            "benchmarks/suite.py",
            "benchmarks/fx2d_scenes.py",
        ):
            assert needed in names, needed
        assert not [name for name in names if name.startswith("benchmarks/results")]
        assert not [name for name in names if "__pycache__" in name]
        archive.extractall(tmp_path, filter="data")
    unpacked = tmp_path / top
    collected = collect_only("tests/test_fx2d_scenes.py", "tests/test_examples.py", cwd=unpacked)
    assert collected.returncode == 0, collected.stdout + collected.stderr
    assert re.search(r"\d+ tests collected", collected.stdout)
