"""The documentation can't rot: every Python example in README.md and docs/*.md runs as
written (each page's examples in order, in one namespace, as a reader would paste them),
and `mkdocs build --strict` passes where the docs extra is installed."""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: A fenced Python block (```python ... ```), indented or not (inside a list item).
PYTHON_BLOCK = re.compile(r"^([ \t]*)```python[ \t]*\n(.*?)^\1```", re.S | re.M)


def python_blocks(text: str) -> list[str]:
    """The Python examples of a Markdown page, dedented, in page order."""
    blocks = []
    for indent, body in PYTHON_BLOCK.findall(text):
        lines = body.splitlines()
        blocks.append("\n".join(line[len(indent) :] for line in lines))
    return blocks


def test_python_blocks_are_found_indented_or_not():
    text = (
        "a\n```python\nx = 1\n```\n- item\n\n    ```python\n    y = 2\n    ```\n```bash\nls\n```\n"
    )
    assert python_blocks(text) == ["x = 1", "y = 2"]


def test_every_page_is_in_the_site_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = {p.name for p in PAGES if p.parent.name == "docs"}
    assert pages and all(f" {name}" in nav for name in pages), pages


#: The pages with Python examples: every page but the generated API reference.
EXAMPLE_PAGES = [page for page in PAGES if python_blocks(page.read_text())]


def test_every_guide_page_has_examples():
    assert {p.name for p in PAGES} - {p.name for p in EXAMPLE_PAGES} == {"api.md"}


#: The optional extras an example may import, by module: a page that imports one that is
#: not installed is skipped (the extra is missing, not the docs wrong).
OPTIONAL_MODULES = {
    "ray": "distributed",
    "gymnasium": "rl",
    "torch": "torch",
    "stable_baselines3": "sb3",
    "matplotlib": "bench",
    "pymunk": "bench",
    "pyb2d3": "bench",
}
IMPORT = re.compile(r"^\s*(?:import|from)\s+(\w+)", re.M)


def missing_extras(blocks: list[str]) -> list[str]:
    """'extra (module)' for each optional module the blocks import that is not installed."""
    imported = {name for block in blocks for name in IMPORT.findall(block)}
    return [
        f"{OPTIONAL_MODULES[name]} ({name})"
        for name in sorted(imported)
        if name in OPTIONAL_MODULES and importlib.util.find_spec(name) is None
    ]


def test_missing_extras_are_named_by_the_modules_a_page_imports():
    blocks = ["import numpy as np\nimport fx2d_gpu as fx", "    from no_such_module_x import a"]
    assert missing_extras(blocks) == []
    OPTIONAL_MODULES["no_such_module_x"] = "x"
    try:
        assert missing_extras(blocks) == ["x (no_such_module_x)"]
    finally:
        del OPTIONAL_MODULES["no_such_module_x"]


#: Pages whose examples belong to the slow tier (pytest -m slow), with their marks:
#: distributed.md starts a Ray cluster whose actors each start Taichi (~1-2 min, ~1 GB beside
#: the test process), marked `ray` too (.ci/run runs those in a process of their own).
SLOW_PAGES = {"distributed.md": [pytest.mark.slow, pytest.mark.ray]}


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, id=page.name, marks=SLOW_PAGES.get(page.name, []))
        for page in EXAMPLE_PAGES
    ],
)
def test_examples_run(page, arch, in_tmp_path):
    blocks = python_blocks(page.read_text())
    missing = missing_extras(blocks)
    if missing:
        pytest.skip(f"{page.name} imports what these extras install: {', '.join(missing)}")
    namespace = {"__name__": f"docs_{page.stem}"}
    for number, block in enumerate(blocks, 1):
        code = compile(
            block.replace('arch="auto"', f'arch="{arch}"'),
            f"{page.name} (example {number})",
            "exec",
        )
        exec(code, namespace)


@pytest.mark.skipif(
    shutil.which("mkdocs") is None
    and subprocess.run([sys.executable, "-c", "import mkdocs"]).returncode != 0,
    reason="the docs extra (mkdocs) is not installed",
)
def test_the_site_builds_without_warnings(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    assert "WARNING" not in out.stderr, out.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "index.html").exists()
