"""The stacked_boxes example's driver: nothing to do in code.

Fx2D's examples/stacked_boxes/main.cpp only loads the scene and runs it: the heavy ball's
throw is the file's `init_velocity` (-5, 0) m/s, which load_scene gives it.
"""

from __future__ import annotations

from ._driver import ExampleDriver


class Driver(ExampleDriver):
    """Does nothing: the scene file holds the whole example."""
