"""Example scene files that ship with fx2d_gpu, in Fx2D's YAML scene format.

Each `<name>.yml` in this package is a scene written for fx2d_gpu with the bodies, joints
and numbers of the Fx2D example of the same name, so that figures compared with Fx2D's C++
engine (benchmarks/fx2d_scenes.py) apply to it:

    angry_boxes         a tower of crates and a ball parked at a slingshot
    bucket_fill         a static bucket over a floor, for balls spawned while it runs
    chain_terrain       hilly chain terrain over a catch floor
    joint_control_demo  a revolute and a prismatic PID motor
    stacked_boxes       a pyramid of boxes and a heavy ball thrown at it
    truck               a two-part truck on wheels beside a ramp, and a heavy crate

`names()` lists them, `path(name)` gives a file to load, `description(name)` the line
that opens its header comment:

    >>> import fx2d_gpu as fx
    >>> from fx2d_gpu import examples
    >>> scene = fx.load_scene(examples.path("truck"))   # or: fx2d run --example truck

The files are found with importlib.resources, so they load from an installed package as
well as from a source checkout.
"""

from __future__ import annotations

import importlib.resources
from pathlib import Path

__all__ = ["description", "names", "path"]

_SUFFIX = ".yml"


def _folder():
    """The package's resource folder (an importlib.resources Traversable)."""
    return importlib.resources.files(__name__)


def names() -> list[str]:
    """The names of the example scenes, sorted.

    Returns:
        A new list of the example names (each file's name without `.yml`), in sorted
        order, e.g. ``["angry_boxes", ..., "truck"]``.
    """
    return sorted(entry.name[: -len(_SUFFIX)] for entry in _folder().iterdir()
                  if entry.is_file() and entry.name.endswith(_SUFFIX))


def path(name: str) -> Path:
    """The file of the example scene `name`, for fx2d_gpu.load_scene.

    Args:
        name: an example's name, one of `names()` (without `.yml`).

    Returns:
        The pathlib.Path of `<name>.yml` in this package, an existing file.

    Raises:
        TypeError: `name` is not a str.
        ValueError: there is no example of that name; the message lists the names.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str (an example's name), got {type(name).__name__}")
    known = names()
    if name not in known:
        raise ValueError(f"name: no example scene named {name!r}; the examples are "
                         f"{', '.join(known)}")
    # Installed as plain files (wheel or editable install), so the Traversable is a path.
    return Path(str(_folder() / f"{name}{_SUFFIX}"))


def description(name: str) -> str:
    """A one-line description of the example scene `name`.

    Args:
        name: an example's name, one of `names()`.

    Returns:
        The summary that opens the file's header comment (its first line, after
        ``# <name>:``), e.g. "a pyramid of six boxes and a heavy ball thrown at it."

    Raises:
        TypeError: `name` is not a str.
        ValueError: there is no example of that name.
    """
    first_line = path(name).read_text(encoding="utf-8").splitlines()[0]
    return first_line.removeprefix("#").strip().removeprefix(f"{name}:").strip()
