"""Example scenes that ship with fx2d_gpu: each a scene file and the driver that runs it.

As in Fx2D, where an example is a Scene.yml and the program (main.cpp) that drives it, each
example here is `<name>.yml`, a scene in Fx2D's YAML scene format with the bodies, joints
and numbers of the Fx2D example of the same name, and `<name>.py`, its driver: what the
program does in code (joints, motors, spawning bodies, the slingshot's shot):

    angry_boxes         a tower of crates, knocked over by a ball fired from a slingshot
    bucket_fill         balls raining into a bucket until it overflows
    chain_terrain       balls and crates dropped on hilly chain terrain roll along it
    joint_control_demo  a revolute and a prismatic PID motor through their control modes
    stacked_boxes       a pyramid of boxes and a heavy ball thrown at it
    truck               a two-part truck on motored wheels drives down a ramp to a crate

`load(name)` gives the scene with its driver set up; step it with the driver:

    >>> from fx2d_gpu import examples
    >>> scene, driver = examples.load("truck", arch="cpu")   # or: fx2d run --example truck
    >>> for _ in range(120):
    ...     driver.step(scene, 1 / 60)     # the driver's before_step, then scene.step

`fx2d run --example NAME` and `fx2d view --example NAME` run the same. `names()` lists the
examples, `path(name)` gives the scene file alone (fx2d_gpu.load_scene loads it without
the driver), `description(name)` the line that opens its header comment, and
`driver(name)` a new driver, with options (e.g. `driver("truck", wheel_speed=None)`: free
wheels, as Fx2D's own truck example).

The files are found with importlib.resources, so they load from an installed package as
well as from a source checkout.
"""

from __future__ import annotations

import importlib
import importlib.resources
from pathlib import Path
from typing import NamedTuple

from ._driver import ExampleDriver

__all__ = ["Example", "ExampleDriver", "description", "driver", "load", "names", "path"]

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
    return sorted(
        entry.name[: -len(_SUFFIX)]
        for entry in _folder().iterdir()
        if entry.is_file() and entry.name.endswith(_SUFFIX)
    )


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
        raise ValueError(
            f"name: no example scene named {name!r}; the examples are {', '.join(known)}"
        )
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


class Example(NamedTuple):
    """An example scene loaded with its driver (examples.load): `scene, driver = ...`.

    Attributes:
        scene: the fx2d_gpu.Scene, its driver's setup done (joints, motors).
        driver: its ExampleDriver; step the scene with driver.step(scene, dt).
    """

    scene: object
    driver: ExampleDriver


def driver(name: str, **options: object) -> ExampleDriver:
    """A new driver of the example `name`, not yet set up.

    Args:
        name: an example's name, one of `names()`.
        **options: the driver's own keywords (see its module, e.g.
            fx2d_gpu.examples.truck.Driver's wheel_speed).

    Returns:
        The example module's Driver(**options).

    Raises:
        TypeError: `name` is not a str, or an option the driver does not take.
        ValueError: there is no example of that name.
    """
    path(name)  # checks the name
    module = importlib.import_module(f"{__name__}.{name}")
    return module.Driver(**options)


def load(name: str, driver_options: dict | None = None, **scene_options: object) -> Example:
    """The example `name`: its scene file loaded and its driver set up on it.

    The driver is attached to the scene, so `fx2d_gpu.cli.simulate` and the viewer call its
    before_step before every step; in a loop of your own, step with driver.step(scene, dt).

    Args:
        name: an example's name, one of `names()`.
        driver_options: keywords for the driver (see `driver`); None: its defaults.
        **scene_options: keywords for fx2d_gpu.load_scene (n_worlds, arch, substeps,
            solver, ...).

    Returns:
        An Example (scene, driver).

    Raises:
        TypeError, ValueError: as `driver` and load_scene raise them.
    """
    from ..draw.viewer import attach_controller
    from ..io.scene_loader import load_scene

    example_driver = driver(name, **(driver_options or {}))
    scene = load_scene(path(name), **scene_options)
    example_driver.setup(scene)
    attach_controller(scene, example_driver)
    return Example(scene, example_driver)
