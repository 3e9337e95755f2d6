"""The repository is self-contained: a fresh clone has everything its tests, benchmarks and
command line read. Scene files ship in the package (fx2d_gpu/examples); nothing looks for a
shared folder beside or inside the checkout, nor for an environment variable naming one.

Two checks: a static one over the repository's text files (no mention of such a folder or
variable), and a dynamic one that runs the scene-reading code paths in a child process
under an audit hook and fails on any file access outside the repository, the Python
installation, site-packages, the temporary folder and Taichi's cache.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: What the static check reads: the package, tests, benchmarks, demos, CI and the project file.
CHECKED = ("fx2d_gpu", "tests", "benchmarks", "demos", ".ci", "pyproject.toml")

# The patterns are built from pieces, so that this file does not match them itself.
_WORD = "sha" + "red"
_SCENES = "fx2d" + "-scenes"
FORBIDDEN = {
    "the environment variable naming the folder": re.compile("FX2D_" + _WORD.upper()),
    "the folder as a quoted path part": re.compile(r"""(["'])\.?""" + _WORD + r"\1"),
    "the folder beside the checkout": re.compile(r"\.\.[/\\]\.?" + _WORD + r"\b"),
    # (a file with an extension, or a folder, in it: "a <word>/ folder" in prose is fine)
    "a path into the folder": re.compile(r"(?<![\w-])\.?" + _WORD + r"[/\\][\w.-]*[/\\.]\w"),
    "a copy of the folder in the checkout": re.compile(r"(?<![\w.])\." + _WORD + r"\b"),
    "the folder's scene files": re.compile(re.escape(_SCENES)),
    "a lookup of the folder": re.compile(r"\b" + _WORD + r"_(?:scenes_)?dir\b"),
}


def offending(line: str) -> list[str]:
    """The names of the FORBIDDEN patterns `line` matches."""
    return [what for what, pattern in FORBIDDEN.items() if pattern.search(line)]


def checked_files() -> list[Path]:
    """The repository's text files under CHECKED: those git tracks, and new ones it does not
    ignore (a file about to be committed is checked too); without git, every file there."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", *CHECKED],
            cwd=ROOT,
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
        paths = sorted({ROOT / name for name in os.fsdecode(listed).split("\0") if name})
    except (OSError, subprocess.SubprocessError):
        paths = sorted(
            p
            for entry in CHECKED
            for p in ([ROOT / entry] if (ROOT / entry).is_file() else (ROOT / entry).rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts
        )
    texts = []
    for path in paths:
        if not path.is_file():  # deleted in the work tree, not yet in the index
            continue
        data = path.read_bytes()
        try:
            if b"\0" not in data:
                data.decode("utf-8")
                texts.append(path)
        except UnicodeDecodeError:
            pass
    return texts


def test_the_patterns_catch_a_folder_lookup_and_leave_the_word_alone():
    word, scenes = _WORD, _SCENES
    caught = [
        f'root.parent / "{word}"',
        f"CHECKOUT / '{word}'",
        f"../{word}/API.md",
        f"bash ../{word}/gpu/wheels.sh",
        f"({word}/SCENE_FORMAT.md)",
        f"cp -r x .{word}/",
        f"{word}/{scenes}/truck.yml",
        f"{scenes}/",
        f'os.environ.get("FX2D_{word.upper()}")',
        f"def {word}_dir():",
        f"fx2d_scenes.{word}_scenes_dir()",
        f"..\\{word}\\x",
    ]
    for line in caught:
        assert offending(line), line
    for line in (
        f"which scene's state is in the {word} pool",
        f"{word} by every scene",
        f"a {word} negative group never pairs",
        f"# {word}, as given",
        f"the {word} Shape",
        f"un{word}/x",
        f"pre-{word}/x",
        f"# notes (a {word}/ folder) are not in the package",
        f'if "{word}/" in doc',
        f"scene.{word}_shapes",
    ):
        assert not offending(line), (line, offending(line))


def test_no_file_looks_for_a_folder_outside_the_repository():
    files = checked_files()
    assert ROOT / "fx2d_gpu" / "cli.py" in files and ROOT / "pyproject.toml" in files
    assert Path(__file__).resolve() in files  # this file too: its patterns are in pieces
    hits = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for what in offending(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {what}: {line.strip()}")
    assert not hits, "\n".join(["files that look outside the repository:", *hits])


# In a child process: an audit hook records every open, directory listing and stat (os.stat,
# os.lstat and os.access, wrapped to raise an audit event of their own) of a path outside
# the allowed folders, or with a folder of the forbidden name in it; then the code paths
# that read scene files run. Violations are printed as JSON on the last line.
_AUDITED = r'''
import json, os, site, sys, tempfile, threading

root = os.path.realpath(os.getcwd())
word = "sha" + "red"
allowed = {root, sys.prefix, sys.base_prefix, sys.exec_prefix, tempfile.gettempdir(),
           *site.getsitepackages(), site.getusersitepackages()}
system = ("/proc", "/sys", "/dev")  # the OS's own: CPU count, memory, /dev/null
allowed = sorted({os.path.realpath(folder) for folder in allowed})
violations = {}
local = threading.local()


def within(path, folders):
    """The part of `path` below the deepest of `folders` holding it, else None."""
    inside = [f for f in folders if path == f or path.startswith(f.rstrip(os.sep) + os.sep)]
    return path[len(max(inside, key=len)):] if inside else None


def check(event, path):
    if path is None or isinstance(path, int) or getattr(local, "busy", False):
        return
    local.busy = True  # realpath stats paths itself
    try:
        text = os.fsdecode(os.fspath(path))
        bad = False
        for seen in (os.path.abspath(text), os.path.realpath(text)):
            rest = within(seen, allowed + extra + list(system))
            # A stat of a folder above an allowed one (realpath walks them) reads nothing.
            above = event == "os.stat" and any(
                f.startswith(seen.rstrip(os.sep) + os.sep) for f in allowed + extra)
            named = rest is not None and word in {p.lstrip(".") for p in rest.split(os.sep)}
            bad = bad or named or (rest is None and not above)
        if bad:
            violations.setdefault(os.path.abspath(text), event)
    except Exception as exc:  # a path the check cannot read is itself a finding
        violations.setdefault(repr(path), f"{event}: {exc!r}")
    finally:
        local.busy = False


def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir", "os.stat") and args:
        check(event, args[0])


# Taichi's own folder (its version stamp) and its cache of compiled kernels, wherever they
# are kept; Taichi is imported before the hook, the project's code after it.
from taichi._lib import core  # noqa: E402

extra = [os.path.realpath(folder) for folder in (
    core.get_repo_dir(), core.CompileConfig().offline_cache_file_path,
    os.environ.get("TI_OFFLINE_CACHE_FILE_PATH") or core.get_repo_dir())]
sys.addaudithook(hook)


def audited(function):
    def wrapper(path, *args, **kwargs):
        sys.audit("os.stat", path)
        return function(path, *args, **kwargs)
    for group in (os.supports_fd, os.supports_dir_fd, os.supports_follow_symlinks,
                  os.supports_effective_ids):
        if function in group:
            group.add(wrapper)
    return wrapper


os.stat, os.lstat, os.access = audited(os.stat), audited(os.lstat), audited(os.access)

import fx2d_gpu as fx  # noqa: E402
from fx2d_gpu import examples  # noqa: E402

assert os.path.realpath(fx.__file__).startswith(root + os.sep), fx.__file__
for name in examples.names():
    scene = fx.load_scene(examples.path(name), arch="cpu")
    for _ in range(3):
        scene.step(1 / 60)

from benchmarks import fx2d_scenes  # noqa: E402

for name in fx2d_scenes.SCENES:
    fx2d_scenes.scene_path(name)
fx2d_scenes.SCENARIOS["truck"](fx2d_scenes.scene_path("truck"), arch="cpu", scale=0.005)

from fx2d_gpu.cli import main  # noqa: E402

assert main(["run", "--example", "truck", "--steps", "3", "--png", sys.argv[1], "--size",
             "64x48", "--arch", "cpu"]) == 0
main(["demo", "--list"])

# The test modules, whose module-level code (parametrize lists, scene folders) runs on import.
import importlib  # noqa: E402

for test in sorted(os.listdir(os.path.join(root, "tests"))):
    if test.startswith("test_") and test.endswith(".py"):
        importlib.import_module(f"tests.{test[:-3]}")

print(json.dumps(violations))
'''


def test_scene_code_reads_nothing_outside_the_repository(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["FX2D_TEST_ARCH"] = "cpu"  # tests/conftest.py, imported with the test modules
    png = tmp_path / "truck.png"
    run = subprocess.run(
        [sys.executable, "-c", _AUDITED, str(png)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert png.is_file()
    violations = json.loads(run.stdout.strip().splitlines()[-1])
    assert not violations, "read outside the repository:\n" + "\n".join(
        f"{event}: {path}" for path, event in sorted(violations.items())
    )


@pytest.mark.parametrize("name", ["truck", "stacked_boxes"])
def test_an_example_is_found_without_a_checkout_folder(name, in_tmp_path):
    """examples.path does not depend on the working folder."""
    from fx2d_gpu import examples

    path = examples.path(name)
    assert path.is_absolute() and path.is_file()
    assert path.parent == ROOT / "fx2d_gpu" / "examples"
